// SPDX-License-Identifier: MIT
/*
 * Mapped registered memory, the owner's side (issue 13, shm/seg.c): at
 * registration the pages under an MR are re-backed in place by the pool
 * memfd ("memfd:softhca-mem"), with the same addresses, contents and
 * protections; untouched pages stay untouched; the last deregistration
 * turns them back into private memory that madvise(MADV_DONTNEED)
 * releases; a fork()ed child gets its own copy.
 *
 * Checked from outside as a peer would: the segment table and the MR
 * entries of this process's arena (found in /proc/self/maps), the
 * mappings and RSS in /proc/self, mincore for untouched pages.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "harness.h"
#include "common.h"
#include "common/stat.h"
#include "arena_peer.h"
#include "shm/arena.h"

#define PS	4096ul
#define RW	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | \
		 IBV_ACCESS_REMOTE_READ)

struct env {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	char *arena;
};

static bool map_off_case;	/* map_off: SOFTHCA_MAP=0 */

/* The mapped path, whatever the environment says (but in map_off). */
static struct env setup(void)
{
	struct env e;

	setenv("SOFTHCA_MAP", map_off_case ? "0" : "1", 1);
	e.ctx = open_lo();
	e.pd = ibv_alloc_pd(e.ctx);
	ASSERT_NOT_NULL(e.pd);
	/* a CQ lives in the arena: it exists from now on */
	struct ibv_cq *cq = ibv_create_cq(e.ctx, 4, NULL, NULL, 0);

	ASSERT_NOT_NULL(cq);
	ASSERT_EQ(ibv_destroy_cq(cq), 0);
	e.arena = arena_own_base();
	return e;
}

static void teardown(struct env *e)
{
	ASSERT_EQ(ibv_dealloc_pd(e->pd), 0);
	ASSERT_EQ(ibv_close_device(e->ctx), 0);
}

static uint64_t stat_of(struct env *e, enum shca_stat s)
{
	return __atomic_load_n(&shca_arena_hdr(e->arena)->stats.v[s],
			       __ATOMIC_RELAXED);
}

/* An MR entry read as a peer does (arena.c's seqlock, retried). */
static bool shca_mr_shm_read_test(const struct shca_mr_shm *e,
				  struct shca_mr_shm *out)
{
	uint32_t s1, s2;

	do {
		s1 = __atomic_load_n(&e->seq, __ATOMIC_ACQUIRE);
		out->key = __atomic_load_n(&e->key, __ATOMIC_ACQUIRE);
		out->addr = __atomic_load_n(&e->addr, __ATOMIC_ACQUIRE);
		out->length = __atomic_load_n(&e->length, __ATOMIC_ACQUIRE);
		out->flags = __atomic_load_n(&e->flags, __ATOMIC_ACQUIRE);
		s2 = __atomic_load_n(&e->seq, __ATOMIC_ACQUIRE);
	} while (s1 != s2 || (s1 & 1));
	return out->key != 0;
}

/* The MR entry of mr, as a peer reads it (slots are handed out from the
 * start of the table). */
static struct shca_mr_shm mr_entry(struct env *e, struct ibv_mr *mr)
{
	struct shca_mr_shm *t = shca_arena_mr_table(e->arena), v;

	for (uint32_t i = 1; i < 65536; i++)
		if (shca_mr_shm_read_test(&t[i], &v) && v.key == mr->lkey)
			return v;
	memset(&v, 0, sizeof(v));
	return v;
}

static bool mr_mapped(struct env *e, struct ibv_mr *mr)
{
	struct shca_mr_shm v = mr_entry(e, mr);

	ASSERT_EQ(v.key, mr->lkey);
	return v.flags & SHCA_MR_SHM_MAPPED;
}

/* Live segments over [va, va + len): how many bytes they cover, and
 * that they are page-aligned, do not overlap and have distinct gens. */
static uint64_t seg_bytes(struct env *e, uintptr_t va, size_t len)
{
	struct shca_seg_shm *t = shca_arena_seg_table(e->arena), v;
	uint64_t bytes = 0;

	for (uint32_t i = 0; i < SHCA_ARENA_SEG_ENTRIES; i++) {
		v.gen = __atomic_load_n(&t[i].gen, __ATOMIC_ACQUIRE);
		if (!v.gen)
			continue;
		v.va = t[i].va;
		v.len = t[i].len;
		ASSERT_EQ(v.va % PS, 0);
		ASSERT_EQ(v.len % PS, 0);
		ASSERT_NE(v.len, 0);
		if (v.va + v.len <= va || v.va >= va + len)
			continue;
		uint64_t s = v.va > va ? v.va : va;
		uint64_t end = v.va + v.len < va + len ? v.va + v.len :
							  va + len;
		bytes += end - s;
	}
	return bytes;
}

static uint64_t live_segs(struct env *e)
{
	struct shca_seg_shm *t = shca_arena_seg_table(e->arena);
	uint64_t n = 0;

	for (uint32_t i = 0; i < SHCA_ARENA_SEG_ENTRIES; i++)
		n += __atomic_load_n(&t[i].gen, __ATOMIC_ACQUIRE) != 0;
	return n;
}

/* The line of /proc/self/maps for addr. */
static bool maps_line(const void *addr, char *out, size_t n)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[512];
	bool found = false;

	ASSERT_NOT_NULL(f);
	while (!found && fgets(line, sizeof(line), f)) {
		unsigned long lo, hi;

		if (sscanf(line, "%lx-%lx", &lo, &hi) == 2 &&
		    (uintptr_t)addr >= lo && (uintptr_t)addr < hi) {
			snprintf(out, n, "%s", line);
			found = true;
		}
	}
	fclose(f);
	return found;
}

static bool in_pool(const void *addr)
{
	char line[512];

	return maps_line(addr, line, sizeof(line)) &&
	       strstr(line, "memfd:softhca-mem");
}

static void fill(unsigned char *p, size_t n, unsigned int seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (unsigned char)(i * 7 + seed);
}

static bool same(const unsigned char *p, size_t n, unsigned int seed)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != (unsigned char)(i * 7 + seed))
			return false;
	return true;
}

/* kB resident: anonymous plus shared memory, or shared memory only. */
static long rss_status_kb(bool anon_too)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	long anon = -1, shm = -1, v;

	ASSERT_NOT_NULL(f);
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "RssAnon: %ld", &v) == 1)
			anon = v;
		if (sscanf(line, "RssShmem: %ld", &v) == 1)
			shm = v;
	}
	fclose(f);
	ASSERT_GE(anon, 0);
	ASSERT_GE(shm, 0);
	return anon_too ? anon + shm : shm;
}

