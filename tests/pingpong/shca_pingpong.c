// SPDX-License-Identifier: MIT
/*
 * shca_pingpong: a ping-pong whose every received byte is checked (pp.h).
 *
 *   shca_pingpong [options]            the server: waits for one client
 *   shca_pingpong [options] HOST       the client, toward HOST's server
 *
 * Both sides take the same options (the server refuses a client whose
 * transport, size, iterations or QP count differ).  The flow is that of
 * Debian's ibv_*_pingpong: each side posts its receives, the two exchange
 * GID, QP numbers and PSNs over TCP, move their QPs to RTS, say so over
 * TCP, then the client sends message 0, the server answers with its own
 * message 0, and so on for -n iterations; each side waits for its send's
 * completion before the next one.  At the end the two say over TCP that
 * they are done, so that no side destroys a QP its peer still needs (an
 * RC ACK still on its way).
 *
 * Exit status: 0 when every check passed, 1 on any failure (a wrong byte,
 * a completion in error, a verb that failed), 2 on a usage error.  The
 * last line of a side that passed starts with "shca_pingpong: ok".
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <arpa/inet.h>
#include <netdb.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "pp.h"

static const char *const type_names[] = { "rc", "uc", "ud", "srq" };
static const char *role = "server";

/* Where the loop is, for a side stopped by SIGTERM (a timeout). */
static volatile uint32_t at_iter;
static volatile const char *at_what = "setting up";

void pp_fail(const char *fmt, ...)
{
	va_list ap;

	fflush(stdout);
	fprintf(stderr, "shca_pingpong (%s): FAIL: ", role);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

static void put(const char *s)
{
	ssize_t r = write(2, s, strlen(s));

	(void)r;
}

static void on_term(int sig)
{
	char num[12], *p = num + sizeof(num) - 1;
	uint32_t v = at_iter;

	*p = 0;
	do
		*--p = (char)('0' + v % 10);
	while ((v /= 10));
	put("shca_pingpong (");
	put(role);
	put("): stopped by a signal at iteration ");
	put(p);
	put(", waiting for ");
	put((const char *)at_what);
	put("\n");
	signal(sig, SIG_DFL);
	raise(sig);
}

static void usage(const char *argv0)
{
	fprintf(stderr,
		"usage: %s [options] [HOST]\n"
		"  -p PORT   TCP port of the exchange (18515; server: 0, any,\n"
		"            which it prints: 'listening on TCP port N')\n"
		"  -d DEV    device (the first)\n"
		"  -i PORT   device port (1)\n"
		"  -g IDX    GID index (0)\n"
		"  -T TYPE   rc, uc, ud or srq (rc)\n"
		"  -s SIZE   message size in bytes (4096)\n"
		"  -n ITERS  round trips (1000)\n"
		"  -m MTU    path MTU, 256 to 4096 (the port's active MTU)\n"
		"  -q NQP    srq: QPs sharing the SRQ (4)\n"
		"  -r DEPTH  receives posted per queue (4)\n"
		"  -e        wait for completion events\n"
		"  -N        post with the ibv_wr_* API\n"
		"  -t        poll an ibv_cq_ex, check completion timestamps\n"
		"  -S        print softhca stat of this process at the end\n",
		argv0);
	exit(2);
}

static enum ibv_mtu mtu_of(long v)
{
	switch (v) {
	case 256: return IBV_MTU_256;
	case 512: return IBV_MTU_512;
	case 1024: return IBV_MTU_1024;
	case 2048: return IBV_MTU_2048;
	case 4096: return IBV_MTU_4096;
	default: return 0;
	}
}

static long num(const char *s, long lo, long hi, const char *argv0)
{
	char *end;
	long v = strtol(s, &end, 0);

	if (*s == 0 || *end || v < lo || v > hi)
		usage(argv0);
	return v;
}

static void parse(int argc, char **argv, struct pp_opts *o)
{
	int ch, t;

	*o = (struct pp_opts){ .ib_port = 1, .tcp_port = "18515",
			       .type = PP_RC, .size = 4096, .iters = 1000,
			       .nqp = 0, .rx_depth = 4 };
	while ((ch = getopt(argc, argv, "p:d:i:g:T:s:n:m:q:r:eNtS")) != -1) {
		switch (ch) {
		case 'p': o->tcp_port = optarg; break;
		case 'd': o->dev = optarg; break;
		case 'i': o->ib_port = (int)num(optarg, 1, 255, argv[0]); break;
		case 'g': o->gid_index = (int)num(optarg, 0, 255, argv[0]);
			break;
		case 'T':
			for (t = 0; t < 4 && strcmp(optarg, type_names[t]); t++)
				;
			if (t == 4)
				usage(argv[0]);
			o->type = (enum pp_type)t;
			break;
		case 's': o->size = (uint32_t)num(optarg, 1, PP_MAX_SIZE,
						  argv[0]);
			break;
		case 'n': o->iters = (uint32_t)num(optarg, 1, 1L << 30,
						   argv[0]);
			break;
		case 'm':
			o->mtu = mtu_of(num(optarg, 256, 4096, argv[0]));
			if (!o->mtu)
				usage(argv[0]);
			break;
		case 'q': o->nqp = (int)num(optarg, 1, PP_MAX_QP, argv[0]);
			break;
		case 'r': o->rx_depth = (int)num(optarg, 1, 64, argv[0]);
			break;
		case 'e': o->events = true; break;
		case 'N': o->new_send = true; break;
		case 't': o->timestamps = true; break;
		case 'S': o->stat = true; break;
		default: usage(argv[0]);
		}
	}
	if (optind + 1 < argc)
		usage(argv[0]);
	if (optind < argc)
		o->server = argv[optind];
	if (!o->nqp)
		o->nqp = o->type == PP_SRQ ? 4 : 1;
	else if (o->type != PP_SRQ && o->nqp != 1)
		usage(argv[0]);
#ifndef SOFTHCA_TOOL
	if (o->stat) {
		fprintf(stderr, "-S: built without the softhca tool\n");
		exit(2);
	}
#endif
}

/* ------------------------------------------------------------------ */
/* The TCP exchange                                                    */

struct wire {
	char magic[8];
	uint32_t type, size, iters, nqp;
	uint8_t gid[16];
	uint32_t qpn[PP_MAX_QP], psn[PP_MAX_QP];
};

static const char MAGIC[8] = "shcapp1";

static int xfer(int fd, void *p, size_t len, bool out)
{
	uint8_t *b = p;

	while (len) {
		ssize_t n = out ? send(fd, b, len, MSG_NOSIGNAL) :
				  recv(fd, b, len, 0);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			pp_fail("the TCP exchange: %s",
				n ? strerror(errno) : "the peer hung up");
			return -1;
		}
		b += n;
		len -= (size_t)n;
	}
	return 0;
}

