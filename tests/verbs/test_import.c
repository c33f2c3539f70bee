// SPDX-License-Identifier: MIT
/*
 * Shared PD, MR and DM: ibv_import_device, ibv_import_pd, ibv_import_mr,
 * ibv_import_dm and the unimports (docs/import.md).
 *
 * Reference: rdma-core 44's man pages (a dup of cmd_fd imported is a
 * context on the same uverbs file; an imported object is the same kernel
 * object, by the same handle; unimport forgets only the import; "Once
 * destroy is done no other process can touch the object except for
 * unimport"; an imported MR's addr is NULL), rdma-core's
 * ibv_import_device (an fd that is no command file: EINVAL), the
 * kernel's object lookup (a handle that names nothing: ENOENT) and its
 * use counts (a PD in use is EBUSY, through any context).  A cmd_fd
 * from another process: test_import_xproc.c.
 *
 * Traffic: a QP created in the imported context on the imported PD
 * sends, reads and is written through the imported MR's keys, to and
 * from another process, on the same-host path and on the net path
 * (SOFTHCA_NET=1, TCP bytes seen by the kernel); once the owner
 * deregisters the MR, its L_Key is a local protection error for the
 * importer too.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/wait.h>

#include "harness.h"
#include "common.h"
#include "ep.h"

#define BUF	32768u
#define MSG	1024u
#define SRC	0u		/* the importer SENDs this */
#define RECV	4096u		/* ... READs into this */
#define WDST	8192u		/* the peer WRITEs here */
#define RSRC	12288u		/* the peer's READ source */

static const int all_access = IBV_ACCESS_LOCAL_WRITE |
			      IBV_ACCESS_REMOTE_WRITE |
			      IBV_ACCESS_REMOTE_READ |
			      IBV_ACCESS_REMOTE_ATOMIC;

struct owner {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_mr *mr;
	uint8_t *buf;
};

static void owner_open(struct owner *w)
{
	w->ctx = open_lo();
	w->pd = ibv_alloc_pd(w->ctx);
	ASSERT_NOT_NULL(w->pd);
	ASSERT_EQ(posix_memalign((void **)&w->buf, 4096, BUF), 0);
	memset(w->buf, 0, BUF);
	w->mr = ibv_reg_mr(w->pd, w->buf, BUF, all_access);
	ASSERT_NOT_NULL(w->mr);
}

static struct ibv_context *import_ctx(struct ibv_context *ctx)
{
	int fd = dup(ctx->cmd_fd);
	struct ibv_context *ic;

	ASSERT_GE(fd, 0);
	ic = ibv_import_device(fd);
	ASSERT_NOT_NULL(ic);
	ASSERT_EQ(ic->cmd_fd, fd);
	return ic;
}

TEST(import_device_errors)
{
	struct ibv_context *ctx, *ic;
	char path[] = "/tmp/softhca-import-XXXXXX";
	int p[2], fd;

	ASSERT_NULL_ERRNO(ibv_import_device(-1), EINVAL);
	ASSERT_NULL_ERRNO(ibv_import_device(1000), EINVAL);	/* not open */
	ASSERT_EQ(pipe(p), 0);
	ASSERT_NULL_ERRNO(ibv_import_device(p[0]), EINVAL);
	close(p[0]);
	close(p[1]);
	fd = mkstemp(path);
	ASSERT_GE(fd, 0);
	unlink(path);
	ASSERT_NULL_ERRNO(ibv_import_device(fd), EINVAL);
	close(fd);

	/* a dup of a context closed since: out of reach */
	ctx = open_lo();
	fd = dup(ctx->cmd_fd);
	ASSERT_GE(fd, 0);
	ASSERT_EQ(ibv_close_device(ctx), 0);
	ASSERT_NULL_ERRNO(ibv_import_device(fd), EOPNOTSUPP);
	close(fd);

	/* the imported context closes its fd; the owner's stays open */
	ctx = open_lo();
	ic = import_ctx(ctx);
	fd = ic->cmd_fd;
	ASSERT(ic != ctx);
	ASSERT(ic->device == ctx->device);
	ASSERT_EQ(ibv_close_device(ic), 0);
	ASSERT_EQ(fcntl(fd, F_GETFD), -1);
	ASSERT_GE(fcntl(ctx->cmd_fd, F_GETFD), 0);
	ASSERT_EQ(ibv_close_device(ctx), 0);
}

