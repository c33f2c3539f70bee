// SPDX-License-Identifier: MIT
/*
 * Tag-matching SRQs (IBV_SRQT_TM): the list of tagged buffers that the
 * application posts with ibv_post_srq_ops(3), and the capabilities that
 * ibv_query_device_ex reports.  The list lives in the process arena
 * (shca_tm_shm) beside the SRQ's ring, so that whoever runs the
 * responder's rules (a peer on this host, or this process's engine for
 * the net path) matches incoming SENDs against it: engine/tm_rx.c.
 *
 * List operations are carried out at once, under the SRQ's ring lock;
 * a signalled one (or a failed one) completes on the SRQ's CQ with
 * IBV_WC_TM_ADD / TM_DEL / TM_SYNC.  A handle is the entry's index and
 * the generation it was added in: a handle of a tag that a message has
 * consumed (or that was deleted) fails its DEL with IBV_WC_TM_ERR.
 * docs/tag-matching.md.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "shca.h"
#include "../common/env.h"
#include "../engine/tm_rx.h"
#include "../shm/queues.h"

#define TM_IDX_BITS	8	/* log2(SHCA_TM_MAX_TAGS) */
_Static_assert(SHCA_TM_MAX_TAGS == 1u << TM_IDX_BITS, "handle bits");

/*
 * What the device offers: RC only; rendezvous offloaded (a RNDV request
 * of TMH, RVH and up to 32 more bytes) on the same host and on the net
 * path alike (engine/tm_rx.c).
 */
void shca_tm_fill_caps(struct ibv_tm_caps *c)
{
	c->max_rndv_hdr_size = SHCA_TM_MAX_RNDV_HDR;
	c->max_num_tags = SHCA_TM_MAX_TAGS - 1;
	c->flags = IBV_TM_CAP_RC;
	c->max_ops = SHCA_TM_MAX_OPS;
	c->max_sge = SHCA_TM_MAX_SGE;
}

/*
 * IBV_SRQT_TM: a PD, a CQ (the list operations' completions) and
 * IBV_SRQ_INIT_ATTR_TM with max_num_tags and max_ops within tm_caps;
 * EINVAL otherwise, ENOENT for a PD or CQ the handle does not name.
 */
struct ibv_srq *shca_tm_srq_create(struct ibv_context *ctx,
				   struct ibv_srq_init_attr_ex *attr)
{
	const uint32_t need = IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_CQ |
			      IBV_SRQ_INIT_ATTR_TM;
	struct shca_tm_shm *tm;
	struct shca_srq *srq;
	uint32_t n;

	if ((attr->comp_mask & need) != need || !attr->pd || !attr->cq)
		return SHCA_ERR_PTR(EINVAL);
	n = attr->tm_cap.max_num_tags;
	if (!n || n >= SHCA_TM_MAX_TAGS || !attr->tm_cap.max_ops ||
	    attr->tm_cap.max_ops > SHCA_TM_MAX_OPS)
		return SHCA_ERR_PTR(EINVAL);
	/* index 0 is never used: a handle is never 0 */
	srq = shca_srq_with_cq(ctx, attr,
			       sizeof(*tm) + (n + 1) * sizeof(tm->e[0]),
			       (void **)&tm);
	if (!srq)
		return NULL;
	tm->max_tags = n + 1;
	srq->tm = tm;
	srq->tm_ntags = n + 1;
	srq->tm_max_sge = SHCA_TM_MAX_SGE;
	srq->tm_max_ops = attr->tm_cap.max_ops;
	/* responders find the list from now on */
	__atomic_store_n(&srq->rq.shm->tm_off,
			 shca_arena_off(shca_arena_self(), tm),
			 __ATOMIC_RELEASE);
	return &srq->ibsrq;
}

/* No QP uses the SRQ any more (shca_srq_destroy): nothing reads it.
 * The bounces of tags still posted go (a matched tag's goes with its
 * completion). */
