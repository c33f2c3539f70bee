/* SPDX-License-Identifier: MIT */
/*
 * The one interface between the engine's stages (requester, responder,
 * completer: engine/) and the transports below them: the same host
 * (src/shm/xfer.c) and the net (src/net/transport.c).
 *
 * Down: a transport is a struct shca_transport_ops.  The verbs layer
 * chooses it (qp_modify.c at RTR for RC and UC, the AH for each UD
 * message) and fills shca_transports[]; the engine calls a transport only
 * through those ops and names none.
 *
 * Up: a transport reaches the stages only through shca_stages (xport.c),
 * never by their names: the responder's rules for a request that reached
 * this host, and the completer's pieces for a transport that completes
 * send WQEs itself (the net path's RC window).
 *
 * A request travels between them as a struct shca_xfer and comes back as a
 * struct shca_xfer_result.
 */
#ifndef SOFTHCA_ENGINE_XPORT_H
#define SOFTHCA_ENGINE_XPORT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>
#include <infiniband/verbs.h>

#include "../common/verbs_ext.h"
#include "../shm/arena.h"

struct shca_qp;
struct shca_srq;
struct shca_send_wqe;
struct shca_peer;
struct shca_stat_block;

#define SHCA_GRH_LEN 40

/* A matched rendezvous that the receiver's QP carries out itself (the
 * net path, shca_xfer.rndv_read). */
struct shca_rndv_req {
	uint64_t wr_id;			/* the tag's recv_wr_id */
	uint64_t addr;			/* the RVH, host order */
	uint32_t rkey, len;
	const struct ibv_sge *sge;	/* the tag's buffer (checked once) */
	uint32_t nsge;			/* <= SHCA_TM_MAX_SGE */
	const uint8_t *head;		/* TMH and RVH as sent (32 bytes) */
	bool solicited;
	uint32_t imp;			/* the tag's bounce (verbs/
					 * import_key.c): its completions
					 * carry it in vendor_err */
};

/*
 * The responder's counts of same-host messages, gathered a run at a time
 * (engine/responder.c): what block b is owed, added to it with one atomic
 * add per counter when the count moves to another block, before a
 * completion that the counted messages precede, and when the run ends
 * (shca_stages.count_flush), not with four per message.  (The
 * requester's own counts need no tally: struct shca_stat_own.)
 */
struct shca_xfer_tally {
	struct shca_stat_block *b;	/* NULL: nothing owed */
	uint64_t sent_pkts, sent_bytes, rcvd_pkts, rcvd_bytes;
	/* b is the block of the responder's QP numbered qpn, whose number
	 * lies at qpn_at: read again before the counts go in (its owner
	 * may have destroyed it since and used the memory for something
	 * else: the counts are then dropped); NULL: a block of ours */
	const uint32_t *qpn_at;
	uint32_t qpn;
};

struct shca_xfer {
	enum ibv_qp_type qp_type;
	uint32_t src_qpn;
	uint32_t dest_qpn;
	uint32_t qkey;			/* UD: the Q_Key the message carries */
	uint32_t xrc_srqn;		/* XRC (qp_type RC, dest an XRC_RECV
					 * QP): the SRQ it names; 0: not XRC;
					 * SHCA_XRC_SRQN_NONE: names none */
	enum ibv_wr_opcode opcode;
	bool solicited;
	__be32 imm_data;
	uint32_t inv_rkey;		/* SEND_WITH_INV: the R_Key to end */
	uint64_t remote_addr;
	uint32_t rkey;
	uint64_t compare_add;
	uint64_t swap;			/* ATOMIC_WRITE: the 8 bytes, as
					 * they lie in memory */
	uint8_t flush_type;		/* FLUSH: SHCA_FLUSH_GLOBAL | ... */
	uint8_t flush_level;		/* FLUSH: SHCA_FLUSH_RANGE or _MR;
					 * the range's length in length */
	const struct iovec *local;	/* gather list, or READ/atomic target */
	int nlocal;
	uint64_t length;		/* message length */
	uint32_t pmtu;			/* RC/UC: path MTU in bytes (the
					 * packets the message would be, for
					 * the counters); 0: one packet */
	bool count_resp;		/* the same-host requester: count the
					 * message at the responder too (the
					 * net path counts what it receives) */
	struct shca_xfer_tally *resp_tally;	/* ... a run at a time
					 * (the responder's process held for
					 * the run); NULL: at once */
	const uint8_t *grh;		/* UD: SHCA_GRH_LEN bytes to place */
	/*
	 * RDMA WRITE (with immediate) a packet at a time (the net path):
	 * local holds bytes [part_off, part_off + part_len) of the message;
	 * the R_Key is checked for the whole [remote_addr, + length).
	 */
	bool partial;
	uint64_t part_off, part_len;
	/*
	 * The same-host requester's side of a tag-matching rendezvous
	 * (engine/tm_rx.c): the sender's memory that a RVH names, checked
	 * as an RDMA READ responder checks it (the sender's QP's remote
	 * read enable, then R_Key, PD, REMOTE_READ and bounds): 0 with
	 * *src, or -EACCES.  NULL (the net path): a RNDV message is
	 * delivered unexpected, for software to fetch.
	 */
	int (*rndv_src)(void *ctx, uint64_t addr, uint32_t rkey,
			uint32_t len, struct iovec *src);
	/*
	 * The net path's side (net/transport.c): the receiver's own QP
	 * reads the sender's data (rndv_ctx is that QP).  Set only while
	 * the QP can take one more rendezvous; called once the tag is used
	 * and its match reported, after the receive queue's lock, with
	 * what the READ needs (engine/responder.c, rndv_net).
	 */
	void (*rndv_read)(void *ctx, const struct shca_rndv_req *r);
	void *rndv_ctx;
	/* a rendezvous FIN that its sender's process held (shm/xfer.c):
	 * the oldest request of its connection, not held back by the
	 * QP's fin_wait */
	bool fin;
};

