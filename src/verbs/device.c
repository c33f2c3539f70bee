// SPDX-License-Identifier: MIT
/*
 * Devices: one per network interface that has an IP address, loopback
 * included, named softhca_<ifname>, with one RoCE v2 port whose GID table
 * holds the interface's addresses.
 *
 * Device objects live in one process-wide list and are never freed: a
 * context or a client's saved pointer stays valid after the device list
 * that returned it is freed, as with rdma-core.  An interface that loses its
 * addresses keeps its device object, marked absent, and is not listed.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "shca.h"

/* What libmlx5/libefa find at ibv_device + 664: not their ops table. */
const char shca_device_ops_tag[] = "softhca";

_Static_assert(offsetof(struct shca_device, ops_tag) == 664,
	       "verbs_device.ops must be at ibv_device + 664");
_Static_assert(sizeof(struct ibv_device) == 664, "v44 ibv_device layout");

static pthread_mutex_t devices_lock = PTHREAD_MUTEX_INITIALIZER;
static struct shca_device *devices;
static uint64_t sys_guid;	/* shca_ident_sys_image_guid, last list */

/* The names that carry the ifindex (dev->lock held, or a new device). */
static void device_set_paths(struct shca_device *dev)
{
	shca_ident_dev_name(dev->ibdev.dev_name, sizeof(dev->ibdev.dev_name),
			    dev->ifindex);
	snprintf(dev->ibdev.dev_path, sizeof(dev->ibdev.dev_path),
		 "/sys/class/infiniband_verbs/%s", dev->ibdev.dev_name);
}

static void device_update(struct shca_device *dev, const struct shca_netif *nif)
{
	uint64_t guid = shca_ident_node_guid(nif);
	unsigned int i;

	pthread_mutex_lock(&dev->lock);
	/* read without the lock on the data path (interface, MTU): written
	 * only when they change, which a refresh of the list rarely sees */
	if (dev->ifindex != nif->ifindex) {
		/* the interface was made again: its uverbs name follows */
		dev->ifindex = nif->ifindex;
		device_set_paths(dev);
	}
	if (dev->node_guid != guid)
		dev->node_guid = guid;
	if (dev->if_mtu != nif->mtu)
		dev->if_mtu = nif->mtu;
	dev->ngids = nif->naddrs;
	for (i = 0; i < nif->naddrs; i++)
		memcpy(dev->gids[i].raw, &nif->addrs[i].addr, 16);
	dev->present = true;
	pthread_mutex_unlock(&dev->lock);
}

static struct shca_device *device_new(const struct shca_netif *nif)
{
	struct shca_device *dev = calloc(1, sizeof(*dev));

	if (!dev)
		return NULL;
	pthread_mutex_init(&dev->lock, NULL);
	dev->ops_tag = shca_device_ops_tag;
	dev->ibdev.node_type = IBV_NODE_CA;
	dev->ibdev.transport_type = IBV_TRANSPORT_IB;
	snprintf(dev->ifname, sizeof(dev->ifname), "%s", nif->name);
	shca_ident_name(dev->ibdev.name, sizeof(dev->ibdev.name), nif->name);
	snprintf(dev->ibdev.ibdev_path, sizeof(dev->ibdev.ibdev_path),
		 "/sys/class/infiniband/%s", dev->ibdev.name);
	dev->ifindex = nif->ifindex;
	device_set_paths(dev);
	device_update(dev, nif);
	return dev;
}

/* Re-read the interfaces; devices_lock held. */
static int refresh_locked(void)
{
	struct shca_netif *list;
	struct shca_device *dev, **tail;
	int n, i;

	n = shca_netif_list(&list);
	if (n < 0)
		return n;
	for (dev = devices; dev; dev = dev->next)
		dev->present = false;
	for (i = 0; i < n; i++) {
		for (dev = devices; dev; dev = dev->next)
			if (!strcmp(dev->ifname, list[i].name))
				break;
		if (dev) {
			device_update(dev, &list[i]);
			continue;
		}
		dev = device_new(&list[i]);
		if (!dev)
			continue;
		for (tail = &devices; *tail; tail = &(*tail)->next)
			;
		*tail = dev;
	}
	if (n)
		__atomic_store_n(&sys_guid, shca_ident_sys_image_guid(list, n),
				 __ATOMIC_RELAXED);
	free(list);
	return 0;
}

