// SPDX-License-Identifier: MIT
/*
 * Thread domains and parent domains (man ibv_alloc_td,
 * ibv_alloc_parent_domain; docs/parent-domain.md):
 *
 *   - ibv_alloc_td/ibv_dealloc_td, EINVAL for comp_mask bits, EBUSY while
 *     a parent domain holds the TD;
 *   - ibv_alloc_parent_domain's errors (no PD, unknown comp_mask bits,
 *     half an allocator pair, a PD or TD of another context, a parent
 *     domain as the PD: EINVAL), ibv_dealloc_pd on it, EBUSY on it and on
 *     its PD while they are used;
 *   - a parent domain wherever a PD goes: QP, QP ex, MR, AH, SRQ, SRQ ex,
 *     CQ ex (IBV_CQ_INIT_ATTR_MASK_PD; a plain PD there is EINVAL);
 *   - the allocator: called for a QP's send ring (resource type 1,
 *     page-aligned), not for CQ, SRQ and receive rings (the arena's); free
 *     once for each buffer alloc returned, with its pointer;
 *     IBV_ALLOCATOR_USE_DEFAULT falls back and frees nothing; NULL fails
 *     the create with ENOMEM; a misaligned buffer is given back and the
 *     create fails with EINVAL; a closing context frees what is left;
 *   - traffic between two processes whose QPs and CQs are on parent
 *     domains (SEND, RDMA WRITE and READ, with keys of MRs on the parent
 *     domain and on its plain PD alike), on the same-host path and the
 *     net path (SOFTHCA_NET=1, TCP bytes seen by the kernel).
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "common.h"
#include "../traffic/ep.h"

#define RES_TYPE_SQ	1ull	/* softhca's resource type of a send ring */

/* ------------------------------------------------------------------ */
/* A counting allocator                                                */

enum amode { A_ALIGNED, A_DEFAULT, A_NULL, A_MISALIGNED };

struct acount {
	enum amode mode;
	int allocs, frees, bad_frees;
	struct ibv_pd *pd_seen;		/* the pd alloc was given */
	size_t size, align;
	uint64_t type;
	void *live[64];			/* returned by alloc, not freed yet */
	int nlive;
};

static void *count_alloc(struct ibv_pd *pd, void *pd_context, size_t size,
			 size_t align, uint64_t type)
{
	struct acount *c = pd_context;
	void *p = NULL;

	c->allocs++;
	c->pd_seen = pd;
	c->size = size;
	c->align = align;
	c->type = type;
	switch (c->mode) {
	case A_DEFAULT:
		return IBV_ALLOCATOR_USE_DEFAULT;
	case A_NULL:
		return NULL;
	case A_ALIGNED:
		if (posix_memalign(&p, align, size))
			return NULL;
		memset(p, 0, size);
		break;
	case A_MISALIGNED:
		if (posix_memalign(&p, align, size + 64))
			return NULL;
		p = (char *)p + 8;
		break;
	}
	if (c->nlive < 64)
		c->live[c->nlive++] = p;
	return p;
}

static void count_free(struct ibv_pd *pd, void *pd_context, void *ptr,
		       uint64_t type)
{
	struct acount *c = pd_context;
	int i;

	(void)pd;
	(void)type;
	c->frees++;
	for (i = 0; i < c->nlive; i++)
		if (c->live[i] == ptr)
			break;
	if (i == c->nlive) {
		c->bad_frees++;	/* not returned by alloc, or freed twice */
		return;
	}
	c->live[i] = c->live[--c->nlive];
	free(c->mode == A_MISALIGNED ? (char *)ptr - 8 : ptr);
}

static struct ibv_parent_domain_init_attr pdom_attr(struct ibv_pd *pd,
						    struct acount *c)
{
	struct ibv_parent_domain_init_attr a;

	memset(&a, 0, sizeof(a));
	a.pd = pd;
	if (c) {
		a.comp_mask = IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS |
			      IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT;
		a.alloc = count_alloc;
		a.free = count_free;
		a.pd_context = c;
	}
	return a;
}

static struct ibv_qp *rc_qp(struct ibv_pd *pd, struct ibv_cq *cq)
{
	struct ibv_qp_init_attr ia;

