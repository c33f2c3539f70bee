// SPDX-License-Identifier: MIT
/*
 * A long RC message's progress on the net path (net/transport.c
 * ACK_EVERY, middle_ack, acks_more):
 *  - the requester asks for an ACK (AckReq) on every 64th packet of a
 *    message of many packets, not only on its last (rxe asks every 64,
 *    hfi1 every 16);
 *  - the responder answers such a middle packet with an ACK of its PSN,
 *    and a middle packet without AckReq with nothing;
 *  - an ACK or a PSN sequence NAK that covers packets of the head WQE not
 *    covered before resets the head's retry count (IBA 9.7.6.1.3 counts
 *    the retries of a request nothing answers); one that covers nothing
 *    new leaves it.
 * Before, the count went back to 0 only when the head completed, and the
 * only ACK of a SEND or WRITE came after its last packet: a 1 MiB message
 * under heavy faults or frequent connection resets could end in
 * IBV_WC_RETRY_EXC_ERR while it was still moving on.
 *
 * White box, no timing, as test_retry_timer: libibverbs' objects linked
 * statically, an RC pair in this process on the net path with every
 * packet dropped as it is queued (SOFTHCA_FAULTS=drop=1: nothing reaches
 * the other QP, and SOFTHCA_PCAP records each one all the same), an ACK
 * timeout of about a minute.  The test hands made-up answers and
 * requests to shca_net_rx on a QP's own connection, as the engine hands
 * up what it reads there.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <infiniband/verbs.h>

#include "harness.h"
#include "ep.h"
#include "pcap_read.h"
#include "common/stat.h"
#include "net/net.h"
#include "net/transport.h"
#include "verbs/shca.h"
#include "wire/wire.h"

#define NPKT		200	/* the long WRITE's packets */
#define ACK_EVERY	64	/* transport.c's */
#define WAIT_STEPS	10000	/* of 1 ms: 10 s */

static const uint8_t SYN_ACK = (SHCA_AETH_ACK << 5) |
			       SHCA_AETH_CREDITS_INVALID;

static char pcap_path[64];

static void setup(struct ep *a, struct ep *b, bool trace)
{
	struct ep_opts o;

	ASSERT_EQ(setenv("SOFTHCA_NET", "1", 1), 0);
	ASSERT_EQ(setenv("SOFTHCA_FAULTS", "drop=1", 1), 0);
	if (trace) {
		snprintf(pcap_path, sizeof(pcap_path),
			 "/tmp/softhca-ackprog-%d.pcap", (int)getpid());
		ASSERT_EQ(setenv("SOFTHCA_PCAP", pcap_path, 1), 0);
	}
	ep_default_opts(&o, IBV_QPT_RC);
	o.timeout = 24;		/* 4.096 us << 24: 69 s, never by itself */
	o.retry_cnt = 7;
	o.buf_size = (size_t)NPKT * 4096;
	ep_pair(a, &o, b, &o);
	ASSERT(to_sqp(a->qp)->net.on);
	ASSERT_NOT_NULL(to_sqp(a->qp)->net.conn);
	ASSERT(to_sqp(b->qp)->net.on);
	ASSERT_NOT_NULL(to_sqp(b->qp)->net.conn);
}

static uint64_t admit_drops(void)
{
	return __atomic_load_n(
		&shca_stat_proc()->v[SHCA_STAT_NET_ADMIT_DROPS],
		__ATOMIC_RELAXED);
}

/* Packet m for ibqp, built and handed up on the connection of requester
 * rq (the pair is in one process: the connection a's packets leave on is
 * the one its answers come back on, and the one b's requests would come
 * on from a's process; b's own is opened only when b sends). */
static void feed(struct ibv_qp *ibqp, struct ibv_qp *rq,
		 struct shca_wire_msg *m)
{
	struct shca_net_addr addr;
	unsigned char pkt[SHCA_BTH_LEN + 64 + 4096];
	ssize_t len;
	int i;

	m->pkey = SHCA_DEFAULT_PKEY;
	m->dqpn = ibqp->qp_num;
	len = shca_wire_build(pkt, sizeof(pkt), m);
	ASSERT_GT(len, 0);
	memset(&addr, 0, sizeof(addr));
	/* until the connection's handshake has proved its other end, the
	 * packet is not admitted (dropped, counted net_admit_drops): again */
	for (i = 0; i < WAIT_STEPS; i++) {
		uint64_t drops = admit_drops();

		shca_net_rx(to_sqp(rq)->net.conn, &addr, pkt, (size_t)len);
		if (admit_drops() == drops)
			return;
		usleep(1000);
	}
	harness_fail(__FILE__, __LINE__, "never admitted");
}

