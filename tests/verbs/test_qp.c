// SPDX-License-Identifier: MIT
/*
 * QPs: create (ibv_create_qp, ibv_create_qp_ex), capabilities, QP numbers,
 * destroy and the references it holds, ibv_post_send / ibv_post_recv
 * checks, and the ibv_wr_* builder.  No data moves here: completions come
 * from flushing (the error state).
 */
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>
#include <fcntl.h>

#include "harness.h"
#include "asleep.h"
#include "common.h"

struct env {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_mr *mr;
	char buf[4096];
};

static void env_open(struct env *e)
{
	e->ctx = open_lo();
	e->pd = ibv_alloc_pd(e->ctx);
	ASSERT_NOT_NULL(e->pd);
	e->cq = ibv_create_cq(e->ctx, 1023, NULL, NULL, 0);
	ASSERT_NOT_NULL(e->cq);
	e->mr = ibv_reg_mr(e->pd, e->buf, sizeof(e->buf),
			   IBV_ACCESS_LOCAL_WRITE);
	ASSERT_NOT_NULL(e->mr);
}

static struct ibv_qp_init_attr init_attr(struct env *e, enum ibv_qp_type t,
					 uint32_t swr, uint32_t rwr)
{
	struct ibv_qp_init_attr a = {
		.send_cq = e->cq,
		.recv_cq = e->cq,
		.cap = {
			.max_send_wr = swr,
			.max_recv_wr = rwr,
			.max_send_sge = 1,
			.max_recv_sge = 1,
		},
		.qp_type = t,
	};

	return a;
}

static struct ibv_qp *qp_new(struct env *e, enum ibv_qp_type t, uint32_t swr,
			     uint32_t rwr)
{
	struct ibv_qp_init_attr a = init_attr(e, t, swr, rwr);
	struct ibv_qp *qp = ibv_create_qp(e->pd, &a);

	ASSERT_NOT_NULL(qp);
	return qp;
}

static int modify(struct ibv_qp *qp, enum ibv_qp_state s, int mask,
		  struct ibv_qp_attr *a)
{
	a->qp_state = s;
	return ibv_modify_qp(qp, a, mask | IBV_QP_STATE);
}

/* RESET -> INIT -> RTR -> RTS with the masks each type requires. */
static void qp_to_rts(struct ibv_qp *qp)
{
	struct ibv_qp_attr a;
	union ibv_gid gid;

	memset(&a, 0, sizeof(a));
	a.pkey_index = 0;
	a.port_num = 1;
	if (qp->qp_type == IBV_QPT_UD) {
		a.qkey = 0x11111111;
		ASSERT_EQ(modify(qp, IBV_QPS_INIT, IBV_QP_PKEY_INDEX |
				 IBV_QP_PORT | IBV_QP_QKEY, &a), 0);
		ASSERT_EQ(modify(qp, IBV_QPS_RTR, 0, &a), 0);
		ASSERT_EQ(modify(qp, IBV_QPS_RTS, IBV_QP_SQ_PSN, &a), 0);
		return;
	}
	a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
	ASSERT_EQ(modify(qp, IBV_QPS_INIT, IBV_QP_PKEY_INDEX | IBV_QP_PORT |
			 IBV_QP_ACCESS_FLAGS, &a), 0);
	ASSERT_EQ(ibv_query_gid(qp->context, 1, 0, &gid), 0);
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = gid;
	a.ah_attr.grh.sgid_index = 0;
	a.ah_attr.port_num = 1;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = qp->qp_num;
	a.rq_psn = 0;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	if (qp->qp_type == IBV_QPT_RC) {
		ASSERT_EQ(modify(qp, IBV_QPS_RTR, IBV_QP_AV | IBV_QP_PATH_MTU |
				 IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
				 IBV_QP_MAX_DEST_RD_ATOMIC |
				 IBV_QP_MIN_RNR_TIMER, &a), 0);
		a.timeout = 14;
		a.retry_cnt = 7;
		a.rnr_retry = 7;
		a.max_rd_atomic = 1;
		ASSERT_EQ(modify(qp, IBV_QPS_RTS, IBV_QP_TIMEOUT |
				 IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
				 IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC, &a),
			  0);
	} else {
		ASSERT_EQ(modify(qp, IBV_QPS_RTR, IBV_QP_AV | IBV_QP_PATH_MTU |
				 IBV_QP_DEST_QPN | IBV_QP_RQ_PSN, &a), 0);
		ASSERT_EQ(modify(qp, IBV_QPS_RTS, IBV_QP_SQ_PSN, &a), 0);
	}
}

static void qp_to_init(struct ibv_qp *qp)
{
	struct ibv_qp_attr a = { .port_num = 1, .qkey = 1 };
	int mask = IBV_QP_PKEY_INDEX | IBV_QP_PORT;

	mask |= qp->qp_type == IBV_QPT_UD ? IBV_QP_QKEY : IBV_QP_ACCESS_FLAGS;
	ASSERT_EQ(modify(qp, IBV_QPS_INIT, mask, &a), 0);
}

static void qp_to_err(struct ibv_qp *qp)
{
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	ASSERT_EQ(modify(qp, IBV_QPS_ERR, 0, &a), 0);
}

static int poll_all(struct ibv_cq *cq, struct ibv_wc *wc, int max)
{
	int n = ibv_poll_cq(cq, max, wc);

	ASSERT_GE(n, 0);
	return n;
}

static struct ibv_sge sge_of(struct env *e, uint32_t len)
{
	struct ibv_sge s = {
		.addr = (uintptr_t)e->buf,
		.length = len,
		.lkey = e->mr->lkey,
	};

	return s;
}

/* ------------------------------------------------------------------ */
/* Create                                                              */

TEST(create_rc_uc_ud)
{
	enum ibv_qp_type types[] = { IBV_QPT_RC, IBV_QPT_UC, IBV_QPT_UD };
	struct env e;
	unsigned int i;

	env_open(&e);
	for (i = 0; i < 3; i++) {
		struct ibv_qp_init_attr a = init_attr(&e, types[i], 16, 16);
		struct ibv_qp *qp;

		a.qp_context = &e;
		qp = ibv_create_qp(e.pd, &a);
		ASSERT_NOT_NULL(qp);
		ASSERT(qp->context == e.ctx);
		ASSERT(qp->pd == e.pd);
		ASSERT(qp->send_cq == e.cq && qp->recv_cq == e.cq);
		ASSERT(qp->srq == NULL);
		ASSERT(qp->qp_context == &e);
		ASSERT_EQ(qp->qp_type, types[i]);
		ASSERT_EQ(qp->state, IBV_QPS_RESET);
		/* QPN 0, 1 (SMI, GSI) and 0xffffff (multicast) are reserved */
		ASSERT_GT(qp->qp_num, 1);
		ASSERT_LT(qp->qp_num, 0xffffff);
		ASSERT_EQ(ibv_destroy_qp(qp), 0);
	}
}

