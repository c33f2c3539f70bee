// SPDX-License-Identifier: MIT
/*
 * The MR key index in the arena (arena.h): from a whole 32-bit key to the
 * MR table slot that holds its MR.
 *
 * Keys carry no index bits (verbs/mr_keys.c draws them at random), so the
 * slot has to be looked up.  The index is an array of 2^shift groups of
 * SHCA_MR_INDEX_WAYS 64-bit words, one cache line each; a key lives in
 * the group its hash names, or nowhere.  The owner only hands out keys
 * whose group has a free word, which is what keeps a look-up to one
 * group: no probe sequence, no tombstones, nothing a peer that rewrote
 * the index (it is in shared memory) can make long.
 *
 * Sized to the keys that exist (issue 12): the index starts at one page
 * and doubles when half its words are taken.  A fixed index of the
 * largest size spread the first keys of a process over 4,096 pages, and
 * every registration paid a first-touch fault of shared memory.  Each
 * size has its own region of the index area (the smaller ones first), so
 * a doubling never moves a word under a reader: the owner fills the next
 * region with the words of the current one, then publishes its shift in
 * the header (release).  A reader loads the shift (acquire) for every
 * look-up; one that still reads the region before is reading words that
 * were all there when it started, which is a look-up made a moment
 * earlier.  The regions before stay as they were and are never written
 * again (never reused: the shift only grows).
 *
 * Words: 0 free, else key << 32 | slot, stored and loaded whole (atomic),
 * so a reader sees a key with its own slot or nothing.  Ordering: the
 * owner adds the word before it publishes the MR table entry, and
 * removes it before it clears the entry; a reader checks the entry's key
 * (seqlock) in any case, so a word that points at another MR's entry, or
 * at none (a word left in an earlier region too), finds nothing.
 *
 * The owner keeps the index's offset, shift and count in its own memory
 * (struct shca_mr_index): a peer can write the arena's header, never
 * where the owner's index writes go.
 */
#include <errno.h>
#include <string.h>

#include "arena.h"

#define GROUP_BYTES	(SHCA_MR_INDEX_WAYS * sizeof(uint64_t))
_Static_assert(SHCA_MR_INDEX_GROUPS == 1u << SHCA_MR_INDEX_MAX_SHIFT,
	       "the largest region has SHCA_MR_INDEX_GROUPS groups");
_Static_assert(GROUP_BYTES == 64, "a group is a cache line");

/* Fibonacci hashing: the top shift bits of key times 2^32 / phi.  A
 * group of 2^s groups splits into groups 2g and 2g + 1 of 2^(s+1). */
uint32_t shca_mr_index_group(uint32_t key, unsigned int shift)
{
	return (key * 0x9e3779b1u) >> (32 - shift);
}

uint64_t shca_mr_index_region(unsigned int shift)
{
	return ((1ull << shift) - (1ull << SHCA_MR_INDEX_MIN_SHIFT)) *
	       GROUP_BYTES;
}

static uint64_t *group_at(void *base, uint64_t off, unsigned int shift,
			  uint32_t key)
{
	return (uint64_t *)((char *)base + off + shca_mr_index_region(shift) +
			    (size_t)shca_mr_index_group(key, shift) *
				    GROUP_BYTES);
}

static uint64_t word_of(uint32_t key, uint32_t slot)
{
	return (uint64_t)key << 32 | slot;
}

/* A reader: the published region, checked like everything of a peer. */
uint32_t shca_mr_index_find(const void *base, size_t size, uint32_t key)
{
	const struct shca_arena_hdr *h = shca_arena_hdr(base);
	uint64_t off = __atomic_load_n(&h->mr_index_off, __ATOMIC_RELAXED);
	unsigned int shift =
		__atomic_load_n(&h->mr_index_shift, __ATOMIC_ACQUIRE);
	uint64_t *g;
	unsigned int i;

	if (!key || !off || off > size || off & 63 ||
	    SHCA_MR_INDEX_BYTES > size - off ||
	    shift < SHCA_MR_INDEX_MIN_SHIFT || shift > SHCA_MR_INDEX_MAX_SHIFT)
		return 0;
	g = group_at((void *)base, off, shift, key);
	for (i = 0; i < SHCA_MR_INDEX_WAYS; i++) {
		uint64_t w = __atomic_load_n(&g[i], __ATOMIC_ACQUIRE);

		if ((uint32_t)(w >> 32) == key && (uint32_t)w)
			return (uint32_t)w;
	}
	return 0;
}

