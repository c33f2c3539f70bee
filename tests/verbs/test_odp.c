// SPDX-License-Identifier: MIT
/*
 * On-demand paging: IBV_ACCESS_ON_DEMAND MRs, implicit ODP
 * (ibv_reg_mr(pd, NULL, SIZE_MAX, ...)), ibv_advise_mr, odp_caps.
 *
 * Reference: ibv_reg_mr(3) and ibv_advise_mr(3) of rdma-core 44 (the
 * errno list: EOPNOTSUPP for an advice it does not know, EINVAL for the
 * flags or the PD, EFAULT for an lkey that names no ODP MR, a range
 * outside the MR or not in the address space, EPERM for PREFETCH_WRITE
 * on an MR that is not writable and an lkey of another PD); the kernel's
 * ib_umem_odp_get (an ODP registration faults nothing in: unmapped pages
 * are fine) and its implicit ODP rule (iova 0).  Traffic, and what an
 * access to a page that is not there completes with:
 * tests/traffic/test_dm_odp_traffic.c.
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>

#include "harness.h"
#include "common.h"

static size_t page;

struct env {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
};

static struct env setup(void)
{
	struct env e;

	page = (size_t)sysconf(_SC_PAGESIZE);
	e.ctx = open_lo();
	e.pd = ibv_alloc_pd(e.ctx);
	ASSERT_NOT_NULL(e.pd);
	return e;
}

static void teardown(struct env *e)
{
	ASSERT_EQ(ibv_dealloc_pd(e->pd), 0);
	ASSERT_EQ(ibv_close_device(e->ctx), 0);
}

static void *map(size_t len, int prot)
{
	void *p = mmap(NULL, len, prot, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	ASSERT(p != MAP_FAILED);
	return p;
}

TEST(odp_caps)
{
	struct ibv_context *ctx = open_lo();
	const uint32_t sr = IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV;
	struct ibv_device_attr_ex ex;

	ASSERT_EQ(ibv_query_device_ex(ctx, NULL, &ex), 0);
	ASSERT_EQ(ex.odp_caps.general_caps,
		  IBV_ODP_SUPPORT | IBV_ODP_SUPPORT_IMPLICIT);
	/* what ibv_rc_pingpong -o and pyverbs' test_odp require */
	ASSERT_EQ(ex.odp_caps.per_transport_caps.rc_odp_caps,
		  sr | IBV_ODP_SUPPORT_WRITE | IBV_ODP_SUPPORT_READ |
			  IBV_ODP_SUPPORT_ATOMIC | IBV_ODP_SUPPORT_SRQ_RECV);
	ASSERT_EQ(ex.odp_caps.per_transport_caps.uc_odp_caps,
		  sr | IBV_ODP_SUPPORT_WRITE);
	ASSERT_EQ(ex.odp_caps.per_transport_caps.ud_odp_caps, sr);
	/* XRC as RC (test_xrc_traffic.c xrc_two_processes_odp) */
	ASSERT_EQ(ex.xrc_odp_caps,
		  ex.odp_caps.per_transport_caps.rc_odp_caps);
	ASSERT_EQ(ibv_close_device(ctx), 0);
}

/* An ODP MR pins and faults nothing: pages that are not mapped, or not
 * writable, are fine at registration (an ordinary MR: EFAULT). */
TEST(odp_reg_unmapped)
{
	const int acc = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			IBV_ACCESS_ON_DEMAND;
	struct env e = setup();
	char *p = map(4 * page, PROT_READ | PROT_WRITE);
	struct ibv_mr *mr;

	ASSERT_EQ(munmap(p + page, page), 0);
	ASSERT_EQ(mprotect(p + 2 * page, page, PROT_READ), 0);
	errno = 0;
	ASSERT_NULL(ibv_reg_mr(e.pd, p, 4 * page, acc & ~IBV_ACCESS_ON_DEMAND));
	ASSERT_EQ(errno, EFAULT);
	mr = ibv_reg_mr(e.pd, p, 4 * page, acc);
	ASSERT_NOT_NULL(mr);
	ASSERT_EQ(mr->addr, p);
	ASSERT_EQ(mr->length, 4 * page);
	/* ... and may become an ordinary MR only where it is all there */
	errno = 0;
	ASSERT_EQ(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0,
			       IBV_ACCESS_LOCAL_WRITE),
		  IBV_REREG_MR_ERR_CMD);
	ASSERT_EQ(errno, EFAULT);
	ASSERT_EQ(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_TRANSLATION |
					   IBV_REREG_MR_CHANGE_ACCESS,
			       NULL, p, page, IBV_ACCESS_LOCAL_WRITE),
		  0);
	ASSERT_EQ(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0,
			       acc),
		  0);
	ASSERT_EQ(ibv_dereg_mr(mr), 0);
	/* an empty or wrapping range is still EINVAL */
	errno = 0;
	ASSERT_NULL(ibv_reg_mr(e.pd, p, 0, acc));
	ASSERT_EQ(errno, EINVAL);
	errno = 0;
	ASSERT_NULL(ibv_reg_mr(e.pd, (void *)(UINTPTR_MAX - page + 1),
			       2 * page, acc));
	ASSERT_EQ(errno, EINVAL);
	munmap(p, 4 * page);
	teardown(&e);
}

