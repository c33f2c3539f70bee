// SPDX-License-Identifier: MIT
/*
 * Memory regions.
 *
 * softhca never pins memory (ulimit -l does not matter): registration
 * checks that the range is mapped with the permissions the access flags
 * need, as pinning would (EFAULT otherwise), and records it in the
 * process's MR table.  One deviation: pages pinned for writing need only
 * write permission in the kernel; softhca also wants them readable, as
 * peers read registered memory with process_vm_readv.
 *
 * lkey == rkey: 32 random bits with no index in them (mr_keys.c), not
 * handed out again before 65536 other regions were deregistered.  The MR
 * sits in a slot of the process's MR table; the key finds it through a
 * hash table here and through the arena's key index for peers
 * (shm/mrkey.c).
 *
 * Every access to registered memory, local or remote, goes through
 * shca_lookup_mr(): key, PD, access rights and bounds, with overflow-safe
 * arithmetic.  Addresses in SGEs and remote requests are in the MR's iova
 * space (the virtual address unless registered with ibv_reg_mr_iova).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../shm/seg.h"
#include "shca.h"

/* The process's MR table: slot i holds the MR with index i (its entry in
 * the arena's MR table has the same slot); keys find MRs (mr_keys.c). */
static pthread_mutex_t mr_table_lock = PTHREAD_MUTEX_INITIALIZER;
static void **mr_table;		/* an MR or an MW (mw.c) */
static uint32_t mr_table_size;	/* slots allocated */
static uint32_t mr_next;	/* next slot to try: slots are reused slowly */
static uint32_t mr_count;

/*
 * Access bits the kernel knows (IB_ACCESS_SUPPORTED): bits 0..7, the
 * FLUSH bits 8 and 9 (kernel 6.2 and later), and the optional range
 * 20..29, which a device may ignore.
 */
#define SHCA_MR_ACCESS_FLUSH	(1u << 8 | 1u << 9)
#define SHCA_MR_ACCESS_KNOWN                                              \
	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |                \
	 IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC |               \
	 IBV_ACCESS_MW_BIND | IBV_ACCESS_ZERO_BASED |                      \
	 IBV_ACCESS_ON_DEMAND | IBV_ACCESS_HUGETLB |                       \
	 SHCA_MR_ACCESS_FLUSH | IBV_ACCESS_OPTIONAL_RANGE)

/* The kernel's ib_access_writable(): what pins the pages for writing. */
static bool access_needs_write(unsigned int access)
{
	return access & (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			 IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_MW_BIND);
}

/*
 * The kernel's ib_check_mr_access(), in its order: remote write and remote
 * atomic need local write (IBA o10-36.2.1), unknown bits are EINVAL, ODP
 * and FLUSH are EOPNOTSUPP on a device without them.  MW_BIND and HUGETLB
 * are accepted, as rxe and mlx5 accept them; ZERO_BASED is honoured (the
 * MR's iova is 0, shca_reg_mr); the optional bits are ignored.
 */
static int check_access(unsigned int access)
{
	if ((access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) &&
	    !(access & IBV_ACCESS_LOCAL_WRITE))
		return -EINVAL;
	if (access & ~(unsigned int)SHCA_MR_ACCESS_KNOWN)
		return -EINVAL;
	if (access & IBV_ACCESS_ON_DEMAND)
		return -EOPNOTSUPP;	/* no ODP: odp_caps are zero */
	if (access & SHCA_MR_ACCESS_FLUSH)
		return -EOPNOTSUPP;	/* no RDMA FLUSH */
	return 0;
}

static uintptr_t page_size(void)
{
	return (uintptr_t)sysconf(_SC_PAGESIZE);
}

/*
 * What pinning [addr, addr + len) would find, as the kernel's
 * ib_umem_get() does it: -EINVAL when the range wraps or covers no page
 * (a zero length at a page boundary; a zero length inside a page pins that
 * page), -EFAULT when a page is not mapped or lacks the permission.
 */
static int check_pages(const void *addr, size_t len, bool write)
{
	uintptr_t start = (uintptr_t)addr, ps = page_size();

	if (len > UINTPTR_MAX - start ||
	    ((start + len + ps - 1) & ~(ps - 1)) < start + len)
		return -EINVAL;
	if (!len) {
		if (!(start & (ps - 1)))
			return -EINVAL;
		return shca_check_range(addr, 1, write);
	}
	return shca_check_range(addr, len, write);
}

/*
 * Publish the MR in the arena's MR table, where peers on this host check
 * their rkeys and the L_Keys of our receive WQEs; mr_table_lock held.
 */
