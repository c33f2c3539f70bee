/* SPDX-License-Identifier: MIT */
/*
 * Tag matching at the responder (tm_rx.c): what a SEND that reached a
 * tag-matching SRQ is, and where it goes.  The verbs side (the list
 * operations, the SRQ) is verbs/tm.c; docs/tag-matching.md.
 */
#ifndef SOFTHCA_ENGINE_TM_RX_H
#define SOFTHCA_ENGINE_TM_RX_H

#include <stdint.h>
#include <sys/uio.h>
#include <infiniband/verbs.h>

#include "../shm/arena.h"
#include "xport.h"

#define SHCA_TMH_LEN	16	/* struct ibv_tmh on the wire */
#define SHCA_TM_RX_IOV	64

enum shca_tm_class {
	SHCA_TM_PLAIN,		/* not a TM SRQ, or no TMH: IBV_WC_RECV */
	SHCA_TM_NO_TAG,		/* TMH NO_TAG: an ordinary WQE, whole */
	SHCA_TM_UNEXPECTED,	/* no posted tag took it: an ordinary WQE,
				 * whole, counted (hw_cnt) */
	SHCA_TM_MATCHED,	/* a posted tag's buffer, after the TMH */
	SHCA_TM_RNDV,		/* RNDV, a posted tag matches, and the
				 * requester can be read (x->rndv_src):
				 * the RVH's data go to the tag's buffer */
};

#define SHCA_RVH_LEN	16	/* struct ibv_rvh on the wire */
/* tm_caps.max_rndv_hdr_size: TMH, RVH and 32 bytes of the sender's */
#define SHCA_TM_MAX_RNDV_HDR	64

struct shca_tm_rx {
	enum shca_tm_class cls;
	struct shca_tm_shm *tm;		/* in the responder's arena */
	uint32_t idx, gen;		/* MATCHED: the entry */
	uint64_t tag;			/* MATCHED: the TMH's tag */
	uint32_t app_ctx;		/* ... and app_ctx */
	uint64_t rv_addr;		/* RNDV: the RVH, host order */
	uint32_t rv_rkey, rv_len;
	uint8_t head[SHCA_TMH_LEN + SHCA_RVH_LEN];	/* RNDV: as sent */
	struct shca_xfer x;		/* MATCHED: the message past its TMH */
	struct iovec local[SHCA_TM_RX_IOV];
	union {				/* MATCHED: the entry as a WQE */
		struct shca_recv_wqe_shm w;
		char b[sizeof(struct shca_recv_wqe_shm) +
		       SHCA_TM_MAX_SGE * sizeof(struct ibv_sge)];
	} wqe;
};

/* A RNDV request's RVH and where its data lie in the sender, found
 * before the receiver's lock (the sender's MR table is not read under
 * it): rv.ret 0 with src, -EACCES (the READ's checks failed), -ENOENT
 * (no RNDV the rules could match: length, no rndv_src). */
struct shca_tm_rndv {
	int ret;
	uint64_t addr;
	uint32_t rkey, len;
	struct iovec src;
};
void shca_tm_rx_rndv_src(const struct shca_xfer *x, struct shca_tm_rndv *rv);

/* With rq's lock held: classify x for rq (t->cls PLAIN if rq is no TM
 * SRQ); a MATCHED entry stays posted until shca_tm_rx_consume. */
void shca_tm_rx_classify(void *base, size_t size, struct shca_rq_shm *rq,
			 const struct shca_xfer *x, struct shca_tm_rx *t);
/* With rq's lock held, in place of popping the WQE: the WQE (or the
 * matched tag) is used up; an unexpected message is counted. */
void shca_tm_rx_consume(struct shca_rq_shm *rq, struct shca_tm_rx *t);
/* The completion of a TM SRQ's receive: opcode and flags (a matched
 * rendezvous's data completion; its match completion is
 * shca_tm_rx_rndv_match). */
void shca_tm_rx_wc(const struct shca_tm_rx *t, struct ibv_wc *wc);
void shca_tm_rx_rndv_match(struct ibv_wc *wc);
/* Does a TM completion carry its tag (shca_cqe_tm_pack)? */
bool shca_tm_rx_tagged(const struct shca_tm_rx *t);

#endif
