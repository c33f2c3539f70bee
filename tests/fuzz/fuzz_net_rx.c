// SPDX-License-Identifier: MIT
/*
 * libFuzzer target for the net path's receive side: shca_net_rx(), which
 * takes what a peer on another host sends (a TCP frame for RC and UC, a
 * UDP datagram for UD) and runs the responder or the completer on it.
 *
 * Set up once, through the verbs API (the target links the library's
 * objects statically): softhca_lo, a PD, one MR with every access right
 * over a small buffer with canaries on both sides, a CQ, an SRQ, and RC,
 * UC (on the SRQ) and UD QPs; an XRC domain with an XRC SRQ and an
 * XRC_RECV QP (fuzz.h: XRC packets come on the RC QP's connection).
 * The RC, UC and XRC_RECV QPs point at ::ffff:127.0.0.2, which is none
 * of this host's GIDs, so they take the net path; their destination QPN
 * names a port on which this target itself listens at that address, so
 * what softhca answers (ACKs, READ responses, the RC requester's
 * packets) goes somewhere and is read back.
 *
 * The input format is in fuzz.h.  Each packet goes to shca_net_rx() in
 * the engine thread, where conn.c hands packets up.  Every input starts
 * from the same state: the QPs are reset and brought back to RTS, their
 * receive queues filled, and the RC send queue given its requests anew,
 * so a crash reproduces from its input alone.  A QP that a packet moved
 * to the error state is brought back the same way before the next
 * packet, so that an input goes on reaching deep states.
 *
 * Checks, beyond ASan and UBSan: nothing written outside the MR (the
 * canaries), every completion for one of the QPs and within the buffer it
 * had, and every frame softhca sends a valid IB packet for the
 * destination QP that fits the path MTU.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>
#include <infiniband/verbs.h>

#include "fuzz.h"
#include "common/verbs_ext.h"
#include "common/slot.h"
#include "engine/engine.h"
#include "net/keyguard.h"
#include "net/handshake.h"
#include "net/net.h"
#include "net/transport.h"
#include "shm/xfer.h"
#include "verbs/shca.h"
#include "wire/wire.h"

#define CHECK(cond)                                                       \
	do {                                                              \
		if (!(cond)) {                                            \
			fprintf(stderr, "%s:%d: CHECK(%s) failed\n",      \
				__FILE__, __LINE__, #cond);               \
			abort();                                          \
		}                                                         \
	} while (0)

#define CANARY_LEN	4096		/* a page: the MR starts page-aligned */
#define CANARY		0xc5
#define RQ_DEPTH	4		/* a few SENDs more: RNR */
#define SQ_DEPTH	16
#define CQ_DEPTH	1024
#define MAX_DRAINS	8
#define DRAIN_BUF	(2 * SHCA_NET_RUN_BYTES)	/* a whole run and more */
#define FRAME_MAX	(SHCA_WIRE_MAX_PMTU + 128)	/* conn.c's MAX_PKT */

/* Where the receive WQEs and the RC requests keep their data in the MR. */
#define RC_RECV_OFF	0		/* two SGEs: 64 + 1024 bytes */
#define RC_RECV_LEN	(64 + 1024)
#define UC_RECV_OFF	1088		/* the SRQ's WQEs: one SGE */
#define UC_RECV_LEN	512
#define UD_RECV_OFF	1600		/* GRH + 1024 bytes */
#define UD_RECV_LEN	(SHCA_GRH_LEN + 1024)
#define REQ_SEND_OFF	2664
#define REQ_WRITE_OFF	(REQ_SEND_OFF + FUZZ_NET_RC_SEND_LEN)
#define REQ_READ_OFF	(REQ_WRITE_OFF + FUZZ_NET_RC_WRITE_LEN)
#define REQ_CAS_OFF	3576		/* 8-aligned */
#define REQ_FADD_OFF	(REQ_CAS_OFF + 8)
_Static_assert(REQ_READ_OFF + FUZZ_NET_RC_READ_LEN <= REQ_CAS_OFF,
	       "MR layout");
_Static_assert(REQ_FADD_OFF + 8 <= FUZZ_NET_MR_LEN, "MR layout");

#define XRC_RECV_OFF	3600		/* the XRC SRQ's WQEs, one SGE */
#define XRC_RECV_LEN	256
_Static_assert(XRC_RECV_OFF >= REQ_FADD_OFF + 8 &&
	       XRC_RECV_OFF + XRC_RECV_LEN <= FUZZ_NET_MR_LEN, "MR layout");

#define REQ_WR_ID	0x5e00		/* + index of the RC request */
#define NREQ		6

static const uint32_t psn_delta[8] = { 0, 0, 0, 0, 1, SHCA_PSN_MASK, 2,
				       0x800000 };

/* A connection softhca opened to one of our listeners, and what it sent. */
struct drain {
	int fd;
	bool hello;			/* the handshake is over (WELCOME) */
	bool challenged;		/* HELLO seen, CHALLENGE sent */
	uint8_t nonce[SHCA_HS_NONCE];
	size_t len;
	unsigned char buf[DRAIN_BUF];
};

