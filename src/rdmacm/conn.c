// SPDX-License-Identifier: MIT
/*
 * Connections of RC and UC ids: the IB CM exchange on a TCP stream.
 *
 *   active                               passive
 *   rdma_connect      --- REQ --->       CONNECT_REQUEST (new id)
 *                                        rdma_accept: QP to RTR, RTS
 *   CONNECT_RESPONSE  <--- REP ---
 *   (QP to RTR, RTS in rdma_get_cm_event, or rdma_establish)
 *   ESTABLISHED       --- RTU --->       ESTABLISHED
 *   rdma_disconnect   --- DREQ -->       DISCONNECTED
 *   DISCONNECTED      <-- DREP ---       rdma_disconnect
 *   TIMEWAIT_EXIT  (both, after the IB CM's timewait)
 *
 * A refused connection (nobody listens on the port) is the IB CM's REJ
 * "invalid service ID" (8); rdma_reject is "consumer defined" (28); a
 * peer that does not answer makes the connect UNREACHABLE (-ETIMEDOUT).
 * A stream that breaks is what the IB CM sees when the peer's kernel
 * cleans up after a process that died: REJ before the connection is
 * established, DREQ after.  The events, their status and private data
 * sizes are the kernel's (cma_ib_handler, cma_ib_req_handler).
 *
 * The states are the IB CM's (enum cm_ib_state) beside the RDMA CM's
 * (enum cm_state), as in the kernel.
 */
#include <arpa/inet.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "../common/backoff.h"
#include "cma.h"
#include "../common/nocancel.h"

static const char *const ib_names[] = {
	[IB_NONE] = "NONE", [IB_IDLE] = "IDLE",
	[IB_REQ_SENT] = "REQ_SENT", [IB_REQ_RCVD] = "REQ_RCVD",
	[IB_REP_SENT] = "REP_SENT", [IB_REP_RCVD] = "REP_RCVD",
	[IB_ESTABLISHED] = "ESTABLISHED", [IB_DREQ_SENT] = "DREQ_SENT",
	[IB_DREQ_RCVD] = "DREQ_RCVD", [IB_TIMEWAIT] = "TIMEWAIT",
	[IB_SIDR_REQ_SENT] = "SIDR_REQ_SENT",
	[IB_SIDR_REQ_RCVD] = "SIDR_REQ_RCVD",
};

const char *cm_ib_name(enum cm_ib_state s)
{
	return (unsigned int)s < ARRAY_SIZE(ib_names) ? ib_names[s] : "?";
}

static void set_ib(struct cm_id *id, enum cm_ib_state s)
{
	shca_dbg("id %p: CM %s -> %s", (void *)&id->id, cm_ib_name(id->ib),
		 cm_ib_name(s));
	id->ib = s;
	if (s != IB_REQ_SENT) {
		/* a REQ goes again only while it is unanswered */
		free(id->req_copy);
		id->req_copy = NULL;
	}
}

static void resend_req(struct cm_id *id);

static void queue_conn_event(struct cm_id *id, enum rdma_cm_event_type type,
			     int status, const void *pdata, size_t len)
{
	struct cm_event *ev = cm_event_new(id, type, status);

	if (!ev)
		return;
	cm_event_pdata(ev, pdata, len, false);
	cm_event_queue(id, ev);
}

/* A REJECTED event with the IB CM's reason and REJ private data. */
static void queue_rejected(struct cm_id *id, int reason, const void *pdata)
{
	static const uint8_t zero[CM_REJ_PDATA];

	if (id->state == CM_CONNECT)
		queue_conn_event(id, RDMA_CM_EVENT_REJECTED, reason,
				 pdata ? pdata : zero, CM_REJ_PDATA);
}

static void release_sock(struct cm_id *id)
{
	if (id->sock) {
		id->sock->id = NULL;
		cm_sock_release(id->sock);
		id->sock = NULL;
	}
}

static void send_empty(struct cm_id *id, uint8_t type)
{
	struct cm_wire_hdr h;

	cm_wire_empty(&h, type);
	cm_sock_send(id->sock, &h, sizeof(h));
}

static void send_rej(struct cm_sock *s, uint16_t reason, uint8_t msg_rejected,
		     const void *pdata, uint8_t len)
{
	struct cm_wire_rej w;
	struct cm_rej r = { .reason = reason, .msg_rejected = msg_rejected };

	if (len)
		memcpy(r.private_data, pdata, len);
	cm_rej_pack(&w, &r);
	cm_sock_send(s, &w, sizeof(w));
}

/* The IB CM's timewait, then TIMEWAIT_EXIT (cm_enter_timewait: 4.096 us
 * << the local ACK timeout, 2.1 s for the RoCE default of 19). */
