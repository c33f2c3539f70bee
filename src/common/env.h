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

#endif
