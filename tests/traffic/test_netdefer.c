// SPDX-License-Identifier: MIT
/*
 * Small requests held for the peer's answer on the net path (issue 15,
 * conn.c shca_net_flush_defer, SOFTHCA_NET_DEFER): while the responder
 * owes answers to more than N of an RC requester's small new requests,
 * the next ones wait in the connection's queue and go out together with
 * the responder's next answer, one write for many.  A lone request (a
 * ping-pong) is written at once.
 *
 * Two processes, SOFTHCA_NET=1 (or two namespaces: test_traffic_netns.sh
 * netdefer runs it with the responder in namespace b).  The responder
 * (the child) prepares READ sources, an atomic counter and receives.  The
 * requester posts bursts of BURST requests while the responder is stopped
 * (SIGSTOP, seen stopped with waitpid): SEND, 8-byte WRITE, 8-byte READ
 * and FETCH_ADD in turn, so nothing can answer them until SIGCONT.
 * The QPs' ACK timeout is ~4 s (timeout 20), far longer than a burst
 * (without faults).
 * Asserted:
 *  - `holds_small_requests_for_the_answer` (SOFTHCA_NET_DEFER=2): the
 *    requester counted held writes (`net_deferred`) in every burst; every
 *    request completes successfully and in order, READs bring the
 *    responder's bytes, each FETCH_ADD sees the count of those before it
 *    (executed in order), the responder's receives and WRITE targets hold
 *    what was sent; and the requester QP's `local_ack_timeout` and
 *    `retrans_pkts` are 0: the held requests went out with the answer,
 *    not when the ACK timer expired (a hold released by nothing fails
 *    here);
 *  - `ping_pong_written_at_once`: one request at a time, each waited for:
 *    `net_deferred` does not move;
 *  - `list_written_at_once`: each burst posted as one list, which is
 *    queued whole before it is written: it goes out (the peer owes
 *    nothing for packets not written yet, so nothing would end a wait),
 *    no ACK timeout, nothing sent again;
 *  - `off`: SOFTHCA_NET_DEFER=0 holds nothing, and all of the above
 *    holds too;
 *  - `under_drop_dup`: the same bursts under SOFTHCA_FAULTS drop and dup
 *    (lost requests and answers, sent again by the ACK timer): every
 *    completion still arrives once, in order, with the right bytes;
 *  - `under_reset`: the same with the connection broken now and then
 *    (a new stream owes nothing: what waits on the old one's count would
 *    wait for the ACK timer);
 *  - `answers_lost`: the responder alone drops 30% of what it sends, so
 *    the answer that held requests wait for is lost now and then: every
 *    completion arrives, in order (coverage);
 *  - `silent_responder`: the responder's QP in error drops every
 *    request unanswered; a burst of SENDs, retry_cnt 1: the first ends
 *    in RETRY_EXC_ERR, the rest flushed, as without holding.  The ACK
 *    timer writes what was held: before that, it took the held requests
 *    for a slow socket and waited again, for ever (no completion).
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
#define BURSTS	4
#define N	(BURST * BURSTS)
#define MSG	8
#define SLOT(i)	(16 * (uint64_t)(i))
#define SEND_OFF  0			/* receives (responder) and sources */
#define WRITE_OFF 8192			/* WRITE targets (responder) */
#define READ_OFF  16384			/* READ sources / destinations */
#define ATOM_OFF  24576			/* the counter / fetched values */
#define BUF	  32768

/* SOFTHCA_FAULTS of the responder alone (answers_lost), or NULL */
static const char *responder_faults;

/* The ACK timeout: ~4.3 s, longer than any burst takes; under faults the
 * default (14, ~67 ms), as the timer sends again what they lose. */
static int ack_timeout(void)
{
	return getenv("SOFTHCA_FAULTS") || responder_faults ? 14 : 20;
}

static void opts(struct ep_opts *o)
{
	ep_default_opts(o, IBV_QPT_RC);
	o->max_send_wr = BURST;
	o->max_recv_wr = N / 4;
	o->cqe = N;
	o->buf_size = BUF;
	o->timeout = ack_timeout();
}

/* Request i's opcode: SEND, WRITE, READ, FETCH_ADD in turn. */
static enum ibv_wr_opcode op_of(uint32_t i)
{
	static const enum ibv_wr_opcode ops[4] = {
		IBV_WR_SEND, IBV_WR_RDMA_WRITE, IBV_WR_RDMA_READ,
		IBV_WR_ATOMIC_FETCH_AND_ADD,
	};