static void enter_timewait(struct cm_id *id)
{
	unsigned int ms = (unsigned int)((4096ull << MIN(id->timeout, 31)) /
					 1000000);

	release_sock(id);
	set_ib(id, IB_TIMEWAIT);
	cm_timer_arm(&id->timer, ms ? ms : 1);
}

static void disconnected(struct cm_id *id, int status)
{
	if (id->state != CM_CONNECT)
		return;
	id->state = CM_DISCONNECT;
	queue_conn_event(id, RDMA_CM_EVENT_DISCONNECTED, status, NULL, 0);
}

/* The id's timer: DREQ timeout, end of timewait, SIDR retransmission,
 * a paused listener.  In the CM thread, cm_lock held. */
void cm_id_timer(struct cm_id *id)
{
	switch (id->ib) {
	case IB_DREQ_SENT:
		disconnected(id, -ETIMEDOUT);
		enter_timewait(id);
		break;
	case IB_TIMEWAIT:
		set_ib(id, IB_IDLE);
		if (id->state == CM_DISCONNECT)
			queue_conn_event(id, RDMA_CM_EVENT_TIMEWAIT_EXIT, 0,
					 NULL, 0);
		break;
	case IB_SIDR_REQ_SENT:
		cm_dgram_timer(id);
		break;
	case IB_REQ_SENT:
		resend_req(id);
		break;
	default:
		if (id->state == CM_LISTEN && id->sock)
			cm_sock_watch(id->sock, EPOLLIN);
		break;
	}
}

/* ------------------------------------------------------------------ */
/* Passive side                                                        */

int cm_listen_stream(struct cm_id *id)
{
	if (listen(id->sock->fd, CM_DEFAULT_BACKLOG))
		return -errno;
	id->sock->kind = CM_SOCK_LISTEN;
	return cm_sock_watch(id->sock, EPOLLIN);
}

static void pending_unlink(struct cm_sock *s)
{
	struct cm_sock **pp;

	if (!s->listener)
		return;
	for (pp = &s->listener->pending; *pp; pp = &(*pp)->next_pending) {
		if (*pp == s) {
			*pp = s->next_pending;
			break;
		}
	}
	s->listener = NULL;
	s->next_pending = NULL;
}

/* Refuse a request that has no id yet, and let the stream go. */
static void pending_reject(struct cm_sock *s, uint16_t reason)
{
	pending_unlink(s);
	send_rej(s, reason, CM_MSG_REQ, NULL, 0);
	cm_sock_release(s);
}

void cm_listen_input(struct cm_sock *s)
{
	struct cm_id *listener = s->id;

	for (;;) {
		int one = 1, fd = accept4(s->fd, NULL, NULL,
					  SOCK_NONBLOCK | SOCK_CLOEXEC);
		struct cm_sock *ns;

		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			if (errno != EAGAIN && errno != EWOULDBLOCK) {
				/* out of fds: pause rather than spin, longer
				 * while it lasts (common/backoff.h) */
				shca_warn_once("accept: %s", strerror(errno));
				cm_sock_watch(s, 0);
				if (listener)
					cm_timer_arm(&listener->timer,
						     shca_backoff_next(
						     &listener->accept_backoff));
			}
			return;
		}
		if (listener)
			shca_backoff_reset(&listener->accept_backoff);
		if (!listener) {
			close(fd);
			continue;
		}
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		ns = cm_sock_new(fd, CM_SOCK_STREAM);
		if (!ns) {
			close(fd);
			continue;
		}
		ns->listener = listener;
		ns->next_pending = listener->pending;
		listener->pending = ns;
		if (cm_sock_watch(ns, EPOLLIN | EPOLLRDHUP)) {
			pending_unlink(ns);
			cm_sock_close(ns);
		}
	}
}

/* A REQ on a stream the listener accepted: a new id and its
 * CONNECT_REQUEST (cma_ib_req_handler). */
