/* SPDX-License-Identifier: MIT */
/*
 * softhca's libibverbs: the objects behind the public verbs structs and the
 * table of contents of this library, prototypes grouped by the file that
 * defines them.
 *
 * Every public object a client holds (ibv_device, ibv_context, ibv_pd, ...)
 * is the first member, or a member at a fixed place, of a softhca struct;
 * to_sxxx() gets from one to the other.  Functions return 0 or -errno
 * inside; the exported verbs convert once, as rdma-core does per verb
 * (positive errno, or NULL/-1 with errno set).  Functions installed in the
 * op tables (ibv_context.ops, verbs_context) follow the op's contract
 * instead: positive errno, or NULL with errno.
 */
#ifndef SOFTHCA_VERBS_SHCA_H
#define SOFTHCA_VERBS_SHCA_H

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <net/if.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <infiniband/verbs.h>

#include "../common/log.h"
#include "../common/netif.h"
#include "../common/util.h"
#include "../common/verbs_ext.h"
#include "../engine/engine.h"
#include "../engine/xport.h"
#include "../shm/arena.h"
#include "../shm/peer.h"
#include "../shm/queues.h"
#include "../sysfs/ident.h"

/* ------------------------------------------------------------------ */
/* Device limits: what ibv_query_device reports, and what is enforced.  */
/* (The device's identity and its port: sysfs/ident.h.)                */

/* a 14-bit QP index per process, less QPN 0 and 1 (slot 0) and 0xffffff
 * (slot 1023): what every process can create (issue 12) */
#define SHCA_MAX_QP		16382
#define SHCA_MAX_QP_WR		16384
#define SHCA_MAX_SGE		32
#define SHCA_MAX_SGE_RD		32
#define SHCA_MAX_INLINE		1024
#define SHCA_MAX_CQ		65535
#define SHCA_MAX_CQE		((1 << 20) - 1)
#define SHCA_MAX_MR		((1 << 20) - 1)	/* MR table slots */
#define SHCA_MAX_MW		65535		/* MWs (in MR table slots) */
#define SHCA_MAX_MR_SIZE	(~0ull)
#define SHCA_MAX_DM_SIZE	(4u << 20)	/* device memory, per process */
#define SHCA_DM_LOG_ALIGN_MAX	12		/* a DM starts on a page */
#define SHCA_MAX_PD		65535
#define SHCA_MAX_QP_RD_ATOM	128
#define SHCA_MAX_QP_INIT_RD_ATOM 128
#define SHCA_MAX_SRQ		65535
#define SHCA_MAX_SRQ_WR		16384
#define SHCA_MAX_SRQ_SGE	32
#define SHCA_MAX_AH		65535
#define SHCA_MAX_MCAST_GRP	8192
#define SHCA_MAX_MCAST_QP_ATTACH 56
#define SHCA_MAX_MSG_SZ		(1u << 31)	/* 2 GiB, as the IB spec */
#define SHCA_MAX_UD_MSG		4096		/* UD payload <= path MTU */
#define SHCA_NUM_COMP_VECTORS	1
#define SHCA_PAGE_SIZE_CAP	0xfffff000ull	/* 4 KiB .. 2 GiB pages */
#define SHCA_CORE_CLOCK_KHZ	1000000		/* completion ts in ns */

/* ------------------------------------------------------------------ */
/* Handles and liveness (handle.c, docs/conformance.md)                */

enum shca_otype {
	SHCA_OT_PD,
	SHCA_OT_MR,
	SHCA_OT_CQ,
	SHCA_OT_SRQ,
	SHCA_OT_QP,
	SHCA_OT_AH,
	SHCA_OT_TD,
	SHCA_OT_DM,
	SHCA_OT_MW,
	SHCA_OT_NUM
};

#define SHCA_OBJ_MAGIC	0x5ca0b100u	/* + type while live */
#define SHCA_OBJ_DEAD	0xdeadb100u

/*
 * The header of every object with a handle, right after its public
 * struct: what the handle named when it was handed out (the public
 * fields are the client's to garble), and the verbs at work on it.
 */
struct shca_obj {
	uint32_t magic;			/* SHCA_OBJ_MAGIC + type, or DEAD */
	uint32_t handle;
	struct ibv_context *ctx;	/* created in */
	const void *pub;		/* the public struct handed out */
	int users;			/* shca_obj_get()s not yet put */
	enum shca_otype type;
	bool dying;			/* claimed by a destroy */
	struct shca_proxy *aliases;	/* imports naming it (import.c) */
};

/*
 * An imported PD, MR or DM (import.c): a public struct of the importing
 * context that names the same object by the same handle.  While linked
 * in the object's aliases, shca_obj_get() takes (pub, ctx) for the
 * object itself; the object's own rules (PD identity, keys, bounds)
 * apply unchanged.
 */
struct shca_proxy {
	union {
		struct ibv_pd pd;
		struct ibv_mr mr;
		struct ibv_dm dm;
	} u;
	enum shca_otype type;
	struct ibv_context *ctx;	/* the importing context */
	uint32_t handle;		/* the object's, as imported */
	/* the handle of the object it is an alias of here: handle, or for
	 * a PD of another process its shadow's (import_rem.c); 0: none (an
	 * MR of another process) */
	uint32_t ahandle;
	bool remote;			/* of another process (import_rem.c) */
	void *shadow;			/* ... a PD: its shadow's ibv_pd */
	struct shca_proxy *alias_next;	/* the object's aliases */
	struct shca_proxy *next;	/* the process's proxies */
};

/* Insert o (its public struct pub) in its type's table: the handle. */
int shca_obj_add(struct shca_obj *o, enum shca_otype t,
		 struct ibv_context *ctx, const void *pub, uint32_t *handle);
/*
 * The live object that (handle, ctx) names, if its public struct is pub
 * and, when want is not NULL, ctx is want; with a use taken (put it with
 * shca_obj_put).  NULL if there is none: the caller's errno.
 */
struct shca_obj *shca_obj_get(enum shca_otype t, const void *pub,
			      struct ibv_context *ctx, uint32_t handle,
			      struct ibv_context *want);
void shca_obj_put(struct shca_obj *o);
/*
 * Link p as an alias of the live object of type t that handle names, if
 * that object's context shares ctx's command file: the object with a
 * use taken, or NULL.
 */
struct shca_obj *shca_obj_alias(enum shca_otype t, uint32_t handle,
				struct ibv_context *ctx, struct shca_proxy *p);
/* Unlink p from its object's aliases, if the object is still there. */
void shca_obj_unalias(struct shca_proxy *p);
/*
 * The owner's side of an import from another process (import_rem.c):
 * the live object of type t that handle names, if its context is open
 * on the command file (dev, ino) of this process; with a use taken.
 */
struct shca_obj *shca_obj_find_file(enum shca_otype t, uint32_t handle,
				    dev_t dev, ino_t ino);
/* A destroy holding the only use, with *refs (if given) 0, makes the
 * object unfindable: 0, or -EBUSY. */
int shca_obj_claim(struct shca_obj *o, const int *refs);
void shca_obj_unclaim(struct shca_obj *o);
/* The object is gone: its handle is freed, it is marked dead, poisoned
 * past the header, and mem (size bytes, o inside) freed later. */
void shca_obj_retire(struct shca_obj *o, void *mem, size_t size);
/* The same; mem leaves the quarantine through release(mem), not free. */
void shca_obj_retire_to(struct shca_obj *o, void *mem, size_t size,
			void (*release)(void *mem));
void shca_quarantine(void *mem, size_t size);
/* The live objects of ctx, each with a use taken: a malloc'd array. */
int shca_obj_collect(enum shca_otype t, struct ibv_context *ctx,
		     struct shca_obj ***out);
/* Contexts open now, compared by address (a closed one is not read). */
int shca_ctx_register(struct ibv_context *ctx);
bool shca_ctx_unregister(struct ibv_context *ctx);
bool shca_ctx_live(const struct ibv_context *ctx);