/* The server says where it listens: with -p 0, the kernel chose. */
static void print_port(int lfd)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	unsigned int port = 0;

	if (getsockname(lfd, (struct sockaddr *)&ss, &len))
		return;
	if (ss.ss_family == AF_INET)
		port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
	else if (ss.ss_family == AF_INET6)
		port = ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
	printf("listening on TCP port %u\n", port);
	fflush(stdout);
}

static int tcp_open(const struct pp_opts *o)
{
	struct addrinfo hint = { .ai_socktype = SOCK_STREAM }, *res, *a;
	int fd = -1, lfd, one = 1, e;

	if (!o->server)
		hint.ai_flags = AI_PASSIVE;
	e = getaddrinfo(o->server, o->tcp_port, &hint, &res);
	if (e) {
		pp_fail("getaddrinfo %s port %s: %s",
			o->server ? o->server : "(any)", o->tcp_port,
			gai_strerror(e));
		return -1;
	}
	for (a = res; a && fd < 0; a = a->ai_next) {
		fd = socket(a->ai_family, a->ai_socktype, a->ai_protocol);
		if (fd < 0)
			continue;
		if (o->server ? connect(fd, a->ai_addr, a->ai_addrlen) :
				(setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one,
					    sizeof(one)) ||
				 bind(fd, a->ai_addr, a->ai_addrlen) ||
				 listen(fd, 1))) {
			e = errno;
			close(fd);
			fd = -1;
		}
	}
	freeaddrinfo(res);
	if (fd < 0) {
		pp_fail("%s port %s: %s",
			o->server ? "connect to" : "listen on", o->tcp_port,
			strerror(e));
		return -1;
	}
	if (o->server)
		return fd;
	lfd = fd;
	print_port(lfd);
	fd = accept(lfd, NULL, NULL);
	if (fd < 0)
		pp_fail("accept: %s", strerror(errno));
	close(lfd);
	return fd;
}

