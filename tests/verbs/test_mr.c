// SPDX-License-Identifier: MIT
/*
 * Memory regions: ibv_reg_mr (the @IBVERBS_1.1 symbol and the header
 * macro), ibv_reg_mr_iova, ibv_reg_mr_iova2, ibv_rereg_mr, ibv_dereg_mr.
 *
 * Reference: rdma-core 44 verbs.c (ibv_reg_mr_iova2, ibv_rereg_mr and its
 * IBV_REREG_MR_ERR_* codes); the kernel's ib_uverbs_reg_mr/rereg_mr
 * (uverbs_cmd.c: same page offset for address and iova; no rereg flag is
 * EINVAL), ib_check_mr_access (remote write or atomic without local write
 * EINVAL, unknown bits EINVAL, ODP and FLUSH without support EOPNOTSUPP)
 * and ib_umem_get (a wrapping range or one that covers no page EINVAL, an
 * unmapped or forbidden page EFAULT, write access pins for writing).
 * softhca pins nothing, so RLIMIT_MEMLOCK does not apply.
 */
#include <stdbool.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include "harness.h"
#include "common.h"

#define FLUSH_GLOBAL (1 << 8) /* kernel 6.2+ access bits */
#define FLUSH_PERSISTENT (1 << 9)

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

/* Register, expect success, deregister. */
static void reg_ok(struct ibv_pd *pd, void *addr, size_t len, int access)
{
	struct ibv_mr *mr = ibv_reg_mr_iova2(pd, addr, len, (uintptr_t)addr,
					     (unsigned int)access);

	if (!mr)
		harness_fail(__FILE__, __LINE__,
			     "reg %p+%zu access 0x%x: errno %d", addr, len,
			     access, errno);
	ASSERT_EQ(ibv_dereg_mr(mr), 0);
}

static void reg_fails(struct ibv_pd *pd, void *addr, size_t len, int access,
		      int err)
{
	struct ibv_mr *mr;

	errno = 0;
	mr = ibv_reg_mr_iova2(pd, addr, len, (uintptr_t)addr,
			      (unsigned int)access);
	if (mr)
		harness_fail(__FILE__, __LINE__,
			     "reg %p+%zu access 0x%x succeeded, expected %d",
			     addr, len, access, err);
	if (errno != err)
		harness_fail(__FILE__, __LINE__,
			     "reg %p+%zu access 0x%x: errno %d, expected %d",
			     addr, len, access, errno, err);
}

/* ------------------------------------------------------------------ */
/* Registration                                                        */

TEST(reg_mr_fields)
{
	struct env e = setup();
	char *buf = map(4 * page, PROT_READ | PROT_WRITE);
	struct ibv_mr *mr;

	/* the exported ibv_reg_mr@IBVERBS_1.1, not the header macro */
	mr = (ibv_reg_mr)(e.pd, buf + 10, 3 * page, IBV_ACCESS_LOCAL_WRITE);
	ASSERT_NOT_NULL(mr);
	ASSERT(mr->context == e.ctx);
	ASSERT(mr->pd == e.pd);
	ASSERT(mr->addr == buf + 10);
	ASSERT_EQ(mr->length, 3 * page);
	ASSERT_NE(mr->lkey, 0);
	ASSERT_NE(mr->rkey, 0);
	ASSERT_EQ(ibv_dereg_mr(mr), 0);

	/* the macro, constant access: ibv_reg_mr again */
	mr = ibv_reg_mr(e.pd, buf, page, IBV_ACCESS_REMOTE_READ);
	ASSERT_NOT_NULL(mr);
	ASSERT_EQ(ibv_dereg_mr(mr), 0);
	teardown(&e);
}

