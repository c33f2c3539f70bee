// SPDX-License-Identifier: MIT
/*
 * ibv_open_qp's control channel attacked (docs/xrc.md, "Opened QPs";
 * docs/security.md).  A creator process holds an XRC_RECV QP of a domain
 * shared through a file; this process, the attacker, connects to the
 * creator's peer socket as shca_peer_control_connect does (the socket
 * calls of src/shm/sock.c, the control request of src/shm/peer.c) and
 * writes records of its own making (a copy of xrc_qp.c's struct
 * xqp_req):
 *
 *   records        wrong magic, a truncated record, a record split over
 *                  two messages, one longer than a record (each ends the
 *                  connection: one record a SOCK_SEQPACKET message, the
 *                  decision docs/xrc.md states), an unknown op, MODIFY
 *                  and QUERY before OPEN, OPEN of an RC QP, of another
 *                  domain's XRC_RECV QP, with another domain's id, with
 *                  id 0, of a number beyond 24 bits or of another slot,
 *                  a second OPEN (each answered EINVAL)
 *   garbage_modify 3000 MODIFYs with random attributes and masks, each
 *                  followed by a QUERY: refused with the state unchanged,
 *                  or applied to a valid state
 *   flood          1050 opened connections from five processes: 1024
 *                  held, the rest closed; a legitimate opener is refused
 *                  meanwhile and opens again once the flood ends
 *   per_peer       one process holds at most 256 connections
 *   idle           connections that never send a record, or send only
 *                  refused ones, are closed by the creator (5 s after
 *                  they began); without that 1024 of them, from one
 *                  process, would refuse every legitimate opener
 *
 * After each attack the creator is alive, its own ibv_query_qp says the
 * state it had, and a third process opens the QP with ibv_open_qp,
 * queries and modifies it.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "ep.h"
#include "xrc_ep.h"
#include "common/slot.h"
#include "shm/sock.h"
#include "verbs/shca.h"

/* The wire of src/shm/peer.c and src/verbs/xrc_qp.c, as an attacker
 * writes it. */
#define CTRL_REQ_MAGIC	0x6c72744348434853ull
#define XQP_MAGIC	0x5051584148434853ull
#define MAX_SERVED	1024
#define MAX_PER_PEER	256

enum { OP_OPEN = 1, OP_MODIFY, OP_QUERY };

struct ctrl_req {
	uint64_t magic;
	uint32_t idx;
	uint32_t gen;
};

struct xreq {
	uint64_t magic;
	uint32_t op;
	uint32_t qpn;
	uint64_t xrcd;
	int32_t mask;
	uint32_t pad;
	struct ibv_qp_attr attr;
};

struct xans {
	int32_t ret;
	uint32_t pad;
	struct ibv_qp_attr attr;
};

/* What the creator tells the attacker. */
struct cinfo {
	uint32_t qpn;		/* its XRC_RECV QP, domain of the file */
	uint32_t rc_qpn;	/* an RC QP */
	uint32_t other_qpn;	/* an XRC_RECV QP of a private domain */
	uint32_t pad;
	uint64_t xid;		/* the file domain's id */
	uint64_t yid;		/* the private domain's */
};

struct victim {
	struct duo d;
	struct cinfo ci;
	char path[64];
};

/* ------------------------------------------------------------------ */
/* The creator                                                         */

static enum ibv_qp_state qp_state(struct ibv_qp *qp)
{
	struct ibv_qp_init_attr init;
	struct ibv_qp_attr a;

	ASSERT_EQ(ibv_query_qp(qp, &a, IBV_QP_STATE, &init), 0);
	return a.qp_state;
}

