// SPDX-License-Identifier: MIT
/*
 * RC connections between two processes: every event of a connection's
 * life and its parameters, private data at and over the IB CM limits,
 * rejection, no listener, a peer that dies, synchronous ids, a QP the
 * application owns (rdma_init_qp_attr + rdma_establish), rdma_notify,
 * the listen backlog, and the calls made in the wrong state.
 */
#include <arpa/inet.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cm_common.h"
#include "netenv.h"

static void fill(uint8_t *buf, size_t len, uint8_t seed)
{
	size_t i;

	for (i = 0; i < len; i++)
		buf[i] = (uint8_t)(seed + i);
}

static bool filled(const uint8_t *buf, size_t len, uint8_t seed)
{
	size_t i;

	for (i = 0; i < len; i++)
		if (buf[i] != (uint8_t)(seed + i))
			return false;
	return true;
}

static bool zeros(const uint8_t *buf, size_t len)
{
	while (len--)
		if (*buf++)
			return false;
	return true;
}

static enum ibv_qp_state qp_state(struct ibv_qp *qp)
{
	struct ibv_qp_attr attr;
	struct ibv_qp_init_attr init;

	ASSERT_EQ(ibv_query_qp(qp, &attr, IBV_QP_STATE, &init), 0);
	return attr.qp_state;
}

/* ------------------------------------------------------------------ */
/* A whole connection                                                  */

struct qp_facts {
	uint32_t sq_psn, rq_psn, max_rd_atomic, max_dest_rd_atomic;
};

static void query_facts(struct ibv_qp *qp, struct qp_facts *f)
{
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr init;

	ASSERT_EQ(ibv_query_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN |
			       IBV_QP_RQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC |
			       IBV_QP_MAX_DEST_RD_ATOMIC, &init), 0);
	ASSERT_EQ(a.qp_state, IBV_QPS_RTS);
	f->sq_psn = a.sq_psn;
	f->rq_psn = a.rq_psn;
	f->max_rd_atomic = a.max_rd_atomic;
	f->max_dest_rd_atomic = a.max_dest_rd_atomic;
}

static void full_server(struct peer *p, void *arg)
{
	const char *ip = arg;
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_conn_param param = { 0 };
	struct rdma_cm_id *lid, *id;
	struct rdma_cm_event *ev;
	struct qp_facts f;
	char buf[16] = "", pong[16] = "pong";
	struct ibv_mr *mr;
	uint32_t client_qpn;
	uint8_t pdata[16];

	peer_send(p, listen_on(ch, &lid, ip, RDMA_PS_TCP));
	client_qpn = peer_recv(p);
	ev = expect_event(ch, RDMA_CM_EVENT_CONNECT_REQUEST);
	ASSERT(ev->listen_id == lid);
	id = ev->id;
	ASSERT(id != lid);
	ASSERT_EQ(ev->status, 0);
	ASSERT_EQ(ev->param.conn.private_data_len, 56);
	ASSERT(!memcmp(ev->param.conn.private_data, "hello", 6));
	ASSERT(zeros((const uint8_t *)ev->param.conn.private_data + 6, 50));
	/* what the requester offered, seen from here */
	ASSERT_EQ(ev->param.conn.responder_resources, 3);
	ASSERT_EQ(ev->param.conn.initiator_depth, 2);
	ASSERT_EQ(ev->param.conn.retry_count, 5);
	ASSERT_EQ(ev->param.conn.rnr_retry_count, 6);
	ASSERT_EQ(ev->param.conn.qp_num, client_qpn);
	/* the request's id has the device of the address it came to; a
	 * listener on a loopback address has none (the kernel's rdma_cm) */
	ASSERT_NOT_NULL(id->verbs);
	if (!strcmp(ip, loopback_ip())) {
		ASSERT_NULL(lid->verbs);
		ASSERT_STR_EQ(ibv_get_device_name(id->verbs->device),
			      "softhca_lo");
	} else {
		ASSERT(id->verbs == lid->verbs);
	}
	ASSERT_NOT_NULL(id->pd);
	ASSERT_EQ(id->port_num, 1);
	ASSERT_EQ(id->ps, RDMA_PS_TCP);
	ASSERT_EQ(id->qp_type, IBV_QPT_RC);
	ASSERT(id->channel == ch);
	ASSERT_EQ(rdma_get_src_port(id), rdma_get_src_port(lid));
	ASSERT_EQ(ntohs(rdma_get_dst_port(id)), peer_recv(p));
	ASSERT_EQ(id->route.num_paths, 1);
	ASSERT_EQ(rdma_ack_cm_event(ev), 0);

	make_qp(id, IBV_QPT_RC);
	post_recv_buf(id, buf, sizeof(buf), &mr);
	fill(pdata, sizeof(pdata), 0x40);
	param.private_data = pdata;
	param.private_data_len = sizeof(pdata);
	param.responder_resources = RDMA_MAX_RESP_RES;
	param.initiator_depth = RDMA_MAX_INIT_DEPTH;
	param.rnr_retry_count = 7;
	ASSERT_EQ(rdma_accept(id, &param), 0);
	peer_send(p, id->qp->qp_num);
	ev = expect_event(ch, RDMA_CM_EVENT_ESTABLISHED);
	ASSERT(ev->id == id);
	ASSERT_EQ(ev->param.conn.private_data_len, 0);
	ASSERT_EQ(rdma_ack_cm_event(ev), 0);

	recv_done(id, mr);
	ASSERT_STR_EQ(buf, "ping");
	send_buf(id, pong, sizeof(pong));
	query_facts(id->qp, &f);
	peer_send(p, f.sq_psn);
	peer_send(p, f.rq_psn);
	peer_send(p, f.max_rd_atomic);
	peer_send(p, f.max_dest_rd_atomic);

	expect_event_ack(ch, RDMA_CM_EVENT_DISCONNECTED);
	ASSERT_EQ(rdma_disconnect(id), 0);	/* the DREP */
	ASSERT_EQ(qp_state(id->qp), IBV_QPS_ERR);
	expect_event_ack(ch, RDMA_CM_EVENT_TIMEWAIT_EXIT);
	rdma_destroy_qp(id);
	ASSERT_EQ(rdma_destroy_id(id), 0);
	ASSERT_EQ(rdma_destroy_id(lid), 0);
	rdma_destroy_event_channel(ch);
}

