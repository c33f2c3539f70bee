// SPDX-License-Identifier: MIT
/*
 * Looking at paths of the view: the stat family (glibc 2.33's stat,
 * fstatat, statx, and the __xstat family older binaries call), access,
 * readlink, realpath, extended attributes, statfs.
 *
 * Each function takes the path to the view only when it may be one of
 * its paths (shca_vfs_maybe: no system call, no lock); everything else
 * goes to the C library's function of the same name, untouched.
 */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>

#include "shim.h"

/* May (dirfd, path) name something of the view?  No system call. */
static bool maybe_at(int dirfd, const char *path, int flags)
{
	if (!path)
		return false;
	if (!*path)
		return (flags & AT_EMPTY_PATH) && shim_maybe_view_fd(dirfd);
	if (path[0] == '/' || dirfd == AT_FDCWD)
		return shca_vfs_maybe(path);
	return shca_vfs_maybe(path) || shim_maybe_view_fd(dirfd);
}

/* The view's answer for (dirfd, path): true when it answered (*rv, and
 * errno), false when the C library's function should. */
static bool view_stat(int dirfd, const char *path, struct stat *st,
		      int flags, int *rv)
{
	bool follow = !(flags & AT_SYMLINK_NOFOLLOW);
	struct shim_res *r;
	int ret, e;

	if (!*path && (flags & AT_EMPTY_PATH)) {
		ret = shim_dirfd_node(dirfd, &r);
		if (!ret)
			return false;
	} else {
		ret = shim_lookup(dirfd, path, follow, &r);
		if (ret == SHIM_PASS)
			return false;
	}
	if (ret == SHIM_REAL) {
		*rv = shca_next_fstatat(AT_FDCWD, r->real, st,
					flags & AT_SYMLINK_NOFOLLOW);
		e = errno;
		free(r);
		errno = e;
		return true;
	}
	if (ret < 0) {
		*rv = shim_fail(-ret);
		return true;
	}
	shim_fill_stat(&r->node, st);
	free(r);
	*rv = 0;
	return true;
}

SHIM int stat(const char *path, struct stat *st)
{
	int (*f)(const char *, struct stat *);
	int rv;

	if (shca_vfs_maybe(path) && view_stat(AT_FDCWD, path, st, 0, &rv))
		return rv;
	f = NEXT(stat);
	return f ? f(path, st) : shca_next_fstatat(AT_FDCWD, path, st, 0);
}

SHIM int stat64(const char *path, struct stat64 *st)
{
	return stat(path, (struct stat *)st);
}

SHIM int lstat(const char *path, struct stat *st)
{
	int (*f)(const char *, struct stat *);
	int rv;

	if (shca_vfs_maybe(path) &&
	    view_stat(AT_FDCWD, path, st, AT_SYMLINK_NOFOLLOW, &rv))
		return rv;
	f = NEXT(lstat);
	return f ? f(path, st) :
		   shca_next_fstatat(AT_FDCWD, path, st, AT_SYMLINK_NOFOLLOW);
}

SHIM int lstat64(const char *path, struct stat64 *st)
{
	return lstat(path, (struct stat *)st);
}

SHIM int fstatat(int dirfd, const char *path, struct stat *st, int flags)
{
	int rv;

	if (maybe_at(dirfd, path, flags) &&
	    view_stat(dirfd, path, st, flags, &rv))
		return rv;
	return shca_next_fstatat(dirfd, path, st, flags);
}

SHIM int fstatat64(int dirfd, const char *path, struct stat64 *st,
		   int flags)
{
	return fstatat(dirfd, path, (struct stat *)st, flags);
}

SHIM int fstat(int fd, struct stat *st)
{
	struct shim_res *r;
	int ret = shim_dirfd_node(fd, &r);

	if (!ret)
		return shca_next_fstat(fd, st);
	if (ret < 0)
		return shim_fail(-ret);
	shim_fill_stat(&r->node, st);
	free(r);
	return 0;
}

SHIM int fstat64(int fd, struct stat64 *st)
{
	return fstat(fd, (struct stat *)st);
}

/* The pre-2.33 entry points (x86_64: _STAT_VER 1, the kernel's stat). */
int __xstat(int ver, const char *path, struct stat *st);
int __xstat64(int ver, const char *path, struct stat64 *st);
int __lxstat(int ver, const char *path, struct stat *st);
int __lxstat64(int ver, const char *path, struct stat64 *st);
int __fxstat(int ver, int fd, struct stat *st);
int __fxstat64(int ver, int fd, struct stat64 *st);
int __fxstatat(int ver, int dirfd, const char *path, struct stat *st,
	       int flags);
