// SPDX-License-Identifier: MIT
/*
 * Completion queues: create/resize/destroy, ibv_poll_cq, notification, and
 * the extended CQ (ibv_create_cq_ex with start/next/end_poll and read_*).
 *
 * A CQ is a ring of shca_cqe, size a power of two; it holds up to cq->cqe
 * entries (size - 1, what the verbs report).  head is the consumer's
 * counter, tail the producer's; both only move forward and are taken
 * modulo size.  Producers are the engine stages that complete work
 * (shca_cq_push); the consumer is the application.  One more completion
 * than cqe is an overrun: the CQ enters the error state and
 * IBV_EVENT_CQ_ERR is raised (IBA o11-5.2.2).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "shca.h"
#include "../net/net.h"
#include "../shm/queues.h"

#define CQ_WC_FLAGS_SUPPORTED                                              \
	(IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_IMM |                    \
	 IBV_WC_EX_WITH_QP_NUM | IBV_WC_EX_WITH_SRC_QP |                   \
	 IBV_WC_EX_WITH_SLID | IBV_WC_EX_WITH_SL |                         \
	 IBV_WC_EX_WITH_DLID_PATH_BITS |                                   \
	 IBV_WC_EX_WITH_COMPLETION_TIMESTAMP |                             \
	 IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK |                   \
	 IBV_WC_EX_WITH_TM_INFO)

#define CQ_CREATE_FLAGS_SUPPORTED IBV_CREATE_CQ_ATTR_SINGLE_THREADED

void verbs_init_cq(struct ibv_cq *cq, struct ibv_context *context,
		   struct ibv_comp_channel *channel, void *cq_context);

static int check_cqe(struct ibv_context *ctx, int cqe, int comp_vector)
{
	if (cqe < 1 || cqe > SHCA_MAX_CQE)
		return -EINVAL;
	if (comp_vector < 0 || comp_vector >= ctx->num_comp_vectors)
		return -EINVAL;
	return 0;
}

/* ------------------------------------------------------------------ */
/* Producer side                                                       */

static pthread_mutex_t cq_list_lock = PTHREAD_MUTEX_INITIALIZER;
static struct shca_cq *cq_list;

/*
 * IBA o11-5.2.2: an overrun puts the CQ in error; the QPs completing to it
 * go to error too and IBV_EVENT_CQ_ERR is raised, once.
 */
static void cq_overrun(struct shca_cq *cq)
{
	bool first;

	pthread_mutex_lock(&cq->lock);
	first = !cq->overrun_reported;
	cq->overrun_reported = true;
	pthread_mutex_unlock(&cq->lock);
	if (!first)
		return;
	shca_warn("CQ %p overrun (%d entries)", (void *)cq, cq->cqx.cqe);
	shca_async_event(to_sctx(cq->cqx.context), IBV_EVENT_CQ_ERR, cq);
	shca_qp_cq_overrun(cq);
}

/*
 * Append a completion from this process.  solicited: the message carried
 * the solicited event bit.  0, or -ENOSPC when the CQ overran (the
 * completion is lost, as on hardware).
 */
int shca_cq_push(struct shca_cq *cq, const struct ibv_wc *wc, bool solicited)
{
	switch (shca_cqshm_push_own(cq->shm, &cq->ring, wc, solicited)) {
	case SHCA_CQ_FIRED:
		shca_cq_comp_event(cq);
		return 0;
	case SHCA_CQ_OVERRUN:
		/* reported by the engine thread: the caller may be holding
		 * the locks of a QP that the overrun moves to error */
		__atomic_store_n(&cq->shm->overflow_pending, 1,
				 __ATOMIC_RELEASE);
		shca_doorbell_ring();
		return -ENOSPC;
	case SHCA_CQ_DEAD:
		return -ENOSPC;
	default:
		return 0;
	}
}

/* What peers left on this process's CQs: events to report. */
void shca_cq_doorbell(void)
{
	struct shca_cq *cq;

	pthread_mutex_lock(&cq_list_lock);
	for (cq = cq_list; cq; cq = cq->next) {
		if (__atomic_exchange_n(&cq->shm->notify_pending, 0,
					__ATOMIC_ACQ_REL))
			shca_cq_comp_event(cq);
		if (__atomic_exchange_n(&cq->shm->overflow_pending, 0,
					__ATOMIC_ACQ_REL))
			cq_overrun(cq);
	}
	pthread_mutex_unlock(&cq_list_lock);
}

