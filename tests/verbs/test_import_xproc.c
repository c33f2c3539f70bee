// SPDX-License-Identifier: MIT
/*
 * Issue 14: a PD and an MR imported from ANOTHER process
 * (docs/import.md, "Another process's cmd_fd").
 *
 * The owner (the parent) opens the device, allocates a PD, registers an
 * MR over a buffer and makes an RC QP in that PD; it passes its cmd_fd to
 * the importer (a forked child) by SCM_RIGHTS over a socketpair, with
 * the handles, keys and addresses.  The importer:
 *   - is refused a forged command file (a memfd of the same name holding
 *     a copy of the real record): EINVAL;
 *   - imports the device, the PD and the MR by handle (the same handle,
 *     keys and length), is refused a handle that names nothing: ENOENT;
 *   - on a QP of the imported PD, SENDs from the imported MR (the owner's
 *     bytes arrive in a receive of its own) and RDMA-READs into it (the
 *     owner finds the bytes in its buffer);
 *   - takes an atomic's result into the imported MR;
 *   - hands the imported MR's R_Key to a third process, which WRITEs
 *     through it to the owner's QP: the bytes land in the owner's buffer;
 *   - registers an MR of its own in a second import of the PD and SENDs
 *     from it on the first one's QP (one PD);
 *   - on a QP of another PD of the owner's, imported, the MR's L_Key is
 *     a local protection error;
 *   - destroys through its imports: the owner's PD in use is EBUSY, a
 *     second MR and an unused PD go, for the owner too (ENOENT there);
 *   - posts a receive that names the owner's MR (a bounce buffer:
 *     test_import_bounce.c moves bytes through it), left to the QP's
 *     destroy;
 *   - after the owner's ibv_dereg_mr, finds the L_Key failing: a local
 *     protection error.
 * An owner that exits: the importer's key is a local protection error,
 * its imports ENOENT.  The same with the owner's MRs on CMA
 * (SOFTHCA_MAP=0) instead of its mapped segments.  On the net path
 * (SOFTHCA_NET=1) a QP of the imported PD moves the owner's L_Keys on UC
 * and RC (through a bounce buffer of the WQE's), and its own MRs'.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/socket.h>

#include "harness.h"
#include "fdpass.h"
#include "common.h"
#include "ep.h"
#include "import_ep.h"

#define BUF	32768u
#define MSG	1024u
#define SRC	0u		/* the importer SENDs this (owner's) */
#define RECV	4096u		/* ... READs into this (owner's) */
#define WDST	8192u		/* ... WRITEs here (owner's) */
#define RSRC	12288u		/* the importer's own READ source */
#define LDST	16384u		/* the importer's own receive buffer */
#define ATOM	20480u		/* the importer's own atomic target */
#define ARES	24576u		/* the atomic's result (owner's) */
#define ATOM_V	0x1122334455667788ull

static const int all_access = IMPORT_ALL_ACCESS;

/* What the owner tells the importer besides the descriptor. */
struct offer {
	uint32_t pd_handle, mr_handle;
	uint32_t pd2_handle;		/* another PD of the owner's */
	uint32_t mr2_handle;		/* another MR in the first */
	uint32_t lkey, rkey;
	uint64_t length;
	uint64_t addr;
	char dev[64];
};

static int post_recv_key(struct ibv_qp *qp, uint32_t lkey, uint64_t addr)
{
	struct ibv_recv_wr wr, *bad;
	struct ibv_sge sge = { addr, MSG, lkey };

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = 99;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	return ibv_post_recv(qp, &wr, &bad);
}

/* A memfd named as a command file, holding a copy of fd's record. */
static int forge(int fd)
{
	char rec[256];
	ssize_t n = pread(fd, rec, sizeof(rec), 0);
	int f = memfd_create("softhca-context", MFD_CLOEXEC);

	ASSERT_GT(n, 0);
	ASSERT_GE(f, 0);
	ASSERT_EQ(pwrite(f, rec, (size_t)n, 0), n);
	return f;
}

