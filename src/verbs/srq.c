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
#include "../shm/queues.h"

static pthread_mutex_t srq_list_lock = PTHREAD_MUTEX_INITIALIZER;
static struct shca_srq *srq_list;

/* Peers that took WQEs below the limit left a mark: report the event. */
void shca_srq_doorbell(void)
{
	struct shca_srq *srq;

	pthread_mutex_lock(&srq_list_lock);
	for (srq = srq_list; srq; srq = srq->next)
		if (__atomic_exchange_n(&srq->rq.shm->limit_pending, 0,
					__ATOMIC_ACQ_REL))
			shca_srq_check_limit(srq);
	pthread_mutex_unlock(&srq_list_lock);
}

/*
 * The PD of this process's XRC SRQ srqn of domain xrcd, or NULL: what the
 * net path's READ responses check R_Keys against as they go (an XRC_RECV
 * QP has no PD; the SRQ's is the spec's).  srqn came from a peer: found
 * only among our own SRQs, and only in the QP's domain.
 */
struct shca_pd *shca_xsrq_pd(uint32_t srqn, uint64_t xrcd)
{
	struct shca_srq *srq;
	struct shca_pd *pd = NULL;

	pthread_mutex_lock(&srq_list_lock);
	for (srq = srq_list; srq; srq = srq->next)
		if (srq->xrcd && srq->srqn == srqn && srq->xrcd->id == xrcd) {
			pd = srq->pd;
			break;
		}
	pthread_mutex_unlock(&srq_list_lock);
	return pd;
}

/* ------------------------------------------------------------------ */
/* Receive rings                                                       */

/*
 * The ring lives in the process arena (shca_rq_shm), where peers on this
 * host take WQEs under its robust lock; rq->lock orders this process's
 * producers (post_recv) and owner-side changes (resize, limit).
 */
int shca_rq_init(struct shca_rq *rq, uint32_t max_wr, uint32_t max_sge)
{
	int ret;

	memset(rq, 0, sizeof(*rq));
	rq->max_wr = max_wr;
	rq->max_sge = max_sge;
	rq->shm = shca_arena_alloc(sizeof(*rq->shm));
	if (!rq->shm)
		return -ENOMEM;
	ret = shca_rqshm_init(rq->shm, max_wr, max_sge, &rq->ring);
	if (ret) {
		shca_arena_free(rq->shm);
		rq->shm = NULL;
		return ret;
	}
	pthread_mutex_init(&rq->lock, NULL);
	return 0;
}

void shca_rq_destroy(struct shca_rq *rq)
{
	if (!rq->shm)
		return;
	/* the bounces of WQEs no one took (import_key.c) */
	shca_rq_flush(rq, NULL, 0);
	pthread_mutex_destroy(&rq->lock);
	shca_rqshm_fini(rq->shm, &rq->ring);
	shca_arena_free(rq->shm);
	rq->shm = NULL;
}

/* As rxe checks a receive WR: a full queue first, then its SGE count. */
int shca_rq_post_imp(struct shca_rq *rq, const struct ibv_recv_wr *wr,
		     uint32_t tag)
{
	if (!rq->shm || shca_rqshm_full(rq->shm, &rq->head_seen, rq->max_wr))
		return -ENOMEM;
	if (wr->num_sge < 0 || (uint32_t)wr->num_sge > rq->max_sge ||
	    (wr->num_sge && !wr->sg_list))
		return -EINVAL;
	return shca_rqshm_post(rq->shm, &rq->ring, &rq->head_seen, wr, tag);
}

int shca_rq_post_one(struct shca_rq *rq, const struct ibv_recv_wr *wr)
{
	return shca_rq_post_imp(rq, wr, 0);
}

uint32_t shca_rq_count(const struct shca_rq *rq)
{
	return rq->shm ? shca_rqshm_count(rq->shm) : 0;
}

/*
 * In the Error state every outstanding receive WQE completes with
 * IBV_WC_WR_FLUSH_ERR.  Only wr_id, status, opcode and qp_num are defined
 * for such a completion; the opcode of a receive is IBV_WC_RECV.  A WQE
 * with a bounce (import_key.c) passes its tag on, or, with no CQ (the
 * ring dropped), its record goes now.
 */
