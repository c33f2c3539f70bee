// SPDX-License-Identifier: MIT
#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <linux/tcp.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "harness.h"
#include "common.h"
#include "ep.h"

void xwrite(int fd, const void *p, size_t len)
{
	const char *c = p;

	while (len) {
		ssize_t n = write(fd, c, len);

		ASSERT(n > 0);
		c += n;
		len -= (size_t)n;
	}
}

void xread(int fd, void *p, size_t len)
{
	char *c = p;

	while (len) {
		ssize_t n = read(fd, c, len);

		ASSERT(n > 0);
		c += n;
		len -= (size_t)n;
	}
}

void ep_exchange(int fd, const struct ep_info *mine, struct ep_info *theirs)
{
	xwrite(fd, mine, sizeof(*mine));
	xread(fd, theirs, sizeof(*theirs));
}

/* ------------------------------------------------------------------ */
/* Two network namespaces (SHCA_TEST_NETNS_A, SHCA_TEST_NETNS_B)       */

#define NETNS_A "SHCA_TEST_NETNS_A"
#define NETNS_B "SHCA_TEST_NETNS_B"

static const char *netns_var(const char *name)
{
	const char *s = getenv(name);

	return s && *s ? s : NULL;
}

bool ep_netns(void)
{
	return netns_var(NETNS_A) || netns_var(NETNS_B);
}

/* The namespace this process entered ('A' or 'B'), 0 before; whether it
 * said which device it uses there. */
static char netns_side;
static bool netns_said;

/* Enter the namespace named by var (a /var/run/netns entry or a path). */
static void netns_enter(const char *var, char side)
{
	const char *name = netns_var(var);
	char path[PATH_MAX];
	int fd;

	if (!netns_var(NETNS_A) || !netns_var(NETNS_B))
		harness_fail(__FILE__, __LINE__,
			     "set both " NETNS_A " and " NETNS_B
			     " (or neither)");
	snprintf(path, sizeof(path), "%s%s",
		 strchr(name, '/') ? "" : "/var/run/netns/", name);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		harness_fail(__FILE__, __LINE__, "%s=%s: %s: %s", var, name,
			     path, strerror(errno));
	if (setns(fd, CLONE_NEWNET))
		harness_fail(__FILE__, __LINE__, "%s=%s: setns: %s", var, name,
			     strerror(errno));
	close(fd);
	netns_side = side;
	netns_said = false;
}

void ep_netns_child(void)
{
	if (ep_netns())
		netns_enter(NETNS_B, 'B');
}

void ep_skip_if_netns(void)
{
	if (ep_netns())
		SKIP("one process: both QPs would be in one namespace, and "
		     NETNS_A "/" NETNS_B " ask for two");
}

static bool gid_is_ipv4(const union ibv_gid *g)
{
	static const uint8_t prefix[12] = { [10] = 0xff, [11] = 0xff };

	return !memcmp(g->raw, prefix, sizeof(prefix));
}

/* An IPv6 address other than link-local (fe80::/10) */
static bool gid_is_ipv6(const union ibv_gid *g)
{
	static const uint8_t zero[16];

	return !gid_is_ipv4(g) && memcmp(g->raw, zero, 16) &&
	       !(g->raw[0] == 0xfe && (g->raw[1] & 0xc0) == 0x80);
}

/* SHCA_TEST_NETNS_GID=ipv6: the GIDs of IPv6 addresses, else IPv4's */
static bool netns_ipv6(void)
{
	const char *s = netns_var("SHCA_TEST_NETNS_GID");

	return s && !strcmp(s, "ipv6");
}

/* The GID of ctx's port 1 to use (netns_ipv6): its index, or -1. */
static int netns_gid_index(struct ibv_context *ctx, union ibv_gid *gid)
{
	struct ibv_port_attr pa;
	int i;

	ASSERT_EQ(ibv_query_port(ctx, 1, &pa), 0);
	for (i = 0; i < pa.gid_tbl_len; i++)
		if (!ibv_query_gid(ctx, 1, i, gid) &&
		    (netns_ipv6() ? gid_is_ipv6(gid) : gid_is_ipv4(gid)))
			return i;
	return -1;
}