static struct {
	bool ready;
	bool verbose;			/* FUZZ_NET_RX_VERBOSE: a trace */
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_mr *mr;
	struct ibv_cq *cq;
	struct ibv_srq *srq;
	struct ibv_qp *rc, *uc, *ud;
	struct ibv_xrcd *xrcd;
	struct ibv_srq *xsrq;		/* an XRC SRQ of xrcd */
	struct ibv_qp *xrecv;		/* XRC_RECV of xrcd, kept in RTR */
	unsigned char *mem;		/* canary, MR, canary */
	unsigned char *buf;		/* the MR's bytes */
	uint16_t port;			/* where we listen (127.0.0.2/.3) */
	int lfd[2];
	uint32_t dqpn;			/* the RC and UC QPs' destination */
	union ibv_gid peer_gid, other_gid, lo_gid, mgid;
	struct shca_conn *conn;		/* to peer_gid: the QPs' own */
	struct shca_conn *other;	/* to other_gid */
	struct drain *drains[MAX_DRAINS];
	struct fuzz_net_rx_hooks hooks;	/* the oracle tests' (fuzz.h) */
} fz;

/* ------------------------------------------------------------------ */
/* What softhca sends: read back and checked                           */

/*
 * The atomic ACKs the RC QP sent since it last started, by PSN: a
 * duplicate atomic is answered with the result saved when it was carried
 * out, never carried out again (IBA 9.7.5.1.3; rxe replays the saved
 * response too), so every ACK for one PSN carries the same original value.
 */
#define ATOMIC_SEEN	64
static struct {
	unsigned int n;
	uint32_t psn[ATOMIC_SEEN];
	uint64_t orig[ATOMIC_SEEN];
} atomic_seen;

static void check_atomic_ack(const struct shca_wire_msg *m)
{
	unsigned int i;

	for (i = 0; i < atomic_seen.n; i++)
		if (atomic_seen.psn[i] == m->psn) {
			CHECK(atomic_seen.orig[i] == m->orig);
			return;
		}
	if (atomic_seen.n < ATOMIC_SEEN) {
		atomic_seen.psn[atomic_seen.n] = m->psn;
		atomic_seen.orig[atomic_seen.n++] = m->orig;
	}
}

static void check_sent(const unsigned char *p, size_t len)
{
	struct shca_wire_msg m;
	enum shca_wire_transport tp;

	CHECK(shca_wire_parse(p, len, &m) == 0);
	tp = (enum shca_wire_transport)m.op->transport;
	CHECK(tp == SHCA_TP_RC || tp == SHCA_TP_UC || tp == SHCA_TP_XRC);
	/* the XRC_RECV QP answers, and sends no request */
	CHECK(tp != SHCA_TP_XRC || (m.op->mask & SHCA_OPM_RESP));
	CHECK(m.dqpn == fz.dqpn);
	CHECK(shca_wire_check_qp(&m, tp, FUZZ_NET_PMTU) == 0);
	/* (the RC QP's: the XRC_RECV QP's PSNs restart on their own) */
	if (m.opcode == SHCA_OP_RC_ATOMIC_ACKNOWLEDGE)
		check_atomic_ack(&m);
	if (fz.hooks.sent)
		fz.hooks.sent(p, len, fz.hooks.arg);
	if (fz.verbose)
		fprintf(stderr, "    sent %s psn 0x%06x syndrome 0x%02x "
			"payload %u\n", m.op->name, m.psn, m.syndrome,
			m.payload_len);
}

static void drain_close(unsigned int i)
{
	close(fz.drains[i]->fd);
	free(fz.drains[i]);
	fz.drains[i] = NULL;
}

/*
 * The acceptor's side of the handshake (net/handshake.h), as a peer plays
 * it: HELLO names softhca's slot port; the CHALLENGE goes there by UDP
 * from our address; PROOF must echo its nonce; WELCOME (no secret: a MAC
 * of zeros) opens the connection.  Returns the frame's length, 0 for
 * more bytes.
 */
static size_t drain_handshake(struct drain *d, const unsigned char *f,
			      size_t avail)
{
	static const uint8_t zero[SHCA_HS_MAC];
	uint32_t w;
	enum shca_hs_type t;
	int blen;

	memcpy(&w, f, 4);
	w = ntohl(w);
	blen = shca_hs_ctl_body(w, &t);
	CHECK(blen >= 0);
	if (avail - 4 < (size_t)blen)
		return 0;
	if (!d->challenged) {
		struct shca_hs_challenge ch = { .version = SHCA_HS_VERSION };
		struct shca_hs_hello h;
		struct sockaddr_in from, to;
		socklen_t fl = sizeof(from);
		uint8_t dg[SHCA_HS_CHALLENGE_LEN];
		size_t n;
		int u;

		CHECK(t == SHCA_HS_HELLO);
		CHECK(!shca_hs_hello_parse(f + 4, (size_t)blen, &h));
		CHECK(!getpeername(d->fd, (struct sockaddr *)&from, &fl));
		ch.acc_port = fz.port;
		ch.src_port = ntohs(from.sin_port);
		shca_random(d->nonce, SHCA_HS_NONCE);
		memcpy(ch.nonce, d->nonce, SHCA_HS_NONCE);
		n = shca_hs_challenge_build(dg, &ch);
		/* from the address softhca connected to */
		u = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
		CHECK(u >= 0);
		memset(&to, 0, sizeof(to));
		to.sin_family = AF_INET;
		to.sin_addr.s_addr = htonl(0x7f000002);
		CHECK(!bind(u, (struct sockaddr *)&to, sizeof(to)));
		to = from;
		to.sin_port = htons(h.port);
		CHECK(sendto(u, dg, n, 0, (struct sockaddr *)&to,
			     sizeof(to)) == (ssize_t)n);
		close(u);
		d->challenged = true;
	} else {
		uint8_t wf[SHCA_HS_FRAME_MAX];
		size_t n;

		CHECK(t == SHCA_HS_PROOF);
		CHECK(!memcmp(f + 4, d->nonce, SHCA_HS_NONCE));
		CHECK(!memcmp(f + 4 + SHCA_HS_NONCE, zero, SHCA_HS_MAC));
		n = shca_hs_welcome_build(wf, zero);
		CHECK(send(d->fd, wf, n, MSG_NOSIGNAL) == (ssize_t)n);
		d->hello = true;
	}
	return 4 + (size_t)blen;
}