/* Send ours, read theirs, and check it (it came from another process). */
static int exchange(int fd, struct pp_ctx *c)
{
	const struct pp_opts *o = c->o;
	struct wire m = { 0 }, r;
	int i;

	memcpy(m.magic, MAGIC, sizeof(MAGIC));
	m.type = htonl(o->type);
	m.size = htonl(o->size);
	m.iters = htonl(o->iters);
	m.nqp = htonl((uint32_t)o->nqp);
	memcpy(m.gid, c->self.gid.raw, 16);
	for (i = 0; i < o->nqp; i++) {
		m.qpn[i] = htonl(c->self.qpn[i]);
		m.psn[i] = htonl(c->self.psn[i]);
	}
	if (xfer(fd, &m, sizeof(m), true) || xfer(fd, &r, sizeof(r), false))
		return -1;
	if (memcmp(r.magic, MAGIC, sizeof(MAGIC))) {
		pp_fail("the peer is not a shca_pingpong of this version");
		return -1;
	}
	if (ntohl(r.type) != o->type || ntohl(r.size) != o->size ||
	    ntohl(r.iters) != o->iters || ntohl(r.nqp) != (uint32_t)o->nqp) {
		pp_fail("the peer runs with other options: %s, %u bytes, %u "
			"iters, %u QPs",
			ntohl(r.type) < 4 ? type_names[ntohl(r.type)] : "?",
			ntohl(r.size), ntohl(r.iters), ntohl(r.nqp));
		return -1;
	}
	memcpy(c->peer.gid.raw, r.gid, 16);
	for (i = 0; i < o->nqp; i++) {
		c->peer.qpn[i] = ntohl(r.qpn[i]);
		c->peer.psn[i] = ntohl(r.psn[i]);
		if (c->peer.qpn[i] > 0xffffff || c->peer.psn[i] > 0xffffff) {
			pp_fail("the peer's QPN or PSN is out of range");
			return -1;
		}
	}
	return 0;
}

/* Both sides write tag and a count, then read the peer's. */
static int barrier(int fd, char tag, uint64_t mine, uint64_t *theirs)
{
	uint8_t m[9], r[9];
	int i;

	m[0] = (uint8_t)tag;
	for (i = 0; i < 8; i++)
		m[1 + i] = (uint8_t)(mine >> (56 - 8 * i));
	if (xfer(fd, m, sizeof(m), true) || xfer(fd, r, sizeof(r), false))
		return -1;
	if (r[0] != (uint8_t)tag) {
		pp_fail("the TCP exchange: '%c' where '%c' was expected",
			r[0], tag);
		return -1;
	}
	*theirs = 0;
	for (i = 0; i < 8; i++)
		*theirs = *theirs << 8 | r[1 + i];
	return 0;
}

/* ------------------------------------------------------------------ */
/* The loop                                                            */

struct loop {
	struct pp_ctx *c;
	uint32_t sends_posted, sends_done, recvs_done;
	uint32_t next[PP_MAX_QP];	/* per receive queue: its next slot */
	uint64_t start, mark[2];	/* -t: the clock before send i */
	uint64_t last_ts, nts;
};

/*
 * -t: a completion's timestamp lies between the device clock read before
 * the work that caused it could start (lo) and after it was polled (hi),
 * and the timestamps of one CQ do not go back.
 */
static int check_ts(struct loop *l, const struct pp_wc *w, uint64_t lo,
		    uint64_t hi, const char *what, uint32_t it)
{
	if (w->ts < lo || w->ts > hi || w->ts < l->last_ts) {
		pp_fail("iteration %u: the %s completion's timestamp %" PRIu64
			" is not within [%" PRIu64 ", %" PRIu64 "] or before "
			"the one polled before it (%" PRIu64 ")", it, what,
			w->ts, lo, hi, l->last_ts);
		return -1;
	}
	l->last_ts = w->ts;
	l->nts++;
	return 0;
}