/*
 * Open the device of this namespace's interface (SHCA_TEST_NETNS_DEV, or
 * the first device other than softhca_lo with an IPv4 address, or IPv6
 * with SHCA_TEST_NETNS_GID=ipv6); its GID index and the port's active MTU.
 * Says once per process what it took.
 */
static struct ibv_context *open_netns_dev(int *gid_index, enum ibv_mtu *mtu)
{
	const char *want = netns_var("SHCA_TEST_NETNS_DEV");
	struct ibv_device **list, **d;
	char names[512] = "";
	struct ibv_port_attr pa;
	struct ibv_context *ctx = NULL;
	union ibv_gid gid;
	int index = -1;

	list = ibv_get_device_list(NULL);
	ASSERT_NOT_NULL(list);
	for (d = list; *d; d++) {
		const char *name = ibv_get_device_name(*d);

		snprintf(names + strlen(names), sizeof(names) - strlen(names),
			 " %s", name);
		if (want ? strcmp(name, want) : !strcmp(name, "softhca_lo"))
			continue;
		ctx = ibv_open_device(*d);
		ASSERT_NOT_NULL(ctx);
		index = netns_gid_index(ctx, &gid);
		if (index >= 0)
			break;
		ASSERT_EQ(ibv_close_device(ctx), 0);
		ctx = NULL;
	}
	ibv_free_device_list(list);
	if (!ctx)
		harness_fail(__FILE__, __LINE__,
			     "namespace %c: no device %s with an IPv%c GID "
			     "(devices:%s)", netns_side,
			     want ? want : "other than softhca_lo",
			     netns_ipv6() ? '6' : '4', names);
	ASSERT_EQ(ibv_query_port(ctx, 1, &pa), 0);
	*gid_index = index;
	*mtu = pa.active_mtu < IBV_MTU_4096 ? pa.active_mtu : IBV_MTU_4096;
	if (!netns_said) {
		char a[INET6_ADDRSTRLEN];

		/* ::ffff:a.b.c.d for IPv4, as ibv_devinfo writes it */
		if (gid_is_ipv4(&gid))
			inet_ntop(AF_INET, gid.raw + 12, a, sizeof(a));
		else
			inet_ntop(AF_INET6, gid.raw, a, sizeof(a));
		printf("  namespace %c (pid %d): %s, GID[%d] %s%s, MTU %u\n",
		       netns_side, (int)getpid(),
		       ibv_get_device_name(ctx->device), index,
		       gid_is_ipv4(&gid) ? "::ffff:" : "", a, 128u << *mtu);
		fflush(stdout);
		netns_said = true;
	}
	return ctx;
}

uint32_t ep_mtu_bytes(const struct ep *e)
{
	return 128u << e->mtu;
}

void ep_default_opts(struct ep_opts *o, enum ibv_qp_type type)
{
	memset(o, 0, sizeof(*o));
	o->type = type;
	o->buf_size = 4 << 20;
	o->max_send_wr = 64;
	o->max_recv_wr = 64;
	o->max_sge = 4;
	o->max_inline = 256;
	o->cqe = 256;
	o->access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
		    IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
	o->min_rnr_timer = 1;
	o->rnr_retry = 7;
	o->timeout = 14;
	o->retry_cnt = 7;
}

