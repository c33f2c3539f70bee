// SPDX-License-Identifier: MIT
/*
 * A peer's segments, mapped here (see segmap.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <linux/magic.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <sys/stat.h>
#include <sys/vfs.h>

#include "../common/arlock.h"
#include "../common/log.h"
#include "../common/stat.h"
#include "../common/util.h"
#include "arena.h"
#include "seg.h"
#include "segmap.h"

/* a segment that could not be mapped: not tried again until a refresh */
#define MAP_REFUSED ((void *)1)

struct seg {
	uint64_t va, len, off, gen;
	uint64_t ino;		/* file: the inode the entry names */
	uint32_t slot;
	uint32_t file;		/* 0: the pool; SHCA_SEG_FILE_SYSV: a System V
				 * segment (ino its id); else the owner's
				 * fd + 1 */
	void *map;		/* NULL: not yet; MAP_REFUSED; our mapping */
};

struct shca_segmap {
	struct shca_arlock lock;	/* readers: accesses; writer: refresh */
	int pool_fd;
	int owner;		/* its pid: /proc/<owner>/fd for files */
	uint64_t pool_size;	/* the pool's size when last looked at */
	bool pool_looked;	/* ... in this refresh already */
	const struct shca_seg_shm *table;
	const uint64_t *table_gen;	/* the owner's seg_table_gen */
	struct seg *segs;	/* sorted by va, under the write lock */
	unsigned int n;
	unsigned int mapped;	/* segments with a mapping (atomic) */
	/* the table_gen our segs were read at, once read_once: written
	 * under the write lock, read atomically without it */
	uint64_t read_gen;
	bool read_once;
};

/*
 * A pool is mapped only if it cannot hurt us: a memfd of our uid on tmpfs
 * (not hugetlbfs, whose faults raise SIGBUS when the huge pages run out),
 * a regular file sealed against shrinking (a mapping stays backed) and
 * not against writes (our stores would fault).
 */
int shca_segmap_check_pool(int fd)
{
	struct statfs sfs;
	struct stat st;
	int seals = fcntl(fd, F_GET_SEALS);

	if (seals < 0 || !(seals & F_SEAL_SHRINK) ||
	    (seals & (F_SEAL_WRITE | F_SEAL_FUTURE_WRITE)))
		return -EPROTO;
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) || st.st_uid != getuid())
		return -EPROTO;
	if (fstatfs(fd, &sfs) || sfs.f_type != TMPFS_MAGIC)
		return -EPROTO;
	return 0;
}

const char *shca_segmap_check_file(int fd, uint64_t end)
{
	struct statfs sfs;
	struct stat st;
	int seals;

	if (fstat(fd, &st) || !S_ISREG(st.st_mode) || st.st_uid != getuid())
		return "not a regular file of ours";
	if (fstatfs(fd, &sfs) || sfs.f_type != TMPFS_MAGIC)
		return "file not on tmpfs";
	seals = fcntl(fd, F_GET_SEALS);
	if (seals < 0 || !(seals & F_SEAL_SHRINK))
		return "file can shrink (not sealed F_SEAL_SHRINK)";
	if (seals & (F_SEAL_WRITE | F_SEAL_FUTURE_WRITE))
		return "file sealed against writes";
	if ((uint64_t)st.st_size < end)
		return "range beyond the file's end";
	return NULL;
}

struct shca_segmap *shca_segmap_new(int pool_fd,
				    const struct shca_seg_shm *table,
				    const uint64_t *table_gen, int owner)
{
	struct shca_segmap *m = calloc(1, sizeof(*m));

	if (!m)
		return NULL;
	shca_arlock_init(&m->lock);
	m->pool_fd = pool_fd;
	m->owner = owner;
	m->table = table;
	m->table_gen = table_gen;
	return m;
}

/* Our mapping p of s goes: a System V attach is detached whole (shmdt
 * finds nothing but a segment's attach at its address). */
static void map_drop(const struct seg *s, void *p)
{
	if (s->file == SHCA_SEG_FILE_SYSV)
		shmdt((char *)p - s->off);
	else
		munmap(p, s->len);
}

static void seg_unmap(struct shca_segmap *m, struct seg *s)
{
	if (s->map && s->map != MAP_REFUSED) {
		map_drop(s, s->map);
		__atomic_sub_fetch(&m->mapped, 1, __ATOMIC_RELAXED);
	}
	s->map = NULL;
}

void shca_segmap_free(struct shca_segmap *m)
{
	unsigned int i;

	if (!m)
		return;
	for (i = 0; i < m->n; i++)
		seg_unmap(m, &m->segs[i]);
	free(m->segs);
	close(m->pool_fd);
	shca_arlock_destroy(&m->lock);
	free(m);
}

