// SPDX-License-Identifier: MIT
/*
 * Memory regions.
 *
 * softhca never pins memory (ulimit -l does not matter): registration
 * checks that the range is mapped with the permissions the access flags
 * need, as pinning would (EFAULT otherwise), and records it in the
 * process's MR table.  An ODP MR (IBV_ACCESS_ON_DEMAND, implicit ODP
 * too) checks no page then: its pages are checked at each access, as a
 * NIC faults them in, and it is never re-backed (docs/dm-odp.md).  One deviation: pages pinned for writing need only
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
/* bumped under mr_table_lock whenever a key leaves the table or an MR's
 * translation, PD or access changes: what a struct shca_mr_cache holds
 * is good while it has not moved (starts at 1: a cache's 0 is empty) */
static uint64_t mr_gen = 1;

static void table_changed(void)
{
	__atomic_add_fetch(&mr_gen, 1, __ATOMIC_RELEASE);
}

/*
 * Access bits the kernel knows (IB_ACCESS_SUPPORTED): bits 0..7, the
 * FLUSH bits 8 and 9 (kernel 6.2 and later), and the optional range
 * 20..29, which a device may ignore.
 */
#define SHCA_MR_ACCESS_FLUSH                                              \
	(SHCA_ACCESS_FLUSH_GLOBAL | SHCA_ACCESS_FLUSH_PERSISTENT)
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
 * atomic need local write (IBA o10-36.2.1), unknown bits are EINVAL,
 * FLUSH_PERSISTENT is EOPNOTSUPP (global visibility is offered,
 * persistence is not: docs/conformance.md).  ON_DEMAND is offered
 * (odp_caps; docs/dm-odp.md).  MW_BIND and HUGETLB are accepted, as rxe
 * and mlx5 accept them; ZERO_BASED is honoured (the MR's iova is 0,
 * shca_reg_mr); the optional bits are ignored.
 */
static int check_access(unsigned int access)
{
	if ((access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) &&
	    !(access & IBV_ACCESS_LOCAL_WRITE))
		return -EINVAL;
	if (access & ~(unsigned int)SHCA_MR_ACCESS_KNOWN)
		return -EINVAL;
	/* FLUSH: global visibility, not persistence (docs/conformance.md,
	 * "ATOMIC WRITE and FLUSH") */
	if (access & SHCA_ACCESS_FLUSH_PERSISTENT)
		return -EOPNOTSUPP;
	return 0;
}

/*
 * What pinning [addr, addr + len) would find, as the kernel's
 * ib_umem_get() does it: -EINVAL when the range wraps or covers no page
 * (a zero length at a page boundary; a zero length inside a page pins that
 * page), -EFAULT when a page is not mapped or lacks the permission.
 */
static int check_pages(const void *addr, size_t len, bool write)
{
	uintptr_t start = (uintptr_t)addr, ps = shca_page_size();

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
	/* unique in the process (handle.c); a parent domain's PD */
	e.pd = mr->pd->prot->obj.handle;
	e.iova = mr->iova;
	e.addr = (uintptr_t)mr->base;
	e.length = mr->ibmr.length;
	e.flags = mr->segs ? SHCA_MR_SHM_MAPPED : 0;
	shca_mr_shm_write(slot, &e);
}

/* The arena's key index has room for key (mr_keys.c's fits()). */
static bool key_fits(uint32_t key, void *arg)
{
	struct shca_arena *a = arg;

	return shca_mr_index_room(&a->mr_index, key);
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

/*
 * The lines a registration (key 0: the key this thread draws next) or
 * the deregistration of key will look up, asked for before the system
 * calls and other work that come first (issue 12): the key map's, the
 * arena key index group's, and slot's MR table entry (slot 0: none).
 */
static void key_warm(uint32_t key, uint32_t slot)
{
	struct shca_arena *a = shca_arena_self();
	struct shca_mr_shm *e;

	pthread_mutex_lock(&mr_table_lock);
	key = shca_mr_key_prefetch(key);
	pthread_mutex_unlock(&mr_table_lock);
	if (!a)
		return;
	shca_mr_index_prefetch(&a->mr_index, key);
	e = slot ? shca_mr_table_entry(a->base, a->size, slot) : NULL;
	if (e)
		__builtin_prefetch(e, 1, 3);
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
		ret = shca_mr_index_add(&a->mr_index, key, idx);
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

		shca_mr_index_del(&a->mr_index, mr->ibmr.lkey);
		if (slot)
			shca_mr_shm_clear(slot);
	}
	table_changed();
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
	if (mr->access & IBV_ACCESS_ON_DEMAND)
		return false;	/* it follows the mapping: never re-backed */
	mr->segs = shca_seg_map(mr->base, mr->ibmr.length, false);
	return mr->segs;
}

