// SPDX-License-Identifier: MIT
/*
 * Completion queues: ibv_create_cq, ibv_resize_cq, ibv_destroy_cq,
 * ibv_req_notify_cq, ibv_poll_cq on an empty CQ, and the extended CQ
 * (ibv_create_cq_ex, start/next/end_poll).
 *
 * Reference: the kernel's create_cq (uverbs_cmd.c: comp_vector >=
 * num_comp_vectors EINVAL) and rxe_cq_chk_attr (cqe < 1, cqe > max_cqe, or
 * on resize fewer than the completions held: EINVAL); CQ sizes rounded to
 * 2^n - 1 as rxe and mlx5 do; rdma-core 44 __lib_ibv_create_cq_ex
 * (wc_flags outside IBV_CREATE_CQ_SUP_WC_FLAGS: EOPNOTSUPP) and the
 * providers' create_cq_ex and start_poll (mlx5: comp_mask EINVAL; rxe:
 * unsupported flags EOPNOTSUPP, empty CQ ENOENT); pyverbs' test_cq and
 * test_cqex.
 */
#include "harness.h"
#include "common.h"
#include "flushqp.h"

static int max_cqe(struct ibv_context *ctx)
{
	struct ibv_device_attr a;

	ASSERT_EQ(ibv_query_device(ctx, &a), 0);
	return a.max_cqe;
}

static int rounded(int cqe)
{
	int n = 1;

	while (n < cqe + 1)
		n <<= 1;
	return n - 1;
}

/* ------------------------------------------------------------------ */
/* ibv_create_cq                                                       */

TEST(create_cq_fields)
{
	struct ibv_context *ctx = open_lo();
	int cookie;
	struct ibv_cq *cq = ibv_create_cq(ctx, 10, &cookie, NULL, 0);

	ASSERT_NOT_NULL(cq);
	ASSERT(cq->context == ctx);
	ASSERT(cq->cq_context == &cookie);
	ASSERT_NULL(cq->channel);
	ASSERT_EQ(cq->cqe, 15);
	ASSERT_EQ(cq->comp_events_completed, 0);
	ASSERT_EQ(cq->async_events_completed, 0);
	ASSERT_EQ(ibv_destroy_cq(cq), 0);
	ASSERT_EQ(ibv_close_device(ctx), 0);
}

TEST(create_cq_sizes_rounded)
{
	struct ibv_context *ctx = open_lo();
	int sizes[] = {1, 2, 3, 4, 7, 8, 100, 1000, 4096};
	int max = max_cqe(ctx);
	unsigned int i;
	struct ibv_cq *cq;

	for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		cq = ibv_create_cq(ctx, sizes[i], NULL, NULL, 0);
		ASSERT_NOT_NULL(cq);
		ASSERT_EQ(cq->cqe, rounded(sizes[i]));
		ASSERT_EQ(ibv_destroy_cq(cq), 0);
	}
	cq = ibv_create_cq(ctx, max, NULL, NULL, 0);
	ASSERT_NOT_NULL(cq);
	ASSERT_GE(cq->cqe, max);
	ASSERT_EQ(ibv_destroy_cq(cq), 0);
	cq = ibv_create_cq(ctx, max / 2, NULL, NULL, 0);
	ASSERT_NOT_NULL(cq);
	ASSERT_EQ(ibv_destroy_cq(cq), 0);
	ASSERT_EQ(ibv_close_device(ctx), 0);
}

TEST(create_cq_bad_cqe)
{
	struct ibv_context *ctx = open_lo();
	int max = max_cqe(ctx);

	ASSERT_NULL_ERRNO(ibv_create_cq(ctx, 0, NULL, NULL, 0), EINVAL);
	ASSERT_NULL_ERRNO(ibv_create_cq(ctx, -1, NULL, NULL, 0), EINVAL);
	ASSERT_NULL_ERRNO(ibv_create_cq(ctx, INT32_MIN, NULL, NULL, 0), EINVAL);
	ASSERT_NULL_ERRNO(ibv_create_cq(ctx, max + 1, NULL, NULL, 0), EINVAL);
	ASSERT_NULL_ERRNO(ibv_create_cq(ctx, INT32_MAX, NULL, NULL, 0), EINVAL);
	ASSERT_EQ(ibv_close_device(ctx), 0);
}