void shca_segmap_rdlock(struct shca_segmap *m)
{
	shca_arlock_rdlock(&m->lock);
}

void shca_segmap_unlock(struct shca_segmap *m)
{
	shca_arlock_rdunlock(&m->lock);
}

unsigned int shca_segmap_mapped(struct shca_segmap *m)
{
	return m ? __atomic_load_n(&m->mapped, __ATOMIC_RELAXED) : 0;
}

/* The last segment that starts at or below va (segs sorted by va). */
static struct seg *seg_search(struct seg *segs, unsigned int n, uint64_t va)
{
	unsigned int lo = 0, hi = n;

	while (lo < hi) {
		unsigned int mid = lo + (hi - lo) / 2;

		if (segs[mid].va <= va)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo ? &segs[lo - 1] : NULL;
}

/*
 * A segment of the owner's own file: opened through /proc (the kernel
 * checks that we may, as for CMA), mapped only if it is the inode the
 * entry names and cannot shrink under us (shca_segmap_check_file).  The
 * descriptor is not kept: the mapping holds the file.  MAP_FAILED (errno)
 * or the mapping.
 */
static void *file_map(struct shca_segmap *m, const struct seg *s)
{
	const char *why;
	struct stat st;
	char path[64];
	void *p = MAP_FAILED;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/fd/%u", m->owner,
		 s->file - 1);
	fd = open(path, O_RDWR | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0)
		return MAP_FAILED;
	if (fstat(fd, &st) || (uint64_t)st.st_ino != s->ino) {
		why = "not the inode the segment names";
	} else {
		why = shca_segmap_check_file(fd, s->off + s->len);
		if (!why)
			p = mmap(NULL, s->len, PROT_READ | PROT_WRITE,
				 MAP_SHARED, fd, (off_t)s->off);
	}
	if (why) {
		shca_dbg("peer %d: file segment refused: %s", m->owner, why);
		errno = EPERM;
	}
	close(fd);
	return p;
}

/* Is the owner in our IPC namespace (a System V id means the same segment
 * to both)?  Asked through /proc, as CMA's permission is. */
static bool same_ipc_ns(int owner)
{
	char path[64], ours[64], theirs[64];
	ssize_t a, b;

	snprintf(path, sizeof(path), "/proc/%d/ns/ipc", owner);
	a = readlink("/proc/self/ns/ipc", ours, sizeof(ours));
	b = readlink(path, theirs, sizeof(theirs));
	return a > 0 && a == b && !memcmp(ours, theirs, (size_t)a);
}

/* The page size of our mapping at p (0: not known). */
static uint64_t map_page_size(const void *p)
{
	struct shca_vma v;
	int mfd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
	uint64_t ps = 0;

	if (mfd >= 0 && !shca_vma_find(mfd, (uintptr_t)p, &v) &&
	    v.start <= (uintptr_t)p)
		ps = v.page_size;
	if (mfd >= 0)
		close(mfd);
	return ps;
}

/*
 * A System V segment of the owner's: attached whole (shmat), used only if
 * it is ours (our user's, in our IPC namespace), holds the entry's range
 * (a segment never shrinks) and has small pages (a hugetlb one without a
 * reservation would raise SIGBUS on a fault here).  MAP_FAILED (errno) or
 * the address of the entry's offset in our attach.
 */
static void *sysv_map(struct shca_segmap *m, const struct seg *s)
{
	const char *why = NULL;
	struct shmid_ds ds;
	char *p;

	if (!same_ipc_ns(m->owner)) {
		shca_dbg("peer %d: System V segment refused: another IPC "
			 "namespace", m->owner);
		errno = EPERM;
		return MAP_FAILED;
	}
	p = shmat((int)s->ino, NULL, 0);
	if (p == (void *)-1)
		return MAP_FAILED;
	/* asked after the attach: the segment cannot go away under it */
	if (shmctl((int)s->ino, IPC_STAT, &ds))
		why = "no IPC_STAT";
	else if (ds.shm_perm.uid != getuid())
		why = "another user's";
	else if ((uint64_t)ds.shm_segsz < s->off + s->len)
		why = "shorter than the entry's range";
	else if (map_page_size(p) != shca_page_size())
		why = "not of small pages";
	if (why) {
		shca_dbg("peer %d: System V segment refused: %s", m->owner,
			 why);
		shmdt(p);
		errno = EPERM;
		return MAP_FAILED;
	}
	return p + s->off;
}