/*
 * An ODP MR's pages are looked at when they are used, as a NIC faults
 * them in: [p, p + len) (in this process) must be mapped now, and
 * writable for a write.  What hardware answers for a page that cannot
 * be faulted in is the caller's (LOC_PROT_ERR, REM_ACCESS_ERR).
 */
static bool odp_present(const void *p, uint64_t len, unsigned int access)
{
	bool write = access & (IBV_ACCESS_LOCAL_WRITE |
			       IBV_ACCESS_REMOTE_WRITE |
			       IBV_ACCESS_REMOTE_ATOMIC);

	if (!len)
		return true;
	return !shca_check_range(p, (size_t)len, write);
}

/* shca_lookup_mr()'s checks; mr_table_lock held. */
static struct shca_mr *lookup_locked(struct shca_pd *pd, uint32_t key,
				     unsigned int access, uint64_t addr,
				     uint64_t len, bool remote)
{
	struct shca_mr *mr = shca_mr_key_find(key);

	if (mr && (remote ? mr->ibmr.rkey : mr->ibmr.lkey) != key)
		return NULL;
	if (mr && mr->pd->prot != pd->prot)
		return NULL;
	if (mr && (mr->access & access) != access)
		return NULL;
	if (mr && len &&
	    !shca_range_ok(addr, len, mr->iova, mr->iova + mr->ibmr.length))
		return NULL;
	return mr;
}

/*
 * The MR that key names, if it belongs to pd, allows access (IBV_ACCESS_*
 * bits; 0 for a local read) and covers [addr, addr + len) in its iova
 * space, and in *p the address of that range in this process, read while
 * the MR is in the table.  remote selects rkey semantics.  NULL
 * otherwise.
 */
static struct shca_mr *lookup(struct shca_pd *pd, uint32_t key,
			      unsigned int access, uint64_t addr, uint64_t len,
			      bool remote, char **p)
{
	struct shca_mr *mr;
	bool odp = false;

	*p = NULL;
	pthread_mutex_lock(&mr_table_lock);
	mr = lookup_locked(pd, key, access, addr, len, remote);
	if (mr) {
		*p = (char *)mr->base + (addr - mr->iova);
		odp = mr->access & IBV_ACCESS_ON_DEMAND;
	}
	pthread_mutex_unlock(&mr_table_lock);
	if (mr && odp && !odp_present(*p, len, access)) {
		*p = NULL;
		mr = NULL;
	}
	return mr;
}

/*
 * The MR may be deregistered (and freed) by another thread as soon as
 * this returns: a caller that needs more than "there was one" takes
 * shca_lookup_addr's answer.
 */
struct shca_mr *shca_lookup_mr(struct shca_pd *pd, uint32_t key,
			       unsigned int access, uint64_t addr,
			       uint64_t len, bool remote)
{
	char *p;

	return lookup(pd, key, access, addr, len, remote, &p);
}

/* The address of [addr, addr + len) in this process, or NULL. */
void *shca_lookup_addr(struct shca_pd *pd, uint32_t key, unsigned int access,
		       uint64_t addr, uint64_t len, bool remote)
{
	char *p;

	lookup(pd, key, access, addr, len, remote, &p);
	return p;
}

/*
 * An L_Key through c: the address if c holds key as the table has it now
 * (and the MR allows access and covers the range), else the table's
 * answer, kept in c when it is a plain MR's (an ODP MR's pages are
 * looked at on every use).
 */
