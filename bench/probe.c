// SPDX-License-Identifier: MIT
/*
 * probe: the physical limits that softhca's same-host path can approach on
 * this machine, measured with no RDMA stack at all.
 *
 *   probe [-a CPU] [-b CPU] [-t SECONDS] [-M MiB] [TEST...]
 *
 * TEST is any of (default: all, in this order)
 *   pingpong  two processes pinned to CPU a and CPU b bounce a counter
 *             through two cache lines of a shared mapping (one written by
 *             each); one-way latency = round trip / 2
 *   ring      the same two processes stream 8-byte messages through a
 *             single-producer single-consumer ring in shared memory
 *             (a message-rate ceiling for 8 B writes between two cores)
 *   memcpy    one process pinned to CPU b copies 64 KiB and 1 MiB blocks:
 *             in-cache (the same source and destination every time) and
 *             out-of-cache (walking through two -M MiB arenas, far larger
 *             than the last-level cache)
 *   cma       the floor of the mechanism softhca's same-host path uses:
 *             process_vm_writev ping-pong between the two processes (8 B,
 *             one-way, both polling); then, with the partner blocked, one
 *             8-byte process_vm_readv, 8-byte writes back to back (calls
 *             per second), and 64 KiB / 1 MiB writes (Gb/s)
 *
 * Output: one `key=value` line per figure, for bench/run.sh to parse, e.g.
 *   pingpong_oneway_ns=61.8
 *   memcpy_65536_incache_gbps=412.3
 * Bandwidth is in Gb/s (1e9 bits per second of bytes copied), as perftest's
 * --report_gbits.  A benchmark, not a test: it has no thresholds.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int cpu_a = 0, cpu_b = 1;
static double seconds = 1.0;     /* per figure */
static size_t arena_mib = 256;   /* per out-of-cache arena (two of them) */

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void pin(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (sched_setaffinity(0, sizeof(set), &set) != 0) {
		fprintf(stderr, "probe: cannot pin to CPU %d: %s\n", cpu,
			strerror(errno));
		exit(1);
	}
}

static void *shared_map(size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
		       MAP_SHARED | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED) {
		perror("probe: mmap");
		exit(1);
	}
	memset(p, 0, len);
	return p;
}

/* Fork the partner, pinned to cpu_b; it dies with us. */
static pid_t spawn(void (*fn)(void *), void *arg)
{
	pid_t parent = getpid();
	pid_t pid = fork();

	if (pid < 0) {
		perror("probe: fork");
		exit(1);
	}
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(1);
		pin(cpu_b);
		fn(arg);
		_exit(0);
	}
	return pid;
}

static void reap(pid_t pid)
{
	int status;

	if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) ||
	    WEXITSTATUS(status) != 0) {
		fprintf(stderr, "probe: partner process failed\n");
		exit(1);
	}
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* ---- cache-line ping-pong ---------------------------------------------- */

/* ping and pong live on separate pages: no false sharing, no adjacent-line
 * prefetch pulling the other flag along.  Both sides spin with PAUSE: on
 * this kind of machine it is a few ns faster than a bare loop, whose loads
 * keep stealing the line from the writer. */
#define PP_STOP UINT64_MAX

struct pingpong {
	volatile uint64_t *ping;
	volatile uint64_t *pong;
};

static void pong_side(void *arg)
{
	struct pingpong *pp = arg;
	uint64_t v, last = 0;

	for (;;) {
		while ((v = __atomic_load_n(pp->ping, __ATOMIC_ACQUIRE)) == last)
			__builtin_ia32_pause();
		if (v == PP_STOP)
			break;
		__atomic_store_n(pp->pong, v, __ATOMIC_RELEASE);
		last = v;
	}
}

static inline void bounce(struct pingpong *pp, uint64_t i)
{
	__atomic_store_n(pp->ping, i, __ATOMIC_RELEASE);
	while (__atomic_load_n(pp->pong, __ATOMIC_ACQUIRE) != i)
		__builtin_ia32_pause();
}

