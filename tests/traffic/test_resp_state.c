// SPDX-License-Identifier: MIT
/*
 * A responder-side error completion and the QP's state: once the
 * application has polled the receive WQE's error completion, ibv_query_qp
 * reads ERR (issue 12: it read RTS in 9 of 20 runs, until the engine
 * thread got round to the peer's mark).  The peer that causes the error
 * marks the QP before the completion can be seen, and ibv_query_qp takes
 * the marks before it reads the state (src/engine/responder.c fail_wqe,
 * src/verbs/doorbell.c).
 *
 *   receive buffer too small             LOC_LEN_ERR
 *   receive buffer's MR deregistered     LOC_PROT_ERR
 *
 * Each 20 times, on fresh QPs; the same-host path, and the net path with
 * SOFTHCA_NET=1.
 */
#include <stdbool.h>
#include <string.h>

#include "harness.h"
#include "ep.h"

#define ROUNDS	20
#define DST	8192u

static void one_round(bool dereg)
{
	struct ibv_qp_attr attr;
	struct ibv_qp_init_attr init;
	struct ibv_mr *mr2 = NULL;
	struct ibv_recv_wr wr, *bad;
	struct ibv_sge sge;
	struct ep_opts o;
	struct ep a, b;

	ep_default_opts(&o, IBV_QPT_RC);
	ep_pair(&a, &o, &b, &o);
	memset(&sge, 0, sizeof(sge));
	sge.addr = (uintptr_t)b.buf + DST;
	sge.length = dereg ? 256 : 16;
	sge.lkey = b.mr->lkey;
	if (dereg) {
		mr2 = ibv_reg_mr(b.pd, b.buf + DST, 4096,
				 IBV_ACCESS_LOCAL_WRITE);
		ASSERT_NOT_NULL(mr2);
		sge.lkey = mr2->lkey;
	}
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = 0xb1;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	ASSERT_EQ(ibv_post_recv(b.qp, &wr, &bad), 0);
	if (dereg)
		ASSERT_EQ(ibv_dereg_mr(mr2), 0);

	ASSERT_EQ(ep_post(&a, 0xa1, IBV_WR_SEND, 0, 64, 0, 0), 0);
	ep_expect(b.rcq, b.qp, 0xb1,
		       dereg ? IBV_WC_LOC_PROT_ERR : IBV_WC_LOC_LEN_ERR);
	/* at once: no waiting for the engine */
	memset(&attr, 0, sizeof(attr));
	ASSERT_EQ(ibv_query_qp(b.qp, &attr, IBV_QP_STATE, &init), 0);
	ASSERT_EQ(attr.qp_state, IBV_QPS_ERR);
	ASSERT_EQ(b.qp->state, IBV_QPS_ERR);

	ep_expect(a.scq, a.qp, 0xa1,
		  dereg ? IBV_WC_REM_OP_ERR : IBV_WC_REM_INV_REQ_ERR);
	ep_net_check();
	ep_destroy(&a);
	ep_destroy(&b);
}

TEST(loc_len_err_state_visible_at_poll)
{
	int i;

	for (i = 0; i < ROUNDS; i++)
		one_round(false);
}

TEST(loc_prot_err_state_visible_at_poll)
{
	int i;

	for (i = 0; i < ROUNDS; i++)
		one_round(true);
}
