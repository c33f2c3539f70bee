// SPDX-License-Identifier: MIT
/*
 * The QP state machine (ibv_modify_qp) and ibv_query_qp.
 *
 * ibv_modify_qp checks everything before it changes anything, so a failed
 * call leaves the QP as it was.  The checks come in the order rdma-core,
 * uverbs, the core and rxe make them:
 *
 *   1. mask bits past IBV_QP_DEST_QPN                      EOPNOTSUPP
 *   2. port numbers, states out of range (uverbs)          EINVAL
 *   3. address vectors (the core): the port, the GRH that
 *      a RoCE port requires, the source GID index          EINVAL
 *      (an empty GID entry: ENODATA); alternate paths,
 *      which the core allows on InfiniBand only            EINVAL
 *   4. the transition: legal from the current state, every
 *      required attribute given, none beyond the optional
 *      ones (qp_transitions below)                         EINVAL
 *   5. attribute values (rxe_qp_chk_attr, the IBA field
 *      widths, the device limits)                          EINVAL
 *
 * and then applies the attributes and the transition: ERR flushes both
 * work queues (and, with an SRQ, raises IBV_EVENT_QP_LAST_WQE_REACHED),
 * RESET discards them and forgets the attributes, SQD reports the send
 * queue drained if asked, and a return to RTS resumes the send queue.
 */
#include <errno.h>
#include <string.h>

#include "shca.h"
#include "../net/net.h"
#include "../net/transport.h"
#include "../shm/xfer.h"
#include "../common/env.h"
#include "../engine/engine.h"
#include "../common/slot.h"

/* Attribute mask bits, short, for the table. */
#define Q_CUR		IBV_QP_CUR_STATE
#define Q_SQD_NOTIFY	IBV_QP_EN_SQD_ASYNC_NOTIFY
#define Q_ACCESS	IBV_QP_ACCESS_FLAGS
#define Q_PKEY		IBV_QP_PKEY_INDEX
#define Q_PORT		IBV_QP_PORT
#define Q_QKEY		IBV_QP_QKEY
#define Q_AV		IBV_QP_AV
#define Q_MTU		IBV_QP_PATH_MTU
#define Q_TIMEOUT	IBV_QP_TIMEOUT
#define Q_RETRY		IBV_QP_RETRY_CNT
#define Q_RNR_RETRY	IBV_QP_RNR_RETRY
#define Q_RQ_PSN	IBV_QP_RQ_PSN
#define Q_RD_ATOMIC	IBV_QP_MAX_QP_RD_ATOMIC
#define Q_ALT_PATH	IBV_QP_ALT_PATH
#define Q_RNR_TIMER	IBV_QP_MIN_RNR_TIMER
#define Q_SQ_PSN	IBV_QP_SQ_PSN
#define Q_DEST_RD	IBV_QP_MAX_DEST_RD_ATOMIC
#define Q_MIG		IBV_QP_PATH_MIG_STATE
#define Q_DEST_QPN	IBV_QP_DEST_QPN

/* rdma-core's ibv_modify_qp passes these; later bits need the _ex path */
#define QP_ATTR_STANDARD	((IBV_QP_DEST_QPN << 1) - 1)

/* What qp_access_flags may hold (rxe: RXE_ACCESS_SUPPORTED_QP).
 * ON_DEMAND means nothing for a QP; it is accepted and ignored, as mlx5
 * and rxe with ODP accept it (pyverbs' test_odp sets the MR's access,
 * ON_DEMAND included, on its QPs). */
#define QP_ACCESS_SUPPORTED                                              \
	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |               \
	 IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC |              \
	 SHCA_ACCESS_FLUSH_GLOBAL | SHCA_ACCESS_FLUSH_PERSISTENT |        \
	 IBV_ACCESS_ON_DEMAND)

#define PSN_MASK	0xffffffu

/* ------------------------------------------------------------------ */
/* The transition table                                                */

enum { QT_RC, QT_UC, QT_UD, QT_NUM };

#define BY_TYPE(rc, uc, ud) { [QT_RC] = (rc), [QT_UC] = (uc), [QT_UD] = (ud) }

/*
 * The IBA's QP state transitions with the attributes each one requires
 * and allows (Modify QP, IBA 11.2.5.2), as the kernel's qp_state_table
 * holds them for RC, UC and UD.  A transition without an entry is
 * illegal; note that RESET -> ERR is one.
 */
