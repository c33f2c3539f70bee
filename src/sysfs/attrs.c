// SPDX-License-Identifier: MIT
/*
 * The contents of the view's files, in the formats of the kernel's
 * drivers/infiniband/core/sysfs.c (each a line ending in '\n'), computed
 * when they are read: from the device's interface (ident.h), its link,
 * and the counters of the running processes (counters.h).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "../common/stat.h"
#include "counters.h"
#include "ident.h"
#include "tree_priv.h"

/* A counter read waits this long for a stopped process's hello. */
#define COUNTER_TIMEOUT_S 1

const char *const shca_vfs_dev_attr_names[SHCA_DEV_ATTR_MAX] = {
	[SHCA_DEV_ATTR_NODE_TYPE] = "node_type",
	[SHCA_DEV_ATTR_NODE_GUID] = "node_guid",
	[SHCA_DEV_ATTR_SYS_IMAGE_GUID] = "sys_image_guid",
	[SHCA_DEV_ATTR_NODE_DESC] = "node_desc",
	[SHCA_DEV_ATTR_FW_VER] = "fw_ver",
	[SHCA_DEV_ATTR_HCA_TYPE] = "hca_type",
	[SHCA_DEV_ATTR_HW_REV] = "hw_rev",
	[SHCA_DEV_ATTR_BOARD_ID] = "board_id",
};

const char *const shca_vfs_port_attr_names[SHCA_PORT_ATTR_MAX] = {
	[SHCA_PORT_ATTR_STATE] = "state",
	[SHCA_PORT_ATTR_LID] = "lid",
	[SHCA_PORT_ATTR_LID_MASK_COUNT] = "lid_mask_count",
	[SHCA_PORT_ATTR_SM_LID] = "sm_lid",
	[SHCA_PORT_ATTR_SM_SL] = "sm_sl",
	[SHCA_PORT_ATTR_CAP_MASK] = "cap_mask",
	[SHCA_PORT_ATTR_RATE] = "rate",
	[SHCA_PORT_ATTR_PHYS_STATE] = "phys_state",
	[SHCA_PORT_ATTR_LINK_LAYER] = "link_layer",
};

const char *const shca_vfs_uv_attr_names[SHCA_UV_ATTR_MAX] = {
	[SHCA_UV_ATTR_IBDEV] = "ibdev",
	[SHCA_UV_ATTR_ABI_VERSION] = "abi_version",
	[SHCA_UV_ATTR_DEV] = "dev",
};

/*
 * ports/1/counters: the kernel's table for a PMA with 64-bit data
 * counters and no IETF (unicast/multicast) ones, in its order.  softhca
 * has no physical layer, so no symbol, link or buffer errors happen; it
 * does not count link-downs, discards, or waits either (0).  Received
 * errors are the packets its QPs dropped as invalid.  Data counters are
 * in 4-byte words, as PortXmitData/PortRcvData, from the byte counters
 * (the net path counts headers too; the same-host path counts the
 * packets a message would be at the path MTU, and its payload).
 */
const struct shca_vfs_pma shca_vfs_pma[SHCA_VFS_PMA_MAX] = {
	{ "symbol_error", -1, 1 },
	{ "link_error_recovery", -1, 1 },
	{ "link_downed", -1, 1 },
	{ "port_rcv_errors", SHCA_STAT_DROPPED_PKTS, 1 },
	{ "port_rcv_remote_physical_errors", -1, 1 },
	{ "port_rcv_switch_relay_errors", -1, 1 },
	{ "port_xmit_discards", -1, 1 },
	{ "port_xmit_constraint_errors", -1, 1 },
	{ "port_rcv_constraint_errors", -1, 1 },
	{ "local_link_integrity_errors", -1, 1 },
	{ "excessive_buffer_overrun_errors", -1, 1 },
	{ "VL15_dropped", -1, 1 },
	{ "port_xmit_data", SHCA_STAT_SENT_BYTES, 4 },
	{ "port_rcv_data", SHCA_STAT_RCVD_BYTES, 4 },
	{ "port_xmit_packets", SHCA_STAT_SENT_PKTS, 1 },
	{ "port_rcv_packets", SHCA_STAT_RCVD_PKTS, 1 },
	{ "port_xmit_wait", -1, 1 },
};

static int show(char *buf, size_t size, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int show(char *buf, size_t size, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, size, fmt, ap);
	va_end(ap);
	if (n < 0)
		return -EIO;
	return (size_t)n < size ? n : -EOVERFLOW;
}

/* A GUID as sysfs prints it: four big-endian 16-bit groups. */
static int show_guid(char *buf, size_t size, uint64_t guid_be)
{
	const uint8_t *g = (const uint8_t *)&guid_be;

	return show(buf, size, "%02x%02x:%02x%02x:%02x%02x:%02x%02x\n", g[0],
		    g[1], g[2], g[3], g[4], g[5], g[6], g[7]);
}

