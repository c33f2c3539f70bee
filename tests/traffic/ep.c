// SPDX-License-Identifier: MIT
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "common.h"
#include "ep.h"

void xwrite(int fd, const void *p, size_t len)
{
	const char *c = p;

	while (len) {
		ssize_t n = write(fd, c, len);

		ASSERT(n > 0);
		c += n;
		len -= (size_t)n;
	}
}

void xread(int fd, void *p, size_t len)
{
	char *c = p;

	while (len) {
		ssize_t n = read(fd, c, len);

		ASSERT(n > 0);
		c += n;
		len -= (size_t)n;
	}
}

void ep_exchange(int fd, const struct ep_info *mine, struct ep_info *theirs)
{
	xwrite(fd, mine, sizeof(*mine));
	xread(fd, theirs, sizeof(*theirs));
}

void ep_default_opts(struct ep_opts *o, enum ibv_qp_type type)
{
	memset(o, 0, sizeof(*o));
	o->type = type;
	o->buf_size = 4 << 20;
	o->max_send_wr = 64;
	o->max_recv_wr = 64;
	o->max_sge = 4;
	o->max_inline = 256;
	o->cqe = 256;
	o->access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
		    IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
	o->min_rnr_timer = 1;
	o->rnr_retry = 7;
	o->timeout = 14;
	o->retry_cnt = 7;
}

void ep_create(struct ep *e, const struct ep_opts *o)
{
	struct ibv_qp_init_attr ia;
	struct ibv_qp_attr a;
	int mask;

	memset(e, 0, sizeof(*e));
	e->type = o->type;
	e->ctx = open_lo();
	e->pd = ibv_alloc_pd(e->ctx);
	ASSERT_NOT_NULL(e->pd);
	if (o->channel) {
		e->ch = ibv_create_comp_channel(e->ctx);
		ASSERT_NOT_NULL(e->ch);
	}
	e->scq = ibv_create_cq(e->ctx, o->cqe, NULL, e->ch, 0);
	ASSERT_NOT_NULL(e->scq);
	e->rcq = ibv_create_cq(e->ctx, o->cqe, NULL, e->ch, 0);
	ASSERT_NOT_NULL(e->rcq);
	e->size = o->buf_size;
	ASSERT_EQ(posix_memalign((void **)&e->buf, 4096, e->size), 0);
	memset(e->buf, 0, e->size);
	e->mr = ibv_reg_mr(e->pd, e->buf, e->size, o->access);
	ASSERT_NOT_NULL(e->mr);

	memset(&ia, 0, sizeof(ia));
	ia.send_cq = e->scq;
	ia.recv_cq = e->rcq;
	ia.srq = o->srq;
	ia.qp_type = o->type;
	ia.cap.max_send_wr = (uint32_t)o->max_send_wr;
	ia.cap.max_recv_wr = (uint32_t)o->max_recv_wr;
	ia.cap.max_send_sge = (uint32_t)o->max_sge;
	ia.cap.max_recv_sge = (uint32_t)o->max_sge;
	ia.cap.max_inline_data = (uint32_t)o->max_inline;
	e->qp = ibv_create_qp(e->pd, &ia);
	ASSERT_NOT_NULL(e->qp);

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.pkey_index = 0;
	a.port_num = 1;
	mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT;
	if (o->type == IBV_QPT_UD) {
		a.qkey = 0x11111111;
		mask |= IBV_QP_QKEY;
	} else {
		a.qp_access_flags = o->access & ~IBV_ACCESS_LOCAL_WRITE;
		if (o->type == IBV_QPT_UC)
			a.qp_access_flags &= IBV_ACCESS_REMOTE_WRITE;
		mask |= IBV_QP_ACCESS_FLAGS;
	}
	ASSERT_EQ(ibv_modify_qp(e->qp, &a, mask), 0);

	e->gid_index = 0;
	ASSERT_EQ(ibv_query_gid(e->ctx, 1, e->gid_index, &e->self.gid), 0);
	e->self.qpn = e->qp->qp_num;
	e->self.psn = (uint32_t)rand() & 0xffffff;
	e->self.rkey = e->mr->rkey;
	e->self.addr = (uintptr_t)e->buf;
}

void ep_connect(struct ep *e, const struct ep_opts *o)
{
	struct ibv_qp_attr a;
	int mask;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	mask = IBV_QP_STATE;
	if (o->type != IBV_QPT_UD) {
		a.path_mtu = IBV_MTU_4096;
		a.dest_qp_num = e->peer.qpn;
		a.rq_psn = e->peer.psn;
		a.ah_attr.is_global = 1;
		a.ah_attr.grh.dgid = e->peer.gid;
		a.ah_attr.grh.sgid_index = (uint8_t)e->gid_index;
		a.ah_attr.grh.hop_limit = 1;
		a.ah_attr.port_num = 1;
		mask |= IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
			IBV_QP_RQ_PSN;
		if (o->type == IBV_QPT_RC) {
			a.max_dest_rd_atomic = 16;
			a.min_rnr_timer = (uint8_t)o->min_rnr_timer;
			mask |= IBV_QP_MAX_DEST_RD_ATOMIC |
				IBV_QP_MIN_RNR_TIMER;
		}
	}
	ASSERT_EQ(ibv_modify_qp(e->qp, &a, mask), 0);

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = e->self.psn;
	mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
	if (o->type == IBV_QPT_RC) {
		a.timeout = (uint8_t)o->timeout;
		a.retry_cnt = (uint8_t)o->retry_cnt;
		a.rnr_retry = (uint8_t)o->rnr_retry;
		a.max_rd_atomic = 16;
		mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
			IBV_QP_MAX_QP_RD_ATOMIC;
	}
	ASSERT_EQ(ibv_modify_qp(e->qp, &a, mask), 0);

	if (o->type == IBV_QPT_UD) {
		struct ibv_ah_attr ah;

		memset(&ah, 0, sizeof(ah));
		ah.is_global = 1;
		ah.grh.dgid = e->peer.gid;
		ah.grh.sgid_index = (uint8_t)e->gid_index;
		ah.grh.hop_limit = 1;
		ah.port_num = 1;
		e->ah = ibv_create_ah(e->pd, &ah);
		ASSERT_NOT_NULL(e->ah);
	}
}

void ep_destroy(struct ep *e)
{
	if (e->ah)
		ASSERT_EQ(ibv_destroy_ah(e->ah), 0);
	ASSERT_EQ(ibv_destroy_qp(e->qp), 0);
	ASSERT_EQ(ibv_dereg_mr(e->mr), 0);
	ASSERT_EQ(ibv_destroy_cq(e->scq), 0);
	ASSERT_EQ(ibv_destroy_cq(e->rcq), 0);
	if (e->ch)
		ASSERT_EQ(ibv_destroy_comp_channel(e->ch), 0);
	ASSERT_EQ(ibv_dealloc_pd(e->pd), 0);
	ASSERT_EQ(ibv_close_device(e->ctx), 0);
	free(e->buf);
}

void ep_poll(struct ibv_cq *cq, struct ibv_wc *wc, int n)
{
	struct timespec t0, t;
	int got = 0;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (got < n) {
		int r = ibv_poll_cq(cq, n - got, wc + got);

		ASSERT_GE(r, 0);
		got += r;
		if (r)
			continue;
		clock_gettime(CLOCK_MONOTONIC, &t);
		if (t.tv_sec - t0.tv_sec > 10)
			harness_fail(__FILE__, __LINE__,
				     "%d of %d completions after 10 s", got,
				     n);
		usleep(10);
	}
}
