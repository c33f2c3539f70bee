// SPDX-License-Identifier: MIT
/*
 * Tag matching at the responder (src/engine/tm_rx.c) against crafted
 * arenas: the list is the responder's bytes, and whoever matches must
 * hold against any of them.
 *
 *   no list, a list offset or size outside the arena, max_tags 0 or
 *   above SHCA_TM_MAX_TAGS                    not TM: PLAIN, nothing read
 *   an entry with too many SGEs               never matched
 *   TMH split over iovecs, payload past it    tag, app_ctx and payload
 *   more iovecs than a matched copy holds     unexpected, no overflow
 *   shorter than a TMH, FIN, unknown opcode   PLAIN; RNDV unexpected
 *                                             without a readable sender
 *   RNDV with a readable sender (rndv_src,    RNDV with its RVH decoded
 *     or the net path's rndv_read)
 *                                             across iovecs; shorter than
 *                                             TMH + RVH, longer than
 *                                             max_rndv_hdr_size, no tag,
 *                                             or paused: unexpected
 *   counts out of sync                        unexpected
 *   oldest matching entry, masks               as ibv_post_srq_ops(3)
 *   consume                                   frees only the entry of
 *                                             the generation matched
 */
#include <endian.h>
#include <errno.h>
#include <arpa/inet.h>
#include <stdlib.h>
#include <string.h>
#include <infiniband/tm_types.h>

#include "harness.h"
#include "engine/tm_rx.h"

#define ASIZE	(1u << 20)
#define RQOFF	4096u
#define TMOFF	8192u

struct fake {
	uint8_t *base;
	struct shca_rq_shm *rq;
	struct shca_tm_shm *tm;
	uint8_t msg[4096];
	struct iovec iov[200];
	struct shca_xfer x;
};

static void fake_init(struct fake *f, uint32_t ntags)
{
	memset(f, 0, sizeof(*f));
	f->base = aligned_alloc(4096, ASIZE);
	ASSERT_NOT_NULL(f->base);
	memset(f->base, 0, ASIZE);
	f->rq = (struct shca_rq_shm *)(f->base + RQOFF);
	f->rq->tm_off = TMOFF;
	f->tm = (struct shca_tm_shm *)(f->base + TMOFF);
	f->tm->max_tags = ntags;
}

static void add(struct fake *f, uint32_t i, uint64_t tag, uint64_t mask,
		uint64_t seq, uint64_t wr_id)
{
	struct shca_tm_entry_shm *e = &f->tm->e[i];

	e->state = 1;
	e->num_sge = 1;
	e->gen = 7;
	e->seq = seq;
	e->tag = tag;
	e->mask = mask;
	e->wr_id = wr_id;
	e->sge[0].addr = 0x1000;
	e->sge[0].length = 4096;
	e->sge[0].lkey = 0x1234;
}

/* A SEND of len bytes: TMH (op, tag, app_ctx 0xc0ffee), then i & 0xff;
 * cut into pieces of step bytes (0: one iovec). */
static void msg(struct fake *f, uint8_t op, uint64_t tag, uint32_t len,
		uint32_t step)
{
	uint32_t be32 = htonl(0xc0ffee), i, n = 0;
	uint64_t be64 = htobe64(tag);

	for (i = 0; i < len; i++)
		f->msg[i] = (uint8_t)i;
	if (len >= 16) {
		memset(f->msg, 0, 16);
		f->msg[0] = op;
		memcpy(f->msg + 4, &be32, 4);
		memcpy(f->msg + 8, &be64, 8);
	}
	for (i = 0; i < len; i += step ? step : len) {
		f->iov[n].iov_base = f->msg + i;
		f->iov[n].iov_len = step && len - i > step ? step : len - i;
		n++;
	}
	memset(&f->x, 0, sizeof(f->x));
	f->x.qp_type = IBV_QPT_RC;
	f->x.opcode = IBV_WR_SEND;
	f->x.local = f->iov;
	f->x.nlocal = (int)n;
	f->x.length = len;
}

static enum shca_tm_class classify(struct fake *f, struct shca_tm_rx *t)
{
	shca_tm_rx_classify(f->base, ASIZE, f->rq, &f->x, t);
	return t->cls;
}

