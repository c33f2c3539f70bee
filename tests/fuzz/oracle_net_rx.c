// SPDX-License-Identifier: MIT
/*
 * What the net path's responder answers to duplicated and out-of-sequence
 * requests, checked against the rules rather than for crashes: the
 * fuzz_net_rx target (fuzz_net_rx.c) feeds hand-made packets to its RC QP
 * as a peer on another host would, and every answer softhca sends back
 * is read off the wire and decoded here, by hand, from the IBA header
 * layouts (not with softhca's codec).
 *
 * The rules (IBA 9.7.5.1.3, duplicate requests; rxe's duplicate_request()
 * does the same):
 *   - a duplicate atomic is not carried out again: the responder sends
 *     the AtomicAckETH it saved, with the original value of the first
 *     execution, and memory is left as it is;
 *   - a duplicate RDMA READ is carried out again, from memory as it is
 *     now: unchanged memory gives the same bytes, changed memory the new
 *     ones; a duplicate for a later PSN of the READ (the requester asks
 *     again from a lost response on) starts at that response's bytes;
 *   - a duplicate SEND is ACKed again with the latest PSN done;
 *   - a request after a PSN gap gets one PSN sequence NAK (IBA 9.7.5.1.2:
 *     one until the expected PSN arrives), and nothing is carried out.
 * The RC QP's duplicate_request and out_of_sequence counters move by the
 * number of such packets fed.
 */
#include <stdbool.h>
#include <stdint.h>
#include <unistd.h>

#include "harness.h"
#include "fuzz.h"
#include "common/stat.h"

/* IBA 9.2 (BTH), 9.3 (extension headers) */
#define BTH		12
#define RETH		16
#define ATOMICETH	28
#define AETH		4
#define OP_SEND_ONLY	0x04
#define OP_READ_REQ	0x0c
#define OP_READ_FIRST	0x0d
#define OP_READ_MIDDLE	0x0e
#define OP_READ_LAST	0x0f
#define OP_READ_ONLY	0x10
#define OP_ACK		0x11
#define OP_ATOMIC_ACK	0x12
#define OP_CMP_SWAP	0x13
#define OP_FETCH_ADD	0x14
#define SYN_ACK		0x1f	/* ACK, credits invalid */
#define SYN_NAK_SEQ	0x60	/* NAK, PSN sequence error */

/* Where in the MR (fuzz.h: FUZZ_NET_IOVA, 4096 bytes) these tests work:
 * after everything fuzz_net_rx.c places there itself */
#define ATOMIC_OFF	3600
#define READ_OFF	3616
#define READ_LEN	300		/* two responses at FUZZ_NET_PMTU */
_Static_assert(READ_OFF + READ_LEN <= FUZZ_NET_MR_LEN, "MR layout");

#define PSN(k)		((FUZZ_NET_RQ_PSN + (k)) & 0xffffff)
#define SEL	(FUZZ_NET_FROM_RC | FUZZ_NET_SET_QPN | FUZZ_NET_SET_KEY)
#define MAX_FRAMES	32

/* ------------------------------------------------------------------ */
/* Packets, by hand                                                    */

struct input {
	uint8_t b[2048];
	size_t len;
};

static void be(uint8_t *p, uint64_t v, int n)
{
	while (n--) {
		p[n] = (uint8_t)v;
		v >>= 8;
	}
}

static uint64_t get_be(const uint8_t *p, int n)
{
	uint64_t v = 0;

	while (n--)
		v = v << 8 | *p++;
	return v;
}

/* A record of the input (fuzz.h): selector, length, then the packet:
 * BTH (the QPN and R_Key patched in by the target) and what follows. */
static uint8_t *record(struct input *in, uint8_t opcode, uint32_t psn,
		       size_t ext_len)
{
	uint8_t *p = in->b + in->len + FUZZ_NET_REC_HDR;
	size_t len = BTH + ext_len;

	ASSERT(in->len + FUZZ_NET_REC_HDR + len <= sizeof(in->b));
	in->b[in->len] = SEL;
	in->b[in->len + 1] = (uint8_t)len;
	in->b[in->len + 2] = (uint8_t)(len >> 8);
	memset(p, 0, len);
	p[0] = opcode;
	be(p + 2, 0xffff, 2);		/* P_Key */
	p[8] = 0x80;			/* AckReq */
	be(p + 9, psn, 3);
	in->len += FUZZ_NET_REC_HDR + len;
	return p + BTH;
}

