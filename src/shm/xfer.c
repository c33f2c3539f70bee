// SPDX-License-Identifier: MIT
/*
 * The same-host transport (see xfer.h): the requester does the DMA.  It
 * finds the destination's process, maps its arena (shm/peer.c), and runs
 * the responder's rules there itself (engine/responder.c, through
 * engine/xport.h), which answer at once.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "../common/slot.h"
#include "../common/util.h"
#include "../verbs/shca.h"
#include "host.h"
#include "peer.h"
#include "xfer.h"

/*
 * UD multicast on this host: every QP attached to the group (the host
 * table) gets a copy, the sender's own QP included: multicast loopback is
 * on unless blocked (IBV_QP_CREATE_BLOCK_SELF_MCAST_LB, which softhca does
 * not offer).
 */
static void host_multicast(const struct shca_qp *qp,
			   const struct shca_send_wqe *w,
			   const struct shca_xfer *x)
{
	struct shca_mcast_member m[64];
	struct shca_ah *ah = to_sah(w->wr.wr.ud.ah);
	struct shca_xfer mx = *x;
	int n, i;

	(void)qp;
	n = shca_host_mcast_members(&ah->attr.grh.dgid, m, 64);
	for (i = 0; i < n; i++) {
		struct shca_peer *p = shca_peer_get(m[i].slot);
		struct shca_xfer_result res;

		if (!p)
			continue;
		mx.dest_qpn = m[i].qpn;
		shca_stages.respond(p, &mx, &res);
	}
}

/*
 * A tag-matching rendezvous's READ, answered by its sender: this process
 * (engine/tm_rx.c, x->rndv_src).  The rules of an RDMA READ responder
 * (IBA o9-20, o10-37): the sending QP's remote read enable, then the
 * R_Key: an MR of its PD, or a valid memory window of its PD (a type 2
 * window bound to this QP), with REMOTE_READ and the range within it:
 * the owner's own R_Key check against its arena's entry, under an access
 * lane of its arena from the check to the copy's last byte
 * (shca_stages.hold, engine/responder.c), as its net path's READ
 * responder makes it: a deregistration of the MR waits for the copy.
 *
 * A READ that passes may be followed by a FIN to this QP: it counts in
 * the QP's fin_wait from now (fin_raise), so that a message its peer
 * sends once it has seen the rendezvous complete cannot overtake the
 * FIN (host_xmit settles it when no FIN came of it).
 */
static void fin_raise(struct shca_qp *qp);

static int host_rndv_src(void *ctx, uint64_t addr, uint32_t rkey,
			 uint32_t len, struct iovec *src)
{
	struct shca_qp *qp = ctx;
	struct shca_peer *self;
	void *va = NULL;

	if (!(qp->attr.qp_access_flags & IBV_ACCESS_REMOTE_READ))
		return -EACCES;
	if (len) {
		/* the R_Key checked under a lane of this process's arena,
		 * held until the copy's last byte (host_xmit puts it
		 * back): ibv_dereg_mr's drain waits for it */
		self = shca_peer_self();
		if (!self || !qp->pd ||
		    shca_stages.hold(self, qp->ibqp.qp_num,
				     qp->pd->prot->obj.handle, rkey,
				     IBV_ACCESS_REMOTE_READ, addr, len,
				     &qp->rndv_lane, &va))
			return -EACCES;
	}
	src->iov_base = va;
	src->iov_len = len;
	fin_raise(qp);
	return 0;
}

