// SPDX-License-Identifier: MIT
/*
 * Asynchronous events and completion events caused by traffic on the
 * same-host path, where the peer that acts on this process's queues is
 * another process (its doorbell wakes our engine thread, which delivers
 * what a NIC would have):
 *
 *   IBV_EVENT_COMM_EST             first message received in RTR
 *   IBV_EVENT_QP_LAST_WQE_REACHED  a QP with an SRQ enters ERR
 *   IBV_EVENT_SRQ_LIMIT_REACHED    an armed SRQ drops below its limit
 *   IBV_EVENT_CQ_ERR               a CQ overruns; its QPs go to ERR
 *   completion channels            armed for all / solicited only
 *
 * and that ibv_destroy_* waits for the acknowledgement of the events it
 * handed out (IBV_EVENT_QP_ACCESS_ERR: see test_errors.c).
 */
#include <arpa/inet.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "asleep.h"
#include "ep.h"

#define GRH	40
#define DST	(1u << 20)

static void modify_to(struct ibv_qp *qp, enum ibv_qp_state state)
{
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_state = state;
	ASSERT_EQ(ibv_modify_qp(qp, &a, IBV_QP_STATE), 0);
}

/*
 * A destroy verb run in a thread, to see that it waits for an ack: it
 * must sleep on the object's condition variable (rdma-core's
 * ibv_cmd_destroy_* wait there) before the ack is given.
 */
struct destroyer {
	pthread_t thread;
	int (*fn)(void *obj);
	void *obj;
	pid_t tid;
	int ret;
	int done;
};

static void *destroyer_main(void *arg)
{
	struct destroyer *d = arg;

	asleep_self(&d->tid);
	d->ret = d->fn(d->obj);
	__atomic_store_n(&d->done, 1, __ATOMIC_RELEASE);
	return NULL;
}

/* cond: the object's (&qp->cond, &cq->cond, &srq->cond). */
static void destroyer_start(struct destroyer *d, int (*fn)(void *), void *obj,
			    pthread_cond_t *cond)
{
	d->fn = fn;
	d->obj = obj;
	d->tid = 0;
	d->done = 0;
	ASSERT_EQ(pthread_create(&d->thread, NULL, destroyer_main, d), 0);
	ASSERT_ASLEEP_IN_COND(&d->tid, &d->done, cond);
}

static void destroyer_join(struct destroyer *d)
{
	ASSERT_EQ(pthread_join(d->thread, NULL), 0);
	ASSERT_EQ(d->ret, 0);
}

static int destroy_qp(void *p) { return ibv_destroy_qp(p); }
static int destroy_cq(void *p) { return ibv_destroy_cq(p); }
static int destroy_srq(void *p) { return ibv_destroy_srq(p); }

/* ------------------------------------------------------------------ */
/* COMM_EST                                                            */

/*
 * IBA 11.6.3.1: the first message a QP receives in RTR raises
 * IBV_EVENT_COMM_EST, once; the QP stays in RTR (the application moves it
 * to RTS).
 */
static void comm_est_responder(struct ep *b, int fd)
{
	struct ibv_async_event ev;
	struct ibv_wc wc;

	ASSERT_EQ(ep_post_recv(b, 0xb1, DST, 4096), 0);
	ASSERT_EQ(ep_post_recv(b, 0xb2, DST + 4096, 4096), 0);
	if (fd >= 0)
		duo_signal(fd, 'p');
	wc = ep_expect(b->rcq, b->qp, 0xb1, IBV_WC_SUCCESS);
	ASSERT_EQ(wc.byte_len, 64);
	ep_wait_async(b->ctx, IBV_EVENT_COMM_EST, &ev);
	ASSERT(ev.element.qp == b->qp);
	ASSERT_EQ(ep_qp_state(b->qp), IBV_QPS_RTR);
	ibv_ack_async_event(&ev);
	if (fd >= 0)
		duo_signal(fd, '2');
	/* the second message raises nothing */
	ep_expect(b->rcq, b->qp, 0xb2, IBV_WC_SUCCESS);
	ASSERT_EQ(ep_qp_state(b->qp), IBV_QPS_RTR);
	ep_expect_no_async(b->ctx);
}