TEST(create_reports_caps_rounded_up)
{
	struct env e;
	struct ibv_qp_init_attr a;
	struct ibv_qp *qp;

	env_open(&e);
	a = init_attr(&e, IBV_QPT_RC, 100, 5);
	a.cap.max_send_sge = 3;
	a.cap.max_recv_sge = 2;
	a.cap.max_inline_data = 100;
	qp = ibv_create_qp(e.pd, &a);
	ASSERT_NOT_NULL(qp);
	/* queues are powers of two; SGEs and inline data share WQE space */
	ASSERT_EQ(a.cap.max_send_wr, 128);
	ASSERT_EQ(a.cap.max_recv_wr, 8);
	ASSERT_EQ(a.cap.max_recv_sge, 2);
	ASSERT_GE(a.cap.max_send_sge, 3);
	ASSERT_GE(a.cap.max_inline_data, 100);
	ASSERT_LE(a.cap.max_inline_data, 1024);
	ASSERT_EQ(ibv_destroy_qp(qp), 0);
}

TEST(create_caps_at_and_over_device_limits)
{
	struct ibv_device_attr da;
	struct ibv_qp_init_attr a;
	struct ibv_qp *qp;
	struct env e;

	env_open(&e);
	ASSERT_EQ(ibv_query_device(e.ctx, &da), 0);

	a = init_attr(&e, IBV_QPT_RC, da.max_qp_wr, da.max_qp_wr);
	a.cap.max_send_sge = da.max_sge;
	a.cap.max_recv_sge = da.max_sge;
	qp = ibv_create_qp(e.pd, &a);
	ASSERT_NOT_NULL(qp);
	ASSERT_EQ(a.cap.max_send_wr, da.max_qp_wr);
	ASSERT_EQ(a.cap.max_recv_wr, da.max_qp_wr);
	ASSERT_EQ(a.cap.max_send_sge, da.max_sge);
	ASSERT_EQ(ibv_destroy_qp(qp), 0);

	a = init_attr(&e, IBV_QPT_RC, da.max_qp_wr + 1, 1);
	ASSERT_NULL_ERRNO(ibv_create_qp(e.pd, &a), EINVAL);
	a = init_attr(&e, IBV_QPT_RC, 1, da.max_qp_wr + 1);
	ASSERT_NULL_ERRNO(ibv_create_qp(e.pd, &a), EINVAL);
	a = init_attr(&e, IBV_QPT_UD, 1, 1);
	a.cap.max_send_sge = da.max_sge + 1;
	ASSERT_NULL_ERRNO(ibv_create_qp(e.pd, &a), EINVAL);
	a = init_attr(&e, IBV_QPT_UD, 1, 1);
	a.cap.max_recv_sge = da.max_sge + 1;
	ASSERT_NULL_ERRNO(ibv_create_qp(e.pd, &a), EINVAL);
	a = init_attr(&e, IBV_QPT_UC, 1, 1);
	a.cap.max_inline_data = 1u << 20;
	ASSERT_NULL_ERRNO(ibv_create_qp(e.pd, &a), EINVAL);
	a = init_attr(&e, IBV_QPT_RC, 0xffffffff, 1);
	ASSERT_NULL_ERRNO(ibv_create_qp(e.pd, &a), EINVAL);
}

TEST(create_unsupported_types)
{
	struct ibv_qp_init_attr a;
	struct env e;

	env_open(&e);
	/* rxe_qp_chk_init: EOPNOTSUPP; XRC_RECV needs an XRCD: EINVAL */
	a = init_attr(&e, IBV_QPT_RAW_PACKET, 1, 1);
	ASSERT_NULL_ERRNO(ibv_create_qp(e.pd, &a), EOPNOTSUPP);
	/* (XRC_SEND is supported: test_xrc.c) */
	a = init_attr(&e, IBV_QPT_DRIVER, 1, 1);
	ASSERT_NULL_ERRNO(ibv_create_qp(e.pd, &a), EOPNOTSUPP);
	a = init_attr(&e, IBV_QPT_XRC_RECV, 1, 1);
	ASSERT_NULL_ERRNO(ibv_create_qp(e.pd, &a), EINVAL);
	a = init_attr(&e, (enum ibv_qp_type)77, 1, 1);
	ASSERT_NULL_ERRNO(ibv_create_qp(e.pd, &a), EINVAL);
}

TEST(create_needs_both_cqs)
{
	struct ibv_qp_init_attr a;
	struct env e;

	env_open(&e);
	a = init_attr(&e, IBV_QPT_RC, 1, 1);
	a.send_cq = NULL;
	ASSERT_NULL_ERRNO(ibv_create_qp(e.pd, &a), EINVAL);
	a = init_attr(&e, IBV_QPT_UD, 1, 1);
	a.recv_cq = NULL;
	ASSERT_NULL_ERRNO(ibv_create_qp(e.pd, &a), EINVAL);
}

TEST(create_with_srq_has_no_recv_queue)
{
	struct ibv_srq_init_attr sa = {
		.attr = { .max_wr = 16, .max_sge = 1 },
	};
	struct ibv_qp_init_attr a, ia;
	struct ibv_qp_attr qa;
	struct ibv_recv_wr wr = { .wr_id = 1 }, *bad = NULL;
	struct ibv_srq *srq;
	struct ibv_qp *qp;
	struct env e;

	env_open(&e);
	srq = ibv_create_srq(e.pd, &sa);
	ASSERT_NOT_NULL(srq);
	/* the receive caps are ignored with an SRQ, even out of range */
	a = init_attr(&e, IBV_QPT_RC, 4, 1u << 30);
	a.cap.max_recv_sge = 1000;
	a.srq = srq;
	qp = ibv_create_qp(e.pd, &a);
	ASSERT_NOT_NULL(qp);
	ASSERT(qp->srq == srq);
	ASSERT_EQ(a.cap.max_recv_wr, 0);
	ASSERT_EQ(a.cap.max_recv_sge, 0);
	ASSERT_EQ(ibv_query_qp(qp, &qa, IBV_QP_CAP, &ia), 0);
	ASSERT_EQ(qa.cap.max_recv_wr, 0);
	ASSERT_EQ(ia.cap.max_recv_sge, 0);
	ASSERT(ia.srq == srq);
	qp_to_init(qp);
	ASSERT_EQ(ibv_post_recv(qp, &wr, &bad), EINVAL);
	ASSERT(bad == &wr);
	ASSERT_EQ(ibv_destroy_qp(qp), 0);
	ASSERT_EQ(ibv_destroy_srq(srq), 0);
}

