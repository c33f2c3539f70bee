// SPDX-License-Identifier: MIT
/*
 * The asymmetric reader-writer lock (common/arlock.c), on its own: a
 * writer never overlaps a reader (a pair of words the writer changes one
 * after the other is always seen equal by readers, who read them far
 * apart); a writer waits for every level of a nested read, and a read of
 * a second lock inside the first (the rwlock's way) holds that one; a
 * thread's slot is free once the thread ended; a forked child's writer
 * does not wait for a read its parent's other thread had under way.
 */
#include <pthread.h>
#include <signal.h>
#include <unistd.h>
#include <sys/wait.h>

#include "harness.h"
#include "common/arlock.h"

struct pair {
	struct shca_arlock lock;
	volatile uint64_t a, b;	/* equal whenever no writer is inside */
	uint64_t torn;		/* reads that found them apart */
	uint64_t reads;
	int stop;
};

static void *pair_reader(void *arg)
{
	struct pair *p = arg;
	int i;

	while (!__atomic_load_n(&p->stop, __ATOMIC_ACQUIRE)) {
		uint64_t a, b;

		shca_arlock_rdlock(&p->lock);
		a = p->a;
		for (i = 0; i < 200; i++)
			__asm__ volatile("" ::: "memory");
		b = p->b;
		shca_arlock_rdunlock(&p->lock);
		if (a != b)
			__atomic_add_fetch(&p->torn, 1, __ATOMIC_RELAXED);
		__atomic_add_fetch(&p->reads, 1, __ATOMIC_RELAXED);
	}
	return NULL;
}

TEST(a_writer_never_overlaps_a_reader)
{
	struct pair p = { .a = 0 };
	pthread_t t[2];
	int i, j;

	shca_arlock_init(&p.lock);
	for (i = 0; i < 2; i++)
		ASSERT_EQ(pthread_create(&t[i], NULL, pair_reader, &p), 0);
	for (i = 0; i < 400; i++) {
		shca_arlock_wrlock(&p.lock);
		p.a++;
		for (j = 0; j < 200; j++)
			__asm__ volatile("" ::: "memory");
		p.b++;
		shca_arlock_wrunlock(&p.lock);
		if (!(i % 64))
			sched_yield();
	}
	__atomic_store_n(&p.stop, 1, __ATOMIC_RELEASE);
	for (i = 0; i < 2; i++)
		ASSERT_EQ(pthread_join(t[i], NULL), 0);
	ASSERT_EQ(p.torn, 0u);
	ASSERT(p.reads > 0);
	ASSERT_EQ(p.a, 400u);
	shca_arlock_destroy(&p.lock);
}

struct waiter {
	struct shca_arlock *lock;
	int in;		/* the writer got the lock */
};

static void *writer(void *arg)
{
	struct waiter *w = arg;

	shca_arlock_wrlock(w->lock);
	__atomic_store_n(&w->in, 1, __ATOMIC_RELEASE);
	shca_arlock_wrunlock(w->lock);
	return NULL;
}

/* The writer on lock l has not got in after a while (it is waiting). */
static void writer_kept_out(struct waiter *w)
{
	usleep(50000);
	ASSERT_EQ(__atomic_load_n(&w->in, __ATOMIC_ACQUIRE), 0);
}

TEST(nested_reads_and_a_second_lock_hold_their_writers)
{
	struct shca_arlock l1, l2;
	struct waiter w1 = { &l1, 0 }, w2 = { &l2, 0 };
	pthread_t t1, t2;

	shca_arlock_init(&l1);
	shca_arlock_init(&l2);
	shca_arlock_rdlock(&l1);
	shca_arlock_rdlock(&l1);
	shca_arlock_rdlock(&l2);	/* a second lock: its rwlock */
	ASSERT_EQ(pthread_create(&t1, NULL, writer, &w1), 0);
	ASSERT_EQ(pthread_create(&t2, NULL, writer, &w2), 0);
	writer_kept_out(&w1);
	writer_kept_out(&w2);
	shca_arlock_rdunlock(&l2);
	ASSERT_EQ(pthread_join(t2, NULL), 0);
	ASSERT_EQ(w2.in, 1);
	shca_arlock_rdunlock(&l1);
	writer_kept_out(&w1);		/* one level still held */
	shca_arlock_rdunlock(&l1);
	ASSERT_EQ(pthread_join(t1, NULL), 0);
	ASSERT_EQ(w1.in, 1);
	shca_arlock_destroy(&l1);
	shca_arlock_destroy(&l2);
}

struct holder {
	struct shca_arlock *lock;
	int fd[2];	/* the holder reads and holds until this closes */
	int held;
};

static void *hold_and_wait(void *arg)
{
	struct holder *h = arg;
	char c;

	shca_arlock_rdlock(h->lock);
	__atomic_store_n(&h->held, 1, __ATOMIC_RELEASE);
	(void)read(h->fd[0], &c, 1);
	shca_arlock_rdunlock(h->lock);
	return NULL;
}

static void *read_once(void *arg)
{
	shca_arlock_rdlock(arg);
	shca_arlock_rdunlock(arg);
	return NULL;
}

TEST(a_threads_slot_is_free_once_it_ended)
{
	struct shca_arlock l;
	struct waiter w = { &l, 0 };
	pthread_t t;
	int i;

	shca_arlock_init(&l);
	/* threads that read and end: their slots are taken again, and a
	 * writer after them waits for none of them */
	for (i = 0; i < 64; i++) {
		ASSERT_EQ(pthread_create(&t, NULL, read_once, &l), 0);
		ASSERT_EQ(pthread_join(t, NULL), 0);
	}
	ASSERT_EQ(pthread_create(&t, NULL, writer, &w), 0);
	ASSERT_EQ(pthread_join(t, NULL), 0);
	ASSERT_EQ(w.in, 1);
	shca_arlock_destroy(&l);
}

TEST(a_forked_childs_writer_waits_for_no_parent_thread)
{
	struct shca_arlock l;
	struct holder h = { &l, { -1, -1 }, 0 };
	pthread_t t;
	pid_t pid;
	int status;

#if defined(__SANITIZE_THREAD__)
	/* there a reader holds the rwlock, and a child inherits it held */
	SKIP("ThreadSanitizer: every reader takes the rwlock");
#endif
	shca_arlock_init(&l);
	ASSERT_EQ(pipe(h.fd), 0);
	ASSERT_EQ(pthread_create(&t, NULL, hold_and_wait, &h), 0);
	while (!__atomic_load_n(&h.held, __ATOMIC_ACQUIRE))
		usleep(1000);
	pid = fork();
	ASSERT(pid >= 0);
	if (!pid) {
		/* the holder is not in this process: no read to wait for */
		alarm(10);
		shca_arlock_wrlock(&l);
		shca_arlock_wrunlock(&l);
		_exit(0);
	}
	ASSERT_EQ(waitpid(pid, &status, 0), pid);
	ASSERT(WIFEXITED(status));
	ASSERT_EQ(WEXITSTATUS(status), 0);
	close(h.fd[1]);
	ASSERT_EQ(pthread_join(t, NULL), 0);
	close(h.fd[0]);
	shca_arlock_destroy(&l);
}
