// SPDX-License-Identifier: MIT
/*
 * README's limits and send flags, each at its boundary (issue 16: every
 * claim under "What works" has a test that fails when it breaks):
 *
 *  - INLINE up to 1024 bytes: a QP takes max_inline_data 1024 and reports
 *    it, 1025 is refused at creation (EINVAL); 0, 1 and 1024 inline bytes
 *    arrive (as 1 SGE and as 32), 1025 is refused at ibv_post_send with
 *    EINVAL (rxe's rule; *bad_wr the WR, nothing posted) and the QP goes
 *    on.  The data cases of every size, with the source overwritten after
 *    the post, are the matrix's (test_matrix.c).
 *  - 32 SGEs: max_send_sge and max_recv_sge 32 are taken and reported, an
 *    SRQ's max_sge 32 too; 33 is refused at creation (EINVAL) and in a WR
 *    at ibv_post_send, ibv_post_recv and ibv_post_srq_recv (EINVAL).
 *    Scatter/gather over 32 SGEs with gaps between them: test_matrix.c.
 *  - FENCE (ibv_post_send(3): "the processing of this WR is blocked until
 *    all prior posted RDMA Read and Atomic WRs are completed"; RC only):
 *    a READ into local X then a fenced SEND from X, a FETCH_ADD into
 *    local Y then a fenced WRITE from Y, posted as one list.  The peer
 *    must receive the READ's data and the atomic's original value.  On
 *    the net path (SOFTHCA_NET=1) the READ response and the atomic ACK
 *    come back after the requester moved on: without the fence the SEND
 *    and the WRITE carry X's and Y's old bytes (the sentinel).  The fence
 *    orders nothing else, and the test asks nothing else.
 */
#include <arpa/inet.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "common.h"
#include "ep.h"

#define MAX_INLINE	1024
#define MAX_SGE		32
#define BAD_LKEY	0xdeadbeefu

static void qp_state(struct ibv_qp *qp, enum ibv_qp_state s)
{
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_state = s;
	ASSERT_EQ(ibv_modify_qp(qp, &a, IBV_QP_STATE), 0);
}

static struct ibv_qp_cap qp_cap(struct ibv_qp *qp)
{
	struct ibv_qp_init_attr init;
	struct ibv_qp_attr a;

	ASSERT_EQ(ibv_query_qp(qp, &a, IBV_QP_CAP, &init), 0);
	return a.cap;
}

/* Every byte of e's buffer is want's; who names the side. */
static void check_whole(const struct ep *e, const uint8_t *want,
			const char *who)
{
	int64_t d = ep_find_diff(e->buf, want, e->size);

	if (d >= 0)
		harness_fail(__FILE__, __LINE__,
			     "%s buffer byte %lld is 0x%02x, expected 0x%02x"
			     "%s", who, (long long)d, e->buf[d], want[d],
			     want[d] == EP_SENTINEL ?
				     " (the sentinel: nothing writes there)" :
				     "");
}

/* ------------------------------------------------------------------ */
/* INLINE                                                              */

#define IN_SRC	4096u
#define IN_DST	(64u << 10)
#define IN_GAP	64u

/*
 * Send len inline bytes as nsge pieces IN_GAP apart (invalid L_Keys: the
 * data are in the WQE), posted in SQD and the source overwritten before
 * the QP runs again; b receives them in one SGE.  Both buffers are
 * checked whole.
 */
