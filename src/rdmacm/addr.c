// SPDX-License-Identifier: MIT
/*
 * Addresses: rdma_bind_addr, rdma_resolve_addr, rdma_resolve_route, and
 * the route record of an id.
 *
 * Binding an id binds a real socket: TCP for RC and UC ids (rdma_cm port
 * numbers are TCP ports here, as with iWARP), UDP for UD ids.  Port 0
 * picks a free port, rdma_get_src_port() tells which.  A specific address
 * maps to the softhca device that owns it (device.c) and sets id->verbs,
 * id->pd (the device's default PD) and port 1.  A wildcard or a loopback
 * address (127.0.0.0/8, ::1) leaves them unset until a resolution or a
 * connect request picks a device, as in the kernel, whose cma_any_addr()
 * counts loopback addresses as wildcards: rdma_bind_addr attaches no
 * device to them, and rdma_resolve_addr to one attaches the loopback
 * device (cma_resolve_loopback; here softhca_lo, the device of lo).
 * Unlike the kernel, the socket stays bound to the loopback address: a
 * listener on 127.0.0.1 takes connections to 127.0.0.1 only, never from
 * another host (the kernel's takes requests for any address).
 *
 * Resolution asks the kernel's routing table which source address it
 * would use (a connected UDP socket, nothing sent), then maps that
 * address to its device.  No route is a synchronous error, as in the
 * kernel (rdma_resolve_ip: ENETUNREACH...); a source address no device
 * owns gives RDMA_CM_EVENT_ADDR_ERROR.  Neighbour resolution (ARP/ND) is
 * left to the connection: a host that does not answer makes the connect
 * time out (RDMA_CM_EVENT_UNREACHABLE, -ETIMEDOUT).
 *
 * The route of a RoCE port is computed, as the kernel's
 * cma_resolve_iboe_route does: one path, P_Key 0xffff, the port's MTU,
 * hop limit 64, packet lifetime 18.
 */
#include <arpa/inet.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <infiniband/sa.h>

#include "cma.h"

socklen_t cm_addrlen(const struct sockaddr *addr)
{
	if (!addr)
		return 0;
	switch (addr->sa_family) {
	case AF_INET:
		return sizeof(struct sockaddr_in);
	case AF_INET6:
		return sizeof(struct sockaddr_in6);
	default:
		return 0;	/* AF_IB: no AF_IB support, as on RoCE */
	}
}

/* 127.0.0.0/8 or ::1 (the kernel's cma_loopback_addr) */
bool cm_addr_loopback(const struct sockaddr *addr)
{
	const struct sockaddr_in *sin = (const void *)addr;
	const struct sockaddr_in6 *s6 = (const void *)addr;

	if (addr->sa_family == AF_INET)
		return ntohl(sin->sin_addr.s_addr) >> 24 == IN_LOOPBACKNET;
	if (addr->sa_family == AF_INET6)
		return IN6_IS_ADDR_LOOPBACK(&s6->sin6_addr);
	return false;
}

bool cm_addr_any(const struct sockaddr *addr)
{
	if (addr->sa_family == AF_INET)
		return ((const struct sockaddr_in *)addr)->sin_addr.s_addr ==
		       htonl(INADDR_ANY);
	if (addr->sa_family == AF_INET6)
		return IN6_IS_ADDR_UNSPECIFIED(
			&((const struct sockaddr_in6 *)addr)->sin6_addr);
	return false;
}

/* The port, in network byte order (rdma_get_src_port's convention). */
uint16_t cm_addr_port(const struct sockaddr *addr)
{
	if (addr->sa_family == AF_INET)
		return ((const struct sockaddr_in *)addr)->sin_port;
	if (addr->sa_family == AF_INET6)
		return ((const struct sockaddr_in6 *)addr)->sin6_port;
	return 0;
}

