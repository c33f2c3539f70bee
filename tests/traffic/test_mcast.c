// SPDX-License-Identifier: MIT
/*
 * UD multicast between processes: QPs attached to a group receive what a
 * sender posts to QPN 0xFFFFFF with the group's GID; detached QPs and
 * other groups do not.
 */
#include <arpa/inet.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "ep.h"

#define QKEY 0x11111111

static void group_gid(union ibv_gid *g, int n)
{
	/* IPv4-mapped 239.1.1.n */
	memset(g, 0, sizeof(*g));
	g->raw[10] = 0xff;
	g->raw[11] = 0xff;
	g->raw[12] = 239;
	g->raw[13] = 1;
	g->raw[14] = 1;
	g->raw[15] = (uint8_t)n;
}

static void post_recv_buf(struct ep *e, uint64_t id, size_t off)
{
	struct ibv_sge sge = { (uintptr_t)e->buf + off, 4096 + 40,
			       e->mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = id, .sg_list = &sge, .num_sge = 1 };
	struct ibv_recv_wr *bad;

	ASSERT_EQ(ibv_post_recv(e->qp, &wr, &bad), 0);
}

static void receiver(int fd)
{
	struct ep_opts o;
	struct ep a, b;
	union ibv_gid g1, g2;
	struct ibv_wc wc;
	char c = 'R';
	int n;

	ep_default_opts(&o, IBV_QPT_UD);
	ep_create(&a, &o);
	ep_create(&b, &o);
	a.peer = b.self;	/* only to reach RTS */
	b.peer = a.self;
	ep_connect(&a, &o);
	ep_connect(&b, &o);
	group_gid(&g1, 1);
	group_gid(&g2, 2);
	ASSERT_EQ(ibv_attach_mcast(a.qp, &g1, 0), 0);
	ASSERT_EQ(ibv_attach_mcast(b.qp, &g1, 0), 0);
	ASSERT_EQ(ibv_attach_mcast(b.qp, &g2, 0), 0);
	post_recv_buf(&a, 1, 0);
	post_recv_buf(&b, 2, 0);
	post_recv_buf(&b, 3, 8192);
	xwrite(fd, &c, 1);

	/* message 1 to group 1: both QPs */
	ep_poll(a.rcq, &wc, 1);
	ASSERT_EQ(wc.status, IBV_WC_SUCCESS);
	ASSERT_EQ(wc.byte_len, 100 + 40);
	ASSERT(wc.wc_flags & IBV_WC_GRH);
	ASSERT_EQ(wc.sl, 2);	/* RoCE v2 over IPv4, as mlx5 reports it */
	ASSERT_EQ(memcmp(a.buf + 40, "multicast one", 14), 0);
	ep_poll(b.rcq, &wc, 1);
	ASSERT_EQ(wc.wr_id, 2);
	ASSERT_EQ(memcmp(b.buf + 40, "multicast one", 14), 0);
	/* the GRH names the group as destination: the IPv4 header's daddr */
	ASSERT_EQ(a.buf[20] >> 4, 4);
	ASSERT_EQ(memcmp(a.buf + 36, &g1.raw[12], 4), 0);
	xwrite(fd, &c, 1);

	/* message 2 to group 2: only b */
	ep_poll(b.rcq, &wc, 1);
	ASSERT_EQ(wc.wr_id, 3);
	ASSERT_EQ(memcmp(b.buf + 8192 + 40, "multicast two", 14), 0);
	usleep(100000);
	n = ibv_poll_cq(a.rcq, 1, &wc);
	ASSERT_EQ(n, 0);

	/* a leaves group 1: message 3 reaches b only (b has no buffer: a
	 * UD message without a receive WQE is dropped) */
	ASSERT_EQ(ibv_detach_mcast(a.qp, &g1, 0), 0);
	ASSERT_EQ(ibv_detach_mcast(a.qp, &g1, 0), EINVAL);
	xwrite(fd, &c, 1);
	xread(fd, &c, 1);
	usleep(100000);
	ASSERT_EQ(ibv_poll_cq(a.rcq, 1, &wc), 0);

	ASSERT_EQ(ibv_detach_mcast(b.qp, &g1, 0), 0);
	ASSERT_EQ(ibv_detach_mcast(b.qp, &g2, 0), 0);
	ep_destroy(&a);
	ep_destroy(&b);
	_exit(0);
}

static void send_group(struct ep *s, int n, const char *msg)
{
	struct ibv_ah_attr aa;
	struct ibv_ah *ah;
	struct ibv_sge sge = { (uintptr_t)s->buf, 100, s->mr->lkey };
	struct ibv_send_wr wr, *bad;
	struct ibv_wc wc;

	memset(&aa, 0, sizeof(aa));
	aa.is_global = 1;
	group_gid(&aa.grh.dgid, n);
	aa.grh.hop_limit = 1;
	aa.port_num = 1;
	ah = ibv_create_ah(s->pd, &aa);
	ASSERT_NOT_NULL(ah);
	memset(s->buf, 0, 100);
	strcpy((char *)s->buf, msg);
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = 7;
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
	ASSERT_EQ(ibv_destroy_ah(ah), 0);
}

TEST(ud_multicast_two_processes)
{
	struct ep_opts o;
	struct ep s;
	int sv[2], status;
	char c;
	pid_t pid;

	ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	pid = fork();
	ASSERT_GE(pid, 0);
	if (pid == 0) {
		close(sv[0]);
		receiver(sv[1]);
	}
	close(sv[1]);
	ep_default_opts(&o, IBV_QPT_UD);
	ep_create(&s, &o);
	s.peer = s.self;
	ep_connect(&s, &o);
	xread(sv[0], &c, 1);
	send_group(&s, 1, "multicast one");
	xread(sv[0], &c, 1);
	send_group(&s, 2, "multicast two");
	xread(sv[0], &c, 1);
	send_group(&s, 1, "multicast three");
	xwrite(sv[0], &c, 1);
	ASSERT_EQ(waitpid(pid, &status, 0), pid);
	ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	ep_destroy(&s);
}
