// SPDX-License-Identifier: MIT
/*
 * Traffic through memory windows (docs/memory-windows.md), on every path:
 * the same host with mapped memory, the same host through CMA
 * (SOFTHCA_MAP=0), and the net path (SOFTHCA_NET=1, with the bytes seen
 * in this process's TCP sockets); each with both endpoints in one
 * process, and with the window bound in one process and used by another.
 *
 * The responder (b) registers its buffer with local write and MW_BIND
 * only: every remote access goes through a window, checked against the
 * window's bounds and rights.  A window that ended (unbound, invalidated
 * by SEND_WITH_INV, deallocated, rebound with a new tag) or a key nobody
 * bound must get the spec's remote access error.
 */
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>

#include "harness.h"
#include "ep.h"

#define WOFF	4096u		/* the window starts here in b's buffer */
#define WLEN	49152u
#define BIG	32768u		/* a WRITE of many packets into it */

enum kase {
	K_TYPE1_OPS,		/* WRITE, READ, atomics inside; past the end */
	K_TYPE2_SEND_INV,	/* SEND_WITH_INV ends it; then refused */
	K_RIGHTS,		/* read-only window: WRITE refused */
	K_STALE_TAG,		/* rebound with the next tag: old key refused */
	K_DEALLOC,		/* deallocated: refused */
	K_INV_TYPE1,		/* SEND_WITH_INV of a type 1 window: error */
	K_GUESS,		/* a key of another prefix: refused */
	K_LOCAL_INV,		/* the owner's LOCAL_INV: refused */
};

struct kinfo {
	uint32_t key, old_key;
	uint64_t addr;		/* the window's first byte, b's address */
};

static void opts(struct ep_opts *o)
{
	ep_default_opts(o, IBV_QPT_RC);
	o->buf_size = 64 << 10;
	o->access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND;
	o->qp_access_set = true;
	o->qp_access = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
		       IBV_ACCESS_REMOTE_ATOMIC;
}

static void post(struct ep *a, uint64_t wr_id, enum ibv_wr_opcode op,
		 uint64_t loff, uint32_t len, uint64_t raddr, uint32_t rkey,
		 uint64_t cmp_add, uint64_t swap)
{
	struct ibv_sge sge = { .addr = (uintptr_t)a->buf + loff,
			       .length = len, .lkey = a->mr->lkey };
	struct ibv_send_wr wr, *bad;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = wr_id;
	wr.sg_list = &sge;
	wr.num_sge = len ? 1 : 0;
	wr.opcode = op;
	wr.send_flags = IBV_SEND_SIGNALED;
	if (op == IBV_WR_SEND_WITH_INV) {
		wr.invalidate_rkey = rkey;
	} else if (op == IBV_WR_ATOMIC_FETCH_AND_ADD ||
		   op == IBV_WR_ATOMIC_CMP_AND_SWP) {
		wr.wr.atomic.remote_addr = raddr;
		wr.wr.atomic.rkey = rkey;
		wr.wr.atomic.compare_add = cmp_add;
		wr.wr.atomic.swap = swap;
	} else {
		wr.wr.rdma.remote_addr = raddr;
		wr.wr.rdma.rkey = rkey;
	}
	ASSERT_EQ(ibv_post_send(a->qp, &wr, &bad), 0);
}

static void op_ok(struct ep *a, uint64_t id, enum ibv_wr_opcode op,
		  uint64_t loff, uint32_t len, uint64_t raddr, uint32_t rkey)
{
	post(a, id, op, loff, len, raddr, rkey, 0, 0);
	ep_expect(a->scq, a->qp, id, IBV_WC_SUCCESS);
}

static void op_refused(struct ep *a, uint64_t id, enum ibv_wr_opcode op,
		       uint64_t raddr, uint32_t rkey)
{
	post(a, id, op, 0, 16, raddr, rkey, 0, 0);
	ep_expect(a->scq, a->qp, id, IBV_WC_REM_ACCESS_ERR);
}

/* ------------------------------------------------------------------ */
/* The responder: the window's owner                                   */

static struct ibv_mw *bind1(struct ep *b, struct ibv_mw *mw, unsigned acc)
{
	struct ibv_mw_bind mb;

