// SPDX-License-Identifier: MIT
/*
 * Stream rsockets: the connection.  An rsocket owns an rdma_cm id on its
 * own event channel (non-blocking), and this file drives it as rdma-core's
 * rs_do_connect does, one CM event at a time:
 *
 *   rconnect:  rdma_resolve_addr -> ADDR_RESOLVED -> rdma_resolve_route
 *              (or the RDMA_ROUTE option's path) -> ROUTE_RESOLVED ->
 *              the QP and buffers -> rdma_connect (REQ with rs_conn_data)
 *              -> ESTABLISHED with the REP's rs_conn_data
 *   raccept:   CONNECT_REQUEST (rs_conn_data) -> a new rsocket on a new
 *              channel -> the QP and buffers -> rdma_accept (REP with
 *              ours) -> ESTABLISHED
 *
 * Whoever waits on the socket consumes its events (rs_cm_input), so a
 * non-blocking connect moves on in rpoll, rsend or rrecv, as rdma-core's
 * does in its CM service thread.  A failure leaves RS_CONNECT_ERROR and
 * the errno in SO_ERROR: REJECTED is ECONNREFUSED, an event's negative
 * status its errno (rdma-core's ucma_complete).
 *
 * The connection data (rs_wire.h) offers our receive queue size as
 * credits, the first half of our receive buffer as the peer's first
 * target, our SGL/iomap table for the peer to write, and our byte order.
 */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rsocket.h"

#define RS_RESOLVE_TIMEOUT_MS	2000

static int set_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);

	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
		return -errno;
	return 0;
}

static int chan_open(struct rsocket *rs)
{
	struct rs_stream *st = &rs->st;
	int ret;

	st->chan = rdma_create_event_channel();
	if (!st->chan)
		return -errno;
	st->src_cm.kind = RS_SRC_CM;
	st->src_cq.kind = RS_SRC_CQ;
	st->reqs_tail = &st->reqs;
	ret = set_nonblock(st->chan->fd);
	if (!ret)
		ret = rs_epoll_add(rs, st->chan->fd, &st->src_cm);
	return ret;
}

int rs_stream_open(struct rsocket *rs)
{
	struct rs_stream *st = &rs->st;
	int ret = chan_open(rs);

	if (ret)
		return ret;
	if (rdma_create_id(st->chan, &st->id, rs, RDMA_PS_TCP))
		return -errno;
	/* as rdma-core: the family before any bind (rgetsockname) */
	st->id->route.addr.src_addr.sa_family = rs->domain;
	return 0;
}

/* ------------------------------------------------------------------ */
/* The QP, its CQ and the buffers                                      */

static int create_cq(struct rsocket *rs)
{
	struct rs_stream *st = &rs->st;
	struct ibv_context *verbs = st->id->verbs;
	int ret;

	st->cq_chan = ibv_create_comp_channel(verbs);
	if (!st->cq_chan)
		return -errno;
	ret = set_nonblock(st->cq_chan->fd);
	if (ret)
		return ret;
	st->cq = ibv_create_cq(verbs, rs->sq_size + rs->rq_size, rs,
			       st->cq_chan, 0);
	if (!st->cq)
		return -errno;
	return rs_epoll_add(rs, st->cq_chan->fd, &st->src_cq);
}

static void *zalloc(size_t len)
{
	void *p = NULL;

	if (posix_memalign(&p, 4096, len ? len : 1))
		return NULL;
	memset(p, 0, len);
	return p;
}

