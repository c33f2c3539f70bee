// SPDX-License-Identifier: MIT
/*
 * XRC domains (ibv_open_xrcd, ibv_close_xrcd) and the numbers of XRC
 * SRQs (docs/xrc.md); ibv_open_qp is xrc_qp.c.
 *
 * A domain is an identity: 64 bits that XRC SRQs and XRC_RECV QPs publish
 * in the arena (shca_qp_shm.xrcd), which the responder compares before it
 * takes a receive WQE from an SRQ for a QP (IBA 9.9.x: the SRQ must be of
 * the QP's XRC domain).  Processes that open a domain through the same
 * file (fd) share it: the identity is a keyed hash of the file's device
 * and inode.  A private domain (fd -1) gets random bits.
 *
 * O_CREAT and O_EXCL, as ibv_open_xrcd(3) says: without O_CREAT the
 * domain must exist already, with O_CREAT|O_EXCL it must not; either
 * failure is EINVAL, as the kernel's uverbs answers it.  "Exists"
 * means some process holds it open: each open domain holds a shared
 * flock on its own open file description of the inode, so a process that
 * gets an exclusive lock at once knows nobody holds it.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "shca.h"
#include "../shm/rundir.h"

#define SHCA_XRCD_MAGIC	0x5ca0c4c0u

static pthread_mutex_t xrcd_lock = PTHREAD_MUTEX_INITIALIZER;

bool shca_xrcd_ok(const struct ibv_xrcd *x, struct ibv_context *ctx)
{
	const struct shca_xrcd *sx;

	if (!x)
		return false;
	sx = container_of(x, struct shca_xrcd, ibxrcd);
	return sx->magic == SHCA_XRCD_MAGIC && (!ctx || x->context == ctx);
}

/* The identity of a domain shared through the inode of st. */
static uint64_t xrcd_file_id(const struct stat *st)
{
	static const uint8_t key[16] = "softhca-xrcd-v1";
	uint64_t in[2] = { (uint64_t)st->st_dev, (uint64_t)st->st_ino };

	/* 0 means "no domain" in the arena */
	return shca_siphash(key, in, sizeof(in)) | 1;
}

/*
 * Take the domain's lock on our own description of the file: 0 with
 * *fdp set, or -EINVAL: it does not exist and no O_CREAT, or it exists
 * and O_CREAT|O_EXCL.
 */
static int xrcd_lock_file(int fd, int oflags, int *fdp)
{
	char path[64];
	bool exists;
	int lfd;

	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	lfd = open(path, O_RDONLY | O_CLOEXEC);
	if (lfd < 0)
		return -errno == -ENOENT ? -EBADF : -errno;
	exists = flock(lfd, LOCK_EX | LOCK_NB) != 0;
	if (!exists && !(oflags & O_CREAT)) {
		close(lfd);
		return -EINVAL;
	}
	if (exists && (oflags & O_CREAT) && (oflags & O_EXCL)) {
		close(lfd);
		return -EINVAL;
	}
	/* from exclusive (or none) to shared: holders see it exists */
	if (flock(lfd, LOCK_SH) != 0) {
		int e = -errno;

		close(lfd);
		return e;
	}
	*fdp = lfd;
	return 0;
}

/* The open_xrcd op: NULL with errno on failure, as rdma-core's. */
struct ibv_xrcd *shca_open_xrcd(struct ibv_context *ctx,
				struct ibv_xrcd_init_attr *a)
{
	struct shca_xrcd *x;
	struct stat st;
	int fd = -1, ret;

	if (!shca_ctx_live(ctx))
		return SHCA_ERR_PTR(EBADF);
	/* rdma-core's ibv_cmd_open_xrcd: unknown bits ENOSYS, both of
	 * FD and OFLAGS needed */
	if (!a)
		return SHCA_ERR_PTR(EINVAL);
	if (a->comp_mask >= IBV_XRCD_INIT_ATTR_RESERVED)
		return SHCA_ERR_PTR(ENOSYS);
	if (!(a->comp_mask & IBV_XRCD_INIT_ATTR_FD) ||
	    !(a->comp_mask & IBV_XRCD_INIT_ATTR_OFLAGS))
		return SHCA_ERR_PTR(EINVAL);
	x = calloc(1, sizeof(*x));
	if (!x)
		return SHCA_ERR_PTR(ENOMEM);
	x->lock_fd = -1;
	if (a->fd == -1) {
		/* a private domain: the kernel wants O_CREAT for it */
		if (!(a->oflags & O_CREAT)) {
			free(x);
			return SHCA_ERR_PTR(EINVAL);
		}
		do
			x->id = ((uint64_t)shca_random_u32() << 32 |
				 shca_random_u32()) | 1;
		while (!x->id);
	} else {
		if (fstat(a->fd, &st) != 0) {
			free(x);
			return SHCA_ERR_PTR(EBADF);
		}
		pthread_mutex_lock(&xrcd_lock);
		ret = xrcd_lock_file(a->fd, a->oflags, &fd);
		pthread_mutex_unlock(&xrcd_lock);
		if (ret) {
			free(x);
			return SHCA_ERR_PTR(-ret);
		}
		x->lock_fd = fd;
		x->id = xrcd_file_id(&st);
	}
	x->ibxrcd.context = ctx;
	x->magic = SHCA_XRCD_MAGIC;
	/* its XRC_RECV QPs may be opened by other processes */
	shca_xqp_serve();
	shca_dbg("XRC domain %016llx opened (fd %d)",
		 (unsigned long long)x->id, a->fd);
	return &x->ibxrcd;
}

/* EBUSY while an XRC SRQ or XRC_RECV QP of this open uses it.  A domain
 * that is not open (closed already: its struct waits in the quarantine)
 * is ENOENT, as the kernel's XRCD_DESTROY lookup answers. */
int shca_close_xrcd(struct ibv_xrcd *ibx)
{
	struct shca_xrcd *x;

	if (!shca_xrcd_ok(ibx, NULL))
		return shca_ret_errno(-ENOENT);
	x = to_sxrcd(ibx);
	pthread_mutex_lock(&xrcd_lock);
	if (__atomic_load_n(&x->refs, __ATOMIC_ACQUIRE)) {
		pthread_mutex_unlock(&xrcd_lock);
		return shca_ret_errno(-EBUSY);
	}
	x->magic = 0;
	pthread_mutex_unlock(&xrcd_lock);
	if (x->lock_fd >= 0)
		close(x->lock_fd);
	shca_quarantine(x, sizeof(*x));
	return 0;
}

void shca_xrcd_get(struct shca_xrcd *x)
{
	__atomic_add_fetch(&x->refs, 1, __ATOMIC_ACQ_REL);
}

void shca_xrcd_put(struct shca_xrcd *x)
{
	__atomic_sub_fetch(&x->refs, 1, __ATOMIC_ACQ_REL);
}
