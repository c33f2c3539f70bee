// SPDX-License-Identifier: MIT
/*
 * The wire codec (src/wire/wire.h): header accessors against byte images
 * written by hand from the IBA layouts, the opcode table, build/parse
 * round trips of every opcode, every parse rejection, PSN arithmetic, the
 * ICRC against frames whose ICRC is known, and the RoCE v2 encapsulation.
 */
#include <errno.h>
#include <stdint.h>

#include "harness.h"
#include "wire/wire.h"

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* Reproducible pseudo-random numbers (xorshift64*). */
static uint64_t rnd_state = 0x9e3779b97f4a7c15ull;

static uint64_t rnd64(void)
{
	rnd_state ^= rnd_state >> 12;
	rnd_state ^= rnd_state << 25;
	rnd_state ^= rnd_state >> 27;
	return rnd_state * 0x2545f4914f6cdd1dull;
}

static uint32_t rnd32(void)
{
	return (uint32_t)(rnd64() >> 32);
}

static void assert_bytes(const char *what, const void *got, const void *want,
			 size_t len)
{
	const uint8_t *g = got, *w = want;
	size_t i;

	for (i = 0; i < len; i++)
		if (g[i] != w[i])
			harness_fail(__FILE__, __LINE__,
				     "%s: byte %zu is 0x%02x, expected 0x%02x",
				     what, i, g[i], w[i]);
}

/* Header images ---------------------------------------------------------- */

TEST(bth_image)
{
	/* SEND_ONLY, P_Key 0xffff, DestQP 0x123456, AckReq, PSN 0xabcdef */
	static const uint8_t want[12] = {
		0x04,			/* opcode */
		0x00,			/* SE 0 M 0 PadCnt 0 TVer 0 */
		0xff, 0xff,		/* P_Key */
		0x00,			/* FECN 0 BECN 0 Resv6 0 */
		0x12, 0x34, 0x56,	/* DestQP */
		0x80,			/* AckReq 1, Resv7 0 */
		0xab, 0xcd, 0xef,	/* PSN */
	};
	struct shca_bth bth;

	memset(&bth, 0, sizeof(bth));
	shca_bth_set_opcode(&bth, SHCA_OP_RC_SEND_ONLY);
	shca_bth_set_pkey(&bth, 0xffff);
	shca_bth_set_dqpn(&bth, 0x123456);
	shca_bth_set_ackreq(&bth, true);
	shca_bth_set_psn(&bth, 0xabcdef);
	assert_bytes("BTH", &bth, want, sizeof(want));

	ASSERT_EQ(shca_bth_opcode((const void *)want), 0x04);
	ASSERT_EQ(shca_bth_pkey((const void *)want), 0xffff);
	ASSERT_EQ(shca_bth_dqpn((const void *)want), 0x123456);
	ASSERT_EQ(shca_bth_ackreq((const void *)want), 1);
	ASSERT_EQ(shca_bth_psn((const void *)want), 0xabcdef);
	ASSERT_EQ(shca_bth_se((const void *)want), 0);
	ASSERT_EQ(shca_bth_pad((const void *)want), 0);
}

TEST(bth_bits)
{
	/* Every flag on its own bit, neighbours untouched. */
	static const uint8_t want[12] = {
		0x65,			/* UD SEND_ONLY_WITH_IMMEDIATE */
		0xf5,			/* SE 1 M 1 PadCnt 3 TVer 5 */
		0x80, 0x01,		/* P_Key 0x8001 */
		0xc0,			/* FECN 1 BECN 1 */
		0xff, 0xff, 0xff,	/* DestQP 0xffffff */
		0x00,			/* AckReq 0 */
		0x00, 0x00, 0x01,	/* PSN 1 */
	};
	struct shca_bth bth;

	memset(&bth, 0, sizeof(bth));
	shca_bth_set_opcode(&bth, 0x65);
	shca_bth_set_se(&bth, true);
	shca_bth_set_mig(&bth, true);
	shca_bth_set_pad(&bth, 3);
	shca_bth_set_tver(&bth, 5);
	shca_bth_set_pkey(&bth, 0x8001);
	shca_bth_set_fecn(&bth, true);
	shca_bth_set_becn(&bth, true);
	shca_bth_set_dqpn(&bth, 0xffffff);
	shca_bth_set_psn(&bth, 1);
	assert_bytes("BTH", &bth, want, sizeof(want));
	ASSERT_EQ(shca_bth_se(&bth), 1);
	ASSERT_EQ(shca_bth_mig(&bth), 1);
	ASSERT_EQ(shca_bth_pad(&bth), 3);
	ASSERT_EQ(shca_bth_tver(&bth), 5);
	ASSERT_EQ(shca_bth_fecn(&bth), 1);
	ASSERT_EQ(shca_bth_becn(&bth), 1);

	/* Clearing one bit leaves the rest. */
	shca_bth_set_mig(&bth, false);
	ASSERT_EQ(((uint8_t *)&bth)[1], 0xb5);
	shca_bth_set_fecn(&bth, false);
	ASSERT_EQ(((uint8_t *)&bth)[4], 0x40);
	ASSERT_EQ(shca_bth_dqpn(&bth), 0xffffff);
	/* Values wider than the field are cut, not spilled. */
	shca_bth_set_dqpn(&bth, 0x7f000000 | 0x000102);
	ASSERT_EQ(((uint8_t *)&bth)[4], 0x40);
	ASSERT_EQ(shca_bth_dqpn(&bth), 0x000102);
	shca_bth_set_psn(&bth, 0xff000003);
	ASSERT_EQ(((uint8_t *)&bth)[8], 0x00);
	ASSERT_EQ(shca_bth_psn(&bth), 3);
	shca_bth_set_pad(&bth, 7);
	ASSERT_EQ(((uint8_t *)&bth)[1], 0xb5);
}

TEST(ext_header_images)
{
	static const uint8_t reth_want[16] = {
		0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef,	/* VA */
		0xde, 0xad, 0xbe, 0xef,				/* R_Key */
		0x00, 0x01, 0x00, 0x00,				/* DMA len */
	};
	static const uint8_t atm_want[28] = {
		0xff, 0xee, 0xdd, 0xcc, 0xbb, 0xaa, 0x99, 0x88,	/* VA */
		0x11, 0x22, 0x33, 0x44,				/* R_Key */
		0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x05, /* swap/add */
		0x80, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, /* compare */
	};
	static const uint8_t aeth_want[4] = { 0x2e, 0x00, 0x01, 0x02 };
	static const uint8_t atmack_want[8] = {
		0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x02,
	};
	static const uint8_t imm_want[4] = { 0xca, 0xfe, 0xba, 0xbe };
	static const uint8_t ieth_want[4] = { 0x00, 0x00, 0x12, 0x34 };
	static const uint8_t deth_want[8] = {
		0x80, 0x01, 0x00, 0x00,		/* Q_Key */
		0x00, 0x00, 0x0a, 0xbc,		/* Resv8, SrcQP */
	};
	struct shca_reth reth;
	struct shca_atmeth atm;
	struct shca_aeth aeth;
	struct shca_atmack atmack;
	struct shca_immdt imm;
	struct shca_ieth ieth;
	struct shca_deth deth;
	uint32_t imm_be;

	shca_reth_set_va(&reth, 0x0123456789abcdefull);
	shca_reth_set_rkey(&reth, 0xdeadbeef);
	shca_reth_set_len(&reth, 0x10000);
	assert_bytes("RETH", &reth, reth_want, sizeof(reth_want));
	ASSERT_U64_EQ(shca_reth_va((const void *)reth_want),
		      0x0123456789abcdefull);
	ASSERT_U64_EQ(shca_reth_rkey((const void *)reth_want), 0xdeadbeef);
	ASSERT_EQ(shca_reth_len((const void *)reth_want), 0x10000);

	shca_atmeth_set_va(&atm, 0xffeeddccbbaa9988ull);
	shca_atmeth_set_rkey(&atm, 0x11223344);
	shca_atmeth_set_swap_add(&atm, 5);
	shca_atmeth_set_compare(&atm, 0x8000000000000001ull);
	assert_bytes("AtomicETH", &atm, atm_want, sizeof(atm_want));
	ASSERT_U64_EQ(shca_atmeth_va((const void *)atm_want),
		      0xffeeddccbbaa9988ull);
	ASSERT_U64_EQ(shca_atmeth_rkey((const void *)atm_want), 0x11223344);
	ASSERT_U64_EQ(shca_atmeth_swap_add((const void *)atm_want), 5);
	ASSERT_U64_EQ(shca_atmeth_compare((const void *)atm_want),
		      0x8000000000000001ull);

	/* RNR NAK, timer 14 (1.28 ms), MSN 0x000102 */
	memset(&aeth, 0, sizeof(aeth));
	shca_aeth_set_syndrome(&aeth, shca_aeth_syn_rnr(14));
	shca_aeth_set_msn(&aeth, 0x102);
	assert_bytes("AETH", &aeth, aeth_want, sizeof(aeth_want));
	ASSERT_EQ(shca_aeth_syndrome((const void *)aeth_want), 0x2e);
	ASSERT_EQ(shca_aeth_msn((const void *)aeth_want), 0x102);
	shca_aeth_set_msn(&aeth, 0xff000000 | 7);	/* no spill */
	ASSERT_EQ(shca_aeth_syndrome(&aeth), 0x2e);

	shca_atmack_set_orig(&atmack, 0x0000000100000002ull);
	assert_bytes("AtomicAckETH", &atmack, atmack_want,
		     sizeof(atmack_want));
	ASSERT_U64_EQ(shca_atmack_orig((const void *)atmack_want),
		      0x0000000100000002ull);

	/* Immediate data is the sender's four bytes, untouched. */
	memcpy(&imm_be, imm_want, 4);
	shca_immdt_set_imm_be(&imm, imm_be);
	assert_bytes("ImmDt", &imm, imm_want, sizeof(imm_want));
	ASSERT_EQ(shca_immdt_imm_be((const void *)imm_want), imm_be);

	shca_ieth_set_rkey(&ieth, 0x1234);
	assert_bytes("IETH", &ieth, ieth_want, sizeof(ieth_want));
	ASSERT_EQ(shca_ieth_rkey((const void *)ieth_want), 0x1234);

	shca_deth_set_qkey(&deth, 0x80010000);
	shca_deth_set_sqpn(&deth, 0xff000abc);	/* Resv8 stays 0 */
	assert_bytes("DETH", &deth, deth_want, sizeof(deth_want));
	ASSERT_EQ(shca_deth_qkey((const void *)deth_want), 0x80010000);
	ASSERT_EQ(shca_deth_sqpn((const void *)deth_want), 0xabc);
}

