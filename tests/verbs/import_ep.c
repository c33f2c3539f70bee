// SPDX-License-Identifier: MIT
/* Endpoints of the import tests: see import_ep.h. */
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "import_ep.h"

void import_ep_make(struct ep *e, enum ibv_qp_type type,
		    struct ibv_context *ctx, struct ibv_pd *pd,
		    struct ibv_mr *mr, uint8_t *buf, size_t size)
{
	import_ep_make_srq(e, type, ctx, pd, NULL, mr, buf, size, 0);
}

void import_ep_make_srq(struct ep *e, enum ibv_qp_type type,
			struct ibv_context *ctx, struct ibv_pd *pd,
			struct ibv_srq *srq, struct ibv_mr *mr, uint8_t *buf,
			size_t size, uint64_t wc_flags)
{
	const int remote = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
			   IBV_ACCESS_REMOTE_ATOMIC;
	struct ibv_qp_init_attr qa;
	struct ibv_qp_attr a;

	memset(e, 0, sizeof(*e));
	e->type = type;
	e->ctx = ctx;
	e->pd = pd;
	e->mr = mr;
	e->buf = buf;
	e->size = size;
	e->srq = srq;
	e->gid_index = 0;
	e->mtu = IBV_MTU_4096;
	e->scq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	ASSERT_NOT_NULL(e->scq);
	if (wc_flags) {
		struct ibv_cq_init_attr_ex ca;

		memset(&ca, 0, sizeof(ca));
		ca.cqe = 16;
		ca.wc_flags = wc_flags;
		e->rcqx = ibv_create_cq_ex(ctx, &ca);
		ASSERT_NOT_NULL(e->rcqx);
		e->rcq = ibv_cq_ex_to_cq(e->rcqx);
	} else {
		e->rcq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
		ASSERT_NOT_NULL(e->rcq);
	}
	memset(&qa, 0, sizeof(qa));
	qa.send_cq = e->scq;
	qa.recv_cq = e->rcq;
	qa.qp_type = type;
	qa.srq = srq;
	qa.cap.max_send_wr = qa.cap.max_recv_wr = 16;
	qa.cap.max_send_sge = qa.cap.max_recv_sge = 2;
	e->qp = ibv_create_qp(pd, &qa);
	ASSERT_NOT_NULL(e->qp);
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qp_access_flags = type == IBV_QPT_UC ? IBV_ACCESS_REMOTE_WRITE :
			    remote;
	ASSERT_EQ(ibv_modify_qp(e->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
				IBV_QP_PORT | IBV_QP_ACCESS_FLAGS), 0);
	ASSERT_EQ(ibv_query_gid(ctx, 1, 0, &e->self.gid), 0);
	e->self.qpn = e->qp->qp_num;
	e->self.psn = (uint32_t)rand() & 0xffffff;
	e->self.rkey = mr ? mr->rkey : 0;
	e->self.addr = (uintptr_t)buf;
}

void import_ep_unmake(struct ep *e)
{
	ASSERT_EQ(ibv_destroy_qp(e->qp), 0);
	ASSERT_EQ(ibv_destroy_cq(e->scq), 0);
	ASSERT_EQ(ibv_destroy_cq(e->rcq), 0);
}

void import_ep_pair(struct ep *a, struct ep *b)
{
	struct ep_opts o;

	ep_default_opts(&o, a->type);
	a->peer = b->self;
	b->peer = a->self;
	ep_connect(a, &o);
	ep_connect(b, &o);
}
