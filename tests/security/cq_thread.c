// SPDX-License-Identifier: MIT
/*
 * cq_thread: the completion-thread pattern of the classic rdma_cm samples
 * (issue 11), run by tests/security/test_cq_thread.sh.
 *
 * The shape is the one tutorials teach (written here from scratch): the
 * main thread handles rdma_cm events; a completion thread per side loops
 *
 *	ibv_get_cq_event -> ibv_ack_cq_events -> ibv_req_notify_cq ->
 *	ibv_poll_cq until empty
 *
 * and drives the protocol from the completions it sees, posting the next
 * send itself.  When its side is done, the completion thread of the side
 * that disconnects calls rdma_disconnect; each main thread, on
 * DISCONNECTED, answers with rdma_disconnect (the other side) and tears
 * everything down while the completion thread may still run: it is
 * stopped first, either by pthread_cancel on a thread asleep in
 * ibv_get_cq_event (-t cancel), or by a flag and an eventfd that a
 * thread waiting in poll() on the channel's fd notices (-t flag).  Then
 * rdma_destroy_qp, ibv_destroy_cq, ibv_destroy_comp_channel,
 * ibv_dereg_mr, ibv_dealloc_pd, rdma_destroy_id.  -t none is the
 * shortest tutorials' way: the thread is never stopped; the side that
 * did not disconnect does not call rdma_disconnect either; the QP, MRs
 * and id are destroyed under the thread (the CQ, channel and PD stay),
 * and the process exits with it asleep in ibv_get_cq_event.
 *
 * Variants (-m):
 *   send   ping-pong of N messages (client PING i, server PONG i)
 *   rdma   the server advertises a registered buffer (addr, rkey,
 *          length) in a SEND; the client does N rounds of an RDMA WRITE
 *          of a pattern into it and an RDMA READ of the server's own
 *          pattern back, then sends DONE; the server checks what was
 *          written and answers DONE with the verdict
 *   pipe   the same with one round, WRITE, READ and DONE posted
 *          together in one ibv_post_send
 *
 * Every completion status is checked: before this side's protocol is
 * finished only IBV_WC_SUCCESS; afterwards IBV_WC_WR_FLUSH_ERR only for
 * receives this side posted and still had outstanding (the disconnect
 * flushes them); anything else is a failure.  Exit status 0 only when
 * both the protocol and the teardown were clean.
 *
 * usage: cq_thread pair|server|client [-a ADDR] [-p PORT]
 *                  [-m send|rdma|pipe]
 *                  [-n N] [-s SIZE] [-t cancel|flag|none]
 *                  [-d client|server] [-v]
 * "pair" forks the client (before any verbs or CM call) and runs the
 * server; its status is the worse of the two.
 */

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <rdma/rdma_cma.h>

#if defined(__SANITIZE_ADDRESS__)
/*
 * ASan cannot see a thread's cancellation: the forced unwind leaves the
 * frames it skips (redzones included) poisoned, and when the cancelled
 * thread exits, ASan's own sigaltstack() call there writes a stack_t
 * into that stale shadow and reports a stack-buffer-underflow that is
 * not one (google/sanitizers issue 1399, open).  Without ASan's
 * alternate signal stack that call is not made; the stack's shadow is
 * cleared when a new thread reuses it.  Every other check stays on.
 */
const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
	return "use_sigaltstack=0";
}
#endif

enum msg_type { MSG_PING = 1, MSG_PONG, MSG_MR, MSG_DONE };

struct msg {
	uint32_t type;
	uint32_t seq;
	uint64_t addr;
	uint32_t rkey;
	uint32_t len;
	uint32_t ok;		/* DONE from the server: the check passed */
	uint32_t pad;
};

enum wr_kind { WR_SEND = 1, WR_RECV, WR_WRITE, WR_READ };
#define WR_ID(kind, i) (((uint64_t)(kind) << 32) | (uint32_t)(i))
#define WR_KIND(id) ((unsigned int)((id) >> 32))

#define NRECV 2		/* receives kept posted */

struct opts {
	bool server;
	const char *addr;
	uint16_t port;
	bool rdma;
	bool pipe;		/* rdma in one post: WRITE, READ, DONE */
	unsigned int n;
	size_t size;
	bool cancel;
	bool leave;		/* -t none: the thread is never stopped */
	bool server_disconnects;
	bool verbose;
};

static struct opts o = {
	.addr = "127.0.0.1", .port = 31500, .n = 100, .size = 4096,
	.cancel = true,
};

