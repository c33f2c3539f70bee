// SPDX-License-Identifier: MIT
/*
 * L_Keys of another process's MRs, used here (docs/import.md, "Keys of
 * another process").
 *
 * A QP of this process on an import of another process's PD (a shadow
 * PD, import_rem.c) may name in its gather and scatter lists the L_Key
 * of any MR of that PD, as a QP of the owner would: on hardware the key
 * means the same MR in both processes.  The other way round too: a QP
 * of the owner on a PD of its own that another process imported may
 * name the L_Key of an MR that process registered in its shadow of the
 * PD (the owner's table of importers, import_rem.c).  Such a key is not
 * in this process's MR table; the MR is the other process's, in its
 * memory.  It is reached the way a same-host peer reaches an R_Key
 * (shm/mem.h): an access lane of that process's claimed, the entry read
 * from its arena under it (key, the PD's identity there, the MR's local
 * rights, bounds: engine/responder.c shca_owner_lkey), the bytes copied
 * through its mapped segments or CMA, the lane released -- so its
 * ibv_dereg_mr waits for the copy, and after it the key fails (a Local
 * Protection Error, as on hardware).  "The owner" below is that other
 * process, whichever side of the import it is.
 *
 * The data go through a bounce buffer of this process: a gather list's
 * bytes are copied in before the request goes out, a scatter list's
 * (a READ's or an atomic's local buffer) copied out when its response is
 * placed, each SGE under its key's rules at that moment.  The
 * requester's transport sees local memory only.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "shca.h"
#include "../common/dma.h"
#include "../engine/engine.h"
#include "../shm/mem.h"
#include "../shm/peer.h"

/* The process in slot, if it is still pid, held; NULL if it is gone
 * (its slot empty or another process's now). */
static struct shca_peer *sharer_hold(int slot, pid_t pid)
{
	struct shca_peer *p = shca_peer_get(slot);

	if (!p || p->self || p->pid != pid || !shca_peer_hold(p))
		return NULL;
	return p;
}

/* One SGE of an MR of the process in slot (pid) in the PD of identity pd
 * there: its bytes to buf (put false) or from buf; buf NULL: the key
 * checked only.  0 or -errno (-ENOKEY: no such key of that PD there,
 * -ESRCH: the process is gone). */
static int sharer_copy(int slot, pid_t pid, uint32_t pd,
		       const struct ibv_sge *s, unsigned int access, void *buf,
		       bool put)
{
	struct shca_peer *p = sharer_hold(slot, pid);
	struct iovec l, r;
	uint64_t va;
	int ret;

	if (!p)
		return -ESRCH;
	shca_mem_begin(p);
	ret = shca_owner_lkey(p, pd, s->lkey, access, s->addr, s->length, &va);
	if (!ret && buf) {
		l.iov_base = buf;
		l.iov_len = s->length;
		r.iov_base = (void *)(uintptr_t)va;
		r.iov_len = s->length;
		ret = put ? shca_mem_write(p, &l, 1, &r, 1) :
			    shca_mem_read(p, &l, 1, &r, 1);
	}
	shca_mem_end(p);
	shca_peer_release(p);
	return ret;
}

/*
 * One SGE of an MR of another process that shares pd (docs/import.md):
 * the owner's, pd being an import of its PD; or, pd being ours, an
 * importer's in its shadow of pd (our table of importers, import_rem.c:
 * each asked in turn).  As sharer_copy.
 */
static int shared_copy(const struct shca_pd *pd, const struct ibv_sge *s,
		       unsigned int access, void *buf, bool put)
{
	struct shca_arena *a;
	struct shca_pd_imp_shm *t, e;
	unsigned int i;
	int ret = -ENOKEY;

	if (pd->remote)
		return sharer_copy(pd->rslot, pd->rpid, pd->rpd, s, access, buf,
				   put);
	a = shca_arena_self();
	t = a ? shca_arena_pd_imps(a->base, a->size) : NULL;
	for (i = 0;
	     t && (ret == -ENOKEY || ret == -ESRCH) && i < SHCA_ARENA_PD_IMPS;
	     i++)
		if (shca_pd_imp_shm_read(&t[i], &e) && e.pd == pd->obj.handle)
			ret = sharer_copy((int)e.slot, (pid_t)e.pid, e.shadow,
					  s, access, buf, put);
	return ret;
}

