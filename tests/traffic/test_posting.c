// SPDX-License-Identifier: MIT
/*
 * Posting on live traffic: *bad_wr and what was posted before it, full
 * queues (ENOMEM without losing posted work), and the extended API between
 * two processes: ibv_wr_* on an ibv_qp_ex, ibv_create_cq_ex polled with
 * start/next/end_poll and read_* (completion timestamps included).
 */
#include <arpa/inet.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "ep.h"

#define GRH	40
#define DST	(1u << 20)

/* ep_pattern's bytes: never 0, never EP_SENTINEL (ep.h) */
static void fill(uint8_t *p, uint32_t len, uint8_t seed)
{
	ep_fill_pattern(p, len, seed, 0);
}

static void check_fill(const uint8_t *p, uint32_t len, uint8_t seed)
{
	int64_t d = ep_find_pattern_diff(p, len, seed, 0);

	if (d >= 0)
		harness_fail(__FILE__, __LINE__, "byte %lld differs",
			     (long long)d);
}

/* Every byte of e's buffer is want's (the image of what it must hold). */
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
/* *bad_wr                                                             */

/*
 * A list of four writes whose third cannot be posted: ibv_post_send fails
 * with EINVAL and *bad_wr at the third; the first two were posted and
 * execute, the fourth never does (rxe's and mlx5's rule).
 */
enum bad_kind {
	BAD_NUM_SGE,		/* more SGEs than max_send_sge */
	BAD_OPCODE,		/* an opcode no provider has (a READ on UC
				 * is posted, and completes in error:
				 * test_qp_op_err.c) */
	BAD_INLINE,		/* inline data above max_inline_data */
};

static void bad_wr_side(struct ep *a, enum bad_kind kind)
{
	struct ibv_send_wr wr[4], *bad = NULL;
	struct ibv_sge sge[4][40];
	int i;

	memset(wr, 0, sizeof(wr));
	memset(sge, 0, sizeof(sge));
	for (i = 0; i < 4; i++) {
		fill(a->buf + 4096 * i, 64, (uint8_t)(0x10 * (i + 1)));
		sge[i][0].addr = (uintptr_t)a->buf + 4096u * i;
		sge[i][0].length = 64;
		sge[i][0].lkey = a->mr->lkey;
		wr[i].wr_id = 0xa1 + (uint64_t)i;
		wr[i].opcode = IBV_WR_RDMA_WRITE;
		wr[i].sg_list = sge[i];
		wr[i].num_sge = 1;
		wr[i].send_flags = IBV_SEND_SIGNALED;
		wr[i].wr.rdma.remote_addr = a->peer.addr + DST + 4096u * i;
		wr[i].wr.rdma.rkey = a->peer.rkey;
		wr[i].next = i < 3 ? &wr[i + 1] : NULL;
	}
	switch (kind) {
	case BAD_NUM_SGE:
		wr[2].num_sge = 40;
		break;
	case BAD_OPCODE:
		wr[2].opcode = (enum ibv_wr_opcode)0x7f;
		break;
	case BAD_INLINE:
		sge[2][0].length = 2048;
		wr[2].send_flags |= IBV_SEND_INLINE;
		break;
	}
	ASSERT_EQ(ibv_post_send(a->qp, wr, &bad), EINVAL);
	ASSERT(bad == &wr[2]);
	ep_expect(a->scq, a->qp, 0xa1, IBV_WC_SUCCESS);
	ep_expect(a->scq, a->qp, 0xa2, IBV_WC_SUCCESS);
	ep_expect_empty(a->scq);
	ASSERT_EQ(ep_qp_state(a->qp), IBV_QPS_RTS);
	/* the QP goes on */
	ASSERT_EQ(ep_post(a, 0xa5, IBV_WR_RDMA_WRITE, 0, 8, DST + 65536, 0),
		  0);
	ep_expect(a->scq, a->qp, 0xa5, IBV_WC_SUCCESS);
}

/* The target's whole buffer was EP_SENTINEL before the list was posted. */
static void bad_wr_prepare(struct ep *b)
{
	memset(b->buf, EP_SENTINEL, b->size);
}