int __fxstatat64(int ver, int dirfd, const char *path, struct stat64 *st,
		 int flags);

SHIM int __xstat(int ver, const char *path, struct stat *st)
{
	int (*f)(int, const char *, struct stat *);
	int rv;

	if (shca_vfs_maybe(path) && view_stat(AT_FDCWD, path, st, 0, &rv))
		return rv;
	f = NEXT_V(__xstat, "GLIBC_2.2.5");
	return f ? f(ver, path, st) : shca_next_fstatat(AT_FDCWD, path, st, 0);
}

SHIM int __xstat64(int ver, const char *path, struct stat64 *st)
{
	return __xstat(ver, path, (struct stat *)st);
}

SHIM int __lxstat(int ver, const char *path, struct stat *st)
{
	int (*f)(int, const char *, struct stat *);
	int rv;

	if (shca_vfs_maybe(path) &&
	    view_stat(AT_FDCWD, path, st, AT_SYMLINK_NOFOLLOW, &rv))
		return rv;
	f = NEXT_V(__lxstat, "GLIBC_2.2.5");
	return f ? f(ver, path, st) :
		   shca_next_fstatat(AT_FDCWD, path, st, AT_SYMLINK_NOFOLLOW);
}

SHIM int __lxstat64(int ver, const char *path, struct stat64 *st)
{
	return __lxstat(ver, path, (struct stat *)st);
}

SHIM int __fxstat(int ver, int fd, struct stat *st)
{
	(void)ver;
	return fstat(fd, st);
}

SHIM int __fxstat64(int ver, int fd, struct stat64 *st)
{
	(void)ver;
	return fstat(fd, (struct stat *)st);
}

SHIM int __fxstatat(int ver, int dirfd, const char *path, struct stat *st,
		    int flags)
{
	(void)ver;
	return fstatat(dirfd, path, st, flags);
}

SHIM int __fxstatat64(int ver, int dirfd, const char *path,
		      struct stat64 *st, int flags)
{
	(void)ver;
	return fstatat(dirfd, path, (struct stat *)st, flags);
}

static void fill_statx(const struct stat *st, struct statx *sx)
{
	memset(sx, 0, sizeof(*sx));
	sx->stx_mask = STATX_BASIC_STATS;
	sx->stx_blksize = (uint32_t)st->st_blksize;
	sx->stx_nlink = (uint32_t)st->st_nlink;
	sx->stx_uid = st->st_uid;
	sx->stx_gid = st->st_gid;
	sx->stx_mode = (uint16_t)st->st_mode;
	sx->stx_ino = st->st_ino;
	sx->stx_size = (uint64_t)st->st_size;
	sx->stx_blocks = (uint64_t)st->st_blocks;
	sx->stx_atime.tv_sec = st->st_atim.tv_sec;
	sx->stx_btime.tv_sec = st->st_mtim.tv_sec;
	sx->stx_ctime.tv_sec = st->st_ctim.tv_sec;
	sx->stx_mtime.tv_sec = st->st_mtim.tv_sec;
	sx->stx_rdev_major = major(st->st_rdev);
	sx->stx_rdev_minor = minor(st->st_rdev);
	sx->stx_dev_major = major(st->st_dev);
	sx->stx_dev_minor = minor(st->st_dev);
}

SHIM int statx(int dirfd, const char *path, int flags, unsigned int mask,
	       struct statx *sx)
{
	int (*f)(int, const char *, int, unsigned int, struct statx *);
	struct stat st;
	int rv;

	if (maybe_at(dirfd, path, flags) &&
	    view_stat(dirfd, path, &st, flags, &rv)) {
		if (!rv)
			fill_statx(&st, sx);
		return rv;
	}
	f = NEXT(statx);
	if (f)
		return f(dirfd, path, flags, mask, sx);
	return (int)syscall(SYS_statx, dirfd, path, flags, mask, sx);
}

/* ------------------------------------------------------------------ */
/* access                                                              */

/* true when the view answered (*rv). */
static bool view_access(int dirfd, const char *path, int mode, int flags,
			int *rv)
{
	struct shim_res *r;
	int ret, e;

	if (!*path && (flags & AT_EMPTY_PATH)) {
		ret = shim_dirfd_node(dirfd, &r);
		if (!ret)
			return false;
	} else {
		ret = shim_lookup(dirfd, path, !(flags & AT_SYMLINK_NOFOLLOW),
				  &r);
		if (ret == SHIM_PASS)
			return false;
	}
	if (ret == SHIM_REAL) {
		*rv = faccessat(AT_FDCWD, r->real, mode,
				flags & ~AT_EMPTY_PATH);
		e = errno;
		free(r);
		errno = e;
		return true;
	}
	if (ret < 0) {
		*rv = shim_fail(-ret);
		return true;
	}
	ret = shim_access(&r->node, mode, flags & AT_EACCESS);
	free(r);
	*rv = ret ? shim_fail(-ret) : 0;
	return true;
}

