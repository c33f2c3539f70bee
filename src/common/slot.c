// SPDX-License-Identifier: MIT
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "log.h"
#include "slot.h"
#include "util.h"

static pthread_mutex_t slot_lock = PTHREAD_MUTEX_INITIALIZER;
static struct shca_slot the_slot = { .slot = -1, .tcp_fd = -1, .udp_fd = -1 };
static pid_t slot_pid;

/*
 * Reserve port for this process, on every address: UDP bound to the
 * wildcard address (UD datagrams arrive there; conn.c drops those for an
 * address this process does not use); TCP bound to the wildcard address
 * and not listening.  The TCP socket has SO_REUSEPORT and no
 * SO_REUSEADDR: no other user can bind the port on any address; this
 * process's listeners on its devices' addresses (net/listen.c) share it.
 * Another process of the same user may bind it too (SO_REUSEPORT), but
 * not the UDP port, so take_slot moves on: the pair stays unique.
 * TIME_WAIT sockets of an earlier owner's connections have SO_REUSEPORT
 * too and do not stand in the way.
 */
static int bind_port(int type, uint16_t port)
{
	struct sockaddr_in6 sa;
	int fd, one = 1, zero = 0;

	fd = socket(AF_INET6, type | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		/* no IPv6 at all: IPv4 only */
		struct sockaddr_in sa4;

		fd = socket(AF_INET, type | SOCK_CLOEXEC, 0);
		if (fd < 0)
			return -errno;
		if (type == SOCK_STREAM)
			setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one,
				   sizeof(one));
		memset(&sa4, 0, sizeof(sa4));
		sa4.sin_family = AF_INET;
		sa4.sin_port = htons(port);
		sa4.sin_addr.s_addr = htonl(INADDR_ANY);
		if (bind(fd, (struct sockaddr *)&sa4, sizeof(sa4)))
			goto err;
		goto bound;
	}
	setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
	if (type == SOCK_STREAM)
		setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one));
	memset(&sa, 0, sizeof(sa));
	sa.sin6_family = AF_INET6;
	sa.sin6_port = htons(port);
	sa.sin6_addr = in6addr_any;
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)))
		goto err;
bound:
	return fd;
err:
	{
		int e = errno;

		close(fd);
		return -e;
	}
}

static int take_slot(void)
{
	uint16_t base = shca_port_base();
	unsigned int start, i;

	/* start at a pid-derived slot so that processes rarely collide */
	start = (unsigned int)shca_getpid() % SHCA_NUM_SLOTS;
	for (i = 0; i < SHCA_NUM_SLOTS; i++) {
		unsigned int s = (start + i) % SHCA_NUM_SLOTS;
		uint16_t port = (uint16_t)(base + s);
		int tcp, udp;

		tcp = bind_port(SOCK_STREAM, port);
		if (tcp < 0)
			continue;
		udp = bind_port(SOCK_DGRAM, port);
		if (udp < 0) {
			close(tcp);
			continue;
		}
		the_slot.port = port;
		the_slot.base = base;
		the_slot.tcp_fd = tcp;
		the_slot.udp_fd = udp;
		slot_pid = shca_getpid();
		__atomic_store_n(&the_slot.slot, (int)s, __ATOMIC_RELEASE);
		shca_dbg("slot %u (port %u)", s, port);
		return 0;
	}
	/* the 1025th process: say so where the port is taken (at
	 * ibv_open_device), and what to do */
	shca_err("all %u ports %u-%u are taken (each process that opens a "
		 "softhca device holds one, TCP and UDP, in its network "
		 "namespace; other programs may hold some): set "
		 "SOFTHCA_PORT_BASE to the first of %u free ports, the same "
		 "for every process and host that talk to each other",
		 SHCA_NUM_SLOTS, base, base + SHCA_NUM_SLOTS - 1,
		 SHCA_NUM_SLOTS);
	return -EADDRINUSE;
}

const struct shca_slot *shca_slot_get(void)
{
	int ret = 0;

	if (__atomic_load_n(&the_slot.slot, __ATOMIC_ACQUIRE) >= 0 &&
	    slot_pid == shca_getpid())
		return &the_slot;
	pthread_mutex_lock(&slot_lock);
	if (the_slot.slot >= 0 && slot_pid != shca_getpid()) {
		/* a forked child: the sockets are the parent's */
		close(the_slot.tcp_fd);
		close(the_slot.udp_fd);
		the_slot.slot = -1;
	}
	if (the_slot.slot < 0)
		ret = take_slot();
	pthread_mutex_unlock(&slot_lock);
	if (ret) {
		errno = -ret;
		return NULL;
	}
	return &the_slot;
}