static void req_received(struct cm_id *listener, struct cm_sock *s,
			 const uint8_t *msg)
{
	struct sockaddr_storage local, peer;
	socklen_t llen = sizeof(local), plen = sizeof(peer);
	struct rdma_conn_param *p;
	struct cm_device *dev;
	struct cm_channel *ch;
	struct cm_event *ev;
	struct cm_id *child;
	union ibv_gid dgid;
	struct cm_req req;
	uint8_t idx;

	if (cm_req_unpack(msg, &req)) {
		shca_warn("malformed REQ, connection dropped");
		pending_unlink(s);
		cm_sock_close(s);
		return;
	}
	/* an XRC initiator's REQ is for an XRC target (XRC_RECV) */
	if (req.qp_type == IBV_QPT_XRC_SEND)
		req.qp_type = IBV_QPT_XRC_RECV;
	if (listener->state != CM_LISTEN ||
	    req.qp_type != listener->id.qp_type ||
	    listener->pending_reqs >= listener->backlog ||
	    getsockname(s->fd, (struct sockaddr *)&local, &llen) ||
	    getpeername(s->fd, (struct sockaddr *)&peer, &plen) ||
	    cm_device_by_addr((struct sockaddr *)&local, &dev, &idx)) {
		pending_reject(s, IB_CM_REJ_CONSUMER_DEFINED);
		return;
	}
	cm_addr_unmap(&local);
	cm_addr_unmap(&peer);
	ch = listener->sync ? cm_channel_new() : listener->chan;
	child = ch ? cm_id_new(ch, listener->id.context, listener->id.ps,
			       (enum ibv_qp_type)req.qp_type) : NULL;
	if (child)
		child->sync = listener->sync;	/* its channel: with it */
	if (!child || cm_device_bind(child, dev, idx)) {
		if (child)
			cm_id_destroy_locked(child);
		else if (ch && ch != listener->chan)
			cm_channel_free(ch);
		pending_reject(s, IB_CM_REJ_CONSUMER_DEFINED);
		return;
	}
	pending_unlink(s);
	s->id = child;
	child->sock = s;

	memcpy(&child->id.route.addr.src_storage, &local,
	       cm_addrlen((struct sockaddr *)&local));
	memcpy(&child->id.route.addr.dst_storage, &peer,
	       cm_addrlen((struct sockaddr *)&peer));
	cm_ip_to_gid((struct sockaddr *)&peer, &dgid);
	cm_path_init(child, &dgid, MIN((enum ibv_mtu)req.path_mtu,
				       dev->active_mtu));
	child->id.route.addr.addr.ibaddr.sgid = child->path.sgid;
	child->id.route.addr.addr.ibaddr.dgid = child->path.dgid;
	child->id.route.addr.addr.ibaddr.pkey = child->path.pkey;

	/* the IB CM's view of the REQ: what it offers is what we take */
	child->remote_qpn = req.qpn;
	child->sq_psn = req.psn;
	child->cm_initiator_depth = req.responder_resources;
	child->cm_responder_resources = req.initiator_depth;
	child->initiator_depth = req.responder_resources;
	child->responder_resources = req.initiator_depth;
	child->retry_count = req.retry_count;
	child->rnr_retry_count = req.rnr_retry_count;
	child->flow_control = req.flow_control;
	child->remote_ece.vendor_id = req.ece_vendor_id;
	child->remote_ece.options = req.ece_options;
	child->state = CM_CONNECT;
	set_ib(child, IB_REQ_RCVD);

	ev = cm_listener_adopt(listener, child);
	if (!ev)
		return;
	cm_event_pdata(ev, req.private_data, CM_REQ_PDATA, false);
	p = &ev->event.param.conn;
	p->responder_resources = req.initiator_depth;
	p->initiator_depth = req.responder_resources;
	p->flow_control = req.flow_control;
	p->retry_count = req.retry_count;
	p->rnr_retry_count = req.rnr_retry_count;
	p->srq = req.srq;
	p->qp_num = req.qpn;
	cm_event_queue(listener, ev);
}

/* rdma_accept on a new id: the REP (cma_accept_ib).  cm_lock held. */
int cm_accept_stream(struct cm_id *id, const void *pdata, uint8_t pdata_len)
{
	struct cm_wire_rep w;
	struct cm_rep rep = { 0 };

	if (id->ib != IB_REQ_RCVD || !id->sock)
		return -EINVAL;
	if (pdata_len > CM_REP_PDATA)
		return -EINVAL;
	rep.qpn = id->id.qp ? id->id.qp->qp_num : id->qp_num;
	rep.psn = id->seq_num;
	rep.ece_vendor_id = id->remote_ece.vendor_id;
	rep.ece_options = id->local_ece.options;
	rep.responder_resources = id->responder_resources;
	rep.initiator_depth = id->initiator_depth;
	rep.rnr_retry_count = id->rep_rnr_retry_count;
	rep.flow_control = id->flow_control;
	rep.srq = id->srq;
	if (pdata_len)
		memcpy(rep.private_data, pdata, pdata_len);
	id->cm_initiator_depth = id->initiator_depth;
	id->cm_responder_resources = id->responder_resources;
	cm_rep_pack(&w, &rep);
	cm_sock_send(id->sock, &w, sizeof(w));
	set_ib(id, IB_REP_SENT);
	return 0;
}

/* ------------------------------------------------------------------ */
/* Active side                                                         */

/*
 * A refused REQ goes again after 1, 2, 4, 8 and 16 ms before the id
 * reports REJECTED (status 8).  softhca resolves addresses and routes at
 * once (no ARP, no path query) and its REQ is a TCP SYN, so an active
 * side reaches the passive one microseconds after it learns the port,
 * sooner than through any kernel's rdma_cm; a program that publishes its
 * port just before rdma_listen (qperf 0.4.11 sends it first) would lose
 * that race now and then, where on hardware it never does.  31 ms is
 * about what resolution and a REQ MAD take there.
 */
