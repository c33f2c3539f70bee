// SPDX-License-Identifier: MIT
/* A thread asleep in an expected system call: see asleep.h. */
#include <dirent.h>
#include <linux/futex.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "harness.h"
#include "asleep.h"

#define MAX_POLLFDS 64

struct call {
	long nr;		/* -1: asleep outside a system call */
	unsigned long arg[6];
	char line[160];		/* as /proc showed it, for the message */
};

void asleep_self(pid_t *tid)
{
	__atomic_store_n(tid, (pid_t)syscall(SYS_gettid), __ATOMIC_RELEASE);
}

/* true and *c when thread tid sleeps (in a call or not); false while it
 * runs, or when its file cannot be read (it exited: the caller sees). */
static bool read_call(pid_t tid, struct call *c)
{
	char path[64];
	FILE *f;
	int n;

	snprintf(path, sizeof(path), "/proc/self/task/%d/syscall", (int)tid);
	f = fopen(path, "r");
	if (!f) {
		snprintf(c->line, sizeof(c->line), "no %s: %s", path,
			 strerror(errno));
		return false;
	}
	if (!fgets(c->line, sizeof(c->line), f))
		c->line[0] = '\0';
	fclose(f);
	c->line[strcspn(c->line, "\n")] = '\0';
	/* "running" would parse as 0, which is SYS_read on x86-64 */
	if ((c->line[0] < '0' || c->line[0] > '9') && c->line[0] != '-')
		return false;
	memset(c->arg, 0, sizeof(c->arg));
	n = sscanf(c->line, "%ld %lx %lx %lx %lx %lx %lx", &c->nr, &c->arg[0],
		   &c->arg[1], &c->arg[2], &c->arg[3], &c->arg[4], &c->arg[5]);
	return n >= 1;
}

/* Copy len bytes at addr of this process; false if they are not mapped
 * (the sleeper's stack may be gone by now). */
static bool peek(unsigned long addr, void *out, size_t len)
{
	struct iovec local = { out, len }, remote = { (void *)addr, len };

	return process_vm_readv(getpid(), &local, 1, &remote, 1, 0) ==
	       (ssize_t)len;
}

static bool pollfds_hold(unsigned long addr, unsigned long n, int fd)
{
	struct pollfd p[MAX_POLLFDS];
	unsigned long i;

	if (n == 0 || n > MAX_POLLFDS || !peek(addr, p, n * sizeof(p[0])))
		return false;
	for (i = 0; i < n; i++)
		if (p[i].fd == fd && (p[i].events & POLLIN))
			return true;
	return false;
}

static bool call_on_fd(const struct call *c, const void *want)
{
	int fd = *(const int *)want;

	switch (c->nr) {
	case SYS_read:
	case SYS_readv:
		return (int)c->arg[0] == fd;
#ifdef SYS_poll
	case SYS_poll:	/* poll(fds, n, timeout): < 0 is forever */
		return (int)c->arg[2] < 0 &&
		       pollfds_hold(c->arg[0], c->arg[1], fd);
#endif
	case SYS_ppoll:	/* ppoll(fds, n, tsp, ...): NULL is forever */
		return c->arg[2] == 0 &&
		       pollfds_hold(c->arg[0], c->arg[1], fd);
	default:
		return false;
	}
}

static bool call_for_good(const struct call *c, const void *want)
{
	(void)want;
	switch (c->nr) {
#ifdef SYS_pause
	case SYS_pause:
		return true;
#endif
#ifdef SYS_poll
	case SYS_poll:
		return c->arg[1] == 0 && (int)c->arg[2] < 0;
#endif
	case SYS_ppoll:
		return c->arg[1] == 0 && c->arg[2] == 0;
	default:
		return false;
	}
}

/* epoll_wait(epfd, events, max, timeout) and epoll_pwait (the same and a
 * sigmask): a negative timeout is forever; epoll_pwait2 takes a
 * timespec pointer, NULL forever. */
static bool call_in_epoll(const struct call *c, const void *want)
{
	(void)want;
	switch (c->nr) {
#ifdef SYS_epoll_wait
	case SYS_epoll_wait:
		return (int)c->arg[3] < 0;
#endif
	case SYS_epoll_pwait:
		return (int)c->arg[3] < 0;
#ifdef SYS_epoll_pwait2
	case SYS_epoll_pwait2:
		return c->arg[3] == 0;
#endif
	default:
		return false;
	}
}

