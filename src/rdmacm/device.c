// SPDX-License-Identifier: MIT
/*
 * Devices: the CM's view of softhca's libibverbs devices, through the
 * public verbs API only.
 *
 * Each device is opened once, on first need, and its context is shared:
 * it is what id->verbs points to and what rdma_get_devices() returns, as
 * with rdma-core.  A default PD exists while ids use the device (the PD
 * rdma_create_qp(id, NULL, ...) and rdma_reg_msgs() use).
 *
 * An IP address maps to the device whose GID table holds it (softhca's
 * GIDs are its interfaces' addresses, IPv4-mapped for IPv4): that is the
 * route lookup rdma_cm's kernel part does through the netdev.
 *
 * rdma_get_devices() lists the device of a loopback interface (softhca_lo)
 * after the others.  The kernel has no loopback RDMA device; a program
 * that takes the first device it is given (libfabric's default verbs
 * DGRAM domain does) then gets one that reaches other hosts, as it would
 * on hardware.  ibv_get_device_list() keeps the interfaces' order.
 */
#include <arpa/inet.h>
#include <net/if.h>
#include <stdlib.h>
#include <string.h>

#include "cma.h"
#include "../common/netif.h"

static struct cm_device *devices;
static bool listed;

/* The device list as ibv_get_device_list has it now.  cm_lock held.
 * Returns the number of devices present. */
static int devices_refresh(void)
{
	struct ibv_device **list;
	struct cm_device *d;
	int i, n = 0;

	list = ibv_get_device_list(&n);
	if (!list)
		return 0;
	for (d = devices; d; d = d->next)
		d->present = false;
	for (i = 0; i < n; i++) {
		for (d = devices; d; d = d->next)
			if (d->ibdev == list[i])
				break;
		if (!d) {
			d = calloc(1, sizeof(*d));
			if (!d)
				continue;
			struct cm_device **pp = &devices;

			while (*pp)
				pp = &(*pp)->next;
			d->ibdev = list[i];
			*pp = d;	/* in ibv_get_device_list order */
		}
		d->present = true;
	}
	/* softhca keeps its ibv_device objects for the life of the process */
	ibv_free_device_list(list);
	listed = true;
	return n;
}

/*
 * What every entry point does first (rdma-core's ucma_init): with no
 * device, every CM call fails with ENODEV.
 */
int cm_init(void)
{
	struct cm_device *d;
	int ret = -ENODEV;

	pthread_mutex_lock(&cm_lock);
	if (!listed)
		devices_refresh();
	for (d = devices; d; d = d->next)
		if (d->present)
			ret = 0;
	pthread_mutex_unlock(&cm_lock);
	return ret;
}

static int device_open(struct cm_device *d)
{
	struct ibv_device_attr dattr;
	struct ibv_port_attr pattr;
	const char *name;

	if (d->verbs)
		return 0;
	d->verbs = ibv_open_device(d->ibdev);
	if (!d->verbs)
		return -ENODEV;
	if (ibv_query_device(d->verbs, &dattr) ||
	    ibv_query_port(d->verbs, 1, &pattr)) {
		ibv_close_device(d->verbs);
		d->verbs = NULL;
		return -ENODEV;
	}
	d->max_qpsize = dattr.max_qp_wr;
	d->max_initiator_depth = (uint8_t)MIN(dattr.max_qp_init_rd_atom, 255);
	d->max_responder_resources = (uint8_t)MIN(dattr.max_qp_rd_atom, 255);
	d->active_mtu = pattr.active_mtu;
	d->link_layer = pattr.link_layer;
	name = ibv_get_device_name(d->ibdev);
	if (name && !strncmp(name, "softhca_", 8)) {
		unsigned int flags = 0;

		d->ifindex = if_nametoindex(name + 8);
		if (d->ifindex &&
		    !shca_netif_link_flags(d->ifindex, name + 8, &flags))
			d->loopback = flags & IFF_LOOPBACK;
	}
	return 0;
}

