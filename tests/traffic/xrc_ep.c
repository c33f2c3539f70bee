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
