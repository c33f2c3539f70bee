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
#include <endian.h>
#include <fcntl.h>
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
static uint64_t sys_guid;	/* the first present device's node GUID */

static uint64_t fnv1a64(uint64_t h, const void *data, size_t len)
{
	const unsigned char *p = data;

	while (len--) {
		h ^= *p++;
		h *= 0x100000001b3ull;
	}
	return h;
}

static uint64_t host_hash(void)
{
	char id[128] = "";
	uint64_t h = 0xcbf29ce484222325ull;
	int fd = open("/etc/machine-id", O_RDONLY | O_CLOEXEC);
	ssize_t n = -1;

	if (fd >= 0) {
		n = read(fd, id, sizeof(id) - 1);
		close(fd);
	}
	if (n <= 0)
		gethostname(id, sizeof(id) - 1);
	return fnv1a64(h, id, strlen(id));
}

/*
 * Node GUID: EUI-64 from the MAC address where the interface has one, as
 * RoCE NICs do; otherwise (loopback, tunnels) a hash of the host identity
 * and the interface name, with the locally-administered bit set.
 */
static uint64_t make_node_guid(const struct shca_netif *nif)
{
	static const uint8_t zero[6];
	uint8_t g[8];
	uint64_t v;

	if (memcmp(nif->mac, zero, 6)) {
		g[0] = nif->mac[0] ^ 0x02;
		g[1] = nif->mac[1];
		g[2] = nif->mac[2];
		g[3] = 0xff;
		g[4] = 0xfe;
		g[5] = nif->mac[3];
		g[6] = nif->mac[4];
		g[7] = nif->mac[5];
		memcpy(&v, g, 8);
		return v;
	}
	v = fnv1a64(host_hash(), nif->name, strlen(nif->name));
	memcpy(g, &v, 8);
	g[0] = (uint8_t)((g[0] & ~0x01) | 0x02);
	memcpy(&v, g, 8);
	return v;
}

static void device_update(struct shca_device *dev, const struct shca_netif *nif)
{
	unsigned int i;

	pthread_mutex_lock(&dev->lock);
	dev->ifindex = nif->ifindex;
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
	snprintf(dev->ibdev.name, sizeof(dev->ibdev.name), "softhca_%s",
		 nif->name);
	snprintf(dev->ibdev.dev_name, sizeof(dev->ibdev.dev_name), "uverbs%u",
		 nif->ifindex);
	snprintf(dev->ibdev.dev_path, sizeof(dev->ibdev.dev_path),
		 "/sys/class/infiniband_verbs/uverbs%u", nif->ifindex);
	snprintf(dev->ibdev.ibdev_path, sizeof(dev->ibdev.ibdev_path),
		 "/sys/class/infiniband/%s", dev->ibdev.name);
	dev->node_guid = make_node_guid(nif);
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
	free(list);
	for (dev = devices; dev && !dev->present; dev = dev->next)
		;
	if (dev)
		__atomic_store_n(&sys_guid, dev->node_guid, __ATOMIC_RELAXED);
	return 0;
}

/*
 * One "system", the host: every device reports the same system image
 * GUID, its first device's node GUID as of the last device list.
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
	unsigned int n = (unsigned int)shca_device_gid_count(dev);

	return n > SHCA_MAX_GID ? n : SHCA_MAX_GID;
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

/* The largest IB MTU that fits the interface MTU less RoCE v2 headers. */
enum ibv_mtu shca_device_active_mtu(struct shca_device *dev)
{
	/* IPv6 40 + UDP 8 + BTH 12 + largest extended header 28 + ICRC 4 */
	unsigned int room = dev->if_mtu > 92 ? dev->if_mtu - 92 : 0;

	if (room >= 4096)
		return IBV_MTU_4096;
	if (room >= 2048)
		return IBV_MTU_2048;
	if (room >= 1024)
		return IBV_MTU_1024;
	if (room >= 512)
		return IBV_MTU_512;
	return IBV_MTU_256;
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
