// SPDX-License-Identifier: MIT
/*
 * RC READs over the net path with the responder stopped (SIGSTOP) for
 * longer than the requester's ACK timeout, again and again, as when it
 * is starved of CPU on a loaded host: `ib_read_bw -s 1048576` with the
 * server stopped 100 ms in every 300 ms ended in RETRY_EXC_ERR in 2 of 5
 * runs.
 *
 * At each expiry the requester went back for its whole window (Q READs
 * of SZ bytes) and the responder, which carries every duplicate READ out
 * again (IBA 9.7.5.2.5), sent what was already on its way once more for
 * each: more than it could send before the next expiry.  Now, on a
 * connection that lost nothing (the same TCP stream, no fault that drops
 * packets), the ACK timer asks again for the head READ only (transport.c
 * probe_head, at most one in PROBE_EVERY expiries), and a duplicate of a
 * READ whose responses are still queued on that stream changes nothing
 * there (rd_requeue).
 *
 * Two processes, SOFTHCA_NET=1: the requester (this process) keeps Q
 * READs of SZ bytes in flight and checks each one's bytes; the responder
 * (the child) is stopped STOP_MS in every 2 x STOP_MS, for CYCLES cycles
 * and until the requester's ACK timer has expired at least once (at most
 * MAX_CYCLES: the case must happen, else the test fails).  Asserted:
 * every READ completes successfully with its bytes, and the responder
 * received no more duplicate requests (duplicate_request of its QP)
 * than the requester had ACK timeouts (local_ack_timeout): one request
 * asked again per expiry at most, not the window.  Counts, not times:
 * how long the stops last only shapes the load.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "ep.h"

#define Q		16		/* READs in flight */
#define SZ		(1u << 20)	/* bytes each */
#define STOP_MS		300
#define CYCLES		4
#define MAX_CYCLES	20
#define SEED		0x5707u

static void opts(struct ep_opts *o)
{
	ep_default_opts(o, IBV_QPT_RC);
	o->max_send_wr = Q;
	o->cqe = 2 * Q;
	o->buf_size = (size_t)Q * SZ;
	/* perftest's: 4.096 us * 2^14 (67 ms), 7 retries */
	o->timeout = 14;
	o->retry_cnt = 7;
}

/* The responder (the child): its buffer read, until 'x'. */
static void responder(int fd, void *arg)
{
	struct ep_opts o;
	struct ep b;

	(void)arg;
	opts(&o);
	ep_open_remote(&b, &o, fd);
	ep_fill_pattern(b.buf, b.size, SEED, 0);
	duo_signal(fd, 'r');
	duo_expect(fd, 'x');
	ep_destroy(&b);
}

static uint64_t now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000 + (uint64_t)t.tv_nsec / 1000000;
}

struct reads {
	struct ep *a;
	const uint8_t *want;
	uint64_t posted, done;
};

/* READ n: the responder's part n % Q into slot n % Q. */
static void post_read(struct reads *r)
{
	uint64_t slot = r->posted % Q;

	memset(r->a->buf + slot * SZ, EP_SENTINEL, SZ);
	ASSERT_EQ(ep_post(r->a, r->posted, IBV_WR_RDMA_READ, slot * SZ, SZ,
			  slot * SZ, 0), 0);
	r->posted++;
}

/* Take the completions there are, Q at most (in order, each READ's bytes
 * checked), posting the next READ for each while more is wanted: READs
 * that complete faster than their bytes are checked (TSan) must not keep
 * this from returning to its caller's clock. */
