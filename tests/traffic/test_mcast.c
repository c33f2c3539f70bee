// SPDX-License-Identifier: MIT
/*
 * UD multicast between processes: QPs attached to a group receive what a
 * sender posts to QPN 0xFFFFFF with the group's GID; detached QPs and
 * other groups do not; the sender's own attached QP gets a copy
 * (multicast loopback, on as on mlx5 unless a QP was created with
 * IBV_QP_CREATE_BLOCK_SELF_MCAST_LB, which softhca refuses).
 *
 * What must not arrive is checked by a positive marker, not by a pause:
 * after a message that must miss QP a, a marker goes to a group a is
 * still in, and a's next completion must be the marker (a same-host
 * sender places every member's copy before its own completion, in order).
 * Every byte of each 100-byte message is a per-message pattern with no
 * zero and no sentinel byte; receive buffers start as 0xA5, and the 64
 * bytes after each message must still be 0xA5.  The GRH is checked as a
 * RoCE v2 receiver sees it (IPv4 header in its last 20 bytes: version,
 * length, protocol, TTL, checksum, source and group addresses).
 *
 * The groups are 239.n.P.P with P this run's pid, so that two runs of this
 * test at once (the host table is per user, not per port base) never
 * share a group.
 */
#include <arpa/inet.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "ep.h"

#define QKEY		0x11111111
#define GRH		40
#define LEN		100	/* payload of every message */
#define SLOT		8192	/* receive slots in the buffer */
#define GUARD		64	/* after a message: untouched */
#define SENTINEL	0xa5

/* The messages, by the seed of their pattern. */
enum msg { NONE, ONE, TWO, THREE, MARK1, MARK2, LOOP, NMSG };

static const char *const msg_name[NMSG] = {
	"none", "one (group 1)", "two (group 2)", "three (group 1)",
	"marker 1", "marker 2", "loopback (group 4)",
};

static pid_t run_pid;	/* the test case's process: names its groups */

static uint8_t pat(enum msg m, unsigned int i)
{
	unsigned int v = 1 + ((unsigned int)m * 53 + i * 7) % 251;

	return (uint8_t)(v == SENTINEL ? 0x5a : v);
}

/* Which message's pattern the LEN bytes at p are (NONE: none's). */
static enum msg which(const uint8_t *p)
{
	unsigned int m, i;

	for (m = ONE; m < NMSG; m++) {
		for (i = 0; i < LEN && p[i] == pat((enum msg)m, i); i++)
			;
		if (i == LEN)
			return (enum msg)m;
	}
	return NONE;
}

static void group_gid(union ibv_gid *g, int n)
{
	/* IPv4-mapped 239.n.P.P */
	memset(g, 0, sizeof(*g));
	g->raw[10] = 0xff;
	g->raw[11] = 0xff;
	g->raw[12] = 239;
	g->raw[13] = (uint8_t)n;
	g->raw[14] = (uint8_t)(run_pid >> 8);
	g->raw[15] = (uint8_t)run_pid;
}

static void post_slot(struct ep *e, uint64_t id, unsigned int slot)
{
	struct ibv_sge sge = { (uintptr_t)e->buf + slot * SLOT, 4096 + GRH,
			       e->mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = id, .sg_list = &sge, .num_sge = 1 };
	struct ibv_recv_wr *bad;

	ASSERT_EQ(ibv_post_recv(e->qp, &wr, &bad), 0);
}

static uint16_t ip_csum(const uint8_t *p, size_t len)
{
	uint32_t sum = 0;
	size_t i;

	for (i = 0; i + 1 < len; i += 2)
		sum += (uint32_t)p[i] << 8 | p[i + 1];
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)sum;
}

/* RoCE v2 over IPv4: the IPv4 header in the GRH's last 20 bytes (its
 * first 20 are undefined, as rdma-core documents). */
