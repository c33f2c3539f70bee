// SPDX-License-Identifier: MIT
/*
 * SRQs: create (ibv_create_srq, ibv_create_srq_ex), the attributes
 * reported back, ibv_modify_srq (limit, resize), ibv_query_srq,
 * ibv_post_srq_recv checks, and destroy with QPs and PDs holding it.
 */
#include <stdint.h>
#include <string.h>

#include "harness.h"
#include "common.h"

struct env {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_mr *mr;
	char buf[256];
};

static void env_open(struct env *e)
{
	e->ctx = open_lo();
	e->pd = ibv_alloc_pd(e->ctx);
	ASSERT_NOT_NULL(e->pd);
	e->cq = ibv_create_cq(e->ctx, 64, NULL, NULL, 0);
	ASSERT_NOT_NULL(e->cq);
	e->mr = ibv_reg_mr(e->pd, e->buf, sizeof(e->buf),
			   IBV_ACCESS_LOCAL_WRITE);
	ASSERT_NOT_NULL(e->mr);
}

static struct ibv_srq *srq_new(struct env *e, uint32_t max_wr,
			       uint32_t max_sge)
{
	struct ibv_srq_init_attr a = {
		.attr = { .max_wr = max_wr, .max_sge = max_sge },
	};
	struct ibv_srq *srq = ibv_create_srq(e->pd, &a);

	ASSERT_NOT_NULL(srq);
	return srq;
}

/* Post n one-SGE receives; returns what ibv_post_srq_recv returned. */
static int post_n(struct env *e, struct ibv_srq *srq, int n, int num_sge)
{
	struct ibv_sge sg[4];
	struct ibv_recv_wr wr[64], *bad = NULL;
	int i, ret;

	ASSERT_LE(n, 64);
	for (i = 0; i < 4; i++)
		sg[i] = (struct ibv_sge){ (uintptr_t)e->buf, 16, e->mr->lkey };
	memset(wr, 0, sizeof(wr));
	for (i = 0; i < n; i++) {
		wr[i].wr_id = (uint64_t)i;
		wr[i].sg_list = sg;
		wr[i].num_sge = num_sge;
		wr[i].next = i + 1 < n ? &wr[i + 1] : NULL;
	}
	ret = ibv_post_srq_recv(srq, wr, &bad);
	if (!ret)
		ASSERT_NULL(bad);
	return ret;
}

TEST(create_reports_actual_attributes)
{
	struct ibv_srq_init_attr a = {
		.srq_context = (void *)0x77,
		.attr = { .max_wr = 100, .max_sge = 3, .srq_limit = 10 },
	};
	struct ibv_srq_attr q;
	struct ibv_srq *srq;
	struct env e;

	env_open(&e);
	srq = ibv_create_srq(e.pd, &a);
	ASSERT_NOT_NULL(srq);
	ASSERT(srq->context == e.ctx);
	ASSERT(srq->pd == e.pd);
	ASSERT(srq->srq_context == (void *)0x77);
	ASSERT_EQ(a.attr.max_wr, 128);	/* a power of two, >= 100 */
	ASSERT_EQ(a.attr.max_sge, 3);
	ASSERT_EQ(a.attr.srq_limit, 10);
	memset(&q, 0, sizeof(q));
	ASSERT_EQ(ibv_query_srq(srq, &q), 0);
	ASSERT_EQ(q.max_wr, 128);
	ASSERT_EQ(q.max_sge, 3);
	ASSERT_EQ(q.srq_limit, 10);
	ASSERT_EQ(ibv_destroy_srq(srq), 0);
}

TEST(create_checks_limits)
{
	struct ibv_srq_init_attr a;
	struct ibv_device_attr da;
	struct ibv_srq *srq;
	struct env e;

	env_open(&e);
	ASSERT_EQ(ibv_query_device(e.ctx, &da), 0);
	ASSERT(da.device_cap_flags & IBV_DEVICE_SRQ_RESIZE);

	a = (struct ibv_srq_init_attr){ .attr = { .max_wr = 0, .max_sge = 1 } };
	ASSERT_NULL_ERRNO(ibv_create_srq(e.pd, &a), EINVAL);
	a.attr.max_wr = da.max_srq_wr + 1;
	ASSERT_NULL_ERRNO(ibv_create_srq(e.pd, &a), EINVAL);
	a.attr.max_wr = 4;
	a.attr.max_sge = da.max_srq_sge + 1;
	ASSERT_NULL_ERRNO(ibv_create_srq(e.pd, &a), EINVAL);
	a.attr.max_sge = 1;
	a.attr.srq_limit = 5;		/* more than max_wr */
	ASSERT_NULL_ERRNO(ibv_create_srq(e.pd, &a), EINVAL);

	/* at the limits */
	a.attr.max_wr = da.max_srq_wr;
	a.attr.max_sge = da.max_srq_sge;
	a.attr.srq_limit = 0;
	srq = ibv_create_srq(e.pd, &a);
	ASSERT_NOT_NULL(srq);
	ASSERT_EQ(a.attr.max_wr, da.max_srq_wr);
	ASSERT_EQ(a.attr.max_sge, da.max_srq_sge);
	ASSERT_EQ(ibv_destroy_srq(srq), 0);
}

