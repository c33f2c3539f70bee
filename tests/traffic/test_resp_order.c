// SPDX-License-Identifier: MIT
/*
 * The RC responder answers requests in PSN order (IBA 9.7.5.1.x), over
 * the net path: the answer of a request behind big READs (an atomic's
 * ATOMIC ACKNOWLEDGE, the ACK of a WRITE or SEND, an RNR NAK) goes out
 * after the READs' responses, never before them; so does a NAK whose
 * error puts the responder's QP in error (remote access, invalid
 * request): the READs before it complete with their bytes, the request
 * it answers with its error, the WQEs behind it are flushed.
 *
 * Before this test, READ responses waited in the QP's queue of
 * responses (transport.c, rd_pump) while those answers went straight
 * onto the connection: they overtook the responses of earlier READs.
 * The requester takes an answer only for the WQE at its head (its
 * implied-ACK walk stops at an incomplete READ), so the early answer
 * was dropped as a duplicate and the WQEs behind the READs waited for
 * the ACK timer and were sent again (a retry, a delay of an ACK
 * timeout).  Here the requester tries once (retry_cnt 0, an ACK timeout
 * of 4.3 s): one ACK timeout ends in IBV_WC_RETRY_EXC_ERR.
 *
 * Two processes, SOFTHCA_NET=1.  The responder (this process) fills its
 * buffer with a pattern; the requester (the child) posts N READs of SZ
 * bytes (more than the sockets hold), then the request(s) of the case,
 * then stops itself (SIGSTOP) until the parent, a while later, lets it
 * go on: meanwhile the responder takes every request, its socket fills,
 * and the READs' responses wait in its queue when it answers the later
 * requests.  (How long the parent waits only decides how much is
 * queued then: too short, and a case may pass without the fix; it never
 * fails with it.)
 * Asserted: the completions come in order with the statuses of the
 * case, the READs with their bytes, the atomic with the value before
 * it, the WRITE and SEND placed; no ACK timeout (local_ack_timeout 0).
 * No assertion depends on how long anything took.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "ep.h"

#define N	4			/* READs in flight */
#define SZ	(8u << 20)		/* bytes each: more than sockets hold */
#define TAIL	((uint64_t)N * SZ)	/* the small requests' area */
#define SMALL	64u
#define SEED	0x0bd3u
#define ADD0	0x1122334455667788ull	/* the responder's atomic word */

enum tail {
	TAIL_ATOMIC,		/* FETCH_ADD: its ATOMIC ACKNOWLEDGE */
	TAIL_WRITE_SEND,	/* WRITE, SEND: coalesced ACKs */
	TAIL_RNR,		/* SEND, no receive: RNR NAK */
	TAIL_READ_ATOMIC,	/* READ, atomic, READ, atomic, WRITE */
	TAIL_ACCESS_NAK,	/* WRITE past the MR, SEND: NAK remote access */
	TAIL_INVALID_NAK,	/* SEND longer than the receive, SEND: NAK
				 * invalid request */
};

static void opts(struct ep_opts *o)
{
	ep_default_opts(o, IBV_QPT_RC);
	o->max_send_wr = 2 * N + 8;
	o->cqe = 4 * N + 16;
	o->buf_size = TAIL + 4096;
	/* one try (4.096 us * 2^20, 4.3 s): an ACK timeout is an error */
	o->timeout = 20;
	o->retry_cnt = 0;
	o->rnr_retry = 0;
}

/* READ i of the requester: the responder's part i into slot i */
static void post_read(struct ep *a, uint32_t i)
{
	ASSERT_EQ(ep_post(a, i, IBV_WR_RDMA_READ, (uint64_t)i * SZ, SZ,
			  (uint64_t)i * SZ, 0), 0);
}

static void expect_read(struct ep *a, const uint8_t *want, uint32_t i)
{
	struct ibv_wc wc = ep_expect(a->scq, a->qp, i, IBV_WC_SUCCESS);

	ASSERT_EQ(wc.byte_len, SZ);
	if (memcmp(a->buf + (uint64_t)i * SZ, want + (uint64_t)i * SZ, SZ))
		harness_fail(__FILE__, __LINE__, "READ %u: byte %lld", i,
			     (long long)ep_find_pattern_diff(
				     a->buf + (uint64_t)i * SZ, SZ, SEED,
				     (uint64_t)i * SZ));
}

static void expect_add(struct ep *a, uint64_t wr_id, uint64_t off,
		       uint64_t before)
{
	uint64_t v;

	ep_expect(a->scq, a->qp, wr_id, IBV_WC_SUCCESS);
	memcpy(&v, a->buf + off, 8);
	ASSERT_EQ(v, before);
}

