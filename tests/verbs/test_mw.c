// SPDX-License-Identifier: MIT
/*
 * Memory windows, the control path (docs/memory-windows.md): what
 * ibv_query_device says, ibv_alloc_mw / ibv_dealloc_mw and their errnos,
 * ibv_bind_mw (type 1) and IBV_WR_BIND_MW / ibv_wr_bind_mw (type 2) on a
 * QP connected to itself, every reason for IBV_WC_MW_BIND_ERR, the
 * invalidation rules (LOCAL_INV of a type 1 window, of a stale key), the
 * R_Key's tag rotation, and the deregistration of an MR with a window
 * bound to it (EBUSY).  An error completion moves the QP to the error
 * state: one error per case.  Traffic through windows:
 * tests/traffic/test_mw_traffic.c.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "common.h"
#include "arena_peer.h"
#include "shm/arena.h"

#define BUF	16384

struct env {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	char *buf;
};

static const int MR_ACC = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND;
static const int QP_ACC = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
			  IBV_ACCESS_REMOTE_ATOMIC;

/* An RC QP of pd connected to itself, in RTS. */
static struct ibv_qp *self_qp(struct env *e, struct ibv_pd *pd)
{
	struct ibv_qp_init_attr ia = {
		.send_cq = e->cq,
		.recv_cq = e->cq,
		.cap = { .max_send_wr = 16, .max_recv_wr = 16,
			 .max_send_sge = 1, .max_recv_sge = 1 },
		.qp_type = IBV_QPT_RC,
	};
	struct ibv_qp *qp = ibv_create_qp(pd, &ia);

	ASSERT_NOT_NULL(qp);
	connect_self(qp, QP_ACC);
	return qp;
}

static void env_open(struct env *e, int mr_access)
{
	static char buf[BUF] __attribute__((aligned(4096)));

	/* the same-host path: on the net path a QP connected to itself
	 * that meets a remote error flushes its own WQE (WR_FLUSH_ERR)
	 * before the NAK arrives (the traffic test covers the net path) */
	unsetenv("SOFTHCA_NET");
	e->buf = buf;
	e->ctx = open_lo();
	e->pd = ibv_alloc_pd(e->ctx);
	ASSERT_NOT_NULL(e->pd);
	e->cq = ibv_create_cq(e->ctx, 64, NULL, NULL, 0);
	ASSERT_NOT_NULL(e->cq);
	e->mr = ibv_reg_mr(e->pd, e->buf, BUF, mr_access);
	ASSERT_NOT_NULL(e->mr);
	e->qp = self_qp(e, e->pd);
}

/* One completion (bounded wait). */
static struct ibv_wc poll_one(struct ibv_cq *cq)
{
	struct ibv_wc wc;
	int i, n = 0;

	for (i = 0; i < 1000000 && n == 0; i++)
		n = ibv_poll_cq(cq, 1, &wc);
	ASSERT_EQ(n, 1);
	return wc;
}

static void expect_wc(struct env *e, uint64_t wr_id, enum ibv_wc_status st,
		      enum ibv_wc_opcode op)
{
	struct ibv_wc wc = poll_one(e->cq);

	ASSERT_EQ(wc.wr_id, wr_id);
	ASSERT_EQ(wc.status, st);
	if (st == IBV_WC_SUCCESS)
		ASSERT_EQ(wc.opcode, op);
}

static struct ibv_mw_bind bind_of(struct ibv_mr *mr, uint64_t off,
				  uint64_t len, unsigned int acc,
				  uint64_t wr_id)
{
	struct ibv_mw_bind b;

	memset(&b, 0, sizeof(b));
	b.wr_id = wr_id;
	b.send_flags = IBV_SEND_SIGNALED;
	b.bind_info.mr = mr;
	b.bind_info.addr = (uintptr_t)mr->addr + off;
	b.bind_info.length = len;
	b.bind_info.mw_access_flags = acc;
	return b;
}

/* IBV_WR_BIND_MW of a type 2 window through ibv_post_send. */
static int post_bind2(struct ibv_qp *qp, struct ibv_mw *mw, uint32_t rkey,
		      const struct ibv_mw_bind_info *bi, uint64_t wr_id)
{
	struct ibv_send_wr wr, *bad;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = wr_id;
	wr.opcode = IBV_WR_BIND_MW;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.bind_mw.mw = mw;
	wr.bind_mw.rkey = rkey;
	wr.bind_mw.bind_info = *bi;
	return ibv_post_send(qp, &wr, &bad);
}

static int post_local_inv(struct ibv_qp *qp, uint32_t rkey, uint64_t wr_id)
{
	struct ibv_send_wr wr, *bad;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = wr_id;
	wr.opcode = IBV_WR_LOCAL_INV;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.invalidate_rkey = rkey;
	return ibv_post_send(qp, &wr, &bad);
}

