/* SPDX-License-Identifier: MIT */
/*
 * Real signals for tests of blocking calls: a thread that sends SIGUSR1
 * to the waiting thread every 2 ms while that thread sleeps in a system
 * call, until stopped, so that the signals land while the call sleeps;
 * optionally it runs an action once after N signals (the event the call
 * waits for).  The handler only counts.
 */
#ifndef SOFTHCA_TEST_KICK_H
#define SOFTHCA_TEST_KICK_H

#include <pthread.h>
#include <signal.h>
#include <sys/types.h>

/* SIGUSR1 handlers that ran since kick_install. */
extern volatile sig_atomic_t kick_hits;

/* Install the counting SIGUSR1 handler with these sa_flags (0 or
 * SA_RESTART) and reset the count. */
void kick_install(int sa_flags);

struct kicker {
	pthread_t target, thread;
	pid_t tid;		/* the target's */
	int stop;		/* atomic */
	int sent, then_after;
	void (*then)(void *arg);
	void *arg;
};

/* Start kicking the calling thread; then(arg) runs in the kicker after
 * then_after signals (0: never). */
void kick_start(struct kicker *k, int then_after, void (*then)(void *),
		void *arg);
void kick_stop(struct kicker *k);

#endif
