// SPDX-License-Identifier: MIT
/*
 * The same-host socket protocol: addresses, descriptor passing, the
 * hello (sock.h).  No state but the directory's (rundir.c): the path shim
 * links this file.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/time.h>

#include "../common/slot.h"
#include "rundir.h"
#include "sock.h"

int shca_sock_addr(struct sockaddr_un *sa, socklen_t *len, uint16_t port,
		   bool create)
{
	const struct shca_rundir *d = shca_rundir_get(create);
	int n;

	if (!d)
		return -errno;
	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	n = snprintf(sa->sun_path, sizeof(sa->sun_path), "%s/%u", d->path,
		     port);
	if (n < 0 || (size_t)n >= sizeof(sa->sun_path))
		return -ENAMETOOLONG;
	*len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) +
			   (size_t)n + 1);
	return 0;
}

int shca_sock_bind(uint16_t port, bool *reclaimed)
{
	struct sockaddr_un sa;
	char name[8];
	socklen_t len = 0;	/* set by shca_sock_addr; gcc -O3 cannot tell */
	int fd, ret, tries;

	*reclaimed = false;
	snprintf(name, sizeof(name), "%u", port);
	for (tries = 0; tries < 3; tries++) {
		const struct shca_rundir *d;

		ret = shca_sock_addr(&sa, &len, port, true);
		if (ret)
			return ret;
		d = shca_rundir_get(true);
		if (!d)
			return -errno;
		/*
		 * We hold port P (TCP and UDP) in this namespace, so no live
		 * process has the name P in this namespace's directory: one
		 * that is there was left by a process that died without
		 * removing it (kill -9).  Only this user can write here.
		 */
		if (!unlinkat(d->fd, name, 0))
			*reclaimed = true;
		fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC |
				     SOCK_NONBLOCK, 0);
		if (fd < 0)
			return -errno;
		if (!bind(fd, (struct sockaddr *)&sa, len)) {
			shca_rundir_mark_used();
			return fd;
		}
		ret = -errno;
		close(fd);
		if (ret != -ENOENT)
			return ret;
		/* the directory was removed as we came: make it again */
		shca_rundir_reset();
	}
	return ret;
}

void shca_sock_unbind(uint16_t port)
{
	const struct shca_rundir *d = shca_rundir_get(false);
	char name[8];

	snprintf(name, sizeof(name), "%u", port);
	if (d)
		unlinkat(d->fd, name, 0);
}

int shca_sock_peer_cred(int sock, pid_t *pid)
{
	struct ucred cred;
	socklen_t len = sizeof(cred);

	if (getsockopt(sock, SOL_SOCKET, SO_PEERCRED, &cred, &len) ||
	    len != sizeof(cred))
		return -EACCES;
	if (cred.uid != getuid())
		return -EACCES;
	if (pid)
		*pid = cred.pid;
	return 0;
}

