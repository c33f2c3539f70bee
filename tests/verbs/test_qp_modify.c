// SPDX-License-Identifier: MIT
/*
 * ibv_modify_qp and ibv_query_qp: every RC, UC and UD transition with the
 * attributes the kernel's ib_modify_qp_is_ok requires and allows (the
 * table below is written from it, independently of the library's), the
 * value checks and their errno, "a failed modify changes nothing", and
 * what ERR, RESET and SQD do.
 */
#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>
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
	e->cq = ibv_create_cq(e->ctx, 255, NULL, NULL, 0);
	ASSERT_NOT_NULL(e->cq);
	e->mr = ibv_reg_mr(e->pd, e->buf, sizeof(e->buf),
			   IBV_ACCESS_LOCAL_WRITE);
	ASSERT_NOT_NULL(e->mr);
}

/* Valid values for every attribute. */
static struct ibv_qp_attr good_attr(struct ibv_context *ctx)
{
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.pkey_index = 0;
	a.port_num = 1;
	a.qkey = 0x11111111;
	a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
	a.ah_attr.is_global = 1;
	a.ah_attr.port_num = 1;
	a.ah_attr.grh.sgid_index = 0;
	a.ah_attr.grh.hop_limit = 64;
	ASSERT_EQ(ibv_query_gid(ctx, 1, 0, &a.ah_attr.grh.dgid), 0);
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = 0x123456;
	a.rq_psn = 0x111;
	a.sq_psn = 0x222;
	a.max_dest_rd_atomic = 4;
	a.min_rnr_timer = 12;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 4;
	a.path_mig_state = IBV_MIG_MIGRATED;
	a.en_sqd_async_notify = 0;
	a.alt_port_num = 1;
	a.alt_ah_attr = a.ah_attr;
	return a;
}

static struct ibv_qp *qp_new(struct env *e, enum ibv_qp_type t)
{
	struct ibv_qp_init_attr a = {
		.send_cq = e->cq,
		.recv_cq = e->cq,
		.cap = { .max_send_wr = 8, .max_recv_wr = 8,
			 .max_send_sge = 1, .max_recv_sge = 1 },
		.qp_type = t,
	};
	struct ibv_qp *qp = ibv_create_qp(e->pd, &a);

	ASSERT_NOT_NULL(qp);
	return qp;
}

static enum ibv_qp_state qp_state(struct ibv_qp *qp)
{
	struct ibv_qp_init_attr init;
	struct ibv_qp_attr a;

	ASSERT_EQ(ibv_query_qp(qp, &a, IBV_QP_STATE, &init), 0);
	ASSERT_EQ(a.cur_qp_state, a.qp_state);
	return a.qp_state;
}

static int try_modify(struct ibv_qp *qp, enum ibv_qp_state to, int mask)
{
	struct ibv_qp_attr a = good_attr(qp->context);

	a.qp_state = to;
	a.cur_qp_state = qp_state(qp);
	return ibv_modify_qp(qp, &a, mask | IBV_QP_STATE);
}

/* ------------------------------------------------------------------ */
/* The table (drivers/infiniband/core/verbs.c, qp_state_table)         */

enum { RC, UC, UD };

#define C	IBV_QP_CUR_STATE
#define ACC	IBV_QP_ACCESS_FLAGS
#define PKEY	IBV_QP_PKEY_INDEX
#define PORT	IBV_QP_PORT
#define QKEY	IBV_QP_QKEY
#define AV	IBV_QP_AV
#define MTU	IBV_QP_PATH_MTU
#define TMO	IBV_QP_TIMEOUT
#define RTRY	IBV_QP_RETRY_CNT
#define RNR	IBV_QP_RNR_RETRY
#define RQPSN	IBV_QP_RQ_PSN
#define RDA	IBV_QP_MAX_QP_RD_ATOMIC
#define ALT	IBV_QP_ALT_PATH
#define RNRT	IBV_QP_MIN_RNR_TIMER
#define SQPSN	IBV_QP_SQ_PSN
#define DRDA	IBV_QP_MAX_DEST_RD_ATOMIC
#define MIG	IBV_QP_PATH_MIG_STATE
#define DQPN	IBV_QP_DEST_QPN
#define SQDN	IBV_QP_EN_SQD_ASYNC_NOTIFY

static const struct step {
	enum ibv_qp_state from, to;
	int req[3], opt[3];
} steps[] = {
	{ IBV_QPS_RESET, IBV_QPS_INIT,
	  { PKEY | PORT | ACC, PKEY | PORT | ACC, PKEY | PORT | QKEY },
	  { 0, 0, 0 } },
	{ IBV_QPS_INIT, IBV_QPS_INIT,
	  { 0, 0, 0 },
	  { PKEY | PORT | ACC, PKEY | PORT | ACC, PKEY | PORT | QKEY } },
	{ IBV_QPS_INIT, IBV_QPS_RTR,
	  { AV | MTU | DQPN | RQPSN | DRDA | RNRT, AV | MTU | DQPN | RQPSN,
	    0 },
	  { ALT | ACC | PKEY, ALT | ACC | PKEY, PKEY | QKEY } },
	{ IBV_QPS_RTR, IBV_QPS_RTS,
	  { TMO | RTRY | RNR | SQPSN | RDA, SQPSN, SQPSN },
	  { C | ALT | ACC | RNRT | MIG, C | ALT | ACC | MIG, C | QKEY } },
	{ IBV_QPS_RTS, IBV_QPS_RTS,
	  { 0, 0, 0 },
	  { C | ACC | ALT | MIG | RNRT, C | ACC | ALT | MIG, C | QKEY } },
	{ IBV_QPS_RTS, IBV_QPS_SQD,
	  { 0, 0, 0 },
	  { SQDN, SQDN, SQDN } },
	{ IBV_QPS_SQD, IBV_QPS_RTS,
	  { 0, 0, 0 },
	  { C | ALT | ACC | RNRT | MIG, C | ALT | ACC | MIG, C | QKEY } },
	{ IBV_QPS_SQD, IBV_QPS_SQD,
	  { 0, 0, 0 },
	  { PORT | AV | TMO | RTRY | RNR | RDA | DRDA | ALT | ACC | PKEY |
		    RNRT | MIG,
	    AV | ALT | ACC | PKEY | MIG, PKEY | QKEY } },
	{ IBV_QPS_INIT, IBV_QPS_ERR, { 0, 0, 0 }, { 0, 0, 0 } },
	{ IBV_QPS_RTR, IBV_QPS_ERR, { 0, 0, 0 }, { 0, 0, 0 } },
	{ IBV_QPS_RTS, IBV_QPS_ERR, { 0, 0, 0 }, { 0, 0, 0 } },
	{ IBV_QPS_SQD, IBV_QPS_ERR, { 0, 0, 0 }, { 0, 0, 0 } },
	{ IBV_QPS_ERR, IBV_QPS_ERR, { 0, 0, 0 }, { 0, 0, 0 } },
	{ IBV_QPS_INIT, IBV_QPS_RESET, { 0, 0, 0 }, { 0, 0, 0 } },
	{ IBV_QPS_RTS, IBV_QPS_RESET, { 0, 0, 0 }, { 0, 0, 0 } },
	{ IBV_QPS_ERR, IBV_QPS_RESET, { 0, 0, 0 }, { 0, 0, 0 } },
	{ IBV_QPS_RESET, IBV_QPS_RESET, { 0, 0, 0 }, { 0, 0, 0 } },
};

