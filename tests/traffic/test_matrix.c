// SPDX-License-Identifier: MIT
/*
 * The traffic matrix: transport (RC, UC, UD) x opcode x size x SGE count
 * (1, 2, 4 and 32, the device's max_sge) x inline (up to 1024 bytes, the
 * device's max_inline_data), between two QPs of one process and between
 * two processes, on the same-host path and on the net path (the *_net
 * cases set SOFTHCA_NET=1: TCP and UDP over loopback, also between two QPs
 * of one process).
 *
 * What each case checks (issue 16: a check that cannot see a broken byte
 * is no check):
 *  - both buffers start filled with EP_SENTINEL; a message carries
 *    ep_pattern(seed of the case, offset), never 0 and never the sentinel;
 *  - SGE pieces are separated by GAP bytes, the receive buffer of a UD
 *    SEND starts with the 40-byte GRH;
 *  - after the case, every byte of each side's whole buffer is compared
 *    with an image of what it must hold: the message in its pieces, and
 *    the sentinel everywhere else (the gaps, the bytes before the first
 *    and after the last piece, the rest of the buffer).  The requester's
 *    buffer too: a READ's or an atomic's result lands in its pieces and
 *    nowhere else, and a SEND's or WRITE's source is left as it was;
 *  - UD: the GRH's 40 bytes, field by field (RoCE v2: the IPv4 header in
 *    the last 20 bytes, or the IPv6 header);
 *  - inline: the WR is posted in SQD (IBA 10.3.1: the send queue takes
 *    WRs and does not start them), its SGEs carry an invalid L_Key
 *    (0xdeadbeef: inline data has none to check), the source is
 *    overwritten right after ibv_post_send, and only then is the QP moved
 *    back to RTS: the peer must see the bytes as they were at the post;
 *  - every completion field the verbs define for the case.
 * The *_net cases also check that the bytes crossed the kernel's TCP
 * sockets (TCP_INFO), or for UD that the datagrams are in SOFTHCA_PCAP.
 *
 * Two-process cases fork a responder; the cases are deterministic, so both
 * sides walk the same list, synchronised over a socketpair: the requester
 * sends the case number, the responder prepares (posts its receive, fills
 * its buffer) and answers, the requester executes and checks its side, then
 * tells the responder to check its side.
 *
 * With SHCA_TEST_NETNS_A/B set (ep.h) the two processes are in two network
 * namespaces, each on its own interface, and the one-process cases skip.
 * UD sizes stop at the port's MTU there (4096 on lo: the list is the same).
 */
#include <arpa/inet.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "ep.h"

#define GRH		40
#define GAP		64		/* between SGE pieces, never written */
#define MAX_SGE		32		/* the device's max_sge */
#define MAX_INLINE	1024		/* its max_inline_data */
#define MAX_SIZE	(1u << 20)
#define BAD_LKEY	0xdeadbeefu
/* a message's region: its pieces, the gaps, a GRH and room after */
#define REGION		(MAX_SIZE + (64u << 10))
#define SRC_BASE	4096u		/* sentinel bytes before it too */
#define DST_BASE	(SRC_BASE + REGION)
#define BUF_SIZE	(DST_BASE + REGION)

struct tcase {
	enum ibv_qp_type type;
	enum ibv_wr_opcode op;
	uint32_t size;
	int nsge;
	bool inl;
};

/* One side: its endpoint and the image its buffer must match. */
struct side {
	struct ep e;
	uint8_t *want;
};

/* How a message lies in a buffer: nsge pieces from base, GAP bytes apart;
 * piece 0 starts with extra_first more bytes (the UD GRH). */
struct layout {
	uint64_t base;
	int nsge;
	uint32_t extra_first;
	uint32_t size;
};

static struct tcase cases[4096];
static int ncases;

/* What a RoCE v2 UD receive reports in wc.sl (mlx5's roce_pkt_type):
 * 2 for IPv4 (an IPv4-mapped GID), 1 for IPv6. */
static bool gid_v4(const union ibv_gid *g)
{
	static const uint8_t v4mapped[12] = { [10] = 0xff, [11] = 0xff };

	return !memcmp(g->raw, v4mapped, 12);
}