void cm_addr_set_port(struct sockaddr *addr, uint16_t be_port)
{
	if (addr->sa_family == AF_INET)
		((struct sockaddr_in *)addr)->sin_port = be_port;
	else if (addr->sa_family == AF_INET6)
		((struct sockaddr_in6 *)addr)->sin6_port = be_port;
}

/* An IPv4-mapped IPv6 address (an IPv6 socket's view of an IPv4 peer)
 * as the IPv4 address it is: what the RDMA CM header carries. */
void cm_addr_unmap(struct sockaddr_storage *ss)
{
	struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ss;
	struct sockaddr_in sin = { .sin_family = AF_INET };

	if (ss->ss_family != AF_INET6 || !IN6_IS_ADDR_V4MAPPED(&s6->sin6_addr))
		return;
	sin.sin_port = s6->sin6_port;
	memcpy(&sin.sin_addr, &s6->sin6_addr.s6_addr[12], 4);
	memset(ss, 0, sizeof(*ss));
	memcpy(ss, &sin, sizeof(sin));
}

/* sgid/dgid/pkey of route.addr.addr.ibaddr, as rdma-core's query of the
 * kernel's route fills them for RoCE: the GIDs of the two addresses. */
static void ibaddr_update(struct cm_id *id)
{
	struct rdma_addr *a = &id->id.route.addr;

	cm_ip_to_gid(&a->src_addr, &a->addr.ibaddr.sgid);
	cm_ip_to_gid(&a->dst_addr, &a->addr.ibaddr.dgid);
	a->addr.ibaddr.pkey = htons(0xffff);
}

static int sock_open(struct cm_id *id, const struct sockaddr *addr)
{
	bool dgram = cm_is_ud(id);
	int one = 1, fd, ret;
	struct cm_sock *s;

	fd = socket(addr->sa_family,
		    (dgram ? SOCK_DGRAM : SOCK_STREAM) | SOCK_NONBLOCK |
			    SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	/* A stream's port is reusable while connections closed on it are
	 * in TIME_WAIT: the rdma_cm port space has no TIME_WAIT.  Two
	 * listeners on one port still conflict (EADDRINUSE). */
	if (!dgram || id->reuseaddr)
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (!dgram)
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (addr->sa_family == AF_INET6 && id->afonly >= 0)
		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &id->afonly,
			   sizeof(id->afonly));
	if (dgram && addr->sa_family == AF_INET)
		setsockopt(fd, IPPROTO_IP, IP_PKTINFO, &one, sizeof(one));
	if (dgram && addr->sa_family == AF_INET6)
		setsockopt(fd, IPPROTO_IPV6, IPV6_RECVPKTINFO, &one,
			   sizeof(one));
	if (bind(fd, addr, cm_addrlen(addr))) {
		ret = -errno;
		close(fd);
		return ret;
	}
	s = cm_sock_new(fd, dgram ? CM_SOCK_DGRAM : CM_SOCK_STREAM);
	if (!s) {
		close(fd);
		return -ENOMEM;
	}
	s->id = id;
	id->sock = s;
	return 0;
}

