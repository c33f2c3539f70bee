// SPDX-License-Identifier: MIT
/*
 * Issue 14: the owner's L_Keys in an importer's receives, and in its
 * send WQEs on the net path's RC (docs/import.md, "Bounce buffers").
 *
 * The owner (the parent) opens the device, allocates a PD, registers
 * an MR over a buffer (the one it shares) and one over a send buffer of
 * its own, makes an RC QP a in that PD and passes its cmd_fd to the
 * importer (a forked child) by SCM_RIGHTS, with the handles.  The
 * importer imports the PD and the MR, makes an RC QP i on the imported
 * PD (on an SRQ of that PD in the _srq cases) and connects it to a.
 * Then, the importer driving, the owner carrying out its commands:
 *
 *   recv       i's receive names the owner's MR (and, second SGE, an MR
 *              of the importer's own in the imported PD); the owner
 *              SENDs: the bytes land in the owner's buffer (the owner
 *              looks), the second part in the importer's, once the
 *              completion channel fired and the CQ was polled (the QP
 *              case) or through the extended CQ (ibv_cq_ex, the SRQ
 *              case); three more, one with immediate data, the same
 *              (each naming the owner's MR only: on the QP's own queue
 *              posted as it is, the responder scattering into the
 *              owner's memory; the mixed one and an SRQ's through a
 *              bounce)
 *   len        a receive shorter than the message: LOC_LEN_ERR at the
 *              importer, REM_INV_REQ_ERR at the owner, nothing placed
 *   bounds     a receive past the end of the owner's MR: LOC_PROT_ERR,
 *              REM_OP_ERR at the owner, nothing placed
 *   ud         a UD receive names the owner's MR: the GRH and the payload
 *              land there
 *   dereg      a receive posted, then the owner deregisters the MR,
 *              then SENDs: LOC_PROT_ERR at the importer, nothing placed,
 *              the QP to error; the sender REM_OP_ERR on a QP's own
 *              queue (its receive names the owner's key as it is: the
 *              responder meets the bad key, as on hardware), success on
 *              an SRQ (a bounce: the key fails at the importer's poll,
 *              after the ACK); a receive posted after (on a QP made
 *              again): LOC_PROT_ERR as well
 *   sends      i on the imported PD, connected to j (the importer's own
 *              PD): SEND and WRITE gather from the owner's MR, READ and
 *              an atomic land in it (the owner looks), a READ of several
 *              packets too; past the MR's end: LOC_PROT_ERR; after the
 *              owner's dereg: LOC_PROT_ERR; an XRC_SEND QP on the
 *              imported PD SENDs from the owner's MR to an XRC SRQ of
 *              the importer's and READs into the owner's MR
 *
 * Each on the same-host path and on the net path (SOFTHCA_NET=1 in both
 * processes; the importer's TCP sockets must have carried bytes, or, UD,
 * the owner's SOFTHCA_PCAP trace its datagrams), and some with the MRs on
 * CMA (SOFTHCA_MAP=0: process_vm_writev/readv, no mapped segments).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <sys/socket.h>

#include "harness.h"
#include "common.h"
#include "ep.h"
#include "import_ep.h"
#include "xrc_ep.h"

#define BUF	65536u
#define MSG	1024u
#define HALF	512u
#define RECV	4096u		/* receives land here (owner's) */
#define WDST	8192u		/* i WRITEs from here (owner's) */
#define RDST	12288u		/* i READs into here (owner's) */
#define ARES	16384u		/* i's atomic result (owner's) */
#define XRDST	24576u		/* the XRC READ lands here (owner's) */
#define BIG	32768u		/* a READ of several packets (owner's) */
#define BIGLEN	20000u
#define LDST	0u		/* j's receive buffer (importer's own) */
#define LOWN	8192u		/* the second SGE of a receive (own) */
#define LSRC	16384u		/* j's READ source (importer's own) */
#define LATOM	40960u		/* the atomic's target (importer's own) */
#define ATOM_V	0x1122334455667788ull

enum scen { S_RECV, S_LEN, S_BOUNDS, S_DEREG, S_SENDS, S_UD };

struct arg {
	enum scen s;
	bool srq;
	bool cma;			/* SOFTHCA_MAP=0 in both processes */
};

static const int all_access = IMPORT_ALL_ACCESS;

