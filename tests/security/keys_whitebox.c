// SPDX-License-Identifier: MIT
/*
 * The key generator and the arena's key index, from inside (keys.cmake
 * builds verbs/mr_keys.c here with a quarantine of QUARANTINE keys and
 * shm/mrkey.c as they are).
 *
 * The random source is this file's: it draws from a pool of POOL values
 * (0 and 0xffffffff among them), so that a generator that hands out a
 * reserved value, a live key or a recently retired one does so within a
 * few hundred draws, every run.  The key index is read from hostile
 * bytes: a header with offsets out of the arena, groups full of words
 * that name the key with slots out of range.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "harness.h"
#include "shca.h"

#ifndef SHCA_MR_KEY_QUARANTINE
#error "keys.cmake sets the quarantine"
#endif
#define QUARANTINE	SHCA_MR_KEY_QUARANTINE
#define POOL		64u
#define LIVE_MAX	8
#define ROUNDS		20000

static uint64_t rng = 0x2545f4914f6cdd1dull;

/* The pool: 0, 1 .. POOL - 2, 0xffffffff. */
uint32_t shca_random_u32(void)
{
	uint32_t v;

	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	v = (uint32_t)(rng % POOL);
	return v == POOL - 1 ? UINT32_MAX : v;
}

static char obj[ROUNDS];	/* the "MRs": their addresses */

TEST(generator_refuses_reserved_live_and_quarantined)
{
	uint32_t live[LIVE_MAX], retired[QUARANTINE], seen[POOL];
	void *val[LIVE_MAX];
	uint32_t nretired = 0, reused = 0, i, j, r;
	int nlive = 0;

	memset(seen, 0, sizeof(seen));
	for (r = 0; r < ROUNDS; r++) {
		uint32_t key;

		if (nlive == LIVE_MAX || (nlive && (rng & 1))) {
			/* deregistration: the key goes to the quarantine */
			i = (uint32_t)(rng >> 8) % (uint32_t)nlive;
			ASSERT(shca_mr_key_find(live[i]) == val[i]);
			shca_mr_key_retire(live[i]);
			ASSERT_NULL(shca_mr_key_find(live[i]));
			retired[nretired++ % QUARANTINE] = live[i];
			live[i] = live[nlive - 1];
			val[i] = val[nlive - 1];
			nlive--;
			continue;
		}
		ASSERT_EQ(shca_mr_key_new(&obj[r], NULL, NULL, &key), 0);
		ASSERT_NE(key, 0u);
		ASSERT_NE(key, UINT32_MAX);
		for (j = 0; j < (uint32_t)nlive; j++)
			ASSERT_NE(key, live[j]);
		/* retired[] holds the last QUARANTINE retired keys */
		for (j = 0; j < nretired && j < QUARANTINE; j++)
			ASSERT_NE(key, retired[j]);
		ASSERT_LT(key, POOL);
		if (seen[key]++)
			reused++;
		live[nlive] = key;
		val[nlive++] = &obj[r];
		ASSERT(shca_mr_key_find(key) == &obj[r]);
	}
	/* the quarantine is a window: keys come back after it (the pool
	 * is small), the generator never ran dry */
	ASSERT_GT(reused, 1000u);
	ASSERT_NULL(shca_mr_key_find(0));
	ASSERT_NULL(shca_mr_key_find(UINT32_MAX));
}

/* A fake arena: header, MR table and key index, sparse; its index
 * initialised by its owner, x. */