static void atomic(struct input *in, uint8_t opcode, uint32_t psn,
		   uint64_t swap_add, uint64_t compare)
{
	uint8_t *e = record(in, opcode, psn, ATOMICETH);

	be(e, FUZZ_NET_IOVA + ATOMIC_OFF, 8);
	be(e + 12, swap_add, 8);
	be(e + 20, compare, 8);
}

static void read_req(struct input *in, uint32_t psn, uint32_t off,
		     uint32_t len)
{
	uint8_t *e = record(in, OP_READ_REQ, psn, RETH);

	be(e, FUZZ_NET_IOVA + off, 8);
	be(e + 12, len, 4);
}

static void send_only(struct input *in, uint32_t psn)
{
	uint8_t *e = record(in, OP_SEND_ONLY, psn, 8);

	memset(e, 's', 8);
}

/* ------------------------------------------------------------------ */
/* What came back                                                      */

struct frame {
	uint8_t opcode;
	uint32_t psn;
	uint8_t syndrome;		/* AETH, where there is one */
	uint64_t orig;			/* AtomicAckETH */
	uint32_t len;			/* READ response payload */
	uint8_t data[FUZZ_NET_PMTU];
};

static struct {
	unsigned int n;
	struct frame f[MAX_FRAMES];
	/* the test's step after record i */
	void (*step)(unsigned int rec);
} seen;

/* Responses only: the RC QP's own requests (fuzz.h) go the same way. */
static void on_sent(const uint8_t *p, size_t len, void *arg)
{
	struct frame *f;
	size_t hdr = BTH;
	uint8_t op = p[0];

	(void)arg;
	if (op < OP_READ_FIRST || op > OP_ATOMIC_ACK)
		return;
	if (seen.n == MAX_FRAMES)
		harness_fail(__FILE__, __LINE__, "more than %d answers",
			     MAX_FRAMES);
	f = &seen.f[seen.n++];
	memset(f, 0, sizeof(*f));
	f->opcode = op;
	f->psn = (uint32_t)get_be(p + 9, 3);
	if (op != OP_READ_MIDDLE) {
		ASSERT(len >= BTH + AETH);
		f->syndrome = p[BTH];
		hdr += AETH;
	}
	if (op == OP_ATOMIC_ACK) {
		ASSERT(len >= hdr + 8);
		f->orig = get_be(p + hdr, 8);
	} else if (op != OP_ACK) {
		/* PadCnt: BTH byte 1, bits 5..4 */
		size_t pad = (p[1] >> 4) & 3;

		ASSERT(len >= hdr + pad && len - hdr - pad <= FUZZ_NET_PMTU);
		f->len = (uint32_t)(len - hdr - pad);
		memcpy(f->data, p + hdr, f->len);
	}
}

static void on_after(unsigned int rec, void *arg)
{
	(void)arg;
	if (seen.step)
		seen.step(rec);
}

/* Wait (bounded, not timed) until n answers were read back. */
static void wait_frames(unsigned int n)
{
	int i;

	for (i = 0; i < 10000 && seen.n < n; i++) {
		fuzz_net_rx_drain();
		if (seen.n < n)
			usleep(1000);
	}
	if (seen.n < n)
		harness_fail(__FILE__, __LINE__, "%u answers, expected %u",
			     seen.n, n);
}

static void start(void (*step)(unsigned int rec))
{
	struct fuzz_net_rx_hooks h = { on_sent, on_after, NULL };

	LLVMFuzzerInitialize(NULL, NULL);
	memset(&seen, 0, sizeof(seen));
	seen.step = step;
	fuzz_net_rx_set_hooks(&h);
}

/* Run the input; then every answer is in seen, and no more than n. */
static void run(const struct input *in, unsigned int n)
{
	LLVMFuzzerTestOneInput(in->b, in->len);
	wait_frames(n);
	fuzz_net_rx_drain();
	ASSERT_EQ(seen.n, n);
}

static uint64_t qp_stat(enum shca_stat s)
{
	return fuzz_net_rx_rc_stats()->v[s];
}

static uint64_t mem64(uint32_t off)
{
	uint64_t v;

	memcpy(&v, fuzz_net_rx_mr() + off, 8);
	return v;
}

