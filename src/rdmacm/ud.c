// SPDX-License-Identifier: MIT
/*
 * UD ids: service ID resolution (SIDR) over UDP, and multicast.
 *
 * A UD id's rdma_cm port is a UDP port.  rdma_connect sends a SIDR REQ
 * to the listener's port, and retransmits it until the SIDR REP comes
 * (CM_SIDR_RETRIES times, CM_SIDR_TIMEOUT_MS apart); ESTABLISHED then
 * carries the remote QPN, the Q_Key and the address vector.  A port
 * nobody listens on answers with ICMP, which is the IB CM's "no such
 * service" (SIDR status 1); rdma_reject is SIDR status 2.  Both are
 * RDMA_CM_EVENT_UNREACHABLE with that status, as in the kernel
 * (cma_sidr_rep_handler).  The listener's new ids answer through the
 * listener's socket, from the address the request came to.
 *
 * Multicast: the group's GID is the RoCE v2 one, ::ffff:a.b.c.d for an
 * IPv4 group (the IPv6 address for an IPv6 group), and the join
 * completes at once: softhca's libibverbs delivers UD multicast between
 * the processes of the host.  The QP is attached when the
 * MULTICAST_JOIN event is retrieved, as rdma-core does.
 */
#include <arpa/inet.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "cma.h"

/* cma_set_qkey: the Q_Key of the id, RDMA_UDP_QKEY unless told. */
static int set_qkey(struct cm_id *id, uint32_t qkey)
{
	if (id->qkey)
		return qkey && id->qkey != qkey ? -EINVAL : 0;
	id->qkey = qkey ? qkey : RDMA_UDP_QKEY;
	return 0;
}

uint32_t cm_qkey(struct cm_id *id)
{
	set_qkey(id, 0);
	return id->qkey;
}

int cm_listen_dgram(struct cm_id *id)
{
	return cm_sock_watch(id->sock, EPOLLIN);
}

