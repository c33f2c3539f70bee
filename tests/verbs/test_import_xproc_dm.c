// SPDX-License-Identifier: MIT
/*
 * Issue 14: device memory imported from ANOTHER process (docs/import.md,
 * "Another process's cmd_fd": ibv_import_dm).
 *
 * The owner (the parent) opens the device, allocates a PD and a DM,
 * writes a pattern into the DM, registers a DM MR of its own on it, and
 * passes its cmd_fd to the importer (a forked child) by SCM_RIGHTS with
 * the handles.  The importer:
 *   - is refused a handle that names no DM: ENOENT;
 *   - imports the DM (the owner's handle) and reads the owner's pattern
 *     with ibv_memcpy_from_dm; writes one of its own with
 *     ibv_memcpy_to_dm, which the owner reads; the bounds are the DM's
 *     (EFAULT past its end);
 *   - imports it a second time and unimports that: the DM stays;
 *   - registers a DM MR on the import, in the imported PD, and on an RC
 *     QP of that PD SENDs from it (the owner's pattern arrives in a
 *     receive of the importer's own QP) and is WRITTEN into through the
 *     DM MR's R_Key by that QP: the owner reads the bytes from its DM;
 *   - cannot free the DM through the import while the owner's DM MR is
 *     registered on it, nor while its own DM MR is: EBUSY;
 *   - frees it through the import: for the owner too (its free ENOENT,
 *     its copies EINVAL, as for a DM freed in one process: test_dm.c),
 *     and the handle names nothing any more: ENOENT.
 * The same with the DM MRs on CMA (SOFTHCA_MAP=0), and with the
 * importer's QPs on the net path (SOFTHCA_NET=1).
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>

#include "harness.h"
#include "fdpass.h"
#include "common.h"
#include "ep.h"
#include "import_ep.h"

#define BUF	16384u
#define DM_LEN	16384u
#define MSG	1024u
#define SRC	0u		/* the owner's pattern in the DM */
#define IMPW	4096u		/* the importer's memcpy_to_dm */
#define WDST	8192u		/* the importer's WRITE lands here (DM) */
#define LDST	4096u		/* the importer's own receive buffer */
#define LSRC	8192u		/* ... and WRITE source */

static const int all_access = IBV_ACCESS_LOCAL_WRITE |
			      IBV_ACCESS_REMOTE_WRITE |
			      IBV_ACCESS_REMOTE_READ |
			      IBV_ACCESS_REMOTE_ATOMIC;

struct offer {
	uint32_t pd_handle, dm_handle;
};

/* The importer (the child). */
static void importer(int sock, void *arg)
{
	struct ibv_context *ic;
	struct ibv_pd *pd, *lpd;
	struct ibv_dm *dm, *dm2;
	struct ibv_mr *dmr, *lmr;
	uint8_t *lbuf, r[MSG], w[MSG];
	struct offer of;
	struct ep i, j;
	int fd;

	(void)arg;
	fd = fdpass_recv(sock, &of, sizeof(of));
	ic = ibv_import_device(fd);
	ASSERT_NOT_NULL(ic);
	pd = ibv_import_pd(ic, of.pd_handle);
	ASSERT_NOT_NULL(pd);

	ASSERT_NULL_ERRNO(ibv_import_dm(ic, of.dm_handle ^ 0x5a5a0), ENOENT);
	dm = ibv_import_dm(ic, of.dm_handle);
	ASSERT_NOT_NULL(dm);
	ASSERT(dm->context == ic);
	ASSERT_EQ(dm->handle, of.dm_handle);

	/* the owner's bytes, read here; ours, read there */
	ASSERT_EQ(ibv_memcpy_from_dm(r, dm, SRC, MSG), 0);
	ASSERT_EQ(ep_find_pattern_diff(r, MSG, 1, 0), -1);
	ep_fill_pattern(w, MSG, 2, 0);
	ASSERT_EQ(ibv_memcpy_to_dm(dm, IMPW, w, MSG), 0);
	ASSERT_EQ(ibv_memcpy_to_dm(dm, DM_LEN - 4, w, 8), EFAULT);
	duo_signal(sock, 't');
	duo_expect(sock, 'T');

	/* a second import, unimported: the DM stays */
	dm2 = ibv_import_dm(ic, of.dm_handle);
	ASSERT_NOT_NULL(dm2);
	ASSERT(dm2 != dm);
	ibv_unimport_dm(dm2);
	ASSERT_EQ(ibv_memcpy_from_dm(r, dm, SRC, MSG), 0);
	ASSERT_EQ(ep_find_pattern_diff(r, MSG, 1, 0), -1);

	/* the owner's DM MR holds the DM: the owner's own free answers */
	ASSERT_EQ(ibv_free_dm(dm), EBUSY);
	duo_signal(sock, 'b');
	duo_expect(sock, 'B');			/* ... deregistered */

	/* a DM MR on the import, in the imported PD: RC traffic */
	dmr = ibv_reg_dm_mr(pd, dm, 0, DM_LEN,
			    IBV_ACCESS_ZERO_BASED | all_access);
	ASSERT_NOT_NULL(dmr);
	ASSERT_EQ(posix_memalign((void **)&lbuf, 4096, BUF), 0);
	memset(lbuf, EP_SENTINEL, BUF);
	ep_fill_pattern(lbuf + LSRC, MSG, 3, 0);
	lpd = ibv_alloc_pd(ic);
	ASSERT_NOT_NULL(lpd);
	lmr = ibv_reg_mr(lpd, lbuf, BUF, all_access);
	ASSERT_NOT_NULL(lmr);
	/* zero-based: offsets */
	import_ep_make(&i, IBV_QPT_RC, ic, pd, dmr, NULL, BUF);
	import_ep_make(&j, IBV_QPT_RC, ic, lpd, lmr, lbuf, BUF);
	import_ep_pair(&i, &j);
	/* SEND from the DM: the owner's pattern */
	ASSERT_EQ(ep_post_recv(&j, 1, LDST, MSG), 0);
	ASSERT_EQ(ep_post(&i, 2, IBV_WR_SEND, SRC, MSG, 0, 0), 0);
	ep_expect(i.scq, i.qp, 2, IBV_WC_SUCCESS);
	ASSERT_EQ(ep_expect(j.rcq, j.qp, 1, IBV_WC_SUCCESS).byte_len, MSG);
	ASSERT_EQ(ep_find_pattern_diff(lbuf + LDST, MSG, 1, 0), -1);
	if (getenv("SOFTHCA_NET"))
		ASSERT_GT(ep_tcp_bytes(), 0);
	/* a WRITE into the DM through the DM MR's R_Key */
	ASSERT_EQ(ep_post(&j, 3, IBV_WR_RDMA_WRITE, LSRC, MSG, WDST, 0), 0);
	ep_expect(j.scq, j.qp, 3, IBV_WC_SUCCESS);
	duo_signal(sock, 'w');		/* the owner reads WDST */
	duo_expect(sock, 'W');

	/* our DM MR holds the DM, as the owner's does */
	ASSERT_EQ(ibv_free_dm(dm), EBUSY);
	import_ep_unmake(&j);
	import_ep_unmake(&i);
	ASSERT_EQ(ibv_dereg_mr(dmr), 0);
	ASSERT_EQ(ibv_free_dm(dm), 0);
	ASSERT_NULL_ERRNO(ibv_import_dm(ic, of.dm_handle), ENOENT);
	duo_signal(sock, 'f');

	ASSERT_EQ(ibv_dereg_mr(lmr), 0);
	ASSERT_EQ(ibv_dealloc_pd(lpd), 0);
	ibv_unimport_pd(pd);
	ASSERT_EQ(ibv_close_device(ic), 0);
	free(lbuf);
}