static void answer(struct ibv_qp *qp, uint32_t psn, uint8_t syndrome)
{
	struct shca_wire_msg m;

	memset(&m, 0, sizeof(m));
	m.opcode = SHCA_OP_RC_ACKNOWLEDGE;
	m.psn = psn & SHCA_PSN_MASK;
	m.syndrome = syndrome;
	feed(qp, qp, &m);
}

static uint32_t head_retries(struct ibv_qp *ibqp)
{
	struct shca_qp *qp = to_sqp(ibqp);
	uint32_t r;

	pthread_mutex_lock(&qp->exec_lock);
	r = qp->head_retries;
	pthread_mutex_unlock(&qp->exec_lock);
	return r;
}

static void set_head_retries(struct ibv_qp *ibqp, uint32_t r)
{
	struct shca_qp *qp = to_sqp(ibqp);

	pthread_mutex_lock(&qp->exec_lock);
	qp->head_retries = r;
	pthread_mutex_unlock(&qp->exec_lock);
}

static uint64_t sent_pkts(struct ibv_qp *qp)
{
	return __atomic_load_n(
		&to_sqp(qp)->shm->stats.v[SHCA_STAT_SENT_PKTS],
		__ATOMIC_RELAXED);
}

/* a's long WRITE to b, posted and (dropped) sent: its first PSN */
static uint32_t post_long_write(struct ep *a, uint32_t mtu)
{
	struct shca_qp *qp = to_sqp(a->qp);
	struct shca_send_wqe *w;
	uint32_t head, tail, psn;

	ASSERT_EQ(ep_post(a, 1, IBV_WR_RDMA_WRITE, 0, NPKT * mtu, 0, 0), 0);
	pthread_mutex_lock(&qp->exec_lock);
	w = shca_sq_first(qp, &head, &tail);
	ASSERT_NOT_NULL(w);
	ASSERT(head != qp->net.assigned);	/* its PSNs given */
	psn = w->psn;
	pthread_mutex_unlock(&qp->exec_lock);
	return psn;
}

/* ------------------------------------------------------------------ */

struct trace_scan {
	uint32_t dqpn, psn0;
	unsigned int pkts, ackreq_middles, wrong;
};

static void scan(const uint8_t *ib, uint32_t len, void *arg)
{
	struct trace_scan *t = arg;
	uint8_t op = pcap_bth_opcode(ib);
	uint32_t k;
	bool ackreq, want;

	if (len < SHCA_BTH_LEN || pcap_bth_dqpn(ib) != t->dqpn ||
	    op < SHCA_OP_RC_RDMA_WRITE_FIRST || op > SHCA_OP_RC_RDMA_WRITE_LAST)
		return;
	k = (pcap_bth_psn(ib) - t->psn0) & SHCA_PSN_MASK;
	ackreq = ib[8] & 0x80;
	want = k + 1 == NPKT || (k + 1) % ACK_EVERY == 0;
	t->pkts++;
	if (ackreq && k + 1 < NPKT)
		t->ackreq_middles++;
	if (ackreq != want) {
		printf("  packet %u (opcode %#x): AckReq %d\n", k, op, ackreq);
		t->wrong++;
	}
}

/* The requester's packets of a 200-packet WRITE: AckReq on the 64th,
 * 128th, 192nd and the last. */
TEST(ackreq_every_64th_packet)
{
	struct trace_scan t = { 0 };
	struct ep a, b;
	int i;

	setup(&a, &b, true);
	t.dqpn = b.qp->qp_num;
	t.psn0 = post_long_write(&a, ep_mtu_bytes(&a));
	for (i = 0; i < WAIT_STEPS; i++) {
		memset(&t.pkts, 0, sizeof(t) - offsetof(struct trace_scan,
							pkts));
		pcap_each(pcap_path, scan, &t);
		if (t.pkts >= NPKT)
			break;
		usleep(1000);
	}
	unlink(pcap_path);
	printf("  %u packets, %u middle ones with AckReq\n", t.pkts,
	       t.ackreq_middles);
	ASSERT_EQ(t.pkts, NPKT);
	ASSERT_EQ(t.wrong, 0);
	ASSERT_EQ(t.ackreq_middles, (NPKT - 1) / ACK_EVERY);
	ep_destroy(&a);
	ep_destroy(&b);
}