static void mr_publish(struct shca_mr *mr)
{
	struct shca_arena *a = shca_arena_self();
	struct shca_mr_shm e, *slot;

	slot = a ? shca_mr_table_entry(a->base, a->size, mr->index) : NULL;
	if (!slot)
		return;
	memset(&e, 0, sizeof(e));
	e.key = mr->ibmr.lkey;
	e.access = mr->access;
	e.pd = mr->pd->obj.handle;	/* unique in the process (handle.c) */
	e.iova = mr->iova;
	e.addr = (uintptr_t)mr->ibmr.addr;
	e.length = mr->ibmr.length;
	e.flags = mr->segs ? SHCA_MR_SHM_MAPPED : 0;
	shca_mr_shm_write(slot, &e);
}

/* The arena's key index has room for key (mr_keys.c's fits()). */
static bool key_fits(uint32_t key, void *arg)
{
	struct shca_arena *a = arg;

	return shca_mr_index_room(a->base, a->size, key);
}

bool shca_mr_key_fits(uint32_t key, void *arena)
{
	return key_fits(key, arena);
}

void shca_mr_table_lock(void)
{
	pthread_mutex_lock(&mr_table_lock);
}

void shca_mr_table_unlock(void)
{
	pthread_mutex_unlock(&mr_table_lock);
}

/* A free slot of the table for obj (an MR or an MW); lock held. */
int shca_mr_slot_take(void *obj, uint32_t *out)
{
	uint32_t i, idx;

	if (mr_count >= SHCA_MAX_MR)
		return -ENOMEM;
	if (mr_count + 1 >= mr_table_size / 2 &&
	    mr_table_size <= SHCA_MAX_MR) {
		uint32_t nsize = mr_table_size ? mr_table_size * 2 : 256;
		void **nt;

		if (nsize > SHCA_MAX_MR + 1)
			nsize = SHCA_MAX_MR + 1;
		nt = realloc(mr_table, nsize * sizeof(*nt));
		if (nt) {
			memset(nt + mr_table_size, 0,
			       (nsize - mr_table_size) * sizeof(*nt));
			mr_table = nt;
			mr_table_size = nsize;
		}
	}
	/* index 0 is never used: a zero key is never valid */
	for (i = 0; i < mr_table_size; i++) {
		idx = (mr_next + i) % mr_table_size;
		if (idx && !mr_table[idx])
			break;
	}
	if (i == mr_table_size)
		return -ENOMEM;
	mr_table[idx] = obj;
	mr_next = idx + 1;
	mr_count++;
	*out = idx;
	return 0;
}

void shca_mr_slot_free(uint32_t idx)
{
	mr_table[idx] = NULL;
	mr_count--;
}

static int table_insert(struct shca_mr *mr)
{
	struct shca_arena *a = shca_arena_self();
	uint32_t idx, key;
	int ret;

	if (!a)
		return -ENOMEM;		/* peers could not see the MR */
	pthread_mutex_lock(&mr_table_lock);
	ret = shca_mr_slot_take(mr, &idx);
	if (ret) {
		pthread_mutex_unlock(&mr_table_lock);
		return ret;
	}
	ret = shca_mr_key_new(mr, key_fits, a, &key);
	if (!ret) {
		/* the index word first: a reader that finds it checks the
		 * entry's key, which is the MR's only once published */
		ret = shca_mr_index_add(a->base, a->size, key, idx);
		if (ret)
			shca_mr_key_retire(key);
	}
	if (ret) {
		shca_mr_slot_free(idx);
		pthread_mutex_unlock(&mr_table_lock);
		return -ENOMEM;
	}
	mr->index = idx;
	mr->ibmr.lkey = key;
	mr->ibmr.rkey = key;
	mr_publish(mr);
	pthread_mutex_unlock(&mr_table_lock);
	return 0;
}

/*
 * Peers stop reaching the MR's memory: its entry is cleared, then every
 * peer that found it before has left (the lanes' drain, shm/seg.c), and
 * only then may the memory change under it.  The drain runs without
 * mr_table_lock: a peer in this very process may need it to finish.
 */
static void mr_unpublish(struct shca_mr *mr)
{
	struct shca_arena *a = shca_arena_self();
	struct shca_mr_shm *slot;

	if (!a)
		return;
	pthread_mutex_lock(&mr_table_lock);
	slot = shca_mr_table_entry(a->base, a->size, mr->index);
	if (slot)
		shca_mr_shm_clear(slot);
	pthread_mutex_unlock(&mr_table_lock);
	shca_seg_drain(mr->ibmr.lkey);
}

