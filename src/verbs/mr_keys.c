// SPDX-License-Identifier: MIT
/*
 * The keys of this process's memory regions: drawn, found, retired.
 *
 * A key (lkey == rkey, as mlx5 and rxe hand out for an MR) is 32 random
 * bits from getrandom(), with no index or counter in it: whoever knows
 * some keys learns nothing about the others.  The generator refuses
 *
 *   - 0 and 0xffffffff (never valid; 0 means "free" in the tables),
 *   - a key in use,
 *   - a key retired less than SHCA_MR_KEY_QUARANTINE deregistrations ago
 *     (the quarantine: a request still in flight with an old key, or a
 *     peer that kept one, meets no new region),
 *   - a key the caller's fits() refuses (the arena's key index has no
 *     room in that key's group: shm/mrkey.c),
 *
 * and draws again; KEY_TRIES draws at most (the refused share is tiny:
 * at the largest MR count half the index is free).
 *
 * The map from key to MR is an open-addressing hash table (linear
 * probing, deletion by backward shift, so no tombstones) that holds the
 * live MRs and, with the value QUARANTINED, the retired keys; a FIFO ring
 * says which retired key leaves the quarantine next.  The caller
 * serializes every call (mr.c's mr_table_lock).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "shca.h"

#ifndef SHCA_MR_KEY_QUARANTINE
#define SHCA_MR_KEY_QUARANTINE	65536u	/* retired keys held back */
#endif
#define KEY_TRIES		1024

static char quarantined_mark;
#define QUARANTINED	((void *)&quarantined_mark)

struct key_slot {
	uint32_t key;		/* 0: empty */
	bool mw;		/* key is an MW's prefix (low byte 0) */
	void *val;		/* the MR or MW, or QUARANTINED */
};

static struct key_slot *map;
static uint32_t map_size;	/* power of two, or 0 */
static uint32_t map_used;	/* live and quarantined */
static uint32_t map_mw;		/* of which MW prefixes: while there is
				 * none, a new MR key needs no second probe
				 * (a cache miss each, issue 12) */

static uint32_t *ring;		/* retired keys, oldest at ring_head */
static uint32_t ring_cap, ring_head, ring_len;

static uint32_t key_hash(uint32_t key)
{
	/* keys are random already; mixing keeps a bad RNG from clustering */
	key ^= key >> 16;
	key *= 0x7feb352du;
	key ^= key >> 15;
	return key;
}

static struct key_slot *map_find_slot(uint32_t key)
{
	uint32_t i, mask = map_size - 1;

	if (!map_size)
		return NULL;
	for (i = key_hash(key) & mask; map[i].key; i = (i + 1) & mask)
		if (map[i].key == key)
			return &map[i];
	return NULL;
}

static void map_put_nogrow(uint32_t key, void *val, bool mw)
{
	uint32_t i, mask = map_size - 1;

	for (i = key_hash(key) & mask; map[i].key; i = (i + 1) & mask)
		;
	map[i].key = key;
	map[i].mw = mw;
	map[i].val = val;
}

/* Room for one more: the table stays at most half full. */
static int map_reserve(void)
{
	struct key_slot *old = map;
	uint32_t osize = map_size, nsize, i;

	if ((uint64_t)(map_used + 1) * 2 <= map_size)
		return 0;
	nsize = map_size ? map_size * 2 : 1024;
	if (!nsize)
		return -ENOMEM;
	map = calloc(nsize, sizeof(*map));
	if (!map) {
		map = old;
		return -ENOMEM;
	}
	map_size = nsize;
	for (i = 0; i < osize; i++)
		if (old[i].key)
			map_put_nogrow(old[i].key, old[i].val, old[i].mw);
	free(old);
	return 0;
}

/* Remove key: later entries of its probe run move back (no tombstone). */
static void map_del(uint32_t key)
{
	struct key_slot *s = map_find_slot(key);
	uint32_t mask = map_size - 1, i, j, home;

	if (!s)
		return;
	i = (uint32_t)(s - map);
	if (map[i].mw)
		map_mw--;
	map[i].key = 0;
	map[i].mw = false;
	map[i].val = NULL;
	map_used--;
	for (j = (i + 1) & mask; map[j].key; j = (j + 1) & mask) {
		home = key_hash(map[j].key) & mask;
		/* can entry j move to the hole at i?  Only if its home is
		 * not in (i, j] going round the table */
		if (((j - home) & mask) >= ((j - i) & mask)) {
			map[i] = map[j];
			map[j].key = 0;
			map[j].mw = false;
			map[j].val = NULL;
			i = j;
		}
	}
}

