// SPDX-License-Identifier: MIT
/*
 * The wire codec: the opcode table, building and parsing IB packets, and
 * the RoCE v2 encapsulation with its ICRC.  Byte order and bit layout are
 * wire.h's business; this file only calls its accessors.
 */
#include <errno.h>
#include <pthread.h>

#include "wire.h"

/* The opcode table ------------------------------------------------------ */

/* Length of the headers an opcode carries, from its mask. */
#define HDR_LEN(m)                                                  \
	(SHCA_BTH_LEN + ((m) & SHCA_OPM_XRCETH ? SHCA_XRCETH_LEN : 0) + \
	 ((m) & SHCA_OPM_DETH ? SHCA_DETH_LEN : 0) +                  \
	 ((m) & SHCA_OPM_FETH ? SHCA_FETH_LEN : 0) +                  \
	 ((m) & SHCA_OPM_RETH ? SHCA_RETH_LEN : 0) +                  \
	 ((m) & SHCA_OPM_ATMETH ? SHCA_ATMETH_LEN : 0) +              \
	 ((m) & SHCA_OPM_AETH ? SHCA_AETH_LEN : 0) +                  \
	 ((m) & SHCA_OPM_ATMACK ? SHCA_ATMACK_LEN : 0) +              \
	 ((m) & SHCA_OPM_IMMDT ? SHCA_IMMDT_LEN : 0) +                \
	 ((m) & SHCA_OPM_IETH ? SHCA_IETH_LEN : 0))

#define OP(tp, name_, m)                                              \
	[SHCA_OP_##tp##_##name_] = {                                  \
		.name = #tp "_" #name_,                               \
		.mask = (m),                                          \
		.transport = SHCA_TP_##tp,                            \
		.hdr_len = HDR_LEN(m),                                \
	}

/* Requests of the two connected transports: RC ones are acknowledged. */
#define RC_REQ (SHCA_OPM_REQ | SHCA_OPM_NEEDS_ACK)
#define UC_REQ (SHCA_OPM_REQ)
#define RESP (SHCA_OPM_RESP)

#define SEND (SHCA_OPM_SEND | SHCA_OPM_PAYLOAD)
#define WRITE (SHCA_OPM_WRITE | SHCA_OPM_PAYLOAD)
#define FIRST SHCA_OPM_FIRST
#define MIDDLE SHCA_OPM_MIDDLE
#define LAST SHCA_OPM_LAST
#define ONLY SHCA_OPM_ONLY
#define COMP SHCA_OPM_COMP
#define IMM SHCA_OPM_IMMDT
#define INV SHCA_OPM_IETH
#define RETH SHCA_OPM_RETH

/* RC and UC share the SEND and RDMA WRITE opcodes (low five bits). */
#define CONNECTED_OPS(tp, req)                                               \
	OP(tp, SEND_FIRST, req | SEND | FIRST),                              \
	OP(tp, SEND_MIDDLE, req | SEND | MIDDLE),                            \
	OP(tp, SEND_LAST, req | SEND | LAST | COMP),                         \
	OP(tp, SEND_LAST_WITH_IMMEDIATE, req | SEND | LAST | COMP | IMM),    \
	OP(tp, SEND_ONLY, req | SEND | ONLY | COMP),                         \
	OP(tp, SEND_ONLY_WITH_IMMEDIATE, req | SEND | ONLY | COMP | IMM),    \
	OP(tp, RDMA_WRITE_FIRST, req | WRITE | FIRST | RETH),                \
	OP(tp, RDMA_WRITE_MIDDLE, req | WRITE | MIDDLE),                     \
	OP(tp, RDMA_WRITE_LAST, req | WRITE | LAST),                         \
	OP(tp, RDMA_WRITE_LAST_WITH_IMMEDIATE,                               \
	   req | WRITE | LAST | COMP | IMM),                                 \
	OP(tp, RDMA_WRITE_ONLY, req | WRITE | ONLY | RETH),                  \
	OP(tp, RDMA_WRITE_ONLY_WITH_IMMEDIATE,                               \
	   req | WRITE | ONLY | COMP | IMM | RETH)

