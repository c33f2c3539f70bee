// SPDX-License-Identifier: MIT
/*
 * Device memory: ibv_alloc_dm, ibv_free_dm, ibv_memcpy_to_dm,
 * ibv_memcpy_from_dm, ibv_reg_dm_mr, max_dm_size.
 *
 * Reference: rdma-core 44's ibv_alloc_dm(3) and mlx5 (mlx5_access_dm:
 * a copy past the end EFAULT, an offset or length not a multiple of 4
 * EINVAL; alloc_dm_memic: a length over max_dm_size EINVAL;
 * MLX5_DM_ALLOWED_ACCESS), libibverbs' ibv_cmd_reg_dm_mr (zero-based
 * only, EINVAL; the MR's addr is NULL), the kernel's DM_MR_REG (the
 * range within the DM) and uobject use counts (a DM with an MR is EBUSY).
 * Traffic to and from DM MRs: tests/traffic/test_dm_odp_traffic.c.
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>
#include <sys/wait.h>

#include "harness.h"
#include "common.h"

struct env {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	uint64_t max;
};

static struct env setup(void)
{
	struct ibv_device_attr_ex ex;
	struct env e;

	e.ctx = open_lo();
	e.pd = ibv_alloc_pd(e.ctx);
	ASSERT_NOT_NULL(e.pd);
	ASSERT_EQ(ibv_query_device_ex(e.ctx, NULL, &ex), 0);
	e.max = ex.max_dm_size;
	ASSERT_GE(e.max, 65536);
	return e;
}

static void teardown(struct env *e)
{
	ASSERT_EQ(ibv_dealloc_pd(e->pd), 0);
	ASSERT_EQ(ibv_close_device(e->ctx), 0);
}

static struct ibv_dm *dm_alloc(struct env *e, uint64_t len)
{
	struct ibv_alloc_dm_attr a = { .length = len };
	struct ibv_dm *dm = ibv_alloc_dm(e->ctx, &a);

	ASSERT_NOT_NULL(dm);
	return dm;
}

static void alloc_fails(struct env *e, uint64_t len, uint32_t align,
			uint32_t mask, int err)
{
	struct ibv_alloc_dm_attr a = {
		.length = len, .log_align_req = align, .comp_mask = mask,
	};

	errno = 0;
	ASSERT_NULL(ibv_alloc_dm(e->ctx, &a));
	ASSERT_EQ(errno, err);
}

TEST(alloc_dm_checks)
{
	struct env e = setup();
	struct ibv_dm *dm;
	struct ibv_alloc_dm_attr a = { .length = 4096, .log_align_req = 12 };

	alloc_fails(&e, 0, 0, 0, EINVAL);
	alloc_fails(&e, e.max + 1, 0, 0, EINVAL);
	alloc_fails(&e, 4096, 0, 1, EINVAL);
	alloc_fails(&e, 4096, 13, 0, EINVAL);
	/* a page alignment is what every DM has */
	dm = ibv_alloc_dm(e.ctx, &a);
	ASSERT_NOT_NULL(dm);
	ASSERT_EQ(dm->context, e.ctx);
	ASSERT(dm->comp_mask & IBV_DM_MASK_HANDLE);
	ASSERT_EQ(ibv_free_dm(dm), 0);
	teardown(&e);
}

/* max_dm_size is the process's: all of it can be had, not one byte more,
 * and a freed DM gives its share back. */
TEST(alloc_dm_budget)
{
	struct env e = setup();
	struct ibv_dm *d1, *d2;

	d1 = dm_alloc(&e, e.max / 2);
	d2 = dm_alloc(&e, e.max - e.max / 2);
	alloc_fails(&e, 4, 0, 0, ENOMEM);
	ASSERT_EQ(ibv_free_dm(d2), 0);
	d2 = dm_alloc(&e, e.max - e.max / 2);
	ASSERT_EQ(ibv_free_dm(d1), 0);
	ASSERT_EQ(ibv_free_dm(d2), 0);
	teardown(&e);
}

TEST(memcpy_dm)
{
	struct env e = setup();
	struct ibv_dm *dm = dm_alloc(&e, 8192);
	uint8_t in[256], out[256];
	int i;

	for (i = 0; i < 256; i++)
		in[i] = (uint8_t)(i * 7 + 3);
	/* a new DM reads as zeros */
	memset(out, 0xa5, sizeof(out));
	ASSERT_EQ(ibv_memcpy_from_dm(out, dm, 0, 256), 0);
	for (i = 0; i < 256; i++)
		ASSERT_EQ(out[i], 0);
	ASSERT_EQ(ibv_memcpy_to_dm(dm, 1024, in, 256), 0);
	ASSERT_EQ(ibv_memcpy_from_dm(out, dm, 1024, 256), 0);
	ASSERT_EQ(memcmp(in, out, 256), 0);
	/* the last bytes, and nothing */
	ASSERT_EQ(ibv_memcpy_to_dm(dm, 8192 - 8, in, 8), 0);
	ASSERT_EQ(ibv_memcpy_to_dm(dm, 8192, in, 0), 0);
	/* mlx5_access_dm: past the end EFAULT, before the alignment */
	ASSERT_EQ(ibv_memcpy_to_dm(dm, 8192 - 4, in, 8), EFAULT);
	ASSERT_EQ(ibv_memcpy_to_dm(dm, 8193, in, 0), EFAULT);
	ASSERT_EQ(ibv_memcpy_from_dm(out, dm, UINT64_MAX - 3, 8), EFAULT);
	ASSERT_EQ(ibv_memcpy_to_dm(dm, 8192 - 3, in, 3), EINVAL);
	ASSERT_EQ(ibv_memcpy_to_dm(dm, 2, in, 8), EINVAL);
	ASSERT_EQ(ibv_memcpy_from_dm(out, dm, 0, 5), EINVAL);
	ASSERT_EQ(ibv_free_dm(dm), 0);
	teardown(&e);
}