#define CM_REFUSED_RETRIES 5

static bool retry_refused(struct cm_id *id)
{
	if (id->refused >= CM_REFUSED_RETRIES || !id->req_copy ||
	    id->state != CM_CONNECT || cm_sock_reopen(id))
		return false;
	cm_timer_arm(&id->timer, 1u << id->refused++);
	return true;
}

static void forget_req(struct cm_id *id)
{
	free(id->req_copy);
	id->req_copy = NULL;
}

static void connect_failed(struct cm_id *id, int err);

/* Send the REQ: connect the id's stream (cm_lock held). */
static int send_req(struct cm_id *id)
{
	struct rdma_addr *a = &id->id.route.addr;
	int ret;

	ret = connect(id->sock->fd, &a->dst_addr, cm_addrlen(&a->dst_addr));
	if (ret && errno != EINPROGRESS)
		return errno;
	id->sock->connecting = ret != 0;
	cm_sock_send(id->sock, id->req_copy, sizeof(*id->req_copy));
	return -cm_sock_watch(id->sock, EPOLLIN | EPOLLRDHUP | EPOLLOUT);
}

/* The timer after a refusal: the REQ again, on the fresh socket. */
static void resend_req(struct cm_id *id)
{
	int err = ECONNREFUSED;

	if (id->sock && id->req_copy && id->state == CM_CONNECT)
		err = send_req(id);
	if (err > 0)
		connect_failed(id, err);
	else if (err < 0)
		connect_failed(id, -err);
}

static void connect_failed(struct cm_id *id, int err)
{
	if (id->sock)
		id->sock->out_len = 0;	/* the REQ goes nowhere */
	if (id->ib == IB_REQ_SENT && err == ECONNREFUSED && retry_refused(id))
		return;
	release_sock(id);
	forget_req(id);
	if (id->ib != IB_REQ_SENT)
		return;
	set_ib(id, IB_IDLE);
	if (err == ECONNREFUSED)	/* nobody listens: no such service */
		queue_rejected(id, IB_CM_REJ_INVALID_SERVICE_ID, NULL);
	else if (id->state == CM_CONNECT)
		queue_conn_event(id, RDMA_CM_EVENT_UNREACHABLE, -ETIMEDOUT,
				 NULL, 0);
}

void cm_stream_connected(struct cm_sock *s, int err)
{
	if (err && s->id)
		connect_failed(s->id, err);
}

/* rdma_connect: connect the id's stream and send the REQ (cma_connect_ib).
 * cm_lock held; the caller has set the id's parameters. */
int cm_connect_stream(struct cm_id *id, const void *pdata, uint8_t pdata_len)
{
	struct cm_wire_req w;
	struct cm_req req = { 0 };
	int ret;

	if (pdata_len > CM_REQ_PDATA)
		return -EINVAL;
	if (!id->sock)
		return -EINVAL;
	req.qpn = id->id.qp ? id->id.qp->qp_num : id->qp_num;
	req.psn = id->seq_num;
	req.ece_vendor_id = id->local_ece.vendor_id;
	req.ece_options = id->local_ece.options;
	req.pkey = 0xffff;
	req.qp_type = (uint8_t)id->id.qp_type;
	req.responder_resources = id->responder_resources;
	req.initiator_depth = id->initiator_depth;
	req.retry_count = id->retry_count;
	req.rnr_retry_count = id->rnr_retry_count;
	req.flow_control = id->flow_control;
	req.srq = id->srq;
	req.path_mtu = (uint8_t)id->path_mtu;
	req.local_ack_timeout = id->timeout;
	if (pdata_len)
		memcpy(req.private_data, pdata, pdata_len);
	cm_req_pack(&w, &req);

	id->cm_initiator_depth = id->initiator_depth;
	id->cm_responder_resources = id->responder_resources;
	forget_req(id);
	id->req_copy = malloc(sizeof(w));
	if (!id->req_copy)
		return -ENOMEM;
	memcpy(id->req_copy, &w, sizeof(w));
	id->refused = 0;
	set_ib(id, IB_REQ_SENT);
	ret = send_req(id);
	if (ret > 0) {
		/* reported as the IB CM would: asynchronously */
		id->state = CM_CONNECT;
		connect_failed(id, ret);
		return 0;
	}
	return ret;
}