/* RC's operations; XRC has the same ones, its requests with an XRCETH. */
#define RC_FAMILY(tp, req)                                                   \
	CONNECTED_OPS(tp, req),                                              \
	OP(tp, RDMA_READ_REQUEST,                                           \
	   req | SHCA_OPM_READ_REQ | SHCA_OPM_NEEDS_RESP | ONLY | RETH),    \
	OP(tp, RDMA_READ_RESPONSE_FIRST, RESP | SHCA_OPM_READ_RESP |        \
	   SHCA_OPM_PAYLOAD | FIRST | SHCA_OPM_AETH),                       \
	OP(tp, RDMA_READ_RESPONSE_MIDDLE, RESP | SHCA_OPM_READ_RESP |       \
	   SHCA_OPM_PAYLOAD | MIDDLE),                                      \
	OP(tp, RDMA_READ_RESPONSE_LAST, RESP | SHCA_OPM_READ_RESP |         \
	   SHCA_OPM_PAYLOAD | LAST | SHCA_OPM_AETH),                        \
	OP(tp, RDMA_READ_RESPONSE_ONLY, RESP | SHCA_OPM_READ_RESP |         \
	   SHCA_OPM_PAYLOAD | ONLY | SHCA_OPM_AETH),                        \
	OP(tp, ACKNOWLEDGE, RESP | SHCA_OPM_ACK | ONLY | SHCA_OPM_AETH),    \
	OP(tp, ATOMIC_ACKNOWLEDGE, RESP | SHCA_OPM_ATOMIC_ACK | ONLY |      \
	   SHCA_OPM_AETH | SHCA_OPM_ATMACK),                                \
	OP(tp, COMPARE_SWAP, req | SHCA_OPM_ATOMIC | SHCA_OPM_NEEDS_RESP |  \
	   ONLY | SHCA_OPM_ATMETH),                                         \
	OP(tp, FETCH_ADD, req | SHCA_OPM_ATOMIC | SHCA_OPM_NEEDS_RESP |     \
	   ONLY | SHCA_OPM_ATMETH),                                         \
	OP(tp, SEND_LAST_WITH_INVALIDATE, req | SEND | LAST | COMP | INV),  \
	OP(tp, SEND_ONLY_WITH_INVALIDATE, req | SEND | ONLY | COMP | INV),  \
	/* answered with an RDMA READ response of no data (Annex A19) */    \
	OP(tp, FLUSH, req | SHCA_OPM_FLUSH | SHCA_OPM_NEEDS_RESP | ONLY |   \
	   SHCA_OPM_FETH | RETH),                                           \
	/* acknowledged like an RDMA WRITE; its payload is the 8 bytes */   \
	OP(tp, ATOMIC_WRITE, req | SHCA_OPM_ATOMIC_WRITE | SHCA_OPM_PAYLOAD |\
	   ONLY | RETH)

const struct shca_wire_opinfo shca_wire_optab[256] = {
	RC_FAMILY(RC, RC_REQ),

	CONNECTED_OPS(UC, UC_REQ),

	OP(UD, SEND_ONLY, SHCA_OPM_REQ | SEND | ONLY | COMP | SHCA_OPM_DETH),
	OP(UD, SEND_ONLY_WITH_IMMEDIATE,
	   SHCA_OPM_REQ | SEND | ONLY | COMP | SHCA_OPM_DETH | IMM),

	RC_FAMILY(XRC, RC_REQ | SHCA_OPM_XRCETH),
};

/* AETH, RNR timer ------------------------------------------------------- */

bool shca_aeth_syn_valid(uint8_t syn)
{
	if (syn & SHCA_AETH_RESV_MASK)
		return false;
	switch (shca_aeth_syn_type(syn)) {
	case SHCA_AETH_ACK:
	case SHCA_AETH_RNR_NAK:
		return true;
	case SHCA_AETH_NAK:
		return shca_aeth_syn_value(syn) <= SHCA_NAK_MAX;
	default:
		return false;
	}
}