static const struct qp_transition {
	bool valid;
	int req[QT_NUM];
	int opt[QT_NUM];
} qp_transitions[IBV_QPS_ERR + 1][IBV_QPS_ERR + 1] = {
	[IBV_QPS_RESET] = {
		[IBV_QPS_RESET] = { .valid = true },
		[IBV_QPS_INIT] = {
			.valid = true,
			.req = BY_TYPE(Q_PKEY | Q_PORT | Q_ACCESS,
				       Q_PKEY | Q_PORT | Q_ACCESS,
				       Q_PKEY | Q_PORT | Q_QKEY),
		},
	},
	[IBV_QPS_INIT] = {
		[IBV_QPS_RESET] = { .valid = true },
		[IBV_QPS_ERR] = { .valid = true },
		[IBV_QPS_INIT] = {
			.valid = true,
			.opt = BY_TYPE(Q_PKEY | Q_PORT | Q_ACCESS,
				       Q_PKEY | Q_PORT | Q_ACCESS,
				       Q_PKEY | Q_PORT | Q_QKEY),
		},
		[IBV_QPS_RTR] = {
			.valid = true,
			.req = BY_TYPE(Q_AV | Q_MTU | Q_DEST_QPN | Q_RQ_PSN |
					       Q_DEST_RD | Q_RNR_TIMER,
				       Q_AV | Q_MTU | Q_DEST_QPN | Q_RQ_PSN,
				       0),
			.opt = BY_TYPE(Q_ALT_PATH | Q_ACCESS | Q_PKEY,
				       Q_ALT_PATH | Q_ACCESS | Q_PKEY,
				       Q_PKEY | Q_QKEY),
		},
	},
	[IBV_QPS_RTR] = {
		[IBV_QPS_RESET] = { .valid = true },
		[IBV_QPS_ERR] = { .valid = true },
		[IBV_QPS_RTS] = {
			.valid = true,
			.req = BY_TYPE(Q_TIMEOUT | Q_RETRY | Q_RNR_RETRY |
					       Q_SQ_PSN | Q_RD_ATOMIC,
				       Q_SQ_PSN,
				       Q_SQ_PSN),
			.opt = BY_TYPE(Q_CUR | Q_ALT_PATH | Q_ACCESS |
					       Q_RNR_TIMER | Q_MIG,
				       Q_CUR | Q_ALT_PATH | Q_ACCESS | Q_MIG,
				       Q_CUR | Q_QKEY),
		},
	},
	[IBV_QPS_RTS] = {
		[IBV_QPS_RESET] = { .valid = true },
		[IBV_QPS_ERR] = { .valid = true },
		[IBV_QPS_RTS] = {
			.valid = true,
			.opt = BY_TYPE(Q_CUR | Q_ACCESS | Q_ALT_PATH | Q_MIG |
					       Q_RNR_TIMER,
				       Q_CUR | Q_ACCESS | Q_ALT_PATH | Q_MIG,
				       Q_CUR | Q_QKEY),
		},
		[IBV_QPS_SQD] = {
			.valid = true,
			.opt = BY_TYPE(Q_SQD_NOTIFY, Q_SQD_NOTIFY,
				       Q_SQD_NOTIFY),
		},
	},
	[IBV_QPS_SQD] = {
		[IBV_QPS_RESET] = { .valid = true },
		[IBV_QPS_ERR] = { .valid = true },
		[IBV_QPS_RTS] = {
			.valid = true,
			.opt = BY_TYPE(Q_CUR | Q_ALT_PATH | Q_ACCESS |
					       Q_RNR_TIMER | Q_MIG,
				       Q_CUR | Q_ALT_PATH | Q_ACCESS | Q_MIG,
				       Q_CUR | Q_QKEY),
		},
		[IBV_QPS_SQD] = {
			.valid = true,
			.opt = BY_TYPE(Q_PORT | Q_AV | Q_TIMEOUT | Q_RETRY |
					       Q_RNR_RETRY | Q_RD_ATOMIC |
					       Q_DEST_RD | Q_ALT_PATH |
					       Q_ACCESS | Q_PKEY |
					       Q_RNR_TIMER | Q_MIG,
				       Q_AV | Q_ALT_PATH | Q_ACCESS | Q_PKEY |
					       Q_MIG,
				       Q_PKEY | Q_QKEY),
		},
	},
	[IBV_QPS_SQE] = {
		[IBV_QPS_RESET] = { .valid = true },
		[IBV_QPS_ERR] = { .valid = true },
		[IBV_QPS_RTS] = {
			.valid = true,
			.opt = BY_TYPE(0, Q_CUR | Q_ACCESS, Q_CUR | Q_QKEY),
		},
	},
	[IBV_QPS_ERR] = {
		[IBV_QPS_RESET] = { .valid = true },
		[IBV_QPS_ERR] = { .valid = true },
	},
};

/*
 * XRC's QPs differ from RC where the kernel's qp_state_table says so: an
 * XRC_SEND (initiator) QP receives no requests, so it takes neither
 * MAX_DEST_RD_ATOMIC nor MIN_RNR_TIMER; an XRC_RECV (target) QP sends
 * none, so RTS needs only TIMEOUT and SQ_PSN of it.
 */