static const enum ibv_qp_type types[] = { IBV_QPT_RC, IBV_QPT_UC,
					  IBV_QPT_UD };

static const struct step *find_step(enum ibv_qp_state from,
				    enum ibv_qp_state to)
{
	unsigned int i;

	for (i = 0; i < sizeof(steps) / sizeof(steps[0]); i++)
		if (steps[i].from == from && steps[i].to == to)
			return &steps[i];
	return NULL;
}

/* A fresh QP of type t (index ti) taken to state s with required masks. */
static struct ibv_qp *qp_at(struct env *e, int ti, enum ibv_qp_state s)
{
	static const enum ibv_qp_state path[] = {
		IBV_QPS_RESET, IBV_QPS_INIT, IBV_QPS_RTR, IBV_QPS_RTS,
		IBV_QPS_SQD,
	};
	struct ibv_qp *qp = qp_new(e, types[ti]);
	unsigned int i;

	if (s == IBV_QPS_RESET)
		return qp;
	if (s == IBV_QPS_ERR) {
		ASSERT_EQ(try_modify(qp, IBV_QPS_INIT,
				     find_step(IBV_QPS_RESET,
					       IBV_QPS_INIT)->req[ti]), 0);
		ASSERT_EQ(try_modify(qp, IBV_QPS_ERR, 0), 0);
		return qp;
	}
	for (i = 1; i < sizeof(path) / sizeof(path[0]); i++) {
		const struct step *st = find_step(path[i - 1], path[i]);

		ASSERT_EQ(try_modify(qp, path[i], st->req[ti]), 0);
		ASSERT_EQ(qp->state, path[i]);
		if (path[i] == s)
			break;
	}
	ASSERT_EQ(qp_state(qp), s);
	return qp;
}

TEST(every_transition_with_required_attributes)
{
	unsigned int i;
	struct env e;
	int t;

	env_open(&e);
	for (t = 0; t < 3; t++) {
		for (i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
			struct ibv_qp *qp = qp_at(&e, t, steps[i].from);

			ASSERT_EQ(try_modify(qp, steps[i].to,
					     steps[i].req[t]), 0);
			ASSERT_EQ(qp_state(qp), steps[i].to);
			ASSERT_EQ(qp->state, steps[i].to);
			ASSERT_EQ(ibv_destroy_qp(qp), 0);
		}
	}
}

TEST(missing_required_attribute_is_einval)
{
	unsigned int i, bit;
	struct env e;
	int t;

	env_open(&e);
	for (t = 0; t < 3; t++) {
		for (i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
			struct ibv_qp *qp;

			if (!steps[i].req[t])
				continue;
			qp = qp_at(&e, t, steps[i].from);
			for (bit = 0; bit < 21; bit++) {
				int b = 1 << bit;

				if (!(steps[i].req[t] & b))
					continue;
				ASSERT_EQ(try_modify(qp, steps[i].to,
						     steps[i].req[t] & ~b),
					  EINVAL);
				ASSERT_EQ(qp_state(qp), steps[i].from);
			}
			ASSERT_EQ(ibv_destroy_qp(qp), 0);
		}
	}
}

TEST(attribute_not_allowed_is_einval)
{
	unsigned int i, bit;
	struct env e;
	int t;

	env_open(&e);
	for (t = 0; t < 3; t++) {
		for (i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
			const struct step *st = &steps[i];
			struct ibv_qp *qp = qp_at(&e, t, st->from);

			for (bit = 1; bit < 21; bit++) {
				int b = 1 << bit;

				if ((st->req[t] | st->opt[t]) & b)
					continue;
				ASSERT_EQ(try_modify(qp, st->to,
						     st->req[t] | b), EINVAL);
				ASSERT_EQ(qp_state(qp), st->from);
			}
			ASSERT_EQ(ibv_destroy_qp(qp), 0);
		}
	}
}

TEST(optional_attributes_are_accepted)
{
	unsigned int i, bit;
	struct env e;
	int t;

	env_open(&e);
	for (t = 0; t < 3; t++) {
		for (i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
			const struct step *st = &steps[i];

			for (bit = 1; bit < 21; bit++) {
				int b = 1 << bit;
				struct ibv_qp *qp;

				if (!(st->opt[t] & b))
					continue;
				qp = qp_at(&e, t, st->from);
				/*
				 * RoCE: alternate paths are IB-only (core).
				 * SQD -> SQD: uverbs adds IBV_QP_PORT to a
				 * new AV, which UC does not take there.
				 */
				ASSERT_EQ(try_modify(qp, st->to,
						     st->req[t] | b),
					  b == ALT ? EINVAL :
					  b == AV && t == UC &&
					  st->from == IBV_QPS_SQD ? EINVAL :
					  0);
				ASSERT_EQ(ibv_destroy_qp(qp), 0);
			}
		}
	}
}