static void comm_est_child(int fd, void *arg)
{
	struct ep_opts o;
	struct ep b;

	(void)arg;
	ep_default_opts(&o, IBV_QPT_RC);
	ep_create(&b, &o);
	ep_exchange(fd, &b.self, &b.peer);
	ep_to_rtr(&b, &o);		/* and no further */
	comm_est_responder(&b, fd);
	duo_signal(fd, 'c');
	ep_destroy(&b);
}

TEST(comm_est_two_process)
{
	struct ep_opts o;
	struct duo d;
	struct ep a;

	duo_fork(&d, comm_est_child, NULL);
	ep_default_opts(&o, IBV_QPT_RC);
	ep_open_remote(&a, &o, d.fd);
	duo_expect(d.fd, 'p');
	ASSERT_EQ(ep_post(&a, 0xa1, IBV_WR_SEND, 0, 64, 0, 0), 0);
	ep_expect(a.scq, a.qp, 0xa1, IBV_WC_SUCCESS);
	duo_expect(d.fd, '2');
	ASSERT_EQ(ep_post(&a, 0xa2, IBV_WR_SEND, 0, 64, 0, 0), 0);
	ep_expect(a.scq, a.qp, 0xa2, IBV_WC_SUCCESS);
	duo_expect(d.fd, 'c');
	duo_wait(&d);
	ep_destroy(&a);
}

TEST(comm_est_same_process)
{
	struct ibv_async_event ev;
	struct ep_opts o;
	struct ep a, b;

	ep_default_opts(&o, IBV_QPT_RC);
	ep_create(&a, &o);
	ep_create(&b, &o);
	a.peer = b.self;
	b.peer = a.self;
	ep_connect(&a, &o);
	ep_to_rtr(&b, &o);
	ASSERT_EQ(ep_post_recv(&b, 0xb1, DST, 4096), 0);
	ASSERT_EQ(ep_post(&a, 0xa1, IBV_WR_RDMA_WRITE_WITH_IMM, 0, 64,
			  DST + 8192, 0), 0);
	ep_expect(a.scq, a.qp, 0xa1, IBV_WC_SUCCESS);
	ep_expect(b.rcq, b.qp, 0xb1, IBV_WC_SUCCESS);
	ep_wait_async(b.ctx, IBV_EVENT_COMM_EST, &ev);
	ASSERT(ev.element.qp == b.qp);
	ibv_ack_async_event(&ev);
	ASSERT_EQ(ep_qp_state(b.qp), IBV_QPS_RTR);
	/* the requester raises nothing of its own */
	ep_expect_no_async(a.ctx);
	ep_destroy(&a);
	ep_destroy(&b);
}

/* ibv_destroy_qp waits until the event it handed out is acknowledged */
TEST(destroy_qp_waits_for_comm_est_ack)
{
	struct ibv_async_event ev;
	struct destroyer d;
	struct ep_opts o;
	struct ep a, b;

	ep_default_opts(&o, IBV_QPT_RC);
	ep_create(&a, &o);
	ep_create(&b, &o);
	a.peer = b.self;
	b.peer = a.self;
	ep_connect(&a, &o);
	ep_to_rtr(&b, &o);
	ASSERT_EQ(ep_post_recv(&b, 0xb1, DST, 4096), 0);
	ASSERT_EQ(ep_post(&a, 0xa1, IBV_WR_SEND, 0, 8, 0, 0), 0);
	ep_expect(a.scq, a.qp, 0xa1, IBV_WC_SUCCESS);
	ep_wait_async(b.ctx, IBV_EVENT_COMM_EST, &ev);
	ASSERT(ev.element.qp == b.qp);

	destroyer_start(&d, destroy_qp, b.qp, &b.qp->cond);
	ibv_ack_async_event(&ev);
	destroyer_join(&d);
	b.qp = NULL;
	ep_destroy(&a);
	ep_destroy(&b);
}

/* ------------------------------------------------------------------ */
/* LAST_WQE_REACHED                                                    */

/*
 * IBA 11.6.3.1 (o11-5.1.3.1): a QP attached to an SRQ that enters ERR
 * raises IBV_EVENT_QP_LAST_WQE_REACHED; the SRQ's WQEs are not its own
 * and are not flushed.
 */
