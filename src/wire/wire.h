/* SPDX-License-Identifier: MIT */
/*
 * The InfiniBand transport headers in their RoCE v2 wire form, and the one
 * codec that builds and parses them (IBA vol. 1 ch. 9; RoCE v2: Annex A17).
 *
 * This header is the only place where byte order, masks and offsets of
 * wire headers live.  Everybody else goes through the accessors below or,
 * better, through struct shca_wire_msg with shca_wire_build() and
 * shca_wire_parse().
 *
 * A packet ("IB packet" below) is what follows the UDP header on a RoCE v2
 * wire, minus the ICRC:
 *
 *	BTH [XRCETH] [DETH] [FETH] [RETH] [AtomicETH] [AETH] [AtomicAckETH]
 *	[ImmDt] [IETH]
 *	payload pad
 *
 * in that order, the extension headers each opcode carries given by the
 * opcode table.  Every header is a multiple of 4 bytes, the pad makes the
 * payload one, so a packet is too.  On softhca's TCP and UDP net path the
 * IB packet travels as it is (TCP and UDP have their own checksums); the
 * pcap writer and a genuine RoCE v2 transport add IP/UDP and the ICRC.
 *
 * Contents:
 *	1. sizes and limits
 *	2. transport headers: structs and accessors
 *	3. the opcode table
 *	4. AETH syndromes, RNR timer
 *	5. PSN arithmetic
 *	6. messages: build and parse (wire.c)
 *	7. RoCE v2 encapsulation: Ethernet, IPv4/IPv6, UDP, ICRC (wire.c)
 */
#ifndef SOFTHCA_WIRE_H
#define SOFTHCA_WIRE_H

#include <endian.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>

/* 1. Sizes and limits --------------------------------------------------- */

#define SHCA_BTH_LEN		12
#define SHCA_DETH_LEN		8
#define SHCA_RETH_LEN		16
#define SHCA_ATMETH_LEN		28
#define SHCA_AETH_LEN		4
#define SHCA_ATMACK_LEN		8
#define SHCA_IMMDT_LEN		4
#define SHCA_IETH_LEN		4
#define SHCA_FETH_LEN		4
#define SHCA_XRCETH_LEN		4
#define SHCA_ICRC_LEN		4

/* The longest header chain of any opcode (BTH + XRCETH + AtomicETH). */
#define SHCA_WIRE_MAX_HDR \
	(SHCA_BTH_LEN + SHCA_XRCETH_LEN + SHCA_ATMETH_LEN)
/* Path MTUs: 256, 512, 1024, 2048, 4096. */
#define SHCA_WIRE_MIN_PMTU	256
#define SHCA_WIRE_MAX_PMTU	4096
/* The largest valid IB packet (no ICRC): headers, payload, no pad. */
#define SHCA_WIRE_MAX_PKT	(SHCA_WIRE_MAX_HDR + SHCA_WIRE_MAX_PMTU)

#define SHCA_QPN_MASK		0x00ffffffu
#define SHCA_PSN_MASK		0x00ffffffu
#define SHCA_MSN_MASK		0x00ffffffu
/* DestQP of a UD multicast packet. */
#define SHCA_QPN_MULTICAST	0x00ffffffu
/* The default P_Key, full membership. */
#define SHCA_PKEY_DEFAULT	0xffff
/* Transport header version this codec speaks (BTH TVer). */
#define SHCA_BTH_TVER		0

/* 2. Transport headers -------------------------------------------------- */

/*
 * All multi-byte fields are big-endian on the wire.  The structs are
 * packed, so a pointer to any byte of a received buffer may be cast to
 * them; the accessors do the byte order and the bit fields.
 */

/* Base Transport Header (IBA 9.2) */
struct shca_bth {
	uint8_t opcode;
	uint8_t flags;		/* SE:1 M:1 PadCnt:2 TVer:4 */
	uint16_t pkey;
	uint32_t qpn;		/* FECN:1 BECN:1 Resv6:6 DestQP:24 */
	uint32_t apsn;		/* AckReq:1 Resv7:7 PSN:24 */
} __attribute__((packed));
_Static_assert(sizeof(struct shca_bth) == SHCA_BTH_LEN, "BTH is 12 bytes");

#define SHCA_BTH_SE		0x80
#define SHCA_BTH_MIG		0x40
#define SHCA_BTH_PAD_MASK	0x30
#define SHCA_BTH_PAD_SHIFT	4
#define SHCA_BTH_TVER_MASK	0x0f
#define SHCA_BTH_FECN		0x80000000u
#define SHCA_BTH_BECN		0x40000000u
#define SHCA_BTH_RESV6_MASK	0x3f000000u
#define SHCA_BTH_ACKREQ		0x80000000u
#define SHCA_BTH_RESV7_MASK	0x7f000000u

static inline uint8_t shca_bth_opcode(const struct shca_bth *bth)
{
	return bth->opcode;
}

static inline void shca_bth_set_opcode(struct shca_bth *bth, uint8_t opcode)
{
	bth->opcode = opcode;
}

static inline bool shca_bth_se(const struct shca_bth *bth)
{
	return bth->flags & SHCA_BTH_SE;
}

static inline void shca_bth_set_se(struct shca_bth *bth, bool se)
{
	bth->flags = (uint8_t)((bth->flags & ~SHCA_BTH_SE) |
			       (se ? SHCA_BTH_SE : 0));
}

static inline bool shca_bth_mig(const struct shca_bth *bth)
{
	return bth->flags & SHCA_BTH_MIG;
}

static inline void shca_bth_set_mig(struct shca_bth *bth, bool mig)
{
	bth->flags = (uint8_t)((bth->flags & ~SHCA_BTH_MIG) |
			       (mig ? SHCA_BTH_MIG : 0));
}

static inline unsigned int shca_bth_pad(const struct shca_bth *bth)
{
	return (bth->flags & SHCA_BTH_PAD_MASK) >> SHCA_BTH_PAD_SHIFT;
}

static inline void shca_bth_set_pad(struct shca_bth *bth, unsigned int pad)
{
	bth->flags = (uint8_t)((bth->flags & ~SHCA_BTH_PAD_MASK) |
			       ((pad << SHCA_BTH_PAD_SHIFT) &
				SHCA_BTH_PAD_MASK));
}

