// SPDX-License-Identifier: MIT
/*
 * The net path's transport (transport.h): RC, UC and UD messages as IB
 * packets of the path MTU over the sockets of conn.c.
 *
 * Requester (RC): WQEs go out in order, several at once (a window of
 * WINDOW messages); each takes its PSNs when first sent and keeps them.
 * The WQE at the send queue's head completes when the responder ACKs it
 * (or, for READ and atomics, when its response arrives).  Lost packets
 * (SOFTHCA_FAULTS, a reset connection) are recovered go-back-N, IBA
 * 9.7.4.1.5: a PSN sequence NAK or the local ACK timer resends from the
 * first PSN not answered; the timer counts retry_cnt, an RNR NAK counts
 * rnr_retry.  UC and UD complete a WQE once it is sent.
 *
 * Responder: packets are checked (shca_wire_parse, the QP's transport,
 * path MTU, state, PSN) before anything else; a multi-packet SEND or
 * WRITE is gathered, then the whole message is carried out by the same
 * code as the same-host path (engine/responder.c, through shca_stages,
 * against this process as its own peer): every R_Key, PD, access,
 * bounds, receive queue and completion rule is the same on both paths.
 * Duplicates are answered again (READ re-read, atomics replayed from a
 * small cache), a PSN beyond the expected one gets one sequence NAK.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <infiniband/tm_types.h>

#include "../common/dma.h"
#include "../common/slot.h"
#include "../common/stat.h"
#include "../engine/xport.h"
#include "../shm/host.h"
#include "../shm/mem.h"
#include "../shm/seg.h"
#include "../verbs/shca.h"
#include "../wire/wire.h"
#include "net.h"
#include "keyguard.h"
#include "transport.h"

#define WINDOW		64		/* RC messages in flight per QP */
#define MAX_IOV		64
#define COPY_BELOW	512		/* payloads copied rather than referenced */
#define HDR_MAX		64
#define PLACE_MIN	8		/* middle packets worth a placement */
/*
 * A message of many packets asks for an ACK (AckReq) every ack_every() of
 * them, as rxe (every 64) and hfi1 (every 16) do, not only with its last:
 * the requester learns that the responder is getting it, and an ACK that
 * covers more of the head WQE is progress, which resets the head's retry
 * count (completer).  Without it a 1 MiB message under heavy faults or
 * frequent connection resets ran out of retries while it moved on.
 * Every ACK_EVERY packets, or every ACK_BYTES of payload (ACK_EVERY_MAX
 * packets at most) where the path MTU is small: between two namespaces
 * (path MTU 1024) an ACK every 64 KiB was a sendmsg per 64 KiB for the
 * responder of a bulk WRITE, and each AckReq packet ends a placement
 * (conn.c), read the usual way.
 */
#define ACK_EVERY	64
#define ACK_BYTES	(256u << 10)
/* ... but never more packets than this between two: a responder slowed
 * per packet (TSan, a loaded host) must answer within the ACK timeout
 * (1024 packets at path MTU 256 ran 1 MiB WRITEs out of retries under
 * TSan in CI) */
#define ACK_EVERY_MAX	256

static uint32_t ack_every(uint32_t mtu)
{
	return MIN(MAX(ACK_EVERY, ACK_BYTES / mtu), ACK_EVERY_MAX);
}

/* The QP's counters, or the process's for what reached no QP. */
static struct shca_stat_block *qp_stats(struct shca_qp *qp)
{
	return qp && qp->shm ? &qp->shm->stats : shca_stat_proc();
}

static void count(struct shca_qp *qp, enum shca_stat s)
{
	shca_stat_add(qp_stats(qp), s, 1);
}

/* Packets of qp's sent or received (the process's totals are counted by
 * conn.c). */
static void count_pkts(struct shca_qp *qp, bool sent, uint32_t n,
		       uint64_t bytes)
{
	struct shca_stat_block *b;

	if (!qp || !qp->shm)
		return;
	b = &qp->shm->stats;
	shca_stat_add(b, sent ? SHCA_STAT_SENT_PKTS : SHCA_STAT_RCVD_PKTS, n);
	shca_stat_add(b, sent ? SHCA_STAT_SENT_BYTES : SHCA_STAT_RCVD_BYTES,
		      bytes);
}

/* A packet's bytes, as counted: headers and payload. */
static uint64_t pkt_bytes(size_t hlen, const struct iovec *pl, int npl)
{
	uint64_t bytes = hlen;
	int i;

	for (i = 0; i < npl; i++)
		bytes += pl[i].iov_len;
	return bytes;
}

/* The first n packets of a train (shca_net_send_train: what it queued)
 * counted for qp; how many packets they are (a run: its count). */
static uint32_t count_train(struct shca_qp *qp, const struct shca_net_pkt *t,
			    int n)
{
	uint64_t bytes = 0;
	uint32_t np = 0, c;
	int i;

	for (i = 0; i < n; i++) {
		c = MAX(t[i].count, 1u);
		np += c;
		bytes += pkt_bytes(t[i].hlen, t[i].pl, t[i].npl) +
			 (uint64_t)(c - 1) * t[i].hlen;
	}
	count_pkts(qp, true, np, bytes);
	return np;
}

/* shca_net_send for qp's packet, counted. */
static int qp_send(struct shca_qp *qp, struct shca_conn *c, const void *hdr,
		   size_t hlen, const struct iovec *pl, int npl,
		   unsigned int flags, void *owned)
{
	uint64_t bytes = pkt_bytes(hlen, pl, npl);
	int ret;

	ret = shca_net_send(c, qp ? qp->ibqp.qp_num : 0, hdr, hlen, pl, npl,
			    flags, owned);
	if (ret == SHCA_NET_MERGED)
		return 0;	/* no packet more: an ACK coalesced */
	if (!ret)
		count_pkts(qp, true, 1, bytes);
	return ret;
}

/*
 * The port of the peer slot that QP number qpn lives in: this process's
 * SOFTHCA_PORT_BASE, as its own slot was taken with it (read once there:
 * getenv for every packet admitted took 4% of a READ requester's CPU).
 */
static uint16_t slot_port(uint32_t qpn)
{
	const struct shca_slot *s = shca_slot_get();

	return (uint16_t)((s ? s->base : shca_port_base()) +
			  shca_qpn_slot(qpn));
}

/* RC's rules: RC, and XRC's two halves (IBA 9.8: XRC is RC). */
static bool rc_like(const struct shca_qp *qp)
{
	return qp->ibqp.qp_type == IBV_QPT_RC ||
	       qp->ibqp.qp_type == IBV_QPT_XRC_SEND ||
	       qp->ibqp.qp_type == IBV_QPT_XRC_RECV;
}

static bool is_xrc(const struct shca_qp *qp)
{
	return qp->ibqp.qp_type == IBV_QPT_XRC_SEND ||
	       qp->ibqp.qp_type == IBV_QPT_XRC_RECV;
}

/* The wire transport of qp's packets, either way. */
static enum shca_wire_transport qp_wire_tp(const struct shca_qp *qp)
{
	if (is_xrc(qp))
		return SHCA_TP_XRC;
	return qp->ibqp.qp_type == IBV_QPT_UC ? SHCA_TP_UC : SHCA_TP_RC;
}

/* An RC opcode as qp sends it: its XRC twin on an XRC QP. */
static uint8_t qp_opcode(const struct shca_qp *qp, uint8_t rc_opcode)
{
	return is_xrc(qp) ? shca_wire_xrc_opcode(rc_opcode) : rc_opcode;
}

/* The RC (or UC) operation of a received opcode: its low five bits name
 * it on RC and XRC alike (IBA 9.2). */
static uint8_t rc_op(uint8_t opcode)
{
	return opcode & 0x1f;
}

static uint32_t path_mtu(const struct shca_qp *qp)
{
	unsigned int m = qp->attr.path_mtu;

	return 128u << (m >= IBV_MTU_256 && m <= IBV_MTU_4096 ? m : 1);
}

static uint32_t npkts(uint64_t len, uint32_t mtu)
{
	return len ? (uint32_t)((len + mtu - 1) / mtu) : 1;
}

/* Bytes [off, off + len) of an iovec list, as iovecs. */
static int slice(const struct iovec *v, int n, uint64_t off, uint64_t len,
		 struct iovec *out, int max)
{
	int i, k = 0;

	for (i = 0; i < n && len; i++) {
		uint64_t take;

		if (off >= v[i].iov_len) {
			off -= v[i].iov_len;
			continue;
		}
		if (k == max)
			return -1;
		take = MIN(len, v[i].iov_len - off);
		out[k].iov_base = (char *)v[i].iov_base + off;
		out[k].iov_len = take;
		k++;
		len -= take;
		off = 0;
	}
	return len ? -1 : k;
}

/* ------------------------------------------------------------------ */
/* QP lifecycle                                                        */

static void rx_reset(struct shca_qp *qp)
{
	qp->net.rx_active = false;
	qp->net.rx_len = 0;
	if (qp->net.rx_cap > (1u << 20)) {
		free(qp->net.rx_buf);
		qp->net.rx_buf = NULL;
		qp->net.rx_cap = 0;
	}
}

static void place_where(struct shca_conn *c, uint32_t qpn,
			struct shca_net_place *p);
static void place_done(struct shca_conn *c, uint32_t qpn, uint32_t psn,
		       uint32_t n);

/* No READ responses left to send. */
static void rd_clear(struct shca_qp *qp)
{
	qp->net.rd_head = 0;
	qp->net.rd_count = 0;
	qp->net.rd_fatal = false;
}

/*
 * Listen on the addresses of qp's device (listen.c): a peer reaches this
 * process there, and only there.  The QP's own GID (sgid) comes back.
 */
static void listen_dev(struct shca_qp *qp, union ibv_gid *sgid)
{
	struct shca_device *dev = to_sctx(qp->ibqp.context)->dev;
	int i, n = shca_device_gid_count(dev);
	union ibv_gid g;

	memset(sgid, 0, sizeof(*sgid));
	for (i = 0; i < n; i++)
		if (!shca_device_gid(dev, i, &g))
			shca_net_listen_addr(g.raw, dev->ifindex);
	if (qp->ibqp.qp_type != IBV_QPT_UD &&
	    !shca_device_gid(dev, qp->attr.ah_attr.grh.sgid_index, sgid))
		shca_net_listen_addr(sgid->raw, dev->ifindex);
}

int shca_net_qp_rtr(struct shca_qp *qp, const union ibv_gid *dgid,
		    bool use_net)
{
	int ret = shca_net_start(shca_net_rx);
	union ibv_gid sgid;

	if (ret)
		return ret;
	listen_dev(qp, &sgid);
	shca_net_set_placement(place_where, place_done);
	/* READ responses queued hold lanes: a drain copies them first */
	shca_seg_set_drain_hook(shca_net_drain_key);
	qp->net.epsn = qp->attr.rq_psn;
	qp->net.msn = 0;
	qp->net.nak_sent = false;
	rx_reset(qp);
	if (!use_net || qp->ibqp.qp_type == IBV_QPT_UD)
		return 0;
	qp->net.conn = shca_net_conn_get(
		sgid.raw, dgid->raw,
		slot_port(qp->attr.dest_qp_num),
		to_sctx(qp->ibqp.context)->dev->ifindex);
	if (!qp->net.conn)
		return -ENOMEM;
	qp->net.on = true;
	return 0;
}

/* (with sq.lock held: a transition) */
void shca_net_qp_rts(struct shca_qp *qp)
{
	qp->net.next_psn = qp->attr.sq_psn;
	qp->net.acked = qp->attr.sq_psn;
	qp->net.send_idx = qp->net.assigned = qp->sq.head;
	qp->net.send_pkt = 0;
	qp->net.rd_gap = false;
}

void shca_net_gen_forget(struct shca_qp *qp)
{
	int i;

	for (i = 0; i < SHCA_NET_GEN_MAX; i++)
		if (qp->net.gen[i].used && !qp->net.gen[i].fin)
			shca_imp_drop(qp->net.gen[i].imp, true);
	memset(qp->net.gen, 0, sizeof(qp->net.gen));
}

void shca_net_qp_stop(struct shca_qp *qp, bool reset)
{
	/* what it queued and the application may free now goes */
	if (qp->net.conn)
		shca_net_forget(qp->net.conn, qp->ibqp.qp_num);
	qp->net.send_idx = qp->net.assigned = qp->sq.head;
	qp->net.send_pkt = 0;
	qp->net.rnr_wait = false;
	qp->net.resent = false;
	rx_reset(qp);
	/*
	 * The responder's own error (a NAK of remote access, invalid
	 * request or remote operation, queued behind READ responses:
	 * rd_answer) keeps what is queued until the NAK: the READs before
	 * the failed request were carried out, and their responses and the
	 * NAK go out in PSN order (IBA 9.7.5.1), as a NIC's responder sends
	 * them before it stops.  Nothing joins the queue any more (a QP in
	 * error takes no request).  Any other error or a reset drops it.
	 */
	if (reset || !qp->net.rd_fatal)
		rd_clear(qp);
	/* the send queue was flushed (its rendezvous' tags told) or
	 * emptied: no slot is used any more */
	shca_net_gen_forget(qp);
	if (reset) {
		free(qp->net.rx_buf);
		qp->net.rx_buf = NULL;
		qp->net.rx_cap = 0;
		qp->net.on = false;
		qp->net.conn = NULL;
		memset(qp->net.atomics, 0, sizeof(qp->net.atomics));
	}
}

/* ------------------------------------------------------------------ */
/* Rendezvous: the QP's own READ and FIN                               */

/*
 * A RNDV that matched a tag of a tag-matching SRQ (engine/tm_rx.c,
 * responder.c rndv_net) is carried out by the receiving QP itself, as
 * mlx5's tag matching does: an RDMA READ of the RVH's [addr, addr + len)
 * with its R_Key into the tag's buffer, then a SEND of the FIN (the TMH
 * with opcode FIN, and the RVH) to the sender.  Both are WQEs the QP
 * makes (shca_sq_push_gen), behind the application's, in room kept
 * aside for them: they take PSNs, go out in the window, are resent and
 * time out as any WQE, and complete to no one.  The sender answers the
 * READ with its ordinary responder rules.
 *
 *   the READ's last response placed  TM_RECV, TM_DATA_VALID, byte_len
 *                                    len, for the tag's wr_id; the FIN
 *   the READ ends in error (NAK,     TM_RECV with that status for the
 *     retries, the tag's L_Keys)     tag's wr_id; the QP to error
 *   the FIN ends in error            the QP to error
 *   the QP leaves RTS meanwhile      the READ's tag: WR_FLUSH_ERR
 *
 * The tag's buffer is the application's from its TAG_ADD until that
 * second completion: each response goes there through the tag's L_Keys,
 * checked when it arrives against the SRQ's PD, as a receive's.  At most
 * SHCA_NET_GEN_MAX rendezvous per QP at once: data_packet offers the
 * offload only while a slot is free (a RNDV beyond is unexpected).
 * exec_lock held throughout.
 */

/* A free rendezvous slot of qp, or -1. */
static int gen_slot(const struct shca_qp *qp)
{
	int i;

	if (qp->ibqp.qp_type != IBV_QPT_RC || !qp->net.on || !qp->srq ||
	    !qp->sq.gen_room)
		return -1;
	for (i = 0; i < SHCA_NET_GEN_MAX; i++)
		if (!qp->net.gen[i].used)
			return i;
	return -1;
}

/* WQE w's slot if it is one of the QP's own, else NULL. */
static struct shca_net_gen *gen_of(struct shca_qp *qp,
				   const struct shca_send_wqe *w)
{
	if (!w->gen || w->gen > SHCA_NET_GEN_MAX)
		return NULL;
	return &qp->net.gen[w->gen - 1];
}

/* The tag's second completion, on the QP's receive CQ. */
static void gen_tag_wc(struct shca_qp *qp, const struct shca_net_gen *g,
		       enum ibv_wc_status st, uint32_t byte_len)
{
	struct ibv_wc wc;

