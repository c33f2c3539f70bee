/* SPDX-License-Identifier: MIT */
/*
 * Mapped registered memory, the owner's side (issue 13): the pages under
 * an MR are re-backed in place by the pool memfd (shm/arena.h), so that
 * peers on this host can map them and copy with loads and stores.
 *
 * A segment is a page-aligned range of our address space backed by a
 * range of the pool; it never changes once created, and lives while an MR
 * over it does (a reference per MR).  An MR is "mapped" when every page
 * of it lies in segments: shca_seg_map made it so and took the references,
 * shca_seg_unmap gives them back, and the last one turns the memory back
 * into private anonymous memory.
 *
 *   seg.c      segments: create, reference, restore; the drain of lanes
 *   seg_fork.c fork(): the child gets a private copy, never the live pool
 *   seg_vm.c   what the kernel says: mappings, populated pages, locks
 *   seg_file.c memory that is already a shared file: handed as it is
 */
#ifndef SOFTHCA_SHM_SEG_H
#define SOFTHCA_SHM_SEG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/types.h>

/* SOFTHCA_MAP (default 1): 0 leaves registered memory as it is (CMA). */
bool shca_map_enabled(void);

/* What an MR holds: a reference to each segment under it. */
struct shca_seg_hold;

/*
 * Makes the pages of [addr, addr + len) (len 0: the page of addr)
 * shareable.  Non-NULL: every page is in a live segment and the caller
 * holds a reference to each of them; NULL: nothing changed, the MR keeps
 * the CMA path (and the reason is in the debug log).  dontfork: new
 * segments are MADV_DONTFORK (ibv_fork_init: a child gets no copy).
 * Counts the choice (mr_mapped, mr_cma).
 */
struct shca_seg_hold *shca_seg_map(const void *addr, size_t len,
				   bool dontfork);

/* Gives back what shca_seg_map returned (NULL: nothing). */
void shca_seg_unmap(struct shca_seg_hold *h);

/*
 * After the MR entry of key is cleared: waits until no lane of a live
 * process names key; frees the lanes of dead ones (arena.h's protocol).
 */
void shca_seg_drain(uint32_t key);
/*
 * What a drain of key runs first, in the draining thread: lanes of key
 * that this process holds for bytes that may wait (the net path's queued
 * READ responses, net/conn.c) are let go there, their bytes copied, so
 * that the drain never waits on a socket.  Set once.
 */
void shca_seg_set_drain_hook(void (*fn)(uint32_t key));

/* ---- shared by seg.c, seg_fork.c and seg_vm.c ---- */

struct shca_vma {
	uintptr_t start, end;
	int prot;			/* PROT_* */
	bool shared;
	uint64_t ino;
	uint32_t dev_major, dev_minor;
	uint64_t pgoff;			/* byte offset in the file */
	uint64_t page_size;
	char name[256];			/* "" for anonymous memory */
};

int shca_vma_find(int maps_fd, uintptr_t addr, struct shca_vma *v);
/* PROCMAP_QUERY only: 0, -ENOENT (nothing at or above addr), -ENOTTY
 * (the kernel would not say) */
int shca_vma_query(int maps_fd, uintptr_t addr, struct shca_vma *v);

/* One registration's answers, kept in n (the caller's, on its stack: not
 * in the static TLS block, common/tblock.h) for this thread between begin
 * and end (seg_vm.c): shca_vma_noted finds the one that covers addr, if
 * any. */
#define SHCA_VMA_NOTES	4
struct shca_vma_notes {
	unsigned int n;
	struct shca_vma v[SHCA_VMA_NOTES];
};

void shca_vma_note_begin(struct shca_vma_notes *n);
void shca_vma_note_end(void);
bool shca_vma_noted(uintptr_t addr, struct shca_vma *v);

/*
 * seg_file.c: [s, e) lies in v, a shared mapping; is it the program's own
 * file (or System V segment) that peers may map as it is?  NULL: *foff is
 * the offset of s in it, and either *fd is a new read-write descriptor of
 * the file (O_CLOEXEC, the caller's) and *shmid -1, or *shmid is the
 * segment's id and *fd -1; else why not.
 */
const char *shca_seg_file_open(const struct shca_vma *v, uintptr_t s,
			       uintptr_t e, int *fd, uint64_t *foff,
			       int *shmid);

/*
 * The parts of a range the program locked in memory (mlock, mlock2,
 * mlockall's current mappings): a mapping put over them (mmap MAP_FIXED,
 * mremap) starts unlocked (unless mlockall(MCL_FUTURE) holds), so seg.c
 * reads them before it re-backs or gives back a range and locks them
 * again afterwards (seg_vm.c), when SOFTHCA_MAP_MLOCK=1 asks it to.  At most SHCA_LOCK_RUNS runs (VMAs): a
 * range of more locked mappings keeps the first ones locked only.
 */
#define SHCA_LOCK_RUNS	16
struct shca_lock_runs {
	unsigned int n;
	struct {
		uintptr_t start, end;
		bool onfault;		/* mlock2's MLOCK_ONFAULT */
	} run[SHCA_LOCK_RUNS];
};
void shca_lock_runs_read(uintptr_t start, uintptr_t end,
			 struct shca_lock_runs *r);
void shca_lock_runs_apply(const struct shca_lock_runs *r);

typedef int (*shca_pages_fn)(uintptr_t start, uintptr_t end, void *arg);
int shca_pages_scan(int pagemap_fd, uintptr_t start, uintptr_t end,
		    shca_pages_fn fn, void *arg);

struct shca_heap_blk;

struct shca_seg {
	uintptr_t va;
	size_t len;
	uint64_t off;			/* in the pool */
	struct shca_heap_blk *pool_blk;	/* the pool's block (file_fd < 0) */
	uint64_t gen;
	uint32_t slot;			/* in the arena's segment table */
	uint32_t refs;			/* MRs over it */
	bool dontfork;
	/* -1: the pool backs it (off is in the pool); else the program's
	 * own file, in place (seg_file.c): our descriptor of it, its
	 * identity, and off is in that file */
	int file_fd;
	/* -1, or the program's System V segment, in place (seg_file.c):
	 * its id (file_ino too), off in it, file_dev its mount's */
	int shmid;
	uint64_t file_ino;
	dev_t file_dev;
	/* no longer what the pages at va hold (the program unmapped or
	 * replaced them under an MR): out of the list by va and out of the
	 * arena's table, kept until its last MR goes (shca_orphans) */
	bool orphan;
	struct shca_seg *next_orphan;
};

/* seg.c's state, for seg_fork.c (under shca_seg_lock). */
extern pthread_mutex_t shca_seg_lock;
extern struct shca_seg **shca_segs;	/* by va */
extern uint32_t shca_nsegs;
extern struct shca_seg *shca_orphans;

/*
 * Turns the parts of seg's range that the pool still backs at the right
 * offset into private anonymous memory holding the same bytes, with the
 * same protection: 0, or -errno (a part may be left shared).  punch:
 * the pool's copy is given back as it goes.
 */
int shca_seg_privatize(const struct shca_seg *seg, int pool_fd,
		       int maps_fd, bool punch);

void shca_seg_fork_init(void);		/* seg_fork.c: pthread_atfork */
void shca_seg_forget_all(void);		/* seg.c: a child's reset */

#endif