int shca_sock_live_slots(uint8_t *live)
{
	const struct shca_rundir *d = shca_rundir_get(false);
	unsigned int base = shca_port_base();
	struct dirent *e;
	DIR *dir;
	int fd;

	if (!d)
		return errno == ENOENT ? 0 : -errno;
	fd = openat(d->fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	dir = fdopendir(fd);
	if (!dir) {
		close(fd);
		return -errno;
	}
	while ((e = readdir(dir))) {
		char *end;
		unsigned long port = strtoul(e->d_name, &end, 10);

		if (e->d_name[0] < '0' || e->d_name[0] > '9' || *end ||
		    (e->d_type != DT_SOCK && e->d_type != DT_UNKNOWN))
			continue;
		if (port >= base && port - base < SHCA_NUM_SLOTS)
			live[port - base] = 1;
	}
	closedir(dir);
	return 0;
}

ssize_t shca_sock_sendmsg_fds(int sock, const void *data, size_t len,
			      const int *fds, int nfds, int flags)
{
	union {
		char buf[CMSG_SPACE(SHCA_SOCK_MAX_FDS * sizeof(int))];
		struct cmsghdr align;
	} u;
	struct iovec iov = { (void *)data, len };
	struct msghdr msg;
	struct cmsghdr *cm;

	memset(&msg, 0, sizeof(msg));
	msg.msg_iov = &iov;
	msg.msg_iovlen = 1;
	if (nfds > 0) {
		msg.msg_control = u.buf;
		msg.msg_controllen = CMSG_SPACE((size_t)nfds * sizeof(int));
		cm = CMSG_FIRSTHDR(&msg);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN((size_t)nfds * sizeof(int));
		memcpy(CMSG_DATA(cm), fds, (size_t)nfds * sizeof(int));
	}
	return sendmsg(sock, &msg, flags | MSG_NOSIGNAL);
}

int shca_sock_send_fds(int sock, const void *data, size_t len,
		       const int *fds, int nfds)
{
	return shca_sock_sendmsg_fds(sock, data, len, fds, nfds, 0) < 0 ?
		       -errno : 0;
}

int shca_sock_recv_fds(int sock, void *data, size_t len, int *fds,
		       int maxfds)
{
	union {
		char buf[CMSG_SPACE(SHCA_SOCK_MAX_FDS * sizeof(int))];
		struct cmsghdr align;
	} u;
	struct iovec iov = { data, len };
	struct msghdr msg;
	struct cmsghdr *cm;
	int i, n = 0, got[SHCA_SOCK_MAX_FDS];
	ssize_t r;

	memset(&msg, 0, sizeof(msg));
	msg.msg_iov = &iov;
	msg.msg_iovlen = 1;
	msg.msg_control = u.buf;
	msg.msg_controllen = sizeof(u.buf);
	r = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
	if (r < 0)
		return -errno;
	cm = CMSG_FIRSTHDR(&msg);
	if (cm && cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS) {
		n = (int)((cm->cmsg_len - CMSG_LEN(0)) / sizeof(int));
		if (n > SHCA_SOCK_MAX_FDS)
			n = SHCA_SOCK_MAX_FDS;
		memcpy(got, CMSG_DATA(cm), (size_t)n * sizeof(int));
	}
	/* one record a message: a longer one (MSG_TRUNC) is no record */
	if (r != (ssize_t)len || n > maxfds ||
	    (msg.msg_flags & (MSG_CTRUNC | MSG_TRUNC))) {
		for (i = 0; i < n; i++)
			close(got[i]);
		return -EPROTO;
	}
	memcpy(fds, got, (size_t)n * sizeof(int));
	return n;
}

int shca_sock_recv_hello(int sock, struct shca_hello *h, int fds[3])
{
	int n = shca_sock_recv_fds(sock, h, sizeof(*h), fds, 3);

	if (n < 0)
		return n;
	if (n != 3 || h->magic != SHCA_HELLO_MAGIC || h->uid != getuid()) {
		while (n--)
			close(fds[n]);
		return -EPROTO;
	}
	return 0;
}

int shca_sock_connect(int slot, int timeout_s, pid_t *pid)
{
	struct timeval tv = { timeout_s, 0 };
	struct sockaddr_un sa;
	socklen_t len = 0;	/* set by shca_sock_addr; gcc -O3 cannot tell */
	int fd, ret;

	if (slot < 0 || slot >= (int)SHCA_NUM_SLOTS)
		return -EINVAL;
	ret = shca_sock_addr(&sa, &len, (uint16_t)(shca_port_base() + slot),
			     false);
	if (ret)
		return ret;
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	/* a stopped owner must not hold us: the hello times out */
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (connect(fd, (struct sockaddr *)&sa, len)) {
		ret = -errno;
		close(fd);
		return ret;
	}
	/* the listener's credentials, as the kernel took them at listen() */
	ret = shca_sock_peer_cred(fd, pid);
	if (ret) {
		close(fd);
		return ret;
	}
	return fd;
}
