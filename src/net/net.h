/* SPDX-License-Identifier: MIT */
/*
 * The net path's sockets (DESIGN.md "Net path"): what carries IB packets
 * between processes that cannot use the same-host path.
 *
 *   RC, UC   one TCP connection per ordered pair of processes, opened by
 *            the requester on first use.  Requests go one way, the
 *            responder's ACKs and responses come back on the same
 *            connection.  A frame is a 4-byte big-endian length and one
 *            IB packet (BTH .. pad, no ICRC: TCP checks the bytes).
 *   UD       one UDP datagram per packet, from and to the processes'
 *            slot ports (the QPN says which, slot.h).
 *   mcast    UDP to the group's IP address, port 4791, out of the
 *            device's interface and not looped back (this host's members
 *            get their copy through the host table); every process with
 *            a QP attached listens there (SO_REUSEADDR), each gets a copy.
 *
 * Every socket is non-blocking.  Senders (any thread) queue a packet on a
 * connection and write what the socket takes at once; the engine thread
 * writes the rest when the socket drains, reads every socket, cuts the
 * stream into packets and hands each to the receive function (net.c) —
 * nothing is read before the frame length was checked.
 *
 * SOFTHCA_FAULTS injects faults into what is sent (fault.c style list,
 * see shca_net_faults_help); SOFTHCA_PCAP records every packet sent and
 * received.
 */
#ifndef SOFTHCA_NET_NET_H
#define SOFTHCA_NET_NET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "../engine/engine.h"
#include "../wire/wire.h"

struct shca_conn;

/* Where a packet came from and was sent to, as GIDs (IPv4-mapped). */
struct shca_net_addr {
	uint8_t src[16];
	uint8_t dst[16];
	uint16_t src_port;
};

/*
 * What the engine hands up: one IB packet (untrusted bytes) from c (NULL
 * for a datagram).
 */
typedef void (*shca_net_rx_fn)(struct shca_conn *c,
			       const struct shca_net_addr *addr,
			       const void *pkt, size_t len);

/* Start receiving on this process's slot (idempotent; again after fork).
 * 0 or -errno. */
int shca_net_start(shca_net_rx_fn fn);

/* This process has used the net path (its engine watches sockets). */
bool shca_net_active(void);

/* ibv_poll_cq found nothing: if the net path is in use, carry out the
 * engine's pending work here (shca_engine_progress), or give the thread
 * doing it the CPU. */
void shca_net_poll_idle(void);

/* Write the ACKs held for a poller's next packet (conn.c, acks_hold):
 * before a QP's modify or destroy, whose effects the peer may see by
 * another way (rdma_disconnect's DREQ).  asleep: the thread goes to
 * sleep in a completion channel, and no more are held until a thread
 * polls again. */
void shca_net_acks_out(bool asleep);

/* The outgoing connection from this host's address sgid (NULL: any) to
 * the process listening on port at gid's address (a link-local one on
 * interface ifindex); created (not yet connected) on first use, never
 * freed. */
struct shca_conn *shca_net_conn_get(const uint8_t sgid[16],
				    const uint8_t gid[16], uint16_t port,
				    unsigned int ifindex);

/*
 * Admission (docs/security.md "Net admission").  Who is at the other end
 * of c: its address, the interface of a link-local one (scope, else 0)
 * and its slot port, once the handshake proved them (handshake.h); false
 * before that.  Engine thread.
 */
bool shca_net_conn_proven(struct shca_conn *c, uint8_t gid[16],
			  unsigned int *scope, uint16_t *port);

/*
 * Listeners (listen.c): this process listens on the slot port of the
 * addresses it uses only.  shca_net_listen_addr adds gid (an address of
 * interface ifindex) to them (idempotent; 0 or -errno, and the address
 * counts as in use for datagrams even when it cannot be bound yet).
 */
void shca_net_listen_start(shca_fd_fn accept_fn);
void shca_net_listen_forget(void);
int shca_net_listen_addr(const uint8_t gid[16], unsigned int ifindex);
bool shca_net_addr_in_use(const uint8_t gid[16]);

/* shca_net_send flags */
enum {
	SHCA_NET_COPY = 1 << 0,	/* copy the payload now */
	SHCA_NET_MORE = 1 << 1,	/* more follows: write with the next one
				 * (or shca_net_flush) */
	SHCA_NET_ACK = 1 << 2,	/* a plain ACK: may replace the QP's ACK
				 * still queued last (conn.c, ack_merge) */
	SHCA_NET_DEFER = 1 << 3, /* a new small request, copied, that the
				  * peer answers: may wait for the peer's
				  * next answer (shca_net_flush_defer) */
};

/* shca_net_send: the ACK went into the one queued before (SHCA_NET_ACK) */
#define SHCA_NET_MERGED	1