static void xrc_masks(enum ibv_qp_type type, enum ibv_qp_state cur,
		      enum ibv_qp_state next, int *req, int *opt)
{
	if (type == IBV_QPT_XRC_SEND) {
		*req &= ~(Q_DEST_RD | Q_RNR_TIMER);
		*opt &= ~(Q_DEST_RD | Q_RNR_TIMER);
	} else if (type == IBV_QPT_XRC_RECV && cur == IBV_QPS_RTR &&
		   next == IBV_QPS_RTS) {
		*req = Q_TIMEOUT | Q_SQ_PSN;
	}
}

static int qt_index(enum ibv_qp_type type)
{
	switch (type) {
	case IBV_QPT_RC:
	case IBV_QPT_XRC_SEND:
	case IBV_QPT_XRC_RECV:	/* the kernel's masks: as RC */
		return QT_RC;
	case IBV_QPT_UC:
		return QT_UC;
	default:
		return QT_UD;
	}
}

/* ------------------------------------------------------------------ */
/* Check                                                               */

/*
 * uverbs: port numbers, and states that exist.  A new primary path
 * outside INIT -> RTR (that is, SQD -> SQD) implies its port: uverbs adds
 * IBV_QP_PORT to the mask, which the table then judges (UC does not take
 * it there).
 */
static int check_ports(const struct shca_qp *qp, struct ibv_qp_attr *a,
		       int *mask)
{
	struct ibv_context *ctx = qp->ibqp.context;

	if ((*mask & IBV_QP_PORT) && !shca_port_valid(ctx, a->port_num))
		return -EINVAL;
	if (*mask & IBV_QP_AV) {
		if (!shca_port_valid(ctx, a->ah_attr.port_num))
			return -EINVAL;
		if ((*mask & IBV_QP_STATE) && a->qp_state == IBV_QPS_RTR) {
			/* INIT -> RTR: the path leaves from the QP's port */
			if (a->ah_attr.port_num != qp->attr.port_num)
				return -EINVAL;
		} else if (*mask & IBV_QP_PORT) {
			if (a->port_num != a->ah_attr.port_num)
				return -EINVAL;
		} else {
			*mask |= IBV_QP_PORT;
			a->port_num = a->ah_attr.port_num;
		}
	}
	if ((*mask & IBV_QP_ALT_PATH) &&
	    (!shca_port_valid(ctx, a->alt_port_num) ||
	     a->alt_port_num != a->alt_ah_attr.port_num))
		return -EINVAL;
	if ((*mask & IBV_QP_CUR_STATE) && a->cur_qp_state > IBV_QPS_ERR)
		return -EINVAL;
	if ((*mask & IBV_QP_STATE) && a->qp_state > IBV_QPS_ERR)
		return -EINVAL;
	return 0;
}

/* The core: the paths must be usable from this (RoCE) port. */
static int check_paths(const struct shca_qp *qp, const struct ibv_qp_attr *a,
		       int mask)
{
	int ret;

	if (mask & IBV_QP_AV) {
		ret = shca_check_ah_attr(qp->ibqp.context, &a->ah_attr);
		if (ret)
			return ret;
	}
	if (mask & IBV_QP_ALT_PATH) {
		ret = shca_check_ah_attr(qp->ibqp.context, &a->alt_ah_attr);
		if (ret)
			return ret;
		return -EINVAL;	/* alternate paths: InfiniBand only */
	}
	return 0;
}

static int check_transition(const struct shca_qp *qp,
			    const struct ibv_qp_attr *a, int mask,
			    enum ibv_qp_state *next)
{
	enum ibv_qp_state cur = qp->attr.qp_state;
	const struct qp_transition *t;
	int req, opt;

	if (mask & IBV_QP_CUR_STATE) {
		/* only leaving RTR, RTS, SQD or SQE, and it must be true */
		if (cur != IBV_QPS_RTR && cur != IBV_QPS_RTS &&
		    cur != IBV_QPS_SQD && cur != IBV_QPS_SQE)
			return -EINVAL;
		if (a->cur_qp_state != cur)
			return -EINVAL;
	}
	*next = (mask & IBV_QP_STATE) ? a->qp_state : cur;
	t = &qp_transitions[cur][*next];
	if (!t->valid)
		return -EINVAL;
	req = t->req[qt_index(qp->ibqp.qp_type)];
	opt = t->opt[qt_index(qp->ibqp.qp_type)];
	xrc_masks(qp->ibqp.qp_type, cur, *next, &req, &opt);
	if ((mask & req) != req)
		return -EINVAL;
	if (mask & ~(req | opt | IBV_QP_STATE))
		return -EINVAL;
	return 0;
}

