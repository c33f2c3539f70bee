// SPDX-License-Identifier: MIT
/*
 * README claims of the same-host path that no other test backs (issue
 * 16: every claim under "What works" names a test that fails when it
 * breaks):
 *
 *  - SIGNALED: a successful WR posted without IBV_SEND_SIGNALED on a QP
 *    without sq_sig_all completes nothing on the send CQ; with sq_sig_all
 *    every WR completes (IBA 10.7.3.1 / ibv_post_send(3));
 *  - a UD receive over IPv6 GIDs: the 40 bytes before the payload are the
 *    IPv6 header (source and destination GID, next header UDP, payload
 *    length), and wc.sl is 1, as mlx5 reports (the IPv4 case, sl 2, is in
 *    test_matrix.c);
 *  - fork is safe: a child forked after registration and connection can
 *    read its copy of the registered buffer and exit normally (running
 *    the libraries' destructors) without disturbing its parent: a peer
 *    that reaches the parent only after that exit (its same-host name
 *    still there) reads the parent's post-fork bytes, writes into its
 *    buffer and receives its SEND.
 *
 * Buffers are pre-filled with a sentinel (0xA5) and the patterns have no
 * zero byte and differ per message, so stale memory cannot match.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "ep.h"
#include "netenv.h"

#define SENTINEL 0xA5
#define GRH 40

/* Byte i of message seed: never 0, never the sentinel. */
static uint8_t pat(unsigned int seed, size_t i)
{
	uint8_t v = (uint8_t)(seed * 53 + i * 7 + (i >> 8) + 1);

	return v == 0 || v == SENTINEL ? (uint8_t)(v + 2) : v;
}

static void fill(uint8_t *p, size_t len, unsigned int seed)
{
	size_t i;

	for (i = 0; i < len; i++)
		p[i] = pat(seed, i);
}

/* The first byte of p[0..len) that is not message seed, or len. */
static size_t first_bad(const uint8_t *p, size_t len, unsigned int seed)
{
	size_t i;

	for (i = 0; i < len; i++)
		if (p[i] != pat(seed, i))
			break;
	return i;
}

#define ASSERT_MSG(p, len, seed)                                           \
	do {                                                               \
		size_t bad_ = first_bad((p), (len), (seed));               \
		if (bad_ != (len))                                         \
			harness_fail(__FILE__, __LINE__,                   \
				     "byte %zu of %zu: 0x%02x, expected "  \
				     "0x%02x", bad_, (size_t)(len),        \
				     (p)[bad_], pat((seed), bad_));        \
	} while (0)

/* ------------------------------------------------------------------ */
/* SIGNALED and sq_sig_all                                             */

/* Replace e's QP by one with sq_sig_all set, in INIT (ep_create's way). */
static void remake_qp_sig_all(struct ep *e, const struct ep_opts *o)
{
	struct ibv_qp_init_attr ia;
	struct ibv_qp_attr a;

	ASSERT_EQ(ibv_destroy_qp(e->qp), 0);
	memset(&ia, 0, sizeof(ia));
	ia.send_cq = e->scq;
	ia.recv_cq = e->rcq;
	ia.qp_type = o->type;
	ia.sq_sig_all = 1;
	ia.cap.max_send_wr = (uint32_t)o->max_send_wr;
	ia.cap.max_recv_wr = (uint32_t)o->max_recv_wr;
	ia.cap.max_send_sge = (uint32_t)o->max_sge;
	ia.cap.max_recv_sge = (uint32_t)o->max_sge;
	e->qp = ibv_create_qp(e->pd, &ia);
	ASSERT_NOT_NULL(e->qp);
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
	ASSERT_EQ(ibv_modify_qp(e->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
				IBV_QP_PORT | IBV_QP_ACCESS_FLAGS), 0);
	e->self.qpn = e->qp->qp_num;
}

