// SPDX-License-Identifier: MIT
/*
 * Devices: ibv_get_device_list/ibv_free_device_list, names, GUIDs, device
 * indexes, one device per interface with an address, the port and its GID
 * and P_Key tables as seen through the public API, ibv_read_sysfs_file.
 *
 * Reference: rdma-core 44 libibverbs/device.c and sysfs.c; the interface
 * rules are softhca's own (DESIGN.md "Devices").
 */
#include <endian.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <sched.h>
#include <unistd.h>
#include <sys/wait.h>

#include "harness.h"
#include "common.h"

int ibv_read_sysfs_file(const char *dir, const char *file, char *buf,
			size_t size);

#define MAX_IFS 64
#define MAX_ADDRS 32

struct test_if {
	char name[IF_NAMESIZE];
	int naddrs;
	struct in6_addr addrs[MAX_ADDRS]; /* IPv4 as ::ffff:a.b.c.d */
};

/* Interfaces that are up and have an IP address, as getifaddrs sees them. */
static int list_ifs(struct test_if *ifs)
{
	struct ifaddrs *ifa, *it;
	int n = 0, i;

	ASSERT_EQ(getifaddrs(&ifa), 0);
	for (it = ifa; it; it = it->ifa_next) {
		struct in6_addr a;

		if (!it->ifa_addr || !(it->ifa_flags & IFF_UP))
			continue;
		if (it->ifa_addr->sa_family == AF_INET) {
			memset(&a, 0, sizeof(a));
			a.s6_addr[10] = 0xff;
			a.s6_addr[11] = 0xff;
			memcpy(&a.s6_addr[12],
			       &((struct sockaddr_in *)it->ifa_addr)->sin_addr,
			       4);
		} else if (it->ifa_addr->sa_family == AF_INET6) {
			a = ((struct sockaddr_in6 *)it->ifa_addr)->sin6_addr;
		} else {
			continue;
		}
		for (i = 0; i < n; i++)
			if (!strcmp(ifs[i].name, it->ifa_name))
				break;
		if (i == n) {
			ASSERT_LT(n, MAX_IFS);
			memset(&ifs[n], 0, sizeof(ifs[n]));
			snprintf(ifs[n].name, sizeof(ifs[n].name), "%s",
				 it->ifa_name);
			n++;
		}
		if (ifs[i].naddrs < MAX_ADDRS)
			ifs[i].addrs[ifs[i].naddrs++] = a;
	}
	freeifaddrs(ifa);
	return n;
}

static int count_list(struct ibv_device **list)
{
	int n = 0;

	while (list[n])
		n++;
	return n;
}

TEST(list_is_non_null_and_counted)
{
	struct ibv_device **list;
	int num = -1;

	list = ibv_get_device_list(&num);
	ASSERT_NOT_NULL(list);
	ASSERT_EQ(count_list(list), num);
	ASSERT_NULL(list[num]);
	ibv_free_device_list(list);

	/* num is optional */
	list = ibv_get_device_list(NULL);
	ASSERT_NOT_NULL(list);
	ibv_free_device_list(list);
}

/*
 * A host without addresses (a fresh network namespace: lo down) gets a
 * non-NULL, empty list, not NULL: pyverbs and others treat NULL as an
 * error.
 */
TEST(empty_list_without_interfaces)
{
	struct ibv_device **list;
	int num = -1;

	/* root needs no user namespace (a container may refuse one) */
	if (unshare(geteuid() ? CLONE_NEWUSER | CLONE_NEWNET : CLONE_NEWNET))
		SKIP_ENV("cannot create a network namespace");
	list = ibv_get_device_list(&num);
	ASSERT_NOT_NULL(list);
	ASSERT_EQ(num, 0);
	ASSERT_NULL(list[0]);
	ibv_free_device_list(list);
}