/* The notification (TMH opcode FIN, then the RVH) a matched rendezvous
 * owes its sender, and its length. */
#define SHCA_RNDV_FIN_LEN	32

/* An XRC request's SRQ number that no SRQ has (beyond 24 bits): what a
 * request naming 0 or more than 24 bits becomes on either path. */
#define SHCA_XRC_SRQN_NONE	0x01000000u

enum shca_xfer_outcome {
	SHCA_XFER_DONE,			/* completed (status says how) */
	SHCA_XFER_RNR,			/* RC: receiver not ready, retry */
	SHCA_XFER_NO_RESPONSE,		/* RC: nothing answered, retry */
	SHCA_XFER_UNREACHABLE,		/* UD: this transport cannot reach
					 * the destination (a process on
					 * this host that refuses CMA): the
					 * requester tries the net */
};

struct shca_xfer_result {
	enum shca_xfer_outcome outcome;
	enum ibv_wc_status status;	/* for the requester's completion */
	uint8_t rnr_timer;		/* responder's min_rnr_timer */
	uint64_t atomic_orig;		/* atomics: the original value */
	bool bad_key;			/* an invalid R_Key (no MR of the
					 * QP's PD has it) or, UD, Q_Key:
					 * counted on the responder's QP */
	/* a matched rendezvous (rndv_src): the sender's QP failed the
	 * READ's R_Key (access error there), or is owed a FIN of these
	 * bytes from the receiver's QP once its SEND has completed */
	bool rndv_bad;
	bool rndv_fin;
	uint8_t fin[SHCA_RNDV_FIN_LEN];
};

/*
 * A transport, as the requester sees it.  Every slot holds a function.
 * The requester calls them with the QP's exec_lock held.
 */
struct shca_transport_ops {
	const char *name;
	/*
	 * A transport that keeps several requests of the QP in flight and
	 * completes them from its acknowledgements (the net path's RC
	 * window) runs the send queue itself: true.  false: the requester
	 * runs it a WQE at a time through xmit.
	 */
	bool (*sq_run)(struct shca_qp *qp);
	/* The QP's retry timer fired: true if the transport's own (sq_run)
	 * retry was due; false: the requester retries its head WQE. */
	bool (*timer)(struct shca_qp *qp);
	/*
	 * Carry out or send one message (x, from WQE w): res says how it
	 * ended.  The same host answers at once (DONE with a status, RNR,
	 * NO_RESPONSE, UNREACHABLE); the net's UC and UD are done once sent.
	 * UD with dest_qpn 0xffffff: every member of the group the
	 * transport reaches.
	 */
	void (*xmit)(struct shca_qp *qp, const struct shca_send_wqe *w,
		     const struct shca_xfer *x, struct shca_xfer_result *res);
	/*
	 * The requester has run the send queue as far as it goes now: what
	 * the transport kept across the run's messages goes (the same host:
	 * the responder's process it held, the counts it gathered).  Called
	 * for every transport at the end of every run.
	 */
	void (*run_end)(struct shca_qp *qp);
};

/* Which transport: the index of shca_transports[] (verbs/qp_modify.c). */
enum shca_route {
	SHCA_ROUTE_HOST,		/* same host: src/shm/xfer.c */
	SHCA_ROUTE_NET,			/* other hosts: src/net/transport.c */
	SHCA_NROUTES,
};

extern const struct shca_transport_ops *const shca_transports[SHCA_NROUTES];

/*
 * After the SEND of a matched rendezvous completed at its requester on
 * this host (res->rndv_bad or rndv_fin, set only there): the sender's QP
 * takes its access error, or receives the FIN (shm/xfer.c).
 */
void shca_host_rndv_done(struct shca_qp *qp, const struct shca_xfer *x,
			 const struct shca_xfer_result *res);

/*
 * The FINs a QP holds because it had no receive WQE (shm/xfer.c): tried
 * again, in order, after a receive is posted to the QP or to its SRQ;
 * dropped when it moves to ERR or RESET or is destroyed (forget also
 * frees what held them).
 */
void shca_host_fin_post_recv(struct shca_qp *qp);
void shca_host_fin_post_srq(const struct shca_srq *srq);
void shca_host_fin_drop(struct shca_qp *qp);
void shca_host_fin_forget(struct shca_qp *qp);

