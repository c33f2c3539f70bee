// SPDX-License-Identifier: MIT
/*
 * UD ids: SIDR-style resolution of the remote QPN and Q_Key between two
 * processes (ESTABLISHED, UNREACHABLE for no listener and for a reject,
 * private data sizes), and multicast joins.
 */
#include <arpa/inet.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cm_common.h"

#define GRH 40

static void ud_server(struct peer *p, void *arg)
{
	/* 0 accept, 1 reject, 2 accept with too much private data */
	int mode = (int)(intptr_t)arg;
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_conn_param param = { 0 };
	struct rdma_cm_id *lid, *id;
	struct rdma_cm_event *ev;
	uint8_t pdata[140], buf[GRH + 16];
	struct ibv_mr *mr;
	int i;

	peer_send(p, listen_on(ch, &lid, loopback_ip(), RDMA_PS_UDP));
	ev = expect_event(ch, RDMA_CM_EVENT_CONNECT_REQUEST);
	id = ev->id;
	ASSERT(ev->listen_id == lid);
	ASSERT_EQ(id->qp_type, IBV_QPT_UD);
	ASSERT_EQ(id->ps, RDMA_PS_UDP);
	/* a SIDR REQ's private data: 216 - 36 bytes */
	ASSERT_EQ(ev->param.ud.private_data_len, 180);
	for (i = 0; i < 180; i++)
		ASSERT_EQ(((const uint8_t *)ev->param.ud.private_data)[i],
			  (uint8_t)i);
	ASSERT_EQ(rdma_ack_cm_event(ev), 0);
	for (i = 0; i < (int)sizeof(pdata); i++)
		pdata[i] = (uint8_t)(i + 1);
	if (mode == 2) {
		/* the kernel's __rdma_accept: the QP to error, then reject */
		make_qp(id, IBV_QPT_UD);
		param.private_data = pdata;
		param.private_data_len = 137;
		errno = 0;
		ASSERT_EQ(rdma_accept(id, &param), -1);
		ASSERT_EQ(errno, EINVAL);
		ASSERT_EQ(rdma_accept(id, NULL), -1);	/* it is over */
		ASSERT_EQ(errno, EINVAL);
	} else if (mode == 1) {
		errno = 0;
		ASSERT_EQ(rdma_reject(id, pdata, 137), -1);
		ASSERT_EQ(errno, EINVAL);
		ASSERT_EQ(rdma_reject(id, pdata, 136), 0);
	}
	if (mode) {
		ASSERT_EQ(peer_recv(p), 1);
		if (id->qp)
			rdma_destroy_qp(id);
		ASSERT_EQ(rdma_destroy_id(id), 0);
		ASSERT_EQ(rdma_destroy_id(lid), 0);
		rdma_destroy_event_channel(ch);
		return;
	}
	make_qp(id, IBV_QPT_UD);
	post_recv_buf(id, buf, sizeof(buf), &mr);
	param.private_data = pdata;
	param.private_data_len = 136;
	ASSERT_EQ(rdma_accept(id, &param), 0);
	peer_send(p, id->qp->qp_num);
	recv_done(id, mr);
	ASSERT_STR_EQ((char *)buf + GRH, "datagram");
	rdma_destroy_qp(id);
	ASSERT_EQ(rdma_destroy_id(id), 0);
	ASSERT_EQ(rdma_destroy_id(lid), 0);
	rdma_destroy_event_channel(ch);
}

static struct rdma_cm_event *ud_connect(struct peer *p, int mode,
					struct rdma_event_channel **ch,
					struct rdma_cm_id **id,
					enum rdma_cm_event_type expect)
{
	struct rdma_conn_param param = { 0 };
	uint8_t pdata[181];
	uint16_t port;
	int i;

	peer_start(p, ud_server, (void *)(intptr_t)mode);
	port = (uint16_t)peer_recv(p);
	*ch = rdma_create_event_channel();
	ASSERT_EQ(rdma_create_id(*ch, id, NULL, RDMA_PS_UDP), 0);
	resolve_to(*ch, *id, loopback_ip(), port);
	make_qp(*id, IBV_QPT_UD);
	for (i = 0; i < (int)sizeof(pdata); i++)
		pdata[i] = (uint8_t)i;
	param.private_data = pdata;
	param.private_data_len = 181;
	errno = 0;
	ASSERT_EQ(rdma_connect(*id, &param), -1);
	ASSERT_EQ(errno, EINVAL);
	param.private_data_len = 180;
	ASSERT_EQ(rdma_connect(*id, &param), 0);
	return expect_event(*ch, expect);
}

