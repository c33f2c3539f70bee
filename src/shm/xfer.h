/* SPDX-License-Identifier: MIT */
/*
 * The same-host transport: the requester executes a work request against
 * the responder's queues and memory itself, as a NIC would — checking the
 * responder's QP, MR table and receive queue in its arena, moving data
 * with process_vm_readv/writev, and writing the responder's completion.
 * The responder's CPU does nothing (DESIGN.md "the requester does the DMA").
 */
#ifndef SOFTHCA_SHM_XFER_H
#define SOFTHCA_SHM_XFER_H

#include <stdint.h>
#include <sys/uio.h>
#include <infiniband/verbs.h>

#include "arena.h"
#include "peer.h"

#define SHCA_GRH_LEN 40

struct shca_xfer {
	enum ibv_qp_type qp_type;
	uint32_t src_qpn;
	uint32_t dest_qpn;
	uint32_t qkey;			/* UD: the Q_Key the message carries */
	enum ibv_wr_opcode opcode;
	bool solicited;
	__be32 imm_data;
	uint64_t remote_addr;
	uint32_t rkey;
	uint64_t compare_add;
	uint64_t swap;
	const struct iovec *local;	/* gather list, or READ/atomic target */
	int nlocal;
	uint64_t length;		/* message length */
	uint32_t pmtu;			/* RC/UC: path MTU in bytes (the
					 * packets the message would be, for
					 * the counters); 0: one packet */
	bool count_resp;		/* the same-host requester: count the
					 * message at the responder too (the
					 * net path counts what it receives) */
	const uint8_t *grh;		/* UD: SHCA_GRH_LEN bytes to place */
	/*
	 * RDMA WRITE (with immediate) a packet at a time (the net path):
	 * local holds bytes [part_off, part_off + part_len) of the message;
	 * the R_Key is checked for the whole [remote_addr, + length).
	 */
	bool partial;
	uint64_t part_off, part_len;
};

enum shca_xfer_outcome {
	SHCA_XFER_DONE,			/* completed (status says how) */
	SHCA_XFER_RNR,			/* RC: receiver not ready, retry */
	SHCA_XFER_NO_RESPONSE,		/* RC: nothing answered, retry */
};

struct shca_xfer_result {
	enum shca_xfer_outcome outcome;
	enum ibv_wc_status status;	/* for the requester's completion */
	uint8_t rnr_timer;		/* responder's min_rnr_timer */
	uint64_t atomic_orig;		/* atomics: the original value */
	bool bad_key;			/* an invalid R_Key (no MR of the
					 * QP's PD has it) or, UD, Q_Key:
					 * counted on the responder's QP */
};

/* The states in which a QP's receive side takes messages. */
static inline bool shca_qp_state_can_receive(uint32_t state)
{
	return state == IBV_QPS_RTR || state == IBV_QPS_RTS ||
	       state == IBV_QPS_SQD || state == IBV_QPS_SQE;
}

/*
 * Same-host traffic in the counters the net path keeps (common/stat.h),
 * as a NIC counts what it loops back: the packets the message would be
 * on a wire of the path MTU and their payload bytes, seen from the
 * requester (requester true) or the responder.  There are no ACKs.
 */
void shca_xfer_count(struct shca_stat_block *b, const struct shca_xfer *x,
		     bool requester);

/* A responder found an error that moves the QP to the error state: until
 * its owner does so, the QP takes nothing more. */
static inline bool shca_qp_shm_failing(const struct shca_qp_shm *q)
{
	return __atomic_load_n(&q->pending, __ATOMIC_ACQUIRE) &
	       (SHCA_QP_PEND_ACCESS_ERR | SHCA_QP_PEND_REQ_ERR |
		SHCA_QP_PEND_FATAL | SHCA_QP_PEND_ERR);
}

void shca_shm_execute(struct shca_peer *peer, const struct shca_xfer *x,
		      struct shca_xfer_result *res);

#endif
