// SPDX-License-Identifier: MIT
/*
 * An operation the QP's transport does not have (IBA 9.2: READ and
 * atomics are RC's; WRITE and WRITE with immediate are RC's and UC's) is
 * posted, and completes in error, as mlx5 does (issue 12; its provider
 * builds the WQE without looking, the HCA completes it with a Local QP
 * Operation Error):
 *
 *   - ibv_post_send returns 0;
 *   - the WR completes with IBV_WC_LOC_QP_OP_ERR, its own opcode in the
 *     completion (IBV_WC_RDMA_READ, IBV_WC_COMP_SWAP, ...);
 *   - the UC or UD QP goes to SQE (IBA 10.3.1): the WRs behind it, and
 *     those posted in SQE, complete with IBV_WC_WR_FLUSH_ERR;
 *   - nothing leaves the requester: the peer's buffer, receive queue and
 *     QP are untouched, the requester's local buffer too, and on the net
 *     path the pcap of the process records no packet;
 *   - ibv_modify_qp(SQE -> RTS) resumes: a SEND then arrives whole.
 *
 * On the same-host path (one process) and on the net path (SOFTHCA_NET=1,
 * loopback TCP for UC, UDP for UD; SOFTHCA_PCAP is the evidence).
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "ep.h"

#define GRH	40
#define SRC	0u		/* a's SEND data */
#define LOCAL	(64u << 10)	/* a's READ / atomic target */
#define DST	(1u << 20)	/* b's receive buffer */
#define TGT	(2u << 20)	/* b's word / bytes the bad WR aims at */
#define LEN	64u
#define SEED	0x51

struct net {
	bool on;
	char dir[64];
	char pcap[128];
};

/* SOFTHCA_NET=1 and a pcap file of this process's packets. */
static void net_on(struct net *n)
{
	char pat[128];

	n->on = true;
	ASSERT_EQ(setenv("SOFTHCA_NET", "1", 1), 0);
	snprintf(n->dir, sizeof(n->dir), "/tmp/shca-qpop-XXXXXX");
	ASSERT_NOT_NULL(mkdtemp(n->dir));
	snprintf(pat, sizeof(pat), "%s/%%p.pcap", n->dir);
	ASSERT_EQ(setenv("SOFTHCA_PCAP", pat, 1), 0);
	snprintf(n->pcap, sizeof(n->pcap), "%s/%d.pcap", n->dir,
		 (int)getpid());
}

static void net_off(struct net *n)
{
	if (!n->on)
		return;
	unlink(n->pcap);
	rmdir(n->dir);
}

static void modify_to(struct ibv_qp *qp, enum ibv_qp_state state)
{
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_state = state;
	ASSERT_EQ(ibv_modify_qp(qp, &a, IBV_QP_STATE), 0);
}

static bool is_atomic(enum ibv_wr_opcode op)
{
	return op == IBV_WR_ATOMIC_CMP_AND_SWP ||
	       op == IBV_WR_ATOMIC_FETCH_AND_ADD;
}

/*
 * Post [op, SEND] as one list.  op's WR is filled as an application that
 * took the QP for an RC one would: remote address and R_Key of b's buffer
 * (on UD they overlay wr.ud.ah, which must not be looked at).
 */
