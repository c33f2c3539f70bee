// SPDX-License-Identifier: MIT
/*
 * Error completions on the same-host path: one case per IBV_WC_* error
 * status, each checking the status on both sides (requester and
 * responder), the QP states afterwards and the flush of what was still
 * queued, as the IBA (chapters 9-11) and hardware define them:
 *
 *   responder-detected            requester          responder
 *   receive buffer too small      REM_INV_REQ_ERR    LOC_LEN_ERR, ERR
 *     (UD: the datagram dropped, the WQE kept for the next one)
 *   R_Key, bounds, access, PD     REM_ACCESS_ERR     ERR, QP_ACCESS_ERR
 *   receive WQE with a bad L_Key  REM_OP_ERR         LOC_PROT_ERR, ERR
 *   no receive WQE (RNR)          RNR_RETRY_EXC_ERR  untouched
 *   nobody there                  RETRY_EXC_ERR      -
 *
 *   requester-detected: LOC_PROT_ERR (L_Key, bounds, PD, local write;
 *   a READ's or atomic's when its response arrives, test_key_order.c),
 *   LOC_LEN_ERR (UD over the path MTU); RC goes to ERR, UC and UD to SQE.
 *
 * Most cases are a scenario (responder prepare, requester run, responder
 * check) run twice: between two QPs of one process and between two
 * processes (fork + socketpair, as test_matrix.c).
 *
 * With SHCA_TEST_NETNS_A/B set (ep.h), the two processes are in two
 * network namespaces (tests/netns/test_traffic_netns.sh): the two-process
 * cases then cross softhca's net path, and the one-process cases skip.
 */
#include <arpa/inet.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/wait.h>

#include "harness.h"
#include "ep.h"

#define GRH	40
#define DST	(1u << 20)	/* where the responder receives */
#define XOFF	(2u << 20)	/* a second MR of the responder's */
#define XLEN	(64u << 10)
#define KEY_XOR	0x5a5u		/* other key bits: no such key */

static const char pattern_seed = 0x3c;

static void fill(uint8_t *p, uint32_t len, uint8_t seed)
{
	uint32_t i;

	for (i = 0; i < len; i++)
		p[i] = (uint8_t)(seed + i * 7);
}

static void check_fill(const uint8_t *p, uint32_t len, uint8_t seed)
{
	uint32_t i;

	for (i = 0; i < len; i++)
		if (p[i] != (uint8_t)(seed + i * 7))
			harness_fail(__FILE__, __LINE__, "byte %u differs", i);
}

/* ------------------------------------------------------------------ */
/* Scenarios: one process or two                                       */

/* What the responder tells the requester beyond its ep_info. */
struct hint {
	uint64_t addr;
	uint32_t rkey;
	uint32_t pad;
};

struct scenario {
	enum ibv_qp_type type;
	void (*req_opts)(struct ep_opts *o);
	void (*resp_opts)(struct ep_opts *o);
	void (*prepare)(struct ep *b, struct hint *h);	/* responder */
	void (*run)(struct ep *a, const struct hint *h);	/* requester */
	void (*check)(struct ep *b);			/* responder */
};

static void scenario_opts(const struct scenario *s, struct ep_opts *o,
			  bool requester)
{
	ep_default_opts(o, s->type);
	if (requester && s->req_opts)
		s->req_opts(o);
	if (!requester && s->resp_opts)
		s->resp_opts(o);
}

static void run_same(const struct scenario *s)
{
	struct ep_opts oa, ob;
	struct hint h;
	struct ep a, b;

	memset(&h, 0, sizeof(h));
	scenario_opts(s, &oa, true);
	scenario_opts(s, &ob, false);
	ep_pair(&a, &oa, &b, &ob);
	if (s->prepare)
		s->prepare(&b, &h);
	s->run(&a, &h);
	if (s->check)
		s->check(&b);
	ep_destroy(&a);
	ep_destroy(&b);
}

static void scenario_responder(int fd, void *arg)
{
	const struct scenario *s = arg;
	struct ep_opts o;
	struct hint h;
	struct ep b;

	memset(&h, 0, sizeof(h));
	scenario_opts(s, &o, false);
	ep_open_remote(&b, &o, fd);
	if (s->prepare)
		s->prepare(&b, &h);
	xwrite(fd, &h, sizeof(h));
	duo_expect(fd, 'r');
	if (s->check)
		s->check(&b);
	duo_signal(fd, 'c');
	ep_destroy(&b);
}

static void run_two(const struct scenario *s)
{
	struct ep_opts o;
	struct duo d;
	struct hint h;
	struct ep a;

	duo_fork(&d, scenario_responder, (void *)s);
	scenario_opts(s, &o, true);
	ep_open_remote(&a, &o, d.fd);
	xread(d.fd, &h, sizeof(h));
	s->run(&a, &h);
	duo_signal(d.fd, 'r');
	duo_expect(d.fd, 'c');
	duo_wait(&d);
	ep_destroy(&a);
}

/* ------------------------------------------------------------------ */
/* Helpers                                                             */

struct op {
	uint64_t id;
	enum ibv_wr_opcode op;
	uint32_t len;
	uint64_t roff;		/* from the remote base */
};

/* Post ops as one list, signaled, local data at buf + 0. */
static void post_list(struct ep *e, const struct op *ops, int n,
		      uint64_t raddr, uint32_t rkey)
{
	struct ibv_send_wr wr[8], *bad = NULL;
	struct ibv_sge sge[8];
	int i;

	ASSERT_LE(n, 8);
	memset(wr, 0, sizeof(wr));
	for (i = 0; i < n; i++) {
		sge[i].addr = (uintptr_t)e->buf;
		sge[i].length = ops[i].len;
		sge[i].lkey = e->mr->lkey;
		wr[i].wr_id = ops[i].id;
		wr[i].opcode = ops[i].op;
		wr[i].sg_list = &sge[i];
		wr[i].num_sge = ops[i].len ? 1 : 0;
		wr[i].send_flags = IBV_SEND_SIGNALED;
		wr[i].imm_data = htonl(0x1234);
		if (ops[i].op == IBV_WR_ATOMIC_CMP_AND_SWP ||
		    ops[i].op == IBV_WR_ATOMIC_FETCH_AND_ADD) {
			wr[i].wr.atomic.remote_addr = raddr + ops[i].roff;
			wr[i].wr.atomic.rkey = rkey;
			wr[i].wr.atomic.compare_add = 1;
		} else {
			wr[i].wr.rdma.remote_addr = raddr + ops[i].roff;
			wr[i].wr.rdma.rkey = rkey;
		}
		if (e->type == IBV_QPT_UD) {
			wr[i].wr.ud.ah = e->ah;
			wr[i].wr.ud.remote_qpn = e->peer.qpn;
			wr[i].wr.ud.remote_qkey = 0x11111111;
		}
		wr[i].next = i + 1 < n ? &wr[i + 1] : NULL;
	}
	ASSERT_EQ(ibv_post_send(e->qp, wr, &bad), 0);
}

/* Post a receive whose SGE is given in full. */
static void post_recv_sge(struct ep *e, uint64_t wr_id, uint64_t addr,
			  uint32_t len, uint32_t lkey)
{
	struct ibv_sge sge = { .addr = addr, .length = len, .lkey = lkey };
	struct ibv_recv_wr wr, *bad;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = wr_id;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	ASSERT_EQ(ibv_post_recv(e->qp, &wr, &bad), 0);
}

/* In ERR (or SQE, for sends): a new WR completes at once, flushed. */
static void expect_post_send_flushed(struct ep *e, uint64_t wr_id)
{
	ASSERT_EQ(ep_post(e, wr_id, IBV_WR_SEND, 0, 8, 0, 0), 0);
	ep_expect(e->scq, e->qp, wr_id, IBV_WC_WR_FLUSH_ERR);
}

static void expect_post_recv_flushed(struct ep *e, uint64_t wr_id)
{
	ASSERT_EQ(ep_post_recv(e, wr_id, DST, 64), 0);
	ep_expect(e->rcq, e->qp, wr_id, IBV_WC_WR_FLUSH_ERR);
}

/* The responder saw nothing: no completion, no event, still in RTS. */
static void check_untouched(struct ep *b)
{
	ASSERT_EQ(ep_qp_state(b->qp), IBV_QPS_RTS);
	ep_expect_empty(b->rcq);
	ep_expect_empty(b->scq);
	ep_expect_no_async(b->ctx);
}

