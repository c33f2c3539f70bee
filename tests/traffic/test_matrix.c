// SPDX-License-Identifier: MIT
/*
 * The traffic matrix: transport (RC, UC, UD) x opcode x size x SGE count x
 * inline, between two QPs of one process and between two processes.  Every
 * byte placed and every completion field is checked on both sides.
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
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "ep.h"

#define GRH 40

struct tcase {
	enum ibv_qp_type type;
	enum ibv_wr_opcode op;
	uint32_t size;
	int nsge;
	bool inl;
};


/* What a RoCE v2 UD receive reports in wc.sl (mlx5's roce_pkt_type):
 * 2 for IPv4 (an IPv4-mapped GID), 1 for IPv6. */
static int roce_l3_type(const union ibv_gid *g)
{
	static const uint8_t v4mapped[12] = { [10] = 0xff, [11] = 0xff };

	return memcmp(g->raw, v4mapped, 12) ? 1 : 2;
}
static struct tcase cases[4096];
static int ncases;

static bool op_has_recv(enum ibv_wr_opcode op)
{
	return op == IBV_WR_SEND || op == IBV_WR_SEND_WITH_IMM ||
	       op == IBV_WR_RDMA_WRITE_WITH_IMM;
}

static bool op_is_atomic(enum ibv_wr_opcode op)
{
	return op == IBV_WR_ATOMIC_CMP_AND_SWP ||
	       op == IBV_WR_ATOMIC_FETCH_AND_ADD;
}

/* ud_max: the largest UD payload, the MTU of the endpoint's port */
static void build_cases(enum ibv_qp_type type, uint32_t ud_max)
{
	static const enum ibv_wr_opcode rc_ops[] = {
		IBV_WR_SEND, IBV_WR_SEND_WITH_IMM, IBV_WR_RDMA_WRITE,
		IBV_WR_RDMA_WRITE_WITH_IMM, IBV_WR_RDMA_READ,
		IBV_WR_ATOMIC_CMP_AND_SWP, IBV_WR_ATOMIC_FETCH_AND_ADD,
	};
	static const uint32_t sizes[] = { 0, 1, 63, 4096, 65537, 1 << 20 };
	uint32_t ud_sizes[] = { 0, 1, 1000, 4096 };
	static const int sges[] = { 1, 2, 4 };
	unsigned int o, s, g, i;

	if (ud_max < ud_sizes[3])
		ud_sizes[3] = ud_max;
	ncases = 0;
	for (o = 0; o < sizeof(rc_ops) / sizeof(rc_ops[0]); o++) {
		enum ibv_wr_opcode op = rc_ops[o];
		const uint32_t *sz = type == IBV_QPT_UD ? ud_sizes : sizes;
		unsigned int nsz = type == IBV_QPT_UD ? 4 : 6;

		if (type == IBV_QPT_UC &&
		    (op == IBV_WR_RDMA_READ || op_is_atomic(op)))
			continue;
		if (type == IBV_QPT_UD && op != IBV_WR_SEND &&
		    op != IBV_WR_SEND_WITH_IMM)
			continue;
		if (op_is_atomic(op)) {
			cases[ncases++] = (struct tcase){ type, op, 8, 1,
							  false };
			continue;
		}
		for (s = 0; s < nsz; s++)
			for (g = 0; g < 3; g++)
				for (i = 0; i < 2; i++) {
					bool inl = i;

					if (inl && (sz[s] > 256 ||
						    op == IBV_WR_RDMA_READ))
						continue;
					if (sges[g] > 1 && sz[s] < 4)
						continue;
					cases[ncases++] = (struct tcase){
						type, op, sz[s], sges[g], inl
					};
				}
	}
}

static uint8_t pattern(int c, uint32_t i)
{
	return (uint8_t)(c * 31 + i * 7 + (i >> 8));
}

/* Piece k of an n-way split of size bytes: offset in the buffer, length */
static void piece(const struct tcase *t, int k, uint32_t base, uint64_t *off,
		  uint32_t *len)
{
	uint32_t part = t->size / (uint32_t)t->nsge;

	*len = k == t->nsge - 1 ? t->size - part * (uint32_t)(t->nsge - 1) :
				  part;
	*off = base + (uint64_t)k * (part + 64);
}

static void fill_sges(struct ep *e, const struct tcase *t, uint32_t base,
		      uint32_t extra_first, struct ibv_sge *sge)
{
	int k;

	for (k = 0; k < t->nsge; k++) {
		uint64_t off;
		uint32_t len;

		piece(t, k, base, &off, &len);
		if (k == 0)
			len += extra_first;
		else
			off += extra_first;
		sge[k].addr = (uintptr_t)e->buf + off;
		sge[k].length = len;
		sge[k].lkey = e->mr->lkey;
	}
}

