// SPDX-License-Identifier: MIT
/*
 * Completion channels: ibv_create_comp_channel/ibv_destroy_comp_channel,
 * the channel fd with poll, epoll and O_NONBLOCK, ibv_get_cq_event and
 * ibv_ack_cq_events, and the rules of ibv_destroy_cq about events.
 *
 * Reference: rdma-core 44 verbs.c (ibv_destroy_comp_channel: EBUSY while
 * CQs use the channel; ibv_get_cq_event: read() of the channel fd, so -1
 * with EAGAIN on an empty non-blocking fd), cmd_cq.c (ibv_cmd_destroy_cq
 * waits until every reported event is acknowledged), the kernel's
 * ib_uverbs_release_ucq (undelivered events of a destroyed CQ are
 * dropped), man ibv_get_cq_event(3).
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

TEST(create_destroy)
{
	struct ibv_context *ctx = open_lo();
	struct ibv_comp_channel *ch = ibv_create_comp_channel(ctx);

	ASSERT_NOT_NULL(ch);
	ASSERT(ch->context == ctx);
	ASSERT_GE(ch->fd, 0);
	ASSERT_NE(ch->fd, ctx->async_fd);
	ASSERT_GE(fcntl(ch->fd, F_GETFD), 0);
	ASSERT_EQ(ch->refcnt, 0);
	ASSERT_EQ(ibv_destroy_comp_channel(ch), 0);
	ASSERT_EQ(ibv_close_device(ctx), 0);
}

TEST(channel_with_cqs_is_ebusy)
{
	struct ibv_context *ctx = open_lo();
	struct ibv_comp_channel *ch = ibv_create_comp_channel(ctx);
	struct ibv_cq *cq1, *cq2;

	ASSERT_NOT_NULL(ch);
	cq1 = ibv_create_cq(ctx, 4, NULL, ch, 0);
	cq2 = ibv_create_cq(ctx, 4, NULL, ch, 0);
	ASSERT_NOT_NULL(cq1);
	ASSERT_NOT_NULL(cq2);
	ASSERT(cq1->channel == ch);
	ASSERT_EQ(ch->refcnt, 2);
	ASSERT_EQ(ibv_destroy_comp_channel(ch), EBUSY);
	ASSERT_EQ(ibv_destroy_cq(cq1), 0);
	ASSERT_EQ(ch->refcnt, 1);
	ASSERT_EQ(ibv_destroy_comp_channel(ch), EBUSY);
	ASSERT_EQ(ibv_destroy_cq(cq2), 0);
	ASSERT_EQ(ibv_destroy_comp_channel(ch), 0);
	ASSERT_EQ(ibv_close_device(ctx), 0);
}

/* A failed CQ creation takes no reference on the channel. */
TEST(failed_cq_keeps_no_reference)
{
	struct ibv_context *ctx = open_lo();
	struct ibv_comp_channel *ch = ibv_create_comp_channel(ctx);

	ASSERT_NOT_NULL(ch);
	ASSERT_NULL_ERRNO(ibv_create_cq(ctx, 0, NULL, ch, 0), EINVAL);
	ASSERT_NULL_ERRNO(ibv_create_cq(ctx, 4, NULL, ch, 99), EINVAL);
	ASSERT_EQ(ch->refcnt, 0);
	ASSERT_EQ(ibv_destroy_comp_channel(ch), 0);
	ASSERT_EQ(ibv_close_device(ctx), 0);
}

TEST(empty_nonblocking_is_eagain)
{
	struct ibv_context *ctx = open_lo();
	struct ibv_comp_channel *ch = ibv_create_comp_channel(ctx);
	struct ibv_cq *cq = ibv_create_cq(ctx, 4, NULL, ch, 0), *got = NULL;
	void *got_ctx = NULL;

	ASSERT_NOT_NULL(cq);
	ASSERT_EQ(ibv_req_notify_cq(cq, 0), 0);
	ASSERT_EQ(fd_readable(ch->fd, 0), 0);
	set_nonblock(ch->fd);
	errno = 0;
	ASSERT_EQ(ibv_get_cq_event(ch, &got, &got_ctx), -1);
	ASSERT_EQ(errno, EAGAIN);
	ASSERT_NULL(got);
	ASSERT_EQ(ibv_destroy_cq(cq), 0);
	ASSERT_EQ(ibv_destroy_comp_channel(ch), 0);
	ASSERT_EQ(ibv_close_device(ctx), 0);
}

