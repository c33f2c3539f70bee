// SPDX-License-Identifier: MIT
/*
 * Addresses: rdma_getaddrinfo, rdma_get_devices, rdma_bind_addr,
 * rdma_resolve_addr, rdma_resolve_route: what they fill in and the errno
 * of their failures.
 */
#include <arpa/inet.h>
#include <netdb.h>
#include <unistd.h>

#include "cm_common.h"
#include "netenv.h"

static void expect_v4(const struct sockaddr *sa, const char *ip, uint16_t port)
{
	const struct sockaddr_in *sin = (const struct sockaddr_in *)sa;
	char buf[INET_ADDRSTRLEN];

	ASSERT_NOT_NULL(sa);
	ASSERT_EQ(sa->sa_family, AF_INET);
	ASSERT_NOT_NULL(inet_ntop(AF_INET, &sin->sin_addr, buf, sizeof(buf)));
	ASSERT_STR_EQ(buf, ip);
	ASSERT_EQ(ntohs(sin->sin_port), port);
}

static void expect_gid(const union ibv_gid *gid, const char *ip)
{
	union ibv_gid want = { 0 };

	want.raw[10] = 0xff;
	want.raw[11] = 0xff;
	ASSERT_EQ(inet_pton(AF_INET, ip, &want.raw[12]), 1);
	ASSERT(!memcmp(gid, &want, sizeof(want)));
}

TEST(getaddrinfo_numeric)
{
	struct rdma_addrinfo hints = { 0 }, *res;

	hints.ai_flags = RAI_NUMERICHOST;
	hints.ai_port_space = RDMA_PS_TCP;
	ASSERT_EQ(rdma_getaddrinfo("127.0.0.1", "7471", &hints, &res), 0);
	ASSERT_EQ(res->ai_family, AF_INET);
	ASSERT_EQ(res->ai_qp_type, IBV_QPT_RC);
	ASSERT_EQ(res->ai_port_space, RDMA_PS_TCP);
	ASSERT_EQ(res->ai_flags & RAI_PASSIVE, 0);
	ASSERT_EQ(res->ai_dst_len, sizeof(struct sockaddr_in));
	expect_v4(res->ai_dst_addr, "127.0.0.1", 7471);
	ASSERT_NULL(res->ai_src_addr);
	ASSERT_NULL(res->ai_next);
	rdma_freeaddrinfo(res);
}

TEST(getaddrinfo_passive_and_src)
{
	struct rdma_addrinfo hints = { 0 }, *res, *src;

	hints.ai_flags = RAI_PASSIVE;
	hints.ai_port_space = RDMA_PS_TCP;
	ASSERT_EQ(rdma_getaddrinfo(NULL, "7471", &hints, &res), 0);
	ASSERT(res->ai_flags & RAI_PASSIVE);
	expect_v4(res->ai_src_addr, "0.0.0.0", 7471);
	ASSERT_NULL(res->ai_dst_addr);
	rdma_freeaddrinfo(res);

	/* a source given in the hints is kept (rdma-core's examples) */
	ASSERT_EQ(rdma_getaddrinfo("127.0.0.1", NULL, &hints, &src), 0);
	hints.ai_flags = 0;
	hints.ai_src_addr = src->ai_src_addr;
	hints.ai_src_len = src->ai_src_len;
	ASSERT_EQ(rdma_getaddrinfo("127.0.0.1", "99", &hints, &res), 0);
	expect_v4(res->ai_src_addr, "127.0.0.1", 0);
	expect_v4(res->ai_dst_addr, "127.0.0.1", 99);
	rdma_freeaddrinfo(res);
	rdma_freeaddrinfo(src);
}