/* Post one SEND or WRITE of 64 bytes at off, with these flags only. */
static void post_flags(struct ep *e, uint64_t wr_id, enum ibv_wr_opcode op,
		       uint64_t off, unsigned int flags)
{
	struct ibv_sge sge = { (uintptr_t)e->buf + off, 64, e->mr->lkey };
	struct ibv_send_wr wr, *bad;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = wr_id;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = op;
	wr.send_flags = flags;
	wr.wr.rdma.remote_addr = e->peer.addr + off;
	wr.wr.rdma.rkey = e->peer.rkey;
	ASSERT_EQ(ibv_post_send(e->qp, &wr, &bad), 0);
}

static void signaled(bool sig_all)
{
	struct ep a, b;
	struct ep_opts o;
	struct ibv_wc wc[4];
	int i;

	ep_skip_if_netns();
	ep_default_opts(&o, IBV_QPT_RC);
	ep_create(&a, &o);
	ep_create(&b, &o);
	if (sig_all)
		remake_qp_sig_all(&a, &o);
	a.peer = b.self;
	b.peer = a.self;
	ep_connect(&a, &o);
	ep_connect(&b, &o);
	memset(b.buf, SENTINEL, 1 << 20);
	for (i = 0; i < 3; i++) {
		fill(a.buf + (size_t)i * 4096, 64, 10 + (unsigned int)i);
		ASSERT_EQ(ep_post_recv(&b, 0xb0 + (uint64_t)i,
				       (uint64_t)i * 4096, 64), 0);
	}
	fill(a.buf + 3 * 4096, 64, 13);
	/* two without SIGNALED (a SEND, a WRITE), then a SEND with it */
	post_flags(&a, 1, IBV_WR_SEND, 0, 0);
	post_flags(&a, 2, IBV_WR_RDMA_WRITE, 3 * 4096, 0);
	post_flags(&a, 3, IBV_WR_SEND, 4096, IBV_SEND_SIGNALED);
	post_flags(&a, 4, IBV_WR_SEND, 2 * 4096, IBV_SEND_SIGNALED);
	if (sig_all) {
		/* sq_sig_all: all four, in order */
		ep_poll(a.scq, wc, 4);
		for (i = 0; i < 4; i++) {
			ASSERT_EQ(wc[i].status, IBV_WC_SUCCESS);
			ASSERT_EQ(wc[i].wr_id, (uint64_t)i + 1);
		}
	} else {
		/* only the signaled ones: the later one last, nothing else */
		ep_expect(a.scq, a.qp, 3, IBV_WC_SUCCESS);
		ep_expect(a.scq, a.qp, 4, IBV_WC_SUCCESS);
	}
	ep_expect_empty(a.scq);
	/* every message arrived all the same */
	for (i = 0; i < 3; i++) {
		struct ibv_wc r = ep_expect(b.rcq, b.qp, 0xb0 + (uint64_t)i,
					    IBV_WC_SUCCESS);

		ASSERT_EQ(r.byte_len, 64);
		ASSERT_MSG(b.buf + (size_t)i * 4096, 64, 10 + (unsigned int)i);
		ASSERT_EQ(b.buf[(size_t)i * 4096 + 64], SENTINEL);
	}
	ASSERT_MSG(b.buf + 3 * 4096, 64, 13);
	ep_expect_empty(b.rcq);
	ep_destroy(&a);
	ep_destroy(&b);
}

TEST(unsignaled_wrs_complete_nothing)
{
	signaled(false);
}

TEST(sq_sig_all_completes_every_wr)
{
	signaled(true);
}

/* ------------------------------------------------------------------ */
/* UD over IPv6 GIDs: the GRH bytes and wc.sl                          */

