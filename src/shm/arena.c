// SPDX-License-Identifier: MIT
/*
 * The process arena: creation, its heap, the robust locks, the MR table's
 * seqlock, and mapping a peer's arena.
 *
 * Only the owner allocates in its arena, so the heap's bookkeeping (a free
 * list per power-of-two size class, then a bump pointer) is process-local
 * and needs no shared lock.
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "../common/log.h"
#include "../common/util.h"
#include "arena.h"

#define HEAP_MIN_SHIFT	6	/* 64 bytes */
#define HEAP_MAX_SHIFT	30
#define HDR_SIZE	4096

_Static_assert(sizeof(struct shca_arena_hdr) <= HDR_SIZE,
	       "the arena header fits before the QP table");

/* Each heap block starts with this, 64 bytes before the user pointer. */
struct heap_block {
	uint32_t shift;		/* size class */
	uint32_t magic;
	uint64_t next_off;	/* free list link (offset) */
	unsigned char pad[48];
};

#define HEAP_BLOCK_MAGIC 0x68656170u

static pthread_mutex_t arena_lock = PTHREAD_MUTEX_INITIALIZER;
static struct shca_arena the_arena = { .fd = -1 };
static uint64_t heap_top, heap_end;
static uint64_t free_lists[HEAP_MAX_SHIFT + 1];

void shca_plock_init(struct shca_plock *l)
{
	pthread_mutexattr_t a;

	pthread_mutexattr_init(&a);
	pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
	pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
	pthread_mutex_init(&l->m, &a);
	pthread_mutexattr_destroy(&a);
}

void shca_plock_lock(struct shca_plock *l)
{
	int ret = pthread_mutex_lock(&l->m);

	/* a peer died holding it: what it guarded may be half-written, the
	 * structures are designed so that is harmless (indexes move last) */
	if (ret == EOWNERDEAD)
		pthread_mutex_consistent(&l->m);
}

void shca_plock_unlock(struct shca_plock *l)
{
	pthread_mutex_unlock(&l->m);
}

static size_t align_up(size_t v, size_t a)
{
	return (v + a - 1) & ~(a - 1);
}

