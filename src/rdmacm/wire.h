/* SPDX-License-Identifier: MIT */
/*
 * The CM messages softhca's librdmacm exchanges, and their wire form.
 *
 * They are the IB CM's (IBA chapter 12) reduced to what the RDMA CM
 * uses, with the IB CM's private data sizes: REQ, REP, RTU, REJ, DREQ and
 * DREP travel on the TCP stream of a connection, SIDR REQ and SIDR REP in
 * UDP datagrams.  Every field is big endian.  Nobody outside wire.c reads
 * or writes a wire struct: the rest of the library packs and unpacks the
 * host structs below, and every received message is checked (magic,
 * version, type, exact length, field ranges) before it is used.
 *
 * Private data: the RDMA CM puts its own 36-byte header in front of the
 * consumer's data in a REQ and a SIDR REQ, so a consumer has 92 - 36 = 56
 * bytes in a REQ and 216 - 36 = 180 in a SIDR REQ; 196 in a REP, 148 in a
 * REJ, 136 in a SIDR REP.  As with the IB CM, the receiver always gets
 * the whole field (zero padded), and the events report its full size.
 */
#ifndef SOFTHCA_CM_WIRE_H
#define SOFTHCA_CM_WIRE_H

#include <stddef.h>
#include <stdint.h>

#define CM_WIRE_MAGIC		0x53434d31u	/* "SCM1" */
#define CM_WIRE_VERSION		1

enum cm_msg_type {
	CM_MSG_REQ = 1,
	CM_MSG_REP,
	CM_MSG_RTU,
	CM_MSG_REJ,
	CM_MSG_DREQ,
	CM_MSG_DREP,
	CM_MSG_SIDR_REQ,
	CM_MSG_SIDR_REP,
	CM_MSG_NUM,
};

#define CM_REQ_PDATA		56
#define CM_REP_PDATA		196
#define CM_REJ_PDATA		148
#define CM_SIDR_REQ_PDATA	180
#define CM_SIDR_REP_PDATA	136

struct cm_wire_hdr {
	uint32_t magic;
	uint8_t version;
	uint8_t type;
	uint16_t length;		/* the whole message */
};

struct cm_wire_req {
	struct cm_wire_hdr hdr;
	uint32_t qpn;
	uint32_t psn;
	uint32_t ece_vendor_id;
	uint32_t ece_options;
	uint16_t pkey;
	uint8_t qp_type;
	uint8_t responder_resources;
	uint8_t initiator_depth;
	uint8_t retry_count;
	uint8_t rnr_retry_count;
	uint8_t flow_control;
	uint8_t srq;
	uint8_t path_mtu;
	uint8_t local_ack_timeout;
	uint8_t reserved;
	uint8_t private_data[CM_REQ_PDATA];
};

struct cm_wire_rep {
	struct cm_wire_hdr hdr;
	uint32_t qpn;
	uint32_t psn;
	uint32_t ece_vendor_id;
	uint32_t ece_options;
	uint8_t responder_resources;
	uint8_t initiator_depth;
	uint8_t rnr_retry_count;
	uint8_t flow_control;
	uint8_t srq;
	uint8_t reserved[3];
	uint8_t private_data[CM_REP_PDATA];
};

struct cm_wire_rej {
	struct cm_wire_hdr hdr;
	uint16_t reason;
	uint8_t msg_rejected;
	uint8_t reserved;
	uint8_t private_data[CM_REJ_PDATA];
};

struct cm_wire_sidr_req {
	struct cm_wire_hdr hdr;
	uint32_t request_id;
	uint16_t pkey;
	uint8_t reserved[2];
	uint8_t private_data[CM_SIDR_REQ_PDATA];
};

struct cm_wire_sidr_rep {
	struct cm_wire_hdr hdr;
	uint32_t request_id;
	uint32_t qpn;
	uint32_t qkey;
	uint8_t status;
	uint8_t reserved[3];
	uint8_t private_data[CM_SIDR_REP_PDATA];
};

_Static_assert(sizeof(struct cm_wire_hdr) == 8, "CM header");
_Static_assert(sizeof(struct cm_wire_req) == 92, "REQ");
_Static_assert(sizeof(struct cm_wire_rep) == 228, "REP");
_Static_assert(sizeof(struct cm_wire_rej) == 160, "REJ");
_Static_assert(sizeof(struct cm_wire_sidr_req) == 196, "SIDR REQ");
_Static_assert(sizeof(struct cm_wire_sidr_rep) == 160, "SIDR REP");

#define CM_MSG_MAX	sizeof(struct cm_wire_rep)

/* Host forms.  PSNs and QPNs are 24-bit values. */
struct cm_req {
	uint32_t qpn, psn;
	uint32_t ece_vendor_id, ece_options;
	uint16_t pkey;
	uint8_t qp_type;		/* IBV_QPT_RC, IBV_QPT_UC, or
					 * IBV_QPT_XRC_SEND (the IB CM's
					 * XRC: an initiator's REQ) */
	uint8_t responder_resources, initiator_depth;
	uint8_t retry_count, rnr_retry_count;	/* 0..7 */
	uint8_t flow_control, srq;		/* 0 or 1 */
	uint8_t path_mtu;			/* enum ibv_mtu */
	uint8_t local_ack_timeout;		/* 0..31 */
	uint8_t private_data[CM_REQ_PDATA];
};

struct cm_rep {
	uint32_t qpn, psn;
	uint32_t ece_vendor_id, ece_options;
	uint8_t responder_resources, initiator_depth;
	uint8_t rnr_retry_count, flow_control, srq;
	uint8_t private_data[CM_REP_PDATA];
};

struct cm_rej {
	uint16_t reason;
	uint8_t msg_rejected;			/* CM_MSG_REQ or _REP */
	uint8_t private_data[CM_REJ_PDATA];
};

struct cm_sidr_req {
	uint32_t request_id;
	uint16_t pkey;
	uint8_t private_data[CM_SIDR_REQ_PDATA];
};

struct cm_sidr_rep {
	uint32_t request_id;
	uint32_t qpn, qkey;
	uint8_t status;
	uint8_t private_data[CM_SIDR_REP_PDATA];
};

/* wire.c */
size_t cm_wire_size(uint8_t type);
const char *cm_msg_name(uint8_t type);
int cm_wire_check(const void *buf, size_t len, uint8_t *type);
int cm_wire_peek_length(const void *buf, size_t len, size_t *msg_len);
void cm_wire_empty(struct cm_wire_hdr *w, uint8_t type);
void cm_req_pack(struct cm_wire_req *w, const struct cm_req *r);
int cm_req_unpack(const void *buf, struct cm_req *r);
void cm_rep_pack(struct cm_wire_rep *w, const struct cm_rep *r);
int cm_rep_unpack(const void *buf, struct cm_rep *r);
void cm_rej_pack(struct cm_wire_rej *w, const struct cm_rej *r);
int cm_rej_unpack(const void *buf, struct cm_rej *r);
void cm_sidr_req_pack(struct cm_wire_sidr_req *w, const struct cm_sidr_req *r);
int cm_sidr_req_unpack(const void *buf, struct cm_sidr_req *r);
void cm_sidr_rep_pack(struct cm_wire_sidr_rep *w, const struct cm_sidr_rep *r);
int cm_sidr_rep_unpack(const void *buf, struct cm_sidr_rep *r);

#endif