/*
 * Every byte of the target: the first two writes' 64 bytes each, the 8
 * of the write after the failed post (the first 8 of the first source),
 * and the sentinel everywhere else: the 3rd and 4th targets whole, and
 * the bytes around each write.
 */
static void bad_wr_check(struct ep *b)
{
	uint8_t *want = malloc(b->size);

	ASSERT_NOT_NULL(want);
	memset(want, EP_SENTINEL, b->size);
	fill(want + DST, 64, 0x10);
	fill(want + DST + 4096, 64, 0x20);
	fill(want + DST + 65536, 8, 0x10);
	check_whole(b, want, "target");
	free(want);
	ep_expect_empty(b->rcq);
}

static void run_bad_wr(enum ibv_qp_type type, enum bad_kind kind)
{
	struct ep_opts o;
	struct ep a, b;

	ep_default_opts(&o, type);
	ep_pair(&a, &o, &b, &o);
	bad_wr_prepare(&b);
	bad_wr_side(&a, kind);
	bad_wr_check(&b);
	ep_destroy(&a);
	ep_destroy(&b);
}

TEST(bad_wr_third_num_sge) { run_bad_wr(IBV_QPT_RC, BAD_NUM_SGE); }
TEST(bad_wr_third_opcode_uc) { run_bad_wr(IBV_QPT_UC, BAD_OPCODE); }
TEST(bad_wr_third_inline_too_long) { run_bad_wr(IBV_QPT_RC, BAD_INLINE); }

static void bad_wr_child(int fd, void *arg)
{
	struct ep_opts o;
	struct ep b;

	(void)arg;
	ep_default_opts(&o, IBV_QPT_RC);
	ep_open_remote(&b, &o, fd);
	bad_wr_prepare(&b);
	duo_signal(fd, 'f');
	duo_expect(fd, 'd');
	bad_wr_check(&b);
	duo_signal(fd, 'c');
	ep_destroy(&b);
}

TEST(bad_wr_third_two_process)
{
	struct ep_opts o;
	struct duo d;
	struct ep a;

	duo_fork(&d, bad_wr_child, NULL);
	ep_default_opts(&o, IBV_QPT_RC);
	ep_open_remote(&a, &o, d.fd);
	duo_expect(d.fd, 'f');
	bad_wr_side(&a, BAD_NUM_SGE);
	duo_signal(d.fd, 'd');
	duo_expect(d.fd, 'c');
	duo_wait(&d);
	ep_destroy(&a);
}

/* The same for ibv_post_recv: the first two receives are posted. */
TEST(bad_recv_wr_third)
{
	struct ibv_recv_wr wr[4], *bad = NULL;
	struct ibv_sge sge[4][8];
	struct ep_opts o, oa;
	struct ibv_wc wc;
	struct ep a, b;
	int i;

	ep_default_opts(&o, IBV_QPT_RC);
	oa = o;
	oa.rnr_retry = 0;
	ep_pair(&a, &oa, &b, &o);
	memset(wr, 0, sizeof(wr));
	for (i = 0; i < 4; i++) {
		sge[i][0].addr = (uintptr_t)b.buf + DST + 4096u * i;
		sge[i][0].length = 4096;
		sge[i][0].lkey = b.mr->lkey;
		wr[i].wr_id = 0xb1 + (uint64_t)i;
		wr[i].sg_list = sge[i];
		wr[i].num_sge = 1;
		wr[i].next = i < 3 ? &wr[i + 1] : NULL;
	}
	wr[2].num_sge = 8;	/* above max_recv_sge (4) */
	ASSERT_EQ(ibv_post_recv(b.qp, wr, &bad), EINVAL);
	ASSERT(bad == &wr[2]);
	for (i = 0; i < 2; i++) {
		ASSERT_EQ(ep_post(&a, 0xa1 + (uint64_t)i, IBV_WR_SEND, 0,
				  10 + (uint32_t)i, 0, 0), 0);
		ep_expect(a.scq, a.qp, 0xa1 + (uint64_t)i, IBV_WC_SUCCESS);
		wc = ep_expect(b.rcq, b.qp, 0xb1 + (uint64_t)i,
			       IBV_WC_SUCCESS);
		ASSERT_EQ(wc.byte_len, 10 + (uint32_t)i);
	}
	/* and nothing else: the third message finds no receive */
	ASSERT_EQ(ep_post(&a, 0xa3, IBV_WR_SEND, 0, 8, 0, 0), 0);
	ep_expect(a.scq, a.qp, 0xa3, IBV_WC_RNR_RETRY_EXC_ERR);
	ep_expect_empty(b.rcq);
	ep_destroy(&a);
	ep_destroy(&b);
}

