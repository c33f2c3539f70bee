/* SPDX-License-Identifier: MIT */
/*
 * Fuzz targets (libFuzzer entry points) and their seed corpora.  Built with
 * clang -fsanitize=fuzzer,address by `make fuzz` (tests/fuzz/CMakeLists.txt),
 * and replayed on their seeds by the unit tests unit_fuzz_wire_replay and
 * unit_fuzz_net_rx_replay in every build.
 */
#ifndef SOFTHCA_FUZZ_H
#define SOFTHCA_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Seed i of the wire fuzzer into buf: its length, 0 past the last seed. */
size_t fuzz_wire_seed(unsigned int i, uint8_t *buf, size_t cap);

/*
 * fuzz_net_rx (fuzz_net_rx.c): the net path's receive side, shca_net_rx,
 * with RC, UC and UD QPs of softhca_lo behind it.  An input is a list of
 * records, each one packet as a peer sends it:
 *
 *	selector (1 byte), length (2 bytes, little endian), packet (BTH .. pad)
 *
 * (the last record's length is cut to what is left).  The selector's low
 * two bits say where the packet comes from; the flags patch the packet
 * before it is handed over, so that the fuzzer reaches the states behind
 * a matching QP number, PSN or key.
 */
#define FUZZ_NET_FROM_RC	0	/* the RC QP's connection */
#define FUZZ_NET_FROM_UC	1	/* the UC QP's connection */
#define FUZZ_NET_FROM_UD	2	/* a datagram, for the UD QP */
#define FUZZ_NET_FROM_OTHER	3	/* another connection, for the RC QP */
#define FUZZ_NET_FROM_MASK	3
#define FUZZ_NET_SET_QPN	0x04	/* BTH DestQP := that QP's number */
#define FUZZ_NET_SET_PSN	0x08	/* PSN := the one the QP expects next */
#define FUZZ_NET_SET_KEY	0x10	/* RETH/AtomicETH R_Key := the MR's,
					 * DETH Q_Key := the UD QP's */
/*
 * XRC: a packet of an XRC opcode (101xxxxx) from the RC QP's connection
 * is for the XRC_RECV QP (same destination as the RC QP; an XRC SRQ of
 * its domain, on the CQ, takes its receives): SET_QPN names that QP,
 * SET_PSN its expected PSN, and SET_KEY sets the XRCETH to the XRC SRQ's
 * number too (without it, the seed's own number: none of ours).
 */
/* With SET_PSN, bits 5..7 add a delta to that PSN: 0 (i = 0..3), +1 (4),
 * -1 (5: a duplicate), +2 (6: one lost), +2^23 (7: half the PSN space). */
#define FUZZ_NET_PSN_DELTA(i)	((unsigned int)(i) << 5)
#define FUZZ_NET_REC_HDR	3

/*
 * What the target sets up, for the seeds: the MR's length and I/O virtual
 * address (all access rights), the PSNs the QPs start from, the UD Q_Key
 * and multicast group (the UD QP is a member; dest QPN 0xffffff).
 */
#define FUZZ_NET_MR_LEN		4096
#define FUZZ_NET_IOVA		0x10000ull
#define FUZZ_NET_RQ_PSN		0x000100	/* responders' first PSN */
#define FUZZ_NET_SQ_PSN		0xfffffe	/* RC requester's first PSN */
#define FUZZ_NET_QKEY		0x11111111u
#define FUZZ_NET_MCAST_V4	0xef004d4du	/* 239.0.77.77 */

/*
 * The RC QP's send queue, posted anew for every input so that ACKs and
 * responses find requests to answer: these WQEs, in this order, with PSNs
 * from FUZZ_NET_SQ_PSN on at a path MTU of 256.
 */
#define FUZZ_NET_PMTU		256
#define FUZZ_NET_RC_SEND_LEN	8	/* SEND, 1 packet */
#define FUZZ_NET_RC_WRITE_LEN	300	/* RDMA WRITE, 2 packets */
#define FUZZ_NET_RC_READ_LEN	600	/* RDMA READ, 3 response packets */
					/* CMP_AND_SWP, FETCH_AND_ADD, 1 each */
					/* SEND_WITH_IMM of 0 bytes */

/* Seed i of fuzz_net_rx into buf: its length, 0 past the last seed. */
size_t fuzz_net_rx_seed(unsigned int i, uint8_t *buf, size_t cap);

/*
 * For tests that check what the responder did, not only that it did not
 * crash (oracle_net_rx.c): sent(pkt, len) sees every frame softhca sends
 * to the peer (read back by the target, an IB packet BTH .. pad), after(i)
 * runs once record i of an input was carried out and settled; the MR's
 * bytes (FUZZ_NET_MR_LEN at FUZZ_NET_IOVA) and the RC QP's counters; and
 * one more read of what softhca sent.  NULL hooks: none.
 */
struct shca_stat_block;
struct fuzz_net_rx_hooks {
	void (*sent)(const uint8_t *pkt, size_t len, void *arg);
	void (*after)(unsigned int rec, void *arg);
	void *arg;
};
void fuzz_net_rx_set_hooks(const struct fuzz_net_rx_hooks *h);
unsigned char *fuzz_net_rx_mr(void);
const struct shca_stat_block *fuzz_net_rx_rc_stats(void);
void fuzz_net_rx_drain(void);

/*
 * The target cannot run here (no softhca_lo: lo has no address): exit 77,
 * a skip for ctest (SKIP_RETURN_CODE) and for scripts/check.sh, which
 * finds "<target>: skipped:" in the output; under CI (CI=true, as .ci/run
 * sets) exit 1, since there the environment is complete.
 */
static inline void fuzz_skip_env(const char *target, const char *why)
{
	const char *ci = getenv("CI");

	if (ci && *ci && strcmp(ci, "0") && strcmp(ci, "false")) {
		fprintf(stderr, "%s: FAIL: CI=true and %s\n", target, why);
		exit(1);
	}
	fprintf(stderr, "%s: skipped: %s\n", target, why);
	exit(77);
}

#endif
