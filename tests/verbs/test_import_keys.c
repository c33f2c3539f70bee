// SPDX-License-Identifier: MIT
/*
 * Issue 14: each process's keys through the other's QPs on a PD shared
 * by import (docs/import.md, "The owner's R_Keys", "The importer's
 * R_Keys").  First the owner's R_Keys through a QP of the importer's on
 * the imported PD.  On hardware the PD is one object in both processes,
 * so a QP of the importer answers a remote access with the key of any MR
 * of that PD, the owner's too: a server that imports a PD and an MR
 * hands the MR's R_Key to its clients.
 *
 * The owner (the parent) shares an MR over buf; the importer (a forked
 * child) imports its PD and MR and makes QP i on the imported PD, whose
 * advertised R_Key and address are the imported MR's (the owner's buffer).
 * Requesters of i:
 *
 *   j   a QP of the importer's own PD (the importer's process: on the
 *       same-host path the responder's rules run against itself, the
 *       owner's memory through its segments or CMA): WRITE, READ of one
 *       packet and of several, WRITE with immediate (i's receive takes
 *       the immediate, the data land in the owner's buffer), FETCH_ADD
 *       and CMP_SWAP on the owner's word; the owner looks at its buffer.
 *   a   the owner's own QP, connected to another QP i2 of the importer's
 *       on the imported PD: a WRITE and a READ of the owner's own buffer
 *       through i2 (the owner's memory reached from the owner).
 *
 * Then the errors: past the end of the owner's MR, REM_ACCESS_ERR at j
 * and i in error, nothing written; after the owner's ibv_dereg_mr, the
 * key fails the same way (a WRITE, then a READ on QPs made again); a key
 * that is neither the importer's nor the owner's, the same.
 *
 * And the other way (docs/import.md, "The importer's R_Keys"): an MR the
 * importer registers in the imported PD is of the owner's PD too, so a
 * QP a2 of the owner answers its R_Key.  j2 (the importer's own PD)
 * connected to a2 WRITEs, READs (several packets) and FETCH_ADDs the
 * importer's buffer through a2; the R_Key of an MR of the importer's own
 * PD (not the shared one) gets REM_ACCESS_ERR there, nothing written.
 * The importer's L_Keys in the owner's WQEs on a2: a WRITE gathered from
 * the importer's buffer, a READ and a receive scattered into it; a key
 * of nothing: LOC_PROT_ERR.  The owner's table of importers holds the importer's shadow while the
 * import lives (a forked child's unimport changes nothing), and no
 * longer once the importer unimported it (the shadow destroyed, the
 * owner told), its context still open.
 *
 * Each on the same-host path (mapped and CMA) and on the net path
 * (SOFTHCA_NET=1: the importer's engine is the responder).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/wait.h>

#include "harness.h"
#include "arena_peer.h"
#include "common.h"
#include "ep.h"
#include "import_ep.h"
#include "shm/arena.h"

#define BUF	65536u
#define MSG	1024u
#define HALF	512u
#define WDST	4096u		/* j WRITEs here (owner's) */
#define IDST	8192u		/* the WRITE with immediate (owner's) */
#define ODST	12288u		/* a WRITEs here (owner's, through i2) */
#define DDST	14336u		/* the WRITE after the dereg (owner's) */
#define AWORD	16384u		/* the atomics' word (owner's) */
#define BIG	32768u		/* a message of several packets (owner's) */
#define BIGLEN	20000u
#define LSRC	0u		/* j's sources (importer's own) */
#define LDST	24576u		/* j's READs land here */
#define LRES	49152u		/* j's atomic results */
#define ATOM_V	0x1122334455667788ull

struct arg {
	bool cma;			/* SOFTHCA_MAP=0 in both processes */
};

/* The importer's commands (struct import_cmd): C check the owner's buf,
 * w a WRITEs sbuf's pattern seed to off through i2, r a READs its own
 * buf's first MSG bytes back, A the owner's word is ATOM_V + seed, q a
 * QP a2 made and connected to the importer's, L a2's WQEs with the
 * importer's L_Key seed over its buffer at tag (below), P a2's receive
 * polled, T the owner's table of importers holds seed entries for its
 * PD, D dereg, Q quit. */