TEST(create_cq_comp_vector)
{
	struct ibv_context *ctx = open_lo();
	int n = ctx->num_comp_vectors;
	struct ibv_cq *cq;

	cq = ibv_create_cq(ctx, 8, NULL, NULL, n - 1);
	ASSERT_NOT_NULL(cq);
	ASSERT_EQ(ibv_destroy_cq(cq), 0);
	ASSERT_NULL_ERRNO(ibv_create_cq(ctx, 8, NULL, NULL, n), EINVAL);
	ASSERT_NULL_ERRNO(ibv_create_cq(ctx, 8, NULL, NULL, n + 1), EINVAL);
	ASSERT_NULL_ERRNO(ibv_create_cq(ctx, 8, NULL, NULL, -1), EINVAL);
	ASSERT_EQ(ibv_close_device(ctx), 0);
}

TEST(empty_cq_polls_nothing)
{
	struct ibv_context *ctx = open_lo();
	struct ibv_cq *cq = ibv_create_cq(ctx, 4, NULL, NULL, 0);
	struct ibv_wc wc[4];

	ASSERT_NOT_NULL(cq);
	ASSERT_EQ(ibv_poll_cq(cq, 4, wc), 0);
	ASSERT_EQ(ibv_poll_cq(cq, 0, wc), 0);
	ASSERT_EQ(ibv_req_notify_cq(cq, 0), 0);
	ASSERT_EQ(ibv_req_notify_cq(cq, 1), 0);
	ASSERT_EQ(ibv_req_notify_cq(cq, 0), 0);
	ASSERT_EQ(ibv_destroy_cq(cq), 0);
	ASSERT_EQ(ibv_close_device(ctx), 0);
}

TEST(many_cqs)
{
	struct ibv_context *ctx = open_lo();
	struct ibv_cq *cq[256];
	int i;

	for (i = 0; i < 256; i++) {
		cq[i] = ibv_create_cq(ctx, 1 + i, NULL, NULL, 0);
		ASSERT_NOT_NULL(cq[i]);
	}
	for (i = 0; i < 256; i++)
		ASSERT_EQ(ibv_destroy_cq(cq[i]), 0);
	ASSERT_EQ(ibv_close_device(ctx), 0);
}

/* ------------------------------------------------------------------ */
/* ibv_resize_cq                                                       */

TEST(resize_cq)
{
	struct ibv_context *ctx = open_lo();
	struct ibv_cq *cq = ibv_create_cq(ctx, 3, NULL, NULL, 0);
	int max = max_cqe(ctx);

	ASSERT_NOT_NULL(cq);
	ASSERT_EQ(ibv_resize_cq(cq, 1), 0);
	ASSERT_EQ(cq->cqe, 1);
	ASSERT_EQ(ibv_resize_cq(cq, 100), 0);
	ASSERT_EQ(cq->cqe, 127);
	ASSERT_EQ(ibv_resize_cq(cq, 127), 0);
	ASSERT_EQ(cq->cqe, 127);
	ASSERT_EQ(ibv_resize_cq(cq, max), 0);
	ASSERT_GE(cq->cqe, max);
	ASSERT_EQ(ibv_resize_cq(cq, 7), 0);
	ASSERT_EQ(cq->cqe, 7);
	ASSERT_EQ(ibv_destroy_cq(cq), 0);
	ASSERT_EQ(ibv_close_device(ctx), 0);
}