static int roce_l3_type(const union ibv_gid *g)
{
	return gid_v4(g) ? 2 : 1;
}

static bool op_has_recv(enum ibv_wr_opcode op)
{
	return op == IBV_WR_SEND || op == IBV_WR_SEND_WITH_IMM ||
	       op == IBV_WR_RDMA_WRITE_WITH_IMM;
}

static bool op_is_send(enum ibv_wr_opcode op)
{
	return op == IBV_WR_SEND || op == IBV_WR_SEND_WITH_IMM;
}

static bool op_is_write(enum ibv_wr_opcode op)
{
	return op == IBV_WR_RDMA_WRITE || op == IBV_WR_RDMA_WRITE_WITH_IMM;
}

static bool op_is_atomic(enum ibv_wr_opcode op)
{
	return op == IBV_WR_ATOMIC_CMP_AND_SWP ||
	       op == IBV_WR_ATOMIC_FETCH_AND_ADD;
}

static const char *op_name(enum ibv_wr_opcode op)
{
	switch (op) {
	case IBV_WR_SEND:		return "SEND";
	case IBV_WR_SEND_WITH_IMM:	return "SEND_IMM";
	case IBV_WR_RDMA_WRITE:		return "WRITE";
	case IBV_WR_RDMA_WRITE_WITH_IMM: return "WRITE_IMM";
	case IBV_WR_RDMA_READ:		return "READ";
	case IBV_WR_ATOMIC_CMP_AND_SWP:	return "CMP_SWP";
	case IBV_WR_ATOMIC_FETCH_AND_ADD: return "FETCH_ADD";
	default:			return "?";
	}
}

/* ud_max: the largest UD payload, the MTU of the endpoint's port */
static void build_cases(enum ibv_qp_type type, uint32_t ud_max)
{
	static const enum ibv_wr_opcode rc_ops[] = {
		IBV_WR_SEND, IBV_WR_SEND_WITH_IMM, IBV_WR_RDMA_WRITE,
		IBV_WR_RDMA_WRITE_WITH_IMM, IBV_WR_RDMA_READ,
		IBV_WR_ATOMIC_CMP_AND_SWP, IBV_WR_ATOMIC_FETCH_AND_ADD,
	};
	static const uint32_t sizes[] = {
		0, 1, 63, MAX_INLINE, 4096, 65537, MAX_SIZE
	};
	uint32_t ud_sizes[] = { 0, 1, 63, MAX_INLINE, 4096 };
	static const int sges[] = { 1, 2, 4, MAX_SGE };
	unsigned int o, s, g, i, nsz;
	const uint32_t *sz;

	if (ud_max < ud_sizes[4])
		ud_sizes[4] = ud_max;
	sz = type == IBV_QPT_UD ? ud_sizes : sizes;
	nsz = type == IBV_QPT_UD ? 5 : 7;
	ncases = 0;
	for (o = 0; o < sizeof(rc_ops) / sizeof(rc_ops[0]); o++) {
		enum ibv_wr_opcode op = rc_ops[o];

		if (type == IBV_QPT_UC &&
		    (op == IBV_WR_RDMA_READ || op_is_atomic(op)))
			continue;
		if (type == IBV_QPT_UD && !op_is_send(op))
			continue;
		if (op_is_atomic(op)) {
			cases[ncases++] = (struct tcase){ type, op, 8, 1,
							  false };
			continue;
		}
		for (s = 0; s < nsz; s++)
			for (g = 0; g < sizeof(sges) / sizeof(sges[0]); g++)
				for (i = 0; i < 2; i++) {
					bool inl = i;

					if (inl && (sz[s] > MAX_INLINE ||
						    op == IBV_WR_RDMA_READ))
						continue;
					/* each piece holds a byte at least */
					if (sges[g] > 1 &&
					    sz[s] < (uint32_t)sges[g])
						continue;
					cases[ncases++] = (struct tcase){
						type, op, sz[s], sges[g], inl
					};
				}
	}
}

/* Seeds of case c's patterns: the message, what overwrites an inline
 * source after the post, an atomic's original value and its operand. */
enum { SEED_MSG, SEED_OVERWRITE, SEED_ORIG, SEED_OPERAND };

