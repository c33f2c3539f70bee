/* SPDX-License-Identifier: MIT */
/*
 * Peers: the other processes on this host (same network namespace) that
 * own QPs this process talks to, found by slot.
 *
 * A process listens on a Unix socket named after its port in its user's
 * private directory for its network namespace (rundir.h: the namespace is
 * what "the same host" means to softhca).  A peer connects once, checks
 * the owner's credentials (SO_PEERCRED: our uid, the pid that the hello
 * and the arena name), receives the owner's arena and doorbell fds, maps
 * the arena if it passes its checks (a sealed memfd, shca_arena_map_peer),
 * keeps the owner's pool (checked the same way, shca_segmap_check_pool)
 * to map its segments on first use (shm/segmap.c), and tests that it may
 * use process_vm_readv/writev on the owner (CMA).
 * The owner answers only connections of its own uid.  A hang-up marks the
 * peer dead.
 */
#ifndef SOFTHCA_SHM_PEER_H
#define SOFTHCA_SHM_PEER_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>
#include <sys/types.h>
#include <sys/uio.h>

struct shca_peer {
	int slot;
	pid_t pid;
	int sock;		/* our connection, -1 for ourselves */
	void *arena;		/* its arena, mapped here */
	size_t arena_size;
	int doorbell;		/* its engine's eventfd */
	bool self;
	bool cma;		/* process_vm_readv/writev allowed */
	int users;		/* requesters using the arena now */
	bool unmapped;		/* dead, and its arena and fds released */
	pthread_mutex_t chan_lock;	/* the channel fds below */
	struct shca_peer_chan *chans;	/* its channels' eventfds, by idx */
	unsigned int nchans;
	bool dead;		/* hung up or gone: shca_peer_dead() */
	uint64_t *lanes;	/* its access lanes (in its arena) */
	const uint32_t *life;	/* its life word (arena.h), in its arena */
	struct shca_segmap *segmap;	/* its segments mapped here; NULL:
					 * none (ourselves, or no pool) */
};

/* Set by the engine thread, read by requesters: atomic. */
static inline bool shca_peer_dead(const struct shca_peer *p)
{
	return __atomic_load_n(&p->dead, __ATOMIC_ACQUIRE);
}

void shca_peer_set_dead(struct shca_peer *p);

/*
 * Use the peer's arena: false if it is dead.  Every true is paired with a
 * release; the last release after death unmaps the arena.
 */
bool shca_peer_hold(struct shca_peer *p);
void shca_peer_release(struct shca_peer *p);

/* Listen for peers on this process's slot; starts the engine.  0/-errno */
int shca_peer_listen(void);

/*
 * The peer in slot (connecting on first use).  NULL with errno
 * ECONNREFUSED or ENOENT when no process owns the slot, EACCES for
 * another user or a pid that is not the arena's owner, EPROTO for an
 * arena or doorbell that fails its checks (all counted, shm_*_refused).
 * Peer objects are never freed: a QP may keep the pointer.
 */
struct shca_peer *shca_peer_get(int slot);
/* This process as its own peer (the responder's target), found once per
 * slot: a forked child has a slot of its own.  NULL before it has one. */
struct shca_peer *shca_peer_self(void);

/* Wake the peer's engine (after setting a *_pending word in its arena). */
void shca_peer_doorbell(struct shca_peer *p);

/*
 * A completion of ours fired the peer's armed CQ: mark it and wake the
 * reader of its completion channel directly (the channel's eventfd, asked
 * of the owner once), or through the owner's engine if that fails.
 */
struct shca_cq_shm;
void shca_peer_notify_cq(struct shca_peer *p, struct shca_cq_shm *cq);
/*
 * Learn the eventfd of cq's channel now, before taking the peer's queue
 * locks: asking the owner needs its engine thread, which may be waiting
 * for one of those locks.
 */
void shca_peer_prefetch_channel(struct shca_peer *p, struct shca_cq_shm *cq);

/* How the owner answers a peer's request for a channel's eventfd:
 * fn(idx, gen) returns a new descriptor, or -1. */
void shca_peer_on_channel_request(int (*fn)(uint32_t idx, uint32_t gen));

/*
 * Control connections, one service each: ibv_open_qp's requests to a
 * QP's owner (verbs/xrc_qp.c), an importer's to the owner of a command
 * file (verbs/import_rem.c).  The owner's engine hands a connection whose
 * first message is a control request for svc to that service's fn (which
 * owns the descriptor from then on; a service with no server: closed);
 * shca_peer_control_connect opens one to the process in slot: a blocking
 * descriptor, or -errno.
 */
enum shca_ctrl_svc {
	SHCA_CTRL_XQP,
	SHCA_CTRL_IMPORT,
	SHCA_CTRL_NUM
};
void shca_peer_on_control(enum shca_ctrl_svc svc, void (*fn)(int fd));
int shca_peer_control_connect(int slot, enum shca_ctrl_svc svc);

/*
 * Copy between this process and the peer's memory: local iovecs to remote
 * (write) or remote to local (read).  Returns 0 or -errno (-ESRCH when the
 * peer is gone, -EFAULT for a bad remote range).
 */
int shca_peer_write(struct shca_peer *p, const struct iovec *local, int nl,
		    const struct iovec *remote, int nr);
int shca_peer_read(struct shca_peer *p, const struct iovec *local, int nl,
		   const struct iovec *remote, int nr);
/* Copy between iovec lists in this process (memmove: they may overlap). */
void shca_copy_iov(const struct iovec *dst, int nd, const struct iovec *src,
		   int ns);

#endif
