// SPDX-License-Identifier: MIT
/*
 * softhca's own system calls, out of reach of a socket preload.
 *
 * rdma-core's librspreload (and any LD_PRELOAD of its kind) defines
 * socket, bind, listen, accept, connect, send*, recv*, read*, write*,
 * poll, select, shutdown, close, get/setsockopt, getsock/peername, fcntl,
 * dup2 and sendfile for the whole process.  Its socket() turns every new
 * TCP/UDP socket into an rsocket, except while its own call to rsocket()
 * runs in the same thread (a thread-local flag); the others look the fd
 * up in its index map and fall back to the libc function found with
 * dlsym(RTLD_NEXT) -- a pointer that is NULL until one of its few
 * initialising entry points (socket, read, write, close, poll, fcntl, ...)
 * has run.  softhca's engine thread, net path, same-host peers and CM
 * thread create and use sockets at any time: through the preload they
 * would become rsockets built on softhca itself (recursion, deadlock), or
 * call through a NULL pointer.
 *
 * So both libraries are linked with --wrap for each of those names
 * (CMakeLists.txt, SHCA_SYS_WRAP): every call softhca's objects make to
 * one of them lands here, and goes to the kernel without passing through
 * any interposable symbol.  Where glibc exports a public "__" alias of the
 * same code (__read, __write, __close, __poll, __connect, __send, __fcntl,
 * __select, __dup2) that alias is used, so that the call stays a thread
 * cancellation point as the plain name is (programs cancel threads asleep
 * in ibv_get_cq_event or rdma_get_cm_event); the others are syscall(2).
 * Calls made inside glibc itself (getaddrinfo, fopen) never go through
 * the PLT and need nothing.
 *
 * Every cancellation point softhca calls is wrapped here too, the
 * socket calls above and the rest below (open, fopen, pthread_cond_wait,
 * ...): inside a posting verb (common/nocancel.h) each turns
 * cancellation off around itself, so that the post need not.
 * tests/abi/check_cancel_points.sh fails a library that imports one
 * unwrapped.
 *
 * The memory-map calls too (mmap, munmap, mremap, mprotect, madvise):
 * UCX's memory hooks (ucm) patch those symbols in every loaded object and
 * take an munmap or mremap as "this memory went away", dropping the
 * registrations over it.  softhca's own mappings (the arena, a peer's
 * segments) are none of the program's business, and its re-backing of
 * registered memory in place (shm/seg.c) keeps addresses and contents:
 * telling UCX that the memory it just registered was unmapped made it
 * deregister it again (Open MPI's osc ucx stalled).
 */
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/select.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>

/* glibc's public aliases (GLIBC_2.2.5): the same code as the plain names */
extern ssize_t __read(int fd, void *buf, size_t n);
extern ssize_t __write(int fd, const void *buf, size_t n);
extern int __close(int fd);
extern int __poll(struct pollfd *fds, nfds_t n, int timeout);
extern int __connect(int fd, const struct sockaddr *a, socklen_t len);
extern ssize_t __send(int fd, const void *buf, size_t n, int flags);
extern int __fcntl(int fd, int cmd, ...);
extern int __select(int n, fd_set *r, fd_set *w, fd_set *e,
		    struct timeval *t);
extern int __dup2(int fd, int fd2);

#include "nocancel.h"

/*
 * call, not a cancellation point while the thread is inside a posting
 * verb (shca_nocancel_enter, nocancel.h): cancellation off around it
 * then, errno kept.  Every call softhca makes of a cancellation point
 * goes through here (tests/abi/check_cancel_points.sh).
 */
#define NOCANCEL(call)                                                 \
	({                                                             \
		__typeof__(call) r_;                                   \
		int cs_, e_;                                           \
                                                                       \
		if (!shca_nocancel_depth) {                            \
			r_ = (call);                                   \
		} else {                                               \
			cs_ = shca_cancel_off();                       \
			r_ = (call);                                   \
			e_ = errno;                                    \
			shca_cancel_restore(cs_);                      \
			errno = e_;                                    \
		}                                                      \
		r_;                                                    \
	})

#define SHCA_WRAP(ret, name, ...) \
	ret __wrap_##name(__VA_ARGS__) __attribute__((visibility("hidden"))); \
	ret __wrap_##name(__VA_ARGS__)

