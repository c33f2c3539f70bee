// SPDX-License-Identifier: MIT
/*
 * The responder: the rules a responder NIC applies to a request that
 * reached one of this host's QPs, whichever transport carried it.  The
 * same-host transport runs them in the requester's process against the
 * responder's arena and memory (shm/xfer.c: "the requester does the DMA");
 * the net transport runs them in the responder's own process, against
 * itself as its own peer, once a message has arrived whole
 * (net/transport.c).  Both reach them through engine/xport.h.
 *
 * Every check is made against the responder's arena before its memory is
 * touched: QP number, type and state, Q_Key, receive WQE, the R_Key /
 * L_Key, PD, access rights and bounds in its MR table.
 *
 * What the responder must do afterwards (report a completion event, raise
 * an async event, move its QP to the error state) is left in its arena as a
 * *_pending word and its engine is woken with the doorbell.
 */
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <infiniband/tm_types.h>

#include "../common/log.h"
#include "../common/slot.h"
#include "../common/tblock.h"
#include "../common/util.h"
#include "../common/verbs_ext.h"
#include "../shm/arena.h"
#include "../shm/host.h"
#include "../shm/mem.h"
#include "../shm/peer.h"
#include "../shm/queues.h"
#include "engine.h"
#include "tm_rx.h"
#include "xport.h"

#define MAX_IOV 64

/*
 * Has the peer's process gone?  A hang-up of its socket says so (the
 * engine marks the peer dead), and so does a failed process_vm_*v; when a
 * request moves no data it makes no such call, and a forked child of the
 * peer may hold the socket open: its life word says (arena.h, no system
 * call), or, while its engine thread has not taken it yet, the kernel.
 */
static bool peer_gone(struct shca_peer *p)
{
	if (shca_peer_dead(p))
		return true;
	if (p->self)
		return false;
	if (p->life && shca_arena_life_died(p->life))
		goto gone;
	if ((p->life && shca_arena_life_held(p->life)) || !kill(p->pid, 0) ||
	    errno != ESRCH)
		return false;
gone:
	shca_peer_set_dead(p);
	return true;
}

/* No access lane came free (mem.h): as if the responder had not answered;
 * UC and UD lose the message. */
static void lanes_busy(struct shca_xfer_result *res, const struct shca_xfer *x)
{
	res->outcome = x->qp_type == IBV_QPT_RC ? SHCA_XFER_NO_RESPONSE :
						  SHCA_XFER_DONE;
}

static void qp_pending(struct shca_peer *p, struct shca_qp_shm *q,
		       uint32_t bits)
{
	__atomic_or_fetch(&q->pending, bits, __ATOMIC_ACQ_REL);
	shca_peer_doorbell(p);
}

/*
 * An invalid R_Key (or, UD, Q_Key) reached the responder's QP: counted
 * there, whoever carries the request out (the requester on this host, or
 * the net path's responder), and reported to the net path, which limits
 * how many a connection may send (net/keyguard.c).
 */
static void bad_key(struct shca_qp_shm *q, struct shca_xfer_result *res,
		    enum shca_stat what)
{
	shca_stat_add(&q->stats, what, 1);
	res->bad_key = true;
}

static struct shca_qp_shm *lookup_qp(struct shca_peer *p, uint32_t qpn)
{
	uint64_t *tbl = shca_arena_qp_table(p->arena);
	struct shca_qp_shm *q;
	uint64_t off;

	off = __atomic_load_n(&tbl[qpn & (SHCA_ARENA_QP_ENTRIES - 1)],
			      __ATOMIC_ACQUIRE);
	q = shca_arena_ptr(p->arena, p->arena_size, off, sizeof(*q));
	if (!q || __atomic_load_n(&q->qpn, __ATOMIC_ACQUIRE) != qpn)
		return NULL;
	return q;
}

/*
 * The arena slot of key's entry: an MR's key is in the key index whole,
 * a memory window's by its prefix (tag 0, verbs/mw.c).  Both are bounded
 * look-ups in the responder's bytes; the caller checks the entry's key.
 */
/* lookup_key's len for "any range": FLUSH of a whole region */
#define LOOKUP_WHOLE_MR UINT64_MAX

static struct shca_mr_shm *key_slot(struct shca_peer *p, uint32_t key)
{
	uint32_t slot = shca_mr_index_find(p->arena, p->arena_size, key);

	if (!slot)
		slot = shca_mr_index_find(p->arena, p->arena_size,
					  key & ~0xffu);
	return shca_mr_table_entry(p->arena, p->arena_size, slot);
}

/*
 * The MR table entries this thread read last, one per few bits of the
 * key: where key's entry lies in p's arena and what it said there.  Used
 * again, with no look-up in the key index and no copy of the entry, while
 * the entry's seq and key word are still what they were: the owner
 * rewrites an entry only between two increments of seq (a deregistration
 * and a rereg too), and the one word a peer writes, a window's key, goes
 * to 0 by a CAS (remote_invalidate).  Read under the caller's lane, as the
 * entry itself is, so a deregistration that cleared the entry before the
 * lane was claimed is seen, and one after it waits for the lane.  A peer
 * object is never freed nor given to another process (shm/peer.h), and
 * its arena stays mapped while we hold it: the slot pointer stays ours to
 * read.  What a hostile owner gains by rewriting its entry behind an
 * unmoved seq: the access it allowed before, in its own memory.
 */
#define KEYS_SEEN 4

struct key_seen {
	const struct shca_peer *p;
	const struct shca_mr_shm *slot;
	struct shca_mr_shm e;		/* e.seq: the seq it was read at */
};

/* this thread's, in a block of its own (common/tblock.h) */
static __thread struct key_seen *keys_seen;

/* key's place in this thread's cache; NULL: no memory for one */
static struct key_seen *key_seen_at(uint32_t key)
{
	struct key_seen *ks = keys_seen ? keys_seen :
				shca_tblock_get((void **)&keys_seen,
						KEYS_SEEN * sizeof(*ks));

	return ks ? &ks[(key ^ key >> 8) & (KEYS_SEEN - 1)] : NULL;
}

/* key's entry in p's arena as this thread read it last (k, its place in
 * the cache), if unchanged */
static bool key_seen(const struct key_seen *k, const struct shca_peer *p,
		     uint32_t key, struct shca_mr_shm *e)
{
	if (!k || k->p != p || k->e.key != key ||
	    __atomic_load_n(&k->slot->seq, __ATOMIC_ACQUIRE) != k->e.seq ||
	    __atomic_load_n(&k->slot->key, __ATOMIC_ACQUIRE) != key)
		return false;
	*e = k->e;
	return true;
}

/* lookup_key's reading of key's entry, under the lane the caller holds:
 * through QP q (its qpn read only for a type 2 window: q's record may be
 * changing), or, q NULL, through the QP numbered qpn. */
static int key_entry(struct shca_peer *p, const struct shca_qp_shm *q,
		     uint32_t qpn, uint32_t pd, uint32_t key, uint32_t access,
		     uint64_t addr, uint64_t len, bool remote, bool note,
		     uint64_t *va)
{
	struct key_seen *k = key_seen_at(key);
	struct shca_mr_shm e, *slot;

	if (!key_seen(k, p, key, &e)) {
		slot = key_slot(p, key);
		if (!slot || !shca_mr_shm_read(slot, &e) || e.key != key)
			return -ENOKEY;
		if (k)
			*k = (struct key_seen){ p, slot, e };
	}
	if (e.pd != pd)
		return -ENOKEY;
	if ((e.flags & SHCA_MR_SHM_MW) &&
	    (!remote || ((e.flags & SHCA_MR_SHM_MW_QP) &&
			 e.qpn != (q ? q->qpn : qpn))))
		return -ENOKEY;
	if (note)
		shca_mem_note(p, &e);
	if ((e.access & access) != access)
		return -EACCES;
	if (len == LOOKUP_WHOLE_MR) {
		*va = e.addr;
		return 0;
	}
	if (e.iova + e.length < e.iova ||
	    !shca_range_ok(addr, len, e.iova, e.iova + e.length))
		return -EACCES;
	*va = e.addr + (addr - e.iova);
	/* ODP: a page that is not mapped cannot be faulted in, as a NIC
	 * finds out (docs/dm-odp.md) */
	if ((e.access & IBV_ACCESS_ON_DEMAND) &&
	    !shca_mem_present(p, *va, len,
			      access & (IBV_ACCESS_LOCAL_WRITE |
					IBV_ACCESS_REMOTE_WRITE |
					IBV_ACCESS_REMOTE_ATOMIC)))
		return -EACCES;
	return 0;
}