void ep_create(struct ep *e, const struct ep_opts *o)
{
	struct ibv_qp_init_attr ia;
	struct ibv_qp_attr a;
	int mask;

	memset(e, 0, sizeof(*e));
	e->type = o->type;
	if (ep_netns()) {
		/* the side that did not fork enters A now */
		if (!netns_side)
			netns_enter(NETNS_A, 'A');
		e->ctx = open_netns_dev(&e->gid_index, &e->mtu);
	} else {
		e->ctx = open_lo();
		e->gid_index = 0;
		e->mtu = IBV_MTU_4096;
	}
	if (o->mtu)
		e->mtu = o->mtu;
	e->pd = ibv_alloc_pd(e->ctx);
	ASSERT_NOT_NULL(e->pd);
	if (o->pdom) {
		struct ibv_parent_domain_init_attr pa = *o->pdom;

		pa.pd = e->pd;
		e->base_pd = e->pd;
		e->pd = ibv_alloc_parent_domain(e->ctx, &pa);
		ASSERT_NOT_NULL(e->pd);
	}
	if (o->channel) {
		e->ch = ibv_create_comp_channel(e->ctx);
		ASSERT_NOT_NULL(e->ch);
	}
	if (o->wc_flags) {
		struct ibv_cq_init_attr_ex ca;

		memset(&ca, 0, sizeof(ca));
		ca.cqe = (uint32_t)o->cqe;
		ca.cq_context = o->cq_context;
		ca.channel = e->ch;
		ca.wc_flags = o->wc_flags;
		if (o->pdom) {
			ca.comp_mask = IBV_CQ_INIT_ATTR_MASK_PD;
			ca.parent_domain = e->pd;
		}
		e->scqx = ibv_create_cq_ex(e->ctx, &ca);
		ASSERT_NOT_NULL(e->scqx);
		e->rcqx = ibv_create_cq_ex(e->ctx, &ca);
		ASSERT_NOT_NULL(e->rcqx);
		e->scq = ibv_cq_ex_to_cq(e->scqx);
		e->rcq = ibv_cq_ex_to_cq(e->rcqx);
	} else {
		e->scq = ibv_create_cq(e->ctx, o->cqe, o->cq_context, e->ch,
				       0);
		ASSERT_NOT_NULL(e->scq);
		e->rcq = ibv_create_cq(e->ctx, o->cqe, o->cq_context, e->ch,
				       0);
		ASSERT_NOT_NULL(e->rcq);
	}
	e->size = o->buf_size;
	ASSERT_EQ(posix_memalign((void **)&e->buf, 4096, e->size), 0);
	memset(e->buf, 0, e->size);
	e->mr = ibv_reg_mr(e->pd, e->buf, e->size, o->access);
	ASSERT_NOT_NULL(e->mr);

	if (o->use_srq) {
		struct ibv_srq_init_attr sa;

		memset(&sa, 0, sizeof(sa));
		sa.attr.max_wr = (uint32_t)o->max_recv_wr;
		sa.attr.max_sge = (uint32_t)o->max_sge;
		e->srq = ibv_create_srq(e->pd, &sa);
		ASSERT_NOT_NULL(e->srq);
	}

	memset(&ia, 0, sizeof(ia));
	ia.send_cq = e->scq;
	ia.recv_cq = e->rcq;
	ia.srq = o->use_srq ? e->srq : o->srq;
	ia.qp_type = o->type;
	ia.cap.max_send_wr = (uint32_t)o->max_send_wr;
	ia.cap.max_recv_wr = (uint32_t)o->max_recv_wr;
	ia.cap.max_send_sge = (uint32_t)o->max_sge;
	ia.cap.max_recv_sge = (uint32_t)o->max_sge;
	ia.cap.max_inline_data = (uint32_t)o->max_inline;
	if (o->send_ops_flags) {
		struct ibv_qp_init_attr_ex ix;

		memset(&ix, 0, sizeof(ix));
		ix.send_cq = ia.send_cq;
		ix.recv_cq = ia.recv_cq;
		ix.srq = ia.srq;
		ix.qp_type = ia.qp_type;
		ix.cap = ia.cap;
		ix.comp_mask = IBV_QP_INIT_ATTR_PD |
			       IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
		ix.pd = e->pd;
		ix.send_ops_flags = o->send_ops_flags;
		e->qp = ibv_create_qp_ex(e->ctx, &ix);
		ASSERT_NOT_NULL(e->qp);
		e->qpx = ibv_qp_to_qp_ex(e->qp);
		ASSERT_NOT_NULL(e->qpx);
	} else {
		e->qp = ibv_create_qp(e->pd, &ia);
		ASSERT_NOT_NULL(e->qp);
	}

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.pkey_index = 0;
	a.port_num = 1;
	mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT;
	if (o->type == IBV_QPT_UD) {
		a.qkey = 0x11111111;
		mask |= IBV_QP_QKEY;
	} else {
		a.qp_access_flags = o->access & ~IBV_ACCESS_LOCAL_WRITE;
		if (o->type == IBV_QPT_UC)
			a.qp_access_flags &= IBV_ACCESS_REMOTE_WRITE;
		if (o->qp_access_set)
			a.qp_access_flags = o->qp_access;
		mask |= IBV_QP_ACCESS_FLAGS;
	}
	ASSERT_EQ(ibv_modify_qp(e->qp, &a, mask), 0);

	ASSERT_EQ(ibv_query_gid(e->ctx, 1, e->gid_index, &e->self.gid), 0);
	e->self.qpn = e->qp->qp_num;
	e->self.psn = (uint32_t)rand() & 0xffffff;
	e->self.rkey = e->mr->rkey;
	e->self.addr = (uintptr_t)e->buf;
}