/* The index of ::1 in softhca_lo's GID table, or -1. */
static int lo_ipv6_gid(struct ibv_context *ctx, union ibv_gid *gid)
{
	struct ibv_port_attr pa;
	int i;

	ASSERT_EQ(ibv_query_port(ctx, 1, &pa), 0);
	for (i = 0; i < pa.gid_tbl_len; i++)
		if (!ibv_query_gid(ctx, 1, i, gid) &&
		    !memcmp(gid->raw, &in6addr_loopback, 16))
			return i;
	return -1;
}

TEST(ud_ipv6_grh_and_sl)
{
	struct ep a, b;
	struct ep_opts o;
	struct ibv_wc wc;
	union ibv_gid g6;
	const size_t len = 100, roff = 8192;
	const uint8_t *g;
	int idx;

	ep_skip_if_netns();
	netenv_need(NETENV_IP6_LO);
	ep_default_opts(&o, IBV_QPT_UD);
	ep_create(&a, &o);
	idx = lo_ipv6_gid(a.ctx, &g6);
	ASSERT_GE(idx, 0);	/* lo has ::1: softhca_lo has its GID */
	ep_create(&b, &o);
	a.gid_index = b.gid_index = idx;
	a.self.gid = b.self.gid = g6;
	a.peer = b.self;
	b.peer = a.self;
	ep_connect(&a, &o);
	ep_connect(&b, &o);
	memset(b.buf + roff, SENTINEL, 4096);
	fill(a.buf, len, 21);
	ASSERT_EQ(ep_post_recv(&b, 0xb1, roff, 1024), 0);
	ASSERT_EQ(ep_post(&a, 0xa1, IBV_WR_SEND, 0, (uint32_t)len, 0, 0), 0);
	ep_expect(a.scq, a.qp, 0xa1, IBV_WC_SUCCESS);
	wc = ep_expect(b.rcq, b.qp, 0xb1, IBV_WC_SUCCESS);
	ASSERT_EQ(wc.byte_len, GRH + len);
	ASSERT(wc.wc_flags & IBV_WC_GRH);
	ASSERT_EQ(wc.src_qp, a.qp->qp_num);
	/* RoCE v2 over IPv6: mlx5's roce_pkt_type 1 */
	ASSERT_EQ(wc.sl, 1);
	g = b.buf + roff;
	ASSERT_EQ(g[0] >> 4, 6);			/* IPv6 */
	/* payload length: UDP 8 + BTH 12 + DETH 8 + payload + ICRC 4 */
	ASSERT_EQ(g[4] << 8 | g[5], 8 + 12 + 8 + (int)len + 4);
	ASSERT_EQ(g[6], IPPROTO_UDP);			/* next header */
	ASSERT(!memcmp(g + 8, g6.raw, 16));		/* source GID */
	ASSERT(!memcmp(g + 24, g6.raw, 16));		/* destination */
	ASSERT_MSG(g + GRH, len, 21);
	ASSERT_EQ(g[GRH + len], SENTINEL);		/* nothing after */
	ep_destroy(&a);
	ep_destroy(&b);
}

/* ------------------------------------------------------------------ */
/* fork                                                                */

#define F_READ 0		/* the parent's post-fork bytes: read */
#define F_WRITE 8192		/* the peer writes here */
#define F_SEND 16384		/* the parent sends from here */
#define F_LEN 4096

