// SPDX-License-Identifier: MIT
/*
 * A forged bounce tag (docs/import.md, "Bounce buffers"; docs/security.md).
 *
 * An importer's receive on an SRQ that names the owner's L_Keys is posted
 * naming a bounce buffer (on a QP's own queue it goes as it is, the
 * responder scattering into the owner's memory: the QPs here take their
 * receives from SRQs of the imported PD, one each); the WQE's own SGEs
 * stay in a private record named by a
 * tag (20-bit index, 12-bit generation) that rides in the ring WQE and
 * comes back in the completion's vendor_err, where the importer's poll
 * finds the record and copies the bounce to those SGEs.  A same-host
 * peer writes completions into the importer's CQ ring, so it can write
 * any vendor_err there.  Here the importer itself plays that peer: it
 * writes completions into its own CQ ring through its arena (the bytes a
 * peer that mapped the arena would write) and then polls.
 *
 * What must hold, each case: no crash; no byte of the owner's memory
 * outside the SGEs of the record the tag names changes (the owner sends
 * a copy of its whole buffer, which starts as EP_SENTINEL; a bounce not
 * written by any sender holds zeros, so what a forged completion moves
 * shows as zeros); and the status:
 *
 *   no_record    index 0, an index past the table, a free slot: a success
 *                becomes IBV_WC_LOC_PROT_ERR, an error keeps its status;
 *                vendor_err reads 0; nothing moves
 *   stale        a live record's index with another generation (one
 *                more, one less): LOC_PROT_ERR, nothing moves; the record
 *                itself: its bytes to its SGE, success; the same tag
 *                again (the record gone, its generation moved on):
 *                LOC_PROT_ERR, nothing more moves
 *   other_qp     the tag of a receive posted on another QP (two SGEs with
 *                a gap), forged on this QP's CQ: that record's bytes go
 *                to its two SGEs, nothing into the gap, success
 *   too_long     byte_len beyond the record's bounce: IBV_WC_LOC_LEN_ERR,
 *                nothing moves (no sender could have placed it)
 *   tm           a matched tag-matching completion (the tag in src_qp,
 *                flagged in wc_flags): no record, LOC_PROT_ERR; a live
 *                receive's record, its bytes to its SGE only
 *   send_record  (net path) the tag of a send WQE's bounce (an RC SEND
 *                from the owner's MR, held by RNR): a receive completion
 *                cannot name it: LOC_PROT_ERR; the SEND's source, which
 *                the owner rewrote after the post, is not written back;
 *                the SEND still completes once a receive is posted, with
 *                the bytes gathered at the post
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "common.h"
#include "ep.h"
#include "import_ep.h"
#include "arena_peer.h"
#include "shm/arena.h"

#define BUF	65536u
#define A_OFF	4096u		/* stale: the record's SGE */
#define A_LEN	256u
#define B_OFF	16384u		/* other_qp: two SGEs ... */
#define B_LEN	128u
#define B_GAP	512u		/* ... the second this far on */
#define C_OFF	32768u		/* too_long */
#define C_LEN	100u
#define D_OFF	36864u		/* tm: a matched completion's record */
#define D_LEN	200u
#define S_OFF	40960u		/* send_record: the SEND's source */
#define S_LEN	1024u
#define TAG_IDX_MASK	0xfffffu	/* import_key.c's tag: index bits */

enum scen { S_RECV, S_SEND };

/* The importer's commands (struct import_cmd): 'B' the owner's buffer
 * back, 'F' off len seed: a pattern there, 'Q' quit. */

/* ------------------------------------------------------------------ */
/* The importer's own arena, as a same-host peer maps it               */

static void *at(uint64_t off, size_t len)
{
	char *a = arena_own_base();
	void *p = shca_arena_ptr(a, shca_arena_hdr(a)->size, off, len);

	ASSERT_NOT_NULL(p);
	return p;
}

static struct shca_qp_shm *qp_shm(uint32_t qpn)
{
	char *a = arena_own_base();
	uint64_t *t = shca_arena_qp_table(a);

