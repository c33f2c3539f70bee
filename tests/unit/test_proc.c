// SPDX-License-Identifier: MIT
/*
 * Is a peer gone (src/common/proc.c)?  The drain of an MR's access lanes
 * and a shared lock's takers free what a dead peer held; a peer killed
 * in the middle of an access stays a zombie until its parent reaps it,
 * and must count as gone then already (a parent that never reaps, or
 * one that reaps after its own ibv_dereg_mr, would wait for ever).  A
 * process whose main thread exited while another runs lives.
 */
#include <pthread.h>
#include <signal.h>
#include <unistd.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "harness.h"
#include "common/util.h"

/* Until child is a zombie (waitid WNOWAIT leaves it one). */
static void until_zombie(pid_t child)
{
	siginfo_t si;

	ASSERT_EQ(waitid(P_PID, (id_t)child, &si, WEXITED | WNOWAIT), 0);
}

static void reap(pid_t child)
{
	int status;

	ASSERT_EQ(waitpid(child, &status, 0), child);
}

TEST(live_zombie_and_reaped)
{
	int p[2];
	char c;
	pid_t child;

	ASSERT(!shca_proc_gone(getpid()));
	ASSERT(!shca_thread_gone((pid_t)syscall(SYS_gettid)));
	ASSERT(shca_proc_gone(0));
	ASSERT(shca_proc_gone(-1));
	ASSERT_EQ(pipe(p), 0);
	child = fork();
	ASSERT_GE(child, 0);
	if (child == 0) {
		close(p[1]);
		(void)!read(p[0], &c, 1);	/* until told */
		_exit(0);
	}
	close(p[0]);
	ASSERT(!shca_proc_gone(child));		/* blocked in read */
	ASSERT_EQ(write(p[1], "x", 1), 1);
	until_zombie(child);
	ASSERT(shca_proc_gone(child));		/* not reaped yet */
	ASSERT(shca_thread_gone(child));
	reap(child);
	ASSERT(shca_proc_gone(child));		/* no such pid */
	close(p[1]);
}

static void *sleeper(void *arg)
{
	(void)arg;
	for (;;)
		pause();
	return NULL;
}

/* The child's main thread exits, another thread goes on. */
static void leader_exits(void)
{
	pthread_t t;

	if (pthread_create(&t, NULL, sleeper, NULL))
		_exit(1);
	pthread_exit(NULL);
}

TEST(leader_exited_with_a_thread_running_lives)
{
	pid_t child = fork();
	char state = 0;
	int tries;

	ASSERT_GE(child, 0);
	if (child == 0)
		leader_exits();
	/* the leader shows as a zombie once it exited */
	for (tries = 0; tries < 2000 && state != 'Z'; tries++) {
		char path[48], buf[512], *p;
		FILE *f;

		usleep(1000);
		snprintf(path, sizeof(path), "/proc/%d/stat", (int)child);
		f = fopen(path, "r");
		ASSERT_NOT_NULL(f);
		if (fgets(buf, sizeof(buf), f) && (p = strrchr(buf, ')')))
			state = p[2];
		fclose(f);
	}
	ASSERT_EQ(state, 'Z');
	ASSERT(!shca_proc_gone(child));		/* its thread runs */
	ASSERT(shca_thread_gone(child));	/* the leader thread: gone */
	ASSERT_EQ(kill(child, SIGKILL), 0);
	until_zombie(child);
	ASSERT(shca_proc_gone(child));
	reap(child);
}