void shca_tm_srq_destroy(struct shca_srq *srq)
{
	uint32_t i;

	__atomic_store_n(&srq->rq.shm->tm_off, 0, __ATOMIC_RELEASE);
	for (i = 1; srq->tm_imp && i < srq->tm_ntags; i++)
		if (srq->tm->e[i].state == 1)
			shca_imp_drop(srq->tm_imp[i], true);
	free(srq->tm_imp);
	srq->tm_imp = NULL;
	shca_arena_free(srq->tm);
	srq->tm = NULL;
}

/*
 * The first free entry, 0 if none.  The list is in shared memory that
 * peers write: every index is bounded by the owner's own count
 * (tm_ntags), never by a word of the arena.
 */
static uint32_t free_entry(const struct shca_srq *srq)
{
	uint32_t i;

	for (i = 1; i < srq->tm_ntags; i++)
		if (!srq->tm->e[i].state)
			return i;
	return 0;
}

/* The checks of one operation that change nothing: 0 or -errno. */
static int op_check(const struct shca_srq *srq, const struct ibv_ops_wr *wr)
{
	uint32_t idx;

	switch (wr->opcode) {
	case IBV_WR_TAG_ADD:
		if (wr->tm.add.num_sge < 0 ||
		    (uint32_t)wr->tm.add.num_sge > srq->tm_max_sge ||
		    (wr->tm.add.num_sge && !wr->tm.add.sg_list))
			return -EINVAL;
		return free_entry(srq) ? 0 : -ENOMEM;
	case IBV_WR_TAG_DEL:
		idx = wr->tm.handle & (SHCA_TM_MAX_TAGS - 1);
		return idx && idx < srq->tm_ntags ? 0 : -EINVAL;
	case IBV_WR_TAG_SYNC:
		return 0;
	default:
		return -EINVAL;
	}
}

/* ADD: the oldest free entry; the handle is written back to wr.  imp:
 * a bounce's tag, and bsge the SGE that names the bounce (import_key.c),
 * else 0. */
static void op_add(struct shca_srq *srq, struct ibv_ops_wr *wr,
		   const struct ibv_sge *bsge, uint32_t imp)
{
	struct shca_tm_shm *tm = srq->tm;
	uint32_t i = free_entry(srq);	/* op_check saw one: not 0 */
	struct shca_tm_entry_shm *e = &tm->e[i];

	e->gen = (e->gen + 1) & ((1u << (32 - TM_IDX_BITS)) - 1);
	e->seq = tm->seq++;
	e->tag = wr->tm.add.tag;
	e->mask = wr->tm.add.mask;
	e->wr_id = wr->tm.add.recv_wr_id;
	e->num_sge = (uint32_t)wr->tm.add.num_sge;
	if (imp) {
		e->num_sge = 1;
		e->sge[0] = *bsge;
	} else if (e->num_sge) {
		memcpy(e->sge, wr->tm.add.sg_list,
		       e->num_sge * sizeof(struct ibv_sge));
	}
	e->imp = imp;
	if (srq->tm_imp)
		srq->tm_imp[i] = imp;
	e->state = 1;
	wr->tm.handle = e->gen << TM_IDX_BITS | i;
}

/* DEL: false if the handle's tag is gone (consumed, deleted).  *drop:
 * the tag's bounce, to free once the list's lock is dropped (its MR's
 * drain waits for peers). */
static bool op_del(struct shca_srq *srq, const struct ibv_ops_wr *wr,
		   uint32_t *drop)
{
	struct shca_tm_entry_shm *e =
		&srq->tm->e[wr->tm.handle & (SHCA_TM_MAX_TAGS - 1)];

	if (e->state != 1 || e->gen != wr->tm.handle >> TM_IDX_BITS)
		return false;
	e->state = 0;
	/* no message took it: its bounce goes */
	if (srq->tm_imp) {
		*drop = srq->tm_imp[e - srq->tm->e];
		srq->tm_imp[e - srq->tm->e] = 0;
	}
	return true;
}

/*
 * A TAG_ADD whose buffer names the owner's L_Keys on an import of the
 * SRQ's PD (docs/import.md): its bounce (shca_imp_tm_add), *imp its tag;
 * 0 with *imp 0 for anything else (op_check judges the list).  0 or
 * -ENOMEM.
 */
