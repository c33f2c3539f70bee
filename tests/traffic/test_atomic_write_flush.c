// SPDX-License-Identifier: MIT
/*
 * ATOMIC WRITE and FLUSH (IBA Annex A19, Memory Placement Extensions):
 * ibv_wr_atomic_write and rdma-core 45's ibv_wr_flush (reached through
 * the slot after ibv_qp_ex, common/verbs_ext.h) on RC.
 *
 *   success      the 8 bytes land whole at the word; WRITEs before a
 *                FLUSH are all placed when it completes; FLUSH of a range
 *                and of the whole region; IBV_WC_ATOMIC_WRITE and
 *                IBV_WC_FLUSH completions
 *   errors       misaligned ATOMIC WRITE: REM_INV_REQ_ERR, word untouched;
 *                ATOMIC WRITE through an R_Key without remote write,
 *                FLUSH without IBV_ACCESS_FLUSH_GLOBAL on the region,
 *                FLUSH of persistence, FLUSH past the region's end:
 *                REM_ACCESS_ERR
 *   paths        one process (the local path), two processes with the
 *                responder's memory mapped and by CMA (SOFTHCA_MAP=0 at
 *                the requester), and the net path (SOFTHCA_NET=1), one
 *                process and two
 *   verbs        ibv_post_send refuses both opcodes (rdma-core has no
 *                ibv_send_wr form for them); a builder the QP was not
 *                created with, a FLUSH type or level the annex does not
 *                define: EINVAL at wr_complete; UC and UD QPs cannot be
 *                created with them (EOPNOTSUPP); the capability bits;
 *                IBV_ACCESS_FLUSH_PERSISTENT is refused at registration
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "ep.h"
#include "../../src/common/verbs_ext.h"

#define WORD	4096u		/* b's word, 8-byte aligned */
#define DATA	(64u << 10)	/* b's WRITE target */
#define DLEN	(3u * 4096 + 100)	/* several packets of any MTU */
#define SEED	0x3d
#define VALUE	0x1122334455667788ull
#define START	0xfefefefefefefefeull

#define OPS (IBV_QP_EX_WITH_ATOMIC_WRITE | SHCA_QP_EX_WITH_FLUSH |           \
	     IBV_QP_EX_WITH_RDMA_WRITE)

enum path { LOCAL, MAPPED, CMA, NET1, NET2 };

static void opts(struct ep_opts *o)
{
	ep_default_opts(o, IBV_QPT_RC);
	o->access |= SHCA_ACCESS_FLUSH_GLOBAL;
	o->send_ops_flags = OPS;
	o->buf_size = 1u << 20;
}

static void post_atomic_write(struct ep *a, uint64_t wr_id, uint64_t addr,
			      uint32_t rkey, uint64_t v)
{
	ibv_wr_start(a->qpx);
	a->qpx->wr_id = wr_id;
	a->qpx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_atomic_write(a->qpx, rkey, addr, &v);
	ASSERT_EQ(ibv_wr_complete(a->qpx), 0);
}

static void post_flush(struct ep *a, uint64_t wr_id, uint64_t addr,
		       uint32_t rkey, size_t len, uint8_t type, uint8_t level)
{
	ibv_wr_start(a->qpx);
	a->qpx->wr_id = wr_id;
	a->qpx->wr_flags = IBV_SEND_SIGNALED;
	shca_wr_flush(a->qpx, rkey, addr, len, type, level);
	ASSERT_EQ(ibv_wr_complete(a->qpx), 0);
}

static void resp_prepare(struct ep *b)
{
	uint64_t start = START;

	memset(b->buf, EP_SENTINEL, b->size);
	memcpy(b->buf + WORD, &start, 8);
}

/* The requester's successful run: a WRITE, FLUSH of its range, ATOMIC
 * WRITE, FLUSH of the whole region. */