/* The values, within the IBA's field widths and the device's limits. */
static int check_values(const struct shca_qp *qp, const struct ibv_qp_attr *a,
			int mask)
{
	struct ibv_port_attr port;

	if ((mask & IBV_QP_PKEY_INDEX) && a->pkey_index >= SHCA_MAX_PKEYS)
		return -EINVAL;
	if ((mask & IBV_QP_ACCESS_FLAGS) &&
	    (a->qp_access_flags & ~QP_ACCESS_SUPPORTED))
		return -EINVAL;
	if (mask & IBV_QP_PATH_MTU) {
		if (shca_query_port(qp->ibqp.context, SHCA_PORT_NUM, &port,
				    sizeof(port)))
			return -EINVAL;
		if (a->path_mtu < IBV_MTU_256 || a->path_mtu > port.max_mtu)
			return -EINVAL;
	}
	if ((mask & IBV_QP_MAX_QP_RD_ATOMIC) &&
	    a->max_rd_atomic > SHCA_MAX_QP_INIT_RD_ATOM)
		return -EINVAL;
	if ((mask & IBV_QP_MAX_DEST_RD_ATOMIC) &&
	    a->max_dest_rd_atomic > SHCA_MAX_QP_RD_ATOM)
		return -EINVAL;
	/* 5-bit timers, 3-bit counters (IBA 9.7.5.2.8, 11.2.5.2) */
	if ((mask & IBV_QP_TIMEOUT) && a->timeout > 31)
		return -EINVAL;
	if ((mask & IBV_QP_MIN_RNR_TIMER) && a->min_rnr_timer > 31)
		return -EINVAL;
	if ((mask & IBV_QP_RETRY_CNT) && a->retry_cnt > 7)
		return -EINVAL;
	if ((mask & IBV_QP_RNR_RETRY) && a->rnr_retry > 7)
		return -EINVAL;
	if ((mask & IBV_QP_DEST_QPN) && a->dest_qp_num > 0xffffff)
		return -EINVAL;
	if ((mask & IBV_QP_PATH_MIG_STATE) && a->path_mig_state > IBV_MIG_ARMED)
		return -EINVAL;
	return 0;
}

/* The transports below the engine (engine/xport.h), by route: the QP's
 * (qp->route, below) or, UD, the AH's. */
const struct shca_transport_ops *const shca_transports[SHCA_NROUTES] = {
	[SHCA_ROUTE_HOST] = &shca_host_ops,
	[SHCA_ROUTE_NET] = &shca_net_ops,
};

/*
 * INIT -> RTR of a connected QP names its destination and so its path: a
 * destination on this host (a GID of one of its interfaces, in this
 * network namespace) is reached through the same-host path, other hosts
 * through the net path (net/transport.c), and so is a process on this
 * host that refuses CMA, and every destination under SOFTHCA_NET=1
 * (common/env.h).  UD chooses per message (the AH, engine/requester.c).
 */
static int check_destination(struct shca_qp *qp, const struct ibv_qp_attr *a,
			     int mask, bool *use_net)
{
	const union ibv_gid *dgid = (mask & IBV_QP_AV) ?
					    &a->ah_attr.grh.dgid :
					    &qp->attr.ah_attr.grh.dgid;
	int ret;

	*use_net = false;
	/* the receive side of the net path: UD datagrams and the answers
	 * of any QP may come from other hosts */
	ret = shca_net_start(shca_net_rx);
	if (ret)
		return ret;
	if (qp->ibqp.qp_type == IBV_QPT_UD)
		return 0;
	if (shca_net_forced() || !shca_gid_is_local(dgid)) {
		*use_net = true;
		return 0;
	}
	/* the peer process; if it is not there yet, the requester looks
	 * again when it first sends */
	qp->peer = shca_peer_get(shca_qpn_slot((mask & IBV_QP_DEST_QPN) ?
						a->dest_qp_num :
						qp->attr.dest_qp_num));
	/*
	 * CMA refused (another user, Yama, seccomp): the pair uses the net
	 * path, over this host's own address.
	 */
	if (qp->peer && !qp->peer->cma) {
		shca_info_once("QP 0x%06x: process_vm_writev to pid %d is not "
			       "permitted: using the net path",
			       qp->ibqp.qp_num, (int)qp->peer->pid);
		qp->peer = NULL;
		*use_net = true;
	}
	return 0;
}

/* field = val, unless it holds val already (only this process writes) */
#define PUBLISH(field, val)                                               \
	do {                                                              \
		__typeof__(field) v_ = (__typeof__(field))(val);          \
		if ((field) != v_)                                        \
			__atomic_store_n(&(field), v_, __ATOMIC_RELAXED); \
	} while (0)