void ep_to_rtr(struct ep *e, const struct ep_opts *o)
{
	struct ibv_qp_attr a;
	int mask;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	mask = IBV_QP_STATE;
	if (o->type != IBV_QPT_UD) {
		a.path_mtu = e->mtu;
		a.dest_qp_num = e->peer.qpn;
		a.rq_psn = e->peer.psn;
		a.ah_attr.is_global = 1;
		a.ah_attr.grh.dgid = e->peer.gid;
		a.ah_attr.grh.sgid_index = (uint8_t)e->gid_index;
		a.ah_attr.grh.hop_limit = 1;
		a.ah_attr.port_num = 1;
		mask |= IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
			IBV_QP_RQ_PSN;
		if (o->type == IBV_QPT_RC) {
			a.max_dest_rd_atomic = 16;
			a.min_rnr_timer = (uint8_t)o->min_rnr_timer;
			mask |= IBV_QP_MAX_DEST_RD_ATOMIC |
				IBV_QP_MIN_RNR_TIMER;
		}
	}
	ASSERT_EQ(ibv_modify_qp(e->qp, &a, mask), 0);

	if (o->type == IBV_QPT_UD) {
		struct ibv_ah_attr ah;

		memset(&ah, 0, sizeof(ah));
		ah.is_global = 1;
		ah.grh.dgid = e->peer.gid;
		ah.grh.sgid_index = (uint8_t)e->gid_index;
		ah.grh.hop_limit = 1;
		ah.port_num = 1;
		e->ah = ibv_create_ah(e->pd, &ah);
		ASSERT_NOT_NULL(e->ah);
	}
}

void ep_to_rts(struct ep *e, const struct ep_opts *o)
{
	struct ibv_qp_attr a;
	int mask;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = e->self.psn;
	mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
	if (o->type == IBV_QPT_RC) {
		a.timeout = (uint8_t)o->timeout;
		a.retry_cnt = (uint8_t)o->retry_cnt;
		a.rnr_retry = (uint8_t)o->rnr_retry;
		a.max_rd_atomic = 16;
		mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
			IBV_QP_MAX_QP_RD_ATOMIC;
	}
	ASSERT_EQ(ibv_modify_qp(e->qp, &a, mask), 0);
}

void ep_connect(struct ep *e, const struct ep_opts *o)
{
	ep_to_rtr(e, o);
	ep_to_rts(e, o);
}

void ep_destroy(struct ep *e)
{
	if (e->ah)
		ASSERT_EQ(ibv_destroy_ah(e->ah), 0);
	if (e->qp)
		ASSERT_EQ(ibv_destroy_qp(e->qp), 0);
	if (e->srq)
		ASSERT_EQ(ibv_destroy_srq(e->srq), 0);
	ASSERT_EQ(ibv_dereg_mr(e->mr), 0);
	if (e->scq)
		ASSERT_EQ(ibv_destroy_cq(e->scq), 0);
	if (e->rcq)
		ASSERT_EQ(ibv_destroy_cq(e->rcq), 0);
	if (e->ch)
		ASSERT_EQ(ibv_destroy_comp_channel(e->ch), 0);
	ASSERT_EQ(ibv_dealloc_pd(e->pd), 0);
	if (e->base_pd)
		ASSERT_EQ(ibv_dealloc_pd(e->base_pd), 0);
	ASSERT_EQ(ibv_close_device(e->ctx), 0);
	free(e->buf);
}

/* n completions from cq; the 10 s only end a hung test */
void ep_poll(struct ibv_cq *cq, struct ibv_wc *wc, int n)
{
	struct timespec t0, t;
	int got = 0;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (got < n) {
		int r = ibv_poll_cq(cq, n - got, wc + got);

		ASSERT_GE(r, 0);
		got += r;
		if (r)
			continue;
		clock_gettime(CLOCK_MONOTONIC, &t);
		if (t.tv_sec - t0.tv_sec > 10)
			harness_fail(__FILE__, __LINE__,
				     "%d of %d completions after 10 s", got,
				     n);
		usleep(10);
	}
}

