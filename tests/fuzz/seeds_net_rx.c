// SPDX-License-Identifier: MIT
/*
 * Seeds for fuzz_net_rx (input format in fuzz.h), and a driver that runs
 * the target without libFuzzer (any compiler):
 *
 *   fuzz_net_rx_seeds write DIR     write the seed corpus into DIR
 *   fuzz_net_rx_seeds replay        run every seed, and variants of it
 *                                   cut or flipped in its headers
 *   fuzz_net_rx_seeds replay FILE.. run the target on files (crash repro)
 *
 * Every seed is a conversation a real peer could have with the QPs: SEND
 * and RDMA WRITE of one and several packets, READ and atomic requests,
 * ACKs, NAKs and responses for the RC QP's own requests, UC messages, UD
 * datagrams to the QP and to its multicast group, duplicates and PSN
 * gaps, requests from another connection, and XRC requests for the
 * XRC_RECV QP (good and bad SRQ numbers).
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz.h"
#include "wire/wire.h"

#define FIX	(FUZZ_NET_SET_QPN | FUZZ_NET_SET_PSN | FUZZ_NET_SET_KEY)
#define RC	(FUZZ_NET_FROM_RC | FIX)
#define UC	(FUZZ_NET_FROM_UC | FIX)
#define UD	(FUZZ_NET_FROM_UD | FIX)
#define OTHER	(FUZZ_NET_FROM_OTHER | FIX)

struct seed_buf {
	uint8_t *p;
	size_t len, cap;
	bool full;
};

static uint8_t payload[FUZZ_NET_PMTU];

/* Append one record: the selector, then m as a packet. */
static void rec(struct seed_buf *b, uint8_t sel, struct shca_wire_msg m)
{
	ssize_t n;

	if (b->full || b->cap - b->len < FUZZ_NET_REC_HDR) {
		b->full = true;
		return;
	}
	m.pkey = SHCA_PKEY_DEFAULT;
	if (m.payload_len && !m.payload)
		m.payload = payload;
	n = shca_wire_build(b->p + b->len + FUZZ_NET_REC_HDR,
			    b->cap - b->len - FUZZ_NET_REC_HDR, &m);
	if (n < 0) {
		b->full = true;
		return;
	}
	b->p[b->len] = sel;
	b->p[b->len + 1] = (uint8_t)n;
	b->p[b->len + 2] = (uint8_t)(n >> 8);
	b->len += FUZZ_NET_REC_HDR + (size_t)n;
}

/* Shorthands: the fields the seeds vary. */
#define MSG(op, ...) ((struct shca_wire_msg){ .opcode = (op), __VA_ARGS__ })
#define ACK_OK shca_aeth_syn_ack(SHCA_AETH_CREDITS_INVALID)

