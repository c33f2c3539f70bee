// SPDX-License-Identifier: MIT
/*
 * Opening paths of the view: open, openat (and their 64-bit and
 * fortified _2 names), creat, fopen.
 *
 * A file of the view opens as a sealed memfd holding its content at that
 * moment (a counter's value when it was opened, as sysfs gives); a
 * directory as a registered stand-in (resolve.c) that the *at functions,
 * fstat and fdopendir recognize.  Nothing of the view can be written:
 * write access is EACCES (sysfs's answer for a file without a store
 * method, and for creating), a directory EISDIR; the character devices
 * have no driver behind them (ENXIO), as a node without its module.
 */
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/syscall.h>

#include "shim.h"

/* What open does with a node of the view: a descriptor or -errno. */
static int open_node(const struct shca_vfs_node *n, int flags)
{
	bool cloexec = flags & O_CLOEXEC;
	int acc = flags & O_ACCMODE;
	bool excl = (flags & O_CREAT) && (flags & O_EXCL);

	if (excl)
		return -EEXIST;
	if (flags & O_PATH) {
		/* a handle only: nothing is read through it */
		if ((flags & O_DIRECTORY) && n->type != SHCA_VFS_DIR)
			return -ENOTDIR;
		return shim_dir_fd(n, cloexec);
	}
	switch (n->type) {
	case SHCA_VFS_DIR:
		if (acc != O_RDONLY || (flags & O_TRUNC))
			return -EISDIR;
		return shim_dir_fd(n, cloexec);
	case SHCA_VFS_LINK:
		/* reached unfollowed: O_NOFOLLOW */
		return -ELOOP;
	case SHCA_VFS_CHR:
		if (flags & O_DIRECTORY)
			return -ENOTDIR;
		return -ENXIO;
	case SHCA_VFS_FILE:
		if (flags & O_DIRECTORY)
			return -ENOTDIR;
		if (acc != O_RDONLY || (flags & O_TRUNC))
			return -EACCES;
		return shim_file_fd(n, cloexec);
	}
	return -EIO;
}

/* Does the directory of a path that names nothing exist in the view?
 * Then creating there is refused as sysfs does (EACCES). */
static int create_error(int dirfd, const char *path)
{
	char *dir = strdup(path), *slash;
	struct shim_res *r;
	int ret, err = ENOENT;

	if (!dir)
		return ENOMEM;
	slash = strrchr(dir, '/');
	if (slash) {
		*(slash == dir ? slash + 1 : slash) = '\0';
		ret = shim_lookup(dirfd, dir, true, &r);
		if (ret == SHIM_NODE && r->node.type == SHCA_VFS_DIR)
			err = EACCES;
		free(r);
	}
	free(dir);
	return err;
}

/* true when the view answered (*rv, errno). */
static bool view_open(int dirfd, const char *path, int flags, mode_t mode,
		      int *rv)
{
	bool follow = !(flags & O_NOFOLLOW) &&
		      !((flags & O_CREAT) && (flags & O_EXCL));
	struct shim_res *r;
	int ret, e;

	ret = shim_lookup(dirfd, path, follow, &r);
	if (ret == SHIM_PASS)
		return false;
	if (ret == SHIM_REAL) {
		*rv = shca_next_openat(AT_FDCWD, r->real, flags, mode);
		e = errno;
		free(r);
		errno = e;
		return true;
	}
	if (ret == -ENOENT && (flags & O_CREAT)) {
		*rv = shim_fail(create_error(dirfd, path));
		return true;
	}
	if (ret < 0) {
		*rv = shim_fail(-ret);
		return true;
	}
	ret = open_node(&r->node, flags);
	free(r);
	*rv = ret < 0 ? shim_fail(-ret) : ret;
	return true;
}

