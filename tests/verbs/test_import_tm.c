// SPDX-License-Identifier: MIT
/*
 * Issue 14: the owner's L_Keys in an importer's tag-matching SRQ
 * (docs/import.md, "Bounce buffers"; docs/tag-matching.md).
 *
 * The owner (the parent) opens the device, allocates a PD, registers an
 * MR over the buffer it shares and one over a send buffer of its own,
 * makes an RC QP a in that PD and passes its cmd_fd to the importer (a
 * forked child) with the handles.  The importer imports the PD and the
 * MR, makes a tag-matching SRQ on the imported PD and an RC QP i on it,
 * and connects i to a.  Then, the importer driving, the owner sends
 * tag-matching messages to i on command:
 *
 *   tm        a tag (IBV_WR_TAG_ADD) whose buffer is the owner's MR and
 *             an MR of the importer's own; an EAGER message matches it:
 *             one IBV_WC_TM_RECV with TM_MATCH | TM_DATA_VALID, src_qp
 *             the owner's QP, the bytes in both MRs; a RNDV whose RVH
 *             names the owner's send buffer matches a tag in the owner's
 *             MR: TM_MATCH, then TM_DATA_VALID with the RVH's length,
 *             the bytes (read from the sender) in the owner's MR, and the
 *             owner's QP receives the FIN; a RNDV longer than its tag's
 *             buffer: IBV_WC_TM_RNDV_INCOMPLETE, the TMH and RVH in the
 *             owner's MR; a tag deleted (TAG_DEL): its message is
 *             unexpected and lands, whole, in an ordinary WQE of the SRQ
 *             (ibv_post_srq_recv) that names the owner's MR; a NO_TAG
 *             message the same (IBV_WC_TM_NO_TAG)
 *   dereg     a tag in the owner's MR, then the owner deregisters it,
 *             then the message: IBV_WC_LOC_PROT_ERR at the importer's
 *             poll, nothing placed, i to error; the sender's SEND
 *             succeeded (the bytes reached the bounce)
 *   len       an EAGER message longer than the tag's buffer:
 *             IBV_WC_LOC_LEN_ERR, the owner's REM_INV_REQ_ERR, nothing
 *             placed
 *   bounds    a tag past the end of the owner's MR (the key fails when
 *             posted: the entry names it as it is): LOC_PROT_ERR, the
 *             owner's REM_OP_ERR, nothing placed
 *
 * Each on the same-host path (mapped, and the tm case on CMA too:
 * SOFTHCA_MAP=0) and on the net path (SOFTHCA_NET=1; the importer's TCP
 * sockets must have carried bytes).  The tm case again with i's receive
 * CQ an ibv_cq_ex: a matched completion's tag and app_ctx
 * (ibv_wc_read_tm_info) and src_qp as without an import.
 */
#include <endian.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <infiniband/tm_types.h>

#include "harness.h"
#include "common.h"
#include "ep.h"
#include "import_ep.h"

#define BUF	65536u
#define MSG	1024u
#define HALF	512u
#define RECV	4096u		/* the eager tag (owner's half) */
#define RDST	8192u		/* the rendezvous tag (owner's) */
#define RLEN	20000u
#define XOFF	32768u		/* the incomplete rendezvous's tag */
#define XLEN	64u
#define UOFF	36864u		/* unexpected: an ordinary WQE */
#define NOFF	40960u		/* NO_TAG: an ordinary WQE */
#define LOWN	8192u		/* the eager tag's second SGE (own) */
#define RSRC	16384u		/* the rendezvous source (sbuf) */
#define FIN_AT	49152u		/* the owner's FIN receive (sbuf) */
#define TMH	16u

enum scen { S_TM, S_DEREG, S_LEN, S_BOUNDS };

struct arg {
	enum scen s;
	bool cma;
	bool cq_ex;		/* i's receive CQ an ibv_cq_ex (tm info) */
};

static const int all_access = IMPORT_ALL_ACCESS;

/* The importer's commands to the owner (struct import_cmd): op E eager,
 * V rendezvous, N no tag, C check (tag 1: not before off), H the headers
 * at off, D dereg, Q quit; status: E, V, N: the SEND's completion; V: 0
 * with a FIN to wait for.  Each answered 'k'. */
static void cmd(int sock, char op, uint32_t off, uint32_t len, uint32_t seed,
		uint64_t tag, int32_t st)
{
	import_cmd_send(sock, op, off, len, seed, tag, st);
	duo_expect(sock, 'k');
}

/* The owner's buffer at off: len bytes of seed's pattern (0: untouched),
 * untouched around them. */