/* 'q': its own query of the QP's state, as one byte; 'e': the end. */
static void creator(int fd, void *arg)
{
	struct ibv_qp *qp, *other;
	struct ibv_xrcd *x, *y;
	struct ep_opts o;
	struct cinfo ci;
	struct ep e;
	char c, st;

	ep_default_opts(&o, IBV_QPT_RC);
	ep_create(&e, &o);
	x = xrc_domain_file(e.ctx, arg);
	y = xrc_domain_private(e.ctx);
	qp = xrc_qp_init(&e, IBV_QPT_XRC_RECV, x);
	other = xrc_qp_init(&e, IBV_QPT_XRC_RECV, y);
	memset(&ci, 0, sizeof(ci));
	ci.qpn = qp->qp_num;
	ci.rc_qpn = e.qp->qp_num;
	ci.other_qpn = other->qp_num;
	/* the ids an opener of each domain sends (a white-box read) */
	ci.xid = ((struct shca_xrcd *)x)->id;
	ci.yid = ((struct shca_xrcd *)y)->id;
	xwrite(fd, &ci, sizeof(ci));
	for (;;) {
		xread(fd, &c, 1);
		if (c == 'e')
			break;
		ASSERT_EQ(c, 'q');
		st = (char)qp_state(qp);
		xwrite(fd, &st, 1);
	}
	ASSERT_EQ(ibv_destroy_qp(other), 0);
	ASSERT_EQ(ibv_destroy_qp(qp), 0);
	ASSERT_EQ(ibv_close_xrcd(y), 0);
	ASSERT_EQ(ibv_close_xrcd(x), 0);
	ep_destroy(&e);
}

static void victim_start(struct victim *v)
{
	xrc_temp_file(v->path, sizeof(v->path));
	duo_fork(&v->d, creator, v->path);
	xread(v->d.fd, &v->ci, sizeof(v->ci));
}

static void victim_stop(struct victim *v)
{
	duo_signal(v->d.fd, 'e');
	duo_wait(&v->d);
	unlink(v->path);
}

/* ------------------------------------------------------------------ */
/* The legitimate opener, a third process                              */

struct legit_req {
	uint32_t qpn;
	int32_t state;		/* expected; -1: the open must fail */
};

static void legit(int fd, void *arg)
{
	struct legit_req lr;
	struct ibv_qp_attr a;
	struct ibv_xrcd *x;
	struct ibv_qp *qp = NULL;
	struct ep_opts o;
	struct ep e;
	int i;

	xread(fd, &lr, sizeof(lr));
	ep_default_opts(&o, IBV_QPT_RC);
	ep_create(&e, &o);
	x = xrc_domain_file(e.ctx, arg);
	if (lr.state < 0) {
		ASSERT_NULL_ERRNO(xrc_open(e.ctx, x, lr.qpn,
					   IBV_QPT_XRC_RECV), EINVAL);
		goto out;
	}
	/* the creator's threads of connections that just ended may not
	 * have counted them out yet: a bounded wait */
	for (i = 0; i < 100; i++) {
		qp = xrc_open(e.ctx, x, lr.qpn, IBV_QPT_XRC_RECV);
		if (qp)
			break;
		ASSERT_EQ(errno, EINVAL);
		usleep(100000);
	}
	ASSERT_NOT_NULL(qp);
	ASSERT_EQ(qp_state(qp), lr.state);
	if (lr.state == IBV_QPS_INIT) {
		/* INIT to INIT: a modify that keeps the state */
		memset(&a, 0, sizeof(a));
		a.qp_state = IBV_QPS_INIT;
		a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
		ASSERT_EQ(ibv_modify_qp(qp, &a, IBV_QP_STATE |
					IBV_QP_ACCESS_FLAGS), 0);
		ASSERT_EQ(qp_state(qp), IBV_QPS_INIT);
	}
	ASSERT_EQ(ibv_destroy_qp(qp), 0);
out:
	ASSERT_EQ(ibv_close_xrcd(x), 0);
	ep_destroy(&e);
	duo_signal(fd, 'k');
}

static void legit_run(struct victim *v, int state)
{
	struct legit_req lr = { v->ci.qpn, state };
	struct duo d;

	duo_fork(&d, legit, v->path);
	xwrite(d.fd, &lr, sizeof(lr));
	duo_expect(d.fd, 'k');
	duo_wait(&d);
}

/* After an attack: the creator lives, its own query says state, and a
 * third process opens, queries and modifies the QP. */
static void victim_check(struct victim *v, enum ibv_qp_state state)
{
	char st;

	ASSERT_EQ(waitpid(v->d.pid, NULL, WNOHANG), 0);
	duo_signal(v->d.fd, 'q');
	xread(v->d.fd, &st, 1);
	ASSERT_EQ(st, state);
	legit_run(v, state);
}

/* ------------------------------------------------------------------ */
/* The attacker's connection                                           */

/* A control connection to the process in slot, the way
 * shca_peer_control_connect makes one: fd, or -1 when refused. */
