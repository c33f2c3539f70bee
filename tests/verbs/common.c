// SPDX-License-Identifier: MIT
#include <string.h>

#include "harness.h"
#include "common.h"

struct ibv_device *find_device(struct ibv_device **list, const char *name)
{
	for (; *list; list++)
		if (!strcmp(ibv_get_device_name(*list), name))
			return *list;
	return NULL;
}

struct ibv_context *open_lo(void)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_device *dev;
	struct ibv_context *ctx;

	ASSERT_NOT_NULL(list);
	dev = find_device(list, "softhca_lo");
	ASSERT_NOT_NULL(dev);
	ctx = ibv_open_device(dev);
	ASSERT_NOT_NULL(ctx);
	ibv_free_device_list(list);
	return ctx;
}

static int modify(struct ibv_qp *qp, enum ibv_qp_state s, int mask,
		  struct ibv_qp_attr *a)
{
	a->qp_state = s;
	return ibv_modify_qp(qp, a, mask | IBV_QP_STATE);
}

void connect_self(struct ibv_qp *qp, unsigned int access)
{
	struct ibv_qp_attr a;
	union ibv_gid gid;

	memset(&a, 0, sizeof(a));
	a.port_num = 1;
	a.qp_access_flags = access;
	ASSERT_EQ(modify(qp, IBV_QPS_INIT, IBV_QP_PKEY_INDEX | IBV_QP_PORT |
			 IBV_QP_ACCESS_FLAGS, &a), 0);
	ASSERT_EQ(ibv_query_gid(qp->context, 1, 0, &gid), 0);
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = gid;
	a.ah_attr.port_num = 1;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = qp->qp_num;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	ASSERT_EQ(modify(qp, IBV_QPS_RTR, IBV_QP_AV | IBV_QP_PATH_MTU |
			 IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
			 IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER,
			 &a), 0);
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 1;
	ASSERT_EQ(modify(qp, IBV_QPS_RTS, IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
			 IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
			 IBV_QP_MAX_QP_RD_ATOMIC, &a), 0);
}