/*
 * The local ACK timeout of the cases that wait for "nobody answers": 8
 * (about 1 ms) on the same host, where a live peer never leaves an ACK
 * pending (the requester does the transfer itself).  Across namespaces a
 * live responder is another process's thread answering over TCP, which a
 * loaded host may keep off the CPU for milliseconds: 14 (about 67 ms,
 * ep_default_opts's), so that it does not pass for a dead one.
 */
static uint8_t nobody_timeout(void)
{
	return ep_netns() ? 14 : 8;
}

static void modify_to(struct ibv_qp *qp, enum ibv_qp_state state)
{
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_state = state;
	ASSERT_EQ(ibv_modify_qp(qp, &a, IBV_QP_STATE), 0);
}

/* ------------------------------------------------------------------ */
/* LOC_LEN_ERR                                                         */

/* RC SEND of 200 bytes into a 100-byte receive buffer. */
static void len_prepare(struct ep *b, struct hint *h)
{
	(void)h;
	ASSERT_EQ(ep_post_recv(b, 0xb1, DST, 100), 0);
	ASSERT_EQ(ep_post_recv(b, 0xb2, DST + 4096, 4096), 0);
}

static void len_run(struct ep *a, const struct hint *h)
{
	static const struct op ops[] = {
		{ 0xa1, IBV_WR_SEND, 200, 0 },
		{ 0xa2, IBV_WR_SEND, 10, 0 },
		{ 0xa3, IBV_WR_RDMA_WRITE, 10, DST },
	};

	(void)h;
	post_list(a, ops, 3, a->peer.addr, a->peer.rkey);
	/* IBA 9.9.3.1.2 class C: NAK invalid request */
	ep_expect(a->scq, a->qp, 0xa1, IBV_WC_REM_INV_REQ_ERR);
	ep_expect(a->scq, a->qp, 0xa2, IBV_WC_WR_FLUSH_ERR);
	ep_expect(a->scq, a->qp, 0xa3, IBV_WC_WR_FLUSH_ERR);
	ep_wait_qp_state(a->qp, IBV_QPS_ERR);
	expect_post_send_flushed(a, 0xa4);
	expect_post_recv_flushed(a, 0xa5);
	ep_expect_empty(a->scq);
	ep_expect_empty(a->rcq);
}

static void len_check(struct ep *b)
{
	ep_expect(b->rcq, b->qp, 0xb1, IBV_WC_LOC_LEN_ERR);
	ep_expect(b->rcq, b->qp, 0xb2, IBV_WC_WR_FLUSH_ERR);
	ep_wait_qp_state(b->qp, IBV_QPS_ERR);
	/* the receive WQE reported the error: no async event */
	ep_expect_no_async(b->ctx);
	expect_post_recv_flushed(b, 0xb3);
	ep_expect_empty(b->rcq);
	/* nothing past the 100 bytes was written */
	ASSERT_EQ(b->buf[DST + 100], 0);
}

static const struct scenario rc_len = {
	.type = IBV_QPT_RC,
	.prepare = len_prepare,
	.run = len_run,
	.check = len_check,
};

TEST(rc_send_too_long_same_process) { run_same(&rc_len); }
TEST(rc_send_too_long_two_process) { run_two(&rc_len); }

/*
 * UD: a datagram longer than the receive buffer is dropped and the
 * receive WQE stays for the next datagram (IBA's UD receive rules; hfi1
 * and qib reuse the WQE; docs/conformance.md); an unreliable QP stays
 * operational and the sender never knows.  100 bytes meet a 50-byte
 * buffer (dropped), then 50 bytes take that buffer, then 100 bytes the
 * next one.
 */
static void ud_len_prepare(struct ep *b, struct hint *h)
{
	(void)h;
	ASSERT_EQ(ep_post_recv(b, 0xb1, DST, GRH + 50), 0);
	ASSERT_EQ(ep_post_recv(b, 0xb2, DST + 8192, GRH + 100), 0);
}

static void ud_len_run(struct ep *a, const struct hint *h)
{
	(void)h;
	fill(a->buf, 100, pattern_seed);
	fill(a->buf + 4096, 50, (uint8_t)(pattern_seed + 1));
	ASSERT_EQ(ep_post(a, 0xa1, IBV_WR_SEND, 0, 100, 0, 0), 0);
	ep_expect(a->scq, a->qp, 0xa1, IBV_WC_SUCCESS);
	ASSERT_EQ(ep_post(a, 0xa2, IBV_WR_SEND, 4096, 50, 0, 0), 0);
	ep_expect(a->scq, a->qp, 0xa2, IBV_WC_SUCCESS);
	ASSERT_EQ(ep_post(a, 0xa3, IBV_WR_SEND, 0, 100, 0, 0), 0);
	ep_expect(a->scq, a->qp, 0xa3, IBV_WC_SUCCESS);
	ASSERT_EQ(ep_qp_state(a->qp), IBV_QPS_RTS);
}

static void ud_len_check(struct ep *b)
{
	struct ibv_wc wc;

	wc = ep_expect(b->rcq, b->qp, 0xb1, IBV_WC_SUCCESS);
	ASSERT_EQ(wc.byte_len, GRH + 50);
	check_fill(b->buf + DST + GRH, 50, (uint8_t)(pattern_seed + 1));
	ASSERT_EQ(b->buf[DST + GRH + 50], 0);
	wc = ep_expect(b->rcq, b->qp, 0xb2, IBV_WC_SUCCESS);
	ASSERT_EQ(wc.byte_len, GRH + 100);
	ASSERT_EQ(wc.src_qp, b->peer.qpn);
	check_fill(b->buf + DST + 8192 + GRH, 100, pattern_seed);
	ep_expect_empty(b->rcq);
	ASSERT_EQ(ep_qp_state(b->qp), IBV_QPS_RTS);
	ep_expect_no_async(b->ctx);
}

static const struct scenario ud_len = {
	.type = IBV_QPT_UD,
	.prepare = ud_len_prepare,
	.run = ud_len_run,
	.check = ud_len_check,
};

TEST(ud_recv_too_small_same_process) { run_same(&ud_len); }
TEST(ud_recv_too_small_two_process) { run_two(&ud_len); }

/*
 * UD payload above the path MTU (4096 on lo, 1024 on a veth of MTU 1500:
 * 4097 is above both): the requester's own
 * LOC_LEN_ERR; the QP enters SQE (IBA 10.3.1), flushes the rest of its
 * send queue, and resumes with SQE -> RTS.
 */
static void ud_mtu_prepare(struct ep *b, struct hint *h)
{
	(void)h;
	ASSERT_EQ(ep_post_recv(b, 0xb1, DST, GRH + 8192), 0);
}

static void ud_mtu_run(struct ep *a, const struct hint *h)
{
	static const struct op ops[] = {
		{ 0xa1, IBV_WR_SEND, 4097, 0 },
		{ 0xa2, IBV_WR_SEND, 10, 0 },
	};

	(void)h;
	post_list(a, ops, 2, 0, 0);
	ep_expect(a->scq, a->qp, 0xa1, IBV_WC_LOC_LEN_ERR);
	ep_expect(a->scq, a->qp, 0xa2, IBV_WC_WR_FLUSH_ERR);
	ASSERT_EQ(ep_qp_state(a->qp), IBV_QPS_SQE);
	expect_post_send_flushed(a, 0xa3);
	modify_to(a->qp, IBV_QPS_RTS);
	ASSERT_EQ(ep_post(a, 0xa4, IBV_WR_SEND, 0, 20, 0, 0), 0);
	ep_expect(a->scq, a->qp, 0xa4, IBV_WC_SUCCESS);
	ep_expect_empty(a->scq);
}

static void ud_mtu_check(struct ep *b)
{
	struct ibv_wc wc = ep_expect(b->rcq, b->qp, 0xb1, IBV_WC_SUCCESS);

	ASSERT_EQ(wc.byte_len, GRH + 20);
	ASSERT_EQ(ep_qp_state(b->qp), IBV_QPS_RTS);
	ep_expect_empty(b->rcq);
	ep_expect_no_async(b->ctx);
}

static const struct scenario ud_mtu = {
	.type = IBV_QPT_UD,
	.prepare = ud_mtu_prepare,
	.run = ud_mtu_run,
	.check = ud_mtu_check,
};

TEST(ud_send_over_path_mtu_same_process) { run_same(&ud_mtu); }
TEST(ud_send_over_path_mtu_two_process) { run_two(&ud_mtu); }

