// SPDX-License-Identifier: MIT
/*
 * Queue pairs: the QP table, create and destroy, the send queue, and
 * posting (ibv_post_send, ibv_post_recv and the ibv_wr_* builder of
 * ibv_qp_ex).  The state machine and ibv_query_qp are in qp_modify.c,
 * multicast attachment with the other addressing verbs in ah.c.
 *
 * QP numbers say where a QP lives (DESIGN.md "Addressing"): QPN =
 * slot << 14 | index, index a slot of the process-wide QP table.  Indexes
 * are handed out round robin from a random start, so a freed index comes
 * back only after every other one was used: traffic for an old QP meets no
 * new one.  QPN 0, 1 and 0xffffff are never handed out.
 *
 * Posting checks each WR and queues it, or completes it at once with
 * IBV_WC_WR_FLUSH_ERR in the error states; on the first WR it cannot
 * take it stops, points *bad_wr there and keeps the earlier ones posted
 * (rxe's rules: a full queue is ENOMEM, anything else EINVAL).  Queued
 * send WQEs go to shca_sq_execute(), where the transport takes over.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../common/nocancel.h"
#include "../common/slot.h"
#include "../net/net.h"
#include "../net/transport.h"
#include "../common/verbs_ext.h"
#include "shca.h"

#define QPT(t)		(1u << (t))
#define QPT_RCX	(QPT(IBV_QPT_RC) | QPT(IBV_QPT_XRC_SEND))
#define QPT_CONN	(QPT_RCX | QPT(IBV_QPT_UC))
#define QPT_ALL		(QPT_CONN | QPT(IBV_QPT_UD))

/* ------------------------------------------------------------------ */
/* The work-request table                                              */

enum wr_class {
	WR_SEND,	/* data from local memory or inline */
	WR_READ,	/* data into local memory: never inline */
	WR_ATOMIC,	/* 8 bytes into local memory; aligned remote */
	WR_PLACE,	/* ATOMIC_WRITE, FLUSH (IBA Annex A19): no local
			 * memory; built by ibv_wr_* only */
	WR_LOCAL,	/* no message: bind, invalidate (mw.c) */
};

/*
 * One row per opcode softhca executes; an opcode without a row (TSO) is
 * not supported.  ATOMIC_WRITE and FLUSH have no ibv_send_wr form in rdma-core (no field for the 8 bytes, the
 * length, type and level): ibv_post_send refuses them, ibv_wr_atomic_write
 * and ibv_wr_flush build them, into wr.atomic (remote_addr, rkey; swap:
 * the 8 bytes of ATOMIC_WRITE as they lie in memory; compare_add: the
 * FLUSH length, swap: its type | level << 8).
 */
static const struct wr_info {
	uint32_t qp_types;		/* where the opcode is legal */
	enum wr_class cls;
	enum ibv_wc_opcode wc_opcode;	/* of its completion */
	uint64_t ops_flag;		/* IBV_QP_EX_WITH_* */
} wr_table[] = {
	[IBV_WR_RDMA_WRITE] = { QPT_CONN, WR_SEND, IBV_WC_RDMA_WRITE,
				IBV_QP_EX_WITH_RDMA_WRITE },
	[IBV_WR_RDMA_WRITE_WITH_IMM] = { QPT_CONN, WR_SEND, IBV_WC_RDMA_WRITE,
					 IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM },
	[IBV_WR_SEND] = { QPT_ALL, WR_SEND, IBV_WC_SEND,
			  IBV_QP_EX_WITH_SEND },
	[IBV_WR_SEND_WITH_IMM] = { QPT_ALL, WR_SEND, IBV_WC_SEND,
				   IBV_QP_EX_WITH_SEND_WITH_IMM },
	[IBV_WR_RDMA_READ] = { QPT_RCX, WR_READ, IBV_WC_RDMA_READ,
			       IBV_QP_EX_WITH_RDMA_READ },
	[IBV_WR_ATOMIC_CMP_AND_SWP] = { QPT_RCX, WR_ATOMIC,
					IBV_WC_COMP_SWAP,
					IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP },
	[IBV_WR_ATOMIC_FETCH_AND_ADD] = { QPT_RCX, WR_ATOMIC,
					  IBV_WC_FETCH_ADD,
					  IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD },
	[IBV_WR_ATOMIC_WRITE] = { QPT_RCX, WR_PLACE,
				  IBV_WC_ATOMIC_WRITE,
				  IBV_QP_EX_WITH_ATOMIC_WRITE },
	[SHCA_WR_FLUSH] = { QPT_RCX, WR_PLACE, SHCA_WC_FLUSH,
			    SHCA_QP_EX_WITH_FLUSH },
	/* memory windows (mw.c): SEND_WITH_INV has opcodes on RC only
	 * (IBA 9.2); binds and invalidations on connected QPs, as mlx5 */
	[IBV_WR_SEND_WITH_INV] = { QPT_RCX, WR_SEND, IBV_WC_SEND,
				   IBV_QP_EX_WITH_SEND_WITH_INV },
	[IBV_WR_BIND_MW] = { QPT_CONN, WR_LOCAL, IBV_WC_BIND_MW,
			     IBV_QP_EX_WITH_BIND_MW },
	[IBV_WR_LOCAL_INV] = { QPT_CONN, WR_LOCAL, IBV_WC_LOCAL_INV,
			       IBV_QP_EX_WITH_LOCAL_INV },
};

static const struct wr_info *wr_info(unsigned int opcode)
{
	if (opcode >= ARRAY_SIZE(wr_table) || !wr_table[opcode].qp_types)
		return NULL;
	return &wr_table[opcode];
}

enum ibv_wc_opcode shca_wr_wc_opcode(enum ibv_wr_opcode opcode)
{
	const struct wr_info *op = wr_info(opcode);

	return op ? op->wc_opcode : IBV_WC_SEND;
}

bool shca_wr_is_local(enum ibv_wr_opcode opcode)
{
	const struct wr_info *op = wr_info(opcode);

	return op && op->cls == WR_LOCAL;
}

enum ibv_wc_status shca_wr_local_exec(struct shca_qp *qp,
				      const struct shca_send_wqe *w)
{
	if (w->wr.opcode == IBV_WR_BIND_MW)
		return shca_mw_bind_exec(qp, &w->wr);
	return shca_local_inv_exec(qp, w->wr.invalidate_rkey);
}

bool shca_wr_legal(enum ibv_qp_type type, enum ibv_wr_opcode opcode)
{
	const struct wr_info *op = wr_info(opcode);

	return op && (op->qp_types & QPT(type));
}

/* The IBV_QP_EX_WITH_* flags softhca supports on a QP type. */
static uint64_t send_ops_supported(enum ibv_qp_type type)
{
	uint64_t flags = 0;
	unsigned int i;

	for (i = 0; i < ARRAY_SIZE(wr_table); i++)
		if (wr_table[i].qp_types & QPT(type))
			flags |= wr_table[i].ops_flag;
	return flags;
}

/* ------------------------------------------------------------------ */
/* The QP table                                                        */

static pthread_mutex_t qp_table_lock = PTHREAD_MUTEX_INITIALIZER;
static struct shca_qp *qp_table[SHCA_QPN_INDEX_MASK + 1];
static uint32_t qp_next_index;
static bool qp_next_seeded;
static struct shca_qp *qp_list;		/* the same QPs, for walking */
static bool qp_index_xsrq[SHCA_QPN_INDEX_MASK + 1]; /* XRC SRQs' numbers */

/* A free index of the table (qp_table_lock held): 0 or -ENOMEM. */
static int qp_index_take(int slot, uint32_t *out)
{
	uint32_t i, idx;

	if (!qp_next_seeded) {
		qp_next_index = shca_random_u32() & SHCA_QPN_INDEX_MASK;
		qp_next_seeded = true;
	}
	for (i = 0; i <= SHCA_QPN_INDEX_MASK; i++) {
		idx = (qp_next_index + i) & SHCA_QPN_INDEX_MASK;
		if (qp_table[idx] || qp_index_xsrq[idx] ||
		    !shca_qpn_index_valid(slot, idx))
			continue;
		qp_next_index = idx + 1;
		*out = idx;
		return 0;
	}
	return -ENOMEM;
}

/* Publish shm as the arena's entry idx (peers find it by number). */
static void qp_index_publish(uint32_t idx, struct shca_qp_shm *shm)
{
	__atomic_store_n(&shca_arena_qp_table(shca_arena_self()->base)[idx],
			 shca_arena_off(shca_arena_self(), shm),
			 __ATOMIC_RELEASE);
}

