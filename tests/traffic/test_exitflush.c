// SPDX-License-Identifier: MIT
/*
 * README, "Between hosts": "What a process queued is still written when
 * it exits (100 ms at most), as packets on a wire would arrive."  A
 * requester on the net path (SOFTHCA_NET=1 on one host, or two
 * namespaces) posts RDMA WRITEs and SENDs and calls exit() at once: no
 * completion polled, no QP destroyed.  The peer must receive every
 * message, whole and in order: each SEND's receive completes with its
 * bytes, each WRITE's bytes are in place, and nothing else was written.
 * (The 100 ms bound itself is not timed here: no test asserts elapsed
 * time.)
 *
 *   exit_flushes_queued    a 2 MiB burst on a connection already up:
 *                          what the process's kernel still holds when it
 *                          exits must reach the peer (a socket closed
 *                          with the peer's ACKs unread is reset, and what
 *                          was not yet acknowledged dies with it: conn.c
 *                          waits for its send queue to drain)
 *   exit_flushes_while_opening  the same burst with no exchange before:
 *                          the burst itself opens the connection (once
 *                          the peer is at RTR with its receives posted:
 *                          a packet refused before that is lost, as on a
 *                          wire, and only a retransmission would repair
 *                          it)
 *   exit_flushes_delayed   SOFTHCA_FAULTS=delay=1 in the requester, with
 *                          a delay far longer than the test: every packet
 *                          is held back in the process, and only the
 *                          flush at exit can send them, in the order they
 *                          were sent
 *
 * The requester is the forked process; the one that checks is the test's.
 */
#include <stdbool.h>
#include <stdlib.h>
#include <unistd.h>
#include <sys/wait.h>

#include "harness.h"
#include "ep.h"

#define NMSG		16		/* WRITE + SEND pairs */
#define WRITE_LEN	(128u << 10)
#define SEND_LEN	4096u
#define SEND_BASE	(3u << 20)	/* where the SENDs land */
#define SENTINEL	0xa5
#define WARM_ID		0xfeed

_Static_assert(NMSG * WRITE_LEN <= SEND_BASE, "layout");
_Static_assert(SEND_BASE + (NMSG + 1) * SEND_LEN <= (4u << 20), "layout");

/* Byte i of message k (k < NMSG: WRITE k; NMSG + k: SEND k): never the
 * sentinel, different for every message and offset */
static uint8_t pat(uint32_t k, uint32_t i)
{
	uint8_t b = (uint8_t)(k * 37 + i * 7 + (i >> 8) * 3 + 1);

	return b == SENTINEL ? 0x5a : b;
}

struct mode {
	bool delay;		/* every packet held by a fault */
	bool opening;		/* no warm-up: posted while connecting */
};

/* The requester: post everything, then exit() at once. */
static void requester(int fd, void *arg)
{
	const struct mode *m = arg;
	struct ep_opts o;
	struct ep a;
	uint32_t k, i;

	unsetenv("SOFTHCA_FAULTS");
	if (m->delay)
		/* held 10 minutes: only the flush at exit sends them */
		ASSERT_EQ(setenv("SOFTHCA_FAULTS", "delay=1,delay_ms=600000",
				 1),
			  0);
	ep_default_opts(&o, IBV_QPT_RC);
	ep_open_remote(&a, &o, fd);
	for (k = 0; k < NMSG; k++)
		for (i = 0; i < WRITE_LEN; i++)
			a.buf[k * WRITE_LEN + i] = pat(k, i);
	for (k = 0; k < NMSG; k++)
		for (i = 0; i < SEND_LEN; i++)
			a.buf[SEND_BASE + k * SEND_LEN + i] = pat(NMSG + k, i);
	ASSERT_EQ(ep_post_recv(&a, WARM_ID, SEND_BASE + NMSG * SEND_LEN,
			       SEND_LEN),
		  0);
	duo_signal(fd, 'p');
	/* the peer is at RTR with its receives posted: nothing sent from
	 * here on is refused or answered with an RNR NAK, which only a
	 * retransmission (after the exit) would repair */
	duo_expect(fd, 'r');
	/* the connection is up: the peer's SEND arrived over it */
	if (!m->opening)
		ep_expect(a.rcq, a.qp, WARM_ID, IBV_WC_SUCCESS);
	for (k = 0; k < NMSG; k++) {
		ASSERT_EQ(ep_post(&a, k, IBV_WR_RDMA_WRITE, k * WRITE_LEN,
				  WRITE_LEN, k * WRITE_LEN, 0),
			  0);
		ASSERT_EQ(ep_post(&a, NMSG + k, IBV_WR_SEND,
				  SEND_BASE + k * SEND_LEN, SEND_LEN, 0, 0),
			  0);
	}
	/* not _exit: what softhca queued goes out from its exit handler */
	exit(0);
}