TEST(reg_mr_iova)
{
	struct env e = setup();
	char *buf = map(2 * page, PROT_READ | PROT_WRITE);
	uint64_t iova = 0x1000000000ull + 123;
	struct ibv_mr *mr;

	mr = ibv_reg_mr_iova(e.pd, buf + 123, page, iova,
			     IBV_ACCESS_LOCAL_WRITE);
	ASSERT_NOT_NULL(mr);
	ASSERT(mr->addr == buf + 123); /* addr stays the VA */
	ASSERT_EQ(mr->length, page);
	ASSERT_EQ(ibv_dereg_mr(mr), 0);

	/* zero-based: iova 0 for a page-aligned buffer */
	mr = ibv_reg_mr_iova(e.pd, buf, page, 0, IBV_ACCESS_LOCAL_WRITE);
	ASSERT_NOT_NULL(mr);
	ASSERT_EQ(ibv_dereg_mr(mr), 0);

	/* the kernel wants the same offset within a page */
	ASSERT_NULL_ERRNO(ibv_reg_mr_iova(e.pd, buf + 123, page, iova + 1,
					  IBV_ACCESS_LOCAL_WRITE),
			  EINVAL);
	ASSERT_NULL_ERRNO(ibv_reg_mr_iova(e.pd, buf, page, 8, 0), EINVAL);
	/* an iova range that wraps */
	ASSERT_NULL_ERRNO(ibv_reg_mr_iova(e.pd, buf, 2 * page,
					  UINT64_MAX & ~(uint64_t)(page - 1),
					  0),
			  EINVAL);
	teardown(&e);
}

/* Optional access bits (IBV_ACCESS_OPTIONAL_RANGE) are accepted and
 * ignored; the macro routes them to ibv_reg_mr_iova2. */
TEST(reg_mr_optional_access)
{
	struct env e = setup();
	char *buf = map(page, PROT_READ | PROT_WRITE);
	volatile int access =
	    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_RELAXED_ORDERING;
	struct ibv_mr *mr;

	mr = ibv_reg_mr_iova2(e.pd, buf, page, (uintptr_t)buf,
			      IBV_ACCESS_LOCAL_WRITE |
				  IBV_ACCESS_RELAXED_ORDERING);
	ASSERT_NOT_NULL(mr);
	ASSERT_EQ(ibv_dereg_mr(mr), 0);
	mr = ibv_reg_mr(e.pd, buf, page, access);
	ASSERT_NOT_NULL(mr);
	ASSERT_EQ(ibv_dereg_mr(mr), 0);
	reg_ok(e.pd, buf, page, IBV_ACCESS_OPTIONAL_RANGE);
	teardown(&e);
}

/* ib_check_mr_access(), in the kernel's order. */
TEST(reg_mr_access_rules)
{
	struct env e = setup();
	char *buf = map(page, PROT_READ | PROT_WRITE);
	const int lw = IBV_ACCESS_LOCAL_WRITE;

	reg_ok(e.pd, buf, page, 0);
	reg_ok(e.pd, buf, page, lw);
	reg_ok(e.pd, buf, page, IBV_ACCESS_REMOTE_READ);
	reg_ok(e.pd, buf, page, lw | IBV_ACCESS_REMOTE_WRITE);
	reg_ok(e.pd, buf, page, lw | IBV_ACCESS_REMOTE_ATOMIC);
	reg_ok(e.pd, buf, page,
	       lw | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
		   IBV_ACCESS_REMOTE_ATOMIC);
	/* accepted by the kernel and by rxe/mlx5 without MW support */
	reg_ok(e.pd, buf, page, IBV_ACCESS_MW_BIND);
	reg_ok(e.pd, buf, page, IBV_ACCESS_ZERO_BASED);
	reg_ok(e.pd, buf, page, IBV_ACCESS_HUGETLB);

	/* remote write or atomic need local write (IBA o10-36.2.1) */
	reg_fails(e.pd, buf, page, IBV_ACCESS_REMOTE_WRITE, EINVAL);
	reg_fails(e.pd, buf, page, IBV_ACCESS_REMOTE_ATOMIC, EINVAL);
	reg_fails(e.pd, buf, page,
		  IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ, EINVAL);
	/* that check comes before the ODP one */
	reg_fails(e.pd, buf, page,
		  IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_ON_DEMAND, EINVAL);
	/* bits the kernel does not know */
	reg_fails(e.pd, buf, page, 1 << 10, EINVAL);
	reg_fails(e.pd, buf, page, 1 << 19, EINVAL);
	reg_fails(e.pd, buf, page, 1 << 30, EINVAL);
	reg_fails(e.pd, buf, page, (int)(1u << 31), EINVAL);
	/* ODP is offered (test_odp.c) */
	reg_ok(e.pd, buf, page, IBV_ACCESS_ON_DEMAND);
	reg_ok(e.pd, buf, page, lw | IBV_ACCESS_ON_DEMAND);
	/* FLUSH: global visibility is offered, persistence is not */
	reg_fails(e.pd, buf, page, lw | FLUSH_PERSISTENT, EOPNOTSUPP);
	reg_fails(e.pd, buf, page, lw | FLUSH_GLOBAL | FLUSH_PERSISTENT,
		  EOPNOTSUPP);
	{
		struct ibv_mr *mr = ibv_reg_mr(e.pd, buf, page,
					       lw | FLUSH_GLOBAL);

		ASSERT_NOT_NULL(mr);
		ASSERT_EQ(ibv_dereg_mr(mr), 0);
	}
	teardown(&e);
}