TEST(packet_image)
{
	/* RC RDMA WRITE ONLY WITH IMMEDIATE, SE, 5 bytes "abcde" */
	static const uint8_t want[] = {
		/* BTH: opcode 0x0b, SE 1 PadCnt 3, P_Key 0xffff,
		 * DestQP 0x000011, AckReq 1, PSN 0x000100 */
		0x0b, 0xb0, 0xff, 0xff, 0x00, 0x00, 0x00, 0x11,
		0x80, 0x00, 0x01, 0x00,
		/* RETH: VA 0x7f0000001000, R_Key 0x00abcdef, len 5 */
		0x00, 0x00, 0x7f, 0x00, 0x00, 0x00, 0x10, 0x00,
		0x00, 0xab, 0xcd, 0xef, 0x00, 0x00, 0x00, 0x05,
		/* ImmDt */
		0x01, 0x02, 0x03, 0x04,
		/* payload, pad */
		'a', 'b', 'c', 'd', 'e', 0, 0, 0,
	};
	uint8_t buf[128];
	struct shca_wire_msg m = {
		.opcode = SHCA_OP_RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE,
		.se = true,
		.ackreq = true,
		.pkey = 0xffff,
		.dqpn = 0x11,
		.psn = 0x100,
		.va = 0x7f0000001000ull,
		.rkey = 0xabcdef,
		.dma_len = 5,
		.payload = "abcde",
		.payload_len = 5,
	};
	struct shca_wire_msg p;
	ssize_t n;

	memcpy(&m.imm_be, "\x01\x02\x03\x04", 4);
	memset(buf, 0xa5, sizeof(buf));
	n = shca_wire_build(buf, sizeof(buf), &m);
	ASSERT_EQ(n, sizeof(want));
	assert_bytes("packet", buf, want, sizeof(want));

	ASSERT_EQ(shca_wire_parse(want, sizeof(want), &p), 0);
	ASSERT_EQ(p.opcode, 0x0b);
	ASSERT_EQ(p.hdr_len, 32);
	ASSERT_EQ(p.pad, 3);
	ASSERT_EQ(p.payload_len, 5);
	ASSERT(p.payload == want + 32);
	ASSERT_EQ(p.dma_len, 5);
	ASSERT_EQ(p.rkey, 0xabcdef);
	ASSERT_U64_EQ(p.va, 0x7f0000001000ull);
	ASSERT_EQ(p.imm_be, m.imm_be);
	ASSERT_STR_EQ(p.op->name, "RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE");

	/* Headers only, for a writev sender: PadCnt still from the payload. */
	memset(buf, 0xa5, sizeof(buf));
	n = shca_wire_build_hdr(buf, sizeof(buf), &m);
	ASSERT_EQ(n, 32);
	assert_bytes("headers", buf, want, 32);
	ASSERT_EQ(buf[32], 0xa5);
}

TEST(xrc_packet_image)
{
	/* XRC SEND ONLY WITH IMMEDIATE for XRC SRQ 0x00c003, 3 bytes */
	static const uint8_t want[] = {
		/* BTH: opcode 0xa5, PadCnt 1, P_Key 0xffff, DestQP 0x000011,
		 * AckReq 1, PSN 0x000007 */
		0xa5, 0x10, 0xff, 0xff, 0x00, 0x00, 0x00, 0x11,
		0x80, 0x00, 0x00, 0x07,
		/* XRCETH: reserved 8 bits, XRCSRQ 24 bits */
		0x00, 0x00, 0xc0, 0x03,
		/* ImmDt */
		0x01, 0x02, 0x03, 0x04,
		'x', 'y', 'z', 0,
	};
	uint8_t buf[64];
	struct shca_wire_msg m = {
		.opcode = SHCA_OP_XRC_SEND_ONLY_WITH_IMMEDIATE,
		.ackreq = true,
		.pkey = 0xffff,
		.dqpn = 0x11,
		.psn = 7,
		.xrc_srqn = 0xc003,
		.payload = "xyz",
		.payload_len = 3,
	};
	struct shca_wire_msg p;
	uint8_t bad[sizeof(want)];

	memcpy(&m.imm_be, "\x01\x02\x03\x04", 4);
	ASSERT_EQ(shca_wire_build(buf, sizeof(buf), &m), sizeof(want));
	assert_bytes("xrc packet", buf, want, sizeof(want));
	ASSERT_EQ(shca_wire_parse(want, sizeof(want), &p), 0);
	ASSERT_EQ(p.opcode, 0xa5);
	ASSERT_EQ(p.hdr_len, 20);
	ASSERT_EQ(p.xrc_srqn, 0xc003);
	ASSERT_EQ(p.payload_len, 3);
	ASSERT(p.payload == want + 20);
	ASSERT_EQ(p.imm_be, m.imm_be);
	ASSERT_EQ(p.op->transport, SHCA_TP_XRC);
	/* reserved bits of the XRCETH are ignored */
	memcpy(bad, want, sizeof(bad));
	bad[12] = 0xff;
	ASSERT_EQ(shca_wire_parse(bad, sizeof(bad), &p), 0);
	ASSERT_EQ(p.xrc_srqn, 0xc003);
	/* an SRQ number beyond 24 bits is not sent */
	m.xrc_srqn = 0x1000000;
	ASSERT_EQ(shca_wire_build(buf, sizeof(buf), &m), -EINVAL);
	/* an XRC ACK carries no XRCETH; an XRC request cut before its end
	 * is malformed */
	m = (struct shca_wire_msg){ .opcode = SHCA_OP_XRC_ACKNOWLEDGE,
				    .syndrome = SHCA_AETH_CREDITS_INVALID };
	ASSERT_EQ(shca_wire_build(buf, sizeof(buf), &m), 16);
	ASSERT_EQ(shca_wire_parse(want, 12, &p), -EBADMSG);
	/* an XRC packet is not an RC QP's, nor an RC packet an XRC QP's */
	ASSERT_EQ(shca_wire_parse(want, sizeof(want), &p), 0);
	ASSERT_EQ(shca_wire_check_qp(&p, SHCA_TP_RC, 1024), -EPROTOTYPE);
	ASSERT_EQ(shca_wire_check_qp(&p, SHCA_TP_XRC, 1024), 0);
}

/* The opcode table ------------------------------------------------------- */