static void seed_rc_send(struct seed_buf *b, unsigned int v)
{
	unsigned int k;

	switch (v) {
	case 0:
		rec(b, RC, MSG(SHCA_OP_RC_SEND_ONLY, .payload_len = 16,
			       .ackreq = true));
		break;
	case 1:
		rec(b, RC, MSG(SHCA_OP_RC_SEND_ONLY_WITH_IMMEDIATE,
			       .payload_len = 0, .imm_be = 0x01020304,
			       .se = true, .ackreq = true));
		break;
	case 2:
		rec(b, RC, MSG(SHCA_OP_RC_SEND_FIRST,
			       .payload_len = FUZZ_NET_PMTU));
		rec(b, RC, MSG(SHCA_OP_RC_SEND_MIDDLE,
			       .payload_len = FUZZ_NET_PMTU));
		rec(b, RC, MSG(SHCA_OP_RC_SEND_LAST, .payload_len = 100,
			       .ackreq = true));
		break;
	case 3:
		rec(b, RC, MSG(SHCA_OP_RC_SEND_FIRST,
			       .payload_len = FUZZ_NET_PMTU));
		rec(b, RC, MSG(SHCA_OP_RC_SEND_LAST_WITH_IMMEDIATE,
			       .payload_len = 4, .imm_be = 7, .ackreq = true));
		break;
	case 4:
		rec(b, RC, MSG(SHCA_OP_RC_SEND_ONLY_WITH_INVALIDATE,
			       .payload_len = 8, .inv_rkey = 0x1234,
			       .ackreq = true));
		rec(b, RC, MSG(SHCA_OP_RC_SEND_FIRST,
			       .payload_len = FUZZ_NET_PMTU));
		rec(b, RC, MSG(SHCA_OP_RC_SEND_LAST_WITH_INVALIDATE,
			       .payload_len = 8, .inv_rkey = 0x1234,
			       .ackreq = true));
		break;
	case 5:		/* more than the receive buffer holds */
		rec(b, RC, MSG(SHCA_OP_RC_SEND_FIRST,
			       .payload_len = FUZZ_NET_PMTU));
		rec(b, RC, MSG(SHCA_OP_RC_SEND_MIDDLE,
			       .payload_len = FUZZ_NET_PMTU));
		rec(b, RC, MSG(SHCA_OP_RC_SEND_MIDDLE,
			       .payload_len = FUZZ_NET_PMTU));
		rec(b, RC, MSG(SHCA_OP_RC_SEND_MIDDLE,
			       .payload_len = FUZZ_NET_PMTU));
		rec(b, RC, MSG(SHCA_OP_RC_SEND_LAST, .payload_len = 200,
			       .ackreq = true));
		break;
	case 6:		/* more SENDs than receives posted: RNR NAK */
		for (k = 0; k < 6; k++)
			rec(b, RC, MSG(SHCA_OP_RC_SEND_ONLY, .payload_len = 8,
				       .ackreq = true));
		break;
	}
}

