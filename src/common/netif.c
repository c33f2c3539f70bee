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
#include <linux/netlink.h>
#include <linux/rtnetlink.h>

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

/* ------------------------------------------------------------------ */
/* Links (rtnetlink)                                                   */

/*
 * Room for a datagram of link messages.  Only their fixed part (struct
 * ifinfomsg: index and flags) is read; a datagram cut short counts as an
 * overrun, whose cure is to read the links afresh.
 */
#define LINK_BUF_SIZE 16384

union link_buf {
	struct nlmsghdr nh;		/* aligned for the headers */
	char raw[LINK_BUF_SIZE];
};

static int link_socket(unsigned int groups, int type_flags)
{
	struct sockaddr_nl sa;
	int fd, ret;

	fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC | type_flags,
		    NETLINK_ROUTE);
	if (fd < 0)
		return -errno;
	memset(&sa, 0, sizeof(sa));
	sa.nl_family = AF_NETLINK;
	sa.nl_groups = groups;
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa))) {
		ret = -errno;
		close(fd);
		return ret;
	}
	return fd;
}

/*
 * One datagram from the kernel: its length (0 for one from anyone else,
 * which is dropped), -EAGAIN, -ENOBUFS (the socket overran, or the
 * datagram did not fit), -errno.
 */
static ssize_t link_recv(int fd, union link_buf *buf, int flags)
{
	struct sockaddr_nl from;
	struct iovec iov = { .iov_base = buf, .iov_len = sizeof(*buf) };
	struct msghdr mh;
	ssize_t n;

	memset(&mh, 0, sizeof(mh));
	memset(&from, 0, sizeof(from));
	mh.msg_name = &from;
	mh.msg_namelen = sizeof(from);
	mh.msg_iov = &iov;
	mh.msg_iovlen = 1;
	do
		n = recvmsg(fd, &mh, flags);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return errno == EWOULDBLOCK ? -EAGAIN : -errno;
	if (mh.msg_flags & MSG_TRUNC)
		return -ENOBUFS;
	if (from.nl_pid != 0)
		return 0;
	return n;
}

/* A message: 1 for a link (in *l), 0 for anything else (an ack too), or
 * the kernel's error (-errno). */
static int link_parse(const struct nlmsghdr *nh, struct shca_netif_link *l)
{
	const struct ifinfomsg *ifi = NLMSG_DATA(nh);

	if (nh->nlmsg_type == NLMSG_ERROR) {
		const struct nlmsgerr *e = NLMSG_DATA(nh);

		if (nh->nlmsg_len < NLMSG_LENGTH(sizeof(*e)))
			return -EPROTO;
		return e->error > 0 ? -e->error : e->error;
	}
	if (nh->nlmsg_type != RTM_NEWLINK && nh->nlmsg_type != RTM_DELLINK)
		return 0;
	if (nh->nlmsg_len < NLMSG_LENGTH(sizeof(*ifi)) || ifi->ifi_index <= 0)
		return 0;
	l->ifindex = (unsigned int)ifi->ifi_index;
	l->gone = nh->nlmsg_type == RTM_DELLINK;
	l->flags = l->gone ? 0 : ifi->ifi_flags;
	return 1;
}

/* Without rtnetlink: SIOCGIFFLAGS, whose IFF_RUNNING (operational state
 * up) stands for the carrier it cannot report. */
static int link_flags_ioctl(const char *name, unsigned int *flags)
{
	struct ifreq ifr;
	unsigned int f;
	int fd, ret = 0;

	fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", name);
	if (ioctl(fd, SIOCGIFFLAGS, &ifr)) {
		ret = -errno;
	} else {
		f = (unsigned short)ifr.ifr_flags;
		if (f & IFF_RUNNING)
			f |= IFF_LOWER_UP;
		*flags = f;
	}
	close(fd);
	return ret;
}

/* RTM_GETLINK for one interface: 0, -ENODEV, -errno. */
static int link_flags_netlink(unsigned int ifindex, unsigned int *flags)
{
	struct {
		struct nlmsghdr nh;
		struct ifinfomsg ifi;
	} req;
	struct sockaddr_nl kernel = { .nl_family = AF_NETLINK };
	union link_buf *buf;
	int fd, ret = -EPROTO;
	ssize_t n;

	buf = malloc(sizeof(*buf));
	if (!buf)
		return -ENOMEM;
	fd = link_socket(0, 0);
	if (fd < 0) {
		free(buf);
		return fd;
	}
	memset(&req, 0, sizeof(req));
	req.nh.nlmsg_len = NLMSG_LENGTH(sizeof(req.ifi));
	req.nh.nlmsg_type = RTM_GETLINK;
	req.nh.nlmsg_flags = NLM_F_REQUEST;
	req.nh.nlmsg_seq = 1;
	req.ifi.ifi_family = AF_UNSPEC;
	req.ifi.ifi_index = (int)ifindex;
	if (sendto(fd, &req, req.nh.nlmsg_len, 0, (struct sockaddr *)&kernel,
		   sizeof(kernel)) < 0) {
		ret = -errno;
		goto out;
	}
	/*
	 * The kernel answers within sendto: the link, or an error, is queued
	 * when it returns.  Nothing there (-EAGAIN) is not waited for.
	 */
	for (;;) {
		struct shca_netif_link l;
		struct nlmsghdr *nh;
		unsigned int len;	/* NLMSG_OK compares it with __u32 */
		int r;

		n = link_recv(fd, buf, MSG_DONTWAIT);
		if (n < 0) {
			ret = (int)n;
			goto out;
		}
		len = (unsigned int)n;
		for (nh = &buf->nh; NLMSG_OK(nh, len);
		     nh = NLMSG_NEXT(nh, len)) {
			if (nh->nlmsg_seq != req.nh.nlmsg_seq)
				continue;
			r = link_parse(nh, &l);
			if (r < 0) {
				ret = r;
				goto out;
			}
			if (r == 1 && l.ifindex == ifindex) {
				*flags = l.flags;
				ret = 0;
				goto out;
			}
		}
	}
out:
	close(fd);
	free(buf);
	return ret;
}

int shca_netif_link_flags(unsigned int ifindex, const char *name,
			  unsigned int *flags)
{
	int ret = link_flags_netlink(ifindex, flags);

	if (ret == 0 || ret == -ENODEV)
		return ret;
	return link_flags_ioctl(name, flags);
}

int shca_netif_link_monitor(void)
{
	return link_socket(RTMGRP_LINK, SOCK_NONBLOCK);
}

int shca_netif_link_read(int fd,
			 void (*fn)(const struct shca_netif_link *l, void *arg),
			 void *arg)
{
	union link_buf buf;

	for (;;) {
		struct shca_netif_link l;
		struct nlmsghdr *nh;
		ssize_t n = link_recv(fd, &buf, MSG_DONTWAIT);
		unsigned int len;	/* NLMSG_OK compares it with __u32 */

		if (n == -EAGAIN)
			return 0;
		if (n < 0)
			return (int)n;
		len = (unsigned int)n;
		for (nh = &buf.nh; NLMSG_OK(nh, len); nh = NLMSG_NEXT(nh, len))
			if (link_parse(nh, &l) == 1)
				fn(&l, arg);
	}
}
