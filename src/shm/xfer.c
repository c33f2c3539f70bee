// SPDX-License-Identifier: MIT
/*
 * The same-host transport (see xfer.h): the requester does the DMA.  It
 * finds the destination's process, maps its arena (shm/peer.c), and runs
 * the responder's rules there itself (engine/responder.c, through
 * engine/xport.h), which answer at once.
 */
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