/* The importer (the child). */
static void importer(int sock, void *arg)
{
	struct ibv_context *ic;
	struct ibv_pd *pd, *pd_b, *pd2, *lpd;
	struct ibv_mr *mr, *mr2, *lmr, *smr;
	struct ep i, j, i2, j2;
	struct offer of;
	uint8_t *lbuf, *sbuf;
	int fd, f;

	(void)arg;
	fd = fdpass_recv(sock, &of, sizeof(of));

	/* a forged command file proves nothing */
	f = forge(fd);
	ASSERT_NULL_ERRNO(ibv_import_device(f), EINVAL);
	close(f);

	ic = ibv_import_device(fd);
	ASSERT_NOT_NULL(ic);
	ASSERT_EQ(ic->cmd_fd, fd);
	ASSERT_EQ(strcmp(ibv_get_device_name(ic->device), of.dev), 0);
	ASSERT_NULL_ERRNO(ibv_import_pd(ic, of.pd_handle ^ 0x5a5a0), ENOENT);
	pd = ibv_import_pd(ic, of.pd_handle);
	ASSERT_NOT_NULL(pd);
	ASSERT_EQ(pd->handle, of.pd_handle);
	ASSERT(pd->context == ic);
	ASSERT_NULL_ERRNO(ibv_import_mr(pd, of.mr_handle ^ 0x5a5a0), ENOENT);
	mr = ibv_import_mr(pd, of.mr_handle);
	ASSERT_NOT_NULL(mr);
	ASSERT_EQ(mr->handle, of.mr_handle);
	ASSERT_EQ(mr->lkey, of.lkey);
	ASSERT_EQ(mr->rkey, of.rkey);
	ASSERT_EQ(mr->length, of.length);
	ASSERT_NULL(mr->addr);
	/* a destroy through the import is the owner's: its PD is in use */
	ASSERT_EQ(ibv_dealloc_pd(pd), EBUSY);
	/* ... its second MR goes, for the owner too */
	mr2 = ibv_import_mr(pd, of.mr2_handle);
	ASSERT_NOT_NULL(mr2);
	ASSERT_EQ(ibv_dereg_mr(mr2), 0);
	ASSERT_NULL_ERRNO(ibv_import_mr(pd, of.mr2_handle), ENOENT);

	/* i: on the imported PD, with the owner's MR; j: a PD of ours */
	ASSERT_EQ(posix_memalign((void **)&lbuf, 4096, BUF), 0);
	memset(lbuf, EP_SENTINEL, BUF);
	ep_fill_pattern(lbuf + RSRC, MSG, 3, 0);
	*(uint64_t *)(lbuf + ATOM) = ATOM_V;
	lpd = ibv_alloc_pd(ic);
	ASSERT_NOT_NULL(lpd);
	lmr = ibv_reg_mr(lpd, lbuf, BUF, all_access);
	ASSERT_NOT_NULL(lmr);
	import_ep_make(&i, IBV_QPT_RC, ic, pd, mr,
		       (uint8_t *)(uintptr_t)of.addr, BUF);
	import_ep_make(&j, IBV_QPT_RC, ic, lpd, lmr, lbuf, BUF);
	import_ep_pair(&i, &j);

	/* SEND from the owner's MR, received into ours */
	ASSERT_EQ(ep_post_recv(&j, 1, LDST, MSG), 0);
	ASSERT_EQ(ep_post(&i, 2, IBV_WR_SEND, SRC, MSG, 0, 0), 0);
	ep_expect(i.scq, i.qp, 2, IBV_WC_SUCCESS);
	ASSERT_EQ(ep_expect(j.rcq, j.qp, 1, IBV_WC_SUCCESS).byte_len, MSG);
	ASSERT_EQ(ep_find_pattern_diff(lbuf + LDST, MSG, 1, 0), -1);
	ASSERT_EQ(ep_find_non_sentinel(lbuf + LDST + MSG, 64), -1);

	/* READ from ours into the owner's MR */
	ASSERT_EQ(ep_post(&i, 3, IBV_WR_RDMA_READ, RECV, MSG, RSRC, 0), 0);
	ep_expect(i.scq, i.qp, 3, IBV_WC_SUCCESS);
	duo_signal(sock, 'r');		/* the owner checks RECV */
	duo_expect(sock, 'R');

	/* an atomic's result into the owner's MR */
	ASSERT_EQ(*(uint64_t *)(lbuf + ATOM), ATOM_V);
	ep_post_atomic(&i, 4, IBV_WR_ATOMIC_FETCH_AND_ADD, ARES, ATOM, 5, 0);
	ep_expect(i.scq, i.qp, 4, IBV_WC_SUCCESS);
	ASSERT_EQ(*(uint64_t *)(lbuf + ATOM), ATOM_V + 5);
	duo_signal(sock, 'a');		/* the owner checks ARES */
	duo_expect(sock, 'A');

	/* the imported MR's R_Key, for a third process to WRITE with */
	xwrite(sock, &mr->rkey, sizeof(mr->rkey));
	duo_expect(sock, 'W');

	/* an MR of ours in the imported PD, imported a second time: the QP
	 * on the first import uses it (one PD) */
	pd_b = ibv_import_pd(ic, of.pd_handle);
	ASSERT_NOT_NULL(pd_b);
	ASSERT(pd_b != pd);
	ASSERT_EQ(pd_b->handle, of.pd_handle);
	ASSERT_EQ(posix_memalign((void **)&sbuf, 4096, 4096), 0);
	ep_fill_pattern(sbuf, MSG, 5, 0);
	smr = ibv_reg_mr(pd_b, sbuf, 4096, IBV_ACCESS_LOCAL_WRITE);
	ASSERT_NOT_NULL(smr);
	ASSERT(smr->pd == pd_b);
	ibv_unimport_pd(pd_b);
	memset(lbuf + LDST, EP_SENTINEL, MSG);
	ASSERT_EQ(ep_post_recv(&j, 5, LDST, MSG), 0);
	{
		struct ibv_send_wr wr, *bad;
		struct ibv_sge sge = { (uintptr_t)sbuf, MSG, smr->lkey };

		memset(&wr, 0, sizeof(wr));
		wr.wr_id = 6;
		wr.sg_list = &sge;
		wr.num_sge = 1;
		wr.opcode = IBV_WR_SEND;
		wr.send_flags = IBV_SEND_SIGNALED;
		ASSERT_EQ(ibv_post_send(i.qp, &wr, &bad), 0);
	}
	ep_expect(i.scq, i.qp, 6, IBV_WC_SUCCESS);
	ep_expect(j.rcq, j.qp, 5, IBV_WC_SUCCESS);
	ASSERT_EQ(ep_find_pattern_diff(lbuf + LDST, MSG, 5, 0), -1);

	/* another PD of the owner's, imported: the owner's MR is not in it
	 * (a local protection error, as for the owner's own QPs) */
	pd2 = ibv_import_pd(ic, of.pd2_handle);
	ASSERT_NOT_NULL(pd2);
	import_ep_make(&i2, IBV_QPT_RC, ic, pd2, mr,
		       (uint8_t *)(uintptr_t)of.addr, BUF);
	import_ep_make(&j2, IBV_QPT_RC, ic, lpd, lmr, lbuf, BUF);
	import_ep_pair(&i2, &j2);
	ASSERT_EQ(ep_post_recv(&j2, 8, LDST, MSG), 0);
	ASSERT_EQ(ep_post(&i2, 9, IBV_WR_SEND, SRC, MSG, 0, 0), 0);
	ep_expect(i2.scq, i2.qp, 9, IBV_WC_LOC_PROT_ERR);
	import_ep_unmake(&j2);
	import_ep_unmake(&i2);
	/* unused now: destroyed through the import, for the owner too */
	ASSERT_EQ(ibv_dealloc_pd(pd2), 0);
	ASSERT_NULL_ERRNO(ibv_import_pd(ic, of.pd2_handle), ENOENT);

	/* a receive naming the owner's MR is taken (a bounce buffer) */
	ASSERT_EQ(post_recv_key(i.qp, mr->lkey, of.addr + RECV), 0);
	/* ... one naming ours in the imported PD is taken */
	ASSERT_EQ(post_recv_key(i.qp, smr->lkey, (uintptr_t)sbuf), 0);

	/* the owner deregisters: its L_Key fails here too */
	duo_signal(sock, 'd');
	duo_expect(sock, 'D');
	ASSERT_EQ(ep_post(&i, 7, IBV_WR_SEND, SRC, MSG, 0, 0), 0);
	ep_expect(i.scq, i.qp, 7, IBV_WC_LOC_PROT_ERR);

	import_ep_unmake(&j);
	import_ep_unmake(&i);
	ASSERT_EQ(ibv_dereg_mr(smr), 0);
	ASSERT_EQ(ibv_dereg_mr(lmr), 0);
	ASSERT_EQ(ibv_dealloc_pd(lpd), 0);
	ibv_unimport_mr(mr);
	ibv_unimport_pd(pd);
	ASSERT_EQ(ibv_close_device(ic), 0);
	free(lbuf);
	free(sbuf);
}

