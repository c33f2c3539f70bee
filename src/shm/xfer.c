// SPDX-License-Identifier: MIT
/*
 * The same-host transport (see xfer.h): the requester does the DMA.  It
 * finds the destination's process, maps its arena (shm/peer.c), and runs
 * the responder's rules there itself (engine/responder.c, through
 * engine/xport.h), which answer at once.
 */
#include <errno.h>
#include <string.h>

#include "../common/slot.h"
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
 * (IBA o9-20, o10-37): the sending QP's remote read enable, then an MR
 * of its PD with the R_Key, REMOTE_READ, and the range within it.  A
 * memory window's R_Key is not looked up here (its READ fails).
 */
static int host_rndv_src(void *ctx, uint64_t addr, uint32_t rkey,
			 uint32_t len, struct iovec *src)
{
	struct shca_qp *qp = ctx;
	struct shca_mr *mr;

	if (!(qp->attr.qp_access_flags & IBV_ACCESS_REMOTE_READ))
		return -EACCES;
	if (!len) {
		src->iov_base = NULL;
		src->iov_len = 0;
		return 0;
	}
	mr = shca_lookup_mr(qp->pd, rkey, IBV_ACCESS_REMOTE_READ, addr, len,
			    true);
	if (!mr)
		return -EACCES;
	src->iov_base = (char *)mr->base + (addr - mr->iova);
	src->iov_len = len;
	return 0;
}

/*
 * After a matched rendezvous's SEND completed: a READ that failed its
 * checks is this QP's remote access error (IBV_EVENT_QP_ACCESS_ERR, the
 * QP to error, as a READ responder's); a READ carried out is followed
 * by the receiver's FIN, a SEND from its QP to this one, delivered by
 * the receive rules here (no receive WQE: the FIN is lost and counted,
 * where a NIC would retry it after an RNR NAK).
 */
void shca_host_rndv_done(struct shca_qp *qp, const struct shca_xfer *x,
			 const struct shca_xfer_result *res)
{
	struct shca_xfer_result fres;
	struct shca_xfer f;
	struct iovec v;

	if (res->rndv_bad && qp->shm) {
		__atomic_or_fetch(&qp->shm->pending, SHCA_QP_PEND_ACCESS_ERR,
				  __ATOMIC_ACQ_REL);
		shca_doorbell_ring();
		return;
	}
	if (!res->rndv_fin)
		return;
	memset(&f, 0, sizeof(f));
	f.qp_type = IBV_QPT_RC;
	f.src_qpn = x->dest_qpn;
	f.dest_qpn = qp->ibqp.qp_num;
	f.opcode = IBV_WR_SEND;
	v.iov_base = (void *)res->fin;
	v.iov_len = sizeof(res->fin);
	f.local = &v;
	f.nlocal = 1;
	f.length = sizeof(res->fin);
	shca_stages.respond(shca_peer_get(shca_qpn_slot(qp->ibqp.qp_num)),
			    &f, &fres);
	if (fres.outcome != SHCA_XFER_DONE && qp->shm)
		shca_stat_add(&qp->shm->stats,
			      fres.outcome == SHCA_XFER_RNR ?
				      SHCA_STAT_SEND_RNR_ERR :
				      SHCA_STAT_DROPPED_PKTS, 1);
}

/*
 * The requester does the DMA: the responder's rules run here, against the
 * destination process's arena and memory, and answer at once.  RC and UC
 * find the destination's process once (qp_modify.c looked at RTR; if it
 * was not there yet, now); UD a message at a time, and a process that
 * refuses CMA is for the net (UNREACHABLE).  The message is counted at
 * both ends (shca_xfer_count).
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
	}
	hx.count_resp = true;
	if (x->qp_type == IBV_QPT_RC) {
		hx.rndv_src = host_rndv_src;
		hx.rndv_ctx = qp;
	}
	shca_stages.respond(peer, &hx, res);
	if (qp->shm)
		shca_stages.count(&qp->shm->stats, &hx, true);
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
};