static inline unsigned int shca_bth_tver(const struct shca_bth *bth)
{
	return bth->flags & SHCA_BTH_TVER_MASK;
}

static inline void shca_bth_set_tver(struct shca_bth *bth, unsigned int tver)
{
	bth->flags = (uint8_t)((bth->flags & ~SHCA_BTH_TVER_MASK) |
			       (tver & SHCA_BTH_TVER_MASK));
}

static inline uint16_t shca_bth_pkey(const struct shca_bth *bth)
{
	return be16toh(bth->pkey);
}

static inline void shca_bth_set_pkey(struct shca_bth *bth, uint16_t pkey)
{
	bth->pkey = htobe16(pkey);
}

static inline bool shca_bth_fecn(const struct shca_bth *bth)
{
	return be32toh(bth->qpn) & SHCA_BTH_FECN;
}

static inline void shca_bth_set_fecn(struct shca_bth *bth, bool fecn)
{
	uint32_t v = be32toh(bth->qpn) & ~SHCA_BTH_FECN;

	bth->qpn = htobe32(v | (fecn ? SHCA_BTH_FECN : 0));
}

static inline bool shca_bth_becn(const struct shca_bth *bth)
{
	return be32toh(bth->qpn) & SHCA_BTH_BECN;
}

static inline void shca_bth_set_becn(struct shca_bth *bth, bool becn)
{
	uint32_t v = be32toh(bth->qpn) & ~SHCA_BTH_BECN;

	bth->qpn = htobe32(v | (becn ? SHCA_BTH_BECN : 0));
}

static inline uint32_t shca_bth_dqpn(const struct shca_bth *bth)
{
	return be32toh(bth->qpn) & SHCA_QPN_MASK;
}

static inline void shca_bth_set_dqpn(struct shca_bth *bth, uint32_t qpn)
{
	uint32_t v = be32toh(bth->qpn) & ~SHCA_QPN_MASK;

	bth->qpn = htobe32(v | (qpn & SHCA_QPN_MASK));
}

static inline bool shca_bth_ackreq(const struct shca_bth *bth)
{
	return be32toh(bth->apsn) & SHCA_BTH_ACKREQ;
}

static inline void shca_bth_set_ackreq(struct shca_bth *bth, bool ackreq)
{
	uint32_t v = be32toh(bth->apsn) & ~SHCA_BTH_ACKREQ;

	bth->apsn = htobe32(v | (ackreq ? SHCA_BTH_ACKREQ : 0));
}

static inline uint32_t shca_bth_psn(const struct shca_bth *bth)
{
	return be32toh(bth->apsn) & SHCA_PSN_MASK;
}

static inline void shca_bth_set_psn(struct shca_bth *bth, uint32_t psn)
{
	uint32_t v = be32toh(bth->apsn) & ~SHCA_PSN_MASK;

	bth->apsn = htobe32(v | (psn & SHCA_PSN_MASK));
}

/* The ICRC covers the BTH with FECN, BECN and Resv6 (once Resv8a) as
 * ones: the bits a switch may change on the way. */
static inline void shca_bth_mask_for_icrc(struct shca_bth *bth)
{
	bth->qpn |= htobe32(SHCA_BTH_FECN | SHCA_BTH_BECN |
			    SHCA_BTH_RESV6_MASK);
}

/* Datagram Extended Transport Header (IBA 9.3) */
struct shca_deth {
	uint32_t qkey;
	uint32_t sqpn;		/* Resv8:8 SrcQP:24 */
} __attribute__((packed));
_Static_assert(sizeof(struct shca_deth) == SHCA_DETH_LEN, "DETH is 8 bytes");

static inline uint32_t shca_deth_qkey(const struct shca_deth *deth)
{
	return be32toh(deth->qkey);
}

static inline void shca_deth_set_qkey(struct shca_deth *deth, uint32_t qkey)
{
	deth->qkey = htobe32(qkey);
}

static inline uint32_t shca_deth_sqpn(const struct shca_deth *deth)
{
	return be32toh(deth->sqpn) & SHCA_QPN_MASK;
}

static inline void shca_deth_set_sqpn(struct shca_deth *deth, uint32_t sqpn)
{
	deth->sqpn = htobe32(sqpn & SHCA_QPN_MASK);	/* Resv8 = 0 */
}

/* RDMA Extended Transport Header (IBA 9.3) */
struct shca_reth {
	uint64_t va;
	uint32_t rkey;
	uint32_t len;
} __attribute__((packed));
_Static_assert(sizeof(struct shca_reth) == SHCA_RETH_LEN, "RETH is 16 bytes");

static inline uint64_t shca_reth_va(const struct shca_reth *reth)
{
	return be64toh(reth->va);
}

static inline void shca_reth_set_va(struct shca_reth *reth, uint64_t va)
{
	reth->va = htobe64(va);
}

static inline uint32_t shca_reth_rkey(const struct shca_reth *reth)
{
	return be32toh(reth->rkey);
}

static inline void shca_reth_set_rkey(struct shca_reth *reth, uint32_t rkey)
{
	reth->rkey = htobe32(rkey);
}

static inline uint32_t shca_reth_len(const struct shca_reth *reth)
{
	return be32toh(reth->len);
}

static inline void shca_reth_set_len(struct shca_reth *reth, uint32_t len)
{
	reth->len = htobe32(len);
}

/* Atomic Extended Transport Header (IBA 9.3) */
struct shca_atmeth {
	uint64_t va;
	uint32_t rkey;
	uint64_t swap_add;	/* Swap (CmpSwap) or Add (FetchAdd) data */
	uint64_t compare;	/* Compare data (CmpSwap only) */
} __attribute__((packed));
_Static_assert(sizeof(struct shca_atmeth) == SHCA_ATMETH_LEN,
	       "AtomicETH is 28 bytes");

static inline uint64_t shca_atmeth_va(const struct shca_atmeth *a)
{
	return be64toh(a->va);
}

static inline void shca_atmeth_set_va(struct shca_atmeth *a, uint64_t va)
{
	a->va = htobe64(va);
}

static inline uint32_t shca_atmeth_rkey(const struct shca_atmeth *a)
{
	return be32toh(a->rkey);
}