TEST(resize_cq_bad_size)
{
	struct ibv_context *ctx = open_lo();
	struct ibv_cq *cq = ibv_create_cq(ctx, 3, NULL, NULL, 0);
	int max = max_cqe(ctx);

	ASSERT_NOT_NULL(cq);
	ASSERT_EQ(ibv_resize_cq(cq, 0), EINVAL);
	ASSERT_EQ(ibv_resize_cq(cq, -1), EINVAL);
	ASSERT_EQ(ibv_resize_cq(cq, max + 1), EINVAL);
	ASSERT_EQ(cq->cqe, 3); /* unchanged */
	ASSERT_EQ(ibv_destroy_cq(cq), 0);
	ASSERT_EQ(ibv_close_device(ctx), 0);
}

/* Fewer entries than completions held: EINVAL (rxe_cq_chk_attr; pyverbs'
 * test_resize_cq).  The completions survive a resize, in order. */
TEST(resize_cq_below_outstanding)
{
	struct ibv_context *ctx = open_lo();
	struct ibv_cq *cq = ibv_create_cq(ctx, 7, NULL, NULL, 0);
	struct ibv_wc wc[4];
	struct flush_qp f;
	int i;

	ASSERT_NOT_NULL(cq);
	flush_qp_create(ctx, cq, &f, 4);
	for (i = 0; i < 3; i++)
		flush_qp_post_recv(&f, 100 + i);
	flush_qp_flush(&f);
	/* let the three flushes land; they are not consumed */
	poll(NULL, 0, 200);
	ASSERT_EQ(ibv_resize_cq(cq, 2), EINVAL);
	ASSERT_EQ(ibv_resize_cq(cq, 1), EINVAL);
	ASSERT_EQ(ibv_resize_cq(cq, 3), 0);
	ASSERT_GE(cq->cqe, 3);
	ASSERT_EQ(poll_n(cq, wc, 3, 1000), 3);
	for (i = 0; i < 3; i++) {
		ASSERT_EQ(wc[i].wr_id, 100 + i);
		ASSERT_EQ(wc[i].status, IBV_WC_WR_FLUSH_ERR);
	}
	flush_qp_destroy(&f);
	ASSERT_EQ(ibv_destroy_cq(cq), 0);
	ASSERT_EQ(ibv_close_device(ctx), 0);
}

/* f back to INIT through RESET (which takes its completions out of the
 * CQ, as mlx5's cq_clean). */
static void reinit(struct flush_qp *f)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_RESET };

	ASSERT_EQ(ibv_modify_qp(f->qp, &a, IBV_QP_STATE), 0);
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	ASSERT_EQ(ibv_modify_qp(f->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
					     IBV_QP_PORT | IBV_QP_ACCESS_FLAGS),
		  0);
}

/* n flushed receives of f, wr_ids id, id + 1, ... */
static void flushed(struct flush_qp *f, uint64_t id, int n)
{
	int i;

	for (i = 0; i < n; i++)
		flush_qp_post_recv(f, id + (uint64_t)i);
	flush_qp_flush(f);
}

/* The next n completions are wr_ids id, id + 1, ..., flushed, then none. */
static void expect_ids(struct ibv_cq *cq, uint64_t id, int n)
{
	struct ibv_wc wc[8];
	int i;

	ASSERT_EQ(poll_n(cq, wc, n, 2000), n);
	for (i = 0; i < n; i++) {
		ASSERT_U64_EQ(wc[i].wr_id, id + (uint64_t)i);
		ASSERT_EQ(wc[i].status, IBV_WC_WR_FLUSH_ERR);
	}
	ASSERT_EQ(ibv_poll_cq(cq, 8, wc), 0);
}

/*
 * An entry is there for the poller when its phase bit is its lap's
 * (shm/arena.h SHCA_CQE_PHASE): completions stay in order, none twice,
 * none lost, over many laps of a 4-slot ring; a resize while three wait
 * across a lap's end moves them to the new ring's first lap; and a QP's
 * reset that takes its completions out around the ring's end (mlx5's
 * cq_clean) leaves the other QP's completion where the poller finds it.
 */