void cm_ip_to_gid(const struct sockaddr *addr, union ibv_gid *gid)
{
	memset(gid, 0, sizeof(*gid));
	if (addr->sa_family == AF_INET) {
		gid->raw[10] = 0xff;
		gid->raw[11] = 0xff;
		memcpy(&gid->raw[12],
		       &((const struct sockaddr_in *)addr)->sin_addr, 4);
	} else if (addr->sa_family == AF_INET6) {
		const struct sockaddr_in6 *s6 = (const void *)addr;

		memcpy(gid->raw, &s6->sin6_addr, 16);
	}
}

static int find_gid(struct cm_device *d, const union ibv_gid *gid)
{
	struct ibv_port_attr pattr;
	union ibv_gid g;
	int i;

	if (ibv_query_port(d->verbs, 1, &pattr))
		return -1;
	for (i = 0; i < pattr.gid_tbl_len && i < 256; i++) {
		if (ibv_query_gid(d->verbs, 1, i, &g))
			break;
		if (!memcmp(&g, gid, sizeof(g)))
			return i;
	}
	return -1;
}

/*
 * The device that owns this local address, and the index of its GID.
 * -EADDRNOTAVAIL if no device has it.  cm_lock held.
 */
int cm_device_by_addr(const struct sockaddr *addr, struct cm_device **dev,
		      uint8_t *gid_index)
{
	unsigned int scope = 0;
	union ibv_gid gid;
	int pass, idx;

	cm_ip_to_gid(addr, &gid);
	if (addr->sa_family == AF_INET6)
		scope = ((const struct sockaddr_in6 *)addr)->sin6_scope_id;
	for (pass = 0; pass < 2; pass++) {
		struct cm_device *d;

		if (pass)
			devices_refresh();	/* a new interface? */
		for (d = devices; d; d = d->next) {
			if (!d->present || device_open(d))
				continue;
			if (scope && d->ifindex && d->ifindex != scope)
				continue;
			idx = find_gid(d, &gid);
			if (idx >= 0) {
				*dev = d;
				*gid_index = (uint8_t)idx;
				return 0;
			}
		}
	}
	return -EADDRNOTAVAIL;
}

/* id uses dev from now on: id->verbs, id->pd (the default PD), port 1. */
int cm_device_bind(struct cm_id *id, struct cm_device *dev, uint8_t gid_index)
{
	if (!dev->pd) {
		dev->pd = ibv_alloc_pd(dev->verbs);
		if (!dev->pd)
			return errno ? -errno : -ENOMEM;
	}
	dev->refcnt++;
	id->dev = dev;
	id->sgid_index = gid_index;
	id->id.verbs = dev->verbs;
	id->id.pd = dev->pd;
	id->id.port_num = 1;
	return 0;
}

void cm_device_put(struct cm_device *dev)
{
	if (!dev || --dev->refcnt > 0)
		return;
	/* like rdma-core: the default PD goes with the last user; if the
	 * application still has objects on it, it stays for the next one */
	if (dev->pd && !ibv_dealloc_pd(dev->pd))
		dev->pd = NULL;
}

struct ibv_context **rdma_get_devices(int *num_devices)
{
	struct ibv_context **list = NULL;
	struct cm_device *d;
	int n = 0, i = 0, pass;

	if (cm_init())
		goto out;
	pthread_mutex_lock(&cm_lock);
	devices_refresh();
	for (d = devices; d; d = d->next)
		if (d->present && !device_open(d))
			n++;
	list = calloc((size_t)n + 1, sizeof(*list));
	/* the others first, then the loopback devices */
	for (pass = 0; list && pass < 2; pass++) {
		for (d = devices; d && i < n; d = d->next) {
			if (!d->present || !d->verbs || d->loopback != pass)
				continue;
			list[i++] = d->verbs;
			d->refcnt++;
		}
	}
	pthread_mutex_unlock(&cm_lock);
out:
	if (num_devices)
		*num_devices = list ? n : 0;
	return list;
}

void rdma_free_devices(struct ibv_context **list)
{
	struct cm_device *d;
	int i;

	if (!list)
		return;
	pthread_mutex_lock(&cm_lock);
	for (i = 0; list[i]; i++)
		for (d = devices; d; d = d->next)
			if (d->verbs == list[i])
				cm_device_put(d);
	pthread_mutex_unlock(&cm_lock);
	free(list);
}
