/* SPDX-License-Identifier: MIT */
/*
 * The process arena: the shared memory through which peers on the same host
 * act on this process's queues (DESIGN.md "Same-host path").
 *
 * One memfd per process, mapped MAP_SHARED by the owner and by every peer
 * that connected to it.  It holds offsets, never pointers.  Layout:
 *
 *   [header][QP table][MR table][MR key index][segment table][lanes]
 *   [heap ...]
 *
 * Beside it, a second memfd, the pool (shca_arena.pool_fd, sealed against
 * shrinking, grown with ftruncate, sparse): the shared memory that
 * registered memory is re-backed by in place (shm/seg.c), passed to peers
 * with the arena.  The segment table says which of the owner's address
 * ranges are backed by which pool range; a peer maps those on first use
 * and reaches registered memory with loads and stores.
 *
 * Who writes what:
 *   header           owner, at creation; read-only afterwards, except its
 *                    stats block (the process's counters: owner, relaxed
 *                    atomic adds; `softhca stat` reads the arena with
 *                    pread, sysfs/counters.c) and seg_table_gen
 *   QP table         owner (slot i = offset of the QP with QPN index i)
 *   MR table         owner, under each entry's seqlock; peers read
 *   MR key index     owner (one atomic word per key); peers read
 *   segment table    owner, under each entry's seqlock; peers read
 *   lanes            peers (claim and release with atomics); the owner
 *                    reads them when it invalidates an MR (the drain)
 *   seg_table_gen    owner (in the header: release adds); peers read
 *   shca_qp_shm      owner; peers set the *_pending words and add to
 *                    stats (relaxed atomics; the responder side of the
 *                    same-host path counts on the responder's QP); own:
 *                    the owner's requester alone, loads and stores
 *   shca_rq_shm      tail and WQEs: owner (post_recv), release store;
 *                    head: any consumer under the RQ's lock
 *   shca_cq_shm      ring and tail: any producer under the CQ's lock;
 *                    head: owner (the polling application), release store
 *
 * Locks that peers take are shca_plocks: a futex word that holds its
 * owner's thread id.  A peer that dies holding one leaves it to the next
 * taker (shca_plock_lock).  Not glibc's robust mutexes: those link the
 * locking thread's robust list through the mutex's own memory, so a lock
 * of a peer's CQ whose memory the peer freed (or rewrote) while it was
 * held stayed on that list, and the thread's next robust lock wrote into
 * the peer's unmapped arena (SIGSEGV, rsocket stream_two_threads); and a
 * peer could aim glibc's list writes anywhere in this process.
 */
#ifndef SOFTHCA_SHM_ARENA_H
#define SOFTHCA_SHM_ARENA_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <infiniband/verbs.h>

#include "../common/stat.h"

#define SHCA_ARENA_MAGIC	0x31414e5241484353ull	/* "SHCARNA1" */
#define SHCA_ARENA_VERSION	20	/* 2: counters (stats); 3: MR key
					 * index, 32-bit random keys; 4: the
					 * receive queue's PD (rq_pd); 5: the
					 * pool, segments, lanes, MR flags;
					 * 6: counters' order, aligned;
					 * 7: the XRC domain (xrcd);
					 * 8: seg_table_gen, and the
					 * segmap_refreshes counter; 9: tag
					 * matching (rq tm_off, shca_tm_shm);
					 * 10: shca_plock a futex word;
					 * 11: the lanes' busy bitmap;
					 * 12: segments of the program's own
					 * files (shca_seg_shm file, ino),
					 * the map_file_bytes counter;
					 * 13: the app_progress counter;
					 * 14: the key index sized to the
					 * keys (mr_index_shift, regions);
					 * 15: the engine_quiet and
					 * engine_takeovers counters;
					 * 16: System V segments in the
					 * segment table (file); 17: a QP's
					 * imported PD (imp_slot, imp_pid,
					 * imp_pd), the PDs' importers
					 * (pd_imp_off); 18: the queues'
					 * counters on lines of their own,
					 * seen counters, a CQ entry's
					 * phase bit (shca_cqe_phase);
					 * 19: a QP's own counts (own);
					 * 20: the net_poll_yields and
					 * net_poll_waits counters */
