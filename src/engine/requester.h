/* SPDX-License-Identifier: MIT */
/*
 * What the requester (requester.c) shares with the net path's requester
 * (src/net/transport.c): the local side of a send WQE and its completion.
 */
#ifndef SOFTHCA_ENGINE_REQUESTER_H
#define SOFTHCA_ENGINE_REQUESTER_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>
#include <infiniband/verbs.h>

struct shca_qp;
struct shca_send_wqe;

/* The message length of a WQE (inline or its SGEs). */
uint64_t shca_wqe_length(const struct shca_send_wqe *w);

/* The WQE's local buffers as iovecs (at most 64), checked against this
 * process's MR table; IBV_WC_LOC_PROT_ERR when an L_Key does not cover. */
enum ibv_wc_status shca_wqe_local_iov(struct shca_qp *qp,
				      const struct shca_send_wqe *w,
				      bool write, struct iovec *iov,
				      int *niov);

/* An atomic's 8-byte result into its local buffer, scattered over its
 * SGEs in order (their lengths add up to 8: checked at the try). */
void shca_atomic_result(const struct iovec *iov, int niov, uint64_t orig);

/* The 40-byte GRH a UD receive buffer starts with. */
void shca_build_grh(uint8_t *grh, const union ibv_gid *sgid,
		    const struct ibv_global_route *dst, uint64_t payload);

/* Complete a send WQE (if signaled or in error). */
void shca_complete_send(struct shca_qp *qp, const struct shca_send_wqe *w,
			enum ibv_wc_status status, uint32_t byte_len);

/* After a send WQE completed in error: RC to ERR, UC and UD to SQE. */
void shca_sq_failed(struct shca_qp *qp);

#endif