static void full_connection(const char *ip)
{
	struct rdma_event_channel *ch;
	struct rdma_conn_param param = { 0 };
	struct rdma_cm_event *ev;
	struct rdma_cm_id *id;
	struct qp_facts mine, theirs;
	char buf[16] = "", ping[16] = "ping";
	struct ibv_mr *mr;
	struct peer p;
	uint16_t port;

	peer_start(&p, full_server, (void *)ip);
	port = (uint16_t)peer_recv(&p);
	ch = rdma_create_event_channel();
	ASSERT_EQ(rdma_create_id(ch, &id, NULL, RDMA_PS_TCP), 0);
	resolve_to(ch, id, ip, port);
	make_qp(id, IBV_QPT_RC);
	ASSERT_EQ(qp_state(id->qp), IBV_QPS_INIT);
	post_recv_buf(id, buf, sizeof(buf), &mr);
	peer_send(&p, id->qp->qp_num);
	peer_send(&p, ntohs(rdma_get_src_port(id)));

	param.private_data = "hello";
	param.private_data_len = 6;
	param.responder_resources = 2;
	param.initiator_depth = 3;
	param.retry_count = 5;
	param.rnr_retry_count = 6;
	ASSERT_EQ(rdma_connect(id, &param), 0);
	ev = expect_event(ch, RDMA_CM_EVENT_ESTABLISHED);
	ASSERT(ev->id == id);
	/* the REP's private data: its whole field, as the IB CM gives it */
	ASSERT_EQ(ev->param.conn.private_data_len, 196);
	ASSERT(filled(ev->param.conn.private_data, 16, 0x40));
	ASSERT_EQ(ev->param.conn.responder_resources, 2);
	ASSERT_EQ(ev->param.conn.initiator_depth, 3);
	ASSERT_EQ(ev->param.conn.rnr_retry_count, 7);
	ASSERT_EQ(ev->param.conn.qp_num, peer_recv(&p));
	ASSERT_EQ(rdma_ack_cm_event(ev), 0);
	ASSERT_EQ(qp_state(id->qp), IBV_QPS_RTS);

	send_buf(id, ping, sizeof(ping));
	recv_done(id, mr);
	ASSERT_STR_EQ(buf, "pong");
	/* PSNs cross, and the responder resources / initiator depth are
	 * what both sides agreed on */
	query_facts(id->qp, &mine);
	theirs.sq_psn = peer_recv(&p);
	theirs.rq_psn = peer_recv(&p);
	theirs.max_rd_atomic = peer_recv(&p);
	theirs.max_dest_rd_atomic = peer_recv(&p);
	ASSERT_EQ(mine.sq_psn, theirs.rq_psn);
	ASSERT_EQ(mine.rq_psn, theirs.sq_psn);
	ASSERT_EQ(mine.max_rd_atomic, 3);
	ASSERT_EQ(theirs.max_dest_rd_atomic, 3);
	ASSERT_EQ(mine.max_dest_rd_atomic, 2);
	ASSERT_EQ(theirs.max_rd_atomic, 2);

	ASSERT_EQ(rdma_disconnect(id), 0);
	ASSERT_EQ(qp_state(id->qp), IBV_QPS_ERR);
	expect_event_ack(ch, RDMA_CM_EVENT_DISCONNECTED);
	expect_event_ack(ch, RDMA_CM_EVENT_TIMEWAIT_EXIT);
	rdma_destroy_qp(id);
	ASSERT_EQ(rdma_destroy_id(id), 0);
	rdma_destroy_event_channel(ch);
	peer_wait(&p);
}

TEST(connection_loopback)
{
	full_connection(loopback_ip());
}

TEST(connection_interface_address)
{
	netenv_need(NETENV_IP4_IFACE);
	ASSERT_NOT_NULL(other_ip());
	full_connection(other_ip());
}

/* ------------------------------------------------------------------ */
/* IPv6, and an IPv6 wildcard listener that takes IPv4 too             */

static void wildcard_server(struct peer *p, void *arg)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct sockaddr_in6 any = { .sin6_family = AF_INET6 };
	struct rdma_cm_id *lid, *id[2];
	struct rdma_cm_event *ev;
	char buf[16] = "";
	struct ibv_mr *mr;
	int i, v = 0;

	(void)arg;
	ASSERT_EQ(rdma_create_id(ch, &lid, NULL, RDMA_PS_TCP), 0);
	ASSERT_EQ(rdma_set_option(lid, RDMA_OPTION_ID, RDMA_OPTION_ID_AFONLY,
				  &v, sizeof(v)), 0);
	ASSERT_EQ(rdma_bind_addr(lid, (struct sockaddr *)&any), 0);
	ASSERT_NULL(lid->verbs);		/* a wildcard: no device */
	ASSERT_EQ(rdma_listen(lid, 4), 0);
	peer_send(p, ntohs(rdma_get_src_port(lid)));
	for (i = 0; i < 2; i++) {
		ev = expect_event(ch, RDMA_CM_EVENT_CONNECT_REQUEST);
		id[i] = ev->id;
		ASSERT(ev->listen_id == lid);
		/* the request's own family: IPv4 first, then IPv6 */
		ASSERT_EQ(rdma_get_local_addr(id[i])->sa_family,
			  i ? AF_INET6 : AF_INET);
		ASSERT_EQ(rdma_get_peer_addr(id[i])->sa_family,
			  i ? AF_INET6 : AF_INET);
		ASSERT_NOT_NULL(id[i]->verbs);
		ASSERT_STR_EQ(ibv_get_device_name(id[i]->verbs->device),
			      "softhca_lo");
		ASSERT_EQ(rdma_ack_cm_event(ev), 0);
		make_qp(id[i], IBV_QPT_RC);
		if (i)
			post_recv_buf(id[i], buf, sizeof(buf), &mr);
		ASSERT_EQ(rdma_accept(id[i], NULL), 0);
		expect_event_ack(ch, RDMA_CM_EVENT_ESTABLISHED);
	}
	recv_done(id[1], mr);
	ASSERT_STR_EQ(buf, "over ::1");
	for (i = 0; i < 2; i++) {
		ev = expect_event(ch, RDMA_CM_EVENT_DISCONNECTED);
		ASSERT_EQ(rdma_ack_cm_event(ev), 0);
	}
	for (i = 0; i < 2; i++) {
		rdma_destroy_qp(id[i]);
		ASSERT_EQ(rdma_destroy_id(id[i]), 0);
	}
	ASSERT_EQ(rdma_destroy_id(lid), 0);
	rdma_destroy_event_channel(ch);
}

