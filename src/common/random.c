// SPDX-License-Identifier: MIT
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/random.h>
#include <sys/syscall.h>

#include "util.h"

void shca_random(void *buf, size_t len)
{
	unsigned char *p = buf;

	while (len) {
		ssize_t n = getrandom(p, len, 0);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		p += n;
		len -= (size_t)n;
	}
	if (len) {
		/* getrandom unavailable (seccomp): weak fallback, still varies */
		struct timespec ts;
		uint64_t x;

		clock_gettime(CLOCK_MONOTONIC, &ts);
		x = (uint64_t)ts.tv_nsec * 0x9e3779b97f4a7c15ull ^
		    (uint64_t)getpid() << 32 ^ (uint64_t)(uintptr_t)buf;
		while (len--) {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			*p++ = (unsigned char)x;
		}
	}
}

/*
 * 32 random bits, from a per-thread pool of 16 filled by one getrandom()
 * (a registration takes one: a system call per MR halved its rate; the
 * pool is small, for the static TLS block: common/tblock.h).  A
 * child after fork() gets the forking thread's pool: fork_gen tells it to
 * draw a fresh one, so parent and child never hand out the same bits.
 */
#define POOL	16
static uint32_t fork_gen;
static __thread uint32_t pool[POOL];
static __thread uint32_t pool_left;
static __thread uint32_t pool_gen;

static void pool_fill(void)
{
	uint32_t gen = __atomic_load_n(&fork_gen, __ATOMIC_RELAXED);

	if (!pool_left || pool_gen != gen) {
		shca_random(pool, sizeof(pool));
		pool_left = POOL;
		pool_gen = gen;
	}
}

uint32_t shca_random_u32(void)
{
	pool_fill();
	return pool[--pool_left];
}

uint32_t shca_random_u32_peek(void)
{
	pool_fill();
	return pool[pool_left - 1];
}

static pid_t cached_pid;

static void pid_refresh(void)
{
	__atomic_store_n(&cached_pid, getpid(), __ATOMIC_RELAXED);
	__atomic_add_fetch(&fork_gen, 1, __ATOMIC_RELAXED);
}

__attribute__((constructor)) static void pid_init(void)
{
	pid_refresh();
	pthread_atfork(NULL, NULL, pid_refresh);
}

pid_t shca_getpid(void)
{
	pid_t p = __atomic_load_n(&cached_pid, __ATOMIC_RELAXED);

	return p ? p : getpid();
}

pid_t shca_gettid(void)
{
	static __thread pid_t tid;
	static __thread uint32_t tid_gen;
	uint32_t gen = __atomic_load_n(&fork_gen, __ATOMIC_RELAXED);

	/* a forked child's thread inherits its parent thread's cache */
	if (!tid || tid_gen != gen) {
		tid = (pid_t)syscall(SYS_gettid);
		tid_gen = gen;
	}
	return tid;
}