/* The importer's commands to the owner (struct import_cmd): op S send,
 * W with imm, C check, G a GRH and payload, A the atomic's result, D
 * dereg, R a connected again, Q quit; status: S, W: the completion's. */

/* An RC endpoint on ctx/pd (on srq if not NULL) with mr over buf, its
 * QP in INIT. */
static void ep_make_t(struct ep *e, enum ibv_qp_type type,
		      struct ibv_context *ctx, struct ibv_pd *pd,
		      struct ibv_srq *srq, struct ibv_mr *mr, uint8_t *buf,
		      bool cq_ex, bool chan)
{
	struct ibv_qp_init_attr qa;
	struct ibv_qp_attr a;

	memset(e, 0, sizeof(*e));
	e->type = type;
	e->ctx = ctx;
	e->pd = pd;
	e->mr = mr;
	e->buf = buf;
	e->size = BUF;
	e->srq = srq;
	e->mtu = IBV_MTU_4096;
	e->scq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	ASSERT_NOT_NULL(e->scq);
	if (cq_ex) {
		struct ibv_cq_init_attr_ex ca;

		memset(&ca, 0, sizeof(ca));
		ca.cqe = 16;
		ca.wc_flags = IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_QP_NUM;
		e->rcqx = ibv_create_cq_ex(ctx, &ca);
		ASSERT_NOT_NULL(e->rcqx);
		e->rcq = ibv_cq_ex_to_cq(e->rcqx);
	} else {
		if (chan) {
			e->ch = ibv_create_comp_channel(ctx);
			ASSERT_NOT_NULL(e->ch);
		}
		e->rcq = ibv_create_cq(ctx, 16, NULL, e->ch, 0);
		ASSERT_NOT_NULL(e->rcq);
	}
	memset(&qa, 0, sizeof(qa));
	qa.send_cq = e->scq;
	qa.recv_cq = e->rcq;
	qa.srq = srq;
	qa.qp_type = type;
	qa.cap.max_send_wr = qa.cap.max_recv_wr = 16;
	qa.cap.max_send_sge = qa.cap.max_recv_sge = 2;
	e->qp = ibv_create_qp(pd, &qa);
	ASSERT_NOT_NULL(e->qp);
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qp_access_flags = all_access & ~IBV_ACCESS_LOCAL_WRITE;
	a.qkey = 0x11111111;	/* ep_post's */
	ASSERT_EQ(ibv_modify_qp(e->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
				IBV_QP_PORT |
				(type == IBV_QPT_UD ? IBV_QP_QKEY :
						      IBV_QP_ACCESS_FLAGS)),
		  0);
	ASSERT_EQ(ibv_query_gid(ctx, 1, 0, &e->self.gid), 0);
	e->self.qpn = e->qp->qp_num;
	e->self.psn = (uint32_t)rand() & 0xffffff;
	e->self.rkey = mr ? mr->rkey : 0;
	e->self.addr = (uintptr_t)buf;
}

static void ep_make(struct ep *e, struct ibv_context *ctx, struct ibv_pd *pd,
		    struct ibv_srq *srq, struct ibv_mr *mr, uint8_t *buf,
		    bool cq_ex, bool chan)
{
	ep_make_t(e, IBV_QPT_RC, ctx, pd, srq, mr, buf, cq_ex, chan);
}

static void ep_unmake(struct ep *e)
{
	if (e->ah)
		ASSERT_EQ(ibv_destroy_ah(e->ah), 0);
	ASSERT_EQ(ibv_destroy_qp(e->qp), 0);
	ASSERT_EQ(ibv_destroy_cq(e->scq), 0);
	ASSERT_EQ(ibv_destroy_cq(e->rcq), 0);
	if (e->ch)
		ASSERT_EQ(ibv_destroy_comp_channel(e->ch), 0);
}

static void connect_to(struct ep *e, const struct ep_info *peer)
{
	import_ep_connect(e, peer, 7);
}

/* One receive on e (its SRQ if it has one): sge[0..n). */
static int post_recv(struct ep *e, uint64_t wr_id, struct ibv_sge *sge,
		     int n)
{
	return import_post_recv(e->qp, e->srq, wr_id, sge, n);
}

static void cmd(int sock, char op, uint32_t off, uint32_t len, uint32_t seed,
		enum ibv_wc_status st)
{
	import_cmd_send(sock, op, off, len, seed, 0, st);
	duo_expect(sock, 'k');
}