/* ------------------------------------------------------------------ */
/* Full queues                                                         */

/*
 * A send queue held up at its head (RNR: no receive yet) fills; the next
 * WR is ENOMEM with *bad_wr at it, and a list that fits only in part
 * posts that part.  Nothing posted is lost: once receives arrive,
 * everything completes, in order.
 */
TEST(full_send_queue_is_enomem)
{
	struct ibv_send_wr wr[3], *bad;
	struct ibv_qp_init_attr init;
	struct ibv_qp_attr qa;
	struct ibv_sge sge[3];
	struct ep_opts o;
	struct ibv_wc wc;
	struct ep a, b;
	uint32_t depth, i, n;

	ep_default_opts(&o, IBV_QPT_RC);
	o.max_send_wr = 8;
	o.rnr_retry = 7;
	ep_pair(&a, &o, &b, &o);
	ASSERT_EQ(ibv_query_qp(a.qp, &qa, IBV_QP_CAP, &init), 0);
	depth = init.cap.max_send_wr;
	ASSERT_GE(depth, 8);
	ASSERT_LT(depth, 60);

	for (i = 0; i < depth - 2; i++)
		ASSERT_EQ(ep_post(&a, 0x100 + i, IBV_WR_SEND, 0, 8 + i, 0, 0),
			  0);
	ep_expect_empty(a.scq);

	/* two slots left, three WRs: the third is ENOMEM */
	memset(wr, 0, sizeof(wr));
	for (i = 0; i < 3; i++) {
		sge[i].addr = (uintptr_t)a.buf;
		sge[i].length = 8 + depth - 2 + i;
		sge[i].lkey = a.mr->lkey;
		wr[i].wr_id = 0x100 + depth - 2 + i;
		wr[i].opcode = IBV_WR_SEND;
		wr[i].sg_list = &sge[i];
		wr[i].num_sge = 1;
		wr[i].send_flags = IBV_SEND_SIGNALED;
		wr[i].next = i < 2 ? &wr[i + 1] : NULL;
	}
	ASSERT_EQ(ibv_post_send(a.qp, wr, &bad), ENOMEM);
	ASSERT(bad == &wr[2]);
	/* full: one more is ENOMEM too */
	ASSERT_EQ(ep_post(&a, 0x1ff, IBV_WR_SEND, 0, 8, 0, 0), ENOMEM);
	ep_expect_empty(a.scq);
	ASSERT_EQ(ep_qp_state(a.qp), IBV_QPS_RTS);

	n = depth;
	for (i = 0; i < n; i++)
		ASSERT_EQ(ep_post_recv(&b, 0xb00 + i, DST + 256u * i, 256), 0);
	for (i = 0; i < n; i++) {
		ep_expect(a.scq, a.qp, 0x100 + i, IBV_WC_SUCCESS);
		wc = ep_expect(b.rcq, b.qp, 0xb00 + i, IBV_WC_SUCCESS);
		ASSERT_EQ(wc.byte_len, 8 + i);
	}
	ep_expect_empty(a.scq);
	ep_expect_empty(b.rcq);
	/* room again */
	ASSERT_EQ(ep_post_recv(&b, 0xbff, DST, 256), 0);
	ASSERT_EQ(ep_post(&a, 0x200, IBV_WR_SEND, 0, 8, 0, 0), 0);
	ep_expect(a.scq, a.qp, 0x200, IBV_WC_SUCCESS);
	ep_destroy(&a);
	ep_destroy(&b);
}

