// SPDX-License-Identifier: MIT
/*
 * An MPI program that checks what it moves, for tests/external (Open MPI
 * and MPICH over UCX or libfabric over softhca) and bench/middleware.sh.
 *
 *   mpi_check            every check below; exit 0 and "mpi_check: ok"
 *                        from rank 0 when all held, else MPI_Abort(1)
 *   mpi_check --bench    ping-pong latency (half round trip) and
 *                        bandwidth between ranks 0 and 1 at 0 B, 8 B,
 *                        64 KiB and 1 MiB, one line each from rank 0
 *
 * Checks (any even number of ranks >= 2):
 *   pingpong   rank r and r^1 exchange messages of 0 B to 4 MiB, every
 *              byte of every message compared with a pattern of (size,
 *              iteration, sender)
 *   allreduce  MPI_SUM of 4096 longs and of one double, exact
 *   alltoall   a block of ints from every rank to every rank
 *   put/get    MPI_Put into the right neighbour's window and MPI_Get from
 *              the left one's, 8 B and 1 MiB, under fences
 *
 * With MPI_CHECK_HOLD=DIR set, every rank writes DIR/ready.RANK (its pid)
 * when it is done and waits (60 s at most) for DIR/go before it ends, so
 * that a test can read softhca's counters of the live processes.
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int rank, nranks;

#define CHECK(cond, ...)                                                    \
	do {                                                                \
		if (!(cond)) {                                              \
			fprintf(stderr, "mpi_check: rank %d: ", rank);      \
			fprintf(stderr, __VA_ARGS__);                       \
			fprintf(stderr, "\n");                              \
			MPI_Abort(MPI_COMM_WORLD, 1);                       \
		}                                                           \
	} while (0)

static unsigned char pattern(size_t size, int iter, int sender, size_t i)
{
	return (unsigned char)(i * 131 + size * 7 + (size_t)iter * 17 +
			       (size_t)sender * 101 + 3);
}

static void fill(unsigned char *b, size_t size, int iter, int sender)
{
	size_t i;

	for (i = 0; i < size; i++)
		b[i] = pattern(size, iter, sender, i);
}

static void verify(const unsigned char *b, size_t size, int iter, int sender,
		   const char *what)
{
	size_t i;

	for (i = 0; i < size; i++)
		CHECK(b[i] == pattern(size, iter, sender, i),
		      "%s: %zu-byte message %d from rank %d: byte %zu is %u, "
		      "want %u", what, size, iter, sender, i, b[i],
		      pattern(size, iter, sender, i));
}

static const size_t pp_sizes[] = {
	0, 1, 8, 100, 1024, 4096, 8192, 65536, 200000, 1 << 20, 4 << 20,
};

static void pingpong(void)
{
	int peer = rank ^ 1, it, iters;
	unsigned char *buf = malloc(4 << 20);
	size_t s, size;
	MPI_Status st;
	int count;

	CHECK(buf, "out of memory");
	for (s = 0; s < sizeof(pp_sizes) / sizeof(pp_sizes[0]); s++) {
		size = pp_sizes[s];
		iters = size >= (1 << 20) ? 4 : 20;
		for (it = 0; it < iters; it++) {
			if (rank & 1) {
				memset(buf, 0, size);
				MPI_Recv(buf, (int)size, MPI_BYTE, peer, it,
					 MPI_COMM_WORLD, &st);
				MPI_Get_count(&st, MPI_BYTE, &count);
				CHECK((size_t)count == size,
				      "pingpong: got %d bytes, want %zu",
				      count, size);
				verify(buf, size, it, peer, "pingpong");
				fill(buf, size, it, rank);
				MPI_Send(buf, (int)size, MPI_BYTE, peer, it,
					 MPI_COMM_WORLD);
			} else {
				fill(buf, size, it, rank);
				MPI_Send(buf, (int)size, MPI_BYTE, peer, it,
					 MPI_COMM_WORLD);
				memset(buf, 0, size);
				MPI_Recv(buf, (int)size, MPI_BYTE, peer, it,
					 MPI_COMM_WORLD, &st);
				MPI_Get_count(&st, MPI_BYTE, &count);
				CHECK((size_t)count == size,
				      "pingpong: got %d bytes back, want %zu",
				      count, size);
				verify(buf, size, it, peer, "pingpong reply");
			}
		}
	}
	free(buf);
}

static void allreduce(void)
{
	enum { N = 4096 };
	long *in = malloc(N * sizeof(long)), *out = malloc(N * sizeof(long));
	double d = rank + 0.5, dsum = 0;
	long r, want;
	int i;

	CHECK(in && out, "out of memory");
	for (i = 0; i < N; i++)
		in[i] = (long)i * (rank + 1) - rank;
	MPI_Allreduce(in, out, N, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
	for (i = 0; i < N; i++) {
		want = 0;
		for (r = 0; r < nranks; r++)
			want += (long)i * (r + 1) - r;
		CHECK(out[i] == want, "allreduce: [%d] = %ld, want %ld", i,
		      out[i], want);
	}
	MPI_Allreduce(&d, &dsum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
	CHECK(dsum == nranks * (nranks - 1) / 2.0 + 0.5 * nranks,
	      "allreduce: double sum %g", dsum);
	free(in);
	free(out);
}

static void alltoall(void)
{
	enum { BLK = 1000 };
	int *in = malloc((size_t)nranks * BLK * sizeof(int));
	int *out = malloc((size_t)nranks * BLK * sizeof(int));
	int r, i;

	CHECK(in && out, "out of memory");
	for (r = 0; r < nranks; r++)
		for (i = 0; i < BLK; i++)
			in[r * BLK + i] = rank * 1000003 + r * 1009 + i;
	MPI_Alltoall(in, BLK, MPI_INT, out, BLK, MPI_INT, MPI_COMM_WORLD);
	for (r = 0; r < nranks; r++)
		for (i = 0; i < BLK; i++)
			CHECK(out[r * BLK + i] == r * 1000003 + rank * 1009 + i,
			      "alltoall: from rank %d, [%d] = %d", r, i,
			      out[r * BLK + i]);
	free(in);
	free(out);
}

static void one_sided(size_t size)
{
	int right = (rank + 1) % nranks, left = (rank + nranks - 1) % nranks;
	unsigned char *win_buf, *local = malloc(size);
	MPI_Win win;

	CHECK(local, "out of memory");
	MPI_Alloc_mem((MPI_Aint)size, MPI_INFO_NULL, &win_buf);
	memset(win_buf, 0, size);
	MPI_Win_create(win_buf, (MPI_Aint)size, 1, MPI_INFO_NULL,
		       MPI_COMM_WORLD, &win);

	/* put: my pattern into the right neighbour's window */
	fill(local, size, 1, rank);
	MPI_Win_fence(0, win);
	MPI_Put(local, (int)size, MPI_BYTE, right, 0, (int)size, MPI_BYTE,
		win);
	MPI_Win_fence(0, win);
	verify(win_buf, size, 1, left, "MPI_Put");

	/* get: the left neighbour's window, which its left one put */
	memset(local, 0, size);
	MPI_Get(local, (int)size, MPI_BYTE, left, 0, (int)size, MPI_BYTE,
		win);
	MPI_Win_fence(0, win);
	verify(local, size, 1, (left + nranks - 1) % nranks, "MPI_Get");

	MPI_Win_free(&win);
	MPI_Free_mem(win_buf);
	free(local);
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* n round trips of size bytes between ranks 0 and 1 (others skip). */
static void pingpong_rounds(unsigned char *buf, size_t size, long n)
{
	long i;

	for (i = 0; i < n && rank < 2; i++) {
		if (rank == 0) {
			MPI_Send(buf, (int)size, MPI_BYTE, 1, 0,
				 MPI_COMM_WORLD);
			MPI_Recv(buf, (int)size, MPI_BYTE, 1, 0,
				 MPI_COMM_WORLD, MPI_STATUS_IGNORE);
		} else {
			MPI_Recv(buf, (int)size, MPI_BYTE, 0, 0,
				 MPI_COMM_WORLD, MPI_STATUS_IGNORE);
			MPI_Send(buf, (int)size, MPI_BYTE, 0, 0,
				 MPI_COMM_WORLD);
		}
	}
}