/* Message byte i lives at this offset of a buffer split like sges. */
static uint64_t msg_off(const struct tcase *t, uint32_t base,
			uint32_t extra_first, uint32_t i)
{
	uint32_t part = t->size / (uint32_t)t->nsge;
	int k = part ? (int)(i / part) : 0;
	uint64_t off;
	uint32_t len;

	if (k >= t->nsge)
		k = t->nsge - 1;
	piece(t, k, base, &off, &len);
	/* the first piece starts with extra_first bytes (the UD GRH), and
	 * the later ones were moved along by as much */
	return off + extra_first + (i - (uint32_t)k * part);
}

#define SRC_BASE 0
#define DST_BASE (2u << 20)

/* ------------------------------------------------------------------ */
/* Responder side                                                      */

static void responder_prepare(struct ep *b, const struct tcase *t, int c)
{
	uint32_t i, grh = t->type == IBV_QPT_UD ? GRH : 0;

	memset(b->buf, 0, b->size);
	if (op_has_recv(t->op)) {
		struct ibv_sge sge[4];
		struct ibv_recv_wr wr, *bad;

		fill_sges(b, t, DST_BASE, grh, sge);
		memset(&wr, 0, sizeof(wr));
		wr.wr_id = 0xb000 + (uint64_t)c;
		wr.sg_list = sge;
		wr.num_sge = t->op == IBV_WR_RDMA_WRITE_WITH_IMM ? 0 : t->nsge;
		ASSERT_EQ(ibv_post_recv(b->qp, &wr, &bad), 0);
	}
	if (t->op == IBV_WR_RDMA_READ)
		for (i = 0; i < t->size; i++)
			b->buf[DST_BASE + i] = pattern(c, i);
	if (op_is_atomic(t->op)) {
		uint64_t v = 1000 + (uint64_t)c;

		memcpy(b->buf + DST_BASE, &v, 8);
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
static void wait_written(struct ep *b, const struct tcase *t, int c)
{
	/* another thread or process writes it: read it afresh each time
	 * (TSan builds refuse atomic_thread_fence) */
	const volatile unsigned char *buf = b->buf;
	struct timespec t0, now;
	uint32_t i;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		for (i = 0; i < t->size; i++)
			if (buf[DST_BASE + i] != pattern(c, i))
				break;
		if (i == t->size)
			return;
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (now.tv_sec - t0.tv_sec > 10)
			return;
		usleep(100);
	}
}

static void responder_check(struct ep *b, const struct tcase *t, int c)
{
	uint32_t i, grh = t->type == IBV_QPT_UD ? GRH : 0;

	if (op_has_recv(t->op)) {
		struct ibv_wc wc;

		ep_poll(b->rcq, &wc, 1);
		ASSERT_EQ(wc.status, IBV_WC_SUCCESS);
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
			ASSERT_EQ(ntohl(wc.imm_data), 0x12340000u + (uint32_t)c);
		}
		ASSERT_EQ(!!(wc.wc_flags & IBV_WC_GRH),
			  t->type == IBV_QPT_UD);
		/* UD over RoCE v2: the network header type, as mlx5 */
		ASSERT_EQ(wc.sl, t->type == IBV_QPT_UD ?
					 roce_l3_type(&b->self.gid) :
					 0);
	}
	if (t->op == IBV_WR_SEND || t->op == IBV_WR_SEND_WITH_IMM) {
		for (i = 0; i < t->size; i++)
			if (b->buf[msg_off(t, DST_BASE, grh, i)] !=
			    pattern(c, i))
				harness_fail(__FILE__, __LINE__,
					     "case %d: byte %u differs", c, i);
	}
	if (t->op == IBV_WR_RDMA_WRITE && t->type == IBV_QPT_UC)
		wait_written(b, t, c);
	if (t->op == IBV_WR_RDMA_WRITE || t->op == IBV_WR_RDMA_WRITE_WITH_IMM)
		for (i = 0; i < t->size; i++)
			if (b->buf[DST_BASE + i] != pattern(c, i))
				harness_fail(__FILE__, __LINE__,
					     "case %d: byte %u differs", c, i);
	if (op_is_atomic(t->op)) {
		uint64_t v, want = t->op == IBV_WR_ATOMIC_FETCH_AND_ADD ?
					    1000 + (uint64_t)c + 5 :
					    77;

		memcpy(&v, b->buf + DST_BASE, 8);
		ASSERT_U64_EQ(v, want);
	}
}

/* ------------------------------------------------------------------ */
/* Requester side                                                      */