	for (uint32_t i = 0; i < SHCA_ARENA_QP_ENTRIES; i++) {
		struct shca_qp_shm *q;

		if (!t[i])
			continue;
		q = at(t[i], sizeof(*q));
		if (q->qpn == qpn)
			return q;
	}
	ASSERT(0);
	return NULL;
}

/* The tag the last receive posted for qp carries (its SRQ's ring WQE's
 * imp: the QP's record names its SRQ's queue). */
static uint32_t last_tag(struct ibv_qp *qp)
{
	struct shca_qp_shm *q = qp_shm(qp->qp_num);
	struct shca_rq_shm *rq = at(q->rq_off, sizeof(*rq));
	struct shca_recv_wqe_shm *w;

	w = at(rq->buf_off + (uint64_t)((rq->tail - 1) & (rq->size - 1)) *
				     rq->wqe_size,
	       sizeof(*w));
	ASSERT_NE(w->imp, 0);
	return w->imp;
}

/* The next slot of qp's receive CQ's ring (*cq: that CQ), zeroed. */
static struct shca_cqe *slot(struct ibv_qp *qp, struct shca_cq_shm **cq)
{
	struct shca_qp_shm *q = qp_shm(qp->qp_num);
	struct shca_cq_shm *c = at(q->rcq_off, sizeof(*c));
	struct shca_cqe *ring = at(c->ring_off,
				   (size_t)c->size * sizeof(*ring));
	struct shca_cqe *e = &ring[c->tail & (c->size - 1)];

	memset(e, 0, sizeof(*e));
	*cq = c;
	return e;
}

/* The entry there for the owner (its lap's phase, shm/arena.h
 * SHCA_CQE_PHASE, release), then the producer counter. */
static void publish(struct shca_cqe *e, struct shca_cq_shm *cq)
{
	__atomic_store_n(&e->ts_ns, shca_cqe_phase(cq->tail, cq->size),
			 __ATOMIC_RELEASE);
	__atomic_store_n(&cq->tail, cq->tail + 1, __ATOMIC_RELEASE);
}

/* A receive completion written into qp's receive CQ, as a peer writes
 * one (ring slot, its phase, then the producer counter). */
static void forge(struct ibv_qp *qp, uint64_t wr_id, enum ibv_wc_status st,
		  uint32_t byte_len, uint32_t tag)
{
	struct shca_cq_shm *cq;
	struct shca_cqe *e = slot(qp, &cq);

	e->wc.wr_id = wr_id;
	e->wc.status = st;
	e->wc.opcode = IBV_WC_RECV;
	e->wc.byte_len = byte_len;
	e->wc.qp_num = qp->qp_num;
	e->wc.vendor_err = tag;
	publish(e, cq);
}

/* A matched tag-matching completion, as a peer writes one: the bounce's
 * tag in src_qp, flagged in wc_flags (shm/arena.h shca_cqe_tm_pack),
 * vendor_err (app_ctx) 0. */
static void forge_tm(struct ibv_qp *qp, uint64_t wr_id, uint32_t byte_len,
		     uint32_t tag)
{
	struct shca_cq_shm *cq;
	struct shca_cqe *e = slot(qp, &cq);

	e->wc.wr_id = wr_id;
	e->wc.status = IBV_WC_SUCCESS;
	e->wc.opcode = IBV_WC_TM_RECV;
	e->wc.wc_flags = IBV_WC_TM_MATCH | IBV_WC_TM_DATA_VALID |
			 SHCA_WC_TM_IMP;
	e->wc.byte_len = byte_len;
	e->wc.qp_num = qp->qp_num;
	e->wc.src_qp = tag;
	publish(e, cq);
}

/* The one completion on cq: it must be wr_id with status st, its
 * vendor_err read as 0. */
static void expect(struct ibv_cq *cq, uint64_t wr_id, enum ibv_wc_status st)
{
	struct ibv_wc wc[2];

	memset(wc, 0, sizeof(wc));
	ASSERT_EQ(ibv_poll_cq(cq, 2, wc), 1);
	ASSERT_U64_EQ(wc[0].wr_id, wr_id);
	ASSERT_EQ(wc[0].status, st);
	ASSERT_EQ(wc[0].vendor_err, 0);
}

