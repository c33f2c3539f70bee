// SPDX-License-Identifier: MIT
/*
 * IBVERBS_PRIVATE_34: the provider interface of rdma-core 44.
 *
 * softhca loads no providers, but clients link Debian's libmlx5.so.1 and
 * libefa.so.1 (perftest, UCX, libfabric, pyverbs), which are bound at load
 * time to these symbols; their constructors call verbs_register_driver_34.
 * They never get a softhca device to drive (mlx5dv_is_supported() and
 * efadv_query_device() see softhca's own ops tag at ibv_device + 664), so
 * the uverbs command functions answer EOPNOTSUPP: there is no kernel
 * command channel behind a softhca context.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shca.h"

/* rdma-core private types, only ever handled through pointers here */
struct verbs_device_ops;
struct verbs_context_ops;
struct verbs_sysfs_dev;
struct ibv_command_buffer;

/*
 * The kernel-command wrappers.  Their real prototypes take rdma-core
 * private structs; callers pass arguments in registers and ignore nothing
 * but the int result, so one shape serves them all.
 */
#define SHCA_NO_KERNEL_CMD(name) \
	int name(void);          \
	int name(void)           \
	{                        \
		return EOPNOTSUPP; \
	}

SHCA_NO_KERNEL_CMD(ibv_cmd_advise_mr)
SHCA_NO_KERNEL_CMD(ibv_cmd_alloc_dm)
SHCA_NO_KERNEL_CMD(ibv_cmd_alloc_mw)
SHCA_NO_KERNEL_CMD(ibv_cmd_alloc_pd)
SHCA_NO_KERNEL_CMD(ibv_cmd_attach_mcast)
SHCA_NO_KERNEL_CMD(ibv_cmd_close_xrcd)
SHCA_NO_KERNEL_CMD(ibv_cmd_create_ah)
SHCA_NO_KERNEL_CMD(ibv_cmd_create_counters)
SHCA_NO_KERNEL_CMD(ibv_cmd_create_cq)
SHCA_NO_KERNEL_CMD(ibv_cmd_create_cq_ex)
SHCA_NO_KERNEL_CMD(ibv_cmd_create_flow)
SHCA_NO_KERNEL_CMD(ibv_cmd_create_flow_action_esp)
SHCA_NO_KERNEL_CMD(ibv_cmd_create_qp)
SHCA_NO_KERNEL_CMD(ibv_cmd_create_qp_ex)
SHCA_NO_KERNEL_CMD(ibv_cmd_create_qp_ex2)
SHCA_NO_KERNEL_CMD(ibv_cmd_create_rwq_ind_table)
SHCA_NO_KERNEL_CMD(ibv_cmd_create_srq)
SHCA_NO_KERNEL_CMD(ibv_cmd_create_srq_ex)
SHCA_NO_KERNEL_CMD(ibv_cmd_create_wq)
SHCA_NO_KERNEL_CMD(ibv_cmd_dealloc_mw)
SHCA_NO_KERNEL_CMD(ibv_cmd_dealloc_pd)
SHCA_NO_KERNEL_CMD(ibv_cmd_dereg_mr)
SHCA_NO_KERNEL_CMD(ibv_cmd_destroy_ah)
SHCA_NO_KERNEL_CMD(ibv_cmd_destroy_counters)
SHCA_NO_KERNEL_CMD(ibv_cmd_destroy_cq)
SHCA_NO_KERNEL_CMD(ibv_cmd_destroy_flow)
SHCA_NO_KERNEL_CMD(ibv_cmd_destroy_flow_action)
SHCA_NO_KERNEL_CMD(ibv_cmd_destroy_qp)
SHCA_NO_KERNEL_CMD(ibv_cmd_destroy_rwq_ind_table)
SHCA_NO_KERNEL_CMD(ibv_cmd_destroy_srq)
SHCA_NO_KERNEL_CMD(ibv_cmd_destroy_wq)
SHCA_NO_KERNEL_CMD(ibv_cmd_detach_mcast)
SHCA_NO_KERNEL_CMD(ibv_cmd_free_dm)
SHCA_NO_KERNEL_CMD(ibv_cmd_get_context)
SHCA_NO_KERNEL_CMD(ibv_cmd_modify_cq)
SHCA_NO_KERNEL_CMD(ibv_cmd_modify_flow_action_esp)
SHCA_NO_KERNEL_CMD(ibv_cmd_modify_qp)
SHCA_NO_KERNEL_CMD(ibv_cmd_modify_qp_ex)
SHCA_NO_KERNEL_CMD(ibv_cmd_modify_srq)
SHCA_NO_KERNEL_CMD(ibv_cmd_modify_wq)
SHCA_NO_KERNEL_CMD(ibv_cmd_open_qp)
SHCA_NO_KERNEL_CMD(ibv_cmd_open_xrcd)
SHCA_NO_KERNEL_CMD(ibv_cmd_poll_cq)
SHCA_NO_KERNEL_CMD(ibv_cmd_post_recv)
SHCA_NO_KERNEL_CMD(ibv_cmd_post_send)
SHCA_NO_KERNEL_CMD(ibv_cmd_post_srq_recv)
SHCA_NO_KERNEL_CMD(ibv_cmd_query_context)
SHCA_NO_KERNEL_CMD(ibv_cmd_query_device_any)
SHCA_NO_KERNEL_CMD(ibv_cmd_query_mr)
SHCA_NO_KERNEL_CMD(ibv_cmd_query_port)
SHCA_NO_KERNEL_CMD(ibv_cmd_query_qp)
SHCA_NO_KERNEL_CMD(ibv_cmd_query_srq)
SHCA_NO_KERNEL_CMD(ibv_cmd_read_counters)
SHCA_NO_KERNEL_CMD(ibv_cmd_reg_dm_mr)
SHCA_NO_KERNEL_CMD(ibv_cmd_reg_dmabuf_mr)
SHCA_NO_KERNEL_CMD(ibv_cmd_reg_mr)
SHCA_NO_KERNEL_CMD(ibv_cmd_req_notify_cq)
SHCA_NO_KERNEL_CMD(ibv_cmd_rereg_mr)
SHCA_NO_KERNEL_CMD(ibv_cmd_resize_cq)
SHCA_NO_KERNEL_CMD(execute_ioctl)