	memset(&mb, 0, sizeof(mb));
	mb.wr_id = 0xb1;
	mb.send_flags = IBV_SEND_SIGNALED;
	mb.bind_info.mr = b->mr;
	mb.bind_info.addr = (uintptr_t)b->buf + WOFF;
	mb.bind_info.length = WLEN;
	mb.bind_info.mw_access_flags = acc;
	ASSERT_EQ(ibv_bind_mw(b->qp, mw, &mb), 0);
	ep_expect(b->scq, b->qp, 0xb1, IBV_WC_SUCCESS);
	return mw;
}

static uint32_t bind2(struct ep *b, struct ibv_mw *mw, unsigned acc)
{
	struct ibv_send_wr wr, *bad;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = 0xb2;
	wr.opcode = IBV_WR_BIND_MW;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.bind_mw.mw = mw;
	wr.bind_mw.rkey = ibv_inc_rkey(mw->rkey);
	wr.bind_mw.bind_info.mr = b->mr;
	wr.bind_mw.bind_info.addr = (uintptr_t)b->buf + WOFF;
	wr.bind_mw.bind_info.length = WLEN;
	wr.bind_mw.bind_info.mw_access_flags = acc;
	ASSERT_EQ(ibv_post_send(b->qp, &wr, &bad), 0);
	ep_expect(b->scq, b->qp, 0xb2, IBV_WC_SUCCESS);
	return wr.bind_mw.rkey;
}

static const unsigned ALL = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
			    IBV_ACCESS_REMOTE_ATOMIC;

static struct ibv_mw *resp_bind(struct ep *b, enum kase k, struct kinfo *ki)
{
	bool type2 = k == K_TYPE2_SEND_INV || k == K_RIGHTS ||
		     k == K_DEALLOC || k == K_LOCAL_INV;
	struct ibv_mw *mw;

	memset(b->buf, EP_SENTINEL, b->size);
	mw = ibv_alloc_mw(b->pd, type2 ? IBV_MW_TYPE_2 : IBV_MW_TYPE_1);
	ASSERT_NOT_NULL(mw);
	ki->addr = (uintptr_t)b->buf + WOFF;
	if (type2) {
		ki->key = bind2(b, mw, k == K_RIGHTS ? IBV_ACCESS_REMOTE_READ :
						       ALL);
	} else {
		bind1(b, mw, ALL);
		ki->key = mw->rkey;
	}
	if (k == K_TYPE2_SEND_INV || k == K_INV_TYPE1)
		ASSERT_EQ(ep_post_recv(b, 0xbb, 0, 64), 0);
	return mw;
}

/* Between the requester's two phases. */
static void resp_mid(struct ep *b, enum kase k, struct kinfo *ki,
		     struct ibv_mw **mw)
{
	struct ibv_wc wc;
	struct ibv_send_wr wr, *bad;

	switch (k) {
	case K_TYPE2_SEND_INV:
		wc = ep_expect(b->rcq, b->qp, 0xbb, IBV_WC_SUCCESS);
		ASSERT_EQ(wc.opcode, IBV_WC_RECV);
		ASSERT(wc.wc_flags & IBV_WC_WITH_INV);
		ASSERT(!(wc.wc_flags & IBV_WC_WITH_IMM));
		ASSERT_EQ(wc.invalidated_rkey, ki->key);
		ASSERT_EQ(wc.byte_len, 16);
		break;
	case K_INV_TYPE1:
		/* rxe's class J: the receive WQE completes in error */
		ep_expect(b->rcq, b->qp, 0xbb, IBV_WC_REM_INV_REQ_ERR);
		break;
	case K_STALE_TAG:
		ki->old_key = ki->key;
		bind1(b, *mw, ALL);
		ki->key = (*mw)->rkey;
		ASSERT(ki->key != ki->old_key);
		break;
	case K_DEALLOC:
		ASSERT_EQ(ibv_dealloc_mw(*mw), 0);
		*mw = NULL;
		break;
	case K_LOCAL_INV:
		memset(&wr, 0, sizeof(wr));
		wr.wr_id = 0xb3;
		wr.opcode = IBV_WR_LOCAL_INV;
		wr.send_flags = IBV_SEND_SIGNALED;
		wr.invalidate_rkey = ki->key;
		ASSERT_EQ(ibv_post_send(b->qp, &wr, &bad), 0);
		ep_expect(b->scq, b->qp, 0xb3, IBV_WC_SUCCESS);
		break;
	default:
		break;
	}
}

