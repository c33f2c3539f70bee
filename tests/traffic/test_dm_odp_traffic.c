// SPDX-License-Identifier: MIT
/*
 * Traffic to and from device memory and on-demand paging MRs, between
 * two processes, on each path: mapped (the default on one host: a DM MR
 * is re-backed and mapped by the peer like any MR; an ODP MR never is),
 * CMA (SOFTHCA_MAP=0) and net (SOFTHCA_NET=1).
 *
 * The responder holds a DM with a zero-based DM MR, an ODP MR over three
 * pages whose middle one is unmapped, and an implicit ODP MR.  The
 * requester WRITEs, READs, runs atomics on and SENDs into them (its SEND
 * gathered from a DM of its own, its READ scattered into an ODP MR of
 * its own), and last WRITEs into the hole: a NIC cannot fault that page
 * in, and answers with a remote access error (docs/dm-odp.md).  A local
 * SGE on an ODP page that is not there completes with a local protection
 * error (one process).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>

#include "harness.h"
#include "ep.h"

#define DM_LEN		16384u
#define DM_WRITE_OFF	256u		/* WRITE lands here, 1 KiB */
#define DM_ATOM_OFF	64u		/* the atomic word */
#define DM_READ_OFF	8192u		/* READ comes from here, 1 KiB */
#define DM_RECV_OFF	12288u		/* the SEND lands here, 512 B */
#define ODP_WRITE_OFF	1024u		/* in the ODP MR's first page, 2 KiB */
#define ODP_ATOM_OFF	3072u
#define ODP_READ_LEN	512u		/* its first bytes, READ back */

/* What the responder tells the requester, after the endpoints' info. */
struct target {
	uint32_t dm_rkey;
	uint32_t odp_rkey;
	uint64_t odp_addr;		/* 3 pages, the middle one unmapped */
	uint32_t impl_rkey;
	uint64_t impl_addr;		/* a page of the responder */
};

struct resp {
	struct ibv_dm *dm;
	struct ibv_mr *dm_mr, *odp_mr, *impl_mr;
	uint8_t *odp, *impl;
	size_t page;
};

static const int all_access = IBV_ACCESS_LOCAL_WRITE |
			      IBV_ACCESS_REMOTE_WRITE |
			      IBV_ACCESS_REMOTE_READ |
			      IBV_ACCESS_REMOTE_ATOMIC;

static void *map(size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	ASSERT(p != MAP_FAILED);
	return p;
}

static struct ibv_dm *dm_alloc(struct ibv_context *ctx, uint64_t len)
{
	struct ibv_alloc_dm_attr a = { .length = len };
	struct ibv_dm *dm = ibv_alloc_dm(ctx, &a);

	ASSERT_NOT_NULL(dm);
	return dm;
}