TEST(last_wqe_reached_on_modify_to_error)
{
	struct ibv_async_event ev;
	struct ibv_srq_attr sa;
	struct ep_opts o;
	struct ep a, b;

	ep_default_opts(&o, IBV_QPT_RC);
	o.use_srq = true;
	ep_pair(&a, &o, &b, &o);
	ASSERT_EQ(ep_post_recv(&b, 0xb1, DST, 4096), 0);
	ASSERT_EQ(ep_post_recv(&b, 0xb2, DST + 4096, 4096), 0);
	ASSERT_EQ(ep_post(&a, 0xa1, IBV_WR_SEND, 0, 8, 0, 0), 0);
	ep_expect(a.scq, a.qp, 0xa1, IBV_WC_SUCCESS);
	ep_expect(b.rcq, b.qp, 0xb1, IBV_WC_SUCCESS);

	modify_to(b.qp, IBV_QPS_ERR);
	ep_wait_async(b.ctx, IBV_EVENT_QP_LAST_WQE_REACHED, &ev);
	ASSERT(ev.element.qp == b.qp);
	ep_expect_empty(b.rcq);		/* 0xb2 stays in the SRQ */
	ep_expect_no_async(b.ctx);

	/* not acknowledged: destroy waits */
	{
		struct destroyer d;

		destroyer_start(&d, destroy_qp, b.qp, &b.qp->cond);
		ibv_ack_async_event(&ev);
		destroyer_join(&d);
		b.qp = NULL;
	}
	ASSERT_EQ(ibv_query_srq(b.srq, &sa), 0);
	ep_destroy(&a);
	ep_destroy(&b);
}

/* ... and when an error moves it there: a remote access violation, from
 * another process */
static void last_wqe_child(int fd, void *arg)
{
	struct ibv_async_event ev;
	bool access = false, last = false;
	struct ep_opts o;
	struct ep b;
	int i;

	(void)arg;
	ep_default_opts(&o, IBV_QPT_RC);
	o.use_srq = true;
	ep_open_remote(&b, &o, fd);
	ASSERT_EQ(ep_post_recv(&b, 0xb1, DST, 4096), 0);
	duo_signal(fd, 'p');
	for (i = 0; i < 2; i++) {
		ASSERT(ep_readable(b.ctx->async_fd, 10000));
		ASSERT_EQ(ibv_get_async_event(b.ctx, &ev), 0);
		ASSERT(ev.element.qp == b.qp);
		if (ev.event_type == IBV_EVENT_QP_ACCESS_ERR && !access)
			access = true;
		else if (ev.event_type == IBV_EVENT_QP_LAST_WQE_REACHED &&
			 !last)
			last = true;
		else
			harness_fail(__FILE__, __LINE__, "event %s",
				     ibv_event_type_str(ev.event_type));
		ibv_ack_async_event(&ev);
	}
	ASSERT_EQ(ep_qp_state(b.qp), IBV_QPS_ERR);
	ep_expect_empty(b.rcq);
	ep_expect_no_async(b.ctx);
	duo_signal(fd, 'c');
	ep_destroy(&b);
}

TEST(last_wqe_reached_on_access_error_two_process)
{
	struct ep_opts o;
	struct duo d;
	struct ep a;

	duo_fork(&d, last_wqe_child, NULL);
	ep_default_opts(&o, IBV_QPT_RC);
	ep_open_remote(&a, &o, d.fd);
	duo_expect(d.fd, 'p');
	a.peer.rkey ^= 0x5a5;
	ASSERT_EQ(ep_post(&a, 0xa1, IBV_WR_RDMA_WRITE, 0, 8, DST, 0), 0);
	ep_expect(a.scq, a.qp, 0xa1, IBV_WC_REM_ACCESS_ERR);
	duo_expect(d.fd, 'c');
	duo_wait(&d);
	ep_destroy(&a);
}

/* ------------------------------------------------------------------ */
/* SRQ_LIMIT_REACHED                                                   */

/*
 * IBA 10.2.9.2 (o11-5.1.3.3): armed with srq_limit, the SRQ raises
 * IBV_EVENT_SRQ_LIMIT_REACHED once when fewer than srq_limit WQEs remain,
 * and disarms (srq_limit reads 0).  Here 8 WQEs and a limit of 4: the
 * fifth message takes it below.
 */