static void post(struct ep *e, uint64_t wr_id, struct ibv_sge *sge, int n)
{
	ASSERT_EQ(import_post_recv(e->qp, e->srq, wr_id, sge, n), 0);
}

/* An RC QP on pd (in INIT) that takes its receives from an SRQ of pd of
 * its own. */
static void make_on_srq(struct ep *e, struct ibv_context *ic,
			struct ibv_pd *pd, struct ibv_mr *mr, uint8_t *buf)
{
	struct ibv_srq_init_attr sa;
	struct ibv_srq *srq;

	memset(&sa, 0, sizeof(sa));
	sa.attr.max_wr = 16;
	sa.attr.max_sge = 2;
	srq = ibv_create_srq(pd, &sa);
	ASSERT_NOT_NULL(srq);
	import_ep_make_srq(e, IBV_QPT_RC, ic, pd, srq, mr, buf, BUF, 0);
}

static void unmake_on_srq(struct ep *e)
{
	struct ibv_srq *srq = e->srq;

	import_ep_unmake(e);
	ASSERT_EQ(ibv_destroy_srq(srq), 0);
}

/* ------------------------------------------------------------------ */
/* The owner's buffer, seen from the importer                          */

static uint8_t *shadow;		/* what the owner's buffer must hold */

static void cmd(int sock, char op, uint32_t off, uint32_t len, uint32_t seed)
{
	import_cmd_send(sock, op, off, len, seed, 0, 0);
}

/* The owner's whole buffer equals the shadow: the first difference
 * fails the test, with its offset. */
static void owner_is(int sock)
{
	uint8_t *got = malloc(BUF);

	ASSERT_NOT_NULL(got);
	cmd(sock, 'B', 0, 0, 0);
	xread(sock, got, BUF);
	for (uint32_t k = 0; k < BUF; k++)
		if (got[k] != shadow[k]) {
			fprintf(stderr, "owner's byte %u: %#x, expected %#x\n",
				k, got[k], shadow[k]);
			ASSERT(0);
		}
	free(got);
}

static void owner_fill(int sock, uint32_t off, uint32_t len, uint32_t seed)
{
	cmd(sock, 'F', off, len, seed);
	duo_expect(sock, 'k');
	ep_fill_pattern(shadow + off, len, seed, 0);
}

/* ------------------------------------------------------------------ */
/* The cases                                                           */

static void recv_cases(int sock, struct ibv_context *ic, struct ibv_pd *pd,
		       struct ibv_mr *mr, const struct import_offer *of)
{
	uint8_t *obuf = (uint8_t *)(uintptr_t)of->addr;
	struct ibv_sge sge[2];
	struct ep i1, i2;
	uint32_t t;

	/* two QPs on the imported PD, in INIT: they take receives */
	make_on_srq(&i1, ic, pd, mr, obuf);
	make_on_srq(&i2, ic, pd, mr, obuf);

	/* no_record: index 0, past the table, a slot never used */
	forge(i1.qp, 1, IBV_WC_SUCCESS, 64, 0xabc00000u);
	expect(i1.rcq, 1, IBV_WC_LOC_PROT_ERR);
	forge(i1.qp, 2, IBV_WC_SUCCESS, 64, TAG_IDX_MASK);
	expect(i1.rcq, 2, IBV_WC_LOC_PROT_ERR);
	forge(i1.qp, 3, IBV_WC_SUCCESS, 64, 0x00100005u);
	expect(i1.rcq, 3, IBV_WC_LOC_PROT_ERR);
	forge(i1.qp, 4, IBV_WC_WR_FLUSH_ERR, 0, 0x00000007u);
	expect(i1.rcq, 4, IBV_WC_WR_FLUSH_ERR);
	owner_is(sock);