/* The RNR NAK timer field: code -> microseconds. */
static const uint32_t rnr_timer_us[32] = {
	655360, 10,	20,	30,	40,	60,	80,	120,
	160,	240,	320,	480,	640,	960,	1280,	1920,
	2560,	3840,	5120,	7680,	10240,	15360,	20480,	30720,
	40960,	61440,	81920,	122880, 163840, 245760, 327680, 491520,
};

uint32_t shca_wire_rnr_timer_us(unsigned int code)
{
	return code < 32 ? rnr_timer_us[code] : 0;
}

/* Build ----------------------------------------------------------------- */

static int check_msg(const struct shca_wire_opinfo *op,
		     const struct shca_wire_msg *m)
{
	if (!op)
		return -EINVAL;
	if (m->dqpn > SHCA_QPN_MASK || m->psn > SHCA_PSN_MASK)
		return -EINVAL;
	if (m->payload_len > SHCA_WIRE_MAX_PMTU)
		return -EINVAL;
	if (!(op->mask & SHCA_OPM_PAYLOAD) && m->payload_len)
		return -EINVAL;
	if (op->mask & SHCA_OPM_DETH && m->sqpn > SHCA_QPN_MASK)
		return -EINVAL;
	if (op->mask & SHCA_OPM_XRCETH && m->xrc_srqn > SHCA_QPN_MASK)
		return -EINVAL;
	if (op->mask & SHCA_OPM_FETH &&
	    (m->flush_plt > SHCA_FETH_PLT_MASK ||
	     m->flush_sel > (SHCA_FETH_SEL_MASK >> SHCA_FETH_SEL_SHIFT)))
		return -EINVAL;
	if (op->mask & SHCA_OPM_AETH) {
		if (!shca_aeth_syn_valid(m->syndrome) ||
		    m->msn > SHCA_MSN_MASK)
			return -EINVAL;
		/* NAKs travel in Acknowledge packets only. */
		if (!(op->mask & SHCA_OPM_ACK) &&
		    shca_aeth_syn_type(m->syndrome) != SHCA_AETH_ACK)
			return -EINVAL;
	}
	return 0;
}

ssize_t shca_wire_build_hdr(void *buf, size_t cap,
			    const struct shca_wire_msg *m)
{
	const struct shca_wire_opinfo *op = shca_wire_op(m->opcode);
	uint8_t *p = buf;
	struct shca_bth *bth = buf;
	size_t off = SHCA_BTH_LEN;
	int err;

	err = check_msg(op, m);
	if (err)
		return err;
	if (cap < op->hdr_len)
		return -ENOSPC;

	memset(buf, 0, op->hdr_len);
	shca_bth_set_opcode(bth, m->opcode);
	shca_bth_set_se(bth, m->se);
	shca_bth_set_mig(bth, m->mig);
	shca_bth_set_pad(bth, shca_wire_pad(m->payload_len));
	shca_bth_set_tver(bth, SHCA_BTH_TVER);
	shca_bth_set_pkey(bth, m->pkey);
	shca_bth_set_fecn(bth, m->fecn);
	shca_bth_set_becn(bth, m->becn);
	shca_bth_set_dqpn(bth, m->dqpn);
	shca_bth_set_ackreq(bth, m->ackreq);
	shca_bth_set_psn(bth, m->psn);

	if (op->mask & SHCA_OPM_XRCETH) {
		struct shca_xrceth *xrceth = (void *)(p + off);

		shca_xrceth_set_srqn(xrceth, m->xrc_srqn);
		off += SHCA_XRCETH_LEN;
	}
	if (op->mask & SHCA_OPM_DETH) {
		struct shca_deth *deth = (void *)(p + off);

		shca_deth_set_qkey(deth, m->qkey);
		shca_deth_set_sqpn(deth, m->sqpn);
		off += SHCA_DETH_LEN;
	}
	if (op->mask & SHCA_OPM_FETH) {
		struct shca_feth *feth = (void *)(p + off);

		shca_feth_set(feth, m->flush_plt, m->flush_sel);
		off += SHCA_FETH_LEN;
	}
	if (op->mask & SHCA_OPM_RETH) {
		struct shca_reth *reth = (void *)(p + off);

		shca_reth_set_va(reth, m->va);
		shca_reth_set_rkey(reth, m->rkey);
		shca_reth_set_len(reth, m->dma_len);
		off += SHCA_RETH_LEN;
	}
	if (op->mask & SHCA_OPM_ATMETH) {
		struct shca_atmeth *atm = (void *)(p + off);

		shca_atmeth_set_va(atm, m->va);
		shca_atmeth_set_rkey(atm, m->rkey);
		shca_atmeth_set_swap_add(atm, m->swap_add);
		shca_atmeth_set_compare(atm, m->compare);
		off += SHCA_ATMETH_LEN;
	}
	if (op->mask & SHCA_OPM_AETH) {
		struct shca_aeth *aeth = (void *)(p + off);

		shca_aeth_set_syndrome(aeth, m->syndrome);
		shca_aeth_set_msn(aeth, m->msn);
		off += SHCA_AETH_LEN;
	}
	if (op->mask & SHCA_OPM_ATMACK) {
		struct shca_atmack *ack = (void *)(p + off);

		shca_atmack_set_orig(ack, m->orig);
		off += SHCA_ATMACK_LEN;
	}
	if (op->mask & SHCA_OPM_IMMDT) {
		struct shca_immdt *imm = (void *)(p + off);

		shca_immdt_set_imm_be(imm, m->imm_be);
		off += SHCA_IMMDT_LEN;
	}
	if (op->mask & SHCA_OPM_IETH) {
		struct shca_ieth *ieth = (void *)(p + off);

		shca_ieth_set_rkey(ieth, m->inv_rkey);
		off += SHCA_IETH_LEN;
	}
	return (ssize_t)off;
}

