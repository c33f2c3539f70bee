// SPDX-License-Identifier: MIT
/*
 * Segments: registered memory re-backed in place by the pool memfd, so
 * that peers on this host can map it (issue 13; layout in shm/arena.h).
 *
 * Making a range shareable (shca_seg_map), for each run of pages that no
 * segment covers yet and that is private anonymous memory:
 *   1. take a range of the pool (its free ranges read as zero);
 *   2. copy only the pages that hold data (present or swapped out) into
 *      it with pwrite, so that untouched memory stays untouched, whatever
 *      its size;
 *   3. map the pool range over the run (mmap MAP_FIXED): the kernel
 *      replaces the old pages by the new ones in one step, at the same
 *      addresses, with the protection of the mapping it replaced (a run
 *      of several mappings: each part's afterwards);
 *   4. publish the segment in the arena's table.
 * A MAP_SHARED mapping of the program's own file is not re-backed: if
 * peers may map that file as it is (seg_file.c: a memfd sealed against
 * shrinking), a segment names the file and its offset instead of a pool
 * range, and nothing is copied or remapped.
 * Anything else (the stack, private file mappings, other shared or
 * hugetlb mappings, holes, a full table, a failed step) leaves the whole
 * MR as it was: CMA.
 *
 * Giving it back (the last MR over a segment deregistered, after its
 * lanes drained): the segment entry is cleared, the data pages of its
 * pool range copied into fresh private anonymous memory mremapped over
 * the parts the pool still backs (the program may have unmapped or
 * replaced some; a part with no data in the pool gets fresh anonymous
 * memory mapped over it, in one step too), the pool range punched out
 * where it held data, and reused later.
 *
 * So a free pool range reads as zero, and taking one costs no system
 * call; the pool grows (ftruncate) by half its size at a time.
 *
 * Segments never overlap and never change while they live: an MR over
 * pages some segments already cover takes references to those and gets
 * new segments only for the pages in between.
 *
 * What a program must not do meanwhile (README): write a range from
 * another thread while it is being registered or deregistered (the write
 * may land in the copy that is about to be replaced).
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/syscall.h>

#include "../common/log.h"
#include "../common/util.h"
#include "arena.h"
#include "heap.h"
#include "seg.h"

#define PS		4096ull
#define POOL_END	(1ull << 46)	/* offsets the pool hands out */
#define SEG_CHUNK	(64ul << 20)	/* copied and remapped at a time */
/* a short range (up to SMALL) finds the end of a data extent with a
 * probe per page, which never looks past its end; a longer one asks
 * SEEK_HOLE, which runs on to the extent's end, through the data of the
 * segments that follow in the pool: a hole after each long segment's
 * pool range, never written, stops it there.  Short segments have none,
 * so that the pool ranges of adjacent ones taken in order are adjacent
 * too, and the kernel merges their mappings (one VMA, not one each) */
#define SMALL		(64ul << 10)
#define POOL_GUARD(len)	((len) > SMALL ? PS : 0)

pthread_mutex_t shca_seg_lock = PTHREAD_MUTEX_INITIALIZER;
struct shca_seg **shca_segs;		/* sorted by va, never overlapping */
uint32_t shca_nsegs;
struct shca_seg *shca_orphans;		/* linked by next_orphan */

struct shca_seg_hold {
	uint32_t n;
	struct shca_seg *seg[];
};
/* shca_segs is segs_mem + segs_head: room at both ends, so that
 * segments come and go at either end without moving the others */
static struct shca_seg **segs_mem;
static uint32_t segs_cap, segs_head;
static uint64_t next_gen = 1;		/* never reused in the process */
static uint32_t slot_next;
static uint8_t slot_used[SHCA_ARENA_SEG_ENTRIES / 8];
static struct shca_heap pool;		/* the pool's free ranges */
static bool pool_ready;
static uint64_t pool_size;		/* bytes, as ftruncated */
static dev_t pool_dev;			/* the pool's identity, to tell */
static ino_t pool_ino;			/* its mappings in maps */
static int maps_fd = -1, pagemap_fd = -1;
static pid_t state_pid;			/* whose state this is */

/* ------------------------------------------------------------------ */
/* SOFTHCA_MAP                                                         */

static pthread_once_t map_once = PTHREAD_ONCE_INIT;
static bool map_on = true;

static void map_env(void)
{
	const char *s = getenv("SOFTHCA_MAP");

	if (!s || !*s || !strcmp(s, "1"))
		return;
	if (strcmp(s, "0")) {
		shca_warn("SOFTHCA_MAP=%s: expected 0 or 1, ignored", s);
		return;
	}
	map_on = false;
	shca_info("SOFTHCA_MAP=0: registered memory stays as it is (CMA)");
}

bool shca_map_enabled(void)
{
	pthread_once(&map_once, map_env);
	return map_on;
}

/*
 * SOFTHCA_MAP_MLOCK=1: what the program locked in a range stays locked
 * across its re-backing and its giving back (seg_vm.c reads the locked
 * parts, each remap locks them again).  Off by default: knowing whether
 * anything is locked takes a read of /proc/self/status before each remap
 * (and of smaps when something is), 24.6 us more per registration and
 * deregistration of 64 KiB (103.6 against 79.0 us, 4 runs each,
 * alternated, CPU 1), for the few programs that lock their buffers.
 */
static pthread_once_t mlock_once = PTHREAD_ONCE_INIT;
static bool mlock_on;

static void mlock_env(void)
{
	const char *s = getenv("SOFTHCA_MAP_MLOCK");

	mlock_on = s && !strcmp(s, "1");
}

/* The locked parts of [s, e) if SOFTHCA_MAP_MLOCK says to keep them. */
static void locks_read(uintptr_t s, uintptr_t e, struct shca_lock_runs *r)
{
	pthread_once(&mlock_once, mlock_env);
	r->n = 0;
	if (mlock_on)
		shca_lock_runs_read(s, e, r);
}

/* ------------------------------------------------------------------ */
/* State, descriptors, the pool                                        */