struct ibv_wc ep_spin_one(struct ibv_cq *cq)
{
	struct timespec t0, t;
	struct ibv_wc wc;
	unsigned long n = 0;
	int r;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (!(r = ibv_poll_cq(cq, 1, &wc))) {
		if (++n % 4096)
			continue;
		clock_gettime(CLOCK_MONOTONIC, &t);
		if (t.tv_sec - t0.tv_sec > 10)
			harness_fail(__FILE__, __LINE__,
				     "no completion after 10 s");
	}
	ASSERT_EQ(r, 1);
	if (wc.status != IBV_WC_SUCCESS)
		harness_fail(__FILE__, __LINE__, "wr_id %llu: %s",
			     (unsigned long long)wc.wr_id,
			     ibv_wc_status_str(wc.status));
	return wc;
}

/* ------------------------------------------------------------------ */
/* Helpers of the error and event tests                                */

int ep_post(struct ep *e, uint64_t wr_id, enum ibv_wr_opcode op,
	    uint64_t off, uint32_t len, uint64_t remote_off,
	    unsigned int flags)
{
	return ep_post_key(e, wr_id, op, (uintptr_t)e->buf + off, e->mr->lkey,
			   len, remote_off, flags);
}

int ep_post_key(struct ep *e, uint64_t wr_id, enum ibv_wr_opcode op,
		uint64_t addr, uint32_t lkey, uint32_t len,
		uint64_t remote_off, unsigned int flags)
{
	struct ibv_send_wr wr, *bad;
	struct ibv_sge sge;

	memset(&wr, 0, sizeof(wr));
	sge.addr = addr;
	sge.length = len;
	sge.lkey = lkey;
	wr.wr_id = wr_id;
	wr.sg_list = &sge;
	wr.num_sge = len ? 1 : 0;
	wr.opcode = op;
	wr.send_flags = IBV_SEND_SIGNALED | flags;
	wr.imm_data = htonl((uint32_t)wr_id);
	switch (op) {
	case IBV_WR_RDMA_WRITE:
	case IBV_WR_RDMA_WRITE_WITH_IMM:
	case IBV_WR_RDMA_READ:
		wr.wr.rdma.remote_addr = e->peer.addr + remote_off;
		wr.wr.rdma.rkey = e->peer.rkey;
		break;
	case IBV_WR_ATOMIC_CMP_AND_SWP:
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
		wr.wr.atomic.remote_addr = e->peer.addr + remote_off;
		wr.wr.atomic.rkey = e->peer.rkey;
		wr.wr.atomic.compare_add = 1;
		break;
	default:
		break;
	}
	if (e->type == IBV_QPT_UD) {
		wr.wr.ud.ah = e->ah;
		wr.wr.ud.remote_qpn = e->peer.qpn;
		wr.wr.ud.remote_qkey = 0x11111111;
	}
	return ibv_post_send(e->qp, &wr, &bad);
}

int ep_post_recv(struct ep *e, uint64_t wr_id, uint64_t off, uint32_t len)
{
	struct ibv_recv_wr wr, *bad;
	struct ibv_sge sge;

	memset(&wr, 0, sizeof(wr));
	sge.addr = (uintptr_t)e->buf + off;
	sge.length = len;
	sge.lkey = e->mr->lkey;
	wr.wr_id = wr_id;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	if (e->srq)
		return ibv_post_srq_recv(e->srq, &wr, &bad);
	return ibv_post_recv(e->qp, &wr, &bad);
}

struct ibv_wc ep_expect(struct ibv_cq *cq, struct ibv_qp *qp, uint64_t wr_id,
			enum ibv_wc_status status)
{
	struct ibv_wc wc;

	ep_poll(cq, &wc, 1);
	if (wc.wr_id != wr_id || wc.status != status)
		harness_fail(__FILE__, __LINE__,
			     "completion wr_id 0x%" PRIx64 " status %s (%d), "
			     "expected wr_id 0x%" PRIx64 " status %s (%d)",
			     (uint64_t)wc.wr_id, ibv_wc_status_str(wc.status),
			     wc.status, wr_id, ibv_wc_status_str(status),
			     status);
	if (qp && wc.qp_num != qp->qp_num)
		harness_fail(__FILE__, __LINE__,
			     "completion of wr_id 0x%" PRIx64 ": qp_num 0x%x, "
			     "expected 0x%x", wr_id, wc.qp_num, qp->qp_num);
	return wc;
}