static void dm_from_another_process(void);

TEST(import_dm_from_another_process)
{
	unsetenv("SOFTHCA_NET");
	dm_from_another_process();
}

/* The DM MRs on CMA (SOFTHCA_MAP=0): the traffic copies with
 * process_vm_readv/writev, into the same memfd. */
TEST(import_dm_from_another_process_cma)
{
	unsetenv("SOFTHCA_NET");
	setenv("SOFTHCA_MAP", "0", 1);
	dm_from_another_process();
	unsetenv("SOFTHCA_MAP");
}

/* The importer's QPs on the net path (SOFTHCA_NET=1): its engine reads
 * and writes the DM MR's memory, its mapping of the owner's memfd. */
TEST(import_dm_from_another_process_net)
{
	setenv("SOFTHCA_NET", "1", 1);
	dm_from_another_process();
	unsetenv("SOFTHCA_NET");
}

static void dm_from_another_process(void)
{
	struct ibv_alloc_dm_attr da = { .length = DM_LEN };
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_dm *dm;
	struct ibv_mr *omr;
	static uint8_t fill[DM_LEN];
	uint8_t b[MSG];
	struct offer of;
	struct duo d;

	ep_skip_if_netns();
	duo_fork(&d, importer, NULL);
	ctx = open_lo();
	pd = ibv_alloc_pd(ctx);
	ASSERT_NOT_NULL(pd);
	dm = ibv_alloc_dm(ctx, &da);
	ASSERT_NOT_NULL(dm);
	memset(fill, EP_SENTINEL, DM_LEN);
	ASSERT_EQ(ibv_memcpy_to_dm(dm, 0, fill, DM_LEN), 0);
	ep_fill_pattern(b, MSG, 1, 0);
	ASSERT_EQ(ibv_memcpy_to_dm(dm, SRC, b, MSG), 0);
	omr = ibv_reg_dm_mr(pd, dm, 0, DM_LEN,
			    IBV_ACCESS_ZERO_BASED | IBV_ACCESS_LOCAL_WRITE);
	ASSERT_NOT_NULL(omr);
	of.pd_handle = pd->handle;
	of.dm_handle = dm->handle;
	fdpass_send(d.fd, ctx->cmd_fd, &of, sizeof(of));

	duo_expect(d.fd, 't');
	ASSERT_EQ(ibv_memcpy_from_dm(b, dm, IMPW, MSG), 0);
	ASSERT_EQ(ep_find_pattern_diff(b, MSG, 2, 0), -1);
	duo_signal(d.fd, 'T');

	duo_expect(d.fd, 'b');
	ASSERT_EQ(ibv_dereg_mr(omr), 0);
	duo_signal(d.fd, 'B');

	duo_expect(d.fd, 'w');
	ASSERT_EQ(ibv_memcpy_from_dm(b, dm, WDST, MSG), 0);
	ASSERT_EQ(ep_find_pattern_diff(b, MSG, 3, 0), -1);
	ASSERT_EQ(ibv_memcpy_from_dm(b, dm, WDST + MSG, 64), 0);
	ASSERT_EQ(ep_find_non_sentinel(b, 64), -1);
	duo_signal(d.fd, 'W');

	duo_expect(d.fd, 'f');
	/* freed through the importer's name */
	ASSERT_EQ(ibv_free_dm(dm), ENOENT);
	ASSERT_EQ(ibv_memcpy_to_dm(dm, 0, b, 8), EINVAL);
	duo_wait(&d);
	ASSERT_EQ(ibv_dealloc_pd(pd), 0);
	ASSERT_EQ(ibv_close_device(ctx), 0);
}
