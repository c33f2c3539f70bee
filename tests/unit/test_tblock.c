// SPDX-License-Identifier: MIT
/*
 * Per-thread blocks (common/tblock.c), on their own: a block is zeroed,
 * stored in the caller's thread-local and the thread's own; and it goes
 * when its thread ends (a thousand threads that each took a megabyte
 * leave the process no larger).
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "common/tblock.h"

#define BIG	(1u << 20)

#if defined(__SANITIZE_ADDRESS__)
/* What is freed goes back at once, not into ASan's quarantine (which
 * keeps up to 256 MB of it mapped): VmSize then shows what tblock.c
 * frees.  ASAN_OPTIONS comes after this. */
const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
	return "quarantine_size_mb=0";
}
#endif

static __thread unsigned char *mine;

/* This thread's block of size bytes, after checking it. */
static void *take(size_t size)
{
	unsigned char *b;
	size_t i;

	ASSERT_NULL(mine);
	b = shca_tblock_get((void **)&mine, size);
	ASSERT_NOT_NULL(b);
	ASSERT_EQ((void *)mine, (void *)b);
	ASSERT_EQ((uintptr_t)b % 16, 0);
	for (i = 0; i < size; i++)
		if (b[i])
			break;
	ASSERT_EQ(i, size);
	memset(b, 0xa5, size);
	return b;
}

static void *taker(void *arg)
{
	return take(arg ? (size_t)(uintptr_t)arg : 64);
}

TEST(zeroed_and_per_thread)
{
	pthread_t t;
	void *theirs, *ours = take(64);

	ASSERT_EQ(pthread_create(&t, NULL, taker, NULL), 0);
	ASSERT_EQ(pthread_join(t, &theirs), 0);
	ASSERT_NE(theirs, ours);
	ASSERT_EQ((void *)mine, ours);	/* ours is still ours */
}

/* The process's virtual size in KiB (/proc/self/status VmSize). */
static long vm_kib(void)
{
	char line[256];
	long kib = -1;
	FILE *f = fopen("/proc/self/status", "r");

	ASSERT_NOT_NULL(f);
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmSize: %ld kB", &kib) == 1)
			break;
	fclose(f);
	ASSERT_GT(kib, 0);
	return kib;
}

TEST(freed_when_the_thread_ends)
{
	long before, after;
	int i;

	/* one thread first: glibc's first thread arena and stack cache */
	for (i = 0; i < 1001; i++) {
		pthread_t t;

		if (i == 1)
			before = vm_kib();
		ASSERT_EQ(pthread_create(&t, NULL, taker,
					 (void *)(uintptr_t)BIG), 0);
		ASSERT_EQ(pthread_join(t, NULL), 0);
	}
	after = vm_kib();
	printf("  VmSize %ld kB before, %ld kB after 1000 threads of %u kB "
	       "blocks\n", before, after, BIG >> 10);
	/* kept, they would be a gigabyte */
	ASSERT_LT(after - before, 64 * 1024);
}