static int arena_create(void)
{
	struct shca_arena_hdr *h;
	size_t qp_bytes, mr_bytes, idx_bytes;
	void *base;
	int fd;

	fd = memfd_create("softhca-arena", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return -errno;
	/* sealed at its size: a peer that maps it can trust that size
	 * (shca_arena_map_peer checks the seals) */
	if (ftruncate(fd, (off_t)SHCA_ARENA_SIZE) ||
	    fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)) {
		int e = errno;

		close(fd);
		return -e;
	}
	base = mmap(NULL, SHCA_ARENA_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED,
		    fd, 0);
	if (base == MAP_FAILED) {
		int e = errno;

		close(fd);
		return -e;
	}
	h = base;
	qp_bytes = SHCA_ARENA_QP_ENTRIES * sizeof(uint64_t);
	mr_bytes = SHCA_ARENA_MR_ENTRIES * sizeof(struct shca_mr_shm);
	idx_bytes = (size_t)SHCA_MR_INDEX_GROUPS * SHCA_MR_INDEX_WAYS *
		    sizeof(uint64_t);
	h->magic = SHCA_ARENA_MAGIC;
	h->version = SHCA_ARENA_VERSION;
	h->pid = shca_getpid();
	h->uid = getuid();
	h->size = SHCA_ARENA_SIZE;
	h->qp_table_off = HDR_SIZE;
	h->mr_table_off = align_up(HDR_SIZE + qp_bytes, 4096);
	h->mr_index_off = align_up(h->mr_table_off + mr_bytes, 4096);
	h->heap_off = align_up(h->mr_index_off + idx_bytes, 4096);

	the_arena.size = SHCA_ARENA_SIZE;
	the_arena.fd = fd;
	the_arena.pid = shca_getpid();
	__atomic_store_n(&the_arena.base, base, __ATOMIC_RELEASE);
	heap_top = h->heap_off;
	heap_end = SHCA_ARENA_SIZE;
	memset(free_lists, 0, sizeof(free_lists));
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
		the_arena.base = NULL;
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

void *shca_arena_alloc(size_t size)
{
	struct shca_arena *a = shca_arena_self();
	struct heap_block *b;
	uint32_t shift = HEAP_MIN_SHIFT;
	uint64_t off;

	if (!a)
		return NULL;
	while (shift <= HEAP_MAX_SHIFT &&
	       (1ull << shift) < size + sizeof(struct heap_block))
		shift++;
	if (shift > HEAP_MAX_SHIFT) {
		errno = ENOMEM;
		return NULL;
	}
	pthread_mutex_lock(&arena_lock);
	off = free_lists[shift];
	if (off) {
		b = (struct heap_block *)((char *)a->base + off);
		free_lists[shift] = b->next_off;
	} else {
		/* big blocks start on a page, so that free can drop pages */
		if (shift >= 12)
			heap_top = align_up(heap_top, 4096);
		if (heap_end - heap_top < (1ull << shift)) {
			pthread_mutex_unlock(&arena_lock);
			shca_warn("arena full (%zu bytes asked)", size);
			errno = ENOMEM;
			return NULL;
		}
		off = heap_top;
		heap_top += 1ull << shift;
		b = (struct heap_block *)((char *)a->base + off);
	}
	pthread_mutex_unlock(&arena_lock);
	/* fresh heap is zero, and free gave big blocks' pages back (zero
	 * again): clear only what may hold old bytes */
	memset(b, 0, shift >= 16 ? 4096 : 1ull << shift);
	b->shift = shift;
	b->magic = HEAP_BLOCK_MAGIC;
	return b + 1;
}

void shca_arena_free(void *p)
{
	struct shca_arena *a = &the_arena;
	struct heap_block *b;
	uint64_t off;

	if (!p)
		return;
	b = (struct heap_block *)p - 1;
	if (b->magic != HEAP_BLOCK_MAGIC) {
		shca_err("arena free of a bad block %p", p);
		return;
	}
	b->magic = 0;
	/* give the pages back; the block stays reserved for its class */
	if (b->shift >= 16)
		madvise((char *)p + 4096 - sizeof(*b),
			(1ull << b->shift) - 4096, MADV_REMOVE);
	off = shca_arena_off(a, b);
	pthread_mutex_lock(&arena_lock);
	b->next_off = free_lists[b->shift];
	free_lists[b->shift] = off;
	pthread_mutex_unlock(&arena_lock);
}

/*
 * Seqlock without fences (ThreadSanitizer understands it): the fields are
 * loaded with acquire, so the second load of seq cannot move before them;
 * the writer stores them with release after making seq odd.
 */
#define MR_READ_SPINS	64	/* retries before yielding the CPU */
#define MR_READ_TRIES	(MR_READ_SPINS + 256)

bool shca_mr_shm_read(const struct shca_mr_shm *e, struct shca_mr_shm *out)
{
	uint32_t s1, s2;
	int tries = 0;

	do {
		/* the writer (the owner) may have been preempted between
		 * its stores: yield to it after a while, and give up in
		 * the end, as if the entry were free */
		if (tries >= MR_READ_SPINS)
			sched_yield();
		if (tries++ == MR_READ_TRIES) {
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
		s2 = __atomic_load_n(&e->seq, __ATOMIC_ACQUIRE);
	} while (s1 != s2 || (s1 & 1));
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
	uint64_t qp_end, mr_end;
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
	if (hdr.size < HDR_SIZE || hdr.size > (1ull << 40) ||
	    (uint64_t)st.st_size != hdr.size ||
	    hdr.qp_table_off < sizeof(hdr) || hdr.qp_table_off % 8 ||
	    hdr.mr_table_off < sizeof(hdr) || hdr.mr_table_off % 8 ||
	    qp_end > hdr.size || mr_end > hdr.size || hdr.heap_off > hdr.size ||
	    hdr.mr_index_off % 8 || hdr.mr_index_off > hdr.size)
		return refuse_arena(owner, "its size or layout does not fit");
	base = mmap(NULL, hdr.size, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
		    0);
	if (base == MAP_FAILED)
		return NULL;
	*size = hdr.size;
	return base;
}
