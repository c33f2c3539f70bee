// SPDX-License-Identifier: MIT
/*
 * The limits ibv_query_device reports can be reached: a process creates
 * max_cq CQs, max_srq SRQs and max_mr MRs, and the next one of each
 * fails with ENOMEM, as a device out of its resources does.  Issue 12:
 * max_cq and max_srq of 65535 met vm.max_map_count at about 50,000 (one
 * mapping per object; since issue 11 they share the arena's heap), and
 * max_mr took six minutes to reach at 2,700 registrations a second
 * (src/verbs/mr_range.c).  The CQs then all go, and one more can be
 * created again.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "common.h"

struct limits {
	struct ibv_context *ctx;
	struct ibv_device_attr attr;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
};

static void open_limits(struct limits *l)
{
	l->ctx = open_lo();
	ASSERT_EQ(ibv_query_device(l->ctx, &l->attr), 0);
	l->pd = ibv_alloc_pd(l->ctx);
	ASSERT_NOT_NULL(l->pd);
}

static void close_limits(struct limits *l)
{
	ASSERT_EQ(ibv_dealloc_pd(l->pd), 0);
	ASSERT_EQ(ibv_close_device(l->ctx), 0);
}

TEST(max_cq_reachable)
{
	struct ibv_cq **cq;
	struct limits l;
	int i, n;

	open_limits(&l);
	n = l.attr.max_cq;
	ASSERT_GE(n, 1);
	cq = calloc((size_t)n, sizeof(*cq));
	ASSERT_NOT_NULL(cq);
	for (i = 0; i < n; i++) {
		cq[i] = ibv_create_cq(l.ctx, 1, NULL, NULL, 0);
		if (!cq[i])
			harness_fail(__FILE__, __LINE__,
				     "CQ %d of max_cq %d: %s", i, n,
				     strerror(errno));
	}
	ASSERT_NULL_ERRNO(ibv_create_cq(l.ctx, 1, NULL, NULL, 0), ENOMEM);
	for (i = 0; i < n; i++)
		ASSERT_EQ(ibv_destroy_cq(cq[i]), 0);
	cq[0] = ibv_create_cq(l.ctx, 1, NULL, NULL, 0);
	ASSERT_NOT_NULL(cq[0]);
	ASSERT_EQ(ibv_destroy_cq(cq[0]), 0);
	free(cq);
	close_limits(&l);
}

TEST(max_srq_reachable)
{
	struct ibv_srq_init_attr sa;
	struct ibv_srq **srq;
	struct limits l;
	int i, n;

	open_limits(&l);
	n = l.attr.max_srq;
	ASSERT_GE(n, 1);
	srq = calloc((size_t)n, sizeof(*srq));
	ASSERT_NOT_NULL(srq);
	memset(&sa, 0, sizeof(sa));
	sa.attr.max_wr = 1;
	sa.attr.max_sge = 1;
	for (i = 0; i < n; i++) {
		srq[i] = ibv_create_srq(l.pd, &sa);
		if (!srq[i])
			harness_fail(__FILE__, __LINE__,
				     "SRQ %d of max_srq %d: %s", i, n,
				     strerror(errno));
	}
	ASSERT_NULL_ERRNO(ibv_create_srq(l.pd, &sa), ENOMEM);
	for (i = 0; i < n; i++)
		ASSERT_EQ(ibv_destroy_srq(srq[i]), 0);
	free(srq);
	close_limits(&l);
}

TEST(max_mr_reachable)
{
	struct ibv_mr **mr;
	struct limits l;
	char *buf;
	int i, n;

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
	SKIP("a million registrations take minutes under a sanitizer: the "
	     "plain build runs this case");
#endif
	open_limits(&l);
	n = l.attr.max_mr;
	ASSERT_GE(n, 1);
	mr = calloc((size_t)n, sizeof(*mr));
	buf = malloc(4096);
	ASSERT_NOT_NULL(mr);
	ASSERT_NOT_NULL(buf);
	for (i = 0; i < n; i++) {
		mr[i] = ibv_reg_mr(l.pd, buf, 4096, IBV_ACCESS_LOCAL_WRITE);
		if (!mr[i])
			harness_fail(__FILE__, __LINE__,
				     "MR %d of max_mr %d: %s", i, n,
				     strerror(errno));
	}
	ASSERT_NULL_ERRNO(ibv_reg_mr(l.pd, buf, 4096, IBV_ACCESS_LOCAL_WRITE),
			  ENOMEM);
	for (i = 0; i < n; i++)
		ASSERT_EQ(ibv_dereg_mr(mr[i]), 0);
	free(mr);
	free(buf);
	close_limits(&l);
}