	memset(&wc, 0, sizeof(wc));
	wc.wr_id = g->wr_id;
	wc.status = st;
	wc.opcode = IBV_WC_TM_RECV;
	wc.wc_flags = st == IBV_WC_SUCCESS ? IBV_WC_TM_DATA_VALID : 0;
	wc.byte_len = byte_len;
	wc.qp_num = qp->ibqp.qp_num;
	wc.src_qp = qp->attr.dest_qp_num;
	wc.vendor_err = g->imp;	/* the tag's bounce: the poll's */
	if (shca_cq_push(qp->rcq, &wc, g->se && st == IBV_WC_SUCCESS))
		shca_imp_drop(g->imp, true);
}

/* Queue slot i's FIN; a QP that left RTS sends none. */
static void gen_fin(struct shca_qp *qp, int i)
{
	struct shca_net_gen *g = &qp->net.gen[i];
	struct ibv_send_wr wr;

	memset(&wr, 0, sizeof(wr));
	wr.opcode = IBV_WR_SEND;
	g->fin = true;
	if (shca_sq_push_gen(qp, &wr, (uint32_t)i + 1))
		g->used = false;
}

/* shca_xfer.rndv_read: the tag is taken; the READ (or, no bytes, the FIN
 * at once) goes behind the send queue's WQEs. */
static void gen_start(void *ctx, const struct shca_rndv_req *r)
{
	struct shca_qp *qp = ctx;
	int i = gen_slot(qp);
	struct shca_net_gen *g;
	struct ibv_send_wr wr;
	uint64_t left = r->len;
	uint32_t k;

	if (i < 0)
		return;		/* data_packet saw one free: cannot be */
	g = &qp->net.gen[i];
	memset(g, 0, sizeof(*g));
	g->used = true;
	g->wr_id = r->wr_id;
	g->va = r->addr;
	g->rkey = r->rkey;
	g->len = r->len;
	g->se = r->solicited;
	g->imp = r->imp;
	memcpy(g->head, r->head, sizeof(g->head));
	g->head[0] = IBV_TMH_FIN;
	/* the tag's buffer, cut to the length (responder.c checked that
	 * it holds it) */
	for (k = 0; k < r->nsge && k < SHCA_NET_GEN_SGE && left; k++) {
		uint32_t take = (uint32_t)MIN(left, r->sge[k].length);

		if (!take)
			continue;
		g->sge[g->nsge] = r->sge[k];
		g->sge[g->nsge].length = take;
		g->nsge++;
		left -= take;
	}
	if (left) {
		gen_tag_wc(qp, g, IBV_WC_LOC_LEN_ERR, 0);
		g->used = false;
		return;
	}
	if (!r->len) {
		gen_fin(qp, i);
		return;
	}
	memset(&wr, 0, sizeof(wr));
	wr.opcode = IBV_WR_RDMA_READ;
	wr.wr.rdma.remote_addr = g->va;
	wr.wr.rdma.rkey = g->rkey;
	if (shca_sq_push_gen(qp, &wr, (uint32_t)i + 1)) {
		/* the QP left RTS since the match */
		gen_tag_wc(qp, g, IBV_WC_WR_FLUSH_ERR, 0);
		g->used = false;
	}
}

/* The tag's buffer for the READ's responses: its L_Keys, with the SRQ's
 * PD and local write, now (a receive's rules). */
static enum ibv_wc_status gen_scatter(struct shca_qp *qp,
				      const struct shca_net_gen *g,
				      struct iovec *iov, int *niov)
{
	return shca_sge_iov(qp->srq->pd, g->sge,
			    (int)MIN(g->nsge, SHCA_NET_GEN_SGE),
			    IBV_ACCESS_LOCAL_WRITE, iov, niov);
}

/* The FIN's bytes (the slot's own memory). */
static enum ibv_wc_status gen_fin_iov(struct shca_qp *qp,
				      const struct shca_send_wqe *w,
				      struct iovec *iov, int *niov)
{
	struct shca_net_gen *g = gen_of(qp, w);

	if (!g || !g->used)
		return IBV_WC_LOC_QP_OP_ERR;
	iov[0].iov_base = g->head;
	iov[0].iov_len = sizeof(g->head);
	*niov = 1;
	return IBV_WC_SUCCESS;
}

/* A WQE of the QP's own left the send queue with st (exec_lock held;
 * it was popped). */
static void gen_done(struct shca_qp *qp, struct shca_net_gen *g, int i,
		     bool fin, enum ibv_wc_status st)
{
	if (!g || !g->used)
		return;
	if (fin) {
		g->used = false;
	} else if (st == IBV_WC_SUCCESS) {
		gen_tag_wc(qp, g, IBV_WC_SUCCESS, g->len);
		gen_fin(qp, i);
	} else {
		gen_tag_wc(qp, g, st, 0);
		g->used = false;
	}
}

void shca_net_gen_flushed(struct shca_qp *qp, const struct shca_send_wqe *w)
{
	struct shca_net_gen *g = gen_of(qp, w);

	if (!g || !g->used)
		return;
	if (!g->fin)
		gen_tag_wc(qp, g, IBV_WC_WR_FLUSH_ERR, 0);
	g->used = false;
}

/* A send WQE's length: the QP's own READ's is the RVH's, its FIN's 32. */
static uint64_t wqe_len(struct shca_qp *qp, const struct shca_send_wqe *w)
{
	const struct shca_net_gen *g = gen_of(qp, w);

	if (!w->gen)
		return shca_stages.wqe_length(w);
	if (!g)
		return 0;
	return w->wr.opcode == IBV_WR_SEND ? sizeof(g->head) : g->len;
}

/* ------------------------------------------------------------------ */
/* Sending                                                             */

static uint8_t tp_base(const struct shca_qp *qp)
{
	return qp->ibqp.qp_type == IBV_QPT_UC ? SHCA_OP_UC_SEND_FIRST :
						SHCA_OP_RC_SEND_FIRST;
}

/*
 * Packet k of a SEND or WRITE: its opcode, IBA 9.2 (offsets from the
 * transport's SEND_FIRST: SEND 0..5, WRITE 6..11).
 */
static uint8_t data_opcode(const struct shca_qp *qp, enum ibv_wr_opcode op,
			   uint32_t k, uint32_t n)
{
	bool write = op == IBV_WR_RDMA_WRITE ||
		     op == IBV_WR_RDMA_WRITE_WITH_IMM;
	bool imm = op == IBV_WR_SEND_WITH_IMM ||
		   op == IBV_WR_RDMA_WRITE_WITH_IMM;
	uint8_t o;

	if (n == 1)
		o = imm ? 5 : 4;		/* ONLY, ONLY_WITH_IMMEDIATE */
	else if (k == 0)
		o = 0;				/* FIRST */
	else if (k + 1 < n)
		o = 1;				/* MIDDLE */
	else
		o = imm ? 3 : 2;		/* LAST, LAST_WITH_IMMEDIATE */
	return (uint8_t)(tp_base(qp) + (write ? 6 : 0) + o);
}

/*
 * May this request packet wait for the peer's next answer before it is
 * written (conn.c shca_net_flush_defer)?  A new one (not sent before: a
 * resend goes at once), a whole message in one packet with a payload
 * copied, on RC, whose peer answers every request.
 */
static bool may_wait(const struct shca_qp *qp, const struct shca_wire_msg *m,
		     uint32_t npkt, bool copied)
{
	return rc_like(qp) && npkt == 1 && copied &&
	       m->payload_len < COPY_BELOW &&
	       (!qp->net.resent || shca_psn_ge(m->psn, qp->net.resent_end));
}

/* A packet made ready to send: its headers, payload and shca_net_send
 * flags. */
struct pkt {
	unsigned char hdr[HDR_MAX];
	size_t hlen;
	struct iovec *pl;	/* the caller's room */
	int npl;
	unsigned int flags;
	uint32_t count;		/* 0: one packet; more: a run (run_made) */
};

/*
 * Packet k of WQE w (SEND/WRITE data packets; READ and atomics send their
 * one request), its payload sliced into pl (room for max iovecs).  0,
 * -E2BIG when the payload needs more iovecs than that, or -errno.
 */
static int make_packet(struct shca_qp *qp, const struct shca_send_wqe *w,
		       const struct iovec *iov, int niov, uint64_t len,
		       uint32_t psn0, uint32_t k, bool copy, struct pkt *out,
		       struct iovec *pl, int max)
{
	uint32_t mtu = path_mtu(qp), n = npkts(len, mtu);
	struct shca_wire_msg m;
	int npl = 0;
	ssize_t hlen;
	enum ibv_wr_opcode op = w->wr.opcode;

	memset(&m, 0, sizeof(m));
	m.pkey = SHCA_DEFAULT_PKEY;
	m.dqpn = qp->attr.dest_qp_num;
	m.psn = shca_psn_add(psn0, k);
	if ((unsigned int)op == SHCA_WR_FLUSH) {
		/* IBA Annex A19: FETH and RETH (qp.c: wr.atomic holds the
		 * length, type and level) */
		m.opcode = SHCA_OP_RC_FLUSH;
		m.va = w->wr.wr.atomic.remote_addr;
		m.rkey = w->wr.wr.atomic.rkey;
		m.dma_len = (uint32_t)w->wr.wr.atomic.compare_add;
		m.flush_plt = (uint8_t)(w->wr.wr.atomic.swap &
					SHCA_FETH_PLT_MASK);
		m.flush_sel = (uint8_t)((w->wr.wr.atomic.swap >> 8) & 3);
		m.ackreq = true;
		goto build;
	}
	switch (op) {
	case IBV_WR_ATOMIC_WRITE:
		/* IBA Annex A19: RETH of 8 bytes, the 8 bytes as payload */
		m.opcode = SHCA_OP_RC_ATOMIC_WRITE;
		m.va = w->wr.wr.atomic.remote_addr;
		m.rkey = w->wr.wr.atomic.rkey;
		m.dma_len = 8;
		m.ackreq = true;
		pl[0].iov_base = (void *)&w->wr.wr.atomic.swap;
		pl[0].iov_len = 8;
		npl = 1;
		m.payload = pl[0].iov_base;
		m.payload_len = 8;
		copy = true;
		break;
	case IBV_WR_RDMA_READ: {
		/* asked again from response k on: the rest of the range */
		uint64_t off = MIN((uint64_t)k * mtu, len);

		m.opcode = SHCA_OP_RC_RDMA_READ_REQUEST;
		m.va = w->wr.wr.rdma.remote_addr + off;
		m.rkey = w->wr.wr.rdma.rkey;
		m.dma_len = (uint32_t)(len - off);
		m.ackreq = true;
		break;
	}
	case IBV_WR_ATOMIC_CMP_AND_SWP:
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
		m.opcode = op == IBV_WR_ATOMIC_CMP_AND_SWP ?
				   SHCA_OP_RC_COMPARE_SWAP :
				   SHCA_OP_RC_FETCH_ADD;
		m.va = w->wr.wr.atomic.remote_addr;
		m.rkey = w->wr.wr.atomic.rkey;
		m.swap_add = op == IBV_WR_ATOMIC_CMP_AND_SWP ?
				     w->wr.wr.atomic.swap :
				     w->wr.wr.atomic.compare_add;
		m.compare = w->wr.wr.atomic.compare_add;
		m.ackreq = true;
		break;
	default: {
		uint64_t off = (uint64_t)k * mtu;
		uint64_t take = MIN((uint64_t)mtu, len - MIN(len, off));

		m.opcode = data_opcode(qp, op, k, n);
		if (op == IBV_WR_SEND_WITH_INV && k + 1 == n) {
			/* RC only (qp.c's table): the IETH on the last */
			m.opcode = n == 1 ? SHCA_OP_RC_SEND_ONLY_WITH_INVALIDATE :
				   SHCA_OP_RC_SEND_LAST_WITH_INVALIDATE;
			m.inv_rkey = w->wr.invalidate_rkey;
		}
		if (k == 0 && (op == IBV_WR_RDMA_WRITE ||
			       op == IBV_WR_RDMA_WRITE_WITH_IMM)) {
			m.va = w->wr.wr.rdma.remote_addr;
			m.rkey = w->wr.wr.rdma.rkey;
			m.dma_len = (uint32_t)len;
		}
		if (k + 1 == n) {
			m.imm_be = w->wr.imm_data;
			m.se = w->wr.send_flags & IBV_SEND_SOLICITED;
			m.ackreq = rc_like(qp);
		} else if ((k + 1) % ack_every(mtu) == 0) {
			m.ackreq = rc_like(qp);
		}
		npl = slice(iov, niov, off, take, pl, max);
		if (npl < 0)
			return max < MAX_IOV ? -E2BIG : -EINVAL;
		m.payload_len = (uint32_t)take;
		m.payload = take ? pl[0].iov_base : NULL;
		/* a bounce buffer (verbs/import_key.c) goes with its WQE's
		 * completion, when a resend of it may still be queued:
		 * such a packet holds its own copy */
		copy = copy || take < COPY_BELOW ||
		       (w->wr.send_flags & IBV_SEND_INLINE) || w->imp;
		break;
	}
	}
build:
	if (is_xrc(qp)) {
		/* the XRCETH: the SRQ at the destination (IBA 9.8.x) */
		m.opcode = shca_wire_xrc_opcode(m.opcode);
		m.xrc_srqn = w->wr.qp_type.xrc.remote_srqn;
		/* beyond 24 bits names no SRQ: sent as 0, which names none
		 * either (xfer_init) */
		if (m.xrc_srqn > SHCA_QPN_MASK)
			m.xrc_srqn = 0;
	}
	hlen = shca_wire_build_hdr(out->hdr, sizeof(out->hdr), &m);
	if (hlen < 0)
		return (int)hlen;
	out->hlen = (size_t)hlen;
	out->pl = pl;
	out->npl = npl;
	out->count = 0;
	out->flags = (copy ? SHCA_NET_COPY : 0) | SHCA_NET_MORE |
		     (may_wait(qp, &m, n, copy || !npl) ? SHCA_NET_DEFER : 0);
	return 0;
}

/* Send packet k of WQE w: 0, or -ENOTCONN/-errno from the socket layer. */
static int send_packet(struct shca_qp *qp, const struct shca_send_wqe *w,
		       const struct iovec *iov, int niov, uint64_t len,
		       uint32_t psn0, uint32_t k, bool copy)
{
	struct iovec pl[MAX_IOV];
	struct pkt p;
	int ret;

	ret = make_packet(qp, w, iov, niov, len, psn0, k, copy, &p, pl,
			  MAX_IOV);
	if (ret)
		return ret;
	return qp_send(qp, qp->net.conn, p.hdr, p.hlen, p.pl, p.npl, p.flags,
		       NULL);
}

/*
 * Is packet k of w a middle packet that follows one (prev, packet k - 1,
 * as make_packet made it), neither asking for an ACK (one in every
 * `every`: ack_every of the path MTU, taken once a train)?  Then its
 * headers are prev's with the next PSN: no extension header (a BTH
 * alone: not XRC), no RETH, ImmDt or SE (the first and the last
 * packet's).
 */
static bool middle_after_middle(const struct shca_send_wqe *w, uint32_t k,
				uint32_t every, const struct pkt *prev)
{
	return k >= 2 && k + 1 < w->npsn && k % every && (k + 1) % every &&
	       prev->hlen == SHCA_BTH_LEN;
}

/* Such a packet: prev's BTH with the PSN after prev's (after its last
 * packet, a run), the payload [off, off + mtu) of the message sliced
 * into pl (room for max).  0 or -E2BIG. */
static int next_middle(const struct iovec *iov, int niov, uint64_t off,
		       uint32_t mtu, const struct pkt *prev, struct pkt *out,
		       struct iovec *pl, int max)
{
	struct shca_bth bth;

	out->npl = slice(iov, niov, off, mtu, pl, max);
	if (out->npl < 0)
		return -E2BIG;
	memcpy(&bth, prev->hdr, SHCA_BTH_LEN);
	shca_bth_set_psn(&bth, shca_bth_psn(&bth) + MAX(prev->count, 1u));
	memcpy(out->hdr, &bth, SHCA_BTH_LEN);
	out->hlen = SHCA_BTH_LEN;
	out->pl = pl;
	out->flags = prev->flags;
	out->count = 0;
	return 0;
}

