// SPDX-License-Identifier: MIT
/*
 * The memory access family (see mem.h): access lanes, and the mapped,
 * CMA and local implementations of write, read and the atomics.
 */
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "../common/dma.h"
#include "../common/log.h"
#include "../common/stat.h"
#include "../common/tblock.h"
#include "../common/util.h"
#include "../verbs/shca.h"
#include "host.h"
#include "mem.h"
#include "seg.h"
#include "segmap.h"

#define LANE_PROBE	16	/* lanes tried from the hashed start */
#define LANE_ROUNDS	2000	/* full scans (and yields) before -EBUSY */
#define MAX_PIECES	128	/* pieces of one access */

/* The access in progress on this thread. */
struct mem_access {
	struct shca_peer *p;
	unsigned int nlanes;
	bool noted;		/* an MR entry was read */
	bool unmapped;		/* ... one of them not MAPPED */
	bool odp;		/* ... one of them IBV_ACCESS_ON_DEMAND */
	uint32_t lane[SHCA_MEM_MAX_KEYS];
	uint32_t key[SHCA_MEM_MAX_KEYS];
};

/* this thread's, in a block of its own (common/tblock.h) */
static __thread struct mem_access *cur;

/* This thread's access; NULL: no memory for it (no lane can be held,
 * shca_mem_claim fails). */
static struct mem_access *access_get(void)
{
	return cur ? cur : shca_tblock_get((void **)&cur, sizeof(*cur));
}

void shca_mem_begin(struct shca_peer *p)
{
	struct mem_access *a = access_get();

	if (!a)
		return;
	a->p = p;
	a->nlanes = 0;
	a->noted = false;
	a->unmapped = false;
	a->odp = false;
}

/* Where this thread starts looking for a free lane: by pid and thread,
 * so that threads and processes do not all contend for lane 0. */
static uint32_t lane_start(pid_t pid)
{
	static __thread char anchor;
	uint64_t h = (uint64_t)(uintptr_t)&anchor ^ ((uint64_t)pid << 32);

	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdull;
	h ^= h >> 33;
	return (uint32_t)h;
}

static bool lane_take(uint64_t *lane, uint64_t word)
{
	uint64_t zero = 0;

	return !__atomic_load_n(lane, __ATOMIC_RELAXED) &&
	       __atomic_compare_exchange_n(lane, &zero, word, false,
					   __ATOMIC_SEQ_CST, __ATOMIC_RELAXED);
}

/* A lane whose process is gone is free (the owner's drain does the same;
 * a peer that finds none free does it too: lanes never leak). */
static void lane_reap(uint64_t *lane)
{
	uint64_t w = __atomic_load_n(lane, __ATOMIC_RELAXED);
	pid_t pid = SHCA_LANE_PID(w);

	if (w && pid != shca_getpid() && shca_proc_gone(pid))
		__atomic_compare_exchange_n(lane, &w, 0, false,
					    __ATOMIC_SEQ_CST, __ATOMIC_RELAXED);
}

/*
 * A free lane, CAS 0 -> our word with sequentially consistent order, its
 * busy bit set, before the MR entry is read (arena.h): a few probes from
 * a hashed start, then whole scans that free dead processes' lanes,
 * yielding in between; -EBUSY in the end (the lanes are the owner's bytes: bounded).
 */
static int lane_claim(uint64_t *lanes, uint64_t word, uint32_t *idx)
{
	uint32_t start = lane_start(SHCA_LANE_PID(word)), i;
	int round;

	for (i = 0; i < LANE_PROBE; i++) {
		uint32_t k = (start + i) & (SHCA_ARENA_LANES - 1);

		if (lane_take(&lanes[k], word)) {
			*idx = k;
			goto mark;
		}
	}
	for (round = 0; round < LANE_ROUNDS; round++) {
		for (i = 0; i < SHCA_ARENA_LANES; i++) {
			uint32_t k = (start + i) & (SHCA_ARENA_LANES - 1);

			if (lane_take(&lanes[k], word)) {
				*idx = k;
				goto mark;
			}
			if (!round)
				lane_reap(&lanes[k]);
		}
		sched_yield();
	}
	return -EBUSY;
mark:
	/* the drain reads the bitmap, not every lane (arena.h) */
	shca_lane_mark(lanes, *idx);
	return 0;
}