	return ops[i % 4];
}

/* The READ sources' pattern: another than the requester's messages' */
#define READ_SEED(i)	((i) + 100000u)

static void check_bytes(const unsigned char *p, uint32_t seed,
			const char *what, uint32_t i)
{
	int64_t d = ep_find_pattern_diff(p, MSG, seed, 0);

	if (d >= 0)
		harness_fail(__FILE__, __LINE__, "%s %u: byte %lld", what, i,
			     (long long)d);
}

/* The responder: READ sources, the counter at 0, a receive per SEND; then
 * each receive and WRITE target checked once the requester is done. */
static void responder(int fd, void *arg)
{
	struct ep_opts o;
	struct ep b;
	uint32_t i;

	(void)arg;
	if (responder_faults)
		setenv("SOFTHCA_FAULTS", responder_faults, 1);
	opts(&o);
	ep_open_remote(&b, &o, fd);
	memset(b.buf, EP_SENTINEL, b.size);
	memset(b.buf + ATOM_OFF, 0, 8);
	for (i = 0; i < N; i++)
		if (op_of(i) == IBV_WR_RDMA_READ)
			ep_fill_pattern(b.buf + READ_OFF + SLOT(i), MSG,
					READ_SEED(i), 0);
		else if (op_of(i) == IBV_WR_SEND)
			ASSERT_EQ(ep_post_recv(&b, i, SEND_OFF + SLOT(i), MSG),
				  0);
	duo_signal(fd, 'r');
	for (i = 0; i < N; i++)
		if (op_of(i) == IBV_WR_SEND)
			ASSERT_EQ(ep_expect(b.rcq, b.qp, i,
					    IBV_WC_SUCCESS).byte_len, MSG);
	duo_expect(fd, 'd');
	for (i = 0; i < N; i++)
		if (op_of(i) == IBV_WR_SEND)
			check_bytes(b.buf + SEND_OFF + SLOT(i), i,
				    "received message", i);
		else if (op_of(i) == IBV_WR_RDMA_WRITE)
			check_bytes(b.buf + WRITE_OFF + SLOT(i), i,
				    "written slot", i);
	ASSERT_EQ(*(uint64_t *)(b.buf + ATOM_OFF), (uint64_t)N / 4);
	duo_signal(fd, 'x');
	ep_destroy(&b);
}

/* Request i's WR (its SGE in *sge): signaled, 8 bytes. */
static void make_wr(struct ep *a, uint32_t i, struct ibv_send_wr *wr,
		    struct ibv_sge *sge)
{
	uint64_t local = SEND_OFF + SLOT(i), remote = 0;

	memset(wr, 0, sizeof(*wr));
	wr->wr_id = i;
	wr->opcode = op_of(i);
	wr->send_flags = IBV_SEND_SIGNALED;
	wr->sg_list = sge;
	wr->num_sge = 1;
	switch (op_of(i)) {
	case IBV_WR_RDMA_WRITE:
		remote = WRITE_OFF + SLOT(i);
		break;
	case IBV_WR_RDMA_READ:
		local = remote = READ_OFF + SLOT(i);
		break;
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
		local = ATOM_OFF + 8 * (uint64_t)(i / 4);
		remote = ATOM_OFF;
		wr->wr.atomic.compare_add = 1;
		break;
	default:
		break;
	}
	if (op_of(i) == IBV_WR_ATOMIC_FETCH_AND_ADD) {
		wr->wr.atomic.remote_addr = a->peer.addr + remote;
		wr->wr.atomic.rkey = a->peer.rkey;
	} else if (op_of(i) != IBV_WR_SEND) {
		wr->wr.rdma.remote_addr = a->peer.addr + remote;
		wr->wr.rdma.rkey = a->peer.rkey;
	}
	sge->addr = (uintptr_t)a->buf + local;
	sge->length = MSG;
	sge->lkey = a->mr->lkey;
}

/* Requests [k, k + n): one ibv_post_send each, or (list) one for all. */
static void post(struct ep *a, uint32_t k, uint32_t n, bool list)
{
	struct ibv_send_wr wr[BURST], *bad;
	struct ibv_sge sge[BURST];
	uint32_t i;

	for (i = 0; i < n; i++) {
		make_wr(a, k + i, &wr[i], &sge[i]);
		if (list && i)
			wr[i - 1].next = &wr[i];
		if (!list)
			ASSERT_EQ(ibv_post_send(a->qp, &wr[i], &bad), 0);
	}
	if (list)
		ASSERT_EQ(ibv_post_send(a->qp, &wr[0], &bad), 0);
}

