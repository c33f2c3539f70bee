// SPDX-License-Identifier: MIT
/*
 * Keys no one can guess in practice (issue 11, docs/security.md "Keys").
 *
 * Key quality, through the verbs API: lkey == rkey, never 0 or
 * 0xffffffff, all distinct over thousands of live MRs and over a churn of
 * registrations and deregistrations shorter than the quarantine, with no
 * index in them (high bits that vary, no constant step).  The quarantine
 * itself is checked from inside with a small random pool
 * (keys_whitebox.c).
 *
 * Brute force by a hostile peer (a forked process that owns a QP
 * connected to the victim's, and posts WRITEs or UD SENDs with guessed
 * R_Keys / Q_Keys): the victim's memory stays untouched, its counters
 * (read with `softhca stat`) show the attempts; on the net path
 * (SOFTHCA_NET=1, both ends on this host) the key limit stops the guesses
 * after SHCA_KEY_LIMIT_BURST (the connection closed, logged; datagrams
 * dropped), and a legitimate peer of the victim goes on working.  On the
 * same-host path every guess (R_Key or Q_Key) is counted on the victim's
 * QP, and nothing is limited: the requester there is a process of the
 * victim's user, which could use CMA on it anyway.  RC: each
 * guess costs the attacker a QP (and the victim's QP goes to error, as
 * before): the RC case uses hundreds of QP pairs to reach the limit.
 */
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/random.h>

#include "harness.h"
#include "common.h"
#include "../traffic/ep.h"

#define GUESSES		4096
#define BURST		256		/* SHCA_KEY_LIMIT_BURST */
#define BUF_SIZE	65536
#define PATTERN		0x5a
#define QKEY		0x11111111u
#define RC_PAIRS	320
#define WAIT_STEPS	300		/* x 100 ms: bounded waits */

/* ------------------------------------------------------------------ */
/* A node: a context, PD, CQ and one registered buffer                 */

struct node {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_mr *mr;
	uint8_t *buf;
	union ibv_gid gid;
};

struct info {
	uint32_t qpn;
	uint32_t rkey;
	uint64_t addr;
	union ibv_gid gid;
};

static void node_open(struct node *n, int cqe)
{
	n->ctx = open_lo();
	n->pd = ibv_alloc_pd(n->ctx);
	ASSERT_NOT_NULL(n->pd);
	n->cq = ibv_create_cq(n->ctx, cqe, NULL, NULL, 0);
	ASSERT_NOT_NULL(n->cq);
	ASSERT_EQ(posix_memalign((void **)&n->buf, 4096, BUF_SIZE), 0);
	memset(n->buf, PATTERN, BUF_SIZE);
	n->mr = ibv_reg_mr(n->pd, n->buf, BUF_SIZE,
			   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
				   IBV_ACCESS_REMOTE_READ |
				   IBV_ACCESS_REMOTE_ATOMIC);
	ASSERT_NOT_NULL(n->mr);
	ASSERT_EQ(ibv_query_gid(n->ctx, 1, 0, &n->gid), 0);
}

static struct ibv_qp *qp_new(struct node *n, enum ibv_qp_type t, int sq,
			     int rq)
{
	struct ibv_qp_init_attr ia;
	struct ibv_qp_attr a;
	struct ibv_qp *qp;
	int mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT;

	memset(&ia, 0, sizeof(ia));
	ia.send_cq = n->cq;
	ia.recv_cq = n->cq;
	ia.qp_type = t;
	ia.cap.max_send_wr = (uint32_t)sq;
	ia.cap.max_recv_wr = (uint32_t)rq;
	ia.cap.max_send_sge = 1;
	ia.cap.max_recv_sge = 1;
	ia.sq_sig_all = 1;
	qp = ibv_create_qp(n->pd, &ia);
	ASSERT_NOT_NULL(qp);
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	if (t == IBV_QPT_UD) {
		a.qkey = QKEY;
		mask |= IBV_QP_QKEY;
	} else {
		a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
		if (t == IBV_QPT_RC)
			a.qp_access_flags |= IBV_ACCESS_REMOTE_READ |
					     IBV_ACCESS_REMOTE_ATOMIC;
		mask |= IBV_QP_ACCESS_FLAGS;
	}
	ASSERT_EQ(ibv_modify_qp(qp, &a, mask), 0);
	return qp;
}

/* RTR and RTS towards dqpn at dgid (UD: dqpn unused). */
static void qp_up(struct ibv_qp *qp, uint32_t dqpn, const union ibv_gid *dgid)
{
	struct ibv_qp_attr a;
	int mask = IBV_QP_STATE;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	if (qp->qp_type != IBV_QPT_UD) {
		a.path_mtu = IBV_MTU_1024;
		a.dest_qp_num = dqpn;
		a.ah_attr.is_global = 1;
		a.ah_attr.grh.dgid = *dgid;
		a.ah_attr.grh.hop_limit = 1;
		a.ah_attr.port_num = 1;
		mask |= IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
			IBV_QP_RQ_PSN;
		if (qp->qp_type == IBV_QPT_RC) {
			a.max_dest_rd_atomic = 1;
			a.min_rnr_timer = 1;
			mask |= IBV_QP_MAX_DEST_RD_ATOMIC |
				IBV_QP_MIN_RNR_TIMER;
		}
	}
	ASSERT_EQ(ibv_modify_qp(qp, &a, mask), 0);
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
	if (qp->qp_type == IBV_QPT_RC) {
		/* short: the guesses the key limit refuses are never
		 * answered, and end with RETRY_EXC_ERR */
		a.timeout = 10;
		a.retry_cnt = 1;
		a.rnr_retry = 0;
		a.max_rd_atomic = 1;
		mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
			IBV_QP_MAX_QP_RD_ATOMIC;
	}
	ASSERT_EQ(ibv_modify_qp(qp, &a, mask), 0);
}