/*
 * The responder's MR or memory window for key, reached through QP q: PD,
 * access and [addr, addr + len) in its iova space.  A window is an R_Key
 * only (remote), with its own rights and bounds (its binding lies within
 * its MR, checked at the bind: verbs/mw.c), and a type 2 window is
 * reached only through the QP it is bound to.  On success *va is the
 * responder's virtual address of addr.  -ENOKEY when nothing of the PD
 * has the key for this use (unknown, deregistered, invalidated, another
 * PD's or QP's: what guessing produces), -EACCES when the access or the
 * range is wrong, -EBUSY when no access lane came free (the lane is
 * claimed before the entry is read: mem.h).  The key index and the table
 * are the responder's bytes: both look-ups are bounded (shm/mrkey.c).
 */
static int lookup_key(struct shca_peer *p, const struct shca_qp_shm *q,
		      uint32_t pd, uint32_t key, uint32_t access,
		      uint64_t addr, uint64_t len, bool remote, uint64_t *va)
{
	if (!key || key == UINT32_MAX)
		return -ENOKEY;
	if (shca_mem_claim(p, key))
		return -EBUSY;
	return key_entry(p, q, 0, pd, key, access, addr, len, remote, true,
			 va);
}

/*
 * The net path's own accesses of this process's registered memory that
 * outlast a request's checks (net/transport.c: the READ responses, read
 * packet by packet; a WRITE's middle packets received straight into
 * place): R_Key key, through QP qpn of PD pd (its identity in the
 * arena), with access over [addr, addr + len), as lookup_mr checks it,
 * under a lane of p (this process's arena) claimed before the entry is
 * read and held in *lane until the caller puts it back after its last
 * byte (shca_respond_unhold): ibv_dereg_mr, a rereg, a window's
 * invalidation or deallocation clear the entry and then wait for it
 * (shm/seg.c), so once they return the net path neither reads nor
 * writes the old range.  Apart from the thread's access in progress
 * (shm/mem.h): a caller inside one loses nothing.  0 with *va, the
 * address here; or -ENOKEY, -EACCES, -EBUSY, and no lane held.
 */
int shca_respond_hold(struct shca_peer *p, uint32_t qpn, uint32_t pd,
		      uint32_t key, uint32_t access, uint64_t addr,
		      uint64_t len, struct shca_lane *lane, void **va)
{
	uint64_t a;
	int ret;

	lane->lane = NULL;
	if (!p || !p->self || !key || key == UINT32_MAX)
		return -ENOKEY;
	if (shca_mem_lane_take(p, key, lane))
		return -EBUSY;
	ret = key_entry(p, NULL, qpn, pd, key, access, addr, len, true, false,
			&a);
	if (ret) {
		shca_mem_lane_put(lane);
		return ret;
	}
	*va = (void *)(uintptr_t)a;
	return 0;
}

void shca_respond_unhold(struct shca_lane *lane)
{
	shca_mem_lane_put(lane);
}

/*
 * The net path's responder reaches its own MR by address (the peer is
 * this process, x->count_resp unset: net/transport.c): a page of it that
 * the program unmapped or protected since registration would fault in
 * this process; it is the remote access error a peer's CMA copy reports
 * (docs/conformance.md, "A page that faults").  ODP MRs were checked by
 * lookup_key; a WRITE's packets after its first are not asked again (a
 * page unmapped meanwhile is the program's race, as with any buffer in
 * use).  Where the question costs more than one system call (Linux
 * before 5.14: mr_range.c), it is not asked.  True: the page faults.
 */
static bool net_page_fault(struct shca_peer *p, const struct shca_xfer *x,
			   uint32_t access, uint64_t len, uint64_t va)
{
	if (!p->self || x->count_resp || shca_mem_odp() ||
	    (x->partial && x->part_off) || len == LOOKUP_WHOLE_MR)
		return false;
	return shca_mem_faults(p, va, len,
			       access & (IBV_ACCESS_REMOTE_WRITE |
					 IBV_ACCESS_REMOTE_ATOMIC));
}

/*
 * An L_Key of the owner p's MR in its PD pd (its identity in p's arena),
 * used by a process that imported that PD (verbs/import_key.c): an MR
 * only, with its local rights and bounds, under the caller's access
 * (mem.h: begun, and ended after the copy).
 */
int shca_owner_lkey(struct shca_peer *p, uint32_t pd, uint32_t key,
		    uint32_t access, uint64_t addr, uint64_t len, uint64_t *va)
{
	return lookup_key(p, NULL, pd, key, access, addr, len, false, va);
}

/* An R_Key of a request that came through QP q. */
static int lookup_mr(struct shca_peer *p, const struct shca_qp_shm *q,
		     uint32_t key, uint32_t access, uint64_t addr,
		     uint64_t len, uint64_t *va)
{
	return lookup_key(p, q, q->pd, key, access, addr, len, true, va);
}

/*
 * The access in progress goes back from another process that shares q's
 * PD (shared_key) to p; nothing when it stayed p's.
 */
static void owner_end(struct shca_peer *p, struct shca_peer *mp)
{
	if (mp == p)
		return;
	shca_mem_end(mp);
	shca_mem_begin(p);
	shca_peer_release(mp);
}

/* shared_key's question to one process: the one in slot if it is pid,
 * its PD of identity pd there. */
static int sharer_key(struct shca_peer *p, uint32_t slot, uint32_t pid,
		      uint32_t pd, uint32_t key, uint32_t access, uint64_t addr,
		      uint64_t len, bool remote, struct shca_peer **mp,
		      uint64_t *va)
{
	struct shca_peer *o = pid ? shca_peer_get((int)slot) : NULL;
	int ret;

	if (!o || o == p || (uint32_t)o->pid != pid || !shca_peer_hold(o))
		return -ENOKEY;
	shca_mem_end(p);
	shca_mem_begin(o);
	ret = lookup_key(o, NULL, pd, key, access, addr, len, remote, va);
	if (ret) {
		owner_end(p, o);
		return ret;
	}
	*mp = o;
	return 0;
}

/*
 * key as one of another process that shares q's PD (docs/import.md): on
 * hardware the PD is one object, so a QP answers the keys of every MR of
 * it, whichever process registered it.  Asked in turn: the process q's
 * PD was imported from (q's imp words, "The owner's R_Keys"), then each
 * process that imported q's PD from p (p's table of importers,
 * shca_pd_imp_shm: "The importer's R_Keys"), with the PD's identity in
 * each.  remote: an R_Key (an MR's or a type 1 window's, remote rights);
 * else an L_Key (an MR's, local rights).  The access in progress moves
 * to that process (p's lanes released: none of p's memory is used), its
 * lane claimed and its entry checked as any key's (PD identity, access,
 * bounds).  0 with *mp that process (held, the access its; owner_end
 * after the last byte), *mpd the PD's identity there and *va; or
 * lookup_key's errors, -ENOKEY when nobody that shares the PD has the
 * key.  The imp words and the table are p's bytes: they only say whom to
 * ask, and that process's own entry decides.
 */
static int shared_key(struct shca_peer *p, const struct shca_qp_shm *q,
		      uint32_t key, uint32_t access, uint64_t addr,
		      uint64_t len, bool remote, struct shca_peer **mp,
		      uint32_t *mpd, uint64_t *va)
{
	uint32_t pd = __atomic_load_n(&q->imp_pd, __ATOMIC_RELAXED);
	struct shca_pd_imp_shm *t, e;
	unsigned int i;
	int ret;

	ret = sharer_key(p, __atomic_load_n(&q->imp_slot, __ATOMIC_RELAXED),
			 __atomic_load_n(&q->imp_pid, __ATOMIC_RELAXED), pd,
			 key, access, addr, len, remote, mp, va);
	if (!ret)
		*mpd = pd;
	t = shca_arena_pd_imps(p->arena, p->arena_size);
	for (i = 0; t && ret == -ENOKEY && i < SHCA_ARENA_PD_IMPS; i++) {
		if (!shca_pd_imp_shm_read(&t[i], &e) || e.pd != q->pd)
			continue;
		ret = sharer_key(p, e.slot, e.pid, e.shadow, key, access, addr,
				 len, remote, mp, va);
		if (!ret)
			*mpd = e.shadow;
	}
	return ret;
}

/*
 * A Send with Invalidate's R_Key (IBA 9.4.4.1, 10.6.7.2.5): it must name
 * a valid type 2 window of the QP's PD bound to this QP (a type 1 window
 * or an MR cannot be invalidated so: o10-37.2.26).  The window ends with
 * a CAS of its entry's key to 0, the one word of the entry a peer writes
 * (arena.h); the owner's own record reads it (mw.c).  0 or -EINVAL.
 */
