// SPDX-License-Identifier: MIT
/*
 * Which key fails first for an RDMA READ or an atomic (issue 12, decided
 * as a NIC does it): the local buffer of a READ or an atomic is the target
 * of its response, so its L_Key is checked when the response arrives,
 * after the responder has carried the request out.
 *
 *   R_Key bad, L_Key bad        REM_ACCESS_ERR (the responder's NAK comes
 *                               first); the responder's QP to ERR with
 *                               IBV_EVENT_QP_ACCESS_ERR; nothing changed
 *   L_Key bad, READ             LOC_PROT_ERR, after the responder served
 *                               it; nothing placed in the local buffer
 *   L_Key bad, FETCH_ADD/CMP_SWP LOC_PROT_ERR; the remote word changed,
 *                               once; nothing placed in the local buffer
 *
 * The requester's RC QP goes to ERR and flushes the WR behind it (fenced,
 * so that it is not sent before the error is known); the responder's QP
 * stays in RTS when only the local key was bad.  Every
 * byte of the requester's buffer stays as it was (a READ's SGE that runs
 * past its MR's end included: nothing is written outside a valid SGE).
 * On the same-host path (one process and two) and on the net path
 * (SOFTHCA_NET=1, one process and two; a long READ there is several
 * response packets).
 */
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "ep.h"

#define KEY_XOR	0x5a5u		/* other key bits: no such key */
#define LOCAL	(64u << 10)	/* where a's bad SGE points */
#define RSRC	(1u << 20)	/* b's READ source */
#define RWORD	(3u << 20)	/* b's atomic word */
#define RLEN	(3u * 4096 + 100)	/* several packets of any MTU */
#define SEED	0x6b
#define START	0x1122334455667788ull
#define ADD	0x0101010101010101ull
#define SWAP	0x0badcafe0badcafeull

enum kcase {
	BOTH_BAD_READ,
	BOTH_BAD_FETCH_ADD,
	LOCAL_BAD_READ,
	LOCAL_PAST_MR_READ,	/* a valid L_Key whose MR ends inside it */
	LOCAL_BAD_FETCH_ADD,
	LOCAL_BAD_CMP_SWAP,
};

static bool remote_bad(enum kcase k)
{
	return k == BOTH_BAD_READ || k == BOTH_BAD_FETCH_ADD;
}

static bool is_read(enum kcase k)
{
	return k == BOTH_BAD_READ || k == LOCAL_BAD_READ ||
	       k == LOCAL_PAST_MR_READ;
}

/* ------------------------------------------------------------------ */
/* The responder                                                       */

static void resp_prepare(struct ep *b)
{
	uint64_t v = START;

	memset(b->buf, EP_SENTINEL, b->size);
	ep_fill_pattern(b->buf + RSRC, RLEN, SEED, 0);
	memcpy(b->buf + RWORD, &v, 8);
	ASSERT_EQ(ep_post_recv(b, 0xb1, 0, 4096), 0);
}

static void resp_check(struct ep *b, enum kcase k)
{
	uint64_t v, want = START;

	if (remote_bad(k)) {
		struct ibv_async_event ev;

		/* the responder refused it: IBA 11.6.3.2 */
		ep_wait_async(b->ctx, IBV_EVENT_QP_ACCESS_ERR, &ev);
		ASSERT(ev.element.qp == b->qp);
		ibv_ack_async_event(&ev);
		ep_wait_qp_state(b->qp, IBV_QPS_ERR);
		ep_expect(b->rcq, b->qp, 0xb1, IBV_WC_WR_FLUSH_ERR);
	} else {
		/* served, as any READ or atomic: no completion, no event */
		ASSERT_EQ(ep_qp_state(b->qp), IBV_QPS_RTS);
		if (k == LOCAL_BAD_FETCH_ADD)
			want = START + ADD;
		else if (k == LOCAL_BAD_CMP_SWAP)
			want = SWAP;
	}
	ep_expect_empty(b->rcq);
	ep_expect_empty(b->scq);
	ep_expect_no_async(b->ctx);
	/* the word changed once, or not at all; the READ source stays */
	memcpy(&v, b->buf + RWORD, 8);
	ASSERT_U64_EQ(v, want);
	ASSERT_EQ(ep_find_pattern_diff(b->buf + RSRC, RLEN, SEED, 0), -1);
	ASSERT_EQ(ep_find_non_sentinel(b->buf + 4096, RSRC - 4096), -1);
	ASSERT_EQ(ep_find_non_sentinel(b->buf + RSRC + RLEN,
				       RWORD - RSRC - RLEN), -1);
	ASSERT_EQ(ep_find_non_sentinel(b->buf + RWORD + 8,
				       b->size - RWORD - 8), -1);
}