static int sidr_send(struct cm_id *id)
{
	if (send(id->sock->fd, &id->sidr_req, sizeof(id->sidr_req),
		 MSG_DONTWAIT) < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
		return -errno;
	return 0;
}

/* rdma_connect on a UD id (cma_resolve_ib_udp).  cm_lock held. */
int cm_connect_dgram(struct cm_id *id, const void *pdata, uint8_t pdata_len)
{
	struct rdma_addr *a = &id->id.route.addr;
	struct cm_sidr_req req = { 0 };
	int ret;

	if (pdata_len > CM_SIDR_REQ_PDATA || !id->sock)
		return -EINVAL;
	/* connected: the answer must come from there, ICMP errors too */
	if (connect(id->sock->fd, &a->dst_addr, cm_addrlen(&a->dst_addr)))
		return -errno;
	req.request_id = shca_random_u32();
	req.pkey = 0xffff;
	if (pdata_len)
		memcpy(req.private_data, pdata, pdata_len);
	cm_sidr_req_pack(&id->sidr_req, &req);
	id->sidr_id = req.request_id;
	id->sidr_tries = 0;
	ret = cm_sock_watch(id->sock, EPOLLIN);
	if (ret)
		return ret;
	id->ib = IB_SIDR_REQ_SENT;
	sidr_send(id);
	cm_timer_arm(&id->timer, CM_SIDR_TIMEOUT_MS);
	return 0;
}

static void queue_ud_event(struct cm_id *id, enum rdma_cm_event_type type,
			   int status, const void *pdata, size_t len)
{
	struct cm_event *ev = cm_event_new(id, type, status);

	if (!ev)
		return;
	cm_event_pdata(ev, pdata, len, true);
	cm_event_queue(id, ev);
}

void cm_dgram_timer(struct cm_id *id)
{
	if (++id->sidr_tries <= CM_SIDR_RETRIES) {
		sidr_send(id);
		cm_timer_arm(&id->timer, CM_SIDR_TIMEOUT_MS);
		return;
	}
	id->ib = IB_IDLE;
	if (id->state == CM_CONNECT)
		queue_ud_event(id, RDMA_CM_EVENT_UNREACHABLE, -ETIMEDOUT,
			       NULL, 0);
}

static void sidr_rep_received(struct cm_id *id, const uint8_t *msg)
{
	struct cm_sidr_rep rep;
	struct cm_event *ev;
	int ret;

	if (cm_sidr_rep_unpack(msg, &rep) || id->ib != IB_SIDR_REQ_SENT ||
	    rep.request_id != id->sidr_id)
		return;
	cm_timer_cancel(&id->timer);
	id->ib = IB_IDLE;
	if (id->state != CM_CONNECT)
		return;
	if (rep.status != IB_SIDR_SUCCESS) {
		queue_ud_event(id, RDMA_CM_EVENT_UNREACHABLE, rep.status,
			       rep.private_data, CM_SIDR_REP_PDATA);
		return;
	}
	ret = set_qkey(id, rep.qkey);
	if (ret) {
		queue_ud_event(id, RDMA_CM_EVENT_ADDR_ERROR, ret,
			       rep.private_data, CM_SIDR_REP_PDATA);
		return;
	}
	ev = cm_event_new(id, RDMA_CM_EVENT_ESTABLISHED, 0);
	if (!ev)
		return;
	cm_event_pdata(ev, rep.private_data, CM_SIDR_REP_PDATA, true);
	cm_ah_from_path(id, &ev->event.param.ud.ah_attr);
	ev->event.param.ud.qp_num = rep.qpn;
	ev->event.param.ud.qkey = rep.qkey;
	cm_event_queue(id, ev);
}

/* Send a SIDR REP from the address the request came to. */
static void sidr_rep_send(struct cm_sock *s, const struct sockaddr_storage *to,
			  const struct sockaddr_storage *from,
			  const struct cm_wire_sidr_rep *w)
{
	union {
		char buf[CMSG_SPACE(sizeof(struct in6_pktinfo))];
		struct cmsghdr align;
	} ctl;
	struct iovec iov = { .iov_base = (void *)w, .iov_len = sizeof(*w) };
	struct msghdr mh = {
		.msg_name = (void *)to,
		.msg_namelen = cm_addrlen((const struct sockaddr *)to),
		.msg_iov = &iov,
		.msg_iovlen = 1,
	};
	struct cmsghdr *c;

	memset(&ctl, 0, sizeof(ctl));
	if (from->ss_family == AF_INET) {
		struct in_pktinfo pi = { 0 };

		pi.ipi_spec_dst = ((const struct sockaddr_in *)from)->sin_addr;
		mh.msg_control = ctl.buf;
		mh.msg_controllen = CMSG_SPACE(sizeof(pi));
		c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = IPPROTO_IP;
		c->cmsg_type = IP_PKTINFO;
		c->cmsg_len = CMSG_LEN(sizeof(pi));
		memcpy(CMSG_DATA(c), &pi, sizeof(pi));
	} else if (from->ss_family == AF_INET6) {
		struct in6_pktinfo pi = { 0 };

		pi.ipi6_addr = ((const struct sockaddr_in6 *)from)->sin6_addr;
		mh.msg_control = ctl.buf;
		mh.msg_controllen = CMSG_SPACE(sizeof(pi));
		c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = IPPROTO_IPV6;
		c->cmsg_type = IPV6_PKTINFO;
		c->cmsg_len = CMSG_LEN(sizeof(pi));
		memcpy(CMSG_DATA(c), &pi, sizeof(pi));
	}
	if (sendmsg(s->fd, &mh, MSG_DONTWAIT) < 0)
		shca_dbg("SIDR REP: %s", strerror(errno));
}

static bool same_addr(const struct sockaddr_storage *a,
		      const struct sockaddr_storage *b)
{
	socklen_t len = cm_addrlen((const struct sockaddr *)a);

	return len && a->ss_family == b->ss_family && !memcmp(a, b, len);
}

/* A SIDR REQ to a listener: a new id and its CONNECT_REQUEST
 * (cma_ib_new_udp_id). */
static void sidr_req_received(struct cm_id *listener, struct cm_sock *s,
			      const struct sockaddr_storage *from,
			      const struct sockaddr_storage *to,
			      const uint8_t *msg)
{
	struct cm_wire_sidr_rep w;
	struct cm_sidr_rep rep = { .status = IB_SIDR_REJECT };
	struct sockaddr_storage local, peer;
	struct cm_sidr_req req;
	struct cm_device *dev;
	struct cm_channel *ch;
	struct cm_event *ev;
	struct cm_id *c;
	uint8_t idx;

	if (cm_sidr_req_unpack(msg, &req))
		return;
	for (c = listener->children; c; c = c->next_child) {
		if (c->sidr_id != req.request_id ||
		    !same_addr(&c->sidr_peer, from))
			continue;
		/* a retransmission: answer again if we answered */
		if (c->sidr_answered)
			sidr_rep_send(s, from, to, &c->sidr_rep);
		return;
	}
	rep.request_id = req.request_id;
	cm_sidr_rep_pack(&w, &rep);
	if (listener->state != CM_LISTEN ||
	    listener->pending_reqs >= listener->backlog ||
	    cm_device_by_addr((const struct sockaddr *)to, &dev, &idx)) {
		sidr_rep_send(s, from, to, &w);
		return;
	}
	ch = listener->sync ? cm_channel_new() : listener->chan;
	c = ch ? cm_id_new(ch, listener->id.context, listener->id.ps,
			   IBV_QPT_UD) : NULL;
	if (c)
		c->sync = listener->sync;	/* its channel goes with it */
	if (!c || cm_device_bind(c, dev, idx)) {
		if (c)
			cm_id_destroy_locked(c);
		else if (ch && ch != listener->chan)
			cm_channel_free(ch);
		sidr_rep_send(s, from, to, &w);
		return;
	}
	c->sock = s;
	s->refs++;
	c->sidr_id = req.request_id;
	c->sidr_peer = *from;
	c->sidr_local = *to;
	/* the route in the request's family (no IPv4-mapped addresses) */
	local = *to;
	peer = *from;
	cm_addr_unmap(&local);
	cm_addr_unmap(&peer);
	memcpy(&c->id.route.addr.src_storage, &local,
	       cm_addrlen((struct sockaddr *)&local));
	cm_addr_set_port(&c->id.route.addr.src_addr,
			 cm_addr_port(&listener->id.route.addr.src_addr));
	memcpy(&c->id.route.addr.dst_storage, &peer,
	       cm_addrlen((struct sockaddr *)&peer));
	cm_ip_to_gid(&c->id.route.addr.src_addr,
		     &c->id.route.addr.addr.ibaddr.sgid);
	cm_ip_to_gid(&c->id.route.addr.dst_addr,
		     &c->id.route.addr.addr.ibaddr.dgid);
	c->id.route.addr.addr.ibaddr.pkey = htons(0xffff);
	c->state = CM_CONNECT;
	c->ib = IB_SIDR_REQ_RCVD;
	ev = cm_listener_adopt(listener, c);
	if (!ev)
		return;
	cm_event_pdata(ev, req.private_data, CM_SIDR_REQ_PDATA, true);
	cm_event_queue(listener, ev);
}

/* rdma_accept (status 0) and rdma_reject (status 2) on a UD id. */
int cm_answer_dgram(struct cm_id *id, uint8_t status, uint32_t qkey,
		    const void *pdata, uint8_t pdata_len)
{
	struct cm_sidr_rep rep = { .status = status };
	int ret;

	if (id->ib != IB_SIDR_REQ_RCVD || !id->sock)
		return -EINVAL;
	if (pdata_len > CM_SIDR_REP_PDATA)
		return -EINVAL;
	if (status == IB_SIDR_SUCCESS) {
		ret = set_qkey(id, qkey);
		if (ret)
			return ret;
		rep.qpn = id->id.qp ? id->id.qp->qp_num : id->qp_num;
		rep.qkey = id->qkey;
	}
	rep.request_id = id->sidr_id;
	if (pdata_len)
		memcpy(rep.private_data, pdata, pdata_len);
	cm_sidr_rep_pack(&id->sidr_rep, &rep);
	id->sidr_answered = true;
	id->ib = IB_IDLE;
	sidr_rep_send(id->sock, &id->sidr_peer, &id->sidr_local, &id->sidr_rep);
	return 0;
}

void cm_dgram_input(struct cm_sock *s)
{
	uint8_t buf[CM_MSG_MAX + 1];

	for (;;) {
		union {
			char buf[CMSG_SPACE(sizeof(struct in6_pktinfo))];
			struct cmsghdr align;
		} ctl;
		struct sockaddr_storage from = { 0 }, to = { 0 };
		struct iovec iov = { .iov_base = buf, .iov_len = sizeof(buf) };
		struct msghdr mh = {
			.msg_name = &from, .msg_namelen = sizeof(from),
			.msg_iov = &iov, .msg_iovlen = 1,
			.msg_control = ctl.buf,
			.msg_controllen = sizeof(ctl.buf),
		};
		struct cm_id *id = s->id;
		struct cmsghdr *c;
		uint8_t type;
		ssize_t n;

		n = recvmsg(s->fd, &mh, MSG_DONTWAIT);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == ECONNREFUSED)
				cm_dgram_error(s);
			return;
		}
		if (cm_wire_check(buf, (size_t)n, &type) || !id)
			continue;
		if (type == CM_MSG_SIDR_REP) {
			sidr_rep_received(id, buf);
			continue;
		}
		if (type != CM_MSG_SIDR_REQ || id->state != CM_LISTEN)
			continue;
		/* the address the request came to: the new id's source */
		to.ss_family = from.ss_family;
		for (c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
			if (c->cmsg_level == IPPROTO_IP &&
			    c->cmsg_type == IP_PKTINFO) {
				struct in_pktinfo pi;

				memcpy(&pi, CMSG_DATA(c), sizeof(pi));
				((struct sockaddr_in *)&to)->sin_addr =
					pi.ipi_addr;
			} else if (c->cmsg_level == IPPROTO_IPV6 &&
				   c->cmsg_type == IPV6_PKTINFO) {
				struct in6_pktinfo pi;

				memcpy(&pi, CMSG_DATA(c), sizeof(pi));
				((struct sockaddr_in6 *)&to)->sin6_addr =
					pi.ipi6_addr;
				((struct sockaddr_in6 *)&to)->sin6_scope_id =
					pi.ipi6_ifindex;
			}
		}
		sidr_req_received(id, s, &from, &to, buf);
	}
}