TEST(epoll_on_channel_fd)
{
	struct ibv_context *ctx = open_lo();
	struct ibv_comp_channel *ch = ibv_create_comp_channel(ctx);
	struct epoll_event ev = {.events = EPOLLIN}, out;
	int ep = epoll_create1(EPOLL_CLOEXEC);

	ASSERT_GE(ep, 0);
	ASSERT_EQ(epoll_ctl(ep, EPOLL_CTL_ADD, ch->fd, &ev), 0);
	ASSERT_EQ(epoll_wait(ep, &out, 1, 50), 0);
	ASSERT_EQ(close(ep), 0);
	ASSERT_EQ(ibv_destroy_comp_channel(ch), 0);
	ASSERT_EQ(ibv_close_device(ctx), 0);
}

/* ------------------------------------------------------------------ */
/* With completions (a QP whose receive WRs flush)                     */

struct cq_on_channel {
	struct ibv_context *ctx;
	struct ibv_comp_channel *ch;
	struct ibv_cq *cq;
	struct flush_qp f;
	int cookie;
};

static void cq_on_channel(struct cq_on_channel *c)
{
	c->ctx = open_lo();
	c->ch = ibv_create_comp_channel(c->ctx);
	ASSERT_NOT_NULL(c->ch);
	c->cq = ibv_create_cq(c->ctx, 16, &c->cookie, c->ch, 0);
	ASSERT_NOT_NULL(c->cq);
	flush_qp_create(c->ctx, c->cq, &c->f, 8);
}

struct waiter {
	struct ibv_comp_channel *ch;
	pid_t tid;
	int ret, returned;
	struct ibv_cq *cq;
	void *cq_context;
};

static void *wait_cq_event(void *arg)
{
	struct waiter *w = arg;

	asleep_self(&w->tid);
	w->ret = ibv_get_cq_event(w->ch, &w->cq, &w->cq_context);
	__atomic_store_n(&w->returned, 1, __ATOMIC_RELEASE);
	return NULL;
}

/* Without O_NONBLOCK the call sleeps in a read of the channel's fd (as
 * rdma-core's does) until an event comes, then returns that event. */
TEST(blocking_get_cq_event_waits)
{
	struct cq_on_channel c;
	struct waiter w = {0};
	struct ibv_wc wc[2];
	pthread_t t;

	cq_on_channel(&c);
	flush_qp_post_recv(&c.f, 1);
	ASSERT_EQ(ibv_req_notify_cq(c.cq, 0), 0);
	w.ch = c.ch;
	ASSERT_EQ(pthread_create(&t, NULL, wait_cq_event, &w), 0);
	ASSERT_ASLEEP_ON_FD(&w.tid, &w.returned, c.ch->fd);
	flush_qp_flush(&c.f);
	ASSERT_EQ(pthread_join(t, NULL), 0);
	ASSERT_EQ(w.ret, 0);
	ASSERT(w.cq == c.cq);
	ASSERT(w.cq_context == &c.cookie);
	ASSERT_EQ(poll_n(c.cq, wc, 1, 1000), 1);
	ASSERT_EQ(wc[0].status, IBV_WC_WR_FLUSH_ERR);
	ibv_ack_cq_events(c.cq, 1);
	flush_qp_destroy(&c.f);
	ASSERT_EQ(ibv_destroy_cq(c.cq), 0);
	ASSERT_EQ(ibv_destroy_comp_channel(c.ch), 0);
	ASSERT_EQ(ibv_close_device(c.ctx), 0);
}