TEST(illegal_transitions)
{
	static const enum ibv_qp_state bad[][2] = {
		{ IBV_QPS_RESET, IBV_QPS_RTR },
		{ IBV_QPS_RESET, IBV_QPS_RTS },
		{ IBV_QPS_RESET, IBV_QPS_SQD },
		{ IBV_QPS_RESET, IBV_QPS_ERR },	/* not in the kernel's */
		{ IBV_QPS_INIT, IBV_QPS_RTS },
		{ IBV_QPS_INIT, IBV_QPS_SQD },
		{ IBV_QPS_RTR, IBV_QPS_INIT },
		{ IBV_QPS_RTR, IBV_QPS_RTR },
		{ IBV_QPS_RTR, IBV_QPS_SQD },
		{ IBV_QPS_RTS, IBV_QPS_INIT },
		{ IBV_QPS_RTS, IBV_QPS_RTR },
		{ IBV_QPS_SQD, IBV_QPS_INIT },
		{ IBV_QPS_ERR, IBV_QPS_INIT },
		{ IBV_QPS_ERR, IBV_QPS_RTS },
		{ IBV_QPS_RTS, IBV_QPS_SQE },	/* SQE: the data path's */
		{ IBV_QPS_RTR, IBV_QPS_SQE },
	};
	unsigned int i;
	struct env e;
	int t;

	env_open(&e);
	for (t = 0; t < 3; t++) {
		for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
			struct ibv_qp *qp = qp_at(&e, t, bad[i][0]);

			/* every attribute, so only the transition is wrong */
			ASSERT_EQ(try_modify(qp, bad[i][1], 0), EINVAL);
			ASSERT_EQ(qp_state(qp), bad[i][0]);
			ASSERT_EQ(qp->state, bad[i][0]);
			ASSERT_EQ(ibv_destroy_qp(qp), 0);
		}
	}
}

TEST(cur_state_must_be_true)
{
	struct ibv_qp_attr a;
	struct ibv_qp *qp;
	struct env e;

	env_open(&e);
	qp = qp_at(&e, RC, IBV_QPS_RTS);
	a = good_attr(e.ctx);
	a.qp_state = IBV_QPS_RTS;
	a.cur_qp_state = IBV_QPS_RTS;
	ASSERT_EQ(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_CUR_STATE), 0);
	a.cur_qp_state = IBV_QPS_SQD;
	ASSERT_EQ(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_CUR_STATE),
		  EINVAL);
	a.cur_qp_state = 9;
	ASSERT_EQ(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_CUR_STATE),
		  EINVAL);
	a.qp_state = IBV_QPS_UNKNOWN;
	ASSERT_EQ(ibv_modify_qp(qp, &a, IBV_QP_STATE), EINVAL);
	ASSERT_EQ(ibv_destroy_qp(qp), 0);

	/* not given leaving INIT, even if true */
	qp = qp_at(&e, UD, IBV_QPS_INIT);
	a.qp_state = IBV_QPS_INIT;
	a.cur_qp_state = IBV_QPS_INIT;
	ASSERT_EQ(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_CUR_STATE),
		  EINVAL);
	ASSERT_EQ(ibv_destroy_qp(qp), 0);
}

/* ------------------------------------------------------------------ */
/* Values                                                              */

static void expect(struct ibv_qp *qp, struct ibv_qp_attr *a, int mask,
		   int err)
{
	enum ibv_qp_state before = qp_state(qp);

	ASSERT_EQ(ibv_modify_qp(qp, a, mask), err);
	if (err)
		ASSERT_EQ(qp_state(qp), before);
}

TEST(value_checks_reset_to_init)
{
	const int mask = IBV_QP_STATE | PKEY | PORT | ACC;
	struct ibv_qp_attr a;
	struct ibv_qp *qp;
	struct env e;

	env_open(&e);
	qp = qp_new(&e, IBV_QPT_RC);
	a = good_attr(e.ctx);
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 0;
	expect(qp, &a, mask, EINVAL);
	a.port_num = 2;
	expect(qp, &a, mask, EINVAL);
	a.port_num = 1;
	a.pkey_index = 1;		/* the P_Key table has one entry */
	expect(qp, &a, mask, EINVAL);
	a.pkey_index = 0;
	a.qp_access_flags = IBV_ACCESS_MW_BIND;
	expect(qp, &a, mask, EINVAL);
	a.qp_access_flags = IBV_ACCESS_ZERO_BASED;
	expect(qp, &a, mask, EINVAL);
	a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			    IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
	expect(qp, &a, mask, 0);
	ASSERT_EQ(ibv_destroy_qp(qp), 0);
}

TEST(value_checks_init_to_rtr)
{
	const int mask = IBV_QP_STATE | AV | MTU | DQPN | RQPSN | DRDA | RNRT;
	struct ibv_device_attr da;
	struct ibv_port_attr pa;
	struct ibv_qp_attr a;
	union ibv_gid gid;
	struct ibv_qp *qp;
	struct env e;
	int empty = -1, i;

	env_open(&e);
	ASSERT_EQ(ibv_query_device(e.ctx, &da), 0);
	ASSERT_EQ(ibv_query_port(e.ctx, 1, &pa), 0);
	for (i = 0; i < pa.gid_tbl_len && empty < 0; i++) {
		static const union ibv_gid zero;

		ASSERT_EQ(ibv_query_gid(e.ctx, 1, i, &gid), 0);
		if (!memcmp(&gid, &zero, sizeof(gid)))
			empty = i;
	}
	qp = qp_at(&e, RC, IBV_QPS_INIT);
	a = good_attr(e.ctx);
	a.qp_state = IBV_QPS_RTR;

	a.path_mtu = 0;
	expect(qp, &a, mask, EINVAL);
	a.path_mtu = IBV_MTU_4096 + 1;
	expect(qp, &a, mask, EINVAL);
	a.path_mtu = IBV_MTU_4096;
	a.max_dest_rd_atomic = da.max_qp_rd_atom + 1;
	expect(qp, &a, mask, EINVAL);
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 32;		/* 5 bits */
	expect(qp, &a, mask, EINVAL);
	a.min_rnr_timer = 31;
	a.dest_qp_num = 0x1000000;	/* 24 bits */
	expect(qp, &a, mask, EINVAL);
	a.dest_qp_num = 0xffffff;
	/* RoCE: the GRH is required, from a GID the port has */
	a.ah_attr.is_global = 0;
	expect(qp, &a, mask, EINVAL);
	a.ah_attr.is_global = 1;
	a.ah_attr.port_num = 2;
	expect(qp, &a, mask, EINVAL);
	a.ah_attr.port_num = 1;
	a.ah_attr.grh.sgid_index = (uint8_t)pa.gid_tbl_len;
	expect(qp, &a, mask, pa.gid_tbl_len < 256 ? EINVAL : 0);
	if (empty >= 0) {
		/* the core's rdma_get_gid_attr: an empty entry is ENODATA */
		a.ah_attr.grh.sgid_index = (uint8_t)empty;
		expect(qp, &a, mask, ENODATA);
	}
	a.ah_attr.grh.sgid_index = 0;
	/* alternate paths: the core allows them on InfiniBand only */
	expect(qp, &a, mask | ALT, EINVAL);
	expect(qp, &a, mask, 0);
	ASSERT_EQ(ibv_destroy_qp(qp), 0);
}