static void post(struct ep *a, uint64_t wr_id, enum ibv_wr_opcode op,
		 uint64_t laddr, uint32_t lkey, uint32_t len, uint64_t raddr,
		 uint32_t rkey, uint64_t cmp_add, uint64_t swap)
{
	struct ibv_sge sge = { .addr = laddr, .length = len, .lkey = lkey };
	struct ibv_send_wr wr, *bad;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = wr_id;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = op;
	wr.send_flags = IBV_SEND_SIGNALED;
	if (op == IBV_WR_ATOMIC_FETCH_AND_ADD ||
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

static void resp_prepare(struct ep *b, struct resp *r, struct target *t)
{
	uint8_t tmp[1024];
	uint64_t v = 10;
	struct ibv_sge sge;
	struct ibv_recv_wr wr, *bad;

	r->page = (size_t)sysconf(_SC_PAGESIZE);
	r->dm = dm_alloc(b->ctx, DM_LEN);
	ep_fill_pattern(tmp, sizeof(tmp), 2, 0);
	ASSERT_EQ(ibv_memcpy_to_dm(r->dm, DM_READ_OFF, tmp, sizeof(tmp)), 0);
	ASSERT_EQ(ibv_memcpy_to_dm(r->dm, DM_ATOM_OFF, &v, 8), 0);
	r->dm_mr = ibv_reg_dm_mr(b->pd, r->dm, 0, DM_LEN,
				 all_access | IBV_ACCESS_ZERO_BASED);
	ASSERT_NOT_NULL(r->dm_mr);

	r->odp = map(3 * r->page);
	ep_fill_pattern(r->odp, r->page, 4, 0);
	v = 7;
	memcpy(r->odp + ODP_ATOM_OFF, &v, 8);
	r->odp_mr = ibv_reg_mr(b->pd, r->odp, 3 * r->page,
			       all_access | IBV_ACCESS_ON_DEMAND);
	ASSERT_NOT_NULL(r->odp_mr);
	r->impl = map(r->page);
	memset(r->impl, EP_SENTINEL, r->page);
	r->impl_mr = ibv_reg_mr(b->pd, NULL, SIZE_MAX,
				all_access | IBV_ACCESS_ON_DEMAND);
	ASSERT_NOT_NULL(r->impl_mr);

	/* the SEND's receive buffer is in the DM */
	sge.addr = DM_RECV_OFF;
	sge.length = 512;
	sge.lkey = r->dm_mr->lkey;
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = 0xd0;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	ASSERT_EQ(ibv_post_recv(b->qp, &wr, &bad), 0);

	/* the hole, last: nothing mapped since may take its place (an
	 * mmap of this process would) */
	ASSERT_EQ(munmap(r->odp + r->page, r->page), 0);
	errno = 0;
	ASSERT_EQ(msync(r->odp + r->page, r->page, MS_ASYNC), -1);
	ASSERT_EQ(errno, ENOMEM);

	memset(t, 0, sizeof(*t));
	t->dm_rkey = r->dm_mr->rkey;
	t->odp_rkey = r->odp_mr->rkey;
	t->odp_addr = (uintptr_t)r->odp;
	t->impl_rkey = r->impl_mr->rkey;
	t->impl_addr = (uintptr_t)r->impl;
}

static void check_pattern(const uint8_t *p, uint32_t len, uint32_t seed)
{
	int64_t at = ep_find_pattern_diff(p, len, seed, 0);

	if (at >= 0)
		harness_fail(__FILE__, __LINE__, "seed %u: byte %lld differs",
			     seed, (long long)at);
}

static void resp_check(struct ep *b, struct resp *r)
{
	uint8_t tmp[2048];
	uint64_t v = 0;
	struct ibv_wc wc = ep_expect(b->rcq, b->qp, 0xd0, IBV_WC_SUCCESS);

	ASSERT_EQ(wc.byte_len, 512);
	ASSERT_EQ(ibv_memcpy_from_dm(tmp, r->dm, DM_RECV_OFF, 512), 0);
	check_pattern(tmp, 512, 3);
	ASSERT_EQ(ibv_memcpy_from_dm(tmp, r->dm, DM_WRITE_OFF, 1024), 0);
	check_pattern(tmp, 1024, 1);
	ASSERT_EQ(ibv_memcpy_from_dm(&v, r->dm, DM_ATOM_OFF, 8), 0);
	ASSERT_EQ(v, 99);
	check_pattern(r->odp + ODP_WRITE_OFF, 2048, 5);
	memcpy(&v, r->odp + ODP_ATOM_OFF, 8);
	ASSERT_EQ(v, 8);
	check_pattern(r->impl, 256, 6);
	ASSERT_EQ(ep_find_non_sentinel(r->impl + 256, r->page - 256), -1);

	ASSERT_EQ(ibv_dereg_mr(r->dm_mr), 0);
	ASSERT_EQ(ibv_dereg_mr(r->odp_mr), 0);
	ASSERT_EQ(ibv_dereg_mr(r->impl_mr), 0);
	ASSERT_EQ(ibv_free_dm(r->dm), 0);
	munmap(r->odp, r->page);
	munmap(r->odp + 2 * r->page, r->page);
	munmap(r->impl, r->page);
}

static void req_run(struct ep *a, const struct target *t)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	struct ibv_dm *dm = dm_alloc(a->ctx, 4096);
	struct ibv_mr *dm_mr, *odp_mr;
	uint8_t tmp[512], *odp = map(page);
	uint64_t orig;

	/* the requester's own DM and ODP MR, as local SGEs */
	ep_fill_pattern(tmp, 512, 3, 0);
	ASSERT_EQ(ibv_memcpy_to_dm(dm, 1024, tmp, 512), 0);
	dm_mr = ibv_reg_dm_mr(a->pd, dm, 0, 4096,
			      IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_ZERO_BASED);
	ASSERT_NOT_NULL(dm_mr);
	odp_mr = ibv_reg_mr(a->pd, odp, page,
			    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_ON_DEMAND);
	ASSERT_NOT_NULL(odp_mr);

	/* the responder's DM: WRITE, READ, atomics, SEND (from our DM) */
	ep_fill_pattern(a->buf, 1024, 1, 0);
	post(a, 1, IBV_WR_RDMA_WRITE, (uintptr_t)a->buf, a->mr->lkey, 1024,
	     DM_WRITE_OFF, t->dm_rkey, 0, 0);
	ep_expect(a->scq, a->qp, 1, IBV_WC_SUCCESS);
	memset(a->buf + 4096, EP_SENTINEL, 2048);
	post(a, 2, IBV_WR_RDMA_READ, (uintptr_t)a->buf + 4096, a->mr->lkey,
	     1024, DM_READ_OFF, t->dm_rkey, 0, 0);
	ep_expect(a->scq, a->qp, 2, IBV_WC_SUCCESS);
	check_pattern(a->buf + 4096, 1024, 2);
	ASSERT_EQ(ep_find_non_sentinel(a->buf + 4096 + 1024, 1024), -1);
	post(a, 3, IBV_WR_ATOMIC_FETCH_AND_ADD, (uintptr_t)&a->buf[8192],
	     a->mr->lkey, 8, DM_ATOM_OFF, t->dm_rkey, 5, 0);
	ep_expect(a->scq, a->qp, 3, IBV_WC_SUCCESS);
	memcpy(&orig, a->buf + 8192, 8);
	ASSERT_EQ(orig, 10);
	post(a, 4, IBV_WR_ATOMIC_CMP_AND_SWP, (uintptr_t)&a->buf[8192],
	     a->mr->lkey, 8, DM_ATOM_OFF, t->dm_rkey, 15, 99);
	ep_expect(a->scq, a->qp, 4, IBV_WC_SUCCESS);
	memcpy(&orig, a->buf + 8192, 8);
	ASSERT_EQ(orig, 15);
	post(a, 5, IBV_WR_SEND, 1024, dm_mr->lkey, 512, 0, 0, 0, 0);
	ep_expect(a->scq, a->qp, 5, IBV_WC_SUCCESS);

	/* the responder's ODP MR: WRITE, READ (into our ODP MR), atomic */
	ep_fill_pattern(a->buf, 2048, 5, 0);
	post(a, 6, IBV_WR_RDMA_WRITE, (uintptr_t)a->buf, a->mr->lkey, 2048,
	     t->odp_addr + ODP_WRITE_OFF, t->odp_rkey, 0, 0);
	ep_expect(a->scq, a->qp, 6, IBV_WC_SUCCESS);
	memset(odp, EP_SENTINEL, page);
	post(a, 7, IBV_WR_RDMA_READ, (uintptr_t)odp + 100, odp_mr->lkey,
	     ODP_READ_LEN, t->odp_addr, t->odp_rkey, 0, 0);
	ep_expect(a->scq, a->qp, 7, IBV_WC_SUCCESS);
	check_pattern(odp + 100, ODP_READ_LEN, 4);
	ASSERT_EQ(ep_find_non_sentinel(odp, 100), -1);
	ASSERT_EQ(ep_find_non_sentinel(odp + 100 + ODP_READ_LEN,
				       page - 100 - ODP_READ_LEN), -1);
	post(a, 8, IBV_WR_ATOMIC_FETCH_AND_ADD, (uintptr_t)&a->buf[8192],
	     a->mr->lkey, 8, t->odp_addr + ODP_ATOM_OFF, t->odp_rkey, 1, 0);
	ep_expect(a->scq, a->qp, 8, IBV_WC_SUCCESS);
	memcpy(&orig, a->buf + 8192, 8);
	ASSERT_EQ(orig, 7);

	/* implicit ODP: the responder's address, through the one R_Key */
	ep_fill_pattern(a->buf, 256, 6, 0);
	post(a, 9, IBV_WR_RDMA_WRITE, (uintptr_t)a->buf, a->mr->lkey, 256,
	     t->impl_addr, t->impl_rkey, 0, 0);
	ep_expect(a->scq, a->qp, 9, IBV_WC_SUCCESS);

	/* the unmapped page: a remote access error (the QP's last WR) */
	post(a, 10, IBV_WR_RDMA_WRITE, (uintptr_t)a->buf, a->mr->lkey, 64,
	     t->odp_addr + page + 16, t->odp_rkey, 0, 0);
	ep_expect(a->scq, a->qp, 10, IBV_WC_REM_ACCESS_ERR);

	ASSERT_EQ(ibv_dereg_mr(odp_mr), 0);
	ASSERT_EQ(ibv_dereg_mr(dm_mr), 0);
	ASSERT_EQ(ibv_free_dm(dm), 0);
	munmap(odp, page);
}

static void responder(int fd, void *arg)
{
	struct ep_opts o;
	struct target t;
	struct resp r;
	struct ep b;

	(void)arg;
	ep_default_opts(&o, IBV_QPT_RC);
	ep_open_remote(&b, &o, fd);
	resp_prepare(&b, &r, &t);
	xwrite(fd, &t, sizeof(t));
	duo_expect(fd, 'r');
	resp_check(&b, &r);
	duo_signal(fd, 'c');
	ep_destroy(&b);
}

static void run_two(const char *env, const char *val)
{
	struct ep_opts o;
	struct target t;
	struct duo d;
	struct ep a;

	if (env)
		ASSERT_EQ(setenv(env, val, 1), 0);
	duo_fork(&d, responder, NULL);
	ep_default_opts(&o, IBV_QPT_RC);
	ep_open_remote(&a, &o, d.fd);
	xread(d.fd, &t, sizeof(t));
	req_run(&a, &t);
	if (env && !strcmp(env, "SOFTHCA_NET"))
		ASSERT_GT(ep_tcp_bytes(), 0);
	duo_signal(d.fd, 'r');
	duo_expect(d.fd, 'c');
	duo_wait(&d);
	ep_destroy(&a);
}

TEST(dm_odp_mapped) { run_two(NULL, NULL); }
TEST(dm_odp_cma) { run_two("SOFTHCA_MAP", "0"); }
TEST(dm_odp_net) { run_two("SOFTHCA_NET", "1"); }

/* A local SGE on an ODP page that is not mapped: LOC_PROT_ERR, for a
 * gather (WRITE) and for a scatter (READ). */
static void run_local(bool net, bool read)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	uint8_t *p = map(2 * page);
	struct ibv_mr *mr;
	struct ep_opts o;
	struct ep a, b;

	if (net)
		ASSERT_EQ(setenv("SOFTHCA_NET", "1", 1), 0);
	ep_default_opts(&o, IBV_QPT_RC);
	ep_pair(&a, &o, &b, &o);
	mr = ibv_reg_mr(a.pd, p, 2 * page,
			IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_ON_DEMAND);
	ASSERT_NOT_NULL(mr);
	/* the mapped page works */
	post(&a, 1, read ? IBV_WR_RDMA_READ : IBV_WR_RDMA_WRITE,
	     (uintptr_t)p, mr->lkey, 64, a.peer.addr, a.peer.rkey, 0, 0);
	ep_expect(a.scq, a.qp, 1, IBV_WC_SUCCESS);
	ASSERT_EQ(munmap(p + page, page), 0);
	memset(b.buf, EP_SENTINEL, 4096);
	post(&a, 2, read ? IBV_WR_RDMA_READ : IBV_WR_RDMA_WRITE,
	     (uintptr_t)p + page, mr->lkey, 64, a.peer.addr, a.peer.rkey, 0,
	     0);
	ep_expect(a.scq, a.qp, 2, IBV_WC_LOC_PROT_ERR);
	/* nothing reached the responder */
	ASSERT_EQ(ep_find_non_sentinel(b.buf, 4096), -1);
	ASSERT_EQ(ibv_dereg_mr(mr), 0);
	munmap(p, page);
	ep_destroy(&a);
	ep_destroy(&b);
}

