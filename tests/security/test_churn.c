// SPDX-License-Identifier: MIT
/*
 * The arena after churn (issue 11): a process that created and destroyed
 * its largest objects can create exactly as many objects as a fresh one,
 * and running out of arena is ENOMEM from the verb, with a log line that
 * names the arena's size.
 *
 * Each count runs in a process of its own (a fresh arena), forked from the
 * test's process before it opens any device; the counts come back through
 * a pipe.  The probe: 15 maximum-size CQs created and destroyed
 * left room for 351 QPs with 1024-entry queues instead of 14,695, because
 * freed blocks were reused only for objects of their own size class.
 */
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/wait.h>

#include "harness.h"
#include "common.h"
#include "arena_peer.h"
#include "shm/arena.h"
#include "verbs/shca.h"

#define CHILD_TIMEOUT	50	/* seconds, each child (harness: 60) */
#define MAX_OBJS	100000

struct result {
	long count;
	int err;		/* errno of the create that failed */
	long max_qp;		/* as ibv_query_device says */
};

struct env {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;	/* small: the QPs' send and receive CQ */
	struct ibv_device_attr attr;
};

static void env_open(struct env *e)
{
	e->ctx = open_lo();
	ASSERT_EQ(ibv_query_device(e->ctx, &e->attr), 0);
	e->pd = ibv_alloc_pd(e->ctx);
	ASSERT_NOT_NULL(e->pd);
	e->cq = ibv_create_cq(e->ctx, 16, NULL, NULL, 0);
	ASSERT_NOT_NULL(e->cq);
}

/* A QP whose queues load the arena: rq receive WQEs of sge SGEs. */
static struct ibv_qp *qp_make(struct env *e, uint32_t rq, uint32_t sge)
{
	struct ibv_qp_init_attr a = {
		.send_cq = e->cq,
		.recv_cq = e->cq,
		.qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 1, .max_send_sge = 1,
			 .max_recv_wr = rq, .max_recv_sge = sge },
	};

	return ibv_create_qp(e->pd, &a);
}

static struct ibv_srq *srq_make(struct env *e, uint32_t wr, uint32_t sge)
{
	struct ibv_srq_init_attr a = {
		.attr = { .max_wr = wr, .max_sge = sge },
	};

	return ibv_create_srq(e->pd, &a);
}

static struct ibv_cq *cq_max(struct env *e)
{
	return ibv_create_cq(e->ctx, e->attr.max_cqe, NULL, NULL, 0);
}

/* QPs with rq-entry receive queues until a create fails (kept: the
 * process ends). */
static long count_qps(struct env *e, uint32_t rq, int *err)
{
	long n = 0;

	errno = 0;
	while (qp_make(e, rq, 1))
		n++;
	*err = errno;
	return n;
}

/* Maximum-size CQs until a create fails, then destroyed. */
static long count_big_cqs(struct env *e, int *err)
{
	struct ibv_cq *cqs[256];
	long n = 0, i;

	errno = 0;
	while (n < 256 && (cqs[n] = cq_max(e)))
		n++;
	*err = errno;
	ASSERT_LT(n, 256);
	for (i = 0; i < n; i++)
		ASSERT_EQ(ibv_destroy_cq(cqs[i]), 0);
	return n;
}

/* ------------------------------------------------------------------ */
/* Mixed objects                                                       */

enum kind { K_CQ, K_SRQ, K_QP, K_MID_CQ, K_QP_SMALL, K_NKINDS };

struct obj {
	enum kind kind;
	void *p;
};

static void *obj_make(struct env *e, enum kind k)
{
	switch (k) {
	case K_CQ:
		return cq_max(e);
	case K_SRQ:
		return srq_make(e, e->attr.max_srq_wr, e->attr.max_srq_sge);
	case K_QP:
		return qp_make(e, e->attr.max_qp_wr, e->attr.max_sge);
	case K_MID_CQ:
		return ibv_create_cq(e->ctx, 40000, NULL, NULL, 0);
	default:
		return qp_make(e, 1024, 2);
	}
}

static void obj_destroy(struct obj *o)
{
	switch (o->kind) {
	case K_CQ:
	case K_MID_CQ:
		ASSERT_EQ(ibv_destroy_cq(o->p), 0);
		break;
	case K_SRQ:
		ASSERT_EQ(ibv_destroy_srq(o->p), 0);
		break;
	default:
		ASSERT_EQ(ibv_destroy_qp(o->p), 0);
	}
	o->p = NULL;
}