/* ------------------------------------------------------------------ */
/* ibv_poll_cq and notification                                        */

/* The data path's liveness check (shca_obj_ok): no lock, no lookup. */
static bool cq_ok(struct shca_cq *cq, const struct ibv_cq *ibcq)
{
	return shca_obj_ok(&cq->obj, SHCA_OT_CQ, ibcq->context, ibcq->handle);
}

/* A CQ that is not live: -EINVAL, as ibv_cmd_poll_cq returns the
 * kernel's answer to an unknown handle. */
int shca_poll_cq(struct ibv_cq *ibcq, int num, struct ibv_wc *wc)
{
	struct shca_cq *cq = to_scq(ibcq);
	struct shca_cqe *e;
	int n = 0;

	if (!cq_ok(cq, ibcq)) {
		errno = EINVAL;
		return -EINVAL;
	}
	pthread_mutex_lock(&cq->lock);
	while (n < num && (e = shca_cqshm_peek(cq->shm, &cq->ring))) {
		uint64_t tag;
		uint32_t priv, imp;

		wc[n] = e->wc;
		if (shca_cqe_has_tm(&wc[n])) {	/* ibv_wc has no room */
			shca_cqe_tm_unpack(&wc[n], &tag, &priv, &imp);
			if (imp)			/* import_key.c */
				shca_imp_tm_wc(&wc[n], imp);
		} else if (shca_imp_wc_tagged(&wc[n])) {
			/* import_key.c */
			shca_imp_recv_wc(&wc[n]);
		}
		n++;
		shca_cqshm_pop(cq->shm);
	}
	pthread_mutex_unlock(&cq->lock);
	if (!n)
		shca_net_poll_idle();
	else
		shca_engine_poll_found();
	return n;
}

/* A receive completion taken out unseen: its bounce goes too. */
static void drop_tagged(const struct ibv_wc *wc)
{
	if (shca_cqe_has_tm(wc)) {
		if (wc->wc_flags & SHCA_WC_TM_IMP)
			shca_imp_drop(wc->src_qp, true);
	} else if (shca_imp_wc_tagged(wc)) {
		shca_imp_drop(wc->vendor_err, true);
	}
}

/* A QP is reset: its completions leave the CQ (mlx5); destroyed: its
 * flushed ones (flushed_only, qp.c). */
void shca_cq_clean(struct shca_cq *cq, uint32_t qpn, bool flushed_only)
{
	pthread_mutex_lock(&cq->lock);
	shca_cqshm_clean(cq->shm, &cq->ring, qpn, flushed_only, drop_tagged);
	pthread_mutex_unlock(&cq->lock);
}

/* A CQ that is not live: EINVAL, as the kernel's REQ_NOTIFY_CQ. */
int shca_req_notify_cq(struct ibv_cq *ibcq, int solicited_only)
{
	struct shca_cq *cq = to_scq(ibcq);

	if (!cq_ok(cq, ibcq))
		return shca_ret_errno(-EINVAL);
	shca_cqshm_arm(cq->shm, solicited_only);
	return 0;
}

/* ------------------------------------------------------------------ */
/* Extended CQ: start/next/end_poll and the read_* accessors           */

/* Take the next entry (there is one) into cur_cqe. */
static void cqx_load(struct shca_cq *cq, struct shca_cqe *e)
{
	uint32_t imp;

	cq->cur_cqe = *e;
	cq->cur_tm_tag = 0;
	cq->cur_tm_priv = 0;
	if (shca_cqe_has_tm(&cq->cur_cqe.wc)) {
		shca_cqe_tm_unpack(&cq->cur_cqe.wc, &cq->cur_tm_tag,
				   &cq->cur_tm_priv, &imp);
		if (imp)				/* import_key.c */
			shca_imp_tm_wc(&cq->cur_cqe.wc, imp);
	} else if (shca_imp_wc_tagged(&cq->cur_cqe.wc)) {
		/* import_key.c */
		shca_imp_recv_wc(&cq->cur_cqe.wc);
	}
	shca_cqshm_pop(cq->shm);
	cq->cqx.status = cq->cur_cqe.wc.status;
	cq->cqx.wr_id = cq->cur_cqe.wc.wr_id;
}

static int cqx_start_poll(struct ibv_cq_ex *ibcq,
			  struct ibv_poll_cq_attr *attr)
{
	struct shca_cq *cq = cqx_to_scq(ibcq);
	struct shca_cqe *e;