static void req_success(struct ep *a)
{
	struct ibv_wc wc;

	ep_fill_pattern(a->buf, DLEN, SEED, 0);
	ibv_wr_start(a->qpx);
	a->qpx->wr_id = 1;
	a->qpx->wr_flags = 0;		/* unsignaled: the FLUSH covers it */
	ibv_wr_rdma_write(a->qpx, a->peer.rkey, a->peer.addr + DATA);
	ibv_wr_set_sge(a->qpx, a->mr->lkey, (uintptr_t)a->buf, DLEN);
	a->qpx->wr_id = 2;
	a->qpx->wr_flags = IBV_SEND_SIGNALED;
	shca_wr_flush(a->qpx, a->peer.rkey, a->peer.addr + DATA, DLEN,
		      SHCA_FLUSH_GLOBAL, SHCA_FLUSH_RANGE);
	ASSERT_EQ(ibv_wr_complete(a->qpx), 0);
	wc = ep_expect(a->scq, a->qp, 2, IBV_WC_SUCCESS);
	ASSERT_EQ(wc.opcode, SHCA_WC_FLUSH);

	post_atomic_write(a, 3, a->peer.addr + WORD, a->peer.rkey, VALUE);
	wc = ep_expect(a->scq, a->qp, 3, IBV_WC_SUCCESS);
	ASSERT_EQ(wc.opcode, IBV_WC_ATOMIC_WRITE);

	/* the whole region: address and length unused */
	post_flush(a, 4, 0, a->peer.rkey, 0, SHCA_FLUSH_GLOBAL, SHCA_FLUSH_MR);
	wc = ep_expect(a->scq, a->qp, 4, IBV_WC_SUCCESS);
	ASSERT_EQ(wc.opcode, SHCA_WC_FLUSH);
	ep_expect_empty(a->scq);
}

static void resp_check(struct ep *b)
{
	uint64_t w;

	memcpy(&w, b->buf + WORD, 8);
	ASSERT_U64_EQ(w, VALUE);
	ASSERT_EQ(ep_find_non_sentinel(b->buf + WORD + 8, 64), -1);
	ASSERT_EQ(ep_find_non_sentinel(b->buf + WORD - 64, 64), -1);
	ASSERT_EQ(ep_find_pattern_diff(b->buf + DATA, DLEN, SEED, 0), -1);
	ASSERT_EQ(ep_find_non_sentinel(b->buf + DATA + DLEN, 64), -1);
}

/* The process's counter name, as `softhca stat` shows it. */
#define proc_counter(pid, name) ep_stat_counter(SOFTHCA_TOOL, pid, name)

static void set_path(enum path p)
{
	if (p == NET1 || p == NET2)
		ASSERT_EQ(setenv("SOFTHCA_NET", "1", 1), 0);
	/* mapped and CMA are same-host ways, whatever the environment */
	if (p == MAPPED || p == CMA)
		ASSERT_EQ(unsetenv("SOFTHCA_NET"), 0);
}

static void responder(int fd, void *arg)
{
	struct ep_opts o;
	struct ep b;

	(void)arg;
	/* the owner maps its memory; the requester chooses how it goes */
	setenv("SOFTHCA_MAP", "1", 1);
	opts(&o);
	ep_open_remote(&b, &o, fd);
	resp_prepare(&b);
	duo_signal(fd, 'p');
	duo_expect(fd, 'r');
	resp_check(&b);
	duo_signal(fd, 'c');
	ep_destroy(&b);
}

static void run_success(enum path p)
{
	struct ep_opts o;
	struct ep a, b;
	struct duo d;
	long long map0, cma0;

	set_path(p);
	opts(&o);
	if (p == LOCAL || p == NET1) {
		ep_pair(&a, &o, &b, &o);
		resp_prepare(&b);
		req_success(&a);
		resp_check(&b);
		if (p == NET1)
			ASSERT_GT(ep_tcp_bytes(), 0);
		ep_destroy(&a);
		ep_destroy(&b);
		return;
	}
	duo_fork(&d, responder, NULL);
	if (p == CMA)
		ASSERT_EQ(setenv("SOFTHCA_MAP", "0", 1), 0);
	else
		ASSERT_EQ(setenv("SOFTHCA_MAP", "1", 1), 0);
	ep_open_remote(&a, &o, d.fd);
	duo_expect(d.fd, 'p');
	map0 = proc_counter(getpid(), "map_xfers");
	cma0 = proc_counter(getpid(), "cma_xfers");
	req_success(&a);
	/* the way the requester reached the responder's memory */
	if (p == MAPPED) {
		ASSERT_GT(proc_counter(getpid(), "map_xfers"), map0);
		ASSERT_EQ(proc_counter(getpid(), "cma_xfers"), cma0);
	} else if (p == CMA) {
		ASSERT_GT(proc_counter(getpid(), "cma_xfers"), cma0);
		ASSERT_EQ(proc_counter(getpid(), "map_xfers"), map0);
	} else {
		ASSERT_GT(ep_tcp_bytes(), 0);
	}
	duo_signal(d.fd, 'r');
	duo_expect(d.fd, 'c');
	duo_wait(&d);
	ep_destroy(&a);
}

