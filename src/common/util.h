/* SPDX-License-Identifier: MIT */
/*
 * Small helpers shared by every part of softhca.
 */
#ifndef SOFTHCA_UTIL_H
#define SOFTHCA_UTIL_H

#include <stddef.h>
#include <stdint.h>

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

#define container_of(ptr, type, member) \
	((type *)((char *)(ptr) - offsetof(type, member)))

#define MIN(a, b) ((a) < (b) ? (a) : (b))
#define MAX(a, b) ((a) > (b) ? (a) : (b))

/* Symbols that must not be exported: the version script already hides
 * everything not listed, this also lets the compiler know. */
#define SHCA_HIDDEN __attribute__((visibility("hidden")))

static inline uint32_t shca_roundup_pow2(uint32_t v)
{
	if (v <= 1)
		return 1;
	return 1u << (32 - __builtin_clz(v - 1));
}

/* a + b <= limit without overflow */
static inline int shca_range_ok(uint64_t start, uint64_t len,
				uint64_t lo, uint64_t hi_excl)
{
	if (start < lo || start > hi_excl)
		return 0;
	return len <= hi_excl - start;
}

/*
 * This process's pid, without a system call: cached, and refreshed in a
 * forked child (pthread_atfork).  Per-process state (slot, arena, engine)
 * compares it to tell that it was inherited by fork.
 */
#include <sys/types.h>
pid_t shca_getpid(void);
/* The calling thread's id, cached per thread the same way. */
pid_t shca_gettid(void);

/*
 * A peer's process (thread) that cannot act any more: no such pid (tid),
 * 0 or negative, or a zombie not yet reaped (common/proc.c); a process
 * whose leader thread exited while others run is not gone.
 */
#include <stdbool.h>
bool shca_proc_gone(pid_t pid);
bool shca_thread_gone(pid_t tid);

/* The page size, asked of the kernel once (per file that asks). */
#include <unistd.h>
static inline uintptr_t shca_page_size(void)
{
	static uintptr_t ps;
	uintptr_t p = __atomic_load_n(&ps, __ATOMIC_RELAXED);

	if (!p) {
		p = (uintptr_t)sysconf(_SC_PAGESIZE);
		__atomic_store_n(&ps, p, __ATOMIC_RELAXED);
	}
	return p;
}

/* Fill buf with random bytes (getrandom, never blocks after boot). */
void shca_random(void *buf, size_t len);
uint32_t shca_random_u32(void);
/* What the calling thread's next shca_random_u32() returns (unless a
 * fork comes between), without taking it. */
uint32_t shca_random_u32_peek(void);

/*
 * A full memory barrier (every load and store before it before every one
 * after it).  ThreadSanitizer does not model fences (gcc refuses them
 * under -fsanitize=thread): there a locked read-modify-write, a full
 * barrier on the machines TSan runs on, stands in.
 */
static inline void shca_full_fence(void)
{
#if defined(__SANITIZE_THREAD__)
	static uint64_t barrier;

	__atomic_fetch_add(&barrier, 1, __ATOMIC_SEQ_CST);
#else
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
#endif
}

#endif
