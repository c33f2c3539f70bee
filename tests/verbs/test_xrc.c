// SPDX-License-Identifier: MIT
/*
 * XRC (docs/xrc.md): ibv_open_xrcd with a file (O_CREAT, O_EXCL) and
 * private, ibv_close_xrcd while used, XRC SRQs and ibv_get_srq_num,
 * XRC_SEND and XRC_RECV QPs and their errnos, IBV_DEVICE_XRC; and
 * traffic in one process: a SEND and a WRITE from an XRC_SEND QP into an
 * XRC SRQ through an XRC_RECV QP, and an SRQ of another domain refused.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "common.h"

struct xenv {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_xrcd *xrcd;
	struct ibv_mr *mr;
	char buf[4096];
};

static struct ibv_xrcd *xrcd_open(struct ibv_context *ctx, int fd,
				  int oflags)
{
	struct ibv_xrcd_init_attr a = {
		.comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS,
		.fd = fd,
		.oflags = oflags,
	};

	return ibv_open_xrcd(ctx, &a);
}

static void xenv_open(struct xenv *e)
{
	e->ctx = open_lo();
	e->pd = ibv_alloc_pd(e->ctx);
	ASSERT_NOT_NULL(e->pd);
	e->cq = ibv_create_cq(e->ctx, 64, NULL, NULL, 0);
	ASSERT_NOT_NULL(e->cq);
	e->xrcd = xrcd_open(e->ctx, -1, O_CREAT);
	ASSERT_NOT_NULL(e->xrcd);
	e->mr = ibv_reg_mr(e->pd, e->buf, sizeof(e->buf),
			   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			   IBV_ACCESS_REMOTE_READ);
	ASSERT_NOT_NULL(e->mr);
}

static struct ibv_srq *xsrq_new(struct xenv *e, struct ibv_xrcd *xrcd)
{
	struct ibv_srq_init_attr_ex a = {
		.attr = { .max_wr = 16, .max_sge = 1 },
		.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD |
			     IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ,
		.srq_type = IBV_SRQT_XRC,
		.pd = e->pd,
		.xrcd = xrcd,
		.cq = e->cq,
	};

	return ibv_create_srq_ex(e->ctx, &a);
}

static struct ibv_qp *xqp_new(struct xenv *e, enum ibv_qp_type type,
			      struct ibv_xrcd *xrcd)
{
	struct ibv_qp_init_attr_ex a = {
		.qp_type = type,
		.send_cq = e->cq,
		.recv_cq = e->cq,
		.cap = { .max_send_wr = 8, .max_send_sge = 1 },
	};

	if (type == IBV_QPT_XRC_RECV) {
		a.comp_mask = IBV_QP_INIT_ATTR_XRCD;
		a.xrcd = xrcd;
	} else {
		a.comp_mask = IBV_QP_INIT_ATTR_PD;
		a.pd = e->pd;
	}
	return ibv_create_qp_ex(e->ctx, &a);
}

/* RESET -> INIT -> RTR (-> RTS for the sender) toward dest. */
static void xqp_connect(struct xenv *e, struct ibv_qp *qp, uint32_t dest,
			bool rts)
{
	struct ibv_qp_attr a;
	union ibv_gid gid;

	ASSERT_EQ(ibv_query_gid(e->ctx, 1, 0, &gid), 0);
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
	ASSERT_EQ(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
				IBV_QP_PORT | IBV_QP_ACCESS_FLAGS), 0);
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = dest;
	a.rq_psn = 0;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 1;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = gid;
	a.ah_attr.grh.hop_limit = 1;
	a.ah_attr.port_num = 1;
	/* an XRC_SEND QP takes no responder's attributes: uverbs'
	 * modify_qp_mask drops MAX_DEST_RD_ATOMIC and MIN_RNR_TIMER before
	 * the kernel's table would refuse them (perftest -c XRC sets them);
	 * a value out of range in them is not looked at */
	if (qp->qp_type == IBV_QPT_XRC_SEND) {
		a.min_rnr_timer = 200;
		ASSERT_EQ(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV |
					IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
					IBV_QP_RQ_PSN |
					IBV_QP_MAX_DEST_RD_ATOMIC |
					IBV_QP_MIN_RNR_TIMER), 0);
	} else {
		ASSERT_EQ(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV |
					IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
					IBV_QP_RQ_PSN |
					IBV_QP_MAX_DEST_RD_ATOMIC |
					IBV_QP_MIN_RNR_TIMER), 0);
	}
	if (!rts)
		return;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 10;
	a.retry_cnt = 1;
	a.rnr_retry = 1;
	a.max_rd_atomic = 1;
	ASSERT_EQ(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT |
				IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
				IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC), 0);
}