/*
 * The FINs a QP could not take (no receive WQE: an RNR NAK to the
 * receiver's QP, which a NIC retries): held here, in this process, in
 * the order they came, and delivered as soon as a receive is posted to
 * the QP or its SRQ, each before anything else its peer sends to the QP
 * (the peer finds fin_wait set and is answered RNR: its requests came
 * after the FIN on the connection).  As with rnr_retry 7, a FIN waits
 * until a receive comes, for as long as the QP can receive.
 *
 * A QP holds at most as many as its send queue is deep (each comes
 * from one of its SENDs), and fewer if memory for them cannot be had;
 * one more is lost and counted (an RNR NAK sent and a dropped packet),
 * as a FIN whose receiver's QP had exhausted its RNR retries.  A QP
 * that moves to ERR or RESET, or is destroyed, drops those it holds:
 * there is nothing to deliver them to.
 *
 * fin_lock guards every QP's ring and the list of QPs holding some; it
 * comes after a QP's exec_lock, rq.lock and sq.lock, and before the
 * receive queue's arena lock that delivery takes.
 */
static pthread_mutex_t fin_lock = PTHREAD_MUTEX_INITIALIZER;
static struct shca_qp *fin_list;

static void fin_wait_add(struct shca_qp *qp, int32_t n)
{
	if (qp->shm && n)
		__atomic_add_fetch(&qp->shm->fin_wait, (uint32_t)n,
				   __ATOMIC_ACQ_REL);
}

/* Under exec_lock: host_rndv_src passed, a FIN may follow. */
static void fin_raise(struct shca_qp *qp)
{
	if (qp->fin_raised)
		return;
	qp->fin_raised = true;
	fin_wait_add(qp, 1);
}

/* The request that raised fin_wait has ended without a FIN to hold. */
static void fin_settle(struct shca_qp *qp, const struct shca_xfer_result *res)
{
	if (!qp->fin_raised)
		return;
	qp->fin_raised = false;
	if (res->outcome != SHCA_XFER_DONE ||
	    res->status != IBV_WC_SUCCESS || !res->rndv_fin)
		fin_wait_add(qp, -1);
}

static void fin_count_lost(struct shca_qp *qp, bool rnr)
{
	if (qp->shm)
		shca_stat_add(&qp->shm->stats,
			      rnr ? SHCA_STAT_SEND_RNR_ERR :
				    SHCA_STAT_DROPPED_PKTS, 1);
}

/*
 * One FIN to qp by the receive rules (fin_lock held): false when it
 * found no receive WQE (it stays held); true when it is done with,
 * delivered or not (the QP cannot receive: lost and counted).
 */
static bool fin_deliver(struct shca_qp *qp, const uint8_t *fin)
{
	struct shca_xfer_result fres;
	struct shca_xfer f;
	struct iovec v;

	memset(&f, 0, sizeof(f));
	f.qp_type = IBV_QPT_RC;
	f.src_qpn = qp->attr.dest_qp_num;
	f.dest_qpn = qp->ibqp.qp_num;
	f.opcode = IBV_WR_SEND;
	f.fin = true;
	v.iov_base = (void *)fin;
	v.iov_len = SHCA_RNDV_FIN_LEN;
	f.local = &v;
	f.nlocal = 1;
	f.length = SHCA_RNDV_FIN_LEN;
	shca_stages.respond(shca_peer_get(shca_qpn_slot(qp->ibqp.qp_num)),
			    &f, &fres);
	if (fres.outcome == SHCA_XFER_RNR)
		return false;
	if (fres.outcome != SHCA_XFER_DONE)
		fin_count_lost(qp, false);
	return true;
}

static void fin_unlist(struct shca_qp *qp)
{
	struct shca_qp **pp;

	for (pp = &fin_list; *pp; pp = &(*pp)->fin_next)
		if (*pp == qp) {
			*pp = qp->fin_next;
			break;
		}
	qp->fin_next = NULL;
}

/* Deliver what qp holds, oldest first, until one finds no WQE. */
static void fin_flush_locked(struct shca_qp *qp)
{
	while (qp->fin_n) {
		if (!fin_deliver(qp, qp->fin_q[qp->fin_head]))
			return;
		qp->fin_head = (qp->fin_head + 1) % qp->fin_cap;
		qp->fin_n--;
		fin_wait_add(qp, -1);
	}
	fin_unlist(qp);
}