static int init_bufs(struct rsocket *rs)
{
	struct rs_stream *st = &rs->st;
	struct ibv_pd *pd = st->id->pd;
	const int rw = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
	size_t slen, tlen;

	st->rmsg = calloc(rs->rq_size + 1, sizeof(*st->rmsg));
	if (!st->rmsg)
		return -ENOMEM;
	/* control messages that cannot go inline take a slot after the
	 * send ring (rdma-core's rs_get_ctrl_buf) */
	slen = rs->sbuf_size + sizeof(struct rs_sge) * RS_QP_CTRL_SIZE;
	st->sbuf = zalloc(slen);
	if (!st->sbuf)
		return -ENOMEM;
	st->smr = ibv_reg_mr(pd, st->sbuf, slen, IBV_ACCESS_LOCAL_WRITE);
	if (!st->smr)
		return -errno;
	tlen = sizeof(struct rs_sge) * RS_SGL_SIZE +
	       sizeof(struct rs_iomap) * st->target_iomap_size;
	st->tbuf = zalloc(tlen);
	if (!st->tbuf)
		return -ENOMEM;
	st->tmr = ibv_reg_mr(pd, st->tbuf, tlen, rw);
	if (!st->tmr)
		return -errno;
	st->target_sgl = st->tbuf;
	if (st->target_iomap_size) {
		st->target_iomap = (volatile struct rs_iomap *)
				   ((uint8_t *)st->tbuf +
				    sizeof(struct rs_sge) * RS_SGL_SIZE);
		st->iomap_seen = calloc(st->target_iomap_size,
					sizeof(*st->iomap_seen));
		if (!st->iomap_seen)
			return -ENOMEM;
	}
	st->rbuf = zalloc(rs->rbuf_size);
	if (!st->rbuf)
		return -ENOMEM;
	st->rmr = ibv_reg_mr(pd, st->rbuf, rs->rbuf_size, rw);
	if (!st->rmr)
		return -errno;

	st->sbuf_avail = rs->sbuf_size;
	st->sbuf_head = 0;
	/* the first half is the peer's from the start (connection data);
	 * the second is advertised by the first credit update */
	st->rbuf_free_offset = rs->rbuf_size >> 1;
	st->rbuf_avail = rs->rbuf_size >> 1;
	st->rbuf_granted = rs->rbuf_size >> 1;
	st->sqe_avail = rs->sq_size - st->ctrl_max_seqno;
	st->rseq_comp = rs->rq_size >> 1;
	return 0;
}

/* rdma-core's rs_create_ep: sizes within the device's, one CQ for both
 * queues, every send signalled, two SGEs (the send ring wraps) */
static int create_ep(struct rsocket *rs)
{
	struct rs_stream *st = &rs->st;
	struct ibv_qp_init_attr attr;
	struct ibv_device_attr dattr;
	int i, ret, max = RS_QP_MAX_SIZE;

	if (!st->id->verbs || !st->id->pd)
		return -ENODEV;
	if (!ibv_query_device(st->id->verbs, &dattr))
		max = MIN(max, dattr.max_qp_wr);
	rs->sq_size = MAX(MIN(rs->sq_size, max), RS_QP_MIN_SIZE);
	rs->rq_size = MAX(MIN(rs->rq_size, max), RS_QP_MIN_SIZE);
	ret = create_cq(rs);
	if (ret)
		return ret;
	memset(&attr, 0, sizeof(attr));
	attr.qp_context = rs;
	attr.send_cq = st->cq;
	attr.recv_cq = st->cq;
	attr.qp_type = IBV_QPT_RC;
	attr.sq_sig_all = 1;
	attr.cap.max_send_wr = rs->sq_size;
	attr.cap.max_recv_wr = rs->rq_size;
	attr.cap.max_send_sge = 2;
	attr.cap.max_recv_sge = 1;
	attr.cap.max_inline_data = rs->sq_inline;
	if (rdma_create_qp(st->id, NULL, &attr))
		return -errno;
	rs->sq_inline = attr.cap.max_inline_data;
	ret = init_bufs(rs);
	for (i = 0; !ret && i < rs->rq_size; i++)
		ret = rs_post_recv(rs);
	return ret;
}

static bool host_is_net(void)
{
	return __BYTE_ORDER == __BIG_ENDIAN;
}

static void format_conn_data(struct rsocket *rs, struct rs_conn_data *c)
{
	struct rs_stream *st = &rs->st;

	memset(c, 0, sizeof(*c));
	c->version = RS_PROTO_VERSION;
	c->flags = RS_CONN_FLAG_IOMAP | (host_is_net() ? RS_CONN_FLAG_NET : 0);
	c->credits = htobe16(rs->rq_size);
	c->target_iomap_size =
		(uint8_t)rs_value_to_scale(st->target_iomap_size, 8);
	c->target_sgl.addr = htobe64((uintptr_t)st->tbuf);
	c->target_sgl.length = htobe32(RS_SGL_SIZE);
	c->target_sgl.key = htobe32(st->tmr->rkey);
	c->data_buf.addr = htobe64((uintptr_t)st->rbuf);
	c->data_buf.length = htobe32(rs->rbuf_size >> 1);
	c->data_buf.key = htobe32(st->rmr->rkey);
}