TEST(opcode_table)
{
	static const struct {
		uint8_t opcode;
		const char *name;
		uint8_t hdr_len;
	} known[] = {
		{ 0x00, "RC_SEND_FIRST", 12 },
		{ 0x01, "RC_SEND_MIDDLE", 12 },
		{ 0x02, "RC_SEND_LAST", 12 },
		{ 0x03, "RC_SEND_LAST_WITH_IMMEDIATE", 16 },
		{ 0x04, "RC_SEND_ONLY", 12 },
		{ 0x05, "RC_SEND_ONLY_WITH_IMMEDIATE", 16 },
		{ 0x06, "RC_RDMA_WRITE_FIRST", 28 },
		{ 0x07, "RC_RDMA_WRITE_MIDDLE", 12 },
		{ 0x08, "RC_RDMA_WRITE_LAST", 12 },
		{ 0x09, "RC_RDMA_WRITE_LAST_WITH_IMMEDIATE", 16 },
		{ 0x0a, "RC_RDMA_WRITE_ONLY", 28 },
		{ 0x0b, "RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE", 32 },
		{ 0x0c, "RC_RDMA_READ_REQUEST", 28 },
		{ 0x0d, "RC_RDMA_READ_RESPONSE_FIRST", 16 },
		{ 0x0e, "RC_RDMA_READ_RESPONSE_MIDDLE", 12 },
		{ 0x0f, "RC_RDMA_READ_RESPONSE_LAST", 16 },
		{ 0x10, "RC_RDMA_READ_RESPONSE_ONLY", 16 },
		{ 0x11, "RC_ACKNOWLEDGE", 16 },
		{ 0x12, "RC_ATOMIC_ACKNOWLEDGE", 24 },
		{ 0x13, "RC_COMPARE_SWAP", 40 },
		{ 0x14, "RC_FETCH_ADD", 40 },
		{ 0x16, "RC_SEND_LAST_WITH_INVALIDATE", 16 },
		{ 0x17, "RC_SEND_ONLY_WITH_INVALIDATE", 16 },
		{ 0x1c, "RC_FLUSH", 32 },		/* Annex A19 */
		{ 0x1d, "RC_ATOMIC_WRITE", 28 },
		{ 0x20, "UC_SEND_FIRST", 12 },
		{ 0x21, "UC_SEND_MIDDLE", 12 },
		{ 0x22, "UC_SEND_LAST", 12 },
		{ 0x23, "UC_SEND_LAST_WITH_IMMEDIATE", 16 },
		{ 0x24, "UC_SEND_ONLY", 12 },
		{ 0x25, "UC_SEND_ONLY_WITH_IMMEDIATE", 16 },
		{ 0x26, "UC_RDMA_WRITE_FIRST", 28 },
		{ 0x27, "UC_RDMA_WRITE_MIDDLE", 12 },
		{ 0x28, "UC_RDMA_WRITE_LAST", 12 },
		{ 0x29, "UC_RDMA_WRITE_LAST_WITH_IMMEDIATE", 16 },
		{ 0x2a, "UC_RDMA_WRITE_ONLY", 28 },
		{ 0x2b, "UC_RDMA_WRITE_ONLY_WITH_IMMEDIATE", 32 },
		{ 0x64, "UD_SEND_ONLY", 20 },
		{ 0x65, "UD_SEND_ONLY_WITH_IMMEDIATE", 24 },
		/* XRC: RC's, requests 4 bytes longer (the XRCETH) */
		{ 0xa0, "XRC_SEND_FIRST", 16 },
		{ 0xa1, "XRC_SEND_MIDDLE", 16 },
		{ 0xa2, "XRC_SEND_LAST", 16 },
		{ 0xa3, "XRC_SEND_LAST_WITH_IMMEDIATE", 20 },
		{ 0xa4, "XRC_SEND_ONLY", 16 },
		{ 0xa5, "XRC_SEND_ONLY_WITH_IMMEDIATE", 20 },
		{ 0xa6, "XRC_RDMA_WRITE_FIRST", 32 },
		{ 0xa7, "XRC_RDMA_WRITE_MIDDLE", 16 },
		{ 0xa8, "XRC_RDMA_WRITE_LAST", 16 },
		{ 0xa9, "XRC_RDMA_WRITE_LAST_WITH_IMMEDIATE", 20 },
		{ 0xaa, "XRC_RDMA_WRITE_ONLY", 32 },
		{ 0xab, "XRC_RDMA_WRITE_ONLY_WITH_IMMEDIATE", 36 },
		{ 0xac, "XRC_RDMA_READ_REQUEST", 32 },
		{ 0xad, "XRC_RDMA_READ_RESPONSE_FIRST", 16 },
		{ 0xae, "XRC_RDMA_READ_RESPONSE_MIDDLE", 12 },
		{ 0xaf, "XRC_RDMA_READ_RESPONSE_LAST", 16 },
		{ 0xb0, "XRC_RDMA_READ_RESPONSE_ONLY", 16 },
		{ 0xb1, "XRC_ACKNOWLEDGE", 16 },
		{ 0xb2, "XRC_ATOMIC_ACKNOWLEDGE", 24 },
		{ 0xb3, "XRC_COMPARE_SWAP", 44 },
		{ 0xb4, "XRC_FETCH_ADD", 44 },
		{ 0xb6, "XRC_SEND_LAST_WITH_INVALIDATE", 20 },
		{ 0xb7, "XRC_SEND_ONLY_WITH_INVALIDATE", 20 },
		{ 0xbc, "XRC_FLUSH", 36 },
		{ 0xbd, "XRC_ATOMIC_WRITE", 32 },
	};
	unsigned int i, n = 0, opc;

	for (i = 0; i < ARRAY_LEN(known); i++) {
		const struct shca_wire_opinfo *op;

		op = shca_wire_op(known[i].opcode);

		ASSERT_NOT_NULL(op);
		ASSERT_STR_EQ(op->name, known[i].name);
		ASSERT_EQ(op->hdr_len, known[i].hdr_len);
		ASSERT_EQ(op->transport, known[i].opcode >> 5);
	}
	for (opc = 0; opc < 256; opc++)
		if (shca_wire_op((uint8_t)opc))
			n++;
	/* Nothing else: reserved, RD and CNP opcodes have no entry. */
	ASSERT_EQ(n, ARRAY_LEN(known));
	ASSERT_NULL(shca_wire_op(0x15));
	ASSERT_NULL(shca_wire_op(0x18));
	ASSERT_NULL(shca_wire_op(0x2c));
	ASSERT_NULL(shca_wire_op(0x40));	/* RD SEND_FIRST */
	ASSERT_NULL(shca_wire_op(0x60));
	ASSERT_NULL(shca_wire_op(0x81));	/* CNP */
	ASSERT_NULL(shca_wire_op(0xb5));	/* XRC reserved */
	ASSERT_NULL(shca_wire_op(0xbe));
	ASSERT_NULL(shca_wire_op(0xff));
}

/* The mask bits say consistent things about every opcode. */
TEST(opcode_masks)
{
	const uint32_t pos = SHCA_OPM_FIRST | SHCA_OPM_MIDDLE | SHCA_OPM_LAST;
	const uint32_t kind = SHCA_OPM_SEND | SHCA_OPM_WRITE |
			      SHCA_OPM_READ_REQ | SHCA_OPM_READ_RESP |
			      SHCA_OPM_ATOMIC | SHCA_OPM_ACK |
			      SHCA_OPM_ATOMIC_ACK | SHCA_OPM_FLUSH |
			      SHCA_OPM_ATOMIC_WRITE;
	unsigned int opc;

	for (opc = 0; opc < 256; opc++) {
		const struct shca_wire_opinfo *op = shca_wire_op((uint8_t)opc);
		uint32_t m;

		if (!op)
			continue;
		m = op->mask;
		/* one kind; request xor response */
		ASSERT_EQ(__builtin_popcount(m & kind), 1);
		ASSERT_EQ(!(m & SHCA_OPM_REQ), !!(m & SHCA_OPM_RESP));
		/* position: first, middle, last or only */
		ASSERT((m & pos) == SHCA_OPM_FIRST ||
		       (m & pos) == SHCA_OPM_MIDDLE ||
		       (m & pos) == SHCA_OPM_LAST ||
		       (m & pos) == SHCA_OPM_ONLY);
		/* payload exactly for SEND, WRITE, ATOMIC WRITE and read
		 * responses */
		ASSERT_EQ(!!(m & SHCA_OPM_PAYLOAD),
			  !!(m & (SHCA_OPM_SEND | SHCA_OPM_WRITE |
				  SHCA_OPM_ATOMIC_WRITE | SHCA_OPM_READ_RESP)));
		/* RC and XRC requests need an ACK; nothing else does */
		ASSERT_EQ(!!(m & SHCA_OPM_NEEDS_ACK),
			  (op->transport == SHCA_TP_RC ||
			   op->transport == SHCA_TP_XRC) &&
				  (m & SHCA_OPM_REQ));
		/* XRC requests name their SRQ; nothing else does */
		ASSERT_EQ(!!(m & SHCA_OPM_XRCETH),
			  op->transport == SHCA_TP_XRC && (m & SHCA_OPM_REQ));
		/* XRC mirrors RC: same low five bits, same kind */
		if (op->transport == SHCA_TP_XRC) {
			const struct shca_wire_opinfo *rc =
				shca_wire_op((uint8_t)(opc & 0x1f));

			ASSERT_NOT_NULL(rc);
			ASSERT_EQ(m & ~SHCA_OPM_XRCETH, rc->mask);
			ASSERT_EQ(shca_wire_xrc_opcode((uint8_t)(opc & 0x1f)),
				  opc);
		}
		ASSERT_EQ(!!(m & SHCA_OPM_NEEDS_RESP),
			  !!(m & (SHCA_OPM_READ_REQ | SHCA_OPM_ATOMIC |
				  SHCA_OPM_FLUSH)));
		/* a WRITE carries the RETH on its first packet; FLUSH and
		 * ATOMIC WRITE are single packets with one, FLUSH alone
		 * with the FETH (before it) */
		ASSERT_EQ(!!(m & SHCA_OPM_FETH), !!(m & SHCA_OPM_FLUSH));
		if (m & (SHCA_OPM_WRITE | SHCA_OPM_READ_REQ | SHCA_OPM_FLUSH |
			 SHCA_OPM_ATOMIC_WRITE))
			ASSERT_EQ(!!(m & SHCA_OPM_RETH),
				  !!(m & SHCA_OPM_FIRST));
		else
			ASSERT(!(m & SHCA_OPM_RETH));
		/* the AETH: ACKs, atomic ACKs and read responses but their
		 * middles */
		ASSERT_EQ(!!(m & SHCA_OPM_AETH),
			  (m & (SHCA_OPM_ACK | SHCA_OPM_ATOMIC_ACK)) ||
				  ((m & SHCA_OPM_READ_RESP) &&
				   !(m & SHCA_OPM_MIDDLE)));
		ASSERT_EQ(!!(m & SHCA_OPM_ATMETH), !!(m & SHCA_OPM_ATOMIC));
		ASSERT_EQ(!!(m & SHCA_OPM_ATMACK),
			  !!(m & SHCA_OPM_ATOMIC_ACK));
		ASSERT_EQ(!!(m & SHCA_OPM_DETH), op->transport == SHCA_TP_UD);
		/* completions at the responder on the last packet of a SEND,
		 * or of a WRITE with immediate */
		ASSERT_EQ(!!(m & SHCA_OPM_COMP),
			  (m & SHCA_OPM_LAST) &&
				  ((m & SHCA_OPM_SEND) ||
				   ((m & SHCA_OPM_WRITE) &&
				    (m & SHCA_OPM_IMMDT))));
		ASSERT(!((m & SHCA_OPM_IMMDT) && (m & SHCA_OPM_IETH)));
		if (m & (SHCA_OPM_IMMDT | SHCA_OPM_IETH))
			ASSERT(m & SHCA_OPM_LAST);
		ASSERT(shca_wire_op_is(op, m));
	}
	ASSERT(shca_wire_op_is(shca_wire_op(SHCA_OP_RC_SEND_ONLY),
			       SHCA_OPM_ONLY | SHCA_OPM_SEND));
	ASSERT(!shca_wire_op_is(shca_wire_op(SHCA_OP_RC_SEND_FIRST),
				SHCA_OPM_ONLY));
}