static int on_send(struct loop *l, const struct pp_wc *w, uint64_t now)
{
	uint64_t it = w->wr_id & ~PP_SEND_TAG;

	if (it != l->sends_done || it >= l->sends_posted) {
		pp_fail("a send completion for iteration %" PRIu64 ", where "
			"%u was expected", it, l->sends_done);
		return -1;
	}
	if (w->opcode != IBV_WC_SEND) {
		pp_fail("iteration %" PRIu64 ": send completion opcode %d, "
			"not IBV_WC_SEND", it, w->opcode);
		return -1;
	}
	if (l->c->o->timestamps &&
	    check_ts(l, w, l->mark[it & 1], now, "send", (uint32_t)it))
		return -1;
	l->sends_done++;
	return 0;
}

static int on_recv(struct loop *l, const struct pp_wc *w, uint64_t now)
{
	struct pp_ctx *c = l->c;
	const struct pp_opts *o = c->o;
	uint32_t it = l->recvs_done, q = it % (uint32_t)o->nqp;
	uint32_t rq = c->srq ? 0 : q;
	uint32_t depth = c->srq ? c->nslots : (uint32_t)o->rx_depth;
	uint32_t slot = rq * depth + l->next[rq];
	const char *bad = NULL;

	if (w->wr_id != slot)
		bad = "not the receive posted first (wr_id)";
	else if (w->opcode != IBV_WC_RECV)
		bad = "opcode not IBV_WC_RECV";
	else if (w->byte_len != o->size + c->grh)
		bad = "byte_len not the message's";
	else if (w->qp_num != c->qp[q]->qp_num)
		bad = "qp_num not the QP the message was sent to";
	else if (w->wc_flags & IBV_WC_WITH_IMM)
		bad = "IBV_WC_WITH_IMM without immediate data";
	else if (c->grh && !(w->wc_flags & IBV_WC_GRH))
		bad = "UD without IBV_WC_GRH";
	else if (c->grh && w->src_qp != c->peer.qpn[q])
		bad = "src_qp not the sender's QP";
	if (bad) {
		pp_fail("iteration %u: receive completion: %s (wr_id %" PRIu64
			", slot %u expected; byte_len %u, qp_num 0x%x, src_qp "
			"0x%x, wc_flags 0x%x)", it, bad, w->wr_id, slot,
			w->byte_len, w->qp_num, w->src_qp, w->wc_flags);
		return -1;
	}
	/* the peer sent message it once it had ours: the client's it, or
	 * the server's it - 1 */
	if (o->timestamps &&
	    check_ts(l, w, c->side ? l->mark[it & 1] :
			   it ? l->mark[(it - 1) & 1] : l->start,
		     now, "receive", it))
		return -1;
	if (pp_check_slot(c, slot, it) || pp_post_recv(c, slot))
		return -1;
	l->next[rq] = (l->next[rq] + 1) % depth;
	l->recvs_done++;
	return 0;
}

static int wait_one(struct loop *l)
{
	struct pp_wc w;
	uint64_t now;

	if (pp_poll(l->c, &w))
		return -1;
	now = l->c->o->timestamps ? pp_clock(l->c) : 0;
	if (w.status != IBV_WC_SUCCESS) {
		pp_fail("a completion with status '%s' (%d) for %s %" PRIu64,
			ibv_wc_status_str(w.status), w.status,
			w.wr_id & PP_SEND_TAG ? "the send of iteration" :
						"receive slot",
			w.wr_id & ~PP_SEND_TAG);
		return -1;
	}
	return w.wr_id & PP_SEND_TAG ? on_send(l, &w, now) :
				       on_recv(l, &w, now);
}

