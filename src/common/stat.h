/* SPDX-License-Identifier: MIT */
/*
 * Diagnostic counters, as a NIC keeps them (names after the kernel rxe
 * driver's hw_counters where one exists): per process (the transport's
 * sockets, packets that reached no QP) and per QP.  They live in the
 * process's arena so that `softhca stat` can read a running process's
 * counters from outside; increments are relaxed atomics.
 */
#ifndef SOFTHCA_COMMON_STAT_H
#define SOFTHCA_COMMON_STAT_H

#include <stdint.h>

enum shca_stat {
	/*
	 * The first cache line (8 counters) is the block owner's: what it
	 * sends.  The received ones start the second: on the same host a
	 * peer counts them in this QP's block, and a line both processes
	 * write per message would bounce between their cores.
	 */
	SHCA_STAT_SENT_PKTS,		/* IB packets sent on the net path */
	SHCA_STAT_SENT_BYTES,		/* ... their bytes (headers too) */
	SHCA_STAT_RETRANS_PKTS,		/* packets sent again (go-back-N) */
	SHCA_STAT_DUPLICATE_REQUEST,	/* responder: request PSN already seen */
	SHCA_STAT_OUT_OF_SEQ_REQUEST,	/* responder: PSN after the expected */
	SHCA_STAT_SEND_RNR_ERR,		/* responder: RNR NAKs sent */
	SHCA_STAT_RCVD_RNR_ERR,		/* requester: RNR NAKs received */
	SHCA_STAT_RCVD_SEQ_ERR,		/* requester: PSN sequence NAKs received */
	SHCA_STAT_RCVD_PKTS,		/* IB packets received */
	SHCA_STAT_RCVD_BYTES,
	SHCA_STAT_SEND_SEQ_ERR,		/* responder: PSN sequence NAKs sent */
	SHCA_STAT_ACCESS_ERR,		/* remote access errors (NAKed/received) */
	SHCA_STAT_LENGTH_ERR,		/* length errors (either side) */
	SHCA_STAT_LOCAL_ACK_TIMEOUT,	/* requester: ACK timeouts */
	SHCA_STAT_RETRY_EXCEEDED_ERR,	/* requester: RETRY_EXC_ERR */
	SHCA_STAT_RETRY_RNR_EXCEEDED_ERR, /* requester: RNR_RETRY_EXC_ERR */
	SHCA_STAT_DROPPED_PKTS,		/* invalid or unaddressed: dropped */
	SHCA_STAT_CONN_RESETS,		/* TCP connections lost */
	SHCA_STAT_FAULTS_INJECTED,	/* SOFTHCA_FAULTS actions taken */
	/* flooding and exhaustion (docs/security.md) */
	SHCA_STAT_ENGINE_WAKEUPS,	/* engine thread: epoll_wait returns
					 * (from a sleep, or with a batch) */
	SHCA_STAT_NET_ACCEPT_BACKOFFS,	/* net listener paused: out of fds */
	SHCA_STAT_SHM_ACCEPT_BACKOFFS,	/* same-host listener paused */
	SHCA_STAT_NET_CONNS_REFUSED,	/* over SOFTHCA_NET_MAX_CONNS */
	SHCA_STAT_NET_HELLO_TIMEOUTS,	/* closed: no hello in time */
	SHCA_STAT_NET_IDLE_CLOSES,	/* closed: idle SOFTHCA_NET_IDLE_MS */
	/* keys (issue 11, docs/security.md "Keys") */
	SHCA_STAT_INVALID_RKEY,		/* responder QP: R_Key of no MR of
					 * its PD (either path) */
	SHCA_STAT_INVALID_QKEY,		/* responder UD QP: wrong Q_Key */
	SHCA_STAT_KEY_LIMIT_CLOSES,	/* process: connections closed for
					 * sending too many invalid keys */
	SHCA_STAT_KEY_LIMIT_DROPS,	/* process: packets refused from a
					 * source over the key limit */
	/* same host (issue 11, docs/security.md "Same host") */
	SHCA_STAT_SHM_CRED_REFUSED,	/* peer socket of another uid/pid */
	SHCA_STAT_SHM_ARENA_REFUSED,	/* peer arena or fd failed its checks */
	SHCA_STAT_SHM_DIR_REFUSED,	/* private directory not ours: refused */
	SHCA_STAT_HOST_TABLE_REFUSED,	/* host table not ours: replaced */
	SHCA_STAT_SHM_STALE_NAMES,	/* dead process's name reclaimed */
	/* net admission (docs/security.md "Net admission") */
	SHCA_STAT_NET_ADMIT_DROPS,	/* packets not from the QP's peer, or
					 * to an address not in use: dropped
					 * unanswered */
	SHCA_STAT_NET_HS_REFUSED,	/* connections closed by the handshake
					 * (no proof, wrong secret, bad frame,
					 * timeout) */
	/* mapped registered memory (issue 13, shm/seg.c) */
	SHCA_STAT_MR_MAPPED,		/* MRs whose pages peers can map */
	SHCA_STAT_MR_CMA,		/* MRs left to the CMA path */
	SHCA_STAT_MAP_BYTES,		/* bytes re-backed by new segments */
	SHCA_STAT_MAP_COPY_BYTES,	/* ... of which held data (copied) */
	/* same-host memory access (issue 13, shm/mem.h): per access */
	SHCA_STAT_MAP_XFERS,		/* through a mapping of the owner's
					 * segments */
	SHCA_STAT_CMA_XFERS,		/* with process_vm_writev/readv */
	SHCA_STAT_LOCAL_XFERS,		/* the owner was this process */
	SHCA_STAT_SEGMAP_REFRESHES,	/* a peer's segment table read again
					 * (a miss after it changed) */
	SHCA_STAT_MAP_FILE_BYTES,	/* bytes of the program's own files
					 * and System V segments shared as
					 * they are (shm/seg_file.c; not in
					 * map_bytes) */
	/* progress (issue 15, engine.c) */
	SHCA_STAT_APP_PROGRESS,		/* batches of the engine's work an
					 * application thread's empty poll
					 * carried out itself */
	SHCA_STAT_ENGINE_SPIN_BATCHES,	/* of engine_wakeups, the batches
					 * found while it spun
					 * (SOFTHCA_NET_SPIN_US): no sleep,
					 * no wake-up paid */
	SHCA_STAT_NET_DEFERRED,		/* writes of small requests held for
					 * the peer's next answer
					 * (SOFTHCA_NET_DEFER, net/conn.c) */
	SHCA_STAT_ENGINE_QUIET,		/* streaks of empty polls during
					 * which the engine thread left the
					 * sockets to the poller (engine.c) */
	SHCA_STAT_ENGINE_TAKEOVERS,	/* ... that ended because the poller
					 * stopped without a completion */
	SHCA_STAT_NET_ACKS_HELD,	/* ACKs a polling thread's batch made
					 * that waited for its next packet
					 * (SOFTHCA_NET_ACK_HOLD_US, conn.c) */
	SHCA_STAT_NET_ACKS_LATE,	/* ... that waited in vain: the timer
					 * wrote them */
	SHCA_STAT_NET_PLACED_PKTS,	/* packets received straight into
					 * their place: a WRITE's and a READ
					 * response's middles (conn.c) */
	SHCA_STAT_NET_POLL_YIELDS,	/* times an application thread's
					 * empty poll let other threads run
					 * (SOFTHCA_NET_YIELD_US, conn.c) */
	SHCA_STAT_NET_POLL_WAITS,	/* ... because it could not do the
					 * engine's work itself (another
					 * thread was the engine) */
	SHCA_STAT_MAX
};

