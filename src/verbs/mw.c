// SPDX-License-Identifier: MIT
/*
 * Memory windows (IBA 10.6.7), type 1 and type 2B.
 *
 * A window is a slot of the MR table (mr.c) without memory of its own: a
 * bind publishes in the slot's arena entry a range of an MR, the rights
 * the window grants, and (type 2) the QP it is bound to; peers check
 * R_Keys there as they check an MR's (engine/responder.c), so a window
 * is reached on the same-host path and the net path alike.  The R_Key is
 * a 24-bit random prefix reserved for the window's life (mr_keys.c) and
 * the 8-bit tag of the last bind; the arena's key index holds the prefix
 * (tag 0), the entry the whole key.
 *
 * Binds and invalidations are local operations of a send queue, executed
 * in order by the requester (qp.c shca_wr_local_exec): ibv_bind_mw posts
 * an IBV_WR_BIND_MW for a type 1 window, as rdma-core's providers do.
 * Errors of a bind complete with IBV_WC_MW_BIND_ERR, of a local
 * invalidation with IBV_WC_LOC_QP_OP_ERR (rxe).  The rules, and where
 * spec, rxe and mlx5 differ: docs/memory-windows.md.
 *
 * An entry is cleared (and its key's access lanes drained, shm/seg.c)
 * before a binding ends, so that no peer is inside the window's memory
 * once an unbind, a LOCAL_INV or a dealloc has completed.  A peer's Send
 * with Invalidate ends a type 2 binding by a CAS of the entry's key to 0
 * (responder.c); the owner reads that word to know whether its window is
 * still valid.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../shm/seg.h"
#include "shca.h"

static struct shca_mw *mw_list;	/* under the MR table's lock */
static int mw_count;

/* The MW's arena entry, or NULL (no arena). */
static struct shca_mr_shm *mw_slot(const struct shca_mw *mw)
{
	struct shca_arena *a = shca_arena_self();

	return a ? shca_mr_table_entry(a->base, a->size, mw->index) : NULL;
}

/* Is the binding still valid: published, and not invalidated by a peer's
 * Send with Invalidate (its CAS of the entry's key)?  Lock held. */
static bool mw_valid(const struct shca_mw *mw)
{
	struct shca_mr_shm *slot = mw_slot(mw);

	return mw->bound && slot &&
	       __atomic_load_n(&slot->key, __ATOMIC_ACQUIRE) == mw->key;
}

/* End the binding in the arena (lock held): the caller drains the key's
 * lanes after dropping the lock. */
static void mw_unpublish(struct shca_mw *mw)
{
	struct shca_mr_shm *slot = mw_slot(mw);

	if (slot)
		shca_mr_shm_clear(slot);
	if (mw->mr)
		mw->mr->mw_binds--;
	mw->mr = NULL;
	mw->bound = false;
}

static void mw_publish(struct shca_mw *mw)
{
	struct shca_mr_shm e, *slot = mw_slot(mw);
	struct shca_mr *mr = mw->mr;

	if (!slot)
		return;
	memset(&e, 0, sizeof(e));
	e.key = mw->key;
	e.access = mw->access;
	e.pd = mw->pd->prot->obj.handle;
	e.iova = mw->zero_based ? 0 : mw->addr;
	e.addr = (uintptr_t)mr->base + (mw->addr - mr->iova);
	e.length = mw->length;
	e.flags = SHCA_MR_SHM_MW | (mr->segs ? SHCA_MR_SHM_MAPPED : 0);
	if (mw->ibmw.type == IBV_MW_TYPE_2) {
		e.flags |= SHCA_MR_SHM_MW_QP;
		e.qpn = mw->qpn;
	}
	shca_mr_shm_write(slot, &e);
}

struct ibv_mw *shca_alloc_mw(struct ibv_pd *ibpd, enum ibv_mw_type type)
{
	struct shca_arena *a = shca_arena_self();
	struct shca_pd *pd;
	struct shca_mw *mw;
	uint32_t key;
	int ret;

	if (type != IBV_MW_TYPE_1 && type != IBV_MW_TYPE_2)
		return SHCA_ERR_PTR(EINVAL);
	pd = shca_pd_lookup(ibpd, NULL);
	if (!pd)
		return SHCA_ERR_PTR(EINVAL);
	ret = -ENOMEM;
	mw = calloc(1, sizeof(*mw));
	if (!mw || !a)
		goto err_pd;
	mw->pd = pd;
	shca_mr_table_lock();
	if (mw_count >= SHCA_MAX_MW) {
		shca_mr_table_unlock();
		goto err_pd;
	}
	ret = shca_mr_slot_take(mw, &mw->index);
	if (!ret) {
		ret = shca_mw_key_new(mw, shca_mr_key_fits, a, &key);
		if (ret)
			shca_mr_slot_free(mw->index);
	}
	if (!ret) {
		ret = shca_mr_index_add(&a->mr_index, key & ~0xffu,
					mw->index);
		if (ret) {
			shca_mr_key_retire(key & ~0xffu);
			shca_mr_slot_free(mw->index);
		}
	}
	if (ret) {
		shca_mr_table_unlock();
		ret = -ENOMEM;
		goto err_pd;
	}
	mw->prefix = key & ~0xffu;
	mw->key = key;
	mw->next = mw_list;
	mw_list = mw;
	mw_count++;
	shca_mr_table_unlock();