TEST(cq_event_after_arm)
{
	struct cq_on_channel c;
	struct ibv_cq *got;
	void *got_ctx;
	struct ibv_wc wc[2];

	cq_on_channel(&c);
	flush_qp_post_recv(&c.f, 1);
	ASSERT_EQ(ibv_req_notify_cq(c.cq, 0), 0);
	flush_qp_flush(&c.f);
	ASSERT_EQ(fd_readable(c.ch->fd, 2000), 1);
	ASSERT_EQ(ibv_get_cq_event(c.ch, &got, &got_ctx), 0);
	ASSERT(got == c.cq);
	ASSERT(got_ctx == &c.cookie);
	/* one event per arming */
	ASSERT_EQ(fd_readable(c.ch->fd, 0), 0);
	ASSERT_EQ(poll_n(c.cq, wc, 1, 1000), 1);
	ASSERT_EQ(wc[0].status, IBV_WC_WR_FLUSH_ERR);
	ibv_ack_cq_events(c.cq, 1);
	ASSERT_EQ(c.cq->comp_events_completed, 1);
	flush_qp_destroy(&c.f);
	ASSERT_EQ(ibv_destroy_cq(c.cq), 0);
	ASSERT_EQ(ibv_destroy_comp_channel(c.ch), 0);
	ASSERT_EQ(ibv_close_device(c.ctx), 0);
}

/* No arming, no event; solicited-only arming fires on an error
 * completion (IBA 11.4.2.2; rxe treats flushes as solicited). */
TEST(cq_event_arming_rules)
{
	struct cq_on_channel c;
	struct ibv_cq *got;
	void *got_ctx;
	struct ibv_wc wc[2];

	cq_on_channel(&c);
	flush_qp_post_recv(&c.f, 1);
	flush_qp_flush(&c.f);
	ASSERT_EQ(poll_n(c.cq, wc, 1, 2000), 1);
	ASSERT_EQ(fd_readable(c.ch->fd, 100), 0);

	ASSERT_EQ(ibv_req_notify_cq(c.cq, 1), 0);
	flush_qp_post_recv(&c.f, 2); /* flushed at once in ERR */
	ASSERT_EQ(fd_readable(c.ch->fd, 2000), 1);
	ASSERT_EQ(ibv_get_cq_event(c.ch, &got, &got_ctx), 0);
	ASSERT(got == c.cq);
	ibv_ack_cq_events(got, 1);
	ASSERT_EQ(poll_n(c.cq, wc, 1, 1000), 1);
	ASSERT_EQ(wc[0].wr_id, 2);
	flush_qp_destroy(&c.f);
	ASSERT_EQ(ibv_destroy_cq(c.cq), 0);
	ASSERT_EQ(ibv_destroy_comp_channel(c.ch), 0);
	ASSERT_EQ(ibv_close_device(c.ctx), 0);
}

struct acker {
	struct ibv_cq *cq;
	pid_t destroyer;	/* the thread in ibv_destroy_cq */
	int destroyed;		/* ibv_destroy_cq returned */
	int acked;
};

/* Ack once the destroyer sleeps on the CQ's condition variable, where
 * ibv_destroy_cq waits for the acks (rdma-core's ibv_cmd_destroy_cq). */
static void *ack_when_asleep(void *arg)
{
	struct acker *a = arg;

	ASSERT_ASLEEP_IN_COND(&a->destroyer, &a->destroyed, &a->cq->cond);
	__atomic_store_n(&a->acked, 1, __ATOMIC_RELEASE);
	ibv_ack_cq_events(a->cq, 1);
	return NULL;
}

/* man ibv_get_cq_event: ibv_destroy_cq() waits for the acknowledgement of
 * every event it reported. */
