/* SPDX-License-Identifier: MIT */
/*
 * Inside the view: the kinds of node and the attribute tables that
 * tree.c (shape, resolution) and attrs.c (contents) share.
 */
#ifndef SOFTHCA_SYSFS_TREE_PRIV_H
#define SOFTHCA_SYSFS_TREE_PRIV_H

#include "tree.h"

enum kind {
	K_NONE = 0,
	K_DEV_ROOT,		/* /dev/infiniband */
	K_UVERBS,		/*   uverbs<ifindex> */
	K_IB_ROOT,		/* /sys/class/infiniband */
	K_IB_DEV,		/*   softhca_<if> */
	K_DEV_ATTR,		/*     node_guid, ... (arg: enum dev_attr) */
	K_DEVICE,		/*     device */
	K_DEVICE_NET,		/*       net */
	K_NET_LINK,		/*         <if> -> /sys/class/net/<if> */
	K_PORTS,		/*     ports */
	K_PORT,			/*       1 */
	K_PORT_ATTR,		/*         state, ... (enum port_attr) */
	K_GIDS,			/*         gids */
	K_GID,			/*           <index> */
	K_GID_ATTRS,		/*         gid_attrs */
	K_GID_NDEVS,		/*           ndevs */
	K_GID_NDEV,		/*             <index> */
	K_GID_TYPES,		/*           types */
	K_GID_TYPE,		/*             <index> */
	K_PKEYS,		/*         pkeys */
	K_PKEY,			/*           <index> */
	K_COUNTERS,		/*         counters */
	K_COUNTER,		/*           (arg: shca_vfs_pma index) */
	K_HW_COUNTERS,		/*         hw_counters */
	K_HW_COUNTER,		/*           (arg: enum shca_stat) */
	K_LIFESPAN,		/*           lifespan */
	K_UV_ROOT,		/* /sys/class/infiniband_verbs */
	K_UV_ABI,		/*   abi_version */
	K_UV_DEV,		/*   uverbs<ifindex> */
	K_UV_ATTR,		/*     ibdev, ... (enum uv_attr) */
	K_UV_DEVICE,		/*     device -> infiniband/<dev>/device */
	K_MAX
};

struct shca_vfs_kind {
	enum shca_vfs_type type;
	unsigned int mode;
};

extern const struct shca_vfs_kind shca_vfs_kinds[K_MAX];

/* /sys/class/infiniband/<dev>/<attr> */
enum {
	SHCA_DEV_ATTR_NODE_TYPE,
	SHCA_DEV_ATTR_NODE_GUID,
	SHCA_DEV_ATTR_SYS_IMAGE_GUID,
	SHCA_DEV_ATTR_NODE_DESC,
	SHCA_DEV_ATTR_FW_VER,
	SHCA_DEV_ATTR_HCA_TYPE,
	SHCA_DEV_ATTR_HW_REV,
	SHCA_DEV_ATTR_BOARD_ID,
	SHCA_DEV_ATTR_MAX
};
extern const char *const shca_vfs_dev_attr_names[SHCA_DEV_ATTR_MAX];

/* ports/<n>/<attr>, in the kernel's order */
enum {
	SHCA_PORT_ATTR_STATE,
	SHCA_PORT_ATTR_LID,
	SHCA_PORT_ATTR_LID_MASK_COUNT,
	SHCA_PORT_ATTR_SM_LID,
	SHCA_PORT_ATTR_SM_SL,
	SHCA_PORT_ATTR_CAP_MASK,
	SHCA_PORT_ATTR_RATE,
	SHCA_PORT_ATTR_PHYS_STATE,
	SHCA_PORT_ATTR_LINK_LAYER,
	SHCA_PORT_ATTR_MAX
};
extern const char *const shca_vfs_port_attr_names[SHCA_PORT_ATTR_MAX];

/* /sys/class/infiniband_verbs/uverbs<n>/<attr> */
enum {
	SHCA_UV_ATTR_IBDEV,
	SHCA_UV_ATTR_ABI_VERSION,
	SHCA_UV_ATTR_DEV,
	SHCA_UV_ATTR_MAX
};
extern const char *const shca_vfs_uv_attr_names[SHCA_UV_ATTR_MAX];

/* ports/<n>/counters: a PortCounters attribute, from the stat blocks */
struct shca_vfs_pma {
	const char *name;
	int stat;			/* enum shca_stat, or -1: always 0 */
	unsigned int div;		/* 4 for the data counters (words) */
};
#define SHCA_VFS_PMA_MAX 17
extern const struct shca_vfs_pma shca_vfs_pma[SHCA_VFS_PMA_MAX];

/* The target of a link node (kind, nif): its length or -errno. */
int shca_vfs_link_target(const struct shca_vfs_node *link, char *buf,
			 size_t size);

#endif