/*
 * The data path's check, without a lock or a lookup: the object is live
 * and the public struct still names it (handle, context).  A destroyed
 * object waits in the quarantine, so reading its header is safe.
 */
static inline bool shca_obj_ok(const struct shca_obj *o, enum shca_otype t,
			       const struct ibv_context *ctx, uint32_t handle)
{
	return __builtin_expect(o->magic == SHCA_OBJ_MAGIC + (uint32_t)t &&
				o->handle == handle && o->ctx == ctx, 1);
}

/* ------------------------------------------------------------------ */
/* Objects                                                             */

/*
 * A device: one per network interface with an address.  Shaped like
 * rdma-core's private struct verbs_device so that Debian's libmlx5 and
 * libefa, which read the provider ops pointer at ibv_device + 664 to tell
 * whether a device is theirs, find ours and answer "not supported".
 */
struct shca_device {
	struct ibv_device ibdev;
	const void *ops_tag;		/* at +664: &shca_device_ops_tag */
	unsigned char verbs_device_tail[40]; /* rest of struct verbs_device */

	pthread_mutex_t lock;		/* guards the fields below */
	char ifname[IF_NAMESIZE];
	unsigned int ifindex;
	unsigned int if_mtu;
	bool present;			/* interface still has an address */
	uint64_t node_guid;		/* network order, as ibv_get_device_guid */
	unsigned int ngids;
	union ibv_gid gids[SHCA_NETIF_MAX_ADDRS];
	/* the port follows the interface's link (device.c): its IFF_* flags
	 * as the process's link monitor last saw them, while link_known,
	 * and this process's contexts, told of changes */
	bool link_known;
	unsigned int link_flags;
	struct shca_context *link_ctxs;
	struct shca_device *next;	/* global list, never freed */
};

extern const char shca_device_ops_tag[];

/* Asynchronous events: a queue behind a pollable eventfd. */
struct shca_event_queue {
	pthread_mutex_t lock;
	int fd;				/* eventfd: readable when an event may be
					 * there (see event.c) */
	struct shca_event *head, *tail;
	/* channels: move events peers signalled directly into the queue */
	void (*collect)(struct shca_event_queue *q);
	/* completion channels: a waiter does the net path's work itself
	 * (shca_engine_wait) */
	bool progress;
};

struct shca_event;

struct shca_context {
	struct verbs_context vctx;	/* &vctx.context is what clients hold */
	struct shca_device *dev;
	pthread_mutex_t lock;		/* object lists and counts */
	struct shca_event_queue async;
	int npd, ncq, nqp, nsrq, nmr, nah;
	struct shca_ufile *ufile;	/* the command file it shares */
	struct shca_context *link_next;	/* dev->link_ctxs, under dev->lock */
};

/*
 * A thread domain (pdom.c): the application's promise that the objects
 * of the parent domains holding it are used by one thread at a time.
 * struct ibv_td has no handle: ours follows it.
 */
struct shca_td {
	struct ibv_td ibtd;
	uint32_t handle;		/* ibv_td has none: the handle table's */
	struct shca_obj obj;
	int refs;			/* parent domains holding it */
};

/*
 * A protection domain, or a parent domain (pdom.c): both are PDs to every
 * verb.  prot is the protection domain that keys, QPs and MRs are checked
 * against: the PD itself, or the one a parent domain contains.  Objects
 * created on a parent domain hold a use of it (refs), and it holds one of
 * prot and of its TD.
 */
struct shca_pd {
	struct ibv_pd ibpd;
	struct shca_obj obj;
	int refs;			/* MRs, MWs, QPs, SRQs, AHs, CQs, parent
					 * domains using it */
	struct shca_pd *prot;		/* self, or the contained PD */
	struct shca_td *td;		/* parent domain: its TD, or NULL */
	/* parent domain: IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS (both set)
	 * and _PD_CONTEXT, as given */
	void *(*alloc)(struct ibv_pd *pd, void *pd_context, size_t size,
		       size_t alignment, uint64_t resource_type);
	void (*free)(struct ibv_pd *pd, void *pd_context, void *ptr,
		     uint64_t resource_type);
	void *pd_context;
	/* an import of another process's PD (import_rem.c): this shadow
	 * stands for it here; the owner's slot and pid and the PD's
	 * identity in the owner's arena */
	bool remote;
	int rslot;
	pid_t rpid;
	uint32_t rpd;
	/* a PD of ours that another process imported (import_rem.c, the
	 * table of importers): the L_Keys of its MRs in its shadow may come
	 * in our WQEs (import_key.c); set once, never cleared */
	bool imported;
};

/* Is pd shared with another process (an import of another's, or
 * imported by one): may our WQEs on it name another process's L_Keys
 * (verbs/import_key.c)? */
static inline bool shca_pd_shared(const struct shca_pd *pd)
{
	return pd && (__atomic_load_n(&pd->prot->remote, __ATOMIC_ACQUIRE) ||
		      __atomic_load_n(&pd->prot->imported, __ATOMIC_ACQUIRE));
}

static inline bool shca_pd_is_parent(const struct shca_pd *pd)
{
	return pd->prot != pd;
}

/*
 * Queue memory from a parent domain's allocator (pdom.c): the resource
 * types softhca passes, in the form the man page gives (the driver id in
 * the upper 32 bits: softhca has none, RDMA_DRIVER_UNKNOWN, 0).
 * docs/parent-domain.md says which memory is asked for.
 */
#define SHCA_RES_TYPE_SQ	((uint64_t)0 << 32 | 1)	/* a QP's send ring */

/* Memory that came from a parent domain's allocator or from calloc. */
struct shca_qbuf {
	void *addr;
	struct shca_pd *pd;		/* whose free() takes it; NULL: free() */
	uint64_t type;
};

struct shca_mr {
	struct ibv_mr ibmr;
	struct shca_obj obj;
	struct shca_pd *pd;
	uint64_t iova;			/* remote address of byte 0 */
	unsigned int access;
	uint32_t index;			/* slot in the process's MR table */
	struct shca_seg_hold *segs;	/* its pages are in segments
					 * (shm/seg.c), a reference to each
					 * held; NULL: CMA */
	void *base;			/* where byte 0 is in this process:
					 * ibmr.addr, but for a DM MR (whose
					 * addr is NULL, as rdma-core's) */
	struct shca_dm *dm;		/* a DM MR's device memory (dm.c) */
	int mw_binds;			/* MWs whose binding names it (mw.c,
					 * under the MR table's lock) */
};

/* Device memory (dm.c): memory softhca owns, reached through DM MRs. */
struct shca_dm {
	struct ibv_dm ibdm;
	struct shca_obj obj;
	void *mem;			/* fd mapped shared, page-rounded */
	size_t length;			/* as allocated (ibv_alloc_dm_attr) */
	size_t map_len;			/* mem's mapping */
	int refs;			/* DM MRs on it */
	int fd;				/* the memfd behind mem (sealed) */
	bool remote;			/* another process's DM, imported
					 * (import.c): not in our budget */
};

/*
 * A memory window (mw.c).  Its R_Key is a 24-bit random prefix, reserved
 * for the MW's life (mr_keys.c), and an 8-bit tag the consumer chooses at
 * each bind (ibv_inc_rkey).  The binding is published in an MR table slot
 * of the arena, where peers check R_Keys; the fields below are the
 * owner's own record, under the MR table's lock.
 */
struct shca_mw {
	struct ibv_mw ibmw;
	struct shca_obj obj;
	struct shca_pd *pd;
	uint32_t index;			/* its slot in the MR table */
	uint32_t prefix;		/* key & ~0xff, reserved */
	uint32_t key;			/* prefix | tag of the last bind */
	bool bound;			/* a binding was published (a peer's
					 * SEND_WITH_INV may have ended it:
					 * the arena entry says) */
	struct shca_mr *mr;		/* the MR it was bound to, or NULL */
	uint32_t qpn;			/* type 2: the QP it is bound to */
	uint64_t addr, length;		/* in the MR's iova space */
	unsigned int access;		/* IBV_ACCESS_REMOTE_* granted */
	bool zero_based;
	struct shca_mw *next;		/* the process's MW list */
};