int shca_mem_claim(struct shca_peer *p, uint32_t key)
{
	uint64_t word = SHCA_LANE_WORD(shca_getpid(), key);
	struct mem_access *a = access_get();
	unsigned int i;
	int ret;

	if (!a)
		return p->lanes ? -EBUSY : 0;
	if (a->p != p)
		shca_mem_begin(p);
	for (i = 0; i < a->nlanes; i++)
		if (a->key[i] == key)
			return 0;
	if (!p->lanes)
		return 0;	/* no lanes to claim: nothing is mapped */
	if (a->nlanes == SHCA_MEM_MAX_KEYS)
		return -EBUSY;
	ret = lane_claim(p->lanes, word, &a->lane[a->nlanes]);
	if (ret) {
		shca_warn_once("no free access lane in the arena of pid %d",
			       (int)p->pid);
		return ret;
	}
	a->key[a->nlanes++] = key;
#if !defined(__x86_64__) && !defined(__i386__)
	/* the claim's store before the entry's loads (x86: the locked
	 * CAS is a full barrier already) */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
#endif
	return 0;
}

int shca_mem_lane_take(struct shca_peer *p, uint32_t key, struct shca_lane *l)
{
	uint32_t idx;
	int ret;

	l->lane = NULL;
	l->word = SHCA_LANE_WORD(shca_getpid(), key);
	if (!p->lanes)
		return 0;
	ret = lane_claim(p->lanes, l->word, &idx);
	if (ret) {
		shca_warn_once("no free access lane in the arena of pid %d",
			       (int)p->pid);
		return ret;
	}
	l->lane = &p->lanes[idx];
#if !defined(__x86_64__) && !defined(__i386__)
	__atomic_thread_fence(__ATOMIC_SEQ_CST);	/* as shca_mem_claim */
#endif
	return 0;
}

void shca_mem_lane_put(struct shca_lane *l)
{
	uint64_t word = l->word;

	if (!l->lane)
		return;
	/* after the last load or store of the memory (release); ours only,
	 * as shca_mem_end */
	__atomic_compare_exchange_n(l->lane, &word, 0, false,
				    __ATOMIC_RELEASE, __ATOMIC_RELAXED);
	l->lane = NULL;
}

void shca_mem_note(struct shca_peer *p, const struct shca_mr_shm *e)
{
	struct mem_access *a = access_get();

	if (!a)
		return;		/* no memory: not mapped (CMA) */
	if (a->p != p)
		shca_mem_begin(p);
	a->noted = true;
	if (!(e->flags & SHCA_MR_SHM_MAPPED))
		a->unmapped = true;
	if (e->access & IBV_ACCESS_ON_DEMAND)
		a->odp = true;
}

bool shca_mem_odp(void)
{
	return cur && cur->odp;
}

bool shca_mem_present(struct shca_peer *p, uint64_t va, uint64_t len,
		      bool write)
{
	if (!p->self || !len)
		return true;
	return !shca_check_range((const void *)(uintptr_t)va, (size_t)len,
				 write);
}

bool shca_mem_faults(struct shca_peer *p, uint64_t va, uint64_t len,
		     bool write)
{
	return p->self &&
	       shca_check_range_fast((const void *)(uintptr_t)va,
				     (size_t)len, write) == -EFAULT;
}

void shca_mem_end(struct shca_peer *p)
{
	struct mem_access *a = cur;
	uint64_t word;
	unsigned int i;

	if (!a || a->p != p)
		return;
	for (i = 0; i < a->nlanes; i++) {
		/* ours only: a lane the owner freed (it took us for dead)
		 * may be someone else's by now */
		word = SHCA_LANE_WORD(shca_getpid(), a->key[i]);
		__atomic_compare_exchange_n(&p->lanes[a->lane[i]], &word, 0,
					    false, __ATOMIC_RELEASE,
					    __ATOMIC_RELAXED);
	}
	a->nlanes = 0;
	a->p = NULL;
}