	if (!cq_ok(cq, ibv_cq_ex_to_cq(ibcq)))
		return shca_ret_errno(-EINVAL);
	if (attr->comp_mask)
		return shca_ret_errno(-EINVAL);
	if (!cq->single_threaded)
		pthread_mutex_lock(&cq->lock);
	e = shca_cqshm_peek(cq->shm, &cq->ring);
	if (!e) {
		if (!cq->single_threaded)
			pthread_mutex_unlock(&cq->lock);
		shca_net_poll_idle();
		return ENOENT;
	}
	cqx_load(cq, e);
	return 0;
}

static int cqx_next_poll(struct ibv_cq_ex *ibcq)
{
	struct shca_cq *cq = cqx_to_scq(ibcq);
	struct shca_cqe *e = shca_cqshm_peek(cq->shm, &cq->ring);

	if (!e)
		return ENOENT;
	cqx_load(cq, e);
	return 0;
}

static void cqx_end_poll(struct ibv_cq_ex *ibcq)
{
	struct shca_cq *cq = cqx_to_scq(ibcq);

	if (!cq->single_threaded)
		pthread_mutex_unlock(&cq->lock);
	shca_engine_poll_found();
}

#define CUR(ibcq) (&cqx_to_scq(ibcq)->cur_cqe.wc)

static enum ibv_wc_opcode cqx_read_opcode(struct ibv_cq_ex *c)
{
	return CUR(c)->opcode;
}

static uint32_t cqx_read_vendor_err(struct ibv_cq_ex *c)
{
	return CUR(c)->vendor_err;
}

static uint32_t cqx_read_byte_len(struct ibv_cq_ex *c)
{
	return CUR(c)->byte_len;
}

static __be32 cqx_read_imm_data(struct ibv_cq_ex *c)
{
	return CUR(c)->imm_data;
}

static uint32_t cqx_read_qp_num(struct ibv_cq_ex *c)
{
	return CUR(c)->qp_num;
}

static uint32_t cqx_read_src_qp(struct ibv_cq_ex *c)
{
	return CUR(c)->src_qp;
}

static unsigned int cqx_read_wc_flags(struct ibv_cq_ex *c)
{
	return CUR(c)->wc_flags;
}

static uint32_t cqx_read_slid(struct ibv_cq_ex *c)
{
	return CUR(c)->slid;
}

static uint8_t cqx_read_sl(struct ibv_cq_ex *c)
{
	return CUR(c)->sl;
}

static uint8_t cqx_read_dlid_path_bits(struct ibv_cq_ex *c)
{
	return CUR(c)->dlid_path_bits;
}

/* hca_core_clock is 1 GHz: the timestamp is in nanoseconds */
static uint64_t cqx_read_completion_ts(struct ibv_cq_ex *c)
{
	return shca_cqe_ts(&cqx_to_scq(c)->cur_cqe);
}

/* The device clock converted to the wall clock at the time of reading. */
static uint64_t cqx_read_completion_wallclock_ns(struct ibv_cq_ex *c)
{
	struct timespec mono, real;
	int64_t offset;

	clock_gettime(CLOCK_MONOTONIC, &mono);
	clock_gettime(CLOCK_REALTIME, &real);
	offset = ((int64_t)real.tv_sec - (int64_t)mono.tv_sec) * 1000000000ll +
		 ((int64_t)real.tv_nsec - (int64_t)mono.tv_nsec);
	return (uint64_t)((int64_t)shca_cqe_ts(&cqx_to_scq(c)->cur_cqe) + offset);
}

/* Not offered (create_cq_ex refuses the flags), but never NULL. */
static uint16_t cqx_read_cvlan(struct ibv_cq_ex *c)
{
	(void)c;
	return 0;
}

static uint32_t cqx_read_flow_tag(struct ibv_cq_ex *c)
{
	(void)c;
	return 0;
}

/* The tag and the TMH's app_ctx of a tag-matching completion, else 0. */
static void cqx_read_tm_info(struct ibv_cq_ex *c, struct ibv_wc_tm_info *tm)
{
	memset(tm, 0, sizeof(*tm));
	tm->tag = cqx_to_scq(c)->cur_tm_tag;
	tm->priv = cqx_to_scq(c)->cur_tm_priv;
}