static void check_grh(const char *who, const uint8_t *g,
		      const union ibv_gid *src, const union ibv_gid *grp)
{
	const uint8_t *ip = g + 20;

	if (ip[0] != 0x45 || ip[9] != IPPROTO_UDP || ip[8] != 1)
		harness_fail(__FILE__, __LINE__, "%s: GRH IPv4 header: "
			     "ver/ihl 0x%02x protocol %u TTL %u, expected "
			     "0x45, 17 (UDP), 1 (the AH's hop limit)", who,
			     ip[0], ip[9], ip[8]);
	/* UDP 8 + BTH 12 + DETH 8 + payload + ICRC 4, and the IP header */
	if ((ip[2] << 8 | ip[3]) != 20 + 8 + 12 + 8 + LEN + 4)
		harness_fail(__FILE__, __LINE__, "%s: GRH total length %u, "
			     "expected %u", who, ip[2] << 8 | ip[3],
			     20 + 8 + 12 + 8 + LEN + 4);
	if (ip_csum(ip, 20) != 0xffff)
		harness_fail(__FILE__, __LINE__, "%s: GRH IPv4 checksum is "
			     "wrong", who);
	if (memcmp(ip + 12, src->raw + 12, 4))
		harness_fail(__FILE__, __LINE__, "%s: GRH source %u.%u.%u.%u "
			     "is not the sender's %u.%u.%u.%u", who, ip[12],
			     ip[13], ip[14], ip[15], src->raw[12],
			     src->raw[13], src->raw[14], src->raw[15]);
	if (memcmp(ip + 16, grp->raw + 12, 4))
		harness_fail(__FILE__, __LINE__, "%s: GRH destination "
			     "%u.%u.%u.%u is not the group %u.%u.%u.%u", who,
			     ip[16], ip[17], ip[18], ip[19], grp->raw[12],
			     grp->raw[13], grp->raw[14], grp->raw[15]);
}

/*
 * The next completion on e's receive CQ is receive wr_id (its slot is
 * wr_id too) holding message m from sender src to group grp: the
 * completion's fields, every payload byte, the guard after it, the GRH.
 */
static void expect_msg(const char *who, struct ep *e, uint64_t wr_id,
		       enum msg m, const struct ep_info *src,
		       const union ibv_gid *grp)
{
	const uint8_t *p = e->buf + wr_id * SLOT;
	struct ibv_wc wc;
	unsigned int i;

	ep_poll(e->rcq, &wc, 1);
	if (wc.status != IBV_WC_SUCCESS || wc.wr_id != wr_id)
		harness_fail(__FILE__, __LINE__, "%s: completion of receive "
			     "%llu, status %s; expected receive %llu with "
			     "message %s", who,
			     (unsigned long long)wc.wr_id,
			     ibv_wc_status_str(wc.status),
			     (unsigned long long)wr_id, msg_name[m]);
	if (which(p + GRH) != m)
		harness_fail(__FILE__, __LINE__, "%s: receive %llu holds "
			     "message %s, expected message %s", who,
			     (unsigned long long)wr_id,
			     msg_name[which(p + GRH)], msg_name[m]);
	ASSERT_EQ(wc.byte_len, GRH + LEN);
	ASSERT_EQ(wc.qp_num, e->qp->qp_num);
	ASSERT_EQ(wc.src_qp, src->qpn);
	ASSERT(wc.wc_flags & IBV_WC_GRH);
	ASSERT_EQ(wc.sl, 2);	/* RoCE v2 over IPv4, as mlx5 reports it */
	for (i = 0; i < LEN; i++)
		if (p[GRH + i] != pat(m, i))
			harness_fail(__FILE__, __LINE__, "%s: message %s, "
				     "byte %u is 0x%02x, expected 0x%02x",
				     who, msg_name[m], i, p[GRH + i],
				     pat(m, i));
	for (i = GRH + LEN; i < GRH + LEN + GUARD; i++)
		if (p[i] != SENTINEL)
			harness_fail(__FILE__, __LINE__, "%s: byte %u after "
				     "message %s is 0x%02x, written past the "
				     "%u bytes", who, i - GRH, msg_name[m],
				     p[i], LEN);
	check_grh(who, p, &src->gid, grp);
}

