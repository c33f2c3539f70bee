// SPDX-License-Identifier: MIT
/*
 * A peer's segment map (src/shm/segmap.c) on its own, against a segment
 * table and a generation word written here as an owner would (or as a
 * hostile one would not): a miss reads the table again only after the
 * generation moved; the generation is a hint, never trusted for what is
 * used (an entry that changed without it is a miss at once); a miss says
 * how far it reaches (up to the next segment held), so that an access is
 * split into mapped and CMA pieces.
 */
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <sys/stat.h>

#include "harness.h"
#include "shm/arena.h"
#include "shm/segmap.h"

#define PAGE	4096u
#define VA1	0x100000000ull	/* segment 1: 2 pages at pool 0 */
#define VA2	0x200000000ull	/* segment 2: 1 page at pool 2 pages */

struct owner {
	struct shca_seg_shm *table;	/* SHCA_ARENA_SEG_ENTRIES */
	uint64_t gen;			/* its seg_table_gen */
	uint64_t next_gen;		/* entry gens */
	struct shca_segmap *m;
	unsigned char *pool;		/* the owner's view of the pool */
};

static void owner_open(struct owner *o)
{
	int fd = memfd_create("segmap-test", MFD_ALLOW_SEALING);

	ASSERT(fd >= 0);
	ASSERT_EQ(ftruncate(fd, 4 * PAGE), 0);
	ASSERT_EQ(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK), 0);
	o->pool = mmap(NULL, 4 * PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
		       0);
	ASSERT(o->pool != MAP_FAILED);
	o->pool[0] = 0x11;
	o->pool[2 * PAGE] = 0x22;
	o->table = calloc(SHCA_ARENA_SEG_ENTRIES, sizeof(*o->table));
	ASSERT(o->table != NULL);
	o->gen = 0;
	o->next_gen = 1;
	o->m = shca_segmap_new(fd, o->table, &o->gen, getpid());
	ASSERT(o->m != NULL);
}

static void owner_close(struct owner *o)
{
	shca_segmap_free(o->m);
	munmap(o->pool, 4 * PAGE);
	free(o->table);
}

/* Slot slot holds [va, va + len) at pool offset off (len 0: free); the
 * generation moves only if bump (a hostile owner's table may not). */
static void owner_set(struct owner *o, uint32_t slot, uint64_t va,
		      uint64_t len, uint64_t off, bool bump)
{
	struct shca_seg_shm v = { 0 };

	if (len) {
		v.gen = o->next_gen++;
		v.va = va;
		v.len = len;
		v.off = off;
	}
	shca_seg_shm_write(&o->table[slot], &v);
	if (bump)
		__atomic_add_fetch(&o->gen, 1, __ATOMIC_RELEASE);
}

/* The first byte at va through the map, or -1 on a miss. */
static int peek(struct owner *o, uint64_t va)
{
	uint64_t len = 1;
	unsigned char *p;
	int v = -1;

	shca_segmap_rdlock(o->m);
	p = shca_segmap_find(o->m, va, &len);
	if (p)
		v = *p;
	shca_segmap_unlock(o->m);
	return v;
}

TEST(refresh_only_after_the_generation_moved)
{
	struct owner o;

	owner_open(&o);
	owner_set(&o, 7, VA1, 2 * PAGE, 0, true);
	ASSERT(shca_segmap_changed(o.m));	/* never read */
	ASSERT_EQ(shca_segmap_refresh(o.m), 0);
	ASSERT(!shca_segmap_changed(o.m));
	ASSERT_EQ(peek(&o, VA1), 0x11);
	/* a miss with the table as it was: nothing to read again */
	ASSERT_EQ(peek(&o, VA2), -1);
	ASSERT_EQ(shca_segmap_refresh(o.m), 1);
	/* a segment added without the generation: not looked for */
	owner_set(&o, 9, VA2, PAGE, 2 * PAGE, false);
	ASSERT_EQ(shca_segmap_refresh(o.m), 1);
	ASSERT_EQ(peek(&o, VA2), -1);
	/* the generation moved: read, found */
	__atomic_add_fetch(&o.gen, 1, __ATOMIC_RELEASE);
	ASSERT(shca_segmap_changed(o.m));
	ASSERT_EQ(shca_segmap_refresh(o.m), 0);
	ASSERT_EQ(peek(&o, VA2), 0x22);
	ASSERT_EQ(peek(&o, VA1), 0x11);
	ASSERT_EQ(shca_segmap_mapped(o.m), 2u);
	owner_close(&o);
}