/* The owner's buffer at off: len bytes of seed's pattern (0: untouched),
 * and untouched around them. */
static void owner_check(int sock, uint32_t off, uint32_t len, uint32_t seed)
{
	cmd(sock, 'C', off, len, seed, IBV_WC_SUCCESS);
}

/* One receive completion of e, through ibv_poll_cq or the extended CQ. */
static struct ibv_wc expect_recv(struct ep *e, uint64_t wr_id,
				 enum ibv_wc_status st)
{
	struct ibv_wc wc;

	if (!e->rcqx)
		return ep_expect(e->rcq, e->qp, wr_id, st);
	import_start_poll(e->rcqx);
	memset(&wc, 0, sizeof(wc));
	wc.wr_id = e->rcqx->wr_id;
	wc.status = e->rcqx->status;
	wc.byte_len = ibv_wc_read_byte_len(e->rcqx);
	wc.qp_num = ibv_wc_read_qp_num(e->rcqx);
	wc.vendor_err = ibv_wc_read_vendor_err(e->rcqx);
	ibv_end_poll(e->rcqx);
	ASSERT_U64_EQ(wc.wr_id, wr_id);
	ASSERT_EQ(wc.status, st);
	ASSERT_EQ(wc.qp_num, e->qp->qp_num);
	return wc;
}

/* A tag-matching SRQ of the imported PD takes a receive naming the
 * owner's MR (its traffic: test_import_tm.c); destroyed with it, its
 * bounce goes. */
static void tm_posted(struct ep *i, struct ibv_mr *mr,
		      const struct import_offer *of)
{
	struct ibv_srq_init_attr_ex sa;
	struct ibv_recv_wr wr, *bad;
	struct ibv_sge sge = { of->addr + RECV, MSG, mr->lkey };
	struct ibv_srq *srq;

	memset(&sa, 0, sizeof(sa));
	sa.attr.max_wr = 4;
	sa.attr.max_sge = 1;
	sa.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD |
		       IBV_SRQ_INIT_ATTR_CQ | IBV_SRQ_INIT_ATTR_TM;
	sa.srq_type = IBV_SRQT_TM;
	sa.pd = i->pd;
	sa.cq = i->rcq;
	sa.tm_cap.max_num_tags = 4;
	sa.tm_cap.max_ops = 4;
	srq = ibv_create_srq_ex(i->ctx, &sa);
	ASSERT_NOT_NULL(srq);
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = 20;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	ASSERT_EQ(ibv_post_srq_recv(srq, &wr, &bad), 0);
	ASSERT_EQ(ibv_destroy_srq(srq), 0);
}

