/* SPDX-License-Identifier: MIT */
/*
 * SHA-256 (FIPS 180-4) and HMAC-SHA256 (RFC 2104), for the net path's
 * optional shared-secret handshake (SOFTHCA_NET_SECRET, net/handshake.c):
 * small and self-contained, so that libibverbs links no crypto library.
 * Not constant-time with respect to the message length (it need not be:
 * the inputs are nonces and a fixed-size label); shca_ct_equal compares
 * MACs in constant time.
 */
#ifndef SOFTHCA_COMMON_SHA256_H
#define SOFTHCA_COMMON_SHA256_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SHCA_SHA256_LEN		32
#define SHCA_SHA256_BLOCK	64

struct shca_sha256 {
	uint32_t h[8];
	uint64_t len;			/* bytes hashed so far */
	unsigned char buf[SHCA_SHA256_BLOCK];
	size_t fill;			/* bytes in buf */
};

void shca_sha256_init(struct shca_sha256 *s);
void shca_sha256_update(struct shca_sha256 *s, const void *p, size_t n);
void shca_sha256_final(struct shca_sha256 *s, uint8_t out[SHCA_SHA256_LEN]);
void shca_sha256(const void *p, size_t n, uint8_t out[SHCA_SHA256_LEN]);

/* HMAC-SHA256 of the concatenation of the n pieces (p[i], len[i]). */
void shca_hmac_sha256(const void *key, size_t klen, const void *const *p,
		      const size_t *len, int n,
		      uint8_t out[SHCA_SHA256_LEN]);

/* a == b over n bytes, in time that does not depend on where they differ */
bool shca_ct_equal(const void *a, const void *b, size_t n);

#endif