static int ctl_connect(int slot)
{
	struct ctrl_req req = { CTRL_REQ_MAGIC, 0, 0 };
	struct timeval tv = { 30, 0 };
	struct shca_hello h;
	int fd, fds[3];
	pid_t owner;

	fd = shca_sock_connect(slot, 10, &owner);
	ASSERT_GE(fd, 0);
	ASSERT_EQ(shca_sock_recv_hello(fd, &h, fds), 0);
	close(fds[0]);
	close(fds[1]);
	close(fds[2]);
	ASSERT_EQ(h.pid, owner);
	ASSERT_EQ(send(fd, &req, sizeof(req), MSG_NOSIGNAL), sizeof(req));
	/* a bounded wait for every answer (the creator's 5 s deadline
	 * is well inside it) */
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	return fd;
}

static int vconnect(const struct victim *v)
{
	return ctl_connect(shca_qpn_slot(v->ci.qpn));
}

/* Has the creator closed fd?  (EOF, or a reset; a bounded wait.) */
static bool closed_by_peer(int fd)
{
	char b[16];
	ssize_t n = recv(fd, b, sizeof(b), 0);

	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
		harness_fail(__FILE__, __LINE__, "the creator kept a "
			     "connection it had to close (30 s)");
	return n <= 0;
}

/* Send len bytes as one message; the answer into *a: true, or false
 * when the creator closed the connection instead. */
static bool xchg_raw(int fd, const void *p, size_t len, struct xans *a)
{
	ssize_t n;

	if (send(fd, p, len, MSG_NOSIGNAL) != (ssize_t)len) {
		ASSERT(errno == EPIPE || errno == ECONNRESET);
		return false;
	}
	n = recv(fd, a, sizeof(*a), 0);
	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
		harness_fail(__FILE__, __LINE__, "no answer in 30 s");
	if (n <= 0)
		return false;
	ASSERT_EQ(n, sizeof(*a));
	return true;
}

static bool xchg(int fd, uint32_t op, uint32_t qpn, uint64_t xrcd,
		 int mask, const struct ibv_qp_attr *attr, struct xans *a)
{
	struct xreq r;

	memset(&r, 0, sizeof(r));
	r.magic = XQP_MAGIC;
	r.op = op;
	r.qpn = qpn;
	r.xrcd = xrcd;
	r.mask = mask;
	if (attr)
		r.attr = *attr;
	return xchg_raw(fd, &r, sizeof(r), a);
}

/* A request that must be answered ret, the connection kept (the
 * caller's line in the failure). */
static void expect_ret_at(int line, int fd, uint32_t op, uint32_t qpn,
			  uint64_t xrcd, int ret)
{
	struct xans a;

	if (!xchg(fd, op, qpn, xrcd, IBV_QP_STATE, NULL, &a))
		harness_fail(__FILE__, line, "op %u qpn %#x: closed, "
			     "expected %d", op, qpn, ret);
	if (a.ret != ret)
		harness_fail(__FILE__, line, "op %u qpn %#x: %d, expected %d",
			     op, qpn, a.ret, ret);
}
#define expect_ret(...) expect_ret_at(__LINE__, __VA_ARGS__)

static enum ibv_qp_state raw_state(int fd)
{
	struct xans a;

	ASSERT(xchg(fd, OP_QUERY, 0, 0, IBV_QP_STATE, NULL, &a));
	ASSERT_EQ(a.ret, 0);
	return a.attr.qp_state;
}

/* ------------------------------------------------------------------ */

