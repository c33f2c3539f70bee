// SPDX-License-Identifier: MIT
/* A call with a cancellation request pending (cancel_pending.h). */
#include <pthread.h>
#include <semaphore.h>

#include "cancel_pending.h"
#include "harness.h"

struct victim {
	int (*fn)(void *arg);
	void *arg;
	sem_t ready, cancelled;
	volatile int done;	/* fn returned, with this + 1 */
	int ret;
};

/* Cancellation off until the request is pending, then on (deferred). */
static void *victim_main(void *p)
{
	struct victim *v = p;

	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, NULL);
	sem_post(&v->ready);
	while (sem_wait(&v->cancelled))
		;
	pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, NULL);
	v->ret = v->fn(v->arg);
	v->done = 1;
	pthread_testcancel();
	return NULL;
}

int cancel_pending_call(int (*fn)(void *arg), void *arg)
{
	struct victim v = { .fn = fn, .arg = arg };
	pthread_t t;
	void *res;

	sem_init(&v.ready, 0, 0);
	sem_init(&v.cancelled, 0, 0);
	ASSERT_EQ(pthread_create(&t, NULL, victim_main, &v), 0);
	while (sem_wait(&v.ready))
		;
	ASSERT_EQ(pthread_cancel(t), 0);
	sem_post(&v.cancelled);
	ASSERT_EQ(pthread_join(t, &res), 0);
	/* cancelled at pthread_testcancel, not inside fn */
	ASSERT(res == PTHREAD_CANCELED);
	ASSERT_EQ(v.done, 1);
	sem_destroy(&v.ready);
	sem_destroy(&v.cancelled);
	return v.ret;
}
