// SPDX-License-Identifier: MIT
/*
 * One XRC domain shared by three processes through one file (docs/xrc.md,
 * "Opened QPs" and "SRQs of other processes"): the creator makes the
 * XRC_RECV QP, the SRQ owner makes the XRC SRQ (its PD, CQ and memory),
 * the sender opens the QP (ibv_open_qp), moves it to RTR itself, and
 * sends through its XRC_SEND QP into the other process's SRQ: SENDs and
 * WRITE with immediate land in the SRQ owner's memory and complete on its
 * CQ with the XRC_RECV QP's number; RDMA WRITE, atomics and READ go
 * through the SRQ's PD.  Then the QP's life: the creator's
 * destroy leaves it to the opener (traffic still flows, the creator may
 * close its domain), the opener's destroy ends it (it can no longer be
 * opened); and the creator's exit ends it for an opener (EIO).  Also
 * ibv_open_qp's errnos.  traffic_test_xrc_shared_net runs it again with
 * SOFTHCA_NET=1: the XRCETH over TCP to the creator, whose receive side
 * finds the SRQ in its sibling process (and reads a READ's responses
 * from there).
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "ep.h"
#include "xrc_ep.h"

#define BUF	(64 << 10)
#define MSG	(3 * 1024 + 100)	/* several packets at any path MTU */

struct srq_info {
	uint32_t srqn;
	uint32_t rkey;
	uint64_t addr;
};

static void post(struct ibv_qp *qp, struct ep *e, uint64_t wr_id,
		 enum ibv_wr_opcode op, uint64_t off, uint32_t len,
		 uint32_t srqn, uint64_t raddr, uint32_t rkey)
{
	struct ibv_sge sge = { (uintptr_t)(e->buf + off), len, e->mr->lkey };
	struct ibv_send_wr wr, *bad;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = wr_id;
	wr.opcode = op;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.imm_data = htonl(0x700u);
	wr.qp_type.xrc.remote_srqn = srqn;
	if (op == IBV_WR_ATOMIC_FETCH_AND_ADD) {
		wr.wr.atomic.remote_addr = raddr;
		wr.wr.atomic.rkey = rkey;
		wr.wr.atomic.compare_add = 5;
	} else {
		wr.wr.rdma.remote_addr = raddr;
		wr.wr.rdma.rkey = rkey;
	}
	ASSERT_EQ(ibv_post_send(qp, &wr, &bad), 0);
}

static enum ibv_qp_state query_state(struct ibv_qp *qp)
{
	struct ibv_qp_init_attr init;
	struct ibv_qp_attr a;

	ASSERT_EQ(ibv_query_qp(qp, &a, IBV_QP_STATE, &init), 0);
	ASSERT_EQ(init.qp_type, IBV_QPT_XRC_RECV);
	return a.qp_state;
}

/* ------------------------------------------------------------------ */
/* The creator: the XRC_RECV QP, and its destroy while it is opened    */

static void creator(int fd, void *arg)
{
	struct ibv_qp *qp;
	struct ibv_xrcd *x;
	struct ep_opts o;
	struct ep e;
	uint32_t qpn;

	ep_default_opts(&o, IBV_QPT_RC);
	ep_create(&e, &o);
	x = xrc_domain_file(e.ctx, arg);
	qp = xrc_qp_init(&e, IBV_QPT_XRC_RECV, x);
	qpn = qp->qp_num;
	xwrite(fd, &qpn, sizeof(qpn));
	/* the opener moved it to RTR: this handle sees it too */
	duo_expect(fd, 'x');
	ASSERT_EQ(query_state(qp), IBV_QPS_RTR);
	/* only this handle goes: the opener keeps the QP (and this
	 * process's domain is free to close) */
	ASSERT_EQ(ibv_destroy_qp(qp), 0);
	ASSERT_EQ(ibv_destroy_qp(qp), ENOENT);
	ASSERT_EQ(ibv_close_xrcd(x), 0);
	duo_signal(fd, 'o');
	duo_expect(fd, 'q');
	ep_destroy(&e);
}

/* A creator that exits while its QP is opened. */
static void creator_exits(int fd, void *arg)
{
	struct ibv_qp *qp;
	struct ibv_xrcd *x;
	struct ep_opts o;
	struct ep e;
	uint32_t qpn;

	ep_default_opts(&o, IBV_QPT_RC);
	ep_create(&e, &o);
	x = xrc_domain_file(e.ctx, arg);
	qp = xrc_qp_init(&e, IBV_QPT_XRC_RECV, x);
	qpn = qp->qp_num;
	xwrite(fd, &qpn, sizeof(qpn));
	duo_expect(fd, 'x');
	/* exit with the QP, domain and context open */
}

