/* SPDX-License-Identifier: MIT */
/*
 * Switches read from the environment once per process.
 *
 * SOFTHCA_NET=1: every connected QP (RC, UC) and every UD send to a
 * unicast address takes the net path (TCP/UDP over the destination's
 * address), even when the destination is a process on this host: the
 * inter-host path, tried on one machine.  Multicast to this host's
 * members keeps the same-host path.
 */
#ifndef SOFTHCA_ENV_H
#define SOFTHCA_ENV_H

#include <stdbool.h>

bool shca_net_forced(void);

/*
 * A setting's number, parsed from the environment's string s (NULL or
 * "": 0): a decimal number 0 .. max, digits only.  *v is what to use: the
 * number, max for one above it (-ERANGE), 0 for anything that is not a
 * number (-EINVAL).  0 when it was taken as written.
 */
int shca_env_uint(const char *s, unsigned int max, unsigned int *v);

/*
 * SOFTHCA_NET_SPIN_US (engine/engine.c): how long the engine thread keeps
 * looking for work without sleeping after it ran some, in microseconds:
 * shca_env_uint with max SHCA_NET_SPIN_US_MAX (NULL or "": 0, off).
 */
#define SHCA_NET_SPIN_US_MAX 1000u
int shca_net_spin_parse(const char *s, unsigned int *us);

#endif