static void poll_one(struct ibv_cq *cq, struct ibv_wc *wc)
{
	int i, n = 0;

	for (i = 0; i < 200000 && n == 0; i++) {
		n = ibv_poll_cq(cq, 1, wc);
		if (!n)
			usleep(10);
	}
	ASSERT_EQ(n, 1);
}

TEST(device_reports_xrc)
{
	struct ibv_device_attr attr;
	struct ibv_context *ctx = open_lo();

	ASSERT_EQ(ibv_query_device(ctx, &attr), 0);
	ASSERT_NE(!!(attr.device_cap_flags & IBV_DEVICE_XRC), 0);
	ibv_close_device(ctx);
}

TEST(open_xrcd_errors)
{
	struct ibv_context *ctx = open_lo();
	struct ibv_xrcd_init_attr a = { .comp_mask = IBV_XRCD_INIT_ATTR_FD };

	errno = 0;
	ASSERT_NULL(ibv_open_xrcd(ctx, &a));	/* no OFLAGS */
	ASSERT_EQ(errno, EINVAL);
	a.comp_mask = IBV_XRCD_INIT_ATTR_RESERVED;
	ASSERT_NULL(ibv_open_xrcd(ctx, &a));
	ASSERT_EQ(errno, ENOSYS);
	/* a private domain needs O_CREAT */
	ASSERT_NULL(xrcd_open(ctx, -1, 0));
	ASSERT_EQ(errno, EINVAL);
	ASSERT_NULL(xrcd_open(ctx, 12345, O_CREAT));
	ASSERT_EQ(errno, EBADF);
	ibv_close_device(ctx);
}

/* O_CREAT, O_EXCL and "exists", through one file (ibv_open_xrcd(3)). */
TEST(open_xrcd_file_semantics)
{
	struct ibv_context *ctx = open_lo();
	char path[] = "/tmp/softhca-xrcd-XXXXXX";
	struct ibv_xrcd *x1, *x2;
	int fd = mkstemp(path);

	ASSERT_GE(fd, 0);
	/* nobody holds it: without O_CREAT, it does not exist */
	ASSERT_NULL(xrcd_open(ctx, fd, 0));
	ASSERT_EQ(errno, EINVAL);
	x1 = xrcd_open(ctx, fd, O_CREAT | O_EXCL);
	ASSERT_NOT_NULL(x1);
	/* it exists now */
	ASSERT_NULL(xrcd_open(ctx, fd, O_CREAT | O_EXCL));
	ASSERT_EQ(errno, EINVAL);
	x2 = xrcd_open(ctx, fd, 0);
	ASSERT_NOT_NULL(x2);
	ASSERT_EQ(ibv_close_xrcd(x2), 0);
	ASSERT_EQ(ibv_close_xrcd(x1), 0);
	/* all closed: gone again */
	ASSERT_NULL(xrcd_open(ctx, fd, 0));
	ASSERT_EQ(errno, EINVAL);
	close(fd);
	unlink(path);
	ibv_close_device(ctx);
}

