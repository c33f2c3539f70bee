// SPDX-License-Identifier: MIT
/* Endpoints of the import tests: see import_ep.h. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "common.h"
#include "fdpass.h"
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

void import_ep_connect(struct ep *e, const struct ep_info *peer,
		       uint8_t rnr_retry)
{
	struct ep_opts o;

	ep_default_opts(&o, e->type);
	o.rnr_retry = rnr_retry;
	e->peer = *peer;
	ep_connect(e, &o);
}

void import_env(bool net, bool cma)
{
	ep_skip_if_netns();
	if (net)
		setenv("SOFTHCA_NET", "1", 1);
	else
		unsetenv("SOFTHCA_NET");
	if (cma)
		setenv("SOFTHCA_MAP", "0", 1);
	else
		unsetenv("SOFTHCA_MAP");
}

void import_owner_begin(struct import_owner *o,
			void (*fn)(int sock, void *arg), void *arg,
			size_t size, int access, int sbuf_access)
{
	struct duo d;

	/* before the device opens: the child inherits none of it */
	duo_fork(&d, fn, arg);
	import_owner_open(o, size, access, sbuf_access);
	o->d = d;
}

void import_owner_open(struct import_owner *o, size_t size, int access,
		       int sbuf_access)
{
	memset(o, 0, sizeof(*o));
	o->d.pid = -1;
	o->d.fd = -1;
	o->size = size;
	o->ctx = open_lo();
	o->pd = ibv_alloc_pd(o->ctx);
	ASSERT_NOT_NULL(o->pd);
	ASSERT_EQ(posix_memalign((void **)&o->buf, 4096, size), 0);
	memset(o->buf, EP_SENTINEL, size);
	o->mr = ibv_reg_mr(o->pd, o->buf, size, access);
	ASSERT_NOT_NULL(o->mr);
	if (!sbuf_access)
		return;
	ASSERT_EQ(posix_memalign((void **)&o->sbuf, 4096, size), 0);
	memset(o->sbuf, 0, size);
	o->smr = ibv_reg_mr(o->pd, o->sbuf, size, sbuf_access);
	ASSERT_NOT_NULL(o->smr);
}

void import_owner_offer(struct import_owner *o, const struct ep_info *a)
{
	struct import_offer of;

	memset(&of, 0, sizeof(of));
	of.pd_handle = o->pd->handle;
	of.mr_handle = o->mr->handle;
	of.addr = (uintptr_t)o->buf;
	of.length = o->mr->length;
	if (a)
		of.a = *a;
	fdpass_send(o->d.fd, o->ctx->cmd_fd, &of, sizeof(of));
}

void import_owner_connect(struct import_owner *o, struct ep *a)
{
	struct ep_info info;

	xread(o->d.fd, &info, sizeof(info));
	import_ep_connect(a, &info, 7);
	duo_signal(o->d.fd, 'c');
}

bool import_owner_next(struct import_owner *o, struct import_cmd *c)
{
	xread(o->d.fd, c, sizeof(*c));
	return c->op != 'Q';
}

void import_owner_check(const struct import_owner *o, uint32_t off,
			uint32_t len, uint32_t seed, bool before)
{
	if (seed)
		ASSERT_EQ(ep_find_pattern_diff(o->buf + off, len, seed, 0), -1);
	else
		ASSERT_EQ(ep_find_non_sentinel(o->buf + off, len), -1);
	if (off + len + 64 <= o->size)
		ASSERT_EQ(ep_find_non_sentinel(o->buf + off + len, 64), -1);
	if (before && off >= 64)
		ASSERT_EQ(ep_find_non_sentinel(o->buf + off - 64, 64), -1);
}

void import_owner_dereg(struct import_owner *o)
{
	ASSERT_EQ(ibv_dereg_mr(o->mr), 0);
	o->dereg = true;
}

void import_owner_wait(struct import_owner *o)
{
	duo_signal(o->d.fd, 'k');
	duo_wait(&o->d);
}

void import_owner_end(struct import_owner *o)
{
	if (!o->dereg)
		ASSERT_EQ(ibv_dereg_mr(o->mr), 0);
	if (o->smr)
		ASSERT_EQ(ibv_dereg_mr(o->smr), 0);
	ASSERT_EQ(ibv_dealloc_pd(o->pd), 0);
	ASSERT_EQ(ibv_close_device(o->ctx), 0);
	free(o->buf);
	free(o->sbuf);
}

void importer_begin(struct importer *im, int sock)
{
	int fd;

	memset(im, 0, sizeof(*im));
	fd = fdpass_recv(sock, &im->of, sizeof(im->of));
	im->ctx = ibv_import_device(fd);
	ASSERT_NOT_NULL(im->ctx);
	im->pd = ibv_import_pd(im->ctx, im->of.pd_handle);
	ASSERT_NOT_NULL(im->pd);
	im->mr = ibv_import_mr(im->pd, im->of.mr_handle);
	ASSERT_NOT_NULL(im->mr);
}

void importer_end(struct importer *im)
{
	ibv_unimport_mr(im->mr);
	ibv_unimport_pd(im->pd);
	ASSERT_EQ(ibv_close_device(im->ctx), 0);
}

void import_cmd_send(int sock, char op, uint32_t off, uint32_t len,
		     uint32_t seed, uint64_t tag, int32_t status)
{
	struct import_cmd c;

	memset(&c, 0, sizeof(c));
	c.op = op;
	c.off = off;
	c.len = len;
	c.seed = seed;
	c.tag = tag;
	c.status = status;
	xwrite(sock, &c, sizeof(c));
}

int import_post_recv(struct ibv_qp *qp, struct ibv_srq *srq, uint64_t wr_id,
		     struct ibv_sge *sge, int n)
{
	struct ibv_recv_wr wr, *bad;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = wr_id;
	wr.sg_list = sge;
	wr.num_sge = n;
	return srq ? ibv_post_srq_recv(srq, &wr, &bad) :
		     ibv_post_recv(qp, &wr, &bad);
}

void import_start_poll(struct ibv_cq_ex *cq)
{
	struct ibv_poll_cq_attr pa = { 0 };
	int k, ret = ENOENT;

	for (k = 0; k < 10000 && ret == ENOENT; k++) {
		ret = ibv_start_poll(cq, &pa);
		if (ret == ENOENT)
			usleep(1000);
	}
	ASSERT_EQ(ret, 0);
}
