// SPDX-License-Identifier: MIT
/*
 * The arena's heap allocator (heap.h): every block, free or in use, is a
 * process-local node in one list in address order, so a free finds its two
 * neighbours at once and merges with them (boundary tags kept out of the
 * shared memory, as the classic allocators keep them beside each block).
 * Free extents also sit in a list per power of two of their length; blocks
 * in use sit in a hash table by offset, which is how a free is checked.
 *
 * Every function here runs under the caller's lock (arena.c).
 */
#include <errno.h>
#include <stdlib.h>

#include "heap.h"

struct shca_heap_blk {
	uint64_t off, len;
	struct shca_heap_blk *prev, *next;	/* address order */
	struct shca_heap_blk *fprev, *fnext;	/* free: its class list */
	struct shca_heap_blk *hnext;		/* in use: hash chain */
	bool free;
};

#define HASH_MIN	1024u

static uint64_t align_up(uint64_t v, uint64_t a)
{
	return (v + a - 1) & ~(a - 1);
}

static uint64_t align_down(uint64_t v, uint64_t a)
{
	return v & ~(a - 1);
}

static unsigned int size_class(uint64_t len)
{
	return 63u - (unsigned int)__builtin_clzll(len);
}

/* ------------------------------------------------------------------ */
/* Free lists                                                          */

static void free_insert(struct shca_heap *h, struct shca_heap_blk *b)
{
	unsigned int c = size_class(b->len);

	b->free = true;
	b->fprev = NULL;
	b->fnext = h->free_list[c];
	if (b->fnext)
		b->fnext->fprev = b;
	h->free_list[c] = b;
	h->free_mask |= 1ull << c;
	h->nfree++;
}

/* Before b->len changes: the list is the one of its current length. */
static void free_remove(struct shca_heap *h, struct shca_heap_blk *b)
{
	unsigned int c = size_class(b->len);

	if (b->fprev)
		b->fprev->fnext = b->fnext;
	else
		h->free_list[c] = b->fnext;
	if (b->fnext)
		b->fnext->fprev = b->fprev;
	if (!h->free_list[c])
		h->free_mask &= ~(1ull << c);
	b->free = false;
	b->fprev = b->fnext = NULL;
	h->nfree--;
}

/* First fit in len's own class, else any extent of a larger class. */
static struct shca_heap_blk *free_find(struct shca_heap *h, uint64_t len)
{
	unsigned int c = size_class(len);
	struct shca_heap_blk *b;
	uint64_t above;

	for (b = h->free_list[c]; b; b = b->fnext)
		if (b->len >= len)
			return b;
	above = c < 63 ? h->free_mask & ~((2ull << c) - 1) : 0;
	if (!above)
		return NULL;
	return h->free_list[__builtin_ctzll(above)];
}

/* ------------------------------------------------------------------ */
/* Blocks in use, by offset                                            */

static uint64_t hash_slot(const struct shca_heap *h, uint64_t off)
{
	return ((off / SHCA_HEAP_ALIGN) * 0x9e3779b97f4a7c15ull) >>
	       (64 - __builtin_ctzll(h->hash_size));
}

/* One chain per slot, load factor at most 1; a failed growth keeps the
 * table as it is (longer chains, still correct). */
static void hash_grow(struct shca_heap *h)
{
	struct shca_heap_blk **old = h->hash, **t, *b, *n;
	uint64_t old_size = h->hash_size, i;

	t = calloc(old_size * 2, sizeof(*t));
	if (!t)
		return;
	h->hash = t;
	h->hash_size = old_size * 2;
	for (i = 0; i < old_size; i++)
		for (b = old[i]; b; b = n) {
			uint64_t s = hash_slot(h, b->off);

			n = b->hnext;
			b->hnext = t[s];
			t[s] = b;
		}
	free(old);
}

/* A block goes into use (into the hash, if the heap has one). */
static void hash_insert(struct shca_heap *h, struct shca_heap_blk *b)
{
	uint64_t s;

	h->nused++;
	h->used_bytes += b->len;
	if (!h->hash)
		return;
	if (h->nused > h->hash_size)
		hash_grow(h);
	s = hash_slot(h, b->off);
	b->hnext = h->hash[s];
	h->hash[s] = b;
}

static struct shca_heap_blk *hash_find(const struct shca_heap *h,
				       uint64_t off)
{
	struct shca_heap_blk *b;

	if (!h->hash)
		return NULL;
	for (b = h->hash[hash_slot(h, off)]; b; b = b->hnext)
		if (b->off == off)
			return b;
	return NULL;
}