TEST(a_changed_entry_is_never_used_whatever_the_generation)
{
	struct owner o;

	owner_open(&o);
	owner_set(&o, 7, VA1, 2 * PAGE, 0, true);
	ASSERT_EQ(shca_segmap_refresh(o.m), 0);
	ASSERT_EQ(peek(&o, VA1), 0x11);
	/* freed (as a dereg's segment release) by an owner that does not
	 * move the generation: our mapping stays, unused */
	owner_set(&o, 7, 0, 0, 0, false);
	ASSERT_EQ(peek(&o, VA1), -1);
	ASSERT_EQ(shca_segmap_refresh(o.m), 1);
	ASSERT_EQ(peek(&o, VA1), -1);
	/* the same slot, the same range, a new gen: still not our copy */
	owner_set(&o, 7, VA1, 2 * PAGE, 0, false);
	ASSERT_EQ(peek(&o, VA1), -1);
	/* once the generation moves the stale mapping goes, the new
	 * segment is mapped */
	__atomic_add_fetch(&o.gen, 1, __ATOMIC_RELEASE);
	ASSERT_EQ(shca_segmap_refresh(o.m), 0);
	ASSERT_EQ(peek(&o, VA1), 0x11);
	ASSERT_EQ(shca_segmap_mapped(o.m), 1u);
	owner_close(&o);
}

TEST(a_miss_reaches_to_the_next_segment)
{
	struct owner o;
	uint64_t len;

	owner_open(&o);
	owner_set(&o, 3, VA1, 2 * PAGE, 0, true);
	owner_set(&o, 4, VA2, PAGE, 2 * PAGE, true);
	ASSERT_EQ(shca_segmap_refresh(o.m), 0);
	shca_segmap_rdlock(o.m);
	/* below the first segment: up to it */
	len = 1000;
	ASSERT(shca_segmap_find(o.m, VA1 - 100, &len) == NULL);
	ASSERT_EQ(len, 100u);
	/* a hit is cut at the segment's end */
	len = 3 * PAGE;
	ASSERT(shca_segmap_find(o.m, VA1 + 16, &len) != NULL);
	ASSERT_EQ(len, 2 * PAGE - 16);
	/* between the two: up to the second */
	len = VA2;
	ASSERT(shca_segmap_find(o.m, VA1 + 2 * PAGE, &len) == NULL);
	ASSERT_EQ(len, VA2 - VA1 - 2 * PAGE);
	/* beyond the last: all that was asked */
	len = 5000;
	ASSERT(shca_segmap_find(o.m, VA2 + PAGE, &len) == NULL);
	ASSERT_EQ(len, 5000u);
	shca_segmap_unlock(o.m);
	/* a segment held but changed: its whole rest misses */
	owner_set(&o, 3, 0, 0, 0, true);
	shca_segmap_rdlock(o.m);
	len = 3 * PAGE;
	ASSERT(shca_segmap_find(o.m, VA1 + 8, &len) == NULL);
	ASSERT_EQ(len, 2 * PAGE - 8);
	shca_segmap_unlock(o.m);
	owner_close(&o);
}

TEST(entries_a_peer_cannot_map_are_skipped)
{
	struct owner o;

	owner_open(&o);
	owner_set(&o, 1, VA1 + 8, PAGE, 0, true);		/* unaligned */
	owner_set(&o, 2, VA2, 8 * PAGE, 0, true);		/* past pool */
	owner_set(&o, 3, UINT64_MAX - PAGE + 1, 2 * PAGE, 0, true);
	ASSERT_EQ(shca_segmap_refresh(o.m), 0);
	ASSERT_EQ(peek(&o, VA1 + 8), -1);
	ASSERT_EQ(peek(&o, VA2), -1);
	ASSERT_EQ(peek(&o, UINT64_MAX - 8), -1);
	ASSERT_EQ(shca_segmap_mapped(o.m), 0u);
	ASSERT_EQ(shca_segmap_refresh(o.m), 1);
	owner_close(&o);
}

/* Slot slot names memory of the owner's own as it is: its file word
 * (fd + 1, or SHCA_SEG_FILE_SYSV), inode (or segment id) ino, at offset
 * off, len bytes (a hostile owner may name any). */
static void owner_set_in_place(struct owner *o, uint32_t slot, uint64_t va,
			       uint32_t file, uint64_t ino, uint64_t off,
			       uint64_t len)
{
	struct shca_seg_shm v = { 0 };

	v.gen = o->next_gen++;
	v.va = va;
	v.len = len;
	v.off = off;
	v.file = file;
	v.ino = ino;
	shca_seg_shm_write(&o->table[slot], &v);
	__atomic_add_fetch(&o->gen, 1, __ATOMIC_RELEASE);
}

/* ... the owner's (our) file descriptor fd, one page at file offset off */
static void owner_set_file(struct owner *o, uint32_t slot, uint64_t va,
			   int fd, uint64_t ino, uint64_t off)
{
	owner_set_in_place(o, slot, va, (uint32_t)fd + 1, ino, off, PAGE);
}

