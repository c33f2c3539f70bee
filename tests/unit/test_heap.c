// SPDX-License-Identifier: MIT
/*
 * The arena's heap allocator (src/shm/heap.c) on its own, against a
 * reference model: a map of which block owns each 64-byte granule, and a
 * buffer that stands for the arena (the clear and punch ranges the heap
 * returns are applied to it as arena.c applies them to the memfd).
 *
 * Random alloc/free sequences (fixed seeds) check that blocks never
 * overlap, that an allocation fails only when no free run is long enough,
 * that what alloc hands out reads as zero, that a punch never touches a
 * block in use, that bad frees change nothing, and that freeing everything
 * leaves one free extent: the heap as it was new.
 */
#include <stdbool.h>
#include <stdint.h>

#include "harness.h"
#include "shm/heap.h"

#define PAGE	4096u
#define G	SHCA_HEAP_ALIGN
/* not page-aligned at either end, so that edge pages are shared */
#define START	(3 * PAGE + 3 * G)
#define END	(START + (8u << 20) - 5 * G)
#define NGRAN	(END / G)
#define MAXLIVE	(1 << 18)	/* more than the granules */

struct model {
	struct shca_heap h;
	unsigned char *mem;	/* the arena, [0, END) */
	int32_t *own;		/* granule -> live index, -1 free */
	struct {
		uint64_t off, len;
		struct shca_heap_blk *blk;	/* its node (nohash) */
		unsigned char tag;
	} *live;
	int nlive;
	uint64_t rng;
	bool nohash;	/* shca_heap_init_nohash: blocks freed by node */
};

static uint64_t rnd(struct model *m)
{
	m->rng ^= m->rng << 13;
	m->rng ^= m->rng >> 7;
	m->rng ^= m->rng << 17;
	return m->rng;
}

static void model_init_as(struct model *m, uint64_t seed, bool nohash)
{
	uint64_t g;

	memset(m, 0, sizeof(*m));
	m->nohash = nohash;
	m->rng = seed * 0x9e3779b97f4a7c15ull + 1;
	m->mem = calloc(1, END);
	m->own = malloc(NGRAN * sizeof(*m->own));
	m->live = calloc(MAXLIVE, sizeof(*m->live));
	ASSERT_NOT_NULL(m->live);
	ASSERT_NOT_NULL(m->mem);
	ASSERT_NOT_NULL(m->own);
	for (g = 0; g < NGRAN; g++)
		m->own[g] = -1;
	if (nohash)
		ASSERT_EQ(shca_heap_init_nohash(&m->h, START, END, PAGE), 0);
	else
		ASSERT_EQ(shca_heap_init(&m->h, START, END, PAGE), 0);
}

static void model_init(struct model *m, uint64_t seed)
{
	model_init_as(m, seed, false);
}

static void model_fini(struct model *m)
{
	shca_heap_fini(&m->h);
	free(m->mem);
	free(m->own);
	free(m->live);
}

/* The longest run of free granules in the model, in bytes. */
static uint64_t model_largest(const struct model *m)
{
	uint64_t g, run = 0, best = 0;

	for (g = START / G; g < END / G; g++) {
		if (m->own[g] >= 0) {	/* skip the block */
			g = (m->live[m->own[g]].off +
			     m->live[m->own[g]].len) / G - 1;
			run = 0;
			continue;
		}
		run++;
		best = run > best ? run : best;
	}
	return best * G;
}

/* Every byte of p[0, len) is c: p[0] is c and each byte equals the next
 * (memcmp: a byte loop takes minutes in the sanitizer builds, -O0). */
static bool all_of(const unsigned char *p, uint64_t len, unsigned char c)
{
	return !len || (p[0] == c && !memcmp(p, p + 1, len - 1));
}

static bool all_zero(const unsigned char *p, uint64_t len)
{
	return all_of(p, len, 0);
}

static void apply_clear(struct model *m, const struct shca_heap_todo *t,
			uint64_t off, uint64_t len)
{
	int i;

	for (i = 0; i < 2; i++) {
		if (!t->clear[i].len)
			continue;
		/* a clear stays inside the block it was given for */
		ASSERT_GE(t->clear[i].off, off);
		ASSERT_LE(t->clear[i].off + t->clear[i].len, off + len);
		memset(m->mem + t->clear[i].off, 0, t->clear[i].len);
	}
}