/* What request i brought back: a READ's bytes, a FETCH_ADD's count. */
static void check_result(struct ep *a, uint32_t i)
{
	if (op_of(i) == IBV_WR_RDMA_READ)
		check_bytes(a->buf + READ_OFF + SLOT(i), READ_SEED(i),
			    "read slot", i);
	else if (op_of(i) == IBV_WR_ATOMIC_FETCH_AND_ADD)
		ASSERT_EQ(*(uint64_t *)(a->buf + ATOM_OFF +
					8 * (uint64_t)(i / 4)),
			  (uint64_t)(i / 4));
}

struct run {
	long long held;			/* net_deferred, all bursts */
	int bursts_held;		/* bursts in which it moved */
	long long timeouts, retrans;	/* the requester QP's */
};

static long long held_now(void)
{
	return ep_stat_counter(SOFTHCA_TOOL, getpid(), "net_deferred");
}

/* How the requests go: one at a time, each waited for; in bursts of
 * BURST with the responder stopped, one post each or one post for all. */
enum mode { PING_PONG, BURSTS_OF_POSTS, BURSTS_OF_LISTS };

static struct run traffic(enum mode m)
{
	bool bursts = m != PING_PONG;
	struct run r = { 0 };
	struct ep_opts o;
	struct duo d;
	struct ep a;
	long long held0 = 0;
	uint32_t i, k;

	setenv("SOFTHCA_NET", "1", 1);
	duo_fork(&d, responder, NULL);
	opts(&o);
	ep_open_remote(&a, &o, d.fd);
	memset(a.buf, EP_SENTINEL, a.size);
	for (i = 0; i < N; i++)
		ep_fill_pattern(a.buf + SEND_OFF + SLOT(i), MSG, i, 0);
	duo_expect(d.fd, 'r');
	/* the connection up first: a stopped responder cannot answer the
	 * handshake, and what waits for it is held anyway */
	ASSERT_EQ(ep_post(&a, N, IBV_WR_RDMA_WRITE, 0, 0, WRITE_OFF + SLOT(N),
			  0), 0);
	ep_expect(a.scq, a.qp, N, IBV_WC_SUCCESS);
	held0 = held_now();
	for (k = 0; k < N; k += bursts ? BURST : 1) {
		long long before = held_now();

		if (bursts)
			duo_stop(&d);
		post(&a, k, bursts ? BURST : 1, m == BURSTS_OF_LISTS);
		if (bursts)
			ASSERT_EQ(kill(d.pid, SIGCONT), 0);
		for (i = k; i < k + (bursts ? BURST : 1); i++) {
			ep_expect(a.scq, a.qp, i, IBV_WC_SUCCESS);
			check_result(&a, i);
		}
		/* (the count is read with the responder running: `softhca
		 * stat` waits for a stopped process) */
		if (bursts && held_now() > before)
			r.bursts_held++;
	}
	r.held = held_now() - held0;
	r.timeouts = ep_stat_qp_counter(SOFTHCA_TOOL, getpid(), a.qp->qp_num,
					"local_ack_timeout");
	r.retrans = ep_stat_qp_counter(SOFTHCA_TOOL, getpid(), a.qp->qp_num,
				       "retrans_pkts");
	/* ep_net_check counts the bytes of the TCP sockets open now: under
	 * reset faults the last packet may have broken the connection, and
	 * nothing was sent since (CI: "tcp > 0: 0 vs 0").  An empty WRITE
	 * opens the next one; bounded, each may be reset again (1%). */
	for (i = 0; i < 8 && ep_tcp_bytes() == 0; i++) {
		ASSERT_EQ(ep_post(&a, N + 1 + i, IBV_WR_RDMA_WRITE, 0, 0,
				  WRITE_OFF + SLOT(N), 0), 0);
		ep_expect(a.scq, a.qp, N + 1 + i, IBV_WC_SUCCESS);
	}
	ep_net_check();
	duo_signal(d.fd, 'd');
	duo_expect(d.fd, 'x');
	duo_wait(&d);
	ep_destroy(&a);
	printf("  %d requests: %lld writes held (in %d of %d bursts), "
	       "%lld ACK timeouts, %lld packets sent again\n", N, r.held,
	       r.bursts_held, bursts ? BURSTS : 0, r.timeouts, r.retrans);
	return r;
}

