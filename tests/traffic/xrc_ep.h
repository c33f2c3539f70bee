/* SPDX-License-Identifier: MIT */
/*
 * XRC setup shared by tests (docs/xrc.md): a domain through a file or a
 * private one, an XRC SRQ and its receives, an XRC QP in INIT and its
 * move to RTR (and RTS), ibv_open_qp by number.  Each helper but
 * xrc_open fails the test on error.
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
/* An XRC SRQ of domain x in e's PD, completing on cq, of max_wr
 * receives of one SGE. */
struct ibv_srq *xrc_srq(struct ep *e, struct ibv_xrcd *x, struct ibv_cq *cq,
			uint32_t max_wr);
/* Post one receive of len bytes at e->buf + off to the SRQ. */
void xrc_srq_post(struct ep *e, struct ibv_srq *s, uint64_t wr_id,
		  uint64_t off, uint32_t len);

/* The requester's RTS attributes of an XRC_SEND QP. */
struct xrc_retry {
	uint8_t timeout;
	uint8_t retry_cnt;
	uint8_t rnr_retry;
};

/*
 * RTR toward QP dest at dgid (path MTU: e's, 1024 at most), then RTS
 * for an XRC_SEND QP with r's attributes (NULL: timeout 14, retry_cnt 7,
 * rnr_retry 7).  An XRC_RECV QP stops at RTR; for an opened one it is
 * the opener's modify, carried out by its creator.
 */
void xrc_connect(struct ep *e, struct ibv_qp *qp, uint32_t dest,
		 const union ibv_gid *dgid, const struct xrc_retry *r);
/* ibv_open_qp of number qpn in domain x (NULL and errno as it sets). */
struct ibv_qp *xrc_open(struct ibv_context *ctx, struct ibv_xrcd *x,
			uint32_t qpn, enum ibv_qp_type type);

#endif
