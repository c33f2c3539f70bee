// SPDX-License-Identifier: MIT
/*
 * Tag matching on an SRQ (IBV_SRQT_TM), two processes: the child's RC QP
 * takes its receives from a TM SRQ, the parent sends it SENDs that start
 * with a struct ibv_tmh.  The child runs each scenario and tells the
 * parent what to send (tag, TMH opcode, length) over the socketpair:
 *
 *   eager_matched   tagged buffers (one with a mask) take EAGER messages
 *                   past their header: TM_RECV, TM_MATCH | TM_DATA_VALID,
 *                   the tag and app_ctx in ibv_wc_tm_info, the tag's
 *                   recv_wr_id, the bytes and nothing around them
 *   unexpected      a tag nobody posted goes whole to an ordinary WQE
 *                   (TM_RECV, no flags); matching pauses (a posted tag's
 *                   message is unexpected too, list operations say
 *                   TM_SYNC_REQ) until IBV_OPS_TM_SYNC catches up
 *   tag_del         a deleted tag matches nothing; deleting it again, or
 *                   a tag a message consumed, is IBV_WC_TM_ERR
 *   no_tag          NO_TAG: an ordinary WQE, whole, TM_NO_TAG, not counted
 *   plain           shorter than a TMH, or a FIN: IBV_WC_RECV
 *   too_long        longer than the tag's buffer: LOC_LEN_ERR on the tag
 *
 * Each on the mapped same-host path, CMA, and the net path (SOFTHCA_NET=1,
 * with TCP bytes seen).  Rendezvous (RNDV: TMH, RVH naming the parent's
 * buffer) is offloaded on every path; on the net path the child's QP
 * reads the parent's data with an RDMA READ of its own and sends the FIN
 * (net/transport.c), completing none of it to the child's send CQ:
 *
 *   rndv            a matched RNDV: the parent's data in the tag's
 *                   buffer, TM_MATCH then TM_DATA_VALID, a FIN (TMH FIN
 *                   and the RVH) received by the parent; a RVH longer
 *                   than the tag's buffer: TM_RNDV_INCOMPLETE with the
 *                   headers in the buffer, no FIN; an unexpected RNDV:
 *                   whole to an ordinary WQE
 *   rndv_bad_rkey   the RVH's R_Key is not the parent's: TM_MATCH, then
 *                   REM_ACCESS_ERR, the child's QP in error; the
 *                   parent's QP goes to error (the READ's responder)
 *   rndv_late_fin   the parent posted no receive for the FIN: it waits,
 *                   and comes before the child's next message once the
 *                   parent posts receives (to its QP, or, _srq, to
 *                   its SRQ)
 *   rndv_fin_bound  no receive, send queue 2 deep: 2 FINs held, the 3rd
 *                   lost (send_rnr_err, dropped_pkts); rndv_fin_drop: a
 *                   held FIN dropped, counted, in ERR (receives flushed);
 *                   _reset: in RESET, counted, nothing completes;
 *                   _destroy: with its QP
 *   rndv_mw         the RVH's R_Key a type 2 window's (REMOTE_READ): the
 *                   data and a FIN; rndv_mw_noread, rndv_mw_oob: a window
 *                   without REMOTE_READ, or shorter than the RVH's range,
 *                   as a bad R_Key
 *   rndv_bound_net  the net path: a QP carries out 8 rendezvous at once;
 *                   held in SQD, its READs wait and the 9th and 10th
 *                   RNDV are unexpected; in RTS again, 8 data and FINs
 *   rndv_flush_net  the net path: the QP goes to error while its READ
 *                   waits (SQD): the tag completes WR_FLUSH_ERR, its
 *                   buffer stays untouched
 *   rndv_exact_net  the net path, path MTU 1024: max_rndv_hdr_size 64, a
 *                   buffer filled exactly by 4 READ responses, one byte
 *                   more is TM_RNDV_INCOMPLETE
 *   rndv_lossy_net  rndv on the net path under SOFTHCA_FAULTS drops and
 *                   duplicates: the QP's READ and FIN are resent as any
 *                   WQE's packets, the data arrive whole, once
 *
 * The verbs' errors (create, post_srq_ops) and tm_caps are the
 * one-process case verbs_errors.
 */
#include <arpa/inet.h>
#include <endian.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <infiniband/tm_types.h>

#include "harness.h"
#include "ep.h"

#define BUF	65536u
#define SRC	0u
#define ORD	16384u	/* ordinary WQEs' buffers, 4096 each */
#define TAGB	32768u	/* tagged buffers, 4096 each */
#define TMH	16u
#define RVH	16u
#define RSRC	40960u	/* the parent's rendezvous data (up to 8192) */
#define FINB	49152u	/* the parent's FIN receive buffers, 64 each */
#define APPCTX	0x5eedf00du

/* What the child asks the parent to send; len 0 ends. */
struct cmd {
	uint64_t tag;
	uint32_t len;
	uint8_t op;
	uint8_t imm;		/* SEND_WITH_IMM, immediate htonl(seed) */
	uint8_t pad[2];
	uint32_t seed;
	uint32_t status;	/* reply: the send's completion */
	uint32_t rv_len;	/* RNDV: the RVH's length */
	uint32_t rv_flags;	/* RV_* */
	uint32_t reply;		/* RNDV: RV_FIN a FIN came; RV_BAD: the
				 * parent's QP state */
};

#define RV_FIN	1u	/* a FIN is owed to the parent */
#define RV_BAD	2u	/* the RVH's R_Key is not the parent's */
/* send_rndv_ext: */
#define RV_LATE	4u	/* no receive posted for the FIN (OP_LATE_RECV) */
#define RV_MW	8u	/* the R_Key a type 2 window's, REMOTE_READ */
#define RV_MW_NOREAD 16u /* ... a window without REMOTE_READ */
#define RV_MW_OOB 32u	/* ... a window of 1024 bytes, the RVH beyond */
#define RV_EXT	(RV_LATE | RV_MW | RV_MW_NOREAD | RV_MW_OOB)
/* the parent posts its receives now: the FIN, then len bytes of pattern
 * seed from the child */
#define OP_LATE_RECV 0xe0u
/* the parent, its send queue FIN_SQ deep, posts FIN_SQ + 1 receives:
 * FIN_SQ FINs (rv_len the first RNDV's RVH length, each next one + 1),
 * then len bytes of pattern seed from the child; its counters show the
 * one FIN lost */
#define OP_BOUND_RECV 0xe1u
/* the parent moves its QP to ERR: the FIN it held is dropped, counted,
 * and a receive posted then is flushed */
#define OP_FIN_DROP 0xe2u
#define FIN_SQ	2u	/* the parent's max_send_wr in K_RNDV_FIN_* */
#define FIN_TAG	0x300u	/* the tags of K_RNDV_FIN_* */
#define FIN_LEN	1500u	/* ... their RVH lengths: FIN_LEN + i */

struct tmwc {
	uint64_t wr_id;
	enum ibv_wc_status status;
	enum ibv_wc_opcode opcode;
	unsigned int flags;
	__be32 imm;
	uint32_t byte_len;
	struct ibv_wc_tm_info tm;
};

/* The path MTU both sides use (0: ep's default), set before the fork. */
static enum ibv_mtu g_mtu;

static void opts(struct ep_opts *o)
{
	ep_default_opts(o, IBV_QPT_RC);
	o->buf_size = BUF;
	o->wc_flags = IBV_WC_EX_WITH_TM_INFO | IBV_WC_STANDARD_FLAGS;
}

/* ------------------------------------------------------------------ */
/* The child: the TM SRQ                                               */

struct tm_side {
	struct ep b;
	struct ibv_srq *srq;
	int fd;
	uint32_t unexp;		/* unexpected messages seen */
};

static void to_init(struct ibv_qp *qp)
{
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
	ASSERT_EQ(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
				IBV_QP_PORT | IBV_QP_ACCESS_FLAGS), 0);
}

static struct ibv_srq *tm_srq(struct ep *e, uint32_t tags)
{
	struct ibv_srq_init_attr_ex sa;

	memset(&sa, 0, sizeof(sa));
	sa.attr.max_wr = 16;
	sa.attr.max_sge = 1;
	sa.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD |
		       IBV_SRQ_INIT_ATTR_CQ | IBV_SRQ_INIT_ATTR_TM;
	sa.srq_type = IBV_SRQT_TM;
	sa.pd = e->pd;
	sa.cq = e->rcq;
	sa.tm_cap.max_num_tags = tags;
	sa.tm_cap.max_ops = 16;
	return ibv_create_srq_ex(e->ctx, &sa);
}

/* b's QP again, on a TM SRQ; then connected to the parent. */
static void side_open(struct tm_side *s, int fd)
{
	struct ibv_qp_init_attr ia;
	struct ep_opts o;

	s->fd = fd;
	s->unexp = 0;
	opts(&o);
	o.mtu = g_mtu;
	ep_create(&s->b, &o);
	s->srq = tm_srq(&s->b, 16);
	ASSERT_NOT_NULL(s->srq);
	ASSERT_EQ(ibv_destroy_qp(s->b.qp), 0);
	memset(&ia, 0, sizeof(ia));
	ia.send_cq = s->b.scq;
	ia.recv_cq = s->b.rcq;
	ia.srq = s->srq;
	ia.qp_type = IBV_QPT_RC;
	ia.cap.max_send_wr = 8;
	ia.cap.max_send_sge = 1;
	s->b.qp = ibv_create_qp(s->b.pd, &ia);
	ASSERT_NOT_NULL(s->b.qp);
	s->b.self.qpn = s->b.qp->qp_num;
	to_init(s->b.qp);
	ep_exchange(fd, &s->b.self, &s->b.peer);
	ep_connect(&s->b, &o);
}

static void side_close(struct tm_side *s)
{
	struct cmd c;

	memset(&c, 0, sizeof(c));
	xwrite(s->fd, &c, sizeof(c));
	ASSERT_EQ(ibv_destroy_qp(s->b.qp), 0);
	s->b.qp = NULL;
	ASSERT_EQ(ibv_destroy_srq(s->srq), 0);
	ep_destroy(&s->b);
}