/* ------------------------------------------------------------------ */
/* The requester                                                       */

static void req_run(struct ep *a, enum kcase k)
{
	struct ibv_send_wr wr[2], *bad = NULL;
	struct ibv_mr *mr2 = NULL;
	struct ibv_sge sge[2];
	struct ibv_wc wc;
	enum ibv_wc_status want;
	uint32_t rkey = a->peer.rkey;
	int64_t at;

	memset(a->buf, EP_SENTINEL, a->size);
	memset(wr, 0, sizeof(wr));
	sge[0].addr = (uintptr_t)a->buf + LOCAL;
	sge[0].length = is_read(k) ? RLEN : 8;
	sge[0].lkey = a->mr->lkey ^ KEY_XOR;
	if (k == LOCAL_PAST_MR_READ) {
		/* an MR of a's first LOCAL + 64 bytes; the SGE starts 64
		 * bytes before its end: all but 64 bytes outside it */
		mr2 = ibv_reg_mr(a->pd, a->buf, LOCAL + 64,
				 IBV_ACCESS_LOCAL_WRITE);
		ASSERT_NOT_NULL(mr2);
		sge[0].lkey = mr2->lkey;
	}
	if (remote_bad(k))
		rkey ^= KEY_XOR;
	wr[0].wr_id = 0xa1;
	wr[0].sg_list = &sge[0];
	wr[0].num_sge = 1;
	wr[0].send_flags = IBV_SEND_SIGNALED;
	if (is_read(k)) {
		wr[0].opcode = IBV_WR_RDMA_READ;
		wr[0].wr.rdma.remote_addr = a->peer.addr + RSRC;
		wr[0].wr.rdma.rkey = rkey;
	} else {
		wr[0].opcode = k == LOCAL_BAD_CMP_SWAP ?
				       IBV_WR_ATOMIC_CMP_AND_SWP :
				       IBV_WR_ATOMIC_FETCH_AND_ADD;
		wr[0].wr.atomic.remote_addr = a->peer.addr + RWORD;
		wr[0].wr.atomic.rkey = rkey;
		wr[0].wr.atomic.compare_add =
			k == LOCAL_BAD_CMP_SWAP ? START : ADD;
		wr[0].wr.atomic.swap = SWAP;
	}
	wr[0].next = &wr[1];
	sge[1].addr = (uintptr_t)a->buf;
	sge[1].length = 8;
	sge[1].lkey = a->mr->lkey;
	/* the SEND behind waits for the READ's or atomic's result (the
	 * fence): without it a NIC sends it at once, and the responder may
	 * take it before the error is known, though it completes flushed */
	wr[1].wr_id = 0xa2;
	wr[1].opcode = IBV_WR_SEND;
	wr[1].sg_list = &sge[1];
	wr[1].num_sge = 1;
	wr[1].send_flags = IBV_SEND_SIGNALED | IBV_SEND_FENCE;
	ASSERT_EQ(ibv_post_send(a->qp, wr, &bad), 0);

	want = remote_bad(k) ? IBV_WC_REM_ACCESS_ERR : IBV_WC_LOC_PROT_ERR;
	wc = ep_expect(a->scq, a->qp, 0xa1, want);
	ASSERT_EQ(wc.opcode, is_read(k) ? IBV_WC_RDMA_READ :
			     k == LOCAL_BAD_CMP_SWAP ? IBV_WC_COMP_SWAP :
						       IBV_WC_FETCH_ADD);
	ep_expect(a->scq, a->qp, 0xa2, IBV_WC_WR_FLUSH_ERR);
	ep_expect_empty(a->scq);
	ep_wait_qp_state(a->qp, IBV_QPS_ERR);
	/* nothing placed anywhere in a's buffer */
	at = ep_find_non_sentinel(a->buf, a->size);
	if (at >= 0)
		harness_fail(__FILE__, __LINE__,
			     "a's buffer written at %lld (the bad SGE is at "
			     "%u..%u)", (long long)at, LOCAL, LOCAL + RLEN);
	if (mr2)
		ASSERT_EQ(ibv_dereg_mr(mr2), 0);
}