/* Another process holds a dup of the command file (fork, or SCM_RIGHTS
 * alike): it imports the context from its owner (test_import_xproc.c
 * for the objects and traffic), once the owner serves imports (from its
 * first PD on: docs/import.md). */
TEST(import_device_other_process)
{
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	int fd, st;
	pid_t pid;

#if defined(__SANITIZE_THREAD__)
	/* TSan runs no thread in the child of a threaded process: softhca's
	 * threads run here once the context is open, and the import starts
	 * the child's (test_import_xproc forks before any thread) */
	harness_skip("a forked child of a threaded process under TSan");
#endif
	ctx = open_lo();
	fd = dup(ctx->cmd_fd);
	ASSERT_GE(fd, 0);
	/* before its first PD the owner serves no imports */
	pid = fork();
	ASSERT_GE(pid, 0);
	if (!pid) {
		errno = 0;
		_exit(!ibv_import_device(fd) && errno == ECONNREFUSED ? 0 : 1);
	}
	ASSERT_EQ(waitpid(pid, &st, 0), pid);
	ASSERT(WIFEXITED(st));
	ASSERT_EQ(WEXITSTATUS(st), 0);
	pd = ibv_alloc_pd(ctx);
	ASSERT_NOT_NULL(pd);
	pid = fork();
	ASSERT_GE(pid, 0);
	if (!pid) {
		struct ibv_context *ic = ibv_import_device(fd);
		struct ibv_pd *ipd = ic ? ibv_import_pd(ic, pd->handle) :
					  NULL;

		_exit(ipd && ipd->handle == pd->handle &&
		      ic->device->name[0] &&
		      !strcmp(ic->device->name, ctx->device->name) ? 0 : 1);
	}
	ASSERT_EQ(waitpid(pid, &st, 0), pid);
	ASSERT(WIFEXITED(st));
	ASSERT_EQ(WEXITSTATUS(st), 0);
	close(fd);
	ASSERT_EQ(ibv_dealloc_pd(pd), 0);
	ASSERT_EQ(ibv_close_device(ctx), 0);
}