/* What pinning would find: unmapped or forbidden pages are EFAULT. */
TEST(reg_mr_unmapped_is_efault)
{
	struct env e = setup();
	char *none = map(page, PROT_NONE);
	char *gone = map(2 * page, PROT_READ | PROT_WRITE);
	char *half = map(2 * page, PROT_READ | PROT_WRITE);

	ASSERT_EQ(munmap(gone, 2 * page), 0);
	ASSERT_EQ(munmap(half + page, page), 0);

	reg_fails(e.pd, none, page, 0, EFAULT);
	reg_fails(e.pd, none, page, IBV_ACCESS_LOCAL_WRITE, EFAULT);
	reg_fails(e.pd, none + 100, 1, IBV_ACCESS_REMOTE_READ, EFAULT);
	reg_fails(e.pd, gone, page, IBV_ACCESS_LOCAL_WRITE, EFAULT);
	reg_fails(e.pd, half, 2 * page, 0, EFAULT);
	reg_fails(e.pd, half + page - 1, 2, 0, EFAULT);
	reg_fails(e.pd, NULL, page, 0, EFAULT);
	reg_ok(e.pd, half, page, IBV_ACCESS_LOCAL_WRITE);
	teardown(&e);
}

/* Read-only memory: fine to read, EFAULT for any writable access. */
TEST(reg_mr_read_only_memory)
{
	struct env e = setup();
	char *ro = map(2 * page, PROT_READ);

	reg_ok(e.pd, ro, 2 * page, 0);
	reg_ok(e.pd, ro, 2 * page, IBV_ACCESS_REMOTE_READ);
	reg_fails(e.pd, ro, 2 * page, IBV_ACCESS_LOCAL_WRITE, EFAULT);
	reg_fails(e.pd, ro, page,
		  IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE, EFAULT);
	reg_fails(e.pd, ro, page,
		  IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_ATOMIC, EFAULT);
	/* MW_BIND pins for writing too (ib_access_writable) */
	reg_fails(e.pd, ro, page, IBV_ACCESS_MW_BIND, EFAULT);
	teardown(&e);
}

/* Text of this program: mapped read-only and executable. */
TEST(reg_mr_program_text)
{
	struct env e = setup();
	void *text = (void *)(uintptr_t)&reg_ok;

	reg_ok(e.pd, text, 16, 0);
	reg_fails(e.pd, text, 16, IBV_ACCESS_LOCAL_WRITE, EFAULT);
	teardown(&e);
}

/*
 * Zero length: ib_umem_get() counts the pages the range touches; a zero
 * length at a page boundary touches none (EINVAL), inside a page it pins
 * that page.
 */
TEST(reg_mr_zero_length)
{
	struct env e = setup();
	char *buf = map(page, PROT_READ | PROT_WRITE);
	char *none = map(page, PROT_NONE);
	struct ibv_mr *mr;

	reg_fails(e.pd, buf, 0, 0, EINVAL);
	reg_fails(e.pd, buf, 0, IBV_ACCESS_LOCAL_WRITE, EINVAL);
	mr = ibv_reg_mr(e.pd, buf + 8, 0, IBV_ACCESS_LOCAL_WRITE);
	ASSERT_NOT_NULL(mr);
	ASSERT_EQ(mr->length, 0);
	ASSERT(mr->addr == buf + 8);
	ASSERT_EQ(ibv_dereg_mr(mr), 0);
	reg_fails(e.pd, none + 8, 0, 0, EFAULT);
	teardown(&e);
}