void ep_expect_empty(struct ibv_cq *cq)
{
	struct ibv_wc wc;
	int n = ibv_poll_cq(cq, 1, &wc);

	if (n)
		harness_fail(__FILE__, __LINE__,
			     "unexpected completion: wr_id 0x%" PRIx64
			     " status %s",
			     (uint64_t)wc.wr_id, ibv_wc_status_str(wc.status));
}

enum ibv_qp_state ep_qp_state(struct ibv_qp *qp)
{
	struct ibv_qp_init_attr init;
	struct ibv_qp_attr a;

	ASSERT_EQ(ibv_query_qp(qp, &a, IBV_QP_STATE, &init), 0);
	return a.qp_state;
}

static double elapsed_s(const struct timespec *t0)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)(t.tv_sec - t0->tv_sec) +
	       (double)(t.tv_nsec - t0->tv_nsec) / 1e9;
}

/*
 * Wait until qp is in state.  The 10 s only end a hung test (the state
 * never comes): no outcome depends on how long it took.
 */
void ep_wait_qp_state(struct ibv_qp *qp, enum ibv_qp_state state)
{
	struct timespec t0;
	enum ibv_qp_state s;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	while ((s = ep_qp_state(qp)) != state) {
		if (elapsed_s(&t0) > 10)
			harness_fail(__FILE__, __LINE__,
				     "QP 0x%06x in state %d after 10 s, "
				     "expected %d",
				     qp->qp_num, s, state);
		usleep(100);
	}
}

bool ep_readable(int fd, int ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	int n;

	do
		n = poll(&p, 1, ms);
	while (n < 0 && errno == EINTR);
	ASSERT_GE(n, 0);
	return n > 0;
}

void ep_wait_async(struct ibv_context *ctx, enum ibv_event_type type,
		   struct ibv_async_event *ev)
{
	if (!ep_readable(ctx->async_fd, 10000))
		harness_fail(__FILE__, __LINE__,
			     "no async event after 10 s, expected %s",
			     ibv_event_type_str(type));
	ASSERT_EQ(ibv_get_async_event(ctx, ev), 0);
	if (ev->event_type != type)
		harness_fail(__FILE__, __LINE__, "async event %s, expected %s",
			     ibv_event_type_str(ev->event_type),
			     ibv_event_type_str(type));
}

void ep_expect_no_async(struct ibv_context *ctx)
{
	struct ibv_async_event ev;

	if (!ep_readable(ctx->async_fd, 0))
		return;
	ASSERT_EQ(ibv_get_async_event(ctx, &ev), 0);
	harness_fail(__FILE__, __LINE__, "unexpected async event %s",
		     ibv_event_type_str(ev.event_type));
}

void duo_fork(struct duo *d, void (*fn)(int fd, void *arg), void *arg)
{
	int sv[2];

	ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	fflush(stdout);
	fflush(stderr);
	d->pid = fork();
	ASSERT_GE(d->pid, 0);
	if (d->pid == 0) {
		close(sv[0]);
		ep_netns_child();
		fn(sv[1], arg);
		fflush(stdout);
		_exit(0);
	}
	close(sv[1]);
	d->fd = sv[0];
}

void duo_wait(struct duo *d)
{
	int status;

	ASSERT_EQ(waitpid(d->pid, &status, 0), d->pid);
	if (!WIFEXITED(status) || WEXITSTATUS(status))
		harness_fail(__FILE__, __LINE__, "the other process failed "
			     "(status 0x%x)", status);
	close(d->fd);
}

void duo_stop(const struct duo *d)
{
	int st;

	ASSERT_EQ(kill(d->pid, SIGSTOP), 0);
	ASSERT_EQ(waitpid(d->pid, &st, WUNTRACED), d->pid);
	ASSERT(WIFSTOPPED(st));
}

void duo_signal(int fd, char c)
{
	xwrite(fd, &c, 1);
}

