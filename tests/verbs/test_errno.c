// SPDX-License-Identifier: MIT
/*
 * errno on failure (issue 12): a verb that returns an errno value leaves
 * the same value in errno, as rdma-core's verbs do when the kernel
 * refuses the command (the system call sets it); a verb that returns
 * NULL or -1 sets errno.  Each case starts with errno 0, so a value left
 * from an earlier call cannot pass for the verb's.
 */
#include <stdint.h>
#include <string.h>

#include "harness.h"
#include "common.h"
#include "objs.h"

/* The destroy-order rule: a busy object is EBUSY, in errno too. */
TEST(busy_destroys)
{
	struct ibv_qp *qp;
	struct objs o;

	objs_open(&o, NULL);
	ASSERT_ERRNO_RET(ibv_dealloc_pd(o.pd), EBUSY);
	ASSERT_ERRNO_RET(ibv_destroy_cq(o.cq), EBUSY);		/* QPs */
	ASSERT_ERRNO_RET(ibv_destroy_comp_channel(o.ch), EBUSY);	/* CQ */
	qp = objs_qp(&o, IBV_QPT_RC, o.srq);
	ASSERT_NOT_NULL(qp);
	ASSERT_ERRNO_RET(ibv_destroy_srq(o.srq), EBUSY);
	ASSERT_EQ(ibv_destroy_qp(qp), 0);
	objs_close(&o);
}

/* IBA o10-2.2.3: a QP attached to a multicast group is not destroyed. */
TEST(destroy_qp_attached_is_ebusy)
{
	union ibv_gid mgid = { .raw = { 0xff, 0x0e, [15] = 0x42 } };
	struct objs o;

	objs_open(&o, NULL);
	ASSERT_EQ(ibv_attach_mcast(o.ud, &mgid, 0), 0);
	ASSERT_ERRNO_RET(ibv_destroy_qp(o.ud), EBUSY);
	/* and the failed destroy left it whole */
	ASSERT_EQ(ibv_detach_mcast(o.ud, &mgid, 0), 0);
	ASSERT_ERRNO_RET(ibv_detach_mcast(o.ud, &mgid, 0), EINVAL);
	ASSERT_ERRNO_RET(ibv_attach_mcast(o.rc, &mgid, 0), EINVAL);
	objs_close(&o);
}

TEST(qp_verbs)
{
	struct ibv_send_wr swr = { .wr_id = 1, .opcode = IBV_WR_SEND };
	struct ibv_recv_wr rwr = { .wr_id = 2 };
	struct ibv_send_wr *sbad;
	struct ibv_recv_wr *rbad;
	struct ibv_qp_init_attr init;
	struct ibv_qp_attr attr;
	struct ibv_qp *qp;
	struct objs o;

	objs_open(&o, NULL);
	memset(&attr, 0, sizeof(attr));
	/* RESET -> RTR is not a transition */
	attr.qp_state = IBV_QPS_RTR;
	ASSERT_ERRNO_RET(ibv_modify_qp(o.rc, &attr, IBV_QP_STATE), EINVAL);
	/* a mask bit past IBV_QP_DEST_QPN: rdma-core's EOPNOTSUPP */
	ASSERT_ERRNO_RET(ibv_modify_qp(o.rc, &attr, IBV_QP_RATE_LIMIT),
			 EOPNOTSUPP);
	ASSERT_ERRNO_RET(ibv_query_qp(o.rc, &attr, IBV_QP_RATE_LIMIT, &init),
			 EOPNOTSUPP);
	/* posting in RESET (IBA C10-96) */
	ASSERT_ERRNO_RET(ibv_post_send(o.rc, &swr, &sbad), EINVAL);
	ASSERT_ERRNO_RET(ibv_post_recv(o.rc, &rwr, &rbad), EINVAL);
	/* a QP on an SRQ has no receive queue of its own */
	qp = objs_qp(&o, IBV_QPT_UD, o.srq);
	ASSERT_NOT_NULL(qp);
	objs_ud_rts(qp);
	ASSERT_ERRNO_RET(ibv_post_recv(qp, &rwr, &rbad), EINVAL);
	/* a full send queue: ENOMEM */
	{
		struct ibv_sge sge = { .addr = (uintptr_t)o.buf, .length = 1,
				       .lkey = o.mr->lkey };
		struct ibv_send_wr w[64];
		int i;

		memset(w, 0, sizeof(w));
		for (i = 0; i < 64; i++) {
			w[i].opcode = IBV_WR_SEND;
			w[i].sg_list = &sge;
			w[i].num_sge = 1;
			w[i].wr.ud.ah = o.ah;
			w[i].wr.ud.remote_qpn = 0xfffff0;	/* nobody */
			w[i].next = i + 1 < 64 ? &w[i + 1] : NULL;
		}
		/* the UD QP was made for 4 WRs (a ring of 4) */
		ASSERT_EQ(ibv_modify_qp(qp, &(struct ibv_qp_attr){
					.qp_state = IBV_QPS_SQD },
					IBV_QP_STATE), 0);
		ASSERT_ERRNO_RET(ibv_post_send(qp, w, &sbad), ENOMEM);
	}
	ASSERT_EQ(ibv_destroy_qp(qp), 0);
	objs_close(&o);
}