/* The receive cases: i receives from the owner's a. */
static void recv_cases(int sock, const struct arg *ar, struct ibv_context *ic,
		       struct ibv_pd *pd, struct ibv_mr *mr,
		       const struct import_offer *of)
{
	struct ibv_srq *srq = NULL;
	struct ibv_mr *smr;
	struct ibv_sge sge[2];
	struct ibv_wc wc;
	uint8_t *lbuf;
	struct ep i;
	int k;

	/* an MR of the importer's own in the imported PD */
	ASSERT_EQ(posix_memalign((void **)&lbuf, 4096, BUF), 0);
	memset(lbuf, EP_SENTINEL, BUF);
	smr = ibv_reg_mr(pd, lbuf, BUF, IBV_ACCESS_LOCAL_WRITE);
	ASSERT_NOT_NULL(smr);
	if (ar->srq) {
		struct ibv_srq_init_attr sa;

		memset(&sa, 0, sizeof(sa));
		sa.attr.max_wr = 16;
		sa.attr.max_sge = 2;
		srq = ibv_create_srq(pd, &sa);
		ASSERT_NOT_NULL(srq);
	}
	ep_make_t(&i, ar->s == S_UD ? IBV_QPT_UD : IBV_QPT_RC, ic, pd, srq,
		  mr, (uint8_t *)(uintptr_t)of->addr,
		  ar->s == S_RECV && ar->srq, ar->s == S_RECV && !ar->srq);
	xwrite(sock, &i.self, sizeof(i.self));
	connect_to(&i, &of->a);
	duo_expect(sock, 'c');

	switch (ar->s) {
	case S_RECV:
		/* the owner's MR, then ours */
		sge[0] = (struct ibv_sge){ of->addr + RECV, HALF, mr->lkey };
		sge[1] = (struct ibv_sge){ (uintptr_t)lbuf + LOWN, HALF,
					   smr->lkey };
		ASSERT_EQ(post_recv(&i, 1, sge, 2), 0);
		if (i.ch)
			ASSERT_EQ(ibv_req_notify_cq(i.rcq, 0), 0);
		cmd(sock, 'S', 0, MSG, 1, IBV_WC_SUCCESS);
		if (i.ch) {
			struct ibv_cq *ecq;
			void *ectx;

			/* the sender fired the channel; the poll copies */
			ASSERT_EQ(ibv_get_cq_event(i.ch, &ecq, &ectx), 0);
			ASSERT(ecq == i.rcq);
			ibv_ack_cq_events(i.rcq, 1);
		}
		wc = expect_recv(&i, 1, IBV_WC_SUCCESS);
		ASSERT_EQ(wc.byte_len, MSG);
		ASSERT_EQ(wc.vendor_err, 0);
		ASSERT_EQ(ep_find_pattern_diff(lbuf + LOWN, HALF, 1, HALF), -1);
		ASSERT_EQ(ep_find_non_sentinel(lbuf + LOWN + HALF, 64), -1);
		owner_check(sock, RECV, HALF, 1);
		/* several, then the messages, with immediate data */
		for (k = 0; k < 3; k++) {
			sge[0] = (struct ibv_sge){ of->addr + RECV +
							   k * 2 * MSG,
						   MSG, mr->lkey };
			ASSERT_EQ(post_recv(&i, 10 + k, sge, 1), 0);
		}
		for (k = 0; k < 3; k++)
			cmd(sock, k == 1 ? 'W' : 'S', 0, MSG, 2 + k,
			    IBV_WC_SUCCESS);
		for (k = 0; k < 3; k++) {
			wc = expect_recv(&i, 10 + k, IBV_WC_SUCCESS);
			ASSERT_EQ(wc.byte_len, MSG);
		}
		for (k = 0; k < 3; k++)
			owner_check(sock, RECV + k * 2 * MSG, MSG, 2 + k);
		if (!ar->srq)
			tm_posted(&i, mr, of);
		/* flushed: the completions say so, nothing of the bounce
		 * shows (vendor_err 0), nothing is placed */
		for (k = 0; k < 2; k++) {
			sge[0] = (struct ibv_sge){ of->addr + BIG + k * 2 * MSG,
						   MSG, mr->lkey };
			ASSERT_EQ(post_recv(&i, 30 + k, sge, 1), 0);
		}
		if (!ar->srq) {
			struct ibv_qp_attr qa = { .qp_state = IBV_QPS_ERR };

			ASSERT_EQ(ibv_modify_qp(i.qp, &qa, IBV_QP_STATE), 0);
			for (k = 0; k < 2; k++) {
				wc = expect_recv(&i, 30 + k,
						 IBV_WC_WR_FLUSH_ERR);
				ASSERT_EQ(wc.vendor_err, 0);
			}
			owner_check(sock, BIG, 4 * MSG, 0);
		}
		break;
	case S_UD:
		/* a datagram: the GRH's 40 bytes, then the payload, both
		 * in the owner's MR */
		sge[0] = (struct ibv_sge){ of->addr + RECV, 40 + MSG,
					   mr->lkey };
		ASSERT_EQ(post_recv(&i, 6, sge, 1), 0);
		cmd(sock, 'S', 0, MSG, 6, IBV_WC_SUCCESS);
		wc = expect_recv(&i, 6, IBV_WC_SUCCESS);
		ASSERT_EQ(wc.byte_len, 40 + MSG);
		cmd(sock, 'G', RECV, MSG, 6, IBV_WC_SUCCESS);
		break;
	case S_LEN:
		/* IBA 10.7.2.1: the receive is too short */
		sge[0] = (struct ibv_sge){ of->addr + RECV, HALF, mr->lkey };
		ASSERT_EQ(post_recv(&i, 2, sge, 1), 0);
		cmd(sock, 'S', 0, MSG, 1, IBV_WC_REM_INV_REQ_ERR);
		expect_recv(&i, 2, IBV_WC_LOC_LEN_ERR);
		owner_check(sock, RECV, MSG, 0);
		break;
	case S_BOUNDS:
		/* past the end of the owner's MR: as a bad key of ours */
		sge[0] = (struct ibv_sge){ of->addr + of->length - HALF, MSG,
					   mr->lkey };
		ASSERT_EQ(post_recv(&i, 3, sge, 1), 0);
		cmd(sock, 'S', 0, MSG, 1, IBV_WC_REM_OP_ERR);
		expect_recv(&i, 3, IBV_WC_LOC_PROT_ERR);
		owner_check(sock, BUF - HALF, HALF, 0);
		break;
	case S_DEREG:
		/* posted while the MR lives, placed after its dereg */
		sge[0] = (struct ibv_sge){ of->addr + RECV, MSG, mr->lkey };
		ASSERT_EQ(post_recv(&i, 4, sge, 1), 0);
		cmd(sock, 'D', 0, 0, 0, IBV_WC_SUCCESS);
		cmd(sock, 'S', 0, MSG, 1,
		    ar->srq ? IBV_WC_SUCCESS : IBV_WC_REM_OP_ERR);
		expect_recv(&i, 4, IBV_WC_LOC_PROT_ERR);
		owner_check(sock, RECV, MSG, 0);
		/* the QP goes to error, as for a bad key of ours */
		ep_wait_qp_state(i.qp, IBV_QPS_ERR);
		/* posted after it, on a QP made again: the key fails at
		 * once */
		ep_unmake(&i);
		ep_make(&i, ic, pd, srq, mr, (uint8_t *)(uintptr_t)of->addr,
			false, false);
		{
			struct import_cmd c = { .op = 'R' };

			xwrite(sock, &c, sizeof(c));
			xwrite(sock, &i.self, sizeof(i.self));
			duo_expect(sock, 'k');
		}
		connect_to(&i, &of->a);
		ASSERT_EQ(post_recv(&i, 5, sge, 1), 0);
		cmd(sock, 'S', 0, MSG, 1, IBV_WC_REM_OP_ERR);
		expect_recv(&i, 5, IBV_WC_LOC_PROT_ERR);
		owner_check(sock, RECV, MSG, 0);
		break;
	default:
		break;
	}
	/* (UD's datagrams: the owner's trace says) */
	if (getenv("SOFTHCA_NET") && ar->s != S_UD)
		ASSERT_GT(ep_tcp_bytes(), 0);
	cmd(sock, 'Q', 0, 0, 0, IBV_WC_SUCCESS);
	ep_unmake(&i);
	if (srq)
		ASSERT_EQ(ibv_destroy_srq(srq), 0);
	ASSERT_EQ(ibv_dereg_mr(smr), 0);
	free(lbuf);
}