/*
 * One "system", the host: every device reports the same system image
 * GUID, its first device's node GUID (shca_ident_sys_image_guid) as of
 * the last device list.
 */
uint64_t shca_sys_image_guid(struct shca_device *dev)
{
	uint64_t g = __atomic_load_n(&sys_guid, __ATOMIC_RELAXED);

	return g ? g : dev->node_guid;
}

int shca_devices_refresh(void)
{
	int ret;

	pthread_mutex_lock(&devices_lock);
	ret = refresh_locked();
	pthread_mutex_unlock(&devices_lock);
	return ret;
}

/* A NULL-terminated array of the present devices, in ifindex order. */
struct shca_device **shca_devices_snapshot(int *num)
{
	struct shca_device *dev, **arr;
	int n = 0;

	pthread_mutex_lock(&devices_lock);
	if (refresh_locked())
		shca_warn("cannot list network interfaces");
	for (dev = devices; dev; dev = dev->next)
		n += dev->present;
	arr = calloc((size_t)n + 1, sizeof(*arr));
	if (arr) {
		n = 0;
		for (dev = devices; dev; dev = dev->next)
			if (dev->present)
				arr[n++] = dev;
	}
	pthread_mutex_unlock(&devices_lock);
	if (num)
		*num = arr ? n : 0;
	return arr;
}

int shca_device_gid_count(struct shca_device *dev)
{
	int n;

	pthread_mutex_lock(&dev->lock);
	n = (int)dev->ngids;
	pthread_mutex_unlock(&dev->lock);
	return n;
}

unsigned int shca_device_gid_tbl_len(struct shca_device *dev)
{
	return shca_ident_gid_tbl_len((unsigned int)shca_device_gid_count(dev));
}

/* 0 with the GID (zero for an unused entry), -EINVAL past the table. */
int shca_device_gid(struct shca_device *dev, int index, union ibv_gid *gid)
{
	int ret = 0;

	if (index < 0 || (unsigned int)index >= shca_device_gid_tbl_len(dev))
		return -EINVAL;
	pthread_mutex_lock(&dev->lock);
	if ((unsigned int)index < dev->ngids)
		*gid = dev->gids[index];
	else
		memset(gid, 0, sizeof(*gid));
	pthread_mutex_unlock(&dev->lock);
	return ret;
}

enum ibv_mtu shca_device_active_mtu(struct shca_device *dev)
{
	return shca_ident_active_mtu(dev->if_mtu);
}

/* ------------------------------------------------------------------ */
/* The port's link                                                     */

/*
 * The port follows its interface as a RoCE port follows its netdev (rxe):
 * ACTIVE while the interface is up with carrier (IFF_UP and IFF_LOWER_UP),
 * DOWN otherwise, and every open context of the device is told of a
 * change (IBV_EVENT_PORT_ERR, IBV_EVENT_PORT_ACTIVE).  What the data path
 * does without carrier is the transport's business, not the port's.
 *
 * While this process has a context open, a link monitor (an rtnetlink
 * socket on RTMGRP_LINK: no privilege needed) is watched by the engine
 * thread and keeps every device's link_flags current, so ibv_query_port
 * costs no system call.  With no monitor (none could be made, or a forked
 * child that opened nothing yet) ibv_query_port asks the kernel each time.
 *
 * Locks, in this order: link_lock, devices_lock, a device's lock, a
 * context's async event queue.
 */
static pthread_mutex_t link_lock = PTHREAD_MUTEX_INITIALIZER;
static int link_fd = -1;	/* the monitor, link_pid's */
static pid_t link_pid;		/* atomic: read without link_lock */
static unsigned int link_users;	/* contexts attached in link_pid */

static bool link_active(unsigned int flags)
{
	return (flags & IFF_UP) && (flags & IFF_LOWER_UP);
}

/* The kernel's flags for dev's interface: 0 (none when it is gone) or
 * -errno. */
static int link_query(struct shca_device *dev, unsigned int *flags)
{
	char name[IF_NAMESIZE];
	unsigned int ifindex;
	int ret;

	pthread_mutex_lock(&dev->lock);
	ifindex = dev->ifindex;
	memcpy(name, dev->ifname, sizeof(name));
	pthread_mutex_unlock(&dev->lock);
	ret = shca_netif_link_flags(ifindex, name, flags);
	if (ret == -ENODEV) {
		*flags = 0;
		ret = 0;
	}
	return ret;
}

