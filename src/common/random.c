// SPDX-License-Identifier: MIT
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/random.h>

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

uint32_t shca_random_u32(void)
{
	uint32_t v;

	shca_random(&v, sizeof(v));
	return v;
}

static pid_t cached_pid;

static void pid_refresh(void)
{
	__atomic_store_n(&cached_pid, getpid(), __ATOMIC_RELAXED);
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