TEST(xrc_srq_and_qps)
{
	struct xenv e;
	struct ibv_srq *srq;
	struct ibv_qp *send, *recv;
	struct ibv_srq_init_attr_ex sa;
	struct ibv_recv_wr rwr = { 0 }, *bad;
	uint32_t n1 = 0, n2 = 0;
	struct ibv_srq_init_attr basic = { .attr = { .max_wr = 4 } };
	struct ibv_srq *bsrq;

	xenv_open(&e);
	srq = xsrq_new(&e, e.xrcd);
	ASSERT_NOT_NULL(srq);
	ASSERT_EQ(ibv_get_srq_num(srq, &n1), 0);
	ASSERT_NE(n1, 0u);
	/* a basic SRQ has no number */
	bsrq = ibv_create_srq(e.pd, &basic);
	ASSERT_NOT_NULL(bsrq);
	ASSERT_EQ(ibv_get_srq_num(bsrq, &n2), EINVAL);
	ASSERT_EQ(ibv_destroy_srq(bsrq), 0);
	/* an XRC SRQ needs its domain and CQ */
	memset(&sa, 0, sizeof(sa));
	sa.attr.max_wr = 4;
	sa.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD |
		       IBV_SRQ_INIT_ATTR_CQ;
	sa.srq_type = IBV_SRQT_XRC;
	sa.pd = e.pd;
	sa.cq = e.cq;
	ASSERT_NULL(ibv_create_srq_ex(e.ctx, &sa));
	ASSERT_EQ(errno, EINVAL);

	send = xqp_new(&e, IBV_QPT_XRC_SEND, NULL);
	ASSERT_NOT_NULL(send);
	recv = xqp_new(&e, IBV_QPT_XRC_RECV, e.xrcd);
	ASSERT_NOT_NULL(recv);
	ASSERT_NULL(recv->pd);
	/* XRC_RECV without a domain */
	ASSERT_NULL(xqp_new(&e, IBV_QPT_XRC_RECV, NULL));
	ASSERT_EQ(errno, EINVAL);
	/* XRC QPs take no receives */
	ASSERT_EQ(ibv_post_recv(send, &rwr, &bad), EINVAL);
	ASSERT_EQ(ibv_post_recv(recv, &rwr, &bad), EINVAL);
	/* the domain is in use */
	ASSERT_EQ(ibv_close_xrcd(e.xrcd), EBUSY);
	ASSERT_EQ(ibv_destroy_qp(recv), 0);
	ASSERT_EQ(ibv_close_xrcd(e.xrcd), EBUSY);	/* the SRQ */
	ASSERT_EQ(ibv_destroy_srq(srq), 0);
	ASSERT_EQ(ibv_close_xrcd(e.xrcd), 0);
	ASSERT_EQ(ibv_destroy_qp(send), 0);
}

/*
 * Handles (issue 12, docs/conformance.md "Handles"): a domain that is
 * closed or of another context is refused.  ibv_close_xrcd again is
 * ENOENT (the kernel's XRCD_DESTROY lookup); the creates that name it
 * (ioctl attributes) are NULL with ENOENT; a closed domain closed again
 * frees nothing twice.
 */
TEST(xrcd_not_open_is_refused)
{
	struct ibv_xrcd *dead;
	struct xenv e, o;

	xenv_open(&e);
	xenv_open(&o);
	dead = xrcd_open(e.ctx, -1, O_CREAT);
	ASSERT_NOT_NULL(dead);
	ASSERT_EQ(ibv_close_xrcd(dead), 0);
	ASSERT_EQ(ibv_close_xrcd(dead), ENOENT);
	ASSERT_EQ(errno, ENOENT);
	ASSERT_EQ(ibv_close_xrcd(dead), ENOENT);
	ASSERT_NULL_ERRNO(xsrq_new(&e, dead), ENOENT);
	ASSERT_NULL_ERRNO(xqp_new(&e, IBV_QPT_XRC_RECV, dead), ENOENT);
	/* the other context's domain is not open in this one */
	ASSERT_NULL_ERRNO(xsrq_new(&e, o.xrcd), ENOENT);
	ASSERT_NULL_ERRNO(xqp_new(&e, IBV_QPT_XRC_RECV, o.xrcd), ENOENT);
	/* both domains are live, unused, and close once */
	ASSERT_EQ(ibv_close_xrcd(o.xrcd), 0);
	ASSERT_EQ(ibv_close_xrcd(e.xrcd), 0);
	ASSERT_EQ(ibv_close_xrcd(e.xrcd), ENOENT);
}

