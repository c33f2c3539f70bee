/* SPDX-License-Identifier: MIT */
/*
 * A reader-writer lock for data that is read on every work request and
 * written almost never (a peer's segment map, shm/segmap.c).
 *
 * A pthread rwlock costs its readers two locked instructions per read
 * (about 30 ns here, a seventh of an 8-byte WRITE's post).  This lock is
 * asymmetric: a reader names the lock in a slot of its own thread with a
 * plain store and checks that no writer is there -- no locked
 * instruction, no line that other threads write; a writer says it is
 * there, makes every thread of the process pass a full memory barrier
 * (membarrier(2), MEMBARRIER_CMD_PRIVATE_EXPEDITED: the reader's store
 * and its load cannot both have missed the writer's), and waits until no
 * slot names the lock.  A reader that finds a writer, or that already
 * reads another lock of this kind, takes the lock's rwlock for reading
 * instead, which the writer holds while it writes.
 *
 * Without membarrier (an old kernel, a seccomp filter) a reader pays one
 * full fence instead, and under ThreadSanitizer (which knows nothing of
 * membarrier) every reader takes the rwlock.  Readers may nest on one
 * lock; a writer must not hold the lock for reading (as with an rwlock).
 * After fork() the child's slots of threads it does not have are
 * cleared.
 */
#ifndef SOFTHCA_COMMON_ARLOCK_H
#define SOFTHCA_COMMON_ARLOCK_H

#include <pthread.h>

struct shca_arlock {
	pthread_rwlock_t slow;	/* readers that met a writer; the writer */
	int writer;		/* a writer holds, or waits for, the lock */
};

void shca_arlock_init(struct shca_arlock *l);
void shca_arlock_destroy(struct shca_arlock *l);
void shca_arlock_rdlock(struct shca_arlock *l);
void shca_arlock_rdunlock(struct shca_arlock *l);
void shca_arlock_wrlock(struct shca_arlock *l);
void shca_arlock_wrunlock(struct shca_arlock *l);

#endif