/*
 * Packet k of w, made in *pk, as the first of a run frame made here
 * (shca_net_pkt count), when it is a middle packet (a BTH alone) that
 * asks for no ACK: with the middle packets after it that ask for none
 * either (ack_every: one in every), up to SHCA_NET_RUN_MAX packets and
 * SHCA_NET_RUN_BYTES, their payloads sliced into pl (room for max, where
 * *pk's is) in one go.  conn.c would join the same packets into the same
 * run frame; made here, a 64 KiB WRITE between two namespaces (path MTU
 * 1024) is 3 packets to make and queue instead of 64.  How many packets
 * *pk stands for now (1: it stays one).
 */
static uint32_t run_made(const struct shca_send_wqe *w,
			 const struct iovec *iov, int niov, uint32_t k,
			 uint32_t mtu, uint32_t every, struct pkt *pk,
			 struct iovec *pl, int max)
{
	uint32_t r = 1, most = MIN((uint32_t)SHCA_NET_RUN_MAX,
				   (uint32_t)(SHCA_NET_RUN_BYTES / mtu));
	struct shca_bth bth;
	int npl;

	if (pk->hlen != SHCA_BTH_LEN || !k || k + 1 >= w->npsn)
		return 1;
	memcpy(&bth, pk->hdr, SHCA_BTH_LEN);
	if (shca_bth_ackreq(&bth))
		return 1;
	/* packet j asks for an ACK when (j + 1) % every == 0 (make_packet);
	 * the last packet is no middle */
	while (r < most && k + r + 1 < w->npsn && (k + r + 1) % every)
		r++;
	if (r < 2)
		return 1;
	npl = slice(iov, niov, (uint64_t)k * mtu, (uint64_t)r * mtu, pl, max);
	if (npl < 0) {
		/* too many pieces: the packet alone again */
		pk->npl = slice(iov, niov, (uint64_t)k * mtu, mtu, pl, max);
		return 1;
	}
	pk->npl = npl;
	pk->count = r;
	return r;
}

/*
 * Send WQE w's data packets from *kp on, as many as one train takes
 * (shca_net_send_train); a packet that holds a copy of its payload, or
 * that may wait for the peer's answer, goes alone.  *kp moves past what
 * was queued.  0, or -ENOTCONN/-errno from the socket layer.
 */
static int send_train(struct shca_qp *qp, const struct shca_send_wqe *w,
		      const struct iovec *iov, int niov, uint64_t len,
		      uint32_t *kp)
{
	struct pkt p[SHCA_NET_TRAIN];
	struct shca_net_pkt t[SHCA_NET_TRAIN];
	struct iovec pl[SHCA_NET_TRAIN_IOV];
	uint32_t k = *kp, mtu = path_mtu(qp), every = ack_every(mtu);
	int n = 0, used = 0, ret = 0, sent, i;
	bool runs = shca_net_runs_premade();

	for (; k < w->npsn && n < SHCA_NET_TRAIN; k++) {
		/* a packet's payload in MAX_IOV pieces at most, as alone */
		int room = MIN(SHCA_NET_TRAIN_IOV - used, MAX_IOV);

		if (n && middle_after_middle(w, k, every, &p[n - 1]))
			ret = next_middle(iov, niov, (uint64_t)k * mtu, mtu,
					  &p[n - 1], &p[n], pl + used, room);
		else
			ret = make_packet(qp, w, iov, niov, len, w->psn, k,
					  false, &p[n], pl + used, room);
		if (ret == -E2BIG && n) {
			ret = 0;
			break;		/* no room left: the next train's */
		}
		if (ret)
			break;
		if (p[n].flags & (SHCA_NET_COPY | SHCA_NET_DEFER)) {
			if (n)
				break;	/* goes alone, after this train */
			ret = qp_send(qp, qp->net.conn, p[0].hdr, p[0].hlen,
				      p[0].pl, p[0].npl, p[0].flags, NULL);
			if (!ret)
				k++;
			*kp = k;
			return ret;
		}
		if (runs)	/* the loop's k++ steps past the last */
			k += run_made(w, iov, niov, k, mtu, every, &p[n],
				      pl + used, room) - 1;
		used += p[n].npl;
		n++;
	}
	if (!n) {
		*kp = k;
		return ret;
	}
	for (i = 0; i < n; i++) {
		t[i].hdr = p[i].hdr;
		t[i].hlen = p[i].hlen;
		t[i].pl = p[i].pl;
		t[i].npl = p[i].npl;
		t[i].count = p[i].count;
	}
	sent = shca_net_send_train(qp->net.conn, qp->ibqp.qp_num,
				   shca_psn_add(w->psn, *kp), t, n, 0, NULL);
	if (sent < 0)
		return sent;
	*kp += count_train(qp, t, sent);
	return sent < n ? -ENOTCONN : ret;
}

/* ------------------------------------------------------------------ */
/* RC requester                                                        */

/* FLUSH (IBA Annex A19): answered by an RDMA READ response of no data */
static bool wqe_is_flush(const struct shca_send_wqe *w)
{
	return (unsigned int)w->wr.opcode == SHCA_WR_FLUSH;
}

/* An atomic: answered by an atomic ACK with 8 bytes for its buffer */
static bool wqe_is_atomic(const struct shca_send_wqe *w)
{
	return w->wr.opcode == IBV_WR_ATOMIC_CMP_AND_SWP ||
	       w->wr.opcode == IBV_WR_ATOMIC_FETCH_AND_ADD;
}

static bool wqe_needs_resp(const struct shca_send_wqe *w)
{
	return w->wr.opcode == IBV_WR_RDMA_READ ||
	       w->wr.opcode == IBV_WR_ATOMIC_CMP_AND_SWP ||
	       w->wr.opcode == IBV_WR_ATOMIC_FETCH_AND_ADD ||
	       wqe_is_flush(w);
}

static uint32_t wqe_last_psn(const struct shca_send_wqe *w)
{
	return shca_psn_add(w->psn, w->npsn - 1);
}

static bool wqe_has_psn(const struct shca_send_wqe *w, uint32_t psn)
{
	return shca_psn_ge(psn, w->psn) && shca_psn_le(psn, wqe_last_psn(w));
}

static void arm_ack_timer(struct shca_qp *qp)
{
	uint64_t t = shca_ack_timeout_ns(qp->attr.timeout);

	/* timeout 0 is infinite: look again now and then */
	shca_timer_arm(&qp->retry_timer, shca_now_ns() + (t ? t : 100000000ull));
}

/*
 * The head WQE w is about to complete: after its completion is seen, its
 * buffers are the application's, which may free or unmap them at once
 * (ibv_post_send(3)).  A packet of 512 bytes or more references them
 * until the socket takes it (send_packet); an original is always written
 * before the ACK that completes its WQE can come, but a resend queued by
 * go_back while the socket was full may still wait, and would be read
 * from the freed memory (EFAULT: the connection reset).  The peer
 * acknowledged every PSN of the WQE: such copies are dropped (or, partly
 * written, copied: conn.c shca_net_release), before the completion is
 * pushed.  Only while resends are about (qp->net.resent): the fast path
 * pays one test.  A WQE completed in error leaves the QP in error: every
 * packet of the QP that references memory goes.
 */
static void release_head(struct shca_qp *qp, const struct shca_send_wqe *w,
			 bool assigned, enum ibv_wc_status st)
{
	struct shca_conn *c = qp->net.conn;

	if (!c)
		return;
	if (st != IBV_WC_SUCCESS) {
		shca_net_forget(c, qp->ibqp.qp_num);
		return;
	}
	if (!qp->net.resent || !assigned || wqe_needs_resp(w) ||
	    shca_wr_is_local(w->wr.opcode))
		return;
	shca_net_release(c, qp->ibqp.qp_num, w->psn, w->npsn);
	if (shca_psn_ge(shca_psn_add(w->psn, w->npsn), qp->net.resent_end))
		qp->net.resent = false;
}

/* Complete the head WQE and advance; exec_lock held. */
static void complete_head(struct shca_qp *qp, struct shca_send_wqe *w,
			  enum ibv_wc_status st, uint32_t byte_len)
{
	struct shca_send_wqe done = *w;
	struct shca_net_gen *g = gen_of(qp, w);
	uint32_t head, tail;

	shca_sq_first(qp, &head, &tail);
	release_head(qp, w, head != qp->net.assigned, st);
	/* free the slot first: an application that sees the completion
	 * may post into it at once */
	shca_sq_pop(qp);
	if (done.gen)	/* the QP's own: its tag hears, no one else */
		gen_done(qp, g, (int)done.gen - 1,
			 done.wr.opcode == IBV_WR_SEND, st);
	else
		st = shca_stages.complete_send(qp, &done, st, byte_len);
	qp->head_retries = 0;
	qp->head_rnr_retries = 0;
	if (st != IBV_WC_SUCCESS)
		shca_stages.sq_failed(qp);
}

/* Go back to resend from psn, which WQE idx holds. */
static void go_back(struct shca_qp *qp, uint32_t idx, uint32_t psn)
{
	uint32_t head, tail;
	struct shca_send_wqe *w = shca_sq_at(qp, idx, &head, &tail);

	if (!w)
		return;
	qp->net.send_idx = idx;
	/* what is sent again from here may be queued still when its WQE
	 * completes (release_head) */
	qp->net.resent = true;
	qp->net.resent_end = qp->net.next_psn;
	/* a READ is asked for again from its first response that did not
	 * arrive (what did is kept), an atomic whole */
	if (w->wr.opcode == IBV_WR_RDMA_READ)
		qp->net.send_pkt = w->nrecv;
	else
		qp->net.send_pkt = wqe_needs_resp(w) ? 0 :
				   (uint32_t)shca_psn_diff(psn, w->psn);
	count(qp, SHCA_STAT_RETRANS_PKTS);
}

static void rc_send_window(struct shca_qp *qp);

/* Is a WQE in [head, idx) an RDMA READ or an atomic (not yet complete:
 * a WQE leaves the queue when it completes)? */
static bool rd_atomic_before(struct shca_qp *qp, uint32_t head, uint32_t idx)
{
	uint32_t i, h, t;

	for (i = head; i != idx; i++) {
		struct shca_send_wqe *x = shca_sq_at(qp, i, &h, &t);

		if (x && wqe_needs_resp(x))
			return true;
	}
	return false;
}

/* RC: send what the window allows (exec_lock held). */
static void rc_execute(struct shca_qp *qp)
{
	rc_send_window(qp);
	if (qp->net.conn)
		shca_net_flush_defer(qp->net.conn);
}

static void rc_send_window(struct shca_qp *qp)
{
	struct iovec iov[MAX_IOV];

	for (;;) {
		uint32_t head, tail, idx = qp->net.send_idx, k;
		struct shca_send_wqe *w;
		enum ibv_wc_status st;
		uint64_t len;
		int niov, ret = 0;

		if (qp->attr.qp_state != IBV_QPS_RTS || qp->net.rnr_wait)
			break;
		w = shca_sq_at(qp, idx, &head, &tail);
		if (idx - head > tail - head) {
			/* the queue was flushed or popped past us */
			qp->net.send_idx = qp->net.assigned = head;
			qp->net.send_pkt = 0;
			continue;
		}
		if (!w || idx - head >= WINDOW ||
		    (qp->net.probe && idx != head))
			break;
		/*
		 * The fence indicator (ibv_post_send(3), IBV_SEND_FENCE):
		 * the WQE does not start before every earlier RDMA READ and
		 * atomic has completed, so that it may send their results
		 * (rxe waits for every earlier WQE, which is more than the
		 * verbs ask).  The completer runs the window again when one
		 * completes.  The same-host path needs nothing: it carries
		 * out each WQE whole before the next.
		 */
		if ((w->wr.send_flags & IBV_SEND_FENCE) &&
		    rd_atomic_before(qp, head, idx))
			break;
		/*
		 * A bind or an invalidation (verbs/mw.c) sends nothing: it is
		 * carried out once every earlier WQE has completed, so that
		 * none of them meets a window it does not expect.
		 */
		if (shca_wr_is_local(w->wr.opcode)) {
			if (idx != head)
				break;
			st = shca_wr_local_exec(qp, w);
			if (qp->net.assigned == idx)
				qp->net.assigned = idx + 1;
			qp->net.send_idx = idx + 1;
			qp->net.send_pkt = 0;
			complete_head(qp, w, st, 0);
			if (st != IBV_WC_SUCCESS)
				return;
			continue;
		}
		/*
		 * The local side: lengths, and the L_Keys of a gather list.
		 * A READ's or an atomic's L_Keys are those of the response's
		 * target: checked when it arrives (place_read, the atomic
		 * ACK), after the responder has carried the request out, as
		 * a NIC does (requester.c, prepare).
		 */
		len = wqe_len(qp, w);
		niov = 0;
		st = len > SHCA_MAX_MSG_SZ ? IBV_WC_LOC_LEN_ERR :
		     wqe_needs_resp(w) ? IBV_WC_SUCCESS :
		     w->gen ? gen_fin_iov(qp, w, iov, &niov) :
		     shca_stages.wqe_local_iov(qp, w, false, iov, &niov);
		if (st == IBV_WC_SUCCESS && wqe_is_atomic(w) && len != 8)
			st = IBV_WC_LOC_LEN_ERR;
		if (st != IBV_WC_SUCCESS) {
			/* completes in order: once it is at the head */
			if (idx == head) {
				complete_head(qp, w, st, 0);
				return;
			}
			break;
		}
		if (idx == qp->net.assigned) {
			w->psn = qp->net.next_psn;
			w->npsn = npkts(len, path_mtu(qp));
			w->nrecv = 0;
			qp->net.next_psn = shca_psn_add(w->psn, w->npsn);
			qp->net.assigned++;
		}
		if (wqe_needs_resp(w)) {
			ret = send_packet(qp, w, iov, niov, len, w->psn,
					  qp->net.send_pkt, false);
		} else {
			for (k = qp->net.send_pkt; k < w->npsn && !ret;) {
				ret = send_train(qp, w, iov, niov, len, &k);
				qp->net.send_pkt = k;
			}
		}
		if (ret) {
			/* the connection is (re)opening: the timer resends */
			if (!shca_timer_armed(&qp->retry_timer))
				arm_ack_timer(qp);
			return;
		}
		qp->net.send_idx = idx + 1;
		qp->net.send_pkt = 0;
		if (!shca_timer_armed(&qp->retry_timer))
			arm_ack_timer(qp);
	}
}

/*
 * Has every request qp sent since it last went back for its whole window
 * reached the responder, and every response sent since then come (or is
 * it on its way)?  True while the connection is the same TCP stream (no
 * reset, no fault that drops packets) and no response for a WQE after
 * the head was dropped (which follows only a lost one).
 */
static bool lossless(struct shca_qp *qp)
{
	return qp->net.conn &&
	       shca_net_conn_resets(qp->net.conn) == qp->net.resets &&
	       !shca_net_faults_drop() && !qp->net.ahead_dropped;
}

/*
 * The ACK timer expired while nothing was lost (lossless): the responder
 * is slow (stopped, starved of CPU, behind a full socket), and what the
 * requester sent, and the responses sent since, are on their way.  Only
 * the head WQE is sent again (a READ from its first missing response),
 * as TCP's retransmission timer sends its first unacknowledged segment
 * only; the WQEs after it stay sent.  Going back for the whole window
 * made a stopped responder carry out every READ of it again (IBA
 * 9.7.5.2.5: a duplicate READ is carried out again), 64 x 1 MiB at each
 * expiry, more than it sent before the next one: RETRY_EXC_ERR.  IBA
 * 9.7.6.1.3 has the requester retry from the first unacknowledged PSN;
 * when it sends the rest again is its own business (a NIC's window is
 * paced as well).  What a responder dropped after the head (its queue
 * full, the QP not ready) is asked for when that WQE is the head and
 * times out (a PSN sequence NAK, at once, for anything before a later
 * request that came).  At the same position the head is sent again at
 * the first expiry and then once in PROBE_EVERY: on a live stream the
 * first copy arrives, and each READ asked again whose responses were all
 * sent is carried out again whole.
 */
#define PROBE_EVERY	4