struct conn {
	struct rdma_cm_id *id;
	struct ibv_pd *pd;
	struct ibv_comp_channel *channel;
	struct ibv_cq *cq;
	struct ibv_mr *send_mr, *recv_mr, *rdma_mr, *local_mr;
	struct msg send_msg;
	struct msg recv_msg[NRECV];
	uint8_t *rdma_buf;	/* server: advertised; client: unused */
	uint8_t *local_buf;	/* client: source of WRITEs, sink of READs */

	pthread_t thread;
	bool thread_started;
	int wake_fd;			/* -t flag: the main thread's wake-up */
	int stop;	/* -t flag: the thread must return (atomic: a volatile
			 * int is a data race, which TSan reports) */

	pthread_mutex_t lock;		/* protocol state below */
	pthread_cond_t cond;		/* a completion was handled */
	unsigned int sends_posted, sends_done;
	unsigned int recvs_out;		/* receives posted, not completed */
	unsigned int recvs_done;
	unsigned int round;		/* rdma: rounds finished */
	bool op_out;			/* rdma: a WRITE or READ in flight */
	bool write_done;		/* rdma: this round's WRITE completed */
	struct msg peer;		/* rdma: the server's buffer */
	bool have_peer;
	bool finished;			/* this side's protocol is over */
	bool disconnecting;		/* rdma_disconnect called here */
	bool qp_gone;			/* -t none: rdma_destroy_qp returned */
	unsigned int flushed;		/* receive flushes after finished */
	int failed;			/* first failure: exit status 1 */
	uint32_t verdict;		/* client: the server's DONE.ok */
};

static const char *side(void)
{
	return o.server ? "server" : "client";
}

static void say(const char *fmt, ...)
{
	va_list ap;

	if (!o.verbose)
		return;
	va_start(ap, fmt);
	fprintf(stderr, "[%s %d] ", side(), getpid());
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

static void fail(struct conn *c, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fprintf(stderr, "cq_thread %s: FAIL: ", side());
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	if (c)
		c->failed = 1;
}

static void die(const char *what)
{
	fprintf(stderr, "cq_thread %s: %s: %s\n", side(), what,
		strerror(errno));
	exit(1);
}

/* ------------------------------------------------------------------ */
/* Posting                                                              */

static int post_recv(struct conn *c, unsigned int slot)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)&c->recv_msg[slot],
		.length = sizeof(struct msg),
		.lkey = c->recv_mr->lkey,
	};
	struct ibv_recv_wr wr = {
		.wr_id = WR_ID(WR_RECV, slot), .sg_list = &sge, .num_sge = 1,
	}, *bad;
	int ret = ibv_post_recv(c->id->qp, &wr, &bad);

	if (!ret)
		c->recvs_out++;
	return ret;
}

/* One message at a time is in flight: the buffer is free again only once
 * its completion was seen (the tutorials' send_state). */
static void post_msg(struct conn *c, const struct msg *m)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)&c->send_msg, .length = sizeof(struct msg),
		.lkey = c->send_mr->lkey,
	};
	struct ibv_send_wr wr = {
		.wr_id = WR_ID(WR_SEND, c->sends_posted), .sg_list = &sge,
		.num_sge = 1, .opcode = IBV_WR_SEND,
		.send_flags = IBV_SEND_SIGNALED,
	}, *bad;
	int ret;

	c->send_msg = *m;
	ret = ibv_post_send(c->id->qp, &wr, &bad);
	if (ret) {
		errno = ret;
		fail(c, "ibv_post_send(SEND %u): %s", m->type, strerror(ret));
		return;
	}
	c->sends_posted++;
}

static void fill(uint8_t *p, size_t n, unsigned int seed)
{
	size_t i;

	for (i = 0; i < n; i++)
		p[i] = (uint8_t)(seed * 131 + i * 7 + (i >> 8));
}

static bool check_fill(const uint8_t *p, size_t n, unsigned int seed)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (p[i] != (uint8_t)(seed * 131 + i * 7 + (i >> 8)))
			return false;
	return true;
}

/* rdma: the server's buffer holds [0, size/2) written by the client and
 * [size/2, size) the server's pattern that the client reads. */
