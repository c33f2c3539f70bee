// SPDX-License-Identifier: MIT
/*
 * A hostile responder on the same host (issue 14's objects): the
 * requester's engine runs the responder's rules (engine/responder.c) on
 * the responder's arena, which the responder may rewrite at will.  Here
 * a forked responder forges, in its own arena, memory-window entries
 * (bounds past its MR, an R_Key that collides with an MR's, a type 2
 * window moved to another QP, a key index that points out of the table,
 * a seqlock that never settles, a window resurrected after its MR went)
 * and then the other process sends WRITE / READ / SEND / atomics through
 * them; and XRC entries (the domain of the XRC_RECV QP and of the SRQ,
 * the QP table slot, type and ring of the SRQ) under a SEND that names
 * the SRQ.
 *
 * What must hold, every case: the requester does not crash, its own
 * memory outside the SGE it named is untouched (a canary region and the
 * rest of its buffer), the responder's memory outside what the forged
 * entry names is untouched (sentinel pages around its MR, and a victim
 * MR registered after a deregistration), and the operation ends with
 * the error written beside each case.  A forged entry that names the
 * responder's own unmapped memory is the responder's word about itself:
 * the access faults there and the requester reports the responder's
 * page fault as a NIC does, a remote access error (REM_ACCESS_ERR,
 * docs/conformance.md "A page that faults"); the requester never turns
 * it into an access of its own memory.  Run on the mapped path and through CMA
 * (SOFTHCA_MAP=0).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "harness.h"
#include "ep.h"
#include "xrc_ep.h"
#include "arena_peer.h"
#include "shm/arena.h"

#define PG	4096u
#define RLEN	(64u << 10)	/* the responder's MR */
#define WOFF	8192u		/* the window inside it */
#define WLEN	16384u
#define CANARY	0x5a
#define NCANARY	(64u << 10)

enum kase {
	K_BEYOND_WRITE,		/* window past its MR, into a PROT_NONE page */
	K_BEYOND_READ,
	K_BEYOND_ATOMIC,
	K_KEY_COLLIDE,		/* the MR's key indexed to a window entry */
	K_TYPE2_OTHER_QP,	/* a type 2 window moved to another QP */
	K_TYPE2_INV_OTHER_QP,	/* ... and invalidated through ours */
	K_INDEX_OUT,		/* the key index: slots out of the table */
	K_SEQ_STUCK,		/* a writer that never finishes */
	K_RESURRECT,		/* the entry back after its MR was freed */
};

struct hinfo {
	uint32_t key;		/* the key to use */
	uint32_t mr_key;	/* the MR's */
	uint64_t addr;		/* where to aim */
};

static const unsigned int ALL = IBV_ACCESS_REMOTE_WRITE |
				IBV_ACCESS_REMOTE_READ |
				IBV_ACCESS_REMOTE_ATOMIC;

static void opts(struct ep_opts *o)
{
	ep_default_opts(o, IBV_QPT_RC);
	o->buf_size = 64 << 10;
	o->access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND | ALL;
	o->qp_access_set = true;
	o->qp_access = ALL;
}

/* ------------------------------------------------------------------ */
/* The responder's own arena, as a peer maps it                        */

static struct shca_mr_shm *entry_of(uint32_t key)
{
	struct shca_mr_shm *t = shca_arena_mr_table(arena_own_base());

	for (uint32_t i = 1; i < 65536; i++)
		if (__atomic_load_n(&t[i].key, __ATOMIC_ACQUIRE) == key)
			return &t[i];
	return NULL;
}

/* The key index's group of key in its current region (shm/mrkey.c's
 * own hash and layout). */
static uint64_t *group_of(uint32_t key)
{
	char *a = arena_own_base();
	const struct shca_arena_hdr *h = shca_arena_hdr(a);
	unsigned int s = h->mr_index_shift;

	return (uint64_t *)(a + h->mr_index_off +
			    shca_mr_index_region(s)) +
	       (size_t)shca_mr_index_group(key, s) * SHCA_MR_INDEX_WAYS;
}