/* ------------------------------------------------------------------ */
/* The SRQ owner: its receives, memory and completions                 */

static void srq_owner(int fd, void *arg)
{
	struct srq_info in;
	struct ibv_srq *s;
	struct ibv_xrcd *x;
	struct ep_opts o;
	struct ep e;
	struct ibv_wc wc;
	uint32_t qpn;
	int k;

	ep_default_opts(&o, IBV_QPT_RC);
	o.buf_size = BUF;
	ep_create(&e, &o);
	x = xrc_domain_file(e.ctx, arg);
	s = xrc_srq(&e, x, e.rcq, 32);
	memset(e.buf, EP_SENTINEL, BUF);
	ep_fill_pattern(e.buf + 40960, MSG, 4, 0);	/* the READ's */
	memset(e.buf + 49152, 0, 8);			/* the atomic's */
	xrc_srq_post(&e, s, 1, 0, 4096);
	xrc_srq_post(&e, s, 2, 0, 0);
	xrc_srq_post(&e, s, 3, 4096, 4096);
	memset(&in, 0, sizeof(in));
	ASSERT_EQ(ibv_get_srq_num(s, &in.srqn), 0);
	in.rkey = e.mr->rkey;
	in.addr = (uintptr_t)e.buf;
	xwrite(fd, &in, sizeof(in));
	xread(fd, &qpn, sizeof(qpn));

	/* the SEND and the WRITE with immediate, in this process's SRQ,
	 * memory and CQ, from the other process's XRC_RECV QP */
	wc = ep_expect(e.rcq, NULL, 1, IBV_WC_SUCCESS);
	ASSERT_EQ(wc.opcode, IBV_WC_RECV);
	ASSERT_EQ(wc.byte_len, MSG);
	ASSERT_EQ(wc.qp_num, qpn);
	ASSERT_EQ(ep_find_pattern_diff(e.buf, MSG, 1, 0), -1);
	wc = ep_expect(e.rcq, NULL, 2, IBV_WC_SUCCESS);
	ASSERT_EQ(wc.opcode, IBV_WC_RECV_RDMA_WITH_IMM);
	ASSERT_EQ(wc.qp_num, qpn);
	ASSERT_EQ(ntohl(wc.imm_data), 0x700u);
	ASSERT_EQ(ep_find_pattern_diff(e.buf + 8192, MSG, 2, 0), -1);
	duo_expect(fd, 'w');
	/* the RDMA WRITE and the atomic, through this SRQ's PD */
	ASSERT_EQ(ep_find_pattern_diff(e.buf + 16384, MSG, 3, 0), -1);
	ASSERT_EQ(*(uint64_t *)(e.buf + 49152), 5u);
	/* after the creator's destroy: the opener's QP still delivers */
	wc = ep_expect(e.rcq, NULL, 3, IBV_WC_SUCCESS);
	ASSERT_EQ(wc.opcode, IBV_WC_RECV);
	ASSERT_EQ(wc.qp_num, qpn);
	ASSERT_EQ(ep_find_pattern_diff(e.buf + 4096, 64, 6, 0), -1);
	for (k = 0; k < 8; k++)
		ASSERT_EQ(e.buf[4096 + 64 + k], EP_SENTINEL);
	duo_expect(fd, 'q');
	ASSERT_EQ(ibv_destroy_srq(s), 0);
	ASSERT_EQ(ibv_close_xrcd(x), 0);
	ep_destroy(&e);
}

/* ------------------------------------------------------------------ */