/*
 * Round robin over the kinds until every kind has failed: the arena is
 * full of mixed sizes.  Every failure must be ENOMEM.
 */
static long fill_mixed(struct env *e, struct obj *objs, long n)
{
	bool done[K_NKINDS] = { false };
	int left = K_NKINDS, k;

	for (k = 0; left; k = (k + 1) % K_NKINDS) {
		if (done[k])
			continue;
		ASSERT_LT(n, MAX_OBJS);
		errno = 0;
		objs[n].p = obj_make(e, (enum kind)k);
		if (!objs[n].p) {
			ASSERT_EQ(errno, ENOMEM);
			done[k] = true;
			left--;
			continue;
		}
		objs[n++].kind = (enum kind)k;
	}
	return n;
}

/* Frees every stride-th object from first, so that the holes are not
 * neighbours at first. */
static void free_stride(struct obj *objs, long n, long first, long stride)
{
	long i;

	for (i = first; i < n; i += stride)
		if (objs[i].p)
			obj_destroy(&objs[i]);
}

static void churn_mixed(struct env *e)
{
	struct obj *objs = calloc(MAX_OBJS, sizeof(*objs));
	long n, round;

	ASSERT_NOT_NULL(objs);
	for (round = 0; round < 2; round++) {
		n = fill_mixed(e, objs, 0);
		ASSERT_GT(n, 2 * K_NKINDS);
		free_stride(objs, n, 1, 2);
		/* the holes take small QPs and mid-size CQs, then the
		 * rest goes in another order */
		n = fill_mixed(e, objs, n);
		free_stride(objs, n, 0, 3);
		free_stride(objs, n, 2, 3);
		free_stride(objs, n, 0, 1);
	}
	free(objs);
}

/* ------------------------------------------------------------------ */
/* Children                                                            */

typedef void (*child_fn)(struct result *r);

static int child_log = -1;	/* the child's stderr goes there */

static struct result run_child(child_fn fn)
{
	struct result r = { .count = -1 };
	int fds[2], status;
	pid_t pid;

	ASSERT_EQ(pipe(fds), 0);
	fflush(stdout);
	fflush(stderr);
	pid = fork();
	ASSERT_GE(pid, 0);
	if (pid == 0) {
		close(fds[0]);
		alarm(CHILD_TIMEOUT);
		if (child_log >= 0 && dup2(child_log, 2) < 0)
			_exit(4);
		fn(&r);
		if (write(fds[1], &r, sizeof(r)) != (ssize_t)sizeof(r))
			_exit(3);
		_exit(0);
	}
	close(fds[1]);
	if (read(fds[0], &r, sizeof(r)) != (ssize_t)sizeof(r))
		r.count = -1;
	close(fds[0]);
	ASSERT_EQ(waitpid(pid, &status, 0), pid);
	if (child_log >= 0 && r.count < 0) {	/* its FAIL line is there */
		char buf[4096];
		ssize_t n = pread(child_log, buf, sizeof(buf), 0);

		if (n > 0)
			(void)!write(2, buf, (size_t)n);
	}
	ASSERT_GE(r.count, 0);
	ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	return r;
}

/* The queue length whose QPs the arena, not max_qp, bounds. */
#define RQ_BIG 4096

static void fresh_qps_1024(struct result *r)
{
	struct env e;

	env_open(&e);
	r->count = count_qps(&e, 1024, &r->err);
	r->max_qp = e.attr.max_qp;
}

static void fresh_qps_big(struct result *r)
{
	struct env e;

	env_open(&e);
	r->count = count_qps(&e, RQ_BIG, &r->err);
	r->max_qp = e.attr.max_qp;
}

/* The probe: 15 maximum-size CQs, destroyed, then QPs. */
static void big_cqs_then_qps(struct result *r, uint32_t rq)
{
	struct ibv_cq *cqs[15];
	struct env e;
	int i;

	env_open(&e);
	for (i = 0; i < 15; i++) {
		cqs[i] = cq_max(&e);
		ASSERT_NOT_NULL(cqs[i]);
	}
	for (i = 0; i < 15; i += 2)	/* not in creation order */
		ASSERT_EQ(ibv_destroy_cq(cqs[i]), 0);
	for (i = 1; i < 15; i += 2)
		ASSERT_EQ(ibv_destroy_cq(cqs[i]), 0);
	r->count = count_qps(&e, rq, &r->err);
	r->max_qp = e.attr.max_qp;
}

static void big_cqs_then_qps_1024(struct result *r)
{
	big_cqs_then_qps(r, 1024);
}