void duo_expect(int fd, char c)
{
	char got;

	if (read(fd, &got, 1) != 1)
		harness_fail(__FILE__, __LINE__,
			     "the other process is gone (waiting for '%c')",
			     c);
	if (got != c)
		harness_fail(__FILE__, __LINE__, "got step '%c', expected '%c'",
			     got, c);
}

void ep_pair(struct ep *a, const struct ep_opts *oa, struct ep *b,
	     const struct ep_opts *ob)
{
	ep_skip_if_netns();
	ep_create(a, oa);
	ep_create(b, ob);
	a->peer = b->self;
	b->peer = a->self;
	ep_connect(a, oa);
	ep_connect(b, ob);
}

void ep_open_remote(struct ep *e, const struct ep_opts *o, int fd)
{
	ep_create(e, o);
	ep_exchange(fd, &e->self, &e->peer);
	ep_connect(e, o);
}

/* ------------------------------------------------------------------ */
/* Data checks                                                         */

/* A 32-bit mix of (seed, i) (an avalanche of multiplies and shifts), so
 * that neighbouring offsets and messages differ. */
uint8_t ep_pattern(uint32_t seed, uint64_t i)
{
	uint32_t x = seed * 0x9e3779b1u ^ (uint32_t)i * 0x85ebca77u ^
		     (uint32_t)(i >> 32) * 0xc2b2ae3du;
	uint32_t v;

	x ^= x >> 15;
	x *= 0x2c1b3c6du;
	x ^= x >> 12;
	x *= 0x297a2d39u;
	x ^= x >> 15;
	/* 1..254, then past the sentinel: 1..255 without EP_SENTINEL */
	v = 1 + x % 254;
	if (v >= EP_SENTINEL)
		v++;
	return (uint8_t)v;
}

void ep_fill_pattern(uint8_t *p, uint64_t len, uint32_t seed, uint64_t from)
{
	uint64_t k;

	for (k = 0; k < len; k++)
		p[k] = ep_pattern(seed, from + k);
}

int64_t ep_find_pattern_diff(const uint8_t *p, uint64_t len, uint32_t seed,
			     uint64_t from)
{
	uint64_t k;

	for (k = 0; k < len; k++)
		if (p[k] != ep_pattern(seed, from + k))
			return (int64_t)k;
	return -1;
}

int64_t ep_find_non_sentinel(const uint8_t *p, uint64_t len)
{
	static uint8_t s[4096];
	uint64_t k = 0, n, j;

	if (!s[0])
		memset(s, EP_SENTINEL, sizeof(s));
	while (k < len) {
		n = len - k < sizeof(s) ? len - k : sizeof(s);
		if (memcmp(p + k, s, n))
			for (j = 0; j < n; j++)
				if (p[k + j] != EP_SENTINEL)
					return (int64_t)(k + j);
		k += n;
	}
	return -1;
}

int64_t ep_find_diff(const uint8_t *a, const uint8_t *b, uint64_t len)
{
	uint64_t k = 0, n, j;

	while (k < len) {
		n = len - k < 65536 ? len - k : 65536;
		if (memcmp(a + k, b + k, n))
			for (j = 0; j < n; j++)
				if (a[k + j] != b[k + j])
					return (int64_t)(k + j);
		k += n;
	}
	return -1;
}

/* ------------------------------------------------------------------ */
/* Net-path evidence                                                   */

/*
 * The test reads softhca's sockets from outside, as `ss` would, while the
 * engine thread may close one: under ThreadSanitizer that is a race on
 * the descriptor (fstat against close), which is the observer's, not
 * softhca's; TSan is told to look away for the scan.
 */
#if defined(__SANITIZE_THREAD__)
void __tsan_ignore_thread_begin(void);
void __tsan_ignore_thread_end(void);
#define OBSERVER_BEGIN() __tsan_ignore_thread_begin()
#define OBSERVER_END() __tsan_ignore_thread_end()
#else
#define OBSERVER_BEGIN() do { } while (0)
#define OBSERVER_END() do { } while (0)
#endif