/* A remote WRITE of 8 bytes at buf + off through rkey, to the QP itself. */
static void loop_write(struct env *e, uint32_t rkey, uint64_t off,
		       uint64_t wr_id)
{
	struct ibv_sge sge = { .addr = (uintptr_t)e->buf, .length = 8,
			       .lkey = e->mr->lkey };
	struct ibv_send_wr wr, *bad;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = wr_id;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_RDMA_WRITE;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.wr.rdma.remote_addr = (uintptr_t)e->buf + off;
	wr.wr.rdma.rkey = rkey;
	ASSERT_EQ(ibv_post_send(e->qp, &wr, &bad), 0);
}

/* ------------------------------------------------------------------ */

TEST(query_device_reports_windows)
{
	struct ibv_context *ctx = open_lo();
	struct ibv_device_attr_ex ax;
	struct ibv_device_attr a;

	ASSERT_EQ(ibv_query_device(ctx, &a), 0);
	ASSERT(a.device_cap_flags & IBV_DEVICE_MEM_WINDOW);
	ASSERT(a.device_cap_flags & IBV_DEVICE_MEM_WINDOW_TYPE_2B);
	ASSERT(!(a.device_cap_flags & IBV_DEVICE_MEM_WINDOW_TYPE_2A));
	ASSERT_GT(a.max_mw, 0);
	ASSERT_EQ(ibv_query_device_ex(ctx, NULL, &ax), 0);
	ASSERT(ax.device_cap_flags_ex & IBV_DEVICE_MEM_WINDOW);
	ASSERT(ax.device_cap_flags_ex & IBV_DEVICE_MEM_WINDOW_TYPE_2B);
	ASSERT_EQ(ax.orig_attr.max_mw, a.max_mw);
	ASSERT_EQ(ibv_close_device(ctx), 0);
}

TEST(alloc_dealloc_and_errnos)
{
	struct ibv_context *ctx = open_lo();
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_mw *m1, *m2;

	ASSERT_NOT_NULL(pd);
	m1 = ibv_alloc_mw(pd, IBV_MW_TYPE_1);
	ASSERT_NOT_NULL(m1);
	m2 = ibv_alloc_mw(pd, IBV_MW_TYPE_2);
	ASSERT_NOT_NULL(m2);
	ASSERT_EQ(m1->type, IBV_MW_TYPE_1);
	ASSERT_EQ(m2->type, IBV_MW_TYPE_2);
	ASSERT(m1->pd == pd && m1->context == ctx);
	ASSERT(m1->rkey != 0 && m2->rkey != 0);
	/* distinct prefixes: the tag is the only part a bind changes */
	ASSERT((m1->rkey & ~0xffu) != (m2->rkey & ~0xffu));
	/* an unknown type: EINVAL (not EOPNOTSUPP: pyverbs' wrong type) */
	errno = 0;
	ASSERT_NULL(ibv_alloc_mw(pd, (enum ibv_mw_type)3));
	ASSERT_EQ(errno, EINVAL);
	/* a PD with windows is in use */
	ASSERT_EQ(ibv_dealloc_pd(pd), EBUSY);
	ASSERT_EQ(ibv_dealloc_mw(m1), 0);
	ASSERT_EQ(ibv_dealloc_mw(m2), 0);
	ASSERT_EQ(ibv_dealloc_pd(pd), 0);
	ASSERT_EQ(ibv_close_device(ctx), 0);
}

TEST(dealloc_twice_is_enoent)
{
	struct ibv_context *ctx = open_lo();
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_mw *mw = ibv_alloc_mw(pd, IBV_MW_TYPE_2);

	ASSERT_NOT_NULL(mw);
	ASSERT_EQ(ibv_dealloc_mw(mw), 0);
	/* the struct waits in the quarantine: its handle names nothing */
	ASSERT_EQ(ibv_dealloc_mw(mw), ENOENT);
	ASSERT_EQ(ibv_dealloc_pd(pd), 0);
	ASSERT_EQ(ibv_close_device(ctx), 0);
}

TEST(close_device_frees_windows)
{
	struct ibv_context *ctx = open_lo();
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	static char buf[4096] __attribute__((aligned(4096)));
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, sizeof(buf), MR_ACC);

	ASSERT_NOT_NULL(mr);
	ASSERT_NOT_NULL(ibv_alloc_mw(pd, IBV_MW_TYPE_1));
	ASSERT_NOT_NULL(ibv_alloc_mw(pd, IBV_MW_TYPE_2));
	ASSERT_EQ(ibv_close_device(ctx), 0);
}

