// SPDX-License-Identifier: MIT
/*
 * Memory regions.
 *
 * softhca never pins memory (ulimit -l does not matter): registration
 * checks that the range is mapped with the permissions the access flags
 * need, as pinning would (EFAULT otherwise), and records it in the
 * process's MR table.  lkey == rkey == (table index << 12) | 12 random bits,
 * so keys of a freed and reused slot differ and are not guessable.
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

#include "shca.h"

#define MR_KEY_BITS	12
#define MR_KEY_MASK	((1u << MR_KEY_BITS) - 1)

/* The process's MR table: slot i holds the MR whose keys have index i. */
static pthread_mutex_t mr_table_lock = PTHREAD_MUTEX_INITIALIZER;
static struct shca_mr **mr_table;
static uint32_t mr_table_size;	/* slots allocated */
static uint32_t mr_next;	/* next slot to try: slots are reused slowly */
static uint32_t mr_count;

/* Access bits the kernel accepts on registration (IB_ACCESS_SUPPORTED). */
#define SHCA_MR_ACCESS_KNOWN                                              \
	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |                \
	 IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC |               \
	 IBV_ACCESS_MW_BIND | IBV_ACCESS_ZERO_BASED |                      \
	 IBV_ACCESS_ON_DEMAND | IBV_ACCESS_HUGETLB |                       \
	 IBV_ACCESS_OPTIONAL_RANGE)

static bool access_needs_write(unsigned int access)
{
	return access & (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			 IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_MW_BIND);
}

/*
 * IBA o10-36.2.1 / the kernel's ib_check_mr_access(): remote write and
 * remote atomic need local write.
 */
static int check_access(unsigned int access)
{
	if (access & ~(unsigned int)SHCA_MR_ACCESS_KNOWN)
		return -EINVAL;
	if ((access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) &&
	    !(access & IBV_ACCESS_LOCAL_WRITE))
		return -EINVAL;
	if (access & IBV_ACCESS_ON_DEMAND)
		return -EOPNOTSUPP;	/* no ODP: odp_caps are zero */
	if (access & (IBV_ACCESS_MW_BIND | IBV_ACCESS_ZERO_BASED))
		return -EOPNOTSUPP;	/* no memory windows */
	return 0;
}

/*
 * Is [addr, addr + len) mapped, readable, and writable if asked?  Walks
 * /proc/self/maps, which is what pinning the pages would have found out.
 * 0 or -EFAULT.
 */
int shca_check_range(const void *addr, size_t len, bool write)
{
	uintptr_t start = (uintptr_t)addr, end, cur;
	char line[512];
	FILE *f;
	int ret = -EFAULT;

	if (!len)
		return 0;
	if (len > UINTPTR_MAX - start)
		return -EINVAL;
	end = start + len;
	cur = start;
	f = fopen("/proc/self/maps", "re");
	if (!f)
		return 0;	/* no procfs: nothing to check against */
	while (fgets(line, sizeof(line), f)) {
		unsigned long lo, hi;
		char perms[8];

		if (sscanf(line, "%lx-%lx %7s", &lo, &hi, perms) != 3)
			continue;
		if (hi <= cur)
			continue;
		if (lo > cur)
			break;		/* a hole */
		if (perms[0] != 'r' || (write && perms[1] != 'w'))
			break;
		cur = hi;
		if (cur >= end) {
			ret = 0;
			break;
		}
	}
	fclose(f);
	return ret;
}