/*
 * Where the head goes out again from when its ACK timer expires after
 * something was lost: its first packet no ACK or NAK covered (IBA
 * 9.7.6.1.3: the requester retries from the first unacknowledged PSN),
 * as rxe does, rather than its first: a long message under faults keeps
 * what got through.  (A READ resumes from its first missing response
 * whatever psn says: go_back.)  A responder that lost the message since
 * (an RNR NAK makes it expect the first packet again) answers with a
 * PSN sequence NAK.  The probe of a connection that lost nothing still
 * sends the head whole: a responder that is only slow (the copy of a
 * gathered 2 GiB SEND takes it longer than seven ACK timeouts) is kept
 * from a RETRY_EXC_ERR by that resend, which keeps the connection busy
 * (rc_timer counts no timeout while it writes); placing a SEND's packets
 * as they come, as a NIC does, would make that unneeded.
 */
static uint32_t resume_psn(const struct shca_qp *qp,
			   const struct shca_send_wqe *w)
{
	return wqe_has_psn(w, qp->net.acked) ? qp->net.acked : w->psn;
}

static void probe_head(struct shca_qp *qp, uint32_t head,
		       struct shca_send_wqe *w)
{
	uint32_t idx = qp->net.send_idx, pkt = qp->net.send_pkt;

	go_back(qp, head, w->psn);
	qp->net.probe = true;
	rc_send_window(qp);
	qp->net.probe = false;
	/* the head went out whole: the rest stays where it was */
	if (qp->net.send_idx == head + 1) {
		qp->net.send_idx = idx;
		qp->net.send_pkt = pkt;
	}
}

static void rc_timer(struct shca_qp *qp)
{
	uint32_t head, tail;
	struct shca_send_wqe *w;

	if (qp->attr.qp_state != IBV_QPS_RTS &&
	    qp->attr.qp_state != IBV_QPS_SQD)
		return;
	w = shca_sq_first(qp, &head, &tail);
	if (qp->net.rnr_wait) {
		qp->net.rnr_wait = false;
		if (w)
			go_back(qp, head, w->psn);
		rc_execute(qp);
		return;
	}
	if (!w || qp->net.send_idx == head) {
		rc_execute(qp);
		return;
	}
	/* requests held for an answer that did not come (lost, or the peer
	 * is slow) go out now: what stays queued is what the socket did not
	 * take (shca_net_flush_defer) */
	shca_net_flush(qp->net.conn);
	if (shca_net_queued(qp->net.conn)) {
		/* still writing to a slow peer: not a lost packet */
		arm_ack_timer(qp);
		return;
	}
	count(qp, SHCA_STAT_LOCAL_ACK_TIMEOUT);
	if (shca_ack_timeout_ns(qp->attr.timeout) &&
	    qp->head_retries++ >= qp->attr.retry_cnt) {
		count(qp, SHCA_STAT_RETRY_EXCEEDED_ERR);
		complete_head(qp, w, IBV_WC_RETRY_EXC_ERR, 0);
		return;
	}
	if (lossless(qp)) {
		/* at the first expiry, then one in PROBE_EVERY (timeout 0,
		 * which never expires: at each look) */
		if (!shca_ack_timeout_ns(qp->attr.timeout) ||
		    (qp->head_retries - 1) % PROBE_EVERY == 0)
			probe_head(qp, head, w);
	} else {
		qp->net.resets = shca_net_conn_resets(qp->net.conn);
		qp->net.ahead_dropped = false;
		go_back(qp, head, resume_psn(qp, w));
	}
	rc_execute(qp);
	if (!shca_timer_armed(&qp->retry_timer))
		arm_ack_timer(qp);
}

/* Complete, from the head, the SEND/WRITE WQEs that psn acknowledges
 * (IBA 9.7.5.1.2: an ACK or a response covers every earlier request). */
static void implied_acks(struct shca_qp *qp, uint32_t psn, bool inclusive)
{
	for (;;) {
		uint32_t head, tail;
		struct shca_send_wqe *w = shca_sq_first(qp, &head, &tail);
		if (!w || head == qp->net.assigned || wqe_needs_resp(w))
			return;
		if (inclusive ? shca_psn_gt(wqe_last_psn(w), psn) :
				shca_psn_ge(wqe_last_psn(w), psn))
			return;
		complete_head(qp, w, IBV_WC_SUCCESS,
			      (uint32_t)wqe_len(qp, w));
	}
}

static enum ibv_wc_status nak_status(unsigned int code)
{
	switch (code) {
	case SHCA_NAK_REMOTE_ACCESS:
		return IBV_WC_REM_ACCESS_ERR;
	case SHCA_NAK_REMOTE_OP:
		return IBV_WC_REM_OP_ERR;
	default:
		return IBV_WC_REM_INV_REQ_ERR;
	}
}

/*
 * The requester's own memory, written when a response arrives (a READ's
 * payload, an atomic's result): lanes of this process's arena for the
 * L_Keys of sge[0, n), each key once, taken before the keys are checked
 * and put back after the last byte (local_unhold).  ibv_dereg_mr removes
 * the MR from the table and then drains the lanes: it waits for a
 * placement under way, and one after it fails the check.  false: no lane
 * came free in a bounded wait, none held.
 */
static bool local_hold(const struct ibv_sge *sge, int n, struct shca_lane *l,
		       int *nl)
{
	struct shca_peer *self = shca_peer_self();
	int i, j;

	*nl = 0;
	if (!self)
		return true;
	for (i = 0; i < n; i++) {
		if (!sge[i].length)
			continue;
		for (j = 0; j < i; j++)
			if (sge[j].length && sge[j].lkey == sge[i].lkey)
				break;
		if (j < i)
			continue;
		if (shca_mem_lane_take(self, sge[i].lkey, &l[*nl])) {
			while (*nl)
				shca_mem_lane_put(&l[--*nl]);
			return false;
		}
		(*nl)++;
	}
	return true;
}

static void local_unhold(struct shca_lane *l, int nl)
{
	while (nl)
		shca_mem_lane_put(&l[--nl]);
}

enum place {
	PLACED,
	PLACE_DROP,		/* not the response expected: dropped */
	PLACE_LOC_PROT,		/* the WQE's L_Keys do not cover its buffer */
};

/*
 * Place a READ response's payload (packet k) in the WQE's buffers, whose
 * L_Keys are checked now, when the response arrives, as a NIC scatters
 * it: with one that does not cover its SGE nothing of the response is
 * placed and the WQE completes with LOC_PROT_ERR.
 */
static enum place place_read(struct shca_qp *qp, struct shca_send_wqe *w,
			     const struct shca_wire_msg *m, uint32_t k)
{
	uint64_t len = wqe_len(qp, w);
	uint64_t off = (uint64_t)k * path_mtu(qp);
	uint64_t want = MIN((uint64_t)path_mtu(qp), len - MIN(len, off));
	struct iovec iov[MAX_IOV], dst[MAX_IOV];
	const unsigned char *src = m->payload;
	const struct shca_net_gen *g = gen_of(qp, w);
	struct shca_lane lanes[SHCA_MAX_SGE];
	enum ibv_wc_status st;
	int niov, n, i, nl;

	if (m->payload_len != want)
		return PLACE_DROP;
	if (w->gen && (!g || !g->used))
		return PLACE_DROP;
	/* held from the L_Keys' check to the last byte: a deregistration
	 * waits for the bytes or makes the check fail (no lane free: the
	 * response is dropped, and asked for again) */
	if (!(w->gen ? local_hold(g->sge, (int)MIN(g->nsge, SHCA_NET_GEN_SGE),
				  lanes, &nl) :
		       local_hold(w->sge, MIN(w->wr.num_sge, SHCA_MAX_SGE),
				  lanes, &nl)))
		return PLACE_DROP;
	/* a rendezvous's READ: the tag's buffer, as a receive's */
	st = w->gen ? gen_scatter(qp, g, iov, &niov) :
		      shca_stages.wqe_local_iov(qp, w, true, iov, &niov);
	if (st != IBV_WC_SUCCESS) {
		local_unhold(lanes, nl);
		return PLACE_LOC_PROT;
	}
	n = slice(iov, niov, off, want, dst, MAX_IOV);
	if (n < 0) {
		local_unhold(lanes, nl);
		return PLACE_DROP;
	}
	SHCA_DMA_BEGIN();
	for (i = 0; i < n; i++) {
		memcpy(dst[i].iov_base, src, dst[i].iov_len);
		src += dst[i].iov_len;
	}
	SHCA_DMA_END();
	local_unhold(lanes, nl);
	return PLACED;
}

/*
 * upto: the first PSN an ACK or NAK does not cover.  Does it cover more
 * than any before?  Then qp->net.acked moves to it.  A head that
 * completed covers everything before its successor (completer).
 */
static bool acks_more(struct shca_qp *qp, uint32_t upto)
{
	if (!shca_psn_gt(upto, qp->net.acked))
		return false;
	qp->net.acked = upto;
	return true;
}

/* An ACK, NAK or response for QP qp (exec_lock held). */
static void completer(struct shca_qp *qp, const struct shca_wire_msg *m)
{
	uint32_t head, tail;
	struct shca_send_wqe *w;
	bool progress = false;
	uint32_t before = qp->net.assigned;

	if (qp->attr.qp_state != IBV_QPS_RTS &&
	    qp->attr.qp_state != IBV_QPS_SQD)
		return;
	w = shca_sq_first(qp, &head, &tail);
	/* only PSNs that were sent */
	if (!w || head == before || shca_psn_lt(m->psn, w->psn) ||
	    shca_psn_ge(m->psn, qp->net.next_psn)) {
		count(qp, SHCA_STAT_DUPLICATE_REQUEST);
		return;
	}
	if (m->op->mask & SHCA_OPM_ACK) {
		enum shca_aeth_type t = shca_aeth_syn_type(m->syndrome);
		unsigned int v = shca_aeth_syn_value(m->syndrome);
		uint32_t h0 = head;

		implied_acks(qp, m->psn, t == SHCA_AETH_ACK);
		w = shca_sq_first(qp, &head, &tail);
		progress = head != h0;
		/* an ACK, or a sequence NAK, that covers packets of the head
		 * not covered before: the responder got more of it */
		if ((t == SHCA_AETH_ACK ||
		     (t == SHCA_AETH_NAK && v == SHCA_NAK_PSN_SEQ_ERR)) &&
		    acks_more(qp, t == SHCA_AETH_ACK ?
					  shca_psn_add(m->psn, 1) : m->psn))
			progress = true;
		if (t == SHCA_AETH_RNR_NAK && w && wqe_has_psn(w, m->psn)) {
			count(qp, SHCA_STAT_RCVD_RNR_ERR);
			if (qp->attr.rnr_retry != 7 &&
			    qp->head_rnr_retries++ >= qp->attr.rnr_retry) {
				count(qp, SHCA_STAT_RETRY_RNR_EXCEEDED_ERR);
				complete_head(qp, w, IBV_WC_RNR_RETRY_EXC_ERR,
					      0);
				return;
			}
			qp->net.rnr_wait = true;
			shca_timer_arm(&qp->retry_timer,
				       shca_now_ns() +
				       1000ull * shca_wire_rnr_timer_us(v));
			return;
		}
		if (t == SHCA_AETH_NAK && w && v == SHCA_NAK_PSN_SEQ_ERR) {
			uint32_t i;

			count(qp, SHCA_STAT_RCVD_SEQ_ERR);
			for (i = head; i != qp->net.assigned; i++) {
				struct shca_send_wqe *x =
					shca_sq_at(qp, i, &head, &tail);

				if (x && wqe_has_psn(x, m->psn)) {
					go_back(qp, i, m->psn);
					break;
				}
			}
		} else if (t == SHCA_AETH_NAK && w && wqe_has_psn(w, m->psn)) {
			if (v == SHCA_NAK_REMOTE_ACCESS)
				count(qp, SHCA_STAT_ACCESS_ERR);
			complete_head(qp, w, nak_status(v), 0);
			return;
		}
	} else {
		/* READ response or atomic ACK: for the head, in order */
		uint32_t h0 = head;

		implied_acks(qp, m->psn, false);
		w = shca_sq_first(qp, &head, &tail);
		progress = head != h0;
		if (w && w->wr.opcode == IBV_WR_RDMA_READ &&
		    wqe_has_psn(w, m->psn) &&
		    shca_psn_gt(m->psn, shca_psn_add(w->psn, w->nrecv))) {
			uint32_t want = shca_psn_add(w->psn, w->nrecv);

			/* a response before this one was lost: ask again from
			 * it now (IBA 9.7.5.1.4, an implied NAK), once per
			 * gap, rather than when the ACK timer expires */
			if (!qp->net.rd_gap || qp->net.rd_gap_psn != want) {
				qp->net.rd_gap = true;
				qp->net.rd_gap_psn = want;
				count(qp, SHCA_STAT_RCVD_SEQ_ERR);
				go_back(qp, head, want);
			}
		} else if (!w || !wqe_needs_resp(w) ||
			   !wqe_has_psn(w, m->psn) ||
			   m->psn != shca_psn_add(w->psn, w->nrecv)) {
			/* one for a WQE after the head: what the head
			 * misses was lost (lossless) */
			if (w && shca_psn_gt(m->psn, wqe_last_psn(w)))
				qp->net.ahead_dropped = true;
			count(qp, SHCA_STAT_DUPLICATE_REQUEST);
		} else if (m->op->mask & SHCA_OPM_ATOMIC_ACK) {
			struct shca_lane lanes[SHCA_MAX_SGE];
			struct iovec iov[MAX_IOV];
			int niov, nl;

			if (!wqe_is_atomic(w))
				return;
			/* the result is placed as a READ's payload is */
			if (!local_hold(w->sge, MIN(w->wr.num_sge, SHCA_MAX_SGE),
					lanes, &nl)) {
				count(qp, SHCA_STAT_DROPPED_PKTS);
				return;
			}
			if (shca_stages.wqe_local_iov(qp, w, true, iov, &niov) ==
			    IBV_WC_SUCCESS) {
				shca_stages.atomic_result(iov, niov, m->orig);
				local_unhold(lanes, nl);
				complete_head(qp, w, IBV_WC_SUCCESS, 8);
			} else {
				local_unhold(lanes, nl);
				complete_head(qp, w, IBV_WC_LOC_PROT_ERR, 0);
				return;
			}
			progress = true;
		} else if (wqe_is_flush(w)) {
			/* its one response: an RDMA READ response only, of
			 * no data; anything else is dropped (its timer asks
			 * again) */
			if (!(m->op->mask & SHCA_OPM_READ_RESP) ||
			    !shca_wire_op_is(m->op, SHCA_OPM_ONLY) ||
			    m->payload_len) {
				count(qp, SHCA_STAT_DROPPED_PKTS);
				return;
			}
			complete_head(qp, w, IBV_WC_SUCCESS,
				      (uint32_t)w->wr.wr.atomic.compare_add);
			progress = true;
		} else if (w->wr.opcode == IBV_WR_RDMA_READ) {
			uint32_t k = w->nrecv;
			bool first = k == 0, last = k + 1 == w->npsn;
			uint32_t mask = m->op->mask;
			enum place pl = PLACE_DROP;

			/* the response's position must match ours (a READ
			 * asked again from response k starts with a FIRST
			 * there) */
			if ((!first || (mask & SHCA_OPM_FIRST)) &&
			    !!(mask & SHCA_OPM_LAST) == last)
				pl = place_read(qp, w, m, k);
			if (pl == PLACE_LOC_PROT) {
				complete_head(qp, w, IBV_WC_LOC_PROT_ERR, 0);
				return;
			}
			if (pl != PLACED) {
				count(qp, SHCA_STAT_DROPPED_PKTS);
				return;
			}
			w->nrecv++;
			qp->net.rd_gap = false;
			if (last)
				complete_head(qp, w, IBV_WC_SUCCESS,
					      (uint32_t)wqe_len(qp, w));
			else if (!w->gen &&
				 w->npsn - 1 - w->nrecv >= PLACE_MIN)
				/* the middles that follow, straight into
				 * the buffer (read_place) */
				shca_net_expect(qp->net.conn,
						qp->ibqp.qp_num);
			progress = true;
		}
	}
	if (progress) {
		/* IBA 9.7.6.1.3 counts retries of a request that gets no
		 * answer; one that is being answered starts afresh (rxe and
		 * hfi1 reset the count with every ACK that moves on) */
		qp->head_retries = 0;
		/* the WQE an RNR NAK made us wait for is done: a later copy
		 * of it (a duplicate, a retransmission) found a receive, and
		 * its ACK came before the RNR timer; the wait ends with it,
		 * or nothing more would be sent until a timer that the ACK
		 * timer replaces below */
		qp->net.rnr_wait = false;
		w = shca_sq_first(qp, &head, &tail);
		/* the WQEs before the head are covered */
		if (w && head != qp->net.assigned)
			(void)acks_more(qp, w->psn);
		if (qp->net.send_idx - head > tail - head) {
			qp->net.send_idx = head;
			qp->net.send_pkt = 0;
		}
		if (head == qp->net.assigned)
			shca_timer_cancel(&qp->retry_timer);
		else
			arm_ack_timer(qp);
	}
	rc_execute(qp);
}