static void requester_run(struct ep *a, const struct tcase *t, int c)
{
	struct ibv_send_wr wr, *bad;
	struct ibv_sge sge[4];
	struct ibv_wc wc;
	uint32_t i;

	memset(a->buf, 0, a->size);
	if (t->op != IBV_WR_RDMA_READ && !op_is_atomic(t->op))
		for (i = 0; i < t->size; i++)
			a->buf[msg_off(t, SRC_BASE, 0, i)] = pattern(c, i);
	fill_sges(a, t, SRC_BASE, 0, sge);
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
		wr.wr.atomic.compare_add =
			t->op == IBV_WR_ATOMIC_FETCH_AND_ADD ? 5 :
							       1000 + (uint64_t)c;
		wr.wr.atomic.swap = 77;
		break;
	default:
		break;
	}
	if (t->type == IBV_QPT_UD) {
		wr.wr.ud.ah = a->ah;
		wr.wr.ud.remote_qpn = a->peer.qpn;
		wr.wr.ud.remote_qkey = 0x11111111;
	}
	ASSERT_EQ(ibv_post_send(a->qp, &wr, &bad), 0);
	ep_poll(a->scq, &wc, 1);
	if (wc.status != IBV_WC_SUCCESS)
		harness_fail(__FILE__, __LINE__, "case %d (op %d size %u): %s",
			     c, t->op, t->size, ibv_wc_status_str(wc.status));
	ASSERT_EQ(wc.wr_id, 0xa000 + (uint64_t)c);
	ASSERT_EQ(wc.qp_num, a->qp->qp_num);
	/* the sender's completion says "with immediate" too (mlx5, rxe) */
	ASSERT_EQ(!!(wc.wc_flags & IBV_WC_WITH_IMM),
		  t->op == IBV_WR_SEND_WITH_IMM ||
			  t->op == IBV_WR_RDMA_WRITE_WITH_IMM);
	switch (t->op) {
	case IBV_WR_RDMA_WRITE:
	case IBV_WR_RDMA_WRITE_WITH_IMM:
		ASSERT_EQ(wc.opcode, IBV_WC_RDMA_WRITE);
		break;
	case IBV_WR_RDMA_READ:
		ASSERT_EQ(wc.opcode, IBV_WC_RDMA_READ);
		ASSERT_EQ(wc.byte_len, t->size);
		for (i = 0; i < t->size; i++)
			if (a->buf[msg_off(t, SRC_BASE, 0, i)] != pattern(c, i))
				harness_fail(__FILE__, __LINE__,
					     "case %d: read byte %u differs",
					     c, i);
		break;
	case IBV_WR_ATOMIC_CMP_AND_SWP:
	case IBV_WR_ATOMIC_FETCH_AND_ADD: {
		uint64_t orig;

		ASSERT_EQ(wc.opcode, t->op == IBV_WR_ATOMIC_CMP_AND_SWP ?
					     IBV_WC_COMP_SWAP :
					     IBV_WC_FETCH_ADD);
		ASSERT_EQ(wc.byte_len, 8);
		memcpy(&orig, a->buf + SRC_BASE, 8);
		ASSERT_U64_EQ(orig, 1000 + (uint64_t)c);
		break;
	}
	default:
		ASSERT_EQ(wc.opcode, IBV_WC_SEND);
		break;
	}
}

/* ------------------------------------------------------------------ */

static void run_same_process(enum ibv_qp_type type)
{
	struct ep a, b;
	struct ep_opts o;
	int c;

	ep_skip_if_netns();
	ep_default_opts(&o, type);
	ep_create(&a, &o);
	ep_create(&b, &o);
	build_cases(type, ep_mtu_bytes(&a));
	a.peer = b.self;
	b.peer = a.self;
	ep_connect(&a, &o);
	ep_connect(&b, &o);
	for (c = 0; c < ncases; c++) {
		responder_prepare(&b, &cases[c], c);
		requester_run(&a, &cases[c], c);
		responder_check(&b, &cases[c], c);
	}
	printf("  %d cases\n", ncases);
	ep_destroy(&a);
	ep_destroy(&b);
}

static void responder_process(int fd, enum ibv_qp_type type)
{
	struct ep b;
	struct ep_opts o;
	int c;

	ep_netns_child();
	ep_default_opts(&o, type);
	ep_create(&b, &o);
	build_cases(type, ep_mtu_bytes(&b));
	ep_exchange(fd, &b.self, &b.peer);
	ep_connect(&b, &o);
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
	ep_destroy(&b);
	_exit(0);
}

static void run_two_process(enum ibv_qp_type type)
{
	struct ep a;
	struct ep_opts o;
	int sv[2], c, status;
	pid_t pid;

	ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	pid = fork();
	ASSERT_GE(pid, 0);
	if (pid == 0) {
		close(sv[0]);
		responder_process(sv[1], type);
	}
	close(sv[1]);
	ep_default_opts(&o, type);
	ep_create(&a, &o);
	build_cases(type, ep_mtu_bytes(&a));
	ep_exchange(sv[0], &a.self, &a.peer);
	ep_connect(&a, &o);
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
	c = -1;
	xwrite(sv[0], &c, sizeof(c));
	ASSERT_EQ(waitpid(pid, &status, 0), pid);
	ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	printf("  %d cases\n", ncases);
	ep_destroy(&a);
}

TEST(rc_same_process) { run_same_process(IBV_QPT_RC); }
TEST(uc_same_process) { run_same_process(IBV_QPT_UC); }
TEST(ud_same_process) { run_same_process(IBV_QPT_UD); }
TEST(rc_two_process) { run_two_process(IBV_QPT_RC); }
TEST(uc_two_process) { run_two_process(IBV_QPT_UC); }
TEST(ud_two_process) { run_two_process(IBV_QPT_UD); }