SHCA_WRAP(int, socket, int domain, int type, int protocol)
{
	return (int)syscall(SYS_socket, domain, type, protocol);
}

SHCA_WRAP(int, bind, int fd, const struct sockaddr *a, socklen_t len)
{
	return (int)syscall(SYS_bind, fd, a, len);
}

SHCA_WRAP(int, listen, int fd, int backlog)
{
	return (int)syscall(SYS_listen, fd, backlog);
}

SHCA_WRAP(int, accept, int fd, struct sockaddr *a, socklen_t *len)
{
	return (int)syscall(SYS_accept4, fd, a, len, 0);
}

SHCA_WRAP(int, connect, int fd, const struct sockaddr *a, socklen_t len)
{
	return NOCANCEL(__connect(fd, a, len));
}

SHCA_WRAP(int, shutdown, int fd, int how)
{
	return (int)syscall(SYS_shutdown, fd, how);
}

SHCA_WRAP(int, getsockname, int fd, struct sockaddr *a, socklen_t *len)
{
	return (int)syscall(SYS_getsockname, fd, a, len);
}

SHCA_WRAP(int, getpeername, int fd, struct sockaddr *a, socklen_t *len)
{
	return (int)syscall(SYS_getpeername, fd, a, len);
}

SHCA_WRAP(int, getsockopt, int fd, int level, int name, void *val,
	  socklen_t *len)
{
	return (int)syscall(SYS_getsockopt, fd, level, name, val, len);
}

SHCA_WRAP(int, setsockopt, int fd, int level, int name, const void *val,
	  socklen_t len)
{
	return (int)syscall(SYS_setsockopt, fd, level, name, val, len);
}

SHCA_WRAP(ssize_t, send, int fd, const void *buf, size_t n, int flags)
{
	return NOCANCEL(__send(fd, buf, n, flags));
}

SHCA_WRAP(ssize_t, sendto, int fd, const void *buf, size_t n, int flags,
	  const struct sockaddr *a, socklen_t len)
{
	return syscall(SYS_sendto, fd, buf, n, flags, a, len);
}

SHCA_WRAP(ssize_t, sendmsg, int fd, const struct msghdr *m, int flags)
{
	return syscall(SYS_sendmsg, fd, m, flags);
}

SHCA_WRAP(ssize_t, recv, int fd, void *buf, size_t n, int flags)
{
	return syscall(SYS_recvfrom, fd, buf, n, flags, NULL, NULL);
}

SHCA_WRAP(ssize_t, recvfrom, int fd, void *buf, size_t n, int flags,
	  struct sockaddr *a, socklen_t *len)
{
	return syscall(SYS_recvfrom, fd, buf, n, flags, a, len);
}

SHCA_WRAP(ssize_t, recvmsg, int fd, struct msghdr *m, int flags)
{
	return syscall(SYS_recvmsg, fd, m, flags);
}

SHCA_WRAP(ssize_t, read, int fd, void *buf, size_t n)
{
	return NOCANCEL(__read(fd, buf, n));
}

SHCA_WRAP(ssize_t, write, int fd, const void *buf, size_t n)
{
	return NOCANCEL(__write(fd, buf, n));
}

SHCA_WRAP(ssize_t, readv, int fd, const struct iovec *iov, int n)
{
	return syscall(SYS_readv, fd, iov, n);
}

SHCA_WRAP(ssize_t, writev, int fd, const struct iovec *iov, int n)
{
	return syscall(SYS_writev, fd, iov, n);
}

SHCA_WRAP(int, close, int fd)
{
	return NOCANCEL(__close(fd));
}

SHCA_WRAP(int, poll, struct pollfd *fds, nfds_t n, int timeout)
{
	return NOCANCEL(__poll(fds, n, timeout));
}

SHCA_WRAP(int, select, int n, fd_set *r, fd_set *w, fd_set *e,
	  struct timeval *t)
{
	return NOCANCEL(__select(n, r, w, e, t));
}

SHCA_WRAP(int, dup2, int fd, int fd2)
{
	return __dup2(fd, fd2);
}

SHCA_WRAP(ssize_t, sendfile, int out, int in, off_t *off, size_t n)
{
	return syscall(SYS_sendfile, out, in, off, n);
}