/* kB of this process's resident anonymous plus shared memory. */
static long rss_kb(void)
{
	return rss_status_kb(true);
}

/* kB of shared memory only (a sanitizer's shadow is anonymous). */
static long rss_shm_kb(void)
{
	return rss_status_kb(false);
}

/* Resident pages of [p, p + n) by mincore. */
static size_t resident(const void *p, size_t n)
{
	size_t pages = (n + PS - 1) / PS, r = 0;
	unsigned char *v = malloc(pages);

	ASSERT_NOT_NULL(v);
	ASSERT_EQ(mincore((void *)p, n, v), 0);
	for (size_t i = 0; i < pages; i++)
		r += v[i] & 1;
	free(v);
	return r;
}

/* ------------------------------------------------------------------ */

/* malloc'd memory, unaligned: same address, same bytes, in the pool;
 * the MR's pages (and only those) in segments; counters exact; after
 * dereg, private again with the same bytes and no live segment left. */
TEST(heap_unaligned)
{
	struct env e = setup();
	size_t n = 3 * PS + 100;
	unsigned char *buf = malloc(n + 64), *p = buf + 37;
	/* only the whole pages inside the MR are re-backed: its first and
	 * last pages hold other heap memory (seg.c, page_range) */
	uintptr_t lo = ((uintptr_t)p + PS - 1) & ~(PS - 1);
	uintptr_t hi = ((uintptr_t)p + n) & ~(PS - 1);
	uint64_t mapped0 = stat_of(&e, SHCA_STAT_MR_MAPPED);
	uint64_t cma0 = stat_of(&e, SHCA_STAT_MR_CMA);
	uint64_t bytes0 = stat_of(&e, SHCA_STAT_MAP_BYTES);
	struct ibv_mr *mr;

	ASSERT_NOT_NULL(buf);
	fill(p, n, 1);
	ASSERT_EQ(live_segs(&e), 0);
	mr = ibv_reg_mr(e.pd, p, n, RW);
	ASSERT_NOT_NULL(mr);
	ASSERT(mr->addr == p);
	ASSERT(same(p, n, 1));
	ASSERT(!in_pool(p));
	ASSERT(!in_pool(p + n - 1));
	ASSERT(in_pool((void *)lo));
	ASSERT(in_pool((void *)(hi - 1)));
	ASSERT(mr_mapped(&e, mr));
	ASSERT_U64_EQ(seg_bytes(&e, lo, hi - lo), hi - lo);
	ASSERT_U64_EQ(stat_of(&e, SHCA_STAT_MR_MAPPED), mapped0 + 1);
	ASSERT_U64_EQ(stat_of(&e, SHCA_STAT_MR_CMA), cma0);
	ASSERT_U64_EQ(stat_of(&e, SHCA_STAT_MAP_BYTES), bytes0 + (hi - lo));
	/* the memory works as memory: written, read back */
	fill(p, n, 2);
	ASSERT(same(p, n, 2));
	ASSERT_EQ(ibv_dereg_mr(mr), 0);
	ASSERT(same(p, n, 2));
	ASSERT(!in_pool((void *)lo));
	ASSERT_EQ(live_segs(&e), 0);
	free(buf);
	teardown(&e);
}

/* mmap'd memory, aligned, with a read-only part: protections kept. */
TEST(mmap_protections)
{
	struct env e = setup();
	size_t n = 8 * PS;
	unsigned char *p = mmap(NULL, n, PROT_READ | PROT_WRITE,
				MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	struct ibv_mr *mr;
	char line[512];

	ASSERT(p != MAP_FAILED);
	fill(p, n, 3);
	ASSERT_EQ(mprotect(p + 4 * PS, 4 * PS, PROT_READ), 0);
	mr = ibv_reg_mr(e.pd, p, n, IBV_ACCESS_REMOTE_READ);
	ASSERT_NOT_NULL(mr);
	ASSERT(mr_mapped(&e, mr));
	ASSERT(same(p, n, 3));
	ASSERT(maps_line(p, line, sizeof(line)));
	ASSERT(strstr(line, " rw-s "));
	ASSERT(maps_line(p + 5 * PS, line, sizeof(line)));
	ASSERT(strstr(line, " r--s "));
	ASSERT_EQ(ibv_dereg_mr(mr), 0);
	ASSERT(maps_line(p, line, sizeof(line)));
	ASSERT(strstr(line, " rw-p "));
	ASSERT(maps_line(p + 5 * PS, line, sizeof(line)));
	ASSERT(strstr(line, " r--p "));
	ASSERT(same(p, n, 3));
	ASSERT_EQ(munmap(p, n), 0);
	teardown(&e);
}

/* posix_memalign: aligned range */
TEST(posix_memalign_aligned)
{
	struct env e = setup();
	size_t n = 16 * PS;
	void *v;
	struct ibv_mr *mr;

	ASSERT_EQ(posix_memalign(&v, PS, n), 0);
	fill(v, n, 4);
	mr = ibv_reg_mr(e.pd, v, n, RW);
	ASSERT_NOT_NULL(mr);
	ASSERT(mr_mapped(&e, mr));
	ASSERT_U64_EQ(seg_bytes(&e, (uintptr_t)v, n), n);
	ASSERT(same(v, n, 4));
	ASSERT_EQ(ibv_dereg_mr(mr), 0);
	ASSERT(same(v, n, 4));
	free(v);
	teardown(&e);
}

/* Is every page of [p, p + n) in a mapping whose smaps VmFlags say
 * locked ("lo")? */
static bool locked(const void *p, size_t n)
{
	FILE *f = fopen("/proc/self/smaps", "r");
	uintptr_t s = (uintptr_t)p, e = s + n, covered = s;
	unsigned long lo = 0, hi = 0;
	char line[512];
	bool in = false;

	ASSERT_NOT_NULL(f);
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2) {
			in = lo < e && hi > s;
			continue;
		}
		/* VmFlags' two-letter flags, each after a space */
		if (in && !strncmp(line, "VmFlags:", 8) &&
		    strstr(line, " lo") && lo <= covered && hi > covered)
			covered = hi;
	}
	fclose(f);
	return covered >= e;
}

/* SOFTHCA_MAP_MLOCK=1: a buffer the program locked in memory (mlock)
 * stays locked when its registration re-backs it by the pool, and when
 * its deregistration gives it back. */