#define SHCA_ARENA_SIZE		(1ull << 30)	/* sparse: pages on use;
						 * SOFTHCA_ARENA_SIZE */
#define SHCA_ARENA_MIN_HEAP	(16ull << 20)	/* SOFTHCA_ARENA_SIZE bounds */
#define SHCA_ARENA_MAX_SIZE	(1ull << 40)	/* what peers agree to map */
#define SHCA_ARENA_QP_ENTRIES	(1u << 14)	/* QPN index space */
#define SHCA_ARENA_MR_ENTRIES	(1u << 20)	/* MR table slots */
#define SHCA_MR_INDEX_WAYS	8		/* words per key index group */
#define SHCA_MR_INDEX_MIN_SHIFT	6		/* first region: 2^6 groups */
#define SHCA_MR_INDEX_MAX_SHIFT	18		/* largest region */
#define SHCA_MR_INDEX_GROUPS	(1u << SHCA_MR_INDEX_MAX_SHIFT)
/* the key index area: a region of 2^s groups for each s, smaller first */
#define SHCA_MR_INDEX_BYTES \
	((((uint64_t)2 << SHCA_MR_INDEX_MAX_SHIFT) - \
	  ((uint64_t)1 << SHCA_MR_INDEX_MIN_SHIFT)) * SHCA_MR_INDEX_WAYS * 8)
#define SHCA_ARENA_SEG_ENTRIES	(1u << 16)	/* segment table slots */
#define SHCA_ARENA_LANES	4096		/* access lanes */
/* the lanes, then their busy bitmap (a bit per lane) */
#define SHCA_ARENA_LANE_BYTES \
	((SHCA_ARENA_LANES + SHCA_ARENA_LANES / 64) * sizeof(uint64_t))

/*
 * A lock in shared memory that processes take (arena.c): word 0 is free,
 * else the owner's thread id, with SHCA_PLOCK_WAITERS while a taker may
 * sleep on the futex.  Nothing of it points anywhere.
 */
#define SHCA_PLOCK_WAITERS	0x80000000u
#define SHCA_PLOCK_TID		0x3fffffffu
struct shca_plock {
	uint32_t word;
	uint32_t pad;
};

void shca_plock_init(struct shca_plock *l);
void shca_plock_lock(struct shca_plock *l);
void shca_plock_unlock(struct shca_plock *l);

struct shca_arena_hdr {
	uint64_t magic;
	uint32_t version;
	int32_t pid;
	uint32_t uid;
	uint32_t slot;
	uint64_t size;
	uint64_t qp_table_off;	/* uint64_t[SHCA_ARENA_QP_ENTRIES] */
	uint64_t mr_table_off;	/* struct shca_mr_shm[SHCA_ARENA_MR_ENTRIES] */
	uint64_t heap_off;
	uint64_t mr_index_off;	/* SHCA_MR_INDEX_BYTES: shca_mr_index_* */
	uint64_t seg_table_off;	/* struct shca_seg_shm[SEG_ENTRIES] */
	uint64_t lanes_off;	/* uint64_t[SHCA_ARENA_LANES], then the busy
				 * bitmap: SHCA_ARENA_LANE_BYTES in all */
	uint64_t pd_imp_off;	/* struct shca_pd_imp_shm[SHCA_ARENA_PD_IMPS] */
	/* the key index's current region: 2^shift groups (owner, release
	 * store when it doubles; shm/mrkey.c) */
	uint32_t mr_index_shift;
	/* the process's counters (shca_stat_proc): on a cache line of
	 * their own, away from the read-mostly fields above */
	struct shca_stat_block stats __attribute__((aligned(64)));
	/* the owner's life: a robust mutex its engine thread holds from
	 * its start to the process's end (shca_arena_hold_life).  When the
	 * process dies (or execs) the kernel marks the futex word
	 * FUTEX_OWNER_DIED before anyone can reap it: a peer that reads it
	 * knows the owner is gone without a system call */
	pthread_mutex_t life __attribute__((aligned(64)));
	/* the segment table's generation: the owner adds 1 (release) after
	 * every change of an entry, so that a peer that read the whole
	 * table at generation g knows, while it is still g, that reading it
	 * again finds nothing new (shm/segmap.c).  Only a hint: a peer
	 * checks each entry's own gen before it uses a mapping */
	uint64_t seg_table_gen __attribute__((aligned(64)));
};