static void big_cqs_then_qps_big(struct result *r)
{
	big_cqs_then_qps(r, RQ_BIG);
}

static void mixed_then_qps(struct result *r)
{
	struct env e;

	env_open(&e);
	churn_mixed(&e);
	r->count = count_qps(&e, RQ_BIG, &r->err);
	r->max_qp = e.attr.max_qp;
}

static void fresh_big_cqs(struct result *r)
{
	struct env e;

	env_open(&e);
	r->count = count_big_cqs(&e, &r->err);
}

/* Small QPs of mixed queue lengths fill the arena, go in an interleaved
 * order, then maximum-size CQs are counted. */
static void qps_then_big_cqs(struct result *r)
{
	static struct ibv_qp *qps[MAX_OBJS];
	static const uint32_t lens[] = { 16, 1024, 256, 4096, 64, 2048 };
	struct env e;
	long n = 0, i;

	env_open(&e);
	while (n < MAX_OBJS &&
	       (qps[n] = qp_make(&e, lens[n % 6], 1 + (uint32_t)(n % 3))))
		n++;
	ASSERT_EQ(errno, ENOMEM);
	for (i = 0; i < n; i += 2)
		ASSERT_EQ(ibv_destroy_qp(qps[i]), 0);
	for (i = n - 1 - n % 2; i > 0; i -= 2)	/* odd, downwards */
		ASSERT_EQ(ibv_destroy_qp(qps[i]), 0);
	r->count = count_big_cqs(&e, &r->err);
}

/* ------------------------------------------------------------------ */
/* Tests                                                               */

TEST(qps_after_max_cqs)
{
	struct result fresh, churned;

	fresh = run_child(fresh_qps_1024);
	churned = run_child(big_cqs_then_qps_1024);
	printf("  1024-entry QPs: fresh %ld, after 15 max CQs %ld (max_qp %ld)"
	       "\n", fresh.count, churned.count, fresh.max_qp);
	ASSERT_EQ(fresh.err, ENOMEM);
	ASSERT_EQ(churned.err, ENOMEM);
	ASSERT_EQ(churned.count, fresh.count);

	/* queues long enough that the arena, not max_qp, is the bound */
	fresh = run_child(fresh_qps_big);
	churned = run_child(big_cqs_then_qps_big);
	printf("  %d-entry QPs: fresh %ld, after 15 max CQs %ld\n", RQ_BIG,
	       fresh.count, churned.count);
	ASSERT_LT(fresh.count, fresh.max_qp);
	ASSERT_EQ(fresh.err, ENOMEM);
	ASSERT_EQ(churned.err, ENOMEM);
	ASSERT_EQ(churned.count, fresh.count);
}

TEST(qps_after_mixed_churn)
{
	struct result fresh, churned;

	fresh = run_child(fresh_qps_big);
	churned = run_child(mixed_then_qps);
	printf("  %d-entry QPs: fresh %ld, after mixed churn %ld\n", RQ_BIG,
	       fresh.count, churned.count);
	ASSERT_LT(fresh.count, fresh.max_qp);
	ASSERT_EQ(churned.err, ENOMEM);
	ASSERT_EQ(churned.count, fresh.count);
}

TEST(max_cqs_after_qp_churn)
{
	struct result fresh, churned;

	fresh = run_child(fresh_big_cqs);
	churned = run_child(qps_then_big_cqs);
	printf("  max-size CQs: fresh %ld, after QP churn %ld\n", fresh.count,
	       churned.count);
	ASSERT_GT(fresh.count, 1);
	ASSERT_EQ(fresh.err, ENOMEM);
	ASSERT_EQ(churned.err, ENOMEM);
	ASSERT_EQ(churned.count, fresh.count);
}

/* ------------------------------------------------------------------ */
/* Out of arena                                                        */

#define SMALL_ARENA	"256M"
#define SMALL_ARENA_BYTES "268435456"

/*
 * In an arena of SOFTHCA_ARENA_SIZE bytes, full of QPs: every verb that
 * takes arena memory fails with ENOMEM, and works again once a QP is
 * gone.
 */
