// SPDX-License-Identifier: MIT
#include <errno.h>
#include <ifaddrs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <net/if.h>
#include <netpacket/packet.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include "netif.h"

static struct shca_netif *find_or_add(struct shca_netif **list,
				      unsigned int *n, unsigned int *cap,
				      const char *name)
{
	struct shca_netif *nif;
	unsigned int i;

	for (i = 0; i < *n; i++)
		if (!strcmp((*list)[i].name, name))
			return &(*list)[i];
	if (*n == *cap) {
		unsigned int ncap = *cap ? *cap * 2 : 8;
		struct shca_netif *nl = realloc(*list, ncap * sizeof(*nl));

		if (!nl)
			return NULL;
		*list = nl;
		*cap = ncap;
	}
	nif = &(*list)[(*n)++];
	memset(nif, 0, sizeof(*nif));
	snprintf(nif->name, sizeof(nif->name), "%s", name);
	nif->ifindex = if_nametoindex(name);
	return nif;
}

static void add_addr(struct shca_netif *nif, const struct sockaddr *sa)
{
	struct shca_netif_addr *a;

	if (nif->naddrs == SHCA_NETIF_MAX_ADDRS)
		return;
	a = &nif->addrs[nif->naddrs];
	if (sa->sa_family == AF_INET) {
		shca_ipv4_to_mapped(&a->addr,
			((const struct sockaddr_in *)sa)->sin_addr.s_addr);
	} else {
		a->addr = ((const struct sockaddr_in6 *)sa)->sin6_addr;
	}
	a->family = sa->sa_family;
	nif->naddrs++;
}

static void read_link_info(struct shca_netif *nif)
{
	struct ifreq ifr;
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	nif->mtu = 1500;
	if (fd < 0)
		return;
	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", nif->name);
	if (!ioctl(fd, SIOCGIFMTU, &ifr))
		nif->mtu = (unsigned int)ifr.ifr_mtu;
	if (!ioctl(fd, SIOCGIFHWADDR, &ifr))
		memcpy(nif->mac, ifr.ifr_hwaddr.sa_data, 6);
	close(fd);
}

static int cmp_ifindex(const void *a, const void *b)
{
	const struct shca_netif *x = a, *y = b;

	return (x->ifindex > y->ifindex) - (x->ifindex < y->ifindex);
}

/* IPv4 first, keeping the kernel's order inside each family. */
static void order_addrs(struct shca_netif *nif)
{
	struct shca_netif_addr tmp[SHCA_NETIF_MAX_ADDRS];
	unsigned int i, k = 0;

	for (i = 0; i < nif->naddrs; i++)
		if (nif->addrs[i].family == AF_INET)
			tmp[k++] = nif->addrs[i];
	for (i = 0; i < nif->naddrs; i++)
		if (nif->addrs[i].family == AF_INET6)
			tmp[k++] = nif->addrs[i];
	memcpy(nif->addrs, tmp, k * sizeof(tmp[0]));
}

int shca_netif_list(struct shca_netif **out)
{
	struct shca_netif *list = NULL;
	unsigned int n = 0, cap = 0, i;
	struct ifaddrs *ifa, *it;

	if (getifaddrs(&ifa))
		return -errno;
	for (it = ifa; it; it = it->ifa_next) {
		struct shca_netif *nif;

		if (!it->ifa_addr || !(it->ifa_flags & IFF_UP))
			continue;
		if (it->ifa_addr->sa_family != AF_INET &&
		    it->ifa_addr->sa_family != AF_INET6)
			continue;
		nif = find_or_add(&list, &n, &cap, it->ifa_name);
		if (!nif) {
			freeifaddrs(ifa);
			free(list);
			return -ENOMEM;
		}
		nif->flags = it->ifa_flags;
		add_addr(nif, it->ifa_addr);
	}
	freeifaddrs(ifa);
	for (i = 0; i < n; i++) {
		read_link_info(&list[i]);
		order_addrs(&list[i]);
	}
	if (n)
		qsort(list, n, sizeof(*list), cmp_ifindex);
	*out = list;
	return (int)n;
}

int shca_netif_find_addr(const struct in6_addr *addr, struct shca_netif *out)
{
	struct shca_netif *list;
	int n, i, ret = -ENOENT;
	unsigned int j;

	n = shca_netif_list(&list);
	if (n < 0)
		return n;
	for (i = 0; i < n && ret; i++)
		for (j = 0; j < list[i].naddrs; j++)
			if (!memcmp(&list[i].addrs[j].addr, addr,
				    sizeof(*addr))) {
				*out = list[i];
				ret = 0;
				break;
			}
	free(list);
	return ret;
}