TEST(ud_resolution)
{
	struct rdma_event_channel *ch;
	struct rdma_cm_event *ev;
	struct rdma_cm_id *id;
	struct ibv_mr *mr;
	struct ibv_ah *ah;
	struct ibv_wc wc;
	char msg[16] = "datagram";
	uint32_t qpn, qkey;
	struct peer p;
	int i;

	ev = ud_connect(&p, 0, &ch, &id, RDMA_CM_EVENT_ESTABLISHED);
	ASSERT_EQ(ev->status, 0);
	ASSERT_EQ(ev->param.ud.qkey, RDMA_UDP_QKEY);
	ASSERT_EQ(ev->param.ud.private_data_len, 136);
	for (i = 0; i < 136; i++)
		ASSERT_EQ(((const uint8_t *)ev->param.ud.private_data)[i],
			  (uint8_t)(i + 1));
	ASSERT_EQ(ev->param.ud.ah_attr.is_global, 1);
	ASSERT_EQ(ev->param.ud.ah_attr.port_num, 1);
	ASSERT_EQ(ev->param.ud.ah_attr.grh.dgid.raw[10], 0xff);
	ASSERT_EQ(ev->param.ud.ah_attr.grh.dgid.raw[12], 127);
	qpn = ev->param.ud.qp_num;
	qkey = ev->param.ud.qkey;
	ASSERT_EQ(qpn, peer_recv(&p));
	ah = ibv_create_ah(id->pd, &ev->param.ud.ah_attr);
	ASSERT_NOT_NULL(ah);
	ASSERT_EQ(rdma_ack_cm_event(ev), 0);

	mr = rdma_reg_msgs(id, msg, sizeof(msg));
	ASSERT_NOT_NULL(mr);
	ASSERT_EQ(rdma_post_ud_send(id, NULL, msg, sizeof(msg), mr,
				    IBV_SEND_SIGNALED, ah, qpn), 0);
	(void)qkey;
	ASSERT_EQ(rdma_get_send_comp(id, &wc), 1);
	ASSERT_EQ(wc.status, IBV_WC_SUCCESS);
	peer_wait(&p);
	ASSERT_EQ(rdma_dereg_mr(mr), 0);
	ASSERT_EQ(ibv_destroy_ah(ah), 0);
	rdma_destroy_qp(id);
	ASSERT_EQ(rdma_destroy_id(id), 0);
	rdma_destroy_event_channel(ch);
}

TEST(ud_reject)
{
	struct rdma_event_channel *ch;
	struct rdma_cm_event *ev;
	struct rdma_cm_id *id;
	struct peer p;

	ev = ud_connect(&p, 1, &ch, &id, RDMA_CM_EVENT_UNREACHABLE);
	ASSERT_EQ(ev->status, 2);	/* IB_SIDR_REJECT */
	ASSERT_EQ(ev->param.ud.private_data_len, 136);
	ASSERT_EQ(((const uint8_t *)ev->param.ud.private_data)[0], 1);
	ASSERT_EQ(rdma_ack_cm_event(ev), 0);
	peer_send(&p, 1);
	peer_wait(&p);
	rdma_destroy_qp(id);
	ASSERT_EQ(rdma_destroy_id(id), 0);
	rdma_destroy_event_channel(ch);
}

TEST(ud_accept_over_limit)
{
	struct rdma_event_channel *ch;
	struct rdma_cm_event *ev;
	struct rdma_cm_id *id;
	struct peer p;

	ev = ud_connect(&p, 2, &ch, &id, RDMA_CM_EVENT_UNREACHABLE);
	ASSERT_EQ(ev->status, 2);
	ASSERT_EQ(rdma_ack_cm_event(ev), 0);
	peer_send(&p, 1);
	peer_wait(&p);
	rdma_destroy_qp(id);
	ASSERT_EQ(rdma_destroy_id(id), 0);
	rdma_destroy_event_channel(ch);
}