TEST(value_checks_rtr_to_rts)
{
	const int mask = IBV_QP_STATE | TMO | RTRY | RNR | SQPSN | RDA;
	struct ibv_device_attr da;
	struct ibv_qp_attr a;
	struct ibv_qp *qp;
	struct env e;

	env_open(&e);
	ASSERT_EQ(ibv_query_device(e.ctx, &da), 0);
	qp = qp_at(&e, RC, IBV_QPS_RTR);
	a = good_attr(e.ctx);
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 32;
	expect(qp, &a, mask, EINVAL);
	a.timeout = 31;
	a.retry_cnt = 8;
	expect(qp, &a, mask, EINVAL);
	a.retry_cnt = 7;
	a.rnr_retry = 8;
	expect(qp, &a, mask, EINVAL);
	a.rnr_retry = 7;
	a.max_rd_atomic = da.max_qp_init_rd_atom + 1;
	expect(qp, &a, mask, EINVAL);
	a.max_rd_atomic = da.max_qp_init_rd_atom;
	a.path_mig_state = IBV_MIG_ARMED + 1;
	expect(qp, &a, mask | MIG, EINVAL);
	a.path_mig_state = IBV_MIG_ARMED;
	expect(qp, &a, mask | MIG, 0);
	ASSERT_EQ(ibv_destroy_qp(qp), 0);
}

TEST(mask_bits_past_dest_qpn_are_eopnotsupp)
{
	struct ibv_qp_attr a;
	struct ibv_qp *qp;
	struct env e;

	env_open(&e);
	qp = qp_at(&e, UD, IBV_QPS_RTS);
	a = good_attr(e.ctx);
	a.qp_state = IBV_QPS_RTS;
	expect(qp, &a, IBV_QP_STATE | (1 << 21), EOPNOTSUPP);
	expect(qp, &a, IBV_QP_STATE | (1 << 24), EOPNOTSUPP);
	expect(qp, &a, IBV_QP_STATE | IBV_QP_RATE_LIMIT, EOPNOTSUPP);
	expect(qp, &a, IBV_QP_STATE | (int)(1u << 31), EOPNOTSUPP);
	ASSERT_EQ(ibv_destroy_qp(qp), 0);
}

TEST(failed_modify_changes_nothing)
{
	struct ibv_qp_attr a, before, after;
	struct ibv_qp_init_attr init;
	struct ibv_qp *qp;
	struct env e;

	env_open(&e);
	qp = qp_at(&e, RC, IBV_QPS_INIT);
	ASSERT_EQ(ibv_query_qp(qp, &before, 0, &init), 0);
	/* all valid but one: nothing of it may stick */
	a = good_attr(e.ctx);
	a.qp_state = IBV_QPS_RTR;
	a.dest_qp_num = 0x777;
	a.rq_psn = 0x999;
	a.path_mtu = IBV_MTU_2048;
	a.qp_access_flags = IBV_ACCESS_REMOTE_ATOMIC;
	a.min_rnr_timer = 40;
	ASSERT_EQ(ibv_modify_qp(qp, &a, IBV_QP_STATE | AV | MTU | DQPN |
				RQPSN | DRDA | RNRT | ACC), EINVAL);
	ASSERT_EQ(ibv_query_qp(qp, &after, 0, &init), 0);
	ASSERT_EQ(memcmp(&before, &after, sizeof(before)), 0);
	ASSERT_EQ(qp->state, IBV_QPS_INIT);
	ASSERT_EQ(ibv_destroy_qp(qp), 0);
}

/* ------------------------------------------------------------------ */
/* Applied values, query                                               */