TEST(success_local) { run_success(LOCAL); }
TEST(success_mapped) { run_success(MAPPED); }
TEST(success_cma) { run_success(CMA); }
TEST(net_success_one_process) { run_success(NET1); }
TEST(net_success_two_process) { run_success(NET2); }

/* ------------------------------------------------------------------ */
/* Error completions (one process: local, and the net path)            */

enum ecase {
	MISALIGNED,		/* ATOMIC WRITE at word + 4 */
	AW_NO_WRITE,		/* through an R_Key with remote read only */
	FLUSH_NO_ACCESS,	/* region without FLUSH_GLOBAL */
	FLUSH_PERSIST,		/* persistence: no region has it */
	FLUSH_PAST_END,		/* the range runs past the region */
};

static void run_error(enum ecase k, bool net)
{
	struct ibv_mr *ro = NULL;
	enum ibv_wc_status want;
	struct ep_opts o;
	struct ep a, b;
	struct ibv_wc wc;
	uint64_t w;

	if (net)
		ASSERT_EQ(setenv("SOFTHCA_NET", "1", 1), 0);
	opts(&o);
	ep_pair(&a, &o, &b, &o);
	resp_prepare(&b);
	if (k == AW_NO_WRITE || k == FLUSH_NO_ACCESS) {
		ro = ibv_reg_mr(b.pd, b.buf, 8192,
				IBV_ACCESS_LOCAL_WRITE |
					IBV_ACCESS_REMOTE_READ);
		ASSERT_NOT_NULL(ro);
	}
	want = IBV_WC_REM_ACCESS_ERR;
	switch (k) {
	case MISALIGNED:
		want = IBV_WC_REM_INV_REQ_ERR;
		post_atomic_write(&a, 9, a.peer.addr + WORD + 4, a.peer.rkey,
				  VALUE);
		break;
	case AW_NO_WRITE:
		post_atomic_write(&a, 9, (uintptr_t)b.buf + WORD, ro->rkey,
				  VALUE);
		break;
	case FLUSH_NO_ACCESS:
		post_flush(&a, 9, (uintptr_t)b.buf, ro->rkey, 64,
			   SHCA_FLUSH_GLOBAL, SHCA_FLUSH_RANGE);
		break;
	case FLUSH_PERSIST:
		post_flush(&a, 9, a.peer.addr, a.peer.rkey, 64,
			   SHCA_FLUSH_PERSISTENT, SHCA_FLUSH_RANGE);
		break;
	case FLUSH_PAST_END:
		post_flush(&a, 9, a.peer.addr + b.size - 8, a.peer.rkey, 16,
			   SHCA_FLUSH_GLOBAL, SHCA_FLUSH_RANGE);
		break;
	}
	wc = ep_expect(a.scq, a.qp, 9, want);
	(void)wc;
	ep_wait_qp_state(a.qp, IBV_QPS_ERR);
	memcpy(&w, b.buf + WORD, 8);
	ASSERT_U64_EQ(w, START);
	ASSERT_EQ(ep_find_non_sentinel(b.buf + WORD - 64, 64), -1);
	ASSERT_EQ(ep_find_non_sentinel(b.buf + WORD + 8, 64), -1);
	if (ro)
		ASSERT_EQ(ibv_dereg_mr(ro), 0);
	ep_destroy(&a);
	ep_destroy(&b);
}