static int table_insert(struct shca_mr *mr)
{
	uint32_t i, idx;

	pthread_mutex_lock(&mr_table_lock);
	if (mr_count >= SHCA_MAX_MR) {
		pthread_mutex_unlock(&mr_table_lock);
		return -ENOMEM;
	}
	if (mr_count + 1 >= mr_table_size / 2 &&
	    mr_table_size <= SHCA_MAX_MR) {
		uint32_t nsize = mr_table_size ? mr_table_size * 2 : 256;
		struct shca_mr **nt;

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
	if (i == mr_table_size) {
		pthread_mutex_unlock(&mr_table_lock);
		return -ENOMEM;
	}
	mr_table[idx] = mr;
	mr_next = idx + 1;
	mr_count++;
	mr->index = idx;
	mr->ibmr.lkey = idx << MR_KEY_BITS |
			(shca_random_u32() & MR_KEY_MASK);
	mr->ibmr.rkey = mr->ibmr.lkey;
	pthread_mutex_unlock(&mr_table_lock);
	return 0;
}

static void table_remove(struct shca_mr *mr)
{
	pthread_mutex_lock(&mr_table_lock);
	mr_table[mr->index] = NULL;
	mr_count--;
	pthread_mutex_unlock(&mr_table_lock);
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
	uint32_t idx = key >> MR_KEY_BITS;
	struct shca_mr *mr = NULL;

	pthread_mutex_lock(&mr_table_lock);
	if (idx < mr_table_size)
		mr = mr_table[idx];
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

struct ibv_mr *shca_reg_mr(struct ibv_pd *ibpd, void *addr, size_t length,
			   uint64_t iova, unsigned int access)
{
	struct shca_pd *pd = to_spd(ibpd);
	struct shca_mr *mr;
	int ret;

	access &= ~(unsigned int)IBV_ACCESS_OPTIONAL_RANGE;
	ret = check_access(access);
	if (ret)
		return SHCA_ERR_PTR(-ret);
	if (!length || (uintptr_t)addr + length < (uintptr_t)addr ||
	    iova + length < iova)
		return SHCA_ERR_PTR(EINVAL);
	/* the kernel requires the same offset within a page */
	if (((uintptr_t)addr ^ iova) & ((uint64_t)sysconf(_SC_PAGESIZE) - 1))
		return SHCA_ERR_PTR(EINVAL);
	ret = shca_check_range(addr, length, access_needs_write(access));
	if (ret)
		return SHCA_ERR_PTR(-ret);

	mr = calloc(1, sizeof(*mr));
	if (!mr)
		return SHCA_ERR_PTR(ENOMEM);
	mr->pd = pd;
	mr->iova = iova;
	mr->access = access;
	mr->ibmr.context = ibpd->context;
	mr->ibmr.pd = ibpd;
	mr->ibmr.addr = addr;
	mr->ibmr.length = length;
	ret = table_insert(mr);
	if (ret) {
		free(mr);
		return SHCA_ERR_PTR(-ret);
	}
	mr->ibmr.handle = mr->index;
	shca_pd_get(pd);
	return &mr->ibmr;
}

int shca_dereg_mr(struct ibv_mr *ibmr)
{
	struct shca_mr *mr = to_smr(ibmr);

	table_remove(mr);
	shca_pd_put(mr->pd);
	free(mr);
	return 0;
}

/*
 * IBV_REREG_MR_*: change the PD, the range, the access flags, or several;
 * all checks first, so a failure leaves the MR as it was.  The keys stay
 * the same, as rxe does.
 */
int shca_rereg_mr(struct ibv_mr *ibmr, int flags, struct ibv_pd *ibpd,
		  void *addr, size_t length, int access)
{
	struct shca_mr *mr = to_smr(ibmr);
	unsigned int new_access = mr->access;
	void *new_addr = ibmr->addr;
	size_t new_len = ibmr->length;
	uint64_t new_iova = mr->iova;
	int ret;

	if (flags & IBV_REREG_MR_CHANGE_ACCESS) {
		new_access = (unsigned int)access &
			     ~(unsigned int)IBV_ACCESS_OPTIONAL_RANGE;
		ret = check_access(new_access);
		if (ret)
			return ret;
	}
	if (flags & IBV_REREG_MR_CHANGE_TRANSLATION) {
		new_addr = addr;
		new_len = length;
		new_iova = (uintptr_t)addr;
		if ((uintptr_t)addr + length < (uintptr_t)addr)
			return -EINVAL;
	}
	if (flags & (IBV_REREG_MR_CHANGE_TRANSLATION |
		     IBV_REREG_MR_CHANGE_ACCESS)) {
		ret = shca_check_range(new_addr, new_len,
				       access_needs_write(new_access));
		if (ret)
			return ret;
	}
	if ((flags & IBV_REREG_MR_CHANGE_PD) &&
	    ibpd->context != ibmr->context)
		return -EINVAL;

	pthread_mutex_lock(&mr_table_lock);
	if (flags & IBV_REREG_MR_CHANGE_PD) {
		shca_pd_get(to_spd(ibpd));
		shca_pd_put(mr->pd);
		mr->pd = to_spd(ibpd);
	}
	mr->access = new_access;
	mr->iova = new_iova;
	ibmr->addr = new_addr;
	ibmr->length = new_len;
	pthread_mutex_unlock(&mr_table_lock);
	return 0;
}

/* ------------------------------------------------------------------ */
/* Exported verbs                                                      */

struct ibv_mr *ibv_reg_mr_iova2(struct ibv_pd *pd, void *addr, size_t length,
				uint64_t iova, unsigned int access)
{
	return shca_reg_mr(pd, addr, length, iova, access);
}

#undef ibv_reg_mr
SHCA_DEFAULT_VERSION(ibv_reg_mr)
struct ibv_mr *shca_latest_ibv_reg_mr(struct ibv_pd *pd, void *addr, size_t length,
			  int access)
{
	return shca_reg_mr(pd, addr, length, (uintptr_t)addr,
			   (unsigned int)access);
}

#undef ibv_reg_mr_iova
struct ibv_mr *ibv_reg_mr_iova(struct ibv_pd *pd, void *addr, size_t length,
			       uint64_t iova, int access)
{
	return shca_reg_mr(pd, addr, length, iova, (unsigned int)access);
}

/* rdma-core's argument checks, then the device's (IBV_REREG_MR_ERR_*). */
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
	return shca_ret_errno(shca_dereg_mr(mr));
}