TEST(query_reports_what_was_set)
{
	struct ibv_qp_init_attr init;
	struct ibv_qp_attr a, q;
	struct ibv_qp *qp;
	struct env e;
	int x;

	env_open(&e);
	qp = qp_new(&e, IBV_QPT_RC);
	a = good_attr(e.ctx);
	a.qp_state = IBV_QPS_INIT;
	a.qp_access_flags = IBV_ACCESS_REMOTE_READ;
	ASSERT_EQ(ibv_modify_qp(qp, &a, IBV_QP_STATE | PKEY | PORT | ACC), 0);
	a.qp_state = IBV_QPS_RTR;
	a.rq_psn = 0x12345678;		/* masked to 24 bits */
	a.dest_qp_num = 0xabcdef;
	a.path_mtu = IBV_MTU_512;
	a.max_dest_rd_atomic = 3;
	a.min_rnr_timer = 5;
	ASSERT_EQ(ibv_modify_qp(qp, &a, IBV_QP_STATE | AV | MTU | DQPN |
				RQPSN | DRDA | RNRT), 0);
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 0xff000001;
	a.timeout = 9;
	a.retry_cnt = 3;
	a.rnr_retry = 6;
	a.max_rd_atomic = 2;
	ASSERT_EQ(ibv_modify_qp(qp, &a, IBV_QP_STATE | TMO | RTRY | RNR |
				SQPSN | RDA), 0);

	/* the mask is a hint: everything comes back */
	memset(&q, 0xee, sizeof(q));
	memset(&init, 0xee, sizeof(init));
	ASSERT_EQ(ibv_query_qp(qp, &q, 0, &init), 0);
	ASSERT_EQ(q.qp_state, IBV_QPS_RTS);
	ASSERT_EQ(q.cur_qp_state, IBV_QPS_RTS);
	ASSERT_EQ(q.port_num, 1);
	ASSERT_EQ(q.pkey_index, 0);
	ASSERT_EQ(q.qp_access_flags, IBV_ACCESS_REMOTE_READ);
	ASSERT_EQ(q.rq_psn, 0x345678);
	ASSERT_EQ(q.sq_psn, 0x000001);
	ASSERT_EQ(q.dest_qp_num, 0xabcdef);
	ASSERT_EQ(q.path_mtu, IBV_MTU_512);
	ASSERT_EQ(q.max_dest_rd_atomic, 3);
	ASSERT_EQ(q.min_rnr_timer, 5);
	ASSERT_EQ(q.timeout, 9);
	ASSERT_EQ(q.retry_cnt, 3);
	ASSERT_EQ(q.rnr_retry, 6);
	ASSERT_EQ(q.max_rd_atomic, 2);
	ASSERT_EQ(q.sq_draining, 0);
	ASSERT_EQ(q.ah_attr.is_global, 1);
	ASSERT_EQ(q.ah_attr.port_num, 1);
	ASSERT_EQ(q.ah_attr.grh.hop_limit, 64);
	ASSERT_EQ(memcmp(&q.ah_attr.grh.dgid, &a.ah_attr.grh.dgid, 16), 0);
	ASSERT_EQ(q.cap.max_send_wr, 8);
	ASSERT_EQ(q.cap.max_recv_wr, 8);
	ASSERT(init.send_cq == e.cq && init.recv_cq == e.cq);
	ASSERT(init.srq == NULL);
	ASSERT(init.qp_context == NULL);
	ASSERT_EQ(init.qp_type, IBV_QPT_RC);
	ASSERT_EQ(init.sq_sig_all, 0);
	ASSERT_EQ(init.cap.max_send_wr, 8);
	ASSERT_EQ(init.cap.max_recv_sge, 1);

	/* RTS -> RTS with RC's optional min_rnr_timer */
	a.min_rnr_timer = 20;
	ASSERT_EQ(ibv_modify_qp(qp, &a, RNRT), 0);
	ASSERT_EQ(ibv_query_qp(qp, &q, RNRT, &init), 0);
	ASSERT_EQ(q.min_rnr_timer, 20);
	/* query bits from IBV_QP_RATE_LIMIT on need the extended command */
	x = ibv_query_qp(qp, &q, IBV_QP_RATE_LIMIT, &init);
	ASSERT_EQ(x, EOPNOTSUPP);
	ASSERT_EQ(ibv_destroy_qp(qp), 0);
}

TEST(query_sq_sig_all_and_context)
{
	struct ibv_qp_init_attr a = {
		.qp_context = (void *)0x1234,
		.cap = { .max_send_wr = 2, .max_recv_wr = 2,
			 .max_send_sge = 1, .max_recv_sge = 1 },
		.qp_type = IBV_QPT_UD,
		.sq_sig_all = 1,
	}, init;
	struct ibv_qp_attr q;
	struct ibv_qp *qp;
	struct env e;

	env_open(&e);
	a.send_cq = e.cq;
	a.recv_cq = e.cq;
	qp = ibv_create_qp(e.pd, &a);
	ASSERT_NOT_NULL(qp);
	ASSERT_EQ(ibv_query_qp(qp, &q, IBV_QP_STATE, &init), 0);
	ASSERT_EQ(q.qp_state, IBV_QPS_RESET);
	ASSERT(init.qp_context == (void *)0x1234);
	ASSERT_EQ(init.sq_sig_all, 1);
	ASSERT_EQ(init.qp_type, IBV_QPT_UD);
	ASSERT_EQ(ibv_destroy_qp(qp), 0);
}

TEST(ud_qkey_in_rts)
{
	struct ibv_qp_init_attr init;
	struct ibv_qp_attr a, q;
	struct ibv_qp *qp;
	struct env e;

	env_open(&e);
	qp = qp_at(&e, UD, IBV_QPS_RTS);
	a.qkey = 0x42;
	ASSERT_EQ(ibv_modify_qp(qp, &a, QKEY), 0);
	ASSERT_EQ(ibv_query_qp(qp, &q, QKEY, &init), 0);
	ASSERT_EQ(q.qkey, 0x42);
	ASSERT_EQ(q.qp_state, IBV_QPS_RTS);
	ASSERT_EQ(ibv_destroy_qp(qp), 0);
}

/* ------------------------------------------------------------------ */
/* What the transitions do                                             */

static void post_recvs(struct env *e, struct ibv_qp *qp, int n, int base)
{
	struct ibv_sge sg = { (uintptr_t)e->buf, 16, e->mr->lkey };
	int i;

	for (i = 0; i < n; i++) {
		struct ibv_recv_wr wr = { .wr_id = (uint64_t)(base + i),
					  .sg_list = &sg, .num_sge = 1 },
				   *bad;

		ASSERT_EQ(ibv_post_recv(qp, &wr, &bad), 0);
	}
}

static void post_send(struct env *e, struct ibv_qp *qp, uint64_t id,
		      enum ibv_wr_opcode op, unsigned int flags)
{
	struct ibv_sge sg = { (uintptr_t)e->buf, 8, e->mr->lkey };
	struct ibv_send_wr wr = { .wr_id = id, .sg_list = &sg, .num_sge = 1,
				  .opcode = op, .send_flags = flags },
			   *bad;

	ASSERT_EQ(ibv_post_send(qp, &wr, &bad), 0);
}