static void post_rdma(struct conn *c, bool write)
{
	size_t half = o.size / 2;
	struct ibv_sge sge = {
		.addr = (uintptr_t)c->local_buf + (write ? 0 : half),
		.length = (uint32_t)half, .lkey = c->local_mr->lkey,
	};
	struct ibv_send_wr wr = {
		.wr_id = WR_ID(write ? WR_WRITE : WR_READ, c->round),
		.sg_list = &sge, .num_sge = 1,
		.opcode = write ? IBV_WR_RDMA_WRITE : IBV_WR_RDMA_READ,
		.send_flags = IBV_SEND_SIGNALED,
	}, *bad;
	int ret;

	wr.wr.rdma.remote_addr = c->peer.addr + (write ? 0 : half);
	wr.wr.rdma.rkey = c->peer.rkey;
	if (write)
		fill(c->local_buf, half, c->round + 1);
	else
		memset(c->local_buf + half, 0, half);
	ret = ibv_post_send(c->id->qp, &wr, &bad);
	if (ret) {
		fail(c, "ibv_post_send(%s): %s", write ? "WRITE" : "READ",
		     strerror(ret));
		return;
	}
	c->op_out = true;
}

/* -m pipe: WRITE, READ and DONE in one ibv_post_send, as the shortest
 * samples post them; RC ordering places the WRITE before the server
 * sees DONE, and completes them in order. */
static void post_pipe(struct conn *c)
{
	size_t half = o.size / 2;
	struct ibv_sge sge[3] = {
		{ (uintptr_t)c->local_buf, (uint32_t)half,
		  c->local_mr->lkey },
		{ (uintptr_t)c->local_buf + half, (uint32_t)half,
		  c->local_mr->lkey },
		{ (uintptr_t)&c->send_msg, sizeof(struct msg),
		  c->send_mr->lkey },
	};
	struct ibv_send_wr wr[3] = { 0 }, *bad;
	int ret, i;

	for (i = 0; i < 3; i++) {
		wr[i].sg_list = &sge[i];
		wr[i].num_sge = 1;
		wr[i].send_flags = IBV_SEND_SIGNALED;
		wr[i].next = i < 2 ? &wr[i + 1] : NULL;
	}
	wr[0].wr_id = WR_ID(WR_WRITE, 0);
	wr[0].opcode = IBV_WR_RDMA_WRITE;
	wr[0].wr.rdma.remote_addr = c->peer.addr;
	wr[0].wr.rdma.rkey = c->peer.rkey;
	wr[1].wr_id = WR_ID(WR_READ, 0);
	wr[1].opcode = IBV_WR_RDMA_READ;
	wr[1].wr.rdma.remote_addr = c->peer.addr + half;
	wr[1].wr.rdma.rkey = c->peer.rkey;
	wr[2].wr_id = WR_ID(WR_SEND, 0);
	wr[2].opcode = IBV_WR_SEND;
	fill(c->local_buf, half, 1);
	memset(c->local_buf + half, 0, half);
	memset(&c->send_msg, 0, sizeof(c->send_msg));
	c->send_msg.type = MSG_DONE;
	c->send_msg.seq = 1;
	ret = ibv_post_send(c->id->qp, wr, &bad);
	if (ret) {
		fail(c, "ibv_post_send(WRITE, READ, SEND): %s",
		     strerror(ret));
		return;
	}
	c->op_out = true;
	c->sends_posted++;
}

/* ------------------------------------------------------------------ */
/* The protocol, driven by completions (c->lock held)                   */

static void finish(struct conn *c)
{
	if (c->finished)
		return;
	c->finished = true;
	say("protocol finished");
	if (o.server == o.server_disconnects && !c->disconnecting) {
		/* as the tutorials: the completion thread disconnects */
		c->disconnecting = true;
		if (rdma_disconnect(c->id))
			fail(c, "rdma_disconnect: %s", strerror(errno));
	}
}

/* Client, send variant: PING i once PONG i-1 and SEND i-1 completed. */
static void progress(struct conn *c)
{
	struct msg m = { 0 };

	if (c->failed || c->finished)
		return;
	if (!o.rdma) {
		if (o.server) {
			/* PONG i when PING i arrived and PONG i-1 completed */
			if (c->recvs_done > c->sends_posted &&
			    c->sends_done == c->sends_posted) {
				m.type = MSG_PONG;
				m.seq = c->sends_posted;
				post_msg(c, &m);
			} else if (c->sends_done == o.n) {
				finish(c);
			}
			return;
		}
		if (c->sends_done != c->sends_posted ||
		    c->recvs_done != c->sends_posted)
			return;
		if (c->sends_posted == o.n) {
			finish(c);
			return;
		}
		m.type = MSG_PING;
		m.seq = c->sends_posted;
		post_msg(c, &m);
		return;
	}
	if (o.server) {
		/* MR sent first (main thread), then DONE answers DONE */
		if (c->sends_posted == 2 && c->sends_done == 2)
			finish(c);
		return;
	}
	/* client: rounds of WRITE then READ once the MR is known */
	if (o.pipe && c->have_peer && !c->sends_posted && !c->op_out) {
		post_pipe(c);
		return;
	}
	if (!c->have_peer || c->op_out || c->sends_done != c->sends_posted)
		return;
	if (c->round < o.n) {
		post_rdma(c, !c->write_done);
		return;
	}
	if (c->sends_posted == 0) {
		m.type = MSG_DONE;
		m.seq = o.n;
		post_msg(c, &m);
	} else if (c->recvs_done == 2 && c->sends_done == 1) {
		if (!c->verdict)
			fail(c, "the server found the WRITEs wrong");
		finish(c);
	}
}