/*
 * A process that imported a PD of this one (docs/import.md, "The
 * importer's R_Keys"): a QP of that PD here answers the R_Keys of the
 * importer's MRs in its shadow of the PD.  Written by the owner between
 * two increments of seq (odd while writing, verbs/import_rem.c); read by
 * whoever carries out a request to such a QP (engine/responder.c
 * shared_key), again when seq changed.  pd 0: free.
 */
#define SHCA_ARENA_PD_IMPS	256
struct shca_pd_imp_shm {
	uint32_t seq;
	uint32_t pd;		/* the PD's identity here */
	uint32_t slot;		/* the importer's slot and pid */
	uint32_t pid;
	uint32_t shadow;	/* its shadow's identity in its arena */
	uint32_t pad;
};

/*
 * One MR table entry; key 0 = free.  Written by the owner between two
 * increments of seq (odd while writing); readers retry on a change.
 */
struct shca_mr_shm {
	uint32_t seq;
	uint32_t key;		/* lkey == rkey */
	uint32_t access;	/* IBV_ACCESS_* */
	uint32_t pd;		/* PD handle */
	uint64_t iova;		/* address of byte 0 in requests */
	uint64_t addr;		/* owner's virtual address of byte 0 */
	uint64_t length;
	uint32_t flags;		/* SHCA_MR_SHM_* */
	uint32_t qpn;		/* SHCA_MR_SHM_MW_QP: the only QP through
				 * which the window is reached */
};

enum {
	/* every page of [addr, addr + length) lies in a live segment of
	 * the segment table: a peer may reach it through the pool */
	SHCA_MR_SHM_MAPPED = 1 << 0,
	/* a memory window's binding (verbs/mw.c): an R_Key only, never an
	 * L_Key; its key word is the only one a peer writes, with a CAS
	 * from the key to 0, to carry out a Send with Invalidate */
	SHCA_MR_SHM_MW = 1 << 1,
	/* a type 2 window: qpn is the QP it is bound to */
	SHCA_MR_SHM_MW_QP = 1 << 2,
};

/*
 * One segment: the page-aligned range [va, va + len) of the owner's
 * address space is backed by the pool's bytes [off, off + len).  gen 0 =
 * free; otherwise unique in the process's life (never reused), so that a
 * peer's cached mapping of an earlier segment in the same slot is never
 * taken for this one.  Written by the owner between two increments of
 * seq (odd while writing), as the MR table.  A segment outlives every MR
 * entry flagged MAPPED that lies in it: the owner clears (and drains) the
 * MR entry before it frees a segment.
 */
#define SHCA_SEG_FILE_SYSV	0x80000000u	/* shca_seg_shm.file */

struct shca_seg_shm {
	uint32_t seq;
	/* 0: the pool backs it; SHCA_SEG_FILE_SYSV: a System V shared
	 * memory segment of the program's, ino its shmid (a peer attaches
	 * it with shmat), off in the segment; else n > 0: the program's own
	 * file (a sealed memfd, shm/seg_file.c) that the owner holds open
	 * as descriptor n - 1 (a peer opens /proc/<owner>/fd/<n - 1>),
	 * whose inode is ino, and off is in that file */
	uint32_t file;
	uint64_t gen;
	uint64_t va;
	uint64_t len;
	uint64_t off;
	uint64_t ino;
};

/*
 * Access lanes: how a deregistration knows that no peer is still inside
 * the memory of the MR it removes.  A peer claims a free lane (CAS 0 ->
 * its word) before it reads an MR entry for an access, with sequentially
 * consistent order, and releases it (store 0, release) after its last
 * load or store to the MR's memory.  The owner clears the MR entry, then
 * (sequentially consistent) reads every lane and waits while one holds
 * the MR's key and its process lives (a lane of a dead process it frees).
 * Word: (uint64_t)pid << 32 | key, pid = the peer's (shca_getpid()).
 *
 * The busy bitmap after the lanes (bit k of word k / 64 for lane k) lets
 * the drain read 64 words instead of 4096 lanes: a peer that claimed lane
 * k sees bit k set (a sequentially consistent load after its claim) or
 * sets it (fetch-or) before it reads the MR entry; the owner's drain
 * reads the bitmap after clearing the entry and waits only on the lanes
 * whose bit is set.  Only the owner clears a bit (shm/seg.c, when no
 * drain reads the bitmap): clear, then read the lane again, and set the
 * bit back if the lane is taken.  A bit is a hint from peers: a set bit
 * costs a look at the lane (all set: the 4096 lanes read, no more); a
 * hostile peer that clears another peer's bit can make a drain miss that
 * peer's access, which is no more than it could do by writing the memory
 * itself (it maps the pool).
 */