static void seed_rc_rdma(struct seed_buf *b, unsigned int v)
{
	uint64_t va = FUZZ_NET_IOVA + 2048;

	switch (v) {
	case 0:
		rec(b, RC, MSG(SHCA_OP_RC_RDMA_WRITE_FIRST, .va = va,
			       .dma_len = 600, .payload_len = FUZZ_NET_PMTU));
		rec(b, RC, MSG(SHCA_OP_RC_RDMA_WRITE_MIDDLE,
			       .payload_len = FUZZ_NET_PMTU));
		rec(b, RC, MSG(SHCA_OP_RC_RDMA_WRITE_LAST, .payload_len = 88,
			       .ackreq = true));
		break;
	case 1:
		rec(b, RC, MSG(SHCA_OP_RC_RDMA_WRITE_ONLY, .va = va,
			       .dma_len = 64, .payload_len = 64,
			       .ackreq = true));
		rec(b, RC, MSG(SHCA_OP_RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE,
			       .va = va, .dma_len = 8, .payload_len = 8,
			       .imm_be = 0x55, .ackreq = true));
		break;
	case 2:
		rec(b, RC, MSG(SHCA_OP_RC_RDMA_WRITE_FIRST, .va = va,
			       .dma_len = 300, .payload_len = FUZZ_NET_PMTU));
		rec(b, RC, MSG(SHCA_OP_RC_RDMA_WRITE_LAST_WITH_IMMEDIATE,
			       .payload_len = 44, .imm_be = 9,
			       .ackreq = true));
		break;
	case 3:		/* the MR's last bytes, and one beyond */
		rec(b, RC, MSG(SHCA_OP_RC_RDMA_WRITE_ONLY,
			       .va = FUZZ_NET_IOVA + FUZZ_NET_MR_LEN - 16,
			       .dma_len = 16, .payload_len = 16,
			       .ackreq = true));
		rec(b, RC, MSG(SHCA_OP_RC_RDMA_WRITE_ONLY,
			       .va = FUZZ_NET_IOVA + FUZZ_NET_MR_LEN - 16,
			       .dma_len = 20, .payload_len = 20,
			       .ackreq = true));
		break;
	case 4:
		rec(b, RC, MSG(SHCA_OP_RC_RDMA_READ_REQUEST,
			       .va = FUZZ_NET_IOVA, .dma_len = 600,
			       .ackreq = true));
		/* the whole MR: its 14 middle responses go as a run frame
		 * (net/net.h), which the drain cuts into packets */
		rec(b, RC, MSG(SHCA_OP_RC_RDMA_READ_REQUEST,
			       .va = FUZZ_NET_IOVA, .dma_len = FUZZ_NET_MR_LEN,
			       .ackreq = true));
		rec(b, RC, MSG(SHCA_OP_RC_RDMA_READ_REQUEST,
			       .va = FUZZ_NET_IOVA + 8, .dma_len = 0,
			       .ackreq = true));
		break;
	case 5:
		rec(b, RC, MSG(SHCA_OP_RC_COMPARE_SWAP,
			       .va = FUZZ_NET_IOVA + 8, .compare = 0,
			       .swap_add = 0x1122334455667788ull,
			       .ackreq = true));
		rec(b, RC, MSG(SHCA_OP_RC_FETCH_ADD, .va = FUZZ_NET_IOVA + 8,
			       .swap_add = 1, .ackreq = true));
		/* the same atomic again: replayed from the cache */
		rec(b, RC | FUZZ_NET_PSN_DELTA(5),
		    MSG(SHCA_OP_RC_FETCH_ADD, .va = FUZZ_NET_IOVA + 8,
			.swap_add = 1, .ackreq = true));
		break;
	case 6:		/* a READ, then asked for again */
		rec(b, RC, MSG(SHCA_OP_RC_RDMA_READ_REQUEST,
			       .va = FUZZ_NET_IOVA + 100, .dma_len = 300,
			       .ackreq = true));
		rec(b, RC | FUZZ_NET_PSN_DELTA(5),
		    MSG(SHCA_OP_RC_RDMA_READ_REQUEST,
			.va = FUZZ_NET_IOVA + 100, .dma_len = 300,
			.ackreq = true));
		break;
	case 7:		/* Annex A19: ATOMIC WRITE and FLUSH */
		rec(b, RC, MSG(SHCA_OP_RC_ATOMIC_WRITE,
			       .va = FUZZ_NET_IOVA + 16, .dma_len = 8,
			       .payload_len = 8, .ackreq = true));
		rec(b, RC, MSG(SHCA_OP_RC_FLUSH, .va = FUZZ_NET_IOVA,
			       .dma_len = 64, .flush_plt = SHCA_FLUSH_PLT_GLOBAL,
			       .flush_sel = SHCA_FLUSH_SEL_RANGE,
			       .ackreq = true));
		rec(b, RC, MSG(SHCA_OP_RC_FLUSH,
			       .flush_plt = SHCA_FLUSH_PLT_GLOBAL,
			       .flush_sel = SHCA_FLUSH_SEL_MR, .ackreq = true));
		/* the FLUSH again: answered again */
		rec(b, RC | FUZZ_NET_PSN_DELTA(5),
		    MSG(SHCA_OP_RC_FLUSH, .flush_plt = SHCA_FLUSH_PLT_GLOBAL,
			.flush_sel = SHCA_FLUSH_SEL_MR, .ackreq = true));
		/* persistence (no region has it), an undefined level */
		rec(b, RC, MSG(SHCA_OP_RC_FLUSH, .va = FUZZ_NET_IOVA,
			       .dma_len = 8,
			       .flush_plt = SHCA_FLUSH_PLT_PERSISTENT,
			       .ackreq = true));
		break;
	case 8:		/* ATOMIC WRITE: misaligned, and a short payload */
		rec(b, RC, MSG(SHCA_OP_RC_ATOMIC_WRITE,
			       .va = FUZZ_NET_IOVA + 20, .dma_len = 8,
			       .payload_len = 8, .ackreq = true));
		rec(b, RC, MSG(SHCA_OP_RC_ATOMIC_WRITE,
			       .va = FUZZ_NET_IOVA + 16, .dma_len = 8,
			       .payload_len = 4, .ackreq = true));
		rec(b, RC, MSG(SHCA_OP_RC_FLUSH, .va = FUZZ_NET_IOVA,
			       .dma_len = 8, .flush_plt = SHCA_FLUSH_PLT_GLOBAL,
			       .flush_sel = 3, .ackreq = true));
		break;
	}
}