static inline void shca_atmeth_set_rkey(struct shca_atmeth *a, uint32_t rkey)
{
	a->rkey = htobe32(rkey);
}

static inline uint64_t shca_atmeth_swap_add(const struct shca_atmeth *a)
{
	return be64toh(a->swap_add);
}

static inline void shca_atmeth_set_swap_add(struct shca_atmeth *a,
					    uint64_t v)
{
	a->swap_add = htobe64(v);
}

static inline uint64_t shca_atmeth_compare(const struct shca_atmeth *a)
{
	return be64toh(a->compare);
}

static inline void shca_atmeth_set_compare(struct shca_atmeth *a, uint64_t v)
{
	a->compare = htobe64(v);
}

/* ACK Extended Transport Header (IBA 9.3) */
struct shca_aeth {
	uint32_t smsn;		/* Syndrome:8 MSN:24 */
} __attribute__((packed));
_Static_assert(sizeof(struct shca_aeth) == SHCA_AETH_LEN, "AETH is 4 bytes");

#define SHCA_AETH_SYN_SHIFT	24

static inline uint8_t shca_aeth_syndrome(const struct shca_aeth *aeth)
{
	return (uint8_t)(be32toh(aeth->smsn) >> SHCA_AETH_SYN_SHIFT);
}

static inline void shca_aeth_set_syndrome(struct shca_aeth *aeth, uint8_t syn)
{
	uint32_t v = be32toh(aeth->smsn) & SHCA_MSN_MASK;

	aeth->smsn = htobe32(v | (uint32_t)syn << SHCA_AETH_SYN_SHIFT);
}

static inline uint32_t shca_aeth_msn(const struct shca_aeth *aeth)
{
	return be32toh(aeth->smsn) & SHCA_MSN_MASK;
}

static inline void shca_aeth_set_msn(struct shca_aeth *aeth, uint32_t msn)
{
	uint32_t v = be32toh(aeth->smsn) & ~SHCA_MSN_MASK;

	aeth->smsn = htobe32(v | (msn & SHCA_MSN_MASK));
}

/* Atomic Acknowledge Extended Transport Header (IBA 9.3) */
struct shca_atmack {
	uint64_t orig;
} __attribute__((packed));
_Static_assert(sizeof(struct shca_atmack) == SHCA_ATMACK_LEN,
	       "AtomicAckETH is 8 bytes");

static inline uint64_t shca_atmack_orig(const struct shca_atmack *a)
{
	return be64toh(a->orig);
}

static inline void shca_atmack_set_orig(struct shca_atmack *a, uint64_t v)
{
	a->orig = htobe64(v);
}

/*
 * Immediate Data Extended Transport Header (IBA 9.3).  Immediate data
 * is opaque: the four bytes the sender's ibv_send_wr.imm_data holds (a
 * __be32) are the four bytes on the wire and the four bytes the receiver's
 * ibv_wc.imm_data gets.  So the accessors copy, they do not swap.
 */
struct shca_immdt {
	uint32_t imm;
} __attribute__((packed));
_Static_assert(sizeof(struct shca_immdt) == SHCA_IMMDT_LEN,
	       "ImmDt is 4 bytes");

static inline uint32_t shca_immdt_imm_be(const struct shca_immdt *i)
{
	return i->imm;
}

static inline void shca_immdt_set_imm_be(struct shca_immdt *i, uint32_t imm)
{
	i->imm = imm;
}

/* Invalidate Extended Transport Header (IBA 9.3): the R_Key to
 * invalidate, host order as ibv_send_wr.invalidate_rkey. */
struct shca_ieth {
	uint32_t rkey;
} __attribute__((packed));
_Static_assert(sizeof(struct shca_ieth) == SHCA_IETH_LEN, "IETH is 4 bytes");

static inline uint32_t shca_ieth_rkey(const struct shca_ieth *ieth)
{
	return be32toh(ieth->rkey);
}

static inline void shca_ieth_set_rkey(struct shca_ieth *ieth, uint32_t rkey)
{
	ieth->rkey = htobe32(rkey);
}

/*
 * XRC Extended Transport Header (IBA 9.3): 8 reserved bits and the XRC
 * SRQ number (24 bits) the request is for.  Every XRC request carries it,
 * right after the BTH; XRC responses do not.
 */
struct shca_xrceth {
	uint32_t srqn;
} __attribute__((packed));
_Static_assert(sizeof(struct shca_xrceth) == SHCA_XRCETH_LEN,
	       "XRCETH is 4 bytes");

static inline uint32_t shca_xrceth_srqn(const struct shca_xrceth *x)
{
	/* the reserved bits are ignored when received (IBA 9.2) */
	return be32toh(x->srqn) & SHCA_QPN_MASK;
}

static inline void shca_xrceth_set_srqn(struct shca_xrceth *x, uint32_t n)
{
	x->srqn = htobe32(n & SHCA_QPN_MASK);
}

/*
 * FLUSH Extended Transport Header (IBA Annex A19, Memory Placement
 * Extensions): 26 reserved bits, the selectivity level (SEL, 2 bits:
 * 0 the range of the RETH, 1 the whole memory region) and the placement
 * type (PLT, 4 bits: 1 global visibility, 2 persistence).  It follows the
 * BTH, before the RETH.
 */
struct shca_feth {
	uint32_t bits;
} __attribute__((packed));
_Static_assert(sizeof(struct shca_feth) == SHCA_FETH_LEN, "FETH is 4 bytes");

#define SHCA_FETH_PLT_MASK	0x0000000fu
#define SHCA_FETH_SEL_MASK	0x00000030u
#define SHCA_FETH_SEL_SHIFT	4

#define SHCA_FLUSH_PLT_GLOBAL		1u
#define SHCA_FLUSH_PLT_PERSISTENT	2u
#define SHCA_FLUSH_SEL_RANGE		0u
#define SHCA_FLUSH_SEL_MR		1u

static inline uint8_t shca_feth_plt(const struct shca_feth *f)
{
	return (uint8_t)(be32toh(f->bits) & SHCA_FETH_PLT_MASK);
}

