/* SPDX-License-Identifier: MIT */
/*
 * XRC setup shared by tests (docs/xrc.md): a domain through a file or a
 * private one, an XRC QP in INIT, ibv_open_qp by number.  Each helper
 * fails the test on error.
 */
#ifndef SOFTHCA_TEST_XRC_EP_H
#define SOFTHCA_TEST_XRC_EP_H

#include <stddef.h>
#include <stdint.h>
#include <infiniband/verbs.h>

#include "ep.h"

/* A new empty file under /tmp, for processes to share a domain by. */
void xrc_temp_file(char *path, size_t len);
/* The domain of the file at path (O_CREAT), or a private one. */
struct ibv_xrcd *xrc_domain_file(struct ibv_context *ctx, const char *path);
struct ibv_xrcd *xrc_domain_private(struct ibv_context *ctx);
/* An XRC QP in INIT: XRC_RECV of domain x, or XRC_SEND of e's PD. */
struct ibv_qp *xrc_qp_init(struct ep *e, enum ibv_qp_type type,
			   struct ibv_xrcd *x);
/* ibv_open_qp of number qpn in domain x (NULL and errno as it sets). */
struct ibv_qp *xrc_open(struct ibv_context *ctx, struct ibv_xrcd *x,
			uint32_t qpn, enum ibv_qp_type type);

#endif