/*
 * An XRC SRQ's number is a QP number of this process (DESIGN.md
 * "Addressing"): it says which process holds the SRQ, and its entry in
 * the arena's QP table is where responders find the SRQ's ring, CQ and
 * domain (shm->qp_type SHCA_QPT_XRC_SRQ: no request's destination).
 */
int shca_xsrq_number_take(struct shca_qp_shm *shm, uint32_t *index,
			  uint32_t *num)
{
	const struct shca_slot *slot;
	uint32_t idx;
	int ret;

	ret = shca_transport_init();
	if (ret)
		return ret;
	slot = shca_slot_get();
	if (!slot)
		return -errno;
	pthread_mutex_lock(&qp_table_lock);
	ret = qp_index_take(slot->slot, &idx);
	if (!ret) {
		qp_index_xsrq[idx] = true;
		*index = idx;
		*num = shca_qpn_make(slot->slot, idx);
		shm->qpn = *num;
		qp_index_publish(idx, shm);
	}
	pthread_mutex_unlock(&qp_table_lock);
	return ret;
}

void shca_xsrq_number_put(uint32_t index)
{
	pthread_mutex_lock(&qp_table_lock);
	if (qp_index_xsrq[index]) {
		__atomic_store_n(&shca_arena_qp_table(
					 shca_arena_self()->base)[index],
				 0, __ATOMIC_RELEASE);
		qp_index_xsrq[index] = false;
	}
	pthread_mutex_unlock(&qp_table_lock);
}

static int qp_table_insert(struct shca_qp *qp, int slot)
{
	uint32_t idx;
	int ret;

	pthread_mutex_lock(&qp_table_lock);
	ret = qp_index_take(slot, &idx);
	if (!ret) {
		qp_table[idx] = qp;
		qp->next = qp_list;
		qp_list = qp;
		qp->qpn_index = idx;
		qp->ibqp.qp_num = shca_qpn_make(slot, idx);
		qp->shm->qpn = qp->ibqp.qp_num;
		qp_index_publish(idx, qp->shm);
	}
	pthread_mutex_unlock(&qp_table_lock);
	return ret;
}

static void qp_table_remove(struct shca_qp *qp)
{
	struct shca_qp **pp;

	pthread_mutex_lock(&qp_table_lock);
	if (qp_table[qp->qpn_index] == qp) {
		/* peers stop finding it before it goes */
		__atomic_store_n(&qp->shm->qpn, 0, __ATOMIC_RELEASE);
		__atomic_store_n(&shca_arena_qp_table(
					 shca_arena_self()->base)[qp->qpn_index],
				 0, __ATOMIC_RELEASE);
		qp_table[qp->qpn_index] = NULL;
		for (pp = &qp_list; *pp; pp = &(*pp)->next)
			if (*pp == qp) {
				*pp = qp->next;
				break;
			}
	}
	pthread_mutex_unlock(&qp_table_lock);
}

void shca_qp_foreach(void (*fn)(struct shca_qp *qp, void *arg), void *arg)
{
	struct shca_qp *qp;

	pthread_mutex_lock(&qp_table_lock);
	for (qp = qp_list; qp; qp = qp->next)
		fn(qp, arg);
	pthread_mutex_unlock(&qp_table_lock);
}

/*
 * A receive of QP qpn met a bad key after its data arrived (import_key.c:
 * the owner's MR, when the completion was polled): the QP goes to the
 * error state as when the responder meets one, marked for the engine
 * (doorbell.c), under the table's lock so that a QP being destroyed is
 * not touched.
 */
void shca_qp_mark_error(uint32_t qpn)
{
	struct shca_qp *qp;
	bool marked = false;

	if (qpn > 0xffffff)
		return;
	pthread_mutex_lock(&qp_table_lock);
	qp = qp_table[shca_qpn_index(qpn)];
	if (qp && qp->ibqp.qp_num == qpn && qp->shm) {
		__atomic_or_fetch(&qp->shm->pending, SHCA_QP_PEND_ERR,
				  __ATOMIC_ACQ_REL);
		marked = true;
	}
	pthread_mutex_unlock(&qp_table_lock);
	if (marked)
		shca_doorbell_ring();
}

struct shca_qp *shca_qp_lookup(uint32_t qpn)
{
	struct shca_qp *qp;

	if (qpn > 0xffffff)
		return NULL;
	pthread_mutex_lock(&qp_table_lock);
	qp = qp_table[shca_qpn_index(qpn)];
	if (qp && qp->ibqp.qp_num != qpn)
		qp = NULL;	/* another slot: a forked parent's QP */
	pthread_mutex_unlock(&qp_table_lock);
	return qp;
}

uint32_t shca_qp_dest_qpn(uint32_t qpn)
{
	struct shca_qp *qp;
	uint32_t d = 0;

	if (qpn > 0xffffff)
		return 0;
	pthread_mutex_lock(&qp_table_lock);
	qp = qp_table[shca_qpn_index(qpn)];
	if (qp && qp->ibqp.qp_num == qpn && qp->shm)
		d = __atomic_load_n(&qp->shm->dest_qpn, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&qp_table_lock);
	return d;
}

/* ------------------------------------------------------------------ */
/* The send queue                                                      */

static struct shca_send_wqe *sq_entry(const struct shca_sq *sq, uint32_t n)
{
	return (struct shca_send_wqe *)(sq->buf +
					(size_t)(n & (sq->size - 1)) *
						sq->wqe_size);
}

/*
 * A WQE holds max_sge SGEs or max_inline bytes in the same space, so
 * each is what that space allows (at least what was asked for).  The
 * ring is the process's own (the requester runs here), so a parent
 * domain's allocator provides it (pdom.c), page-aligned as mlx5 asks.
 */
static int sq_init(struct shca_sq *sq, struct shca_pd *pd, uint32_t max_wr,
		   uint32_t max_sge, uint32_t max_inline, uint32_t gen_room)
{
	int ret;

	size_t area = MAX((size_t)max_sge * sizeof(struct ibv_sge),
			  (size_t)max_inline);

	area = (area + sizeof(struct ibv_sge) - 1) &
	       ~(sizeof(struct ibv_sge) - 1);
	memset(sq, 0, sizeof(*sq));
	sq->max_wr = max_wr ? shca_roundup_pow2(max_wr) : 0;
	sq->max_sge = MIN(area / sizeof(struct ibv_sge), SHCA_MAX_SGE);
	sq->max_inline = MIN(area, SHCA_MAX_INLINE);
	/* room aside for the WQEs the QP makes itself (transport.c) */
	sq->gen_room = gen_room;
	sq->size = shca_roundup_pow2(sq->max_wr + gen_room);
	sq->wqe_size = sizeof(struct shca_send_wqe) + area;
	ret = shca_qbuf_alloc(&sq->mem, pd, (size_t)sq->size * sq->wqe_size,
			      shca_page_size(), SHCA_RES_TYPE_SQ);
	if (ret)
		return ret;
	sq->buf = sq->mem.addr;
	pthread_mutex_init(&sq->lock, NULL);
	return 0;
}

/* Before the QP lets go of its PD: the ring may be the PD's.  The
 * bounces of WQEs never completed (import_key.c) go. */
static void sq_destroy(struct shca_sq *sq)
{
	for (; sq->head != sq->tail; sq->head++)
		if (sq_entry(sq, sq->head)->imp)
			shca_imp_drop(sq_entry(sq, sq->head)->imp, false);
	pthread_mutex_destroy(&sq->lock);
	shca_qbuf_free(&sq->mem);
	sq->buf = NULL;
}

/*
 * The send queue belongs to the QP's exec_lock: posts queue under it
 * (sq_post), the requester takes the head under it, and the flushes and
 * RESET of qp_modify.c and completer.c hold it (with sq.lock, which
 * orders them among themselves).  The counters are still stored with
 * release and loaded with acquire, so a slot is written again only
 * after the requester let go of it whichever thread holds the lock.
 */
struct shca_send_wqe *shca_sq_head(struct shca_qp *qp)
{
	uint32_t head, tail;

	return shca_sq_first(qp, &head, &tail);
}

struct shca_send_wqe *shca_sq_at(struct shca_qp *qp, uint32_t idx,
				 uint32_t *head, uint32_t *tail)
{
	*head = qp->sq.head;
	*tail = __atomic_load_n(&qp->sq.tail, __ATOMIC_ACQUIRE);
	return idx - *head < *tail - *head ? sq_entry(&qp->sq, idx) : NULL;
}

struct shca_send_wqe *shca_sq_first(struct shca_qp *qp, uint32_t *head,
				    uint32_t *tail)
{
	return shca_sq_at(qp, qp->sq.head, head, tail);
}

/* The head WQE leaves (exec_lock held); a WQE of the QP's own leaves
 * the room kept aside for them too. */