static void cmd(int sock, char op, uint32_t off, uint32_t len, uint32_t seed)
{
	import_cmd_send(sock, op, off, len, seed, 0, IBV_WC_SUCCESS);
	duo_expect(sock, 'k');
}

static void owner_check(int sock, uint32_t off, uint32_t len, uint32_t seed)
{
	cmd(sock, 'C', off, len, seed);
}

/* i on the imported PD (the owner's MR and buffer), j on ours, connected
 * to each other. */
static void pair(struct ep *i, struct ep *j, const struct importer *im,
		 struct ibv_pd *lpd, struct ibv_mr *lmr, uint8_t *lbuf)
{
	import_ep_make(i, IBV_QPT_RC, im->ctx, im->pd, im->mr,
		       (uint8_t *)(uintptr_t)im->of.addr, BUF);
	import_ep_make(j, IBV_QPT_RC, im->ctx, lpd, lmr, lbuf, BUF);
	import_ep_pair(i, j);
}

/* The importer's MR in the imported PD, through the owner's QP a2. */
static void importer_keys(int sock, const struct importer *im,
			  struct ibv_pd *lpd, struct ibv_mr *lmr,
			  uint8_t *lbuf)
{
	struct ep_info a2;
	struct ibv_mr *bmr;
	uint8_t *bbuf;
	struct ep j2;
	uint64_t v = ATOM_V;

	ASSERT_EQ(posix_memalign((void **)&bbuf, 4096, BUF), 0);
	memset(bbuf, EP_SENTINEL, BUF);
	memcpy(bbuf + AWORD, &v, 8);
	bmr = ibv_reg_mr(im->pd, bbuf, BUF, IMPORT_ALL_ACCESS);
	ASSERT_NOT_NULL(bmr);
	import_ep_make(&j2, IBV_QPT_RC, im->ctx, lpd, lmr, lbuf, BUF);
	import_cmd_send(sock, 'q', 0, 0, 0, 0, IBV_WC_SUCCESS);
	xread(sock, &a2, sizeof(a2));
	import_ep_connect(&j2, &a2, 7);
	xwrite(sock, &j2.self, sizeof(j2.self));
	duo_expect(sock, 'c');
	duo_expect(sock, 'k');
	/* a2 is the owner's: our key in the shared PD, our address */
	j2.peer.rkey = bmr->rkey;
	j2.peer.addr = (uintptr_t)bbuf;

	ASSERT_EQ(ep_post(&j2, 1, IBV_WR_RDMA_WRITE, LSRC, BIGLEN, BIG, 0),
		  0);
	ep_expect(j2.scq, j2.qp, 1, IBV_WC_SUCCESS);
	ASSERT_EQ(ep_find_pattern_diff(bbuf + BIG, BIGLEN, 7, 0), -1);
	ASSERT_EQ(ep_find_non_sentinel(bbuf + BIG + BIGLEN, 64), -1);
	ASSERT_EQ(ep_find_non_sentinel(bbuf + BIG - 64, 64), -1);
	memset(lbuf + LDST, EP_SENTINEL, BIGLEN + 64);
	ASSERT_EQ(ep_post(&j2, 2, IBV_WR_RDMA_READ, LDST, BIGLEN, BIG, 0), 0);
	ep_expect(j2.scq, j2.qp, 2, IBV_WC_SUCCESS);
	ASSERT_EQ(ep_find_pattern_diff(lbuf + LDST, BIGLEN, 7, 0), -1);
	ASSERT_EQ(ep_find_non_sentinel(lbuf + LDST + BIGLEN, 64), -1);
	ep_post_atomic(&j2, 3, IBV_WR_ATOMIC_FETCH_AND_ADD, LRES, AWORD, 3, 0);
	ep_expect(j2.scq, j2.qp, 3, IBV_WC_SUCCESS);
	memcpy(&v, lbuf + LRES, 8);
	ASSERT_U64_EQ(v, ATOM_V);
	memcpy(&v, bbuf + AWORD, 8);
	ASSERT_U64_EQ(v, ATOM_V + 3);

	/* our L_Key in the owner's WQEs (owner_lkeys) */
	memset(lbuf + LDST, EP_SENTINEL, MSG + 64);
	import_cmd_send(sock, 'L', 0, 0, bmr->lkey, (uintptr_t)bbuf,
			IBV_WC_SUCCESS);
	duo_expect(sock, 'k');
	ASSERT_EQ(ep_find_pattern_diff(lbuf + LDST, MSG, 7, 0), -1);
	ASSERT_EQ(ep_find_non_sentinel(lbuf + LDST + MSG, 64), -1);
	ASSERT_EQ(ep_find_pattern_diff(bbuf + IDST, MSG, 7, 0), -1);
	ASSERT_EQ(ep_find_non_sentinel(bbuf + IDST + MSG, 64), -1);
	/* a2's receive names our buffer: our SEND lands there once the
	 * owner polls */
	ASSERT_EQ(ep_post(&j2, 5, IBV_WR_SEND, LSRC + MSG, MSG, 0, 0), 0);
	ep_expect(j2.scq, j2.qp, 5, IBV_WC_SUCCESS);
	cmd(sock, 'P', 0, MSG, 0);
	ASSERT_EQ(ep_find_pattern_diff(bbuf + ODST, MSG, 7, MSG), -1);
	ASSERT_EQ(ep_find_non_sentinel(bbuf + ODST + MSG, 64), -1);

	/* an MR of our own PD is not of the shared one */
	memset(lbuf + LDST, EP_SENTINEL, MSG);
	j2.peer.rkey = lmr->rkey;
	j2.peer.addr = (uintptr_t)lbuf;
	ASSERT_EQ(ep_post(&j2, 4, IBV_WR_RDMA_WRITE, LSRC, MSG, LDST, 0), 0);
	ep_expect(j2.scq, j2.qp, 4, IBV_WC_REM_ACCESS_ERR);
	ASSERT_EQ(ep_find_non_sentinel(lbuf + LDST, MSG), -1);

	import_ep_unmake(&j2);
	ASSERT_EQ(ibv_dereg_mr(bmr), 0);
	free(bbuf);
}