/* Round trips ------------------------------------------------------------ */

static uint8_t random_syndrome(const struct shca_wire_opinfo *op)
{
	uint8_t syn;

	if (!(op->mask & SHCA_OPM_ACK))
		return shca_aeth_syn_ack(rnd32() & 0x1f);
	do
		syn = (uint8_t)rnd32();
	while (!shca_aeth_syn_valid(syn));
	return syn;
}

static void random_msg(struct shca_wire_msg *m, uint8_t opcode,
		       const void *payload, uint32_t len)
{
	const struct shca_wire_opinfo *op = shca_wire_op(opcode);
	uint32_t r = rnd32();

	memset(m, 0, sizeof(*m));
	m->opcode = opcode;
	m->se = r & 1;
	m->mig = r & 2;
	m->fecn = r & 4;
	m->becn = r & 8;
	m->ackreq = r & 16;
	m->pkey = (uint16_t)rnd32();
	m->dqpn = rnd32() & SHCA_QPN_MASK;
	m->psn = rnd32() & SHCA_PSN_MASK;
	if (op->mask & (SHCA_OPM_RETH | SHCA_OPM_ATMETH)) {
		m->va = rnd64();
		m->rkey = rnd32();
	}
	if (op->mask & SHCA_OPM_RETH)
		m->dma_len = rnd32();
	if (op->mask & SHCA_OPM_ATMETH) {
		m->swap_add = rnd64();
		m->compare = rnd64();
	}
	if (op->mask & SHCA_OPM_AETH) {
		m->syndrome = random_syndrome(op);
		m->msn = rnd32() & SHCA_MSN_MASK;
	}
	if (op->mask & SHCA_OPM_ATMACK)
		m->orig = rnd64();
	if (op->mask & SHCA_OPM_IMMDT)
		m->imm_be = rnd32();
	if (op->mask & SHCA_OPM_IETH)
		m->inv_rkey = rnd32();
	if (op->mask & SHCA_OPM_DETH) {
		m->qkey = rnd32();
		m->sqpn = rnd32() & SHCA_QPN_MASK;
	}
	if (op->mask & SHCA_OPM_PAYLOAD) {
		m->payload = payload;
		m->payload_len = len;
	}
}

static void assert_same_msg(const struct shca_wire_msg *a,
			    const struct shca_wire_msg *b)
{
	ASSERT_EQ(a->opcode, b->opcode);
	ASSERT_EQ(a->se, b->se);
	ASSERT_EQ(a->mig, b->mig);
	ASSERT_EQ(a->fecn, b->fecn);
	ASSERT_EQ(a->becn, b->becn);
	ASSERT_EQ(a->ackreq, b->ackreq);
	ASSERT_EQ(a->pkey, b->pkey);
	ASSERT_EQ(a->dqpn, b->dqpn);
	ASSERT_EQ(a->psn, b->psn);
	ASSERT_U64_EQ(a->va, b->va);
	ASSERT_U64_EQ(a->rkey, b->rkey);
	ASSERT_U64_EQ(a->dma_len, b->dma_len);
	ASSERT_U64_EQ(a->swap_add, b->swap_add);
	ASSERT_U64_EQ(a->compare, b->compare);
	ASSERT_EQ(a->syndrome, b->syndrome);
	ASSERT_EQ(a->msn, b->msn);
	ASSERT_U64_EQ(a->orig, b->orig);
	ASSERT_U64_EQ(a->imm_be, b->imm_be);
	ASSERT_U64_EQ(a->inv_rkey, b->inv_rkey);
	ASSERT_U64_EQ(a->qkey, b->qkey);
	ASSERT_EQ(a->sqpn, b->sqpn);
	ASSERT_EQ(a->payload_len, b->payload_len);
	if (a->payload_len)
		ASSERT(!memcmp(a->payload, b->payload, a->payload_len));
}

TEST(roundtrip_every_opcode)
{
	static const uint32_t lens[] = { 0, 1, 2, 3, 4, 5, 7, 255, 256,
					 1021, 1024, 4093, 4095, 4096 };
	static uint8_t payload[SHCA_WIRE_MAX_PMTU];
	static uint8_t buf[SHCA_WIRE_MAX_PKT + 8];
	unsigned int opc, i, rep, count = 0;

	for (i = 0; i < sizeof(payload); i++)
		payload[i] = (uint8_t)rnd32();

	for (opc = 0; opc < 256; opc++) {
		const struct shca_wire_opinfo *op = shca_wire_op((uint8_t)opc);

		if (!op)
			continue;
		for (i = 0; i < ARRAY_LEN(lens); i++) {
			if (lens[i] && !(op->mask & SHCA_OPM_PAYLOAD))
				break;
			for (rep = 0; rep < 8; rep++) {
				struct shca_wire_msg m, p;
				ssize_t n;

				random_msg(&m, (uint8_t)opc, payload, lens[i]);
				n = shca_wire_build(buf, sizeof(buf), &m);
				ASSERT_EQ(n, op->hdr_len + lens[i] +
						     shca_wire_pad(lens[i]));
				ASSERT_EQ(n % 4, 0);
				ASSERT_EQ(shca_wire_parse(buf, (size_t)n, &p),
					  0);
				assert_same_msg(&m, &p);
				ASSERT(p.op == op);
				ASSERT_EQ(p.hdr_len, op->hdr_len);
				ASSERT_EQ(p.pad, shca_wire_pad(lens[i]));
				if (op->mask & SHCA_OPM_PAYLOAD)
					ASSERT(p.payload == buf + op->hdr_len);
				else
					ASSERT_NULL(p.payload);
				/* pad bytes are zero */
				ASSERT(!memcmp(buf + op->hdr_len + lens[i],
					       "\0\0\0", p.pad));
				count++;
			}
		}
	}
	printf("  %u packets round-tripped\n", count);
}

/* Fields of headers an opcode does not carry come back as zero. */
TEST(parse_zeroes_absent_fields)
{
	struct shca_wire_msg m, p;
	uint8_t buf[64];
	ssize_t n;

	memset(&m, 0, sizeof(m));
	m.opcode = SHCA_OP_RC_SEND_MIDDLE;
	m.dqpn = 5;
	m.va = 1;		/* not carried by SEND_MIDDLE */
	m.qkey = 2;
	m.syndrome = 0x1f;
	m.payload = "abcd";
	m.payload_len = 4;
	n = shca_wire_build(buf, sizeof(buf), &m);
	ASSERT_EQ(n, 16);
	memset(&p, 0xa5, sizeof(p));
	ASSERT_EQ(shca_wire_parse(buf, (size_t)n, &p), 0);
	ASSERT_U64_EQ(p.va, 0);
	ASSERT_U64_EQ(p.qkey, 0);
	ASSERT_EQ(p.syndrome, 0);
	ASSERT_EQ(p.dqpn, 5);
}

/* Parse rejections ------------------------------------------------------- */

/* A valid packet of opcode opc with len payload bytes in buf. */
static size_t valid_packet(uint8_t *buf, size_t cap, uint8_t opc, uint32_t len)
{
	static uint8_t payload[SHCA_WIRE_MAX_PMTU];
	struct shca_wire_msg m;
	ssize_t n;

	random_msg(&m, opc, payload, len);
	n = shca_wire_build(buf, cap, &m);
	ASSERT_GT(n, 0);
	return (size_t)n;
}

static void expect_parse(const void *buf, size_t len, int err)
{
	struct shca_wire_msg p, untouched;

	memset(&p, 0x5a, sizeof(p));
	memcpy(&untouched, &p, sizeof(p));
	ASSERT_EQ(shca_wire_parse(buf, len, &p), err);
	if (err)	/* out-parameters are written only on success */
		ASSERT(!memcmp(&p, &untouched, sizeof(p)));
}

TEST(parse_truncated)
{
	static uint8_t buf[SHCA_WIRE_MAX_PKT];
	unsigned int opc;
	size_t len, n;

	expect_parse(buf, 0, -EBADMSG);
	for (opc = 0; opc < 256; opc++) {
		const struct shca_wire_opinfo *op = shca_wire_op((uint8_t)opc);

		if (!op)
			continue;
		n = valid_packet(buf, sizeof(buf), (uint8_t)opc, 0);
		ASSERT_EQ(n, op->hdr_len);
		expect_parse(buf, n, 0);
		/* cut anywhere inside the headers, at every boundary too */
		for (len = 0; len < n; len++)
			expect_parse(buf, len, -EBADMSG);
	}
}