/* Bytes that are not one whole record end the connection. */
TEST(records)
{
	struct victim v;
	struct xreq r;
	struct xans a;
	char big[sizeof(r) + 8];
	int fd;

	victim_start(&v);
	memset(&r, 0, sizeof(r));
	r.magic = XQP_MAGIC;
	r.op = OP_OPEN;
	r.qpn = v.ci.qpn;
	r.xrcd = v.ci.xid;

	/* wrong magic */
	fd = vconnect(&v);
	r.magic = XQP_MAGIC ^ 1;
	ASSERT(!xchg_raw(fd, &r, sizeof(r), &a));
	r.magic = XQP_MAGIC;
	close(fd);
	/* a truncated record, then close */
	fd = vconnect(&v);
	ASSERT_EQ(send(fd, &r, 10, MSG_NOSIGNAL), 10);
	close(fd);
	victim_check(&v, IBV_QPS_INIT);

	/* a valid OPEN split over two messages: the first ends it */
	fd = vconnect(&v);
	ASSERT_EQ(send(fd, &r, 24, MSG_NOSIGNAL), 24);
	ASSERT(closed_by_peer(fd));
	ASSERT_EQ(send(fd, (char *)&r + 24, sizeof(r) - 24, MSG_NOSIGNAL),
		  -1);
	close(fd);
	/* one record and more in one message */
	fd = vconnect(&v);
	memset(big, 0, sizeof(big));
	memcpy(big, &r, sizeof(r));
	ASSERT(!xchg_raw(fd, big, sizeof(big), &a));
	close(fd);
	victim_check(&v, IBV_QPS_INIT);

	/* refused requests keep the connection; nothing is opened */
	fd = vconnect(&v);
	expect_ret(fd, 0, v.ci.qpn, v.ci.xid, -EINVAL);
	expect_ret(fd, 4, v.ci.qpn, v.ci.xid, -EINVAL);
	expect_ret(fd, 0xffffffffu, v.ci.qpn, v.ci.xid, -EINVAL);
	expect_ret(fd, OP_MODIFY, v.ci.qpn, v.ci.xid, -EINVAL);
	expect_ret(fd, OP_QUERY, v.ci.qpn, v.ci.xid, -EINVAL);
	expect_ret(fd, OP_OPEN, v.ci.rc_qpn, v.ci.xid, -EINVAL);
	expect_ret(fd, OP_OPEN, v.ci.other_qpn, v.ci.xid, -EINVAL);
	expect_ret(fd, OP_OPEN, v.ci.qpn, v.ci.yid, -EINVAL);
	expect_ret(fd, OP_OPEN, v.ci.qpn, 0, -EINVAL);
	expect_ret(fd, OP_OPEN, v.ci.qpn, ~v.ci.xid, -EINVAL);
	expect_ret(fd, OP_OPEN, v.ci.qpn | 0x1000000, v.ci.xid, -EINVAL);
	expect_ret(fd, OP_OPEN, v.ci.qpn ^ (1u << SHCA_QPN_INDEX_BITS),
		   v.ci.xid, -EINVAL);
	expect_ret(fd, OP_OPEN, 0, v.ci.xid, -EINVAL);
	expect_ret(fd, OP_OPEN, 0xffffffffu, v.ci.xid, -EINVAL);
	expect_ret(fd, OP_MODIFY, 0, 0, -EINVAL);
	/* the right one opens; a second OPEN on it does not */
	expect_ret(fd, OP_OPEN, v.ci.qpn, v.ci.xid, 0);
	expect_ret(fd, OP_OPEN, v.ci.qpn, v.ci.xid, -EINVAL);
	expect_ret(fd, OP_OPEN, v.ci.other_qpn, v.ci.yid, -EINVAL);
	ASSERT_EQ(raw_state(fd), IBV_QPS_INIT);
	victim_check(&v, IBV_QPS_INIT);
	close(fd);
	victim_check(&v, IBV_QPS_INIT);
	victim_stop(&v);
}

static uint64_t rnd_state = 0x9e3779b97f4a7c15ull;

static uint64_t rnd(void)
{
	rnd_state ^= rnd_state << 13;
	rnd_state ^= rnd_state >> 7;
	rnd_state ^= rnd_state << 17;
	return rnd_state;
}

/* Random attributes and masks: each MODIFY is refused and leaves the
 * state, or is applied and leaves a valid one; the creator's view is
 * the opener's. */
