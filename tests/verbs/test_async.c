// SPDX-License-Identifier: MIT
/*
 * Asynchronous events: the context's async_fd with poll, epoll and
 * O_NONBLOCK, ibv_get_async_event/ibv_ack_async_event, and the CQ error
 * event with the destroy rule (ibv_destroy_cq waits for its ack).
 *
 * Reference: rdma-core 44 device.c (ibv_get_async_event is a read() of
 * async_fd: -1 with EAGAIN when empty and non-blocking;
 * ibv_ack_async_event counts per object), cmd_cq.c (ibv_cmd_destroy_cq
 * waits for async_events_completed to reach the reported count), man
 * ibv_get_async_event(3).
 */
#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>
#include <sys/epoll.h>

#include "harness.h"
#include "asleep.h"
#include "common.h"
#include "flushqp.h"

static void set_nonblock(int fd)
{
	int flags = fcntl(fd, F_GETFL);

	ASSERT_GE(flags, 0);
	ASSERT_EQ(fcntl(fd, F_SETFL, flags | O_NONBLOCK), 0);
}

TEST(async_fd_empty)
{
	struct ibv_context *ctx = open_lo();

	ASSERT_GE(ctx->async_fd, 0);
	ASSERT_EQ(fd_readable(ctx->async_fd, 50), 0);
	ASSERT_EQ(ibv_close_device(ctx), 0);
}

TEST(nonblocking_empty_is_eagain)
{
	struct ibv_context *ctx = open_lo();
	struct ibv_async_event ev;

	set_nonblock(ctx->async_fd);
	errno = 0;
	ASSERT_EQ(ibv_get_async_event(ctx, &ev), -1);
	ASSERT_EQ(errno, EAGAIN);
	errno = 0;
	ASSERT_EQ(ibv_get_async_event(ctx, &ev), -1);
	ASSERT_EQ(errno, EAGAIN);
	ASSERT_EQ(ibv_close_device(ctx), 0);
}

TEST(epoll_on_async_fd)
{
	struct ibv_context *ctx = open_lo();
	struct epoll_event ev = {.events = EPOLLIN | EPOLLET}, out;
	int ep = epoll_create1(EPOLL_CLOEXEC);

	ASSERT_GE(ep, 0);
	set_nonblock(ctx->async_fd);
	ASSERT_EQ(epoll_ctl(ep, EPOLL_CTL_ADD, ctx->async_fd, &ev), 0);
	ASSERT_EQ(epoll_wait(ep, &out, 1, 50), 0);
	ASSERT_EQ(close(ep), 0);
	ASSERT_EQ(ibv_close_device(ctx), 0);
}

struct waiter {
	struct ibv_context *ctx;
	pid_t tid;
	int ret, returned;
	struct ibv_async_event ev;
};

static void *wait_async(void *arg)
{
	struct waiter *w = arg;

	asleep_self(&w->tid);
	w->ret = ibv_get_async_event(w->ctx, &w->ev);
	__atomic_store_n(&w->returned, 1, __ATOMIC_RELEASE);
	return NULL;
}

/*
 * Without O_NONBLOCK the call sleeps in a read of async_fd (as rdma-core's
 * does) until an event comes, then returns it: here the
 * IBV_EVENT_QP_LAST_WQE_REACHED of a QP with an SRQ entering ERR.
 */
TEST(blocking_get_async_event_waits)
{
	struct ibv_srq_init_attr sa = { .attr = { .max_wr = 4, .max_sge = 1 } };
	struct ibv_qp_attr attr = { .qp_state = IBV_QPS_INIT, .port_num = 1 };
	struct ibv_qp_init_attr qa = {
		.cap = { .max_send_wr = 1, .max_send_sge = 1 },
		.qp_type = IBV_QPT_RC,
	};
	struct waiter w = {.ctx = open_lo()};
	struct ibv_pd *pd = ibv_alloc_pd(w.ctx);
	struct ibv_cq *cq = ibv_create_cq(w.ctx, 4, NULL, NULL, 0);
	struct ibv_srq *srq;
	struct ibv_qp *qp;
	pthread_t t;

	ASSERT_NOT_NULL(pd);
	ASSERT_NOT_NULL(cq);
	srq = ibv_create_srq(pd, &sa);
	ASSERT_NOT_NULL(srq);
	qa.send_cq = qa.recv_cq = cq;
	qa.srq = srq;
	qp = ibv_create_qp(pd, &qa);
	ASSERT_NOT_NULL(qp);
	ASSERT_EQ(ibv_modify_qp(qp, &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
				IBV_QP_PORT | IBV_QP_ACCESS_FLAGS), 0);

	ASSERT_EQ(pthread_create(&t, NULL, wait_async, &w), 0);
	ASSERT_ASLEEP_ON_FD(&w.tid, &w.returned, w.ctx->async_fd);
	attr.qp_state = IBV_QPS_ERR;
	ASSERT_EQ(ibv_modify_qp(qp, &attr, IBV_QP_STATE), 0);
	ASSERT_EQ(pthread_join(t, NULL), 0);
	ASSERT_EQ(w.ret, 0);
	ASSERT_EQ(w.ev.event_type, IBV_EVENT_QP_LAST_WQE_REACHED);
	ASSERT(w.ev.element.qp == qp);
	ibv_ack_async_event(&w.ev);
	ASSERT_EQ(ibv_destroy_qp(qp), 0);
	ASSERT_EQ(ibv_destroy_srq(srq), 0);
	ASSERT_EQ(ibv_destroy_cq(cq), 0);
	ASSERT_EQ(ibv_dealloc_pd(pd), 0);
	ASSERT_EQ(ibv_close_device(w.ctx), 0);
}