/* A completion channel: CQs that fired, behind a pollable eventfd. */
struct shca_comp_channel {
	struct ibv_comp_channel ch;
	uint32_t magic;			/* SHCA_CHAN_MAGIC while live */
	struct shca_comp_channel *live_next; /* event.c's list */
	struct shca_event_queue q;
	uint32_t idx, gen;		/* in the process's channel table */
	struct shca_cq *cqs;		/* CQs on this channel, under q.lock */
};

/*
 * A CQ: the ring and its producer state live in the arena (shca_cq_shm),
 * where peers on this host write completions too; this side holds what
 * only the polling application touches.
 */
struct shca_cq {
	struct ibv_cq_ex cqx;		/* ibv_cq at 0: ibv_cq_ex_to_cq() */
	struct shca_obj obj;
	struct shca_comp_channel *chan;	/* cqx.channel as created */
	pthread_mutex_t lock;		/* consumers: poll, start/end_poll */
	struct shca_cq_shm *shm;	/* in this process's arena */
	struct shca_cq_ring ring;	/* its ring as this process keeps it:
					 * what polls read, destroy frees */
	uint64_t wc_flags;		/* create_cq_ex flags */
	struct shca_cqe cur_cqe;	/* ibv_cq_ex: the entry being read */
	uint64_t cur_tm_tag;		/* ... its ibv_wc_tm_info */
	uint32_t cur_tm_priv;
	bool single_threaded;		/* IBV_CREATE_CQ_ATTR_SINGLE_THREADED */
	struct shca_pd *pdom;		/* IBV_CQ_INIT_ATTR_MASK_PD: its use */
	bool overrun_reported;		/* IBV_EVENT_CQ_ERR raised */
	int refs;			/* QPs and SRQs using it */
	uint32_t comp_events_reported;
	uint32_t async_events_reported;
	bool is_ex;
	struct shca_cq *next;		/* the process's CQ list */
	struct shca_cq **pprev;		/* ... what points at it (O(1) out) */
	struct shca_cq *chan_next;	/* its channel's CQ list */
};

/*
 * A receive queue, a QP's or an SRQ's (srq.c): the ring is in the arena
 * (shca_rq_shm); lock orders this process's posters and owner-side changes.
 */
struct shca_rq {
	pthread_mutex_t lock;
	uint32_t max_wr, max_sge;	/* as reported */
	struct shca_rq_shm *shm;	/* NULL: the QP uses an SRQ */
	uint32_t head_seen;		/* under lock: shca_rqshm_full */
	struct shca_rq_ring ring;	/* its ring as this process keeps it:
					 * what posts write, destroy frees */
};

/*
 * An XRC domain (xrc.c): an identity that XRC SRQs and XRC_RECV QPs
 * publish; processes that open it through one file share it.  No handle
 * table: struct ibv_xrcd has no handle; a magic while open.
 */
struct shca_xrcd {
	struct ibv_xrcd ibxrcd;
	uint32_t magic;
	uint64_t id;			/* never 0 */
	int refs;			/* XRC SRQs and XRC_RECV QPs */
	int lock_fd;			/* shared flock on the file, or -1 */
};

struct shca_srq {
	struct ibv_srq ibsrq;
	struct shca_obj obj;
	struct shca_pd *pd;
	struct shca_rq rq;
	/* XRC SRQ: its domain, its CQ, and the entry of the QP table that
	 * gives it its number (srqn) where responders find it */
	struct shca_xrcd *xrcd;
	struct shca_cq *cq;
	uint32_t srqn, srqn_index;
	struct shca_qp_shm *xshm;
	/* TM SRQ (tm.c): its tag list in the arena, the list operations'
	 * CQ in cq; the owner's handles carry an entry's gen */
	struct shca_tm_shm *tm;
	uint32_t tm_ntags, tm_max_sge, tm_max_ops;
	/* the bounces' tags of its entries (import_key.c), the owner's
	 * own record: an entry deleted or left at destroy frees its
	 * bounce; NULL until an entry has one */
	uint32_t *tm_imp;
	int refs;			/* QPs using it */
	uint32_t events_reported;
	struct shca_srq *next;		/* the process's SRQ list */
	struct shca_srq **pprev;	/* ... what points at it */
};

struct shca_send_wqe {
	struct ibv_send_wr wr;		/* sg_list points at sge[] */
	uint32_t inline_len;
	/* net path, RC (src/net/transport.c): the PSNs the message uses,
	 * and the READ response packets placed so far */
	uint32_t psn, npsn, nrecv;
	/* 0: the application's; else a WQE the QP made itself for a
	 * rendezvous (net path): 1 + its slot in net.gen (transport.c) */
	uint32_t gen;
	/* 0, or the tag of the bounce buffer that sge[0] names in place of
	 * the owner's L_Keys (import_key.c, net RC/XRC) */
	uint32_t imp;
	struct ibv_sge sge[];		/* max_send_sge entries, or inline */
};

/*
 * The send queue (qp.c): head belongs to the requester and tail to
 * post_send, both under the QP's exec_lock (sq.lock orders the state
 * changes that flush it).  An inline WQE keeps its data in
 * sge[] (inline_len bytes) with wr.num_sge 0; otherwise wr.sg_list points
 * at sge[].
 */
struct shca_sq {
	pthread_mutex_t lock;
	uint32_t max_wr, max_sge, max_inline;
	uint32_t size;
	size_t wqe_size;
	uint32_t head, tail;
	/* WQEs the QP made itself (shca_sq_push_gen) in [head, tail): the
	 * application's max_wr leaves them aside; room for gen_room more
	 * (RC on a tag-matching SRQ) */
	uint32_t ngen, gen_room;
	unsigned char *buf;		/* = mem.addr */
	struct shca_qbuf mem;		/* the PD's allocator, or calloc */
};

struct shca_mcast {
	union ibv_gid gid;
	uint16_t lid;
	struct shca_mcast *next;
};

struct shca_wr_batch;
struct shca_conn;

/*
 * A QP's net path state (src/net/transport.c), under the QP's exec_lock.
 * Requester indexes are send queue counters: WQEs in [sq.head, send_idx)
 * are on the wire, [send_idx, assigned) were sent before and wait to be
 * sent again (go-back-N), from assigned on they have no PSN yet.
 */
#define SHCA_NET_RD_MAX	64	/* READs answered at once (the window) */
/* Rendezvous a QP carries out at once (docs/tag-matching.md): a matched
 * RNDV beyond them is delivered unexpected */
#define SHCA_NET_GEN_MAX 8
#define SHCA_NET_GEN_SGE 4		/* SHCA_TM_MAX_SGE */

