// SPDX-License-Identifier: MIT
/*
 * The handshake's formats and MACs (handshake.h).  Everything parsed here
 * comes from the network: lengths are checked before a byte is read.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "../common/log.h"
#include "handshake.h"

static const uint8_t challenge_magic[4] = { 'S', 'H', 'C', 'H' };

static void put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static uint16_t get16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static void put32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

static uint32_t ctl_word(enum shca_hs_type t, size_t len)
{
	return SHCA_HS_CTL | (uint32_t)t << 16 | (uint32_t)len;
}

int shca_hs_ctl_body(uint32_t word, enum shca_hs_type *type)
{
	static const int body[] = {
		[SHCA_HS_HELLO] = SHCA_HS_HELLO_LEN,
		[SHCA_HS_PROOF] = SHCA_HS_PROOF_LEN,
		[SHCA_HS_WELCOME] = SHCA_HS_WELCOME_LEN,
	};
	uint32_t t = word >> 16 & 0x7fff;

	if (!(word & SHCA_HS_CTL) || t < SHCA_HS_HELLO ||
	    t > SHCA_HS_WELCOME || (word & 0xffff) != (uint32_t)body[t])
		return -1;
	*type = (enum shca_hs_type)t;
	return body[t];
}

size_t shca_hs_hello_build(uint8_t *out, const struct shca_hs_hello *h)
{
	put32(out, ctl_word(SHCA_HS_HELLO, SHCA_HS_HELLO_LEN));
	out[4] = h->version;
	out[5] = h->flags;
	put16(out + 6, h->port);
	memcpy(out + 8, h->nonce, SHCA_HS_NONCE);
	return 4 + SHCA_HS_HELLO_LEN;
}

int shca_hs_hello_parse(const uint8_t *body, size_t len,
			struct shca_hs_hello *h)
{
	if (len != SHCA_HS_HELLO_LEN || body[0] != SHCA_HS_VERSION)
		return -EINVAL;
	h->version = body[0];
	h->flags = body[1];
	h->port = get16(body + 2);
	memcpy(h->nonce, body + 4, SHCA_HS_NONCE);
	return 0;
}

size_t shca_hs_proof_build(uint8_t *out, const uint8_t nonce[SHCA_HS_NONCE],
			   const uint8_t mac[SHCA_HS_MAC])
{
	put32(out, ctl_word(SHCA_HS_PROOF, SHCA_HS_PROOF_LEN));
	memcpy(out + 4, nonce, SHCA_HS_NONCE);
	memcpy(out + 4 + SHCA_HS_NONCE, mac, SHCA_HS_MAC);
	return 4 + SHCA_HS_PROOF_LEN;
}

size_t shca_hs_welcome_build(uint8_t *out, const uint8_t mac[SHCA_HS_MAC])
{
	put32(out, ctl_word(SHCA_HS_WELCOME, SHCA_HS_WELCOME_LEN));
	memcpy(out + 4, mac, SHCA_HS_MAC);
	return 4 + SHCA_HS_WELCOME_LEN;
}

size_t shca_hs_challenge_build(uint8_t *out,
			       const struct shca_hs_challenge *c)
{
	memcpy(out, challenge_magic, 4);
	out[4] = c->version;
	out[5] = c->flags;
	put16(out + 6, c->acc_port);
	put16(out + 8, c->src_port);
	memcpy(out + 10, c->nonce, SHCA_HS_NONCE);
	return SHCA_HS_CHALLENGE_LEN;
}

int shca_hs_challenge_parse(const uint8_t *d, size_t len,
			    struct shca_hs_challenge *c)
{
	/* "SH" as a BTH's first byte is an RD opcode (0x53): no packet of
	 * softhca's looks like this */
	if (len != SHCA_HS_CHALLENGE_LEN || memcmp(d, challenge_magic, 4) ||
	    d[4] != SHCA_HS_VERSION)
		return -EINVAL;
	c->version = d[4];
	c->flags = d[5];
	c->acc_port = get16(d + 6);
	c->src_port = get16(d + 8);
	memcpy(c->nonce, d + 10, SHCA_HS_NONCE);
	return 0;
}

/* The secret, read once (a process does not change its mind). */
static pthread_once_t secret_once = PTHREAD_ONCE_INIT;
static char *secret;
static size_t secret_len;

static void secret_read(void)
{
	const char *e = getenv("SOFTHCA_NET_SECRET");

	if (!e || !*e)
		return;
	secret_len = strlen(e);
	secret = strdup(e);
	if (!secret) {
		/* refusing every connection beats accepting them all */
		shca_err("SOFTHCA_NET_SECRET: out of memory");
		abort();
	}
	if (secret_len < 16)
		shca_warn("SOFTHCA_NET_SECRET has %zu characters: a secret "
			  "that short can be guessed offline from one "
			  "recorded handshake", secret_len);
}

bool shca_hs_secret_set(void)
{
	pthread_once(&secret_once, secret_read);
	return secret != NULL;
}

void shca_hs_mac(bool opener, const uint8_t nonce_o[SHCA_HS_NONCE],
		 const uint8_t nonce_a[SHCA_HS_NONCE], uint16_t acc_port,
		 uint16_t opener_port, uint8_t mac[SHCA_HS_MAC])
{
	static const char lo[] = "softhca-net-1 opener";
	static const char la[] = "softhca-net-1 acceptor";
	uint8_t ports[4];
	const void *p[4];
	size_t l[4];

	if (!shca_hs_secret_set()) {
		memset(mac, 0, SHCA_HS_MAC);
		return;
	}
	put16(ports, acc_port);
	put16(ports + 2, opener_port);
	p[0] = opener ? lo : la;
	l[0] = opener ? sizeof(lo) : sizeof(la);	/* with the NUL */
	p[1] = nonce_o;
	l[1] = SHCA_HS_NONCE;
	p[2] = nonce_a;
	l[2] = SHCA_HS_NONCE;
	p[3] = ports;
	l[3] = sizeof(ports);
	shca_hmac_sha256(secret, secret_len, p, l, 4, mac);
}
