// SPDX-License-Identifier: MIT
/* Address handles (placeholder until written). */
#include <errno.h>
#include "shca.h"

struct ibv_ah *shca_create_ah(struct ibv_pd *pd, struct ibv_ah_attr *attr) { return SHCA_ERR_PTR(EOPNOTSUPP); }
int shca_destroy_ah(struct ibv_ah *ah) { return -EOPNOTSUPP; }
int shca_check_ah_attr(struct ibv_context *ctx, const struct ibv_ah_attr *attr) { return -EOPNOTSUPP; }
SHCA_DEFAULT_VERSION(ibv_create_ah)
struct ibv_ah *shca_latest_ibv_create_ah(struct ibv_pd *pd, struct ibv_ah_attr *a) { return shca_create_ah(pd, a); }
SHCA_DEFAULT_VERSION(ibv_destroy_ah)
int shca_latest_ibv_destroy_ah(struct ibv_ah *ah) { return shca_ret_errno(shca_destroy_ah(ah)); }
int ibv_init_ah_from_wc(struct ibv_context *c, uint8_t p, struct ibv_wc *wc, struct ibv_grh *g, struct ibv_ah_attr *a) { errno = EOPNOTSUPP; return -1; }
struct ibv_ah *ibv_create_ah_from_wc(struct ibv_pd *pd, struct ibv_wc *wc, struct ibv_grh *g, uint8_t p) { return SHCA_ERR_PTR(EOPNOTSUPP); }