/* rdma_bind_addr: the kernel's checks and errno.  cm_lock held. */
int cm_bind_locked(struct cm_id *id, const struct sockaddr *addr)
{
	struct sockaddr_storage ss;
	struct cm_device *dev = NULL;
	socklen_t len = sizeof(ss);
	uint8_t idx = 0;
	int ret;

	if (addr->sa_family != AF_INET && addr->sa_family != AF_INET6)
		return -EAFNOSUPPORT;
	if (id->state != CM_IDLE)
		return -EINVAL;
	if (addr->sa_family == AF_INET6) {
		const struct sockaddr_in6 *s6 = (const void *)addr;

		if (IN6_IS_ADDR_LINKLOCAL(&s6->sin6_addr) && !s6->sin6_scope_id)
			return -EINVAL;	/* link-local: needs a scope */
	}
	/* a device for an address of an interface; none for a wildcard or
	 * a loopback address (the kernel's cma_any_addr) */
	if (!cm_addr_any(addr) && !cm_addr_loopback(addr)) {
		ret = cm_device_by_addr(addr, &dev, &idx);
		if (ret)
			return ret;
	}
	ret = cm_loop_start();
	if (ret)
		return ret;
	ret = sock_open(id, addr);
	if (ret)
		return ret;
	if (getsockname(id->sock->fd, (struct sockaddr *)&ss, &len)) {
		ret = -errno;
		goto err;
	}
	memset(&id->id.route.addr.src_storage, 0,
	       sizeof(id->id.route.addr.src_storage));
	memcpy(&id->id.route.addr.src_storage, &ss,
	       MIN(len, sizeof(id->id.route.addr.src_storage)));
	memset(&id->id.route.addr.dst_storage, 0,
	       sizeof(id->id.route.addr.dst_storage));
	id->id.route.addr.dst_addr.sa_family = addr->sa_family;
	if (dev) {
		ret = cm_device_bind(id, dev, idx);
		if (ret)
			goto err;
		ibaddr_update(id);
	}
	id->state = CM_ADDR_BOUND;
	return 0;
err:
	cm_sock_close(id->sock);
	id->sock = NULL;
	return ret;
}

/* A fresh socket for an active id whose stream was refused, bound to
 * the id's source address and port (the old one is released).  cm_lock
 * held. */
int cm_sock_reopen(struct cm_id *id)
{
	struct sockaddr_storage src;

	memcpy(&src, &id->id.route.addr.src_storage, sizeof(src));
	if (id->sock) {
		id->sock->id = NULL;
		cm_sock_release(id->sock);
		id->sock = NULL;
	}
	return sock_open(id, (struct sockaddr *)&src);
}

int rdma_bind_addr(struct rdma_cm_id *rid, struct sockaddr *addr)
{
	int ret;

	if (!rid || !cm_addrlen(addr))
		return cm_err(-EINVAL);
	pthread_mutex_lock(&cm_lock);
	ret = cm_bind_locked(to_cm_id(rid), addr);
	pthread_mutex_unlock(&cm_lock);
	return ret ? cm_err(ret) : 0;
}

/*
 * The source address the routing table picks to reach dst from src (an
 * address or a wildcard).  Nothing is sent.  0 or -errno.
 */
static int route_source(const struct sockaddr *src, const struct sockaddr *dst,
			struct sockaddr_storage *out)
{
	struct sockaddr_storage d, s;
	socklen_t len = sizeof(*out);
	int fd, ret = 0;

	fd = socket(dst->sa_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (src && !cm_addr_any(src)) {
		memcpy(&s, src, cm_addrlen(src));
		cm_addr_set_port((struct sockaddr *)&s, 0);
		if (bind(fd, (struct sockaddr *)&s, cm_addrlen(src))) {
			ret = -errno;
			goto out;
		}
	}
	memcpy(&d, dst, cm_addrlen(dst));
	if (!cm_addr_port((struct sockaddr *)&d))
		cm_addr_set_port((struct sockaddr *)&d, htons(9));
	if (connect(fd, (struct sockaddr *)&d, cm_addrlen(dst)) ||
	    getsockname(fd, (struct sockaddr *)out, &len))
		ret = -errno;
	else
		cm_addr_set_port((struct sockaddr *)out, 0);
out:
	close(fd);
	return ret;
}

int rdma_resolve_addr(struct rdma_cm_id *rid, struct sockaddr *src_addr,
		      struct sockaddr *dst_addr, int timeout_ms)
{
	struct sockaddr_storage any, routed;
	struct sockaddr *src;
	struct cm_device *dev;
	struct cm_event *ev;
	struct cm_id *id;
	uint16_t port;
	uint8_t idx;
	int ret;

