// SPDX-License-Identifier: MIT
/*
 * libFuzzer target for the wire codec's parser, the part of softhca that
 * reads what a peer on the network sends.  The input is one IB packet (BTH
 * .. pad, as the TCP/UDP net path carries it).  Beyond "no crash, no
 * out-of-bounds read" (ASan), it checks what parse promises:
 *   - an accepted packet is consistent: headers + payload + pad == length,
 *     the payload inside the input, the opcode's table entry;
 *   - build writes an accepted packet back at the same length, and parsing
 *     that gives the same message (reserved bits aside);
 *   - a rejected one gets one of the documented errors;
 * and runs the QP checks and the ICRC/RoCE encapsulation on it.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "wire/wire.h"

#define CHECK(cond)                                                       \
	do {                                                              \
		if (!(cond)) {                                            \
			fprintf(stderr, "%s:%d: CHECK(%s) failed\n",      \
				__FILE__, __LINE__, #cond);               \
			abort();                                          \
		}                                                         \
	} while (0)

static bool same_msg(const struct shca_wire_msg *a,
		     const struct shca_wire_msg *b)
{
	return a->opcode == b->opcode && a->se == b->se && a->mig == b->mig &&
	       a->fecn == b->fecn && a->becn == b->becn &&
	       a->ackreq == b->ackreq && a->pad == b->pad &&
	       a->pkey == b->pkey && a->dqpn == b->dqpn && a->psn == b->psn &&
	       a->va == b->va && a->rkey == b->rkey &&
	       a->dma_len == b->dma_len && a->swap_add == b->swap_add &&
	       a->compare == b->compare && a->syndrome == b->syndrome &&
	       a->msn == b->msn && a->orig == b->orig &&
	       a->imm_be == b->imm_be && a->inv_rkey == b->inv_rkey &&
	       a->qkey == b->qkey && a->sqpn == b->sqpn &&
	       a->xrc_srqn == b->xrc_srqn &&
	       a->payload_len == b->payload_len && a->op == b->op &&
	       a->hdr_len == b->hdr_len &&
	       (!a->payload_len ||
		!memcmp(a->payload, b->payload, a->payload_len));
}

static void check_accepted(const uint8_t *pkt, size_t size,
			   const struct shca_wire_msg *m)
{
	static const unsigned int pmtus[] = { 256, 1024, 4096 };
	struct shca_wire_msg again;
	uint8_t *out;
	ssize_t n;
	unsigned int tp, i;
	int r;

	CHECK(m->op && m->op == shca_wire_op(m->opcode));
	CHECK(m->opcode == pkt[0]);
	CHECK(m->hdr_len == m->op->hdr_len);
	CHECK(size % 4 == 0);
	CHECK((size_t)m->hdr_len + m->payload_len + m->pad == size);
	CHECK(m->payload_len <= SHCA_WIRE_MAX_PMTU);
	CHECK(m->dqpn <= SHCA_QPN_MASK && m->psn <= SHCA_PSN_MASK);
	if (m->op->mask & SHCA_OPM_PAYLOAD) {
		CHECK((const uint8_t *)m->payload == pkt + m->hdr_len);
	} else {
		CHECK(!m->payload && !m->payload_len && !m->pad);
	}
	if (m->op->mask & SHCA_OPM_AETH)
		CHECK(shca_aeth_syn_valid(m->syndrome));

	/* Build it back: same length, same message. */
	out = malloc(size);
	CHECK(out);
	n = shca_wire_build(out, size, m);
	CHECK(n == (ssize_t)size);
	r = shca_wire_parse(out, size, &again);
	CHECK(r == 0);
	again.payload = m->payload;	/* compare contents, not places */
	CHECK(!m->payload_len ||
	      !memcmp(out + m->hdr_len, m->payload, m->payload_len));
	CHECK(same_msg(m, &again));
	if (size > 0)
		CHECK(shca_wire_build(out, size - 1, m) == -ENOSPC);
	free(out);

	if (!(m->op->mask & SHCA_OPM_XRCETH))
		CHECK(!m->xrc_srqn);
	CHECK(m->xrc_srqn <= SHCA_QPN_MASK);
	for (tp = 0; tp < 6; tp++)
		for (i = 0; i < sizeof(pmtus) / sizeof(pmtus[0]); i++) {
			r = shca_wire_check_qp(m, (enum shca_wire_transport)tp,
					       pmtus[i]);
			CHECK(r == 0 || r == -EPROTOTYPE || r == -EMSGSIZE);
			if (tp != m->op->transport)
				CHECK(r == -EPROTOTYPE);
		}
}

/* The ICRC and the encapsulation take any packet with a BTH. */
static void check_roce(const uint8_t *pkt, size_t size)
{
	static const uint8_t gid4[16] = { [10] = 0xff, [11] = 0xff, 10, 0, 0,
					  1 };
	static const uint8_t gid6[16] = { 0xfe, 0x80, [15] = 1 };
	uint8_t hdr[SHCA_ROCE_MAX_HDR], icrc[SHCA_ICRC_LEN], *whole;
	int hlen;
	uint16_t sport = SHCA_ROCE_SPORT_BASE;

	if (size >= SHCA_BTH_LEN)
		sport = shca_wire_roce_sport(shca_bth_dqpn((const void *)pkt));
	hlen = shca_wire_roce_encap(hdr, gid4, size & 4 ? gid6 : gid4, sport,
				    pkt, size, icrc);
	if (size < SHCA_BTH_LEN) {
		CHECK(hlen == -EINVAL);
		return;
	}
	CHECK(hlen == SHCA_ROCE_HDR4_LEN || hlen == SHCA_ROCE_HDR6_LEN);
	whole = malloc(size + SHCA_ICRC_LEN);
	CHECK(whole);
	memcpy(whole, pkt, size);
	memcpy(whole + size, icrc, SHCA_ICRC_LEN);
	CHECK(shca_wire_icrc_ok(hdr, (size_t)hlen, whole,
				size + SHCA_ICRC_LEN));
	whole[size / 2] ^= 0x01;
	CHECK(!shca_wire_icrc_ok(hdr, (size_t)hlen, whole,
				 size + SHCA_ICRC_LEN));
	free(whole);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct shca_wire_msg m, untouched;
	uint8_t *pkt;
	int r;

	if (size > SHCA_WIRE_MAX_PKT + 64)
		return -1;	/* not worth the fuzzer's time */
	/* An exact-size copy: ASan sees any read past the end. */
	pkt = malloc(size ? size : 1);
	CHECK(pkt);
	memcpy(pkt, data, size);

	memset(&m, 0xa5, sizeof(m));
	memcpy(&untouched, &m, sizeof(m));
	r = shca_wire_parse(pkt, size, &m);
	if (r == 0) {
		check_accepted(pkt, size, &m);
	} else {
		CHECK(r == -EBADMSG || r == -EOPNOTSUPP || r == -EPROTO ||
		      r == -EMSGSIZE);
		CHECK(!memcmp(&m, &untouched, sizeof(m)));
		if (size < SHCA_BTH_LEN)
			CHECK(r == -EBADMSG);
	}
	check_roce(pkt, size);
	free(pkt);
	return 0;
}