static void on_recv(struct conn *c, const struct ibv_wc *wc)
{
	unsigned int slot = (uint32_t)wc->wr_id;
	struct msg m = c->recv_msg[slot];
	unsigned int nth = c->recvs_done++;

	if (slot >= NRECV || wc->byte_len != sizeof(m)) {
		fail(c, "receive %u: slot %u, %u bytes", nth, slot,
		     wc->byte_len);
		return;
	}
	if (!o.rdma) {
		uint32_t want = o.server ? MSG_PING : MSG_PONG;

		if (m.type != want || m.seq != nth)
			fail(c, "message %u: type %u seq %u", nth, m.type,
			     m.seq);
	} else if (o.server) {
		if (m.type != MSG_DONE || m.seq != o.n) {
			fail(c, "expected DONE, got type %u seq %u", m.type,
			     m.seq);
		} else {
			struct msg d = { .type = MSG_DONE, .seq = o.n };

			d.ok = check_fill(c->rdma_buf, o.size / 2, o.n);
			post_msg(c, &d);
		}
	} else if (nth == 0) {
		if (m.type != MSG_MR || m.len != o.size)
			fail(c, "expected MR, got type %u len %u", m.type,
			     m.len);
		c->peer = m;
		c->have_peer = true;
	} else {
		if (m.type != MSG_DONE)
			fail(c, "expected DONE, got type %u", m.type);
		c->verdict = m.ok;
	}
	/* keep NRECV posted, as the samples repost after each receive:
	 * the ones left when the protocol ends are flushed */
	if (!c->failed && post_recv(c, slot))
		fail(c, "ibv_post_recv: %s", strerror(errno));
}

static void on_completion(struct conn *c, const struct ibv_wc *wc)
{
	unsigned int kind = WR_KIND(wc->wr_id);

	pthread_mutex_lock(&c->lock);
	if (kind == WR_RECV)
		c->recvs_out--;
	if (wc->status != IBV_WC_SUCCESS) {
		/* the disconnect flushes the receives still posted */
		if (wc->status == IBV_WC_WR_FLUSH_ERR && kind == WR_RECV &&
		    c->finished) {
			c->flushed++;
		} else {
			fail(c, "completion %s (kind %u, wr %u, opcode %d) "
			     "after %u sends, %u receives%s",
			     ibv_wc_status_str(wc->status), kind,
			     (uint32_t)wc->wr_id, wc->opcode, c->sends_done,
			     c->recvs_done,
			     c->finished ? ", protocol finished" : "");
		}
		pthread_cond_broadcast(&c->cond);
		pthread_mutex_unlock(&c->lock);
		return;
	}
	switch (kind) {
	case WR_SEND:
		if (wc->opcode != IBV_WC_SEND)
			fail(c, "send completion with opcode %d", wc->opcode);
		c->sends_done++;
		break;
	case WR_RECV:
		if (wc->opcode != IBV_WC_RECV)
			fail(c, "receive completion with opcode %d",
			     wc->opcode);
		on_recv(c, wc);
		break;
	case WR_WRITE:
		c->op_out = false;
		c->write_done = true;
		break;
	case WR_READ:
		c->op_out = false;
		c->write_done = false;
		if (!check_fill(c->local_buf + o.size / 2, o.size / 2, 0))
			fail(c, "READ %u brought wrong bytes", c->round);
		c->round++;
		break;
	default:
		fail(c, "completion with unknown wr_id %#llx",
		     (unsigned long long)wc->wr_id);
	}
	if (c->finished && kind != WR_RECV)
		fail(c, "a completion (kind %u) after the protocol ended",
		     kind);
	progress(c);
	pthread_cond_broadcast(&c->cond);
	pthread_mutex_unlock(&c->lock);
}

/* ------------------------------------------------------------------ */
/* The completion thread                                                */