/* What peers read of this QP (arena.h); qp->lock held. */
void shca_qp_publish(struct shca_qp *qp)
{
	struct shca_qp_shm *m = qp->shm;
	struct shca_rq_shm *rq = qp->srq ? qp->srq->rq.shm : qp->rq.shm;
	struct shca_arena *a = shca_arena_self();
	const struct shca_pd *own =
		qp->pd && qp->pd->prot->remote ? qp->pd->prot : NULL;

	/* peers read these at any time: only what changed is written
	 * (moving to ERR, the common case, writes nothing but the state) */
	PUBLISH(m->qp_type, qp->ibqp.qp_type);
	/* unique in the process; a parent domain's PD */
	PUBLISH(m->pd, qp->pd ? qp->pd->prot->obj.handle : 0);
	PUBLISH(m->access, (uint32_t)qp->attr.qp_access_flags);
	PUBLISH(m->qkey, qp->attr.qkey);
	PUBLISH(m->dest_qpn, qp->attr.dest_qp_num);
	PUBLISH(m->min_rnr_timer, qp->attr.min_rnr_timer);
	PUBLISH(m->has_srq, qp->srq != NULL);
	/* receive WQEs are checked in their queue's PD: an SRQ's own */
	PUBLISH(m->rq_pd, qp->srq ? qp->srq->pd->prot->obj.handle : m->pd);
	PUBLISH(m->rq_off, shca_arena_off(a, rq));
	PUBLISH(m->rcq_off, qp->rcq ? shca_arena_off(a, qp->rcq->shm) : 0);
	/* an import of another process's PD: its owner's keys work
	 * through this QP too (docs/import.md) */
	PUBLISH(m->imp_slot, own ? (uint32_t)own->rslot : 0);
	PUBLISH(m->imp_pid, own ? (uint32_t)own->rpid : 0);
	PUBLISH(m->imp_pd, own ? own->rpd : 0);
	__atomic_store_n(&m->state, qp->attr.qp_state, __ATOMIC_RELEASE);
}

/* ------------------------------------------------------------------ */
/* Apply                                                               */

void shca_qp_reset_attr(struct shca_qp *qp)
{
	memset(&qp->attr, 0, sizeof(qp->attr));
	qp->attr.qp_state = IBV_QPS_RESET;
	qp->attr.cur_qp_state = IBV_QPS_RESET;
	qp->attr.path_mtu = IBV_MTU_256;	/* as rxe starts a QP */
	qp->attr.path_mig_state = IBV_MIG_MIGRATED;
}

static void apply_attr(struct shca_qp *qp, const struct ibv_qp_attr *a,
		       int mask)
{
	struct ibv_qp_attr *q = &qp->attr;

	if (mask & IBV_QP_EN_SQD_ASYNC_NOTIFY)
		q->en_sqd_async_notify = a->en_sqd_async_notify;
	if (mask & IBV_QP_ACCESS_FLAGS)
		q->qp_access_flags = a->qp_access_flags;
	if (mask & IBV_QP_PKEY_INDEX)
		q->pkey_index = a->pkey_index;
	if (mask & IBV_QP_PORT)
		q->port_num = a->port_num;
	if (mask & IBV_QP_QKEY)
		q->qkey = a->qkey;
	if (mask & IBV_QP_AV)
		q->ah_attr = a->ah_attr;
	if (mask & IBV_QP_PATH_MTU)
		q->path_mtu = a->path_mtu;
	if (mask & IBV_QP_TIMEOUT)
		q->timeout = a->timeout;
	if (mask & IBV_QP_RETRY_CNT)
		q->retry_cnt = a->retry_cnt;
	if (mask & IBV_QP_RNR_RETRY)
		q->rnr_retry = a->rnr_retry;
	/* the core masks PSNs to their 24 bits */
	if (mask & IBV_QP_RQ_PSN)
		q->rq_psn = a->rq_psn & PSN_MASK;
	if (mask & IBV_QP_SQ_PSN)
		q->sq_psn = a->sq_psn & PSN_MASK;
	if (mask & IBV_QP_MAX_QP_RD_ATOMIC)
		q->max_rd_atomic = a->max_rd_atomic;
	if (mask & IBV_QP_MAX_DEST_RD_ATOMIC)
		q->max_dest_rd_atomic = a->max_dest_rd_atomic;
	if (mask & IBV_QP_MIN_RNR_TIMER)
		q->min_rnr_timer = a->min_rnr_timer;
	if (mask & IBV_QP_PATH_MIG_STATE)
		q->path_mig_state = a->path_mig_state;
	if (mask & IBV_QP_DEST_QPN)
		q->dest_qp_num = a->dest_qp_num;
}