void shca_sq_pop(struct shca_qp *qp)
{
	struct shca_sq *sq = &qp->sq;
	uint32_t head = sq->head;

	if (head == __atomic_load_n(&sq->tail, __ATOMIC_ACQUIRE))
		return;
	if (sq_entry(sq, head)->gen && sq->ngen)
		sq->ngen--;
	__atomic_store_n(&sq->head, head + 1, __ATOMIC_RELEASE);
}

/* WQEs in the queue that count against max_wr (exec_lock held). */
static uint32_t sq_used(const struct shca_sq *sq)
{
	return sq->tail - __atomic_load_n(&sq->head, __ATOMIC_ACQUIRE) -
	       sq->ngen;
}

/*
 * A WQE of the QP's own (a rendezvous's READ or FIN, net/transport.c),
 * queued behind the application's as a NIC queues the WQEs it makes:
 * within the room kept aside for them, so that the application's
 * max_send_wr stays whole.
 */
int shca_sq_push_gen(struct shca_qp *qp, const struct ibv_send_wr *wr,
		     uint32_t gen)
{
	struct shca_sq *sq = &qp->sq;
	struct shca_send_wqe *w;
	int ret = 0;

	pthread_mutex_lock(&sq->lock);
	if (qp->attr.qp_state != IBV_QPS_RTS &&
	    qp->attr.qp_state != IBV_QPS_SQD) {
		ret = -EINVAL;
	} else if (sq->ngen >= sq->gen_room ||
		   sq->tail - __atomic_load_n(&sq->head, __ATOMIC_ACQUIRE) >=
			   sq->size) {
		ret = -ENOMEM;
	} else {
		w = sq_entry(sq, sq->tail);
		w->wr = *wr;
		w->wr.next = NULL;
		w->wr.sg_list = w->sge;
		w->wr.num_sge = 0;
		w->inline_len = 0;
		w->gen = gen;
		w->imp = 0;
		sq->ngen++;
		__atomic_store_n(&sq->tail, sq->tail + 1, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&sq->lock);
	return ret;
}

static void complete_flushed(struct shca_qp *qp, uint64_t wr_id,
			     enum ibv_wr_opcode opcode)
{
	struct ibv_wc wc;

	memset(&wc, 0, sizeof(wc));
	wc.wr_id = wr_id;
	wc.status = IBV_WC_WR_FLUSH_ERR;
	wc.opcode = shca_wr_wc_opcode(opcode);
	wc.qp_num = qp->ibqp.qp_num;
	shca_cq_push(qp->scq, &wc, false);
}

/*
 * Error state: every outstanding send WQE completes with
 * IBV_WC_WR_FLUSH_ERR, signaled or not: a completion in error is never
 * suppressed.
 */
void shca_sq_flush(struct shca_qp *qp)
{
	struct shca_sq *sq = &qp->sq;

	while (sq->head != sq->tail) {
		struct shca_send_wqe *w = sq_entry(sq, sq->head);

		/* the QP's own: no send completion (transport.c says what
		 * the rendezvous's tag gets) */
		if (w->gen)
			shca_net_gen_flushed(qp, w);
		else
			complete_flushed(qp, w->wr.wr_id, w->wr.opcode);
		if (w->imp)
			shca_imp_drop(w->imp, false);
		sq->head++;
	}
	sq->ngen = 0;
}

/* ------------------------------------------------------------------ */
/* Posting                                                             */

static bool wr_is_inline(const struct ibv_send_wr *wr,
			 const struct wr_info *op)
{
	/* READ and atomics land in local memory: IBV_SEND_INLINE is moot */
	return (wr->send_flags & IBV_SEND_INLINE) && op->cls == WR_SEND;
}

/* The data path's liveness check (shca_obj_ok): no lock, no lookup. */
static bool qp_ok(const struct shca_qp *qp)
{
	return shca_obj_ok(&qp->obj, SHCA_OT_QP, qp->ibqp.context,
			   qp->ibqp.handle);
}

/* A UD WR's AH: live, and of the QP's context. */
static bool ah_ok(const struct shca_qp *qp, struct ibv_ah *ah)
{
	return ah && ah->context == qp->ibqp.context &&
	       shca_obj_ok(&to_sah(ah)->obj, SHCA_OT_AH, ah->context,
			   ah->handle);
}

/*
 * Can the QP take wr?  0 or -EINVAL (rxe's validate_send_wr and more).
 *
 * An opcode softhca does not carry out at all (memory windows,
 * invalidation, TSO, unknown values) is refused here.  One it carries out,
 * but not on this QP's transport (READ or an atomic on UC; READ, WRITE or
 * an atomic on UD), is posted, as mlx5's provider posts it without looking:
 * the requester completes it with IBV_WC_LOC_QP_OP_ERR and the QP goes to
 * SQE (engine/requester.c; docs/conformance.md).
 */
static int sq_check_wr(const struct shca_qp *qp, const struct ibv_send_wr *wr,
		       bool builder)
{
	const struct wr_info *op = wr_info(wr->opcode);
	uint64_t len = 0;
	int i;

	if (!op)
		return -EINVAL;
	/* ATOMIC_WRITE and FLUSH: from their ibv_wr_* builders only, with
	 * no local memory (the table's comment) */
	if (op->cls == WR_PLACE)
		return builder && !wr->num_sge ? 0 : -EINVAL;
	/* a bind names its window (rdma-core checked the MR's PD and the
	 * MR-less range); the rest is the execution's (MW_BIND_ERR) */
	if (wr->opcode == IBV_WR_BIND_MW && !wr->bind_mw.mw)
		return -EINVAL;
	if (op->cls == WR_LOCAL)
		return 0;	/* no gather list */
	if (wr->num_sge < 0 || (uint32_t)wr->num_sge > qp->sq.max_sge ||
	    (wr->num_sge && !wr->sg_list))
		return -EINVAL;
	for (i = 0; i < wr->num_sge; i++)
		len += wr->sg_list[i].length;
	if (wr_is_inline(wr, op) && len > qp->sq.max_inline)
		return -EINVAL;
	/* atomics take 8 bytes; a misaligned remote address is the
	 * responder's to refuse (an invalid request NAK, IBA o9-21), as
	 * on mlx5 (docs/conformance.md), not an error at the post */
	if (op->cls == WR_ATOMIC && len < 8)
		return -EINVAL;
	/* UD: a live AH of this context; not for an opcode UD does not
	 * have, whose wr.wr union holds a remote address there, never
	 * looked at */
	if (qp->ibqp.qp_type == IBV_QPT_UD &&
	    (op->qp_types & QPT(IBV_QPT_UD)) && !ah_ok(qp, wr->wr.ud.ah))
		return -EINVAL;
	/* a QP on an import of another process's PD whose transport cannot
	 * use that process's L_Keys (docs/import.md) */
	if (!wr_is_inline(wr, op) &&
	    !shca_imp_qp_keys_ok(qp->pd, qp->ibqp.qp_type, qp->route,
				 wr->sg_list, wr->num_sge))
		return -EOPNOTSUPP;
	return 0;
}

/* Copy a checked WR into the next slot; inline data is copied now. */
static void sq_store(struct shca_qp *qp, const struct ibv_send_wr *wr)
{
	struct shca_sq *sq = &qp->sq;
	struct shca_send_wqe *w = sq_entry(sq, sq->tail);
	int i;

	w->wr = *wr;
	w->wr.next = NULL;
	w->inline_len = 0;
	w->gen = 0;
	w->imp = 0;
	if (wr_is_inline(wr, wr_info(wr->opcode))) {
		unsigned char *p = (unsigned char *)w->sge;

		for (i = 0; i < wr->num_sge; i++) {
			memcpy(p, (const void *)(uintptr_t)wr->sg_list[i].addr,
			       wr->sg_list[i].length);
			p += wr->sg_list[i].length;
		}
		w->inline_len = (uint32_t)(p - (unsigned char *)w->sge);
		w->wr.sg_list = NULL;
		w->wr.num_sge = 0;
	} else if (wr_info(wr->opcode)->cls == WR_LOCAL) {
		w->wr.sg_list = w->sge;
		w->wr.num_sge = 0;
	} else {
		if (wr->num_sge)
			memcpy(w->sge, wr->sg_list,
			       (size_t)wr->num_sge * sizeof(struct ibv_sge));
		w->wr.sg_list = w->sge;
		w->wr.send_flags &= ~(unsigned int)IBV_SEND_INLINE;
		/* another process's L_Keys on the net path's RC: a
		 * bounce of the WQE's own (import_key.c) */
		if (shca_pd_shared(qp->pd))
			shca_imp_send_store(qp, w);
	}
	__atomic_store_n(&sq->tail, sq->tail + 1, __ATOMIC_RELEASE);
}

/*
 * Post a list of send WRs.  Before RTS the send queue takes nothing
 * (EINVAL, as rxe); in SQD WRs queue up unexecuted; in SQE and ERR each
 * WR completes flushed.
 * all_or_none (wr_complete of the builder): check the whole list first and
 * post none of it on an error.
 */
static int sq_post(struct shca_qp *qp, struct ibv_send_wr *wr,
		   struct ibv_send_wr **bad, bool all_or_none)
{
	struct shca_sq *sq = &qp->sq;
	enum ibv_qp_state state;
	bool flush, queued = false;
	int ret = 0;

	/* a post executes the WRs (shm path: the peer's eventfds, its
	 * socket) with locks held: no cancellation point there
	 * (common/nocancel.h) */
	shca_nocancel_enter();
	/* exec_lock, which the requester needs next anyway, is the
	 * queue's lock for a post: everything else that moves the queue
	 * or the state holds it too (sq.lock orders those among
	 * themselves) */
	pthread_mutex_lock(&qp->exec_lock);
	state = qp->attr.qp_state;
	if (state < IBV_QPS_RTS) {
		*bad = wr;
		ret = -EINVAL;
		goto out;
	}
	flush = state == IBV_QPS_SQE || state == IBV_QPS_ERR;
	if (all_or_none) {
		struct ibv_send_wr *w;
		uint32_t n = 0;

		for (w = wr; w; w = w->next, n++) {
			ret = sq_check_wr(qp, w, all_or_none);
			if (ret) {
				*bad = w;
				goto out;
			}
		}
		if (!flush && n > sq->max_wr - sq_used(sq)) {
			*bad = wr;
			ret = -ENOMEM;
			goto out;
		}
	}
	for (; wr; wr = wr->next) {
		ret = sq_check_wr(qp, wr, all_or_none);
		if (!ret && !flush && sq_used(sq) >= sq->max_wr)
			ret = -ENOMEM;
		if (ret) {
			*bad = wr;
			break;
		}
		if (flush) {
			complete_flushed(qp, wr->wr_id, wr->opcode);
		} else {
			sq_store(qp, wr);
			queued = true;
		}
	}
out:
	if (queued)
		shca_sq_execute_locked(qp);
	pthread_mutex_unlock(&qp->exec_lock);
	shca_nocancel_leave();
	return ret;
}

/* A QP that is not live (destroyed, its handle changed): EINVAL. */
int shca_post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr,
		   struct ibv_send_wr **bad)
{
	struct shca_qp *qp = to_sqp(ibqp);