TEST(create_ex_comp_mask)
{
	struct ibv_qp_init_attr_ex a;
	struct ibv_qp *qp;
	struct env e;

	env_open(&e);
	memset(&a, 0, sizeof(a));
	a.send_cq = e.cq;
	a.recv_cq = e.cq;
	a.cap.max_send_wr = 1;
	a.cap.max_recv_wr = 1;
	a.qp_type = IBV_QPT_RC;
	a.pd = e.pd;

	a.comp_mask = IBV_QP_INIT_ATTR_PD | (1u << 7);	/* unknown bit */
	ASSERT_NULL_ERRNO(ibv_create_qp_ex(e.ctx, &a), EINVAL);
	a.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_MAX_TSO_HEADER;
	ASSERT_NULL_ERRNO(ibv_create_qp_ex(e.ctx, &a), EOPNOTSUPP);
	/* an XRCD is for XRC_RECV only: an RC QP does not look at it */
	a.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_XRCD;
	qp = ibv_create_qp_ex(e.ctx, &a);
	ASSERT_NOT_NULL(qp);
	ASSERT_EQ(ibv_destroy_qp(qp), 0);
	a.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_CREATE_FLAGS;
	a.create_flags = IBV_QP_CREATE_BLOCK_SELF_MCAST_LB;
	ASSERT_NULL_ERRNO(ibv_create_qp_ex(e.ctx, &a), EOPNOTSUPP);
	a.comp_mask = IBV_QP_INIT_ATTR_CREATE_FLAGS;	/* no PD */
	a.create_flags = 0;
	ASSERT_NULL_ERRNO(ibv_create_qp_ex(e.ctx, &a), EINVAL);

	/* no flags is fine; such a QP has no ibv_qp_ex */
	a.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_CREATE_FLAGS;
	qp = ibv_create_qp_ex(e.ctx, &a);
	ASSERT_NOT_NULL(qp);
	ASSERT_EQ(a.cap.max_send_wr, 1);
	ASSERT_NULL(ibv_qp_to_qp_ex(qp));
	ASSERT_EQ(ibv_destroy_qp(qp), 0);
}

TEST(create_ex_send_ops_flags)
{
	const uint64_t rc_ops = IBV_QP_EX_WITH_SEND |
				IBV_QP_EX_WITH_SEND_WITH_IMM |
				IBV_QP_EX_WITH_RDMA_WRITE |
				IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM |
				IBV_QP_EX_WITH_RDMA_READ |
				IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP |
				IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD;
	struct ibv_qp_init_attr_ex a;
	struct ibv_qp_ex *x;
	struct ibv_qp *qp;
	struct env e;

	env_open(&e);
	memset(&a, 0, sizeof(a));
	a.send_cq = e.cq;
	a.recv_cq = e.cq;
	a.cap.max_send_wr = 4;
	a.cap.max_send_sge = 1;
	a.pd = e.pd;
	a.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;

	a.qp_type = IBV_QPT_RC;
	a.send_ops_flags = rc_ops;
	qp = ibv_create_qp_ex(e.ctx, &a);
	ASSERT_NOT_NULL(qp);
	x = ibv_qp_to_qp_ex(qp);
	ASSERT_NOT_NULL(x);
	ASSERT(&x->qp_base == qp);
	/* every pointer the header reaches is a function */
	ASSERT(x->wr_start && x->wr_complete && x->wr_abort);
	ASSERT(x->wr_send && x->wr_send_imm && x->wr_send_inv &&
	       x->wr_send_tso);
	ASSERT(x->wr_rdma_write && x->wr_rdma_write_imm && x->wr_rdma_read);
	ASSERT(x->wr_atomic_cmp_swp && x->wr_atomic_fetch_add &&
	       x->wr_atomic_write);
	/* and rdma-core 45's wr_flush, the word after ibv_qp_ex */
	ASSERT(*(void *const *)(const void *)(x + 1) != NULL);
	ASSERT(x->wr_bind_mw && x->wr_local_inv);
	ASSERT(x->wr_set_sge && x->wr_set_sge_list && x->wr_set_inline_data &&
	       x->wr_set_inline_data_list && x->wr_set_ud_addr &&
	       x->wr_set_xrc_srqn);
	ASSERT_EQ(ibv_destroy_qp(qp), 0);

	/* memory windows (mw.c): on connected QPs */
	a.send_ops_flags = IBV_QP_EX_WITH_BIND_MW | IBV_QP_EX_WITH_LOCAL_INV |
			   IBV_QP_EX_WITH_SEND_WITH_INV;
	qp = ibv_create_qp_ex(e.ctx, &a);
	ASSERT_NOT_NULL(qp);
	ASSERT_EQ(ibv_destroy_qp(qp), 0);
	a.qp_type = IBV_QPT_UC;
	/* ATOMIC WRITE: RC only (tests/traffic/test_atomic_write_flush.c) */
	a.send_ops_flags = IBV_QP_EX_WITH_ATOMIC_WRITE;
	ASSERT_NULL_ERRNO(ibv_create_qp_ex(e.ctx, &a), EOPNOTSUPP);
	a.send_ops_flags = IBV_QP_EX_WITH_RDMA_READ;
	ASSERT_NULL_ERRNO(ibv_create_qp_ex(e.ctx, &a), EOPNOTSUPP);
	a.qp_type = IBV_QPT_UD;
	a.send_ops_flags = IBV_QP_EX_WITH_RDMA_WRITE;
	ASSERT_NULL_ERRNO(ibv_create_qp_ex(e.ctx, &a), EOPNOTSUPP);
	a.send_ops_flags = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM;
	qp = ibv_create_qp_ex(e.ctx, &a);
	ASSERT_NOT_NULL(qp);
	ASSERT_NOT_NULL(ibv_qp_to_qp_ex(qp));
	ASSERT_EQ(ibv_destroy_qp(qp), 0);
}

TEST(qp_to_qp_ex_null_for_plain_qp)
{
	struct env e;
	struct ibv_qp *qp;

	env_open(&e);
	qp = qp_new(&e, IBV_QPT_RC, 1, 1);
	ASSERT_NULL(ibv_qp_to_qp_ex(qp));
	ASSERT_EQ(ibv_destroy_qp(qp), 0);
}

TEST(qpns_unique_and_not_reused_at_once)
{
	struct ibv_qp *qps[64];
	uint32_t first;
	struct env e;
	int i, j;

	env_open(&e);
	for (i = 0; i < 64; i++)
		qps[i] = qp_new(&e, IBV_QPT_UD, 1, 1);
	for (i = 0; i < 64; i++)
		for (j = i + 1; j < 64; j++)
			ASSERT_NE(qps[i]->qp_num, qps[j]->qp_num);
	/* the same slot (high bits) for every QP of the process */
	for (i = 1; i < 64; i++)
		ASSERT_EQ(qps[i]->qp_num >> 14, qps[0]->qp_num >> 14);
	first = qps[0]->qp_num;
	ASSERT_EQ(ibv_destroy_qp(qps[0]), 0);
	/* round robin: a freed number does not come back next */
	qps[0] = qp_new(&e, IBV_QPT_UD, 1, 1);
	ASSERT_NE(qps[0]->qp_num, first);
	for (i = 0; i < 64; i++)
		ASSERT_EQ(ibv_destroy_qp(qps[i]), 0);
}