TEST(ipv6_and_wildcard_listener)
{
	struct sockaddr_in6 v6 = { .sin6_family = AF_INET6 };
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id4, *id6;
	char msg[16] = "over ::1";
	struct peer p;
	uint16_t port;

	netenv_need(NETENV_IP6_LO);
	v6.sin6_addr = in6addr_loopback;
	peer_start(&p, wildcard_server, NULL);
	port = (uint16_t)peer_recv(&p);
	ch = rdma_create_event_channel();
	ASSERT_EQ(rdma_create_id(ch, &id4, NULL, RDMA_PS_TCP), 0);
	resolve_to(ch, id4, loopback_ip(), port);
	make_qp(id4, IBV_QPT_RC);
	ASSERT_EQ(rdma_connect(id4, NULL), 0);
	expect_event_ack(ch, RDMA_CM_EVENT_ESTABLISHED);

	ASSERT_EQ(rdma_create_id(ch, &id6, NULL, RDMA_PS_TCP), 0);
	v6.sin6_port = htons(port);
	ASSERT_EQ(rdma_resolve_addr(id6, NULL, (struct sockaddr *)&v6,
				    2000), 0);
	expect_event_ack(ch, RDMA_CM_EVENT_ADDR_RESOLVED);
	ASSERT_EQ(rdma_get_local_addr(id6)->sa_family, AF_INET6);
	ASSERT(!memcmp(&id6->route.addr.addr.ibaddr.sgid, &in6addr_loopback,
		       16));
	ASSERT_EQ(rdma_resolve_route(id6, 2000), 0);
	expect_event_ack(ch, RDMA_CM_EVENT_ROUTE_RESOLVED);
	make_qp(id6, IBV_QPT_RC);
	ASSERT_EQ(rdma_connect(id6, NULL), 0);
	expect_event_ack(ch, RDMA_CM_EVENT_ESTABLISHED);
	send_buf(id6, msg, sizeof(msg));

	rdma_destroy_qp(id4);
	ASSERT_EQ(rdma_destroy_id(id4), 0);
	rdma_destroy_qp(id6);
	ASSERT_EQ(rdma_destroy_id(id6), 0);
	rdma_destroy_event_channel(ch);
	peer_wait(&p);
}

/* ------------------------------------------------------------------ */
/* Private data limits                                                 */

static void limits_server(struct peer *p, void *arg)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_conn_param param = { 0 };
	struct rdma_cm_id *lid, *id;
	struct rdma_cm_event *ev;
	uint8_t pdata[200];

	(void)arg;
	peer_send(p, listen_on(ch, &lid, loopback_ip(), RDMA_PS_TCP));
	/* a REP one byte over: EINVAL, and the requester is rejected */
	ev = expect_event(ch, RDMA_CM_EVENT_CONNECT_REQUEST);
	id = ev->id;
	ASSERT_EQ(rdma_ack_cm_event(ev), 0);
	make_qp(id, IBV_QPT_RC);
	fill(pdata, sizeof(pdata), 7);
	param.private_data = pdata;
	param.private_data_len = 197;
	errno = 0;
	ASSERT_EQ(rdma_accept(id, &param), -1);
	ASSERT_EQ(errno, EINVAL);
	rdma_destroy_qp(id);
	ASSERT_EQ(rdma_destroy_id(id), 0);

	/* a REQ of exactly 56 bytes, a REP of exactly 196 */
	ev = expect_event(ch, RDMA_CM_EVENT_CONNECT_REQUEST);
	id = ev->id;
	ASSERT_EQ(ev->param.conn.private_data_len, 56);
	ASSERT(filled(ev->param.conn.private_data, 56, 3));
	ASSERT_EQ(rdma_ack_cm_event(ev), 0);
	make_qp(id, IBV_QPT_RC);
	param.private_data_len = 196;
	ASSERT_EQ(rdma_accept(id, &param), 0);
	expect_event_ack(ch, RDMA_CM_EVENT_ESTABLISHED);
	/* the requester destroys its id: a DREQ */
	expect_event_ack(ch, RDMA_CM_EVENT_DISCONNECTED);
	rdma_destroy_qp(id);
	ASSERT_EQ(rdma_destroy_id(id), 0);
	ASSERT_EQ(rdma_destroy_id(lid), 0);
	rdma_destroy_event_channel(ch);
}