TEST(import_same_objects)
{
	struct ibv_alloc_dm_attr da = { .length = 4096 };
	struct ibv_context *ic, *other;
	struct ibv_pd *ipd, *opd, *spd;
	struct ibv_dm *dm, *idm;
	struct ibv_mr *imr;
	struct owner w;
	uint32_t v[4] = { 1, 2, 3, 4 }, r[4];

	owner_open(&w);
	ic = import_ctx(w.ctx);
	ipd = ibv_import_pd(ic, w.pd->handle);
	ASSERT_NOT_NULL(ipd);
	ASSERT(ipd != w.pd);
	ASSERT(ipd->context == ic);
	ASSERT_EQ(ipd->handle, w.pd->handle);
	imr = ibv_import_mr(ipd, w.mr->handle);
	ASSERT_NOT_NULL(imr);
	ASSERT(imr->context == ic);
	ASSERT(imr->pd == ipd);
	ASSERT_EQ(imr->handle, w.mr->handle);
	ASSERT_EQ(imr->lkey, w.mr->lkey);
	ASSERT_EQ(imr->rkey, w.mr->rkey);
	ASSERT_EQ(imr->length, BUF);
	ASSERT_NULL(imr->addr);
	/* the owner's context may import too: the same file */
	spd = ibv_import_pd(w.ctx, w.pd->handle);
	ASSERT_NOT_NULL(spd);
	ibv_unimport_pd(spd);

	/* DM: written through one, read through the other */
	dm = ibv_alloc_dm(w.ctx, &da);
	ASSERT_NOT_NULL(dm);
	idm = ibv_import_dm(ic, dm->handle);
	ASSERT_NOT_NULL(idm);
	ASSERT(idm->context == ic);
	ASSERT_EQ(idm->handle, dm->handle);
	ASSERT_EQ(ibv_memcpy_to_dm(dm, 64, v, sizeof(v)), 0);
	ASSERT_EQ(ibv_memcpy_from_dm(r, idm, 64, sizeof(r)), 0);
	ASSERT_EQ(memcmp(v, r, sizeof(v)), 0);
	ASSERT_EQ(ibv_memcpy_from_dm(r, idm, 4096, 4), EFAULT);

	/* handles that name nothing in this file */
	ASSERT_NULL_ERRNO(ibv_import_pd(ic, 0xdeadbeef), ENOENT);
	ASSERT_NULL_ERRNO(ibv_import_mr(ipd, 0xdeadbeef), ENOENT);
	ASSERT_NULL_ERRNO(ibv_import_dm(ic, 0xdeadbeef), ENOENT);
	other = open_lo();
	opd = ibv_alloc_pd(other);
	ASSERT_NOT_NULL(opd);
	ASSERT_NULL_ERRNO(ibv_import_pd(ic, opd->handle), ENOENT);
	ASSERT_NULL_ERRNO(ibv_import_pd(other, w.pd->handle), ENOENT);
	ASSERT_EQ(ibv_dealloc_pd(opd), 0);
	ASSERT_EQ(ibv_close_device(other), 0);

	/* unimport forgets the import only */
	ibv_unimport_dm(idm);
	ibv_unimport_mr(imr);
	ibv_unimport_pd(ipd);
	ASSERT_EQ(ibv_memcpy_to_dm(dm, 0, v, sizeof(v)), 0);
	ASSERT_EQ(ibv_free_dm(dm), 0);
	ASSERT_EQ(ibv_dereg_mr(w.mr), 0);
	ASSERT_EQ(ibv_dealloc_pd(w.pd), 0);
	ASSERT_EQ(ibv_close_device(ic), 0);
	ASSERT_EQ(ibv_close_device(w.ctx), 0);
	free(w.buf);
}

/* Destroy through either name destroys the object: the other name then
 * finds nothing (ENOENT) and is left to unimport; use counts hold
 * across the contexts. */
TEST(destroy_through_either)
{
	struct ibv_qp_init_attr qa;
	struct ibv_context *ic;
	struct ibv_pd *ipd;
	struct ibv_mr *imr;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct owner w;

	owner_open(&w);
	ic = import_ctx(w.ctx);
	ipd = ibv_import_pd(ic, w.pd->handle);
	ASSERT_NOT_NULL(ipd);
	imr = ibv_import_mr(ipd, w.mr->handle);
	ASSERT_NOT_NULL(imr);

	/* a QP of the importer on the imported PD: the owner's PD is busy */
	cq = ibv_create_cq(ic, 4, NULL, NULL, 0);
	ASSERT_NOT_NULL(cq);
	memset(&qa, 0, sizeof(qa));
	qa.send_cq = qa.recv_cq = cq;
	qa.qp_type = IBV_QPT_RC;
	qa.cap.max_send_wr = qa.cap.max_recv_wr = 1;
	qa.cap.max_send_sge = qa.cap.max_recv_sge = 1;
	qp = ibv_create_qp(ipd, &qa);
	ASSERT_NOT_NULL(qp);
	ASSERT(qp->context == ic);
	ASSERT(qp->pd == ipd);
	ASSERT_EQ(ibv_dereg_mr(w.mr), 0);	/* the MR, through its owner */
	ASSERT_EQ(ibv_dealloc_pd(w.pd), EBUSY);
	ASSERT_EQ(ibv_dealloc_pd(ipd), EBUSY);
	ASSERT_EQ(ibv_destroy_qp(qp), 0);
	ASSERT_EQ(ibv_destroy_cq(cq), 0);

	/* the MR is gone for the importer too */
	ASSERT_EQ(ibv_dereg_mr(imr), ENOENT);
	ASSERT_NULL_ERRNO(ibv_import_mr(ipd, imr->handle), ENOENT);
	ibv_unimport_mr(imr);

	/* the PD, through the import: the owner's name finds nothing */
	ASSERT_EQ(ibv_dealloc_pd(ipd), 0);
	ASSERT_EQ(ibv_dealloc_pd(w.pd), ENOENT);
	ASSERT_EQ(ibv_close_device(ic), 0);
	ASSERT_EQ(ibv_close_device(w.ctx), 0);
	free(w.buf);
}

