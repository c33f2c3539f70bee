// SPDX-License-Identifier: MIT
/*
 * bench/regmr: how many memory regions a second ibv_reg_mr registers (and
 * ibv_dereg_mr removes), small and large, in a process with few mappings
 * and in one with many (as a process with thousands of CQs and QPs has).
 * A benchmark, not a test: it prints figures and checks nothing else.
 * bench/regmr.sh builds and runs it (with and without the kernel's
 * PROCMAP_QUERY, side by side).
 *
 *   regmr COUNT SIZE EXTRA_MAPPINGS [TOUCHED]
 *                              TOUCHED 1: every page of a small MR
 *                              written before it is registered (the
 *                              re-backing copies it in and back out)
 *   regmr gib GIB TOUCHED      one MR over GIB GiB, every page written
 *                              first (TOUCHED 1) or none: ms per GiB of
 *                              ibv_reg_mr and of ibv_dereg_mr (the copy
 *                              into shared memory and back, issue 13)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <infiniband/verbs.h>

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* CPU seconds of the process so far, in user mode (sys 0) or in the
 * kernel (sys 1): the kernel splits its exact total by tick samples */
static double cpu(struct rusage *r, int sys)
{
	struct timeval *t = sys ? &r->ru_stime : &r->ru_utime;

	return (double)t->tv_sec + (double)t->tv_usec * 1e-6;
}

/* n mappings that cannot merge (every other one read-only) */
static void add_mappings(long n)
{
	long i;

	for (i = 0; i < n; i++) {
		void *p = mmap(NULL, 4096, PROT_READ | (i & 1 ? 0 : PROT_WRITE),
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		if (p == MAP_FAILED) {
			perror("mmap");
			exit(1);
		}
	}
}

/* One MR over gib GiB, touched or not: ms per GiB to register it and
 * to deregister it. */
static int per_gib(struct ibv_pd *pd, long gib, int touched)
{
	size_t size = (size_t)gib << 30;
	struct ibv_mr *mr;
	double t0, t1, t2;
	char *buf;

	buf = mmap(NULL, size, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (buf == MAP_FAILED) {
		perror("mmap");
		return 1;
	}
	if (touched)
		for (size_t i = 0; i < size; i += 4096)
			buf[i] = (char)i;
	t0 = now();
	mr = ibv_reg_mr(pd, buf, size, IBV_ACCESS_LOCAL_WRITE |
			IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
	if (!mr) {
		perror("ibv_reg_mr");
		return 1;
	}
	t1 = now();
	ibv_dereg_mr(mr);
	t2 = now();
	printf("%ld GiB %s: reg %.3f ms/GiB, dereg %.3f ms/GiB\n", gib,
	       touched ? "touched" : "untouched",
	       (t1 - t0) * 1e3 / (double)gib, (t2 - t1) * 1e3 / (double)gib);
	munmap(buf, size);
	return 0;
}

int main(int argc, char **argv)
{
	long count = argc > 1 ? atol(argv[1]) : 10000;
	size_t size = argc > 2 ? (size_t)atol(argv[2]) : 4096;
	long extra = argc > 3 ? atol(argv[3]) : 0;
	int touched = argc > 4 ? atoi(argv[4]) : 0;
	struct ibv_device **list;
	struct ibv_context *ctx;
	struct ibv_mr **mrs;
	struct rusage r0, r1, r2;
	struct ibv_pd *pd;
	double t0, t1, t2;
	char *buf;
	long i;

	list = ibv_get_device_list(NULL);
	if (!list || !list[0] || !(ctx = ibv_open_device(list[0]))) {
		fprintf(stderr, "regmr: no device\n");
		return 1;
	}
	pd = ibv_alloc_pd(ctx);
	if (pd && argc > 3 && !strcmp(argv[1], "gib"))
		return per_gib(pd, atol(argv[2]), atoi(argv[3]));
	/* small MRs each over their own pages; large ones over one buffer */
	buf = mmap(NULL, size <= 65536 ? size * (size_t)count : size,
		   PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	mrs = calloc((size_t)count, sizeof(*mrs));
	if (!pd || buf == MAP_FAILED || !mrs) {
		fprintf(stderr, "regmr: out of resources\n");
		return 1;
	}
	if (touched && size <= 65536)
		for (size_t i = 0; i < size * (size_t)count; i += 4096)
			buf[i] = 1;
	add_mappings(extra);
	getrusage(RUSAGE_SELF, &r0);
	t0 = now();
	for (i = 0; i < count; i++) {
		char *p = size <= 65536 ? buf + (size_t)i * size : buf;

		mrs[i] = ibv_reg_mr(pd, p, size, IBV_ACCESS_LOCAL_WRITE |
				    IBV_ACCESS_REMOTE_WRITE |
				    IBV_ACCESS_REMOTE_READ);
		if (!mrs[i]) {
			perror("ibv_reg_mr");
			return 1;
		}
	}
	t1 = now();
	getrusage(RUSAGE_SELF, &r1);
	for (i = 0; i < count; i++)
		ibv_dereg_mr(mrs[i]);
	t2 = now();
	getrusage(RUSAGE_SELF, &r2);
	/* the CPU time per MR in user mode and in the kernel, each way */
	printf("%ld MRs of %zu B%s, %ld extra mappings: reg %.0f/s, "
	       "dereg %.0f/s; us per MR: reg user %.2f sys %.2f, dereg user "
	       "%.2f sys %.2f\n", count, size, touched ? " touched" : "",
	       extra, (double)count / (t1 - t0), (double)count / (t2 - t1),
	       (cpu(&r1, 0) - cpu(&r0, 0)) * 1e6 / (double)count,
	       (cpu(&r1, 1) - cpu(&r0, 1)) * 1e6 / (double)count,
	       (cpu(&r2, 0) - cpu(&r1, 0)) * 1e6 / (double)count,
	       (cpu(&r2, 1) - cpu(&r1, 1)) * 1e6 / (double)count);
	return 0;
}