/*
 * The peer's connection data (version already checked).  Its values are
 * the peer's: a table size of 0 (we could never advertise) or more than
 * 64 entries (rdma-core sends 2) is refused.
 */
static int save_conn_data(struct rsocket *rs, const struct rs_conn_data *c)
{
	struct rs_stream *st = &rs->st;

	st->remote_sgl.addr = be64toh(c->target_sgl.addr);
	st->remote_sgl.length = be32toh(c->target_sgl.length);
	st->remote_sgl.key = be32toh(c->target_sgl.key);
	if (!st->remote_sgl.length || st->remote_sgl.length > 64)
		return -EPROTO;
	st->remote_sge = 1 % st->remote_sgl.length;
	st->swap = !!(c->flags & RS_CONN_FLAG_NET) != host_is_net();
	if (c->flags & RS_CONN_FLAG_IOMAP) {
		st->remote_iomap.addr = st->remote_sgl.addr +
			sizeof(struct rs_sge) * st->remote_sgl.length;
		st->remote_iomap.length =
			rs_scale_to_value(c->target_iomap_size, 8);
		st->remote_iomap.key = st->remote_sgl.key;
	}
	st->target_sgl[0].addr = be64toh(c->data_buf.addr);
	st->target_sgl[0].length = be32toh(c->data_buf.length);
	st->target_sgl[0].key = be32toh(c->data_buf.key);
	st->target_valid[0] = true;
	st->target_sge = 0;
	st->sgl_next = 1 % RS_SGL_SIZE;
	st->sseq_comp = be16toh(c->credits);
	return 0;
}

static bool conn_data_ok(const void *pdata, uint8_t len)
{
	const struct rs_conn_data *c = pdata;

	return pdata && len >= sizeof(*c) && c->version == RS_PROTO_VERSION;
}

/* ------------------------------------------------------------------ */
/* The CM events                                                       */

static void connect_error(struct rsocket *rs, int err)
{
	rs->state = RS_CONNECT_ERROR;
	rs->err = err;
}

static int event_errno(const struct rdma_cm_event *ev)
{
	if (ev->event == RDMA_CM_EVENT_REJECTED)
		return ECONNREFUSED;
	if (ev->status < 0)
		return -ev->status;
	return ev->status ? ev->status : ECONNREFUSED;
}

/* ROUTE_RESOLVED: the QP and buffers, then the REQ (rdma-core's
 * parameters: flow control, retry and RNR retry counts of 7) */
static void start_connect(struct rsocket *rs)
{
	struct rdma_conn_param param;
	struct rs_conn_data cd;
	int ret = create_ep(rs);

	if (ret) {
		connect_error(rs, -ret);
		return;
	}
	format_conn_data(rs, &cd);
	memset(&param, 0, sizeof(param));
	param.private_data = &cd;
	param.private_data_len = sizeof(cd);
	param.flow_control = 1;
	param.retry_count = 7;
	param.rnr_retry_count = 7;
	if (rdma_connect(rs->st.id, &param))
		connect_error(rs, errno);
	else
		rs->state = RS_CONNECTING;
}

static void addr_resolved(struct rsocket *rs)
{
	struct rs_stream *st = &rs->st;
	int ret;

	rs->state = RS_RESOLVING_ROUTE;
	if (st->route) {
		ret = rdma_set_option(st->id, RDMA_OPTION_IB,
				      RDMA_OPTION_IB_PATH, st->route,
				      st->route_len);
		free(st->route);
		st->route = NULL;
		if (!ret)
			return;		/* ROUTE_RESOLVED follows */
	}
	if (rdma_resolve_route(st->id, RS_RESOLVE_TIMEOUT_MS))
		connect_error(rs, errno);
}

static void established(struct rsocket *rs, const struct rdma_cm_event *ev)
{
	const void *pdata = ev->param.conn.private_data;
	int ret;

	if (rs->state == RS_CONNECTING) {
		if (!conn_data_ok(pdata, ev->param.conn.private_data_len)) {
			connect_error(rs, ENOTSUP);
			rdma_disconnect(rs->st.id);
			return;
		}
		ret = save_conn_data(rs, pdata);
		if (ret) {
			connect_error(rs, -ret);
			rdma_disconnect(rs->st.id);
			return;
		}
	}
	if (rs->state == RS_CONNECTING || rs->state == RS_ACCEPTING)
		rs->state = RS_CONNECT_RDWR;
}