static void owner_check(int sock, uint32_t off, uint32_t len, uint32_t seed)
{
	cmd(sock, 'C', off, len, seed, 0, 0);
}

/* ... untouched after them only (headers before them: 'H') */
static void owner_check_after(int sock, uint32_t off, uint32_t len,
			      uint32_t seed)
{
	cmd(sock, 'C', off, len, seed, 1, 0);
}

/* ------------------------------------------------------------------ */
/* The importer                                                        */

static uint32_t tag_add(struct ibv_srq *srq, uint64_t tag,
			struct ibv_sge *sge, int n, uint64_t wr_id)
{
	struct ibv_ops_wr wr, *bad;

	memset(&wr, 0, sizeof(wr));
	wr.opcode = IBV_WR_TAG_ADD;
	wr.tm.add.recv_wr_id = wr_id;
	wr.tm.add.sg_list = sge;
	wr.tm.add.num_sge = n;
	wr.tm.add.tag = tag;
	wr.tm.add.mask = ~0ull;
	ASSERT_EQ(ibv_post_srq_ops(srq, &wr, &bad), 0);
	return wr.tm.handle;
}

/* One completion of i's extended receive CQ, as an ibv_wc; *tm its tag
 * information. */
static struct ibv_wc poll_ex(struct ep *i, struct ibv_wc_tm_info *tm)
{
	struct ibv_wc wc;

	import_start_poll(i->rcqx);
	memset(&wc, 0, sizeof(wc));
	wc.wr_id = i->rcqx->wr_id;
	wc.status = i->rcqx->status;
	wc.opcode = ibv_wc_read_opcode(i->rcqx);
	wc.wc_flags = ibv_wc_read_wc_flags(i->rcqx);
	wc.byte_len = ibv_wc_read_byte_len(i->rcqx);
	wc.qp_num = ibv_wc_read_qp_num(i->rcqx);
	wc.src_qp = ibv_wc_read_src_qp(i->rcqx);
	wc.vendor_err = ibv_wc_read_vendor_err(i->rcqx);
	ibv_wc_read_tm_info(i->rcqx, tm);
	ibv_end_poll(i->rcqx);
	ASSERT_EQ(wc.qp_num, i->qp->qp_num);
	return wc;
}

/* One completion of i's receive CQ: wr_id, status, opcode, flags (the
 * TM ones), byte_len; src_qp the owner's QP, vendor_err 0; through the
 * extended CQ, a matched one's tag and app_ctx (tag, 0x1234). */
static void expect_tm(struct ep *i, uint64_t wr_id, enum ibv_wc_status st,
		      enum ibv_wc_opcode op, unsigned int flags,
		      uint32_t byte_len, uint64_t tag)
{
	const unsigned int tmf = IBV_WC_TM_MATCH | IBV_WC_TM_DATA_VALID;
	struct ibv_wc_tm_info tm;
	struct ibv_wc wc;

	if (i->rcqx) {
		wc = poll_ex(i, &tm);
		ASSERT_U64_EQ(wc.wr_id, wr_id);
		ASSERT_EQ(wc.status, st);
		if (flags & IBV_WC_TM_MATCH) {
			ASSERT_U64_EQ(tm.tag, tag);
			ASSERT_EQ(tm.priv, 0x1234);
		}
	} else {
		wc = ep_expect(i->rcq, i->qp, wr_id, st);
	}

	ASSERT_EQ(wc.opcode, op);
	ASSERT_EQ(wc.wc_flags & tmf, flags);
	ASSERT_EQ(wc.wc_flags & ~0x7fu, 0);
	if (st == IBV_WC_SUCCESS || st == IBV_WC_TM_RNDV_INCOMPLETE)
		ASSERT_EQ(wc.byte_len, byte_len);
	ASSERT_EQ(wc.src_qp, i->peer.qpn);
	ASSERT_EQ(wc.vendor_err, 0);
}

