// SPDX-License-Identifier: MIT
/*
 * Shared receive queues, and the receive ring that a QP's receive queue and
 * an SRQ share.
 *
 * A ring holds up to max_wr WQEs; max_wr is what the client asked for,
 * rounded up to a power of two, and is what the verbs report back (an SRQ
 * asked for 100 WQEs holds 128).  An SRQ's srq_limit arms the "low
 * watermark": once fewer than srq_limit WQEs remain, the SRQ raises
 * IBV_EVENT_SRQ_LIMIT_REACHED once and disarms (srq_limit reads 0 again)
 * until ibv_modify_srq arms it anew.  The create value arms it too, as
 * rxe does.  ibv_modify_srq with IBV_SRQ_MAX_WR resizes the ring
 * (IBV_DEVICE_SRQ_RESIZE); the WQEs it holds stay, in order.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "shca.h"

static uint32_t next_srq_handle = 1;

/* ------------------------------------------------------------------ */
/* Receive rings                                                       */

static struct shca_recv_wqe *rq_entry(const struct shca_rq *rq, uint32_t n)
{
	return (struct shca_recv_wqe *)(rq->buf +
					(size_t)(n & (rq->size - 1)) *
						rq->wqe_size);
}

static unsigned char *rq_alloc_buf(uint32_t size, size_t wqe_size)
{
	return calloc(size, wqe_size);
}

int shca_rq_init(struct shca_rq *rq, uint32_t max_wr, uint32_t max_sge)
{
	memset(rq, 0, sizeof(*rq));
	rq->max_wr = max_wr;
	rq->max_sge = max_sge;
	rq->size = shca_roundup_pow2(max_wr);
	rq->wqe_size = sizeof(struct shca_recv_wqe) +
		       (size_t)max_sge * sizeof(struct ibv_sge);
	rq->buf = rq_alloc_buf(rq->size, rq->wqe_size);
	if (!rq->buf)
		return -ENOMEM;
	pthread_mutex_init(&rq->lock, NULL);
	return 0;
}

void shca_rq_destroy(struct shca_rq *rq)
{
	if (!rq->buf)
		return;
	pthread_mutex_destroy(&rq->lock);
	free(rq->buf);
	rq->buf = NULL;
}

/* As rxe checks a receive WR: a full queue first, then its SGE count. */
int shca_rq_post_one(struct shca_rq *rq, const struct ibv_recv_wr *wr)
{
	struct shca_recv_wqe *wqe;

	if (rq->tail - rq->head >= rq->max_wr)
		return -ENOMEM;
	if (wr->num_sge < 0 || (uint32_t)wr->num_sge > rq->max_sge ||
	    (wr->num_sge && !wr->sg_list))
		return -EINVAL;
	wqe = rq_entry(rq, rq->tail);
	wqe->wr_id = wr->wr_id;
	wqe->num_sge = (uint32_t)wr->num_sge;
	if (wr->num_sge)
		memcpy(wqe->sge, wr->sg_list,
		       (size_t)wr->num_sge * sizeof(struct ibv_sge));
	__atomic_store_n(&rq->tail, rq->tail + 1, __ATOMIC_RELEASE);
	return 0;
}

struct shca_recv_wqe *shca_rq_head(struct shca_rq *rq)
{
	return rq->head == rq->tail ? NULL : rq_entry(rq, rq->head);
}

void shca_rq_pop(struct shca_rq *rq)
{
	if (rq->head != rq->tail)
		rq->head++;
}

/*
 * In the Error state every outstanding receive WQE completes with
 * IBV_WC_WR_FLUSH_ERR.  Only wr_id, status, opcode and qp_num are defined
 * for such a completion; the opcode of a receive is IBV_WC_RECV.
 */
void shca_rq_flush(struct shca_rq *rq, struct shca_cq *cq, uint32_t qp_num)
{
	while (rq->head != rq->tail) {
		if (cq) {
			struct ibv_wc wc;

			memset(&wc, 0, sizeof(wc));
			wc.wr_id = rq_entry(rq, rq->head)->wr_id;
			wc.status = IBV_WC_WR_FLUSH_ERR;
			wc.opcode = IBV_WC_RECV;
			wc.qp_num = qp_num;
			shca_cq_push(cq, &wc, false);
		}
		rq->head++;
	}
}

/* Move the WQEs to a ring of max_wr; -EINVAL if they do not fit. */
static int rq_resize(struct shca_rq *rq, uint32_t max_wr)
{
	uint32_t n = rq->tail - rq->head, size, i;
	unsigned char *buf;

	if (n > max_wr)
		return -EINVAL;
	size = shca_roundup_pow2(max_wr);
	buf = rq_alloc_buf(size, rq->wqe_size);
	if (!buf)
		return -ENOMEM;
	for (i = 0; i < n; i++)
		memcpy(buf + (size_t)i * rq->wqe_size,
		       rq_entry(rq, rq->head + i), rq->wqe_size);
	free(rq->buf);
	rq->buf = buf;
	rq->size = size;
	rq->max_wr = max_wr;
	rq->head = 0;
	rq->tail = n;
	return 0;
}