TEST(one_device_per_interface_with_an_address)
{
	struct test_if ifs[MAX_IFS];
	struct ibv_device **list;
	char name[64];
	int nifs, num, i;

	nifs = list_ifs(ifs);
	list = ibv_get_device_list(&num);
	ASSERT_NOT_NULL(list);
	ASSERT_EQ(num, nifs);
	for (i = 0; i < nifs; i++) {
		snprintf(name, sizeof(name), "softhca_%.*s", IF_NAMESIZE,
			 ifs[i].name);
		if (!find_device(list, name))
			harness_fail(__FILE__, __LINE__, "no device %s", name);
	}
	ibv_free_device_list(list);
}

TEST(loopback_device_exists)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct test_if ifs[MAX_IFS];
	int i, n = list_ifs(ifs);

	for (i = 0; i < n; i++)
		if (!strcmp(ifs[i].name, "lo"))
			break;
	if (i == n)
		SKIP_ENV("lo is down or has no address");
	ASSERT_NOT_NULL(find_device(list, "softhca_lo"));
	ibv_free_device_list(list);
}

TEST(device_fields)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_device **d;

	ASSERT_NOT_NULL(list);
	for (d = list; *d; d++) {
		ASSERT_EQ(strncmp((*d)->name, "softhca_", 8), 0);
		ASSERT_STR_EQ(ibv_get_device_name(*d), (*d)->name);
		ASSERT_EQ((*d)->node_type, IBV_NODE_CA);
		ASSERT_EQ((*d)->transport_type, IBV_TRANSPORT_IB);
		ASSERT_NE((*d)->ibdev_path[0], 0);
		ASSERT_NE((*d)->dev_name[0], 0);
	}
	ibv_free_device_list(list);
}

TEST(device_index_distinct)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	int i, j, n = count_list(list);

	for (i = 0; i < n; i++) {
		ASSERT_GE(ibv_get_device_index(list[i]), 0);
		for (j = 0; j < i; j++)
			ASSERT_NE(ibv_get_device_index(list[i]),
				  ibv_get_device_index(list[j]));
	}
	ibv_free_device_list(list);
}

TEST(guid_nonzero_and_matches_query_device)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_device **d;

	for (d = list; *d; d++) {
		struct ibv_context *ctx = ibv_open_device(*d);
		struct ibv_device_attr attr;

		ASSERT_NOT_NULL(ctx);
		ASSERT_U64_EQ(ibv_get_device_guid(*d) != 0, 1);
		ASSERT_EQ(ibv_query_device(ctx, &attr), 0);
		ASSERT_U64_EQ(attr.node_guid, ibv_get_device_guid(*d));
		ASSERT_U64_EQ(attr.sys_image_guid != 0, 1);
		ASSERT_EQ(ibv_close_device(ctx), 0);
	}
	ibv_free_device_list(list);
}

static uint64_t lo_guid(void)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_device *dev;
	uint64_t guid;

	ASSERT_NOT_NULL(list);
	dev = find_device(list, "softhca_lo");
	if (!dev)
		SKIP_ENV("no softhca_lo: lo is down or has no address");
	guid = be64toh(ibv_get_device_guid(dev));
	ibv_free_device_list(list);
	return guid;
}

/*
 * The node GUID is stable: the same from two device lists and from another
 * process that computes it from scratch (this process has not touched the
 * library before the fork).
 */
TEST(guid_stable_across_lists_and_processes)
{
	uint64_t child_guid = 0, g1, g2;
	int fds[2], status;
	pid_t pid;

	ASSERT_EQ(pipe(fds), 0);
	pid = fork();
	ASSERT_GE(pid, 0);
	if (pid == 0) {
		uint64_t g = lo_guid();

		if (write(fds[1], &g, sizeof(g)) != sizeof(g))
			_exit(1);
		_exit(0);
	}
	ASSERT_EQ(read(fds[0], &child_guid, sizeof(child_guid)),
		  sizeof(child_guid));
	ASSERT_EQ(waitpid(pid, &status, 0), pid);
	g1 = lo_guid();
	g2 = lo_guid();
	ASSERT_U64_EQ(g1, g2);
	ASSERT_U64_EQ(child_guid, g1);
}