static void drain_cq(struct conn *c)
{
	struct ibv_wc wc[8];
	int n, i;
	bool gone;

	for (;;) {
		gone = __atomic_load_n(&c->qp_gone, __ATOMIC_ACQUIRE);
		n = ibv_poll_cq(c->cq, 8, wc);
		if (n <= 0)
			break;
		/* -t none: the samples free what wr_id points to once
		 * rdma_destroy_qp returned; an HCA's driver takes the QP's
		 * completions out of the CQ then (mlx5's cq_clean) */
		if (gone)
			fail(c, "%d completion(s) of a destroyed QP, the "
			     "first %s", n, ibv_wc_status_str(wc[0].status));
		for (i = 0; i < n; i++)
			on_completion(c, &wc[i]);
	}
	if (n < 0)
		fail(c, "ibv_poll_cq: %d", n);
}

/* One event: take it, acknowledge it, re-arm, then poll until empty
 * (what arrives between the poll and the re-arm fires the next event). */
static int one_event(struct conn *c)
{
	struct ibv_cq *cq;
	void *ctx;
	int ret;

	/* -t cancel: cancellable only while asleep here; elsewhere the
	 * thread holds c->lock, and stdio's locks in fail() */
	if (o.cancel)
		pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, NULL);
	ret = ibv_get_cq_event(c->channel, &cq, &ctx);
	if (o.cancel)
		pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, NULL);
	if (ret) {
		if (errno == EAGAIN)
			return 0;
		fail(c, "ibv_get_cq_event: %s", strerror(errno));
		return -1;
	}
	if (cq != c->cq || ctx != c)
		fail(c, "event for CQ %p context %p", (void *)cq, ctx);
	ibv_ack_cq_events(cq, 1);
	if (ibv_req_notify_cq(cq, 0)) {
		fail(c, "ibv_req_notify_cq");
		return -1;
	}
	drain_cq(c);
	return 0;
}

/* -t cancel: blocked in ibv_get_cq_event until cancelled */
static void *cq_thread_cancel(void *arg)
{
	struct conn *c = arg;

	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, NULL);
	while (one_event(c) == 0)
		;
	return NULL;
}

/* -t flag: poll() on the channel's fd and the wake-up fd */
static void *cq_thread_flag(void *arg)
{
	struct conn *c = arg;
	struct pollfd p[2] = {
		{ .fd = c->channel->fd, .events = POLLIN },
		{ .fd = c->wake_fd, .events = POLLIN },
	};

	while (!__atomic_load_n(&c->stop, __ATOMIC_ACQUIRE)) {
		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			fail(c, "poll: %s", strerror(errno));
			break;
		}
		if (__atomic_load_n(&c->stop, __ATOMIC_ACQUIRE))
			break;
		if ((p[0].revents & POLLIN) && one_event(c))
			break;
	}
	return NULL;
}

static void stop_cq_thread(struct conn *c)
{
	uint64_t one = 1;
	int ret;

	if (!c->thread_started)
		return;
	if (o.cancel) {
		ret = pthread_cancel(c->thread);
		if (ret && ret != ESRCH)
			fail(c, "pthread_cancel: %s", strerror(ret));
	} else {
		__atomic_store_n(&c->stop, 1, __ATOMIC_RELEASE);
		if (write(c->wake_fd, &one, sizeof(one)) != sizeof(one))
			fail(c, "write wake fd: %s", strerror(errno));
	}
	ret = pthread_join(c->thread, NULL);
	if (ret)
		fail(c, "pthread_join: %s", strerror(ret));
	c->thread_started = false;
}

/* ------------------------------------------------------------------ */
/* Setup and teardown                                                   */

static struct ibv_mr *reg(struct conn *c, void *buf, size_t len, int access)
{
	struct ibv_mr *mr = ibv_reg_mr(c->pd, buf, len, access);

	if (!mr)
		die("ibv_reg_mr");
	return mr;
}

