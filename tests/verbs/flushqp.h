/* SPDX-License-Identifier: MIT */
/*
 * A completion source that needs no peer: an RC QP taken to INIT, given
 * receive WRs, then moved to the error state, which completes each WR with
 * IBV_WC_WR_FLUSH_ERR (IBA C10-98; rxe and mlx5 do so).  Tests that need
 * completions or completion events use it.  Every step must succeed: QPs
 * are a feature README claims, so an EOPNOTSUPP here is a failure.
 */
#ifndef SOFTHCA_TEST_FLUSHQP_H
#define SOFTHCA_TEST_FLUSHQP_H

#include <poll.h>
#include <infiniband/verbs.h>

#include "harness.h"

struct flush_qp {
	struct ibv_pd *pd;
	struct ibv_mr *mr;
	struct ibv_qp *qp;
	char buf[256];
};

/* Create the QP on cq (send and receive) and take it to INIT. */
static inline void flush_qp_create(struct ibv_context *ctx, struct ibv_cq *cq,
				   struct flush_qp *f, uint32_t max_recv)
{
	struct ibv_qp_init_attr init = {
	    .send_cq = cq,
	    .recv_cq = cq,
	    .cap =
		{
		    .max_send_wr = 1,
		    .max_recv_wr = max_recv,
		    .max_send_sge = 1,
		    .max_recv_sge = 1,
		},
	    .qp_type = IBV_QPT_RC,
	};
	struct ibv_qp_attr attr = {
	    .qp_state = IBV_QPS_INIT,
	    .pkey_index = 0,
	    .port_num = 1,
	    .qp_access_flags = 0,
	};
	int ret;

	f->pd = ibv_alloc_pd(ctx);
	ASSERT_NOT_NULL(f->pd);
	f->mr =
	    ibv_reg_mr(f->pd, f->buf, sizeof(f->buf), IBV_ACCESS_LOCAL_WRITE);
	ASSERT_NOT_NULL(f->mr);
	f->qp = ibv_create_qp(f->pd, &init);
	ASSERT_NOT_NULL(f->qp);
	ret = ibv_modify_qp(f->qp, &attr,
			    IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				IBV_QP_ACCESS_FLAGS);
	ASSERT_EQ(ret, 0);
}

static inline void flush_qp_post_recv(struct flush_qp *f, uint64_t wr_id)
{
	struct ibv_sge sge = {
	    .addr = (uintptr_t)f->buf,
	    .length = sizeof(f->buf),
	    .lkey = f->mr->lkey,
	};
	struct ibv_recv_wr wr =
			       {
				   .wr_id = wr_id,
				   .sg_list = &sge,
				   .num_sge = 1,
			       },
			   *bad = NULL;

	ASSERT_EQ(ibv_post_recv(f->qp, &wr, &bad), 0);
}

/* Move the QP to the error state: every posted WR completes, flushed. */
static inline void flush_qp_flush(struct flush_qp *f)
{
	struct ibv_qp_attr attr = {.qp_state = IBV_QPS_ERR};

	ASSERT_EQ(ibv_modify_qp(f->qp, &attr, IBV_QP_STATE), 0);
}

static inline void flush_qp_destroy(struct flush_qp *f)
{
	ASSERT_EQ(ibv_destroy_qp(f->qp), 0);
	ASSERT_EQ(ibv_dereg_mr(f->mr), 0);
	ASSERT_EQ(ibv_dealloc_pd(f->pd), 0);
}

/* Poll the CQ until n completions came, for at most ms milliseconds. */
static inline int poll_n(struct ibv_cq *cq, struct ibv_wc *wc, int n, int ms)
{
	int got = 0;

	while (got < n && ms-- > 0) {
		int r = ibv_poll_cq(cq, n - got, wc + got);

		ASSERT_GE(r, 0);
		got += r;
		if (got < n)
			poll(NULL, 0, 1);
	}
	return got;
}

/* 1 if fd became readable within ms milliseconds, 0 if not. */
static inline int fd_readable(int fd, int ms)
{
	struct pollfd pfd = {.fd = fd, .events = POLLIN};
	int r = poll(&pfd, 1, ms);

	ASSERT_GE(r, 0);
	return r > 0 && (pfd.revents & POLLIN);
}

#endif
