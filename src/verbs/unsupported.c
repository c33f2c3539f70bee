// SPDX-License-Identifier: MIT
/*
 * Unsupported verbs.  Each op answers as rdma-core does for a provider
 * without the feature: EOPNOTSUPP as a return value (errno set too, as
 * every failing verb here sets it), or NULL with errno EOPNOTSUPP.
 * Features listed here are reported absent by ibv_query_device(_ex): no
 * flow steering, counters, WQs/RSS, tag matching.
 */
#include <errno.h>
#include <stddef.h>

#include "shca.h"
#include "unsupported.h"

#define NULL_EOPNOTSUPP (errno = EOPNOTSUPP, NULL)
/* the int verbs: EOPNOTSUPP returned, and in errno (docs/conformance.md) */
#define INT_EOPNOTSUPP (errno = EOPNOTSUPP)

static struct ibv_mr *alloc_null_mr(struct ibv_pd *pd)
{
	(void)pd;
	return NULL_EOPNOTSUPP;
}

static int read_counters(struct ibv_counters *c, uint64_t *v, uint32_t n,
			 uint32_t flags)
{
	(void)c; (void)v; (void)n; (void)flags;
	return INT_EOPNOTSUPP;
}

static int attach_counters_point_flow(struct ibv_counters *c,
				      struct ibv_counter_attach_attr *a,
				      struct ibv_flow *f)
{
	(void)c; (void)a; (void)f;
	return INT_EOPNOTSUPP;
}

static struct ibv_counters *create_counters(struct ibv_context *ctx,
					    struct ibv_counters_init_attr *a)
{
	(void)ctx; (void)a;
	return NULL_EOPNOTSUPP;
}

static int destroy_counters(struct ibv_counters *c)
{
	(void)c;
	return INT_EOPNOTSUPP;
}

static int modify_flow_action_esp(struct ibv_flow_action *fa,
				  struct ibv_flow_action_esp_attr *a)
{
	(void)fa; (void)a;
	return INT_EOPNOTSUPP;
}

static int destroy_flow_action(struct ibv_flow_action *fa)
{
	(void)fa;
	return INT_EOPNOTSUPP;
}

static struct ibv_flow_action *
create_flow_action_esp(struct ibv_context *ctx,
		       struct ibv_flow_action_esp_attr *a)
{
	(void)ctx; (void)a;
	return NULL_EOPNOTSUPP;
}

static int modify_qp_rate_limit(struct ibv_qp *qp,
				struct ibv_qp_rate_limit_attr *a)
{
	(void)qp; (void)a;
	return INT_EOPNOTSUPP;
}

static int modify_cq(struct ibv_cq *cq, struct ibv_modify_cq_attr *a)
{
	(void)cq; (void)a;
	return INT_EOPNOTSUPP;
}

static int destroy_rwq_ind_table(struct ibv_rwq_ind_table *t)
{
	(void)t;
	return INT_EOPNOTSUPP;
}

static struct ibv_rwq_ind_table *
create_rwq_ind_table(struct ibv_context *ctx,
		     struct ibv_rwq_ind_table_init_attr *a)
{
	(void)ctx; (void)a;
	return NULL_EOPNOTSUPP;
}

static int destroy_wq(struct ibv_wq *wq)
{
	(void)wq;
	return INT_EOPNOTSUPP;
}

static int modify_wq(struct ibv_wq *wq, struct ibv_wq_attr *a)
{
	(void)wq; (void)a;
	return INT_EOPNOTSUPP;
}

static struct ibv_wq *create_wq(struct ibv_context *ctx,
				struct ibv_wq_init_attr *a)
{
	(void)ctx; (void)a;
	return NULL_EOPNOTSUPP;
}

static int destroy_flow(struct ibv_flow *flow)
{
	(void)flow;
	return INT_EOPNOTSUPP;
}

static struct ibv_flow *create_flow(struct ibv_qp *qp,
				    struct ibv_flow_attr *a)
{
	(void)qp; (void)a;
	return NULL_EOPNOTSUPP;
}

static void abi_placeholder(void)
{
}

static void *compat_unsupported(void)
{
	return NULL_EOPNOTSUPP;
}

void shca_unsupported_fill(struct verbs_context *v)
{
	struct ibv_context_ops *o = &v->context.ops;

	v->alloc_null_mr = alloc_null_mr;
	v->read_counters = read_counters;
	v->attach_counters_point_flow = attach_counters_point_flow;
	v->create_counters = create_counters;
	v->destroy_counters = destroy_counters;
	v->modify_flow_action_esp = modify_flow_action_esp;
	v->destroy_flow_action = destroy_flow_action;
	v->create_flow_action_esp = create_flow_action_esp;
	v->modify_qp_rate_limit = modify_qp_rate_limit;
	v->modify_cq = modify_cq;
	v->destroy_rwq_ind_table = destroy_rwq_ind_table;
	v->create_rwq_ind_table = create_rwq_ind_table;
	v->destroy_wq = destroy_wq;
	v->modify_wq = modify_wq;
	v->create_wq = create_wq;
	v->ibv_destroy_flow = destroy_flow;
	v->ABI_placeholder2 = abi_placeholder;
	v->ibv_create_flow = create_flow;
	v->ABI_placeholder1 = abi_placeholder;

	/* slots that only pre-v1.1 rdma-core used internally */
	o->_compat_alloc_pd = compat_unsupported;
	o->_compat_dealloc_pd = compat_unsupported;
	o->_compat_reg_mr = compat_unsupported;
	o->_compat_rereg_mr = compat_unsupported;
	o->_compat_dereg_mr = compat_unsupported;
	o->_compat_create_cq = compat_unsupported;
	o->_compat_cq_event = compat_unsupported;
	o->_compat_resize_cq = compat_unsupported;
	o->_compat_destroy_cq = compat_unsupported;
	o->_compat_create_srq = compat_unsupported;
	o->_compat_modify_srq = compat_unsupported;
	o->_compat_query_srq = compat_unsupported;
	o->_compat_destroy_srq = compat_unsupported;
	o->_compat_create_qp = compat_unsupported;
	o->_compat_query_qp = compat_unsupported;
	o->_compat_modify_qp = compat_unsupported;
	o->_compat_destroy_qp = compat_unsupported;
	o->_compat_create_ah = compat_unsupported;
	o->_compat_destroy_ah = compat_unsupported;
	o->_compat_attach_mcast = compat_unsupported;
	o->_compat_detach_mcast = compat_unsupported;
	o->_compat_async_event = compat_unsupported;
}
