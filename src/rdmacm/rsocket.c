// SPDX-License-Identifier: MIT
/*
 * The rsocket API (rdma/rsocket.h) is not implemented yet: every call
 * fails cleanly with -1 and errno ENOSYS (riomap: (off_t)-1, riowrite:
 * (size_t)-1), so that rstream, riostream, rcopy and udpong report an
 * error instead of crashing.  rdmacm-utils' other examples import rpoll
 * but call it only in their rsocket mode.
 */
#include <errno.h>
#include <rdma/rsocket.h>

#include "../common/log.h"

static int enosys(const char *what)
{
	shca_warn_once("%s: the rsocket API is not implemented by softhca yet",
		       what);
	errno = ENOSYS;
	return -1;
}

int rsocket(int domain, int type, int protocol)
{
	return enosys(__func__);
}

int rbind(int socket, const struct sockaddr *addr, socklen_t addrlen)
{
	return enosys(__func__);
}

int rlisten(int socket, int backlog)
{
	return enosys(__func__);
}

int raccept(int socket, struct sockaddr *addr, socklen_t *addrlen)
{
	return enosys(__func__);
}

int rconnect(int socket, const struct sockaddr *addr, socklen_t addrlen)
{
	return enosys(__func__);
}

int rshutdown(int socket, int how)
{
	return enosys(__func__);
}

int rclose(int socket)
{
	return enosys(__func__);
}

ssize_t rrecv(int socket, void *buf, size_t len, int flags)
{
	return enosys(__func__);
}

ssize_t rrecvfrom(int socket, void *buf, size_t len, int flags,
		  struct sockaddr *src_addr, socklen_t *addrlen)
{
	return enosys(__func__);
}

ssize_t rrecvmsg(int socket, struct msghdr *msg, int flags)
{
	return enosys(__func__);
}

ssize_t rsend(int socket, const void *buf, size_t len, int flags)
{
	return enosys(__func__);
}

ssize_t rsendto(int socket, const void *buf, size_t len, int flags,
		const struct sockaddr *dest_addr, socklen_t addrlen)
{
	return enosys(__func__);
}

ssize_t rsendmsg(int socket, const struct msghdr *msg, int flags)
{
	return enosys(__func__);
}

ssize_t rread(int socket, void *buf, size_t count)
{
	return enosys(__func__);
}

ssize_t rreadv(int socket, const struct iovec *iov, int iovcnt)
{
	return enosys(__func__);
}

ssize_t rwrite(int socket, const void *buf, size_t count)
{
	return enosys(__func__);
}

ssize_t rwritev(int socket, const struct iovec *iov, int iovcnt)
{
	return enosys(__func__);
}

int rpoll(struct pollfd *fds, nfds_t nfds, int timeout)
{
	return enosys(__func__);
}

int rselect(int nfds, fd_set *readfds, fd_set *writefds, fd_set *exceptfds,
	    struct timeval *timeout)
{
	return enosys(__func__);
}

int rgetpeername(int socket, struct sockaddr *addr, socklen_t *addrlen)
{
	return enosys(__func__);
}

int rgetsockname(int socket, struct sockaddr *addr, socklen_t *addrlen)
{
	return enosys(__func__);
}

int rsetsockopt(int socket, int level, int optname, const void *optval,
		socklen_t optlen)
{
	return enosys(__func__);
}

int rgetsockopt(int socket, int level, int optname, void *optval,
		socklen_t *optlen)
{
	return enosys(__func__);
}

int rfcntl(int socket, int cmd, ...)
{
	return enosys(__func__);
}

off_t riomap(int socket, void *buf, size_t len, int prot, int flags,
	     off_t offset)
{
	return enosys(__func__);
}

int riounmap(int socket, void *buf, size_t len)
{
	return enosys(__func__);
}

size_t riowrite(int socket, const void *buf, size_t count, off_t offset,
		int flags)
{
	return (size_t)enosys(__func__);
}