/*
 * A run frame (net/net.h: word, payload length, the first BTH, the
 * payloads) at f, have bytes of it in: each of its packets checked as
 * sent, with the PSN counting up.  Its bytes, or 0 until it is whole.
 */
static size_t run_sent(const unsigned char *f, size_t have, uint32_t word)
{
	unsigned char pkt[SHCA_BTH_LEN + FUZZ_NET_PMTU];
	uint32_t n = word & ~SHCA_NET_RUN, plen, i;
	struct shca_bth bth;
	size_t total;

	CHECK(!(word & SHCA_HS_CTL) && n >= 1 && n <= SHCA_NET_RUN_MAX);
	if (have < SHCA_NET_RUN_HDR)
		return 0;
	memcpy(&plen, f + 4, 4);
	plen = ntohl(plen);
	CHECK(plen && plen % 4 == 0 && plen <= FUZZ_NET_PMTU &&
	      (size_t)n * plen <= SHCA_NET_RUN_BYTES);
	total = SHCA_NET_RUN_HDR + (size_t)n * plen;
	if (have < total)
		return 0;
	memcpy(&bth, f + 8, SHCA_BTH_LEN);
	CHECK(!shca_bth_ackreq(&bth));
	for (i = 0; i < n; i++) {
		if (i)
			shca_bth_set_psn(&bth, shca_bth_psn(&bth) + 1);
		memcpy(pkt, &bth, SHCA_BTH_LEN);
		memcpy(pkt + SHCA_BTH_LEN, f + SHCA_NET_RUN_HDR +
			(size_t)i * plen, plen);
		check_sent(pkt, SHCA_BTH_LEN + plen);
	}
	return total;
}

/*
 * Cut what arrived into frames (conn.c: a 4-byte length, then an IB
 * packet, or a run frame of several), after the handshake's.
 */
static void drain_frames(struct drain *d)
{
	size_t off = 0;

	while (d->len - off >= 4) {
		uint32_t flen;

		memcpy(&flen, d->buf + off, 4);
		flen = ntohl(flen);
		if (!d->hello) {
			size_t n = drain_handshake(d, d->buf + off,
						   d->len - off);

			if (!n)
				break;
			off += n;
			continue;
		}
		if (flen & SHCA_NET_RUN) {
			size_t n = run_sent(d->buf + off, d->len - off, flen);

			if (!n)
				break;
			off += n;
			continue;
		}
		CHECK(flen >= SHCA_BTH_LEN && flen <= FRAME_MAX);
		if (d->len - off - 4 < flen)
			break;
		check_sent(d->buf + off + 4, flen);
		off += 4 + flen;
	}
	memmove(d->buf, d->buf + off, d->len - off);
	d->len -= off;
}

static void drain(void)
{
	unsigned int i, k;

	for (k = 0; k < 2; k++)
		for (;;) {
			int fd = accept4(fz.lfd[k], NULL, NULL,
					 SOCK_NONBLOCK | SOCK_CLOEXEC);

			if (fd < 0)
				break;
			for (i = 0; i < MAX_DRAINS && fz.drains[i]; i++)
				;
			if (i == MAX_DRAINS) {
				i = 0;
				drain_close(i);
			}
			fz.drains[i] = calloc(1, sizeof(struct drain));
			CHECK(fz.drains[i]);
			fz.drains[i]->fd = fd;
		}
	for (i = 0; i < MAX_DRAINS; i++) {
		struct drain *d = fz.drains[i];

		while (d) {
			ssize_t n = recv(d->fd, d->buf + d->len,
					 DRAIN_BUF - d->len, 0);

			if (n < 0 && errno == EINTR)
				continue;
			if (n < 0 && errno == EAGAIN)
				break;
			if (n <= 0) {
				/* softhca closed it (a new one follows) */
				drain_close(i);
				break;
			}
			d->len += (size_t)n;
			drain_frames(d);
		}
	}
}

/*
 * softhca's connection to the peer, proven by the handshake: until it is,
 * nothing that arrives on it reaches a QP (admission).  Each input starts
 * with it up.
 */
static void handshake_wait(void)
{
	unsigned int scope;
	uint8_t gid[16];
	uint16_t port;
	int i;

	for (i = 0; i < 10000; i++) {
		if (shca_net_conn_proven(fz.conn, gid, &scope, &port))
			return;
		drain();
		usleep(1000);
	}
	fprintf(stderr, "fuzz_net_rx: no handshake with softhca\n");
	abort();
}

/* A listener at addr:port, or -1 (the port is taken). */
static int listen_at(uint32_t addr, uint16_t port)
{
	struct sockaddr_in sa;
	int fd, one = 1;

	fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	CHECK(fd >= 0);
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_port = htons(port);
	sa.sin_addr.s_addr = htonl(addr);
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) || listen(fd, 16)) {
		close(fd);
		return -1;
	}
	return fd;
}

/*
 * A slot whose port we can listen on at 127.0.0.2 and 127.0.0.3: no
 * softhca process holds it (they listen on any address), and none can
 * take it while we do (it moves on to another slot).
 */
