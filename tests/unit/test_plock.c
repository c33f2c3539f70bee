// SPDX-License-Identifier: MIT
/*
 * shca_plock (shm/arena.c), the lock peers take in each other's arenas:
 * mutual exclusion between processes and threads, a lock whose owner
 * (process or thread) died is taken by the next taker, and a lock whose
 * memory goes away while it is held leaves nothing behind in the taker
 * (glibc's robust mutexes left the lock on the thread's robust list, and
 * the thread's next robust lock wrote into the unmapped memory).
 */
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "harness.h"
#include "shm/arena.h"

struct shared {
	struct shca_plock lock;
	uint64_t inside;	/* takers inside now: never more than 1 */
	uint64_t count;		/* non-atomic increments under the lock */
	uint64_t overlap;	/* times a taker found another inside */
};

static struct shared *shared_map(void)
{
	struct shared *s = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
				MAP_SHARED | MAP_ANONYMOUS, -1, 0);

	ASSERT(s != MAP_FAILED);
	shca_plock_init(&s->lock);
	return s;
}

#define ROUNDS 20000

static void hammer(struct shared *s)
{
	int i;

	for (i = 0; i < ROUNDS; i++) {
		shca_plock_lock(&s->lock);
		if (__atomic_add_fetch(&s->inside, 1, __ATOMIC_RELAXED) != 1)
			__atomic_add_fetch(&s->overlap, 1, __ATOMIC_RELAXED);
		s->count++;
		__atomic_sub_fetch(&s->inside, 1, __ATOMIC_RELAXED);
		shca_plock_unlock(&s->lock);
	}
}

static void *hammer_thread(void *arg)
{
	hammer(arg);
	return NULL;
}

/* Three processes, two threads each: every increment counted once */
TEST(excludes_processes_and_threads)
{
	struct shared *s = shared_map();
	pid_t kids[2];
	pthread_t t;
	int i, st;

	for (i = 0; i < 2; i++) {
		kids[i] = fork();
		ASSERT_GE(kids[i], 0);
		if (!kids[i]) {
			pthread_create(&t, NULL, hammer_thread, s);
			hammer(s);
			pthread_join(t, NULL);
			_exit(0);
		}
	}
	ASSERT_EQ(pthread_create(&t, NULL, hammer_thread, s), 0);
	hammer(s);
	ASSERT_EQ(pthread_join(t, NULL), 0);
	for (i = 0; i < 2; i++) {
		ASSERT_EQ(waitpid(kids[i], &st, 0), kids[i]);
		ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	}
	ASSERT_EQ(s->overlap, 0);
	ASSERT_EQ(s->count, 6ull * ROUNDS);
	ASSERT_EQ(s->lock.word, 0);
}

/* A process killed while it holds the lock: the next taker gets it */
TEST(owner_process_dies)
{
	struct shared *s = shared_map();
	int p[2], st;
	char c;
	pid_t kid;

	ASSERT_EQ(pipe(p), 0);
	kid = fork();
	ASSERT_GE(kid, 0);
	if (!kid) {
		shca_plock_lock(&s->lock);
		ASSERT_EQ(write(p[1], "x", 1), 1);
		pause();
		_exit(0);
	}
	ASSERT_EQ(read(p[0], &c, 1), 1);
	ASSERT_EQ(s->lock.word & SHCA_PLOCK_TID, (uint32_t)kid);
	ASSERT_EQ(kill(kid, SIGKILL), 0);
	ASSERT_EQ(waitpid(kid, &st, 0), kid);
	shca_plock_lock(&s->lock);	/* a hang here fails by timeout */
	ASSERT_EQ(s->lock.word & SHCA_PLOCK_TID,
		  (uint32_t)syscall(SYS_gettid));
	shca_plock_unlock(&s->lock);
	ASSERT_EQ(s->lock.word, 0);
}

static void *take_and_exit(void *arg)
{
	shca_plock_lock(arg);
	return NULL;
}

/* A thread that ended while it held the lock, its process alive */
TEST(owner_thread_exits)
{
	struct shared *s = shared_map();
	pthread_t t;

	ASSERT_EQ(pthread_create(&t, NULL, take_and_exit, &s->lock), 0);
	ASSERT_EQ(pthread_join(t, NULL), 0);
	ASSERT_NE(s->lock.word, 0);
	shca_plock_lock(&s->lock);
	shca_plock_unlock(&s->lock);
	ASSERT_EQ(s->lock.word, 0);
}

/*
 * The lock's memory is zeroed (a peer freed its CQ) while it is held,
 * then unmapped (the peer is gone): the taker's later locks, of plocks
 * and of robust mutexes, work.  With glibc's robust mutexes the unlock
 * failed (EPERM: not the owner any more), the mutex stayed on this
 * thread's robust list, and the next robust lock wrote through it.
 */
TEST(memory_gone_while_held)
{
	struct shared *s = shared_map(), *other = shared_map();
	pthread_mutexattr_t a;
	pthread_mutex_t m;

	shca_plock_lock(&s->lock);
	memset(s, 0, sizeof(*s));
	shca_plock_unlock(&s->lock);
	ASSERT_EQ(munmap(s, 4096), 0);

	shca_plock_lock(&other->lock);
	shca_plock_unlock(&other->lock);
	pthread_mutexattr_init(&a);
	pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
	pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
	ASSERT_EQ(pthread_mutex_init(&m, &a), 0);
	ASSERT_EQ(pthread_mutex_lock(&m), 0);
	ASSERT_EQ(pthread_mutex_unlock(&m), 0);
}