static void reg_fails(struct env *e, struct ibv_dm *dm, uint64_t off,
		      size_t len, unsigned int acc)
{
	errno = 0;
	ASSERT_NULL(ibv_reg_dm_mr(e->pd, dm, off, len, acc));
	ASSERT_EQ(errno, EINVAL);
}

TEST(reg_dm_mr_checks)
{
	const unsigned int zb = IBV_ACCESS_ZERO_BASED;
	const unsigned int all = zb | IBV_ACCESS_LOCAL_WRITE |
				 IBV_ACCESS_REMOTE_WRITE |
				 IBV_ACCESS_REMOTE_READ |
				 IBV_ACCESS_REMOTE_ATOMIC;
	struct env e = setup();
	struct ibv_dm *dm = dm_alloc(&e, 8192);
	struct ibv_mr *mr;

	/* ibv_cmd_reg_dm_mr: zero-based only */
	reg_fails(&e, dm, 0, 8192, IBV_ACCESS_LOCAL_WRITE);
	/* MLX5_DM_ALLOWED_ACCESS */
	reg_fails(&e, dm, 0, 8192, zb | IBV_ACCESS_MW_BIND);
	reg_fails(&e, dm, 0, 8192, zb | IBV_ACCESS_ON_DEMAND);
	/* remote write needs local write (ib_check_mr_access) */
	reg_fails(&e, dm, 0, 8192, zb | IBV_ACCESS_REMOTE_WRITE);
	/* the range within the DM */
	reg_fails(&e, dm, 0, 8193, all);
	reg_fails(&e, dm, 4096, 4097, all);
	reg_fails(&e, dm, 8193, 0, all);
	reg_fails(&e, dm, UINT64_MAX, 2, all);

	mr = ibv_reg_dm_mr(e.pd, dm, 4096, 4096, all);
	ASSERT_NOT_NULL(mr);
	/* as libibverbs' ibv_cmd_reg_dm_mr leaves it */
	ASSERT_NULL(mr->addr);
	ASSERT_EQ(mr->length, 4096);
	ASSERT_EQ(mr->pd, e.pd);
	ASSERT_EQ(mr->lkey, mr->rkey);
	/* the kernel: no rereg of a DM MR */
	errno = 0;
	ASSERT_EQ(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0,
			       IBV_ACCESS_LOCAL_WRITE),
		  IBV_REREG_MR_ERR_CMD);
	ASSERT_EQ(errno, EINVAL);
	/* a DM in use by an MR is not freed */
	ASSERT_EQ(ibv_free_dm(dm), EBUSY);
	ASSERT_EQ(errno, EBUSY);
	ASSERT_EQ(ibv_dereg_mr(mr), 0);
	ASSERT_EQ(ibv_free_dm(dm), 0);
	teardown(&e);
}

/*
 * Handles (issue 12, docs/conformance.md "Handles"): a DM that is not
 * live -- freed, its handle changed, or of another context -- is refused
 * by every verb that takes it, and a second free never frees twice.
 * DM_MR_REG is an ioctl whose DM and PD attributes the kernel looks up
 * first: ENOENT; the memcpy ops (mlx5 user space) answer EINVAL.
 */
