// SPDX-License-Identifier: MIT
/*
 * IBV_ACCESS_ZERO_BASED (ibv_reg_mr(3): "use byte offset from beginning
 * of MR to access this MR, instead of a pointer address"; the same as an
 * iova of 0 with ibv_reg_mr_iova): remote addresses of such an MR are
 * offsets into it, and so are the addresses of SGEs that use its L_Key.
 * Issue 12: softhca accepted the flag and ignored it (remote address 0
 * gave REM_ACCESS_ERR).  Both paths (SOFTHCA_NET=1 for the net path).
 */
#include <string.h>

#include "harness.h"
#include "ep.h"

#define ZOFF	8192u		/* b's zero-based MR starts here */
#define ZLEN	4096u

static void fill(uint8_t *p, uint32_t len, uint8_t seed)
{
	uint32_t i;

	for (i = 0; i < len; i++)
		p[i] = (uint8_t)(seed + i * 7 + 1) | 1;
}

static void post_one(struct ep *a, uint64_t wr_id, enum ibv_wr_opcode op,
		     uint64_t laddr, uint32_t lkey, uint32_t len,
		     uint64_t raddr, uint32_t rkey)
{
	struct ibv_sge sge = { .addr = laddr, .length = len, .lkey = lkey };
	struct ibv_send_wr wr, *bad;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = wr_id;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = op;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = rkey;
	ASSERT_EQ(ibv_post_send(a->qp, &wr, &bad), 0);
}

TEST(zero_based_remote_offsets)
{
	const int acc = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			IBV_ACCESS_REMOTE_READ | IBV_ACCESS_ZERO_BASED;
	struct ibv_mr *z;
	struct ep_opts o;
	struct ep a, b;

	ep_default_opts(&o, IBV_QPT_RC);
	ep_pair(&a, &o, &b, &o);
	memset(b.buf, 0xa5, b.size);
	z = ibv_reg_mr(b.pd, b.buf + ZOFF, ZLEN, acc);
	ASSERT_NOT_NULL(z);

	/* WRITE to offset 0 and to the last 16 bytes */
	fill(a.buf, 64, 3);
	post_one(&a, 0xa1, IBV_WR_RDMA_WRITE, (uintptr_t)a.buf, a.mr->lkey,
		 64, 0, z->rkey);
	ep_expect(a.scq, a.qp, 0xa1, IBV_WC_SUCCESS);
	ASSERT_EQ(memcmp(b.buf + ZOFF, a.buf, 64), 0);
	ASSERT_EQ(b.buf[ZOFF - 1], 0xa5);
	ASSERT_EQ(b.buf[ZOFF + 64], 0xa5);
	post_one(&a, 0xa2, IBV_WR_RDMA_WRITE, (uintptr_t)a.buf, a.mr->lkey,
		 16, ZLEN - 16, z->rkey);
	ep_expect(a.scq, a.qp, 0xa2, IBV_WC_SUCCESS);
	ASSERT_EQ(memcmp(b.buf + ZOFF + ZLEN - 16, a.buf, 16), 0);
	ASSERT_EQ(b.buf[ZOFF + ZLEN], 0xa5);

	/* READ back from offset 100 */
	fill(b.buf + ZOFF + 100, 32, 9);
	memset(a.buf + 4096, 0xa5, 64);
	post_one(&a, 0xa3, IBV_WR_RDMA_READ, (uintptr_t)a.buf + 4096,
		 a.mr->lkey, 32, 100, z->rkey);
	ep_expect(a.scq, a.qp, 0xa3, IBV_WC_SUCCESS);
	ASSERT_EQ(memcmp(a.buf + 4096, b.buf + ZOFF + 100, 32), 0);
	ASSERT_EQ(a.buf[4096 + 32], 0xa5);

	/* the virtual address is not in the MR's address space: past it */
	post_one(&a, 0xa4, IBV_WR_RDMA_WRITE, (uintptr_t)a.buf, a.mr->lkey,
		 16, (uintptr_t)b.buf + ZOFF, z->rkey);
	ep_expect(a.scq, a.qp, 0xa4, IBV_WC_REM_ACCESS_ERR);

	ASSERT_EQ(ibv_dereg_mr(z), 0);
	ep_net_check();
	ep_destroy(&a);
	ep_destroy(&b);
}

TEST(zero_based_local_offsets)
{
	const int acc = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_ZERO_BASED;
	struct ibv_mr *z;
	struct ep_opts o;
	struct ep a, b;

	ep_default_opts(&o, IBV_QPT_RC);
	ep_pair(&a, &o, &b, &o);
	memset(b.buf, 0xa5, b.size);
	z = ibv_reg_mr(a.pd, a.buf + ZOFF, ZLEN, acc);
	ASSERT_NOT_NULL(z);
	fill(a.buf + ZOFF + 200, 48, 5);
	/* the SGE's address is an offset into the zero-based MR */
	post_one(&a, 0xa1, IBV_WR_RDMA_WRITE, 200, z->lkey, 48,
		 a.peer.addr + 64, a.peer.rkey);
	ep_expect(a.scq, a.qp, 0xa1, IBV_WC_SUCCESS);
	ASSERT_EQ(memcmp(b.buf + 64, a.buf + ZOFF + 200, 48), 0);
	ASSERT_EQ(b.buf[63], 0xa5);
	ASSERT_EQ(b.buf[64 + 48], 0xa5);
	ASSERT_EQ(ibv_dereg_mr(z), 0);
	ep_net_check();
	ep_destroy(&a);
	ep_destroy(&b);
}