/* In SQE only the send queue stopped: the QP still receives. */
TEST(ud_sqe_still_receives)
{
	struct ep_opts o;
	struct ibv_wc wc;
	struct ep a, b;

	ep_default_opts(&o, IBV_QPT_UD);
	ep_pair(&a, &o, &b, &o);
	ASSERT_EQ(ep_post(&a, 0xa1, IBV_WR_SEND, 0, 4097, 0, 0), 0);
	ep_expect(a.scq, a.qp, 0xa1, IBV_WC_LOC_LEN_ERR);
	ASSERT_EQ(ep_qp_state(a.qp), IBV_QPS_SQE);
	ASSERT_EQ(ep_post_recv(&a, 0xc1, 0, GRH + 64), 0);
	fill(b.buf, 64, pattern_seed);
	ASSERT_EQ(ep_post(&b, 0xb1, IBV_WR_SEND, 0, 64, 0, 0), 0);
	ep_expect(b.scq, b.qp, 0xb1, IBV_WC_SUCCESS);
	wc = ep_expect(a.rcq, a.qp, 0xc1, IBV_WC_SUCCESS);
	ASSERT_EQ(wc.byte_len, GRH + 64);
	check_fill(a.buf + GRH, 64, pattern_seed);
	ASSERT_EQ(ep_qp_state(a.qp), IBV_QPS_SQE);
	/* and SQE -> ERR flushes what it holds */
	ASSERT_EQ(ep_post_recv(&a, 0xc2, 0, GRH + 64), 0);
	modify_to(a.qp, IBV_QPS_ERR);
	ep_expect(a.rcq, a.qp, 0xc2, IBV_WC_WR_FLUSH_ERR);
	ep_destroy(&a);
	ep_destroy(&b);
}

/*
 * A destroyed QP: what it carried out stays in its CQ (libfabric's verbs
 * provider reads it after destroying an endpoint's QP, as rxe and siw
 * keep it), its flushed work requests leave (as on mlx5: nothing
 * happened, and a program may free what their wr_id names once the
 * destroy returned).  Every WQE of the second QP is accounted for.
 */
TEST(destroy_keeps_done_drops_flushed)
{
	struct ep_opts o;
	struct ibv_wc wc[8];
	struct ep a, b;

	ep_default_opts(&o, IBV_QPT_RC);
	ep_pair(&a, &o, &b, &o);
	ASSERT_EQ(ep_post_recv(&b, 0xc1, 0, 64), 0);
	ASSERT_EQ(ep_post_recv(&b, 0xc2, 0, 64), 0);
	ASSERT_EQ(ep_post_recv(&b, 0xc3, 0, 64), 0);
	fill(a.buf, 64, pattern_seed);
	ASSERT_EQ(ep_post(&a, 0xa1, IBV_WR_SEND, 0, 64, 0, 0), 0);
	ep_expect(a.scq, a.qp, 0xa1, IBV_WC_SUCCESS);
	modify_to(b.qp, IBV_QPS_ERR);
	ASSERT_EQ(ibv_destroy_qp(b.qp), 0);
	b.qp = NULL;
	ASSERT_EQ(ibv_poll_cq(b.rcq, 8, wc), 1);
	ASSERT_U64_EQ(wc[0].wr_id, 0xc1);
	ASSERT_EQ(wc[0].status, IBV_WC_SUCCESS);
	ASSERT_EQ(wc[0].byte_len, 64);
	check_fill(b.buf, 64, pattern_seed);
	ep_destroy(&a);
	ep_destroy(&b);
}

/* UD with the wrong Q_Key: dropped silently (IBA C10-15), the WQE stays */
TEST(ud_wrong_qkey_dropped)
{
	struct ibv_send_wr wr, *bad;
	struct ibv_sge sge;
	struct ep_opts o;
	struct ibv_wc wc;
	struct ep a, b;

	ep_default_opts(&o, IBV_QPT_UD);
	ep_pair(&a, &o, &b, &o);
	ASSERT_EQ(ep_post_recv(&b, 0xb1, DST, GRH + 64), 0);
	memset(&wr, 0, sizeof(wr));
	sge.addr = (uintptr_t)a.buf;
	sge.length = 32;
	sge.lkey = a.mr->lkey;
	wr.wr_id = 0xa1;
	wr.opcode = IBV_WR_SEND;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.wr.ud.ah = a.ah;
	wr.wr.ud.remote_qpn = a.peer.qpn;
	wr.wr.ud.remote_qkey = 0x22222222;
	ASSERT_EQ(ibv_post_send(a.qp, &wr, &bad), 0);
	ep_expect(a.scq, a.qp, 0xa1, IBV_WC_SUCCESS);
	ASSERT_EQ(ep_post(&a, 0xa2, IBV_WR_SEND, 0, 16, 0, 0), 0);
	ep_expect(a.scq, a.qp, 0xa2, IBV_WC_SUCCESS);
	wc = ep_expect(b.rcq, b.qp, 0xb1, IBV_WC_SUCCESS);
	ASSERT_EQ(wc.byte_len, GRH + 16);
	check_untouched(&b);
	ep_destroy(&a);
	ep_destroy(&b);
}

/* ------------------------------------------------------------------ */
/* LOC_PROT_ERR: the requester's own SGE                               */

enum bad_sge {
	BAD_LKEY,
	PAST_MR_END,
	BEFORE_MR,
	OTHER_PD,
	READ_NO_LOCAL_WRITE,
	ATOMIC_NO_LOCAL_WRITE,
};

static enum bad_sge bad_sge;

static void prot_prepare(struct ep *b, struct hint *h)
{
	uint64_t v = 1000;

	(void)h;
	ASSERT_EQ(ep_post_recv(b, 0xb1, DST, 4096), 0);
	memcpy(b->buf + DST + 8192, &v, 8);
	fill(b->buf + DST + 16384, 64, pattern_seed);
}

/* Post the bad WR and then a good one, as one list. */
static void prot_run(struct ep *a, const struct hint *h)
{
	struct ibv_pd *pd2 = NULL;
	struct ibv_mr *mr2 = NULL;
	uint64_t addr = (uintptr_t)a->buf, raddr = a->peer.addr;
	enum ibv_wr_opcode op = IBV_WR_SEND;
	uint32_t len = 16, lkey = a->mr->lkey;
	struct ibv_send_wr wr[2], *bad;
	struct ibv_sge sge[2];

	(void)h;
	switch (bad_sge) {
	case BAD_LKEY:
		lkey ^= KEY_XOR;
		break;
	case PAST_MR_END:
		addr += a->size - 8;
		len = 9;
		break;
	case BEFORE_MR:
		addr -= 1;
		break;
	case OTHER_PD:
		pd2 = ibv_alloc_pd(a->ctx);
		ASSERT_NOT_NULL(pd2);
		mr2 = ibv_reg_mr(pd2, a->buf, 4096, IBV_ACCESS_LOCAL_WRITE);
		ASSERT_NOT_NULL(mr2);
		lkey = mr2->lkey;
		break;
	case READ_NO_LOCAL_WRITE:
	case ATOMIC_NO_LOCAL_WRITE:
		/* an MR the HCA may read but not write */
		mr2 = ibv_reg_mr(a->pd, a->buf, 4096, 0);
		ASSERT_NOT_NULL(mr2);
		lkey = mr2->lkey;
		if (bad_sge == READ_NO_LOCAL_WRITE) {
			op = IBV_WR_RDMA_READ;
			len = 64;
			raddr += DST + 16384;
		} else {
			op = IBV_WR_ATOMIC_FETCH_AND_ADD;
			len = 8;
			raddr += DST + 8192;
		}
		break;
	}

	memset(wr, 0, sizeof(wr));
	sge[0].addr = addr;
	sge[0].length = len;
	sge[0].lkey = lkey;
	sge[1].addr = (uintptr_t)a->buf;
	sge[1].length = 8;
	sge[1].lkey = a->mr->lkey;
	wr[0].wr_id = 0xa1;
	wr[0].opcode = op;
	wr[0].sg_list = &sge[0];
	wr[0].num_sge = 1;
	wr[0].send_flags = IBV_SEND_SIGNALED;
	if (op == IBV_WR_ATOMIC_FETCH_AND_ADD) {
		wr[0].wr.atomic.remote_addr = raddr;
		wr[0].wr.atomic.rkey = a->peer.rkey;
		wr[0].wr.atomic.compare_add = 1;
	} else {
		wr[0].wr.rdma.remote_addr = raddr;
		wr[0].wr.rdma.rkey = a->peer.rkey;
	}
	wr[0].next = &wr[1];
	wr[1].wr_id = 0xa2;
	wr[1].opcode = IBV_WR_SEND;
	wr[1].sg_list = &sge[1];
	wr[1].num_sge = 1;
	wr[1].send_flags = IBV_SEND_SIGNALED;
	/* a READ's or atomic's L_Key fails when its response arrives
	 * (test_key_order.c): fenced, the SEND waits for that, and is not
	 * sent before (the net path sends on without a fence) */
	if (op != IBV_WR_SEND)
		wr[1].send_flags |= IBV_SEND_FENCE;
	if (a->type == IBV_QPT_UD) {
		int i;

		for (i = 0; i < 2; i++) {
			wr[i].wr.ud.ah = a->ah;
			wr[i].wr.ud.remote_qpn = a->peer.qpn;
			wr[i].wr.ud.remote_qkey = 0x11111111;
		}
	}
	memset(a->buf, 0, 4096);
	ASSERT_EQ(ibv_post_send(a->qp, wr, &bad), 0);
	ep_expect(a->scq, a->qp, 0xa1, IBV_WC_LOC_PROT_ERR);
	ep_expect(a->scq, a->qp, 0xa2, IBV_WC_WR_FLUSH_ERR);
	ep_expect_empty(a->scq);
	/* nothing was read into the buffer the HCA could not write */
	ASSERT_EQ(a->buf[0], 0);

	if (a->type == IBV_QPT_RC) {
		ep_wait_qp_state(a->qp, IBV_QPS_ERR);
		expect_post_send_flushed(a, 0xa3);
		expect_post_recv_flushed(a, 0xa4);
	} else {
		/* unreliable: SQE, then back to RTS and working */
		ASSERT_EQ(ep_qp_state(a->qp), IBV_QPS_SQE);
		expect_post_send_flushed(a, 0xa3);
		modify_to(a->qp, IBV_QPS_RTS);
		fill(a->buf, 32, pattern_seed);
		ASSERT_EQ(ep_post(a, 0xa5, IBV_WR_SEND, 0, 32, 0, 0), 0);
		ep_expect(a->scq, a->qp, 0xa5, IBV_WC_SUCCESS);
	}
	if (mr2)
		ASSERT_EQ(ibv_dereg_mr(mr2), 0);
	if (pd2)
		ASSERT_EQ(ibv_dealloc_pd(pd2), 0);
}

