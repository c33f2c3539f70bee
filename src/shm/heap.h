/* SPDX-License-Identifier: MIT */
/*
 * The arena's heap allocator: offsets in, offsets out, no memory of its
 * own to touch.  It manages the range [start, end) of the process arena
 * (shm/arena.c maps it, zeroes and punches what this file says).
 *
 * All its bookkeeping is process-local (malloc'd nodes): peers map the
 * arena read-write, so nothing in the shared memory says where a block
 * starts, how long it is or whether it is free.  A free is honoured only
 * for the start of a block this heap handed out and has not taken back.
 *
 * Policy: blocks are multiples of SHCA_HEAP_ALIGN bytes and carved from
 * the front of a free extent; free extents are merged with both address
 * neighbours at once (so two free extents are never adjacent) and kept in
 * segregated lists, one per power of two of their length.  An allocation
 * scans its own class for the first extent that fits, then takes the
 * first extent of the smallest larger class that is not empty: it fails
 * only when no free extent is long enough (shca_heap_largest).
 *
 * Zero pages: every page that lies wholly inside a free extent is kept
 * zero, by punching it out of the memfd (arena.c) when a free makes it
 * wholly free.  So an allocation needs clearing only where the extent it
 * came from shares a page with a neighbour: at most two partial pages.
 */
#ifndef SOFTHCA_SHM_HEAP_H
#define SOFTHCA_SHM_HEAP_H

#include <stdbool.h>
#include <stdint.h>

#define SHCA_HEAP_ALIGN		64	/* bytes: a cache line */
#define SHCA_HEAP_CLASSES	64

struct shca_heap_blk;

struct shca_heap {
	uint64_t start, end;
	uint64_t page;			/* punch granularity, power of two */
	struct shca_heap_blk *first;	/* address order */
	struct shca_heap_blk *free_list[SHCA_HEAP_CLASSES];
	uint64_t free_mask;		/* bit c: free_list[c] not empty */
	struct shca_heap_blk **hash;	/* blocks in use, by offset; NULL:
					 * not hashed (_init_nohash) */
	uint64_t hash_size;		/* power of two */
	uint64_t nused, nfree;		/* blocks */
	uint64_t used_bytes;
};

/* A byte range [off, off + len) of the arena; len 0: none. */
struct shca_heap_range {
	uint64_t off, len;
};

/* What arena.c must do to the memory after an alloc or a free. */
struct shca_heap_todo {
	struct shca_heap_range clear[2];	/* alloc: may hold old bytes */
	struct shca_heap_range punch;		/* free: pages now all free */
};

/* [start, end) aligned to SHCA_HEAP_ALIGN, page a power of two; 0 or
 * -ENOMEM. */
int shca_heap_init(struct shca_heap *h, uint64_t start, uint64_t end,
		   uint64_t page);
/*
 * The same, for a caller that keeps each block's node (shm/seg.c's pool:
 * a segment knows its pool range): blocks in use are not hashed, so an
 * allocation and a free touch no table spread over the heap's size (a
 * cache miss each, and a rehash of every block now and then); only
 * shca_heap_alloc_blk and shca_heap_free_blk serve it.
 */
int shca_heap_init_nohash(struct shca_heap *h, uint64_t start, uint64_t end,
			  uint64_t page);
/* Drops the bookkeeping (the arena itself is the caller's). */
void shca_heap_fini(struct shca_heap *h);

/* A block of at least len bytes: its offset, or 0 when no free extent is
 * long enough (or len is 0 or absurd, or the bookkeeping found no
 * memory: *oom set then). */
uint64_t shca_heap_alloc(struct shca_heap *h, uint64_t len,
			 struct shca_heap_todo *todo, bool *oom);

/* Gives back the block at off: its length, or 0 (nothing changed) when
 * off is not the start of a block in use. */
uint64_t shca_heap_free(struct shca_heap *h, uint64_t off,
			struct shca_heap_todo *todo);

/* shca_heap_alloc, also handing out the block's node (*blk), which is
 * what shca_heap_free_blk takes back (any heap). */
uint64_t shca_heap_alloc_blk(struct shca_heap *h, uint64_t len,
			     struct shca_heap_todo *todo, bool *oom,
			     struct shca_heap_blk **blk);
/* Gives back the block blk (from shca_heap_alloc_blk on h): its length,
 * or 0 (nothing changed) when blk is not in use. */
uint64_t shca_heap_free_blk(struct shca_heap *h, struct shca_heap_blk *blk,
			    struct shca_heap_todo *todo);

/* The length of the block in use at off, 0 if none. */
uint64_t shca_heap_size(const struct shca_heap *h, uint64_t off);

/* The longest free extent (the largest block an alloc can return). */
uint64_t shca_heap_largest(const struct shca_heap *h);

/* Walks every structure; 0, or a negative code naming the broken rule
 * (tests and debug builds). */
int shca_heap_check(const struct shca_heap *h);

#endif