static void cqx_set_ops(struct ibv_cq_ex *x)
{
	x->start_poll = cqx_start_poll;
	x->next_poll = cqx_next_poll;
	x->end_poll = cqx_end_poll;
	x->read_opcode = cqx_read_opcode;
	x->read_vendor_err = cqx_read_vendor_err;
	x->read_byte_len = cqx_read_byte_len;
	x->read_imm_data = cqx_read_imm_data;
	x->read_qp_num = cqx_read_qp_num;
	x->read_src_qp = cqx_read_src_qp;
	x->read_wc_flags = cqx_read_wc_flags;
	x->read_slid = cqx_read_slid;
	x->read_sl = cqx_read_sl;
	x->read_dlid_path_bits = cqx_read_dlid_path_bits;
	x->read_completion_ts = cqx_read_completion_ts;
	x->read_cvlan = cqx_read_cvlan;
	x->read_flow_tag = cqx_read_flow_tag;
	x->read_tm_info = cqx_read_tm_info;
	x->read_completion_wallclock_ns = cqx_read_completion_wallclock_ns;
}

/* ------------------------------------------------------------------ */
/* Create, resize, destroy                                             */

static struct shca_cq *cq_alloc(struct ibv_context *ctx, int cqe,
				struct ibv_comp_channel *channel,
				void *cq_context, bool timestamps)
{
	struct shca_context *sctx = to_sctx(ctx);
	struct shca_cq *cq;
	bool chan_ok;

	/*
	 * A channel the context does not have: EBADF, as the kernel's
	 * lookup of the channel's file.  Found and counted as used in one
	 * step under the context mutex, which its destroy takes.
	 */
	if (channel) {
		pthread_mutex_lock(&ctx->mutex);
		chan_ok = shca_channel_valid(channel, ctx);
		if (chan_ok)
			channel->refcnt++;
		pthread_mutex_unlock(&ctx->mutex);
		if (!chan_ok) {
			errno = EBADF;
			return NULL;
		}
	}
	pthread_mutex_lock(&sctx->lock);
	if (sctx->ncq >= SHCA_MAX_CQ) {
		pthread_mutex_unlock(&sctx->lock);
		goto err_chan;
	}
	sctx->ncq++;
	pthread_mutex_unlock(&sctx->lock);

	cq = calloc(1, sizeof(*cq));
	if (cq) {
		cq->shm = shca_arena_alloc(sizeof(*cq->shm));
		if (cq->shm &&
		    shca_cqshm_init(cq->shm, (uint32_t)cqe, timestamps,
				    &cq->ring)) {
			shca_arena_free(cq->shm);
			cq->shm = NULL;
		}
	}
	if (cq && cq->shm &&
	    shca_obj_add(&cq->obj, SHCA_OT_CQ, ctx, &cq->cqx,
			 &cq->cqx.handle)) {
		shca_cqshm_fini(cq->shm, &cq->ring);
		shca_arena_free(cq->shm);
		cq->shm = NULL;
	}
	if (!cq || !cq->shm) {
		if (cq)
			free(cq);
		pthread_mutex_lock(&sctx->lock);
		sctx->ncq--;
		pthread_mutex_unlock(&sctx->lock);
		goto err_chan;
	}
	pthread_mutex_init(&cq->lock, NULL);
	/* the channel is counted already */
	verbs_init_cq(ibv_cq_ex_to_cq(&cq->cqx), ctx, NULL, cq_context);
	cq->cqx.channel = channel;
	cq->cqx.cqe = (int)cq->shm->cqe;
	cqx_set_ops(&cq->cqx);
	cq->chan = channel ? to_schan(channel) : NULL;
	if (channel)
		shca_channel_add_cq(cq->chan, cq);
	pthread_mutex_lock(&cq_list_lock);
	cq->next = cq_list;
	if (cq_list)
		cq_list->pprev = &cq->next;
	cq->pprev = &cq_list;
	cq_list = cq;
	pthread_mutex_unlock(&cq_list_lock);
	return cq;

err_chan:
	if (channel) {
		pthread_mutex_lock(&ctx->mutex);
		channel->refcnt--;
		pthread_mutex_unlock(&ctx->mutex);
	}
	errno = ENOMEM;
	return NULL;
}