static struct ibv_ah *ah_to(struct node *n, const union ibv_gid *dgid)
{
	struct ibv_ah_attr ah;
	struct ibv_ah *r;

	memset(&ah, 0, sizeof(ah));
	ah.is_global = 1;
	ah.grh.dgid = *dgid;
	ah.grh.hop_limit = 1;
	ah.port_num = 1;
	r = ibv_create_ah(n->pd, &ah);
	ASSERT_NOT_NULL(r);
	return r;
}

/* A guess: any 32-bit value but the real one (high bit aside). */
static uint32_t guess(uint32_t real)
{
	uint32_t g;

	do {
		ASSERT_EQ(getrandom(&g, sizeof(g), 0), (ssize_t)sizeof(g));
	} while ((g & 0x7fffffffu) == (real & 0x7fffffffu));
	return g;
}

static int post_write(struct node *n, struct ibv_qp *qp, uint32_t rkey,
		      uint64_t raddr, uint32_t len, uint64_t wr_id)
{
	struct ibv_sge sge = { (uintptr_t)n->buf, len, n->mr->lkey };
	struct ibv_send_wr wr, *bad;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = wr_id;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_RDMA_WRITE;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.wr.rdma.rkey = rkey;
	wr.wr.rdma.remote_addr = raddr;
	return ibv_post_send(qp, &wr, &bad);
}

static int post_ud(struct node *n, struct ibv_qp *qp, struct ibv_ah *ah,
		   uint32_t dqpn, uint32_t qkey, uint32_t len)
{
	struct ibv_sge sge = { (uintptr_t)n->buf, len, n->mr->lkey };
	struct ibv_send_wr wr, *bad;

	memset(&wr, 0, sizeof(wr));
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_SEND;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.wr.ud.ah = ah;
	wr.wr.ud.remote_qpn = dqpn;
	wr.wr.ud.remote_qkey = qkey;
	return ibv_post_send(qp, &wr, &bad);
}

static void post_recv(struct node *n, struct ibv_qp *qp, uint64_t off,
		      uint32_t len)
{
	struct ibv_sge sge = { (uintptr_t)n->buf + off, len, n->mr->lkey };
	struct ibv_recv_wr wr, *bad;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = off;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	ASSERT_EQ(ibv_post_recv(qp, &wr, &bad), 0);
}

/* Poll n completions (bounded); counts by status in st[]. */
static void reap(struct ibv_cq *cq, int n, int st[32])
{
	struct ibv_wc wc[64];
	int got = 0, k, i, idle = 0;

	while (got < n) {
		k = ibv_poll_cq(cq, n - got < 64 ? n - got : 64, wc);
		ASSERT_GE(k, 0);
		for (i = 0; i < k; i++)
			if (wc[i].status < 32)
				st[wc[i].status]++;
		got += k;
		if (k) {
			idle = 0;
			continue;
		}
		if (++idle > 600000)	/* ~60 s of 100 us naps */
			harness_fail(__FILE__, __LINE__,
				     "%d of %d completions", got, n);
		usleep(100);
	}
}

/* Post count guessed WRITEs on qp, at most 64 outstanding. */
static void write_guesses(struct node *n, struct ibv_qp *qp,
			  const struct info *v, int count, int st[32])
{
	int posted = 0, done = 0;

	while (done < count) {
		while (posted < count && posted - done < 64) {
			ASSERT_EQ(post_write(n, qp, guess(v->rkey), v->addr,
					     64, (uint64_t)posted), 0);
			posted++;
		}
		reap(n->cq, 1, st);
		done++;
	}
}

/* ------------------------------------------------------------------ */
/* The victim's counters, from `softhca stat`                          */

/* The value of counter name on the line that starts with prefix. */
static bool stat_find(const char *out, const char *prefix, const char *name,
		      uint64_t *v)
{
	const char *p = out, *eol, *q;
	char key[96];
	size_t n = strlen(prefix);

	snprintf(key, sizeof(key), " %s ", name);
	while (*p) {
		eol = strchr(p, '\n');
		if (!eol)
			eol = p + strlen(p);
		if (!strncmp(p, prefix, n) && p[n] == ' ') {
			q = strstr(p, key);
			if (q && q < eol) {
				*v = strtoull(q + strlen(key), NULL, 10);
				return true;
			}
		}
		p = *eol ? eol + 1 : eol;
	}
	return false;
}

static uint64_t stat_get(const char *scope, uint32_t qpn, const char *name)
{
	char cmd[512], prefix[128];
	char *out = NULL;
	uint64_t v = 0;
	int pid = (int)getpid();

	snprintf(cmd, sizeof(cmd), "%s stat --pid %d --all 2>/dev/null",
		 SOFTHCA_TOOL, pid);
	ASSERT_EQ(harness_run(cmd, &out), 0);
	if (!strcmp(scope, "qp"))
		snprintf(prefix, sizeof(prefix),
			 "pid %d device softhca_lo qp 0x%06x", pid, qpn);
	else
		snprintf(prefix, sizeof(prefix), "pid %d slot", pid);
	if (!stat_find(out, prefix, name, &v))
		harness_fail(__FILE__, __LINE__, "no %s on the line %s in:\n%s",
			     name, prefix, out);
	free(out);
	return v;
}

