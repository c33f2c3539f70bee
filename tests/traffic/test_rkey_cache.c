// SPDX-License-Identifier: MIT
/*
 * The responder's rules keep the MR table entries a thread read last
 * (engine/responder.c, key_seen): a stream of requests through one R_Key
 * reads no key index and copies no entry.  What is kept must follow the
 * responder's table: after the responder's ibv_rereg_mr moves its MR,
 * takes away remote write or moves it to another PD (the R_Key stays the
 * same in all three), and after its ibv_dereg_mr, the next request
 * through the same R_Key from the same thread is checked against the MR
 * as it is now -- a remote access error with nothing placed, or the new
 * range -- never against the entry read for the request before.  Each
 * case WRITEs through the key (so the entry is kept), has the responder
 * change its MR, then WRITEs again from the same thread.  Both endpoints
 * in one process, and the responder in a process of its own (its arena
 * read as a peer's; the bytes mapped, or by CMA with SOFTHCA_MAP=0); the
 * one-process cases again on the net path (CMakeLists: SOFTHCA_NET=1,
 * where the responder's look-up runs in the engine thread).  Memory
 * windows that end are test_mw_traffic's.
 */
#include <string.h>

#include "harness.h"
#include "ep.h"

#define LEN	256u
#define DST	1024u		/* where the first WRITE lands in b's buffer */
#define YOFF	16384u		/* where ibv_rereg_mr moves b's MR */
#define SEED	0x31

enum change {
	C_MOVED_OLD,	/* moved: its old range is no longer behind the key */
	C_MOVED_NEW,	/* ... its new one is */
	C_ACCESS,	/* remote write taken away */
	C_PD,		/* moved to another PD: the QP's PD lacks the key */
	C_DEREG,	/* deregistered: the key names nothing */
};

/* b changes its MR; *pd2: the PD of C_PD, for undo */
static void change(struct ep *b, enum change c, struct ibv_pd **pd2)
{
	uint32_t rkey = b->mr->rkey;

	switch (c) {
	case C_MOVED_OLD:
	case C_MOVED_NEW:
		ASSERT_EQ(ibv_rereg_mr(b->mr, IBV_REREG_MR_CHANGE_TRANSLATION,
				       NULL, b->buf + YOFF, LEN, 0),
			  0);
		break;
	case C_ACCESS:
		ASSERT_EQ(ibv_rereg_mr(b->mr, IBV_REREG_MR_CHANGE_ACCESS, NULL,
				       NULL, 0, IBV_ACCESS_LOCAL_WRITE),
			  0);
		break;
	case C_PD:
		*pd2 = ibv_alloc_pd(b->ctx);
		ASSERT_NOT_NULL(*pd2);
		ASSERT_EQ(ibv_rereg_mr(b->mr, IBV_REREG_MR_CHANGE_PD, *pd2,
				       NULL, 0, 0),
			  0);
		break;
	case C_DEREG:
		ASSERT_EQ(ibv_dereg_mr(b->mr), 0);
		b->mr = NULL;
		return;
	}
	/* the same key: what the requester kept is for this key */
	ASSERT_EQ(b->mr->rkey, rkey);
}

/* b's MR as ep_destroy takes it back */
static void undo(struct ep *b, struct ibv_pd *pd2)
{
	if (!b->mr) {
		b->mr = ibv_reg_mr(b->pd, b->buf, b->size,
				   IBV_ACCESS_LOCAL_WRITE);
		ASSERT_NOT_NULL(b->mr);
	}
	if (pd2) {
		ASSERT_EQ(ibv_rereg_mr(b->mr, IBV_REREG_MR_CHANGE_PD, b->pd,
				       NULL, 0, 0),
			  0);
		ASSERT_EQ(ibv_dealloc_pd(pd2), 0);
	}
}

/* b's buffer after the second WRITE: the new range holds it, or nothing
 * was placed anywhere */
static void check_placed(const struct ep *b, enum change c)
{
	if (c == C_MOVED_NEW) {
		ASSERT_EQ(ep_find_pattern_diff(b->buf + YOFF, LEN, SEED, 0),
			  -1);
		ASSERT_EQ(ep_find_non_sentinel(b->buf, YOFF), -1);
	} else {
		ASSERT_EQ(ep_find_non_sentinel(b->buf, b->size), -1);
	}
}