static void count(enum shca_stat what)
{
	shca_stat_add(shca_stat_proc(), what, 1);
}

/* ------------------------------------------------------------------ */
/* local: the responder is this process                                */

/* The word at w (ours, or mapped here), under the host lock stripe. */
static uint64_t atomic_word(uint64_t *w, enum ibv_wr_opcode op,
			    uint64_t compare_add, uint64_t swap)
{
	uint64_t v;

	if (op == IBV_WR_ATOMIC_WRITE) {
		/* IBA Annex A19: the 8 bytes placed whole, after everything
		 * before them (release) */
		if ((uintptr_t)w & 7)
			memcpy(w, &swap, 8);
		else
			__atomic_store_n(w, swap, __ATOMIC_SEQ_CST);
		return 0;
	}
	if ((uintptr_t)w & 7) {
		/* unaligned here (an iova that is not congruent to its
		 * address): no CPU atomic, the lock stripe alone */
		memcpy(&v, w, 8);
		if (op == IBV_WR_ATOMIC_CMP_AND_SWP) {
			if (v == compare_add)
				memcpy(w, &swap, 8);
		} else {
			uint64_t n = v + compare_add;

			memcpy(w, &n, 8);
		}
		return v;
	}
	if (op == IBV_WR_ATOMIC_CMP_AND_SWP) {
		v = compare_add;
		__atomic_compare_exchange_n(w, &v, swap, false,
					    __ATOMIC_SEQ_CST,
					    __ATOMIC_SEQ_CST);
		return v;
	}
	return __atomic_fetch_add(w, compare_add, __ATOMIC_SEQ_CST);
}

/* ------------------------------------------------------------------ */
/* mapped: the responder's segments mapped here                        */

/* Has the responder died?  Its life word, no system call (arena.h). */
static bool owner_died(struct shca_peer *p)
{
	return p->life && shca_arena_life_died(p->life);
}

/* The remote list in pieces, in order: each one either mapped here
 * (iov_base our address) or not (the owner's address, for CMA). */
struct pieces {
	int n;
	int nmapped;		/* mapped pieces */
	struct iovec v[MAX_PIECES];
	bool mapped[MAX_PIECES];
};

/*
 * The remote list as pieces (under the map's read lock): false when it
 * takes more than MAX_PIECES.  Neighbouring bytes that miss make one
 * piece (a miss says how far it reaches, shca_segmap_find).
 */
static bool translate(struct shca_segmap *m, const struct iovec *remote,
		      int nr, struct pieces *ps)
{
	int i;

	ps->n = 0;
	ps->nmapped = 0;
	for (i = 0; i < nr; i++) {
		uint64_t va = (uint64_t)(uintptr_t)remote[i].iov_base;
		uint64_t left = remote[i].iov_len;

		while (left) {
			uint64_t len = left;
			void *at = shca_segmap_find(m, va, &len);
			int k = ps->n - 1;

			if (!at && k >= 0 && !ps->mapped[k] &&
			    (uint64_t)(uintptr_t)ps->v[k].iov_base +
			    ps->v[k].iov_len == va) {
				ps->v[k].iov_len += len;	/* grows */
			} else {
				if (ps->n == MAX_PIECES)
					return false;
				ps->v[ps->n].iov_base = at ? at :
					(void *)(uintptr_t)va;
				ps->v[ps->n].iov_len = len;
				ps->mapped[ps->n++] = at != NULL;
				ps->nmapped += at != NULL;
			}
			va += len;
			left -= len;
		}
	}
	return true;
}

/*
 * translate's short way (under the map's read lock): a remote list of one
 * range that lies whole in one mapped segment (an RDMA WRITE, a READ, a
 * SEND into one SGE) is that one piece; false otherwise.
 */
