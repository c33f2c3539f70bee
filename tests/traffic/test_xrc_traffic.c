// SPDX-License-Identifier: MIT
/*
 * XRC between two processes (docs/xrc.md), on whichever path joins them:
 * the same-host path, the net path (the traffic_test_xrc_traffic_net run:
 * SOFTHCA_NET=1, the XRCETH over TCP, ep_net_check), or two namespaces
 * (tests/netns/test_traffic_netns.sh xrc).
 *
 * The forked side holds an XRC domain with two XRC SRQs (each with its
 * own CQ), an SRQ of another domain, and an XRC_RECV QP per round; the
 * other side an XRC_SEND QP per round.  A round: SENDs and RDMA WRITEs
 * with immediate of several packets into either SRQ (each lands in the
 * SRQ named, completes on that SRQ's CQ with the XRC_RECV QP's number),
 * RDMA READ, atomics and an RDMA WRITE of 32 packets through the SRQ's
 * PD; then the rules the
 * responder applies to the SRQ number and the keys, each in a round of
 * its own (an error ends the QPs): an SRQ of another domain, an SRQ
 * number nobody has, SRQ number 0, and an R_Key of another PD than the
 * SRQ's.
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "ep.h"
#include "xrc_ep.h"

#define BUF	(128 << 10)
#define MSG	(3 * 1024 + 100)	/* several packets at any path MTU */
#define OTHER	(48 << 10)		/* in another PD's MR too */
/* a WRITE of BIG_LEN bytes there: 32 packets (the net path's placement) */
#define BIG	(64 << 10)
#define BIG_LEN	(32 << 10)

enum round {
	R_TRAFFIC,
	R_OTHER_DOMAIN,
	R_NO_SUCH_SRQ,
	R_SRQN_ZERO,
	R_OTHER_PD,
	NROUNDS,
};

/* What the forked side tells the other one. */
struct xinfo {
	uint32_t qpn;			/* this round's XRC_RECV QP */
	uint32_t srqn[2];		/* two XRC SRQs of the domain */
	uint32_t osrqn;			/* an XRC SRQ of another domain */
	uint32_t rkey, orkey;		/* the SRQs' PD's; another PD's */
	uint64_t addr, oaddr;
	union ibv_gid gid;
};

struct sinfo {
	uint32_t qpn;			/* this round's XRC_SEND QP */
	union ibv_gid gid;
};

/* ------------------------------------------------------------------ */
/* The forked side: the domain, its SRQs, an XRC_RECV QP per round      */