TEST(xrc_three_processes)
{
	struct duo qd, sd;
	struct srq_info si;
	struct ibv_qp *sq, *oqp;
	struct ibv_xrcd *x;
	struct ep_opts o;
	struct ep e;
	uint32_t qpn;
	char path[64];
	int tries;

	xrc_temp_file(path, sizeof(path));
	duo_fork(&qd, creator, path);
	duo_fork(&sd, srq_owner, path);
	ep_default_opts(&o, IBV_QPT_RC);
	o.buf_size = BUF;
	ep_create(&e, &o);
	x = xrc_domain_file(e.ctx, path);
	xread(qd.fd, &qpn, sizeof(qpn));
	xread(sd.fd, &si, sizeof(si));
	xwrite(sd.fd, &qpn, sizeof(qpn));

	/* open the creator's QP: its number, type and no queues */
	oqp = xrc_open(e.ctx, x, qpn, IBV_QPT_XRC_RECV);
	ASSERT_NOT_NULL(oqp);
	ASSERT_EQ(oqp->qp_num, qpn);
	ASSERT_EQ(oqp->qp_type, IBV_QPT_XRC_RECV);
	ASSERT_NULL(oqp->pd);
	ASSERT_NULL(oqp->srq);
	ASSERT_EQ(query_state(oqp), IBV_QPS_INIT);
	/* the domain is held by the opened QP */
	ASSERT_EQ(ibv_close_xrcd(x), EBUSY);

	/* the opener moves it to RTR toward its own XRC_SEND QP */
	sq = xrc_qp_init(&e, IBV_QPT_XRC_SEND, NULL);
	xrc_connect(&e, oqp, sq->qp_num, &e.self.gid, NULL);
	ASSERT_EQ(query_state(oqp), IBV_QPS_RTR);
	duo_signal(qd.fd, 'x');
	xrc_connect(&e, sq, qpn, &e.self.gid, NULL);

	ep_fill_pattern(e.buf, MSG, 1, 0);
	post(sq, &e, 1, IBV_WR_SEND, 0, MSG, si.srqn, 0, 0);
	ep_expect(e.scq, sq, 1, IBV_WC_SUCCESS);
	ep_fill_pattern(e.buf + 4096, MSG, 2, 0);
	post(sq, &e, 2, IBV_WR_RDMA_WRITE_WITH_IMM, 4096, MSG, si.srqn,
	     si.addr + 8192, si.rkey);
	ep_expect(e.scq, sq, 2, IBV_WC_SUCCESS);
	ep_fill_pattern(e.buf + 8192, MSG, 3, 0);
	post(sq, &e, 3, IBV_WR_RDMA_WRITE, 8192, MSG, si.srqn,
	     si.addr + 16384, si.rkey);
	ep_expect(e.scq, sq, 3, IBV_WC_SUCCESS);
	post(sq, &e, 4, IBV_WR_ATOMIC_FETCH_AND_ADD, 16384, 8, si.srqn,
	     si.addr + 49152, si.rkey);
	ep_expect(e.scq, sq, 4, IBV_WC_SUCCESS);
	ASSERT_EQ(*(uint64_t *)(e.buf + 16384), 0u);
	/* a READ of several packets (the net path: its responses read
	 * from the SRQ's process by the XRC_RECV QP's) */
	memset(e.buf + 20480, 0, MSG);
	post(sq, &e, 5, IBV_WR_RDMA_READ, 20480, MSG, si.srqn,
	     si.addr + 40960, si.rkey);
	ep_expect(e.scq, sq, 5, IBV_WC_SUCCESS);
	ASSERT_EQ(ep_find_pattern_diff(e.buf + 20480, MSG, 4, 0), -1);
	duo_signal(sd.fd, 'w');

	/* the creator destroys its handle: the QP lives for us */
	duo_expect(qd.fd, 'o');
	ASSERT_EQ(query_state(oqp), IBV_QPS_RTR);
	ep_fill_pattern(e.buf + 24576, 64, 6, 0);
	post(sq, &e, 6, IBV_WR_SEND, 24576, 64, si.srqn, 0, 0);
	ep_expect(e.scq, sq, 6, IBV_WC_SUCCESS);

	/* our destroy was the last reference: the QP goes (at once in our
	 * view, by its creator a moment later) */
	ASSERT_EQ(ibv_destroy_qp(oqp), 0);
	for (tries = 0; tries < 500; tries++) {
		struct ibv_qp *again = xrc_open(e.ctx, x, qpn,
						IBV_QPT_XRC_RECV);

		if (!again) {
			ASSERT_EQ(errno, EINVAL);
			break;
		}
		ASSERT_EQ(ibv_destroy_qp(again), 0);
		usleep(10000);
	}
	ASSERT_LT(tries, 500);
	ASSERT_EQ(ibv_close_xrcd(x), 0);

	ASSERT_EQ(ibv_destroy_qp(sq), 0);
	ep_net_check();
	duo_signal(qd.fd, 'q');
	duo_signal(sd.fd, 'q');
	duo_wait(&qd);
	duo_wait(&sd);
	ep_destroy(&e);
	unlink(path);
}