static bool one_piece(struct shca_segmap *m, const struct iovec *remote,
		      int nr, struct pieces *ps)
{
	uint64_t len;
	void *at;

	if (nr != 1 || !remote->iov_len)
		return false;
	len = remote->iov_len;
	at = shca_segmap_find(m, (uint64_t)(uintptr_t)remote->iov_base, &len);
	if (!at || len != remote->iov_len)
		return false;
	ps->n = 1;
	ps->nmapped = 1;
	ps->v[0].iov_base = at;
	ps->v[0].iov_len = len;
	ps->mapped[0] = true;
	return true;
}

/* The next len bytes of a local list, from cursor (*i, *off) on, as at
 * most max iovecs in out: how many, or -1 (more than max); out NULL:
 * the cursor moves only. */
static int local_take(const struct iovec *local, int nl, int *i, size_t *off,
		      size_t len, struct iovec *out, int max)
{
	int n = 0;

	while (len && *i < nl) {
		size_t k = local[*i].iov_len - *off;

		if (k > len)
			k = len;
		if (k && out) {
			if (n == max)
				return -1;
			out[n].iov_base = (char *)local[*i].iov_base + *off;
			out[n].iov_len = k;
		}
		n += k != 0;
		len -= k;
		*off += k;
		if (*off == local[*i].iov_len) {
			(*i)++;
			*off = 0;
		}
	}
	return n;
}

static bool want_mapped(struct shca_peer *p)
{
	const struct mem_access *a = cur;

	return p->segmap && a && a->p == p && a->noted && !a->unmapped &&
	       shca_map_enabled();
}

/*
 * The mapped runs of ps among (a, b] of the remote list (run starts;
 * from = -1: from the first) copied through our mappings, the local
 * cursor walked over the runs in between.
 */
static void mapped_runs(const struct iovec *local, int nl,
			const struct pieces *ps, int from, int to, bool write)
{
	struct iovec sl[MAX_PIECES];
	size_t off = 0;
	int li = 0, a, b, ns;

	for (a = 0; a < ps->n; a = b) {
		size_t len = 0;

		for (b = a; b < ps->n && ps->mapped[b] == ps->mapped[a]; b++)
			len += ps->v[b].iov_len;
		if (!ps->mapped[a] || a <= from || a > to) {
			/* the cursor only */
			ns = local_take(local, nl, &li, &off, len, NULL, 0);
			continue;
		}
		ns = local_take(local, nl, &li, &off, len, sl, MAX_PIECES);
		if (ns < 0)	/* not with nl <= MAX_PIECES (the caller) */
			continue;
		if (write)
			shca_copy_iov(ps->v + a, b - a, sl, ns);
		else
			shca_copy_iov(sl, ns, ps->v + a, b - a);
	}
}

static int cma_xfer(struct shca_peer *p, const struct iovec *local, int nl,
		    const struct iovec *remote, int nr, bool write);

/*
 * An access partly mapped: the mapped runs copied through our mappings,
 * and every byte no segment holds (an unaligned MR's partial edge pages,
 * shm/seg.c: both edges of one access) in one CMA call, not one per run.
 * Order: a WRITE's mapped runs before its last unmapped one go first,
 * then the CMA call (its runs in the list's order), then the mapped runs
 * after it, so that the access's last byte is still written last (a
 * program may poll it); a READ's order is the local buffer's, seen only
 * at completion.  Under the map's read lock.  0 or CMA's -errno.
 */
