// SPDX-License-Identifier: MIT
/*
 * L_Keys of another process's MRs, used here (docs/import.md, "Keys of
 * another process").
 *
 * A QP of this process on an import of another process's PD (a shadow
 * PD, import_rem.c) may name in its gather and scatter lists the L_Key
 * of any MR of that PD, as a QP of the owner would: on hardware the key
 * means the same MR in both processes.  Such a key is not in this
 * process's MR table; the MR is the owner's, in the owner's memory.  It
 * is reached the way a same-host peer reaches an R_Key (shm/mem.h): an
 * access lane of the owner's claimed, the entry read from the owner's
 * arena under it (key, the PD's identity, the MR's local rights, bounds:
 * engine/responder.c shca_owner_lkey), the bytes copied through the
 * owner's mapped segments or CMA, the lane released -- so the owner's
 * ibv_dereg_mr waits for the copy, and after it the key fails (a Local
 * Protection Error, as on hardware).
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

#include "shca.h"
#include "../engine/engine.h"
#include "../shm/mem.h"
#include "../shm/peer.h"

/* The owner of pd (a shadow), held; NULL if it is gone (its slot empty
 * or another process's now). */
static struct shca_peer *owner_hold(const struct shca_pd *pd)
{
	struct shca_peer *p = shca_peer_get(pd->rslot);

	if (!p || p->self || p->pid != pd->rpid || !shca_peer_hold(p))
		return NULL;
	return p;
}

/* One SGE of the owner's MR: its bytes to buf (put false) or from buf.
 * 0 or -errno. */
static int owner_copy(const struct shca_pd *pd, const struct ibv_sge *s,
		      unsigned int access, void *buf, bool put)
{
	struct shca_peer *p = owner_hold(pd);
	struct iovec l, r;
	uint64_t va;
	int ret;

	if (!p)
		return -ESRCH;
	shca_mem_begin(p);
	ret = shca_owner_lkey(p, pd->rpd, s->lkey, access, s->addr,
			      s->length, &va);
	if (!ret) {
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
	struct shca_mr *mr;

	if (!pd->remote)
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
		mr = shca_lookup_mr(pd, s->lkey, access, s->addr, s->length,
				    false);
		if (mr) {
			iov[k].iov_base = (char *)mr->base +
					  (s->addr - mr->iova);
		} else {
			/* an MR of ours that went meanwhile: none of the
			 * owner's either if it does not fit */
			if (io->nsge == nown || off + s->length > total)
				goto fail;
			iov[k].iov_base = (char *)io->buf + off;
			if (!write &&
			    owner_copy(pd, s, access, iov[k].iov_base, false))
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
		if (owner_copy(io->pd, &io->sge[i], IBV_ACCESS_LOCAL_WRITE,
			       (char *)io->buf + io->off[i], true))
			return IBV_WC_LOC_PROT_ERR;
	return IBV_WC_SUCCESS;
}

/* Is pd an import of another process's PD? */
static bool is_shadow(const struct shca_pd *pd)
{
	return pd && __atomic_load_n(&pd->prot->remote, __ATOMIC_ACQUIRE);
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
 * A receive is scattered by whichever process sends to it, through this
 * process's MR table (engine/responder.c), where the owner's MRs are
 * not: refused at the post.
 */
bool shca_imp_recv_ok(struct shca_pd *pd, uint32_t max_sge,
		      const struct ibv_recv_wr *wr)
{
	if (!is_shadow(pd) || wr->num_sge < 0 ||
	    (uint32_t)wr->num_sge > max_sge || (wr->num_sge && !wr->sg_list))
		return true;	/* (a bad list: refused as usual) */
	return all_ours(pd, wr->sg_list, wr->num_sge, IBV_ACCESS_LOCAL_WRITE);
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
 * at the post.  The route is the QP's at RTR; sq_check_wr runs in RTS. */
bool shca_imp_qp_keys_ok(struct shca_pd *pd, enum ibv_qp_type type,
			 enum shca_route route, const struct ibv_sge *sge,
			 int n)
{
	if (!is_shadow(pd) || !n || shca_imp_route_ok(type, route))
		return true;
	return all_ours(pd, sge, n, 0);
}