/* Alloc len; false if the heap said no (checked against the model). */
static bool model_alloc(struct model *m, uint64_t len)
{
	struct shca_heap_todo t;
	uint64_t off, n = (len + G - 1) / G * G, g;
	struct shca_heap_blk *blk = NULL;
	bool oom;
	int i = m->nlive;

	if (m->nohash) {
		/* offsets alone serve no one: nothing could free them */
		ASSERT_EQ(shca_heap_alloc(&m->h, len, &t, &oom), 0);
		off = shca_heap_alloc_blk(&m->h, len, &t, &oom, &blk);
		ASSERT(!off == !blk);
	} else {
		off = shca_heap_alloc(&m->h, len, &t, &oom);
	}
	ASSERT(!oom);
	if (!off) {
		/* it may fail only when no free run is long enough */
		ASSERT_LT(model_largest(m), n);
		return false;
	}
	ASSERT_LT(i, MAXLIVE);
	ASSERT_EQ(off % G, 0);
	ASSERT_GE(off, START);
	ASSERT_LE(off + n, END);
	ASSERT_EQ(shca_heap_size(&m->h, off), m->nohash ? 0 : n);
	for (g = off / G; g < (off + n) / G; g++) {
		ASSERT_EQ(m->own[g], -1);	/* no overlap */
		m->own[g] = i;
	}
	apply_clear(m, &t, off, n);
	ASSERT(all_zero(m->mem + off, n));	/* zeroed, as arena.c says */
	m->live[i].off = off;
	m->live[i].len = n;
	m->live[i].blk = blk;
	m->live[i].tag = (unsigned char)(rnd(m) | 1);
	memset(m->mem + off, m->live[i].tag, n);
	m->nlive++;
	return true;
}

static void model_free(struct model *m, int i)
{
	struct shca_heap_todo t;
	uint64_t off = m->live[i].off, n = m->live[i].len, g, k;
	int last = m->nlive - 1;

	/* nobody wrote over it while it lived (the byte loop only to name
	 * the first one that differs) */
	if (!all_of(m->mem + off, n, m->live[i].tag))
		for (k = 0; k < n; k++)
			ASSERT_EQ(m->mem[off + k], m->live[i].tag);
	if (m->nohash)
		ASSERT_EQ(shca_heap_free_blk(&m->h, m->live[i].blk, &t), n);
	else
		ASSERT_EQ(shca_heap_free(&m->h, off, &t), n);
	for (g = off / G; g < (off + n) / G; g++)
		m->own[g] = -1;
	if (t.punch.len) {
		/* whole pages, all free, touching the block */
		ASSERT_EQ(t.punch.off % PAGE, 0);
		ASSERT_EQ(t.punch.len % PAGE, 0);
		ASSERT_LT(t.punch.off, off + n);
		ASSERT_GT(t.punch.off + t.punch.len, off);
		for (g = t.punch.off / G; g < (t.punch.off + t.punch.len) / G;
		     g++)
			ASSERT_EQ(m->own[g], -1);
		memset(m->mem + t.punch.off, 0, t.punch.len);
	}
	/* the last live block takes i's place */
	if (i != last) {
		m->live[i] = m->live[last];
		for (g = m->live[i].off / G;
		     g < (m->live[i].off + m->live[i].len) / G; g++)
			m->own[g] = i;
	}
	m->nlive--;
}

/* A free the heap must refuse, changing nothing. */
static void model_bad_free(struct model *m, uint64_t off)
{
	struct shca_heap_todo t;
	uint64_t used = m->h.used_bytes, nused = m->h.nused;

	ASSERT_EQ(shca_heap_free(&m->h, off, &t), 0);
	ASSERT_EQ(t.punch.len, 0);
	ASSERT_EQ(m->h.used_bytes, used);
	ASSERT_EQ(m->h.nused, nused);
}

static uint64_t random_len(struct model *m)
{
	uint64_t r = rnd(m) % 100;

	if (r < 50)
		return 1 + rnd(m) % 300;		/* QP, RQ headers */
	if (r < 85)
		return 1 + rnd(m) % (64u << 10);	/* rings */
	return (64u << 10) + rnd(m) % (1u << 20);	/* big rings */
}

/* Every whole page of the heap is zero: all free, all punched or clear. */
static void assert_new(struct model *m)
{
	uint64_t a = (START + PAGE - 1) / PAGE * PAGE, b = END / PAGE * PAGE;

	ASSERT_EQ(shca_heap_check(&m->h), 0);
	ASSERT_EQ(m->h.nused, 0);
	ASSERT_EQ(m->h.nfree, 1);
	ASSERT_EQ(m->h.used_bytes, 0);
	ASSERT_EQ(shca_heap_largest(&m->h), END - START);
	ASSERT(all_zero(m->mem + a, b - a));
}

static void run_seed_as(uint64_t seed, int ops, bool nohash)
{
	struct model m;
	int op, i;

	model_init_as(&m, seed, nohash);
	for (op = 0; op < ops; op++) {
		/* phases: mostly alloc, then mostly free, and again */
		bool filling = (op / 2000) % 2 == 0;
		uint64_t r = rnd(&m) % 100;

		if (m.nlive && r < (filling ? 30u : 75u)) {
			model_free(&m, (int)(rnd(&m) % (uint64_t)m.nlive));
		} else if (m.nlive && r < (filling ? 33u : 78u)) {
			i = (int)(rnd(&m) % (uint64_t)m.nlive);
			/* inside a block, past the end, a stranger */
			if (m.live[i].len > G)
				model_bad_free(&m, m.live[i].off + G);
			model_bad_free(&m, END + G);
			model_bad_free(&m, START - G);
		} else {
			model_alloc(&m, random_len(&m));
		}
		if (op % 97 == 0)
			ASSERT_EQ(shca_heap_check(&m.h), 0);
	}
	ASSERT_EQ(shca_heap_check(&m.h), 0);
	while (m.nlive) {
		uint64_t off;

		i = (int)(rnd(&m) % (uint64_t)m.nlive);
		off = m.live[i].off;
		model_free(&m, i);
		model_bad_free(&m, off);	/* a double free */
	}
	assert_new(&m);
	model_fini(&m);
}