/* rdma-core keeps devices alive after ibv_free_device_list. */
TEST(device_usable_after_free_list)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_device *dev = find_device(list, "softhca_lo");
	struct ibv_context *ctx;

	if (!dev)
		SKIP_ENV("no softhca_lo: lo is down or has no address");
	ibv_free_device_list(list);
	ctx = ibv_open_device(dev);
	ASSERT_NOT_NULL(ctx);
	ASSERT(ctx->device == dev);
	ASSERT_STR_EQ(ibv_get_device_name(dev), "softhca_lo");
	ASSERT_EQ(ibv_close_device(ctx), 0);
}

/* perftest's ib_dev_name() table: ids that switch it to mlx5/EFA paths. */
static bool perftest_known_part(uint32_t id)
{
	static const uint32_t ids[] = {
		4099, 4100, 4103, 4104, 4113, 4129, 41682, 41683, 41686,
		41692, 1824, 5684, 5700, 5716, 5718, 5734, 32880, 32881,
		32882, 32883, 32912, 33136, 33168, 5638, 5652, 55296, 55298,
		55300, 61344, 61345,
	};
	unsigned int i;

	if ((id >= 4115 && id <= 4127) || (id >= 26418 && id <= 26478) ||
	    (id >= 25408 && id <= 25448) || (id >= 5824 && id <= 5873) ||
	    id == 5968)
		return true;
	for (i = 0; i < sizeof(ids) / sizeof(ids[0]); i++)
		if (ids[i] == id)
			return true;
	return false;
}

TEST(vendor_ids)
{
	struct ibv_context *ctx = open_lo();
	struct ibv_device_attr attr;

	ASSERT_EQ(ibv_query_device(ctx, &attr), 0);
	ASSERT_NE(attr.vendor_id, 0);
	ASSERT_EQ(perftest_known_part(attr.vendor_part_id), false);
	ASSERT_EQ(attr.phys_port_cnt, 1);
	ASSERT_EQ(ibv_close_device(ctx), 0);
}

/* One port: active, Ethernet, P_Key table {0xffff}. */
TEST(port_every_device)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_device **d;

	for (d = list; *d; d++) {
		struct ibv_context *ctx = ibv_open_device(*d);
		struct ibv_port_attr pa;
		__be16 pkey;

		ASSERT_NOT_NULL(ctx);
		ASSERT_EQ(ibv_query_port(ctx, 1, &pa), 0);
		ASSERT_EQ(pa.state, IBV_PORT_ACTIVE);
		ASSERT_EQ(pa.phys_state, 5); /* LinkUp */
		ASSERT_EQ(pa.link_layer, IBV_LINK_LAYER_ETHERNET);
		ASSERT_EQ(pa.pkey_tbl_len, 1);
		ASSERT_GE(pa.gid_tbl_len, 1);
		ASSERT_GE(pa.max_mtu, pa.active_mtu);
		ASSERT_GE(pa.active_mtu, IBV_MTU_256);
		ASSERT_GT(pa.max_msg_sz, 0x1000);
		ASSERT_EQ(ibv_query_pkey(ctx, 1, 0, &pkey), 0);
		ASSERT_EQ(be16toh(pkey), 0xffff);
		ASSERT_EQ(ibv_close_device(ctx), 0);
	}
	ibv_free_device_list(list);
}

/*
 * The GID table holds the interface's addresses, IPv4-mapped and IPv6,
 * each a RoCE v2 GID bound to the interface.
 */