#define SHCA_LANE_WORD(pid, key) \
	((uint64_t)(uint32_t)(pid) << 32 | (uint32_t)(key))
#define SHCA_LANE_PID(w)	((pid_t)(uint32_t)((w) >> 32))
#define SHCA_LANE_KEY(w)	((uint32_t)(w))

/* A lane held by its claimer (shm/mem.c shca_mem_lane_take): where, and
 * the word it holds (lane NULL: none). */
struct shca_lane {
	uint64_t *lane;
	uint64_t word;
};

/* Work-request-independent receive WQE, as stored in RQ/SRQ rings. */
struct shca_recv_wqe_shm {
	uint64_t wr_id;
	uint32_t num_sge;
	uint32_t imp;		/* 0, or a bounce's tag (verbs/import_key.c):
				 * the responder puts it in the completion's
				 * vendor_err; a peer's word, checked there */
	struct ibv_sge sge[];	/* max_sge entries */
};

/*
 * The counters of the rings below sit on cache lines of their own, one
 * for each side that writes, and each side keeps the last counter it
 * read of the other side (tail_seen, head_seen): a WQE or completion
 * moves one line between the processes and the counter line only now
 * and then, where every post, take, push and poll used to pull the one
 * line that held the lock and both counters (a same-host 8 B ib_send_bw
 * spent half its time in those misses).  A seen counter only lags the
 * true one, and is read again before anything is refused.
 */
struct shca_rq_shm {
	/* consumers' line: whoever takes a WQE, under lock */
	struct shca_plock lock;
	uint32_t head;			/* consumer counter, release */
	uint32_t tail_seen;		/* a tail read before: up to it the
					 * WQEs are posted */
	uint32_t limit_pending;		/* SRQ: limit reached, owner reports */
	/* the owner's line, as it posts: the producer counter, release */
	uint32_t tail __attribute__((aligned(64)));
	/* set by the owner, read by all; size: slots, a power of two */
	uint32_t size __attribute__((aligned(64)));
	uint32_t max_wr;		/* as reported */
	uint32_t max_sge;
	uint32_t wqe_size;
	uint32_t srq_limit;		/* SRQ: armed limit, 0 = disarmed */
	uint64_t buf_off;
	uint64_t tm_off;		/* TM SRQ: its shca_tm_shm, 0: none;
					 * owner, at creation */
};

/*
 * A tag-matching SRQ's list (verbs/tm.c, engine/tm_rx.c): the tagged
 * buffers the owner posted with IBV_WR_TAG_ADD, matched by whoever runs
 * the responder's rules.  Everything below is under the SRQ's rq lock.
 *   entries   owner adds and deletes; a responder frees the one it
 *             matched (state 0)
 *   hw_cnt    responders: unexpected messages delivered to the SRQ's
 *             ordinary WQEs
 *   sw_cnt    owner: the count the application last synchronised
 *             (IBV_OPS_TM_SYNC); matching runs only while both agree
 * A responder reads max_tags and every entry as hostile bytes: bounded
 * by SHCA_TM_MAX_TAGS and SHCA_TM_MAX_SGE, the whole list inside the
 * arena; the owner bounds its indexes by its own copy of max_tags.
 */
#define SHCA_TM_MAX_TAGS	256	/* a power of two: handle bits */
#define SHCA_TM_MAX_SGE		4
#define SHCA_TM_MAX_OPS		1024

