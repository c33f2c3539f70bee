// SPDX-License-Identifier: MIT
/* Shared receive queues (placeholder until written). */
#include <errno.h>
#include "shca.h"

struct ibv_srq *shca_create_srq(struct ibv_pd *pd, struct ibv_srq_init_attr *attr) { return SHCA_ERR_PTR(EOPNOTSUPP); }
int shca_modify_srq(struct ibv_srq *srq, struct ibv_srq_attr *attr, int mask) { return -EOPNOTSUPP; }
int shca_query_srq(struct ibv_srq *srq, struct ibv_srq_attr *attr) { return -EOPNOTSUPP; }
int shca_destroy_srq(struct ibv_srq *srq) { return -EOPNOTSUPP; }
int shca_post_srq_recv(struct ibv_srq *srq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad) { *bad = wr; return EOPNOTSUPP; }
SHCA_DEFAULT_VERSION(ibv_create_srq)
struct ibv_srq *shca_latest_ibv_create_srq(struct ibv_pd *pd, struct ibv_srq_init_attr *a) { return shca_create_srq(pd, a); }
SHCA_DEFAULT_VERSION(ibv_modify_srq)
int shca_latest_ibv_modify_srq(struct ibv_srq *srq, struct ibv_srq_attr *a, int m) { return shca_ret_errno(shca_modify_srq(srq, a, m)); }
SHCA_DEFAULT_VERSION(ibv_query_srq)
int shca_latest_ibv_query_srq(struct ibv_srq *srq, struct ibv_srq_attr *a) { return shca_ret_errno(shca_query_srq(srq, a)); }
SHCA_DEFAULT_VERSION(ibv_destroy_srq)
int shca_latest_ibv_destroy_srq(struct ibv_srq *srq) { return shca_ret_errno(shca_destroy_srq(srq)); }
struct ibv_srq *shca_create_srq_ex(struct ibv_context *ctx, struct ibv_srq_init_attr_ex *attr) { return SHCA_ERR_PTR(EOPNOTSUPP); }