/* ------------------------------------------------------------------ */
/* UC and UD requesters                                                */

static void uc_send(struct shca_qp *qp, const struct shca_send_wqe *w,
		    const struct shca_xfer *x)
{
	uint32_t n = npkts(x->length, path_mtu(qp)), k;
	uint32_t psn = qp->net.next_psn;

	qp->net.next_psn = shca_psn_add(psn, n);
	/* UC may lose a message (the connection is opening: it is) */
	for (k = 0; k < n; k++)
		if (send_packet(qp, w, x->local, x->nlocal, x->length, psn, k,
				true))
			break;
	shca_net_flush(qp->net.conn);
}

static void ud_send(struct shca_qp *qp, const struct shca_send_wqe *w,
		    const struct shca_xfer *x)
{
	struct shca_ah *ah = to_sah(w->wr.wr.ud.ah);
	struct shca_context *ctx = to_sctx(qp->ibqp.context);
	unsigned char hdr[HDR_MAX];
	struct shca_wire_msg m;
	ssize_t hlen;

	memset(&m, 0, sizeof(m));
	m.opcode = w->wr.opcode == IBV_WR_SEND_WITH_IMM ?
			   SHCA_OP_UD_SEND_ONLY_WITH_IMMEDIATE :
			   SHCA_OP_UD_SEND_ONLY;
	m.pkey = SHCA_DEFAULT_PKEY;
	m.dqpn = x->dest_qpn;
	m.psn = qp->net.next_psn;
	qp->net.next_psn = shca_psn_add(qp->net.next_psn, 1);
	m.se = x->solicited;
	m.imm_be = x->imm_data;
	m.qkey = x->qkey;
	m.sqpn = qp->ibqp.qp_num;
	m.payload_len = (uint32_t)x->length;
	hlen = shca_wire_build_hdr(hdr, sizeof(hdr), &m);
	if (hlen < 0 || x->nlocal > SHCA_MAX_NET_IOV)
		return;
	if (!shca_net_sendto(ah->attr.grh.dgid.raw,
			     slot_port(x->dest_qpn),
			     ctx->dev->ifindex, hdr, (size_t)hlen, x->local,
			     x->nlocal))
		count_pkts(qp, true, 1, (uint64_t)hlen + x->length);
}

/* ------------------------------------------------------------------ */
/* The net transport's ops (engine/xport.h)                            */

/* RC: the window runs the send queue (rc_execute), its timer retries. */
static bool net_sq_run(struct shca_qp *qp)
{
	if (!rc_like(qp))
		return false;
	rc_execute(qp);
	return true;
}

static bool net_timer(struct shca_qp *qp)
{
	if (!rc_like(qp))
		return false;
	rc_timer(qp);
	return true;
}

/* UC and UD: a message is done once sent (UD multicast: IP multicast,
 * to the group's members on other hosts). */
static void net_xmit(struct shca_qp *qp, const struct shca_send_wqe *w,
		     const struct shca_xfer *x, struct shca_xfer_result *res)
{
	if (qp->ibqp.qp_type == IBV_QPT_UD)
		ud_send(qp, w, x);
	else
		uc_send(qp, w, x);
	memset(res, 0, sizeof(*res));
	res->outcome = SHCA_XFER_DONE;
	res->status = IBV_WC_SUCCESS;
}

/* The net path keeps nothing across a run of the send queue. */
static void net_run_end(struct shca_qp *qp)
{
	(void)qp;
}

const struct shca_transport_ops shca_net_ops = {
	.name = "net",
	.sq_run = net_sq_run,
	.timer = net_timer,
	.xmit = net_xmit,
	.run_end = net_run_end,
};

void shca_net_mcast(struct shca_qp *qp, const union ibv_gid *gid, bool join)
{
	struct shca_context *ctx = to_sctx(qp->ibqp.context);

	if (join) {
		shca_net_start(shca_net_rx);
		shca_net_mcast_join(gid->raw, ctx->dev->ifindex);
	} else {
		shca_net_mcast_leave(gid->raw, ctx->dev->ifindex);
	}
}

/* ------------------------------------------------------------------ */
/* Responder                                                           */

/* One ACK, atomic ACK or NAK onto c: qp_send's result (the header not
 * built: 0, nothing sent). */
static int ack_out(struct shca_conn *c, struct shca_qp *qp, uint8_t opcode,
		   uint32_t psn, uint8_t syndrome, uint32_t msn, uint64_t orig,
		   unsigned int flags)
{
	unsigned char hdr[HDR_MAX];
	struct shca_wire_msg m;
	ssize_t hlen;

	memset(&m, 0, sizeof(m));
	m.opcode = qp_opcode(qp, opcode);
	m.pkey = SHCA_DEFAULT_PKEY;
	m.dqpn = qp->attr.dest_qp_num;
	m.psn = psn;
	m.syndrome = syndrome;
	m.msn = msn & SHCA_PSN_MASK;
	m.orig = orig;
	hlen = shca_wire_build_hdr(hdr, sizeof(hdr), &m);
	if (hlen <= 0)
		return 0;
	/* written when the received batch is done (conn.c) */
	return qp_send(qp, c, hdr, (size_t)hlen, NULL, 0,
		       SHCA_NET_COPY | SHCA_NET_MORE | flags, NULL);
}

static bool rd_answer(struct shca_conn *c, struct shca_qp *qp,
		      uint8_t opcode, uint32_t psn, uint8_t syndrome,
		      uint64_t orig, unsigned int flags);

/*
 * Answer a request: after the responses of every earlier READ (IBA
 * 9.7.5.1: the responder answers in PSN order; the requester takes an
 * answer only for the WQE at its head).  With none queued, at once.
 */
static void send_ack_flags(struct shca_conn *c, struct shca_qp *qp,
			   uint8_t opcode, uint32_t psn, uint8_t syndrome,
			   uint64_t orig, unsigned int flags)
{
	if (qp->net.rd_count &&
	    rd_answer(c, qp, opcode, psn, syndrome, orig, flags))
		return;
	ack_out(c, qp, opcode, psn, syndrome, qp->net.msn, orig, flags);
}

static void send_ack(struct shca_conn *c, struct shca_qp *qp, uint8_t opcode,
		     uint32_t psn, uint8_t syndrome, uint64_t orig)
{
	send_ack_flags(c, qp, opcode, psn, syndrome, orig, 0);
}

static uint8_t nak_code(enum ibv_wc_status st)
{
	switch (st) {
	case IBV_WC_REM_ACCESS_ERR:
		return shca_aeth_syn_nak(SHCA_NAK_REMOTE_ACCESS);
	case IBV_WC_REM_OP_ERR:
		return shca_aeth_syn_nak(SHCA_NAK_REMOTE_OP);
	default:
		return shca_aeth_syn_nak(SHCA_NAK_INVALID_REQ);
	}
}

static const uint8_t ACK_OK = (SHCA_AETH_ACK << 5) | SHCA_AETH_CREDITS_INVALID;

/* Answer an RC request with the outcome of carrying it out. */
static void answer(struct shca_conn *c, struct shca_qp *qp, uint32_t psn,
		   const struct shca_xfer_result *res)
{
	if (res->outcome == SHCA_XFER_RNR) {
		count(qp, SHCA_STAT_SEND_RNR_ERR);
		send_ack(c, qp, SHCA_OP_RC_ACKNOWLEDGE, psn,
			 shca_aeth_syn_rnr(res->rnr_timer), 0);
	} else if (res->outcome == SHCA_XFER_DONE &&
		   res->status != IBV_WC_SUCCESS) {
		if (res->status == IBV_WC_REM_ACCESS_ERR)
			count(qp, SHCA_STAT_ACCESS_ERR);
		send_ack(c, qp, SHCA_OP_RC_ACKNOWLEDGE, psn,
			 nak_code(res->status), 0);
	}
}

/*
 * Carry out a request that arrived on c (shca_stages.respond): an invalid
 * key counts against c's peer (keyguard.h); over the limit, c is closed
 * once this packet has been answered (shca_net_rx).  Engine thread.
 */
static struct shca_conn *key_abort_after;

static void key_execute(struct shca_conn *c, struct shca_peer *self,
			const struct shca_xfer *x,
			struct shca_xfer_result *res)
{
	shca_stages.respond(self, x, res);
	if (res->bad_key && c && shca_keyguard_strike_conn(c, x->dest_qpn))
		key_abort_after = c;
}

/* What the responder carries out for request m (shca_stages.respond). */
static void xfer_init(struct shca_xfer *x, const struct shca_qp *qp,
		      const struct shca_wire_msg *m, struct iovec *v)
{
	memset(x, 0, sizeof(*x));
	x->qp_type = rc_like(qp) ? IBV_QPT_RC : qp->ibqp.qp_type;
	/*
	 * XRC: the SRQ the request names (engine/responder.c checks it is
	 * an XRC SRQ of this QP's domain, in this process).  It came from
	 * the wire: 0 would mean "not XRC" there, so it becomes a number no
	 * SRQ has (beyond 24 bits), refused as any unknown one.
	 */
	if (qp->ibqp.qp_type == IBV_QPT_XRC_RECV)
		x->xrc_srqn = m->xrc_srqn ? m->xrc_srqn : SHCA_XRC_SRQN_NONE;
	x->src_qpn = qp->attr.dest_qp_num;
	x->dest_qpn = qp->ibqp.qp_num;
	x->solicited = m->se;
	x->imm_data = m->imm_be;
	x->local = v;
	x->nlocal = v->iov_len ? 1 : 0;
}

/*
 * READ responses go out as the connection takes them, a few packets at a
 * time from the registered memory (copied into the queue packet by
 * packet): a READ of a GiB needs no GiB of buffer, and a peer that does
 * not read its socket makes this process queue RD_QUEUED bytes at most
 * per connection.  QPs with responses left wait for their connection to
 * drain (rd_drain).  Engine thread (exec_lock held).
 */
#define RD_QUEUED	(1u << 20)

static uint32_t *rd_waiting;		/* QPNs with responses left */
static unsigned int rd_nwaiting, rd_capwaiting;

static void rd_wait(uint32_t qpn)
{
	unsigned int i;
	uint32_t *n;

	for (i = 0; i < rd_nwaiting; i++)
		if (rd_waiting[i] == qpn)
			return;
	if (rd_nwaiting == rd_capwaiting) {
		unsigned int cap = rd_capwaiting ? 2 * rd_capwaiting : 16;

		n = realloc(rd_waiting, cap * sizeof(*n));
		if (!n)
			return;		/* the requester's timer asks again */
		rd_waiting = n;
		rd_capwaiting = cap;
	}
	rd_waiting[rd_nwaiting++] = qpn;
}

/* The PD whose R_Keys a READ of qp's is read with: the QP's, or (XRC)
 * the SRQ's, looked up again each time (it may have gone since: NULL,
 * and the responses end as for a region deregistered meanwhile). */
static struct shca_pd *rd_pd(struct shca_qp *qp,
			     const struct shca_net_read *e)
{
	if (qp->ibqp.qp_type != IBV_QPT_XRC_RECV)
		return qp->pd;
	if (!qp->xrcd_id)
		return NULL;
	return shca_xsrq_pd(e->xrc_srqn, qp->xrcd_id);
}

/*
 * A READ of another process's memory of this host: an XRC READ into an
 * SRQ of another process (docs/xrc.md, "SRQs of other processes"), or an
 * R_Key of a process that shares qp's PD (docs/import.md).  The
 * bytes of one response, read through the responder's rules against that
 * process (the R_Key again, for this range) into a buffer that qp_send
 * copies.  NULL: not readable now, the responses end as for a region
 * deregistered meanwhile.  Engine thread.
 */
static void *rd_other_read(struct shca_qp *qp, const struct shca_net_read *e,
			   uint64_t off, size_t len)
{
	static uint8_t buf[4096];	/* the largest path MTU */
	struct iovec v = { buf, len };
	struct shca_xfer_result res;
	struct shca_peer *self = shca_peer_self();
	struct shca_xfer x;

	if (!self || len > sizeof(buf))
		return NULL;
	memset(&x, 0, sizeof(x));
	x.qp_type = IBV_QPT_RC;
	x.xrc_srqn = e->xrc_srqn;
	x.src_qpn = qp->attr.dest_qp_num;
	x.dest_qpn = qp->ibqp.qp_num;
	x.opcode = IBV_WR_RDMA_READ;
	x.remote_addr = e->va + off;
	x.rkey = e->rkey;
	x.length = len;
	x.local = &v;
	x.nlocal = 1;
	shca_stages.respond(self, &x, &res);
	if (res.outcome != SHCA_XFER_DONE || res.status != IBV_WC_SUCCESS)
		return NULL;
	return buf;
}

/* Is e an XRC READ whose SRQ another process holds? */
static bool rd_sibling(const struct shca_qp *qp, const struct shca_net_read *e)
{
	return qp->ibqp.qp_type == IBV_QPT_XRC_RECV &&
	       e->xrc_srqn <= 0xffffff &&
	       shca_qpn_slot(e->xrc_srqn) != shca_qpn_slot(qp->ibqp.qp_num);
}

/* The headers of response k (of n) of READ e, plen bytes of payload, into
 * hdr (HDR_MAX): their length, or -errno. */
static ssize_t rd_hdr(const struct shca_qp *qp, const struct shca_net_read *e,
		      uint32_t k, uint32_t n, uint64_t plen, unsigned char *hdr)
{
	struct shca_wire_msg r;

	memset(&r, 0, sizeof(r));
	r.opcode = n == 1 ? SHCA_OP_RC_RDMA_READ_RESPONSE_ONLY :
		   k == 0 ? SHCA_OP_RC_RDMA_READ_RESPONSE_FIRST :
		   k + 1 == n ? SHCA_OP_RC_RDMA_READ_RESPONSE_LAST :
				SHCA_OP_RC_RDMA_READ_RESPONSE_MIDDLE;
	r.opcode = qp_opcode(qp, r.opcode);
	r.pkey = SHCA_DEFAULT_PKEY;
	r.dqpn = qp->attr.dest_qp_num;
	r.psn = shca_psn_add(e->psn, k);
	r.syndrome = ACK_OK;
	r.msn = e->msn & SHCA_PSN_MASK;
	r.payload_len = (uint32_t)plen;
	return shca_wire_build_hdr(hdr, HDR_MAX, &r);
}

/*
 * READ e's next responses, as many as a train takes (RD_TRAIN bytes),
 * the memory held once for all of them: the train references it and
 * keeps the lane until the socket has taken the bytes; a deregistration
 * meanwhile gives them a copy first (conn.c shca_net_drain_key), so it
 * never waits for a peer that stopped reading.  1: none sent here (e is
 * a sibling's, or the range is not one hold: the responses go one by
 * one, copied, which find where it ends), 0: sent, -1: the connection
 * is gone.
 */
#define RD_TRAIN	SHCA_NET_RUN_BYTES
static int rd_train(struct shca_qp *qp, struct shca_conn *c,
		    struct shca_net_read *e, uint32_t mtu)
{
	uint32_t n = npkts(e->len, mtu), k = e->sent, t, i, j, r;
	uint64_t off = (uint64_t)k * mtu, tlen;
	unsigned char hdr[SHCA_NET_TRAIN][HDR_MAX];
	struct shca_net_pkt tp[SHCA_NET_TRAIN];
	struct iovec pl[SHCA_NET_TRAIN];
	struct shca_lane lane = { NULL, 0 };
	bool runs = shca_net_runs_premade();
	struct shca_pd *pd;
	void *base = NULL;
	ssize_t hlen;
	int sent;