	memset(&ia, 0, sizeof(ia));
	ia.send_cq = cq;
	ia.recv_cq = cq;
	ia.qp_type = IBV_QPT_RC;
	ia.cap.max_send_wr = 16;
	ia.cap.max_recv_wr = 16;
	ia.cap.max_send_sge = 1;
	ia.cap.max_recv_sge = 1;
	return ibv_create_qp(pd, &ia);
}

static struct ibv_cq_ex *cq_on(struct ibv_context *ctx, struct ibv_pd *pdom)
{
	struct ibv_cq_init_attr_ex a;

	memset(&a, 0, sizeof(a));
	a.cqe = 16;
	a.wc_flags = IBV_WC_STANDARD_FLAGS;
	a.comp_mask = IBV_CQ_INIT_ATTR_MASK_PD;
	a.parent_domain = pdom;
	return ibv_create_cq_ex(ctx, &a);
}

/* ------------------------------------------------------------------ */
/* Thread domains                                                      */

TEST(td_alloc_dealloc)
{
	struct ibv_context *ctx = open_lo();
	struct ibv_td_init_attr ta = { .comp_mask = 0 };
	struct ibv_td *td = ibv_alloc_td(ctx, &ta);

	ASSERT_NOT_NULL(td);
	ASSERT(td->context == ctx);
	ASSERT_EQ(ibv_dealloc_td(td), 0);
	/* gone: a second dealloc finds nothing (its struct is quarantined) */
	ASSERT_EQ(ibv_dealloc_td(td), ENOENT);
	/* no comp_mask bit is defined (mlx5_alloc_td) */
	ta.comp_mask = 1;
	ASSERT_NULL_ERRNO(ibv_alloc_td(ctx, &ta), EINVAL);
	ASSERT_EQ(ibv_close_device(ctx), 0);
}

TEST(td_busy_while_held)
{
	struct ibv_context *ctx = open_lo();
	struct ibv_td_init_attr ta = { .comp_mask = 0 };
	struct ibv_td *td = ibv_alloc_td(ctx, &ta);
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_parent_domain_init_attr pa = pdom_attr(pd, NULL);
	struct ibv_pd *pdom;

	ASSERT_NOT_NULL(td);
	pa.td = td;
	pdom = ibv_alloc_parent_domain(ctx, &pa);
	ASSERT_NOT_NULL(pdom);
	ASSERT_EQ(ibv_dealloc_td(td), EBUSY);
	ASSERT_EQ(ibv_dealloc_pd(pd), EBUSY);
	ASSERT_EQ(ibv_dealloc_pd(pdom), 0);
	ASSERT_EQ(ibv_dealloc_td(td), 0);
	ASSERT_EQ(ibv_dealloc_pd(pd), 0);
	ASSERT_EQ(ibv_close_device(ctx), 0);
}

/* ------------------------------------------------------------------ */
/* Parent domains: control path                                        */