/* XRC: an XRC_SEND QP on the imported PD (i's), toward an XRC SRQ of
 * ours (j's PD): a SEND from the owner's MR, a READ into it. */
static void xrc_case(int sock, struct ep *i, struct ep *j, struct ibv_mr *mr,
		     uint8_t *obuf)
{
	struct ibv_xrcd *x = xrc_domain_private(j->ctx);
	struct ibv_qp *sq = xrc_qp_init(i, IBV_QPT_XRC_SEND, NULL);
	struct ibv_srq *srq = xrc_srq(j, x, j->rcq, 4);
	struct ibv_qp *rq = xrc_qp_init(j, IBV_QPT_XRC_RECV, x);
	struct ibv_send_wr wr, *bad;
	struct ibv_sge sge;
	uint32_t srqn;

	ASSERT_EQ(ibv_get_srq_num(srq, &srqn), 0);
	xrc_connect(i, sq, rq->qp_num, &j->self.gid, NULL);
	xrc_connect(j, rq, sq->qp_num, &i->self.gid, NULL);
	memset(j->buf + LDST + 2 * MSG, EP_SENTINEL, MSG + 64);
	xrc_srq_post(j, srq, 11, LDST + 2 * MSG, MSG);

	memset(&wr, 0, sizeof(wr));
	sge = (struct ibv_sge){ (uintptr_t)obuf, MSG, mr->lkey };
	wr.wr_id = 12;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_SEND;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.qp_type.xrc.remote_srqn = srqn;
	ASSERT_EQ(ibv_post_send(sq, &wr, &bad), 0);
	ep_expect(i->scq, sq, 12, IBV_WC_SUCCESS);
	ep_expect(j->rcq, NULL, 11, IBV_WC_SUCCESS);
	ASSERT_EQ(ep_find_pattern_diff(j->buf + LDST + 2 * MSG, MSG, 9, 0),
		  -1);
	ASSERT_EQ(ep_find_non_sentinel(j->buf + LDST + 3 * MSG, 64), -1);

	sge = (struct ibv_sge){ (uintptr_t)obuf + XRDST, MSG, mr->lkey };
	wr.wr_id = 13;
	wr.opcode = IBV_WR_RDMA_READ;
	wr.wr.rdma.remote_addr = (uintptr_t)j->buf + LSRC;
	wr.wr.rdma.rkey = j->mr->rkey;
	ASSERT_EQ(ibv_post_send(sq, &wr, &bad), 0);
	ep_expect(i->scq, sq, 13, IBV_WC_SUCCESS);
	owner_check(sock, XRDST, MSG, 7);

	ASSERT_EQ(ibv_destroy_qp(sq), 0);
	ASSERT_EQ(ibv_destroy_qp(rq), 0);
	ASSERT_EQ(ibv_destroy_srq(srq), 0);
	ASSERT_EQ(ibv_close_xrcd(x), 0);
}