/* A full receive queue (and SRQ) is ENOMEM; its WQEs stay usable. */
static void run_full_rq(bool srq)
{
	struct ibv_srq_attr sa;
	struct ibv_qp_init_attr init;
	struct ibv_qp_attr qa;
	struct ep_opts o, ob;
	struct ibv_wc wc;
	struct ep a, b;
	uint32_t depth, i;

	ep_default_opts(&o, IBV_QPT_RC);
	ob = o;
	ob.max_recv_wr = 8;
	ob.use_srq = srq;
	ep_pair(&a, &o, &b, &ob);
	if (srq) {
		ASSERT_EQ(ibv_query_srq(b.srq, &sa), 0);
		depth = sa.max_wr;
	} else {
		ASSERT_EQ(ibv_query_qp(b.qp, &qa, IBV_QP_CAP, &init), 0);
		depth = init.cap.max_recv_wr;
	}
	ASSERT_GE(depth, 8);
	ASSERT_LT(depth, 60);
	for (i = 0; i < depth; i++)
		ASSERT_EQ(ep_post_recv(&b, 0xb00 + i, DST + 256u * i, 256), 0);
	ASSERT_EQ(ep_post_recv(&b, 0xbff, DST, 256), ENOMEM);
	for (i = 0; i < depth; i++)
		ASSERT_EQ(ep_post(&a, 0x100 + i, IBV_WR_SEND, 0, 1 + i, 0, 0),
			  0);
	for (i = 0; i < depth; i++) {
		ep_expect(a.scq, a.qp, 0x100 + i, IBV_WC_SUCCESS);
		wc = ep_expect(b.rcq, b.qp, 0xb00 + i, IBV_WC_SUCCESS);
		ASSERT_EQ(wc.byte_len, 1 + i);
	}
	ASSERT_EQ(ep_post_recv(&b, 0xbfe, DST, 256), 0);
	ep_destroy(&a);
	ep_destroy(&b);
}

TEST(full_recv_queue_is_enomem) { run_full_rq(false); }
TEST(full_srq_is_enomem) { run_full_rq(true); }

/* ------------------------------------------------------------------ */
/* ibv_wr_* and ibv_cq_ex between two processes                        */

#define WC_FLAGS                                                          \
	(IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_IMM |                   \
	 IBV_WC_EX_WITH_QP_NUM | IBV_WC_EX_WITH_SRC_QP |                  \
	 IBV_WC_EX_WITH_COMPLETION_TIMESTAMP |                            \
	 IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK)

#define SEND_OPS                                                          \
	(IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM |             \
	 IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM | \
	 IBV_QP_EX_WITH_RDMA_READ | IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP |   \
	 IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD)

static uint64_t wallclock_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

struct cqx_entry {
	uint64_t wr_id;
	enum ibv_wc_status status;
	enum ibv_wc_opcode opcode;
	uint32_t byte_len, qp_num, src_qp;
	unsigned int wc_flags;
	__be32 imm;
	uint64_t ts, wallclock;
};

/* Read n completions through start/next/end_poll (fails after ~10 s). */
static void cqx_read(struct ibv_cq_ex *cq, struct cqx_entry *e, int n)
{
	struct ibv_poll_cq_attr attr = { .comp_mask = 0 };
	struct timespec t0, t;
	int got = 0, ret;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (got < n) {
		ret = ibv_start_poll(cq, &attr);
		if (ret == ENOENT) {
			clock_gettime(CLOCK_MONOTONIC, &t);
			if (t.tv_sec - t0.tv_sec > 10)
				harness_fail(__FILE__, __LINE__,
					     "%d of %d completions after 10 s",
					     got, n);
			usleep(10);
			continue;
		}
		ASSERT_EQ(ret, 0);
		do {
			struct cqx_entry *x = &e[got++];

			x->wr_id = cq->wr_id;
			x->status = cq->status;
			x->opcode = ibv_wc_read_opcode(cq);
			x->byte_len = ibv_wc_read_byte_len(cq);
			x->qp_num = ibv_wc_read_qp_num(cq);
			x->src_qp = ibv_wc_read_src_qp(cq);
			x->wc_flags = ibv_wc_read_wc_flags(cq);
			x->imm = ibv_wc_read_imm_data(cq);
			x->ts = ibv_wc_read_completion_ts(cq);
			x->wallclock = ibv_wc_read_completion_wallclock_ns(cq);
		} while (got < n && ibv_next_poll(cq) == 0);
		ibv_end_poll(cq);
	}
	/* and no more */
	ASSERT_EQ(ibv_start_poll(cq, &attr), ENOENT);
}