TEST(parse_length_not_multiple_of_4)
{
	uint8_t buf[64];
	size_t n;

	n = valid_packet(buf, sizeof(buf), SHCA_OP_RC_SEND_ONLY, 8);
	ASSERT_EQ(n, 20);
	expect_parse(buf, n, 0);
	expect_parse(buf, n - 1, -EBADMSG);
	expect_parse(buf, n - 2, -EBADMSG);
	expect_parse(buf, n + 1, -EBADMSG);
	expect_parse(buf, n + 3, -EBADMSG);
}

TEST(parse_bad_pad)
{
	uint8_t buf[64];
	size_t n;

	/* zero-byte SEND_ONLY: no room for any pad */
	n = valid_packet(buf, sizeof(buf), SHCA_OP_RC_SEND_ONLY, 0);
	ASSERT_EQ(n, 12);
	shca_bth_set_pad((void *)buf, 1);
	expect_parse(buf, n, -EBADMSG);
	shca_bth_set_pad((void *)buf, 3);
	expect_parse(buf, n, -EBADMSG);

	/* 4 bytes after the headers: pad 3 leaves 1 byte of payload */
	n = valid_packet(buf, sizeof(buf), SHCA_OP_UC_SEND_ONLY, 4);
	shca_bth_set_pad((void *)buf, 3);
	{
		struct shca_wire_msg p;

		ASSERT_EQ(shca_wire_parse(buf, n, &p), 0);
		ASSERT_EQ(p.payload_len, 1);
		ASSERT_EQ(p.pad, 3);
	}

	/* opcodes without payload: no pad, no trailing bytes */
	n = valid_packet(buf, sizeof(buf), SHCA_OP_RC_ACKNOWLEDGE, 0);
	ASSERT_EQ(n, 16);
	shca_bth_set_pad((void *)buf, 2);
	expect_parse(buf, n, -EBADMSG);
	shca_bth_set_pad((void *)buf, 0);
	expect_parse(buf, n, 0);
	expect_parse(buf, n + 4, -EBADMSG);

	n = valid_packet(buf, sizeof(buf), SHCA_OP_RC_RDMA_READ_REQUEST, 0);
	expect_parse(buf, n + 4, -EBADMSG);
	n = valid_packet(buf, sizeof(buf), SHCA_OP_RC_FETCH_ADD, 0);
	shca_bth_set_pad((void *)buf, 1);
	expect_parse(buf, n, -EBADMSG);
}

TEST(parse_oversized_payload)
{
	static uint8_t buf[SHCA_WIRE_MAX_PKT + 64];
	struct shca_wire_msg p;
	size_t n;

	n = valid_packet(buf, sizeof(buf), SHCA_OP_RC_SEND_ONLY,
			 SHCA_WIRE_MAX_PMTU);
	ASSERT_EQ(shca_wire_parse(buf, n, &p), 0);
	ASSERT_EQ(p.payload_len, SHCA_WIRE_MAX_PMTU);
	/* one more 4-byte word: 4100 bytes, or 4097 with pad 3 */
	expect_parse(buf, n + 4, -EMSGSIZE);
	shca_bth_set_pad((void *)buf, 3);
	expect_parse(buf, n + 4, -EMSGSIZE);
	expect_parse(buf, n + 60, -EMSGSIZE);

	n = valid_packet(buf, sizeof(buf), SHCA_OP_UD_SEND_ONLY_WITH_IMMEDIATE,
			 SHCA_WIRE_MAX_PMTU);
	expect_parse(buf, n, 0);
	expect_parse(buf, n + 4, -EMSGSIZE);
	n = valid_packet(buf, sizeof(buf), SHCA_OP_RC_RDMA_READ_RESPONSE_MIDDLE,
			 SHCA_WIRE_MAX_PMTU);
	expect_parse(buf, n, 0);
	expect_parse(buf, n + 4, -EMSGSIZE);
}

TEST(parse_reserved_opcodes)
{
	uint8_t buf[64];
	unsigned int opc, n = 0;

	valid_packet(buf, sizeof(buf), SHCA_OP_RC_SEND_ONLY, 4);
	for (opc = 0; opc < 256; opc++) {
		if (shca_wire_op((uint8_t)opc))
			continue;
		shca_bth_set_opcode((void *)buf, (uint8_t)opc);
		expect_parse(buf, 16, -EOPNOTSUPP);
		expect_parse(buf, 12, -EOPNOTSUPP);
		n++;
	}
	ASSERT_EQ(n, 256 - 39 - 25);
	/* ... but a truncated BTH is malformed whatever its opcode */
	buf[0] = 0x15;
	expect_parse(buf, 11, -EBADMSG);
}

TEST(parse_tver)
{
	uint8_t buf[64];
	unsigned int v;
	size_t n;

	n = valid_packet(buf, sizeof(buf), SHCA_OP_RC_SEND_ONLY, 4);
	for (v = 1; v < 16; v++) {
		shca_bth_set_tver((void *)buf, v);
		expect_parse(buf, n, -EPROTO);
	}
	shca_bth_set_tver((void *)buf, 0);
	expect_parse(buf, n, 0);
}

TEST(parse_aeth_syndromes)
{
	static uint8_t buf[SHCA_WIRE_MAX_PKT];
	struct shca_aeth *aeth = (void *)(buf + SHCA_BTH_LEN);
	unsigned int syn, good = 0;
	size_t n;

	/* Acknowledge: ACK, RNR NAK, NAK 0..4; the rest is reserved */
	n = valid_packet(buf, sizeof(buf), SHCA_OP_RC_ACKNOWLEDGE, 0);
	for (syn = 0; syn < 256; syn++) {
		bool valid = !(syn & 0x80) && (syn & 0x60) != 0x40 &&
			     ((syn & 0x60) != 0x60 || (syn & 0x1f) <= 4);

		shca_aeth_set_syndrome(aeth, (uint8_t)syn);
		expect_parse(buf, n, valid ? 0 : -EBADMSG);
		ASSERT_EQ(shca_aeth_syn_valid((uint8_t)syn), valid);
		good += valid;
	}
	ASSERT_EQ(good, 32 + 32 + 5);

	/* read responses and atomic ACKs carry ACK syndromes only */
	n = valid_packet(buf, sizeof(buf), SHCA_OP_RC_RDMA_READ_RESPONSE_FIRST,
			 SHCA_WIRE_MIN_PMTU);
	shca_aeth_set_syndrome(aeth, shca_aeth_syn_nak(SHCA_NAK_INVALID_REQ));
	expect_parse(buf, n, -EBADMSG);
	shca_aeth_set_syndrome(aeth, shca_aeth_syn_rnr(3));
	expect_parse(buf, n, -EBADMSG);
	shca_aeth_set_syndrome(aeth, shca_aeth_syn_ack(3));
	expect_parse(buf, n, 0);

	n = valid_packet(buf, sizeof(buf), SHCA_OP_RC_ATOMIC_ACKNOWLEDGE, 0);
	shca_aeth_set_syndrome(aeth, shca_aeth_syn_rnr(0));
	expect_parse(buf, n, -EBADMSG);
}

/* What parse accepts, build writes back the same (reserved bits aside). */
TEST(parse_random_mutations)
{
	static uint8_t buf[SHCA_WIRE_MAX_PKT + 16], out[SHCA_WIRE_MAX_PKT + 16];
	unsigned int i, k, ok = 0;

	for (i = 0; i < 200000; i++) {
		struct shca_wire_msg p, q;
		uint8_t opc;
		size_t n;
		ssize_t r;

		do
			opc = (uint8_t)rnd32();
		while (!shca_wire_op(opc));
		n = valid_packet(buf, sizeof(buf), opc, rnd32() % 64);
		for (k = rnd32() % 4; k > 0; k--)
			buf[rnd32() % (n + 8)] ^= (uint8_t)(1u << rnd32() % 8);
		n = n + 8 - rnd32() % 16;
		if (shca_wire_parse(buf, n, &p))
			continue;
		ok++;
		ASSERT_LE(p.hdr_len + p.payload_len + p.pad, n);
		r = shca_wire_build(out, sizeof(out), &p);
		ASSERT_EQ(r, (ssize_t)n);
		ASSERT_EQ(shca_wire_parse(out, (size_t)r, &q), 0);
		assert_same_msg(&p, &q);
	}
	printf("  %u of 200000 mutated packets parsed\n", ok);
	ASSERT_GT(ok, 1000);
}

/* Checks against the receiving QP --------------------------------------- */

static struct shca_wire_msg parsed(uint8_t *buf, size_t cap, uint8_t opc,
				   uint32_t len)
{
	struct shca_wire_msg p;
	size_t n = valid_packet(buf, cap, opc, len);

	ASSERT_EQ(shca_wire_parse(buf, n, &p), 0);
	return p;
}