/* A request for a socket that no longer listens: refused */
static void drop_request(struct rdma_cm_event *ev)
{
	struct rdma_cm_id *child = ev->id;

	rdma_reject(child, NULL, 0);
	rdma_ack_cm_event(ev);
	rdma_destroy_id(child);
}

/* One event of this socket's channel.  rs->lock held. */
static void cm_event(struct rsocket *rs, struct rdma_cm_event *ev)
{
	struct rs_stream *st = &rs->st;
	struct rs_req *req;

	switch (ev->event) {
	case RDMA_CM_EVENT_CONNECT_REQUEST:
		req = rs->state == RS_LISTENING ? malloc(sizeof(*req)) : NULL;
		if (!req) {
			drop_request(ev);
			return;
		}
		req->event = ev;	/* acked by raccept */
		req->next = NULL;
		*st->reqs_tail = req;
		st->reqs_tail = &req->next;
		return;
	case RDMA_CM_EVENT_ADDR_RESOLVED:
		if (rs->state == RS_RESOLVING_ADDR)
			addr_resolved(rs);
		break;
	case RDMA_CM_EVENT_ROUTE_RESOLVED:
		if (rs->state == RS_RESOLVING_ROUTE)
			start_connect(rs);
		break;
	case RDMA_CM_EVENT_ESTABLISHED:
		established(rs, ev);
		break;
	case RDMA_CM_EVENT_REJECTED:
	case RDMA_CM_EVENT_ADDR_ERROR:
	case RDMA_CM_EVENT_ROUTE_ERROR:
	case RDMA_CM_EVENT_UNREACHABLE:
	case RDMA_CM_EVENT_CONNECT_ERROR:
		if (rs->state & RS_OPENING)
			connect_error(rs, event_errno(ev));
		break;
	case RDMA_CM_EVENT_DISCONNECTED:
		if (rs->state & RS_CONNECTED)
			rs->state = RS_DISCONNECTED;
		else if (rs->state & RS_OPENING)
			connect_error(rs, ECONNRESET);
		break;
	case RDMA_CM_EVENT_DEVICE_REMOVAL:
		rs->state = RS_ERROR;
		rs->err = ENODEV;
		break;
	default:
		break;
	}
	rdma_ack_cm_event(ev);
}

/* Take every event the channel holds (never blocks).  rs->lock held. */
void rs_cm_input(struct rsocket *rs)
{
	struct rdma_cm_event *ev;

	while (rs->st.chan && !rdma_get_cm_event(rs->st.chan, &ev))
		cm_event(rs, ev);
}

/*
 * Until the connection is made or has failed: 0 once connected,
 * -EINPROGRESS if non-blocking and still opening, else the error.
 * rs->lock held.
 */
int rs_connecting(struct rsocket *rs, bool nonblock)
{
	int ret;

	for (;;) {
		rs_cm_input(rs);
		if (!(rs->state & RS_OPENING))
			break;
		if (nonblock)
			return -EINPROGRESS;
		ret = rs_wait(rs);
		if (ret)
			return ret;
	}
	if (rs->state & RS_CONNECTED)
		return 0;
	if (rs->state == RS_CONNECT_ERROR)
		return -rs->err;
	return -ENOTCONN;
}

/* ------------------------------------------------------------------ */
/* bind, listen, accept, connect                                       */

int rs_stream_bind(struct rsocket *rs, const struct sockaddr *addr)
{
	int ret = 0;

	pthread_mutex_lock(&rs->lock);
	if (rdma_bind_addr(rs->st.id, (struct sockaddr *)addr))
		ret = -errno;
	else
		rs->state = RS_BOUND;
	pthread_mutex_unlock(&rs->lock);
	return ret;
}

int rs_stream_listen(struct rsocket *rs, int backlog)
{
	int ret = 0;

	pthread_mutex_lock(&rs->lock);
	if (rs->state == RS_LISTENING)
		goto out;
	if (rdma_listen(rs->st.id, backlog))
		ret = -errno;
	else
		rs->state = RS_LISTENING;
out:
	pthread_mutex_unlock(&rs->lock);
	return ret;
}