static int add_bounce(struct shca_srq *srq, const struct ibv_ops_wr *wr,
		      struct ibv_sge *bsge, uint32_t *imp)
{
	int ret;

	*imp = 0;
	if (wr->opcode != IBV_WR_TAG_ADD || wr->tm.add.num_sge <= 0 ||
	    (uint32_t)wr->tm.add.num_sge > srq->tm_max_sge ||
	    !wr->tm.add.sg_list)
		return 0;
	ret = shca_imp_tm_add(srq->pd, wr->tm.add.sg_list,
			      wr->tm.add.num_sge, bsge, imp);
	if (ret || !*imp || srq->tm_imp)
		return ret;
	srq->tm_imp = calloc(SHCA_TM_MAX_TAGS, sizeof(*srq->tm_imp));
	if (srq->tm_imp)
		return 0;
	shca_imp_drop(*imp, true);
	*imp = 0;
	return -ENOMEM;
}

static const enum ibv_wc_opcode op_wc[] = {
	[IBV_WR_TAG_ADD] = IBV_WC_TM_ADD,
	[IBV_WR_TAG_DEL] = IBV_WC_TM_DEL,
	[IBV_WR_TAG_SYNC] = IBV_WC_TM_SYNC,
};

/*
 * ibv_post_srq_ops(3): each operation in turn; the first that cannot be
 * carried out stops the list at *bad (EINVAL: not a TM SRQ, an unknown
 * opcode, too many SGEs, a handle out of range; ENOMEM: the list is
 * full).  IBV_OPS_TM_SYNC first sets the application's count of
 * unexpected messages; the completion says IBV_WC_TM_SYNC_REQ while it
 * differs from the SRQ's.
 */
int shca_post_srq_ops(struct ibv_srq *ibsrq, struct ibv_ops_wr *wr,
		      struct ibv_ops_wr **bad)
{
	struct shca_srq *srq = to_ssrq(ibsrq);
	struct shca_rq *rq = &srq->rq;
	struct ibv_wc wc;
	int ret = 0;
	bool ok;

	if (!bad)
		return EINVAL;
	*bad = NULL;
	if (!shca_obj_ok(&srq->obj, SHCA_OT_SRQ, ibsrq->context,
			 ibsrq->handle) || !srq->tm) {
		*bad = wr;
		return EINVAL;
	}
	pthread_mutex_lock(&rq->lock);
	for (; wr; wr = wr->next) {
		struct ibv_sge bsge;
		uint32_t imp = 0;

		/* the owner's L_Keys: a bounce, made before the list's
		 * lock (it registers an MR) */
		ret = add_bounce(srq, wr, &bsge, &imp);
		if (ret) {
			*bad = wr;
			break;
		}
		shca_plock_lock(&rq->shm->lock);
		ret = op_check(srq, wr);
		if (ret) {
			shca_plock_unlock(&rq->shm->lock);
			shca_imp_drop(imp, true);
			*bad = wr;
			break;
		}
		if (wr->flags & IBV_OPS_TM_SYNC)
			srq->tm->sw_cnt = wr->tm.unexpected_cnt;
		ok = true;
		if (wr->opcode == IBV_WR_TAG_ADD)
			op_add(srq, wr, &bsge, imp);
		else if (wr->opcode == IBV_WR_TAG_DEL)
			ok = op_del(srq, wr, &imp);	/* (imp was 0) */
		memset(&wc, 0, sizeof(wc));
		wc.wr_id = wr->wr_id;
		wc.status = ok ? IBV_WC_SUCCESS : IBV_WC_TM_ERR;
		wc.opcode = op_wc[wr->opcode];
		if (srq->tm->sw_cnt != srq->tm->hw_cnt)
			wc.wc_flags = IBV_WC_TM_SYNC_REQ;
		shca_plock_unlock(&rq->shm->lock);
		if (wr->opcode == IBV_WR_TAG_DEL)
			shca_imp_drop(imp, true);
		if (!ok || (wr->flags & IBV_OPS_SIGNALED))
			shca_cq_push(srq->cq, &wc, false);
	}
	pthread_mutex_unlock(&rq->lock);
	return shca_ret_errno(ret);
}