static void open_listeners(void)
{
	int s;

	for (s = SHCA_NUM_SLOTS - 1; s >= 0; s--) {
		uint16_t port = (uint16_t)(shca_port_base() + s);

		fz.lfd[0] = listen_at(0x7f000002, port);
		if (fz.lfd[0] < 0)
			continue;
		fz.lfd[1] = listen_at(0x7f000003, port);
		if (fz.lfd[1] < 0) {
			close(fz.lfd[0]);
			continue;
		}
		fz.port = port;
		fz.dqpn = shca_qpn_make(s, 0x2a);
		return;
	}
	fprintf(stderr, "fuzz_net_rx: no free port for the peer\n");
	abort();
}

/* ------------------------------------------------------------------ */
/* The QPs                                                             */

static void check_canaries(void)
{
	static unsigned char want[CANARY_LEN];

	if (!want[0])
		memset(want, CANARY, sizeof(want));
	CHECK(!memcmp(fz.mem, want, CANARY_LEN));
	CHECK(!memcmp(fz.buf + FUZZ_NET_MR_LEN, want, CANARY_LEN));
}

static uint64_t at(size_t off)
{
	return FUZZ_NET_IOVA + off;
}

static enum ibv_qp_state qp_state(struct ibv_qp *qp)
{
	struct ibv_qp_init_attr init;
	struct ibv_qp_attr a;

	CHECK(!ibv_query_qp(qp, &a, IBV_QP_STATE, &init));
	return a.qp_state;
}

static void post_recv(struct ibv_qp *qp)
{
	struct ibv_sge sge[2];
	struct ibv_recv_wr wr, *bad;

	memset(&wr, 0, sizeof(wr));
	wr.sg_list = sge;
	if (qp == fz.rc) {
		sge[0] = (struct ibv_sge){ at(RC_RECV_OFF), 64, fz.mr->lkey };
		sge[1] = (struct ibv_sge){ at(RC_RECV_OFF + 64),
					   RC_RECV_LEN - 64, fz.mr->lkey };
		wr.num_sge = 2;
		CHECK(!ibv_post_recv(qp, &wr, &bad));
	} else if (qp == fz.xrecv) {
		sge[0] = (struct ibv_sge){ at(XRC_RECV_OFF), XRC_RECV_LEN,
					   fz.mr->lkey };
		wr.num_sge = 1;
		CHECK(!ibv_post_srq_recv(fz.xsrq, &wr, &bad));
	} else if (qp == fz.ud) {
		sge[0] = (struct ibv_sge){ at(UD_RECV_OFF), UD_RECV_LEN,
					   fz.mr->lkey };
		wr.num_sge = 1;
		CHECK(!ibv_post_recv(qp, &wr, &bad));
	} else {
		sge[0] = (struct ibv_sge){ at(UC_RECV_OFF), UC_RECV_LEN,
					   fz.mr->lkey };
		wr.num_sge = 1;
		CHECK(!ibv_post_srq_recv(fz.srq, &wr, &bad));
	}
}

/* Receive queues back to RQ_DEPTH WQEs (of QPs that can take them). */
static void refill(void)
{
	struct shca_qp *rc = to_sqp(fz.rc), *ud = to_sqp(fz.ud);

	if (qp_state(fz.rc) == IBV_QPS_RTS)
		while (shca_rq_count(&rc->rq) < RQ_DEPTH)
			post_recv(fz.rc);
	if (qp_state(fz.ud) == IBV_QPS_RTS)
		while (shca_rq_count(&ud->rq) < RQ_DEPTH)
			post_recv(fz.ud);
	while (shca_rq_count(&to_ssrq(fz.srq)->rq) < RQ_DEPTH)
		post_recv(fz.uc);
	while (shca_rq_count(&to_ssrq(fz.xsrq)->rq) < RQ_DEPTH)
		post_recv(fz.xrecv);
}

/* The RC requests that ACKs and responses answer (fuzz.h). */
static void post_requests(void)
{
	struct ibv_send_wr wr[NREQ], *bad;
	struct ibv_sge sge[NREQ];
	unsigned int i;

	memset(wr, 0, sizeof(wr));
	sge[0] = (struct ibv_sge){ at(REQ_SEND_OFF), FUZZ_NET_RC_SEND_LEN,
				   fz.mr->lkey };
	sge[1] = (struct ibv_sge){ at(REQ_WRITE_OFF), FUZZ_NET_RC_WRITE_LEN,
				   fz.mr->lkey };
	sge[2] = (struct ibv_sge){ at(REQ_READ_OFF), FUZZ_NET_RC_READ_LEN,
				   fz.mr->lkey };
	sge[3] = (struct ibv_sge){ at(REQ_CAS_OFF), 8, fz.mr->lkey };
	sge[4] = (struct ibv_sge){ at(REQ_FADD_OFF), 8, fz.mr->lkey };
	wr[0].opcode = IBV_WR_SEND;
	wr[1].opcode = IBV_WR_RDMA_WRITE;
	wr[1].wr.rdma.remote_addr = 0x700000;
	wr[1].wr.rdma.rkey = 0x1234;
	wr[2].opcode = IBV_WR_RDMA_READ;
	wr[2].wr.rdma.remote_addr = 0x700000;
	wr[2].wr.rdma.rkey = 0x1234;
	wr[3].opcode = IBV_WR_ATOMIC_CMP_AND_SWP;
	wr[3].wr.atomic.remote_addr = 0x700008;
	wr[3].wr.atomic.rkey = 0x1234;
	wr[3].wr.atomic.compare_add = 0;
	wr[3].wr.atomic.swap = 7;
	wr[4].opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
	wr[4].wr.atomic.remote_addr = 0x700010;
	wr[4].wr.atomic.rkey = 0x1234;
	wr[4].wr.atomic.compare_add = 1;
	wr[5].opcode = IBV_WR_SEND_WITH_IMM;
	wr[5].imm_data = htonl(0x1d);
	for (i = 0; i < NREQ; i++) {
		wr[i].wr_id = REQ_WR_ID + i;
		wr[i].send_flags = IBV_SEND_SIGNALED;
		if (i < 5) {
			wr[i].sg_list = &sge[i];
			wr[i].num_sge = 1;
		}
		wr[i].next = i + 1 < NREQ ? &wr[i + 1] : NULL;
	}
	CHECK(!ibv_post_send(fz.rc, wr, &bad));
}