static void rep_received(struct cm_id *id, const uint8_t *msg)
{
	struct rdma_conn_param *p;
	struct cm_event *ev;
	struct cm_rep rep;

	if (id->ib != IB_REQ_SENT)
		return;
	if (cm_rep_unpack(msg, &rep)) {
		shca_warn("malformed REP ignored");
		return;
	}
	id->remote_qpn = rep.qpn;
	id->sq_psn = rep.psn;
	id->cm_initiator_depth = rep.responder_resources;
	id->cm_responder_resources = rep.initiator_depth;
	id->rnr_retry_count = rep.rnr_retry_count;
	set_ib(id, IB_REP_RCVD);
	if (id->state != CM_CONNECT)
		return;
	ev = cm_event_new(id, RDMA_CM_EVENT_CONNECT_RESPONSE, 0);
	if (!ev)
		return;
	ev->conn_resp = true;
	ev->ece.vendor_id = rep.ece_vendor_id;
	ev->ece.options = rep.ece_options;
	cm_event_pdata(ev, rep.private_data, CM_REP_PDATA, false);
	p = &ev->event.param.conn;
	p->responder_resources = rep.initiator_depth;
	p->initiator_depth = rep.responder_resources;
	p->flow_control = rep.flow_control;
	p->rnr_retry_count = rep.rnr_retry_count;
	p->srq = rep.srq;
	p->qp_num = rep.qpn;
	cm_event_queue(id, ev);
}

/* The RTU: rdma_establish, or the CONNECT_RESPONSE processed with a QP
 * (cma_rep_recv).  On a bad state the kernel rejects the connection. */
int cm_establish_stream(struct cm_id *id)
{
	if (id->ib != IB_REP_RCVD) {
		if (id->ib == IB_REQ_SENT && id->sock) {
			send_rej(id->sock, IB_CM_REJ_CONSUMER_DEFINED,
				 CM_MSG_REP, NULL, 0);
			set_ib(id, IB_IDLE);
			release_sock(id);
		}
		return -EINVAL;
	}
	send_empty(id, CM_MSG_RTU);
	set_ib(id, IB_ESTABLISHED);
	return 0;
}

/* ------------------------------------------------------------------ */
/* Both sides                                                          */

static void rtu_received(struct cm_id *id)
{
	if (id->ib != IB_REP_SENT)
		return;	/* after rdma_notify(IBV_EVENT_COMM_EST): done */
	set_ib(id, IB_ESTABLISHED);
	if (id->state == CM_CONNECT)
		queue_conn_event(id, RDMA_CM_EVENT_ESTABLISHED, 0, NULL, 0);
}

static void rej_received(struct cm_id *id, const uint8_t *msg)
{
	struct cm_rej rej;

	switch (id->ib) {
	case IB_REQ_SENT:
	case IB_REP_RCVD:
	case IB_REQ_RCVD:
	case IB_REP_SENT:
		break;
	default:
		return;
	}
	cm_rej_unpack(msg, &rej);
	set_ib(id, IB_IDLE);
	release_sock(id);
	queue_rejected(id, rej.reason, rej.private_data);
}

static void dreq_received(struct cm_id *id)
{
	switch (id->ib) {
	case IB_ESTABLISHED:
	case IB_DREQ_SENT:	/* both sides disconnect at once */
	case IB_REP_SENT:	/* the RTU is implied */
		cm_timer_cancel(&id->timer);
		set_ib(id, IB_DREQ_RCVD);
		disconnected(id, 0);
		break;
	default:
		break;
	}
}

static void drep_received(struct cm_id *id)
{
	if (id->ib != IB_DREQ_SENT)
		return;
	cm_timer_cancel(&id->timer);
	disconnected(id, 0);
	enter_timewait(id);
}

void cm_stream_input(struct cm_sock *s, const uint8_t *msg, size_t len)
{
	struct cm_id *id = s->id;
	uint8_t type;

	if (cm_wire_check(msg, len, &type))
		return;
	if (s->listener) {
		if (type == CM_MSG_REQ) {
			req_received(s->listener, s, msg);
		} else {
			pending_unlink(s);
			cm_sock_close(s);
		}
		return;
	}
	if (!id)
		return;
	shca_dbg("id %p: %s in %s", (void *)&id->id, cm_msg_name(type),
		 cm_ib_name(id->ib));
	switch (type) {
	case CM_MSG_REP:
		rep_received(id, msg);
		break;
	case CM_MSG_RTU:
		rtu_received(id);
		break;
	case CM_MSG_REJ:
		rej_received(id, msg);
		break;
	case CM_MSG_DREQ:
		dreq_received(id);
		break;
	case CM_MSG_DREP:
		drep_received(id);
		break;
	default:
		shca_warn("unexpected %s on a connection, ignored",
			  cm_msg_name(type));
		break;
	}
}

/*
 * The stream broke: the peer process is gone (its kernel would have
 * rejected or disconnected on its behalf) or the network failed.
 */