TEST(list_outside_or_oversized_is_not_tm)
{
	static struct shca_tm_rx t;
	struct fake f;

	fake_init(&f, 4);
	add(&f, 1, 5, ~0ull, 0, 1);
	msg(&f, IBV_TMH_EAGER, 5, 64, 0);
	ASSERT_EQ(classify(&f, &t), SHCA_TM_MATCHED);
	f.tm->max_tags = 0;
	ASSERT_EQ(classify(&f, &t), SHCA_TM_PLAIN);
	f.tm->max_tags = SHCA_TM_MAX_TAGS + 1;
	ASSERT_EQ(classify(&f, &t), SHCA_TM_PLAIN);
	f.tm->max_tags = 4;
	f.rq->tm_off = ASIZE - 8;		/* header past the end */
	ASSERT_EQ(classify(&f, &t), SHCA_TM_PLAIN);
	f.rq->tm_off = UINT64_MAX - 4;
	ASSERT_EQ(classify(&f, &t), SHCA_TM_PLAIN);
	/* the header inside, the entries past the end */
	f.rq->tm_off = ASIZE - sizeof(struct shca_tm_shm) -
		       sizeof(struct shca_tm_entry_shm);
	memcpy(f.base + f.rq->tm_off, f.tm, sizeof(struct shca_tm_shm));
	ASSERT_EQ(classify(&f, &t), SHCA_TM_PLAIN);
	f.rq->tm_off = 0;
	ASSERT_EQ(classify(&f, &t), SHCA_TM_PLAIN);
	free(f.base);
}

TEST(entry_with_too_many_sges_never_matches)
{
	static struct shca_tm_rx t;
	struct fake f;

	fake_init(&f, 4);
	add(&f, 1, 5, ~0ull, 0, 1);
	add(&f, 2, 5, ~0ull, 1, 2);
	f.tm->e[1].num_sge = 1000;
	msg(&f, IBV_TMH_EAGER, 5, 64, 0);
	ASSERT_EQ(classify(&f, &t), SHCA_TM_MATCHED);
	ASSERT_EQ(t.idx, 2);
	ASSERT_U64_EQ(t.wqe.w.wr_id, 2);
	f.tm->e[2].num_sge = SHCA_TM_MAX_SGE + 1;
	ASSERT_EQ(classify(&f, &t), SHCA_TM_UNEXPECTED);
	free(f.base);
}

TEST(split_header_and_payload)
{
	static struct shca_tm_rx t;
	uint64_t got = 0;
	struct fake f;
	int i;

	fake_init(&f, 4);
	add(&f, 3, 0xabcdef0123456789ull, ~0ull, 0, 9);
	msg(&f, IBV_TMH_EAGER, 0xabcdef0123456789ull, 100, 3);
	ASSERT_EQ(classify(&f, &t), SHCA_TM_MATCHED);
	ASSERT_U64_EQ(t.tag, 0xabcdef0123456789ull);
	ASSERT_EQ(t.app_ctx, 0xc0ffee);
	ASSERT_U64_EQ(t.x.length, 84);
	/* the payload: bytes 16.. of the message, in order */
	for (i = 0; i < t.x.nlocal; i++) {
		const uint8_t *p = t.x.local[i].iov_base;
		size_t k;

		for (k = 0; k < t.x.local[i].iov_len; k++, got++)
			ASSERT_EQ(p[k], (uint8_t)(16 + got));
	}
	ASSERT_U64_EQ(got, 84);
	free(f.base);
}

TEST(too_many_iovecs_is_unexpected)
{
	static struct shca_tm_rx t;
	struct fake f;

	fake_init(&f, 4);
	add(&f, 1, 5, ~0ull, 0, 1);
	msg(&f, IBV_TMH_EAGER, 5, 16 + SHCA_TM_RX_IOV + 1, 1);
	ASSERT_EQ(classify(&f, &t), SHCA_TM_UNEXPECTED);
	msg(&f, IBV_TMH_EAGER, 5, 16 + SHCA_TM_RX_IOV, 1);
	ASSERT_EQ(classify(&f, &t), SHCA_TM_MATCHED);
	free(f.base);
}