static void set_mem64(uint32_t off, uint64_t v)
{
	memcpy(fuzz_net_rx_mr() + off, &v, 8);
}

static void expect_atomic_ack(unsigned int i, uint32_t psn, uint64_t orig)
{
	const struct frame *f = &seen.f[i];

	ASSERT_EQ(f->opcode, OP_ATOMIC_ACK);
	ASSERT_EQ(f->psn, psn);
	ASSERT_EQ(f->syndrome, SYN_ACK);
	ASSERT_U64_EQ(f->orig, orig);
}

/* ------------------------------------------------------------------ */
/* Atomics                                                             */

#define V0	0x0102030405060708ull	/* before */
#define SWAP	0x1122334455667788ull
#define W	0x00a0b0c0d0e0f000ull	/* the owner writes it */

static void atomic_step(unsigned int rec)
{
	if (rec == 0) {
		wait_frames(1);
		ASSERT_U64_EQ(mem64(ATOMIC_OFF), V0 + 5);
	} else if (rec == 1) {
		wait_frames(2);
		ASSERT_U64_EQ(mem64(ATOMIC_OFF), SWAP);
		/* the memory's owner changes it: a duplicate carried out
		 * again would show it, in its answer or in memory */
		set_mem64(ATOMIC_OFF, W);
	} else if (rec == 2 || rec == 3) {
		wait_frames(rec + 1);
		ASSERT_U64_EQ(mem64(ATOMIC_OFF), W);
	}
}

TEST(duplicate_atomic_applied_once)
{
	struct input in = { .len = 0 };
	uint64_t dup0, oos0;

	start(atomic_step);
	set_mem64(ATOMIC_OFF, V0);
	atomic(&in, OP_FETCH_ADD, PSN(0), 5, 0);	/* V0 -> V0 + 5 */
	atomic(&in, OP_CMP_SWAP, PSN(1), SWAP, V0 + 5);	/* -> SWAP */
	atomic(&in, OP_FETCH_ADD, PSN(0), 5, 0);	/* duplicates */
	atomic(&in, OP_CMP_SWAP, PSN(1), SWAP, V0 + 5);
	atomic(&in, OP_FETCH_ADD, PSN(2), 1, 0);	/* new: W -> W + 1 */
	dup0 = qp_stat(SHCA_STAT_DUPLICATE_REQUEST);
	oos0 = qp_stat(SHCA_STAT_OUT_OF_SEQ_REQUEST);
	run(&in, 5);
	expect_atomic_ack(0, PSN(0), V0);
	expect_atomic_ack(1, PSN(1), V0 + 5);
	expect_atomic_ack(2, PSN(0), V0);	/* the saved results */
	expect_atomic_ack(3, PSN(1), V0 + 5);
	expect_atomic_ack(4, PSN(2), W);
	ASSERT_U64_EQ(mem64(ATOMIC_OFF), W + 1);
	ASSERT_EQ(qp_stat(SHCA_STAT_DUPLICATE_REQUEST) - dup0, 2);
	ASSERT_EQ(qp_stat(SHCA_STAT_OUT_OF_SEQ_REQUEST) - oos0, 0);
}

/* ------------------------------------------------------------------ */
/* READ                                                                */

static void fill(uint32_t off, uint32_t len, uint8_t seed)
{
	uint32_t i;

	for (i = 0; i < len; i++)
		fuzz_net_rx_mr()[off + i] = (uint8_t)(seed + i * 7 + (i >> 8));
}

/* Responses from frame i on: PSNs from psn, opcodes for a READ of len
 * bytes, the bytes the memory held at off (want: a copy of it). */
