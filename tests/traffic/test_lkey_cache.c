// SPDX-License-Identifier: MIT
/*
 * A QP's requester keeps the last L_Key it translated (verbs/mr.c,
 * struct shca_mr_cache): a stream of WRs from one buffer takes no lock of
 * the process's MR table.  What it keeps must follow the table: after
 * ibv_rereg_mr moves the MR, takes away local write or moves it to
 * another PD, and after ibv_dereg_mr, the next WR through the same key on
 * the same QP is checked against the MR as it is now (IBA C10-...: a
 * Local Protection Error), never against the translation kept from the
 * WR before.  Each case first uses the key successfully on the QP (so the
 * translation is kept), changes the MR, then uses the key again.  Both
 * paths (SOFTHCA_NET=1 for the net path, whose window reads the local
 * SGEs through the same translation).
 */
#include <string.h>

#include "harness.h"
#include "ep.h"

#define XOFF	8192u		/* the MR's first range in a's buffer */
#define YOFF	16384u		/* where ibv_rereg_mr moves it */
#define LEN	256u
#define DST	1024u		/* where in b's buffer the bytes go */

static void post_one(struct ep *a, uint64_t wr_id, enum ibv_wr_opcode op,
		     uint64_t laddr, uint32_t lkey)
{
	ASSERT_EQ(ep_post_key(a, wr_id, op, laddr, lkey, LEN, DST, 0), 0);
}

/* A pair, an MR of LEN bytes at a's XOFF (its key used once: a WRITE
 * that lands in b), b's destination cleared again. */
static struct ibv_mr *setup(struct ep *a, struct ep *b, int access)
{
	struct ep_opts o;
	struct ibv_mr *m;

	ep_default_opts(&o, IBV_QPT_RC);
	ep_pair(a, &o, b, &o);
	ep_fill_pattern(a->buf + XOFF, LEN, 0x31, 0);
	ep_fill_pattern(a->buf + YOFF, LEN, 0x47, 0);
	m = ibv_reg_mr(a->pd, a->buf + XOFF, LEN, access);
	ASSERT_NOT_NULL(m);
	memset(b->buf, EP_SENTINEL, b->size);
	post_one(a, 0xa0, IBV_WR_RDMA_WRITE, (uintptr_t)a->buf + XOFF,
		 m->lkey);
	ep_expect(a->scq, a->qp, 0xa0, IBV_WC_SUCCESS);
	ASSERT_EQ(memcmp(b->buf + DST, a->buf + XOFF, LEN), 0);
	memset(b->buf, EP_SENTINEL, b->size);
	return m;
}

/* Nothing reached b's buffer. */
static void untouched(const struct ep *b)
{
	ASSERT_EQ(ep_find_non_sentinel(b->buf, b->size), -1);
}

static void teardown(struct ep *a, struct ep *b, struct ibv_mr *m)
{
	if (m)
		ASSERT_EQ(ibv_dereg_mr(m), 0);
	ep_net_check();
	ep_destroy(a);
	ep_destroy(b);
}

/* setup, then the MR moved to YOFF */
static struct ibv_mr *setup_moved(struct ep *a, struct ep *b)
{
	struct ibv_mr *m = setup(a, b, IBV_ACCESS_LOCAL_WRITE);

	ASSERT_EQ(ibv_rereg_mr(m, IBV_REREG_MR_CHANGE_TRANSLATION, NULL,
			       a->buf + YOFF, LEN, 0),
		  0);
	return m;
}

/* The MR now covers YOFF: its old range is no longer behind the key... */
TEST(rereg_translation_old)
{
	struct ep a, b;
	struct ibv_mr *m = setup_moved(&a, &b);

	post_one(&a, 0xa1, IBV_WR_RDMA_WRITE, (uintptr_t)a.buf + XOFF,
		 m->lkey);
	ep_expect(a.scq, a.qp, 0xa1, IBV_WC_LOC_PROT_ERR);
	untouched(&b);
	teardown(&a, &b, m);
}

/* ... and its new one is. */
TEST(rereg_translation_new)
{
	struct ep a, b;
	struct ibv_mr *m = setup_moved(&a, &b);

	post_one(&a, 0xa1, IBV_WR_RDMA_WRITE, (uintptr_t)a.buf + YOFF,
		 m->lkey);
	ep_expect(a.scq, a.qp, 0xa1, IBV_WC_SUCCESS);
	ASSERT_EQ(memcmp(b.buf + DST, a.buf + YOFF, LEN), 0);
	teardown(&a, &b, m);
}

/* Local write taken away: a READ into the MR is refused, nothing placed
 * (test_key_order: the local key of a READ fails when the response
 * arrives). */
TEST(rereg_access)
{
	struct ep a, b;
	struct ibv_mr *m = setup(&a, &b, IBV_ACCESS_LOCAL_WRITE);

	post_one(&a, 0xa1, IBV_WR_RDMA_READ, (uintptr_t)a.buf + XOFF,
		 m->lkey);
	ep_expect(a.scq, a.qp, 0xa1, IBV_WC_SUCCESS);
	ASSERT_EQ(ibv_rereg_mr(m, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0,
			       0),
		  0);
	ep_fill_pattern(a.buf + XOFF, LEN, 0x52, 0);
	ep_fill_pattern(b.buf + DST, LEN, 0x63, 0);
	post_one(&a, 0xa2, IBV_WR_RDMA_READ, (uintptr_t)a.buf + XOFF,
		 m->lkey);
	ep_expect(a.scq, a.qp, 0xa2, IBV_WC_LOC_PROT_ERR);
	ASSERT_EQ(ep_find_pattern_diff(a.buf + XOFF, LEN, 0x52, 0), -1);
	teardown(&a, &b, m);
}

/* The MR moved to another PD: the QP's PD no longer has the key. */
TEST(rereg_pd)
{
	struct ep a, b;
	struct ibv_mr *m = setup(&a, &b, IBV_ACCESS_LOCAL_WRITE);
	struct ibv_pd *pd2 = ibv_alloc_pd(a.ctx);

	ASSERT_NOT_NULL(pd2);
	ASSERT_EQ(ibv_rereg_mr(m, IBV_REREG_MR_CHANGE_PD, pd2, NULL, 0, 0),
		  0);
	post_one(&a, 0xa1, IBV_WR_RDMA_WRITE, (uintptr_t)a.buf + XOFF,
		 m->lkey);
	ep_expect(a.scq, a.qp, 0xa1, IBV_WC_LOC_PROT_ERR);
	untouched(&b);
	ASSERT_EQ(ibv_dereg_mr(m), 0);
	ASSERT_EQ(ibv_dealloc_pd(pd2), 0);
	teardown(&a, &b, NULL);
}

/* Deregistered: the key names nothing. */
TEST(dereg)
{
	struct ep a, b;
	struct ibv_mr *m = setup(&a, &b, IBV_ACCESS_LOCAL_WRITE);
	uint32_t lkey = m->lkey;

	ASSERT_EQ(ibv_dereg_mr(m), 0);
	post_one(&a, 0xa1, IBV_WR_RDMA_WRITE, (uintptr_t)a.buf + XOFF, lkey);
	ep_expect(a.scq, a.qp, 0xa1, IBV_WC_LOC_PROT_ERR);
	untouched(&b);
	teardown(&a, &b, NULL);
}
