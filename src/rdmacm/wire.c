// SPDX-License-Identifier: MIT
/*
 * Packing and checking the CM messages of wire.h.  The only file that
 * knows their byte order and layout.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <string.h>

#include <infiniband/verbs.h>

#include "wire.h"

static const struct {
	const char *name;
	size_t size;
} msgs[CM_MSG_NUM] = {
	[CM_MSG_REQ] = { "REQ", sizeof(struct cm_wire_req) },
	[CM_MSG_REP] = { "REP", sizeof(struct cm_wire_rep) },
	[CM_MSG_RTU] = { "RTU", sizeof(struct cm_wire_hdr) },
	[CM_MSG_REJ] = { "REJ", sizeof(struct cm_wire_rej) },
	[CM_MSG_DREQ] = { "DREQ", sizeof(struct cm_wire_hdr) },
	[CM_MSG_DREP] = { "DREP", sizeof(struct cm_wire_hdr) },
	[CM_MSG_SIDR_REQ] = { "SIDR_REQ", sizeof(struct cm_wire_sidr_req) },
	[CM_MSG_SIDR_REP] = { "SIDR_REP", sizeof(struct cm_wire_sidr_rep) },
};

size_t cm_wire_size(uint8_t type)
{
	return type && type < CM_MSG_NUM ? msgs[type].size : 0;
}

const char *cm_msg_name(uint8_t type)
{
	return type && type < CM_MSG_NUM ? msgs[type].name : "?";
}

static void hdr_pack(struct cm_wire_hdr *h, uint8_t type)
{
	h->magic = htonl(CM_WIRE_MAGIC);
	h->version = CM_WIRE_VERSION;
	h->type = type;
	h->length = htons((uint16_t)msgs[type].size);
}

void cm_wire_empty(struct cm_wire_hdr *w, uint8_t type)
{
	hdr_pack(w, type);
}

/*
 * On a stream: once a header is in, how long the whole message is.
 * -EAGAIN while the header is incomplete, -EPROTO for a header that no
 * message of ours starts with.
 */
int cm_wire_peek_length(const void *buf, size_t len, size_t *msg_len)
{
	struct cm_wire_hdr h;

	if (len < sizeof(h))
		return -EAGAIN;
	memcpy(&h, buf, sizeof(h));
	if (ntohl(h.magic) != CM_WIRE_MAGIC || h.version != CM_WIRE_VERSION ||
	    !cm_wire_size(h.type) || ntohs(h.length) != cm_wire_size(h.type))
		return -EPROTO;
	*msg_len = ntohs(h.length);
	return 0;
}

/* A whole message: header, known type, exact length.  0 or -EPROTO. */
int cm_wire_check(const void *buf, size_t len, uint8_t *type)
{
	struct cm_wire_hdr h;
	size_t n;

	if (cm_wire_peek_length(buf, len, &n) || n != len)
		return -EPROTO;
	memcpy(&h, buf, sizeof(h));
	*type = h.type;
	return 0;
}

void cm_req_pack(struct cm_wire_req *w, const struct cm_req *r)
{
	memset(w, 0, sizeof(*w));
	hdr_pack(&w->hdr, CM_MSG_REQ);
	w->qpn = htonl(r->qpn & 0xffffff);
	w->psn = htonl(r->psn & 0xffffff);
	w->ece_vendor_id = htonl(r->ece_vendor_id);
	w->ece_options = htonl(r->ece_options);
	w->pkey = htons(r->pkey);
	w->qp_type = r->qp_type;
	w->responder_resources = r->responder_resources;
	w->initiator_depth = r->initiator_depth;
	w->retry_count = r->retry_count & 7;
	w->rnr_retry_count = r->rnr_retry_count & 7;
	w->flow_control = !!r->flow_control;
	w->srq = !!r->srq;
	w->path_mtu = r->path_mtu;
	w->local_ack_timeout = r->local_ack_timeout & 31;
	memcpy(w->private_data, r->private_data, sizeof(w->private_data));
}

int cm_req_unpack(const void *buf, struct cm_req *r)
{
	struct cm_wire_req w;

	memcpy(&w, buf, sizeof(w));
	r->qpn = ntohl(w.qpn);
	r->psn = ntohl(w.psn);
	r->ece_vendor_id = ntohl(w.ece_vendor_id);
	r->ece_options = ntohl(w.ece_options);
	r->pkey = ntohs(w.pkey);
	r->qp_type = w.qp_type;
	r->responder_resources = w.responder_resources;
	r->initiator_depth = w.initiator_depth;
	r->retry_count = w.retry_count;
	r->rnr_retry_count = w.rnr_retry_count;
	r->flow_control = w.flow_control;
	r->srq = w.srq;
	r->path_mtu = w.path_mtu;
	r->local_ack_timeout = w.local_ack_timeout;
	memcpy(r->private_data, w.private_data, sizeof(r->private_data));
	if (r->qpn > 0xffffff || r->psn > 0xffffff || r->retry_count > 7 ||
	    r->rnr_retry_count > 7 || r->flow_control > 1 || r->srq > 1 ||
	    r->local_ack_timeout > 31 ||
	    r->path_mtu < IBV_MTU_256 || r->path_mtu > IBV_MTU_4096 ||
	    (r->qp_type != IBV_QPT_RC && r->qp_type != IBV_QPT_UC &&
	     r->qp_type != IBV_QPT_XRC_SEND))
		return -EPROTO;
	return 0;
}