TEST(bind_type1_rotates_tag_and_unbinds)
{
	struct env e;
	struct ibv_mw *mw;
	struct ibv_mw_bind b;
	uint32_t k0, k1;

	env_open(&e, MR_ACC);
	mw = ibv_alloc_mw(e.pd, IBV_MW_TYPE_1);
	ASSERT_NOT_NULL(mw);
	k0 = mw->rkey;
	b = bind_of(e.mr, 4096, 4096, IBV_ACCESS_REMOTE_WRITE, 1);
	ASSERT_EQ(ibv_bind_mw(e.qp, mw, &b), 0);
	expect_wc(&e, 1, IBV_WC_SUCCESS, IBV_WC_BIND_MW);
	k1 = mw->rkey;
	ASSERT_EQ(k1, ibv_inc_rkey(k0));
	ASSERT_EQ(k1 & ~0xffu, k0 & ~0xffu);
	/* the window works: a WRITE through it */
	memset(e.buf, 0x5a, 8);
	loop_write(&e, k1, 4096 + 16, 2);
	expect_wc(&e, 2, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
	ASSERT_EQ(e.buf[4096 + 16], 0x5a);
	/* the MR is in use while the window is bound */
	ASSERT_EQ(ibv_dereg_mr(e.mr), EBUSY);
	/* a bind of length 0 unbinds (type 1), with the next tag */
	b = bind_of(e.mr, 0, 0, 0, 3);
	ASSERT_EQ(ibv_bind_mw(e.qp, mw, &b), 0);
	expect_wc(&e, 3, IBV_WC_SUCCESS, IBV_WC_BIND_MW);
	ASSERT_EQ(mw->rkey, ibv_inc_rkey(k1));
	ASSERT_EQ(ibv_dealloc_mw(mw), 0);
	ASSERT_EQ(ibv_dereg_mr(e.mr), 0);
}

TEST(bind_type1_rdma_core_checks)
{
	struct env e;
	struct ibv_mw *mw2, *mw1;
	struct ibv_mw_bind b;
	struct ibv_pd *pd2;
	struct ibv_mr *mr2;
	static char other[4096] __attribute__((aligned(4096)));

	env_open(&e, MR_ACC);
	mw1 = ibv_alloc_mw(e.pd, IBV_MW_TYPE_1);
	mw2 = ibv_alloc_mw(e.pd, IBV_MW_TYPE_2);
	ASSERT_NOT_NULL(mw1);
	ASSERT_NOT_NULL(mw2);
	/* ibv_bind_mw is for type 1 windows */
	b = bind_of(e.mr, 0, 64, IBV_ACCESS_REMOTE_READ, 1);
	ASSERT_EQ(ibv_bind_mw(e.qp, mw2, &b), EINVAL);
	/* an MR of another PD: EPERM, before the provider */
	pd2 = ibv_alloc_pd(e.ctx);
	mr2 = ibv_reg_mr(pd2, other, sizeof(other), MR_ACC);
	ASSERT_NOT_NULL(mr2);
	b = bind_of(mr2, 0, 64, IBV_ACCESS_REMOTE_READ, 2);
	ASSERT_EQ(ibv_bind_mw(e.qp, mw1, &b), EPERM);
	/* nothing was posted */
	{
		struct ibv_wc wc;

		ASSERT_EQ(ibv_poll_cq(e.cq, 1, &wc), 0);
	}
	ASSERT_EQ(ibv_dereg_mr(mr2), 0);
	ASSERT_EQ(ibv_dealloc_pd(pd2), 0);
}

/* One bind that must fail with MW_BIND_ERR, and the QP in error after. */
static void bind_err_case(int mr_access, uint64_t off, uint64_t len,
			  unsigned int acc, enum ibv_mw_type type)
{
	struct env e;
	struct ibv_mw *mw;
	struct ibv_mw_bind b;
	struct ibv_qp_attr qa;
	struct ibv_qp_init_attr qi;

	env_open(&e, mr_access);
	mw = ibv_alloc_mw(e.pd, type);
	ASSERT_NOT_NULL(mw);
	b = bind_of(e.mr, off, len, acc, 7);
	if (type == IBV_MW_TYPE_1)
		ASSERT_EQ(ibv_bind_mw(e.qp, mw, &b), 0);
	else
		ASSERT_EQ(post_bind2(e.qp, mw, ibv_inc_rkey(mw->rkey),
				     &b.bind_info, 7), 0);
	expect_wc(&e, 7, IBV_WC_MW_BIND_ERR, 0);
	ASSERT_EQ(ibv_query_qp(e.qp, &qa, IBV_QP_STATE, &qi), 0);
	ASSERT_EQ(qa.qp_state, IBV_QPS_ERR);
}

TEST(bind_err_mr_without_mw_bind)
{
	bind_err_case(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE, 0, 64,
		      IBV_ACCESS_REMOTE_READ, IBV_MW_TYPE_1);
}

TEST(bind_err_past_the_mr)
{
	bind_err_case(MR_ACC, BUF - 64, 128, IBV_ACCESS_REMOTE_READ,
		      IBV_MW_TYPE_2);
}

TEST(bind_err_before_the_mr)
{
	bind_err_case(MR_ACC, (uint64_t)-64, 128, IBV_ACCESS_REMOTE_READ,
		      IBV_MW_TYPE_1);
}

TEST(bind_err_remote_write_without_local_write)
{
	bind_err_case(IBV_ACCESS_MW_BIND, 0, 64, IBV_ACCESS_REMOTE_WRITE,
		      IBV_MW_TYPE_2);
}

TEST(bind_err_remote_atomic_without_local_write)
{
	bind_err_case(IBV_ACCESS_MW_BIND, 0, 64, IBV_ACCESS_REMOTE_ATOMIC,
		      IBV_MW_TYPE_1);
}

TEST(bind_err_type1_zero_based)
{
	bind_err_case(MR_ACC, 0, 64,
		      IBV_ACCESS_REMOTE_READ | IBV_ACCESS_ZERO_BASED,
		      IBV_MW_TYPE_1);
}

TEST(bind_err_type2_length_zero)
{
	bind_err_case(MR_ACC, 0, 0, IBV_ACCESS_REMOTE_READ, IBV_MW_TYPE_2);
}

TEST(bind_err_type2_bound_while_valid)
{
	struct env e;
	struct ibv_mw *mw;
	struct ibv_mw_bind b;
	uint32_t k;

	env_open(&e, MR_ACC);
	mw = ibv_alloc_mw(e.pd, IBV_MW_TYPE_2);
	ASSERT_NOT_NULL(mw);
	b = bind_of(e.mr, 0, 64, IBV_ACCESS_REMOTE_READ, 1);
	k = ibv_inc_rkey(mw->rkey);
	ASSERT_EQ(post_bind2(e.qp, mw, k, &b.bind_info, 1), 0);
	expect_wc(&e, 1, IBV_WC_SUCCESS, IBV_WC_BIND_MW);
	ASSERT_EQ(post_bind2(e.qp, mw, ibv_inc_rkey(k), &b.bind_info, 2), 0);
	expect_wc(&e, 2, IBV_WC_MW_BIND_ERR, 0);
}

TEST(bind_err_qp_of_another_pd)
{
	struct env e;
	struct ibv_mw *mw;
	struct ibv_mw_bind b;
	struct ibv_pd *pd2;
	struct ibv_qp *qp2;

	env_open(&e, MR_ACC);
	pd2 = ibv_alloc_pd(e.ctx);
	ASSERT_NOT_NULL(pd2);
	qp2 = self_qp(&e, pd2);
	mw = ibv_alloc_mw(e.pd, IBV_MW_TYPE_2);
	ASSERT_NOT_NULL(mw);
	b = bind_of(e.mr, 0, 64, IBV_ACCESS_REMOTE_READ, 1);
	/* C10-72: the QP's PD is the window's */
	ASSERT_EQ(post_bind2(qp2, mw, ibv_inc_rkey(mw->rkey), &b.bind_info,
			     1), 0);
	expect_wc(&e, 1, IBV_WC_MW_BIND_ERR, 0);
}

TEST(bind_err_deallocated_window)
{
	struct env e;
	struct ibv_mw *mw;
	struct ibv_mw_bind b;
	uint32_t k;

	env_open(&e, MR_ACC);
	mw = ibv_alloc_mw(e.pd, IBV_MW_TYPE_2);
	ASSERT_NOT_NULL(mw);
	k = ibv_inc_rkey(mw->rkey);
	ASSERT_EQ(ibv_dealloc_mw(mw), 0);
	b = bind_of(e.mr, 0, 64, IBV_ACCESS_REMOTE_READ, 1);
	/* mw's struct is in the quarantine: its handle names nothing */
	ASSERT_EQ(post_bind2(e.qp, mw, k, &b.bind_info, 1), 0);
	expect_wc(&e, 1, IBV_WC_MW_BIND_ERR, 0);
}

/*
 * Handles (issue 12, docs/conformance.md "Handles"): a window whose
 * handle was changed, a window of another context and a PD that is not
 * live are refused like every other object; the window itself survives.
 */
TEST(window_garbled_foreign_dead_pd)
{
	struct ibv_context *other = open_lo();
	struct ibv_pd *opd = ibv_alloc_pd(other), *dead;
	struct ibv_mw *mw, *omw;
	struct ibv_mw_bind b;
	struct env e;
	uint32_t h, k;

	env_open(&e, MR_ACC);
	ASSERT_NOT_NULL(opd);
	mw = ibv_alloc_mw(e.pd, IBV_MW_TYPE_2);
	ASSERT_NOT_NULL(mw);
	/* a garbled handle names nothing: ENOENT, the window untouched */
	h = mw->handle;
	mw->handle = h ^ 1;
	ASSERT_EQ(ibv_dealloc_mw(mw), ENOENT);
	ASSERT_EQ(errno, ENOENT);
	mw->handle = 0xffffffff;
	ASSERT_EQ(ibv_dealloc_mw(mw), ENOENT);
	b = bind_of(e.mr, 0, 64, IBV_ACCESS_REMOTE_READ, 1);
	ASSERT_EQ(post_bind2(e.qp, mw, ibv_inc_rkey(mw->rkey),
			     &b.bind_info, 1), 0);
	expect_wc(&e, 1, IBV_WC_MW_BIND_ERR, 0);
	mw->handle = h;
	/* a window of another context, bound through this one's QP */
	omw = ibv_alloc_mw(opd, IBV_MW_TYPE_2);
	ASSERT_NOT_NULL(omw);
	/* the bind error took the QP to ERR: a fresh one */
	ASSERT_EQ(ibv_destroy_qp(e.qp), 0);
	e.qp = self_qp(&e, e.pd);
	k = ibv_inc_rkey(omw->rkey);
	ASSERT_EQ(post_bind2(e.qp, omw, k, &b.bind_info, 2), 0);
	expect_wc(&e, 2, IBV_WC_MW_BIND_ERR, 0);
	ASSERT_EQ(ibv_dealloc_mw(omw), 0);	/* still live there */
	/* the window with its handle back is the window */
	ASSERT_EQ(ibv_dealloc_mw(mw), 0);
	/* a PD that is not live: ALLOC_MW's lookup, EINVAL */
	dead = ibv_alloc_pd(e.ctx);
	ASSERT_NOT_NULL(dead);
	ASSERT_EQ(ibv_dealloc_pd(dead), 0);
	errno = 0;
	ASSERT_NULL(ibv_alloc_mw(dead, IBV_MW_TYPE_1));
	ASSERT_EQ(errno, EINVAL);
	ASSERT_EQ(ibv_dealloc_pd(opd), 0);
	ASSERT_EQ(ibv_close_device(other), 0);
}
TEST(bind_post_without_window_is_einval)
{
	struct env e;
	struct ibv_send_wr wr, *bad = NULL;

	env_open(&e, MR_ACC);
	memset(&wr, 0, sizeof(wr));
	wr.opcode = IBV_WR_BIND_MW;
	ASSERT_EQ(ibv_post_send(e.qp, &wr, &bad), EINVAL);
	ASSERT(bad == &wr);
}

TEST(local_inv_type2_then_rebind)
{
	struct env e;
	struct ibv_mw *mw;
	struct ibv_mw_bind b;
	uint32_t k;

	env_open(&e, MR_ACC);
	mw = ibv_alloc_mw(e.pd, IBV_MW_TYPE_2);
	ASSERT_NOT_NULL(mw);
	b = bind_of(e.mr, 0, 64, IBV_ACCESS_REMOTE_WRITE, 1);
	k = ibv_inc_rkey(mw->rkey);
	ASSERT_EQ(post_bind2(e.qp, mw, k, &b.bind_info, 1), 0);
	expect_wc(&e, 1, IBV_WC_SUCCESS, IBV_WC_BIND_MW);
	ASSERT_EQ(ibv_dereg_mr(e.mr), EBUSY);
	ASSERT_EQ(post_local_inv(e.qp, k, 2), 0);
	expect_wc(&e, 2, IBV_WC_SUCCESS, IBV_WC_LOCAL_INV);
	/* invalid again: it may be bound anew, with the next tag */
	k = ibv_inc_rkey(k);
	ASSERT_EQ(post_bind2(e.qp, mw, k, &b.bind_info, 3), 0);
	expect_wc(&e, 3, IBV_WC_SUCCESS, IBV_WC_BIND_MW);
	loop_write(&e, k, 8, 4);
	expect_wc(&e, 4, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
	ASSERT_EQ(post_local_inv(e.qp, k, 5), 0);
	expect_wc(&e, 5, IBV_WC_SUCCESS, IBV_WC_LOCAL_INV);
	/* nothing bound any more: the MR may go, the window stays */
	ASSERT_EQ(ibv_dereg_mr(e.mr), 0);
	ASSERT_EQ(ibv_dealloc_mw(mw), 0);
}

TEST(local_inv_of_type1_fails)
{
	struct env e;
	struct ibv_mw *mw;
	struct ibv_mw_bind b;

	env_open(&e, MR_ACC);
	mw = ibv_alloc_mw(e.pd, IBV_MW_TYPE_1);
	ASSERT_NOT_NULL(mw);
	b = bind_of(e.mr, 0, 64, IBV_ACCESS_REMOTE_READ, 1);
	ASSERT_EQ(ibv_bind_mw(e.qp, mw, &b), 0);
	expect_wc(&e, 1, IBV_WC_SUCCESS, IBV_WC_BIND_MW);
	/* o10-37.2.26: a type 1 window is not invalidated so */
	ASSERT_EQ(post_local_inv(e.qp, mw->rkey, 2), 0);
	expect_wc(&e, 2, IBV_WC_LOC_QP_OP_ERR, 0);
}

TEST(local_inv_of_stale_tag_fails)
{
	struct env e;
	struct ibv_mw *mw;
	struct ibv_mw_bind b;
	uint32_t k;

	env_open(&e, MR_ACC);
	mw = ibv_alloc_mw(e.pd, IBV_MW_TYPE_2);
	ASSERT_NOT_NULL(mw);
	b = bind_of(e.mr, 0, 64, IBV_ACCESS_REMOTE_READ, 1);
	k = ibv_inc_rkey(mw->rkey);
	ASSERT_EQ(post_bind2(e.qp, mw, k, &b.bind_info, 1), 0);
	expect_wc(&e, 1, IBV_WC_SUCCESS, IBV_WC_BIND_MW);
	ASSERT_EQ(post_local_inv(e.qp, mw->rkey, 2), 0);	/* old tag */
	expect_wc(&e, 2, IBV_WC_LOC_QP_OP_ERR, 0);
}

TEST(local_inv_of_an_mr_fails)
{
	struct env e;

	env_open(&e, MR_ACC);
	ASSERT_EQ(post_local_inv(e.qp, e.mr->rkey, 1), 0);
	expect_wc(&e, 1, IBV_WC_LOC_QP_OP_ERR, 0);
}

TEST(window_key_is_not_an_lkey)
{
	struct env e;
	struct ibv_mw *mw;
	struct ibv_mw_bind b;
	struct ibv_sge sge;
	struct ibv_send_wr wr, *bad;

	env_open(&e, MR_ACC);
	mw = ibv_alloc_mw(e.pd, IBV_MW_TYPE_1);
	ASSERT_NOT_NULL(mw);
	b = bind_of(e.mr, 0, 4096, IBV_ACCESS_REMOTE_WRITE, 1);
	ASSERT_EQ(ibv_bind_mw(e.qp, mw, &b), 0);
	expect_wc(&e, 1, IBV_WC_SUCCESS, IBV_WC_BIND_MW);
	sge.addr = (uintptr_t)e.buf;
	sge.length = 8;
	sge.lkey = mw->rkey;
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = 2;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_RDMA_WRITE;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.wr.rdma.remote_addr = (uintptr_t)e.buf + 64;
	wr.wr.rdma.rkey = mw->rkey;
	ASSERT_EQ(ibv_post_send(e.qp, &wr, &bad), 0);
	expect_wc(&e, 2, IBV_WC_LOC_PROT_ERR, 0);
}

TEST(qp_ex_bind_and_local_inv)
{
	struct ibv_qp_init_attr_ex ia;
	struct ibv_qp_ex *qpx;
	struct ibv_mw_bind b;
	struct ibv_mw *mw;
	struct ibv_qp *qp;
	struct env e;
	uint32_t k;

	env_open(&e, MR_ACC);
	memset(&ia, 0, sizeof(ia));
	ia.send_cq = ia.recv_cq = e.cq;
	ia.cap.max_send_wr = ia.cap.max_recv_wr = 8;
	ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
	ia.qp_type = IBV_QPT_RC;
	ia.pd = e.pd;
	ia.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
	ia.send_ops_flags = IBV_QP_EX_WITH_BIND_MW | IBV_QP_EX_WITH_LOCAL_INV |
			    IBV_QP_EX_WITH_SEND_WITH_INV |
			    IBV_QP_EX_WITH_RDMA_WRITE;
	qp = ibv_create_qp_ex(e.ctx, &ia);
	ASSERT_NOT_NULL(qp);
	qpx = ibv_qp_to_qp_ex(qp);
	ASSERT_NOT_NULL(qpx);
	connect_self(qp, QP_ACC);

	mw = ibv_alloc_mw(e.pd, IBV_MW_TYPE_2);
	ASSERT_NOT_NULL(mw);
	b = bind_of(e.mr, 0, 64, IBV_ACCESS_REMOTE_WRITE, 0);
	k = ibv_inc_rkey(mw->rkey);
	ibv_wr_start(qpx);
	qpx->wr_id = 1;
	qpx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_bind_mw(qpx, mw, k, &b.bind_info);
	qpx->wr_id = 2;
	ibv_wr_local_inv(qpx, k);
	ASSERT_EQ(ibv_wr_complete(qpx), 0);
	expect_wc(&e, 1, IBV_WC_SUCCESS, IBV_WC_BIND_MW);
	expect_wc(&e, 2, IBV_WC_SUCCESS, IBV_WC_LOCAL_INV);
	ASSERT_EQ(ibv_destroy_qp(qp), 0);
	ASSERT_EQ(ibv_dealloc_mw(mw), 0);
}

/* A type 2 window is reached only through the QP it is bound to (2B); a
 * type 1 window through any QP of its PD. */
static void through_other_qp(enum ibv_mw_type type)
{
	struct ibv_mw_bind b;
	struct ibv_qp *qp2;
	struct ibv_mw *mw;
	struct ibv_wc wc;
	struct env e;
	uint32_t k;

	env_open(&e, MR_ACC);
	qp2 = self_qp(&e, e.pd);
	mw = ibv_alloc_mw(e.pd, type);
	ASSERT_NOT_NULL(mw);
	b = bind_of(e.mr, 0, 4096, IBV_ACCESS_REMOTE_WRITE, 1);
	if (type == IBV_MW_TYPE_1) {
		ASSERT_EQ(ibv_bind_mw(e.qp, mw, &b), 0);
		k = mw->rkey;
	} else {
		k = ibv_inc_rkey(mw->rkey);
		ASSERT_EQ(post_bind2(e.qp, mw, k, &b.bind_info, 1), 0);
	}
	expect_wc(&e, 1, IBV_WC_SUCCESS, IBV_WC_BIND_MW);
	/* through the QP it was bound on: fine */
	loop_write(&e, k, 64, 2);
	expect_wc(&e, 2, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
	/* qp2 (same PD) writes to itself with the window's key */
	{
		struct ibv_qp *keep = e.qp;

		e.qp = qp2;
		loop_write(&e, k, 128, 3);
		e.qp = keep;
	}
	wc = poll_one(e.cq);
	ASSERT_EQ(wc.wr_id, 3);
	ASSERT_EQ(wc.status, type == IBV_MW_TYPE_1 ? IBV_WC_SUCCESS :
						     IBV_WC_REM_ACCESS_ERR);
}

TEST(type2_only_through_its_qp)
{
	through_other_qp(IBV_MW_TYPE_2);
}

TEST(type1_through_any_qp_of_its_pd)
{
	through_other_qp(IBV_MW_TYPE_1);
}

/* The QP's PD is checked at each access too: a type 1 window of PD 1 is
 * not reached through a QP of PD 2 (IBA 10.6.7.2.1). */
TEST(type1_not_through_another_pd)
{
	struct ibv_mw_bind b;
	struct ibv_pd *pd2;
	struct ibv_qp *qp2;
	struct ibv_mr *mr2;
	struct ibv_mw *mw;
	struct ibv_wc wc;
	struct env e;
	static char b2[4096] __attribute__((aligned(4096)));

	env_open(&e, MR_ACC);
	pd2 = ibv_alloc_pd(e.ctx);
	ASSERT_NOT_NULL(pd2);
	qp2 = self_qp(&e, pd2);
	mr2 = ibv_reg_mr(pd2, b2, sizeof(b2), IBV_ACCESS_LOCAL_WRITE);
	ASSERT_NOT_NULL(mr2);
	mw = ibv_alloc_mw(e.pd, IBV_MW_TYPE_1);
	ASSERT_NOT_NULL(mw);
	b = bind_of(e.mr, 0, 4096, IBV_ACCESS_REMOTE_WRITE, 1);
	ASSERT_EQ(ibv_bind_mw(e.qp, mw, &b), 0);
	expect_wc(&e, 1, IBV_WC_SUCCESS, IBV_WC_BIND_MW);
	{
		struct ibv_sge sge = { .addr = (uintptr_t)b2, .length = 8,
				       .lkey = mr2->lkey };
		struct ibv_send_wr wr, *bad;

		memset(&wr, 0, sizeof(wr));
		wr.wr_id = 2;
		wr.sg_list = &sge;
		wr.num_sge = 1;
		wr.opcode = IBV_WR_RDMA_WRITE;
		wr.send_flags = IBV_SEND_SIGNALED;
		wr.wr.rdma.remote_addr = (uintptr_t)e.buf;
		wr.wr.rdma.rkey = mw->rkey;
		ASSERT_EQ(ibv_post_send(qp2, &wr, &bad), 0);
	}
	wc = poll_one(e.cq);
	ASSERT_EQ(wc.wr_id, 2);
	ASSERT_EQ(wc.status, IBV_WC_REM_ACCESS_ERR);
}

static struct shca_mr_shm *entry_of(uint32_t key)
{
	struct shca_mr_shm *t = shca_arena_mr_table(arena_own_base());

	for (uint32_t i = 1; i < 65536; i++)
		if (__atomic_load_n(&t[i].key, __ATOMIC_ACQUIRE) == key)
			return &t[i];
	return NULL;
}

/*
 * What a peer reads of a type 2 window (arena.h): an R_Key-only entry
 * bound to its QP, the window's range and rights; and a peer's Send with
 * Invalidate (the CAS of the key word to 0) is what the owner goes by:
 * the window is no longer valid, its MR may go, a LOCAL_INV fails.
 */
TEST(window_entry_as_peers_see_it)
{
	struct shca_mr_shm *ent;
	struct ibv_mw_bind b;
	struct ibv_mw *mw;
	struct env e;
	uint32_t k, expect;

	env_open(&e, MR_ACC);
	mw = ibv_alloc_mw(e.pd, IBV_MW_TYPE_2);
	ASSERT_NOT_NULL(mw);
	/* unbound: nothing in the table has its key */
	ASSERT_NULL(entry_of(mw->rkey));
	b = bind_of(e.mr, 4096, 4096, IBV_ACCESS_REMOTE_WRITE |
					 IBV_ACCESS_LOCAL_WRITE, 1);
	k = ibv_inc_rkey(mw->rkey);
	ASSERT_EQ(post_bind2(e.qp, mw, k, &b.bind_info, 1), 0);
	expect_wc(&e, 1, IBV_WC_SUCCESS, IBV_WC_BIND_MW);
	ent = entry_of(k);
	ASSERT_NOT_NULL(ent);
	ASSERT(ent->flags & SHCA_MR_SHM_MW);
	ASSERT(ent->flags & SHCA_MR_SHM_MW_QP);
	ASSERT_EQ(ent->qpn, e.qp->qp_num);
	ASSERT_U64_EQ(ent->addr, (uintptr_t)e.buf + 4096);
	ASSERT_U64_EQ(ent->iova, (uintptr_t)e.buf + 4096);
	ASSERT_U64_EQ(ent->length, 4096);
	ASSERT_EQ(ent->access, IBV_ACCESS_REMOTE_WRITE);
	ASSERT_EQ(ibv_dereg_mr(e.mr), EBUSY);
	/* a peer's Send with Invalidate */
	expect = k;
	ASSERT(__atomic_compare_exchange_n(&ent->key, &expect, 0, false,
					   __ATOMIC_ACQ_REL,
					   __ATOMIC_RELAXED));
	ASSERT_EQ(post_local_inv(e.qp, k, 2), 0);
	expect_wc(&e, 2, IBV_WC_LOC_QP_OP_ERR, 0);
	ASSERT_EQ(ibv_dereg_mr(e.mr), 0);
	ASSERT_EQ(ibv_dealloc_mw(mw), 0);
}

/* ibv_rereg_mr of an MR with a valid window bound: refused like the
 * dereg (EBUSY); the window keeps working. */
TEST(rereg_with_bound_window_is_ebusy)
{
	struct ibv_mw_bind b;
	struct ibv_mw *mw;
	struct env e;

	env_open(&e, MR_ACC);
	mw = ibv_alloc_mw(e.pd, IBV_MW_TYPE_1);
	ASSERT_NOT_NULL(mw);
	b = bind_of(e.mr, 0, 4096, IBV_ACCESS_REMOTE_WRITE, 1);
	ASSERT_EQ(ibv_bind_mw(e.qp, mw, &b), 0);
	expect_wc(&e, 1, IBV_WC_SUCCESS, IBV_WC_BIND_MW);
	errno = 0;
	ASSERT_EQ(ibv_rereg_mr(e.mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL,
			       0, IBV_ACCESS_LOCAL_WRITE),
		  IBV_REREG_MR_ERR_CMD);
	ASSERT_EQ(errno, EBUSY);
	loop_write(&e, mw->rkey, 256, 2);
	expect_wc(&e, 2, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
	/* unbound: the rereg goes through */
	b = bind_of(e.mr, 0, 0, 0, 3);
	ASSERT_EQ(ibv_bind_mw(e.qp, mw, &b), 0);
	expect_wc(&e, 3, IBV_WC_SUCCESS, IBV_WC_BIND_MW);
	ASSERT_EQ(ibv_rereg_mr(e.mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL,
			       0, IBV_ACCESS_LOCAL_WRITE), 0);
	ASSERT_EQ(ibv_dealloc_mw(mw), 0);
}