static void *lookup_cached(struct shca_pd *pd, struct shca_mr_cache *c,
			   uint32_t key, unsigned int access, uint64_t addr,
			   uint64_t len)
{
	struct shca_mr *mr;
	char *p = NULL;

	if (c->gen == __atomic_load_n(&mr_gen, __ATOMIC_ACQUIRE) &&
	    c->key == key && c->prot == pd->prot &&
	    (c->access & access) == access &&
	    shca_range_ok(addr, len, c->iova, c->iova + c->length))
		return c->base + (addr - c->iova);
	pthread_mutex_lock(&mr_table_lock);
	mr = lookup_locked(pd, key, access, addr, len, false);
	if (mr && !(mr->access & IBV_ACCESS_ON_DEMAND)) {
		c->gen = __atomic_load_n(&mr_gen, __ATOMIC_RELAXED);
		c->key = key;
		c->prot = mr->pd->prot;
		c->access = mr->access;
		c->iova = mr->iova;
		c->length = mr->ibmr.length;
		c->base = mr->base;
		p = (char *)mr->base + (addr - mr->iova);
	}
	pthread_mutex_unlock(&mr_table_lock);
	if (mr && !p)
		return shca_lookup_addr(pd, key, access, addr, len, false);
	return p;
}

/*
 * A local SGE list as this process's memory: every SGE's L_Key an MR of
 * pd with access (IBV_ACCESS_LOCAL_WRITE where the HCA writes) over the
 * SGE's range, else IBA's Local Protection Error.  Empty SGEs take no
 * iovec; iov has room for n.
 */
enum ibv_wc_status shca_sge_iov(struct shca_pd *pd, const struct ibv_sge *sge,
				int n, unsigned int access, struct iovec *iov,
				int *niov)
{
	return shca_sge_iov_cached(pd, NULL, sge, n, access, iov, niov);
}

enum ibv_wc_status shca_sge_iov_cached(struct shca_pd *pd,
				       struct shca_mr_cache *c,
				       const struct ibv_sge *sge, int n,
				       unsigned int access, struct iovec *iov,
				       int *niov)
{
	int i, k = 0;

	for (i = 0; i < n; i++) {
		const struct ibv_sge *s = &sge[i];
		void *p;

		if (!s->length)
			continue;
		p = c ? lookup_cached(pd, c, s->lkey, access, s->addr,
				      s->length) :
			shca_lookup_addr(pd, s->lkey, access, s->addr,
					 s->length, false);
		if (!p)
			return IBV_WC_LOC_PROT_ERR;
		iov[k].iov_base = p;
		iov[k].iov_len = s->length;
		k++;
	}
	*niov = k;
	return IBV_WC_SUCCESS;
}

/*
 * An ODP registration pins nothing and faults nothing in (the kernel's
 * ib_umem_odp_get): a range that wraps or is empty is EINVAL, pages need
 * not be mapped yet.  Implicit ODP is the whole address space.
 */
static int odp_check(const void *addr, size_t len)
{
	uintptr_t start = (uintptr_t)addr;

	if (!addr && len == SIZE_MAX)
		return 0;
	if (!len || len > UINTPTR_MAX - start)
		return -EINVAL;
	return 0;
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
	if (((uintptr_t)addr ^ *iova) & (shca_page_size() - 1))
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
	/* implicit ODP (ibv_reg_mr(3)): addr NULL, length SIZE_MAX, the
	 * whole address space, iova = address */
	if (!addr && length == SIZE_MAX && *iova)
		return -EINVAL;
	*pd = shca_pd_lookup(ibpd, NULL);
	if (!*pd)
		return -EINVAL;
	if (*access & IBV_ACCESS_ON_DEMAND)
		ret = odp_check(addr, length);
	else
		ret = check_pages(addr, length, access_needs_write(*access));
	if (ret)
		shca_obj_put(&(*pd)->obj);
	return ret;
}

/*
 * MR structs that left the quarantine (handle.c), kept for new MRs
 * rather than freed: a free of one deregistered thousands of MRs ago
 * missed in its cold chunk and neighbours, and malloc consolidated them,
 * a sixth of a deregistration's own time (issue 12).  Last in, first
 * out; at most MR_SPARE_MAX, the rest freed.  Only memory comes back
 * this way: a dead MR stays dead for as long as the quarantine holds it.
 */
#define MR_SPARE_MAX	65536u
static pthread_mutex_t mr_spare_lock = PTHREAD_MUTEX_INITIALIZER;
static void *mr_spare;		/* linked through their first word */
static uint32_t mr_spare_n;