TEST(odp_local_unmapped_write) { run_local(false, false); }
TEST(odp_local_unmapped_read) { run_local(false, true); }
TEST(net_odp_local_unmapped_write) { run_local(true, false); }
TEST(net_odp_local_unmapped_read) { run_local(true, true); }

/* The responder is this process (same host: its memory copied locally;
 * net: its engine thread): the hole is found before the copy, which
 * would fault.  op: what is sent into the hole. */
static void run_self_hole(bool net, enum ibv_wr_opcode op)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	uint8_t *p = map(2 * page);
	struct ibv_mr *mr;
	struct ep_opts o;
	struct ep a, b;

	if (net)
		ASSERT_EQ(setenv("SOFTHCA_NET", "1", 1), 0);
	ep_default_opts(&o, IBV_QPT_RC);
	ep_pair(&a, &o, &b, &o);
	mr = ibv_reg_mr(b.pd, p, 2 * page, all_access | IBV_ACCESS_ON_DEMAND);
	ASSERT_NOT_NULL(mr);
	ep_fill_pattern(a.buf, 64, 8, 0);
	post(&a, 1, IBV_WR_RDMA_WRITE, (uintptr_t)a.buf, a.mr->lkey, 64,
	     (uintptr_t)p + 8, mr->rkey, 0, 0);
	ep_expect(a.scq, a.qp, 1, IBV_WC_SUCCESS);
	check_pattern(p + 8, 64, 8);
	ASSERT_EQ(munmap(p + page, page), 0);
	post(&a, 2, op, (uintptr_t)a.buf + 4096, a.mr->lkey, 8,
	     (uintptr_t)p + page + 64, mr->rkey, 1, 2);
	ep_expect(a.scq, a.qp, 2, IBV_WC_REM_ACCESS_ERR);
	ASSERT_EQ(ibv_dereg_mr(mr), 0);
	munmap(p, page);
	ep_destroy(&a);
	ep_destroy(&b);
}

TEST(odp_self_hole_write) { run_self_hole(false, IBV_WR_RDMA_WRITE); }
TEST(odp_self_hole_read) { run_self_hole(false, IBV_WR_RDMA_READ); }
TEST(odp_self_hole_atomic)
{
	run_self_hole(false, IBV_WR_ATOMIC_FETCH_AND_ADD);
}
TEST(net_odp_self_hole_write) { run_self_hole(true, IBV_WR_RDMA_WRITE); }
TEST(net_odp_self_hole_read) { run_self_hole(true, IBV_WR_RDMA_READ); }
TEST(net_odp_self_hole_atomic)
{
	run_self_hole(true, IBV_WR_ATOMIC_FETCH_AND_ADD);
}