struct ibv_cq *shca_create_cq(struct ibv_context *ctx, int cqe,
			      struct ibv_comp_channel *channel,
			      int comp_vector)
{
	struct shca_cq *cq;
	int ret;

	if (!shca_ctx_live(ctx))
		return SHCA_ERR_PTR(EBADF);	/* its file is closed */
	ret = check_cqe(ctx, cqe, comp_vector);
	if (ret)
		return SHCA_ERR_PTR(-ret);
	cq = cq_alloc(ctx, cqe, channel, NULL, false);
	return cq ? ibv_cq_ex_to_cq(&cq->cqx) : NULL;
}

/*
 * The checks of rdma-core (wc_flags it does not know: EOPNOTSUPP), then a
 * provider's: cqe 0 and unknown comp_mask bits are EINVAL (mlx5); creation
 * flags and wc_flags the device lacks are EOPNOTSUPP (rxe; pyverbs'
 * test_cqex accepts nothing else); IBV_CQ_INIT_ATTR_MASK_PD needs a live
 * parent domain of ctx (else EINVAL, as mlx5), which the CQ holds until
 * it is destroyed.  Its allocator is not asked for the ring: peers on this
 * host write completions there, so it lives in the arena (pdom.c).
 */
struct ibv_cq_ex *shca_create_cq_ex(struct ibv_context *ctx,
				    struct ibv_cq_init_attr_ex *attr)
{
	struct shca_pd *pdom = NULL;
	struct shca_cq *cq;
	int ret;

	if (!shca_ctx_live(ctx))
		return SHCA_ERR_PTR(EBADF);	/* its file is closed */
	if (attr->wc_flags & ~(uint64_t)IBV_CREATE_CQ_SUP_WC_FLAGS)
		return SHCA_ERR_PTR(EOPNOTSUPP);
	if (!attr->cqe)
		return SHCA_ERR_PTR(EINVAL);
	if (attr->comp_mask & ~(uint32_t)(IBV_CQ_INIT_ATTR_MASK_FLAGS |
					   IBV_CQ_INIT_ATTR_MASK_PD))
		return SHCA_ERR_PTR(EINVAL);
	if ((attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_FLAGS) &&
	    (attr->flags & ~(uint32_t)CQ_CREATE_FLAGS_SUPPORTED))
		return SHCA_ERR_PTR(EOPNOTSUPP);
	if (attr->wc_flags & ~(uint64_t)CQ_WC_FLAGS_SUPPORTED)
		return SHCA_ERR_PTR(EOPNOTSUPP);
	if (attr->cqe > INT32_MAX)
		return SHCA_ERR_PTR(EINVAL);
	ret = check_cqe(ctx, (int)attr->cqe, (int)attr->comp_vector);
	if (ret)
		return SHCA_ERR_PTR(-ret);
	if (attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_PD) {
		pdom = shca_pd_lookup(attr->parent_domain, ctx);
		if (pdom && !shca_pd_is_parent(pdom)) {
			shca_obj_put(&pdom->obj);
			pdom = NULL;
		}
		if (!pdom)
			return SHCA_ERR_PTR(EINVAL);
	}
	cq = cq_alloc(ctx, (int)attr->cqe, attr->channel, attr->cq_context,
		      attr->wc_flags &
			      (IBV_WC_EX_WITH_COMPLETION_TIMESTAMP |
			       IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK));
	if (pdom) {
		if (cq) {
			shca_pd_get(pdom);
			cq->pdom = pdom;
		}
		shca_obj_put(&pdom->obj);
	}
	if (!cq)
		return NULL;
	cq->is_ex = true;
	cq->wc_flags = attr->wc_flags;
	cq->single_threaded =
		(attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_FLAGS) &&
		(attr->flags & IBV_CREATE_CQ_ATTR_SINGLE_THREADED);
	return &cq->cqx;
}

/*
 * New size: at least cqe entries.  As rxe's rxe_cq_chk_attr(): cqe below 1,
 * above max_cqe, or below the number of completions the CQ holds now is
 * EINVAL; so is a CQ the handle does not name (the kernel's RESIZE_CQ).
 */
int shca_resize_cq(struct ibv_cq *ibcq, int cqe)
{
	struct shca_cq *cq = shca_cq_lookup(ibcq, NULL);
	int ret = -EINVAL;

	if (!cq)
		return -EINVAL;
	if (cqe < 1 || cqe > SHCA_MAX_CQE)
		goto out;
	pthread_mutex_lock(&cq->lock);
	if (shca_cqshm_count(cq->shm) <= (uint32_t)cqe) {
		ret = shca_cqshm_resize(cq->shm, (uint32_t)cqe, &cq->ring);
		if (!ret)
			cq->cqx.cqe = (int)cq->shm->cqe;
	}
	pthread_mutex_unlock(&cq->lock);
out:
	shca_obj_put(&cq->obj);
	return ret;
}

