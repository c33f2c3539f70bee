// SPDX-License-Identifier: MIT
/*
 * A page of a live MR that cannot be accessed, between two processes, on
 * each path (docs/conformance.md, "A page that faults"):
 *
 * - the responder's page: the owner munmap()s or mprotect(PROT_NONE)s a
 *   page of its MR after registering it (PROT_READ for a WRITE or an
 *   atomic; or an ODP MR's page is not mapped), the peer READs, WRITEs
 *   or runs an atomic into it.  Where the
 *   access faults (CMA, SOFTHCA_MAP=0; the net path, where the owner
 *   serves it; ODP on every path), the fault is the responder's, as on a
 *   NIC: the requester completes IBV_WC_REM_ACCESS_ERR and the
 *   responder's QP goes to error.  On the mapped path the peer reaches
 *   the pages through the segment that backs the MR, which the owner's
 *   munmap or mprotect does not touch, as a NIC reaches pinned pages:
 *   the request succeeds.
 * - the requester's own page (CMA): its READ's destination made read-only,
 *   its WRITE's source unmapped: IBV_WC_LOC_PROT_ERR, the responder's QP
 *   untouched.
 * Around the faulting page, every byte of both sides is checked.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>

#include "harness.h"
#include "ep.h"

#define OFF	64u		/* into the page, and the length of a READ/WRITE */

enum how { H_MUNMAP, H_PROT_NONE, H_READ_ONLY, H_ODP, H_NONE };

struct kase {
	enum ibv_wr_opcode op;
	enum how how;			/* what the responder did to page 1 */
	bool fault;			/* the access faults there */
};

struct target {
	uint32_t rkey;
	uint64_t addr;			/* 3 pages, the middle one is hit */
};

static const int all_access = IBV_ACCESS_LOCAL_WRITE |
			      IBV_ACCESS_REMOTE_WRITE |
			      IBV_ACCESS_REMOTE_READ |
			      IBV_ACCESS_REMOTE_ATOMIC;

static size_t page_size(void)
{
	return (size_t)sysconf(_SC_PAGESIZE);
}

static void check_pattern(const uint8_t *p, size_t len, uint32_t seed,
			  uint64_t from)
{
	int64_t at = ep_find_pattern_diff(p, len, seed, from);

	if (at >= 0)
		harness_fail(__FILE__, __LINE__, "seed %u: byte %lld differs",
			     seed, (long long)(from + (uint64_t)at));
}

static bool is_path(const char *env)
{
	const char *v = getenv(env);

	return v && !strcmp(v, env[8] == 'N' ? "1" : "0");
}