TEST(qp_limit_per_context)
{
	struct ibv_device_attr da;
	struct ibv_qp **qps;
	struct env e;
	int i, n = 0;

	env_open(&e);
	ASSERT_EQ(ibv_query_device(e.ctx, &da), 0);
	qps = calloc((size_t)da.max_qp + 1, sizeof(*qps));
	ASSERT_NOT_NULL(qps);
	for (i = 0; i < da.max_qp; i++) {
		struct ibv_qp_init_attr a = init_attr(&e, IBV_QPT_UD, 1, 1);

		qps[i] = ibv_create_qp(e.pd, &a);
		if (!qps[i])
			break;
		n++;
	}
	/* every one advertised, in every slot (slot 0 has no QPN 0 and 1) */
	ASSERT_EQ(n, da.max_qp);
	{
		struct ibv_qp_init_attr a = init_attr(&e, IBV_QPT_UD, 1, 1);

		ASSERT_NULL_ERRNO(ibv_create_qp(e.pd, &a), ENOMEM);
	}
	for (i = 0; i < n; i++)
		ASSERT_EQ(ibv_destroy_qp(qps[i]), 0);
	free(qps);
}

/* ------------------------------------------------------------------ */
/* Destroy and references                                              */

TEST(destroy_releases_references)
{
	struct ibv_srq_init_attr sa = { .attr = { .max_wr = 4, .max_sge = 1 } };
	struct ibv_qp_init_attr a;
	struct ibv_cq *scq;
	struct ibv_srq *srq;
	struct ibv_qp *qp;
	struct env e;

	env_open(&e);
	scq = ibv_create_cq(e.ctx, 16, NULL, NULL, 0);
	ASSERT_NOT_NULL(scq);
	srq = ibv_create_srq(e.pd, &sa);
	ASSERT_NOT_NULL(srq);
	a = init_attr(&e, IBV_QPT_RC, 4, 0);
	a.send_cq = scq;
	a.srq = srq;
	qp = ibv_create_qp(e.pd, &a);
	ASSERT_NOT_NULL(qp);

	ASSERT_EQ(ibv_destroy_cq(scq), EBUSY);
	ASSERT_EQ(ibv_destroy_cq(e.cq), EBUSY);
	ASSERT_EQ(ibv_destroy_srq(srq), EBUSY);
	ASSERT_EQ(ibv_dereg_mr(e.mr), 0);
	ASSERT_EQ(ibv_dealloc_pd(e.pd), EBUSY);

	ASSERT_EQ(ibv_destroy_qp(qp), 0);
	ASSERT_EQ(ibv_destroy_cq(scq), 0);
	ASSERT_EQ(ibv_destroy_srq(srq), 0);
	ASSERT_EQ(ibv_destroy_cq(e.cq), 0);
	ASSERT_EQ(ibv_dealloc_pd(e.pd), 0);
	ASSERT_EQ(ibv_close_device(e.ctx), 0);
}

struct destroy_arg {
	struct ibv_qp *qp;
	pid_t tid;
	int done;
};

static void *destroy_thread(void *p)
{
	struct destroy_arg *d = p;

	asleep_self(&d->tid);
	ASSERT_EQ(ibv_destroy_qp(d->qp), 0);
	__atomic_store_n(&d->done, 1, __ATOMIC_RELEASE);
	return NULL;
}

/* A QP with an SRQ raises LAST_WQE_REACHED entering ERR (see qp_modify);
 * ibv_destroy_qp sleeps on the QP's condition variable until it is
 * acknowledged (rdma-core's ibv_cmd_destroy_qp). */
TEST(destroy_waits_for_event_ack)
{
	struct ibv_srq_init_attr sa = { .attr = { .max_wr = 4, .max_sge = 1 } };
	struct ibv_async_event ev;
	struct destroy_arg d = { 0 };
	struct ibv_qp_init_attr a;
	struct ibv_srq *srq;
	pthread_t t;
	struct env e;

	env_open(&e);
	srq = ibv_create_srq(e.pd, &sa);
	ASSERT_NOT_NULL(srq);
	a = init_attr(&e, IBV_QPT_RC, 4, 0);
	a.srq = srq;
	d.qp = ibv_create_qp(e.pd, &a);
	ASSERT_NOT_NULL(d.qp);
	qp_to_init(d.qp);
	qp_to_err(d.qp);
	ASSERT_EQ(ibv_get_async_event(e.ctx, &ev), 0);
	ASSERT_EQ(ev.event_type, IBV_EVENT_QP_LAST_WQE_REACHED);
	ASSERT(ev.element.qp == d.qp);

	ASSERT_EQ(pthread_create(&t, NULL, destroy_thread, &d), 0);
	/* still waiting for the ack */
	ASSERT_ASLEEP_IN_COND(&d.tid, &d.done, &d.qp->cond);
	ibv_ack_async_event(&ev);
	ASSERT_EQ(pthread_join(t, NULL), 0);
	ASSERT_EQ(d.done, 1);
	ASSERT_EQ(ibv_destroy_srq(srq), 0);
}

TEST(destroy_forgets_undelivered_events)
{
	struct ibv_srq_init_attr sa = { .attr = { .max_wr = 4, .max_sge = 1 } };
	struct ibv_async_event ev;
	struct ibv_qp_init_attr a;
	struct ibv_srq *srq;
	struct ibv_qp *qp;
	struct env e;
	int flags;

	env_open(&e);
	srq = ibv_create_srq(e.pd, &sa);
	ASSERT_NOT_NULL(srq);
	a = init_attr(&e, IBV_QPT_UD, 4, 0);
	a.srq = srq;
	qp = ibv_create_qp(e.pd, &a);
	ASSERT_NOT_NULL(qp);
	qp_to_init(qp);
	qp_to_err(qp);
	ASSERT_EQ(ibv_destroy_qp(qp), 0);
	flags = fcntl(e.ctx->async_fd, F_GETFL);
	ASSERT_EQ(fcntl(e.ctx->async_fd, F_SETFL, flags | O_NONBLOCK), 0);
	ASSERT_EQ(ibv_get_async_event(e.ctx, &ev), -1);
	ASSERT_EQ(errno, EAGAIN);
	ASSERT_EQ(ibv_destroy_srq(srq), 0);
}

/* ------------------------------------------------------------------ */
/* ibv_post_recv                                                       */