TEST(create_srq_ex)
{
	struct ibv_srq_init_attr_ex a;
	struct ibv_srq *srq;
	struct env e;

	env_open(&e);
	memset(&a, 0, sizeof(a));
	a.attr.max_wr = 8;
	a.attr.max_sge = 1;
	a.pd = e.pd;
	a.srq_context = &e;

	/* basic, through the op (the CQ bit means nothing for basic) */
	a.comp_mask = IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_TYPE |
		      IBV_SRQ_INIT_ATTR_CQ;
	a.srq_type = IBV_SRQT_BASIC;
	a.cq = e.cq;
	srq = ibv_create_srq_ex(e.ctx, &a);
	ASSERT_NOT_NULL(srq);
	ASSERT(srq->srq_context == &e);
	ASSERT(srq->pd == e.pd);
	ASSERT_EQ(ibv_destroy_srq(srq), 0);
	/* basic, through ibv_create_srq */
	a.comp_mask = IBV_SRQ_INIT_ATTR_PD;
	srq = ibv_create_srq_ex(e.ctx, &a);
	ASSERT_NOT_NULL(srq);
	ASSERT_EQ(ibv_destroy_srq(srq), 0);

	a.comp_mask = IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_TYPE;
	a.srq_type = IBV_SRQT_XRC;	/* without its XRCD and CQ */
	ASSERT_NULL_ERRNO(ibv_create_srq_ex(e.ctx, &a), EINVAL);
	a.srq_type = IBV_SRQT_TM;	/* without its CQ and TM caps */
	ASSERT_NULL_ERRNO(ibv_create_srq_ex(e.ctx, &a), EINVAL);
	a.srq_type = (enum ibv_srq_type)9;
	ASSERT_NULL_ERRNO(ibv_create_srq_ex(e.ctx, &a), EINVAL);
	a.srq_type = IBV_SRQT_BASIC;
	a.comp_mask = IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_RESERVED;
	ASSERT_NULL_ERRNO(ibv_create_srq_ex(e.ctx, &a), EINVAL);
	a.comp_mask = IBV_SRQ_INIT_ATTR_TYPE;	/* no PD */
	ASSERT_NULL_ERRNO(ibv_create_srq_ex(e.ctx, &a), EINVAL);
	a.comp_mask = IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_CQ;
	a.attr.max_wr = 0;
	ASSERT_NULL_ERRNO(ibv_create_srq_ex(e.ctx, &a), EINVAL);
}

TEST(modify_limit)
{
	struct ibv_srq_attr a, q;
	struct ibv_srq *srq;
	struct env e;

	env_open(&e);
	srq = srq_new(&e, 16, 1);
	a.srq_limit = 4;
	ASSERT_EQ(ibv_modify_srq(srq, &a, IBV_SRQ_LIMIT), 0);
	ASSERT_EQ(ibv_query_srq(srq, &q), 0);
	ASSERT_EQ(q.srq_limit, 4);
	a.srq_limit = 17;			/* more than max_wr */
	ASSERT_EQ(ibv_modify_srq(srq, &a, IBV_SRQ_LIMIT), EINVAL);
	ASSERT_EQ(ibv_query_srq(srq, &q), 0);
	ASSERT_EQ(q.srq_limit, 4);
	a.srq_limit = 0;			/* disarm */
	ASSERT_EQ(ibv_modify_srq(srq, &a, IBV_SRQ_LIMIT), 0);
	ASSERT_EQ(ibv_query_srq(srq, &q), 0);
	ASSERT_EQ(q.srq_limit, 0);
	/* unknown mask bits; an empty mask changes nothing */
	ASSERT_EQ(ibv_modify_srq(srq, &a, 1 << 2), EINVAL);
	ASSERT_EQ(ibv_modify_srq(srq, &a, IBV_SRQ_LIMIT | (1 << 5)), EINVAL);
	ASSERT_EQ(ibv_modify_srq(srq, &a, 0), 0);
	ASSERT_EQ(ibv_destroy_srq(srq), 0);
}