/* A run with SOFTHCA_NET_DEFER and SOFTHCA_FAULTS as given (NULL: unset). */
static struct run run_with(const char *defer, const char *faults, enum mode m)
{
	if (defer)
		setenv("SOFTHCA_NET_DEFER", defer, 1);
	else
		unsetenv("SOFTHCA_NET_DEFER");
	if (faults)
		setenv("SOFTHCA_FAULTS", faults, 1);
	else
		unsetenv("SOFTHCA_FAULTS");
	return traffic(m);
}

TEST(holds_small_requests_for_the_answer)
{
	struct run r = run_with("2", NULL, BURSTS_OF_POSTS);

	ASSERT_EQ(r.bursts_held, BURSTS);
	ASSERT_EQ(r.timeouts, 0);
	ASSERT_EQ(r.retrans, 0);
}

TEST(ping_pong_written_at_once)
{
	ASSERT_EQ(run_with("2", NULL, PING_PONG).held, 0);
}

TEST(off)
{
	struct run r = run_with("0", NULL, BURSTS_OF_POSTS);

	ASSERT_EQ(r.held, 0);
	ASSERT_EQ(r.timeouts, 0);
}

TEST(under_drop_dup)
{
	run_with(NULL, "drop=0.02,dup=0.02,seed=15", BURSTS_OF_POSTS);
}

TEST(under_reset)
{
	run_with(NULL, "reset=0.01,seed=7", BURSTS_OF_POSTS);
}

TEST(answers_lost)
{
	responder_faults = "drop=0.3,seed=21";
	run_with(NULL, NULL, BURSTS_OF_POSTS);
}

/* The responder's QP in error, which drops what comes (answers nothing) */
static void silent(int fd, void *arg)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_ERR };
	struct ep_opts o;
	struct ep b;

	(void)arg;
	opts(&o);
	ep_open_remote(&b, &o, fd);
	duo_expect(fd, 'w');
	ASSERT_EQ(ibv_modify_qp(b.qp, &a, IBV_QP_STATE), 0);
	duo_signal(fd, 'e');
	duo_expect(fd, 'x');
	ep_destroy(&b);
}

TEST(silent_responder)
{
	struct ep_opts o;
	struct duo d;
	struct ep a;
	long long held;
	uint32_t i;

	unsetenv("SOFTHCA_FAULTS");
	setenv("SOFTHCA_NET_DEFER", "2", 1);
	setenv("SOFTHCA_NET", "1", 1);
	duo_fork(&d, silent, NULL);
	opts(&o);
	o.timeout = 14;
	o.retry_cnt = 1;
	ep_open_remote(&a, &o, d.fd);
	/* the connection up first (what waits for its handshake is not
	 * held), then the responder's QP to error */
	ASSERT_EQ(ep_post(&a, BURST, IBV_WR_RDMA_WRITE, 0, 0, 0, 0), 0);
	ep_expect(a.scq, a.qp, BURST, IBV_WC_SUCCESS);
	duo_signal(d.fd, 'w');
	duo_expect(d.fd, 'e');
	for (i = 0; i < BURST; i++)
		ASSERT_EQ(ep_post(&a, i, IBV_WR_SEND, SEND_OFF + SLOT(i), MSG,
				  0, 0), 0);
	ep_expect(a.scq, a.qp, 0, IBV_WC_RETRY_EXC_ERR);
	for (i = 1; i < BURST; i++)
		ep_expect(a.scq, a.qp, i, IBV_WC_WR_FLUSH_ERR);
	held = held_now();
	printf("  %lld writes held, %lld ACK timeouts\n", held,
	       ep_stat_qp_counter(SOFTHCA_TOOL, getpid(), a.qp->qp_num,
				  "local_ack_timeout"));
	ASSERT_GT(held, 0);
	duo_signal(d.fd, 'x');
	duo_wait(&d);
	ep_destroy(&a);
}

TEST(list_written_at_once)
{
	struct run r = run_with("2", NULL, BURSTS_OF_LISTS);

	ASSERT_EQ(r.timeouts, 0);
	ASSERT_EQ(r.retrans, 0);
}
