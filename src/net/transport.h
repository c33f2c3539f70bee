/* SPDX-License-Identifier: MIT */
/*
 * The net path's transport (transport.c): IB packets for a QP whose
 * destination is another host (or a process it may not use CMA on), and
 * the requester, completer and responder that run on them.
 */
#ifndef SOFTHCA_NET_TRANSPORT_H
#define SOFTHCA_NET_TRANSPORT_H

#include <stdbool.h>
#include <infiniband/verbs.h>

struct shca_qp;
struct shca_send_wqe;
struct shca_xfer;
struct shca_transport_ops;

/*
 * At RTR (modify, qp->lock held): choose the net path for an RC or UC QP
 * toward dgid (-errno if the transport cannot start), and set the
 * responder's expected PSN.  The engine's receive side starts too, so
 * that UD QPs hear datagrams from other hosts.
 */
int shca_net_qp_rtr(struct shca_qp *qp, const union ibv_gid *dgid,
		    bool use_net);
/* Entering RTS: the requester's first PSN.  This and _stop run inside a
 * transition, with the QP's sq.lock held. */
void shca_net_qp_rts(struct shca_qp *qp);
/* Reset or error: forget what is in flight and being reassembled. */
void shca_net_qp_stop(struct shca_qp *qp, bool reset);
/* The send queue is flushed (sq.lock held, exec_lock too) and w is a WQE
 * the QP made itself for a rendezvous: its tag completes flushed if the
 * data had not arrived. */
void shca_net_gen_flushed(struct shca_qp *qp, const struct shca_send_wqe *w);
/* Every rendezvous slot freed; a READ's tag that will never complete
 * (a reset, a destroy) frees its bounce (verbs/import_key.c). */
void shca_net_gen_forget(struct shca_qp *qp);

/*
 * The net transport (engine/xport.h), shca_transports[SHCA_ROUTE_NET]: RC
 * sends what its window allows and retries on its timer; UC and UD send
 * one message now (the WQE completes as sent).
 */
extern const struct shca_transport_ops shca_net_ops;

/* Multicast membership of a QP's port's interface. */
void shca_net_mcast(struct shca_qp *qp, const union ibv_gid *gid, bool join);

/* The receive side, for the engine and for the fuzzer: one untrusted IB
 * packet from a connection (conn) or a datagram (conn NULL). */
struct shca_conn;
struct shca_net_addr;
void shca_net_rx(struct shca_conn *c, const struct shca_net_addr *addr,
		 const void *pkt, size_t len);

#endif
