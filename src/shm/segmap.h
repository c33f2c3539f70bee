/* SPDX-License-Identifier: MIT */
/*
 * A peer's segments, mapped here (the requester's side of mapped
 * registered memory, issue 13).  The owner backs registered memory with
 * its pool memfd and says which of its address ranges lie at which pool
 * offsets in its arena's segment table (arena.h); we map those pool
 * ranges MAP_SHARED on first use and reach the owner's memory with loads
 * and stores.
 *
 * Per peer: a sorted copy of the table's live segments, refreshed on a
 * miss when the table changed since it was read (the owner's
 * seg_table_gen moved; then a scan of the whole table: bounded, 65536
 * entries), each with its mapping once it was used.  Nothing in the
 * table is trusted: a segment is mapped only if it is page-aligned, does
 * not overflow, and lies within the pool's size (the pool is sealed
 * against shrinking: no byte of a mapping can raise SIGBUS later).  The
 * generation is a hint only: it decides when to read, never what to
 * use.  An access re-reads the gen of
 * each segment it uses in the table: a changed gen is a miss.
 *
 * A segment may name the program's own file instead of the pool (entry
 * file n > 0, shm/seg_file.c): we open /proc/<owner>/fd/<n - 1> on first
 * use, map it only if it is the inode the entry names and passes
 * shca_segmap_check_file (sealed against shrinking), and close it again;
 * else the segment is refused and its bytes go by CMA.
 *
 * Lock: an access holds the map's read lock while it translates and
 * copies (no mapping goes away under it); a refresh takes the write lock.
 * The lock is common/arlock.h's: a read costs no locked instruction, a
 * refresh a membarrier() and a wait for the accesses under way.
 */
#ifndef SOFTHCA_SHM_SEGMAP_H
#define SOFTHCA_SHM_SEGMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct shca_seg_shm;
struct shca_segmap;

/*
 * Is fd a pool that we may map: a memfd (tmpfs) of our uid, a regular
 * file sealed against shrinking and not against writing?  0 or -EPROTO.
 */
int shca_segmap_check_pool(int fd);

/*
 * Would we map fd, the program's own file that a segment names (shm/
 * seg_file.c; the owner asks too, before it offers one): a regular tmpfs
 * file of our uid, at least end bytes long, sealed against shrinking (no
 * byte of a mapping can raise SIGBUS later) and not against writes.
 * NULL, or why not.
 */
const char *shca_segmap_check_file(int fd, uint64_t end);

/*
 * The segment map of a peer whose pool is pool_fd (taken over: closed by
 * shca_segmap_free) and whose segment table is table (in its arena, its
 * bounds checked by the caller), table_gen its generation word (in its
 * arena's header); NULL (ENOMEM).
 */
struct shca_segmap *shca_segmap_new(int pool_fd,
				    const struct shca_seg_shm *table,
				    const uint64_t *table_gen, int owner);
/* Unmap every segment and close the pool (the peer is dead, unused). */
void shca_segmap_free(struct shca_segmap *m);

void shca_segmap_rdlock(struct shca_segmap *m);
void shca_segmap_unlock(struct shca_segmap *m);

/*
 * Under the read lock: our address of the owner's va, and in *len how
 * many bytes from there lie in the same mapped segment (at most the *len
 * asked); NULL on a miss (no cached live segment with the same gen in the
 * table now, or it cannot be mapped), and then in *len how many bytes
 * from va miss too (up to the next segment we hold; at least one).
 */
void *shca_segmap_find(struct shca_segmap *m, uint64_t va, uint64_t *len);

/*
 * Without the lock: read the owner's segment table again, unmap the
 * segments that are gone or changed, if it changed since we last read
 * it.  0: look again (it was read, by us or another thread); 1: nothing
 * changed, a second look would miss too; -errno.
 */
int shca_segmap_refresh(struct shca_segmap *m);

/* Did the owner's table change since we read it (a refresh may find
 * more)?  Without the lock or under it. */
bool shca_segmap_changed(struct shca_segmap *m);

/* How many segments are mapped now (the tests' and the log's view). */
unsigned int shca_segmap_mapped(struct shca_segmap *m);

#endif