	mw->ibmw.context = ibpd->context;
	mw->ibmw.pd = ibpd;
	mw->ibmw.rkey = key;
	mw->ibmw.type = type;
	ret = shca_obj_add(&mw->obj, SHCA_OT_MW, ibpd->context, &mw->ibmw,
			   &mw->ibmw.handle);
	if (ret) {
		mw->obj.magic = 0;
		shca_mw_destroy(mw);	/* frees the slot and key */
		return SHCA_ERR_PTR(-ret);
	}
	shca_pd_get(pd);
	shca_obj_put(&pd->obj);
	return &mw->ibmw;

err_pd:
	free(mw);
	shca_obj_put(&pd->obj);
	return SHCA_ERR_PTR(-ret);
}

/*
 * mw holds a use (shca_mw_lookup), which this consumes; or, from a failed
 * alloc, is not in the handle table at all (magic 0).  Deallocation
 * invalidates the binding (IBA 10.6.7.2.4): no peer is inside the window
 * when this returns.
 */
int shca_mw_destroy(struct shca_mw *mw)
{
	struct shca_arena *a = shca_arena_self();
	bool registered = mw->obj.magic != 0;
	struct shca_mw **pp;
	uint32_t key;
	int ret;

	if (registered) {
		ret = shca_obj_claim(&mw->obj, NULL);
		if (ret) {
			shca_obj_put(&mw->obj);
			return ret;
		}
	}
	shca_mr_table_lock();
	mw_unpublish(mw);
	key = mw->key;
	if (a)
		shca_mr_index_del(&a->mr_index, mw->prefix);
	shca_mr_key_retire(mw->prefix);
	shca_mr_slot_free(mw->index);
	for (pp = &mw_list; *pp; pp = &(*pp)->next)
		if (*pp == mw) {
			*pp = mw->next;
			break;
		}
	mw_count--;
	shca_mr_table_unlock();
	shca_seg_drain(key);
	if (!registered) {
		free(mw);
		return 0;
	}
	shca_pd_put(mw->pd);
	shca_obj_retire(&mw->obj, mw, sizeof(*mw));
	return 0;
}

/* The dealloc_mw op: a positive errno, set in errno too.  A handle that
 * names no MW: ENOENT, as the kernel's object lookup. */
int shca_dealloc_mw(struct ibv_mw *ibmw)
{
	struct shca_mw *mw = shca_mw_lookup(ibmw, NULL);

	if (!mw)
		return shca_ret_errno(-ENOENT);
	return shca_ret_errno(shca_mw_destroy(mw));
}

int shca_mw_release_mr(struct shca_mr *mr)
{
	uint32_t keys[64];
	struct shca_mw *mw;
	int n, i;

	for (;;) {
		n = 0;
		shca_mr_table_lock();
		if (!mr->mw_binds) {
			shca_mr_table_unlock();
			return 0;
		}
		for (mw = mw_list; mw; mw = mw->next)
			if (mw->mr == mr && mw_valid(mw)) {
				shca_mr_table_unlock();
				return -EBUSY;
			}
		/* bindings that peers invalidated: let them go, and wait
		 * for any peer still inside through them */
		for (mw = mw_list; mw && n < 64; mw = mw->next)
			if (mw->mr == mr) {
				keys[n++] = mw->key;
				mw_unpublish(mw);
			}
		shca_mr_table_unlock();
		for (i = 0; i < n; i++)
			shca_seg_drain(keys[i]);
	}
}

/*
 * ibv_bind_mw(3) on a type 1 window: an IBV_WR_BIND_MW on the QP with the
 * next tag (rdma-core's inline checked the MR's PD and the type); the
 * window's rkey is the new key once posted, as rxe and mlx5 set it.
 */
int shca_bind_mw(struct ibv_qp *qp, struct ibv_mw *mw,
		 struct ibv_mw_bind *bind)
{
	struct ibv_send_wr wr, *bad;
	int ret;

	if (!qp || !mw || !bind)
		return EINVAL;
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = bind->wr_id;
	wr.opcode = IBV_WR_BIND_MW;
	wr.send_flags = bind->send_flags;
	wr.bind_mw.mw = mw;
	wr.bind_mw.rkey = ibv_inc_rkey(mw->rkey);
	wr.bind_mw.bind_info = bind->bind_info;
	ret = shca_post_send(qp, &wr, &bad);
	if (ret < 0)
		ret = -ret;
	if (!ret)
		mw->rkey = wr.bind_mw.rkey;
	else
		errno = ret;
	return ret;
}

#define MW_ACCESS_REMOTE                                                  \
	(IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE |                \
	 IBV_ACCESS_REMOTE_ATOMIC)

/*
 * The checks of a bind, in the order of IBA 10.6.7.2 (C10-72 .. C10-76)
 * as rxe makes them: 0 or the reason it is a Memory Window Bind Error.
 * mw and mr hold uses; lock held.
 */
