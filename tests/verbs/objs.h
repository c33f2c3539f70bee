/* SPDX-License-Identifier: MIT */
/*
 * One of every object with a handle, in one context: what the handle and
 * liveness tests (test_handles.c, test_foreign.c, test_errno.c) act on.
 */
#ifndef SOFTHCA_TEST_VERBS_OBJS_H
#define SOFTHCA_TEST_VERBS_OBJS_H

#include <string.h>
#include <infiniband/verbs.h>

#include "harness.h"
#include "common.h"

struct objs {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_mr *mr;
	struct ibv_comp_channel *ch;
	struct ibv_cq *cq;		/* on ch */
	struct ibv_srq *srq;
	struct ibv_qp *rc;		/* RESET, on cq, with its own RQ */
	struct ibv_qp *ud;		/* RTS */
	struct ibv_ah *ah;		/* to this port's first GID */
	char buf[4096];
};

static inline struct ibv_ah_attr objs_ah_attr(struct ibv_context *ctx)
{
	struct ibv_ah_attr a;

	memset(&a, 0, sizeof(a));
	a.is_global = 1;
	a.port_num = 1;
	a.grh.sgid_index = 0;
	a.grh.hop_limit = 64;
	ASSERT_EQ(ibv_query_gid(ctx, 1, 0, &a.grh.dgid), 0);
	return a;
}

static inline struct ibv_qp *objs_qp(struct objs *o, enum ibv_qp_type t,
				     struct ibv_srq *srq)
{
	struct ibv_qp_init_attr a = {
		.send_cq = o->cq,
		.recv_cq = o->cq,
		.srq = srq,
		.cap = { .max_send_wr = 4, .max_recv_wr = 4,
			 .max_send_sge = 1, .max_recv_sge = 1 },
		.qp_type = t,
	};

	return ibv_create_qp(o->pd, &a);
}

/* A UD QP through INIT and RTR to RTS. */
static inline void objs_ud_rts(struct ibv_qp *qp)
{
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qkey = 0x11111111;
	ASSERT_EQ(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
				IBV_QP_PORT | IBV_QP_QKEY), 0);
	a.qp_state = IBV_QPS_RTR;
	ASSERT_EQ(ibv_modify_qp(qp, &a, IBV_QP_STATE), 0);
	a.qp_state = IBV_QPS_RTS;
	ASSERT_EQ(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN), 0);
}

static inline void objs_open(struct objs *o, struct ibv_context *ctx)
{
	struct ibv_srq_init_attr sa = {
		.attr = { .max_wr = 4, .max_sge = 1 },
	};
	struct ibv_ah_attr aa;

	memset(o, 0, sizeof(*o));
	o->ctx = ctx ? ctx : open_lo();
	o->pd = ibv_alloc_pd(o->ctx);
	ASSERT_NOT_NULL(o->pd);
	o->mr = ibv_reg_mr(o->pd, o->buf, sizeof(o->buf),
			   IBV_ACCESS_LOCAL_WRITE);
	ASSERT_NOT_NULL(o->mr);
	o->ch = ibv_create_comp_channel(o->ctx);
	ASSERT_NOT_NULL(o->ch);
	o->cq = ibv_create_cq(o->ctx, 16, NULL, o->ch, 0);
	ASSERT_NOT_NULL(o->cq);
	o->srq = ibv_create_srq(o->pd, &sa);
	ASSERT_NOT_NULL(o->srq);
	o->rc = objs_qp(o, IBV_QPT_RC, NULL);
	ASSERT_NOT_NULL(o->rc);
	o->ud = objs_qp(o, IBV_QPT_UD, NULL);
	ASSERT_NOT_NULL(o->ud);
	objs_ud_rts(o->ud);
	aa = objs_ah_attr(o->ctx);
	o->ah = ibv_create_ah(o->pd, &aa);
	ASSERT_NOT_NULL(o->ah);
}

/* Everything, users first; each destroy must succeed. */
static inline void objs_close(struct objs *o)
{
	ASSERT_EQ(ibv_destroy_ah(o->ah), 0);
	ASSERT_EQ(ibv_destroy_qp(o->ud), 0);
	ASSERT_EQ(ibv_destroy_qp(o->rc), 0);
	ASSERT_EQ(ibv_destroy_srq(o->srq), 0);
	ASSERT_EQ(ibv_destroy_cq(o->cq), 0);
	ASSERT_EQ(ibv_destroy_comp_channel(o->ch), 0);
	ASSERT_EQ(ibv_dereg_mr(o->mr), 0);
	ASSERT_EQ(ibv_dealloc_pd(o->pd), 0);
	ASSERT_EQ(ibv_close_device(o->ctx), 0);
}

/*
 * A verb that returns an errno value must return err and leave it in
 * errno too (rdma-core's verbs fail in a system call).
 */
#define ASSERT_ERRNO_RET(expr, err)                                        \
	do {                                                               \
		int r_;                                                    \
		errno = 0;                                                 \
		r_ = (expr);                                               \
		if (r_ != (err))                                           \
			harness_fail(__FILE__, __LINE__,                   \
				     "%s returned %d, expected %s", #expr, \
				     r_, #err);                            \
		if (errno != (err))                                        \
			harness_fail(__FILE__, __LINE__,                   \
				     "%s: errno %d (%s), expected %s",     \
				     #expr, errno, strerror(errno), #err); \
	} while (0)

/* A verb that returns -1 (or any negative value) and sets errno. */
#define ASSERT_NEG_ERRNO(expr, err)                                        \
	do {                                                               \
		long r_;                                                   \
		errno = 0;                                                 \
		r_ = (long)(expr);                                         \
		if (r_ >= 0)                                               \
			harness_fail(__FILE__, __LINE__,                   \
				     "%s returned %ld, expected < 0",      \
				     #expr, r_);                           \
		if (errno != (err))                                        \
			harness_fail(__FILE__, __LINE__,                   \
				     "%s: errno %d (%s), expected %s",     \
				     #expr, errno, strerror(errno), #err); \
	} while (0)

#endif