TEST(pdom_errors)
{
	struct ibv_context *ctx = open_lo(), *ctx2 = open_lo();
	struct ibv_td_init_attr ta = { .comp_mask = 0 };
	struct ibv_pd *pd = ibv_alloc_pd(ctx), *pd2 = ibv_alloc_pd(ctx2);
	struct ibv_td *td2 = ibv_alloc_td(ctx2, &ta);
	struct ibv_parent_domain_init_attr pa;
	struct acount c = { .mode = A_ALIGNED };
	struct ibv_pd *pdom;

	ASSERT_NOT_NULL(pd);
	ASSERT_NOT_NULL(pd2);
	ASSERT_NOT_NULL(td2);
	/* a PD must be given (rdma-core's ibv_check_alloc_parent_domain) */
	pa = pdom_attr(NULL, NULL);
	ASSERT_NULL_ERRNO(ibv_alloc_parent_domain(ctx, &pa), EINVAL);
	/* comp_mask bits rdma-core 44 does not define (mlx5) */
	pa = pdom_attr(pd, NULL);
	pa.comp_mask = IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT << 1;
	ASSERT_NULL_ERRNO(ibv_alloc_parent_domain(ctx, &pa), EINVAL);
	pa.comp_mask = 1u << 31;
	ASSERT_NULL_ERRNO(ibv_alloc_parent_domain(ctx, &pa), EINVAL);
	/* ALLOCATORS with half a pair */
	pa = pdom_attr(pd, &c);
	pa.free = NULL;
	ASSERT_NULL_ERRNO(ibv_alloc_parent_domain(ctx, &pa), EINVAL);
	pa = pdom_attr(pd, &c);
	pa.alloc = NULL;
	ASSERT_NULL_ERRNO(ibv_alloc_parent_domain(ctx, &pa), EINVAL);
	/* a PD or TD of another context */
	pa = pdom_attr(pd2, NULL);
	ASSERT_NULL_ERRNO(ibv_alloc_parent_domain(ctx, &pa), EINVAL);
	pa = pdom_attr(pd, NULL);
	pa.td = td2;
	ASSERT_NULL_ERRNO(ibv_alloc_parent_domain(ctx, &pa), EINVAL);
	/* a parent domain does not nest */
	pa = pdom_attr(pd, NULL);
	pdom = ibv_alloc_parent_domain(ctx, &pa);
	ASSERT_NOT_NULL(pdom);
	ASSERT(pdom != pd);
	ASSERT(pdom->context == ctx);
	pa = pdom_attr(pdom, NULL);
	ASSERT_NULL_ERRNO(ibv_alloc_parent_domain(ctx, &pa), EINVAL);
	/* nothing failed half-way: PD and TD are free again */
	ASSERT_EQ(ibv_dealloc_pd(pdom), 0);
	ASSERT_EQ(ibv_dealloc_pd(pdom), ENOENT);
	ASSERT_EQ(ibv_dealloc_pd(pd), 0);
	ASSERT_EQ(ibv_dealloc_td(td2), 0);
	ASSERT_EQ(ibv_dealloc_pd(pd2), 0);
	ASSERT_EQ(c.allocs, 0);
	ASSERT_EQ(ibv_close_device(ctx2), 0);
	ASSERT_EQ(ibv_close_device(ctx), 0);
}