/* One completion of the receive CQ (fails after ~10 s). */
static struct tmwc poll_one(struct tm_side *s)
{
	struct ibv_poll_cq_attr pa = { 0 };
	struct ibv_cq_ex *cq = s->b.rcqx;
	struct timespec ts = { 0, 1000000 };
	struct tmwc w;
	int i, ret = ENOENT;

	for (i = 0; i < 10000 && ret == ENOENT; i++) {
		ret = ibv_start_poll(cq, &pa);
		if (ret == ENOENT)
			nanosleep(&ts, NULL);
	}
	ASSERT_EQ(ret, 0);
	w.wr_id = cq->wr_id;
	w.status = cq->status;
	w.opcode = ibv_wc_read_opcode(cq);
	w.flags = ibv_wc_read_wc_flags(cq);
	w.byte_len = ibv_wc_read_byte_len(cq);
	w.imm = (w.flags & IBV_WC_WITH_IMM) ? ibv_wc_read_imm_data(cq) : 0;
	ibv_wc_read_tm_info(cq, &w.tm);
	ibv_end_poll(cq);
	return w;
}

static void expect_empty(struct tm_side *s)
{
	struct ibv_poll_cq_attr pa = { 0 };

	ASSERT_EQ(ibv_start_poll(s->b.rcqx, &pa), ENOENT);
}

/* The parent sends; its completion's status. */
static enum ibv_wc_status ask_imm(struct tm_side *s, uint8_t op, uint64_t tag,
				  uint32_t len, uint32_t seed, bool imm)
{
	struct cmd c;

	memset(&c, 0, sizeof(c));
	c.op = op;
	c.imm = imm;
	c.tag = tag;
	c.len = len;
	c.seed = seed;
	xwrite(s->fd, &c, sizeof(c));
	xread(s->fd, &c, sizeof(c));
	return (enum ibv_wc_status)c.status;
}

/* ... which must be SUCCESS. */
static void ask(struct tm_side *s, uint8_t op, uint64_t tag, uint32_t len,
		uint32_t seed)
{
	ASSERT_EQ(ask_imm(s, op, tag, len, seed, false), IBV_WC_SUCCESS);
}

static uint32_t add_tag(struct tm_side *s, uint64_t tag, uint64_t mask,
			uint32_t slot, uint64_t wr_id, bool sync_req)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)s->b.buf + TAGB + slot * 4096u,
		.length = 4096,
		.lkey = s->b.mr->lkey,
	};
	struct ibv_ops_wr wr, *bad = NULL;
	struct tmwc w;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = 0xadd0 + slot;
	wr.opcode = IBV_WR_TAG_ADD;
	wr.flags = IBV_OPS_SIGNALED;
	wr.tm.add.recv_wr_id = wr_id;
	wr.tm.add.sg_list = &sge;
	wr.tm.add.num_sge = 1;
	wr.tm.add.tag = tag;
	wr.tm.add.mask = mask;
	memset(s->b.buf + TAGB + slot * 4096u, EP_SENTINEL, 4096);
	ASSERT_EQ(ibv_post_srq_ops(s->srq, &wr, &bad), 0);
	ASSERT_NE(wr.tm.handle, 0);
	w = poll_one(s);
	ASSERT_EQ(w.status, IBV_WC_SUCCESS);
	ASSERT_EQ(w.opcode, IBV_WC_TM_ADD);
	ASSERT_U64_EQ(w.wr_id, 0xadd0 + slot);
	ASSERT_EQ(!!(w.flags & IBV_WC_TM_SYNC_REQ), sync_req);
	return wr.tm.handle;
}

/* DEL of handle: its completion's status. */
static enum ibv_wc_status del_tag(struct tm_side *s, uint32_t handle)
{
	struct ibv_ops_wr wr, *bad = NULL;
	struct tmwc w;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = 0xde1;
	wr.opcode = IBV_WR_TAG_DEL;
	wr.flags = IBV_OPS_SIGNALED;
	wr.tm.handle = handle;
	ASSERT_EQ(ibv_post_srq_ops(s->srq, &wr, &bad), 0);
	w = poll_one(s);
	ASSERT_EQ(w.opcode, IBV_WC_TM_DEL);
	ASSERT_U64_EQ(w.wr_id, 0xde1);
	return w.status;
}

static void sync_count(struct tm_side *s)
{
	struct ibv_ops_wr wr, *bad = NULL;
	struct tmwc w;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = 0x5c;
	wr.opcode = IBV_WR_TAG_SYNC;
	wr.flags = IBV_OPS_SIGNALED | IBV_OPS_TM_SYNC;
	wr.tm.unexpected_cnt = s->unexp;
	ASSERT_EQ(ibv_post_srq_ops(s->srq, &wr, &bad), 0);
	w = poll_one(s);
	ASSERT_EQ(w.status, IBV_WC_SUCCESS);
	ASSERT_EQ(w.opcode, IBV_WC_TM_SYNC);
	ASSERT_EQ(w.flags & IBV_WC_TM_SYNC_REQ, 0);
}

static void post_ordinary(struct tm_side *s, uint32_t slot)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)s->b.buf + ORD + slot * 4096u,
		.length = 4096,
		.lkey = s->b.mr->lkey,
	};
	struct ibv_recv_wr wr = { .wr_id = 0x0d0 + slot, .sg_list = &sge,
				  .num_sge = 1 };
	struct ibv_recv_wr *bad;

	memset(s->b.buf + ORD + slot * 4096u, EP_SENTINEL, 4096);
	ASSERT_EQ(ibv_post_srq_recv(s->srq, &wr, &bad), 0);
}

/* A matched message: its completion, and the payload past the TMH in
 * the tag's slot with the sentinel after it. */
static void expect_matched(struct tm_side *s, uint64_t tag, uint32_t slot,
			   uint64_t wr_id, uint32_t len, uint32_t seed)
{
	const uint8_t *d = s->b.buf + TAGB + slot * 4096u;
	struct tmwc w = poll_one(s);

	ASSERT_EQ(w.status, IBV_WC_SUCCESS);
	ASSERT_EQ(w.opcode, IBV_WC_TM_RECV);
	/* exactly: nothing of the tag left in the flags */
	ASSERT_EQ(w.flags, IBV_WC_TM_MATCH | IBV_WC_TM_DATA_VALID);
	ASSERT_U64_EQ(w.wr_id, wr_id);
	ASSERT_U64_EQ(w.tm.tag, tag);
	ASSERT_EQ(w.tm.priv, APPCTX);
	ASSERT_EQ(w.byte_len, len - TMH);
	ASSERT_EQ(ep_find_pattern_diff(d, len - TMH, seed, TMH), -1);
	ASSERT_EQ(ep_find_non_sentinel(d + len - TMH, 4096 - (len - TMH)),
		  -1);
}

/* A message that went whole to ordinary WQE slot: opcode, no TM flags,
 * the TMH and the payload. */
static void expect_ordinary(struct tm_side *s, uint32_t slot,
			    enum ibv_wc_opcode op, uint8_t tmh_op,
			    uint64_t tag, uint32_t len, uint32_t seed)
{
	const uint8_t *d = s->b.buf + ORD + slot * 4096u;
	struct tmwc w = poll_one(s);
	uint64_t be;

	ASSERT_EQ(w.status, IBV_WC_SUCCESS);
	ASSERT_EQ(w.opcode, op);
	ASSERT_EQ(w.flags, 0);
	ASSERT_U64_EQ(w.wr_id, 0x0d0 + slot);
	ASSERT_U64_EQ(w.tm.tag, 0);
	ASSERT_EQ(w.byte_len, len);
	if (len >= TMH) {
		ASSERT_EQ(d[0], tmh_op);
		memcpy(&be, d + 8, 8);
		ASSERT_U64_EQ(be64toh(be), tag);
		ASSERT_EQ(ep_find_pattern_diff(d + TMH, len - TMH, seed, TMH),
			  -1);
	}
	ASSERT_EQ(ep_find_non_sentinel(d + len, 4096 - len), -1);
	if (op == IBV_WC_TM_RECV)
		s->unexp++;
}

/* ------------------------------------------------------------------ */
/* Scenarios (the child)                                               */

enum kase {
	K_MATCHED, K_UNEXPECTED, K_DEL, K_NO_TAG, K_PLAIN, K_TOO_LONG,
	K_RNDV, K_RNDV_BAD_RKEY, K_RNDV_NET, K_RNDV_BOUND, K_RNDV_FLUSH,
	K_RNDV_LATE_FIN, K_RNDV_LATE_FIN_SRQ, K_RNDV_MW, K_RNDV_MW_NOREAD,
	K_RNDV_MW_OOB, K_RNDV_FIN_BOUND, K_RNDV_FIN_DROP,
	K_RNDV_FIN_DROP_RESET, K_RNDV_FIN_DROP_DESTROY
};

/* How the parent's QP lets go of a FIN it holds (OP_FIN_DROP's cmd.len) */
enum fin_drop_how { DROP_ERR = 1, DROP_RESET, DROP_DESTROY };

/* The cases where the parent's QP holds FINs (its send queue FIN_SQ
 * deep, its counters looked at) */
static bool holds_fins(enum kase k)
{
	return k == K_RNDV_FIN_BOUND || k == K_RNDV_FIN_DROP ||
	       k == K_RNDV_FIN_DROP_RESET || k == K_RNDV_FIN_DROP_DESTROY;
}

/* A command for the parent (cmd.op): wait for len FINs, reply their
 * count in reply. */
#define CMD_FINS	0xf0

/* The child's send CQ stays empty: the READ and FIN its QP makes for a
 * rendezvous complete to no one (the child posts no send itself). */
static void expect_no_send_wc(struct tm_side *s)
{
	struct ibv_wc wc;

	ASSERT_EQ(ibv_poll_cq(s->b.scq, 1, &wc), 0);
}

static enum ibv_qp_state qp_state(struct ibv_qp *qp)
{
	struct ibv_qp_init_attr ia;
	struct ibv_qp_attr qa;

	ASSERT_EQ(ibv_query_qp(qp, &qa, IBV_QP_STATE, &ia), 0);
	return qa.qp_state;
}