	t = MIN(MIN(n - k, (uint32_t)SHCA_NET_TRAIN), RD_TRAIN / mtu);
	if (t < 2 || rd_sibling(qp, e))
		return 1;
	tlen = MIN((uint64_t)t * mtu, e->len - off);
	pd = rd_pd(qp, e);
	if (!pd || shca_stages.hold(shca_peer_self(), qp->ibqp.qp_num,
				    pd->prot->obj.handle, e->rkey,
				    IBV_ACCESS_REMOTE_READ, e->va + off, tlen,
				    &lane, &base))
		return 1;
	/* response k + i; middle responses (a BTH alone, a full MTU) one
	 * after another go as one run frame made here (run_made) */
	for (i = 0, j = 0; i < t; i += r, j++) {
		r = 1;
		if (runs && k + i)	/* not the first: a middle, then */
			while (i + r < t && k + i + r + 1 < n)
				r++;
		pl[j].iov_base = (char *)base + (uint64_t)i * mtu;
		pl[j].iov_len = r > 1 ? (uint64_t)r * mtu :
			MIN((uint64_t)mtu, tlen - (uint64_t)i * mtu);
		hlen = rd_hdr(qp, e, k + i, n, r > 1 ? mtu : pl[j].iov_len,
			      hdr[j]);
		if (hlen < 0) {
			shca_stages.unhold(&lane);
			return -1;
		}
		tp[j].hdr = hdr[j];
		tp[j].hlen = (size_t)hlen;
		tp[j].pl = &pl[j];
		tp[j].npl = pl[j].iov_len ? 1 : 0;
		tp[j].count = r > 1 ? r : 0;
	}
	/* referenced, the lane held until the socket takes them (a
	 * deregistration copies them first: shca_net_drain_key); copied
	 * when this process has no lanes to hold */
	sent = shca_net_send_train(c, qp->ibqp.qp_num,
				   shca_psn_add(e->psn, k), tp, (int)j,
				   lane.lane ? 0 : SHCA_NET_COPY, &lane);
	shca_stages.unhold(&lane);	/* unless the train took it */
	if (sent <= 0)
		return -1;
	e->sent += count_train(qp, tp, sent);
	if (e->sent == n) {
		qp->net.rd_head++;
		qp->net.rd_count--;
	}
	return 0;
}

/* Send qp's READ responses until none is left or the connection is full:
 * true when some are left.  in_batch: serving a request of a received
 * batch, whose end writes what is queued (conn.c deliver), so that the
 * responses to a batch of READs go in one write, as its ACKs do. */
static bool rd_pump(struct shca_qp *qp, bool in_batch)
{
	struct shca_conn *c = qp->net.rd_conn;
	struct shca_peer *self = shca_peer_self();
	uint32_t mtu = path_mtu(qp);

	/* the connection the READs came on closed since: its object may
	 * serve another peer now (net.h), who gets none of this */
	if (shca_net_conn_gen(c) != qp->net.rd_gen) {
		rd_clear(qp);
		return false;
	}
	while (qp->net.rd_count) {
		struct shca_net_read *e =
			&qp->net.rd[qp->net.rd_head % SHCA_NET_RD_MAX];
		uint32_t n = npkts(e->len, mtu), k = e->sent;
		uint64_t off = (uint64_t)k * mtu;
		unsigned char hdr[HDR_MAX];
		struct iovec pl = { NULL, 0 };
		struct shca_lane lane = { NULL, 0 };
		ssize_t hlen;
		int sent;

		if (shca_net_queued(c) >= RD_QUEUED) {
			shca_net_flush(c);
			if (shca_net_queued(c) >= RD_QUEUED)
				return true;	/* rd_drain goes on */
		}
		if (e->answer) {
			/* a later request's answer, its turn now */
			if (ack_out(c, qp, e->opcode, e->psn, e->syndrome,
				    e->msn, e->va,
				    e->ack ? SHCA_NET_ACK : 0) < 0) {
				rd_clear(qp);
				break;
			}
			qp->net.rd_head++;
			qp->net.rd_count--;
			continue;
		}
		switch (rd_train(qp, c, e, mtu)) {
		case 0:
			continue;
		case -1:
			rd_clear(qp);	/* the connection is gone */
			goto out;
		}
		pl.iov_len = MIN((uint64_t)mtu, e->len - MIN((uint64_t)e->len, off));
		/* the memory again: a region deregistered since then ends
		 * the responses (the requester times out, asks again, and
		 * is refused); held (an access lane) until the packet has
		 * its copy, so that a deregistration waits for it */
		if (pl.iov_len && rd_sibling(qp, e)) {
			pl.iov_base = rd_other_read(qp, e, off, pl.iov_len);
		} else if (pl.iov_len) {
			struct shca_pd *pd = rd_pd(qp, e);

			if (pd && shca_stages.hold(
					  self, qp->ibqp.qp_num,
					  pd->prot->obj.handle, e->rkey,
					  IBV_ACCESS_REMOTE_READ, e->va + off,
					  pl.iov_len, &lane, &pl.iov_base))
				pl.iov_base = NULL;
			/* not ours: an R_Key of a process that shares the
			 * PD (its owner, or one that imported it) */
			if (!pl.iov_base && shca_pd_shared(pd))
				pl.iov_base = rd_other_read(qp, e, off,
							    pl.iov_len);
		}
		if (pl.iov_len && !pl.iov_base) {
			rd_clear(qp);
			break;
		}
		hlen = rd_hdr(qp, e, k, n, pl.iov_len, hdr);
		sent = hlen < 0 ? -1 :
		       qp_send(qp, c, hdr, (size_t)hlen, &pl,
			       pl.iov_len ? 1 : 0,
			       SHCA_NET_COPY | SHCA_NET_MORE, NULL);
		shca_stages.unhold(&lane);	/* copied (or dropped) */
		if (sent) {
			/* the connection is gone: so are the responses */
			rd_clear(qp);
			break;
		}
		if (++e->sent == n) {
			qp->net.rd_head++;
			qp->net.rd_count--;
		}
	}
out:
	if (!qp->net.rd_count)
		qp->net.rd_fatal = false;
	if (!in_batch)
		shca_net_flush(c);
	return false;
}

/* c drained: the READ responses waiting for it go on. */
static void rd_drain(struct shca_conn *c)
{
	unsigned int i = 0;

	while (i < rd_nwaiting) {
		struct shca_qp *qp = shca_qp_lookup(rd_waiting[i]);
		bool left = false;

		if (qp) {
			pthread_mutex_lock(&qp->exec_lock);
			if (qp->net.rd_count && qp->net.rd_conn != c)
				left = true;	/* another connection's */
			else if (qp->net.rd_count)
				left = rd_pump(qp, false);
			pthread_mutex_unlock(&qp->exec_lock);
		}
		if (left)
			i++;
		else
			rd_waiting[i] = rd_waiting[--rd_nwaiting];
	}
}

static void rd_queue(struct shca_conn *c, struct shca_qp *qp,
		     const struct shca_wire_msg *m, uint32_t len, bool is_new);

/* Serve a READ request at psn (new or duplicate). */
static void serve_read(struct shca_conn *c, struct shca_qp *qp,
		       struct shca_peer *self, const struct shca_wire_msg *m,
		       bool is_new)
{
	struct shca_xfer_result res;
	struct iovec none = { NULL, 0 };
	struct shca_xfer x;

	/* every check of a READ (state, access, R_Key, bounds), no data:
	 * the responses read the memory as they go */
	xfer_init(&x, qp, m, &none);
	x.opcode = IBV_WR_RDMA_READ;
	x.remote_addr = m->va;
	x.rkey = m->rkey;
	x.length = m->dma_len;
	x.partial = true;
	key_execute(c, self, &x, &res);
	if (res.outcome != SHCA_XFER_DONE || res.status != IBV_WC_SUCCESS) {
		answer(c, qp, m->psn, &res);
		return;
	}
	rd_queue(c, qp, m, m->dma_len, is_new);
}

/* The entry i places after the oldest queued READ of qp. */
static struct shca_net_read *rd_at(struct shca_qp *qp, unsigned int i)
{
	return &qp->net.rd[(qp->net.rd_head + i) % SHCA_NET_RD_MAX];
}

static void rd_fill(struct shca_net_read *e, const struct shca_wire_msg *m,
		    uint32_t msn, uint32_t len)
{
	e->psn = m->psn;
	e->msn = msn;
	e->va = m->va;
	e->rkey = m->rkey;
	e->len = len;
	e->sent = 0;
	e->xrc_srqn = m->xrc_srqn;
	e->answer = false;
}

/*
 * Queue the answer of a request behind the READ responses qp has queued
 * (send_ack_flags): rd_pump sends it in its turn.  A plain ACK behind a
 * plain ACK still queued replaces it (it says all the older one said, as
 * conn.c's ack_merge).  A NAK that puts the QP in error marks the queue
 * (rd_fatal): the error transition keeps it (shca_net_qp_stop).  false:
 * not queued (the responses are another connection's, or that connection
 * is gone: it goes out at once; or the queue is full: dropped, and the
 * requester's timer asks again).
 */
static bool rd_answer(struct shca_conn *c, struct shca_qp *qp,
		      uint8_t opcode, uint32_t psn, uint8_t syndrome,
		      uint64_t orig, unsigned int flags)
{
	struct shca_net_read *e = rd_at(qp, qp->net.rd_count - 1);

	if (shca_net_conn_gen(qp->net.rd_conn) != qp->net.rd_gen) {
		rd_clear(qp);		/* rd_pump would: they are gone */
		return false;
	}
	if (qp->net.rd_conn != c)
		return false;
	if (!((flags & SHCA_NET_ACK) && e->answer && e->ack)) {
		if (qp->net.rd_count == SHCA_NET_RD_MAX) {
			count(qp, SHCA_STAT_DROPPED_PKTS);
			return true;
		}
		e = rd_at(qp, qp->net.rd_count++);
		memset(e, 0, sizeof(*e));
		e->answer = true;
		e->ack = !!(flags & SHCA_NET_ACK);
		e->opcode = opcode;
	}
	e->psn = psn;
	e->msn = qp->net.msn;
	e->syndrome = syndrome;
	e->va = orig;
	if (shca_aeth_syn_type(syndrome) == SHCA_AETH_NAK &&
	    shca_aeth_syn_value(syndrome) != SHCA_NAK_PSN_SEQ_ERR)
		qp->net.rd_fatal = true;
	return true;
}

/*
 * A duplicate READ (or FLUSH) request at m's PSN, of len bytes (IBA
 * 9.7.5.2.5: carried out again).  A requester asks again from the first
 * response it misses (go-back-N, transport.c's go_back), then for every
 * later READ of its window: each of those comes as a duplicate too.  So:
 *  - the queued READ that holds m's PSN, asked again from its response
 *    k, goes back to k if it went past it (what went out since was lost
 *    or is dropped by the requester as out of order); a duplicate of
 *    responses still to be sent changes nothing;
 *  - one that is no longer queued (all sent) is queued again before
 *    the READs of later PSNs, the responses in PSN order;
 *  - every READ queued after it starts again from its first response:
 *    the requester takes a READ's responses only once every earlier READ
 *    has completed (completer), so those sent meanwhile were dropped.
 * The READs queued before it are left as they are.  (Emptying the whole
 * queue on each duplicate left, of a window asked again, only its last
 * READ answered: the head's responses never came, RETRY_EXC_ERR.)
 *
 * Unless the duplicate came on the TCP stream the queued responses went
 * and go on (same connection, same generation, its socket not reset since
 * the queue began: rd_queue) and no fault of this process drops packets
 * (stream): then every response sent on it reaches the requester,
 * in order, and is taken there (what it asked again for arrives before
 * any copy would).  A duplicate of a queued READ then changes nothing:
 * the responses still to be sent read the memory when they go, after the
 * duplicate came, and are its answer; and the READs after it go on where
 * they were.  A READ no longer queued is queued again, carried out anew
 * (the duplicate came after all its responses were sent).  Rewinding
 * there made a responder stopped longer than the requester's ACK timeout
 * send what was on its way once more for every duplicate (README,
 * "Between hosts: the net path").  false: the queue is full.
 */
static bool rd_requeue(struct shca_conn *c, struct shca_qp *qp,
		       const struct shca_wire_msg *m, uint32_t len)
{
	uint32_t mtu = path_mtu(qp);
	bool stream = qp->net.rd_conn == c && !qp->net.rd_split &&
		      shca_net_conn_gen(c) == qp->net.rd_gen &&
		      shca_net_conn_resets(c) == qp->net.rd_resets &&
		      !shca_net_faults_drop();
	unsigned int i, j;

	for (i = 0; i < qp->net.rd_count; i++) {
		struct shca_net_read *e = rd_at(qp, i);
		int32_t k = shca_psn_diff(m->psn, e->psn);
		uint64_t off = (uint64_t)(uint32_t)k * mtu;

		if (k < 0)
			break;			/* queued after m's PSN */
		if (e->answer)
			continue;		/* an earlier request's */
		if ((uint32_t)k >= npkts(e->len, mtu))
			continue;		/* wholly before it */
		if (e->rkey == m->rkey && e->xrc_srqn == m->xrc_srqn &&
		    e->va + off == m->va &&
		    (uint64_t)e->len - MIN((uint64_t)e->len, off) == len) {
			/* the same READ, asked again from response k */
			if (stream)
				return true;
			if (e->sent > (uint32_t)k)
				e->sent = (uint32_t)k;
			for (j = i + 1; j < qp->net.rd_count; j++)
				rd_at(qp, j)->sent = 0;
			return true;
		}
		/* another request at a PSN this READ's responses hold (not
		 * what the requester asked before): it and what follows it
		 * are replaced by the request */
		qp->net.rd_count = i;
		break;
	}
	if (qp->net.rd_count == SHCA_NET_RD_MAX)
		return false;
	/* queued at i, before the READs of later PSNs, which start again */
	for (j = qp->net.rd_count; j > i; j--) {
		*rd_at(qp, j) = *rd_at(qp, j - 1);
		if (!stream)
			rd_at(qp, j)->sent = 0;
	}
	qp->net.rd_count++;
	rd_fill(rd_at(qp, i), m, qp->net.msn, len);
	return true;
}

/*
 * Queue the responses of a READ of len bytes at m's PSN, checked (len 0:
 * one response of no data, a FLUSH's answer too): in the same queue, so
 * that they go out after those of every earlier READ.
 */
static void rd_queue(struct shca_conn *c, struct shca_qp *qp,
		     const struct shca_wire_msg *m, uint32_t len, bool is_new)
{
	if (is_new) {
		qp->net.epsn = shca_psn_add(m->psn, npkts(len, path_mtu(qp)));
		qp->net.msn++;
	}
	/* the queued responses go on one TCP stream (rd_requeue): c's
	 * socket now, unless some went on another one */
	if (!qp->net.rd_count) {
		qp->net.rd_resets = shca_net_conn_resets(c);
		qp->net.rd_split = false;
	} else if (qp->net.rd_conn != c ||
		   shca_net_conn_gen(c) != qp->net.rd_gen) {
		qp->net.rd_split = true;
	}
	/* full: more READs outstanding than a requester may have (its
	 * window): dropped, its timer asks again */
	if (is_new ? qp->net.rd_count == SHCA_NET_RD_MAX :
		     !rd_requeue(c, qp, m, len)) {
		count(qp, SHCA_STAT_DROPPED_PKTS);
		return;
	}
	if (is_new)
		rd_fill(rd_at(qp, qp->net.rd_count++), m, qp->net.msn, len);
	qp->net.rd_conn = c;
	qp->net.rd_gen = shca_net_conn_gen(c);
	shca_net_set_drain(rd_drain);
	if (rd_pump(qp, true))
		rd_wait(qp->ibqp.qp_num);
}

static void serve_atomic(struct shca_conn *c, struct shca_qp *qp,
			 struct shca_peer *self, const struct shca_wire_msg *m)
{
	struct shca_xfer_result res;
	struct iovec none = { NULL, 0 };
	struct shca_xfer x;
	unsigned int i;