/* ------------------------------------------------------------------ */
/* Create, modify, query, destroy                                      */

/* As rxe_srq_chk_init: sizes within the device's limits, max_wr >= 1. */
static int srq_check_init(const struct ibv_srq_attr *a)
{
	if (a->max_wr == 0 || a->max_wr > SHCA_MAX_SRQ_WR)
		return -EINVAL;
	if (a->max_sge > SHCA_MAX_SRQ_SGE)
		return -EINVAL;
	if (a->srq_limit > a->max_wr)
		return -EINVAL;
	return 0;
}

static struct shca_srq *srq_create(struct ibv_context *ctx, struct ibv_pd *pd,
				   struct ibv_srq_attr *a, void *srq_context)
{
	struct shca_context *sctx = to_sctx(ctx);
	struct shca_srq *srq;
	int ret;

	ret = srq_check_init(a);
	if (ret)
		return SHCA_ERR_PTR(-ret);

	pthread_mutex_lock(&sctx->lock);
	if (sctx->nsrq >= SHCA_MAX_SRQ) {
		pthread_mutex_unlock(&sctx->lock);
		return SHCA_ERR_PTR(ENOMEM);
	}
	sctx->nsrq++;
	pthread_mutex_unlock(&sctx->lock);

	srq = calloc(1, sizeof(*srq));
	if (!srq)
		goto err_count;
	if (shca_rq_init(&srq->rq, shca_roundup_pow2(a->max_wr),
			 a->max_sge ? a->max_sge : 1))
		goto err_free;

	srq->ibsrq.context = ctx;
	srq->ibsrq.srq_context = srq_context;
	srq->ibsrq.pd = pd;
	srq->ibsrq.handle = __atomic_fetch_add(&next_srq_handle, 1,
					       __ATOMIC_RELAXED);
	pthread_mutex_init(&srq->ibsrq.mutex, NULL);
	pthread_cond_init(&srq->ibsrq.cond, NULL);
	srq->ibsrq.events_completed = 0;
	srq->pd = to_spd(pd);
	srq->srq_limit = a->srq_limit;
	shca_pd_get(srq->pd);

	/* report what was created */
	a->max_wr = srq->rq.max_wr;
	a->max_sge = srq->rq.max_sge;
	return srq;

err_free:
	free(srq);
err_count:
	pthread_mutex_lock(&sctx->lock);
	sctx->nsrq--;
	pthread_mutex_unlock(&sctx->lock);
	return SHCA_ERR_PTR(ENOMEM);
}

struct ibv_srq *shca_create_srq(struct ibv_pd *pd,
				struct ibv_srq_init_attr *attr)
{
	struct shca_srq *srq;

	if (!pd || !attr)
		return SHCA_ERR_PTR(EINVAL);
	srq = srq_create(pd->context, pd, &attr->attr, attr->srq_context);
	return srq ? &srq->ibsrq : NULL;
}

/*
 * The create_srq_ex op.  The header inline sends plain basic SRQs (PD,
 * maybe TYPE = BASIC) to ibv_create_srq; what reaches here has other
 * bits or another type.
 */
struct ibv_srq *shca_create_srq_ex(struct ibv_context *ctx,
				   struct ibv_srq_init_attr_ex *attr)
{
	enum ibv_srq_type type = IBV_SRQT_BASIC;
	struct shca_srq *srq;

	if (attr->comp_mask & ~(uint32_t)(IBV_SRQ_INIT_ATTR_RESERVED - 1))
		return SHCA_ERR_PTR(EINVAL);
	if (attr->comp_mask & IBV_SRQ_INIT_ATTR_TYPE)
		type = attr->srq_type;
	switch (type) {
	case IBV_SRQT_BASIC:
		break;
	case IBV_SRQT_XRC:
	case IBV_SRQT_TM:
		return SHCA_ERR_PTR(EOPNOTSUPP);	/* no XRC, no TM */
	default:
		return SHCA_ERR_PTR(EINVAL);
	}
	if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_PD) || !attr->pd ||
	    attr->pd->context != ctx)
		return SHCA_ERR_PTR(EINVAL);
	srq = srq_create(ctx, attr->pd, &attr->attr, attr->srq_context);
	return srq ? &srq->ibsrq : NULL;
}