TEST(error_flushes_both_queues)
{
	struct ibv_wc wc[16];
	struct ibv_qp *qp;
	struct env e;
	int i;

	env_open(&e);
	qp = qp_at(&e, RC, IBV_QPS_INIT);
	post_recvs(&e, qp, 3, 100);
	ASSERT_EQ(try_modify(qp, IBV_QPS_RTR,
			     find_step(IBV_QPS_INIT, IBV_QPS_RTR)->req[RC]), 0);
	ASSERT_EQ(try_modify(qp, IBV_QPS_RTS,
			     find_step(IBV_QPS_RTR, IBV_QPS_RTS)->req[RC]), 0);
	post_send(&e, qp, 1, IBV_WR_SEND, IBV_SEND_SIGNALED);
	/* the second one unsignaled */
	post_send(&e, qp, 2, IBV_WR_RDMA_WRITE_WITH_IMM, 0);
	post_send(&e, qp, 3, IBV_WR_ATOMIC_CMP_AND_SWP, 0);
	ASSERT_EQ(ibv_poll_cq(e.cq, 16, wc), 0);

	ASSERT_EQ(try_modify(qp, IBV_QPS_ERR, 0), 0);
	ASSERT_EQ(ibv_poll_cq(e.cq, 16, wc), 6);
	/* the send queue first, then the receive queue, each in order */
	ASSERT_U64_EQ(wc[0].wr_id, 1);
	ASSERT_EQ(wc[0].opcode, IBV_WC_SEND);
	ASSERT_U64_EQ(wc[1].wr_id, 2);
	ASSERT_EQ(wc[1].opcode, IBV_WC_RDMA_WRITE);
	ASSERT_U64_EQ(wc[2].wr_id, 3);
	ASSERT_EQ(wc[2].opcode, IBV_WC_COMP_SWAP);
	for (i = 0; i < 3; i++) {
		ASSERT_U64_EQ(wc[3 + i].wr_id, 100 + i);
		ASSERT_EQ(wc[3 + i].opcode, IBV_WC_RECV);
	}
	for (i = 0; i < 6; i++) {
		ASSERT_EQ(wc[i].status, IBV_WC_WR_FLUSH_ERR);
		ASSERT_EQ(wc[i].qp_num, qp->qp_num);
	}
	/* ERR -> ERR flushes nothing twice */
	ASSERT_EQ(try_modify(qp, IBV_QPS_ERR, 0), 0);
	ASSERT_EQ(ibv_poll_cq(e.cq, 16, wc), 0);
	ASSERT_EQ(ibv_destroy_qp(qp), 0);
}

TEST(reset_discards_work_and_attributes)
{
	struct ibv_qp_init_attr init;
	struct ibv_qp_attr q;
	struct ibv_wc wc[16];
	struct ibv_qp *qp;
	struct env e;

	env_open(&e);
	/* RC: the send waits for an answer from a QP that does not exist */
	qp = qp_at(&e, RC, IBV_QPS_RTS);
	post_recvs(&e, qp, 4, 0);
	post_send(&e, qp, 9, IBV_WR_SEND, IBV_SEND_SIGNALED);
	ASSERT_EQ(try_modify(qp, IBV_QPS_RESET, 0), 0);
	ASSERT_EQ(ibv_poll_cq(e.cq, 16, wc), 0);
	ASSERT_EQ(ibv_query_qp(qp, &q, 0, &init), 0);
	ASSERT_EQ(q.qp_state, IBV_QPS_RESET);
	ASSERT_EQ(q.dest_qp_num, 0);
	ASSERT_EQ(q.sq_psn, 0);
	ASSERT_EQ(q.qp_access_flags, 0);
	ASSERT_EQ(q.port_num, 0);
	ASSERT_EQ(q.ah_attr.is_global, 0);
	ASSERT_EQ(q.cap.max_recv_wr, 8);	/* capabilities stay */
	/* reusable, and the discarded WRs are gone for good */
	ASSERT_EQ(try_modify(qp, IBV_QPS_INIT,
			     find_step(IBV_QPS_RESET, IBV_QPS_INIT)->req[RC]),
		  0);
	post_recvs(&e, qp, 1, 50);
	ASSERT_EQ(try_modify(qp, IBV_QPS_ERR, 0), 0);
	ASSERT_EQ(ibv_poll_cq(e.cq, 16, wc), 1);
	ASSERT_U64_EQ(wc[0].wr_id, 50);
	ASSERT_EQ(ibv_destroy_qp(qp), 0);
}

/*
 * A destroyed QP's flushed work requests leave its CQs, as on mlx5 (a
 * program may free what their wr_id names once the destroy returned);
 * another QP's completions in the same CQ stay, in order.  What it had
 * carried out stays (tests/traffic/test_errors.c:
 * destroy_keeps_done_drops_flushed).
 */
TEST(destroy_drops_flushed_completions)
{
	struct ibv_wc wc[16];
	struct ibv_qp *qp, *other;
	struct env e;

	env_open(&e);
	qp = qp_at(&e, RC, IBV_QPS_INIT);
	other = qp_at(&e, RC, IBV_QPS_INIT);
	post_recvs(&e, qp, 2, 70);
	post_recvs(&e, other, 1, 80);
	post_recvs(&e, qp, 1, 72);
	ASSERT_EQ(try_modify(qp, IBV_QPS_ERR, 0), 0);
	ASSERT_EQ(try_modify(other, IBV_QPS_ERR, 0), 0);
	ASSERT_EQ(ibv_destroy_qp(qp), 0);
	ASSERT_EQ(ibv_poll_cq(e.cq, 16, wc), 1);
	ASSERT_U64_EQ(wc[0].wr_id, 80);
	ASSERT_EQ(wc[0].qp_num, other->qp_num);
	ASSERT_EQ(wc[0].status, IBV_WC_WR_FLUSH_ERR);
	ASSERT_EQ(ibv_destroy_qp(other), 0);
}

/*
 * Moving a QP to RESET removes the completions it left in its CQs, as
 * mlx4/mlx5 do (mlx5_modify_qp cleans both CQs of the QP's number; README
 * "Behaviour worth knowing"), in both the send and the receive CQ; the
 * other QPs' completions in the same CQ stay, in order, and what the QP
 * completes after the reset is kept.
 */