#define ECASE(name, k)                                                    \
	TEST(name) { run_error(k, false); }                               \
	TEST(net_##name) { run_error(k, true); }

ECASE(atomic_write_misaligned_rem_inv_req, MISALIGNED)
ECASE(atomic_write_without_remote_write_rem_access, AW_NO_WRITE)
ECASE(flush_without_flush_access_rem_access, FLUSH_NO_ACCESS)
ECASE(flush_persistent_rem_access, FLUSH_PERSIST)
ECASE(flush_past_region_end_rem_access, FLUSH_PAST_END)

/* ------------------------------------------------------------------ */
/* Verbs                                                               */

static void connected(struct ep *a, struct ep *b, uint64_t ops)
{
	struct ep_opts o;

	opts(&o);
	o.send_ops_flags = ops;
	ep_pair(a, &o, b, &o);
}

TEST(post_send_refuses_both)
{
	struct ibv_send_wr wr, *bad = NULL;
	struct ep a, b;

	connected(&a, &b, OPS);
	memset(&wr, 0, sizeof(wr));
	wr.opcode = IBV_WR_ATOMIC_WRITE;
	wr.wr.atomic.remote_addr = a.peer.addr + WORD;
	wr.wr.atomic.rkey = a.peer.rkey;
	ASSERT_EQ(ibv_post_send(a.qp, &wr, &bad), EINVAL);
	ASSERT(bad == &wr);
	wr.opcode = (enum ibv_wr_opcode)SHCA_WR_FLUSH;
	ASSERT_EQ(ibv_post_send(a.qp, &wr, &bad), EINVAL);
	ep_expect_empty(a.scq);
	ep_destroy(&a);
	ep_destroy(&b);
}

TEST(builders_einval)
{
	uint64_t v = VALUE;
	struct ep a, b;

	/* a QP created without them */
	connected(&a, &b, IBV_QP_EX_WITH_RDMA_WRITE);
	ibv_wr_start(a.qpx);
	ibv_wr_atomic_write(a.qpx, a.peer.rkey, a.peer.addr + WORD, &v);
	ASSERT_EQ(ibv_wr_complete(a.qpx), EINVAL);
	ibv_wr_start(a.qpx);
	shca_wr_flush(a.qpx, a.peer.rkey, a.peer.addr, 8, SHCA_FLUSH_GLOBAL,
		      SHCA_FLUSH_RANGE);
	ASSERT_EQ(ibv_wr_complete(a.qpx), EINVAL);
	ep_destroy(&a);
	ep_destroy(&b);

	connected(&a, &b, OPS);
	/* types and levels the annex does not define */
	ibv_wr_start(a.qpx);
	shca_wr_flush(a.qpx, a.peer.rkey, a.peer.addr, 8, 0, SHCA_FLUSH_RANGE);
	ASSERT_EQ(ibv_wr_complete(a.qpx), EINVAL);
	ibv_wr_start(a.qpx);
	shca_wr_flush(a.qpx, a.peer.rkey, a.peer.addr, 8, 4, SHCA_FLUSH_RANGE);
	ASSERT_EQ(ibv_wr_complete(a.qpx), EINVAL);
	ibv_wr_start(a.qpx);
	shca_wr_flush(a.qpx, a.peer.rkey, a.peer.addr, 8, SHCA_FLUSH_GLOBAL, 2);
	ASSERT_EQ(ibv_wr_complete(a.qpx), EINVAL);
	/* no local memory: an SGE makes the WR invalid */
	ibv_wr_start(a.qpx);
	ibv_wr_atomic_write(a.qpx, a.peer.rkey, a.peer.addr + WORD, &v);
	ibv_wr_set_sge(a.qpx, a.mr->lkey, (uintptr_t)a.buf, 8);
	ASSERT_EQ(ibv_wr_complete(a.qpx), EINVAL);
	ep_expect_empty(a.scq);
	ep_destroy(&a);
	ep_destroy(&b);
}

static int create_with(enum ibv_qp_type type, uint64_t ops)
{
	struct ibv_qp_init_attr_ex ix;
	struct ibv_context *ctx;
	struct ibv_device **l;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	int err = 0;

	l = ibv_get_device_list(NULL);
	ASSERT(l && l[0]);
	ctx = ibv_open_device(l[0]);
	ASSERT_NOT_NULL(ctx);
	pd = ibv_alloc_pd(ctx);
	cq = ibv_create_cq(ctx, 4, NULL, NULL, 0);
	ASSERT(pd && cq);
	memset(&ix, 0, sizeof(ix));
	ix.qp_type = type;
	ix.send_cq = ix.recv_cq = cq;
	ix.cap.max_send_wr = ix.cap.max_recv_wr = 4;
	ix.cap.max_send_sge = ix.cap.max_recv_sge = 1;
	ix.pd = pd;
	ix.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
	ix.send_ops_flags = ops;
	qp = ibv_create_qp_ex(ctx, &ix);
	if (qp)
		ASSERT_EQ(ibv_destroy_qp(qp), 0);
	else
		err = errno;
	ASSERT_EQ(ibv_destroy_cq(cq), 0);
	ASSERT_EQ(ibv_dealloc_pd(pd), 0);
	ASSERT_EQ(ibv_close_device(ctx), 0);
	ibv_free_device_list(l);
	return err;
}

TEST(rc_only)
{
	ASSERT_EQ(create_with(IBV_QPT_RC, IBV_QP_EX_WITH_ATOMIC_WRITE), 0);
	ASSERT_EQ(create_with(IBV_QPT_RC, SHCA_QP_EX_WITH_FLUSH), 0);
	ASSERT_EQ(create_with(IBV_QPT_UC, IBV_QP_EX_WITH_ATOMIC_WRITE),
		  EOPNOTSUPP);
	ASSERT_EQ(create_with(IBV_QPT_UC, SHCA_QP_EX_WITH_FLUSH), EOPNOTSUPP);
	ASSERT_EQ(create_with(IBV_QPT_UD, IBV_QP_EX_WITH_ATOMIC_WRITE),
		  EOPNOTSUPP);
	ASSERT_EQ(create_with(IBV_QPT_UD, SHCA_QP_EX_WITH_FLUSH), EOPNOTSUPP);
}

TEST(caps_and_registration)
{
	struct ibv_device_attr_ex attr;
	struct ibv_context *ctx;
	struct ibv_device **l;
	struct ibv_pd *pd;
	struct ibv_mr *mr;
	static char buf[4096];

	l = ibv_get_device_list(NULL);
	ASSERT(l && l[0]);
	ctx = ibv_open_device(l[0]);
	ASSERT_NOT_NULL(ctx);
	ASSERT_EQ(ibv_query_device_ex(ctx, NULL, &attr), 0);
	ASSERT(attr.device_cap_flags_ex & SHCA_DEVICE_ATOMIC_WRITE);
	ASSERT(attr.device_cap_flags_ex & SHCA_DEVICE_FLUSH_GLOBAL);
	ASSERT(!(attr.device_cap_flags_ex & SHCA_DEVICE_FLUSH_PERSISTENT));
	pd = ibv_alloc_pd(ctx);
	ASSERT_NOT_NULL(pd);
	mr = ibv_reg_mr(pd, buf, sizeof(buf),
			IBV_ACCESS_LOCAL_WRITE | SHCA_ACCESS_FLUSH_GLOBAL);
	ASSERT_NOT_NULL(mr);
	ASSERT_EQ(ibv_dereg_mr(mr), 0);
	errno = 0;
	ASSERT_NULL(ibv_reg_mr(pd, buf, sizeof(buf),
			       IBV_ACCESS_LOCAL_WRITE |
				       SHCA_ACCESS_FLUSH_PERSISTENT));
	ASSERT_EQ(errno, EOPNOTSUPP);
	ASSERT_EQ(ibv_dealloc_pd(pd), 0);
	ASSERT_EQ(ibv_close_device(ctx), 0);
	ibv_free_device_list(l);
}