/*
 * Queue one IB packet on c: the headers (copied), then the payload iovecs
 * and the pad the BTH announces.  The payload is referenced until written
 * unless SHCA_NET_COPY is set; owned (may be NULL) is freed once the
 * packet is written or dropped.  Returns 0, SHCA_NET_MERGED (no new
 * packet: SHCA_NET_ACK), or -ENOTCONN when the
 * connection is down (a new connection is being opened: send again
 * later).  What the receive function sends on the connection a packet came
 * from is written once the received batch is handed up.
 */
int shca_net_send(struct shca_conn *c, uint32_t qpn, const void *hdr,
		  size_t hlen, const struct iovec *pl, int npl,
		  unsigned int flags, void *owned);
/*
 * On the stream, IB frames are a 4-byte length word (network order) and
 * the packet.  Packets of a train that differ only in their PSN, which
 * counts up, with payloads of one length and no pad, and no AckReq (the
 * middle packets of a message) go as one run frame, as a segmentation
 * offload sends them, so that the receiver reads them with one copy:
 *   word: SHCA_NET_RUN | n (n packets, 1 .. SHCA_NET_RUN_MAX)
 *   4 bytes: the payload length of each (network order; a multiple of 4)
 *   the first packet's BTH (12 bytes)
 *   n payloads
 * The receiver hands them up as the n packets they stand for (the pcap
 * trace shows those too).  Control frames (handshake.h) set the top bit.
 */
#define SHCA_NET_RUN		0x40000000u
#define SHCA_NET_RUN_HDR	20
#define SHCA_NET_RUN_MAX	SHCA_NET_TRAIN
/* A softhca sender puts no more payload bytes than this in one run (a
 * receiver placing one reads this much before it knows): 64 KiB, one
 * receive of a 64 KiB message's middles between two namespaces (path
 * MTU 1024; handshake version 3, 32 KiB before) */
#define SHCA_NET_RUN_BYTES	(64 * 1024)

/*
 * A train: consecutive packets of one WQE of QP qpn, queued together as by
 * shca_net_send(.., SHCA_NET_MORE | flags) each, with their payloads
 * referenced, or copied (flags SHCA_NET_COPY: READ responses), in one
 * chunk of the queue (one allocation, one lock, one count for the
 * lot instead of one each: per-packet work was half of a 1 MiB WRITE
 * requester's CPU between two namespaces).  PSNs count up from the
 * first's.  At most SHCA_NET_TRAIN packets and SHCA_NET_TRAIN_IOV payload
 * iovecs.  Returns how many of p were queued (all of them unless the fault
 * injector, which handles packets one by one, or the connection stopped
 * it), or -errno when none was (as shca_net_send).
 *
 * lane (NULL: none): an access lane held for the registered memory the
 * payloads are in (net/transport.c rd_train: READ responses, which the
 * responder's deregistration may not wait for).  When the train is
 * queued referencing them, the chunk takes the lane (lane->lane NULL
 * after) and lets it go once the socket took the bytes; a drain of its
 * key first copies them (shca_net_drain_key).  Else it stays the
 * caller's.
 */
#define SHCA_NET_TRAIN		64
#define SHCA_NET_TRAIN_IOV	512

struct shca_net_pkt {
	const void *hdr;
	size_t hlen;
	const struct iovec *pl;
	int npl;
	/* 0 or 1: one packet.  More: a run frame the caller made
	 * (shca_net_runs_premade): count packets whose BTH is hdr (a BTH
	 * alone, asking for no ACK) with the PSN counting up, and whose
	 * payloads follow one another in pl, count of the same length (a
	 * multiple of 4, the path MTU); SHCA_NET_RUN_MAX packets and
	 * SHCA_NET_RUN_BYTES at most.  It goes as one run frame, and
	 * counts as count packets. */
	uint32_t count;
};
/*
 * May a train hold runs made by the caller (shca_net_pkt count)?  Not
 * while the fault injector or the pcap trace is on: both take the
 * packets one by one.
 */
bool shca_net_runs_premade(void);
struct shca_lane;
int shca_net_send_train(struct shca_conn *c, uint32_t qpn, uint32_t psn,
			const struct shca_net_pkt *p, int n,
			unsigned int flags, struct shca_lane *lane);
/* The lanes of key held by queued chunks: their unwritten bytes copied,
 * the lanes let go (shm/seg.c shca_seg_drain's hook; any thread). */
void shca_net_drain_key(uint32_t key);
/*
 * QP qpn is destroyed or in error: its packets still queued on c that
 * reference the application's memory (which it may free now) are dropped,
 * or, if partly written already, given a copy of their own.
 */
void shca_net_forget(struct shca_conn *c, uint32_t qpn);
/*
 * QP qpn's WQE of PSNs [psn, psn + n) completes: the peer acknowledged
 * them, so a packet of theirs still queued on c is a resend (go-back-N)
 * that it does not need.  Those that reference the application's memory,
 * which is the application's again once the completion is seen, are
 * dropped, or, if partly written already, given a copy of their own.
 */