ssize_t shca_wire_build(void *buf, size_t cap, const struct shca_wire_msg *m)
{
	const struct shca_wire_opinfo *op = shca_wire_op(m->opcode);
	unsigned int pad = shca_wire_pad(m->payload_len);
	uint8_t *p = buf;
	ssize_t hdr;
	int err;

	err = check_msg(op, m);
	if (err)
		return err;
	if (m->payload_len && !m->payload)
		return -EINVAL;
	if (cap < (size_t)op->hdr_len + m->payload_len + pad)
		return -ENOSPC;

	hdr = shca_wire_build_hdr(buf, cap, m);
	if (hdr < 0)
		return hdr;
	if (m->payload_len)
		memcpy(p + hdr, m->payload, m->payload_len);
	memset(p + hdr + m->payload_len, 0, pad);
	return hdr + m->payload_len + pad;
}

/* Parse ----------------------------------------------------------------- */

int shca_wire_parse(const void *buf, size_t len, struct shca_wire_msg *out)
{
	const struct shca_bth *bth = buf;
	const struct shca_wire_opinfo *op;
	const uint8_t *p = buf;
	struct shca_wire_msg m;
	size_t off = SHCA_BTH_LEN, rest;

	if (len < SHCA_BTH_LEN)
		return -EBADMSG;
	if (shca_bth_tver(bth) != SHCA_BTH_TVER)
		return -EPROTO;
	op = shca_wire_op(shca_bth_opcode(bth));
	if (!op)
		return -EOPNOTSUPP;
	if (len < op->hdr_len || len % 4)
		return -EBADMSG;

	memset(&m, 0, sizeof(m));
	m.op = op;
	m.hdr_len = op->hdr_len;
	m.opcode = shca_bth_opcode(bth);
	m.se = shca_bth_se(bth);
	m.mig = shca_bth_mig(bth);
	m.pad = (uint8_t)shca_bth_pad(bth);
	m.pkey = shca_bth_pkey(bth);
	m.fecn = shca_bth_fecn(bth);
	m.becn = shca_bth_becn(bth);
	m.dqpn = shca_bth_dqpn(bth);
	m.ackreq = shca_bth_ackreq(bth);
	m.psn = shca_bth_psn(bth);

	if (op->mask & SHCA_OPM_XRCETH) {
		const struct shca_xrceth *xrceth = (const void *)(p + off);

		m.xrc_srqn = shca_xrceth_srqn(xrceth);
		off += SHCA_XRCETH_LEN;
	}
	if (op->mask & SHCA_OPM_DETH) {
		const struct shca_deth *deth = (const void *)(p + off);

		m.qkey = shca_deth_qkey(deth);
		m.sqpn = shca_deth_sqpn(deth);
		off += SHCA_DETH_LEN;
	}
	if (op->mask & SHCA_OPM_FETH) {
		const struct shca_feth *feth = (const void *)(p + off);

		m.flush_plt = shca_feth_plt(feth);
		m.flush_sel = shca_feth_sel(feth);
		off += SHCA_FETH_LEN;
	}
	if (op->mask & SHCA_OPM_RETH) {
		const struct shca_reth *reth = (const void *)(p + off);

		m.va = shca_reth_va(reth);
		m.rkey = shca_reth_rkey(reth);
		m.dma_len = shca_reth_len(reth);
		off += SHCA_RETH_LEN;
	}
	if (op->mask & SHCA_OPM_ATMETH) {
		const struct shca_atmeth *atm = (const void *)(p + off);

		m.va = shca_atmeth_va(atm);
		m.rkey = shca_atmeth_rkey(atm);
		m.swap_add = shca_atmeth_swap_add(atm);
		m.compare = shca_atmeth_compare(atm);
		off += SHCA_ATMETH_LEN;
	}
	if (op->mask & SHCA_OPM_AETH) {
		const struct shca_aeth *aeth = (const void *)(p + off);

		m.syndrome = shca_aeth_syndrome(aeth);
		m.msn = shca_aeth_msn(aeth);
		off += SHCA_AETH_LEN;
		if (!shca_aeth_syn_valid(m.syndrome))
			return -EBADMSG;
		/* Read responses and atomic ACKs acknowledge; NAKs travel
		 * in Acknowledge packets only. */
		if (!(op->mask & SHCA_OPM_ACK) &&
		    shca_aeth_syn_type(m.syndrome) != SHCA_AETH_ACK)
			return -EBADMSG;
	}
	if (op->mask & SHCA_OPM_ATMACK) {
		const struct shca_atmack *ack = (const void *)(p + off);

		m.orig = shca_atmack_orig(ack);
		off += SHCA_ATMACK_LEN;
	}
	if (op->mask & SHCA_OPM_IMMDT) {
		const struct shca_immdt *imm = (const void *)(p + off);

		m.imm_be = shca_immdt_imm_be(imm);
		off += SHCA_IMMDT_LEN;
	}
	if (op->mask & SHCA_OPM_IETH) {
		const struct shca_ieth *ieth = (const void *)(p + off);

		m.inv_rkey = shca_ieth_rkey(ieth);
		off += SHCA_IETH_LEN;
	}

	/* off == op->hdr_len <= len, and both are multiples of 4, so the
	 * rest is too: PadCnt <= 3 then makes payload + pad 4-aligned. */
	rest = len - off;
	if (!(op->mask & SHCA_OPM_PAYLOAD)) {
		if (rest || m.pad)
			return -EBADMSG;
	} else {
		if (m.pad > rest)
			return -EBADMSG;
		if (rest - m.pad > SHCA_WIRE_MAX_PMTU)
			return -EMSGSIZE;
		m.payload = p + off;
		m.payload_len = (uint32_t)(rest - m.pad);
	}

	*out = m;
	return 0;
}

