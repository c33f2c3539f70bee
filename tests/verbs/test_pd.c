// SPDX-License-Identifier: MIT
/*
 * Protection domains: ibv_alloc_pd/ibv_dealloc_pd and the destroy-order
 * rule: a PD that still has MRs is EBUSY (the kernel's uverbs_free_pd ->
 * ib_destroy_usecnt), and deallocates once they are gone.
 */
#include <stdlib.h>

#include "harness.h"
#include "common.h"

TEST(alloc_dealloc)
{
	struct ibv_context *ctx = open_lo();
	struct ibv_pd *pd = ibv_alloc_pd(ctx);

	ASSERT_NOT_NULL(pd);
	ASSERT(pd->context == ctx);
	ASSERT_EQ(ibv_dealloc_pd(pd), 0);
	ASSERT_EQ(ibv_close_device(ctx), 0);
}

TEST(many_pds_distinct_handles)
{
	struct ibv_context *ctx = open_lo();
	struct ibv_pd *pd[64];
	int i, j;

	for (i = 0; i < 64; i++) {
		pd[i] = ibv_alloc_pd(ctx);
		ASSERT_NOT_NULL(pd[i]);
		for (j = 0; j < i; j++)
			ASSERT_NE(pd[i]->handle, pd[j]->handle);
	}
	for (i = 0; i < 64; i++)
		ASSERT_EQ(ibv_dealloc_pd(pd[i]), 0);
	ASSERT_EQ(ibv_close_device(ctx), 0);
}

TEST(dealloc_with_mr_is_ebusy)
{
	struct ibv_context *ctx = open_lo();
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	static char buf[4096];
	struct ibv_mr *mr1, *mr2;

	ASSERT_NOT_NULL(pd);
	mr1 = ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
	mr2 = ibv_reg_mr(pd, buf, 64, 0);
	ASSERT_NOT_NULL(mr1);
	ASSERT_NOT_NULL(mr2);
	ASSERT_EQ(ibv_dealloc_pd(pd), EBUSY);
	ASSERT_EQ(ibv_dereg_mr(mr1), 0);
	ASSERT_EQ(ibv_dealloc_pd(pd), EBUSY);
	/* a failed dealloc leaves the PD usable */
	mr1 = ibv_reg_mr(pd, buf, sizeof(buf), 0);
	ASSERT_NOT_NULL(mr1);
	ASSERT_EQ(ibv_dereg_mr(mr1), 0);
	ASSERT_EQ(ibv_dereg_mr(mr2), 0);
	ASSERT_EQ(ibv_dealloc_pd(pd), 0);
	ASSERT_EQ(ibv_close_device(ctx), 0);
}

/* ibv_rereg_mr(IBV_REREG_MR_CHANGE_PD) moves the MR's hold on its PD. */
TEST(rereg_pd_moves_the_reference)
{
	struct ibv_context *ctx = open_lo();
	struct ibv_pd *pd1 = ibv_alloc_pd(ctx), *pd2 = ibv_alloc_pd(ctx);
	static char buf[4096];
	struct ibv_mr *mr;

	mr = ibv_reg_mr(pd1, buf, sizeof(buf), 0);
	ASSERT_NOT_NULL(mr);
	ASSERT_EQ(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_PD, pd2, NULL, 0, 0), 0);
	ASSERT(mr->pd == pd2);
	ASSERT_EQ(ibv_dealloc_pd(pd2), EBUSY);
	ASSERT_EQ(ibv_dealloc_pd(pd1), 0);
	ASSERT_EQ(ibv_dereg_mr(mr), 0);
	ASSERT_EQ(ibv_dealloc_pd(pd2), 0);
	ASSERT_EQ(ibv_close_device(ctx), 0);
}

/* PDs of two contexts are independent. */
TEST(pds_of_two_contexts)
{
	struct ibv_context *c1 = open_lo(), *c2 = open_lo();
	struct ibv_pd *p1 = ibv_alloc_pd(c1), *p2 = ibv_alloc_pd(c2);
	static char buf[64];
	struct ibv_mr *mr;

	ASSERT_NOT_NULL(p1);
	ASSERT_NOT_NULL(p2);
	ASSERT(p2->context == c2);
	mr = ibv_reg_mr(p1, buf, sizeof(buf), 0);
	ASSERT_NOT_NULL(mr);
	ASSERT_EQ(ibv_dealloc_pd(p2), 0);
	ASSERT_EQ(ibv_dealloc_pd(p1), EBUSY);
	ASSERT_EQ(ibv_dereg_mr(mr), 0);
	ASSERT_EQ(ibv_dealloc_pd(p1), 0);
	ASSERT_EQ(ibv_close_device(c1), 0);
	ASSERT_EQ(ibv_close_device(c2), 0);
}