	if (!bad)
		return shca_ret_errno(-EINVAL);
	*bad = NULL;
	/* an XRC_RECV QP has no send queue */
	if (!qp_ok(qp) || ibqp->qp_type == IBV_QPT_XRC_RECV) {
		*bad = wr;
		return shca_ret_errno(-EINVAL);
	}
	return shca_ret_errno(sq_post(qp, wr, bad, false));
}

/*
 * IBA C10-97.2.1: a QP in RESET takes no receive WRs (EINVAL, as rxe); a
 * QP with an SRQ has no receive queue of its own.  In ERR each WR
 * completes flushed.
 */
int shca_post_recv(struct ibv_qp *ibqp, struct ibv_recv_wr *wr,
		   struct ibv_recv_wr **bad)
{
	struct shca_qp *qp = to_sqp(ibqp);
	struct shca_rq *rq = &qp->rq;
	enum ibv_qp_state state;
	int ret = 0;

	if (!bad)
		return shca_ret_errno(-EINVAL);
	*bad = NULL;
	/* XRC QPs have no receive queue: XRC SRQs take the receives */
	if (!qp_ok(qp) || qp->srq || ibqp->qp_type == IBV_QPT_XRC_SEND ||
	    ibqp->qp_type == IBV_QPT_XRC_RECV) {
		*bad = wr;
		return shca_ret_errno(-EINVAL);
	}
	/* a flush completes to the CQ: its channel's eventfd, written
	 * under rq->lock, must not be a cancellation point */
	shca_nocancel_enter();
	pthread_mutex_lock(&rq->lock);
	state = qp->attr.qp_state;
	if (state == IBV_QPS_RESET) {
		*bad = wr;
		ret = -EINVAL;
	}
	for (; !ret && wr; wr = wr->next) {
		/* the owner's L_Keys on an import of its PD: through a
		 * bounce buffer (docs/import.md) */
		ret = shca_imp_post_recv(rq, qp->pd, wr, true);
		if (ret)
			*bad = wr;
		else if (state == IBV_QPS_ERR)
			shca_rq_flush(rq, qp->rcq, ibqp->qp_num);
	}
	pthread_mutex_unlock(&rq->lock);
	shca_nocancel_leave();
	/* a rendezvous FIN that waited for a receive (shm/xfer.c) */
	if (state != IBV_QPS_RESET)
		shca_host_fin_post_recv(qp);
	return shca_ret_errno(ret);
}

/* ------------------------------------------------------------------ */
/* ibv_qp_ex: the ibv_wr_* builder                                     */

/*
 * The builder collects WRs between wr_start and wr_complete and posts
 * them through sq_post(), all or none.  The first error (a full queue, a
 * list too long, an operation softhca lacks) is kept and returned by
 * wr_complete.  The lock makes one thread's wr_start..wr_complete a unit,
 * as the providers' builders do.
 */
struct batch_wr {
	struct ibv_send_wr wr;
	struct ibv_sge isge;		/* inline data, as one SGE */
	uint32_t nsge;			/* SGEs in data[] */
	uint32_t inline_len;		/* or inline bytes in data[] */
	bool is_inline;
	_Alignas(struct ibv_sge) unsigned char data[]; /* WQE space */
};

struct shca_wr_batch {
	pthread_mutex_t lock;		/* wr_start .. wr_complete/abort */
	bool active;
	int err;			/* positive errno */
	uint32_t n, cap;		/* WRs built, entries allocated */
	size_t ent_size;
	unsigned char *ents;
};

static struct shca_qp *qpx_to_sqp(struct ibv_qp_ex *qpx)
{
	return container_of(qpx, struct shca_qp, qpx);
}

static struct batch_wr *batch_ent(struct shca_wr_batch *b, uint32_t i)
{
	return (struct batch_wr *)(b->ents + (size_t)i * b->ent_size);
}

static void batch_fail(struct shca_wr_batch *b, int err)
{
	if (b->active && !b->err)
		b->err = err;
}

/* Start a WR with the qp_ex's wr_id and wr_flags. */
/*
 * The batch of a live QP, or NULL: every builder call on a QP that is not
 * live does nothing, and wr_complete reports EINVAL.
 */
static struct shca_wr_batch *qpx_batch(struct ibv_qp_ex *qpx)
{
	struct shca_qp *qp = qpx_to_sqp(qpx);

	return qp_ok(qp) ? qp->batch : NULL;
}

static struct batch_wr *batch_new(struct ibv_qp_ex *qpx,
				  enum ibv_wr_opcode opcode)
{
	struct shca_qp *qp = qpx_to_sqp(qpx);
	struct shca_wr_batch *b = qpx_batch(qpx);
	struct batch_wr *e;

	if (!b || !b->active || b->err)
		return NULL;
	if (!(wr_info(opcode) && (wr_info(opcode)->ops_flag &
				  qp->send_ops_flags))) {
		/* an operation the QP was not created with (its
		 * send_ops_flags): mlx5 has no builder for it at all */
		b->err = EINVAL;
		return NULL;
	}
	if (b->n >= qp->sq.max_wr) {
		b->err = ENOMEM;	/* cannot fit the send queue */
		return NULL;
	}
	if (b->n == b->cap) {
		uint32_t cap = MIN(b->cap ? b->cap * 2 : 16, qp->sq.max_wr);
		unsigned char *ents = realloc(b->ents, cap * b->ent_size);

		if (!ents) {
			b->err = ENOMEM;
			return NULL;
		}
		b->ents = ents;
		b->cap = cap;
	}
	e = batch_ent(b, b->n++);
	memset(e, 0, b->ent_size);
	e->wr.wr_id = qpx->wr_id;
	e->wr.opcode = opcode;
	e->wr.send_flags = qpx->wr_flags & ~(unsigned int)IBV_SEND_INLINE;
	return e;
}

/* The WR a setter applies to: the last one started. */
static struct batch_wr *batch_cur(struct ibv_qp_ex *qpx)
{
	struct shca_wr_batch *b = qpx_batch(qpx);

	if (!b || !b->active || b->err)
		return NULL;
	if (!b->n) {
		b->err = EINVAL;	/* a setter before any builder */
		return NULL;
	}
	return batch_ent(b, b->n - 1);
}