static void full_arena(struct result *r)
{
	struct ibv_srq_attr sattr = { .max_wr = 16384 };
	struct ibv_qp *qp, *last = NULL, *prev = NULL;
	struct ibv_srq *srq;
	struct ibv_cq *cq;
	struct env e;
	int cqe;

	setenv("SOFTHCA_ARENA_SIZE", SMALL_ARENA, 1);
	env_open(&e);
	cq = ibv_create_cq(e.ctx, 16, NULL, NULL, 0);
	ASSERT_NOT_NULL(cq);
	cqe = cq->cqe;
	srq = srq_make(&e, 16, 1);
	ASSERT_NOT_NULL(srq);
	errno = 0;
	while ((qp = qp_make(&e, RQ_BIG, 1))) {
		prev = last;
		last = qp;
		r->count++;
	}
	ASSERT_EQ(errno, ENOMEM);
	ASSERT_NOT_NULL(last);
	ASSERT_NULL_ERRNO(qp_make(&e, RQ_BIG, 1), ENOMEM);
	ASSERT_NULL_ERRNO(cq_max(&e), ENOMEM);
	ASSERT_NULL_ERRNO(srq_make(&e, e.attr.max_srq_wr, 1), ENOMEM);
	ASSERT_EQ(ibv_resize_cq(cq, 65536), ENOMEM);
	ASSERT_EQ(ibv_modify_srq(srq, &sattr, IBV_SRQ_MAX_WR), ENOMEM);
	/* nothing changed by the failures */
	ASSERT_EQ(cq->cqe, cqe);
	ASSERT_EQ(ibv_query_srq(srq, &sattr), 0);
	ASSERT_LT(sattr.max_wr, 1024);
	sattr.max_wr = 1024;
	/* one QP's memory for the CQ, another's for the SRQ: where the
	 * arena's blocks fall decides whether one would hold both */
	ASSERT_NOT_NULL(prev);
	ASSERT_EQ(ibv_destroy_qp(last), 0);
	ASSERT_EQ(ibv_resize_cq(cq, 1024), 0);
	ASSERT_EQ(ibv_destroy_qp(prev), 0);
	ASSERT_EQ(ibv_modify_srq(srq, &sattr, IBV_SRQ_MAX_WR), 0);
	r->err = 0;
	r->max_qp = e.attr.max_qp;
	r->count++;	/* counted from 1: 0 means nothing ran */
}

/* A file for a child's stderr, already unlinked: nothing stays behind. */
static int log_file(void)
{
	char path[] = "/tmp/softhca-churn-XXXXXX";
	int fd = mkstemp(path);

	ASSERT_GE(fd, 0);
	unlink(path);
	return fd;
}

static char *slurp(int fd)
{
	char *buf = calloc(1, 65536);

	ASSERT_NOT_NULL(buf);
	ASSERT_GE(pread(fd, buf, 65535, 0), 0);
	close(fd);
	return buf;
}

TEST(enomem_when_full)
{
	struct result full, fresh;
	char *log;

	child_log = log_file();
	full = run_child(full_arena);
	log = slurp(child_log);
	child_log = -1;
	fresh = run_child(fresh_qps_big);
	printf("  %d-entry QPs: %ld in a %s arena, %ld in the default one\n",
	       RQ_BIG, full.count - 1, SMALL_ARENA, fresh.count);
	/* the smaller arena is the bound */
	ASSERT_GT(full.count - 1, 0);
	ASSERT_LT(full.count - 1, fresh.count / 3);
	/* one line says so, with the size and the knob */
	printf("  log: %s", log);
	ASSERT(strstr(log, "arena full"));
	ASSERT(strstr(log, "arena is " SMALL_ARENA_BYTES " bytes"));
	ASSERT(strstr(log, "SOFTHCA_ARENA_SIZE"));
	free(log);
}

/* A value out of range is refused: the default size, and a warning. */
static void bad_size(struct result *r)
{
	struct env e;

	setenv("SOFTHCA_ARENA_SIZE", "12k", 1);
	env_open(&e);
	r->count = count_qps(&e, RQ_BIG, &r->err);
}

TEST(arena_size_refused)
{
	struct result bad, fresh;
	char *log;

	child_log = log_file();
	bad = run_child(bad_size);
	log = slurp(child_log);
	child_log = -1;
	fresh = run_child(fresh_qps_big);
	ASSERT_EQ(bad.count, fresh.count);
	ASSERT(strstr(log, "SOFTHCA_ARENA_SIZE=12k"));
	ASSERT(strstr(log, "arena is 1073741824 bytes"));
	free(log);
}

/* ------------------------------------------------------------------ */
/* A peer rewrites offsets in the arena                                */

/* The CQ's entry in the arena, as the library holds it (verbs/shca.h;
 * cq->handle is a handle, docs/conformance.md, not the entry's offset). */
