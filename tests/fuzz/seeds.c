// SPDX-License-Identifier: MIT
/*
 * Seeds for fuzz_wire, and a driver that runs the target without
 * libFuzzer (any compiler):
 *
 *   fuzz_wire_seeds write DIR     write the seed corpus into DIR
 *   fuzz_wire_seeds replay        run every seed, each truncated at every
 *                                 length and with every single bit flipped
 *   fuzz_wire_seeds replay FILE.. run the target on files (crash repro)
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz.h"
#include "wire/wire.h"

static const uint32_t seed_lens[] = { 0, 1, 5, 256 };
#define NLENS (sizeof(seed_lens) / sizeof(seed_lens[0]))

/* A few packets every check has to refuse. */
static size_t bad_seed(unsigned int i, uint8_t *buf, size_t cap)
{
	struct shca_wire_msg m = {
		.opcode = SHCA_OP_RC_SEND_ONLY,
		.pkey = SHCA_PKEY_DEFAULT,
		.payload = "abcdefgh",
		.payload_len = 8,
	};
	ssize_t n = shca_wire_build(buf, cap, &m);

	if (n < 0)
		return 0;
	switch (i) {
	case 0:		/* reserved opcode */
		shca_bth_set_opcode((void *)buf, 0x15);
		return (size_t)n;
	case 1:		/* TVer 1 */
		shca_bth_set_tver((void *)buf, 1);
		return (size_t)n;
	case 2:		/* PadCnt beyond the payload */
		shca_bth_set_pad((void *)buf, 3);
		return SHCA_BTH_LEN;
	case 3:		/* cut inside the BTH */
		return SHCA_BTH_LEN - 1;
	default:
		return 0;
	}
}

size_t fuzz_wire_seed(unsigned int i, uint8_t *buf, size_t cap)
{
	static uint8_t payload[256];
	const struct shca_wire_opinfo *op = NULL;
	struct shca_wire_msg m;
	unsigned int opc, k = 0;
	ssize_t n;

	for (opc = 0; opc < 256; opc++) {
		op = shca_wire_op((uint8_t)opc);
		if (!op)
			continue;
		if (i < k + NLENS)
			break;
		k += NLENS;
	}
	if (opc == 256)
		return bad_seed(i - k, buf, cap);

	memset(payload, 'p', sizeof(payload));
	memset(&m, 0, sizeof(m));
	m.opcode = (uint8_t)opc;
	m.pkey = SHCA_PKEY_DEFAULT;
	m.dqpn = 0x000401;
	m.psn = 0xfffffe;
	m.ackreq = op->mask & SHCA_OPM_NEEDS_ACK;
	m.va = 0x1000;
	m.rkey = 0x1234;
	m.dma_len = 256;
	m.syndrome = shca_aeth_syn_ack(SHCA_AETH_CREDITS_INVALID);
	m.msn = 1;
	m.qkey = 0x11111111;
	m.sqpn = 0x000402;
	m.xrc_srqn = 0x00c003;	/* XRC requests (XRCETH) */
	if (op->mask & SHCA_OPM_PAYLOAD) {
		m.payload = payload;
		m.payload_len = seed_lens[i - k];
	} else if (i - k) {
		return 0;	/* one seed of an opcode without payload */
	}
	n = shca_wire_build(buf, cap, &m);
	return n > 0 ? (size_t)n : 0;
}

/* Seeds are numbered densely but some numbers are empty (skipped). */
#define MAX_SEEDS (256 * NLENS + 8)

static int write_seeds(const char *dir)
{
	static uint8_t buf[SHCA_WIRE_MAX_PKT];
	unsigned int i, written = 0;
	char path[4096];
	size_t n;
	FILE *f;

	if (mkdir(dir, 0755) && errno != EEXIST) {
		perror(dir);
		return 1;
	}
	for (i = 0; i < MAX_SEEDS; i++) {
		n = fuzz_wire_seed(i, buf, sizeof(buf));
		if (!n)
			continue;
		snprintf(path, sizeof(path), "%s/seed-%03u", dir, i);
		f = fopen(path, "wb");
		if (!f || fwrite(buf, 1, n, f) != n || fclose(f)) {
			perror(path);
			return 1;
		}
		written++;
	}
	printf("fuzz_wire_seeds: %u seeds in %s\n", written, dir);
	return 0;
}

static int replay_seeds(void)
{
	static uint8_t buf[SHCA_WIRE_MAX_PKT], mut[SHCA_WIRE_MAX_PKT];
	unsigned int i, bit, seeds = 0;
	unsigned long runs = 0;
	size_t n, len;

	for (i = 0; i < MAX_SEEDS; i++) {
		n = fuzz_wire_seed(i, buf, sizeof(buf));
		if (!n)
			continue;
		seeds++;
		for (len = 0; len <= n; len++, runs++)
			LLVMFuzzerTestOneInput(buf, len);
		for (bit = 0; bit < n * 8; bit++, runs++) {
			memcpy(mut, buf, n);
			mut[bit / 8] ^= (uint8_t)(1u << (bit % 8));
			LLVMFuzzerTestOneInput(mut, n);
		}
	}
	printf("fuzz_wire_seeds: %u seeds, %lu runs, no failure\n", seeds,
	       runs);
	return 0;
}

static int replay_files(int argc, char **argv)
{
	static uint8_t buf[1 << 20];
	size_t n;
	FILE *f;
	int i;

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