TEST(opcodes_and_lengths)
{
	static struct shca_tm_rx t;
	struct fake f;

	fake_init(&f, 4);
	add(&f, 1, 0, 0, 0, 1);			/* matches any tag */
	msg(&f, IBV_TMH_EAGER, 5, 15, 0);
	ASSERT_EQ(classify(&f, &t), SHCA_TM_PLAIN);
	msg(&f, IBV_TMH_FIN, 5, 64, 0);
	ASSERT_EQ(classify(&f, &t), SHCA_TM_PLAIN);
	msg(&f, 0xff, 5, 64, 0);
	ASSERT_EQ(classify(&f, &t), SHCA_TM_PLAIN);
	msg(&f, IBV_TMH_NO_TAG, 5, 64, 0);
	ASSERT_EQ(classify(&f, &t), SHCA_TM_NO_TAG);
	msg(&f, IBV_TMH_RNDV, 5, 64, 0);
	ASSERT_EQ(classify(&f, &t), SHCA_TM_UNEXPECTED);
	msg(&f, IBV_TMH_EAGER, 5, 16, 0);
	ASSERT_EQ(classify(&f, &t), SHCA_TM_MATCHED);
	f.x.qp_type = IBV_QPT_UD;		/* RC only */
	ASSERT_EQ(classify(&f, &t), SHCA_TM_PLAIN);
	f.x.qp_type = IBV_QPT_RC;
	f.x.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
	ASSERT_EQ(classify(&f, &t), SHCA_TM_PLAIN);
	f.x.opcode = IBV_WR_SEND;
	f.tm->hw_cnt = 1;			/* out of sync */
	ASSERT_EQ(classify(&f, &t), SHCA_TM_UNEXPECTED);
	f.tm->sw_cnt = 1;
	ASSERT_EQ(classify(&f, &t), SHCA_TM_MATCHED);
	free(f.base);
}

TEST(oldest_under_mask_and_consume)
{
	static struct shca_tm_rx t;
	struct fake f;

	fake_init(&f, 8);
	add(&f, 1, 0x1200, 0xff00, 5, 1);
	add(&f, 2, 0x12ff, 0xff00, 3, 2);	/* older, same masked tag */
	add(&f, 3, 0x1234, ~0ull, 1, 3);	/* oldest, but exact */
	msg(&f, IBV_TMH_EAGER, 0x1277, 64, 0);
	ASSERT_EQ(classify(&f, &t), SHCA_TM_MATCHED);
	ASSERT_EQ(t.idx, 2);
	/* a stale generation frees nothing */
	t.gen = 6;
	shca_tm_rx_consume(f.rq, &t);
	ASSERT_EQ(f.tm->e[2].state, 1);
	t.gen = 7;
	shca_tm_rx_consume(f.rq, &t);
	ASSERT_EQ(f.tm->e[2].state, 0);
	ASSERT_EQ(f.rq->head, 0);		/* no ordinary WQE taken */
	ASSERT_EQ(classify(&f, &t), SHCA_TM_MATCHED);
	ASSERT_EQ(t.idx, 1);
	/* an unexpected message counts and takes the ordinary WQE */
	msg(&f, IBV_TMH_EAGER, 0x9999, 64, 0);
	ASSERT_EQ(classify(&f, &t), SHCA_TM_UNEXPECTED);
	shca_tm_rx_consume(f.rq, &t);
	ASSERT_EQ(f.tm->hw_cnt, 1);
	ASSERT_EQ(f.rq->head, 1);
	free(f.base);
}

static int fake_src_calls;

static int fake_src(void *ctx, uint64_t addr, uint32_t rkey, uint32_t len,
		    struct iovec *src)
{
	(void)ctx;
	fake_src_calls++;
	if (rkey != 0x4321)
		return -1;
	src->iov_base = (void *)(uintptr_t)addr;
	src->iov_len = len;
	return 0;
}

/* The net path's rndv_read: classify never calls it (responder.c does,
 * after the lock). */
static void fake_read(void *ctx, const struct shca_rndv_req *r)
{
	(void)ctx;
	(void)r;
	ASSERT_EQ(0, 1);
}

/* TMH, then RVH (addr, rkey, len) in the message's bytes 16..31. */
static void rvh(struct fake *f, uint64_t addr, uint32_t rkey, uint32_t len)
{
	uint64_t be64 = htobe64(addr);
	uint32_t be32 = htonl(rkey);

	memcpy(f->msg + 16, &be64, 8);
	memcpy(f->msg + 24, &be32, 4);
	be32 = htonl(len);
	memcpy(f->msg + 28, &be32, 4);
	f->x.rndv_src = fake_src;
}