/* The third process: an endpoint of its own, connected to the owner's
 * QP, WRITEs with the R_Key the importer had from its import. */
static void third(int sock, void *arg)
{
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_mr *mr;
	struct ep_opts o;
	uint8_t *buf;
	struct ep t;

	(void)arg;
	ctx = open_lo();
	pd = ibv_alloc_pd(ctx);
	ASSERT_NOT_NULL(pd);
	ASSERT_EQ(posix_memalign((void **)&buf, 4096, BUF), 0);
	memset(buf, 0, BUF);
	ep_fill_pattern(buf + WDST, MSG, 2, 0);
	mr = ibv_reg_mr(pd, buf, BUF, all_access);
	ASSERT_NOT_NULL(mr);
	import_ep_make(&t, IBV_QPT_RC, ctx, pd, mr, buf, BUF);
	xwrite(sock, &t.self, sizeof(t.self));
	xread(sock, &t.peer, sizeof(t.peer));	/* the importer's R_Key */
	ep_default_opts(&o, IBV_QPT_RC);
	ep_connect(&t, &o);
	duo_expect(sock, 'c');
	ASSERT_EQ(ep_post(&t, 1, IBV_WR_RDMA_WRITE, WDST, MSG, WDST, 0), 0);
	ep_expect(t.scq, t.qp, 1, IBV_WC_SUCCESS);
	duo_signal(sock, 'w');
	duo_expect(sock, 'd');
	import_ep_unmake(&t);
	ASSERT_EQ(ibv_dereg_mr(mr), 0);
	ASSERT_EQ(ibv_dealloc_pd(pd), 0);
	ASSERT_EQ(ibv_close_device(ctx), 0);
	free(buf);
}

