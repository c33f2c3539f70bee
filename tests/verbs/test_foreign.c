// SPDX-License-Identifier: MIT
/*
 * Objects of another context (issue 12): two ibv_open_device contexts of
 * the same device, each with one of every object.  A create that names a
 * PD, CQ, SRQ or channel of the other context is refused with the
 * kernel's errno (its lookup of the handle in this context's file finds
 * nothing), and a verb on an object whose context field was changed to
 * the other context finds nothing to act on.
 *
 * rdma-core's own header inlines send a plain ibv_create_qp_ex (only the
 * PD in comp_mask) or ibv_create_srq_ex to ibv_create_qp/ibv_create_srq,
 * which take the PD's context; the cases here carry one more bit, so the
 * context argument is the one that counts.
 */
#include <stdint.h>
#include <string.h>

#include "harness.h"
#include "common.h"
#include "objs.h"

static void open_two(struct objs *a, struct objs *b)
{
	objs_open(a, NULL);
	objs_open(b, NULL);
	ASSERT(a->ctx != b->ctx);
}

TEST(create_qp_with_foreign_cq_or_srq)
{
	struct ibv_qp_init_attr qa;
	struct objs a, b;

	open_two(&a, &b);
	memset(&qa, 0, sizeof(qa));
	qa.qp_type = IBV_QPT_RC;
	qa.cap.max_send_wr = qa.cap.max_recv_wr = 1;
	qa.send_cq = b.cq;
	qa.recv_cq = a.cq;
	ASSERT_NULL_ERRNO(ibv_create_qp(a.pd, &qa), ENOENT);
	qa.send_cq = a.cq;
	qa.recv_cq = b.cq;
	ASSERT_NULL_ERRNO(ibv_create_qp(a.pd, &qa), ENOENT);
	qa.recv_cq = a.cq;
	qa.srq = b.srq;
	ASSERT_NULL_ERRNO(ibv_create_qp(a.pd, &qa), ENOENT);
	/* and all of it from the right context works */
	qa.srq = a.srq;
	{
		struct ibv_qp *qp = ibv_create_qp(a.pd, &qa);

		ASSERT_NOT_NULL(qp);
		ASSERT_EQ(ibv_destroy_qp(qp), 0);
	}
	objs_close(&a);
	objs_close(&b);
}

TEST(create_qp_ex_with_foreign_pd)
{
	struct ibv_qp_init_attr_ex qa;
	struct objs a, b;

	open_two(&a, &b);
	memset(&qa, 0, sizeof(qa));
	qa.qp_type = IBV_QPT_RC;
	qa.cap.max_send_wr = qa.cap.max_recv_wr = 1;
	qa.send_cq = qa.recv_cq = a.cq;
	qa.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
	qa.send_ops_flags = IBV_QP_EX_WITH_SEND;
	qa.pd = b.pd;
	ASSERT_NULL_ERRNO(ibv_create_qp_ex(a.ctx, &qa), ENOENT);
	/* the PD right, the CQs of the other context */
	qa.pd = a.pd;
	qa.send_cq = qa.recv_cq = b.cq;
	ASSERT_NULL_ERRNO(ibv_create_qp_ex(a.ctx, &qa), ENOENT);
	objs_close(&a);
	objs_close(&b);
}

TEST(create_srq_ex_with_foreign_pd)
{
	struct ibv_srq_init_attr_ex sa;
	struct objs a, b;

	open_two(&a, &b);
	memset(&sa, 0, sizeof(sa));
	sa.attr.max_wr = 4;
	sa.attr.max_sge = 1;
	sa.comp_mask = IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_TYPE |
		       IBV_SRQ_INIT_ATTR_CQ;
	sa.srq_type = IBV_SRQT_BASIC;
	sa.cq = a.cq;
	sa.pd = b.pd;
	ASSERT_NULL_ERRNO(ibv_create_srq_ex(a.ctx, &sa), ENOENT);
	objs_close(&a);
	objs_close(&b);
}

/* The channel of another context is not this context's file: EBADF. */
TEST(create_cq_on_foreign_channel)
{
	struct ibv_cq_init_attr_ex ca = { .cqe = 4 };
	struct objs a, b;

	open_two(&a, &b);
	ASSERT_NULL_ERRNO(ibv_create_cq(a.ctx, 4, NULL, b.ch, 0), EBADF);
	ca.channel = b.ch;
	ASSERT_NULL_ERRNO(ibv_create_cq_ex(a.ctx, &ca), EBADF);
	/* b's channel was not counted: it goes with b */
	objs_close(&a);
	objs_close(&b);
}