TEST(ud_no_listener)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_event *ev;
	struct rdma_cm_id *id;
	struct sockaddr_in sin;
	socklen_t len = sizeof(sin);
	int fd = socket(AF_INET, SOCK_DGRAM, 0);

	make_addr(&sin, loopback_ip(), 0);
	ASSERT_EQ(bind(fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
	ASSERT_EQ(getsockname(fd, (struct sockaddr *)&sin, &len), 0);
	close(fd);
	ASSERT_EQ(rdma_create_id(ch, &id, NULL, RDMA_PS_UDP), 0);
	resolve_to(ch, id, loopback_ip(), ntohs(sin.sin_port));
	ASSERT_EQ(rdma_connect(id, NULL), 0);
	/* the IB CM's answer: SIDR REP "service ID not supported" */
	ev = expect_event(ch, RDMA_CM_EVENT_UNREACHABLE);
	ASSERT_EQ(ev->status, 1);
	ASSERT_EQ(rdma_ack_cm_event(ev), 0);
	ASSERT_EQ(rdma_destroy_id(id), 0);
	rdma_destroy_event_channel(ch);
}

/* ------------------------------------------------------------------ */
/* Multicast                                                           */

TEST(multicast_join_leave)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_join_mc_attr_ex mc = { 0 };
	struct rdma_cm_id *id, *rc;
	struct rdma_cm_event *ev;
	struct sockaddr_in src, group, other;
	union ibv_gid gid = { 0 };
	int ctx;

	make_addr(&src, loopback_ip(), 0);
	make_addr(&group, "239.1.2.3", 0);
	make_addr(&other, "239.1.2.4", 0);
	ASSERT_EQ(rdma_create_id(ch, &id, NULL, RDMA_PS_UDP), 0);
	errno = 0;
	ASSERT_EQ(rdma_join_multicast(id, (struct sockaddr *)&group, &ctx), -1);
	ASSERT_EQ(errno, EINVAL);	/* not bound yet */
	ASSERT_EQ(rdma_bind_addr(id, (struct sockaddr *)&src), 0);
	/* bound to a loopback address: no device yet (the kernel's
	 * rdma_join_multicast wants one); resolving the group picks it */
	ASSERT_NULL(id->verbs);
	ASSERT_EQ(rdma_join_multicast(id, (struct sockaddr *)&group, &ctx), -1);
	ASSERT_EQ(errno, EINVAL);
	ASSERT_EQ(rdma_resolve_addr(id, NULL, (struct sockaddr *)&group, 2000),
		  0);
	expect_event_ack(ch, RDMA_CM_EVENT_ADDR_RESOLVED);
	ASSERT_NOT_NULL(id->verbs);
	make_qp(id, IBV_QPT_UD);
	ASSERT_EQ(rdma_join_multicast(id, (struct sockaddr *)&group, &ctx), 0);
	ev = expect_event(ch, RDMA_CM_EVENT_MULTICAST_JOIN);
	ASSERT_EQ(ev->status, 0);
	ASSERT(ev->param.ud.private_data == (void *)&ctx);
	ASSERT_EQ(ev->param.ud.qp_num, 0xffffff);
	ASSERT_EQ(ev->param.ud.qkey, RDMA_UDP_QKEY);
	gid.raw[10] = gid.raw[11] = 0xff;
	memcpy(&gid.raw[12], &group.sin_addr, 4);
	ASSERT(!memcmp(&ev->param.ud.ah_attr.grh.dgid, &gid, sizeof(gid)));
	ASSERT_EQ(ev->param.ud.ah_attr.is_global, 1);
	ASSERT_EQ(rdma_ack_cm_event(ev), 0);

	/* rdma_join_multicast_ex: the flags and masks rdma-core checks */
	mc.comp_mask = RDMA_CM_JOIN_MC_ATTR_RESERVED;
	mc.addr = (struct sockaddr *)&other;
	ASSERT_EQ(rdma_join_multicast_ex(id, &mc, NULL), -1);
	ASSERT_EQ(errno, ENOTSUP);
	mc.comp_mask = RDMA_CM_JOIN_MC_ATTR_ADDRESS;
	ASSERT_EQ(rdma_join_multicast_ex(id, &mc, NULL), -1);
	ASSERT_EQ(errno, EINVAL);
	mc.comp_mask |= RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS;
	mc.join_flags = RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER;
	ASSERT_EQ(rdma_join_multicast_ex(id, &mc, NULL), 0);
	expect_event_ack(ch, RDMA_CM_EVENT_MULTICAST_JOIN);

	ASSERT_EQ(rdma_leave_multicast(id, (struct sockaddr *)&group), 0);
	ASSERT_EQ(rdma_leave_multicast(id, (struct sockaddr *)&group), -1);
	ASSERT_EQ(errno, EADDRNOTAVAIL);
	ASSERT_EQ(rdma_leave_multicast(id, (struct sockaddr *)&other), 0);
	rdma_destroy_qp(id);
	ASSERT_EQ(rdma_destroy_id(id), 0);

	/* multicast is for UD ids */
	ASSERT_EQ(rdma_create_id(ch, &rc, NULL, RDMA_PS_TCP), 0);
	ASSERT_EQ(rdma_resolve_addr(rc, (struct sockaddr *)&src,
				    (struct sockaddr *)&group, 2000), 0);
	expect_event_ack(ch, RDMA_CM_EVENT_ADDR_RESOLVED);
	ASSERT_NOT_NULL(rc->verbs);
	ASSERT_EQ(rdma_join_multicast(rc, (struct sockaddr *)&group, NULL), -1);
	ASSERT_EQ(errno, EINVAL);
	ASSERT_EQ(rdma_destroy_id(rc), 0);
	rdma_destroy_event_channel(ch);
}