static uint64_t qp_stat(struct ibv_qp *qp, const char *name)
{
	return stat_get("qp", qp->qp_num, name);
}

static uint64_t proc_stat(const char *name)
{
	return stat_get("proc", 0, name);
}

/* Wait (bounded) until the counter reaches at least want. */
static uint64_t wait_stat(struct ibv_qp *qp, const char *name, uint64_t want)
{
	uint64_t v = 0;
	int i;

	for (i = 0; i < WAIT_STEPS; i++) {
		v = qp ? qp_stat(qp, name) : proc_stat(name);
		if (v >= want)
			return v;
		usleep(100000);
	}
	harness_fail(__FILE__, __LINE__, "%s stayed at %llu (want %llu)",
		     name, (unsigned long long)v, (unsigned long long)want);
}

static void assert_untouched(const struct node *n, size_t from)
{
	size_t i;

	for (i = from; i < BUF_SIZE; i++)
		if (n->buf[i] != PATTERN)
			harness_fail(__FILE__, __LINE__,
				     "victim byte %zu is 0x%02x", i,
				     n->buf[i]);
}

/*
 * The victim's stderr (the library's warnings, and the harness's FAIL
 * lines) goes through a pipe to a small process that copies it to the
 * real stderr and to a file the test reads: it outlives the victim, so
 * nothing is lost when an assertion ends the test.
 */
static char log_path[64];

static void log_to_file(void)
{
	int p[2], fd, orig;
	pid_t pid;

	snprintf(log_path, sizeof(log_path), "/tmp/shca-keys-log.XXXXXX");
	fd = mkstemp(log_path);
	ASSERT_GE(fd, 0);
	ASSERT_EQ(pipe(p), 0);
	orig = dup(2);
	ASSERT_GE(orig, 0);
	fflush(stderr);
	pid = fork();
	ASSERT_GE(pid, 0);
	if (pid == 0) {
		char b[4096];
		ssize_t n;

		close(p[1]);
		while ((n = read(p[0], b, sizeof(b))) > 0) {
			if (write(orig, b, (size_t)n) < 0 ||
			    write(fd, b, (size_t)n) < 0)
				break;
		}
		_exit(0);
	}
	close(p[0]);
	close(orig);
	close(fd);
	ASSERT_EQ(dup2(p[1], 2), 2);
	close(p[1]);
}

/* Has text been logged?  The copy may lag a little: bounded wait. */
static bool log_has(const char *text)
{
	static char buf[65536];
	ssize_t n;
	int fd, i;

	for (i = 0; i < WAIT_STEPS; i++) {
		fd = open(log_path, O_RDONLY);
		ASSERT_GE(fd, 0);
		n = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		buf[n > 0 ? n : 0] = 0;
		if (strstr(buf, text))
			return true;
		usleep(100000);
	}
	return false;
}

static void log_done(void)
{
	unlink(log_path);
}

static void net_path(void)
{
	/* before the library reads it (once, at the first QP's RTR) */
	setenv("SOFTHCA_NET", "1", 1);
}

/* ------------------------------------------------------------------ */
/* Key quality                                                         */

#define LIVE	4096
#define CHURN	20000

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

TEST(keys_random_distinct_no_index)
{
	static struct ibv_mr *mr[LIVE];
	static uint32_t keys[LIVE + CHURN];
	struct ibv_context *ctx = open_lo();
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	uint32_t low_index = 0, diffs_same = 0, hb[256] = { 0 }, nhb = 0;
	char *buf = aligned_alloc(4096, 4096);
	int i, n = 0;

	ASSERT_NOT_NULL(pd);
	ASSERT_NOT_NULL(buf);
	for (i = 0; i < LIVE; i++) {
		mr[i] = ibv_reg_mr(pd, buf, 4096, IBV_ACCESS_LOCAL_WRITE |
					  IBV_ACCESS_REMOTE_WRITE);
		ASSERT_NOT_NULL(mr[i]);
		ASSERT_EQ(mr[i]->lkey, mr[i]->rkey);
		keys[n++] = mr[i]->lkey;
		/* the old format: index << 12 | 12 bits, indexes from 1 */
		if (mr[i]->lkey >> 12 <= (uint32_t)LIVE + 1)
			low_index++;
		if (!hb[mr[i]->lkey >> 24]++)
			nhb++;
		if (i >= 2 && mr[i]->lkey - mr[i - 1]->lkey ==
				      mr[i - 1]->lkey - mr[i - 2]->lkey)
			diffs_same++;
	}
	/* random keys: 4096 of them have about 4 with the top 20 bits
	 * below 4098, cover nearly all 256 top bytes, and repeat a step
	 * by chance about once in 2^32 */
	ASSERT_LT(low_index, 64u);
	ASSERT_GT(nhb, 200u);
	ASSERT_EQ(diffs_same, 0u);
	/* churn: each key registered, deregistered, and the next drawn; all
	 * shorter than the quarantine (65536), so none may come back */
	for (i = 0; i < CHURN; i++) {
		int k = i % LIVE;

		ASSERT_EQ(ibv_dereg_mr(mr[k]), 0);
		mr[k] = ibv_reg_mr(pd, buf, 4096, IBV_ACCESS_LOCAL_WRITE);
		ASSERT_NOT_NULL(mr[k]);
		keys[n++] = mr[k]->lkey;
	}
	qsort(keys, (size_t)n, sizeof(keys[0]), cmp_u32);
	for (i = 0; i < n; i++) {
		ASSERT_NE(keys[i], 0u);
		ASSERT_NE(keys[i], UINT32_MAX);
		if (i)
			ASSERT_NE(keys[i], keys[i - 1]);
	}
	for (i = 0; i < LIVE; i++)
		ASSERT_EQ(ibv_dereg_mr(mr[i]), 0);
	ASSERT_EQ(ibv_dealloc_pd(pd), 0);
	ASSERT_EQ(ibv_close_device(ctx), 0);
	free(buf);
}