static void inline_send(struct ep *a, struct ep *b, uint8_t *want,
			uint32_t len, int nsge, uint32_t seed)
{
	uint32_t part = len / (uint32_t)nsge, off = 0, grh;
	struct ibv_send_wr wr, *bad;
	struct ibv_sge sge[MAX_SGE];
	struct ibv_wc wc;
	int k;

	grh = b->type == IBV_QPT_UD ? 40 : 0;
	memset(a->buf, EP_SENTINEL, a->size);
	memset(b->buf, EP_SENTINEL, b->size);
	memset(want, EP_SENTINEL, b->size);
	for (k = 0; k < nsge; k++) {
		uint32_t n = k == nsge - 1 ? len - off : part;
		uint64_t at = IN_SRC + off + (uint64_t)k * IN_GAP;

		ep_fill_pattern(a->buf + at, n, seed, off);
		sge[k].addr = (uintptr_t)a->buf + at;
		sge[k].length = n;
		sge[k].lkey = BAD_LKEY;
		off += n;
	}
	ep_fill_pattern(want + IN_DST + grh, len, seed, 0);
	ASSERT_EQ(ep_post_recv(b, 0xb1, IN_DST, 4096), 0);

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = 0xa1;
	wr.opcode = IBV_WR_SEND;
	wr.sg_list = sge;
	wr.num_sge = nsge;
	wr.send_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE;
	if (a->type == IBV_QPT_UD) {
		wr.wr.ud.ah = a->ah;
		wr.wr.ud.remote_qpn = a->peer.qpn;
		wr.wr.ud.remote_qkey = 0x11111111;
	}
	qp_state(a->qp, IBV_QPS_SQD);
	ASSERT_EQ(ibv_post_send(a->qp, &wr, &bad), 0);
	/* the WQE has the bytes: what the source holds now never leaves */
	memset(a->buf + IN_SRC, 0x5a, (size_t)len + (size_t)nsge * IN_GAP);
	qp_state(a->qp, IBV_QPS_RTS);
	ep_expect(a->scq, a->qp, 0xa1, IBV_WC_SUCCESS);
	wc = ep_expect(b->rcq, b->qp, 0xb1, IBV_WC_SUCCESS);
	ASSERT_EQ(wc.byte_len, len + grh);
	if (grh)	/* its bytes are the matrix's to check */
		memcpy(want + IN_DST, b->buf + IN_DST, grh);
	check_whole(b, want, "receiver");
}

static void run_inline(enum ibv_qp_type type)
{
	static const uint32_t ok_len[] = { 0, 1, MAX_INLINE };
	struct ibv_send_wr wr, *bad;
	struct ibv_sge sge[2];
	struct ep_opts o;
	struct ep a, b;
	uint8_t *want;
	unsigned int i;

	ep_skip_if_netns();
	/* 1025: more than the device takes (ep_create would fail the test,
	 * so the verb is asked directly) */
	{
		struct ibv_context *ctx = open_lo();
		struct ibv_qp_init_attr ia;
		struct ibv_pd *pd;
		struct ibv_cq *cq;

		pd = ibv_alloc_pd(ctx);
		ASSERT_NOT_NULL(pd);
		cq = ibv_create_cq(ctx, 4, NULL, NULL, 0);
		ASSERT_NOT_NULL(cq);
		memset(&ia, 0, sizeof(ia));
		ia.send_cq = ia.recv_cq = cq;
		ia.qp_type = type;
		ia.cap.max_send_wr = ia.cap.max_recv_wr = 4;
		ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
		ia.cap.max_inline_data = MAX_INLINE + 1;
		ASSERT_NULL_ERRNO(ibv_create_qp(pd, &ia), EINVAL);
		ia.cap.max_inline_data = MAX_INLINE;
		{
			struct ibv_qp *qp = ibv_create_qp(pd, &ia);

			ASSERT_NOT_NULL(qp);
			ASSERT_EQ(ia.cap.max_inline_data, MAX_INLINE);
			ASSERT_EQ(qp_cap(qp).max_inline_data, MAX_INLINE);
			ASSERT_EQ(ibv_destroy_qp(qp), 0);
		}
		ASSERT_EQ(ibv_destroy_cq(cq), 0);
		ASSERT_EQ(ibv_dealloc_pd(pd), 0);
		ASSERT_EQ(ibv_close_device(ctx), 0);
	}
	ep_default_opts(&o, type);
	o.max_sge = MAX_SGE;
	o.max_inline = MAX_INLINE;
	ep_pair(&a, &o, &b, &o);
	ASSERT_EQ(qp_cap(a.qp).max_inline_data, MAX_INLINE);
	want = malloc(b.size);
	ASSERT_NOT_NULL(want);
	for (i = 0; i < sizeof(ok_len) / sizeof(ok_len[0]); i++) {
		inline_send(&a, &b, want, ok_len[i], 1, 10 + i);
		if (ok_len[i] >= MAX_SGE)
			inline_send(&a, &b, want, ok_len[i], MAX_SGE, 20 + i);
	}

	/* 1025 bytes, in one SGE and as 1024 + 1: refused at the post */
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = 0xa2;
	wr.opcode = IBV_WR_SEND;
	wr.sg_list = sge;
	wr.send_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE;
	if (type == IBV_QPT_UD) {
		wr.wr.ud.ah = a.ah;
		wr.wr.ud.remote_qpn = a.peer.qpn;
		wr.wr.ud.remote_qkey = 0x11111111;
	}
	sge[0].addr = (uintptr_t)a.buf;
	sge[0].length = MAX_INLINE + 1;
	sge[0].lkey = a.mr->lkey;
	wr.num_sge = 1;
	bad = NULL;
	ASSERT_EQ(ibv_post_send(a.qp, &wr, &bad), EINVAL);
	ASSERT(bad == &wr);
	sge[0].length = MAX_INLINE;
	sge[1] = sge[0];
	sge[1].addr += MAX_INLINE + IN_GAP;
	sge[1].length = 1;
	wr.num_sge = 2;
	bad = NULL;
	ASSERT_EQ(ibv_post_send(a.qp, &wr, &bad), EINVAL);
	ASSERT(bad == &wr);
	/* nothing was posted, and the QP goes on */
	ep_expect_empty(a.scq);
	ep_expect_empty(b.rcq);
	ASSERT_EQ(ep_qp_state(a.qp), IBV_QPS_RTS);
	inline_send(&a, &b, want, MAX_INLINE, 1, 30);
	free(want);
	ep_destroy(&a);
	ep_destroy(&b);
}

