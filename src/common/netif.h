/* SPDX-License-Identifier: MIT */
/*
 * Network interfaces and their addresses: the raw material of devices.
 */
#ifndef SOFTHCA_NETIF_H
#define SOFTHCA_NETIF_H

#include <net/if.h>
#include <netinet/in.h>
#include <stdint.h>

#define SHCA_NETIF_MAX_ADDRS 32

struct shca_netif_addr {
	int family;			/* AF_INET or AF_INET6 */
	struct in6_addr addr;		/* IPv4 as ::ffff:a.b.c.d */
};

struct shca_netif {
	char name[IF_NAMESIZE];
	unsigned int ifindex;
	unsigned int flags;		/* IFF_* */
	unsigned int mtu;
	uint8_t mac[6];
	unsigned int naddrs;
	struct shca_netif_addr addrs[SHCA_NETIF_MAX_ADDRS];
};

/*
 * Interfaces that have at least one IP address, in ifindex order.  IPv4
 * addresses come before IPv6 ones within an interface.  Returns the count
 * (0 is valid) or -errno; *out is malloc'ed.
 */
int shca_netif_list(struct shca_netif **out);

/* The interface that holds this local address, or -ENOENT. */
int shca_netif_find_addr(const struct in6_addr *addr, struct shca_netif *out);

static inline void shca_ipv4_to_mapped(struct in6_addr *dst, uint32_t be_addr)
{
	dst->s6_addr32[0] = 0;
	dst->s6_addr32[1] = 0;
	dst->s6_addr32[2] = htonl(0xffff);
	dst->s6_addr32[3] = be_addr;
}

#endif