TEST(cq_srq_verbs)
{
	struct ibv_srq_attr sattr;
	struct ibv_recv_wr rwr[8], *bad;
	int i;
	struct objs o;

	objs_open(&o, NULL);
	ASSERT_ERRNO_RET(ibv_resize_cq(o.cq, 0), EINVAL);
	sattr.max_wr = 0;
	ASSERT_ERRNO_RET(ibv_modify_srq(o.srq, &sattr, IBV_SRQ_MAX_WR),
			 EINVAL);
	ASSERT_ERRNO_RET(ibv_modify_srq(o.srq, &sattr, 0x80), EINVAL);
	/* a full SRQ: ENOMEM */
	memset(rwr, 0, sizeof(rwr));
	for (i = 0; i < 8; i++)
		rwr[i].next = i + 1 < 8 ? &rwr[i + 1] : NULL;
	ASSERT_ERRNO_RET(ibv_post_srq_recv(o.srq, rwr, &bad), ENOMEM);
	objs_close(&o);
}

TEST(context_verbs)
{
	struct ibv_port_attr pa;
	struct ibv_gid_entry ge;
	struct objs o;

	objs_open(&o, NULL);
	ASSERT_ERRNO_RET(ibv_query_port(o.ctx, 2, &pa), EINVAL);
	ASSERT_ERRNO_RET(ibv_query_gid_ex(o.ctx, 2, 0, &ge, 0), EINVAL);
	ASSERT_ERRNO_RET(ibv_query_gid_ex(o.ctx, 1, 0, &ge, 1), EINVAL);
	objs_close(&o);
}

/* What softhca does not offer: EOPNOTSUPP, in errno too. */
TEST(unsupported_verbs)
{
	struct ibv_modify_cq_attr mca = { 0 };
	struct ibv_ece ece;
	uint32_t srqn;
	struct objs o;

	objs_open(&o, NULL);
	ASSERT_ERRNO_RET(ibv_modify_cq(o.cq, &mca), EOPNOTSUPP);
	/* a basic SRQ has no number (XRC SRQs do: test_xrc.c) */
	ASSERT_ERRNO_RET(ibv_get_srq_num(o.srq, &srqn), EINVAL);
	ASSERT_ERRNO_RET(ibv_query_ece(o.rc, &ece), EOPNOTSUPP);
	objs_close(&o);
}

/* Registration happened first: ibv_fork_init is too late, EINVAL. */
TEST(fork_init_too_late)
{
	struct objs o;

	objs_open(&o, NULL);
	ASSERT_ERRNO_RET(ibv_fork_init(), EINVAL);
	objs_close(&o);
}
