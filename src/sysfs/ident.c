// SPDX-License-Identifier: MIT
/*
 * Device identity (ident.h): names, GUIDs, the port's MTU and state, from
 * the interface behind a device.
 */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "ident.h"

void shca_ident_name(char *out, size_t len, const char *ifname)
{
	snprintf(out, len, "%s%s", SHCA_DEV_PREFIX, ifname);
}

void shca_ident_dev_name(char *out, size_t len, unsigned int ifindex)
{
	snprintf(out, len, "uverbs%u", ifindex);
}

void shca_ident_uverbs_devno(unsigned int ifindex, unsigned int *major,
			     unsigned int *minor)
{
	*major = 231;			/* IB_UVERBS_MAJOR */
	*minor = 192 + ifindex;		/* IB_UVERBS_BASE_MINOR + index */
}

static uint64_t fnv1a64(uint64_t h, const void *data, size_t len)
{
	const unsigned char *p = data;

	while (len--) {
		h ^= *p++;
		h *= 0x100000001b3ull;
	}
	return h;
}

/* The host's identity, read once: /etc/machine-id, else the host name. */
static uint64_t host_hash(void)
{
	static uint64_t cached;
	static int known;		/* cached is set (release) */
	char id[128] = "";
	ssize_t n = -1;
	uint64_t h;
	int fd;

	if (__atomic_load_n(&known, __ATOMIC_ACQUIRE))
		return cached;
	fd = open("/etc/machine-id", O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		n = read(fd, id, sizeof(id) - 1);
		close(fd);
	}
	if (n <= 0)
		gethostname(id, sizeof(id) - 1);
	h = fnv1a64(0xcbf29ce484222325ull, id, strlen(id));
	cached = h;	/* racing first calls store the same value */
	__atomic_store_n(&known, 1, __ATOMIC_RELEASE);
	return h;
}

uint64_t shca_ident_node_guid(const struct shca_netif *nif)
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

uint64_t shca_ident_sys_image_guid(const struct shca_netif *list, int n)
{
	/* shca_netif_list gives the interfaces in ifindex order */
	return n > 0 ? shca_ident_node_guid(&list[0]) : 0;
}

unsigned int shca_ident_gid_tbl_len(unsigned int naddrs)
{
	return naddrs > SHCA_MAX_GID ? naddrs : SHCA_MAX_GID;
}

enum ibv_mtu shca_ident_active_mtu(unsigned int if_mtu)
{
	/* IPv6 40 + UDP 8 + BTH 12 + largest extended header 28 + ICRC 4 */
	unsigned int room = if_mtu > 92 ? if_mtu - 92 : 0;

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

/*
 * As rxe: LinkUp (5) when active (IFF_UP and IFF_LOWER_UP); otherwise
 * Polling (2) while the interface is up, waiting for carrier, and
 * Disabled (3) when it is administratively down or gone.
 */
void shca_ident_port_state(unsigned int link_flags,
			   enum ibv_port_state *state, uint8_t *phys_state)
{
	if ((link_flags & IFF_UP) && (link_flags & IFF_LOWER_UP)) {
		*state = IBV_PORT_ACTIVE;
		*phys_state = 5;
	} else {
		*state = IBV_PORT_DOWN;
		*phys_state = (link_flags & IFF_UP) ? 2 : 3;
	}
}