static void srq_limit_responder(struct ep *b, int fd, struct ep *a)
{
	struct ibv_async_event ev;
	struct ibv_srq_attr sa;
	int i;

	for (i = 0; i < 8; i++)
		ASSERT_EQ(ep_post_recv(b, 0xb0 + (uint64_t)i, DST + 4096u * i,
				       4096), 0);
	memset(&sa, 0, sizeof(sa));
	sa.srq_limit = 4;
	ASSERT_EQ(ibv_modify_srq(b->srq, &sa, IBV_SRQ_LIMIT), 0);
	ASSERT_EQ(ibv_query_srq(b->srq, &sa), 0);
	ASSERT_EQ(sa.srq_limit, 4);

	/* four messages leave four WQEs: not below the limit */
	if (fd >= 0) {
		duo_signal(fd, '4');
	} else {
		for (i = 0; i < 4; i++)
			ASSERT_EQ(ep_post(a, 0xa0 + (uint64_t)i, IBV_WR_SEND,
					  0, 32, 0, 0), 0);
	}
	for (i = 0; i < 4; i++)
		ep_expect(b->rcq, b->qp, 0xb0 + (uint64_t)i, IBV_WC_SUCCESS);
	ep_expect_no_async(b->ctx);
	ASSERT_EQ(ibv_query_srq(b->srq, &sa), 0);
	ASSERT_EQ(sa.srq_limit, 4);

	/* the fifth: three left */
	if (fd >= 0)
		duo_signal(fd, '1');
	else
		ASSERT_EQ(ep_post(a, 0xa4, IBV_WR_SEND, 0, 32, 0, 0), 0);
	ep_expect(b->rcq, b->qp, 0xb4, IBV_WC_SUCCESS);
	ep_wait_async(b->ctx, IBV_EVENT_SRQ_LIMIT_REACHED, &ev);
	ASSERT(ev.element.srq == b->srq);
	ASSERT_EQ(ibv_query_srq(b->srq, &sa), 0);
	ASSERT_EQ(sa.srq_limit, 0);
	ibv_ack_async_event(&ev);

	/* disarmed: two more raise nothing */
	if (fd >= 0) {
		duo_signal(fd, '2');
	} else {
		for (i = 5; i < 7; i++)
			ASSERT_EQ(ep_post(a, 0xa0 + (uint64_t)i, IBV_WR_SEND,
					  0, 32, 0, 0), 0);
	}
	ep_expect(b->rcq, b->qp, 0xb5, IBV_WC_SUCCESS);
	ep_expect(b->rcq, b->qp, 0xb6, IBV_WC_SUCCESS);
	ep_expect_no_async(b->ctx);
	ASSERT_EQ(ibv_query_srq(b->srq, &sa), 0);
	ASSERT_EQ(sa.srq_limit, 0);
}

static void srq_limit_child(int fd, void *arg)
{
	struct ep_opts o;
	struct ep b;

	(void)arg;
	ep_default_opts(&o, IBV_QPT_RC);
	o.use_srq = true;
	o.max_recv_wr = 16;
	ep_open_remote(&b, &o, fd);
	srq_limit_responder(&b, fd, NULL);
	duo_signal(fd, 'c');
	ep_destroy(&b);
}

static void srq_limit_send(struct ep *a, int n, uint64_t first)
{
	int i;

	for (i = 0; i < n; i++) {
		ASSERT_EQ(ep_post(a, first + (uint64_t)i, IBV_WR_SEND, 0, 32,
				  0, 0), 0);
		ep_expect(a->scq, a->qp, first + (uint64_t)i, IBV_WC_SUCCESS);
	}
}

TEST(srq_limit_reached_two_process)
{
	struct ep_opts o;
	struct duo d;
	struct ep a;

	duo_fork(&d, srq_limit_child, NULL);
	ep_default_opts(&o, IBV_QPT_RC);
	ep_open_remote(&a, &o, d.fd);
	duo_expect(d.fd, '4');
	srq_limit_send(&a, 4, 0xa0);
	duo_expect(d.fd, '1');
	srq_limit_send(&a, 1, 0xa4);
	duo_expect(d.fd, '2');
	srq_limit_send(&a, 2, 0xa5);
	duo_expect(d.fd, 'c');
	duo_wait(&d);
	ep_destroy(&a);
}

TEST(srq_limit_reached_same_process)
{
	struct ep_opts o, ob;
	struct ep a, b;

	ep_default_opts(&o, IBV_QPT_RC);
	ob = o;
	ob.use_srq = true;
	ob.max_recv_wr = 16;
	ep_pair(&a, &o, &b, &ob);
	srq_limit_responder(&b, -1, &a);
	ep_destroy(&a);
	ep_destroy(&b);
}