static unsigned int expect_read(unsigned int i, uint32_t psn,
				const uint8_t *want, uint32_t len)
{
	uint32_t n = (len + FUZZ_NET_PMTU - 1) / FUZZ_NET_PMTU, k;

	for (k = 0; k < n; k++, i++) {
		const struct frame *f = &seen.f[i];
		uint32_t take = k + 1 < n ? FUZZ_NET_PMTU :
					    len - k * FUZZ_NET_PMTU;
		uint8_t op = n == 1 ? OP_READ_ONLY :
			     k == 0 ? OP_READ_FIRST :
			     k + 1 < n ? OP_READ_MIDDLE : OP_READ_LAST;

		ASSERT_EQ(f->opcode, op);
		ASSERT_EQ(f->psn, (psn + k) & 0xffffff);
		if (op != OP_READ_MIDDLE)
			ASSERT_EQ(f->syndrome, SYN_ACK);
		ASSERT_EQ(f->len, take);
		if (memcmp(f->data, want + k * FUZZ_NET_PMTU, take))
			harness_fail(__FILE__, __LINE__,
				     "READ response psn 0x%06x: other bytes "
				     "than memory held", f->psn);
	}
	return i;
}

static uint8_t before[READ_LEN], after[READ_LEN];

static void read_step(unsigned int rec)
{
	if (rec == 1) {
		/* both READs answered in full: then the memory changes */
		wait_frames(4);
		fill(READ_OFF, READ_LEN, 0x5b);
		memcpy(after, fuzz_net_rx_mr() + READ_OFF, READ_LEN);
		ASSERT(memcmp(before, after, READ_LEN));
	}
}

TEST(duplicate_read_reread)
{
	struct input in = { .len = 0 };
	unsigned int i;
	uint64_t dup0;

	start(read_step);
	fill(READ_OFF, READ_LEN, 0x11);
	memcpy(before, fuzz_net_rx_mr() + READ_OFF, READ_LEN);
	read_req(&in, PSN(0), READ_OFF, READ_LEN);	/* PSNs 0, 1 */
	read_req(&in, PSN(0), READ_OFF, READ_LEN);	/* duplicate */
	/* (the memory changes here) */
	read_req(&in, PSN(0), READ_OFF, READ_LEN);	/* duplicate */
	/* asked again from its second response on */
	read_req(&in, PSN(1), READ_OFF + FUZZ_NET_PMTU,
		 READ_LEN - FUZZ_NET_PMTU);
	read_req(&in, PSN(2), READ_OFF, 8);		/* new */
	dup0 = qp_stat(SHCA_STAT_DUPLICATE_REQUEST);
	run(&in, 2 + 2 + 2 + 1 + 1);
	i = expect_read(0, PSN(0), before, READ_LEN);
	/* the same bytes */
	i = expect_read(i, PSN(0), before, READ_LEN);
	i = expect_read(i, PSN(0), after, READ_LEN);	/* read again */
	i = expect_read(i, PSN(1), after + FUZZ_NET_PMTU,
			READ_LEN - FUZZ_NET_PMTU);
	expect_read(i, PSN(2), after, 8);
	ASSERT_EQ(qp_stat(SHCA_STAT_DUPLICATE_REQUEST) - dup0, 3);
	/* a READ writes nothing */
	ASSERT(!memcmp(fuzz_net_rx_mr() + READ_OFF, after, READ_LEN));
}

/* ------------------------------------------------------------------ */
/* PSN gaps and duplicate SENDs                                        */

TEST(out_of_sequence_one_nak)
{
	struct input in = { .len = 0 };
	uint64_t dup0, oos0, nak0;

	start(NULL);
	send_only(&in, PSN(0));		/* ACK 0 */
	send_only(&in, PSN(2));		/* gap: NAK, expected PSN 1 */
	send_only(&in, PSN(3));		/* no second NAK */
	send_only(&in, PSN(0));		/* duplicate: ACK 0 again */
	send_only(&in, PSN(1));		/* ACK 1 */
	dup0 = qp_stat(SHCA_STAT_DUPLICATE_REQUEST);
	oos0 = qp_stat(SHCA_STAT_OUT_OF_SEQ_REQUEST);
	nak0 = qp_stat(SHCA_STAT_SEND_SEQ_ERR);
	run(&in, 4);
	ASSERT_EQ(seen.f[0].opcode, OP_ACK);
	ASSERT_EQ(seen.f[0].psn, PSN(0));
	ASSERT_EQ(seen.f[0].syndrome, SYN_ACK);
	ASSERT_EQ(seen.f[1].opcode, OP_ACK);
	ASSERT_EQ(seen.f[1].psn, PSN(1));
	ASSERT_EQ(seen.f[1].syndrome, SYN_NAK_SEQ);
	ASSERT_EQ(seen.f[2].opcode, OP_ACK);
	ASSERT_EQ(seen.f[2].psn, PSN(0));
	ASSERT_EQ(seen.f[2].syndrome, SYN_ACK);
	ASSERT_EQ(seen.f[3].opcode, OP_ACK);
	ASSERT_EQ(seen.f[3].psn, PSN(1));
	ASSERT_EQ(seen.f[3].syndrome, SYN_ACK);
	ASSERT_EQ(qp_stat(SHCA_STAT_OUT_OF_SEQ_REQUEST) - oos0, 2);
	ASSERT_EQ(qp_stat(SHCA_STAT_SEND_SEQ_ERR) - nak0, 1);
	ASSERT_EQ(qp_stat(SHCA_STAT_DUPLICATE_REQUEST) - dup0, 1);
}