static void qpx_wr_start(struct ibv_qp_ex *qpx)
{
	struct shca_wr_batch *b = qpx_batch(qpx);

	if (!b)
		return;
	pthread_mutex_lock(&b->lock);
	b->active = true;
	b->err = 0;
	b->n = 0;
}

static int qpx_wr_complete(struct ibv_qp_ex *qpx)
{
	struct shca_qp *qp = qpx_to_sqp(qpx);
	struct shca_wr_batch *b = qpx_batch(qpx);
	struct ibv_send_wr *bad;
	uint32_t i;
	int ret;

	if (!b || !b->active)
		return shca_ret_errno(-EINVAL);
	for (i = 0; i < b->n; i++) {
		struct batch_wr *e = batch_ent(b, i);

		if (e->is_inline) {
			e->isge.addr = (uintptr_t)e->data;
			e->isge.length = e->inline_len;
			e->isge.lkey = 0;
			e->wr.sg_list = &e->isge;
			e->wr.num_sge = 1;
			e->wr.send_flags |= IBV_SEND_INLINE;
		} else {
			e->wr.sg_list = (struct ibv_sge *)e->data;
			e->wr.num_sge = (int)e->nsge;
		}
		e->wr.next = i + 1 < b->n ? &batch_ent(b, i + 1)->wr : NULL;
	}
	ret = b->err;
	if (!ret)
		ret = sq_post(qp, b->n ? &batch_ent(b, 0)->wr : NULL, &bad,
			      true);
	b->active = false;
	b->n = 0;
	pthread_mutex_unlock(&b->lock);
	return shca_ret_errno(ret);
}

static void qpx_wr_abort(struct ibv_qp_ex *qpx)
{
	struct shca_wr_batch *b = qpx_batch(qpx);

	if (!b || !b->active)
		return;
	b->active = false;
	b->n = 0;
	pthread_mutex_unlock(&b->lock);
}

static void qpx_wr_send(struct ibv_qp_ex *qpx)
{
	batch_new(qpx, IBV_WR_SEND);
}

static void qpx_wr_send_imm(struct ibv_qp_ex *qpx, __be32 imm_data)
{
	struct batch_wr *e = batch_new(qpx, IBV_WR_SEND_WITH_IMM);

	if (e)
		e->wr.imm_data = imm_data;
}

static void qpx_rdma(struct ibv_qp_ex *qpx, enum ibv_wr_opcode opcode,
		     uint32_t rkey, uint64_t remote_addr, __be32 imm_data)
{
	struct batch_wr *e = batch_new(qpx, opcode);

	if (!e)
		return;
	e->wr.wr.rdma.rkey = rkey;
	e->wr.wr.rdma.remote_addr = remote_addr;
	e->wr.imm_data = imm_data;
}

static void qpx_wr_rdma_write(struct ibv_qp_ex *qpx, uint32_t rkey,
			      uint64_t remote_addr)
{
	qpx_rdma(qpx, IBV_WR_RDMA_WRITE, rkey, remote_addr, 0);
}

static void qpx_wr_rdma_write_imm(struct ibv_qp_ex *qpx, uint32_t rkey,
				  uint64_t remote_addr, __be32 imm_data)
{
	qpx_rdma(qpx, IBV_WR_RDMA_WRITE_WITH_IMM, rkey, remote_addr, imm_data);
}

static void qpx_wr_rdma_read(struct ibv_qp_ex *qpx, uint32_t rkey,
			     uint64_t remote_addr)
{
	qpx_rdma(qpx, IBV_WR_RDMA_READ, rkey, remote_addr, 0);
}

static void qpx_atomic(struct ibv_qp_ex *qpx, enum ibv_wr_opcode opcode,
		       uint32_t rkey, uint64_t remote_addr,
		       uint64_t compare_add, uint64_t swap)
{
	struct batch_wr *e = batch_new(qpx, opcode);

	if (!e)
		return;
	e->wr.wr.atomic.rkey = rkey;
	e->wr.wr.atomic.remote_addr = remote_addr;
	e->wr.wr.atomic.compare_add = compare_add;
	e->wr.wr.atomic.swap = swap;
}

static void qpx_wr_atomic_cmp_swp(struct ibv_qp_ex *qpx, uint32_t rkey,
				  uint64_t remote_addr, uint64_t compare,
				  uint64_t swap)
{
	qpx_atomic(qpx, IBV_WR_ATOMIC_CMP_AND_SWP, rkey, remote_addr, compare,
		   swap);
}

static void qpx_wr_atomic_fetch_add(struct ibv_qp_ex *qpx, uint32_t rkey,
				    uint64_t remote_addr, uint64_t add)
{
	qpx_atomic(qpx, IBV_WR_ATOMIC_FETCH_AND_ADD, rkey, remote_addr, add,
		   0);
}

static void qpx_wr_set_ud_addr(struct ibv_qp_ex *qpx, struct ibv_ah *ah,
			       uint32_t remote_qpn, uint32_t remote_qkey)
{
	struct batch_wr *e = batch_cur(qpx);

	if (!e)
		return;
	e->wr.wr.ud.ah = ah;
	e->wr.wr.ud.remote_qpn = remote_qpn;
	e->wr.wr.ud.remote_qkey = remote_qkey;
}

static void qpx_wr_set_sge_list(struct ibv_qp_ex *qpx, size_t num_sge,
				const struct ibv_sge *sg_list)
{
	struct shca_qp *qp = qpx_to_sqp(qpx);
	struct batch_wr *e = batch_cur(qpx);

	if (!e)
		return;
	if (num_sge > qp->sq.max_sge) {
		batch_fail(qp->batch, EINVAL);
		return;
	}
	if (num_sge)
		memcpy(e->data, sg_list, num_sge * sizeof(*sg_list));
	e->nsge = (uint32_t)num_sge;
	e->is_inline = false;
}

static void qpx_wr_set_sge(struct ibv_qp_ex *qpx, uint32_t lkey,
			   uint64_t addr, uint32_t length)
{
	struct ibv_sge sge = { .addr = addr, .length = length, .lkey = lkey };

	/* a zero-length SGE moves no data: as rxe, keep the list empty */
	qpx_wr_set_sge_list(qpx, length ? 1 : 0, &sge);
}

static void qpx_wr_set_inline_data_list(struct ibv_qp_ex *qpx,
					size_t num_buf,
					const struct ibv_data_buf *buf_list)
{
	struct shca_qp *qp = qpx_to_sqp(qpx);
	struct batch_wr *e = batch_cur(qpx);
	size_t i, len = 0;

	if (!e)
		return;
	if (wr_info(e->wr.opcode) && wr_info(e->wr.opcode)->cls != WR_SEND) {
		batch_fail(qp->batch, EINVAL);	/* READ, atomics */
		return;
	}
	for (i = 0; i < num_buf; i++) {
		if (buf_list[i].length > qp->sq.max_inline - len) {
			batch_fail(qp->batch, EINVAL);
			return;
		}
		memcpy(e->data + len, buf_list[i].addr, buf_list[i].length);
		len += buf_list[i].length;
	}
	e->inline_len = (uint32_t)len;
	e->is_inline = true;
}

static void qpx_wr_set_inline_data(struct ibv_qp_ex *qpx, void *addr,
				   size_t length)
{
	struct ibv_data_buf buf = { .addr = addr, .length = length };

	qpx_wr_set_inline_data_list(qpx, 1, &buf);
}

/* What softhca lacks: wr_complete then fails with EOPNOTSUPP. */
static void qpx_unsupported(struct ibv_qp_ex *qpx)
{
	struct shca_wr_batch *b = qpx_batch(qpx);

	if (b)
		batch_fail(b, EOPNOTSUPP);
}

static void qpx_wr_bind_mw(struct ibv_qp_ex *qpx, struct ibv_mw *mw,
			   uint32_t rkey, const struct ibv_mw_bind_info *info)
{
	struct shca_qp *qp = qpx_to_sqp(qpx);
	struct batch_wr *e;

	if (!mw || !info) {
		batch_fail(qp->batch, EINVAL);
		return;
	}
	e = batch_new(qpx, IBV_WR_BIND_MW);
	if (!e)
		return;
	e->wr.bind_mw.mw = mw;
	e->wr.bind_mw.rkey = rkey;
	e->wr.bind_mw.bind_info = *info;
}

static void qpx_wr_local_inv(struct ibv_qp_ex *qpx, uint32_t invalidate_rkey)
{
	struct batch_wr *e = batch_new(qpx, IBV_WR_LOCAL_INV);

	if (e)
		e->wr.invalidate_rkey = invalidate_rkey;
}

static void qpx_wr_send_inv(struct ibv_qp_ex *qpx, uint32_t invalidate_rkey)
{
	struct batch_wr *e = batch_new(qpx, IBV_WR_SEND_WITH_INV);

	if (e)
		e->wr.invalidate_rkey = invalidate_rkey;
}