void cm_stream_hangup(struct cm_sock *s)
{
	struct cm_id *id = s->id;

	if (s->listener) {
		pending_unlink(s);
		cm_sock_close(s);
		return;
	}
	if (!id) {
		cm_sock_close(s);
		return;
	}
	id->sock = NULL;
	cm_sock_close(s);
	switch (id->ib) {
	case IB_REQ_SENT:
	case IB_REP_RCVD:
	case IB_REP_SENT:
		set_ib(id, IB_IDLE);
		queue_rejected(id, IB_CM_REJ_CONSUMER_DEFINED, NULL);
		break;
	case IB_REQ_RCVD:
		set_ib(id, IB_IDLE);
		queue_rejected(id, IB_CM_REJ_TIMEOUT, NULL);
		break;
	case IB_ESTABLISHED:
		set_ib(id, IB_DREQ_RCVD);
		disconnected(id, 0);
		break;
	case IB_DREQ_SENT:
		cm_timer_cancel(&id->timer);
		disconnected(id, 0);
		enter_timewait(id);
		break;
	default:
		break;
	}
}

/* What destroying an id sends (the IB CM's cm_destroy_id). */
void cm_stream_teardown(struct cm_id *id)
{
	struct cm_sock *s;

	while ((s = id->pending)) {
		/* requests nobody will see: as if nobody listened */
		pending_reject(s, IB_CM_REJ_INVALID_SERVICE_ID);
	}
	if (id->sock) {
		switch (id->ib) {
		case IB_REQ_SENT:
			send_rej(id->sock, IB_CM_REJ_TIMEOUT, CM_MSG_REQ,
				 NULL, 0);
			break;
		case IB_REQ_RCVD:
			send_rej(id->sock, IB_CM_REJ_CONSUMER_DEFINED,
				 CM_MSG_REQ, NULL, 0);
			break;
		case IB_REP_SENT:
		case IB_REP_RCVD:
			send_rej(id->sock, IB_CM_REJ_CONSUMER_DEFINED,
				 CM_MSG_REP, NULL, 0);
			break;
		case IB_ESTABLISHED:
			send_empty(id, CM_MSG_DREQ);
			break;
		case IB_DREQ_RCVD:
			send_empty(id, CM_MSG_DREP);
			break;
		default:
			break;
		}
	}
	release_sock(id);
}

/* rdma_reject (ib_send_cm_rej).  cm_lock held. */
int cm_reject_stream(struct cm_id *id, const void *pdata, uint8_t pdata_len,
		     uint16_t reason)
{
	uint8_t msg;

	if (pdata_len > CM_REJ_PDATA)
		return -EINVAL;
	switch (id->ib) {
	case IB_REQ_SENT:
	case IB_REQ_RCVD:
		msg = CM_MSG_REQ;
		break;
	case IB_REP_SENT:
	case IB_REP_RCVD:
		msg = CM_MSG_REP;
		break;
	default:
		return -EINVAL;
	}
	if (id->sock)
		send_rej(id->sock, reason, msg, pdata, pdata_len);
	set_ib(id, IB_IDLE);
	release_sock(id);
	return 0;
}

/* rdma_disconnect: initiate (DREQ) or answer (DREP) a disconnection;
 * the kernel ignores the other states and returns 0. */
int cm_disconnect_stream(struct cm_id *id)
{
	switch (id->ib) {
	case IB_ESTABLISHED:
		send_empty(id, CM_MSG_DREQ);
		set_ib(id, IB_DREQ_SENT);
		cm_timer_arm(&id->timer, CM_DREQ_TIMEOUT_MS);
		break;
	case IB_DREQ_RCVD:
		send_empty(id, CM_MSG_DREP);
		enter_timewait(id);
		break;
	default:
		break;
	}
	return 0;
}

/* ------------------------------------------------------------------ */
/* Exported calls                                                      */

int rdma_listen(struct rdma_cm_id *rid, int backlog)
{
	struct cm_id *id;
	int ret = 0;

	if (!rid)
		return cm_err(-EINVAL);
	id = to_cm_id(rid);
	pthread_mutex_lock(&cm_lock);
	if (id->state == CM_IDLE) {
		struct sockaddr_in any = { .sin_family = AF_INET };

		ret = cm_bind_locked(id, (struct sockaddr *)&any);
	}
	if (!ret && id->state != CM_ADDR_BOUND)
		ret = -EINVAL;
	if (!ret) {
		id->backlog = backlog > 0 && backlog < CM_DEFAULT_BACKLOG ?
			      backlog : CM_DEFAULT_BACKLOG;
		ret = cm_is_ud(id) ? cm_listen_dgram(id) : cm_listen_stream(id);
	}
	if (!ret)
		id->state = CM_LISTEN;
	pthread_mutex_unlock(&cm_lock);
	return ret ? cm_err(ret) : 0;
}

