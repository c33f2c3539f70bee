// SPDX-License-Identifier: MIT
/*
 * A completion thread cancelled while it is inside a verb (issue 11, the
 * completion-thread pattern; src/common/nocancel.h).
 *
 * The rdma_cm samples stop their completion thread with pthread_cancel.
 * On rdma-core with a hardware provider the only cancellation point a
 * verb reaches is the read() of ibv_get_cq_event's sleep; softhca makes
 * other system calls (eventfd writes and drains) with its locks held, and
 * a thread cancelled at one of them left the lock held: the
 * ibv_destroy_cq that followed hung.
 *
 * Each case makes the race deterministic: the thread has a cancellation
 * request pending (enabled, deferred) when it calls the verb, with the
 * verb's work ready so that it does not need to sleep.  The verb must
 * complete (it reaches no cancellation point), the thread is cancelled at
 * its next pthread_testcancel, and the teardown that follows must finish.
 */
#include <stdbool.h>

#include <infiniband/verbs.h>

#include "cancel_pending.h"
#include "harness.h"

#if defined(__SANITIZE_ADDRESS__)
/*
 * ASan cannot see a thread's cancellation: the forced unwind leaves the
 * frames it skips (redzones included) poisoned, and when the cancelled
 * thread exits, ASan's own sigaltstack() call there writes a stack_t
 * into that stale shadow and reports a stack-buffer-underflow that is
 * not one (google/sanitizers issue 1399, open).  Without ASan's
 * alternate signal stack that call is not made; the stack's shadow is
 * cleared when a new thread reuses it.  Every other check stays on.
 */
const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
	return "use_sigaltstack=0";
}
#endif

struct fixture {
	struct ibv_device **list;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_comp_channel *ch;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	char buf[64];
};

static void setup(struct fixture *f)
{
	struct ibv_qp_init_attr qa = { 0 };
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1 };
	int n;

	f->list = ibv_get_device_list(&n);
	ASSERT(f->list);
	if (n < 1)
		SKIP_ENV("no device: no interface has an address");
	f->ctx = ibv_open_device(f->list[0]);
	ASSERT(f->ctx);
	f->pd = ibv_alloc_pd(f->ctx);
	ASSERT(f->pd);
	f->ch = ibv_create_comp_channel(f->ctx);
	ASSERT(f->ch);
	f->cq = ibv_create_cq(f->ctx, 8, NULL, f->ch, 0);
	ASSERT(f->cq);
	f->mr = ibv_reg_mr(f->pd, f->buf, sizeof(f->buf),
			   IBV_ACCESS_LOCAL_WRITE);
	ASSERT(f->mr);
	qa.send_cq = f->cq;
	qa.recv_cq = f->cq;
	qa.qp_type = IBV_QPT_RC;
	qa.cap.max_send_wr = 2;
	qa.cap.max_recv_wr = 2;
	qa.cap.max_send_sge = 1;
	qa.cap.max_recv_sge = 1;
	f->qp = ibv_create_qp(f->pd, &qa);
	ASSERT(f->qp);
	ASSERT_EQ(ibv_modify_qp(f->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
				IBV_QP_PORT | IBV_QP_ACCESS_FLAGS), 0);
	/* INIT -> ERR: every receive posted now completes flushed */
	a.qp_state = IBV_QPS_ERR;
	ASSERT_EQ(ibv_modify_qp(f->qp, &a, IBV_QP_STATE), 0);
	ASSERT_EQ(ibv_req_notify_cq(f->cq, 0), 0);
}

/* A receive on the ERR QP: a flush completion, which fires the armed CQ
 * (an event on the channel). */
static int post_flushed_recv(struct fixture *f)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)f->buf, .length = sizeof(f->buf),
		.lkey = f->mr->lkey,
	};
	struct ibv_recv_wr wr = { .wr_id = 7, .sg_list = &sge, .num_sge = 1 },
			   *bad;

	return ibv_post_recv(f->qp, &wr, &bad);
}

/* A send on the ERR QP: flushed the same way, by ibv_post_send. */
static int post_flushed_send(struct fixture *f)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)f->buf, .length = 8, .lkey = f->mr->lkey,
	};
	struct ibv_send_wr wr = {
		.wr_id = 9, .sg_list = &sge, .num_sge = 1,
		.opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED,
	}, *bad;

	return ibv_post_send(f->qp, &wr, &bad);
}

static void teardown(struct fixture *f)
{
	struct ibv_wc wc;

	/* what hung: the channel's or the RQ's lock left held */
	ASSERT_EQ(ibv_destroy_qp(f->qp), 0);
	while (ibv_poll_cq(f->cq, 1, &wc) > 0)
		;
	ASSERT_EQ(ibv_destroy_cq(f->cq), 0);
	ASSERT_EQ(ibv_destroy_comp_channel(f->ch), 0);
	ASSERT_EQ(ibv_dereg_mr(f->mr), 0);
	ASSERT_EQ(ibv_dealloc_pd(f->pd), 0);
	ASSERT_EQ(ibv_close_device(f->ctx), 0);
	ibv_free_device_list(f->list);
}

static int get_cq_event(void *f)
{
	struct fixture *fx = f;
	struct ibv_cq *cq;
	void *ctx;
	int ret = ibv_get_cq_event(fx->ch, &cq, &ctx);

	if (!ret)
		ibv_ack_cq_events(cq, 1);
	return ret;
}

static int post_recv(void *f)
{
	return post_flushed_recv(f);
}

static int post_send(void *f)
{
	return post_flushed_send(f);
}

/* ibv_get_cq_event with an event waiting: it takes the event and drains
 * the channel's eventfd under the queue lock. */
TEST(cancel_pending_get_cq_event)
{
	struct fixture f = { 0 };

	setup(&f);
	ASSERT_EQ(post_flushed_recv(&f), 0);	/* the event waits */
	ASSERT_EQ(cancel_pending_call(get_cq_event, &f), 0);
	teardown(&f);
}

/* ibv_post_recv on a QP in error: the flush completion fires the armed
 * CQ, whose channel's eventfd is written under the RQ and queue locks. */
TEST(cancel_pending_post_recv_flush)
{
	struct fixture f = { 0 };
	struct ibv_cq *cq;
	void *ctx;

	setup(&f);
	ASSERT_EQ(cancel_pending_call(post_recv, &f), 0);
	/* the event it queued can be taken, and the CQ destroyed */
	ASSERT_EQ(ibv_get_cq_event(f.ch, &cq, &ctx), 0);
	ASSERT(cq == f.cq);
	ibv_ack_cq_events(cq, 1);
	teardown(&f);
}

/* ibv_post_send on a QP in error: the same, through the send queue (a
 * posting verb marks the thread instead of turning cancellation off, and
 * each cancellation point it reaches turns it off for itself:
 * common/nocancel.h). */
TEST(cancel_pending_post_send_flush)
{
	struct fixture f = { 0 };
	struct ibv_wc wc;
	struct ibv_cq *cq;
	void *ctx;

	setup(&f);
	ASSERT_EQ(cancel_pending_call(post_send, &f), 0);
	ASSERT_EQ(ibv_get_cq_event(f.ch, &cq, &ctx), 0);
	ASSERT(cq == f.cq);
	ibv_ack_cq_events(cq, 1);
	ASSERT_EQ(ibv_poll_cq(f.cq, 1, &wc), 1);
	ASSERT_EQ(wc.wr_id, 9u);
	ASSERT_EQ(wc.status, IBV_WC_WR_FLUSH_ERR);
	teardown(&f);
}