/*
 * The socket of one request: a new channel, the child id moved onto it,
 * the QP, and the REP.  Returns the new rsocket or NULL (the request was
 * refused).  The request's event is acked here.
 */
static struct rsocket *accept_one(struct rsocket *ls, struct rdma_cm_event *ev)
{
	struct rdma_cm_id *child = ev->id;
	struct rdma_conn_param param = ev->param.conn;
	struct rs_conn_data creq, cresp;
	struct rsocket *rs;

	if (!conn_data_ok(param.private_data, param.private_data_len)) {
		drop_request(ev);
		return NULL;
	}
	memcpy(&creq, param.private_data, sizeof(creq));
	rs = rs_alloc(ls, SOCK_STREAM, ls->domain);
	if (!rs || chan_open(rs)) {
		drop_request(ev);
		goto err;
	}
	rdma_ack_cm_event(ev);
	if (rdma_migrate_id(child, rs->st.chan)) {
		rdma_reject(child, NULL, 0);
		rdma_destroy_id(child);
		goto err;
	}
	rs->st.id = child;
	child->context = rs;
	rs->state = RS_ACCEPTING;
	if (create_ep(rs) || save_conn_data(rs, &creq))
		goto err_reject;
	format_conn_data(rs, &cresp);
	param.private_data = &cresp;
	param.private_data_len = sizeof(cresp);
	if (rdma_accept(child, &param))
		goto err_reject;
	if (rs_insert(rs))
		goto err_reject;
	return rs;
err_reject:
	rdma_reject(child, NULL, 0);
err:
	if (rs) {
		rs_stream_close(rs);
		rs_free(rs);
	}
	return NULL;
}

/*
 * raccept: the next request, as a new socket.  As with rdma-core (whose
 * service thread accepts), a blocking raccept returns an established
 * connection; a non-blocking one may return it still in RS_ACCEPTING,
 * finished by the first call that uses it.
 */
int rs_stream_accept(struct rsocket *ls, struct sockaddr *addr,
		     socklen_t *addrlen)
{
	bool nonblock = rs_nonblocking(ls, 0);
	struct rsocket *rs = NULL;
	struct rs_req *req;
	int ret;

	pthread_mutex_lock(&ls->lock);
	while (!rs) {
		if (ls->state != RS_LISTENING) {
			pthread_mutex_unlock(&ls->lock);
			return -EBADF;	/* rdma-core's errno */
		}
		rs_cm_input(ls);
		req = ls->st.reqs;
		if (!req) {
			if (nonblock) {
				pthread_mutex_unlock(&ls->lock);
				return -EAGAIN;
			}
			ret = rs_wait(ls);
			if (ret) {
				pthread_mutex_unlock(&ls->lock);
				return ret;
			}
			continue;
		}
		ls->st.reqs = req->next;
		if (!ls->st.reqs)
			ls->st.reqs_tail = &ls->st.reqs;
		rs = accept_one(ls, req->event);
		free(req);
	}
	pthread_mutex_unlock(&ls->lock);

	if (!nonblock) {
		pthread_mutex_lock(&rs->lock);
		rs_connecting(rs, false);
		pthread_mutex_unlock(&rs->lock);
	}
	if (addr && addrlen)
		rgetpeername(rs->index, addr, addrlen);
	return rs->index;
}

int rs_stream_connect(struct rsocket *rs, const struct sockaddr *addr,
		      socklen_t addrlen)
{
	struct rs_stream *st = &rs->st;
	int ret;

	pthread_mutex_lock(&rs->lock);
	switch (rs->state) {
	case RS_INIT:
	case RS_BOUND:
		rs->state = RS_RESOLVING_ADDR;
		if (rdma_resolve_addr(st->id, NULL, (struct sockaddr *)addr,
				      RS_RESOLVE_TIMEOUT_MS))
			connect_error(rs, errno);
		break;
	case RS_CONNECT_ERROR:
	case RS_DISCONNECTED:
	case RS_ERROR:
		pthread_mutex_unlock(&rs->lock);
		return -ENOTCONN;
	default:
		if (!(rs->state & (RS_OPENING | RS_CONNECTED))) {
			pthread_mutex_unlock(&rs->lock);
			return -EINVAL;	/* listening */
		}
		break;
	}
	ret = rs_connecting(rs, rs_nonblocking(rs, 0));
	pthread_mutex_unlock(&rs->lock);
	return ret;
}