static void from_another_process(void);

TEST(import_from_another_process)
{
	from_another_process();
}

/* The owner's MRs on CMA (not re-backed in shared memory): the importer
 * copies with process_vm_readv/writev. */
TEST(import_from_another_process_cma)
{
	setenv("SOFTHCA_MAP", "0", 1);
	from_another_process();
}

static void from_another_process(void)
{
	struct ibv_context *ctx;
	struct ibv_pd *pd, *pd2;
	struct ibv_mr *mr, *mr2;
	struct offer of;
	struct ep_info kq;
	uint32_t rkey;
	struct duo d, t;
	struct ep a;
	uint8_t *buf;

	ep_skip_if_netns();
	unsetenv("SOFTHCA_NET");
	duo_fork(&d, importer, NULL);
	duo_fork(&t, third, NULL);
	ctx = open_lo();
	pd = ibv_alloc_pd(ctx);
	ASSERT_NOT_NULL(pd);
	ASSERT_EQ(posix_memalign((void **)&buf, 4096, BUF), 0);
	memset(buf, EP_SENTINEL, BUF);
	ep_fill_pattern(buf + SRC, MSG, 1, 0);
	mr = ibv_reg_mr(pd, buf, BUF, all_access);
	ASSERT_NOT_NULL(mr);
	import_ep_make(&a, IBV_QPT_RC, ctx, pd, mr, buf, BUF);

	pd2 = ibv_alloc_pd(ctx);
	ASSERT_NOT_NULL(pd2);
	mr2 = ibv_reg_mr(pd, buf + BUF - 4096, 4096, IBV_ACCESS_LOCAL_WRITE);
	ASSERT_NOT_NULL(mr2);
	memset(&of, 0, sizeof(of));
	of.pd_handle = pd->handle;
	of.pd2_handle = pd2->handle;
	of.mr2_handle = mr2->handle;
	of.mr_handle = mr->handle;
	of.lkey = mr->lkey;
	of.rkey = mr->rkey;
	of.length = mr->length;
	of.addr = (uintptr_t)buf;
	snprintf(of.dev, sizeof(of.dev), "%s",
		 ibv_get_device_name(ctx->device));
	fdpass_send(d.fd, ctx->cmd_fd, &of, sizeof(of));

	duo_expect(d.fd, 'r');
	ASSERT_EQ(ep_find_pattern_diff(buf + RECV, MSG, 3, 0), -1);
	ASSERT_EQ(ep_find_non_sentinel(buf + RECV + MSG, 64), -1);
	ASSERT_EQ(ep_find_non_sentinel(buf + RECV - 64, 64), -1);
	duo_signal(d.fd, 'R');

	duo_expect(d.fd, 'a');
	ASSERT_U64_EQ(*(uint64_t *)(buf + ARES), ATOM_V);
	ASSERT_EQ(ep_find_non_sentinel(buf + ARES + 8, 64), -1);
	duo_signal(d.fd, 'A');

	/* the importer's R_Key, relayed to the third process */
	xread(d.fd, &rkey, sizeof(rkey));
	ASSERT_EQ(rkey, mr->rkey);
	xread(t.fd, &kq, sizeof(kq));
	a.peer = kq;
	{
		struct ep_opts o;

		ep_default_opts(&o, IBV_QPT_RC);
		ep_connect(&a, &o);
	}
	kq = a.self;
	kq.rkey = rkey;
	xwrite(t.fd, &kq, sizeof(kq));
	duo_signal(t.fd, 'c');
	duo_expect(t.fd, 'w');
	ASSERT_EQ(ep_find_pattern_diff(buf + WDST, MSG, 2, 0), -1);
	ASSERT_EQ(ep_find_non_sentinel(buf + WDST + MSG, 64), -1);
	ASSERT_EQ(ep_find_non_sentinel(buf + WDST - 64, 64), -1);
	duo_signal(t.fd, 'd');
	duo_wait(&t);
	duo_signal(d.fd, 'W');

	duo_expect(d.fd, 'd');
	ASSERT_EQ(ibv_dereg_mr(mr), 0);
	duo_signal(d.fd, 'D');
	duo_wait(&d);

	import_ep_unmake(&a);
	/* destroyed through the importer's names */
	ASSERT_EQ(ibv_dereg_mr(mr2), ENOENT);
	ASSERT_EQ(ibv_dealloc_pd(pd2), ENOENT);
	ASSERT_EQ(ibv_dealloc_pd(pd), 0);
	ASSERT_EQ(ibv_close_device(ctx), 0);
	free(buf);
}