static int bind_check(const struct shca_qp *qp, const struct shca_mw *mw,
		      const struct shca_mr *mr,
		      const struct ibv_mw_bind_info *bi)
{
	unsigned int acc = bi->mw_access_flags;
	bool type2 = mw->ibmw.type == IBV_MW_TYPE_2;

	/* rights a window can grant (local write is the MR's business,
	 * ignored as mlx5 does; zero-based for type 2 only, o10-36.2.2) */
	if (acc & ~(MW_ACCESS_REMOTE | IBV_ACCESS_LOCAL_WRITE |
		    IBV_ACCESS_ZERO_BASED))
		return -EINVAL;
	if ((acc & IBV_ACCESS_ZERO_BASED) && !type2)
		return -EINVAL;
	/* the QP, the window and the MR in one PD (C10-72) */
	if (qp->pd->prot != mw->pd->prot)
		return -EPERM;
	/* a type 2 window is bound once until invalidated (o10-37.2.30),
	 * and never to nothing (o10-37.2.40) */
	if (type2 && mw_valid(mw))
		return -EBUSY;
	if (!bi->length)
		return type2 ? -EINVAL : 0;
	if (!mr)
		return -EINVAL;
	if (mr->pd->prot != mw->pd->prot)
		return -EPERM;
	/* C10-73: not over a zero-based MR; C10-74: the MR allows binds */
	if (mr->access & IBV_ACCESS_ZERO_BASED)
		return -EINVAL;
	if (!(mr->access & IBV_ACCESS_MW_BIND))
		return -EACCES;
	/* C10-75: remote write or atomic through the window need the
	 * MR's local write */
	if ((acc & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) &&
	    !(mr->access & IBV_ACCESS_LOCAL_WRITE))
		return -EACCES;
	/* C10-76: within the MR */
	if (mr->iova + mr->ibmr.length < mr->iova ||
	    !shca_range_ok(bi->addr, bi->length, mr->iova,
			   mr->iova + mr->ibmr.length))
		return -ERANGE;
	return 0;
}

enum ibv_wc_status shca_mw_bind_exec(struct shca_qp *qp,
				     const struct ibv_send_wr *wr)
{
	const struct ibv_mw_bind_info *bi = &wr->bind_mw.bind_info;
	struct ibv_context *ctx = qp->ibqp.context;
	struct shca_mr *mr = NULL;
	struct shca_mw *mw;
	uint32_t old = 0;
	int ret;

	mw = shca_mw_lookup(wr->bind_mw.mw, ctx);
	if (!mw)
		return IBV_WC_MW_BIND_ERR;
	if (bi->mr) {
		mr = shca_mr_lookup(bi->mr, ctx);
		if (!mr) {
			shca_obj_put(&mw->obj);
			return IBV_WC_MW_BIND_ERR;
		}
	}
	shca_mr_table_lock();
	ret = bind_check(qp, mw, mr, bi);
	if (ret) {
		shca_mr_table_unlock();
		shca_dbg("qp %#x: bind of mw %#x refused (%d)",
			 qp->ibqp.qp_num, mw->key, ret);
		goto out;
	}
	/* a type 1 window's earlier binding ends first (IBA 10.6.7.2.3) */
	if (mw->bound) {
		old = mw->key;
		mw_unpublish(mw);
		shca_mr_table_unlock();
		shca_seg_drain(old);
		shca_mr_table_lock();
	}
	mw->key = mw->prefix | (wr->bind_mw.rkey & 0xff);
	if (bi->length) {
		mw->mr = mr;
		mr->mw_binds++;
		mw->addr = bi->addr;
		mw->length = bi->length;
		mw->access = bi->mw_access_flags & MW_ACCESS_REMOTE;
		mw->zero_based = bi->mw_access_flags & IBV_ACCESS_ZERO_BASED;
		mw->qpn = qp->ibqp.qp_num;
		mw->bound = true;
		mw_publish(mw);
	}
	shca_mr_table_unlock();
out:
	if (mr)
		shca_obj_put(&mr->obj);
	shca_obj_put(&mw->obj);
	return ret ? IBV_WC_MW_BIND_ERR : IBV_WC_SUCCESS;
}

/*
 * IBV_WR_LOCAL_INV: ends a type 2 window's binding (IBA 10.6.7.2.5).  The
 * key must be the window's current one, the window valid, of the QP's
 * PD; a type 1 window (o10-37.2.26), an MR or an unknown key is an
 * error (rxe's Local QP Operation Error).
 */
enum ibv_wc_status shca_local_inv_exec(struct shca_qp *qp, uint32_t rkey)
{
	struct shca_mw *mw;

	shca_mr_table_lock();
	mw = shca_mw_key_find(rkey);
	if (!mw || mw->key != rkey || mw->ibmw.type != IBV_MW_TYPE_2 ||
	    mw->pd->prot != qp->pd->prot || !mw_valid(mw)) {
		shca_mr_table_unlock();
		return IBV_WC_LOC_QP_OP_ERR;
	}
	mw_unpublish(mw);
	shca_mr_table_unlock();
	shca_seg_drain(rkey);
	return IBV_WC_SUCCESS;
}
