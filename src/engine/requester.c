// SPDX-License-Identifier: MIT
/*
 * The requester: executes a QP's send queue in order.
 *
 * shca_sq_execute() runs from ibv_post_send (the caller's thread) and from
 * the engine thread when a retry timer fires.  It takes WQEs from the head
 * of the send queue one at a time, checks the local side (opcode against
 * the QP's transport, lengths, the L_Keys of a gather list), hands the
 * request to its transport (xmit below: through engine/xport.h, the QP's
 * or, UD, the AH's; a transport with a window of its own, the net's RC,
 * runs the queue itself), and completes it (completer.c; a READ's or an
 * atomic's L_Keys are checked when the response is placed, as a NIC does):
 *
 *   done        completion (if signaled, or in error), next WQE
 *   RNR         RC: wait the responder's RNR timer, retry; rnr_retry 7 is
 *               forever, otherwise RNR_RETRY_EXC_ERR when exhausted
 *   no response RC: wait the local ACK timeout, retry; RETRY_EXC_ERR
 *               after retry_cnt retries (IBA 9.7.6.1.3)
 *
 * A completion in error moves an RC QP to the error state, a UC or UD QP
 * to the send queue error state; both flush what is left of the send
 * queue (IBA 10.3.1, 10.8.3.3).  Later WQEs wait behind a retried one, so
 * RC ordering holds.
 */
#include <errno.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/ip.h>

#include "../verbs/shca.h"
#include "engine.h"
#include "xport.h"

#define MAX_LOCAL_IOV 64

/* IBA 9.7.5.2.8, table 45: RNR NAK timer field -> microseconds */
static const uint32_t rnr_timer_us[32] = {
	655360, 10, 20, 30, 40, 60, 80, 120, 160, 240, 320, 480, 640, 960,
	1280, 1920, 2560, 3840, 5120, 7680, 10240, 15360, 20480, 30720,
	40960, 61440, 81920, 122880, 163840, 245760, 327680, 491520,
};

uint64_t shca_wqe_length(const struct shca_send_wqe *w)
{
	uint64_t len = 0;
	int i;

	if (w->wr.send_flags & IBV_SEND_INLINE)
		return w->inline_len;
	for (i = 0; i < w->wr.num_sge; i++)
		len += w->sge[i].length;
	return len;
}

/*
 * The local side: every SGE's L_Key in this process's MR table, with our
 * PD, and local write where we write (READ, atomics).  IBA C10-...:
 * failures are Local Protection Errors.  exec_lock held: the QP's last
 * L_Key is kept (qp->lkey_cache), so a stream of WRs from one buffer
 * takes no lock of the process's MR table.
 */
enum ibv_wc_status shca_wqe_local_iov(struct shca_qp *qp,
				      const struct shca_send_wqe *w,
				      bool write, struct iovec *iov,
				      int *niov)
{
	if (w->wr.send_flags & IBV_SEND_INLINE) {
		iov[0].iov_base = (void *)w->sge;
		iov[0].iov_len = w->inline_len;
		*niov = w->inline_len ? 1 : 0;
		return IBV_WC_SUCCESS;
	}
	return shca_sge_iov_cached(qp->pd, &qp->lkey_cache, w->sge,
				   w->wr.num_sge,
				   write ? IBV_ACCESS_LOCAL_WRITE : 0, iov,
				   niov);
}

/*
 * The local side with the L_Keys of another process's MRs too: a QP on
 * a PD shared with that process (an import of its PD, or a PD of ours it
 * imported: verbs/import_key.c) reaches them
 * through a bounce buffer in io, copied in now (gather) or out when the
 * response is placed (scatter: shca_imp_put).  Where the transport is
 * done with the local memory when xmit returns (shca_imp_route_ok: not
 * the net path's RC window); the post refuses such keys elsewhere
 * (verbs/import_key.c shca_imp_qp_keys_ok).
 */
static enum ibv_wc_status local_iov(struct shca_qp *qp,
				    const struct shca_send_wqe *w, bool write,
				    struct iovec *iov, int *niov,
				    struct shca_imp_io *io)
{
	enum ibv_wc_status st = shca_wqe_local_iov(qp, w, write, iov, niov);

	if (st == IBV_WC_LOC_PROT_ERR && shca_pd_shared(qp->pd) &&
	    shca_imp_route_ok(qp->ibqp.qp_type, qp->route) &&
	    !(w->wr.send_flags & IBV_SEND_INLINE))
		st = shca_imp_sge_iov(qp->pd->prot, w->sge, w->wr.num_sge,
				      write ? IBV_ACCESS_LOCAL_WRITE : 0,
				      iov, niov, io);
	return st;
}

