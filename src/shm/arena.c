// SPDX-License-Identifier: MIT
/*
 * The process arena: creation, its heap, the shared locks (shca_plock),
 * the MR table's seqlock, and mapping a peer's arena.
 *
 * Only the owner allocates in its arena, so the heap's bookkeeping (shm/heap.c:
 * an allocator that merges freed blocks with their free neighbours) is
 * process-local and needs no shared lock.  Peers map the whole arena
 * read-write: nothing they write there can move a block, free one or make
 * the owner believe a range is free.
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#include "../common/log.h"
#include "../common/util.h"
#include "arena.h"
#include "heap.h"

#define HDR_SIZE	4096
#define PAGE		4096	/* the layout's and the heap's punch unit */

_Static_assert(sizeof(struct shca_arena_hdr) <= HDR_SIZE,
	       "the arena header fits before the QP table");

static pthread_mutex_t arena_lock = PTHREAD_MUTEX_INITIALIZER;
static struct shca_arena the_arena = { .fd = -1 };
static struct shca_heap heap;		/* under arena_lock */
static uint64_t full_warned_ns;		/* under arena_lock */

void shca_plock_init(struct shca_plock *l)
{
	__atomic_store_n(&l->word, 0, __ATOMIC_RELEASE);
}

static long plock_futex(uint32_t *w, int op, uint32_t val,
			const struct timespec *ts)
{
	return syscall(SYS_futex, w, op, val, ts, NULL, 0);
}

/* Is the thread that holds v gone?  (A thread id, not a process id:
 * kill(2) finds a thread by it, EPERM means it lives, as another user;
 * a leader thread that exited, a zombie, is gone: common/proc.c) */
static bool plock_owner_gone(uint32_t v)
{
	pid_t t = (pid_t)(v & SHCA_PLOCK_TID);

	return t && shca_thread_gone(t);
}

/*
 * Take l.  Uncontended: one compare-and-swap.  Contended: mark waiters
 * and sleep on the futex; every 100 ms of sleep, a taker asks whether the
 * owner still lives, and takes a lock whose owner died (what it guarded
 * may be half-written: the structures are designed so that is harmless,
 * indexes move last).  A peer that never lets go stops the takers, as a
 * peer that never releases its CPU would: same user, no privilege gained.
 */