TEST(garbage_modify)
{
	struct ibv_qp_attr attr;
	enum ibv_qp_state before, after;
	struct victim v;
	struct xans a;
	/* the attributes each forward transition needs (ib_modify_qp_is_ok
	 * for an XRC target), and the next state: from RESET, INIT, RTR,
	 * RTS, SQD, SQE, ERR */
	static const int need[] = {
		IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
			IBV_QP_ACCESS_FLAGS,
		IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
			IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
			IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER,
		IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_SQ_PSN,
		IBV_QP_STATE, IBV_QP_STATE, IBV_QP_STATE, IBV_QP_STATE,
	};
	static const enum ibv_qp_state next[] = {
		IBV_QPS_INIT, IBV_QPS_RTR, IBV_QPS_RTS, IBV_QPS_SQD,
		IBV_QPS_RTS, IBV_QPS_RTS, IBV_QPS_RESET,
	};
	unsigned int i, k, applied = 0;
	int fd, mask;
	char st;

	victim_start(&v);
	fd = vconnect(&v);
	expect_ret(fd, OP_OPEN, v.ci.qpn, v.ci.xid, 0);
	before = raw_state(fd);
	for (i = 0; i < 3000; i++) {
		for (k = 0; k < sizeof(attr); k += 8) {
			uint64_t w = rnd();

			memcpy((char *)&attr + k, &w,
			       sizeof(attr) - k < 8 ? sizeof(attr) - k : 8);
		}
		mask = (int)rnd();
		switch (i % 5) {
		case 0:		/* every field random */
			break;
		case 1:		/* known bits only */
			mask &= (1 << 21) - 1;
			break;
		case 2:		/* known bits, a real state */
			mask = (mask & ((1 << 21) - 1)) | IBV_QP_STATE;
			attr.qp_state = (enum ibv_qp_state)(rnd() % 7);
			break;
		case 3:		/* the next state, fields near their range
				 * (forward, and round again from ERR) */
			mask = (int)(rnd() & ((1 << 21) - 1)) | IBV_QP_STATE;
			attr.qp_state = next[before];
			attr.port_num = (uint8_t)(rnd() % 3);
			attr.pkey_index = (uint16_t)(rnd() % 3);
			attr.path_mtu = (enum ibv_mtu)(rnd() % 7);
			attr.qp_access_flags = (unsigned int)(rnd() % 32);
			attr.ah_attr.port_num = (uint8_t)(rnd() % 3);
			attr.ah_attr.is_global = (uint8_t)(rnd() % 2);
			attr.ah_attr.grh.sgid_index = (uint8_t)(rnd() % 4);
			attr.max_dest_rd_atomic = (uint8_t)(rnd() % 32);
			attr.min_rnr_timer = (uint8_t)(rnd() % 40);
			attr.timeout = (uint8_t)(rnd() % 40);
			attr.sq_draining = 0;
			attr.alt_port_num = (uint8_t)(rnd() % 3);
			attr.alt_ah_attr.port_num = attr.alt_port_num;
			attr.alt_pkey_index = (uint16_t)(rnd() % 3);
			attr.path_mig_state = (enum ibv_mig_state)(rnd() % 4);
			if (rnd() % 4) {
				/* what the transition needs, and a few more */
				mask = need[before];
				if (rnd() % 2)
					mask |= (int)(rnd() & rnd() & rnd() &
						      ((1 << 21) - 1));
				attr.port_num = 1;
				attr.ah_attr.port_num = 1;
				attr.ah_attr.is_global = 1;
				attr.ah_attr.grh.sgid_index = 0;
				attr.ah_attr.grh.flow_label &= 0xfffff;
				attr.ah_attr.grh.dgid.raw[0] = 0xfe;
				attr.ah_attr.grh.dgid.raw[1] = 0x80;
				attr.ah_attr.sl &= 15;
				attr.ah_attr.static_rate = 0;
				attr.ah_attr.src_path_bits = 0;
				attr.path_mtu = IBV_MTU_1024;
				attr.max_dest_rd_atomic &= 15;
				attr.min_rnr_timer &= 31;
				attr.timeout &= 31;
				attr.qp_access_flags &= 15;
				attr.dest_qp_num &= 0xffffff;
			}
			break;
		default:	/* a few bits, a real state */
			mask = (int)(rnd() & rnd() & ((1 << 21) - 1)) |
			       IBV_QP_STATE;
			attr.qp_state = (enum ibv_qp_state)(rnd() % 7);
			attr.cur_qp_state = before;
			break;
		}
		ASSERT(xchg(fd, OP_MODIFY, 0, 0, mask, &attr, &a));
		ASSERT(a.ret <= 0 && a.ret > -4096);
		after = raw_state(fd);
		ASSERT(after <= IBV_QPS_ERR);
		if (a.ret)
			ASSERT_EQ(after, before);
		else
			applied++;
		before = after;
		if (i % 500 == 0) {
			duo_signal(v.d.fd, 'q');
			xread(v.d.fd, &st, 1);
			ASSERT_EQ(st, after);
		}
	}
	printf("garbage_modify: %u of 3000 applied, the QP ends in state "
	       "%d\n", applied, (int)before);
	/* back to INIT: RESET, then INIT with its required attributes */
	memset(&attr, 0, sizeof(attr));
	attr.qp_state = IBV_QPS_RESET;
	ASSERT(xchg(fd, OP_MODIFY, 0, 0, IBV_QP_STATE, &attr, &a));
	ASSERT_EQ(a.ret, 0);
	attr.qp_state = IBV_QPS_INIT;
	attr.port_num = 1;
	ASSERT(xchg(fd, OP_MODIFY, 0, 0, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
		    IBV_QP_PORT | IBV_QP_ACCESS_FLAGS, &attr, &a));
	ASSERT_EQ(a.ret, 0);
	victim_check(&v, IBV_QPS_INIT);
	close(fd);
	victim_check(&v, IBV_QPS_INIT);
	victim_stop(&v);
}

