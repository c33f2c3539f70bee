// SPDX-License-Identifier: MIT
/*
 * README claims about softhca's librdmacm that no other test backs (issue
 * 16: every claim names a test that fails when it breaks):
 *
 *  - rdma_cm ports are the host's TCP/UDP ports: a port another program
 *    holds cannot be bound by an id (EADDRINUSE), and the other way round;
 *  - a listener bound to 127.0.0.1 takes connections to 127.0.0.1 only
 *    (one to 127.0.0.2 finds nobody: REJECTED, status 8);
 *  - IPv6 multicast groups are accepted (the kernel refuses them on RoCE
 *    v2): a join on softhca_lo, and a datagram through the group whose
 *    GRH is the IPv6 header naming the group;
 *  - a host that does not answer shows up at rdma_connect as UNREACHABLE
 *    with status -ETIMEDOUT (a namespace of the test's own, root only);
 *  - a REQ that finds nobody listening goes again five times before the
 *    id reports REJECTED (8): six SYNs to the port, counted on lo with a
 *    packet socket (a namespace of the test's own, root only);
 *  - rpoll and rselect are never restarted after a signal handler, even
 *    one installed with SA_RESTART, as poll(2) and select(2);
 *  - ECE: what rdma_set_local_ece sets before there is a QP travels in
 *    the REQ and the REP (rdma_get_remote_ece on the other side).
 */
#include <arpa/inet.h>
#include <fcntl.h>
#include <net/if.h>
#include <netinet/ip.h>
#include <netinet/tcp.h>
#include <linux/if_packet.h>
#include <linux/if_ether.h>
#include <poll.h>
#include <sched.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <unistd.h>

#include <rdma/rsocket.h>

#include "cm_common.h"
#include "kick.h"
#include "netenv.h"

#define GRH 40

