// SPDX-License-Identifier: MIT
/*
 * shca_pingpong's data checks.
 *
 * The pattern: byte `off` of the message that side `s` sends in iteration
 * `i` is LUT[(B[off] + T(s, i)) mod 254], where B[off] is a hash of the
 * offset (a byte placed at the wrong offset, a packet placed twice, a
 * stream resumed a byte late: wrong with probability 253/254 a byte) and
 * T(s, i) = (97 i + 127 s) mod 254 (97 and 127 are prime to 254: every
 * byte of iteration i differs from the same byte of iteration i - 1, and
 * from the same byte of the other side's message).  LUT maps 0..253 to
 * the byte values 1..255 without the sentinel 0xa5: no byte of a message
 * is 0 (stale zeroed memory) or the sentinel (an untouched slot).
 *
 * A receive slot is [front guard | SGE: (GRH) message slack | back guard],
 * all of it the sentinel when posted.  After a receive, every byte of it is
 * checked: the guards and the slack still the sentinel, the message the
 * pattern, the GRH the sender's and receiver's addresses.
 */
#include <arpa/inet.h>
#include <stdlib.h>
#include <string.h>

#include "pp.h"

static uint8_t lut[254];

static uint32_t mix(uint32_t x)
{
	/* a 32-bit finaliser: every input bit moves every output bit */
	x ^= x >> 16;
	x *= 0x7feb352du;
	x ^= x >> 15;
	x *= 0x846ca68bu;
	x ^= x >> 16;
	return x;
}

int pp_pattern_init(struct pp_ctx *c)
{
	uint32_t v, off;

	for (v = 0; v < 254; v++)
		lut[v] = (uint8_t)(v + 1 >= PP_SENTINEL ? v + 2 : v + 1);
	c->base = malloc(c->o->size ? c->o->size : 1);
	if (!c->base) {
		pp_fail("out of memory for the pattern");
		return -1;
	}
	for (off = 0; off < c->o->size; off++)
		c->base[off] = (uint8_t)(mix(off) % 254);
	return 0;
}

static uint32_t shift(int side, uint32_t iter)
{
	return ((iter % 254) * 97 + (uint32_t)side * 127) % 254;
}

static uint8_t want(const struct pp_ctx *c, uint32_t t, uint32_t off)
{
	uint32_t v = c->base[off] + t;

	return lut[v >= 254 ? v - 254 : v];
}

void pp_fill_send(struct pp_ctx *c, uint32_t iter)
{
	uint8_t *p = pp_send_buf(c);
	uint32_t t = shift(c->side, iter), off;

	for (off = 0; off < c->o->size; off++)
		p[off] = want(c, t, off);
}

/* The send of iteration iter left its source as it was. */
int pp_check_send(const struct pp_ctx *c, uint32_t iter)
{
	const uint8_t *p = pp_send_buf(c);
	uint32_t t = shift(c->side, iter), off;

	for (off = 0; off < c->o->size; off++)
		if (p[off] != want(c, t, off)) {
			pp_fail("iteration %u: the send changed its own source "
				"buffer: byte %u is 0x%02x, was 0x%02x",
				iter, off, p[off], want(c, t, off));
			return -1;
		}
	return 0;
}

void pp_reset_slot(struct pp_ctx *c, uint32_t slot)
{
	memset(pp_slot(c, slot), PP_SENTINEL, c->stride);
}

/* Bytes [from, to) of the slot still hold the sentinel. */
static int untouched(const struct pp_ctx *c, const uint8_t *p, size_t from,
		     size_t to, uint32_t iter, const char *where)
{
	size_t i;

	for (i = from; i < to; i++)
		if (p[i] != PP_SENTINEL) {
			pp_fail("iteration %u: %s: slot byte %zu is 0x%02x, "
				"not the sentinel 0x%02x (the message is bytes "
				"%u to %u)", iter, where, i, p[i], PP_SENTINEL,
				PP_FRONT + c->grh,
				PP_FRONT + c->grh + c->o->size);
			return -1;
		}
	return 0;
}

static bool v4mapped(const union ibv_gid *g)
{
	static const uint8_t pre[12] = { [10] = 0xff, [11] = 0xff };

	return !memcmp(g->raw, pre, sizeof(pre));
}

/*
 * UD: the 40 bytes before the payload.  RoCE v2 over IPv4: bytes 20-39
 * are the IPv4 header (the first 20 are undefined); over IPv6, the IPv6
 * header.  The lengths count UDP (8), BTH (12), DETH (8), the payload and
 * the ICRC (4), as on the wire.
 */
static int check_grh(const struct pp_ctx *c, const uint8_t *g, uint32_t iter)
{
	uint32_t l4 = 8 + 12 + 8 + c->o->size + 4;
	const char *bad = NULL;

	if (v4mapped(&c->peer.gid) && v4mapped(&c->sgid)) {
		if (g[20] != 0x45)
			bad = "not an IPv4 header of 20 bytes";
		else if (g[29] != 17)
			bad = "IPv4 protocol not UDP";
		else if ((uint32_t)(g[22] << 8 | g[23]) != 20 + l4)
			bad = "IPv4 total length not the packet's";
		else if (memcmp(g + 32, c->peer.gid.raw + 12, 4))
			bad = "IPv4 source not the sender";
		else if (memcmp(g + 36, c->sgid.raw + 12, 4))
			bad = "IPv4 destination not the receiver";
	} else {
		if (g[0] >> 4 != 6)
			bad = "not an IPv6 header";
		else if ((uint32_t)(g[4] << 8 | g[5]) != l4)
			bad = "IPv6 payload length not the packet's";
		else if (g[6] != 17)
			bad = "IPv6 next header not UDP";
		else if (memcmp(g + 8, c->peer.gid.raw, 16))
			bad = "source GID not the sender's";
		else if (memcmp(g + 24, c->sgid.raw, 16))
			bad = "destination GID not the receiver's";
	}
	if (bad) {
		pp_fail("iteration %u: GRH: %s", iter, bad);
		return -1;
	}
	return 0;
}

/* Every byte of the slot that received iteration iter's message. */
int pp_check_slot(struct pp_ctx *c, uint32_t slot, uint32_t iter)
{
	const uint8_t *p = pp_slot(c, slot), *m = p + PP_FRONT + c->grh;
	uint32_t t = shift(1 - c->side, iter), off, nbad = 0, first = 0;
	uint8_t got = 0, exp = 0;

	if (untouched(c, p, 0, PP_FRONT, iter, "before the receive SGE"))
		return -1;
	if (c->grh && check_grh(c, p + PP_FRONT, iter))
		return -1;
	for (off = 0; off < c->o->size; off++)
		if (m[off] != want(c, t, off) && !nbad++) {
			first = off;
			got = m[off];
			exp = want(c, t, off);
		}
	if (nbad) {
		pp_fail("iteration %u: %u of the message's %u bytes are wrong; "
			"the first, byte %u, is 0x%02x, expected 0x%02x%s",
			iter, nbad, c->o->size, first, got, exp,
			got == PP_SENTINEL ? " (never written)" : "");
		return -1;
	}
	if (untouched(c, p, PP_FRONT + c->grh + c->o->size, c->stride, iter,
		      "after the message"))
		return -1;
	c->checked += c->o->size;
	return 0;
}