TEST(cq_laps_resize_clean)
{
	struct ibv_context *ctx = open_lo();
	struct ibv_cq *cq = ibv_create_cq(ctx, 3, NULL, NULL, 0);
	struct flush_qp a, b;
	uint64_t id = 1000;
	int r;

	ASSERT_NOT_NULL(cq);
	ASSERT_EQ(cq->cqe, 3);		/* a ring of 4 */
	flush_qp_create(ctx, cq, &a, 4);
	flush_qp_create(ctx, cq, &b, 4);
	for (r = 0; r < 10; r++, id += 3) {	/* counter 0 .. 30 */
		flushed(&a, id, 3);
		expect_ids(cq, id, 3);
		reinit(&a);
	}
	/* counter 30 .. 32: across the end of the ring's eighth lap */
	flushed(&a, id, 3);
	ASSERT_EQ(ibv_resize_cq(cq, 7), 0);	/* a ring of 8 */
	ASSERT_EQ(cq->cqe, 7);
	expect_ids(cq, id, 3);
	reinit(&a);
	id += 3;
	for (r = 0; r < 10; r++, id += 3) {	/* counter 3 .. 33 */
		flushed(&a, id, 3);
		expect_ids(cq, id, 3);
		reinit(&a);
	}
	for (r = 0; r < 5; r++, id++) {		/* .. 38 */
		flushed(&a, id, 1);
		expect_ids(cq, id, 1);
		reinit(&a);
	}
	/* 38: a's, 39: b's, 40 (the next lap's first): a's; a's reset
	 * moves b's to 40 */
	flushed(&a, id, 1);
	flushed(&b, id + 1, 1);
	reinit(&a);
	flushed(&a, id + 2, 1);
	reinit(&a);
	expect_ids(cq, id + 1, 1);
	id += 3;
	for (r = 0; r < 4; r++, id += 3) {
		flushed(&a, id, 3);
		expect_ids(cq, id, 3);
		reinit(&a);
	}
	flush_qp_destroy(&a);
	flush_qp_destroy(&b);
	ASSERT_EQ(ibv_destroy_cq(cq), 0);
	ASSERT_EQ(ibv_close_device(ctx), 0);
}

/* A CQ that a QP uses cannot be destroyed (ib_destroy_usecnt). */
TEST(destroy_cq_in_use_is_ebusy)
{
	struct ibv_context *ctx = open_lo();
	struct ibv_cq *cq = ibv_create_cq(ctx, 7, NULL, NULL, 0);
	struct flush_qp f;

	ASSERT_NOT_NULL(cq);
	flush_qp_create(ctx, cq, &f, 1);
	ASSERT_EQ(ibv_destroy_cq(cq), EBUSY);
	flush_qp_destroy(&f);
	ASSERT_EQ(ibv_destroy_cq(cq), 0);
	ASSERT_EQ(ibv_close_device(ctx), 0);
}

/* ------------------------------------------------------------------ */
/* Extended CQ                                                         */

static struct ibv_cq_init_attr_ex cq_attr(uint32_t cqe, uint64_t wc_flags)
{
	struct ibv_cq_init_attr_ex a = {
	    .cqe = cqe,
	    .wc_flags = wc_flags,
	};

	return a;
}