static uint32_t seed_of(const struct tcase *t, int c, int what)
{
	return (((uint32_t)t->type << 16) | (uint32_t)c) * 4u + (uint32_t)what;
}

/* A 64-bit value of pattern bytes: no zero byte, no sentinel byte. */
static uint64_t word_of(uint32_t seed)
{
	uint8_t b[8];
	uint64_t v;

	ep_fill_pattern(b, 8, seed, 0);
	memcpy(&v, b, 8);
	return v;
}

static uint64_t atomic_result(const struct tcase *t, int c)
{
	uint64_t orig = word_of(seed_of(t, c, SEED_ORIG));
	uint64_t operand = word_of(seed_of(t, c, SEED_OPERAND));

	return t->op == IBV_WR_ATOMIC_FETCH_AND_ADD ? orig + operand : operand;
}

/* Piece k of the layout: offset in the buffer, length (with the extra
 * bytes of piece 0) and the message offset of its first message byte. */
static void piece(const struct layout *l, int k, uint64_t *off, uint32_t *len,
		  uint32_t *msg)
{
	uint32_t part = l->size / (uint32_t)l->nsge;

	*len = k == l->nsge - 1 ? l->size - part * (uint32_t)(l->nsge - 1) :
				  part;
	*off = l->base + (uint64_t)k * (part + GAP);
	*msg = (uint32_t)k * part;
	if (k == 0)
		*len += l->extra_first;
	else
		*off += l->extra_first;
}

/* Message bytes of seed into buf as l lays them out (piece 0's extra
 * bytes are left alone). */
static void put_msg(uint8_t *buf, const struct layout *l, uint32_t seed)
{
	int k;

	for (k = 0; k < l->nsge; k++) {
		uint64_t off;
		uint32_t len, msg, skip = k ? 0 : l->extra_first;

		piece(l, k, &off, &len, &msg);
		ep_fill_pattern(buf + off + skip, len - skip, seed, msg);
	}
}

static void fill_sges(const struct ep *e, const struct layout *l,
		      uint32_t lkey, struct ibv_sge *sge)
{
	int k;

	for (k = 0; k < l->nsge; k++) {
		uint64_t off;
		uint32_t len, msg;

		piece(l, k, &off, &len, &msg);
		sge[k].addr = (uintptr_t)e->buf + off;
		sge[k].length = len;
		sge[k].lkey = lkey;
	}
}

/* Where buffer offset o lies relative to layout l, in words. */
static void describe(const struct layout *l, uint64_t o, char *s, size_t n)
{
	uint64_t off, end = l->base;
	uint32_t len, msg;
	int k;

	for (k = 0; k < l->nsge; k++) {
		piece(l, k, &off, &len, &msg);
		if (o < off) {
			if (k == 0)
				snprintf(s, n, "%llu bytes before SGE 0",
					 (unsigned long long)(off - o));
			else
				snprintf(s, n, "in the gap between SGE %d "
					 "and SGE %d", k - 1, k);
			return;
		}
		if (o < off + len) {
			if (k == 0 && o - off < l->extra_first)
				snprintf(s, n, "GRH byte %llu",
					 (unsigned long long)(o - off));
			else
				snprintf(s, n, "message byte %llu (SGE %d)",
					 (unsigned long long)(msg + o - off -
							      (k ? 0 :
							       l->extra_first)),
					 k);
			return;
		}
		end = off + len;
	}
	snprintf(s, n, "%llu byte%s after the last SGE",
		 (unsigned long long)(o - end + 1), o == end ? "" : "s");
}

/* Each byte of side s's buffer is what its image says. */
static void check_image(const struct side *sd, const struct layout *l,
			const char *who, const struct tcase *t, int c)
{
	const uint8_t *got = sd->e.buf, *want = sd->want;
	int64_t d = ep_find_diff(got, want, sd->e.size);
	uint64_t i, bad = 0;
	char where[96];

	if (d < 0)
		return;
	for (i = (uint64_t)d; i < sd->e.size; i++)
		bad += got[i] != want[i];
	describe(l, (uint64_t)d, where, sizeof(where));
	harness_fail(__FILE__, __LINE__,
		     "case %d (%s %u B, %d SGE%s%s): %s buffer offset %lld, "
		     "%s: 0x%02x, expected 0x%02x%s (%llu bytes differ)",
		     c, op_name(t->op), t->size, t->nsge,
		     t->nsge > 1 ? "s" : "", t->inl ? ", inline" : "", who,
		     (long long)d, where, got[d], want[d],
		     want[d] == EP_SENTINEL ? " (the sentinel: nothing may "
					      "write there)" : "",
		     (unsigned long long)bad);
}