static uint64_t *index_word(uint32_t key)
{
	uint64_t *g = group_of(key);

	for (int i = 0; i < SHCA_MR_INDEX_WAYS; i++)
		if ((uint32_t)(g[i] >> 32) == key)
			return &g[i];
	return NULL;
}

static uint32_t slot_of(const struct shca_mr_shm *e)
{
	return (uint32_t)(e - shca_arena_mr_table(arena_own_base()));
}

/* Rewrite an entry the way its owner would (seq odd while writing). */
static void forge(struct shca_mr_shm *e, const struct shca_mr_shm *v)
{
	uint32_t s = e->seq;

	__atomic_store_n(&e->seq, s + 1, __ATOMIC_RELEASE);
	e->key = v->key;
	e->access = v->access;
	e->pd = v->pd;
	e->iova = v->iova;
	e->addr = v->addr;
	e->length = v->length;
	e->flags = v->flags;
	e->qpn = v->qpn;
	__atomic_store_n(&e->seq, s + 2, __ATOMIC_RELEASE);
}

/* ------------------------------------------------------------------ */
/* The responder                                                       */

/* [guard][sentinel page][MR: RLEN][sentinel page][guard] */
struct region {
	uint8_t *base, *mr_at;
	struct ibv_mr *mr;
};

static void region_make(struct ep *b, struct region *r)
{
	r->base = mmap(NULL, 4 * PG + RLEN, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT(r->base != MAP_FAILED);
	memset(r->base, EP_SENTINEL, 4 * PG + RLEN);
	ASSERT_EQ(mprotect(r->base, PG, PROT_NONE), 0);
	ASSERT_EQ(mprotect(r->base + 3 * PG + RLEN, PG, PROT_NONE), 0);
	r->mr_at = r->base + 2 * PG;
	r->mr = ibv_reg_mr(b->pd, r->mr_at, RLEN,
			   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND | ALL);
	ASSERT_NOT_NULL(r->mr);
}

/* Nothing of the region moved but [from, from + len) of the MR. */
static void region_check(const struct region *r, uint64_t from, uint64_t len)
{
	ASSERT_EQ(ep_find_non_sentinel(r->base + PG, PG), -1);
	ASSERT_EQ(ep_find_non_sentinel(r->base + 2 * PG + RLEN, PG), -1);
	ASSERT_EQ(ep_find_non_sentinel(r->mr_at, from), -1);
	ASSERT_EQ(ep_find_non_sentinel(r->mr_at + from + len,
				       RLEN - from - len), -1);
}

static struct ibv_mw *bind1(struct ep *b, struct region *r, uint32_t *key)
{
	struct ibv_mw *mw = ibv_alloc_mw(b->pd, IBV_MW_TYPE_1);
	struct ibv_mw_bind mb;

	ASSERT_NOT_NULL(mw);
	memset(&mb, 0, sizeof(mb));
	mb.wr_id = 0xb1;
	mb.send_flags = IBV_SEND_SIGNALED;
	mb.bind_info.mr = r->mr;
	mb.bind_info.addr = (uintptr_t)r->mr_at + WOFF;
	mb.bind_info.length = WLEN;
	mb.bind_info.mw_access_flags = ALL;
	ASSERT_EQ(ibv_bind_mw(b->qp, mw, &mb), 0);
	ep_expect(b->scq, b->qp, 0xb1, IBV_WC_SUCCESS);
	*key = mw->rkey;
	return mw;
}

static void unbind1(struct ep *b, struct ibv_mw *mw)
{
	struct ibv_mw_bind mb;

	memset(&mb, 0, sizeof(mb));
	mb.wr_id = 0xb4;
	mb.send_flags = IBV_SEND_SIGNALED;
	mb.bind_info.mr = NULL;
	ASSERT_EQ(ibv_bind_mw(b->qp, mw, &mb), 0);
	ep_expect(b->scq, b->qp, 0xb4, IBV_WC_SUCCESS);
}

static struct ibv_mw *bind2(struct ep *b, struct region *r, uint32_t *key)
{
	struct ibv_mw *mw = ibv_alloc_mw(b->pd, IBV_MW_TYPE_2);
	struct ibv_send_wr wr, *bad;

	ASSERT_NOT_NULL(mw);
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = 0xb2;
	wr.opcode = IBV_WR_BIND_MW;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.bind_mw.mw = mw;
	wr.bind_mw.rkey = ibv_inc_rkey(mw->rkey);
	wr.bind_mw.bind_info.mr = r->mr;
	wr.bind_mw.bind_info.addr = (uintptr_t)r->mr_at + WOFF;
	wr.bind_mw.bind_info.length = WLEN;
	wr.bind_mw.bind_info.mw_access_flags = ALL;
	ASSERT_EQ(ibv_post_send(b->qp, &wr, &bad), 0);
	ep_expect(b->scq, b->qp, 0xb2, IBV_WC_SUCCESS);
	*key = wr.bind_mw.rkey;
	return mw;
}

static void post_recv_at(struct ep *b, uint64_t id, void *addr, uint32_t lkey)
{
	struct ibv_sge sge = { .addr = (uintptr_t)addr, .length = 256,
			       .lkey = lkey };
	struct ibv_recv_wr wr, *bad;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = id;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	ASSERT_EQ(ibv_post_recv(b->qp, &wr, &bad), 0);
}

static void responder(int fd, void *arg)
{
	enum kase k = *(const enum kase *)arg;
	struct shca_mr_shm *e, v, saved;
	struct ibv_mw *mw = NULL;
	struct region r, victim;
	uint64_t *w, wsaved = 0;
	struct ep_opts o;
	struct hinfo hi;
	struct ep b;
	int i;

	opts(&o);
	ep_open_remote(&b, &o, fd);
	region_make(&b, &r);
	memset(&hi, 0, sizeof(hi));
	hi.mr_key = r.mr->rkey;
	hi.addr = (uintptr_t)r.mr_at + WOFF;
	if (k == K_TYPE2_OTHER_QP || k == K_TYPE2_INV_OTHER_QP)
		mw = bind2(&b, &r, &hi.key);
	else
		mw = bind1(&b, &r, &hi.key);
	e = entry_of(hi.key);
	ASSERT_NOT_NULL(e);
	v = *e;
	switch (k) {
	case K_BEYOND_WRITE:
	case K_BEYOND_READ:
	case K_BEYOND_ATOMIC:
		/* to the end of the guard page after the MR */
		v.length = RLEN - WOFF + 2 * PG;
		forge(e, &v);
		hi.addr = (uintptr_t)r.mr_at + RLEN + PG + 64;
		break;
	case K_KEY_COLLIDE:
		/* the window's entry takes the MR's key and local write,
		 * and the index sends the MR's key there: a window is
		 * still no L_Key */
		v.key = r.mr->rkey;
		v.access |= IBV_ACCESS_LOCAL_WRITE;
		forge(e, &v);
		w = index_word(r.mr->rkey);
		ASSERT_NOT_NULL(w);
		__atomic_store_n(w, (uint64_t)r.mr->rkey << 32 | slot_of(e),
				 __ATOMIC_RELEASE);
		post_recv_at(&b, 0xbb, r.mr_at + WOFF, r.mr->lkey);
		break;
	case K_TYPE2_OTHER_QP:
	case K_TYPE2_INV_OTHER_QP:
		v.qpn = b.qp->qp_num ^ 1;
		forge(e, &v);
		if (k == K_TYPE2_INV_OTHER_QP)
			post_recv_at(&b, 0xbb, r.mr_at + WOFF, r.mr->lkey);
		break;
	case K_INDEX_OUT:
		w = index_word(hi.key & ~0xffu);
		ASSERT_NOT_NULL(w);
		{
			uint64_t *g = group_of(hi.key & ~0xffu);

			for (i = 0; i < SHCA_MR_INDEX_WAYS; i++)
				__atomic_store_n(&g[i],
						 (uint64_t)(hi.key & ~0xffu)
								 << 32 |
							 (0x00100000u + i),
						 __ATOMIC_RELEASE);
			/* and the whole key too */
			g = group_of(hi.key);
			for (i = 0; i < SHCA_MR_INDEX_WAYS; i++)
				__atomic_store_n(&g[i],
						 (uint64_t)hi.key << 32 |
							 (0xfffffff0u + i),
						 __ATOMIC_RELEASE);
		}
		break;
	case K_SEQ_STUCK:
		__atomic_store_n(&e->seq, e->seq + 1, __ATOMIC_RELEASE);
		break;
	case K_RESURRECT:
		break;
	}
	xwrite(fd, &hi, sizeof(hi));
	duo_expect(fd, '1');
	if (k == K_RESURRECT) {
		/* the requester wrote through the window once (it mapped
		 * the MR's segments); now the window and its MR go, the
		 * pages become inaccessible, a victim MR is registered (it
		 * may take the freed pool range), and the window's entry
		 * and index word come back as they were */
		saved = *e;
		w = index_word(hi.key & ~0xffu);
		ASSERT_NOT_NULL(w);
		wsaved = *w;
		unbind1(&b, mw);
		ASSERT_EQ(ibv_dealloc_mw(mw), 0);
		mw = NULL;
		ASSERT_EQ(ibv_dereg_mr(r.mr), 0);
		r.mr = NULL;
		ASSERT_EQ(mprotect(r.mr_at, RLEN, PROT_NONE), 0);
		region_make(&b, &victim);
		forge(e, &saved);
		w = group_of(hi.key & ~0xffu);
		__atomic_store_n(w, wsaved, __ATOMIC_RELEASE);
		xwrite(fd, &hi, sizeof(hi));
		duo_expect(fd, '2');
		region_check(&victim, 0, 0);
		ASSERT_EQ(ibv_dereg_mr(victim.mr), 0);
	}
	duo_expect(fd, '3');
	switch (k) {
	case K_BEYOND_WRITE:
	case K_BEYOND_READ:
	case K_BEYOND_ATOMIC:
	case K_TYPE2_OTHER_QP:
	case K_INDEX_OUT:
	case K_SEQ_STUCK:
		region_check(&r, 0, 0);
		break;
	case K_KEY_COLLIDE:
		ep_expect(b.rcq, b.qp, 0xbb, IBV_WC_LOC_PROT_ERR);
		region_check(&r, 0, 0);
		break;
	case K_TYPE2_INV_OTHER_QP:
		/* the SEND's data landed, the invalidation was refused */
		ep_expect(b.rcq, b.qp, 0xbb, IBV_WC_REM_INV_REQ_ERR);
		region_check(&r, WOFF, 16);
		break;
	case K_RESURRECT:
		break;
	}
	duo_signal(fd, 'e');
	/* the responder's teardown may find its forged bytes: leave */
	_exit(0);
}

/* ------------------------------------------------------------------ */
/* The requester                                                       */

static uint8_t *canary;

static void post(struct ep *a, uint64_t id, enum ibv_wr_opcode op,
		 uint32_t len, uint64_t raddr, uint32_t rkey)
{
	struct ibv_sge sge = { .addr = (uintptr_t)a->buf + PG,
			       .length = len, .lkey = a->mr->lkey };
	struct ibv_send_wr wr, *bad;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = id;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = op;
	wr.send_flags = IBV_SEND_SIGNALED;
	if (op == IBV_WR_SEND_WITH_INV) {
		wr.invalidate_rkey = rkey;
	} else if (op == IBV_WR_ATOMIC_FETCH_AND_ADD) {
		wr.wr.atomic.remote_addr = raddr;
		wr.wr.atomic.rkey = rkey;
		wr.wr.atomic.compare_add = 1;
	} else {
		wr.wr.rdma.remote_addr = raddr;
		wr.wr.rdma.rkey = rkey;
	}
	ASSERT_EQ(ibv_post_send(a->qp, &wr, &bad), 0);
}

/* One operation and its expected status; the requester's own memory
 * outside [PG, PG + len) of its buffer (and its canary) untouched. */
static void op(struct ep *a, uint64_t id, enum ibv_wr_opcode o, uint32_t len,
	       uint64_t raddr, uint32_t rkey, enum ibv_wc_status st)
{
	struct ibv_wc wc;

	memset(a->buf, EP_SENTINEL, a->size);
	if (o != IBV_WR_RDMA_READ && o != IBV_WR_ATOMIC_FETCH_AND_ADD)
		ep_fill_pattern(a->buf + PG, len, (uint32_t)id, 0);
	post(a, id, o, len, raddr, rkey);
	wc = ep_expect(a->scq, a->qp, id, st);
	(void)wc;
	ASSERT_EQ(ep_find_non_sentinel(a->buf, PG), -1);
	ASSERT_EQ(ep_find_non_sentinel(a->buf + PG + len,
				       a->size - PG - len), -1);
	for (uint32_t i = 0; i < NCANARY; i++)
		ASSERT_EQ(canary[i], CANARY);
}

static void requester(struct ep *a, enum kase k, int fd)
{
	struct hinfo hi;

	xread(fd, &hi, sizeof(hi));
	switch (k) {
	case K_BEYOND_WRITE:
		op(a, 1, IBV_WR_RDMA_WRITE, 64, hi.addr, hi.key,
		   IBV_WC_REM_ACCESS_ERR);
		break;
	case K_BEYOND_READ:
		/* the copy faults as a whole: our own buffer is mapped and
		 * writable, so the page was the responder's (shm/mem.c
		 * fault_side); our buffer stays untouched */
		op(a, 1, IBV_WR_RDMA_READ, 64, hi.addr, hi.key,
		   IBV_WC_REM_ACCESS_ERR);
		break;
	case K_BEYOND_ATOMIC:
		op(a, 1, IBV_WR_ATOMIC_FETCH_AND_ADD, 8, hi.addr, hi.key,
		   IBV_WC_REM_ACCESS_ERR);
		break;
	case K_KEY_COLLIDE:
		op(a, 1, IBV_WR_SEND, 16, 0, 0, IBV_WC_REM_OP_ERR);
		break;
	case K_TYPE2_OTHER_QP:
		op(a, 1, IBV_WR_RDMA_WRITE, 64, hi.addr, hi.key,
		   IBV_WC_REM_ACCESS_ERR);
		break;
	case K_TYPE2_INV_OTHER_QP:
		op(a, 1, IBV_WR_SEND_WITH_INV, 16, 0, hi.key,
		   IBV_WC_REM_INV_REQ_ERR);
		break;
	case K_INDEX_OUT:
	case K_SEQ_STUCK:
		op(a, 1, IBV_WR_RDMA_WRITE, 64, hi.addr, hi.key,
		   IBV_WC_REM_ACCESS_ERR);
		break;
	case K_RESURRECT:
		op(a, 1, IBV_WR_RDMA_WRITE, 64, hi.addr, hi.key,
		   IBV_WC_SUCCESS);
		break;
	}
	duo_signal(fd, '1');
	if (k == K_RESURRECT) {
		xread(fd, &hi, sizeof(hi));
		op(a, 2, IBV_WR_RDMA_WRITE, 64, hi.addr, hi.key,
		   IBV_WC_REM_ACCESS_ERR);
		duo_signal(fd, '2');
	}
	duo_signal(fd, '3');
	duo_expect(fd, 'e');
}

static void run(enum kase k, bool cma)
{
	struct ep_opts o;
	struct duo d;
	struct ep a;

	unsetenv("SOFTHCA_NET");
	unsetenv("SOFTHCA_MAP");
	if (cma)
		ASSERT_EQ(setenv("SOFTHCA_MAP", "0", 1), 0);
	canary = mmap(NULL, NCANARY, PROT_READ | PROT_WRITE,
		      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT(canary != MAP_FAILED);
	memset(canary, CANARY, NCANARY);
	duo_fork(&d, responder, &k);
	opts(&o);
	ep_open_remote(&a, &o, d.fd);
	requester(&a, k, d.fd);
	duo_wait(&d);
	ep_destroy(&a);
	munmap(canary, NCANARY);
}

#define BOTH(name, k)                                                     \
	TEST(name##_map) { run(k, false); }                               \
	TEST(name##_cma) { run(k, true); }

BOTH(mw_beyond_mr_write, K_BEYOND_WRITE)
BOTH(mw_beyond_mr_read, K_BEYOND_READ)
BOTH(mw_beyond_mr_atomic, K_BEYOND_ATOMIC)
BOTH(mw_key_collides_with_mr, K_KEY_COLLIDE)
BOTH(mw_type2_other_qp, K_TYPE2_OTHER_QP)
BOTH(mw_type2_inv_other_qp, K_TYPE2_INV_OTHER_QP)
BOTH(mw_index_out_of_table, K_INDEX_OUT)
BOTH(mw_seqlock_stuck, K_SEQ_STUCK)
BOTH(mw_resurrected_after_dereg, K_RESURRECT)

/* ------------------------------------------------------------------ */
/* XRC: the domain and the SRQ entries                                 */

enum xkase {
	X_QP_DOMAIN_ZERO,	/* the XRC_RECV QP's domain forged to 0 */
	X_SRQ_DOMAIN_OTHER,	/* the SRQ's domain forged to another id */
	X_SRQ_SLOT_OUT,		/* the QP table sends the SRQ out of the arena */
	X_SRQ_NOT_XRC,		/* the SRQ's entry forged to a QP type */
	X_SRQ_RING_OUT,		/* the SRQ's ring offset out of the arena */
};

struct xinfo {
	uint32_t qpn, srqn;
	union ibv_gid gid;
};

/* The XRC_SEND QP's timers of these cases: short, for the ring case
 * ends in retries exceeded. */
static const struct xrc_retry xretry = {
	.timeout = 10,
	.retry_cnt = 2,
	.rnr_retry = 2,
};

/* Our own QP table entry of number n. */
static uint64_t *qp_slot(uint32_t n)
{
	return &shca_arena_qp_table(arena_own_base())[n &
						  (SHCA_ARENA_QP_ENTRIES - 1)];
}

static struct shca_qp_shm *qp_entry(uint32_t n)
{
	return (struct shca_qp_shm *)(arena_own_base() + *qp_slot(n));
}

static void xresponder(int fd, void *arg)
{
	enum xkase k = *(const enum xkase *)arg;
	struct ibv_xrcd *x;
	struct ibv_srq *srq;
	struct ibv_qp *rq;
	struct ep_opts o;
	struct xinfo xi, peer;
	struct ep b;

	opts(&o);
	ep_open_remote(&b, &o, fd);
	memset(b.buf, EP_SENTINEL, b.size);
	x = xrc_domain_private(b.ctx);
	srq = xrc_srq(&b, x, b.rcq, 8);
	xrc_srq_post(&b, srq, 0xcc, PG, 256);
	rq = xrc_qp_init(&b, IBV_QPT_XRC_RECV, x);
	memset(&xi, 0, sizeof(xi));
	xi.qpn = rq->qp_num;
	ASSERT_EQ(ibv_get_srq_num(srq, &xi.srqn), 0);
	xi.gid = b.self.gid;
	xwrite(fd, &xi, sizeof(xi));
	xread(fd, &peer, sizeof(peer));
	xrc_connect(&b, rq, peer.qpn, &peer.gid, &xretry);
	ASSERT_NE(qp_entry(rq->qp_num)->xrcd, 0);
	ASSERT_EQ(qp_entry(xi.srqn)->xrcd, qp_entry(rq->qp_num)->xrcd);
	switch (k) {
	case X_QP_DOMAIN_ZERO:
		__atomic_store_n(&qp_entry(rq->qp_num)->xrcd, 0,
				 __ATOMIC_RELEASE);
		break;
	case X_SRQ_DOMAIN_OTHER:
		__atomic_store_n(&qp_entry(xi.srqn)->xrcd,
				 qp_entry(rq->qp_num)->xrcd ^ 1,
				 __ATOMIC_RELEASE);
		break;
	case X_SRQ_SLOT_OUT:
		__atomic_store_n(qp_slot(xi.srqn),
				 shca_arena_hdr(arena_own_base())->size - 8,
				 __ATOMIC_RELEASE);
		break;
	case X_SRQ_NOT_XRC:
		__atomic_store_n(&qp_entry(xi.srqn)->qp_type, IBV_QPT_RC,
				 __ATOMIC_RELEASE);
		break;
	case X_SRQ_RING_OUT:
		__atomic_store_n(&qp_entry(xi.srqn)->rq_off,
				 shca_arena_hdr(arena_own_base())->size - 8,
				 __ATOMIC_RELEASE);
		break;
	}
	duo_signal(fd, 'f');
	duo_expect(fd, '3');
	/* nothing was delivered into the SRQ's buffer */
	ASSERT_EQ(ep_find_non_sentinel(b.buf, b.size), -1);
	duo_signal(fd, 'e');
	_exit(0);
}

static void xrun(enum xkase k)
{
	enum ibv_wc_status st = k == X_SRQ_RING_OUT ? IBV_WC_RETRY_EXC_ERR :
						      IBV_WC_REM_INV_REQ_ERR;
	struct ibv_sge sge;
	struct ibv_send_wr wr, *bad;
	struct xinfo xi, mine;
	struct ibv_qp *sq;
	struct ep_opts o;
	struct duo d;
	struct ep a;

	unsetenv("SOFTHCA_NET");
	unsetenv("SOFTHCA_MAP");
	canary = mmap(NULL, NCANARY, PROT_READ | PROT_WRITE,
		      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT(canary != MAP_FAILED);
	memset(canary, CANARY, NCANARY);
	duo_fork(&d, xresponder, &k);
	opts(&o);
	ep_open_remote(&a, &o, d.fd);
	xread(d.fd, &xi, sizeof(xi));
	sq = xrc_qp_init(&a, IBV_QPT_XRC_SEND, NULL);
	memset(&mine, 0, sizeof(mine));
	mine.qpn = sq->qp_num;
	mine.gid = a.self.gid;
	xwrite(d.fd, &mine, sizeof(mine));
	xrc_connect(&a, sq, xi.qpn, &xi.gid, &xretry);
	duo_expect(d.fd, 'f');
	memset(a.buf, EP_SENTINEL, a.size);
	ep_fill_pattern(a.buf + PG, 64, 1, 0);
	sge.addr = (uintptr_t)a.buf + PG;
	sge.length = 64;
	sge.lkey = a.mr->lkey;
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = 1;
	wr.opcode = IBV_WR_SEND;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.qp_type.xrc.remote_srqn = xi.srqn;
	ASSERT_EQ(ibv_post_send(sq, &wr, &bad), 0);
	ep_expect(a.scq, sq, 1, st);
	ASSERT_EQ(ep_find_non_sentinel(a.buf, PG), -1);
	ASSERT_EQ(ep_find_non_sentinel(a.buf + PG + 64, a.size - PG - 64),
		  -1);
	for (uint32_t i = 0; i < NCANARY; i++)
		ASSERT_EQ(canary[i], CANARY);
	duo_signal(d.fd, '3');
	duo_expect(d.fd, 'e');
	duo_wait(&d);
	ASSERT_EQ(ibv_destroy_qp(sq), 0);
	ep_destroy(&a);
	munmap(canary, NCANARY);
}

TEST(xrc_qp_domain_forged_zero) { xrun(X_QP_DOMAIN_ZERO); }
TEST(xrc_srq_domain_forged_other) { xrun(X_SRQ_DOMAIN_OTHER); }
TEST(xrc_srq_slot_out_of_arena) { xrun(X_SRQ_SLOT_OUT); }
TEST(xrc_srq_forged_not_xrc) { xrun(X_SRQ_NOT_XRC); }
TEST(xrc_srq_ring_out_of_arena) { xrun(X_SRQ_RING_OUT); }

/* ------------------------------------------------------------------ */
/* A receive ring whose WQE changes under the reader                   */

/*
 * The responder's head WQE says 1 SGE of 8 bytes, and a thread of the
 * responder flips its num_sge to 0xfffffff0 and back without end: a
 * reader that checks the count once (shca_rqshm_peek) and reads it again
 * to walk the SGEs walks gigabytes past the ring.  UD: each datagram,
 * longer than the WQE, is dropped and the WQE stays for the next one, so
 * every datagram is another try at the race.  The requester must come
 * through all of them alive, its memory untouched.
 */
#define FLIP_TRIES 400000

/* the parent thread stops the flipper: an atomic, not a volatile (a
 * data race under the C11 model, and TSan reports it) */
static int flip_stop;

static void *flipper(void *arg)
{
	uint32_t *n = arg;

	while (!__atomic_load_n(&flip_stop, __ATOMIC_RELAXED)) {
		__atomic_store_n(n, 0xfffffff0u, __ATOMIC_RELAXED);
		__atomic_store_n(n, 1u, __ATOMIC_RELAXED);
	}
	return NULL;
}

static void ring_responder(int fd, void *arg)
{
	struct shca_recv_wqe_shm *w;
	struct shca_rq_shm *rq;
	struct ep_opts o;
	pthread_t th;
	struct ep b;
	char *base;

	(void)arg;
	ep_default_opts(&o, IBV_QPT_UD);
	ep_open_remote(&b, &o, fd);
	ASSERT_EQ(ep_post_recv(&b, 0xdd, 0, 8), 0);
	base = arena_own_base();
	rq = (struct shca_rq_shm *)(base + qp_entry(b.qp->qp_num)->rq_off);
	w = (struct shca_recv_wqe_shm *)(base + rq->buf_off +
					 (size_t)(rq->head & (rq->size - 1)) *
						 rq->wqe_size);
	ASSERT_EQ(w->num_sge, 1u);
	ASSERT_EQ(w->wr_id, 0xdd);
	ASSERT_EQ(pthread_create(&th, NULL, flipper, &w->num_sge), 0);
	duo_signal(fd, 'f');
	duo_expect(fd, '3');
	__atomic_store_n(&flip_stop, 1, __ATOMIC_RELAXED);
	pthread_join(th, NULL);
	/* the datagrams did reach the WQE (and were dropped, too long) */
	ASSERT_GT(qp_entry(b.qp->qp_num)->stats.v[SHCA_STAT_LENGTH_ERR],
		  0u);
	duo_signal(fd, 'e');
	_exit(0);
}

TEST(ring_num_sge_flips_under_reader)
{
	struct ep_opts o;
	struct duo d;
	struct ep a;

	unsetenv("SOFTHCA_NET");
	unsetenv("SOFTHCA_MAP");
	canary = mmap(NULL, NCANARY, PROT_READ | PROT_WRITE,
		      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT(canary != MAP_FAILED);
	memset(canary, CANARY, NCANARY);
	duo_fork(&d, ring_responder, NULL);
	ep_default_opts(&o, IBV_QPT_UD);
	ep_open_remote(&a, &o, d.fd);
	duo_expect(d.fd, 'f');
	memset(a.buf, EP_SENTINEL, a.size);
	ep_fill_pattern(a.buf + PG, 64, 1, 0);
	for (uint64_t i = 0; i < FLIP_TRIES; i++) {
		ASSERT_EQ(ep_post(&a, i, IBV_WR_SEND, PG, 64, 0, 0), 0);
		ep_expect(a.scq, a.qp, i, IBV_WC_SUCCESS);
	}
	ASSERT_EQ(ep_find_non_sentinel(a.buf, PG), -1);
	ASSERT_EQ(ep_find_non_sentinel(a.buf + PG + 64, a.size - PG - 64),
		  -1);
	for (uint32_t i = 0; i < NCANARY; i++)
		ASSERT_EQ(canary[i], CANARY);
	duo_signal(d.fd, '3');
	duo_expect(d.fd, 'e');
	duo_wait(&d);
	ep_destroy(&a);
	munmap(canary, NCANARY);
}
