// SPDX-License-Identifier: MIT
/*
 * softhca: the command-line tool.
 *
 *   softhca run -- CMD [ARGS...]   run CMD with softhca's libibverbs and
 *                                  librdmacm first on the library path
 *   softhca devices                list devices, ports and GIDs
 */
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <infiniband/verbs.h>

static void usage(FILE *out)
{
	fprintf(out,
		"usage: softhca run -- CMD [ARGS...]\n"
		"       softhca devices\n"
		"\n"
		"  run      run CMD on the soft stack: softhca's libibverbs.so.1\n"
		"           and librdmacm.so.1 come first on LD_LIBRARY_PATH\n"
		"  devices  list softhca devices, their ports and GID tables\n");
}

/* <dir of this executable>/../lib, where the drop-in libraries are. */
static int lib_dir(char *out, size_t len)
{
	char exe[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	char probe[PATH_MAX + 32];

	if (n < 0)
		return -errno;
	exe[n] = '\0';
	snprintf(out, len, "%s/../lib", dirname(exe));
	snprintf(probe, sizeof(probe), "%s/libibverbs.so.1", out);
	if (access(probe, R_OK))
		return -ENOENT;
	return 0;
}

static int cmd_run(int argc, char **argv)
{
	char dir[PATH_MAX], real[PATH_MAX], *path;
	const char *old = getenv("LD_LIBRARY_PATH");
	int ret;

	if (argc > 0 && !strcmp(argv[0], "--")) {
		argc--;
		argv++;
	}
	if (argc < 1) {
		usage(stderr);
		return 2;
	}
	ret = lib_dir(dir, sizeof(dir));
	if (ret) {
		fprintf(stderr, "softhca: cannot find libibverbs.so.1 next to "
			"this program: %s\n", strerror(-ret));
		return 1;
	}
	if (!realpath(dir, real))
		snprintf(real, sizeof(real), "%s", dir);
	if (asprintf(&path, "%s%s%s", real, old && *old ? ":" : "",
		     old ? old : "") < 0)
		return 1;
	setenv("LD_LIBRARY_PATH", path, 1);
	free(path);
	execvp(argv[0], argv);
	fprintf(stderr, "softhca: cannot run %s: %s\n", argv[0],
		strerror(errno));
	return 127;
}

static const char *mtu_str(enum ibv_mtu m)
{
	switch (m) {
	case IBV_MTU_256: return "256";
	case IBV_MTU_512: return "512";
	case IBV_MTU_1024: return "1024";
	case IBV_MTU_2048: return "2048";
	case IBV_MTU_4096: return "4096";
	default: return "?";
	}
}

static void print_gid(const union ibv_gid *gid)
{
	char s[INET6_ADDRSTRLEN];
	struct in6_addr a;

	memcpy(&a, gid->raw, sizeof(a));
	if (IN6_IS_ADDR_V4MAPPED(&a))
		inet_ntop(AF_INET, &a.s6_addr32[3], s, sizeof(s));
	else
		inet_ntop(AF_INET6, &a, s, sizeof(s));
	printf("%s", s);
}

static int show_device(struct ibv_device *dev)
{
	struct ibv_context *ctx = ibv_open_device(dev);
	struct ibv_port_attr port;
	uint64_t guid = be64toh(ibv_get_device_guid(dev));
	int i;

	printf("%s  node_guid %04x:%04x:%04x:%04x\n", ibv_get_device_name(dev),
	       (unsigned int)(guid >> 48) & 0xffff,
	       (unsigned int)(guid >> 32) & 0xffff,
	       (unsigned int)(guid >> 16) & 0xffff,
	       (unsigned int)guid & 0xffff);
	if (!ctx) {
		printf("  cannot open: %s\n", strerror(errno));
		return 1;
	}
	if (ibv_query_port(ctx, 1, &port)) {
		printf("  cannot query port 1: %s\n", strerror(errno));
		ibv_close_device(ctx);
		return 1;
	}
	printf("  port 1: %s, link layer %s, active MTU %s\n",
	       ibv_port_state_str(port.state),
	       port.link_layer == IBV_LINK_LAYER_ETHERNET ? "Ethernet" :
							   "InfiniBand",
	       mtu_str(port.active_mtu));
	for (i = 0; i < port.gid_tbl_len; i++) {
		union ibv_gid gid;
		static const union ibv_gid zero;

		if (ibv_query_gid(ctx, 1, i, &gid) ||
		    !memcmp(&gid, &zero, sizeof(gid)))
			continue;
		printf("    GID[%2d] ", i);
		print_gid(&gid);
		printf("  (RoCE v2)\n");
	}
	ibv_close_device(ctx);
	return 0;
}

static int cmd_devices(void)
{
	struct ibv_device **list;
	int n, i, ret = 0;

	list = ibv_get_device_list(&n);
	if (!list) {
		fprintf(stderr, "softhca: cannot list devices: %s\n",
			strerror(errno));
		return 1;
	}
	if (!n)
		printf("no devices: no network interface has an IP address\n");
	for (i = 0; i < n; i++)
		ret |= show_device(list[i]);
	ibv_free_device_list(list);
	return ret;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	if (!strcmp(argv[1], "run"))
		return cmd_run(argc - 2, argv + 2);
	if (!strcmp(argv[1], "devices"))
		return cmd_devices();
	if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") ||
	    !strcmp(argv[1], "help")) {
		usage(stdout);
		return 0;
	}
	fprintf(stderr, "softhca: unknown command '%s'\n", argv[1]);
	usage(stderr);
	return 2;
}