struct shca_tm_entry_shm {
	uint32_t state;			/* 0 free, 1 posted */
	uint32_t num_sge;
	uint32_t gen;			/* bumped at each add: stale handles */
	/* 0, or a bounce's tag (the owner's L_Keys, verbs/import_key.c):
	 * the responder passes it on to the completion; a peer's word,
	 * checked there (formerly padding) */
	uint32_t imp;
	uint64_t seq;			/* posting order: oldest matches first */
	uint64_t tag, mask, wr_id;
	struct ibv_sge sge[SHCA_TM_MAX_SGE];
};

struct shca_tm_shm {
	uint32_t max_tags;		/* entries, <= SHCA_TM_MAX_TAGS */
	uint32_t hw_cnt;
	uint32_t sw_cnt;
	uint32_t pad;
	uint64_t seq;			/* the next add's seq */
	struct shca_tm_entry_shm e[];
};

/* What a CQ ring holds: the ibv_wc plus what ibv_cq_ex can read. */
struct shca_cqe {
	struct ibv_wc wc;
	uint64_t ts_ns;		/* device clock: CLOCK_MONOTONIC, ns; bit
				 * 63: SHCA_CQE_PHASE (shca_cqe_ts) */
};

/*
 * An entry is there for the owner when its phase bit is its lap's (the
 * producer stores ts_ns last, release): set in the ring's even laps of
 * the producer counter, clear in its odd ones, so that a zeroed ring
 * holds none and each lap's stale entries read as not there.  The owner
 * polls the entry's line only, never the producers' counter line.
 */
#define SHCA_CQE_PHASE	(1ull << 63)
static inline uint64_t shca_cqe_phase(uint32_t i, uint32_t slots)
{
	return (i & slots) ? 0 : SHCA_CQE_PHASE;
}

static inline uint64_t shca_cqe_ts(const struct shca_cqe *e)
{
	return e->ts_ns & ~SHCA_CQE_PHASE;
}
_Static_assert(sizeof(struct shca_cqe) == 56,
	       "15 CQs of SHCA_MAX_CQE entries fit in the arena (test_churn)");

/*
 * A matched tag-matching completion (IBV_WC_TM_RECV with IBV_WC_TM_MATCH)
 * carries its ibv_wc_tm_info in ibv_wc fields such a completion does not
 * use, so that a CQE stays 56 bytes (15 CQs of 2^20 entries fit in an
 * arena): priv in vendor_err; the tag's bits 0-15 in pkey_index, 16-31
 * in slid, 32-39 in sl, 40-47 in dlid_path_bits, 48-63 in the top half
 * of wc_flags (IBV_WC_* flags end at bit 6).  A bounce's tag (the
 * importer's, verbs/import_key.c), which other receive completions carry
 * in vendor_err, goes to src_qp, with SHCA_WC_TM_IMP in wc_flags: an RC
 * completion's src_qp is the QP's own destination QP, which the consumer
 * puts back.  The consumer (verbs/cq.c) takes them out and zeroes those
 * fields.
 */
#define SHCA_WC_TM_IMP	(1u << 15)
static inline bool shca_cqe_has_tm(const struct ibv_wc *wc)
{
	return wc->opcode == IBV_WC_TM_RECV && (wc->wc_flags & IBV_WC_TM_MATCH);
}

static inline void shca_cqe_tm_pack(struct ibv_wc *wc, uint64_t tag,
				    uint32_t priv)
{
	if (wc->vendor_err) {
		wc->src_qp = wc->vendor_err;
		wc->wc_flags |= SHCA_WC_TM_IMP;
	}
	wc->vendor_err = priv;
	wc->pkey_index = (uint16_t)tag;
	wc->slid = (uint16_t)(tag >> 16);
	wc->sl = (uint8_t)(tag >> 32);
	wc->dlid_path_bits = (uint8_t)(tag >> 40);
	wc->wc_flags = (wc->wc_flags & 0xffffu) |
		       (unsigned int)(uint16_t)(tag >> 48) << 16;
}

/* imp: the bounce's tag, 0 if none (then src_qp is as it came) */
static inline void shca_cqe_tm_unpack(struct ibv_wc *wc, uint64_t *tag,
				      uint32_t *priv, uint32_t *imp)
{
	*imp = wc->wc_flags & SHCA_WC_TM_IMP ? wc->src_qp : 0;
	*priv = wc->vendor_err;
	*tag = (uint64_t)wc->pkey_index | (uint64_t)wc->slid << 16 |
	       (uint64_t)wc->sl << 32 | (uint64_t)wc->dlid_path_bits << 40 |
	       (uint64_t)(wc->wc_flags >> 16) << 48;
	wc->vendor_err = 0;
	wc->pkey_index = 0;
	wc->slid = 0;
	wc->sl = 0;
	wc->dlid_path_bits = 0;
	wc->wc_flags &= 0xffffu & ~SHCA_WC_TM_IMP;
}