static inline uint8_t shca_feth_sel(const struct shca_feth *f)
{
	return (uint8_t)((be32toh(f->bits) & SHCA_FETH_SEL_MASK) >>
			 SHCA_FETH_SEL_SHIFT);
}

/* Reserved bits are sent as 0 (and ignored when received, IBA 9.2). */
static inline void shca_feth_set(struct shca_feth *f, uint8_t plt,
				 uint8_t sel)
{
	f->bits = htobe32((plt & SHCA_FETH_PLT_MASK) |
			  (((uint32_t)sel << SHCA_FETH_SEL_SHIFT) &
			   SHCA_FETH_SEL_MASK));
}

/* 3. The opcode table --------------------------------------------------- */

/*
 * BTH opcode (IBA 9.2, table 35): the top three bits name the transport,
 * the low five the operation.  softhca implements RC, UC, UD and XRC (the
 * RC operations, same low five bits, each request with an XRCETH); RD,
 * CNP and the reserved opcodes have no table entry.
 */
enum shca_wire_transport {
	SHCA_TP_RC = 0,		/* 000xxxxx */
	SHCA_TP_UC = 1,		/* 001xxxxx */
	SHCA_TP_RD = 2,		/* 010xxxxx (not implemented) */
	SHCA_TP_UD = 3,		/* 011xxxxx */
	SHCA_TP_XRC = 5,	/* 101xxxxx */
};
#define SHCA_OPCODE_TP_SHIFT	5

enum shca_wire_opcode {
	SHCA_OP_RC_SEND_FIRST				= 0x00,
	SHCA_OP_RC_SEND_MIDDLE				= 0x01,
	SHCA_OP_RC_SEND_LAST				= 0x02,
	SHCA_OP_RC_SEND_LAST_WITH_IMMEDIATE		= 0x03,
	SHCA_OP_RC_SEND_ONLY				= 0x04,
	SHCA_OP_RC_SEND_ONLY_WITH_IMMEDIATE		= 0x05,
	SHCA_OP_RC_RDMA_WRITE_FIRST			= 0x06,
	SHCA_OP_RC_RDMA_WRITE_MIDDLE			= 0x07,
	SHCA_OP_RC_RDMA_WRITE_LAST			= 0x08,
	SHCA_OP_RC_RDMA_WRITE_LAST_WITH_IMMEDIATE	= 0x09,
	SHCA_OP_RC_RDMA_WRITE_ONLY			= 0x0a,
	SHCA_OP_RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE	= 0x0b,
	SHCA_OP_RC_RDMA_READ_REQUEST			= 0x0c,
	SHCA_OP_RC_RDMA_READ_RESPONSE_FIRST		= 0x0d,
	SHCA_OP_RC_RDMA_READ_RESPONSE_MIDDLE		= 0x0e,
	SHCA_OP_RC_RDMA_READ_RESPONSE_LAST		= 0x0f,
	SHCA_OP_RC_RDMA_READ_RESPONSE_ONLY		= 0x10,
	SHCA_OP_RC_ACKNOWLEDGE				= 0x11,
	SHCA_OP_RC_ATOMIC_ACKNOWLEDGE			= 0x12,
	SHCA_OP_RC_COMPARE_SWAP				= 0x13,
	SHCA_OP_RC_FETCH_ADD				= 0x14,
	/* 0x15 reserved */
	SHCA_OP_RC_SEND_LAST_WITH_INVALIDATE		= 0x16,
	SHCA_OP_RC_SEND_ONLY_WITH_INVALIDATE		= 0x17,
	/* IBA Annex A19 (Memory Placement Extensions) */
	SHCA_OP_RC_FLUSH				= 0x1c,
	SHCA_OP_RC_ATOMIC_WRITE				= 0x1d,

	SHCA_OP_UC_SEND_FIRST				= 0x20,
	SHCA_OP_UC_SEND_MIDDLE				= 0x21,
	SHCA_OP_UC_SEND_LAST				= 0x22,
	SHCA_OP_UC_SEND_LAST_WITH_IMMEDIATE		= 0x23,
	SHCA_OP_UC_SEND_ONLY				= 0x24,
	SHCA_OP_UC_SEND_ONLY_WITH_IMMEDIATE		= 0x25,
	SHCA_OP_UC_RDMA_WRITE_FIRST			= 0x26,
	SHCA_OP_UC_RDMA_WRITE_MIDDLE			= 0x27,
	SHCA_OP_UC_RDMA_WRITE_LAST			= 0x28,
	SHCA_OP_UC_RDMA_WRITE_LAST_WITH_IMMEDIATE	= 0x29,
	SHCA_OP_UC_RDMA_WRITE_ONLY			= 0x2a,
	SHCA_OP_UC_RDMA_WRITE_ONLY_WITH_IMMEDIATE	= 0x2b,

	SHCA_OP_UD_SEND_ONLY				= 0x64,
	SHCA_OP_UD_SEND_ONLY_WITH_IMMEDIATE		= 0x65,

	/* XRC (IBA 9.2): the RC opcode's low five bits, transport 101 */
	SHCA_OP_XRC_SEND_FIRST				= 0xa0,
	SHCA_OP_XRC_SEND_MIDDLE				= 0xa1,
	SHCA_OP_XRC_SEND_LAST				= 0xa2,
	SHCA_OP_XRC_SEND_LAST_WITH_IMMEDIATE		= 0xa3,
	SHCA_OP_XRC_SEND_ONLY				= 0xa4,
	SHCA_OP_XRC_SEND_ONLY_WITH_IMMEDIATE		= 0xa5,
	SHCA_OP_XRC_RDMA_WRITE_FIRST			= 0xa6,
	SHCA_OP_XRC_RDMA_WRITE_MIDDLE			= 0xa7,
	SHCA_OP_XRC_RDMA_WRITE_LAST			= 0xa8,
	SHCA_OP_XRC_RDMA_WRITE_LAST_WITH_IMMEDIATE	= 0xa9,
	SHCA_OP_XRC_RDMA_WRITE_ONLY			= 0xaa,
	SHCA_OP_XRC_RDMA_WRITE_ONLY_WITH_IMMEDIATE	= 0xab,
	SHCA_OP_XRC_RDMA_READ_REQUEST			= 0xac,
	SHCA_OP_XRC_RDMA_READ_RESPONSE_FIRST		= 0xad,
	SHCA_OP_XRC_RDMA_READ_RESPONSE_MIDDLE		= 0xae,
	SHCA_OP_XRC_RDMA_READ_RESPONSE_LAST		= 0xaf,
	SHCA_OP_XRC_RDMA_READ_RESPONSE_ONLY		= 0xb0,
	SHCA_OP_XRC_ACKNOWLEDGE				= 0xb1,
	SHCA_OP_XRC_ATOMIC_ACKNOWLEDGE			= 0xb2,
	SHCA_OP_XRC_COMPARE_SWAP			= 0xb3,
	SHCA_OP_XRC_FETCH_ADD				= 0xb4,
	/* 0xb5 reserved */
	SHCA_OP_XRC_SEND_LAST_WITH_INVALIDATE		= 0xb6,
	SHCA_OP_XRC_SEND_ONLY_WITH_INVALIDATE		= 0xb7,
	/* Annex A19's two, as on RC (our reading: XRC mirrors RC) */
	SHCA_OP_XRC_FLUSH				= 0xbc,
	SHCA_OP_XRC_ATOMIC_WRITE			= 0xbd,
};