static void post_bad_then_send(struct ep *a, enum ibv_wr_opcode op)
{
	struct ibv_send_wr wr[2], *bad = NULL;
	struct ibv_sge sge[2];

	memset(wr, 0, sizeof(wr));
	sge[0].addr = (uintptr_t)a->buf + LOCAL;
	sge[0].length = is_atomic(op) ? 8 : LEN;
	sge[0].lkey = a->mr->lkey;
	wr[0].wr_id = 0xa1;
	wr[0].opcode = op;
	wr[0].sg_list = &sge[0];
	wr[0].num_sge = 1;
	wr[0].send_flags = IBV_SEND_SIGNALED;
	wr[0].imm_data = 0x12345678;
	if (is_atomic(op)) {
		wr[0].wr.atomic.remote_addr = a->peer.addr + TGT;
		wr[0].wr.atomic.rkey = a->peer.rkey;
		wr[0].wr.atomic.compare_add = 1;
		wr[0].wr.atomic.swap = 2;
	} else {
		wr[0].wr.rdma.remote_addr = a->peer.addr + TGT;
		wr[0].wr.rdma.rkey = a->peer.rkey;
	}
	wr[0].next = &wr[1];

	sge[1].addr = (uintptr_t)a->buf + SRC;
	sge[1].length = 32;
	sge[1].lkey = a->mr->lkey;
	wr[1].wr_id = 0xa2;
	wr[1].opcode = IBV_WR_SEND;
	wr[1].sg_list = &sge[1];
	wr[1].num_sge = 1;
	wr[1].send_flags = IBV_SEND_SIGNALED;
	if (a->type == IBV_QPT_UD) {
		wr[1].wr.ud.ah = a->ah;
		wr[1].wr.ud.remote_qpn = a->peer.qpn;
		wr[1].wr.ud.remote_qkey = 0x11111111;
	}
	ASSERT_EQ(ibv_post_send(a->qp, wr, &bad), 0);
	ASSERT(bad == NULL);
}

static void run(enum ibv_qp_type type, enum ibv_wr_opcode op,
		enum ibv_wc_opcode wc_op, bool net)
{
	uint32_t grh = type == IBV_QPT_UD ? GRH : 0;
	uint64_t recs = 0;
	struct ep_opts o;
	struct ibv_wc wc;
	struct net n;
	struct ep a, b;
	int64_t at;

	memset(&n, 0, sizeof(n));
	if (net)
		net_on(&n);
	ep_default_opts(&o, type);
	ep_pair(&a, &o, &b, &o);
	memset(a.buf, EP_SENTINEL, a.size);
	memset(b.buf, EP_SENTINEL, b.size);
	ep_fill_pattern(a.buf + SRC, 32, SEED, 0);
	ASSERT_EQ(ep_post_recv(&b, 0xb1, DST, 4096), 0);
	if (net)
		recs = ep_pcap_records(n.pcap);

	post_bad_then_send(&a, op);
	wc = ep_expect(a.scq, a.qp, 0xa1, IBV_WC_LOC_QP_OP_ERR);
	ASSERT_EQ(wc.opcode, wc_op);
	ep_expect(a.scq, a.qp, 0xa2, IBV_WC_WR_FLUSH_ERR);
	ep_expect_empty(a.scq);
	ASSERT_EQ(ep_qp_state(a.qp), IBV_QPS_SQE);
	/* in SQE a new WR is flushed at once */
	ASSERT_EQ(ep_post(&a, 0xa3, IBV_WR_SEND, SRC, 32, 0, 0), 0);
	ep_expect(a.scq, a.qp, 0xa3, IBV_WC_WR_FLUSH_ERR);
	ep_expect_empty(a.scq);

	/* nothing left a, nothing reached b */
	if (net)
		ASSERT_EQ(ep_pcap_records(n.pcap), recs);
	ep_expect_empty(b.rcq);
	ep_expect_empty(b.scq);
	ASSERT_EQ(ep_qp_state(b.qp), IBV_QPS_RTS);
	ep_expect_no_async(b.ctx);
	at = ep_find_non_sentinel(b.buf, b.size);
	if (at >= 0)
		harness_fail(__FILE__, __LINE__,
			     "b's buffer written at %lld", (long long)at);
	at = ep_find_non_sentinel(a.buf + LOCAL, a.size - LOCAL);
	if (at >= 0)
		harness_fail(__FILE__, __LINE__,
			     "a's buffer written at %lld",
			     (long long)(LOCAL + at));