/* b as the responder of a WRITE of four packets fed by hand: the third
 * asks for an ACK and gets one, the second does not; every byte lands. */
TEST(middle_with_ackreq_is_answered)
{
	struct shca_qp *qb;
	struct shca_wire_msg m;
	uint8_t payload[4096];
	uint32_t mtu, epsn, k;
	uint64_t s0, s1 = ~0ull, s2 = ~0ull;
	struct ep a, b;

	setup(&a, &b, false);
	qb = to_sqp(b.qp);
	mtu = ep_mtu_bytes(&b);
	/* a's connection opened by a WRITE of a's (dropped) */
	ASSERT_EQ(ep_post(&a, 1, IBV_WR_RDMA_WRITE, 0, 64, 0, 0), 0);
	ASSERT(mtu <= sizeof(payload));
	pthread_mutex_lock(&qb->exec_lock);
	epsn = qb->net.epsn;
	pthread_mutex_unlock(&qb->exec_lock);
	memset(b.buf, 0, 4 * mtu);
	for (k = 0; k < 4; k++) {
		memset(&m, 0, sizeof(m));
		m.opcode = k == 0 ? SHCA_OP_RC_RDMA_WRITE_FIRST :
			   k == 3 ? SHCA_OP_RC_RDMA_WRITE_LAST :
				    SHCA_OP_RC_RDMA_WRITE_MIDDLE;
		m.psn = shca_psn_add(epsn, k);
		if (k == 0) {
			m.va = (uint64_t)(uintptr_t)b.buf;
			m.rkey = b.mr->rkey;
			m.dma_len = 4 * mtu;
		}
		m.ackreq = k == 2 || k == 3;
		ep_fill_pattern(payload, mtu, 7, (uint64_t)k * mtu);
		m.payload = payload;
		m.payload_len = mtu;
		s0 = sent_pkts(b.qp);
		feed(b.qp, a.qp, &m);
		if (k == 1)
			s1 = sent_pkts(b.qp) - s0;
		if (k == 2)
			s2 = sent_pkts(b.qp) - s0;
	}
	printf("  ACKs for the middle packet without AckReq: %llu, with: "
	       "%llu\n", (unsigned long long)s1, (unsigned long long)s2);
	ASSERT_U64_EQ(s1, 0);
	ASSERT_U64_EQ(s2, 1);
	ASSERT_EQ(ep_find_pattern_diff(b.buf, 4 * mtu, 7, 0), -1);
	pthread_mutex_lock(&qb->exec_lock);
	ASSERT_EQ(qb->net.epsn, shca_psn_add(epsn, 4));
	pthread_mutex_unlock(&qb->exec_lock);
	ep_destroy(&a);
	ep_destroy(&b);
}

/* a as the requester of a 200-packet WRITE: answers by hand. */
TEST(ack_covering_more_resets_retries)
{
	uint32_t psn0;
	struct ep a, b;

	setup(&a, &b, false);
	psn0 = post_long_write(&a, ep_mtu_bytes(&a));

	/* an ACK of the first 64 packets: progress */
	set_head_retries(a.qp, 3);
	answer(a.qp, psn0 + 63, SYN_ACK);
	ASSERT_EQ(head_retries(a.qp), 0);
	/* the same again, and an older one: nothing new */
	set_head_retries(a.qp, 3);
	answer(a.qp, psn0 + 63, SYN_ACK);
	ASSERT_EQ(head_retries(a.qp), 3);
	answer(a.qp, psn0 + 10, SYN_ACK);
	ASSERT_EQ(head_retries(a.qp), 3);
	/* a sequence NAK at packet 100 covers 64..99: progress; again, not */
	answer(a.qp, psn0 + 100, shca_aeth_syn_nak(SHCA_NAK_PSN_SEQ_ERR));
	ASSERT_EQ(head_retries(a.qp), 0);
	set_head_retries(a.qp, 3);
	answer(a.qp, psn0 + 100, shca_aeth_syn_nak(SHCA_NAK_PSN_SEQ_ERR));
	ASSERT_EQ(head_retries(a.qp), 3);
	/* nothing of it completed the WRITE */
	ep_expect_empty(a.scq);
	/* its last packet's ACK does */
	answer(a.qp, psn0 + NPKT - 1, SYN_ACK);
	ep_expect(a.scq, a.qp, 1, IBV_WC_SUCCESS);
	ASSERT_EQ(head_retries(a.qp), 0);
	ep_destroy(&a);
	ep_destroy(&b);
}