/* dev's interface now has these flags: a change of state goes to its
 * contexts (link_lock held). */
static void link_set(struct shca_device *dev, unsigned int flags)
{
	struct shca_context *c;
	bool now = link_active(flags), changed;

	pthread_mutex_lock(&dev->lock);
	changed = dev->link_known && link_active(dev->link_flags) != now;
	dev->link_flags = flags;
	dev->link_known = true;
	for (c = dev->link_ctxs; changed && c; c = c->link_next)
		shca_async_event(c, now ? IBV_EVENT_PORT_ACTIVE :
					  IBV_EVENT_PORT_ERR,
				 (void *)(uintptr_t)SHCA_PORT_NUM);
	pthread_mutex_unlock(&dev->lock);
	if (changed)
		shca_info("%s: port %d %s", dev->ibdev.name, SHCA_PORT_NUM,
			  now ? "active" : "down");
}

/* A link message from the monitor (engine thread, link_lock held). */
static void link_update(const struct shca_netif_link *l, void *arg)
{
	struct shca_device *dev;

	(void)arg;
	pthread_mutex_lock(&devices_lock);
	for (dev = devices; dev; dev = dev->next)
		if (dev->ifindex == l->ifindex)
			link_set(dev, l->flags);
	pthread_mutex_unlock(&devices_lock);
}

/* The monitor overran and lost changes: every link afresh. */
static void link_resync(void)
{
	struct shca_device *dev;
	unsigned int flags;

	pthread_mutex_lock(&devices_lock);
	for (dev = devices; dev; dev = dev->next)
		if (dev->link_known && !link_query(dev, &flags))
			link_set(dev, flags);
	pthread_mutex_unlock(&devices_lock);
}

/* Close the monitor (link_lock held); the devices' flags go stale. */
static void link_stop(void)
{
	struct shca_device *dev;

	if (link_fd >= 0) {
		/* a forked child's copy is not in its engine's epoll set */
		if (__atomic_load_n(&link_pid, __ATOMIC_RELAXED) ==
		    shca_getpid())
			shca_engine_unwatch(link_fd);
		close(link_fd);
		link_fd = -1;
	}
	pthread_mutex_lock(&devices_lock);
	for (dev = devices; dev; dev = dev->next) {
		pthread_mutex_lock(&dev->lock);
		dev->link_known = false;
		pthread_mutex_unlock(&dev->lock);
	}
	pthread_mutex_unlock(&devices_lock);
}

/* The engine thread: the monitor is readable. */
static void on_link_event(int fd, uint32_t events, void *arg)
{
	int ret;

	(void)events;
	(void)arg;
	pthread_mutex_lock(&link_lock);
	/* an event fetched before link_stop closed the fd */
	if (fd != link_fd) {
		pthread_mutex_unlock(&link_lock);
		return;
	}
	ret = shca_netif_link_read(fd, link_update, NULL);
	if (ret == -ENOBUFS) {
		shca_dbg("link monitor overran: reading the links afresh");
		link_resync();
	} else if (ret) {
		/* not to be woken for it again and again: ibv_query_port
		 * asks the kernel from now on */
		shca_warn("link monitor: %s; no port events from now on",
			  strerror(-ret));
		link_stop();
	}
	pthread_mutex_unlock(&link_lock);
}

/* Open the monitor, in the engine (link_lock held).  0 or -errno. */
static int link_start(void)
{
	int fd, ret;

	ret = shca_engine_start();
	if (ret)
		return ret;
	fd = shca_netif_link_monitor();
	if (fd < 0)
		return fd;
	/* on_link_event waits for link_lock, so for link_fd */
	ret = shca_engine_watch(fd, on_link_event, NULL);
	if (ret) {
		close(fd);
		return ret;
	}
	link_fd = fd;
	return 0;
}