static void qpx_wr_send_tso(struct ibv_qp_ex *qpx, void *hdr, uint16_t hdr_sz,
			    uint16_t mss)
{
	qpx_unsupported(qpx);
}

/* XRC_SEND: the SRQ at the destination that the WR's message goes to. */
static void qpx_wr_set_xrc_srqn(struct ibv_qp_ex *qpx, uint32_t remote_srqn)
{
	struct batch_wr *e = batch_cur(qpx);

	if (!e)
		return;
	if (qpx->qp_base.qp_type != IBV_QPT_XRC_SEND) {
		batch_fail(qpx_batch(qpx), EINVAL);
		return;
	}
	e->wr.qp_type.xrc.remote_srqn = remote_srqn;
}

/*
 * IBA Annex A19 ATOMIC WRITE: the 8 bytes at atomic_wr, as they lie in
 * memory, written whole at the responder's 8-byte aligned remote_addr
 * (an R_Key with remote write; a misaligned address is the responder's
 * invalid request).  Read now: the caller's buffer is free on return.
 */
static void qpx_wr_atomic_write(struct ibv_qp_ex *qpx, uint32_t rkey,
				uint64_t remote_addr, const void *atomic_wr)
{
	struct batch_wr *e = batch_new(qpx, IBV_WR_ATOMIC_WRITE);

	if (!e)
		return;
	if (!atomic_wr) {
		batch_fail(qpx_batch(qpx), EINVAL);
		return;
	}
	e->wr.wr.atomic.remote_addr = remote_addr;
	e->wr.wr.atomic.rkey = rkey;
	memcpy(&e->wr.wr.atomic.swap, atomic_wr, 8);
}

/*
 * IBA Annex A19 FLUSH (rdma-core 45's ibv_wr_flush): type a non-empty
 * mask of IBV_FLUSH_GLOBAL and IBV_FLUSH_PERSISTENT, level
 * IBV_FLUSH_RANGE ([remote_addr, + len)) or IBV_FLUSH_MR (the R_Key's
 * whole region; remote_addr and len unused).  Anything else: EINVAL at
 * wr_complete.  The length travels in the RETH: at most 2^32 - 1.
 */
static void qpx_wr_flush(struct ibv_qp_ex *qpx, uint32_t rkey,
			 uint64_t remote_addr, size_t len, uint8_t type,
			 uint8_t level)
{
	struct batch_wr *e = batch_new(qpx, SHCA_WR_FLUSH);

	if (!e)
		return;
	if (!type || (type & ~(SHCA_FLUSH_GLOBAL | SHCA_FLUSH_PERSISTENT)) ||
	    level > SHCA_FLUSH_MR ||
	    (level == SHCA_FLUSH_RANGE && len > UINT32_MAX)) {
		batch_fail(qpx_batch(qpx), EINVAL);
		return;
	}
	e->wr.wr.atomic.remote_addr = remote_addr;
	e->wr.wr.atomic.rkey = rkey;
	e->wr.wr.atomic.compare_add = level == SHCA_FLUSH_RANGE ? len : 0;
	e->wr.wr.atomic.swap = type | (uint64_t)level << 8;
}

_Static_assert(offsetof(struct shca_qp, wr_flush) ==
		       offsetof(struct shca_qp, qpx) + sizeof(struct ibv_qp_ex),
	       "wr_flush follows ibv_qp_ex, as in rdma-core 45");

static int batch_init(struct shca_qp *qp)
{
	struct ibv_qp_ex *x = &qp->qpx;
	struct shca_wr_batch *b = calloc(1, sizeof(*b));

	if (!b)
		return -ENOMEM;
	pthread_mutex_init(&b->lock, NULL);
	b->ent_size = (sizeof(struct batch_wr) + qp->sq.wqe_size -
		       sizeof(struct shca_send_wqe) + 7) & ~(size_t)7;
	qp->batch = b;

	x->wr_start = qpx_wr_start;
	x->wr_complete = qpx_wr_complete;
	x->wr_abort = qpx_wr_abort;
	x->wr_send = qpx_wr_send;
	x->wr_send_imm = qpx_wr_send_imm;
	x->wr_rdma_write = qpx_wr_rdma_write;
	x->wr_rdma_write_imm = qpx_wr_rdma_write_imm;
	x->wr_rdma_read = qpx_wr_rdma_read;
	x->wr_atomic_cmp_swp = qpx_wr_atomic_cmp_swp;
	x->wr_atomic_fetch_add = qpx_wr_atomic_fetch_add;
	x->wr_set_sge = qpx_wr_set_sge;
	x->wr_set_sge_list = qpx_wr_set_sge_list;
	x->wr_set_inline_data = qpx_wr_set_inline_data;
	x->wr_set_inline_data_list = qpx_wr_set_inline_data_list;
	x->wr_set_ud_addr = qpx_wr_set_ud_addr;
	x->wr_bind_mw = qpx_wr_bind_mw;
	x->wr_local_inv = qpx_wr_local_inv;
	x->wr_send_inv = qpx_wr_send_inv;
	x->wr_send_tso = qpx_wr_send_tso;
	x->wr_set_xrc_srqn = qpx_wr_set_xrc_srqn;
	x->wr_atomic_write = qpx_wr_atomic_write;
	qp->wr_flush = qpx_wr_flush;
	return 0;
}

static void batch_destroy(struct shca_wr_batch *b)
{
	if (!b)
		return;
	pthread_mutex_destroy(&b->lock);
	free(b->ents);
	free(b);
}

/* ------------------------------------------------------------------ */
/* Create and destroy                                                  */

/* The comp_mask bits rdma-core 44 knows, and those softhca takes. */
#define QP_INIT_ATTR_KNOWN	((IBV_QP_INIT_ATTR_SEND_OPS_FLAGS << 1) - 1)
#define QP_INIT_ATTR_SUPPORTED                                          \
	(IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_XRCD |                  \
	 IBV_QP_INIT_ATTR_CREATE_FLAGS | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS)

/* The objects a new QP uses, each found live with a use taken. */
struct qp_parents {
	struct shca_pd *pd;
	struct shca_cq *scq, *rcq;
	struct shca_srq *srq;
	struct shca_xrcd *xrcd;		/* XRC_RECV */
};

static void parents_put(struct qp_parents *p)
{
	if (p->srq)
		shca_obj_put(&p->srq->obj);
	if (p->rcq)
		shca_obj_put(&p->rcq->obj);
	if (p->scq)
		shca_obj_put(&p->scq->obj);
	if (p->pd)
		shca_obj_put(&p->pd->obj);
	memset(p, 0, sizeof(*p));
}

/*
 * The PD, CQs and SRQ, of ctx: a missing one is EINVAL; one the handle
 * does not name in ctx (destroyed, garbled, of another context) is
 * ENOENT, as the kernel's lookup of the create command's attributes.
 */
static int parents_get(struct ibv_context *ctx,
		       const struct ibv_qp_init_attr_ex *a,
		       struct qp_parents *p)
{
	memset(p, 0, sizeof(*p));
	/* XRC_RECV: only its domain (no PD, CQs, queues: IBA 9.8.x) */
	if (a->qp_type == IBV_QPT_XRC_RECV) {
		if (!(a->comp_mask & IBV_QP_INIT_ATTR_XRCD) || !a->xrcd)
			return -EINVAL;
		if (!shca_xrcd_ok(a->xrcd, ctx))
			return -ENOENT;	/* not open in ctx */
		p->xrcd = to_sxrcd(a->xrcd);
		return 0;
	}
	/* XRC_SEND: no receive side; its recv_cq is not used */
	if (a->qp_type == IBV_QPT_XRC_SEND && a->srq)
		return -EINVAL;
	if (!(a->comp_mask & IBV_QP_INIT_ATTR_PD) || !a->pd ||
	    !a->send_cq || (!a->recv_cq && a->qp_type != IBV_QPT_XRC_SEND))
		return -EINVAL;
	p->pd = shca_pd_lookup(a->pd, ctx);
	p->scq = shca_cq_lookup(a->send_cq, ctx);
	p->rcq = shca_cq_lookup(a->qp_type == IBV_QPT_XRC_SEND ?
				a->send_cq : a->recv_cq, ctx);
	if (a->srq)
		p->srq = shca_srq_lookup(a->srq, ctx);
	if (!p->pd || !p->scq || !p->rcq || (a->srq && !p->srq)) {
		parents_put(p);
		return -ENOENT;
	}
	return 0;
}