/* librdmacm's ucma_valid_param: the checks rdma-core makes itself. */
static int valid_param(struct cm_id *id, const struct rdma_conn_param *p)
{
	if (id->id.ps != RDMA_PS_TCP)
		return 0;
	if (!id->id.qp && !p)
		return -EINVAL;
	if (!p)
		return 0;
	if (!id->dev)
		return -EINVAL;
	if (p->responder_resources != RDMA_MAX_RESP_RES &&
	    p->responder_resources > id->dev->max_responder_resources)
		return -EINVAL;
	if (p->initiator_depth != RDMA_MAX_INIT_DEPTH &&
	    p->initiator_depth > id->dev->max_initiator_depth)
		return -EINVAL;
	return 0;
}

/* The consumer's private data behind rdma_create_ep's ai_connect data. */
static uint8_t private_data(struct cm_id *id, const struct rdma_conn_param *p,
			    uint8_t *buf)
{
	size_t len = 0;

	if (id->connect_len) {
		len = MIN(id->connect_len, 255);
		memcpy(buf, id->connect, len);
	}
	if (p && p->private_data && p->private_data_len) {
		size_t n = MIN((size_t)p->private_data_len, 255 - len);

		memcpy(buf + len, p->private_data, n);
		len += p->private_data_len;	/* overflow: too long */
	}
	return len > 255 ? 255 : (uint8_t)len;
}

int rdma_connect(struct rdma_cm_id *rid, struct rdma_conn_param *p)
{
	uint8_t pdata[256];
	uint8_t len;
	struct cm_id *id;
	int ret;

	if (!rid)
		return cm_err(-EINVAL);
	id = to_cm_id(rid);
	pthread_mutex_lock(&cm_lock);
	ret = valid_param(id, p);
	if (ret)
		goto out;
	id->initiator_depth = p && p->initiator_depth != RDMA_MAX_INIT_DEPTH ?
			      p->initiator_depth :
			      id->dev ? id->dev->max_initiator_depth : 0;
	id->responder_resources =
		p && p->responder_resources != RDMA_MAX_RESP_RES ?
		p->responder_resources :
		id->dev ? id->dev->max_responder_resources : 0;
	if (id->state != CM_ROUTE_RESOLVED) {
		ret = -EINVAL;
		goto out;
	}
	id->qp_num = rid->qp ? rid->qp->qp_num : p ? p->qp_num : 0;
	id->srq = rid->qp ? !!rid->qp->srq : p ? !!p->srq : false;
	id->retry_count = p ? MIN(p->retry_count, 7) : 7;
	id->rnr_retry_count = p ? MIN(p->rnr_retry_count, 7) : 7;
	id->flow_control = p ? !!p->flow_control : 0;
	len = private_data(id, p, pdata);
	id->state = CM_CONNECT;
	ret = cm_is_ud(id) ? cm_connect_dgram(id, pdata, len) :
			     cm_connect_stream(id, pdata, len);
	if (ret) {
		id->state = CM_ROUTE_RESOLVED;
		if (id->ib == IB_REQ_SENT)
			set_ib(id, IB_NONE);
		goto out;
	}
	free(id->connect);
	id->connect = NULL;
	id->connect_len = 0;
out:
	pthread_mutex_unlock(&cm_lock);
	return ret ? cm_err(ret) : cm_complete(id);
}

int rdma_accept(struct rdma_cm_id *rid, struct rdma_conn_param *p)
{
	uint8_t pdata[256];
	struct cm_id *id;
	uint8_t len;
	int ret;

	if (!rid)
		return cm_err(-EINVAL);
	id = to_cm_id(rid);
	pthread_mutex_lock(&cm_lock);
	ret = valid_param(id, p);
	if (!ret && !id->dev)
		ret = -EINVAL;	/* no request: no device */
	if (ret)
		goto out;
	if (!p || p->initiator_depth == RDMA_MAX_INIT_DEPTH)
		id->initiator_depth = MIN(id->initiator_depth,
					  id->dev->max_initiator_depth);
	else
		id->initiator_depth = p->initiator_depth;
	if (!p || p->responder_resources == RDMA_MAX_RESP_RES)
		id->responder_resources = MIN(id->responder_resources,
					      id->dev->max_responder_resources);
	else
		id->responder_resources = p->responder_resources;
	if (!cm_is_ud(id)) {
		ret = cm_modify_qp_rtr(id, id->responder_resources);
		if (!ret)
			ret = cm_modify_qp_rts(id, id->initiator_depth);
		if (ret)
			goto out;
	}
	id->qp_num = rid->qp ? rid->qp->qp_num : p ? p->qp_num : 0;
	id->srq = rid->qp ? !!rid->qp->srq : p ? !!p->srq : false;
	id->flow_control = p ? !!p->flow_control : 0;
	id->rep_rnr_retry_count = p ? MIN(p->rnr_retry_count, 7) : 7;
	len = private_data(id, p, pdata);
	if (id->state != CM_CONNECT)
		ret = -EINVAL;
	else if (cm_is_ud(id))
		ret = cm_answer_dgram(id, IB_SIDR_SUCCESS, 0,
				      pdata, len);
	else
		ret = cm_accept_stream(id, pdata, len);
	if (ret) {
		/* the kernel's __rdma_accept: error state, then reject */
		cm_modify_qp_err(id);
		if (cm_is_ud(id) && id->ib == IB_SIDR_REQ_RCVD)
			cm_answer_dgram(id, IB_SIDR_REJECT, 0, NULL, 0);
		else if (!cm_is_ud(id) && id->ib == IB_REQ_RCVD)
			cm_reject_stream(id, NULL, 0,
					 IB_CM_REJ_CONSUMER_DEFINED);
	}
out:
	pthread_mutex_unlock(&cm_lock);
	if (ret)
		return cm_err(ret);
	return cm_is_ud(id) ? 0 : cm_complete(id);
}