static int dev_attr(const struct shca_vfs_node *n, char *buf, size_t size)
{
	char host[65] = "", name[SHCA_DEV_NAME_MAX], desc[128];

	switch (n->arg) {
	case SHCA_DEV_ATTR_NODE_TYPE:
		return show(buf, size, "%d: CA\n", 1);	/* RDMA_NODE_IB_CA */
	case SHCA_DEV_ATTR_NODE_GUID:
		return show_guid(buf, size, shca_ident_node_guid(&n->nif));
	case SHCA_DEV_ATTR_SYS_IMAGE_GUID:
		return show_guid(buf, size, n->sys_guid);
	case SHCA_DEV_ATTR_NODE_DESC:
		/* as rdma-ndd sets it ("%h %d"): the host, the device */
		gethostname(host, sizeof(host) - 1);
		shca_ident_name(name, sizeof(name), n->nif.name);
		snprintf(desc, sizeof(desc), "%s%s%s", host, *host ? " " : "",
			 name);
		return show(buf, size, "%.64s\n", desc);
	case SHCA_DEV_ATTR_FW_VER:
		return show(buf, size, "%s\n", SHCA_FW_VER);
	case SHCA_DEV_ATTR_HCA_TYPE:
		return show(buf, size, "%s\n", SHCA_HCA_TYPE);
	case SHCA_DEV_ATTR_HW_REV:
		return show(buf, size, "%d\n", SHCA_HW_VER);
	case SHCA_DEV_ATTR_BOARD_ID:
		return show(buf, size, "%s\n", SHCA_BOARD_ID);
	}
	return -EIO;
}

/* The kernel's rate line: per-lane speed times the lanes of the width. */
static int show_rate(char *buf, size_t size)
{
	static const struct {
		int code, deci;
		const char *name;
	} speeds[] = {
		{ 1, 25, "" }, { 2, 50, " DDR" }, { 4, 100, " QDR" },
		{ 8, 100, " FDR10" }, { 16, 140, " FDR" }, { 32, 250, " EDR" },
		{ 64, 500, " HDR" }, { 128, 1000, " NDR" },
	};
	static const struct {
		int code, lanes;
	} widths[] = { { 1, 1 }, { 2, 4 }, { 4, 8 }, { 8, 12 }, { 16, 2 } };
	unsigned int s = 0, w = 0;
	int rate;

	while (s < sizeof(speeds) / sizeof(speeds[0]) - 1 &&
	       speeds[s].code != SHCA_ACTIVE_SPEED)
		s++;
	while (w < sizeof(widths) / sizeof(widths[0]) - 1 &&
	       widths[w].code != SHCA_ACTIVE_WIDTH)
		w++;
	rate = speeds[s].deci * widths[w].lanes;
	return show(buf, size, "%d%s Gb/sec (%dX%s)\n", rate / 10,
		    rate % 10 ? ".5" : "", widths[w].lanes, speeds[s].name);
}

static int port_attr(const struct shca_vfs_node *n, char *buf, size_t size)
{
	static const char *const states[] = {
		"NOP", "DOWN", "INIT", "ARMED", "ACTIVE", "ACTIVE_DEFER",
	};
	static const char *const phys[] = {
		"<unknown>", "Sleep", "Polling", "Disabled",
		"PortConfigurationTraining", "LinkUp", "LinkErrorRecovery",
		"Phy Test",
	};
	enum ibv_port_state state;
	unsigned int flags;
	uint8_t phys_state;
	int ret;

	switch (n->arg) {
	case SHCA_PORT_ATTR_STATE:
	case SHCA_PORT_ATTR_PHYS_STATE:
		/* as libibverbs: gone is down; cannot tell is active */
		ret = shca_netif_link_flags(n->nif.ifindex, n->nif.name,
					    &flags);
		if (ret == -ENODEV)
			flags = 0;
		else if (ret)
			flags = IFF_UP | IFF_LOWER_UP;
		shca_ident_port_state(flags, &state, &phys_state);
		if (n->arg == SHCA_PORT_ATTR_STATE)
			return show(buf, size, "%d: %s\n", (int)state,
				    states[state]);
		return show(buf, size, "%u: %s\n", phys_state,
			    phys[phys_state < 8 ? phys_state : 0]);
	case SHCA_PORT_ATTR_LID:
	case SHCA_PORT_ATTR_SM_LID:
		return show(buf, size, "0x%x\n", 0);	/* RoCE: no LIDs */
	case SHCA_PORT_ATTR_LID_MASK_COUNT:
	case SHCA_PORT_ATTR_SM_SL:
		return show(buf, size, "%d\n", 0);
	case SHCA_PORT_ATTR_CAP_MASK:
		return show(buf, size, "0x%08x\n", SHCA_PORT_CAP_FLAGS);
	case SHCA_PORT_ATTR_RATE:
		return show_rate(buf, size);
	case SHCA_PORT_ATTR_LINK_LAYER:
		return show(buf, size, "%s\n", "Ethernet");
	}
	return -EIO;
}