void shca_rq_flush(struct shca_rq *rq, struct shca_cq *cq, uint32_t qp_num)
{
	struct shca_arena *a = shca_arena_self();
	struct shca_recv_wqe_shm *w;
	uint32_t nsge;

	if (!rq->shm)
		return;
	shca_plock_lock(&rq->shm->lock);
	while ((w = shca_rqshm_peek(a->base, a->size, rq->shm,
					&nsge))) {
		if (cq) {
			struct ibv_wc wc;

			memset(&wc, 0, sizeof(wc));
			wc.wr_id = w->wr_id;
			wc.status = IBV_WC_WR_FLUSH_ERR;
			wc.opcode = IBV_WC_RECV;
			wc.qp_num = qp_num;
			wc.vendor_err = w->imp;
			if (shca_cq_push(cq, &wc, false))
				shca_imp_drop(w->imp, true);
		} else if (w->imp) {
			shca_imp_drop(w->imp, true);
		}
		shca_rqshm_pop(rq->shm);
	}
	shca_plock_unlock(&rq->shm->lock);
}

/* Move the WQEs to a ring of max_wr; -EINVAL if they do not fit. */
static int rq_resize(struct shca_rq *rq, uint32_t max_wr)
{
	int ret;

	if (shca_rq_count(rq) > max_wr)
		return -EINVAL;
	ret = shca_rqshm_resize(rq->shm, max_wr, &rq->ring);
	if (!ret) {
		rq->max_wr = max_wr;
		rq->head_seen = 0;	/* head and tail start over */
	}
	return ret;
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

/* pd holds a use, which this puts back. */
static struct shca_srq *srq_create(struct ibv_context *ctx, struct shca_pd *pd,
				   struct ibv_srq_attr *a, void *srq_context)
{
	struct shca_context *sctx = to_sctx(ctx);
	struct shca_srq *srq;
	int ret;

	ret = srq_check_init(a);
	if (ret)
		goto err_pd;

	ret = -ENOMEM;
	pthread_mutex_lock(&sctx->lock);
	if (sctx->nsrq >= SHCA_MAX_SRQ) {
		pthread_mutex_unlock(&sctx->lock);
		goto err_pd;
	}
	sctx->nsrq++;
	pthread_mutex_unlock(&sctx->lock);

	srq = calloc(1, sizeof(*srq));
	if (!srq)
		goto err_count;
	if (shca_rq_init(&srq->rq, shca_roundup_pow2(a->max_wr),
			 a->max_sge ? a->max_sge : 1))
		goto err_free;
	if (shca_obj_add(&srq->obj, SHCA_OT_SRQ, ctx, &srq->ibsrq,
			 &srq->ibsrq.handle)) {
		shca_rq_destroy(&srq->rq);
		goto err_free;
	}

	srq->ibsrq.context = ctx;
	srq->ibsrq.srq_context = srq_context;
	srq->ibsrq.pd = &pd->ibpd;
	pthread_mutex_init(&srq->ibsrq.mutex, NULL);
	pthread_cond_init(&srq->ibsrq.cond, NULL);
	srq->ibsrq.events_completed = 0;
	srq->pd = pd;
	srq->rq.shm->srq_limit = a->srq_limit;
	shca_pd_get(srq->pd);
	shca_obj_put(&pd->obj);

	pthread_mutex_lock(&srq_list_lock);
	srq->next = srq_list;
	if (srq_list)
		srq_list->pprev = &srq->next;
	srq->pprev = &srq_list;
	srq_list = srq;
	pthread_mutex_unlock(&srq_list_lock);

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
err_pd:
	shca_obj_put(&pd->obj);
	return SHCA_ERR_PTR(-ret);
}

/*
 * A PD the handle does not name (destroyed, garbled): ENOENT, as the
 * kernel's lookup of the create command's PD attribute.
 */
struct ibv_srq *shca_create_srq(struct ibv_pd *pd,
				struct ibv_srq_init_attr *attr)
{
	struct shca_srq *srq;
	struct shca_pd *spd;

	if (!pd || !attr)
		return SHCA_ERR_PTR(EINVAL);
	spd = shca_pd_lookup(pd, NULL);
	if (!spd)
		return SHCA_ERR_PTR(ENOENT);
	srq = srq_create(pd->context, spd, &attr->attr, attr->srq_context);
	return srq ? &srq->ibsrq : NULL;
}

static struct ibv_srq *xsrq_create(struct ibv_context *ctx,
				   struct ibv_srq_init_attr_ex *attr);

/*
 * An SRQ with a CQ of its own (XRC, tag matching): the PD and CQ attr
 * names in ctx (ENOENT for a handle that names none), an arena block of
 * size bytes for its type's shared state (*shm), and the SRQ, holding a
 * reference on the CQ.  NULL with errno.  The caller checked comp_mask.
 */
struct shca_srq *shca_srq_with_cq(struct ibv_context *ctx,
				  struct ibv_srq_init_attr_ex *attr,
				  size_t size, void **shm)
{
	struct shca_srq *srq;
	struct shca_pd *spd;
	struct shca_cq *cq;
	void *m;
	int ret;

	spd = shca_pd_lookup(attr->pd, ctx);
	if (!spd)
		return SHCA_ERR_PTR(ENOENT);
	cq = shca_cq_lookup(attr->cq, ctx);
	if (!cq) {
		shca_obj_put(&spd->obj);
		return SHCA_ERR_PTR(ENOENT);
	}
	m = shca_arena_alloc(size);
	if (!m) {
		shca_obj_put(&cq->obj);
		shca_obj_put(&spd->obj);
		return SHCA_ERR_PTR(ENOMEM);
	}
	/* (srq_create keeps the PD's reference, or drops it on failure) */
	srq = srq_create(ctx, spd, &attr->attr, attr->srq_context);
	if (!srq) {
		ret = errno;
		shca_arena_free(m);
		shca_obj_put(&cq->obj);
		return SHCA_ERR_PTR(ret);
	}
	srq->cq = cq;
	__atomic_add_fetch(&cq->refs, 1, __ATOMIC_RELAXED);
	shca_obj_put(&cq->obj);
	*shm = m;
	return srq;
}

/*
 * The create_srq_ex op.  The header inline sends plain basic SRQs (PD,
 * maybe TYPE = BASIC) to ibv_create_srq; what reaches here has other
 * bits or another type.  A PD of another context is ENOENT, as one the
 * handle does not name.
 */
struct ibv_srq *shca_create_srq_ex(struct ibv_context *ctx,
				   struct ibv_srq_init_attr_ex *attr)
{
	enum ibv_srq_type type = IBV_SRQT_BASIC;
	struct shca_srq *srq;
	struct shca_pd *spd;

	if (!shca_ctx_live(ctx))
		return SHCA_ERR_PTR(EBADF);
	if (attr->comp_mask & ~(uint32_t)(IBV_SRQ_INIT_ATTR_RESERVED - 1))
		return SHCA_ERR_PTR(EINVAL);
	if (attr->comp_mask & IBV_SRQ_INIT_ATTR_TYPE)
		type = attr->srq_type;
	switch (type) {
	case IBV_SRQT_BASIC:
		break;
	case IBV_SRQT_XRC:
		return xsrq_create(ctx, attr);
	case IBV_SRQT_TM:
		return shca_tm_srq_create(ctx, attr);
	default:
		return SHCA_ERR_PTR(EINVAL);
	}
	if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_PD) || !attr->pd)
		return SHCA_ERR_PTR(EINVAL);
	spd = shca_pd_lookup(attr->pd, ctx);
	if (!spd)
		return SHCA_ERR_PTR(ENOENT);
	srq = srq_create(ctx, spd, &attr->attr, attr->srq_context);
	return srq ? &srq->ibsrq : NULL;
}

