/* SPDX-License-Identifier: MIT */
/*
 * What rdma-core 45 added to the verbs API for RDMA FLUSH (IBA Annex A19,
 * Memory Placement Extensions) and the device capability bits of FLUSH
 * and ATOMIC WRITE, none of which Debian 12's rdma-core 44 headers carry.
 * The values are those of later rdma-core and of the kernel's uAPI
 * (ib_user_ioctl_verbs.h); softhca takes no name from them, so that a
 * newer header installed beside these compiles too.
 *
 * ibv_qp_ex of rdma-core 45 grows one member after wr_atomic_write:
 *	void (*wr_flush)(struct ibv_qp_ex *qp, uint32_t rkey,
 *			 uint64_t remote_addr, size_t len, uint8_t type,
 *			 uint8_t level);
 * softhca's QP keeps that slot right after its ibv_qp_ex (verbs/shca.h),
 * so a program built against the newer header reaches ibv_wr_flush();
 * one built against rdma-core 44 calls shca_wr_flush() below.
 */
#ifndef SOFTHCA_COMMON_VERBS_EXT_H
#define SOFTHCA_COMMON_VERBS_EXT_H

#include <stddef.h>
#include <stdint.h>
#include <infiniband/verbs.h>

/* enum ibv_wr_opcode, enum ibv_wc_opcode */
#define SHCA_WR_FLUSH			14
#define SHCA_WC_FLUSH			8
/* enum ibv_qp_create_send_ops_flags */
#define SHCA_QP_EX_WITH_FLUSH		(1ull << 11)
/* enum ibv_access_flags: the responder's MR (and QP) must allow them */
#define SHCA_ACCESS_FLUSH_GLOBAL	(1u << 8)
#define SHCA_ACCESS_FLUSH_PERSISTENT	(1u << 9)
/* enum ibv_placement_type (ibv_wr_flush's type: a mask) */
#define SHCA_FLUSH_GLOBAL		(1u << 0)
#define SHCA_FLUSH_PERSISTENT		(1u << 1)
/* enum ibv_selectivity_level (ibv_wr_flush's level) */
#define SHCA_FLUSH_RANGE		0u
#define SHCA_FLUSH_MR			1u
/* ibv_device_attr_ex.device_cap_flags_ex (IB_UVERBS_DEVICE_*) */
#define SHCA_DEVICE_FLUSH_GLOBAL	(1ull << 38)
#define SHCA_DEVICE_FLUSH_PERSISTENT	(1ull << 39)
#define SHCA_DEVICE_ATOMIC_WRITE	(1ull << 40)

typedef void (*shca_wr_flush_fn)(struct ibv_qp_ex *qp, uint32_t rkey,
				 uint64_t remote_addr, size_t len,
				 uint8_t type, uint8_t level);

/* The wr_flush slot of a softhca QP: the word after its ibv_qp_ex. */
static inline void shca_wr_flush(struct ibv_qp_ex *qp, uint32_t rkey,
				 uint64_t remote_addr, size_t len,
				 uint8_t type, uint8_t level)
{
	shca_wr_flush_fn fn = *(shca_wr_flush_fn *)(void *)(qp + 1);

	fn(qp, rkey, remote_addr, len, type, level);
}

#endif