/*
 * Same-host traffic in the counters the net path keeps (common/stat.h),
 * as a NIC counts what it loops back: the packets message x would be on a
 * wire of its path MTU and their payload bytes, the request's way (out)
 * and the way back.  There are no ACKs.  The requester counts out as sent
 * and back as received (shm/xfer.c), the responder the other way round
 * (engine/responder.c).
 */
struct shca_xfer_wire {
	uint64_t out_pkts, out_bytes, back_pkts, back_bytes;
};

static inline struct shca_xfer_wire shca_xfer_wire(const struct shca_xfer *x)
{
	uint64_t data = x->pmtu && x->length > x->pmtu ?
				(x->length + x->pmtu - 1) / x->pmtu :
				1;
	struct shca_xfer_wire w = { .out_pkts = 1 };

	switch ((unsigned int)x->opcode) {
	case SHCA_WR_FLUSH:
		w.back_pkts = 1;	/* a response of no data */
		break;
	case IBV_WR_ATOMIC_WRITE:
		w.out_bytes = 8;
		break;
	case IBV_WR_RDMA_READ:
		/* a request one way, the data back */
		w.back_pkts = data;
		w.back_bytes = x->length;
		break;
	case IBV_WR_ATOMIC_CMP_AND_SWP:
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
		w.back_pkts = 1;
		w.back_bytes = 8;
		break;
	default:
		w.out_pkts = data;
		w.out_bytes = x->length;
		break;
	}
	return w;
}

/*
 * The engine's stages, as a transport sees them (xport.c): the only way a
 * transport reaches one.
 */
struct shca_stages {
	/* responder.c: carry out request x against the QP it names in p's
	 * arena (p: a process on this host, this one included; NULL or
	 * gone: nothing answers) */
	void (*respond)(struct shca_peer *p, const struct shca_xfer *x,
			struct shca_xfer_result *res);
	/* ... p held by the caller (shca_peer_hold) across a run of
	 * requests: a p that died since answers nothing, as above */
	void (*respond_held)(struct shca_peer *p, const struct shca_xfer *x,
			     struct shca_xfer_result *res);
	/* responder.c: the responder's counts that t gathered in a run
	 * (x->resp_tally), into their block now */
	void (*count_flush)(struct shca_xfer_tally *t);
	/*
	 * responder.c: what the net path reads or writes of this process's
	 * registered memory after a request's checks (the READ responses,
	 * a WRITE's direct placement): R_Key key through QP qpn of PD pd
	 * (its identity in the arena), checked as respond checks it, under
	 * an access lane of p (this process) that *lane holds until
	 * unhold, after the last byte (ibv_dereg_mr and its kin wait for
	 * it: shm/seg.c).  0 with *va, or -errno and nothing held.
	 */
	int (*hold)(struct shca_peer *p, uint32_t qpn, uint32_t pd,
		    uint32_t key, uint32_t access, uint64_t addr,
		    uint64_t len, struct shca_lane *lane, void **va);
	void (*unhold)(struct shca_lane *lane);
	/* requester.c: a send WQE's length, its local buffers checked
	 * against this process's MR table, a UD message's GRH */
	uint64_t (*wqe_length)(const struct shca_send_wqe *w);
	enum ibv_wc_status (*wqe_local_iov)(struct shca_qp *qp,
					    const struct shca_send_wqe *w,
					    bool write, struct iovec *iov,
					    int *niov);
	void (*build_grh)(uint8_t *grh, const union ibv_gid *sgid,
			  const struct ibv_global_route *dst,
			  uint64_t payload);
	/* completer.c: a send WQE's completion, an atomic's result, and
	 * the QP's fate after an error */
	enum ibv_wc_status (*complete_send)(struct shca_qp *qp,
					    const struct shca_send_wqe *w,
					    enum ibv_wc_status status,
					    uint32_t byte_len);
	void (*atomic_result)(const struct iovec *iov, int niov,
			      uint64_t orig);
	void (*sq_failed)(struct shca_qp *qp);
};

extern const struct shca_stages shca_stages;

/* IBA 9.7.6.1.3: Local ACK Timeout = 4.096 us * 2^timeout, in ns (0:
 * infinite). */
static inline uint64_t shca_ack_timeout_ns(uint8_t timeout)
{
	if (!timeout)
		return 0;
	return 4096ull << (timeout < 31 ? timeout : 31);
}

/* The states in which a QP's receive side takes messages. */
static inline bool shca_qp_state_can_receive(uint32_t state)
{
	return state == IBV_QPS_RTR || state == IBV_QPS_RTS ||
	       state == IBV_QPS_SQD || state == IBV_QPS_SQE;
}

/* A responder found an error that moves the QP to the error state: until
 * its owner does so, the QP takes nothing more. */
static inline bool shca_qp_shm_failing(const struct shca_qp_shm *q)
{
	return __atomic_load_n(&q->pending, __ATOMIC_ACQUIRE) &
	       (SHCA_QP_PEND_ACCESS_ERR | SHCA_QP_PEND_REQ_ERR |
		SHCA_QP_PEND_FATAL | SHCA_QP_PEND_ERR);
}

#endif