static void test_pingpong(void)
{
	enum { BATCH = 64, MAX_SAMPLES = 1 << 20 };
	char *mem = shared_map(2 * 4096);
	struct pingpong pp = {
		.ping = (volatile uint64_t *)mem,
		.pong = (volatile uint64_t *)(mem + 4096),
	};
	double *rtt = malloc(MAX_SAMPLES * sizeof(*rtt));
	uint64_t i = 1;
	size_t n = 0;
	double t_end;
	pid_t pid = spawn(pong_side, &pp);

	pin(cpu_a);
	for (; i <= 100000; i++)          /* warm-up */
		bounce(&pp, i);
	t_end = now() + seconds;
	while (n < MAX_SAMPLES) {
		double t0 = now(), t1;

		for (int k = 0; k < BATCH; k++, i++)
			bounce(&pp, i);
		t1 = now();
		rtt[n++] = (t1 - t0) / BATCH;
		if (t1 > t_end)
			break;
	}
	__atomic_store_n(pp.ping, PP_STOP, __ATOMIC_RELEASE);
	reap(pid);

	qsort(rtt, n, sizeof(*rtt), cmp_double);
	printf("pingpong_samples=%zu\n", n);
	printf("pingpong_batch=%d\n", BATCH);
	printf("pingpong_oneway_ns=%.1f\n", rtt[n / 2] / 2 * 1e9);
	printf("pingpong_oneway_ns_min=%.1f\n", rtt[0] / 2 * 1e9);
	printf("pingpong_oneway_ns_p99=%.1f\n", rtt[n * 99 / 100] / 2 * 1e9);
	printf("pingpong_oneway_ns_max=%.1f\n", rtt[n - 1] / 2 * 1e9);
	fflush(stdout);
	free(rtt);
	munmap(mem, 2 * 4096);
}

/* ---- SPSC ring of 8-byte messages ---------------------------------------- */

/* Each slot carries its sequence number (message i holds i + 1), so the
 * consumer polls the slot itself and no head index bounces between the
 * cores: one cache line moves per eight messages, as in a NIC's or UCX's
 * shared-memory FIFO.  The consumer returns credits every 64 messages. */
#define RING_SLOTS 4096          /* 32 KiB of slots */
#define RING_CREDIT 64

struct ring {
	uint64_t tail __attribute__((aligned(128)));   /* consumer writes */
	uint64_t total __attribute__((aligned(128)));  /* producer, at the end */
	uint64_t slot[RING_SLOTS] __attribute__((aligned(128)));
};

static void ring_consumer(void *arg)
{
	struct ring *r = arg;
	uint64_t tail = 0;

	for (;;) {
		if (__atomic_load_n(&r->slot[tail % RING_SLOTS],
				    __ATOMIC_ACQUIRE) == tail + 1) {
			tail++;
			if (tail % RING_CREDIT == 0)
				__atomic_store_n(&r->tail, tail, __ATOMIC_RELEASE);
		} else if (__atomic_load_n(&r->total, __ATOMIC_ACQUIRE) == tail) {
			break;
		}
	}
	__atomic_store_n(&r->tail, tail, __ATOMIC_RELEASE);
}

static void test_ring(void)
{
	struct ring *r = shared_map(sizeof(*r));
	uint64_t head = 0, tail = 0;
	double t0, t, t_end;

	r->total = UINT64_MAX;
	pid_t pid = spawn(ring_consumer, r);

	pin(cpu_a);
	t0 = now();
	t_end = t0 + seconds;
	for (;;) {
		while (head - tail == RING_SLOTS)
			tail = __atomic_load_n(&r->tail, __ATOMIC_ACQUIRE);
		__atomic_store_n(&r->slot[head % RING_SLOTS], head + 1,
				 __ATOMIC_RELEASE);
		head++;
		if (head % 65536 == 0 && now() > t_end)
			break;
	}
	__atomic_store_n(&r->total, head, __ATOMIC_RELEASE);
	while (__atomic_load_n(&r->tail, __ATOMIC_ACQUIRE) != head)
		__builtin_ia32_pause();
	t = now() - t0;
	reap(pid);
	printf("ring_8B_mpps=%.2f\n", head / t / 1e6);
	fflush(stdout);
	munmap(r, sizeof(*r));
}

/* ---- CMA: process_vm_writev/readv, the mechanism of softhca's shm path ---- */

/* After fork both processes have this page at the same address, each its
 * own private copy (written once on each side to break copy-on-write). */
static volatile uint64_t cma_flag[512] __attribute__((aligned(4096)));

struct cma_ctl {
	volatile int ready;       /* the partner has made its pages its own */
	volatile int stop;
};

static int cma_write(pid_t pid, const void *src, void *dst, size_t len)
{
	struct iovec l = { (void *)src, len }, r = { dst, len };

	return process_vm_writev(pid, &l, 1, &r, 1, 0) == (ssize_t)len ? 0 : -1;
}

static int cma_read(pid_t pid, void *dst, const void *src, size_t len)
{
	struct iovec l = { dst, len }, r = { (void *)src, len };

	return process_vm_readv(pid, &l, 1, &r, 1, 0) == (ssize_t)len ? 0 : -1;
}

