// SPDX-License-Identifier: MIT
/*
 * Thread domains and parent domains (man ibv_alloc_td,
 * ibv_alloc_parent_domain; docs/parent-domain.md).
 *
 * A parent domain is a PD (struct shca_pd, a handle of its own in the PD
 * table) that contains another PD, prot, and optionally a thread domain
 * and a custom allocator.  Every verb that takes a PD takes it; protection
 * (MR keys, the QP's and SRQ's PD in the arena) is checked against prot,
 * so an MR registered on the parent domain serves a QP of the plain PD and
 * the other way round, as on mlx5, where both carry the same kernel PD.
 * Objects created on it hold a use of it (ibv_dealloc_pd: EBUSY), and it
 * holds one of its PD and TD (their dealloc: EBUSY too).
 *
 * The allocator provides the queue memory that is the process's own: a
 * QP's send ring, which only this process reads (the requester runs here).
 * Receive rings, SRQ rings and CQ rings live in the arena, because peers
 * on this host take receive WQEs and write completions there; memory an
 * application allocated cannot be shared with them, so it is not asked
 * for those.
 *
 * A thread domain changes no locking: the application's one thread is not
 * alone with its queues, softhca's engine thread completes, retries and
 * flushes them too, so the QP's locks stay.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "shca.h"

/* What softhca's queue structures need (uint64_t, pointers): less is
 * refused, since the ring would be read misaligned. */
#define QBUF_MIN_ALIGN	16u

/* ------------------------------------------------------------------ */
/* Thread domains                                                      */

/* No comp_mask bit is defined: any is EINVAL, as mlx5_alloc_td. */
struct ibv_td *shca_alloc_td(struct ibv_context *ctx,
			     struct ibv_td_init_attr *attr)
{
	struct shca_td *td;
	int ret;

	if (!shca_ctx_live(ctx))
		return SHCA_ERR_PTR(EBADF);
	if (!attr || attr->comp_mask)
		return SHCA_ERR_PTR(EINVAL);
	td = calloc(1, sizeof(*td));
	if (!td)
		return SHCA_ERR_PTR(ENOMEM);
	ret = shca_obj_add(&td->obj, SHCA_OT_TD, ctx, &td->ibtd, &td->handle);
	if (ret) {
		free(td);
		return SHCA_ERR_PTR(-ret);
	}
	td->ibtd.context = ctx;
	return &td->ibtd;
}

/* td holds a use (shca_td_lookup), which this consumes; EBUSY while a
 * parent domain holds it (mlx5_dealloc_td). */
int shca_td_destroy(struct shca_td *td)
{
	int ret = shca_obj_claim(&td->obj, &td->refs);

	if (ret) {
		shca_obj_put(&td->obj);
		return ret;
	}
	shca_obj_retire(&td->obj, td, sizeof(*td));
	return 0;
}

/* A TD that is not live: ENOENT, as the other destroys answer. */
int shca_dealloc_td(struct ibv_td *ibtd)
{
	struct shca_td *td = shca_td_lookup(ibtd, NULL);

	if (!td)
		return shca_ret_errno(-ENOENT);
	return shca_ret_errno(shca_td_destroy(td));
}

/* ------------------------------------------------------------------ */
/* Parent domains                                                      */

#define PDOM_COMP_MASK                                                  \
	(IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS |                       \
	 IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT)

/*
 * The checks of rdma-core (a PD must be given: EINVAL) and of mlx5
 * (comp_mask bits it does not know: EINVAL), and softhca's own, each
 * EINVAL: the PD and TD must be live objects of ctx, the PD a plain one
 * (a parent domain does not nest), ALLOCATORS must bring both functions
 * (mlx5 ignores a half pair; softhca will not silently drop a request).
 * On success *pd and *td hold uses, which the caller puts back.
 */
static int pdom_check(struct ibv_context *ctx,
		      const struct ibv_parent_domain_init_attr *a,
		      struct shca_pd **pd, struct shca_td **td)
{
	*pd = NULL;
	*td = NULL;
	if (!a || !a->pd)
		return -EINVAL;
	if (a->comp_mask & ~(uint32_t)PDOM_COMP_MASK)
		return -EINVAL;
	if ((a->comp_mask & IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS) &&
	    (!a->alloc || !a->free))
		return -EINVAL;
	*pd = shca_pd_lookup(a->pd, ctx);
	if (!*pd)
		return -EINVAL;
	if (shca_pd_is_parent(*pd))
		goto err_pd;
	if (a->td) {
		*td = shca_td_lookup(a->td, ctx);
		if (!*td)
			goto err_pd;
	}
	return 0;

err_pd:
	shca_obj_put(&(*pd)->obj);
	*pd = NULL;
	return -EINVAL;
}

struct ibv_pd *shca_alloc_parent_domain(struct ibv_context *ctx,
					struct ibv_parent_domain_init_attr *a)
{
	struct shca_pd proto;
	struct ibv_pd *ibpd;
	struct shca_pd *pd;
	struct shca_td *td;
	int ret;

	if (!shca_ctx_live(ctx))
		return SHCA_ERR_PTR(EBADF);
	ret = pdom_check(ctx, a, &pd, &td);
	if (ret)
		return SHCA_ERR_PTR(-ret);
	memset(&proto, 0, sizeof(proto));
	proto.prot = pd;
	proto.td = td;
	if (a->comp_mask & IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS) {
		proto.alloc = a->alloc;
		proto.free = a->free;
	}
	if (a->comp_mask & IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT)
		proto.pd_context = a->pd_context;
	/* a PD like any other, counted as one; it takes its uses of pd
	 * and td before anyone can find it */
	ibpd = shca_pd_create(ctx, &proto);
	if (td)
		shca_obj_put(&td->obj);
	shca_obj_put(&pd->obj);
	return ibpd;
}

/* ------------------------------------------------------------------ */
/* Queue memory                                                        */

/*
 * The man page: alloc returns the buffer, NULL for an error, or
 * IBV_ALLOCATOR_USE_DEFAULT (then softhca allocates it, and free is not
 * called for it); free is called once for each buffer alloc returned.
 * The callback is to zero the buffer; softhca zeroes it again rather than
 * trust that (pyverbs' posix_memalign allocator does not).  A buffer less
 * aligned than softhca's rings need goes back to free, and the create
 * fails with EINVAL.
 */
int shca_qbuf_alloc(struct shca_qbuf *b, struct shca_pd *pd, size_t size,
		    size_t align, uint64_t type)
{
	void *p;

	memset(b, 0, sizeof(*b));
	if (pd && pd->alloc) {
		p = pd->alloc(&pd->ibpd, pd->pd_context, size, align, type);
		if (p != IBV_ALLOCATOR_USE_DEFAULT) {
			if (!p)
				return -ENOMEM;
			if ((uintptr_t)p & (QBUF_MIN_ALIGN - 1)) {
				pd->free(&pd->ibpd, pd->pd_context, p, type);
				return -EINVAL;
			}
			memset(p, 0, size);
			b->addr = p;
			b->pd = pd;
			b->type = type;
			return 0;
		}
	}
	b->addr = calloc(1, size);
	return b->addr ? 0 : -ENOMEM;
}

void shca_qbuf_free(struct shca_qbuf *b)
{
	if (!b->addr)
		return;
	if (b->pd)
		b->pd->free(&b->pd->ibpd, b->pd->pd_context, b->addr, b->type);
	else
		free(b->addr);
	b->addr = NULL;
	b->pd = NULL;
}