/* The send cases: i on the imported PD, j on a PD of ours. */
static void send_cases(int sock, struct ibv_context *ic, struct ibv_pd *pd,
		       struct ibv_mr *mr, const struct import_offer *of)
{
	uint8_t *obuf = (uint8_t *)(uintptr_t)of->addr;
	struct ibv_pd *lpd;
	struct ibv_mr *lmr;
	struct ep i, j;
	uint8_t *lbuf;

	ASSERT_EQ(posix_memalign((void **)&lbuf, 4096, BUF), 0);
	memset(lbuf, EP_SENTINEL, BUF);
	ep_fill_pattern(lbuf + LSRC, BIGLEN, 7, 0);
	*(uint64_t *)(lbuf + LATOM) = ATOM_V;
	lpd = ibv_alloc_pd(ic);
	ASSERT_NOT_NULL(lpd);
	lmr = ibv_reg_mr(lpd, lbuf, BUF, all_access);
	ASSERT_NOT_NULL(lmr);
	ep_make(&i, ic, pd, NULL, mr, obuf, false, false);
	ep_make(&j, ic, lpd, NULL, lmr, lbuf, false, false);
	connect_to(&i, &j.self);
	connect_to(&j, &i.self);

	/* SEND gathered from the owner's MR (its pattern at 0, seed 9) */
	ASSERT_EQ(ep_post_recv(&j, 1, LDST, MSG), 0);
	ASSERT_EQ(ep_post(&i, 2, IBV_WR_SEND, 0, MSG, 0, 0), 0);
	ep_expect(i.scq, i.qp, 2, IBV_WC_SUCCESS);
	ASSERT_EQ(ep_expect(j.rcq, j.qp, 1, IBV_WC_SUCCESS).byte_len, MSG);
	ASSERT_EQ(ep_find_pattern_diff(lbuf + LDST, MSG, 9, 0), -1);
	ASSERT_EQ(ep_find_non_sentinel(lbuf + LDST + MSG, 64), -1);

	/* WRITE from the owner's MR into ours */
	ASSERT_EQ(ep_post(&i, 3, IBV_WR_RDMA_WRITE, WDST, MSG, LDST + MSG, 0),
		  0);
	ep_expect(i.scq, i.qp, 3, IBV_WC_SUCCESS);
	ASSERT_EQ(ep_find_pattern_diff(lbuf + LDST + MSG, MSG, 9, WDST), -1);

	/* READ into the owner's MR, one packet and several */
	ASSERT_EQ(ep_post(&i, 4, IBV_WR_RDMA_READ, RDST, MSG, LSRC, 0), 0);
	ep_expect(i.scq, i.qp, 4, IBV_WC_SUCCESS);
	owner_check(sock, RDST, MSG, 7);
	ASSERT_EQ(ep_post(&i, 5, IBV_WR_RDMA_READ, BIG, BIGLEN, LSRC, 0), 0);
	ep_expect(i.scq, i.qp, 5, IBV_WC_SUCCESS);
	owner_check(sock, BIG, BIGLEN, 7);

