// SPDX-License-Identifier: MIT
/*
 * SHA-256 and HMAC-SHA256 (common/sha256.c) against the published
 * vectors: FIPS 180-4's examples (and the empty and million-"a" messages
 * of its validation set), RFC 4231's HMAC-SHA256 test cases 1-4, 6, 7;
 * data fed in odd pieces gives the same digest.
 */
#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "common/sha256.h"

static void hex(const uint8_t *d, char *out)
{
	int i;

	for (i = 0; i < SHCA_SHA256_LEN; i++)
		sprintf(out + 2 * i, "%02x", d[i]);
}

static void check_sha(const void *p, size_t n, const char *want)
{
	uint8_t d[SHCA_SHA256_LEN];
	char h[2 * SHCA_SHA256_LEN + 1];

	shca_sha256(p, n, d);
	hex(d, h);
	ASSERT_STR_EQ(h, want);
}

TEST(sha256_fips_180_4)
{
	check_sha("", 0, "e3b0c44298fc1c149afbf4c8996fb924"
			 "27ae41e4649b934ca495991b7852b855");
	check_sha("abc", 3, "ba7816bf8f01cfea414140de5dae2223"
			    "b00361a396177a9cb410ff61f20015ad");
	check_sha("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
		  56, "248d6a61d20638b8e5c026930c3e6039"
		      "a33ce45964ff2167f6ecedd419db06c1");
}

TEST(sha256_million_a_in_pieces)
{
	static unsigned char a[1000000];
	struct shca_sha256 s;
	uint8_t d[SHCA_SHA256_LEN];
	char h[2 * SHCA_SHA256_LEN + 1];
	size_t off = 0, step = 1;

	memset(a, 'a', sizeof(a));
	check_sha(a, sizeof(a), "cdc76e5c9914fb9281a1c7e284d73e67"
				"f1809a48a497200e046d39ccc7112cd0");
	/* the same bytes in pieces of 1, 2, 3, ... bytes */
	shca_sha256_init(&s);
	while (off < sizeof(a)) {
		size_t n = step < sizeof(a) - off ? step : sizeof(a) - off;

		shca_sha256_update(&s, a + off, n);
		off += n;
		step = step % 131 + 1;
	}
	shca_sha256_final(&s, d);
	hex(d, h);
	ASSERT_STR_EQ(h, "cdc76e5c9914fb9281a1c7e284d73e67"
			 "f1809a48a497200e046d39ccc7112cd0");
}

static void check_hmac(const void *k, size_t kl, const void *m, size_t ml,
		       const char *want)
{
	uint8_t d[SHCA_SHA256_LEN];
	char h[2 * SHCA_SHA256_LEN + 1];
	const void *p[2] = { m, (const char *)m + ml / 3 };
	size_t l[2] = { ml / 3, ml - ml / 3 };

	/* the message in two pieces: HMAC of their concatenation */
	shca_hmac_sha256(k, kl, p, l, 2, d);
	hex(d, h);
	ASSERT_STR_EQ(h, want);
}

TEST(hmac_sha256_rfc_4231)
{
	unsigned char k[131], m[50];
	int i;

	memset(k, 0x0b, 20);
	check_hmac(k, 20, "Hi There", 8,
		   "b0344c61d8db38535ca8afceaf0bf12b"
		   "881dc200c9833da726e9376c2e32cff7");
	check_hmac("Jefe", 4, "what do ya want for nothing?", 28,
		   "5bdcc146bf60754e6a042426089575c7"
		   "5a003f089d2739839dec58b964ec3843");
	memset(k, 0xaa, 20);
	memset(m, 0xdd, 50);
	check_hmac(k, 20, m, 50, "773ea91e36800e46854db8ebd09181a7"
				 "2959098b3ef8c122d9635514ced565fe");
	for (i = 0; i < 25; i++)
		k[i] = (unsigned char)(i + 1);
	memset(m, 0xcd, 50);
	check_hmac(k, 25, m, 50, "82558a389a443c0ea4cc819899f2083a"
				 "85f0faa3e578f8077a2e3ff46729665b");
	memset(k, 0xaa, 131);
	check_hmac(k, 131,
		   "Test Using Larger Than Block-Size Key - Hash Key First",
		   54, "60e431591ee0b67f0d8a26aacbf5b77f"
		       "8e0bc6213728c5140546040f0ee37f54");
	{
		static const char t7[] =
			"This is a test using a larger than block-size key "
			"and a larger than block-size data. The key needs to "
			"be hashed before being used by the HMAC algorithm.";

		check_hmac(k, 131, t7, sizeof(t7) - 1,
			   "9b09ffa71b942fcb27635fbcd5b0e944"
			   "bfdc63644f0713938a7f51535c3a35e2");
	}
}

TEST(ct_equal)
{
	ASSERT(shca_ct_equal("abcd", "abcd", 4));
	ASSERT(!shca_ct_equal("abcd", "abce", 4));
	ASSERT(!shca_ct_equal("xbcd", "abcd", 4));
	ASSERT(shca_ct_equal("", "", 0));
}
