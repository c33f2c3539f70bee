// SPDX-License-Identifier: MIT
/*
 * SHA-256 as FIPS 180-4 section 6.2 defines it, and HMAC (RFC 2104) over
 * it: see sha256.h.  The unit test checks the FIPS 180-4 examples and the
 * RFC 4231 vectors.
 */
#include <string.h>

#include "sha256.h"

/* FIPS 180-4 4.2.2: the first 32 bits of the fractional parts of the cube
 * roots of the first 64 primes */
static const uint32_t K[64] = {
	0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1,
	0x923f82a4, 0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3,
	0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786,
	0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
	0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147,
	0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13,
	0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
	0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
	0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a,
	0x5b9cca4f, 0x682e6ff3, 0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208,
	0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

static uint32_t rotr(uint32_t x, unsigned int n)
{
	return x >> n | x << (32 - n);
}

/* FIPS 180-4 6.2.2: one 512-bit block */
static void block(struct shca_sha256 *s, const unsigned char *p)
{
	uint32_t w[64], a, b, c, d, e, f, g, h, t1, t2;
	int i;

	for (i = 0; i < 16; i++)
		w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 |
		       (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
	for (i = 16; i < 64; i++) {
		uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^
			      w[i - 15] >> 3;
		uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^
			      w[i - 2] >> 10;

		w[i] = w[i - 16] + s0 + w[i - 7] + s1;
	}
	a = s->h[0];
	b = s->h[1];
	c = s->h[2];
	d = s->h[3];
	e = s->h[4];
	f = s->h[5];
	g = s->h[6];
	h = s->h[7];
	for (i = 0; i < 64; i++) {
		t1 = h + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) +
		     ((e & f) ^ (~e & g)) + K[i] + w[i];
		t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) +
		     ((a & b) ^ (a & c) ^ (b & c));
		h = g;
		g = f;
		f = e;
		e = d + t1;
		d = c;
		c = b;
		b = a;
		a = t1 + t2;
	}
	s->h[0] += a;
	s->h[1] += b;
	s->h[2] += c;
	s->h[3] += d;
	s->h[4] += e;
	s->h[5] += f;
	s->h[6] += g;
	s->h[7] += h;
}

void shca_sha256_init(struct shca_sha256 *s)
{
	/* FIPS 180-4 5.3.3 */
	static const uint32_t h0[8] = { 0x6a09e667, 0xbb67ae85, 0x3c6ef372,
					0xa54ff53a, 0x510e527f, 0x9b05688c,
					0x1f83d9ab, 0x5be0cd19 };

	memcpy(s->h, h0, sizeof(h0));
	s->len = 0;
	s->fill = 0;
}

void shca_sha256_update(struct shca_sha256 *s, const void *p, size_t n)
{
	const unsigned char *b = p;

	s->len += n;
	while (n) {
		size_t take = SHCA_SHA256_BLOCK - s->fill;

		if (take > n)
			take = n;
		memcpy(s->buf + s->fill, b, take);
		s->fill += take;
		b += take;
		n -= take;
		if (s->fill == SHCA_SHA256_BLOCK) {
			block(s, s->buf);
			s->fill = 0;
		}
	}
}

void shca_sha256_final(struct shca_sha256 *s, uint8_t out[SHCA_SHA256_LEN])
{
	uint64_t bits = s->len * 8;
	int i;

	/* FIPS 180-4 5.1.1: a 1 bit, zeros, the length in 64 bits */
	s->buf[s->fill++] = 0x80;
	if (s->fill > SHCA_SHA256_BLOCK - 8) {
		memset(s->buf + s->fill, 0, SHCA_SHA256_BLOCK - s->fill);
		block(s, s->buf);
		s->fill = 0;
	}
	memset(s->buf + s->fill, 0, SHCA_SHA256_BLOCK - 8 - s->fill);
	for (i = 0; i < 8; i++)
		s->buf[SHCA_SHA256_BLOCK - 1 - i] =
			(unsigned char)(bits >> (8 * i));
	block(s, s->buf);
	for (i = 0; i < 8; i++) {
		out[4 * i] = (uint8_t)(s->h[i] >> 24);
		out[4 * i + 1] = (uint8_t)(s->h[i] >> 16);
		out[4 * i + 2] = (uint8_t)(s->h[i] >> 8);
		out[4 * i + 3] = (uint8_t)s->h[i];
	}
	memset(s, 0, sizeof(*s));
}

void shca_sha256(const void *p, size_t n, uint8_t out[SHCA_SHA256_LEN])
{
	struct shca_sha256 s;

	shca_sha256_init(&s);
	shca_sha256_update(&s, p, n);
	shca_sha256_final(&s, out);
}

/* RFC 2104: H(K ^ opad, H(K ^ ipad, text)), a key longer than a block
 * hashed first */
void shca_hmac_sha256(const void *key, size_t klen, const void *const *p,
		      const size_t *len, int n, uint8_t out[SHCA_SHA256_LEN])
{
	unsigned char k[SHCA_SHA256_BLOCK], pad[SHCA_SHA256_BLOCK];
	uint8_t inner[SHCA_SHA256_LEN];
	struct shca_sha256 s;
	int i;

	memset(k, 0, sizeof(k));
	if (klen > SHCA_SHA256_BLOCK)
		shca_sha256(key, klen, k);
	else if (klen)
		memcpy(k, key, klen);
	for (i = 0; i < SHCA_SHA256_BLOCK; i++)
		pad[i] = k[i] ^ 0x36;
	shca_sha256_init(&s);
	shca_sha256_update(&s, pad, sizeof(pad));
	for (i = 0; i < n; i++)
		shca_sha256_update(&s, p[i], len[i]);
	shca_sha256_final(&s, inner);
	for (i = 0; i < SHCA_SHA256_BLOCK; i++)
		pad[i] = k[i] ^ 0x5c;
	shca_sha256_init(&s);
	shca_sha256_update(&s, pad, sizeof(pad));
	shca_sha256_update(&s, inner, sizeof(inner));
	shca_sha256_final(&s, out);
	memset(k, 0, sizeof(k));
	memset(pad, 0, sizeof(pad));
}

bool shca_ct_equal(const void *a, const void *b, size_t n)
{
	const volatile unsigned char *x = a, *y = b;
	unsigned char d = 0;
	size_t i;

	for (i = 0; i < n; i++)
		d |= x[i] ^ y[i];
	return d == 0;
}