void shca_mr_index_init(struct shca_mr_index *x, void *base, uint64_t off)
{
	x->base = base;
	x->off = off;
	x->shift = SHCA_MR_INDEX_MIN_SHIFT;
	x->used = 0;
	memset((char *)base + off, 0, GROUP_BYTES << x->shift);
	__atomic_store_n(&shca_arena_hdr(base)->mr_index_shift, x->shift,
			 __ATOMIC_RELEASE);
}

static uint64_t *owner_group(const struct shca_mr_index *x, uint32_t key)
{
	return group_at(x->base, x->off, x->shift, key);
}

bool shca_mr_index_room(const struct shca_mr_index *x, uint32_t key)
{
	uint64_t *g = owner_group(x, key);
	unsigned int i;

	for (i = 0; i < SHCA_MR_INDEX_WAYS; i++)
		if (!__atomic_load_n(&g[i], __ATOMIC_RELAXED))
			return true;
	return false;
}

/*
 * Double the index: the next region gets every word of the current one
 * (group g's go to 2g and 2g + 1, so none overflows), then readers are
 * sent there.  A word a peer scribbled goes along, as it would have
 * stayed; the count is what was moved.
 */
static void grow(struct shca_mr_index *x)
{
	unsigned int s = x->shift, i;
	uint32_t g, n = 0;
	char *to = (char *)x->base + x->off + shca_mr_index_region(s + 1);
	uint64_t *from = (uint64_t *)((char *)x->base + x->off +
				      shca_mr_index_region(s));

	memset(to, 0, GROUP_BYTES << (s + 1));
	for (g = 0; g < 1u << s; g++)
		for (i = 0; i < SHCA_MR_INDEX_WAYS; i++) {
			uint64_t w = __atomic_load_n(
				&from[(size_t)g * SHCA_MR_INDEX_WAYS + i],
				__ATOMIC_RELAXED);
			uint64_t *d;
			unsigned int j;

			if (!w)
				continue;
			d = group_at(x->base, x->off, s + 1,
				     (uint32_t)(w >> 32));
			for (j = 0; j < SHCA_MR_INDEX_WAYS &&
				    __atomic_load_n(&d[j], __ATOMIC_RELAXED);
			     j++)
				;
			/* a scribbled word of another group may find its
			 * new group full: it was never a real key's */
			if (j < SHCA_MR_INDEX_WAYS) {
				__atomic_store_n(&d[j], w, __ATOMIC_RELAXED);
				n++;
			}
		}
	x->shift = s + 1;
	x->used = n;
	__atomic_store_n(&shca_arena_hdr(x->base)->mr_index_shift, s + 1,
			 __ATOMIC_RELEASE);
}

int shca_mr_index_add(struct shca_mr_index *x, uint32_t key, uint32_t slot)
{
	uint64_t *g;
	unsigned int i;

	if (!key || !slot)
		return -EINVAL;
	/* half full: double (a key that had room keeps it: its group's
	 * words are split between two) */
	if (x->used >= (uint32_t)SHCA_MR_INDEX_WAYS / 2 << x->shift &&
	    x->shift < SHCA_MR_INDEX_MAX_SHIFT)
		grow(x);
	g = owner_group(x, key);
	for (i = 0; i < SHCA_MR_INDEX_WAYS; i++) {
		uint64_t zero = 0;

		/* compare-and-swap: a word a peer scribbled on is skipped,
		 * never overwritten half-way */
		if (__atomic_compare_exchange_n(&g[i], &zero,
						word_of(key, slot), false,
						__ATOMIC_RELEASE,
						__ATOMIC_RELAXED)) {
			x->used++;
			return 0;
		}
	}
	return -ENOSPC;
}

void shca_mr_index_prefetch(const struct shca_mr_index *x, uint32_t key)
{
	__builtin_prefetch(owner_group(x, key), 1, 3);
}

void shca_mr_index_del(struct shca_mr_index *x, uint32_t key)
{
	uint64_t *g;
	unsigned int i;

	if (!key)
		return;
	g = owner_group(x, key);
	for (i = 0; i < SHCA_MR_INDEX_WAYS; i++) {
		uint64_t w = __atomic_load_n(&g[i], __ATOMIC_RELAXED);

		if ((uint32_t)(w >> 32) == key) {
			__atomic_store_n(&g[i], 0, __ATOMIC_RELEASE);
			if (x->used)
				x->used--;
		}
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