void shca_net_release(struct shca_conn *c, uint32_t qpn, uint32_t psn,
		      uint32_t n);
/*
 * Direct placement (engine thread).  The middle packets of an RDMA WRITE
 * need no gathering: their payloads may be received from the socket
 * straight into the registered memory they are for, with no copy.
 *
 * shca_net_expect(c, qpn) says the next frames on c are probably qpn's.
 * When the engine reaches a frame boundary on c with nothing buffered, it
 * asks where (shca_net_place_fn, which checks the QP, its state and the
 * R_Key again, and fills *p); it then receives frames of exactly
 * SHCA_BTH_LEN + p->mtu bytes whose BTH is p->bth with the PSN counting
 * up from it, each payload to p->dst + k * p->mtu, and reports the frames
 * that matched with shca_net_placed_fn.  Bytes that do not match (another
 * QP's frame, an ACK, a duplicate) are handed up as usual: what they
 * overwrote lies inside the range of the WRITE in progress, which its own
 * packets write again.  RC only: UC does not send a packet again.
 */
struct shca_net_place {
	struct shca_bth bth;		/* the first frame's: opcode ... PSN */
	unsigned char *dst;		/* payload k goes to dst + k * mtu */
	uint32_t mtu;
	uint32_t count;			/* frames (0: none expected) */
};
typedef void (*shca_net_place_fn)(struct shca_conn *c, uint32_t qpn,
				  struct shca_net_place *p);
typedef void (*shca_net_placed_fn)(struct shca_conn *c, uint32_t qpn,
				   uint32_t psn, uint32_t n);
void shca_net_set_placement(shca_net_place_fn where, shca_net_placed_fn done);
void shca_net_expect(struct shca_conn *c, uint32_t qpn);

/* After the engine wrote to c because it drained (EPOLLOUT): who waits
 * for room on a connection goes on (engine thread). */
typedef void (*shca_net_drain_fn)(struct shca_conn *c);
void shca_net_set_drain(shca_net_drain_fn fn);

/* Write what SHCA_NET_MORE left queued. */
void shca_net_flush(struct shca_conn *c);
/*
 * The same, for a requester's new packets: if everything queued is
 * SHCA_NET_DEFER and the peer owes answers to more than SOFTHCA_NET_DEFER
 * such packets already written (since its last batch on c), the queue
 * waits for that batch, which writes it (deliver).  A burst of small WRs
 * then costs one write per answer from the peer, not one each; a lone WR
 * (a ping-pong) is written at once.  Bounded: the answers owed come (or
 * the ACK timer sends again, which writes everything).
 */
void shca_net_flush_defer(struct shca_conn *c);

/* Bytes queued on c that the socket has not taken yet. */
size_t shca_net_queued(struct shca_conn *c);

/* The GIDs of c's two ends (pcap, checks). */
void shca_net_conn_addr(struct shca_conn *c, struct shca_net_addr *addr);

/*
 * c's generation.  An incoming connection object is recycled for another
 * peer after its socket closed (conn.c), which moves its generation on:
 * who keeps c past the packet that came on it notes the generation then
 * and sends nothing on c once it differs (engine thread).  An outgoing
 * object keeps its generation: it always goes to the same peer.
 */
uint32_t shca_net_conn_gen(struct shca_conn *c);
/*
 * A number that moves on whenever c's socket goes (shut down or closed),
 * and with it what was queued or on its way: while it stays the same, a
 * packet sent on c reaches the peer and its answers come back, in order
 * (TCP), unless shca_net_faults_drop().
 */
uint32_t shca_net_conn_resets(struct shca_conn *c);
/* SOFTHCA_FAULTS drops packets of this process on live connections. */
bool shca_net_faults_drop(void);

/*
 * One UD datagram to the process on port at gid's address, or to a
 * multicast group's port 4791 from interface ifindex.  UD may lose a
 * message: 0 also when the socket would block.
 */
int shca_net_sendto(const uint8_t gid[16], uint16_t port,
		    unsigned int ifindex, const void *hdr, size_t hlen,
		    const struct iovec *pl, int npl);

/* Receive the multicast group gid on interface ifindex (refcounted). */
int shca_net_mcast_join(const uint8_t gid[16], unsigned int ifindex);
void shca_net_mcast_leave(const uint8_t gid[16], unsigned int ifindex);

/*
 * The key limit (keyguard.c): who c's other end is (its address, and the
 * port it listens on or its source port); close c at once, and nothing
 * more that arrived on it is handed on while it closes.  Engine thread.
 */
void shca_net_conn_peer(struct shca_conn *c, uint8_t gid[16],
			uint16_t *port);
void shca_net_conn_abort(struct shca_conn *c);
bool shca_net_conn_aborted(struct shca_conn *c);

#define SHCA_NET_MCAST_PORT 4791
/* Payload iovecs of one datagram at most. */
#define SHCA_MAX_NET_IOV 64

#endif