/* The requester (the child). */
static void requester(int fd, void *arg)
{
	enum tail t = (enum tail)(uintptr_t)arg;
	struct ep_opts o;
	struct ep a;
	uint8_t *want;
	uint32_t i;

	opts(&o);
	ep_open_remote(&a, &o, fd);
	want = malloc(a.size);
	ASSERT(want != NULL);
	ep_fill_pattern(want, a.size, SEED, 0);
	memset(a.buf, EP_SENTINEL, a.size);
	ep_fill_pattern(a.buf + TAIL, SMALL, SEED + 1, 0);
	duo_expect(fd, 'r');
	/* the connection up first: the requests below go out at once */
	ASSERT_EQ(ep_post(&a, 100, IBV_WR_RDMA_READ, TAIL + 2048, SMALL,
			  0, 0), 0);
	ep_expect(a.scq, a.qp, 100, IBV_WC_SUCCESS);
	for (i = 0; i < N; i++)
		post_read(&a, i);
	switch (t) {
	case TAIL_ATOMIC:
		ep_post_atomic(&a, 200, IBV_WR_ATOMIC_FETCH_AND_ADD,
			       TAIL + 512, TAIL, 1, 0);
		break;
	case TAIL_WRITE_SEND:
		ASSERT_EQ(ep_post(&a, 200, IBV_WR_RDMA_WRITE, TAIL, SMALL,
				  TAIL + 1024, 0), 0);
		ASSERT_EQ(ep_post(&a, 201, IBV_WR_SEND, TAIL, SMALL, 0, 0),
			  0);
		break;
	case TAIL_RNR:
		ASSERT_EQ(ep_post(&a, 200, IBV_WR_SEND, TAIL, SMALL, 0, 0),
			  0);
		break;
	case TAIL_READ_ATOMIC:
		/* READs and atomics mixed: the later READs' responses after
		 * the atomic's, the WRITE's ACK after all */
		ep_post_atomic(&a, 200, IBV_WR_ATOMIC_FETCH_AND_ADD,
			       TAIL + 512, TAIL, 1, 0);
		ASSERT_EQ(ep_post(&a, 201, IBV_WR_RDMA_READ, TAIL + 2048,
				  SMALL, 0, 0), 0);
		ep_post_atomic(&a, 202, IBV_WR_ATOMIC_FETCH_AND_ADD,
			       TAIL + 520, TAIL, 1, 0);
		ASSERT_EQ(ep_post(&a, 203, IBV_WR_RDMA_WRITE, TAIL, SMALL,
				  TAIL + 1024, 0), 0);
		break;
	case TAIL_ACCESS_NAK:
		/* its last SMALL / 2 bytes past the responder's MR */
		ASSERT_EQ(ep_post(&a, 200, IBV_WR_RDMA_WRITE, TAIL, SMALL,
				  a.size - SMALL / 2, 0), 0);
		ASSERT_EQ(ep_post(&a, 201, IBV_WR_SEND, TAIL, SMALL, 0, 0),
			  0);
		break;
	case TAIL_INVALID_NAK:
		ASSERT_EQ(ep_post(&a, 200, IBV_WR_SEND, TAIL, SMALL, 0, 0),
			  0);
		ASSERT_EQ(ep_post(&a, 201, IBV_WR_SEND, TAIL, SMALL, 0, 0),
			  0);
		break;
	}
	/* nothing received until the responder has every request */
	raise(SIGSTOP);
	for (i = 0; i < N; i++)
		expect_read(&a, want, i);
	switch (t) {
	case TAIL_ATOMIC:
		expect_add(&a, 200, TAIL + 512, ADD0);
		break;
	case TAIL_WRITE_SEND:
		ep_expect(a.scq, a.qp, 200, IBV_WC_SUCCESS);
		ep_expect(a.scq, a.qp, 201, IBV_WC_SUCCESS);
		break;
	case TAIL_RNR:
		ep_expect(a.scq, a.qp, 200, IBV_WC_RNR_RETRY_EXC_ERR);
		break;
	case TAIL_READ_ATOMIC:
		expect_add(&a, 200, TAIL + 512, ADD0);
		ep_expect(a.scq, a.qp, 201, IBV_WC_SUCCESS);
		ASSERT(!memcmp(a.buf + TAIL + 2048, want, SMALL));
		expect_add(&a, 202, TAIL + 520, ADD0 + 1);
		ep_expect(a.scq, a.qp, 203, IBV_WC_SUCCESS);
		break;
	case TAIL_ACCESS_NAK:
		ep_expect(a.scq, a.qp, 200, IBV_WC_REM_ACCESS_ERR);
		ep_expect(a.scq, a.qp, 201, IBV_WC_WR_FLUSH_ERR);
		break;
	case TAIL_INVALID_NAK:
		ep_expect(a.scq, a.qp, 200, IBV_WC_REM_INV_REQ_ERR);
		ep_expect(a.scq, a.qp, 201, IBV_WC_WR_FLUSH_ERR);
		break;
	}
	ep_net_check();
	ASSERT_EQ(ep_stat_qp_counter(SOFTHCA_TOOL, getpid(), a.qp->qp_num,
				     "local_ack_timeout"), 0);
	duo_signal(fd, 'd');
	duo_expect(fd, 'x');
	ep_destroy(&a);
	free(want);
}