TEST(private_data_limits)
{
	struct rdma_event_channel *ch;
	struct rdma_conn_param param = { 0 };
	struct rdma_cm_event *ev;
	struct rdma_cm_id *id;
	uint8_t pdata[64];
	struct peer p;
	uint16_t port;

	peer_start(&p, limits_server, NULL);
	port = (uint16_t)peer_recv(&p);
	ch = rdma_create_event_channel();
	ASSERT_EQ(rdma_create_id(ch, &id, NULL, RDMA_PS_TCP), 0);
	resolve_to(ch, id, loopback_ip(), port);
	make_qp(id, IBV_QPT_RC);
	fill(pdata, sizeof(pdata), 3);
	param.private_data = pdata;
	param.private_data_len = 57;		/* 92 - 36 + 1 */
	errno = 0;
	ASSERT_EQ(rdma_connect(id, &param), -1);
	ASSERT_EQ(errno, EINVAL);
	/* the id is as it was: it can connect */
	param.private_data_len = 10;
	ASSERT_EQ(rdma_connect(id, &param), 0);
	ev = expect_event(ch, RDMA_CM_EVENT_REJECTED);
	ASSERT_EQ(ev->status, 28);	/* consumer defined */
	ASSERT_EQ(ev->param.conn.private_data_len, 148);
	ASSERT_EQ(rdma_ack_cm_event(ev), 0);
	ASSERT_EQ(qp_state(id->qp), IBV_QPS_ERR);
	rdma_destroy_qp(id);
	ASSERT_EQ(rdma_destroy_id(id), 0);

	ASSERT_EQ(rdma_create_id(ch, &id, NULL, RDMA_PS_TCP), 0);
	resolve_to(ch, id, loopback_ip(), port);
	make_qp(id, IBV_QPT_RC);
	param.private_data_len = 56;
	ASSERT_EQ(rdma_connect(id, &param), 0);
	ev = expect_event(ch, RDMA_CM_EVENT_ESTABLISHED);
	ASSERT_EQ(ev->param.conn.private_data_len, 196);
	ASSERT(filled(ev->param.conn.private_data, 196, 7));
	ASSERT_EQ(rdma_ack_cm_event(ev), 0);
	rdma_destroy_qp(id);
	ASSERT_EQ(rdma_destroy_id(id), 0);
	rdma_destroy_event_channel(ch);
	peer_wait(&p);
}

/* ------------------------------------------------------------------ */
/* Rejection, no listener                                              */

static void reject_server(struct peer *p, void *arg)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_id *lid, *id;
	struct rdma_cm_event *ev;
	uint8_t pdata[160];

	(void)arg;
	peer_send(p, listen_on(ch, &lid, loopback_ip(), RDMA_PS_TCP));
	ev = expect_event(ch, RDMA_CM_EVENT_CONNECT_REQUEST);
	id = ev->id;
	ASSERT_EQ(rdma_ack_cm_event(ev), 0);
	fill(pdata, sizeof(pdata), 9);
	errno = 0;
	ASSERT_EQ(rdma_reject(id, pdata, 149), -1);
	ASSERT_EQ(errno, EINVAL);
	ASSERT_EQ(rdma_reject(id, pdata, 148), 0);
	ASSERT_EQ(rdma_reject(id, NULL, 0), -1);	/* done already */
	ASSERT_EQ(errno, EINVAL);
	ASSERT_EQ(rdma_destroy_id(id), 0);

	ev = expect_event(ch, RDMA_CM_EVENT_CONNECT_REQUEST);
	id = ev->id;
	ASSERT_EQ(rdma_ack_cm_event(ev), 0);
	ASSERT_EQ(rdma_reject_ece(id, NULL, 0), 0);
	ASSERT_EQ(rdma_destroy_id(id), 0);
	ASSERT_EQ(rdma_destroy_id(lid), 0);
	rdma_destroy_event_channel(ch);
}

TEST(reject)
{
	struct rdma_event_channel *ch;
	struct rdma_cm_event *ev;
	struct rdma_cm_id *id;
	struct peer p;
	uint16_t port;
	int i;

	peer_start(&p, reject_server, NULL);
	port = (uint16_t)peer_recv(&p);
	ch = rdma_create_event_channel();
	for (i = 0; i < 2; i++) {
		ASSERT_EQ(rdma_create_id(ch, &id, NULL, RDMA_PS_TCP), 0);
		resolve_to(ch, id, loopback_ip(), port);
		make_qp(id, IBV_QPT_RC);
		ASSERT_EQ(rdma_connect(id, NULL), 0);
		ev = expect_event(ch, RDMA_CM_EVENT_REJECTED);
		ASSERT_EQ(ev->param.conn.private_data_len, 148);
		if (i == 0) {
			ASSERT_EQ(ev->status, 28);
			ASSERT(filled(ev->param.conn.private_data, 148, 9));
		} else {
			ASSERT_EQ(ev->status, 35);	/* rdma_reject_ece */
		}
		ASSERT_EQ(rdma_ack_cm_event(ev), 0);
		ASSERT_EQ(qp_state(id->qp), IBV_QPS_ERR);
		rdma_destroy_qp(id);
		ASSERT_EQ(rdma_destroy_id(id), 0);
	}
	rdma_destroy_event_channel(ch);
	peer_wait(&p);
}