/* The owner has closed its context: the file names nothing any more. */
static void late_importer(int sock, void *arg)
{
	struct offer of;
	int fd;

	(void)arg;
	fd = fdpass_recv(sock, &of, sizeof(of));
	duo_expect(sock, 'x');
	ASSERT_NULL_ERRNO(ibv_import_device(fd), EINVAL);
	close(fd);
}

TEST(import_after_owner_closed)
{
	struct ibv_context *ctx;
	struct ibv_pd *pd, *pd2;
	struct offer of;
	struct duo d;

	ep_skip_if_netns();
	duo_fork(&d, late_importer, NULL);
	ctx = open_lo();
	pd = ibv_alloc_pd(ctx);
	ASSERT_NOT_NULL(pd);
	memset(&of, 0, sizeof(of));
	fdpass_send(d.fd, ctx->cmd_fd, &of, sizeof(of));
	ASSERT_EQ(ibv_dealloc_pd(pd), 0);
	ASSERT_EQ(ibv_close_device(ctx), 0);
	/* the process stays, with another context (its socket answers) */
	ctx = open_lo();
	pd2 = ibv_alloc_pd(ctx);
	ASSERT_NOT_NULL(pd2);
	duo_signal(d.fd, 'x');
	duo_wait(&d);
	ASSERT_EQ(ibv_dealloc_pd(pd2), 0);
	ASSERT_EQ(ibv_close_device(ctx), 0);
}