/* Hold one more FIN (fin_lock held): false when the QP has no room. */
static bool fin_hold(struct shca_qp *qp, const uint8_t *fin)
{
	uint32_t cap = qp->cap.max_send_wr ? qp->cap.max_send_wr : 1;

	if (!qp->fin_q) {
		qp->fin_q = calloc(cap, sizeof(*qp->fin_q));
		if (!qp->fin_q)
			return false;
		qp->fin_cap = cap;
		qp->fin_head = 0;
	}
	if (qp->fin_n >= qp->fin_cap)
		return false;
	memcpy(qp->fin_q[(qp->fin_head + qp->fin_n) % qp->fin_cap], fin,
	       SHCA_RNDV_FIN_LEN);
	if (!qp->fin_n++) {
		qp->fin_next = fin_list;
		/* seen by a poster's unlocked look (below) before this
		 * thread looks at the receive queue again */
		__atomic_store_n(&fin_list, qp, __ATOMIC_SEQ_CST);
	}
	shca_full_fence();
	return true;
}

void shca_host_fin_post_recv(struct shca_qp *qp)
{
	/* the WQE just posted, then the list: fin_hold's order mirrored */
	shca_full_fence();
	if (!__atomic_load_n(&fin_list, __ATOMIC_SEQ_CST))
		return;
	pthread_mutex_lock(&fin_lock);
	if (qp->fin_n)
		fin_flush_locked(qp);
	pthread_mutex_unlock(&fin_lock);
}

void shca_host_fin_post_srq(const struct shca_srq *srq)
{
	struct shca_qp *qp, *next;

	/* the WQE just posted, then the list: fin_hold's order mirrored */
	shca_full_fence();
	if (!__atomic_load_n(&fin_list, __ATOMIC_SEQ_CST))
		return;
	pthread_mutex_lock(&fin_lock);
	for (qp = fin_list; qp; qp = next) {
		next = qp->fin_next;
		if (qp->srq == srq)
			fin_flush_locked(qp);
	}
	pthread_mutex_unlock(&fin_lock);
}

void shca_host_fin_drop(struct shca_qp *qp)
{
	pthread_mutex_lock(&fin_lock);
	if (qp->fin_n) {
		if (qp->shm)
			shca_stat_add(&qp->shm->stats, SHCA_STAT_DROPPED_PKTS,
				      qp->fin_n);
		fin_wait_add(qp, -(int32_t)qp->fin_n);
		qp->fin_n = 0;
		fin_unlist(qp);
	}
	pthread_mutex_unlock(&fin_lock);
}

void shca_host_fin_forget(struct shca_qp *qp)
{
	shca_host_fin_drop(qp);
	pthread_mutex_lock(&fin_lock);
	free(qp->fin_q);
	qp->fin_q = NULL;
	qp->fin_cap = 0;
	pthread_mutex_unlock(&fin_lock);
}

/*
 * After a matched rendezvous's SEND completed: a READ that failed its
 * checks is this QP's remote access error (IBV_EVENT_QP_ACCESS_ERR, the
 * QP to error, as a READ responder's); a READ carried out is followed
 * by the receiver's FIN, a SEND from its QP to this one, delivered by
 * the receive rules here, or held until a receive WQE comes (above).
 */
void shca_host_rndv_done(struct shca_qp *qp, const struct shca_xfer *x,
			 const struct shca_xfer_result *res)
{
	(void)x;
	if (res->rndv_bad && qp->shm) {
		__atomic_or_fetch(&qp->shm->pending, SHCA_QP_PEND_ACCESS_ERR,
				  __ATOMIC_ACQ_REL);
		shca_doorbell_ring();
		return;
	}
	if (!res->rndv_fin)
		return;
	/* fin_wait counts it already (fin_raise) */
	pthread_mutex_lock(&fin_lock);
	if (!qp->fin_n && fin_deliver(qp, res->fin)) {
		fin_wait_add(qp, -1);
	} else if (!fin_hold(qp, res->fin)) {
		fin_count_lost(qp, true);
		fin_count_lost(qp, false);
		fin_wait_add(qp, -1);
	} else {
		/* a receive may have come since the first one failed */
		fin_flush_locked(qp);
	}
	pthread_mutex_unlock(&fin_lock);
}