TEST(getaddrinfo_name_and_udp)
{
	struct rdma_addrinfo hints = { 0 }, *res;

	hints.ai_family = AF_INET;
	ASSERT_EQ(rdma_getaddrinfo("localhost", "7471", &hints, &res), 0);
	expect_v4(res->ai_dst_addr, "127.0.0.1", 7471);
	rdma_freeaddrinfo(res);

	hints.ai_port_space = RDMA_PS_UDP;
	ASSERT_EQ(rdma_getaddrinfo("127.0.0.1", "7174", &hints, &res), 0);
	ASSERT_EQ(res->ai_qp_type, IBV_QPT_UD);
	ASSERT_EQ(res->ai_port_space, RDMA_PS_UDP);
	rdma_freeaddrinfo(res);
}

TEST(getaddrinfo_errors)
{
	struct rdma_addrinfo hints = { 0 }, *res;
	int ret;

	errno = 0;
	ASSERT_EQ(rdma_getaddrinfo(NULL, NULL, NULL, &res), -1);
	ASSERT_EQ(errno, EINVAL);
	/* a getaddrinfo failure is its EAI_* code, as in rdma-core */
	hints.ai_flags = RAI_NUMERICHOST;
	ret = rdma_getaddrinfo("not-a-number", NULL, &hints, &res);
	ASSERT_EQ(ret, EAI_NONAME);
}

TEST(get_devices)
{
	struct ibv_device **list;
	struct ibv_context **ctxs;
	int n, m, i;

	list = ibv_get_device_list(&n);
	ASSERT_NOT_NULL(list);
	ctxs = rdma_get_devices(&m);
	ASSERT_NOT_NULL(ctxs);
	ASSERT_EQ(m, n);
	for (i = 0; i < m; i++) {
		ASSERT_NOT_NULL(ctxs[i]);
		ASSERT(!strncmp(ibv_get_device_name(ctxs[i]->device),
				"softhca_", 8));
		/* the loopback device comes after the others, which reach
		 * other hosts (the kernel has no loopback device) */
		if (!strcmp(ibv_get_device_name(ctxs[i]->device),
			    "softhca_lo"))
			ASSERT_EQ(i, m - 1);
	}
	ASSERT_NULL(ctxs[m]);
	rdma_free_devices(ctxs);
	ibv_free_device_list(list);
}

static void check_bound(struct rdma_cm_id *id, const char *ip,
			const char *devname)
{
	struct ibv_context **ctxs;
	int n, i, found = 0;

	ASSERT_NOT_NULL(id->verbs);
	ASSERT_STR_EQ(ibv_get_device_name(id->verbs->device), devname);
	ASSERT_EQ(id->port_num, 1);
	ASSERT_NOT_NULL(id->pd);
	ASSERT(id->pd->context == id->verbs);
	ASSERT_NE(rdma_get_src_port(id), 0);
	expect_v4(rdma_get_local_addr(id), ip, ntohs(rdma_get_src_port(id)));
	expect_gid(&id->route.addr.addr.ibaddr.sgid, ip);
	ASSERT_EQ(id->route.addr.addr.ibaddr.pkey, 0xffff);
	/* the context rdma_get_devices returns: one per device, shared */
	ctxs = rdma_get_devices(&n);
	for (i = 0; i < n; i++)
		found += ctxs[i] == id->verbs;
	ASSERT_EQ(found, 1);
	rdma_free_devices(ctxs);
}

/*
 * No device for an id bound to a loopback address or a wildcard, as in
 * the kernel's rdma_cm (cma_any_addr counts 127.0.0.0/8 and ::1 as
 * wildcards): id->verbs, id->pd stay NULL and port_num 0 until
 * rdma_resolve_addr or a connect request picks a device.
 */
static void expect_no_device(struct rdma_cm_id *id)
{
	ASSERT_NULL(id->verbs);
	ASSERT_NULL(id->pd);
	ASSERT_EQ(id->port_num, 0);
	ASSERT_NE(rdma_get_src_port(id), 0);
}

/* The device the kernel gives a loopback destination: here softhca_lo. */
static void expect_lo(struct rdma_cm_id *id)
{
	ASSERT_NOT_NULL(id->verbs);
	ASSERT_STR_EQ(ibv_get_device_name(id->verbs->device), "softhca_lo");
	ASSERT_NOT_NULL(id->pd);
	ASSERT(id->pd->context == id->verbs);
	ASSERT_EQ(id->port_num, 1);
}