TEST(implicit_odp)
{
	const unsigned int acc = IBV_ACCESS_LOCAL_WRITE |
				 IBV_ACCESS_REMOTE_WRITE |
				 IBV_ACCESS_REMOTE_READ | IBV_ACCESS_ON_DEMAND;
	struct env e = setup();
	struct ibv_mr *mr;

	mr = ibv_reg_mr(e.pd, NULL, SIZE_MAX, (int)acc);
	ASSERT_NOT_NULL(mr);
	ASSERT_NULL(mr->addr);
	ASSERT_EQ(mr->length, SIZE_MAX);
	ASSERT_EQ(ibv_dereg_mr(mr), 0);
	/* its iova is its address (the kernel: 0) */
	errno = 0;
	ASSERT_NULL(ibv_reg_mr_iova2(e.pd, NULL, SIZE_MAX, 4096, acc));
	ASSERT_EQ(errno, EINVAL);
	/* without ON_DEMAND it is a range nothing can pin */
	errno = 0;
	ASSERT_NULL(ibv_reg_mr(e.pd, NULL, SIZE_MAX,
			       (int)(acc & ~IBV_ACCESS_ON_DEMAND)));
	ASSERT(errno == EINVAL || errno == EFAULT);
	teardown(&e);
}

static int advise(struct ibv_pd *pd, enum ibv_advise_mr_advice adv,
		  uint32_t flags, uint64_t addr, uint32_t len, uint32_t lkey)
{
	struct ibv_sge s = { .addr = addr, .length = len, .lkey = lkey };

	errno = 0;
	return ibv_advise_mr(pd, adv, flags, &s, 1);
}