static void mc_receiver(struct peer *p, void *arg)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct sockaddr_in src, group;
	struct rdma_cm_id *id;
	uint8_t buf[GRH + 16];
	struct ibv_mr *mr;

	(void)arg;
	make_addr(&src, loopback_ip(), 0);
	make_addr(&group, "239.1.2.5", 0);
	ASSERT_EQ(rdma_create_id(ch, &id, NULL, RDMA_PS_UDP), 0);
	ASSERT_EQ(rdma_bind_addr(id, (struct sockaddr *)&src), 0);
	/* mckey's way: the group's resolution picks the device */
	ASSERT_EQ(rdma_resolve_addr(id, NULL, (struct sockaddr *)&group, 2000),
		  0);
	expect_event_ack(ch, RDMA_CM_EVENT_ADDR_RESOLVED);
	make_qp(id, IBV_QPT_UD);
	post_recv_buf(id, buf, sizeof(buf), &mr);
	ASSERT_EQ(rdma_join_multicast(id, (struct sockaddr *)&group, NULL), 0);
	/* the QP is attached when the event is retrieved */
	expect_event_ack(ch, RDMA_CM_EVENT_MULTICAST_JOIN);
	peer_send(p, 1);
	recv_done(id, mr);
	ASSERT_STR_EQ((char *)buf + GRH, "to the group");
	ASSERT_EQ(rdma_leave_multicast(id, (struct sockaddr *)&group), 0);
	rdma_destroy_qp(id);
	ASSERT_EQ(rdma_destroy_id(id), 0);
	rdma_destroy_event_channel(ch);
}

TEST(multicast_between_processes)
{
	struct rdma_event_channel *ch;
	struct rdma_cm_join_mc_attr_ex mc = { 0 };
	struct sockaddr_in src, group;
	struct rdma_cm_event *ev;
	struct rdma_cm_id *id;
	char msg[16] = "to the group";
	struct ibv_mr *mr;
	struct ibv_ah *ah;
	struct ibv_wc wc;
	struct peer p;

	peer_start(&p, mc_receiver, NULL);
	ASSERT_EQ(peer_recv(&p), 1);
	ch = rdma_create_event_channel();
	make_addr(&src, loopback_ip(), 0);
	make_addr(&group, "239.1.2.5", 0);
	ASSERT_EQ(rdma_create_id(ch, &id, NULL, RDMA_PS_UDP), 0);
	ASSERT_EQ(rdma_resolve_addr(id, (struct sockaddr *)&src,
				    (struct sockaddr *)&group, 2000), 0);
	expect_event_ack(ch, RDMA_CM_EVENT_ADDR_RESOLVED);
	make_qp(id, IBV_QPT_UD);
	mc.comp_mask = RDMA_CM_JOIN_MC_ATTR_ADDRESS |
		       RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS;
	mc.addr = (struct sockaddr *)&group;
	mc.join_flags = RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER;
	ASSERT_EQ(rdma_join_multicast_ex(id, &mc, NULL), 0);
	ev = expect_event(ch, RDMA_CM_EVENT_MULTICAST_JOIN);
	ah = ibv_create_ah(id->pd, &ev->param.ud.ah_attr);
	ASSERT_NOT_NULL(ah);
	mr = rdma_reg_msgs(id, msg, sizeof(msg));
	ASSERT_EQ(rdma_post_ud_send(id, NULL, msg, sizeof(msg), mr,
				    IBV_SEND_SIGNALED, ah,
				    ev->param.ud.qp_num), 0);
	ASSERT_EQ(rdma_get_send_comp(id, &wc), 1);
	ASSERT_EQ(wc.status, IBV_WC_SUCCESS);
	ASSERT_EQ(rdma_ack_cm_event(ev), 0);
	peer_wait(&p);
	ASSERT_EQ(rdma_leave_multicast(id, (struct sockaddr *)&group), 0);
	ASSERT_EQ(rdma_dereg_mr(mr), 0);
	ASSERT_EQ(ibv_destroy_ah(ah), 0);
	rdma_destroy_qp(id);
	ASSERT_EQ(rdma_destroy_id(id), 0);
	rdma_destroy_event_channel(ch);
}