	/* stale: the live record's index, another generation */
	sge[0] = (struct ibv_sge){ of->addr + A_OFF, A_LEN, mr->lkey };
	post(&i1, 10, sge, 1);
	t = last_tag(i1.qp);
	forge(i1.qp, 11, IBV_WC_SUCCESS, A_LEN, t + (1u << 20));
	expect(i1.rcq, 11, IBV_WC_LOC_PROT_ERR);
	forge(i1.qp, 12, IBV_WC_SUCCESS, A_LEN, t - (1u << 20));
	expect(i1.rcq, 12, IBV_WC_LOC_PROT_ERR);
	owner_is(sock);
	/* the record itself: its bytes (zeros) to its SGE only */
	forge(i1.qp, 13, IBV_WC_SUCCESS, A_LEN, t);
	expect(i1.rcq, 13, IBV_WC_SUCCESS);
	memset(shadow + A_OFF, 0, A_LEN);
	owner_is(sock);
	/* again: the record is gone, its generation moved on */
	owner_fill(sock, A_OFF, A_LEN, 5);
	forge(i1.qp, 14, IBV_WC_SUCCESS, A_LEN, t);
	expect(i1.rcq, 14, IBV_WC_LOC_PROT_ERR);
	owner_is(sock);

	/* other_qp: i2's record, forged on i1's CQ */
	sge[0] = (struct ibv_sge){ of->addr + B_OFF, B_LEN, mr->lkey };
	sge[1] = (struct ibv_sge){ of->addr + B_OFF + B_GAP, B_LEN,
				   mr->lkey };
	post(&i2, 20, sge, 2);
	t = last_tag(i2.qp);
	forge(i1.qp, 21, IBV_WC_SUCCESS, 2 * B_LEN, t);
	expect(i1.rcq, 21, IBV_WC_SUCCESS);
	memset(shadow + B_OFF, 0, B_LEN);
	memset(shadow + B_OFF + B_GAP, 0, B_LEN);
	owner_is(sock);

	/* too_long: more than the record's bounce holds */
	sge[0] = (struct ibv_sge){ of->addr + C_OFF, C_LEN, mr->lkey };
	post(&i1, 30, sge, 1);
	t = last_tag(i1.qp);
	forge(i1.qp, 31, IBV_WC_SUCCESS, 60000, t);
	expect(i1.rcq, 31, IBV_WC_LOC_LEN_ERR);
	forge(i1.qp, 32, IBV_WC_SUCCESS, C_LEN + 1, t);
	expect(i1.rcq, 32, IBV_WC_LOC_PROT_ERR);	/* (gone) */
	owner_is(sock);

	/* tm: a matched tag-matching completion carries the tag in src_qp;
	 * the same rules (no record; a live one moves its bytes only) */
	forge_tm(i1.qp, 40, 64, 0x00300009u);
	expect(i1.rcq, 40, IBV_WC_LOC_PROT_ERR);
	sge[0] = (struct ibv_sge){ of->addr + D_OFF, D_LEN, mr->lkey };
	post(&i1, 41, sge, 1);
	t = last_tag(i1.qp);
	forge_tm(i1.qp, 42, D_LEN, t);
	expect(i1.rcq, 42, IBV_WC_SUCCESS);
	memset(shadow + D_OFF, 0, D_LEN);
	owner_is(sock);

	/* the WQEs still in the rings name records that are gone */
	unmake_on_srq(&i1);
	unmake_on_srq(&i2);
	owner_is(sock);
}

static void send_case(int sock, struct ibv_context *ic, struct ibv_pd *pd,
		      struct ibv_mr *mr, const struct import_offer *of)
{
	uint8_t *obuf = (uint8_t *)(uintptr_t)of->addr;
	struct ibv_sge sge;
	struct ibv_pd *lpd;
	struct ibv_mr *lmr;
	struct ibv_wc wc;
	struct ep i, j;
	uint8_t *lbuf;
	uint32_t t;

	ASSERT_EQ(posix_memalign((void **)&lbuf, 4096, BUF), 0);
	memset(lbuf, EP_SENTINEL, BUF);
	lpd = ibv_alloc_pd(ic);
	ASSERT_NOT_NULL(lpd);
	lmr = ibv_reg_mr(lpd, lbuf, BUF, IBV_ACCESS_LOCAL_WRITE);
	ASSERT_NOT_NULL(lmr);
	make_on_srq(&i, ic, pd, mr, obuf);
	import_ep_make(&j, IBV_QPT_RC, ic, lpd, lmr, lbuf, BUF);
	import_ep_pair(&i, &j);