TEST(rndv_matched_only_with_a_readable_sender)
{
	static struct shca_tm_rx t;
	struct shca_tm_rndv rv;
	struct fake f;

	fake_init(&f, 4);
	add(&f, 1, 5, ~0ull, 1, 0x51);
	/* split into 5-byte pieces: the RVH is gathered whole */
	msg(&f, IBV_TMH_RNDV, 5, 48, 5);
	rvh(&f, 0xabcdef0123ull, 0x4321, 7000);
	ASSERT_EQ(classify(&f, &t), SHCA_TM_RNDV);
	ASSERT_U64_EQ(t.rv_addr, 0xabcdef0123ull);
	ASSERT_EQ(t.rv_rkey, 0x4321);
	ASSERT_EQ(t.rv_len, 7000);
	ASSERT_U64_EQ(t.tag, 5);
	ASSERT_U64_EQ(t.wqe.w.wr_id, 0x51);
	fake_src_calls = 0;
	shca_tm_rx_rndv_src(&f.x, &rv);
	ASSERT_EQ(fake_src_calls, 1);
	ASSERT_EQ(rv.ret, 0);
	ASSERT_EQ(rv.len, 7000);
	ASSERT_U64_EQ((uintptr_t)rv.src.iov_base, 0xabcdef0123ull);
	rvh(&f, 0xabcdef0123ull, 0x1111, 7000);	/* the READ fails */
	shca_tm_rx_rndv_src(&f.x, &rv);
	ASSERT_NE(rv.ret, 0);
	/* neither rndv_src nor rndv_read (the net path with no slot
	 * left): unexpected, nothing asked */
	f.x.rndv_src = NULL;
	fake_src_calls = 0;
	ASSERT_EQ(classify(&f, &t), SHCA_TM_UNEXPECTED);
	shca_tm_rx_rndv_src(&f.x, &rv);
	ASSERT_EQ(rv.ret, -ENOENT);
	ASSERT_EQ(fake_src_calls, 0);
	/* the net path (rndv_read: the QP reads itself): matched, the RVH
	 * decoded, no source looked up here */
	f.x.rndv_read = fake_read;
	ASSERT_EQ(classify(&f, &t), SHCA_TM_RNDV);
	ASSERT_U64_EQ(t.rv_addr, 0xabcdef0123ull);
	ASSERT_EQ(t.rv_rkey, 0x1111);
	ASSERT_EQ(t.rv_len, 7000);
	shca_tm_rx_rndv_src(&f.x, &rv);
	ASSERT_EQ(rv.ret, -ENOENT);
	ASSERT_EQ(fake_src_calls, 0);
	f.x.rndv_read = NULL;
	/* no room for the RVH; longer than max_rndv_hdr_size */
	msg(&f, IBV_TMH_RNDV, 5, 31, 0);
	f.x.rndv_src = fake_src;
	ASSERT_EQ(classify(&f, &t), SHCA_TM_UNEXPECTED);
	shca_tm_rx_rndv_src(&f.x, &rv);
	ASSERT_EQ(rv.ret, -ENOENT);
	msg(&f, IBV_TMH_RNDV, 5, SHCA_TM_MAX_RNDV_HDR + 1, 0);
	rvh(&f, 0x1000, 0x4321, 8);
	ASSERT_EQ(classify(&f, &t), SHCA_TM_UNEXPECTED);
	/* no tag matches; matching paused */
	msg(&f, IBV_TMH_RNDV, 6, 32, 0);
	rvh(&f, 0x1000, 0x4321, 8);
	ASSERT_EQ(classify(&f, &t), SHCA_TM_UNEXPECTED);
	msg(&f, IBV_TMH_RNDV, 5, 32, 0);
	rvh(&f, 0x1000, 0x4321, 8);
	f.tm->hw_cnt = 1;
	ASSERT_EQ(classify(&f, &t), SHCA_TM_UNEXPECTED);
	f.tm->sw_cnt = 1;
	ASSERT_EQ(classify(&f, &t), SHCA_TM_RNDV);
	/* a matched rendezvous uses its tag as an eager message does */
	shca_tm_rx_consume(f.rq, &t);
	ASSERT_EQ(f.tm->e[1].state, 0);
	ASSERT_EQ(f.rq->head, 0);
	free(f.base);
}