/*
 * cq holds a use (shca_cq_lookup), which this consumes.  wait_acks: wait
 * until the events handed out are acknowledged, as ibv_destroy_cq does;
 * not when the context closes (the kernel frees what is left).
 */
int shca_cq_destroy(struct shca_cq *cq, bool wait_acks)
{
	struct ibv_cq *ibcq = ibv_cq_ex_to_cq(&cq->cqx);
	struct shca_context *sctx = to_sctx(cq->obj.ctx);
	struct shca_comp_channel *chan = cq->chan;
	int ret;

	ret = shca_obj_claim(&cq->obj, &cq->refs);
	if (ret) {
		shca_obj_put(&cq->obj);
		return ret;
	}

	/*
	 * Out of the engine's sight first: its doorbell (shca_cq_doorbell,
	 * under cq_list_lock) turns a peer's mark into a completion or
	 * CQ_ERR event, and one queued after the forget below would
	 * outlive the CQ, for ibv_get_cq_event to hand out (as the QP
	 * leaves its table before its events are forgotten).
	 */
	pthread_mutex_lock(&cq_list_lock);
	if (cq->pprev) {
		/* O(1): destroying tens of thousands stays linear */
		*cq->pprev = cq->next;
		if (cq->next)
			cq->next->pprev = cq->pprev;
		cq->pprev = NULL;
	}
	pthread_mutex_unlock(&cq_list_lock);

	/* undelivered events go; delivered ones must be acknowledged */
	if (chan)
		shca_channel_forget_cq(chan, cq);
	shca_async_forget(sctx, cq);
	pthread_mutex_lock(&ibcq->mutex);
	while (wait_acks &&
	       (ibcq->comp_events_completed != cq->comp_events_reported ||
		ibcq->async_events_completed != cq->async_events_reported))
		pthread_cond_wait(&ibcq->cond, &ibcq->mutex);
	pthread_mutex_unlock(&ibcq->mutex);

	if (chan) {
		pthread_mutex_lock(&cq->obj.ctx->mutex);
		chan->ch.refcnt--;
		pthread_mutex_unlock(&cq->obj.ctx->mutex);
	}
	pthread_mutex_lock(&sctx->lock);
	sctx->ncq--;
	pthread_mutex_unlock(&sctx->lock);
	pthread_mutex_destroy(&cq->lock);
	/* completions never polled: their bounces (import_key.c) */
	{
		struct shca_cqe *e;

		while ((e = shca_cqshm_peek(cq->shm, &cq->ring))) {
			drop_tagged(&e->wc);
			shca_cqshm_pop(cq->shm);
		}
	}
	shca_cqshm_fini(cq->shm, &cq->ring);
	shca_arena_free(cq->shm);
	if (cq->pdom)
		shca_pd_put(cq->pdom);
	shca_obj_retire(&cq->obj, cq, sizeof(*cq));
	return 0;
}

/* A handle that names no CQ: ENOENT, as the kernel's object lookup. */
int shca_destroy_cq(struct ibv_cq *ibcq)
{
	struct shca_cq *cq = shca_cq_lookup(ibcq, NULL);

	if (!cq)
		return -ENOENT;
	return shca_cq_destroy(cq, true);
}

/* ------------------------------------------------------------------ */
/* Exported verbs                                                      */

SHCA_DEFAULT_VERSION(ibv_create_cq)
struct ibv_cq *shca_latest_ibv_create_cq(struct ibv_context *context, int cqe,
			     void *cq_context,
			     struct ibv_comp_channel *channel, int comp_vector)
{
	struct ibv_cq *cq = shca_create_cq(context, cqe, channel, comp_vector);

	if (cq)
		cq->cq_context = cq_context;
	return cq;
}

SHCA_DEFAULT_VERSION(ibv_resize_cq)
int shca_latest_ibv_resize_cq(struct ibv_cq *cq, int cqe)
{
	return shca_ret_errno(shca_resize_cq(cq, cqe));
}

SHCA_DEFAULT_VERSION(ibv_destroy_cq)
int shca_latest_ibv_destroy_cq(struct ibv_cq *cq)
{
	return shca_ret_errno(shca_destroy_cq(cq));
}