static void sc_matched(struct tm_side *s)
{
	struct tmwc w;

	add_tag(s, 1, ~0ull, 0, 0x71, false);
	add_tag(s, 2, ~0ull, 1, 0x72, false);
	/* any tag 0x77665544332211xx (every byte of the tag reported) */
	add_tag(s, 0x7766554433221100ull, 0xffffffffffffff00ull, 2, 0x73,
		false);
	add_tag(s, 2, ~0ull, 3, 0x74, false);	/* after slot 1's */
	ask(s, IBV_TMH_EAGER, 2, 1000, 11);
	expect_matched(s, 2, 1, 0x72, 1000, 11);
	ask(s, IBV_TMH_EAGER, 0x77665544332211abull, 4096 + TMH, 12);
	expect_matched(s, 0x77665544332211abull, 2, 0x73, 4096 + TMH, 12);
	ask(s, IBV_TMH_EAGER, 2, TMH, 13);	/* empty payload */
	expect_matched(s, 2, 3, 0x74, TMH, 13);
	/* with immediate data: it and the TM flags */
	ASSERT_EQ(ask_imm(s, IBV_TMH_EAGER, 1, 64, 14, true), IBV_WC_SUCCESS);
	w = poll_one(s);
	ASSERT_EQ(w.status, IBV_WC_SUCCESS);
	ASSERT_EQ(w.opcode, IBV_WC_TM_RECV);
	ASSERT_EQ(w.flags, IBV_WC_WITH_IMM | IBV_WC_TM_MATCH |
				   IBV_WC_TM_DATA_VALID);
	ASSERT_U64_EQ(w.wr_id, 0x71);
	ASSERT_U64_EQ(w.tm.tag, 1);
	ASSERT_EQ(w.imm, htonl(14));
	ASSERT_EQ(w.byte_len, 64 - TMH);
	expect_empty(s);
}

/* A matched message longer than its tag's buffer: the tag completes with
 * LOC_LEN_ERR and is used up, the requester sees an invalid request. */
static void sc_too_long(struct tm_side *s)
{
	uint32_t h = add_tag(s, 9, ~0ull, 0, 0x79, false);
	struct tmwc w;

	ASSERT_EQ(ask_imm(s, IBV_TMH_EAGER, 9, 4096 + TMH + 1, 61, false),
		  IBV_WC_REM_INV_REQ_ERR);
	w = poll_one(s);
	ASSERT_EQ(w.status, IBV_WC_LOC_LEN_ERR);
	ASSERT_U64_EQ(w.wr_id, 0x79);
	ASSERT_EQ(ep_find_non_sentinel(s->b.buf + TAGB, 4096), -1);
	ASSERT_EQ(del_tag(s, h), IBV_WC_TM_ERR);
	expect_empty(s);
}

static void sc_unexpected(struct tm_side *s)
{
	uint32_t h;

	post_ordinary(s, 0);
	post_ordinary(s, 1);
	h = add_tag(s, 5, ~0ull, 0, 0x75, false);
	ask(s, IBV_TMH_EAGER, 9, 300, 21);
	expect_ordinary(s, 0, IBV_WC_TM_RECV, IBV_TMH_EAGER, 9, 300, 21);
	/* out of sync: tag 5 is posted, yet its message is unexpected */
	ask(s, IBV_TMH_EAGER, 5, 200, 22);
	expect_ordinary(s, 1, IBV_WC_TM_RECV, IBV_TMH_EAGER, 5, 200, 22);
	ASSERT_EQ(ep_find_non_sentinel(s->b.buf + TAGB, 4096), -1);
	add_tag(s, 6, ~0ull, 1, 0x76, true);	/* still out of sync */
	sync_count(s);
	ask(s, IBV_TMH_EAGER, 5, 200, 23);
	expect_matched(s, 5, 0, 0x75, 200, 23);
	/* a consumed tag cannot be deleted */
	ASSERT_EQ(del_tag(s, h), IBV_WC_TM_ERR);
	ask(s, IBV_TMH_EAGER, 6, 100, 24);
	expect_matched(s, 6, 1, 0x76, 100, 24);
	expect_empty(s);
}

static void sc_del(struct tm_side *s)
{
	uint32_t h;

	h = add_tag(s, 7, ~0ull, 0, 0x77, false);
	ASSERT_EQ(del_tag(s, h), IBV_WC_SUCCESS);
	ASSERT_EQ(del_tag(s, h), IBV_WC_TM_ERR);
	/* the slot again, for another tag: the old handle is stale */
	add_tag(s, 8, ~0ull, 0, 0x78, false);
	ASSERT_EQ(del_tag(s, h), IBV_WC_TM_ERR);
	post_ordinary(s, 0);
	ask(s, IBV_TMH_EAGER, 7, 128, 31);
	expect_ordinary(s, 0, IBV_WC_TM_RECV, IBV_TMH_EAGER, 7, 128, 31);
	sync_count(s);
	ask(s, IBV_TMH_EAGER, 8, 128, 32);
	expect_matched(s, 8, 0, 0x78, 128, 32);
	expect_empty(s);
}

static void sc_no_tag(struct tm_side *s)
{
	add_tag(s, 3, ~0ull, 0, 0x73, false);
	post_ordinary(s, 0);
	/* NO_TAG with a posted tag's value: not matched, not counted */
	ask(s, IBV_TMH_NO_TAG, 3, 500, 41);
	expect_ordinary(s, 0, IBV_WC_TM_NO_TAG, IBV_TMH_NO_TAG, 3, 500, 41);
	add_tag(s, 4, ~0ull, 1, 0x74, false);	/* no SYNC_REQ */
	ask(s, IBV_TMH_EAGER, 3, 64, 42);
	expect_matched(s, 3, 0, 0x73, 64, 42);
	expect_empty(s);
}

static void sc_plain(struct tm_side *s)
{
	struct tmwc w;

	add_tag(s, 0, 0, 0, 0x70, false);	/* would match any tag */
	post_ordinary(s, 0);
	post_ordinary(s, 1);
	ask(s, IBV_TMH_EAGER, 0, TMH - 1, 51);	/* no room for a TMH */
	w = poll_one(s);
	ASSERT_EQ(w.status, IBV_WC_SUCCESS);
	ASSERT_EQ(w.opcode, IBV_WC_RECV);
	ASSERT_U64_EQ(w.wr_id, 0x0d0);
	ASSERT_EQ(w.byte_len, TMH - 1);
	ask(s, IBV_TMH_FIN, 0, 100, 52);
	w = poll_one(s);
	ASSERT_EQ(w.opcode, IBV_WC_RECV);
	ASSERT_U64_EQ(w.wr_id, 0x0d1);
	ASSERT_EQ(w.flags & (IBV_WC_TM_MATCH | IBV_WC_TM_SYNC_REQ), 0);
	ASSERT_EQ(ep_find_non_sentinel(s->b.buf + TAGB, 4096), -1);
	expect_empty(s);
}

/* The parent sends a RNDV request of len bytes for rv_len of its data
 * (pattern seed); its completion's status (and *reply). */
static enum ibv_wc_status ask_rndv(struct tm_side *s, uint64_t tag,
				   uint32_t len, uint32_t rv_len,
				   uint32_t seed, uint32_t flags,
				   uint32_t *reply)
{
	struct cmd c;

	memset(&c, 0, sizeof(c));
	c.op = IBV_TMH_RNDV;
	c.tag = tag;
	c.len = len;
	c.seed = seed;
	c.rv_len = rv_len;
	c.rv_flags = flags;
	xwrite(s->fd, &c, sizeof(c));
	xread(s->fd, &c, sizeof(c));
	*reply = c.reply;
	return (enum ibv_wc_status)c.status;
}

/* A matched RNDV's first completion: the match, no data yet. */
static void expect_rndv_match(struct tm_side *s, uint64_t tag, uint64_t wr_id)
{
	struct tmwc w = poll_one(s);

	ASSERT_EQ(w.status, IBV_WC_SUCCESS);
	ASSERT_EQ(w.opcode, IBV_WC_TM_RECV);
	ASSERT_EQ(w.flags, IBV_WC_TM_MATCH);
	ASSERT_U64_EQ(w.wr_id, wr_id);
	ASSERT_U64_EQ(w.tm.tag, tag);
	ASSERT_EQ(w.tm.priv, APPCTX);
}

/* The TMH (opcode op) and the RVH the parent sent, at d. */
static void expect_rndv_head(const uint8_t *d, uint8_t op, uint64_t tag,
			     uint32_t rv_len)
{
	uint64_t be64;
	uint32_t be32;

	ASSERT_EQ(d[0], op);
	memcpy(&be64, d + 8, 8);
	ASSERT_U64_EQ(be64toh(be64), tag);
	memcpy(&be32, d + TMH + 12, 4);
	ASSERT_EQ(ntohl(be32), rv_len);
}

