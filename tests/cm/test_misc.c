// SPDX-License-Identifier: MIT
/*
 * The rest of the API: rdma_create_qp/_ex and SRQs on ids, options,
 * rdma_init_qp_attr's answers, ECE on a device without it.  (The rsocket
 * API: test_rsocket.c.)
 */
#include <arpa/inet.h>

#include "cm_common.h"

/* An id with a device: resolved to 127.0.0.1 (softhca_lo).  Binding a
 * loopback address attaches no device, as in the kernel's rdma_cm. */
static struct rdma_cm_id *device_id(enum rdma_port_space ps)
{
	struct rdma_cm_id *id;
	struct sockaddr_in sin;

	make_addr(&sin, loopback_ip(), 7);
	ASSERT_EQ(rdma_create_id(NULL, &id, NULL, ps), 0);
	ASSERT_EQ(rdma_resolve_addr(id, NULL, (struct sockaddr *)&sin, 2000),
		  0);
	ASSERT_NOT_NULL(id->verbs);
	return id;
}

TEST(create_qp)
{
	struct rdma_cm_id *id = device_id(RDMA_PS_TCP), *unbound;
	struct ibv_qp_init_attr attr = {
		.cap = { .max_send_wr = 4, .max_recv_wr = 4,
			 .max_send_sge = 1, .max_recv_sge = 1 },
		.qp_type = IBV_QPT_RC,
	};
	struct ibv_qp_attr qa;
	struct ibv_qp_init_attr qi;
	struct sockaddr_in sin;

	make_qp(id, IBV_QPT_RC);
	ASSERT(id->qp->pd == id->pd);		/* the default PD */
	ASSERT(id->recv_cq->cq_context == id);
	ASSERT(id->send_cq_channel != NULL && id->recv_cq_channel != NULL);
	ASSERT(id->send_cq->channel == id->send_cq_channel);
	ASSERT_EQ(ibv_query_qp(id->qp, &qa, IBV_QP_STATE | IBV_QP_ACCESS_FLAGS |
			       IBV_QP_PORT, &qi), 0);
	ASSERT_EQ(qa.qp_state, IBV_QPS_INIT);
	ASSERT_EQ(qa.port_num, 1);
	errno = 0;
	ASSERT_EQ(rdma_create_qp(id, NULL, &attr), -1);	/* one per id */
	ASSERT_EQ(errno, EINVAL);
	rdma_destroy_qp(id);
	ASSERT_NULL(id->qp);
	ASSERT_NULL(id->send_cq);
	ASSERT_NULL(id->recv_cq_channel);
	ASSERT_EQ(rdma_destroy_id(id), 0);

	/* UD: straight to RTS with the CM's Q_Key */
	id = device_id(RDMA_PS_UDP);
	make_qp(id, IBV_QPT_UD);
	ASSERT_EQ(ibv_query_qp(id->qp, &qa, IBV_QP_STATE | IBV_QP_QKEY, &qi),
		  0);
	ASSERT_EQ(qa.qp_state, IBV_QPS_RTS);
	ASSERT_EQ(qa.qkey, RDMA_UDP_QKEY);
	rdma_destroy_qp(id);
	ASSERT_EQ(rdma_destroy_id(id), 0);

	ASSERT_EQ(rdma_create_id(NULL, &unbound, NULL, RDMA_PS_TCP), 0);
	ASSERT_EQ(rdma_create_qp(unbound, NULL, &attr), -1);
	ASSERT_EQ(errno, EINVAL);
	/* bound to 127.0.0.1: still no device, so no QP */
	make_addr(&sin, loopback_ip(), 0);
	ASSERT_EQ(rdma_bind_addr(unbound, (struct sockaddr *)&sin), 0);
	errno = 0;
	ASSERT_EQ(rdma_create_qp(unbound, NULL, &attr), -1);
	ASSERT_EQ(errno, EINVAL);
	ASSERT_EQ(rdma_destroy_id(unbound), 0);
}

TEST(srq)
{
	struct rdma_cm_id *id = device_id(RDMA_PS_TCP);
	struct ibv_srq_init_attr sattr = {
		.attr = { .max_wr = 4, .max_sge = 1 },
	};
	struct ibv_srq_init_attr_ex xattr = { 0 };

	errno = 0;
	ASSERT_EQ(rdma_create_srq_ex(id, &xattr), -1);	/* no type */
	ASSERT_EQ(errno, EINVAL);
	ASSERT_EQ(rdma_create_srq(id, NULL, &sattr), 0);
	ASSERT_NOT_NULL(id->srq);
	make_qp(id, IBV_QPT_RC);
	ASSERT(id->qp->srq == id->srq);
	rdma_destroy_qp(id);
	rdma_destroy_srq(id);
	ASSERT_NULL(id->srq);
	ASSERT_EQ(rdma_destroy_id(id), 0);
}