TEST(modify_resize)
{
	struct ibv_device_attr da;
	struct ibv_srq_attr a, q;
	struct ibv_srq *srq;
	struct env e;

	env_open(&e);
	ASSERT_EQ(ibv_query_device(e.ctx, &da), 0);
	srq = srq_new(&e, 16, 2);
	ASSERT_EQ(post_n(&e, srq, 16, 1), 0);
	ASSERT_EQ(post_n(&e, srq, 1, 1), ENOMEM);	/* full */

	a.max_wr = 40;
	ASSERT_EQ(ibv_modify_srq(srq, &a, IBV_SRQ_MAX_WR), 0);
	ASSERT_EQ(ibv_query_srq(srq, &q), 0);
	ASSERT_EQ(q.max_wr, 64);
	ASSERT_EQ(q.max_sge, 2);
	/* the 16 WQEs moved along: 48 more fit, not 49 */
	ASSERT_EQ(post_n(&e, srq, 48, 2), 0);
	ASSERT_EQ(post_n(&e, srq, 1, 2), ENOMEM);
	/* smaller than what it holds: EINVAL, unchanged */
	a.max_wr = 32;
	ASSERT_EQ(ibv_modify_srq(srq, &a, IBV_SRQ_MAX_WR), EINVAL);
	ASSERT_EQ(ibv_query_srq(srq, &q), 0);
	ASSERT_EQ(q.max_wr, 64);
	a.max_wr = 0;
	ASSERT_EQ(ibv_modify_srq(srq, &a, IBV_SRQ_MAX_WR), EINVAL);
	a.max_wr = da.max_srq_wr + 1;
	ASSERT_EQ(ibv_modify_srq(srq, &a, IBV_SRQ_MAX_WR), EINVAL);
	ASSERT_EQ(ibv_destroy_srq(srq), 0);

	/* an armed limit above the new size: EINVAL */
	srq = srq_new(&e, 64, 1);
	a.srq_limit = 40;
	ASSERT_EQ(ibv_modify_srq(srq, &a, IBV_SRQ_LIMIT), 0);
	a.max_wr = 32;
	ASSERT_EQ(ibv_modify_srq(srq, &a, IBV_SRQ_MAX_WR), EINVAL);
	/* both at once: the limit is checked against the new size */
	a.srq_limit = 8;
	ASSERT_EQ(ibv_modify_srq(srq, &a, IBV_SRQ_MAX_WR | IBV_SRQ_LIMIT), 0);
	ASSERT_EQ(ibv_query_srq(srq, &q), 0);
	ASSERT_EQ(q.max_wr, 32);
	ASSERT_EQ(q.srq_limit, 8);
	ASSERT_EQ(ibv_destroy_srq(srq), 0);
}

TEST(post_srq_recv_checks)
{
	struct ibv_sge sg[3];
	struct ibv_recv_wr wr[3], *bad;
	struct ibv_srq_attr a;
	struct ibv_srq *srq;
	struct env e;
	int i;

	env_open(&e);
	srq = srq_new(&e, 4, 2);
	for (i = 0; i < 3; i++)
		sg[i] = (struct ibv_sge){ (uintptr_t)e.buf, 16, e.mr->lkey };
	memset(wr, 0, sizeof(wr));
	for (i = 0; i < 3; i++) {
		wr[i].sg_list = sg;
		wr[i].num_sge = 2;
		wr[i].next = i < 2 ? &wr[i + 1] : NULL;
	}
	/* the second has more SGEs than max_sge: the first stays posted */
	wr[1].num_sge = 3;
	bad = NULL;
	ASSERT_EQ(ibv_post_srq_recv(srq, wr, &bad), EINVAL);
	ASSERT(bad == &wr[1]);
	wr[1].num_sge = -1;
	bad = NULL;
	ASSERT_EQ(ibv_post_srq_recv(srq, &wr[1], &bad), EINVAL);
	ASSERT(bad == &wr[1]);
	/* one posted: shrinking to 1 keeps it, the queue then is full */
	a.max_wr = 1;
	ASSERT_EQ(ibv_modify_srq(srq, &a, IBV_SRQ_MAX_WR), 0);
	wr[1].num_sge = 2;
	bad = NULL;
	ASSERT_EQ(ibv_post_srq_recv(srq, &wr[2], &bad), ENOMEM);
	ASSERT(bad == &wr[2]);
	ASSERT_EQ(ibv_destroy_srq(srq), 0);
}

TEST(destroy_while_used)
{
	struct ibv_qp_init_attr qa = {
		.cap = { .max_send_wr = 1, .max_send_sge = 1 },
		.qp_type = IBV_QPT_UD,
	};
	struct ibv_srq *srq;
	struct ibv_qp *qp;
	struct env e;

	env_open(&e);
	srq = srq_new(&e, 4, 1);
	qa.send_cq = e.cq;
	qa.recv_cq = e.cq;
	qa.srq = srq;
	qp = ibv_create_qp(e.pd, &qa);
	ASSERT_NOT_NULL(qp);
	ASSERT_EQ(ibv_destroy_srq(srq), EBUSY);
	ASSERT_EQ(ibv_destroy_qp(qp), 0);
	ASSERT_EQ(ibv_dereg_mr(e.mr), 0);
	ASSERT_EQ(ibv_dealloc_pd(e.pd), EBUSY);	/* the SRQ holds it */
	ASSERT_EQ(ibv_destroy_srq(srq), 0);
	ASSERT_EQ(ibv_dealloc_pd(e.pd), 0);
}