static uint16_t free_port(void)
{
	struct sockaddr_in sin;
	socklen_t len = sizeof(sin);
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	make_addr(&sin, loopback_ip(), 0);
	ASSERT_EQ(bind(fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
	ASSERT_EQ(getsockname(fd, (struct sockaddr *)&sin, &len), 0);
	close(fd);
	return ntohs(sin.sin_port);
}

TEST(no_listener)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_event *ev;
	struct rdma_cm_id *id;
	struct sockaddr_in dst;
	uint16_t port = free_port();

	ASSERT_EQ(rdma_create_id(ch, &id, NULL, RDMA_PS_TCP), 0);
	resolve_to(ch, id, loopback_ip(), port);
	make_qp(id, IBV_QPT_RC);
	ASSERT_EQ(rdma_connect(id, NULL), 0);
	/* the IB CM's answer on RoCE: REJ, "invalid service ID" */
	ev = expect_event(ch, RDMA_CM_EVENT_REJECTED);
	ASSERT_EQ(ev->status, 8);
	ASSERT_EQ(ev->param.conn.private_data_len, 148);
	ASSERT_EQ(rdma_ack_cm_event(ev), 0);
	ASSERT_EQ(qp_state(id->qp), IBV_QPS_ERR);
	rdma_destroy_qp(id);
	ASSERT_EQ(rdma_destroy_id(id), 0);

	/* a synchronous id: ECONNREFUSED, the event kept in id->event */
	make_addr(&dst, loopback_ip(), port);
	ASSERT_EQ(rdma_create_id(NULL, &id, NULL, RDMA_PS_TCP), 0);
	ASSERT_EQ(rdma_resolve_addr(id, NULL, (struct sockaddr *)&dst,
				    2000), 0);
	ASSERT_EQ(rdma_resolve_route(id, 2000), 0);
	make_qp(id, IBV_QPT_RC);
	errno = 0;
	ASSERT_EQ(rdma_connect(id, NULL), -1);
	ASSERT_EQ(errno, ECONNREFUSED);
	ASSERT_EQ(id->event->event, RDMA_CM_EVENT_REJECTED);
	ASSERT_EQ(id->event->status, 8);
	rdma_destroy_qp(id);
	ASSERT_EQ(rdma_destroy_id(id), 0);
	rdma_destroy_event_channel(ch);
}

/* ------------------------------------------------------------------ */
/* A peer that dies                                                    */

static void dying_server(struct peer *p, void *arg)
{
	bool after_accept = arg != NULL;
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_id *lid, *id;
	struct rdma_cm_event *ev;

	peer_send(p, listen_on(ch, &lid, loopback_ip(), RDMA_PS_TCP));
	ev = expect_event(ch, RDMA_CM_EVENT_CONNECT_REQUEST);
	id = ev->id;
	ASSERT_EQ(rdma_ack_cm_event(ev), 0);
	if (after_accept) {
		make_qp(id, IBV_QPT_RC);
		ASSERT_EQ(rdma_accept(id, NULL), 0);
		expect_event_ack(ch, RDMA_CM_EVENT_ESTABLISHED);
	}
	peer_send(p, 1);
	_exit(0);	/* no cleanup: the kernel closes the sockets */
}

TEST(peer_dies_after_establishment)
{
	struct rdma_event_channel *ch;
	struct rdma_cm_event *ev;
	struct rdma_cm_id *id;
	struct peer p;
	uint16_t port;

	peer_start(&p, dying_server, (void *)1);
	port = (uint16_t)peer_recv(&p);
	ch = rdma_create_event_channel();
	ASSERT_EQ(rdma_create_id(ch, &id, NULL, RDMA_PS_TCP), 0);
	resolve_to(ch, id, loopback_ip(), port);
	make_qp(id, IBV_QPT_RC);
	ASSERT_EQ(rdma_connect(id, NULL), 0);
	expect_event_ack(ch, RDMA_CM_EVENT_ESTABLISHED);
	peer_recv(&p);
	peer_wait(&p);
	ev = expect_event(ch, RDMA_CM_EVENT_DISCONNECTED);
	ASSERT_EQ(ev->status, 0);
	ASSERT_EQ(rdma_ack_cm_event(ev), 0);
	ASSERT_EQ(rdma_disconnect(id), 0);
	expect_event_ack(ch, RDMA_CM_EVENT_TIMEWAIT_EXIT);
	rdma_destroy_qp(id);
	ASSERT_EQ(rdma_destroy_id(id), 0);
	rdma_destroy_event_channel(ch);
}

TEST(peer_dies_before_accept)
{
	struct rdma_event_channel *ch;
	struct rdma_cm_event *ev;
	struct rdma_cm_id *id;
	struct peer p;
	uint16_t port;

	peer_start(&p, dying_server, NULL);
	port = (uint16_t)peer_recv(&p);
	ch = rdma_create_event_channel();
	ASSERT_EQ(rdma_create_id(ch, &id, NULL, RDMA_PS_TCP), 0);
	resolve_to(ch, id, loopback_ip(), port);
	make_qp(id, IBV_QPT_RC);
	ASSERT_EQ(rdma_connect(id, NULL), 0);
	peer_recv(&p);
	peer_wait(&p);
	ev = expect_event(ch, RDMA_CM_EVENT_REJECTED);
	ASSERT_EQ(ev->status, 28);
	ASSERT_EQ(rdma_ack_cm_event(ev), 0);
	rdma_destroy_qp(id);
	ASSERT_EQ(rdma_destroy_id(id), 0);
	rdma_destroy_event_channel(ch);
}

static void dying_client(struct peer *p, void *arg)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_id *id;
	uint16_t port = (uint16_t)peer_recv(p);

	(void)arg;
	ASSERT_EQ(rdma_create_id(ch, &id, NULL, RDMA_PS_TCP), 0);
	resolve_to(ch, id, loopback_ip(), port);
	make_qp(id, IBV_QPT_RC);
	ASSERT_EQ(rdma_connect(id, NULL), 0);
	peer_recv(p);
	_exit(0);
}

TEST(requester_dies_before_accept)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_id *lid, *id;
	struct rdma_cm_event *ev;
	struct peer p;

	peer_start(&p, dying_client, NULL);
	peer_send(&p, listen_on(ch, &lid, loopback_ip(), RDMA_PS_TCP));
	ev = expect_event(ch, RDMA_CM_EVENT_CONNECT_REQUEST);
	id = ev->id;
	ASSERT_EQ(rdma_ack_cm_event(ev), 0);
	peer_send(&p, 1);
	peer_wait(&p);
	/* the requester's kernel would have sent REJ "timeout" */
	ev = expect_event(ch, RDMA_CM_EVENT_REJECTED);
	ASSERT(ev->id == id);
	ASSERT_EQ(ev->status, 1);
	ASSERT_EQ(rdma_ack_cm_event(ev), 0);
	errno = 0;
	ASSERT_EQ(rdma_accept(id, NULL), -1);
	ASSERT_EQ(errno, EINVAL);
	ASSERT_EQ(rdma_destroy_id(id), 0);
	ASSERT_EQ(rdma_destroy_id(lid), 0);
	rdma_destroy_event_channel(ch);
}

