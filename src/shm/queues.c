// SPDX-License-Identifier: MIT
/*
 * Arena queues.  Counters only move forward and are taken modulo the ring
 * size; a producer publishes with a release store of its counter, a
 * consumer reads the other side's counter with an acquire load.
 */
#include <errno.h>
#include <string.h>
#include <time.h>

#include "../common/util.h"
#include "queues.h"

/* The device clock (hca_core_clock 1 GHz): CLOCK_MONOTONIC, which is
 * also what ibv_query_rt_values_ex reads. */
static uint64_t device_clock_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ------------------------------------------------------------------ */
/* CQ                                                                  */

int shca_cqshm_init(struct shca_cq_shm *cq, uint32_t cqe, bool timestamps,
		    struct shca_cq_ring *r)
{
	struct shca_arena *a = shca_arena_self();
	uint32_t size = shca_cq_size_for(cqe);
	void *ring;

	if (!a)
		return -errno;
	ring = shca_arena_alloc((size_t)size * sizeof(struct shca_cqe));
	if (!ring)
		return -ENOMEM;
	shca_plock_init(&cq->lock);
	cq->size = size;
	cq->cqe = size - 1;
	cq->head = cq->tail = cq->head_seen = 0;
	cq->timestamps = timestamps;
	cq->ring_off = shca_arena_off(a, ring);
	r->ring = ring;
	r->slots = size;
	return 0;
}

void shca_cqshm_fini(struct shca_cq_shm *cq, struct shca_cq_ring *r)
{
	shca_arena_free(r->ring);
	r->ring = NULL;
	r->slots = 0;
	cq->ring_off = 0;
}

/* Entry e is counter i's, there for the owner (SHCA_CQE_PHASE). */
static void cqe_publish(struct shca_cqe *e, uint64_t ts, uint32_t i,
			uint32_t slots)
{
	__atomic_store_n(&e->ts_ns,
			 (ts & ~SHCA_CQE_PHASE) | shca_cqe_phase(i, slots),
			 __ATOMIC_RELEASE);
}

/*
 * The ring and its slot count as the arena says, each read once (another
 * process may rewrite them at any time): NULL unless the count is a power
 * of two and the whole ring lies inside the arena, aligned for its
 * entries, so that any counter masked with *slots - 1 stays inside the
 * ring and every entry can be read (the poller reads the entry at its
 * head even when nothing waits: the phase).
 */
static struct shca_cqe *cq_ring(void *base, size_t size,
				struct shca_cq_shm *cq, uint32_t *slots)
{
	uint32_t n = __atomic_load_n(&cq->size, __ATOMIC_RELAXED);
	uint64_t off = __atomic_load_n(&cq->ring_off, __ATOMIC_RELAXED);

	*slots = n;
	if (!n || (n & (n - 1)) || off % _Alignof(struct shca_cqe))
		return NULL;
	return shca_arena_ptr(base, size, off,
			      (size_t)n * sizeof(struct shca_cqe));
}

int shca_cqshm_resize(struct shca_cq_shm *cq, uint32_t cqe,
		      struct shca_cq_ring *r)
{
	struct shca_arena *a = shca_arena_self();
	uint32_t size = shca_cq_size_for(cqe), n, i;
	struct shca_cqe *ring;

	ring = shca_arena_alloc((size_t)size * sizeof(*ring));
	if (!ring)
		return -ENOMEM;
	shca_plock_lock(&cq->lock);
	n = cq->tail - __atomic_load_n(&cq->head, __ATOMIC_ACQUIRE);
	if (n > size - 1) {
		shca_plock_unlock(&cq->lock);
		shca_arena_free(ring);
		return -EINVAL;
	}
	/* the entries between the arena's counters (a peer may have moved
	 * them: n is bounded above), read from our own ring */
	for (i = 0; i < n; i++) {
		ring[i] = r->ring[(cq->head + i) & (r->slots - 1)];
		cqe_publish(&ring[i], ring[i].ts_ns, i, size);
	}
	shca_arena_free(r->ring);
	r->ring = ring;
	r->slots = size;
	cq->ring_off = shca_arena_off(a, ring);
	cq->size = size;
	cq->cqe = size - 1;
	cq->head_seen = 0;
	__atomic_store_n(&cq->head, 0, __ATOMIC_RELEASE);
	__atomic_store_n(&cq->tail, n, __ATOMIC_RELEASE);
	shca_plock_unlock(&cq->lock);
	return 0;
}