/* ib_umem_get(): addr + size must not wrap. */
TEST(reg_mr_wrapping_range)
{
	struct env e = setup();
	char *buf = map(page, PROT_READ | PROT_WRITE);

	reg_fails(e.pd, buf, SIZE_MAX, 0, EINVAL);
	reg_fails(e.pd, (void *)(UINTPTR_MAX - 100), 200, 0, EINVAL);
	/* ... nor round up past the top of the address space */
	reg_fails(e.pd, (void *)(UINTPTR_MAX - 100), 50, 0, EINVAL);
	teardown(&e);
}

/* No pinning: RLIMIT_MEMLOCK 0 does not stop a 64 MiB registration. */
TEST(reg_mr_ignores_memlock_limit)
{
	struct env e = setup();
	struct rlimit rl = {0, 0};
	size_t len = 64u << 20;
	char *buf = map(len, PROT_READ | PROT_WRITE);
	struct ibv_mr *mr;

	ASSERT_EQ(setrlimit(RLIMIT_MEMLOCK, &rl), 0);
	mr = ibv_reg_mr(e.pd, buf, len,
			IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			    IBV_ACCESS_REMOTE_READ);
	ASSERT_NOT_NULL(mr);
	ASSERT_EQ(mr->length, len);
	ASSERT_EQ(ibv_dereg_mr(mr), 0);
	teardown(&e);
}

/* ------------------------------------------------------------------ */
/* Keys                                                                */

TEST(keys_differ_for_the_same_buffer)
{
	struct env e = setup();
	char *buf = map(page, PROT_READ | PROT_WRITE);
	struct ibv_mr *a, *b;
	uint32_t old_lkey, old_rkey;

	a = ibv_reg_mr(e.pd, buf, page,
		       IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	b = ibv_reg_mr(e.pd, buf, page,
		       IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	ASSERT_NOT_NULL(a);
	ASSERT_NOT_NULL(b);
	ASSERT_NE(a->lkey, b->lkey);
	ASSERT_NE(a->rkey, b->rkey);
	old_lkey = a->lkey;
	old_rkey = a->rkey;
	ASSERT_EQ(ibv_dereg_mr(a), 0);
	a = ibv_reg_mr(e.pd, buf, page,
		       IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	ASSERT_NOT_NULL(a);
	ASSERT_NE(a->lkey, old_lkey);
	ASSERT_NE(a->rkey, old_rkey);
	ASSERT_EQ(ibv_dereg_mr(a), 0);
	ASSERT_EQ(ibv_dereg_mr(b), 0);
	teardown(&e);
}

/* The first registration of a fresh process, as a child reports it. */
static uint32_t first_rkey_in_child(void)
{
	uint32_t rkey = 0;
	int fds[2], status;
	pid_t pid;

	ASSERT_EQ(pipe(fds), 0);
	pid = fork();
	ASSERT_GE(pid, 0);
	if (pid == 0) {
		struct env e = setup();
		char *buf = map(page, PROT_READ | PROT_WRITE);
		struct ibv_mr *mr = ibv_reg_mr(e.pd, buf, page,
					       IBV_ACCESS_LOCAL_WRITE |
						   IBV_ACCESS_REMOTE_WRITE);

		if (!mr || write(fds[1], &mr->rkey, 4) != 4)
			_exit(1);
		_exit(0);
	}
	ASSERT_EQ(read(fds[0], &rkey, 4), 4);
	ASSERT_EQ(waitpid(pid, &status, 0), pid);
	close(fds[0]);
	close(fds[1]);
	return rkey;
}

/*
 * rkeys are not guessable: two processes doing exactly the same thing get
 * different keys.  With at least 8 random bits, three equal pairs in a row
 * happen once in 2^24 runs.
 */
TEST(keys_carry_random_bits)
{
	int i, same = 0;

	for (i = 0; i < 3; i++)
		same += first_rkey_in_child() == first_rkey_in_child();
	ASSERT_LT(same, 3);
}

/* ------------------------------------------------------------------ */
/* ibv_rereg_mr                                                        */

/* rdma-core's own checks: IBV_REREG_MR_ERR_INPUT with errno EINVAL. */
TEST(rereg_input_errors)
{
	struct env e = setup();
	char *buf = map(page, PROT_READ | PROT_WRITE);
	struct ibv_mr *mr = ibv_reg_mr(e.pd, buf, page, 0);

	ASSERT_NOT_NULL(mr);
	errno = 0;
	ASSERT_EQ(ibv_rereg_mr(mr, IBV_REREG_MR_FLAGS_SUPPORTED + 1, NULL, NULL,
			       0, 0),
		  IBV_REREG_MR_ERR_INPUT);
	ASSERT_EQ(errno, EINVAL);
	errno = 0;
	ASSERT_EQ(ibv_rereg_mr(mr, -1, NULL, NULL, 0, 0),
		  IBV_REREG_MR_ERR_INPUT);
	ASSERT_EQ(errno, EINVAL);
	/* a new translation needs an address and a length */
	errno = 0;
	ASSERT_EQ(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_TRANSLATION, NULL, NULL,
			       page, 0),
		  IBV_REREG_MR_ERR_INPUT);
	ASSERT_EQ(errno, EINVAL);
	errno = 0;
	ASSERT_EQ(
	    ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_TRANSLATION, NULL, buf, 0, 0),
	    IBV_REREG_MR_ERR_INPUT);
	ASSERT_EQ(errno, EINVAL);
	/* access without IBV_REREG_MR_CHANGE_ACCESS */
	errno = 0;
	ASSERT_EQ(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_PD, e.pd, NULL, 0,
			       IBV_ACCESS_LOCAL_WRITE),
		  IBV_REREG_MR_ERR_INPUT);
	ASSERT_EQ(errno, EINVAL);
	ASSERT_EQ(ibv_dereg_mr(mr), 0);
	teardown(&e);
}