/* ------------------------------------------------------------------ */
/* Synchronous ids and endpoints (rdma_server / rdma_client's way)     */

static void sync_server(struct peer *p, void *arg)
{
	enum ibv_qp_type type = (enum ibv_qp_type)(intptr_t)arg;
	struct rdma_addrinfo hints = { 0 }, *res;
	struct ibv_qp_init_attr attr = {
		.cap = { .max_send_wr = 4, .max_recv_wr = 4,
			 .max_send_sge = 1, .max_recv_sge = 1 },
	};
	struct rdma_cm_id *lid, *id;
	char buf[16] = "";
	struct ibv_mr *mr;

	hints.ai_flags = RAI_PASSIVE;
	hints.ai_port_space = type == IBV_QPT_RC ? RDMA_PS_TCP : RDMA_PS_IB;
	hints.ai_qp_type = type;
	ASSERT_EQ(rdma_getaddrinfo(loopback_ip(), "0", &hints, &res), 0);
	ASSERT_EQ(rdma_create_ep(&lid, res, NULL, &attr), 0);
	rdma_freeaddrinfo(res);
	ASSERT_EQ(rdma_listen(lid, 1), 0);
	peer_send(p, ntohs(rdma_get_src_port(lid)));
	ASSERT_EQ(rdma_get_request(lid, &id), 0);
	ASSERT_NOT_NULL(id->qp);
	ASSERT_EQ(id->qp->qp_type, type);
	ASSERT_NOT_NULL(id->event);
	ASSERT_EQ(id->event->event, RDMA_CM_EVENT_CONNECT_REQUEST);
	post_recv_buf(id, buf, sizeof(buf), &mr);
	ASSERT_EQ(rdma_accept(id, NULL), 0);	/* returns established */
	ASSERT_EQ(id->event->event, RDMA_CM_EVENT_ESTABLISHED);
	recv_done(id, mr);
	ASSERT_STR_EQ(buf, "sync");
	peer_send(p, 1);
	/* the requester disconnects; answering returns at once */
	ASSERT_EQ(peer_recv(p), 2);
	ASSERT_EQ(rdma_disconnect(id), 0);
	ASSERT_EQ(id->event->event, RDMA_CM_EVENT_DISCONNECTED);
	rdma_destroy_ep(id);
	rdma_destroy_ep(lid);
}

static void synchronous_endpoints(enum ibv_qp_type type)
{
	struct rdma_addrinfo hints = { 0 }, *res;
	struct ibv_qp_init_attr attr = {
		.cap = { .max_send_wr = 4, .max_recv_wr = 4,
			 .max_send_sge = 1, .max_recv_sge = 1 },
	};
	char msg[16] = "sync", port[8];
	struct rdma_cm_id *id;
	struct peer p;

	peer_start(&p, sync_server, (void *)(intptr_t)type);
	snprintf(port, sizeof(port), "%u", peer_recv(&p));
	hints.ai_port_space = type == IBV_QPT_RC ? RDMA_PS_TCP : RDMA_PS_IB;
	hints.ai_qp_type = type;
	ASSERT_EQ(rdma_getaddrinfo(loopback_ip(), port, &hints, &res), 0);
	ASSERT_EQ(rdma_create_ep(&id, res, NULL, &attr), 0);
	rdma_freeaddrinfo(res);
	ASSERT_NOT_NULL(id->qp);
	ASSERT_EQ(id->qp->qp_type, type);
	ASSERT(id->send_cq->cq_context == id);
	ASSERT_EQ(rdma_connect(id, NULL), 0);
	ASSERT_EQ(id->event->event, RDMA_CM_EVENT_ESTABLISHED);
	send_buf(id, msg, sizeof(msg));
	ASSERT_EQ(peer_recv(&p), 1);
	/* the DREQ; the synchronous call returns with the DREP */
	peer_send(&p, 2);
	ASSERT_EQ(rdma_disconnect(id), 0);
	ASSERT_EQ(id->event->event, RDMA_CM_EVENT_DISCONNECTED);
	rdma_destroy_ep(id);
	peer_wait(&p);
}

TEST(synchronous_endpoints_rc)
{
	synchronous_endpoints(IBV_QPT_RC);
}

TEST(synchronous_endpoints_uc)
{
	synchronous_endpoints(IBV_QPT_UC);
}

/* ------------------------------------------------------------------ */
/* The application's own QP: rdma_init_qp_attr and rdma_establish      */