/* An XRC SRQ's entry in the QP table: what responders read (arena.h). */
static void xsrq_publish(struct shca_srq *srq)
{
	struct shca_qp_shm *m = srq->xshm;
	struct shca_arena *a = shca_arena_self();

	memcpy(m->dev, to_sctx(srq->obj.ctx)->dev->ifname, sizeof(m->dev));
	m->pd = srq->pd->prot->obj.handle;
	m->rq_pd = m->pd;
	m->has_srq = 1;
	m->xrcd = srq->xrcd->id;
	m->rq_off = shca_arena_off(a, srq->rq.shm);
	m->rcq_off = shca_arena_off(a, srq->cq->shm);
	m->state = IBV_QPS_RTR;
	__atomic_store_n(&m->qp_type, SHCA_QPT_XRC_SRQ, __ATOMIC_RELEASE);
}

/*
 * IBV_SRQT_XRC: a PD, an XRC domain and a CQ (ibv_create_srq_ex(3));
 * any missing is EINVAL, a PD or CQ the handle does not name ENOENT.
 * Its number (ibv_get_srq_num) is how XRC_SEND QPs name it.
 */
static struct ibv_srq *xsrq_create(struct ibv_context *ctx,
				   struct ibv_srq_init_attr_ex *attr)
{
	const uint32_t need = IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_XRCD |
			      IBV_SRQ_INIT_ATTR_CQ;
	struct shca_qp_shm *xshm;
	struct shca_srq *srq;
	uint32_t idx, num;
	int ret;