/*
 * In the order rdma-core and the kernel check: the provider's own checks
 * (comp_mask, create flags, send ops), the QP type, the PD, CQs and SRQ
 * (parents_get: with their uses, which the caller puts back), then rxe's
 * rxe_qp_chk_init (capabilities).
 */
static int qp_check_init(struct ibv_context *ctx,
			 const struct ibv_qp_init_attr_ex *a,
			 struct qp_parents *p)
{
	const struct ibv_qp_cap *cap = &a->cap;
	int ret;

	memset(p, 0, sizeof(*p));
	if (a->comp_mask & ~(uint32_t)QP_INIT_ATTR_KNOWN)
		return -EINVAL;
	if (a->comp_mask & ~(uint32_t)QP_INIT_ATTR_SUPPORTED)
		return -EOPNOTSUPP;	/* XRC, TSO, RSS: not offered */
	if ((a->comp_mask & IBV_QP_INIT_ATTR_CREATE_FLAGS) && a->create_flags)
		return -EOPNOTSUPP;
	switch (a->qp_type) {
	case IBV_QPT_RC:
	case IBV_QPT_UC:
	case IBV_QPT_UD:
		break;
	case IBV_QPT_XRC_RECV:
	case IBV_QPT_XRC_SEND:
		break;
	case IBV_QPT_RAW_PACKET:
	case IBV_QPT_DRIVER:
		return -EOPNOTSUPP;	/* as rxe_qp_chk_init */
	default:
		return -EINVAL;
	}
	if ((a->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) &&
	    (a->send_ops_flags & ~send_ops_supported(a->qp_type)))
		return -EOPNOTSUPP;
	/* an SRQ of a non-basic type is no QP's (XRC SRQs serve XRC_RECV
	 * QPs by number) */
	ret = parents_get(ctx, a, p);
	if (ret)
		return ret;
	if (p->srq && p->srq->xrcd) {
		parents_put(p);
		return -EINVAL;
	}
	if (a->qp_type == IBV_QPT_XRC_RECV)
		return 0;	/* no queues: its capabilities are moot */
	if (cap->max_send_wr > SHCA_MAX_QP_WR ||
	    cap->max_send_sge > SHCA_MAX_SGE ||
	    cap->max_inline_data > SHCA_MAX_INLINE ||
	    (!a->srq && (cap->max_recv_wr > SHCA_MAX_QP_WR ||
			 cap->max_recv_sge > SHCA_MAX_SGE))) {
		parents_put(p);
		return -EINVAL;
	}
	return 0;
}

static void qp_get_refs(struct shca_qp *qp)
{
	if (qp->xrcd) {
		shca_xrcd_get(qp->xrcd);
		return;
	}
	shca_pd_get(qp->pd);
	__atomic_add_fetch(&qp->scq->refs, 1, __ATOMIC_RELAXED);
	__atomic_add_fetch(&qp->rcq->refs, 1, __ATOMIC_RELAXED);
	if (qp->srq)
		__atomic_add_fetch(&qp->srq->refs, 1, __ATOMIC_RELAXED);
}

static void qp_put_refs(struct shca_qp *qp)
{
	/* XRC_RECV: its domain's, unless its creator gave it up already
	 * (an orphan kept for openers, xrc_qp.c) */
	if (qp->ibqp.qp_type == IBV_QPT_XRC_RECV) {
		if (qp->xrcd)
			shca_xrcd_put(qp->xrcd);
		return;
	}
	if (qp->srq)
		__atomic_sub_fetch(&qp->srq->refs, 1, __ATOMIC_RELEASE);
	__atomic_sub_fetch(&qp->rcq->refs, 1, __ATOMIC_RELEASE);
	__atomic_sub_fetch(&qp->scq->refs, 1, __ATOMIC_RELEASE);
	shca_pd_put(qp->pd);
}

/*
 * What a QP holds besides its own memory.  A peer of this host that
 * found the QP before it left the table may be taking one of its receive
 * WQEs (a SEND's copy, however long it takes), and reads the QP's record
 * until its completion is in; it holds the receive queue's lock all that
 * time (engine/responder.c do_receive).  So the record goes back to the
 * arena only after that lock was had once: the receive queue's flush
 * takes it, and an SRQ's is passed through.  (A peer that found the QP
 * but has not taken the lock yet, a few instructions, still may read the
 * record after it went.)
 */
static void qp_release(struct shca_qp *qp)
{
	batch_destroy(qp->batch);
	shca_rq_destroy(&qp->rq);
	if (qp->shm && qp->srq && qp->srq->rq.shm) {
		shca_plock_lock(&qp->srq->rq.shm->lock);
		shca_plock_unlock(&qp->srq->rq.shm->lock);
	}
	if (qp->shm)
		shca_arena_free(qp->shm);
	if (qp->sq.buf)
		sq_destroy(&qp->sq);
}

static struct shca_qp *qp_create(struct ibv_context *ctx,
				 struct ibv_qp_init_attr_ex *a)
{
	struct shca_context *sctx = to_sctx(ctx);
	const struct shca_slot *slot;
	struct qp_parents par;
	struct shca_qp *qp;
	int ret;

	ret = qp_check_init(ctx, a, &par);
	if (ret)
		return SHCA_ERR_PTR(-ret);
	/* a QP is addressable: this process takes its slot and listens */
	ret = shca_transport_init();
	if (ret)
		goto err_parents;
	slot = shca_slot_get();
	if (!slot) {
		ret = -errno;	/* shca_slot_get's */
		goto err_parents;
	}

	ret = -ENOMEM;
	pthread_mutex_lock(&sctx->lock);
	if (sctx->nqp >= SHCA_MAX_QP) {
		pthread_mutex_unlock(&sctx->lock);
		goto err_parents;
	}
	sctx->nqp++;
	pthread_mutex_unlock(&sctx->lock);

	ret = -ENOMEM;
	qp = calloc(1, sizeof(*qp));
	if (!qp)
		goto err_count;
	qp->shm = shca_arena_alloc(sizeof(*qp->shm));
	if (!qp->shm)
		goto err_free;
	/* `softhca stat` counts the QP under its device */
	memcpy(qp->shm->dev, sctx->dev->ifname, sizeof(qp->shm->dev));
	if (par.xrcd) {
		/* XRC_RECV: no send queue, no receive queue */
		memset(&a->cap, 0, sizeof(a->cap));
		qp->shm->xrcd = par.xrcd->id;
	}
	/* an RC QP on a tag-matching SRQ: room aside for the rendezvous it
	 * may carry out on the net path, also without a send queue of the
	 * application's (pyverbs' TM QPs have none); other QPs' rings keep
	 * their size (a power of two max_send_wr would double) */
	ret = sq_init(&qp->sq, par.pd, a->cap.max_send_wr,
		      a->cap.max_send_sge, a->cap.max_inline_data,
		      a->qp_type == IBV_QPT_RC && par.srq && par.srq->tm ?
			      SHCA_NET_GEN_MAX : 0);
	if (ret)
		goto err_free;
	if (a->srq || par.xrcd || a->qp_type == IBV_QPT_XRC_SEND) {
		ret = 0;	/* the SRQ's ring; only the lock is ours */
		pthread_mutex_init(&qp->rq.lock, NULL);
	} else
		ret = shca_rq_init(&qp->rq, a->cap.max_recv_wr ?
				   shca_roundup_pow2(a->cap.max_recv_wr) : 0,
				   a->cap.max_recv_sge);
	if (ret)
		goto err_free;
	if ((a->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS)) {
		ret = batch_init(qp);
		if (ret)
			goto err_free;
		qp->has_qpx = true;
		qp->send_ops_flags = a->send_ops_flags;
	}

	qp->ibqp.context = ctx;
	qp->ibqp.qp_context = a->qp_context;
	qp->ibqp.pd = par.xrcd ? NULL : a->pd;
	qp->ibqp.send_cq = par.xrcd ? NULL : a->send_cq;
	qp->ibqp.recv_cq = par.xrcd ? NULL : a->recv_cq;
	qp->ibqp.srq = par.xrcd ? NULL : a->srq;
	qp->ibqp.qp_type = a->qp_type;
	qp->ibqp.state = IBV_QPS_RESET;
	pthread_mutex_init(&qp->ibqp.mutex, NULL);
	pthread_cond_init(&qp->ibqp.cond, NULL);
	qp->ibqp.events_completed = 0;
	pthread_mutex_init(&qp->lock, NULL);
	{
		pthread_mutexattr_t ma;

		pthread_mutexattr_init(&ma);
		pthread_mutexattr_settype(&ma, PTHREAD_MUTEX_RECURSIVE);
		pthread_mutex_init(&qp->exec_lock, &ma);
		pthread_mutexattr_destroy(&ma);
	}
	qp->pd = par.pd;
	qp->scq = par.scq;
	qp->rcq = par.rcq;
	qp->srq = par.srq;
	qp->xrcd = par.xrcd;
	qp->xrcd_id = par.xrcd ? par.xrcd->id : 0;
	qp->sq_sig_all = a->sq_sig_all;
	qp->cap.max_send_wr = qp->sq.max_wr;
	qp->cap.max_send_sge = qp->sq.max_sge;
	qp->cap.max_inline_data = qp->sq.max_inline;
	qp->cap.max_recv_wr = qp->rq.max_wr;
	qp->cap.max_recv_sge = qp->rq.max_sge;
	shca_qp_reset_attr(qp);