static void sc_rndv(struct tm_side *s)
{
	const uint8_t *d = s->b.buf + TAGB;
	uint32_t h, reply;
	struct tmwc w;

	/* matched: the parent's 3000 bytes in the tag's buffer, a FIN */
	add_tag(s, 0x44, ~0ull, 0, 0x81, false);
	ASSERT_EQ(ask_rndv(s, 0x44, TMH + RVH + 16, 3000, 71, RV_FIN, &reply),
		  IBV_WC_SUCCESS);
	ASSERT_EQ(reply, RV_FIN);
	expect_rndv_match(s, 0x44, 0x81);
	w = poll_one(s);
	ASSERT_EQ(w.status, IBV_WC_SUCCESS);
	ASSERT_EQ(w.opcode, IBV_WC_TM_RECV);
	ASSERT_EQ(w.flags, IBV_WC_TM_DATA_VALID);
	ASSERT_U64_EQ(w.wr_id, 0x81);
	ASSERT_EQ(w.byte_len, 3000);
	ASSERT_EQ(ep_find_pattern_diff(d, 3000, 71, 0), -1);
	ASSERT_EQ(ep_find_non_sentinel(d + 3000, 4096 - 3000), -1);

	/* longer than the tag's buffer: the headers, software goes on */
	h = add_tag(s, 0x45, ~0ull, 1, 0x82, false);
	ASSERT_EQ(ask_rndv(s, 0x45, TMH + RVH, 5000, 72, 0, &reply),
		  IBV_WC_SUCCESS);
	ASSERT_EQ(reply, 0);
	w = poll_one(s);
	ASSERT_EQ(w.status, IBV_WC_TM_RNDV_INCOMPLETE);
	ASSERT_EQ(w.opcode, IBV_WC_TM_RECV);
	ASSERT_EQ(w.flags, IBV_WC_TM_MATCH | IBV_WC_TM_DATA_VALID);
	ASSERT_U64_EQ(w.wr_id, 0x82);
	ASSERT_U64_EQ(w.tm.tag, 0x45);
	ASSERT_EQ(w.byte_len, TMH + RVH);
	expect_rndv_head(d + 4096, IBV_TMH_RNDV, 0x45, 5000);
	ASSERT_EQ(ep_find_non_sentinel(d + 4096 + TMH + RVH,
				       4096 - TMH - RVH), -1);
	ASSERT_EQ(del_tag(s, h), IBV_WC_TM_ERR);	/* used */

	/* unexpected: whole, to an ordinary WQE, counted */
	post_ordinary(s, 0);
	ASSERT_EQ(ask_rndv(s, 0x99, TMH + RVH + 8, 100, 73, 0, &reply),
		  IBV_WC_SUCCESS);
	ASSERT_EQ(reply, 0);
	w = poll_one(s);
	ASSERT_EQ(w.status, IBV_WC_SUCCESS);
	ASSERT_EQ(w.opcode, IBV_WC_TM_RECV);
	ASSERT_EQ(w.flags, 0);
	ASSERT_U64_EQ(w.wr_id, 0x0d0);
	ASSERT_EQ(w.byte_len, TMH + RVH + 8);
	expect_rndv_head(s->b.buf + ORD, IBV_TMH_RNDV, 0x99, 100);
	s->unexp++;
	sync_count(s);

	/* a RVH of length 0 matches and moves nothing */
	add_tag(s, 0x46, ~0ull, 2, 0x83, false);
	ASSERT_EQ(ask_rndv(s, 0x46, TMH + RVH, 0, 74, RV_FIN, &reply),
		  IBV_WC_SUCCESS);
	ASSERT_EQ(reply, RV_FIN);
	expect_rndv_match(s, 0x46, 0x83);
	w = poll_one(s);
	ASSERT_EQ(w.status, IBV_WC_SUCCESS);
	ASSERT_EQ(w.flags, IBV_WC_TM_DATA_VALID);
	ASSERT_EQ(w.byte_len, 0);
	ASSERT_EQ(ep_find_non_sentinel(d + 2 * 4096, 4096), -1);
	expect_empty(s);
	expect_no_send_wc(s);
	ASSERT_EQ(qp_state(s->b.qp), IBV_QPS_RTS);
}

/* The RVH's R_Key is none of the parent's: the READ fails. */
static void sc_rndv_bad_rkey(struct tm_side *s)
{
	uint32_t reply;
	struct tmwc w;

	add_tag(s, 0x47, ~0ull, 0, 0x84, false);
	ASSERT_EQ(ask_rndv(s, 0x47, TMH + RVH, 2000, 75, RV_BAD, &reply),
		  IBV_WC_SUCCESS);
	ASSERT_EQ(reply, IBV_QPS_ERR);		/* the READ's responder */
	expect_rndv_match(s, 0x47, 0x84);
	w = poll_one(s);
	ASSERT_EQ(w.status, IBV_WC_REM_ACCESS_ERR);
	ASSERT_EQ(w.opcode, IBV_WC_TM_RECV);
	ASSERT_U64_EQ(w.wr_id, 0x84);
	ASSERT_EQ(ep_find_non_sentinel(s->b.buf + TAGB, 4096), -1);
	expect_empty(s);
	expect_no_send_wc(s);
	ASSERT_EQ(qp_state(s->b.qp), IBV_QPS_ERR);
}

/*
 * The child's own SEND of 200 bytes (pattern seed), after the FINs it
 * owes the parent; then op makes the parent post its receives (cmd
 * rv_len as given), which answers with its count of FINs (want); the
 * SEND completes.
 */
static void own_send_then(struct tm_side *s, uint32_t op, uint32_t seed,
			  uint32_t rv_len, uint32_t want)
{
	struct ibv_wc wc;
	struct cmd c;

	ep_fill_pattern(s->b.buf + SRC, 200, seed, 0);
	ASSERT_EQ(ep_post(&s->b, 0x5e, IBV_WR_SEND, SRC, 200, 0, 0), 0);
	memset(&c, 0, sizeof(c));
	c.op = op;
	c.len = 200;
	c.seed = seed;
	c.rv_len = rv_len;
	xwrite(s->fd, &c, sizeof(c));
	xread(s->fd, &c, sizeof(c));
	ASSERT_EQ(c.status, IBV_WC_SUCCESS);
	ASSERT_EQ(c.reply, want);
	ep_poll(s->b.scq, &wc, 1);
	ASSERT_EQ(wc.status, IBV_WC_SUCCESS);
	ASSERT_U64_EQ(wc.wr_id, 0x5e);
}

/*
 * The parent posted no receive for the FIN: it waits in the parent (an
 * RNR NAK a NIC retries), and a message the child sends after it does
 * not overtake it; once the parent posts receives, the FIN comes first,
 * then the child's message.
 */
static void sc_rndv_late_fin(struct tm_side *s)
{
	uint32_t reply;
	struct tmwc w;

	add_tag(s, 0x4a, ~0ull, 0, 0x86, false);
	ASSERT_EQ(ask_rndv(s, 0x4a, TMH + RVH + 8, 2500, 77, RV_LATE, &reply),
		  IBV_WC_SUCCESS);
	ASSERT_EQ(reply, 0);		/* no FIN without a receive */
	expect_rndv_match(s, 0x4a, 0x86);
	w = poll_one(s);
	ASSERT_EQ(w.status, IBV_WC_SUCCESS);
	ASSERT_EQ(w.flags, IBV_WC_TM_DATA_VALID);
	ASSERT_EQ(w.byte_len, 2500);
	ASSERT_EQ(ep_find_pattern_diff(s->b.buf + TAGB, 2500, 77, 0), -1);
	/* the child's own message, sent after the FIN */
	own_send_then(s, OP_LATE_RECV, 78, 0, RV_FIN);
	expect_empty(s);
}

/*
 * The parent's QP holds at most as many FINs as its send queue is deep
 * (FIN_SQ): it posts no receive, FIN_SQ + 1 RNDVs match here, each with
 * its data; the last FIN is lost.  Then a message of the child's own,
 * sent after them, takes the receive the lost FIN would have.
 */
static void sc_rndv_fin_bound(struct tm_side *s)
{
	uint32_t i, reply;
	struct tmwc w;

	for (i = 0; i <= FIN_SQ; i++) {
		add_tag(s, FIN_TAG + i, ~0ull, i, 0x400 + i, false);
		ASSERT_EQ(ask_rndv(s, FIN_TAG + i, TMH + RVH + 8, FIN_LEN + i,
				   81, RV_LATE, &reply),
			  IBV_WC_SUCCESS);
		ASSERT_EQ(reply, 0);
		expect_rndv_match(s, FIN_TAG + i, 0x400 + i);
		w = poll_one(s);
		ASSERT_EQ(w.status, IBV_WC_SUCCESS);
		ASSERT_EQ(w.flags, IBV_WC_TM_DATA_VALID);
		ASSERT_U64_EQ(w.wr_id, 0x400 + i);
		ASSERT_EQ(w.byte_len, FIN_LEN + i);
		ASSERT_EQ(ep_find_pattern_diff(s->b.buf + TAGB + i * 4096u,
					       FIN_LEN + i, 81, 0),
			  -1);
	}
	own_send_then(s, OP_BOUND_RECV, 82, FIN_LEN, FIN_SQ);
	expect_empty(s);
}

/* The parent holds a FIN (no receive) and moves its QP to ERR or RESET,
 * or destroys it: the FIN is dropped there (OP_FIN_DROP checks). */
static void sc_rndv_fin_drop(struct tm_side *s, enum fin_drop_how how)
{
	uint32_t reply;
	struct tmwc w;
	struct cmd c;

	add_tag(s, FIN_TAG, ~0ull, 0, 0x400, false);
	ASSERT_EQ(ask_rndv(s, FIN_TAG, TMH + RVH, FIN_LEN, 83, RV_LATE,
			   &reply),
		  IBV_WC_SUCCESS);
	ASSERT_EQ(reply, 0);
	expect_rndv_match(s, FIN_TAG, 0x400);
	w = poll_one(s);
	ASSERT_EQ(w.status, IBV_WC_SUCCESS);
	ASSERT_EQ(w.flags, IBV_WC_TM_DATA_VALID);
	ASSERT_EQ(w.byte_len, FIN_LEN);
	ASSERT_EQ(ep_find_pattern_diff(s->b.buf + TAGB, FIN_LEN, 83, 0), -1);
	memset(&c, 0, sizeof(c));
	c.op = OP_FIN_DROP;
	c.len = how;
	xwrite(s->fd, &c, sizeof(c));
	xread(s->fd, &c, sizeof(c));
	ASSERT_EQ(c.status, how == DROP_ERR ? IBV_WC_WR_FLUSH_ERR :
					      IBV_WC_SUCCESS);
	expect_empty(s);
	expect_no_send_wc(s);
}

/* The RVH's R_Key is a type 2 memory window's over the parent's data,
 * bound with REMOTE_READ: the READ goes through it, a FIN follows. */
static void sc_rndv_mw(struct tm_side *s)
{
	uint32_t reply;
	struct tmwc w;

	add_tag(s, 0x4b, ~0ull, 0, 0x87, false);
	ASSERT_EQ(ask_rndv(s, 0x4b, TMH + RVH, 3000, 79, RV_MW | RV_FIN,
			   &reply),
		  IBV_WC_SUCCESS);
	ASSERT_EQ(reply, RV_FIN);
	expect_rndv_match(s, 0x4b, 0x87);
	w = poll_one(s);
	ASSERT_EQ(w.status, IBV_WC_SUCCESS);
	ASSERT_EQ(w.flags, IBV_WC_TM_DATA_VALID);
	ASSERT_EQ(w.byte_len, 3000);
	ASSERT_EQ(ep_find_pattern_diff(s->b.buf + TAGB, 3000, 79, 0), -1);
	ASSERT_EQ(ep_find_non_sentinel(s->b.buf + TAGB + 3000, 4096 - 3000),
		  -1);
	expect_empty(s);
}

