/* SPDX-License-Identifier: MIT */
/*
 * The process's slot: how a QP number says where its QP lives, without a
 * daemon (DESIGN.md "Addressing").
 *
 * Each process that opens a device owns one port P in [base, base + 1024)
 * (TCP and UDP, same number, on every address); its slot is P - base.
 * Every QPN it allocates is slot << 14 | index, so a peer that knows
 * (GID, QPN) knows the host (the IP in the GID) and the port.  The base
 * comes from SOFTHCA_PORT_BASE (default 24000); hosts that talk to each
 * other use the same base.
 */
#ifndef SOFTHCA_SLOT_H
#define SOFTHCA_SLOT_H

#include <stdint.h>

#define SHCA_SLOT_BITS		10
#define SHCA_NUM_SLOTS		(1u << SHCA_SLOT_BITS)
#define SHCA_QPN_INDEX_BITS	14
#define SHCA_QPN_INDEX_MASK	((1u << SHCA_QPN_INDEX_BITS) - 1)
#define SHCA_DEFAULT_PORT_BASE	24000

struct shca_slot {
	int slot;		/* 0 .. SHCA_NUM_SLOTS - 1 */
	uint16_t port;		/* base + slot */
	uint16_t base;		/* SOFTHCA_PORT_BASE when it was taken */
	int tcp_fd;		/* bound, not listening: the reservation
				 * (net/listen.c listens per address) */
	int udp_fd;		/* bound to the same port */
};

/*
 * The process's slot, taken on first use (ibv_open_device, so that the
 * 1025th process learns it there; again in a forked child).  Returns NULL
 * with errno EADDRINUSE, and logs what to do, when every port of the
 * range is taken.
 */
const struct shca_slot *shca_slot_get(void);

/* SOFTHCA_PORT_BASE or its default; defined in env.c */
uint16_t shca_port_base(void);

static inline uint32_t shca_qpn_make(int slot, uint32_t index)
{
	return (uint32_t)slot << SHCA_QPN_INDEX_BITS | index;
}

static inline int shca_qpn_slot(uint32_t qpn)
{
	return (int)(qpn >> SHCA_QPN_INDEX_BITS) & (SHCA_NUM_SLOTS - 1);
}

static inline uint32_t shca_qpn_index(uint32_t qpn)
{
	return qpn & SHCA_QPN_INDEX_MASK;
}

/*
 * Is index usable in this slot?  QPN 0 and 1 (SMI, GSI) and 0xffffff
 * (multicast) are never handed out.
 */
static inline int shca_qpn_index_valid(int slot, uint32_t index)
{
	uint32_t qpn = shca_qpn_make(slot, index);

	return index <= SHCA_QPN_INDEX_MASK && qpn > 1 && qpn != 0xffffff;
}

#endif