	/* an atomic's result into the owner's MR */
	ep_post_atomic(&i, 6, IBV_WR_ATOMIC_FETCH_AND_ADD, ARES, LATOM, 5, 0);
	ep_expect(i.scq, i.qp, 6, IBV_WC_SUCCESS);
	ASSERT_U64_EQ(*(uint64_t *)(lbuf + LATOM), ATOM_V + 5);
	cmd(sock, 'A', ARES, 8, 0, IBV_WC_SUCCESS);

	xrc_case(sock, &i, &j, mr, obuf);

	/* past the end of the owner's MR: a local protection error */
	ASSERT_EQ(ep_post(&i, 7, IBV_WR_SEND, of->length - HALF, MSG, 0, 0),
		  0);
	ep_expect(i.scq, i.qp, 7, IBV_WC_LOC_PROT_ERR);
	ep_unmake(&i);
	ep_unmake(&j);

	/* after the owner's dereg: the same, for a SEND and a READ */
	ep_make(&i, ic, pd, NULL, mr, obuf, false, false);
	ep_make(&j, ic, lpd, NULL, lmr, lbuf, false, false);
	connect_to(&i, &j.self);
	connect_to(&j, &i.self);
	ASSERT_EQ(ep_post(&i, 8, IBV_WR_RDMA_READ, RDST, MSG, LSRC, 0), 0);
	ep_expect(i.scq, i.qp, 8, IBV_WC_SUCCESS);
	cmd(sock, 'D', 0, 0, 0, IBV_WC_SUCCESS);
	ASSERT_EQ(ep_post(&i, 9, IBV_WR_RDMA_READ, RDST, MSG, LSRC, 0), 0);
	ep_expect(i.scq, i.qp, 9, IBV_WC_LOC_PROT_ERR);
	ep_unmake(&i);
	ep_make(&i, ic, pd, NULL, mr, obuf, false, false);
	ep_unmake(&j);
	ep_make(&j, ic, lpd, NULL, lmr, lbuf, false, false);
	connect_to(&i, &j.self);
	connect_to(&j, &i.self);
	ASSERT_EQ(ep_post(&i, 10, IBV_WR_SEND, 0, MSG, 0, 0), 0);
	ep_expect(i.scq, i.qp, 10, IBV_WC_LOC_PROT_ERR);

	if (getenv("SOFTHCA_NET"))
		ASSERT_GT(ep_tcp_bytes(), 0);
	cmd(sock, 'Q', 0, 0, 0, IBV_WC_SUCCESS);
	ep_unmake(&i);
	ep_unmake(&j);
	ASSERT_EQ(ibv_dereg_mr(lmr), 0);
	ASSERT_EQ(ibv_dealloc_pd(lpd), 0);
	free(lbuf);
}

static void importer(int sock, void *arg)
{
	const struct arg *ar = arg;
	struct importer im;

	importer_begin(&im, sock);
	if (ar->s == S_SENDS)
		send_cases(sock, im.ctx, im.pd, im.mr, &im.of);
	else
		recv_cases(sock, ar, im.ctx, im.pd, im.mr, &im.of);
	importer_end(&im);
}