static struct shca_heap_blk *hash_remove(struct shca_heap *h, uint64_t off)
{
	struct shca_heap_blk **pp, *b;

	if (!h->hash)
		return NULL;
	for (pp = &h->hash[hash_slot(h, off)]; (b = *pp); pp = &b->hnext)
		if (b->off == off) {
			*pp = b->hnext;
			b->hnext = NULL;
			h->nused--;
			h->used_bytes -= b->len;
			return b;
		}
	return NULL;
}

/* ------------------------------------------------------------------ */
/* The heap                                                            */

static int heap_init(struct shca_heap *h, uint64_t start, uint64_t end,
		     uint64_t page, bool hashed)
{
	struct shca_heap_blk *b;

	*h = (struct shca_heap){ .start = start, .end = end, .page = page };
	if (start % SHCA_HEAP_ALIGN || end % SHCA_HEAP_ALIGN || end <= start ||
	    !page || (page & (page - 1)))
		return -EINVAL;
	if (hashed) {
		h->hash_size = HASH_MIN;
		h->hash = calloc(h->hash_size, sizeof(*h->hash));
	}
	b = calloc(1, sizeof(*b));
	if ((hashed && !h->hash) || !b) {
		free(h->hash);
		free(b);
		h->hash = NULL;
		return -ENOMEM;
	}
	b->off = start;
	b->len = end - start;
	h->first = b;
	free_insert(h, b);
	return 0;
}

int shca_heap_init(struct shca_heap *h, uint64_t start, uint64_t end,
		   uint64_t page)
{
	return heap_init(h, start, end, page, true);
}

int shca_heap_init_nohash(struct shca_heap *h, uint64_t start, uint64_t end,
			  uint64_t page)
{
	return heap_init(h, start, end, page, false);
}

void shca_heap_fini(struct shca_heap *h)
{
	struct shca_heap_blk *b, *n;

	for (b = h->first; b; b = n) {
		n = b->next;
		free(b);
	}
	free(h->hash);
	*h = (struct shca_heap){ 0 };
}

/*
 * The extent [s, e) keeps every page that lies wholly inside it zero; the
 * block [s, s + n) carved from its front may hold old bytes only in the
 * extent's first and last partial pages.
 */
static void todo_clear(const struct shca_heap *h, uint64_t s, uint64_t e,
		       uint64_t n, struct shca_heap_todo *todo)
{
	uint64_t head_end = align_up(s, h->page), tail_off;

	head_end = head_end < e ? head_end : e;
	tail_off = align_down(e, h->page);
	tail_off = tail_off > head_end ? tail_off : head_end;
	if (head_end > s)
		todo->clear[0] = (struct shca_heap_range){
			s, (head_end < s + n ? head_end : s + n) - s };
	if (tail_off < e && tail_off < s + n)
		todo->clear[1] = (struct shca_heap_range){
			tail_off, s + n - tail_off };
}

uint64_t shca_heap_alloc_blk(struct shca_heap *h, uint64_t len,
			     struct shca_heap_todo *todo, bool *oom,
			     struct shca_heap_blk **blk)
{
	struct shca_heap_blk *b, *u;
	uint64_t n, s, e;

	*todo = (struct shca_heap_todo){ 0 };
	*oom = false;
	*blk = NULL;
	if (!len || len > h->end - h->start)
		return 0;
	n = align_up(len, SHCA_HEAP_ALIGN);
	b = free_find(h, n);
	if (!b)
		return 0;
	s = b->off;
	e = b->off + b->len;
	if (b->len == n) {
		free_remove(h, b);
		u = b;
	} else {
		u = calloc(1, sizeof(*u));
		if (!u) {
			*oom = true;
			return 0;
		}
		/* u takes the front; b keeps the rest and its place */
		free_remove(h, b);
		u->off = s;
		u->len = n;
		u->prev = b->prev;
		u->next = b;
		if (b->prev)
			b->prev->next = u;
		else
			h->first = u;
		b->prev = u;
		b->off += n;
		b->len -= n;
		free_insert(h, b);
	}
	hash_insert(h, u);
	todo_clear(h, s, e, n, todo);
	*blk = u;
	return s;
}

uint64_t shca_heap_alloc(struct shca_heap *h, uint64_t len,
			 struct shca_heap_todo *todo, bool *oom)
{
	struct shca_heap_blk *b;

	if (!h->hash) {		/* its blocks could never be freed */
		*todo = (struct shca_heap_todo){ 0 };
		*oom = false;
		return 0;
	}
	return shca_heap_alloc_blk(h, len, todo, oom, &b);
}

