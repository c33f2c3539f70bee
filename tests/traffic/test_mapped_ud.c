// SPDX-License-Identifier: MIT
/*
 * UD, SRQ and multicast over the mapped path (issue 13): the receiver is
 * the forked process; every message's payload (and, UD, that a 40-byte
 * GRH came first) is checked in its memory, and the sender's map_xfers
 * grows by one per message copy while its cma_xfers stands still.
 */
#include <unistd.h>
#include <arpa/inet.h>

#include "harness.h"
#include "ep.h"

#define N	16		/* messages */
#define LEN	1024		/* payload */
#define SLOT	4096		/* receive slots */
#define GRH	40
#define QKEY	0x11111111

enum kind { UD, SRQ, MCAST };

/* The process's counter name, as `softhca stat` shows it. */
#define proc_counter(pid, name) ep_stat_counter(SOFTHCA_TOOL, pid, name)

/* The multicast group 239.77.P.P, P the test's pid (runs never share). */
static void group_gid(union ibv_gid *g, pid_t pid)
{
	memset(g, 0, sizeof(*g));
	g->raw[10] = 0xff;
	g->raw[11] = 0xff;
	g->raw[12] = 239;
	g->raw[13] = 77;
	g->raw[14] = (uint8_t)(pid >> 8);
	g->raw[15] = (uint8_t)pid;
}

static void opts(struct ep_opts *o, enum kind k)
{
	ep_default_opts(o, k == SRQ ? IBV_QPT_RC : IBV_QPT_UD);
	o->buf_size = N * SLOT;
	o->use_srq = k == SRQ;
}

static void receiver(int fd, void *arg)
{
	enum kind k = *(enum kind *)arg;
	uint32_t skip = k == SRQ ? 0 : GRH;
	union ibv_gid g;
	struct ep_opts o;
	struct ibv_wc wc;
	struct ep b;
	int i;

	opts(&o, k);
	ep_create(&b, &o);
	memset(b.buf, EP_SENTINEL, b.size);
	for (i = 0; i < N; i++)
		ASSERT_EQ(ep_post_recv(&b, (uint64_t)i, (uint64_t)i * SLOT,
				       SLOT), 0);
	if (k == MCAST) {
		group_gid(&g, getppid());
		ASSERT_EQ(ibv_attach_mcast(b.qp, &g, 0), 0);
	}
	ep_exchange(fd, &b.self, &b.peer);
	ep_connect(&b, &o);
	duo_signal(fd, 'u');
	for (i = 0; i < N; i++) {
		uint8_t *at = b.buf + (uint64_t)i * SLOT;

		wc = ep_expect(b.rcq, NULL, (uint64_t)i, IBV_WC_SUCCESS);
		ASSERT_EQ(wc.byte_len, LEN + skip);
		if (skip)
			ASSERT(wc.wc_flags & IBV_WC_GRH);
		ASSERT_EQ(ep_find_pattern_diff(at + skip, LEN, (uint32_t)i +
							       1, 0), -1);
		ASSERT_EQ(ep_find_non_sentinel(at + skip + LEN,
					       SLOT - skip - LEN), -1);
	}
	duo_signal(fd, 'r');
	duo_expect(fd, 'q');
	if (k == MCAST)
		ASSERT_EQ(ibv_detach_mcast(b.qp, &g, 0), 0);
	ep_destroy(&b);
}

static void send_to(enum kind k)
{
	long long map0, cma0;
	struct ibv_ah *gah = NULL;
	struct ep_opts o;
	struct duo d;
	struct ep a;
	int i;

	/* the mapped path in both processes, whatever the environment */
	setenv("SOFTHCA_MAP", "1", 1);
	duo_fork(&d, receiver, &k);
	opts(&o, k);
	ep_open_remote(&a, &o, d.fd);
	duo_expect(d.fd, 'u');
	if (k == MCAST) {
		struct ibv_ah_attr ah;

		memset(&ah, 0, sizeof(ah));
		ah.is_global = 1;
		group_gid(&ah.grh.dgid, getpid());
		ah.grh.sgid_index = (uint8_t)a.gid_index;
		ah.grh.hop_limit = 1;
		ah.port_num = 1;
		gah = ibv_create_ah(a.pd, &ah);
		ASSERT(gah != NULL);
	}
	map0 = proc_counter(getpid(), "map_xfers");
	cma0 = proc_counter(getpid(), "cma_xfers");
	for (i = 0; i < N; i++) {
		struct ibv_send_wr wr, *bad;
		struct ibv_sge sge;

		ep_fill_pattern(a.buf, LEN, (uint32_t)i + 1, 0);
		memset(&wr, 0, sizeof(wr));
		sge.addr = (uintptr_t)a.buf;
		sge.length = LEN;
		sge.lkey = a.mr->lkey;
		wr.wr_id = (uint64_t)i;
		wr.sg_list = &sge;
		wr.num_sge = 1;
		wr.opcode = IBV_WR_SEND;
		wr.send_flags = IBV_SEND_SIGNALED;
		if (k != SRQ) {
			wr.wr.ud.ah = gah ? gah : a.ah;
			wr.wr.ud.remote_qpn = gah ? 0xffffff : a.peer.qpn;
			wr.wr.ud.remote_qkey = QKEY;
		}
		ASSERT_EQ(ibv_post_send(a.qp, &wr, &bad), 0);
		ep_expect(a.scq, a.qp, (uint64_t)i, IBV_WC_SUCCESS);
	}
	duo_expect(d.fd, 'r');
	ASSERT_EQ(proc_counter(getpid(), "map_xfers") - map0, N);
	ASSERT_EQ(proc_counter(getpid(), "cma_xfers") - cma0, 0);
	duo_signal(d.fd, 'q');
	duo_wait(&d);
	if (gah)
		ASSERT_EQ(ibv_destroy_ah(gah), 0);
	ep_destroy(&a);
}

TEST(ud_mapped)
{
	send_to(UD);
}

TEST(srq_mapped)
{
	send_to(SRQ);
}

TEST(multicast_mapped)
{
	send_to(MCAST);
}