/* ibv_destroy_srq waits for the ack of its limit event */
TEST(destroy_srq_waits_for_limit_ack)
{
	struct ibv_async_event ev;
	struct ibv_srq_attr sa;
	struct destroyer d;
	struct ep_opts o, ob;
	struct ep a, b;

	ep_default_opts(&o, IBV_QPT_RC);
	ob = o;
	ob.use_srq = true;
	ep_pair(&a, &o, &b, &ob);
	ASSERT_EQ(ep_post_recv(&b, 0xb1, DST, 4096), 0);
	ASSERT_EQ(ep_post_recv(&b, 0xb2, DST + 4096, 4096), 0);
	memset(&sa, 0, sizeof(sa));
	sa.srq_limit = 2;
	ASSERT_EQ(ibv_modify_srq(b.srq, &sa, IBV_SRQ_LIMIT), 0);
	ASSERT_EQ(ep_post(&a, 0xa1, IBV_WR_SEND, 0, 8, 0, 0), 0);
	ep_expect(b.rcq, b.qp, 0xb1, IBV_WC_SUCCESS);
	ep_wait_async(b.ctx, IBV_EVENT_SRQ_LIMIT_REACHED, &ev);
	ASSERT(ev.element.srq == b.srq);

	ASSERT_EQ(ibv_destroy_qp(b.qp), 0);
	b.qp = NULL;
	destroyer_start(&d, destroy_srq, b.srq, &b.srq->cond);
	ibv_ack_async_event(&ev);
	destroyer_join(&d);
	b.srq = NULL;
	ep_destroy(&a);
	ep_destroy(&b);
}

/* ------------------------------------------------------------------ */
/* CQ_ERR                                                              */

/*
 * IBA o11-5.2.2: one completion more than a CQ holds overruns it: the CQ
 * enters the error state, IBV_EVENT_CQ_ERR is raised and the QPs that
 * complete to it go to ERR.  First the requester's send CQ in this
 * process.
 */
TEST(send_cq_overrun_same_process)
{
	struct ibv_async_event ev;
	struct destroyer d;
	struct ep_opts o;
	struct ep a, b;
	int i, n;

	ep_default_opts(&o, IBV_QPT_RC);
	o.cqe = 4;
	ep_pair(&a, &o, &b, &o);
	n = a.scq->cqe;		/* what it really holds */
	ASSERT_GE(n, 4);
	ASSERT_LT(n, 64);
	for (i = 0; i <= n; i++)
		ASSERT_EQ(ep_post(&a, 0xa0 + (uint64_t)i, IBV_WR_RDMA_WRITE,
				  0, 16, DST, 0), 0);
	ep_wait_async(a.ctx, IBV_EVENT_CQ_ERR, &ev);
	ASSERT(ev.element.cq == a.scq);
	ep_wait_qp_state(a.qp, IBV_QPS_ERR);
	ep_expect_no_async(a.ctx);
	/* the peer knows nothing of it */
	ASSERT_EQ(ep_qp_state(b.qp), IBV_QPS_RTS);
	ep_expect_no_async(b.ctx);

	/* ibv_destroy_cq waits for the ack */
	ASSERT_EQ(ibv_destroy_qp(a.qp), 0);
	a.qp = NULL;
	destroyer_start(&d, destroy_cq, a.scq, &a.scq->cond);
	ibv_ack_async_event(&ev);
	destroyer_join(&d);
	a.scq = NULL;
	ep_destroy(&a);
	ep_destroy(&b);
}

/*
 * The responder's receive CQ, filled by a requester in another process:
 * the responder raises CQ_ERR and its QP goes to ERR; the message that
 * found no room is not acknowledged (rxe's class G), so the requester
 * times out with RETRY_EXC_ERR.
 */
static void overrun_child(int fd, void *arg)
{
	struct ibv_async_event ev;
	struct ep_opts o;
	struct ep b;
	int i;

	(void)arg;
	ep_default_opts(&o, IBV_QPT_RC);
	o.cqe = 4;
	ep_open_remote(&b, &o, fd);
	for (i = 0; i < 32; i++)
		ASSERT_EQ(ep_post_recv(&b, 0xb0 + (uint64_t)i, 0, 64), 0);
	xwrite(fd, &b.rcq->cqe, sizeof(int));
	ep_wait_async(b.ctx, IBV_EVENT_CQ_ERR, &ev);
	ASSERT(ev.element.cq == b.rcq);
	ibv_ack_async_event(&ev);
	ep_wait_qp_state(b.qp, IBV_QPS_ERR);
	duo_expect(fd, 'd');
	ep_expect_no_async(b.ctx);
	ep_destroy(&b);
}