static void mr_spare_put(void *mem)
{
	pthread_mutex_lock(&mr_spare_lock);
	if (mr_spare_n < MR_SPARE_MAX) {
		*(void **)mem = mr_spare;
		mr_spare = mem;
		mr_spare_n++;
		mem = NULL;
	}
	pthread_mutex_unlock(&mr_spare_lock);
	free(mem);
}

/* A zeroed MR struct, as calloc gives it. */
static struct shca_mr *mr_alloc(void)
{
	void *mem;

	pthread_mutex_lock(&mr_spare_lock);
	mem = mr_spare;
	if (mem) {
		mr_spare = *(void **)mem;
		mr_spare_n--;
	}
	pthread_mutex_unlock(&mr_spare_lock);
	if (!mem)
		return calloc(1, sizeof(struct shca_mr));
	memset(mem, 0, sizeof(struct shca_mr));
	return mem;
}

/* A new MR over [base, base + length) at iova, in pd (its use is
 * consumed); dm: a DM MR, whose public addr is NULL. */
static struct ibv_mr *mr_create(struct ibv_pd *ibpd, struct shca_pd *pd,
				void *base, size_t length, uint64_t iova,
				unsigned int access, struct shca_dm *dm)
{
	struct shca_mr *mr;
	int ret;

	ret = -ENOMEM;
	mr = mr_alloc();
	if (!mr)
		goto err_pd;
	mr->pd = pd;
	mr->iova = iova;
	mr->access = access;
	mr->base = base;
	mr->dm = dm;
	mr->ibmr.context = ibpd->context;
	mr->ibmr.pd = ibpd;
	mr->ibmr.addr = dm ? NULL : base;
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
	if (dm)
		__atomic_add_fetch(&dm->refs, 1, __ATOMIC_RELAXED);
	shca_obj_put(&pd->obj);
	return &mr->ibmr;

err_unmap:
	mr_unmap(mr);
	free(mr);
err_pd:
	shca_obj_put(&pd->obj);
	return SHCA_ERR_PTR(-ret);
}

struct ibv_mr *shca_reg_mr(struct ibv_pd *ibpd, void *addr, size_t length,
			   uint64_t iova, unsigned int access)
{
	struct shca_vma_notes notes;
	struct shca_pd *pd;
	struct ibv_mr *mr;
	int ret;

	/* the check's answers about the mappings serve the remap too */
	shca_vma_note_begin(&notes);
	ret = reg_check(ibpd, addr, length, &iova, &access, &pd);
	if (!ret)
		key_warm(0, 0);	/* ahead of the remap's system calls */
	mr = ret ? SHCA_ERR_PTR(-ret) :
		   mr_create(ibpd, pd, addr, length, iova, access, NULL);
	shca_vma_note_end();
	return mr;
}

/* dm.c checked the DM, the range and the access (zero-based). */
struct ibv_mr *shca_reg_mr_dm(struct ibv_pd *ibpd, struct shca_dm *dm,
			      uint64_t offset, size_t length,
			      unsigned int access)
{
	struct shca_pd *pd;
	int ret;

	ret = check_access(access);
	if (ret)
		return SHCA_ERR_PTR(-ret);
	access &= ~(unsigned int)IBV_ACCESS_OPTIONAL_RANGE;
	pd = shca_pd_lookup(ibpd, dm->ibdm.context);
	if (!pd)
		return SHCA_ERR_PTR(ENOENT);	/* an ioctl attribute */
	return mr_create(ibpd, pd, (char *)dm->mem + offset, length, 0,
			 access, dm);
}

/*
 * mr holds a use (shca_mr_lookup), which this consumes.  An MR with a
 * valid memory window bound to it stays: EBUSY (docs/memory-windows.md;
 * IBA 10.6.7.2 and rxe refuse it too, mlx5 lets the windows die with it).
 */
int shca_mr_destroy(struct shca_mr *mr)
{
	int ret;

	key_warm(mr->ibmr.lkey, mr->index);
	ret = shca_obj_claim(&mr->obj, NULL);

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
	if (mr->dm)
		__atomic_sub_fetch(&mr->dm->refs, 1, __ATOMIC_RELAXED);
	shca_obj_retire_to(&mr->obj, mr, sizeof(*mr), mr_spare_put);
	return 0;
}