enum {
	EV_LAST_WQE = 1 << 0,	/* IBV_EVENT_QP_LAST_WQE_REACHED */
	EV_SQ_DRAINED = 1 << 1,	/* IBV_EVENT_SQ_DRAINED */
	EV_EXECUTE = 1 << 2,	/* resume the send queue */
};

/*
 * Carry out cur -> next, with sq.lock and rq.lock held.  Returns what to
 * do once the locks are dropped (EV_*).
 */
static unsigned int enter_state(struct shca_qp *qp, enum ibv_qp_state cur,
				enum ibv_qp_state next)
{
	unsigned int todo = 0;

	qp->attr.qp_state = next;
	qp->attr.cur_qp_state = next;
	qp->ibqp.state = next;
	switch (next) {
	case IBV_QPS_RESET:
		/* the work queues are emptied, without completions */
		qp->sq.head = qp->sq.tail;
		qp->sq.ngen = 0;
		shca_rq_flush(&qp->rq, NULL, 0);
		shca_qp_reset_attr(qp);
		qp->peer = NULL;
		shca_timer_disarm(&qp->retry_timer);
		shca_net_qp_stop(qp, true);
		qp->route = SHCA_ROUTE_HOST;
		qp->head_retries = qp->head_rnr_retries = 0;
		qp->head_ack_wait = false;
		qp->comm_est_reported = false;
		shca_host_fin_drop(qp);
		__atomic_store_n(&qp->shm->pending, 0, __ATOMIC_RELEASE);
		/* as mlx4/mlx5: a reset QP's completions leave its CQs */
		if (qp->scq)
			shca_cq_clean(qp->scq, qp->ibqp.qp_num, false);
		if (qp->rcq && qp->rcq != qp->scq)
			shca_cq_clean(qp->rcq, qp->ibqp.qp_num, false);
		break;
	case IBV_QPS_ERR:
		if (cur == IBV_QPS_ERR)
			break;
		shca_sq_flush(qp);
		/* exec_lock is held, which a running retry timer waits for:
		 * do not wait for it (it sees the state and does nothing) */
		shca_timer_disarm(&qp->retry_timer);
		shca_net_qp_stop(qp, false);
		/* rendezvous FINs it held (shm/xfer.c): a QP in error
		 * takes no receive */
		shca_host_fin_drop(qp);
		/*
		 * An SRQ's WQEs belong to no QP and stay; the QP reports
		 * that it takes no more of them (the affiliated asynchronous
		 * event "Last WQE Reached").
		 */
		if (qp->srq)
			todo |= EV_LAST_WQE;
		else
			shca_rq_flush(&qp->rq, qp->rcq, qp->ibqp.qp_num);
		break;
	case IBV_QPS_SQD:
		/*
		 * No WQE is ever half executed when the state changes, so
		 * the send queue is drained at once.
		 */
		if (cur == IBV_QPS_RTS && qp->attr.en_sqd_async_notify)
			todo |= EV_SQ_DRAINED;
		break;
	case IBV_QPS_RTS:
		if (cur == IBV_QPS_RTR)
			shca_net_qp_rts(qp);
		if (cur != IBV_QPS_RTS)
			todo |= EV_EXECUTE;
		break;
	default:
		break;
	}
	return todo;
}

static void after_transition(struct shca_qp *qp, unsigned int todo)
{
	struct shca_context *sctx = to_sctx(qp->ibqp.context);

	if (todo & EV_LAST_WQE)
		shca_async_event(sctx, IBV_EVENT_QP_LAST_WQE_REACHED, qp);
	if (todo & EV_SQ_DRAINED)
		shca_async_event(sctx, IBV_EVENT_SQ_DRAINED, qp);
	if (todo & EV_EXECUTE)
		shca_sq_execute(qp);
}

/*
 * Before the application moves a QP on the net path to ERR while sends
 * await their ACK: the engine carries out what has already arrived.  An
 * HCA has processed the ACKs it received before the modify; here they may
 * sit in the connection's socket while the engine thread waits for a
 * core.  The case that matters is rdma_disconnect after the peer's DREQ:
 * the peer ACKed our last SEND before its completion was visible to it
 * (the ACK is written under the QP's exec_lock, with the completion), and
 * so before it could disconnect; without this, that SEND, which the peer
 * has, completed here as flushed (tests/security/cq_thread.c).
 */
static void sync_before_error(struct shca_qp *qp)
{
	bool waiting;

	pthread_mutex_lock(&qp->exec_lock);
	waiting = qp->net.on && qp->sq.head != qp->sq.tail;
	pthread_mutex_unlock(&qp->exec_lock);
	if (waiting)
		shca_engine_sync();
}