static bool wants_mode(int flags)
{
	return (flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE;
}

static bool maybe_at(int dirfd, const char *path)
{
	if (!path)
		return false;
	if (path[0] == '/' || dirfd == AT_FDCWD)
		return shca_vfs_maybe(path);
	return shca_vfs_maybe(path) || shim_maybe_view_fd(dirfd);
}

SHIM int openat(int dirfd, const char *path, int flags, ...)
{
	mode_t mode = 0;
	va_list ap;
	int rv;

	if (wants_mode(flags)) {
		va_start(ap, flags);
		mode = va_arg(ap, mode_t);
		va_end(ap);
	}
	if (maybe_at(dirfd, path) && view_open(dirfd, path, flags, mode, &rv))
		return rv;
	return shca_next_openat(dirfd, path, flags, mode);
}

SHIM int openat64(int dirfd, const char *path, int flags, ...)
{
	mode_t mode = 0;
	va_list ap;

	if (wants_mode(flags)) {
		va_start(ap, flags);
		mode = va_arg(ap, mode_t);
		va_end(ap);
	}
	return openat(dirfd, path, flags, mode);
}

SHIM int open(const char *path, int flags, ...)
{
	int (*f)(const char *, int, ...);
	mode_t mode = 0;
	va_list ap;
	int rv;

	if (wants_mode(flags)) {
		va_start(ap, flags);
		mode = va_arg(ap, mode_t);
		va_end(ap);
	}
	if (shca_vfs_maybe(path) &&
	    view_open(AT_FDCWD, path, flags, mode, &rv))
		return rv;
	f = NEXT(open);
	if (f)
		return f(path, flags, mode);
	return (int)syscall(SYS_openat, AT_FDCWD, path, flags, mode);
}

SHIM int open64(const char *path, int flags, ...)
{
	mode_t mode = 0;
	va_list ap;

	if (wants_mode(flags)) {
		va_start(ap, flags);
		mode = va_arg(ap, mode_t);
		va_end(ap);
	}
	return open(path, flags, mode);
}

/* _FORTIFY_SOURCE's names: the same without a mode (no O_CREAT). */
int __open_2(const char *path, int flags);
int __open64_2(const char *path, int flags);
int __openat_2(int dirfd, const char *path, int flags);
int __openat64_2(int dirfd, const char *path, int flags);

SHIM int __open_2(const char *path, int flags)
{
	int (*f)(const char *, int);
	int rv;

	if (shca_vfs_maybe(path) && view_open(AT_FDCWD, path, flags, 0, &rv))
		return rv;
	f = NEXT(__open_2);
	return f ? f(path, flags) : open(path, flags);
}

SHIM int __open64_2(const char *path, int flags)
{
	return __open_2(path, flags);
}

SHIM int __openat_2(int dirfd, const char *path, int flags)
{
	int (*f)(int, const char *, int);
	int rv;

	if (maybe_at(dirfd, path) && view_open(dirfd, path, flags, 0, &rv))
		return rv;
	f = NEXT(__openat_2);
	return f ? f(dirfd, path, flags) : openat(dirfd, path, flags);
}

SHIM int __openat64_2(int dirfd, const char *path, int flags)
{
	return __openat_2(dirfd, path, flags);
}

SHIM int creat(const char *path, mode_t mode)
{
	return open(path, O_CREAT | O_WRONLY | O_TRUNC, mode);
}

SHIM int creat64(const char *path, mode_t mode)
{
	return open(path, O_CREAT | O_WRONLY | O_TRUNC, mode);
}

/* fopen's mode as open's flags (glibc's letters: r w a + e x). */
static int fopen_flags(const char *mode)
{
	int flags;

	switch (mode[0]) {
	case 'r':
		flags = O_RDONLY;
		break;
	case 'w':
		flags = O_WRONLY | O_CREAT | O_TRUNC;
		break;
	case 'a':
		flags = O_WRONLY | O_CREAT | O_APPEND;
		break;
	default:
		return -1;
	}
	for (mode++; *mode && *mode != ','; mode++) {
		if (*mode == '+')
			flags = (flags & ~O_ACCMODE) | O_RDWR;
		else if (*mode == 'e')
			flags |= O_CLOEXEC;
		else if (*mode == 'x')
			flags |= O_EXCL;
	}
	return flags;
}

static bool view_fopen(const char *path, const char *mode, FILE **rv)
{
	int flags = fopen_flags(mode), fd, e;

	if (flags < 0)
		return false;	/* the C library's EINVAL */
	if (!view_open(AT_FDCWD, path, flags, 0666, &fd))
		return false;
	*rv = NULL;
	if (fd < 0)
		return true;
	*rv = fdopen(fd, mode);
	if (!*rv) {
		e = errno;
		close(fd);
		errno = e;
	}
	return true;
}

SHIM FILE *fopen(const char *path, const char *mode)
{
	FILE *(*f)(const char *, const char *);
	FILE *rv;

	if (shca_vfs_maybe(path) && mode && view_fopen(path, mode, &rv))
		return rv;
	f = NEXT(fopen);
	if (!f) {
		errno = ENOSYS;
		return NULL;
	}
	return f(path, mode);
}

SHIM FILE *fopen64(const char *path, const char *mode)
{
	FILE *(*f)(const char *, const char *);
	FILE *rv;

	if (shca_vfs_maybe(path) && mode && view_fopen(path, mode, &rv))
		return rv;
	f = NEXT(fopen64);
	if (!f) {
		errno = ENOSYS;
		return NULL;
	}
	return f(path, mode);
}
