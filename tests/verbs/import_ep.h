/* SPDX-License-Identifier: MIT */
/*
 * Endpoints of the import tests (test_import_xproc.c,
 * test_import_xproc_dm.c, test_import_tm.c): a QP of type on ctx/pd
 * with its own two CQs, mr over buf (an address of this process, of the
 * owner for an imported MR, or NULL for a zero-based DM MR), brought up
 * with traffic/ep.c.
 */
#ifndef SOFTHCA_TEST_IMPORT_EP_H
#define SOFTHCA_TEST_IMPORT_EP_H

#include <stddef.h>
#include <stdint.h>

#include "ep.h"

/* The QP in INIT with remote rights (UC: write only). */
void import_ep_make(struct ep *e, enum ibv_qp_type type,
		    struct ibv_context *ctx, struct ibv_pd *pd,
		    struct ibv_mr *mr, uint8_t *buf, size_t size);
/* The same on srq (a receive queue of the caller's; NULL: the QP's
 * own), the receive CQ an ibv_cq_ex with wc_flags if not 0. */
void import_ep_make_srq(struct ep *e, enum ibv_qp_type type,
			struct ibv_context *ctx, struct ibv_pd *pd,
			struct ibv_srq *srq, struct ibv_mr *mr, uint8_t *buf,
			size_t size, uint64_t wc_flags);
void import_ep_unmake(struct ep *e);
/* a and b connected to each other (RTS). */
void import_ep_pair(struct ep *a, struct ep *b);

#endif