TEST(bind_loopback)
{
	struct rdma_cm_id *id;
	struct sockaddr_in sin;
	uint16_t port;

	make_addr(&sin, loopback_ip(), 0);
	ASSERT_EQ(rdma_create_id(NULL, &id, NULL, RDMA_PS_TCP), 0);
	ASSERT_NOT_NULL(id->channel);
	ASSERT_NULL(id->verbs);
	ASSERT_EQ(id->qp_type, IBV_QPT_RC);
	ASSERT_EQ(rdma_bind_addr(id, (struct sockaddr *)&sin), 0);
	expect_no_device(id);
	port = ntohs(rdma_get_src_port(id));
	expect_v4(rdma_get_local_addr(id), loopback_ip(), port);
	/* the resolution of a loopback destination attaches the device,
	 * the bound address and port stay */
	make_addr(&sin, loopback_ip(), 7);
	ASSERT_EQ(rdma_resolve_addr(id, NULL, (struct sockaddr *)&sin, 2000),
		  0);
	ASSERT_EQ(id->event->event, RDMA_CM_EVENT_ADDR_RESOLVED);
	expect_lo(id);
	expect_v4(rdma_get_local_addr(id), loopback_ip(), port);
	expect_gid(&id->route.addr.addr.ibaddr.sgid, loopback_ip());
	expect_gid(&id->route.addr.addr.ibaddr.dgid, loopback_ip());
	ASSERT_EQ(id->route.addr.addr.ibaddr.pkey, 0xffff);
	ASSERT_EQ(rdma_destroy_id(id), 0);

	/* anything in 127.0.0.0/8 is loopback (the kernel's ipv4_is_loopback) */
	make_addr(&sin, "127.0.0.2", 0);
	ASSERT_EQ(rdma_create_id(NULL, &id, NULL, RDMA_PS_UDP), 0);
	ASSERT_EQ(rdma_bind_addr(id, (struct sockaddr *)&sin), 0);
	expect_no_device(id);
	ASSERT_EQ(rdma_destroy_id(id), 0);
}

TEST(bind_loopback_ipv6)
{
	struct sockaddr_in6 v6 = { .sin6_family = AF_INET6,
				   .sin6_addr = IN6ADDR_LOOPBACK_INIT };
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id;

	netenv_need(NETENV_IP6_LO);
	ch = rdma_create_event_channel();
	ASSERT_NOT_NULL(ch);
	ASSERT_EQ(rdma_create_id(ch, &id, NULL, RDMA_PS_TCP), 0);
	ASSERT_EQ(rdma_bind_addr(id, (struct sockaddr *)&v6), 0);
	expect_no_device(id);
	ASSERT_EQ(rdma_get_local_addr(id)->sa_family, AF_INET6);
	v6.sin6_port = htons(7);
	ASSERT_EQ(rdma_resolve_addr(id, NULL, (struct sockaddr *)&v6, 2000),
		  0);
	expect_event_ack(ch, RDMA_CM_EVENT_ADDR_RESOLVED);
	expect_lo(id);
	ASSERT(!memcmp(&id->route.addr.addr.ibaddr.sgid, &in6addr_loopback,
		       16));
	ASSERT(!memcmp(&id->route.addr.addr.ibaddr.dgid, &in6addr_loopback,
		       16));
	ASSERT_EQ(rdma_destroy_id(id), 0);
	rdma_destroy_event_channel(ch);
}

TEST(bind_interface_address)
{
	struct rdma_cm_id *id;
	struct sockaddr_in sin;
	const char *ip;
	char name[64];

	netenv_need(NETENV_IP4_IFACE);
	ip = other_ip();
	ASSERT_NOT_NULL(ip);
	make_addr(&sin, ip, 0);
	ASSERT_EQ(rdma_create_id(NULL, &id, NULL, RDMA_PS_UDP), 0);
	ASSERT_EQ(id->qp_type, IBV_QPT_UD);
	ASSERT_EQ(rdma_bind_addr(id, (struct sockaddr *)&sin), 0);
	snprintf(name, sizeof(name), "%s",
		 ibv_get_device_name(id->verbs->device));
	ASSERT(strcmp(name, "softhca_lo") != 0);
	check_bound(id, ip, name);
	ASSERT_EQ(rdma_destroy_id(id), 0);
}