/* Answers to the RC QP's own requests (fuzz.h): SEND, WRITE, READ,
 * CMP_AND_SWP, FETCH_AND_ADD, SEND_WITH_IMM. */
static void seed_rc_answers(struct seed_buf *b, unsigned int v)
{
	unsigned int k;

	switch (v) {
	case 0:		/* everything answered, in order */
		rec(b, RC, MSG(SHCA_OP_RC_ACKNOWLEDGE, .syndrome = ACK_OK));
		rec(b, RC, MSG(SHCA_OP_RC_ACKNOWLEDGE, .syndrome = ACK_OK));
		rec(b, RC, MSG(SHCA_OP_RC_RDMA_READ_RESPONSE_FIRST,
			       .syndrome = ACK_OK,
			       .payload_len = FUZZ_NET_PMTU));
		rec(b, RC, MSG(SHCA_OP_RC_RDMA_READ_RESPONSE_MIDDLE,
			       .payload_len = FUZZ_NET_PMTU));
		rec(b, RC, MSG(SHCA_OP_RC_RDMA_READ_RESPONSE_LAST,
			       .syndrome = ACK_OK,
			       .payload_len = FUZZ_NET_RC_READ_LEN -
					      2 * FUZZ_NET_PMTU));
		rec(b, RC, MSG(SHCA_OP_RC_ATOMIC_ACKNOWLEDGE,
			       .syndrome = ACK_OK, .orig = 5));
		rec(b, RC, MSG(SHCA_OP_RC_ATOMIC_ACKNOWLEDGE,
			       .syndrome = ACK_OK, .orig = 6));
		rec(b, RC, MSG(SHCA_OP_RC_ACKNOWLEDGE, .syndrome = ACK_OK));
		break;
	case 1:		/* one ACK for the SEND and the WRITE (coalesced) */
		rec(b, RC | FUZZ_NET_PSN_DELTA(6),
		    MSG(SHCA_OP_RC_ACKNOWLEDGE, .syndrome = ACK_OK));
		rec(b, RC, MSG(SHCA_OP_RC_RDMA_READ_RESPONSE_FIRST,
			       .syndrome = ACK_OK,
			       .payload_len = FUZZ_NET_PMTU));
		break;
	case 2:
		rec(b, RC, MSG(SHCA_OP_RC_ACKNOWLEDGE,
			       .syndrome = shca_aeth_syn_nak(
				       SHCA_NAK_PSN_SEQ_ERR)));
		break;
	case 3:
		rec(b, RC, MSG(SHCA_OP_RC_ACKNOWLEDGE,
			       .syndrome = shca_aeth_syn_rnr(3)));
		rec(b, RC, MSG(SHCA_OP_RC_ACKNOWLEDGE, .syndrome = ACK_OK));
		break;
	case 4:
		rec(b, RC, MSG(SHCA_OP_RC_ACKNOWLEDGE,
			       .syndrome = shca_aeth_syn_nak(
				       SHCA_NAK_REMOTE_ACCESS)));
		break;
	case 5:
		rec(b, RC, MSG(SHCA_OP_RC_ACKNOWLEDGE, .syndrome = ACK_OK));
		rec(b, RC, MSG(SHCA_OP_RC_ACKNOWLEDGE,
			       .syndrome = shca_aeth_syn_nak(
				       SHCA_NAK_INVALID_REQ)));
		break;
	case 6:		/* READ response ONLY where three are due */
		rec(b, RC, MSG(SHCA_OP_RC_ACKNOWLEDGE, .syndrome = ACK_OK));
		rec(b, RC, MSG(SHCA_OP_RC_ACKNOWLEDGE, .syndrome = ACK_OK));
		rec(b, RC, MSG(SHCA_OP_RC_RDMA_READ_RESPONSE_ONLY,
			       .syndrome = ACK_OK, .payload_len = 16));
		break;
	case 7:		/* an answer on a connection it was not sent on */
		rec(b, OTHER, MSG(SHCA_OP_RC_ACKNOWLEDGE, .syndrome = ACK_OK));
		break;
	case 8:		/* RNR NAKs (655 ms each) until rnr_retry runs out */
		for (k = 0; k < 5; k++)
			rec(b, RC, MSG(SHCA_OP_RC_ACKNOWLEDGE,
				       .syndrome = shca_aeth_syn_rnr(0)));
		break;
	}
}