unsigned int __ioctl_final_num_attrs(unsigned int num_attrs,
				     struct ibv_command_buffer *link);
unsigned int __ioctl_final_num_attrs(unsigned int num_attrs,
				     struct ibv_command_buffer *link)
{
	(void)link;
	return num_attrs;
}

/* rdma-core exports this bool; providers read it. */
bool verbs_allow_disassociate_destroy;

void verbs_register_driver_34(const struct verbs_device_ops *ops);
void verbs_register_driver_34(const struct verbs_device_ops *ops)
{
	/* the first member of verbs_device_ops is the provider's name */
	shca_dbg("provider %s registered; softhca does not use providers",
		 ops ? *(const char *const *)ops : "?");
}

/*
 * rdma-core's provider log: level from VERBS_LOG_LEVEL (0 = none ... 4),
 * output to VERBS_LOG_FILE or stderr.
 */
void __verbs_log(struct verbs_context *ctx, uint32_t level,
		 const char *fmt, ...);
void __verbs_log(struct verbs_context *ctx, uint32_t level,
		 const char *fmt, ...)
{
	static int max_level = -1;
	static FILE *out;
	va_list ap;

	(void)ctx;
	if (max_level < 0) {
		const char *lvl = getenv("VERBS_LOG_LEVEL");
		const char *file = getenv("VERBS_LOG_FILE");

		out = file ? fopen(file, "ae") : NULL;
		if (!out)
			out = stderr;
		max_level = lvl ? atoi(lvl) : 0;
	}
	if (level > (uint32_t)max_level)
		return;
	va_start(ap, fmt);
	vfprintf(out, fmt, ap);
	va_end(ap);
}

void *_verbs_init_and_alloc_context(struct ibv_device *device, int cmd_fd,
				    size_t alloc_size,
				    struct verbs_context *context_offset,
				    uint32_t driver_id);
void *_verbs_init_and_alloc_context(struct ibv_device *device, int cmd_fd,
				    size_t alloc_size,
				    struct verbs_context *context_offset,
				    uint32_t driver_id)
{
	(void)device; (void)cmd_fd; (void)alloc_size; (void)context_offset;
	(void)driver_id;
	errno = EOPNOTSUPP;
	return NULL;
}

void verbs_uninit_context(struct verbs_context *context);
void verbs_uninit_context(struct verbs_context *context)
{
	(void)context;
}

void verbs_set_ops(struct verbs_context *vctx,
		   const struct verbs_context_ops *ops);
void verbs_set_ops(struct verbs_context *vctx,
		   const struct verbs_context_ops *ops)
{
	(void)vctx;
	(void)ops;
}

/* What rdma-core does for a provider's CQ: the public fields' defaults. */
void verbs_init_cq(struct ibv_cq *cq, struct ibv_context *context,
		   struct ibv_comp_channel *channel, void *cq_context);
void verbs_init_cq(struct ibv_cq *cq, struct ibv_context *context,
		   struct ibv_comp_channel *channel, void *cq_context)
{
	cq->context = context;
	cq->channel = channel;
	if (channel) {
		pthread_mutex_lock(&context->mutex);
		channel->refcnt++;
		pthread_mutex_unlock(&context->mutex);
	}
	cq->cq_context = cq_context;
	cq->comp_events_completed = 0;
	cq->async_events_completed = 0;
	pthread_mutex_init(&cq->mutex, NULL);
	pthread_cond_init(&cq->cond, NULL);
}

struct ibv_context *verbs_open_device(struct ibv_device *device,
				      void *private_data);
struct ibv_context *verbs_open_device(struct ibv_device *device,
				      void *private_data)
{
	(void)private_data;
	return ibv_open_device(device);
}

int ibv_read_ibdev_sysfs_file(char *buf, size_t size,
			      struct verbs_sysfs_dev *sysfs_dev,
			      const char *fnfmt, ...);
int ibv_read_ibdev_sysfs_file(char *buf, size_t size,
			      struct verbs_sysfs_dev *sysfs_dev,
			      const char *fnfmt, ...)
{
	(void)buf; (void)size; (void)sysfs_dev; (void)fnfmt;
	/* softhca devices have no rdma-core sysfs record */
	errno = EINVAL;
	return -1;
}