/* BYTE_LEN_UNDEFINED: ibv_poll_cq(3) defines byte_len for receives and,
 * on the send side, for RDMA READ and atomics only: not checked. */
#define BYTE_LEN_UNDEFINED (-1)

static void cqx_check(const struct cqx_entry *x, uint64_t wr_id,
		      enum ibv_wc_opcode opcode, int64_t byte_len,
		      uint32_t qp_num, uint64_t t0, uint64_t t1)
{
	if (x->wr_id != wr_id || x->status != IBV_WC_SUCCESS)
		harness_fail(__FILE__, __LINE__,
			     "wr_id 0x%" PRIx64 " status %s, expected 0x%"
			     PRIx64, x->wr_id, ibv_wc_status_str(x->status),
			     wr_id);
	ASSERT_EQ(x->opcode, opcode);
	if (byte_len != BYTE_LEN_UNDEFINED)
		ASSERT_EQ(x->byte_len, byte_len);
	ASSERT_EQ(x->qp_num, qp_num);
	ASSERT_NE(x->ts, 0);
	ASSERT_GE(x->wallclock, t0);
	ASSERT_LE(x->wallclock, t1);
}

enum { WRX_SEND_IMM, WRX_WRITE, WRX_WRITE_IMM, WRX_READ, WRX_CAS, WRX_FAA,
       WRX_INLINE, WRX_NUM };

static void wrx_child(int fd, void *arg)
{
	struct cqx_entry e[4];
	struct ep_opts o;
	uint64_t t0, t1, v;
	uint8_t *want;
	struct ep b;
	int i;

	(void)arg;
	ep_default_opts(&o, IBV_QPT_RC);
	o.wc_flags = WC_FLAGS;
	ep_open_remote(&b, &o, fd);
	memset(b.buf, EP_SENTINEL, b.size);
	for (i = 0; i < 3; i++)
		ASSERT_EQ(ep_post_recv(&b, 0xb1 + (uint64_t)i,
				       DST + 4096u * i, 4096), 0);
	fill(b.buf + DST + 65536, 256, 0x51);	/* READ from here */
	v = 40;
	memcpy(b.buf + DST + 131072, &v, 8);	/* CAS 40 -> 41 */
	v = 100;
	memcpy(b.buf + DST + 131080, &v, 8);	/* FAA 100 + 5 */
	/* what the buffer must hold at the end, every byte */
	want = malloc(b.size);
	ASSERT_NOT_NULL(want);
	memcpy(want, b.buf, b.size);
	fill(want + DST, 128, 0x21);
	memcpy(want + DST + 8192, "inline through wr_*", 20);
	fill(want + DST + 32768, 256, 0x22);
	fill(want + DST + 40960, 512, 0x23);
	v = 41;
	memcpy(want + DST + 131072, &v, 8);
	v = 105;
	memcpy(want + DST + 131080, &v, 8);
	t0 = wallclock_ns();
	duo_signal(fd, 'p');
	duo_expect(fd, 'd');
	cqx_read(b.rcqx, e, 3);
	t1 = wallclock_ns();

	cqx_check(&e[0], 0xb1, IBV_WC_RECV, 128, b.qp->qp_num, t0, t1);
	ASSERT(e[0].wc_flags & IBV_WC_WITH_IMM);
	ASSERT_EQ(ntohl(e[0].imm), 0x1111);
	ASSERT_EQ(e[0].src_qp, b.peer.qpn);
	check_fill(b.buf + DST, 128, 0x21);

	cqx_check(&e[1], 0xb2, IBV_WC_RECV_RDMA_WITH_IMM, 512, b.qp->qp_num,
		  t0, t1);
	ASSERT(e[1].wc_flags & IBV_WC_WITH_IMM);
	ASSERT_EQ(ntohl(e[1].imm), 0x2222);
	check_fill(b.buf + DST + 32768, 256, 0x22);	/* the plain write */
	check_fill(b.buf + DST + 40960, 512, 0x23);	/* write with imm */

	cqx_check(&e[2], 0xb3, IBV_WC_RECV, 20, b.qp->qp_num, t0, t1);
	ASSERT_EQ(e[2].wc_flags & IBV_WC_WITH_IMM, 0);
	ASSERT(!memcmp(b.buf + DST + 8192, "inline through wr_*", 20));
	ASSERT(e[0].ts <= e[1].ts && e[1].ts <= e[2].ts);

	memcpy(&v, b.buf + DST + 131072, 8);
	ASSERT_U64_EQ(v, 41);
	memcpy(&v, b.buf + DST + 131080, 8);
	ASSERT_U64_EQ(v, 105);
	check_whole(&b, want, "responder");
	free(want);
	duo_signal(fd, 'c');
	ep_destroy(&b);
}