TEST(post_recv_checks)
{
	struct ibv_recv_wr wr[3], *bad;
	struct ibv_sge sg[2];
	struct ibv_wc wc[8];
	struct ibv_qp *qp;
	struct env e;
	int i;

	env_open(&e);
	qp = qp_new(&e, IBV_QPT_RC, 1, 2);
	sg[0] = sge_of(&e, 16);
	sg[1] = sge_of(&e, 16);
	memset(wr, 0, sizeof(wr));
	for (i = 0; i < 3; i++) {
		wr[i].wr_id = 100 + i;
		wr[i].sg_list = sg;
		wr[i].num_sge = 1;
		wr[i].next = i < 2 ? &wr[i + 1] : NULL;
	}

	/* IBA C10-97.2.1: nothing while in RESET */
	bad = NULL;
	ASSERT_EQ(ibv_post_recv(qp, wr, &bad), EINVAL);
	ASSERT(bad == &wr[0]);

	qp_to_init(qp);
	/* too many SGEs in the second: the first stays posted */
	wr[1].num_sge = 2;
	bad = NULL;
	ASSERT_EQ(ibv_post_recv(qp, wr, &bad), EINVAL);
	ASSERT(bad == &wr[1]);
	/* then the queue (2 deep) fills: the third is ENOMEM */
	wr[1].num_sge = 1;
	bad = NULL;
	ASSERT_EQ(ibv_post_recv(qp, &wr[1], &bad), ENOMEM);
	ASSERT(bad == &wr[2]);

	qp_to_err(qp);
	ASSERT_EQ(poll_all(e.cq, wc, 8), 2);
	for (i = 0; i < 2; i++) {
		ASSERT_U64_EQ(wc[i].wr_id, 100 + i);
		ASSERT_EQ(wc[i].status, IBV_WC_WR_FLUSH_ERR);
		ASSERT_EQ(wc[i].opcode, IBV_WC_RECV);
		ASSERT_EQ(wc[i].qp_num, qp->qp_num);
	}
	ASSERT_EQ(ibv_destroy_qp(qp), 0);
}

TEST(post_recv_zero_depth_queue_is_full)
{
	struct ibv_recv_wr wr = { .wr_id = 1 }, *bad = NULL;
	struct ibv_qp *qp;
	struct env e;

	env_open(&e);
	qp = qp_new(&e, IBV_QPT_UD, 1, 0);
	qp_to_init(qp);
	ASSERT_EQ(ibv_post_recv(qp, &wr, &bad), ENOMEM);
	ASSERT(bad == &wr);
	ASSERT_EQ(ibv_destroy_qp(qp), 0);
}

TEST(post_recv_in_error_flushes_at_once)
{
	struct ibv_recv_wr wr = { .wr_id = 0xabc }, *bad = NULL;
	struct ibv_wc wc[2];
	struct ibv_qp *qp;
	struct env e;

	env_open(&e);
	qp = qp_new(&e, IBV_QPT_UC, 1, 4);
	qp_to_init(qp);
	qp_to_err(qp);
	ASSERT_EQ(ibv_post_recv(qp, &wr, &bad), 0);
	ASSERT_EQ(poll_all(e.cq, wc, 2), 1);
	ASSERT_U64_EQ(wc[0].wr_id, 0xabc);
	ASSERT_EQ(wc[0].status, IBV_WC_WR_FLUSH_ERR);
	ASSERT_EQ(wc[0].opcode, IBV_WC_RECV);
	ASSERT_EQ(ibv_destroy_qp(qp), 0);
}

/* ------------------------------------------------------------------ */
/* ibv_post_send                                                       */

static int post1(struct ibv_qp *qp, struct ibv_send_wr *wr)
{
	struct ibv_send_wr *bad = NULL;
	int ret = ibv_post_send(qp, wr, &bad);

	ASSERT(ret ? bad == wr : bad == NULL);
	return ret;
}

TEST(post_send_needs_rts)
{
	struct ibv_send_wr wr;
	struct ibv_qp_attr a;
	struct ibv_sge sg;
	struct ibv_wc wc[2];
	struct ibv_qp *qp;
	struct env e;

	env_open(&e);
	qp = qp_new(&e, IBV_QPT_RC, 4, 4);
	sg = sge_of(&e, 8);
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = 7;
	wr.opcode = IBV_WR_SEND;
	wr.sg_list = &sg;
	wr.num_sge = 1;
	wr.send_flags = IBV_SEND_SIGNALED;

	ASSERT_EQ(post1(qp, &wr), EINVAL);	/* RESET */
	qp_to_init(qp);
	ASSERT_EQ(post1(qp, &wr), EINVAL);	/* INIT */
	ASSERT_EQ(ibv_modify_qp(qp, &(struct ibv_qp_attr){
				.qp_state = IBV_QPS_RESET }, IBV_QP_STATE), 0);
	qp_to_rts(qp);
	ASSERT_EQ(post1(qp, &wr), 0);
	/* queued: nothing executes it yet, and nothing completes */
	ASSERT_EQ(poll_all(e.cq, wc, 2), 0);
	/* SQD takes WRs too; they wait */
	memset(&a, 0, sizeof(a));
	ASSERT_EQ(modify(qp, IBV_QPS_SQD, 0, &a), 0);
	wr.wr_id = 8;
	ASSERT_EQ(post1(qp, &wr), 0);
	qp_to_err(qp);
	ASSERT_EQ(poll_all(e.cq, wc, 2), 2);
	ASSERT_U64_EQ(wc[0].wr_id, 7);
	ASSERT_U64_EQ(wc[1].wr_id, 8);
	ASSERT_EQ(wc[1].status, IBV_WC_WR_FLUSH_ERR);
	ASSERT_EQ(ibv_destroy_qp(qp), 0);
}

TEST(post_send_rtr_is_einval)
{
	struct ibv_send_wr wr = { .opcode = IBV_WR_SEND };
	struct ibv_qp_attr a;
	struct ibv_qp *qp;
	struct env e;

	env_open(&e);
	qp = qp_new(&e, IBV_QPT_UD, 4, 4);
	qp_to_init(qp);
	memset(&a, 0, sizeof(a));
	ASSERT_EQ(modify(qp, IBV_QPS_RTR, 0, &a), 0);
	ASSERT_EQ(post1(qp, &wr), EINVAL);
	ASSERT_EQ(ibv_destroy_qp(qp), 0);
}

/*
 * Which opcodes ibv_post_send takes (issue 12, decided as mlx5's provider
 * does): an opcode softhca carries out is posted on every QP type; where
 * the transport lacks it (READ and atomics on UC; WRITE, WRITE with
 * immediate, READ and atomics on UD) it completes with
 * IBV_WC_LOC_QP_OP_ERR, its own opcode in the completion, and the QP goes
 * to SQE.  An opcode softhca does not carry out at all is refused with
 * EINVAL and nothing completes.  (tests/traffic/test_qp_op_err.c: the
 * flush, the peer untouched, the way back to RTS.)
 */
