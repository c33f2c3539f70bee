// SPDX-License-Identifier: MIT
/*
 * Seeds for fuzz_net_hs (fuzz_net_hs.c says the input format), and a
 * driver that runs the target without libFuzzer (any compiler):
 *
 *   fuzz_net_hs_seeds write DIR     write the seed corpus into DIR
 *   fuzz_net_hs_seeds replay        run every seed, and every seed cut
 *                                   at every length
 *   fuzz_net_hs_seeds replay FILE.. run the target on files (crash repro)
 *
 * The seeds are what a stranger tries: IB frames before any handshake,
 * handshake frames out of order, a guessed PROOF, frames after a proven
 * handshake for QPs that do not have us as their peer, malformed control
 * words, and datagrams (a forged CHALLENGE, an RC packet, garbage).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz.h"
#include "net/handshake.h"

#define MAX_SEEDS	32
#define SEED_CAP	1024

struct seed {
	uint8_t b[SEED_CAP];
	size_t n;
};

static void put(struct seed *s, const void *p, size_t n)
{
	if (s->n + n <= SEED_CAP) {
		memcpy(s->b + s->n, p, n);
		s->n += n;
	}
}

static void put32(struct seed *s, uint32_t v)
{
	v = htonl(v);
	put(s, &v, 4);
}

/* An RC RDMA WRITE (op 0x0a) or READ request (0x0c) frame for qpn. */
static void ib_frame(struct seed *s, uint8_t op, uint32_t qpn, uint32_t psn)
{
	uint8_t p[12 + 16 + 16];
	size_t n = 12 + 16 + (op == 0x0a ? 16 : 0);

	memset(p, 0, sizeof(p));
	p[0] = op;
	p[2] = p[3] = 0xff;
	p[5] = (uint8_t)(qpn >> 16);
	p[6] = (uint8_t)(qpn >> 8);
	p[7] = (uint8_t)qpn;
	p[8] = 0x80;
	p[9] = (uint8_t)(psn >> 16);
	p[10] = (uint8_t)(psn >> 8);
	p[11] = (uint8_t)psn;
	p[12 + 7] = 0x10;		/* VA 0x10 */
	p[12 + 11] = 0x42;		/* R_Key 0x42 */
	p[12 + 15] = 16;		/* length */
	memset(p + 28, 0x45, 16);
	put32(s, (uint32_t)n);
	put(s, p, n);
}

static void hello(struct seed *s, uint16_t port, uint8_t flags)
{
	struct shca_hs_hello h = { .version = SHCA_HS_VERSION };
	uint8_t f[SHCA_HS_FRAME_MAX];

	h.flags = flags;
	h.port = port;
	memset(h.nonce, 0x11, sizeof(h.nonce));
	put(s, f, shca_hs_hello_build(f, &h));
}

static void proof(struct seed *s)
{
	uint8_t f[SHCA_HS_FRAME_MAX], n[SHCA_HS_NONCE] = { 0 },
		m[SHCA_HS_MAC] = { 0 };

	put(s, f, shca_hs_proof_build(f, n, m));
}

static void welcome(struct seed *s)
{
	uint8_t f[SHCA_HS_FRAME_MAX], m[SHCA_HS_MAC] = { 0 };

	put(s, f, shca_hs_welcome_build(f, m));
}

