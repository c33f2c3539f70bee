/* SPDX-License-Identifier: MIT */
/*
 * The key limit of the net path (keyguard.c): a peer that sends requests
 * with invalid keys (an R_Key that names no MR of the QP's PD, on RC and
 * UC; a wrong Q_Key, on UD) may send a burst of them and a trickle after
 * that; past it, its connection is closed (and logged), and what it sends
 * is refused until its score has drained.  docs/security.md "Keys".
 *
 * A peer is the other end of a connection (its address and the port it
 * stated in its hello, or its source port) or the source of a datagram
 * (address and port): the score survives reconnections.  Engine thread.
 */
#ifndef SOFTHCA_NET_KEYGUARD_H
#define SOFTHCA_NET_KEYGUARD_H

#include <stdbool.h>
#include <stdint.h>

struct shca_conn;
struct shca_net_addr;

#define SHCA_KEY_LIMIT_BURST	256	/* invalid keys at once */
#define SHCA_KEY_LIMIT_RATE	1	/* ... and this many a second */

/* May a request that arrived on c (RC, UC) be carried out?  false: its
 * peer is over the limit, c is being closed, the packet is dropped. */
bool shca_keyguard_admit_conn(struct shca_conn *c);
/* ... a datagram from addr's source (UD). */
bool shca_keyguard_admit_src(const struct shca_net_addr *addr);

/* A request with an invalid key for QP qpn arrived on c / from addr.
 * true: c's peer is over the limit now, c must be closed (once the
 * packet has been answered: shca_net_conn_abort). */
bool shca_keyguard_strike_conn(struct shca_conn *c, uint32_t qpn);
void shca_keyguard_strike_src(const struct shca_net_addr *addr,
			      uint32_t qpn);

/* Forget every peer's score (the fuzzer, between inputs: each input
 * starts from the same state). */
void shca_keyguard_reset(void);

#endif