/* The oldest retired key leaves the quarantine. */
static void ring_pop(void)
{
	map_del(ring[ring_head]);
	ring_head = (ring_head + 1) % ring_cap;
	ring_len--;
}

static bool key_reserved(uint32_t key)
{
	return key == 0 || key == UINT32_MAX;
}

int shca_mr_key_new(void *mr, bool (*fits)(uint32_t key, void *arg),
		    void *arg, uint32_t *out)
{
	uint32_t key;
	int tries, ret;

	ret = map_reserve();
	if (ret)
		return ret;
	for (tries = 0; tries < KEY_TRIES; tries++) {
		key = shca_random_u32();
		if (key_reserved(key) || map_find_slot(key))
			continue;
		/* never under an MW's prefix, live or retired */
		if (map_mw && map_find_slot(key & ~0xffu))
			continue;
		if (fits && !fits(key, arg))
			continue;
		map_put_nogrow(key, mr, false);
		map_used++;
		*out = key;
		return 0;
	}
	return -ENOMEM;
}

/* Is any of the 256 keys of prefix in the map (live or quarantined)? */
static bool prefix_used(uint32_t prefix)
{
	uint32_t t;

	for (t = 0; t < 256; t++)
		if (map_find_slot(prefix | t))
			return true;
	return false;
}

/*
 * An MW's key: the prefix (key & ~0xff) is the MW's for its life, and
 * retired into the quarantine with it; the tag (low byte) is the
 * consumer's, changed at each bind.  The map holds the prefix, so that
 * the MR generator above refuses every key under it.
 */
int shca_mw_key_new(void *mw, bool (*fits)(uint32_t key, void *arg),
		    void *arg, uint32_t *out)
{
	uint32_t key, prefix;
	int tries, ret;

	ret = map_reserve();
	if (ret)
		return ret;
	for (tries = 0; tries < KEY_TRIES; tries++) {
		key = shca_random_u32();
		prefix = key & ~0xffu;
		if (!prefix || key_reserved(prefix | 0xff) ||
		    prefix_used(prefix))
			continue;
		if (fits && !fits(prefix, arg))
			continue;
		map_put_nogrow(prefix, mw, true);
		map_used++;
		map_mw++;
		*out = key;
		return 0;
	}
	return -ENOMEM;
}

/*
 * A registration's key is drawn after the system calls that re-back its
 * pages, a deregistration's retired before them; the map's line (and the
 * arena index's group, mr.c) is random in megabytes, a cache and TLB
 * miss once its turn comes (issue 12).  Asked for early, the miss runs
 * under other work.  A peek at the random pool reveals nothing: the key
 * is the caller's own.
 */
uint32_t shca_mr_key_prefetch(uint32_t key)
{
	if (!key)
		key = shca_random_u32_peek();
	if (map_size)
		__builtin_prefetch(&map[key_hash(key) & (map_size - 1)], 1, 3);
	return key;
}

void *shca_mr_key_find(uint32_t key)
{
	struct key_slot *s = key_reserved(key) ? NULL : map_find_slot(key);

	return s && !s->mw && s->val != QUARANTINED ? s->val : NULL;
}

void *shca_mw_key_find(uint32_t key)
{
	struct key_slot *s = map_find_slot(key & ~0xffu);

	return s && s->mw && s->val != QUARANTINED ? s->val : NULL;
}

void shca_mr_key_retire(uint32_t key)
{
	struct key_slot *s = map_find_slot(key);

	if (!s || s->val == QUARANTINED)
		return;
	if (ring_len == ring_cap && ring_cap < SHCA_MR_KEY_QUARANTINE) {
		/* grow the ring (unrolled so that the oldest is first) */
		uint32_t ncap = ring_cap ? ring_cap * 2 : 256, i;
		uint32_t *n;

		if (ncap > SHCA_MR_KEY_QUARANTINE)
			ncap = SHCA_MR_KEY_QUARANTINE;
		n = malloc(ncap * sizeof(*n));
		if (n) {
			for (i = 0; i < ring_len; i++)
				n[i] = ring[(ring_head + i) % ring_cap];
			free(ring);
			ring = n;
			ring_cap = ncap;
			ring_head = 0;
		}
	}
	if (!ring_cap) {
		map_del(key);	/* no memory for a ring: forgotten now */
		return;
	}
	if (ring_len == ring_cap)
		ring_pop();
	s = map_find_slot(key);	/* ring_pop may have moved it */
	s->val = QUARANTINED;
	ring[(ring_head + ring_len) % ring_cap] = key;
	ring_len++;
}