/* The net path: the importer's QP on the imported PD, SOFTHCA_NET=1. */
static void net_importer(int sock, void *arg)
{
	struct ibv_context *ic;
	struct ibv_pd *pd, *lpd;
	struct ibv_mr *mr, *lmr, *smr;
	struct importer im;
	uint8_t *lbuf;
	struct ep i, j, ui, uj;

	(void)arg;
	importer_begin(&im, sock);
	ic = im.ctx;
	pd = im.pd;
	mr = im.mr;
	ASSERT_EQ(posix_memalign((void **)&lbuf, 4096, BUF), 0);
	memset(lbuf, EP_SENTINEL, BUF);
	ep_fill_pattern(lbuf + RSRC, MSG, 4, 0);
	lpd = ibv_alloc_pd(ic);
	ASSERT_NOT_NULL(lpd);
	lmr = ibv_reg_mr(lpd, lbuf, BUF, all_access);
	ASSERT_NOT_NULL(lmr);
	smr = ibv_reg_mr(pd, lbuf, BUF, all_access);
	ASSERT_NOT_NULL(smr);
	import_ep_make(&i, IBV_QPT_RC, ic, pd, mr,
		       (uint8_t *)(uintptr_t)im.of.addr, BUF);
	import_ep_make(&j, IBV_QPT_RC, ic, lpd, lmr, lbuf, BUF);
	import_ep_pair(&i, &j);

	/* UC: the net path copies the message into its frames at the
	 * post, so the owner's L_Key goes */
	import_ep_make(&ui, IBV_QPT_UC, ic, pd, mr,
		       (uint8_t *)(uintptr_t)im.of.addr, BUF);
	import_ep_make(&uj, IBV_QPT_UC, ic, lpd, lmr, lbuf, BUF);
	import_ep_pair(&ui, &uj);
	ASSERT_EQ(ep_post_recv(&uj, 5, LDST, MSG), 0);
	ASSERT_EQ(ep_post(&ui, 6, IBV_WR_SEND, SRC, MSG, 0, 0), 0);
	ep_expect(ui.scq, ui.qp, 6, IBV_WC_SUCCESS);
	ep_expect(uj.rcq, uj.qp, 5, IBV_WC_SUCCESS);
	ASSERT_EQ(ep_find_pattern_diff(lbuf + LDST, MSG, 1, 0), -1);
	memset(lbuf + LDST, EP_SENTINEL, MSG);
	import_ep_unmake(&uj);
	import_ep_unmake(&ui);

	/* RC: the owner's L_Key goes through a bounce buffer that lives
	 * with the WQE (test_import_bounce.c: the other opcodes) */
	ASSERT_EQ(ep_post_recv(&j, 1, LDST, MSG), 0);
	ASSERT_EQ(ep_post(&i, 2, IBV_WR_SEND, SRC, MSG, 0, 0), 0);
	ep_expect(i.scq, i.qp, 2, IBV_WC_SUCCESS);
	ep_expect(j.rcq, j.qp, 1, IBV_WC_SUCCESS);
	ASSERT_EQ(ep_find_pattern_diff(lbuf + LDST, MSG, 1, 0), -1);
	memset(lbuf + LDST, EP_SENTINEL, MSG);
	/* an MR of ours in the imported PD goes */
	i.mr = smr;
	i.buf = lbuf;
	ASSERT_EQ(ep_post_recv(&j, 3, LDST, MSG), 0);
	ASSERT_EQ(ep_post(&i, 4, IBV_WR_SEND, RSRC, MSG, 0, 0), 0);
	ep_expect(i.scq, i.qp, 4, IBV_WC_SUCCESS);
	ep_expect(j.rcq, j.qp, 3, IBV_WC_SUCCESS);
	ASSERT_EQ(ep_find_pattern_diff(lbuf + LDST, MSG, 4, 0), -1);
	ASSERT_GT(ep_tcp_bytes(), 0);
	duo_signal(sock, 'n');

	import_ep_unmake(&j);
	import_ep_unmake(&i);
	ASSERT_EQ(ibv_dereg_mr(smr), 0);
	ASSERT_EQ(ibv_dereg_mr(lmr), 0);
	ASSERT_EQ(ibv_dealloc_pd(lpd), 0);
	importer_end(&im);
	free(lbuf);
}