void shca_device_link_attach(struct shca_context *sctx)
{
	struct shca_device *dev = sctx->dev;
	unsigned int flags;
	bool known;
	int ret;

	pthread_mutex_lock(&link_lock);
	if (__atomic_load_n(&link_pid, __ATOMIC_RELAXED) != shca_getpid()) {
		/* the first context, or a forked child's first: the
		 * parent's monitor and contexts are not this process's */
		struct shca_device *d;

		link_stop();
		pthread_mutex_lock(&devices_lock);
		for (d = devices; d; d = d->next) {
			pthread_mutex_lock(&d->lock);
			d->link_ctxs = NULL;
			pthread_mutex_unlock(&d->lock);
		}
		pthread_mutex_unlock(&devices_lock);
		link_users = 0;
		__atomic_store_n(&link_pid, shca_getpid(), __ATOMIC_RELAXED);
	}
	if (link_fd < 0) {
		ret = link_start();
		if (ret)
			shca_warn_once("no link monitor (%s): the ports report "
				       "no events", strerror(-ret));
	}
	pthread_mutex_lock(&dev->lock);
	known = dev->link_known;
	pthread_mutex_unlock(&dev->lock);
	/* the monitor first, then the flags: no change falls in between */
	if (link_fd >= 0 && !known && !link_query(dev, &flags))
		link_set(dev, flags);
	pthread_mutex_lock(&dev->lock);
	sctx->link_next = dev->link_ctxs;
	dev->link_ctxs = sctx;
	pthread_mutex_unlock(&dev->lock);
	link_users++;
	pthread_mutex_unlock(&link_lock);
}

void shca_device_link_detach(struct shca_context *sctx)
{
	struct shca_device *dev = sctx->dev;
	struct shca_context **pp;
	bool found = false;

	pthread_mutex_lock(&link_lock);
	pthread_mutex_lock(&dev->lock);
	for (pp = &dev->link_ctxs; *pp; pp = &(*pp)->link_next)
		if (*pp == sctx) {
			*pp = sctx->link_next;
			found = true;
			break;
		}
	pthread_mutex_unlock(&dev->lock);
	if (found &&
	    __atomic_load_n(&link_pid, __ATOMIC_RELAXED) == shca_getpid() &&
	    !--link_users)
		link_stop();
	pthread_mutex_unlock(&link_lock);
}

/* The port's state (shca_ident_port_state) from the link as this process
 * knows it. */
void shca_device_port_state(struct shca_device *dev,
			    enum ibv_port_state *state, uint8_t *phys_state)
{
	unsigned int flags;
	bool known;

	pthread_mutex_lock(&dev->lock);
	known = dev->link_known &&
		__atomic_load_n(&link_pid, __ATOMIC_RELAXED) == shca_getpid();
	flags = dev->link_flags;
	pthread_mutex_unlock(&dev->lock);
	/* cannot tell: active, as it always was */
	if (!known && link_query(dev, &flags))
		flags = IFF_UP | IFF_LOWER_UP;
	shca_ident_port_state(flags, state, phys_state);
}

/* ------------------------------------------------------------------ */
/* Exported verbs                                                      */

SHCA_DEFAULT_VERSION(ibv_get_device_list)
struct ibv_device **shca_latest_ibv_get_device_list(int *num_devices)
{
	struct shca_device **arr;
	int n;

	if (num_devices)
		*num_devices = 0;
	arr = shca_devices_snapshot(&n);
	if (!arr) {
		errno = ENOMEM;
		return NULL;
	}
	if (num_devices)
		*num_devices = n;
	/* shca_device starts with its ibv_device */
	return (struct ibv_device **)arr;
}

SHCA_DEFAULT_VERSION(ibv_free_device_list)
void shca_latest_ibv_free_device_list(struct ibv_device **list)
{
	free(list);
}

SHCA_DEFAULT_VERSION(ibv_get_device_name)
const char *shca_latest_ibv_get_device_name(struct ibv_device *device)
{
	return device->name;
}

SHCA_DEFAULT_VERSION(ibv_get_device_guid)
__be64 shca_latest_ibv_get_device_guid(struct ibv_device *device)
{
	return to_sdev(device)->node_guid;
}

int ibv_get_device_index(struct ibv_device *device)
{
	return (int)to_sdev(device)->ifindex;
}

/*
 * Is gid an address of this host (of an interface in this network
 * namespace)?  Then the same-host path reaches it.
 */
bool shca_gid_is_local(const union ibv_gid *gid)
{
	struct shca_device **all;
	bool found = false;
	int n, i;
	unsigned int j;

	all = shca_devices_snapshot(&n);
	for (i = 0; all && i < n && !found; i++) {
		pthread_mutex_lock(&all[i]->lock);
		for (j = 0; j < all[i]->ngids; j++)
			if (!memcmp(all[i]->gids[j].raw, gid->raw, 16))
				found = true;
		pthread_mutex_unlock(&all[i]->lock);
	}
	free(all);
	return found;
}