static uint16_t ip_csum(const void *data, size_t len)
{
	const uint16_t *p = data;
	uint32_t sum = 0;

	for (; len > 1; len -= 2)
		sum += *p++;
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)~sum;
}

/*
 * The 40 bytes a UD receive buffer starts with.  RoCE v2 over IPv4 puts
 * the IPv4 header in the last 20 bytes; over IPv6 it is the IPv6 header
 * (IBA A17.4.5.1).  Lengths count UDP, BTH, DETH, payload and ICRC.
 */
void shca_build_grh(uint8_t *grh, const union ibv_gid *sgid,
		    const struct ibv_global_route *dst, uint64_t payload)
{
	struct in6_addr s, d;
	uint32_t l4 = 8 + 12 + 8 + (uint32_t)payload + 4;

	memcpy(&s, sgid->raw, 16);
	memcpy(&d, dst->dgid.raw, 16);
	memset(grh, 0, SHCA_GRH_LEN);
	if (IN6_IS_ADDR_V4MAPPED(&s) && IN6_IS_ADDR_V4MAPPED(&d)) {
		struct iphdr *ip = (struct iphdr *)(grh + 20);

		ip->version = 4;
		ip->ihl = 5;
		ip->tos = dst->traffic_class;
		ip->tot_len = htons((uint16_t)(20 + l4));
		ip->frag_off = htons(IP_DF);
		ip->ttl = dst->hop_limit ? dst->hop_limit : 64;
		ip->protocol = IPPROTO_UDP;
		memcpy(&ip->saddr, &s.s6_addr32[3], 4);
		memcpy(&ip->daddr, &d.s6_addr32[3], 4);
		ip->check = ip_csum(ip, 20);
	} else {
		uint32_t vtf = 6u << 28 |
			       (uint32_t)dst->traffic_class << 20 |
			       (dst->flow_label & 0xfffff);

		vtf = htonl(vtf);
		memcpy(grh, &vtf, 4);
		grh[4] = (uint8_t)(l4 >> 8);
		grh[5] = (uint8_t)l4;
		grh[6] = IPPROTO_UDP;
		grh[7] = dst->hop_limit ? dst->hop_limit : 64;
		memcpy(grh + 8, sgid->raw, 16);
		memcpy(grh + 24, dst->dgid.raw, 16);
	}
}

static bool is_atomic(enum ibv_wr_opcode op)
{
	return op == IBV_WR_ATOMIC_CMP_AND_SWP ||
	       op == IBV_WR_ATOMIC_FETCH_AND_ADD;
}

/*
 * Fill the transport request for WQE w; IBV_WC_SUCCESS or the local
 * error to complete it with at once.
 *
 * *late is the local error found that only the response would meet: the
 * L_Keys of a READ's or an atomic's local buffer are those of the
 * response's target, which a NIC checks when the response arrives, after
 * the responder has carried the request out (mlx5: with both keys bad the
 * status is REM_ACCESS_ERR; with only the local one bad the READ was
 * served and the atomic changed the remote word, then LOC_PROT_ERR).  A
 * READ with a bad local key goes out with no local buffer (nothing is
 * placed); an atomic's buffer is looked up when its result is placed.
 */
static enum ibv_wc_status prepare(struct shca_qp *qp,
				  const struct shca_send_wqe *w,
				  struct shca_xfer *x, struct iovec *iov,
				  uint8_t *grh, enum ibv_wc_status *late,
				  struct shca_imp_io *io)
{
	enum ibv_wr_opcode op = w->wr.opcode;
	enum ibv_wc_status st;
	int niov = 0;

