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

/* A fake arena: header, MR table and key index, sparse. */
static void *fake_arena(size_t *size)
{
	struct shca_arena_hdr *h;
	size_t mr = (size_t)SHCA_ARENA_MR_ENTRIES * sizeof(struct shca_mr_shm);
	size_t idx = (size_t)SHCA_MR_INDEX_GROUPS * SHCA_MR_INDEX_WAYS * 8;
	void *base;

	*size = 4096 + mr + idx;
	base = mmap(NULL, *size, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	ASSERT(base != MAP_FAILED);
	h = base;
	h->size = *size;
	h->mr_table_off = 4096;
	h->mr_index_off = 4096 + mr;
	return base;
}

TEST(index_add_find_del)
{
	size_t size;
	void *a = fake_arena(&size);
	uint32_t key = 0x8badf00d, other, n;

	ASSERT_EQ(shca_mr_index_find(a, size, key), 0u);
	ASSERT(shca_mr_index_room(a, size, key));
	ASSERT_EQ(shca_mr_index_add(a, size, key, 7), 0);
	ASSERT_EQ(shca_mr_index_find(a, size, key), 7u);
	/* keys of the same group fill it: then there is no room */
	for (other = 1, n = 1; n < SHCA_MR_INDEX_WAYS; other++)
		if (other != key && shca_mr_index_group(other) ==
					    shca_mr_index_group(key)) {
			ASSERT_EQ(shca_mr_index_add(a, size, other, 100 + n),
				  0);
			n++;
		}
	ASSERT(!shca_mr_index_room(a, size, key));
	ASSERT_EQ(shca_mr_index_add(a, size, key ^ 1, 9) == -ENOSPC ||
		  shca_mr_index_group(key ^ 1) != shca_mr_index_group(key),
		  1);
	ASSERT_EQ(shca_mr_index_find(a, size, key), 7u);
	shca_mr_index_del(a, size, key);
	ASSERT_EQ(shca_mr_index_find(a, size, key), 0u);
	ASSERT(shca_mr_index_room(a, size, key));
	/* key 0 is never found, never added */
	ASSERT_EQ(shca_mr_index_find(a, size, 0), 0u);
	ASSERT_EQ(shca_mr_index_add(a, size, 0, 3), -EINVAL);
	munmap(a, size);
}

TEST(index_reads_hostile_bytes_safely)
{
	struct shca_arena_hdr *h;
	size_t size;
	void *a = fake_arena(&size);
	uint64_t *g;
	uint32_t key = 0x12345678, i;

	h = a;
	/* every word of the key's group names the key, slots out of range */
	g = (uint64_t *)((char *)a + h->mr_index_off) +
	    (size_t)shca_mr_index_group(key) * SHCA_MR_INDEX_WAYS;
	for (i = 0; i < SHCA_MR_INDEX_WAYS; i++)
		g[i] = (uint64_t)key << 32 | (0xfff00000u + i);
	ASSERT_EQ(shca_mr_index_find(a, size, key) >= SHCA_ARENA_MR_ENTRIES,
		  1);
	ASSERT_NULL(shca_mr_table_entry(a, size,
					shca_mr_index_find(a, size, key)));
	ASSERT_NULL(shca_mr_table_entry(a, size, 0));
	ASSERT_NOT_NULL(shca_mr_table_entry(a, size, 1));
	/* offsets out of the arena, unaligned, wrapping: nothing read */
	h->mr_index_off = size - 64;
	ASSERT_EQ(shca_mr_index_find(a, size, key), 0u);
	h->mr_index_off = UINT64_MAX - 63;
	ASSERT_EQ(shca_mr_index_find(a, size, key), 0u);
	h->mr_index_off = 4096 + 8;
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