struct shca_net_qp {
	bool on;			/* RC/UC: this QP talks over the net */
	struct shca_conn *conn;		/* toward the destination */
	/* requester */
	uint32_t next_psn;		/* for the next new WQE */
	uint32_t send_idx, send_pkt;	/* next packet to (re)send */
	uint32_t assigned;
	bool rnr_wait;			/* sitting out an RNR NAK */
	uint32_t rnr_idx;
	bool rd_gap;			/* READ asked again from rd_gap_psn */
	uint32_t rd_gap_psn;
	bool resent;			/* PSNs before resent_end were sent
					 * again (go_back): copies may still
					 * be queued (transport.c release) */
	uint32_t resent_end;
	/* the ACK timer asks again for the head WQE only (transport.c
	 * rc_timer) unless something may have been lost: the connection's
	 * resets (shca_net_conn_resets) then, a response after the head's
	 * dropped since */
	uint32_t resets;
	bool ahead_dropped;
	bool probe;			/* rc_send_window: the head only */
	uint32_t acked;			/* the first PSN no ACK or NAK has
					 * covered yet: one that moves it is
					 * progress (transport.c completer) */
	/* responder */
	uint32_t epsn, msn;
	bool nak_sent;			/* PSN sequence NAK not yet answered */
	bool rx_active;			/* a multi-packet message arriving */
	bool rx_write;
	uint32_t rx_first_psn;
	uint32_t rx_xrc_srqn;		/* XRC: the SRQ its packets name */
	uint64_t rx_va;
	uint32_t rx_rkey, rx_dma_len;
	unsigned char *rx_buf;
	size_t rx_len, rx_cap;
	struct {
		uint32_t psn;
		bool valid;
		uint64_t orig;
	} atomics[16];			/* replayed to duplicate requests */
	unsigned int atomic_next;
	/* READ responses being sent, in PSN order (transport.c rd_pump):
	 * a few packets at a time, as the connection drains; and the
	 * answers of later requests (ACK, atomic ACK, NAK) that came
	 * while some were queued, which go out after them */
	struct shca_net_read {
		uint32_t psn;		/* of its first response */
		uint32_t msn;
		uint64_t va;		/* an answer: the atomic's result */
		uint32_t rkey, len;
		uint32_t sent;		/* packets sent */
		uint32_t xrc_srqn;	/* XRC: whose PD checks the R_Key */
		bool answer;		/* false: a READ's (or FLUSH's)
					 * responses; true: one answer
					 * (transport.c rd_answer) */
		bool ack;		/* the answer is a plain ACK */
		uint8_t opcode;		/* the answer's (RC) */
		uint8_t syndrome;	/* its AETH's */
	} rd[SHCA_NET_RD_MAX];
	unsigned int rd_head, rd_count;
	struct shca_conn *rd_conn;	/* where they go */
	uint32_t rd_gen;		/* rd_conn's generation then */
	uint32_t rd_resets;		/* its resets when the queue began */
	bool rd_split;			/* some went on another connection */
	bool rd_fatal;			/* the queue ends in a NAK that puts
					 * the QP in error: the error keeps
					 * the queue (shca_net_qp_stop) */
	/* requester: the lanes of the head READ's L_Keys while conn.c
	 * places its responses (transport.c read_place; exec_lock held
	 * from there to read_place_done) */
	struct shca_lane rd_place_lanes[SHCA_MAX_SGE];
	int rd_place_nl;
	/* rendezvous of a tag-matching SRQ's tags (transport.c): the READ
	 * of the sender's data, then the FIN, as WQEs of the send queue
	 * that complete to no one */
	struct shca_net_gen {
		bool used;
		bool fin;		/* the READ is done: the FIN's turn */
		bool se;		/* the RNDV SEND was solicited */
		uint64_t wr_id;		/* the tag's recv_wr_id */
		uint64_t va;		/* the RVH */
		uint32_t rkey, len;
		uint32_t nsge;		/* the tag's buffer, len bytes */
		uint32_t imp;		/* its bounce's tag, or 0 */
		struct ibv_sge sge[SHCA_NET_GEN_SGE];
		uint8_t head[32];	/* TMH and RVH: the FIN, opcode FIN */
	} gen[SHCA_NET_GEN_MAX];
};

/*
 * The last L_Key a QP's requester translated (exec_lock held): what
 * shca_lookup_mr found for it, valid while the MR table's generation
 * (bumped under its lock whenever a key leaves the table or an MR
 * changes) is still gen.  No MR object is read through it.
 */
struct shca_mr_cache {
	uint64_t gen;			/* 0: empty */
	uint32_t key;
	unsigned int access;
	const void *prot;		/* the MR's PD (its protection) */
	uint64_t iova, length;
	char *base;
};

/*
 * A QP.  Locks, taken in this order: lock (attributes and state: modify,
 * query), sq.lock, rq.lock (or the SRQ's), then a CQ's.  The state is
 * written with sq.lock and rq.lock held too, so post_send and post_recv
 * see a transition and its flush as one step.
 */
struct shca_qp {
	union {				/* ibv_qp_ex starts with ibv_qp */
		struct ibv_qp ibqp;
		struct ibv_qp_ex qpx;
	};
	/* rdma-core 45's ibv_qp_ex.wr_flush, the member after
	 * wr_atomic_write (common/verbs_ext.h) */
	void (*wr_flush)(struct ibv_qp_ex *qp, uint32_t rkey,
			 uint64_t remote_addr, size_t len, uint8_t type,
			 uint8_t level);
	struct shca_obj obj;
	pthread_mutex_t lock;
	uint32_t qpn_index;		/* slot in the process's QP table */
	bool has_qpx;			/* ibv_qp_to_qp_ex() answers */
	struct shca_wr_batch *batch;	/* ibv_wr_* list being built */
	struct shca_pd *pd;
	struct shca_cq *scq, *rcq;
	struct shca_srq *srq;
	struct shca_xrcd *xrcd;		/* XRC_RECV: its domain (NULL once
					 * its creator destroyed it) */
	uint64_t xrcd_id;		/* XRC_RECV: the domain's identity */
	int xopens;			/* XRC_RECV: other processes' opens
					 * (xrc_qp.c, its lock) */
	bool xorphan;			/* ... destroyed by its creator, kept
					 * for them */
	bool xclosing;			/* ... being destroyed for good */
	struct ibv_qp_attr attr;	/* current attributes (state included) */
	struct ibv_qp_cap cap;		/* as reported */
	bool sq_sig_all;
	uint64_t send_ops_flags;	/* create_qp_ex: ibv_wr_* allowed */
	struct shca_sq sq;
	struct shca_rq rq;
	struct shca_mcast *mcast;
	unsigned int nmcast;
	uint32_t events_reported;

	/* the transport (engine/requester.c) */
	struct shca_qp_shm *shm;	/* what peers see, in the arena */
	pthread_mutex_t exec_lock;	/* recursive: executing the SQ head,
					 * and state changes that flush it */
	struct shca_timer retry_timer;	/* RNR and ACK-timeout retries */
	uint32_t head_retries;		/* of the WQE at the SQ head */
	uint32_t head_rnr_retries;
	bool head_ack_wait;		/* its try is timing out */
	enum shca_route route;		/* RC/UC: the transport (at RTR;
					 * UD chooses by AH) */
	struct shca_peer *peer;		/* RC/UC: the destination's process */
	/* the same host, during a run of the send queue (exec_lock): the
	 * destination's process held, the responder's counts of the
	 * messages gathered (shm/xfer.c) */
	struct shca_peer *run_peer;
	struct shca_xfer_tally resp_tally;
	struct shca_mr_cache lkey_cache;	/* (exec_lock) */
	/* rendezvous FINs this QP could not take yet (shm/xfer.c, its
	 * lock): a ring of fin_cap, at most the send queue's depth */
	uint8_t (*fin_q)[SHCA_RNDV_FIN_LEN];
	uint32_t fin_head, fin_n, fin_cap;
	bool fin_raised;		/* a FIN may be owed by the request
					 * being sent (exec_lock) */
	struct shca_lane rndv_lane;	/* the source of a rendezvous this
					 * process answers, held until its
					 * copy is done (shm/xfer.c,
					 * exec_lock) */
	struct shca_qp *fin_next;	/* the process's QPs holding FINs */
	struct shca_net_qp net;		/* the net path (src/net/transport.c) */
	bool comm_est_reported;
	int marks_busy;			/* threads in shca_qp_take_marks
					 * (atomic): ibv_query_qp waits for
					 * one applying marks it took */
	struct shca_qp *next;		/* the process's QP list */
};

struct shca_ah {
	struct ibv_ah ibah;
	struct shca_obj obj;
	struct shca_pd *pd;
	struct ibv_ah_attr attr;
	bool local;			/* reached by the same-host path */
};

static inline struct shca_device *to_sdev(struct ibv_device *d)
{
	return container_of(d, struct shca_device, ibdev);
}

static inline struct shca_context *to_sctx(struct ibv_context *c)
{
	return container_of(c, struct shca_context, vctx.context);
}

static inline struct shca_pd *to_spd(struct ibv_pd *p)
{
	return container_of(p, struct shca_pd, ibpd);
}

static inline struct shca_td *to_std(struct ibv_td *t)
{
	return container_of(t, struct shca_td, ibtd);
}

static inline struct shca_mr *to_smr(struct ibv_mr *m)
{
	return container_of(m, struct shca_mr, ibmr);
}