static void modify(struct ibv_qp *qp, struct ibv_qp_attr *a, int mask)
{
	int ret = ibv_modify_qp(qp, a, mask);

	if (ret) {
		fprintf(stderr, "fuzz_net_rx: modify QP 0x%06x to %d: %s\n",
			qp->qp_num, (int)a->qp_state, strerror(ret));
		abort();
	}
}

/* RESET, INIT, RTR, RTS: the QP as it was after setup. */
static void qp_restart(struct ibv_qp *qp)
{
	bool ud = qp->qp_type == IBV_QPT_UD, rc = qp->qp_type == IBV_QPT_RC;
	bool xrc = qp->qp_type == IBV_QPT_XRC_RECV;
	struct ibv_qp_attr a;
	int mask;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RESET;
	modify(qp, &a, IBV_QP_STATE);
	if (rc) {
		/* its PSNs start again: what it sent before is read first */
		drain();
		atomic_seen.n = 0;
	}
	/*
	 * RESET leaves an armed retry timer (RNR wait) running; one that
	 * fired during a later input would make the inputs depend on each
	 * other.
	 */
	shca_timer_cancel(&to_sqp(qp)->retry_timer);

	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.pkey_index = 0;
	mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT;
	if (ud) {
		a.qkey = FUZZ_NET_QKEY;
		mask |= IBV_QP_QKEY;
	} else {
		a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE |
				    IBV_ACCESS_REMOTE_WRITE;
		if (rc || xrc)
			a.qp_access_flags |= IBV_ACCESS_REMOTE_READ |
					     IBV_ACCESS_REMOTE_ATOMIC |
					     SHCA_ACCESS_FLUSH_GLOBAL;
		mask |= IBV_QP_ACCESS_FLAGS;
	}
	modify(qp, &a, mask);

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	mask = IBV_QP_STATE;
	if (!ud) {
		a.path_mtu = IBV_MTU_256;
		a.dest_qp_num = fz.dqpn;
		a.rq_psn = FUZZ_NET_RQ_PSN;
		a.ah_attr.is_global = 1;
		a.ah_attr.grh.dgid = fz.peer_gid;
		a.ah_attr.grh.sgid_index = 0;
		a.ah_attr.grh.hop_limit = 64;
		a.ah_attr.port_num = 1;
		mask |= IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
			IBV_QP_RQ_PSN;
	}
	if (rc || xrc) {
		a.max_dest_rd_atomic = 16;
		a.min_rnr_timer = 1;
		mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
	}
	modify(qp, &a, mask);
	if (xrc)
		return;		/* a responder only: RTR is enough */

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = FUZZ_NET_SQ_PSN;
	mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
	if (rc) {
		/* the ACK timer at its longest (2.4 hours): no retry while
		 * an input runs */
		a.timeout = 31;
		a.retry_cnt = 7;
		a.rnr_retry = 3;	/* the 4th RNR NAK in a row fails */
		a.max_rd_atomic = 16;
		mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
			IBV_QP_MAX_QP_RD_ATOMIC;
	}
	modify(qp, &a, mask);
	if (rc)
		post_requests();
}

static struct ibv_qp *create_qp(enum ibv_qp_type type, struct ibv_srq *srq)
{
	struct ibv_qp_init_attr init;
	struct ibv_qp *qp;

	memset(&init, 0, sizeof(init));
	init.send_cq = fz.cq;
	init.recv_cq = fz.cq;
	init.srq = srq;
	init.qp_type = type;
	init.cap.max_send_wr = SQ_DEPTH;
	init.cap.max_recv_wr = srq ? 0 : RQ_DEPTH;
	init.cap.max_send_sge = 2;
	init.cap.max_recv_sge = srq ? 0 : 2;
	qp = ibv_create_qp(fz.pd, &init);
	CHECK(qp);
	return qp;
}