TEST(create_cq_ex)
{
	struct ibv_context *ctx = open_lo();
	struct ibv_comp_channel *ch = ibv_create_comp_channel(ctx);
	struct ibv_cq_init_attr_ex a = cq_attr(100, IBV_WC_STANDARD_FLAGS);
	int cookie;
	struct ibv_cq_ex *cqx;
	struct ibv_cq *cq;

	ASSERT_NOT_NULL(ch);
	a.cq_context = &cookie;
	a.channel = ch;
	cqx = ibv_create_cq_ex(ctx, &a);
	ASSERT_NOT_NULL(cqx);
	cq = ibv_cq_ex_to_cq(cqx);
	ASSERT(cq->context == ctx);
	ASSERT(cq->cq_context == &cookie);
	ASSERT(cq->channel == ch);
	ASSERT_EQ(ch->refcnt, 1);
	ASSERT_EQ(cq->cqe, 127);
	ASSERT_NOT_NULL(cqx->start_poll);
	ASSERT_NOT_NULL(cqx->next_poll);
	ASSERT_NOT_NULL(cqx->end_poll);
	ASSERT_NOT_NULL(cqx->read_opcode);
	ASSERT_NOT_NULL(cqx->read_vendor_err);
	ASSERT_NOT_NULL(cqx->read_wc_flags);
	ASSERT_NOT_NULL(cqx->read_byte_len);
	ASSERT_NOT_NULL(cqx->read_imm_data);
	ASSERT_NOT_NULL(cqx->read_qp_num);
	ASSERT_NOT_NULL(cqx->read_src_qp);
	ASSERT_NOT_NULL(cqx->read_slid);
	ASSERT_NOT_NULL(cqx->read_sl);
	ASSERT_NOT_NULL(cqx->read_dlid_path_bits);
	/* a CQ_ex is a CQ: the legacy verbs work on it */
	ASSERT_EQ(ibv_req_notify_cq(cq, 0), 0);
	ASSERT_EQ(ibv_resize_cq(cq, 200), 0);
	ASSERT_EQ(cq->cqe, 255);
	ASSERT_EQ(ibv_destroy_comp_channel(ch), EBUSY);
	ASSERT_EQ(ibv_destroy_cq(cq), 0);
	ASSERT_EQ(ch->refcnt, 0);
	ASSERT_EQ(ibv_destroy_comp_channel(ch), 0);
	ASSERT_EQ(ibv_close_device(ctx), 0);
}

TEST(create_cq_ex_timestamps)
{
	struct ibv_context *ctx = open_lo();
	struct ibv_cq_init_attr_ex a = cq_attr(
	    8, IBV_WC_STANDARD_FLAGS | IBV_WC_EX_WITH_COMPLETION_TIMESTAMP |
		   IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK);
	struct ibv_device_attr_ex dx;
	struct ibv_cq_ex *cqx;

	/* offered because query_device_ex says the clock is there */
	ASSERT_EQ(ibv_query_device_ex(ctx, NULL, &dx), 0);
	ASSERT_NE(dx.hca_core_clock, 0);
	ASSERT_NE(dx.completion_timestamp_mask, 0);
	cqx = ibv_create_cq_ex(ctx, &a);
	ASSERT_NOT_NULL(cqx);
	ASSERT_NOT_NULL(cqx->read_completion_ts);
	ASSERT_NOT_NULL(cqx->read_completion_wallclock_ns);
	ASSERT_EQ(ibv_destroy_cq(ibv_cq_ex_to_cq(cqx)), 0);
	ASSERT_EQ(ibv_close_device(ctx), 0);
}

/* pyverbs test_create_cq_ex: each wc flag either works or is EOPNOTSUPP;
 * the ones softhca cannot produce are EOPNOTSUPP. */
TEST(create_cq_ex_wc_flags)
{
	struct ibv_context *ctx = open_lo();
	uint64_t bit;

	for (bit = 1; bit <= IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK;
	     bit <<= 1) {
		struct ibv_cq_init_attr_ex a = cq_attr(10, bit);
		struct ibv_cq_ex *cqx;

		errno = 0;
		cqx = ibv_create_cq_ex(ctx, &a);
		if (bit == IBV_WC_EX_WITH_CVLAN ||
		    bit == IBV_WC_EX_WITH_FLOW_TAG) {
			ASSERT_NULL(cqx);
			ASSERT_EQ(errno, EOPNOTSUPP);
			continue;
		}
		ASSERT_NOT_NULL(cqx);
		ASSERT_EQ(ibv_destroy_cq(ibv_cq_ex_to_cq(cqx)), 0);
	}
	ASSERT_EQ(ibv_close_device(ctx), 0);
}

