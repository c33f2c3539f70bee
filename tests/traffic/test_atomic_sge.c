// SPDX-License-Identifier: MIT
/*
 * An atomic's 8-byte result lands in its local buffer scattered over the
 * WR's SGEs in order, as any gather list is written, and never outside
 * them (issue 12: two 4-byte SGEs took the whole result in the first, 4
 * bytes past its end).  The bytes around every SGE are pre-filled with a
 * sentinel and must stay so; the remote word must change exactly once.
 * Run on the same-host path, and on the net path with SOFTHCA_NET=1
 * (ctest: traffic_test_atomic_sge_net, checked by ep_net_check).
 */
#include <string.h>

#include "harness.h"
#include "ep.h"

#define SENT	0xa5
#define LOCAL	4096u		/* the SGEs, with gaps of 16 bytes */
#define REMOTE	(64u << 10)	/* the target word in b's buffer */

static void run(enum ibv_wr_opcode op, const uint32_t *lens, int nsge)
{
	const uint64_t start = 0x1122334455667788ull;
	const uint64_t add = 0x0101010101010101ull;
	struct ibv_sge sge[4];
	struct ibv_send_wr wr, *bad;
	struct ep_opts o;
	struct ep a, b;
	uint8_t got[8], want[8];
	uint64_t word, expect;
	uint32_t off;
	int i, k;

	ep_default_opts(&o, IBV_QPT_RC);
	o.max_sge = 4;
	ep_pair(&a, &o, &b, &o);
	memset(a.buf, SENT, a.size);
	memcpy(b.buf + REMOTE, &start, 8);

	memset(&wr, 0, sizeof(wr));
	off = LOCAL;
	for (i = 0; i < nsge; i++) {
		sge[i].addr = (uintptr_t)a.buf + off;
		sge[i].length = lens[i];
		sge[i].lkey = a.mr->lkey;
		off += lens[i] + 16;
	}
	wr.wr_id = 0xa1;
	wr.sg_list = sge;
	wr.num_sge = nsge;
	wr.opcode = op;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.wr.atomic.remote_addr = a.peer.addr + REMOTE;
	wr.wr.atomic.rkey = a.peer.rkey;
	wr.wr.atomic.compare_add = op == IBV_WR_ATOMIC_FETCH_AND_ADD ?
					   add : start;
	wr.wr.atomic.swap = 0x0badcafe0badcafeull;
	ASSERT_EQ(ibv_post_send(a.qp, &wr, &bad), 0);
	ep_expect(a.scq, a.qp, 0xa1, IBV_WC_SUCCESS);

	/* the original value, in the SGEs in order */
	memcpy(want, &start, 8);
	k = 0;
	off = LOCAL;
	for (i = 0; i < nsge; i++) {
		memcpy(got + k, a.buf + off, lens[i]);
		k += lens[i];
		off += lens[i] + 16;
	}
	ASSERT_EQ(k, 8);
	ASSERT_EQ(memcmp(got, want, 8), 0);
	/* nothing else of a's buffer was written */
	off = LOCAL;
	for (i = 0; i < nsge; i++) {
		uint32_t j;

		for (j = 0; j < 16; j++)
			ASSERT_EQ(a.buf[off + lens[i] + j], SENT);
		off += lens[i] + 16;
	}
	for (i = 0; i < (int)LOCAL; i++)
		ASSERT_EQ(a.buf[i], SENT);
	/* the remote word changed once */
	memcpy(&word, b.buf + REMOTE, 8);
	expect = op == IBV_WR_ATOMIC_FETCH_AND_ADD ? start + add :
						     wr.wr.atomic.swap;
	ASSERT_EQ(word, expect);

	ep_net_check();
	ep_destroy(&a);
	ep_destroy(&b);
}

TEST(fetch_add_two_4_byte_sges)
{
	static const uint32_t l[] = { 4, 4 };

	run(IBV_WR_ATOMIC_FETCH_AND_ADD, l, 2);
}

TEST(cmp_swap_three_sges_1_3_4)
{
	static const uint32_t l[] = { 1, 3, 4 };

	run(IBV_WR_ATOMIC_CMP_AND_SWP, l, 3);
}

TEST(fetch_add_one_8_byte_sge)
{
	static const uint32_t l[] = { 8 };

	run(IBV_WR_ATOMIC_FETCH_AND_ADD, l, 1);
}