TEST(inline_1024_rc) { run_inline(IBV_QPT_RC); }
TEST(inline_1024_uc) { run_inline(IBV_QPT_UC); }
TEST(inline_1024_ud) { run_inline(IBV_QPT_UD); }

/* ------------------------------------------------------------------ */
/* 32 SGEs                                                             */

TEST(sge_32_boundaries)
{
	struct ibv_sge sge[MAX_SGE + 1];
	struct ibv_srq_init_attr sa;
	struct ibv_recv_wr rwr, *rbad;
	struct ibv_send_wr wr, *bad;
	struct ibv_device_attr da;
	struct ep_opts o, os;
	struct ibv_srq *srq;
	struct ep a, b, c;
	int i;

	ep_default_opts(&o, IBV_QPT_RC);
	o.max_sge = MAX_SGE;
	o.max_inline = 0;
	ep_pair(&a, &o, &b, &o);
	ASSERT_EQ(ibv_query_device(a.ctx, &da), 0);
	ASSERT_EQ(da.max_sge, MAX_SGE);
	ASSERT_EQ(qp_cap(a.qp).max_send_sge, MAX_SGE);
	ASSERT_EQ(qp_cap(a.qp).max_recv_sge, MAX_SGE);

	/* 33 at creation: send, receive, SRQ */
	{
		struct ibv_qp_init_attr ia;

		memset(&ia, 0, sizeof(ia));
		ia.send_cq = a.scq;
		ia.recv_cq = a.rcq;
		ia.qp_type = IBV_QPT_RC;
		ia.cap.max_send_wr = ia.cap.max_recv_wr = 4;
		ia.cap.max_send_sge = MAX_SGE + 1;
		ia.cap.max_recv_sge = 1;
		ASSERT_NULL_ERRNO(ibv_create_qp(a.pd, &ia), EINVAL);
		ia.cap.max_send_sge = 1;
		ia.cap.max_recv_sge = MAX_SGE + 1;
		ASSERT_NULL_ERRNO(ibv_create_qp(a.pd, &ia), EINVAL);
		memset(&sa, 0, sizeof(sa));
		sa.attr.max_wr = 4;
		sa.attr.max_sge = MAX_SGE + 1;
		ASSERT_NULL_ERRNO(ibv_create_srq(a.pd, &sa), EINVAL);
	}

	for (i = 0; i <= MAX_SGE; i++) {
		sge[i].addr = (uintptr_t)a.buf + 128u * (uint32_t)i;
		sge[i].length = 64;
		sge[i].lkey = a.mr->lkey;
	}
	/* 33 in a WR: refused at the post, nothing posted */
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = 0xa1;
	wr.opcode = IBV_WR_RDMA_WRITE;
	wr.sg_list = sge;
	wr.num_sge = MAX_SGE + 1;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.wr.rdma.remote_addr = a.peer.addr + (1u << 20);
	wr.wr.rdma.rkey = a.peer.rkey;
	bad = NULL;
	ASSERT_EQ(ibv_post_send(a.qp, &wr, &bad), EINVAL);
	ASSERT(bad == &wr);
	memset(&rwr, 0, sizeof(rwr));
	rwr.wr_id = 0xb1;
	rwr.sg_list = sge;
	rwr.num_sge = MAX_SGE + 1;
	rbad = NULL;
	ASSERT_EQ(ibv_post_recv(a.qp, &rwr, &rbad), EINVAL);
	ASSERT(rbad == &rwr);
	ep_expect_empty(a.scq);
	/* 32: taken (the data are the matrix's to check) */
	wr.num_sge = MAX_SGE;
	ASSERT_EQ(ibv_post_send(a.qp, &wr, &bad), 0);
	ep_expect(a.scq, a.qp, 0xa1, IBV_WC_SUCCESS);
	rwr.num_sge = MAX_SGE;
	ASSERT_EQ(ibv_post_recv(a.qp, &rwr, &rbad), 0);

	/* an SRQ of 32 SGEs: taken, reported; 33 in a WR refused */
	os = o;
	os.use_srq = true;
	ep_create(&c, &os);
	{
		struct ibv_srq_attr q;

		srq = c.srq;
		ASSERT_EQ(ibv_query_srq(srq, &q), 0);
		ASSERT_EQ(q.max_sge, MAX_SGE);
	}
	for (i = 0; i <= MAX_SGE; i++) {
		sge[i].addr = (uintptr_t)c.buf + 128u * (uint32_t)i;
		sge[i].lkey = c.mr->lkey;
	}
	rwr.num_sge = MAX_SGE + 1;
	rbad = NULL;
	ASSERT_EQ(ibv_post_srq_recv(srq, &rwr, &rbad), EINVAL);
	ASSERT(rbad == &rwr);
	rwr.num_sge = MAX_SGE;
	ASSERT_EQ(ibv_post_srq_recv(srq, &rwr, &rbad), 0);
	ep_destroy(&c);
	ep_destroy(&a);
	ep_destroy(&b);
}