static int run(struct loop *l)
{
	struct pp_ctx *c = l->c;
	bool client = c->side;
	uint32_t i;

	for (i = 0; i < c->o->iters; i++) {
		at_iter = i;
		at_what = "the client's message";
		while (!client && l->recvs_done <= i)
			if (wait_one(l))
				return -1;
		pp_fill_send(c, i);
		if (c->o->timestamps)
			l->mark[i & 1] = pp_clock(c);
		if (pp_post_send(c, i))
			return -1;
		l->sends_posted++;
		at_what = client ? "the server's answer or the send's "
				   "completion" : "the send's completion";
		while (l->sends_done <= i || (client && l->recvs_done <= i))
			if (wait_one(l))
				return -1;
		if (pp_check_send(c, i))
			return -1;
	}
	return 0;
}

#ifdef SOFTHCA_TOOL
/* softhca's counters of this process (its QPs still exist). */
static void print_stat(void)
{
	char cmd[1024], line[4096];
	FILE *f;

	snprintf(cmd, sizeof(cmd), "'%s' stat --pid %d", SOFTHCA_TOOL,
		 (int)getpid());
	fflush(stdout);
	f = popen(cmd, "r");
	if (!f) {
		printf("stat: popen failed: %s\n", strerror(errno));
		return;
	}
	while (fgets(line, sizeof(line), f))
		printf("stat: %s", line);
	pclose(f);
}
#endif

int main(int argc, char **argv)
{
	struct pp_opts o;
	struct pp_ctx c = { .tcp_fd = -1 };
	struct loop l = { .c = &c };
	uint64_t peer_checked = 0, dummy;
	char g1[64], g2[64];
	int fd = -1, i, ret = 1;

	parse(argc, argv, &o);
	c.o = &o;
	c.side = o.server ? 1 : 0;
	role = o.server ? "client" : "server";
	setvbuf(stdout, NULL, _IOLBF, 0);
	signal(SIGTERM, on_term);
	signal(SIGINT, on_term);

	if (pp_open(&c) || pp_pattern_init(&c))
		goto out;
	for (i = 0; i < (int)c.nslots; i++)
		if (pp_post_recv(&c, (uint32_t)i))
			goto out;
	if (o.timestamps && !(l.start = pp_clock(&c)))
		goto out;
	at_what = o.server ? "the server (TCP)" : "a client (TCP)";
	fd = tcp_open(&o);
	c.tcp_fd = fd;
	if (fd < 0 || exchange(fd, &c) || pp_connect(&c))
		goto out;
	for (i = 0; i < o.nqp; i++) {
		printf("  local address:  QPN 0x%06x, PSN 0x%06x, GID %s\n",
		       c.self.qpn[i], c.self.psn[i],
		       pp_gid_str(&c.self.gid, g1, sizeof(g1)));
		printf("  remote address: QPN 0x%06x, PSN 0x%06x, GID %s\n",
		       c.peer.qpn[i], c.peer.psn[i],
		       pp_gid_str(&c.peer.gid, g2, sizeof(g2)));
	}
	at_what = "the peer to be ready (TCP)";
	if (barrier(fd, 'R', 0, &dummy) || run(&l))
		goto out;
	at_iter = o.iters;
	at_what = "the peer to be done (TCP)";
	if (barrier(fd, 'D', c.checked, &peer_checked))
		goto out;
	if (peer_checked != (uint64_t)o.iters * o.size) {
		pp_fail("the peer checked %" PRIu64 " bytes of ours, not %"
			PRIu64, peer_checked, (uint64_t)o.iters * o.size);
		goto out;
	}
	if (o.events)
		printf("events: %" PRIu64 " CQ events\n", c.nevents);
	if (o.timestamps)
		printf("timestamps: %" PRIu64 " completions, each between the "
		       "device clock before its work and after its poll, "
		       "none before the one polled before it\n", l.nts);
#ifdef SOFTHCA_TOOL
	if (o.stat)
		print_stat();
#endif
	printf("shca_pingpong: ok: %s%s%s%s, %u iters of %u bytes: every "
	       "byte of the %u messages received checked (%" PRIu64
	       " bytes) with the sentinels around them; the peer checked "
	       "all of ours\n", type_names[o.type], o.events ? " -e" : "",
	       o.new_send ? " -N" : "", o.timestamps ? " -t" : "", o.iters,
	       o.size, l.recvs_done, c.checked);
	ret = 0;
out:
	if (fd >= 0)
		close(fd);
	pp_close(&c);
	return ret;
}