/* The responder (this process). */
static void answers(enum tail t)
{
	struct ep_opts o;
	struct duo d;
	struct ep b;
	uint64_t v = ADD0;
	int st;

	setenv("SOFTHCA_NET", "1", 1);
	duo_fork(&d, requester, (void *)(uintptr_t)t);
	opts(&o);
	ep_open_remote(&b, &o, d.fd);
	ep_fill_pattern(b.buf, b.size, SEED, 0);
	memcpy(b.buf + TAIL, &v, 8);
	memset(b.buf + TAIL + 1024, EP_SENTINEL, 2 * SMALL);
	if (t == TAIL_WRITE_SEND)
		ASSERT_EQ(ep_post_recv(&b, 1, TAIL + 1536, SMALL), 0);
	if (t == TAIL_INVALID_NAK)
		ASSERT_EQ(ep_post_recv(&b, 1, TAIL + 1536, SMALL / 2), 0);
	duo_signal(d.fd, 'r');
	ASSERT_EQ(waitpid(d.pid, &st, WUNTRACED), d.pid);
	ASSERT(WIFSTOPPED(st));
	/* the requests sent before the child stopped are taken meanwhile */
	usleep(200 * 1000);
	ASSERT_EQ(kill(d.pid, SIGCONT), 0);
	duo_expect(d.fd, 'd');
	if (t == TAIL_WRITE_SEND || t == TAIL_READ_ATOMIC) {
		uint8_t p[SMALL];

		ep_fill_pattern(p, SMALL, SEED + 1, 0);
		ASSERT(!memcmp(b.buf + TAIL + 1024, p, SMALL));
		ASSERT_EQ(ep_find_non_sentinel(b.buf + TAIL + 1024 + SMALL,
					       SMALL), -1);
	}
	if (t == TAIL_WRITE_SEND) {
		uint8_t p[SMALL];

		ep_fill_pattern(p, SMALL, SEED + 1, 0);
		ep_expect(b.rcq, b.qp, 1, IBV_WC_SUCCESS);
		ASSERT(!memcmp(b.buf + TAIL + 1536, p, SMALL));
	}
	if (t == TAIL_ACCESS_NAK || t == TAIL_INVALID_NAK) {
		/* the error is the responder's too: its QP in error */
		if (t == TAIL_INVALID_NAK)
			ep_expect(b.rcq, b.qp, 1, IBV_WC_LOC_LEN_ERR);
		ep_wait_qp_state(b.qp, IBV_QPS_ERR);
		ASSERT_EQ(ep_find_non_sentinel(b.buf + TAIL + 1024, 2 * SMALL),
			  -1);
	}
	if (t == TAIL_ATOMIC || t == TAIL_READ_ATOMIC) {
		memcpy(&v, b.buf + TAIL, 8);
		ASSERT_EQ(v, ADD0 + (t == TAIL_ATOMIC ? 1 : 2));
	}
	ep_net_check();
	duo_signal(d.fd, 'x');
	duo_wait(&d);
	ep_destroy(&b);
}

TEST(atomic_after_reads)
{
	answers(TAIL_ATOMIC);
}

TEST(write_send_after_reads)
{
	answers(TAIL_WRITE_SEND);
}

TEST(rnr_nak_after_reads)
{
	answers(TAIL_RNR);
}

TEST(reads_atomics_mixed)
{
	answers(TAIL_READ_ATOMIC);
}

TEST(access_nak_after_reads)
{
	answers(TAIL_ACCESS_NAK);
}

TEST(invalid_request_nak_after_reads)
{
	answers(TAIL_INVALID_NAK);
}