/* A forked child unimports the MR and the PD (its shadow destroyed, in
 * its copy of the process) and exits. */
static void unimport_in_child(struct importer *im)
{
	pid_t pid = fork();
	int st;

	ASSERT_GE(pid, 0);
	if (!pid) {
		ibv_unimport_mr(im->mr);
		ibv_unimport_pd(im->pd);
		_exit(0);
	}
	ASSERT_EQ(waitpid(pid, &st, 0), pid);
	ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

static void importer(int sock, void *arg)
{
	struct ibv_sge none;
	struct importer im;
	struct ibv_pd *lpd;
	struct ibv_mr *lmr;
	struct ibv_wc wc;
	struct ep i, j, i2;
	uint8_t *lbuf;
	uint64_t v;

	(void)arg;
	importer_begin(&im, sock);
	ASSERT_EQ(posix_memalign((void **)&lbuf, 4096, BUF), 0);
	memset(lbuf, EP_SENTINEL, BUF);
	ep_fill_pattern(lbuf + LSRC, BIGLEN, 7, 0);
	lpd = ibv_alloc_pd(im.ctx);
	ASSERT_NOT_NULL(lpd);
	lmr = ibv_reg_mr(lpd, lbuf, BUF, IMPORT_ALL_ACCESS);
	ASSERT_NOT_NULL(lmr);
	pair(&i, &j, &im, lpd, lmr, lbuf);
	/* i's R_Key is the owner's: no MR of this process has it */
	ASSERT_EQ(j.peer.rkey, im.mr->rkey);

	/* WRITE into the owner's buffer through i */
	ASSERT_EQ(ep_post(&j, 1, IBV_WR_RDMA_WRITE, LSRC, MSG, WDST, 0), 0);
	ep_expect(j.scq, j.qp, 1, IBV_WC_SUCCESS);
	owner_check(sock, WDST, MSG, 7);
	/* READ of the owner's pattern (seed 9 at 0) */
	ASSERT_EQ(ep_post(&j, 2, IBV_WR_RDMA_READ, LDST, MSG, 0, 0), 0);
	ep_expect(j.scq, j.qp, 2, IBV_WC_SUCCESS);
	ASSERT_EQ(ep_find_pattern_diff(lbuf + LDST, MSG, 9, 0), -1);
	ASSERT_EQ(ep_find_non_sentinel(lbuf + LDST + MSG, 64), -1);
	/* several packets each way (path MTU 4096) */
	ASSERT_EQ(ep_post(&j, 3, IBV_WR_RDMA_WRITE, LSRC, BIGLEN, BIG, 0), 0);
	ep_expect(j.scq, j.qp, 3, IBV_WC_SUCCESS);
	owner_check(sock, BIG, BIGLEN, 7);
	memset(lbuf + LDST, EP_SENTINEL, BIGLEN + 64);
	ASSERT_EQ(ep_post(&j, 4, IBV_WR_RDMA_READ, LDST, BIGLEN, BIG, 0), 0);
	ep_expect(j.scq, j.qp, 4, IBV_WC_SUCCESS);
	ASSERT_EQ(ep_find_pattern_diff(lbuf + LDST, BIGLEN, 7, 0), -1);
	ASSERT_EQ(ep_find_non_sentinel(lbuf + LDST + BIGLEN, 64), -1);
	/* WRITE with immediate: the data in the owner's buffer, the
	 * immediate in i's receive (no SGE) */
	ASSERT_EQ(import_post_recv(i.qp, NULL, 5, &none, 0), 0);
	ASSERT_EQ(ep_post(&j, 5, IBV_WR_RDMA_WRITE_WITH_IMM, LSRC, MSG, IDST,
			  0), 0);
	ep_expect(j.scq, j.qp, 5, IBV_WC_SUCCESS);
	wc = ep_expect(i.rcq, i.qp, 5, IBV_WC_SUCCESS);
	ASSERT_EQ(wc.opcode, IBV_WC_RECV_RDMA_WITH_IMM);
	ASSERT_EQ(wc.byte_len, MSG);
	owner_check(sock, IDST, MSG, 7);
	/* atomics on the owner's word (ATOM_V) */
	ep_post_atomic(&j, 6, IBV_WR_ATOMIC_FETCH_AND_ADD, LRES, AWORD, 5, 0);
	ep_expect(j.scq, j.qp, 6, IBV_WC_SUCCESS);
	memcpy(&v, lbuf + LRES, 8);
	ASSERT_U64_EQ(v, ATOM_V);
	ep_post_atomic(&j, 7, IBV_WR_ATOMIC_CMP_AND_SWP, LRES + 8, AWORD,
		       ATOM_V + 5, ATOM_V + 9);
	ep_expect(j.scq, j.qp, 7, IBV_WC_SUCCESS);
	memcpy(&v, lbuf + LRES + 8, 8);
	ASSERT_U64_EQ(v, ATOM_V + 5);
	cmd(sock, 'A', AWORD, 8, 9);

	/* the owner's own QP through i2, on the imported PD too */
	import_ep_make(&i2, IBV_QPT_RC, im.ctx, im.pd, im.mr,
		       (uint8_t *)(uintptr_t)im.of.addr, BUF);
	import_ep_connect(&i2, &im.of.a, 7);
	import_cmd_send(sock, 'w', ODST, MSG, 11, 0, IBV_WC_SUCCESS);
	xwrite(sock, &i2.self, sizeof(i2.self));
	duo_expect(sock, 'c');
	duo_expect(sock, 'k');
	cmd(sock, 'r', 0, MSG, 9);
	import_ep_unmake(&i2);

	/* past the end of the owner's MR: nothing written, i in error */
	ASSERT_EQ(ep_post(&j, 8, IBV_WR_RDMA_WRITE, LSRC, MSG,
			  im.of.length - HALF, 0), 0);
	ep_expect(j.scq, j.qp, 8, IBV_WC_REM_ACCESS_ERR);
	ep_wait_qp_state(i.qp, IBV_QPS_ERR);
	owner_check(sock, BUF - HALF, HALF, 0);
	import_ep_unmake(&i);
	import_ep_unmake(&j);

	/* a key nobody has: the same */
	pair(&i, &j, &im, lpd, lmr, lbuf);
	j.peer.rkey = im.mr->rkey ^ 0x5a5a5a00;
	ASSERT_EQ(ep_post(&j, 9, IBV_WR_RDMA_WRITE, LSRC, MSG, WDST, 0), 0);
	ep_expect(j.scq, j.qp, 9, IBV_WC_REM_ACCESS_ERR);
	import_ep_unmake(&i);
	import_ep_unmake(&j);

	/* after the owner's dereg: the key fails, for a WRITE and a READ */
	cmd(sock, 'D', 0, 0, 0);
	pair(&i, &j, &im, lpd, lmr, lbuf);
	ASSERT_EQ(ep_post(&j, 10, IBV_WR_RDMA_WRITE, LSRC, MSG, DDST, 0), 0);
	ep_expect(j.scq, j.qp, 10, IBV_WC_REM_ACCESS_ERR);
	import_ep_unmake(&i);
	import_ep_unmake(&j);
	pair(&i, &j, &im, lpd, lmr, lbuf);
	memset(lbuf + LDST, EP_SENTINEL, MSG);
	ASSERT_EQ(ep_post(&j, 11, IBV_WR_RDMA_READ, LDST, MSG, 0, 0), 0);
	ep_expect(j.scq, j.qp, 11, IBV_WC_REM_ACCESS_ERR);
	ASSERT_EQ(ep_find_non_sentinel(lbuf + LDST, MSG), -1);
	owner_check(sock, DDST, MSG, 0);

	import_ep_unmake(&i);
	import_ep_unmake(&j);
	importer_keys(sock, &im, lpd, lmr, lbuf);

	if (getenv("SOFTHCA_NET"))
		ASSERT_GT(ep_tcp_bytes(), 0);
	ASSERT_EQ(ibv_dereg_mr(lmr), 0);
	ASSERT_EQ(ibv_dealloc_pd(lpd), 0);
	free(lbuf);
	/* the shadow goes with the imports, the context still open: the
	 * owner forgets it; a forked child's unimport does not (the
	 * shadow is still ours, its connection is ours too) */
	cmd(sock, 'T', 0, 0, 1);
	unimport_in_child(&im);
	cmd(sock, 'T', 0, 0, 1);
	ibv_unimport_mr(im.mr);
	ibv_unimport_pd(im.pd);
	cmd(sock, 'T', 0, 0, 0);
	cmd(sock, 'Q', 0, 0, 0);
	ASSERT_EQ(ibv_close_device(im.ctx), 0);
}

/* The owner's table (arena at self) holds n entries for PD identity pd,
 * once the importer's message (on its own connection) reached our
 * engine thread: waited for, up to 10 s. */
static void owner_imps(char *self, uint32_t pd, unsigned int n)
{
	int k;

	for (k = 0; k < 1000 && arena_pd_imps(self, pd, 0, NULL) != n; k++)
		usleep(10000);
	ASSERT_EQ(arena_pd_imps(self, pd, 0, NULL), n);
}

/*
 * L: a2's WQEs with the importer's L_Key lkey over its buffer at addr:
 * a WRITE of its bytes at BIG (seed 7) to the importer's QP's buffer at
 * LDST, a READ of that buffer's LSRC into its bytes at IDST, and a
 * receive into its bytes at ODST (the importer SENDs, then P: a key of
 * nothing on a then, a local protection error).  The importer checks
 * its bytes.
 */
static void owner_lkeys(struct ep *a2, uint32_t lkey, uint64_t addr)
{
	struct ibv_sge sge = { addr + ODST, MSG, lkey };

	ASSERT_EQ(ep_post_key(a2, 11, IBV_WR_RDMA_WRITE, addr + BIG, lkey,
			      MSG, LDST, 0), 0);
	ep_expect(a2->scq, a2->qp, 11, IBV_WC_SUCCESS);
	ASSERT_EQ(ep_post_key(a2, 12, IBV_WR_RDMA_READ, addr + IDST, lkey,
			      MSG, LSRC, 0), 0);
	ep_expect(a2->scq, a2->qp, 12, IBV_WC_SUCCESS);
	ASSERT_EQ(import_post_recv(a2->qp, NULL, 13, &sge, 1), 0);
}

static void owner(const struct arg *ar, bool net)
{
	struct import_owner ow;
	struct import_cmd c;
	struct ep a, a2;
	bool have_a2 = false;
	uint64_t v = ATOM_V;
	char *self;

	import_env(net, ar->cma);
	import_owner_begin(&ow, importer, (void *)ar, BUF, IMPORT_ALL_ACCESS,
			   IMPORT_ALL_ACCESS);
	/* before the importer's arena is mapped beside ours */
	self = arena_own_base();
	ep_fill_pattern(ow.buf, MSG, 9, 0);
	memcpy(ow.buf + AWORD, &v, 8);
	import_ep_make(&a, IBV_QPT_RC, ow.ctx, ow.pd, ow.smr, ow.sbuf, BUF);
	import_owner_offer(&ow, &a.self);
	while (import_owner_next(&ow, &c)) {
		switch (c.op) {
		case 'C':
			import_owner_check(&ow, c.off, c.len, c.seed, true);
			break;
		case 'A':
			memcpy(&v, ow.buf + c.off, 8);
			ASSERT_U64_EQ(v, ATOM_V + c.seed);
			break;
		case 'w':
			/* a.peer: i2's address and R_Key, the owner's own */
			import_owner_connect(&ow, &a);
			ASSERT_EQ(a.peer.rkey, ow.mr->rkey);
			ep_fill_pattern(ow.sbuf, c.len, c.seed, 0);
			ASSERT_EQ(ep_post(&a, 1, IBV_WR_RDMA_WRITE, 0, c.len,
					  c.off, 0), 0);
			ep_expect(a.scq, a.qp, 1, IBV_WC_SUCCESS);
			import_owner_check(&ow, c.off, c.len, c.seed, true);
			break;
		case 'r':
			memset(ow.sbuf, EP_SENTINEL, c.len + 64);
			ASSERT_EQ(ep_post(&a, 2, IBV_WR_RDMA_READ, 0, c.len,
					  c.off, 0), 0);
			ep_expect(a.scq, a.qp, 2, IBV_WC_SUCCESS);
			ASSERT_EQ(ep_find_pattern_diff(ow.sbuf, c.len, c.seed,
						       0), -1);
			ASSERT_EQ(ep_find_non_sentinel(ow.sbuf + c.len, 64),
				  -1);
			break;
		case 'q':
			import_ep_make(&a2, IBV_QPT_RC, ow.ctx, ow.pd, ow.smr,
				       ow.sbuf, BUF);
			have_a2 = true;
			xwrite(ow.d.fd, &a2.self, sizeof(a2.self));
			import_owner_connect(&ow, &a2);
			break;
		case 'T':
			owner_imps(self, ow.pd->handle, c.seed);
			break;
		case 'L':
			owner_lkeys(&a2, c.seed, c.tag);
			break;
		case 'P': {
			struct ibv_wc wc = ep_expect(a2.rcq, a2.qp, 13,
						     IBV_WC_SUCCESS);

			ASSERT_EQ(wc.byte_len, c.len);
			/* a key of nothing, on a (a2 stays up): failed
			 * before anything is sent */
			ASSERT_EQ(ep_post_key(&a, 14, IBV_WR_RDMA_WRITE,
					      (uintptr_t)ow.sbuf,
					      ow.smr->lkey ^ 0x5a5a5a00, MSG,
					      LDST, 0), 0);
			ep_expect(a.scq, a.qp, 14, IBV_WC_LOC_PROT_ERR);
			break;
		}
		case 'D':
			import_owner_dereg(&ow);
			break;
		default:
			ASSERT(0);
		}
		duo_signal(ow.d.fd, 'k');
	}
	import_owner_wait(&ow);
	if (have_a2)
		import_ep_unmake(&a2);
	import_ep_unmake(&a);
	import_owner_end(&ow);
}

IMPORT_CASE(same_host, false, false)
IMPORT_CASE(same_host_cma, false, true)
IMPORT_CASE(net, true, false)
