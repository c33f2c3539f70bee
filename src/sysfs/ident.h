/* SPDX-License-Identifier: MIT */
/*
 * Device identity: what a softhca device is, computed from its network
 * interface.  libibverbs (verbs/device.c, verbs/context.c) and the sysfs
 * view (sysfs/tree.c: the path shim, ibv_read_sysfs_file) both answer
 * from these definitions, so the two always agree.
 */
#ifndef SOFTHCA_SYSFS_IDENT_H
#define SOFTHCA_SYSFS_IDENT_H

#include <stddef.h>
#include <stdint.h>
#include <infiniband/verbs.h>

#include "../common/netif.h"

/* What ibv_query_device and the sysfs attributes report. */
#define SHCA_VENDOR_ID		0x5348		/* "SH" (not a PCI-SIG id) */
#define SHCA_VENDOR_PART_ID	0x0c41		/* outside perftest's tables */
#define SHCA_HW_VER		1
#define SHCA_FW_VER		"1.0.0"
#define SHCA_BOARD_ID		"SOFTHCA_0001"
#define SHCA_HCA_TYPE		"softhca"

/* The port: one, RoCE v2 style (DESIGN.md "Devices"). */
#define SHCA_PORT_NUM		1
#define SHCA_MAX_GID		16		/* minimum gid_tbl_len */
#define SHCA_MAX_PKEYS		1
#define SHCA_DEFAULT_PKEY	0xffff
#define SHCA_PORT_CAP_FLAGS	(IBV_PORT_CM_SUP | IBV_PORT_IP_BASED_GIDS)
#define SHCA_ACTIVE_WIDTH	2		/* 4X */
#define SHCA_ACTIVE_SPEED	32		/* EDR: 4X EDR = 100 Gb/s */

/* Device names: softhca_<ifname>; the uverbs name carries the ifindex. */
#define SHCA_DEV_PREFIX		"softhca_"
#define SHCA_DEV_NAME_MAX	(sizeof(SHCA_DEV_PREFIX) - 1 + IF_NAMESIZE)

/* "softhca_<ifname>" (ibv_device.name) */
void shca_ident_name(char *out, size_t len, const char *ifname);
/* "uverbs<ifindex>" (ibv_device.dev_name: /dev/infiniband/<dev_name>) */
void shca_ident_dev_name(char *out, size_t len, unsigned int ifindex);
/* The character device number of /dev/infiniband/uverbs<ifindex>, as the
 * kernel numbers uverbs devices (major 231, minors from 192). */
void shca_ident_uverbs_devno(unsigned int ifindex, unsigned int *major,
			     unsigned int *minor);

/*
 * Node GUID (network order, as ibv_get_device_guid): EUI-64 from the
 * interface's MAC where it has one, as RoCE NICs do; otherwise (loopback,
 * tunnels) a hash of the host identity and the interface name, with the
 * locally-administered bit set.
 */
uint64_t shca_ident_node_guid(const struct shca_netif *nif);

/*
 * The system image GUID of every device: one "system", the host, named
 * by the node GUID of its first device (lowest ifindex) in list.
 */
uint64_t shca_ident_sys_image_guid(const struct shca_netif *list, int n);

/* gid_tbl_len: the interface's addresses, at least SHCA_MAX_GID. */
unsigned int shca_ident_gid_tbl_len(unsigned int naddrs);

/* The largest IB MTU that fits the interface MTU less RoCE v2 headers. */
enum ibv_mtu shca_ident_active_mtu(unsigned int if_mtu);

/* The port's state from its interface's IFF_* flags (rxe's rule). */
void shca_ident_port_state(unsigned int link_flags,
			   enum ibv_port_state *state, uint8_t *phys_state);

#endif