/* Our descriptors and bookkeeping, opened by this process; lock held. */
static int state_ready(struct shca_arena *a)
{
	if (state_pid != shca_getpid())
		shca_seg_forget_all();
	state_pid = shca_getpid();
	if (maps_fd < 0)
		maps_fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
	if (pagemap_fd < 0)
		pagemap_fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
	if (maps_fd < 0 || pagemap_fd < 0)
		return -EIO;
	if (!pool_ready) {
		struct stat st;

		if (a->pool_fd < 0 || fstat(a->pool_fd, &st))
			return -EIO;
		/* a segment keeps its block's node: no hash by offset */
		if (shca_heap_init_nohash(&pool, PS, POOL_END, PS))
			return -ENOMEM;
		pool_size = (uint64_t)st.st_size;
		pool_dev = st.st_dev;
		pool_ino = st.st_ino;
		pool_ready = true;
		shca_seg_fork_init();
	}
	return 0;
}

/* A child after fork() starts from nothing (seg_fork.c copied what it
 * keeps); also the first use of a process. */
void shca_seg_forget_all(void)
{
	for (uint32_t i = 0; i < shca_nsegs; i++) {
		if (shca_segs[i]->file_fd >= 0)
			close(shca_segs[i]->file_fd);
		free(shca_segs[i]);
	}
	shca_nsegs = 0;
	while (shca_orphans) {
		struct shca_seg *o = shca_orphans;

		shca_orphans = o->next_orphan;
		if (o->file_fd >= 0)
			close(o->file_fd);
		free(o);
	}
	memset(slot_used, 0, sizeof(slot_used));
	if (pool_ready)
		shca_heap_fini(&pool);
	pool_ready = false;
	pool_size = 0;
	if (maps_fd >= 0)
		close(maps_fd);
	if (pagemap_fd >= 0)
		close(pagemap_fd);
	maps_fd = pagemap_fd = -1;
	state_pid = 0;
}

/* Pool bytes given back to the system; they read as zero again. */
static void pool_punch(int fd, uint64_t off, uint64_t len)
{
	if (off < pool_size &&
	    fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
		      (off_t)off, (off_t)len))
		shca_warn("seg: punching pool bytes %llu+%llu: %s",
			  (unsigned long long)off, (unsigned long long)len,
			  strerror(errno));
}

/*
 * A range of the pool that reads as zero: every free range does (what a
 * segment held was punched when it went, or held no data), and so does
 * what ftruncate adds.  Grown by half its size at a time (sparse: the
 * size costs nothing), never shrunk: peers' mappings of it stay valid.
 */
static uint64_t pool_alloc(int fd, uint64_t len, struct shca_heap_blk **blk)
{
	struct shca_heap_todo todo;
	uint64_t off, want;
	bool oom;

	off = shca_heap_alloc_blk(&pool, len, &todo, &oom, blk);
	if (!off)
		return 0;
	if (off + len > pool_size) {
		want = pool_size + pool_size / 2;
		if (want < SEG_CHUNK)
			want = SEG_CHUNK;
		if (want < off + len || want > POOL_END)
			want = off + len;
		if (ftruncate(fd, (off_t)want)) {
			shca_heap_free_blk(&pool, *blk, &todo);
			return 0;
		}
		pool_size = want;
	}
	return off;
}

/* punch: the range may hold data (else the caller knows it reads as
 * zero already). */
static void pool_free(int fd, uint64_t off, uint64_t len, bool punch,
		      struct shca_heap_blk *blk)
{
	struct shca_heap_todo todo;

	if (punch)
		pool_punch(fd, off, len);
	shca_heap_free_blk(&pool, blk, &todo);
}

/* ------------------------------------------------------------------ */
/* The segment list and table                                          */