/* ------------------------------------------------------------------ */
/* The requester: an RNR NAK, then the ACK of the same request         */

#define OP_WRITE_FIRST	0x06
#define SYN_RNR_655MS	0x20	/* RNR NAK, timer field 0: 655.36 ms */
#define SQ_PSN(k)	((FUZZ_NET_SQ_PSN + (k)) & 0xffffff)

/* The RC QP's requests (fuzz.h): the SEND at SQ_PSN(0), then the WRITE's
 * first packet at SQ_PSN(1) */
static struct {
	unsigned int writes;		/* WRITE FIRST frames at SQ_PSN(1) */
	unsigned int before_nak;	/* of them, by the end of record 1 */
} req;

static void on_sent_req(const uint8_t *p, size_t len, void *arg)
{
	(void)arg;
	ASSERT(len >= BTH);
	if (p[0] == OP_WRITE_FIRST && get_be(p + 9, 3) == SQ_PSN(1))
		req.writes++;
}

static void ack_of(struct input *in, uint32_t psn, uint8_t syndrome)
{
	uint8_t *e = record(in, OP_ACK, psn, AETH);

	e[0] = syndrome;
}

static void rnr_step(unsigned int rec)
{
	if (rec == 1) {
		fuzz_net_rx_drain();
		req.before_nak = req.writes;
	}
}

/*
 * A requester that got an RNR NAK for its SEND waits the RNR timer
 * before it sends it again.  A copy of the SEND that was already on its
 * way (a duplicate on the wire, a retransmission) can find a receive
 * posted meanwhile: its ACK then comes before the timer, and completes
 * the SEND.  The wait ends with it: here a PSN sequence NAK for the
 * WRITE after it is answered at once, by the WRITE sent again from its
 * first packet.  A requester still "waiting" sends nothing more until a
 * timer (the ACK timer, 2.4 hours here, took the RNR timer's place): a
 * ping-pong under duplicated packets stopped so (held ACKs, s24).
 */
TEST(ack_after_rnr_nak_ends_the_wait)
{
	struct fuzz_net_rx_hooks h = { on_sent_req, on_after, NULL };
	struct input in = { .len = 0 };
	uint64_t rnr0, seq0;
	int i;

	start(rnr_step);
	fuzz_net_rx_drain();	/* an earlier input's requests */
	fuzz_net_rx_set_hooks(&h);
	memset(&req, 0, sizeof(req));
	ack_of(&in, SQ_PSN(0), SYN_RNR_655MS);	/* the SEND: no receive */
	ack_of(&in, SQ_PSN(0), SYN_ACK);	/* a later copy found one */
	ack_of(&in, SQ_PSN(1), SYN_NAK_SEQ);	/* the WRITE: again */
	rnr0 = qp_stat(SHCA_STAT_RCVD_RNR_ERR);
	seq0 = qp_stat(SHCA_STAT_RCVD_SEQ_ERR);
	LLVMFuzzerTestOneInput(in.b, in.len);
	for (i = 0; i < 10000 && req.writes == req.before_nak; i++) {
		fuzz_net_rx_drain();
		if (req.writes == req.before_nak)
			usleep(1000);
	}
	ASSERT_EQ(qp_stat(SHCA_STAT_RCVD_RNR_ERR) - rnr0, 1);
	ASSERT_EQ(qp_stat(SHCA_STAT_RCVD_SEQ_ERR) - seq0, 1);
	/* the original, before the NAK; and once more after it */
	ASSERT_GT(req.before_nak, 0);
	ASSERT_EQ(req.writes, req.before_nak + 1);
}