/* A window without REMOTE_READ, or a RVH beyond the window's bounds: a
 * bad R_Key's outcome (TM_MATCH, REM_ACCESS_ERR, the parent's QP to
 * error). */
static void sc_rndv_mw_bad(struct tm_side *s, uint32_t flag)
{
	uint32_t reply;
	struct tmwc w;

	add_tag(s, 0x4c, ~0ull, 0, 0x88, false);
	ASSERT_EQ(ask_rndv(s, 0x4c, TMH + RVH, 2000, 80, flag, &reply),
		  IBV_WC_SUCCESS);
	ASSERT_EQ(reply, IBV_QPS_ERR);
	expect_rndv_match(s, 0x4c, 0x88);
	w = poll_one(s);
	ASSERT_EQ(w.status, IBV_WC_REM_ACCESS_ERR);
	ASSERT_U64_EQ(w.wr_id, 0x88);
	ASSERT_EQ(ep_find_non_sentinel(s->b.buf + TAGB, 4096), -1);
	expect_empty(s);
}

/* The net path at path MTU 1024: the READ's responses fill the tag's
 * buffer exactly; one byte more than it holds is incomplete (no READ). */
static void sc_rndv_net(struct tm_side *s)
{
	const uint8_t *d = s->b.buf + TAGB;
	struct ibv_device_attr_ex da;
	uint32_t h, reply;
	struct tmwc w;

	ASSERT_EQ(ibv_query_device_ex(s->b.ctx, NULL, &da), 0);
	ASSERT_EQ(da.tm_caps.max_rndv_hdr_size, 64);
	add_tag(s, 0x48, ~0ull, 0, 0x85, false);
	ASSERT_EQ(ask_rndv(s, 0x48, TMH + RVH + 32, 4096, 76, RV_FIN, &reply),
		  IBV_WC_SUCCESS);
	ASSERT_EQ(reply, RV_FIN);
	expect_rndv_match(s, 0x48, 0x85);
	w = poll_one(s);
	ASSERT_EQ(w.status, IBV_WC_SUCCESS);
	ASSERT_EQ(w.opcode, IBV_WC_TM_RECV);
	ASSERT_EQ(w.flags, IBV_WC_TM_DATA_VALID);
	ASSERT_U64_EQ(w.wr_id, 0x85);
	ASSERT_EQ(w.byte_len, 4096);
	ASSERT_EQ(ep_find_pattern_diff(d, 4096, 76, 0), -1);

	h = add_tag(s, 0x49, ~0ull, 1, 0x86, false);
	ASSERT_EQ(ask_rndv(s, 0x49, TMH + RVH, 4097, 77, 0, &reply),
		  IBV_WC_SUCCESS);
	ASSERT_EQ(reply, 0);
	w = poll_one(s);
	ASSERT_EQ(w.status, IBV_WC_TM_RNDV_INCOMPLETE);
	ASSERT_EQ(w.flags, IBV_WC_TM_MATCH | IBV_WC_TM_DATA_VALID);
	ASSERT_U64_EQ(w.wr_id, 0x86);
	ASSERT_EQ(w.byte_len, TMH + RVH);
	expect_rndv_head(d + 4096, IBV_TMH_RNDV, 0x49, 4097);
	ASSERT_EQ(ep_find_non_sentinel(d + 4096 + TMH + RVH,
				       4096 - TMH - RVH), -1);
	ASSERT_EQ(del_tag(s, h), IBV_WC_TM_ERR);
	expect_empty(s);
	expect_no_send_wc(s);
}

/* Under SOFTHCA_FAULTS: this process's packets did meet faults (its
 * READ requests and FINs, or the parent's SENDs and READ responses). */
static void expect_faults(const char *who)
{
	long long n;

	if (!getenv("SOFTHCA_FAULTS"))
		return;
	n = ep_stat_counter(SOFTHCA_TOOL, getpid(), "faults_injected");
	fprintf(stderr, "# %s: %lld faults injected\n", who, n);
	ASSERT_GT(n, 0);
}

static void set_state(struct ibv_qp *qp, enum ibv_qp_state st)
{
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_state = st;
	ASSERT_EQ(ibv_modify_qp(qp, &a, IBV_QP_STATE), 0);
}

/*
 * More rendezvous than a QP carries out at once (8 on the net path):
 * with the child's QP drained (SQD) the READs it makes wait, the tags'
 * buffers stay untouched, and the RNDVs beyond 8 are unexpected although
 * tags are posted for them.  Back in RTS the 8 READs go out: each tag
 * its data, the parent 8 FINs.
 */
static void sc_rndv_bound(struct tm_side *s)
{
	const uint8_t *d = s->b.buf + TAGB;
	uint32_t i, reply;
	struct tmwc w;
	struct cmd c;

	for (i = 0; i < 10; i++)	/* tags 8 and 9 share buffers 6, 7 */
		add_tag(s, 0x100 + i, ~0ull, i < 8 ? i : i - 2, 0x200 + i,
			false);
	post_ordinary(s, 0);
	post_ordinary(s, 1);
	set_state(s->b.qp, IBV_QPS_SQD);
	for (i = 0; i < 10; i++)
		ASSERT_EQ(ask_rndv(s, 0x100 + i, TMH + RVH, 1000 + i, 90, 0,
				   &reply),
			  IBV_WC_SUCCESS);
	for (i = 0; i < 8; i++)
		expect_rndv_match(s, 0x100 + i, 0x200 + i);
	for (i = 0; i < 2; i++) {
		w = poll_one(s);
		ASSERT_EQ(w.status, IBV_WC_SUCCESS);
		ASSERT_EQ(w.opcode, IBV_WC_TM_RECV);
		ASSERT_EQ(w.flags, 0);
		ASSERT_U64_EQ(w.wr_id, 0x0d0 + i);
		expect_rndv_head(s->b.buf + ORD + i * 4096u, IBV_TMH_RNDV,
				 0x108 + i, 1008 + i);
	}
	expect_empty(s);
	ASSERT_EQ(ep_find_non_sentinel(d, 8 * 4096), -1);
	set_state(s->b.qp, IBV_QPS_RTS);
	for (i = 0; i < 8; i++) {
		w = poll_one(s);
		ASSERT_EQ(w.status, IBV_WC_SUCCESS);
		ASSERT_EQ(w.opcode, IBV_WC_TM_RECV);
		ASSERT_EQ(w.flags, IBV_WC_TM_DATA_VALID);
		ASSERT_U64_EQ(w.wr_id, 0x200 + i);
		ASSERT_EQ(w.byte_len, 1000 + i);
		ASSERT_EQ(ep_find_pattern_diff(d + i * 4096u, 1000 + i, 90, 0),
			  -1);
		ASSERT_EQ(ep_find_non_sentinel(d + i * 4096u + 1000 + i,
					       4096 - 1000 - i),
			  -1);
	}
	memset(&c, 0, sizeof(c));
	c.op = CMD_FINS;
	c.len = 8;
	xwrite(s->fd, &c, sizeof(c));
	xread(s->fd, &c, sizeof(c));
	ASSERT_EQ(c.reply, 8);
	expect_empty(s);
	expect_no_send_wc(s);
}

/*
 * The QP goes to error while its READ waits (held in SQD): the tag
 * completes flushed, and nothing is ever written into its buffer.
 */
static void sc_rndv_flush(struct tm_side *s)
{
	uint32_t reply;
	struct tmwc w;

	add_tag(s, 0x4a, ~0ull, 0, 0x87, false);
	set_state(s->b.qp, IBV_QPS_SQD);
	ASSERT_EQ(ask_rndv(s, 0x4a, TMH + RVH, 3000, 78, 0, &reply),
		  IBV_WC_SUCCESS);
	expect_rndv_match(s, 0x4a, 0x87);
	set_state(s->b.qp, IBV_QPS_ERR);
	w = poll_one(s);
	ASSERT_EQ(w.status, IBV_WC_WR_FLUSH_ERR);
	ASSERT_EQ(w.opcode, IBV_WC_TM_RECV);
	ASSERT_U64_EQ(w.wr_id, 0x87);
	ASSERT_EQ(ep_find_non_sentinel(s->b.buf + TAGB, 4096), -1);
	expect_empty(s);
	expect_no_send_wc(s);
}

struct child_arg {
	enum kase k;
};

static void child(int fd, void *arg)
{
	const struct child_arg *ca = arg;
	struct tm_side s;

	side_open(&s, fd);
	switch (ca->k) {
	case K_MATCHED:
		sc_matched(&s);
		break;
	case K_UNEXPECTED:
		sc_unexpected(&s);
		break;
	case K_DEL:
		sc_del(&s);
		break;
	case K_NO_TAG:
		sc_no_tag(&s);
		break;
	case K_PLAIN:
		sc_plain(&s);
		break;
	case K_TOO_LONG:
		sc_too_long(&s);
		break;
	case K_RNDV:
		sc_rndv(&s);
		break;
	case K_RNDV_BAD_RKEY:
		sc_rndv_bad_rkey(&s);
		break;
	case K_RNDV_NET:
		sc_rndv_net(&s);
		break;
	case K_RNDV_LATE_FIN:
	case K_RNDV_LATE_FIN_SRQ:
		sc_rndv_late_fin(&s);
		break;
	case K_RNDV_MW:
		sc_rndv_mw(&s);
		break;
	case K_RNDV_FIN_BOUND:
		sc_rndv_fin_bound(&s);
		break;
	case K_RNDV_FIN_DROP:
		sc_rndv_fin_drop(&s, DROP_ERR);
		break;
	case K_RNDV_FIN_DROP_RESET:
		sc_rndv_fin_drop(&s, DROP_RESET);
		break;
	case K_RNDV_FIN_DROP_DESTROY:
		sc_rndv_fin_drop(&s, DROP_DESTROY);
		break;
	case K_RNDV_MW_NOREAD:
		sc_rndv_mw_bad(&s, RV_MW_NOREAD);
		break;
	case K_RNDV_MW_OOB:
		sc_rndv_mw_bad(&s, RV_MW_OOB);
		break;
	case K_RNDV_BOUND:
		sc_rndv_bound(&s);
		break;
	case K_RNDV_FLUSH:
		sc_rndv_flush(&s);
		break;
	}
	expect_faults("child");
	side_close(&s);
}

