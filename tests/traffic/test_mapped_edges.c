// SPDX-License-Identifier: MIT
/*
 * Mapped registered memory at an MR's edges (issue 13): the responder
 * registers a malloc'ed, unaligned buffer, whose first and last pages it
 * shares with other memory and which therefore stay outside its segments
 * (shm/seg.c, page_range).  An access there misses in the requester's
 * segment map; the map is read again only when the owner's segment table
 * changed since the last reading (the table's generation, arena.h), not
 * on every such access: the requester's segmap_refreshes counter
 * (`softhca stat`) shows it.  A segment the owner adds later is still
 * found (the generation moved), and a WRITE or READ over whole pages and
 * edges copies the whole pages through the mapping, the edge bytes by
 * CMA.
 * Every byte is checked by the responder in its own memory.
 */
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "ep.h"

#define EDGE_N	200		/* edge WRITEs of each kind */
#define MR_LEN	(3u * 4096)	/* partial page, 2 whole pages, partial */

/* What the responder tells the requester about one of its MRs. */
struct mr_info {
	uint64_t addr;
	uint32_t rkey;
	uint32_t len;
};

/* The process's counter name, as `softhca stat` shows it. */
#define proc_counter(pid, name) ep_stat_counter(SOFTHCA_TOOL, pid, name)

static double now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

/* One signaled RDMA op of len bytes between a's buffer at off and raddr,
 * polled to its completion. */
static void rdma_op(struct ep *a, enum ibv_wr_opcode op, uint64_t off,
		    uint32_t len, uint64_t raddr, uint32_t rkey)
{
	struct ibv_send_wr wr, *bad;
	struct ibv_sge sge;
	struct ibv_wc wc;
	int n;

	memset(&wr, 0, sizeof(wr));
	sge.addr = (uintptr_t)a->buf + off;
	sge.length = len;
	sge.lkey = a->mr->lkey;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = op;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = rkey;
	ASSERT_EQ(ibv_post_send(a->qp, &wr, &bad), 0);
	do
		n = ibv_poll_cq(a->scq, 1, &wc);
	while (n == 0);
	ASSERT_EQ(n, 1);
	ASSERT_EQ(wc.status, IBV_WC_SUCCESS);
}

static void write_to(struct ep *a, uint64_t off, uint32_t len, uint64_t raddr,
		     uint32_t rkey)
{
	rdma_op(a, IBV_WR_RDMA_WRITE, off, len, raddr, rkey);
}

/*
 * The responder: an unaligned MR in malloc'ed memory ('e': its edges are
 * written, then 'E' the whole of it), then ('n') a page-aligned MR
 * registered after the requester read its table.
 */