static void take(struct reads *r, bool more)
{
	struct ibv_wc wc;
	int n;

	for (n = 0; n < Q && ibv_poll_cq(r->a->scq, 1, &wc) == 1; n++) {
		uint64_t slot = r->done % Q;

		if (wc.status != IBV_WC_SUCCESS || wc.wr_id != r->done)
			harness_fail(__FILE__, __LINE__,
				     "READ %llu: wr_id %llu status %s",
				     (unsigned long long)r->done,
				     (unsigned long long)wc.wr_id,
				     ibv_wc_status_str(wc.status));
		ASSERT_EQ(wc.byte_len, SZ);
		if (memcmp(r->a->buf + slot * SZ, r->want + slot * SZ, SZ))
			harness_fail(__FILE__, __LINE__, "READ %llu: byte %lld",
				     (unsigned long long)r->done,
				     (long long)ep_find_pattern_diff(
					     r->a->buf + slot * SZ, SZ, SEED,
					     slot * SZ));
		r->done++;
		if (more)
			post_read(r);
	}
}

/* Keep the READs going for ms milliseconds. */
static void run_for(struct reads *r, unsigned int ms)
{
	uint64_t end = now_ms() + ms;

	while (now_ms() < end)
		take(r, true);
}

TEST(reads_responder_stopped)
{
	struct ep_opts o;
	struct reads r;
	struct duo d;
	struct ep a;
	uint8_t *want;
	long long timeouts = 0, dups;
	unsigned int c;
	int st;

	setenv("SOFTHCA_NET", "1", 1);
	unsetenv("SOFTHCA_FAULTS");
	duo_fork(&d, responder, NULL);
	opts(&o);
	ep_open_remote(&a, &o, d.fd);
	duo_expect(d.fd, 'r');
	want = malloc(a.size);
	ASSERT(want != NULL);
	ep_fill_pattern(want, a.size, SEED, 0);
	memset(&r, 0, sizeof(r));
	r.a = &a;
	r.want = want;
	while (r.posted < Q)
		post_read(&r);
	for (c = 0; c < MAX_CYCLES && (c < CYCLES || !timeouts); c++) {
		ASSERT_EQ(kill(d.pid, SIGSTOP), 0);
		ASSERT_EQ(waitpid(d.pid, &st, WUNTRACED), d.pid);
		ASSERT(WIFSTOPPED(st));
		run_for(&r, STOP_MS);
		ASSERT_EQ(kill(d.pid, SIGCONT), 0);
		run_for(&r, STOP_MS);
		if (c + 1 >= CYCLES)
			timeouts = ep_stat_qp_counter(SOFTHCA_TOOL, getpid(),
						      a.qp->qp_num,
						      "local_ack_timeout");
	}
	/* the rest of the READs in flight */
	while (r.done < r.posted) {
		struct ibv_wc wc = ep_spin_one(a.scq);

		/* ep_spin_one took it: check it as take() does */
		if (wc.status != IBV_WC_SUCCESS || wc.wr_id != r.done)
			harness_fail(__FILE__, __LINE__,
				     "READ %llu: wr_id %llu status %s",
				     (unsigned long long)r.done,
				     (unsigned long long)wc.wr_id,
				     ibv_wc_status_str(wc.status));
		ASSERT_EQ(memcmp(a.buf + (r.done % Q) * SZ,
				 want + (r.done % Q) * SZ, SZ), 0);
		r.done++;
	}
	ep_net_check();
	timeouts = ep_stat_qp_counter(SOFTHCA_TOOL, getpid(), a.qp->qp_num,
				      "local_ack_timeout");
	dups = ep_stat_qp_counter(SOFTHCA_TOOL, d.pid, a.peer.qpn,
				  "duplicate_request");
	printf("  %u cycles, %llu READs: requester local_ack_timeout %lld, "
	       "responder duplicate_request %lld\n", c,
	       (unsigned long long)r.done, timeouts, dups);
	/* the case happened: the ACK timer expired while stopped */
	ASSERT_GT(timeouts, 0);
	/* one request asked again per expiry at most, not the window */
	ASSERT(dups <= timeouts);
	duo_signal(d.fd, 'x');
	duo_wait(&d);
	ep_destroy(&a);
	free(want);
}