TEST(bind_wildcard)
{
	struct rdma_cm_id *id;
	struct sockaddr_in sin;

	make_addr(&sin, "0.0.0.0", 0);
	ASSERT_EQ(rdma_create_id(NULL, &id, NULL, RDMA_PS_TCP), 0);
	ASSERT_EQ(rdma_bind_addr(id, (struct sockaddr *)&sin), 0);
	expect_no_device(id);
	/* the route to 127.0.0.1 leaves from 127.0.0.1 (cma_set_loopback) */
	make_addr(&sin, loopback_ip(), 7);
	ASSERT_EQ(rdma_resolve_addr(id, NULL, (struct sockaddr *)&sin, 2000),
		  0);
	expect_lo(id);
	expect_v4(rdma_get_local_addr(id), loopback_ip(),
		  ntohs(rdma_get_src_port(id)));
	ASSERT_EQ(rdma_destroy_id(id), 0);
}

/*
 * A listener bound to 127.0.0.1 (or to a wildcard) has no device; each
 * connect request's id has the device of the address the request came
 * to, with its default PD and port 1.
 */
static void listen_child_device(const char *ip)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_id *lid, *cid, *cid2;
	struct rdma_cm_event *ev;
	uint16_t port;

	ASSERT_NOT_NULL(ch);
	port = listen_on(ch, &lid, ip, RDMA_PS_TCP);
	expect_no_device(lid);
	ASSERT_EQ(rdma_create_id(ch, &cid, NULL, RDMA_PS_TCP), 0);
	resolve_to(ch, cid, loopback_ip(), port);
	expect_lo(cid);
	make_qp(cid, IBV_QPT_RC);
	ASSERT_EQ(rdma_connect(cid, NULL), 0);
	ev = expect_event(ch, RDMA_CM_EVENT_CONNECT_REQUEST);
	ASSERT(ev->listen_id == lid);
	expect_lo(ev->id);
	ASSERT(ev->id->verbs == cid->verbs);	/* one shared context */
	expect_v4(rdma_get_local_addr(ev->id), loopback_ip(), port);
	expect_gid(&ev->id->route.addr.addr.ibaddr.sgid, loopback_ip());
	expect_no_device(lid);			/* the listener keeps none */
	ASSERT_EQ(rdma_reject(ev->id, NULL, 0), 0);
	cid2 = ev->id;
	ASSERT_EQ(rdma_ack_cm_event(ev), 0);
	ASSERT_EQ(rdma_destroy_id(cid2), 0);
	ev = expect_event(ch, RDMA_CM_EVENT_REJECTED);
	ASSERT(ev->id == cid);
	ASSERT_EQ(rdma_ack_cm_event(ev), 0);
	rdma_destroy_qp(cid);
	ASSERT_EQ(rdma_destroy_id(cid), 0);
	ASSERT_EQ(rdma_destroy_id(lid), 0);
	rdma_destroy_event_channel(ch);
}

TEST(listen_loopback_requests_have_a_device)
{
	listen_child_device(loopback_ip());
}

TEST(listen_wildcard_requests_have_a_device)
{
	listen_child_device("0.0.0.0");
}