/*
 * What an opcode is, as mask bits.  Engine code tests these bits, never
 * lists of opcodes; adding an opcode is a table edit in wire.c.
 */
enum shca_wire_opmask {
	/* extension headers that follow the BTH (in this order on the wire) */
	SHCA_OPM_DETH		= 1u << 0,
	SHCA_OPM_RETH		= 1u << 1,
	SHCA_OPM_ATMETH		= 1u << 2,
	SHCA_OPM_AETH		= 1u << 3,
	SHCA_OPM_ATMACK		= 1u << 4,
	SHCA_OPM_IMMDT		= 1u << 5,	/* carries immediate data */
	SHCA_OPM_IETH		= 1u << 6,	/* carries an R_Key to revoke */
	/* carries a payload (possibly of 0 bytes) after the headers */
	SHCA_OPM_PAYLOAD	= 1u << 7,
	/* position in its message; an only packet is FIRST | LAST */
	SHCA_OPM_FIRST		= 1u << 8,
	SHCA_OPM_MIDDLE		= 1u << 9,
	SHCA_OPM_LAST		= 1u << 10,
	/* operation */
	SHCA_OPM_SEND		= 1u << 11,
	SHCA_OPM_WRITE		= 1u << 12,
	SHCA_OPM_READ_REQ	= 1u << 13,
	SHCA_OPM_READ_RESP	= 1u << 14,
	SHCA_OPM_ATOMIC		= 1u << 15,	/* CmpSwap or FetchAdd */
	SHCA_OPM_ACK		= 1u << 16,	/* ACK, NAK, RNR NAK */
	SHCA_OPM_ATOMIC_ACK	= 1u << 17,
	/* direction: requester -> responder, or back */
	SHCA_OPM_REQ		= 1u << 18,
	SHCA_OPM_RESP		= 1u << 19,
	/* the responder acknowledges it (RC requests) */
	SHCA_OPM_NEEDS_ACK	= 1u << 20,
	/* the responder answers with data (RDMA READ, atomics) */
	SHCA_OPM_NEEDS_RESP	= 1u << 21,
	/* completes a receive WQE at the responder (last/only of a SEND, or
	 * of an RDMA WRITE with immediate) */
	SHCA_OPM_COMP		= 1u << 22,
	/* Annex A19: FLUSH (FETH then RETH), ATOMIC WRITE (RETH and an
	 * 8-byte payload) */
	SHCA_OPM_FETH		= 1u << 23,	/* before the RETH on the wire */
	SHCA_OPM_FLUSH		= 1u << 24,
	SHCA_OPM_ATOMIC_WRITE	= 1u << 25,
	/* XRC requests: the XRCETH, right after the BTH */
	SHCA_OPM_XRCETH		= 1u << 26,
};
#define SHCA_OPM_ONLY (SHCA_OPM_FIRST | SHCA_OPM_LAST)

struct shca_wire_opinfo {
	const char *name;	/* "RC_SEND_FIRST"; NULL: no such opcode */
	uint32_t mask;		/* enum shca_wire_opmask */
	uint8_t transport;	/* enum shca_wire_transport */
	uint8_t hdr_len;	/* BTH and every extension header */
};

extern const struct shca_wire_opinfo shca_wire_optab[256];

/* An RC opcode's XRC twin (IBA 9.2: the same low five bits). */
static inline uint8_t shca_wire_xrc_opcode(uint8_t rc_opcode)
{
	return (uint8_t)((SHCA_TP_XRC << SHCA_OPCODE_TP_SHIFT) |
			 (rc_opcode & 0x1f));
}

/* The table entry of an opcode, or NULL if softhca does not know it. */
static inline const struct shca_wire_opinfo *shca_wire_op(uint8_t opcode)
{
	const struct shca_wire_opinfo *op = &shca_wire_optab[opcode];

	return op->name ? op : NULL;
}

static inline bool shca_wire_op_is(const struct shca_wire_opinfo *op,
				   uint32_t mask)
{
	return (op->mask & mask) == mask;
}

/* 4. AETH syndromes, RNR timer ------------------------------------------ */

/*
 * Syndrome: bit 7 reserved (0), bits 6:5 the type, bits 4:0 its value:
 * the credit count of an ACK, the timer of an RNR NAK, the code of a NAK.
 */
#define SHCA_AETH_TYPE_MASK	0x60
#define SHCA_AETH_TYPE_SHIFT	5
#define SHCA_AETH_VALUE_MASK	0x1f
#define SHCA_AETH_RESV_MASK	0x80

enum shca_aeth_type {
	SHCA_AETH_ACK		= 0,
	SHCA_AETH_RNR_NAK	= 1,
	SHCA_AETH_RESERVED	= 2,
	SHCA_AETH_NAK		= 3,
};

/* NAK codes.  An invalid R_Key, like any other R_Key or bounds violation,
 * is a Remote Access Error: IBA has no code of its own for it. */