void shca_imp_done(struct shca_imp_io *io)
{
	if (!io->buf && !io->sge)
		return;
	free(io->buf);
	free(io->sge);
	free(io->off);
	memset(io, 0, sizeof(*io));
}

enum ibv_wc_status shca_imp_sge_iov(struct shca_pd *pd,
				    const struct ibv_sge *sge, int n,
				    unsigned int access, struct iovec *iov,
				    int *niov, struct shca_imp_io *io)
{
	bool write = access & IBV_ACCESS_LOCAL_WRITE;
	size_t total = 0, off = 0;
	int i, k = 0, nown = 0;
	void *ours;

	if (!shca_pd_shared(pd))
		return IBV_WC_LOC_PROT_ERR;
	/* which SGEs are the owner's (not in our table), and how much */
	for (i = 0; i < n; i++)
		if (sge[i].length &&
		    !shca_lookup_mr(pd, sge[i].lkey, access, sge[i].addr,
				    sge[i].length, false)) {
			total += sge[i].length;
			nown++;
		}
	io->buf = malloc(total ? total : 1);
	io->sge = calloc((size_t)nown + 1, sizeof(*io->sge));
	io->off = calloc((size_t)nown + 1, sizeof(*io->off));
	io->pd = pd;
	if (!io->buf || !io->sge || !io->off)
		goto fail;
	for (i = 0; i < n; i++) {
		const struct ibv_sge *s = &sge[i];

		if (!s->length)
			continue;
		ours = shca_lookup_addr(pd, s->lkey, access, s->addr,
					s->length, false);
		if (ours) {
			iov[k].iov_base = ours;
		} else {
			/* an MR of ours that went meanwhile: none of the
			 * owner's either if it does not fit */
			if (io->nsge == nown || off + s->length > total)
				goto fail;
			iov[k].iov_base = (char *)io->buf + off;
			if (!write &&
			    shared_copy(pd, s, access, iov[k].iov_base, false))
				goto fail;
			io->sge[io->nsge] = *s;
			io->off[io->nsge++] = off;
			off += s->length;
		}
		iov[k].iov_len = s->length;
		k++;
	}
	io->len = total;
	if (!write)
		io->nsge = 0;	/* nothing goes back */
	*niov = k;
	return IBV_WC_SUCCESS;

fail:
	shca_imp_done(io);
	return IBV_WC_LOC_PROT_ERR;
}

enum ibv_wc_status shca_imp_put(struct shca_imp_io *io)
{
	int i;

	for (i = 0; i < io->nsge; i++)
		if (shared_copy(io->pd, &io->sge[i], IBV_ACCESS_LOCAL_WRITE,
				(char *)io->buf + io->off[i], true))
			return IBV_WC_LOC_PROT_ERR;
	return IBV_WC_SUCCESS;
}

/* Are the keys of these SGEs all MRs of ours (in pd, for access)? */
static bool all_ours(struct shca_pd *pd, const struct ibv_sge *sge, int n,
		     unsigned int access)
{
	int i;

	for (i = 0; i < n; i++)
		if (sge[i].length &&
		    !shca_lookup_mr(pd, sge[i].lkey, access, sge[i].addr,
				    sge[i].length, false))
			return false;
	return true;
}

