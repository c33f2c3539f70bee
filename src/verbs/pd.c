// SPDX-License-Identifier: MIT
/*
 * Protection domains.  A PD counts the objects created in it (MRs, QPs,
 * SRQs, AHs); deallocating a PD that still has any fails with EBUSY, as the
 * kernel's uverbs reports it.
 */
#include <errno.h>
#include <stdlib.h>

#include "shca.h"

static uint32_t next_pd_handle = 1;

void shca_pd_get(struct shca_pd *pd)
{
	__atomic_add_fetch(&pd->refs, 1, __ATOMIC_RELAXED);
}

void shca_pd_put(struct shca_pd *pd)
{
	__atomic_sub_fetch(&pd->refs, 1, __ATOMIC_RELAXED);
}

struct ibv_pd *shca_alloc_pd(struct ibv_context *ctx)
{
	struct shca_context *sctx = to_sctx(ctx);
	struct shca_pd *pd;

	pthread_mutex_lock(&sctx->lock);
	if (sctx->npd >= SHCA_MAX_PD) {
		pthread_mutex_unlock(&sctx->lock);
		return SHCA_ERR_PTR(ENOMEM);
	}
	sctx->npd++;
	pthread_mutex_unlock(&sctx->lock);

	pd = calloc(1, sizeof(*pd));
	if (!pd) {
		pthread_mutex_lock(&sctx->lock);
		sctx->npd--;
		pthread_mutex_unlock(&sctx->lock);
		return SHCA_ERR_PTR(ENOMEM);
	}
	pd->ibpd.context = ctx;
	pd->ibpd.handle = __atomic_fetch_add(&next_pd_handle, 1,
					     __ATOMIC_RELAXED);
	return &pd->ibpd;
}

int shca_dealloc_pd(struct ibv_pd *ibpd)
{
	struct shca_pd *pd = to_spd(ibpd);
	struct shca_context *sctx = to_sctx(ibpd->context);

	if (__atomic_load_n(&pd->refs, __ATOMIC_ACQUIRE))
		return -EBUSY;
	pthread_mutex_lock(&sctx->lock);
	sctx->npd--;
	pthread_mutex_unlock(&sctx->lock);
	free(pd);
	return 0;
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