void cm_rep_pack(struct cm_wire_rep *w, const struct cm_rep *r)
{
	memset(w, 0, sizeof(*w));
	hdr_pack(&w->hdr, CM_MSG_REP);
	w->qpn = htonl(r->qpn & 0xffffff);
	w->psn = htonl(r->psn & 0xffffff);
	w->ece_vendor_id = htonl(r->ece_vendor_id);
	w->ece_options = htonl(r->ece_options);
	w->responder_resources = r->responder_resources;
	w->initiator_depth = r->initiator_depth;
	w->rnr_retry_count = r->rnr_retry_count & 7;
	w->flow_control = !!r->flow_control;
	w->srq = !!r->srq;
	memcpy(w->private_data, r->private_data, sizeof(w->private_data));
}

int cm_rep_unpack(const void *buf, struct cm_rep *r)
{
	struct cm_wire_rep w;

	memcpy(&w, buf, sizeof(w));
	r->qpn = ntohl(w.qpn);
	r->psn = ntohl(w.psn);
	r->ece_vendor_id = ntohl(w.ece_vendor_id);
	r->ece_options = ntohl(w.ece_options);
	r->responder_resources = w.responder_resources;
	r->initiator_depth = w.initiator_depth;
	r->rnr_retry_count = w.rnr_retry_count;
	r->flow_control = w.flow_control;
	r->srq = w.srq;
	memcpy(r->private_data, w.private_data, sizeof(r->private_data));
	if (r->qpn > 0xffffff || r->psn > 0xffffff || r->rnr_retry_count > 7 ||
	    r->flow_control > 1 || r->srq > 1)
		return -EPROTO;
	return 0;
}

void cm_rej_pack(struct cm_wire_rej *w, const struct cm_rej *r)
{
	memset(w, 0, sizeof(*w));
	hdr_pack(&w->hdr, CM_MSG_REJ);
	w->reason = htons(r->reason);
	w->msg_rejected = r->msg_rejected;
	memcpy(w->private_data, r->private_data, sizeof(w->private_data));
}

int cm_rej_unpack(const void *buf, struct cm_rej *r)
{
	struct cm_wire_rej w;

	memcpy(&w, buf, sizeof(w));
	r->reason = ntohs(w.reason);
	r->msg_rejected = w.msg_rejected;
	memcpy(r->private_data, w.private_data, sizeof(r->private_data));
	return 0;
}

void cm_sidr_req_pack(struct cm_wire_sidr_req *w, const struct cm_sidr_req *r)
{
	memset(w, 0, sizeof(*w));
	hdr_pack(&w->hdr, CM_MSG_SIDR_REQ);
	w->request_id = htonl(r->request_id);
	w->pkey = htons(r->pkey);
	memcpy(w->private_data, r->private_data, sizeof(w->private_data));
}

int cm_sidr_req_unpack(const void *buf, struct cm_sidr_req *r)
{
	struct cm_wire_sidr_req w;

	memcpy(&w, buf, sizeof(w));
	r->request_id = ntohl(w.request_id);
	r->pkey = ntohs(w.pkey);
	memcpy(r->private_data, w.private_data, sizeof(r->private_data));
	return 0;
}

void cm_sidr_rep_pack(struct cm_wire_sidr_rep *w, const struct cm_sidr_rep *r)
{
	memset(w, 0, sizeof(*w));
	hdr_pack(&w->hdr, CM_MSG_SIDR_REP);
	w->request_id = htonl(r->request_id);
	w->qpn = htonl(r->qpn & 0xffffff);
	w->qkey = htonl(r->qkey);
	w->status = r->status;
	memcpy(w->private_data, r->private_data, sizeof(w->private_data));
}

int cm_sidr_rep_unpack(const void *buf, struct cm_sidr_rep *r)
{
	struct cm_wire_sidr_rep w;

	memcpy(&w, buf, sizeof(w));
	r->request_id = ntohl(w.request_id);
	r->qpn = ntohl(w.qpn);
	r->qkey = ntohl(w.qkey);
	r->status = w.status;
	memcpy(r->private_data, w.private_data, sizeof(r->private_data));
	if (r->qpn > 0xffffff)
		return -EPROTO;
	return 0;
}