/* Port and device events concern no object: acking them does nothing. */
TEST(ack_port_event)
{
	struct ibv_async_event ev = {.event_type = IBV_EVENT_PORT_ACTIVE};

	ev.element.port_num = 1;
	ibv_ack_async_event(&ev);
	ev.event_type = IBV_EVENT_DEVICE_FATAL;
	ibv_ack_async_event(&ev);
	ev.event_type = IBV_EVENT_GID_CHANGE;
	ibv_ack_async_event(&ev);
}

TEST(contexts_have_their_own_queue)
{
	struct ibv_context *a = open_lo(), *b = open_lo();

	ASSERT_NE(a->async_fd, b->async_fd);
	set_nonblock(b->async_fd);
	/* O_NONBLOCK is per open file: a stays blocking */
	ASSERT_EQ(fcntl(a->async_fd, F_GETFL) & O_NONBLOCK, 0);
	ASSERT_EQ(ibv_close_device(b), 0);
	ASSERT_EQ(fd_readable(a->async_fd, 0), 0);
	ASSERT_EQ(ibv_close_device(a), 0);
}

/* ------------------------------------------------------------------ */
/* CQ overrun: IBV_EVENT_CQ_ERR (IBA o11-5.2.2)                         */

struct acker {
	struct ibv_async_event ev;
	pid_t destroyer;	/* the thread in ibv_destroy_cq */
	int destroyed;		/* ibv_destroy_cq returned */
	int acked;
};

/* Ack once the destroyer sleeps on the CQ's condition variable, where
 * ibv_destroy_cq waits for the acks (rdma-core's ibv_cmd_destroy_cq). */
static void *ack_when_asleep(void *arg)
{
	struct acker *a = arg;

	ASSERT_ASLEEP_IN_COND(&a->destroyer, &a->destroyed,
			      &a->ev.element.cq->cond);
	__atomic_store_n(&a->acked, 1, __ATOMIC_RELEASE);
	ibv_ack_async_event(&a->ev);
	return NULL;
}

/*
 * More completions than the CQ holds: the CQ reports IBV_EVENT_CQ_ERR on
 * the async fd, with element.cq; ibv_destroy_cq then waits until the
 * event is acknowledged.
 */
TEST(cq_overrun_raises_cq_err)
{
	struct ibv_context *ctx = open_lo();
	struct ibv_cq *cq = ibv_create_cq(ctx, 1, NULL, NULL, 0);
	struct acker a = {.acked = 0};
	struct flush_qp f;
	pthread_t t;
	int i;

	ASSERT_NOT_NULL(cq);
	ASSERT_EQ(cq->cqe, 1);
	flush_qp_create(ctx, cq, &f, 4);
	for (i = 0; i < 3; i++)
		flush_qp_post_recv(&f, (uint64_t)i);
	flush_qp_flush(&f);
	/* the QP may report its own error first: ack and look further */
	for (i = 0; i < 4; i++) {
		ASSERT_EQ(fd_readable(ctx->async_fd, 2000), 1);
		ASSERT_EQ(ibv_get_async_event(ctx, &a.ev), 0);
		if (a.ev.event_type == IBV_EVENT_CQ_ERR)
			break;
		ibv_ack_async_event(&a.ev);
	}
	ASSERT_EQ(a.ev.event_type, IBV_EVENT_CQ_ERR);
	ASSERT(a.ev.element.cq == cq);
	flush_qp_destroy(&f);

	asleep_self(&a.destroyer);
	ASSERT_EQ(pthread_create(&t, NULL, ack_when_asleep, &a), 0);
	ASSERT_EQ(ibv_destroy_cq(cq), 0);
	__atomic_store_n(&a.destroyed, 1, __ATOMIC_RELEASE);
	ASSERT_EQ(__atomic_load_n(&a.acked, __ATOMIC_ACQUIRE), 1);
	ASSERT_EQ(pthread_join(t, NULL), 0);
	ASSERT_EQ(ibv_close_device(ctx), 0);
}
