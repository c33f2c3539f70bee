/* SPDX-License-Identifier: MIT */
/*
 * Helpers for the librdmacm tests: a peer process, a pipe to talk to it,
 * events awaited by type, listeners on port 0, active ids up to
 * ROUTE_RESOLVED.
 *
 * A test that needs two processes forks before it makes its first CM
 * call (the CM thread does not survive fork, as with rdma-core).  Every
 * wait is bounded by the harness's alarm; no test measures time.
 */
#ifndef SOFTHCA_TEST_CM_COMMON_H
#define SOFTHCA_TEST_CM_COMMON_H

#include <netinet/in.h>
#include <stdbool.h>
#include <sys/types.h>

#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>

#include "harness.h"

struct peer {
	pid_t pid;
	int to_peer;		/* write end: messages to the peer */
	int from_peer;		/* read end: messages from the peer */
};

/* Fork a peer that runs fn(p, arg) and exits 0 when it returns (an
 * ASSERT failing in it exits non-zero).  In the peer, p's ends are
 * swapped: to_peer writes to the parent. */
void peer_start(struct peer *p, void (*fn)(struct peer *p, void *arg),
		void *arg);
/* Wait for the peer; its exit status must be 0. */
void peer_wait(struct peer *p);
/* Wait for the peer and return its raw wait status. */
int peer_wait_status(struct peer *p);
void peer_send(struct peer *p, uint32_t v);
uint32_t peer_recv(struct peer *p);

/* The address tests connect over: 127.0.0.1, and a non-loopback IPv4
 * address of this machine (NULL if it has none). */
const char *loopback_ip(void);
const char *other_ip(void);
void make_addr(struct sockaddr_in *sin, const char *ip, uint16_t port);

/* Wait for the next event on ch, which must be of this type. */
struct rdma_cm_event *expect_event(struct rdma_event_channel *ch,
				   enum rdma_cm_event_type type);
/* Same, and ack it. */
void expect_event_ack(struct rdma_event_channel *ch,
		      enum rdma_cm_event_type type);

/* A listener bound to ip, port 0; returns the port (host order). */
uint16_t listen_on(struct rdma_event_channel *ch, struct rdma_cm_id **id,
		   const char *ip, enum rdma_port_space ps);
/* An id resolved (address and route) to ip:port; ch NULL for a
 * synchronous id. */
void resolve_to(struct rdma_event_channel *ch, struct rdma_cm_id *id,
		const char *ip, uint16_t port);

/* A QP on id with small queues (rdma_create_qp, default PD, own CQs). */
void make_qp(struct rdma_cm_id *id, enum ibv_qp_type type);

/* Send len bytes from one id to another that posted a receive:
 * rdma_verbs.h's helpers end to end. */
void post_recv_buf(struct rdma_cm_id *id, void *buf, size_t len,
		   struct ibv_mr **mr);
void send_buf(struct rdma_cm_id *id, void *buf, size_t len);
void recv_done(struct rdma_cm_id *id, struct ibv_mr *mr);

#endif