/*
 * The kernel's uverbs modify_qp_mask: before the transition table is
 * consulted, an XRC initiator's MAX_DEST_RD_ATOMIC and MIN_RNR_TIMER and
 * an XRC target's MAX_QP_RD_ATOMIC, RETRY_CNT and RNR_RETRY are dropped,
 * not refused (perftest -c XRC sets RC's attributes on both halves).
 */
static int xrc_mask_strip(enum ibv_qp_type type, int mask)
{
	if (type == IBV_QPT_XRC_SEND)
		return mask & ~(IBV_QP_MAX_DEST_RD_ATOMIC |
				IBV_QP_MIN_RNR_TIMER);
	if (type == IBV_QPT_XRC_RECV)
		return mask & ~(IBV_QP_MAX_QP_RD_ATOMIC | IBV_QP_RETRY_CNT |
				IBV_QP_RNR_RETRY);
	return mask;
}

static int modify_qp(struct shca_qp *qp, struct ibv_qp_attr *attr, int mask)
{
	struct ibv_qp *ibqp = &qp->ibqp;
	enum ibv_qp_state cur, next;
	struct ibv_qp_attr a;
	unsigned int todo = 0;
	bool use_net = false;
	int ret;

	mask = xrc_mask_strip(ibqp->qp_type, mask);
	shca_net_acks_out(false);	/* ahead of what the modify shows */
	if ((mask & IBV_QP_STATE) && attr->qp_state == IBV_QPS_ERR)
		sync_before_error(qp);
	a = *attr;	/* the kernel works on a copy too */
	/* no WQE is being executed while the state changes */
	pthread_mutex_lock(&qp->exec_lock);
	pthread_mutex_lock(&qp->lock);
	cur = qp->attr.qp_state;
	ret = check_ports(qp, &a, &mask);
	if (!ret)
		ret = check_paths(qp, &a, mask);
	if (!ret)
		ret = check_transition(qp, &a, mask, &next);
	if (!ret)
		ret = check_values(qp, &a, mask);
	if (!ret && (mask & IBV_QP_STATE) && next == IBV_QPS_RTR &&
	    cur != IBV_QPS_RTR)
		ret = check_destination(qp, &a, mask, &use_net);
	if (ret) {
		pthread_mutex_unlock(&qp->lock);
		pthread_mutex_unlock(&qp->exec_lock);
		return ret;
	}

	pthread_mutex_lock(&qp->sq.lock);
	pthread_mutex_lock(&qp->rq.lock);
	apply_attr(qp, &a, mask);
	if ((mask & IBV_QP_STATE) && next == IBV_QPS_RTR &&
	    cur != IBV_QPS_RTR) {
		shca_net_qp_rtr(qp, &qp->attr.ah_attr.grh.dgid, use_net);
		qp->route = qp->net.on ? SHCA_ROUTE_NET : SHCA_ROUTE_HOST;
	}
	if (mask & IBV_QP_STATE)
		todo = enter_state(qp, cur, next);
	shca_qp_publish(qp);
	pthread_mutex_unlock(&qp->rq.lock);
	pthread_mutex_unlock(&qp->sq.lock);
	pthread_mutex_unlock(&qp->lock);
	pthread_mutex_unlock(&qp->exec_lock);

	shca_dbg("QP 0x%06x: state %d -> %d, mask 0x%x", ibqp->qp_num, cur,
		 next, mask);
	after_transition(qp, todo);
	return 0;
}

/* A QP the handle does not name: EINVAL, as the kernel's MODIFY_QP. */
int shca_modify_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *attr, int mask)
{
	struct shca_qp *qp;
	int ret;

	/* rdma-core's check, before the command */
	struct shca_xqp *x;

	if ((unsigned int)mask & ~(unsigned int)QP_ATTR_STANDARD)
		return -EOPNOTSUPP;
	x = shca_xqp_find(ibqp);
	if (x)
		return shca_xqp_modify(x, attr, mask);
	qp = shca_qp_lookup_obj(ibqp, NULL);
	if (!qp)
		return -EINVAL;
	/* the creator's handle of a QP it destroyed (others keep it) */
	ret = qp->ibqp.qp_type == IBV_QPT_XRC_RECV && shca_xqp_is_orphan(qp) ?
		      -EINVAL : modify_qp(qp, attr, mask);
	shca_obj_put(&qp->obj);
	return ret;
}

/* An opener's modify (xrc_qp.c), carried out by the creator: the same
 * checks as any caller's; -EIO for a QP going away. */
int shca_modify_qp_use(struct shca_qp *qp, struct ibv_qp_attr *attr,
		       int mask)
{
	int ret;

	if ((unsigned int)mask & ~(unsigned int)QP_ATTR_STANDARD)
		return -EOPNOTSUPP;
	qp = shca_qp_lookup_obj(&qp->ibqp, NULL);
	if (!qp)
		return -EIO;
	ret = modify_qp(qp, attr, mask);
	shca_obj_put(&qp->obj);
	return ret;
}

