/* SPDX-License-Identifier: MIT */
/*
 * libsofthca_path.so: an LD_PRELOAD shim that shows the view of
 * sysfs/tree.h (softhca's devices under /dev/infiniband,
 * /sys/class/infiniband and /sys/class/infiniband_verbs) to programs
 * that look for RDMA devices through the file system, and passes every
 * other path to the C library untouched (docs/discovery.md).
 *
 * It runs inside every process started under `softhca run`: it has no
 * constructor, no thread and no output; it builds nothing until a path of
 * the view is used, and then answers from the interfaces as they are at
 * that moment.  Table of contents, by file:
 *
 *   next.c     the C library's own functions (dlsym RTLD_NEXT), with a
 *              system-call fallback while dlsym itself is running
 *   resolve.c  a path (absolute, relative to the cwd or to a directory
 *              descriptor) to a node of the view; descriptors of the
 *              view's directories; stat data; descriptors for files
 *   stat.c     stat, lstat, fstatat, statx, the __xstat family, fstat,
 *              access, faccessat, euidaccess, readlink(at), realpath,
 *              canonicalize_file_name, getxattr, statfs, statvfs
 *   open.c     open, openat, their 64 and _2 variants, creat, fopen
 *   dir.c      opendir, fdopendir, readdir(_r)(64), closedir, dirfd,
 *              rewinddir, telldir, seekdir, scandir(64)
 *   fd.c       dup, dup2, dup3, fcntl(F_DUPFD): a duplicate of a view
 *              directory's descriptor stands for it too
 *   silent.c   the log sink: the shim never prints
 */
#ifndef SOFTHCA_PATH_SHIM_H
#define SOFTHCA_PATH_SHIM_H

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "../sysfs/tree.h"

/* The interposed functions: exported, unversioned. */
#define SHIM __attribute__((visibility("default")))

/*
 * The next definition of a C library function (dlsym RTLD_NEXT), found
 * once per call site; NULL while this thread is inside dlsym (a malloc
 * that opens files, say), for which the callers below fall back to the
 * system call.  version: NULL, or the version of a compat-only symbol.
 */
void *shca_path_next(const char *name, const char *version);

#define NEXT_V(fn, version)                                              \
	({                                                               \
		static __typeof__(fn) *next_;                            \
		__typeof__(fn) *f_ = __atomic_load_n(&next_,             \
						     __ATOMIC_ACQUIRE);  \
		if (!f_) {                                               \
			f_ = (__typeof__(fn) *)shca_path_next(#fn,       \
							      version);  \
			if (f_)                                          \
				__atomic_store_n(&next_, f_,             \
						 __ATOMIC_RELEASE);      \
		}                                                        \
		f_;                                                      \
	})
#define NEXT(fn) NEXT_V(fn, NULL)

/* The C library's functions the shim itself uses on real paths. */
int shca_next_fstatat(int dirfd, const char *path, struct stat *st,
		      int flags);
int shca_next_fstat(int fd, struct stat *st);
ssize_t shca_next_readlink(const char *path, char *buf, size_t len);
int shca_next_openat(int dirfd, const char *path, int flags, mode_t mode);

/* ------------------------------------------------------------------ */
/* resolve.c                                                           */

enum {
	SHIM_PASS = 0,		/* not the view's: the call as it was */
	SHIM_NODE = 1,		/* r->node */
	SHIM_REAL = 2,		/* r->real: a path the C library takes */
};

struct shim_res {
	struct shca_vfs_node node;
	char real[PATH_MAX];
	char abs[PATH_MAX];	/* the absolute path that was resolved */
};

/*
 * (dirfd, path) as the kernel would take them (AT_FDCWD, a descriptor of
 * a real directory, or one of the view's): SHIM_PASS, SHIM_NODE,
 * SHIM_REAL, or -errno.  r is malloc'ed by the caller's wrapper below,
 * so that a small thread stack holds no path buffers.
 */
int shim_resolve(int dirfd, const char *path, bool follow,
		 struct shim_res *r);

/* The same, allocating r: *rp (free it) is set for SHIM_NODE and
 * SHIM_REAL. */
int shim_lookup(int dirfd, const char *path, bool follow,
		struct shim_res **rp);

/* A stat of a node, as sysfs and devtmpfs would give it. */
void shim_fill_stat(const struct shca_vfs_node *n, struct stat *st);

/* Might fd stand for a view directory?  A hint: no lock, no call. */
bool shim_maybe_view_fd(int fd);

/* A registered descriptor of the view: 1 with its node resolved again
 * now (*rp, free it), 0 when fd is not one, -errno when its node is gone
 * (the interface went away). */
int shim_dirfd_node(int fd, struct shim_res **rp);

/*
 * A descriptor that stands for a node of the view, a directory mostly (a
 * memfd, registered so that the *at functions, fstat and fdopendir find
 * the node): the fd or -errno.
 */
int shim_dir_fd(const struct shca_vfs_node *dir, bool cloexec);
void shim_dir_fd_forget(int fd);
/* newfd is a duplicate of oldfd: it stands for the same node. */
void shim_dir_fd_dup(int oldfd, int newfd);

/* A descriptor to read a file of the view from: its content at this
 * moment (a sealed memfd), or -errno. */
int shim_file_fd(const struct shca_vfs_node *file, bool cloexec);

/* May the caller (real or effective ids) access node as mode says? */
int shim_access(const struct shca_vfs_node *node, int mode, bool effective);

/* errno = e, and -1 */
static inline int shim_fail(int e)
{
	errno = e;
	return -1;
}

#endif