TEST(reset_removes_its_completions)
{
	struct ibv_qp_init_attr ia = {
		.cap = { .max_send_wr = 8, .max_recv_wr = 8,
			 .max_send_sge = 1, .max_recv_sge = 1 },
		.qp_type = IBV_QPT_RC,
	};
	static const uint64_t left[] = { 20, 21, 22 };
	struct ibv_qp *a, *b;
	struct ibv_wc wc[16];
	struct ibv_cq *scq;
	struct env e;
	unsigned int i;

	env_open(&e);
	scq = ibv_create_cq(e.ctx, 16, NULL, NULL, 0);
	ASSERT_NOT_NULL(scq);
	/* a: sends to scq, receives to e.cq; b: both to e.cq */
	ia.send_cq = scq;
	ia.recv_cq = e.cq;
	a = ibv_create_qp(e.pd, &ia);
	ASSERT_NOT_NULL(a);
	ASSERT_EQ(try_modify(a, IBV_QPS_INIT,
			     find_step(IBV_QPS_RESET, IBV_QPS_INIT)->req[RC]),
		  0);
	ASSERT_EQ(try_modify(a, IBV_QPS_RTR,
			     find_step(IBV_QPS_INIT, IBV_QPS_RTR)->req[RC]), 0);
	ASSERT_EQ(try_modify(a, IBV_QPS_RTS,
			     find_step(IBV_QPS_RTR, IBV_QPS_RTS)->req[RC]), 0);
	b = qp_at(&e, RC, IBV_QPS_INIT);

	/* e.cq: a10 a11 b20 b21 a12 b22 (flushes); scq: a1, a2 */
	post_recvs(&e, a, 2, 10);
	post_send(&e, a, 1, IBV_WR_SEND, IBV_SEND_SIGNALED);
	post_send(&e, a, 2, IBV_WR_SEND, IBV_SEND_SIGNALED);
	post_recvs(&e, b, 2, 20);
	ASSERT_EQ(try_modify(a, IBV_QPS_ERR, 0), 0);
	ASSERT_EQ(try_modify(b, IBV_QPS_ERR, 0), 0);
	post_recvs(&e, a, 1, 12);	/* flushed at once in ERR */
	post_recvs(&e, b, 1, 22);
	/* they are there: the first of each CQ is a's */
	ASSERT_EQ(ibv_poll_cq(e.cq, 1, wc), 1);
	ASSERT_U64_EQ(wc[0].wr_id, 10);
	ASSERT_EQ(wc[0].qp_num, a->qp_num);
	ASSERT_EQ(ibv_poll_cq(scq, 1, wc), 1);
	ASSERT_U64_EQ(wc[0].wr_id, 1);

	/* a to RESET: a11, a12 and a2 leave; b's stay, in order */
	ASSERT_EQ(try_modify(a, IBV_QPS_RESET, 0), 0);
	ASSERT_EQ(ibv_poll_cq(scq, 16, wc), 0);
	ASSERT_EQ(ibv_poll_cq(e.cq, 16, wc), 3);
	for (i = 0; i < 3; i++) {
		if (wc[i].qp_num != b->qp_num || wc[i].wr_id != left[i])
			harness_fail(__FILE__, __LINE__, "completion %u after "
				     "the reset: wr_id %llu of QP %#x, "
				     "expected b's %llu (%#x); a is %#x", i,
				     (unsigned long long)wc[i].wr_id,
				     wc[i].qp_num,
				     (unsigned long long)left[i],
				     b->qp_num, a->qp_num);
		ASSERT_EQ(wc[i].status, IBV_WC_WR_FLUSH_ERR);
	}

	/* what a completes after the reset stays */
	ASSERT_EQ(try_modify(a, IBV_QPS_INIT,
			     find_step(IBV_QPS_RESET, IBV_QPS_INIT)->req[RC]),
		  0);
	post_recvs(&e, a, 1, 30);
	ASSERT_EQ(try_modify(a, IBV_QPS_ERR, 0), 0);
	ASSERT_EQ(ibv_poll_cq(e.cq, 16, wc), 1);
	ASSERT_U64_EQ(wc[0].wr_id, 30);
	ASSERT_EQ(wc[0].qp_num, a->qp_num);
	ASSERT_EQ(ibv_destroy_qp(a), 0);
	ASSERT_EQ(ibv_destroy_qp(b), 0);
	ASSERT_EQ(ibv_destroy_cq(scq), 0);
}

static int get_event_nonblock(struct ibv_context *ctx,
			      struct ibv_async_event *ev)
{
	int flags = fcntl(ctx->async_fd, F_GETFL);

	ASSERT_EQ(fcntl(ctx->async_fd, F_SETFL, flags | O_NONBLOCK), 0);
	return ibv_get_async_event(ctx, ev);
}

TEST(error_with_srq_raises_last_wqe_reached)
{
	struct ibv_srq_init_attr sa = { .attr = { .max_wr = 8, .max_sge = 1 } };
	struct ibv_sge sg;
	struct ibv_recv_wr wr = { .wr_id = 5, .num_sge = 1 }, *bad;
	struct ibv_qp_init_attr a = {
		.cap = { .max_send_wr = 1, .max_send_sge = 1 },
		.qp_type = IBV_QPT_RC,
	};
	struct ibv_async_event ev;
	struct ibv_wc wc[4];
	struct ibv_srq *srq;
	struct ibv_qp *qp, *plain;
	struct env e;

	env_open(&e);
	srq = ibv_create_srq(e.pd, &sa);
	ASSERT_NOT_NULL(srq);
	sg = (struct ibv_sge){ (uintptr_t)e.buf, 16, e.mr->lkey };
	wr.sg_list = &sg;
	ASSERT_EQ(ibv_post_srq_recv(srq, &wr, &bad), 0);
	a.send_cq = e.cq;
	a.recv_cq = e.cq;
	a.srq = srq;
	qp = ibv_create_qp(e.pd, &a);
	ASSERT_NOT_NULL(qp);
	ASSERT_EQ(try_modify(qp, IBV_QPS_INIT, PKEY | PORT | ACC), 0);
	ASSERT_EQ(try_modify(qp, IBV_QPS_ERR, 0), 0);
	ASSERT_EQ(get_event_nonblock(e.ctx, &ev), 0);
	ASSERT_EQ(ev.event_type, IBV_EVENT_QP_LAST_WQE_REACHED);
	ASSERT(ev.element.qp == qp);
	ibv_ack_async_event(&ev);
	/* the SRQ's WQE is not the QP's: not flushed */
	ASSERT_EQ(ibv_poll_cq(e.cq, 4, wc), 0);

	/* a QP without an SRQ raises nothing */
	plain = qp_at(&e, RC, IBV_QPS_INIT);
	ASSERT_EQ(try_modify(plain, IBV_QPS_ERR, 0), 0);
	ASSERT_EQ(get_event_nonblock(e.ctx, &ev), -1);
	ASSERT_EQ(errno, EAGAIN);
	ASSERT_EQ(ibv_destroy_qp(plain), 0);
	ASSERT_EQ(ibv_destroy_qp(qp), 0);
	ASSERT_EQ(ibv_destroy_srq(srq), 0);
}