/* A flooder: n connections that each open the QP; how many were opened
 * and how many closed, then 'c' closes them all. */
struct flood_arg {
	const struct victim *v;
	unsigned int n;
};

static void flooder(int fd, void *arg)
{
	const struct flood_arg *f = arg;
	unsigned int i, got[2] = { 0, 0 };
	int *fds = calloc(f->n, sizeof(int));
	struct xans a;

	ASSERT_NOT_NULL(fds);
	for (i = 0; i < f->n; i++) {
		fds[i] = vconnect(f->v);
		if (xchg(fds[i], OP_OPEN, f->v->ci.qpn, f->v->ci.xid, 0,
			 NULL, &a)) {
			ASSERT_EQ(a.ret, 0);
			got[0]++;
		} else {
			got[1]++;
		}
	}
	xwrite(fd, got, sizeof(got));
	duo_expect(fd, 'c');
	for (i = 0; i < f->n; i++)
		close(fds[i]);
	free(fds);
}

/* More connections than the creator serves: the excess is closed, a
 * legitimate opener too while they hold, and opens once they are gone. */
TEST(flood)
{
	struct flood_arg f;
	struct duo d[5];
	struct victim v;
	unsigned int i, got[2], opened = 0, refused = 0;

	victim_start(&v);
	f.v = &v;
	f.n = 210;	/* 5 x 210 = 1050, each under the per-peer bound */
	for (i = 0; i < 5; i++)
		duo_fork(&d[i], flooder, &f);
	for (i = 0; i < 5; i++) {
		xread(d[i].fd, got, sizeof(got));
		opened += got[0];
		refused += got[1];
	}
	printf("flood: %u opened, %u closed\n", opened, refused);
	ASSERT_EQ(opened, MAX_SERVED);
	ASSERT_EQ(refused, 5 * f.n - MAX_SERVED);
	legit_run(&v, -1);
	for (i = 0; i < 5; i++) {
		duo_signal(d[i].fd, 'c');
		duo_wait(&d[i]);
	}
	victim_check(&v, IBV_QPS_INIT);
	victim_stop(&v);
}

/* One process holds at most MAX_PER_PEER of the connections. */
TEST(per_peer)
{
	struct flood_arg f = { NULL, MAX_PER_PEER + 44 };
	unsigned int got[2];
	struct victim v;
	struct duo d;

	victim_start(&v);
	f.v = &v;
	duo_fork(&d, flooder, &f);
	xread(d.fd, got, sizeof(got));
	printf("per_peer: %u opened, %u closed\n", got[0], got[1]);
	ASSERT_EQ(got[0], MAX_PER_PEER);
	ASSERT_EQ(got[1], 44);
	/* another process is not held back */
	victim_check(&v, IBV_QPS_INIT);
	duo_signal(d.fd, 'c');
	duo_wait(&d);
	victim_check(&v, IBV_QPS_INIT);
	victim_stop(&v);
}

/* Connections that never open a QP are closed by the creator: silent
 * ones, and one that keeps sending refused requests. */
TEST(idle)
{
	enum { N = 200 };
	struct victim v;
	struct xans a;
	int fds[N], fd, i;

	victim_start(&v);
	for (i = 0; i < N; i++)
		fds[i] = vconnect(&v);
	fd = vconnect(&v);
	/* meanwhile a legitimate opener is served */
	legit_run(&v, IBV_QPS_INIT);
	/* refused requests 0.1 s apart until the creator ends the
	 * connection: 100 of them take longer than its 5 s */
	for (i = 0; i < 100; i++) {
		if (!xchg(fd, OP_QUERY, 0, 0, IBV_QP_STATE, NULL, &a))
			break;
		ASSERT_EQ(a.ret, -EINVAL);
		usleep(100000);
	}
	ASSERT_LT(i, 100);
	printf("idle: the busy one closed after %d refused requests\n", i);
	close(fd);
	for (i = 0; i < N; i++) {
		ASSERT(closed_by_peer(fds[i]));
		close(fds[i]);
	}
	victim_check(&v, IBV_QPS_INIT);
	victim_stop(&v);
}
