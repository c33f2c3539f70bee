// SPDX-License-Identifier: MIT
/*
 * Tag matching at the responder: a SEND that reaches an RC QP whose SRQ
 * is a tag-matching SRQ (IBV_SRQT_TM) starts with a struct ibv_tmh (16
 * bytes: opcode, 3 reserved, app_ctx, tag, big endian).  What it is
 * decides where it goes (docs/tag-matching.md):
 *
 *   shorter than a TMH, FIN, another opcode  an ordinary WQE, IBV_WC_RECV
 *   NO_TAG                      an ordinary WQE, whole, IBV_WC_TM_NO_TAG
 *   EAGER, a posted tag matches  that tag's buffer, without the TMH,
 *                               IBV_WC_TM_RECV, TM_MATCH | TM_DATA_VALID
 *   RNDV, a posted tag matches,  the RVH's data, read from the sender,
 *     the sender readable       to that tag's buffer: IBV_WC_TM_RECV
 *     (same host), or the QP    TM_MATCH, then TM_DATA_VALID; the
 *     can READ (net path)       sender gets a FIN (responder.c)
 *   EAGER or RNDV, none (or     an ordinary WQE, whole, IBV_WC_TM_RECV
 *     matching paused, or no    without flags; counted as unexpected
 *     rendezvous slot left)
 *
 * Matching runs only while the application's synchronised count of
 * unexpected messages equals the SRQ's (ibv_post_srq_ops(3), "phase
 * synchronization"): after an unexpected message every tagged message
 * is unexpected too until IBV_OPS_TM_SYNC catches up.  Rendezvous is
 * offloaded where the sender's memory can be read: on this host the
 * sender's own process runs these rules (x->rndv_src); on the net path
 * the receiver's QP issues an RDMA READ of its own (x->rndv_read), while
 * it has a rendezvous slot free; without one a RNDV is unexpected, and
 * software reads the sender's buffer itself.
 *
 * The list lives in the responder's arena; whoever runs the responder's
 * rules reads it as hostile bytes: every count bounded by a constant,
 * the whole list inside the mapping.
 */
#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <string.h>
#include <infiniband/tm_types.h>

#include "../shm/queues.h"
#include "tm_rx.h"

/* Copy the message's first n bytes out of its gather list; false if
 * shorter. */
static bool gather_head(const struct shca_xfer *x, uint8_t *out, size_t n)
{
	size_t got = 0;
	int i;

	if (x->length < n)
		return false;
	for (i = 0; i < x->nlocal && got < n; i++) {
		size_t take = x->local[i].iov_len;

		if (take > n - got)
			take = n - got;
		if (take)
			memcpy(out + got, x->local[i].iov_base, take);
		got += take;
	}
	return got == n;
}

/* The message past its first skip bytes, as t->x (MATCHED's payload). */
static bool trim_head(const struct shca_xfer *x, size_t skip,
		      struct shca_tm_rx *t)
{
	int i, n = 0;

	t->x = *x;
	for (i = 0; i < x->nlocal; i++) {
		size_t len = x->local[i].iov_len;

		if (skip >= len) {
			skip -= len;
			continue;
		}
		if (n == SHCA_TM_RX_IOV)
			return false;
		t->local[n].iov_base = (char *)x->local[i].iov_base + skip;
		t->local[n].iov_len = len - skip;
		skip = 0;
		n++;
	}
	t->x.local = t->local;
	t->x.nlocal = n;
	t->x.length = x->length - SHCA_TMH_LEN;
	return true;
}

/* The list of rq, NULL if none or not a well-formed one. */
static struct shca_tm_shm *tm_list(void *base, size_t size,
				   const struct shca_rq_shm *rq,
				   uint32_t *ntags)
{
	uint64_t off = __atomic_load_n(&rq->tm_off, __ATOMIC_ACQUIRE);
	struct shca_tm_shm *tm;
	uint32_t n;

	if (!off)
		return NULL;
	tm = shca_arena_ptr(base, size, off, sizeof(*tm));
	if (!tm)
		return NULL;
	n = __atomic_load_n(&tm->max_tags, __ATOMIC_RELAXED);
	if (!n || n > SHCA_TM_MAX_TAGS ||
	    !shca_arena_ptr(base, size, off,
			    sizeof(*tm) + (size_t)n * sizeof(tm->e[0])))
		return NULL;
	*ntags = n;
	return tm;
}

/* The oldest posted entry whose tag the message's matches under its
 * mask (ibv_post_srq_ops(3)); -1 if none. */
static int find_tag(struct shca_tm_shm *tm, uint32_t ntags, uint64_t tag)
{
	uint64_t best_seq = UINT64_MAX;
	int best = -1;
	uint32_t i;

	for (i = 0; i < ntags; i++) {
		const struct shca_tm_entry_shm *e = &tm->e[i];

		if (e->state != 1 || e->num_sge > SHCA_TM_MAX_SGE)
			continue;
		if ((tag & e->mask) != (e->tag & e->mask))
			continue;
		if (e->seq < best_seq) {
			best_seq = e->seq;
			best = (int)i;
		}
	}
	return best;
}

/* RNDV's RVH (after the TMH, big endian) into t. */
static void read_rvh(const uint8_t *h, struct shca_tm_rx *t)
{
	uint64_t be64;
	uint32_t be32;

	memcpy(&be64, h + SHCA_TMH_LEN, 8);
	t->rv_addr = be64toh(be64);
	memcpy(&be32, h + SHCA_TMH_LEN + 8, 4);
	t->rv_rkey = ntohl(be32);
	memcpy(&be32, h + SHCA_TMH_LEN + 12, 4);
	t->rv_len = ntohl(be32);
}