/* a's two WRITEs of the same bytes through the same R_Key, b's change
 * between them (done by between(arg)) */
static void writes(struct ep *a, enum change c, void (*between)(void *),
		   void *arg)
{
	ep_fill_pattern(a->buf, LEN, SEED, 0);
	ASSERT_EQ(ep_post(a, 1, IBV_WR_RDMA_WRITE, 0, LEN, DST, 0), 0);
	ep_expect(a->scq, a->qp, 1, IBV_WC_SUCCESS);
	between(arg);
	ASSERT_EQ(ep_post(a, 2, IBV_WR_RDMA_WRITE, 0, LEN,
			  c == C_MOVED_NEW ? YOFF : DST, 0),
		  0);
	ep_expect(a->scq, a->qp, 2,
		  c == C_MOVED_NEW ? IBV_WC_SUCCESS : IBV_WC_REM_ACCESS_ERR);
}

/* ---- both endpoints in this process ------------------------------ */

struct one {
	struct ep *b;
	enum change c;
	struct ibv_pd *pd2;
};

static void one_between(void *arg)
{
	struct one *o = arg;

	ASSERT_EQ(ep_find_pattern_diff(o->b->buf + DST, LEN, SEED, 0), -1);
	memset(o->b->buf, EP_SENTINEL, o->b->size);
	change(o->b, o->c, &o->pd2);
}

static void run_one(enum change c)
{
	struct one st = { .c = c };
	struct ep_opts o;
	struct ep a, b;

	ep_default_opts(&o, IBV_QPT_RC);
	ep_pair(&a, &o, &b, &o);
	st.b = &b;
	writes(&a, c, one_between, &st);
	check_placed(&b, c);
	undo(&b, st.pd2);
	ep_net_check();
	ep_destroy(&a);
	ep_destroy(&b);
}

/* ---- the responder in a process of its own ----------------------- */

static void responder(int fd, void *arg)
{
	enum change c = *(const enum change *)arg;
	struct ibv_pd *pd2 = NULL;
	struct ep_opts o;
	struct ep b;

	ep_default_opts(&o, IBV_QPT_RC);
	ep_open_remote(&b, &o, fd);
	duo_signal(fd, 'r');
	/* the first WRITE landed */
	duo_expect(fd, 'c');
	ASSERT_EQ(ep_find_pattern_diff(b.buf + DST, LEN, SEED, 0), -1);
	memset(b.buf, EP_SENTINEL, b.size);
	change(&b, c, &pd2);
	duo_signal(fd, 'd');
	/* the second one: where it went, if anywhere */
	duo_expect(fd, 'v');
	check_placed(&b, c);
	undo(&b, pd2);
	duo_signal(fd, 'k');
	duo_expect(fd, 'x');
	ep_destroy(&b);
}

static void two_between(void *arg)
{
	int fd = *(const int *)arg;

	duo_signal(fd, 'c');
	duo_expect(fd, 'd');
}

static void run_two(enum change c)
{
	struct ep_opts o;
	struct duo d;
	struct ep a;

	duo_fork(&d, responder, &c);
	ep_default_opts(&o, IBV_QPT_RC);
	ep_open_remote(&a, &o, d.fd);
	duo_expect(d.fd, 'r');
	writes(&a, c, two_between, &d.fd);
	duo_signal(d.fd, 'v');
	duo_expect(d.fd, 'k');
	duo_signal(d.fd, 'x');
	duo_wait(&d);
	ep_destroy(&a);
}

#define CASE(name, c)                                                   \
	TEST(name##_one_process) { run_one(c); }                         \
	TEST(name##_two_process) { run_two(c); }

CASE(rereg_translation_old, C_MOVED_OLD)
CASE(rereg_translation_new, C_MOVED_NEW)
CASE(rereg_access, C_ACCESS)
CASE(rereg_pd, C_PD)
CASE(dereg, C_DEREG)