/*
 * IBA o11-5.2.2: more completions than the CQ holds is an overrun; the CQ
 * enters the error state and takes no more.  Arming for solicited events
 * fires on solicited completions and on completions in error.
 */
/* The push into ring (slots entries; NULL: broken), the CQ's lock held */
static int push_locked(struct shca_cq_shm *cq, struct shca_cqe *ring,
		       uint32_t slots, const struct ibv_wc *wc, bool solicited)
{
	struct shca_cqe *e;

	if (cq->overflow || !ring)
		return SHCA_CQ_DEAD;
	/* the owner's line only when the head seen says full */
	if (cq->tail - cq->head_seen >= cq->cqe)
		cq->head_seen = __atomic_load_n(&cq->head, __ATOMIC_ACQUIRE);
	if (cq->tail - cq->head_seen >= cq->cqe) {
		cq->overflow = 1;
		return SHCA_CQ_OVERRUN;
	}
	e = &ring[cq->tail & (slots - 1)];
	e->wc = *wc;
	cqe_publish(e, cq->timestamps ? device_clock_ns() : 0, cq->tail,
		    slots);
	__atomic_store_n(&cq->tail, cq->tail + 1, __ATOMIC_RELEASE);
	if (cq->armed == SHCA_CQ_ARM_ALL ||
	    (cq->armed == SHCA_CQ_ARM_SOLICITED &&
	     (solicited || wc->status != IBV_WC_SUCCESS))) {
		cq->armed = SHCA_CQ_ARM_NONE;
		return SHCA_CQ_FIRED;
	}
	return SHCA_CQ_PUSHED;
}

int shca_cqshm_push(void *base, size_t size, struct shca_cq_shm *cq,
		    const struct ibv_wc *wc, bool solicited)
{
	struct shca_cqe *ring;
	uint32_t slots;
	int ret;

	shca_plock_lock(&cq->lock);
	ring = cq_ring(base, size, cq, &slots);
	ret = push_locked(cq, ring, slots, wc, solicited);
	shca_plock_unlock(&cq->lock);
	return ret;
}

int shca_cqshm_push_own(struct shca_cq_shm *cq, const struct shca_cq_ring *r,
			const struct ibv_wc *wc, bool solicited)
{
	int ret;

	/* r as resize leaves it under this lock */
	shca_plock_lock(&cq->lock);
	ret = push_locked(cq, r->ring, r->slots, wc, solicited);
	shca_plock_unlock(&cq->lock);
	return ret;
}

struct shca_cqe *shca_cqshm_peek(struct shca_cq_shm *cq,
				 const struct shca_cq_ring *r)
{
	uint32_t head = cq->head;
	struct shca_cqe *e;

	if (!r->ring)
		return NULL;
	/* the entry's phase, not the producers' counter (SHCA_CQE_PHASE) */
	e = &r->ring[head & (r->slots - 1)];
	if ((__atomic_load_n(&e->ts_ns, __ATOMIC_ACQUIRE) & SHCA_CQE_PHASE) !=
	    shca_cqe_phase(head, r->slots))
		return NULL;
	return e;
}

void shca_cqshm_pop(struct shca_cq_shm *cq)
{
	__atomic_store_n(&cq->head, cq->head + 1, __ATOMIC_RELEASE);
}

uint32_t shca_cqshm_count(struct shca_cq_shm *cq)
{
	return __atomic_load_n(&cq->tail, __ATOMIC_ACQUIRE) - cq->head;
}

/*
 * Drop the completions of QP qpn that are still in the CQ, keeping the
 * others in order: what a QP reset or destroy does on mlx4/mlx5 (their
 * cq_clean), so that a reused QP never meets its old completions.  The
 * owner calls it, with its consumer lock held.
 */
