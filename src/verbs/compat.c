// SPDX-License-Identifier: MIT
/*
 * Compat symbols and the verbs softhca answers "not supported".
 *
 * IBVERBS_1.0 aliases (sym@IBVERBS_1.0, non-default): libibverbs 1.0's
 * struct layouts, bound only by binaries linked before 2006; no Debian 12
 * binary uses them.  softhca exports them so that the symbol set matches
 * rdma-core 44 exactly, and each one fails cleanly (errno ENOSYS, and
 * the verb's failure value) rather than misreading an old struct.
 */
#include <errno.h>
#include <stdio.h>

#include "shca.h"

/*
 * ret: what the verb returns on failure in its 1.0 form: NULL or 0 for
 * pointers, GUIDs and void, ENOSYS for the verbs that return an errno,
 * -1 for those that return -1 and set errno.
 */
#define SHCA_COMPAT_1_0_RET(name, ret)                                     \
	long shca_compat_##name(void);                                     \
	__attribute__((symver(#name "@IBVERBS_1.0")))                      \
	long shca_compat_##name(void)                                      \
	{                                                                  \
		shca_warn_once(#name "@IBVERBS_1.0 (libibverbs 1.0 ABI) "  \
			       "is not supported");                        \
		errno = ENOSYS;                                            \
		return ret;                                                \
	}

#define SHCA_COMPAT_1_0(name) SHCA_COMPAT_1_0_RET(name, 0)
#define SHCA_COMPAT_1_0_ERRNO(name) SHCA_COMPAT_1_0_RET(name, ENOSYS)
#define SHCA_COMPAT_1_0_MINUS1(name) SHCA_COMPAT_1_0_RET(name, -1)

SHCA_COMPAT_1_0(ibv_ack_async_event)
SHCA_COMPAT_1_0(ibv_ack_cq_events)
SHCA_COMPAT_1_0(ibv_alloc_pd)
SHCA_COMPAT_1_0_ERRNO(ibv_attach_mcast)
SHCA_COMPAT_1_0_ERRNO(ibv_close_device)
SHCA_COMPAT_1_0(ibv_create_ah)
SHCA_COMPAT_1_0(ibv_create_cq)
SHCA_COMPAT_1_0(ibv_create_qp)
SHCA_COMPAT_1_0(ibv_create_srq)
SHCA_COMPAT_1_0_ERRNO(ibv_dealloc_pd)
SHCA_COMPAT_1_0_ERRNO(ibv_dereg_mr)
SHCA_COMPAT_1_0_ERRNO(ibv_destroy_ah)
SHCA_COMPAT_1_0_ERRNO(ibv_destroy_cq)
SHCA_COMPAT_1_0_ERRNO(ibv_destroy_qp)
SHCA_COMPAT_1_0_ERRNO(ibv_destroy_srq)
SHCA_COMPAT_1_0_ERRNO(ibv_detach_mcast)
SHCA_COMPAT_1_0(ibv_free_device_list)
SHCA_COMPAT_1_0_MINUS1(ibv_get_async_event)
SHCA_COMPAT_1_0_MINUS1(ibv_get_cq_event)
SHCA_COMPAT_1_0(ibv_get_device_guid)
SHCA_COMPAT_1_0(ibv_get_device_list)
SHCA_COMPAT_1_0(ibv_get_device_name)
SHCA_COMPAT_1_0_ERRNO(ibv_modify_qp)
SHCA_COMPAT_1_0_ERRNO(ibv_modify_srq)
SHCA_COMPAT_1_0(ibv_open_device)
SHCA_COMPAT_1_0_ERRNO(ibv_query_device)
SHCA_COMPAT_1_0_MINUS1(ibv_query_gid)
SHCA_COMPAT_1_0_MINUS1(ibv_query_pkey)
SHCA_COMPAT_1_0_ERRNO(ibv_query_port)
SHCA_COMPAT_1_0_ERRNO(ibv_query_qp)
SHCA_COMPAT_1_0_ERRNO(ibv_query_srq)
SHCA_COMPAT_1_0(ibv_reg_mr)
SHCA_COMPAT_1_0_ERRNO(ibv_resize_cq)

/* rdma-core 44 keeps ibv_register_driver@IBVERBS_1.1 only to warn. */
void shca_compat_register_driver(const char *name, void *init_func);
__attribute__((symver("ibv_register_driver@IBVERBS_1.1")))
void shca_compat_register_driver(const char *name, void *init_func)
{
	(void)init_func;
	fprintf(stderr, "Warning: Driver %s does not support the kernel ABI "
		"of softhca's libibverbs.\n", name ? name : "(null)");
}

/* ------------------------------------------------------------------ */

/* dma-buf memory belongs to a device driver softhca cannot reach. */
struct ibv_mr *ibv_reg_dmabuf_mr(struct ibv_pd *pd, uint64_t offset,
				 size_t length, uint64_t iova, int fd,
				 int access)
{
	(void)pd; (void)offset; (void)length; (void)iova; (void)fd;
	(void)access;
	return SHCA_ERR_PTR(EOPNOTSUPP);
}

/* Enhanced Connection Establishment: a device without ECE. */
int ibv_query_ece(struct ibv_qp *qp, struct ibv_ece *ece)
{
	(void)qp;
	(void)ece;
	return shca_ret_errno(-EOPNOTSUPP);
}

int ibv_set_ece(struct ibv_qp *qp, struct ibv_ece *ece)
{
	(void)qp;
	(void)ece;
	return shca_ret_errno(-EOPNOTSUPP);
}

/*
 * Whether a reader of the destination buffer sees a message's bytes in
 * order: softhca copies with memcpy/process_vm_writev, which give no such
 * guarantee, so 0 (not in order), as rdma-core's default.
 */
int ibv_query_qp_data_in_order(struct ibv_qp *qp, enum ibv_wr_opcode op,
			       uint32_t flags)
{
	(void)qp;
	(void)op;
	(void)flags;
	return 0;
}
