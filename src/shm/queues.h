/* SPDX-License-Identifier: MIT */
/*
 * Operations on the queues that live in an arena (arena.h), usable by the
 * owner and by a peer that mapped the arena.  "base/size" name the arena
 * mapping in the calling process.
 */
#ifndef SOFTHCA_SHM_QUEUES_H
#define SOFTHCA_SHM_QUEUES_H

#include <stdbool.h>
#include <infiniband/verbs.h>

#include "arena.h"

/* Results of shca_cqshm_push */
enum {
	SHCA_CQ_PUSHED = 0,	/* stored */
	SHCA_CQ_FIRED = 1,	/* stored, and the arm fired: notify the owner */
	SHCA_CQ_OVERRUN = 2,	/* lost: the CQ overran (first time) */
	SHCA_CQ_DEAD = 3,	/* lost: the CQ is already in error */
};

/*
 * The owner's ring of its CQ and the ring's slot count, as the owner keeps
 * them, process-local: its polls, its own pushes, fini and resize use
 * these, not the offset and size in the arena, which a peer can rewrite
 * (arena.h) and which a poll would otherwise check again every time.
 * Changed by resize under the CQ's lock and the owner's consumer lock.
 */
struct shca_cq_ring {
	struct shca_cqe *ring;
	uint32_t slots;
};

/* Initialise a CQ in this process's arena, filling *r; 0 or -errno. */
int shca_cqshm_init(struct shca_cq_shm *cq, uint32_t cqe, bool timestamps,
		    struct shca_cq_ring *r);
void shca_cqshm_fini(struct shca_cq_shm *cq, struct shca_cq_ring *r);
/* Move to a new ring; -EINVAL if it holds more than cqe entries.  Under
 * the owner's consumer lock. */
int shca_cqshm_resize(struct shca_cq_shm *cq, uint32_t cqe,
		      struct shca_cq_ring *r);

/* A completion into cq, a peer's (the ring as the arena mapped at base
 * says) or, _own, the owner's (its ring r). */
int shca_cqshm_push(void *base, size_t size, struct shca_cq_shm *cq,
		    const struct ibv_wc *wc, bool solicited);
int shca_cqshm_push_own(struct shca_cq_shm *cq, const struct shca_cq_ring *r,
			const struct ibv_wc *wc, bool solicited);
/* Owner: the next entry of its ring r (NULL if empty); consume with
 * _pop. */
struct shca_cqe *shca_cqshm_peek(struct shca_cq_shm *cq,
				 const struct shca_cq_ring *r);
void shca_cqshm_pop(struct shca_cq_shm *cq);
uint32_t shca_cqshm_count(struct shca_cq_shm *cq);
void shca_cqshm_arm(struct shca_cq_shm *cq, bool solicited_only);
/* Owner: take qpn's entries out of its ring r (flushed_only: its
 * IBV_WC_WR_FLUSH_ERR ones only), the others keep their order. */
/* drop: called with each entry taken out (NULL: none) */
void shca_cqshm_clean(struct shca_cq_shm *cq, const struct shca_cq_ring *r,
		      uint32_t qpn, bool flushed_only,
		      void (*drop)(const struct ibv_wc *wc));

static inline uint32_t shca_cq_size_for(uint32_t cqe)
{
	uint32_t s = 1;

	while (s < cqe + 1)
		s <<= 1;
	return s;
}

/*
 * RQ / SRQ rings.  The owner keeps its ring, the slot count and the WQE
 * size process-local, as for the CQ's (struct shca_cq_ring): its posts
 * and resizes use these; the consumers (peers, and the owner's own
 * responder and flush) find the ring through the arena, checked.
 */
struct shca_rq_ring {
	char *ring;
	uint32_t slots, wqe_size;
};

int shca_rqshm_init(struct shca_rq_shm *rq, uint32_t max_wr, uint32_t max_sge,
		    struct shca_rq_ring *r);
void shca_rqshm_fini(struct shca_rq_shm *rq, struct shca_rq_ring *r);
int shca_rqshm_resize(struct shca_rq_shm *rq, uint32_t max_wr,
		      struct shca_rq_ring *r);
uint32_t shca_rqshm_count(struct shca_rq_shm *rq);
/*
 * Owner, under its posting lock: are max WQEs or more in the ring?
 * *head_seen: the owner's own copy of the last head it read (0 after
 * init and resize), read again only when it says full.
 */
bool shca_rqshm_full(struct shca_rq_shm *rq, uint32_t *head_seen,
		     uint32_t max);
/* Owner: append one WR to its ring r (the caller checked num_sge);
 * -ENOMEM if full. */
int shca_rqshm_post(struct shca_rq_shm *rq, const struct shca_rq_ring *r,
		    uint32_t *head_seen, const struct ibv_recv_wr *wr,
		    uint32_t imp);

/*
 * Consumer, with rq->lock held: the oldest WQE, or NULL if empty; pop
 * removes it.  A peer passes its mapping of the arena.  *nsge: the
 * WQE's SGE count as checked against the slot (read once: the owner's
 * bytes may change under a peer, so a peer walks only these).
 */
struct shca_recv_wqe_shm *shca_rqshm_peek(void *base, size_t size,
					  struct shca_rq_shm *rq,
					  uint32_t *nsge);
void shca_rqshm_pop(struct shca_rq_shm *rq);

#endif