enum shca_aeth_nak {
	SHCA_NAK_PSN_SEQ_ERR	= 0,	/* PSN sequence error */
	SHCA_NAK_INVALID_REQ	= 1,	/* invalid request */
	SHCA_NAK_REMOTE_ACCESS	= 2,	/* remote access error (R_Key...) */
	SHCA_NAK_REMOTE_OP	= 3,	/* remote operational error */
	SHCA_NAK_INVALID_RD_REQ	= 4,	/* invalid RD request (RD only) */
	SHCA_NAK_MAX		= SHCA_NAK_INVALID_RD_REQ,
};

/* Credit count value meaning "no credits advertised" (end-to-end flow
 * control not used). */
#define SHCA_AETH_CREDITS_INVALID 0x1f

static inline uint8_t shca_aeth_syn(enum shca_aeth_type type,
				    unsigned int value)
{
	return (uint8_t)(((unsigned int)type << SHCA_AETH_TYPE_SHIFT) |
			 (value & SHCA_AETH_VALUE_MASK));
}

static inline uint8_t shca_aeth_syn_ack(unsigned int credits)
{
	return shca_aeth_syn(SHCA_AETH_ACK, credits);
}

static inline uint8_t shca_aeth_syn_rnr(unsigned int timer)
{
	return shca_aeth_syn(SHCA_AETH_RNR_NAK, timer);
}

static inline uint8_t shca_aeth_syn_nak(enum shca_aeth_nak code)
{
	return shca_aeth_syn(SHCA_AETH_NAK, code);
}

static inline enum shca_aeth_type shca_aeth_syn_type(uint8_t syn)
{
	return (enum shca_aeth_type)((syn & SHCA_AETH_TYPE_MASK) >>
				     SHCA_AETH_TYPE_SHIFT);
}

static inline unsigned int shca_aeth_syn_value(uint8_t syn)
{
	return syn & SHCA_AETH_VALUE_MASK;
}

/* A syndrome the spec defines: bit 7 clear, type not reserved, NAK code
 * 0..4. */
bool shca_aeth_syn_valid(uint8_t syn);

/* Microseconds an RNR NAK timer code (0..31) stands for (the encoding of
 * ibv_modify_qp's min_rnr_timer); 0 for a value out of range. */
uint32_t shca_wire_rnr_timer_us(unsigned int code);

/* 5. PSN arithmetic: 24 bits, compared within a 2^23 window ----------- */

static inline uint32_t shca_psn_add(uint32_t psn, uint32_t n)
{
	return (psn + n) & SHCA_PSN_MASK;
}

/*
 * a - b as a signed distance in [-2^23, 2^23): positive when a is after
 * b.  Two PSNs exactly 2^23 apart are as far apart as the window allows;
 * the distance then reads -2^23 either way (and each is "before" the
 * other), so callers keep their windows below that.
 */
static inline int32_t shca_psn_diff(uint32_t a, uint32_t b)
{
	uint32_t d = (a - b) & SHCA_PSN_MASK;

	return d & 0x00800000u ? (int32_t)d - 0x01000000 : (int32_t)d;
}

static inline bool shca_psn_lt(uint32_t a, uint32_t b)
{
	return shca_psn_diff(a, b) < 0;
}

static inline bool shca_psn_le(uint32_t a, uint32_t b)
{
	return shca_psn_diff(a, b) <= 0;
}

static inline bool shca_psn_gt(uint32_t a, uint32_t b)
{
	return shca_psn_diff(a, b) > 0;
}

static inline bool shca_psn_ge(uint32_t a, uint32_t b)
{
	return shca_psn_diff(a, b) >= 0;
}

/* 6. Messages ----------------------------------------------------------- */

/*
 * Receiving: shca_wire_parse() on the bytes as they came (nothing else
 * reads them before it says yes); find the QP by msg.dqpn;
 * shca_wire_check_qp() with the QP's transport and path MTU; then P_Key,
 * PSN (shca_psn_*), R_Key and the rest against the QP's state, driven by
 * the bits of msg.op->mask.  Sending: fill a struct shca_wire_msg and
 * shca_wire_build() it, or shca_wire_build_hdr() and send the payload
 * after the headers.
 */

/*
 * One IB packet, decoded: every field in host order (immediate data
 * excepted, see struct shca_immdt).  shca_wire_parse() fills it from a
 * buffer; shca_wire_build() writes it to one.  Only the fields of the
 * headers the opcode carries mean anything; parse zeroes the rest.
 */
struct shca_wire_msg {
	uint8_t opcode;		/* enum shca_wire_opcode */
	/* BTH */
	bool se;
	bool mig;
	bool fecn;
	bool becn;
	bool ackreq;
	uint8_t pad;		/* PadCnt: set by parse, computed by build */
	uint16_t pkey;
	uint32_t dqpn;
	uint32_t psn;
	/* RETH (va, rkey, dma_len); AtomicETH (va, rkey, swap_add, compare) */
	uint64_t va;
	uint32_t rkey;
	uint32_t dma_len;
	uint64_t swap_add;
	uint64_t compare;
	/* AETH */
	uint8_t syndrome;
	uint32_t msn;
	/* AtomicAckETH */
	uint64_t orig;
	/* ImmDt: network order, as ibv_send_wr/ibv_wc.imm_data */
	uint32_t imm_be;
	/* IETH */
	uint32_t inv_rkey;
	/* XRCETH: the XRC SRQ a request is for */
	uint32_t xrc_srqn;
	/* FETH: placement type, selectivity level */
	uint8_t flush_plt;
	uint8_t flush_sel;
	/* DETH */
	uint32_t qkey;
	uint32_t sqpn;
	/* payload: build reads it, parse points into the parsed buffer */
	const void *payload;
	uint32_t payload_len;
	/* set by parse: the table entry and the length of the headers */
	const struct shca_wire_opinfo *op;
	uint32_t hdr_len;
};

/* Pad bytes after a payload of len bytes. */
static inline unsigned int shca_wire_pad(size_t len)
{
	return (unsigned int)(-len & 3);
}