/* ICMP said nobody listens there (a connected UDP socket's error). */
void cm_dgram_error(struct cm_sock *s)
{
	struct cm_id *id = s->id;
	socklen_t len = sizeof(int);
	int err = 0;

	getsockopt(s->fd, SOL_SOCKET, SO_ERROR, &err, &len);
	if (!id || id->ib != IB_SIDR_REQ_SENT || err != ECONNREFUSED)
		return;
	cm_timer_cancel(&id->timer);
	id->ib = IB_IDLE;
	if (id->state == CM_CONNECT)
		queue_ud_event(id, RDMA_CM_EVENT_UNREACHABLE,
			       IB_SIDR_UNSUPPORTED, NULL, 0);
}

/* What destroying a UD id sends: an unanswered request is rejected. */
void cm_dgram_teardown(struct cm_id *id)
{
	struct cm_wire_sidr_rep w;
	struct cm_sidr_rep rep = { .status = IB_SIDR_REJECT };

	if (id->ib == IB_SIDR_REQ_RCVD && id->sock) {
		rep.request_id = id->sidr_id;
		cm_sidr_rep_pack(&w, &rep);
		sidr_rep_send(id->sock, &id->sidr_peer, &id->sidr_local, &w);
		id->ib = IB_IDLE;
	}
	if (id->sock) {
		if (id->sock->id == id)
			id->sock->id = NULL;
		cm_sock_put(id->sock);
		id->sock = NULL;
	}
}