/* PD, channel, CQ (armed), completion thread, QP, MRs, receives. */
static void build(struct conn *c, struct rdma_cm_id *id)
{
	struct ibv_qp_init_attr qa = { 0 };
	int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
		     IBV_ACCESS_REMOTE_READ;
	unsigned int i;

	c->id = id;
	id->context = c;
	c->pd = ibv_alloc_pd(id->verbs);
	if (!c->pd)
		die("ibv_alloc_pd");
	c->channel = ibv_create_comp_channel(id->verbs);
	if (!c->channel)
		die("ibv_create_comp_channel");
	c->cq = ibv_create_cq(id->verbs, 16, c, c->channel, 0);
	if (!c->cq)
		die("ibv_create_cq");
	if (ibv_req_notify_cq(c->cq, 0))
		die("ibv_req_notify_cq");
	if (!o.cancel) {
		int fl = fcntl(c->channel->fd, F_GETFL);

		/* the thread polls; the verb must not block */
		if (fl < 0 ||
		    fcntl(c->channel->fd, F_SETFL, fl | O_NONBLOCK) < 0)
			die("fcntl(channel fd)");
		c->wake_fd = eventfd(0, EFD_CLOEXEC);
		if (c->wake_fd < 0)
			die("eventfd");
	}
	errno = pthread_create(&c->thread, NULL,
			       o.cancel ? cq_thread_cancel : cq_thread_flag,
			       c);
	if (errno)
		die("pthread_create");
	c->thread_started = true;

	qa.send_cq = c->cq;
	qa.recv_cq = c->cq;
	qa.qp_type = IBV_QPT_RC;
	qa.cap.max_send_wr = 4;
	qa.cap.max_recv_wr = NRECV;
	qa.cap.max_send_sge = 1;
	qa.cap.max_recv_sge = 1;
	if (rdma_create_qp(id, c->pd, &qa))
		die("rdma_create_qp");

	c->send_mr = reg(c, &c->send_msg, sizeof(c->send_msg), 0);
	c->recv_mr = reg(c, c->recv_msg, sizeof(c->recv_msg),
			 IBV_ACCESS_LOCAL_WRITE);
	if (o.rdma) {
		uint8_t **buf = o.server ? &c->rdma_buf : &c->local_buf;

		*buf = aligned_alloc(4096, (o.size + 4095) & ~4095ul);
		if (!*buf)
			die("aligned_alloc");
		memset(*buf, 0, o.size);
		if (o.server) {
			/* what the client READs, every round */
			fill(c->rdma_buf + o.size / 2, o.size / 2, 0);
			c->rdma_mr = reg(c, c->rdma_buf, o.size, access);
		} else {
			c->local_mr = reg(c, c->local_buf, o.size,
					  IBV_ACCESS_LOCAL_WRITE);
		}
	}
	pthread_mutex_lock(&c->lock);
	for (i = 0; i < NRECV; i++)
		if (post_recv(c, i))
			die("ibv_post_recv");
	pthread_mutex_unlock(&c->lock);
}

static void teardown(struct conn *c)
{
	int ret;

	if (o.leave) {
		/* the thread runs on: it may be polling the CQ right now */
		rdma_destroy_qp(c->id);
		__atomic_store_n(&c->qp_gone, true, __ATOMIC_RELEASE);
		if (ibv_dereg_mr(c->send_mr) || ibv_dereg_mr(c->recv_mr) ||
		    (c->rdma_mr && ibv_dereg_mr(c->rdma_mr)) ||
		    (c->local_mr && ibv_dereg_mr(c->local_mr)))
			fail(c, "ibv_dereg_mr");
		if (rdma_destroy_id(c->id))
			fail(c, "rdma_destroy_id: %s", strerror(errno));
		return;
	}
	/* the completion thread may still be running: stop it first, as
	 * a real program must before the CQ and channel go, then take
	 * what it left in the CQ (before the QP goes: destroying a QP
	 * removes its completions from the CQ) */
	stop_cq_thread(c);
	drain_cq(c);
	rdma_destroy_qp(c->id);
	ret = ibv_destroy_cq(c->cq);
	if (ret)
		fail(c, "ibv_destroy_cq: %s", strerror(ret));
	ret = ibv_destroy_comp_channel(c->channel);
	if (ret)
		fail(c, "ibv_destroy_comp_channel: %s", strerror(ret));
	if (ibv_dereg_mr(c->send_mr) || ibv_dereg_mr(c->recv_mr) ||
	    (c->rdma_mr && ibv_dereg_mr(c->rdma_mr)) ||
	    (c->local_mr && ibv_dereg_mr(c->local_mr)))
		fail(c, "ibv_dereg_mr");
	ret = ibv_dealloc_pd(c->pd);
	if (ret)
		fail(c, "ibv_dealloc_pd: %s", strerror(ret));
	if (rdma_destroy_id(c->id))
		fail(c, "rdma_destroy_id: %s", strerror(errno));
	if (c->wake_fd > 0)
		close(c->wake_fd);
	free(c->rdma_buf);
	free(c->local_buf);
}

/* ------------------------------------------------------------------ */
/* The main threads: rdma_cm events                                     */

static struct rdma_cm_event *next_event(struct rdma_event_channel *ch)
{
	struct rdma_cm_event *ev;