static int reject(struct rdma_cm_id *rid, const void *pdata, uint8_t len,
		  uint16_t reason)
{
	struct cm_id *id;
	int ret;

	if (!rid)
		return cm_err(-EINVAL);
	id = to_cm_id(rid);
	if (!pdata)
		len = 0;
	pthread_mutex_lock(&cm_lock);
	if (id->ib == IB_NONE)
		ret = -EINVAL;
	else if (cm_is_ud(id))
		ret = cm_answer_dgram(id, IB_SIDR_REJECT, 0, pdata, len);
	else
		ret = cm_reject_stream(id, pdata, len, reason);
	pthread_mutex_unlock(&cm_lock);
	return ret ? cm_err(ret) : 0;
}

int rdma_reject(struct rdma_cm_id *id, const void *private_data,
		uint8_t private_data_len)
{
	return reject(id, private_data, private_data_len,
		      IB_CM_REJ_CONSUMER_DEFINED);
}

int rdma_reject_ece(struct rdma_cm_id *id, const void *private_data,
		    uint8_t private_data_len)
{
	return reject(id, private_data, private_data_len,
		      IB_CM_REJ_VENDOR_OPTION_NOT_SUPPORTED);
}

int rdma_disconnect(struct rdma_cm_id *rid)
{
	struct cm_id *id;
	int ret, cs;

	/* rdma-core's ucma_shutdown: the QP goes to the error state first */
	if (!rid || !rid->verbs || !rid->verbs->device)
		return cm_err(-EINVAL);
	id = to_cm_id(rid);
	/* the samples' completion threads disconnect, and are cancelled:
	 * not while holding cm_lock (send() of the DREQ, the flushes'
	 * eventfds; common/nocancel.h) */
	cs = shca_cancel_off();
	pthread_mutex_lock(&cm_lock);
	ret = cm_modify_qp_err(id);
	if (!ret && id->ib == IB_NONE)
		ret = -EINVAL;
	if (!ret && !cm_is_ud(id))
		ret = cm_disconnect_stream(id);
	pthread_mutex_unlock(&cm_lock);
	shca_cancel_restore(cs);
	return ret ? cm_err(ret) : cm_complete(id);
}

int rdma_establish(struct rdma_cm_id *rid)
{
	struct cm_id *id;
	int ret;

	if (!rid || rid->qp)
		return cm_err(-EINVAL);
	id = to_cm_id(rid);
	pthread_mutex_lock(&cm_lock);
	ret = cm_is_ud(id) ? -EINVAL : cm_establish_stream(id);
	pthread_mutex_unlock(&cm_lock);
	return ret ? cm_err(ret) : 0;
}

/* rdma_notify: ib_cm_notify's answers. */
int rdma_notify(struct rdma_cm_id *rid, enum ibv_event_type event)
{
	struct cm_id *id;
	int ret = 0;

	if (!rid)
		return cm_err(-EINVAL);
	id = to_cm_id(rid);
	pthread_mutex_lock(&cm_lock);
	if (id->ib == IB_NONE || !id->dev) {
		ret = -EINVAL;
	} else if (event == IBV_EVENT_COMM_EST) {
		if (id->ib == IB_REP_SENT) {
			set_ib(id, IB_ESTABLISHED);
			if (id->state == CM_CONNECT)
				queue_conn_event(id, RDMA_CM_EVENT_ESTABLISHED,
						 0, NULL, 0);
		} else {
			ret = id->ib == IB_ESTABLISHED ? -EISCONN : -EINVAL;
		}
	} else if (event == IBV_EVENT_PATH_MIG) {
		ret = id->ib == IB_ESTABLISHED ? 0 : -EINVAL;
	} else if (!cm_is_ud(id)) {
		ret = -EINVAL;
	}
	pthread_mutex_unlock(&cm_lock);
	return ret ? cm_err(ret) : 0;
}
