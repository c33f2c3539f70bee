// SPDX-License-Identifier: MIT
/*
 * READ responses received straight into the requester's buffer (issue
 * 15; net/transport.c read_place, net/conn.c read_placed): after a READ's
 * first response, the middles that follow are received with one recvmsg
 * into the WQE's scatter entry, the way a WRITE's middles are placed at
 * the responder, and counted as net_placed_pkts.  Each case runs two
 * processes with SOFTHCA_NET=1 and checks every byte and that TCP carried
 * them (ep_net_check).
 *
 *   read_middles_placed         READs of 1 MiB: the data, and the
 *                               requester's net_placed_pkts grew by at
 *                               least half of the middles
 *   write_middles_placed        WRITEs of 1 MiB, whose middle packets
 *                               come in run frames: each read back and
 *                               checked, and the responder's
 *                               net_placed_pkts grew by at least half of
 *                               the middles
 *   two_sges_split_mid_packet   the destination in two scatter entries,
 *                               split inside a packet: what fits in the
 *                               first is placed, the rest goes the usual
 *                               way; every byte where it belongs
 *   placed_under_faults         drops, duplicates and reordering on both
 *                               sides: frames that are not the expected
 *                               ones are handed up as usual, and the data
 *                               is whole
 *
 * A flush during a placement: test_net_dereg.c
 * read_placement_lands_before_flush.
 */
#include <unistd.h>

#include "harness.h"
#include "ep.h"

#define LEN	(1024 * 1024)
#define READS	8

static uint64_t my_counter(const char *name)
{
	return (uint64_t)ep_stat_counter(SOFTHCA_TOOL, getpid(), name);
}

/* The responder: its buffer holds ep_pattern(seed 7) from its start; it
 * waits for 'x'. */
static void responder(int fd, void *arg)
{
	struct ep_opts o;
	struct ep b;

	(void)arg;
	ep_default_opts(&o, IBV_QPT_RC);
	o.buf_size = 2 * LEN;
	ep_open_remote(&b, &o, fd);
	ep_fill_pattern(b.buf, 2 * LEN, 7, 0);
	duo_signal(fd, 'r');
	duo_expect(fd, 'x');
	ep_destroy(&b);
}

static void open_pair(struct duo *d, struct ep *a)
{
	struct ep_opts o;

	setenv("SOFTHCA_NET", "1", 1);
	duo_fork(d, responder, NULL);
	ep_default_opts(&o, IBV_QPT_RC);
	o.buf_size = 4 * LEN;
	ep_open_remote(a, &o, d->fd);
	duo_expect(d->fd, 'r');
}

static void close_pair(struct duo *d, struct ep *a)
{
	ep_net_check();
	duo_signal(d->fd, 'x');
	duo_wait(d);
	ep_destroy(a);
	unsetenv("SOFTHCA_FAULTS");
}

/* READ i: LEN bytes from the peer's offset (i % 4) * 4096 into ours at
 * LEN; checked. */
static void read_one(struct ep *a, uint32_t i)
{
	uint64_t from = (uint64_t)(i % 4) * 4096;
	int64_t d;

	memset(a->buf + LEN, 0, LEN);
	ASSERT_EQ(ep_post(a, i, IBV_WR_RDMA_READ, LEN, LEN, from, 0), 0);
	ep_expect(a->scq, a->qp, i, IBV_WC_SUCCESS);
	d = ep_find_pattern_diff(a->buf + LEN, LEN, 7, from);
	if (d >= 0)
		harness_fail(__FILE__, __LINE__, "READ %u: byte %lld", i,
			     (long long)d);
}

TEST(read_middles_placed)
{
	struct duo d;
	struct ep a;
	uint64_t before, placed, middles;
	uint32_t i;

	open_pair(&d, &a);
	middles = (uint64_t)READS * (LEN / ep_mtu_bytes(&a) - 2);
	before = my_counter("net_placed_pkts");
	for (i = 0; i < READS; i++)
		read_one(&a, i);
	placed = my_counter("net_placed_pkts") - before;
	printf("  %llu of %llu middle responses placed\n",
	       (unsigned long long)placed, (unsigned long long)middles);
	/* only what one read takes the usual way (RBUF_SIZE, 256 KiB: a
	 * quarter of each READ) before the first response says what comes
	 * next is not placed; the responder's process places nothing here */
	ASSERT_GE(placed * 2, middles);
	ASSERT_LE(placed, middles);
	close_pair(&d, &a);
}