/* The layouts: the requester's local buffer; the responder's receive
 * buffer (SEND), or its remote range (WRITE, READ, atomics). */
static struct layout local_layout(const struct tcase *t)
{
	return (struct layout){ SRC_BASE, t->nsge, 0, t->size };
}

static struct layout remote_layout(const struct tcase *t)
{
	if (op_is_send(t->op))
		return (struct layout){ DST_BASE, t->nsge,
					t->type == IBV_QPT_UD ? GRH : 0,
					t->size };
	return (struct layout){ DST_BASE, 1, 0, t->size };
}

static void qp_state(struct ibv_qp *qp, enum ibv_qp_state s)
{
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_state = s;
	ASSERT_EQ(ibv_modify_qp(qp, &a, IBV_QP_STATE), 0);
}

/* ------------------------------------------------------------------ */
/* Responder side                                                      */

static void responder_prepare(struct side *sd, const struct tcase *t, int c)
{
	struct ep *b = &sd->e;
	struct layout l = remote_layout(t);
	uint32_t msg = seed_of(t, c, SEED_MSG);

	memset(b->buf, EP_SENTINEL, b->size);
	if (t->op == IBV_WR_RDMA_READ)
		put_msg(b->buf, &l, msg);
	if (op_is_atomic(t->op)) {
		uint64_t v = word_of(seed_of(t, c, SEED_ORIG));

		memcpy(b->buf + DST_BASE, &v, 8);
	}
	memcpy(sd->want, b->buf, b->size);
	if (op_is_send(t->op) || op_is_write(t->op))
		put_msg(sd->want, &l, msg);
	if (op_is_atomic(t->op)) {
		uint64_t v = atomic_result(t, c);

		memcpy(sd->want + DST_BASE, &v, 8);
	}
	if (op_has_recv(t->op)) {
		struct ibv_sge sge[MAX_SGE];
		struct ibv_recv_wr wr, *bad;

		fill_sges(b, &l, b->mr->lkey, sge);
		memset(&wr, 0, sizeof(wr));
		wr.wr_id = 0xb000 + (uint64_t)c;
		wr.sg_list = sge;
		wr.num_sge = t->op == IBV_WR_RDMA_WRITE_WITH_IMM ? 0 : t->nsge;
		ASSERT_EQ(ibv_post_recv(b->qp, &wr, &bad), 0);
	}
}

/*
 * A UC RDMA WRITE completes at the requester once it is sent (no ACK): on
 * the net path its data may still be on the way when the responder looks.
 * Wait for it, at most ~10 s (the check that follows says what is wrong
 * then).  RC completes on the ACK, and a write with immediate is waited
 * for through its receive completion.  On the same host the data is there
 * at once.
 */
static void wait_written(struct side *sd, const struct tcase *t)
{
	/* another thread or process writes it: read it afresh each time
	 * (TSan builds refuse atomic_thread_fence) */
	const volatile uint8_t *buf = sd->e.buf;
	struct timespec t0, now;
	uint32_t i;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		for (i = 0; i < t->size; i++)
			if (buf[DST_BASE + i] != sd->want[DST_BASE + i])
				break;
		if (i == t->size)
			return;
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (now.tv_sec - t0.tv_sec > 10)
			return;
		usleep(100);
	}
}