static const struct {
	enum ibv_qp_type type;
	enum ibv_wr_opcode op;
	enum ibv_wc_opcode wc;
} lacks[] = {
	{ IBV_QPT_UC, IBV_WR_RDMA_READ, IBV_WC_RDMA_READ },
	{ IBV_QPT_UC, IBV_WR_ATOMIC_CMP_AND_SWP, IBV_WC_COMP_SWAP },
	{ IBV_QPT_UC, IBV_WR_ATOMIC_FETCH_AND_ADD, IBV_WC_FETCH_ADD },
	{ IBV_QPT_UC, IBV_WR_SEND_WITH_INV, IBV_WC_SEND },
	{ IBV_QPT_UD, IBV_WR_SEND_WITH_INV, IBV_WC_SEND },
	{ IBV_QPT_UD, IBV_WR_LOCAL_INV, IBV_WC_LOCAL_INV },
	{ IBV_QPT_UD, IBV_WR_RDMA_WRITE, IBV_WC_RDMA_WRITE },
	{ IBV_QPT_UD, IBV_WR_RDMA_WRITE_WITH_IMM, IBV_WC_RDMA_WRITE },
	{ IBV_QPT_UD, IBV_WR_RDMA_READ, IBV_WC_RDMA_READ },
	{ IBV_QPT_UD, IBV_WR_ATOMIC_CMP_AND_SWP, IBV_WC_COMP_SWAP },
	{ IBV_QPT_UD, IBV_WR_ATOMIC_FETCH_AND_ADD, IBV_WC_FETCH_ADD },
};

static enum ibv_qp_state qp_state(struct ibv_qp *qp)
{
	struct ibv_qp_init_attr init;
	struct ibv_qp_attr a;

	ASSERT_EQ(ibv_query_qp(qp, &a, IBV_QP_STATE, &init), 0);
	return a.qp_state;
}

TEST(post_send_opcode_per_qp_type)
{
	static const enum ibv_wr_opcode none[] = {
		IBV_WR_TSO, IBV_WR_DRIVER1, IBV_WR_ATOMIC_WRITE,
		(enum ibv_wr_opcode)12, (enum ibv_wr_opcode)200,
		(enum ibv_wr_opcode)-1,
	};
	static const enum ibv_qp_type types[] = { IBV_QPT_RC, IBV_QPT_UC,
						  IBV_QPT_UD };
	struct ibv_send_wr wr;
	struct ibv_qp *qp;
	struct ibv_sge sg;
	struct ibv_wc wc[2];
	struct env e;
	unsigned int i, j;

	env_open(&e);
	sg = sge_of(&e, 8);
	for (i = 0; i < sizeof(lacks) / sizeof(lacks[0]); i++) {
		qp = qp_new(&e, lacks[i].type, 4, 1);
		qp_to_rts(qp);
		memset(&wr, 0, sizeof(wr));
		wr.wr_id = 0x100 + i;
		wr.opcode = lacks[i].op;
		wr.sg_list = &sg;
		wr.num_sge = 1;
		/* an RC application's fields; on UD they overlay wr.ud.ah */
		wr.wr.rdma.remote_addr = (uintptr_t)e.buf;
		wr.wr.rdma.rkey = e.mr->lkey;
		ASSERT_EQ(post1(qp, &wr), 0);
		/* the same-host requester ran it in the post */
		ASSERT_EQ(poll_all(e.cq, wc, 2), 1);
		ASSERT_U64_EQ(wc[0].wr_id, 0x100 + i);
		ASSERT_EQ(wc[0].status, IBV_WC_LOC_QP_OP_ERR);
		ASSERT_EQ(wc[0].opcode, lacks[i].wc);
		ASSERT_EQ(wc[0].qp_num, qp->qp_num);
		ASSERT_EQ(qp_state(qp), IBV_QPS_SQE);
		ASSERT_EQ(ibv_destroy_qp(qp), 0);
	}
	/* what each transport has is posted (and runs) */
	qp = qp_new(&e, IBV_QPT_UC, 4, 1);
	qp_to_rts(qp);
	memset(&wr, 0, sizeof(wr));
	wr.sg_list = &sg;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_RDMA_WRITE;
	ASSERT_EQ(post1(qp, &wr), 0);
	ASSERT_EQ(ibv_destroy_qp(qp), 0);
	qp = qp_new(&e, IBV_QPT_RC, 4, 1);
	qp_to_rts(qp);
	wr.opcode = IBV_WR_RDMA_READ;
	ASSERT_EQ(post1(qp, &wr), 0);
	ASSERT_EQ(ibv_destroy_qp(qp), 0);
	while (poll_all(e.cq, wc, 2))
		;

	/* what softhca does not carry out at all, on any QP type */
	for (i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
		qp = qp_new(&e, types[i], 4, 1);
		qp_to_rts(qp);
		for (j = 0; j < sizeof(none) / sizeof(none[0]); j++) {
			memset(&wr, 0, sizeof(wr));
			wr.opcode = none[j];
			wr.sg_list = &sg;
			wr.num_sge = 1;
			ASSERT_EQ(post1(qp, &wr), EINVAL);
		}
		ASSERT_EQ(poll_all(e.cq, wc, 2), 0);
		ASSERT_EQ(qp_state(qp), IBV_QPS_RTS);
		ASSERT_EQ(ibv_destroy_qp(qp), 0);
	}
}

TEST(post_send_checks)
{
	struct ibv_qp_init_attr a;
	struct ibv_send_wr wr;
	struct ibv_sge sg[4];
	struct ibv_qp *qp, *ud;
	struct ibv_ah_attr aa;
	struct ibv_ah *ah;
	struct env e;
	int i;

	env_open(&e);
	a = init_attr(&e, IBV_QPT_RC, 8, 1);
	a.cap.max_send_sge = 2;
	a.cap.max_inline_data = 0;
	qp = ibv_create_qp(e.pd, &a);
	ASSERT_NOT_NULL(qp);
	qp_to_rts(qp);
	for (i = 0; i < 4; i++)
		sg[i] = sge_of(&e, 8);
	memset(&wr, 0, sizeof(wr));
	wr.opcode = IBV_WR_SEND;
	wr.sg_list = sg;

	wr.num_sge = (int)a.cap.max_send_sge + 1;
	ASSERT_EQ(post1(qp, &wr), EINVAL);
	wr.num_sge = -1;
	ASSERT_EQ(post1(qp, &wr), EINVAL);
	/* inline data beyond max_inline_data */
	wr.num_sge = 1;
	sg[0].length = a.cap.max_inline_data + 1;
	wr.send_flags = IBV_SEND_INLINE;
	ASSERT_EQ(post1(qp, &wr), EINVAL);
	sg[0].length = a.cap.max_inline_data;
	ASSERT_EQ(post1(qp, &wr), 0);
	/* atomics: 8 bytes (a misaligned remote address is the
	 * responder's to refuse, as on mlx5: test_errors.c misaligned_*) */
	wr.send_flags = 0;
	wr.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
	sg[0].length = 4;
	ASSERT_EQ(post1(qp, &wr), EINVAL);
	sg[0].length = 8;
	wr.wr.atomic.remote_addr = 0x1008;
	ASSERT_EQ(post1(qp, &wr), 0);

	/* UD needs an address handle */
	ud = qp_new(&e, IBV_QPT_UD, 4, 1);
	qp_to_rts(ud);
	memset(&wr, 0, sizeof(wr));
	wr.opcode = IBV_WR_SEND;
	ASSERT_EQ(post1(ud, &wr), EINVAL);
	memset(&aa, 0, sizeof(aa));
	aa.is_global = 1;
	aa.port_num = 1;
	ASSERT_EQ(ibv_query_gid(e.ctx, 1, 0, &aa.grh.dgid), 0);
	ah = ibv_create_ah(e.pd, &aa);
	ASSERT_NOT_NULL(ah);
	wr.wr.ud.ah = ah;
	wr.wr.ud.remote_qpn = ud->qp_num;
	ASSERT_EQ(post1(ud, &wr), 0);

	ASSERT_EQ(ibv_destroy_qp(ud), 0);
	ASSERT_EQ(ibv_destroy_ah(ah), 0);
	ASSERT_EQ(ibv_destroy_qp(qp), 0);
}