/* SEND and WRITE-with-imm through XRC; an SRQ of another domain fails. */
TEST(xrc_traffic_same_process)
{
	struct xenv e;
	struct ibv_xrcd *other;
	struct ibv_srq *srq, *osrq;
	struct ibv_qp *send, *recv;
	struct ibv_sge rs, ss;
	struct ibv_recv_wr rwr, *rbad;
	struct ibv_send_wr swr, *sbad;
	struct ibv_wc wc;
	uint32_t srqn, osrqn;

	xenv_open(&e);
	srq = xsrq_new(&e, e.xrcd);
	ASSERT_NOT_NULL(srq);
	ASSERT_EQ(ibv_get_srq_num(srq, &srqn), 0);
	other = xrcd_open(e.ctx, -1, O_CREAT);
	ASSERT_NOT_NULL(other);
	osrq = xsrq_new(&e, other);
	ASSERT_NOT_NULL(osrq);
	ASSERT_EQ(ibv_get_srq_num(osrq, &osrqn), 0);
	send = xqp_new(&e, IBV_QPT_XRC_SEND, NULL);
	recv = xqp_new(&e, IBV_QPT_XRC_RECV, e.xrcd);
	ASSERT_NOT_NULL(send);
	ASSERT_NOT_NULL(recv);
	xqp_connect(&e, recv, send->qp_num, false);
	xqp_connect(&e, send, recv->qp_num, true);

	memset(e.buf, 0, sizeof(e.buf));
	strcpy(e.buf, "hello xrc");
	rs = (struct ibv_sge){ (uintptr_t)(e.buf + 1024), 64, e.mr->lkey };
	memset(&rwr, 0, sizeof(rwr));
	rwr.wr_id = 7;
	rwr.sg_list = &rs;
	rwr.num_sge = 1;
	ASSERT_EQ(ibv_post_srq_recv(srq, &rwr, &rbad), 0);

	ss = (struct ibv_sge){ (uintptr_t)e.buf, 10, e.mr->lkey };
	memset(&swr, 0, sizeof(swr));
	swr.wr_id = 1;
	swr.opcode = IBV_WR_SEND;
	swr.sg_list = &ss;
	swr.num_sge = 1;
	swr.send_flags = IBV_SEND_SIGNALED;
	swr.qp_type.xrc.remote_srqn = srqn;
	ASSERT_EQ(ibv_post_send(send, &swr, &sbad), 0);
	/* both completions reach the one CQ: the SRQ's and the sender's */
	poll_one(e.cq, &wc);
	if (wc.wr_id == 7) {
		ASSERT_EQ(wc.status, IBV_WC_SUCCESS);
		ASSERT_EQ(wc.opcode, IBV_WC_RECV);
		ASSERT_EQ(wc.byte_len, 10u);
		ASSERT_EQ(wc.qp_num, recv->qp_num);
		poll_one(e.cq, &wc);
		ASSERT_EQ(wc.wr_id, 1u);
	} else {
		ASSERT_EQ(wc.wr_id, 1u);
		ASSERT_EQ(wc.status, IBV_WC_SUCCESS);
		poll_one(e.cq, &wc);
		ASSERT_EQ(wc.wr_id, 7u);
		ASSERT_EQ(wc.byte_len, 10u);
	}
	ASSERT_EQ(wc.status, IBV_WC_SUCCESS);
	ASSERT_EQ(strcmp(e.buf + 1024, "hello xrc"), 0);

	/* an RDMA WRITE, its R_Key checked in the SRQ's PD */
	ss = (struct ibv_sge){ (uintptr_t)e.buf, 5, e.mr->lkey };
	swr.wr_id = 2;
	swr.opcode = IBV_WR_RDMA_WRITE;
	swr.wr.rdma.remote_addr = (uintptr_t)(e.buf + 2048);
	swr.wr.rdma.rkey = e.mr->rkey;
	ASSERT_EQ(ibv_post_send(send, &swr, &sbad), 0);
	poll_one(e.cq, &wc);
	ASSERT_EQ(wc.wr_id, 2u);
	ASSERT_EQ(wc.status, IBV_WC_SUCCESS);
	ASSERT_EQ(memcmp(e.buf + 2048, "hello", 5), 0);

	/* an SRQ of another domain: an invalid request */
	swr.wr_id = 3;
	swr.opcode = IBV_WR_SEND;
	swr.qp_type.xrc.remote_srqn = osrqn;
	ASSERT_EQ(ibv_post_send(send, &swr, &sbad), 0);
	poll_one(e.cq, &wc);
	ASSERT_EQ(wc.wr_id, 3u);
	ASSERT_EQ(wc.status, IBV_WC_REM_INV_REQ_ERR);

	ASSERT_EQ(ibv_destroy_qp(send), 0);
	ASSERT_EQ(ibv_destroy_qp(recv), 0);
	ASSERT_EQ(ibv_destroy_srq(osrq), 0);
	ASSERT_EQ(ibv_destroy_srq(srq), 0);
	ASSERT_EQ(ibv_close_xrcd(other), 0);
	ASSERT_EQ(ibv_close_xrcd(e.xrcd), 0);
}