	memset(x, 0, sizeof(*x));
	*late = IBV_WC_SUCCESS;
	/* an operation the QP's transport does not have (READ on UC, WRITE
	 * on UD, ...; sq_check_wr posted it): a Local QP Operation Error,
	 * nothing sent, as mlx5 completes it */
	if (!shca_wr_legal(qp->ibqp.qp_type, op))
		return IBV_WC_LOC_QP_OP_ERR;
	x->qp_type = qp->ibqp.qp_type;
	/* XRC is RC toward an XRC_RECV QP, naming the SRQ (the XRCETH) */
	if (qp->ibqp.qp_type == IBV_QPT_XRC_SEND) {
		x->qp_type = IBV_QPT_RC;
		x->xrc_srqn = w->wr.qp_type.xrc.remote_srqn;
		/* 0 would mean "not XRC" to the responder: no SRQ has it, as
		 * none has a number beyond 24 bits (the net path sends 0
		 * for those, its responder refuses 0 the same way) */
		if (!x->xrc_srqn)
			x->xrc_srqn = SHCA_XRC_SRQN_NONE;
	}
	x->src_qpn = qp->ibqp.qp_num;
	x->opcode = op;
	x->solicited = w->wr.send_flags & IBV_SEND_SOLICITED;
	x->imm_data = w->wr.imm_data;
	if (op == IBV_WR_SEND_WITH_INV)
		x->inv_rkey = w->wr.invalidate_rkey;
	x->length = shca_wqe_length(w);
	if (x->length > SHCA_MAX_MSG_SZ)
		return IBV_WC_LOC_LEN_ERR;
	if (op == IBV_WR_RDMA_READ) {
		*late = local_iov(qp, w, true, iov, &niov, io);
		if (*late != IBV_WC_SUCCESS)
			niov = 0;
	} else if (!is_atomic(op)) {
		/* the gather list: read before anything is sent */
		st = local_iov(qp, w, false, iov, &niov, io);
		if (st != IBV_WC_SUCCESS)
			return st;
	}
	x->local = iov;
	x->nlocal = niov;

	switch (op) {
	case IBV_WR_RDMA_WRITE:
	case IBV_WR_RDMA_WRITE_WITH_IMM:
	case IBV_WR_RDMA_READ:
		x->remote_addr = w->wr.wr.rdma.remote_addr;
		x->rkey = w->wr.wr.rdma.rkey;
		break;
	case IBV_WR_ATOMIC_CMP_AND_SWP:
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
		/* IBA C10-...: the local buffer takes the 8-byte result */
		if (x->length != 8)
			return IBV_WC_LOC_LEN_ERR;
		x->remote_addr = w->wr.wr.atomic.remote_addr;
		x->rkey = w->wr.wr.atomic.rkey;
		x->compare_add = w->wr.wr.atomic.compare_add;
		x->swap = w->wr.wr.atomic.swap;
		break;
	default:
		break;
	}
	/* IBA Annex A19 (qp.c built them: no local memory) */
	if (op == IBV_WR_ATOMIC_WRITE) {
		x->remote_addr = w->wr.wr.atomic.remote_addr;
		x->rkey = w->wr.wr.atomic.rkey;
		x->swap = w->wr.wr.atomic.swap;
		x->length = 8;
	} else if ((unsigned int)op == SHCA_WR_FLUSH) {
		x->remote_addr = w->wr.wr.atomic.remote_addr;
		x->rkey = w->wr.wr.atomic.rkey;
		x->length = w->wr.wr.atomic.compare_add;
		x->flush_type = (uint8_t)w->wr.wr.atomic.swap;
		x->flush_level = (uint8_t)(w->wr.wr.atomic.swap >> 8);
	}

	if (qp->ibqp.qp_type == IBV_QPT_UD) {
		struct shca_ah *ah = to_sah(w->wr.wr.ud.ah);
		union ibv_gid sgid;

		/* IBA C10-...: UD messages fit one packet of the path MTU */
		if (x->length > 128u << shca_device_active_mtu(
					  to_sctx(qp->ibqp.context)->dev))
			return IBV_WC_LOC_LEN_ERR;
		x->dest_qpn = w->wr.wr.ud.remote_qpn;
		/* IBA C10-...: a Q_Key with the high bit set means "use the
		 * QP's own" */
		x->qkey = (w->wr.wr.ud.remote_qkey & 0x80000000u) ?
				  qp->attr.qkey :
				  w->wr.wr.ud.remote_qkey;
		if (shca_device_gid(to_sctx(qp->ibqp.context)->dev,
				    ah->attr.grh.sgid_index, &sgid))
			memset(&sgid, 0, sizeof(sgid));
		shca_build_grh(grh, &sgid, &ah->attr.grh, x->length);
		x->grh = grh;
	} else {
		x->dest_qpn = qp->attr.dest_qp_num;
		x->pmtu = 128u << qp->attr.path_mtu;
	}
	return IBV_WC_SUCCESS;
}

/*
 * Hand the message to its transport (xport.h).  RC and UC: the QP's, chosen
 * at RTR.  UD, a message at a time: the same host when the AH is local
 * (ah.c: not another host, not SOFTHCA_NET=1) and the destination's
 * process takes it that way (not when it refuses CMA), the net otherwise;
 * a multicast message goes to the group's members on other hosts (one IP
 * multicast datagram, sent without loopback) and then to those on this
 * host, once each.
 */