static void check_bytes(const uint8_t *p, uint32_t len, uint32_t k,
			const char *what)
{
	uint32_t i;

	for (i = 0; i < len; i++)
		if (p[i] != pat(k, i))
			harness_fail(__FILE__, __LINE__,
				     "%s %u: byte %u is 0x%02x, want 0x%02x",
				     what, k % NMSG, i, p[i], pat(k, i));
}

static void run(struct mode *m)
{
	struct ep_opts o;
	struct duo d;
	struct ep b;
	uint32_t k, i;
	int status;

	ASSERT_EQ(setenv("SOFTHCA_NET", "1", 1), 0);
	unsetenv("SOFTHCA_FAULTS");
	duo_fork(&d, requester, m);
	ep_default_opts(&o, IBV_QPT_RC);
	/* the warm-up SEND's ACK may be held (delay): ask again forever */
	o.timeout = 0;
	ep_open_remote(&b, &o, d.fd);
	memset(b.buf, SENTINEL, b.size);
	for (k = 0; k < NMSG; k++)
		ASSERT_EQ(ep_post_recv(&b, NMSG + k, SEND_BASE + k * SEND_LEN,
				       SEND_LEN),
			  0);
	duo_expect(d.fd, 'p');
	duo_signal(d.fd, 'r');
	memset(b.buf + SEND_BASE + NMSG * SEND_LEN, 0x77, SEND_LEN);
	if (!m->opening)
		ASSERT_EQ(ep_post(&b, WARM_ID, IBV_WR_SEND,
				  SEND_BASE + NMSG * SEND_LEN, SEND_LEN, 0, 0),
			  0);

	/* every SEND, in order, whole; the WRITEs before each are placed */
	for (k = 0; k < NMSG; k++) {
		struct ibv_wc wc = ep_expect(b.rcq, b.qp, NMSG + k,
					     IBV_WC_SUCCESS);

		ASSERT_EQ(wc.opcode, IBV_WC_RECV);
		ASSERT_EQ(wc.byte_len, SEND_LEN);
		check_bytes(b.buf + SEND_BASE + k * SEND_LEN, SEND_LEN,
			    NMSG + k, "SEND");
		check_bytes(b.buf + k * WRITE_LEN, WRITE_LEN, k, "WRITE");
	}
	for (i = NMSG * WRITE_LEN; i < SEND_BASE; i++)
		ASSERT_EQ(b.buf[i], SENTINEL);

	/* and the requester ended by exit(0), not by a signal */
	ASSERT_EQ(waitpid(d.pid, &status, 0), d.pid);
	ASSERT(WIFEXITED(status));
	ASSERT_EQ(WEXITSTATUS(status), 0);
	close(d.fd);
	ep_destroy(&b);
}

TEST(exit_flushes_queued)
{
	struct mode m = { .delay = false };

	run(&m);
}

TEST(exit_flushes_delayed)
{
	struct mode m = { .delay = true };

	run(&m);
}

TEST(exit_flushes_while_opening)
{
	struct mode m = { .opening = true };

	run(&m);
}