static void tm_cases(int sock, struct ep *i, struct ibv_srq *srq,
		     struct ibv_cq *ocq, struct ibv_pd *pd, struct ibv_mr *mr,
		     const struct import_offer *of)
{
	struct ibv_sge sge[2];
	struct ibv_recv_wr rw, *rbad;
	struct ibv_ops_wr ow, *obad;
	struct ibv_mr *smr;
	struct ibv_wc wc;
	uint8_t *lbuf;
	uint32_t h;

	/* an MR of the importer's own in the imported PD */
	ASSERT_EQ(posix_memalign((void **)&lbuf, 4096, BUF), 0);
	memset(lbuf, EP_SENTINEL, BUF);
	smr = ibv_reg_mr(pd, lbuf, BUF, IBV_ACCESS_LOCAL_WRITE);
	ASSERT_NOT_NULL(smr);

	/* EAGER, matched: the owner's half, then ours */
	sge[0] = (struct ibv_sge){ of->addr + RECV, HALF, mr->lkey };
	sge[1] = (struct ibv_sge){ (uintptr_t)lbuf + LOWN, HALF, smr->lkey };
	tag_add(srq, 0x11, sge, 2, 100);
	cmd(sock, 'E', 0, MSG, 1, 0x11, IBV_WC_SUCCESS);
	expect_tm(i, 100, IBV_WC_SUCCESS, IBV_WC_TM_RECV,
		  IBV_WC_TM_MATCH | IBV_WC_TM_DATA_VALID, MSG, 0x11);
	ASSERT_EQ(ep_find_pattern_diff(lbuf + LOWN, HALF, 1, HALF), -1);
	ASSERT_EQ(ep_find_non_sentinel(lbuf + LOWN + HALF, 64), -1);
	owner_check(sock, RECV, HALF, 1);

	/* RNDV, matched: the data read from the owner's send buffer into
	 * the owner's shared one; the owner's QP receives the FIN */
	sge[0] = (struct ibv_sge){ of->addr + RDST, RLEN, mr->lkey };
	tag_add(srq, 0x22, sge, 1, 101);
	cmd(sock, 'V', 0, RLEN, 3, 0x22, IBV_WC_SUCCESS);
	expect_tm(i, 101, IBV_WC_SUCCESS, IBV_WC_TM_RECV, IBV_WC_TM_MATCH, 0,
		  0x22);
	expect_tm(i, 101, IBV_WC_SUCCESS, IBV_WC_TM_RECV,
		  IBV_WC_TM_DATA_VALID, RLEN, 0);
	owner_check(sock, RDST, RLEN, 3);

	/* RNDV longer than the tag's buffer: its headers there */
	sge[0] = (struct ibv_sge){ of->addr + XOFF, XLEN, mr->lkey };
	tag_add(srq, 0x33, sge, 1, 102);
	cmd(sock, 'V', 0, 1000, 5, 0x33, -1);
	expect_tm(i, 102, IBV_WC_TM_RNDV_INCOMPLETE, IBV_WC_TM_RECV,
		  IBV_WC_TM_MATCH | IBV_WC_TM_DATA_VALID, 32, 0x33);
	cmd(sock, 'H', XOFF, 32, XLEN, 0x33, 0);

	/* a tag deleted: its bounce goes, its message is unexpected and
	 * lands whole in an ordinary WQE naming the owner's MR */
	sge[0] = (struct ibv_sge){ of->addr + UOFF - 2048, MSG, mr->lkey };
	h = tag_add(srq, 0x44, sge, 1, 103);
	memset(&ow, 0, sizeof(ow));
	ow.wr_id = 7;
	ow.opcode = IBV_WR_TAG_DEL;
	ow.flags = IBV_OPS_SIGNALED;
	ow.tm.handle = h;
	ASSERT_EQ(ibv_post_srq_ops(srq, &ow, &obad), 0);
	wc = ep_expect(ocq, NULL, 7, IBV_WC_SUCCESS);
	ASSERT_EQ(wc.opcode, IBV_WC_TM_DEL);
	sge[0] = (struct ibv_sge){ of->addr + UOFF, TMH + MSG, mr->lkey };
	memset(&rw, 0, sizeof(rw));
	rw.wr_id = 104;
	rw.sg_list = sge;
	rw.num_sge = 1;
	ASSERT_EQ(ibv_post_srq_recv(srq, &rw, &rbad), 0);
	cmd(sock, 'E', 0, MSG, 4, 0x44, IBV_WC_SUCCESS);
	expect_tm(i, 104, IBV_WC_SUCCESS, IBV_WC_TM_RECV, 0, TMH + MSG, 0);
	cmd(sock, 'H', UOFF, TMH, 0, 0x44, 0);
	owner_check_after(sock, UOFF + TMH, MSG, 4);
	owner_check(sock, UOFF - 2048, MSG, 0);

	/* NO_TAG: an ordinary WQE, whole */
	sge[0] = (struct ibv_sge){ of->addr + NOFF, TMH + MSG, mr->lkey };
	rw.wr_id = 105;
	ASSERT_EQ(ibv_post_srq_recv(srq, &rw, &rbad), 0);
	cmd(sock, 'N', 0, MSG, 6, 0, IBV_WC_SUCCESS);
	expect_tm(i, 105, IBV_WC_SUCCESS, IBV_WC_TM_NO_TAG, 0, TMH + MSG, 0);
	cmd(sock, 'H', NOFF, TMH, 0, 0, 0);
	owner_check_after(sock, NOFF + TMH, MSG, 6);

	ASSERT_EQ(ibv_dereg_mr(smr), 0);
	free(lbuf);
}

