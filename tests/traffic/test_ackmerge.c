// SPDX-License-Identifier: MIT
/*
 * Coalesced ACKs on the net path (issue 15, conn.c ack_merge): the
 * responder of an RC QP answers a batch of SENDs read at once with one
 * ACK, not one per message, and nothing else changes.
 *
 * Two processes, SOFTHCA_NET=1 (or two namespaces: test_traffic_netns.sh
 * ackmerge runs it with the receiver in namespace b).  The receiver (the
 * child) posts every receive first.  The sender sends BURSTS bursts of
 * BURST 8-byte SENDs back to back, each while the receiver is stopped
 * (SIGSTOP, seen stopped with waitpid): the burst waits in the
 * receiver's socket and is read in one go after SIGCONT, as a busy
 * receiver reads a fast sender's.  Asserted:
 *  - every send completes successfully, in the order posted;
 *  - every receive completes in the order posted, with its 8 bytes intact
 *    (ep_pattern of its number);
 *  - the receiver QP's sent_pkts (`softhca stat`: its only packets are
 *    ACKs) is below the message count: the ACKs were coalesced.  One
 *    ACK per SEND (main before this change) fails here.
 * The same under SOFTHCA_FAULTS drop and dup (both processes): a lost or
 * duplicated ACK or request is recovered as before (go-back-N, duplicate
 * ACKed again), every completion still arrives once and in order.
 * No assertion depends on how long anything took.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "ep.h"

#define BURST	64
#define BURSTS	8
#define N	(BURST * BURSTS)
#define MSG	8
#define RECV_OFF 4096			/* receive slot i at RECV_OFF + 16 i */

static void opts(struct ep_opts *o)
{
	ep_default_opts(o, IBV_QPT_RC);
	o->max_send_wr = BURST;
	o->max_recv_wr = N;
	o->cqe = N;
	o->buf_size = RECV_OFF + 16 * N;
}

/* The receiver: N receives, each checked in order; then its ACK count. */
static void receiver(int fd, void *arg)
{
	struct ep_opts o;
	struct ep b;
	long long acks;
	uint32_t i;

	(void)arg;
	opts(&o);
	ep_open_remote(&b, &o, fd);
	memset(b.buf, EP_SENTINEL, b.size);
	for (i = 0; i < N; i++)
		ASSERT_EQ(ep_post_recv(&b, i, RECV_OFF + 16 * (uint64_t)i,
				       MSG), 0);
	duo_signal(fd, 'r');
	for (i = 0; i < N; i++) {
		struct ibv_wc wc = ep_expect(b.rcq, b.qp, i, IBV_WC_SUCCESS);
		int64_t d;

		ASSERT_EQ(wc.byte_len, MSG);
		d = ep_find_pattern_diff(b.buf + RECV_OFF + 16 * i, MSG, i, 0);
		if (d >= 0)
			harness_fail(__FILE__, __LINE__, "message %u: byte %lld",
				     i, (long long)d);
		ASSERT_EQ(ep_find_non_sentinel(b.buf + RECV_OFF + 16 * i + MSG,
					       16 - MSG), -1);
	}
	acks = ep_stat_qp_counter(SOFTHCA_TOOL, getpid(), b.qp->qp_num,
				  "sent_pkts");
	xwrite(fd, &acks, sizeof(acks));
	duo_expect(fd, 'x');
	ep_destroy(&b);
}

static long long bursts(void)
{
	struct ep_opts o;
	struct duo d;
	struct ep a;
	long long acks;
	uint32_t i, k;

	setenv("SOFTHCA_NET", "1", 1);
	duo_fork(&d, receiver, NULL);
	opts(&o);
	ep_open_remote(&a, &o, d.fd);
	duo_expect(d.fd, 'r');
	for (k = 0; k < BURSTS; k++) {
		duo_stop(&d);
		for (i = k * BURST; i < (k + 1) * BURST; i++) {
			ep_fill_pattern(a.buf + 16 * i, MSG, i, 0);
			ASSERT_EQ(ep_post(&a, i, IBV_WR_SEND, 16 * (uint64_t)i,
					  MSG, 0, 0), 0);
		}
		ASSERT_EQ(kill(d.pid, SIGCONT), 0);
		for (i = k * BURST; i < (k + 1) * BURST; i++)
			ep_expect(a.scq, a.qp, i, IBV_WC_SUCCESS);
	}
	xread(d.fd, &acks, sizeof(acks));
	ep_net_check();
	duo_signal(d.fd, 'x');
	duo_wait(&d);
	ep_destroy(&a);
	printf("  %d SENDs, %lld packets (ACKs) from the responder\n", N,
	       acks);
	return acks;
}

TEST(sends_back_to_back_fewer_acks)
{
	long long acks;

	unsetenv("SOFTHCA_FAULTS");
	acks = bursts();
	ASSERT_GT(acks, 0);
	ASSERT_LT(acks, N);
}

TEST(sends_under_drop_dup)
{
	long long acks;

	setenv("SOFTHCA_FAULTS", "drop=0.02,dup=0.02,seed=15", 1);
	acks = bursts();
	ASSERT_GT(acks, 0);
	ASSERT_LT(acks, N);
}