void shca_tm_rx_rndv_src(const struct shca_xfer *x, struct shca_tm_rndv *rv)
{
	struct shca_tm_rx t;

	rv->ret = -ENOENT;
	if (!x->rndv_src || x->qp_type != IBV_QPT_RC ||
	    x->opcode == IBV_WR_RDMA_WRITE_WITH_IMM ||
	    x->length > SHCA_TM_MAX_RNDV_HDR ||
	    !gather_head(x, t.head, sizeof(t.head)) ||
	    t.head[0] != IBV_TMH_RNDV)
		return;
	read_rvh(t.head, &t);
	rv->addr = t.rv_addr;
	rv->rkey = t.rv_rkey;
	rv->len = t.rv_len;
	rv->ret = x->rndv_src(x->rndv_ctx, rv->addr, rv->rkey, rv->len,
			      &rv->src) ? -EACCES : 0;
}

void shca_tm_rx_classify(void *base, size_t size, struct shca_rq_shm *rq,
			 const struct shca_xfer *x, struct shca_tm_rx *t)
{
	uint8_t *h = t->head;
	uint32_t ntags = 0, be32;
	bool rndv = false;
	uint64_t be64;
	int i;

	t->cls = SHCA_TM_PLAIN;
	t->tm = NULL;
	if (x->qp_type != IBV_QPT_RC || x->opcode == IBV_WR_RDMA_WRITE_WITH_IMM)
		return;
	t->tm = tm_list(base, size, rq, &ntags);
	if (!t->tm || !gather_head(x, h, SHCA_TMH_LEN))
		return;
	switch (h[0]) {
	case IBV_TMH_NO_TAG:
		t->cls = SHCA_TM_NO_TAG;
		return;
	case IBV_TMH_RNDV:
		t->cls = SHCA_TM_UNEXPECTED;
		/* offloaded only where the sender can be read, and only a
		 * request that holds its RVH */
		if ((!x->rndv_src && !x->rndv_read) ||
		    x->length > SHCA_TM_MAX_RNDV_HDR ||
		    !gather_head(x, h, sizeof(t->head)))
			return;
		rndv = true;
		break;
	case IBV_TMH_EAGER:
		break;
	default:
		return;				/* FIN and unknown: plain */
	}
	t->cls = SHCA_TM_UNEXPECTED;
	if (t->tm->sw_cnt != t->tm->hw_cnt)
		return;				/* matching paused */
	memcpy(&be32, h + 4, 4);
	memcpy(&be64, h + 8, 8);
	t->tag = be64toh(be64);
	t->app_ctx = ntohl(be32);
	i = find_tag(t->tm, ntags, t->tag);
	if (i < 0)
		return;
	if (rndv) {
		t->x = *x;
		read_rvh(h, t);
	} else if (!trim_head(x, SHCA_TMH_LEN, t)) {
		return;
	}
	/* a private copy of the entry: its bytes are read once */
	t->idx = (uint32_t)i;
	t->gen = t->tm->e[i].gen;
	t->wqe.w.wr_id = t->tm->e[i].wr_id;
	t->wqe.w.num_sge = t->tm->e[i].num_sge;
	/* a bounce's tag: the owner checks it when it polls */
	t->wqe.w.imp = __atomic_load_n(&t->tm->e[i].imp, __ATOMIC_RELAXED);
	if (t->wqe.w.num_sge > SHCA_TM_MAX_SGE)
		return;
	memcpy(t->wqe.w.sge, t->tm->e[i].sge,
	       t->wqe.w.num_sge * sizeof(struct ibv_sge));
	t->cls = rndv ? SHCA_TM_RNDV : SHCA_TM_MATCHED;
}

void shca_tm_rx_consume(struct shca_rq_shm *rq, struct shca_tm_rx *t)
{
	struct shca_tm_entry_shm *e;

	switch (t->cls) {
	case SHCA_TM_MATCHED:
	case SHCA_TM_RNDV:
		/* a tag is used once; the owner's DEL of it then fails */
		e = &t->tm->e[t->idx];
		if (e->state == 1 && e->gen == t->gen)
			e->state = 0;
		return;
	case SHCA_TM_UNEXPECTED:
		t->tm->hw_cnt++;
		break;
	default:
		break;
	}
	shca_rqshm_pop(rq);
}

void shca_tm_rx_wc(const struct shca_tm_rx *t, struct ibv_wc *wc)
{
	switch (t->cls) {
	case SHCA_TM_MATCHED:
		wc->opcode = IBV_WC_TM_RECV;
		wc->wc_flags |= IBV_WC_TM_MATCH | IBV_WC_TM_DATA_VALID;
		break;
	case SHCA_TM_RNDV:
		/* the data's completion; the match was reported first */
		wc->opcode = IBV_WC_TM_RECV;
		wc->wc_flags |= IBV_WC_TM_DATA_VALID;
		break;
	case SHCA_TM_UNEXPECTED:
		wc->opcode = IBV_WC_TM_RECV;
		break;
	case SHCA_TM_NO_TAG:
		wc->opcode = IBV_WC_TM_NO_TAG;
		break;
	default:
		break;
	}
}

/* A matched rendezvous's first completion: the match, no data yet
 * (tag_matching.md: two completions for one recv_wr_id). */
void shca_tm_rx_rndv_match(struct ibv_wc *wc)
{
	wc->opcode = IBV_WC_TM_RECV;
	wc->wc_flags |= IBV_WC_TM_MATCH;
	wc->byte_len = 0;
}

bool shca_tm_rx_tagged(const struct shca_tm_rx *t)
{
	return t && (t->cls == SHCA_TM_MATCHED || t->cls == SHCA_TM_RNDV);
}
