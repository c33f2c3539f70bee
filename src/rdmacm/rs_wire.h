/* SPDX-License-Identifier: MIT */
/*
 * The rsocket protocol on the wire, as rdma-core's librdmacm/rsocket.c
 * speaks it (protocol version 1); docs/rsockets.md describes it in words.
 * Everything that crosses the wire is laid out here, with its size pinned,
 * and read or built through these helpers only.
 *
 * Stream (RC) rsockets move every message as an RDMA WRITE WITH IMMEDIATE
 * (or a plain RDMA WRITE that the receiver never sees); the 32-bit
 * immediate says what the message is:
 *
 *   bits 31:29  op (RS_OP_*)
 *   bits 28:0   DATA: bytes written;  SGL, CTRL: credits or control code;
 *               IOMAP_SGL: index of the iomap entry written
 *
 * Datagram (UD) rsockets prefix every message with a ds_header giving the
 * sender's socket address; first contact goes through the socket's UDP
 * port with a ds_udp_header that names the sender's QP.
 */
#ifndef SOFTHCA_RS_WIRE_H
#define SOFTHCA_RS_WIRE_H

#include <endian.h>
#include <stddef.h>
#include <stdint.h>

#define RS_PROTO_VERSION	1

/* ops in the immediate's top three bits; 1, 3 and 5 are reserved (data
 * with "more" and "direct receive" flags that no implementation sends) */
enum rs_op {
	RS_OP_DATA		= 0,
	RS_OP_RSVD_DATA_MORE	= 1,
	RS_OP_WRITE		= 2,	/* riowrite: never carried in an imm */
	RS_OP_RSVD_DRA_MORE	= 3,
	RS_OP_SGL		= 4,	/* credits, maybe a receive buffer */
	RS_OP_RSVD		= 5,
	RS_OP_IOMAP_SGL		= 6,	/* an iomap entry was written */
	RS_OP_CTRL		= 7,
};

/* RS_OP_CTRL codes */
enum rs_ctrl {
	RS_CTRL_DISCONNECT	= 0,
	RS_CTRL_KEEPALIVE	= 1,	/* a zero-byte RDMA WRITE, no imm */
	RS_CTRL_SHUTDOWN	= 2,
};

#define RS_MSG_DATA_MASK	0x1fffffffu

static inline uint32_t rs_msg(enum rs_op op, uint32_t data)
{
	return (uint32_t)op << 29 | (data & RS_MSG_DATA_MASK);
}

static inline enum rs_op rs_msg_op(uint32_t msg)
{
	return (enum rs_op)(msg >> 29);
}

static inline uint32_t rs_msg_data(uint32_t msg)
{
	return msg & RS_MSG_DATA_MASK;
}

/*
 * A buffer the peer may write: in the connection data in big-endian
 * order; written by RDMA into the peer's SGL or iomap table in the
 * writer's own byte order (RS_CONN_FLAG_NET tells a big-endian host, and
 * a reader of the other order swaps).
 */
struct rs_sge {
	uint64_t addr;
	uint32_t key;
	uint32_t length;
};
_Static_assert(sizeof(struct rs_sge) == 16, "rs_sge is 16 bytes");

struct rs_iomap {
	uint64_t offset;
	struct rs_sge sge;
};
_Static_assert(sizeof(struct rs_iomap) == 24, "rs_iomap is 24 bytes");

#define RS_CONN_FLAG_NET	(1 << 0)	/* sender is big-endian */
#define RS_CONN_FLAG_IOMAP	(1 << 1)	/* target_iomap_size valid */

/* The private data of the CM REQ and REP (AF_INET/AF_INET6 ids: no IB
 * connect header in front).  Multi-byte fields big-endian. */
struct rs_conn_data {
	uint8_t version;
	uint8_t flags;
	uint16_t credits;		/* be: receive queue size */
	uint8_t reserved[3];
	uint8_t target_iomap_size;	/* rs_value_to_scale(n, 8) */
	struct rs_sge target_sgl;	/* be: RS_SGL_SIZE entries the peer
					 * writes its buffers into, followed
					 * by the iomap table */
	struct rs_sge data_buf;		/* be: first half of the receive
					 * buffer, the peer's first target */
};
_Static_assert(sizeof(struct rs_conn_data) == 40, "rs_conn_data is 40 bytes");
_Static_assert(offsetof(struct rs_conn_data, target_sgl) == 8 &&
	       offsetof(struct rs_conn_data, data_buf) == 24,
	       "rs_conn_data layout");

/* rdma-core's 8-bit scale for table sizes: exact up to 128, then a count
 * of 256s (the iomap table size travels as one byte) */
static inline int rs_value_to_scale(int value, int bits)
{
	return value <= (1 << (bits - 1)) ?
	       value : (1 << (bits - 1)) | (value >> bits);
}

static inline int rs_scale_to_value(int value, int bits)
{
	return value <= (1 << (bits - 1)) ?
	       value : (value & ~(1 << (bits - 1))) << bits;
}

/* ---------------------------------------------------------------- */
/* Datagrams                                                          */

/* In front of every UD message: the sending socket's address. */
struct ds_header {
	uint8_t version;		/* 4 or 6 */
	uint8_t length;			/* DS_IPV4_HDR_LEN or DS_IPV6_HDR_LEN */
	uint16_t port;			/* be */
	union {
		uint32_t ipv4;		/* be */
		struct {
			uint32_t flowinfo;	/* be */
			uint8_t addr[16];
		} ipv6;
	} addr;
};
_Static_assert(sizeof(struct ds_header) == 24 &&
	       offsetof(struct ds_header, addr) == 4, "ds_header layout");

#define DS_IPV4_HDR_LEN		8
#define DS_IPV6_HDR_LEN		24

/* First contact, over the socket's UDP port: who sends, from which QP. */
#define DS_UDP_TAG		0x55555555u

struct ds_udp_header {
	uint32_t tag;			/* be: DS_UDP_TAG */
	uint8_t version;		/* 4 or 6: the sender's family */
	uint8_t op;			/* RS_OP_DATA (payload follows), or
					 * RS_OP_CTRL (an answer: my QPN) */
	uint8_t length;			/* DS_UDP_IPV4/6_HDR_LEN */
	uint8_t reserved;
	uint32_t qpn;			/* be: the sender's UD QPN, 24 bits */
	union {
		uint32_t ipv4;		/* be */
		uint8_t ipv6[16];
	} addr;
};
_Static_assert(sizeof(struct ds_udp_header) == 28 &&
	       offsetof(struct ds_udp_header, qpn) == 8 &&
	       offsetof(struct ds_udp_header, addr) == 12,
	       "ds_udp_header layout");

#define DS_UDP_IPV4_HDR_LEN	16
#define DS_UDP_IPV6_HDR_LEN	28

#endif