static inline struct shca_mw *to_smw(struct ibv_mw *m)
{
	return container_of(m, struct shca_mw, ibmw);
}

static inline struct shca_xrcd *to_sxrcd(struct ibv_xrcd *x)
{
	return container_of(x, struct shca_xrcd, ibxrcd);
}

static inline struct shca_cq *to_scq(struct ibv_cq *c)
{
	return container_of((struct ibv_cq_ex *)c, struct shca_cq, cqx);
}

static inline struct shca_cq *cqx_to_scq(struct ibv_cq_ex *c)
{
	return container_of(c, struct shca_cq, cqx);
}

static inline struct shca_comp_channel *to_schan(struct ibv_comp_channel *c)
{
	return container_of(c, struct shca_comp_channel, ch);
}

static inline struct shca_srq *to_ssrq(struct ibv_srq *s)
{
	return container_of(s, struct shca_srq, ibsrq);
}

static inline struct shca_qp *to_sqp(struct ibv_qp *q)
{
	return container_of(q, struct shca_qp, ibqp);
}

static inline struct shca_ah *to_sah(struct ibv_ah *a)
{
	return container_of(a, struct shca_ah, ibah);
}

/*
 * shca_xx_lookup(p, want): the live object that the public pointer p
 * names by its handle and context (handle.c), with a use taken (put it
 * with shca_obj_put(&x->obj)); want: the context it must belong to, or
 * NULL for any.  NULL if there is none: the verb's errno.
 */
#define SHCA_DEFINE_LOOKUP(fn, stype, ptype, t)                           \
	static inline struct stype *fn(struct ptype *p,                   \
				       struct ibv_context *want)          \
	{                                                                 \
		struct shca_obj *o =                                      \
			p ? shca_obj_get(t, p, p->context, p->handle, want) \
			  : NULL;                                         \
		return o ? container_of(o, struct stype, obj) : NULL;     \
	}

SHCA_DEFINE_LOOKUP(shca_pd_lookup, shca_pd, ibv_pd, SHCA_OT_PD)
SHCA_DEFINE_LOOKUP(shca_mr_lookup, shca_mr, ibv_mr, SHCA_OT_MR)
SHCA_DEFINE_LOOKUP(shca_cq_lookup, shca_cq, ibv_cq, SHCA_OT_CQ)
SHCA_DEFINE_LOOKUP(shca_srq_lookup, shca_srq, ibv_srq, SHCA_OT_SRQ)
SHCA_DEFINE_LOOKUP(shca_qp_lookup_obj, shca_qp, ibv_qp, SHCA_OT_QP)
SHCA_DEFINE_LOOKUP(shca_ah_lookup, shca_ah, ibv_ah, SHCA_OT_AH)
SHCA_DEFINE_LOOKUP(shca_dm_lookup, shca_dm, ibv_dm, SHCA_OT_DM)

/* The TD's handle is in our struct, after the public one. */
static inline struct shca_td *shca_td_lookup(struct ibv_td *t,
					     struct ibv_context *want)
{
	struct shca_obj *o =
		t ? shca_obj_get(SHCA_OT_TD, t, t->context,
				 to_std(t)->handle, want) : NULL;

	return o ? container_of(o, struct shca_td, obj) : NULL;
}
SHCA_DEFINE_LOOKUP(shca_mw_lookup, shca_mw, ibv_mw, SHCA_OT_MW)

/*
 * The verbs that also have a libibverbs 1.0 compat alias (compat.c) are
 * defined under another name and bound to name@@IBVERBS_1.1 explicitly, as
 * the version script lists the name in both nodes:
 *
 *	SHCA_DEFAULT_VERSION(ibv_alloc_pd)
 *	struct ibv_pd *shca_latest_ibv_alloc_pd(struct ibv_context *ctx) ...
 *
 * Inside the library, call the shca_latest_ name or the shca_ function.
 */
