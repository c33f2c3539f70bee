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

/*
 * Links: an interface's flags as the kernel's rtnetlink reports them, all
 * 32 bits (IFF_LOWER_UP, the carrier, is past the 16 that SIOCGIFFLAGS
 * returns).  No privilege is needed for any of these.
 */
#ifndef IFF_LOWER_UP
#define IFF_LOWER_UP 0x10000		/* <linux/if.h>: carrier on */
#endif

struct shca_netif_link {
	unsigned int ifindex;
	unsigned int flags;		/* IFF_*; 0 when gone */
	int gone;			/* the interface was deleted */
};

/*
 * The flags of interface ifindex now (name: for the SIOCGIFFLAGS fallback
 * when rtnetlink cannot be used, IFF_RUNNING then standing for the
 * carrier).  0, -ENODEV (no such interface) or -errno.
 */
int shca_netif_link_flags(unsigned int ifindex, const char *name,
			  unsigned int *flags);

/* A socket told of every link change (RTMGRP_LINK), non-blocking and
 * close-on-exec: the fd or -errno. */
int shca_netif_link_monitor(void);

/*
 * Read what the monitor socket holds, fn for each link message, until it
 * is empty: 0; -ENOBUFS when changes were lost (the socket overran: read
 * the links afresh); -errno.
 */
int shca_netif_link_read(int fd,
			 void (*fn)(const struct shca_netif_link *l, void *arg),
			 void *arg);

static inline void shca_ipv4_to_mapped(struct in6_addr *dst, uint32_t be_addr)
{
	dst->s6_addr32[0] = 0;
	dst->s6_addr32[1] = 0;
	dst->s6_addr32[2] = htonl(0xffff);
	dst->s6_addr32[3] = be_addr;
}

#endif
