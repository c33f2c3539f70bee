// SPDX-License-Identifier: MIT
/* Queue pairs (placeholder until written). */
#include <errno.h>
#include "shca.h"

struct ibv_qp *shca_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *attr) { return SHCA_ERR_PTR(EOPNOTSUPP); }
struct ibv_qp *shca_create_qp_ex(struct ibv_context *ctx, struct ibv_qp_init_attr_ex *attr) { return SHCA_ERR_PTR(EOPNOTSUPP); }
int shca_query_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask, struct ibv_qp_init_attr *init) { return -EOPNOTSUPP; }
int shca_destroy_qp(struct ibv_qp *qp) { return -EOPNOTSUPP; }
int shca_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad) { *bad = wr; return EOPNOTSUPP; }
int shca_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad) { *bad = wr; return EOPNOTSUPP; }
int shca_attach_mcast(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid) { return -EOPNOTSUPP; }
int shca_detach_mcast(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid) { return -EOPNOTSUPP; }
SHCA_DEFAULT_VERSION(ibv_create_qp)
struct ibv_qp *shca_latest_ibv_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *a) { return shca_create_qp(pd, a); }
SHCA_DEFAULT_VERSION(ibv_query_qp)
int shca_latest_ibv_query_qp(struct ibv_qp *qp, struct ibv_qp_attr *a, int m, struct ibv_qp_init_attr *i) { return shca_ret_errno(shca_query_qp(qp, a, m, i)); }
SHCA_DEFAULT_VERSION(ibv_destroy_qp)
int shca_latest_ibv_destroy_qp(struct ibv_qp *qp) { return shca_ret_errno(shca_destroy_qp(qp)); }
SHCA_DEFAULT_VERSION(ibv_attach_mcast)
int shca_latest_ibv_attach_mcast(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid) { return shca_ret_errno(shca_attach_mcast(qp, gid, lid)); }
SHCA_DEFAULT_VERSION(ibv_detach_mcast)
int shca_latest_ibv_detach_mcast(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid) { return shca_ret_errno(shca_detach_mcast(qp, gid, lid)); }
struct ibv_qp_ex *ibv_qp_to_qp_ex(struct ibv_qp *qp) { return NULL; }