TEST(check_qp_transport)
{
	static uint8_t buf[SHCA_WIRE_MAX_PKT];
	struct shca_wire_msg p;

	p = parsed(buf, sizeof(buf), SHCA_OP_UD_SEND_ONLY, 8);
	ASSERT_EQ(shca_wire_check_qp(&p, SHCA_TP_UD, 1024), 0);
	ASSERT_EQ(shca_wire_check_qp(&p, SHCA_TP_RC, 1024), -EPROTOTYPE);
	ASSERT_EQ(shca_wire_check_qp(&p, SHCA_TP_UC, 1024), -EPROTOTYPE);
	p = parsed(buf, sizeof(buf), SHCA_OP_RC_SEND_ONLY, 8);
	ASSERT_EQ(shca_wire_check_qp(&p, SHCA_TP_RC, 1024), 0);
	ASSERT_EQ(shca_wire_check_qp(&p, SHCA_TP_UD, 1024), -EPROTOTYPE);
	ASSERT_EQ(shca_wire_check_qp(&p, SHCA_TP_UC, 1024), -EPROTOTYPE);
	p = parsed(buf, sizeof(buf), SHCA_OP_UC_RDMA_WRITE_ONLY, 8);
	ASSERT_EQ(shca_wire_check_qp(&p, SHCA_TP_UC, 1024), 0);
	ASSERT_EQ(shca_wire_check_qp(&p, SHCA_TP_RC, 1024), -EPROTOTYPE);
	p = parsed(buf, sizeof(buf), SHCA_OP_RC_ACKNOWLEDGE, 0);
	ASSERT_EQ(shca_wire_check_qp(&p, SHCA_TP_RC, 256), 0);
	ASSERT_EQ(shca_wire_check_qp(&p, SHCA_TP_UC, 256), -EPROTOTYPE);

	/* path MTU must be one of IB's */
	ASSERT_EQ(shca_wire_check_qp(&p, SHCA_TP_RC, 0), -EINVAL);
	ASSERT_EQ(shca_wire_check_qp(&p, SHCA_TP_RC, 128), -EINVAL);
	ASSERT_EQ(shca_wire_check_qp(&p, SHCA_TP_RC, 1500), -EINVAL);
	ASSERT_EQ(shca_wire_check_qp(&p, SHCA_TP_RC, 8192), -EINVAL);
}

TEST(check_qp_pmtu)
{
	static uint8_t buf[SHCA_WIRE_MAX_PKT];
	static const unsigned int pmtus[] = { 256, 512, 1024, 2048, 4096 };
	struct shca_wire_msg p;
	unsigned int i, mtu;

	for (i = 0; i < ARRAY_LEN(pmtus); i++) {
		mtu = pmtus[i];
		/* first and middle: exactly one MTU */
		p = parsed(buf, sizeof(buf), SHCA_OP_RC_SEND_FIRST, mtu);
		ASSERT_EQ(shca_wire_check_qp(&p, SHCA_TP_RC, mtu), 0);
		if (mtu > 256) {
			p = parsed(buf, sizeof(buf), SHCA_OP_RC_SEND_FIRST,
				   mtu / 2);
			ASSERT_EQ(shca_wire_check_qp(&p, SHCA_TP_RC, mtu),
				  -EMSGSIZE);
		}
		p = parsed(buf, sizeof(buf), SHCA_OP_UC_RDMA_WRITE_MIDDLE,
			   mtu - 1);
		ASSERT_EQ(shca_wire_check_qp(&p, SHCA_TP_UC, mtu), -EMSGSIZE);
		/* last: 1..MTU */
		p = parsed(buf, sizeof(buf),
			   SHCA_OP_RC_RDMA_READ_RESPONSE_LAST, 1);
		ASSERT_EQ(shca_wire_check_qp(&p, SHCA_TP_RC, mtu), 0);
		p = parsed(buf, sizeof(buf),
			   SHCA_OP_RC_RDMA_READ_RESPONSE_LAST, 0);
		ASSERT_EQ(shca_wire_check_qp(&p, SHCA_TP_RC, mtu), -EMSGSIZE);
		p = parsed(buf, sizeof(buf), SHCA_OP_RC_SEND_LAST, mtu);
		ASSERT_EQ(shca_wire_check_qp(&p, SHCA_TP_RC, mtu), 0);
		/* only: 0..MTU */
		p = parsed(buf, sizeof(buf), SHCA_OP_RC_SEND_ONLY, 0);
		ASSERT_EQ(shca_wire_check_qp(&p, SHCA_TP_RC, mtu), 0);
		p = parsed(buf, sizeof(buf), SHCA_OP_UD_SEND_ONLY, mtu);
		ASSERT_EQ(shca_wire_check_qp(&p, SHCA_TP_UD, mtu), 0);
		if (mtu < 4096) {
			p = parsed(buf, sizeof(buf), SHCA_OP_RC_SEND_LAST,
				   mtu + 1);
			ASSERT_EQ(shca_wire_check_qp(&p, SHCA_TP_RC, mtu),
				  -EMSGSIZE);
			p = parsed(buf, sizeof(buf), SHCA_OP_UD_SEND_ONLY,
				   mtu + 1);
			ASSERT_EQ(shca_wire_check_qp(&p, SHCA_TP_UD, mtu),
				  -EMSGSIZE);
		}
	}
}

/* Build rejections ------------------------------------------------------- */

TEST(build_rejects)
{
	static uint8_t buf[SHCA_WIRE_MAX_PKT + 64];
	static uint8_t payload[SHCA_WIRE_MAX_PMTU + 1];
	struct shca_wire_msg m;

	memset(&m, 0, sizeof(m));
	m.opcode = 0x15;
	ASSERT_EQ(shca_wire_build(buf, sizeof(buf), &m), -EINVAL);
	m.opcode = 0x81;
	ASSERT_EQ(shca_wire_build_hdr(buf, sizeof(buf), &m), -EINVAL);

	m.opcode = SHCA_OP_RC_SEND_ONLY;
	ASSERT_EQ(shca_wire_build(buf, sizeof(buf), &m), 12);
	m.dqpn = 0x1000000;
	ASSERT_EQ(shca_wire_build(buf, sizeof(buf), &m), -EINVAL);
	m.dqpn = 0;
	m.psn = 0x1000000;
	ASSERT_EQ(shca_wire_build(buf, sizeof(buf), &m), -EINVAL);
	m.psn = 0;
	m.payload = payload;
	m.payload_len = SHCA_WIRE_MAX_PMTU + 1;
	ASSERT_EQ(shca_wire_build(buf, sizeof(buf), &m), -EINVAL);
	m.payload = NULL;
	m.payload_len = 4;
	ASSERT_EQ(shca_wire_build(buf, sizeof(buf), &m), -EINVAL);
	/* too small a buffer */
	m.payload = payload;
	m.payload_len = 5;
	ASSERT_EQ(shca_wire_build(buf, 12 + 7, &m), -ENOSPC);
	ASSERT_EQ(shca_wire_build(buf, 12 + 8, &m), 20);
	ASSERT_EQ(shca_wire_build_hdr(buf, 11, &m), -ENOSPC);

	/* payload on an opcode without one */
	memset(&m, 0, sizeof(m));
	m.opcode = SHCA_OP_RC_ACKNOWLEDGE;
	m.payload = payload;
	m.payload_len = 4;
	ASSERT_EQ(shca_wire_build(buf, sizeof(buf), &m), -EINVAL);
	m.payload_len = 0;
	ASSERT_EQ(shca_wire_build(buf, sizeof(buf), &m), 16);
	/* reserved syndromes, NAKs outside Acknowledge packets, MSN */
	m.syndrome = 0x40;
	ASSERT_EQ(shca_wire_build(buf, sizeof(buf), &m), -EINVAL);
	m.syndrome = shca_aeth_syn_nak((enum shca_aeth_nak)5);
	ASSERT_EQ(shca_wire_build(buf, sizeof(buf), &m), -EINVAL);
	m.syndrome = shca_aeth_syn_nak(SHCA_NAK_REMOTE_OP);
	ASSERT_EQ(shca_wire_build(buf, sizeof(buf), &m), 16);
	m.msn = 0x1000000;
	ASSERT_EQ(shca_wire_build(buf, sizeof(buf), &m), -EINVAL);
	m.msn = 0;
	m.opcode = SHCA_OP_RC_ATOMIC_ACKNOWLEDGE;
	ASSERT_EQ(shca_wire_build(buf, sizeof(buf), &m), -EINVAL);
	m.syndrome = shca_aeth_syn_ack(SHCA_AETH_CREDITS_INVALID);
	ASSERT_EQ(shca_wire_build(buf, sizeof(buf), &m), 24);

	memset(&m, 0, sizeof(m));
	m.opcode = SHCA_OP_UD_SEND_ONLY;
	m.sqpn = 0x1000000;
	ASSERT_EQ(shca_wire_build(buf, sizeof(buf), &m), -EINVAL);
}

/* AETH helpers, RNR timer ------------------------------------------------ */

TEST(aeth_syndromes)
{
	ASSERT_EQ(shca_aeth_syn_ack(SHCA_AETH_CREDITS_INVALID), 0x1f);
	ASSERT_EQ(shca_aeth_syn_ack(0), 0x00);
	ASSERT_EQ(shca_aeth_syn_rnr(14), 0x2e);
	ASSERT_EQ(shca_aeth_syn_nak(SHCA_NAK_PSN_SEQ_ERR), 0x60);
	ASSERT_EQ(shca_aeth_syn_nak(SHCA_NAK_INVALID_REQ), 0x61);
	ASSERT_EQ(shca_aeth_syn_nak(SHCA_NAK_REMOTE_ACCESS), 0x62);
	ASSERT_EQ(shca_aeth_syn_nak(SHCA_NAK_REMOTE_OP), 0x63);
	ASSERT_EQ(shca_aeth_syn_nak(SHCA_NAK_INVALID_RD_REQ), 0x64);
	ASSERT_EQ(shca_aeth_syn_type(0x62), SHCA_AETH_NAK);
	ASSERT_EQ(shca_aeth_syn_value(0x62), SHCA_NAK_REMOTE_ACCESS);
	ASSERT_EQ(shca_aeth_syn_type(0x3f), SHCA_AETH_RNR_NAK);
	ASSERT_EQ(shca_aeth_syn_value(0x3f), 31);
	ASSERT_EQ(shca_aeth_syn_type(0x1f), SHCA_AETH_ACK);
	ASSERT_EQ(shca_aeth_syn_type(0x45), SHCA_AETH_RESERVED);
}

