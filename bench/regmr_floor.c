// SPDX-License-Identifier: MIT
/*
 * bench/regmr_floor: the kernel's share of registering a whole-page MR
 * in place (issue 13's re-backing), without softhca: the system calls a
 * registration of never-written pages cannot do without, made in a loop
 * over COUNT ranges of SIZE bytes, each its own pages of one anonymous
 * mapping, as bench/regmr does them through ibv_reg_mr/ibv_dereg_mr:
 *
 *   registration:   PROCMAP_QUERY (is it mapped, private, anonymous?),
 *                   PAGEMAP_SCAN (which pages hold data?), mmap of a
 *                   memfd range over it (MAP_SHARED | MAP_FIXED, at the
 *                   offset after the previous one's, so the mappings
 *                   merge, as shm/seg.c's pool ranges do);
 *   deregistration: PROCMAP_QUERY (does the memfd still back it?),
 *                   lseek(SEEK_DATA) (did anyone write it?), mmap of
 *                   fresh anonymous memory over it.
 *
 * A second thread sits blocked, as softhca's engine thread does in every
 * process that opened a device: the kernel makes every change of the
 * mappings of a process with more than one thread dearer (its VMA tree
 * is then updated copy-on-write, under RCU).  What this prints is the
 * most a registration in place can reach on this machine at this load;
 * bench/regmr.sh prints it beside ibv_reg_mr's figure.  A benchmark, not
 * a test.
 *
 *   regmr_floor COUNT SIZE
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>

#include "../src/common/procmap.h"

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* CPU seconds so far, user mode (sys 0) or kernel (sys 1) */
static double cpu(struct rusage *r, int sys)
{
	struct timeval *t = sys ? &r->ru_stime : &r->ru_utime;

	return (double)t->tv_sec + (double)t->tv_usec * 1e-6;
}

static void *parked(void *arg)
{
	for (;;)
		pause();
	return arg;
}

static int query(int fd, char *p, char *name)
{
	struct shca_procmap_query q;

	memset(&q, 0, sizeof(q));
	q.size = sizeof(q);
	q.query_flags = SHCA_PROCMAP_COVERING_OR_NEXT;
	q.query_addr = (uintptr_t)p;
	q.vma_name_addr = (uintptr_t)name;
	q.vma_name_size = 256;
	return ioctl(fd, SHCA_PROCMAP_QUERY, &q);
}

static int scan(int fd, char *p, size_t len)
{
	struct shca_page_region vec[64];
	struct shca_pm_scan_arg a;

	memset(&a, 0, sizeof(a));
	a.size = sizeof(a);
	a.start = (uintptr_t)p;
	a.end = (uintptr_t)p + len;
	a.vec = (uintptr_t)vec;
	a.vec_len = 64;
	a.category_inverted = SHCA_PAGE_IS_PFNZERO;
	a.category_mask = SHCA_PAGE_IS_PFNZERO;
	a.category_anyof_mask = SHCA_PAGE_IS_PRESENT | SHCA_PAGE_IS_SWAPPED;
	a.return_mask = SHCA_PAGE_IS_PRESENT | SHCA_PAGE_IS_SWAPPED;
	return ioctl(fd, SHCA_PAGEMAP_SCAN, &a);
}

int main(int argc, char **argv)
{
	long count = argc > 1 ? atol(argv[1]) : 20000;
	size_t size = argc > 2 ? (size_t)atol(argv[2]) : 4096;
	int maps, pagemap, pool;
	struct rusage r0, r1, r2;
	double t0, t1, t2;
	char name[256];
	pthread_t th;
	char *buf;
	long i;

	if (count < 1 || size < 4096 || size % 4096 || size > 65536) {
		fprintf(stderr, "regmr_floor: COUNT >= 1, SIZE whole pages "
			"up to 64 KiB\n");
		return 1;
	}
	maps = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
	pagemap = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
	pool = memfd_create("regmr-floor", MFD_CLOEXEC);
	buf = mmap(NULL, size * (size_t)count, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (maps < 0 || pagemap < 0 || pool < 0 || buf == MAP_FAILED ||
	    ftruncate(pool, (off_t)(size * (size_t)(count + 1))) ||
	    pthread_create(&th, NULL, parked, NULL)) {
		perror("regmr_floor");
		return 1;
	}
	if (query(maps, buf, name) || scan(pagemap, buf, size) < 0) {
		fprintf(stderr, "regmr_floor: no PROCMAP_QUERY or "
			"PAGEMAP_SCAN in this kernel\n");
		return 1;
	}
	getrusage(RUSAGE_SELF, &r0);
	t0 = now();
	for (i = 0; i < count; i++) {
		char *p = buf + (size_t)i * size;

		if (query(maps, p, name) || scan(pagemap, p, size) < 0 ||
		    mmap(p, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED,
			 pool, (off_t)((size_t)(i + 1) * size)) == MAP_FAILED) {
			perror("regmr_floor: registration");
			return 1;
		}
	}
	t1 = now();
	getrusage(RUSAGE_SELF, &r1);
	for (i = 0; i < count; i++) {
		char *p = buf + (size_t)i * size;

		if (query(maps, p, name) ||
		    lseek(pool, (off_t)((size_t)(i + 1) * size), SEEK_DATA) >= 0 ||
		    mmap(p, size, PROT_READ | PROT_WRITE, MAP_PRIVATE |
			 MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1,
			 0) == MAP_FAILED) {
			perror("regmr_floor: deregistration");
			return 1;
		}
	}
	t2 = now();
	getrusage(RUSAGE_SELF, &r2);
	printf("%ld ranges of %zu B, kernel only: reg %.0f/s, dereg %.0f/s; "
	       "us per range: reg user %.2f sys %.2f, dereg user %.2f sys "
	       "%.2f\n", count, size, (double)count / (t1 - t0),
	       (double)count / (t2 - t1),
	       (cpu(&r1, 0) - cpu(&r0, 0)) * 1e6 / (double)count,
	       (cpu(&r1, 1) - cpu(&r0, 1)) * 1e6 / (double)count,
	       (cpu(&r2, 0) - cpu(&r1, 0)) * 1e6 / (double)count,
	       (cpu(&r2, 1) - cpu(&r1, 1)) * 1e6 / (double)count);
	return 0;
}