/* A port of 127.0.0.1 that a plain socket of this type holds: its fd. */
static int plain_socket(int type, uint16_t *port)
{
	struct sockaddr_in sin;
	socklen_t len = sizeof(sin);
	int fd = socket(AF_INET, type, 0);

	ASSERT_GE(fd, 0);
	make_addr(&sin, loopback_ip(), 0);
	ASSERT_EQ(bind(fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
	if (type == SOCK_STREAM)
		ASSERT_EQ(listen(fd, 4), 0);
	ASSERT_EQ(getsockname(fd, (struct sockaddr *)&sin, &len), 0);
	*port = ntohs(sin.sin_port);
	return fd;
}

static void bind_in_use(enum rdma_port_space ps, uint16_t port)
{
	struct rdma_cm_id *id;
	struct sockaddr_in sin;

	ASSERT_EQ(rdma_create_id(NULL, &id, NULL, ps), 0);
	make_addr(&sin, loopback_ip(), port);
	errno = 0;
	ASSERT_EQ(rdma_bind_addr(id, (struct sockaddr *)&sin), -1);
	ASSERT_EQ(errno, EADDRINUSE);
	ASSERT_EQ(rdma_destroy_id(id), 0);
}

TEST(cm_ports_are_host_ports)
{
	struct rdma_cm_id *id;
	struct sockaddr_in sin;
	uint16_t port;
	int fd;

	/* a TCP listener of another program: RC and UC ids cannot have it */
	fd = plain_socket(SOCK_STREAM, &port);
	bind_in_use(RDMA_PS_TCP, port);
	bind_in_use(RDMA_PS_IB, port);
	close(fd);
	/* a UDP port: UD ids cannot */
	fd = plain_socket(SOCK_DGRAM, &port);
	bind_in_use(RDMA_PS_UDP, port);
	close(fd);

	/* an rdma_cm listener's port: another program's TCP bind fails */
	ASSERT_EQ(rdma_create_id(NULL, &id, NULL, RDMA_PS_TCP), 0);
	make_addr(&sin, loopback_ip(), 0);
	ASSERT_EQ(rdma_bind_addr(id, (struct sockaddr *)&sin), 0);
	ASSERT_EQ(rdma_listen(id, 1), 0);
	sin.sin_port = rdma_get_src_port(id);
	fd = socket(AF_INET, SOCK_STREAM, 0);
	ASSERT_GE(fd, 0);
	errno = 0;
	ASSERT_EQ(bind(fd, (struct sockaddr *)&sin, sizeof(sin)), -1);
	ASSERT_EQ(errno, EADDRINUSE);
	close(fd);
	ASSERT_EQ(rdma_destroy_id(id), 0);
}

/* ------------------------------------------------------------------ */
/* A listener on 127.0.0.1 takes 127.0.0.1 only                        */

/*
 * Connect to ip:port: the answer must be REJECTED.  0 when nobody listens
 * there (status 8), 1 when a rejecter did (status 28 with its private
 * data: a listen backlog's refusal, also 28, has none).
 */
static int rejected_by(struct rdma_event_channel *ch, const char *ip,
		       uint16_t port)
{
	struct rdma_cm_event *ev;
	struct rdma_cm_id *id;
	int who = -1;

	ASSERT_EQ(rdma_create_id(ch, &id, NULL, RDMA_PS_TCP), 0);
	resolve_to(ch, id, ip, port);
	make_qp(id, IBV_QPT_RC);
	ASSERT_EQ(rdma_connect(id, NULL), 0);
	ev = expect_event(ch, RDMA_CM_EVENT_REJECTED);
	if (ev->status == 8)
		who = 0;
	else if (ev->status == 28 && ev->param.conn.private_data_len &&
		 !memcmp(ev->param.conn.private_data, "lsn", 4))
		who = 1;
	else
		harness_fail(__FILE__, __LINE__,
			     "%s:%u: REJECTED, status %d, not by a listener",
			     ip, port, ev->status);
	ASSERT_EQ(rdma_ack_cm_event(ev), 0);
	rdma_destroy_qp(id);
	ASSERT_EQ(rdma_destroy_id(id), 0);
	return who;
}

/* A listener on ip (the argument) that rejects as many requests as it is
 * told, with private data "lsn". */
static void rejecter(struct peer *p, void *arg)
{
	const char *ip = arg;
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_event *ev;
	struct rdma_cm_id *lid, *id;
	uint32_t n;

	peer_send(p, listen_on(ch, &lid, ip, RDMA_PS_TCP));
	for (n = peer_recv(p); n; n--) {
		ev = expect_event(ch, RDMA_CM_EVENT_CONNECT_REQUEST);
		id = ev->id;
		ASSERT_EQ(rdma_ack_cm_event(ev), 0);
		ASSERT_EQ(rdma_reject(id, "lsn", 4), 0);
		ASSERT_EQ(rdma_destroy_id(id), 0);
	}
	ASSERT_EQ(rdma_destroy_id(lid), 0);
	rdma_destroy_event_channel(ch);
}

TEST(loopback_listener_takes_its_address_only)
{
	struct rdma_event_channel *ch;
	struct peer lo;
	uint16_t port;

	/* the peer first: a process forks before its first CM call */
	peer_start(&lo, rejecter, (void *)"127.0.0.1");
	port = (uint16_t)peer_recv(&lo);
	peer_send(&lo, 1);
	ch = rdma_create_event_channel();
	ASSERT_NOT_NULL(ch);
	/* 127.0.0.2 finds nobody; 127.0.0.1 finds the listener (the
	 * positive marker, after the negative) */
	ASSERT_EQ(rejected_by(ch, "127.0.0.2", port), 0);
	ASSERT_EQ(rejected_by(ch, "127.0.0.1", port), 1);
	peer_wait(&lo);
	rdma_destroy_event_channel(ch);
}

/* ------------------------------------------------------------------ */
/* IPv6 multicast                                                      */

/* A UD id on softhca_lo (source ::1) joined to group: its join event. */
static struct rdma_cm_event *join6(struct rdma_event_channel *ch,
				   struct rdma_cm_id **id,
				   struct sockaddr_in6 *group, bool sendonly)
{
	struct sockaddr_in6 src = { .sin6_family = AF_INET6,
				    .sin6_addr = IN6ADDR_LOOPBACK_INIT };
	struct rdma_cm_join_mc_attr_ex mc = { 0 };
	struct rdma_cm_event *ev;

	ASSERT_EQ(rdma_create_id(ch, id, NULL, RDMA_PS_UDP), 0);
	ASSERT_EQ(rdma_resolve_addr(*id, (struct sockaddr *)&src,
				    (struct sockaddr *)group, 2000), 0);
	expect_event_ack(ch, RDMA_CM_EVENT_ADDR_RESOLVED);
	ASSERT_NOT_NULL((*id)->verbs);
	ASSERT_STR_EQ(ibv_get_device_name((*id)->verbs->device),
		      "softhca_lo");
	make_qp(*id, IBV_QPT_UD);
	mc.comp_mask = RDMA_CM_JOIN_MC_ATTR_ADDRESS |
		       RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS;
	mc.addr = (struct sockaddr *)group;
	mc.join_flags = sendonly ? RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER :
				   RDMA_MC_JOIN_FLAG_FULLMEMBER;
	ASSERT_EQ(rdma_join_multicast_ex(*id, &mc, NULL), 0);
	ev = expect_event(ch, RDMA_CM_EVENT_MULTICAST_JOIN);
	ASSERT_EQ(ev->status, 0);
	ASSERT_EQ(ev->param.ud.qp_num, 0xffffff);
	ASSERT_EQ(ev->param.ud.ah_attr.is_global, 1);
	ASSERT(!memcmp(&ev->param.ud.ah_attr.grh.dgid, &group->sin6_addr,
		       16));
	return ev;
}

TEST(ipv6_multicast_group)
{
	struct sockaddr_in6 group = { .sin6_family = AF_INET6 };
	struct rdma_event_channel *rch, *sch;
	struct rdma_cm_id *rid, *sid;
	struct rdma_cm_event *ev;
	uint8_t buf[GRH + 64], msg[64];
	struct ibv_mr *rmr, *smr;
	struct ibv_ah *ah;
	struct ibv_wc wc;
	unsigned int i;

	netenv_need(NETENV_IP6_LO);
	ASSERT_EQ(inet_pton(AF_INET6, "ff0e::5:6:7", &group.sin6_addr), 1);
	rch = rdma_create_event_channel();
	sch = rdma_create_event_channel();
	ASSERT_NOT_NULL(rch);
	ASSERT_NOT_NULL(sch);

	/* the receiver: attached when its join event is retrieved */
	memset(buf, 0xa5, sizeof(buf));
	ev = join6(rch, &rid, &group, false);
	ASSERT_EQ(rdma_ack_cm_event(ev), 0);
	post_recv_buf(rid, buf, sizeof(buf), &rmr);

	/* the sender: a send-only member, to the group's QPN */
	ev = join6(sch, &sid, &group, true);
	ah = ibv_create_ah(sid->pd, &ev->param.ud.ah_attr);
	ASSERT_NOT_NULL(ah);
	for (i = 0; i < sizeof(msg); i++)
		msg[i] = (uint8_t)(0x40 + i);
	smr = rdma_reg_msgs(sid, msg, sizeof(msg));
	ASSERT_NOT_NULL(smr);
	ASSERT_EQ(rdma_post_ud_send(sid, NULL, msg, sizeof(msg), smr,
				    IBV_SEND_SIGNALED, ah,
				    ev->param.ud.qp_num), 0);
	ASSERT_EQ(rdma_get_send_comp(sid, &wc), 1);
	ASSERT_EQ(wc.status, IBV_WC_SUCCESS);
	ASSERT_EQ(rdma_ack_cm_event(ev), 0);

	ASSERT_EQ(rdma_get_recv_comp(rid, &wc), 1);
	ASSERT_EQ(wc.status, IBV_WC_SUCCESS);
	ASSERT_EQ(wc.byte_len, GRH + sizeof(msg));
	ASSERT_EQ(wc.sl, 1);				/* IPv6 */
	ASSERT_EQ(buf[0] >> 4, 6);
	ASSERT(!memcmp(buf + 8, &in6addr_loopback, 16));	/* source */
	ASSERT(!memcmp(buf + 24, &group.sin6_addr, 16));	/* the group */
	ASSERT(!memcmp(buf + GRH, msg, sizeof(msg)));

	ASSERT_EQ(rdma_leave_multicast(rid, (struct sockaddr *)&group), 0);
	ASSERT_EQ(rdma_leave_multicast(sid, (struct sockaddr *)&group), 0);
	ASSERT_EQ(ibv_destroy_ah(ah), 0);
	ASSERT_EQ(rdma_dereg_mr(smr), 0);
	ASSERT_EQ(rdma_dereg_mr(rmr), 0);
	rdma_destroy_qp(rid);
	rdma_destroy_qp(sid);
	ASSERT_EQ(rdma_destroy_id(rid), 0);
	ASSERT_EQ(rdma_destroy_id(sid), 0);
	rdma_destroy_event_channel(rch);
	rdma_destroy_event_channel(sch);
}

/*
 * A private network namespace with lo up, as root; skips otherwise.  Call
 * before any CM call (this process has no thread yet).
 */
static void private_lo(void)
{
	if (geteuid() != 0)
		SKIP("needs root: a network namespace of its own");
	ASSERT_EQ(unshare(CLONE_NEWNET), 0);
	if (system("ip link set lo up"))
		harness_fail(__FILE__, __LINE__, "cannot bring lo up");
}

/* ------------------------------------------------------------------ */
/* A host that does not answer                                         */

/*
 * In a network namespace of its own: a veth pair whose one end has
 * 10.7.0.1/24 and whose other end has no address, so that 10.7.0.99 never
 * answers ARP.  tcp_syn_retries 1 (this namespace's) makes TCP give up
 * after a few seconds: the connect's ETIMEDOUT is the id's UNREACHABLE.
 */
TEST(silent_host_is_unreachable)
{
	struct rdma_event_channel *ch;
	struct rdma_cm_event *ev;
	struct rdma_cm_id *id;
	int fd;

	private_lo();
	if (system("ip link add shcaclm0 type veth peer name shcaclm1 && "
		   "ip addr add 10.7.0.1/24 dev shcaclm0 && "
		   "ip link set shcaclm0 up && ip link set shcaclm1 up"))
		harness_fail(__FILE__, __LINE__,
			     "cannot make a veth pair in a new namespace");
	fd = open("/proc/sys/net/ipv4/tcp_syn_retries", O_WRONLY);
	ASSERT_GE(fd, 0);
	ASSERT_EQ(write(fd, "1\n", 2), 2);
	close(fd);

	ch = rdma_create_event_channel();
	ASSERT_NOT_NULL(ch);
	ASSERT_EQ(rdma_create_id(ch, &id, NULL, RDMA_PS_TCP), 0);
	/* resolution sends nothing: it succeeds */
	resolve_to(ch, id, "10.7.0.99", 7471);
	ASSERT_STR_EQ(ibv_get_device_name(id->verbs->device),
		      "softhca_shcaclm0");
	make_qp(id, IBV_QPT_RC);
	ASSERT_EQ(rdma_connect(id, NULL), 0);
	ev = expect_event(ch, RDMA_CM_EVENT_UNREACHABLE);
	ASSERT_EQ(ev->status, -ETIMEDOUT);
	ASSERT_EQ(rdma_ack_cm_event(ev), 0);
	rdma_destroy_qp(id);
	ASSERT_EQ(rdma_destroy_id(id), 0);
	rdma_destroy_event_channel(ch);
}

/* ------------------------------------------------------------------ */
/* A REQ refused goes again                                            */

TEST(refused_req_goes_again_five_times)
{
	struct sockaddr_ll ll = { .sll_family = AF_PACKET };
	struct rdma_event_channel *ch;
	struct rdma_cm_event *ev;
	struct rdma_cm_id *id;
	uint8_t pkt[256];
	const uint16_t port = 7472;
	int pfd, syns = 0, rsts = 0;

	private_lo();
	/* every IPv4 packet lo carries in this namespace */
	pfd = socket(AF_PACKET, SOCK_DGRAM | SOCK_NONBLOCK, htons(ETH_P_IP));
	ASSERT_GE(pfd, 0);
	ll.sll_protocol = htons(ETH_P_IP);
	ll.sll_ifindex = (int)if_nametoindex("lo");
	ASSERT_EQ(bind(pfd, (struct sockaddr *)&ll, sizeof(ll)), 0);

	ch = rdma_create_event_channel();
	ASSERT_NOT_NULL(ch);
	ASSERT_EQ(rdma_create_id(ch, &id, NULL, RDMA_PS_TCP), 0);
	resolve_to(ch, id, loopback_ip(), port);
	make_qp(id, IBV_QPT_RC);
	ASSERT_EQ(rdma_connect(id, NULL), 0);
	ev = expect_event(ch, RDMA_CM_EVENT_REJECTED);
	ASSERT_EQ(ev->status, 8);
	ASSERT_EQ(rdma_ack_cm_event(ev), 0);

	/* lo delivers at once: every SYN and RST is queued by now */
	for (;;) {
		struct sockaddr_ll from;
		socklen_t flen = sizeof(from);
		const struct iphdr *ip = (const void *)pkt;
		const struct tcphdr *tcp;
		ssize_t n = recvfrom(pfd, pkt, sizeof(pkt), 0,
				     (struct sockaddr *)&from, &flen);

		if (n < 0) {
			ASSERT_EQ(errno, EAGAIN);
			break;
		}
		/* an ETH_P_IP socket sees what lo receives (the sent copy
		 * goes to ETH_P_ALL sockets only) */
		if (from.sll_pkttype != PACKET_HOST ||
		    n < (ssize_t)sizeof(*ip) || ip->protocol != IPPROTO_TCP ||
		    n < (ssize_t)(ip->ihl * 4u + sizeof(*tcp)))
			continue;
		tcp = (const void *)(pkt + ip->ihl * 4u);
		if (ntohs(tcp->dest) == port && tcp->syn && !tcp->ack)
			syns++;
		if (ntohs(tcp->source) == port && tcp->rst)
			rsts++;
	}
	/* the first REQ and five more, each refused */
	ASSERT_EQ(syns, 6);
	ASSERT_EQ(rsts, 6);
	close(pfd);
	rdma_destroy_qp(id);
	ASSERT_EQ(rdma_destroy_id(id), 0);
	rdma_destroy_event_channel(ch);
}

/* ------------------------------------------------------------------ */
/* rpoll and rselect: never restarted                                  */

static int wake_pipe[2];

/* Empty the pipe (the kicker may have written once the call returned). */
static void drain(void)
{
	char c;

	while (read(wake_pipe[0], &c, 1) == 1)
		;
}

/* What a restarted call would see: the pipe readable (the kicker's
 * action after many signals, in case the call slept through them). */
static void wake(void *arg)
{
	(void)arg;
	ASSERT_EQ(write(wake_pipe[1], "x", 1), 1);
}

TEST(rpoll_rselect_not_restarted)
{
	struct pollfd pfd[2];
	struct sockaddr_in sin;
	struct kicker k;
	fd_set rd;
	int lfd, r, err;

	lfd = rsocket(AF_INET, SOCK_STREAM, 0);
	ASSERT_GE(lfd, 0);
	make_addr(&sin, loopback_ip(), 0);
	ASSERT_EQ(rbind(lfd, (struct sockaddr *)&sin, sizeof(sin)), 0);
	ASSERT_EQ(rlisten(lfd, 1), 0);
	ASSERT_EQ(pipe2(wake_pipe, O_NONBLOCK), 0);

	/* a handler with SA_RESTART: poll(2) ends with EINTR all the same */
	kick_install(SA_RESTART);
	pfd[0].fd = lfd;
	pfd[0].events = POLLIN;
	pfd[1].fd = wake_pipe[0];
	pfd[1].events = POLLIN;
	kick_start(&k, 50, wake, NULL);
	r = rpoll(pfd, 2, -1);
	err = errno;
	kick_stop(&k);
	ASSERT_EQ(r, -1);
	ASSERT_EQ(err, EINTR);
	ASSERT_GT(kick_hits, 0);
	drain();

	/* rselect, likewise */
	kick_install(SA_RESTART);
	FD_ZERO(&rd);
	FD_SET(lfd, &rd);
	FD_SET(wake_pipe[0], &rd);
	kick_start(&k, 50, wake, NULL);
	r = rselect((lfd > wake_pipe[0] ? lfd : wake_pipe[0]) + 1, &rd, NULL,
		    NULL, NULL);
	err = errno;
	kick_stop(&k);
	ASSERT_EQ(r, -1);
	ASSERT_EQ(err, EINTR);
	ASSERT_GT(kick_hits, 0);

	ASSERT_EQ(rclose(lfd), 0);
	close(wake_pipe[0]);
	close(wake_pipe[1]);
}

/* ------------------------------------------------------------------ */
/* ECE in the REQ and the REP                                          */

/* The application's own QP on id's device (rdma_create_qp would take the
 * QP's ECE, none here, over what rdma_set_local_ece set: rdma-core's way) */
struct own_qp {
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
};

static void own_qp_make(struct own_qp *o, struct rdma_cm_id *id)
{
	struct ibv_qp_init_attr init = {
		.cap = { .max_send_wr = 1, .max_recv_wr = 1,
			 .max_send_sge = 1, .max_recv_sge = 1 },
		.qp_type = IBV_QPT_RC,
	};

	o->pd = ibv_alloc_pd(id->verbs);
	ASSERT_NOT_NULL(o->pd);
	o->cq = ibv_create_cq(id->verbs, 4, NULL, NULL, 0);
	ASSERT_NOT_NULL(o->cq);
	init.send_cq = o->cq;
	init.recv_cq = o->cq;
	o->qp = ibv_create_qp(o->pd, &init);
	ASSERT_NOT_NULL(o->qp);
}

static void own_qp_free(struct own_qp *o)
{
	ASSERT_EQ(ibv_destroy_qp(o->qp), 0);
	ASSERT_EQ(ibv_destroy_cq(o->cq), 0);
	ASSERT_EQ(ibv_dealloc_pd(o->pd), 0);
}

static void ece_server(struct peer *p, void *arg)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_conn_param param = { 0 };
	struct ibv_ece ece;
	struct rdma_cm_event *ev;
	struct rdma_cm_id *lid, *id;
	struct own_qp o;

	(void)arg;
	peer_send(p, listen_on(ch, &lid, loopback_ip(), RDMA_PS_TCP));
	ev = expect_event(ch, RDMA_CM_EVENT_CONNECT_REQUEST);
	id = ev->id;
	ASSERT_EQ(rdma_ack_cm_event(ev), 0);
	/* the requester's, from its REQ */
	memset(&ece, 0, sizeof(ece));
	ASSERT_EQ(rdma_get_remote_ece(id, &ece), 0);
	ASSERT_EQ(ece.vendor_id, 0x15b3);
	ASSERT_EQ(ece.options, 0x1234);
	ece.options = 0x5678;
	ASSERT_EQ(rdma_set_local_ece(id, &ece), 0);
	own_qp_make(&o, id);
	param.qp_num = o.qp->qp_num;
	param.responder_resources = 1;
	param.initiator_depth = 1;
	ASSERT_EQ(rdma_accept(id, &param), 0);
	ASSERT_EQ(peer_recv(p), 1);		/* the requester is done */
	ASSERT_EQ(rdma_destroy_id(id), 0);
	own_qp_free(&o);
	ASSERT_EQ(rdma_destroy_id(lid), 0);
	rdma_destroy_event_channel(ch);
}

TEST(ece_travels_in_req_and_rep)
{
	struct ibv_ece ece = { .vendor_id = 0x15b3, .options = 0x1234 };
	struct rdma_conn_param param = { 0 };
	struct rdma_event_channel *ch;
	struct rdma_cm_event *ev;
	struct rdma_cm_id *id;
	struct own_qp o;
	struct peer p;
	uint16_t port;

	peer_start(&p, ece_server, NULL);
	port = (uint16_t)peer_recv(&p);
	ch = rdma_create_event_channel();
	ASSERT_NOT_NULL(ch);
	ASSERT_EQ(rdma_create_id(ch, &id, NULL, RDMA_PS_TCP), 0);
	resolve_to(ch, id, loopback_ip(), port);
	ASSERT_EQ(rdma_set_local_ece(id, &ece), 0);
	own_qp_make(&o, id);
	param.qp_num = o.qp->qp_num;
	param.responder_resources = 1;
	param.initiator_depth = 1;
	ASSERT_EQ(rdma_connect(id, &param), 0);
	ev = expect_event(ch, RDMA_CM_EVENT_CONNECT_RESPONSE);
	ASSERT_EQ(rdma_ack_cm_event(ev), 0);
	/* the responder's, from its REP */
	memset(&ece, 0, sizeof(ece));
	ASSERT_EQ(rdma_get_remote_ece(id, &ece), 0);
	ASSERT_EQ(ece.vendor_id, 0x15b3);
	ASSERT_EQ(ece.options, 0x5678);
	peer_send(&p, 1);
	ASSERT_EQ(rdma_destroy_id(id), 0);
	peer_wait(&p);
	own_qp_free(&o);
	rdma_destroy_event_channel(ch);
}