	xfer_init(&x, qp, m, &none);
	x.opcode = rc_op(m->opcode) == SHCA_OP_RC_COMPARE_SWAP ?
			   IBV_WR_ATOMIC_CMP_AND_SWP :
			   IBV_WR_ATOMIC_FETCH_AND_ADD;
	x.remote_addr = m->va;
	x.rkey = m->rkey;
	x.length = 8;
	x.compare_add = rc_op(m->opcode) == SHCA_OP_RC_COMPARE_SWAP ?
				m->compare : m->swap_add;
	x.swap = m->swap_add;
	key_execute(c, self, &x, &res);
	if (res.outcome != SHCA_XFER_DONE || res.status != IBV_WC_SUCCESS) {
		answer(c, qp, m->psn, &res);
		return;
	}
	qp->net.epsn = shca_psn_add(m->psn, 1);
	qp->net.msn++;
	i = qp->net.atomic_next++ % 16;
	qp->net.atomics[i].psn = m->psn;
	qp->net.atomics[i].orig = res.atomic_orig;
	qp->net.atomics[i].valid = true;
	send_ack(c, qp, SHCA_OP_RC_ATOMIC_ACKNOWLEDGE, m->psn, ACK_OK,
		 res.atomic_orig);
}

/*
 * IBA Annex A19 FLUSH (new or duplicate: carried out again, which
 * changes nothing): every check (responder.c, do_flush), then the
 * answer, an RDMA READ response of no data, after those of earlier READs.
 */
static void serve_flush(struct shca_conn *c, struct shca_qp *qp,
			struct shca_peer *self, const struct shca_wire_msg *m,
			bool is_new)
{
	struct shca_xfer_result res;
	struct iovec none = { NULL, 0 };
	struct shca_xfer x;

	xfer_init(&x, qp, m, &none);
	x.opcode = (enum ibv_wr_opcode)SHCA_WR_FLUSH;
	x.remote_addr = m->va;
	x.rkey = m->rkey;
	x.length = m->dma_len;
	x.flush_type = m->flush_plt;
	x.flush_level = m->flush_sel;
	key_execute(c, self, &x, &res);
	if (res.outcome != SHCA_XFER_DONE || res.status != IBV_WC_SUCCESS) {
		answer(c, qp, m->psn, &res);
		return;
	}
	rd_queue(c, qp, m, 0, is_new);
}

static bool rx_append(struct shca_qp *qp, const struct shca_wire_msg *m)
{
	size_t need = qp->net.rx_len + m->payload_len;

	if (need > SHCA_MAX_MSG_SZ)
		return false;
	if (need > qp->net.rx_cap) {
		size_t cap = qp->net.rx_cap ? qp->net.rx_cap : 16384;
		unsigned char *b;

		while (cap < need)
			cap *= 2;
		b = realloc(qp->net.rx_buf, cap);
		if (!b)
			return false;
		qp->net.rx_buf = b;
		qp->net.rx_cap = cap;
	}
	memcpy(qp->net.rx_buf + qp->net.rx_len, m->payload, m->payload_len);
	qp->net.rx_len = need;
	return true;
}

/* A protocol violation by the requester: NAK invalid request, and the QP
 * goes to error with IBV_EVENT_QP_REQ_ERR (IBA 9.9.3.1.1). */
static void invalid_request(struct shca_conn *c, struct shca_qp *qp,
			    uint32_t psn)
{
	count(qp, SHCA_STAT_DROPPED_PKTS);
	rx_reset(qp);
	if (!rc_like(qp))
		return;
	send_ack(c, qp, SHCA_OP_RC_ACKNOWLEDGE, psn,
		 shca_aeth_syn_nak(SHCA_NAK_INVALID_REQ), 0);
	__atomic_or_fetch(&qp->shm->pending, SHCA_QP_PEND_REQ_ERR,
			  __ATOMIC_ACQ_REL);
	shca_peer_doorbell(shca_peer_self());
}

/* The end of an RC message that was carried out: ACK, or NAK/RNR NAK. */
static void message_done(struct shca_conn *c, struct shca_qp *qp,
			 const struct shca_wire_msg *m, uint32_t first_psn,
			 const struct shca_xfer_result *res)
{
	if (res->outcome == SHCA_XFER_RNR) {
		/* the message is asked for again from its first packet */
		qp->net.epsn = first_psn;
		answer(c, qp, first_psn, res);
		return;
	}
	if (res->outcome == SHCA_XFER_DONE && res->status == IBV_WC_SUCCESS) {
		qp->net.msn++;
		/*
		 * Coalesced (issue 15): the ACK replaces this QP's ACK still
		 * queued last, and goes out when the received batch has been
		 * handed up (conn.c deliver), not later.  A receive
		 * completion is visible before that: an application that
		 * exits on it finds its ACK written by the exit flush, which
		 * waits for the batch (conn.c).
		 */
		if (m->ackreq)
			send_ack_flags(c, qp, SHCA_OP_RC_ACKNOWLEDGE, m->psn,
				       ACK_OK, 0, SHCA_NET_ACK);
		return;
	}
	answer(c, qp, m->psn, res);
}

/*
 * IBA Annex A19 ATOMIC WRITE: a RETH for 8 bytes and 8 bytes of payload
 * (anything else is an invalid request, as a WRITE whose payload does
 * not match its RETH), carried out as on the same host (responder.c,
 * do_atomic_write) and acknowledged like a WRITE.  A duplicate is only
 * acknowledged again (duplicate()): the 8 bytes are not placed twice.
 */
static void serve_atomic_write(struct shca_conn *c, struct shca_qp *qp,
			       struct shca_peer *self,
			       const struct shca_wire_msg *m)
{
	struct shca_xfer_result res;
	struct iovec none = { NULL, 0 };
	struct shca_xfer x;

	if (m->payload_len != 8 || m->dma_len != 8) {
		count(qp, SHCA_STAT_LENGTH_ERR);
		invalid_request(c, qp, m->psn);
		return;
	}
	rx_reset(qp);
	xfer_init(&x, qp, m, &none);
	x.opcode = IBV_WR_ATOMIC_WRITE;
	x.remote_addr = m->va;
	x.rkey = m->rkey;
	x.length = 8;
	memcpy(&x.swap, m->payload, 8);
	qp->net.epsn = shca_psn_add(m->psn, 1);
	key_execute(c, self, &x, &res);
	message_done(c, qp, m, m->psn, &res);
}

/* The middle packets left of qp's WRITE in progress: all but its last. */
static uint32_t write_middles_left(const struct shca_qp *qp)
{
	uint64_t left = qp->net.rx_dma_len - qp->net.rx_len;

	return left ? npkts(left, path_mtu(qp)) - 1 : 0;
}

/*
 * Of those, the ones conn.c may receive straight to their place: up to
 * the next that asks for an ACK (ack_every), which is read the usual way
 * to be answered (a placed frame's BTH must match the expected one, and
 * the placement expects no AckReq).
 */
static uint32_t write_placeable(const struct shca_qp *qp)
{
	/* the next packet's place in its message */
	uint32_t k = (qp->net.epsn - qp->net.rx_first_psn) & SHCA_PSN_MASK;
	uint32_t every = ack_every(path_mtu(qp));
	uint32_t to_ack = every - 1 - k % every;

	return MIN(write_middles_left(qp), to_ack);
}

/* A middle packet of an RC message that asks for an ACK (ack_every) gets
 * one, coalesced with what follows in its batch (the MSN of the last
 * message done: this one is not yet). */
static void middle_ack(struct shca_conn *c, struct shca_qp *qp,
		       const struct shca_wire_msg *m)
{
	if (m->ackreq && rc_like(qp))
		send_ack_flags(c, qp, SHCA_OP_RC_ACKNOWLEDGE, m->psn, ACK_OK,
			       0, SHCA_NET_ACK);
}

/*
 * Admission (docs/security.md "Net admission"): an RC/UC packet is for qp
 * only when it came on a connection whose other end the handshake proved
 * to be qp's destination: the address of its dgid and the slot of its
 * dest_qp_num.  Anything else is dropped before a PSN or a state is
 * looked at, unanswered, and counted for the process: a stranger learns
 * nothing, and the QP goes on.  qp->exec_lock held.
 */
static bool admitted(struct shca_conn *c, struct shca_qp *qp)
{
	const uint8_t *dgid = qp->attr.ah_attr.grh.dgid.raw;
	unsigned int scope;
	uint8_t gid[16];
	uint16_t port;

	/* (not qp->net.on: a peer that may not use CMA on this process
	 * reaches a QP on the same-host path over the net path) */
	return shca_net_conn_proven(c, gid, &scope, &port) &&
	       !memcmp(gid, dgid, 16) &&
	       /* a link-local address names a host on one link only */
	       (!(dgid[0] == 0xfe && (dgid[1] & 0xc0) == 0x80) ||
		scope == to_sctx(qp->ibqp.context)->dev->ifindex) &&
	       port == slot_port(qp->attr.dest_qp_num);
}

/*
 * The access lane a placement holds, from place_where to place_done: the
 * engine's (the thread that reads a connection), which calls one and
 * then the other with nothing in between but the receive (conn.c
 * read_placed), and holds no lane across reads: a peer that stops
 * sending mid-WRITE keeps no deregistration waiting.
 */
static __thread struct shca_lane place_lane;

/*
 * A READ's responses placed (read_place): the requester's own buffers, so
 * the lanes of the WQE's L_Keys (in the QP: qp->net.rd_place_lanes), and
 * the QP's exec_lock from place_where to place_done: a flush
 * (ibv_modify_qp to the error state) waits for the bytes under way, and
 * no byte lands in a buffer after its WQE completed.
 */
static __thread struct shca_qp *rd_place_qp;

/*
 * Where the next middle responses of the READ at the head of qp's send
 * queue go, for conn.c to receive them there (exec_lock held; true: p is
 * filled, the lanes are held, and exec_lock stays held until place_done).
 * The same checks as a response's (completer, place_read): the QP's
 * state, the head WQE and its PSN, its L_Keys; the range within one
 * scatter entry.
 */
static bool read_place(struct shca_conn *c, struct shca_qp *qp,
		       struct shca_net_place *p)
{
	struct iovec iov[MAX_IOV], dst[MAX_IOV];
	unsigned char hdr[HDR_MAX];
	struct shca_wire_msg m;
	struct shca_send_wqe *w;
	uint32_t head, tail, mtu = path_mtu(qp), n;
	int niov;

	w = shca_sq_first(qp, &head, &tail);
	if (!w || head == qp->net.assigned || c != qp->net.conn ||
	    !qp->net.on || (qp->attr.qp_state != IBV_QPS_RTS &&
			    qp->attr.qp_state != IBV_QPS_SQD) ||
	    w->wr.opcode != IBV_WR_RDMA_READ || w->gen || !w->nrecv ||
	    w->nrecv + 1 >= w->npsn || !admitted(c, qp) ||
	    !shca_keyguard_admit_conn(c))
		return false;
	n = w->npsn - 1 - w->nrecv;		/* the middles left */
	if (n < PLACE_MIN)
		return false;
	if (!local_hold(w->sge, MIN(w->wr.num_sge, SHCA_MAX_SGE),
			qp->net.rd_place_lanes, &qp->net.rd_place_nl))
		return false;
	if (shca_stages.wqe_local_iov(qp, w, true, iov, &niov) !=
		    IBV_WC_SUCCESS ||
	    slice(iov, niov, (uint64_t)w->nrecv * mtu, (uint64_t)n * mtu, dst,
		  MAX_IOV) < 1)
		goto no;
	/* the frames that fit in the first scatter entry */
	n = MIN(n, (uint32_t)(dst[0].iov_len / mtu));
	if (n < 2)
		goto no;
	/* the BTH of the next response as a softhca responder builds it
	 * (rd_pump) */
	memset(&m, 0, sizeof(m));
	m.opcode = qp_opcode(qp, SHCA_OP_RC_RDMA_READ_RESPONSE_MIDDLE);
	m.pkey = SHCA_DEFAULT_PKEY;
	m.dqpn = qp->ibqp.qp_num;
	m.psn = shca_psn_add(w->psn, w->nrecv);
	if (shca_wire_build_hdr(hdr, sizeof(hdr), &m) != SHCA_BTH_LEN)
		goto no;
	memcpy(&p->bth, hdr, SHCA_BTH_LEN);
	p->dst = dst[0].iov_base;
	p->mtu = mtu;
	p->count = n;
	rd_place_qp = qp;
	return true;
no:
	local_unhold(qp->net.rd_place_lanes, qp->net.rd_place_nl);
	return false;
}

/*
 * Where the next middle packets of qpn's WRITE in progress go, for conn.c
 * to receive them there (net.h).  Everything a packet would be checked for
 * is checked again here: state, PSN, R_Key, access and bounds; the range
 * is held (place_lane) until place_done.  Or, on the connection that qpn's
 * own requests go on, the middle responses of its READ (read_place).
 */
static void place_where(struct shca_conn *c, uint32_t qpn,
			struct shca_net_place *p)
{
	struct shca_qp *qp = shca_qp_lookup(qpn);
	unsigned char hdr[HDR_MAX];
	struct shca_wire_msg m;
	struct shca_peer *self = shca_peer_self();
	void *dst = NULL;
	uint32_t mtu, n;
	uint64_t va;

	place_lane.lane = NULL;
	rd_place_qp = NULL;
	if (!qp || !self)
		return;
	pthread_mutex_lock(&qp->exec_lock);
	if (read_place(c, qp, p))
		return;		/* exec_lock held until place_done */
	mtu = path_mtu(qp);
	n = write_placeable(qp);
	if (!admitted(c, qp))
		goto out;
	if (!shca_qp_state_can_receive(qp->attr.qp_state) ||
	    shca_qp_shm_failing(qp->shm) || !qp->net.rx_active ||
	    !qp->net.rx_write || n < PLACE_MIN ||
	    qp->ibqp.qp_type != IBV_QPT_RC ||
	    !(qp->attr.qp_access_flags & IBV_ACCESS_REMOTE_WRITE))
		goto out;
	va = qp->net.rx_va + qp->net.rx_len;
	/* the BTH of the next packet as a softhca requester builds it */
	memset(&m, 0, sizeof(m));
	m.opcode = data_opcode(qp, IBV_WR_RDMA_WRITE, 1, 3);
	m.pkey = SHCA_DEFAULT_PKEY;
	m.dqpn = qp->ibqp.qp_num;
	m.psn = qp->net.epsn;
	if (shca_wire_build_hdr(hdr, sizeof(hdr), &m) != SHCA_BTH_LEN)
		goto out;
	/* an MR's or a memory window's, held (an access lane) until
	 * place_done: a deregistration waits until the bytes are in */
	if (shca_stages.hold(self, qp->ibqp.qp_num, qp->pd->prot->obj.handle,
			     qp->net.rx_rkey, IBV_ACCESS_REMOTE_WRITE, va,
			     (uint64_t)n * mtu, &place_lane, &dst))
		goto out;
	memcpy(&p->bth, hdr, SHCA_BTH_LEN);
	p->dst = dst;
	p->mtu = mtu;
	p->count = n;
out:
	pthread_mutex_unlock(&qp->exec_lock);
}

/* conn.c placed n middle responses of the READ at the head of qp's send
 * queue, from psn on (read_place; exec_lock held, let go here). */
static void read_place_done(struct shca_conn *c, struct shca_qp *qp,
			    uint32_t psn, uint32_t n)
{
	struct shca_send_wqe *w;
	uint32_t head, tail;

	local_unhold(qp->net.rd_place_lanes, qp->net.rd_place_nl);
	rd_place_qp = NULL;
	if (!n)
		goto out;
	count_pkts(qp, false, n, (uint64_t)n * (SHCA_BTH_LEN + path_mtu(qp)));
	w = shca_sq_first(qp, &head, &tail);
	/* nothing moved meanwhile (exec_lock was held): the checks of
	 * read_place stand; the frames matched their PSNs */
	if (!w || w->wr.opcode != IBV_WR_RDMA_READ ||
	    shca_psn_add(w->psn, w->nrecv) != psn ||
	    w->nrecv + n + 1 > w->npsn) {
		count(qp, SHCA_STAT_DROPPED_PKTS);
		goto out;
	}
	/* as the completer does for each response placed */
	w->nrecv += n;
	qp->net.rd_gap = false;
	qp->head_retries = 0;
	qp->net.rnr_wait = false;
	arm_ack_timer(qp);
	if (w->npsn - 1 - w->nrecv >= PLACE_MIN)
		shca_net_expect(c, qp->ibqp.qp_num);
out:
	pthread_mutex_unlock(&qp->exec_lock);
}