void shca_cqshm_clean(struct shca_cq_shm *cq, const struct shca_cq_ring *r,
		      uint32_t qpn, bool flushed_only,
		      void (*drop)(const struct ibv_wc *wc))
{
	uint32_t i, keep, head, tail, slots = r->slots;
	struct shca_cqe *ring = r->ring;

	if (!ring)
		return;
	shca_plock_lock(&cq->lock);
	head = __atomic_load_n(&cq->head, __ATOMIC_ACQUIRE);
	tail = cq->tail;
	/* peers push here: never more than the ring */
	if (tail - head > slots)
		head = tail - slots;
	/* walk from the newest down, moving kept entries to the tail end */
	keep = tail;
	for (i = tail; i != head; i--) {
		struct shca_cqe *e = &ring[(i - 1) & (slots - 1)];

		if (e->wc.qp_num == qpn &&
		    (!flushed_only || e->wc.status == IBV_WC_WR_FLUSH_ERR)) {
			if (drop)
				drop(&e->wc);
			continue;
		}
		keep--;
		if (keep != i - 1) {
			struct shca_cqe *k = &ring[keep & (slots - 1)];

			*k = *e;
			cqe_publish(k, k->ts_ns, keep, slots);
		}
	}
	__atomic_store_n(&cq->head, keep, __ATOMIC_RELEASE);
	shca_plock_unlock(&cq->lock);
}

void shca_cqshm_arm(struct shca_cq_shm *cq, bool solicited_only)
{
	shca_plock_lock(&cq->lock);
	if (!solicited_only)
		cq->armed = SHCA_CQ_ARM_ALL;
	else if (cq->armed == SHCA_CQ_ARM_NONE)
		cq->armed = SHCA_CQ_ARM_SOLICITED;
	shca_plock_unlock(&cq->lock);
}

/* ------------------------------------------------------------------ */
/* RQ / SRQ                                                            */

static size_t rq_wqe_size(uint32_t max_sge)
{
	size_t s = sizeof(struct shca_recv_wqe_shm) +
		   (size_t)MAX(max_sge, 1u) * sizeof(struct ibv_sge);

	return (s + 15) & ~(size_t)15;
}

static void *rq_alloc_ring(uint32_t slots, size_t wqe_size)
{
	return shca_arena_alloc((size_t)slots * wqe_size);
}

int shca_rqshm_init(struct shca_rq_shm *rq, uint32_t max_wr, uint32_t max_sge,
		    struct shca_rq_ring *r)
{
	struct shca_arena *a = shca_arena_self();
	uint32_t size = shca_roundup_pow2(MAX(max_wr, 1u));
	size_t wsz = rq_wqe_size(max_sge);
	void *ring;

	if (!a)
		return -errno;
	ring = rq_alloc_ring(size, wsz);
	if (!ring)
		return -ENOMEM;
	shca_plock_init(&rq->lock);
	rq->size = size;
	rq->max_wr = size;
	rq->max_sge = MAX(max_sge, 1u);
	rq->wqe_size = (uint32_t)wsz;
	rq->head = rq->tail = rq->tail_seen = 0;
	rq->buf_off = shca_arena_off(a, ring);
	r->ring = ring;
	r->slots = size;
	r->wqe_size = (uint32_t)wsz;
	return 0;
}

void shca_rqshm_fini(struct shca_rq_shm *rq, struct shca_rq_ring *r)
{
	shca_arena_free(r->ring);
	memset(r, 0, sizeof(*r));
	rq->buf_off = 0;
}

/* WQE i, NULL unless the ring lies inside the arena (cq_ring's rule);
 * *sges: how many SGEs the slot has room for. */
static struct shca_recv_wqe_shm *rq_slot(void *base, size_t size,
					 struct shca_rq_shm *rq, uint32_t i,
					 uint32_t *sges)
{
	uint32_t n = __atomic_load_n(&rq->size, __ATOMIC_RELAXED);
	uint32_t wsz = __atomic_load_n(&rq->wqe_size, __ATOMIC_RELAXED);
	uint64_t off = __atomic_load_n(&rq->buf_off, __ATOMIC_RELAXED);
	char *ring;

	if (!n || (n & (n - 1)) || wsz < sizeof(struct shca_recv_wqe_shm) ||
	    (off | wsz) % _Alignof(struct shca_recv_wqe_shm))
		return NULL;
	ring = shca_arena_ptr(base, size, off, (size_t)n * wsz);
	if (!ring)
		return NULL;
	*sges = (wsz - (uint32_t)sizeof(struct shca_recv_wqe_shm)) /
		(uint32_t)sizeof(struct ibv_sge);
	return (struct shca_recv_wqe_shm *)(ring + (size_t)(i & (n - 1)) *
					    wsz);
}