/* Completions: each for one of our QPs, none longer than its buffer. */
static void poll_cq(void)
{
	struct ibv_wc wc[32];
	int n, i;

	while ((n = ibv_poll_cq(fz.cq, 32, wc)) > 0)
		for (i = 0; i < n; i++) {
			const struct ibv_wc *w = &wc[i];
			uint32_t cap = 0;

			if (w->qp_num == fz.rc->qp_num)
				cap = RC_RECV_LEN;
			else if (w->qp_num == fz.xrecv->qp_num)
				cap = XRC_RECV_LEN;
			else if (w->qp_num == fz.uc->qp_num)
				cap = UC_RECV_LEN;
			else
				CHECK(w->qp_num == fz.ud->qp_num);
			if (w->qp_num == fz.ud->qp_num)
				cap = UD_RECV_LEN;
			if (fz.verbose)
				fprintf(stderr, "    wc qp 0x%06x wr_id 0x%lx "
					"%s opcode %d len %u\n", w->qp_num,
					(unsigned long)w->wr_id,
					ibv_wc_status_str(w->status),
					(int)w->opcode, w->byte_len);
			if (w->status != IBV_WC_SUCCESS)
				continue;
			if (w->opcode == IBV_WC_RECV)
				CHECK(w->byte_len <= cap);
			else if (w->opcode == IBV_WC_RECV_RDMA_WITH_IMM)
				CHECK(w->byte_len <= FUZZ_NET_MR_LEN);
			else
				CHECK(w->qp_num == fz.rc->qp_num &&
				      w->wr_id >= REQ_WR_ID &&
				      w->wr_id < REQ_WR_ID + NREQ);
		}
	CHECK(n == 0);
}

static void drain_async(void)
{
	struct ibv_async_event ev;

	while (!ibv_get_async_event(fz.ctx, &ev)) {
		if (fz.verbose)
			fprintf(stderr, "    event %s\n",
				ibv_event_type_str(ev.event_type));
		ibv_ack_async_event(&ev);
	}
}

/*
 * Between packets, as an application would: completions taken, QPs in
 * the error state brought back with their receives posted again; and the
 * checks.  Receive queues are filled at the start of an input and
 * after a restart only, so that an input can run them dry.
 */
static void settle(bool restart_all)
{
	struct ibv_qp *qps[4] = { fz.rc, fz.uc, fz.ud, fz.xrecv };
	bool restarted = restart_all;
	unsigned int i;

	poll_cq();
	for (i = 0; i < 4; i++) {
		enum ibv_qp_state st = qp_state(qps[i]);
		enum ibv_qp_state ok = qps[i] == fz.xrecv ? IBV_QPS_RTR :
							    IBV_QPS_RTS;

		if (fz.verbose && st != ok)
			fprintf(stderr, "    QP 0x%06x in state %d: restart\n",
				qps[i]->qp_num, (int)st);
		if (restart_all || st != ok) {
			qp_restart(qps[i]);
			restarted = true;
		}
	}
	if (restarted)
		refill();
	drain_async();
	drain();
	if (fz.ready && fz.conn)
		handshake_wait();
	check_canaries();
}

/* ------------------------------------------------------------------ */
/* One packet                                                          */

/* The PSN qp expects next: a request's, or the answer to its SQ head. */
static uint32_t expected_psn(struct ibv_qp *ibqp,
			     const struct shca_wire_opinfo *op)
{
	struct shca_qp *qp = to_sqp(ibqp);
	struct shca_send_wqe *w = NULL;
	uint32_t head, tail, psn;

	pthread_mutex_lock(&qp->exec_lock);
	if (op && (op->mask & SHCA_OPM_RESP)) {
		shca_sq_at(qp, 0, &head, &tail);
		if (head != qp->net.assigned)
			w = shca_sq_at(qp, head, &head, &tail);
		if (!w)		/* nothing in flight: the last PSN sent */
			psn = shca_psn_add(qp->net.next_psn, SHCA_PSN_MASK);
		else if (op->mask & (SHCA_OPM_READ_RESP | SHCA_OPM_ATOMIC_ACK))
			psn = shca_psn_add(w->psn, w->nrecv);
		else		/* an ACK of the whole head WQE */
			psn = shca_psn_add(w->psn, w->npsn - 1);
	} else {
		psn = qp->net.epsn;
	}
	pthread_mutex_unlock(&qp->exec_lock);
	return psn;
}

/* The selector's patches (fuzz.h), on what is there of the headers. */
static void patch(unsigned char *pkt, size_t len, uint8_t sel,
		  struct ibv_qp *qp)
{
	struct shca_bth *bth = (struct shca_bth *)pkt;
	const struct shca_wire_opinfo *op;
	size_t off = SHCA_BTH_LEN;

	if (len < SHCA_BTH_LEN)
		return;
	op = shca_wire_op(shca_bth_opcode(bth));
	if (sel & FUZZ_NET_SET_QPN)
		shca_bth_set_dqpn(bth, qp->qp_num);
	if (sel & FUZZ_NET_SET_PSN)
		shca_bth_set_psn(bth, shca_psn_add(expected_psn(qp, op),
						   psn_delta[sel >> 5]));
	if (!op || !(sel & FUZZ_NET_SET_KEY))
		return;
	if (op->mask & SHCA_OPM_XRCETH) {
		uint32_t srqn;

		CHECK(!ibv_get_srq_num(fz.xsrq, &srqn));
		if (len >= off + SHCA_XRCETH_LEN)
			shca_xrceth_set_srqn((struct shca_xrceth *)(pkt + off),
					     srqn);
		off += SHCA_XRCETH_LEN;
	}
	if (op->mask & SHCA_OPM_DETH) {
		if (len >= off + SHCA_DETH_LEN)
			shca_deth_set_qkey((struct shca_deth *)(pkt + off),
					   FUZZ_NET_QKEY);
		off += SHCA_DETH_LEN;
	}
	if (op->mask & SHCA_OPM_FETH)
		off += SHCA_FETH_LEN;		/* FLUSH: before the RETH */
	if (op->mask & SHCA_OPM_RETH) {
		if (len >= off + SHCA_RETH_LEN)
			shca_reth_set_rkey((struct shca_reth *)(pkt + off),
					   fz.mr->rkey);
		off += SHCA_RETH_LEN;
	}
	if ((op->mask & SHCA_OPM_ATMETH) && len >= off + SHCA_ATMETH_LEN)
		shca_atmeth_set_rkey((struct shca_atmeth *)(pkt + off),
				     fz.mr->rkey);
}