static uint16_t be16_at(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

/*
 * The 40 bytes before a UD payload (IBA A17.4.5.1, RoCE v2): over IPv4 the
 * first 20 are zero in softhca and the last 20 are the IPv4 header; over
 * IPv6 the IPv6 header.  Lengths count UDP (8), BTH (12), DETH (8), the
 * payload and the ICRC (4).  The TTL or hop limit is the path's, not
 * checked beyond "not 0".
 */
static void check_grh(const uint8_t *g, const union ibv_gid *src,
		      const union ibv_gid *dst, uint32_t size, int c)
{
	uint32_t l4 = 8 + 12 + 8 + size + 4, sum = 0;
	static const uint8_t zero[20];
	int i;

	if (gid_v4(src)) {
		const uint8_t *ip = g + 20;

		if (memcmp(g, zero, 20))
			harness_fail(__FILE__, __LINE__, "case %d: GRH bytes "
				     "0-19 are not zero over IPv4", c);
		for (i = 0; i < 20; i += 2)
			sum += be16_at(ip + i);
		while (sum >> 16)
			sum = (sum & 0xffff) + (sum >> 16);
		if (ip[0] != 0x45 || be16_at(ip + 2) != 20 + l4 ||
		    ip[8] == 0 || ip[9] != 17 || sum != 0xffff ||
		    memcmp(ip + 12, src->raw + 12, 4) ||
		    memcmp(ip + 16, dst->raw + 12, 4))
			harness_fail(__FILE__, __LINE__,
				     "case %d: the GRH's IPv4 header: "
				     "version/ihl 0x%02x (0x45), total "
				     "length %u (%u), TTL %u, protocol %u "
				     "(17), checksum %s, %u.%u.%u.%u -> "
				     "%u.%u.%u.%u", c, ip[0], be16_at(ip + 2),
				     20 + l4, ip[8], ip[9],
				     sum == 0xffff ? "good" : "bad", ip[12],
				     ip[13], ip[14], ip[15], ip[16], ip[17],
				     ip[18], ip[19]);
	} else if (g[0] >> 4 != 6 || be16_at(g + 4) != l4 || g[6] != 17 ||
		   g[7] == 0 || memcmp(g + 8, src->raw, 16) ||
		   memcmp(g + 24, dst->raw, 16)) {
		harness_fail(__FILE__, __LINE__,
			     "case %d: the GRH's IPv6 header: version %u, "
			     "payload length %u (%u), next header %u (17), "
			     "hop limit %u, or its GIDs are not the "
			     "sender's and the receiver's", c, g[0] >> 4,
			     be16_at(g + 4), l4, g[6], g[7]);
	}
}

static void responder_check(struct side *sd, const struct tcase *t, int c)
{
	struct ep *b = &sd->e;
	struct layout l = remote_layout(t);
	uint32_t grh = t->type == IBV_QPT_UD ? GRH : 0;

	if (op_has_recv(t->op)) {
		struct ibv_wc wc;

		ep_poll(b->rcq, &wc, 1);
		if (wc.status != IBV_WC_SUCCESS)
			harness_fail(__FILE__, __LINE__,
				     "case %d (%s %u B): receive %s", c,
				     op_name(t->op), t->size,
				     ibv_wc_status_str(wc.status));
		ASSERT_EQ(wc.wr_id, 0xb000 + (uint64_t)c);
		ASSERT_EQ(wc.opcode, t->op == IBV_WR_RDMA_WRITE_WITH_IMM ?
					     IBV_WC_RECV_RDMA_WITH_IMM :
					     IBV_WC_RECV);
		ASSERT_EQ(wc.byte_len, t->size + grh);
		ASSERT_EQ(wc.qp_num, b->qp->qp_num);
		ASSERT_EQ(wc.src_qp, b->peer.qpn);
		if (t->op == IBV_WR_SEND) {
			ASSERT_EQ(wc.wc_flags & IBV_WC_WITH_IMM, 0);
		} else {
			ASSERT(wc.wc_flags & IBV_WC_WITH_IMM);
			ASSERT_EQ(ntohl(wc.imm_data),
				  0x12340000u + (uint32_t)c);
		}
		ASSERT_EQ(!!(wc.wc_flags & IBV_WC_GRH),
			  t->type == IBV_QPT_UD);
		/* UD over RoCE v2: the network header type, as mlx5 */
		ASSERT_EQ(wc.sl, t->type == IBV_QPT_UD ?
					 roce_l3_type(&b->self.gid) :
					 0);
	}
	if (t->op == IBV_WR_RDMA_WRITE && t->type == IBV_QPT_UC)
		wait_written(sd, t);
	if (grh) {
		/* the GRH is checked field by field, then taken as is */
		check_grh(b->buf + DST_BASE, &b->peer.gid, &b->self.gid,
			  t->size, c);
		memcpy(sd->want + DST_BASE, b->buf + DST_BASE, GRH);
	}
	check_image(sd, &l, "responder", t, c);
}

/* ------------------------------------------------------------------ */
/* Requester side                                                      */

static void requester_run(struct side *sd, const struct tcase *t, int c)
{
	struct ep *a = &sd->e;
	struct layout l = local_layout(t);
	uint32_t msg = seed_of(t, c, SEED_MSG);
	struct ibv_send_wr wr, *bad;
	struct ibv_sge sge[MAX_SGE];
	struct ibv_wc wc;

	memset(a->buf, EP_SENTINEL, a->size);
	if (op_is_send(t->op) || op_is_write(t->op))
		put_msg(a->buf, &l, msg);
	memcpy(sd->want, a->buf, a->size);
	if (t->op == IBV_WR_RDMA_READ)
		put_msg(sd->want, &l, msg);
	if (op_is_atomic(t->op)) {
		uint64_t v = word_of(seed_of(t, c, SEED_ORIG));

		memcpy(sd->want + SRC_BASE, &v, 8);
	}
	fill_sges(a, &l, t->inl ? BAD_LKEY : a->mr->lkey, sge);
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = 0xa000 + (uint64_t)c;
	wr.sg_list = sge;
	wr.num_sge = t->nsge;
	wr.opcode = t->op;
	wr.send_flags = IBV_SEND_SIGNALED | (t->inl ? IBV_SEND_INLINE : 0);
	wr.imm_data = htonl(0x12340000u + (uint32_t)c);
	switch (t->op) {
	case IBV_WR_RDMA_WRITE:
	case IBV_WR_RDMA_WRITE_WITH_IMM:
	case IBV_WR_RDMA_READ:
		wr.wr.rdma.remote_addr = a->peer.addr + DST_BASE;
		wr.wr.rdma.rkey = a->peer.rkey;
		break;
	case IBV_WR_ATOMIC_CMP_AND_SWP:
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
		wr.wr.atomic.remote_addr = a->peer.addr + DST_BASE;
		wr.wr.atomic.rkey = a->peer.rkey;
		if (t->op == IBV_WR_ATOMIC_FETCH_AND_ADD) {
			wr.wr.atomic.compare_add =
				word_of(seed_of(t, c, SEED_OPERAND));
		} else {
			wr.wr.atomic.compare_add =
				word_of(seed_of(t, c, SEED_ORIG));
			wr.wr.atomic.swap =
				word_of(seed_of(t, c, SEED_OPERAND));
		}
		break;
	default:
		break;
	}
	if (t->type == IBV_QPT_UD) {
		wr.wr.ud.ah = a->ah;
		wr.wr.ud.remote_qpn = a->peer.qpn;
		wr.wr.ud.remote_qkey = 0x11111111;
	}
	if (t->inl) {
		/* posted, not started; the source changed; then started */
		qp_state(a->qp, IBV_QPS_SQD);
		ASSERT_EQ(ibv_post_send(a->qp, &wr, &bad), 0);
		put_msg(a->buf, &l, seed_of(t, c, SEED_OVERWRITE));
		put_msg(sd->want, &l, seed_of(t, c, SEED_OVERWRITE));
		qp_state(a->qp, IBV_QPS_RTS);
	} else {
		ASSERT_EQ(ibv_post_send(a->qp, &wr, &bad), 0);
	}
	ep_poll(a->scq, &wc, 1);
	if (wc.status != IBV_WC_SUCCESS)
		harness_fail(__FILE__, __LINE__,
			     "case %d (%s %u B, %d SGEs%s): %s", c,
			     op_name(t->op), t->size, t->nsge,
			     t->inl ? ", inline" : "",
			     ibv_wc_status_str(wc.status));
	ASSERT_EQ(wc.wr_id, 0xa000 + (uint64_t)c);
	ASSERT_EQ(wc.qp_num, a->qp->qp_num);
	/* the sender's completion says "with immediate" too (mlx5, rxe) */
	ASSERT_EQ(!!(wc.wc_flags & IBV_WC_WITH_IMM),
		  t->op == IBV_WR_SEND_WITH_IMM ||
			  t->op == IBV_WR_RDMA_WRITE_WITH_IMM);
	/* byte_len: ibv_poll_cq(3) defines it on the send side for READ
	 * and atomics only; SEND and WRITE leave it out */
	switch (t->op) {
	case IBV_WR_RDMA_WRITE:
	case IBV_WR_RDMA_WRITE_WITH_IMM:
		ASSERT_EQ(wc.opcode, IBV_WC_RDMA_WRITE);
		break;
	case IBV_WR_RDMA_READ:
		ASSERT_EQ(wc.opcode, IBV_WC_RDMA_READ);
		ASSERT_EQ(wc.byte_len, t->size);
		break;
	case IBV_WR_ATOMIC_CMP_AND_SWP:
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
		ASSERT_EQ(wc.opcode, t->op == IBV_WR_ATOMIC_CMP_AND_SWP ?
					     IBV_WC_COMP_SWAP :
					     IBV_WC_FETCH_ADD);
		ASSERT_EQ(wc.byte_len, 8);
		break;
	default:
		ASSERT_EQ(wc.opcode, IBV_WC_SEND);
		break;
	}
	check_image(sd, &l, "requester", t, c);
}

/* ------------------------------------------------------------------ */

static void side_create(struct side *sd, struct ep_opts *o,
			enum ibv_qp_type type)
{
	ep_default_opts(o, type);
	o->buf_size = BUF_SIZE;
	o->max_sge = MAX_SGE;
	o->max_inline = MAX_INLINE;
	ep_create(&sd->e, o);
	sd->want = malloc(BUF_SIZE);
	ASSERT_NOT_NULL(sd->want);
}

static void side_destroy(struct side *sd)
{
	ep_destroy(&sd->e);
	free(sd->want);
}

/* The bytes the cases move (the net path's evidence: at least these). */
static uint64_t bytes_moved(void)
{
	uint64_t n = 0;
	int c;

	for (c = 0; c < ncases; c++)
		n += cases[c].size;
	return n;
}

/* SOFTHCA_NET=1 for this case's process (and the responder it forks);
 * UD: its datagrams written to a pcap file in dir (the evidence). */
static void net_path_on(enum ibv_qp_type type, char *dir, size_t n)
{
	char pcap[256];

	setenv("SOFTHCA_NET", "1", 1);
	if (type != IBV_QPT_UD)
		return;
	snprintf(dir, n, "/tmp/shca-matrix-XXXXXX");
	ASSERT_NOT_NULL(mkdtemp(dir));
	snprintf(pcap, sizeof(pcap), "%s/%%p.pcap", dir);
	setenv("SOFTHCA_PCAP", pcap, 1);
}

/* The cases' bytes crossed this process's TCP sockets (RC, UC), or its
 * pcap file holds a record of every UD datagram it sent; the files go. */
static void net_path_check(enum ibv_qp_type type, const char *dir,
			   pid_t responder)
{
	char path[300];

	if (type != IBV_QPT_UD) {
		uint64_t tcp = ep_tcp_bytes(), want = bytes_moved();

		printf("  net path: %llu bytes through TCP (the cases move "
		       "%llu)\n", (unsigned long long)tcp,
		       (unsigned long long)want);
		if (tcp < want)
			harness_fail(__FILE__, __LINE__,
				     "SOFTHCA_NET=1, yet this process's TCP "
				     "sockets moved %llu bytes, fewer than the "
				     "%llu of the cases",
				     (unsigned long long)tcp,
				     (unsigned long long)want);
		return;
	}
	snprintf(path, sizeof(path), "%s/%d.pcap", dir, (int)getpid());
	{
		uint64_t recs = ep_pcap_records(path);

		printf("  net path: %llu packets in SOFTHCA_PCAP (%d "
		       "datagrams sent)\n", (unsigned long long)recs, ncases);
		if (recs < (uint64_t)ncases)
			harness_fail(__FILE__, __LINE__,
				     "SOFTHCA_NET=1, yet %s holds %llu "
				     "packets, fewer than the %d datagrams "
				     "sent", path, (unsigned long long)recs,
				     ncases);
	}
	unlink(path);
	if (responder > 0) {
		snprintf(path, sizeof(path), "%s/%d.pcap", dir,
			 (int)responder);
		unlink(path);
	}
	rmdir(dir);
}

static void run_same_process(enum ibv_qp_type type, bool net)
{
	struct side a, b;
	struct ep_opts o;
	char dir[64] = "";
	int c;

	ep_skip_if_netns();
	if (net)
		net_path_on(type, dir, sizeof(dir));
	side_create(&a, &o, type);
	side_create(&b, &o, type);
	build_cases(type, ep_mtu_bytes(&a.e));
	a.e.peer = b.e.self;
	b.e.peer = a.e.self;
	ep_connect(&a.e, &o);
	ep_connect(&b.e, &o);
	for (c = 0; c < ncases; c++) {
		responder_prepare(&b, &cases[c], c);
		requester_run(&a, &cases[c], c);
		responder_check(&b, &cases[c], c);
	}
	printf("  %d cases\n", ncases);
	if (net)
		net_path_check(type, dir, 0);
	side_destroy(&a);
	side_destroy(&b);
}

static void responder_process(int fd, enum ibv_qp_type type)
{
	struct side b;
	struct ep_opts o;
	int c;

	ep_netns_child();
	side_create(&b, &o, type);
	build_cases(type, ep_mtu_bytes(&b.e));
	ep_exchange(fd, &b.e.self, &b.e.peer);
	ep_connect(&b.e, &o);
	for (;;) {
		char ack = 'R';

		xread(fd, &c, sizeof(c));
		if (c < 0)
			break;
		responder_prepare(&b, &cases[c], c);
		xwrite(fd, &ack, 1);
		xread(fd, &ack, 1);
		responder_check(&b, &cases[c], c);
		xwrite(fd, &ack, 1);
	}
	side_destroy(&b);
	_exit(0);
}

static void run_two_process(enum ibv_qp_type type, bool net)
{
	struct side a;
	struct ep_opts o;
	int sv[2], c, status;
	char dir[64] = "";
	pid_t pid;

	if (net)
		net_path_on(type, dir, sizeof(dir));
	ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	fflush(stdout);
	pid = fork();
	ASSERT_GE(pid, 0);
	if (pid == 0) {
		close(sv[0]);
		responder_process(sv[1], type);
	}
	close(sv[1]);
	side_create(&a, &o, type);
	build_cases(type, ep_mtu_bytes(&a.e));
	ep_exchange(sv[0], &a.e.self, &a.e.peer);
	ep_connect(&a.e, &o);
	for (c = 0; c < ncases; c++) {
		char ack;

		xwrite(sv[0], &c, sizeof(c));
		xread(sv[0], &ack, 1);
		requester_run(&a, &cases[c], c);
		xwrite(sv[0], &ack, 1);
		if (read(sv[0], &ack, 1) != 1) {
			kill(pid, SIGKILL);
			harness_fail(__FILE__, __LINE__,
				     "responder failed case %d", c);
		}
	}
	printf("  %d cases\n", ncases);
	/* while the connections are open */
	if (net)
		net_path_check(type, dir, pid);
	c = -1;
	xwrite(sv[0], &c, sizeof(c));
	ASSERT_EQ(waitpid(pid, &status, 0), pid);
	ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	side_destroy(&a);
}

TEST(rc_same_process) { run_same_process(IBV_QPT_RC, false); }
TEST(uc_same_process) { run_same_process(IBV_QPT_UC, false); }
TEST(ud_same_process) { run_same_process(IBV_QPT_UD, false); }
TEST(rc_two_process) { run_two_process(IBV_QPT_RC, false); }
TEST(uc_two_process) { run_two_process(IBV_QPT_UC, false); }
TEST(ud_two_process) { run_two_process(IBV_QPT_UD, false); }
/* the same cases on the net path (SOFTHCA_NET=1) */
TEST(rc_same_process_net) { run_same_process(IBV_QPT_RC, true); }
TEST(uc_same_process_net) { run_same_process(IBV_QPT_UC, true); }
TEST(ud_same_process_net) { run_same_process(IBV_QPT_UD, true); }
TEST(rc_two_process_net) { run_two_process(IBV_QPT_RC, true); }
TEST(uc_two_process_net) { run_two_process(IBV_QPT_UC, true); }
TEST(ud_two_process_net) { run_two_process(IBV_QPT_UD, true); }