TEST(create_cq_ex_errors)
{
	struct ibv_context *ctx = open_lo();
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	int max = max_cqe(ctx);
	struct ibv_cq_init_attr_ex a;

	/* rdma-core: wc_flags it does not know */
	a = cq_attr(10, IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK << 1);
	ASSERT_NULL_ERRNO(ibv_create_cq_ex(ctx, &a), EOPNOTSUPP);
	a = cq_attr(10, 1ull << 63);
	ASSERT_NULL_ERRNO(ibv_create_cq_ex(ctx, &a), EOPNOTSUPP);
	/* sizes and vectors as ibv_create_cq (pyverbs bad_flow) */
	a = cq_attr(0, 0);
	ASSERT_NULL_ERRNO(ibv_create_cq_ex(ctx, &a), EINVAL);
	a = cq_attr((uint32_t)max + 1, 0);
	ASSERT_NULL_ERRNO(ibv_create_cq_ex(ctx, &a), EINVAL);
	a = cq_attr(UINT32_MAX, 0);
	ASSERT_NULL_ERRNO(ibv_create_cq_ex(ctx, &a), EINVAL);
	a = cq_attr(10, 0);
	a.comp_vector = (uint32_t)ctx->num_comp_vectors;
	ASSERT_NULL_ERRNO(ibv_create_cq_ex(ctx, &a), EINVAL);
	a.comp_vector = (uint32_t)ctx->num_comp_vectors + 1;
	ASSERT_NULL_ERRNO(ibv_create_cq_ex(ctx, &a), EINVAL);
	/* comp_mask bits it does not know (mlx5) */
	a = cq_attr(10, 0);
	a.comp_mask = IBV_CQ_INIT_ATTR_MASK_PD << 1;
	ASSERT_NULL_ERRNO(ibv_create_cq_ex(ctx, &a), EINVAL);
	/* a PD that is not a parent domain (mlx5) */
	a = cq_attr(10, 0);
	a.comp_mask = IBV_CQ_INIT_ATTR_MASK_PD;
	a.parent_domain = pd;
	ASSERT_NULL_ERRNO(ibv_create_cq_ex(ctx, &a), EINVAL);
	ASSERT_EQ(ibv_dealloc_pd(pd), 0);
	ASSERT_EQ(ibv_close_device(ctx), 0);
}

/* pyverbs test_create_cq_ex: each creation flag works or is EOPNOTSUPP. */
TEST(create_cq_ex_flags)
{
	struct ibv_context *ctx = open_lo();
	struct ibv_cq_init_attr_ex a = cq_attr(10, 0);
	struct ibv_cq_ex *cqx;

	a.comp_mask = IBV_CQ_INIT_ATTR_MASK_FLAGS;
	a.flags = 0;
	cqx = ibv_create_cq_ex(ctx, &a);
	ASSERT_NOT_NULL(cqx);
	ASSERT_EQ(ibv_destroy_cq(ibv_cq_ex_to_cq(cqx)), 0);
	a.flags = IBV_CREATE_CQ_ATTR_SINGLE_THREADED;
	cqx = ibv_create_cq_ex(ctx, &a);
	ASSERT_NOT_NULL(cqx);
	ASSERT_EQ(ibv_destroy_cq(ibv_cq_ex_to_cq(cqx)), 0);
	/* softhca always reports an overrun (rxe: EOPNOTSUPP) */
	a.flags = IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN;
	ASSERT_NULL_ERRNO(ibv_create_cq_ex(ctx, &a), EOPNOTSUPP);
	a.flags = IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN << 1;
	ASSERT_NULL_ERRNO(ibv_create_cq_ex(ctx, &a), EOPNOTSUPP);
	/* flags are ignored without IBV_CQ_INIT_ATTR_MASK_FLAGS */
	a.comp_mask = 0;
	cqx = ibv_create_cq_ex(ctx, &a);
	ASSERT_NOT_NULL(cqx);
	ASSERT_EQ(ibv_destroy_cq(ibv_cq_ex_to_cq(cqx)), 0);
	ASSERT_EQ(ibv_close_device(ctx), 0);
}