TEST(rnr_timer)
{
	ASSERT_EQ(shca_wire_rnr_timer_us(0), 655360);
	ASSERT_EQ(shca_wire_rnr_timer_us(1), 10);
	ASSERT_EQ(shca_wire_rnr_timer_us(12), 640);
	ASSERT_EQ(shca_wire_rnr_timer_us(14), 1280);
	ASSERT_EQ(shca_wire_rnr_timer_us(24), 40960);
	ASSERT_EQ(shca_wire_rnr_timer_us(31), 491520);
	ASSERT_EQ(shca_wire_rnr_timer_us(32), 0);
}

/* PSN arithmetic --------------------------------------------------------- */

TEST(psn_arithmetic)
{
	ASSERT_EQ(shca_psn_add(0xfffffe, 1), 0xffffff);
	ASSERT_EQ(shca_psn_add(0xffffff, 1), 0);
	ASSERT_EQ(shca_psn_add(0xfffff0, 0x20), 0x10);
	ASSERT_EQ(shca_psn_add(5, SHCA_PSN_MASK), 4);	/* i.e. minus 1 */

	ASSERT_EQ(shca_psn_diff(5, 3), 2);
	ASSERT_EQ(shca_psn_diff(3, 5), -2);
	ASSERT_EQ(shca_psn_diff(0, 0xffffff), 1);	/* across the wrap */
	ASSERT_EQ(shca_psn_diff(0xffffff, 0), -1);
	ASSERT_EQ(shca_psn_diff(0x10, 0xfffff0), 0x20);
	ASSERT_EQ(shca_psn_diff(0x7fffff, 0), 0x7fffff);	/* the edge */
	ASSERT_EQ(shca_psn_diff(0x800001, 0), -0x7fffff);	/* beyond it */
	/* exactly 2^23 apart: as far as it goes, "before" both ways */
	ASSERT_EQ(shca_psn_diff(0x800000, 0), -0x800000);
	ASSERT_EQ(shca_psn_diff(0, 0x800000), -0x800000);
	/* upper bits of the arguments do not matter */
	ASSERT_EQ(shca_psn_diff(0xff000005, 3), 2);

	ASSERT(shca_psn_lt(0xffffff, 0));
	ASSERT(!shca_psn_lt(0, 0xffffff));
	ASSERT(shca_psn_gt(0, 0xffffff));
	ASSERT(shca_psn_le(7, 7));
	ASSERT(shca_psn_ge(7, 7));
	ASSERT(!shca_psn_lt(7, 7));
	ASSERT(shca_psn_lt(0xfffff0, 0x10));
	ASSERT(shca_psn_lt(0, 0x7fffff));
	ASSERT(shca_psn_gt(0, 0x800001));	/* 0x800001 is behind 0 */
}

TEST(psn_arithmetic_exhaustive_window)
{
	uint32_t base, d;
	int i;

	for (i = 0; i < 64; i++) {
		base = rnd32() & SHCA_PSN_MASK;
		for (d = 1; d < 0x800000; d = d * 3 + 1) {
			uint32_t next = shca_psn_add(base, d);

			ASSERT_EQ(shca_psn_diff(next, base), (int32_t)d);
			ASSERT_EQ(shca_psn_diff(base, next), -(int32_t)d);
			ASSERT(shca_psn_lt(base, next));
			ASSERT(shca_psn_gt(next, base));
		}
	}
}

/* ICRC ------------------------------------------------------------------- */

/*
 * A RoCE v2 CNP frame captured from a Mellanox ConnectX-4 Lx, ICRC
 * included (from the "RoCE CNP captured on ConnectX-4 Lx" case of scapy's
 * test/contrib/roce.uts): IPv4 with TOS 0xc2, TTL 64, UDP checksum 0,
 * BTH opcode 0x81 (CNP), BECN set, DestQP 0x000118, 16 reserved bytes.
 */
static const uint8_t cnp_frame[] = {
	/* Ethernet */
	0xe4, 0x1d, 0x2d, 0xab, 0x2b, 0xc2, 0x7c, 0xfe, 0x90, 0x64, 0x3b, 0x32,
	0x08, 0x00,
	/* IPv4 */
	0x45, 0xc2, 0x00, 0x3c, 0x71, 0x8c, 0x40, 0x00, 0x40, 0x11, 0x91, 0x61,
	0x0a, 0x00, 0x11, 0x01, 0x0a, 0x00, 0x12, 0x01,
	/* UDP */
	0x00, 0x00, 0x12, 0xb7, 0x00, 0x28, 0x00, 0x00,
	/* BTH */
	0x81, 0x00, 0xff, 0xff, 0x40, 0x00, 0x01, 0x18, 0x00, 0x00, 0x00, 0x00,
	/* CNP reserved */
	0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
	/* ICRC */
	0x82, 0xfd, 0x00, 0x2a,
};

TEST(icrc_hardware_vector)
{
	const uint8_t *net = cnp_frame + 14, *ib = cnp_frame + 14 + 28;
	size_t ib_len = sizeof(cnp_frame) - 14 - 28;	/* with ICRC */
	uint8_t copy[sizeof(cnp_frame)];

	ASSERT_EQ(ib_len, 32);
	ASSERT_U64_EQ(shca_wire_icrc(net, 28, ib, ib_len - 4), 0x2a00fd82);
	ASSERT_U64_EQ(shca_wire_get_icrc(ib + 28), 0x2a00fd82);
	ASSERT(shca_wire_icrc_ok(net, 28, ib, ib_len));

	/* Fields a router or switch may change are masked: TOS, TTL, IP
	 * and UDP checksums, FECN/BECN/Resv6. */
	memcpy(copy, cnp_frame, sizeof(copy));
	copy[14 + 1] = 0x00;		/* TOS */
	copy[14 + 8] = 0x01;		/* TTL */
	copy[14 + 10] ^= 0xff;		/* IP checksum */
	copy[14 + 20 + 6] = 0x12;	/* UDP checksum */
	copy[14 + 28 + 4] = 0xbf;	/* FECN, BECN, Resv6 */
	ASSERT(shca_wire_icrc_ok(copy + 14, 28, copy + 42, ib_len));

	/* Anything else is covered. */
	memcpy(copy, cnp_frame, sizeof(copy));
	copy[14 + 4] ^= 1;		/* IP identification */
	ASSERT(!shca_wire_icrc_ok(copy + 14, 28, copy + 42, ib_len));
	memcpy(copy, cnp_frame, sizeof(copy));
	copy[14 + 20 + 1] ^= 1;		/* UDP source port */
	ASSERT(!shca_wire_icrc_ok(copy + 14, 28, copy + 42, ib_len));
	memcpy(copy, cnp_frame, sizeof(copy));
	copy[42 + 7] ^= 1;		/* DestQP */
	ASSERT(!shca_wire_icrc_ok(copy + 14, 28, copy + 42, ib_len));
	memcpy(copy, cnp_frame, sizeof(copy));
	copy[42 + 20] ^= 0x80;		/* payload */
	ASSERT(!shca_wire_icrc_ok(copy + 14, 28, copy + 42, ib_len));
	memcpy(copy, cnp_frame, sizeof(copy));
	copy[42 + 29] ^= 1;		/* the ICRC itself */
	ASSERT(!shca_wire_icrc_ok(copy + 14, 28, copy + 42, ib_len));

	/* Not an IPv4/IPv6 + UDP header: no ICRC. */
	ASSERT_EQ(shca_wire_icrc(net, 27, ib, ib_len - 4), 0);
	ASSERT_EQ(shca_wire_icrc(net, 48, ib, ib_len - 4), 0);
	ASSERT(!shca_wire_icrc_ok(net, 28, ib, 15));
}

/*
 * The UC SEND_ONLY example of scapy's test/contrib/roce.uts ("RoCE
 * layer"): IPv4 TOS 1, ID 1144, DF, TTL 64, 192.168.0.7 to itself, UDP
 * 49152 -> 4791, BTH M 1 PadCnt 2 P_Key 0xffff DestQP 211 PSN 13571856,
 * 18 bytes of payload and 2 of pad; scapy's ICRC reads 78 f3 53 f3.
 */
TEST(icrc_uc_send_vector)
{
	static const uint8_t net[28] = {
		0x45, 0x01, 0x00, 0x40, 0x04, 0x78, 0x40, 0x00,
		0x40, 0x11, 0xb4, 0xd5, 0xc0, 0xa8, 0x00, 0x07,
		0xc0, 0xa8, 0x00, 0x07,
		0xc0, 0x00, 0x12, 0xb7, 0x00, 0x2c, 0xac, 0xa2,
	};
	static const uint8_t ib[32] = {
		0x24, 0x60, 0xff, 0xff, 0x00, 0x00, 0x00, 0xd3,
		0x00, 0xcf, 0x17, 0x10,
		'F', '0', 0x81, 0x8b, 0xe2, 0x89, '5', 0xd9, 0x0e, 0x9a,
		0x95, 'P', 'T', 0x01, 0xbe, 0x88, '^', 'P', 0x00, 0x00,
	};
	struct shca_wire_msg p;
	uint8_t icrc[4];

	shca_wire_put_icrc(icrc, shca_wire_icrc(net, sizeof(net), ib,
						sizeof(ib)));
	assert_bytes("ICRC", icrc, "\x78\xf3\x53\xf3", 4);

	/* and the codec reads the packet as described */
	ASSERT_EQ(shca_wire_parse(ib, sizeof(ib), &p), 0);
	ASSERT_EQ(p.opcode, SHCA_OP_UC_SEND_ONLY);
	ASSERT(p.mig);
	ASSERT_EQ(p.pad, 2);
	ASSERT_EQ(p.payload_len, 18);
	ASSERT_EQ(p.dqpn, 211);
	ASSERT_EQ(p.psn, 13571856);
}

