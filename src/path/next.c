// SPDX-License-Identifier: MIT
/*
 * The C library's own functions, behind the shim's (shim.h NEXT).
 *
 * dlsym may allocate, and an allocator may open or stat files before it
 * is ready (jemalloc reads /proc and /sys): a thread already inside dlsym
 * gets NULL, and the functions below then make the system call
 * themselves.  The flag is initial-exec TLS: reading it allocates nothing.
 */
#include <dlfcn.h>
#include <fcntl.h>
#include <unistd.h>
#include <sys/syscall.h>

#include "shim.h"

static __thread int in_dlsym __attribute__((tls_model("initial-exec")));

void *shca_path_next(const char *name, const char *version)
{
	void *p;

	if (in_dlsym)
		return NULL;
	in_dlsym = 1;
	p = version ? dlvsym(RTLD_NEXT, name, version) :
		      dlsym(RTLD_NEXT, name);
	in_dlsym = 0;
	return p;
}

int shca_next_fstatat(int dirfd, const char *path, struct stat *st,
		      int flags)
{
	int (*f)(int, const char *, struct stat *, int) = NEXT(fstatat);

	if (f)
		return f(dirfd, path, st, flags);
	/* the kernel's struct stat is the C library's on this ABI */
	return (int)syscall(SYS_newfstatat, dirfd, path, st, flags);
}

int shca_next_fstat(int fd, struct stat *st)
{
	int (*f)(int, struct stat *) = NEXT(fstat);

	if (f)
		return f(fd, st);
	return (int)syscall(SYS_fstat, fd, st);
}

ssize_t shca_next_readlink(const char *path, char *buf, size_t len)
{
	ssize_t (*f)(const char *, char *, size_t) = NEXT(readlink);

	if (f)
		return f(path, buf, len);
	return syscall(SYS_readlinkat, AT_FDCWD, path, buf, len);
}

int shca_next_openat(int dirfd, const char *path, int flags, mode_t mode)
{
	int (*f)(int, const char *, int, ...) = NEXT(openat);

	if (f)
		return f(dirfd, path, flags, mode);
	return (int)syscall(SYS_openat, dirfd, path, flags, mode);
}