static void prot_check(struct ep *b)
{
	uint64_t v;

	if (b->type == IBV_QPT_RC) {
		/* nothing reached the responder but the atomic, which a NIC
		 * carries out before its result meets the local L_Key */
		check_untouched(b);
		memcpy(&v, b->buf + DST + 8192, 8);
		ASSERT_U64_EQ(v, bad_sge == ATOMIC_NO_LOCAL_WRITE ? 1001 :
								     1000);
	} else {
		struct ibv_wc wc = ep_expect(b->rcq, b->qp, 0xb1,
					     IBV_WC_SUCCESS);

		/* the message sent after SQE -> RTS, only it */
		ASSERT_EQ(wc.byte_len, 32 + (b->type == IBV_QPT_UD ? GRH : 0));
		check_fill(b->buf + DST + (b->type == IBV_QPT_UD ? GRH : 0),
			   32, pattern_seed);
		check_untouched(b);
	}
}

static void run_prot(enum ibv_qp_type type, enum bad_sge how, bool two)
{
	struct scenario s = {
		.type = type,
		.prepare = prot_prepare,
		.run = prot_run,
		.check = prot_check,
	};

	bad_sge = how;
	if (two)
		run_two(&s);
	else
		run_same(&s);
}

TEST(rc_bad_lkey_same_process) { run_prot(IBV_QPT_RC, BAD_LKEY, false); }
TEST(rc_bad_lkey_two_process) { run_prot(IBV_QPT_RC, BAD_LKEY, true); }
TEST(rc_sge_past_mr_end) { run_prot(IBV_QPT_RC, PAST_MR_END, false); }
TEST(rc_sge_before_mr) { run_prot(IBV_QPT_RC, BEFORE_MR, false); }
TEST(rc_lkey_of_other_pd) { run_prot(IBV_QPT_RC, OTHER_PD, false); }
TEST(rc_read_into_mr_without_local_write)
{
	run_prot(IBV_QPT_RC, READ_NO_LOCAL_WRITE, false);
}
TEST(rc_read_into_mr_without_local_write_two_process)
{
	run_prot(IBV_QPT_RC, READ_NO_LOCAL_WRITE, true);
}
TEST(rc_atomic_into_mr_without_local_write)
{
	run_prot(IBV_QPT_RC, ATOMIC_NO_LOCAL_WRITE, false);
}
TEST(uc_bad_lkey_goes_to_sqe) { run_prot(IBV_QPT_UC, BAD_LKEY, false); }
TEST(uc_bad_lkey_goes_to_sqe_two_process)
{
	run_prot(IBV_QPT_UC, BAD_LKEY, true);
}
TEST(ud_bad_lkey_goes_to_sqe) { run_prot(IBV_QPT_UD, BAD_LKEY, false); }
TEST(ud_sge_past_mr_end_goes_to_sqe)
{
	run_prot(IBV_QPT_UD, PAST_MR_END, true);
}

/* ------------------------------------------------------------------ */
/* REM_ACCESS_ERR                                                      */

/*
 * The responder checks the R_Key, the bounds, the MR's and the QP's
 * access rights and the PD; a violation is NAKed (requester
 * REM_ACCESS_ERR) and the responder's QP goes to ERR with the affiliated
 * event IBV_EVENT_QP_ACCESS_ERR (IBA 11.6.3.2).
 */
struct access_case {
	enum ibv_wr_opcode op;
	uint32_t len;
	uint64_t roff;		/* from the peer's buffer or X_MR */
	uint32_t rkey_xor;
	bool x_mr;		/* target a second MR, with */
	int mr_access;		/* this access, */
	bool other_pd;		/* registered in another PD */
	bool set_qp;		/* the responder QP's access flags: */
	int qp_access;
	bool in_bounds_first;	/* first the same op ending at its end */
	enum ibv_wc_status wqe_err;	/* receive 0xb1: 0 flushed, or so */
};

static const struct access_case *acase;
static struct ibv_pd *x_pd;
static struct ibv_mr *x_mr;

static void access_resp_opts(struct ep_opts *o)
{
	if (acase->set_qp) {
		o->qp_access_set = true;
		o->qp_access = acase->qp_access;
	}
}

static void access_prepare(struct ep *b, struct hint *h)
{
	ASSERT_EQ(ep_post_recv(b, 0xb1, DST, 4096), 0);
	fill(b->buf + DST, 4096, pattern_seed);
	fill(b->buf + XOFF, XLEN, pattern_seed);
	if (acase->x_mr) {
		struct ibv_pd *pd = b->pd;

		if (acase->other_pd) {
			x_pd = ibv_alloc_pd(b->ctx);
			ASSERT_NOT_NULL(x_pd);
			pd = x_pd;
		}
		x_mr = ibv_reg_mr(pd, b->buf + XOFF, XLEN, acase->mr_access);
		ASSERT_NOT_NULL(x_mr);
		h->addr = (uintptr_t)b->buf + XOFF;
		h->rkey = x_mr->rkey;
	}
}

static void access_run(struct ep *a, const struct hint *h)
{
	uint64_t base = h->rkey ? h->addr : a->peer.addr;
	uint32_t rkey = (h->rkey ? h->rkey : a->peer.rkey) ^ acase->rkey_xor;
	struct op ops[2] = {
		{ 0xa1, acase->op, acase->len, acase->roff },
		{ 0xa2, IBV_WR_SEND, 8, 0 },
	};

	if (acase->in_bounds_first) {
		struct op ok = { 0xa0, acase->op, acase->len,
				 acase->roff - 1 };

		/* a write of what is there already: the pattern stays */
		fill(a->buf, acase->len,
		     (uint8_t)(pattern_seed + (acase->roff - 1) * 7));
		post_list(a, &ok, 1, base, rkey);
		ep_expect(a->scq, a->qp, 0xa0, IBV_WC_SUCCESS);
	}
	post_list(a, ops, 2, base, rkey);
	ep_expect(a->scq, a->qp, 0xa1, IBV_WC_REM_ACCESS_ERR);
	ep_expect(a->scq, a->qp, 0xa2, IBV_WC_WR_FLUSH_ERR);
	ep_expect_empty(a->scq);
	ep_wait_qp_state(a->qp, IBV_QPS_ERR);
	expect_post_send_flushed(a, 0xa3);
}