void shca_plock_lock(struct shca_plock *l)
{
	const struct timespec tick = { .tv_nsec = 100 * 1000 * 1000 };
	uint32_t self = (uint32_t)shca_gettid() & SHCA_PLOCK_TID, v = 0;
	int saved = errno;
	bool dead = false;

	if (__atomic_compare_exchange_n(&l->word, &v, self, false,
					__ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
		return;
	for (;;) {
		if (!v || dead) {
			/* free (or its owner died while it held v): taken
			 * unless v changed; others may sleep, keep them marked */
			dead = false;
			if (__atomic_compare_exchange_n(&l->word, &v,
							self | SHCA_PLOCK_WAITERS,
							false, __ATOMIC_ACQUIRE,
							__ATOMIC_RELAXED))
				break;
			continue;
		}
		if (!(v & SHCA_PLOCK_WAITERS) &&
		    !__atomic_compare_exchange_n(&l->word, &v,
						 v | SHCA_PLOCK_WAITERS, false,
						 __ATOMIC_RELAXED,
						 __ATOMIC_RELAXED))
			continue;
		v |= SHCA_PLOCK_WAITERS;
		if (plock_futex(&l->word, FUTEX_WAIT, v, &tick) < 0 &&
		    errno == ETIMEDOUT && plock_owner_gone(v))
			dead = true;
		else
			v = __atomic_load_n(&l->word, __ATOMIC_RELAXED);
	}
	errno = saved;
}

void shca_plock_unlock(struct shca_plock *l)
{
	if (__atomic_exchange_n(&l->word, 0, __ATOMIC_RELEASE) &
	    SHCA_PLOCK_WAITERS)
		plock_futex(&l->word, FUTEX_WAKE, 1, NULL);
}

/* The life lock: a robust mutex in this process's own arena, held by its
 * engine thread; the kernel marks its word when the process ends
 * (shca_arena_life_died).  Only the owner ever locks it. */
static void life_init(pthread_mutex_t *m)
{
	pthread_mutexattr_t a;

	pthread_mutexattr_init(&a);
	pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
	pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
	pthread_mutex_init(m, &a);
	pthread_mutexattr_destroy(&a);
}

static size_t align_up(size_t v, size_t a)
{
	return (v + a - 1) & ~(a - 1);
}

/*
 * SOFTHCA_ARENA_SIZE: the arena's size in bytes (suffix K, M or G), from
 * what the tables need plus SHCA_ARENA_MIN_HEAP up to SHCA_ARENA_MAX_SIZE
 * (what a peer agrees to map); default SHCA_ARENA_SIZE.  The memfd is
 * sparse: only pages in use cost memory, the size is a ceiling.
 */
static uint64_t arena_size(uint64_t heap_off)
{
	const char *s = getenv("SOFTHCA_ARENA_SIZE");
	uint64_t min = heap_off + SHCA_ARENA_MIN_HEAP, v;
	char *end;

	if (!s || !*s)
		return SHCA_ARENA_SIZE;
	errno = 0;
	v = strtoull(s, &end, 0);
	switch (*end) {
	case 'g': case 'G': v = v > (1ull << 34) ? 0 : v << 30; end++; break;
	case 'm': case 'M': v = v > (1ull << 44) ? 0 : v << 20; end++; break;
	case 'k': case 'K': v = v > (1ull << 54) ? 0 : v << 10; end++; break;
	}
	if (errno || *end || v < min || v > SHCA_ARENA_MAX_SIZE) {
		shca_warn_once("SOFTHCA_ARENA_SIZE=%s: expected %llu to %llu "
			       "bytes (K, M, G), using %llu", s,
			       (unsigned long long)min,
			       (unsigned long long)SHCA_ARENA_MAX_SIZE,
			       (unsigned long long)SHCA_ARENA_SIZE);
		return SHCA_ARENA_SIZE;
	}
	return align_up(v, PAGE);
}

static int arena_create(void)
{
	struct shca_arena_hdr *h;
	uint64_t qp_off, mr_off, idx_off, seg_off, lanes_off, imp_off,
		heap_off, size;
	void *base;
	int fd, pool, ret;

	qp_off = HDR_SIZE;
	mr_off = align_up(qp_off + SHCA_ARENA_QP_ENTRIES * sizeof(uint64_t),
			  PAGE);
	idx_off = align_up(mr_off + SHCA_ARENA_MR_ENTRIES *
				    sizeof(struct shca_mr_shm), PAGE);
	seg_off = align_up(idx_off + SHCA_MR_INDEX_BYTES, PAGE);
	lanes_off = align_up(seg_off + (uint64_t)SHCA_ARENA_SEG_ENTRIES *
					       sizeof(struct shca_seg_shm),
			     PAGE);
	imp_off = align_up(lanes_off + SHCA_ARENA_LANE_BYTES, 64);
	heap_off = align_up(imp_off + SHCA_ARENA_PD_IMPS *
					      sizeof(struct shca_pd_imp_shm),
			    PAGE);
	size = arena_size(heap_off);
	/* the pool: empty, grown as memory is registered; never shrunk
	 * (a peer's mapping of it stays valid) */
	pool = memfd_create("softhca-mem", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (pool < 0)
		return -errno;
	if (fcntl(pool, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_SEAL)) {
		int e = errno;

		close(pool);
		return -e;
	}
	fd = memfd_create("softhca-arena", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0) {
		int e = errno;

		close(pool);
		return -e;
	}
	/* sealed at its size: a peer that maps it can trust that size
	 * (shca_arena_map_peer checks the seals) */
	if (ftruncate(fd, (off_t)size) ||
	    fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)) {
		int e = errno;

		close(fd);
		close(pool);
		return -e;
	}
	base = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (base == MAP_FAILED) {
		int e = errno;

		close(fd);
		close(pool);
		return -e;
	}
	ret = shca_heap_init(&heap, heap_off, size, PAGE);
	if (ret) {
		munmap(base, size);
		close(fd);
		close(pool);
		return ret;
	}
	h = base;
	h->magic = SHCA_ARENA_MAGIC;
	h->version = SHCA_ARENA_VERSION;
	h->pid = shca_getpid();
	h->uid = getuid();
	h->size = size;
	h->qp_table_off = qp_off;
	h->mr_table_off = mr_off;
	h->mr_index_off = idx_off;
	h->heap_off = heap_off;
	h->seg_table_off = seg_off;
	h->lanes_off = lanes_off;
	h->pd_imp_off = imp_off;
	life_init(&h->life);
	shca_mr_index_init(&the_arena.mr_index, base, idx_off);

	the_arena.size = size;
	the_arena.fd = fd;
	the_arena.pool_fd = pool;
	the_arena.pid = shca_getpid();
	__atomic_store_n(&the_arena.base, base, __ATOMIC_RELEASE);
	return 0;
}

struct shca_arena *shca_arena_self(void)
{
	int ret = 0;

	if (__atomic_load_n(&the_arena.base, __ATOMIC_ACQUIRE) &&
	    the_arena.pid == shca_getpid())
		return &the_arena;
	pthread_mutex_lock(&arena_lock);
	if (the_arena.base && the_arena.pid != shca_getpid()) {
		/* forked child: the mapping is shared with the parent */
		munmap(the_arena.base, the_arena.size);
		close(the_arena.fd);
		close(the_arena.pool_fd);
		the_arena.base = NULL;
		shca_heap_fini(&heap);	/* the parent's blocks */
	}
	if (!the_arena.base)
		ret = arena_create();
	pthread_mutex_unlock(&arena_lock);
	if (ret) {
		errno = -ret;
		return NULL;
	}
	return &the_arena;
}

void shca_arena_hold_life(void)
{
	void *base = __atomic_load_n(&the_arena.base, __ATOMIC_ACQUIRE);

	/* no arena_lock here: a fork while this thread held it would leave
	 * it taken in the child (the engine's starter made the arena) */
	if (!base || the_arena.pid != shca_getpid())
		return;
	/* a robust mutex of this thread's robust list: the kernel marks it
	 * when the thread ends, which for the engine thread is the
	 * process's end */
	pthread_mutex_lock(&shca_arena_hdr(base)->life);
}

/* The arena's own close of an inherited pool must not hit the descriptor
 * number reused since; called in a forked child only. */
void shca_arena_pool_closed(void)
{
	if (the_arena.base && the_arena.pid != getpid())
		the_arena.pool_fd = -1;
}

/* Out of arena: say so, with the sizes, at most once a second. */
static void arena_full(const struct shca_arena *a, size_t size, bool oom)
{
	struct timespec ts;
	uint64_t now;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	now = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	if (full_warned_ns && now - full_warned_ns < 1000000000ull)
		return;
	full_warned_ns = now;
	if (oom) {
		shca_warn("arena: no memory for the heap's bookkeeping");
		return;
	}
	shca_warn("arena full: %zu bytes asked, largest free block %llu, "
		  "%llu of %llu heap bytes in use in %llu blocks; the arena "
		  "is %zu bytes (SOFTHCA_ARENA_SIZE)", size,
		  (unsigned long long)shca_heap_largest(&heap),
		  (unsigned long long)heap.used_bytes,
		  (unsigned long long)(heap.end - heap.start),
		  (unsigned long long)heap.nused, a->size);
}

/*
 * Zeroed and SHCA_HEAP_ALIGN-aligned.  The heap keeps wholly free pages
 * zero (punched out of the memfd), so only the partial pages it names may
 * hold old bytes: a big ring costs no memory until it is used.
 */
void *shca_arena_alloc(size_t size)
{
	struct shca_arena *a = shca_arena_self();
	struct shca_heap_todo todo;
	uint64_t off;
	bool oom;
	int i;

	if (!a)
		return NULL;
	pthread_mutex_lock(&arena_lock);
	off = shca_heap_alloc(&heap, size, &todo, &oom);
	if (!off) {
		arena_full(a, size, oom);
		pthread_mutex_unlock(&arena_lock);
		errno = ENOMEM;
		return NULL;
	}
	pthread_mutex_unlock(&arena_lock);
	for (i = 0; i < 2; i++)
		if (todo.clear[i].len)
			memset((char *)a->base + todo.clear[i].off, 0,
			       todo.clear[i].len);
	return (char *)a->base + off;
}

/*
 * p must be what shca_arena_alloc returned in this process: anything else
 * (a double free, an offset a peer rewrote) is refused and logged, nothing
 * changes.
 */
void shca_arena_free(void *p)
{
	struct shca_arena *a = &the_arena;
	struct shca_heap_todo todo;
	uint64_t off, len = 0;

	if (!p)
		return;
	pthread_mutex_lock(&arena_lock);
	if (a->base && a->pid != shca_getpid()) {
		/* a forked child and its parent's object: the memfd is the
		 * parent's, its pages still in use there */
		pthread_mutex_unlock(&arena_lock);
		return;
	}
	if (a->base && (char *)p > (char *)a->base &&
	    (char *)p < (char *)a->base + a->size) {
		off = shca_arena_off(a, p);
		len = shca_heap_free(&heap, off, &todo);
		/* give the pages back before another alloc can take them:
		 * they read as zero from now on */
		if (len && todo.punch.len &&
		    madvise((char *)a->base + todo.punch.off, todo.punch.len,
			    MADV_REMOVE))
			memset((char *)a->base + todo.punch.off, 0,
			       todo.punch.len);
	}
	pthread_mutex_unlock(&arena_lock);
	if (!len)
		shca_err("arena free of %p: not a block in use", p);
}

/*
 * Seqlock without fences (ThreadSanitizer understands it): the fields are
 * loaded with acquire, so the second load of seq cannot move before them;
 * the writer stores them with release after making seq odd.
 */
#define MR_READ_SPINS	64	/* retries before yielding the CPU */
#define MR_READ_TRIES	(MR_READ_SPINS + 256)

/*
 * Before each try of a seqlocked read: the writer (the owner) may have
 * been preempted between its stores, so yield to it after a while, and
 * give up in the end (false), as if the entry were free.
 */
static bool seq_try(int *tries)
{
	if (*tries >= MR_READ_SPINS)
		sched_yield();
	return (*tries)++ != MR_READ_TRIES;
}

bool shca_mr_shm_read(const struct shca_mr_shm *e, struct shca_mr_shm *out)
{
	uint32_t s1, s2;
	int tries = 0;

	do {
		if (!seq_try(&tries)) {
			memset(out, 0, sizeof(*out));
			return false;
		}
		s1 = __atomic_load_n(&e->seq, __ATOMIC_ACQUIRE);
		out->key = __atomic_load_n(&e->key, __ATOMIC_ACQUIRE);
		out->access = __atomic_load_n(&e->access, __ATOMIC_ACQUIRE);
		out->pd = __atomic_load_n(&e->pd, __ATOMIC_ACQUIRE);
		out->iova = __atomic_load_n(&e->iova, __ATOMIC_ACQUIRE);
		out->addr = __atomic_load_n(&e->addr, __ATOMIC_ACQUIRE);
		out->length = __atomic_load_n(&e->length, __ATOMIC_ACQUIRE);
		out->flags = __atomic_load_n(&e->flags, __ATOMIC_ACQUIRE);
		out->qpn = __atomic_load_n(&e->qpn, __ATOMIC_ACQUIRE);
		s2 = __atomic_load_n(&e->seq, __ATOMIC_ACQUIRE);
	} while (s1 != s2 || (s1 & 1));
	out->seq = s1;
	return out->key != 0;
}

static void mr_shm_store(struct shca_mr_shm *e, const struct shca_mr_shm *v)
{
	uint32_t s = e->seq;

	__atomic_store_n(&e->seq, s + 1, __ATOMIC_RELAXED);
	__atomic_store_n(&e->key, v->key, __ATOMIC_RELEASE);
	__atomic_store_n(&e->access, v->access, __ATOMIC_RELEASE);
	__atomic_store_n(&e->pd, v->pd, __ATOMIC_RELEASE);
	__atomic_store_n(&e->iova, v->iova, __ATOMIC_RELEASE);
	__atomic_store_n(&e->addr, v->addr, __ATOMIC_RELEASE);
	__atomic_store_n(&e->length, v->length, __ATOMIC_RELEASE);
	__atomic_store_n(&e->flags, v->flags, __ATOMIC_RELEASE);
	__atomic_store_n(&e->qpn, v->qpn, __ATOMIC_RELEASE);
	__atomic_store_n(&e->seq, s + 2, __ATOMIC_RELEASE);
}

void shca_mr_shm_write(struct shca_mr_shm *e, const struct shca_mr_shm *val)
{
	mr_shm_store(e, val);
}

void shca_mr_shm_clear(struct shca_mr_shm *e)
{
	struct shca_mr_shm zero;

	memset(&zero, 0, sizeof(zero));
	mr_shm_store(e, &zero);
}

/* An importer entry (shca_pd_imp_shm): the same seqlock as the MR
 * table's.  false: free (or never steady). */
bool shca_pd_imp_shm_read(const struct shca_pd_imp_shm *e,
			  struct shca_pd_imp_shm *out)
{
	uint32_t s1, s2;
	int tries = 0;

	do {
		if (!seq_try(&tries)) {
			memset(out, 0, sizeof(*out));
			return false;
		}
		s1 = __atomic_load_n(&e->seq, __ATOMIC_ACQUIRE);
		out->pd = __atomic_load_n(&e->pd, __ATOMIC_ACQUIRE);
		out->slot = __atomic_load_n(&e->slot, __ATOMIC_ACQUIRE);
		out->pid = __atomic_load_n(&e->pid, __ATOMIC_ACQUIRE);
		out->shadow = __atomic_load_n(&e->shadow, __ATOMIC_ACQUIRE);
		s2 = __atomic_load_n(&e->seq, __ATOMIC_ACQUIRE);
	} while (s1 != s2 || (s1 & 1));
	return out->pd != 0;
}

void shca_pd_imp_shm_write(struct shca_pd_imp_shm *e,
			   const struct shca_pd_imp_shm *v)
{
	uint32_t s = e->seq;

	__atomic_store_n(&e->seq, s + 1, __ATOMIC_RELAXED);
	__atomic_store_n(&e->pd, v->pd, __ATOMIC_RELEASE);
	__atomic_store_n(&e->slot, v->slot, __ATOMIC_RELEASE);
	__atomic_store_n(&e->pid, v->pid, __ATOMIC_RELEASE);
	__atomic_store_n(&e->shadow, v->shadow, __ATOMIC_RELEASE);
	__atomic_store_n(&e->seq, s + 2, __ATOMIC_RELEASE);
}

/* A segment table entry: the same seqlock as the MR table's. */
bool shca_seg_shm_read(const struct shca_seg_shm *e, struct shca_seg_shm *out)
{
	uint32_t s1, s2;
	int tries = 0;

	do {
		if (!seq_try(&tries)) {
			memset(out, 0, sizeof(*out));
			return false;
		}
		s1 = __atomic_load_n(&e->seq, __ATOMIC_ACQUIRE);
		out->gen = __atomic_load_n(&e->gen, __ATOMIC_ACQUIRE);
		out->va = __atomic_load_n(&e->va, __ATOMIC_ACQUIRE);
		out->len = __atomic_load_n(&e->len, __ATOMIC_ACQUIRE);
		out->off = __atomic_load_n(&e->off, __ATOMIC_ACQUIRE);
		out->file = __atomic_load_n(&e->file, __ATOMIC_ACQUIRE);
		out->ino = __atomic_load_n(&e->ino, __ATOMIC_ACQUIRE);
		s2 = __atomic_load_n(&e->seq, __ATOMIC_ACQUIRE);
	} while (s1 != s2 || (s1 & 1));
	return out->gen != 0;
}

void shca_seg_shm_write(struct shca_seg_shm *e, const struct shca_seg_shm *v)
{
	uint32_t s = e->seq;

	__atomic_store_n(&e->seq, s + 1, __ATOMIC_RELAXED);
	__atomic_store_n(&e->gen, v->gen, __ATOMIC_RELEASE);
	__atomic_store_n(&e->va, v->va, __ATOMIC_RELEASE);
	__atomic_store_n(&e->len, v->len, __ATOMIC_RELEASE);
	__atomic_store_n(&e->off, v->off, __ATOMIC_RELEASE);
	__atomic_store_n(&e->file, v->file, __ATOMIC_RELEASE);
	__atomic_store_n(&e->ino, v->ino, __ATOMIC_RELEASE);
	__atomic_store_n(&e->seq, s + 2, __ATOMIC_RELEASE);
}

/*
 * The process's counters, in its arena header.  Counting never creates the
 * arena: NULL until something else did (or in a forked child, whose
 * inherited mapping is still the parent's arena).
 */
struct shca_stat_block *shca_stat_proc(void)
{
	void *base = __atomic_load_n(&the_arena.base, __ATOMIC_ACQUIRE);

	if (!base || the_arena.pid != shca_getpid())
		return NULL;
	return &shca_arena_hdr(base)->stats;
}

/* Refuse a peer's arena: why, for the log; EPROTO for the caller. */
static void *refuse_arena(pid_t owner, const char *why)
{
	static unsigned int logged;

	if (__atomic_fetch_add(&logged, 1, __ATOMIC_RELAXED) < 4)
		shca_warn("refusing the arena of pid %d: %s", (int)owner, why);
	errno = EPROTO;
	return NULL;
}

/*
 * A peer's arena is another process's memory: it is mapped only if it is
 * a memfd of our uid, sealed against shrinking (so that touching any byte
 * of the mapping cannot raise SIGBUS), exactly as large as its header
 * says, and its header names the owner we connected to and a layout that
 * fits.  The mapping is never larger than the file.
 */
void *shca_arena_map_peer(int fd, pid_t owner, size_t *size)
{
	struct shca_arena_hdr hdr;
	struct stat st;
	uint64_t qp_end, mr_end, seg_end, lanes_end, imp_end;
	void *base;
	int seals;

	seals = fcntl(fd, F_GET_SEALS);
	if (seals < 0)
		return refuse_arena(owner, "not a memfd");
	if (!(seals & F_SEAL_SHRINK))
		return refuse_arena(owner, "not sealed against shrinking");
	if (fstat(fd, &st) || !S_ISREG(st.st_mode))
		return refuse_arena(owner, "not a file");
	if (st.st_uid != getuid())
		return refuse_arena(owner, "another user's memory");
	if (pread(fd, &hdr, sizeof(hdr), 0) != (ssize_t)sizeof(hdr))
		return refuse_arena(owner, "shorter than its header");
	if (hdr.magic != SHCA_ARENA_MAGIC || hdr.version != SHCA_ARENA_VERSION)
		return refuse_arena(owner, "not an arena of this version");
	if (hdr.pid != owner || hdr.uid != getuid())
		return refuse_arena(owner, "its header names another owner");
	qp_end = hdr.qp_table_off +
		 (uint64_t)SHCA_ARENA_QP_ENTRIES * sizeof(uint64_t);
	mr_end = hdr.mr_table_off +
		 (uint64_t)SHCA_ARENA_MR_ENTRIES * sizeof(struct shca_mr_shm);
	seg_end = hdr.seg_table_off + (uint64_t)SHCA_ARENA_SEG_ENTRIES *
					      sizeof(struct shca_seg_shm);
	lanes_end = hdr.lanes_off + SHCA_ARENA_LANE_BYTES;
	imp_end = hdr.pd_imp_off + (uint64_t)SHCA_ARENA_PD_IMPS *
					   sizeof(struct shca_pd_imp_shm);
	if (hdr.size < HDR_SIZE || hdr.size > SHCA_ARENA_MAX_SIZE ||
	    (uint64_t)st.st_size != hdr.size ||
	    hdr.qp_table_off < sizeof(hdr) || hdr.qp_table_off % 8 ||
	    hdr.mr_table_off < sizeof(hdr) || hdr.mr_table_off % 8 ||
	    qp_end > hdr.size || mr_end > hdr.size || hdr.heap_off > hdr.size ||
	    hdr.mr_index_off % 64 || hdr.mr_index_off > hdr.size ||
	    SHCA_MR_INDEX_BYTES > hdr.size - hdr.mr_index_off ||
	    hdr.seg_table_off < sizeof(hdr) || hdr.seg_table_off % 8 ||
	    seg_end > hdr.size || hdr.lanes_off < sizeof(hdr) ||
	    hdr.lanes_off % 8 || lanes_end > hdr.size ||
	    hdr.pd_imp_off < sizeof(hdr) || hdr.pd_imp_off % 8 ||
	    imp_end > hdr.size)
		return refuse_arena(owner, "its size or layout does not fit");
	base = mmap(NULL, hdr.size, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
		    0);
	if (base == MAP_FAILED)
		return NULL;
	*size = hdr.size;
	return base;
}