static void seed_other(struct seed_buf *b, unsigned int v)
{
	uint64_t va = FUZZ_NET_IOVA + 3000;

	switch (v) {
	case 0:
		rec(b, UC, MSG(SHCA_OP_UC_SEND_ONLY, .payload_len = 32));
		rec(b, UC, MSG(SHCA_OP_UC_SEND_ONLY_WITH_IMMEDIATE,
			       .payload_len = 0, .imm_be = 3));
		break;
	case 1:
		rec(b, UC, MSG(SHCA_OP_UC_SEND_FIRST,
			       .payload_len = FUZZ_NET_PMTU));
		rec(b, UC, MSG(SHCA_OP_UC_SEND_MIDDLE,
			       .payload_len = FUZZ_NET_PMTU));
		rec(b, UC, MSG(SHCA_OP_UC_SEND_LAST_WITH_IMMEDIATE,
			       .payload_len = 12, .imm_be = 4));
		break;
	case 2:
		rec(b, UC, MSG(SHCA_OP_UC_RDMA_WRITE_FIRST, .va = va,
			       .dma_len = 400, .payload_len = FUZZ_NET_PMTU));
		rec(b, UC, MSG(SHCA_OP_UC_RDMA_WRITE_LAST,
			       .payload_len = 144));
		rec(b, UC, MSG(SHCA_OP_UC_RDMA_WRITE_ONLY_WITH_IMMEDIATE,
			       .va = va, .dma_len = 4, .payload_len = 4,
			       .imm_be = 5));
		break;
	case 3:		/* a UC message with a packet lost */
		rec(b, UC, MSG(SHCA_OP_UC_RDMA_WRITE_FIRST, .va = va,
			       .dma_len = 600, .payload_len = FUZZ_NET_PMTU));
		rec(b, UC | FUZZ_NET_PSN_DELTA(4),
		    MSG(SHCA_OP_UC_RDMA_WRITE_MIDDLE,
			.payload_len = FUZZ_NET_PMTU));
		rec(b, UC, MSG(SHCA_OP_UC_RDMA_WRITE_LAST, .payload_len = 88));
		rec(b, UC, MSG(SHCA_OP_UC_SEND_ONLY, .payload_len = 4));
		break;
	case 4:
		rec(b, UD, MSG(SHCA_OP_UD_SEND_ONLY, .payload_len = 64,
			       .sqpn = 0x4002));
		rec(b, UD, MSG(SHCA_OP_UD_SEND_ONLY_WITH_IMMEDIATE,
			       .payload_len = 0, .imm_be = 6, .sqpn = 0x4002));
		break;
	case 5:		/* to the multicast group: the QPN as it came */
		rec(b, UD & ~FUZZ_NET_SET_QPN,
		    MSG(SHCA_OP_UD_SEND_ONLY, .dqpn = SHCA_QPN_MULTICAST,
			.payload_len = 8, .sqpn = 0x4003));
		break;
	case 6:		/* RC over a datagram, UD over a connection */
		rec(b, FUZZ_NET_FROM_UD | FUZZ_NET_SET_KEY,
		    MSG(SHCA_OP_RC_SEND_ONLY, .payload_len = 4));
		rec(b, RC, MSG(SHCA_OP_UD_SEND_ONLY, .payload_len = 4,
			       .sqpn = 0x4004));
		break;
	case 7:		/* duplicate and out of sequence requests */
		rec(b, RC, MSG(SHCA_OP_RC_SEND_ONLY, .payload_len = 4,
			       .ackreq = true));
		rec(b, RC | FUZZ_NET_PSN_DELTA(5),
		    MSG(SHCA_OP_RC_SEND_ONLY, .payload_len = 4,
			.ackreq = true));
		rec(b, RC | FUZZ_NET_PSN_DELTA(6),
		    MSG(SHCA_OP_RC_SEND_ONLY, .payload_len = 4,
			.ackreq = true));
		rec(b, RC | FUZZ_NET_PSN_DELTA(7),
		    MSG(SHCA_OP_RC_SEND_ONLY, .payload_len = 4,
			.ackreq = true));
		rec(b, RC, MSG(SHCA_OP_RC_SEND_ONLY, .payload_len = 4,
			       .ackreq = true));
		break;
	case 8:		/* requests from another connection */
		rec(b, OTHER, MSG(SHCA_OP_RC_RDMA_READ_REQUEST,
				  .va = FUZZ_NET_IOVA, .dma_len = 32,
				  .ackreq = true));
		rec(b, OTHER, MSG(SHCA_OP_RC_SEND_ONLY, .payload_len = 4,
				  .ackreq = true));
		break;
	case 9:		/* a MIDDLE without its FIRST, a bad R_Key */
		rec(b, RC, MSG(SHCA_OP_RC_RDMA_WRITE_MIDDLE,
			       .payload_len = FUZZ_NET_PMTU));
		rec(b, RC & ~FUZZ_NET_SET_KEY,
		    MSG(SHCA_OP_RC_RDMA_WRITE_ONLY, .va = FUZZ_NET_IOVA,
			.rkey = 0x12345678, .dma_len = 4, .payload_len = 4,
			.ackreq = true));
		rec(b, RC, MSG(SHCA_OP_RC_SEND_ONLY, .payload_len = 4,
			       .ackreq = true));
		break;
	}
}