static void start_poll_empty(uint32_t comp_mask, uint32_t flags)
{
	struct ibv_context *ctx = open_lo();
	struct ibv_cq_init_attr_ex a = cq_attr(4, IBV_WC_STANDARD_FLAGS);
	struct ibv_poll_cq_attr pa = {.comp_mask = 0};
	struct ibv_cq_ex *cqx;
	struct ibv_wc wc;

	a.comp_mask = comp_mask;
	a.flags = flags;
	cqx = ibv_create_cq_ex(ctx, &a);
	ASSERT_NOT_NULL(cqx);
	/* an empty CQ: ENOENT, and no end_poll is due */
	ASSERT_EQ(ibv_start_poll(cqx, &pa), ENOENT);
	ASSERT_EQ(ibv_start_poll(cqx, &pa), ENOENT);
	/* mlx5: comp_mask must be 0 */
	pa.comp_mask = 1;
	ASSERT_EQ(ibv_start_poll(cqx, &pa), EINVAL);
	/* not left locked: the legacy poll still works */
	ASSERT_EQ(ibv_poll_cq(ibv_cq_ex_to_cq(cqx), 1, &wc), 0);
	ASSERT_EQ(ibv_destroy_cq(ibv_cq_ex_to_cq(cqx)), 0);
	ASSERT_EQ(ibv_close_device(ctx), 0);
}

TEST(cq_ex_start_poll_empty)
{
	start_poll_empty(0, 0);
}

TEST(cq_ex_start_poll_empty_single_threaded)
{
	start_poll_empty(IBV_CQ_INIT_ATTR_MASK_FLAGS,
			 IBV_CREATE_CQ_ATTR_SINGLE_THREADED);
}

/* start/next/end_poll walk the completions in order; next_poll on the
 * last one is ENOENT and end_poll is still due. */
TEST(cq_ex_poll_completions)
{
	struct ibv_context *ctx = open_lo();
	struct ibv_cq_init_attr_ex a = cq_attr(8, IBV_WC_STANDARD_FLAGS);
	struct ibv_poll_cq_attr pa = {.comp_mask = 0};
	struct ibv_cq_ex *cqx = ibv_create_cq_ex(ctx, &a);
	struct ibv_cq *cq = ibv_cq_ex_to_cq(cqx);
	struct flush_qp f;
	int i, ret;

	ASSERT_NOT_NULL(cqx);
	flush_qp_create(ctx, cq, &f, 4);
	for (i = 0; i < 3; i++)
		flush_qp_post_recv(&f, 7 + i);
	flush_qp_flush(&f);
	for (i = 0; i < 1000; i++) {
		ret = ibv_start_poll(cqx, &pa);
		if (ret != ENOENT)
			break;
		poll(NULL, 0, 1);
	}
	ASSERT_EQ(ret, 0);
	for (i = 0; i < 3; i++) {
		if (i)
			ASSERT_EQ(ibv_next_poll(cqx), 0);
		ASSERT_EQ(cqx->wr_id, 7 + i);
		ASSERT_EQ(cqx->status, IBV_WC_WR_FLUSH_ERR);
		ASSERT_EQ(ibv_wc_read_qp_num(cqx), f.qp->qp_num);
	}
	ASSERT_EQ(ibv_next_poll(cqx), ENOENT);
	ibv_end_poll(cqx);
	ASSERT_EQ(ibv_start_poll(cqx, &pa), ENOENT);
	flush_qp_destroy(&f);
	ASSERT_EQ(ibv_destroy_cq(cq), 0);
	ASSERT_EQ(ibv_close_device(ctx), 0);
}