TEST(post_send_list_keeps_earlier_wrs)
{
	struct ibv_send_wr wr[5], *bad;
	struct ibv_sge sg;
	struct ibv_wc wc[8];
	struct ibv_qp *qp;
	struct env e;
	int i;

	env_open(&e);
	qp = qp_new(&e, IBV_QPT_RC, 4, 1);
	qp_to_rts(qp);
	sg = sge_of(&e, 8);
	memset(wr, 0, sizeof(wr));
	for (i = 0; i < 5; i++) {
		wr[i].wr_id = 10 + i;
		wr[i].opcode = i == 1 ? IBV_WR_RDMA_WRITE : IBV_WR_SEND;
		wr[i].sg_list = &sg;
		wr[i].num_sge = 1;
		wr[i].next = i < 4 ? &wr[i + 1] : NULL;
	}
	/* an unsupported opcode third: the first two stay posted */
	wr[2].opcode = IBV_WR_BIND_MW;
	bad = NULL;
	ASSERT_EQ(ibv_post_send(qp, wr, &bad), EINVAL);
	ASSERT(bad == &wr[2]);
	/* two more fit the 4-deep queue, the fifth is ENOMEM */
	wr[2].opcode = IBV_WR_SEND;
	bad = NULL;
	ASSERT_EQ(ibv_post_send(qp, &wr[2], &bad), ENOMEM);
	ASSERT(bad == &wr[4]);

	/* flushed in order, signaled or not, opcode per WR */
	qp_to_err(qp);
	ASSERT_EQ(poll_all(e.cq, wc, 8), 4);
	for (i = 0; i < 4; i++) {
		ASSERT_U64_EQ(wc[i].wr_id, 10 + i);
		ASSERT_EQ(wc[i].status, IBV_WC_WR_FLUSH_ERR);
		ASSERT_EQ(wc[i].qp_num, qp->qp_num);
		ASSERT_EQ(wc[i].opcode,
			  i == 1 ? IBV_WC_RDMA_WRITE : IBV_WC_SEND);
	}
	ASSERT_EQ(ibv_destroy_qp(qp), 0);
}

TEST(post_send_in_error_flushes_at_once)
{
	struct ibv_send_wr wr;
	struct ibv_wc wc[2];
	struct ibv_qp *qp;
	struct env e;

	env_open(&e);
	qp = qp_new(&e, IBV_QPT_RC, 1, 1);
	qp_to_rts(qp);
	qp_to_err(qp);
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = 99;
	wr.opcode = IBV_WR_RDMA_READ;
	ASSERT_EQ(post1(qp, &wr), 0);
	ASSERT_EQ(poll_all(e.cq, wc, 2), 1);
	ASSERT_U64_EQ(wc[0].wr_id, 99);
	ASSERT_EQ(wc[0].status, IBV_WC_WR_FLUSH_ERR);
	ASSERT_EQ(wc[0].opcode, IBV_WC_RDMA_READ);
	/* the checks still apply */
	wr.opcode = IBV_WR_BIND_MW;
	ASSERT_EQ(post1(qp, &wr), EINVAL);
	ASSERT_EQ(ibv_destroy_qp(qp), 0);
}

/* ------------------------------------------------------------------ */
/* The ibv_wr_* builder                                                */

static struct ibv_qp *qpx_new(struct env *e, enum ibv_qp_type type,
			      uint32_t swr, uint64_t ops)
{
	struct ibv_qp_init_attr_ex a;
	struct ibv_qp *qp;

	memset(&a, 0, sizeof(a));
	a.send_cq = e->cq;
	a.recv_cq = e->cq;
	a.cap.max_send_wr = swr;
	a.cap.max_recv_wr = 1;
	a.cap.max_send_sge = 2;
	a.cap.max_recv_sge = 1;
	a.cap.max_inline_data = 32;
	a.qp_type = type;
	a.pd = e->pd;
	a.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
	a.send_ops_flags = ops;
	qp = ibv_create_qp_ex(e->ctx, &a);
	ASSERT_NOT_NULL(qp);
	return qp;
}

TEST(wr_builder_posts_through_send_queue)
{
	struct ibv_qp_ex *x;
	struct ibv_wc wc[8];
	struct ibv_qp *qp;
	struct env e;
	char data[16] = "inline data";

	env_open(&e);
	qp = qpx_new(&e, IBV_QPT_RC, 8,
		     IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_RDMA_WRITE |
			     IBV_QP_EX_WITH_RDMA_READ |
			     IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD);
	x = ibv_qp_to_qp_ex(qp);
	ASSERT_NOT_NULL(x);

	/* before RTS, wr_complete fails as ibv_post_send does */
	ibv_wr_start(x);
	x->wr_id = 1;
	ibv_wr_send(x);
	ibv_wr_set_sge(x, e.mr->lkey, (uintptr_t)e.buf, 8);
	ASSERT_EQ(ibv_wr_complete(x), EINVAL);

	qp_to_rts(qp);
	ibv_wr_start(x);
	x->wr_id = 1;
	x->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_send(x);
	ibv_wr_set_sge(x, e.mr->lkey, (uintptr_t)e.buf, 8);
	x->wr_id = 2;
	ibv_wr_rdma_write(x, 0x1234, 0x5000);
	ibv_wr_set_inline_data(x, data, sizeof(data));
	x->wr_id = 3;
	ibv_wr_rdma_read(x, 0x1234, 0x5000);
	ibv_wr_set_sge(x, e.mr->lkey, (uintptr_t)e.buf, 64);
	x->wr_id = 4;
	ibv_wr_atomic_fetch_add(x, 0x1234, 0x5000, 1);
	ibv_wr_set_sge(x, e.mr->lkey, (uintptr_t)e.buf, 8);
	ASSERT_EQ(ibv_wr_complete(x), 0);

	/* an aborted list posts nothing */
	ibv_wr_start(x);
	x->wr_id = 5;
	ibv_wr_send(x);
	ibv_wr_set_sge(x, e.mr->lkey, (uintptr_t)e.buf, 8);
	ibv_wr_abort(x);

	qp_to_err(qp);
	ASSERT_EQ(poll_all(e.cq, wc, 8), 4);
	ASSERT_U64_EQ(wc[0].wr_id, 1);
	ASSERT_EQ(wc[0].opcode, IBV_WC_SEND);
	ASSERT_U64_EQ(wc[1].wr_id, 2);
	ASSERT_EQ(wc[1].opcode, IBV_WC_RDMA_WRITE);
	ASSERT_U64_EQ(wc[2].wr_id, 3);
	ASSERT_EQ(wc[2].opcode, IBV_WC_RDMA_READ);
	ASSERT_U64_EQ(wc[3].wr_id, 4);
	ASSERT_EQ(wc[3].opcode, IBV_WC_FETCH_ADD);
	ASSERT_EQ(wc[3].status, IBV_WC_WR_FLUSH_ERR);
	ASSERT_EQ(ibv_destroy_qp(qp), 0);
}