SHIM int faccessat(int dirfd, const char *path, int mode, int flags)
{
	int (*f)(int, const char *, int, int);
	int rv;

	if (maybe_at(dirfd, path, flags) &&
	    view_access(dirfd, path, mode, flags, &rv))
		return rv;
	f = NEXT(faccessat);
	if (f)
		return f(dirfd, path, mode, flags);
	return (int)syscall(SYS_faccessat2, dirfd, path, mode, flags);
}

SHIM int access(const char *path, int mode)
{
	int (*f)(const char *, int);
	int rv;

	if (shca_vfs_maybe(path) &&
	    view_access(AT_FDCWD, path, mode, 0, &rv))
		return rv;
	f = NEXT(access);
	if (f)
		return f(path, mode);
	return (int)syscall(SYS_faccessat, AT_FDCWD, path, mode);
}

SHIM int euidaccess(const char *path, int mode)
{
	int (*f)(const char *, int);
	int rv;

	if (shca_vfs_maybe(path) &&
	    view_access(AT_FDCWD, path, mode, AT_EACCESS, &rv))
		return rv;
	f = NEXT(euidaccess);
	return f ? f(path, mode) : shim_fail(ENOSYS);
}

SHIM int eaccess(const char *path, int mode)
{
	return euidaccess(path, mode);
}

/* ------------------------------------------------------------------ */
/* readlink, realpath                                                  */

static bool view_readlink(int dirfd, const char *path, char *buf,
			  size_t len, ssize_t *rv)
{
	char target[PATH_MAX];
	struct shim_res *r;
	int ret, e;

	ret = shim_lookup(dirfd, path, false, &r);
	if (ret == SHIM_PASS)
		return false;
	if (ret == SHIM_REAL) {
		*rv = shca_next_readlink(r->real, buf, len);
		e = errno;
		free(r);
		errno = e;
		return true;
	}
	if (ret < 0) {
		*rv = shim_fail(-ret);
		return true;
	}
	ret = shca_vfs_readlink(&r->node, target, sizeof(target));
	free(r);
	if (ret < 0) {
		*rv = shim_fail(-ret);
		return true;
	}
	/* as readlink(2): no NUL, cut to the buffer */
	if ((size_t)ret > len)
		ret = (int)len;
	memcpy(buf, target, (size_t)ret);
	*rv = ret;
	return true;
}

SHIM ssize_t readlink(const char *path, char *buf, size_t len)
{
	ssize_t rv;

	if (shca_vfs_maybe(path) &&
	    view_readlink(AT_FDCWD, path, buf, len, &rv))
		return rv;
	return shca_next_readlink(path, buf, len);
}

SHIM ssize_t readlinkat(int dirfd, const char *path, char *buf, size_t len)
{
	ssize_t (*f)(int, const char *, char *, size_t);
	ssize_t rv;

	if (maybe_at(dirfd, path, 0) &&
	    view_readlink(dirfd, path, buf, len, &rv))
		return rv;
	f = NEXT(readlinkat);
	if (f)
		return f(dirfd, path, buf, len);
	return syscall(SYS_readlinkat, dirfd, path, buf, len);
}

/*
 * The view's nodes are directories, not links to /sys/devices as the
 * kernel's are: a path of the view is its own real path, once "." and
 * ".." and its links are resolved; a link out of it resolves as the C
 * library resolves the real path it leads to.
 */
static bool view_realpath(const char *path, char *resolved, char **rv)
{
	char *(*f)(const char *, char *) = NEXT(realpath);
	struct shim_res *r;
	int ret, e;

	ret = shim_lookup(AT_FDCWD, path, true, &r);
	if (ret == SHIM_PASS)
		return false;
	*rv = NULL;
	if (ret < 0) {
		errno = -ret;
		return true;
	}
	if (ret == SHIM_REAL) {
		if (f) {
			*rv = f(r->real, resolved);
			e = errno;
			free(r);
			errno = e;
		} else {
			free(r);
			errno = ENOSYS;
		}
		return true;
	}
	if (!resolved)
		*rv = strdup(r->node.path);
	else
		*rv = strcpy(resolved, r->node.path);
	free(r);
	if (!*rv)
		errno = ENOMEM;
	return true;
}