/*
 * XRC requests for the XRC_RECV QP (fuzz.h): the XRCETH set to the XRC
 * SRQ's number (SET_KEY), or left as the seed wrote it (no SRQ of ours:
 * an invalid request), and XRC packets where they do not belong.
 */
static void seed_xrc(struct seed_buf *b, unsigned int v)
{
	uint64_t va = FUZZ_NET_IOVA + 2048;
	unsigned int k;

	switch (v) {
	case 0:
		rec(b, RC, MSG(SHCA_OP_XRC_SEND_ONLY, .payload_len = 16,
			       .ackreq = true));
		rec(b, RC, MSG(SHCA_OP_XRC_SEND_ONLY_WITH_IMMEDIATE,
			       .payload_len = 0, .imm_be = 0x01020304,
			       .ackreq = true));
		break;
	case 1:
		rec(b, RC, MSG(SHCA_OP_XRC_SEND_FIRST,
			       .payload_len = FUZZ_NET_PMTU));
		rec(b, RC, MSG(SHCA_OP_XRC_SEND_LAST, .payload_len = 100,
			       .ackreq = true));
		break;
	case 2:		/* a later packet naming another SRQ */
		rec(b, RC, MSG(SHCA_OP_XRC_SEND_FIRST,
			       .payload_len = FUZZ_NET_PMTU));
		rec(b, RC & ~FUZZ_NET_SET_KEY,
		    MSG(SHCA_OP_XRC_SEND_LAST, .payload_len = 100,
			.xrc_srqn = 0x123, .ackreq = true));
		break;
	case 3:
		rec(b, RC, MSG(SHCA_OP_XRC_RDMA_WRITE_FIRST, .va = va,
			       .dma_len = 300, .payload_len = FUZZ_NET_PMTU));
		rec(b, RC, MSG(SHCA_OP_XRC_RDMA_WRITE_LAST_WITH_IMMEDIATE,
			       .payload_len = 44, .imm_be = 9,
			       .ackreq = true));
		break;
	case 4:
		rec(b, RC, MSG(SHCA_OP_XRC_RDMA_READ_REQUEST,
			       .va = FUZZ_NET_IOVA, .dma_len = 600,
			       .ackreq = true));
		rec(b, RC | FUZZ_NET_PSN_DELTA(5),
		    MSG(SHCA_OP_XRC_RDMA_READ_REQUEST, .va = FUZZ_NET_IOVA,
			.dma_len = 600, .ackreq = true));
		break;
	case 5:
		rec(b, RC, MSG(SHCA_OP_XRC_COMPARE_SWAP,
			       .va = FUZZ_NET_IOVA + 8, .compare = 0,
			       .swap_add = 5, .ackreq = true));
		rec(b, RC, MSG(SHCA_OP_XRC_FETCH_ADD, .va = FUZZ_NET_IOVA + 8,
			       .swap_add = 1, .ackreq = true));
		rec(b, RC | FUZZ_NET_PSN_DELTA(5),
		    MSG(SHCA_OP_XRC_FETCH_ADD, .va = FUZZ_NET_IOVA + 8,
			.swap_add = 1, .ackreq = true));
		break;
	case 6:		/* SRQ numbers none of ours: 0, another */
		rec(b, RC & ~FUZZ_NET_SET_KEY,
		    MSG(SHCA_OP_XRC_SEND_ONLY, .payload_len = 8,
			.ackreq = true));
		rec(b, RC & ~FUZZ_NET_SET_KEY,
		    MSG(SHCA_OP_XRC_SEND_ONLY, .payload_len = 8,
			.xrc_srqn = 0xffffff, .ackreq = true));
		break;
	case 7:		/* more SENDs than the XRC SRQ holds: RNR NAK */
		for (k = 0; k < 6; k++)
			rec(b, RC, MSG(SHCA_OP_XRC_SEND_ONLY, .payload_len = 8,
				       .ackreq = true));
		break;
	case 8:		/* XRC where it does not belong: the UC
			 * connection, an XRC answer for the XRC_RECV
			 * QP, another connection */
		rec(b, UC, MSG(SHCA_OP_XRC_SEND_ONLY, .payload_len = 8,
			       .ackreq = true));
		rec(b, RC, MSG(SHCA_OP_XRC_ACKNOWLEDGE, .syndrome = ACK_OK));
		rec(b, OTHER, MSG(SHCA_OP_XRC_SEND_ONLY, .payload_len = 8,
				  .ackreq = true));
		break;
	}
}