	/* SQE -> RTS: the QP sends again */
	modify_to(a.qp, IBV_QPS_RTS);
	ASSERT_EQ(ep_qp_state(a.qp), IBV_QPS_RTS);
	ASSERT_EQ(ep_post(&a, 0xa4, IBV_WR_SEND, SRC, 32, 0, 0), 0);
	ep_expect(a.scq, a.qp, 0xa4, IBV_WC_SUCCESS);
	wc = ep_expect(b.rcq, b.qp, 0xb1, IBV_WC_SUCCESS);
	ASSERT_EQ(wc.opcode, IBV_WC_RECV);
	ASSERT_EQ(wc.byte_len, 32 + grh);
	at = ep_find_pattern_diff(b.buf + DST + grh, 32, SEED, 0);
	ASSERT_EQ(at, -1);
	/* only that: the bytes after it and before the receive buffer */
	ASSERT_EQ(ep_find_non_sentinel(b.buf + DST + grh + 32,
				       b.size - DST - grh - 32), -1);
	ASSERT_EQ(ep_find_non_sentinel(b.buf, DST), -1);
	ep_expect_empty(b.rcq);
	ASSERT_EQ(ep_qp_state(b.qp), IBV_QPS_RTS);
	if (net) {
		uint64_t now = ep_pcap_records(n.pcap);

		/* the SEND went by the net path: it is in the pcap */
		printf("  net path: %llu packets in SOFTHCA_PCAP, %llu "
		       "before the SEND\n", (unsigned long long)now,
		       (unsigned long long)recs);
		ASSERT_GT(now, recs);
	}
	ep_destroy(&a);
	ep_destroy(&b);
	net_off(&n);
}

/* UD: WRITE, WRITE with immediate, READ and atomics are not UD's */
TEST(ud_write_loc_qp_op_err)
{
	run(IBV_QPT_UD, IBV_WR_RDMA_WRITE, IBV_WC_RDMA_WRITE, false);
}
TEST(ud_write_imm_loc_qp_op_err)
{
	run(IBV_QPT_UD, IBV_WR_RDMA_WRITE_WITH_IMM, IBV_WC_RDMA_WRITE, false);
}
TEST(ud_read_loc_qp_op_err)
{
	run(IBV_QPT_UD, IBV_WR_RDMA_READ, IBV_WC_RDMA_READ, false);
}
TEST(ud_cmp_swap_loc_qp_op_err)
{
	run(IBV_QPT_UD, IBV_WR_ATOMIC_CMP_AND_SWP, IBV_WC_COMP_SWAP, false);
}
TEST(ud_fetch_add_loc_qp_op_err)
{
	run(IBV_QPT_UD, IBV_WR_ATOMIC_FETCH_AND_ADD, IBV_WC_FETCH_ADD, false);
}

/* UC: READ and atomics are not UC's */
TEST(uc_read_loc_qp_op_err)
{
	run(IBV_QPT_UC, IBV_WR_RDMA_READ, IBV_WC_RDMA_READ, false);
}
TEST(uc_cmp_swap_loc_qp_op_err)
{
	run(IBV_QPT_UC, IBV_WR_ATOMIC_CMP_AND_SWP, IBV_WC_COMP_SWAP, false);
}
TEST(uc_fetch_add_loc_qp_op_err)
{
	run(IBV_QPT_UC, IBV_WR_ATOMIC_FETCH_AND_ADD, IBV_WC_FETCH_ADD, false);
}

/* the same on the net path */
TEST(net_ud_write_loc_qp_op_err)
{
	run(IBV_QPT_UD, IBV_WR_RDMA_WRITE, IBV_WC_RDMA_WRITE, true);
}
TEST(net_ud_read_loc_qp_op_err)
{
	run(IBV_QPT_UD, IBV_WR_RDMA_READ, IBV_WC_RDMA_READ, true);
}
TEST(net_ud_fetch_add_loc_qp_op_err)
{
	run(IBV_QPT_UD, IBV_WR_ATOMIC_FETCH_AND_ADD, IBV_WC_FETCH_ADD, true);
}
TEST(net_uc_read_loc_qp_op_err)
{
	run(IBV_QPT_UC, IBV_WR_RDMA_READ, IBV_WC_RDMA_READ, true);
}
TEST(net_uc_cmp_swap_loc_qp_op_err)
{
	run(IBV_QPT_UC, IBV_WR_ATOMIC_CMP_AND_SWP, IBV_WC_COMP_SWAP, true);
}