uint64_t ep_tcp_bytes(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *de;
	uint64_t sum = 0;

	ASSERT_NOT_NULL(d);
	OBSERVER_BEGIN();
	while ((de = readdir(d))) {
		struct tcp_info ti;
		socklen_t len = sizeof(ti);
		struct stat st;
		int fd = atoi(de->d_name);

		if (de->d_name[0] == '.' || fd == dirfd(d) ||
		    fstat(fd, &st) || !S_ISSOCK(st.st_mode))
			continue;
		memset(&ti, 0, sizeof(ti));
		/* fails on anything but a TCP socket */
		if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) ||
		    len < offsetof(struct tcp_info, tcpi_bytes_received) +
				  sizeof(ti.tcpi_bytes_received))
			continue;
		sum += ti.tcpi_bytes_acked + ti.tcpi_bytes_received;
	}
	OBSERVER_END();
	closedir(d);
	return sum;
}

void ep_net_check(void)
{
	const char *net = getenv("SOFTHCA_NET");
	uint64_t tcp;

	if (!net || strcmp(net, "1"))
		return;
	tcp = ep_tcp_bytes();
	printf("  net path: %llu bytes through TCP\n",
	       (unsigned long long)tcp);
	ASSERT_GT(tcp, 0);
}

uint64_t ep_pcap_records(const char *path)
{
	uint8_t hdr[16];
	uint64_t n = 0;
	uint32_t incl;
	FILE *f = fopen(path, "rb");

	if (!f)
		return 0;
	/* the file header, then records: 16 bytes (incl_len at 8, in the
	 * writer's byte order: this host's) and incl_len bytes */
	if (fread(hdr, 1, 8, f) == 8 && fseek(f, 24, SEEK_SET) == 0)
		while (fread(hdr, 1, 16, f) == 16) {
			memcpy(&incl, hdr + 8, 4);
			if (fseek(f, incl, SEEK_CUR))
				break;
			n++;
		}
	fclose(f);
	return n;
}

void ep_victim(int fd, void *arg)
{
	struct ep_opts o;
	struct ep b;

	(void)arg;
	ep_default_opts(&o, IBV_QPT_RC);
	ep_open_remote(&b, &o, fd);
	duo_signal(fd, 'u');
	for (;;)
		pause();
}

/* The counter name on the line of `softhca stat --pid pid --all` that
 * holds want (the process's line, or one QP's). */
static long long stat_line_counter(const char *tool, pid_t pid,
				   const char *want, const char *name)
{
	char cmd[512], key[64], *out = NULL;
	const char *line, *end, *p;
	long long v;

	snprintf(cmd, sizeof(cmd), "%s stat --pid %d --all 2>/dev/null",
		 tool, (int)pid);
	ASSERT_EQ(harness_run(cmd, &out), 0);
	snprintf(key, sizeof(key), " %s ", name);
	line = strstr(out, want);
	if (!line)
		harness_fail(__FILE__, __LINE__, "no '%s' in:\n%s", want, out);
	end = strchr(line, '\n');
	p = strstr(line, key);
	if (!p || (end && p > end))
		harness_fail(__FILE__, __LINE__, "no %s in:\n%s", name, out);
	v = strtoll(p + strlen(key), NULL, 10);
	free(out);
	return v;
}

long long ep_stat_counter(const char *tool, pid_t pid, const char *name)
{
	char want[64];

	snprintf(want, sizeof(want), "pid %d slot ", (int)pid);
	return stat_line_counter(tool, pid, want, name);
}

long long ep_stat_qp_counter(const char *tool, pid_t pid, uint32_t qpn,
			     const char *name)
{
	char want[64];

	snprintf(want, sizeof(want), " qp 0x%06x ", qpn);
	return stat_line_counter(tool, pid, want, name);
}

void ep_post_atomic(struct ep *e, uint64_t wr_id, enum ibv_wr_opcode op,
		    uint64_t off, uint64_t remote_off, uint64_t cmp_add,
		    uint64_t swap)
{
	struct ibv_send_wr wr, *bad;
	struct ibv_sge sge;

	memset(&wr, 0, sizeof(wr));
	sge.addr = (uintptr_t)e->buf + off;
	sge.length = 8;
	sge.lkey = e->mr->lkey;
	wr.wr_id = wr_id;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = op;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.wr.atomic.remote_addr = e->peer.addr + remote_off;
	wr.wr.atomic.rkey = e->peer.rkey;
	wr.wr.atomic.compare_add = cmp_add;
	wr.wr.atomic.swap = swap;
	ASSERT_EQ(ibv_post_send(e->qp, &wr, &bad), 0);
}