static void access_check(struct ep *b)
{
	struct ibv_async_event ev;

	ep_wait_async(b->ctx, IBV_EVENT_QP_ACCESS_ERR, &ev);
	ASSERT(ev.element.qp == b->qp);
	ibv_ack_async_event(&ev);
	ep_wait_qp_state(b->qp, IBV_QPS_ERR);
	ep_expect(b->rcq, b->qp, 0xb1,
		  acase->wqe_err ? acase->wqe_err : IBV_WC_WR_FLUSH_ERR);
	ep_expect_empty(b->rcq);
	ep_expect_no_async(b->ctx);
	expect_post_recv_flushed(b, 0xb3);
	/* nothing was written */
	check_fill(b->buf + DST, 4096, pattern_seed);
	check_fill(b->buf + XOFF, XLEN, pattern_seed);
	if (x_mr)
		ASSERT_EQ(ibv_dereg_mr(x_mr), 0);
	if (x_pd)
		ASSERT_EQ(ibv_dealloc_pd(x_pd), 0);
	x_mr = NULL;
	x_pd = NULL;
}

static void run_access(const struct access_case *c, bool two)
{
	static const struct scenario s = {
		.type = IBV_QPT_RC,
		.resp_opts = access_resp_opts,
		.prepare = access_prepare,
		.run = access_run,
		.check = access_check,
	};

	acase = c;
	if (two)
		run_two(&s);
	else
		run_same(&s);
}