/*
 * What a run of the send queue kept (the requester's run, struct
 * shca_transport_ops): the counts it gathered, the responder's before its
 * process is let go, whose arena they are in.
 */
static void host_run_end(struct shca_qp *qp)
{
	shca_stages.count_flush(&qp->resp_tally);
	if (qp->run_peer) {
		shca_peer_release(qp->run_peer);
		qp->run_peer = NULL;
	}
}

/*
 * The requester does the DMA: the responder's rules run here, against the
 * destination process's arena and memory, and answer at once.  RC and UC
 * find the destination's process once (qp_modify.c looked at RTR; if it
 * was not there yet, now); UD a message at a time, and a process that
 * refuses CMA is for the net (UNREACHABLE).  The message is counted at
 * both ends (shca_xfer_wire).
 */
static void host_xmit(struct shca_qp *qp, const struct shca_send_wqe *w,
		      const struct shca_xfer *x, struct shca_xfer_result *res)
{
	struct shca_xfer hx = *x;
	struct shca_peer *peer;

	if (x->qp_type == IBV_QPT_UD && x->dest_qpn == 0xffffff) {
		host_multicast(qp, w, x);
		memset(res, 0, sizeof(*res));
		res->outcome = SHCA_XFER_DONE;
		res->status = IBV_WC_SUCCESS;
		return;
	}
	if (x->qp_type == IBV_QPT_UD) {
		peer = shca_peer_get(shca_qpn_slot(x->dest_qpn));
		if (peer && !peer->cma) {
			res->outcome = SHCA_XFER_UNREACHABLE;
			return;
		}
	} else {
		if (!qp->peer)
			qp->peer = shca_peer_get(shca_qpn_slot(x->dest_qpn));
		peer = qp->peer;
		/* one destination: held until the run ends (host_run_end) */
		if (peer != qp->run_peer) {
			host_run_end(qp);
			if (peer && shca_peer_hold(peer))
				qp->run_peer = peer;
		}
	}
	hx.count_resp = true;
	if (x->qp_type == IBV_QPT_RC) {
		hx.rndv_src = host_rndv_src;
		hx.rndv_ctx = qp;
	}
	qp->rndv_lane.lane = NULL;
	if (peer && peer == qp->run_peer) {
		hx.resp_tally = &qp->resp_tally;
		shca_stages.respond_held(peer, &hx, res);
	} else {
		shca_stages.respond(peer, &hx, res);
	}
	/* a rendezvous' source copied (or refused): its MR may go */
	shca_stages.unhold(&qp->rndv_lane);
	fin_settle(qp, res);
	if (qp->shm) {
		/* exec_lock held: this QP's own counts are ours alone */
		struct shca_xfer_wire c = shca_xfer_wire(x);
		struct shca_stat_own *o = &qp->shm->own;

		shca_stat_own_add(&o->sent_pkts, c.out_pkts);
		shca_stat_own_add(&o->sent_bytes, c.out_bytes);
		shca_stat_own_add(&o->rcvd_pkts, c.back_pkts);
		shca_stat_own_add(&o->rcvd_bytes, c.back_bytes);
	}
}

/* The same host answers every request at once: no window, no timer. */
static bool host_sq_run(struct shca_qp *qp)
{
	(void)qp;
	return false;
}

static bool host_timer(struct shca_qp *qp)
{
	(void)qp;
	return false;
}

const struct shca_transport_ops shca_host_ops = {
	.name = "host",
	.sq_run = host_sq_run,
	.timer = host_timer,
	.xmit = host_xmit,
	.run_end = host_run_end,
};