static void receive(uint8_t sel, const uint8_t *data, size_t len)
{
	unsigned int from = sel & FUZZ_NET_FROM_MASK;
	struct ibv_qp *qp = from == FUZZ_NET_FROM_UC ? fz.uc :
			    from == FUZZ_NET_FROM_UD ? fz.ud : fz.rc;
	struct shca_net_addr addr;

	/* XRC opcodes on the RC QP's connection: the XRC_RECV QP's */
	if (from == FUZZ_NET_FROM_RC && len &&
	    data[0] >> SHCA_OPCODE_TP_SHIFT == SHCA_TP_XRC)
		qp = fz.xrecv;
	struct shca_conn *c;
	unsigned char *pkt;

	/* an exact-size copy: ASan sees any read past the end */
	pkt = malloc(len ? len : 1);
	CHECK(pkt);
	memcpy(pkt, data, len);
	patch(pkt, len, sel, qp);
	if (fz.verbose)
		fprintf(stderr, "  packet from %u, %zu bytes, opcode 0x%02x "
			"dqpn 0x%06x psn 0x%06x\n", from, len,
			len ? pkt[0] : 0,
			len >= SHCA_BTH_LEN ?
				shca_bth_dqpn((struct shca_bth *)pkt) : 0,
			len >= SHCA_BTH_LEN ?
				shca_bth_psn((struct shca_bth *)pkt) : 0);
	memset(&addr, 0, sizeof(addr));
	if (from == FUZZ_NET_FROM_UD) {
		/* a datagram from the peer, to this host or the group */
		c = NULL;
		memcpy(addr.src, fz.peer_gid.raw, 16);
		memcpy(addr.dst, fz.lo_gid.raw, 16);
		if (len >= SHCA_BTH_LEN &&
		    shca_bth_dqpn((struct shca_bth *)pkt) == SHCA_QPN_MULTICAST)
			memcpy(addr.dst, fz.mgid.raw, 16);
		addr.src_port = fz.port;
	} else {
		c = from == FUZZ_NET_FROM_OTHER ? fz.other : fz.conn;
		shca_net_conn_addr(c, &addr);
	}
	shca_net_rx(c, &addr, pkt, len);
	/* as the engine does after a batch: write the answers */
	if (c)
		shca_net_flush(c);
	free(pkt);
}

/*
 * The engine thread is where packets arrive (conn.c hands them up from
 * its epoll loop, between timers and doorbells): each packet is handed to
 * it through an eventfd it watches, and we wait until it has been taken.
 * The doorbell's work (QPs the packet sent to the error state) is then
 * done at once, as the engine would do it next.
 */
static struct {
	int efd;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	uint8_t sel;
	const uint8_t *data;
	size_t len;
	bool done;
} job = { .efd = -1, .lock = PTHREAD_MUTEX_INITIALIZER,
	  .cond = PTHREAD_COND_INITIALIZER };

static void job_event(int fd, uint32_t events, void *arg)
{
	uint64_t v;

	(void)events;
	(void)arg;
	if (read(fd, &v, sizeof(v)) != sizeof(v))
		return;
	receive(job.sel, job.data, job.len);
	shca_doorbell();
	pthread_mutex_lock(&job.lock);
	job.done = true;
	pthread_cond_signal(&job.cond);
	pthread_mutex_unlock(&job.lock);
}

static void receive_in_engine(uint8_t sel, const uint8_t *data, size_t len)
{
	uint64_t one = 1;

	job.sel = sel;
	job.data = data;
	job.len = len;
	job.done = false;
	CHECK(write(job.efd, &one, sizeof(one)) == sizeof(one));
	pthread_mutex_lock(&job.lock);
	while (!job.done)
		pthread_cond_wait(&job.cond, &job.lock);
	pthread_mutex_unlock(&job.lock);
}

/* ------------------------------------------------------------------ */
/* Setup                                                               */

static void gid_v4(union ibv_gid *gid, uint32_t addr)
{
	struct in6_addr a;

	shca_ipv4_to_mapped(&a, htonl(addr));
	memcpy(gid->raw, &a, 16);
}