/*
 * Write the headers of m (BTH to the last extension header; PadCnt from
 * m->payload_len) to buf.  For a sender that transmits the payload and
 * shca_wire_pad(payload_len) zero bytes separately (writev).
 * Returns the header length, -EINVAL if m is not a message softhca can
 * send (unknown opcode, payload on an opcode without one or larger than
 * SHCA_WIRE_MAX_PMTU, QPN/PSN/MSN/XRC SRQ number beyond 24 bits,
 * reserved syndrome or one other than ACK on a read response or atomic
 * ACK), -ENOSPC if cap is too small.
 */
ssize_t shca_wire_build_hdr(void *buf, size_t cap,
			    const struct shca_wire_msg *m);

/* Headers, payload and pad: the whole IB packet.  Returns its length or
 * the errors of shca_wire_build_hdr() (-EINVAL also for a payload_len
 * without payload). */
ssize_t shca_wire_build(void *buf, size_t cap, const struct shca_wire_msg *m);

/*
 * Parse and validate an IB packet (BTH .. pad; no ICRC) from an untrusted
 * peer.  On success fills *out (out->payload points into buf) and returns
 * 0; otherwise leaves *out alone and returns
 *	-EBADMSG	malformed: shorter than the BTH or than the headers of
 *			its opcode, length not a multiple of 4, PadCnt larger
 *			than the bytes after the headers, bytes after the
 *			headers of an opcode without payload, reserved AETH
 *			syndrome or one other than ACK in a read response or
 *			atomic ACK
 *	-EOPNOTSUPP	opcode reserved, or of RD or CNP; the BTH is whole
 *			(len >= SHCA_BTH_LEN), for a responder that NAKs it
 *	-EPROTO		TVer is not 0 (the spec drops such packets silently)
 *	-EMSGSIZE	payload larger than SHCA_WIRE_MAX_PMTU
 * Checks that need the receiving QP follow in shca_wire_check_qp().
 */
int shca_wire_parse(const void *buf, size_t len, struct shca_wire_msg *out);

/*
 * Checks of a parsed packet against the QP it is addressed to:
 *	-EINVAL		pmtu is not 256, 512, ..., 4096
 *	-EPROTOTYPE	opcode of another transport (UD opcode on an RC QP...)
 *	-EMSGSIZE	payload does not fit the path MTU: first and middle
 *			packets carry exactly pmtu bytes, last ones 1..pmtu,
 *			only ones 0..pmtu
 */
int shca_wire_check_qp(const struct shca_wire_msg *m,
		       enum shca_wire_transport tp, unsigned int pmtu);

/* 7. RoCE v2 encapsulation (IBA Annex A17) ----------------------------- */

#define SHCA_ROCE_UDP_PORT	4791
/* RoCE v2 source ports carry flow entropy, from this range up. */
#define SHCA_ROCE_SPORT_BASE	0xc000

#define SHCA_ETH_P_IPV4		0x0800
#define SHCA_ETH_P_IPV6		0x86dd
#define SHCA_IPPROTO_UDP	17

struct shca_eth_hdr {
	uint8_t dst[6];
	uint8_t src[6];
	uint16_t type;
} __attribute__((packed));
_Static_assert(sizeof(struct shca_eth_hdr) == 14, "Ethernet is 14 bytes");

static inline void shca_eth_set_type(struct shca_eth_hdr *eth, uint16_t type)
{
	eth->type = htobe16(type);
}

/* A locally administered MAC address made from a GID: pcap frames need
 * one, RoCE v2 puts nothing of the GID's into it. */
static inline void shca_eth_mac_from_gid(uint8_t mac[6],
					 const uint8_t gid[16])
{
	mac[0] = 0x02;
	mac[1] = 0x00;
	memcpy(mac + 2, gid + 12, 4);
}

static inline uint16_t shca_eth_type(const struct shca_eth_hdr *eth)
{
	return be16toh(eth->type);
}

struct shca_ipv4_hdr {
	uint8_t ver_ihl;	/* version 4, IHL 5 */
	uint8_t tos;		/* DSCP:6 ECN:2; masked by the ICRC */
	uint16_t tot_len;
	uint16_t id;
	uint16_t frag;		/* flags:3 offset:13 */
	uint8_t ttl;		/* masked by the ICRC */
	uint8_t proto;
	uint16_t csum;		/* masked by the ICRC */
	uint8_t saddr[4];
	uint8_t daddr[4];
} __attribute__((packed));
_Static_assert(sizeof(struct shca_ipv4_hdr) == 20, "IPv4 is 20 bytes");

#define SHCA_IPV4_VER_IHL	0x45
#define SHCA_IPV4_DF		0x4000
#define SHCA_IP_TTL		64

/* The IP version of the header at p (4 or 6; anything else is neither). */
static inline unsigned int shca_ip_version(const void *p)
{
	return *(const uint8_t *)p >> 4;
}

/* Version, IHL 5, no options, DF, UDP; checksum left 0. */
static inline void shca_ipv4_init(struct shca_ipv4_hdr *ip, uint16_t tot_len,
				  const uint8_t saddr[4],
				  const uint8_t daddr[4])
{
	memset(ip, 0, sizeof(*ip));
	ip->ver_ihl = SHCA_IPV4_VER_IHL;
	ip->tot_len = htobe16(tot_len);
	ip->frag = htobe16(SHCA_IPV4_DF);
	ip->ttl = SHCA_IP_TTL;
	ip->proto = SHCA_IPPROTO_UDP;
	memcpy(ip->saddr, saddr, 4);
	memcpy(ip->daddr, daddr, 4);
}

static inline void shca_ipv4_set_csum(struct shca_ipv4_hdr *ip,
				      uint16_t csum)
{
	ip->csum = htobe16(csum);
}

static inline uint16_t shca_ipv4_csum(const struct shca_ipv4_hdr *ip)
{
	return be16toh(ip->csum);
}

static inline uint16_t shca_ipv4_tot_len(const struct shca_ipv4_hdr *ip)
{
	return be16toh(ip->tot_len);
}

static inline void shca_ipv4_mask_for_icrc(struct shca_ipv4_hdr *ip)
{
	ip->tos = 0xff;
	ip->ttl = 0xff;
	ip->csum = 0xffff;
}

