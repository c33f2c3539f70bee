/* SPDX-License-Identifier: MIT */
/*
 * A network of the case's own, for cases that need what some machines lack:
 * an IPv4 address on an interface other than lo (README: "on 127.0.0.1 and
 * on an interface address"), or IPv6 loopback (::1, its GID on softhca_lo).
 *
 *   netenv_need(NETENV_IP4_IFACE | NETENV_IP6_LO);
 *
 * first in the case, before any verbs or rdma_cm call.  As root the case,
 * and every process it forks afterwards, moves into a network namespace of
 * its own, the same on every machine: lo up (127.0.0.1/8, ::1) and a veth
 * pair, shca0 with NETENV_IP4/24 and shca1 up with no address (so no
 * device).  The host's network is not touched, and the namespace goes with
 * the case's processes.  Without root (or without veth or `ip`) the case
 * runs on the host's network as it is; what that lacks is a SKIP_ENV: a
 * visible skip, and a failure under CI (CI=true, run as root).
 */
#ifndef SOFTHCA_TEST_NETENV_H
#define SOFTHCA_TEST_NETENV_H

#include <stddef.h>

#define NETENV_IP4_IFACE 0x1u	/* an IPv4 address on an interface not lo */
#define NETENV_IP6_LO	 0x2u	/* ::1 on lo */

#define NETENV_IP4	"10.77.0.1"	/* shca0's, in the case's own network */

/*
 * Move into the case's own network (above).  0, or -errno with the reason
 * in why: then the case is still in the network it had.
 */
int netenv_private(char *why, size_t len);

/* The case's own network if it can have one, else the host's; a SKIP_ENV
 * if what is asked for is missing from the host's. */
void netenv_need(unsigned int what);

#endif