static size_t make_seed(unsigned int i, uint8_t *buf, size_t cap)
{
	struct seed s = { .n = 0 };
	uint8_t mode = (uint8_t)(i < 8 ? 0 : i < 12 ? 1 : i < 20 ? 2 : 3);
	uint16_t port = 24001;
	uint32_t qpn = (1u << 14) | 2;	/* slot 1, index 2 */

	put(&s, &mode, 1);
	switch (i) {
	/* mode 0: a new connection */
	case 0: hello(&s, port, 0); break;
	case 1: hello(&s, port, SHCA_HS_FLAG_SECRET); proof(&s); break;
	case 2: ib_frame(&s, 0x0a, qpn, 0); break;
	case 3: hello(&s, port, 0); ib_frame(&s, 0x0c, qpn, 5); break;
	case 4: welcome(&s); break;
	case 5: put32(&s, SHCA_HS_CTL | 7u << 16 | 3); break;
	case 6: put32(&s, SHCA_HS_CTL | SHCA_HS_HELLO << 16 | 4); break;
	case 7: hello(&s, 1, 0); hello(&s, port, 0); break;
	/* mode 1: after our HELLO, before PROOF */
	case 8: proof(&s); ib_frame(&s, 0x0a, qpn, 0); break;
	case 9: ib_frame(&s, 0x0a, qpn, 0); break;
	case 10: hello(&s, port, 0); break;
	case 11: welcome(&s); break;
	/* mode 2: proven as ourselves */
	case 12: ib_frame(&s, 0x0a, qpn, 0); break;
	case 13: ib_frame(&s, 0x0c, qpn, 0); ib_frame(&s, 0x0c, qpn, 1);
		 break;
	case 14: proof(&s); ib_frame(&s, 0x0a, qpn, 0); break;
	case 15: hello(&s, port, 0); break;
	case 16: welcome(&s); break;
	case 17: put32(&s, 4); put32(&s, 0x53480000u | port); break;
	case 18: put32(&s, 0x7fffffff); break;
	case 19: ib_frame(&s, 0x0a, 0xffffff, 0); break;
	/* mode 3: datagrams */
	case 20: {
		struct shca_hs_challenge c = { .version = SHCA_HS_VERSION };
		uint8_t d[SHCA_HS_CHALLENGE_LEN];

		c.acc_port = port;
		c.src_port = 40000;
		put(&s, d, shca_hs_challenge_build(d, &c));
		break;
	}
	case 21: ib_frame(&s, 0x0a, qpn, 0); memmove(s.b + 1, s.b + 5, s.n - 5);
		 s.n -= 4; break;
	case 22: put(&s, "SHCH", 4); break;
	default:
		return 0;
	}
	if (s.n > cap)
		return 0;
	memcpy(buf, s.b, s.n);
	return s.n;
}

static int write_seeds(const char *dir)
{
	uint8_t buf[SEED_CAP];
	unsigned int i, written = 0;
	char path[4096];
	size_t n;
	FILE *f;

	if (mkdir(dir, 0755) && errno != EEXIST) {
		perror(dir);
		return 1;
	}
	for (i = 0; i < MAX_SEEDS; i++) {
		n = make_seed(i, buf, sizeof(buf));
		if (!n)
			continue;
		snprintf(path, sizeof(path), "%s/seed-hs-%02u", dir, i);
		f = fopen(path, "wb");
		if (!f || fwrite(buf, 1, n, f) != n || fclose(f)) {
			perror(path);
			return 1;
		}
		written++;
	}
	printf("fuzz_net_hs_seeds: %u seeds in %s\n", written, dir);
	return 0;
}

static int replay_seeds(void)
{
	uint8_t buf[SEED_CAP];
	unsigned int i, seeds = 0;
	unsigned long runs = 0;
	size_t n, k;

	LLVMFuzzerInitialize(NULL, NULL);
	for (i = 0; i < MAX_SEEDS; i++) {
		n = make_seed(i, buf, sizeof(buf));
		if (!n)
			continue;
		seeds++;
		for (k = 1; k <= n; k++, runs++)
			LLVMFuzzerTestOneInput(buf, k);
	}
	printf("fuzz_net_hs_seeds: %u seeds, %lu runs, no failure\n", seeds,
	       runs);
	return 0;
}

static int replay_files(int argc, char **argv)
{
	static uint8_t buf[1 << 16];
	size_t n;
	FILE *f;
	int i;

	LLVMFuzzerInitialize(NULL, NULL);
	for (i = 0; i < argc; i++) {
		f = fopen(argv[i], "rb");
		if (!f) {
			perror(argv[i]);
			return 1;
		}
		n = fread(buf, 1, sizeof(buf), f);
		fclose(f);
		LLVMFuzzerTestOneInput(buf, n);
		printf("%s: ok\n", argv[i]);
	}
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "write"))
		return write_seeds(argv[2]);
	if (argc == 2 && !strcmp(argv[1], "replay"))
		return replay_seeds();
	if (argc > 2 && !strcmp(argv[1], "replay"))
		return replay_files(argc - 2, argv + 2);
	fprintf(stderr, "usage: %s write DIR | replay [FILE...]\n", argv[0]);
	return 2;
}