#define SHCA_DEFAULT_VERSION(name)                                   \
	__typeof__(name) shca_latest_##name                           \
		__attribute__((symver(#name "@@IBVERBS_1.1")));

/*
 * Convert a -errno result at the API boundary: the positive errno, and
 * errno set to it on failure, as rdma-core's verbs leave it (their
 * failures come back from a system call on the uverbs file).
 */
static inline int shca_ret_errno(int ret)
{
	if (ret < 0)
		ret = -ret;
	if (ret)
		errno = ret;
	return ret;
}

#define SHCA_ERR_PTR(e) (errno = (e), NULL)

/* ------------------------------------------------------------------ */
/* device.c: device list, GIDs, node GUIDs                             */
int shca_devices_refresh(void);
struct shca_device **shca_devices_snapshot(int *num);
int shca_device_gid(struct shca_device *dev, int index, union ibv_gid *gid);
int shca_device_gid_count(struct shca_device *dev);
unsigned int shca_device_gid_tbl_len(struct shca_device *dev);
enum ibv_mtu shca_device_active_mtu(struct shca_device *dev);
uint64_t shca_sys_image_guid(struct shca_device *dev);
/* The port's state and physical state (5 LinkUp, 2 Polling, 3 Disabled). */
void shca_device_port_state(struct shca_device *dev,
			    enum ibv_port_state *state, uint8_t *phys_state);
/* A context opens and closes: PORT_ERR/PORT_ACTIVE reach it meanwhile. */
void shca_device_link_attach(struct shca_context *sctx);
void shca_device_link_detach(struct shca_context *sctx);

/* context.c: open/close, queries, the ops tables */
void shca_context_fill_ops(struct shca_context *sctx);
int shca_query_device_ex(struct ibv_context *ctx,
			 const struct ibv_query_device_ex_input *input,
			 struct ibv_device_attr_ex *attr, size_t attr_size);
int shca_query_port(struct ibv_context *ctx, uint8_t port,
		    struct ibv_port_attr *attr, size_t attr_len);
bool shca_port_valid(struct ibv_context *ctx, unsigned int port);
/* import.c: a second context on a command file (its reference taken) */
struct ibv_context *shca_context_import(struct shca_ufile *uf, int cmd_fd);

/* import.c: command files, imported contexts and objects */
#define SHCA_CMD_FD_NAME "softhca-context"	/* the memfd's name */
struct shca_ufile;
/* The file behind fd (a new memfd), opened on dev, with one reference. */
struct shca_ufile *shca_ufile_new(struct shca_device *dev, int fd);
void shca_ufile_put(struct shca_ufile *uf);
struct shca_device *shca_ufile_device(struct shca_ufile *uf);
/* ctx closes: the objects it imported name nothing any more. */
void shca_import_close(struct ibv_context *ctx);
/* A destroy through pub succeeded: if pub is an import, it goes too. */
void shca_import_destroyed(const void *pub);
/* The local handle pub stands for if it is an import of another
 * process's object of type t (its shadow's, import_rem.c): true with *h;
 * *h 0 when it has none here (an MR). */
bool shca_import_ahandle(const void *pub, enum shca_otype t, uint32_t *h);
/* Is uf's identity (dev, ino), a file of this process? */
bool shca_ufile_is(const struct shca_ufile *uf, dev_t dev, ino_t ino);
/* The device of this process's open file (dev, ino), or NULL. */
struct shca_device *shca_ufile_owner_dev(dev_t dev, ino_t ino);

/* import_rem.c: imports from another process (docs/import.md) */
struct shca_rfile;
/* The record at the start of a command file: who owns it. */
void shca_rimport_record(int fd);
/* ibv_import_device of another process's cmd_fd: the context (cmd_fd
 * taken) or NULL with errno. */
struct ibv_context *shca_rimport_device(int cmd_fd);
struct shca_rfile *shca_ufile_rfile(struct shca_ufile *uf);
/* A new file of this process that stands for rf's (rf taken). */
struct shca_ufile *shca_ufile_new_remote(struct shca_device *dev, int fd,
					 struct shca_rfile *rf);
void shca_rfile_free(struct shca_rfile *rf);
/* import_pd / import_mr against the owner: 0 or -errno */
struct shca_rmr {
	uint32_t lkey, rkey, access, pd;
	uint64_t length, iova;
};
int shca_rimport_pd(struct shca_rfile *rf, uint32_t handle, int *slot,
		    pid_t *pid, uint32_t *pd_id);
int shca_rimport_mr(struct shca_rfile *rf, uint32_t handle,
		    struct shca_rmr *m);
/* Tell the owner that this process made shadow (its identity here) of
 * its PD handle, or (drop) destroyed it: the owner's QPs of the PD then
 * take, or no longer take, the keys of our MRs in the shadow
 * (docs/import.md).  No answer awaited. */
void shca_rimport_pd_shadow(struct shca_rfile *rf, uint32_t handle,
			    uint32_t shadow, bool drop);
/* This process's PD of identity pd is gone: its importers' entries go. */
void shca_rimport_pd_gone(uint32_t pd);
/* import_dm against the owner: its length and memfd (*fd), 0 or -errno */
int shca_rimport_dm(struct shca_rfile *rf, uint32_t handle,
		    uint64_t *length, int *fd);
/* Destroy the owner's PD, MR or DM (t) by handle: 0 or -errno. */
int shca_rimport_destroy_call(struct shca_rfile *rf, enum shca_otype t,
			      uint32_t handle);
/* A destroy through pub: if it is an import of another process's PD,
 * MR or DM (t), the owner destroys the object and the import goes: 0 or
 * -errno; -ENOENT if pub is none. */
int shca_rimport_destroy(const void *pub, enum shca_otype t);
/* The owner's server for importers (started with the listener). */
void shca_rimport_serve(void);

/* import_key.c: an imported PD's L_Keys used here, through a bounce
 * buffer (docs/import.md, "Keys of another process") */
struct shca_imp_io {
	void *buf;			/* the bounce memory, or NULL: none */
	size_t len;
	struct shca_pd *pd;
	int nsge;			/* SGEs of the owner's to write back */
	struct ibv_sge *sge;		/* ... and where in buf: off[] */
	size_t *off;
};
/* shca_sge_iov for a shadow PD: the SGEs of the owner's MRs copied in
 * (gather) or to be copied out (scatter, shca_imp_put); io zeroed by the
 * caller, released with shca_imp_done. */
enum ibv_wc_status shca_imp_sge_iov(struct shca_pd *pd,
				    const struct ibv_sge *sge, int n,
				    unsigned int access, struct iovec *iov,
				    int *niov, struct shca_imp_io *io);
/* scatter: buf to the owner's memory, its keys checked again */
enum ibv_wc_status shca_imp_put(struct shca_imp_io *io);
void shca_imp_done(struct shca_imp_io *io);
/* Post one receive WR on rq of pd (own_rq: a QP's own queue, not an
 * SRQ): another process's L_Keys on a PD shared with it as they are
 * (own_rq, all of them that process's) or through a bounce buffer; 0 or
 * -errno. */
int shca_imp_post_recv(struct shca_rq *rq, struct shca_pd *pd,
		       const struct ibv_recv_wr *wr, bool own_rq);
/* A tag-matching SRQ's TAG_ADD on pd (sge[0..n), n checked): *imp 0
 * when it goes as it is, else a bounce's tag and *bsge the one SGE that
 * names the bounce instead; 0 or -ENOMEM. */
int shca_imp_tm_add(struct shca_pd *pd, const struct ibv_sge *sge, int n,
		    struct ibv_sge *bsge, uint32_t *imp);
/* A receive completion carrying a bounce's tag (vendor_err): the bytes
 * to the receive's own SGEs, the tag cleared, the status updated. */
void shca_imp_recv_wc(struct ibv_wc *wc);
/* A matched tag-matching completion that carried a bounce's tag (imp,
 * in src_qp): the same, and src_qp the QP's destination again. */
void shca_imp_tm_wc(struct ibv_wc *wc, uint32_t imp);
/* The record of a tag that no completion will carry (recv: a
 * receive's, else a send WQE's). */
void shca_imp_drop(uint32_t tag, bool recv);
/* A send WQE just stored: a bounce for the net path's RC/XRC window. */
void shca_imp_send_store(struct shca_qp *qp, struct shca_send_wqe *w);
/* Its completion (w->imp set): the status it takes. */
enum ibv_wc_status shca_imp_send_done(const struct shca_send_wqe *w,
				      enum ibv_wc_status status);
/* Does a receive completion carry a bounce's tag (cq.c)? */
static inline bool shca_imp_wc_tagged(const struct ibv_wc *wc)
{
	return wc->vendor_err &&
	       (wc->opcode == IBV_WC_RECV ||
		wc->opcode == IBV_WC_RECV_RDMA_WITH_IMM ||
		wc->opcode == IBV_WC_TM_RECV || wc->opcode == IBV_WC_TM_NO_TAG);
}
/* Does the requester use the owner's L_Keys on a QP of this type and
 * route (RC and XRC: the same host's only)? */
bool shca_imp_route_ok(enum ibv_qp_type type, enum shca_route route);
/* May a send WR of a QP on pd (of type and route) name these keys: false
 * when pd is such an import, an SGE is not an MR of ours, and the QP's
 * transport does not use the owner's (shca_imp_route_ok). */
bool shca_imp_qp_keys_ok(struct shca_pd *pd, enum ibv_qp_type type,
			 enum shca_route route, const struct ibv_sge *sge,
			 int n);

/* event.c: async events, completion channels */
int shca_event_queue_init(struct shca_event_queue *q);
void shca_event_queue_destroy(struct shca_event_queue *q);
void shca_async_event(struct shca_context *sctx, enum ibv_event_type type,
		      void *obj);
void shca_cq_comp_event(struct shca_cq *cq);
void shca_channel_forget_cq(struct shca_comp_channel *ch, struct shca_cq *cq);
void shca_channel_add_cq(struct shca_comp_channel *ch, struct shca_cq *cq);
/* Is ch a live completion channel of ctx (NULL: any)? */
bool shca_channel_valid(struct ibv_comp_channel *ch, struct ibv_context *ctx);
void shca_async_forget(struct shca_context *sctx, void *obj);

/* pd.c, mr.c */
struct ibv_pd *shca_alloc_pd(struct ibv_context *ctx);
struct ibv_pd *shca_pd_create(struct ibv_context *ctx,
			      const struct shca_pd *proto);
int shca_dealloc_pd(struct ibv_pd *pd);
/* The destroys of an object found with its use (consumed), as the verbs
 * and the close of its context call them; wait_acks: wait for the acks of
 * the events handed out (not at close). */
int shca_pd_destroy(struct shca_pd *pd);
int shca_mr_destroy(struct shca_mr *mr);
/* An MR of the library's own in pd: no handle, local write only. */
struct shca_mr *shca_mr_internal(struct shca_pd *pd, void *base,
				 size_t length);
void shca_mr_internal_free(struct shca_mr *mr);
int shca_cq_destroy(struct shca_cq *cq, bool wait_acks);
int shca_srq_destroy(struct shca_srq *srq, bool wait_acks);
int shca_qp_destroy(struct shca_qp *qp, bool wait_acks);
int shca_ah_destroy(struct shca_ah *ah);
void shca_pd_get(struct shca_pd *pd);
void shca_pd_put(struct shca_pd *pd);
struct ibv_mr *shca_reg_mr(struct ibv_pd *pd, void *addr, size_t length,
			   uint64_t iova, unsigned int access);
int shca_rereg_mr(struct ibv_mr *mr, int flags, struct ibv_pd *pd,
		  void *addr, size_t length, int access);
int shca_dereg_mr(struct ibv_mr *mr);
/* pdom.c: thread domains, parent domains, their allocators */
struct ibv_td *shca_alloc_td(struct ibv_context *ctx,
			     struct ibv_td_init_attr *attr);
int shca_dealloc_td(struct ibv_td *td);
int shca_td_destroy(struct shca_td *td);
struct ibv_pd *shca_alloc_parent_domain(struct ibv_context *ctx,
					struct ibv_parent_domain_init_attr *attr);
/* size bytes, zeroed, aligned to align: from pd's allocator if it has
 * one (and it does not answer IBV_ALLOCATOR_USE_DEFAULT), else calloc;
 * 0 or -ENOMEM.  pd may be NULL. */
int shca_qbuf_alloc(struct shca_qbuf *b, struct shca_pd *pd, size_t size,
		    size_t align, uint64_t type);
/* Give it back to whoever provided it, once. */
void shca_qbuf_free(struct shca_qbuf *b);
struct shca_mr *shca_lookup_mr(struct shca_pd *pd, uint32_t key,
			       unsigned int access, uint64_t addr,
			       uint64_t len, bool remote);
void *shca_lookup_addr(struct shca_pd *pd, uint32_t key, unsigned int access,
		       uint64_t addr, uint64_t len, bool remote);
/* n local SGEs through their L_Keys in pd (access: 0 or
 * IBV_ACCESS_LOCAL_WRITE) as iovecs, empty ones skipped: IBV_WC_SUCCESS or
 * IBV_WC_LOC_PROT_ERR (mr.c) */
enum ibv_wc_status shca_sge_iov(struct shca_pd *pd, const struct ibv_sge *sge,
				int n, unsigned int access, struct iovec *iov,
				int *niov);
/* shca_sge_iov through c first (NULL: the table alone) */
enum ibv_wc_status shca_sge_iov_cached(struct shca_pd *pd,
				       struct shca_mr_cache *c,
				       const struct ibv_sge *sge, int n,
				       unsigned int access, struct iovec *iov,
				       int *niov);
int shca_check_range(const void *addr, size_t len, bool write);
/* The same in one system call (PROCMAP_QUERY, else MADV_POPULATE):
 * -ENOTTY where the kernel has neither (mr_range.c) */
int shca_check_range_fast(const void *addr, size_t len, bool write);
/* A DM MR (dm.c checks the DM, mr.c registers): the MR or NULL, errno */
struct ibv_mr *shca_reg_mr_dm(struct ibv_pd *pd, struct shca_dm *dm,
			      uint64_t offset, size_t length,
			      unsigned int access);
int shca_advise_mr(struct ibv_pd *pd, enum ibv_advise_mr_advice advice,
		   uint32_t flags, struct ibv_sge *sg_list, uint32_t num_sge);
/* dm.c */
struct ibv_dm *shca_alloc_dm(struct ibv_context *ctx,
			     struct ibv_alloc_dm_attr *attr);
int shca_free_dm(struct ibv_dm *dm);
int shca_dm_destroy(struct shca_dm *dm);
/* Another process's DM (its memfd fd, taken, whatever the outcome; its
 * length as the owner says) mapped here as a DM of ctx: the DM, or NULL
 * with errno.  fd and length are checked as hostile input. */
struct shca_dm *shca_dm_map_remote(struct ibv_context *ctx, int fd,
				   uint64_t length);
/* The ops and fields of a DM's public struct in ctx (import.c too). */
void shca_dm_init_pub(struct ibv_dm *d, struct ibv_context *ctx);
struct ibv_mr *shca_reg_dm_mr(struct ibv_pd *pd, struct ibv_dm *dm,
			      uint64_t offset, size_t length,
			      unsigned int access);
/* The MR table (mr.c) that MWs share: its lock, a slot, the arena's
 * room for a key; the slot functions with the lock held. */
void shca_mr_table_lock(void);
void shca_mr_table_unlock(void);
int shca_mr_slot_take(void *obj, uint32_t *idx);
void shca_mr_slot_free(uint32_t idx);
bool shca_mr_key_fits(uint32_t key, void *arena);
/* mr_keys.c: random MR keys (caller serializes: mr.c's table lock) */
int shca_mr_key_new(void *mr, bool (*fits)(uint32_t key, void *arg),
		    void *arg, uint32_t *key);
void *shca_mr_key_find(uint32_t key);
void shca_mr_key_retire(uint32_t key);
/* key's place in the map on its way into the cache, for a find, new or
 * retire soon after; key 0: the key the calling thread draws next. */
uint32_t shca_mr_key_prefetch(uint32_t key);
/* An MW's key: a prefix (low byte 0) whose 256 keys are all free,
 * reserved for mw; the MW that holds key's prefix, or NULL. */
int shca_mw_key_new(void *mw, bool (*fits)(uint32_t key, void *arg),
		    void *arg, uint32_t *key);
void *shca_mw_key_find(uint32_t key);

/* mw.c: memory windows */
struct ibv_mw *shca_alloc_mw(struct ibv_pd *pd, enum ibv_mw_type type);
int shca_dealloc_mw(struct ibv_mw *mw);
int shca_mw_destroy(struct shca_mw *mw);
int shca_bind_mw(struct ibv_qp *qp, struct ibv_mw *mw,
		 struct ibv_mw_bind *bind);
/* The send queue's local operations, executed in order (requester). */
enum ibv_wc_status shca_mw_bind_exec(struct shca_qp *qp,
				     const struct ibv_send_wr *wr);
enum ibv_wc_status shca_local_inv_exec(struct shca_qp *qp, uint32_t rkey);
/* A deregistration or re-registration of mr (claimed: no bind can
 * find it): -EBUSY while an MW bound to it is valid; otherwise every
 * earlier binding is let go, and no peer is inside it any more. */
int shca_mw_release_mr(struct shca_mr *mr);
/* cq.c */
struct ibv_cq *shca_create_cq(struct ibv_context *ctx, int cqe,
			      struct ibv_comp_channel *ch, int comp_vector);
struct ibv_cq_ex *shca_create_cq_ex(struct ibv_context *ctx,
				    struct ibv_cq_init_attr_ex *attr);
int shca_resize_cq(struct ibv_cq *cq, int cqe);
int shca_destroy_cq(struct ibv_cq *cq);
int shca_poll_cq(struct ibv_cq *cq, int num, struct ibv_wc *wc);
int shca_req_notify_cq(struct ibv_cq *cq, int solicited_only);
int shca_cq_push(struct shca_cq *cq, const struct ibv_wc *wc, bool solicited);
/* Report what peers left pending on this process's CQs (doorbell). */
void shca_cq_doorbell(void);
/* Drop QP qpn's completions (reset, destroy). */
void shca_cq_clean(struct shca_cq *cq, uint32_t qpn, bool flushed_only);

/* srq.c: SRQs, and the receive rings that RQs and SRQs share */
struct ibv_srq *shca_create_srq(struct ibv_pd *pd,
				struct ibv_srq_init_attr *attr);
struct ibv_srq *shca_create_srq_ex(struct ibv_context *ctx,
				   struct ibv_srq_init_attr_ex *attr);
int shca_modify_srq(struct ibv_srq *srq, struct ibv_srq_attr *attr,
		    int mask);
int shca_query_srq(struct ibv_srq *srq, struct ibv_srq_attr *attr);
int shca_destroy_srq(struct ibv_srq *srq);
int shca_post_srq_recv(struct ibv_srq *srq, struct ibv_recv_wr *wr,
		       struct ibv_recv_wr **bad);
/* The SRQ limit event: call after taking WQEs from srq (IBA 10.2.9.2) */
void shca_srq_check_limit(struct shca_srq *srq);

int shca_rq_init(struct shca_rq *rq, uint32_t max_wr, uint32_t max_sge);
void shca_rq_destroy(struct shca_rq *rq);
/* post_one with rq->lock held: 0, -ENOMEM (full), -EINVAL. */
int shca_rq_post_one(struct shca_rq *rq, const struct ibv_recv_wr *wr);
/* ... with a bounce's tag in the WQE (import_key.c) */
int shca_rq_post_imp(struct shca_rq *rq, const struct ibv_recv_wr *wr,
		     uint32_t tag);
/* Complete every WQE with IBV_WC_WR_FLUSH_ERR on cq (NULL: discard). */
void shca_rq_flush(struct shca_rq *rq, struct shca_cq *cq, uint32_t qp_num);
uint32_t shca_rq_count(const struct shca_rq *rq);
/* tm.c: tag-matching SRQs (docs/tag-matching.md) */
struct ibv_srq *shca_tm_srq_create(struct ibv_context *ctx,
				   struct ibv_srq_init_attr_ex *attr);
void shca_tm_srq_destroy(struct shca_srq *srq);
int shca_post_srq_ops(struct ibv_srq *srq, struct ibv_ops_wr *wr,
		      struct ibv_ops_wr **bad);
void shca_tm_fill_caps(struct ibv_tm_caps *caps);
/* srq.c, for tm.c: an SRQ with a CQ of its own and an arena block */
struct shca_srq *shca_srq_with_cq(struct ibv_context *ctx,
				  struct ibv_srq_init_attr_ex *attr,
				  size_t size, void **shm);

/* Report what peers left pending on this process's SRQs (doorbell). */
void shca_srq_doorbell(void);

/* qp.c: create, destroy, post, the QP table */
struct ibv_qp *shca_create_qp(struct ibv_pd *pd,
			      struct ibv_qp_init_attr *attr);
struct ibv_qp *shca_create_qp_ex(struct ibv_context *ctx,
				 struct ibv_qp_init_attr_ex *attr);
int shca_destroy_qp(struct ibv_qp *qp);
int shca_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr,
		   struct ibv_send_wr **bad);
int shca_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr,
		   struct ibv_recv_wr **bad);
/* The QP with this number in this process, or NULL. */
struct shca_qp *shca_qp_lookup(uint32_t qpn);
/* Its destination QP as published to peers, 0 if there is none. */
uint32_t shca_qp_dest_qpn(uint32_t qpn);
/* QP qpn of this process to the error state, by the engine (a mark). */
void shca_qp_mark_error(uint32_t qpn);
/* Every QP of this process (under the QP table's lock). */
void shca_qp_foreach(void (*fn)(struct shca_qp *qp, void *arg), void *arg);

/* (engine/requester.c: shca_sq_execute, in engine/engine.h) */
/* Is this GID one of this host's (this network namespace's)? */
bool shca_gid_is_local(const union ibv_gid *gid);
/* The oldest send WQE (NULL: empty) and its removal, for the requester. */
struct shca_send_wqe *shca_sq_head(struct shca_qp *qp);
void shca_sq_pop(struct shca_qp *qp);
/* A WQE the QP makes itself (wr, its own copy; sg_list unused) at the
 * tail, gen its net.gen slot + 1: 0, -EINVAL (not RTS or SQD: it would
 * never run) or -ENOMEM (no room left aside, sq.gen_room).  exec_lock
 * held. */
int shca_sq_push_gen(struct shca_qp *qp, const struct ibv_send_wr *wr,
		     uint32_t gen);
/* The WQE at SQ counter idx (NULL unless head <= idx < tail), and both
 * counters as they are now. */
struct shca_send_wqe *shca_sq_at(struct shca_qp *qp, uint32_t idx,
				 uint32_t *head, uint32_t *tail);
/* The same for the head WQE. */
struct shca_send_wqe *shca_sq_first(struct shca_qp *qp, uint32_t *head,
				    uint32_t *tail);
/* Complete every send WQE with IBV_WC_WR_FLUSH_ERR; sq.lock held. */
void shca_sq_flush(struct shca_qp *qp);
enum ibv_wc_opcode shca_wr_wc_opcode(enum ibv_wr_opcode opcode);
/* Is opcode a local operation (bind, invalidate): no message at all? */
bool shca_wr_is_local(enum ibv_wr_opcode opcode);
/* Execute a local operation at the send queue's head: its status. */
enum ibv_wc_status shca_wr_local_exec(struct shca_qp *qp,
				      const struct shca_send_wqe *w);
/* Is opcode one of the transport type has (the work-request table)? */
bool shca_wr_legal(enum ibv_qp_type type, enum ibv_wr_opcode opcode);

/* xrc.c: XRC domains, ibv_open_qp */
struct ibv_xrcd *shca_open_xrcd(struct ibv_context *ctx,
				struct ibv_xrcd_init_attr *attr);
int shca_close_xrcd(struct ibv_xrcd *xrcd);
/* Is x an open domain (of ctx, unless NULL)? */
bool shca_xrcd_ok(const struct ibv_xrcd *x, struct ibv_context *ctx);
void shca_xrcd_get(struct shca_xrcd *x);
void shca_xrcd_put(struct shca_xrcd *x);
/* An XRC SRQ's number: an entry of the QP table (qp.c), shm published
 * there; 0 or -ENOMEM.  And its release. */
int shca_xsrq_number_take(struct shca_qp_shm *shm, uint32_t *index,
			  uint32_t *num);
void shca_xsrq_number_put(uint32_t index);
int shca_get_srq_num(struct ibv_srq *srq, uint32_t *num);
struct shca_pd *shca_xsrq_pd(uint32_t srqn, uint64_t xrcd);

/* xrc_qp.c: ibv_open_qp, XRC_RECV QPs shared between processes */
struct shca_xqp;
struct ibv_qp *shca_open_qp(struct ibv_context *ctx,
			    struct ibv_qp_open_attr *attr);
/* Serve other processes' opens (a domain opened: idempotent). */
void shca_xqp_serve(void);
struct shca_xqp *shca_xqp_find(struct ibv_qp *ibqp);
int shca_xqp_modify(struct shca_xqp *x, struct ibv_qp_attr *attr, int mask);
int shca_xqp_query(struct shca_xqp *x, struct ibv_qp_attr *attr, int mask,
		   struct ibv_qp_init_attr *init);
int shca_xqp_destroy(struct shca_xqp *x);
void shca_xqp_close_ctx(struct ibv_context *ctx);
void shca_xqp_quiesce(struct ibv_context *ctx);
bool shca_xqp_orphan(struct shca_qp *qp, bool *gone);
bool shca_xqp_is_orphan(struct shca_qp *qp);
void shca_xqp_detach(struct shca_qp *qp);
/* qp_modify.c: modify and query of the creator's QP for an opener */
int shca_modify_qp_use(struct shca_qp *qp, struct ibv_qp_attr *attr,
		       int mask);
int shca_query_qp_use(struct shca_qp *qp, struct ibv_qp_attr *attr, int mask,
		      struct ibv_qp_init_attr *init);
/* XRC_SEND and RC share the RC transport's rules (XRC is RC, IBA 9.8). */
static inline bool shca_qpt_rc(enum ibv_qp_type t)
{
	return t == IBV_QPT_RC || t == IBV_QPT_XRC_SEND;
}

/* qp_modify.c: the state machine, and query (check, apply, report) */
int shca_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask);
int shca_query_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask,
		  struct ibv_qp_init_attr *init);