/* A bit-at-a-time CRC-32 written straight from the definition, to check
 * the table-driven one on random packets. */
static uint32_t crc32_bitwise(uint32_t crc, const uint8_t *p, size_t len)
{
	int k;

	while (len--) {
		crc ^= *p++;
		for (k = 0; k < 8; k++)
			crc = (crc >> 1) ^ (0xedb88320u & -(crc & 1));
	}
	return crc;
}

TEST(icrc_matches_reference_crc)
{
	static uint8_t ib[SHCA_WIRE_MAX_PKT];
	uint8_t gid4a[16] = { [10] = 0xff, [11] = 0xff, 10, 1, 2, 3 };
	uint8_t gid4b[16] = { [10] = 0xff, [11] = 0xff, 10, 1, 2, 4 };
	uint8_t gid6[16] = { 0xfd, 0x00, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10 };
	uint8_t net[SHCA_ROCE_MAX_HDR], masked[SHCA_ROCE_MAX_HDR + 12];
	uint8_t icrc[4];
	int i, hlen;

	for (i = 0; i < 500; i++) {
		size_t len = SHCA_BTH_LEN + 4 * (rnd32() % 1000);
		uint32_t crc, j;

		for (j = 0; j < len; j++)
			ib[j] = (uint8_t)rnd32();
		hlen = shca_wire_roce_encap(net, gid4a, i & 1 ? gid6 : gid4b,
					    (uint16_t)rnd32(), ib, len, icrc);
		ASSERT_EQ(hlen, i & 1 ? 48 : 28);

		/* mask by hand, by offset, from the Annex A17 description */
		memcpy(masked, net, (size_t)hlen);
		if (hlen == 28) {
			masked[1] = 0xff;			/* TOS */
			masked[8] = 0xff;			/* TTL */
			masked[10] = masked[11] = 0xff;		/* checksum */
		} else {
			masked[0] |= 0x0f;			/* class */
			masked[1] = masked[2] = masked[3] = 0xff; /* flow */
			masked[7] = 0xff;			/* hop limit */
		}
		masked[hlen - 2] = masked[hlen - 1] = 0xff;	/* UDP csum */
		memcpy(masked + hlen, ib, 12);
		masked[hlen + 4] = 0xff;			/* FECN.. */

		crc = crc32_bitwise(0xffffffffu,
				    (const uint8_t *)"\xff\xff\xff\xff"
						     "\xff\xff\xff\xff", 8);
		crc = crc32_bitwise(crc, masked, (size_t)hlen + 12);
		crc = crc32_bitwise(crc, ib + 12, len - 12);
		ASSERT_U64_EQ(shca_wire_get_icrc(icrc), ~crc);
		ASSERT_U64_EQ(shca_wire_icrc(net, (size_t)hlen, ib, len), ~crc);
	}
}

/* RoCE v2 encapsulation -------------------------------------------------- */

/* Internet checksum of a byte string, independent of the codec's. */
static uint32_t sum16(const uint8_t *p, size_t len, uint32_t sum)
{
	size_t i;

	for (i = 0; i + 1 < len; i += 2)
		sum += (uint32_t)p[i] << 8 | p[i + 1];
	if (len & 1)
		sum += (uint32_t)p[len - 1] << 8;
	return sum;
}

static uint16_t fold(uint32_t sum)
{
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)sum;
}

TEST(roce_encap_ipv4)
{
	const uint8_t sgid[16] = { [10] = 0xff, [11] = 0xff, 192, 168, 0, 7 };
	const uint8_t dgid[16] = { [10] = 0xff, [11] = 0xff, 192, 168, 0, 8 };
	uint8_t ib[24], hdr[SHCA_ROCE_MAX_HDR], icrc[4], all[60];
	struct shca_wire_msg m = {
		.opcode = SHCA_OP_RC_SEND_ONLY,
		.pkey = 0xffff,
		.dqpn = 0x42,
		.payload = "12345678",
		.payload_len = 8,
	};
	static const uint8_t want[20] = {
		0x45, 0x00, 0x00, 0x34,		/* 20 + 8 + 20 + 4 bytes */
		0x00, 0x00, 0x40, 0x00,		/* ID 0, DF */
		0x40, 0x11, 0x00, 0x00,		/* TTL 64, UDP, (checksum) */
		192, 168, 0, 7, 192, 168, 0, 8,
	};
	uint32_t sum;
	int hlen;

	ASSERT_EQ(shca_wire_build(ib, sizeof(ib), &m), 20);
	hlen = shca_wire_roce_encap(hdr, sgid, dgid, 0xc123, ib, 20, icrc);
	ASSERT_EQ(hlen, 28);
	assert_bytes("IPv4 (to ID)", hdr, want, 10);
	assert_bytes("IPv4 (addresses)", hdr + 12, want + 12, 8);
	ASSERT_EQ(fold(sum16(hdr, 20, 0)), 0xffff);	/* header checksum */
	/* UDP: ports, length 8 + 20 + 4 */
	assert_bytes("UDP", hdr + 20, "\xc1\x23\x12\xb7\x00\x20", 6);
	ASSERT(hdr[26] || hdr[27]);
	/* UDP checksum over pseudo header + UDP + packet + ICRC */
	memcpy(all, hdr + 20, 8);
	memcpy(all + 8, ib, 20);
	memcpy(all + 28, icrc, 4);
	sum = sum16(hdr + 12, 8, 0) + 17 + 32;
	ASSERT_EQ(fold(sum16(all, 32, sum)), 0xffff);
	ASSERT(shca_wire_icrc_ok(hdr, 28, all + 8, 24));

	/* odd-sized packets (a trace may hold anything) still checksum */
	hlen = shca_wire_roce_encap(hdr, sgid, dgid, 0xc123, ib, 13, icrc);
	ASSERT_EQ(hlen, 28);
	memcpy(all, hdr + 20, 8);
	memcpy(all + 8, ib, 13);
	memcpy(all + 21, icrc, 4);
	sum = sum16(hdr + 12, 8, 0) + 17 + 25;
	ASSERT_EQ(fold(sum16(all, 25, sum)), 0xffff);

	ASSERT_EQ(shca_wire_roce_encap(hdr, sgid, dgid, 1, ib, 11, icrc),
		  -EINVAL);
}

TEST(roce_encap_ipv6)
{
	const uint8_t v4[16] = { [10] = 0xff, [11] = 0xff, 10, 0, 0, 1 };
	const uint8_t v6[16] = { 0xfe, 0x80, [15] = 2 };
	static uint8_t big[65536];
	uint8_t hdr[SHCA_ROCE_MAX_HDR], icrc[4];
	uint32_t sum;
	int hlen;

	big[0] = SHCA_OP_RC_SEND_ONLY;
	/* IPv6 as soon as either GID is not an IPv4 one */
	hlen = shca_wire_roce_encap(hdr, v4, v6, 0xc000, big, 16, icrc);
	ASSERT_EQ(hlen, 48);
	ASSERT_EQ(hdr[0], 0x60);
	ASSERT_EQ(hdr[1] | hdr[2] | hdr[3], 0);
	ASSERT_EQ(hdr[4] << 8 | hdr[5], 8 + 16 + 4);	/* payload length */
	ASSERT_EQ(hdr[6], 17);
	ASSERT_EQ(hdr[7], 64);
	assert_bytes("source", hdr + 8, v4, 16);
	assert_bytes("destination", hdr + 24, v6, 16);
	ASSERT_EQ(hdr[42] << 8 | hdr[43], 4791);
	sum = sum16(hdr + 8, 32, 0) + 17 + 28;
	sum = sum16(hdr + 40, 8, sum);
	sum = sum16(big, 16, sum);
	sum = sum16(icrc, 4, sum);
	ASSERT_EQ(fold(sum), 0xffff);
	hlen = shca_wire_roce_encap(hdr, v6, v4, 0xc000, big, 16, icrc);
	ASSERT_EQ(hlen, 48);

	/* no larger than an IP datagram */
	ASSERT_EQ(shca_wire_roce_encap(hdr, v6, v6, 1, big, 65535 - 12, icrc),
		  48);
	ASSERT_EQ(shca_wire_roce_encap(hdr, v6, v6, 1, big, 65535 - 11, icrc),
		  -EMSGSIZE);
	ASSERT_EQ(shca_wire_roce_encap(hdr, v4, v4, 1, big, 65535 - 32, icrc),
		  28);
	ASSERT_EQ(shca_wire_roce_encap(hdr, v4, v4, 1, big, 65535 - 31, icrc),
		  -EMSGSIZE);
}

TEST(roce_sport)
{
	uint32_t qpn;
	uint16_t lo = 0xffff, hi = 0;

	for (qpn = 0; qpn < 100000; qpn += 7) {
		uint16_t s = shca_wire_roce_sport(qpn);

		ASSERT_GE(s, 0xc000);
		lo = s < lo ? s : lo;
		hi = s > hi ? s : hi;
	}
	ASSERT_EQ(shca_wire_roce_sport(5), shca_wire_roce_sport(5));
	ASSERT_LT(lo, 0xc100);	/* spread over the range */
	ASSERT_GT(hi, 0xff00);
}