TEST(bind_errors)
{
	struct rdma_cm_id *a, *b;
	struct sockaddr_in sin;
	struct sockaddr sa = { .sa_family = AF_UNIX };

	ASSERT_EQ(rdma_create_id(NULL, &a, NULL, RDMA_PS_TCP), 0);
	ASSERT_EQ(rdma_create_id(NULL, &b, NULL, RDMA_PS_TCP), 0);
	errno = 0;
	ASSERT_EQ(rdma_bind_addr(a, NULL), -1);
	ASSERT_EQ(errno, EINVAL);
	ASSERT_EQ(rdma_bind_addr(a, &sa), -1);
	ASSERT_EQ(errno, EINVAL);
	/* not an address of this machine (TEST-NET-3) */
	make_addr(&sin, "203.0.113.7", 0);
	ASSERT_EQ(rdma_bind_addr(a, (struct sockaddr *)&sin), -1);
	ASSERT_EQ(errno, EADDRNOTAVAIL);
	make_addr(&sin, loopback_ip(), 0);
	ASSERT_EQ(rdma_bind_addr(a, (struct sockaddr *)&sin), 0);
	ASSERT_EQ(rdma_bind_addr(a, (struct sockaddr *)&sin), -1);
	ASSERT_EQ(errno, EINVAL);
	/* the port of a listener is taken */
	ASSERT_EQ(rdma_listen(a, 1), 0);
	ASSERT_EQ(rdma_listen(a, 1), -1);
	ASSERT_EQ(errno, EINVAL);
	sin.sin_port = rdma_get_src_port(a);
	ASSERT_EQ(rdma_bind_addr(b, (struct sockaddr *)&sin), -1);
	ASSERT_EQ(errno, EADDRINUSE);
	ASSERT_EQ(rdma_destroy_id(a), 0);
	ASSERT_EQ(rdma_destroy_id(b), 0);
	errno = 0;
	ASSERT_EQ(rdma_create_id(NULL, &a, NULL, (enum rdma_port_space)0x999),
		  -1);
	ASSERT_EQ(errno, EINVAL);
}

TEST(listen_unbound_picks_a_port)
{
	struct rdma_cm_id *id;

	ASSERT_EQ(rdma_create_id(NULL, &id, NULL, RDMA_PS_TCP), 0);
	ASSERT_EQ(rdma_listen(id, 0), 0);
	ASSERT_NE(rdma_get_src_port(id), 0);
	ASSERT_EQ(rdma_get_local_addr(id)->sa_family, AF_INET);
	ASSERT_EQ(rdma_destroy_id(id), 0);
}

static void resolve_check(const char *ip, bool lo)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct ibv_port_attr pattr;
	struct ibv_sa_path_rec *p;
	struct rdma_cm_id *id;

	ASSERT_NOT_NULL(ch);
	ASSERT_EQ(rdma_create_id(ch, &id, NULL, RDMA_PS_TCP), 0);
	ASSERT_EQ(rdma_resolve_route(id, 2000), -1);
	ASSERT_EQ(errno, EINVAL);
	resolve_to(ch, id, ip, 7);
	ASSERT_NOT_NULL(id->verbs);
	if (lo)
		ASSERT_STR_EQ(ibv_get_device_name(id->verbs->device),
			      "softhca_lo");
	expect_v4(rdma_get_local_addr(id), ip, ntohs(rdma_get_src_port(id)));
	ASSERT_NE(rdma_get_src_port(id), 0);
	expect_v4(rdma_get_peer_addr(id), ip, 7);
	ASSERT_EQ(rdma_get_dst_port(id), htons(7));
	expect_gid(&id->route.addr.addr.ibaddr.sgid, ip);
	expect_gid(&id->route.addr.addr.ibaddr.dgid, ip);
	ASSERT_EQ(id->route.num_paths, 1);
	p = id->route.path_rec;
	ASSERT_NOT_NULL(p);
	expect_gid(&p->sgid, ip);
	expect_gid(&p->dgid, ip);
	ASSERT_EQ(p->pkey, 0xffff);
	ASSERT_EQ(p->numb_path, 1);
	ASSERT_EQ(p->reversible, 1);
	ASSERT_EQ(p->packet_life_time, 18);
	ASSERT_EQ(ibv_query_port(id->verbs, 1, &pattr), 0);
	ASSERT_EQ(p->mtu, pattr.active_mtu);
	/* one resolution per id */
	ASSERT_EQ(rdma_resolve_route(id, 2000), -1);
	ASSERT_EQ(errno, EINVAL);
	ASSERT_EQ(rdma_destroy_id(id), 0);
	rdma_destroy_event_channel(ch);
}