TEST(advise_mr_checks)
{
	const enum ibv_advise_mr_advice pf = IBV_ADVISE_MR_ADVICE_PREFETCH;
	const enum ibv_advise_mr_advice pw =
		IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE;
	const uint32_t fl = IBV_ADVISE_MR_FLAG_FLUSH;
	struct env e = setup();
	char *p = map(4 * page, PROT_READ | PROT_WRITE);
	uint64_t a = (uintptr_t)p;
	struct ibv_mr *odp, *ro, *plain, *other;
	struct ibv_pd *pd2 = ibv_alloc_pd(e.ctx);
	struct ibv_sge two[2];

	ASSERT_NOT_NULL(pd2);
	odp = ibv_reg_mr(e.pd, p, 4 * page,
			 IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_ON_DEMAND);
	ro = ibv_reg_mr(e.pd, p, 4 * page, IBV_ACCESS_ON_DEMAND);
	plain = ibv_reg_mr(e.pd, p, 4 * page, IBV_ACCESS_LOCAL_WRITE);
	other = ibv_reg_mr(pd2, p, 4 * page,
			   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_ON_DEMAND);
	ASSERT_NOT_NULL(odp);
	ASSERT_NOT_NULL(ro);
	ASSERT_NOT_NULL(plain);
	ASSERT_NOT_NULL(other);

	/* what works: each advice, with and without FLUSH */
	ASSERT_EQ(advise(e.pd, pf, fl, a, 4 * page, odp->lkey), 0);
	ASSERT_EQ(advise(e.pd, pw, fl, a + 10, 100, odp->lkey), 0);
	ASSERT_EQ(advise(e.pd, pw, 0, a, page, odp->lkey), 0);
	ASSERT_EQ(advise(e.pd, IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT, fl, a,
			 page, odp->lkey), 0);
	ASSERT_EQ(advise(e.pd, pf, fl, a, page, ro->lkey), 0);

	/* an advice it does not know; flags; no SGE */
	ASSERT_EQ(advise(e.pd, (enum ibv_advise_mr_advice)3, fl, a, page,
			 odp->lkey), EOPNOTSUPP);
	ASSERT_EQ(errno, EOPNOTSUPP);
	ASSERT_EQ(advise(e.pd, pf, 2, a, page, odp->lkey), EINVAL);
	ASSERT_EQ(ibv_advise_mr(e.pd, pf, fl, two, 0), EINVAL);
	/* EFAULT: no such lkey, not an ODP MR, outside the MR */
	ASSERT_EQ(advise(e.pd, pf, fl, a, page, odp->lkey ^ 0x5a5a), EFAULT);
	ASSERT_EQ(advise(e.pd, pf, fl, a, page, plain->lkey), EFAULT);
	ASSERT_EQ(advise(e.pd, pf, fl, a + 3 * page, page + 1, odp->lkey),
		  EFAULT);
	ASSERT_EQ(advise(e.pd, pf, fl, a - 1, 2, odp->lkey), EFAULT);
	/* EPERM: write advice on a read-only MR; another PD's MR */
	ASSERT_EQ(advise(e.pd, pw, fl, a, page, ro->lkey), EPERM);
	ASSERT_EQ(advise(e.pd, pf, fl, a, page, other->lkey), EPERM);
	/* one bad SGE fails the call */
	two[0] = (struct ibv_sge){ .addr = a, .length = 8, .lkey = odp->lkey };
	two[1] = (struct ibv_sge){ .addr = a, .length = 8,
				   .lkey = plain->lkey };
	ASSERT_EQ(ibv_advise_mr(e.pd, pf, fl, two, 2), EFAULT);
	two[1].lkey = odp->lkey;
	ASSERT_EQ(ibv_advise_mr(e.pd, pf, fl, two, 2), 0);

	/* pages not in the address space: EFAULT when the prefetch is
	 * synchronous (FLUSH), nothing to fault with NO_FAULT */
	ASSERT_EQ(munmap(p + page, page), 0);
	ASSERT_EQ(advise(e.pd, pf, fl, a, 2 * page, odp->lkey), EFAULT);
	ASSERT_EQ(advise(e.pd, pf, fl, a, page, odp->lkey), 0);
	ASSERT_EQ(advise(e.pd, IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT, fl, a,
			 2 * page, odp->lkey), 0);
	/* a read-only page cannot be prefetched for writing */
	ASSERT_EQ(mprotect(p + 2 * page, page, PROT_READ), 0);
	ASSERT_EQ(advise(e.pd, pw, fl, a + 2 * page, page, odp->lkey), EFAULT);
	ASSERT_EQ(advise(e.pd, pf, fl, a + 2 * page, page, odp->lkey), 0);

	ASSERT_EQ(ibv_dereg_mr(odp), 0);
	ASSERT_EQ(ibv_dereg_mr(ro), 0);
	ASSERT_EQ(ibv_dereg_mr(plain), 0);
	ASSERT_EQ(ibv_dereg_mr(other), 0);
	ASSERT_EQ(ibv_dealloc_pd(pd2), 0);
	munmap(p, 4 * page);
	teardown(&e);
}

/* Implicit ODP: any address of the process, by its address. */
TEST(advise_mr_implicit)
{
	struct env e = setup();
	char *p = map(2 * page, PROT_READ | PROT_WRITE);
	struct ibv_mr *mr;

	mr = ibv_reg_mr(e.pd, NULL, SIZE_MAX,
			IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_ON_DEMAND);
	ASSERT_NOT_NULL(mr);
	ASSERT_EQ(advise(e.pd, IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE,
			 IBV_ADVISE_MR_FLAG_FLUSH, (uintptr_t)p, 2 * page,
			 mr->lkey), 0);
	ASSERT_EQ(munmap(p, 2 * page), 0);
	ASSERT_EQ(advise(e.pd, IBV_ADVISE_MR_ADVICE_PREFETCH,
			 IBV_ADVISE_MR_FLAG_FLUSH, (uintptr_t)p, 2 * page,
			 mr->lkey), EFAULT);
	ASSERT_EQ(ibv_dereg_mr(mr), 0);
	teardown(&e);
}