static struct cma_ctl *cma_ctl;
static char *cma_buf;             /* 1 MiB, private, same address in both */
#define CMA_BUF (1 << 20)

static int cma_pipe[2];           /* the partner blocks on it when idle */

static void cma_partner(void *unused)
{
	pid_t parent = getppid();
	uint64_t v, last = 0;
	char c;

	/* Break copy-on-write before the parent writes here, then say so:
	 * a write of ours after one of the parent's would lose it. */
	cma_flag[0] = 0;
	memset(cma_buf, 1, CMA_BUF);
	__atomic_store_n(&cma_ctl->ready, 1, __ATOMIC_RELEASE);
	for (;;) {
		while ((v = cma_flag[0]) == last && !cma_ctl->stop)
			__builtin_ia32_pause();
		if (cma_ctl->stop || v == UINT64_MAX)
			break;
		last = v;
		if (cma_write(parent, &v, (void *)&cma_flag[0], sizeof(v)) != 0)
			_exit(3);
	}
	/* idle, as a perftest server is during ib_read_lat and ib_write_bw:
	 * blocked until the parent closes the pipe */
	close(cma_pipe[1]);
	while (read(cma_pipe[0], &c, 1) < 0 && errno == EINTR)
		;
}

static double median_of(double *a, size_t n)
{
	qsort(a, n, sizeof(*a), cmp_double);
	return a[n / 2];
}

static void test_cma(void)
{
	enum { MAXS = 1 << 18 };
	double *s = malloc(MAXS * sizeof(*s)), t0, t1, t_end;
	size_t n;
	uint64_t i = 0, v;
	char *src;
	pid_t pid;

	cma_ctl = shared_map(4096);
	cma_buf = mmap(NULL, CMA_BUF, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	src = malloc(CMA_BUF);
	if (cma_buf == MAP_FAILED || !src || !s) {
		perror("probe: cma buffers");
		exit(1);
	}
	memset(src, 2, CMA_BUF);
#ifdef PR_SET_PTRACER
	prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);  /* Yama: child -> us */
#endif
	cma_flag[0] = 0;
	memset(cma_buf, 3, CMA_BUF);
	if (pipe(cma_pipe) != 0) {
		perror("probe: pipe");
		exit(1);
	}
	pid = spawn(cma_partner, NULL);
	close(cma_pipe[0]);
	pin(cpu_a);
	while (!__atomic_load_n(&cma_ctl->ready, __ATOMIC_ACQUIRE))
		__builtin_ia32_pause();

	/* one-way latency: 8-byte process_vm_writev each way, both spinning */
	for (n = 0, t_end = now() + seconds; n < MAXS;) {
		t0 = now();
		for (int k = 0; k < 16; k++) {
			v = ++i;
			if (cma_write(pid, &v, (void *)&cma_flag[0], sizeof(v)) != 0) {
				printf("cma_error=%s\n", strerror(errno));
				cma_ctl->stop = 1;
				goto out;
			}
			while (cma_flag[0] != v)
				__builtin_ia32_pause();
		}
		t1 = now();
		s[n++] = (t1 - t0) / 16 / 2;
		if (t1 > t_end)
			break;
	}
	printf("cma_write_oneway_us=%.3f\n", median_of(s, n) * 1e6);
	fflush(stdout);

	/* the partner stops polling and blocks; the calls below touch only
	 * its other pages */
	cma_ctl->stop = 1;
	usleep(10000);

	/* one 8-byte process_vm_readv (the whole read) */
	for (n = 0, t_end = now() + seconds / 2; n < MAXS;) {
		t0 = now();
		for (int k = 0; k < 64; k++)
			if (cma_read(pid, src, cma_buf, 8) != 0)
				break;
		t1 = now();
		s[n++] = (t1 - t0) / 64;
		if (t1 > t_end)
			break;
	}
	printf("cma_read_us=%.3f\n", median_of(s, n) * 1e6);

	/* 8-byte writes back to back: one call per message */
	{
		uint64_t calls = 0;

		t0 = now();
		t_end = t0 + seconds / 2;
		do {
			for (int k = 0; k < 256; k++)
				cma_write(pid, src, cma_buf + 64 * (k & 31), 8);
			calls += 256;
			t1 = now();
		} while (t1 < t_end);
		printf("cma_write_8B_mpps=%.3f\n", calls / (t1 - t0) / 1e6);
	}

	/* bandwidth of one process_vm_writev, same buffers each time */
	for (size_t len = 64 << 10; len <= CMA_BUF; len <<= 4) {
		uint64_t bytes = 0;

		for (int k = 0; k < 8; k++)
			cma_write(pid, src, cma_buf, len);
		t0 = now();
		t_end = t0 + seconds / 2;
		do {
			for (int k = 0; k < 8; k++)
				cma_write(pid, src, cma_buf, len);
			bytes += 8 * len;
			t1 = now();
		} while (t1 < t_end);
		printf("cma_write_%zu_gbps=%.1f\n", len, bytes * 8.0 / (t1 - t0) / 1e9);
	}
out:
	cma_ctl->stop = 1;
	close(cma_pipe[1]);
	reap(pid);
	fflush(stdout);
	free(src);
	free(s);
	munmap(cma_buf, CMA_BUF);
	munmap(cma_ctl, 4096);
}

