// SPDX-License-Identifier: MIT
/*
 * Traffic that may be lost: UC and UD between two processes, run under
 * SOFTHCA_FAULTS by tests/netns/test_net_lossy.sh (two namespaces, the
 * net path).  UC and UD may lose a message; they must never corrupt one,
 * and UC never delivers one twice or out of order: its PSNs say which
 * packet comes next, and a packet behind the expected PSN (duplicated, or
 * overtaken by later ones) is dropped.  (rxe is laxer there: it starts a
 * new UC message on any FIRST or ONLY packet, whatever its PSN.)  A UD
 * datagram duplicated on the way is a new datagram to the receiver (UD
 * has no PSN check on receive, as in rxe): it may be delivered twice,
 * but intact.
 *
 * Each case: the sender (namespace A) sends n messages of one opcode and
 * size, message s carrying s: a header (magic, s, size, a checksum of the
 * whole) and bytes derived from s (a message shorter than the header: its
 * first byte is 1 + s, the rest derived from s), immediate data IMM_BASE
 * + s.  The receiver (namespace B) posts 2n + MARKERS receives, each into
 * its own slot, or (RDMA WRITE) offers a slot per message in its MR, and
 * checks every completion: status, opcode, byte_len, qp_num, src_qp, the
 * flags, the immediate data, the content, the GRH (UD), that receive WQEs
 * complete in the order posted, that nothing was written outside a
 * message's bytes.  A WRITE without immediate is seen only in memory:
 * every path-MTU packet of a slot is either untouched or exactly right
 * (packets of a lost message may have landed: that is allowed).
 *
 * How long to wait: the receiver cannot know how many messages will come.
 * After its n messages the sender sends markers (messages n, n+1, ...,
 * one every 10 ms, at most MARKERS) until the receiver says it is done:
 * a marker that arrives was sent after every message, so what did not
 * come before it (plus the fault delay) was lost.  Without any marker the
 * receiver ends a second after the sender finished and nothing came.
 * Then its QP goes to the error state (nothing lands after that), the
 * remaining receives complete with IBV_WC_WR_FLUSH_ERR, every slot is
 * checked, and one line says what arrived ("  result ...").
 *
 * Expectations: without faults (no SOFTHCA_FAULTS, or one process host:
 * the same-host path takes no faults) every message arrives exactly once
 * and whole.  With faults, at least one message of a case arrives when
 * the fault rates make losing all of them unlikely (below 1e-6, counted
 * conservatively; not with resets), and the sender's faults_injected
 * (`softhca stat`) is non-zero when enough packets were rolled for.
 *
 * That the faults happened is also seen from outside softhca's counters
 * (two namespaces only): both processes write a SOFTHCA_PCAP trace, read
 * here by hand (pcap_read.h).  The sender's holds each packet once as it
 * was sent, the receiver's each copy as it arrived: per destination QP,
 * a PSN that never arrived although a later one did was lost (drop), a
 * PSN that arrived twice was duplicated (dup), a PSN that arrived after a
 * later one was held back (reorder, delay); and the kernel of namespace A
 * opened TCP connections again (reset; its /proc/net/snmp).  Each is
 * asserted when at least 10 such faults are expected, and none of them
 * without faults.
 * No assertion depends on how long anything took.
 */
#include <arpa/inet.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "ep.h"
#include "pcap_read.h"

#define HDR_LEN		16		/* magic, seq, size, csum */
#define MAGIC		0x4c4f5353u	/* "LOSS" */
#define IMM_BASE	0x1a550000u
#define GRH		40
#define MARKERS		64		/* probes after the messages */
#define GUARD		64		/* zero bytes after each slot */
#define QKEY		0x11111111
#define SIZE_MTU	0xffffffffu	/* UD: the port's MTU */
#define UD_MAX		4096		/* the largest UD MTU */
#define SEND_WINDOW	64

/* ------------------------------------------------------------------ */
/* The faults asked for (SOFTHCA_FAULTS, read as conn.c reads it)      */

static struct {
	double drop, dup, delay, reorder, reset;
	unsigned int delay_ms;
	bool asked;		/* SOFTHCA_FAULTS names some */
	bool on;		/* they apply: two hosts, some P > 0 */
} fl;