static void table_remove(struct shca_mr *mr)
{
	struct shca_arena *a = shca_arena_self();

	pthread_mutex_lock(&mr_table_lock);
	if (a) {
		struct shca_mr_shm *slot =
			shca_mr_table_entry(a->base, a->size, mr->index);

		shca_mr_index_del(a->base, a->size, mr->ibmr.lkey);
		if (slot)
			shca_mr_shm_clear(slot);
	}
	shca_mr_key_retire(mr->ibmr.lkey);
	shca_mr_slot_free(mr->index);
	pthread_mutex_unlock(&mr_table_lock);
	if (a)
		shca_seg_drain(mr->ibmr.lkey);
}

/* What a registration holds of the memory: the segments' references. */
static void mr_unmap(struct shca_mr *mr)
{
	shca_seg_unmap(mr->segs);
	mr->segs = NULL;
}

/*
 * softhca answers IBV_FORK_UNNEEDED (misc.c): a child gets its own copy
 * of registered memory, with or without ibv_fork_init, as the kernel
 * gives it for pinned pages since Linux 5.13; so no segment is made
 * MADV_DONTFORK (shm/seg_fork.c makes the copy).
 */
static bool mr_map(struct shca_mr *mr)
{
	mr->segs = shca_seg_map(mr->ibmr.addr, mr->ibmr.length, false);
	return mr->segs;
}

/*
 * The MR that key names, if it belongs to pd, allows access (IBV_ACCESS_*
 * bits; 0 for a local read) and covers [addr, addr + len) in its iova
 * space.  remote selects rkey semantics.  NULL otherwise.
 */
struct shca_mr *shca_lookup_mr(struct shca_pd *pd, uint32_t key,
			       unsigned int access, uint64_t addr,
			       uint64_t len, bool remote)
{
	struct shca_mr *mr;

	pthread_mutex_lock(&mr_table_lock);
	mr = shca_mr_key_find(key);
	if (mr && (remote ? mr->ibmr.rkey : mr->ibmr.lkey) != key)
		mr = NULL;
	if (mr && mr->pd != pd)
		mr = NULL;
	if (mr && (mr->access & access) != access)
		mr = NULL;
	if (mr && len &&
	    !shca_range_ok(addr, len, mr->iova, mr->iova + mr->ibmr.length))
		mr = NULL;
	pthread_mutex_unlock(&mr_table_lock);
	return mr;
}

/*
 * The checks of ib_uverbs_reg_mr(), in its order: the PD after the
 * arguments, a PD the handle does not name (destroyed, of another
 * context) EINVAL as its uobj_get_obj_read() failure; then the pages.
 */
static int reg_check(struct ibv_pd *ibpd, void *addr, size_t length,
		     uint64_t *iova, unsigned int *access, struct shca_pd **pd)
{
	int ret;

	/* address and iova at the same offset within a page */
	if (((uintptr_t)addr ^ *iova) & (page_size() - 1))
		return -EINVAL;
	ret = check_access(*access);
	if (ret)
		return ret;
	*access &= ~(unsigned int)IBV_ACCESS_OPTIONAL_RANGE;
	/* ibv_reg_mr(3): a zero-based MR is addressed by byte offsets from
	 * its start (as an iova of 0), through its L_Key and R_Key alike */
	if (*access & IBV_ACCESS_ZERO_BASED)
		*iova = 0;
	if (length > UINT64_MAX - *iova)
		return -EINVAL;	/* iova space wraps */
	*pd = shca_pd_lookup(ibpd, NULL);
	if (!*pd)
		return -EINVAL;
	ret = check_pages(addr, length, access_needs_write(*access));
	if (ret)
		shca_obj_put(&(*pd)->obj);
	return ret;
}

struct ibv_mr *shca_reg_mr(struct ibv_pd *ibpd, void *addr, size_t length,
			   uint64_t iova, unsigned int access)
{
	struct shca_pd *pd;
	struct shca_mr *mr;
	int ret;

	ret = reg_check(ibpd, addr, length, &iova, &access, &pd);
	if (ret)
		return SHCA_ERR_PTR(-ret);

	ret = -ENOMEM;
	mr = calloc(1, sizeof(*mr));
	if (!mr)
		goto err_pd;
	mr->pd = pd;
	mr->iova = iova;
	mr->access = access;
	mr->ibmr.context = ibpd->context;
	mr->ibmr.pd = ibpd;
	mr->ibmr.addr = addr;
	mr->ibmr.length = length;
	mr_map(mr);
	ret = table_insert(mr);
	if (ret)
		goto err_unmap;
	ret = shca_obj_add(&mr->obj, SHCA_OT_MR, ibpd->context, &mr->ibmr,
			   &mr->ibmr.handle);
	if (ret) {
		table_remove(mr);
		goto err_unmap;
	}
	shca_pd_get(pd);	/* while the PD's use keeps it */
	shca_obj_put(&pd->obj);
	return &mr->ibmr;

err_unmap:
	mr_unmap(mr);
	free(mr);
err_pd:
	shca_obj_put(&pd->obj);
	return SHCA_ERR_PTR(-ret);
}