/* ---- single-core memcpy ---------------------------------------------------- */

static double copy_rate(char *dst, char *src, size_t size, size_t span)
{
	/* span == size: in cache; otherwise walk through span bytes */
	size_t off = 0, bytes = 0;
	double t0, t, t_end;
	int k;

	/* warm up (fills the cache for in-cache, the TLB for the walk) */
	for (k = 0; k < 8; k++)
		memcpy(dst, src, size);
	t0 = now();
	t_end = t0 + seconds / 4;
	do {
		for (k = 0; k < 16; k++) {
			memcpy(dst + off, src + off, size);
			__asm__ __volatile__("" ::: "memory");
			bytes += size;
			off += size;
			if (off + size > span)
				off = 0;
		}
		t = now();
	} while (t < t_end);
	return bytes * 8.0 / (t - t0) / 1e9;
}

static void test_memcpy(void)
{
	static const size_t sizes[] = { 64 << 10, 1 << 20 };
	size_t span = arena_mib << 20;
	char *src, *dst;

	pin(cpu_b);
	src = mmap(NULL, span, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	dst = mmap(NULL, span, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (src == MAP_FAILED || dst == MAP_FAILED) {
		perror("probe: mmap arena");
		exit(1);
	}
	memset(src, 0x5a, span);       /* fault every page in */
	memset(dst, 0xa5, span);
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		size_t s = sizes[i];

		printf("memcpy_%zu_incache_gbps=%.1f\n", s,
		       copy_rate(dst, src, s, s));
		fflush(stdout);
		printf("memcpy_%zu_outcache_gbps=%.1f\n", s,
		       copy_rate(dst, src, s, span));
		fflush(stdout);
	}
	printf("memcpy_arena_mib=%zu\n", arena_mib);
	munmap(src, span);
	munmap(dst, span);
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: probe [-a CPU] [-b CPU] [-t SECONDS] [-M MiB] [pingpong|ring|memcpy|cma ...]\n"
		"  -a, -b  the two CPUs (default 0 and 1)\n"
		"  -t      seconds per figure (default 1)\n"
		"  -M      size of each out-of-cache memcpy arena in MiB (default 256)\n");
}

int main(int argc, char **argv)
{
	int c, ran = 0;

	while ((c = getopt(argc, argv, "a:b:t:M:h")) != -1) {
		switch (c) {
		case 'a': cpu_a = atoi(optarg); break;
		case 'b': cpu_b = atoi(optarg); break;
		case 't': seconds = atof(optarg); break;
		case 'M': arena_mib = strtoul(optarg, NULL, 0); break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (seconds <= 0 || arena_mib < 4) {
		usage(stderr);
		return 2;
	}
	/* bounded whatever happens: SIGALRM ends us, PDEATHSIG the partner */
	alarm((unsigned)(30 + 12 * seconds));
	printf("cpu_a=%d\ncpu_b=%d\n", cpu_a, cpu_b);
	for (int i = optind; i < argc || (!ran && i == argc); i++) {
		const char *t = i < argc ? argv[i] : "all";
		int all = !strcmp(t, "all");

		ran = 1;
		if (all || !strcmp(t, "pingpong"))
			test_pingpong();
		if (all || !strcmp(t, "ring"))
			test_ring();
		if (all || !strcmp(t, "memcpy"))
			test_memcpy();
		if (all || !strcmp(t, "cma"))
			test_cma();
		if (!all && strcmp(t, "pingpong") && strcmp(t, "ring") &&
		    strcmp(t, "memcpy") && strcmp(t, "cma")) {
			fprintf(stderr, "probe: unknown test '%s'\n", t);
			return 2;
		}
	}
	return 0;
}