TEST(wr_api_and_cq_ex_two_process)
{
	static const enum ibv_wc_opcode opc[WRX_NUM] = {
		IBV_WC_SEND, IBV_WC_RDMA_WRITE, IBV_WC_RDMA_WRITE,
		IBV_WC_RDMA_READ, IBV_WC_COMP_SWAP, IBV_WC_FETCH_ADD,
		IBV_WC_SEND,
	};
	static const uint32_t len[WRX_NUM] = {
		[WRX_READ] = 256, [WRX_CAS] = 8, [WRX_FAA] = 8,
	};
	struct cqx_entry e[WRX_NUM];
	struct ibv_qp_ex *x;
	struct ep_opts o;
	uint64_t t0, t1, v;
	uint8_t *want;
	struct duo d;
	struct ep a;
	int i;

	duo_fork(&d, wrx_child, NULL);
	ep_default_opts(&o, IBV_QPT_RC);
	o.wc_flags = WC_FLAGS;
	o.send_ops_flags = SEND_OPS;
	ep_open_remote(&a, &o, d.fd);
	x = a.qpx;
	memset(a.buf, EP_SENTINEL, a.size);
	fill(a.buf, 128, 0x21);
	fill(a.buf + 4096, 256, 0x22);
	fill(a.buf + 8192, 512, 0x23);
	/* the sources stay; the READ and the atomics land, nothing else */
	want = malloc(a.size);
	ASSERT_NOT_NULL(want);
	memcpy(want, a.buf, a.size);
	fill(want + 16384, 256, 0x51);
	v = 40;
	memcpy(want + 20480, &v, 8);
	v = 100;
	memcpy(want + 20488, &v, 8);
	duo_expect(d.fd, 'p');

	t0 = wallclock_ns();
	ibv_wr_start(x);
	x->wr_flags = IBV_SEND_SIGNALED;
	x->wr_id = 0xa0 + WRX_SEND_IMM;
	ibv_wr_send_imm(x, htonl(0x1111));
	ibv_wr_set_sge(x, a.mr->lkey, (uintptr_t)a.buf, 128);
	x->wr_id = 0xa0 + WRX_WRITE;
	ibv_wr_rdma_write(x, a.peer.rkey, a.peer.addr + DST + 32768);
	ibv_wr_set_sge(x, a.mr->lkey, (uintptr_t)a.buf + 4096, 256);
	x->wr_id = 0xa0 + WRX_WRITE_IMM;
	ibv_wr_rdma_write_imm(x, a.peer.rkey, a.peer.addr + DST + 40960,
			      htonl(0x2222));
	ibv_wr_set_sge(x, a.mr->lkey, (uintptr_t)a.buf + 8192, 512);
	x->wr_id = 0xa0 + WRX_READ;
	ibv_wr_rdma_read(x, a.peer.rkey, a.peer.addr + DST + 65536);
	ibv_wr_set_sge(x, a.mr->lkey, (uintptr_t)a.buf + 16384, 256);
	x->wr_id = 0xa0 + WRX_CAS;
	ibv_wr_atomic_cmp_swp(x, a.peer.rkey, a.peer.addr + DST + 131072, 40,
			      41);
	ibv_wr_set_sge(x, a.mr->lkey, (uintptr_t)a.buf + 20480, 8);
	x->wr_id = 0xa0 + WRX_FAA;
	ibv_wr_atomic_fetch_add(x, a.peer.rkey, a.peer.addr + DST + 131080,
				5);
	ibv_wr_set_sge(x, a.mr->lkey, (uintptr_t)a.buf + 20488, 8);
	x->wr_id = 0xa0 + WRX_INLINE;
	x->wr_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE;
	ibv_wr_send(x);
	ibv_wr_set_inline_data(x, "inline through wr_*", 20);
	ASSERT_EQ(ibv_wr_complete(x), 0);

	cqx_read(a.scqx, e, WRX_NUM);
	t1 = wallclock_ns();
	for (i = 0; i < WRX_NUM; i++) {
		/* byte_len counts on the send side for READ and atomics;
		 * SEND and WRITE leave it undefined */
		cqx_check(&e[i], 0xa0 + (uint64_t)i, opc[i],
			  len[i] ? (int64_t)len[i] : BYTE_LEN_UNDEFINED,
			  a.qp->qp_num, t0, t1);
		if (i)
			ASSERT(e[i - 1].ts <= e[i].ts);
	}
	check_fill(a.buf + 16384, 256, 0x51);
	memcpy(&v, a.buf + 20480, 8);
	ASSERT_U64_EQ(v, 40);
	memcpy(&v, a.buf + 20488, 8);
	ASSERT_U64_EQ(v, 100);
	check_whole(&a, want, "requester");
	free(want);

	duo_signal(d.fd, 'd');
	duo_expect(d.fd, 'c');
	duo_wait(&d);
	ep_destroy(&a);
}