/* fcntl's third argument is an int, a long or a pointer: pass the word */
SHCA_WRAP(int, fcntl, int fd, int cmd, ...)
{
	unsigned long arg;
	va_list ap;

	va_start(ap, cmd);
	arg = va_arg(ap, unsigned long);
	va_end(ap);
	return NOCANCEL(__fcntl(fd, cmd, arg));
}

/*
 * The memory-map calls, unseen by memory hooks (above).  Under a
 * sanitizer they go to the libc names it intercepts (__real_*), so that
 * its shadow of remapped memory stays true; no memory hook runs there.
 */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SHCA_MM_REAL 1
#else
#define SHCA_MM_REAL 0
#endif

void *__real_mmap(void *addr, size_t len, int prot, int flags, int fd,
		  off_t off);
int __real_munmap(void *addr, size_t len);
void *__real_mremap(void *old, size_t old_len, size_t new_len, int flags,
		    ...);
int __real_mprotect(void *addr, size_t len, int prot);
int __real_madvise(void *addr, size_t len, int advice);

SHCA_WRAP(void *, mmap, void *addr, size_t len, int prot, int flags, int fd,
	  off_t off)
{
	if (SHCA_MM_REAL)
		return __real_mmap(addr, len, prot, flags, fd, off);
	return (void *)syscall(SYS_mmap, addr, len, prot, flags, fd, off);
}

SHCA_WRAP(int, munmap, void *addr, size_t len)
{
	if (SHCA_MM_REAL)
		return __real_munmap(addr, len);
	return (int)syscall(SYS_munmap, addr, len);
}

/* mremap's fifth argument (the new address) only with MREMAP_FIXED */
SHCA_WRAP(void *, mremap, void *old, size_t old_len, size_t new_len,
	  int flags, ...)
{
	void *to = NULL;
	va_list ap;

	if (flags & MREMAP_FIXED) {
		va_start(ap, flags);
		to = va_arg(ap, void *);
		va_end(ap);
	}
	if (SHCA_MM_REAL)
		return __real_mremap(old, old_len, new_len, flags, to);
	return (void *)syscall(SYS_mremap, old, old_len, new_len, flags, to);
}

SHCA_WRAP(int, mprotect, void *addr, size_t len, int prot)
{
	if (SHCA_MM_REAL)
		return __real_mprotect(addr, len, prot);
	return (int)syscall(SYS_mprotect, addr, len, prot);
}

SHCA_WRAP(int, madvise, void *addr, size_t len, int advice)
{
	if (SHCA_MM_REAL)
		return __real_madvise(addr, len, advice);
	return (int)syscall(SYS_madvise, addr, len, advice);
}

/*
 * The other cancellation points softhca calls (glibc's list, pthreads(7),
 * and the stdio and name-service calls that may be one): the libc call
 * itself (__real_), under NOCANCEL.
 */
int __real_accept4(int fd, struct sockaddr *a, socklen_t *len, int flags);
int __real_epoll_wait(int epfd, struct epoll_event *ev, int n, int timeout);
int __real_fallocate(int fd, int mode, off_t off, off_t len);
int __real_fsync(int fd);
ssize_t __real_getrandom(void *buf, size_t n, unsigned int flags);
int __real_nanosleep(const struct timespec *req, struct timespec *rem);
int __real_open(const char *path, int flags, ...);
int __real_openat(int dir, const char *path, int flags, ...);
ssize_t __real_pread(int fd, void *buf, size_t n, off_t off);
ssize_t __real_pwrite(int fd, const void *buf, size_t n, off_t off);
ssize_t __real_preadv2(int fd, const struct iovec *iov, int n, off_t off,
		       int flags);
int __real_pthread_cond_wait(pthread_cond_t *c, pthread_mutex_t *m);
FILE *__real_fopen(const char *path, const char *mode);
int __real_fclose(FILE *f);
int __real_fflush(FILE *f);
int __real_fgetc(FILE *f);
char *__real_fgets(char *s, int n, FILE *f);
int __real_vfprintf(FILE *f, const char *fmt, va_list ap);
int __real_getifaddrs(struct ifaddrs **ifa);
int __real_getpwuid_r(uid_t uid, struct passwd *pw, char *buf, size_t n,
		      struct passwd **res);
int __real_getaddrinfo(const char *node, const char *service,
		       const struct addrinfo *hints, struct addrinfo **res);

SHCA_WRAP(int, accept4, int fd, struct sockaddr *a, socklen_t *len,
	  int flags)
{
	return NOCANCEL(__real_accept4(fd, a, len, flags));
}