/* gids/<i>: "%pI6", the address or the zero GID of an empty entry. */
static int show_gid(const struct shca_vfs_node *n, char *buf, size_t size)
{
	uint8_t g[16] = { 0 };

	if ((unsigned int)n->arg < n->nif.naddrs)
		memcpy(g, &n->nif.addrs[n->arg].addr, 16);
	return show(buf, size,
		    "%02x%02x:%02x%02x:%02x%02x:%02x%02x:"
		    "%02x%02x:%02x%02x:%02x%02x:%02x%02x\n",
		    g[0], g[1], g[2], g[3], g[4], g[5], g[6], g[7], g[8], g[9],
		    g[10], g[11], g[12], g[13], g[14], g[15]);
}

/* counters/ and hw_counters/: the device's QPs over every process. */
static int show_counter(const struct shca_vfs_node *n, char *buf,
			size_t size)
{
	struct shca_counters_proc *procs;
	struct shca_stat_block sum;
	int np, stat = n->arg;
	unsigned int div = 1;

	if (n->kind == K_COUNTER) {
		stat = shca_vfs_pma[n->arg].stat;
		div = shca_vfs_pma[n->arg].div;
		if (stat < 0)
			return show(buf, size, "0\n");
	}
	np = shca_counters_collect(0, COUNTER_TIMEOUT_S, &procs, NULL, NULL);
	if (np < 0)
		return np;
	shca_counters_sum_dev(procs, np, n->nif.name, &sum);
	shca_counters_free(procs, np);
	return show(buf, size, "%llu\n",
		    (unsigned long long)(sum.v[stat] / div));
}

static int uv_attr(const struct shca_vfs_node *n, char *buf, size_t size)
{
	char name[SHCA_DEV_NAME_MAX];
	unsigned int major, minor;

	switch (n->arg) {
	case SHCA_UV_ATTR_IBDEV:
		shca_ident_name(name, sizeof(name), n->nif.name);
		return show(buf, size, "%s\n", name);
	case SHCA_UV_ATTR_ABI_VERSION:
		/* the provider ABI behind the node: softhca's first */
		return show(buf, size, "%d\n", 1);
	case SHCA_UV_ATTR_DEV:
		shca_ident_uverbs_devno(n->nif.ifindex, &major, &minor);
		return show(buf, size, "%u:%u\n", major, minor);
	}
	return -EIO;
}

int shca_vfs_read(const struct shca_vfs_node *n, char *buf, size_t size)
{
	switch (n->kind) {
	case K_DEV_ATTR:
		return dev_attr(n, buf, size);
	case K_PORT_ATTR:
		return port_attr(n, buf, size);
	case K_GID:
		return show_gid(n, buf, size);
	case K_GID_NDEV:
	case K_GID_TYPE:
		/* sysfs fails the read of an empty entry with EINVAL */
		if ((unsigned int)n->arg >= n->nif.naddrs)
			return -EINVAL;
		if (n->kind == K_GID_NDEV)
			return show(buf, size, "%s\n", n->nif.name);
		return show(buf, size, "%s\n", "RoCE v2");
	case K_PKEY:
		return show(buf, size, "0x%04x\n", SHCA_DEFAULT_PKEY);
	case K_COUNTER:
	case K_HW_COUNTER:
		return show_counter(n, buf, size);
	case K_LIFESPAN:
		/* read when asked, never cached: the kernel's default */
		return show(buf, size, "%d\n", 10);
	case K_UV_ABI:
		return show(buf, size, "%d\n", 6);	/* uverbs ABI */
	case K_UV_ATTR:
		return uv_attr(n, buf, size);
	}
	if (n->type == SHCA_VFS_DIR)
		return -EISDIR;
	return -EINVAL;
}

int shca_vfs_link_target(const struct shca_vfs_node *n, char *buf,
			 size_t size)
{
	char name[SHCA_DEV_NAME_MAX];
	int len;

	switch (n->kind) {
	case K_NET_LINK:
		/* from <dev>/device/net/ to /sys/class/net/<if> */
		len = snprintf(buf, size, "../../../../net/%s", n->nif.name);
		break;
	case K_UV_DEVICE:
		shca_ident_name(name, sizeof(name), n->nif.name);
		len = snprintf(buf, size, "../../infiniband/%s/device", name);
		break;
	default:
		return -EINVAL;
	}
	if (len < 0 || (size_t)len >= size)
		return -ENAMETOOLONG;
	return len;
}

int shca_vfs_readlink(const struct shca_vfs_node *n, char *buf, size_t size)
{
	if (n->type != SHCA_VFS_LINK)
		return -EINVAL;
	return shca_vfs_link_target(n, buf, size);
}
