// SPDX-License-Identifier: MIT
/* A network of the case's own (netenv.h). */
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <stdbool.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "netenv.h"

/*
 * The namespace, made with iproute2 as tests/netns/lib.sh makes its hosts
 * (veth, which the netns tests need anyway).  No IPv6 address generation
 * on the pair: shca1 keeps no address, hence no device; on a kernel
 * without IPv6 that step fails, and it may.
 */
static const struct {
	const char *cmd;
	bool optional;
} steps[] = {
	{ "ip link set lo up", false },
	{ "ip link add shca0 type veth peer name shca1", false },
	{ "ip link set shca0 addrgenmode none", true },
	{ "ip link set shca1 addrgenmode none", true },
	{ "ip addr add " NETENV_IP4 "/24 dev shca0", false },
	{ "ip link set shca0 up", false },
	{ "ip link set shca1 up", false },
};

/* Run cmd; its exit status, its first line of output in why. */
static int run(const char *cmd, char *why, size_t len)
{
	char line[160] = "", full[256];
	FILE *f;
	int st;

	snprintf(full, sizeof(full), "%s 2>&1", cmd);
	fflush(stdout);
	f = popen(full, "r");
	if (!f) {
		snprintf(why, len, "popen %s: %s", cmd, strerror(errno));
		return -1;
	}
	if (fgets(line, sizeof(line), f))
		line[strcspn(line, "\n")] = '\0';
	while (fgetc(f) != EOF)
		;
	st = pclose(f);
	if (st == -1 || !WIFEXITED(st) || WEXITSTATUS(st)) {
		snprintf(why, len, "'%s' failed: %s", cmd, line);
		return -1;
	}
	return 0;
}

static unsigned int if_flags(const char *name)
{
	struct ifreq ifr;
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	unsigned int flags = 0;

	if (fd < 0)
		return 0;
	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", name);
	if (!ioctl(fd, SIOCGIFFLAGS, &ifr))
		flags = (unsigned short)ifr.ifr_flags;
	close(fd);
	return flags;
}

/*
 * The kernel reports the veth's carrier (IFF_RUNNING, which softhca's port
 * state follows) a little after the link comes up: wait for that state,
 * bounded generously (it is a state awaited, not a time measured).
 */
static int wait_running(const char *name, char *why, size_t len)
{
	int i;

	for (i = 0; i < 1000; i++) {
		if (if_flags(name) & IFF_RUNNING)
			return 0;
		poll(NULL, 0, 10);
	}
	snprintf(why, len, "%s never became RUNNING", name);
	return -1;
}

int netenv_private(char *why, size_t len)
{
	unsigned int i;
	int host, err;

	if (geteuid() != 0) {
		snprintf(why, len, "not root");
		return -EPERM;
	}
	host = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
	if (host < 0) {
		err = errno;
		snprintf(why, len, "/proc/self/ns/net: %s", strerror(err));
		return -err;
	}
	if (unshare(CLONE_NEWNET)) {
		err = errno;
		snprintf(why, len, "unshare(CLONE_NEWNET): %s", strerror(err));
		close(host);
		return -err;
	}
	for (i = 0; i < sizeof(steps) / sizeof(steps[0]); i++)
		if (run(steps[i].cmd, why, len) && !steps[i].optional)
			goto back_to_host;
	if (wait_running("shca0", why, len))
		goto back_to_host;
	close(host);
	printf("  netenv: in a network namespace of its own: lo, shca0 %s\n",
	       NETENV_IP4);
	return 0;

back_to_host:
	/* the half-made namespace goes when nothing is left in it */
	if (setns(host, CLONE_NEWNET))
		harness_fail(__FILE__, __LINE__, "setns back: %s",
			     strerror(errno));
	close(host);
	return -ENODEV;
}

/* An IPv4 address on an interface that is up and not lo (other_ip()'s
 * rule in tests/cm/cm_common.c). */
static bool have_ip4_iface(void)
{
	struct ifaddrs *ifa, *i;
	bool found = false;

	if (getifaddrs(&ifa))
		return false;
	for (i = ifa; i && !found; i = i->ifa_next)
		found = i->ifa_addr && i->ifa_addr->sa_family == AF_INET &&
			!(i->ifa_flags & IFF_LOOPBACK) &&
			(i->ifa_flags & IFF_UP);
	freeifaddrs(ifa);
	return found;
}

static bool have_ip6_lo(void)
{
	struct sockaddr_in6 v6 = { .sin6_family = AF_INET6,
				   .sin6_addr = IN6ADDR_LOOPBACK_INIT };
	int fd = socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	bool ok = fd >= 0 && !bind(fd, (struct sockaddr *)&v6, sizeof(v6));

	if (fd >= 0)
		close(fd);
	return ok;
}

static const char *missing(unsigned int what)
{
	if ((what & NETENV_IP4_IFACE) && !have_ip4_iface())
		return "no IPv4 address on an interface other than lo";
	if ((what & NETENV_IP6_LO) && !have_ip6_lo())
		return "no IPv6 loopback address (::1)";
	return NULL;
}

void netenv_need(unsigned int what)
{
	char why[256], reason[512];
	const char *miss;

	if (!netenv_private(why, sizeof(why))) {
		miss = missing(what);
		if (!miss)
			return;
		/* a kernel without IPv6, say */
		snprintf(reason, sizeof(reason),
			 "%s, even in a network namespace of its own", miss);
		SKIP_ENV(reason);
	}
	printf("  netenv: on the host's network (none of its own: %s)\n", why);
	miss = missing(what);
	if (!miss)
		return;
	snprintf(reason, sizeof(reason), "%s here, and no network of its own "
		 "(%s)", miss, why);
	SKIP_ENV(reason);
}