static struct shca_cq_shm *cq_shm_of(char *base, struct ibv_cq *cq)
{
	struct shca_cq_shm *shm = to_scq(cq)->shm;

	ASSERT((char *)shm > base);	/* in this process's arena mapping */
	return shm;
}

/*
 * The CQ's ring offset lives in the shared memory; a peer that points
 * CQ a's at CQ b's ring must not make a's destroy free b's ring: a CQ
 * created next must not land on it.  Same for a bogus offset.
 */
static void rewritten_ring_off(struct result *r)
{
	struct ibv_cq *a, *b, *c, *d;
	uint64_t b_ring;
	struct env e;
	char *base;

	env_open(&e);
	base = arena_own_base();
	a = ibv_create_cq(e.ctx, 4095, NULL, NULL, 0);
	b = ibv_create_cq(e.ctx, 4095, NULL, NULL, 0);
	d = ibv_create_cq(e.ctx, 4095, NULL, NULL, 0);
	ASSERT_NOT_NULL(a);
	ASSERT_NOT_NULL(b);
	ASSERT_NOT_NULL(d);
	b_ring = cq_shm_of(base, b)->ring_off;
	ASSERT_NE(b_ring, cq_shm_of(base, a)->ring_off);
	cq_shm_of(base, a)->ring_off = b_ring;		/* the peer */
	cq_shm_of(base, d)->ring_off = 12345;
	ASSERT_EQ(ibv_destroy_cq(a), 0);
	ASSERT_EQ(ibv_destroy_cq(d), 0);
	c = ibv_create_cq(e.ctx, 4095, NULL, NULL, 0);
	ASSERT_NOT_NULL(c);
	ASSERT_NE(cq_shm_of(base, c)->ring_off, b_ring);
	ASSERT_EQ(ibv_destroy_cq(c), 0);
	ASSERT_EQ(ibv_destroy_cq(b), 0);
	r->count = 1;
}

/*
 * A peer points a CQ's ring and a receive queue's ring past the end of
 * the arena and says a completion waits: the owner's poll finds nothing
 * (its own ring holds none), its post_recv goes into the ring it made,
 * nothing crashes, and destroy frees what it kept.
 */
static void rewritten_rings(struct result *r)
{
	struct ibv_sge sge = { .addr = 0, .length = 0, .lkey = 0 };
	struct ibv_recv_wr wr = { .sg_list = &sge, .num_sge = 1 }, *bad;
	struct shca_cq_shm *cs;
	struct shca_qp_shm *qs;
	struct shca_rq_shm *rs;
	uint64_t end, qoff;
	struct ibv_qp *qp;
	struct ibv_wc wc;
	struct ibv_cq *cq;
	struct env e;
	char *base;

	env_open(&e);
	base = arena_own_base();
	end = shca_arena_hdr(base)->size;
	cq = ibv_create_cq(e.ctx, 64, NULL, NULL, 0);
	ASSERT_NOT_NULL(cq);
	qp = qp_make(&e, 64, 1);
	ASSERT_NOT_NULL(qp);
	cs = cq_shm_of(base, cq);
	cs->head = cs->tail = 5;	/* as if 5 completions came and went */
	cs->ring_off = end - 64;			/* the peer */
	cs->size = 1u << 20;
	cs->tail = cs->head + 1;
	ASSERT_EQ(ibv_poll_cq(cq, 1, &wc), 0);
	cs->size = 3;					/* not a power of 2 */
	ASSERT_EQ(ibv_poll_cq(cq, 1, &wc), 0);
	qoff = shca_arena_qp_table(base)[qp->qp_num &
					 (SHCA_ARENA_QP_ENTRIES - 1)];
	ASSERT_NE(qoff, 0);
	ASSERT_EQ(ibv_modify_qp(qp, &(struct ibv_qp_attr){
		.qp_state = IBV_QPS_INIT, .port_num = 1 },
		IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
		IBV_QP_ACCESS_FLAGS), 0);
	ASSERT_EQ(ibv_post_recv(qp, &wr, &bad), 0);	/* a sane ring */
	qs = (struct shca_qp_shm *)(base + qoff);
	rs = (struct shca_rq_shm *)(base + qs->rq_off);
	rs->buf_off = end - 64;				/* the peer */
	rs->size = 3;
	ASSERT_EQ(ibv_post_recv(qp, &wr, &bad), 0);	/* its own ring */
	ASSERT_EQ(ibv_destroy_qp(qp), 0);
	ASSERT_EQ(ibv_destroy_cq(cq), 0);
	r->count = 1;
}

