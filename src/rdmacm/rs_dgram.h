/* SPDX-License-Identifier: MIT */
/*
 * Datagram rsockets: the objects shared by rs_dgram.c (the socket, its
 * sends, receives and completions) and rs_ud.c (UD QPs, address handles,
 * destinations, the first contact over UDP).  Their functions are in the
 * table of contents, rsocket.h.
 */
#ifndef SOFTHCA_RS_DGRAM_H
#define SOFTHCA_RS_DGRAM_H

#include "rsocket.h"

#define DS_WR_RECV		(1ull << 63)
#define DS_GRH_LEN		40
#define DS_UDP_BATCH		64
#define DS_RESOLVE_MS		2000

struct ds_qp {
	struct rs_src src;		/* RS_SRC_DSQP */
	struct ds_qp *next;
	struct rdma_cm_id *id;
	struct sockaddr_storage addr;	/* our address on its interface */
	struct ds_header hdr;		/* in front of what it sends */
	struct ibv_comp_channel *cq_chan;
	struct ibv_cq *cq;
	bool cq_armed;
	struct ibv_mr *smr, *rmr;
	uint8_t *rbuf;			/* rbuf_size, then the GRH slot */
	struct ibv_ah *self_ah;
	uint32_t max_msg;		/* ds_header + payload */
};

struct ds_dest {
	struct ds_dest *next;
	struct sockaddr_storage addr;
	struct ds_qp *qp;		/* the QP that reaches it */
	struct ibv_ah *ah;		/* NULL until its QPN is known */
	uint32_t qpn;
};

struct ds_rmsg {
	struct ds_qp *qp;
	uint32_t offset, length;	/* length: ds_header + payload */
};

#endif