SHCA_WRAP(int, epoll_wait, int epfd, struct epoll_event *ev, int n,
	  int timeout)
{
	return NOCANCEL(__real_epoll_wait(epfd, ev, n, timeout));
}

SHCA_WRAP(int, fallocate, int fd, int mode, off_t off, off_t len)
{
	return NOCANCEL(__real_fallocate(fd, mode, off, len));
}

SHCA_WRAP(int, fsync, int fd)
{
	return NOCANCEL(__real_fsync(fd));
}

SHCA_WRAP(ssize_t, getrandom, void *buf, size_t n, unsigned int flags)
{
	return NOCANCEL(__real_getrandom(buf, n, flags));
}

SHCA_WRAP(int, nanosleep, const struct timespec *req, struct timespec *rem)
{
	return NOCANCEL(__real_nanosleep(req, rem));
}

/* open's and openat's mode: only with O_CREAT or O_TMPFILE */
static mode_t open_mode(int flags, va_list ap)
{
	return (flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE ?
		       (mode_t)va_arg(ap, unsigned int) :
		       0;
}

SHCA_WRAP(int, open, const char *path, int flags, ...)
{
	mode_t mode;
	va_list ap;

	va_start(ap, flags);
	mode = open_mode(flags, ap);
	va_end(ap);
	return NOCANCEL(__real_open(path, flags, mode));
}

SHCA_WRAP(int, openat, int dir, const char *path, int flags, ...)
{
	mode_t mode;
	va_list ap;

	va_start(ap, flags);
	mode = open_mode(flags, ap);
	va_end(ap);
	return NOCANCEL(__real_openat(dir, path, flags, mode));
}

SHCA_WRAP(ssize_t, pread, int fd, void *buf, size_t n, off_t off)
{
	return NOCANCEL(__real_pread(fd, buf, n, off));
}

SHCA_WRAP(ssize_t, pwrite, int fd, const void *buf, size_t n, off_t off)
{
	return NOCANCEL(__real_pwrite(fd, buf, n, off));
}

SHCA_WRAP(ssize_t, preadv2, int fd, const struct iovec *iov, int n,
	  off_t off, int flags)
{
	return NOCANCEL(__real_preadv2(fd, iov, n, off, flags));
}

SHCA_WRAP(int, pthread_cond_wait, pthread_cond_t *c, pthread_mutex_t *m)
{
	return NOCANCEL(__real_pthread_cond_wait(c, m));
}

SHCA_WRAP(FILE *, fopen, const char *path, const char *mode)
{
	return NOCANCEL(__real_fopen(path, mode));
}

SHCA_WRAP(int, fclose, FILE *f)
{
	return NOCANCEL(__real_fclose(f));
}

SHCA_WRAP(int, fflush, FILE *f)
{
	return NOCANCEL(__real_fflush(f));
}

SHCA_WRAP(int, fgetc, FILE *f)
{
	return NOCANCEL(__real_fgetc(f));
}

SHCA_WRAP(char *, fgets, char *s, int n, FILE *f)
{
	return NOCANCEL(__real_fgets(s, n, f));
}

SHCA_WRAP(int, vfprintf, FILE *f, const char *fmt, va_list ap)
{
	return NOCANCEL(__real_vfprintf(f, fmt, ap));
}

SHCA_WRAP(int, fprintf, FILE *f, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = NOCANCEL(__real_vfprintf(f, fmt, ap));
	va_end(ap);
	return n;
}

SHCA_WRAP(int, __isoc99_fscanf, FILE *f, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = NOCANCEL(vfscanf(f, fmt, ap));
	va_end(ap);
	return n;
}

SHCA_WRAP(int, getifaddrs, struct ifaddrs **ifa)
{
	return NOCANCEL(__real_getifaddrs(ifa));
}

SHCA_WRAP(int, getpwuid_r, uid_t uid, struct passwd *pw, char *buf,
	  size_t n, struct passwd **res)
{
	return NOCANCEL(__real_getpwuid_r(uid, pw, buf, n, res));
}

SHCA_WRAP(int, getaddrinfo, const char *node, const char *service,
	  const struct addrinfo *hints, struct addrinfo **res)
{
	return NOCANCEL(__real_getaddrinfo(node, service, hints, res));
}