/* Takes b out of the address list (merged into a neighbour). */
static void blk_unlink(struct shca_heap *h, struct shca_heap_blk *b)
{
	if (b->prev)
		b->prev->next = b->next;
	else
		h->first = b->next;
	if (b->next)
		b->next->prev = b->prev;
	free(b);
}

/* u, in use, becomes free and merges with its free neighbours. */
static uint64_t blk_free(struct shca_heap *h, struct shca_heap_blk *u,
			 struct shca_heap_todo *todo)
{
	struct shca_heap_blk *p, *nx;
	uint64_t len, s, e, ps, pe, off = u->off;

	len = u->len;
	p = u->prev;
	if (p && p->free) {
		free_remove(h, p);
		u->off = p->off;
		u->len += p->len;
		blk_unlink(h, p);
	}
	nx = u->next;
	if (nx && nx->free) {
		free_remove(h, nx);
		u->len += nx->len;
		blk_unlink(h, nx);
	}
	free_insert(h, u);
	/* the pages the block touched that are now wholly free */
	s = u->off;
	e = u->off + u->len;
	ps = align_down(off, h->page);
	if (ps < s)
		ps += h->page;
	pe = align_up(off + len, h->page);
	if (pe > e)
		pe -= h->page;
	if (pe > ps)
		todo->punch = (struct shca_heap_range){ ps, pe - ps };
	return len;
}

uint64_t shca_heap_free(struct shca_heap *h, uint64_t off,
			struct shca_heap_todo *todo)
{
	struct shca_heap_blk *u;

	*todo = (struct shca_heap_todo){ 0 };
	u = hash_remove(h, off);
	if (!u)
		return 0;
	return blk_free(h, u, todo);
}

uint64_t shca_heap_free_blk(struct shca_heap *h, struct shca_heap_blk *blk,
			    struct shca_heap_todo *todo)
{
	*todo = (struct shca_heap_todo){ 0 };
	if (!blk || blk->free || !h->nused)
		return 0;
	if (h->hash) {
		if (hash_find(h, blk->off) != blk)
			return 0;	/* not this heap's block in use */
		hash_remove(h, blk->off);
	} else {
		h->nused--;
		h->used_bytes -= blk->len;
	}
	return blk_free(h, blk, todo);
}

uint64_t shca_heap_size(const struct shca_heap *h, uint64_t off)
{
	const struct shca_heap_blk *b = hash_find(h, off);

	return b ? b->len : 0;
}

uint64_t shca_heap_largest(const struct shca_heap *h)
{
	const struct shca_heap_blk *b;
	uint64_t best = 0;

	if (!h->free_mask)
		return 0;
	for (b = h->free_list[63 - __builtin_clzll(h->free_mask)]; b;
	     b = b->fnext)
		if (b->len > best)
			best = b->len;
	return best;
}

int shca_heap_check(const struct shca_heap *h)
{
	const struct shca_heap_blk *b, *prev = NULL;
	uint64_t at = h->start, nused = 0, nfree = 0, bytes = 0, i;
	unsigned int c;

	for (b = h->first; b; prev = b, b = b->next) {
		if (b->prev != prev || b->off != at || !b->len ||
		    b->len % SHCA_HEAP_ALIGN)
			return -1;	/* the list does not tile the heap */
		if (b->free && prev && prev->free)
			return -2;	/* two free neighbours not merged */
		if (b->free) {
			nfree++;
		} else {
			nused++;
			bytes += b->len;
			if (h->hash && hash_find(h, b->off) != b)
				return -3;	/* a used block not hashed */
		}
		at += b->len;
	}
	if (at != h->end)
		return -1;
	if (nused != h->nused || nfree != h->nfree || bytes != h->used_bytes)
		return -4;	/* counts disagree */
	for (c = 0, nfree = 0; c < SHCA_HEAP_CLASSES; c++) {
		if (!!h->free_list[c] != !!(h->free_mask & (1ull << c)))
			return -5;	/* the mask lies */
		for (prev = NULL, b = h->free_list[c]; b;
		     prev = b, b = b->fnext, nfree++)
			if (!b->free || b->fprev != prev ||
			    size_class(b->len) != c)
				return -6;	/* a free list is wrong */
	}
	if (nfree != h->nfree)
		return -6;
	if (!h->hash)
		return 0;	/* the list's count was checked above */
	for (i = 0, nused = 0; i < h->hash_size; i++)
		for (b = h->hash[i]; b; b = b->hnext, nused++)
			if (b->free || hash_slot(h, b->off) != i)
				return -7;	/* the hash holds a stranger */
	return nused == h->nused ? 0 : -7;
}