static void resp_end(struct ep *b, enum kase k, struct ibv_mw *mw)
{
	if (k == K_TYPE1_OPS) {
		/* the WRITE of phase 1 landed, nothing around it moved */
		ASSERT_EQ(ep_find_pattern_diff(b->buf + WOFF + 64, 256, 7, 0),
			  -1);
		ASSERT_EQ(ep_find_pattern_diff(b->buf + WOFF + 8192, BIG, 9,
					       0), -1);
		ASSERT_EQ(ep_find_non_sentinel(b->buf + WOFF + 8192 + BIG,
					       WLEN - 8192 - BIG - 8), -1);
		ASSERT_EQ(ep_find_non_sentinel(b->buf, WOFF), -1);
		ASSERT_EQ(ep_find_non_sentinel(b->buf + WOFF + WLEN,
					       b->size - WOFF - WLEN), -1);
	}
	if (k == K_TYPE2_SEND_INV || k == K_LOCAL_INV) {
		/* the window ended: its MR is free to go (ep_destroy) */
	}
	if (mw)
		ASSERT_EQ(ibv_dealloc_mw(mw), 0);
}

/* ------------------------------------------------------------------ */
/* The requester                                                       */

static void req_phase1(struct ep *a, enum kase k, const struct kinfo *ki)
{
	uint64_t v;

	switch (k) {
	case K_TYPE1_OPS:
		ep_fill_pattern(a->buf, 256, 7, 0);
		op_ok(a, 1, IBV_WR_RDMA_WRITE, 0, 256, ki->addr + 64, ki->key);
		memset(a->buf + 4096, 0, 256);
		op_ok(a, 2, IBV_WR_RDMA_READ, 4096, 256, ki->addr + 64,
		      ki->key);
		ASSERT_EQ(ep_find_pattern_diff(a->buf + 4096, 256, 7, 0), -1);
		/* many packets on the net path (the middles placed directly
		 * into the window's memory) */
		ep_fill_pattern(a->buf + 16384, BIG, 9, 0);
		op_ok(a, 6, IBV_WR_RDMA_WRITE, 16384, BIG, ki->addr + 8192,
		      ki->key);
		/* atomics on the window's last word */
		post(a, 3, IBV_WR_ATOMIC_FETCH_AND_ADD, 8192, 8,
		     ki->addr + WLEN - 8, ki->key, 5, 0);
		ep_expect(a->scq, a->qp, 3, IBV_WC_SUCCESS);
		memcpy(&v, a->buf + 8192, 8);
		ASSERT_EQ(v, 0xa5a5a5a5a5a5a5a5ull);
		post(a, 4, IBV_WR_ATOMIC_CMP_AND_SWP, 8192, 8,
		     ki->addr + WLEN - 8, ki->key, v + 5, 42);
		ep_expect(a->scq, a->qp, 4, IBV_WC_SUCCESS);
		memcpy(&v, a->buf + 8192, 8);
		ASSERT_EQ(v, 0xa5a5a5a5a5a5a5a5ull + 5);
		op_ok(a, 5, IBV_WR_RDMA_READ, 8192, 8, ki->addr + WLEN - 8,
		      ki->key);
		memcpy(&v, a->buf + 8192, 8);
		ASSERT_EQ(v, 42);
		break;
	case K_TYPE2_SEND_INV:
		op_ok(a, 1, IBV_WR_RDMA_WRITE, 0, 64, ki->addr, ki->key);
		op_ok(a, 2, IBV_WR_SEND_WITH_INV, 0, 16, 0, ki->key);
		break;
	case K_RIGHTS:
		op_ok(a, 1, IBV_WR_RDMA_READ, 0, 64, ki->addr, ki->key);
		break;
	case K_STALE_TAG:
	case K_DEALLOC:
	case K_LOCAL_INV:
		op_ok(a, 1, IBV_WR_RDMA_WRITE, 0, 64, ki->addr, ki->key);
		break;
	case K_INV_TYPE1:
		post(a, 1, IBV_WR_SEND_WITH_INV, 0, 16, 0, ki->key, 0, 0);
		ep_expect(a->scq, a->qp, 1, IBV_WC_REM_INV_REQ_ERR);
		break;
	case K_GUESS:
		/* the window's tag under another prefix, and the next tag */
		op_refused(a, 1, IBV_WR_RDMA_WRITE, ki->addr,
			   ki->key ^ 0x01000000u);
		break;
	}
}