/*
 * A peer rewrites a CQ's ring offset and size in the arena: the owner's
 * own completions still go into, and come out of, the ring it made (a
 * signalled RDMA WRITE of a QP connected to itself: the requester's push
 * and the poll are the owner's), with the data in place.
 */
static void owner_ring_kept(struct result *r)
{
	struct ibv_qp_init_attr ia = {
		.cap = { .max_send_wr = 4, .max_recv_wr = 1,
			 .max_send_sge = 1, .max_recv_sge = 1 },
		.qp_type = IBV_QPT_RC,
	};
	static char buf[8192] __attribute__((aligned(4096)));
	struct ibv_send_wr wr = { .wr_id = 7, .num_sge = 1,
				  .opcode = IBV_WR_RDMA_WRITE,
				  .send_flags = IBV_SEND_SIGNALED }, *bad;
	struct shca_cq_shm *cs;
	struct ibv_sge sge;
	struct ibv_mr *mr;
	struct ibv_qp *qp;
	struct ibv_wc wc;
	struct env e;
	char *base;
	int i, n = 0;

	unsetenv("SOFTHCA_NET");	/* the same-host requester pushes */
	env_open(&e);
	base = arena_own_base();
	ia.send_cq = ia.recv_cq = e.cq;
	qp = ibv_create_qp(e.pd, &ia);
	ASSERT_NOT_NULL(qp);
	connect_self(qp, IBV_ACCESS_REMOTE_WRITE);
	mr = ibv_reg_mr(e.pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE |
			IBV_ACCESS_REMOTE_WRITE);
	ASSERT_NOT_NULL(mr);
	memset(buf, 'a', 4096);
	cs = cq_shm_of(base, e.cq);
	cs->ring_off = 12345;				/* the peer */
	cs->size = 3;
	sge = (struct ibv_sge){ (uintptr_t)buf, 4096, mr->lkey };
	wr.sg_list = &sge;
	wr.wr.rdma.remote_addr = (uintptr_t)buf + 4096;
	wr.wr.rdma.rkey = mr->rkey;
	ASSERT_EQ(ibv_post_send(qp, &wr, &bad), 0);
	for (i = 0; i < 100000 && !n; i++)
		n = ibv_poll_cq(e.cq, 1, &wc);
	ASSERT_EQ(n, 1);
	ASSERT_EQ(wc.status, IBV_WC_SUCCESS);
	ASSERT_U64_EQ(wc.wr_id, 7);
	ASSERT_EQ(buf[4096], 'a');
	ASSERT_EQ(buf[8191], 'a');
	ASSERT_EQ(ibv_destroy_qp(qp), 0);
	ASSERT_EQ(ibv_dereg_mr(mr), 0);
	ASSERT_EQ(ibv_destroy_cq(e.cq), 0);
	r->count = 1;
}

TEST(peer_rewritten_ring_owner_goes_on)
{
	struct result r = run_child(owner_ring_kept);

	ASSERT_EQ(r.count, 1);
}

TEST(peer_rewritten_ring_off)
{
	struct result r = run_child(rewritten_ring_off);

	ASSERT_EQ(r.count, 1);
}

TEST(peer_broken_rings)
{
	struct result r = run_child(rewritten_rings);

	ASSERT_EQ(r.count, 1);
}

/*
 * A forked child shares its parent's arena memfd: the child destroying an
 * inherited CQ must not give back pages the parent still uses.
 */
TEST(forked_child_destroy)
{
	struct ibv_cq *cq;
	struct env e;
	unsigned char *ring;
	char *base;
	size_t len = 4096 * sizeof(struct shca_cqe), i;
	int status;
	pid_t pid;

	env_open(&e);
	base = arena_own_base();
	cq = ibv_create_cq(e.ctx, 4095, NULL, NULL, 0);
	ASSERT_NOT_NULL(cq);
	ring = (unsigned char *)base + cq_shm_of(base, cq)->ring_off;
	memset(ring, 0xa5, len);
	fflush(stdout);
	pid = fork();
	ASSERT_GE(pid, 0);
	if (pid == 0) {
		alarm(CHILD_TIMEOUT);
		_exit(ibv_destroy_cq(cq) ? 1 : 0);
	}
	ASSERT_EQ(waitpid(pid, &status, 0), pid);
	ASSERT(WIFEXITED(status));
	for (i = 0; i < len; i++)
		if (ring[i] != 0xa5)
			ASSERT_EQ(ring[i], 0xa5);
	ASSERT_EQ(ibv_destroy_cq(cq), 0);
}