/* Every verb that takes a PD takes a parent domain, which is then busy. */
TEST(pdom_is_a_pd)
{
	struct ibv_context *ctx = open_lo();
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_parent_domain_init_attr pa = pdom_attr(pd, NULL);
	struct ibv_pd *pdom = ibv_alloc_parent_domain(ctx, &pa);
	struct ibv_cq *cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	struct ibv_qp_init_attr_ex ix;
	struct ibv_srq_init_attr_ex sx;
	struct ibv_srq_init_attr sa;
	struct ibv_ah_attr ah;
	struct ibv_cq_ex *cqx;
	struct ibv_qp *qp, *qpx;
	struct ibv_srq *srq, *srqx;
	struct ibv_mr *mr;
	struct ibv_ah *a;
	char buf[256];

	ASSERT_NOT_NULL(pdom);
	ASSERT_NOT_NULL(cq);
	qp = rc_qp(pdom, cq);
	ASSERT_NOT_NULL(qp);
	ASSERT(qp->pd == pdom);
	memset(&ix, 0, sizeof(ix));
	ix.send_cq = cq;
	ix.recv_cq = cq;
	ix.qp_type = IBV_QPT_UD;
	ix.cap.max_send_wr = 4;
	ix.cap.max_recv_wr = 4;
	ix.cap.max_send_sge = 1;
	ix.cap.max_recv_sge = 1;
	ix.comp_mask = IBV_QP_INIT_ATTR_PD;
	ix.pd = pdom;
	qpx = ibv_create_qp_ex(ctx, &ix);
	ASSERT_NOT_NULL(qpx);
	mr = ibv_reg_mr(pdom, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
	ASSERT_NOT_NULL(mr);
	ASSERT(mr->pd == pdom);
	memset(&sa, 0, sizeof(sa));
	sa.attr.max_wr = 4;
	sa.attr.max_sge = 1;
	srq = ibv_create_srq(pdom, &sa);
	ASSERT_NOT_NULL(srq);
	memset(&sx, 0, sizeof(sx));
	sx.attr.max_wr = 4;
	sx.attr.max_sge = 1;
	sx.comp_mask = IBV_SRQ_INIT_ATTR_PD;
	sx.pd = pdom;
	srqx = ibv_create_srq_ex(ctx, &sx);
	ASSERT_NOT_NULL(srqx);
	memset(&ah, 0, sizeof(ah));
	ah.is_global = 1;
	ah.grh.hop_limit = 1;
	ah.port_num = 1;
	ASSERT_EQ(ibv_query_gid(ctx, 1, 0, &ah.grh.dgid), 0);
	a = ibv_create_ah(pdom, &ah);
	ASSERT_NOT_NULL(a);
	cqx = cq_on(ctx, pdom);
	ASSERT_NOT_NULL(cqx);

	/* used: neither the parent domain nor its PD goes */
	ASSERT_EQ(ibv_dealloc_pd(pdom), EBUSY);
	ASSERT_EQ(ibv_dealloc_pd(pd), EBUSY);
	ASSERT_EQ(ibv_destroy_ah(a), 0);
	ASSERT_EQ(ibv_destroy_srq(srqx), 0);
	ASSERT_EQ(ibv_destroy_srq(srq), 0);
	ASSERT_EQ(ibv_dereg_mr(mr), 0);
	ASSERT_EQ(ibv_destroy_qp(qpx), 0);
	ASSERT_EQ(ibv_destroy_qp(qp), 0);
	ASSERT_EQ(ibv_dealloc_pd(pdom), EBUSY);	/* the CQ still */
	ASSERT_EQ(ibv_destroy_cq(ibv_cq_ex_to_cq(cqx)), 0);
	ASSERT_EQ(ibv_dealloc_pd(pd), EBUSY);	/* the parent domain */
	ASSERT_EQ(ibv_dealloc_pd(pdom), 0);
	ASSERT_EQ(ibv_dealloc_pd(pd), 0);
	ASSERT_EQ(ibv_destroy_cq(cq), 0);
	ASSERT_EQ(ibv_close_device(ctx), 0);
}

/*
 * Handles (issue 12, docs/conformance.md "Handles"): a parent domain
 * that was deallocated or whose handle was changed is a PD that is not
 * live -- refused by the creates that take it (the ioctl ones ENOENT,
 * REG_MR EINVAL, the CQ's parent domain EINVAL as mlx5 answers a wrong
 * one) -- and a TD or PD that is not live makes no parent domain.
 */
TEST(pdom_and_td_not_live)
{
	struct ibv_context *ctx = open_lo();
	struct ibv_td_init_attr ta = { .comp_mask = 0 };
	struct ibv_pd *pd = ibv_alloc_pd(ctx), *dpd = ibv_alloc_pd(ctx);
	struct ibv_td *td = ibv_alloc_td(ctx, &ta);
	struct ibv_cq *cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	struct ibv_parent_domain_init_attr pa = pdom_attr(pd, NULL);
	struct ibv_pd *pdom = ibv_alloc_parent_domain(ctx, &pa), *live;
	static char buf[64];
	uint32_t h;

	ASSERT_NOT_NULL(pdom);
	ASSERT_NOT_NULL(dpd);
	ASSERT_NOT_NULL(td);
	ASSERT_NOT_NULL(cq);
	/* a garbled handle: no destroy, no create */
	h = pdom->handle;
	pdom->handle = h ^ 1;
	ASSERT_EQ(ibv_dealloc_pd(pdom), ENOENT);
	ASSERT_NULL_ERRNO(rc_qp(pdom, cq), ENOENT);
	ASSERT_NULL_ERRNO(ibv_reg_mr(pdom, buf, sizeof(buf), 0), EINVAL);
	ASSERT_NULL_ERRNO(cq_on(ctx, pdom), EINVAL);
	pdom->handle = h;
	/* deallocated: the same */
	ASSERT_EQ(ibv_dealloc_pd(pdom), 0);
	ASSERT_EQ(ibv_dealloc_pd(pdom), ENOENT);
	ASSERT_EQ(errno, ENOENT);
	ASSERT_NULL_ERRNO(rc_qp(pdom, cq), ENOENT);
	ASSERT_NULL_ERRNO(ibv_reg_mr(pdom, buf, sizeof(buf), 0), EINVAL);
	ASSERT_NULL_ERRNO(cq_on(ctx, pdom), EINVAL);
	/* a TD or a PD that is not live */
	ASSERT_EQ(ibv_dealloc_pd(dpd), 0);
	pa = pdom_attr(dpd, NULL);
	ASSERT_NULL_ERRNO(ibv_alloc_parent_domain(ctx, &pa), EINVAL);
	ASSERT_EQ(ibv_dealloc_td(td), 0);
	pa = pdom_attr(pd, NULL);
	pa.td = td;
	ASSERT_NULL_ERRNO(ibv_alloc_parent_domain(ctx, &pa), EINVAL);
	/* the PD it was made of is free and whole */
	pa.td = NULL;
	live = ibv_alloc_parent_domain(ctx, &pa);
	ASSERT_NOT_NULL(live);
	ASSERT_EQ(ibv_dealloc_pd(live), 0);
	ASSERT_EQ(ibv_destroy_cq(cq), 0);
	ASSERT_EQ(ibv_dealloc_pd(pd), 0);
	ASSERT_EQ(ibv_close_device(ctx), 0);
}

/* IBV_CQ_INIT_ATTR_MASK_PD names a parent domain of the context (mlx5). */
TEST(cq_ex_parent_domain)
{
	struct ibv_context *ctx = open_lo(), *ctx2 = open_lo();
	struct ibv_pd *pd = ibv_alloc_pd(ctx), *pd2 = ibv_alloc_pd(ctx2);
	struct ibv_parent_domain_init_attr pa = pdom_attr(pd2, NULL);
	struct ibv_pd *pdom2 = ibv_alloc_parent_domain(ctx2, &pa);
	struct ibv_cq_ex *cqx;

	ASSERT_NOT_NULL(pdom2);
	ASSERT_NULL_ERRNO(cq_on(ctx, pd), EINVAL);
	ASSERT_NULL_ERRNO(cq_on(ctx, NULL), EINVAL);
	ASSERT_NULL_ERRNO(cq_on(ctx, pdom2), EINVAL);
	cqx = cq_on(ctx2, pdom2);
	ASSERT_NOT_NULL(cqx);
	ASSERT_EQ(ibv_dealloc_pd(pdom2), EBUSY);
	ASSERT_EQ(ibv_destroy_cq(ibv_cq_ex_to_cq(cqx)), 0);
	ASSERT_EQ(ibv_dealloc_pd(pdom2), 0);
	ASSERT_EQ(ibv_dealloc_pd(pd2), 0);
	ASSERT_EQ(ibv_dealloc_pd(pd), 0);
	ASSERT_EQ(ibv_close_device(ctx2), 0);
	ASSERT_EQ(ibv_close_device(ctx), 0);
}

/* ------------------------------------------------------------------ */
/* The allocator                                                       */

TEST(allocator_send_ring_only)
{
	struct ibv_context *ctx = open_lo();
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct acount c = { .mode = A_ALIGNED };
	struct ibv_parent_domain_init_attr pa = pdom_attr(pd, &c);
	struct ibv_pd *pdom = ibv_alloc_parent_domain(ctx, &pa);
	struct ibv_srq_init_attr sa;
	struct ibv_cq_ex *cqx;
	struct ibv_qp *qp[3];
	struct ibv_srq *srq;
	int i;

	ASSERT_NOT_NULL(pdom);
	/* CQ and SRQ rings are in the arena: not the allocator's */
	cqx = cq_on(ctx, pdom);
	ASSERT_NOT_NULL(cqx);
	memset(&sa, 0, sizeof(sa));
	sa.attr.max_wr = 4;
	sa.attr.max_sge = 1;
	srq = ibv_create_srq(pdom, &sa);
	ASSERT_NOT_NULL(srq);
	ASSERT_EQ(c.allocs, 0);
	/* one send ring per QP */
	for (i = 0; i < 3; i++) {
		qp[i] = rc_qp(pdom, ibv_cq_ex_to_cq(cqx));
		ASSERT_NOT_NULL(qp[i]);
		ASSERT_EQ(c.allocs, i + 1);
		ASSERT(c.pd_seen == pdom);
		ASSERT(c.size > 0);
		ASSERT_EQ(c.align, (size_t)sysconf(_SC_PAGESIZE));
		ASSERT_U64_EQ(c.type, RES_TYPE_SQ);
	}
	ASSERT_EQ(c.nlive, 3);
	/* a QP of the plain PD does not ask it */
	{
		struct ibv_qp *plain = rc_qp(pd, ibv_cq_ex_to_cq(cqx));

		ASSERT_NOT_NULL(plain);
		ASSERT_EQ(c.allocs, 3);
		ASSERT_EQ(ibv_destroy_qp(plain), 0);
	}
	/* free once each, with what alloc returned */
	for (i = 0; i < 3; i++) {
		ASSERT_EQ(ibv_destroy_qp(qp[i]), 0);
		ASSERT_EQ(c.frees, i + 1);
	}
	ASSERT_EQ(c.bad_frees, 0);
	ASSERT_EQ(c.nlive, 0);
	ASSERT_EQ(ibv_destroy_srq(srq), 0);
	ASSERT_EQ(ibv_destroy_cq(ibv_cq_ex_to_cq(cqx)), 0);
	ASSERT_EQ(ibv_dealloc_pd(pdom), 0);
	ASSERT_EQ(ibv_dealloc_pd(pd), 0);
	ASSERT_EQ(c.frees, 3);
	ASSERT_EQ(ibv_close_device(ctx), 0);
}

/* IBV_ALLOCATOR_USE_DEFAULT: softhca's own memory, and no free call. */
TEST(allocator_use_default)
{
	struct ibv_context *ctx = open_lo();
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct acount c = { .mode = A_DEFAULT };
	struct ibv_parent_domain_init_attr pa = pdom_attr(pd, &c);
	struct ibv_pd *pdom = ibv_alloc_parent_domain(ctx, &pa);
	struct ibv_cq *cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	struct ibv_qp *qp;

	ASSERT_NOT_NULL(pdom);
	qp = rc_qp(pdom, cq);
	ASSERT_NOT_NULL(qp);
	ASSERT_EQ(c.allocs, 1);
	ASSERT_EQ(ibv_destroy_qp(qp), 0);
	ASSERT_EQ(c.frees, 0);
	ASSERT_EQ(ibv_destroy_cq(cq), 0);
	ASSERT_EQ(ibv_dealloc_pd(pdom), 0);
	ASSERT_EQ(ibv_dealloc_pd(pd), 0);
	ASSERT_EQ(ibv_close_device(ctx), 0);
}

/* NULL: the create fails (ENOMEM), nothing to free; a buffer softhca
 * cannot use goes back to free once, and the create fails (EINVAL). */
TEST(allocator_failures)
{
	struct ibv_context *ctx = open_lo();
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct acount c = { .mode = A_NULL };
	struct ibv_parent_domain_init_attr pa = pdom_attr(pd, &c);
	struct ibv_pd *pdom = ibv_alloc_parent_domain(ctx, &pa);
	struct ibv_cq *cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	struct ibv_qp *qp;

	ASSERT_NOT_NULL(pdom);
	ASSERT_NULL_ERRNO(rc_qp(pdom, cq), ENOMEM);
	ASSERT_EQ(c.allocs, 1);
	ASSERT_EQ(c.frees, 0);
	c.mode = A_MISALIGNED;
	ASSERT_NULL_ERRNO(rc_qp(pdom, cq), EINVAL);
	ASSERT_EQ(c.allocs, 2);
	ASSERT_EQ(c.frees, 1);
	ASSERT_EQ(c.bad_frees, 0);
	/* and the parent domain is not left busy by the failures */
	c.mode = A_ALIGNED;
	qp = rc_qp(pdom, cq);
	ASSERT_NOT_NULL(qp);
	ASSERT_EQ(ibv_destroy_qp(qp), 0);
	ASSERT_EQ(ibv_dealloc_pd(pdom), 0);
	ASSERT_EQ(ibv_dealloc_pd(pd), 0);
	ASSERT_EQ(ibv_destroy_cq(cq), 0);
	ASSERT_EQ(c.allocs, 3);
	ASSERT_EQ(c.frees, 2);
	ASSERT_EQ(ibv_close_device(ctx), 0);
}

/* A context closed with a QP on a parent domain (and the TD, the PDs)
 * still open: all go, the send ring back to its allocator. */
TEST(close_device_frees_what_is_left)
{
	struct ibv_context *ctx = open_lo();
	struct ibv_td_init_attr ta = { .comp_mask = 0 };
	struct ibv_td *td = ibv_alloc_td(ctx, &ta);
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct acount c = { .mode = A_ALIGNED };
	struct ibv_parent_domain_init_attr pa = pdom_attr(pd, &c);
	struct ibv_pd *pdom;
	struct ibv_cq_ex *cqx;

	ASSERT_NOT_NULL(td);
	pa.td = td;
	pdom = ibv_alloc_parent_domain(ctx, &pa);
	ASSERT_NOT_NULL(pdom);
	cqx = cq_on(ctx, pdom);
	ASSERT_NOT_NULL(cqx);
	ASSERT_NOT_NULL(rc_qp(pdom, ibv_cq_ex_to_cq(cqx)));
	ASSERT_EQ(c.allocs, 1);
	ASSERT_EQ(ibv_close_device(ctx), 0);
	ASSERT_EQ(c.frees, 1);
	ASSERT_EQ(c.bad_frees, 0);
}

/* ------------------------------------------------------------------ */
/* Traffic                                                             */

#define MSG	1000u
#define SRC	0u		/* the sender's message */
#define RECV	8192u		/* where a SEND lands */
#define WDST	16384u		/* where the RDMA WRITE lands */
#define RSRC	24576u		/* what the RDMA READ fetches */

struct keys {
	uint32_t base_rkey;	/* an MR of the same buffer on the plain PD */
};

static struct acount side_count = { .mode = A_ALIGNED };

/* RC endpoints whose objects are all on a parent domain with the
 * counting allocator, CQs ex on it too. */
static void pdom_opts(struct ep_opts *o,
		      struct ibv_parent_domain_init_attr *pa)
{
	ep_default_opts(o, IBV_QPT_RC);
	o->buf_size = 32768;
	o->wc_flags = IBV_WC_STANDARD_FLAGS;
	*pa = pdom_attr(NULL, &side_count);
	o->pdom = pa;
}

static void check_sentinel_around(const uint8_t *buf, uint64_t off,
				  uint32_t seed)
{
	ASSERT_EQ(ep_find_pattern_diff(buf + off, MSG, seed, 0), -1);
	ASSERT_EQ(ep_find_non_sentinel(buf + off + MSG, 64), -1);
	ASSERT_EQ(ep_find_non_sentinel(buf + off - 64, 64), -1);
}

/* The passive side: a SEND arrives, a WRITE lands, a READ is served. */
static void responder(int fd, void *arg)
{
	struct ibv_parent_domain_init_attr pa;
	struct ibv_mr *base_mr;
	struct ep_opts o;
	struct keys k;
	struct ep b;

	(void)arg;
	pdom_opts(&o, &pa);
	ep_open_remote(&b, &o, fd);
	ASSERT_EQ(side_count.allocs, 1);
	memset(b.buf, EP_SENTINEL, b.size);
	ep_fill_pattern(b.buf + RSRC, MSG, 3, 0);
	/* the peer writes through the key of an MR on the plain PD: one
	 * protection domain with the parent domain */
	base_mr = ibv_reg_mr(b.base_pd, b.buf, b.size,
			     IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	ASSERT_NOT_NULL(base_mr);
	k.base_rkey = base_mr->rkey;
	ASSERT_EQ(ep_post_recv(&b, 7, RECV, MSG), 0);
	xwrite(fd, &k, sizeof(k));
	duo_expect(fd, 's');
	{
		struct ibv_wc wc = ep_expect(b.rcq, b.qp, 7, IBV_WC_SUCCESS);

		ASSERT_EQ(wc.byte_len, MSG);
	}
	check_sentinel_around(b.buf, RECV, 1);
	duo_expect(fd, 'w');
	check_sentinel_around(b.buf, WDST, 2);
	duo_signal(fd, 'c');
	duo_expect(fd, 'd');
	ASSERT_EQ(ibv_dereg_mr(base_mr), 0);
	ep_destroy(&b);
	ASSERT_EQ(side_count.frees, 1);
	ASSERT_EQ(side_count.bad_frees, 0);
}

static void traffic(bool net)
{
	struct ibv_parent_domain_init_attr pa;
	struct ibv_mr *base_mr, *other_mr;
	struct ibv_send_wr wr, *bad;
	struct ibv_pd *other;
	struct ibv_sge sge;
	struct ep_opts o;
	struct keys k;
	struct duo d;
	struct ep a;

	if (net)
		setenv("SOFTHCA_NET", "1", 1);
	else
		unsetenv("SOFTHCA_NET");
	duo_fork(&d, responder, NULL);
	pdom_opts(&o, &pa);
	ep_open_remote(&a, &o, d.fd);
	ASSERT_EQ(side_count.allocs, 1);
	xread(d.fd, &k, sizeof(k));
	memset(a.buf, EP_SENTINEL, a.size);
	ep_fill_pattern(a.buf + SRC, MSG, 1, 0);
	ep_fill_pattern(a.buf + SRC + MSG, MSG, 2, 0);

	/* SEND with the L_Key of the parent domain's MR */
	ASSERT_EQ(ep_post(&a, 1, IBV_WR_SEND, SRC, MSG, 0, 0), 0);
	ep_expect(a.scq, a.qp, 1, IBV_WC_SUCCESS);
	duo_signal(d.fd, 's');

	/* RDMA WRITE from an MR on the plain PD, to the peer's plain-PD
	 * MR: the QP on the parent domain uses both */
	base_mr = ibv_reg_mr(a.base_pd, a.buf, a.size, IBV_ACCESS_LOCAL_WRITE);
	ASSERT_NOT_NULL(base_mr);
	memset(&wr, 0, sizeof(wr));
	sge.addr = (uintptr_t)a.buf + SRC + MSG;
	sge.length = MSG;
	sge.lkey = base_mr->lkey;
	wr.wr_id = 2;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_RDMA_WRITE;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.wr.rdma.remote_addr = a.peer.addr + WDST;
	wr.wr.rdma.rkey = k.base_rkey;
	ASSERT_EQ(ibv_post_send(a.qp, &wr, &bad), 0);
	ep_expect(a.scq, a.qp, 2, IBV_WC_SUCCESS);
	duo_signal(d.fd, 'w');
	duo_expect(d.fd, 'c');

	/* RDMA READ into the parent domain's MR */
	ASSERT_EQ(ep_post(&a, 3, IBV_WR_RDMA_READ, RECV, MSG, RSRC, 0), 0);
	ep_expect(a.scq, a.qp, 3, IBV_WC_SUCCESS);
	check_sentinel_around(a.buf, RECV, 3);

	/* an MR of another PD is no key of this QP's */
	other = ibv_alloc_pd(a.ctx);
	ASSERT_NOT_NULL(other);
	other_mr = ibv_reg_mr(other, a.buf, a.size, IBV_ACCESS_LOCAL_WRITE);
	ASSERT_NOT_NULL(other_mr);
	sge.lkey = other_mr->lkey;
	wr.wr_id = 4;
	wr.opcode = IBV_WR_SEND;
	ASSERT_EQ(ibv_post_send(a.qp, &wr, &bad), 0);
	ep_expect(a.scq, a.qp, 4, IBV_WC_LOC_PROT_ERR);

	if (net)
		ASSERT_GT(ep_tcp_bytes(), 0);
	duo_signal(d.fd, 'd');
	duo_wait(&d);
	ASSERT_EQ(ibv_dereg_mr(other_mr), 0);
	ASSERT_EQ(ibv_dealloc_pd(other), 0);
	ASSERT_EQ(ibv_dereg_mr(base_mr), 0);
	ep_destroy(&a);
	ASSERT_EQ(side_count.frees, 1);
	ASSERT_EQ(side_count.bad_frees, 0);
}

TEST(traffic_same_host)
{
	traffic(false);
}

TEST(traffic_net)
{
	traffic(true);
}