/*
 * The requester (engine/requester.c local_iov) hands the transport a
 * bounce buffer that lives until xmit returns: every transport of UC and
 * UD (the same host's responder runs within xmit; the net path copies a
 * UC message into its frames and sends a UD datagram at once) and the
 * same host's RC and XRC are done with it then.  The net path's RC and
 * XRC run their own window (sq_run): they read the local memory when
 * they send or resend a packet and place a READ's response when it
 * arrives, long after.
 */
bool shca_imp_route_ok(enum ibv_qp_type type, enum shca_route route)
{
	switch (type) {
	case IBV_QPT_UC:
	case IBV_QPT_UD:
		return true;
	case IBV_QPT_RC:
	case IBV_QPT_XRC_SEND:
		return route == SHCA_ROUTE_HOST;
	default:
		return false;
	}
}

/* Where the requester does not use the owner's L_Keys they are refused
 * at the post: every QP type with a send queue uses them now (the net
 * path's RC and XRC through a bounce buffer of the WQE's, below). */
bool shca_imp_qp_keys_ok(struct shca_pd *pd, enum ibv_qp_type type,
			 enum shca_route route, const struct ibv_sge *sge,
			 int n)
{
	(void)route;
	if (!shca_pd_shared(pd) || !n)
		return true;
	switch (type) {
	case IBV_QPT_RC:
	case IBV_QPT_XRC_SEND:
	case IBV_QPT_UC:
	case IBV_QPT_UD:
		return true;
	default:
		return all_ours(pd, sge, n, 0);
	}
}

/* ------------------------------------------------------------------ */
/* Bounce buffers that live with a WQE                                 */

/*
 * A receive WQE, or a send WQE of the net path's RC/XRC window, that
 * names the owner's L_Keys is posted naming one SGE of a bounce buffer
 * instead: memory of this process, registered in the shadow PD as an MR
 * the application never sees (mr.c shca_mr_internal, local write
 * only), so that whoever carries the WQE out -- a same-host sender
 * running the responder's rules against our arena, our net responder,
 * our net requester at each (re)send -- finds an MR of the queue's PD
 * and needs nothing else.  The WQE's original SGEs stay here, in a
 * record named by a tag:
 *
 *   receive   the tag rides in the ring WQE (shca_recv_wqe_shm.imp) and
 *             the responder copies it into the completion (vendor_err,
 *             which a receive completion does not use otherwise); the
 *             consumer of the CQ (cq.c: ibv_poll_cq, the ibv_cq_ex
 *             poll) copies the bounce's byte_len bytes to the original
 *             SGEs, each key checked then (the owner's under its access
 *             lane), before the application sees the completion, and
 *             clears vendor_err.  A flushed receive carries its tag too
 *             and only frees the record.
 *   send      the tag is in the private WQE (shca_send_wqe.imp): a SEND's
 *             or a WRITE's gather list is copied into the bounce at the
 *             post; a READ's or an atomic's bounce is copied out when
 *             the WQE completes with success (engine/completer.c).
 *
 * A tag is an index into the table below and a generation: a tag a peer
 * wrote into our CQ (it can write anything there) finds a live record
 * of ours or nothing; at worst it moves bytes of a receive the
 * application posted to where that receive said.  The keys are checked
 * at the post as well: a WQE naming a key that fails then is posted
 * as it was, so the transport meets the bad key as for a key of ours
 * (the responder's local protection error, the requester's).
 */
#define TAG_IDX_BITS	20
#define TAG_IDX_MASK	((1u << TAG_IDX_BITS) - 1)

struct imp_bounce {
	uint32_t tag;
	bool recv;			/* a receive's (else a send WQE's) */
	struct shca_pd *pd;		/* the shadow */
	struct shca_mr *mr;		/* internal, over buf (holds a use
					 * of pd) */
	void *buf;
	size_t map_len;
	uint64_t len;
	int nsge;
	struct ibv_sge sge[];		/* the WQE's own */
};

static pthread_mutex_t bt_lock = PTHREAD_MUTEX_INITIALIZER;
static struct imp_bounce **bt;		/* by index; 0 unused */
static uint16_t *bt_gen;
static uint32_t bt_cap, bt_next = 1;