static void xmit(struct shca_qp *qp, const struct shca_send_wqe *w,
		 const struct shca_xfer *x, struct shca_xfer_result *res)
{
	const struct shca_transport_ops *host =
		shca_transports[SHCA_ROUTE_HOST];
	const struct shca_transport_ops *net = shca_transports[SHCA_ROUTE_NET];

	if (qp->ibqp.qp_type != IBV_QPT_UD) {
		shca_transports[qp->route]->xmit(qp, w, x, res);
		return;
	}
	if (x->dest_qpn == 0xffffff) {
		net->xmit(qp, w, x, res);
		host->xmit(qp, w, x, res);
		return;
	}
	res->outcome = SHCA_XFER_UNREACHABLE;
	if (to_sah(w->wr.wr.ud.ah)->local)
		host->xmit(qp, w, x, res);
	if (res->outcome == SHCA_XFER_UNREACHABLE)
		net->xmit(qp, w, x, res);
}

static void execute_locked(struct shca_qp *qp);

/*
 * The QP's RNR or ACK timer: the transport's retry, or the head WQE's.
 * Only for the deadline it was woken for: while it waited for exec_lock,
 * a post, an ACK or a state change may have armed the timer anew (or
 * disarmed it), and then no try has timed out (the WQEs in flight have
 * the new deadline): nothing is sent again, no retry is counted against
 * retry_cnt.  The new deadline's expiry comes on its own.
 */
static void qp_retry_timer(struct shca_timer *t)
{
	struct shca_qp *qp = container_of(t, struct shca_qp, retry_timer);

	pthread_mutex_lock(&qp->exec_lock);
	if (!shca_timer_stale(t) && !shca_transports[qp->route]->timer(qp))
		execute_locked(qp);
	pthread_mutex_unlock(&qp->exec_lock);
}

/* One more of a QP's counters (`softhca stat`), as the net path counts. */
static void qp_count(struct shca_qp *qp, enum shca_stat s)
{
	if (qp->shm)
		shca_stat_add(&qp->shm->stats, s, 1);
}

/* The send WQE at the head ends with status st (not SUCCESS). */
static void fail_head(struct shca_qp *qp, struct shca_send_wqe *w,
		      enum ibv_wc_status st)
{
	struct shca_send_wqe done = *w;

	qp->head_retries = 0;
	qp->head_rnr_retries = 0;
	/* the slot is free before the completion is seen */
	shca_sq_pop(qp);
	shca_complete_send(qp, &done, st, 0);
	shca_sq_failed(qp);
}

/* A local operation at the head completed. */
static void complete_local(struct shca_qp *qp, struct shca_send_wqe *w)
{
	struct shca_send_wqe done = *w;

	qp->head_retries = 0;
	qp->head_rnr_retries = 0;
	shca_sq_pop(qp);
	shca_complete_send(qp, &done, IBV_WC_SUCCESS, 0);
}