TEST(recv_cq_overrun_two_process)
{
	struct ep_opts o;
	struct duo d;
	struct ep a;
	int i, n;

	duo_fork(&d, overrun_child, NULL);
	ep_default_opts(&o, IBV_QPT_RC);
	o.timeout = 8;
	o.retry_cnt = 2;
	ep_open_remote(&a, &o, d.fd);
	xread(d.fd, &n, sizeof(n));
	ASSERT_LT(n, 32);
	for (i = 0; i < n; i++) {
		ASSERT_EQ(ep_post(&a, 0xa0 + (uint64_t)i, IBV_WR_SEND, 0, 8,
				  0, 0), 0);
		ep_expect(a.scq, a.qp, 0xa0 + (uint64_t)i, IBV_WC_SUCCESS);
	}
	ASSERT_EQ(ep_post(&a, 0xa0 + (uint64_t)n, IBV_WR_SEND, 0, 8, 0, 0), 0);
	ep_expect(a.scq, a.qp, 0xa0 + (uint64_t)n, IBV_WC_RETRY_EXC_ERR);
	ep_wait_qp_state(a.qp, IBV_QPS_ERR);
	duo_signal(d.fd, 'd');
	duo_wait(&d);
	ep_destroy(&a);
}

/* ------------------------------------------------------------------ */
/* Completion channels across processes                                */

/*
 * The responder arms its receive CQ; the requester, another process,
 * completes into it; the responder's channel fd turns readable and
 * ibv_get_cq_event names the CQ and its context (IBA 11.4.2.2).
 * Solicited-only arms fire on a solicited completion or one in error,
 * not on others.
 */
static int cq_marker;

enum chan_case { CH_ALL, CH_SOLICITED, CH_ERROR };

/* Wait for one event on b's channel: it must be b->rcq's. */
static void expect_cq_event(struct ep *b)
{
	struct ibv_cq *cq;
	void *ctx;

	ASSERT(ep_readable(b->ch->fd, 10000));
	ASSERT_EQ(ibv_get_cq_event(b->ch, &cq, &ctx), 0);
	ASSERT(cq == b->rcq);
	ASSERT(ctx == &cq_marker);
	ibv_ack_cq_events(cq, 1);
}

/*
 * Let an event that should not come show itself (a pause: it can only
 * make a broken library pass), then check that it did not.
 */
static void expect_no_cq_event(struct ep *b)
{
	ASSERT(!ep_readable(b->ch->fd, 50));
}

static void channel_child(int fd, void *arg)
{
	enum chan_case c = (enum chan_case)(uintptr_t)arg;
	struct ep_opts o;
	struct ibv_wc wc;
	struct ep b;

	ep_default_opts(&o, IBV_QPT_RC);
	o.channel = true;
	o.cq_context = &cq_marker;
	ep_open_remote(&b, &o, fd);
	ASSERT_EQ(ep_post_recv(&b, 0xb1, DST, c == CH_ERROR ? 16 : 4096), 0);
	if (c != CH_ERROR) {
		/* (CH_ERROR: no flush completions to fire the arm) */
		ASSERT_EQ(ep_post_recv(&b, 0xb2, DST + 4096, 4096), 0);
		ASSERT_EQ(ep_post_recv(&b, 0xb3, DST + 8192, 4096), 0);
	}

	switch (c) {
	case CH_ALL:
		ASSERT_EQ(ibv_req_notify_cq(b.rcq, 0), 0);
		duo_signal(fd, '1');	/* an unsolicited SEND */
		expect_cq_event(&b);
		wc = ep_expect(b.rcq, b.qp, 0xb1, IBV_WC_SUCCESS);
		ASSERT_EQ(wc.byte_len, 32);
		/* one event per arm: the next completion is silent */
		duo_signal(fd, '2');
		ep_expect(b.rcq, b.qp, 0xb2, IBV_WC_SUCCESS);
		expect_no_cq_event(&b);
		/* armed again: it fires again */
		ASSERT_EQ(ibv_req_notify_cq(b.rcq, 0), 0);
		duo_signal(fd, '3');
		expect_cq_event(&b);
		ep_expect(b.rcq, b.qp, 0xb3, IBV_WC_SUCCESS);
		break;
	case CH_SOLICITED:
		ASSERT_EQ(ibv_req_notify_cq(b.rcq, 1), 0);
		duo_signal(fd, '1');	/* unsolicited: no event */
		ep_expect(b.rcq, b.qp, 0xb1, IBV_WC_SUCCESS);
		expect_no_cq_event(&b);
		duo_signal(fd, 's');	/* solicited: the event */
		expect_cq_event(&b);
		wc = ep_expect(b.rcq, b.qp, 0xb2, IBV_WC_SUCCESS);
		ASSERT_EQ(ntohl(wc.imm_data), 0xa1);
		expect_no_cq_event(&b);
		break;
	case CH_ERROR:
		ASSERT_EQ(ibv_req_notify_cq(b.rcq, 1), 0);
		duo_signal(fd, 'x');	/* unsolicited, too long: error */
		expect_cq_event(&b);
		ep_expect(b.rcq, b.qp, 0xb1, IBV_WC_LOC_LEN_ERR);
		ep_wait_qp_state(b.qp, IBV_QPS_ERR);
		expect_no_cq_event(&b);
		break;
	}
	ep_expect_empty(b.rcq);
	duo_signal(fd, 'c');
	ep_destroy(&b);
}