	if ((attr->comp_mask & need) != need || !attr->pd || !attr->cq ||
	    !attr->xrcd)
		return SHCA_ERR_PTR(EINVAL);
	/* an ioctl attribute: a domain not open in ctx is not found */
	if (!shca_xrcd_ok(attr->xrcd, ctx))
		return SHCA_ERR_PTR(ENOENT);
	srq = shca_srq_with_cq(ctx, attr, sizeof(*xshm), (void **)&xshm);
	if (!srq)
		return NULL;
	/* (under the list's lock: shca_xsrq_pd reads it from the engine) */
	pthread_mutex_lock(&srq_list_lock);
	srq->xrcd = to_sxrcd(attr->xrcd);
	pthread_mutex_unlock(&srq_list_lock);
	srq->xshm = xshm;
	srq->ibsrq.srq_context = attr->srq_context;
	shca_xrcd_get(srq->xrcd);
	ret = shca_xsrq_number_take(xshm, &idx, &num);
	if (ret) {
		shca_srq_destroy(shca_srq_lookup(&srq->ibsrq, ctx), false);
		return SHCA_ERR_PTR(-ret);
	}
	pthread_mutex_lock(&srq_list_lock);
	srq->srqn = num;
	pthread_mutex_unlock(&srq_list_lock);
	srq->srqn_index = idx;
	xsrq_publish(srq);
	return &srq->ibsrq;
}

/* The get_srq_num op: an XRC SRQ's number; EINVAL for another SRQ. */
int shca_get_srq_num(struct ibv_srq *ibsrq, uint32_t *num)
{
	struct shca_srq *srq = shca_srq_lookup(ibsrq, NULL);
	int ret = 0;

	if (!srq)
		return shca_ret_errno(-EINVAL);
	if (!srq->xrcd)
		ret = -EINVAL;
	else
		*num = srq->srqn;
	shca_obj_put(&srq->obj);
	return shca_ret_errno(ret);
}

/* Modify and query: an SRQ the handle does not name is EINVAL, as the
 * kernel's MODIFY_SRQ and QUERY_SRQ answer. */
int shca_modify_srq(struct ibv_srq *ibsrq, struct ibv_srq_attr *attr,
		    int mask)
{
	struct shca_srq *srq = shca_srq_lookup(ibsrq, NULL);
	struct shca_rq *rq;
	uint32_t max_wr, limit;
	int ret = 0;

	if (!srq)
		return -EINVAL;
	rq = &srq->rq;
	if (mask & ~(IBV_SRQ_MAX_WR | IBV_SRQ_LIMIT))
		ret = -EINVAL;
	else if ((mask & IBV_SRQ_MAX_WR) &&
		 (attr->max_wr == 0 || attr->max_wr > SHCA_MAX_SRQ_WR))
		ret = -EINVAL;
	if (ret)
		goto out;

	pthread_mutex_lock(&rq->lock);
	/* check */
	max_wr = rq->max_wr;
	if (mask & IBV_SRQ_MAX_WR) {
		max_wr = shca_roundup_pow2(attr->max_wr);
		if (shca_rq_count(rq) > max_wr)
			ret = -EINVAL;	/* would drop posted WQEs */
	}
	limit = (mask & IBV_SRQ_LIMIT) ? attr->srq_limit :
					 rq->shm->srq_limit;
	if (limit > max_wr)
		ret = -EINVAL;
	/* apply */
	if (!ret && (mask & IBV_SRQ_MAX_WR) && max_wr != rq->max_wr)
		ret = rq_resize(rq, max_wr);
	if (!ret && (mask & IBV_SRQ_LIMIT))
		__atomic_store_n(&rq->shm->srq_limit, limit, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&rq->lock);
out:
	shca_obj_put(&srq->obj);
	return ret;
}