/*
 * glibc's pthread_cond_wait sleeps with FUTEX_WAIT_BITSET on a word of
 * the pthread_cond_t; a contended mutex sleeps with FUTEX_WAIT on the
 * mutex.  With a cond, the word must lie inside it; without, the op tells
 * a condition wait from a lock.
 */
static bool call_in_cond(const struct call *c, const void *want)
{
	uintptr_t lo = (uintptr_t)want, uaddr = c->arg[0];
	int cmd = (int)c->arg[1] & FUTEX_CMD_MASK;

	if (c->nr != SYS_futex)
		return false;
	if (!want)
		return cmd == FUTEX_WAIT_BITSET;
	return (cmd == FUTEX_WAIT || cmd == FUTEX_WAIT_BITSET) &&
	       uaddr >= lo && uaddr < lo + sizeof(pthread_cond_t);
}

static void wait_for(const char *file, int line, const pid_t *tidp,
		     const int *done, const char *what,
		     bool (*match)(const struct call *, const void *),
		     const void *want)
{
	const char *t = getenv("TEST_TIMEOUT");
	long rounds = (t ? atol(t) : 60) * 1000 / 2;	/* of 1 ms */
	struct call c = { .line = "never seen asleep" };
	pid_t tid;

	for (; rounds > 0; rounds--) {
		if (done && __atomic_load_n(done, __ATOMIC_ACQUIRE))
			harness_fail(file, line,
				     "the call returned instead of sleeping "
				     "in %s (last seen: %s)", what, c.line);
		tid = __atomic_load_n(tidp, __ATOMIC_ACQUIRE);
		if (tid && read_call(tid, &c) && match(&c, want))
			return;
		usleep(1000);
	}
	harness_fail(file, line, "thread %d never slept in %s; last seen in "
		     "/proc: \"%s\"", (int)__atomic_load_n(tidp,
		     __ATOMIC_ACQUIRE), what, c.line);
}

void asleep_on_fd(const char *file, int line, const pid_t *tid,
		  const int *done, int fd)
{
	char what[64];

	snprintf(what, sizeof(what), "a wait on fd %d without timeout", fd);
	wait_for(file, line, tid, done, what, call_on_fd, &fd);
}

void asleep_in_cond(const char *file, int line, const pid_t *tid,
		    const int *done, const void *cond)
{
	char what[64];

	if (cond)
		snprintf(what, sizeof(what), "pthread_cond_wait on %p", cond);
	else
		snprintf(what, sizeof(what), "a pthread_cond_wait");
	wait_for(file, line, tid, done, what, call_in_cond, cond);
}

void asleep_for_good(const char *file, int line, const pid_t *tid,
		     const int *done)
{
	wait_for(file, line, tid, done,
		 "poll on no fd without timeout (for good)", call_for_good,
		 NULL);
}

/* One look at every thread but the caller: the id of one asleep in
 * epoll_wait without timeout, or 0; what each was doing in seen. */
static pid_t some_in_epoll(char *seen, size_t size)
{
	pid_t self = (pid_t)syscall(SYS_gettid), found = 0;
	struct dirent *de;
	struct call c;
	size_t off = 0;
	DIR *d = opendir("/proc/self/task");

	seen[0] = '\0';
	if (!d)
		return 0;
	while (!found && (de = readdir(d))) {
		pid_t tid = (pid_t)atoi(de->d_name);
		bool asleep;

		if (tid <= 0 || tid == self)
			continue;
		asleep = read_call(tid, &c);
		if (asleep && call_in_epoll(&c, NULL))
			found = tid;
		else if (off < size)
			off += (size_t)snprintf(seen + off, size - off,
						"%s%d: \"%s\"", off ? ", " : "",
						(int)tid, c.line);
	}
	closedir(d);
	return found;
}

pid_t asleep_some_in_epoll(const char *file, int line)
{
	const char *t = getenv("TEST_TIMEOUT");
	long rounds = (t ? atol(t) : 60) * 1000 / 2;	/* of 1 ms */
	char seen[512] = "no other thread";
	pid_t tid;

	for (; rounds > 0; rounds--) {
		tid = some_in_epoll(seen, sizeof(seen));
		if (tid)
			return tid;
		usleep(1000);
	}
	harness_fail(file, line, "no thread slept in epoll_wait without "
		     "timeout; last seen in /proc: %s", seen);
}