/* conn.c placed n middle packets of qpn's WRITE from psn on (n 0: none,
 * and place_where's answer is let go all the same), or of a READ's
 * responses (read_place_done). */
static void place_done(struct shca_conn *c, uint32_t qpn, uint32_t psn,
		       uint32_t n)
{
	struct shca_qp *qp;
	uint32_t mtu;

	if (rd_place_qp) {
		read_place_done(c, rd_place_qp, psn, n);
		return;
	}
	/* conn.c is done with the memory: a deregistration may go on (the
	 * lane let go before exec_lock: a LOCAL_INV that holds it may be
	 * waiting for this very lane) */
	shca_stages.unhold(&place_lane);
	if (!n)
		return;
	qp = shca_qp_lookup(qpn);
	if (!qp) {
		shca_stat_add(shca_stat_proc(), SHCA_STAT_DROPPED_PKTS, n);
		return;
	}
	pthread_mutex_lock(&qp->exec_lock);
	mtu = path_mtu(qp);
	count_pkts(qp, false, n, (uint64_t)n * (SHCA_BTH_LEN + mtu));
	if (admitted(c, qp) && shca_qp_state_can_receive(qp->attr.qp_state) &&
	    !shca_qp_shm_failing(qp->shm) && qp->net.rx_active &&
	    qp->net.rx_write && qp->net.epsn == psn &&
	    n <= write_middles_left(qp)) {
		qp->net.epsn = shca_psn_add(psn, n);
		qp->net.rx_len += (uint64_t)n * mtu;
		qp->net.nak_sent = false;
		if (write_placeable(qp) >= PLACE_MIN)
			shca_net_expect(c, qpn);
	} else {
		/* as for any packet out of place: the requester sends it
		 * again (what landed is inside the WRITE's range) */
		shca_stat_add(qp_stats(qp), SHCA_STAT_DROPPED_PKTS, n);
	}
	pthread_mutex_unlock(&qp->exec_lock);
}

/*
 * A packet of an RDMA WRITE: its data go straight to their place (no
 * gathering), the R_Key, access and bounds checked for the RETH's whole
 * range with every packet.  A WRITE with immediate takes its receive WQE
 * with the last packet, as on hardware (an RNR NAK then has the message
 * sent again whole).
 */
static void write_packet(struct shca_conn *c, struct shca_qp *qp,
			 struct shca_peer *self, const struct shca_wire_msg *m,
			 uint32_t first_psn)
{
	uint32_t mask = m->op->mask;
	bool last = mask & SHCA_OPM_LAST;
	uint64_t off = qp->net.rx_len;
	struct shca_xfer_result res;
	struct shca_xfer x;
	struct iovec v = { (void *)m->payload, m->payload_len };

	if (off + m->payload_len > qp->net.rx_dma_len ||
	    (last && off + m->payload_len != qp->net.rx_dma_len)) {
		/* IBA 9.7.5.1.1: the payload must match the RETH's length */
		count(qp, SHCA_STAT_LENGTH_ERR);
		invalid_request(c, qp, m->psn);
		return;
	}
	xfer_init(&x, qp, m, &v);
	x.opcode = last && (mask & SHCA_OPM_IMMDT) ?
			   IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE;
	x.remote_addr = qp->net.rx_va;
	x.rkey = qp->net.rx_rkey;
	x.length = qp->net.rx_dma_len;
	x.partial = true;
	x.part_off = off;
	x.part_len = m->payload_len;
	key_execute(c, self, &x, &res);
	if (!last && res.outcome == SHCA_XFER_DONE &&
	    res.status == IBV_WC_SUCCESS) {
		qp->net.rx_len = off + m->payload_len;
		qp->net.rx_active = true;
		middle_ack(c, qp, m);
		if (write_placeable(qp) >= PLACE_MIN)
			shca_net_expect(c, qp->ibqp.qp_num);
		return;
	}
	rx_reset(qp);
	if (rc_like(qp))
		message_done(c, qp, m, first_psn, &res);
}

/* SEND and WRITE packets at the expected PSN. */
static void data_packet(struct shca_conn *c, struct shca_qp *qp,
			struct shca_peer *self, const struct shca_wire_msg *m)
{
	uint32_t mask = m->op->mask;
	bool write = mask & SHCA_OPM_WRITE;
	struct shca_xfer_result res;
	struct shca_xfer x;
	struct iovec v;
	uint32_t first_psn;

	if (mask & SHCA_OPM_FIRST) {
		rx_reset(qp);
		qp->net.rx_first_psn = m->psn;
		qp->net.rx_write = write;
		qp->net.rx_xrc_srqn = m->xrc_srqn;
		if (write) {
			qp->net.rx_va = m->va;
			qp->net.rx_rkey = m->rkey;
			qp->net.rx_dma_len = m->dma_len;
		}
	} else if (!qp->net.rx_active || qp->net.rx_write != write ||
		   m->xrc_srqn != qp->net.rx_xrc_srqn) {
		/* a MIDDLE or LAST without its FIRST (XRC: or naming
		 * another SRQ than its FIRST) */
		invalid_request(c, qp, m->psn);
		return;
	}
	first_psn = qp->net.rx_first_psn;
	qp->net.epsn = shca_psn_add(m->psn, 1);
	if (write) {
		write_packet(c, qp, self, m, first_psn);
		return;
	}
	/* a SEND is gathered: its receive WQE is taken with the whole */
	if (!(mask & SHCA_OPM_LAST)) {
		if (!rx_append(qp, m)) {
			invalid_request(c, qp, m->psn);
			return;
		}
		qp->net.rx_active = true;
		middle_ack(c, qp, m);
		return;
	}
	if (mask & SHCA_OPM_FIRST) {
		v.iov_base = (void *)m->payload;
		v.iov_len = m->payload_len;
	} else {
		if (!rx_append(qp, m)) {
			invalid_request(c, qp, m->psn);
			return;
		}
		v.iov_base = qp->net.rx_buf;
		v.iov_len = qp->net.rx_len;
	}
	xfer_init(&x, qp, m, &v);
	x.opcode = (mask & SHCA_OPM_IMMDT) ? IBV_WR_SEND_WITH_IMM :
		   (mask & SHCA_OPM_IETH)  ? IBV_WR_SEND_WITH_INV :
					     IBV_WR_SEND;
	x.inv_rkey = m->inv_rkey;
	x.length = v.iov_len;
	/* a RNDV that matches a tag: this QP reads the data (gen_start),
	 * while it has a rendezvous slot */
	if (gen_slot(qp) >= 0) {
		x.rndv_read = gen_start;
		x.rndv_ctx = qp;
	}
	key_execute(c, self, &x, &res);
	rx_reset(qp);
	if (rc_like(qp))
		message_done(c, qp, m, first_psn, &res);
	/* what gen_start queued goes out (after the SEND's ACK) */
	if (x.rndv_read)
		rc_execute(qp);
}

/* A duplicate RC request (PSN before the expected one). */
static void duplicate(struct shca_conn *c, struct shca_qp *qp,
		      struct shca_peer *self, const struct shca_wire_msg *m)
{
	unsigned int i;

	count(qp, SHCA_STAT_DUPLICATE_REQUEST);
	if (m->op->mask & SHCA_OPM_READ_REQ) {
		serve_read(c, qp, self, m, false);
		return;
	}
	if (m->op->mask & SHCA_OPM_FLUSH) {
		serve_flush(c, qp, self, m, false);
		return;
	}
	if (m->op->mask & SHCA_OPM_ATOMIC) {
		for (i = 0; i < 16; i++)
			if (qp->net.atomics[i].valid &&
			    qp->net.atomics[i].psn == m->psn)
				send_ack(c, qp, SHCA_OP_RC_ATOMIC_ACKNOWLEDGE,
					 m->psn, ACK_OK,
					 qp->net.atomics[i].orig);
		return;
	}
	/* IBA 9.7.5.1.2: ACK again, with the latest PSN done */
	if (m->ackreq || (m->op->mask & SHCA_OPM_LAST))
		send_ack(c, qp, SHCA_OP_RC_ACKNOWLEDGE,
			 shca_psn_add(qp->net.epsn, SHCA_PSN_MASK), ACK_OK, 0);
}

static void responder(struct shca_conn *c, struct shca_qp *qp,
		      const struct shca_wire_msg *m)
{
	struct shca_peer *self = shca_peer_self();
	bool rc = rc_like(qp);
	int32_t d;

	if (!self || !shca_qp_state_can_receive(qp->attr.qp_state) ||
	    shca_qp_shm_failing(qp->shm)) {
		count(qp, SHCA_STAT_DROPPED_PKTS);
		return;
	}
	d = shca_psn_diff(m->psn, qp->net.epsn);
	if (d < 0 && rc) {
		duplicate(c, qp, self, m);
		return;
	}
	if (d < 0) {
		/* UC: a packet behind the expected PSN (duplicated, or
		 * overtaken by later ones) was dealt with or is lost: drop
		 * it, and the message in progress goes on.  Only a packet
		 * ahead may start a new message: UC delivers a message at
		 * most once, in order. */
		count(qp, SHCA_STAT_DUPLICATE_REQUEST);
		return;
	}
	if (d != 0) {
		count(qp, SHCA_STAT_OUT_OF_SEQ_REQUEST);
		if (rc) {
			/* IBA 9.7.5.1.2: one NAK until the expected PSN */
			if (!qp->net.nak_sent) {
				count(qp, SHCA_STAT_SEND_SEQ_ERR);
				send_ack(c, qp, SHCA_OP_RC_ACKNOWLEDGE,
					 qp->net.epsn,
					 shca_aeth_syn_nak(SHCA_NAK_PSN_SEQ_ERR),
					 0);
				qp->net.nak_sent = true;
			}
			return;
		}
		/* UC: the message in progress is lost; a new one may start
		 * here (IBA 9.7.5.1.3) */
		rx_reset(qp);
		if (!(m->op->mask & SHCA_OPM_FIRST))
			return;
	}
	qp->net.nak_sent = false;
	if (m->op->mask & SHCA_OPM_READ_REQ)
		serve_read(c, qp, self, m, true);
	else if (m->op->mask & SHCA_OPM_ATOMIC)
		serve_atomic(c, qp, self, m);
	else if (m->op->mask & SHCA_OPM_FLUSH)
		serve_flush(c, qp, self, m, true);
	else if (m->op->mask & SHCA_OPM_ATOMIC_WRITE)
		serve_atomic_write(c, qp, self, m);
	else
		data_packet(c, qp, self, m);
}

/* A UD datagram for one QP. */
static void ud_deliver(uint32_t qpn, const struct shca_net_addr *addr,
		       const struct shca_wire_msg *m, struct shca_peer *self)
{
	struct ibv_global_route dst;
	union ibv_gid sgid;
	uint8_t grh[SHCA_GRH_LEN];
	struct shca_xfer_result res;
	struct shca_xfer x;
	struct iovec v;

	memset(&dst, 0, sizeof(dst));
	memcpy(dst.dgid.raw, addr->dst, 16);
	memcpy(sgid.raw, addr->src, 16);
	shca_stages.build_grh(grh, &sgid, &dst, m->payload_len);
	memset(&x, 0, sizeof(x));
	x.qp_type = IBV_QPT_UD;
	x.src_qpn = m->sqpn;
	x.dest_qpn = qpn;
	x.qkey = m->qkey;
	x.opcode = (m->op->mask & SHCA_OPM_IMMDT) ? IBV_WR_SEND_WITH_IMM :
						     IBV_WR_SEND;
	x.solicited = m->se;
	x.imm_data = m->imm_be;
	v.iov_base = (void *)m->payload;
	v.iov_len = m->payload_len;
	x.local = &v;
	x.nlocal = m->payload_len ? 1 : 0;
	x.length = m->payload_len;
	x.grh = grh;
	count_pkts(shca_qp_lookup(qpn), false, 1,
		   (uint64_t)m->op->hdr_len + m->payload_len + m->pad);
	shca_stages.respond(self, &x, &res);
	if (res.bad_key)
		shca_keyguard_strike_src(addr, qpn);
}

static void ud_receive(const struct shca_net_addr *addr,
		       const struct shca_wire_msg *m)
{
	struct shca_peer *self = shca_peer_self();
	const struct shca_slot *s = shca_slot_get();

	if (!self || !s)
		return;
	if (m->dqpn == 0xffffff) {
		struct shca_mcast_member mem[64];
		union ibv_gid g;
		int n, i;

		/* a sender on this host delivered to this host's members
		 * itself (the host table); over lo its datagram loops back */
		memcpy(g.raw, addr->src, 16);
		if (shca_gid_is_local(&g))
			return;
		memcpy(g.raw, addr->dst, 16);
		n = shca_host_mcast_members(&g, mem, 64);
		for (i = 0; i < n; i++)
			if (mem[i].slot == s->slot)
				ud_deliver(mem[i].qpn, addr, m, self);
		return;
	}
	ud_deliver(m->dqpn, addr, m, self);
}

void shca_net_rx(struct shca_conn *c, const struct shca_net_addr *addr,
		 const void *pkt, size_t len)
{
	struct shca_wire_msg m;
	struct shca_qp *qp;
	enum shca_wire_transport tp;

	if (shca_wire_parse(pkt, len, &m)) {
		count(NULL, SHCA_STAT_DROPPED_PKTS);
		return;
	}
	tp = (enum shca_wire_transport)m.op->transport;
	if (tp == SHCA_TP_UD) {
		/* UD travels in datagrams only */
		if (c || !(m.op->mask & SHCA_OPM_DETH) ||
		    m.payload_len > SHCA_MAX_UD_MSG)
			count(NULL, SHCA_STAT_DROPPED_PKTS);
		else if (shca_keyguard_admit_src(addr))
			ud_receive(addr, &m);
		return;
	}
	if (!c) {
		count(NULL, SHCA_STAT_DROPPED_PKTS);
		return;
	}
	/* a peer over the key limit: nothing of it is carried out */
	if (!shca_keyguard_admit_conn(c))
		return;
	qp = shca_qp_lookup(m.dqpn);
	/* XRC: requests go to XRC_RECV QPs, answers to XRC_SEND ones */
	if (!qp || tp != qp_wire_tp(qp) || qp->ibqp.qp_type == IBV_QPT_UD ||
	    (qp->ibqp.qp_type == IBV_QPT_XRC_SEND &&
	     !(m.op->mask & SHCA_OPM_RESP)) ||
	    (qp->ibqp.qp_type == IBV_QPT_XRC_RECV &&
	     (m.op->mask & SHCA_OPM_RESP))) {
		count(NULL, SHCA_STAT_DROPPED_PKTS);
		return;
	}
	pthread_mutex_lock(&qp->exec_lock);
	/* the path MTU under exec_lock: ibv_modify_qp may be setting it */
	if (shca_wire_check_qp(&m, tp, path_mtu(qp))) {
		pthread_mutex_unlock(&qp->exec_lock);
		count(NULL, SHCA_STAT_DROPPED_PKTS);
		return;
	}
	if (!admitted(c, qp)) {
		pthread_mutex_unlock(&qp->exec_lock);
		shca_stat_add(shca_stat_proc(), SHCA_STAT_NET_ADMIT_DROPS, 1);
		return;
	}
	count_pkts(qp, false, 1, len);
	if (m.op->mask & SHCA_OPM_RESP) {
		/* answers come back on the QP's own connection only */
		if (qp->net.on && qp->net.conn == c)
			completer(qp, &m);
		else
			count(qp, SHCA_STAT_DROPPED_PKTS);
	} else {
		responder(c, qp, &m);
	}
	pthread_mutex_unlock(&qp->exec_lock);
	if (key_abort_after) {
		/* after its NAK was queued: it goes out first */
		key_abort_after = NULL;
		shca_net_conn_abort(c);
	}
}
