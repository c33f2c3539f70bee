// SPDX-License-Identifier: MIT
/*
 * The asymmetric reader-writer lock (arlock.h).
 *
 * Each thread that reads gets a slot, kept in one list that only grows
 * (a slot of a thread that ended is taken by the next new thread); the
 * slot says which lock the thread reads now, and how deep.  The order
 * that makes it a lock (Dekker's): a reader stores its slot, then loads
 * the lock's writer word; a writer stores the writer word, then loads
 * every slot; between each side's store and load a barrier.  The
 * reader's is only the compiler's: the writer's membarrier() makes each
 * thread of the process pass a full barrier while it runs, so either
 * the reader's store is seen by the writer's scan or the reader's load
 * sees the writer.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <linux/membarrier.h>
#include <sys/syscall.h>

#include "arlock.h"
#include "log.h"
#include "util.h"

struct reader {
	struct shca_arlock *active;	/* the lock this thread reads */
	unsigned int depth;		/* ... nested this deep */
	int used;			/* a live thread has the slot */
	struct reader *next;		/* set before the slot is listed */
};

/* ThreadSanitizer knows nothing of membarrier: there every reader takes
 * the rwlock */
#if defined(__SANITIZE_THREAD__)
#define FAST 0
#else
#define FAST 1
#endif

enum barrier_mode {
	BARRIER_MEMBARRIER = 1,	/* readers: a compiler barrier */
	BARRIER_FENCE,		/* readers: a full fence */
};

static struct reader *readers;		/* the head; slots never freed */
static pthread_mutex_t list_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static pthread_key_t key;		/* frees a slot when its thread ends */
static bool key_ok;
static int mode = BARRIER_FENCE;
static __thread struct reader *self;

static long membarrier(int cmd)
{
	return syscall(__NR_membarrier, cmd, 0, 0);
}

static bool membarrier_register(void)
{
	long q = membarrier(MEMBARRIER_CMD_QUERY);

	return q > 0 && (q & MEMBARRIER_CMD_PRIVATE_EXPEDITED) &&
	       !membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED);
}

static void slot_free(struct reader *r)
{
	__atomic_store_n(&r->active, NULL, __ATOMIC_RELEASE);
	r->depth = 0;
	__atomic_store_n(&r->used, 0, __ATOMIC_RELEASE);
}

/* The thread ends (or, in a later destructor, reads again: a new slot). */
static void thread_gone(void *v)
{
	slot_free(v);
	self = NULL;
}

/* Only the forking thread lives on: the other slots are free, and the
 * child is a new process to membarrier. */
static void fork_child(void)
{
	struct reader *r;

	list_lock = (pthread_mutex_t)PTHREAD_MUTEX_INITIALIZER;
	for (r = readers; r; r = r->next)
		if (r != self)
			slot_free(r);
	if (mode == BARRIER_MEMBARRIER && !membarrier_register())
		mode = BARRIER_FENCE;
}

static void init(void)
{
	key_ok = !pthread_key_create(&key, thread_gone);
	if (FAST && membarrier_register())
		mode = BARRIER_MEMBARRIER;
	if (pthread_atfork(NULL, NULL, fork_child))
		shca_warn("arlock: pthread_atfork failed: a forked child's "
			  "writers may wait for its parent's readers");
}

/* This thread's slot; NULL (no memory): the rwlock, always. */
static struct reader *reader_self(void)
{
	struct reader *r = self;

	if (r)
		return r;
	pthread_once(&once, init);
	if (!key_ok)
		return NULL;
	pthread_mutex_lock(&list_lock);
	for (r = readers; r; r = r->next)
		if (!__atomic_load_n(&r->used, __ATOMIC_ACQUIRE))
			break;
	if (!r) {
		r = calloc(1, sizeof(*r));
		if (r) {
			r->next = readers;
			__atomic_store_n(&readers, r, __ATOMIC_RELEASE);
		}
	}
	if (r)
		__atomic_store_n(&r->used, 1, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&list_lock);
	if (r && pthread_setspecific(key, r)) {
		slot_free(r);
		r = NULL;
	}
	self = r;
	return r;
}

void shca_arlock_init(struct shca_arlock *l)
{
	pthread_rwlock_init(&l->slow, NULL);
	l->writer = 0;
}

void shca_arlock_destroy(struct shca_arlock *l)
{
	pthread_rwlock_destroy(&l->slow);
}

void shca_arlock_rdlock(struct shca_arlock *l)
{
	struct reader *r = FAST ? reader_self() : NULL;

	if (r && r->active == l) {
		r->depth++;
		return;
	}
	if (r && !r->active) {
		__atomic_store_n(&r->active, l, __ATOMIC_RELAXED);
		if (mode == BARRIER_MEMBARRIER)
			__atomic_signal_fence(__ATOMIC_SEQ_CST);
		else
			shca_full_fence();
		if (!__atomic_load_n(&l->writer, __ATOMIC_ACQUIRE)) {
			r->depth = 1;
			return;
		}
		__atomic_store_n(&r->active, NULL, __ATOMIC_RELEASE);
	}
	pthread_rwlock_rdlock(&l->slow);
}

void shca_arlock_rdunlock(struct shca_arlock *l)
{
	struct reader *r = FAST ? self : NULL;

	if (r && r->active == l) {
		if (!--r->depth)
			__atomic_store_n(&r->active, NULL, __ATOMIC_RELEASE);
		return;
	}
	pthread_rwlock_unlock(&l->slow);
}

/* Until no slot names l: a reader copies for as long as a page of its
 * source takes to come in; yield, then nap (not a cancellation point). */
static void readers_leave(struct shca_arlock *l)
{
	struct reader *r;

	for (r = __atomic_load_n(&readers, __ATOMIC_ACQUIRE); r; r = r->next) {
		unsigned int n;

		for (n = 0; __atomic_load_n(&r->active, __ATOMIC_ACQUIRE) == l;
		     n++) {
			if (n < 1024)
				sched_yield();
			else
				syscall(SYS_nanosleep,
					&(struct timespec){ 0, 50000 }, NULL);
		}
	}
}

void shca_arlock_wrlock(struct shca_arlock *l)
{
	pthread_rwlock_wrlock(&l->slow);
	if (!FAST)
		return;
	pthread_once(&once, init);
	__atomic_store_n(&l->writer, 1, __ATOMIC_SEQ_CST);
	if (mode != BARRIER_MEMBARRIER)
		shca_full_fence();
	else if (membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED))
		shca_err("arlock: membarrier: %s", strerror(errno));
	readers_leave(l);
}

void shca_arlock_wrunlock(struct shca_arlock *l)
{
	__atomic_store_n(&l->writer, 0, __ATOMIC_RELEASE);
	pthread_rwlock_unlock(&l->slow);
}
