// SPDX-License-Identifier: MIT
/* Descriptors over a Unix socket for tests: see fdpass.h. */
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "harness.h"
#include "fdpass.h"

void fdpass_send(int sock, int fd, const void *data, size_t len)
{
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} u;
	struct iovec iov = { (void *)data, len };
	struct msghdr msg;
	struct cmsghdr *cm;

	memset(&msg, 0, sizeof(msg));
	msg.msg_iov = &iov;
	msg.msg_iovlen = 1;
	msg.msg_control = u.buf;
	msg.msg_controllen = sizeof(u.buf);
	cm = CMSG_FIRSTHDR(&msg);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(cm), &fd, sizeof(int));
	ASSERT_EQ(sendmsg(sock, &msg, 0), (ssize_t)len);
}

int fdpass_recv(int sock, void *data, size_t len)
{
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} u;
	struct iovec iov = { data, len };
	struct msghdr msg;
	struct cmsghdr *cm;
	int fd;

	memset(&msg, 0, sizeof(msg));
	msg.msg_iov = &iov;
	msg.msg_iovlen = 1;
	msg.msg_control = u.buf;
	msg.msg_controllen = sizeof(u.buf);
	ASSERT_EQ(recvmsg(sock, &msg, 0), (ssize_t)len);
	cm = CMSG_FIRSTHDR(&msg);
	ASSERT_NOT_NULL(cm);
	ASSERT_EQ(cm->cmsg_type, SCM_RIGHTS);
	memcpy(&fd, CMSG_DATA(cm), sizeof(int));
	return fd;
}