/* ------------------------------------------------------------------ */
/* The parent: sends what it is asked                                  */

/*
 * A RNDV request: TMH, RVH naming rv_len bytes of pattern at RSRC (the
 * R_Key wrong with RV_BAD), the rest zero.  A receive for the FIN is
 * posted first; reply: RV_FIN if one came, checked (TMH FIN and the
 * RVH), or with RV_BAD the QP's state after the SEND.
 */
static void send_rndv(struct ep *a, struct cmd *c)
{
	uint8_t *p = a->buf + SRC, *f = a->buf + FINB;
	uint32_t be32 = htonl(APPCTX);
	uint64_t be64 = htobe64(c->tag);
	struct ibv_qp_init_attr ia;
	struct ibv_qp_attr qa;
	struct ibv_wc wc;

	memset(p, 0, c->len);
	p[0] = c->op;
	memcpy(p + 4, &be32, 4);
	memcpy(p + 8, &be64, 8);
	be64 = htobe64((uintptr_t)a->buf + RSRC);
	memcpy(p + TMH, &be64, 8);
	be32 = htonl(c->rv_flags & RV_BAD ? a->mr->rkey ^ 0x5a5a00u :
					    a->mr->rkey);
	memcpy(p + TMH + 8, &be32, 4);
	be32 = htonl(c->rv_len);
	memcpy(p + TMH + 12, &be32, 4);
	ep_fill_pattern(a->buf + RSRC, c->rv_len, c->seed, 0);
	memset(f, EP_SENTINEL, 64);
	ASSERT_EQ(ep_post_recv(a, 0xf1, FINB, 64), 0);
	ASSERT_EQ(ep_post(a, c->seed, IBV_WR_SEND, SRC, c->len, 0, 0), 0);
	ep_poll(a->scq, &wc, 1);
	c->status = wc.status;
	c->reply = 0;
	if (c->rv_flags & RV_FIN) {
		ep_poll(a->rcq, &wc, 1);
		ASSERT_EQ(wc.status, IBV_WC_SUCCESS);
		ASSERT_EQ(wc.opcode, IBV_WC_RECV);
		ASSERT_EQ(wc.byte_len, TMH + RVH);
		ASSERT_U64_EQ(wc.wr_id, 0xf1);
		ASSERT_EQ(f[0], IBV_TMH_FIN);
		ASSERT_EQ(memcmp(f + 1, p + 1, TMH + RVH - 1), 0);
		ASSERT_EQ(ep_find_non_sentinel(f + TMH + RVH, 64 - TMH - RVH),
			  -1);
		c->reply = RV_FIN;
	} else if (c->rv_flags & RV_BAD) {
		/* the same host fails the READ with the SEND; the net path
		 * when the child's READ arrives, after the SEND's ACK */
		struct timespec ts = { 0, 1000000 };
		int i;

		for (i = 0; i < 10000; i++) {
			ASSERT_EQ(ibv_query_qp(a->qp, &qa, IBV_QP_STATE, &ia),
				  0);
			if (qa.qp_state == IBV_QPS_ERR)
				break;
			ibv_poll_cq(a->rcq, 0, &wc);	/* progress */
			nanosleep(&ts, NULL);
		}
		c->reply = qa.qp_state;
	}
}

/* The FIN of the RNDV at SRC (TMH and RVH as sent), received by wr_id
 * into 64 bytes at f. */
static void expect_fin(struct ep *a, uint64_t wr_id, const uint8_t *f)
{
	const uint8_t *p = a->buf + SRC;
	struct ibv_wc wc;

	ep_poll(a->rcq, &wc, 1);
	ASSERT_EQ(wc.status, IBV_WC_SUCCESS);
	ASSERT_EQ(wc.opcode, IBV_WC_RECV);
	ASSERT_EQ(wc.byte_len, TMH + RVH);
	ASSERT_U64_EQ(wc.wr_id, wr_id);
	ASSERT_EQ(f[0], IBV_TMH_FIN);
	ASSERT_EQ(memcmp(f + 1, p + 1, TMH + RVH - 1), 0);
	ASSERT_EQ(ep_find_non_sentinel(f + TMH + RVH, 64 - TMH - RVH), -1);
}

/* A type 2 window over the parent's data, bound to its QP (RV_MW*). */
static uint32_t bind_rndv_mw(struct ep *a, uint32_t flags,
			     struct ibv_mr **mr, struct ibv_mw **mw)
{
	struct ibv_send_wr wr, *bad = NULL;
	struct ibv_wc wc;

	*mr = ibv_reg_mr(a->pd, a->buf, BUF, IBV_ACCESS_LOCAL_WRITE |
			 IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE |
			 IBV_ACCESS_MW_BIND);
	ASSERT_NOT_NULL(*mr);
	*mw = ibv_alloc_mw(a->pd, IBV_MW_TYPE_2);
	ASSERT_NOT_NULL(*mw);
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = 0xb1d;
	wr.opcode = IBV_WR_BIND_MW;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.bind_mw.mw = *mw;
	wr.bind_mw.rkey = ibv_inc_rkey((*mw)->rkey);
	wr.bind_mw.bind_info.mr = *mr;
	wr.bind_mw.bind_info.addr = (uintptr_t)a->buf + RSRC;
	wr.bind_mw.bind_info.length = flags & RV_MW_OOB ? 1024 : 8192;
	wr.bind_mw.bind_info.mw_access_flags =
		flags & RV_MW_NOREAD ? IBV_ACCESS_REMOTE_WRITE :
				       IBV_ACCESS_REMOTE_READ;
	ASSERT_EQ(ibv_post_send(a->qp, &wr, &bad), 0);
	ep_poll(a->scq, &wc, 1);
	ASSERT_EQ(wc.status, IBV_WC_SUCCESS);
	ASSERT_EQ(wc.opcode, IBV_WC_BIND_MW);
	return wr.bind_mw.rkey;
}

/*
 * The same-host rendezvous cases of issue 14 (RV_EXT), as send_rndv
 * otherwise: RV_LATE posts no receive for the FIN and sees none after
 * the SEND completed (reply 0); OP_LATE_RECV then posts one receive and
 * takes the FIN, then one more for the child's message (reply RV_FIN).
 * RV_MW* put a type 2 window's R_Key in the RVH.
 */
static void send_rndv_ext(struct ep *a, struct cmd *c)
{
	uint8_t *p = a->buf + SRC, *f = a->buf + FINB;
	uint32_t be32 = htonl(APPCTX), rkey = a->mr->rkey;
	uint64_t be64 = htobe64(c->tag);
	struct ibv_mr *mr = NULL;
	struct ibv_mw *mw = NULL;
	struct ibv_qp_init_attr ia;
	struct ibv_qp_attr qa;
	struct ibv_wc wc;

	if (c->op == OP_LATE_RECV) {
		memset(f, EP_SENTINEL, 128);
		ASSERT_EQ(ep_post_recv(a, 0xf1, FINB, 64), 0);
		expect_fin(a, 0xf1, f);
		ASSERT_EQ(ep_post_recv(a, 0xf2, FINB + 64, 64 + 200), 0);
		ep_poll(a->rcq, &wc, 1);
		ASSERT_EQ(wc.status, IBV_WC_SUCCESS);
		ASSERT_U64_EQ(wc.wr_id, 0xf2);
		ASSERT_EQ(wc.byte_len, c->len);
		ASSERT_EQ(ep_find_pattern_diff(f + 64, c->len, c->seed, 0), -1);
		c->status = IBV_WC_SUCCESS;
		c->reply = RV_FIN;
		return;
	}
	if (c->rv_flags & (RV_MW | RV_MW_NOREAD | RV_MW_OOB))
		rkey = bind_rndv_mw(a, c->rv_flags, &mr, &mw);
	memset(p, 0, c->len);
	p[0] = c->op;
	memcpy(p + 4, &be32, 4);
	memcpy(p + 8, &be64, 8);
	be64 = htobe64((uintptr_t)a->buf + RSRC);
	memcpy(p + TMH, &be64, 8);
	be32 = htonl(rkey);
	memcpy(p + TMH + 8, &be32, 4);
	be32 = htonl(c->rv_len);
	memcpy(p + TMH + 12, &be32, 4);
	ep_fill_pattern(a->buf + RSRC, c->rv_len, c->seed, 0);
	memset(f, EP_SENTINEL, 64);
	if (!(c->rv_flags & RV_LATE))
		ASSERT_EQ(ep_post_recv(a, 0xf1, FINB, 64), 0);
	ASSERT_EQ(ep_post(a, c->seed, IBV_WR_SEND, SRC, c->len, 0, 0), 0);
	ep_poll(a->scq, &wc, 1);
	c->status = wc.status;
	c->reply = 0;
	if (c->rv_flags & RV_LATE) {
		ASSERT_EQ(ibv_poll_cq(a->rcq, 1, &wc), 0);
	} else if (c->rv_flags & RV_FIN) {
		expect_fin(a, 0xf1, f);
		c->reply = RV_FIN;
	} else {
		ASSERT_EQ(ibv_query_qp(a->qp, &qa, IBV_QP_STATE, &ia), 0);
		c->reply = qa.qp_state;
	}
	if (mw) {
		/* a window bound to a QP in error stays bound until freed */
		ASSERT_EQ(ibv_dealloc_mw(mw), 0);
		ASSERT_EQ(ibv_dereg_mr(mr), 0);
	}
}

/* The parent's QP and its counters when K_RNDV_FIN_* began. */
static uint32_t g_qpn;
static long long g_rnr0, g_drop0;

/* A counter of this process's QP g_qpn (`softhca stat`). */
static long long my_counter(const char *name)
{
	return ep_stat_qp_counter(SOFTHCA_TOOL, getpid(), g_qpn, name);
}

/* The FIN of the RNDV for tag (rv_len bytes at RSRC), received by wr_id
 * into the buffer at f (n bytes, sentinel beyond the FIN). */