TEST(destroy_cq_waits_for_ack)
{
	struct cq_on_channel c;
	struct acker a = {0};
	struct ibv_cq *got;
	void *got_ctx;
	pthread_t t;

	cq_on_channel(&c);
	flush_qp_post_recv(&c.f, 1);
	ASSERT_EQ(ibv_req_notify_cq(c.cq, 0), 0);
	flush_qp_flush(&c.f);
	ASSERT_EQ(fd_readable(c.ch->fd, 2000), 1);
	ASSERT_EQ(ibv_get_cq_event(c.ch, &got, &got_ctx), 0);
	flush_qp_destroy(&c.f);

	a.cq = got;
	asleep_self(&a.destroyer);
	ASSERT_EQ(pthread_create(&t, NULL, ack_when_asleep, &a), 0);
	ASSERT_EQ(ibv_destroy_cq(c.cq), 0);
	__atomic_store_n(&a.destroyed, 1, __ATOMIC_RELEASE);
	ASSERT_EQ(__atomic_load_n(&a.acked, __ATOMIC_ACQUIRE), 1);
	ASSERT_EQ(pthread_join(t, NULL), 0);
	ASSERT_EQ(ibv_destroy_comp_channel(c.ch), 0);
	ASSERT_EQ(ibv_close_device(c.ctx), 0);
}

/* Undelivered events of a destroyed CQ are dropped: nothing to wait for. */
TEST(destroy_cq_drops_undelivered_events)
{
	struct cq_on_channel c;
	struct ibv_cq *got = NULL;
	void *got_ctx;

	cq_on_channel(&c);
	flush_qp_post_recv(&c.f, 1);
	ASSERT_EQ(ibv_req_notify_cq(c.cq, 0), 0);
	flush_qp_flush(&c.f);
	ASSERT_EQ(fd_readable(c.ch->fd, 2000), 1);
	flush_qp_destroy(&c.f);
	ASSERT_EQ(ibv_destroy_cq(c.cq), 0);
	ASSERT_EQ(fd_readable(c.ch->fd, 0), 0);
	set_nonblock(c.ch->fd);
	errno = 0;
	ASSERT_EQ(ibv_get_cq_event(c.ch, &got, &got_ctx), -1);
	ASSERT_EQ(errno, EAGAIN);
	ASSERT_EQ(ibv_destroy_comp_channel(c.ch), 0);
	ASSERT_EQ(ibv_close_device(c.ctx), 0);
}

/* Events of two CQs on one channel come with the right CQ and context;
 * the counters are per CQ, and one ack may cover several events. */
TEST(two_cqs_one_channel)
{
	struct ibv_context *ctx = open_lo();
	struct ibv_comp_channel *ch = ibv_create_comp_channel(ctx);
	struct ibv_cq *cq[2], *got;
	struct flush_qp f[2];
	int cookie[2], seen[2] = {0, 0}, i;
	void *got_ctx;

	ASSERT_NOT_NULL(ch);
	for (i = 0; i < 2; i++) {
		cq[i] = ibv_create_cq(ctx, 8, &cookie[i], ch, 0);
		ASSERT_NOT_NULL(cq[i]);
		flush_qp_create(ctx, cq[i], &f[i], 2);
		flush_qp_post_recv(&f[i], (uint64_t)i);
		ASSERT_EQ(ibv_req_notify_cq(cq[i], 0), 0);
	}
	for (i = 0; i < 2; i++)
		flush_qp_flush(&f[i]);
	for (i = 0; i < 2; i++) {
		ASSERT_EQ(fd_readable(ch->fd, 2000), 1);
		ASSERT_EQ(ibv_get_cq_event(ch, &got, &got_ctx), 0);
		ASSERT(got == cq[0] || got == cq[1]);
		ASSERT(got_ctx == (got == cq[0] ? &cookie[0] : &cookie[1]));
		seen[got == cq[1]]++;
	}
	ASSERT_EQ(seen[0], 1);
	ASSERT_EQ(seen[1], 1);
	for (i = 0; i < 2; i++) {
		ibv_ack_cq_events(cq[i], 1);
		flush_qp_destroy(&f[i]);
		ASSERT_EQ(ibv_destroy_cq(cq[i]), 0);
	}
	ASSERT_EQ(ibv_destroy_comp_channel(ch), 0);
	ASSERT_EQ(ibv_close_device(ctx), 0);
}