/* ------------------------------------------------------------------ */
/* One process, two, and the net path                                  */

/* SOFTHCA_NET=1: the bytes went through this process's TCP sockets. */
static void net_check(void)
{
	uint64_t tcp = ep_tcp_bytes();

	printf("  net path: %llu bytes through TCP\n",
	       (unsigned long long)tcp);
	ASSERT_GT(tcp, 0);
}

static void run_one(enum kcase k, bool net)
{
	struct ep_opts o;
	struct ep a, b;

	if (net)
		ASSERT_EQ(setenv("SOFTHCA_NET", "1", 1), 0);
	ep_default_opts(&o, IBV_QPT_RC);
	ep_pair(&a, &o, &b, &o);
	resp_prepare(&b);
	req_run(&a, k);
	resp_check(&b, k);
	if (net)
		net_check();
	ep_destroy(&a);
	ep_destroy(&b);
}

static void responder(int fd, void *arg)
{
	enum kcase k = *(const enum kcase *)arg;
	struct ep_opts o;
	struct ep b;

	ep_default_opts(&o, IBV_QPT_RC);
	ep_open_remote(&b, &o, fd);
	resp_prepare(&b);
	duo_signal(fd, 'p');
	duo_expect(fd, 'r');
	resp_check(&b, k);
	duo_signal(fd, 'c');
	ep_destroy(&b);
}

static void run_two(enum kcase k, bool net)
{
	struct ep_opts o;
	struct duo d;
	struct ep a;

	if (net)
		ASSERT_EQ(setenv("SOFTHCA_NET", "1", 1), 0);
	duo_fork(&d, responder, &k);
	ep_default_opts(&o, IBV_QPT_RC);
	ep_open_remote(&a, &o, d.fd);
	duo_expect(d.fd, 'p');
	req_run(&a, k);
	/* while the connection is up */
	if (net)
		net_check();
	duo_signal(d.fd, 'r');
	duo_expect(d.fd, 'c');
	duo_wait(&d);
	ep_destroy(&a);
}

#define CASES(name, k)                                                    \
	TEST(name##_one_process) { run_one(k, false); }                   \
	TEST(name##_two_process) { run_two(k, false); }                   \
	TEST(net_##name##_one_process) { run_one(k, true); }              \
	TEST(net_##name##_two_process) { run_two(k, true); }

CASES(both_bad_read_rem_access, BOTH_BAD_READ)
CASES(both_bad_fetch_add_rem_access, BOTH_BAD_FETCH_ADD)
CASES(bad_lkey_read_loc_prot, LOCAL_BAD_READ)
CASES(read_past_mr_end_loc_prot, LOCAL_PAST_MR_READ)
CASES(bad_lkey_fetch_add_loc_prot, LOCAL_BAD_FETCH_ADD)
CASES(bad_lkey_cmp_swap_loc_prot, LOCAL_BAD_CMP_SWAP)
