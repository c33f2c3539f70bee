// SPDX-License-Identifier: MIT
/*
 * Device memory (ibv_alloc_dm(3)).  On a NIC it is memory on the card
 * that the host maps; softhca's "device" is this process, so a DM is
 * memory softhca owns: a memfd of its own, sealed against shrinking and
 * growing, mapped shared where the application never sees it, reached
 * only through ibv_memcpy_to_dm / ibv_memcpy_from_dm and through the DM
 * MRs registered on it.  A DM MR is an ordinary MR over that memory
 * (mr.c): a shared mapping of a sealed memfd is handed to peers on this
 * host as it is (shm/seg_file.c), and the net path's responder reaches
 * it like any other.  The memfd is what an importer in another process
 * maps (docs/import.md: import_rem.c hands it over by SCM_RIGHTS), so
 * that both name the same memory.
 *
 * The rules are mlx5's and the kernel's (docs/dm-odp.md):
 *   - comp_mask must be 0, length not 0, at most max_dm_size (the
 *     process's DMs together), log_align_req at most a page: EINVAL;
 *     the process's total over max_dm_size: ENOMEM, as a full MEMIC;
 *   - copies: offset + length past the DM is EFAULT, an offset or
 *     length not a multiple of 4 is EINVAL (mlx5_access_dm);
 *   - a DM MR must be IBV_ACCESS_ZERO_BASED (ibv_cmd_reg_dm_mr) and use
 *     only local write, remote read/write/atomic (MLX5_DM_ALLOWED_ACCESS),
 *     its range within the DM (the kernel's reg_dm_mr): EINVAL;
 *   - freeing a DM that MRs still use is EBUSY (the kernel's uobject
 *     usecnt).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "shca.h"

static pthread_mutex_t dm_lock = PTHREAD_MUTEX_INITIALIZER;
static size_t dm_total;		/* bytes allocated by this process */
static pid_t dm_pid;		/* ... which is this one (not after fork) */

#define DM_ACCESS_ALLOWED                                                 \
	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |                \
	 IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC |               \
	 IBV_ACCESS_ZERO_BASED | IBV_ACCESS_OPTIONAL_RANGE)

/* The DM that ibdm names, with a use taken (put it), or NULL. */
static struct shca_dm *dm_get(struct ibv_dm *ibdm)
{
	return shca_dm_lookup(ibdm, NULL);
}

/* mlx5_access_dm's checks, in its order: bounds, then alignment. */
static int dm_range(const struct shca_dm *dm, uint64_t off, size_t len)
{
	if (off > dm->length || len > dm->length - off)
		return EFAULT;
	if ((off & 3) || (len & 3))
		return EINVAL;
	return 0;
}

static int memcpy_to_dm(struct ibv_dm *ibdm, uint64_t off, const void *host,
			size_t len)
{
	struct shca_dm *dm = dm_get(ibdm);
	int ret;

	if (!dm)
		return shca_ret_errno(EINVAL);
	ret = dm_range(dm, off, len);
	if (!ret && len)
		memcpy((char *)dm->mem + off, host, len);
	shca_obj_put(&dm->obj);
	return shca_ret_errno(ret);
}

static int memcpy_from_dm(void *host, struct ibv_dm *ibdm, uint64_t off,
			  size_t len)
{
	struct shca_dm *dm = dm_get(ibdm);
	int ret;

	if (!dm)
		return shca_ret_errno(EINVAL);
	ret = dm_range(dm, off, len);
	if (!ret && len)
		memcpy(host, (char *)dm->mem + off, len);
	shca_obj_put(&dm->obj);
	return shca_ret_errno(ret);
}

void shca_dm_init_pub(struct ibv_dm *d, struct ibv_context *ctx)
{
	d->context = ctx;
	d->memcpy_to_dm = memcpy_to_dm;
	d->memcpy_from_dm = memcpy_from_dm;
	d->comp_mask = IBV_DM_MASK_HANDLE;
}