static void setup(void)
{
	struct ibv_srq_init_attr sattr;
	struct ibv_device **list;
	int n, i;

	fz.verbose = getenv("FUZZ_NET_RX_VERBOSE") != NULL;
	list = ibv_get_device_list(&n);
	CHECK(list);
	for (i = 0; i < n; i++)
		if (!strcmp(ibv_get_device_name(list[i]), "softhca_lo"))
			break;
	if (i == n)
		fuzz_skip_env("fuzz_net_rx", "no softhca_lo device (the "
			      "loopback interface has no address)");
	fz.ctx = ibv_open_device(list[i]);
	CHECK(fz.ctx);
	ibv_free_device_list(list);
	CHECK(!fcntl(fz.ctx->async_fd, F_SETFL,
		     fcntl(fz.ctx->async_fd, F_GETFL) | O_NONBLOCK));
	CHECK(!ibv_query_gid(fz.ctx, 1, 0, &fz.lo_gid));
	fz.pd = ibv_alloc_pd(fz.ctx);
	CHECK(fz.pd);

	/* the iova's offset in a page is the address's: 0 */
	fz.mem = aligned_alloc(CANARY_LEN, FUZZ_NET_MR_LEN + 2 * CANARY_LEN);
	CHECK(fz.mem);
	memset(fz.mem, CANARY, FUZZ_NET_MR_LEN + 2 * CANARY_LEN);
	fz.buf = fz.mem + CANARY_LEN;
	memset(fz.buf, 0, FUZZ_NET_MR_LEN);
	fz.mr = ibv_reg_mr_iova(fz.pd, fz.buf, FUZZ_NET_MR_LEN, FUZZ_NET_IOVA,
				IBV_ACCESS_LOCAL_WRITE |
				IBV_ACCESS_REMOTE_WRITE |
				IBV_ACCESS_REMOTE_READ |
				IBV_ACCESS_REMOTE_ATOMIC |
				SHCA_ACCESS_FLUSH_GLOBAL);
	CHECK(fz.mr);
	fz.cq = ibv_create_cq(fz.ctx, CQ_DEPTH, NULL, NULL, 0);
	CHECK(fz.cq);
	memset(&sattr, 0, sizeof(sattr));
	sattr.attr.max_wr = RQ_DEPTH;
	sattr.attr.max_sge = 1;
	fz.srq = ibv_create_srq(fz.pd, &sattr);
	CHECK(fz.srq);

	open_listeners();
	gid_v4(&fz.peer_gid, 0x7f000002);
	gid_v4(&fz.other_gid, 0x7f000003);
	gid_v4(&fz.mgid, FUZZ_NET_MCAST_V4);
	fz.conn = shca_net_conn_get(fz.lo_gid.raw, fz.peer_gid.raw, fz.port,
				    0);
	fz.other = shca_net_conn_get(fz.lo_gid.raw, fz.other_gid.raw,
				     fz.port, 0);
	CHECK(fz.conn && fz.other);

	fz.rc = create_qp(IBV_QPT_RC, NULL);
	fz.uc = create_qp(IBV_QPT_UC, fz.srq);
	fz.ud = create_qp(IBV_QPT_UD, NULL);
	{
		struct ibv_xrcd_init_attr xa = {
			.comp_mask = IBV_XRCD_INIT_ATTR_FD |
				     IBV_XRCD_INIT_ATTR_OFLAGS,
			.fd = -1,
			.oflags = O_CREAT,
		};
		struct ibv_srq_init_attr_ex xs;
		struct ibv_qp_init_attr_ex xq;

		fz.xrcd = ibv_open_xrcd(fz.ctx, &xa);
		CHECK(fz.xrcd);
		memset(&xs, 0, sizeof(xs));
		xs.attr.max_wr = RQ_DEPTH;
		xs.attr.max_sge = 1;
		xs.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD |
			       IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ;
		xs.srq_type = IBV_SRQT_XRC;
		xs.pd = fz.pd;
		xs.xrcd = fz.xrcd;
		xs.cq = fz.cq;
		fz.xsrq = ibv_create_srq_ex(fz.ctx, &xs);
		CHECK(fz.xsrq);
		memset(&xq, 0, sizeof(xq));
		xq.qp_type = IBV_QPT_XRC_RECV;
		xq.comp_mask = IBV_QP_INIT_ATTR_XRCD;
		xq.xrcd = fz.xrcd;
		fz.xrecv = ibv_create_qp_ex(fz.ctx, &xq);
		CHECK(fz.xrecv);
	}
	/* the group's datagrams reach the UD QP (dest QPN 0xffffff) */
	CHECK(!ibv_attach_mcast(fz.ud, &fz.mgid, 0));
	fz.ready = true;
	settle(true);
	/* the engine runs (RTR started the net path): packets go there */
	job.efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	CHECK(job.efd >= 0);
	CHECK(!shca_engine_watch(job.efd, job_event, NULL));
	/* 127.0.0.2 must not count as this host's: the net path it is */
	CHECK(to_sqp(fz.rc)->net.on && to_sqp(fz.rc)->net.conn == fz.conn);
	CHECK(to_sqp(fz.uc)->net.on && to_sqp(fz.uc)->net.conn == fz.conn);
	CHECK(to_sqp(fz.xrecv)->net.on &&
	      to_sqp(fz.xrecv)->net.conn == fz.conn);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	if (!fz.ready)
		setup();
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	unsigned int rec = 0;

	if (!fz.ready)
		setup();
	else
		settle(true);
	/* the key limit's scores too (net/keyguard.h) */
	shca_keyguard_reset();
	while (size >= FUZZ_NET_REC_HDR) {
		uint8_t sel = data[0];
		size_t len = (size_t)data[1] | (size_t)data[2] << 8;

		data += FUZZ_NET_REC_HDR;
		size -= FUZZ_NET_REC_HDR;
		if (len > size)
			len = size;
		receive_in_engine(sel, data, len);
		data += len;
		size -= len;
		settle(false);
		if (fz.hooks.after)
			fz.hooks.after(rec++, fz.hooks.arg);
	}
	return 0;
}

/* ------------------------------------------------------------------ */
/* For the oracle tests (fuzz.h)                                       */

void fuzz_net_rx_set_hooks(const struct fuzz_net_rx_hooks *h)
{
	if (h)
		fz.hooks = *h;
	else
		memset(&fz.hooks, 0, sizeof(fz.hooks));
}

unsigned char *fuzz_net_rx_mr(void)
{
	return fz.buf;
}

const struct shca_stat_block *fuzz_net_rx_rc_stats(void)
{
	return &to_sqp(fz.rc)->shm->stats;
}

void fuzz_net_rx_drain(void)
{
	drain();
}