/*
 * mr holds a use (shca_mr_lookup), which this consumes.  An MR with a
 * valid memory window bound to it stays: EBUSY (docs/memory-windows.md;
 * IBA 10.6.7.2 and rxe refuse it too, mlx5 lets the windows die with it).
 */
int shca_mr_destroy(struct shca_mr *mr)
{
	int ret = shca_obj_claim(&mr->obj, NULL);

	if (ret) {
		shca_obj_put(&mr->obj);
		return ret;
	}
	ret = shca_mw_release_mr(mr);
	if (ret) {
		shca_obj_unclaim(&mr->obj);
		shca_obj_put(&mr->obj);
		return ret;
	}
	table_remove(mr);
	mr_unmap(mr);
	shca_pd_put(mr->pd);
	shca_obj_retire(&mr->obj, mr, sizeof(*mr));
	return 0;
}

/* A handle that names no MR: ENOENT, as the kernel's object lookup. */
int shca_dereg_mr(struct ibv_mr *ibmr)
{
	struct shca_mr *mr = shca_mr_lookup(ibmr, NULL);

	if (!mr)
		return -ENOENT;
	return shca_mr_destroy(mr);
}

/*
 * IBV_REREG_MR_*: change the PD, the range, the access flags, or several;
 * all checks first, so a failure leaves the MR as it was.  The checks are
 * those of the kernel's ib_uverbs_rereg_mr() (no flag at all is EINVAL;
 * access as for registration) and of mlx5's rereg: a new range is
 * checked as registration pins it, with the new access or the old one; an
 * access change alone re-checks nothing, as the device keeps its pages.
 * The keys stay the same, as rxe does.  An MR the handle does not name is
 * ENOENT (the kernel looks it up for writing), a new PD it does not name
 * EINVAL.
 */
/* What a rereg makes of the MR, all checked before anything changes. */
struct rereg {
	struct shca_pd *pd;		/* with a use, or NULL: unchanged */
	unsigned int access;
	void *addr;
	size_t length;
	uint64_t iova;
};

static int rereg_check(struct shca_mr *mr, int flags, struct ibv_pd *ibpd,
		       void *addr, size_t length, int access,
		       struct rereg *r)
{
	int ret;

	r->pd = NULL;
	r->access = mr->access;
	r->addr = mr->ibmr.addr;
	r->length = mr->ibmr.length;
	r->iova = mr->iova;
	if (!flags)
		return -EINVAL;
	if (flags & IBV_REREG_MR_CHANGE_ACCESS) {
		ret = check_access((unsigned int)access);
		if (ret)
			return ret;
		r->access = (unsigned int)access &
			    ~(unsigned int)IBV_ACCESS_OPTIONAL_RANGE;
	}
	if (flags & IBV_REREG_MR_CHANGE_PD) {
		r->pd = shca_pd_lookup(ibpd, mr->obj.ctx);
		if (!r->pd)
			return -EINVAL;
	}
	if (flags & IBV_REREG_MR_CHANGE_TRANSLATION) {
		r->addr = addr;
		r->length = length;
		r->iova = (uintptr_t)addr;
		ret = check_pages(addr, length, access_needs_write(r->access));
		if (ret) {
			if (r->pd)
				shca_obj_put(&r->pd->obj);
			r->pd = NULL;
			return ret;
		}
	}
	if (r->access & IBV_ACCESS_ZERO_BASED)
		r->iova = 0;
	else if ((mr->access & IBV_ACCESS_ZERO_BASED) &&
		 !(flags & IBV_REREG_MR_CHANGE_TRANSLATION))
		r->iova = (uintptr_t)mr->ibmr.addr;
	return 0;
}