/* A child of fork() starts with its own budget: the DMs it inherited
 * belong to its parent's contexts; dm_lock held. */
static void dm_budget_mine(void)
{
	if (dm_pid != shca_getpid()) {
		dm_pid = shca_getpid();
		dm_total = 0;
	}
}

/* The process's budget of device memory: 0 or -ENOMEM. */
static int dm_charge(size_t len)
{
	int ret = 0;

	pthread_mutex_lock(&dm_lock);
	dm_budget_mine();
	if (len > SHCA_MAX_DM_SIZE - dm_total)
		ret = -ENOMEM;
	else
		dm_total += len;
	pthread_mutex_unlock(&dm_lock);
	return ret;
}

static void dm_uncharge(size_t len)
{
	pthread_mutex_lock(&dm_lock);
	dm_budget_mine();
	dm_total -= MIN(len, dm_total);
	pthread_mutex_unlock(&dm_lock);
}

/* The DM's memory: a sealed memfd of map_len bytes mapped shared, or
 * MAP_FAILED (errno). */
static void *dm_map(size_t map_len, int *fdp)
{
	int fd = memfd_create("softhca-dm", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	void *mem;

	if (fd < 0)
		return MAP_FAILED;
	if (ftruncate(fd, (off_t)map_len) ||
	    fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)) {
		close(fd);
		return MAP_FAILED;
	}
	mem = mmap(NULL, map_len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (mem == MAP_FAILED)
		close(fd);
	else
		*fdp = fd;
	return mem;
}

struct ibv_dm *shca_alloc_dm(struct ibv_context *ctx,
			     struct ibv_alloc_dm_attr *attr)
{
	size_t ps = shca_page_size();
	struct shca_dm *dm;
	int ret;

	if (!shca_ctx_live(ctx))
		return SHCA_ERR_PTR(EBADF);
	if (!attr || attr->comp_mask || !attr->length ||
	    attr->length > SHCA_MAX_DM_SIZE ||
	    attr->log_align_req > SHCA_DM_LOG_ALIGN_MAX)
		return SHCA_ERR_PTR(EINVAL);
	ret = dm_charge(attr->length);
	if (ret)
		return SHCA_ERR_PTR(-ret);
	dm = calloc(1, sizeof(*dm));
	if (!dm)
		goto err_charge;
	dm->length = attr->length;
	dm->map_len = (attr->length + ps - 1) & ~(ps - 1);
	dm->mem = dm_map(dm->map_len, &dm->fd);
	if (dm->mem == MAP_FAILED)
		goto err_free;
	shca_dm_init_pub(&dm->ibdm, ctx);
	ret = shca_obj_add(&dm->obj, SHCA_OT_DM, ctx, &dm->ibdm,
			   &dm->ibdm.handle);
	if (ret) {
		munmap(dm->mem, dm->map_len);
		close(dm->fd);
		free(dm);
		dm_uncharge(attr->length);
		return SHCA_ERR_PTR(-ret);
	}
	return &dm->ibdm;

err_free:
	free(dm);
err_charge:
	dm_uncharge(attr->length);
	return SHCA_ERR_PTR(ENOMEM);
}

/* dm holds a use (shca_dm_lookup), which this consumes. */
int shca_dm_destroy(struct shca_dm *dm)
{
	int ret = shca_obj_claim(&dm->obj, &dm->refs);

	if (ret) {
		shca_obj_put(&dm->obj);
		return ret;
	}
	munmap(dm->mem, dm->map_len);
	close(dm->fd);
	if (!dm->remote)
		dm_uncharge(dm->length);
	shca_obj_retire(&dm->obj, dm, sizeof(*dm));
	return 0;
}

/*
 * The owner's word is hostile: the length as ibv_alloc_dm allows it, the
 * descriptor a regular file at least that long (page-rounded) and sealed
 * against shrinking (a file that can shrink under the mapping would make
 * a copy raise SIGBUS here).  Not charged to this process's budget: the
 * memory is the owner's.
 */
struct shca_dm *shca_dm_map_remote(struct ibv_context *ctx, int fd,
				   uint64_t length)
{
	size_t ps = shca_page_size();
	struct shca_dm *dm = NULL;
	struct stat st;
	int seals, ret = EPROTO;

	if (!length || length > SHCA_MAX_DM_SIZE || fstat(fd, &st) ||
	    !S_ISREG(st.st_mode))
		goto err;
	seals = fcntl(fd, F_GET_SEALS);
	if (seals < 0 || !(seals & F_SEAL_SHRINK) ||
	    (uint64_t)st.st_size < ((length + ps - 1) & ~(ps - 1)))
		goto err;
	ret = ENOMEM;
	dm = calloc(1, sizeof(*dm));
	if (!dm)
		goto err;
	dm->length = length;
	dm->map_len = (length + ps - 1) & ~(ps - 1);
	dm->remote = true;
	dm->fd = fd;
	dm->mem = mmap(NULL, dm->map_len, PROT_READ | PROT_WRITE, MAP_SHARED,
		       fd, 0);
	if (dm->mem == MAP_FAILED)
		goto err;
	shca_dm_init_pub(&dm->ibdm, ctx);
	ret = -shca_obj_add(&dm->obj, SHCA_OT_DM, ctx, &dm->ibdm,
			    &dm->ibdm.handle);
	if (!ret)
		return dm;
	munmap(dm->mem, dm->map_len);
err:
	free(dm);
	close(fd);
	return SHCA_ERR_PTR(ret);
}

/* A handle that names no DM: ENOENT, as the kernel's object lookup. */
int shca_free_dm(struct ibv_dm *ibdm)
{
	struct shca_dm *dm;
	uint32_t h;
	int ret;

	/* another process's DM: its owner frees it (docs/import.md); an MR
	 * of ours on the import holds it as one of the owner's would */
	if (shca_import_ahandle(ibdm, SHCA_OT_DM, &h)) {
		dm = dm_get(ibdm);
		ret = dm && __atomic_load_n(&dm->refs, __ATOMIC_RELAXED);
		if (dm)
			shca_obj_put(&dm->obj);
		if (ret)
			return shca_ret_errno(EBUSY);
		return shca_ret_errno(shca_rimport_destroy(ibdm, SHCA_OT_DM));
	}
	dm = dm_get(ibdm);
	if (!dm)
		return shca_ret_errno(-ENOENT);
	ret = shca_dm_destroy(dm);
	if (!ret)
		shca_import_destroyed(ibdm);
	return shca_ret_errno(ret);
}

struct ibv_mr *shca_reg_dm_mr(struct ibv_pd *pd, struct ibv_dm *ibdm,
			      uint64_t offset, size_t length,
			      unsigned int access)
{
	struct shca_dm *dm;
	struct ibv_mr *mr;

	if (access & ~(unsigned int)DM_ACCESS_ALLOWED)
		return SHCA_ERR_PTR(EINVAL);
	if (!(access & IBV_ACCESS_ZERO_BASED))
		return SHCA_ERR_PTR(EINVAL);
	/* the kernel's DM_MR_REG looks the DM and the PD up in the
	 * PD's context first: one not live there is ENOENT */
	dm = dm_get(ibdm);
	if (!dm)
		return SHCA_ERR_PTR(ENOENT);
	if (!pd || offset > dm->length || length > dm->length - offset) {
		shca_obj_put(&dm->obj);
		return SHCA_ERR_PTR(EINVAL);
	}
	if (pd->context != ibdm->context) {
		shca_obj_put(&dm->obj);
		return SHCA_ERR_PTR(ENOENT);
	}
	mr = shca_reg_mr_dm(pd, dm, offset, length, access);
	shca_obj_put(&dm->obj);
	return mr;
}
