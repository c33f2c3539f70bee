// SPDX-License-Identifier: MIT
/*
 * The MR key index in the arena (arena.h): from a whole 32-bit key to the
 * MR table slot that holds its MR.
 *
 * Keys carry no index bits (verbs/mr_keys.c draws them at random), so the
 * slot has to be looked up.  The index is a fixed array of groups of
 * SHCA_MR_INDEX_WAYS 64-bit words, one cache line each; a key lives in
 * the group its hash names, or nowhere.  The owner only hands out keys
 * whose group has a free word, which is what keeps a look-up to one
 * group: no probe sequence, no tombstones, nothing a peer that rewrote
 * the index (it is in shared memory) can make long.
 *
 * Words: 0 free, else key << 32 | slot, stored and loaded whole (atomic),
 * so a reader sees a key with its own slot or nothing.  Ordering: the
 * owner adds the word before it publishes the MR table entry, and
 * removes it before it clears the entry; a reader checks the entry's key
 * (seqlock) in any case, so a word that points at another MR's entry, or
 * at none, finds nothing.
 */
#include <errno.h>

#include "arena.h"

#define GROUP_SHIFT	18
_Static_assert(SHCA_MR_INDEX_GROUPS == 1u << GROUP_SHIFT,
	       "the hash yields GROUP_SHIFT bits");

/* Fibonacci hashing: the top bits of key times 2^32 / phi. */
uint32_t shca_mr_index_group(uint32_t key)
{
	return (key * 0x9e3779b1u) >> (32 - GROUP_SHIFT);
}

static uint64_t *group_of(const void *base, size_t size, uint32_t key)
{
	const struct shca_arena_hdr *h = shca_arena_hdr(base);
	uint64_t off = __atomic_load_n(&h->mr_index_off, __ATOMIC_RELAXED);
	size_t glen = SHCA_MR_INDEX_WAYS * sizeof(uint64_t);

	/* a peer's header is checked like everything else in its arena */
	if (!off || off > size || off & 63 ||
	    (uint64_t)SHCA_MR_INDEX_GROUPS * glen > size - off)
		return NULL;
	return (uint64_t *)((char *)base + off +
			    (size_t)shca_mr_index_group(key) * glen);
}

static uint64_t word_of(uint32_t key, uint32_t slot)
{
	return (uint64_t)key << 32 | slot;
}

uint32_t shca_mr_index_find(const void *base, size_t size, uint32_t key)
{
	uint64_t *g = group_of(base, size, key);
	unsigned int i;

	if (!g || !key)
		return 0;
	for (i = 0; i < SHCA_MR_INDEX_WAYS; i++) {
		uint64_t w = __atomic_load_n(&g[i], __ATOMIC_ACQUIRE);

		if ((uint32_t)(w >> 32) == key && (uint32_t)w)
			return (uint32_t)w;
	}
	return 0;
}

bool shca_mr_index_room(const void *base, size_t size, uint32_t key)
{
	uint64_t *g = group_of(base, size, key);
	unsigned int i;

	if (!g)
		return false;
	for (i = 0; i < SHCA_MR_INDEX_WAYS; i++)
		if (!__atomic_load_n(&g[i], __ATOMIC_RELAXED))
			return true;
	return false;
}

int shca_mr_index_add(void *base, size_t size, uint32_t key, uint32_t slot)
{
	uint64_t *g = group_of(base, size, key);
	unsigned int i;

	if (!g || !key || !slot)
		return -EINVAL;
	for (i = 0; i < SHCA_MR_INDEX_WAYS; i++) {
		uint64_t zero = 0;

		/* compare-and-swap: a word a peer scribbled on is skipped,
		 * never overwritten half-way */
		if (__atomic_compare_exchange_n(&g[i], &zero,
						word_of(key, slot), false,
						__ATOMIC_RELEASE,
						__ATOMIC_RELAXED))
			return 0;
	}
	return -ENOSPC;
}

void shca_mr_index_prefetch(const void *base, size_t size, uint32_t key)
{
	uint64_t *g = group_of(base, size, key);

	if (g)
		__builtin_prefetch(g, 1, 3);
}

void shca_mr_index_del(void *base, size_t size, uint32_t key)
{
	uint64_t *g = group_of(base, size, key);
	unsigned int i;

	if (!g || !key)
		return;
	for (i = 0; i < SHCA_MR_INDEX_WAYS; i++) {
		uint64_t w = __atomic_load_n(&g[i], __ATOMIC_RELAXED);

		if ((uint32_t)(w >> 32) == key)
			__atomic_store_n(&g[i], 0, __ATOMIC_RELEASE);
	}
}

struct shca_mr_shm *shca_mr_table_entry(const void *base, size_t size,
					uint32_t slot)
{
	const struct shca_arena_hdr *h = shca_arena_hdr(base);
	uint64_t off = __atomic_load_n(&h->mr_table_off, __ATOMIC_RELAXED);

	if (!slot || slot >= SHCA_ARENA_MR_ENTRIES || !off || off > size ||
	    off & 7 ||
	    (uint64_t)SHCA_ARENA_MR_ENTRIES * sizeof(struct shca_mr_shm) >
		    size - off)
		return NULL;
	return (struct shca_mr_shm *)((char *)base + off) + slot;
}