int shca_modify_srq(struct ibv_srq *ibsrq, struct ibv_srq_attr *attr,
		    int mask)
{
	struct shca_srq *srq = to_ssrq(ibsrq);
	struct shca_rq *rq = &srq->rq;
	uint32_t max_wr, limit;
	int ret = 0;

	if (mask & ~(IBV_SRQ_MAX_WR | IBV_SRQ_LIMIT))
		return -EINVAL;
	if ((mask & IBV_SRQ_MAX_WR) &&
	    (attr->max_wr == 0 || attr->max_wr > SHCA_MAX_SRQ_WR))
		return -EINVAL;

	pthread_mutex_lock(&rq->lock);
	/* check */
	max_wr = rq->max_wr;
	if (mask & IBV_SRQ_MAX_WR) {
		max_wr = shca_roundup_pow2(attr->max_wr);
		if (shca_rq_count(rq) > max_wr)
			ret = -EINVAL;	/* would drop posted WQEs */
	}
	limit = (mask & IBV_SRQ_LIMIT) ? attr->srq_limit : srq->srq_limit;
	if (limit > max_wr)
		ret = -EINVAL;
	/* apply */
	if (!ret && (mask & IBV_SRQ_MAX_WR) && max_wr != rq->max_wr)
		ret = rq_resize(rq, max_wr);
	if (!ret && (mask & IBV_SRQ_LIMIT))
		srq->srq_limit = limit;
	pthread_mutex_unlock(&rq->lock);
	return ret;
}

int shca_query_srq(struct ibv_srq *ibsrq, struct ibv_srq_attr *attr)
{
	struct shca_srq *srq = to_ssrq(ibsrq);

	pthread_mutex_lock(&srq->rq.lock);
	attr->max_wr = srq->rq.max_wr;
	attr->max_sge = srq->rq.max_sge;
	attr->srq_limit = srq->srq_limit;
	pthread_mutex_unlock(&srq->rq.lock);
	return 0;
}

int shca_destroy_srq(struct ibv_srq *ibsrq)
{
	struct shca_srq *srq = to_ssrq(ibsrq);
	struct shca_context *sctx = to_sctx(ibsrq->context);

	if (__atomic_load_n(&srq->refs, __ATOMIC_ACQUIRE))
		return -EBUSY;

	/* undelivered events go; delivered ones must be acknowledged */
	shca_async_forget(sctx, srq);
	pthread_mutex_lock(&ibsrq->mutex);
	while (ibsrq->events_completed != srq->events_reported)
		pthread_cond_wait(&ibsrq->cond, &ibsrq->mutex);
	pthread_mutex_unlock(&ibsrq->mutex);

	shca_pd_put(srq->pd);
	shca_rq_destroy(&srq->rq);
	pthread_cond_destroy(&ibsrq->cond);
	pthread_mutex_destroy(&ibsrq->mutex);
	pthread_mutex_lock(&sctx->lock);
	sctx->nsrq--;
	pthread_mutex_unlock(&sctx->lock);
	free(srq);
	return 0;
}

/* ------------------------------------------------------------------ */
/* Posting, and the limit event                                        */

/*
 * Post each WR in turn; on the first that cannot be posted, stop and
 * point *bad at it.  The ones before it stay posted.
 */
int shca_post_srq_recv(struct ibv_srq *ibsrq, struct ibv_recv_wr *wr,
		       struct ibv_recv_wr **bad)
{
	struct shca_rq *rq = &to_ssrq(ibsrq)->rq;
	int ret = 0;

	if (!bad)
		return EINVAL;
	*bad = NULL;
	pthread_mutex_lock(&rq->lock);
	for (; wr; wr = wr->next) {
		ret = shca_rq_post_one(rq, wr);
		if (ret) {
			*bad = wr;
			break;
		}
	}
	pthread_mutex_unlock(&rq->lock);
	return shca_ret_errno(ret);
}

void shca_srq_check_limit(struct shca_srq *srq)
{
	bool fire = false;

	pthread_mutex_lock(&srq->rq.lock);
	if (srq->srq_limit && shca_rq_count(&srq->rq) < srq->srq_limit) {
		srq->srq_limit = 0;	/* disarmed until modified again */
		fire = true;
	}
	pthread_mutex_unlock(&srq->rq.lock);
	if (fire)
		shca_async_event(to_sctx(srq->ibsrq.context),
				 IBV_EVENT_SRQ_LIMIT_REACHED, srq);
}

/* ------------------------------------------------------------------ */
/* Exported verbs                                                      */

SHCA_DEFAULT_VERSION(ibv_create_srq)
struct ibv_srq *shca_latest_ibv_create_srq(struct ibv_pd *pd,
					   struct ibv_srq_init_attr *attr)
{
	return shca_create_srq(pd, attr);
}

SHCA_DEFAULT_VERSION(ibv_modify_srq)
int shca_latest_ibv_modify_srq(struct ibv_srq *srq, struct ibv_srq_attr *attr,
			       int mask)
{
	return shca_ret_errno(shca_modify_srq(srq, attr, mask));
}

SHCA_DEFAULT_VERSION(ibv_query_srq)
int shca_latest_ibv_query_srq(struct ibv_srq *srq, struct ibv_srq_attr *attr)
{
	return shca_ret_errno(shca_query_srq(srq, attr));
}

SHCA_DEFAULT_VERSION(ibv_destroy_srq)
int shca_latest_ibv_destroy_srq(struct ibv_srq *srq)
{
	return shca_ret_errno(shca_destroy_srq(srq));
}