TEST(resolve_loopback)
{
	resolve_check(loopback_ip(), true);
}

TEST(resolve_interface_address)
{
	netenv_need(NETENV_IP4_IFACE);
	ASSERT_NOT_NULL(other_ip());
	resolve_check(other_ip(), false);
}

TEST(resolve_errors)
{
	struct sockaddr_in6 v6 = { .sin6_family = AF_INET6 };
	struct rdma_event_channel *ch;
	struct sockaddr_in src, dst;
	struct rdma_cm_id *id;
	int fd;

	/* in a network of its own, 2001:db8::1 has no route */
	netenv_need(0);
	ch = rdma_create_event_channel();
	ASSERT_NOT_NULL(ch);
	ASSERT_EQ(rdma_create_id(ch, &id, NULL, RDMA_PS_TCP), 0);
	ASSERT_EQ(rdma_resolve_addr(id, NULL, NULL, 2000), -1);
	ASSERT_EQ(errno, EINVAL);
	make_addr(&src, loopback_ip(), 0);
	ASSERT_EQ(rdma_bind_addr(id, (struct sockaddr *)&src), 0);
	/* bound IPv4, destination IPv6 */
	v6.sin6_addr = in6addr_loopback;
	ASSERT_EQ(rdma_resolve_addr(id, NULL, (struct sockaddr *)&v6,
				    2000), -1);
	ASSERT_EQ(errno, EINVAL);
	make_addr(&dst, loopback_ip(), 7);
	ASSERT_EQ(rdma_resolve_addr(id, NULL, (struct sockaddr *)&dst,
				    2000), 0);
	expect_event_ack(ch, RDMA_CM_EVENT_ADDR_RESOLVED);
	ASSERT_EQ(rdma_resolve_addr(id, NULL, (struct sockaddr *)&dst,
				    2000), -1);
	ASSERT_EQ(errno, EINVAL);
	ASSERT_EQ(rdma_destroy_id(id), 0);

	/* no route: a synchronous error, as the kernel's rdma_resolve_ip */
	fd = socket(AF_INET6, SOCK_DGRAM, 0);
	ASSERT_GE(fd, 0);
	inet_pton(AF_INET6, "2001:db8::1", &v6.sin6_addr);
	v6.sin6_port = htons(9);
	if (connect(fd, (struct sockaddr *)&v6, sizeof(v6)) == 0 ||
	    errno != ENETUNREACH) {
		close(fd);
		rdma_destroy_event_channel(ch);
		SKIP("2001:db8::1 is routable here");
	}
	close(fd);
	ASSERT_EQ(rdma_create_id(ch, &id, NULL, RDMA_PS_TCP), 0);
	ASSERT_EQ(rdma_resolve_addr(id, NULL, (struct sockaddr *)&v6,
				    2000), -1);
	ASSERT_EQ(errno, ENETUNREACH);
	ASSERT_EQ(rdma_destroy_id(id), 0);
	rdma_destroy_event_channel(ch);
}

TEST(resolve_synchronous)
{
	struct rdma_cm_id *id;
	struct sockaddr_in dst;

	make_addr(&dst, loopback_ip(), 7);
	ASSERT_EQ(rdma_create_id(NULL, &id, NULL, RDMA_PS_TCP), 0);
	ASSERT_EQ(rdma_resolve_addr(id, NULL, (struct sockaddr *)&dst,
				    2000), 0);
	ASSERT_NOT_NULL(id->event);
	ASSERT_EQ(id->event->event, RDMA_CM_EVENT_ADDR_RESOLVED);
	ASSERT_EQ(rdma_resolve_route(id, 2000), 0);
	ASSERT_EQ(id->event->event, RDMA_CM_EVENT_ROUTE_RESOLVED);
	ASSERT_EQ(rdma_destroy_id(id), 0);
}