/* Closing the importing context leaves the owner's objects alone. */
TEST(close_import_keeps_objects)
{
	struct ibv_context *ic;
	struct ibv_pd *ipd;
	struct ibv_mr *mr;
	struct owner w;

	owner_open(&w);
	ic = import_ctx(w.ctx);
	ipd = ibv_import_pd(ic, w.pd->handle);
	ASSERT_NOT_NULL(ipd);
	ASSERT_EQ(ibv_close_device(ic), 0);
	mr = ibv_reg_mr(w.pd, w.buf, 4096, IBV_ACCESS_LOCAL_WRITE);
	ASSERT_NOT_NULL(mr);
	ASSERT_EQ(ibv_dereg_mr(mr), 0);
	ibv_unimport_pd(ipd);
	ASSERT_EQ(ibv_dereg_mr(w.mr), 0);
	ASSERT_EQ(ibv_dealloc_pd(w.pd), 0);
	ASSERT_EQ(ibv_close_device(w.ctx), 0);
	free(w.buf);
}

/* ------------------------------------------------------------------ */
/* Traffic                                                             */

static void check_around(const uint8_t *buf, uint64_t off, uint32_t seed)
{
	ASSERT_EQ(ep_find_pattern_diff(buf + off, MSG, seed, 0), -1);
	ASSERT_EQ(ep_find_non_sentinel(buf + off + MSG, 64), -1);
	ASSERT_EQ(ep_find_non_sentinel(buf + off - 64, 64), -1);
}

/* The peer: receives a SEND, WRITEs into the importer's buffer through
 * the imported MR's R_Key, serves a READ. */
static void peer(int fd, void *arg)
{
	struct ep_opts o;
	struct ep b;

	(void)arg;
	ep_default_opts(&o, IBV_QPT_RC);
	o.buf_size = BUF;
	ep_open_remote(&b, &o, fd);
	memset(b.buf, EP_SENTINEL, b.size);
	ep_fill_pattern(b.buf + RSRC, MSG, 3, 0);
	ep_fill_pattern(b.buf + WDST, MSG, 2, 0);
	ASSERT_EQ(ep_post_recv(&b, 7, RECV, MSG), 0);
	duo_signal(fd, 'r');
	duo_expect(fd, 's');
	{
		struct ibv_wc wc = ep_expect(b.rcq, b.qp, 7, IBV_WC_SUCCESS);

		ASSERT_EQ(wc.byte_len, MSG);
	}
	check_around(b.buf, RECV, 1);
	ASSERT_EQ(ep_post(&b, 8, IBV_WR_RDMA_WRITE, WDST, MSG, WDST, 0), 0);
	ep_expect(b.scq, b.qp, 8, IBV_WC_SUCCESS);
	duo_signal(fd, 'w');
	duo_expect(fd, 'd');
	ep_destroy(&b);
}