SHIM char *realpath(const char *path, char *resolved)
{
	char *(*f)(const char *, char *);
	char *rv;

	if (shca_vfs_maybe(path) && view_realpath(path, resolved, &rv))
		return rv;
	f = NEXT(realpath);
	if (!f) {
		errno = ENOSYS;
		return NULL;
	}
	return f(path, resolved);
}

char *__realpath_chk(const char *path, char *resolved, size_t len);

SHIM char *__realpath_chk(const char *path, char *resolved, size_t len)
{
	char *(*f)(const char *, char *, size_t);

	if (shca_vfs_maybe(path) && len >= PATH_MAX)
		return realpath(path, resolved);
	/* not the view's, or a buffer too short: the C library's check */
	f = NEXT(__realpath_chk);
	if (!f) {
		errno = ENOSYS;
		return NULL;
	}
	return f(path, resolved, len);
}

SHIM char *canonicalize_file_name(const char *path)
{
	char *(*f)(const char *);
	char *rv;

	if (shca_vfs_maybe(path) && view_realpath(path, NULL, &rv))
		return rv;
	f = NEXT(canonicalize_file_name);
	if (!f) {
		errno = ENOSYS;
		return NULL;
	}
	return f(path);
}

/* ------------------------------------------------------------------ */
/* Extended attributes and file systems                                */

/* The view's nodes carry no extended attribute (ENODATA); a real path a
 * link led to is asked as it is. */
static bool view_xattr(const char *path, bool follow, const char *name,
		       void *value, size_t size, ssize_t *rv)
{
	struct shim_res *r;
	int ret, e;

	ret = shim_lookup(AT_FDCWD, path, follow, &r);
	if (ret == SHIM_PASS)
		return false;
	if (ret == SHIM_REAL) {
		*rv = follow ? getxattr(r->real, name, value, size) :
			       lgetxattr(r->real, name, value, size);
		e = errno;
		free(r);
		errno = e;
	} else if (ret < 0) {
		*rv = shim_fail(-ret);
	} else {
		free(r);
		*rv = shim_fail(ENODATA);
	}
	return true;
}

SHIM ssize_t getxattr(const char *path, const char *name, void *value,
		      size_t size)
{
	ssize_t (*f)(const char *, const char *, void *, size_t);
	ssize_t rv;

	if (shca_vfs_maybe(path) &&
	    view_xattr(path, true, name, value, size, &rv))
		return rv;
	f = NEXT(getxattr);
	return f ? f(path, name, value, size) : shim_fail(ENOSYS);
}

SHIM ssize_t lgetxattr(const char *path, const char *name, void *value,
		       size_t size)
{
	ssize_t (*f)(const char *, const char *, void *, size_t);
	ssize_t rv;

	if (shca_vfs_maybe(path) &&
	    view_xattr(path, false, name, value, size, &rv))
		return rv;
	f = NEXT(lgetxattr);
	return f ? f(path, name, value, size) : shim_fail(ENOSYS);
}

/* The file system of a view path: /sys's, or /dev's; NULL: not ours. */
static const char *view_fs(const char *path, struct shim_res **rp, int *err)
{
	int ret = shim_lookup(AT_FDCWD, path, true, rp);

	*err = 0;
	if (ret == SHIM_PASS)
		return NULL;
	if (ret < 0) {
		*err = -ret;
		return "";
	}
	if (ret == SHIM_REAL)
		return (*rp)->real;
	return (*rp)->node.dev_tree ? "/dev" : "/sys";
}

SHIM int statfs(const char *path, struct statfs *buf)
{
	int (*f)(const char *, struct statfs *) = NEXT(statfs);
	struct shim_res *r = NULL;
	const char *p = NULL;
	int rv, e = 0;

	if (!f)
		return shim_fail(ENOSYS);
	if (shca_vfs_maybe(path))
		p = view_fs(path, &r, &e);
	if (e)
		return shim_fail(e);
	rv = f(p ? p : path, buf);
	e = errno;
	free(r);
	errno = e;
	return rv;
}

SHIM int statfs64(const char *path, struct statfs64 *buf)
{
	return statfs(path, (struct statfs *)buf);
}

SHIM int statvfs(const char *path, struct statvfs *buf)
{
	int (*f)(const char *, struct statvfs *) = NEXT(statvfs);
	struct shim_res *r = NULL;
	const char *p = NULL;
	int rv, e = 0;

	if (!f)
		return shim_fail(ENOSYS);
	if (shca_vfs_maybe(path))
		p = view_fs(path, &r, &e);
	if (e)
		return shim_fail(e);
	rv = f(p ? p : path, buf);
	e = errno;
	free(r);
	errno = e;
	return rv;
}

SHIM int statvfs64(const char *path, struct statvfs64 *buf)
{
	return statvfs(path, (struct statvfs *)buf);
}