/* arg: non-NULL for ODP MRs (IBV_ACCESS_ON_DEMAND) on this side */
static void receiver(int fd, void *arg)
{
	struct ep_opts o;
	struct ep e;
	struct ibv_xrcd *x, *ox;
	struct ibv_srq *s[2], *os;
	struct ibv_cq *cq2;
	struct ibv_pd *opd;
	struct ibv_mr *omr;
	struct xinfo in;
	struct sinfo si;
	struct ibv_wc wc;
	int r, k;

	ep_default_opts(&o, IBV_QPT_RC);
	o.buf_size = BUF;
	if (arg)
		o.access |= IBV_ACCESS_ON_DEMAND;
	ep_create(&e, &o);		/* the device, PD, CQs and buffer */
	x = xrc_domain_private(e.ctx);
	ox = xrc_domain_private(e.ctx);
	cq2 = ibv_create_cq(e.ctx, 64, NULL, NULL, 0);
	ASSERT_NOT_NULL(cq2);
	s[0] = xrc_srq(&e, x, e.rcq, 32);
	s[1] = xrc_srq(&e, x, cq2, 32);
	os = xrc_srq(&e, ox, e.rcq, 32);
	opd = ibv_alloc_pd(e.ctx);
	ASSERT_NOT_NULL(opd);
	omr = ibv_reg_mr(opd, e.buf + OTHER, BUF - OTHER,
			 IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	ASSERT_NOT_NULL(omr);
	memset(&in, 0, sizeof(in));
	ASSERT_EQ(ibv_get_srq_num(s[0], &in.srqn[0]), 0);
	ASSERT_EQ(ibv_get_srq_num(s[1], &in.srqn[1]), 0);
	ASSERT_EQ(ibv_get_srq_num(os, &in.osrqn), 0);
	in.rkey = e.mr->rkey;
	in.addr = (uintptr_t)e.buf;
	in.orkey = omr->rkey;
	in.oaddr = (uintptr_t)e.buf + OTHER;
	in.gid = e.self.gid;
	memset(e.buf, EP_SENTINEL, BUF);
	/* the READ's and the atomics' targets */
	ep_fill_pattern(e.buf + 16384, MSG, 3, 0);
	memset(e.buf + 24576, 0, 16);

	for (r = 0; r < NROUNDS; r++) {
		struct ibv_qp *qp = xrc_qp_init(&e, IBV_QPT_XRC_RECV, x);

		xread(fd, &si, sizeof(si));
		xrc_connect(&e, qp, si.qpn, &si.gid, NULL);
		in.qpn = qp->qp_num;
		if (r == R_TRAFFIC) {
			/* a SEND and a WRITE with immediate into each */
			for (k = 0; k < 2; k++) {
				xrc_srq_post(&e, s[k], 10 + k,
					     4096 * (k + 1), 4096);
				xrc_srq_post(&e, s[k], 20 + k, 0, 0);
			}
		} else {
			xrc_srq_post(&e, s[0], 30 + r, 0, 0);
			xrc_srq_post(&e, os, 40 + r, 0, 0);
		}
		xwrite(fd, &in, sizeof(in));
		if (r == R_TRAFFIC) {
			for (k = 0; k < 2; k++) {
				struct ibv_cq *cq = k ? cq2 : e.rcq;

				/* the SEND, in the SRQ named (its CQ) */
				wc = ep_expect(cq, NULL, 10 + k,
					       IBV_WC_SUCCESS);
				ASSERT_EQ(wc.opcode, IBV_WC_RECV);
				ASSERT_EQ(wc.byte_len, MSG);
				ASSERT_EQ(wc.qp_num, qp->qp_num);
				ASSERT_EQ(ep_find_pattern_diff(
					e.buf + 4096 * (k + 1), MSG, 1 + k,
					0), -1);
				/* the WRITE with immediate */
				wc = ep_expect(cq, NULL, 20 + k,
					       IBV_WC_SUCCESS);
				ASSERT_EQ(wc.opcode,
					  IBV_WC_RECV_RDMA_WITH_IMM);
				ASSERT_EQ(wc.byte_len, MSG);
				ASSERT_EQ(wc.qp_num, qp->qp_num);
				ASSERT_EQ(ntohl(wc.imm_data), 0x100u + k);
				ASSERT_EQ(ep_find_pattern_diff(
					e.buf + 32768 + 4096 * k, MSG, 5 + k,
					0), -1);
			}
			duo_expect(fd, 'a');
			/* the atomics landed */
			ASSERT_EQ(*(uint64_t *)(e.buf + 24576), 9u + 7u);
			ASSERT_EQ(*(uint64_t *)(e.buf + 24584), 0x55u);
			ASSERT_EQ(ep_find_pattern_diff(e.buf + BIG, BIG_LEN,
						       9, 0), -1);
			ASSERT_EQ(ep_find_non_sentinel(e.buf + BIG + BIG_LEN,
						       BUF - BIG - BIG_LEN),
				  -1);
		} else {
			/* the error ended the QP; nothing was received */
			duo_expect(fd, 'e');
			ep_wait_qp_state(qp, IBV_QPS_ERR);
			ep_expect_empty(e.rcq);
			ASSERT_EQ(*(uint8_t *)(e.buf + OTHER), EP_SENTINEL);
		}
		ASSERT_EQ(ibv_destroy_qp(qp), 0);
		duo_signal(fd, 'd');
	}
	ASSERT_EQ(ibv_dereg_mr(omr), 0);
	ASSERT_EQ(ibv_dealloc_pd(opd), 0);
	/* the receives left in the SRQs go with them */
	ASSERT_EQ(ibv_destroy_srq(os), 0);
	ASSERT_EQ(ibv_destroy_srq(s[1]), 0);
	ASSERT_EQ(ibv_destroy_srq(s[0]), 0);
	ASSERT_EQ(ibv_destroy_cq(cq2), 0);
	ASSERT_EQ(ibv_close_xrcd(ox), 0);
	ASSERT_EQ(ibv_close_xrcd(x), 0);
	ep_destroy(&e);
}

/* ------------------------------------------------------------------ */
/* The other side: an XRC_SEND QP per round                            */

static void post(struct ibv_qp *qp, struct ep *e, uint64_t wr_id,
		 enum ibv_wr_opcode op, uint64_t off, uint32_t len,
		 uint32_t srqn, uint64_t raddr, uint32_t rkey)
{
	struct ibv_sge sge = { (uintptr_t)(e->buf + off), len, e->mr->lkey };
	struct ibv_send_wr wr, *bad;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = wr_id;
	wr.opcode = op;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.imm_data = htonl(0x100u + (uint32_t)(wr_id & 1));
	wr.qp_type.xrc.remote_srqn = srqn;
	if (op == IBV_WR_ATOMIC_FETCH_AND_ADD ||
	    op == IBV_WR_ATOMIC_CMP_AND_SWP) {
		wr.wr.atomic.remote_addr = raddr;
		wr.wr.atomic.rkey = rkey;
		/* fetch-and-add: 9, then 7; compare-and-swap: 0 -> 0x55 */
		wr.wr.atomic.compare_add = op == IBV_WR_ATOMIC_CMP_AND_SWP ?
						   0 : wr_id == 4 ? 9 : 7;
		wr.wr.atomic.swap = 0x55;
	} else {
		wr.wr.rdma.remote_addr = raddr;
		wr.wr.rdma.rkey = rkey;
	}
	ASSERT_EQ(ibv_post_send(qp, &wr, &bad), 0);
}

static void traffic_round(struct ep *e, struct ibv_qp *qp,
			  const struct xinfo *in)
{
	int k;

	for (k = 0; k < 2; k++) {
		ep_fill_pattern(e->buf + 4096 * k, MSG, 1 + k, 0);
		post(qp, e, (uint64_t)k, IBV_WR_SEND, 4096 * k, MSG,
		     in->srqn[k], 0, 0);
		ep_expect(e->scq, qp, (uint64_t)k, IBV_WC_SUCCESS);
		ep_fill_pattern(e->buf + 8192 + 4096 * k, MSG, 5 + k, 0);
		post(qp, e, (uint64_t)k, IBV_WR_RDMA_WRITE_WITH_IMM,
		     8192 + 4096 * k, MSG, in->srqn[k],
		     in->addr + 32768 + 4096 * k, in->rkey);
		ep_expect(e->scq, qp, (uint64_t)k, IBV_WC_SUCCESS);
	}
	/* a READ of several packets, through the SRQ's PD */
	memset(e->buf + 16384, 0, MSG);
	post(qp, e, 3, IBV_WR_RDMA_READ, 16384, MSG, in->srqn[1],
	     in->addr + 16384, in->rkey);
	ep_expect(e->scq, qp, 3, IBV_WC_SUCCESS);
	ASSERT_EQ(ep_find_pattern_diff(e->buf + 16384, MSG, 3, 0), -1);
	/* atomics: 0 + 9 + 7 (fetch-and-add twice), 0 -> 0x55 (swap) */
	post(qp, e, 4, IBV_WR_ATOMIC_FETCH_AND_ADD, 32768, 8, in->srqn[0],
	     in->addr + 24576, in->rkey);
	ep_expect(e->scq, qp, 4, IBV_WC_SUCCESS);
	ASSERT_EQ(*(uint64_t *)(e->buf + 32768), 0u);
	post(qp, e, 5, IBV_WR_ATOMIC_FETCH_AND_ADD, 32776, 8, in->srqn[1],
	     in->addr + 24576, in->rkey);
	ep_expect(e->scq, qp, 5, IBV_WC_SUCCESS);
	ASSERT_EQ(*(uint64_t *)(e->buf + 32776), 9u);
	post(qp, e, 6, IBV_WR_ATOMIC_CMP_AND_SWP, 32784, 8, in->srqn[1],
	     in->addr + 24584, in->rkey);
	ep_expect(e->scq, qp, 6, IBV_WC_SUCCESS);
	ASSERT_EQ(*(uint64_t *)(e->buf + 32784), 0u);
	/* an RDMA WRITE of many packets */
	ep_fill_pattern(e->buf + BIG, BIG_LEN, 9, 0);
	post(qp, e, 11, IBV_WR_RDMA_WRITE, BIG, BIG_LEN, in->srqn[0],
	     in->addr + BIG, in->rkey);
	ep_expect(e->scq, qp, 11, IBV_WC_SUCCESS);
}

/* Every round, both sides' MRs ODP (xrc_odp_caps) or not. */
static void two_processes(bool odp)
{
	struct ep_opts o;
	struct ep e;
	struct duo d;
	struct xinfo in;
	struct sinfo si;
	int r;

	duo_fork(&d, receiver, odp ? (void *)1 : NULL);
	ep_default_opts(&o, IBV_QPT_RC);
	o.buf_size = BUF;
	if (odp)
		o.access |= IBV_ACCESS_ON_DEMAND;
	ep_create(&e, &o);
	for (r = 0; r < NROUNDS; r++) {
		struct ibv_qp *qp = xrc_qp_init(&e, IBV_QPT_XRC_SEND, NULL);

		si.qpn = qp->qp_num;
		si.gid = e.self.gid;
		xwrite(d.fd, &si, sizeof(si));
		xread(d.fd, &in, sizeof(in));
		xrc_connect(&e, qp, in.qpn, &in.gid, NULL);
		switch (r) {
		case R_TRAFFIC:
			traffic_round(&e, qp, &in);
			/* while the child still waits for the next round:
			 * after the last one it exits, and its end closes
			 * the connection whose bytes this counts */
			ep_net_check();
			duo_signal(d.fd, 'a');
			break;
		case R_OTHER_DOMAIN:
			/* an XRC SRQ of the process, not of the domain */
			post(qp, &e, 7, IBV_WR_SEND, 0, 8, in.osrqn, 0, 0);
			ep_expect(e.scq, qp, 7, IBV_WC_REM_INV_REQ_ERR);
			duo_signal(d.fd, 'e');
			break;
		case R_NO_SUCH_SRQ:
			/* no SRQ has this number (nor any QP) */
			post(qp, &e, 8, IBV_WR_SEND, 0, 8,
			     in.srqn[0] ^ 0x2000, 0, 0);
			ep_expect(e.scq, qp, 8, IBV_WC_REM_INV_REQ_ERR);
			duo_signal(d.fd, 'e');
			break;
		case R_SRQN_ZERO:
			/* 0 names no SRQ: as any unknown number */
			post(qp, &e, 10, IBV_WR_SEND, 0, 8, 0, 0, 0);
			ep_expect(e.scq, qp, 10, IBV_WC_REM_INV_REQ_ERR);
			duo_signal(d.fd, 'e');
			break;
		case R_OTHER_PD:
			/* an R_Key of a PD that is not the SRQ's */
			post(qp, &e, 9, IBV_WR_RDMA_WRITE, 0, 8, in.srqn[0],
			     in.oaddr, in.orkey);
			ep_expect(e.scq, qp, 9, IBV_WC_REM_ACCESS_ERR);
			duo_signal(d.fd, 'e');
			break;
		}
		duo_expect(d.fd, 'd');
		ASSERT_EQ(ibv_destroy_qp(qp), 0);
	}
	ep_destroy(&e);
	duo_wait(&d);
}

TEST(xrc_two_processes)
{
	two_processes(false);
}

/* The same with ODP MRs on both sides: what xrc_odp_caps reports (SEND,
 * SRQ receive, WRITE, READ, atomics). */
TEST(xrc_two_processes_odp)
{
	two_processes(true);
}

