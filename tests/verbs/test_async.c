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
#include <time.h>
#include <unistd.h>
#include <sys/epoll.h>

#include "harness.h"
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
	volatile int returned;
};

static void *wait_async(void *arg)
{
	struct waiter *w = arg;
	struct ibv_async_event ev;

	ibv_get_async_event(w->ctx, &ev);
	w->returned = 1;
	return NULL;
}

TEST(blocking_get_async_event_waits)
{
	struct waiter w = {.ctx = open_lo()};
	pthread_t t;

	ASSERT_EQ(pthread_create(&t, NULL, wait_async, &w), 0);
	poll(NULL, 0, 200);
	ASSERT_EQ(w.returned, 0);
	/* the thread dies with the test process */
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
	volatile int acked;
};

static void *ack_later(void *arg)
{
	struct acker *a = arg;

	poll(NULL, 0, 300);
	a->acked = 1;
	ibv_ack_async_event(&a->ev);
	return NULL;
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
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
	uint64_t t0;
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

	t0 = now_ms();
	ASSERT_EQ(pthread_create(&t, NULL, ack_later, &a), 0);
	ASSERT_EQ(ibv_destroy_cq(cq), 0);
	ASSERT_EQ(a.acked, 1);
	ASSERT_GE(now_ms() - t0, 250);
	ASSERT_EQ(pthread_join(t, NULL), 0);
	ASSERT_EQ(ibv_close_device(ctx), 0);
}