	(void)timeout_ms;
	if (!rid || !cm_addrlen(dst_addr) ||
	    (src_addr && !cm_addrlen(src_addr)))
		return cm_err(-EINVAL);
	id = to_cm_id(rid);
	src = &rid->route.addr.src_addr;
	pthread_mutex_lock(&cm_lock);
	if (id->state == CM_IDLE) {
		if (!src_addr || !src_addr->sa_family) {
			memset(&any, 0, sizeof(any));
			any.ss_family = dst_addr->sa_family;
			if (dst_addr->sa_family == AF_INET6) {
				struct sockaddr_in6 *d6 = (void *)dst_addr;

				((struct sockaddr_in6 *)&any)->sin6_scope_id =
					d6->sin6_scope_id;
			}
			src_addr = (struct sockaddr *)&any;
		}
		ret = cm_bind_locked(id, src_addr);
		if (ret)
			goto out;
	}
	ret = -EINVAL;
	if (src->sa_family != dst_addr->sa_family || id->state != CM_ADDR_BOUND)
		goto out;
	ret = route_source(src, dst_addr, &routed);
	if (ret)
		goto out;
	memset(&rid->route.addr.dst_storage, 0,
	       sizeof(rid->route.addr.dst_storage));
	memcpy(&rid->route.addr.dst_storage, dst_addr, cm_addrlen(dst_addr));
	if (!id->dev) {
		ret = cm_device_by_addr((struct sockaddr *)&routed, &dev, &idx);
		if (!ret)
			ret = cm_device_bind(id, dev, idx);
		if (ret) {
			/* the address resolved, no device has it */
			ev = cm_event_new(id, RDMA_CM_EVENT_ADDR_ERROR, ret);
			cm_event_queue(id, ev);
			ret = 0;
			goto queued;
		}
	}
	port = cm_addr_port(src);
	memcpy(&rid->route.addr.src_storage, &routed,
	       cm_addrlen((struct sockaddr *)&routed));
	cm_addr_set_port(src, port);
	ibaddr_update(id);
	id->state = CM_ADDR_RESOLVED;
	ev = cm_event_new(id, RDMA_CM_EVENT_ADDR_RESOLVED, 0);
	cm_event_queue(id, ev);
queued:
	pthread_mutex_unlock(&cm_lock);
	return cm_complete(id);
out:
	pthread_mutex_unlock(&cm_lock);
	return cm_err(ret);
}

/* The path record of a RoCE route to dgid (cma_resolve_iboe_route). */
void cm_path_init(struct cm_id *id, const union ibv_gid *dgid, enum ibv_mtu mtu)
{
	struct ibv_sa_path_rec *p = &id->path;

	memset(p, 0, sizeof(*p));
	cm_ip_to_gid(&id->id.route.addr.src_addr, &p->sgid);
	p->dgid = *dgid;
	p->hop_limit = CM_HOP_LIMIT;
	p->traffic_class = id->tos;
	p->reversible = 1;
	p->numb_path = 1;
	p->pkey = htons(0xffff);
	p->mtu_selector = 2;		/* exactly */
	p->mtu = (uint8_t)mtu;
	p->rate_selector = 2;
	p->rate = 0;			/* IB_RATE_PORT_CURRENT */
	p->packet_life_time_selector = 2;
	p->packet_life_time = CM_PACKET_LIFE_TIME;
	id->id.route.path_rec = p;
	id->id.route.num_paths = 1;
	id->path_mtu = mtu;
	id->timeout = CM_PACKET_LIFE_TIME + 1;
}

/* The address vector of the id's path (ib_init_ah_attr_from_path). */
void cm_ah_from_path(struct cm_id *id, struct ibv_ah_attr *ah)
{
	const struct ibv_sa_path_rec *p = &id->path;

	memset(ah, 0, sizeof(*ah));
	ah->sl = p->sl;
	ah->static_rate = p->rate;
	ah->is_global = 1;
	ah->port_num = id->id.port_num;
	ah->grh.dgid = p->dgid;
	ah->grh.flow_label = ntohl(p->flow_label);
	ah->grh.sgid_index = id->sgid_index;
	ah->grh.hop_limit = p->hop_limit;
	ah->grh.traffic_class = p->traffic_class;
}

static void route_resolved(struct cm_id *id)
{
	struct rdma_addr *a = &id->id.route.addr;

	a->addr.ibaddr.sgid = id->path.sgid;
	a->addr.ibaddr.dgid = id->path.dgid;
	a->addr.ibaddr.pkey = id->path.pkey;
	id->state = CM_ROUTE_RESOLVED;
	cm_event_queue(id, cm_event_new(id, RDMA_CM_EVENT_ROUTE_RESOLVED, 0));
}

int rdma_resolve_route(struct rdma_cm_id *rid, int timeout_ms)
{
	struct cm_id *id;
	union ibv_gid dgid;

	(void)timeout_ms;
	if (!rid)
		return cm_err(-EINVAL);
	id = to_cm_id(rid);
	pthread_mutex_lock(&cm_lock);
	if (id->state != CM_ADDR_RESOLVED || !id->dev) {
		pthread_mutex_unlock(&cm_lock);
		return cm_err(-EINVAL);
	}
	cm_ip_to_gid(&rid->route.addr.dst_addr, &dgid);
	cm_path_init(id, &dgid, id->dev->active_mtu);
	route_resolved(id);
	pthread_mutex_unlock(&cm_lock);
	return cm_complete(id);
}

/*
 * RDMA_OPTION_IB_PATH: a path the caller resolved itself (the kernel's
 * ucma_set_ib_path): the primary bidirectional GMP path is taken, and
 * the id reports ROUTE_RESOLVED.  cm_lock held.
 */
int cm_set_ib_path(struct cm_id *id, const void *optval, size_t optlen)
{
	const uint32_t want = IBV_PATH_FLAG_GMP | IBV_PATH_FLAG_PRIMARY |
			      IBV_PATH_FLAG_BIDIRECTIONAL;
	const struct ibv_path_data *pd = optval;
	struct ibv_sa_path_rec *p = &id->path;
	uint32_t fl_hop;
	size_t i, n;

	if (!optlen || optlen % sizeof(*pd))
		return -EINVAL;
	n = optlen / sizeof(*pd);
	for (i = 0; i < n && pd[i].flags != want; i++)
		;
	if (i == n || !id->dev || id->state != CM_ADDR_RESOLVED)
		return -EINVAL;
	pd += i;
	cm_path_init(id, &pd->path.dgid, id->dev->active_mtu);
	p->sgid = pd->path.sgid;
	p->dlid = pd->path.dlid;
	p->slid = pd->path.slid;
	fl_hop = ntohl(pd->path.flowlabel_hoplimit);
	p->flow_label = htonl(fl_hop >> 8);
	p->hop_limit = (uint8_t)fl_hop;
	p->traffic_class = pd->path.tclass;
	p->reversible = pd->path.reversible_numpath >> 7;
	p->numb_path = 1;
	p->pkey = pd->path.pkey;
	p->sl = ntohs(pd->path.qosclass_sl) & 0xf;
	p->mtu = pd->path.mtu & 0x3f;
	p->rate = pd->path.rate & 0x3f;
	p->packet_life_time = pd->path.packetlifetime & 0x3f;
	p->preference = pd->path.preference;
	if (p->mtu >= IBV_MTU_256 && p->mtu <= IBV_MTU_4096)
		id->path_mtu = p->mtu;
	route_resolved(id);
	return 0;
}

uint16_t rdma_get_src_port(struct rdma_cm_id *id)
{
	return id ? cm_addr_port(&id->route.addr.src_addr) : 0;
}

uint16_t rdma_get_dst_port(struct rdma_cm_id *id)
{
	return id ? cm_addr_port(&id->route.addr.dst_addr) : 0;
}
