// SPDX-License-Identifier: MIT
/*
 * A receive WQE posted to an SRQ is checked against the SRQ's PD, not the
 * PD of the QP that takes it (IBA 10.2.9.1: an SRQ has its own PD; the
 * receive buffers' L_Keys are validated in it).  b's QP is in b.pd and
 * takes its receives from an SRQ in a second PD of b's context:
 *
 *   receive buffer's MR in the SRQ's PD        the SEND lands (SUCCESS)
 *   receive buffer's MR only in the QP's PD    LOC_PROT_ERR at b, and the
 *                                              requester's REM_OP_ERR
 *
 * Issue 12: softhca checked the QP's PD, so both came out the other way
 * round.  Same-host path; with SOFTHCA_NET=1 the net path.
 */
#include <string.h>

#include "harness.h"
#include "ep.h"

#define LEN	64u
#define SRC	0u
#define DST	8192u

struct srq_pair {
	struct ep a, b;
	struct ibv_pd *pd2;
	struct ibv_srq *srq;
	struct ibv_mr *mr2;	/* b.buf again, in pd2 */
};

/* RESET -> INIT, as ep_create does for its own QP */
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

static void open_pair(struct srq_pair *s)
{
	struct ibv_qp_init_attr ia;
	struct ibv_srq_init_attr sa;
	struct ep_opts o;

	ep_skip_if_netns();
	ep_default_opts(&o, IBV_QPT_RC);
	ep_create(&s->a, &o);
	ep_create(&s->b, &o);

	/* b's QP again, on an SRQ of another PD */
	s->pd2 = ibv_alloc_pd(s->b.ctx);
	ASSERT_NOT_NULL(s->pd2);
	memset(&sa, 0, sizeof(sa));
	sa.attr.max_wr = 8;
	sa.attr.max_sge = 1;
	s->srq = ibv_create_srq(s->pd2, &sa);
	ASSERT_NOT_NULL(s->srq);
	s->mr2 = ibv_reg_mr(s->pd2, s->b.buf, s->b.size,
			    IBV_ACCESS_LOCAL_WRITE);
	ASSERT_NOT_NULL(s->mr2);
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

	s->a.peer = s->b.self;
	s->b.peer = s->a.self;
	ep_connect(&s->a, &o);
	ep_connect(&s->b, &o);
}

static void close_pair(struct srq_pair *s)
{
	ep_net_check();
	ep_destroy(&s->a);
	ASSERT_EQ(ibv_destroy_qp(s->b.qp), 0);
	s->b.qp = NULL;
	ASSERT_EQ(ibv_destroy_srq(s->srq), 0);
	ASSERT_EQ(ibv_dereg_mr(s->mr2), 0);
	ASSERT_EQ(ibv_dealloc_pd(s->pd2), 0);
	ep_destroy(&s->b);
}

static void post_srq_recv(struct srq_pair *s, uint32_t lkey)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)s->b.buf + DST,
		.length = LEN,
		.lkey = lkey,
	};
	struct ibv_recv_wr wr = { .wr_id = 0xb1, .sg_list = &sge,
				  .num_sge = 1 };
	struct ibv_recv_wr *bad;

	ASSERT_EQ(ibv_post_srq_recv(s->srq, &wr, &bad), 0);
}

TEST(srq_receive_in_srq_pd_lands)
{
	struct srq_pair s;
	uint32_t i;

	open_pair(&s);
	for (i = 0; i < LEN; i++)
		s.a.buf[SRC + i] = (uint8_t)(0x40 + i);
	memset(s.b.buf + DST, 0xa5, LEN + 64);
	post_srq_recv(&s, s.mr2->lkey);
	ASSERT_EQ(ep_post(&s.a, 0xa1, IBV_WR_SEND, SRC, LEN, 0, 0), 0);
	ep_expect(s.a.scq, s.a.qp, 0xa1, IBV_WC_SUCCESS);
	ep_expect(s.b.rcq, s.b.qp, 0xb1, IBV_WC_SUCCESS);
	ASSERT_EQ(memcmp(s.b.buf + DST, s.a.buf + SRC, LEN), 0);
	for (i = LEN; i < LEN + 64; i++)
		ASSERT_EQ(s.b.buf[DST + i], 0xa5);
	close_pair(&s);
}

TEST(srq_receive_in_qp_pd_only_is_prot_err)
{
	struct srq_pair s;
	uint32_t i;

	open_pair(&s);
	memset(s.b.buf + DST, 0xa5, LEN + 64);
	/* b.mr is in the QP's PD, not the SRQ's */
	post_srq_recv(&s, s.b.mr->lkey);
	ASSERT_EQ(ep_post(&s.a, 0xa1, IBV_WR_SEND, SRC, LEN, 0, 0), 0);
	ep_expect(s.a.scq, s.a.qp, 0xa1, IBV_WC_REM_OP_ERR);
	ep_expect(s.b.rcq, s.b.qp, 0xb1, IBV_WC_LOC_PROT_ERR);
	for (i = 0; i < LEN + 64; i++)
		ASSERT_EQ(s.b.buf[DST + i], 0xa5);
	close_pair(&s);
}