enum {
	SHCA_CQ_ARM_NONE = 0,
	SHCA_CQ_ARM_SOLICITED = 1,
	SHCA_CQ_ARM_ALL = 2,
};

struct shca_cq_shm {
	/* producers' line: peers and the owner's engine, under lock */
	struct shca_plock lock;
	uint32_t tail;			/* producer counter, release */
	uint32_t head_seen;		/* a head read before: the slots
					 * before it are free */
	uint32_t armed;			/* SHCA_CQ_ARM_* under lock */
	uint32_t overflow;		/* overrun: the CQ is in error */
	uint32_t notify_pending;	/* a peer fired the arm: owner reports */
	uint32_t overflow_pending;	/* a peer overran it: owner reports */
	/* the owner's line, as it polls: the consumer counter, release */
	uint32_t head __attribute__((aligned(64)));
	/* set by the owner, read by all; size: slots, a power of two */
	uint32_t size __attribute__((aligned(64)));
	uint32_t cqe;			/* capacity, as reported */
	uint32_t timestamps;		/* producers fill shca_cqe.ts_ns */
	uint32_t chan_idx;		/* owner's channel table index + 1, 0:
					 * none; a peer whose completion fires
					 * the arm writes that channel's fd */
	uint32_t chan_gen;		/* ... of this generation */
	uint32_t pad;
	uint64_t ring_off;
};

/* Pending work a peer leaves for the QP's owner (bits). */
enum {
	SHCA_QP_PEND_ACCESS_ERR = 1 << 0,	/* -> ERR, QP_ACCESS_ERR */
	SHCA_QP_PEND_REQ_ERR = 1 << 1,		/* -> ERR, QP_REQ_ERR */
	SHCA_QP_PEND_FATAL = 1 << 2,		/* -> ERR, QP_FATAL */
	SHCA_QP_PEND_COMM_EST = 1 << 3,		/* COMM_EST event */
	SHCA_QP_PEND_ERR = 1 << 4,		/* -> ERR, no event */
};

/* qp_type of an XRC SRQ's entry in the QP table (verbs/srq.c): no QP
 * type, so no request names it as its destination QP. */
#define SHCA_QPT_XRC_SRQ	0x5c00u

/* What a peer needs to know of a QP to act as its remote side. */
struct shca_qp_shm {
	uint32_t qpn;
	uint32_t state;		/* enum ibv_qp_state, owner, release */
	uint32_t qp_type;
	uint32_t pd;		/* PD handle */
	uint32_t access;	/* qp_access_flags */
	uint32_t qkey;
	uint32_t dest_qpn;
	uint32_t min_rnr_timer;
	uint32_t has_srq;
	uint32_t pending;	/* SHCA_QP_PEND_* set by peers (atomic or) */
	uint32_t rq_pd;		/* PD handle of the receive WQEs' MRs: the
				 * SRQ's, or pd (IBA 10.2.9.1) */
	uint32_t fin_wait;	/* owner: rendezvous FINs it holds for this
				 * QP (shm/xfer.c); while not 0, an RC
				 * request from its peer is answered RNR, as
				 * the FIN NAKed before it */
	/* pd an import of another process's PD (docs/import.md): that
	 * process's slot and pid and the PD's identity in its arena, whose
	 * keys the QP answers too (engine/responder.c shared_key); 0:
	 * none */
	uint32_t imp_slot;
	uint32_t imp_pid;
	uint32_t imp_pd;
	uint32_t imp_pad;
	uint64_t rq_off;	/* shca_rq_shm of the RQ or of the SRQ */
	uint64_t rcq_off;	/* shca_cq_shm of the receive CQ */
	uint64_t xrcd;		/* XRC_RECV QP, XRC SRQ: the domain's
				 * identity (verbs/xrc.c); 0: none */
	char dev[16];		/* the device's interface name (IF_NAMESIZE),
				 * NUL-terminated: `softhca stat` sums the
				 * QPs of softhca_<dev> */
	struct shca_stat_block stats;	/* this QP's counters */
	/* what its same-host requester sent and got back, counted by that
	 * requester alone (common/stat.h): part of stats to a reader */
	struct shca_stat_own own;
};