TEST(dm_not_live_is_refused)
{
	const unsigned int acc = IBV_ACCESS_ZERO_BASED |
				 IBV_ACCESS_LOCAL_WRITE;
	struct env e = setup(), o = setup();
	struct ibv_dm *dm = dm_alloc(&e, 4096), *dead = dm_alloc(&e, 4096);
	struct ibv_pd *dpd = ibv_alloc_pd(e.ctx);
	char b[8] = "12345678";
	uint32_t h;

	ASSERT_NOT_NULL(dpd);
	/* freed: every verb refuses it */
	ASSERT_EQ(ibv_free_dm(dead), 0);
	ASSERT_EQ(ibv_free_dm(dead), ENOENT);
	ASSERT_EQ(errno, ENOENT);
	errno = 0;
	ASSERT_EQ(ibv_memcpy_to_dm(dead, 0, b, 8), EINVAL);
	ASSERT_EQ(errno, EINVAL);
	ASSERT_EQ(ibv_memcpy_from_dm(b, dead, 0, 8), EINVAL);
	ASSERT_NULL_ERRNO(ibv_reg_dm_mr(e.pd, dead, 0, 8, acc), ENOENT);
	/* a garbled handle names nothing; the DM is untouched */
	h = dm->handle;
	dm->handle = h ^ 1;
	ASSERT_EQ(ibv_free_dm(dm), ENOENT);
	ASSERT_EQ(ibv_memcpy_to_dm(dm, 0, b, 8), EINVAL);
	ASSERT_NULL_ERRNO(ibv_reg_dm_mr(e.pd, dm, 0, 8, acc), ENOENT);
	dm->handle = 0xffffffff;
	ASSERT_EQ(ibv_free_dm(dm), ENOENT);
	dm->handle = h;
	ASSERT_EQ(ibv_memcpy_to_dm(dm, 0, b, 8), 0);
	/* a PD of another context, a PD that is not live */
	ASSERT_NULL_ERRNO(ibv_reg_dm_mr(o.pd, dm, 0, 8, acc), ENOENT);
	ASSERT_EQ(ibv_dealloc_pd(dpd), 0);
	ASSERT_NULL_ERRNO(ibv_reg_dm_mr(dpd, dm, 0, 8, acc), ENOENT);
	ASSERT_EQ(ibv_free_dm(dm), 0);
	teardown(&o);
	teardown(&e);
}

/* Two MRs over one DM: the DM is busy until the last one goes. */
TEST(free_dm_busy_until_last_mr)
{
	const unsigned int acc = IBV_ACCESS_ZERO_BASED |
				 IBV_ACCESS_LOCAL_WRITE;
	struct env e = setup();
	struct ibv_dm *dm = dm_alloc(&e, 4096);
	struct ibv_mr *m1, *m2;

	m1 = ibv_reg_dm_mr(e.pd, dm, 0, 4096, acc);
	m2 = ibv_reg_dm_mr(e.pd, dm, 0, 1024, acc);
	ASSERT_NOT_NULL(m1);
	ASSERT_NOT_NULL(m2);
	ASSERT_NE(m1->lkey, m2->lkey);
	ASSERT_EQ(ibv_free_dm(dm), EBUSY);
	ASSERT_EQ(ibv_dealloc_pd(e.pd), EBUSY);
	ASSERT_EQ(ibv_dereg_mr(m1), 0);
	ASSERT_EQ(ibv_free_dm(dm), EBUSY);
	ASSERT_EQ(ibv_dereg_mr(m2), 0);
	ASSERT_EQ(ibv_free_dm(dm), 0);
	teardown(&e);
}

/* A context closed with a DM and its MR left frees both: the whole
 * budget can be had again. */
TEST(close_with_dm_left)
{
	struct env e = setup();
	struct ibv_alloc_dm_attr a = { .length = e.max };
	struct ibv_dm *dm;

	dm = ibv_alloc_dm(e.ctx, &a);
	ASSERT_NOT_NULL(dm);
	ASSERT_NOT_NULL(ibv_reg_dm_mr(e.pd, dm, 0, 4096,
				      IBV_ACCESS_ZERO_BASED |
					      IBV_ACCESS_LOCAL_WRITE));
	ASSERT_EQ(ibv_close_device(e.ctx), 0);
	e.ctx = open_lo();
	dm = ibv_alloc_dm(e.ctx, &a);
	ASSERT_NOT_NULL(dm);
	ASSERT_EQ(ibv_free_dm(dm), 0);
	ASSERT_EQ(ibv_close_device(e.ctx), 0);
}

/* A child of fork() has a budget of its own: the parent's DMs do not
 * count against it (pyverbs allocates DMs in forked processes). */
TEST(fork_child_budget)
{
	struct env e;
	struct ibv_dm *dm;
	int status;
	pid_t pid;

#ifdef __SANITIZE_THREAD__
	SKIP("TSan does not run the child of a threaded process");
#endif
#ifdef __SANITIZE_ADDRESS__
	SKIP("gcc 12's ASan: the child of a threaded process may inherit "
	     "its allocator lock taken (tests/cm/test_events.c)");
#endif
	e = setup();
	dm = dm_alloc(&e, e.max);
	fflush(stdout);
	pid = fork();
	ASSERT_GE(pid, 0);
	if (pid == 0) {
		struct ibv_context *ctx = open_lo();
		struct ibv_alloc_dm_attr a = { .length = e.max };
		struct ibv_dm *c = ibv_alloc_dm(ctx, &a);

		_exit(c && !ibv_free_dm(c) && !ibv_close_device(ctx) ? 0 : 1);
	}
	ASSERT_EQ(waitpid(pid, &status, 0), pid);
	ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	/* and the parent's is still full */
	alloc_fails(&e, 4, 0, 0, ENOMEM);
	ASSERT_EQ(ibv_free_dm(dm), 0);
	teardown(&e);
}