/* The owner: its buffer shared, a send buffer of its own, QP a. */
static void owner(const struct arg *ar, bool net)
{
	struct import_owner ow;
	uint8_t *buf, *sbuf;
	struct ep a;
	struct import_cmd c;

	import_env(net, ar->cma);
	/* UD on the net path: its datagrams in each process's trace */
	if (net && ar->s == S_UD)
		setenv("SOFTHCA_PCAP", "/tmp/softhca-test-import-ud-%p.pcap",
		       1);
	else
		unsetenv("SOFTHCA_PCAP");
	import_owner_begin(&ow, importer, (void *)ar, BUF, all_access,
			   all_access);
	buf = ow.buf;
	sbuf = ow.sbuf;
	/* the sends' sources (seed 9), the rest untouched */
	ep_fill_pattern(buf, MSG, 9, 0);
	ep_fill_pattern(buf + WDST, MSG, 9, WDST);
	ep_make_t(&a, ar->s == S_UD ? IBV_QPT_UD : IBV_QPT_RC, ow.ctx, ow.pd,
		  NULL, ow.smr, sbuf, false, false);
	import_owner_offer(&ow, &a.self);
	if (ar->s != S_SENDS)
		import_owner_connect(&ow, &a);
	while (import_owner_next(&ow, &c)) {
		switch (c.op) {
		case 'S':
		case 'W':
			ep_fill_pattern(sbuf, c.len, c.seed, 0);
			ASSERT_EQ(ep_post(&a, 1, c.op == 'S' ? IBV_WR_SEND :
						 IBV_WR_SEND_WITH_IMM,
					  0, c.len, 0, 0), 0);
			ep_expect(a.scq, a.qp, 1,
				  (enum ibv_wc_status)c.status);
			break;
		case 'C':
			import_owner_check(&ow, c.off, c.len, c.seed, true);
			break;
		case 'G':
			/* a GRH (IPv4: its header in the last 20 bytes;
			 * IPv6: version 6 first), then the payload */
			ASSERT(buf[c.off + 20] == 0x45 ||
			       buf[c.off] >> 4 == 6);
			ASSERT_EQ(ep_find_pattern_diff(buf + c.off + 40, c.len,
						       c.seed, 0), -1);
			ASSERT_EQ(ep_find_non_sentinel(buf + c.off + 40 + c.len,
						       64), -1);
			ASSERT_EQ(ep_find_non_sentinel(buf + c.off - 64, 64),
				  -1);
			break;
		case 'A':
			ASSERT_U64_EQ(*(uint64_t *)(buf + c.off), ATOM_V);
			ASSERT_EQ(ep_find_non_sentinel(buf + c.off + 8, 64),
				  -1);
			break;
		case 'D':
			import_owner_dereg(&ow);
			break;
		case 'R': {
			/* a connected again, to the importer's new QP */
			struct ibv_qp_attr qa;
			struct ep_info info;

			xread(ow.d.fd, &info, sizeof(info));
			memset(&qa, 0, sizeof(qa));
			qa.qp_state = IBV_QPS_RESET;
			ASSERT_EQ(ibv_modify_qp(a.qp, &qa, IBV_QP_STATE), 0);
			qa.qp_state = IBV_QPS_INIT;
			qa.port_num = 1;
			qa.qp_access_flags = all_access &
					     ~IBV_ACCESS_LOCAL_WRITE;
			ASSERT_EQ(ibv_modify_qp(a.qp, &qa,
						IBV_QP_STATE |
						IBV_QP_PKEY_INDEX |
						IBV_QP_PORT |
						IBV_QP_ACCESS_FLAGS), 0);
			connect_to(&a, &info);
			break;
		}
		default:
			ASSERT(0);
		}
		duo_signal(ow.d.fd, 'k');
	}
	import_owner_wait(&ow);
	if (net && ar->s == S_UD) {
		char path[128];

		snprintf(path, sizeof(path),
			 "/tmp/softhca-test-import-ud-%d.pcap", (int)getpid());
		ASSERT_GT(ep_pcap_records(path), 0);
		unlink(path);
		snprintf(path, sizeof(path),
			 "/tmp/softhca-test-import-ud-%d.pcap", (int)ow.d.pid);
		unlink(path);
	}
	ep_unmake(&a);
	import_owner_end(&ow);
}

#define CASE(name, scen, use_srq, net)                                    \
	IMPORT_CASE(name, net, scen, use_srq, false)
#define CASE_CMA(name, scen, use_srq)                                     \
	IMPORT_CASE(name, false, scen, use_srq, true)

CASE(recv_qp, S_RECV, false, false)
CASE(recv_srq, S_RECV, true, false)
CASE(recv_len_err, S_LEN, false, false)
CASE(recv_bounds, S_BOUNDS, false, false)
CASE(recv_dereg, S_DEREG, false, false)
CASE(recv_srq_dereg, S_DEREG, true, false)
CASE(sends, S_SENDS, false, false)
CASE(recv_qp_net, S_RECV, false, true)
CASE(recv_srq_net, S_RECV, true, true)
CASE(recv_len_err_net, S_LEN, false, true)
CASE(recv_bounds_net, S_BOUNDS, false, true)
CASE(recv_dereg_net, S_DEREG, false, true)
CASE(sends_net, S_SENDS, false, true)
CASE(recv_ud, S_UD, false, false)
CASE(recv_ud_net, S_UD, false, true)
CASE_CMA(recv_srq_cma, S_RECV, true)
CASE_CMA(recv_dereg_cma, S_DEREG, false)
CASE_CMA(sends_cma, S_SENDS, false)