/* The owner's record of its own MR key index (shm/mrkey.c, below), in
 * its private memory. */
struct shca_mr_index {
	void *base;		/* the arena */
	uint64_t off;		/* the index area */
	unsigned int shift;	/* the current region: 2^shift groups */
	uint32_t used;		/* words taken in it */
};

/* This process's arena. */
struct shca_arena {
	void *base;
	size_t size;
	int fd;			/* memfd, passed to peers */
	int pool_fd;		/* the pool memfd, passed to peers */
	pid_t pid;
	struct shca_mr_index mr_index;	/* under the MR table lock */
};

/* The arena of this process, created on first use (NULL, errno). */
struct shca_arena *shca_arena_self(void);
/* A forked child closed the pool it inherited (shm/seg_fork.c). */
void shca_arena_pool_closed(void);

/* The engine thread, at its start: hold the arena's life lock until the
 * process ends (never released).  The arena must exist already (the
 * engine's starter makes it); this takes no lock a fork could inherit. */
void shca_arena_hold_life(void);

/*
 * Heap allocation in this process's arena (shm/heap.c): zeroed, 64-byte
 * aligned; NULL and ENOMEM when no free block is long enough (logged with
 * the arena's size).  Free takes only what alloc returned.
 */
void *shca_arena_alloc(size_t size);
void shca_arena_free(void *p);

static inline uint64_t shca_arena_off(const struct shca_arena *a,
				      const void *p)
{
	return p ? (uint64_t)((const char *)p - (const char *)a->base) : 0;
}

/* A pointer into a mapped arena from an offset, NULL if out of range. */
static inline void *shca_arena_ptr(const void *base, size_t size,
				   uint64_t off, size_t len)
{
	if (!off || off > size || len > size - off)
		return NULL;
	return (char *)base + off;
}

static inline struct shca_arena_hdr *shca_arena_hdr(const void *base)
{
	return (struct shca_arena_hdr *)base;
}

/* The futex word of an arena's life lock (a glibc mutex's first int). */
static inline const uint32_t *shca_arena_life_word(const void *base)
{
	return (const uint32_t *)&shca_arena_hdr(base)->life;
}

/*
 * Has the owner of the life word died?  FUTEX_OWNER_DIED set by the
 * kernel; a word never locked (0) says nothing either way.
 */
static inline bool shca_arena_life_died(const uint32_t *w)
{
	return __atomic_load_n(w, __ATOMIC_ACQUIRE) & 0x40000000u;
}

/* Does the owner hold it (a live thread's id in the word)? */
static inline bool shca_arena_life_held(const uint32_t *w)
{
	uint32_t v = __atomic_load_n(w, __ATOMIC_ACQUIRE);

	return (v & 0x3fffffffu) && !(v & 0x40000000u);
}

static inline uint64_t *shca_arena_qp_table(const void *base)
{
	return (uint64_t *)((char *)base + shca_arena_hdr(base)->qp_table_off);
}

static inline struct shca_seg_shm *shca_arena_seg_table(const void *base)
{
	return (struct shca_seg_shm *)((char *)base +
				       shca_arena_hdr(base)->seg_table_off);
}

/* The importers of the owner's PDs (base's own, or a peer's: bounded by
 * size, NULL if the header's offset does not fit). */
static inline struct shca_pd_imp_shm *shca_arena_pd_imps(void *base,
							 size_t size)
{
	return (struct shca_pd_imp_shm *)shca_arena_ptr(
		base, size,
		__atomic_load_n(&shca_arena_hdr(base)->pd_imp_off,
				__ATOMIC_RELAXED),
		SHCA_ARENA_PD_IMPS * sizeof(struct shca_pd_imp_shm));
}

static inline uint64_t *shca_arena_lanes(const void *base)
{
	return (uint64_t *)((char *)base + shca_arena_hdr(base)->lanes_off);
}