/* A slot for b, its tag set; false when the table is full. */
static bool bt_add(struct imp_bounce *b)
{
	uint32_t i, n;

	pthread_mutex_lock(&bt_lock);
	for (n = 0; n < bt_cap; n++) {
		i = bt_next + n < bt_cap ? bt_next + n : bt_next + n - bt_cap;
		if (i && !bt[i])
			goto found;
	}
	if (bt_cap <= TAG_IDX_MASK) {
		uint32_t cap = bt_cap ? bt_cap * 2 : 64;
		struct imp_bounce **nb;
		uint16_t *ng;

		if (cap > TAG_IDX_MASK + 1)
			cap = TAG_IDX_MASK + 1;
		nb = realloc(bt, cap * sizeof(*nb));
		if (nb)
			bt = nb;
		ng = nb ? realloc(bt_gen, cap * sizeof(*ng)) : NULL;
		if (ng) {
			bt_gen = ng;
			memset(bt + bt_cap, 0, (cap - bt_cap) * sizeof(*bt));
			memset(bt_gen + bt_cap, 0,
			       (cap - bt_cap) * sizeof(*bt_gen));
			i = bt_cap ? bt_cap : 1;
			bt_cap = cap;
			goto found;
		}
	}
	pthread_mutex_unlock(&bt_lock);
	return false;
found:
	bt[i] = b;
	b->tag = (uint32_t)(bt_gen[i] & 0xfff) << TAG_IDX_BITS | i;
	bt_next = i + 1;
	pthread_mutex_unlock(&bt_lock);
	return true;
}

/* The record of tag, a receive's (recv) or a send WQE's, out of the
 * table (one completion per WQE), or NULL: a receive completion (a
 * peer's words) never names a send WQE's record, whose SGEs are a
 * gather list and whose bounce the net window still reads. */
static struct imp_bounce *bt_take(uint32_t tag, bool recv)
{
	uint32_t i = tag & TAG_IDX_MASK;
	struct imp_bounce *b = NULL;

	pthread_mutex_lock(&bt_lock);
	if (i && i < bt_cap && bt[i] && bt[i]->tag == tag &&
	    bt[i]->recv == recv) {
		b = bt[i];
		bt[i] = NULL;
		bt_gen[i]++;
	}
	pthread_mutex_unlock(&bt_lock);
	return b;
}

/* Peers out of the bounce first (its MR's drain), then the memory. */
static void bounce_free(struct imp_bounce *b)
{
	shca_mr_internal_free(b->mr);
	munmap(b->buf, b->map_len);
	free(b);
}

/* A bounce of total bytes for the n SGEs, in pd (a shadow); NULL: no
 * memory. */