TEST(rereg_mr_to_foreign_pd)
{
	struct objs a, b;

	open_two(&a, &b);
	errno = 0;
	ASSERT_EQ(ibv_rereg_mr(a.mr, IBV_REREG_MR_CHANGE_PD, b.pd, NULL, 0, 0),
		  IBV_REREG_MR_ERR_CMD);
	ASSERT_EQ(errno, EINVAL);
	ASSERT(a.mr->pd == a.pd);
	objs_close(&a);
	objs_close(&b);
}

TEST(ud_send_with_foreign_ah)
{
	struct ibv_sge sge;
	struct ibv_send_wr wr, *bad = NULL;
	struct objs a, b;

	open_two(&a, &b);
	memset(&wr, 0, sizeof(wr));
	sge.addr = (uintptr_t)a.buf;
	sge.length = 8;
	sge.lkey = a.mr->lkey;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_SEND;
	wr.wr.ud.ah = b.ah;
	wr.wr.ud.remote_qpn = a.ud->qp_num;
	wr.wr.ud.remote_qkey = 0x11111111;
	ASSERT_ERRNO_RET(ibv_post_send(a.ud, &wr, &bad), EINVAL);
	ASSERT(bad == &wr);
	objs_close(&a);
	objs_close(&b);
}

/*
 * An object whose context field names the other context: every verb
 * looks for it there, finds nothing, and leaves it alone.
 */
TEST(object_moved_to_other_context)
{
	struct ibv_send_wr swr = { .wr_id = 1, .opcode = IBV_WR_SEND };
	struct ibv_send_wr *sbad = NULL;
	struct ibv_qp_init_attr init;
	struct ibv_qp_attr attr;
	struct ibv_srq_attr sattr;
	struct ibv_wc wc;
	struct objs a, b;

	open_two(&a, &b);
	a.pd->context = b.ctx;
	ASSERT_ERRNO_RET(ibv_dealloc_pd(a.pd), ENOENT);
	ASSERT_NULL_ERRNO(ibv_reg_mr(a.pd, a.buf, 8, 0), EINVAL);
	a.pd->context = a.ctx;

	a.mr->context = b.ctx;
	ASSERT_ERRNO_RET(ibv_dereg_mr(a.mr), ENOENT);
	a.mr->context = a.ctx;

	a.cq->context = b.ctx;
	ASSERT_ERRNO_RET(ibv_destroy_cq(a.cq), ENOENT);
	ASSERT_NEG_ERRNO(ibv_poll_cq(a.cq, 1, &wc), EINVAL);
	ASSERT_ERRNO_RET(ibv_req_notify_cq(a.cq, 0), EINVAL);
	a.cq->context = a.ctx;

	a.srq->context = b.ctx;
	ASSERT_ERRNO_RET(ibv_query_srq(a.srq, &sattr), EINVAL);
	ASSERT_ERRNO_RET(ibv_destroy_srq(a.srq), ENOENT);
	a.srq->context = a.ctx;

	a.ud->context = b.ctx;
	ASSERT_ERRNO_RET(ibv_query_qp(a.ud, &attr, IBV_QP_STATE, &init),
			 EINVAL);
	ASSERT_ERRNO_RET(ibv_post_send(a.ud, &swr, &sbad), EINVAL);
	ASSERT_ERRNO_RET(ibv_destroy_qp(a.ud), ENOENT);
	a.ud->context = a.ctx;

	a.ah->context = b.ctx;
	ASSERT_ERRNO_RET(ibv_destroy_ah(a.ah), ENOENT);
	a.ah->context = a.ctx;

	/* nothing of a's was destroyed, nothing of b's touched */
	objs_close(&a);
	objs_close(&b);
}

/* The handle of the other context's object names nothing here. */
TEST(foreign_handle_in_own_object)
{
	struct objs a, b;
	uint32_t h;

	open_two(&a, &b);
	h = a.pd->handle;
	a.pd->handle = b.pd->handle;
	ASSERT_ERRNO_RET(ibv_dealloc_pd(a.pd), ENOENT);
	a.pd->handle = h;
	h = a.cq->handle;
	a.cq->handle = b.cq->handle;
	ASSERT_ERRNO_RET(ibv_destroy_cq(a.cq), ENOENT);
	a.cq->handle = h;
	h = a.rc->handle;
	a.rc->handle = b.rc->handle;
	ASSERT_ERRNO_RET(ibv_destroy_qp(a.rc), ENOENT);
	a.rc->handle = h;
	objs_close(&a);
	objs_close(&b);
}

/* Closing one context leaves the other's objects alone. */
TEST(close_one_context_only)
{
	struct ibv_wc wc;
	struct objs a, b;

	open_two(&a, &b);
	ASSERT_EQ(ibv_close_device(a.ctx), 0);
	ASSERT_ERRNO_RET(ibv_destroy_qp(a.rc), ENOENT);
	ASSERT_EQ(ibv_poll_cq(b.cq, 1, &wc), 0);
	ASSERT_EQ(ibv_destroy_comp_channel(a.ch), 0);
	objs_close(&b);
}