/* ------------------------------------------------------------------ */
/* FENCE                                                               */

#define F_LEN	(64u << 10)	/* READ and fenced SEND: 16 packets */
#define F_X	4096u		/* requester: the READ lands here */
#define F_Y	(F_X + F_LEN + 4096)	/* the atomic's result */
#define R_SRC	4096u		/* responder: READ from here */
#define R_RECV	(R_SRC + F_LEN + 4096)	/* the fenced SEND lands here */
#define R_ATOM	(R_RECV + F_LEN + 4096)	/* the FETCH_ADD's target */
#define R_WRITE	(R_ATOM + 4096)	/* the fenced WRITE lands here */
#define F_SEED	77
#define F_ORIG	0x1122334455667788ull
#define F_ADD	0x0101010101010101ull

static void fence_responder(int fd, void *arg)
{
	struct ep_opts o;
	struct ep b;
	uint8_t *want;
	uint64_t v;
	int64_t d;

	(void)arg;
	ep_default_opts(&o, IBV_QPT_RC);
	ep_open_remote(&b, &o, fd);
	memset(b.buf, EP_SENTINEL, b.size);
	ep_fill_pattern(b.buf + R_SRC, F_LEN, F_SEED, 0);
	v = F_ORIG;
	memcpy(b.buf + R_ATOM, &v, 8);
	ASSERT_EQ(ep_post_recv(&b, 0xb1, R_RECV, F_LEN), 0);
	want = malloc(b.size);
	ASSERT_NOT_NULL(want);
	memcpy(want, b.buf, b.size);
	/* the SEND carries what the READ brought, the WRITE the atomic's
	 * original value; the atomic applied once */
	ep_fill_pattern(want + R_RECV, F_LEN, F_SEED, 0);
	v = F_ORIG;
	memcpy(want + R_WRITE, &v, 8);
	v = F_ORIG + F_ADD;
	memcpy(want + R_ATOM, &v, 8);
	duo_signal(fd, 'p');
	duo_expect(fd, 'd');
	{
		struct ibv_wc wc = ep_expect(b.rcq, b.qp, 0xb1,
					     IBV_WC_SUCCESS);

		ASSERT_EQ(wc.byte_len, F_LEN);
	}
	d = ep_find_diff(b.buf + R_RECV, want + R_RECV, F_LEN);
	if (d >= 0)
		harness_fail(__FILE__, __LINE__,
			     "the fenced SEND did not carry what the READ "
			     "before it brought: its byte %lld is 0x%02x, "
			     "expected 0x%02x%s", (long long)d,
			     b.buf[R_RECV + d], want[R_RECV + d],
			     b.buf[R_RECV + d] == EP_SENTINEL ?
				     " (the sentinel X held before the READ)" :
				     "");
	memcpy(&v, b.buf + R_WRITE, 8);
	if (v != F_ORIG)
		harness_fail(__FILE__, __LINE__,
			     "the fenced WRITE carried 0x%016llx, not the "
			     "FETCH_ADD's original value 0x%016llx%s",
			     (unsigned long long)v,
			     (unsigned long long)F_ORIG,
			     v == 0xa5a5a5a5a5a5a5a5ull ?
				     " (the sentinel Y held before it)" : "");
	check_whole(&b, want, "responder");
	free(want);
	duo_signal(fd, 'c');
	ep_destroy(&b);
}