/* ------------------------------------------------------------------ */
/* Multicast                                                           */

/* The MULTICAST_JOIN being retrieved: attach the QP (rdma-core's
 * ucma_process_join).  0, or -1 as rdma-core's status. */
int cm_mc_attach(struct cm_event *ev)
{
	struct cm_mc *mc = ev->mc;
	struct cm_id *id = mc->id;
	int ret;

	mc->mgid = ev->event.param.ud.ah_attr.grh.dgid;
	mc->mlid = ev->event.param.ud.ah_attr.dlid;
	if (!id->id.qp ||
	    mc->join_flags == RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER)
		return 0;
	ret = ibv_attach_mcast(id->id.qp, &mc->mgid, mc->mlid);
	if (ret) {
		errno = ret;
		return -1;
	}
	return 0;
}

static void mc_gid(const struct sockaddr *addr, union ibv_gid *mgid)
{
	/* cma_iboe_set_mgid for RoCE v2: IPv4-mapped, or the IPv6 group */
	cm_ip_to_gid(addr, mgid);
}

static bool addr_multicast(const struct sockaddr *addr)
{
	const struct sockaddr_in *sin = (const void *)addr;
	const struct sockaddr_in6 *s6 = (const void *)addr;

	if (addr->sa_family == AF_INET)
		return IN_MULTICAST(ntohl(sin->sin_addr.s_addr));
	if (addr->sa_family == AF_INET6)
		return IN6_IS_ADDR_MULTICAST(&s6->sin6_addr);
	return false;
}