TEST(mlock_carried)
{
	struct env e;

	setenv("SOFTHCA_MAP_MLOCK", "1", 1);
	e = setup();
	size_t n = 16 * PS;
	struct ibv_mr *mr;
	void *v;

	ASSERT_EQ(posix_memalign(&v, PS, n), 0);
	fill(v, n, 6);
	/* (ASan's and TSan's mlock do nothing: the VMA is not locked) */
	if (mlock(v, n) || !locked(v, n)) {
		free(v);
		teardown(&e);
		SKIP("mlock of 64 KiB failed or locked nothing "
		     "(RLIMIT_MEMLOCK, a sanitizer)");
	}
	mr = ibv_reg_mr(e.pd, v, n, RW);
	ASSERT_NOT_NULL(mr);
	ASSERT(mr_mapped(&e, mr));
	ASSERT(in_pool(v));
	ASSERT(locked(v, n));
	ASSERT(same(v, n, 6));
	ASSERT_EQ(ibv_dereg_mr(mr), 0);
	ASSERT(!in_pool(v));
	ASSERT(locked(v, n));
	ASSERT(same(v, n, 6));
	/* and one never locked stays unlocked both ways */
	ASSERT_EQ(munlock(v, n), 0);
	mr = ibv_reg_mr(e.pd, v, n, RW);
	ASSERT_NOT_NULL(mr);
	ASSERT(mr_mapped(&e, mr));
	ASSERT(!locked(v, PS));
	ASSERT_EQ(ibv_dereg_mr(mr), 0);
	ASSERT(!locked(v, PS));
	free(v);
	teardown(&e);
}

/* 64 GiB of MAP_NORESERVE memory, a few pages touched: registration
 * copies those only; the rest stays unpopulated (mincore 0, RSS not
 * grown by more than the touched pages and bookkeeping). */
TEST(sparse_64g)
{
	struct env e = setup();
	size_t n = 64ul << 30;
	unsigned char *p = mmap(NULL, n, PROT_READ | PROT_WRITE,
				MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
				-1, 0);
	size_t touched[] = { 0, 5 * PS, 1ul << 30, (40ul << 30) + 3 * PS,
			     n - PS };
	uint64_t copy0 = stat_of(&e, SHCA_STAT_MAP_COPY_BYTES);
	struct ibv_mr *mr;
	long rss0, rss1;

	if (p == MAP_FAILED)
		SKIP_ENV("no 64 GiB of address space");
	for (size_t i = 0; i < sizeof(touched) / sizeof(touched[0]); i++)
		p[touched[i]] = (unsigned char)(i + 1);
	rss0 = rss_kb();
	mr = ibv_reg_mr(e.pd, p, n, RW);
	ASSERT_NOT_NULL(mr);
	ASSERT(mr_mapped(&e, mr));
	rss1 = rss_kb();
	/* 5 pages copied (the originals freed by the remap) */
	ASSERT_U64_EQ(stat_of(&e, SHCA_STAT_MAP_COPY_BYTES), copy0 + 5 * PS);
	ASSERT_LT(rss1, rss0 + 16 * 1024);
	for (size_t i = 0; i < sizeof(touched) / sizeof(touched[0]); i++)
		ASSERT_EQ(p[touched[i]], i + 1);
	ASSERT_EQ(resident(p + PS, 4 * PS), 0);
	ASSERT_EQ(resident(p + (2ul << 30), 1ul << 20), 0);
	ASSERT_EQ(ibv_dereg_mr(mr), 0);
	ASSERT_LT(rss_kb(), rss0 + 16 * 1024);
	for (size_t i = 0; i < sizeof(touched) / sizeof(touched[0]); i++)
		ASSERT_EQ(p[touched[i]], i + 1);
	ASSERT_EQ(resident(p + (2ul << 30), 1ul << 20), 0);
	ASSERT(!in_pool(p));
	ASSERT_EQ(munmap(p, n), 0);
	teardown(&e);
}

/* Registered, deregistered, then MADV_DONTNEED: the memory goes back to
 * the system (shared memory that DONTNEED keeps would be a leak). */