/* A deregistered key is refused at once, locally and by a peer. */
TEST(deregistered_key_refused)
{
	struct node n;
	struct ibv_qp *a, *b;
	struct ibv_mr *mr2;
	int st[32] = { 0 };
	uint32_t old;

	node_open(&n, 64);
	a = qp_new(&n, IBV_QPT_RC, 4, 4);
	b = qp_new(&n, IBV_QPT_RC, 4, 4);
	qp_up(a, b->qp_num, &n.gid);
	qp_up(b, a->qp_num, &n.gid);
	mr2 = ibv_reg_mr(n.pd, n.buf + 4096, 4096,
			 IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	ASSERT_NOT_NULL(mr2);
	old = mr2->rkey;
	ASSERT_EQ(ibv_dereg_mr(mr2), 0);
	/* a new MR over the same range gets another key */
	mr2 = ibv_reg_mr(n.pd, n.buf + 4096, 4096,
			 IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	ASSERT_NOT_NULL(mr2);
	ASSERT_NE(mr2->rkey, old);
	ASSERT_EQ(post_write(&n, a, old, (uintptr_t)n.buf + 4096, 64, 1), 0);
	reap(n.cq, 1, st);
	ASSERT_EQ(st[IBV_WC_REM_ACCESS_ERR], 1);
	assert_untouched(&n, 64);
	ASSERT_EQ(qp_stat(b, "invalid_rkey"), 1u);
}

/*
 * A deregistered MR's struct is reused for a new MR once it has left
 * the quarantine of destroyed objects (verbs/mr.c keeps it for that,
 * issue 12): the new MR answers to its own key only, the old key stays
 * refused.
 */
TEST(deregistered_key_refused_after_struct_reuse)
{
	struct ibv_mr *mr2, *r = NULL;
	struct ibv_qp *a, *b;
	int st[32] = { 0 }, i;
	struct node n;
	uint32_t old;
	void *old_mr;

	node_open(&n, 64);
	a = qp_new(&n, IBV_QPT_RC, 4, 4);
	b = qp_new(&n, IBV_QPT_RC, 4, 4);
	qp_up(a, b->qp_num, &n.gid);
	qp_up(b, a->qp_num, &n.gid);
	mr2 = ibv_reg_mr(n.pd, n.buf + 4096, 4096,
			 IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	ASSERT_NOT_NULL(mr2);
	old = mr2->rkey;
	old_mr = mr2;
	ASSERT_EQ(ibv_dereg_mr(mr2), 0);
	/* past the quarantine's 4096 objects, the struct comes back */
	for (i = 0; i < 20000; i++) {
		r = ibv_reg_mr(n.pd, n.buf + 4096, 4096,
			       IBV_ACCESS_LOCAL_WRITE |
				       IBV_ACCESS_REMOTE_WRITE);
		ASSERT_NOT_NULL(r);
		if ((void *)r == old_mr)
			break;
		ASSERT_EQ(ibv_dereg_mr(r), 0);
	}
	ASSERT((void *)r == old_mr);
	ASSERT_NE(r->rkey, old);
	ASSERT_NE(r->lkey, old);
	/* the new key reaches the page, the old one does not */
	ASSERT_EQ(post_write(&n, a, r->rkey, (uintptr_t)n.buf + 4096, 64, 1),
		  0);
	reap(n.cq, 1, st);
	ASSERT_EQ(st[IBV_WC_SUCCESS], 1);
	ASSERT_EQ(post_write(&n, a, old, (uintptr_t)n.buf + 4096, 64, 2), 0);
	reap(n.cq, 1, st);
	ASSERT_EQ(st[IBV_WC_REM_ACCESS_ERR], 1);
	ASSERT_EQ(qp_stat(b, "invalid_rkey"), 1u);
	ASSERT_EQ(ibv_dereg_mr(r), 0);
}

/*
 * The arena's key index doubles as MRs are registered (shm/mrkey.c,
 * issue 12): a key that lives through every doubling is found on every
 * access made meanwhile.  Another process WRITEs through one MR's R_Key
 * without pause (its look-ups in this arena take none of this process's
 * locks) while this one registers 20,000 more MRs (the index doubles
 * seven times) and deregisters them; every WRITE succeeds.  An index that
 * sent readers to a region before it held the words refused some (seen
 * with the publication moved before the copy and the copy slowed).
 */
struct growth_target {
	uint64_t addr;
	uint32_t rkey;
};

static void growth_writer(int fd, void *arg)
{
	struct growth_target t;
	uint64_t n = 0, bad = 0;
	struct ep_opts o;
	struct ibv_wc wc;
	struct ep b;

	(void)arg;
	ep_default_opts(&o, IBV_QPT_RC);
	ep_open_remote(&b, &o, fd);
	xread(fd, &t, sizeof(t));
	b.peer.addr = t.addr;
	b.peer.rkey = t.rkey;
	for (;;) {
		ASSERT_EQ(ep_post(&b, n, IBV_WR_RDMA_WRITE, 0, 64, 0, 0), 0);
		ep_poll(b.scq, &wc, 1);
		if (wc.status != IBV_WC_SUCCESS) {
			bad++;
			break;
		}
		if (!n++)
			duo_signal(fd, 'u');
		if (ep_readable(fd, 0))
			break;
	}
	if (!n)
		duo_signal(fd, 'u');
	duo_expect(fd, 's');
	xwrite(fd, &n, sizeof(n));
	xwrite(fd, &bad, sizeof(bad));
	duo_expect(fd, 'q');
	ep_destroy(&b);
}

TEST(index_growth_never_misses_a_live_key)
{
	enum { MRS = 20000 };
	struct growth_target t;
	struct ibv_mr **mrs;
	struct ep_opts o;
	uint64_t n, bad;
	struct duo d;
	struct ep a;
	char *pages;
	int i;

	ep_skip_if_netns();
	duo_fork(&d, growth_writer, NULL);
	ep_default_opts(&o, IBV_QPT_RC);
	ep_open_remote(&a, &o, d.fd);
	t.addr = (uintptr_t)a.buf;
	t.rkey = a.mr->rkey;
	xwrite(d.fd, &t, sizeof(t));
	duo_expect(d.fd, 'u');
	mrs = calloc(MRS, sizeof(*mrs));
	ASSERT_NOT_NULL(mrs);
	pages = mmap(NULL, (size_t)MRS * 4096, PROT_READ | PROT_WRITE,
		     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	ASSERT(pages != MAP_FAILED);
	for (i = 0; i < MRS; i++) {
		mrs[i] = ibv_reg_mr(a.pd, pages + (size_t)i * 4096, 4096,
				    IBV_ACCESS_LOCAL_WRITE |
					    IBV_ACCESS_REMOTE_WRITE);
		ASSERT_NOT_NULL(mrs[i]);
	}
	for (i = 0; i < MRS; i++)
		ASSERT_EQ(ibv_dereg_mr(mrs[i]), 0);
	duo_signal(d.fd, 's');
	xread(d.fd, &n, sizeof(n));
	xread(d.fd, &bad, sizeof(bad));
	duo_signal(d.fd, 'q');
	duo_wait(&d);
	printf("# %llu WRITEs, %llu refused\n", (unsigned long long)n,
	       (unsigned long long)bad);
	ASSERT_EQ(bad, 0u);
	ASSERT_GT(n, 1u);
	munmap(pages, (size_t)MRS * 4096);
	free(mrs);
	ep_destroy(&a);
}

/* ------------------------------------------------------------------ */
/* Brute force: UC                                                     */

struct attack {
	enum ibv_qp_type type;
	int guesses;
	bool second_round;	/* net: guesses again after the close */
};

/* The attacker: one QP towards the victim's, GUESSES guessed writes. */
static void uc_attacker(int fd, void *arg)
{
	const struct attack *at = arg;
	struct node n;
	struct ibv_qp *qp;
	struct info me, v;
	int st[32] = { 0 }, i;

	node_open(&n, 256);
	qp = qp_new(&n, IBV_QPT_UC, 64, 1);
	me.qpn = qp->qp_num;
	me.gid = n.gid;
	xwrite(fd, &me, sizeof(me));
	xread(fd, &v, sizeof(v));
	qp_up(qp, v.qpn, &v.gid);
	duo_expect(fd, 'g');
	write_guesses(&n, qp, &v, at->guesses, st);
	/* UC: a WRITE completes as sent, whatever the responder did */
	ASSERT_EQ(st[IBV_WC_SUCCESS], at->guesses);
	duo_signal(fd, 'd');
	if (!at->second_round)
		return;
	duo_expect(fd, 'g');
	for (i = 0; i < 8; i++) {
		write_guesses(&n, qp, &v, 64, st);
		usleep(20000);
	}
	duo_signal(fd, 'd');
}

/* The legitimate peer: an RC QP that writes 16 bytes with the real key. */
static void legit_peer(int fd, void *arg)
{
	struct node n;
	struct ibv_qp *qp;
	struct info me, v;
	int st[32] = { 0 };

	(void)arg;
	node_open(&n, 16);
	memset(n.buf, 0x77, 16);
	qp = qp_new(&n, IBV_QPT_RC, 4, 1);
	me.qpn = qp->qp_num;
	me.gid = n.gid;
	xwrite(fd, &me, sizeof(me));
	xread(fd, &v, sizeof(v));
	qp_up(qp, v.qpn, &v.gid);
	duo_expect(fd, 'g');
	ASSERT_EQ(post_write(&n, qp, v.rkey, v.addr, 16, 7), 0);
	reap(n.cq, 1, st);
	ASSERT_EQ(st[IBV_WC_SUCCESS], 1);
	duo_signal(fd, 'd');
}

/* Connect the victim's qp with a child's over d->fd. */
static void victim_connect(struct node *n, struct ibv_qp *qp, struct duo *d,
			   uint64_t off)
{
	struct info me, them;

	me.qpn = qp->qp_num;
	me.rkey = n->mr->rkey;
	me.addr = (uintptr_t)n->buf + off;
	me.gid = n->gid;
	xread(d->fd, &them, sizeof(them));
	xwrite(d->fd, &me, sizeof(me));
	if (qp->qp_type != IBV_QPT_UD)
		qp_up(qp, them.qpn, &them.gid);
}

/* The legitimate peer writes 0x77 at the start of the buffer. */
static void legit_writes(struct node *n, struct duo *legit)
{
	duo_signal(legit->fd, 'g');
	duo_expect(legit->fd, 'd');
	duo_wait(legit);
	ASSERT_EQ(n->buf[0], 0x77);
	ASSERT_EQ(n->buf[15], 0x77);
	ASSERT_EQ(n->buf[16], PATTERN);
}

TEST(uc_brute_force_net)
{
	struct attack at = { IBV_QPT_UC, GUESSES, true };
	struct duo att, legit;
	struct node n;
	struct ibv_qp *qa, *ql;
	uint64_t bad, bad2, closes;

	net_path();
	log_to_file();
	/* the children first: a process forked after it used verbs may
	 * not use them (as with rdma-core) */
	duo_fork(&att, uc_attacker, &at);
	duo_fork(&legit, legit_peer, NULL);
	node_open(&n, 64);
	qa = qp_new(&n, IBV_QPT_UC, 1, 1);
	ql = qp_new(&n, IBV_QPT_RC, 1, 1);
	victim_connect(&n, qa, &att, 0);
	victim_connect(&n, ql, &legit, 0);

	duo_signal(att.fd, 'g');
	duo_expect(att.fd, 'd');
	closes = wait_stat(NULL, "key_limit_closes", 1);
	bad = wait_stat(qa, "invalid_rkey", BURST);
	/* the limit stopped the guesses: the burst, and one a second */
	ASSERT_LT(bad, (uint64_t)GUESSES / 2);
	ASSERT_GE(closes, 1u);
	ASSERT(log_has("closing the connection from 127.0.0.1"));
	ASSERT(log_has("invalid keys"));
	/* guessing again after the close: refused, not carried out */
	duo_signal(att.fd, 'g');
	duo_expect(att.fd, 'd');
	duo_wait(&att);
	bad2 = qp_stat(qa, "invalid_rkey");
	ASSERT_LT(bad2 - bad, 512u);
	ASSERT_GE(proc_stat("key_limit_drops"), 1u);
	printf("# UC net: %llu invalid R_Keys carried out of %d + 512, "
	       "%llu closes, %llu refused\n", (unsigned long long)bad2,
	       GUESSES, (unsigned long long)proc_stat("key_limit_closes"),
	       (unsigned long long)proc_stat("key_limit_drops"));
	assert_untouched(&n, 0);
	/* UC drops a wrong key: the QP is up, and so is its legit peer */
	ASSERT_EQ(ep_qp_state(qa), IBV_QPS_RTS);
	legit_writes(&n, &legit);
	assert_untouched(&n, 16);
	log_done();
}

TEST(uc_brute_force_same_host)
{
	struct attack at = { IBV_QPT_UC, GUESSES, false };
	struct duo att;
	struct node n;
	struct ibv_qp *qa;

	duo_fork(&att, uc_attacker, &at);
	node_open(&n, 64);
	qa = qp_new(&n, IBV_QPT_UC, 1, 1);
	victim_connect(&n, qa, &att, 0);
	duo_signal(att.fd, 'g');
	duo_expect(att.fd, 'd');
	duo_wait(&att);
	/* the requester checks the keys itself, in the victim's arena, and
	 * counts every invalid one on the victim's QP; no limit here: a
	 * same-host peer of the same user could use CMA anyway */
	ASSERT_EQ(qp_stat(qa, "invalid_rkey"), (uint64_t)GUESSES);
	ASSERT_EQ(proc_stat("key_limit_closes"), 0u);
	assert_untouched(&n, 0);
	ASSERT_EQ(ep_qp_state(qa), IBV_QPS_RTS);
}

/* ------------------------------------------------------------------ */
/* Brute force: RC                                                     */

/* RC_PAIRS QPs, one guessed WRITE each. */
static void rc_attacker(int fd, void *arg)
{
	struct node n;
	static struct ibv_qp *qp[RC_PAIRS];
	static struct info me[RC_PAIRS], v[RC_PAIRS];
	int st[32] = { 0 }, i, other;

	(void)arg;
	node_open(&n, 2 * RC_PAIRS);
	for (i = 0; i < RC_PAIRS; i++) {
		qp[i] = qp_new(&n, IBV_QPT_RC, 1, 1);
		me[i].qpn = qp[i]->qp_num;
		me[i].gid = n.gid;
	}
	xwrite(fd, me, sizeof(me));
	xread(fd, v, sizeof(v));
	for (i = 0; i < RC_PAIRS; i++)
		qp_up(qp[i], v[i].qpn, &v[i].gid);
	duo_expect(fd, 'g');
	for (i = 0; i < RC_PAIRS; i++)
		ASSERT_EQ(post_write(&n, qp[i], guess(v[i].rkey), v[i].addr,
				     64, (uint64_t)i), 0);
	reap(n.cq, RC_PAIRS, st);
	/* as before: a wrong key is REM_ACCESS_ERR and the QP goes to
	 * error; what the limit refused is never answered */
	other = RC_PAIRS - st[IBV_WC_REM_ACCESS_ERR] -
		st[IBV_WC_RETRY_EXC_ERR];
	ASSERT_EQ(other, 0);
	/* the NAKs made before the close go out as far as the socket took
	 * them before it was shut: how many arrive is not certain */
	ASSERT_GE(st[IBV_WC_RETRY_EXC_ERR], 1);
	printf("# RC attacker: %d REM_ACCESS_ERR, %d RETRY_EXC_ERR\n",
	       st[IBV_WC_REM_ACCESS_ERR], st[IBV_WC_RETRY_EXC_ERR]);
	for (i = 0; i < RC_PAIRS; i++)
		ep_wait_qp_state(qp[i], IBV_QPS_ERR);
	duo_signal(fd, 'd');
}

TEST(rc_brute_force_net)
{
	static struct ibv_qp *qp[RC_PAIRS];
	static struct info me[RC_PAIRS], them[RC_PAIRS];
	struct duo att, legit;
	struct node n;
	struct ibv_qp *ql;
	uint64_t bad = 0, v;
	int i, in_err = 0;

	net_path();
	log_to_file();
	duo_fork(&att, rc_attacker, NULL);
	duo_fork(&legit, legit_peer, NULL);
	node_open(&n, 2 * RC_PAIRS);
	for (i = 0; i < RC_PAIRS; i++) {
		qp[i] = qp_new(&n, IBV_QPT_RC, 1, 1);
		me[i].qpn = qp[i]->qp_num;
		me[i].rkey = n.mr->rkey;
		me[i].addr = (uintptr_t)n.buf;
		me[i].gid = n.gid;
	}
	ql = qp_new(&n, IBV_QPT_RC, 1, 1);
	xread(att.fd, them, sizeof(them));
	xwrite(att.fd, me, sizeof(me));
	for (i = 0; i < RC_PAIRS; i++)
		qp_up(qp[i], them[i].qpn, &them[i].gid);
	victim_connect(&n, ql, &legit, 0);

	duo_signal(att.fd, 'g');
	duo_expect(att.fd, 'd');
	duo_wait(&att);
	ASSERT_GE(proc_stat("key_limit_closes"), 1u);
	for (i = 0; i < RC_PAIRS; i++) {
		v = qp_stat(qp[i], "invalid_rkey");
		ASSERT_LE(v, 1u);
		bad += v;
		/* the QPs that met a wrong key went to error, as before */
		if (v) {
			ep_wait_qp_state(qp[i], IBV_QPS_ERR);
			in_err++;
		}
	}
	ASSERT_GE(bad, (uint64_t)BURST);
	ASSERT_LT(bad, (uint64_t)RC_PAIRS);
	ASSERT_EQ((uint64_t)in_err, bad);
	printf("# RC net: %llu invalid R_Keys carried out of %d, %llu closes, "
	       "%llu refused\n", (unsigned long long)bad, RC_PAIRS,
	       (unsigned long long)proc_stat("key_limit_closes"),
	       (unsigned long long)proc_stat("key_limit_drops"));
	ASSERT(log_has("closing the connection from 127.0.0.1"));
	assert_untouched(&n, 0);
	legit_writes(&n, &legit);
	assert_untouched(&n, 16);
	log_done();
}

/* RC: one guess, REM_ACCESS_ERR and the victim's QP to error (as
 * before), counted on it; under the limit, nothing closed. */
static void rc_one_guess(void)
{
	struct node n;
	struct ibv_qp *a, *b;
	int st[32] = { 0 };

	node_open(&n, 64);
	a = qp_new(&n, IBV_QPT_RC, 4, 4);
	b = qp_new(&n, IBV_QPT_RC, 4, 4);
	qp_up(a, b->qp_num, &n.gid);
	qp_up(b, a->qp_num, &n.gid);
	ASSERT_EQ(post_write(&n, a, guess(n.mr->rkey), (uintptr_t)n.buf + 64,
			     64, 1), 0);
	reap(n.cq, 1, st);
	ASSERT_EQ(st[IBV_WC_REM_ACCESS_ERR], 1);
	ep_wait_qp_state(b, IBV_QPS_ERR);
	ASSERT_EQ(qp_stat(b, "invalid_rkey"), 1u);
	ASSERT_EQ(proc_stat("key_limit_closes"), 0u);
	assert_untouched(&n, 64);
}

TEST(rc_wrong_key_same_host_counted)
{
	rc_one_guess();
}

TEST(rc_wrong_key_net_counted)
{
	net_path();
	rc_one_guess();
}

/* ------------------------------------------------------------------ */
/* Brute force: UD (wrong Q_Keys)                                      */

/*
 * UD sender: at->guesses datagrams with wrong Q_Keys (or one with the
 * right one), paced so that the socket takes them (UD may lose what does
 * not fit), then, for the attacker, more until the victim says stop.
 */
static void ud_sender(int fd, void *arg)
{
	const struct attack *at = arg;
	struct node n;
	struct ibv_qp *qp;
	struct ibv_ah *ah;
	struct info me, v;
	int st[32] = { 0 }, sent = 0, i;
	char c;

	node_open(&n, 256);
	memset(n.buf, 0xee, 64);
	qp = qp_new(&n, IBV_QPT_UD, 16, 1);
	qp_up(qp, 0, NULL);
	me.qpn = qp->qp_num;
	me.gid = n.gid;
	xwrite(fd, &me, sizeof(me));
	xread(fd, &v, sizeof(v));
	ah = ah_to(&n, &v.gid);
	duo_expect(fd, 'g');
	for (;;) {
		for (i = 0; i < 16 && (sent < at->guesses || at->guesses > 1);
		     i++, sent++)
			/* a Q_Key with the high bit set would mean "the
			 * sender's own" (IBA C10-15): guesses go without */
			ASSERT_EQ(post_ud(&n, qp, ah, v.qpn,
					  at->guesses == 1 ?
						  QKEY :
						  guess(QKEY) & 0x7fffffffu,
					  32), 0);
		reap(n.cq, i, st);
		if (sent >= at->guesses && (at->guesses == 1 ||
					    ep_readable(fd, 0)))
			break;
		/* bounded: 16 times the guesses at most */
		ASSERT_LT(sent, 16 * GUESSES);
		usleep(1000);
	}
	ASSERT_EQ(st[IBV_WC_SUCCESS], sent);
	if (at->guesses > 1) {
		xread(fd, &c, 1);
		ASSERT_EQ(c, 's');
	}
	xwrite(fd, &sent, sizeof(sent));
}

TEST(ud_qkey_brute_force_net)
{
	struct attack at = { IBV_QPT_UD, GUESSES, false };
	struct attack ok = { IBV_QPT_UD, 1, false };
	struct duo att, legit;
	struct ibv_wc wc;
	struct node n;
	struct ibv_qp *qu;
	uint64_t bad;
	int i, k, sent;

	net_path();
	log_to_file();
	duo_fork(&att, ud_sender, &at);
	duo_fork(&legit, ud_sender, &ok);
	node_open(&n, 256);
	qu = qp_new(&n, IBV_QPT_UD, 1, 64);
	qp_up(qu, 0, NULL);
	for (i = 0; i < 32; i++)
		post_recv(&n, qu, 4096 + (uint64_t)i * 1024, 1024);
	victim_connect(&n, qu, &att, 0);
	duo_signal(att.fd, 'g');
	wait_stat(qu, "invalid_qkey", BURST);
	/* what the victim received after the limit was dropped unread */
	wait_stat(NULL, "key_limit_drops", 1);
	duo_signal(att.fd, 's');
	xread(att.fd, &sent, sizeof(sent));
	duo_wait(&att);
	ASSERT_GE(sent, GUESSES);
	bad = qp_stat(qu, "invalid_qkey");
	/* the burst, and one a second */
	ASSERT_LT(bad, (uint64_t)GUESSES / 8);
	ASSERT(log_has("dropping datagrams from 127.0.0.1"));
	printf("# UD net: %llu invalid Q_Keys of %d, %llu refused\n",
	       (unsigned long long)bad, sent,
	       (unsigned long long)proc_stat("key_limit_drops"));
	/* nothing delivered, nothing written */
	ASSERT_EQ(ibv_poll_cq(n.cq, 1, &wc), 0);
	assert_untouched(&n, 0);
	/* another sender with the right Q_Key is heard */
	victim_connect(&n, qu, &legit, 0);
	duo_signal(legit.fd, 'g');
	xread(legit.fd, &sent, sizeof(sent));
	duo_wait(&legit);
	for (i = 0; i < WAIT_STEPS * 1000; i++) {
		k = ibv_poll_cq(n.cq, 1, &wc);
		if (k)
			break;
		usleep(100);
	}
	ASSERT_EQ(k, 1);
	ASSERT_EQ(wc.status, IBV_WC_SUCCESS);
	ASSERT_EQ(wc.byte_len, 40u + 32u);
	ASSERT_EQ(n.buf[4096 + 40], 0xee);
	log_done();
}

/* UD on the same host: the sender delivers (or not) itself, in the
 * victim's arena; every wrong Q_Key is counted on the victim's QP. */
TEST(ud_qkey_same_host_counted)
{
	struct attack at = { IBV_QPT_UD, GUESSES, false };
	struct duo att;
	struct ibv_wc wc;
	struct node n;
	struct ibv_qp *qu;
	int i, sent;

	duo_fork(&att, ud_sender, &at);
	node_open(&n, 256);
	qu = qp_new(&n, IBV_QPT_UD, 1, 32);
	qp_up(qu, 0, NULL);
	for (i = 0; i < 32; i++)
		post_recv(&n, qu, 4096 + (uint64_t)i * 1024, 1024);
	victim_connect(&n, qu, &att, 0);
	duo_signal(att.fd, 'g');
	wait_stat(qu, "invalid_qkey", GUESSES);
	duo_signal(att.fd, 's');
	xread(att.fd, &sent, sizeof(sent));
	duo_wait(&att);
	ASSERT_EQ(qp_stat(qu, "invalid_qkey"), (uint64_t)sent);
	ASSERT_EQ(proc_stat("key_limit_drops"), 0u);
	ASSERT_EQ(ibv_poll_cq(n.cq, 1, &wc), 0);
	assert_untouched(&n, 0);
}