/* The device's checks: IBV_REREG_MR_ERR_CMD with the kernel's errno; the
 * MR is left as it was. */
TEST(rereg_cmd_errors_leave_mr_unchanged)
{
	struct env e = setup();
	struct ibv_pd *pd2 = ibv_alloc_pd(e.ctx);
	char *buf = map(page, PROT_READ | PROT_WRITE);
	char *none = map(page, PROT_NONE);
	struct ibv_mr *mr = ibv_reg_mr(e.pd, buf, page, IBV_ACCESS_LOCAL_WRITE);

	ASSERT_NOT_NULL(mr);
	/* ib_uverbs_rereg_mr: no flag at all */
	errno = 0;
	ASSERT_EQ(ibv_rereg_mr(mr, 0, NULL, NULL, 0, 0), IBV_REREG_MR_ERR_CMD);
	ASSERT_EQ(errno, EINVAL);
	/* ib_check_mr_access */
	errno = 0;
	ASSERT_EQ(ibv_rereg_mr(
		      mr, IBV_REREG_MR_CHANGE_ACCESS | IBV_REREG_MR_CHANGE_PD,
		      pd2, NULL, 0, IBV_ACCESS_REMOTE_WRITE),
		  IBV_REREG_MR_ERR_CMD);
	ASSERT_EQ(errno, EINVAL);
	/* a new range that cannot be pinned */
	errno = 0;
	ASSERT_EQ(ibv_rereg_mr(mr,
			       IBV_REREG_MR_CHANGE_TRANSLATION |
				   IBV_REREG_MR_CHANGE_PD,
			       pd2, none, page, 0),
		  IBV_REREG_MR_ERR_CMD);
	ASSERT_EQ(errno, EFAULT);
	/* no PD */
	errno = 0;
	ASSERT_EQ(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_PD, NULL, NULL, 0, 0),
		  IBV_REREG_MR_ERR_CMD);
	ASSERT_EQ(errno, EINVAL);

	ASSERT(mr->pd == e.pd);
	ASSERT(mr->addr == buf);
	ASSERT_EQ(mr->length, page);
	ASSERT_EQ(ibv_dealloc_pd(pd2), 0); /* the MR never moved */
	ASSERT_EQ(ibv_dereg_mr(mr), 0);
	teardown(&e);
}