static void run_fence(bool net)
{
	struct ibv_send_wr wr[4], *bad;
	struct ibv_sge sge[4];
	struct ep_opts o;
	struct duo d;
	struct ep a;
	uint8_t *want;
	uint64_t v;
	int i;

	if (net)
		setenv("SOFTHCA_NET", "1", 1);
	duo_fork(&d, fence_responder, NULL);
	ep_default_opts(&o, IBV_QPT_RC);
	ep_open_remote(&a, &o, d.fd);
	memset(a.buf, EP_SENTINEL, a.size);
	want = malloc(a.size);
	ASSERT_NOT_NULL(want);
	memcpy(want, a.buf, a.size);
	ep_fill_pattern(want + F_X, F_LEN, F_SEED, 0);
	v = F_ORIG;
	memcpy(want + F_Y, &v, 8);

	memset(wr, 0, sizeof(wr));
	for (i = 0; i < 4; i++) {
		sge[i].lkey = a.mr->lkey;
		wr[i].wr_id = 0xa1 + (uint64_t)i;
		wr[i].sg_list = &sge[i];
		wr[i].num_sge = 1;
		wr[i].send_flags = IBV_SEND_SIGNALED;
		wr[i].next = i < 3 ? &wr[i + 1] : NULL;
	}
	/* READ the responder's R_SRC into X */
	sge[0].addr = (uintptr_t)a.buf + F_X;
	sge[0].length = F_LEN;
	wr[0].opcode = IBV_WR_RDMA_READ;
	wr[0].wr.rdma.remote_addr = a.peer.addr + R_SRC;
	wr[0].wr.rdma.rkey = a.peer.rkey;
	/* SEND from X, fenced: after the READ completed */
	sge[1] = sge[0];
	wr[1].opcode = IBV_WR_SEND;
	wr[1].send_flags |= IBV_SEND_FENCE;
	/* FETCH_ADD R_ATOM, the original value into Y */
	sge[2].addr = (uintptr_t)a.buf + F_Y;
	sge[2].length = 8;
	wr[2].opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
	wr[2].wr.atomic.remote_addr = a.peer.addr + R_ATOM;
	wr[2].wr.atomic.rkey = a.peer.rkey;
	wr[2].wr.atomic.compare_add = F_ADD;
	/* WRITE Y to R_WRITE, fenced: after the atomic completed */
	sge[3] = sge[2];
	wr[3].opcode = IBV_WR_RDMA_WRITE;
	wr[3].send_flags |= IBV_SEND_FENCE;
	wr[3].wr.rdma.remote_addr = a.peer.addr + R_WRITE;
	wr[3].wr.rdma.rkey = a.peer.rkey;

	duo_expect(d.fd, 'p');
	ASSERT_EQ(ibv_post_send(a.qp, wr, &bad), 0);
	for (i = 0; i < 4; i++)
		ep_expect(a.scq, a.qp, 0xa1 + (uint64_t)i, IBV_WC_SUCCESS);
	check_whole(&a, want, "requester");
	free(want);
	duo_signal(d.fd, 'd');
	duo_expect(d.fd, 'c');
	duo_wait(&d);
	ep_destroy(&a);
}

TEST(fence_same_host) { run_fence(false); }
TEST(fence_net) { run_fence(true); }