static const struct {
	void (*fn)(struct seed_buf *b, unsigned int v);
	unsigned int n;
} groups[] = {
	{ seed_rc_send, 7 },
	{ seed_rc_rdma, 9 },
	{ seed_rc_answers, 9 },
	{ seed_other, 10 },
	{ seed_xrc, 9 },
};

size_t fuzz_net_rx_seed(unsigned int i, uint8_t *buf, size_t cap)
{
	struct seed_buf b = { buf, 0, cap, false };
	unsigned int g;

	memset(payload, 'p', sizeof(payload));
	for (g = 0; g < sizeof(groups) / sizeof(groups[0]); g++) {
		if (i < groups[g].n) {
			groups[g].fn(&b, i);
			return b.full ? 0 : b.len;
		}
		i -= groups[g].n;
	}
	return 0;
}

#define MAX_SEEDS 64
#define SEED_CAP 8192

static int write_seeds(const char *dir)
{
	static uint8_t buf[SEED_CAP];
	unsigned int i, written = 0;
	char path[4096];
	size_t n;
	FILE *f;

	if (mkdir(dir, 0755) && errno != EEXIST) {
		perror(dir);
		return 1;
	}
	for (i = 0; i < MAX_SEEDS; i++) {
		n = fuzz_net_rx_seed(i, buf, sizeof(buf));
		if (!n)
			continue;
		snprintf(path, sizeof(path), "%s/seed-net-%02u", dir, i);
		f = fopen(path, "wb");
		if (!f || fwrite(buf, 1, n, f) != n || fclose(f)) {
			perror(path);
			return 1;
		}
		written++;
	}
	printf("fuzz_net_rx_seeds: %u seeds in %s\n", written, dir);
	return 0;
}