static void *fake_arena(size_t *size, struct shca_mr_index *x)
{
	struct shca_arena_hdr *h;
	size_t mr = (size_t)SHCA_ARENA_MR_ENTRIES * sizeof(struct shca_mr_shm);
	void *base;

	*size = 4096 + mr + SHCA_MR_INDEX_BYTES;
	base = mmap(NULL, *size, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	ASSERT(base != MAP_FAILED);
	h = base;
	h->size = *size;
	h->mr_table_off = 4096;
	h->mr_index_off = 4096 + mr;
	shca_mr_index_init(x, base, h->mr_index_off);
	return base;
}

/* The group of key in the index's current region. */
static uint64_t *group_now(void *a, uint32_t key)
{
	struct shca_arena_hdr *h = a;
	unsigned int s = h->mr_index_shift;

	return (uint64_t *)((char *)a + h->mr_index_off +
			    shca_mr_index_region(s)) +
	       (size_t)shca_mr_index_group(key, s) * SHCA_MR_INDEX_WAYS;
}

TEST(index_add_find_del)
{
	struct shca_mr_index x;
	size_t size;
	void *a = fake_arena(&size, &x);
	uint32_t key = 0x8badf00d, other, n;
	unsigned int s = x.shift;

	ASSERT_EQ(s, (unsigned int)SHCA_MR_INDEX_MIN_SHIFT);
	ASSERT_EQ(shca_mr_index_find(a, size, key), 0u);
	ASSERT(shca_mr_index_room(&x, key));
	ASSERT_EQ(shca_mr_index_add(&x, key, 7), 0);
	ASSERT_EQ(shca_mr_index_find(a, size, key), 7u);
	/* keys of the same group fill it: then there is no room */
	for (other = 1, n = 1; n < SHCA_MR_INDEX_WAYS; other++)
		if (other != key && shca_mr_index_group(other, s) ==
					    shca_mr_index_group(key, s)) {
			ASSERT_EQ(shca_mr_index_add(&x, other, 100 + n), 0);
			n++;
		}
	ASSERT_EQ(x.shift, s);	/* 8 words: far from half of 512 */
	ASSERT(!shca_mr_index_room(&x, key));
	ASSERT_EQ(shca_mr_index_add(&x, key ^ 1, 9) == -ENOSPC ||
		  shca_mr_index_group(key ^ 1, s) !=
			  shca_mr_index_group(key, s),
		  1);
	ASSERT_EQ(shca_mr_index_find(a, size, key), 7u);
	shca_mr_index_del(&x, key);
	ASSERT_EQ(shca_mr_index_find(a, size, key), 0u);
	ASSERT(shca_mr_index_room(&x, key));
	/* key 0 is never found, never added */
	ASSERT_EQ(shca_mr_index_find(a, size, 0), 0u);
	ASSERT_EQ(shca_mr_index_add(&x, 0, 3), -EINVAL);
	munmap(a, size);
}

/*
 * The index doubles when half full and every live key is found in the
 * new region; a region left behind is never written again (a reader
 * still inside it reads what was there when it started); removed keys
 * are gone from the current region.
 */
TEST(index_grows_with_the_keys)
{
	enum { N = 20000 };
	static uint32_t keys[N];
	struct shca_mr_index x;
	size_t size;
	char *a = fake_arena(&size, &x);
	struct shca_arena_hdr *h = (struct shca_arena_hdr *)a;
	uint64_t first = 64ull << SHCA_MR_INDEX_MIN_SHIFT;
	char *before = malloc(first);
	uint32_t i, n = 0, r = 0x12345u;
	unsigned int grew = 0, s = x.shift;

	ASSERT_NOT_NULL(before);
	while (n < N) {
		r = r * 1664525u + 1013904223u;	/* any keys will do */
		if (!r || shca_mr_index_find(a, size, r) ||
		    !shca_mr_index_room(&x, r))
			continue;
		ASSERT_EQ(shca_mr_index_add(&x, r, n + 1), 0);
		keys[n++] = r;
		if (x.shift != s) {
			/* doubled at half: every key so far is there */
			ASSERT_EQ(x.shift, s + 1);
			ASSERT_EQ(n - 1, (uint32_t)SHCA_MR_INDEX_WAYS / 2 << s);
			ASSERT_EQ(h->mr_index_shift, x.shift);
			for (i = 0; i < n; i++)
				ASSERT_EQ(shca_mr_index_find(a, size, keys[i]),
					  i + 1);
			if (s == SHCA_MR_INDEX_MIN_SHIFT)
				memcpy(before, a + h->mr_index_off, first);
			s = x.shift;
			grew++;
		}
	}
	/* 20,000 keys: 2^13 groups of 8 words (doubled at 256, 512, ...
	 * 16,384 words taken) */
	ASSERT_EQ(x.shift, 13u);
	ASSERT_EQ(grew, 13u - SHCA_MR_INDEX_MIN_SHIFT);
	ASSERT_EQ(x.used, (uint32_t)N);
	for (i = 0; i < N; i += 2)
		shca_mr_index_del(&x, keys[i]);
	for (i = 0; i < N; i++)
		ASSERT_EQ(shca_mr_index_find(a, size, keys[i]),
			  i % 2 ? i + 1 : 0);
	ASSERT_EQ(x.used, (uint32_t)N / 2);
	/* the first region is as it was when the index left it */
	ASSERT(!memcmp(before, a + h->mr_index_off, first));
	free(before);
	munmap(a, size);
}

TEST(index_reads_hostile_bytes_safely)
{
	struct shca_arena_hdr *h;
	struct shca_mr_index x;
	size_t size;
	void *a = fake_arena(&size, &x);
	uint64_t *g;
	uint32_t key = 0x12345678, i;

	h = a;
	/* every word of the key's group names the key, slots out of range */
	g = group_now(a, key);
	for (i = 0; i < SHCA_MR_INDEX_WAYS; i++)
		g[i] = (uint64_t)key << 32 | (0xfff00000u + i);
	ASSERT_EQ(shca_mr_index_find(a, size, key) >= SHCA_ARENA_MR_ENTRIES,
		  1);
	ASSERT_NULL(shca_mr_table_entry(a, size,
					shca_mr_index_find(a, size, key)));
	ASSERT_NULL(shca_mr_table_entry(a, size, 0));
	ASSERT_NOT_NULL(shca_mr_table_entry(a, size, 1));
	/* a size out of the regions: nothing read */
	h->mr_index_shift = SHCA_MR_INDEX_MIN_SHIFT - 1;
	ASSERT_EQ(shca_mr_index_find(a, size, key), 0u);
	h->mr_index_shift = SHCA_MR_INDEX_MAX_SHIFT + 1;
	ASSERT_EQ(shca_mr_index_find(a, size, key), 0u);
	h->mr_index_shift = UINT32_MAX;
	ASSERT_EQ(shca_mr_index_find(a, size, key), 0u);
	h->mr_index_shift = SHCA_MR_INDEX_MAX_SHIFT;
	ASSERT_EQ(shca_mr_index_find(a, size, key), 0u);	/* empty */
	h->mr_index_shift = SHCA_MR_INDEX_MIN_SHIFT;
	ASSERT(shca_mr_index_find(a, size, key) != 0);
	/* offsets out of the arena, unaligned, wrapping: nothing read */
	h->mr_index_off = size - 64;
	ASSERT_EQ(shca_mr_index_find(a, size, key), 0u);
	h->mr_index_off = UINT64_MAX - 63;
	ASSERT_EQ(shca_mr_index_find(a, size, key), 0u);
	h->mr_index_off = x.off + 8;
	ASSERT_EQ(shca_mr_index_find(a, size, key), 0u);
	/* the owner's writes go where its own record says, whatever the
	 * header says now */
	ASSERT(!shca_mr_index_room(&x, key));
	h->mr_index_off = x.off;
	shca_mr_index_del(&x, key);
	ASSERT_EQ(shca_mr_index_find(a, size, key), 0u);
	h->mr_table_off = size;
	ASSERT_NULL(shca_mr_table_entry(a, size, 1));
	h->mr_table_off = 0;
	ASSERT_NULL(shca_mr_table_entry(a, size, 1));
	munmap(a, size);
}

/* A writer that never finishes (seq odd for ever): the read gives up. */
TEST(seqlock_read_is_bounded)
{
	struct shca_mr_shm e, out;

	memset(&e, 0, sizeof(e));
	e.seq = 1;
	e.key = 42;
	ASSERT(!shca_mr_shm_read(&e, &out));
	ASSERT_EQ(out.key, 0u);
	e.seq = 2;
	ASSERT(shca_mr_shm_read(&e, &out));
	ASSERT_EQ(out.key, 42u);
}