static void send_group(struct ep *s, int n, enum msg m)
{
	struct ibv_ah_attr aa;
	struct ibv_ah *ah;
	struct ibv_sge sge = { (uintptr_t)s->buf, LEN, s->mr->lkey };
	struct ibv_send_wr wr, *bad;
	struct ibv_wc wc;
	unsigned int i;

	memset(&aa, 0, sizeof(aa));
	aa.is_global = 1;
	group_gid(&aa.grh.dgid, n);
	aa.grh.hop_limit = 1;
	aa.port_num = 1;
	ah = ibv_create_ah(s->pd, &aa);
	ASSERT_NOT_NULL(ah);
	for (i = 0; i < LEN; i++)
		s->buf[i] = pat(m, i);
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = (uint64_t)m;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_SEND;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.wr.ud.ah = ah;
	wr.wr.ud.remote_qpn = 0xffffff;
	wr.wr.ud.remote_qkey = QKEY;
	ASSERT_EQ(ibv_post_send(s->qp, &wr, &bad), 0);
	ep_poll(s->scq, &wc, 1);
	ASSERT_EQ(wc.status, IBV_WC_SUCCESS);
	ASSERT_EQ(wc.wr_id, (uint64_t)m);
	ASSERT_EQ(ibv_destroy_ah(ah), 0);
}

/* Two UD endpoints of this process, each its own peer (for RTS only),
 * their buffers all sentinel. */
static void ud_ep(struct ep *e)
{
	struct ep_opts o;

	ep_default_opts(&o, IBV_QPT_UD);
	ep_create(e, &o);
	e->peer = e->self;
	ep_connect(e, &o);
	memset(e->buf, SENTINEL, e->size);
}

/*
 * a: groups 1 and 3; b: groups 1 and 2.  Receives: a 1 (one), 2 (marker
 * 1), 3 (marker 2); b 1 (one), 2 (two), 3 (three).
 */
static void receiver(int fd)
{
	union ibv_gid g1, g2, g3;
	struct ep_info src;
	struct ep a, b;
	char c = 'R';

	xread(fd, &src, sizeof(src));
	ud_ep(&a);
	ud_ep(&b);
	group_gid(&g1, 1);
	group_gid(&g2, 2);
	group_gid(&g3, 3);
	ASSERT_EQ(ibv_attach_mcast(a.qp, &g1, 0), 0);
	ASSERT_EQ(ibv_attach_mcast(a.qp, &g3, 0), 0);
	ASSERT_EQ(ibv_attach_mcast(b.qp, &g1, 0), 0);
	ASSERT_EQ(ibv_attach_mcast(b.qp, &g2, 0), 0);
	post_slot(&a, 1, 1);
	post_slot(&a, 2, 2);
	post_slot(&a, 3, 3);
	post_slot(&b, 1, 1);
	post_slot(&b, 2, 2);
	post_slot(&b, 3, 3);
	xwrite(fd, &c, 1);

	/* message one to group 1: both QPs */
	expect_msg("a", &a, 1, ONE, &src, &g1);
	expect_msg("b", &b, 1, ONE, &src, &g1);
	xwrite(fd, &c, 1);

	/* message two to group 2 reaches only b: a's next is marker 1 */
	expect_msg("b", &b, 2, TWO, &src, &g2);
	expect_msg("a", &a, 2, MARK1, &src, &g3);

	/* a leaves group 1: message three reaches b only, a's next is
	 * marker 2 */
	ASSERT_EQ(ibv_detach_mcast(a.qp, &g1, 0), 0);
	ASSERT_EQ(ibv_detach_mcast(a.qp, &g1, 0), EINVAL);
	xwrite(fd, &c, 1);
	expect_msg("b", &b, 3, THREE, &src, &g1);
	expect_msg("a", &a, 3, MARK2, &src, &g3);
	ep_expect_empty(a.rcq);
	ep_expect_empty(b.rcq);

	ASSERT_EQ(ibv_detach_mcast(a.qp, &g3, 0), 0);
	ASSERT_EQ(ibv_detach_mcast(b.qp, &g1, 0), 0);
	ASSERT_EQ(ibv_detach_mcast(b.qp, &g2, 0), 0);
	ep_destroy(&a);
	ep_destroy(&b);
	_exit(0);
}