static void traffic(bool net)
{
	struct ibv_qp_init_attr qa;
	struct ibv_qp_attr a;
	struct ep_opts o;
	struct owner w;
	struct duo d;
	struct ep i;

	if (net)
		setenv("SOFTHCA_NET", "1", 1);
	else
		unsetenv("SOFTHCA_NET");
	ep_skip_if_netns();
	duo_fork(&d, peer, NULL);
	ep_default_opts(&o, IBV_QPT_RC);
	owner_open(&w);
	memset(w.buf, EP_SENTINEL, BUF);
	ep_fill_pattern(w.buf + SRC, MSG, 1, 0);

	/* the importer's endpoint: context, PD and MR imported, the rest
	 * its own */
	memset(&i, 0, sizeof(i));
	i.type = IBV_QPT_RC;
	i.ctx = import_ctx(w.ctx);
	i.gid_index = 0;
	i.mtu = IBV_MTU_4096;
	i.pd = ibv_import_pd(i.ctx, w.pd->handle);
	ASSERT_NOT_NULL(i.pd);
	i.mr = ibv_import_mr(i.pd, w.mr->handle);
	ASSERT_NOT_NULL(i.mr);
	i.buf = w.buf;		/* the imported MR's addr is NULL */
	i.size = BUF;
	i.scq = ibv_create_cq(i.ctx, o.cqe, NULL, NULL, 0);
	ASSERT_NOT_NULL(i.scq);
	i.rcq = ibv_create_cq(i.ctx, o.cqe, NULL, NULL, 0);
	ASSERT_NOT_NULL(i.rcq);
	memset(&qa, 0, sizeof(qa));
	qa.send_cq = i.scq;
	qa.recv_cq = i.rcq;
	qa.qp_type = IBV_QPT_RC;
	qa.cap.max_send_wr = qa.cap.max_recv_wr = 16;
	qa.cap.max_send_sge = qa.cap.max_recv_sge = 1;
	i.qp = ibv_create_qp(i.pd, &qa);
	ASSERT_NOT_NULL(i.qp);
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qp_access_flags = all_access & ~IBV_ACCESS_LOCAL_WRITE;
	ASSERT_EQ(ibv_modify_qp(i.qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
				IBV_QP_PORT | IBV_QP_ACCESS_FLAGS), 0);
	ASSERT_EQ(ibv_query_gid(i.ctx, 1, 0, &i.self.gid), 0);
	i.self.qpn = i.qp->qp_num;
	i.self.psn = (uint32_t)rand() & 0xffffff;
	i.self.rkey = i.mr->rkey;
	i.self.addr = (uintptr_t)w.buf;
	ep_exchange(d.fd, &i.self, &i.peer);
	ep_connect(&i, &o);

	/* SEND with the imported MR's L_Key */
	duo_expect(d.fd, 'r');
	ASSERT_EQ(ep_post(&i, 1, IBV_WR_SEND, SRC, MSG, 0, 0), 0);
	ep_expect(i.scq, i.qp, 1, IBV_WC_SUCCESS);
	duo_signal(d.fd, 's');
	/* the peer WRITEs through the imported MR's R_Key */
	duo_expect(d.fd, 'w');
	check_around(w.buf, WDST, 2);
	/* READ into the imported MR */
	ASSERT_EQ(ep_post(&i, 3, IBV_WR_RDMA_READ, RECV, MSG, RSRC, 0), 0);
	ep_expect(i.scq, i.qp, 3, IBV_WC_SUCCESS);
	check_around(w.buf, RECV, 3);
	if (net)
		ASSERT_GT(ep_tcp_bytes(), 0);

	/* the owner deregisters: the importer's L_Key names nothing */
	ASSERT_EQ(ibv_dereg_mr(w.mr), 0);
	ASSERT_EQ(ep_post(&i, 4, IBV_WR_RDMA_READ, RECV, MSG, RSRC, 0), 0);
	ep_expect(i.scq, i.qp, 4, IBV_WC_LOC_PROT_ERR);
	duo_signal(d.fd, 'd');
	duo_wait(&d);

	ibv_unimport_mr(i.mr);
	ASSERT_EQ(ibv_destroy_qp(i.qp), 0);
	ASSERT_EQ(ibv_destroy_cq(i.scq), 0);
	ASSERT_EQ(ibv_destroy_cq(i.rcq), 0);
	ibv_unimport_pd(i.pd);
	ASSERT_EQ(ibv_close_device(i.ctx), 0);
	ASSERT_EQ(ibv_dealloc_pd(w.pd), 0);
	ASSERT_EQ(ibv_close_device(w.ctx), 0);
	free(w.buf);
}

TEST(traffic_same_host)
{
	traffic(false);
}

TEST(traffic_net)
{
	traffic(true);
}
