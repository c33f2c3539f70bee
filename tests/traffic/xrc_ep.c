// SPDX-License-Identifier: MIT
/* XRC setup shared by tests: xrc_ep.h. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "xrc_ep.h"

void xrc_temp_file(char *path, size_t len)
{
	int fd;

	snprintf(path, len, "/tmp/shca-xrcd-XXXXXX");
	fd = mkstemp(path);
	ASSERT_GE(fd, 0);
	close(fd);
}

struct ibv_xrcd *xrc_domain_file(struct ibv_context *ctx, const char *path)
{
	struct ibv_xrcd_init_attr a = {
		.comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS,
		.oflags = O_CREAT,
	};
	struct ibv_xrcd *x;
	int fd = open(path, O_RDONLY);

	ASSERT_GE(fd, 0);
	a.fd = fd;
	x = ibv_open_xrcd(ctx, &a);
	ASSERT_NOT_NULL(x);
	close(fd);
	return x;
}

struct ibv_xrcd *xrc_domain_private(struct ibv_context *ctx)
{
	struct ibv_xrcd_init_attr a = {
		.comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS,
		.fd = -1,
		.oflags = O_CREAT,
	};
	struct ibv_xrcd *x = ibv_open_xrcd(ctx, &a);

	ASSERT_NOT_NULL(x);
	return x;
}

struct ibv_qp *xrc_qp_init(struct ep *e, enum ibv_qp_type type,
			   struct ibv_xrcd *x)
{
	struct ibv_qp_init_attr_ex a = {
		.qp_type = type,
		.send_cq = e->scq,
		.recv_cq = e->rcq,
		.cap = { .max_send_wr = 16, .max_send_sge = 1 },
	};
	struct ibv_qp_attr m;
	struct ibv_qp *qp;

	if (type == IBV_QPT_XRC_RECV) {
		a.comp_mask = IBV_QP_INIT_ATTR_XRCD;
		a.xrcd = x;
	} else {
		a.comp_mask = IBV_QP_INIT_ATTR_PD;
		a.pd = e->pd;
	}
	qp = ibv_create_qp_ex(e->ctx, &a);
	ASSERT_NOT_NULL(qp);
	memset(&m, 0, sizeof(m));
	m.qp_state = IBV_QPS_INIT;
	m.port_num = 1;
	m.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
			    IBV_ACCESS_REMOTE_ATOMIC;
	ASSERT_EQ(ibv_modify_qp(qp, &m, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
				IBV_QP_PORT | IBV_QP_ACCESS_FLAGS), 0);
	return qp;
}

struct ibv_srq *xrc_srq(struct ep *e, struct ibv_xrcd *x, struct ibv_cq *cq,
			uint32_t max_wr)
{
	struct ibv_srq_init_attr_ex a = {
		.attr = { .max_wr = max_wr, .max_sge = 1 },
		.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD |
			     IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ,
		.srq_type = IBV_SRQT_XRC,
		.pd = e->pd,
		.xrcd = x,
		.cq = cq,
	};
	struct ibv_srq *s = ibv_create_srq_ex(e->ctx, &a);

	ASSERT_NOT_NULL(s);
	return s;
}

void xrc_srq_post(struct ep *e, struct ibv_srq *s, uint64_t wr_id,
		  uint64_t off, uint32_t len)
{
	struct ibv_sge sge = { (uintptr_t)(e->buf + off), len, e->mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = wr_id, .sg_list = &sge,
				  .num_sge = 1 }, *bad;

	ASSERT_EQ(ibv_post_srq_recv(s, &wr, &bad), 0);
}

void xrc_connect(struct ep *e, struct ibv_qp *qp, uint32_t dest,
		 const union ibv_gid *dgid, const struct xrc_retry *r)
{
	static const struct xrc_retry dflt = { 14, 7, 7 };
	struct ibv_qp_attr a;
	int mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
		   IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;

	if (!r)
		r = &dflt;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = e->mtu < IBV_MTU_1024 ? e->mtu : IBV_MTU_1024;
	a.dest_qp_num = dest;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = *dgid;
	a.ah_attr.grh.sgid_index = (uint8_t)e->gid_index;
	a.ah_attr.grh.hop_limit = 1;
	a.ah_attr.port_num = 1;
	if (qp->qp_type == IBV_QPT_XRC_RECV) {
		a.max_dest_rd_atomic = 4;
		a.min_rnr_timer = 1;
		mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
	}
	ASSERT_EQ(ibv_modify_qp(qp, &a, mask), 0);
	if (qp->qp_type == IBV_QPT_XRC_RECV)
		return;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = r->timeout;
	a.retry_cnt = r->retry_cnt;
	a.rnr_retry = r->rnr_retry;
	a.max_rd_atomic = 4;
	ASSERT_EQ(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT |
				IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
				IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC), 0);
}

struct ibv_qp *xrc_open(struct ibv_context *ctx, struct ibv_xrcd *x,
			uint32_t qpn, enum ibv_qp_type type)
{
	struct ibv_qp_open_attr a = {
		.comp_mask = IBV_QP_OPEN_ATTR_NUM | IBV_QP_OPEN_ATTR_XRCD |
			     IBV_QP_OPEN_ATTR_TYPE,
		.qp_num = qpn,
		.xrcd = x,
		.qp_type = type,
	};

	return ibv_open_qp(ctx, &a);
}