/*
 * Our mapping of s, made on first use: several readers may race to make
 * it, the first one's stays.  Never beyond the pool's size as it was
 * checked (the refresh), which cannot shrink.
 */
static void *seg_map(struct shca_segmap *m, struct seg *s)
{
	void *p = __atomic_load_n(&s->map, __ATOMIC_ACQUIRE), *none = NULL;

	if (p)
		return p;
	if (s->file == SHCA_SEG_FILE_SYSV)
		p = sysv_map(m, s);
	else if (s->file)
		p = file_map(m, s);
	else
		p = mmap(NULL, s->len, PROT_READ | PROT_WRITE, MAP_SHARED,
			 m->pool_fd, (off_t)s->off);
	if (p == MAP_FAILED) {
		shca_dbg("cannot map a segment of %llu bytes: %s",
			 (unsigned long long)s->len, strerror(errno));
		p = MAP_REFUSED;
	}
	/* not MADV_DONTFORK: a forked child that goes on using a QP of its
	 * parent's (undefined, but it worked with CMA) reaches the same
	 * memory through the same peer object instead of faulting */
	if (__atomic_compare_exchange_n(&s->map, &none, p, false,
					__ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
		if (p != MAP_REFUSED)
			__atomic_add_fetch(&m->mapped, 1, __ATOMIC_RELAXED);
		return p;
	}
	if (p != MAP_REFUSED)
		map_drop(s, p);
	return none;
}

/* A miss at va: *len cut to the bytes up to the next segment we hold
 * (s: the last one at or below va, or NULL), where a hit may start. */
static void *seg_miss(struct shca_segmap *m, struct seg *s, uint64_t va,
		      uint64_t *len)
{
	struct seg *next = s ? s + 1 : m->segs;
	uint64_t upto;

	if (s && va - s->va < s->len)
		upto = s->len - (va - s->va);	/* stale or refused: all */
	else if (next < m->segs + m->n)
		upto = next->va - va;
	else
		upto = *len;
	if (*len > upto)
		*len = upto;
	return NULL;
}

void *shca_segmap_find(struct shca_segmap *m, uint64_t va, uint64_t *len)
{
	struct seg *s = seg_search(m->segs, m->n, va);
	uint64_t left;
	char *p;

	if (!s || va - s->va >= s->len)
		return seg_miss(m, s, va, len);
	/* the owner frees a segment only after it drained every MR in it;
	 * a gen that moved means our copy is stale (or a new segment took
	 * the slot): look again */
	if (__atomic_load_n(&m->table[s->slot].gen, __ATOMIC_ACQUIRE) != s->gen)
		return seg_miss(m, s, va, len);
	p = seg_map(m, s);
	if (p == MAP_REFUSED)
		return seg_miss(m, s, va, len);
	left = s->len - (va - s->va);
	if (*len > left)
		*len = left;
	return p + (va - s->va);
}

/*
 * One table entry, if it holds still (the owner's seqlock; an entry being
 * written is skipped, never waited for: the table may be hostile) and
 * describes a segment we could map: page-aligned, no overflow, within the
 * pool (whose size is looked up again when it grew).
 */
static bool seg_read(struct shca_segmap *m, const struct shca_seg_shm *e,
		     struct seg *out)
{
	uint64_t ps = shca_page_size(), end;
	uint32_t s1, s2;
	struct stat st;

	s1 = __atomic_load_n(&e->seq, __ATOMIC_ACQUIRE);
	if (s1 & 1)
		return false;
	out->gen = __atomic_load_n(&e->gen, __ATOMIC_ACQUIRE);
	out->va = __atomic_load_n(&e->va, __ATOMIC_ACQUIRE);
	out->len = __atomic_load_n(&e->len, __ATOMIC_ACQUIRE);
	out->off = __atomic_load_n(&e->off, __ATOMIC_ACQUIRE);
	out->file = __atomic_load_n(&e->file, __ATOMIC_ACQUIRE);
	out->ino = __atomic_load_n(&e->ino, __ATOMIC_ACQUIRE);
	s2 = __atomic_load_n(&e->seq, __ATOMIC_ACQUIRE);
	if (s1 != s2 || !out->gen || !out->len)
		return false;
	if ((out->va | out->len | out->off) & (ps - 1))
		return false;
	if (out->va + out->len < out->va || out->off + out->len < out->off)
		return false;
	out->map = NULL;
	if (out->file == SHCA_SEG_FILE_SYSV)	/* bounded by it (sysv_map) */
		return out->ino <= INT32_MAX &&
		       out->off + out->len <= (uint64_t)INT64_MAX;
	if (out->file)		/* bounded by the file (file_map) */
		return out->off + out->len <= (uint64_t)INT64_MAX;
	end = out->off + out->len;
	if (end > m->pool_size && !m->pool_looked) {
		/* once a refresh: a table of entries beyond the pool costs
		 * one fstat, not one each */
		m->pool_looked = true;
		if (!fstat(m->pool_fd, &st) && st.st_size > 0)
			m->pool_size = (uint64_t)st.st_size;
	}
	if (end > m->pool_size)
		return false;
	return true;
}

static int seg_cmp(const void *a, const void *b)
{
	const struct seg *x = a, *y = b;

	if (x->va != y->va)
		return x->va < y->va ? -1 : 1;
	return x->slot < y->slot ? -1 : x->slot > y->slot;
}

/* The mapping of old segment o, if the new table still has it as it was
 * (slot, gen, range and pool offset): moved over. */
static bool seg_carry(struct seg *segs, unsigned int n, struct seg *o)
{
	struct seg *s = seg_search(segs, n, o->va);
	unsigned int i;

	for (i = s ? (unsigned int)(s - segs) + 1 : 0; i-- > 0 &&
						  segs[i].va == o->va;) {
		s = &segs[i];
		if (s->slot == o->slot && s->gen == o->gen &&
		    s->len == o->len && s->off == o->off &&
		    s->file == o->file && s->ino == o->ino && !s->map) {
			s->map = o->map;
			o->map = NULL;
			return true;
		}
	}
	return false;
}

/* Were our segs read at the table's generation g? */
static bool read_at(struct shca_segmap *m, uint64_t g)
{
	return __atomic_load_n(&m->read_once, __ATOMIC_ACQUIRE) &&
	       __atomic_load_n(&m->read_gen, __ATOMIC_RELAXED) == g;
}

bool shca_segmap_changed(struct shca_segmap *m)
{
	return !read_at(m, __atomic_load_n(m->table_gen, __ATOMIC_ACQUIRE));
}

/*
 * A miss reads the table again only if it changed since we read it (its
 * generation moved): an access to memory the owner never put in a
 * segment (an MR's partial edge pages, shm/seg.c) costs a look at one
 * word, not a scan of the whole table under the write lock.  The
 * generation is the owner's and only a hint: a hostile owner that never
 * moves it loses its peers' mappings of new segments (their accesses go
 * by CMA), one that always moves it costs them a scan per miss, as
 * before; a stale mapping is never used either way (shca_segmap_find
 * checks the entry's gen).
 */
int shca_segmap_refresh(struct shca_segmap *m)
{
	struct seg *segs = NULL, *t, s;
	unsigned int n = 0, cap = 0, i;
	uint64_t g = __atomic_load_n(m->table_gen, __ATOMIC_ACQUIRE);
	int ret = 0;

	if (read_at(m, g))
		return 1;
	shca_arlock_wrlock(&m->lock);
	/* another thread read it meanwhile: look again, no scan */
	g = __atomic_load_n(m->table_gen, __ATOMIC_ACQUIRE);
	if (read_at(m, g))
		goto out;
	shca_stat_add(shca_stat_proc(), SHCA_STAT_SEGMAP_REFRESHES, 1);
	m->pool_looked = false;
	for (i = 0; i < SHCA_ARENA_SEG_ENTRIES; i++) {
		const struct shca_seg_shm *e = &m->table[i];

		if (!__atomic_load_n(&e->gen, __ATOMIC_RELAXED) ||
		    !seg_read(m, e, &s))
			continue;
		s.slot = i;
		if (n == cap) {
			cap = cap ? cap * 2 : 64;
			t = realloc(segs, cap * sizeof(*segs));
			if (!t) {
				ret = -ENOMEM;
				break;
			}
			segs = t;
		}
		segs[n++] = s;
	}
	if (ret) {
		/* keep what we had: a later miss tries again */
		free(segs);
		goto out;
	}
	if (n)
		qsort(segs, n, sizeof(*segs), seg_cmp);
	/* what is gone or changed is unmapped: we do not pin the owner's
	 * freed pool memory */
	for (i = 0; i < m->n; i++) {
		struct seg *o = &m->segs[i];

		if (o->map == MAP_REFUSED || !o->map || !seg_carry(segs, n, o))
			seg_unmap(m, o);
	}
	free(m->segs);
	m->segs = segs;
	m->n = n;
	/* the entries we read were written before g was (or are newer,
	 * and then g moved again) */
	__atomic_store_n(&m->read_gen, g, __ATOMIC_RELAXED);
	__atomic_store_n(&m->read_once, true, __ATOMIC_RELEASE);
out:
	shca_arlock_wrunlock(&m->lock);
	return ret;
}