TEST(wr_builder_errors_post_nothing)
{
	struct ibv_sge list[3];
	struct ibv_qp_ex *x;
	struct ibv_wc wc[8];
	struct ibv_qp *qp;
	struct env e;
	char big[1024];
	int i;

	env_open(&e);
	qp = qpx_new(&e, IBV_QPT_RC, 2, IBV_QP_EX_WITH_SEND);
	x = ibv_qp_to_qp_ex(qp);
	qp_to_rts(qp);
	for (i = 0; i < 3; i++)
		list[i] = sge_of(&e, 4);
	memset(big, 'x', sizeof(big));

	/* an operation outside the QP's send_ops_flags spoils the whole
	 * list (EINVAL); one softhca lacks too (EOPNOTSUPP, below) */
	ibv_wr_start(x);
	x->wr_id = 1;
	ibv_wr_send(x);
	ibv_wr_set_sge(x, e.mr->lkey, (uintptr_t)e.buf, 8);
	ibv_wr_local_inv(x, 0x99);
	ASSERT_EQ(ibv_wr_complete(x), EINVAL);
	ibv_wr_start(x);
	ibv_wr_send_inv(x, 1);
	ASSERT_EQ(ibv_wr_complete(x), EINVAL);
	ibv_wr_start(x);
	ibv_wr_bind_mw(x, NULL, 0, NULL);
	ASSERT_EQ(ibv_wr_complete(x), EINVAL);
	ibv_wr_start(x);
	ibv_wr_send_tso(x, NULL, 0, 0);
	ASSERT_EQ(ibv_wr_complete(x), EOPNOTSUPP);
	ibv_wr_start(x);
	ibv_wr_send(x);
	ibv_wr_set_xrc_srqn(x, 5);	/* not an XRC_SEND QP */
	ASSERT_EQ(ibv_wr_complete(x), EINVAL);
	/* an operation the QP was not created with */
	ibv_wr_start(x);
	ibv_wr_atomic_write(x, 0, 0x1000, big);
	ASSERT_EQ(ibv_wr_complete(x), EINVAL);
	/* more SGEs than max_send_sge, more inline than max_inline_data */
	ibv_wr_start(x);
	ibv_wr_send(x);
	ibv_wr_set_sge_list(x, 3, list);
	ASSERT_EQ(ibv_wr_complete(x), EINVAL);
	ibv_wr_start(x);
	ibv_wr_send(x);
	ibv_wr_set_inline_data(x, big, sizeof(big));
	ASSERT_EQ(ibv_wr_complete(x), EINVAL);
	/* more WRs than the send queue holds */
	ibv_wr_start(x);
	for (i = 0; i < 3; i++) {
		ibv_wr_send(x);
		ibv_wr_set_sge(x, e.mr->lkey, (uintptr_t)e.buf, 8);
	}
	ASSERT_EQ(ibv_wr_complete(x), ENOMEM);
	/* an operation the QP was not created with (send_ops_flags),
	 * found at wr_complete */
	ibv_wr_start(x);
	ibv_wr_send(x);
	ibv_wr_set_sge(x, e.mr->lkey, (uintptr_t)e.buf, 8);
	ibv_wr_atomic_cmp_swp(x, 1, 0x1000, 0, 1);
	ibv_wr_set_sge(x, e.mr->lkey, (uintptr_t)e.buf, 8);
	ASSERT_EQ(ibv_wr_complete(x), EINVAL);

	qp_to_err(qp);
	ASSERT_EQ(poll_all(e.cq, wc, 8), 0);
	ASSERT_EQ(ibv_destroy_qp(qp), 0);
}

TEST(wr_builder_ud)
{
	struct ibv_ah_attr aa;
	struct ibv_qp_ex *x;
	struct ibv_wc wc[4];
	struct ibv_qp *qp;
	struct ibv_ah *ah;
	struct env e;

	env_open(&e);
	qp = qpx_new(&e, IBV_QPT_UD, 4,
		     IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM);
	x = ibv_qp_to_qp_ex(qp);
	qp_to_rts(qp);
	memset(&aa, 0, sizeof(aa));
	aa.is_global = 1;
	aa.port_num = 1;
	ASSERT_EQ(ibv_query_gid(e.ctx, 1, 0, &aa.grh.dgid), 0);
	ah = ibv_create_ah(e.pd, &aa);
	ASSERT_NOT_NULL(ah);

	/* UD without an address: EINVAL */
	ibv_wr_start(x);
	ibv_wr_send(x);
	ibv_wr_set_sge(x, e.mr->lkey, (uintptr_t)e.buf, 8);
	ASSERT_EQ(ibv_wr_complete(x), EINVAL);
	/* RDMA on UD: EINVAL */
	ibv_wr_start(x);
	ibv_wr_rdma_write(x, 1, 0x1000);
	ibv_wr_set_ud_addr(x, ah, qp->qp_num, 0x11111111);
	ASSERT_EQ(ibv_wr_complete(x), EINVAL);

	/* executed at once: UD needs no answer */
	ibv_wr_start(x);
	x->wr_id = 42;
	x->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_send_imm(x, htobe32(7));
	ibv_wr_set_ud_addr(x, ah, qp->qp_num, 0x11111111);
	ibv_wr_set_sge(x, e.mr->lkey, (uintptr_t)e.buf, 8);
	ASSERT_EQ(ibv_wr_complete(x), 0);
	ASSERT_EQ(poll_all(e.cq, wc, 4), 1);
	ASSERT_U64_EQ(wc[0].wr_id, 42);
	ASSERT_EQ(wc[0].status, IBV_WC_SUCCESS);
	ASSERT_EQ(wc[0].opcode, IBV_WC_SEND);
	qp_to_err(qp);
	ASSERT_EQ(ibv_destroy_qp(qp), 0);
	ASSERT_EQ(ibv_destroy_ah(ah), 0);
}