static void importer(int sock, void *arg)
{
	const struct arg *ar = arg;
	struct ibv_srq_init_attr_ex sa;
	struct ibv_context *ic;
	struct ibv_cq *scq;
	struct ibv_srq *srq;
	struct ibv_sge sge;
	struct importer im;
	struct ibv_pd *pd;
	struct ibv_mr *mr;
	struct ep i;

	importer_begin(&im, sock);
	ic = im.ctx;
	pd = im.pd;
	mr = im.mr;

	scq = ibv_create_cq(ic, 16, NULL, NULL, 0);
	ASSERT_NOT_NULL(scq);
	memset(&sa, 0, sizeof(sa));
	sa.attr.max_wr = 16;
	sa.attr.max_sge = 2;
	sa.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD |
		       IBV_SRQ_INIT_ATTR_CQ | IBV_SRQ_INIT_ATTR_TM;
	sa.srq_type = IBV_SRQT_TM;
	sa.pd = pd;
	sa.tm_cap.max_num_tags = 8;
	sa.tm_cap.max_ops = 8;
	sa.cq = scq;		/* the list operations' completions */
	srq = ibv_create_srq_ex(ic, &sa);
	ASSERT_NOT_NULL(srq);
	import_ep_make_srq(&i, IBV_QPT_RC, ic, pd, srq, mr,
			   (uint8_t *)(uintptr_t)im.of.addr, BUF,
			   ar->cq_ex ? IBV_WC_EX_WITH_BYTE_LEN |
					       IBV_WC_EX_WITH_QP_NUM |
					       IBV_WC_EX_WITH_SRC_QP |
					       IBV_WC_EX_WITH_TM_INFO :
				       0);
	xwrite(sock, &i.self, sizeof(i.self));
	import_ep_connect(&i, &im.of.a, 7);
	duo_expect(sock, 'c');

	switch (ar->s) {
	case S_TM:
		tm_cases(sock, &i, srq, scq, pd, mr, &im.of);
		break;
	case S_DEREG:
		sge = (struct ibv_sge){ im.of.addr + RECV, MSG, mr->lkey };
		tag_add(srq, 0x55, &sge, 1, 200);
		cmd(sock, 'D', 0, 0, 0, 0, 0);
		cmd(sock, 'E', 0, MSG, 1, 0x55, IBV_WC_SUCCESS);
		expect_tm(&i, 200, IBV_WC_LOC_PROT_ERR, IBV_WC_TM_RECV,
			  IBV_WC_TM_MATCH | IBV_WC_TM_DATA_VALID, 0, 0x55);
		owner_check(sock, RECV, MSG, 0);
		ep_wait_qp_state(i.qp, IBV_QPS_ERR);
		break;
	case S_LEN:
		sge = (struct ibv_sge){ im.of.addr + RECV, HALF, mr->lkey };
		tag_add(srq, 0x66, &sge, 1, 300);
		cmd(sock, 'E', 0, MSG, 1, 0x66, IBV_WC_REM_INV_REQ_ERR);
		expect_tm(&i, 300, IBV_WC_LOC_LEN_ERR, IBV_WC_TM_RECV,
			  IBV_WC_TM_MATCH | IBV_WC_TM_DATA_VALID, 0, 0x66);
		owner_check(sock, RECV, MSG, 0);
		break;
	case S_BOUNDS:
		sge = (struct ibv_sge){ im.of.addr + im.of.length - HALF,
					MSG, mr->lkey };
		tag_add(srq, 0x77, &sge, 1, 400);
		cmd(sock, 'E', 0, MSG, 1, 0x77, IBV_WC_REM_OP_ERR);
		expect_tm(&i, 400, IBV_WC_LOC_PROT_ERR, IBV_WC_TM_RECV,
			  IBV_WC_TM_MATCH | IBV_WC_TM_DATA_VALID, 0, 0x77);
		owner_check(sock, BUF - HALF, HALF, 0);
		break;
	}
	if (getenv("SOFTHCA_NET"))
		ASSERT_GT(ep_tcp_bytes(), 0);
	cmd(sock, 'Q', 0, 0, 0, 0, 0);
	import_ep_unmake(&i);
	ASSERT_EQ(ibv_destroy_srq(srq), 0);
	ASSERT_EQ(ibv_destroy_cq(scq), 0);
	importer_end(&im);
}