static int mixed_xfer(struct shca_peer *p, const struct iovec *local, int nl,
		      const struct pieces *ps, bool write)
{
	struct iovec cl[2 * MAX_PIECES], cr[MAX_PIECES];
	size_t off = 0;
	int li = 0, a, b, ns, ncl = 0, ncr = 0, last = -1, ret = 0;

	/* the unmapped runs' bytes, local and remote, in order */
	for (a = 0; a < ps->n; a = b) {
		size_t len = 0;

		for (b = a; b < ps->n && ps->mapped[b] == ps->mapped[a]; b++)
			len += ps->v[b].iov_len;
		if (ps->mapped[a]) {
			local_take(local, nl, &li, &off, len, NULL, 0);
			continue;
		}
		last = a;
		ns = local_take(local, nl, &li, &off, len, cl + ncl,
				2 * MAX_PIECES - ncl);
		if (ns < 0)	/* not with nl <= MAX_PIECES (the caller) */
			return -E2BIG;
		ncl += ns;
		memcpy(cr + ncr, ps->v + a, (size_t)(b - a) * sizeof(*cr));
		ncr += b - a;
	}
	mapped_runs(local, nl, ps, -1, write ? last : ps->n, write);
	if (ncr)
		ret = cma_xfer(p, cl, ncl, cr, ncr, write);
	if (write && last >= 0)
		mapped_runs(local, nl, ps, last, ps->n, write);
	count(SHCA_STAT_CMA_XFERS);
	return ret;
}

/*
 * The access through our mappings: translated under the read lock (a
 * miss refreshes the map, if the owner's table changed since we read it,
 * and translates again), copied under it; the bytes no segment holds by
 * CMA (mixed_xfer).  0, -ESRCH (the owner died: its memory is orphaned,
 * the message lost), another -errno of CMA's, or -ENOENT: none of it is
 * mapped (or it is in too many pieces), CMA instead.
 */
static int mapped_xfer(struct shca_peer *p, const struct iovec *local, int nl,
		       const struct iovec *remote, int nr, bool write)
{
	struct shca_segmap *m = p->segmap;
	struct pieces ps;
	bool ok;
	int ret = 0;

	shca_segmap_rdlock(m);
	ok = one_piece(m, remote, nr, &ps) || translate(m, remote, nr, &ps);
	if (ok && ps.nmapped < ps.n && shca_segmap_changed(m)) {
		shca_segmap_unlock(m);
		shca_segmap_refresh(m);	/* failed: what we had */
		shca_segmap_rdlock(m);
		ok = translate(m, remote, nr, &ps);
	}
	if (!ok || !ps.nmapped || (ps.nmapped < ps.n && nl > MAX_PIECES)) {
		shca_segmap_unlock(m);
		return -ENOENT;
	}
	if (ps.nmapped == ps.n && write)
		shca_copy_iov(ps.v, ps.n, local, nl);
	else if (ps.nmapped == ps.n)
		shca_copy_iov(local, nl, ps.v, ps.n);
	else
		ret = mixed_xfer(p, local, nl, &ps, write);
	shca_segmap_unlock(m);
	count(SHCA_STAT_MAP_XFERS);
	/* what a dead owner's memory took is lost, as CMA's ESRCH says */
	return owner_died(p) ? -ESRCH : ret;
}

/*
 * Whose page faulted, when CMA's copy says EFAULT (it does not say which
 * side): ours when a range of the local list is not mapped now, or not
 * writable for a READ's (-EFAULT: the requester's local protection
 * error); else the responder's (-EREMOTEIO: its page fault, a remote
 * access error as a NIC reports it).  Both bad: ours.  Asked of our
 * own mappings only, on the error path only.
 */
static int fault_side(const struct iovec *local, int nl, bool write)
{
	int i;

	for (i = 0; i < nl; i++)
		if (shca_check_range(local[i].iov_base, local[i].iov_len,
				     !write))
			return -EFAULT;
	return -EREMOTEIO;
}

static int cma_xfer(struct shca_peer *p, const struct iovec *local, int nl,
		    const struct iovec *remote, int nr, bool write)
{
	int ret = write ? shca_peer_write(p, local, nl, remote, nr) :
			  shca_peer_read(p, local, nl, remote, nr);

	return ret == -EFAULT ? fault_side(local, nl, write) : ret;
}