/*
 * An MR the library makes for itself (import_key.c: a bounce buffer in
 * an imported PD): in the MR table and the arena's, where peers and the
 * net responder check the L_Keys of receive WQEs, but no object of the
 * handle table, so the application never names it.  Local write only:
 * its key is no R_Key.  pd gets a use, which shca_mr_internal_free
 * returns; the memory stays the caller's.
 */
struct shca_mr *shca_mr_internal(struct shca_pd *pd, void *base,
				 size_t length)
{
	struct shca_mr *mr = calloc(1, sizeof(*mr));

	if (!mr)
		return NULL;
	mr->pd = pd;
	mr->iova = (uintptr_t)base;
	mr->access = IBV_ACCESS_LOCAL_WRITE;
	mr->base = base;
	mr->ibmr.context = pd->ibpd.context;
	mr->ibmr.pd = &pd->ibpd;
	mr->ibmr.addr = base;
	mr->ibmr.length = length;
	mr_map(mr);
	if (table_insert(mr)) {
		mr_unmap(mr);
		free(mr);
		return NULL;
	}
	shca_pd_get(pd);
	return mr;
}

/* Peers drained (table_remove), the pages private again, the use gone. */
void shca_mr_internal_free(struct shca_mr *mr)
{
	if (!mr)
		return;
	table_remove(mr);
	mr_unmap(mr);
	shca_pd_put(mr->pd);
	free(mr);
}