static void expect_fin_of(struct ep *a, uint64_t wr_id, const uint8_t *f,
			  uint32_t n, uint64_t tag, uint32_t rv_len)
{
	struct ibv_wc wc;
	uint64_t be64;
	uint32_t be32;

	ep_poll(a->rcq, &wc, 1);
	ASSERT_EQ(wc.status, IBV_WC_SUCCESS);
	ASSERT_EQ(wc.opcode, IBV_WC_RECV);
	ASSERT_EQ(wc.byte_len, TMH + RVH);
	ASSERT_U64_EQ(wc.wr_id, wr_id);
	expect_rndv_head(f, IBV_TMH_FIN, tag, rv_len);
	memcpy(&be32, f + 4, 4);
	ASSERT_EQ(ntohl(be32), APPCTX);
	memcpy(&be64, f + TMH, 8);
	ASSERT_U64_EQ(be64toh(be64), (uintptr_t)a->buf + RSRC);
	memcpy(&be32, f + TMH + 8, 4);
	ASSERT_EQ(ntohl(be32), a->mr->rkey);
	ASSERT_EQ(ep_find_non_sentinel(f + TMH + RVH, n - TMH - RVH), -1);
}

/*
 * OP_BOUND_RECV: FIN_SQ + 1 RNDVs found no receive; the QP (send queue
 * FIN_SQ deep) held the first FIN_SQ FINs and lost the last (one RNR
 * answer sent, a packet dropped).  FIN_SQ + 1 receives now: the FINs in
 * order, then the child's message, nothing more.
 */
static void bound_recv(struct ep *a, struct cmd *c)
{
	uint8_t *f = a->buf + FINB;
	struct ibv_qp_init_attr ia;
	struct ibv_qp_attr qa;
	struct ibv_wc wc;
	uint32_t i;

	ASSERT_EQ(ibv_query_qp(a->qp, &qa, IBV_QP_CAP, &ia), 0);
	ASSERT_EQ(qa.cap.max_send_wr, FIN_SQ);
	ASSERT_EQ(my_counter("send_rnr_err") - g_rnr0, 1);
	ASSERT_GE(my_counter("dropped_pkts") - g_drop0, 1);
	memset(f, EP_SENTINEL, (FIN_SQ + 1) * 256u);
	for (i = 0; i <= FIN_SQ; i++)
		ASSERT_EQ(ep_post_recv(a, 0xf1 + i, FINB + i * 256u, 256), 0);
	for (i = 0; i < FIN_SQ; i++)
		expect_fin_of(a, 0xf1 + i, f + i * 256u, 256, FIN_TAG + i,
			      c->rv_len + i);
	/* the receive a lost FIN would have taken: the child's message */
	ep_poll(a->rcq, &wc, 1);
	ASSERT_EQ(wc.status, IBV_WC_SUCCESS);
	ASSERT_U64_EQ(wc.wr_id, 0xf1 + FIN_SQ);
	ASSERT_EQ(wc.byte_len, c->len);
	ASSERT_EQ(ep_find_pattern_diff(f + FIN_SQ * 256u, c->len, c->seed, 0),
		  -1);
	ASSERT_EQ(ibv_poll_cq(a->rcq, 1, &wc), 0);
	ASSERT_EQ(my_counter("send_rnr_err") - g_rnr0, 1);
	c->status = IBV_WC_SUCCESS;
	c->reply = i;
}

/*
 * A receive posted to a new SRQ: the post looks through the QPs that
 * hold FINs for one on that SRQ (shm/xfer.c), and a QP destroyed while
 * it held one must not be among them any more (its memory is poisoned
 * when it is destroyed: the walk would crash).
 */
static void srq_post_one(struct ep *a)
{
	struct ibv_srq_init_attr sa = { .attr = { .max_wr = 4, .max_sge = 1 } };
	struct ibv_sge sge = { .addr = (uintptr_t)(a->buf + FINB),
			       .length = 64, .lkey = a->mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = 0xf9, .sg_list = &sge,
				  .num_sge = 1 }, *bad;
	struct ibv_srq *srq = ibv_create_srq(a->pd, &sa);

	ASSERT(srq);
	ASSERT_EQ(ibv_post_srq_recv(srq, &wr, &bad), 0);
	ASSERT_EQ(ibv_destroy_srq(srq), 0);
}

/*
 * OP_FIN_DROP: the QP holds one FIN (nothing counted yet).  To RESET it
 * is dropped and counted, and nothing completes.  Destroyed, it goes
 * with the QP: nothing completes, and a later SRQ post does not meet the
 * QP (srq_post_one).  To ERR it is dropped and counted; a receive posted
 * then is flushed, untouched.
 */
static void fin_drop(struct ep *a, struct cmd *c)
{
	uint8_t *f = a->buf + FINB;
	struct ibv_wc wc;

	ASSERT_EQ(my_counter("dropped_pkts"), g_drop0);
	if (c->len == DROP_RESET || c->len == DROP_DESTROY) {
		if (c->len == DROP_RESET) {
			set_state(a->qp, IBV_QPS_RESET);
			ASSERT_EQ(my_counter("dropped_pkts") - g_drop0, 1);
		} else {
			ASSERT_EQ(ibv_destroy_qp(a->qp), 0);
			a->qp = NULL;
			srq_post_one(a);
		}
		ASSERT_EQ(ibv_poll_cq(a->rcq, 1, &wc), 0);
		ASSERT_EQ(ibv_poll_cq(a->scq, 1, &wc), 0);
		c->status = IBV_WC_SUCCESS;
		return;
	}
	set_state(a->qp, IBV_QPS_ERR);
	ASSERT_EQ(my_counter("dropped_pkts") - g_drop0, 1);
	memset(f, EP_SENTINEL, 64);
	ASSERT_EQ(ep_post_recv(a, 0xf1, FINB, 64), 0);
	ep_poll(a->rcq, &wc, 1);
	ASSERT_EQ(wc.status, IBV_WC_WR_FLUSH_ERR);
	ASSERT_U64_EQ(wc.wr_id, 0xf1);
	ASSERT_EQ(ep_find_non_sentinel(f, 64), -1);
	ASSERT_EQ(ibv_poll_cq(a->rcq, 1, &wc), 0);
	ASSERT_EQ(my_counter("dropped_pkts") - g_drop0, 1);
	ASSERT_EQ(my_counter("send_rnr_err"), g_rnr0);
	c->status = wc.status;
}

/* CMD_FINS: c->len FINs arrive, each in one of the receives send_rndv
 * posted (the same buffer: the last one is looked at). */
static void collect_fins(struct ep *a, struct cmd *c)
{
	const uint8_t *f = a->buf + FINB;
	struct ibv_wc wc;
	uint64_t be64;
	uint32_t i;

	for (i = 0; i < c->len; i++) {
		ep_poll(a->rcq, &wc, 1);
		ASSERT_EQ(wc.status, IBV_WC_SUCCESS);
		ASSERT_EQ(wc.opcode, IBV_WC_RECV);
		ASSERT_EQ(wc.byte_len, TMH + RVH);
		ASSERT_EQ(f[0], IBV_TMH_FIN);
		memcpy(&be64, f + 8, 8);
		ASSERT_LT(be64toh(be64) - 0x100, 8);
	}
	c->reply = i;
}

static void send_one(struct ep *a, struct cmd *c)
{
	uint8_t *p = a->buf + SRC;
	uint32_t be32 = htonl(APPCTX);
	uint64_t be64 = htobe64(c->tag);
	struct ibv_wc wc;

	memset(p, 0, TMH);
	p[0] = c->op;
	memcpy(p + 4, &be32, 4);
	memcpy(p + 8, &be64, 8);
	if (c->len < TMH) {
		memset(p, 0x3c, c->len);
	} else {
		ep_fill_pattern(p + TMH, c->len - TMH, c->seed, TMH);
	}
	ASSERT_EQ(ep_post(a, c->seed,
			  c->imm ? IBV_WR_SEND_WITH_IMM : IBV_WR_SEND, SRC,
			  c->len, 0, 0),
		  0);
	ep_poll(a->scq, &wc, 1);
	c->status = wc.status;
}

enum path { P_MAP, P_CMA, P_NET };

static void set_path(enum path p)
{
	unsetenv("SOFTHCA_NET");
	unsetenv("SOFTHCA_MAP");
	if (p == P_CMA)
		ASSERT_EQ(setenv("SOFTHCA_MAP", "0", 1), 0);
	if (p == P_NET)
		ASSERT_EQ(setenv("SOFTHCA_NET", "1", 1), 0);
}

static void run(enum kase k, enum path p)
{
	struct child_arg ca = { k };
	struct ep_opts o;
	struct duo d;
	uint32_t fins = 0, rndvs = 0;
	uint64_t tcp = 0;
	struct cmd c;
	struct ep a;

	set_path(p);
	duo_fork(&d, child, &ca);
	ep_default_opts(&o, IBV_QPT_RC);
	o.buf_size = BUF;
	/* the FIN waits for a receive posted to the parent's SRQ */
	o.use_srq = k == K_RNDV_LATE_FIN_SRQ;
	/* as many FINs held as the send queue is deep */
	if (holds_fins(k))
		o.max_send_wr = FIN_SQ;
	o.mtu = g_mtu;
	ep_open_remote(&a, &o, d.fd);
	if (holds_fins(k)) {
		g_qpn = a.qp->qp_num;
		g_rnr0 = my_counter("send_rnr_err");
		g_drop0 = my_counter("dropped_pkts");
	}
	for (;;) {
		xread(d.fd, &c, sizeof(c));
		if (!c.len && !c.op && !c.tag)
			break;
		if (c.op == CMD_FINS) {
			collect_fins(&a, &c);
			fins += c.reply;
		} else if (c.op == OP_BOUND_RECV) {
			bound_recv(&a, &c);
		} else if (c.op == OP_FIN_DROP) {
			fin_drop(&a, &c);
		} else if (c.op == OP_LATE_RECV || (c.rv_flags & RV_EXT)) {
			send_rndv_ext(&a, &c);
		} else if (c.op == IBV_TMH_RNDV) {
			send_rndv(&a, &c);
			fins += !!(c.reply == RV_FIN && !(c.rv_flags & RV_BAD));
			rndvs++;
		} else {
			send_one(&a, &c);
		}
		/* while the connection lives (the child's exit ends it) */
		if (p == P_NET)
			tcp += ep_tcp_bytes();
		xwrite(d.fd, &c, sizeof(c));
	}
	if (p == P_NET)
		ASSERT_GT(tcp, 0);
	expect_faults("parent");
	duo_wait(&d);
	/* no FIN but those expected (each took its receive); a QP in
	 * error flushes the receives left */
	if (rndvs) {
		struct ibv_wc wc;
		uint32_t n = 0;

		while (ibv_poll_cq(a.rcq, 1, &wc) == 1) {
			ASSERT_EQ(wc.status, IBV_WC_WR_FLUSH_ERR);
			n++;
		}
		ASSERT_LE(n, rndvs - fins);
	}
	ep_destroy(&a);
}