/* The busy bitmap after the lanes lanes points to (ours or a peer's). */
static inline uint64_t *shca_lanes_busy(uint64_t *lanes)
{
	return lanes + SHCA_ARENA_LANES;
}

/* A peer holding lane k: its bit set before the MR entry is read. */
static inline void shca_lane_mark(uint64_t *lanes, uint32_t k)
{
	uint64_t *w = shca_lanes_busy(lanes) + k / 64;
	uint64_t bit = 1ull << (k % 64);

	if (!(__atomic_load_n(w, __ATOMIC_SEQ_CST) & bit))
		__atomic_fetch_or(w, bit, __ATOMIC_SEQ_CST);
}

static inline struct shca_mr_shm *shca_arena_mr_table(const void *base)
{
	return (struct shca_mr_shm *)((char *)base +
				      shca_arena_hdr(base)->mr_table_off);
}

/*
 * Read an MR table entry consistently (seqlock).  false if free, or if
 * the entry did not hold still (a writer that never finishes: the bytes
 * may be a hostile peer's, so the retries are bounded).  out->seq: the
 * (even) seq the entry was read at.
 */
bool shca_mr_shm_read(const struct shca_mr_shm *e, struct shca_mr_shm *out);
/* The same for an importer entry (false: free). */
bool shca_pd_imp_shm_read(const struct shca_pd_imp_shm *e,
			  struct shca_pd_imp_shm *out);
void shca_pd_imp_shm_write(struct shca_pd_imp_shm *e,
			   const struct shca_pd_imp_shm *v);
void shca_mr_shm_write(struct shca_mr_shm *e, const struct shca_mr_shm *val);
void shca_mr_shm_clear(struct shca_mr_shm *e);
/* A segment table entry, the same way (false: free or not holding
 * still); written by the owner only.  A free entry is written gen 0. */
bool shca_seg_shm_read(const struct shca_seg_shm *e, struct shca_seg_shm *out);
void shca_seg_shm_write(struct shca_seg_shm *e, const struct shca_seg_shm *v);

/*
 * The MR key index (shm/mrkey.c): which MR table slot holds the MR with a
 * given key (lkey == rkey, 32 random bits).  A key lives in one group of
 * SHCA_MR_INDEX_WAYS words, chosen by a hash of the whole key; a word is
 * 0 (free) or key << 32 | slot.  The owner picks keys whose group has
 * room, so a look-up reads one group and nothing else: a peer reading a
 * hostile arena makes a bounded number of loads.  The slot it finds is
 * only a hint: the MR table entry's own key must match.  The index has
 * 2^shift groups (the header's mr_index_shift), doubled by the owner when
 * half full, each size in its own region of the area at mr_index_off.
 */
uint32_t shca_mr_index_group(uint32_t key, unsigned int shift);
/* The offset of the region of 2^shift groups in the index area. */
uint64_t shca_mr_index_region(unsigned int shift);
/* The slot of key in the arena at base (size bytes), 0 if none. */
uint32_t shca_mr_index_find(const void *base, size_t size, uint32_t key);

/* Owner, at the arena's creation: the first region, published. */
void shca_mr_index_init(struct shca_mr_index *x, void *base, uint64_t off);
/* Owner, under the MR table lock: is there room for key in its group?
 * Add (-ENOSPC; may double the index first), remove. */
bool shca_mr_index_room(const struct shca_mr_index *x, uint32_t key);
int shca_mr_index_add(struct shca_mr_index *x, uint32_t key, uint32_t slot);
void shca_mr_index_del(struct shca_mr_index *x, uint32_t key);
/* Owner: key's group on its way into the cache, ahead of a look-up that
 * would miss there. */
void shca_mr_index_prefetch(const struct shca_mr_index *x, uint32_t key);
/* The MR table entry of slot in the arena at base, NULL if out of it. */
struct shca_mr_shm *shca_mr_table_entry(const void *base, size_t size,
					uint32_t slot);

/*
 * Map a peer's arena received as fd, owned by pid owner: checks
 * the file (a sealed memfd of our uid, of the header's size) and the
 * header.  NULL with errno (EPROTO: refused).
 */
void *shca_arena_map_peer(int fd, pid_t owner, size_t *size);

#endif