/* ------------------------------------------------------------------ */
/* The owner                                                           */

/* The TMH (and RVH) at the start of sbuf. */
static void put_tmh(uint8_t *p, uint8_t op, uint64_t tag)
{
	struct ibv_tmh t;

	memset(&t, 0, sizeof(t));
	t.opcode = op;
	t.app_ctx = htonl(0x1234);
	t.tag = htobe64(tag);
	memcpy(p, &t, sizeof(t));
}

static void owner(const struct arg *ar, bool net)
{
	struct import_owner ow;
	uint8_t *buf, *sbuf;
	struct ep a;
	struct import_cmd c;

	import_env(net, ar->cma);
	import_owner_begin(&ow, importer, (void *)ar, BUF, all_access,
			   all_access);
	buf = ow.buf;
	sbuf = ow.sbuf;
	import_ep_make(&a, IBV_QPT_RC, ow.ctx, ow.pd, ow.smr, sbuf, BUF);
	import_owner_offer(&ow, &a.self);
	import_owner_connect(&ow, &a);
	while (import_owner_next(&ow, &c)) {
		switch (c.op) {
		case 'E':
		case 'N':
			put_tmh(sbuf, c.op == 'E' ? IBV_TMH_EAGER :
						    IBV_TMH_NO_TAG, c.tag);
			ep_fill_pattern(sbuf + TMH, c.len, c.seed, 0);
			ASSERT_EQ(ep_post(&a, 1, IBV_WR_SEND, 0, TMH + c.len,
					  0, 0), 0);
			ep_expect(a.scq, a.qp, 1,
				  (enum ibv_wc_status)c.status);
			break;
		case 'V': {
			struct ibv_rvh rv;

			put_tmh(sbuf, IBV_TMH_RNDV, c.tag);
			rv.va = htobe64((uintptr_t)sbuf + RSRC);
			rv.rkey = htonl(ow.smr->rkey);
			rv.len = htonl(c.len);
			memcpy(sbuf + TMH, &rv, sizeof(rv));
			ep_fill_pattern(sbuf + RSRC, c.len, c.seed, 0);
			if (!c.status)
				ASSERT_EQ(ep_post_recv(&a, 2, FIN_AT, 64), 0);
			ASSERT_EQ(ep_post(&a, 1, IBV_WR_SEND, 0, 32, 0, 0),
				  0);
			ep_expect(a.scq, a.qp, 1, IBV_WC_SUCCESS);
			if (!c.status) {
				/* the FIN: opcode FIN, the RVH as sent */
				ASSERT_EQ(ep_expect(a.rcq, a.qp, 2,
						    IBV_WC_SUCCESS).byte_len,
					  32);
				ASSERT_EQ(sbuf[FIN_AT], IBV_TMH_FIN);
				ASSERT_EQ(memcmp(sbuf + FIN_AT + 1, sbuf + 1,
						 31), 0);
			}
			break;
		}
		case 'C':
			import_owner_check(&ow, c.off, c.len, c.seed, !c.tag);
			break;
		case 'H':
			/* the headers the last SEND carried (seed: so
			 * many bytes untouched after them) */
			ASSERT_EQ(memcmp(buf + c.off, sbuf, c.len), 0);
			if (c.seed)
				ASSERT_EQ(ep_find_non_sentinel(
						  buf + c.off + c.len, c.seed),
					  -1);
			if (c.off >= 64)
				ASSERT_EQ(ep_find_non_sentinel(buf + c.off - 64,
							       64), -1);
			break;
		case 'D':
			import_owner_dereg(&ow);
			break;
		default:
			ASSERT(0);
		}
		duo_signal(ow.d.fd, 'k');
	}
	import_owner_wait(&ow);
	import_ep_unmake(&a);
	import_owner_end(&ow);
}

#define CASE(name, scen, net, cma) IMPORT_CASE(name, net, scen, cma, false)
#define CASE_EX(name, scen, net) IMPORT_CASE(name, net, scen, false, true)

CASE(tm, S_TM, false, false)
CASE(tm_cma, S_TM, false, true)
CASE(tm_net, S_TM, true, false)
CASE_EX(tm_cq_ex, S_TM, false)
CASE_EX(tm_cq_ex_net, S_TM, true)
CASE(tm_dereg, S_DEREG, false, false)
CASE(tm_dereg_net, S_DEREG, true, false)
CASE(tm_len, S_LEN, false, false)
CASE(tm_len_net, S_LEN, true, false)
CASE(tm_bounds, S_BOUNDS, false, false)
CASE(tm_bounds_net, S_BOUNDS, true, false)
