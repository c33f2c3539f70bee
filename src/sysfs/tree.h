/* SPDX-License-Identifier: MIT */
/*
 * The view: softhca's devices as the kernel's sysfs and device nodes
 * would show them (Documentation/ABI/stable/sysfs-class-infiniband and
 * drivers/infiniband/core/sysfs.c in the kernel describe the layout):
 *
 *   /dev/infiniband/uverbs<ifindex>            character devices
 *   /sys/class/infiniband/softhca_<if>/...     node_guid, ports/1/..., ...
 *   /sys/class/infiniband_verbs/uverbs<ifindex>/{ibdev,abi_version,dev}
 *
 * Computed afresh at each call from the interfaces of this network
 * namespace (common/netif.h), through the device identity that
 * libibverbs answers from (sysfs/ident.h), with counters read from the
 * running processes (sysfs/counters.h).  The path shim (src/path/) shows
 * it to any program; ibv_read_sysfs_file answers from it too.
 *
 * Paths are absolute.  "." and ".." are taken lexically, as the shell's
 * `cd` does, except after a link, which is followed: a link that leads out
 * of the view (device/net/<if> to /sys/class/net/<if>) turns the rest of
 * the path into a real one.
 */
#ifndef SOFTHCA_SYSFS_TREE_H
#define SOFTHCA_SYSFS_TREE_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../common/netif.h"

enum shca_vfs_type {
	SHCA_VFS_DIR = 1,
	SHCA_VFS_FILE,
	SHCA_VFS_LINK,
	SHCA_VFS_CHR,
};

/* What shca_vfs_resolve found. */
struct shca_vfs_node {
	enum shca_vfs_type type;
	unsigned int mode;		/* permission bits, as sysfs/udev */
	uint64_t ino;			/* stable: a hash of the path */
	unsigned int rdev_major;	/* SHCA_VFS_CHR */
	unsigned int rdev_minor;
	bool dev_tree;			/* under /dev, else under /sys */
	char path[PATH_MAX];		/* normalized, absolute */
	/* which node, for tree.c */
	int kind;
	int arg;
	bool has_nif;
	struct shca_netif nif;		/* the device's interface */
	uint64_t sys_guid;
};

enum {
	SHCA_VFS_NOT_OURS = 0,	/* not in the view: use the path as it is */
	SHCA_VFS_FOUND = 1,	/* in the view: the node */
	SHCA_VFS_REAL = 2,	/* a link led out of the view: the real path */
};

/*
 * Could path name something in the view?  A cheap test on the string
 * alone, for every path a program uses: false means certainly not (for a
 * relative path too, whatever real directory it is relative to).
 */
bool shca_vfs_maybe(const char *path);

/*
 * Resolve an absolute path: SHCA_VFS_NOT_OURS, SHCA_VFS_FOUND (node
 * filled), SHCA_VFS_REAL (real filled, at most real_len bytes), or -errno
 * for a path of the view that names nothing (-ENOENT, -ENOTDIR,
 * -ENAMETOOLONG, -ELOOP).  follow: a link at the end is followed (stat),
 * or is the node (lstat, readlink).
 */
int shca_vfs_resolve(const char *path, bool follow,
		     struct shca_vfs_node *node, char *real, size_t real_len);

struct shca_vfs_dirent {
	char name[64];
	unsigned char d_type;		/* DT_DIR, DT_REG, DT_LNK, DT_CHR */
	uint64_t ino;
};

/* A directory's entries (malloc'ed, in *out): their count, or -errno. */
int shca_vfs_list(const struct shca_vfs_node *dir,
		  struct shca_vfs_dirent **out);

/*
 * A file's content now (sysfs gives a page at most): its length, or
 * -errno: -EINVAL where sysfs fails the read (the type or interface of an
 * empty GID entry), -EISDIR for a directory.
 */
int shca_vfs_read(const struct shca_vfs_node *file, char *buf, size_t size);

/* A link's target (relative, as sysfs links are): its length or -errno. */
int shca_vfs_readlink(const struct shca_vfs_node *link, char *buf,
		      size_t size);

/*
 * The view's top directories that a real directory should list besides
 * its own entries: for "/dev" "infiniband", for "/sys/class"
 * "infiniband" and "infiniband_verbs"; NULL for any other path.
 */
const char *const *shca_vfs_extra_names(const char *dir);

#endif