TEST(xrc_creator_exit)
{
	struct ibv_qp_init_attr init;
	struct ibv_qp_attr a;
	struct ibv_qp *oqp;
	struct ibv_xrcd *x;
	struct ep_opts o;
	struct ep e;
	struct duo qd;
	uint32_t qpn;
	char path[64];

	xrc_temp_file(path, sizeof(path));
	duo_fork(&qd, creator_exits, path);
	ep_default_opts(&o, IBV_QPT_RC);
	ep_create(&e, &o);
	x = xrc_domain_file(e.ctx, path);
	xread(qd.fd, &qpn, sizeof(qpn));
	oqp = xrc_open(e.ctx, x, qpn, IBV_QPT_XRC_RECV);
	ASSERT_NOT_NULL(oqp);
	ASSERT_EQ(query_state(oqp), IBV_QPS_INIT);
	duo_signal(qd.fd, 'x');
	duo_wait(&qd);
	/* its state lived in the creator's process: gone with it */
	ASSERT_EQ(ibv_query_qp(oqp, &a, IBV_QP_STATE, &init), EIO);
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_ERR;
	ASSERT_EQ(ibv_modify_qp(oqp, &a, IBV_QP_STATE), EIO);
	ASSERT_EQ(ibv_destroy_qp(oqp), 0);
	ASSERT_EQ(ibv_close_xrcd(x), 0);
	ep_destroy(&e);
	unlink(path);
}

/* A process that holds another domain (the file's, not ours). */
static void other_domain(int fd, void *arg)
{
	struct ibv_xrcd *x;
	struct ep_opts o;
	struct ep e;
	uint32_t qpn;

	ep_default_opts(&o, IBV_QPT_RC);
	ep_create(&e, &o);
	x = xrc_domain_file(e.ctx, arg);
	xread(fd, &qpn, sizeof(qpn));
	/* a QP of another domain (the test's private one) */
	ASSERT_NULL_ERRNO(xrc_open(e.ctx, x, qpn, IBV_QPT_XRC_RECV), EINVAL);
	duo_signal(fd, 'k');
	ASSERT_EQ(ibv_close_xrcd(x), 0);
	ep_destroy(&e);
}

TEST(xrc_open_qp_errors)
{
	struct ibv_qp_open_attr a;
	struct ibv_xrcd *x, *y;
	struct ibv_qp *qp, *rc, *oqp;
	struct ibv_srq *s;
	struct ep_opts o;
	struct ep e;
	struct duo d;
	uint32_t srqn, qpn;
	char path[64];

	xrc_temp_file(path, sizeof(path));
	/* (forked before this process has threads: TSan builds) */
	duo_fork(&d, other_domain, path);
	ep_default_opts(&o, IBV_QPT_RC);
	ep_create(&e, &o);
	x = xrc_domain_private(e.ctx);
	y = xrc_domain_private(e.ctx);
	qp = xrc_qp_init(&e, IBV_QPT_XRC_RECV, x);
	qpn = qp->qp_num;
	rc = e.qp;
	s = xrc_srq(&e, x, e.rcq, 4);
	ASSERT_EQ(ibv_get_srq_num(s, &srqn), 0);

	/* rdma-core's checks: the three fields needed, no unknown bit */
	memset(&a, 0, sizeof(a));
	a.comp_mask = IBV_QP_OPEN_ATTR_NUM | IBV_QP_OPEN_ATTR_TYPE;
	a.qp_num = qpn;
	a.qp_type = IBV_QPT_XRC_RECV;
	ASSERT_NULL_ERRNO(ibv_open_qp(e.ctx, &a), EINVAL);
	a.comp_mask = IBV_QP_OPEN_ATTR_RESERVED | IBV_QP_OPEN_ATTR_NUM |
		      IBV_QP_OPEN_ATTR_TYPE | IBV_QP_OPEN_ATTR_XRCD;
	a.xrcd = x;
	ASSERT_NULL_ERRNO(ibv_open_qp(e.ctx, &a), EOPNOTSUPP);
	/* the kernel's ib_open_qp: an XRC_RECV QP of the domain, named by
	 * type XRC_RECV, or EINVAL */
	ASSERT_NULL_ERRNO(xrc_open(e.ctx, x, qpn, IBV_QPT_RC), EINVAL);
	ASSERT_NULL_ERRNO(xrc_open(e.ctx, x, qpn, IBV_QPT_XRC_SEND), EINVAL);
	ASSERT_NULL_ERRNO(xrc_open(e.ctx, y, qpn, IBV_QPT_XRC_RECV), EINVAL);
	ASSERT_NULL_ERRNO(xrc_open(e.ctx, x, rc->qp_num, IBV_QPT_XRC_RECV),
			  EINVAL);
	ASSERT_NULL_ERRNO(xrc_open(e.ctx, x, srqn, IBV_QPT_XRC_RECV), EINVAL);
	ASSERT_NULL_ERRNO(xrc_open(e.ctx, x, qpn ^ 0x2000, IBV_QPT_XRC_RECV),
			  EINVAL);
	ASSERT_NULL_ERRNO(xrc_open(e.ctx, x, 0x1000000 | qpn,
				   IBV_QPT_XRC_RECV), EINVAL);
	/* a domain of another process (another file) */
	xwrite(d.fd, &qpn, sizeof(qpn));
	duo_expect(d.fd, 'k');
	duo_wait(&d);

	/* our own process may open it too; an opened handle takes no
	 * work requests (no queues) and is no QP of ours to post on */
	oqp = xrc_open(e.ctx, x, qpn, IBV_QPT_XRC_RECV);
	ASSERT_NOT_NULL(oqp);
	ASSERT_EQ(oqp->state, IBV_QPS_UNKNOWN);
	ASSERT_EQ(query_state(oqp), IBV_QPS_INIT);
	{
		struct ibv_qp_attr m;

		/* the creator's checker decides: RTS from INIT is not a
		 * transition */
		memset(&m, 0, sizeof(m));
		m.qp_state = IBV_QPS_RTS;
		ASSERT_EQ(ibv_modify_qp(oqp, &m, IBV_QP_STATE), EINVAL);
		ASSERT_EQ(ibv_modify_qp(oqp, &m, 1 << 30), EOPNOTSUPP);
		m.qp_state = IBV_QPS_ERR;
		ASSERT_EQ(ibv_modify_qp(oqp, &m, IBV_QP_STATE), 0);
		ASSERT_EQ(query_state(qp), IBV_QPS_ERR);
		ASSERT_EQ(oqp->state, IBV_QPS_ERR);
	}
	/* the creator's destroy leaves it to the opened handle */
	ASSERT_EQ(ibv_destroy_qp(qp), 0);
	ASSERT_EQ(ibv_destroy_qp(qp), ENOENT);
	ASSERT_EQ(query_state(oqp), IBV_QPS_ERR);
	ASSERT_EQ(ibv_destroy_qp(oqp), 0);
	ASSERT_EQ(ibv_destroy_srq(s), 0);
	ASSERT_EQ(ibv_close_xrcd(y), 0);
	ASSERT_EQ(ibv_close_xrcd(x), 0);
	ep_destroy(&e);
	unlink(path);
}