static void channel_requester(enum chan_case c)
{
	struct ep_opts o;
	struct duo d;
	struct ep a;
	char step;

	duo_fork(&d, channel_child, (void *)(uintptr_t)c);
	ep_default_opts(&o, IBV_QPT_RC);
	ep_open_remote(&a, &o, d.fd);
	for (;;) {
		ASSERT_EQ(read(d.fd, &step, 1), 1);
		if (step == 'c')
			break;
		switch (step) {
		case 'x':
			ASSERT_EQ(ep_post(&a, 0xa1, IBV_WR_SEND, 0, 32, 0, 0),
				  0);
			ep_expect(a.scq, a.qp, 0xa1, IBV_WC_REM_INV_REQ_ERR);
			break;
		case 's':
			ASSERT_EQ(ep_post(&a, 0xa1, IBV_WR_SEND_WITH_IMM, 0,
					  32, 0, IBV_SEND_SOLICITED), 0);
			ep_expect(a.scq, a.qp, 0xa1, IBV_WC_SUCCESS);
			break;
		default:
			ASSERT_EQ(ep_post(&a, 0xa1, IBV_WR_SEND, 0, 32, 0, 0),
				  0);
			ep_expect(a.scq, a.qp, 0xa1, IBV_WC_SUCCESS);
			break;
		}
	}
	duo_wait(&d);
	ep_destroy(&a);
}

TEST(channel_armed_for_all_two_process) { channel_requester(CH_ALL); }
TEST(channel_solicited_only_two_process)
{
	channel_requester(CH_SOLICITED);
}
TEST(channel_solicited_only_error_wakes_two_process)
{
	channel_requester(CH_ERROR);
}

/* A send CQ armed for solicited completions wakes on one in error only. */
TEST(channel_send_cq_solicited_only_wakes_on_error)
{
	struct ibv_cq *cq;
	struct ep_opts o, ob;
	struct ep a, b;
	void *ctx;

	ep_default_opts(&o, IBV_QPT_RC);
	ob = o;
	o.channel = true;
	o.cq_context = &cq_marker;
	ep_pair(&a, &o, &b, &ob);
	ASSERT_EQ(ibv_req_notify_cq(a.scq, 1), 0);
	ASSERT_EQ(ep_post(&a, 0xa1, IBV_WR_RDMA_WRITE, 0, 16, DST, 0), 0);
	ep_expect(a.scq, a.qp, 0xa1, IBV_WC_SUCCESS);
	ASSERT(!ep_readable(a.ch->fd, 50));
	a.peer.rkey ^= 0x5a5;
	ASSERT_EQ(ep_post(&a, 0xa2, IBV_WR_RDMA_WRITE, 0, 16, DST, 0), 0);
	ASSERT(ep_readable(a.ch->fd, 10000));
	ASSERT_EQ(ibv_get_cq_event(a.ch, &cq, &ctx), 0);
	ASSERT(cq == a.scq);
	ASSERT(ctx == &cq_marker);
	ibv_ack_cq_events(cq, 1);
	ep_expect(a.scq, a.qp, 0xa2, IBV_WC_REM_ACCESS_ERR);
	ep_destroy(&a);
	ep_destroy(&b);
}