static int join(struct cm_id *id, const struct sockaddr *addr, uint16_t flags,
		void *context)
{
	struct rdma_ud_param *p;
	struct cm_event *ev;
	struct cm_mc *mc;
	int ret;

	if (!id->dev || (id->state != CM_ADDR_BOUND &&
			 id->state != CM_ADDR_RESOLVED) || !cm_is_ud(id))
		return -EINVAL;
	if (cm_addr_any(addr) || !addr_multicast(addr))
		return -EINVAL;
	ret = set_qkey(id, RDMA_UDP_QKEY);
	if (ret)
		return ret;
	mc = calloc(1, sizeof(*mc));
	ev = cm_event_new(id, RDMA_CM_EVENT_MULTICAST_JOIN, 0);
	if (!mc || !ev) {
		free(mc);
		free(ev);
		return -ENOMEM;
	}
	mc->id = id;
	mc->context = context;
	mc->join_flags = flags;
	mc->addrlen = cm_addrlen(addr);
	memcpy(&mc->addr, addr, mc->addrlen);
	mc->next = id->mc_list;
	id->mc_list = mc;

	ev->mc = mc;
	p = &ev->event.param.ud;
	p->private_data = context;	/* rdma-core: the join's context */
	p->ah_attr.is_global = 1;
	p->ah_attr.port_num = id->id.port_num;
	mc_gid(addr, &p->ah_attr.grh.dgid);
	p->ah_attr.grh.sgid_index = id->sgid_index;
	p->ah_attr.grh.hop_limit = CM_HOP_LIMIT;	/* IPv6's default */
	p->ah_attr.grh.traffic_class = id->tos;
	p->qp_num = 0xffffff;
	p->qkey = id->qkey;
	cm_event_queue(id, ev);
	return 0;
}

int rdma_join_multicast_ex(struct rdma_cm_id *rid,
			   struct rdma_cm_join_mc_attr_ex *attr, void *context)
{
	int ret;

	if (!rid || !attr)
		return cm_err(-EINVAL);
	if (attr->comp_mask >= RDMA_CM_JOIN_MC_ATTR_RESERVED)
		return cm_err(-ENOTSUP);
	if (!(attr->comp_mask & RDMA_CM_JOIN_MC_ATTR_ADDRESS))
		return cm_err(-EINVAL);
	if (!(attr->comp_mask & RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS) ||
	    attr->join_flags >= RDMA_MC_JOIN_FLAG_RESERVED)
		return cm_err(-EINVAL);
	if (!cm_addrlen(attr->addr))
		return cm_err(-EINVAL);
	pthread_mutex_lock(&cm_lock);
	ret = join(to_cm_id(rid), attr->addr, (uint16_t)attr->join_flags,
		   context);
	pthread_mutex_unlock(&cm_lock);
	return ret ? cm_err(ret) : cm_complete(to_cm_id(rid));
}

int rdma_join_multicast(struct rdma_cm_id *rid, struct sockaddr *addr,
			void *context)
{
	int ret;

	if (!rid || !cm_addrlen(addr))
		return cm_err(-EINVAL);
	pthread_mutex_lock(&cm_lock);
	ret = join(to_cm_id(rid), addr, RDMA_MC_JOIN_FLAG_FULLMEMBER, context);
	pthread_mutex_unlock(&cm_lock);
	return ret ? cm_err(ret) : cm_complete(to_cm_id(rid));
}

int rdma_leave_multicast(struct rdma_cm_id *rid, struct sockaddr *addr)
{
	struct cm_mc **pp, *mc;
	struct cm_id *id;
	socklen_t len;

	len = cm_addrlen(addr);
	if (!rid || !len)
		return cm_err(-EINVAL);
	id = to_cm_id(rid);
	pthread_mutex_lock(&cm_lock);
	for (pp = &id->mc_list; (mc = *pp); pp = &mc->next)
		if (!memcmp(&mc->addr, addr, len))
			break;
	if (!mc) {
		pthread_mutex_unlock(&cm_lock);
		return cm_err(-EADDRNOTAVAIL);
	}
	*pp = mc->next;
	if (rid->qp && mc->join_flags != RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER)
		ibv_detach_mcast(rid->qp, &mc->mgid, mc->mlid);
	cm_channel_drop_mc_events(mc);
	while (mc->events_completed < mc->events_reported)
		pthread_cond_wait(&id->cond, &cm_lock);
	pthread_mutex_unlock(&cm_lock);
	free(mc);
	return 0;
}

void cm_mc_free_all(struct cm_id *id)
{
	struct cm_mc *mc;

	while ((mc = id->mc_list)) {
		id->mc_list = mc->next;
		free(mc);
	}
}