void shca_qp_to_error(struct shca_qp *qp)
{
	enum ibv_qp_state cur;
	unsigned int todo = 0;

	pthread_mutex_lock(&qp->exec_lock);
	pthread_mutex_lock(&qp->lock);
	cur = qp->attr.qp_state;
	if (cur != IBV_QPS_ERR && cur != IBV_QPS_RESET) {
		pthread_mutex_lock(&qp->sq.lock);
		pthread_mutex_lock(&qp->rq.lock);
		todo = enter_state(qp, cur, IBV_QPS_ERR);
		shca_qp_publish(qp);
		pthread_mutex_unlock(&qp->rq.lock);
		pthread_mutex_unlock(&qp->sq.lock);
	}
	pthread_mutex_unlock(&qp->lock);
	pthread_mutex_unlock(&qp->exec_lock);
	after_transition(qp, todo);
}

/* ------------------------------------------------------------------ */
/* Report                                                              */

/*
 * The mask is a hint: everything is filled in.  As rdma-core's
 * ibv_cmd_query_qp, bits from IBV_QP_RATE_LIMIT on are EOPNOTSUPP (before
 * the command); a QP the handle does not name is EINVAL, as the kernel's
 * QUERY_QP.
 */
static int query_qp(struct shca_qp *qp, struct ibv_qp_attr *attr,
		    struct ibv_qp_init_attr *init)
{
	struct ibv_qp *ibqp = &qp->ibqp;
	struct ibv_qp_init_attr i;
	struct ibv_qp_attr a;

	/* what peers marked, before the state is read: an error completion
	 * already polled has its state change visible, also when the engine
	 * took the marks first (doorbell.c) */
	shca_qp_await_marks(qp);
	memset(&i, 0, sizeof(i));
	pthread_mutex_lock(&qp->lock);
	a = qp->attr;
	a.cur_qp_state = a.qp_state;
	a.cap = qp->cap;
	a.sq_draining = 0;
	i.qp_context = ibqp->qp_context;
	i.send_cq = ibqp->send_cq;
	i.recv_cq = ibqp->recv_cq;
	i.srq = ibqp->srq;
	i.cap = qp->cap;
	i.qp_type = ibqp->qp_type;
	i.sq_sig_all = qp->sq_sig_all;
	pthread_mutex_unlock(&qp->lock);

	*attr = a;
	*init = i;
	return 0;
}

int shca_query_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *attr, int mask,
		  struct ibv_qp_init_attr *init)
{
	struct shca_xqp *x;
	struct shca_qp *qp;
	int ret;

	if ((unsigned int)mask & ~(unsigned int)(IBV_QP_RATE_LIMIT - 1))
		return -EOPNOTSUPP;
	if (!attr || !init)
		return -EINVAL;
	x = shca_xqp_find(ibqp);
	if (x)
		return shca_xqp_query(x, attr, mask, init);
	qp = shca_qp_lookup_obj(ibqp, NULL);
	if (!qp)
		return -EINVAL;
	ret = qp->ibqp.qp_type == IBV_QPT_XRC_RECV && shca_xqp_is_orphan(qp) ?
		      -EINVAL : query_qp(qp, attr, init);
	shca_obj_put(&qp->obj);
	return ret;
}

/* An opener's query (xrc_qp.c), answered by the creator. */
int shca_query_qp_use(struct shca_qp *qp, struct ibv_qp_attr *attr, int mask,
		      struct ibv_qp_init_attr *init)
{
	int ret;

	if ((unsigned int)mask & ~(unsigned int)(IBV_QP_RATE_LIMIT - 1))
		return -EOPNOTSUPP;
	qp = shca_qp_lookup_obj(&qp->ibqp, NULL);
	if (!qp)
		return -EIO;
	ret = query_qp(qp, attr, init);
	shca_obj_put(&qp->obj);
	return ret;
}

/* ------------------------------------------------------------------ */
/* Exported verbs                                                      */

SHCA_DEFAULT_VERSION(ibv_modify_qp)
int shca_latest_ibv_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr,
			      int mask)
{
	/* qp->state is set with the transition, under the QP's locks (the
	 * engine thread may move it to ERR at any time) */
	return shca_ret_errno(shca_modify_qp(qp, attr, mask));
}

SHCA_DEFAULT_VERSION(ibv_query_qp)
int shca_latest_ibv_query_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr,
			     int mask, struct ibv_qp_init_attr *init)
{
	/* rdma-core refreshes qp->state here; softhca keeps it current with
	 * every transition (enter_state) */
	return shca_ret_errno(shca_query_qp(qp, attr, mask, init));
}