/*
 * WRITEs of 1 MiB: their middle packets come as run frames (net/net.h)
 * and are placed at the responder (its net_placed_pkts grows by at least
 * half of them: what the first read of a message takes the usual way is
 * not); each is read back and checked.
 */
TEST(write_middles_placed)
{
	struct duo d;
	struct ep a;
	uint64_t before, placed, middles;
	uint32_t i;
	int64_t diff;

	open_pair(&d, &a);
	middles = (uint64_t)READS * (LEN / ep_mtu_bytes(&a) - 2);
	before = (uint64_t)ep_stat_counter(SOFTHCA_TOOL, d.pid,
					   "net_placed_pkts");
	for (i = 0; i < READS; i++) {
		ep_fill_pattern(a.buf, LEN, 9 + i, 0);
		ASSERT_EQ(ep_post(&a, i, IBV_WR_RDMA_WRITE, 0, LEN, LEN, 0), 0);
		ep_expect(a.scq, a.qp, i, IBV_WC_SUCCESS);
		memset(a.buf + 2 * LEN, 0, LEN);
		ASSERT_EQ(ep_post(&a, i, IBV_WR_RDMA_READ, 2 * LEN, LEN, LEN,
				  0), 0);
		ep_expect(a.scq, a.qp, i, IBV_WC_SUCCESS);
		diff = ep_find_pattern_diff(a.buf + 2 * LEN, LEN, 9 + i, 0);
		if (diff >= 0)
			harness_fail(__FILE__, __LINE__, "WRITE %u: byte %lld",
				     i, (long long)diff);
	}
	placed = (uint64_t)ep_stat_counter(SOFTHCA_TOOL, d.pid,
					   "net_placed_pkts") - before;
	printf("  %llu of %llu middle packets placed at the responder\n",
	       (unsigned long long)placed, (unsigned long long)middles);
	ASSERT_GE(placed * 2, middles);
	ASSERT_LE(placed, middles);
	close_pair(&d, &a);
}

TEST(two_sges_split_mid_packet)
{
	struct ibv_sge sge[2];
	struct ibv_send_wr wr, *bad;
	struct duo d;
	struct ep a;
	uint32_t mtu, first, i;
	int64_t diff;

	open_pair(&d, &a);
	mtu = ep_mtu_bytes(&a);
	/* the first entry ends 100 bytes into packet 20; the second sits
	 * apart, at 3 * LEN */
	first = 20 * mtu + 100;
	for (i = 0; i < 4; i++) {
		memset(a.buf + LEN, EP_SENTINEL, LEN);
		memset(a.buf + 3 * LEN, EP_SENTINEL, LEN);
		sge[0].addr = (uintptr_t)(a.buf + LEN);
		sge[0].length = first;
		sge[0].lkey = a.mr->lkey;
		sge[1].addr = (uintptr_t)(a.buf + 3 * LEN);
		sge[1].length = LEN - first;
		sge[1].lkey = a.mr->lkey;
		memset(&wr, 0, sizeof(wr));
		wr.wr_id = i;
		wr.sg_list = sge;
		wr.num_sge = 2;
		wr.opcode = IBV_WR_RDMA_READ;
		wr.send_flags = IBV_SEND_SIGNALED;
		wr.wr.rdma.remote_addr = a.peer.addr;
		wr.wr.rdma.rkey = a.peer.rkey;
		ASSERT_EQ(ibv_post_send(a.qp, &wr, &bad), 0);
		ep_expect(a.scq, a.qp, i, IBV_WC_SUCCESS);
		diff = ep_find_pattern_diff(a.buf + LEN, first, 7, 0);
		if (diff >= 0)
			harness_fail(__FILE__, __LINE__,
				     "READ %u, first entry: byte %lld", i,
				     (long long)diff);
		diff = ep_find_pattern_diff(a.buf + 3 * LEN, LEN - first, 7,
					    first);
		if (diff >= 0)
			harness_fail(__FILE__, __LINE__,
				     "READ %u, second entry: byte %lld", i,
				     (long long)diff);
		/* nothing beyond the first entry's end */
		ASSERT_EQ(ep_find_non_sentinel(a.buf + LEN + first,
					       LEN - first), -1);
	}
	close_pair(&d, &a);
}

TEST(placed_under_faults)
{
	struct duo d;
	struct ep a;
	uint32_t i;

	setenv("SOFTHCA_FAULTS", "drop=0.01,dup=0.02,reorder=0.02,seed=21",
	       1);
	open_pair(&d, &a);
	for (i = 0; i < READS; i++)
		read_one(&a, i);
	close_pair(&d, &a);
}