#define PATHS(name, k)                                                    \
	TEST(name##_map) { run(k, P_MAP); }                               \
	TEST(name##_cma) { run(k, P_CMA); }                               \
	TEST(name##_net) { run(k, P_NET); }

PATHS(eager_matched, K_MATCHED)
PATHS(unexpected, K_UNEXPECTED)
PATHS(tag_del, K_DEL)
PATHS(no_tag, K_NO_TAG)
PATHS(plain, K_PLAIN)
PATHS(too_long, K_TOO_LONG)

/* rendezvous is offloaded on every path */
PATHS(rndv, K_RNDV)
PATHS(rndv_bad_rkey, K_RNDV_BAD_RKEY)

TEST(rndv_bound_net)
{
	run(K_RNDV_BOUND, P_NET);
}

TEST(rndv_flush_net)
{
	run(K_RNDV_FLUSH, P_NET);
}

TEST(rndv_exact_net)
{
	g_mtu = IBV_MTU_1024;
	run(K_RNDV_NET, P_NET);
}

/* Drops and duplicates (conn.c's SOFTHCA_FAULTS, both processes): the
 * READ's and FIN's packets are resent by the RC rules (a seed: the same
 * faults each run). */
TEST(rndv_lossy_net)
{
	g_mtu = IBV_MTU_1024;
	ASSERT_EQ(setenv("SOFTHCA_FAULTS", "drop=0.3,dup=0.1,seed=14", 1), 0);
	run(K_RNDV, P_NET);
	unsetenv("SOFTHCA_FAULTS");
}

/* the same host: a FIN that waits for its receive; a window's R_Key */
TEST(rndv_late_fin_map) { run(K_RNDV_LATE_FIN, P_MAP); }
TEST(rndv_late_fin_cma) { run(K_RNDV_LATE_FIN, P_CMA); }
TEST(rndv_late_fin_srq_map) { run(K_RNDV_LATE_FIN_SRQ, P_MAP); }
TEST(rndv_late_fin_srq_cma) { run(K_RNDV_LATE_FIN_SRQ, P_CMA); }
TEST(rndv_mw_map) { run(K_RNDV_MW, P_MAP); }
TEST(rndv_mw_cma) { run(K_RNDV_MW, P_CMA); }
TEST(rndv_mw_noread_map) { run(K_RNDV_MW_NOREAD, P_MAP); }
TEST(rndv_mw_noread_cma) { run(K_RNDV_MW_NOREAD, P_CMA); }
TEST(rndv_mw_oob_map) { run(K_RNDV_MW_OOB, P_MAP); }
TEST(rndv_mw_oob_cma) { run(K_RNDV_MW_OOB, P_CMA); }
/* the FINs a QP holds: as many as its send queue is deep; dropped in ERR */
TEST(rndv_fin_bound_map) { run(K_RNDV_FIN_BOUND, P_MAP); }
TEST(rndv_fin_bound_cma) { run(K_RNDV_FIN_BOUND, P_CMA); }
TEST(rndv_fin_drop_map) { run(K_RNDV_FIN_DROP, P_MAP); }
TEST(rndv_fin_drop_cma) { run(K_RNDV_FIN_DROP, P_CMA); }
/* ... and to RESET, and with the QP destroyed */
TEST(rndv_fin_drop_reset_map) { run(K_RNDV_FIN_DROP_RESET, P_MAP); }
TEST(rndv_fin_drop_reset_cma) { run(K_RNDV_FIN_DROP_RESET, P_CMA); }
TEST(rndv_fin_drop_destroy_map) { run(K_RNDV_FIN_DROP_DESTROY, P_MAP); }
TEST(rndv_fin_drop_destroy_cma) { run(K_RNDV_FIN_DROP_DESTROY, P_CMA); }

/* ------------------------------------------------------------------ */
/* The verbs' errors (one process, no traffic)                         */

TEST(verbs_errors)
{
	struct ibv_device_attr_ex da;
	struct ibv_srq_init_attr_ex sa;
	struct ibv_srq_init_attr ba;
	struct ibv_ops_wr wr, wr2, *bad;
	struct ibv_sge sge[8];
	struct ibv_srq *srq, *basic;
	struct ep_opts o;
	struct ep e;
	uint32_t i;
	int ret;

	ep_skip_if_netns();
	opts(&o);
	ep_create(&e, &o);
	ASSERT_EQ(ibv_query_device_ex(e.ctx, NULL, &da), 0);
	ASSERT_EQ(da.tm_caps.flags, IBV_TM_CAP_RC);
	ASSERT_GE(da.tm_caps.max_num_tags, 2);
	ASSERT_GE(da.tm_caps.max_sge, 1);
	ASSERT_GE(da.tm_caps.max_ops, 1);
	/* rendezvous: TMH, RVH and 32 bytes, on either path */
	ASSERT_EQ(da.tm_caps.max_rndv_hdr_size, 64);

	/* create: tags within tm_caps, a CQ, IBV_SRQ_INIT_ATTR_TM */
	memset(&sa, 0, sizeof(sa));
	sa.attr.max_wr = 4;
	sa.attr.max_sge = 1;
	sa.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD |
		       IBV_SRQ_INIT_ATTR_CQ | IBV_SRQ_INIT_ATTR_TM;
	sa.srq_type = IBV_SRQT_TM;
	sa.pd = e.pd;
	sa.cq = e.rcq;
	sa.tm_cap.max_ops = 4;
	sa.tm_cap.max_num_tags = 0;
	ASSERT_NULL_ERRNO(ibv_create_srq_ex(e.ctx, &sa), EINVAL);
	sa.tm_cap.max_num_tags = da.tm_caps.max_num_tags + 1;
	ASSERT_NULL_ERRNO(ibv_create_srq_ex(e.ctx, &sa), EINVAL);
	sa.tm_cap.max_num_tags = 2;
	sa.tm_cap.max_ops = 0;
	ASSERT_NULL_ERRNO(ibv_create_srq_ex(e.ctx, &sa), EINVAL);
	sa.tm_cap.max_ops = 4;
	sa.comp_mask &= ~(uint32_t)IBV_SRQ_INIT_ATTR_CQ;
	ASSERT_NULL_ERRNO(ibv_create_srq_ex(e.ctx, &sa), EINVAL);
	sa.comp_mask |= IBV_SRQ_INIT_ATTR_CQ;
	sa.comp_mask &= ~(uint32_t)IBV_SRQ_INIT_ATTR_TM;
	ASSERT_NULL_ERRNO(ibv_create_srq_ex(e.ctx, &sa), EINVAL);
	sa.comp_mask |= IBV_SRQ_INIT_ATTR_TM;
	srq = ibv_create_srq_ex(e.ctx, &sa);
	ASSERT_NOT_NULL(srq);

	/* post_srq_ops on a basic SRQ: EINVAL, bad_wr the first */
	memset(&ba, 0, sizeof(ba));
	ba.attr.max_wr = 4;
	ba.attr.max_sge = 1;
	basic = ibv_create_srq(e.pd, &ba);
	ASSERT_NOT_NULL(basic);
	memset(&wr, 0, sizeof(wr));
	wr.opcode = IBV_WR_TAG_SYNC;
	bad = NULL;
	ASSERT_EQ(ibv_post_srq_ops(basic, &wr, &bad), EINVAL);
	ASSERT_EQ(bad, &wr);
	ASSERT_EQ(ibv_destroy_srq(basic), 0);

	/* too many SGEs, an unknown opcode, handle 0: EINVAL at that WR,
	 * the ones before it carried out (unsignalled: no completion) */
	for (i = 0; i < 8; i++) {
		sge[i].addr = (uintptr_t)e.buf;
		sge[i].length = 8;
		sge[i].lkey = e.mr->lkey;
	}
	memset(&wr2, 0, sizeof(wr2));
	wr2.opcode = IBV_WR_TAG_ADD;
	wr2.tm.add.sg_list = sge;
	wr2.tm.add.num_sge = (int)da.tm_caps.max_sge + 1;
	wr.next = &wr2;
	bad = NULL;
	ASSERT_EQ(ibv_post_srq_ops(srq, &wr, &bad), EINVAL);
	ASSERT_EQ(bad, &wr2);
	wr2.tm.add.num_sge = -1;
	ASSERT_EQ(ibv_post_srq_ops(srq, &wr2, &bad), EINVAL);
	wr2.tm.add.num_sge = 1;
	wr2.opcode = (enum ibv_ops_wr_opcode)77;
	ASSERT_EQ(ibv_post_srq_ops(srq, &wr2, &bad), EINVAL);
	wr2.opcode = IBV_WR_TAG_DEL;
	wr2.tm.handle = 0;
	ASSERT_EQ(ibv_post_srq_ops(srq, &wr2, &bad), EINVAL);
	wr2.tm.handle = 0xffffffffu;
	ASSERT_EQ(ibv_post_srq_ops(srq, &wr2, &bad), EINVAL);

	/* a list of 2: the third ADD is ENOMEM */
	wr2.opcode = IBV_WR_TAG_ADD;
	wr2.next = NULL;
	for (i = 0; i < 2; i++)
		ASSERT_EQ(ibv_post_srq_ops(srq, &wr2, &bad), 0);
	ret = ibv_post_srq_ops(srq, &wr2, &bad);
	ASSERT_EQ(ret, ENOMEM);
	ASSERT_EQ(bad, &wr2);
	ASSERT_EQ(ibv_destroy_srq(srq), 0);
	ep_destroy(&e);
}