/* WQE i of the owner's own ring r */
static struct shca_recv_wqe_shm *rq_own_slot(const struct shca_rq_ring *r,
					     uint32_t i)
{
	return (struct shca_recv_wqe_shm *)(r->ring +
					    (size_t)(i & (r->slots - 1)) *
						    r->wqe_size);
}

int shca_rqshm_resize(struct shca_rq_shm *rq, uint32_t max_wr,
		      struct shca_rq_ring *r)
{
	struct shca_arena *a = shca_arena_self();
	uint32_t size = shca_roundup_pow2(MAX(max_wr, 1u)), n, i;
	uint32_t wsz = r->wqe_size;
	char *ring, *old;

	ring = rq_alloc_ring(size, wsz);
	if (!ring)
		return -ENOMEM;
	shca_plock_lock(&rq->lock);
	n = __atomic_load_n(&rq->tail, __ATOMIC_ACQUIRE) - rq->head;
	if (n > size) {
		shca_plock_unlock(&rq->lock);
		shca_arena_free(ring);
		return -EINVAL;
	}
	for (i = 0; i < n; i++)
		memcpy(ring + (size_t)i * wsz, rq_own_slot(r, rq->head + i),
		       wsz);
	old = r->ring;
	r->ring = ring;
	r->slots = size;
	rq->buf_off = shca_arena_off(a, ring);
	rq->size = size;
	rq->max_wr = size;
	rq->head = 0;
	rq->tail_seen = 0;
	__atomic_store_n(&rq->tail, n, __ATOMIC_RELEASE);
	shca_plock_unlock(&rq->lock);
	shca_arena_free(old);
	return 0;
}

uint32_t shca_rqshm_count(struct shca_rq_shm *rq)
{
	return __atomic_load_n(&rq->tail, __ATOMIC_ACQUIRE) -
	       __atomic_load_n(&rq->head, __ATOMIC_ACQUIRE);
}

bool shca_rqshm_full(struct shca_rq_shm *rq, uint32_t *head_seen,
		     uint32_t max)
{
	uint32_t tail = rq->tail;

	/* the consumers' line only when the head seen says full */
	if (tail - *head_seen < max)
		return false;
	*head_seen = __atomic_load_n(&rq->head, __ATOMIC_ACQUIRE);
	return tail - *head_seen >= max;
}

int shca_rqshm_post(struct shca_rq_shm *rq, const struct shca_rq_ring *r,
		    uint32_t *head_seen, const struct ibv_recv_wr *wr,
		    uint32_t imp)
{
	struct shca_recv_wqe_shm *w;
	uint32_t tail = rq->tail;
	int i;

	if (!r->ring)
		return -EIO;
	if (shca_rqshm_full(rq, head_seen, r->slots))
		return -ENOMEM;
	/* our own ring: its slot holds the max_sge the caller checked */
	w = rq_own_slot(r, tail);
	w->wr_id = wr->wr_id;
	w->num_sge = (uint32_t)wr->num_sge;
	w->imp = imp;
	for (i = 0; i < wr->num_sge; i++)
		w->sge[i] = wr->sg_list[i];
	__atomic_store_n(&rq->tail, tail + 1, __ATOMIC_RELEASE);
	return 0;
}

struct shca_recv_wqe_shm *shca_rqshm_peek(void *base, size_t size,
					  struct shca_rq_shm *rq,
					  uint32_t *nsge)
{
	struct shca_recv_wqe_shm *w;
	uint32_t room, n, head = rq->head;

	/* the owner's line only when the tail seen has no more */
	if (rq->tail_seen == head) {
		rq->tail_seen = __atomic_load_n(&rq->tail, __ATOMIC_ACQUIRE);
		if (rq->tail_seen == head)
			return NULL;
	}
	w = rq_slot(base, size, rq, head, &room);
	if (!w)
		return NULL;
	/* the count checked is the count used: read once */
	n = __atomic_load_n(&w->num_sge, __ATOMIC_RELAXED);
	if (n > rq->max_sge || n > room)
		return NULL;	/* corrupt: never trust a count */
	*nsge = n;
	return w;
}

void shca_rqshm_pop(struct shca_rq_shm *rq)
{
	__atomic_store_n(&rq->head, rq->head + 1, __ATOMIC_RELEASE);
}