/* ------------------------------------------------------------------ */
/* shutdown and close                                                  */

/*
 * rdma-core's rshutdown: the peer is told with a control message once
 * (SHUTDOWN when we only stop writing and still read, DISCONNECT when
 * neither), then everything sent must complete; a socket left
 * disconnected has its QP moved to the error state, so that a thread in
 * rpoll wakes up on the flushed receives.  Waits even if non-blocking.
 */
int rs_stream_shutdown(struct rsocket *rs, int how)
{
	int ret = 0, ctrl;

	pthread_mutex_lock(&rs->slock);
	pthread_mutex_lock(&rs->lock);
	if (rs->state & RS_CONNECTED) {
		if (how == SHUT_RDWR) {
			ctrl = RS_CTRL_DISCONNECT;
			rs->state &= ~(RS_READABLE | RS_WRITABLE);
		} else if (how == SHUT_WR) {
			rs->state &= ~RS_WRITABLE;
			ctrl = (rs->state & RS_READABLE) ? RS_CTRL_SHUTDOWN :
							   RS_CTRL_DISCONNECT;
		} else {
			rs->state &= ~RS_READABLE;
			if (rs->state & RS_WRITABLE)
				goto out;
			ctrl = RS_CTRL_DISCONNECT;
		}
		if (!rs_ctrl_avail(rs))
			ret = rs_get_comp(rs, false, rs_conn_all_sends_done);
		if (!ret && (rs->state & RS_CONNECTED) && rs_ctrl_avail(rs)) {
			rs->st.ctrl_seqno++;
			ret = rs_post_ctrl(rs, ctrl);
		}
	}
	if (!ret && (rs->state & RS_CONNECTED))
		ret = rs_get_comp(rs, false, rs_conn_all_sends_done);
out:
	if ((rs->state & RS_DISCONNECTED) && rs->st.id && rs->st.id->qp) {
		struct ibv_qp_attr attr = { .qp_state = IBV_QPS_ERR };

		ibv_req_notify_cq(rs->st.cq, 0);
		rs->st.cq_armed = true;
		ibv_modify_qp(rs->st.id->qp, &attr, IBV_QP_STATE);
	}
	pthread_mutex_unlock(&rs->lock);
	pthread_mutex_unlock(&rs->slock);
	return ret == -EINTR ? 0 : ret;
}

/* Everything the socket holds, whatever state it reached (a partly built
 * socket too).  Not in the table any more; no other thread uses it. */
void rs_stream_close(struct rsocket *rs)
{
	struct rs_stream *st = &rs->st;
	struct rdma_cm_event *ev;
	struct rs_req *req;

	/* events still queued: acked (a request refused) before the ids go */
	while (st->chan && !rdma_get_cm_event(st->chan, &ev)) {
		if (ev->event == RDMA_CM_EVENT_CONNECT_REQUEST)
			drop_request(ev);
		else
			rdma_ack_cm_event(ev);
	}
	while ((req = st->reqs)) {
		st->reqs = req->next;
		drop_request(req->event);
		free(req);
	}
	rs_iomap_free_all(rs);
	if (st->id && (rs->state & (RS_CONNECTED | RS_DISCONNECTED |
				    RS_ACCEPTING | RS_CONNECTING)))
		rdma_disconnect(st->id);
	if (st->id && st->id->qp)
		rdma_destroy_qp(st->id);
	if (st->cq) {
		/* events were acked as they were taken */
		ibv_destroy_cq(st->cq);
	}
	if (st->cq_chan)
		ibv_destroy_comp_channel(st->cq_chan);
	if (st->smr)
		ibv_dereg_mr(st->smr);
	if (st->tmr)
		ibv_dereg_mr(st->tmr);
	if (st->rmr)
		ibv_dereg_mr(st->rmr);
	free(st->sbuf);
	free(st->tbuf);
	free(st->rbuf);
	free(st->rmsg);
	free(st->iomap_seen);
	free(st->route);
	if (st->id)
		rdma_destroy_id(st->id);
	if (st->chan)
		rdma_destroy_event_channel(st->chan);
}