TEST(net_path)
{
	struct import_owner ow;

	ep_skip_if_netns();
	setenv("SOFTHCA_NET", "1", 1);
	import_owner_begin(&ow, net_importer, NULL, BUF, all_access, 0);
	ep_fill_pattern(ow.buf + SRC, MSG, 1, 0);
	import_owner_offer(&ow, NULL);
	duo_expect(ow.d.fd, 'n');
	duo_wait(&ow.d);
	import_owner_end(&ow);
}

/* An owner that goes away: what the importer holds names nothing. */
static void short_owner(int sock, void *arg)
{
	struct import_owner ow;

	(void)arg;
	import_owner_open(&ow, BUF, all_access, 0);
	ep_fill_pattern(ow.buf + SRC, MSG, 1, 0);
	ow.d.fd = sock;		/* the offer to the parent */
	import_owner_offer(&ow, NULL);
	duo_expect(sock, 'x');
	/* exits with everything open */
}

TEST(owner_gone)
{
	struct ibv_context *ic;
	struct ibv_pd *pd, *lpd;
	struct ibv_mr *mr, *lmr;
	struct importer im;
	uint8_t *lbuf;
	struct ep i, j;
	struct duo d;

	ep_skip_if_netns();
	unsetenv("SOFTHCA_NET");
	duo_fork(&d, short_owner, NULL);
	importer_begin(&im, d.fd);
	ic = im.ctx;
	pd = im.pd;
	mr = im.mr;
	ASSERT_EQ(posix_memalign((void **)&lbuf, 4096, BUF), 0);
	memset(lbuf, EP_SENTINEL, BUF);
	lpd = ibv_alloc_pd(ic);
	ASSERT_NOT_NULL(lpd);
	lmr = ibv_reg_mr(lpd, lbuf, BUF, all_access);
	ASSERT_NOT_NULL(lmr);
	import_ep_make(&i, IBV_QPT_RC, ic, pd, mr,
		       (uint8_t *)(uintptr_t)im.of.addr, BUF);
	import_ep_make(&j, IBV_QPT_RC, ic, lpd, lmr, lbuf, BUF);
	import_ep_pair(&i, &j);
	/* while it lives, the key goes */
	ASSERT_EQ(ep_post_recv(&j, 1, LDST, MSG), 0);
	ASSERT_EQ(ep_post(&i, 2, IBV_WR_SEND, SRC, MSG, 0, 0), 0);
	ep_expect(i.scq, i.qp, 2, IBV_WC_SUCCESS);
	ep_expect(j.rcq, j.qp, 1, IBV_WC_SUCCESS);
	ASSERT_EQ(ep_find_pattern_diff(lbuf + LDST, MSG, 1, 0), -1);

	duo_signal(d.fd, 'x');
	duo_wait(&d);
	/* gone: a local protection error, and nothing to import */
	ASSERT_EQ(ep_post(&i, 3, IBV_WR_SEND, SRC, MSG, 0, 0), 0);
	ep_expect(i.scq, i.qp, 3, IBV_WC_LOC_PROT_ERR);
	ASSERT_NULL_ERRNO(ibv_import_pd(ic, im.of.pd_handle), ENOENT);
	ASSERT_NULL_ERRNO(ibv_import_mr(pd, im.of.mr_handle), ENOENT);

	import_ep_unmake(&j);
	import_ep_unmake(&i);
	ASSERT_EQ(ibv_dereg_mr(lmr), 0);
	ASSERT_EQ(ibv_dealloc_pd(lpd), 0);
	importer_end(&im);
	free(lbuf);
}
