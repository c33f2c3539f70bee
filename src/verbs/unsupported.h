/* SPDX-License-Identifier: MIT */
/*
 * The verbs softhca does not implement: each answers EOPNOTSUPP, as
 * rdma-core's dummy ops do, and ibv_query_device reports the matching
 * capability as absent.
 */
#ifndef SOFTHCA_VERBS_UNSUPPORTED_H
#define SOFTHCA_VERBS_UNSUPPORTED_H

#include <infiniband/verbs.h>

/* Point every verbs_context and ibv_context_ops slot at a function. */
void shca_unsupported_fill(struct verbs_context *vctx);

#endif
