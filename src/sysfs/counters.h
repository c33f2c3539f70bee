/* SPDX-License-Identifier: MIT */
/*
 * The counters of running softhca processes, read from outside: every
 * process of this user in this network namespace (that shares
 * SOFTHCA_PORT_BASE) is asked for its arena over the same-host socket
 * (shm/sock.h), and its counter blocks (common/stat.h) are read from it
 * with pread, never mapped: another process's bytes are checked before
 * use, and an arena cut short gives short reads, not SIGBUS.
 *
 * `softhca stat` prints what this returns; the sysfs view
 * (sysfs/tree.c) sums it per device for ports/1/counters and
 * ports/1/hw_counters.
 */
#ifndef SOFTHCA_SYSFS_COUNTERS_H
#define SOFTHCA_SYSFS_COUNTERS_H

#include <stdint.h>
#include <net/if.h>
#include <sys/types.h>

#include "../common/stat.h"

struct shca_counters_qp {
	char dev[IF_NAMESIZE];		/* its interface: printable */
	uint32_t qpn;
	uint32_t qp_type;		/* enum ibv_qp_type (owner's word) */
	uint32_t state;			/* enum ibv_qp_state, likewise */
	struct shca_stat_block stats;
};

struct shca_counters_proc {
	pid_t pid;
	int slot;
	struct shca_stat_block stats;	/* the process's own block */
	int nqps;
	struct shca_counters_qp *qps;	/* by device name, then QPN */
};

/*
 * The live processes (only want_pid's when it is not 0), by pid, in *out
 * (free with shca_counters_free): their count, or -ENOMEM.  A process
 * that does not answer its hello within timeout_s seconds is left out.
 * on_error (may be NULL) hears of each slot that answered with anything
 * but "nobody here" (ECONNREFUSED, ENOENT): EPROTO for another softhca
 * version or a bad arena, EAGAIN for a stopped owner, EPERM for a socket
 * of another user's under our name.
 */
int shca_counters_collect(pid_t want_pid, int timeout_s,
			  struct shca_counters_proc **out,
			  void (*on_error)(int slot, int err, void *arg),
			  void *arg);
void shca_counters_free(struct shca_counters_proc *procs, int n);

/* The sum of the QPs of device softhca_<ifname> over procs. */
void shca_counters_sum_dev(const struct shca_counters_proc *procs, int n,
			   const char *ifname, struct shca_stat_block *sum);

#endif