TEST(ud_multicast_two_processes)
{
	struct ep s;
	int sv[2], status;
	char c;
	pid_t pid;

	run_pid = getpid();
	ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	pid = fork();
	ASSERT_GE(pid, 0);
	if (pid == 0) {
		close(sv[0]);
		receiver(sv[1]);
	}
	close(sv[1]);
	ud_ep(&s);
	xwrite(sv[0], &s.self, sizeof(s.self));
	xread(sv[0], &c, 1);
	send_group(&s, 1, ONE);
	xread(sv[0], &c, 1);
	send_group(&s, 2, TWO);
	send_group(&s, 3, MARK1);
	xread(sv[0], &c, 1);
	send_group(&s, 1, THREE);
	send_group(&s, 3, MARK2);
	ASSERT_EQ(waitpid(pid, &status, 0), pid);
	ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	ep_destroy(&s);
}

/*
 * Multicast loopback: a sender attached to the group receives its own
 * datagram, as does the group's other member (mlx5 loops a UD QP's
 * multicast back to it unless the QP blocks it).  A QP that asks for
 * IBV_QP_CREATE_BLOCK_SELF_MCAST_LB is refused (EOPNOTSUPP), as README
 * says: softhca never pretends to block the copy.
 */
TEST(multicast_loopback_to_the_sender)
{
	struct ibv_qp_init_attr_ex x;
	union ibv_gid g4, g5;
	struct ep s, r;

	run_pid = getpid();
	ud_ep(&s);
	ud_ep(&r);
	group_gid(&g4, 4);
	group_gid(&g5, 5);
	ASSERT_EQ(ibv_attach_mcast(s.qp, &g4, 0), 0);
	ASSERT_EQ(ibv_attach_mcast(r.qp, &g4, 0), 0);
	post_slot(&s, 1, 1);
	post_slot(&r, 1, 1);
	send_group(&s, 4, LOOP);
	expect_msg("the sender", &s, 1, LOOP, &s.self, &g4);
	expect_msg("the other member", &r, 1, LOOP, &s.self, &g4);
	ep_expect_empty(s.rcq);
	ep_expect_empty(r.rcq);

	/* detached, the sender gets no copy: its next completion is a
	 * marker sent afterwards to a group it is in */
	ASSERT_EQ(ibv_detach_mcast(s.qp, &g4, 0), 0);
	ASSERT_EQ(ibv_attach_mcast(s.qp, &g5, 0), 0);
	post_slot(&s, 2, 2);
	post_slot(&r, 2, 2);
	send_group(&s, 4, ONE);
	send_group(&s, 5, MARK1);
	expect_msg("the other member", &r, 2, ONE, &s.self, &g4);
	expect_msg("the detached sender", &s, 2, MARK1, &s.self, &g5);
	ep_expect_empty(r.rcq);

	memset(&x, 0, sizeof(x));
	x.qp_type = IBV_QPT_UD;
	x.send_cq = s.scq;
	x.recv_cq = s.rcq;
	x.cap.max_send_wr = x.cap.max_recv_wr = 1;
	x.cap.max_send_sge = x.cap.max_recv_sge = 1;
	x.pd = s.pd;
	x.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_CREATE_FLAGS;
	x.create_flags = IBV_QP_CREATE_BLOCK_SELF_MCAST_LB;
	ASSERT_NULL_ERRNO(ibv_create_qp_ex(s.ctx, &x), EOPNOTSUPP);
	ASSERT_EQ(ibv_detach_mcast(r.qp, &g4, 0), 0);
	ASSERT_EQ(ibv_detach_mcast(s.qp, &g5, 0), 0);
	ep_destroy(&s);
	ep_destroy(&r);
}
