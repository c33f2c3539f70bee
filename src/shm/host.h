/* SPDX-License-Identifier: MIT */
/*
 * What the processes of one host (one user, one network namespace) share
 * beyond their arenas: the lock stripes that make RDMA atomics atomic
 * among themselves (IBV_ATOMIC_HCA), and the UD multicast group table.
 *
 * A file in the user's private directory for the network namespace
 * (rundir.h), made by whichever process needs it first and removed by the
 * last one out (host.c: how, and why no other user can touch it).  Per
 * user: processes of other users on the host reach ours over the net
 * path, whose responder runs their atomics under our table.
 */
#ifndef SOFTHCA_SHM_HOST_H
#define SOFTHCA_SHM_HOST_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <infiniband/verbs.h>

#define SHCA_HOST_MCAST_ENTRIES 8192

struct shca_mcast_member {
	int slot;
	uint32_t qpn;
};

/* 0 or -errno; serialises atomics on (pid, addr) host-wide. */
int shca_host_atomic_lock(pid_t pid, uint64_t addr);
void shca_host_atomic_unlock(pid_t pid, uint64_t addr);

/* Multicast membership of this process's QPs. 0 or -errno. */
int shca_host_mcast_attach(const union ibv_gid *mgid, int slot, uint32_t qpn);
void shca_host_mcast_detach(const union ibv_gid *mgid, int slot,
			    uint32_t qpn);

/* Members of a group: up to max entries copied, returns the count. */
int shca_host_mcast_members(const union ibv_gid *mgid,
			    struct shca_mcast_member *out, int max);

#endif