static void run_seed(uint64_t seed, int ops)
{
	run_seed_as(seed, ops, false);
}

TEST(random_against_model)
{
	uint64_t seed;

	for (seed = 1; seed <= 8; seed++)
		run_seed(seed, 12000);
}

/* The same without the hash (shm/seg.c's pool): blocks freed by their
 * node; a free by offset is refused, as it cannot be checked.  Two seeds:
 * the whole test stays within its ctest bound under ThreadSanitizer. */
TEST(random_against_model_nohash)
{
	uint64_t seed;

	for (seed = 1; seed <= 2; seed++)
		run_seed_as(seed, 12000, true);
}

/* After any history and a full free, the heap hands out what a new one
 * does: the same offsets, the same count until it is full. */
TEST(churned_equals_new)
{
	struct model used, fresh;
	uint64_t a, b;
	int n = 0;

	model_init(&used, 42);
	for (n = 0; n < 3000; n++)
		model_alloc(&used, random_len(&used));
	while (used.nlive)
		model_free(&used, (int)(rnd(&used) % (uint64_t)used.nlive));
	assert_new(&used);
	model_init(&fresh, 43);
	for (n = 0;; n++) {
		a = model_alloc(&used, 33000) ? used.live[n].off : 0;
		b = model_alloc(&fresh, 33000) ? fresh.live[n].off : 0;
		ASSERT_U64_EQ(a, b);
		if (!a)
			break;
	}
	ASSERT_GT(n, 200);
	model_fini(&used);
	model_fini(&fresh);
}

/* Every other smallest block freed: many holes, none long enough for two
 * granules until their neighbours go too. */
TEST(holes_merge)
{
	struct model m;
	uint64_t i, n;

	model_init(&m, 7);
	while (m.nlive < MAXLIVE && model_alloc(&m, 1))
		;
	n = (uint64_t)m.nlive;
	ASSERT_EQ(n, (END - START) / G);	/* full */
	/* the live table is in address order: free the odd ones, from the
	 * top so that model_free's swap keeps it so */
	for (i = n - 1 - n % 2; i >= 1 && i < n; i -= 2)
		model_free(&m, (int)i);
	ASSERT_EQ(shca_heap_check(&m.h), 0);
	ASSERT_EQ(shca_heap_largest(&m.h), G);
	ASSERT(!model_alloc(&m, G + 1));
	while (m.nlive)
		model_free(&m, m.nlive - 1);
	assert_new(&m);
	model_fini(&m);
}

TEST(edges)
{
	struct shca_heap h;
	struct shca_heap_todo t;
	uint64_t off;
	bool oom;

	ASSERT_EQ(shca_heap_init(&h, START + 1, END, PAGE), -EINVAL);
	ASSERT_EQ(shca_heap_init(&h, START, END, PAGE + 1), -EINVAL);
	ASSERT_EQ(shca_heap_init(&h, END, START, PAGE), -EINVAL);
	ASSERT_EQ(shca_heap_init(&h, START, END, PAGE), 0);
	ASSERT_EQ(shca_heap_alloc(&h, 0, &t, &oom), 0);
	ASSERT_EQ(shca_heap_alloc(&h, END - START + 1, &t, &oom), 0);
	ASSERT_EQ(shca_heap_alloc(&h, UINT64_MAX, &t, &oom), 0);
	ASSERT(!oom);
	/* the whole heap in one block, then nothing more */
	off = shca_heap_alloc(&h, END - START, &t, &oom);
	ASSERT_EQ(off, START);
	ASSERT_EQ(shca_heap_largest(&h), 0);
	ASSERT_EQ(shca_heap_alloc(&h, 1, &t, &oom), 0);
	ASSERT_EQ(shca_heap_free(&h, 0, &t), 0);
	ASSERT_EQ(shca_heap_free(&h, START, &t), END - START);
	/* pages wholly inside the heap, nothing outside */
	ASSERT_EQ(t.punch.off, 4 * PAGE);
	ASSERT_EQ(t.punch.off + t.punch.len, END / PAGE * PAGE);
	ASSERT_EQ(shca_heap_free(&h, START, &t), 0);
	ASSERT_EQ(shca_heap_check(&h), 0);
	shca_heap_fini(&h);
}