static int remote_invalidate(struct shca_peer *p, const struct shca_qp_shm *q,
			     uint32_t rkey)
{
	struct shca_mr_shm e, *slot;
	uint32_t expect = rkey;

	if (!rkey || rkey == UINT32_MAX)
		return -EINVAL;
	slot = key_slot(p, rkey);
	if (!slot || !shca_mr_shm_read(slot, &e) || e.key != rkey ||
	    e.pd != q->pd || !(e.flags & SHCA_MR_SHM_MW_QP) ||
	    e.qpn != q->qpn)
		return -EINVAL;
	if (!__atomic_compare_exchange_n(&slot->key, &expect, 0, false,
					 __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
		return -EINVAL;
	return 0;
}

/*
 * Put a completion in the responder's receive CQ.  false when the CQ
 * overran (or had overrun before): the completion is lost, and the CQ's
 * owner moves the QPs that use it to the error state (IBA o11-5.2.2).
 */
static bool resp_complete_tm(struct shca_peer *p, struct shca_qp_shm *q,
			     const struct ibv_wc *wc, bool solicited,
			     const struct shca_tm_rx *t)
{
	struct shca_cq_shm *cq = shca_arena_ptr(p->arena, p->arena_size,
						q->rcq_off, sizeof(*cq));
	struct ibv_wc tw;
	int r;

	if (!cq)
		return false;
	if (shca_tm_rx_tagged(t) && shca_cqe_has_tm(wc)) {
		tw = *wc;
		shca_cqe_tm_pack(&tw, t->tag, t->app_ctx);
		wc = &tw;
	}
	r = shca_cqshm_push(p->arena, p->arena_size, cq, wc, solicited);
	if (r == SHCA_CQ_FIRED) {
		shca_peer_notify_cq(p, cq);
	} else if (r == SHCA_CQ_OVERRUN) {
		__atomic_store_n(&cq->overflow_pending, 1, __ATOMIC_RELEASE);
		shca_peer_doorbell(p);
	}
	return r == SHCA_CQ_PUSHED || r == SHCA_CQ_FIRED;
}

/*
 * A UD receive on a RoCE v2 port reports in wc.sl which network header
 * the first 40 bytes hold (IBA A17.4.5.1: "a flag that indicates if the
 * received frame is an IPv4, IPv6 or RoCE packet"), as mlx5 does (its
 * CQE's roce_pkt_type: 0 GRH of RoCE v1, 1 IPv6, 2 IPv4) and hns does:
 * UCX's ud_verbs reads it to find the destination address in the GRH and
 * drops the packet otherwise.  rxe leaves it 0 (the kernel reports the
 * type in ib_wc.network_hdr_type, which ibv_wc does not carry).
 */
static uint8_t roce_l3_type(const uint8_t *grh)
{
	if (!grh)
		return 0;
	if (grh[0] >> 4 == 6)
		return 1;
	return grh[20] >> 4 == 4 ? 2 : 0;
}

static void resp_wc(struct ibv_wc *wc, const struct shca_xfer *x,
		    const struct shca_qp_shm *q, uint64_t wr_id,
		    enum ibv_wc_status status, uint32_t byte_len)
{
	memset(wc, 0, sizeof(*wc));
	wc->wr_id = wr_id;
	wc->status = status;
	wc->opcode = x->opcode == IBV_WR_RDMA_WRITE_WITH_IMM ?
		     IBV_WC_RECV_RDMA_WITH_IMM : IBV_WC_RECV;
	wc->byte_len = byte_len;
	wc->qp_num = q->qpn;
	wc->src_qp = x->src_qpn;
	if (x->opcode == IBV_WR_SEND_WITH_IMM ||
	    x->opcode == IBV_WR_RDMA_WRITE_WITH_IMM) {
		wc->wc_flags |= IBV_WC_WITH_IMM;
		wc->imm_data = x->imm_data;
	}
	if (x->opcode == IBV_WR_SEND_WITH_INV && status == IBV_WC_SUCCESS) {
		wc->wc_flags |= IBV_WC_WITH_INV;
		wc->invalidated_rkey = x->inv_rkey;
	}
	if (x->qp_type == IBV_QPT_UD) {
		wc->wc_flags |= IBV_WC_GRH;
		wc->sl = roce_l3_type(x->grh);
	}
}

/* RC: the requester's status and the responder's fate for an error
 * (pend 0: the QP was marked already, fail_wqe). */
static void fail_rc(struct shca_xfer_result *res, struct shca_peer *p,
		    struct shca_qp_shm *q, enum ibv_wc_status status,
		    uint32_t pend)
{
	/* a dead process NAKs nothing: its QPs are gone */
	if (peer_gone(p)) {
		res->outcome = SHCA_XFER_NO_RESPONSE;
		return;
	}
	res->outcome = SHCA_XFER_DONE;
	res->status = status;
	if (pend)
		qp_pending(p, q, pend);
}

/*
 * The R_Key of request x for access over len bytes from its remote
 * address (o9-20 and o10-37: the QP's remote rights, then the key's):
 * true with *va and *mp, the process whose memory it is (p, or another
 * process that shares q's PD: shared_key; owner_end after the access);
 * false with res saying why: no access lane came free (the requester
 * tries again), or a remote access error (RC; a UC responder drops the
 * message), an unknown key counted as one.
 */
static bool remote_key(struct shca_peer *p, struct shca_qp_shm *q,
		       const struct shca_xfer *x, struct shca_xfer_result *res,
		       uint32_t access, uint64_t len, uint64_t *va,
		       struct shca_peer **mp)
{
	uint32_t mpd;
	int ret = (q->access & access) == access ?
			  lookup_mr(p, q, x->rkey, access, x->remote_addr,
				    len, va) :
			  -EACCES;

	*mp = p;
	if (ret == -ENOKEY)
		ret = shared_key(p, q, x->rkey, access, x->remote_addr, len,
				 true, mp, &mpd, va);
	if (!ret && net_page_fault(*mp, x, access, len, *va)) {
		owner_end(p, *mp);
		*mp = p;
		ret = -EACCES;
	}

	if (ret == -ENOKEY)
		bad_key(q, res, SHCA_STAT_INVALID_RKEY);
	if (ret == -EBUSY)
		lanes_busy(res, x);
	else if (ret && x->qp_type == IBV_QPT_RC)
		fail_rc(res, p, q, IBV_WC_REM_ACCESS_ERR,
			SHCA_QP_PEND_ACCESS_ERR);
	return !ret;
}

/*
 * Build the responder's scatter list for len bytes from a receive WQE:
 * every SGE needs its L_Key, the receive queue's PD (an SRQ's own, not
 * the QP's) and local write.  The keys of a QP's own receive queue may
 * all be another process's that shares its PD (docs/import.md: the
 * importer's poster names them as they are when none is its own): the
 * first that p lacks moves the access to that process (shared_key), and
 * every SGE must then be of it.  *mp is whose memory the list is (p, or
 * that process: owner_end after the write); on an error the access is
 * p's again.  An SRQ's WQEs naming another process's keys carry a bounce
 * buffer instead (verbs/import_key.c).
 */
static int build_scatter(struct shca_peer *p, struct shca_qp_shm *q,
			 const struct shca_recv_wqe_shm *w, uint32_t nsge,
			 uint64_t len, struct iovec *iov, int *niov,
			 struct shca_peer **mp)
{
	uint64_t left = len;
	uint32_t i, mpd = 0;
	int n = 0, ret = 0;

	*mp = p;
	for (i = 0; i < nsge && left; i++) {
		const struct ibv_sge *s = &w->sge[i];
		uint64_t take = MIN((uint64_t)s->length, left), va;

		if (!take)
			continue;
		if (*mp == p)
			ret = lookup_key(p, q, q->rq_pd, s->lkey,
					 IBV_ACCESS_LOCAL_WRITE, s->addr, take,
					 false, &va);
		else
			ret = lookup_key(*mp, NULL, mpd, s->lkey,
					 IBV_ACCESS_LOCAL_WRITE, s->addr, take,
					 false, &va);
		if (ret == -ENOKEY && !n && !q->has_srq)
			ret = shared_key(p, q, s->lkey, IBV_ACCESS_LOCAL_WRITE,
					 s->addr, take, false, mp, &mpd, &va);
		if (ret)
			break;
		if (n == MAX_IOV) {
			ret = -E2BIG;
			break;
		}
		iov[n].iov_base = (void *)(uintptr_t)va;
		iov[n].iov_len = take;
		n++;
		left -= take;
	}
	if (!ret && left)
		ret = -EMSGSIZE;
	if (ret) {
		owner_end(p, *mp);
		*mp = p;
		return ret == -EBUSY || ret == -E2BIG || ret == -EMSGSIZE ?
			       ret : -EACCES;
	}
	*niov = n;
	return 0;
}

/*
 * Where an RDMA WRITE's (or READ's) data go in the responder: the message
 * at va, or, for a packet of it (x->partial), its part.
 */
static void place_range(const struct shca_xfer *x, uint64_t va,
			struct iovec *r, int *n)
{
	uint64_t off = x->partial ? MIN(x->part_off, x->length) : 0;

	/* never past the range the R_Key was checked for */
	r->iov_base = (void *)(uintptr_t)(va + off);
	r->iov_len = x->partial ? MIN(x->part_len, x->length - off) :
				  x->length;
	*n = r->iov_len ? 1 : 0;
}

/*
 * A receive WQE's bounce tag (verbs/import_key.c): the receiver's own
 * note, carried into its completion's vendor_err, which no receive
 * completion uses otherwise; the receiver checks it against its own
 * table when it polls.  Read once.
 */
static uint32_t receive_tag(const struct shca_recv_wqe_shm *w)
{
	return __atomic_load_n(&w->imp, __ATOMIC_RELAXED);
}

/* nsge: the count shca_rqshm_peek checked, never w->num_sge again */
static uint64_t wqe_capacity(const struct shca_recv_wqe_shm *w, uint32_t nsge)
{
	uint64_t c = 0;
	uint32_t i;

	for (i = 0; i < nsge; i++)
		c += w->sge[i].length;
	return c;
}

/*
 * After a receive WQE was taken from an SRQ: below its armed limit, the
 * owner raises IBV_EVENT_SRQ_LIMIT_REACHED (IBA 10.2.9.2).
 */
static void check_srq_limit(struct shca_peer *p, bool has_srq,
			    struct shca_rq_shm *rq)
{
	uint32_t limit;

	if (!has_srq)
		return;
	limit = __atomic_load_n(&rq->srq_limit, __ATOMIC_ACQUIRE);
	if (limit && shca_rqshm_count(rq) < limit) {
		__atomic_store_n(&rq->limit_pending, 1, __ATOMIC_RELEASE);
		shca_peer_doorbell(p);
	}
}

/* Consume the WQE at the head of rq (or, tag matching, the matched
 * tag) and drop rq->lock: q is not read after it (do_receive). */
static void take_wqe(struct shca_peer *p, const struct shca_qp_shm *q,
		     struct shca_rq_shm *rq, struct shca_tm_rx *t)
{
	bool has_srq = q->has_srq;

	shca_tm_rx_consume(rq, t);
	shca_plock_unlock(&rq->lock);
	check_srq_limit(p, has_srq, rq);
}

/*
 * The WQE at rq's head (or the matched tag) taken and completed with
 * status and byte_len (rq->lock held): the QP is marked with pend
 * (SHCA_QP_PEND_*, 0: none) *before* its completion can be seen, so that
 * an application that polls the completion and then asks the QP's state
 * finds it in error (ibv_query_qp takes the marks, doorbell.c).  imp: the
 * WQE's bounce tag, passed on (receive_tag).  The lock is dropped after
 * the completion: the owner's flush of the receive queue, under the same
 * lock, comes after it, and so does its ibv_destroy_qp's release of q's
 * record (verbs/qp.c qp_release): nothing of q is read after the lock.
 * false when the CQ overran (IBA o11-5.2.2, rxe's class G: the QP goes to
 * error, marked so if pend did not already).
 */
static bool complete_wqe(struct shca_peer *p, struct shca_qp_shm *q,
			 struct shca_rq_shm *rq, struct shca_tm_rx *t,
			 const struct shca_xfer *x, uint64_t wr_id,
			 uint32_t imp, enum ibv_wc_status status,
			 uint32_t byte_len, bool solicited, uint32_t pend)
{
	bool has_srq = q->has_srq, done;
	struct ibv_wc wc;

	shca_tm_rx_consume(rq, t);
	if (pend)
		__atomic_or_fetch(&q->pending, pend, __ATOMIC_ACQ_REL);
	resp_wc(&wc, x, q, wr_id, status, byte_len);
	wc.vendor_err = imp;
	shca_tm_rx_wc(t, &wc);
	done = resp_complete_tm(p, q, &wc, solicited, t);
	if (!done && !pend) {
		pend = SHCA_QP_PEND_ERR;
		__atomic_or_fetch(&q->pending, pend, __ATOMIC_ACQ_REL);
	}
	shca_plock_unlock(&rq->lock);
	check_srq_limit(p, has_srq, rq);
	if (pend)
		shca_peer_doorbell(p);
	return done;
}

/* The responder's side of an error it detected on the WQE: completed
 * with status (complete_wqe), the QP marked with pend. */
static void fail_wqe(struct shca_peer *p, struct shca_qp_shm *q,
		     struct shca_rq_shm *rq, struct shca_tm_rx *t,
		     const struct shca_xfer *x, uint64_t wr_id, uint32_t imp,
		     enum ibv_wc_status status, uint32_t pend)
{
	complete_wqe(p, q, rq, t, x, wr_id, imp, status, 0, true, pend);
}

/*
 * The net path's matched rendezvous (rq->lock held, the tag's buffer
 * checked for the RVH's length): the tag is used and its match reported
 * now; the receiver's own QP reads the data (x->rndv_read, after the
 * lock: net/transport.c), whose end is the tag's second completion.  No
 * bytes need no READ: the data's completion now, and the FIN.  The SEND
 * is ACKed (res as the caller set it).
 */
static void rndv_net(struct shca_peer *p, struct shca_qp_shm *q,
		     struct shca_rq_shm *rq, const struct shca_xfer *x,
		     struct shca_tm_rx *t)
{
	const struct shca_recv_wqe_shm *w = &t->wqe.w;	/* private, checked */
	struct shca_rndv_req r;
	struct ibv_wc wc;

	take_wqe(p, q, rq, t);
	resp_wc(&wc, x, q, w->wr_id, IBV_WC_SUCCESS, 0);
	shca_tm_rx_rndv_match(&wc);
	if (!resp_complete_tm(p, q, &wc, false, t))
		goto overrun;
	if (!t->rv_len) {
		resp_wc(&wc, x, q, w->wr_id, IBV_WC_SUCCESS, 0);
		wc.vendor_err = receive_tag(w);
		shca_tm_rx_wc(t, &wc);
		if (!resp_complete_tm(p, q, &wc, x->solicited, t))
			goto overrun;
	}
	memset(&r, 0, sizeof(r));
	r.wr_id = w->wr_id;
	r.addr = t->rv_addr;
	r.rkey = t->rv_rkey;
	r.len = t->rv_len;
	r.sge = w->sge;
	r.nsge = w->num_sge;
	r.head = t->head;
	r.solicited = x->solicited;
	r.imp = t->rv_len ? receive_tag(w) : 0;
	x->rndv_read(x->rndv_ctx, &r);
	return;
overrun:
	/* IBA o11-5.2.2: the CQ overran, the QP goes to error (no READ) */
	qp_pending(p, q, SHCA_QP_PEND_ERR);
}

/*
 * A matched rendezvous that cannot end well (rq->lock held): the match
 * is reported, then the data's completion with status, as the READ the
 * receiver's QP issued would end (mlx5 reports an error completion of
 * the READ's syndrome for the tag); the receiver's QP goes to error.
 */
static void rndv_fail(struct shca_peer *p, struct shca_qp_shm *q,
		      struct shca_rq_shm *rq, struct shca_tm_rx *t,
		      const struct shca_xfer *x, enum ibv_wc_status status)
{
	uint64_t wr_id = t->wqe.w.wr_id;
	struct ibv_wc wc;

	shca_tm_rx_consume(rq, t);
	__atomic_or_fetch(&q->pending, SHCA_QP_PEND_ERR, __ATOMIC_ACQ_REL);
	resp_wc(&wc, x, q, wr_id, IBV_WC_SUCCESS, 0);
	shca_tm_rx_rndv_match(&wc);
	resp_complete_tm(p, q, &wc, false, t);
	resp_wc(&wc, x, q, wr_id, status, 0);
	wc.opcode = IBV_WC_TM_RECV;
	wc.vendor_err = receive_tag(&t->wqe.w);	/* its bounce goes */
	resp_complete_tm(p, q, &wc, true, t);
	shca_plock_unlock(&rq->lock);
	shca_peer_doorbell(p);
}

/*
 * A RNDV request that matched a tag (rq->lock held, engine/tm_rx.c):
 * the responder fetches the RVH's [addr, addr + len) from the sender
 * into the tag's buffer, as mlx5's tag matching does with an RDMA READ
 * (rdma-core's Documentation/tag_matching.md).  On the same host the
 * sender's own process runs these rules, and rv says what its MR table
 * allowed (checked before the lock, as a READ responder checks: QP
 * remote read enable, R_Key, PD, REMOTE_READ, bounds).  On the net path
 * (x->rndv_read) the receiver's QP issues the READ itself once the tag
 * is taken (rndv_net); the sender's responder checks it.
 *
 *   RVH length > the tag's buffer  TMH and RVH placed in the buffer, one
 *                                  completion IBV_WC_TM_RNDV_INCOMPLETE
 *                                  with TM_MATCH | TM_DATA_VALID: the tag
 *                                  is used, software goes on (no FIN)
 *   the READ's checks fail         TM_MATCH, then REM_ACCESS_ERR; the
 *                                  receiver's QP to error, the sender's
 *                                  QP an access error (rndv_bad)
 *   the tag's buffer fails its     TM_MATCH, then LOC_PROT_ERR; the
 *     L_Key                        receiver's QP to error
 *   otherwise                      TM_MATCH (byte_len 0), the data, then
 *                                  TM_DATA_VALID (byte_len = RVH length);
 *                                  the sender owes itself a FIN: TMH
 *                                  opcode FIN and the RVH (rndv_fin)
 *
 * The SEND itself was accepted in every case: its requester completes
 * it with success (on a wire it is ACKed before the READ).
 */
static void do_rndv(struct shca_peer *p, struct shca_qp_shm *q,
		    struct shca_rq_shm *rq, const struct shca_xfer *x,
		    struct shca_tm_rx *t, const struct shca_tm_rndv *rv,
		    struct shca_xfer_result *res)
{
	const struct shca_recv_wqe_shm *w = &t->wqe.w;	/* private, checked */
	uint32_t nsge = w->num_sge;
	uint64_t wr_id = w->wr_id, cap = wqe_capacity(w, nsge);
	bool incomplete = t->rv_len > cap;
	uint64_t need = incomplete ? sizeof(t->head) : t->rv_len;
	bool net = x->rndv_read != NULL;	/* the QP reads (net path) */
	struct shca_peer *mp;
	struct iovec iov[MAX_IOV], src;
	struct ibv_wc wc;
	int niov = 0, ret;

	res->outcome = SHCA_XFER_DONE;
	res->status = IBV_WC_SUCCESS;
	if (need > cap) {
		/* not even the headers fit: as an eager message */
		fail_wqe(p, q, rq, t, x, wr_id, receive_tag(w),
			 IBV_WC_LOC_LEN_ERR, SHCA_QP_PEND_ERR);
		fail_rc(res, p, q, IBV_WC_REM_INV_REQ_ERR, 0);
		return;
	}
	/* the request the sender checked is the one matched (a sender
	 * that rewrites its buffer while sending gets an access error) */
	if (!incomplete && !net &&
	    (rv->ret || rv->addr != t->rv_addr || rv->rkey != t->rv_rkey ||
	     rv->len != t->rv_len)) {
		res->rndv_bad = true;
		rndv_fail(p, q, rq, t, x, IBV_WC_REM_ACCESS_ERR);
		return;
	}
	ret = build_scatter(p, q, w, nsge, need, iov, &niov, &mp);
	if (ret == -EBUSY) {
		shca_plock_unlock(&rq->lock);
		lanes_busy(res, x);
		return;
	}
	if (ret) {
		rndv_fail(p, q, rq, t, x, IBV_WC_LOC_PROT_ERR);
		return;
	}
	if (net && !incomplete) {
		owner_end(p, mp);
		rndv_net(p, q, rq, x, t);
		return;
	}
	if (incomplete) {
		src.iov_base = t->head;
		src.iov_len = sizeof(t->head);
	} else {
		src = rv->src;
	}
	ret = niov ? shca_mem_write(mp, &src, 1, iov, niov) :
		     (peer_gone(p) ? -ESRCH : 0);
	owner_end(p, mp);
	if (ret == -ESRCH) {
		shca_plock_unlock(&rq->lock);
		res->outcome = SHCA_XFER_NO_RESPONSE;
		return;
	}
	if (ret) {
		rndv_fail(p, q, rq, t, x, IBV_WC_LOC_PROT_ERR);
		return;
	}
	take_wqe(p, q, rq, t);
	if (incomplete) {
		resp_wc(&wc, x, q, wr_id, IBV_WC_TM_RNDV_INCOMPLETE,
			(uint32_t)need);
		wc.vendor_err = receive_tag(w);
		shca_tm_rx_wc(t, &wc);
		wc.wc_flags |= IBV_WC_TM_MATCH;
	} else {
		resp_wc(&wc, x, q, wr_id, IBV_WC_SUCCESS, 0);
		shca_tm_rx_rndv_match(&wc);
		if (!resp_complete_tm(p, q, &wc, false, t))
			goto overrun;
		resp_wc(&wc, x, q, wr_id, IBV_WC_SUCCESS, t->rv_len);
		/* the data's completion: the bounce's tag */
		wc.vendor_err = receive_tag(w);
		shca_tm_rx_wc(t, &wc);
		res->rndv_fin = true;
		memcpy(res->fin, t->head, sizeof(res->fin));
		res->fin[0] = IBV_TMH_FIN;
	}
	if (resp_complete_tm(p, q, &wc, x->solicited, t))
		return;
overrun:
	/* IBA o11-5.2.2: the CQ overran, the QP goes to error (the SEND
	 * was ACKed: its requester is not told) */
	res->rndv_fin = false;
	qp_pending(p, q, SHCA_QP_PEND_ERR);
}

/*
 * SEND, SEND_WITH_IMM and RDMA_WRITE_WITH_IMM's receive side.  Errors, as
 * the responder classes of IBA 9.9.3 (and rxe_resp.c) sort them:
 *
 *   QP without RDMA Write enabled  RC: NAK remote access (no WQE taken);
 *                                  UC: dropped
 *   no receive WQE                 RC: RNR NAK; UC, UD: dropped
 *   R_Key violation (write+imm)    RC: WQE done with LOC_ACCESS_ERR, NAK
 *                                  remote access; UC: dropped
 *   message longer than the WQE    WQE done with LOC_LEN_ERR; RC: NAK
 *                                  invalid request, QP to error; UC: QP
 *                                  to error; UD: dropped, the WQE stays
 *   bad L_Key in the WQE           WQE done with LOC_PROT_ERR, QP to
 *                                  error; RC: NAK remote operational
 *   receive CQ overrun             completion lost, QP to error; RC: no
 *                                  ACK (the requester times out)
 */
static void do_receive(struct shca_peer *p, struct shca_qp_shm *q,
		       const struct shca_xfer *x,
		       struct shca_xfer_result *res)
{
	struct shca_rq_shm *rq = shca_arena_ptr(p->arena, p->arena_size,
						q->rq_off, sizeof(*rq));
	bool is_send = x->opcode != IBV_WR_RDMA_WRITE_WITH_IMM;
	bool rc = x->qp_type == IBV_QPT_RC;
	bool uc = x->qp_type == IBV_QPT_UC;
	struct shca_recv_wqe_shm *w;
	struct shca_peer *mp = p;	/* whose memory the data go to */
	struct iovec iov[MAX_IOV + 1];
	uint64_t wr_id, need, va = 0;
	uint32_t nsge = 0, imp, mpd;
	struct shca_tm_rndv rv;
	struct shca_tm_rx t;
	int niov = 0, ret;

	if (!rq) {
		res->outcome = rc ? SHCA_XFER_NO_RESPONSE : SHCA_XFER_DONE;
		return;
	}
	/* the QP's RDMA Write enable comes before any WQE (rxe's
	 * check_op_valid); like the R_Key, not for a zero-length write */
	if (!is_send && x->length && !(q->access & IBV_ACCESS_REMOTE_WRITE)) {
		if (rc)
			fail_rc(res, p, q, IBV_WC_REM_ACCESS_ERR,
				SHCA_QP_PEND_ACCESS_ERR);
		return;
	}
	/* a rendezvous's source in its sender, before the lock (only for
	 * a TM SRQ: other receives need not pay for the look-up) */
	rv.ret = -ENOENT;
	if (__atomic_load_n(&rq->tm_off, __ATOMIC_ACQUIRE))
		shca_tm_rx_rndv_src(x, &rv);
	shca_plock_lock(&rq->lock);
	/* a tag-matching SRQ: a matched message goes to its tag's buffer
	 * without its header (engine/tm_rx.c) */
	shca_tm_rx_classify(p->arena, p->arena_size, rq, x, &t);
	if (t.cls == SHCA_TM_RNDV) {
		do_rndv(p, q, rq, x, &t, &rv, res);
		return;
	}
	if (t.cls == SHCA_TM_MATCHED) {
		x = &t.x;
		w = &t.wqe.w;	/* a private copy, nsge checked */
		nsge = t.wqe.w.num_sge;
	} else {
		w = shca_rqshm_peek(p->arena, p->arena_size, rq, &nsge);
	}
	if (!w) {
		shca_plock_unlock(&rq->lock);
		/* IBA 9.7.5.2.8: RC answers RNR NAK; UC and UD drop */
		if (rc && peer_gone(p)) {
			res->outcome = SHCA_XFER_NO_RESPONSE;
		} else if (rc) {
			res->outcome = SHCA_XFER_RNR;
			res->rnr_timer = (uint8_t)q->min_rnr_timer;
		}
		return;
	}
	wr_id = w->wr_id;
	imp = receive_tag(w);	/* (a matched tag's: its private copy) */

	if (!is_send) {
		/* RDMA WRITE with immediate: the data goes where the rkey
		 * says, the WQE only reports it (IBA 9.4.3) */
		ret = x->length ? lookup_mr(p, q, x->rkey,
					    IBV_ACCESS_REMOTE_WRITE,
					    x->remote_addr, x->length, &va) :
				  0;
		if (ret == -ENOKEY)
			ret = shared_key(p, q, x->rkey,
					 IBV_ACCESS_REMOTE_WRITE,
					 x->remote_addr, x->length, true, &mp,
					 &mpd, &va);
		if (ret == -ENOKEY)
			bad_key(q, res, SHCA_STAT_INVALID_RKEY);
		if (ret == -EBUSY || (ret && !rc)) {
			shca_plock_unlock(&rq->lock);
			if (ret == -EBUSY)
				lanes_busy(res, x);
			return;
		}
		if (ret) {
			fail_wqe(p, q, rq, &t, x, wr_id, imp, IBV_WC_LOC_ACCESS_ERR,
				 SHCA_QP_PEND_ACCESS_ERR);
			fail_rc(res, p, q, IBV_WC_REM_ACCESS_ERR, 0);
			return;
		}
		place_range(x, va, iov, &niov);
	} else {
		need = x->length + (x->grh ? SHCA_GRH_LEN : 0);
		if (need > wqe_capacity(w, nsge) && !rc && !uc) {
			/* UD: a datagram longer than the receive buffer is
			 * dropped, and the WQE stays for the next one (as
			 * IBA's UD receive rules and hfi1/qib, which reuse
			 * the WQE); counted as a length error */
			shca_plock_unlock(&rq->lock);
			shca_stat_add(&q->stats, SHCA_STAT_LENGTH_ERR, 1);
			return;
		}
		if (need > wqe_capacity(w, nsge)) {
			/* IBA 10.7.2.1: receive buffer too small */
			fail_wqe(p, q, rq, &t, x, wr_id, imp, IBV_WC_LOC_LEN_ERR,
				 SHCA_QP_PEND_ERR);
			if (rc)
				fail_rc(res, p, q, IBV_WC_REM_INV_REQ_ERR, 0);
			return;
		}
		ret = build_scatter(p, q, w, nsge, need, iov, &niov, &mp);
		if (ret == -EBUSY) {
			shca_plock_unlock(&rq->lock);
			lanes_busy(res, x);
			return;
		}
		if (ret) {
			fail_wqe(p, q, rq, &t, x, wr_id, imp, IBV_WC_LOC_PROT_ERR,
				 SHCA_QP_PEND_ERR);
			if (rc)
				fail_rc(res, p, q, IBV_WC_REM_OP_ERR, 0);
			return;
		}
	}

	/* place the data: GRH first for UD, then the payload */
	if (!niov) {
		ret = peer_gone(p) ? -ESRCH : 0;
	} else if (x->grh) {
		/* one gather list: the GRH, then the payload */
		struct iovec g[MAX_IOV + 1];

		if (x->nlocal > MAX_IOV) {
			ret = -E2BIG;
		} else {
			g[0].iov_base = (void *)x->grh;
			g[0].iov_len = SHCA_GRH_LEN;
			memcpy(g + 1, x->local,
			       sizeof(*g) * (size_t)x->nlocal);
			ret = shca_mem_write(mp, g, x->nlocal + 1, iov,
					     niov);
		}
	} else {
		ret = shca_mem_write(mp, x->local, x->nlocal, iov, niov);
	}
	owner_end(p, mp);
	if (ret == -ESRCH) {
		/* the responder's process is gone: nothing answers */
		shca_plock_unlock(&rq->lock);
		res->outcome = rc ? SHCA_XFER_NO_RESPONSE : SHCA_XFER_DONE;
		return;
	}
	if (ret == -EREMOTEIO && !is_send) {
		/* a target page of the R_Key's MR faulted (unmapped or
		 * protected by its owner, an ODP page not there): as the
		 * R_Key check above fails (docs/conformance.md) */
		fail_wqe(p, q, rq, &t, x, wr_id, imp, IBV_WC_LOC_ACCESS_ERR,
			 SHCA_QP_PEND_ACCESS_ERR);
		if (rc)
			fail_rc(res, p, q, IBV_WC_REM_ACCESS_ERR, 0);
		return;
	}
	if (ret) {
		fail_wqe(p, q, rq, &t, x, wr_id, imp, IBV_WC_LOC_PROT_ERR,
			 SHCA_QP_PEND_ERR);
		if (rc)
			fail_rc(res, p, q, IBV_WC_REM_OP_ERR, 0);
		return;
	}
	if (x->opcode == IBV_WR_SEND_WITH_INV &&
	    remote_invalidate(p, q, x->inv_rkey)) {
		/* rxe's class J: the WQE completes in error, the QP goes to
		 * error, the requester sees an invalid request */
		fail_wqe(p, q, rq, &t, x, wr_id, imp, IBV_WC_REM_INV_REQ_ERR,
			 SHCA_QP_PEND_ERR);
		if (rc)
			fail_rc(res, p, q, IBV_WC_REM_INV_REQ_ERR, 0);
		return;
	}
	if (!complete_wqe(p, q, rq, &t, x, wr_id, imp, IBV_WC_SUCCESS,
			  (uint32_t)(is_send ? x->length +
					       (x->grh ? SHCA_GRH_LEN : 0) :
					       x->length),
			  x->solicited, 0)) {
		/* the CQ overran: no ACK */
		if (rc)
			res->outcome = SHCA_XFER_NO_RESPONSE;
		return;
	}
	res->outcome = SHCA_XFER_DONE;
	res->status = IBV_WC_SUCCESS;
}

static void do_rdma(struct shca_peer *p, struct shca_qp_shm *q,
		    const struct shca_xfer *x, struct shca_xfer_result *res)
{
	bool write = x->opcode == IBV_WR_RDMA_WRITE;
	uint32_t access = write ? IBV_ACCESS_REMOTE_WRITE :
				  IBV_ACCESS_REMOTE_READ;
	struct shca_peer *mp;
	struct iovec r;
	uint64_t va;
	int ret, n;

	res->outcome = SHCA_XFER_DONE;
	res->status = IBV_WC_SUCCESS;
	if (!x->length) {
		/* IBA C9-88: no R_Key check for length 0 */
		if (peer_gone(p))
			res->outcome = SHCA_XFER_NO_RESPONSE;
		return;
	}
	if (!remote_key(p, q, x, res, access, x->length, &va, &mp))
		return;
	place_range(x, va, &r, &n);
	ret = write ? shca_mem_write(mp, x->local, x->nlocal, &r, n) :
		      shca_mem_read(mp, x->local, x->nlocal, &r, 1);
	owner_end(p, mp);
	if (ret == -ESRCH) {
		res->outcome = SHCA_XFER_NO_RESPONSE;
	} else if (ret == -EREMOTEIO) {
		/* a page of the responder's MR faulted (unmapped or
		 * protected by its owner, an ODP page not there): its
		 * remote access error, as a NIC's responder NAKs a page
		 * fault (docs/conformance.md); UC: dropped */
		if (x->qp_type == IBV_QPT_RC)
			fail_rc(res, p, q, IBV_WC_REM_ACCESS_ERR,
				SHCA_QP_PEND_ACCESS_ERR);
	} else if (ret == -EFAULT) {
		/* our own buffer faulted: a READ's scatter not writable, a
		 * WRITE's gather not readable; the responder knows nothing
		 * of it */
		res->status = IBV_WC_LOC_PROT_ERR;
	} else if (ret) {
		if (x->qp_type == IBV_QPT_RC)
			fail_rc(res, p, q, IBV_WC_REM_OP_ERR, SHCA_QP_PEND_ERR);
	}
}

/*
 * What shca_mem_atomic's ret (an atomic or an ATOMIC WRITE on the
 * responder's word) means for the request: true when it was carried out.
 * The host's lock stripes out of reach: a general error; the responder
 * gone: no answer; the word's page faulted (unmapped or protected by its
 * owner, an ODP page not there): a remote access error, as a NIC's
 * responder NAKs a page fault (docs/conformance.md); anything else: a
 * remote operation error.
 */
static bool atomic_done(struct shca_peer *p, struct shca_qp_shm *q,
			struct shca_xfer_result *res, int ret)
{
	if (ret == -ENOLCK)
		res->status = IBV_WC_GENERAL_ERR;
	else if (ret == -ESRCH)
		res->outcome = SHCA_XFER_NO_RESPONSE;
	else if (ret == -EREMOTEIO)
		fail_rc(res, p, q, IBV_WC_REM_ACCESS_ERR,
			SHCA_QP_PEND_ACCESS_ERR);
	else if (ret)
		fail_rc(res, p, q, IBV_WC_REM_OP_ERR, SHCA_QP_PEND_ERR);
	return !ret;
}

static void do_atomic(struct shca_peer *p, struct shca_qp_shm *q,
		      const struct shca_xfer *x, struct shca_xfer_result *res)
{
	struct shca_peer *mp;
	uint64_t va, orig = 0;
	int ret;

	res->outcome = SHCA_XFER_DONE;
	res->status = IBV_WC_SUCCESS;
	if (x->remote_addr & 7) {
		/* IBA o9-21: atomics need natural alignment */
		fail_rc(res, p, q, IBV_WC_REM_INV_REQ_ERR, SHCA_QP_PEND_REQ_ERR);
		return;
	}
	if (!remote_key(p, q, x, res, IBV_ACCESS_REMOTE_ATOMIC, 8, &va, &mp))
		return;
	ret = shca_mem_atomic(mp, va, x->opcode, x->compare_add, x->swap,
			      &orig);
	owner_end(p, mp);
	if (atomic_done(p, q, res, ret))
		res->atomic_orig = orig;
}

/*
 * IBA Annex A19 ATOMIC WRITE: 8 bytes at an 8-byte aligned address
 * (else an invalid request, as for the atomics, o9-21), through an R_Key
 * with remote write (the spec's and rxe's rule: the write class of
 * access, not the atomic one), placed whole (shca_mem_atomic: under the
 * host's atomic lock stripe, a CPU store where the memory is mapped).
 */
static void do_atomic_write(struct shca_peer *p, struct shca_qp_shm *q,
			    const struct shca_xfer *x,
			    struct shca_xfer_result *res)
{
	struct shca_peer *mp;
	uint64_t va, orig;
	int ret;

	res->outcome = SHCA_XFER_DONE;
	res->status = IBV_WC_SUCCESS;
	if (x->remote_addr & 7) {
		fail_rc(res, p, q, IBV_WC_REM_INV_REQ_ERR, SHCA_QP_PEND_REQ_ERR);
		return;
	}
	if (!remote_key(p, q, x, res, IBV_ACCESS_REMOTE_WRITE, 8, &va, &mp))
		return;
	ret = shca_mem_atomic(mp, va, IBV_WR_ATOMIC_WRITE, 0, x->swap, &orig);
	owner_end(p, mp);
	atomic_done(p, q, res, ret);
}

/*
 * IBA Annex A19 FLUSH.  The QP and the R_Key's region must both allow
 * each placement type asked for (IBV_ACCESS_FLUSH_GLOBAL, _PERSISTENT:
 * rxe's rule); the range must lie in the region unless the level is the
 * whole region; a type or level the annex does not define is an invalid
 * request.  A range of no bytes flushes nothing and checks no key (as a
 * READ or WRITE of length 0, C9-88).
 *
 * What it does: every request before it on this QP was carried out
 * before it (in order, on both paths), so their data are placed; the
 * fence makes them visible to every CPU of the host before the response
 * (global visibility).  Persistence is never reached: no region can have
 * IBV_ACCESS_FLUSH_PERSISTENT (mr.c), so such a FLUSH fails its access
 * check (docs/conformance.md).
 */
static void do_flush(struct shca_peer *p, struct shca_qp_shm *q,
		     const struct shca_xfer *x, struct shca_xfer_result *res)
{
	struct shca_peer *mp;
	uint32_t access = 0;
	uint64_t va;

	res->outcome = SHCA_XFER_DONE;
	res->status = IBV_WC_SUCCESS;
	if (x->flush_type & SHCA_FLUSH_GLOBAL)
		access |= SHCA_ACCESS_FLUSH_GLOBAL;
	if (x->flush_type & SHCA_FLUSH_PERSISTENT)
		access |= SHCA_ACCESS_FLUSH_PERSISTENT;
	if (!access ||
	    (x->flush_type & ~(SHCA_FLUSH_GLOBAL | SHCA_FLUSH_PERSISTENT)) ||
	    x->flush_level > SHCA_FLUSH_MR) {
		fail_rc(res, p, q, IBV_WC_REM_INV_REQ_ERR, SHCA_QP_PEND_REQ_ERR);
		return;
	}
	if (x->flush_level == SHCA_FLUSH_RANGE && !x->length) {
		if (peer_gone(p))
			res->outcome = SHCA_XFER_NO_RESPONSE;
		return;
	}
	if (!remote_key(p, q, x, res, access,
			x->flush_level == SHCA_FLUSH_MR ? LOOKUP_WHOLE_MR :
							  x->length,
			&va, &mp))
		return;
	shca_full_fence();
	owner_end(p, mp);
	if (peer_gone(p))
		res->outcome = SHCA_XFER_NO_RESPONSE;
}

static void execute(struct shca_peer *p, const struct shca_xfer *x,
		    struct shca_xfer_result *res);

/* Counts for block b, each one atomic add */
static void tally_add(struct shca_stat_block *b, uint64_t sent_pkts,
		      uint64_t sent_bytes, uint64_t rcvd_pkts,
		      uint64_t rcvd_bytes)
{
	if (sent_pkts)
		shca_stat_add(b, SHCA_STAT_SENT_PKTS, sent_pkts);
	if (sent_bytes)
		shca_stat_add(b, SHCA_STAT_SENT_BYTES, sent_bytes);
	if (rcvd_pkts)
		shca_stat_add(b, SHCA_STAT_RCVD_PKTS, rcvd_pkts);
	if (rcvd_bytes)
		shca_stat_add(b, SHCA_STAT_RCVD_BYTES, rcvd_bytes);
}

void shca_xfer_tally_flush(struct shca_xfer_tally *t)
{
	if (!t->b)
		return;
	if (!t->qpn_at ||
	    __atomic_load_n(t->qpn_at, __ATOMIC_ACQUIRE) == t->qpn)
		tally_add(t->b, t->sent_pkts, t->sent_bytes, t->rcvd_pkts,
			  t->rcvd_bytes);
	/* else a QP no more: the counts are dropped */
	memset(t, 0, sizeof(*t));
}

/*
 * Request x in the responder's QP's block b (shca_xfer_wire: what came is
 * received, what goes back sent): at once, t NULL, or gathered in t.
 */
static void xfer_count(struct shca_xfer_tally *t, struct shca_stat_block *b,
		       const struct shca_xfer *x)
{
	struct shca_xfer_wire w = shca_xfer_wire(x);

	if (!t) {
		tally_add(b, w.back_pkts, w.back_bytes, w.out_pkts,
			  w.out_bytes);
		return;
	}
	if (t->b != b) {
		shca_xfer_tally_flush(t);
		t->b = b;
	}
	t->sent_pkts += w.back_pkts;
	t->sent_bytes += w.back_bytes;
	t->rcvd_pkts += w.out_pkts;
	t->rcvd_bytes += w.out_bytes;
}

static void no_answer(const struct shca_xfer *x, struct shca_xfer_result *res)
{
	memset(res, 0, sizeof(*res));
	res->status = IBV_WC_SUCCESS;
	/* an unreachable or absent responder: RC retries until its retry
	 * count runs out, UC and UD lose the message */
	res->outcome = x->qp_type == IBV_QPT_RC ? SHCA_XFER_NO_RESPONSE :
						  SHCA_XFER_DONE;
}

void shca_respond_held(struct shca_peer *p, const struct shca_xfer *x,
		       struct shca_xfer_result *res)
{
	no_answer(x, res);
	/* what a hold would have said now (shca_peer_hold) */
	if (shca_peer_dead(p))
		return;
	shca_mem_begin(p);
	execute(p, x, res);
	shca_mem_end(p);
}

void shca_respond(struct shca_peer *p, const struct shca_xfer *x,
		  struct shca_xfer_result *res)
{
	/* the peer's arena stays mapped while we use it */
	if (!p || !shca_peer_hold(p)) {
		no_answer(x, res);
		return;
	}
	shca_respond_held(p, x, res);
	shca_peer_release(p);
}

static void dispatch(struct shca_peer *p, struct shca_qp_shm *q,
		     const struct shca_xfer *x, struct shca_xfer_result *res);
static void execute_xrc(struct shca_peer *p, struct shca_qp_shm *q,
			const struct shca_xfer *x,
			struct shca_xfer_result *res);

/*
 * Does the request consume a receive WQE, so that the responder's receive
 * CQ may get a completion (and its channel an event)?  Only then is the
 * CQ's channel looked up ahead of its lock: a WRITE, READ or atomic reads
 * nothing of the responder's CQ, whose lines its owner writes as it posts
 * and polls (each read of them was a cache miss for both sides).
 */
static bool completes_here(const struct shca_xfer *x)
{
	switch (x->opcode) {
	case IBV_WR_SEND:
	case IBV_WR_SEND_WITH_IMM:
	case IBV_WR_SEND_WITH_INV:
	case IBV_WR_RDMA_WRITE_WITH_IMM:
		return true;
	default:
		return false;
	}
}

static void execute(struct shca_peer *p, const struct shca_xfer *x,
		    struct shca_xfer_result *res)
{
	struct shca_cq_shm *cq;
	struct shca_qp_shm *q;
	uint32_t state;

	q = lookup_qp(p, x->dest_qpn);
	if (!q || q->qp_type != (x->xrc_srqn ? (uint32_t)IBV_QPT_XRC_RECV :
						(uint32_t)x->qp_type))
		return;
	if (x->count_resp) {
		struct shca_xfer_tally *t = x->resp_tally;

		xfer_count(t, &q->stats, x);
		if (t) {
			t->qpn_at = &q->qpn;
			t->qpn = x->dest_qpn;
			/* the responder's counters hold what precedes a
			 * completion there when it is seen */
			if (completes_here(x))
				shca_xfer_tally_flush(t);
		}
	}
	if (completes_here(x)) {
		cq = shca_arena_ptr(p->arena, p->arena_size, q->rcq_off,
				    sizeof(*cq));
		if (cq)
			shca_peer_prefetch_channel(p, cq);
	}
	state = __atomic_load_n(&q->state, __ATOMIC_ACQUIRE);
	if (!shca_qp_state_can_receive(state) || shca_qp_shm_failing(q))
		return;
	/* IBA C10-15: UD delivers only with the right Q_Key */
	if (x->qp_type == IBV_QPT_UD && x->qkey != q->qkey) {
		bad_key(q, res, SHCA_STAT_INVALID_QKEY);
		return;
	}
	/* the owner holds a rendezvous FIN for this QP that found no
	 * receive WQE (shm/xfer.c): a later request of its connection is
	 * answered as the FIN was, RNR, until the FIN is delivered (IBA
	 * 9.7.5.2.8: a requester resumes from the NAKed request) */
	if (x->qp_type == IBV_QPT_RC && !x->fin && !x->xrc_srqn &&
	    __atomic_load_n(&q->fin_wait, __ATOMIC_ACQUIRE)) {
		res->outcome = SHCA_XFER_RNR;
		res->rnr_timer = (uint8_t)q->min_rnr_timer;
		return;
	}
	if (state == IBV_QPS_RTR && x->qp_type != IBV_QPT_UD &&
	    !(__atomic_load_n(&q->pending, __ATOMIC_ACQUIRE) &
	      SHCA_QP_PEND_COMM_EST))
		qp_pending(p, q, SHCA_QP_PEND_COMM_EST);

	if (x->xrc_srqn) {
		execute_xrc(p, q, x, res);
		return;
	}
	dispatch(p, q, x, res);
}

/*
 * A copy of a QP's shared words, each read whole and atomically: the
 * owner's engine and other peers change some of them (pending marks,
 * counters) with atomics meanwhile, and a plain memcpy would race with
 * them.
 */
static void qp_view_copy(struct shca_qp_shm *dst,
			 const struct shca_qp_shm *src)
{
	const uint64_t *from = (const uint64_t *)src;
	uint64_t *to = (uint64_t *)dst;
	size_t i;

	_Static_assert(sizeof(*src) % sizeof(uint64_t) == 0 &&
		       _Alignof(struct shca_qp_shm) >= sizeof(uint64_t),
		       "a QP's shared part is whole 8-byte words");
	for (i = 0; i < sizeof(*src) / sizeof(uint64_t); i++)
		to[i] = __atomic_load_n(&from[i], __ATOMIC_RELAXED);
}

/*
 * The process that holds XRC SRQ srqn: p itself, or (an SRQ of another
 * process of the domain, docs/xrc.md) the peer in the number's slot, held
 * (shca_peer_hold): NULL when there is none.  srqn came from a requester
 * (or the wire): only its slot picks the process, and the SRQ found there
 * must still pass every check against the QP.
 */
static struct shca_peer *xsrq_peer(struct shca_peer *p, uint32_t srqn)
{
	struct shca_peer *sp;

	if (srqn > 0xffffff || shca_qpn_slot(srqn) == p->slot)
		return p;
	sp = shca_peer_get(shca_qpn_slot(srqn));
	if (!sp || !shca_peer_hold(sp))
		return NULL;
	return sp;
}

/*
 * An XRC request (IBA 9.8.x, the XRCETH): carried out as RC against the
 * SRQ it names, which must be an XRC SRQ of the XRC_RECV QP's domain, in
 * the QP's process or in another one on this host (its number's slot);
 * its PD checks the R_Keys and the receive WQEs' L_Keys, its CQ takes
 * the receive completions, its process's memory is accessed.  Any other
 * SRQ number is an invalid request (docs/xrc.md).  The rules run on a
 * view of the QP with the SRQ's queue, PD and CQ, against the SRQ's
 * process; what they mark on the view (pending errors, counters) goes
 * to the QP, in its own process.
 */
static void execute_xrc(struct shca_peer *p, struct shca_qp_shm *q,
			const struct shca_xfer *x,
			struct shca_xfer_result *res)
{
	struct shca_peer *sp = xsrq_peer(p, x->xrc_srqn);
	const struct shca_qp_shm *s = sp ? lookup_qp(sp, x->xrc_srqn) : NULL;
	struct shca_qp_shm view;
	struct shca_cq_shm *cq;
	uint32_t pend;
	unsigned int i;

	if (!s || __atomic_load_n(&s->qp_type, __ATOMIC_ACQUIRE) !=
			  SHCA_QPT_XRC_SRQ ||
	    !q->xrcd || s->xrcd != q->xrcd) {
		fail_rc(res, p, q, IBV_WC_REM_INV_REQ_ERR,
			SHCA_QP_PEND_REQ_ERR);
		goto out;
	}
	qp_view_copy(&view, q);
	view.pd = s->pd;
	view.rq_pd = s->pd;
	view.has_srq = 1;
	view.rq_off = s->rq_off;
	view.rcq_off = s->rcq_off;
	view.pending = 0;
	memset(&view.stats, 0, sizeof(view.stats));
	if (sp != p) {
		/* the memory accesses are the SRQ's process's now */
		shca_mem_end(p);
		shca_mem_begin(sp);
		cq = completes_here(x) ?
			     shca_arena_ptr(sp->arena, sp->arena_size,
					    view.rcq_off, sizeof(*cq)) :
			     NULL;
		if (cq)
			shca_peer_prefetch_channel(sp, cq);
	}
	dispatch(sp, &view, x, res);
	if (sp != p) {
		shca_mem_end(sp);
		shca_mem_begin(p);
	}
	pend = __atomic_load_n(&view.pending, __ATOMIC_ACQUIRE);
	if (pend) {
		/* the owner's doorbell reads the QP's marks */
		__atomic_or_fetch(&q->pending, pend, __ATOMIC_ACQ_REL);
		shca_peer_doorbell(p);
	}
	for (i = 0; i < SHCA_STAT_MAX; i++)
		if (view.stats.v[i])
			shca_stat_add(&q->stats, (enum shca_stat)i,
				      view.stats.v[i]);
out:
	if (sp && sp != p)
		shca_peer_release(sp);
}

/* The operation's rules, for a QP (or an XRC view of one). */
static void dispatch(struct shca_peer *p, struct shca_qp_shm *q,
		     const struct shca_xfer *x, struct shca_xfer_result *res)
{
	if ((unsigned int)x->opcode == SHCA_WR_FLUSH) {
		do_flush(p, q, x, res);
		return;
	}
	switch (x->opcode) {
	case IBV_WR_ATOMIC_WRITE:
		do_atomic_write(p, q, x, res);
		break;
	case IBV_WR_SEND:
	case IBV_WR_SEND_WITH_IMM:
	case IBV_WR_SEND_WITH_INV:
	case IBV_WR_RDMA_WRITE_WITH_IMM:
		do_receive(p, q, x, res);
		break;
	case IBV_WR_RDMA_WRITE:
	case IBV_WR_RDMA_READ:
		do_rdma(p, q, x, res);
		break;
	case IBV_WR_ATOMIC_CMP_AND_SWP:
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
		do_atomic(p, q, x, res);
		break;
	default:
		res->outcome = SHCA_XFER_DONE;
		res->status = IBV_WC_LOC_QP_OP_ERR;
		break;
	}
}

