/* SPDX-License-Identifier: MIT */
/*
 * The same-host socket protocol (DESIGN.md "Same-host path"): each process
 * that opened a device listens on a Unix socket named after its port in
 * its user's private directory for its network namespace (rundir.h), so
 * reachable only by its user (and root) in its network namespace, and
 * answers every connection of its own user (SO_PEERCRED) with a hello that
 * carries its arena and its doorbell as descriptors.  The side that
 * connects checks the listener's credentials too: our uid, and the pid
 * that the hello and the arena name as owner.  shm/peer.c speaks it as
 * owner and as peer; tools that only look (`softhca stat`, the sysfs
 * counters of sysfs/counters.c) speak the peer's half with these
 * functions alone.
 */
#ifndef SOFTHCA_SHM_SOCK_H
#define SOFTHCA_SHM_SOCK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/socket.h>
#include <sys/un.h>

#define SHCA_HELLO_MAGIC	0x6f6c6c6548434853ull	/* "SHCHello" */
#define SHCA_SOCK_MAX_FDS	3	/* descriptors in one message */

/* What the owner sends first, with its arena fd, its doorbell fd and its
 * pool fd (the memory registered memory is re-backed with). */
struct shca_hello {
	uint64_t magic;
	uint32_t version;	/* SHCA_ARENA_VERSION */
	int32_t pid;
	uint32_t slot;
	uint32_t uid;
	uint64_t arena_addr;	/* the owner's arena address (CMA probe) */
};

/*
 * The socket address of the process that owns port (base + slot): its
 * path in the private directory (made if create).  0 or -errno.
 */
int shca_sock_addr(struct sockaddr_un *sa, socklen_t *len, uint16_t port,
		   bool create);

/*
 * The name of the caller's port, bound (not listening): the socket, or
 * -errno.  The caller holds the port: a name already there is a dead
 * process's and is removed first (*reclaimed).
 */
int shca_sock_bind(uint16_t port, bool *reclaimed);

/* Remove the name of port (the caller's, at exit). */
void shca_sock_unbind(uint16_t port);

/*
 * The other end's credentials (SO_PEERCRED): 0 and its pid when it is our
 * uid, -EACCES otherwise.
 */
int shca_sock_peer_cred(int sock, pid_t *pid);

/* Mark live[slot] for each name in the directory: 0 or -errno. */
int shca_sock_live_slots(uint8_t *live);

/* Send len bytes with nfds (0..SHCA_SOCK_MAX_FDS) descriptors: 0/-errno. */
int shca_sock_send_fds(int sock, const void *data, size_t len,
		       const int *fds, int nfds);
/* The same with sendmsg's flags (MSG_NOSIGNAL always) and its answer:
 * the bytes sent, or -1 with errno (a short send is the caller's). */
ssize_t shca_sock_sendmsg_fds(int sock, const void *data, size_t len,
			      const int *fds, int nfds, int flags);

/*
 * Receive exactly len bytes and up to maxfds descriptors: the number of
 * descriptors, or -errno (-EPROTO for a message of another size or with
 * too many descriptors, whose descriptors are then closed).
 */
int shca_sock_recv_fds(int sock, void *data, size_t len, int *fds,
		       int maxfds);

/* The hello (our uid) and its three descriptors (arena, doorbell, pool):
 * 0 or -errno. */
int shca_sock_recv_hello(int sock, struct shca_hello *h, int fds[3]);

/*
 * A connection to the process in slot (of SOFTHCA_PORT_BASE), whose
 * receive and send time out after timeout_s, and the pid of the process
 * that listens: the socket, or -errno (-ECONNREFUSED or -ENOENT when no
 * process of this user owns the slot in this network namespace, -EACCES
 * when the listener is another user's).  The caller checks that the hello
 * and the arena name *pid as their owner.
 */
int shca_sock_connect(int slot, int timeout_s, pid_t *pid);

#endif