TEST(gid_table_is_interface_addresses)
{
	struct test_if ifs[MAX_IFS];
	struct ibv_device **list = ibv_get_device_list(NULL);
	int nifs = list_ifs(ifs), i, j, k;

	for (i = 0; i < nifs; i++) {
		struct ibv_gid_entry ent[64];
		struct ibv_context *ctx;
		struct ibv_device *dev;
		char name[64];
		ssize_t n;

		snprintf(name, sizeof(name), "softhca_%.*s", IF_NAMESIZE,
			 ifs[i].name);
		dev = find_device(list, name);
		ASSERT_NOT_NULL(dev);
		ctx = ibv_open_device(dev);
		ASSERT_NOT_NULL(ctx);
		n = ibv_query_gid_table(ctx, ent, 64, 0);
		ASSERT_EQ(n, ifs[i].naddrs);
		for (j = 0; j < ifs[i].naddrs; j++) {
			for (k = 0; k < n; k++)
				if (!memcmp(ent[k].gid.raw, &ifs[i].addrs[j],
					    16))
					break;
			ASSERT_LT(k, n);
			ASSERT_EQ(ent[k].gid_type, IBV_GID_TYPE_ROCE_V2);
			ASSERT_EQ(ent[k].port_num, 1);
			ASSERT_EQ(ent[k].ndev_ifindex,
				  if_nametoindex(ifs[i].name));
		}
		ASSERT_EQ(ibv_close_device(ctx), 0);
	}
	ibv_free_device_list(list);
}

TEST(lo_gids)
{
	/* ::ffff:127.0.0.1 */
	static const uint8_t v4[16] = {
		[10] = 0xff, [11] = 0xff, [12] = 127, [15] = 1,
	};
	struct ibv_context *ctx = open_lo();
	union ibv_gid gid;

	/* IPv4 first: index 0 is ::ffff:127.0.0.1 */
	ASSERT_EQ(ibv_query_gid(ctx, 1, 0, &gid), 0);
	ASSERT_EQ(memcmp(gid.raw, v4, 16), 0);
	ASSERT_EQ(ibv_close_device(ctx), 0);
}

/* ibv_devinfo reads board_id through ibv_read_sysfs_file. */
TEST(read_sysfs_file_board_id)
{
	struct ibv_context *ctx = open_lo();
	char buf[64];
	int n;

	n = ibv_read_sysfs_file(ctx->device->ibdev_path, "board_id", buf,
				sizeof(buf));
	ASSERT_GT(n, 0);
	ASSERT_EQ((size_t)n, strlen(buf));
	ASSERT_EQ(buf[n - 1] != '\n', 1);
	ASSERT_EQ(ibv_close_device(ctx), 0);
}

TEST(read_sysfs_file_node_guid_format)
{
	struct ibv_context *ctx = open_lo();
	uint64_t guid = be64toh(ibv_get_device_guid(ctx->device));
	char buf[64], want[32];

	snprintf(want, sizeof(want), "%04x:%04x:%04x:%04x",
		 (unsigned int)(guid >> 48) & 0xffff,
		 (unsigned int)(guid >> 32) & 0xffff,
		 (unsigned int)(guid >> 16) & 0xffff,
		 (unsigned int)guid & 0xffff);
	ASSERT_GT(ibv_read_sysfs_file(ctx->device->ibdev_path, "node_guid", buf,
				      sizeof(buf)),
		  0);
	ASSERT_STR_EQ(buf, want);
	ASSERT_EQ(ibv_close_device(ctx), 0);
}

/* A clean failure: -1 with errno, nothing written past the buffer. */
TEST(read_sysfs_file_failures)
{
	struct ibv_context *ctx = open_lo();
	char buf[8];

	errno = 0;
	ASSERT_EQ(ibv_read_sysfs_file(ctx->device->ibdev_path, "no_such_file",
				      buf, sizeof(buf)),
		  -1);
	ASSERT_EQ(errno, ENOENT);
	errno = 0;
	ASSERT_EQ(ibv_read_sysfs_file("/nonexistent/softhca", "board_id", buf,
				      sizeof(buf)),
		  -1);
	ASSERT_EQ(errno, ENOENT);
	/* too small for the value and its terminator */
	ASSERT_EQ(
	    ibv_read_sysfs_file(ctx->device->ibdev_path, "board_id", buf, 2),
	    -1);
	ASSERT_EQ(ibv_close_device(ctx), 0);
}

/* Any other path is a real file read, newline stripped. */
TEST(read_sysfs_file_real_file)
{
	char buf[64];
	int n;

	n = ibv_read_sysfs_file("/proc/sys/kernel", "ostype", buf, sizeof(buf));
	ASSERT_EQ(n, 5);
	ASSERT_STR_EQ(buf, "Linux");
}