/* A handle that names no MR: ENOENT, as the kernel's object lookup. */
int shca_dereg_mr(struct ibv_mr *ibmr)
{
	struct shca_mr *mr = shca_mr_lookup(ibmr, NULL);
	uint32_t h;
	int ret;

	/* the MR of another process: its owner deregisters it
	 * (docs/import.md) */
	if (!mr)
		return shca_import_ahandle(ibmr, SHCA_OT_MR, &h) ?
			       shca_rimport_destroy(ibmr, SHCA_OT_MR) : -ENOENT;
	ret = shca_mr_destroy(mr);
	if (!ret)
		shca_import_destroyed(ibmr);
	return ret;
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
	r->addr = mr->base;
	r->length = mr->ibmr.length;
	r->iova = mr->iova;
	if (!flags)
		return -EINVAL;
	if (mr->dm)
		return -EINVAL;	/* the kernel: no rereg of a DM MR */
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
	if ((flags & IBV_REREG_MR_CHANGE_TRANSLATION) ||
	    ((mr->access & ~r->access) & IBV_ACCESS_ON_DEMAND)) {
		/* a new range, or an ODP MR that becomes an ordinary one:
		 * its pages are checked as registration checks them */
		if (flags & IBV_REREG_MR_CHANGE_TRANSLATION) {
			r->addr = addr;
			r->length = length;
			r->iova = (uintptr_t)addr;
		}
		ret = r->access & IBV_ACCESS_ON_DEMAND ?
			      odp_check(r->addr, r->length) :
			      check_pages(r->addr, r->length,
					  access_needs_write(r->access));
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
		r->iova = (uintptr_t)mr->base;
	return 0;
}

int shca_rereg_mr(struct ibv_mr *ibmr, int flags, struct ibv_pd *ibpd,
		  void *addr, size_t length, int access)
{
	struct shca_mr *mr, old;
	bool moved;
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
	 * references to the pages they share; an ODP MR holds none */
	old = *mr;
	moved = (flags & IBV_REREG_MR_CHANGE_TRANSLATION) ||
		((mr->access ^ r.access) & IBV_ACCESS_ON_DEMAND);
	segs = !moved ? mr->segs :
	       r.access & IBV_ACCESS_ON_DEMAND ?
			NULL : shca_seg_map(r.addr, r.length, false);
	/* no peer uses the old translation, PD or access once this returns */
	mr_unpublish(mr);
	pthread_mutex_lock(&mr_table_lock);
	table_changed();
	mr->segs = segs;
	if (r.pd) {
		shca_pd_get(r.pd);
		shca_pd_put(mr->pd);
		mr->pd = r.pd;
		shca_obj_put(&r.pd->obj);
	}
	mr->access = r.access;
	mr->iova = r.iova;
	mr->base = r.addr;
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

/* ------------------------------------------------------------------ */
/* ibv_advise_mr                                                       */

/*
 * One SGE of a prefetch, as ibv_advise_mr(3) words the errors: an lkey
 * that names no ODP MR, or a range outside it, EFAULT; an MR of another
 * PD EPERM ("outside the caller's security scope"); PREFETCH_WRITE on an
 * MR that is not writable EPERM.  *base: where the range is here.
 */
static int advise_sge(struct shca_pd *pd, const struct ibv_sge *s,
		      enum ibv_advise_mr_advice advice, void **base)
{
	struct shca_mr *mr;
	int ret = 0;

	pthread_mutex_lock(&mr_table_lock);
	mr = shca_mr_key_find(s->lkey);
	if (!mr || mr->ibmr.lkey != s->lkey ||
	    !(mr->access & IBV_ACCESS_ON_DEMAND))
		ret = -EFAULT;
	else if (mr->pd != pd)
		ret = -EPERM;
	else if (advice == IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE &&
		 !(mr->access & IBV_ACCESS_LOCAL_WRITE))
		ret = -EPERM;
	else if (!shca_range_ok(s->addr, s->length, mr->iova,
				mr->iova + mr->ibmr.length))
		ret = -EFAULT;
	else
		*base = (char *)mr->base + (s->addr - mr->iova);
	pthread_mutex_unlock(&mr_table_lock);
	return ret;
}

/*
 * Fault the pages in, as the NIC's prefetch does: MADV_POPULATE_READ or
 * _WRITE (Linux 5.14) makes them present with that permission and fails
 * on a page that is not mapped (ENOMEM) or cannot be faulted (EFAULT);
 * where the kernel lacks it, the mapping is checked instead.  EFAULT for
 * "parts of it are not part of the process address space".
 */
static int advise_populate(void *addr, size_t len, bool write)
{
	uintptr_t ps = shca_page_size();
	uintptr_t s = (uintptr_t)addr & ~(ps - 1);
	uintptr_t e = ((uintptr_t)addr + len + ps - 1) & ~(ps - 1);

	if (!len)
		return 0;
	if (!madvise((void *)s, e - s, write ? 23 /* MADV_POPULATE_WRITE */ :
					       22 /* MADV_POPULATE_READ */))
		return 0;
	if (errno == EINVAL)
		return shca_check_range(addr, len, write);
	return -EFAULT;
}

/*
 * ibv_advise_mr(3): the advice is one of the three prefetches
 * (EOPNOTSUPP otherwise, as mlx5_ib_advise_mr), the flags at most
 * IBV_ADVISE_MR_FLAG_FLUSH and the PD live (EINVAL), every SGE checked
 * before any page is touched.  PREFETCH_NO_FAULT touches nothing: pages
 * that are present are what the device would use, and softhca looks at
 * them at each access anyway.  Without FLUSH the prefetch is
 * asynchronous on hardware and its page faults are not reported; softhca
 * does it before returning and reports them only with FLUSH.
 */
int shca_advise_mr(struct ibv_pd *ibpd, enum ibv_advise_mr_advice advice,
		   uint32_t flags, struct ibv_sge *sg_list, uint32_t num_sge)
{
	struct shca_pd *pd;
	void *base = NULL;
	uint32_t i;
	int ret = 0;

	if (advice != IBV_ADVISE_MR_ADVICE_PREFETCH &&
	    advice != IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE &&
	    advice != IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT)
		return shca_ret_errno(-EOPNOTSUPP);
	if (flags & ~(uint32_t)IBV_ADVISE_MR_FLAG_FLUSH)
		return shca_ret_errno(-EINVAL);
	if (!num_sge || !sg_list)
		return shca_ret_errno(-EINVAL);
	pd = shca_pd_lookup(ibpd, NULL);
	if (!pd)
		return shca_ret_errno(-EINVAL);
	for (i = 0; i < num_sge && !ret; i++)
		ret = advise_sge(pd, &sg_list[i], advice, &base);
	for (i = 0; i < num_sge && !ret; i++) {
		bool write = advice == IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE;
		int r;

		if (advice == IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT)
			break;
		/* again: the MR may have gone meanwhile */
		r = advise_sge(pd, &sg_list[i], advice, &base);
		if (!r)
			r = advise_populate(base, sg_list[i].length, write);
		if (flags & IBV_ADVISE_MR_FLAG_FLUSH)
			ret = r;
	}
	shca_obj_put(&pd->obj);
	return shca_ret_errno(ret);
}