static int mem_xfer(struct shca_peer *p, const struct iovec *local, int nl,
		    const struct iovec *remote, int nr, bool write)
{
	int ret;

	if (p->self) {
		if (write)
			shca_copy_iov(remote, nr, local, nl);
		else
			shca_copy_iov(local, nl, remote, nr);
		count(SHCA_STAT_LOCAL_XFERS);
		return 0;
	}
	if (want_mapped(p)) {
		ret = mapped_xfer(p, local, nl, remote, nr, write);
		if (ret != -ENOENT)
			return ret;
	}
	count(SHCA_STAT_CMA_XFERS);
	return cma_xfer(p, local, nl, remote, nr, write);
}

int shca_mem_write(struct shca_peer *p, const struct iovec *local, int nl,
		   const struct iovec *remote, int nr)
{
	return mem_xfer(p, local, nl, remote, nr, true);
}

int shca_mem_read(struct shca_peer *p, const struct iovec *local, int nl,
		  const struct iovec *remote, int nr)
{
	return mem_xfer(p, local, nl, remote, nr, false);
}

/* ------------------------------------------------------------------ */
/* atomics                                                             */

/* CMA: read, modify, write under the lock stripe.  The local side is
 * this stack: a fault is the responder's word (-EREMOTEIO). */
static int cma_atomic(struct shca_peer *p, uint64_t va, enum ibv_wr_opcode op,
		      uint64_t compare_add, uint64_t swap, uint64_t *orig)
{
	uint64_t old = 0, val;
	struct iovec l = { &old, sizeof(old) };
	struct iovec r = { (void *)(uintptr_t)va, 8 };
	int ret;

	if (op == IBV_WR_ATOMIC_WRITE) {
		/* one 8-byte write, under the stripe like the others */
		l.iov_base = &swap;
		*orig = 0;
		ret = shca_peer_write(p, &l, 1, &r, 1);
		return ret == -EFAULT ? -EREMOTEIO : ret;
	}
	ret = shca_peer_read(p, &l, 1, &r, 1);
	if (!ret) {
		if (op == IBV_WR_ATOMIC_CMP_AND_SWP)
			val = old == compare_add ? swap : old;
		else
			val = old + compare_add;
		l.iov_base = &val;
		ret = shca_peer_write(p, &l, 1, &r, 1);
	}
	*orig = old;
	return ret == -EFAULT ? -EREMOTEIO : ret;
}

/* Our mapping of the responder's word at va, with the map's read lock
 * held on success (a miss refreshes once, if the table changed since we
 * read it); NULL: not mapped. */
static uint64_t *mapped_word(struct shca_peer *p, uint64_t va)
{
	int tries;

	for (tries = 0; tries < 2; tries++) {
		uint64_t len = 8;
		void *at;

		if (tries && shca_segmap_refresh(p->segmap))
			break;
		shca_segmap_rdlock(p->segmap);
		at = shca_segmap_find(p->segmap, va, &len);
		if (at && len == 8)
			return at;
		shca_segmap_unlock(p->segmap);
	}
	return NULL;
}

int shca_mem_atomic(struct shca_peer *p, uint64_t va, enum ibv_wr_opcode op,
		    uint64_t compare_add, uint64_t swap, uint64_t *orig)
{
	uint64_t *w = NULL;
	int ret = 0;

	if (p->self)
		w = (uint64_t *)(uintptr_t)va;
	else if (want_mapped(p))
		w = mapped_word(p, va);
	/* the lock after the map's read lock, never the other way round */
	if (shca_host_atomic_lock(p->pid, va)) {
		if (w && !p->self)
			shca_segmap_unlock(p->segmap);
		return -ENOLCK;
	}
	if (w) {
		SHCA_DMA_BEGIN();
		*orig = atomic_word(w, op, compare_add, swap);
		SHCA_DMA_END();
	} else {
		ret = cma_atomic(p, va, op, compare_add, swap, orig);
	}
	shca_host_atomic_unlock(p->pid, va);
	if (p->self) {
		count(SHCA_STAT_LOCAL_XFERS);
	} else if (w) {
		shca_segmap_unlock(p->segmap);
		count(SHCA_STAT_MAP_XFERS);
		if (owner_died(p))
			ret = -ESRCH;
	} else {
		count(SHCA_STAT_CMA_XFERS);
	}
	return ret;
}
