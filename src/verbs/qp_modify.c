// SPDX-License-Identifier: MIT
/* QP state machine (placeholder until written). */
#include <errno.h>
#include "shca.h"

int shca_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask) { return -EOPNOTSUPP; }
void shca_qp_flush(struct shca_qp *qp) { }
SHCA_DEFAULT_VERSION(ibv_modify_qp)
int shca_latest_ibv_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *a, int m) { return shca_ret_errno(shca_modify_qp(qp, a, m)); }
