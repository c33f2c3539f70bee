// SPDX-License-Identifier: MIT
/*
 * Blocking verbs and signals: ibv_get_cq_event and ibv_get_async_event
 * end with -1 and errno EINTR when a signal handler installed without
 * SA_RESTART runs while they wait, and wait on after one installed with
 * it, as rdma-core's read() of the kernel's event file does (signal(7):
 * a read of a "slow" device is restarted only under SA_RESTART).
 * Programs rely on it: qperf ends a timed wait with SIGALRM.
 *
 * The signals are real (pthread_kill on the waiting thread), sent again
 * and again until the wait ends, so that they land while it sleeps.
 */
#include <unistd.h>

#include "harness.h"
#include "kick.h"
#include "asleep.h"
#include "common.h"
#include "flushqp.h"

struct chan_cq {
	struct ibv_context *ctx;
	struct ibv_comp_channel *ch;
	struct ibv_cq *cq;
	struct flush_qp f;
};

static void chan_cq_open(struct chan_cq *c)
{
	c->ctx = open_lo();
	c->ch = ibv_create_comp_channel(c->ctx);
	ASSERT_NOT_NULL(c->ch);
	c->cq = ibv_create_cq(c->ctx, 16, c, c->ch, 0);
	ASSERT_NOT_NULL(c->cq);
	flush_qp_create(c->ctx, c->cq, &c->f, 8);
	flush_qp_post_recv(&c->f, 1);
	ASSERT_EQ(ibv_req_notify_cq(c->cq, 0), 0);
}

/* The completion event: the QP's receive WR flushes. */
static void fire_cq_event(void *arg)
{
	flush_qp_flush(&((struct chan_cq *)arg)->f);
}

TEST(cq_event_eintr_without_sa_restart)
{
	struct chan_cq c;
	struct kicker k;
	struct ibv_cq *cq;
	void *cq_ctx;
	int ret, err;

	chan_cq_open(&c);
	kick_install(0);
	kick_start(&k, 0, NULL, NULL);
	ret = ibv_get_cq_event(c.ch, &cq, &cq_ctx);
	err = errno;
	kick_stop(&k);
	ASSERT_EQ(ret, -1);
	ASSERT_EQ(err, EINTR);
	ASSERT_GE(kick_hits, 1);
	/* the channel still works: the event that comes later is there */
	fire_cq_event(&c);
	ASSERT_EQ(ibv_get_cq_event(c.ch, &cq, &cq_ctx), 0);
	ASSERT(cq == c.cq);
	ibv_ack_cq_events(c.cq, 1);
}

TEST(cq_event_restarts_with_sa_restart)
{
	struct chan_cq c;
	struct kicker k;
	struct ibv_cq *cq;
	void *cq_ctx;
	int ret;

	chan_cq_open(&c);
	kick_install(SA_RESTART);
	/* 50 signals while it waits, then the event */
	kick_start(&k, 50, fire_cq_event, &c);
	ret = ibv_get_cq_event(c.ch, &cq, &cq_ctx);
	kick_stop(&k);
	ASSERT_EQ(ret, 0);
	ASSERT(cq == c.cq);
	ASSERT(cq_ctx == &c);
	ASSERT_GT(kick_hits, 0);
	ibv_ack_cq_events(c.cq, 1);
}

/* Two threads asleep on one channel, two CQs' events: both wake (the
 * first reader's wait takes the eventfd's counter and must give it back
 * while an event remains). */
struct sleeper {
	struct ibv_comp_channel *ch;
	struct ibv_cq *got;
	pid_t tid;
	int ret, returned;
};

static void *sleep_on_channel(void *p)
{
	struct sleeper *s = p;
	void *ctx;

	asleep_self(&s->tid);
	s->ret = ibv_get_cq_event(s->ch, &s->got, &ctx);
	__atomic_store_n(&s->returned, 1, __ATOMIC_RELEASE);
	return NULL;
}

