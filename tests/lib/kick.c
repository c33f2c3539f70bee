// SPDX-License-Identifier: MIT
/* Real signals for tests of blocking calls: see kick.h. */
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "harness.h"
#include "kick.h"

volatile sig_atomic_t kick_hits;

static void on_signal(int sig)
{
	(void)sig;
	kick_hits++;
}

void kick_install(int sa_flags)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sa.sa_flags = sa_flags;
	sigemptyset(&sa.sa_mask);
	ASSERT_EQ(sigaction(SIGUSR1, &sa, NULL), 0);
	kick_hits = 0;
}

/* Is the thread asleep in a system call (not running, not in user
 * space)?  /proc/self/task/TID/syscall says "running" otherwise. */
static int asleep(pid_t tid)
{
	char path[64], buf[32] = "";
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/task/%d/syscall", (int)tid);
	f = fopen(path, "r");
	if (!f)
		return 1;	/* no /proc: send anyway */
	if (!fgets(buf, sizeof(buf), f))
		buf[0] = '\0';
	fclose(f);
	return buf[0] >= '0' && buf[0] <= '9';
}

static void *kick(void *p)
{
	struct kicker *k = p;

	while (!__atomic_load_n(&k->stop, __ATOMIC_ACQUIRE)) {
		if (asleep(__atomic_load_n(&k->tid, __ATOMIC_ACQUIRE))) {
			pthread_kill(k->target, SIGUSR1);
			if (++k->sent == k->then_after)
				k->then(k->arg);
		}
		usleep(2000);
	}
	return NULL;
}

void kick_start(struct kicker *k, int then_after, void (*then)(void *),
		void *arg)
{
	memset(k, 0, sizeof(*k));
	k->target = pthread_self();
	k->tid = (pid_t)syscall(SYS_gettid);
	k->then_after = then_after;
	k->then = then;
	k->arg = arg;
	ASSERT_EQ(pthread_create(&k->thread, NULL, kick, k), 0);
}

void kick_stop(struct kicker *k)
{
	__atomic_store_n(&k->stop, 1, __ATOMIC_RELEASE);
	ASSERT_EQ(pthread_join(k->thread, NULL), 0);
}