static struct imp_bounce *bounce_new(struct shca_pd *pd,
				     const struct ibv_sge *sge, int n,
				     uint64_t total, bool recv)
{
	size_t ps = shca_page_size();
	struct imp_bounce *b;

	b = calloc(1, sizeof(*b) + (size_t)n * sizeof(*sge));
	if (!b)
		return NULL;
	b->pd = pd;
	b->recv = recv;
	b->len = total;
	b->nsge = n;
	memcpy(b->sge, sge, (size_t)n * sizeof(*sge));
	b->map_len = total ? (total + ps - 1) & ~(ps - 1) : ps;
	b->buf = mmap(NULL, b->map_len, PROT_READ | PROT_WRITE,
		      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (b->buf == MAP_FAILED) {
		free(b);
		return NULL;
	}
	b->mr = shca_mr_internal(pd, b->buf, b->map_len);
	if (!b->mr) {
		munmap(b->buf, b->map_len);
		free(b);
		return NULL;
	}
	if (!bt_add(b)) {
		bounce_free(b);
		return NULL;
	}
	return b;
}

/* The SGE i of b for up to max bytes. */
static struct ibv_sge sge_part(const struct imp_bounce *b, int i,
			       uint64_t max)
{
	struct ibv_sge s = b->sge[i];

	if (s.length > max)
		s.length = (uint32_t)max;
	return s;
}

/*
 * len bytes of the bounce to the original SGEs in order (put), or the
 * SGEs' bytes into the bounce (!put), each key under its rules now: an
 * MR of ours in the shadow PD, or the owner's (its lane held for the
 * copy).  false: a key failed (a Local Protection Error).
 */
static bool bounce_move(struct imp_bounce *b, uint64_t len, bool put)
{
	unsigned int access = put ? IBV_ACCESS_LOCAL_WRITE : 0;
	char *p = b->buf;
	struct iovec m;
	int i, nm;

	for (i = 0; i < b->nsge && len; i++) {
		struct ibv_sge s = sge_part(b, i, len);

		if (!s.length)
			continue;
		/* an MR of ours (mr.c's look-up, which reads its address
		 * while the MR is in the table), else the owner's */
		if (shca_sge_iov(b->pd, &s, 1, access, &m, &nm) ==
		    IBV_WC_SUCCESS) {
			SHCA_DMA_BEGIN();
			if (put)
				memcpy(m.iov_base, p, s.length);
			else
				memcpy(p, m.iov_base, s.length);
			SHCA_DMA_END();
		} else if (shared_copy(b->pd, &s, access, p, put)) {
			return false;
		}
		p += s.length;
		len -= s.length;
	}
	return true;
}

/* Every SGE's key usable now for access (nothing copied). */
static bool keys_usable(struct shca_pd *pd, const struct ibv_sge *sge, int n,
			unsigned int access, uint64_t *total)
{
	uint64_t t = 0;
	int i;

	for (i = 0; i < n; i++) {
		if (!sge[i].length)
			continue;
		t += sge[i].length;
		if (!shca_lookup_mr(pd, sge[i].lkey, access, sge[i].addr,
				    sge[i].length, false) &&
		    shared_copy(pd, &sge[i], access, NULL, false))
			return false;
	}
	*total = t;
	return t <= UINT32_MAX;
}

/*
 * A tag-matching SRQ's IBV_WR_TAG_ADD (verbs/tm.c, before the list's
 * lock): a tag whose buffer names the owner's L_Keys on an import of its
 * PD gets a bounce, as a receive does; the entry names the bounce and
 * carries the tag, which the responder passes on to the completion that
 * says the data are there (the matched eager message's, a rendezvous's
 * second) and to an error completion of the tag.  A key that fails now:
 * the entry as it is (the responder's local protection error).
 */
int shca_imp_tm_add(struct shca_pd *pd, const struct ibv_sge *sge, int n,
		    struct ibv_sge *bsge, uint32_t *imp)
{
	struct imp_bounce *b;
	uint64_t total;

	*imp = 0;
	if (!shca_pd_shared(pd) || n <= 0 || !sge)
		return 0;
	pd = pd->prot;
	if (all_ours(pd, sge, n, IBV_ACCESS_LOCAL_WRITE) ||
	    !keys_usable(pd, sge, n, IBV_ACCESS_LOCAL_WRITE, &total))
		return 0;
	b = bounce_new(pd, sge, n, total, true);
	if (!b)
		return -ENOMEM;
	bsge->addr = (uintptr_t)b->buf;
	bsge->length = (uint32_t)total;
	bsge->lkey = b->mr->ibmr.lkey;
	*imp = b->tag;
	return 0;
}

/* Is no SGE's key a usable MR of ours (in pd, for access)? */
static bool none_ours(struct shca_pd *pd, const struct ibv_sge *sge, int n,
		      unsigned int access)
{
	int i;

	for (i = 0; i < n; i++)
		if (sge[i].length &&
		    shca_lookup_mr(pd, sge[i].lkey, access, sge[i].addr,
				   sge[i].length, false))
			return false;
	return true;
}

/*
 * A receive WR for rq, whose PD is pd (a QP's or an SRQ's, tag-matching
 * or not): an ordinary one is posted as it is; so is one of a QP's own
 * queue (own_rq) whose keys are all the other process's: whoever carries
 * the message out scatters it there itself, under that process's lanes
 * (engine/responder.c build_scatter), and a key that fails then is the
 * responder's local protection error and the sender's NAK, as on
 * hardware.  One that mixes our keys with the other process's, or of an
 * SRQ (whose PD the responder does not know to be shared), gets a bounce
 * (above).
 */
int shca_imp_post_recv(struct shca_rq *rq, struct shca_pd *pd,
		       const struct ibv_recv_wr *wr, bool own_rq)
{
	struct ibv_recv_wr w;
	struct imp_bounce *b;
	struct ibv_sge s;
	uint64_t total;
	int ret;

	if (!shca_pd_shared(pd) || wr->num_sge <= 0 ||
	    (uint32_t)wr->num_sge > rq->max_sge || !wr->sg_list ||
	    all_ours(pd, wr->sg_list, wr->num_sge, IBV_ACCESS_LOCAL_WRITE))
		return shca_rq_post_one(rq, wr);	/* (a bad list too) */
	if (shca_rq_count(rq) >= rq->max_wr)
		return -ENOMEM;
	pd = pd->prot;
	if (own_rq && none_ours(pd, wr->sg_list, wr->num_sge,
				IBV_ACCESS_LOCAL_WRITE))
		return shca_rq_post_one(rq, wr);
	/* a key that fails now: as a bad key of ours, at the responder */
	if (!keys_usable(pd, wr->sg_list, wr->num_sge,
			 IBV_ACCESS_LOCAL_WRITE, &total))
		return shca_rq_post_one(rq, wr);
	b = bounce_new(pd, wr->sg_list, wr->num_sge, total, true);
	if (!b)
		return -ENOMEM;
	s.addr = (uintptr_t)b->buf;
	s.length = (uint32_t)total;
	s.lkey = b->mr->ibmr.lkey;
	w = *wr;
	w.next = NULL;
	w.sg_list = &s;
	w.num_sge = 1;
	ret = shca_rq_post_imp(rq, &w, b->tag);
	if (ret && bt_take(b->tag, true))
		bounce_free(b);
	return ret;
}

/*
 * A receive completion that carries a tag (wc->vendor_err, cq.c): the
 * bounce's bytes go where the receive said, before the application sees
 * it; the tag is cleared.  A key that fails now (the owner deregistered
 * its MR since the post, or is gone): IBV_WC_LOC_PROT_ERR, and the QP to
 * the error state (as the responder's bad key).  The sender was
 * answered when the bytes reached the bounce.
 *
 * The completion is a peer's words (a same-host sender writes it): a tag
 * that names no receive's record of ours (none, a stale generation, a
 * send WQE's) makes a success a Local Protection Error, nothing moved;
 * a byte_len beyond the record's bounce, which no responder would
 * report (it fails such a message with a length error), makes it a
 * Local Length Error, nothing moved.  At worst a forged tag moves the
 * bounce of a receive of ours to that receive's own SGEs.
 */
void shca_imp_recv_wc(struct ibv_wc *wc)
{
	struct imp_bounce *b = bt_take(wc->vendor_err, true);
	/* the data are in the bounce: a receive's, a tag-matching one's
	 * (an unexpected or NO_TAG message, a matched one, a rendezvous's
	 * data or the headers of one too long for the tag); a WRITE with
	 * immediate data places nothing in the receive */
	bool ok = (wc->status == IBV_WC_SUCCESS &&
		   (wc->opcode == IBV_WC_RECV ||
		    wc->opcode == IBV_WC_TM_RECV ||
		    wc->opcode == IBV_WC_TM_NO_TAG)) ||
		  (wc->status == IBV_WC_TM_RNDV_INCOMPLETE &&
		   wc->opcode == IBV_WC_TM_RECV);

	wc->vendor_err = 0;
	if (!b) {
		/* no record of ours: nothing was placed where it asked */
		if (ok)
			wc->status = IBV_WC_LOC_PROT_ERR;
		return;
	}
	if (ok && wc->byte_len > b->len) {
		wc->status = IBV_WC_LOC_LEN_ERR;
	} else if (ok && !bounce_move(b, wc->byte_len, true)) {
		wc->status = IBV_WC_LOC_PROT_ERR;
		shca_qp_mark_error(wc->qp_num);
	}
	bounce_free(b);
}

void shca_imp_tm_wc(struct ibv_wc *wc, uint32_t imp)
{
	wc->vendor_err = imp;
	shca_imp_recv_wc(wc);
	wc->src_qp = shca_qp_dest_qpn(wc->qp_num);
}

/* A tagged WQE or completion that will never be seen (recv: a
 * receive's): its record goes. */
void shca_imp_drop(uint32_t tag, bool recv)
{
	struct imp_bounce *b = tag ? bt_take(tag, recv) : NULL;

	if (b)
		bounce_free(b);
}

static bool wr_lands(enum ibv_wr_opcode op)
{
	return op == IBV_WR_RDMA_READ || op == IBV_WR_ATOMIC_CMP_AND_SWP ||
	       op == IBV_WR_ATOMIC_FETCH_AND_ADD;
}

/*
 * A send WQE just stored (qp.c sq_store): on the net path's RC and XRC,
 * a WQE of a QP on an import whose SGEs name the owner's L_Keys gets a
 * bounce that lives with it until its completion: a SEND's or a WRITE's
 * bytes gathered now (the window reads the bounce at every (re)send), a
 * READ's or an atomic's target copied out at the completion.  A key that
 * fails now, or no memory for the bounce: the WQE stays as it is and
 * completes with the Local Protection Error of a bad key.
 */
void shca_imp_send_store(struct shca_qp *qp, struct shca_send_wqe *w)
{
	bool lands = wr_lands(w->wr.opcode);
	struct imp_bounce *b;
	struct shca_pd *pd;
	uint64_t total;

	if (!w->wr.num_sge || !qp->pd || !shca_pd_shared(qp->pd) ||
	    shca_imp_route_ok(qp->ibqp.qp_type, qp->route))
		return;
	pd = qp->pd->prot;
	if (all_ours(pd, w->sge, w->wr.num_sge,
		     lands ? IBV_ACCESS_LOCAL_WRITE : 0) ||
	    !keys_usable(pd, w->sge, w->wr.num_sge,
			 lands ? IBV_ACCESS_LOCAL_WRITE : 0, &total))
		return;
	b = bounce_new(pd, w->sge, w->wr.num_sge, total, false);
	if (!b)
		return;
	if (!lands && !bounce_move(b, total, false)) {
		if (bt_take(b->tag, false))
			bounce_free(b);
		return;
	}
	w->sge[0].addr = (uintptr_t)b->buf;
	w->sge[0].length = (uint32_t)total;
	w->sge[0].lkey = b->mr->ibmr.lkey;
	w->wr.num_sge = 1;
	w->imp = b->tag;
}

/* The completion of a WQE with a bounce (engine/completer.c): a READ's
 * or an atomic's bytes out, under the keys' rules now; the status the
 * completion takes. */
enum ibv_wc_status shca_imp_send_done(const struct shca_send_wqe *w,
				      enum ibv_wc_status status)
{
	struct imp_bounce *b = bt_take(w->imp, false);

	if (!b)
		return status;
	if (status == IBV_WC_SUCCESS && wr_lands(w->wr.opcode) &&
	    !bounce_move(b, b->len, true))
		status = IBV_WC_LOC_PROT_ERR;
	bounce_free(b);
	return status;
}
