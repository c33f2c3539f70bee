/* SPDX-License-Identifier: MIT */
/*
 * The net path's connection handshake (docs/security.md "Net admission"):
 * who is at the other end of a TCP connection, proven before a single IB
 * packet is handled or sent on it.  This file holds the formats and the
 * MACs; conn.c runs the exchange.
 *
 *   opener -> acceptor   HELLO     (TCP)  version, flags, the opener's
 *                                         slot port Q, nonce_o
 *   acceptor -> Q        CHALLENGE (UDP)  to the source address of the
 *                                         connection, port Q: nonce_a,
 *                                         the acceptor's port P, the
 *                                         connection's source port
 *   opener -> acceptor   PROOF     (TCP)  nonce_a, mac_o
 *   acceptor -> opener   WELCOME   (TCP)  mac_a
 *
 * TCP proves the source address; only the process that owns slot port Q
 * on that address receives the CHALLENGE (the port is bound exclusively,
 * slot.c), and it echoes nonce_a on the one connection the CHALLENGE
 * names: so PROOF proves the slot too.  The acceptor's slot is proven by
 * the connect itself (only the owner of P listens on P).  With
 * SOFTHCA_NET_SECRET each side also proves it knows the secret, bound to
 * the other side's fresh nonce (HMAC-SHA256, labels per role, so no
 * reflection):
 *   mac_o = HMAC(secret, "softhca-net-1 opener"   | nonce_o | nonce_a | P | Q)
 *   mac_a = HMAC(secret, "softhca-net-1 acceptor" | nonce_o | nonce_a | P | Q)
 * Without a secret both MACs are zero bytes.
 *
 * Control frames share the stream with IB frames: their 4-byte length word
 * has its top bit set (an IB frame is never that long), the type in bits
 * 16..22 and the body length in bits 0..15.
 */
#ifndef SOFTHCA_NET_HANDSHAKE_H
#define SOFTHCA_NET_HANDSHAKE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../common/sha256.h"

#define SHCA_HS_VERSION		3
#define SHCA_HS_NONCE		16
#define SHCA_HS_MAC		SHCA_SHA256_LEN
#define SHCA_HS_CTL		0x80000000u
#define SHCA_HS_FLAG_SECRET	0x01	/* the sender has a secret */

enum shca_hs_type {
	SHCA_HS_HELLO = 1,
	SHCA_HS_PROOF = 2,
	SHCA_HS_WELCOME = 3,
};

/* Body lengths of the control frames */
#define SHCA_HS_HELLO_LEN	(4 + SHCA_HS_NONCE)
#define SHCA_HS_PROOF_LEN	(SHCA_HS_NONCE + SHCA_HS_MAC)
#define SHCA_HS_WELCOME_LEN	SHCA_HS_MAC
/* A control frame whole: the length word and the longest body */
#define SHCA_HS_FRAME_MAX	(4 + SHCA_HS_PROOF_LEN)
/* The CHALLENGE datagram: "SHCH", version, flags, P, source port, nonce */
#define SHCA_HS_CHALLENGE_LEN	(4 + 2 + 2 + 2 + SHCA_HS_NONCE)

struct shca_hs_hello {
	uint8_t version;
	uint8_t flags;
	uint16_t port;			/* the opener's slot port */
	uint8_t nonce[SHCA_HS_NONCE];
};

struct shca_hs_challenge {
	uint8_t version;
	uint8_t flags;
	uint16_t acc_port;		/* the acceptor's slot port P */
	uint16_t src_port;		/* the connection's source port */
	uint8_t nonce[SHCA_HS_NONCE];
};

/* Is this frame length word a control frame's?  Its type and body. */
static inline bool shca_hs_is_ctl(uint32_t word)
{
	return word & SHCA_HS_CTL;
}

/*
 * The body length a control frame of this word must have, or -1 when the
 * word names no known type or the wrong length (the stream is broken).
 */
int shca_hs_ctl_body(uint32_t word, enum shca_hs_type *type);

/* Frames, length word included; each returns the bytes written. */
size_t shca_hs_hello_build(uint8_t *out, const struct shca_hs_hello *h);
size_t shca_hs_proof_build(uint8_t *out, const uint8_t nonce[SHCA_HS_NONCE],
			   const uint8_t mac[SHCA_HS_MAC]);
size_t shca_hs_welcome_build(uint8_t *out, const uint8_t mac[SHCA_HS_MAC]);
/* 0, or -EINVAL for a body that is not a HELLO of this version */
int shca_hs_hello_parse(const uint8_t *body, size_t len,
			struct shca_hs_hello *h);

size_t shca_hs_challenge_build(uint8_t *out,
			       const struct shca_hs_challenge *c);
/* A datagram: a CHALLENGE (0), or something else (-EINVAL) */
int shca_hs_challenge_parse(const uint8_t *d, size_t len,
			    struct shca_hs_challenge *c);

/* SOFTHCA_NET_SECRET: set (and not empty)? */
bool shca_hs_secret_set(void);

/*
 * The MAC of one role (opener: true) over both nonces and both ports;
 * zeros without a secret.
 */
void shca_hs_mac(bool opener, const uint8_t nonce_o[SHCA_HS_NONCE],
		 const uint8_t nonce_a[SHCA_HS_NONCE], uint16_t acc_port,
		 uint16_t opener_port, uint8_t mac[SHCA_HS_MAC]);

#endif