/* The peer: reads the parent's buffer, writes into it, takes its SEND. */
static void fork_peer(int fd, void *arg)
{
	struct ep b;
	struct ep_opts o;

	(void)arg;
	ep_default_opts(&o, IBV_QPT_RC);
	ep_create(&b, &o);
	ep_exchange(fd, &b.self, &b.peer);
	memset(b.buf, SENTINEL, 1 << 16);
	ASSERT_EQ(ep_post_recv(&b, 0xb2, F_SEND, F_LEN), 0);
	duo_signal(fd, 'c');
	/* the parent forked and its child exited: only now does this
	 * process reach the parent (RTR connects to its same-host name),
	 * and the parent has written seed 2 since */
	duo_expect(fd, 'r');
	ep_connect(&b, &o);
	ASSERT_EQ(ep_post(&b, 0xb0, IBV_WR_RDMA_READ, F_READ, F_LEN, F_READ,
			  0), 0);
	ep_expect(b.scq, b.qp, 0xb0, IBV_WC_SUCCESS);
	ASSERT_MSG(b.buf + F_READ, F_LEN, 2);
	fill(b.buf + F_WRITE, F_LEN, 3);
	ASSERT_EQ(ep_post(&b, 0xb1, IBV_WR_RDMA_WRITE, F_WRITE, F_LEN,
			  F_WRITE, 0), 0);
	ep_expect(b.scq, b.qp, 0xb1, IBV_WC_SUCCESS);
	duo_signal(fd, 'w');
	ep_expect(b.rcq, b.qp, 0xb2, IBV_WC_SUCCESS);
	ASSERT_MSG(b.buf + F_SEND, F_LEN, 4);
	ASSERT_EQ(b.buf[F_SEND + F_LEN], SENTINEL);
	duo_signal(fd, 'd');
	ep_destroy(&b);
}

TEST(fork_child_exit_leaves_parent_working)
{
	struct ep a;
	struct ep_opts o;
	struct duo d;
	int status;
	pid_t pid;

#ifdef __SANITIZE_THREAD__
	SKIP("TSan does not run the child of a threaded process");
#endif
#ifdef __SANITIZE_ADDRESS__
	SKIP("gcc 12's ASan: the child of a threaded process may inherit "
	     "its allocator lock taken (tests/cm/test_events.c)");
#endif
	duo_fork(&d, fork_peer, NULL);
	ep_default_opts(&o, IBV_QPT_RC);
	ep_open_remote(&a, &o, d.fd);
	memset(a.buf, SENTINEL, 1 << 16);
	fill(a.buf + F_READ, F_LEN, 1);
	duo_expect(d.fd, 'c');

	/* a child of a process with registered memory, live QPs and the
	 * libraries' threads: its copy of the buffer is there to read and
	 * write (no MADV_DONTFORK, nothing pinned), and its exit(3) runs
	 * the libraries' destructors */
	fflush(stdout);
	fflush(stderr);
	pid = fork();
	ASSERT_GE(pid, 0);
	if (pid == 0) {
		alarm(20);
		if (ibv_is_fork_initialized() != IBV_FORK_UNNEEDED)
			_exit(3);
		if (first_bad(a.buf + F_READ, F_LEN, 1) != F_LEN)
			_exit(4);
		fill(a.buf, 1 << 16, 9);	/* its own copy */
		exit(0);
	}
	ASSERT_EQ(waitpid(pid, &status, 0), pid);
	if (!WIFEXITED(status) || WEXITSTATUS(status))
		harness_fail(__FILE__, __LINE__,
			     "the forked child failed (status 0x%x: %s)",
			     status, WIFSIGNALED(status) ?
			     strsignal(WTERMSIG(status)) : "exit code");
	/* the child's writes stayed in its copy */
	ASSERT_MSG(a.buf + F_READ, F_LEN, 1);
	ASSERT_EQ(a.buf[F_WRITE], SENTINEL);

	/* the parent's pages after the fork are the ones the peer sees */
	fill(a.buf + F_READ, F_LEN, 2);
	fill(a.buf + F_SEND, F_LEN, 4);
	duo_signal(d.fd, 'r');
	duo_expect(d.fd, 'w');
	ASSERT_MSG(a.buf + F_WRITE, F_LEN, 3);
	ASSERT_EQ(a.buf[F_WRITE + F_LEN], SENTINEL);
	ASSERT_EQ(ep_post(&a, 0xa0, IBV_WR_SEND, F_SEND, F_LEN, 0, 0), 0);
	ep_expect(a.scq, a.qp, 0xa0, IBV_WC_SUCCESS);
	duo_expect(d.fd, 'd');
	duo_wait(&d);
	ep_destroy(&a);
}