static void plain_server(struct peer *p, void *arg)
{
	bool notify = arg != NULL;
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_id *lid, *id;
	struct rdma_cm_event *ev;
	char buf[16] = "";
	struct ibv_mr *mr;

	peer_send(p, listen_on(ch, &lid, loopback_ip(), RDMA_PS_TCP));
	ev = expect_event(ch, RDMA_CM_EVENT_CONNECT_REQUEST);
	id = ev->id;
	ASSERT_EQ(rdma_ack_cm_event(ev), 0);
	make_qp(id, IBV_QPT_RC);
	post_recv_buf(id, buf, sizeof(buf), &mr);
	ASSERT_EQ(rdma_accept(id, NULL), 0);
	peer_send(p, id->qp->qp_num);
	if (notify) {
		/* data came before the RTU: the QP tells the CM */
		recv_done(id, mr);
		errno = 0;
		ASSERT_EQ(rdma_notify(id, IBV_EVENT_SQ_DRAINED), -1);
		ASSERT_EQ(errno, EINVAL);
		ASSERT_EQ(rdma_notify(id, IBV_EVENT_COMM_EST), 0);
		expect_event_ack(ch, RDMA_CM_EVENT_ESTABLISHED);
		ASSERT_EQ(rdma_notify(id, IBV_EVENT_COMM_EST), -1);
		ASSERT_EQ(errno, EISCONN);
		peer_send(p, 1);	/* now the RTU: nothing more */
	} else {
		expect_event_ack(ch, RDMA_CM_EVENT_ESTABLISHED);
		recv_done(id, mr);
	}
	ASSERT_STR_EQ(buf, "own qp");
	expect_event_ack(ch, RDMA_CM_EVENT_DISCONNECTED);
	rdma_destroy_qp(id);
	ASSERT_EQ(rdma_destroy_id(id), 0);
	ASSERT_EQ(rdma_destroy_id(lid), 0);
	rdma_destroy_event_channel(ch);
}

static void modify_with(struct rdma_cm_id *id, struct ibv_qp *qp,
			enum ibv_qp_state state)
{
	struct ibv_qp_attr attr = { .qp_state = state };
	int mask;

	ASSERT_EQ(rdma_init_qp_attr(id, &attr, &mask), 0);
	ASSERT_EQ(attr.qp_state, state);
	ASSERT_EQ(ibv_modify_qp(qp, &attr, mask), 0);
}

static void own_qp(bool notify)
{
	struct rdma_event_channel *ch;
	struct rdma_conn_param param = { 0 };
	struct ibv_qp_init_attr init = {
		.cap = { .max_send_wr = 4, .max_recv_wr = 4,
			 .max_send_sge = 1, .max_recv_sge = 1 },
		.qp_type = IBV_QPT_RC,
	};
	struct ibv_qp_attr attr;
	struct rdma_cm_event *ev;
	struct rdma_cm_id *id;
	struct ibv_send_wr wr = { 0 }, *bad;
	struct ibv_sge sge;
	struct ibv_wc wc;
	struct ibv_mr *mr;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	char msg[16] = "own qp";
	uint8_t timeout = 14;
	uint32_t server_qpn;
	struct peer p;
	uint16_t port;
	int mask;

	peer_start(&p, plain_server, notify ? (void *)1 : NULL);
	port = (uint16_t)peer_recv(&p);
	ch = rdma_create_event_channel();
	ASSERT_EQ(rdma_create_id(ch, &id, NULL, RDMA_PS_TCP), 0);
	resolve_to(ch, id, loopback_ip(), port);
	pd = ibv_alloc_pd(id->verbs);
	cq = ibv_create_cq(id->verbs, 8, NULL, NULL, 0);
	init.send_cq = cq;
	init.recv_cq = cq;
	qp = ibv_create_qp(pd, &init);
	ASSERT_NOT_NULL(qp);
	/* before the exchange: the INIT attributes, whatever is asked */
	attr.qp_state = IBV_QPS_RTR;
	ASSERT_EQ(rdma_init_qp_attr(id, &attr, &mask), 0);
	ASSERT_EQ(mask, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
			IBV_QP_ACCESS_FLAGS);
	ASSERT_EQ(attr.qp_access_flags, 0);
	ASSERT_EQ(attr.port_num, 1);
	attr.qp_state = IBV_QPS_INIT;
	ASSERT_EQ(ibv_modify_qp(qp, &attr, mask), 0);

	ASSERT_EQ(rdma_set_option(id, RDMA_OPTION_ID,
				  RDMA_OPTION_ID_ACK_TIMEOUT, &timeout,
				  sizeof(timeout)), 0);
	param.qp_num = qp->qp_num;
	param.responder_resources = 1;
	param.initiator_depth = 1;
	param.retry_count = 7;
	param.rnr_retry_count = 7;
	ASSERT_EQ(rdma_connect(id, &param), 0);
	ev = expect_event(ch, RDMA_CM_EVENT_CONNECT_RESPONSE);
	server_qpn = peer_recv(&p);
	ASSERT_EQ(ev->param.conn.qp_num, server_qpn);
	ASSERT_EQ(rdma_ack_cm_event(ev), 0);

	modify_with(id, qp, IBV_QPS_INIT);
	attr.qp_state = IBV_QPS_RTR;
	ASSERT_EQ(rdma_init_qp_attr(id, &attr, &mask), 0);
	ASSERT(mask & IBV_QP_AV);
	ASSERT_EQ(attr.dest_qp_num, server_qpn);
	ASSERT_EQ(attr.ah_attr.is_global, 1);
	ASSERT_EQ(attr.ah_attr.grh.dgid.raw[10], 0xff);
	ASSERT_EQ(attr.max_dest_rd_atomic, 1);
	ASSERT_EQ(ibv_modify_qp(qp, &attr, mask), 0);
	attr.qp_state = IBV_QPS_RTS;
	ASSERT_EQ(rdma_init_qp_attr(id, &attr, &mask), 0);
	ASSERT(mask & IBV_QP_TIMEOUT);
	ASSERT_EQ(attr.timeout, 14);	/* RDMA_OPTION_ID_ACK_TIMEOUT */
	ASSERT_EQ(attr.retry_cnt, 7);
	ASSERT_EQ(attr.max_rd_atomic, 1);
	modify_with(id, qp, IBV_QPS_RTS);

	mr = ibv_reg_mr(pd, msg, sizeof(msg), IBV_ACCESS_LOCAL_WRITE);
	sge.addr = (uintptr_t)msg;
	sge.length = sizeof(msg);
	sge.lkey = mr->lkey;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_SEND;
	wr.send_flags = IBV_SEND_SIGNALED;
	ASSERT_EQ(ibv_post_send(qp, &wr, &bad), 0);
	while (ibv_poll_cq(cq, 1, &wc) == 0)
		;
	ASSERT_EQ(wc.status, IBV_WC_SUCCESS);
	if (notify)
		ASSERT_EQ(peer_recv(&p), 1);
	ASSERT_EQ(rdma_establish(id), 0);
	errno = 0;
	ASSERT_EQ(rdma_establish(id), -1);	/* once */
	ASSERT_EQ(errno, EINVAL);

	ASSERT_EQ(rdma_destroy_id(id), 0);
	ibv_destroy_qp(qp);
	ibv_dereg_mr(mr);
	ibv_destroy_cq(cq);
	ibv_dealloc_pd(pd);
	rdma_destroy_event_channel(ch);
	peer_wait(&p);
}

