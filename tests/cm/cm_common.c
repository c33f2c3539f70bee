// SPDX-License-Identifier: MIT
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cm_common.h"

void peer_start(struct peer *p, void (*fn)(struct peer *p, void *arg),
		void *arg)
{
	int p2c[2], c2p[2];

	ASSERT_EQ(pipe(p2c), 0);
	ASSERT_EQ(pipe(c2p), 0);
	fflush(stdout);
	fflush(stderr);
	p->pid = fork();
	ASSERT_GE(p->pid, 0);
	if (p->pid == 0) {
		/* the peer: gone with its parent, bounded on its own */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		alarm(60);
		close(p2c[1]);
		close(c2p[0]);
		p->pid = getppid();
		p->to_peer = c2p[1];
		p->from_peer = p2c[0];
		fn(p, arg);
		fflush(stdout);
		_exit(0);
	}
	close(p2c[0]);
	close(c2p[1]);
	p->to_peer = p2c[1];
	p->from_peer = c2p[0];
}

int peer_wait_status(struct peer *p)
{
	int status = -1;

	ASSERT_EQ(waitpid(p->pid, &status, 0), p->pid);
	close(p->to_peer);
	close(p->from_peer);
	return status;
}

void peer_wait(struct peer *p)
{
	int status = peer_wait_status(p);

	if (!WIFEXITED(status) || WEXITSTATUS(status))
		harness_fail(__FILE__, __LINE__,
			     "the peer failed (status 0x%x)", status);
}

void peer_send(struct peer *p, uint32_t v)
{
	ASSERT_EQ(write(p->to_peer, &v, sizeof(v)), (ssize_t)sizeof(v));
}

uint32_t peer_recv(struct peer *p)
{
	uint32_t v;
	ssize_t n = read(p->from_peer, &v, sizeof(v));

	if (n != (ssize_t)sizeof(v))
		harness_fail(__FILE__, __LINE__,
			     "the other process is gone (read %zd)", n);
	return v;
}

const char *loopback_ip(void)
{
	return "127.0.0.1";
}

const char *other_ip(void)
{
	static char ip[INET_ADDRSTRLEN];
	struct ifaddrs *ifa, *i;

	if (ip[0])
		return ip;
	if (getifaddrs(&ifa))
		return NULL;
	for (i = ifa; i; i = i->ifa_next) {
		if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET ||
		    (i->ifa_flags & IFF_LOOPBACK) || !(i->ifa_flags & IFF_UP))
			continue;
		inet_ntop(AF_INET,
			  &((struct sockaddr_in *)i->ifa_addr)->sin_addr, ip,
			  sizeof(ip));
		break;
	}
	freeifaddrs(ifa);
	return ip[0] ? ip : NULL;
}

void make_addr(struct sockaddr_in *sin, const char *ip, uint16_t port)
{
	memset(sin, 0, sizeof(*sin));
	sin->sin_family = AF_INET;
	sin->sin_port = htons(port);
	ASSERT_EQ(inet_pton(AF_INET, ip, &sin->sin_addr), 1);
}

struct rdma_cm_event *expect_event(struct rdma_event_channel *ch,
				   enum rdma_cm_event_type type)
{
	struct rdma_cm_event *ev;

	if (rdma_get_cm_event(ch, &ev))
		harness_fail(__FILE__, __LINE__, "rdma_get_cm_event: %s",
			     strerror(errno));
	if (ev->event != type)
		harness_fail(__FILE__, __LINE__,
			     "got %s (status %d), expected %s",
			     rdma_event_str(ev->event), ev->status,
			     rdma_event_str(type));
	return ev;
}

void expect_event_ack(struct rdma_event_channel *ch,
		      enum rdma_cm_event_type type)
{
	ASSERT_EQ(rdma_ack_cm_event(expect_event(ch, type)), 0);
}

uint16_t listen_on(struct rdma_event_channel *ch, struct rdma_cm_id **id,
		   const char *ip, enum rdma_port_space ps)
{
	struct sockaddr_in sin;

	make_addr(&sin, ip, 0);
	ASSERT_EQ(rdma_create_id(ch, id, NULL, ps), 0);
	ASSERT_EQ(rdma_bind_addr(*id, (struct sockaddr *)&sin), 0);
	ASSERT_EQ(rdma_listen(*id, 8), 0);
	ASSERT_NE(rdma_get_src_port(*id), 0);
	return ntohs(rdma_get_src_port(*id));
}

void resolve_to(struct rdma_event_channel *ch, struct rdma_cm_id *id,
		const char *ip, uint16_t port)
{
	struct sockaddr_in dst;

	make_addr(&dst, ip, port);
	ASSERT_EQ(rdma_resolve_addr(id, NULL, (struct sockaddr *)&dst,
				    2000), 0);
	if (ch)
		expect_event_ack(ch, RDMA_CM_EVENT_ADDR_RESOLVED);
	else
		ASSERT_EQ(id->event->event, RDMA_CM_EVENT_ADDR_RESOLVED);
	ASSERT_EQ(rdma_resolve_route(id, 2000), 0);
	if (ch)
		expect_event_ack(ch, RDMA_CM_EVENT_ROUTE_RESOLVED);
	else
		ASSERT_EQ(id->event->event, RDMA_CM_EVENT_ROUTE_RESOLVED);
}

void make_qp(struct rdma_cm_id *id, enum ibv_qp_type type)
{
	struct ibv_qp_init_attr attr = {
		.cap = { .max_send_wr = 8, .max_recv_wr = 8,
			 .max_send_sge = 1, .max_recv_sge = 1 },
		.qp_type = type,
		.sq_sig_all = 0,
	};

	if (rdma_create_qp(id, NULL, &attr))
		harness_fail(__FILE__, __LINE__, "rdma_create_qp: %s",
			     strerror(errno));
	ASSERT_NOT_NULL(id->qp);
	ASSERT_NOT_NULL(id->send_cq);
	ASSERT_NOT_NULL(id->recv_cq);
	ASSERT(id->send_cq->cq_context == id);
}

void post_recv_buf(struct rdma_cm_id *id, void *buf, size_t len,
		   struct ibv_mr **mr)
{
	*mr = rdma_reg_msgs(id, buf, len);
	ASSERT_NOT_NULL(*mr);
	ASSERT_EQ(rdma_post_recv(id, NULL, buf, len, *mr), 0);
}

void send_buf(struct rdma_cm_id *id, void *buf, size_t len)
{
	struct ibv_mr *mr = rdma_reg_msgs(id, buf, len);
	struct ibv_wc wc;

	ASSERT_NOT_NULL(mr);
	ASSERT_EQ(rdma_post_send(id, NULL, buf, len, mr, IBV_SEND_SIGNALED), 0);
	ASSERT_EQ(rdma_get_send_comp(id, &wc), 1);
	ASSERT_EQ(wc.status, IBV_WC_SUCCESS);
	ASSERT_EQ(rdma_dereg_mr(mr), 0);
}

void recv_done(struct rdma_cm_id *id, struct ibv_mr *mr)
{
	struct ibv_wc wc;

	ASSERT_EQ(rdma_get_recv_comp(id, &wc), 1);
	ASSERT_EQ(wc.status, IBV_WC_SUCCESS);
	ASSERT_EQ(rdma_dereg_mr(mr), 0);
}