/*
 * Each seed whole, then for each of its records: the input cut inside the
 * record's headers (record header, BTH, extension headers) and just before
 * its end, every bit of the record header and the BTH flipped, and every
 * byte of the extension headers inverted.
 */
static int replay_seeds(void)
{
	static uint8_t buf[SEED_CAP], mut[SEED_CAP];
	unsigned int i, seeds = 0;
	unsigned long runs = 0;
	size_t n, off, k;

	LLVMFuzzerInitialize(NULL, NULL);
	for (i = 0; i < MAX_SEEDS; i++) {
		n = fuzz_net_rx_seed(i, buf, sizeof(buf));
		if (!n)
			continue;
		seeds++;
		LLVMFuzzerTestOneInput(buf, n);
		runs++;
		for (off = 0; off + FUZZ_NET_REC_HDR <= n;) {
			size_t plen = (size_t)buf[off + 1] |
				      (size_t)buf[off + 2] << 8;
			size_t end = off + FUZZ_NET_REC_HDR + plen;
			size_t hdrs = FUZZ_NET_REC_HDR +
				      (plen < SHCA_WIRE_MAX_HDR ?
					       plen : SHCA_WIRE_MAX_HDR);
			size_t bits = 8 * (FUZZ_NET_REC_HDR + SHCA_BTH_LEN);

			for (k = 0; k < hdrs; k++, runs++)
				LLVMFuzzerTestOneInput(buf, off + k);
			LLVMFuzzerTestOneInput(buf, end - 1);
			runs++;
			for (k = 0; k < bits && k < 8 * hdrs; k++, runs++) {
				memcpy(mut, buf, n);
				mut[off + k / 8] ^= (uint8_t)(1u << (k % 8));
				LLVMFuzzerTestOneInput(mut, n);
			}
			for (k = bits / 8; k < hdrs; k++, runs++) {
				memcpy(mut, buf, n);
				mut[off + k] ^= 0xff;
				LLVMFuzzerTestOneInput(mut, n);
			}
			off = end;
		}
	}
	printf("fuzz_net_rx_seeds: %u seeds, %lu runs, no failure\n", seeds,
	       runs);
	return 0;
}

static int replay_files(int argc, char **argv)
{
	static uint8_t buf[1 << 20];
	size_t n;
	FILE *f;
	int i;

	LLVMFuzzerInitialize(NULL, NULL);
	for (i = 0; i < argc; i++) {
		f = fopen(argv[i], "rb");
		if (!f) {
			perror(argv[i]);
			return 1;
		}
		n = fread(buf, 1, sizeof(buf), f);
		fclose(f);
		LLVMFuzzerTestOneInput(buf, n);
		printf("%s: ok\n", argv[i]);
	}
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "write"))
		return write_seeds(argv[2]);
	if (argc == 2 && !strcmp(argv[1], "replay"))
		return replay_seeds();
	if (argc > 2 && !strcmp(argv[1], "replay"))
		return replay_files(argc - 2, argv + 2);
	fprintf(stderr, "usage: %s write DIR | replay [FILE...]\n", argv[0]);
	return 2;
}
