// SPDX-License-Identifier: MIT
/*
 * Protection domains.  A PD counts the objects created in it (MRs, QPs,
 * SRQs, AHs, parent domains, and CQs on a parent domain); deallocating
 * a PD that still has any fails with EBUSY, as the kernel's uverbs
 * reports it.  Its handle (handle.c) is unique in the
 * process, so the arena's MR and QP entries name a PD by it.
 */
#include <errno.h>
#include <stdlib.h>

#include "shca.h"

void shca_pd_get(struct shca_pd *pd)
{
	__atomic_add_fetch(&pd->refs, 1, __ATOMIC_RELAXED);
}

void shca_pd_put(struct shca_pd *pd)
{
	__atomic_sub_fetch(&pd->refs, 1, __ATOMIC_RELAXED);
}

/* A parent domain lets go of its PD and TD. */
static void pdom_release(struct shca_pd *pd)
{
	if (pd->td)
		__atomic_sub_fetch(&pd->td->refs, 1, __ATOMIC_RELEASE);
	shca_pd_put(pd->prot);
}

/*
 * A PD, or with proto a parent domain (pdom.c) whose prot, td and
 * allocator proto gives: the new one holds a use of prot and td from
 * before it is findable.
 */
struct ibv_pd *shca_pd_create(struct ibv_context *ctx,
			      const struct shca_pd *proto)
{
	struct shca_context *sctx = to_sctx(ctx);
	struct shca_pd *pd;
	int ret;

	pthread_mutex_lock(&sctx->lock);
	if (sctx->npd >= SHCA_MAX_PD) {
		pthread_mutex_unlock(&sctx->lock);
		return SHCA_ERR_PTR(ENOMEM);
	}
	sctx->npd++;
	pthread_mutex_unlock(&sctx->lock);

	pd = calloc(1, sizeof(*pd));
	if (pd) {
		pd->prot = pd;
		if (proto) {
			pd->prot = proto->prot;
			pd->td = proto->td;
			pd->alloc = proto->alloc;
			pd->free = proto->free;
			pd->pd_context = proto->pd_context;
			shca_pd_get(pd->prot);
			if (pd->td)
				__atomic_add_fetch(&pd->td->refs, 1,
						   __ATOMIC_RELAXED);
		}
	}
	ret = pd ? shca_obj_add(&pd->obj, SHCA_OT_PD, ctx, &pd->ibpd,
				&pd->ibpd.handle) : -ENOMEM;
	if (ret) {
		if (pd && shca_pd_is_parent(pd))
			pdom_release(pd);
		free(pd);
		pthread_mutex_lock(&sctx->lock);
		sctx->npd--;
		pthread_mutex_unlock(&sctx->lock);
		return SHCA_ERR_PTR(-ret);
	}
	pd->ibpd.context = ctx;
	return &pd->ibpd;
}

/* A context that is not open: its uverbs file would be closed. */
struct ibv_pd *shca_alloc_pd(struct ibv_context *ctx)
{
	if (!shca_ctx_live(ctx))
		return SHCA_ERR_PTR(EBADF);
	/* from its first PD on, a process answers importers of its
	 * command files (import_rem.c; docs/import.md) */
	if (shca_transport_init())
		shca_dbg("no peer socket: imports by other processes fail");
	return shca_pd_create(ctx, NULL);
}

/* pd holds a use (shca_pd_lookup), which this consumes.  A parent domain
 * is deallocated the same way (man ibv_alloc_parent_domain). */
int shca_pd_destroy(struct shca_pd *pd)
{
	struct shca_context *sctx = to_sctx(pd->obj.ctx);
	int ret;

	ret = shca_obj_claim(&pd->obj, &pd->refs);
	if (ret) {
		shca_obj_put(&pd->obj);
		return ret;
	}
	if (shca_pd_is_parent(pd)) {
		pdom_release(pd);
	} else if (pd->remote) {
		/* a shadow (docs/import.md): the owner forgets it */
		struct shca_rfile *rf =
			sctx->ufile ? shca_ufile_rfile(sctx->ufile) : NULL;

		if (rf)
			shca_rimport_pd_shadow(rf, 0, pd->obj.handle, true);
	} else {
		/* ours: who imported it is forgotten */
		shca_rimport_pd_gone(pd->obj.handle);
	}
	pthread_mutex_lock(&sctx->lock);
	sctx->npd--;
	pthread_mutex_unlock(&sctx->lock);
	shca_obj_retire(&pd->obj, pd, sizeof(*pd));
	return 0;
}

/* A handle that names no PD: ENOENT, as the kernel's object lookup. */
int shca_dealloc_pd(struct ibv_pd *ibpd)
{
	struct shca_pd *pd;
	uint32_t h;
	int ret;

	/* the PD of another process: its owner destroys it (docs/import.md) */
	if (shca_import_ahandle(ibpd, SHCA_OT_PD, &h))
		return shca_rimport_destroy(ibpd, SHCA_OT_PD);
	pd = shca_pd_lookup(ibpd, NULL);
	if (!pd)
		return -ENOENT;
	ret = shca_pd_destroy(pd);
	if (!ret)
		shca_import_destroyed(ibpd);
	return ret;
}

SHCA_DEFAULT_VERSION(ibv_alloc_pd)
struct ibv_pd *shca_latest_ibv_alloc_pd(struct ibv_context *context)
{
	return shca_alloc_pd(context);
}

SHCA_DEFAULT_VERSION(ibv_dealloc_pd)
int shca_latest_ibv_dealloc_pd(struct ibv_pd *pd)
{
	return shca_ret_errno(shca_dealloc_pd(pd));
}