struct shca_ipv6_hdr {
	uint32_t vtf;		/* version:4 class:8 flow:20; class and flow
				 * masked by the ICRC */
	uint16_t plen;
	uint8_t next;
	uint8_t hop_limit;	/* masked by the ICRC */
	uint8_t saddr[16];
	uint8_t daddr[16];
} __attribute__((packed));
_Static_assert(sizeof(struct shca_ipv6_hdr) == 40, "IPv6 is 40 bytes");

#define SHCA_IPV6_VERSION	0x60000000u
#define SHCA_IPV6_TC_FLOW_MASK	0x0fffffffu

static inline void shca_ipv6_init(struct shca_ipv6_hdr *ip, uint16_t plen,
				  const uint8_t saddr[16],
				  const uint8_t daddr[16])
{
	memset(ip, 0, sizeof(*ip));
	ip->vtf = htobe32(SHCA_IPV6_VERSION);
	ip->plen = htobe16(plen);
	ip->next = SHCA_IPPROTO_UDP;
	ip->hop_limit = SHCA_IP_TTL;
	memcpy(ip->saddr, saddr, 16);
	memcpy(ip->daddr, daddr, 16);
}

static inline uint16_t shca_ipv6_plen(const struct shca_ipv6_hdr *ip)
{
	return be16toh(ip->plen);
}

static inline void shca_ipv6_mask_for_icrc(struct shca_ipv6_hdr *ip)
{
	ip->vtf |= htobe32(SHCA_IPV6_TC_FLOW_MASK);
	ip->hop_limit = 0xff;
}

struct shca_udp_hdr {
	uint16_t sport;
	uint16_t dport;
	uint16_t len;
	uint16_t csum;		/* masked by the ICRC */
} __attribute__((packed));
_Static_assert(sizeof(struct shca_udp_hdr) == 8, "UDP is 8 bytes");

/* Ports and length; checksum left 0. */
static inline void shca_udp_init(struct shca_udp_hdr *udp, uint16_t sport,
				 uint16_t dport, uint16_t len)
{
	udp->sport = htobe16(sport);
	udp->dport = htobe16(dport);
	udp->len = htobe16(len);
	udp->csum = 0;
}

static inline void shca_udp_set_csum(struct shca_udp_hdr *udp, uint16_t csum)
{
	udp->csum = htobe16(csum);
}

static inline uint16_t shca_udp_csum(const struct shca_udp_hdr *udp)
{
	return be16toh(udp->csum);
}

static inline void shca_udp_mask_for_icrc(struct shca_udp_hdr *udp)
{
	udp->csum = 0xffff;
}

static inline uint16_t shca_udp_sport(const struct shca_udp_hdr *udp)
{
	return be16toh(udp->sport);
}

static inline uint16_t shca_udp_dport(const struct shca_udp_hdr *udp)
{
	return be16toh(udp->dport);
}

static inline uint16_t shca_udp_len(const struct shca_udp_hdr *udp)
{
	return be16toh(udp->len);
}

/* IPv4 + UDP, or IPv6 + UDP */
#define SHCA_ROCE_HDR4_LEN (sizeof(struct shca_ipv4_hdr) + \
			    sizeof(struct shca_udp_hdr))
#define SHCA_ROCE_HDR6_LEN (sizeof(struct shca_ipv6_hdr) + \
			    sizeof(struct shca_udp_hdr))
#define SHCA_ROCE_MAX_HDR SHCA_ROCE_HDR6_LEN

/* A GID that holds an IPv4 address (::ffff:a.b.c.d, RoCE v2). */
static inline bool shca_gid_is_v4(const uint8_t gid[16])
{
	static const uint8_t prefix[12] = { [10] = 0xff, [11] = 0xff };

	return !memcmp(gid, prefix, sizeof(prefix));
}

/*
 * The ICRC (IBA Annex A17): CRC-32 (the Ethernet one) over eight 0xff
 * bytes standing for the LRH, the IP header with TOS/traffic class, flow
 * label, TTL/hop limit and header checksum set to ones, the UDP header
 * with its checksum set to ones, the BTH with FECN/BECN/Resv6 set to
 * ones, and the rest of the IB packet through the pad.  net_hdr is the
 * IPv4 or IPv6 header (without options) and the UDP header; ib_pkt is
 * the IB packet without ICRC.  Returns 0 (and never computes) if net_hdr
 * is neither or ib_len is shorter than a BTH.  On the wire the ICRC
 * follows the pad as the 4 bytes of shca_wire_put_icrc().
 */
uint32_t shca_wire_icrc(const void *net_hdr, size_t net_len,
			const void *ib_pkt, size_t ib_len);

/* The ICRC goes on the wire least significant byte first, as Ethernet's
 * FCS does. */
static inline void shca_wire_put_icrc(void *p, uint32_t icrc)
{
	uint32_t le = htole32(icrc);

	memcpy(p, &le, sizeof(le));
}

static inline uint32_t shca_wire_get_icrc(const void *p)
{
	uint32_t le;

	memcpy(&le, p, sizeof(le));
	return le32toh(le);
}

/* The packet ib_pkt (ib_len bytes, ICRC included) arrived after net_hdr
 * with a good ICRC. */
bool shca_wire_icrc_ok(const void *net_hdr, size_t net_len,
		       const void *ib_pkt, size_t ib_len);

/*
 * Write the IPv4 or IPv6 header and the UDP header (to port 4791, from
 * sport) that carry the IB packet ib_pkt (ib_len bytes, no ICRC) from
 * sgid to dgid: IPv4 when both GIDs hold IPv4 addresses, IPv6 otherwise.
 * Computes the ICRC into icrc[] (to send after the pad) and both
 * checksums.  hdr must have room for SHCA_ROCE_MAX_HDR bytes.  Returns
 * the length of the headers, or -EMSGSIZE if the packet does not fit an
 * IP datagram, -EINVAL if ib_len is shorter than a BTH.
 */
int shca_wire_roce_encap(void *hdr, const uint8_t sgid[16],
			 const uint8_t dgid[16], uint16_t sport,
			 const void *ib_pkt, size_t ib_len,
			 uint8_t icrc[SHCA_ICRC_LEN]);

/* The UDP source port RoCE v2 uses for a QP's packets: entropy for ECMP
 * from the destination QPN, in [0xc000, 0xffff]. */
uint16_t shca_wire_roce_sport(uint32_t dqpn);

#endif