TEST(dereg_then_dontneed_releases)
{
	struct env e = setup();
	size_t n = 16ul << 20;
	unsigned char *p = mmap(NULL, n, PROT_READ | PROT_WRITE,
				MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	struct ibv_mr *mr;
	long before, full, shm_before;

	ASSERT(p != MAP_FAILED);
	before = rss_kb();
	shm_before = rss_shm_kb();
	memset(p, 0x5a, n);
	mr = ibv_reg_mr(e.pd, p, n, RW);
	ASSERT_NOT_NULL(mr);
	ASSERT(mr_mapped(&e, mr));
	ASSERT_EQ(ibv_dereg_mr(mr), 0);
	full = rss_kb();
	ASSERT_GE(full, before + 15 * 1024);
	ASSERT_EQ(madvise(p, n, MADV_DONTNEED), 0);
	/* the range holds no page any more, and the pool gave its copy
	 * back (shared memory that DONTNEED cannot free would stay
	 * resident in the pool's page cache: mincore and RssShmem) */
	ASSERT_EQ(resident(p, n), 0);
	ASSERT_LT(rss_shm_kb(), shm_before + 1024);
	ASSERT_EQ(p[12345], 0);	/* private anonymous: zero after DONTNEED */
	ASSERT_EQ(munmap(p, n), 0);
	teardown(&e);
}

/* Two MRs that overlap: the second gets a segment only for the pages the
 * first does not cover; each dereg keeps what the other still needs. */
TEST(overlapping_mrs)
{
	struct env e = setup();
	size_t n = 12 * PS;
	unsigned char *p = mmap(NULL, n, PROT_READ | PROT_WRITE,
				MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	uint64_t b0 = stat_of(&e, SHCA_STAT_MAP_BYTES);
	struct ibv_mr *a, *b;

	ASSERT(p != MAP_FAILED);
	fill(p, n, 5);
	a = ibv_reg_mr(e.pd, p + PS, 5 * PS, RW);		/* pages 1-5 */
	ASSERT_NOT_NULL(a);
	/* pages 3-9, of which 4-8 whole */
	b = ibv_reg_mr(e.pd, p + 3 * PS + 10, 6 * PS, RW);
	ASSERT_NOT_NULL(b);
	ASSERT(mr_mapped(&e, a));
	ASSERT(mr_mapped(&e, b));
	/* pages 1-5, then 6-8: 8 pages, in two segments */
	ASSERT_U64_EQ(stat_of(&e, SHCA_STAT_MAP_BYTES), b0 + 8 * PS);
	ASSERT_U64_EQ(seg_bytes(&e, (uintptr_t)p, n), 8 * PS);
	ASSERT_EQ(live_segs(&e), 2);
	ASSERT(!in_pool(p));
	ASSERT(!in_pool(p + 10 * PS));
	ASSERT(same(p, n, 5));
	ASSERT_EQ(ibv_dereg_mr(a), 0);
	/* b still needs pages 4-5: the first segment lives on */
	ASSERT_EQ(live_segs(&e), 2);
	ASSERT(in_pool(p + PS));
	ASSERT(mr_mapped(&e, b));
	fill(p, n, 6);
	ASSERT_EQ(ibv_dereg_mr(b), 0);
	ASSERT_EQ(live_segs(&e), 0);
	ASSERT(!in_pool(p + PS));
	ASSERT(!in_pool(p + 7 * PS));
	ASSERT(same(p, n, 6));
	ASSERT_EQ(munmap(p, n), 0);
	teardown(&e);
}

/* Two MRs in one page, at different offsets: neither has a whole page of
 * its own, so both stay on CMA and the page stays private (re-backing it
 * would lose what other threads store in the rest of the page). */
TEST(mrs_share_a_page)
{
	struct env e = setup();
	unsigned char *p = mmap(NULL, 2 * PS, PROT_READ | PROT_WRITE,
				MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	uint64_t cma0 = stat_of(&e, SHCA_STAT_MR_CMA);
	struct ibv_mr *a, *b;

	ASSERT(p != MAP_FAILED);
	fill(p, 2 * PS, 7);
	a = ibv_reg_mr(e.pd, p + 100, 200, RW);
	b = ibv_reg_mr(e.pd, p + 1000, 300, RW);
	ASSERT_NOT_NULL(a);
	ASSERT_NOT_NULL(b);
	ASSERT(!mr_mapped(&e, a));
	ASSERT(!mr_mapped(&e, b));
	ASSERT_U64_EQ(stat_of(&e, SHCA_STAT_MR_CMA), cma0 + 2);
	ASSERT_EQ(live_segs(&e), 0);
	ASSERT(!in_pool(p));
	ASSERT_EQ(ibv_dereg_mr(b), 0);
	ASSERT_EQ(ibv_dereg_mr(a), 0);
	ASSERT(!in_pool(p));
	ASSERT_EQ(live_segs(&e), 0);
	ASSERT(same(p, 2 * PS, 7));
	ASSERT_EQ(munmap(p, 2 * PS), 0);
	teardown(&e);
}

/* rereg to another address, then to a larger size: the new range is
 * mapped, the old one private again. */
TEST(rereg_address_and_size)
{
	struct env e = setup();
	unsigned char *p = mmap(NULL, 8 * PS, PROT_READ | PROT_WRITE,
				MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	unsigned char *q = mmap(NULL, 8 * PS, PROT_READ | PROT_WRITE,
				MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	struct ibv_mr *mr;

	ASSERT(p != MAP_FAILED && q != MAP_FAILED);
	fill(p, 8 * PS, 8);
	fill(q, 8 * PS, 9);
	mr = ibv_reg_mr(e.pd, p, 2 * PS, RW);
	ASSERT_NOT_NULL(mr);
	ASSERT(in_pool(p));
	ASSERT_EQ(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_TRANSLATION, NULL,
			       q + 50, 3 * PS, 0), 0);
	ASSERT(!in_pool(p));
	/* [q + 50, q + 3 PS + 50): pages 1 and 2 whole */
	ASSERT(!in_pool(q));
	ASSERT(in_pool(q + PS));
	ASSERT(mr_mapped(&e, mr));
	ASSERT_U64_EQ(seg_bytes(&e, (uintptr_t)q, 8 * PS), 2 * PS);
	ASSERT_U64_EQ(seg_bytes(&e, (uintptr_t)p, 8 * PS), 0);
	ASSERT_EQ(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_TRANSLATION, NULL,
			       q, 8 * PS, 0), 0);
	ASSERT(mr_mapped(&e, mr));
	ASSERT_U64_EQ(seg_bytes(&e, (uintptr_t)q, 8 * PS), 8 * PS);
	ASSERT(same(p, 8 * PS, 8));
	ASSERT(same(q, 8 * PS, 9));
	/* an access change keeps the mapping */
	ASSERT_EQ(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0,
			       IBV_ACCESS_LOCAL_WRITE), 0);
	ASSERT(mr_mapped(&e, mr));
	ASSERT_EQ(ibv_dereg_mr(mr), 0);
	ASSERT_EQ(live_segs(&e), 0);
	ASSERT(!in_pool(q));
	ASSERT(same(q, 8 * PS, 9));
	teardown(&e);
}

/* SOFTHCA_MAP=0: memory stays as it is, the MR is CMA, counted. */
TEST(map_off)
{
	struct env e;
	unsigned char *p = mmap(NULL, 4 * PS, PROT_READ | PROT_WRITE,
				MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	struct ibv_mr *mr;
	uint64_t cma0, m0;

	map_off_case = true;
	e = setup();
	cma0 = stat_of(&e, SHCA_STAT_MR_CMA);
	m0 = stat_of(&e, SHCA_STAT_MR_MAPPED);
	ASSERT(p != MAP_FAILED);
	fill(p, 4 * PS, 10);
	mr = ibv_reg_mr(e.pd, p, 4 * PS, RW);
	ASSERT_NOT_NULL(mr);
	ASSERT(!mr_mapped(&e, mr));
	ASSERT(!in_pool(p));
	ASSERT_EQ(live_segs(&e), 0);
	ASSERT_U64_EQ(stat_of(&e, SHCA_STAT_MR_CMA), cma0 + 1);
	ASSERT_U64_EQ(stat_of(&e, SHCA_STAT_MR_MAPPED), m0);
	ASSERT_EQ(ibv_dereg_mr(mr), 0);
	ASSERT(same(p, 4 * PS, 10));
	teardown(&e);
}

/* What cannot be shared safely stays as it is (CMA): the stack, a
 * MAP_SHARED memfd, a private file mapping; a range with one such page
 * leaves the whole MR alone. */
TEST(unshareable_is_cma)
{
	struct env e = setup();
	unsigned char stackbuf[3 * 4096];
	char path[] = "/tmp/softhca-remap-XXXXXX";
	int mfd = memfd_create("user-mem", MFD_CLOEXEC), ffd = mkstemp(path);
	unsigned char *shm, *file, *mix;
	uint64_t cma0 = stat_of(&e, SHCA_STAT_MR_CMA);
	uint64_t m0 = stat_of(&e, SHCA_STAT_MR_MAPPED);
	struct ibv_mr *mr;

	ASSERT_GE(mfd, 0);
	ASSERT_GE(ffd, 0);
	unlink(path);
	ASSERT_EQ(ftruncate(mfd, 4 * PS), 0);
	ASSERT_EQ(ftruncate(ffd, 4 * PS), 0);
	shm = mmap(NULL, 4 * PS, PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0);
	file = mmap(NULL, 4 * PS, PROT_READ | PROT_WRITE, MAP_PRIVATE, ffd,
		    0);
	ASSERT(shm != MAP_FAILED && file != MAP_FAILED);
	/* anonymous pages, then one page of the file, mapped beside them */
	mix = mmap(NULL, 3 * PS, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT(mix != MAP_FAILED);
	ASSERT(mmap(mix + 2 * PS, PS, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_FIXED, ffd, 0) != MAP_FAILED);
	fill(stackbuf, sizeof(stackbuf), 11);

	mr = ibv_reg_mr(e.pd, stackbuf, sizeof(stackbuf), RW);
	ASSERT_NOT_NULL(mr);
	ASSERT(!mr_mapped(&e, mr));
	ASSERT_EQ(ibv_dereg_mr(mr), 0);
	mr = ibv_reg_mr(e.pd, shm, 4 * PS, RW);
	ASSERT_NOT_NULL(mr);
	ASSERT(!mr_mapped(&e, mr));
	ASSERT_EQ(ibv_dereg_mr(mr), 0);
	mr = ibv_reg_mr(e.pd, file, 4 * PS, RW);
	ASSERT_NOT_NULL(mr);
	ASSERT(!mr_mapped(&e, mr));
	ASSERT_EQ(ibv_dereg_mr(mr), 0);
	mr = ibv_reg_mr(e.pd, mix, 3 * PS, RW);
	ASSERT_NOT_NULL(mr);
	ASSERT(!mr_mapped(&e, mr));
	ASSERT(!in_pool(mix));
	ASSERT_EQ(ibv_dereg_mr(mr), 0);

	ASSERT_EQ(live_segs(&e), 0);
	ASSERT_U64_EQ(stat_of(&e, SHCA_STAT_MR_CMA), cma0 + 4);
	ASSERT_U64_EQ(stat_of(&e, SHCA_STAT_MR_MAPPED), m0);
	ASSERT(same(stackbuf, sizeof(stackbuf), 11));
	teardown(&e);
}

/* Descriptors open in this process. */
static int open_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	int n = 0;

	ASSERT_NOT_NULL(d);
	while (readdir(d))
		n++;
	closedir(d);
	return n;
}

/* The live segment entry over addr (gen 0 if none). */
static struct shca_seg_shm seg_at(struct env *e, const void *addr)
{
	struct shca_seg_shm *t = shca_arena_seg_table(e->arena), v;

	/* only this thread registers: the entries hold still */
	for (uint32_t i = 0; i < SHCA_ARENA_SEG_ENTRIES; i++) {
		v = t[i];
		if (v.gen && v.va <= (uintptr_t)addr &&
		    (uintptr_t)addr < v.va + v.len)
			return v;
	}
	memset(&v, 0, sizeof(v));
	return v;
}

/*
 * Memory already in a memfd sealed against shrinking is shared as it is
 * (shm/seg_file.c): the MR is mapped, its segment names the file (its
 * inode, the file offset), nothing is copied into the pool (the mapping
 * is still the program's memfd), map_file_bytes counts it; beside private
 * pages in the same MR, those are re-backed as usual.  After dereg the
 * file is as it was, and softhca's descriptor of it is closed.
 */
TEST(sealed_memfd_in_place)
{
	struct env e = setup();
	int mfd = memfd_create("user-sealed", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	uint64_t fb0, b0;
	unsigned char *shm, *mix;
	struct shca_seg_shm v;
	struct ibv_mr *mr;
	struct stat st;
	char line[512];
	int fds0;

	ASSERT_GE(mfd, 0);
	ASSERT_EQ(ftruncate(mfd, 4 * PS), 0);
	ASSERT_EQ(fcntl(mfd, F_ADD_SEALS, F_SEAL_SHRINK), 0);
	ASSERT_EQ(fstat(mfd, &st), 0);
	shm = mmap(NULL, 4 * PS, PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0);
	ASSERT(shm != MAP_FAILED);
	fill(shm, 4 * PS, 21);
	/* softhca's own descriptors (maps, pagemap) opened once */
	mix = mmap(NULL, 3 * PS, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT(mix != MAP_FAILED);
	mr = ibv_reg_mr(e.pd, mix, 3 * PS, RW);
	ASSERT_NOT_NULL(mr);
	ASSERT_EQ(ibv_dereg_mr(mr), 0);
	ASSERT_EQ(munmap(mix, 3 * PS), 0);
	fds0 = open_fds();
	fb0 = stat_of(&e, SHCA_STAT_MAP_FILE_BYTES);
	b0 = stat_of(&e, SHCA_STAT_MAP_BYTES);

	mr = ibv_reg_mr(e.pd, shm + PS, 3 * PS, RW);
	ASSERT_NOT_NULL(mr);
	ASSERT(mr_mapped(&e, mr));
	ASSERT(same(shm, 4 * PS, 21));
	ASSERT(maps_line(shm + PS, line, sizeof(line)));
	ASSERT(strstr(line, "memfd:user-sealed") != NULL);
	v = seg_at(&e, shm + PS);
	ASSERT_NE(v.gen, 0);
	ASSERT_U64_EQ(v.va, (uintptr_t)shm + PS);
	ASSERT_U64_EQ(v.len, 3 * PS);
	ASSERT_U64_EQ(v.off, PS);
	ASSERT_NE(v.file, 0);
	ASSERT_U64_EQ(v.ino, (uint64_t)st.st_ino);
	ASSERT_U64_EQ(stat_of(&e, SHCA_STAT_MAP_FILE_BYTES), fb0 + 3 * PS);
	ASSERT_U64_EQ(stat_of(&e, SHCA_STAT_MAP_BYTES), b0);
	/* a store through the mapping is the file's */
	shm[2 * PS] = 0x5a;
	ASSERT_EQ(pread(mfd, line, 1, 2 * PS), 1);
	ASSERT_EQ((unsigned char)line[0], 0x5a);
	shm[2 * PS] = (unsigned char)(2 * PS * 7 + 21);
	ASSERT_EQ(ibv_dereg_mr(mr), 0);
	ASSERT_EQ(live_segs(&e), 0);
	ASSERT_EQ(open_fds(), fds0);
	ASSERT(maps_line(shm + PS, line, sizeof(line)));
	ASSERT(strstr(line, "memfd:user-sealed") != NULL);
	ASSERT(same(shm, 4 * PS, 21));

	/* private pages and a page of the file in one MR: two segments */
	mix = mmap(NULL, 3 * PS, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT(mix != MAP_FAILED);
	ASSERT(mmap(mix + 2 * PS, PS, PROT_READ | PROT_WRITE,
		    MAP_SHARED | MAP_FIXED, mfd, 0) != MAP_FAILED);
	fill(mix, 2 * PS, 22);
	mr = ibv_reg_mr(e.pd, mix, 3 * PS, RW);
	ASSERT_NOT_NULL(mr);
	ASSERT(mr_mapped(&e, mr));
	ASSERT(in_pool(mix));
	ASSERT(!in_pool(mix + 2 * PS));
	ASSERT(same(mix, 2 * PS, 22));
	ASSERT(same(mix + 2 * PS, PS, 21));
	ASSERT_EQ(live_segs(&e), 2);
	ASSERT_EQ(seg_at(&e, mix).file, 0);
	ASSERT_NE(seg_at(&e, mix + 2 * PS).file, 0);
	ASSERT_EQ(ibv_dereg_mr(mr), 0);
	ASSERT_EQ(live_segs(&e), 0);
	ASSERT(!in_pool(mix));
	ASSERT(same(mix, 2 * PS, 22));
	ASSERT_EQ(munmap(mix, 3 * PS), 0);
	ASSERT_EQ(munmap(shm, 4 * PS), 0);
	close(mfd);
	teardown(&e);
}

/* ------------------------------------------------------------------ */
/* fork                                                                */

/*
 * A child sees its own copy of registered memory as it was at fork(),
 * private memory, not the pool; the parent's later stores do not reach
 * it and the child's do not reach the parent.  With and without
 * ibv_fork_init (softhca answers IBV_FORK_UNNEEDED: a copy either way).
 */
static void fork_case(bool fork_init)
{
	struct env e;
	size_t n = 6 * PS + 300;
	unsigned char *p, *w, *buf;
	int to_child[2], to_parent[2], st;
	struct ibv_mr *mr;
	char c;
	pid_t pid;

	if (fork_init)
		ASSERT_EQ(ibv_fork_init(), 0);
	e = setup();
	buf = malloc(n + 100);
	ASSERT_NOT_NULL(buf);
	p = buf + 50;
	/* the first whole page of the MR: the pages re-backed */
	w = (unsigned char *)(((uintptr_t)p + PS - 1) & ~(PS - 1));
	fill(p, n, 12);
	mr = ibv_reg_mr(e.pd, p, n, RW);
	ASSERT_NOT_NULL(mr);
	ASSERT(mr_mapped(&e, mr));
	ASSERT_EQ(pipe(to_child), 0);
	ASSERT_EQ(pipe(to_parent), 0);
	pid = fork();
	ASSERT_GE(pid, 0);
	if (!pid) {
		/* the copy at fork time, private */
		if (!same(p, n, 12) || in_pool(w))
			_exit(10);
		fill(p, n, 13);
		if (write(to_parent[1], "w", 1) != 1 ||
		    read(to_child[0], &c, 1) != 1)
			_exit(11);
		/* the parent wrote 14 meanwhile: not here */
		_exit(same(p, n, 13) ? 0 : 12);
	}
	/* a child that stops early ends the read below, not hangs it */
	close(to_parent[1]);
	close(to_child[0]);
	ASSERT_EQ(read(to_parent[0], &c, 1), 1);
	/* the child wrote 13: not here */
	ASSERT(same(p, n, 12));
	ASSERT(in_pool(w));
	fill(p, n, 14);
	ASSERT_EQ(write(to_child[1], "p", 1), 1);
	ASSERT_EQ(waitpid(pid, &st, 0), pid);
	ASSERT(WIFEXITED(st));
	ASSERT_EQ(WEXITSTATUS(st), 0);
	ASSERT(same(p, n, 14));
	ASSERT(mr_mapped(&e, mr));
	ASSERT_EQ(ibv_dereg_mr(mr), 0);
	ASSERT(same(p, n, 14));
	free(buf);
	teardown(&e);
}

/*
 * A sealed memfd shared as it is stays what the program made it in a
 * forked child: the same shared file (the kernel's fork of a MAP_SHARED
 * mapping), not a private copy and not unmapped; a store by the child is
 * the parent's too.
 */
TEST(fork_keeps_shared_file)
{
	struct env e = setup();
	int mfd = memfd_create("user-sealed", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	unsigned char *shm;
	struct ibv_mr *mr;
	int st;
	pid_t pid;

	ASSERT_GE(mfd, 0);
	ASSERT_EQ(ftruncate(mfd, 2 * PS), 0);
	ASSERT_EQ(fcntl(mfd, F_ADD_SEALS, F_SEAL_SHRINK), 0);
	shm = mmap(NULL, 2 * PS, PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0);
	ASSERT(shm != MAP_FAILED);
	fill(shm, 2 * PS, 31);
	mr = ibv_reg_mr(e.pd, shm, 2 * PS, RW);
	ASSERT_NOT_NULL(mr);
	ASSERT(mr_mapped(&e, mr));
	pid = fork();
	ASSERT_GE(pid, 0);
	if (!pid) {
		char line[512];

		if (!same(shm, 2 * PS, 31) ||
		    !maps_line(shm, line, sizeof(line)) ||
		    !strstr(line, "memfd:user-sealed"))
			_exit(10);
		fill(shm, 2 * PS, 32);
		_exit(0);
	}
	ASSERT_EQ(waitpid(pid, &st, 0), pid);
	ASSERT(WIFEXITED(st));
	ASSERT_EQ(WEXITSTATUS(st), 0);
	ASSERT(same(shm, 2 * PS, 32));
	ASSERT_EQ(ibv_dereg_mr(mr), 0);
	ASSERT(same(shm, 2 * PS, 32));
	ASSERT_EQ(munmap(shm, 2 * PS), 0);
	close(mfd);
	teardown(&e);
}

TEST(fork_child_copy)
{
	fork_case(false);
}

TEST(fork_child_copy_fork_init)
{
	fork_case(true);
}

/* ------------------------------------------------------------------ */
/* The drain                                                           */

struct dereg_arg {
	struct ibv_mr *mr;
	int done;
};

static void *dereg_thread(void *arg)
{
	struct dereg_arg *d = arg;

	ASSERT_EQ(ibv_dereg_mr(d->mr), 0);
	__atomic_store_n(&d->done, 1, __ATOMIC_SEQ_CST);
	return NULL;
}

/*
 * A lane that a live peer holds with the MR's key keeps dereg waiting
 * (its entry already cleared); released, dereg returns.  A lane of a
 * dead process is taken back, and dereg does not wait for it.
 */
TEST(drain_waits_for_live_lane_frees_dead_one)
{
	struct env e = setup();
	uint64_t *lanes = shca_arena_lanes(e.arena);
	unsigned char *p = mmap(NULL, 2 * PS, PROT_READ | PROT_WRITE,
				MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	struct dereg_arg d = { 0 };
	pthread_t t;
	pid_t live, dead;
	int st;

	ASSERT(p != MAP_FAILED);
	d.mr = ibv_reg_mr(e.pd, p, 2 * PS, RW);
	ASSERT_NOT_NULL(d.mr);
	live = fork();
	if (!live) {
		pause();
		_exit(0);
	}
	ASSERT_GT(live, 0);
	lanes[17] = SHCA_LANE_WORD(live, d.mr->lkey);
	lanes[18] = SHCA_LANE_WORD(live, d.mr->lkey ^ 1);	/* another key */
	shca_lane_mark(lanes, 17);	/* as a peer does after its claim */
	shca_lane_mark(lanes, 18);
	ASSERT_EQ(pthread_create(&t, NULL, dereg_thread, &d), 0);
	/* the entry goes, dereg stays */
	for (int i = 0; i < 100000 && mr_entry(&e, d.mr).key; i++)
		sched_yield();
	for (int i = 0; i < 2000; i++)
		sched_yield();
	ASSERT_EQ(__atomic_load_n(&d.done, __ATOMIC_SEQ_CST), 0);
	ASSERT(in_pool(p));		/* the memory still the peer's too */
	__atomic_store_n(&lanes[17], 0, __ATOMIC_RELEASE);
	ASSERT_EQ(pthread_join(t, NULL), 0);
	ASSERT_EQ(d.done, 1);
	ASSERT(!in_pool(p));
	ASSERT_U64_EQ(lanes[18], SHCA_LANE_WORD(live, d.mr->lkey ^ 1));
	lanes[18] = 0;
	kill(live, SIGKILL);
	ASSERT_EQ(waitpid(live, &st, 0), live);

	/* a process that died in the lane: its pid is gone */
	dead = fork();
	if (!dead)
		_exit(0);
	ASSERT_EQ(waitpid(dead, &st, 0), dead);
	d.mr = ibv_reg_mr(e.pd, p, 2 * PS, RW);
	ASSERT_NOT_NULL(d.mr);
	lanes[100] = SHCA_LANE_WORD(dead, d.mr->lkey);
	shca_lane_mark(lanes, 100);
	ASSERT_EQ(ibv_dereg_mr(d.mr), 0);
	ASSERT_U64_EQ(lanes[100], 0);
	ASSERT(!in_pool(p));
	teardown(&e);
}

/*
 * The busy bitmap is a peer's hint: every bit set (lanes free, or held
 * by dead processes or with garbage) costs the drain a look at each lane
 * and no more; a dead holder's lane is freed, and the bits of free lanes
 * are cleared afterwards, a taken lane's bit kept.
 */
TEST(drain_bitmap_all_set)
{
	struct env e = setup();
	uint64_t *lanes = shca_arena_lanes(e.arena);
	uint64_t *busy = shca_lanes_busy(lanes);
	unsigned char *p = mmap(NULL, 2 * PS, PROT_READ | PROT_WRITE,
				MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	struct ibv_mr *mr;
	pid_t dead;
	int st;

	ASSERT(p != MAP_FAILED);
	dead = fork();
	if (!dead)
		_exit(0);
	ASSERT_EQ(waitpid(dead, &st, 0), dead);
	mr = ibv_reg_mr(e.pd, p, 2 * PS, RW);
	ASSERT_NOT_NULL(mr);
	lanes[4095] = SHCA_LANE_WORD(dead, mr->lkey);
	lanes[64] = SHCA_LANE_WORD(-5, mr->lkey ^ 1);	/* not our key */
	for (uint32_t g = 0; g < SHCA_ARENA_LANES / 64; g++)
		busy[g] = ~0ull;
	ASSERT_EQ(ibv_dereg_mr(mr), 0);
	ASSERT_U64_EQ(lanes[4095], 0);
	ASSERT(!in_pool(p));
	ASSERT_U64_EQ(busy[63], 0);
	ASSERT_U64_EQ(busy[1], 1);	/* lane 64 is taken */
	ASSERT_U64_EQ(busy[0], 0);
	lanes[64] = 0;
	busy[1] = 0;
	teardown(&e);
}

/*
 * Adjacent MRs (their pool ranges adjacent too) with data in some pages
 * and holes between: deregistration restores each one's data pages, and
 * only those (a hole stays unpopulated), whether the end of a data run is
 * found by a probe per page (up to 64 KiB) or by SEEK_HOLE (longer ones,
 * with a guard hole after them).
 */
TEST(adjacent_runs_restored)
{
	struct env e = setup();
	size_t sizes[] = { 2 * PS, 16 * PS, 32 * PS };

	for (size_t k = 0; k < 3; k++) {
		size_t sz = sizes[k], np = sz / PS;
		unsigned char *p = mmap(NULL, 3 * sz, PROT_READ | PROT_WRITE,
					MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		struct ibv_mr *mr[3];

		ASSERT(p != MAP_FAILED);
		for (size_t i = 0; i < 3 * np; i++)
			if (i % np != 1)	/* page 1 of each: a hole */
				memset(p + i * PS, (int)(i + 1), PS);
		for (int m = 0; m < 3; m++) {
			mr[m] = ibv_reg_mr(e.pd, p + m * sz, sz, RW);
			ASSERT_NOT_NULL(mr[m]);
			ASSERT(mr_mapped(&e, mr[m]));
		}
		for (int m = 0; m < 3; m++)
			ASSERT_EQ(ibv_dereg_mr(mr[m]), 0);
		for (size_t i = 0; i < 3 * np; i++) {
			ASSERT(!in_pool(p + i * PS));
			if (i % np == 1) {
				ASSERT_EQ(resident(p + i * PS, PS), 0);
				continue;
			}
			ASSERT_EQ(resident(p + i * PS, PS), 1);
			ASSERT_EQ(p[i * PS], (unsigned char)(i + 1));
			ASSERT_EQ(p[i * PS + PS - 1], (unsigned char)(i + 1));
		}
		ASSERT_EQ(munmap(p, 3 * sz), 0);
	}
	teardown(&e);
}

/* A range of several copy chunks (64 MiB each), a page in every MiB
 * written, a read-only stretch across a chunk boundary: contents and
 * protections kept both ways. */
TEST(large_chunked)
{
	struct env e = setup();
	size_t n = 200ul << 20;
	unsigned char *p = mmap(NULL, n, PROT_READ | PROT_WRITE,
				MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
				-1, 0);
	uint64_t copy0 = stat_of(&e, SHCA_STAT_MAP_COPY_BYTES);
	struct ibv_mr *mr;
	char line[512];

	ASSERT(p != MAP_FAILED);
	for (size_t o = 0; o < n; o += 1ul << 20)
		p[o + 17] = (unsigned char)(o >> 20);
	ASSERT_EQ(mprotect(p + (60ul << 20), 8ul << 20, PROT_READ), 0);
	mr = ibv_reg_mr(e.pd, p, n, IBV_ACCESS_REMOTE_READ);
	ASSERT_NOT_NULL(mr);
	ASSERT(mr_mapped(&e, mr));
	ASSERT_U64_EQ(stat_of(&e, SHCA_STAT_MAP_COPY_BYTES),
		      copy0 + 200 * PS);
	for (size_t o = 0; o < n; o += 1ul << 20)
		ASSERT_EQ(p[o + 17], (unsigned char)(o >> 20));
	ASSERT(maps_line(p + (66ul << 20), line, sizeof(line)));
	ASSERT(strstr(line, " r--s "));
	ASSERT(maps_line(p + (70ul << 20), line, sizeof(line)));
	ASSERT(strstr(line, " rw-s "));
	ASSERT_EQ(ibv_dereg_mr(mr), 0);
	for (size_t o = 0; o < n; o += 1ul << 20)
		ASSERT_EQ(p[o + 17], (unsigned char)(o >> 20));
	ASSERT(maps_line(p + (66ul << 20), line, sizeof(line)));
	ASSERT(strstr(line, " r--p "));
	ASSERT_EQ(resident(p + PS, (1ul << 20) - PS), 0);
	ASSERT_EQ(munmap(p, n), 0);
	teardown(&e);
}

/* Memory unmapped (or replaced) while registered: the dereg gives back
 * what is still the pool's and maps nothing where the program unmapped. */
TEST(unmapped_before_dereg)
{
	struct env e = setup();
	size_t n = 6 * PS;
	unsigned char *p = mmap(NULL, n, PROT_READ | PROT_WRITE,
				MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	struct ibv_mr *mr;
	unsigned char v;

	ASSERT(p != MAP_FAILED);
	fill(p, n, 15);
	mr = ibv_reg_mr(e.pd, p, n, RW);
	ASSERT_NOT_NULL(mr);
	ASSERT(mr_mapped(&e, mr));
	ASSERT_EQ(munmap(p + 2 * PS, 2 * PS), 0);
	ASSERT(mmap(p + 5 * PS, PS, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) != MAP_FAILED);
	ASSERT_EQ(ibv_dereg_mr(mr), 0);
	ASSERT_EQ(live_segs(&e), 0);
	ASSERT(same(p, 2 * PS, 15));
	ASSERT(!in_pool(p));
	ASSERT(!in_pool(p + 4 * PS));
	ASSERT_EQ(p[4 * PS], (unsigned char)(4 * PS * 7 + 15));
	ASSERT_EQ(p[5 * PS], 0);		/* the program's new page */
	/* the hole stays a hole */
	ASSERT_EQ(mincore(p + 2 * PS, PS, &v), -1);
	ASSERT_EQ(errno, ENOMEM);
	teardown(&e);
}

/*
 * What UCX's registration cache does: memory freed (here: unmapped and a
 * new mapping made at the same address) while its MR lives on, and the
 * new memory registered.  The new MR must be backed by what the program
 * has there now, not by the old MR's segment, which no longer holds those
 * pages (a peer writing through it would write into nothing the program
 * sees: Open MPI's osc ucx stalled on exactly that).  The old MR keeps its
 * old pages, as an MR on hardware keeps the pages it pinned.
 */
TEST(replaced_under_live_mr)
{
	struct env e = setup();
	size_t n = 4 * PS;
	unsigned char *p = mmap(NULL, n, PROT_READ | PROT_WRITE,
				MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	struct ibv_mr *old, *mr;

	ASSERT(p != MAP_FAILED);
	fill(p, n, 21);
	old = ibv_reg_mr(e.pd, p, n, RW);
	ASSERT_NOT_NULL(old);
	ASSERT(mr_mapped(&e, old));
	ASSERT_EQ(seg_bytes(&e, (uintptr_t)p, n), n);
	/* the program replaces the memory, the old MR still registered */
	ASSERT(mmap(p, n, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) == p);
	ASSERT(!in_pool(p));
	fill(p, n, 22);
	mr = ibv_reg_mr(e.pd, p, n, RW);
	ASSERT_NOT_NULL(mr);
	ASSERT(mr_mapped(&e, mr));
	/* the new pages are in the pool now, with their contents, and the
	 * segments the table shows over them are theirs alone */
	ASSERT(in_pool(p));
	ASSERT(in_pool(p + n - 1));
	ASSERT(same(p, n, 22));
	ASSERT_EQ(seg_bytes(&e, (uintptr_t)p, n), n);
	/* the old MR goes: the new memory stays as it is */
	ASSERT_EQ(ibv_dereg_mr(old), 0);
	ASSERT(in_pool(p));
	ASSERT(same(p, n, 22));
	ASSERT_EQ(seg_bytes(&e, (uintptr_t)p, n), n);
	ASSERT_EQ(ibv_dereg_mr(mr), 0);
	ASSERT(!in_pool(p));
	ASSERT(same(p, n, 22));
	ASSERT_EQ(live_segs(&e), 0);
	ASSERT_EQ(munmap(p, n), 0);
	teardown(&e);
}