/* The QP's send queue as far as it goes now (execute_locked). */
static void execute_run(struct shca_qp *qp)
{
	struct iovec iov[MAX_LOCAL_IOV];
	uint8_t grh[SHCA_GRH_LEN];

	for (;;) {
		struct shca_send_wqe *w = shca_sq_head(qp);
		struct shca_xfer_result res;
		enum ibv_wc_status st, late;
		struct shca_imp_io io = { 0 };
		struct shca_xfer x;

		if (!w)
			return;
		if (qp->attr.qp_state != IBV_QPS_RTS) {
			/* SQD/SQE stop; ERR flushes through modify */
			return;
		}
		if (shca_timer_armed(&qp->retry_timer))
			return;
		if (qp->head_ack_wait) {
			/* the ACK timer of the last try expired: a timeout;
			 * the first try and retry_cnt retries each get one
			 * (IBA 9.7.6.1.3), then RETRY_EXC_ERR */
			qp->head_ack_wait = false;
			qp_count(qp, SHCA_STAT_LOCAL_ACK_TIMEOUT);
			if (qp->head_retries++ >= qp->attr.retry_cnt) {
				qp_count(qp, SHCA_STAT_RETRY_EXCEEDED_ERR);
				fail_head(qp, w, IBV_WC_RETRY_EXC_ERR);
				return;
			}
		}

		if (shca_wr_is_local(w->wr.opcode) &&
		    shca_wr_legal(qp->ibqp.qp_type, w->wr.opcode)) {
			/* a bind or an invalidation: carried out here, in
			 * its place in the queue (mw.c) */
			st = shca_wr_local_exec(qp, w);
			if (st != IBV_WC_SUCCESS) {
				fail_head(qp, w, st);
				return;
			}
			complete_local(qp, w);
			continue;
		}
		st = prepare(qp, w, &x, iov, grh, &late, &io);
		if (st != IBV_WC_SUCCESS) {
			shca_imp_done(&io);
			fail_head(qp, w, st);
			return;
		}
		res.rndv_bad = false;
		res.rndv_fin = false;
		xmit(qp, w, &x, &res);
		/* a READ's bounce buffer (another process's MR) goes out
		 * now, under that MR's rules as they are now */
		if (res.outcome == SHCA_XFER_DONE && io.nsge &&
		    res.status == IBV_WC_SUCCESS && late == IBV_WC_SUCCESS)
			res.status = shca_imp_put(&io);
		if (res.outcome != SHCA_XFER_DONE || !is_atomic(x.opcode))
			shca_imp_done(&io);

		switch (res.outcome) {
		case SHCA_XFER_RNR:
			/* the responder had no receive WQE: an RNR NAK */
			qp_count(qp, SHCA_STAT_RCVD_RNR_ERR);
			if (qp->attr.rnr_retry != 7 &&
			    qp->head_rnr_retries++ >= qp->attr.rnr_retry) {
				qp_count(qp, SHCA_STAT_RETRY_RNR_EXCEEDED_ERR);
				res.status = IBV_WC_RNR_RETRY_EXC_ERR;
				break;
			}
			shca_timer_arm(&qp->retry_timer,
				       shca_now_ns() +
				       1000ull * rnr_timer_us[res.rnr_timer & 31]);
			return;
		case SHCA_XFER_NO_RESPONSE:
			/* nothing will answer this try: what a NIC learns
			 * when its ACK timer expires, so the timeout is
			 * counted, and the retry count checked, when the
			 * timer does (above), as on the net path */
			if (!shca_ack_timeout_ns(qp->attr.timeout)) {
				/* timeout 0 is infinite: wait for ever,
				 * checking now and then */
				qp_count(qp, SHCA_STAT_LOCAL_ACK_TIMEOUT);
				shca_timer_arm(&qp->retry_timer,
					       shca_now_ns() + 100000000ull);
				return;
			}
			qp->head_ack_wait = true;
			shca_timer_arm(&qp->retry_timer,
				       shca_now_ns() +
				       shca_ack_timeout_ns(qp->attr.timeout));
			return;
		case SHCA_XFER_DONE:
		case SHCA_XFER_UNREACHABLE:	/* (the net reaches all) */
			break;
		}

		/* the response at the requester: its target's L_Keys now
		 * (prepare), a remote error reported first */
		if (res.status == IBV_WC_SUCCESS)
			res.status = late;
		if (res.status == IBV_WC_SUCCESS && is_atomic(x.opcode)) {
			int niov;

			res.status = local_iov(qp, w, true, iov, &niov, &io);
			if (res.status == IBV_WC_SUCCESS)
				shca_atomic_result(iov, niov,
						   res.atomic_orig);
			if (res.status == IBV_WC_SUCCESS && io.nsge)
				res.status = shca_imp_put(&io);
		}
		shca_imp_done(&io);
		if (res.status != IBV_WC_SUCCESS) {
			fail_head(qp, w, res.status);
			return;
		}
		qp->head_retries = 0;
		qp->head_rnr_retries = 0;
		{
			struct shca_send_wqe done = *w;

			/* free the slot first: an application that sees the
			 * completion may post into it at once */
			shca_sq_pop(qp);
			shca_complete_send(qp, &done, IBV_WC_SUCCESS,
					   (uint32_t)x.length);
		}
		/* a tag-matching rendezvous the SEND started (same host) */
		if (res.rndv_bad || res.rndv_fin)
			shca_host_rndv_done(qp, &x, &res);
	}
}

/* The QP's send queue; call with qp->exec_lock held. */
static void execute_locked(struct shca_qp *qp)
{
	int i;

	execute_run(qp);
	for (i = 0; i < SHCA_NROUTES; i++)
		shca_transports[i]->run_end(qp);
}

void shca_sq_execute_locked(struct shca_qp *qp)
{
	if (!qp->retry_timer.fn)
		qp->retry_timer.fn = qp_retry_timer;
	if (!shca_transports[qp->route]->sq_run(qp))
		execute_locked(qp);
}

int shca_sq_execute(struct shca_qp *qp)
{
	pthread_mutex_lock(&qp->exec_lock);
	shca_sq_execute_locked(qp);
	pthread_mutex_unlock(&qp->exec_lock);
	return 0;
}
