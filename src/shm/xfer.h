/* SPDX-License-Identifier: MIT */
/*
 * The same-host transport: the requester executes a work request against
 * the responder's queues and memory itself, as a NIC would — running the
 * responder's rules (engine/responder.c) against the responder's QP, MR
 * table and receive queue in its arena, moving data with
 * process_vm_readv/writev, and writing the responder's completion.  The
 * responder's CPU does nothing (DESIGN.md "the requester does the DMA").
 */
#ifndef SOFTHCA_SHM_XFER_H
#define SOFTHCA_SHM_XFER_H

#include "../engine/xport.h"

/* The same-host transport (engine/xport.h), shca_transports[ROUTE_HOST]. */
extern const struct shca_transport_ops shca_host_ops;

#endif