/* Move to ERR from the data path: flush, and LAST_WQE_REACHED with an SRQ */
void shca_qp_to_error(struct shca_qp *qp);
void shca_qp_reset_attr(struct shca_qp *qp);

/* ah.c: address handles, multicast groups */
struct ibv_ah *shca_create_ah(struct ibv_pd *pd, struct ibv_ah_attr *attr);
int shca_destroy_ah(struct ibv_ah *ah);
/* Can attr address a destination from this port?  0 or -errno. */
int shca_check_ah_attr(struct ibv_context *ctx,
		       const struct ibv_ah_attr *attr);
int shca_attach_mcast(struct ibv_qp *qp, const union ibv_gid *gid,
		      uint16_t lid);
int shca_detach_mcast(struct ibv_qp *qp, const union ibv_gid *gid,
		      uint16_t lid);

/* doorbell.c: what peers left for this process; the transport's start */
void shca_doorbell(void);
void shca_qp_take_marks(struct shca_qp *qp);
void shca_qp_await_marks(struct shca_qp *qp);
void shca_doorbell_ring(void);
void shca_qp_cq_overrun(struct shca_cq *cq);
/* Publish the QP's attributes where peers read them. */
void shca_qp_publish(struct shca_qp *qp);
int shca_transport_init(void);

/* misc.c: fork support */
bool shca_fork_initialized(void);
void shca_fork_range_used(void);

#endif