	/* a receive of i's, to learn where the records are: the SEND's
	 * record is the next slot, generation 0 (a fresh table) */
	sge = (struct ibv_sge){ of->addr + A_OFF, A_LEN, mr->lkey };
	post(&i, 1, &sge, 1);
	t = last_tag(i.qp);
	ASSERT_EQ(t >> 20, 0);
	owner_fill(sock, S_OFF, S_LEN, 9);
	/* the SEND: gathered now into its bounce; j has no receive, so
	 * it waits on RNR (rnr_retry 7) and its record stays */
	ASSERT_EQ(ep_post(&i, 2, IBV_WR_SEND, S_OFF, S_LEN, 0, 0), 0);
	owner_fill(sock, S_OFF, S_LEN, 10);
	/* a receive completion naming the SEND's record */
	forge(i.qp, 3, IBV_WC_SUCCESS, S_LEN, (t & TAG_IDX_MASK) + 1);
	expect(i.rcq, 3, IBV_WC_LOC_PROT_ERR);
	owner_is(sock);
	/* the SEND goes on with what was gathered at the post */
	ASSERT_EQ(ep_post_recv(&j, 4, 0, S_LEN), 0);
	ep_expect(i.scq, i.qp, 2, IBV_WC_SUCCESS);
	wc = ep_expect(j.rcq, j.qp, 4, IBV_WC_SUCCESS);
	ASSERT_EQ(wc.byte_len, S_LEN);
	ASSERT_EQ(ep_find_pattern_diff(lbuf, S_LEN, 9, 0), -1);
	ASSERT_EQ(ep_find_non_sentinel(lbuf + S_LEN, 64), -1);
	ASSERT_GT(ep_tcp_bytes(), 0);

	unmake_on_srq(&i);
	import_ep_unmake(&j);
	ASSERT_EQ(ibv_dereg_mr(lmr), 0);
	ASSERT_EQ(ibv_dealloc_pd(lpd), 0);
	free(lbuf);
	owner_is(sock);
}

static void importer(int sock, void *arg)
{
	enum scen s = (enum scen)(uintptr_t)arg;
	struct importer im;

	shadow = malloc(BUF);
	ASSERT_NOT_NULL(shadow);
	memset(shadow, EP_SENTINEL, BUF);
	importer_begin(&im, sock);
	if (s == S_SEND)
		send_case(sock, im.ctx, im.pd, im.mr, &im.of);
	else
		recv_cases(sock, im.ctx, im.pd, im.mr, &im.of);
	cmd(sock, 'Q', 0, 0, 0);
	duo_expect(sock, 'k');
	importer_end(&im);
	free(shadow);
}

/* The owner: one buffer, its MR in one PD, shared. */
static void owner(enum scen s, bool net, bool cma)
{
	struct import_owner ow;
	struct import_cmd c;
	uint8_t *buf;

	import_env(net, cma);
	import_owner_begin(&ow, importer, (void *)(uintptr_t)s, BUF,
			   IBV_ACCESS_LOCAL_WRITE, 0);
	buf = ow.buf;
	import_owner_offer(&ow, NULL);
	while (import_owner_next(&ow, &c)) {
		switch (c.op) {
		case 'B':
			xwrite(ow.d.fd, buf, BUF);
			break;
		case 'F':
			ASSERT(c.off <= BUF && c.len <= BUF - c.off);
			ep_fill_pattern(buf + c.off, c.len, c.seed, 0);
			duo_signal(ow.d.fd, 'k');
			break;
		default:
			ASSERT(0);
		}
	}
	import_owner_wait(&ow);
	import_owner_end(&ow);
}

TEST(forged_recv_tags)
{
	owner(S_RECV, false, false);
}

TEST(forged_recv_tags_cma)
{
	owner(S_RECV, false, true);
}

TEST(forged_recv_tags_net)
{
	owner(S_RECV, true, false);
}

TEST(forged_tag_of_send_net)
{
	owner(S_SEND, true, false);
}