static int file_of(unsigned int flags, unsigned int seals, uint64_t *ino)
{
	int fd = memfd_create("segmap-file", flags);
	struct stat st;
	unsigned char c = 0x33;

	ASSERT(fd >= 0);
	ASSERT_EQ(ftruncate(fd, 2 * PAGE), 0);
	ASSERT_EQ(pwrite(fd, &c, 1, PAGE), 1);
	if (seals)
		ASSERT_EQ(fcntl(fd, F_ADD_SEALS, seals), 0);
	ASSERT_EQ(fstat(fd, &st), 0);
	*ino = (uint64_t)st.st_ino;
	return fd;
}

/*
 * A segment of the owner's own file is mapped only if the file cannot
 * shrink under us (sealed F_SEAL_SHRINK), is the inode the entry names,
 * and holds the range: anything else is a miss (CMA), never a mapping
 * that a truncate could turn into SIGBUS.
 */
TEST(file_segments_only_when_they_cannot_shrink)
{
	uint64_t ino_ok, ino_open, ino_ws;
	struct owner o;
	int ok, open_fd, ws;

	owner_open(&o);
	ok = file_of(MFD_ALLOW_SEALING, F_SEAL_SHRINK, &ino_ok);
	open_fd = file_of(0, 0, &ino_open);
	ws = file_of(MFD_ALLOW_SEALING, F_SEAL_SHRINK | F_SEAL_WRITE, &ino_ws);
	owner_set_file(&o, 1, VA1, ok, ino_ok, PAGE);
	owner_set_file(&o, 2, VA1 + 0x10000000, open_fd, ino_open, PAGE);
	owner_set_file(&o, 3, VA1 + 0x20000000, ok, ino_open, PAGE);
	owner_set_file(&o, 4, VA1 + 0x30000000, ok, ino_ok, 2 * PAGE);
	owner_set_file(&o, 5, VA1 + 0x40000000, ws, ino_ws, PAGE);
	owner_set_file(&o, 6, VA1 + 0x50000000, 100000, ino_ok, PAGE);
	ASSERT_EQ(shca_segmap_refresh(o.m), 0);
	ASSERT_EQ(peek(&o, VA1), 0x33);	/* sealed: the same page */
	ASSERT_EQ(peek(&o, VA1 + 0x10000000), -1);	/* can shrink */
	ASSERT_EQ(peek(&o, VA1 + 0x20000000), -1);	/* another inode */
	ASSERT_EQ(peek(&o, VA1 + 0x30000000), -1);	/* past its end */
	ASSERT_EQ(peek(&o, VA1 + 0x40000000), -1);	/* write-sealed */
	ASSERT_EQ(peek(&o, VA1 + 0x50000000), -1);	/* no such fd */
	ASSERT_EQ(shca_segmap_mapped(o.m), 1u);
	close(ok);
	close(open_fd);
	close(ws);
	owner_close(&o);
}

/* ... System V segment id, at offset off, len bytes */
static void owner_set_sysv(struct owner *o, uint32_t slot, uint64_t va,
			   uint64_t id, uint64_t off, uint64_t len)
{
	owner_set_in_place(o, slot, va, SHCA_SEG_FILE_SYSV, id, off, len);
}

/* A new segment of 2 pages (hugetlb: 2 MiB), 0x44 at PAGE; its id. */
static int sysv_of(bool huge)
{
	size_t len = huge ? 2u << 20 : 2 * PAGE;
	int id = shmget(IPC_PRIVATE, len, IPC_CREAT | 0600 |
			(huge ? SHM_HUGETLB : 0));
	unsigned char *p;

	if (id < 0)
		return -1;
	p = shmat(id, NULL, 0);
	ASSERT(p != (void *)-1);
	p[PAGE] = 0x44;
	ASSERT_EQ(shmdt(p), 0);
	return id;
}

/* How many attach the segment now. */
static unsigned long sysv_nattch(int id)
{
	struct shmid_ds ds;

	ASSERT_EQ(shmctl(id, IPC_STAT, &ds), 0);
	return (unsigned long)ds.shm_nattch;
}

/*
 * A System V segment is attached only if it is ours (our user's), holds
 * the whole range and has small pages (a hugetlb one may have no
 * reservation: a fault here would raise SIGBUS); whatever id a hostile
 * owner names, anything else is a miss.  Our attach goes with the map.
 */