TEST(options)
{
	struct rdma_cm_id *id, *ud = device_id(RDMA_PS_UDP);
	struct ibv_path_data path[2];
	struct ibv_qp_attr qa;
	uint8_t tos = 32, timeout = 14;
	int v = 1, mask;

	ASSERT_EQ(rdma_create_id(NULL, &id, NULL, RDMA_PS_TCP), 0);
	ASSERT_EQ(rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_TOS,
				  &tos, sizeof(tos)), 0);
	errno = 0;
	ASSERT_EQ(rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_TOS,
				  &v, sizeof(v)), -1);
	ASSERT_EQ(errno, EINVAL);
	ASSERT_EQ(rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_AFONLY,
				  &v, sizeof(v)), 0);
	ASSERT_EQ(rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_REUSEADDR,
				  &v, sizeof(v)), 0);
	ASSERT_EQ(rdma_set_option(id, RDMA_OPTION_ID,
				  RDMA_OPTION_ID_ACK_TIMEOUT, &timeout,
				  sizeof(timeout)), 0);
	ASSERT_EQ(rdma_set_option(id, RDMA_OPTION_ID, 42, &v, sizeof(v)), -1);
	ASSERT_EQ(errno, ENOSYS);
	ASSERT_EQ(rdma_set_option(id, 7, 0, &v, sizeof(v)), -1);
	ASSERT_EQ(errno, ENOSYS);
	ASSERT_EQ(rdma_set_option(id, RDMA_OPTION_IB, 9, &v, sizeof(v)), -1);
	ASSERT_EQ(errno, ENOSYS);
	ASSERT_EQ(rdma_set_option(id, RDMA_OPTION_IB, RDMA_OPTION_IB_PATH,
				  path, 3), -1);
	ASSERT_EQ(errno, EINVAL);
	/* the TOS is the path's traffic class */
	resolve_to(NULL, id, loopback_ip(), 7);
	ASSERT_EQ(id->route.path_rec->traffic_class, 32);
	/* reuse can be set at any time, cleared only before binding */
	v = 0;
	ASSERT_EQ(rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_REUSEADDR,
				  &v, sizeof(v)), -1);
	ASSERT_EQ(errno, EINVAL);
	ASSERT_EQ(rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_AFONLY,
				  &v, sizeof(v)), -1);
	ASSERT_EQ(errno, EINVAL);
	/* a path of the caller's on a resolved route: already resolved */
	memset(path, 0, sizeof(path));
	path[0].flags = IBV_PATH_FLAG_GMP | IBV_PATH_FLAG_PRIMARY |
			IBV_PATH_FLAG_BIDIRECTIONAL;
	ASSERT_EQ(rdma_set_option(id, RDMA_OPTION_IB, RDMA_OPTION_IB_PATH,
				  path, sizeof(path)), -1);
	ASSERT_EQ(errno, EINVAL);
	qa.qp_state = IBV_QPS_INIT;
	ASSERT_EQ(rdma_init_qp_attr(id, &qa, &mask), 0);
	ASSERT_EQ(mask & IBV_QP_TIMEOUT, 0);
	ASSERT_EQ(rdma_destroy_id(id), 0);

	/* the ACK timeout is for RC ids */
	ASSERT_EQ(rdma_set_option(ud, RDMA_OPTION_ID,
				  RDMA_OPTION_ID_ACK_TIMEOUT, &timeout,
				  sizeof(timeout)), -1);
	ASSERT_EQ(errno, EINVAL);
	ASSERT_EQ(rdma_destroy_id(ud), 0);
}

