/* SPDX-License-Identifier: MIT */
/*
 * The private directory of this user's same-host names (docs/security.md
 * "Same host"): the sockets peers connect to and the host table live in
 *
 *   /dev/shm/softhca-<uid>-<tag>/net-<cookie>/
 *
 * <tag> is a keyed hash (SipHash-2-4) of the uid and the boot id under a
 * random key kept in the user's home directory (~/.softhca/key, mode
 * 0600; rundir.c: spare names when one is taken): every
 * process of the user computes the same name, another user cannot know it
 * before it exists, so cannot take it first.  Both directories are made
 * with mode 0700 and opened with O_NOFOLLOW; their owner and mode are
 * checked, and a directory that is not ours and private is refused, never
 * used.  <cookie> is the network namespace's cookie (SO_NETNS_COOKIE,
 * never reused within a boot): different namespaces are different hosts
 * to softhca, as abstract socket names made them before.  /dev/shm is a
 * tmpfs: what a crash leaves behind is gone at the next boot.
 *
 * Without a usable home directory the tag is empty: the name is then
 * predictable, and a directory another user made first is refused with a
 * message that says so.
 */
#ifndef SOFTHCA_SHM_RUNDIR_H
#define SOFTHCA_SHM_RUNDIR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct shca_rundir {
	int fd;			/* net-<cookie>, O_DIRECTORY */
	char path[160];		/* its path */
	uint64_t cookie;	/* the network namespace's cookie */
	uint8_t boot_id[16];
};

/*
 * This user's directory for this network namespace, made (mode 0700) when
 * create is true.  A description cached for the process (per pid), or
 * NULL with errno: ENOENT (not made, and create is false), EPERM (a
 * directory on the way is another user's, or not private, or a symlink:
 * refused and logged), or what the file system said.
 */
const struct shca_rundir *shca_rundir_get(bool create);

/* The directory was removed under us (ENOENT from a name in it): open it
 * again on the next shca_rundir_get(). */
void shca_rundir_reset(void);

/* Something of ours is in it: try to remove it (if empty) at exit. */
void shca_rundir_mark_used(void);

/* Directories refused since the last call (for the process's counters). */
unsigned int shca_rundir_take_refusals(void);

/* SipHash-2-4 of len bytes under a 16-byte key (rundir.c, for the tag). */
uint64_t shca_siphash(const uint8_t key[16], const void *data, size_t len);

#endif
