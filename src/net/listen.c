// SPDX-License-Identifier: MIT
/*
 * The net path's listeners: on the addresses of the devices this process
 * uses, not on every interface (docs/security.md "Net admission").
 *
 * The slot's port P is reserved host-wide by slot.c (UDP bound to the
 * wildcard address; TCP bound to the wildcard address with SO_REUSEPORT
 * but not listening, so no other user can bind P on any address).  Here a
 * TCP socket listens on each address of a device when a QP of this
 * process on that device reaches RTR (shca_net_listen_dev); the kernel
 * lets it share P with the reservation because both have SO_REUSEPORT
 * and the same owner.  A process that uses only softhca_lo refuses a
 * connection to P on eth0's address (RST), and drops (and counts) a
 * datagram to it (shca_net_addr_in_use, asked by conn.c's udp_event).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "../common/log.h"
#include "../common/slot.h"
#include "../common/util.h"
#include "../engine/engine.h"
#include "net.h"

struct laddr {
	uint8_t gid[16];
	unsigned int ifindex;
	int fd;				/* listening, or -1 (not yet) */
	/* accept4 out of descriptors: the pause (engine.h), per listener;
	 * its own memory, as the engine keeps a pointer to it */
	struct shca_listen_backoff *backoff;
};

static pthread_mutex_t listen_lock = PTHREAD_MUTEX_INITIALIZER;
static struct laddr *laddrs;
static unsigned int nladdrs, cap_laddrs;
static shca_fd_fn accept_fn;

static bool gid_v4(const uint8_t gid[16])
{
	static const uint8_t pfx[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
					 0xff, 0xff };

	return !memcmp(gid, pfx, 12);
}

/* A listening socket on gid's address, port P; -errno. */
static int listen_on(const uint8_t gid[16], unsigned int ifindex,
		     uint16_t port, struct shca_listen_backoff *b)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int fd, one = 1;

	memset(&ss, 0, sizeof(ss));
	if (gid_v4(gid)) {
		struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;

		s4->sin_family = AF_INET;
		s4->sin_port = htons(port);
		memcpy(&s4->sin_addr, gid + 12, 4);
		len = sizeof(*s4);
	} else {
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;

		s6->sin6_family = AF_INET6;
		s6->sin6_port = htons(port);
		memcpy(&s6->sin6_addr, gid, 16);
		if (IN6_IS_ADDR_LINKLOCAL(&s6->sin6_addr))
			s6->sin6_scope_id = ifindex;
		len = sizeof(*s6);
	}
	fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
		    0);
	if (fd < 0)
		return -errno;
	if (ss.ss_family == AF_INET6)
		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
	/* shares P with the reservation (slot.c): same owner only */
	memset(b, 0, sizeof(*b));
	b->fd = fd;
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) ||
	    bind(fd, (struct sockaddr *)&ss, len) || listen(fd, 128) ||
	    shca_engine_watch(fd, accept_fn, b)) {
		int e = errno;

		close(fd);
		return -e;
	}
	return fd;
}

void shca_net_listen_start(shca_fd_fn fn)
{
	pthread_mutex_lock(&listen_lock);
	accept_fn = fn;
	pthread_mutex_unlock(&listen_lock);
}

void shca_net_listen_forget(void)
{
	unsigned int i;

	pthread_mutex_lock(&listen_lock);
	/* a forked child: the parent's listeners, on the parent's port */
	for (i = 0; i < nladdrs; i++) {
		if (laddrs[i].fd >= 0)
			close(laddrs[i].fd);
		/* (the child's engine started afresh: no timer of it) */
		free(laddrs[i].backoff);
	}
	nladdrs = 0;
	pthread_mutex_unlock(&listen_lock);
}

/* listen_lock held */
static struct laddr *find(const uint8_t gid[16])
{
	unsigned int i;

	for (i = 0; i < nladdrs; i++)
		if (!memcmp(laddrs[i].gid, gid, 16))
			return &laddrs[i];
	return NULL;
}

int shca_net_listen_addr(const uint8_t gid[16], unsigned int ifindex)
{
	static const uint8_t zero[16];
	const struct shca_slot *s = shca_slot_get();
	struct laddr *a;
	int ret = 0;

	if (!s)
		return -errno;
	if (!memcmp(gid, zero, 16))
		return 0;
	pthread_mutex_lock(&listen_lock);
	a = find(gid);
	if (!a) {
		if (nladdrs == cap_laddrs) {
			unsigned int cap = cap_laddrs ? 2 * cap_laddrs : 8;
			struct laddr *n = realloc(laddrs, cap * sizeof(*n));

			if (!n) {
				ret = -ENOMEM;
				goto out;
			}
			laddrs = n;
			cap_laddrs = cap;
		}
		a = &laddrs[nladdrs];
		a->backoff = calloc(1, sizeof(*a->backoff));
		if (!a->backoff) {
			ret = -ENOMEM;
			goto out;
		}
		nladdrs++;
		memcpy(a->gid, gid, 16);
		a->ifindex = ifindex;
		a->fd = -1;
	}
	if (a->fd < 0 && accept_fn) {
		ret = listen_on(gid, ifindex, s->port, a->backoff);
		if (ret >= 0) {
			a->fd = ret;
			ret = 0;
		} else {
			/* a tentative IPv6 address (DAD) binds later: the
			 * next QP to reach RTR tries again */
			shca_dbg("net: listening on port %u of a GID of "
				 "interface %u: %s", s->port, ifindex,
				 strerror(-ret));
		}
	}
out:
	pthread_mutex_unlock(&listen_lock);
	return ret;
}

bool shca_net_addr_in_use(const uint8_t gid[16])
{
	bool in;

	pthread_mutex_lock(&listen_lock);
	in = find(gid) != NULL;
	pthread_mutex_unlock(&listen_lock);
	return in;
}