static void responder(int fd, void *arg)
{
	struct mr_info mi;
	struct ep_opts o;
	struct ibv_mr *mr, *mr2;
	uint8_t *raw, *p, *q;
	uint64_t v;
	struct ep b;

	(void)arg;
	ep_default_opts(&o, IBV_QPT_RC);
	ep_open_remote(&b, &o, fd);
	raw = malloc(MR_LEN + 2 * 4096);
	ASSERT(raw != NULL);
	p = raw + 16;
	if (!((uintptr_t)p & 4095))
		p += 16;
	memset(p, EP_SENTINEL, MR_LEN);
	mr = ibv_reg_mr(b.pd, p, MR_LEN, IBV_ACCESS_LOCAL_WRITE |
			IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
	ASSERT(mr != NULL);
	mi.addr = (uintptr_t)p;
	mi.rkey = mr->rkey;
	mi.len = MR_LEN;
	xwrite(fd, &mi, sizeof(mi));
	duo_signal(fd, 'u');

	duo_expect(fd, 'e');	/* the last edge WRITEs' values landed */
	memcpy(&v, p, 8);
	ASSERT_EQ(v, (uint64_t)EDGE_N);
	memcpy(&v, p + MR_LEN - 8, 8);
	ASSERT_EQ(v, (uint64_t)EDGE_N + 1000);
	duo_signal(fd, 'e');

	duo_expect(fd, 'E');	/* one WRITE over the whole MR */
	ASSERT_EQ(ep_find_pattern_diff(p, MR_LEN, 7, 0), -1);
	duo_signal(fd, 'E');

	duo_expect(fd, 'n');	/* a new segment, after the table was read */
	ASSERT_EQ(posix_memalign((void **)&q, 4096, 2 * 4096), 0);
	memset(q, EP_SENTINEL, 2 * 4096);
	mr2 = ibv_reg_mr(b.pd, q, 2 * 4096, IBV_ACCESS_LOCAL_WRITE |
			 IBV_ACCESS_REMOTE_WRITE);
	ASSERT(mr2 != NULL);
	mi.addr = (uintptr_t)q;
	mi.rkey = mr2->rkey;
	mi.len = 2 * 4096;
	xwrite(fd, &mi, sizeof(mi));
	duo_expect(fd, 'N');
	ASSERT_EQ(ep_find_pattern_diff(q, 2 * 4096, 9, 0), -1);
	duo_signal(fd, 'N');

	duo_expect(fd, 'q');
	ASSERT_EQ(ibv_dereg_mr(mr2), 0);
	ASSERT_EQ(ibv_dereg_mr(mr), 0);
	free(q);
	free(raw);
	ep_destroy(&b);
}

/* EDGE_N 8-byte WRITEs to each edge page of the MR: i to its first
 * bytes, i + 1000 to its last ones */
static void edge_writes(struct ep *a, const struct mr_info *mi)
{
	uint64_t v;
	uint32_t i;

	for (i = 1; i <= EDGE_N; i++) {
		v = i;
		memcpy(a->buf, &v, 8);
		write_to(a, 0, 8, mi->addr, mi->rkey);
		v = i + 1000;
		memcpy(a->buf + 8, &v, 8);
		write_to(a, 8, 8, mi->addr + mi->len - 8, mi->rkey);
	}
}

TEST(unaligned_mr_edges)
{
	long long ref0, ref1, map0, map1, cma0, cma1;
	double t0, t_edge, t_page;
	struct mr_info mi, mi2;
	struct ep_opts o;
	struct duo d;
	struct ep a;
	uint64_t page;
	uint32_t i;

	setenv("SOFTHCA_MAP", "1", 1);	/* both sides, whatever the run's */
	duo_fork(&d, responder, NULL);
	ep_default_opts(&o, IBV_QPT_RC);
	ep_open_remote(&a, &o, d.fd);
	xread(d.fd, &mi, sizeof(mi));
	duo_expect(d.fd, 'u');
	ASSERT(mi.addr & 4095);
	/* the first whole page of the MR: mapped (this first access reads
	 * the table) */
	page = (mi.addr + 4095) & ~4095ull;
	write_to(&a, 0, 8, page, mi.rkey);

	/* a figure beside the counts, not checked */
	t0 = now_ns();
	edge_writes(&a, &mi);
	t_edge = (now_ns() - t0) / (2 * EDGE_N);
	t0 = now_ns();
	for (i = 0; i < EDGE_N; i++)
		write_to(&a, 0, 8, page + 8 * (i % 64), mi.rkey);
	t_page = (now_ns() - t0) / EDGE_N;
	fprintf(stderr, "8 B WRITE: %.0f ns at an MR edge, %.0f ns in a "
		"mapped page\n", t_edge, t_page);

	ref0 = proc_counter(getpid(), "segmap_refreshes");
	map0 = proc_counter(getpid(), "map_xfers");
	cma0 = proc_counter(getpid(), "cma_xfers");
	edge_writes(&a, &mi);
	ref1 = proc_counter(getpid(), "segmap_refreshes");
	map1 = proc_counter(getpid(), "map_xfers");
	cma1 = proc_counter(getpid(), "cma_xfers");
	/* the edge bytes go by CMA, one access each, and the table that
	 * did not change is not read again */
	ASSERT_EQ(ref1 - ref0, 0);
	ASSERT_EQ(cma1 - cma0, 2 * EDGE_N);
	ASSERT_EQ(map1 - map0, 0);
	duo_signal(d.fd, 'e');
	duo_expect(d.fd, 'e');

	/* one WRITE over the whole MR: its whole pages through the mapping,
	 * its edges by CMA */
	ep_fill_pattern(a.buf, mi.len, 7, 0);
	map0 = proc_counter(getpid(), "map_xfers");
	cma0 = proc_counter(getpid(), "cma_xfers");
	write_to(&a, 0, mi.len, mi.addr, mi.rkey);
	map1 = proc_counter(getpid(), "map_xfers");
	cma1 = proc_counter(getpid(), "cma_xfers");
	ASSERT_EQ(map1 - map0, 1);
	ASSERT_EQ(cma1 - cma0, 1);
	duo_signal(d.fd, 'E');
	duo_expect(d.fd, 'E');
	/* and a READ of it all back, the same way */
	memset(a.buf, 0, mi.len);
	rdma_op(&a, IBV_WR_RDMA_READ, 0, mi.len, mi.addr, mi.rkey);
	ASSERT_EQ(ep_find_pattern_diff(a.buf, mi.len, 7, 0), -1);
	map0 = proc_counter(getpid(), "map_xfers");
	cma0 = proc_counter(getpid(), "cma_xfers");
	ASSERT_EQ(map0 - map1, 1);
	ASSERT_EQ(cma0 - cma1, 1);

	/* a segment that appeared after the table was read is found */
	duo_signal(d.fd, 'n');
	xread(d.fd, &mi2, sizeof(mi2));
	ep_fill_pattern(a.buf, mi2.len, 9, 0);
	ref0 = proc_counter(getpid(), "segmap_refreshes");
	map0 = proc_counter(getpid(), "map_xfers");
	cma0 = proc_counter(getpid(), "cma_xfers");
	write_to(&a, 0, mi2.len, mi2.addr, mi2.rkey);
	ref1 = proc_counter(getpid(), "segmap_refreshes");
	map1 = proc_counter(getpid(), "map_xfers");
	cma1 = proc_counter(getpid(), "cma_xfers");
	ASSERT_EQ(ref1 - ref0, 1);
	ASSERT_EQ(map1 - map0, 1);
	ASSERT_EQ(cma1 - cma0, 0);
	duo_signal(d.fd, 'N');
	duo_expect(d.fd, 'N');

	duo_signal(d.fd, 'q');
	duo_wait(&d);
	ep_destroy(&a);
}

/* ------------------------------------------------------------------ */
/* Both edges of one access in one CMA call                            */

/* The responder of span_loop: the unaligned MR, then asleep until 'q'. */
static void span_responder(int fd, void *arg)
{
	struct mr_info mi;
	struct ep_opts o;
	struct ibv_mr *mr;
	uint8_t *raw, *p;
	struct ep b;

	(void)arg;
	ep_default_opts(&o, IBV_QPT_RC);
	ep_open_remote(&b, &o, fd);
	raw = malloc(MR_LEN + 2 * 4096);
	ASSERT(raw != NULL);
	p = raw + 16;
	if (!((uintptr_t)p & 4095))
		p += 16;
	mr = ibv_reg_mr(b.pd, p, MR_LEN, IBV_ACCESS_LOCAL_WRITE |
			IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
	ASSERT(mr != NULL);
	mi.addr = (uintptr_t)p;
	mi.rkey = mr->rkey;
	mi.len = MR_LEN;
	xwrite(fd, &mi, sizeof(mi));
	duo_expect(fd, 'q');
	ASSERT_EQ(ibv_dereg_mr(mr), 0);
	free(raw);
	ep_destroy(&b);
}

/* n WRITEs and n READs (SHCA_TEST_LOOP, default 50) over the whole
 * unaligned MR: partial page, whole pages, partial page */
TEST(span_loop)
{
	const char *env = getenv("SHCA_TEST_LOOP");
	long n = env ? atol(env) : 50, i;
	struct mr_info mi;
	struct ep_opts o;
	struct duo d;
	struct ep a;

	setenv("SOFTHCA_MAP", "1", 1);
	duo_fork(&d, span_responder, NULL);
	ep_default_opts(&o, IBV_QPT_RC);
	ep_open_remote(&a, &o, d.fd);
	xread(d.fd, &mi, sizeof(mi));
	for (i = 0; i < n; i++) {
		ep_fill_pattern(a.buf, mi.len, (uint32_t)i + 1, 0);
		write_to(&a, 0, mi.len, mi.addr, mi.rkey);
		memset(a.buf + mi.len, 0, mi.len);
		rdma_op(&a, IBV_WR_RDMA_READ, mi.len, mi.len, mi.addr,
			mi.rkey);
		ASSERT_EQ(ep_find_pattern_diff(a.buf + mi.len, mi.len,
					       (uint32_t)i + 1, 0), -1);
	}
	duo_signal(d.fd, 'q');
	duo_wait(&d);
	ep_destroy(&a);
}

/* The process_vm_writev and _readv calls `strace -f -c` counts in a run
 * of span_loop with SHCA_TEST_LOOP=n, or -1. */
static long cma_calls(long n)
{
	char cmd[1024], exe[512], path[64], buf[256], *out = NULL;
	long calls = -1;
	ssize_t len;
	FILE *f;

	len = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	ASSERT(len > 0);
	exe[len] = '\0';
	snprintf(path, sizeof(path), "/tmp/shca-strace-edges-%d",
		 (int)getpid());
	snprintf(cmd, sizeof(cmd),
		 "ASAN_OPTIONS=detect_leaks=0 SHCA_TEST_LOOP=%ld "
		 "strace -f -c -e trace=process_vm_writev,process_vm_readv "
		 "-o %s %s span_loop >/dev/null 2>&1; echo $?", n, path, exe);
	ASSERT_EQ(harness_run(cmd, &out), 0);
	ASSERT_EQ(atoi(out), 0);
	free(out);
	f = fopen(path, "r");
	ASSERT(f != NULL);
	calls = 0;
	while (fgets(buf, sizeof(buf), f)) {
		double pct, secs;
		long usecs, c;
		char name[64];

		/* "50.00 0.000154 1 100 process_vm_readv" (errors column
		 * absent when none) */
		if (strstr(buf, "process_vm_") && !strstr(buf, " total") &&
		    (sscanf(buf, "%lf %lf %ld %ld %*d %63s", &pct, &secs,
			    &usecs, &c, name) == 5 ||
		     sscanf(buf, "%lf %lf %ld %ld %63s", &pct, &secs, &usecs,
			    &c, name) == 5))
			calls += c;
	}
	fclose(f);
	unlink(path);
	return calls;
}

/*
 * An access over an unaligned MR's whole pages and both its partial edge
 * pages copies the edges' bytes in one CMA call, not one per edge: 200
 * WRITEs and 200 READs cost 400 calls more than none (800 with a call per
 * edge).
 */
TEST(edges_in_one_cma_call)
{
	long base, loop;

	if (system("strace -V >/dev/null 2>&1"))
		SKIP_ENV("no strace");
	base = cma_calls(0);
	loop = cma_calls(200);
	if (base < 0 || loop < 0)
		SKIP_ENV("strace -f -c gave no count (ptrace refused?)");
	ASSERT_GE(loop - base, 400);
	ASSERT_LT(loop - base, 600);
}