TEST(own_qp_establish)
{
	own_qp(false);
}

TEST(own_qp_notify_comm_est)
{
	own_qp(true);
}

/* ------------------------------------------------------------------ */
/* The listen backlog                                                  */

static void backlog_server(struct peer *p, void *arg)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_id *lid;
	struct rdma_cm_event *ev;
	struct sockaddr_in sin;

	(void)arg;
	make_addr(&sin, loopback_ip(), 0);
	ASSERT_EQ(rdma_create_id(ch, &lid, NULL, RDMA_PS_TCP), 0);
	ASSERT_EQ(rdma_bind_addr(lid, (struct sockaddr *)&sin), 0);
	ASSERT_EQ(rdma_listen(lid, 1), 0);
	peer_send(p, ntohs(rdma_get_src_port(lid)));
	/* one request waits, unretrieved; the other one was refused */
	ASSERT_EQ(peer_recv(p), 1);
	ev = expect_event(ch, RDMA_CM_EVENT_CONNECT_REQUEST);
	ASSERT_EQ(rdma_reject(ev->id, NULL, 0), 0);
	ASSERT_EQ(rdma_destroy_id(ev->id), 0);
	ASSERT_EQ(rdma_ack_cm_event(ev), 0);
	ASSERT_EQ(rdma_destroy_id(lid), 0);
	rdma_destroy_event_channel(ch);
}

TEST(listen_backlog)
{
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id[2];
	struct rdma_cm_event *ev;
	struct peer p;
	uint16_t port;
	int i;

	peer_start(&p, backlog_server, NULL);
	port = (uint16_t)peer_recv(&p);
	ch = rdma_create_event_channel();
	for (i = 0; i < 2; i++) {
		ASSERT_EQ(rdma_create_id(ch, &id[i], NULL, RDMA_PS_TCP), 0);
		resolve_to(ch, id[i], loopback_ip(), port);
		make_qp(id[i], IBV_QPT_RC);
		ASSERT_EQ(rdma_connect(id[i], NULL), 0);
	}
	for (i = 0; i < 2; i++) {
		ev = expect_event(ch, RDMA_CM_EVENT_REJECTED);
		ASSERT_EQ(ev->status, 28);
		ASSERT_EQ(rdma_ack_cm_event(ev), 0);
		if (i == 0)
			peer_send(&p, 1);
	}
	for (i = 0; i < 2; i++) {
		rdma_destroy_qp(id[i]);
		ASSERT_EQ(rdma_destroy_id(id[i]), 0);
	}
	rdma_destroy_event_channel(ch);
	peer_wait(&p);
}

/* ------------------------------------------------------------------ */
/* Calls in the wrong state                                            */

TEST(wrong_state)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_conn_param param = { 0 };
	struct rdma_cm_id *id, *lid;
	struct sockaddr_in sin;

	ASSERT_EQ(rdma_create_id(ch, &id, NULL, RDMA_PS_TCP), 0);
	errno = 0;
	ASSERT_EQ(rdma_disconnect(id), -1);	/* no device */
	ASSERT_EQ(errno, EINVAL);
	ASSERT_EQ(rdma_connect(id, &param), -1);
	ASSERT_EQ(errno, EINVAL);
	resolve_to(ch, id, loopback_ip(), 7);
	ASSERT_EQ(rdma_connect(id, NULL), -1);	/* no QP, no parameters */
	ASSERT_EQ(errno, EINVAL);
	param.initiator_depth = 254;		/* over the device's */
	ASSERT_EQ(rdma_connect(id, &param), -1);
	ASSERT_EQ(errno, EINVAL);
	ASSERT_EQ(rdma_disconnect(id), -1);	/* nothing to end */
	ASSERT_EQ(errno, EINVAL);
	ASSERT_EQ(rdma_reject(id, NULL, 0), -1);
	ASSERT_EQ(errno, EINVAL);
	ASSERT_EQ(rdma_notify(id, IBV_EVENT_COMM_EST), -1);
	ASSERT_EQ(errno, EINVAL);
	ASSERT_EQ(rdma_listen(id, 1), -1);
	ASSERT_EQ(errno, EINVAL);
	make_qp(id, IBV_QPT_RC);
	ASSERT_EQ(rdma_establish(id), -1);	/* it has a QP */
	ASSERT_EQ(errno, EINVAL);
	rdma_destroy_qp(id);
	ASSERT_EQ(rdma_destroy_id(id), 0);

	make_addr(&sin, loopback_ip(), 0);
	ASSERT_EQ(rdma_create_id(ch, &lid, NULL, RDMA_PS_TCP), 0);
	ASSERT_EQ(rdma_bind_addr(lid, (struct sockaddr *)&sin), 0);
	ASSERT_EQ(rdma_listen(lid, 1), 0);
	param.initiator_depth = 1;
	ASSERT_EQ(rdma_accept(lid, &param), -1);
	ASSERT_EQ(errno, EINVAL);
	ASSERT_EQ(rdma_destroy_id(lid), 0);
	rdma_destroy_event_channel(ch);
}