int shca_query_srq(struct ibv_srq *ibsrq, struct ibv_srq_attr *attr)
{
	struct shca_srq *srq = shca_srq_lookup(ibsrq, NULL);

	if (!srq)
		return -EINVAL;
	pthread_mutex_lock(&srq->rq.lock);
	attr->max_wr = srq->rq.max_wr;
	attr->max_sge = srq->rq.max_sge;
	attr->srq_limit = srq->rq.shm->srq_limit;
	pthread_mutex_unlock(&srq->rq.lock);
	shca_obj_put(&srq->obj);
	return 0;
}

/* srq holds a use (shca_srq_lookup), which this consumes. */
int shca_srq_destroy(struct shca_srq *srq, bool wait_acks)
{
	struct ibv_srq *ibsrq = &srq->ibsrq;
	struct shca_context *sctx = to_sctx(srq->obj.ctx);
	int ret;

	ret = shca_obj_claim(&srq->obj, &srq->refs);
	if (ret) {
		shca_obj_put(&srq->obj);
		return ret;
	}

	/* out of the engine's sight (its doorbell walks the list), then
	 * undelivered events go; delivered ones must be acknowledged */
	pthread_mutex_lock(&srq_list_lock);
	if (srq->pprev) {
		/* O(1): destroying tens of thousands stays linear */
		*srq->pprev = srq->next;
		if (srq->next)
			srq->next->pprev = srq->pprev;
		srq->pprev = NULL;
	}
	pthread_mutex_unlock(&srq_list_lock);
	shca_async_forget(sctx, srq);
	pthread_mutex_lock(&ibsrq->mutex);
	while (wait_acks && ibsrq->events_completed != srq->events_reported)
		pthread_cond_wait(&ibsrq->cond, &ibsrq->mutex);
	pthread_mutex_unlock(&ibsrq->mutex);

	if (srq->xshm) {
		/* responders stop finding it by number, then it goes */
		if (srq->srqn)
			shca_xsrq_number_put(srq->srqn_index);
		__atomic_store_n(&srq->xshm->qpn, 0, __ATOMIC_RELEASE);
		shca_engine_quiesce();
		shca_arena_free(srq->xshm);
	}
	if (srq->tm)
		shca_tm_srq_destroy(srq);
	if (srq->cq)
		__atomic_sub_fetch(&srq->cq->refs, 1, __ATOMIC_RELEASE);
	if (srq->xrcd)
		shca_xrcd_put(srq->xrcd);
	shca_pd_put(srq->pd);
	shca_rq_destroy(&srq->rq);
	pthread_mutex_lock(&sctx->lock);
	sctx->nsrq--;
	pthread_mutex_unlock(&sctx->lock);
	shca_obj_retire(&srq->obj, srq, sizeof(*srq));
	return 0;
}

/* A handle that names no SRQ: ENOENT, as the kernel's object lookup. */
int shca_destroy_srq(struct ibv_srq *ibsrq)
{
	struct shca_srq *srq = shca_srq_lookup(ibsrq, NULL);

	if (!srq)
		return -ENOENT;
	return shca_srq_destroy(srq, true);
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
	struct shca_srq *srq = to_ssrq(ibsrq);
	struct shca_rq *rq = &srq->rq;
	int ret = 0;

	if (!bad)
		return shca_ret_errno(-EINVAL);
	*bad = NULL;
	/* the data path's check (shca_obj_ok): a dead SRQ is EINVAL */
	if (!shca_obj_ok(&srq->obj, SHCA_OT_SRQ, ibsrq->context,
			 ibsrq->handle)) {
		*bad = wr;
		return shca_ret_errno(-EINVAL);
	}
	pthread_mutex_lock(&rq->lock);
	for (; wr; wr = wr->next) {
		/* the owner's L_Keys on an import of its PD: through a
		 * bounce buffer (docs/import.md) */
		ret = shca_imp_post_recv(rq, srq->pd, wr, false);
		if (ret) {
			*bad = wr;
			break;
		}
	}
	pthread_mutex_unlock(&rq->lock);
	/* rendezvous FINs its QPs held for a receive (shm/xfer.c) */
	shca_host_fin_post_srq(srq);
	return shca_ret_errno(ret);
}

void shca_srq_check_limit(struct shca_srq *srq)
{
	bool fire = false;
	uint32_t limit;

	pthread_mutex_lock(&srq->rq.lock);
	limit = srq->rq.shm->srq_limit;
	if (limit && shca_rq_count(&srq->rq) < limit) {
		/* disarmed until modified again */
		__atomic_store_n(&srq->rq.shm->srq_limit, 0, __ATOMIC_RELEASE);
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