TEST(sqd_drained_event_when_asked)
{
	struct ibv_async_event ev;
	struct ibv_qp_init_attr init;
	struct ibv_qp_attr a, q;
	struct ibv_qp *qp;
	struct env e;

	env_open(&e);
	qp = qp_at(&e, RC, IBV_QPS_RTS);
	a = good_attr(e.ctx);
	a.qp_state = IBV_QPS_SQD;
	a.en_sqd_async_notify = 0;
	ASSERT_EQ(ibv_modify_qp(qp, &a, IBV_QP_STATE | SQDN), 0);
	ASSERT_EQ(get_event_nonblock(e.ctx, &ev), -1);
	ASSERT_EQ(errno, EAGAIN);
	a.qp_state = IBV_QPS_RTS;
	ASSERT_EQ(ibv_modify_qp(qp, &a, IBV_QP_STATE), 0);

	a.qp_state = IBV_QPS_SQD;
	a.en_sqd_async_notify = 1;
	ASSERT_EQ(ibv_modify_qp(qp, &a, IBV_QP_STATE | SQDN), 0);
	ASSERT_EQ(get_event_nonblock(e.ctx, &ev), 0);
	ASSERT_EQ(ev.event_type, IBV_EVENT_SQ_DRAINED);
	ASSERT(ev.element.qp == qp);
	ibv_ack_async_event(&ev);

	/* SQD -> SQD may change the path parameters of RC */
	a.qp_state = IBV_QPS_SQD;
	a.timeout = 3;
	a.retry_cnt = 2;
	ASSERT_EQ(ibv_modify_qp(qp, &a, IBV_QP_STATE | TMO | RTRY), 0);
	ASSERT_EQ(ibv_query_qp(qp, &q, 0, &init), 0);
	ASSERT_EQ(q.qp_state, IBV_QPS_SQD);
	ASSERT_EQ(q.timeout, 3);
	ASSERT_EQ(q.retry_cnt, 2);
	ASSERT_EQ(q.sq_draining, 0);
	ASSERT_EQ(ibv_destroy_qp(qp), 0);
}

/* ------------------------------------------------------------------ */
/* Concurrency                                                         */

#define POSTERS		4
#define POSTS_EACH	1000

struct poster {
	struct env *e;
	struct ibv_qp *qp;
	int send;
	int ok;
};

static void *poster_thread(void *p)
{
	struct poster *ps = p;
	struct ibv_sge sg = { (uintptr_t)ps->e->buf, 8, ps->e->mr->lkey };
	int i;

	for (i = 0; i < POSTS_EACH; i++) {
		int ret;

		if (ps->send) {
			struct ibv_send_wr wr = { .wr_id = (uint64_t)i,
						  .sg_list = &sg,
						  .num_sge = 1,
						  .opcode = IBV_WR_SEND },
					   *bad;

			ret = ibv_post_send(ps->qp, &wr, &bad);
		} else {
			struct ibv_recv_wr wr = { .wr_id = (uint64_t)i,
						  .sg_list = &sg,
						  .num_sge = 1 },
					   *bad;

			ret = ibv_post_recv(ps->qp, &wr, &bad);
		}
		ASSERT_EQ(ret, 0);
		ps->ok++;
	}
	return NULL;
}

/* Every WR posted, before or after the move to ERR, completes once. */
TEST(error_while_posting_loses_nothing)
{
	struct ibv_qp_init_attr a = {
		.cap = { .max_send_wr = 4096, .max_recv_wr = 4096,
			 .max_send_sge = 1, .max_recv_sge = 1 },
		.qp_type = IBV_QPT_RC,
	};
	struct poster ps[2 * POSTERS];
	pthread_t t[2 * POSTERS];
	struct ibv_wc wc[64];
	struct ibv_qp *qp;
	struct ibv_cq *cq;
	struct env e;
	int i, n, total = 0, got = 0;

	env_open(&e);
	cq = ibv_create_cq(e.ctx, 4 * 2 * POSTERS * POSTS_EACH, NULL, NULL, 0);
	ASSERT_NOT_NULL(cq);
	a.send_cq = cq;
	a.recv_cq = cq;
	qp = ibv_create_qp(e.pd, &a);
	ASSERT_NOT_NULL(qp);
	ASSERT_EQ(try_modify(qp, IBV_QPS_INIT, PKEY | PORT | ACC), 0);
	ASSERT_EQ(try_modify(qp, IBV_QPS_RTR,
			     find_step(IBV_QPS_INIT, IBV_QPS_RTR)->req[RC]), 0);
	ASSERT_EQ(try_modify(qp, IBV_QPS_RTS,
			     find_step(IBV_QPS_RTR, IBV_QPS_RTS)->req[RC]), 0);
	for (i = 0; i < 2 * POSTERS; i++) {
		ps[i] = (struct poster){ .e = &e, .qp = qp, .send = i & 1 };
		ASSERT_EQ(pthread_create(&t[i], NULL, poster_thread, &ps[i]),
			  0);
	}
	usleep(1000);
	ASSERT_EQ(try_modify(qp, IBV_QPS_ERR, 0), 0);
	for (i = 0; i < 2 * POSTERS; i++) {
		ASSERT_EQ(pthread_join(t[i], NULL), 0);
		total += ps[i].ok;
	}
	while ((n = ibv_poll_cq(cq, 64, wc)) > 0) {
		for (i = 0; i < n; i++)
			ASSERT_EQ(wc[i].status, IBV_WC_WR_FLUSH_ERR);
		got += n;
	}
	ASSERT_EQ(total, 2 * POSTERS * POSTS_EACH);
	ASSERT_EQ(got, total);
	ASSERT_EQ(ibv_destroy_qp(qp), 0);
}