/* The counter names as `softhca stat` prints them, by enum shca_stat. */
extern const char *const shca_stat_names[SHCA_STAT_MAX];

struct shca_stat_block {
	uint64_t v[SHCA_STAT_MAX];
} __attribute__((aligned(64)));

_Static_assert(SHCA_STAT_RCVD_PKTS == 8, "received counters: line 2");

static inline void shca_stat_add(struct shca_stat_block *b, enum shca_stat s,
				 uint64_t n)
{
	if (b)
		__atomic_fetch_add(&b->v[s], n, __ATOMIC_RELAXED);
}

/*
 * A QP's same-host requester's count of its own messages (shm/xfer.c): the
 * packets and bytes its messages would be each way on a wire.  Only that
 * requester writes them, under its QP's exec_lock, so an add is a load and
 * a store (no locked instruction on the path of every work request);
 * they are atomic only so that a reader in another process sees each
 * store whole.  Readers add them to the QP's block (shca_stat_own_into).
 */
struct shca_stat_own {
	uint64_t sent_pkts, sent_bytes, rcvd_pkts, rcvd_bytes;
} __attribute__((aligned(64)));

static inline void shca_stat_own_add(uint64_t *v, uint64_t n)
{
	__atomic_store_n(v, __atomic_load_n(v, __ATOMIC_RELAXED) + n,
			 __ATOMIC_RELAXED);
}

static inline void shca_stat_own_into(struct shca_stat_block *b,
				      const struct shca_stat_own *o)
{
	b->v[SHCA_STAT_SENT_PKTS] += o->sent_pkts;
	b->v[SHCA_STAT_SENT_BYTES] += o->sent_bytes;
	b->v[SHCA_STAT_RCVD_PKTS] += o->rcvd_pkts;
	b->v[SHCA_STAT_RCVD_BYTES] += o->rcvd_bytes;
}

/* This process's own block (in its arena; NULL before the arena exists). */
struct shca_stat_block *shca_stat_proc(void);

#endif