TEST(sysv_segments_only_ours_whole_and_small_paged)
{
	int ok = sysv_of(false), gone = sysv_of(false), huge = sysv_of(true);
	int other = -1;
	struct owner o;

	ASSERT(ok >= 0 && gone >= 0);
	ASSERT_EQ(shmctl(gone, IPC_RMID, NULL), 0);	/* no such id now */
	if (getuid() == 0) {
		struct shmid_ds ds;

		other = sysv_of(false);
		ASSERT(other >= 0);
		ASSERT_EQ(shmctl(other, IPC_STAT, &ds), 0);
		ds.shm_perm.uid = 65534;
		ds.shm_perm.mode = 0666;
		ASSERT_EQ(shmctl(other, IPC_SET, &ds), 0);
	}
	owner_open(&o);
	owner_set_sysv(&o, 1, VA1, (uint64_t)ok, PAGE, PAGE);
	owner_set_sysv(&o, 2, VA1 + 0x10000000, (uint64_t)ok, PAGE, 2 * PAGE);
	owner_set_sysv(&o, 3, VA1 + 0x20000000, (uint64_t)gone, 0, PAGE);
	owner_set_sysv(&o, 4, VA1 + 0x30000000, 1ull << 32 | (uint64_t)ok,
		       PAGE, PAGE);
	if (huge >= 0)
		owner_set_sysv(&o, 5, VA1 + 0x40000000, (uint64_t)huge, 0,
			       PAGE);
	if (other >= 0)
		owner_set_sysv(&o, 6, VA1 + 0x50000000, (uint64_t)other, 0,
			       PAGE);
	ASSERT_EQ(shca_segmap_refresh(o.m), 0);
	ASSERT_EQ(peek(&o, VA1), 0x44);			/* its page */
	ASSERT_EQ(sysv_nattch(ok), 1);
	ASSERT_EQ(peek(&o, VA1 + 0x10000000), -1);	/* past its end */
	ASSERT_EQ(peek(&o, VA1 + 0x20000000), -1);	/* no such id */
	ASSERT_EQ(peek(&o, VA1 + 0x30000000), -1);	/* not an id */
	if (huge >= 0) {
		ASSERT_EQ(peek(&o, VA1 + 0x40000000), -1);	/* huge pages */
		ASSERT_EQ(sysv_nattch(huge), 0);
	}
	if (other >= 0) {
		ASSERT_EQ(peek(&o, VA1 + 0x50000000), -1);	/* not ours */
		ASSERT_EQ(sysv_nattch(other), 0);
	}
	ASSERT_EQ(shca_segmap_mapped(o.m), 1u);
	owner_close(&o);
	ASSERT_EQ(sysv_nattch(ok), 0);			/* detached */
	shmctl(ok, IPC_RMID, NULL);
	if (huge >= 0)
		shmctl(huge, IPC_RMID, NULL);
	if (other >= 0)
		shmctl(other, IPC_RMID, NULL);
}

struct map_reader {
	struct owner *o;
	int stop;
	uint64_t hits, wrong;
};

/* Reads through the map in a loop, each read holding the lock across
 * loads from both pages of segment 1. */
static void *map_reader(void *arg)
{
	struct map_reader *r = arg;

	while (!__atomic_load_n(&r->stop, __ATOMIC_ACQUIRE)) {
		uint64_t len = 2 * PAGE, i, sum = 0;
		volatile unsigned char *p;

		shca_segmap_rdlock(r->o->m);
		p = shca_segmap_find(r->o->m, VA1, &len);
		if (p) {
			for (i = 0; i < len; i += 64)
				sum += p[i];
			if (p[0] != 0x11 || sum < 0x11)
				r->wrong++;
			r->hits++;
		}
		shca_segmap_unlock(r->o->m);
	}
	return NULL;
}

/*
 * A refresh unmaps what changed only after the reads under way ended:
 * two threads read segment 1 in a loop while this one rewrites its entry
 * (a new gen: the old mapping is dropped at the refresh, the next read
 * maps it again) and refreshes, 600 times.  A read that a refresh's
 * munmap overtook would fault (the whole test dies).
 */
TEST(a_refresh_waits_for_the_reads_under_way)
{
	struct map_reader r[2];
	pthread_t t[2];
	struct owner o;
	int i;

	owner_open(&o);
	owner_set(&o, 7, VA1, 2 * PAGE, 0, true);
	ASSERT_EQ(shca_segmap_refresh(o.m), 0);
	for (i = 0; i < 2; i++) {
		r[i] = (struct map_reader){ .o = &o };
		ASSERT_EQ(pthread_create(&t[i], NULL, map_reader, &r[i]), 0);
	}
	for (i = 0; i < 600; i++) {
		owner_set(&o, 7, VA1, 2 * PAGE, 0, true);
		ASSERT_EQ(shca_segmap_refresh(o.m), 0);
		if (!(i % 16))
			sched_yield();
	}
	for (i = 0; i < 2; i++) {
		__atomic_store_n(&r[i].stop, 1, __ATOMIC_RELEASE);
		ASSERT_EQ(pthread_join(t[i], NULL), 0);
		ASSERT_EQ(r[i].wrong, 0u);
		ASSERT(r[i].hits > 0);
	}
	owner_close(&o);
}
