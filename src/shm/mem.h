/* SPDX-License-Identifier: MIT */
/*
 * The memory access family: how the same-host transport reaches a
 * responder's registered memory ("the requester does the DMA").  One set
 * of functions, three implementations:
 *
 *   mapped  the responder's segments mapped here (shm/segmap.c): memcpy
 *           and CPU atomics, no system call
 *   CMA     process_vm_writev/readv (shm/peer.c): the responder's MR is
 *           not in segments, SOFTHCA_MAP=0, or a range we could not map
 *   local   the responder is this process: memcpy
 *
 * The family picks mapped when every MR entry the access read said
 * SHCA_MR_SHM_MAPPED and every byte of the range lies in segments we
 * could map, else CMA.  Counted per access in the process's counters
 * (map_xfers, cma_xfers, local_xfers).
 *
 * An access to a peer's memory, on one thread at a time:
 *
 *   shca_mem_begin(p)
 *   shca_mem_claim(p, key)     before reading key's MR entry: an access
 *                              lane in p's arena (arena.h: the owner's
 *                              deregistration waits for it)
 *   shca_mem_note(p, entry)    the entry read under the lane
 *   shca_mem_write / read / atomic ...
 *   shca_mem_end(p)            every lane released
 *
 * The access in progress is the calling thread's (thread-local): the
 * responder's rules (xfer.c) only name the peer.
 */
#ifndef SOFTHCA_SHM_MEM_H
#define SOFTHCA_SHM_MEM_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>
#include <infiniband/verbs.h>

#include "arena.h"
#include "peer.h"

/* Keys one access may hold lanes for: a receive WQE's SGEs and an R_Key */
#define SHCA_MEM_MAX_KEYS 65

void shca_mem_begin(struct shca_peer *p);
/* 0, or -EBUSY when no lane came free in a bounded wait */
int shca_mem_claim(struct shca_peer *p, uint32_t key);
void shca_mem_note(struct shca_peer *p, const struct shca_mr_shm *e);
void shca_mem_end(struct shca_peer *p);

/*
 * One lane of p for key, held apart from the thread's access in progress
 * (which it neither needs nor touches): for this process's net path, whose
 * reads and writes of its own registered memory outlast a request's
 * checks (READ responses, a WRITE's direct placement: engine/responder.c
 * shca_respond_hold).  Claimed as shca_mem_claim claims one (before the
 * MR entry is read), released by shca_mem_lane_put after the last byte;
 * ibv_dereg_mr's drain waits for it.  0 (l->lane NULL when p has no
 * lanes), or -EBUSY.  Put is idempotent.
 */
int shca_mem_lane_take(struct shca_peer *p, uint32_t key, struct shca_lane *l);
void shca_mem_lane_put(struct shca_lane *l);

/*
 * Copy local iovecs to the responder's remote ones (write) or back
 * (read): 0 or -errno (-ESRCH: the responder is gone; a page that
 * faulted: -EFAULT when it is one of ours, the local list's, and
 * -EREMOTEIO when it is the responder's, a page of its MR that it
 * unmapped or protected since registration, or an ODP page that is not
 * there: docs/conformance.md, "A page that faults").
 */
int shca_mem_write(struct shca_peer *p, const struct iovec *local, int nl,
		   const struct iovec *remote, int nr);
int shca_mem_read(struct shca_peer *p, const struct iovec *local, int nl,
		  const struct iovec *remote, int nr);
/*
 * IBV_WR_ATOMIC_CMP_AND_SWP or _FETCH_AND_ADD on the responder's 8 bytes
 * at va (its address): the original value in *orig; IBV_WR_ATOMIC_WRITE
 * stores swap there (*orig 0).  Under the host's
 * atomic lock stripe of (pid, va), so that every path's atomics are
 * atomic with each other; on the mapped and local paths with the CPU's
 * atomic instructions, so also with the owner's own.  0 or -errno
 * (-ENOLCK: the host's lock stripes are out of reach; -EREMOTEIO: the
 * responder's word faulted).
 */
int shca_mem_atomic(struct shca_peer *p, uint64_t va, enum ibv_wr_opcode op,
		    uint64_t compare_add, uint64_t swap, uint64_t *orig);

/*
 * On-demand paging (docs/dm-odp.md): an ODP MR is never mapped by peers
 * (CMA, or local), and its pages are looked at as they are used.
 * shca_mem_odp: an entry noted in the access in progress is ODP.
 * shca_mem_present: [va, va + len) of the responder is mapped now, and
 * writable for a write: checked against our own mappings when the
 * responder is this process (a local copy would fault); another
 * process's is found out by the copy itself (CMA's EFAULT).
 */
bool shca_mem_odp(void);
bool shca_mem_present(struct shca_peer *p, uint64_t va, uint64_t len,
		      bool write);
/*
 * shca_mem_faults: [va, va + len) of this process (p->self) is known not
 * to be mapped now, or not writable for a write, where asking costs one
 * system call (PROCMAP_QUERY, else MADV_POPULATE: verbs/mr_range.c);
 * false where it would cost more (before Linux 5.14: the text of
 * /proc/self/maps) or for another process's memory.
 */
bool shca_mem_faults(struct shca_peer *p, uint64_t va, uint64_t len,
		     bool write);

#endif