/*
 * ibv_wc_read_completion_ts counts hca_core_clock ticks (1 GHz: ns) of the
 * clock ibv_query_rt_values_ex reads as raw_clock (mlx5: the same free
 * running counter), so a completion's stamp lies between two readings
 * taken around it.
 */
static uint64_t raw_clock(struct ibv_context *ctx)
{
	struct ibv_values_ex v;

	memset(&v, 0, sizeof(v));
	v.comp_mask = IBV_VALUES_MASK_RAW_CLOCK;
	ASSERT_EQ(ibv_query_rt_values_ex(ctx, &v), 0);
	return (uint64_t)v.raw_clock.tv_sec * 1000000000ull +
	       (uint64_t)v.raw_clock.tv_nsec;
}

TEST(completion_ts_is_raw_clock)
{
	uint64_t t0, t1, w0, w1;
	struct cqx_entry e;
	struct ep_opts o;
	struct ep a, b;

	ep_default_opts(&o, IBV_QPT_RC);
	o.wc_flags = WC_FLAGS;
	ep_pair(&a, &o, &b, &o);
	t0 = raw_clock(a.ctx);
	w0 = wallclock_ns();
	ASSERT_EQ(ep_post(&a, 0xa1, IBV_WR_RDMA_WRITE, 0, 64, DST, 0), 0);
	cqx_read(a.scqx, &e, 1);
	t1 = raw_clock(a.ctx);
	w1 = wallclock_ns();
	ASSERT_EQ(e.status, IBV_WC_SUCCESS);
	/* and the wall-clock reading converts the same instant */
	ASSERT(e.wallclock >= w0 && e.wallclock <= w1 + 1000000);
	if (e.ts < t0 || e.ts > t1)
		harness_fail(__FILE__, __LINE__,
			     "completion_ts %" PRIu64 " not within the raw "
			     "clock readings %" PRIu64 "..%" PRIu64
			     " around it",
			     e.ts, t0, t1);
	ep_destroy(&a);
	ep_destroy(&b);
}
