// SPDX-License-Identifier: MIT
/*
 * Duplicates of the descriptors that stand for the view's directories
 * (resolve.c): Python's os.listdir(fd), for one, lists a dup of the
 * descriptor it was given.  Every other call is the C library's, after
 * one test of a word (no registration in this process: nothing to do).
 */
#include <fcntl.h>
#include <stdarg.h>
#include <unistd.h>
#include <sys/syscall.h>

#include "shim.h"

SHIM int dup(int fd)
{
	int (*f)(int) = NEXT(dup);
	int nfd = f ? f(fd) : (int)syscall(SYS_dup, fd);

	if (nfd >= 0 && shim_maybe_view_fd(fd))
		shim_dir_fd_dup(fd, nfd);
	return nfd;
}

SHIM int dup2(int fd, int fd2)
{
	int (*f)(int, int) = NEXT(dup2);
	int nfd = f ? f(fd, fd2) : (int)syscall(SYS_dup2, fd, fd2);

	if (nfd >= 0 && shim_maybe_view_fd(fd))
		shim_dir_fd_dup(fd, nfd);
	return nfd;
}

SHIM int dup3(int fd, int fd2, int flags)
{
	int (*f)(int, int, int) = NEXT(dup3);
	int nfd = f ? f(fd, fd2, flags) :
		      (int)syscall(SYS_dup3, fd, fd2, flags);

	if (nfd >= 0 && shim_maybe_view_fd(fd))
		shim_dir_fd_dup(fd, nfd);
	return nfd;
}

/* fcntl's third argument is an int or a pointer: passed on as glibc
 * reads it, a pointer-sized word. */
static int do_fcntl(int (*f)(int, int, ...), long nr, int fd, int cmd,
		    void *arg)
{
	int ret = f ? f(fd, cmd, arg) : (int)syscall(nr, fd, cmd, arg);

	if (ret >= 0 && (cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC) &&
	    shim_maybe_view_fd(fd))
		shim_dir_fd_dup(fd, ret);
	return ret;
}

SHIM int fcntl(int fd, int cmd, ...)
{
	va_list ap;
	void *arg;

	va_start(ap, cmd);
	arg = va_arg(ap, void *);
	va_end(ap);
	return do_fcntl(NEXT(fcntl), SYS_fcntl, fd, cmd, arg);
}

int fcntl64(int fd, int cmd, ...);

SHIM int fcntl64(int fd, int cmd, ...)
{
	va_list ap;
	void *arg;

	va_start(ap, cmd);
	arg = va_arg(ap, void *);
	va_end(ap);
	return do_fcntl(NEXT(fcntl64), SYS_fcntl, fd, cmd, arg);
}