	ret = shca_obj_add(&qp->obj, SHCA_OT_QP, ctx, &qp->ibqp,
			   &qp->ibqp.handle);
	if (ret)
		goto err_free;
	ret = qp_table_insert(qp, slot->slot);
	if (ret)
		goto err_handle;
	shca_qp_publish(qp);
	qp_get_refs(qp);
	parents_put(&par);

	a->cap = qp->cap;	/* report what was created */
	shca_dbg("QP 0x%06x (type %d) created", qp->ibqp.qp_num,
		 (int)a->qp_type);
	return qp;

err_handle:
	/* never handed out: the memory goes with the handle */
	qp_release(qp);
	shca_obj_retire(&qp->obj, qp, sizeof(*qp));
	goto err_count;
err_free:
	qp_release(qp);
	free(qp);
err_count:
	pthread_mutex_lock(&sctx->lock);
	sctx->nqp--;
	pthread_mutex_unlock(&sctx->lock);
err_parents:
	parents_put(&par);
	return SHCA_ERR_PTR(-ret);
}

/* The QP's context is its PD's: a PD that is not live is ENOENT. */
struct ibv_qp *shca_create_qp(struct ibv_pd *pd,
			      struct ibv_qp_init_attr *attr)
{
	struct ibv_qp_init_attr_ex ex;
	struct shca_qp *qp;

	if (!pd || !attr)
		return SHCA_ERR_PTR(EINVAL);
	memset(&ex, 0, sizeof(ex));
	ex.qp_context = attr->qp_context;
	ex.send_cq = attr->send_cq;
	ex.recv_cq = attr->recv_cq;
	ex.srq = attr->srq;
	ex.cap = attr->cap;
	ex.qp_type = attr->qp_type;
	ex.sq_sig_all = attr->sq_sig_all;
	ex.comp_mask = IBV_QP_INIT_ATTR_PD;
	ex.pd = pd;
	qp = qp_create(pd->context, &ex);
	if (!qp)
		return NULL;
	attr->cap = ex.cap;
	return &qp->ibqp;
}

struct ibv_qp *shca_create_qp_ex(struct ibv_context *ctx,
				 struct ibv_qp_init_attr_ex *attr)
{
	struct shca_qp *qp;

	if (!shca_ctx_live(ctx))
		return SHCA_ERR_PTR(EBADF);	/* its file is closed */
	qp = qp_create(ctx, attr);
	return qp ? &qp->ibqp : NULL;
}

/*
 * qp holds a use (shca_qp_lookup_obj), which this consumes.  EBUSY while
 * another verb works on it, or while it is attached to a multicast group
 * (IBA o10-2.2.3).  wait_acks: see shca_cq_destroy.
 */
int shca_qp_destroy(struct shca_qp *qp, bool wait_acks)
{
	struct ibv_qp *ibqp = &qp->ibqp;
	struct shca_context *sctx = to_sctx(qp->obj.ctx);
	bool attached;
	int ret;

	ret = shca_obj_claim(&qp->obj, NULL);
	if (ret) {
		shca_obj_put(&qp->obj);
		return ret;
	}
	/* attach_mcast holds a use: no attachment comes after the claim */
	pthread_mutex_lock(&qp->lock);
	attached = qp->mcast != NULL;
	pthread_mutex_unlock(&qp->lock);
	if (attached) {
		shca_obj_unclaim(&qp->obj);
		shca_obj_put(&qp->obj);
		return -EBUSY;
	}

	qp_table_remove(qp);
	/* other processes that opened it: their connections end */
	if (ibqp->qp_type == IBV_QPT_XRC_RECV)
		shca_xqp_detach(qp);
	/* the net path's receive side (engine thread) found it by number:
	 * wait until it is done with it */
	shca_engine_quiesce();
	/* no retry can run any more, and no execution is in progress (one
	 * that was may have armed the retry timer: cancel it again) */
	shca_timer_cancel(&qp->retry_timer);
	pthread_mutex_lock(&qp->exec_lock);
	pthread_mutex_unlock(&qp->exec_lock);
	shca_timer_cancel(&qp->retry_timer);
	/* rendezvous FINs it held: nothing to deliver them to; its own
	 * rendezvous READs (net path) end with it */
	shca_host_fin_forget(qp);
	shca_net_gen_forget(qp);
	/* packets it queued reference memory the application frees next */
	if (qp->net.conn)
		shca_net_forget(qp->net.conn, qp->ibqp.qp_num);
	/* undelivered events go; delivered ones must be acknowledged */
	shca_async_forget(sctx, qp);
	pthread_mutex_lock(&ibqp->mutex);
	while (wait_acks && ibqp->events_completed != qp->events_reported)
		pthread_cond_wait(&ibqp->cond, &ibqp->mutex);
	pthread_mutex_unlock(&ibqp->mutex);

	/*
	 * The completions of work the QP carried out stay in its CQs, as
	 * with rxe and siw (mlx5 drops them): libfabric's verbs provider
	 * destroys a MSG endpoint's QP, then polls the CQ for what it had
	 * completed (vrb_ep_close), and rxm closes a connection on a peer's
	 * disconnect that way, so a message that arrived just before would
	 * be lost.  Its flushed work requests leave, as on mlx5: they name
	 * nothing that happened, and a program that frees what their wr_id
	 * points to once the destroy returned (the shortest rdma_cm
	 * tutorials, tests/security/cq_thread.c -t none) must not meet
	 * them.  A QP number comes back only after every other index
	 * (qp_table_insert goes round), so no new QP meets what stays; a
	 * reset drops everything (qp_modify.c).
	 */
	if (qp->scq)
		shca_cq_clean(qp->scq, ibqp->qp_num, true);
	if (qp->rcq && qp->rcq != qp->scq)
		shca_cq_clean(qp->rcq, ibqp->qp_num, true);
	pthread_mutex_destroy(&qp->lock);
	pthread_mutex_destroy(&qp->exec_lock);
	/* the send ring may be a parent domain's: freed while it is held */
	qp_release(qp);
	qp_put_refs(qp);
	pthread_mutex_lock(&sctx->lock);
	sctx->nqp--;
	pthread_mutex_unlock(&sctx->lock);
	shca_obj_retire(&qp->obj, qp, sizeof(*qp));
	return 0;
}

/*
 * A handle that names no QP: ENOENT, as the kernel's object lookup.  An
 * opened XRC_RECV QP: this process's reference goes; the creator's
 * handle of one that others opened: only the handle goes (xrc_qp.c).
 */
int shca_destroy_qp(struct ibv_qp *ibqp)
{
	struct shca_xqp *x = shca_xqp_find(ibqp);
	struct shca_qp *qp;
	bool gone;

	if (x)
		return shca_xqp_destroy(x);
	shca_net_acks_out(false);	/* ahead of what the peer then sees */
	qp = shca_qp_lookup_obj(ibqp, NULL);
	if (!qp)
		return -ENOENT;
	if (qp->ibqp.qp_type == IBV_QPT_XRC_RECV &&
	    (shca_xqp_orphan(qp, &gone) || gone)) {
		shca_obj_put(&qp->obj);
		return gone ? -ENOENT : 0;
	}
	return shca_qp_destroy(qp, true);
}

/* ------------------------------------------------------------------ */
/* Exported verbs                                                      */

SHCA_DEFAULT_VERSION(ibv_create_qp)
struct ibv_qp *shca_latest_ibv_create_qp(struct ibv_pd *pd,
					 struct ibv_qp_init_attr *attr)
{
	return shca_create_qp(pd, attr);
}

SHCA_DEFAULT_VERSION(ibv_destroy_qp)
int shca_latest_ibv_destroy_qp(struct ibv_qp *qp)
{
	return shca_ret_errno(shca_destroy_qp(qp));
}

/* As rdma-core: only a QP created with IBV_QP_INIT_ATTR_SEND_OPS_FLAGS. */
struct ibv_qp_ex *ibv_qp_to_qp_ex(struct ibv_qp *qp)
{
	struct shca_qp *sqp = to_sqp(qp);

	return qp_ok(sqp) && sqp->has_qpx ? &sqp->qpx : NULL;
}
