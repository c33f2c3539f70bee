// SPDX-License-Identifier: MIT
/*
 * Mapped registered memory leaves the program's mappings as it found
 * them (issue 13's "ordinary memory again", shm/seg.c): registering and
 * deregistering never-written pages in the middle of a buffer, one MR at
 * a time or several, in any order, ends with the buffer one mapping in
 * /proc/self/maps, as it was, and the pages still unpopulated.  Before, the
 * memory put back was MAP_NORESERVE, which the program's own mapping is
 * not, so the kernel kept the two apart: two more mappings for each
 * registration, a leak on the way to vm.max_map_count.
 */
#include <stdbool.h>
#include <sys/mman.h>

#include "harness.h"
#include "common.h"

#define PS	4096ul
#define RW	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | \
		 IBV_ACCESS_REMOTE_READ)

/* The mappings of /proc/self/maps that hold part of [p, p + n): only
 * the test's own buffer, whatever other threads (the engine, a
 * sanitizer's runtime) map meanwhile. */
static int mappings(const void *p, size_t n)
{
	FILE *f = fopen("/proc/self/maps", "r");
	uintptr_t s = (uintptr_t)p, e = s + n;
	unsigned long lo, hi;
	char line[512];
	int k = 0;

	ASSERT_NOT_NULL(f);
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "%lx-%lx", &lo, &hi) == 2 && lo < e &&
		    hi > s)
			k++;
	fclose(f);
	return k;
}

/* Is the page at p backed by the pool (re-backed, not CMA)? */
static bool in_pool(const void *p)
{
	FILE *f = fopen("/proc/self/maps", "r");
	unsigned long lo, hi;
	char line[512];
	bool yes = false;

	ASSERT_NOT_NULL(f);
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "%lx-%lx", &lo, &hi) == 2 &&
		    lo <= (uintptr_t)p && (uintptr_t)p < hi) {
			yes = strstr(line, "memfd:softhca-mem") != NULL;
			break;
		}
	fclose(f);
	return yes;
}

static size_t resident(const void *p, size_t n)
{
	unsigned char v[64];
	size_t r = 0;

	ASSERT_LE(n / PS, sizeof(v));
	ASSERT_EQ(mincore((void *)p, n, v), 0);
	for (size_t i = 0; i < n / PS; i++)
		r += v[i] & 1;
	return r;
}

struct env {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	unsigned char *buf;
	size_t len;
};

static struct env setup(size_t pages)
{
	struct env e;

	setenv("SOFTHCA_MAP", "1", 1);
	e.ctx = open_lo();
	e.pd = ibv_alloc_pd(e.ctx);
	ASSERT_NOT_NULL(e.pd);
	e.len = pages * PS;
	e.buf = mmap(NULL, e.len, PROT_READ | PROT_WRITE,
		     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT(e.buf != MAP_FAILED);
	return e;
}

static void teardown(struct env *e)
{
	ASSERT_EQ(resident(e->buf, 64 * PS), 0);	/* never written */
	ASSERT_EQ(munmap(e->buf, e->len), 0);
	ASSERT_EQ(ibv_dealloc_pd(e->pd), 0);
	ASSERT_EQ(ibv_close_device(e->ctx), 0);
}

/* One MR at a time, each over pages of its own in the middle. */
TEST(one_at_a_time)
{
	struct env e = setup(256);
	int before = mappings(e.buf, e.len);

	for (size_t i = 0; i < 40; i++) {
		size_t pages = 1 + i % 3;
		unsigned char *p = e.buf + (1 + 5 * i) * PS;
		struct ibv_mr *mr = ibv_reg_mr(e.pd, p, pages * PS, RW);

		ASSERT_NOT_NULL(mr);
		ASSERT(in_pool(p));
		ASSERT_EQ(ibv_dereg_mr(mr), 0);
		ASSERT(!in_pool(p));
	}
	ASSERT_EQ(before, 1);
	ASSERT_EQ(mappings(e.buf, e.len), before);
	teardown(&e);
}

/* Several at once, some adjacent (their pool mappings merge), taken
 * back in an order that is neither theirs nor its reverse. */
TEST(several_out_of_order)
{
	static const size_t at[] = { 3, 4, 5, 9, 20, 21, 40, 41, 42, 43 };
	static const int order[] = { 4, 0, 9, 2, 7, 1, 5, 8, 3, 6 };
	struct env e = setup(64);
	struct ibv_mr *mr[10];
	int before = mappings(e.buf, e.len);

	for (int i = 0; i < 10; i++) {
		mr[i] = ibv_reg_mr(e.pd, e.buf + at[i] * PS, PS, RW);
		ASSERT_NOT_NULL(mr[i]);
		ASSERT(in_pool(e.buf + at[i] * PS));
	}
	for (int i = 0; i < 10; i++)
		ASSERT_EQ(ibv_dereg_mr(mr[order[i]]), 0);
	ASSERT_EQ(before, 1);
	ASSERT_EQ(mappings(e.buf, e.len), before);
	teardown(&e);
}