	if (rdma_get_cm_event(ch, &ev))
		die("rdma_get_cm_event");
	say("event %s (status %d)", rdma_event_str(ev->event), ev->status);
	return ev;
}

/* After ESTABLISHED: the first move of each side (main thread). */
static void start(struct conn *c)
{
	pthread_mutex_lock(&c->lock);
	if (o.rdma && o.server) {
		struct msg m = {
			.type = MSG_MR, .addr = (uintptr_t)c->rdma_buf,
			.rkey = c->rdma_mr->rkey, .len = (uint32_t)o.size,
		};

		post_msg(c, &m);
	} else if (!o.rdma && !o.server) {
		progress(c);
	}
	pthread_mutex_unlock(&c->lock);
}

/* Until DISCONNECTED; then answer the disconnect and tear down. */
static int run_connected(struct rdma_event_channel *ch, struct conn *c)
{
	struct rdma_cm_event *ev;
	bool done = false;

	while (!done) {
		enum rdma_cm_event_type t;

		ev = next_event(ch);
		t = ev->event;
		rdma_ack_cm_event(ev);
		switch (t) {
		case RDMA_CM_EVENT_ESTABLISHED:
			start(c);
			break;
		case RDMA_CM_EVENT_DISCONNECTED:
			done = true;
			break;
		default:
			fail(c, "unexpected event %s", rdma_event_str(t));
			done = true;
			break;
		}
	}
	pthread_mutex_lock(&c->lock);
	/* -t none: nothing drains the CQ after the thread; its last
	 * completions must come all the same (a hang is a failure) */
	while (o.leave && !c->finished && !c->failed)
		pthread_cond_wait(&c->cond, &c->lock);
	if (!c->disconnecting && o.leave) {
		/* the shortest samples never answer the DREQ: they destroy
		 * the QP (in RTS) and the id, which answers it */
		pthread_mutex_unlock(&c->lock);
	} else if (!c->disconnecting) {
		c->disconnecting = true;
		pthread_mutex_unlock(&c->lock);
		if (rdma_disconnect(c->id))
			fail(c, "rdma_disconnect: %s", strerror(errno));
	} else {
		pthread_mutex_unlock(&c->lock);
	}
	teardown(c);
	pthread_mutex_lock(&c->lock);
	if (!c->finished)
		fail(c, "disconnected before the end: %u sends, %u receives, "
		     "round %u", c->sends_done, c->recvs_done, c->round);
	if (c->flushed > NRECV)
		fail(c, "%u receive flushes, %u were posted", c->flushed,
		     NRECV);
	pthread_mutex_unlock(&c->lock);
	return c->failed;
}

static void conn_init(struct conn *c)
{
	memset(c, 0, sizeof(*c));
	pthread_mutex_init(&c->lock, NULL);
	pthread_cond_init(&c->cond, NULL);
	c->wake_fd = -1;
}

static int run_server(int ready_fd)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct sockaddr_in sin = { .sin_family = AF_INET };
	struct rdma_cm_id *listener;
	struct rdma_cm_event *ev;
	struct rdma_conn_param cp = { 0 };
	static struct conn c;	/* -t none: the thread outlives this frame */
	int ret;

	conn_init(&c);
	if (!ch)
		die("rdma_create_event_channel");
	if (rdma_create_id(ch, &listener, NULL, RDMA_PS_TCP))
		die("rdma_create_id");
	sin.sin_port = htons(o.port);
	if (inet_pton(AF_INET, o.addr, &sin.sin_addr) != 1)
		die("inet_pton");
	if (rdma_bind_addr(listener, (struct sockaddr *)&sin))
		die("rdma_bind_addr");
	if (rdma_listen(listener, 1))
		die("rdma_listen");
	if (ready_fd >= 0) {
		if (write(ready_fd, "r", 1) != 1)
			die("write ready");
		close(ready_fd);
	}
	ev = next_event(ch);
	if (ev->event != RDMA_CM_EVENT_CONNECT_REQUEST) {
		fail(NULL, "expected CONNECT_REQUEST, got %s",
		     rdma_event_str(ev->event));
		return 1;
	}
	build(&c, ev->id);
	cp.responder_resources = 1;
	cp.initiator_depth = 1;
	cp.rnr_retry_count = 7;
	if (rdma_accept(ev->id, &cp))
		die("rdma_accept");
	rdma_ack_cm_event(ev);
	ret = run_connected(ch, &c);
	rdma_destroy_id(listener);
	rdma_destroy_event_channel(ch);
	return ret;
}

