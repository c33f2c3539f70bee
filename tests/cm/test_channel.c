// SPDX-License-Identifier: MIT
/*
 * rdma_destroy_event_channel while another thread sleeps in
 * rdma_get_cm_event on it, as rping's CM thread does when its main thread
 * ends the run (it caught rping with SIGSEGV between namespaces): the
 * sleeper sleeps on, as in rdma-core's read of the closed rdma_cm fd, and
 * touches nothing freed, also when a signal wakes it.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cm_common.h"
#include "asleep.h"

struct sleeper {
	struct rdma_event_channel *ch;
	pid_t tid;
	int returned;		/* rdma_get_cm_event came back */
};

static void *sleeper_main(void *arg)
{
	struct sleeper *s = arg;
	struct rdma_cm_event *ev;

	asleep_self(&s->tid);
	rdma_get_cm_event(s->ch, &ev);
	__atomic_store_n(&s->returned, 1, __ATOMIC_RELEASE);
	return NULL;
}

static void on_usr1(int sig)
{
	(void)sig;
}

TEST(destroy_channel_under_a_sleeping_reader)
{
	struct sigaction sa;
	struct sleeper s = { 0 };
	pthread_t t;
	void *junk[64];
	int i;

	/* a signal interrupts the wait (no SA_RESTART) */
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_usr1;
	ASSERT_EQ(sigaction(SIGUSR1, &sa, NULL), 0);

	s.ch = rdma_create_event_channel();
	ASSERT_NOT_NULL(s.ch);
	ASSERT_EQ(pthread_create(&t, NULL, sleeper_main, &s), 0);
	ASSERT_ASLEEP_ON_FD(&s.tid, &s.returned, s.ch->fd);

	rdma_destroy_event_channel(s.ch);
	/* what would be freed is reused and scribbled over */
	for (i = 0; i < 64; i++) {
		junk[i] = malloc(16 + 8 * (size_t)i);
		ASSERT_NOT_NULL(junk[i]);
		memset(junk[i], 0xa5, 16 + 8 * (size_t)i);
	}
	/* woken, the sleeper goes back to sleep: no event, no crash */
	ASSERT_EQ(pthread_kill(t, SIGUSR1), 0);
	ASSERT_ASLEEP_FOR_GOOD(&s.tid, &s.returned);
	ASSERT_EQ(__atomic_load_n(&s.returned, __ATOMIC_ACQUIRE), 0);

	/* the library goes on working */
	s.ch = rdma_create_event_channel();
	ASSERT_NOT_NULL(s.ch);
	rdma_destroy_event_channel(s.ch);
	for (i = 0; i < 64; i++)
		free(junk[i]);
	pthread_detach(t);
}