#define ACCESS_CASE(name, ...)                                             \
	static const struct access_case name##_case = { __VA_ARGS__ };    \
	TEST(name##_same_process) { run_access(&name##_case, false); }    \
	TEST(name##_two_process) { run_access(&name##_case, true); }

/* target a second MR of the responder's, with this access */
#define X_MR(acc) .x_mr = true, .mr_access = (acc)
/* the responder QP's access flags */
#define QP_ACC(acc) .set_qp = true, .qp_access = (acc)

#define LW	IBV_ACCESS_LOCAL_WRITE
#define RW	IBV_ACCESS_REMOTE_WRITE
#define RR	IBV_ACCESS_REMOTE_READ
#define RA	IBV_ACCESS_REMOTE_ATOMIC
#define FAA	IBV_WR_ATOMIC_FETCH_AND_ADD
#define CAS	IBV_WR_ATOMIC_CMP_AND_SWP
#define WRITE	IBV_WR_RDMA_WRITE
#define WIMM	IBV_WR_RDMA_WRITE_WITH_IMM
#define READ	IBV_WR_RDMA_READ

/* an R_Key nobody has */
ACCESS_CASE(rc_write_bad_rkey, .op = WRITE, .len = 64, .roff = DST,
	    .rkey_xor = KEY_XOR)
ACCESS_CASE(rc_read_bad_rkey, .op = READ, .len = 64, .roff = DST,
	    .rkey_xor = KEY_XOR)
ACCESS_CASE(rc_atomic_bad_rkey, .op = FAA, .len = 8, .roff = DST,
	    .rkey_xor = KEY_XOR)
/* the receive WQE that reports a write with immediate completes in error
 * (IBV_WC_LOC_ACCESS_ERR: the responder's side of the violation) */
ACCESS_CASE(rc_write_imm_bad_rkey, .op = WIMM, .len = 64, .roff = DST,
	    .rkey_xor = KEY_XOR, .wqe_err = IBV_WC_LOC_ACCESS_ERR)
/* one byte past the end of the MR (after one that ends exactly there) */
ACCESS_CASE(rc_write_one_byte_past_mr, .op = WRITE, .len = 16,
	    .roff = XLEN - 15, X_MR(LW | RW | RR | RA), .in_bounds_first = true)
ACCESS_CASE(rc_read_one_byte_past_mr, .op = READ, .len = 16,
	    .roff = XLEN - 15, X_MR(LW | RW | RR | RA), .in_bounds_first = true)
ACCESS_CASE(rc_atomic_past_mr, .op = FAA, .len = 8, .roff = XLEN,
	    X_MR(LW | RW | RR | RA))
/* the MR lacks the right */
ACCESS_CASE(rc_write_mr_without_remote_write, .op = WRITE, .len = 64,
	    X_MR(LW | RR | RA))
ACCESS_CASE(rc_read_mr_without_remote_read, .op = READ, .len = 64,
	    X_MR(LW | RW | RA))
ACCESS_CASE(rc_atomic_mr_without_remote_atomic, .op = CAS, .len = 8,
	    X_MR(LW | RW | RR))
/* the QP lacks the right (its qp_access_flags) */
ACCESS_CASE(rc_write_qp_without_remote_write, .op = WRITE, .len = 64,
	    .roff = DST, QP_ACC(RR | RA))
ACCESS_CASE(rc_write_imm_qp_without_remote_write, .op = WIMM, .len = 64,
	    .roff = DST, QP_ACC(RR | RA))
ACCESS_CASE(rc_read_qp_without_remote_read, .op = READ, .len = 64,
	    .roff = DST, QP_ACC(RW | RA))
ACCESS_CASE(rc_atomic_qp_without_remote_atomic, .op = FAA, .len = 8,
	    .roff = DST, QP_ACC(RW | RR))
/* an MR in another PD of the responder's */
ACCESS_CASE(rc_write_mr_of_other_pd, .op = WRITE, .len = 64,
	    X_MR(LW | RW | RR | RA), .other_pd = true)
ACCESS_CASE(rc_read_mr_of_other_pd, .op = READ, .len = 64,
	    X_MR(LW | RW | RR | RA), .other_pd = true)

/*
 * UC: a write the responder cannot accept is dropped silently (IBA
 * 9.9.3.1.4, class D); the requester, which gets no acknowledgement,
 * completes it successfully, and both QPs go on.
 */
static void uc_prepare(struct ep *b, struct hint *h)
{
	(void)h;
	ASSERT_EQ(ep_post_recv(b, 0xb1, DST + 8192, 64), 0);
}

static void uc_run(struct ep *a, const struct hint *h)
{
	static const struct op bad[] = {
		{ 0xa1, IBV_WR_RDMA_WRITE, 64, DST },
		{ 0xa2, IBV_WR_RDMA_WRITE_WITH_IMM, 64, DST },
	};
	static const struct op good[] = {
		{ 0xa3, IBV_WR_RDMA_WRITE, 64, DST },
		{ 0xa4, IBV_WR_RDMA_WRITE_WITH_IMM, 32, DST + 4096 },
	};

	(void)h;
	fill(a->buf, 64, pattern_seed);
	post_list(a, bad, 2, a->peer.addr, a->peer.rkey ^ KEY_XOR);
	ep_expect(a->scq, a->qp, 0xa1, IBV_WC_SUCCESS);
	ep_expect(a->scq, a->qp, 0xa2, IBV_WC_SUCCESS);
	ASSERT_EQ(ep_qp_state(a->qp), IBV_QPS_RTS);
	post_list(a, good, 2, a->peer.addr, a->peer.rkey);
	ep_expect(a->scq, a->qp, 0xa3, IBV_WC_SUCCESS);
	ep_expect(a->scq, a->qp, 0xa4, IBV_WC_SUCCESS);
	ASSERT_EQ(ep_qp_state(a->qp), IBV_QPS_RTS);
}

static void uc_check(struct ep *b)
{
	struct ibv_wc wc;

	/* the dropped write with immediate took no WQE: 0xb1 reports the
	 * good one */
	wc = ep_expect(b->rcq, b->qp, 0xb1, IBV_WC_SUCCESS);
	ASSERT_EQ(wc.opcode, IBV_WC_RECV_RDMA_WITH_IMM);
	ASSERT_EQ(wc.byte_len, 32);
	check_fill(b->buf + DST, 64, pattern_seed);
	check_fill(b->buf + DST + 4096, 32, pattern_seed);
	check_untouched(b);
}

static const struct scenario uc_bad_rkey = {
	.type = IBV_QPT_UC,
	.prepare = uc_prepare,
	.run = uc_run,
	.check = uc_check,
};

TEST(uc_write_bad_rkey_dropped_same_process) { run_same(&uc_bad_rkey); }
TEST(uc_write_bad_rkey_dropped_two_process) { run_two(&uc_bad_rkey); }

/* ------------------------------------------------------------------ */
/* REM_INV_REQ_ERR: a misaligned atomic                                */

/*
 * An atomic whose remote address is not 8-byte aligned is posted (as
 * mlx5 takes it; rxe refuses it at the post) and reaches the responder,
 * which NAKs it as an invalid request (IBA o9-21): REM_INV_REQ_ERR, and
 * the responder's QP goes to ERR with IBV_EVENT_QP_REQ_ERR; the target
 * words stay as they were.  Through ibv_post_send and through
 * ibv_wr_atomic_fetch_add alike (docs/conformance.md).
 */
static bool misaligned_wr_api;

static void misaligned_req_opts(struct ep_opts *o)
{
	if (misaligned_wr_api)
		o->send_ops_flags = IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD |
				    IBV_QP_EX_WITH_SEND;
}

static void misaligned_prepare(struct ep *b, struct hint *h)
{
	uint64_t v = 1000;

	(void)h;
	ASSERT_EQ(ep_post_recv(b, 0xb1, DST + 4096, 64), 0);
	memcpy(b->buf + DST, &v, 8);
	memcpy(b->buf + DST + 8, &v, 8);
}

static void misaligned_run(struct ep *a, const struct hint *h)
{
	(void)h;
	if (misaligned_wr_api) {
		struct ibv_qp_ex *x = a->qpx;

		ibv_wr_start(x);
		x->wr_id = 0xa1;
		x->wr_flags = IBV_SEND_SIGNALED;
		ibv_wr_atomic_fetch_add(x, a->peer.rkey,
					a->peer.addr + DST + 4, 1);
		ibv_wr_set_sge(x, a->mr->lkey, (uintptr_t)a->buf, 8);
		x->wr_id = 0xa2;
		ibv_wr_send(x);
		ibv_wr_set_sge(x, a->mr->lkey, (uintptr_t)a->buf, 8);
		ASSERT_EQ(ibv_wr_complete(x), 0);
	} else {
		struct op ops[2] = {
			{ 0xa1, IBV_WR_ATOMIC_FETCH_AND_ADD, 8, DST + 4 },
			{ 0xa2, IBV_WR_SEND, 8, 0 },
		};

		post_list(a, ops, 2, a->peer.addr, a->peer.rkey);
	}
	ep_expect(a->scq, a->qp, 0xa1, IBV_WC_REM_INV_REQ_ERR);
	ep_expect(a->scq, a->qp, 0xa2, IBV_WC_WR_FLUSH_ERR);
	ep_wait_qp_state(a->qp, IBV_QPS_ERR);
}

static void misaligned_check(struct ep *b)
{
	struct ibv_async_event ev;
	uint64_t v;

	ep_wait_async(b->ctx, IBV_EVENT_QP_REQ_ERR, &ev);
	ASSERT(ev.element.qp == b->qp);
	ibv_ack_async_event(&ev);
	ep_wait_qp_state(b->qp, IBV_QPS_ERR);
	ep_expect(b->rcq, b->qp, 0xb1, IBV_WC_WR_FLUSH_ERR);
	memcpy(&v, b->buf + DST, 8);
	ASSERT_U64_EQ(v, 1000);
	memcpy(&v, b->buf + DST + 8, 8);
	ASSERT_U64_EQ(v, 1000);
}

static const struct scenario misaligned = {
	.type = IBV_QPT_RC,
	.req_opts = misaligned_req_opts,
	.prepare = misaligned_prepare,
	.run = misaligned_run,
	.check = misaligned_check,
};

TEST(misaligned_atomic_rem_inv_req_same_process) { run_same(&misaligned); }
TEST(misaligned_atomic_rem_inv_req_two_process) { run_two(&misaligned); }
TEST(misaligned_atomic_wr_api_rem_inv_req)
{
	misaligned_wr_api = true;
	run_same(&misaligned);
}

/* ------------------------------------------------------------------ */
/* REM_OP_ERR: the responder's receive WQE is bad                      */

static bool recv_past_mr;

static void op_prepare(struct ep *b, struct hint *h)
{
	(void)h;
	if (recv_past_mr)
		post_recv_sge(b, 0xb1, (uintptr_t)b->buf + b->size - 8, 64,
			      b->mr->lkey);
	else
		post_recv_sge(b, 0xb1, (uintptr_t)b->buf + DST, 64,
			      b->mr->lkey ^ KEY_XOR);
	ASSERT_EQ(ep_post_recv(b, 0xb2, DST + 4096, 64), 0);
}

static void op_run(struct ep *a, const struct hint *h)
{
	static const struct op ops[] = {
		{ 0xa1, IBV_WR_SEND, 32, 0 },
		{ 0xa2, IBV_WR_SEND, 32, 0 },
	};

	(void)h;
	post_list(a, ops, 2, 0, 0);
	/* IBA 9.9.3.1.1 class A: NAK remote operational error */
	ep_expect(a->scq, a->qp, 0xa1, IBV_WC_REM_OP_ERR);
	ep_expect(a->scq, a->qp, 0xa2, IBV_WC_WR_FLUSH_ERR);
	ep_wait_qp_state(a->qp, IBV_QPS_ERR);
}

static void op_check(struct ep *b)
{
	ep_expect(b->rcq, b->qp, 0xb1, IBV_WC_LOC_PROT_ERR);
	ep_expect(b->rcq, b->qp, 0xb2, IBV_WC_WR_FLUSH_ERR);
	ep_wait_qp_state(b->qp, IBV_QPS_ERR);
	ep_expect_no_async(b->ctx);
	expect_post_recv_flushed(b, 0xb3);
}

static const struct scenario rem_op = {
	.type = IBV_QPT_RC,
	.prepare = op_prepare,
	.run = op_run,
	.check = op_check,
};

TEST(rc_recv_bad_lkey_same_process) { run_same(&rem_op); }
TEST(rc_recv_bad_lkey_two_process) { run_two(&rem_op); }
TEST(rc_recv_past_mr_two_process)
{
	recv_past_mr = true;
	run_two(&rem_op);
}

/* ------------------------------------------------------------------ */
/* RNR_RETRY_EXC_ERR                                                   */

/*
 * No receive posted: each try is answered with an RNR NAK; after
 * rnr_retry retries the requester completes RNR_RETRY_EXC_ERR and goes to
 * ERR.  An RNR NAK is no error for the responder: it stays in RTS and
 * sees nothing.
 */
static int rnr_retry;

static void rnr_req_opts(struct ep_opts *o)
{
	o->rnr_retry = rnr_retry;
}

static void rnr_run(struct ep *a, const struct hint *h)
{
	static const struct op ops[] = {
		{ 0xa1, IBV_WR_SEND, 16, 0 },
		{ 0xa2, IBV_WR_RDMA_WRITE, 16, DST },
	};

	(void)h;
	post_list(a, ops, 2, a->peer.addr, a->peer.rkey);
	ep_expect(a->scq, a->qp, 0xa1, IBV_WC_RNR_RETRY_EXC_ERR);
	ep_expect(a->scq, a->qp, 0xa2, IBV_WC_WR_FLUSH_ERR);
	ep_wait_qp_state(a->qp, IBV_QPS_ERR);
}

static void rnr_check(struct ep *b)
{
	check_untouched(b);
	ASSERT_EQ(b->buf[DST], 0);	/* the write behind never went */
}

static const struct scenario rnr = {
	.type = IBV_QPT_RC,
	.req_opts = rnr_req_opts,
	.run = rnr_run,
	.check = rnr_check,
};

TEST(rnr_retry_2_exceeded_same_process)
{
	rnr_retry = 2;
	run_same(&rnr);
}

TEST(rnr_retry_2_exceeded_two_process)
{
	rnr_retry = 2;
	run_two(&rnr);
}

TEST(rnr_retry_0_exceeded_at_once)
{
	rnr_retry = 0;
	run_same(&rnr);
}

/*
 * rnr_retry 7 retries for ever: the send waits (nothing completes, with
 * no receive posted) until the responder process posts one.
 */
static void rnr_forever_responder(int fd, void *arg)
{
	struct ep_opts o;
	struct ibv_wc wc;
	struct ep b;

	(void)arg;
	ep_default_opts(&o, IBV_QPT_RC);
	ep_open_remote(&b, &o, fd);
	duo_signal(fd, 'u');		/* in RTS (see below) */
	duo_expect(fd, 's');		/* the requester sent, and waits */
	ASSERT_EQ(ep_post_recv(&b, 0xb1, DST, 4096), 0);
	wc = ep_expect(b.rcq, b.qp, 0xb1, IBV_WC_SUCCESS);
	ASSERT_EQ(wc.byte_len, 100);
	ASSERT_EQ(wc.opcode, IBV_WC_RECV);
	check_fill(b.buf + DST, 100, pattern_seed);
	duo_expect(fd, 'd');
	check_untouched(&b);
	duo_signal(fd, 'c');
	ep_destroy(&b);
}

TEST(rnr_retry_7_waits_for_a_receive_two_process)
{
	struct ep_opts o;
	struct duo d;
	struct ep a;

	duo_fork(&d, rnr_forever_responder, NULL);
	ep_default_opts(&o, IBV_QPT_RC);
	o.rnr_retry = 7;
	ep_open_remote(&a, &o, d.fd);
	/* the SEND may otherwise reach the responder while its QP is
	 * still in RTR (between namespaces; on one host when the child is
	 * slow, as under ThreadSanitizer): a (legitimate) COMM_EST event,
	 * which check_untouched() would take for a fault */
	duo_expect(d.fd, 'u');
	fill(a.buf, 100, pattern_seed);
	ASSERT_EQ(ep_post(&a, 0xa1, IBV_WR_SEND, 0, 100, 0, 0), 0);
	/* no receive yet: it cannot have completed */
	ep_expect_empty(a.scq);
	ASSERT_EQ(ep_qp_state(a.qp), IBV_QPS_RTS);
	duo_signal(d.fd, 's');
	ep_expect(a.scq, a.qp, 0xa1, IBV_WC_SUCCESS);
	ASSERT_EQ(ep_qp_state(a.qp), IBV_QPS_RTS);
	duo_signal(d.fd, 'd');
	duo_expect(d.fd, 'c');
	duo_wait(&d);
	ep_destroy(&a);
}

TEST(rnr_retry_7_waits_for_a_receive_same_process)
{
	struct ep_opts o;
	struct ibv_wc wc;
	struct ep a, b;

	ep_default_opts(&o, IBV_QPT_RC);
	o.rnr_retry = 7;
	ep_pair(&a, &o, &b, &o);
	fill(a.buf, 100, pattern_seed);
	ASSERT_EQ(ep_post(&a, 0xa1, IBV_WR_SEND, 0, 100, 0, 0), 0);
	ASSERT_EQ(ep_post(&a, 0xa2, IBV_WR_SEND, 0, 50, 0, 0), 0);
	ep_expect_empty(a.scq);
	ASSERT_EQ(ep_post_recv(&b, 0xb1, DST, 4096), 0);
	ASSERT_EQ(ep_post_recv(&b, 0xb2, DST + 4096, 4096), 0);
	ep_expect(a.scq, a.qp, 0xa1, IBV_WC_SUCCESS);
	ep_expect(a.scq, a.qp, 0xa2, IBV_WC_SUCCESS);
	wc = ep_expect(b.rcq, b.qp, 0xb1, IBV_WC_SUCCESS);
	ASSERT_EQ(wc.byte_len, 100);
	wc = ep_expect(b.rcq, b.qp, 0xb2, IBV_WC_SUCCESS);
	ASSERT_EQ(wc.byte_len, 50);
	ASSERT_EQ(ep_qp_state(a.qp), IBV_QPS_RTS);
	check_untouched(&b);
	ep_destroy(&a);
	ep_destroy(&b);
}

/* ------------------------------------------------------------------ */
/* WR_FLUSH_ERR                                                        */

/*
 * Every outstanding WR, signaled or not, completes with WR_FLUSH_ERR in
 * the order posted when the QP enters ERR (IBA 10.8.3.3, 11.6.2).  The
 * send queue is held up by an RNR wait at its head.
 */
TEST(error_state_flushes_outstanding_in_order)
{
	static const struct op ops[] = {
		{ 0xa1, IBV_WR_SEND, 16, 0 },
		{ 0xa2, IBV_WR_RDMA_WRITE, 16, DST },
		{ 0xa3, IBV_WR_RDMA_READ, 16, DST },
		{ 0xa4, IBV_WR_ATOMIC_CMP_AND_SWP, 8, DST + 64 },
		{ 0xa5, IBV_WR_SEND_WITH_IMM, 0, 0 },
	};
	struct ibv_send_wr wr, *bad;
	struct ep_opts o;
	struct ep a, b;
	int i;

	ep_default_opts(&o, IBV_QPT_RC);
	o.rnr_retry = 7;
	ep_pair(&a, &o, &b, &o);
	for (i = 0; i < 3; i++)
		ASSERT_EQ(ep_post_recv(&a, 0xc1 + (uint64_t)i, 4096 * i, 64),
			  0);
	post_list(&a, ops, 5, a.peer.addr, a.peer.rkey);
	/* and one unsignaled */
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = 0xa6;
	wr.opcode = IBV_WR_SEND;
	ASSERT_EQ(ibv_post_send(a.qp, &wr, &bad), 0);
	ep_expect_empty(a.scq);
	ep_expect_empty(a.rcq);

	modify_to(a.qp, IBV_QPS_ERR);
	for (i = 0; i < 6; i++)
		ep_expect(a.scq, a.qp, 0xa1 + (uint64_t)i, IBV_WC_WR_FLUSH_ERR);
	for (i = 0; i < 3; i++)
		ep_expect(a.rcq, a.qp, 0xc1 + (uint64_t)i, IBV_WC_WR_FLUSH_ERR);
	ep_expect_empty(a.scq);
	ep_expect_empty(a.rcq);

	/* in ERR, new work completes flushed at once, in order */
	for (i = 0; i < 3; i++)
		ASSERT_EQ(ep_post(&a, 0xd1 + (uint64_t)i, IBV_WR_RDMA_WRITE, 0,
				  8, DST, 0), 0);
	for (i = 0; i < 3; i++)
		ep_expect(a.scq, a.qp, 0xd1 + (uint64_t)i, IBV_WC_WR_FLUSH_ERR);
	expect_post_recv_flushed(&a, 0xe1);

	/* nothing reached the peer; it is still fine */
	ASSERT_EQ(ep_post_recv(&b, 0xb1, DST, 64), 0);
	check_untouched(&b);
	ASSERT_EQ(b.buf[DST], 0);
	ep_destroy(&a);
	ep_destroy(&b);
}

/* The peer's flush of its own receive queue, in another process. */
static void flush_responder(int fd, void *arg)
{
	struct ep_opts o;
	struct ep b;
	int i;

	(void)arg;
	ep_default_opts(&o, IBV_QPT_RC);
	ep_open_remote(&b, &o, fd);
	for (i = 0; i < 4; i++)
		ASSERT_EQ(ep_post_recv(&b, 0xb1 + (uint64_t)i, 4096 * i, 64),
			  0);
	duo_signal(fd, 'p');
	ep_expect(b.rcq, b.qp, 0xb1, IBV_WC_SUCCESS);
	modify_to(b.qp, IBV_QPS_ERR);
	for (i = 1; i < 4; i++)
		ep_expect(b.rcq, b.qp, 0xb1 + (uint64_t)i, IBV_WC_WR_FLUSH_ERR);
	ep_expect_empty(b.rcq);
	duo_signal(fd, 'e');
	duo_expect(fd, 'd');
	ep_destroy(&b);
}

/* ... and what its partner sees afterwards: nobody answers any more */
TEST(peer_in_error_state_two_process)
{
	struct ep_opts o;
	struct duo d;
	struct ep a;

	duo_fork(&d, flush_responder, NULL);
	ep_default_opts(&o, IBV_QPT_RC);
	o.timeout = nobody_timeout();
	o.retry_cnt = 2;
	ep_open_remote(&a, &o, d.fd);
	duo_expect(d.fd, 'p');
	ASSERT_EQ(ep_post(&a, 0xa1, IBV_WR_SEND, 0, 16, 0, 0), 0);
	ep_expect(a.scq, a.qp, 0xa1, IBV_WC_SUCCESS);
	duo_expect(d.fd, 'e');
	ASSERT_EQ(ep_post(&a, 0xa2, IBV_WR_SEND, 0, 16, 0, 0), 0);
	ep_expect(a.scq, a.qp, 0xa2, IBV_WC_RETRY_EXC_ERR);
	ep_wait_qp_state(a.qp, IBV_QPS_ERR);
	duo_signal(d.fd, 'd');
	duo_wait(&d);
	ep_destroy(&a);
}

/* ------------------------------------------------------------------ */
/* RETRY_EXC_ERR                                                       */

/*
 * The responder's process dies: nothing answers, and after retry_cnt
 * retries of the local ACK timeout (timeout 8: about 1 ms; 14 across
 * namespaces, nobody_timeout) the requester completes RETRY_EXC_ERR and
 * goes to ERR (IBA 9.7.6.1.3).
 *
 * With a forked helper the dead process's sockets stay open (the helper
 * holds them), so no hang-up tells the requester: it must notice the
 * death from the transfer itself, also when the request moves no data or
 * meets an empty receive queue.
 */
struct victim_opts {
	bool helper;
	int nrecv;
	uint32_t rkey_xor;	/* the requester's: a bad R_Key */
};

static void victim(int fd, void *arg)
{
	const struct victim_opts *v = arg;
	struct ep_opts o;
	pid_t helper = 0;
	struct ep b;
	int i;

	ep_default_opts(&o, IBV_QPT_RC);
	ep_open_remote(&b, &o, fd);
	for (i = 0; i < v->nrecv; i++)
		ASSERT_EQ(ep_post_recv(&b, 0xb1 + (uint64_t)i, DST, 4096), 0);
	duo_signal(fd, 'u');
	/* the requester is connected to us: the helper gets that socket */
	duo_expect(fd, 'f');
	if (v->helper) {
		helper = fork();
		ASSERT_GE(helper, 0);
		if (helper == 0) {
			char c;

			/* until the test is over, at most a minute */
			alarm(60);
			while (read(fd, &c, 1) > 0)
				;
			_exit(0);
		}
	}
	xwrite(fd, &helper, sizeof(helper));
	for (;;)
		pause();
}

static void run_peer_killed(enum ibv_wr_opcode op, uint32_t len,
			    const struct victim_opts *v)
{
	struct op ops[2] = {
		{ 0xa2, op, len, DST + 64 },
		{ 0xa3, IBV_WR_RDMA_WRITE, 16, DST },
	};
	struct ep_opts o;
	pid_t helper;
	struct duo d;
	struct ep a;
	int status;

	duo_fork(&d, victim, (void *)v);
	ep_default_opts(&o, IBV_QPT_RC);
	o.timeout = nobody_timeout();
	o.retry_cnt = 2;
	o.rnr_retry = 7;
	ep_open_remote(&a, &o, d.fd);
	duo_expect(d.fd, 'u');
	/* it works while the peer lives */
	ASSERT_EQ(ep_post(&a, 0xa1, IBV_WR_RDMA_WRITE, 0, 16, 0, 0), 0);
	ep_expect(a.scq, a.qp, 0xa1, IBV_WC_SUCCESS);
	duo_signal(d.fd, 'f');
	xread(d.fd, &helper, sizeof(helper));

	ASSERT_EQ(kill(d.pid, SIGKILL), 0);
	ASSERT_EQ(waitpid(d.pid, &status, 0), d.pid);
	ASSERT(WIFSIGNALED(status));

	post_list(&a, ops, 2, a.peer.addr, a.peer.rkey ^ v->rkey_xor);
	ep_expect(a.scq, a.qp, 0xa2, IBV_WC_RETRY_EXC_ERR);
	ep_expect(a.scq, a.qp, 0xa3, IBV_WC_WR_FLUSH_ERR);
	ep_wait_qp_state(a.qp, IBV_QPS_ERR);
	expect_post_send_flushed(&a, 0xa4);
	if (helper > 0)
		kill(helper, SIGKILL);
	close(d.fd);
	ep_destroy(&a);
}

static const struct victim_opts v_plain = { .nrecv = 2 };
static const struct victim_opts v_helper = { .helper = true, .nrecv = 2 };
static const struct victim_opts v_helper_norecv = { .helper = true };

TEST(peer_killed_send_retry_exceeded)
{
	run_peer_killed(IBV_WR_SEND, 64, &v_plain);
}

TEST(peer_killed_write_retry_exceeded)
{
	run_peer_killed(IBV_WR_RDMA_WRITE, 64, &v_plain);
}

TEST(peer_killed_read_retry_exceeded)
{
	run_peer_killed(IBV_WR_RDMA_READ, 64, &v_plain);
}

TEST(peer_killed_atomic_retry_exceeded)
{
	run_peer_killed(IBV_WR_ATOMIC_FETCH_AND_ADD, 8, &v_plain);
}

TEST(peer_killed_socket_held_send)
{
	run_peer_killed(IBV_WR_SEND, 64, &v_helper);
}

TEST(peer_killed_socket_held_empty_send)
{
	run_peer_killed(IBV_WR_SEND, 0, &v_helper);
}

TEST(peer_killed_socket_held_empty_write)
{
	run_peer_killed(IBV_WR_RDMA_WRITE, 0, &v_helper);
}

/* no receive posted and rnr_retry 7: RNR until found dead, not forever */
TEST(peer_killed_socket_held_rnr)
{
	run_peer_killed(IBV_WR_SEND, 64, &v_helper_norecv);
}

TEST(peer_killed_socket_held_write)
{
	run_peer_killed(IBV_WR_RDMA_WRITE, 64, &v_helper);
}

TEST(peer_killed_socket_held_atomic)
{
	run_peer_killed(IBV_WR_ATOMIC_CMP_AND_SWP, 8, &v_helper);
}

/* not a remote access error: nobody is there to NAK it */
TEST(peer_killed_socket_held_bad_rkey)
{
	static const struct victim_opts v = {
		.helper = true, .nrecv = 2, .rkey_xor = KEY_XOR,
	};

	run_peer_killed(IBV_WR_RDMA_WRITE, 64, &v);
}

/* The destination QP was destroyed, or is in RESET or INIT: nothing
 * answers either. */
enum dest_fate { DEST_DESTROYED, DEST_RESET, DEST_INIT };

static void run_dest(enum dest_fate fate)
{
	static const struct op ops[] = {
		{ 0xa1, IBV_WR_RDMA_WRITE, 16, DST },
		{ 0xa2, IBV_WR_SEND, 16, 0 },
	};
	struct ibv_qp_attr qa;
	struct ep_opts o;
	struct ep a, b;

	ep_default_opts(&o, IBV_QPT_RC);
	o.timeout = 8;
	o.retry_cnt = 2;
	ep_pair(&a, &o, &b, &o);
	switch (fate) {
	case DEST_DESTROYED:
		ep_destroy(&b);
		break;
	case DEST_RESET:
		modify_to(b.qp, IBV_QPS_RESET);
		break;
	case DEST_INIT:
		modify_to(b.qp, IBV_QPS_RESET);
		memset(&qa, 0, sizeof(qa));
		qa.qp_state = IBV_QPS_INIT;
		qa.port_num = 1;
		qa.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
		ASSERT_EQ(ibv_modify_qp(b.qp, &qa,
					IBV_QP_STATE | IBV_QP_PKEY_INDEX |
						IBV_QP_PORT |
						IBV_QP_ACCESS_FLAGS),
			  0);
		ASSERT_EQ(ep_post_recv(&b, 0xb1, DST, 64), 0);
		break;
	}
	post_list(&a, ops, 2, a.peer.addr, a.peer.rkey);
	ep_expect(a.scq, a.qp, 0xa1, IBV_WC_RETRY_EXC_ERR);
	ep_expect(a.scq, a.qp, 0xa2, IBV_WC_WR_FLUSH_ERR);
	ep_wait_qp_state(a.qp, IBV_QPS_ERR);
	if (fate != DEST_DESTROYED) {
		ASSERT_EQ(ep_qp_state(b.qp), fate == DEST_RESET ?
						     IBV_QPS_RESET :
						     IBV_QPS_INIT);
		ep_expect_empty(b.rcq);
		ep_expect_no_async(b.ctx);
		ASSERT_EQ(b.buf[DST], 0);
		ep_destroy(&b);
	}
	ep_destroy(&a);
}

TEST(dest_qp_destroyed_retry_exceeded) { run_dest(DEST_DESTROYED); }
TEST(dest_qp_in_reset_retry_exceeded) { run_dest(DEST_RESET); }
TEST(dest_qp_in_init_retry_exceeded) { run_dest(DEST_INIT); }

/* A QPN that no QP of the peer process ever had. */
static void absent_responder(int fd, void *arg)
{
	struct ep_opts o;
	struct ep b;

	(void)arg;
	ep_default_opts(&o, IBV_QPT_RC);
	ep_create(&b, &o);
	/* pretend to be the QP next door */
	b.self.qpn ^= 1;
	xwrite(fd, &b.self, sizeof(b.self));
	duo_expect(fd, 'd');
	ep_destroy(&b);
}

TEST(dest_qpn_absent_two_process)
{
	struct ep_opts o;
	struct duo d;
	struct ep a;

	duo_fork(&d, absent_responder, NULL);
	ep_default_opts(&o, IBV_QPT_RC);
	o.timeout = nobody_timeout();
	o.retry_cnt = 2;
	ep_create(&a, &o);
	xread(d.fd, &a.peer, sizeof(a.peer));
	ep_connect(&a, &o);
	ASSERT_EQ(ep_post(&a, 0xa1, IBV_WR_SEND, 0, 16, 0, 0), 0);
	ep_expect(a.scq, a.qp, 0xa1, IBV_WC_RETRY_EXC_ERR);
	ep_wait_qp_state(a.qp, IBV_QPS_ERR);
	duo_signal(d.fd, 'd');
	duo_wait(&d);
	ep_destroy(&a);
}
