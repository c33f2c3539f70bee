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
};

struct shca_tm_rx {
	enum shca_tm_class cls;
	struct shca_tm_shm *tm;		/* in the responder's arena */
	uint32_t idx, gen;		/* MATCHED: the entry */
	uint64_t tag;			/* MATCHED: the TMH's tag */
	uint32_t app_ctx;		/* ... and app_ctx */
	struct shca_xfer x;		/* MATCHED: the message past its TMH */
	struct iovec local[SHCA_TM_RX_IOV];
	union {				/* MATCHED: the entry as a WQE */
		struct shca_recv_wqe_shm w;
		char b[sizeof(struct shca_recv_wqe_shm) +
		       SHCA_TM_MAX_SGE * sizeof(struct ibv_sge)];
	} wqe;
};

/* With rq's lock held: classify x for rq (t->cls PLAIN if rq is no TM
 * SRQ); a MATCHED entry stays posted until shca_tm_rx_consume. */
void shca_tm_rx_classify(void *base, size_t size, struct shca_rq_shm *rq,
			 const struct shca_xfer *x, struct shca_tm_rx *t);
/* With rq's lock held, in place of popping the WQE: the WQE (or the
 * matched tag) is used up; an unexpected message is counted. */
void shca_tm_rx_consume(struct shca_rq_shm *rq, struct shca_tm_rx *t);
/* The completion of a TM SRQ's receive: opcode and flags. */
void shca_tm_rx_wc(const struct shca_tm_rx *t, struct ibv_wc *wc);

#endif