/* Seconds that n round trips take, as rank 0 measured them (every rank
 * gets the same figure, so that all agree on the next count). */
static double timed_rounds(unsigned char *buf, size_t size, long n)
{
	double t0, t;

	MPI_Barrier(MPI_COMM_WORLD);
	t0 = now();
	pingpong_rounds(buf, size, n);
	t = now() - t0;
	MPI_Bcast(&t, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
	return t;
}

/*
 * Ping-pong between ranks 0 and 1 (others wait): latency per size.  Runs
 * by time, not by a fixed count: a count that grows until a run takes
 * 50 ms, then 0.3 s of warm-up and about 0.5 s measured.  A fixed 2,000
 * round trips after 200 of warm-up measured the first connections' and
 * registrations' costs (8 B: 4 us where a longer run gives 1).
 */
static void bench(void)
{
	static const size_t sizes[] = { 0, 8, 65536, 1 << 20 };
	unsigned char *buf = malloc(1 << 20);
	size_t s;

	CHECK(buf, "out of memory");
	memset(buf, 1, 1 << 20);
	for (s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
		long n = 16, iters;
		double t = timed_rounds(buf, sizes[s], n), us;

		while (t < 0.05 && n < (1L << 26)) {
			n *= 4;
			t = timed_rounds(buf, sizes[s], n);
		}
		if (t < 1e-3)
			t = 1e-3;	/* the count's cap: not reached */
		timed_rounds(buf, sizes[s], (long)((double)n * 0.3 / t) + 1);
		iters = (long)((double)n * 0.5 / t) + 1;
		us = timed_rounds(buf, sizes[s], iters) / (double)iters / 2 *
		     1e6;
		if (rank == 0) {
			printf("mpi_bench: size %zu latency_us %.2f "
			       "bandwidth_MBps %.1f\n", sizes[s], us,
			       us > 0 ? (double)sizes[s] / us : 0);
			fflush(stdout);
		}
	}
	free(buf);
}

/* MPI_CHECK_HOLD: say "ready" and wait for "go" (see the top). */
static void hold(void)
{
	const char *dir = getenv("MPI_CHECK_HOLD");
	char path[4096];
	FILE *f;
	int i;

	if (!dir || !*dir)
		return;
	snprintf(path, sizeof(path), "%s/ready.%d", dir, rank);
	f = fopen(path, "w");
	CHECK(f, "cannot write %s", path);
	fprintf(f, "%d\n", (int)getpid());
	fclose(f);
	snprintf(path, sizeof(path), "%s/go", dir);
	for (i = 0; i < 6000 && access(path, F_OK); i++)
		usleep(10000);
}

int main(int argc, char **argv)
{
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &nranks);
	if (argc > 1 && !strcmp(argv[1], "--bench")) {
		CHECK(nranks >= 2, "--bench needs 2 ranks");
		bench();
		MPI_Finalize();
		return 0;
	}
	CHECK(nranks >= 2 && nranks % 2 == 0, "needs an even number of ranks");
	pingpong();
	MPI_Barrier(MPI_COMM_WORLD);
	allreduce();
	alltoall();
	one_sided(8);
	one_sided(1 << 20);
	MPI_Barrier(MPI_COMM_WORLD);
	hold();
	MPI_Barrier(MPI_COMM_WORLD);
	if (rank == 0)
		printf("mpi_check: ok: %d ranks: pingpong 0 B-4 MiB, "
		       "allreduce, alltoall, put/get 8 B and 1 MiB\n", nranks);
	MPI_Finalize();
	return 0;
}
