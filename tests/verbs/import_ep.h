/* SPDX-License-Identifier: MIT */
/*
 * Endpoints of the import tests (test_import_xproc.c,
 * test_import_xproc_dm.c, test_import_tm.c, test_import_bounce.c,
 * security/test_hostile_imptag.c): a QP of type on ctx/pd with its own
 * two CQs, mr over buf (an address of this process, of the owner for an
 * imported MR, or NULL for a zero-based DM MR), brought up with
 * traffic/ep.c.  And the two sides those tests share: the owner (the
 * parent: a device, a PD, a buffer it shares with its MR, a send buffer
 * of its own) and the importer (a forked child: the owner's cmd_fd and
 * handles, imported).
 */
#ifndef SOFTHCA_TEST_IMPORT_EP_H
#define SOFTHCA_TEST_IMPORT_EP_H

#include <stdbool.h>
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
/* e connected (RTS) to peer, the default options but rnr_retry. */
void import_ep_connect(struct ep *e, const struct ep_info *peer,
		       uint8_t rnr_retry);

/* The rights the import tests' MRs carry. */
#define IMPORT_ALL_ACCESS                                                  \
	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |                 \
	 IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC)

/* What the owner sends the importer with its cmd_fd. */
struct import_offer {
	uint32_t pd_handle, mr_handle;
	uint64_t addr, length;		/* the shared MR's */
	struct ep_info a;		/* the owner's QP (if it has one) */
};

/* An importer's command to its owner (the ops and what the fields mean:
 * each test's own). */
struct import_cmd {
	char op;
	uint32_t off, len, seed;
	uint64_t tag;
	int32_t status;
};

/* The owner's side. */
struct import_owner {
	struct duo d;			/* the importer */
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_mr *mr;		/* over buf: shared */
	struct ibv_mr *smr;		/* over sbuf (NULL: none) */
	uint8_t *buf, *sbuf;
	size_t size;			/* of each buffer */
	bool dereg;			/* mr deregistered ('D') */
};

/* Skips in a namespace run; SOFTHCA_NET=1 if net, SOFTHCA_MAP=0 if cma
 * (the owner's MRs and the bounces on CMA), each unset otherwise. */
void import_env(bool net, bool cma);
/* The importer forked (fn(sock, arg)), then import_owner_open. */
void import_owner_begin(struct import_owner *o,
			void (*fn)(int sock, void *arg), void *arg,
			size_t size, int access, int sbuf_access);
/* The owner's device, PD, buf (size bytes of EP_SENTINEL) with mr
 * (access) over it and, if sbuf_access is not 0, sbuf (zeroed) with smr
 * (sbuf_access); no importer (d.fd -1: an owner that is itself the
 * forked side sets it). */
void import_owner_open(struct import_owner *o, size_t size, int access,
		       int sbuf_access);
/* The offer (a: the owner's QP, or NULL) with ctx's cmd_fd. */
void import_owner_offer(struct import_owner *o, const struct ep_info *a);
/* The importer's QP's ep_info read, a connected to it (rnr_retry 7),
 * then 'c' to the importer. */
void import_owner_connect(struct import_owner *o, struct ep *a);
/* The importer's next command (struct import_cmd) into *c; false when it
 * is 'Q' (quit). */
bool import_owner_next(struct import_owner *o, struct import_cmd *c);
/* 'C': buf at off holds len bytes of seed's pattern (seed 0:
 * untouched), the 64 bytes after them untouched (if within buf) and,
 * if before, the 64 before them. */
void import_owner_check(const struct import_owner *o, uint32_t off,
			uint32_t len, uint32_t seed, bool before);
/* 'D': mr deregistered. */
void import_owner_dereg(struct import_owner *o);
/* After the importer's quit: 'k' to it, its exit checked. */
void import_owner_wait(struct import_owner *o);
/* The MRs (mr unless deregistered), the PD, the device, the buffers. */
void import_owner_end(struct import_owner *o);

/* The importer's side: the owner's device, PD and MR imported. */
struct importer {
	struct import_offer of;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_mr *mr;
};

/* The offer and cmd_fd from sock, the imports made. */
void importer_begin(struct importer *im, int sock);
/* The imports undone, the device closed. */
void importer_end(struct importer *im);

/* The command written to sock; no answer awaited. */
void import_cmd_send(int sock, char op, uint32_t off, uint32_t len,
		     uint32_t seed, uint64_t tag, int32_t status);
/* One receive of sge[0..n) with wr_id: on srq if not NULL, else on
 * qp.  The post's return. */
int import_post_recv(struct ibv_qp *qp, struct ibv_srq *srq, uint64_t wr_id,
		     struct ibv_sge *sge, int n);
/* The next completion of cq begun (ibv_start_poll), waited for up to
 * ~10 s (the test fails then); the caller reads it and ends the poll. */
void import_start_poll(struct ibv_cq_ex *cq);

/* A test of the owner's (owner(&ar, net)) with arg ar: its fields. */
#define IMPORT_CASE(name, net, ...)                                       \
	TEST(name)                                                         \
	{                                                                  \
		static const struct arg ar = { __VA_ARGS__ };              \
		owner(&ar, net);                                           \
	}

#endif