int shca_wire_check_qp(const struct shca_wire_msg *m,
		       enum shca_wire_transport tp, unsigned int pmtu)
{
	const struct shca_wire_opinfo *op = shca_wire_op(m->opcode);

	if (pmtu < SHCA_WIRE_MIN_PMTU || pmtu > SHCA_WIRE_MAX_PMTU ||
	    (pmtu & (pmtu - 1)))
		return -EINVAL;
	if (!op || op->transport != tp)
		return -EPROTOTYPE;
	if (!(op->mask & SHCA_OPM_PAYLOAD))
		return 0;

	if (!(op->mask & SHCA_OPM_LAST)) {
		/* first or middle: exactly one path MTU */
		if (m->payload_len != pmtu)
			return -EMSGSIZE;
	} else if (!(op->mask & SHCA_OPM_FIRST)) {
		/* last: what is left, at least one byte */
		if (m->payload_len == 0 || m->payload_len > pmtu)
			return -EMSGSIZE;
	} else if (m->payload_len > pmtu) {
		/* only */
		return -EMSGSIZE;
	}
	return 0;
}

/* ICRC: CRC-32, reflected, polynomial 0x04c11db7 ----------------------- */

#define CRC32_POLY_REFLECTED 0xedb88320u

static uint32_t crc_table[256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;

static void crc_init(void)
{
	uint32_t c;
	int i, k;

	for (i = 0; i < 256; i++) {
		c = (uint32_t)i;
		for (k = 0; k < 8; k++)
			c = c & 1 ? (c >> 1) ^ CRC32_POLY_REFLECTED : c >> 1;
		crc_table[i] = c;
	}
}

/* Raw register update: no inversion in or out. */
static uint32_t crc_update(uint32_t crc, const void *buf, size_t len)
{
	const uint8_t *p = buf;

	while (len--)
		crc = crc_table[(crc ^ *p++) & 0xff] ^ (crc >> 8);
	return crc;
}

/* A copy of net_hdr with the variant fields masked; its length or 0. */
static size_t mask_net_hdr(uint8_t *copy, const void *net_hdr, size_t len)
{
	struct shca_udp_hdr *udp;

	if (len == SHCA_ROCE_HDR4_LEN && shca_ip_version(net_hdr) == 4) {
		memcpy(copy, net_hdr, len);
		shca_ipv4_mask_for_icrc((struct shca_ipv4_hdr *)copy);
		udp = (void *)(copy + sizeof(struct shca_ipv4_hdr));
	} else if (len == SHCA_ROCE_HDR6_LEN &&
		   shca_ip_version(net_hdr) == 6) {
		memcpy(copy, net_hdr, len);
		shca_ipv6_mask_for_icrc((struct shca_ipv6_hdr *)copy);
		udp = (void *)(copy + sizeof(struct shca_ipv6_hdr));
	} else {
		return 0;
	}
	shca_udp_mask_for_icrc(udp);
	return len;
}

uint32_t shca_wire_icrc(const void *net_hdr, size_t net_len,
			const void *ib_pkt, size_t ib_len)
{
	static const uint8_t lrh_ones[8] = { 0xff, 0xff, 0xff, 0xff,
					     0xff, 0xff, 0xff, 0xff };
	uint8_t net[SHCA_ROCE_MAX_HDR];
	struct shca_bth bth;
	uint32_t crc = 0xffffffffu;

	if (ib_len < SHCA_BTH_LEN || !mask_net_hdr(net, net_hdr, net_len))
		return 0;
	pthread_once(&crc_once, crc_init);

	memcpy(&bth, ib_pkt, sizeof(bth));
	shca_bth_mask_for_icrc(&bth);

	crc = crc_update(crc, lrh_ones, sizeof(lrh_ones));
	crc = crc_update(crc, net, net_len);
	crc = crc_update(crc, &bth, sizeof(bth));
	crc = crc_update(crc, (const uint8_t *)ib_pkt + SHCA_BTH_LEN,
			 ib_len - SHCA_BTH_LEN);
	return ~crc;
}

bool shca_wire_icrc_ok(const void *net_hdr, size_t net_len,
		       const void *ib_pkt, size_t ib_len)
{
	uint8_t scratch[SHCA_ROCE_MAX_HDR];

	if (ib_len < SHCA_BTH_LEN + SHCA_ICRC_LEN ||
	    !mask_net_hdr(scratch, net_hdr, net_len))
		return false;
	ib_len -= SHCA_ICRC_LEN;
	return shca_wire_icrc(net_hdr, net_len, ib_pkt, ib_len) ==
	       shca_wire_get_icrc((const uint8_t *)ib_pkt + ib_len);
}

/* RoCE v2 encapsulation ------------------------------------------------- */

/* The Internet checksum (RFC 1071) over a byte stream given in pieces. */
struct csum {
	uint64_t sum;
	size_t pos;		/* bytes so far: odd means a low byte is next */
};

static void csum_add(struct csum *c, const void *buf, size_t len)
{
	const uint8_t *p = buf;
	size_t i;

	for (i = 0; i < len; i++, c->pos++)
		c->sum += c->pos & 1 ? p[i] : (uint32_t)p[i] << 8;
}

/* Add 16-bit words given as numbers (at an even position). */
static void csum_add_word(struct csum *c, uint16_t word)
{
	c->sum += word;
}

/* The folded, complemented sum. */
static uint16_t csum_fold(const struct csum *c)
{
	uint64_t s = c->sum;

	while (s >> 16)
		s = (s & 0xffff) + (s >> 16);
	return (uint16_t)~s;
}

uint16_t shca_wire_roce_sport(uint32_t dqpn)
{
	/* Fibonacci hashing of the QPN to 14 bits. */
	uint32_t h = (dqpn & SHCA_QPN_MASK) * 0x9e3779b1u;

	return (uint16_t)(SHCA_ROCE_SPORT_BASE | (h >> 18));
}

int shca_wire_roce_encap(void *hdr, const uint8_t sgid[16],
			 const uint8_t dgid[16], uint16_t sport,
			 const void *ib_pkt, size_t ib_len,
			 uint8_t icrc[SHCA_ICRC_LEN])
{
	uint8_t *p = hdr;
	size_t udp_len = sizeof(struct shca_udp_hdr) + ib_len + SHCA_ICRC_LEN;
	struct shca_udp_hdr *udp;
	struct csum c = { 0, 0 };
	size_t hlen;
	uint16_t csum;

	if (ib_len < SHCA_BTH_LEN)
		return -EINVAL;

	if (shca_gid_is_v4(sgid) && shca_gid_is_v4(dgid)) {
		struct shca_ipv4_hdr *ip = hdr;
		struct csum ipc = { 0, 0 };

		if (udp_len > 0xffff - sizeof(*ip))
			return -EMSGSIZE;
		shca_ipv4_init(ip, (uint16_t)(sizeof(*ip) + udp_len),
			       sgid + 12, dgid + 12);
		csum_add(&ipc, ip, sizeof(*ip));
		shca_ipv4_set_csum(ip, csum_fold(&ipc));
		csum_add(&c, ip->saddr, 4);
		csum_add(&c, ip->daddr, 4);
		hlen = SHCA_ROCE_HDR4_LEN;
	} else {
		struct shca_ipv6_hdr *ip = hdr;

		if (udp_len > 0xffff)
			return -EMSGSIZE;
		shca_ipv6_init(ip, (uint16_t)udp_len, sgid, dgid);
		csum_add(&c, ip->saddr, 16);
		csum_add(&c, ip->daddr, 16);
		hlen = SHCA_ROCE_HDR6_LEN;
	}
	udp = (void *)(p + hlen - sizeof(*udp));
	shca_udp_init(udp, sport, SHCA_ROCE_UDP_PORT, (uint16_t)udp_len);

	shca_wire_put_icrc(icrc, shca_wire_icrc(hdr, hlen, ib_pkt, ib_len));

	/* UDP checksum: pseudo header (addresses above, then protocol and
	 * UDP length; the same sum for IPv4 and IPv6), header, data. */
	csum_add_word(&c, SHCA_IPPROTO_UDP);
	csum_add_word(&c, (uint16_t)udp_len);
	csum_add(&c, udp, sizeof(*udp));
	csum_add(&c, ib_pkt, ib_len);
	csum_add(&c, icrc, SHCA_ICRC_LEN);
	csum = csum_fold(&c);
	/* A computed 0 goes out as ones (0 means "none", RFC 768). */
	shca_udp_set_csum(udp, csum ? csum : 0xffff);
	return (int)hlen;
}
