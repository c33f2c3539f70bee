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

#include "../engine/xport.h"
#include "arena.h"
#include "peer.h"

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

/* The same-host transport (engine/xport.h), shca_transports[ROUTE_HOST]. */
extern const struct shca_transport_ops shca_host_ops;

#endif