int shca_rereg_mr(struct ibv_mr *ibmr, int flags, struct ibv_pd *ibpd,
		  void *addr, size_t length, int access)
{
	struct shca_mr *mr, old;
	bool moved = flags & IBV_REREG_MR_CHANGE_TRANSLATION;
	struct shca_seg_hold *segs;
	struct rereg r;
	int ret;

	mr = shca_mr_lookup(ibmr, NULL);
	if (!mr)
		return -ENOENT;
	ret = rereg_check(mr, flags, ibpd, addr, length, access, &r);
	if (ret) {
		shca_obj_put(&mr->obj);
		return ret;
	}
	/* the windows bound to it would outlive what they were bound to */
	ret = shca_mw_release_mr(mr);
	if (ret) {
		if (r.pd)
			shca_obj_put(&r.pd->obj);
		shca_obj_put(&mr->obj);
		return ret;
	}

	/* the new range shareable before the old one is let go: both hold
	 * references to the pages they share */
	old = *mr;
	segs = moved ? shca_seg_map(r.addr, r.length, false) : mr->segs;
	/* no peer uses the old translation, PD or access once this returns */
	mr_unpublish(mr);
	pthread_mutex_lock(&mr_table_lock);
	mr->segs = segs;
	if (r.pd) {
		shca_pd_get(r.pd);
		shca_pd_put(mr->pd);
		mr->pd = r.pd;
		shca_obj_put(&r.pd->obj);
	}
	mr->access = r.access;
	mr->iova = r.iova;
	mr->ibmr.addr = r.addr;
	mr->ibmr.length = r.length;
	mr_publish(mr);
	pthread_mutex_unlock(&mr_table_lock);
	if (moved)
		mr_unmap(&old);
	shca_obj_put(&mr->obj);
	return 0;
}

/* ------------------------------------------------------------------ */
/* Exported verbs                                                      */

/* rdma-core's ibv_reg_mr_iova2 calls ibv_dontfork_range first (not for
 * ODP), which makes a later ibv_fork_init too late; so does softhca. */
struct ibv_mr *ibv_reg_mr_iova2(struct ibv_pd *pd, void *addr, size_t length,
				uint64_t iova, unsigned int access)
{
	if (!(access & IBV_ACCESS_ON_DEMAND))
		shca_fork_range_used();
	return shca_reg_mr(pd, addr, length, iova, access);
}

#undef ibv_reg_mr
SHCA_DEFAULT_VERSION(ibv_reg_mr)
struct ibv_mr *shca_latest_ibv_reg_mr(struct ibv_pd *pd, void *addr,
				      size_t length, int access)
{
	return ibv_reg_mr_iova2(pd, addr, length, (uintptr_t)addr,
				(unsigned int)access);
}

#undef ibv_reg_mr_iova
struct ibv_mr *ibv_reg_mr_iova(struct ibv_pd *pd, void *addr, size_t length,
			       uint64_t iova, int access)
{
	return ibv_reg_mr_iova2(pd, addr, length, iova, (unsigned int)access);
}

/*
 * rdma-core's argument checks (IBV_REREG_MR_ERR_INPUT), then the device's
 * (IBV_REREG_MR_ERR_CMD), errno set in both cases.  The fork-related codes
 * (IBV_REREG_MR_ERR_DONT_FORK_NEW, _DO_FORK_OLD, _CMD_AND_DO_FORK_NEW) come
 * from madvise() on pinned pages in rdma-core; softhca pins nothing, so
 * they never occur.
 */
int ibv_rereg_mr(struct ibv_mr *mr, int flags, struct ibv_pd *pd, void *addr,
		 size_t length, int access)
{
	int ret;

	if (flags & ~IBV_REREG_MR_FLAGS_SUPPORTED) {
		errno = EINVAL;
		return IBV_REREG_MR_ERR_INPUT;
	}
	if ((flags & IBV_REREG_MR_CHANGE_TRANSLATION) &&
	    (!length || !addr)) {
		errno = EINVAL;
		return IBV_REREG_MR_ERR_INPUT;
	}
	if (access && !(flags & IBV_REREG_MR_CHANGE_ACCESS)) {
		errno = EINVAL;
		return IBV_REREG_MR_ERR_INPUT;
	}
	if (flags & IBV_REREG_MR_CHANGE_TRANSLATION)
		shca_fork_range_used();
	ret = shca_rereg_mr(mr, flags, pd, addr, length, access);
	if (ret) {
		errno = -ret;
		return IBV_REREG_MR_ERR_CMD;
	}
	if (flags & IBV_REREG_MR_CHANGE_PD)
		mr->pd = pd;
	return 0;
}

SHCA_DEFAULT_VERSION(ibv_dereg_mr)
int shca_latest_ibv_dereg_mr(struct ibv_mr *mr)
{
	int ret = shca_ret_errno(shca_dereg_mr(mr));

	if (!ret)
		shca_fork_range_used();
	return ret;
}