/* An opener that closes its device context without destroying the QP it
 * opened, and stays alive. */
static void opener_closes_context(int fd, void *arg)
{
	struct ibv_qp *oqp;
	struct ibv_xrcd *x;
	struct ep_opts o;
	struct ep e;
	uint32_t qpn;

	ep_default_opts(&o, IBV_QPT_RC);
	ep_create(&e, &o);
	x = xrc_domain_file(e.ctx, arg);
	xread(fd, &qpn, sizeof(qpn));
	oqp = xrc_open(e.ctx, x, qpn, IBV_QPT_XRC_RECV);
	ASSERT_NOT_NULL(oqp);
	duo_signal(fd, 'o');
	ep_destroy(&e);		/* its context closes: so does the QP */
	duo_signal(fd, 'x');
	duo_expect(fd, 'q');
}

/*
 * The kernel's uverbs cleanup: a context that closes takes its opened
 * QPs with it.  Were the opener's reference kept, the creator's destroy
 * would leave an orphan that nobody could end, and it could be opened
 * forever.
 */
TEST(xrc_opener_context_close)
{
	struct ibv_qp *qp;
	struct ibv_xrcd *x;
	struct ep_opts o;
	struct ep e;
	struct duo d;
	uint32_t qpn;
	char path[64];
	int tries;

	xrc_temp_file(path, sizeof(path));
	duo_fork(&d, opener_closes_context, path);
	ep_default_opts(&o, IBV_QPT_RC);
	ep_create(&e, &o);
	x = xrc_domain_file(e.ctx, path);
	qp = xrc_qp_init(&e, IBV_QPT_XRC_RECV, x);
	qpn = qp->qp_num;
	xwrite(d.fd, &qpn, sizeof(qpn));
	duo_expect(d.fd, 'o');
	duo_expect(d.fd, 'x');
	ASSERT_EQ(ibv_destroy_qp(qp), 0);
	/* each open and destroy of ours ends it once no other holds it */
	for (tries = 0; tries < 500; tries++) {
		struct ibv_qp *again = xrc_open(e.ctx, x, qpn,
						IBV_QPT_XRC_RECV);

		if (!again) {
			ASSERT_EQ(errno, EINVAL);
			break;
		}
		ASSERT_EQ(ibv_destroy_qp(again), 0);
		usleep(10000);
	}
	ASSERT_LT(tries, 500);
	duo_signal(d.fd, 'q');
	duo_wait(&d);
	ASSERT_EQ(ibv_close_xrcd(x), 0);
	ep_destroy(&e);
	unlink(path);
}