/* Every combination of the three flags succeeds with valid arguments. */
TEST(rereg_all_flag_combinations)
{
	struct env e = setup();
	struct ibv_pd *pd2 = ibv_alloc_pd(e.ctx);
	char *buf = map(4 * page, PROT_READ | PROT_WRITE);
	int flags;

	ASSERT_NOT_NULL(pd2);
	for (flags = 1; flags <= IBV_REREG_MR_FLAGS_SUPPORTED; flags++) {
		struct ibv_mr *mr = ibv_reg_mr(e.pd, buf, page, 0);
		bool trans = flags & IBV_REREG_MR_CHANGE_TRANSLATION;
		bool chpd = flags & IBV_REREG_MR_CHANGE_PD;
		bool acc = flags & IBV_REREG_MR_CHANGE_ACCESS;
		int ret;

		ASSERT_NOT_NULL(mr);
		ret = ibv_rereg_mr(
		    mr, flags, chpd ? pd2 : NULL, trans ? buf + page + 5 : NULL,
		    trans ? 2 * page : 0,
		    acc ? IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE : 0);
		if (ret)
			harness_fail(__FILE__, __LINE__,
				     "rereg flags %d: %d errno %d", flags, ret,
				     errno);
		ASSERT(mr->pd == (chpd ? pd2 : e.pd));
		ASSERT(mr->addr == (trans ? buf + page + 5 : buf));
		ASSERT_EQ(mr->length, trans ? 2 * page : page);
		ASSERT(mr->context == e.ctx);
		ASSERT_EQ(ibv_dereg_mr(mr), 0);
	}
	ASSERT_EQ(ibv_dealloc_pd(pd2), 0);
	teardown(&e);
}

/*
 * Read-only memory and rereg: a new translation is pinned with the new
 * access (or the old one); an access change alone keeps the pages the
 * device has, as mlx5 and rxe do, and is not re-checked.
 */
TEST(rereg_read_only_memory)
{
	struct env e = setup();
	char *ro = map(page, PROT_READ);
	char *rw = map(page, PROT_READ | PROT_WRITE);
	struct ibv_mr *mr = ibv_reg_mr(e.pd, rw, page, IBV_ACCESS_LOCAL_WRITE);

	ASSERT_NOT_NULL(mr);
	errno = 0;
	ASSERT_EQ(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_TRANSLATION, NULL, ro,
			       page, 0),
		  IBV_REREG_MR_ERR_CMD);
	ASSERT_EQ(errno, EFAULT);
	ASSERT_EQ(ibv_rereg_mr(mr,
			       IBV_REREG_MR_CHANGE_TRANSLATION |
				   IBV_REREG_MR_CHANGE_ACCESS,
			       NULL, ro, page, IBV_ACCESS_REMOTE_READ),
		  0);
	ASSERT(mr->addr == ro);
	ASSERT_EQ(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0,
			       IBV_ACCESS_LOCAL_WRITE),
		  0);
	ASSERT_EQ(ibv_dereg_mr(mr), 0);
	teardown(&e);
}

TEST(dereg_many)
{
	struct env e = setup();
	char *buf = map(page, PROT_READ | PROT_WRITE);
	struct ibv_mr *mr[300];
	int i;

	for (i = 0; i < 300; i++) {
		mr[i] = ibv_reg_mr(e.pd, buf, page, IBV_ACCESS_LOCAL_WRITE);
		ASSERT_NOT_NULL(mr[i]);
	}
	for (i = 0; i < 300; i += 2)
		ASSERT_EQ(ibv_dereg_mr(mr[i]), 0);
	for (i = 1; i < 300; i += 2)
		ASSERT_EQ(ibv_dereg_mr(mr[i]), 0);
	teardown(&e);
}