static void responder(int fd, void *arg)
{
	const struct kase *k = arg;
	size_t page = page_size();
	struct ep_opts o;
	struct target t;
	struct ibv_mr *mr;
	uint8_t *m;
	struct ep b;

	ep_default_opts(&o, IBV_QPT_RC);
	ep_open_remote(&b, &o, fd);
	m = mmap(NULL, 3 * page, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT(m != MAP_FAILED);
	ep_fill_pattern(m, 3 * page, 4, 0);
	mr = ibv_reg_mr(b.pd, m, 3 * page,
			all_access | (k->how == H_ODP ? IBV_ACCESS_ON_DEMAND :
							0));
	ASSERT_NOT_NULL(mr);
	if (k->how == H_MUNMAP || k->how == H_ODP)
		ASSERT_EQ(munmap(m + page, page), 0);
	else if (k->how == H_PROT_NONE)
		ASSERT_EQ(mprotect(m + page, page, PROT_NONE), 0);
	else if (k->how == H_READ_ONLY)
		ASSERT_EQ(mprotect(m + page, page, PROT_READ), 0);
	t.rkey = mr->rkey;
	t.addr = (uintptr_t)m;
	xwrite(fd, &t, sizeof(t));

	duo_expect(fd, 'r');
	if (k->fault) {
		/* a remote access error: the responder's QP to error */
		ep_wait_qp_state(b.qp, IBV_QPS_ERR);
	} else {
		ASSERT_EQ(ep_qp_state(b.qp), IBV_QPS_RTS);
	}
	check_pattern(m, page, 4, 0);
	check_pattern(m + 2 * page, page, 4, 2 * page);
	if (k->how == H_PROT_NONE)
		ASSERT_EQ(mprotect(m + page, page, PROT_READ), 0);
	if ((k->how == H_PROT_NONE || k->how == H_READ_ONLY) && k->fault)
		check_pattern(m + page, page, 4, page);	/* not written */
	ASSERT_EQ(ibv_dereg_mr(mr), 0);
	duo_signal(fd, 'c');
	ep_destroy(&b);
}

static void post_one(struct ep *a, enum ibv_wr_opcode op, void *laddr,
		     uint32_t lkey, uint64_t raddr, uint32_t rkey)
{
	bool atomic = op == IBV_WR_ATOMIC_FETCH_AND_ADD ||
		      op == IBV_WR_ATOMIC_CMP_AND_SWP;
	struct ibv_sge sge = {
		.addr = (uintptr_t)laddr,
		.length = atomic ? 8 : OFF,
		.lkey = lkey,
	};
	struct ibv_send_wr wr, *bad;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = 1;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = op;
	wr.send_flags = IBV_SEND_SIGNALED;
	if (atomic) {
		wr.wr.atomic.remote_addr = raddr;
		wr.wr.atomic.rkey = rkey;
		wr.wr.atomic.compare_add = 1;
		wr.wr.atomic.swap = 2;
	} else {
		wr.wr.rdma.remote_addr = raddr;
		wr.wr.rdma.rkey = rkey;
	}
	ASSERT_EQ(ibv_post_send(a->qp, &wr, &bad), 0);
}

/* The peer's op into the responder's page 1 (see the file's comment). */
static void run_remote(enum ibv_wr_opcode op, enum how how)
{
	bool mapped = !is_path("SOFTHCA_NET") && !is_path("SOFTHCA_MAP");
	struct kase k = { op, how, how == H_ODP || !mapped };
	size_t page = page_size();
	struct ep_opts o;
	struct target t;
	struct duo d;
	struct ep a;

	duo_fork(&d, responder, &k);
	ep_default_opts(&o, IBV_QPT_RC);
	ep_open_remote(&a, &o, d.fd);
	xread(d.fd, &t, sizeof(t));
	memset(a.buf, EP_SENTINEL, 2 * OFF);
	ep_fill_pattern(a.buf + 2 * OFF, OFF, 7, 0);
	post_one(&a, op, op == IBV_WR_RDMA_WRITE ? a.buf + 2 * OFF : a.buf,
		 a.mr->lkey, t.addr + page + OFF, t.rkey);
	ep_expect(a.scq, a.qp, 1,
		  k.fault ? IBV_WC_REM_ACCESS_ERR : IBV_WC_SUCCESS);
	if (k.fault) {
		/* nothing placed in our buffer */
		ASSERT_EQ(ep_find_non_sentinel(a.buf, 2 * OFF), -1);
	} else if (op == IBV_WR_RDMA_READ) {
		/* the MR's bytes, as the owner left them */
		check_pattern(a.buf, OFF, 4, page + OFF);
		ASSERT_EQ(ep_find_non_sentinel(a.buf + OFF, OFF), -1);
	}
	if (is_path("SOFTHCA_NET"))
		ASSERT_GT(ep_tcp_bytes(), 0);
	duo_signal(d.fd, 'r');
	duo_expect(d.fd, 'c');
	duo_wait(&d);
	ep_destroy(&a);
}

/* The requester's own page faults (CMA): LOC_PROT_ERR, the responder's
 * QP stays up. */
static void run_local(enum ibv_wr_opcode op)
{
	struct kase k = { op, H_NONE, false };
	size_t page = page_size();
	struct ibv_mr *mr;
	struct ep_opts o;
	struct target t;
	struct duo d;
	struct ep a;
	uint8_t *m;

	ASSERT_EQ(setenv("SOFTHCA_MAP", "0", 1), 0);
	duo_fork(&d, responder, &k);
	ep_default_opts(&o, IBV_QPT_RC);
	ep_open_remote(&a, &o, d.fd);
	xread(d.fd, &t, sizeof(t));
	m = mmap(NULL, 2 * page, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT(m != MAP_FAILED);
	memset(m, EP_SENTINEL, 2 * page);
	mr = ibv_reg_mr(a.pd, m, 2 * page, IBV_ACCESS_LOCAL_WRITE);
	ASSERT_NOT_NULL(mr);
	if (op == IBV_WR_RDMA_READ)
		ASSERT_EQ(mprotect(m + page, page, PROT_READ), 0);
	else
		ASSERT_EQ(munmap(m + page, page), 0);
	post_one(&a, op, m + page + OFF, mr->lkey, t.addr + page + OFF,
		 t.rkey);
	ep_expect(a.scq, a.qp, 1, IBV_WC_LOC_PROT_ERR);
	ASSERT_EQ(ep_find_non_sentinel(m, page), -1);
	if (op == IBV_WR_RDMA_READ)
		ASSERT_EQ(ep_find_non_sentinel(m + page, page), -1);
	duo_signal(d.fd, 'r');
	duo_expect(d.fd, 'c');
	duo_wait(&d);
	ASSERT_EQ(ibv_dereg_mr(mr), 0);
	ep_destroy(&a);
}

#define PATHS(name, op, how)						\
	TEST(name##_mapped) { run_remote(op, how); }			\
	TEST(name##_cma)						\
	{								\
		ASSERT_EQ(setenv("SOFTHCA_MAP", "0", 1), 0);		\
		run_remote(op, how);					\
	}								\
	TEST(name##_net)						\
	{								\
		ASSERT_EQ(setenv("SOFTHCA_NET", "1", 1), 0);		\
		run_remote(op, how);					\
	}

/* The net responder where the kernel has no PROCMAP_QUERY (before 6.11;
 * SOFTHCA_PROCMAP_QUERY=0 makes it so): MADV_POPULATE tells instead. */
#define NOQUERY(name, op, how)						\
	TEST(name##_net_noquery)					\
	{								\
		ASSERT_EQ(setenv("SOFTHCA_NET", "1", 1), 0);		\
		ASSERT_EQ(setenv("SOFTHCA_PROCMAP_QUERY", "0", 1), 0);	\
		run_remote(op, how);					\
	}

PATHS(read_munmap, IBV_WR_RDMA_READ, H_MUNMAP)
PATHS(read_prot_none, IBV_WR_RDMA_READ, H_PROT_NONE)
PATHS(read_odp, IBV_WR_RDMA_READ, H_ODP)
PATHS(write_munmap, IBV_WR_RDMA_WRITE, H_MUNMAP)
PATHS(write_prot_none, IBV_WR_RDMA_WRITE, H_PROT_NONE)
PATHS(write_odp, IBV_WR_RDMA_WRITE, H_ODP)
PATHS(fadd_munmap, IBV_WR_ATOMIC_FETCH_AND_ADD, H_MUNMAP)
PATHS(fadd_prot_none, IBV_WR_ATOMIC_FETCH_AND_ADD, H_PROT_NONE)
PATHS(fadd_odp, IBV_WR_ATOMIC_FETCH_AND_ADD, H_ODP)
PATHS(cas_prot_none, IBV_WR_ATOMIC_CMP_AND_SWP, H_PROT_NONE)
PATHS(write_read_only, IBV_WR_RDMA_WRITE, H_READ_ONLY)
PATHS(fadd_read_only, IBV_WR_ATOMIC_FETCH_AND_ADD, H_READ_ONLY)
NOQUERY(read_munmap, IBV_WR_RDMA_READ, H_MUNMAP)
NOQUERY(read_prot_none, IBV_WR_RDMA_READ, H_PROT_NONE)
NOQUERY(write_read_only, IBV_WR_RDMA_WRITE, H_READ_ONLY)
NOQUERY(fadd_prot_none, IBV_WR_ATOMIC_FETCH_AND_ADD, H_PROT_NONE)

TEST(local_read_readonly_cma) { run_local(IBV_WR_RDMA_READ); }
TEST(local_write_unmapped_cma) { run_local(IBV_WR_RDMA_WRITE); }