TEST(two_waiters_two_events)
{
	struct chan_cq a, b;
	struct sleeper s1, s2;
	pthread_t t1, t2;

	chan_cq_open(&a);
	/* a second CQ on the same channel */
	b = a;
	b.cq = ibv_create_cq(a.ctx, 16, &b, a.ch, 0);
	ASSERT_NOT_NULL(b.cq);
	flush_qp_create(a.ctx, b.cq, &b.f, 8);
	flush_qp_post_recv(&b.f, 1);
	ASSERT_EQ(ibv_req_notify_cq(b.cq, 0), 0);

	s1 = (struct sleeper){ .ch = a.ch, .ret = 99 };
	s2 = s1;
	ASSERT_EQ(pthread_create(&t1, NULL, sleep_on_channel, &s1), 0);
	ASSERT_EQ(pthread_create(&t2, NULL, sleep_on_channel, &s2), 0);
	ASSERT_ASLEEP_ON_FD(&s1.tid, &s1.returned, a.ch->fd);
	ASSERT_ASLEEP_ON_FD(&s2.tid, &s2.returned, a.ch->fd);
	/* both events at once: one counter write may cover both */
	fire_cq_event(&a);
	fire_cq_event(&b);
	ASSERT_EQ(pthread_join(t1, NULL), 0);
	ASSERT_EQ(pthread_join(t2, NULL), 0);
	ASSERT_EQ(s1.ret, 0);
	ASSERT_EQ(s2.ret, 0);
	ASSERT((s1.got == a.cq && s2.got == b.cq) ||
	       (s1.got == b.cq && s2.got == a.cq));
	ibv_ack_cq_events(a.cq, 1);
	ibv_ack_cq_events(b.cq, 1);
}

/* An async event with no peer: a QP on an SRQ that enters the error
 * state raises IBV_EVENT_QP_LAST_WQE_REACHED (IBA 11.5.2.1 / o10-37). */
struct srq_qp {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_srq *srq;
	struct ibv_qp *qp;
};

static void srq_qp_open(struct srq_qp *s)
{
	struct ibv_srq_init_attr sa = { .attr = { .max_wr = 4, .max_sge = 1 } };
	struct ibv_qp_init_attr qa;
	struct ibv_qp_attr attr = {
		.qp_state = IBV_QPS_INIT,
		.port_num = 1,
	};

	s->ctx = open_lo();
	s->pd = ibv_alloc_pd(s->ctx);
	ASSERT_NOT_NULL(s->pd);
	s->cq = ibv_create_cq(s->ctx, 4, NULL, NULL, 0);
	ASSERT_NOT_NULL(s->cq);
	s->srq = ibv_create_srq(s->pd, &sa);
	ASSERT_NOT_NULL(s->srq);
	memset(&qa, 0, sizeof(qa));
	qa.send_cq = s->cq;
	qa.recv_cq = s->cq;
	qa.srq = s->srq;
	qa.qp_type = IBV_QPT_RC;
	qa.cap.max_send_wr = 1;
	qa.cap.max_send_sge = 1;
	s->qp = ibv_create_qp(s->pd, &qa);
	ASSERT_NOT_NULL(s->qp);
	ASSERT_EQ(ibv_modify_qp(s->qp, &attr,
				IBV_QP_STATE | IBV_QP_PKEY_INDEX |
					IBV_QP_PORT | IBV_QP_ACCESS_FLAGS),
		  0);
}

static void fire_async_event(void *arg)
{
	struct srq_qp *s = arg;
	struct ibv_qp_attr attr = { .qp_state = IBV_QPS_ERR };

	ibv_modify_qp(s->qp, &attr, IBV_QP_STATE);
}

TEST(async_event_eintr_without_sa_restart)
{
	struct srq_qp s;
	struct kicker k;
	struct ibv_async_event ev;
	int ret, err;

	srq_qp_open(&s);
	kick_install(0);
	kick_start(&k, 0, NULL, NULL);
	ret = ibv_get_async_event(s.ctx, &ev);
	err = errno;
	kick_stop(&k);
	ASSERT_EQ(ret, -1);
	ASSERT_EQ(err, EINTR);
	ASSERT_GE(kick_hits, 1);
	fire_async_event(&s);
	ASSERT_EQ(ibv_get_async_event(s.ctx, &ev), 0);
	ASSERT_EQ(ev.event_type, IBV_EVENT_QP_LAST_WQE_REACHED);
	ibv_ack_async_event(&ev);
}

TEST(async_event_restarts_with_sa_restart)
{
	struct srq_qp s;
	struct kicker k;
	struct ibv_async_event ev;
	int ret;

	srq_qp_open(&s);
	kick_install(SA_RESTART);
	kick_start(&k, 50, fire_async_event, &s);
	ret = ibv_get_async_event(s.ctx, &ev);
	kick_stop(&k);
	ASSERT_EQ(ret, 0);
	ASSERT_EQ(ev.event_type, IBV_EVENT_QP_LAST_WQE_REACHED);
	ASSERT(ev.element.qp == s.qp);
	ASSERT_GT(kick_hits, 0);
	ibv_ack_async_event(&ev);
}