/* The first segment that ends above va. */
static uint32_t seg_first_above(uintptr_t va)
{
	uint32_t lo = 0, hi = shca_nsegs;

	/* a buffer carved into MRs registers and deregisters in address
	 * order: at the ends of the list, answered without the search
	 * (a cache miss a step, each segment its own allocation) */
	if (!hi || shca_segs[hi - 1]->va + shca_segs[hi - 1]->len <= va)
		return hi;
	if (shca_segs[hi - 1]->va <= va)
		return hi - 1;
	if (shca_segs[0]->va + shca_segs[0]->len > va)
		return 0;
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (shca_segs[mid]->va + shca_segs[mid]->len <= va)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static int seg_slot_take(uint32_t *slot)
{
	for (uint32_t i = 0; i < SHCA_ARENA_SEG_ENTRIES; i++) {
		uint32_t s = (slot_next + i) % SHCA_ARENA_SEG_ENTRIES;

		if (!(slot_used[s / 8] & (1u << (s % 8)))) {
			slot_used[s / 8] |= (uint8_t)(1u << (s % 8));
			slot_next = s + 1;
			*slot = s;
			return 0;
		}
	}
	return -ENOSPC;
}

static void seg_table_write(struct shca_arena *a, const struct shca_seg *s,
			    bool live)
{
	struct shca_seg_shm v;

	memset(&v, 0, sizeof(v));
	if (live) {
		v.gen = s->gen;
		v.va = s->va;
		v.len = s->len;
		v.off = s->off;
		if (s->shmid >= 0) {
			v.file = SHCA_SEG_FILE_SYSV;
			v.ino = (uint64_t)s->shmid;
		} else if (s->file_fd >= 0) {
			v.file = (uint32_t)s->file_fd + 1;
			v.ino = s->file_ino;
		}
	}
	shca_seg_shm_write(&shca_arena_seg_table(a->base)[s->slot], &v);
	/* after the entry: a peer that sees the new generation sees it */
	__atomic_add_fetch(&shca_arena_hdr(a->base)->seg_table_gen, 1,
			   __ATOMIC_RELEASE);
}

/* Room for one more, the segments centred in twice as much. */
static int seg_grow(void)
{
	uint32_t ncap = shca_nsegs ? shca_nsegs * 2 + 2 : 64;
	uint32_t head = (ncap - shca_nsegs) / 2;
	struct shca_seg **n = malloc(ncap * sizeof(*n));

	if (!n)
		return -ENOMEM;
	if (shca_nsegs)
		memcpy(n + head, shca_segs, shca_nsegs * sizeof(*n));
	free(segs_mem);
	segs_mem = n;
	segs_cap = ncap;
	segs_head = head;
	shca_segs = n + head;
	return 0;
}

static int seg_insert(struct shca_seg *s)
{
	uint32_t i;

	bool front;

	i = seg_first_above(s->va);
	/* the shorter side moves; no room on that side: all recentred */
	front = i < shca_nsegs / 2;
	if (front ? !segs_head : segs_head + shca_nsegs == segs_cap) {
		if (seg_grow())
			return -ENOMEM;
	}
	if (front) {
		shca_segs--;
		segs_head--;
		memmove(shca_segs, shca_segs + 1, i * sizeof(*shca_segs));
	} else {
		memmove(shca_segs + i + 1, shca_segs + i,
			(shca_nsegs - i) * sizeof(*shca_segs));
	}
	shca_segs[i] = s;
	shca_nsegs++;
	return 0;
}

static void seg_remove(const struct shca_seg *s)
{
	uint32_t i = seg_first_above(s->va);

	if (i < shca_nsegs && shca_segs[i] == s) {
		if (i < shca_nsegs / 2) {
			memmove(shca_segs + 1, shca_segs,
				i * sizeof(*shca_segs));
			shca_segs++;
			segs_head++;
		} else {
			memmove(shca_segs + i, shca_segs + i + 1,
				(shca_nsegs - i - 1) * sizeof(*shca_segs));
		}
		shca_nsegs--;
	}
}

/* ------------------------------------------------------------------ */
/* Giving memory back                                                  */

/*
 * Whole pages of the program's memory to and from the pool, as a DMA
 * engine moves them: straight to the kernel, not through a sanitizer's
 * pread/pwrite interceptor, which would take the bytes of a page around
 * the program's objects (ASan's redzones) for an overflow.
 */
static ssize_t page_pread(int fd, void *buf, size_t n, off_t off)
{
	return syscall(SYS_pread64, fd, buf, n, off);
}

static ssize_t page_pwrite(int fd, const void *buf, size_t n, off_t off)
{
	return syscall(SYS_pwrite64, fd, buf, n, off);
}

/* The first data byte of pool bytes [pos, end): 1 (at *d), 0 (none), or
 * -errno. */
static int pool_data_at(int fd, uint64_t pos, uint64_t end, off_t *d)
{
	*d = lseek(fd, (off_t)pos, SEEK_DATA);
	if (*d < 0)
		return errno == ENXIO ? 0 : -errno;
	return (uint64_t)*d < end;
}

/*
 * Where the data extent that starts at d ends, at most end: -errno, or
 * the offset.  probe: a SEEK_DATA per page (on data it answers at once,
 * and it never looks past end); else SEEK_HOLE (POOL_GUARD).
 */
static off_t data_end(int fd, off_t d, uint64_t end, bool probe)
{
	off_t h;

	if (!probe) {
		h = lseek(fd, d, SEEK_HOLE);
		if (h < 0)
			return -errno;
		return (uint64_t)h > end ? (off_t)end : h;
	}
	for (h = d + (off_t)PS; (uint64_t)h < end; h += (off_t)PS) {
		off_t x = lseek(fd, h, SEEK_DATA);

		if (x < 0 && errno != ENXIO)
			return -errno;
		if (x != h)
			return h;	/* a hole at h */
	}
	return (off_t)end;
}

/* Copies the data extents of pool bytes [poff, poff + n) to dst, the
 * first at d0. */
static int pool_copy_out(int fd, uint64_t poff, size_t n, char *dst,
			 off_t d0)
{
	uint64_t pos = poff, end = poff + n;

	while (pos < end) {
		off_t d = d0, h;

		if (pos != poff) {
			int ret = pool_data_at(fd, pos, end, &d);

			if (ret <= 0)
				return ret;
		}
		h = data_end(fd, d, end, n <= SMALL);
		if (h < 0)
			return (int)h;
		for (off_t p = d; p < h;) {
			ssize_t r = page_pread(fd, dst + (p - (off_t)poff),
					       (size_t)(h - p), p);

			if (r <= 0)
				return r < 0 ? -errno : -EIO;
			p += r;
		}
		pos = (uint64_t)h;
	}
	return 0;
}

/*
 * Where a chunk's data is copied before it is moved over its place: for a
 * small chunk, a scratch range kept for the purpose (moved with
 * MREMAP_DONTUNMAP, it stays mapped and empty: no mmap per chunk), else a
 * new mapping.  The scratch is made, and the kernel's MREMAP_DONTUNMAP
 * (5.7+) tried on it, once.  Used under shca_seg_lock, or by a forked
 * child's handler (system calls only: seg_fork.c).
 */
#define SCRATCH_LEN	SMALL
static void *scratch;
static bool scratch_tried;

static void scratch_make(void)
{
	void *p, *q;

	scratch_tried = true;
	p = mmap(NULL, SCRATCH_LEN, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED)
		return;
	q = mremap(p, PS, PS, MREMAP_MAYMOVE | MREMAP_DONTUNMAP);
	if (q == MAP_FAILED) {
		munmap(p, SCRATCH_LEN);
		return;
	}
	munmap(q, PS);
	scratch = p;
}

static void *chunk_tmp(size_t n)
{
	void *tmp;

	if (n <= SCRATCH_LEN) {
		if (!scratch_tried)
			scratch_make();
		if (scratch)
			return scratch;
	}
	tmp = mmap(NULL, n, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	return tmp == MAP_FAILED ? NULL : tmp;
}

/* tmp's pages to [c, c + n), in one step; 0 or -errno (tmp given back) */
static int chunk_move(void *tmp, size_t n, uintptr_t c, bool ok)
{
	int flags = MREMAP_MAYMOVE | MREMAP_FIXED;
	int ret = 0;

	if (tmp == scratch)
		flags |= MREMAP_DONTUNMAP;
	if (ok && mremap(tmp, n, n, flags, (void *)c) == MAP_FAILED)
		ret = -errno;
	if (!ok || ret) {
		if (tmp == scratch)
			madvise(tmp, SCRATCH_LEN, MADV_DONTNEED);
		else
			munmap(tmp, n);
	}
	return ret;
}

/*
 * Fresh private anonymous memory over [c, c + n), as a program's own
 * mmap makes it: without MAP_NORESERVE, so that the kernel merges it
 * with the program's mapping around it again (a flag that differs keeps
 * two mappings apart for good: each registration and deregistration of
 * pages in the middle of a buffer left two more mappings behind, on the
 * way to vm.max_map_count).  A range of more than a chunk (a huge sparse
 * buffer, most likely mapped MAP_NORESERVE itself), or one the commit
 * limit refuses, gets MAP_NORESERVE.
 */
static int anon_over(uintptr_t c, size_t n, int prot, bool big)
{
	int flags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED;

	if (!big && mmap((void *)c, n, prot, flags, -1, 0) != MAP_FAILED)
		return 0;
	if (mmap((void *)c, n, prot, flags | MAP_NORESERVE, -1, 0) ==
	    MAP_FAILED)
		return -errno;
	return 0;
}

/*
 * [s, e) is backed by pool bytes from poff: make it private again, a
 * chunk at a time, so that the memory is never held twice for more than
 * a chunk; punch: the pool's copy of each chunk that held data is given
 * back at once (not in a forked child: the pool is its parent's).  A
 * chunk with no data in the pool reads as zero: fresh anonymous memory
 * replaces it in one mmap.
 */
static int restore_range(uintptr_t s, uintptr_t e, int prot, int pool_fd,
			 uint64_t poff, bool punch)
{
	for (uintptr_t c = s; c < e; c += SEG_CHUNK) {
		size_t n = e - c < SEG_CHUNK ? e - c : SEG_CHUNK;
		uint64_t o = poff + (c - s);
		void *tmp;
		off_t d;
		int ret;

		ret = pool_data_at(pool_fd, o, o + n, &d);
		if (ret < 0)
			return ret;
		if (!ret) {
			ret = anon_over(c, n, prot, e - s > SEG_CHUNK);
			if (ret)
				return ret;
			continue;
		}
		tmp = chunk_tmp(n);
		if (!tmp)
			return -ENOMEM;
		ret = pool_copy_out(pool_fd, o, n, tmp, d);
		if (ret) {
			chunk_move(tmp, n, c, false);
			return ret;
		}
		ret = chunk_move(tmp, n, c, true);
		if (ret)
			return ret;
		if (prot != (PROT_READ | PROT_WRITE))
			mprotect((void *)c, n, prot);
		if (punch)
			pool_punch(pool_fd, o, n);
	}
	return 0;
}

/*
 * shca_seg_privatize with the pool's identity known; *whole (if not
 * NULL): every byte of the segment was the pool's and is restored (so
 * that the pool range holds no data any more when punch).
 */
static int privatize(const struct shca_seg *seg, int pool_fd, int mfd,
		     dev_t dev, ino_t ino, bool punch, bool *whole)
{
	uintptr_t c = seg->va, end = seg->va + seg->len;
	struct shca_vma v;
	bool all = true;
	int ret;

	while (c < end) {
		uintptr_t s, e;
		uint64_t poff;

		ret = shca_vma_find(mfd, c, &v);
		if (ret == -ENOENT || (!ret && v.start >= end))
			break;
		if (ret)
			return ret;
		if (v.start > c)
			all = false;		/* a hole */
		s = v.start > c ? v.start : c;
		e = v.end < end ? v.end : end;
		poff = seg->off + (s - seg->va);
		/* only what the pool still backs at the right offset: the
		 * program may have unmapped or replaced a part */
		if (v.shared && v.ino == ino &&
		    v.dev_major == major(dev) && v.dev_minor == minor(dev) &&
		    v.pgoff + (s - v.start) == poff) {
			ret = restore_range(s, e, v.prot, pool_fd, poff, punch);
			if (ret)
				return ret;
		} else {
			all = false;
		}
		c = v.end;
	}
	if (whole)
		*whole = all && c >= end;
	return 0;
}

int shca_seg_privatize(const struct shca_seg *seg, int pool_fd, int mfd,
		       bool punch)
{
	struct stat st;

	if (fstat(pool_fd, &st))
		return -errno;
	return privatize(seg, pool_fd, mfd, st.st_dev, st.st_ino, punch,
			 NULL);
}

/* Frees a segment no MR holds (any lanes drained); lock held. */
static void seg_release(struct shca_arena *a, struct shca_seg *s)
{
	struct shca_lock_runs locks;
	bool whole;
	int ret;

	if (s->orphan) {
		struct shca_seg **pp = &shca_orphans;

		while (*pp != s)
			pp = &(*pp)->next_orphan;
		*pp = s->next_orphan;
	} else {
		seg_table_write(a, s, false);
	}
	if (s->file_fd >= 0 || s->shmid >= 0) {
		/* the program's own file or segment: nothing to give back
		 * but our descriptor */
		if (s->dontfork && !s->orphan)
			madvise((void *)s->va, s->len, MADV_DOFORK);
		if (s->file_fd >= 0)
			close(s->file_fd);
		goto out;
	}
	/* what the program locked stays locked (the private memory put
	 * back is not) */
	locks_read(s->va, s->va + s->len, &locks);
	ret = privatize(s, a->pool_fd, maps_fd, pool_dev, pool_ino, true,
			&whole);
	shca_lock_runs_apply(&locks);
	if (ret)	/* the memory stays in the pool: its range too */
		shca_warn("seg: %#lx+%zu stays shared memory: %s",
			  (unsigned long)s->va, s->len, strerror(-ret));
	else	/* punched as it was restored where it held data; the parts
		 * no longer mapped here (if any) now */
		pool_free(a->pool_fd, s->off, s->len, !whole, s->pool_blk);
out:
	slot_used[s->slot / 8] &= (uint8_t)~(1u << (s->slot % 8));
	seg_remove(s);
	free(s);
}

/* ------------------------------------------------------------------ */
/* Making memory shareable                                             */

/* One part of an uncovered run and the protection to give it back. */
struct part {
	uintptr_t start, end;
	int prot;
	int fd;			/* -1: private memory; else its file */
	int shmid;		/* -1; else its System V segment */
	dev_t dev;		/* ... that segment's mount */
	uint64_t foff;		/* ... and start's offset in it */
};

/* Shared as it is (a file or a System V segment), not re-backed. */
static bool part_in_place(const struct part *pt)
{
	return pt->fd >= 0 || pt->shmid >= 0;
}

/* PLAN_INLINE parts (the usual MR: one) need no allocation */
#define PLAN_INLINE	4
struct plan {
	struct part *parts;		/* inline or allocated */
	uint32_t nparts, cap;
	uint32_t nruns;
	struct part inline_parts[PLAN_INLINE];
};

static bool plan_add(struct plan *p, uintptr_t s, uintptr_t e, int prot,
		     const struct part *in_place)
{
	if (!p->parts) {
		p->parts = p->inline_parts;
		p->cap = PLAN_INLINE;
	}
	if (p->nparts == p->cap) {
		uint32_t ncap = p->cap * 2;
		struct part *n = malloc(ncap * sizeof(*n));

		if (!n)
			return false;
		memcpy(n, p->parts, p->nparts * sizeof(*n));
		if (p->parts != p->inline_parts)
			free(p->parts);
		p->parts = n;
		p->cap = ncap;
	}
	p->parts[p->nparts++] = in_place ?
		(struct part){ s, e, prot, in_place->fd, in_place->shmid,
			       in_place->dev, in_place->foff } :
		(struct part){ s, e, prot, -1, -1, 0, 0 };
	return true;
}

/* The calling thread's own stack (not the main one: its VMA is named):
 * our own stores to it would race with the copy. */
static bool on_my_stack(uintptr_t s, uintptr_t e)
{
	/* a thread's stack does not move: asked once per thread */
	/* FREE: the main thread (its stack's VMA is named: refused as
	 * [stack]) or no bounds known; NONE: not even the attributes */
	static __thread enum { UNKNOWN, FREE, BOUNDS, NONE } kind;
	static __thread uintptr_t lo, hi;

	if (kind == UNKNOWN) {
		pthread_attr_t at;
		void *sa;
		size_t sz;

		if (syscall(SYS_gettid) == getpid()) {
			kind = FREE;
		} else if (pthread_getattr_np(pthread_self(), &at)) {
			kind = NONE;	/* not known: never shared */
		} else {
			kind = FREE;
			if (!pthread_attr_getstack(&at, &sa, &sz)) {
				lo = (uintptr_t)sa;
				hi = lo + sz;
				kind = BOUNDS;
			}
			pthread_attr_destroy(&at);
		}
	}
	if (kind == FREE)
		return false;
	return kind == NONE || (s < hi && e > lo);
}

/* Can this mapping be replaced by a shared one?  NULL, or why not. */
static const char *vma_refusal(const struct shca_vma *v)
{
	if (v->shared)
		return "shared mapping";
	if (v->ino || v->dev_major || v->dev_minor)
		return "file mapping";
	if (v->page_size != PS)
		return "hugetlb mapping";
	if (!(v->prot & PROT_READ))
		return "unreadable";
	if (v->name[0] && strcmp(v->name, "[heap]") &&
	    strncmp(v->name, "[anon:", 6))
		return v->name;		/* [stack], [vdso], ... */
	return NULL;
}

/* The parts of the uncovered run [s, e), or why it cannot be shared. */
static const char *plan_run(struct plan *p, uintptr_t s, uintptr_t e)
{
	static char why[300];
	struct shca_vma v;
	uintptr_t c = s;

	if (on_my_stack(s, e))
		return "the calling thread's stack";
	while (c < e) {
		struct part ip = { .fd = -1, .shmid = -1 };
		uintptr_t pe;
		const char *no;

		if ((!shca_vma_noted(c, &v) && shca_vma_find(maps_fd, c, &v)) ||
		    v.start > c)
			return "not mapped";
		pe = v.end < e ? v.end : e;
		no = vma_refusal(&v);
		/* already shared: its own segment, as it is (seg_file.c) */
		if (no && v.shared) {
			no = shca_seg_file_open(&v, c, pe, &ip.fd, &ip.foff,
						&ip.shmid);
			ip.dev = makedev(v.dev_major, v.dev_minor);
		}
		if (no) {
			snprintf(why, sizeof(why), "%s", no);
			return why;
		}
		if (!plan_add(p, c, pe, v.prot,
			      part_in_place(&ip) ? &ip : NULL)) {
			if (ip.fd >= 0)
				close(ip.fd);
			return "out of memory";
		}
		/* its own, and it splits a run in two */
		if (part_in_place(&ip))
			p->nruns += 2;
		c = v.end;
	}
	p->nruns++;
	return NULL;
}

struct copy_arg {
	uintptr_t base;			/* the address of pool byte off */
	int fd;
	uint64_t off;
	uint64_t bytes;
};

/* pwrite, not stores through a mapping: the pool's pages are allocated
 * without a page fault each, and mapped later only where used. */
static int copy_pages(uintptr_t s, uintptr_t e, void *arg)
{
	struct copy_arg *c = arg;

	while (s < e) {
		ssize_t n = page_pwrite(c->fd, (const void *)s, e - s,
					(off_t)(c->off + (s - c->base)));

		if (n <= 0)
			return n < 0 ? -errno : -EIO;
		s += (uintptr_t)n;
		c->bytes += (uint64_t)n;
	}
	return 0;
}

/* A new segment over [s, e), whose parts are parts[0..n): 0 or -errno
 * (nothing changed). */
static int seg_create(struct shca_arena *a, uintptr_t s, uintptr_t e,
		      const struct part *parts, uint32_t n, bool dontfork,
		      struct shca_seg **out)
{
	struct copy_arg c = { .base = s, .fd = a->pool_fd };
	size_t len = e - s, done = 0;
	struct shca_lock_runs locks;
	struct shca_heap_blk *blk;
	struct shca_seg *seg;
	uint32_t slot;
	uint64_t off;
	int ret;

	seg = calloc(1, sizeof(*seg));
	if (!seg)
		return -ENOMEM;
	/* what the program locked stays locked (the new mapping is not) */
	locks_read(s, e, &locks);
	ret = seg_slot_take(&slot);
	if (ret)
		goto err_free;
	ret = -ENOSPC;
	off = pool_alloc(a->pool_fd, len + POOL_GUARD(len), &blk);
	if (!off)
		goto err_slot;
	c.off = off;
	/* a chunk at a time: the memory is never held twice for more than
	 * a chunk (the mapping frees the original pages).  One part: its
	 * protection at once; several: each one's afterwards */
	for (done = 0; done < len; done += SEG_CHUNK) {
		size_t cn = len - done < SEG_CHUNK ? len - done : SEG_CHUNK;
		int prot = n == 1 ? parts[0].prot : PROT_READ | PROT_WRITE;

		ret = shca_pages_scan(pagemap_fd, s + done, s + done + cn,
				      copy_pages, &c);
		/* the step that replaces the memory: all or nothing */
		if (!ret && mmap((void *)(s + done), cn, prot,
				 MAP_SHARED | MAP_FIXED, a->pool_fd,
				 (off_t)(off + done)) == MAP_FAILED)
			ret = -errno;
		if (ret)
			goto err_undo;
	}
	for (uint32_t i = 0; n > 1 && i < n; i++)
		if (parts[i].prot != (PROT_READ | PROT_WRITE))
			mprotect((void *)parts[i].start,
				 parts[i].end - parts[i].start, parts[i].prot);
	if (dontfork)
		madvise((void *)s, len, MADV_DONTFORK);
	shca_lock_runs_apply(&locks);
	seg->file_fd = -1;
	seg->shmid = -1;
	seg->va = s;
	seg->len = len;
	seg->off = off;
	seg->pool_blk = blk;
	seg->gen = next_gen++;
	seg->slot = slot;
	seg->dontfork = dontfork;
	if (seg_insert(seg)) {
		/* in place already: give it back as a free segment would */
		seg_release(a, seg);
		return -ENOMEM;
	}
	seg_table_write(a, seg, true);
	shca_stat_add(shca_stat_proc(), SHCA_STAT_MAP_BYTES, len);
	shca_stat_add(shca_stat_proc(), SHCA_STAT_MAP_COPY_BYTES, c.bytes);
	shca_dbg("seg %u gen %llu: %#lx+%zu at pool %llu, %llu bytes copied",
		 slot, (unsigned long long)seg->gen, (unsigned long)s, len,
		 (unsigned long long)off, (unsigned long long)c.bytes);
	*out = seg;
	return 0;

err_undo:
	/* the chunks already in the pool go back, protections too */
	if (done && restore_range(s, s + done, PROT_READ | PROT_WRITE,
				  a->pool_fd, off, false)) {
		/* the pool range still backs memory: it stays taken */
		shca_warn("seg: %#lx+%zu stays shared memory",
			  (unsigned long)s, done);
		goto err_slot;
	}
	for (uint32_t i = 0; i < n; i++)
		if (parts[i].prot != (PROT_READ | PROT_WRITE) &&
		    parts[i].start < s + done)
			mprotect((void *)parts[i].start,
				 parts[i].end - parts[i].start, parts[i].prot);
	shca_lock_runs_apply(&locks);
	pool_free(a->pool_fd, off, len, true, blk);
err_slot:
	slot_used[slot / 8] &= (uint8_t)~(1u << (slot % 8));
err_free:
	free(seg);
	return ret;
}

/* A segment over [s, e) of the program's own file part->fd (taken over
 * on success) or System V segment part->shmid, as it is: 0 or -errno
 * (nothing changed). */
static int seg_file_create(struct shca_arena *a, const struct part *part,
			   bool dontfork, struct shca_seg **out)
{
	struct shca_seg *seg;
	struct stat st;
	uint32_t slot;
	int ret;

	if (part->shmid >= 0) {
		st.st_ino = (ino_t)part->shmid;
		st.st_dev = part->dev;
	} else if (fstat(part->fd, &st)) {
		return -errno;
	}
	seg = calloc(1, sizeof(*seg));
	if (!seg)
		return -ENOMEM;
	ret = seg_slot_take(&slot);
	if (ret) {
		free(seg);
		return ret;
	}
	seg->va = part->start;
	seg->len = part->end - part->start;
	seg->off = part->foff;
	seg->gen = next_gen++;
	seg->slot = slot;
	seg->dontfork = dontfork;
	seg->file_fd = part->fd;
	seg->shmid = part->shmid;
	seg->file_ino = (uint64_t)st.st_ino;
	seg->file_dev = st.st_dev;
	if (seg_insert(seg)) {
		slot_used[slot / 8] &= (uint8_t)~(1u << (slot % 8));
		free(seg);
		return -ENOMEM;
	}
	if (dontfork)
		madvise((void *)seg->va, seg->len, MADV_DONTFORK);
	seg_table_write(a, seg, true);
	shca_stat_add(shca_stat_proc(), SHCA_STAT_MAP_FILE_BYTES, seg->len);
	shca_dbg("seg %u gen %llu: %#lx+%zu in place, %s %llu at %llu",
		 slot, (unsigned long long)seg->gen, (unsigned long)seg->va,
		 seg->len, seg->shmid >= 0 ? "System V shmid" : "file ino",
		 (unsigned long long)seg->file_ino,
		 (unsigned long long)seg->off);
	*out = seg;
	return 0;
}

/* Drops the references a hold took; lock held. */
static void hold_put(struct shca_arena *a, struct shca_seg_hold *h)
{
	for (uint32_t i = 0; i < h->n; i++)
		if (!h->seg[i]->refs || !--h->seg[i]->refs)
			seg_release(a, h->seg[i]);
	free(h);
}

/*
 * Does seg still back [s, e) (a part of it)?  The program may have
 * unmapped or replaced registered memory under an MR (free, then a new
 * allocation at the same address): those pages are no longer the pool's.
 */
static bool seg_backs(const struct shca_seg *seg, uintptr_t s, uintptr_t e)
{
	bool file = seg->file_fd >= 0 || seg->shmid >= 0;
	uint64_t ino = file ? seg->file_ino : (uint64_t)pool_ino;
	dev_t dev = file ? seg->file_dev : pool_dev;
	struct shca_vma v;
	uintptr_t c = s;

	while (c < e) {
		if (shca_vma_find(maps_fd, c, &v) || v.start > c ||
		    !v.shared || v.ino != ino ||
		    v.dev_major != major(dev) || v.dev_minor != minor(dev) ||
		    v.pgoff + (c - v.start) != seg->off + (c - seg->va))
			return false;
		c = v.end;
	}
	return true;
}

/*
 * seg no longer holds the pages at its address: out of the list by va
 * (the pages get segments of their own if registered again) and out of
 * the arena's table (a peer's access by address finds the memory there
 * now, as a CMA access would); kept until its last MR goes.  Lock held.
 */
static void seg_orphan(struct shca_arena *a, struct shca_seg *seg)
{
	seg_table_write(a, seg, false);
	seg_remove(seg);
	seg->orphan = true;
	seg->next_orphan = shca_orphans;
	shca_orphans = seg;
	shca_dbg("seg %u gen %llu: %#lx+%zu replaced under its MRs",
		 seg->slot, (unsigned long long)seg->gen,
		 (unsigned long)seg->va, seg->len);
}

/*
 * The whole pages inside [addr, addr + len): [*s, *e), or false if there
 * is none.  Only those are re-backed.  A page the MR shares with other
 * memory stays private (its bytes go by CMA): copying it into the pool
 * and mapping the copy over it loses what any thread stores there in the
 * meantime, and a heap page holds malloc's own free-list words and other
 * objects that the program, and softhca's engine and CM threads, write
 * at any time (a qperf client aborted with "malloc(): unsorted double
 * linked list corrupted" one CI run in five).
 */
static bool page_range(const void *addr, size_t len, uintptr_t *s,
		       uintptr_t *e)
{
	*s = ((uintptr_t)addr + PS - 1) & ~(PS - 1);
	*e = ((uintptr_t)addr + len) & ~(PS - 1);
	return (uintptr_t)addr + len >= (uintptr_t)addr && *s < *e;
}

/* Lock held: the MR's page range [s, e) in segments, references taken
 * in *hold; NULL or why not (nothing changed then). */
static const char *map_locked(struct shca_arena *a, uintptr_t s,
			      uintptr_t e, bool dontfork,
			      struct shca_seg_hold **hold)
{
	struct shca_seg *created_inline[PLAN_INLINE];
	struct shca_seg **created = NULL;
	struct plan p = { 0 };
	const char *why = NULL;
	uintptr_t c = s;
	uint32_t i, k, made = 0;

	if (state_ready(a))
		return "no /proc/self/maps or pagemap";
	/* what is covered, and can the rest be shared? */
	i = seg_first_above(c);
	while (c < e && !why) {
		if (i < shca_nsegs && shca_segs[i]->va <= c) {
			struct shca_seg *o = shca_segs[i];
			uintptr_t oe = o->va + o->len;

			if (!seg_backs(o, c, oe < e ? oe : e)) {
				seg_orphan(a, o);	/* shifts the rest */
				continue;
			}
			c = oe;
			i++;
			continue;
		}
		uintptr_t re = i < shca_nsegs && shca_segs[i]->va < e ?
			       shca_segs[i]->va : e;

		why = plan_run(&p, c, re);
		c = re;
	}
	/* the notes describe the memory before this call changes it */
	shca_vma_note_end();
	if (!why && shca_nsegs + p.nruns > SHCA_ARENA_SEG_ENTRIES)
		why = "segment table full";
	if (!why && p.nruns) {
		created = p.nparts <= PLAN_INLINE ? created_inline :
			  calloc(p.nparts, sizeof(*created));
		if (!created)
			why = "out of memory";
	}
	/* one segment per run of adjacent parts */
	for (k = 0; !why && k < p.nparts; ) {
		uint32_t j = k + 1;
		int ret;

		if (part_in_place(&p.parts[k])) {
			ret = seg_file_create(a, &p.parts[k], dontfork,
					      &created[made]);
			if (!ret)
				p.parts[k].fd = -1;	/* the segment's */
		} else {
			while (j < p.nparts && !part_in_place(&p.parts[j]) &&
			       p.parts[j].start == p.parts[j - 1].end)
				j++;
			ret = seg_create(a, p.parts[k].start,
					 p.parts[j - 1].end, p.parts + k,
					 j - k, dontfork, &created[made]);
		}
		if (ret) {
			why = ret == -ENOSPC ? "pool or table full" :
					       "remap failed";
			shca_dbg("seg: %#lx-%#lx: %s",
				 (unsigned long)p.parts[k].start,
				 (unsigned long)p.parts[j - 1].end,
				 strerror(-ret));
			break;
		}
		made++;
		k = j;
	}
	if (why) {
		/* what this call made goes back: nothing changed */
		for (k = 0; k < made; k++)
			seg_release(a, created[k]);
	} else {
		uint32_t first = seg_first_above(s), n = 0;

		while (first + n < shca_nsegs && shca_segs[first + n]->va < e)
			n++;
		*hold = malloc(sizeof(**hold) + n * sizeof((*hold)->seg[0]));
		if (*hold) {
			(*hold)->n = n;
			for (i = 0; i < n; i++) {
				(*hold)->seg[i] = shca_segs[first + i];
				shca_segs[first + i]->refs++;
			}
		} else {
			why = "out of memory";
			for (k = 0; k < made; k++)
				if (!created[k]->refs)
					seg_release(a, created[k]);
		}
	}
	if (created != created_inline)
		free(created);
	for (k = 0; k < p.nparts; k++)
		if (p.parts[k].fd >= 0)
			close(p.parts[k].fd);
	if (p.parts != p.inline_parts)
		free(p.parts);
	return why;
}

struct shca_seg_hold *shca_seg_map(const void *addr, size_t len,
				   bool dontfork)
{
	struct shca_seg_hold *hold = NULL;
	struct shca_arena *a;
	const char *why;
	uintptr_t s, e;

	if (!shca_map_enabled()) {
		why = "SOFTHCA_MAP=0";
	} else if (!(a = shca_arena_self())) {
		why = "no arena";
	} else if (!page_range(addr, len, &s, &e)) {
		why = "no whole page of its own";
	} else {
		pthread_mutex_lock(&shca_seg_lock);
		why = map_locked(a, s, e, dontfork, &hold);
		pthread_mutex_unlock(&shca_seg_lock);
	}
	if (why) {
		shca_stat_add(shca_stat_proc(), SHCA_STAT_MR_CMA, 1);
		shca_dbg("mr %p+%zu: CMA (%s)", addr, len, why);
		return NULL;
	}
	shca_stat_add(shca_stat_proc(), SHCA_STAT_MR_MAPPED, 1);
	shca_dbg("mr %p+%zu: mapped", addr, len);
	return hold;
}

void shca_seg_unmap(struct shca_seg_hold *h)
{
	struct shca_arena *a = shca_arena_self();

	if (!h)
		return;
	pthread_mutex_lock(&shca_seg_lock);
	/* a forked child forgot its parent's segments (seg_fork.c) */
	if (a && state_pid == shca_getpid())
		hold_put(a, h);
	else
		free(h);
	pthread_mutex_unlock(&shca_seg_lock);
}

/* ------------------------------------------------------------------ */
/* The drain                                                           */

/* Drains read the busy bitmap under the read side; the tidy that clears
 * bits runs alone (a drain reading a bit cleared for a moment would miss
 * the lane it stands for). */
static pthread_rwlock_t drain_lock = PTHREAD_RWLOCK_INITIALIZER;

/* A child of fork() has one thread: no drain or tidy runs in it, whatever
 * the parent's other threads held. */
static void drain_fork_child(void)
{
	drain_lock = (pthread_rwlock_t)PTHREAD_RWLOCK_INITIALIZER;
}

static pthread_once_t drain_once = PTHREAD_ONCE_INIT;

static void (*drain_hook)(uint32_t key);

void shca_seg_set_drain_hook(void (*fn)(uint32_t key))
{
	__atomic_store_n(&drain_hook, fn, __ATOMIC_RELEASE);
}

/* This process's lanes of key that wait on a socket, let go (the hook;
 * again while a lane is waited for: a READ response being queued when
 * the drain began takes its lane into the queue after the first call). */
static void drain_own(uint32_t key)
{
	void (*hook)(uint32_t) = __atomic_load_n(&drain_hook,
						 __ATOMIC_ACQUIRE);

	if (hook)
		hook(key);
}

static void drain_fork_register(void)
{
	if (pthread_atfork(NULL, NULL, drain_fork_child))
		shca_warn("seg: pthread_atfork failed: a child forked during "
			  "a deregistration may hang in its own");
}

/*
 * One lane whose busy bit is set: wait while it holds key for a live
 * process, without spinning (a preempted peer needs the CPU); a lane of
 * a process that died is freed.  A lane word is a peer's: any pid that is
 * not a live process (0, negative, gone, a zombie its parent has not
 * reaped yet) counts as dead.
 */
static void drain_lane(uint64_t *lane, uint32_t key)
{
	bool warned = false;

	for (unsigned int waits = 0;; waits++) {
		uint64_t w = __atomic_load_n(lane, __ATOMIC_SEQ_CST);
		pid_t pid = SHCA_LANE_PID(w);

		if (!w || SHCA_LANE_KEY(w) != key)
			return;
		if (shca_proc_gone(pid)) {
			__atomic_compare_exchange_n(lane, &w, 0, false,
						    __ATOMIC_SEQ_CST,
						    __ATOMIC_RELAXED);
			continue;
		}
		if (waits < 64) {
			sched_yield();
			continue;
		}
		if (pid == shca_getpid() && waits % 256 == 64)
			drain_own(key);
		if (waits == 64 + 20000 && !warned) {	/* ~1 s */
			shca_warn("dereg of key %#x waits for pid %d", key,
				  (int)pid);
			warned = true;
		}
		nanosleep(&(struct timespec){ 0, 50000 }, NULL);
	}
}

/*
 * Keeps the bitmap short: the bits of free lanes cleared, when no drain
 * reads it (else skipped: a later drain does it).  Clear, then read the
 * lane again: a peer that took it meanwhile either sees the bit clear and
 * sets it, or is seen here and its bit set back (arena.h).
 */
static void lanes_tidy(uint64_t *lanes)
{
	uint64_t *busy = shca_lanes_busy(lanes);

	if (pthread_rwlock_trywrlock(&drain_lock))
		return;
	for (uint32_t g = 0; g < SHCA_ARENA_LANES / 64; g++) {
		uint64_t bits = __atomic_load_n(&busy[g], __ATOMIC_SEQ_CST);

		while (bits) {
			uint32_t b = (uint32_t)__builtin_ctzll(bits);
			uint32_t k = g * 64 + b;

			bits &= bits - 1;
			if (__atomic_load_n(&lanes[k], __ATOMIC_SEQ_CST))
				continue;
			__atomic_fetch_and(&busy[g], ~(1ull << b),
					   __ATOMIC_SEQ_CST);
			if (__atomic_load_n(&lanes[k], __ATOMIC_SEQ_CST))
				__atomic_fetch_or(&busy[g], 1ull << b,
						  __ATOMIC_SEQ_CST);
		}
	}
	pthread_rwlock_unlock(&drain_lock);
}

/*
 * arena.h's lane protocol, the owner's half: the MR entry is already
 * clear, so a peer that claims a lane from now on cannot find the MR; one
 * that claimed before has its lane's busy bit set, and may still be
 * inside its memory.  Wait for those (drain_lane), reading 64 bitmap
 * words rather than 4096 lanes (a bitmap that peers set all of costs the
 * full scan, no more).
 */
void shca_seg_drain(uint32_t key)
{
	struct shca_arena *a = shca_arena_self();
	uint64_t *lanes, *busy;
	bool any = false;

	if (!a)
		return;
	drain_own(key);
	lanes = shca_arena_lanes(a->base);
	busy = shca_lanes_busy(lanes);
	pthread_once(&drain_once, drain_fork_register);
	pthread_rwlock_rdlock(&drain_lock);
	/* the entry's clearing stores before the bitmap's loads */
	shca_full_fence();
	for (uint32_t g = 0; g < SHCA_ARENA_LANES / 64; g++) {
		uint64_t bits = __atomic_load_n(&busy[g], __ATOMIC_SEQ_CST);

		any |= bits != 0;
		while (bits) {
			uint32_t k = g * 64 + (uint32_t)__builtin_ctzll(bits);

			bits &= bits - 1;
			drain_lane(&lanes[k], key);
		}
	}
	pthread_rwlock_unlock(&drain_lock);
	/* no bit set: nothing to tidy (a bit set since is a later
	 * drain's) */
	if (any)
		lanes_tidy(lanes);
}