static int run_client(void)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct addrinfo *ai;
	struct rdma_cm_event *ev;
	struct rdma_conn_param cp = { 0 };
	struct rdma_cm_id *id;
	static struct conn c;	/* -t none: the thread outlives this frame */
	char port[8];
	int ret;

	conn_init(&c);
	if (!ch)
		die("rdma_create_event_channel");
	snprintf(port, sizeof(port), "%u", o.port);
	if (getaddrinfo(o.addr, port, NULL, &ai))
		die("getaddrinfo");
	if (rdma_create_id(ch, &id, NULL, RDMA_PS_TCP))
		die("rdma_create_id");
	if (rdma_resolve_addr(id, NULL, ai->ai_addr, 2000))
		die("rdma_resolve_addr");
	ev = next_event(ch);
	if (ev->event != RDMA_CM_EVENT_ADDR_RESOLVED)
		goto refused;
	rdma_ack_cm_event(ev);
	if (rdma_resolve_route(id, 2000))
		die("rdma_resolve_route");
	ev = next_event(ch);
	if (ev->event != RDMA_CM_EVENT_ROUTE_RESOLVED)
		goto refused;
	rdma_ack_cm_event(ev);
	build(&c, id);
	cp.responder_resources = 1;
	cp.initiator_depth = 1;
	cp.retry_count = 7;
	cp.rnr_retry_count = 7;
	if (rdma_connect(id, &cp))
		die("rdma_connect");
	ev = next_event(ch);
	if (ev->event != RDMA_CM_EVENT_ESTABLISHED)
		goto refused;
	rdma_ack_cm_event(ev);
	freeaddrinfo(ai);
	start(&c);
	ret = run_connected(ch, &c);
	rdma_destroy_event_channel(ch);
	return ret;

refused:
	/* the drivers start the client once the server listens */
	fail(NULL, "connect: %s (status %d)", rdma_event_str(ev->event),
	     ev->status);
	return 1;
}

static void usage(void)
{
	fprintf(stderr, "usage: cq_thread pair|server|client [-a ADDR] "
		"[-p PORT] [-m send|rdma|pipe] [-n N] [-s SIZE] "
		"[-t cancel|flag|none] [-d client|server] [-v]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	const char *mode;
	int opt, pfd[2], st1, st2;
	pid_t pid;
	char b;

	if (argc < 2)
		usage();
	mode = argv[1];
	optind = 2;
	while ((opt = getopt(argc, argv, "a:p:m:n:s:t:d:v")) != -1) {
		switch (opt) {
		case 'a': o.addr = optarg; break;
		case 'p': o.port = (uint16_t)atoi(optarg); break;
		case 'm': o.pipe = !strcmp(optarg, "pipe");
			  o.rdma = o.pipe || !strcmp(optarg, "rdma");
			  if (!o.rdma && strcmp(optarg, "send"))
				  usage();
			  break;
		case 'n': o.n = (unsigned int)atoi(optarg); break;
		case 's': o.size = (size_t)atol(optarg); break;
		case 't': o.cancel = !strcmp(optarg, "cancel");
			  o.leave = !strcmp(optarg, "none");
			  if (!o.cancel && !o.leave && strcmp(optarg, "flag"))
				  usage();
			  break;
		case 'd': o.server_disconnects = !strcmp(optarg, "server");
			  break;
		case 'v': o.verbose = true; break;
		default: usage();
		}
	}
	if (o.n < 1 || o.size < 16 || o.size % 2)
		usage();
	if (o.pipe)
		o.n = 1;
	setvbuf(stderr, NULL, _IOLBF, 0);
	if (!strcmp(mode, "server")) {
		o.server = true;
		return run_server(-1);
	}
	if (!strcmp(mode, "client"))
		return run_client();
	if (strcmp(mode, "pair"))
		usage();
	/* fork before any CM or verbs call: the client waits until the
	 * server listens */
	if (pipe(pfd))
		die("pipe");
	pid = fork();
	if (pid < 0)
		die("fork");
	if (!pid) {
		close(pfd[1]);
		if (read(pfd[0], &b, 1) != 1)
			_exit(1);
		close(pfd[0]);
		_exit(run_client());
	}
	close(pfd[0]);
	o.server = true;
	st1 = run_server(pfd[1]);
	if (waitpid(pid, &st2, 0) != pid)
		die("waitpid");
	if (WIFSIGNALED(st2)) {
		fprintf(stderr, "cq_thread: client killed by signal %d\n",
			WTERMSIG(st2));
		return 128 + WTERMSIG(st2);
	}
	return st1 ? st1 : WEXITSTATUS(st2);
}