static void faults_read(void)
{
	const char *env = getenv("SOFTHCA_FAULTS");
	char *s, *tok, *save = NULL;

	memset(&fl, 0, sizeof(fl));
	fl.delay_ms = 5;
	if (!env || !*env)
		return;
	s = strdup(env);
	ASSERT_NOT_NULL(s);
	for (tok = strtok_r(s, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(tok, '=');
		double v;

		if (!eq)
			continue;
		*eq = 0;
		v = strtod(eq + 1, NULL);
		if (!strcmp(tok, "drop"))
			fl.drop = v;
		else if (!strcmp(tok, "dup"))
			fl.dup = v;
		else if (!strcmp(tok, "delay"))
			fl.delay = v;
		else if (!strcmp(tok, "delay_ms"))
			fl.delay_ms = (unsigned int)v;
		else if (!strcmp(tok, "reorder"))
			fl.reorder = v;
		else if (!strcmp(tok, "reset"))
			fl.reset = v;
	}
	free(s);
	/* the same-host path takes no faults */
	fl.asked = fl.drop > 0 || fl.dup > 0 || fl.delay > 0 ||
		   fl.reorder > 0 || fl.reset > 0;
	fl.on = fl.asked && ep_netns();
}

/* Each packet sent rolls for these (conn.c): UD datagrams only for drop
 * and dup. */
static double roll_sum(enum ibv_qp_type type)
{
	if (type == IBV_QPT_UD)
		return fl.drop + fl.dup;
	return fl.drop + fl.dup + fl.delay + fl.reorder + fl.reset;
}

static double now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* ------------------------------------------------------------------ */
/* Cases and their geometry                                            */

struct lcase {
	enum ibv_qp_type type;
	enum ibv_wr_opcode op;
	uint32_t size;
	uint32_t n;		/* messages; 0 ends the list */
	uint32_t mtu;		/* path MTU (UC packets), bytes */
};

static bool op_recv(enum ibv_wr_opcode op)
{
	return op != IBV_WR_RDMA_WRITE;
}

static bool op_imm(enum ibv_wr_opcode op)
{
	return op == IBV_WR_SEND_WITH_IMM || op == IBV_WR_RDMA_WRITE_WITH_IMM;
}

static bool op_write(enum ibv_wr_opcode op)
{
	return op == IBV_WR_RDMA_WRITE || op == IBV_WR_RDMA_WRITE_WITH_IMM;
}

static const char *op_name(enum ibv_wr_opcode op)
{
	switch (op) {
	case IBV_WR_SEND:
		return "send";
	case IBV_WR_SEND_WITH_IMM:
		return "send_imm";
	case IBV_WR_RDMA_WRITE:
		return "write";
	case IBV_WR_RDMA_WRITE_WITH_IMM:
		return "write_imm";
	default:
		return "?";
	}
}

static uint32_t round64(uint32_t x)
{
	return (x + 63) & ~63u;
}

static uint32_t grh_len(const struct lcase *c)
{
	return c->type == IBV_QPT_UD ? GRH : 0;
}

/* The sender's copy of message s is at s * src_stride; the receiver's
 * receive j (or, WRITE, message s's slot) at j * dst_stride. */
static uint32_t src_stride(uint32_t size)
{
	return round64(size) + GUARD;
}

static uint32_t dst_stride(const struct lcase *c, uint32_t size)
{
	return round64(size + grh_len(c)) + GUARD;
}

static uint32_t nrecv(const struct lcase *c)
{
	return op_recv(c->op) ? 2 * c->n + MARKERS : 0;
}

static uint32_t nslots(const struct lcase *c)
{
	return c->n + MARKERS;
}

static uint32_t npkts(const struct lcase *c)
{
	if (c->type == IBV_QPT_UD || c->size <= c->mtu)
		return 1;
	return (c->size + c->mtu - 1) / c->mtu;
}

static void case_opts(const struct lcase *c, struct ep_opts *o)
{
	/* the UD MTU is known once the endpoint is open: room for the
	 * largest */
	uint32_t size = c->size == SIZE_MTU ? UD_MAX : c->size;
	size_t src = (size_t)nslots(c) * src_stride(size);
	size_t dst = (size_t)(op_recv(c->op) && !op_write(c->op) ?
				      nrecv(c) : nslots(c)) *
		     dst_stride(c, size);

	ep_default_opts(o, c->type);
	o->buf_size = (src > dst ? src : dst) + 4096;
	o->max_send_wr = SEND_WINDOW;
	o->max_recv_wr = nrecv(c) ? (int)nrecv(c) : 1;
	o->max_sge = 1;
	o->max_inline = 0;
	o->cqe = (int)nrecv(c) + SEND_WINDOW;
}

/* ------------------------------------------------------------------ */
/* Messages                                                            */

/* Byte i of message seq: a hash of both, so that no run of bytes of one
 * message or offset repeats at another (a misplaced packet shows whose
 * it is). */
static uint8_t pat(uint32_t seq, uint32_t i)
{
	uint32_t x = seq * 0x9e3779b1u ^ (i >> 2) * 0x85ebca6bu;

	x ^= x >> 15;
	x *= 0x2c1b3c6du;
	x ^= x >> 12;
	x *= 0x297a2d39u;
	x ^= x >> 15;
	return (uint8_t)(x >> (8 * (i & 3)));
}

/* FNV-1a of the message, its checksum field (bytes 12..15) taken as 0 */
static uint32_t msg_csum(const uint8_t *p, uint32_t size)
{
	uint32_t h = 2166136261u, i;

	for (i = 0; i < size; i++) {
		h ^= i >= 12 && i < 16 ? 0 : p[i];
		h *= 16777619u;
	}
	return h;
}

static void make_msg(uint8_t *p, uint32_t seq, uint32_t size)
{
	uint32_t i, h[4];

	for (i = 0; i < size; i++)
		p[i] = pat(seq, i);
	if (size < HDR_LEN) {
		if (size)
			p[0] = (uint8_t)(1 + seq);	/* seq < 255 */
		return;
	}
	h[0] = htonl(MAGIC);
	h[1] = htonl(seq);
	h[2] = htonl(size);
	h[3] = 0;
	memcpy(p, h, HDR_LEN);
	h[3] = htonl(msg_csum(p, size));
	memcpy(p + 12, &h[3], 4);
}

/*
 * The message of size bytes at p (receive j): the number it says it is,
 * checked against its checksum and the whole expected content (want:
 * room for size bytes).  Fails the test when anything differs.
 */
static uint32_t check_msg(const struct lcase *c, const uint8_t *p,
			  uint32_t j, uint8_t *want)
{
	uint32_t seq, i, h[4];

	if (c->size < HDR_LEN) {
		if (!p[0] || p[0] - 1u >= nslots(c))
			harness_fail(__FILE__, __LINE__,
				     "receive %u: first byte 0x%02x names no "
				     "message (of %u)", j, p[0], nslots(c));
		seq = p[0] - 1u;
	} else {
		memcpy(h, p, HDR_LEN);
		seq = ntohl(h[1]);
		if (ntohl(h[0]) != MAGIC || ntohl(h[2]) != c->size ||
		    seq >= nslots(c))
			harness_fail(__FILE__, __LINE__,
				     "receive %u: header magic 0x%08x seq %u "
				     "size %u: corrupt (size %u, %u messages)",
				     j, ntohl(h[0]), seq, ntohl(h[2]), c->size,
				     nslots(c));
		if (ntohl(h[3]) != msg_csum(p, c->size))
			harness_fail(__FILE__, __LINE__,
				     "receive %u (message %u): checksum "
				     "0x%08x, the bytes give 0x%08x",
				     j, seq, ntohl(h[3]), msg_csum(p, c->size));
	}
	make_msg(want, seq, c->size);
	for (i = 0; i < c->size; i++)
		if (p[i] != want[i])
			harness_fail(__FILE__, __LINE__,
				     "receive %u (message %u, %u B): byte %u "
				     "is 0x%02x, expected 0x%02x", j, seq,
				     c->size, i, p[i], want[i]);
	return seq;
}

/* ------------------------------------------------------------------ */
/* softhca stat on this process                                        */

#ifdef SOFTHCA_TOOL
/* The first line of `softhca stat --pid <self>` that starts with prefix
 * (malloc'd, without its newline), or NULL. */
static char *stat_line(const char *prefix)
{
	char cmd[512], line[4096], *r = NULL;
	FILE *f;

	snprintf(cmd, sizeof(cmd), "%s stat --pid %d 2>/dev/null",
		 SOFTHCA_TOOL, (int)getpid());
	fflush(stdout);
	fflush(stderr);
	f = popen(cmd, "r");
	if (!f)
		return NULL;
	while (fgets(line, sizeof(line), f))
		if (!r && !strncmp(line, prefix, strlen(prefix))) {
			line[strcspn(line, "\n")] = 0;
			r = strdup(line);
		}
	pclose(f);
	return r;
}
#else
static char *stat_line(const char *prefix)
{
	(void)prefix;
	return NULL;
}
#endif

/* The counter key in a stat line (absent: 0). */
static uint64_t stat_get(const char *line, const char *key)
{
	size_t n = strlen(key);
	const char *p = line;

	while (p && (p = strstr(p, key))) {
		if (p > line && p[-1] == ' ' && p[n] == ' ')
			return strtoull(p + n + 1, NULL, 10);
		p += n;
	}
	return 0;
}

/* ------------------------------------------------------------------ */
/* Receiver                                                            */

struct rx {
	const struct lcase *c;
	struct ep *e;
	uint8_t *want;
	uint32_t *seen;		/* deliveries of each message */
	int64_t last;		/* the last message delivered (UC order) */
	uint32_t next_wr;	/* the receive the next completion is */
	uint32_t consumed;	/* receives completed successfully */
	uint32_t delivered, dups, markers, partial, flushed, stray;
	bool stopped;		/* the QP went to the error state */
	bool marker_seen;
	double t_marker, t_progress;
};

static void deliver(struct rx *r, uint32_t seq, bool ordered)
{
	const struct lcase *c = r->c;

	if (r->seen[seq]++) {
		if (c->type == IBV_QPT_UC)
			harness_fail(__FILE__, __LINE__,
				     "UC %s %u B: message %u delivered %u "
				     "times", op_name(c->op), c->size, seq,
				     r->seen[seq]);
		r->dups++;	/* UD: a duplicated datagram, intact */
		return;
	}
	if (ordered && c->type == IBV_QPT_UC && (int64_t)seq <= r->last)
		harness_fail(__FILE__, __LINE__,
			     "UC %s %u B: message %u delivered after message "
			     "%lld (out of order)", op_name(c->op), c->size,
			     seq, (long long)r->last);
	if (ordered)
		r->last = seq;
	if (seq >= c->n) {
		r->markers++;
		if (!r->marker_seen) {
			r->marker_seen = true;
			r->t_marker = now_s();
		}
	} else {
		r->delivered++;
	}
	r->t_progress = now_s();
}

enum slot_state { UNTOUCHED, COMPLETE, PARTIAL };

/* Diagnostics: whose packet the len bytes at p are (a message's packet
 * that landed in the wrong place?). */
static void whose(const struct lcase *c, const volatile uint8_t *p,
		  uint32_t len, char *out, size_t n)
{
	uint8_t *m = malloc(c->size);
	uint32_t s, off, i;

	ASSERT_NOT_NULL(m);
	snprintf(out, n, "no message's packet");
	for (s = 0; s < nslots(c); s++) {
		make_msg(m, s, c->size);
		for (off = 0; off + len <= c->size; off += c->mtu) {
			for (i = 0; i < len && p[i] == m[off + i]; i++)
				;
			if (i == len) {
				snprintf(out, n, "message %u's bytes at %u",
					 s, off);
				free(m);
				return;
			}
		}
	}
	free(m);
}

/*
 * Slot seq of a WRITE: each path-MTU packet untouched (zero) or exactly
 * right, the guard after it zero.  final: the QP is stopped, so anything
 * else is corruption (fails); before that a packet may be landing, and
 * only COMPLETE (or not) is told, as soon as known.
 */
static enum slot_state slot_check(struct rx *r, uint32_t seq, bool final)
{
	const struct lcase *c = r->c;
	uint32_t stride = dst_stride(c, c->size), off, i, ok = 0, zero = 0;
	uint32_t chunks = 0;
	const volatile uint8_t *p =
		r->e->buf + (size_t)seq * stride;

	make_msg(r->want, seq, c->size);
	for (off = 0; off < c->size; off += c->mtu) {
		uint32_t len = c->size - off < c->mtu ? c->size - off : c->mtu;
		bool z = true, eq = true;

		for (i = 0; i < len; i++) {
			uint8_t b = p[off + i];

			z = z && !b;
			eq = eq && b == r->want[off + i];
			if (!eq && (!z || !final))
				break;
		}
		if (!eq && !final)
			return PARTIAL;	/* not complete (yet) */
		chunks++;
		if (eq) {
			ok++;
		} else if (z) {
			zero++;
		} else {
			char who[80];

			whose(c, p + off, len, who, sizeof(who));
			harness_fail(__FILE__, __LINE__,
				     "UC %s %u B: slot %u, packet at %u: "
				     "byte %u is 0x%02x, expected 0x%02x or "
				     "untouched; the packet holds %s",
				     op_name(c->op), c->size, seq, off,
				     off + i, p[off + i], r->want[off + i],
				     who);
		}
	}
	for (i = c->size; final && i < stride; i++)
		if (p[i])
			harness_fail(__FILE__, __LINE__,
				     "UC %s %u B: slot %u: byte %u past the "
				     "message is 0x%02x", op_name(c->op),
				     c->size, seq, i, p[i]);
	if (ok == chunks)
		return COMPLETE;
	return zero == chunks ? UNTOUCHED : PARTIAL;
}

/* WRITE without immediate: the slots that became complete. */
static void scan_writes(struct rx *r)
{
	uint32_t s;

	for (s = 0; s < nslots(r->c); s++)
		if (!r->seen[s] && slot_check(r, s, false) == COMPLETE)
			deliver(r, s, false);
}

static void check_grh(const uint8_t *g, const union ibv_gid *src, uint32_t j)
{
	static const uint8_t v4[12] = { [10] = 0xff, [11] = 0xff };

	if (!memcmp(src->raw, v4, sizeof(v4))) {
		/* RoCE v2 over IPv4: the IPv4 header in the last 20 bytes */
		if (g[20] != 0x45 || memcmp(g + 32, src->raw + 12, 4))
			harness_fail(__FILE__, __LINE__,
				     "receive %u: the GRH's IPv4 header does "
				     "not name the sender (0x%02x, "
				     "%u.%u.%u.%u)",
				     j, g[20], g[32], g[33], g[34], g[35]);
	} else if (memcmp(g + 8, src->raw, 16)) {
		harness_fail(__FILE__, __LINE__,
			     "receive %u: the GRH's source GID is not the "
			     "sender's", j);
	}
}

static void on_recv(struct rx *r, const struct ibv_wc *wc)
{
	const struct lcase *c = r->c;
	struct ep *e = r->e;
	uint32_t j = r->next_wr++, seq;

	if (wc->wr_id != j)
		harness_fail(__FILE__, __LINE__,
			     "completion of receive %" PRIu64 ", expected %u "
			     "(receives complete in the order posted)",
			     (uint64_t)wc->wr_id, j);
	if (wc->status == IBV_WC_WR_FLUSH_ERR && r->stopped) {
		r->flushed++;
		return;
	}
	if (wc->status != IBV_WC_SUCCESS)
		harness_fail(__FILE__, __LINE__, "receive %u: status %s (%d)",
			     j, ibv_wc_status_str(wc->status), wc->status);
	if (r->flushed)
		harness_fail(__FILE__, __LINE__,
			     "receive %u succeeded after a flushed one", j);
	r->consumed++;
	ASSERT_EQ(wc->qp_num, e->qp->qp_num);
	ASSERT_EQ(wc->src_qp, e->peer.qpn);
	ASSERT_EQ(wc->opcode, c->op == IBV_WR_RDMA_WRITE_WITH_IMM ?
				      IBV_WC_RECV_RDMA_WITH_IMM :
				      IBV_WC_RECV);
	ASSERT_EQ(wc->byte_len, c->size + grh_len(c));
	ASSERT_EQ(!!(wc->wc_flags & IBV_WC_WITH_IMM), op_imm(c->op));
	ASSERT_EQ(!!(wc->wc_flags & IBV_WC_GRH), c->type == IBV_QPT_UD);
	if (c->op == IBV_WR_RDMA_WRITE_WITH_IMM) {
		seq = ntohl(wc->imm_data) - IMM_BASE;
		if (seq >= nslots(c))
			harness_fail(__FILE__, __LINE__,
				     "receive %u: immediate data 0x%08x names "
				     "no message", j, ntohl(wc->imm_data));
		/* the completion says the whole message is there */
		if (slot_check(r, seq, true) != COMPLETE)
			harness_fail(__FILE__, __LINE__,
				     "UC write_imm %u B: message %u completed "
				     "but its slot is not all written", c->size,
				     seq);
	} else {
		const uint8_t *p = e->buf + (size_t)j * dst_stride(c, c->size);

		if (c->type == IBV_QPT_UD)
			check_grh(p, &e->peer.gid, j);
		seq = check_msg(c, p + grh_len(c), j, r->want);
		if (op_imm(c->op) && ntohl(wc->imm_data) != IMM_BASE + seq)
			harness_fail(__FILE__, __LINE__,
				     "receive %u (message %u): immediate data "
				     "0x%08x, expected 0x%08x", j, seq,
				     ntohl(wc->imm_data), IMM_BASE + seq);
	}
	deliver(r, seq, true);
}

static void post_recvs(struct ep *e, const struct lcase *c)
{
	uint32_t j, stride = dst_stride(c, c->size);

	for (j = 0; j < nrecv(c); j++) {
		struct ibv_recv_wr wr, *bad;
		struct ibv_sge sge;

		memset(&wr, 0, sizeof(wr));
		sge.addr = (uintptr_t)e->buf + (size_t)j * stride;
		sge.length = c->size + grh_len(c);
		sge.lkey = e->mr->lkey;
		wr.wr_id = j;
		wr.sg_list = &sge;
		/* a WRITE with immediate places nothing in the receive */
		wr.num_sge = c->op == IBV_WR_RDMA_WRITE_WITH_IMM ? 0 : 1;
		ASSERT_EQ(ibv_post_recv(e->qp, &wr, &bad), 0);
	}
}

/* Receives until everything came, or the markers (or a quiet second) say
 * that nothing more will. */
static void receive_loop(struct rx *r, int fd)
{
	const struct lcase *c = r->c;
	double t0 = now_s(), t_done = 0, grace;
	bool sender_done = false;
	struct ibv_wc wc[32];
	char ch;

	/* what a delay or reorder fault holds back arrives by then */
	grace = 0.05 + 2e-3 * fl.delay_ms;
	r->t_progress = t0;
	for (;;) {
		int n = ibv_poll_cq(r->e->rcq, 32, wc), i;
		double t;

		ASSERT_GE(n, 0);
		for (i = 0; i < n; i++)
			on_recv(r, &wc[i]);
		if (!sender_done && ep_readable(fd, 0)) {
			xread(fd, &ch, 1);
			ASSERT_EQ(ch, 'D');
			sender_done = true;
			t_done = now_s();
		}
		if (c->op == IBV_WR_RDMA_WRITE && !n)
			scan_writes(r);
		if (r->delivered == c->n)
			break;
		t = now_s();
		if (fl.on && r->marker_seen && t - r->t_marker >= grace)
			break;
		if (fl.on && sender_done && t - t_done >= 1.0 &&
		    t - r->t_progress >= 1.0)
			break;
		if (t - t0 > 20) {
			if (fl.on)
				break;
			harness_fail(__FILE__, __LINE__,
				     "%s %s %u B: %u of %u messages after 20 s "
				     "without faults",
				     c->type == IBV_QPT_UD ? "UD" : "UC",
				     op_name(c->op), c->size, r->delivered,
				     c->n);
		}
		if (!n)
			usleep(100);
	}
	duo_signal(fd, 'F');
	if (!sender_done)
		duo_expect(fd, 'D');
}

/* The QP stops (nothing lands after this), the rest is checked. */
static void receive_finish(struct rx *r)
{
	const struct lcase *c = r->c;
	struct ep *e = r->e;
	uint32_t stride = dst_stride(c, c->size), s, j, i;
	struct ibv_qp_attr a;
	struct ibv_wc wc[32];
	double t0 = now_s();

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_ERR;
	ASSERT_EQ(ibv_modify_qp(e->qp, &a, IBV_QP_STATE), 0);
	r->stopped = true;
	/* every receive completes once: a message or a flush */
	while (r->next_wr < nrecv(c)) {
		int n = ibv_poll_cq(e->rcq, 32, wc), k;

		ASSERT_GE(n, 0);
		for (k = 0; k < n; k++)
			on_recv(r, &wc[k]);
		if (!n && now_s() - t0 > 10)
			harness_fail(__FILE__, __LINE__,
				     "%u of %u receives completed 10 s after "
				     "the error state", r->next_wr, nrecv(c));
		if (!n)
			usleep(100);
	}
	ep_expect_empty(e->rcq);
	ASSERT_EQ(r->consumed + r->flushed, nrecv(c));

	if (op_write(c->op)) {
		for (s = 0; s < nslots(c); s++) {
			enum slot_state st = slot_check(r, s, true);

			if (st == COMPLETE && !r->seen[s]) {
				if (c->op == IBV_WR_RDMA_WRITE)
					deliver(r, s, false);
				else if (s < c->n)
					r->stray++;	/* imm lost */
			}
			/* (a marker may be cut short by the error
			 * state, without faults too) */
			if (st == PARTIAL && s < c->n)
				r->partial++;
			if (st != COMPLETE && r->seen[s])
				harness_fail(__FILE__, __LINE__,
					     "slot %u was complete, now not",
					     s);
		}
		return;
	}
	/* receives: past each message nothing was written, and a flushed
	 * receive's slot was not touched at all */
	for (j = 0; j < nrecv(c); j++) {
		const uint8_t *p = e->buf + (size_t)j * stride;
		uint32_t from = j < r->consumed ? c->size + grh_len(c) : 0;

		for (i = from; i < stride; i++)
			if (p[i])
				harness_fail(__FILE__, __LINE__,
					     "receive %u (%s): byte %u is "
					     "0x%02x, expected untouched", j,
					     j < r->consumed ? "completed" :
							       "flushed",
					     i, p[i]);
	}
}

static double power(double x, uint32_t k)
{
	double r = 1;

	while (k--)
		r *= x;
	return r;
}

/* How likely every message of the case is lost, counted high: each
 * packet, and the first of the next message (a reorder, a delay), may
 * take a fault that loses the message. */
static double p_all_lost(const struct lcase *c)
{
	double q = c->type == IBV_QPT_UD ? fl.drop :
		   2 * (fl.drop + fl.dup + fl.delay + fl.reorder);
	double pass;

	if (q >= 1)
		return 1;
	pass = power(1 - q, npkts(c) + 1);
	return power(1 - pass, c->n);
}

static void receive_case(struct ep *e, struct lcase *c, int fd)
{
	struct rx r;
	char *qpline, prefix[128], extra[160] = "";

	memset(&r, 0, sizeof(r));
	r.c = c;
	r.e = e;
	r.last = -1;
	r.want = malloc(c->size + 1);
	r.seen = calloc(nslots(c), sizeof(*r.seen));
	ASSERT_NOT_NULL(r.want);
	ASSERT_NOT_NULL(r.seen);
	post_recvs(e, c);
	duo_signal(fd, 'R');
	receive_loop(&r, fd);
	receive_finish(&r);

	snprintf(prefix, sizeof(prefix), "pid %d device %s qp 0x%06x",
		 (int)getpid(), ibv_get_device_name(e->ctx->device),
		 e->qp->qp_num);
	qpline = stat_line(prefix);
	if (r.partial || r.stray)
		snprintf(extra, sizeof(extra), ", partial %u, whole without "
			 "completion %u", r.partial, r.stray);
	printf("  result %s %s %u B x%u: delivered %u, duplicates %u, "
	       "markers %u, flushed %u%s [receiver qp:%s]\n",
	       c->type == IBV_QPT_UD ? "ud" : "uc", op_name(c->op), c->size,
	       c->n, r.delivered, r.dups, r.markers, r.flushed, extra,
	       qpline ? qpline + strlen(prefix) : " (softhca stat: none)");
	fflush(stdout);
	free(qpline);

	if (!fl.on) {
		/* nothing may be lost without faults */
		ASSERT_EQ(r.delivered, c->n);
		ASSERT_EQ(r.dups, 0);
		ASSERT_EQ(r.partial, 0);
		ASSERT_EQ(r.stray, 0);
	} else if (c->type == IBV_QPT_UD || fl.reset == 0) {
		double p = p_all_lost(c);

		if (p < 1e-6)
			ASSERT_GT(r.delivered, 0);
		else
			printf("  (%s %u B: losing all is likely enough, "
			       "%.2g: not required to arrive)\n",
			       op_name(c->op), c->size, p);
	}
	free(r.want);
	free(r.seen);
}

/* ------------------------------------------------------------------ */
/* Sender                                                              */

static void post_msg(struct ep *e, const struct lcase *c, uint32_t seq)
{
	struct ibv_send_wr wr, *bad;
	struct ibv_sge sge;

	memset(&wr, 0, sizeof(wr));
	sge.addr = (uintptr_t)e->buf + (size_t)seq * src_stride(c->size);
	sge.length = c->size;
	sge.lkey = e->mr->lkey;
	wr.wr_id = seq;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = c->op;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.imm_data = htonl(IMM_BASE + seq);
	if (op_write(c->op)) {
		wr.wr.rdma.remote_addr =
			e->peer.addr +
			(uint64_t)seq * dst_stride(c, c->size);
		wr.wr.rdma.rkey = e->peer.rkey;
	}
	if (c->type == IBV_QPT_UD) {
		wr.wr.ud.ah = e->ah;
		wr.wr.ud.remote_qpn = e->peer.qpn;
		wr.wr.ud.remote_qkey = QKEY;
	}
	ASSERT_EQ(ibv_post_send(e->qp, &wr, &bad), 0);
}

/* One send completion: the next in order, successful (UC and UD complete
 * once sent, lost or not). */
static void expect_sent(struct ep *e, const struct lcase *c, uint32_t seq)
{
	struct ibv_wc wc;

	ep_poll(e->scq, &wc, 1);
	if (wc.status != IBV_WC_SUCCESS || wc.wr_id != seq)
		harness_fail(__FILE__, __LINE__,
			     "send completion wr_id %" PRIu64 " status %s, "
			     "expected %u success", (uint64_t)wc.wr_id,
			     ibv_wc_status_str(wc.status), seq);
	ASSERT_EQ(wc.qp_num, e->qp->qp_num);
	ASSERT_EQ(wc.opcode, op_write(c->op) ? IBV_WC_RDMA_WRITE :
					       IBV_WC_SEND);
}

/* Returns the packets sent. */
static uint64_t send_case(struct ep *e, const struct lcase *c, int fd)
{
	uint32_t s, posted = 0, done = 0, k;

	for (s = 0; s < nslots(c); s++)
		make_msg(e->buf + (size_t)s * src_stride(c->size), s, c->size);
	duo_expect(fd, 'R');
	while (done < c->n) {
		while (posted < c->n && posted - done < SEND_WINDOW)
			post_msg(e, c, posted++);
		expect_sent(e, c, done++);
	}
	duo_signal(fd, 'D');
	/* markers until the receiver is done */
	for (k = 0; k < MARKERS && !ep_readable(fd, 10); k++) {
		post_msg(e, c, c->n + k);
		expect_sent(e, c, c->n + k);
	}
	duo_expect(fd, 'F');
	duo_expect(fd, 'K');
	return (uint64_t)(c->n + k) * npkts(c);
}

/* ------------------------------------------------------------------ */
/* What the wire saw                                                   */

#define TR_QPS	8		/* destination QPs a run traces */

struct trace {
	/* the sender's: each destination QP, its first PSN and packets */
	unsigned int nqp;
	uint32_t qpn[TR_QPS], first[TR_QPS], sent[TR_QPS];
	uint8_t *was_sent[TR_QPS];
	/* the receiver's: copies of each PSN, the highest seen so far */
	uint32_t *copies[TR_QPS], top[TR_QPS];
	bool any[TR_QPS];
	uint64_t frames, rcvd, lost, twice, late;
};

static int trace_qp(const struct trace *t, uint32_t qpn)
{
	unsigned int i;

	for (i = 0; i < t->nqp; i++)
		if (t->qpn[i] == qpn)
			return (int)i;
	return -1;
}

static void trace_sent(const uint8_t *ib, uint32_t len, void *arg)
{
	struct trace *t = arg;
	int q = trace_qp(t, pcap_bth_dqpn(ib));
	uint32_t rel;

	(void)len;
	if (q < 0) {
		ASSERT_LT(t->nqp, TR_QPS);
		q = (int)t->nqp++;
		t->qpn[q] = pcap_bth_dqpn(ib);
		t->first[q] = pcap_bth_psn(ib);
	}
	/* UC and UD: one PSN a packet, in order, never sent again (a
	 * packet the connection could not take leaves its PSN unused) */
	rel = (pcap_bth_psn(ib) - t->first[q]) & 0xffffff;
	ASSERT(rel >= t->sent[q] && rel < (1u << 20));
	t->sent[q] = rel + 1;
	t->frames++;
}

/* Second pass: which PSNs were sent. */
static void trace_mark(const uint8_t *ib, uint32_t len, void *arg)
{
	struct trace *t = arg;
	int q = trace_qp(t, pcap_bth_dqpn(ib));

	(void)len;
	t->was_sent[q][(pcap_bth_psn(ib) - t->first[q]) & 0xffffff] = 1;
}

static void trace_rcvd(const uint8_t *ib, uint32_t len, void *arg)
{
	struct trace *t = arg;
	int q = trace_qp(t, pcap_bth_dqpn(ib));
	uint32_t rel;

	(void)len;
	t->rcvd++;
	ASSERT_GE(q, 0);		/* only what the sender sent */
	rel = (pcap_bth_psn(ib) - t->first[q]) & 0xffffff;
	ASSERT(rel < t->sent[q] && t->was_sent[q][rel]);
	if (t->copies[q][rel]++)
		t->twice++;
	else if (t->any[q] && rel < t->top[q])
		t->late++;
	if (!t->any[q] || rel > t->top[q])
		t->top[q] = rel;
	t->any[q] = true;
}

/* The two traces of a run, then gone: lost, twice, late counted. */
static void trace_read(struct trace *t, const char *tmpl, int sender,
		       int receiver)
{
	char path[256];
	unsigned int q;
	uint32_t k;

	memset(t, 0, sizeof(*t));
	pcap_name(tmpl, sender, path, sizeof(path));
	pcap_each(path, trace_sent, t);
	for (q = 0; q < t->nqp; q++) {
		t->copies[q] = calloc(t->sent[q], sizeof(uint32_t));
		t->was_sent[q] = calloc(t->sent[q], 1);
		ASSERT(t->copies[q] && t->was_sent[q]);
	}
	pcap_each(path, trace_mark, t);
	unlink(path);
	pcap_name(tmpl, receiver, path, sizeof(path));
	pcap_each(path, trace_rcvd, t);
	unlink(path);
	for (q = 0; q < t->nqp; q++) {
		/* lost: sent, never came, though a later PSN did */
		for (k = 0; t->any[q] && k < t->top[q]; k++)
			t->lost += t->was_sent[q][k] && !t->copies[q][k];
		free(t->copies[q]);
		free(t->was_sent[q]);
	}
}

/* TCP connections this namespace's kernel opened so far (either way). */
static uint64_t tcp_opens(void)
{
	char line[2][1024], *tok[2], *save[2];
	uint64_t n = 0;
	int k = 0;
	FILE *f = fopen("/proc/net/snmp", "r");

	ASSERT_NOT_NULL(f);
	while (k < 2 && fgets(line[k], sizeof(line[k]), f))
		if (!strncmp(line[k], "Tcp:", 4))
			k++;
	fclose(f);
	ASSERT_EQ(k, 2);
	/* "Tcp: RtoAlgorithm ... ActiveOpens PassiveOpens ..." then values */
	tok[0] = strtok_r(line[0], " \n", &save[0]);
	tok[1] = strtok_r(line[1], " \n", &save[1]);
	while (tok[0] && tok[1]) {
		if (!strcmp(tok[0], "ActiveOpens") ||
		    !strcmp(tok[0], "PassiveOpens"))
			n += strtoull(tok[1], NULL, 10);
		tok[0] = strtok_r(NULL, " \n", &save[0]);
		tok[1] = strtok_r(NULL, " \n", &save[1]);
	}
	return n;
}

/* The faults the traces show, against those asked for: pkts sent. */
static void trace_check(const struct trace *t, enum ibv_qp_type type,
			uint64_t pkts, uint64_t opens)
{
	bool uc = type == IBV_QPT_UC;

	printf("  trace %s: %" PRIu64 " packets sent, %" PRIu64 " received, "
	       "%" PRIu64 " lost, %" PRIu64 " twice, %" PRIu64 " late, %" PRIu64
	       " TCP connections opened\n", uc ? "uc" : "ud", t->frames,
	       t->rcvd, t->lost, t->twice, t->late, opens);
	/* the sender's trace holds what it sent (a reset may refuse a
	 * packet: the connection is down) */
	if (fl.on && fl.reset > 0)
		ASSERT_LE(t->frames, pkts);
	else
		ASSERT_EQ(t->frames, pkts);
	if (!fl.on) {
		ASSERT_EQ(t->lost, 0);
		ASSERT_EQ(t->twice, 0);
		ASSERT_EQ(t->late, 0);
		return;
	}
	if ((double)pkts * fl.drop >= 10)
		ASSERT_GT(t->lost, 0);
	if ((double)pkts * fl.dup >= 10)
		ASSERT_GT(t->twice, 0);
	/* UD datagrams take drop and dup only */
	if (uc && (double)pkts * (fl.reorder + fl.delay) >= 10)
		ASSERT_GT(t->late, 0);
	if (uc && (double)pkts * fl.reset >= 10)
		ASSERT_GT(opens, 1);
}

/* ------------------------------------------------------------------ */
/* The two processes                                                   */

static void receiver(int fd, void *arg)
{
	struct lcase c;
	struct ep_opts o;
	struct ep e;

	(void)arg;
	faults_read();
	for (;;) {
		xread(fd, &c, sizeof(c));
		if (!c.n)
			break;
		case_opts(&c, &o);
		ep_create(&e, &o);
		ep_exchange(fd, &e.self, &e.peer);
		ep_connect(&e, &o);
		receive_case(&e, &c, fd);
		ep_destroy(&e);
		duo_signal(fd, 'K');
	}
}

static void run(enum ibv_qp_type type, enum ibv_wr_opcode op)
{
	static const struct { uint32_t size, n; } uc[] = {
		{ 1, 150 }, { 1000, 150 }, { 5000, 100 }, { 65536, 48 },
	}, ud[] = {
		{ 1, 150 }, { 1000, 150 }, { SIZE_MTU, 150 },
	};
	const unsigned int ncase = type == IBV_QPT_UD ? 3 : 4;
	uint64_t pkts = 0, faults, opens = 0;
	struct duo d;
	struct lcase c;
	unsigned int i;
	char *line, prefix[64], tmpl[200];
	struct trace t;

	faults_read();
	/* a receiver that failed is reported, not a SIGPIPE */
	signal(SIGPIPE, SIG_IGN);
	/* two hosts: both processes trace what they send and receive */
	unsetenv("SOFTHCA_PCAP");
	if (ep_netns()) {
		snprintf(tmpl, sizeof(tmpl), "%s/softhca-lossy-%d-%%p.pcap",
			 getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp",
			 (int)getpid());
		ASSERT_EQ(setenv("SOFTHCA_PCAP", tmpl, 1), 0);
	}
	duo_fork(&d, receiver, NULL);
	for (i = 0; i < ncase; i++) {
		struct ep_opts o;
		struct ep e;

		memset(&c, 0, sizeof(c));
		c.type = type;
		c.op = op;
		c.size = type == IBV_QPT_UD ? ud[i].size : uc[i].size;
		c.n = type == IBV_QPT_UD ? ud[i].n : uc[i].n;
		case_opts(&c, &o);
		ep_create(&e, &o);
		if (!i)		/* in namespace A now */
			opens = tcp_opens();
		c.mtu = ep_mtu_bytes(&e);
		if (c.size == SIZE_MTU)
			c.size = c.mtu;
		if (type == IBV_QPT_UD && c.size > c.mtu)
			c.size = c.mtu;
		xwrite(d.fd, &c, sizeof(c));
		ep_exchange(d.fd, &e.self, &e.peer);
		ep_connect(&e, &o);
		pkts += send_case(&e, &c, d.fd);
		ep_destroy(&e);
	}
	memset(&c, 0, sizeof(c));
	xwrite(d.fd, &c, sizeof(c));
	duo_wait(&d);
	if (ep_netns()) {
		opens = tcp_opens() - opens;
		trace_read(&t, tmpl, (int)getpid(), d.pid);
		trace_check(&t, type, pkts, opens);
	}

	/* the faults were injected here (the sender's packets) */
	snprintf(prefix, sizeof(prefix), "pid %d slot ", (int)getpid());
	line = stat_line(prefix);
#ifdef SOFTHCA_TOOL
	if (!line)
		harness_fail(__FILE__, __LINE__, "%s stat --pid %d: no line "
			     "'%s...'", SOFTHCA_TOOL, (int)getpid(), prefix);
#endif
	faults = line ? stat_get(line, "faults_injected") : 0;
	printf("  sender %s %s: %" PRIu64 " packets, faults_injected %" PRIu64
	       ", conn_resets %" PRIu64 "%s\n",
	       type == IBV_QPT_UD ? "ud" : "uc", op_name(op), pkts, faults,
	       line ? stat_get(line, "conn_resets") : 0,
	       line ? "" : " (softhca stat: no line)");
	if (fl.on && line && (double)pkts * roll_sum(type) >= 10)
		ASSERT_GT(faults, 0);
	if (!fl.asked && line)
		ASSERT_EQ(faults, 0);
	free(line);
}

TEST(uc_send) { run(IBV_QPT_UC, IBV_WR_SEND); }
TEST(uc_send_imm) { run(IBV_QPT_UC, IBV_WR_SEND_WITH_IMM); }
TEST(uc_write) { run(IBV_QPT_UC, IBV_WR_RDMA_WRITE); }
TEST(uc_write_imm) { run(IBV_QPT_UC, IBV_WR_RDMA_WRITE_WITH_IMM); }
TEST(ud_send) { run(IBV_QPT_UD, IBV_WR_SEND); }
TEST(ud_send_imm) { run(IBV_QPT_UD, IBV_WR_SEND_WITH_IMM); }