TEST(set_ib_path)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct ibv_path_data path;
	struct sockaddr_in dst;
	struct rdma_cm_id *id;

	make_addr(&dst, loopback_ip(), 7);
	ASSERT_EQ(rdma_create_id(ch, &id, NULL, RDMA_PS_TCP), 0);
	ASSERT_EQ(rdma_resolve_addr(id, NULL, (struct sockaddr *)&dst,
				    2000), 0);
	expect_event_ack(ch, RDMA_CM_EVENT_ADDR_RESOLVED);
	memset(&path, 0, sizeof(path));
	path.flags = IBV_PATH_FLAG_PRIMARY;	/* not a GMP path */
	ASSERT_EQ(rdma_set_option(id, RDMA_OPTION_IB, RDMA_OPTION_IB_PATH,
				  &path, sizeof(path)), -1);
	ASSERT_EQ(errno, EINVAL);
	path.flags = IBV_PATH_FLAG_GMP | IBV_PATH_FLAG_PRIMARY |
		     IBV_PATH_FLAG_BIDIRECTIONAL;
	path.path.dgid = id->route.addr.addr.ibaddr.dgid;
	path.path.sgid = id->route.addr.addr.ibaddr.sgid;
	path.path.pkey = htons(0xffff);
	path.path.mtu = 0x80 | IBV_MTU_1024;
	path.path.packetlifetime = 0x80 | 14;
	path.path.flowlabel_hoplimit = htonl(64);
	ASSERT_EQ(rdma_set_option(id, RDMA_OPTION_IB, RDMA_OPTION_IB_PATH,
				  &path, sizeof(path)), 0);
	/* the kernel reports a path it is given as resolved */
	expect_event_ack(ch, RDMA_CM_EVENT_ROUTE_RESOLVED);
	ASSERT_EQ(id->route.num_paths, 1);
	ASSERT_EQ(id->route.path_rec->mtu, IBV_MTU_1024);
	ASSERT_EQ(id->route.path_rec->packet_life_time, 14);
	ASSERT_EQ(id->route.path_rec->hop_limit, 64);
	ASSERT_EQ(rdma_destroy_id(id), 0);
	rdma_destroy_event_channel(ch);
}

TEST(init_qp_attr_ud)
{
	struct rdma_cm_id *id = device_id(RDMA_PS_UDP), *unbound;
	struct ibv_qp_attr qa;
	int mask;

	/* UD: the INIT attributes, whatever the state asked */
	qa.qp_state = IBV_QPS_RTS;
	ASSERT_EQ(rdma_init_qp_attr(id, &qa, &mask), 0);
	ASSERT_EQ(qa.qp_state, IBV_QPS_RTS);
	ASSERT_EQ(mask, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
			IBV_QP_QKEY);
	ASSERT_EQ(qa.qkey, RDMA_UDP_QKEY);
	ASSERT_EQ(qa.pkey_index, 0);
	ASSERT_EQ(qa.port_num, 1);
	ASSERT_EQ(rdma_destroy_id(id), 0);

	ASSERT_EQ(rdma_create_id(NULL, &unbound, NULL, RDMA_PS_TCP), 0);
	errno = 0;
	ASSERT_EQ(rdma_init_qp_attr(unbound, &qa, &mask), -1); /* no device */
	ASSERT_EQ(errno, EINVAL);
	ASSERT_EQ(rdma_destroy_id(unbound), 0);
}

TEST(ece_without_device_support)
{
	struct rdma_cm_id *id = device_id(RDMA_PS_TCP);
	struct ibv_ece ece = { .vendor_id = 0x15b3, .options = 1 };

	errno = 0;
	ASSERT_EQ(rdma_set_local_ece(id, NULL), -1);
	ASSERT_EQ(errno, EINVAL);
	ece.vendor_id = 0;
	ASSERT_EQ(rdma_set_local_ece(id, &ece), -1);
	ASSERT_EQ(errno, EINVAL);
	ece.vendor_id = 0x15b3;
	ece.comp_mask = 1;
	ASSERT_EQ(rdma_set_local_ece(id, &ece), -1);
	ASSERT_EQ(errno, EINVAL);
	ece.comp_mask = 0;
	ASSERT_EQ(rdma_set_local_ece(id, &ece), 0);
	memset(&ece, 0xff, sizeof(ece));
	ASSERT_EQ(rdma_get_remote_ece(id, &ece), 0);
	ASSERT_EQ(ece.vendor_id, 0);
	ASSERT_EQ(ece.options, 0);
	ASSERT_EQ(ece.comp_mask, 0);
	/* with a QP: what ibv_query_ece says, and it says EOPNOTSUPP */
	make_qp(id, IBV_QPT_RC);
	ASSERT_EQ(rdma_get_remote_ece(id, &ece), -1);
	ASSERT_EQ(errno, EINVAL);
	ASSERT_EQ(rdma_set_local_ece(id, &ece), -1);
	ASSERT_EQ(errno, EINVAL);
	rdma_destroy_qp(id);
	ASSERT_EQ(rdma_destroy_id(id), 0);
}