static void req_phase2(struct ep *a, enum kase k, const struct kinfo *ki)
{
	switch (k) {
	case K_TYPE1_OPS:
		/* 16 bytes from 8 before the end: past the window */
		op_refused(a, 10, IBV_WR_RDMA_WRITE, ki->addr + WLEN - 8,
			   ki->key);
		break;
	case K_TYPE2_SEND_INV:
	case K_DEALLOC:
	case K_LOCAL_INV:
		op_refused(a, 10, IBV_WR_RDMA_WRITE, ki->addr, ki->key);
		break;
	case K_RIGHTS:
		op_refused(a, 10, IBV_WR_RDMA_WRITE, ki->addr, ki->key);
		break;
	case K_STALE_TAG:
		op_ok(a, 10, IBV_WR_RDMA_WRITE, 0, 64, ki->addr, ki->key);
		op_refused(a, 11, IBV_WR_RDMA_WRITE, ki->addr, ki->old_key);
		break;
	case K_INV_TYPE1:
	case K_GUESS:
		break;
	}
}

/* ------------------------------------------------------------------ */
/* Paths and processes                                                 */

enum path { P_MAP, P_CMA, P_NET };

static void set_path(enum path p)
{
	unsetenv("SOFTHCA_NET");
	unsetenv("SOFTHCA_MAP");
	if (p == P_CMA)
		ASSERT_EQ(setenv("SOFTHCA_MAP", "0", 1), 0);
	if (p == P_NET)
		ASSERT_EQ(setenv("SOFTHCA_NET", "1", 1), 0);
}

static void net_check(enum path p)
{
	if (p == P_NET)
		ASSERT_GT(ep_tcp_bytes(), 0);
}

static void run_one(enum kase k, enum path p)
{
	struct ep_opts o;
	struct kinfo ki;
	struct ibv_mw *mw;
	struct ep a, b;

	set_path(p);
	opts(&o);
	ep_pair(&a, &o, &b, &o);
	mw = resp_bind(&b, k, &ki);
	req_phase1(&a, k, &ki);
	resp_mid(&b, k, &ki, &mw);
	req_phase2(&a, k, &ki);
	net_check(p);
	resp_end(&b, k, mw);
	ep_destroy(&a);
	ep_destroy(&b);
}

static void responder(int fd, void *arg)
{
	enum kase k = *(const enum kase *)arg;
	struct ep_opts o;
	struct kinfo ki;
	struct ibv_mw *mw;
	struct ep b;

	opts(&o);
	ep_open_remote(&b, &o, fd);
	mw = resp_bind(&b, k, &ki);
	xwrite(fd, &ki, sizeof(ki));
	duo_expect(fd, '1');
	resp_mid(&b, k, &ki, &mw);
	xwrite(fd, &ki, sizeof(ki));
	duo_expect(fd, '2');
	resp_end(&b, k, mw);
	duo_signal(fd, 'e');
	ep_destroy(&b);
}

static void run_two(enum kase k, enum path p)
{
	struct ep_opts o;
	struct kinfo ki;
	struct duo d;
	struct ep a;

	set_path(p);
	duo_fork(&d, responder, &k);
	opts(&o);
	ep_open_remote(&a, &o, d.fd);
	xread(d.fd, &ki, sizeof(ki));
	req_phase1(&a, k, &ki);
	duo_signal(d.fd, '1');
	xread(d.fd, &ki, sizeof(ki));
	req_phase2(&a, k, &ki);
	net_check(p);
	duo_signal(d.fd, '2');
	duo_expect(d.fd, 'e');
	duo_wait(&d);
	ep_destroy(&a);
}

#define PATHS(name, k)                                                    \
	TEST(name##_map_one) { run_one(k, P_MAP); }                       \
	TEST(name##_map_two) { run_two(k, P_MAP); }                       \
	TEST(name##_cma_one) { run_one(k, P_CMA); }                       \
	TEST(name##_cma_two) { run_two(k, P_CMA); }                       \
	TEST(name##_net_one) { run_one(k, P_NET); }                       \
	TEST(name##_net_two) { run_two(k, P_NET); }

PATHS(type1_ops, K_TYPE1_OPS)
PATHS(type2_send_inv, K_TYPE2_SEND_INV)
PATHS(rights, K_RIGHTS)
PATHS(stale_tag, K_STALE_TAG)
PATHS(dealloc, K_DEALLOC)
PATHS(send_inv_type1, K_INV_TYPE1)
PATHS(guessed_key, K_GUESS)
PATHS(local_inv, K_LOCAL_INV)
