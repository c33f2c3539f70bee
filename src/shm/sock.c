// SPDX-License-Identifier: MIT
/*
 * The same-host socket protocol: addresses, descriptor passing, the
 * hello (sock.h).  No state, no logging: the path shim links this file.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/time.h>

#include "../common/slot.h"
#include "sock.h"

socklen_t shca_sock_addr(struct sockaddr_un *sa, uint16_t port)
{
	int n;

	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	/* abstract name: private to this network namespace */
	n = snprintf(sa->sun_path + 1, sizeof(sa->sun_path) - 1,
		     "softhca-%u-%u", (unsigned int)getuid(), port);
	return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 +
			   (size_t)n);
}

int shca_sock_send_fds(int sock, const void *data, size_t len,
		       const int *fds, int nfds)
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
	return sendmsg(sock, &msg, MSG_NOSIGNAL) < 0 ? -errno : 0;
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
	if (r != (ssize_t)len || n > maxfds || (msg.msg_flags & MSG_CTRUNC)) {
		for (i = 0; i < n; i++)
			close(got[i]);
		return -EPROTO;
	}
	memcpy(fds, got, (size_t)n * sizeof(int));
	return n;
}

int shca_sock_recv_hello(int sock, struct shca_hello *h, int fds[2])
{
	int n = shca_sock_recv_fds(sock, h, sizeof(*h), fds, 2);

	if (n < 0)
		return n;
	if (n != 2 || h->magic != SHCA_HELLO_MAGIC) {
		while (n--)
			close(fds[n]);
		return -EPROTO;
	}
	return 0;
}

int shca_sock_connect(int slot, int timeout_s)
{
	struct timeval tv = { timeout_s, 0 };
	struct sockaddr_un sa;
	socklen_t len;
	int fd, ret;

	if (slot < 0 || slot >= (int)SHCA_NUM_SLOTS)
		return -EINVAL;
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	/* a stopped owner must not hold us: the hello times out */
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	len = shca_sock_addr(&sa, (uint16_t)(shca_port_base() + slot));
	if (connect(fd, (struct sockaddr *)&sa, len)) {
		ret = -errno;
		close(fd);
		return ret;
	}
	return fd;
}
