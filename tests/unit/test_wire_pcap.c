// SPDX-License-Identifier: MIT
/*
 * The pcap writer (src/wire/pcap.c): file and record layout read back
 * byte by byte, the size bound, concurrent writers, and, when tshark is
 * installed, Wireshark's InfiniBand dissector on one frame of every
 * opcode (plus every AETH syndrome class): the right opcode and extension
 * headers, no malformed packet, no error, good IP and UDP checksums.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "wire/pcap.h"
#include "wire/wire.h"

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

static const uint8_t gid4_a[16] = { [10] = 0xff, [11] = 0xff, 10, 0, 0, 1 };
static const uint8_t gid4_b[16] = { [10] = 0xff, [11] = 0xff, 10, 0, 0, 2 };
static const uint8_t gid6_a[16] = { 0xfd, 0x53, 0x48, 0x43, [15] = 1 };
static const uint8_t gid6_b[16] = { 0xfd, 0x53, 0x48, 0x43, [15] = 2 };

static char tmp_path[256];

static const char *tmp_file(const char *tag)
{
	const char *dir = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";

	snprintf(tmp_path, sizeof(tmp_path), "%s/shca-%s-%d.pcap", dir, tag,
		 (int)getpid());
	return tmp_path;
}

static uint8_t *read_file(const char *path, size_t *len)
{
	struct stat st;
	uint8_t *buf;
	int fd;

	fd = open(path, O_RDONLY);
	ASSERT_GE(fd, 0);
	ASSERT_EQ(fstat(fd, &st), 0);
	buf = malloc((size_t)st.st_size + 1);
	ASSERT_NOT_NULL(buf);
	ASSERT_EQ(read(fd, buf, (size_t)st.st_size), st.st_size);
	close(fd);
	*len = (size_t)st.st_size;
	return buf;
}

static uint32_t get32(const uint8_t *p)	/* pcap fields: host order */
{
	uint32_t v;

	memcpy(&v, p, 4);
	return v;
}

static uint16_t get16(const uint8_t *p)
{
	uint16_t v;

	memcpy(&v, p, 2);
	return v;
}

/* Printable text: no dissector takes it for a protocol of its own. */
static char text[SHCA_WIRE_MAX_PMTU];
static pthread_once_t text_once = PTHREAD_ONCE_INIT;

static void fill_text(void)
{
	size_t i;

	for (i = 0; i < sizeof(text); i++)
		text[i] = "softhca payload "[i % 16];
}

/* One packet of opcode opc with a text payload of len bytes. */
static size_t make_packet(uint8_t *buf, size_t cap, uint8_t opc,
			  uint32_t len, uint8_t syndrome)
{
	const struct shca_wire_opinfo *op = shca_wire_op(opc);
	struct shca_wire_msg m;
	ssize_t n;

	pthread_once(&text_once, fill_text);
	memset(&m, 0, sizeof(m));
	m.opcode = opc;
	m.pkey = SHCA_PKEY_DEFAULT;
	m.dqpn = 0x000c01 + opc;	/* not QP0/QP1: no MADs */
	m.psn = 0xfffff0 + (opc & 0xf);
	m.ackreq = op->mask & SHCA_OPM_NEEDS_ACK;
	m.se = op->mask & SHCA_OPM_COMP;
	m.va = 0x00007f1234560000ull;
	m.rkey = 0x00abcd01;
	m.dma_len = op->mask & SHCA_OPM_READ_REQ ? 8192 : len;
	m.swap_add = 1;
	m.compare = 0x10;
	m.syndrome = syndrome;
	m.msn = 0x000123;
	m.orig = 0x10;
	m.imm_be = 0x04030201;
	m.inv_rkey = 0x00abcd02;
	m.qkey = 0x11111111;
	m.sqpn = 0x000c00;
	if (op->mask & SHCA_OPM_PAYLOAD) {
		m.payload = text;
		m.payload_len = len;
	}
	n = shca_wire_build(buf, cap, &m);
	ASSERT_GT(n, 0);
	return (size_t)n;
}

TEST(pcap_file_layout)
{
	const char *path = tmp_file("layout");
	const struct timespec ts = { 1700000000, 123456789 };
	struct shca_pcap *pcap;
	uint8_t pkt[64];
	uint8_t *f;
	size_t n4, n6, len, off;

	ASSERT_EQ(shca_pcap_open(path, 0, &pcap), 0);
	n4 = make_packet(pkt, sizeof(pkt), SHCA_OP_RC_SEND_ONLY, 5, 0);
	ASSERT_EQ(shca_pcap_write(pcap, gid4_a, gid4_b, pkt, n4, &ts), 0);
	n6 = make_packet(pkt, sizeof(pkt), SHCA_OP_RC_ACKNOWLEDGE, 0, 0x1f);
	ASSERT_EQ(shca_pcap_write(pcap, gid6_a, gid6_b, pkt, n6, NULL), 0);
	ASSERT_EQ(shca_pcap_written(pcap), 2);
	ASSERT_EQ(shca_pcap_dropped(pcap), 0);
	ASSERT_EQ(shca_pcap_close(pcap), 0);

	f = read_file(path, &len);
	unlink(path);
	/* file header: nanosecond magic, 2.4, link type Ethernet */
	ASSERT_EQ(len, 24 + (16 + 14 + 28 + n4 + 4) + (16 + 14 + 48 + n6 + 4));
	ASSERT_U64_EQ(get32(f), 0xa1b23c4d);
	ASSERT_EQ(get16(f + 4), 2);
	ASSERT_EQ(get16(f + 6), 4);
	ASSERT_GE(get32(f + 16), 65535);
	ASSERT_EQ(get32(f + 20), 1);

	/* record 1: timestamp as given, IPv4 frame */
	off = 24;
	ASSERT_EQ(get32(f + off), 1700000000);
	ASSERT_EQ(get32(f + off + 4), 123456789);
	ASSERT_EQ(get32(f + off + 8), 14 + 28 + n4 + 4);
	ASSERT_EQ(get32(f + off + 12), 14 + 28 + n4 + 4);
	off += 16;
	ASSERT(!memcmp(f + off, "\x02\x00\x0a\x00\x00\x02", 6));  /* dst */
	ASSERT(!memcmp(f + off + 6, "\x02\x00\x0a\x00\x00\x01", 6));
	ASSERT(!memcmp(f + off + 12, "\x08\x00", 2));
	ASSERT_EQ(f[off + 14], 0x45);
	ASSERT(!memcmp(f + off + 14 + 12, gid4_a + 12, 4));
	ASSERT(!memcmp(f + off + 14 + 16, gid4_b + 12, 4));
	ASSERT(!memcmp(f + off + 14 + 22, "\x12\xb7", 2));	/* 4791 */
	ASSERT_EQ(f[off + 14 + 28], SHCA_OP_RC_SEND_ONLY);
	ASSERT(shca_wire_icrc_ok(f + off + 14, 28, f + off + 42, n4 + 4));
	off += 14 + 28 + n4 + 4;

	/* record 2: now-ish timestamp, IPv6 frame */
	ASSERT_GT(get32(f + off), 1700000000);
	off += 16;
	ASSERT(!memcmp(f + off + 12, "\x86\xdd", 2));
	ASSERT_EQ(f[off + 14] >> 4, 6);
	ASSERT(!memcmp(f + off + 14 + 8, gid6_a, 16));
	ASSERT(!memcmp(f + off + 14 + 24, gid6_b, 16));
	ASSERT_EQ(f[off + 14 + 48], SHCA_OP_RC_ACKNOWLEDGE);
	ASSERT(shca_wire_icrc_ok(f + off + 14, 48, f + off + 62, n6 + 4));
	free(f);
}

TEST(pcap_bounded)
{
	const char *path = tmp_file("bounded");
	struct shca_pcap *pcap;
	uint8_t pkt[64];
	size_t n, rec, len;
	int i, ok = 0, full = 0;
	uint8_t *f;

	n = make_packet(pkt, sizeof(pkt), SHCA_OP_UC_SEND_ONLY, 16, 0);
	rec = 16 + 14 + 28 + n + 4;
	ASSERT_EQ(shca_pcap_open(path, 24 + 3 * rec + rec / 2, &pcap), 0);
	for (i = 0; i < 10; i++) {
		int r = shca_pcap_write(pcap, gid4_a, gid4_b, pkt, n, NULL);

		if (r == 0)
			ok++;
		else if (r == -EFBIG)
			full++;
		else
			ASSERT_EQ(r, 0);
	}
	ASSERT_EQ(ok, 3);
	ASSERT_EQ(full, 7);
	ASSERT_EQ(shca_pcap_written(pcap), 3);
	ASSERT_EQ(shca_pcap_dropped(pcap), 7);
	ASSERT_EQ(shca_pcap_close(pcap), 0);
	f = read_file(path, &len);
	unlink(path);
	ASSERT_EQ(len, 24 + 3 * rec);
	free(f);
}

TEST(pcap_rejects)
{
	struct shca_pcap *pcap = NULL;
	static uint8_t big[70000];

	ASSERT_EQ(shca_pcap_open("/nonexistent-dir/x.pcap", 0, &pcap),
		  -ENOENT);
	ASSERT_NULL(pcap);
	ASSERT_EQ(shca_pcap_open(tmp_file("rejects"), 10, &pcap), -EINVAL);
	ASSERT_EQ(shca_pcap_open(tmp_file("rejects"), 0, &pcap), 0);
	ASSERT_EQ(shca_pcap_write(pcap, gid4_a, gid4_b, big, 11, NULL),
		  -EINVAL);
	ASSERT_EQ(shca_pcap_write(pcap, gid4_a, gid4_b, big, sizeof(big),
				  NULL),
		  -EMSGSIZE);
	ASSERT_EQ(shca_pcap_written(pcap), 0);
	ASSERT_EQ(shca_pcap_close(pcap), 0);
	ASSERT_EQ(shca_pcap_close(NULL), 0);
	unlink(tmp_path);
}

#define WRITERS 4
#define PER_WRITER 2000

static struct shca_pcap *shared_pcap;

static void *writer(void *arg)
{
	uint8_t pkt[SHCA_WIRE_MAX_PKT];
	uintptr_t id = (uintptr_t)arg;
	int i;

	for (i = 0; i < PER_WRITER; i++) {
		/* sizes differ per writer: interleaving would show */
		size_t n = make_packet(pkt, sizeof(pkt),
				       SHCA_OP_RC_SEND_FIRST + (id & 1) * 0x20,
				       (uint32_t)(id * 100 + (unsigned)i % 7),
				       0);

		shca_bth_set_psn((void *)pkt, (uint32_t)i);
		shca_bth_set_dqpn((void *)pkt, (uint32_t)id);
		if (shca_pcap_write(shared_pcap, id & 2 ? gid6_a : gid4_a,
				    id & 2 ? gid6_b : gid4_b, pkt, n, NULL))
			return (void *)1;
	}
	return NULL;
}

TEST(pcap_concurrent_writers)
{
	const char *path = tmp_file("threads");
	pthread_t th[WRITERS];
	uint32_t next_psn[WRITERS] = { 0 };
	size_t len, off, records = 0;
	void *ret;
	uint8_t *f;
	uintptr_t i;

	ASSERT_EQ(shca_pcap_open(path, 0, &shared_pcap), 0);
	for (i = 0; i < WRITERS; i++)
		ASSERT_EQ(pthread_create(&th[i], NULL, writer, (void *)i), 0);
	for (i = 0; i < WRITERS; i++) {
		ASSERT_EQ(pthread_join(th[i], &ret), 0);
		ASSERT_NULL(ret);
	}
	ASSERT_EQ(shca_pcap_written(shared_pcap), WRITERS * PER_WRITER);
	ASSERT_EQ(shca_pcap_close(shared_pcap), 0);

	/* Every record whole, each writer's packets in its order. */
	f = read_file(path, &len);
	unlink(path);
	for (off = 24; off < len; records++) {
		uint32_t incl = get32(f + off + 8);
		const uint8_t *eth = f + off + 16;
		size_t nh = eth[12] == 0x08 ? 28 : 48;
		const uint8_t *ib = eth + 14 + nh;
		struct shca_wire_msg p;
		size_t ib_len = incl - 14 - nh - 4;

		ASSERT_LE(off + 16 + incl, len);
		ASSERT(shca_wire_icrc_ok(eth + 14, nh, ib, ib_len + 4));
		ASSERT_EQ(shca_wire_parse(ib, ib_len, &p), 0);
		ASSERT_LT(p.dqpn, WRITERS);
		ASSERT_EQ(p.psn, next_psn[p.dqpn]);
		ASSERT_EQ(p.payload_len, p.dqpn * 100 + p.psn % 7);
		next_psn[p.dqpn]++;
		off += 16 + incl;
	}
	ASSERT_EQ(off, len);
	ASSERT_EQ(records, WRITERS * PER_WRITER);
	free(f);
}

/* tshark ------------------------------------------------------------------ */

static bool in_path(const char *prog)
{
	const char *path = getenv("PATH");
	char buf[512];

	while (path && *path) {
		size_t n = strcspn(path, ":");

		snprintf(buf, sizeof(buf), "%.*s/%s", (int)n, path, prog);
		if (!access(buf, X_OK))
			return true;
		path += n + (path[n] == ':');
	}
	return false;
}

/* Run cmd, return its whole stdout (NUL-terminated). */
static char *run(const char *cmd, int *status)
{
	size_t cap = 1 << 20, len = 0, r;
	char *out = malloc(cap);
	FILE *p;

	ASSERT_NOT_NULL(out);
	p = popen(cmd, "r");
	ASSERT_NOT_NULL(p);
	while ((r = fread(out + len, 1, cap - len - 1, p)) > 0) {
		len += r;
		if (len + 1 == cap) {
			cap *= 2;
			out = realloc(out, cap);
			ASSERT_NOT_NULL(out);
		}
	}
	out[len] = 0;
	*status = pclose(p);
	return out;
}

struct frame_case {
	uint8_t opcode;
	uint32_t len;		/* payload */
	uint8_t syndrome;	/* AETH */
	const char *ws_name;	/* Wireshark's "Opcode:" line */
	const char *ws_extra;	/* another line Wireshark must print */
};

/* What Wireshark prints for each extension header. */
static const struct {
	uint32_t mask;
	const char *title;
} ws_headers[] = {
	{ SHCA_OPM_DETH, "DETH - Datagram Extended Transport Header" },
	{ SHCA_OPM_RETH, "RETH - RDMA Extended Transport Header" },
	{ SHCA_OPM_ATMETH, "AtomicETH - Atomic Extended Transport Header" },
	{ SHCA_OPM_AETH, "AETH - ACK Extended Transport Header" },
	{ SHCA_OPM_ATMACK, "ATOMICACKETH - Atomic ACK Extended Transport" },
	{ SHCA_OPM_IMMDT, "IMMDT - Immediate Data Extended Transport" },
	{ SHCA_OPM_IETH, "IETH - Invalidate Extended Transport Header" },
};

#define RC "Reliable Connection (RC) - "
#define UC "Unreliable Connection (UC) - "
#define UD "Unreliable Datagram (UD) - "
#define ACK 0x1f	/* ACK, no credits */

/*
 * One frame of every opcode, every AETH syndrome class, IPv4 and IPv6 in
 * turn.  RC SEND ONLY/LAST payloads are 16 bytes or more, UD ones at least
 * one: see pcap_tshark_short_payloads for why.
 */
static const struct frame_case cases[] = {
	{ 0x00, 1024, 0, RC "SEND First (0)", NULL },
	{ 0x01, 1024, 0, RC "SEND Middle (1)", NULL },
	{ 0x02, 17, 0, RC "SEND Last (2)", NULL },
	{ 0x03, 7, 0, RC "SEND Last with Immediate (3)", NULL },
	{ 0x04, 16, 0, RC "SEND Only (4)", NULL },
	{ 0x04, 4096, 0, RC "SEND Only (4)", NULL },
	{ 0x05, 33, 0, RC "SEND Only with Immediate (5)", NULL },
	{ 0x06, 256, 0, RC "RDMA WRITE First (6)", NULL },
	{ 0x07, 256, 0, RC "RDMA WRITE Middle (7)", NULL },
	{ 0x08, 3, 0, RC "RDMA WRITE Last (8)", NULL },
	{ 0x09, 3, 0, RC "RDMA WRITE Last with Immediate (9)", NULL },
	{ 0x0a, 64, 0, RC "RDMA WRITE Only (10)", NULL },
	{ 0x0b, 0, 0, RC "RDMA WRITE Only with Immediate (11)", NULL },
	{ 0x0c, 0, 0, RC "RDMA READ Request (12)", "DMA Length: 8192" },
	{ 0x0d, 512, ACK, RC "RDMA READ response First (13)", NULL },
	{ 0x0e, 512, 0, RC "RDMA READ response Middle (14)", NULL },
	{ 0x0f, 2, ACK, RC "RDMA READ response Last (15)", NULL },
	{ 0x10, 9, ACK, RC "RDMA READ response Only (16)", NULL },
	{ 0x11, 0, ACK, RC "Acknowledge (17)", "Ack (0)" },
	{ 0x11, 0, 0x2e, RC "Acknowledge (17)", "RNR Nak (1)" },
	{ 0x11, 0, 0x60, RC "Acknowledge (17)", "PSN Sequence Error (0)" },
	{ 0x11, 0, 0x61, RC "Acknowledge (17)", "Invalid Request (1)" },
	{ 0x11, 0, 0x62, RC "Acknowledge (17)", "Remote Access Error (2)" },
	{ 0x11, 0, 0x63, RC "Acknowledge (17)",
	  "Remote Operational Error (3)" },
	{ 0x11, 0, 0x64, RC "Acknowledge (17)", "Invalid RD Request (4)" },
	{ 0x12, 0, ACK, RC "ATOMIC Acknowledge (18)", NULL },
	{ 0x13, 0, 0, RC "CmpSwap (19)", "Compare Data: 16" },
	{ 0x14, 0, 0, RC "FetchAdd (20)", "Swap (Or Add) Data: 1" },
	{ 0x16, 21, 0, RC "SEND Last with Invalidate (22)", NULL },
	{ 0x17, 24, 0, RC "SEND Only with Invalidate (23)", NULL },
	{ 0x20, 256, 0, UC "SEND First (32)", NULL },
	{ 0x21, 256, 0, UC "SEND Middle (33)", NULL },
	{ 0x22, 1, 0, UC "SEND Last (34)", NULL },
	{ 0x23, 1, 0, UC "SEND Last with Immediate (35)", NULL },
	{ 0x24, 100, 0, UC "SEND Only (36)", NULL },
	{ 0x25, 100, 0, UC "SEND Only with Immediate (37)", NULL },
	{ 0x26, 256, 0, UC "RDMA WRITE First (38)", NULL },
	{ 0x27, 256, 0, UC "RDMA WRITE Middle (39)", NULL },
	{ 0x28, 5, 0, UC "RDMA WRITE Last (40)", NULL },
	{ 0x29, 5, 0, UC "RDMA WRITE Last with Immediate (41)", NULL },
	{ 0x2a, 5, 0, UC "RDMA WRITE Only (42)", NULL },
	{ 0x2b, 5, 0, UC "RDMA WRITE Only with Immediate (43)", NULL },
	{ 0x64, 1, 0, UD "SEND only (100)", "Source Queue Pair: 0x00000c00" },
	{ 0x64, 1000, 0, UD "SEND only (100)", NULL },
	{ 0x65, 13, 0, UD "SEND only with Immediate (101)", NULL },
};

/* The text of frame number n (1-based) in tshark -V output, or NULL. */
static char *frame_text(char *out, unsigned int n)
{
	char head[32], *start, *end;

	snprintf(head, sizeof(head), "Frame %u: ", n);
	start = strstr(out, head);
	if (!start)
		return NULL;
	snprintf(head, sizeof(head), "\nFrame %u: ", n + 1);
	end = strstr(start, head);
	if (end)
		*end = 0;
	return start;
}

/*
 * Payload heuristics of Wireshark 4.0 that throw on short payloads: the
 * RPC-over-RDMA one reads 16 bytes of any RC SEND ONLY/LAST payload before
 * it checks the length (packet_is_rpcordma(): tvb_get_ntohl(tvb, 12), then
 * "if (len < MIN_RPCRDMA_HDR_SZ)"), the Mellanox EoIB one reads an empty
 * UD payload.  They end the dissection of such a frame with "[Malformed
 * Packet: RPCoRDMA]" or "[Malformed Packet: Mellanox EoIB]" after the
 * transport headers, which are fine.
 */
static const char *const ws_payload_heuristics[] = {
	"[Malformed Packet: RPCoRDMA]",
	"[Malformed Packet: Mellanox EoIB]",
};

/* The only errors in frame text fr come from those heuristics. */
static bool only_heuristic_errors(const char *fr)
{
	const char *p = fr;
	unsigned int j;
	int errors = 0, explained = 0;

	while ((p = strstr(p, "Expert Info (Error"))) {
		errors++;
		p++;
	}
	for (j = 0; j < ARRAY_LEN(ws_payload_heuristics); j++)
		if (strstr(fr, ws_payload_heuristics[j]))
			explained++;
	return errors == explained && !strstr(fr, "Checksum Status: Bad") &&
	       !strstr(fr, "Expert Info (Warning");
}

/*
 * Write the frames of cases[] to a trace and check what tshark -V makes of
 * them.  allow_heuristics: frames may end in one of the payload heuristic
 * errors above (then the headers before it are still checked).
 */
static void tshark_check(const struct frame_case *fc, unsigned int n,
			 bool allow_heuristics)
{
	const char *path = tmp_file("tshark");
	static uint8_t pkt[SHCA_WIRE_MAX_PKT];
	struct shca_pcap *pcap;
	char cmd[512], *out, *copy, *fr;
	unsigned int i, j, heuristic_errors = 0;
	int status;

	/* README: "tshark -V decodes the traces"; scripts/install-deps.sh
	 * installs it, so CI has it (a skip only where it is missing) */
	if (!in_path("tshark"))
		SKIP_ENV("tshark not installed (Debian package tshark, "
			 "scripts/install-deps.sh)");

	ASSERT_EQ(shca_pcap_open(path, 0, &pcap), 0);
	for (i = 0; i < n; i++) {
		size_t len = make_packet(pkt, sizeof(pkt), fc[i].opcode,
					 fc[i].len, fc[i].syndrome);
		bool v6 = i & 1;

		ASSERT_EQ(shca_pcap_write(pcap, v6 ? gid6_a : gid4_a,
					  v6 ? gid6_b : gid4_b, pkt, len, NULL),
			  0);
	}
	ASSERT_EQ(shca_pcap_close(pcap), 0);

	/* Verify IP and UDP checksums too; the InfiniBand dissector sits on
	 * UDP port 4791 by default. */
	snprintf(cmd, sizeof(cmd),
		 "tshark -n -r '%s' -V -o ip.check_checksum:TRUE "
		 "-o udp.check_checksum:TRUE 2>&1",
		 path);
	out = run(cmd, &status);
	unlink(path);
	if (status) {
		fprintf(stderr, "%s\n", out);
		ASSERT_EQ(status, 0);
	}

	copy = strdup(out);
	ASSERT_NOT_NULL(copy);
	for (i = 0; i < n; i++) {
		const struct shca_wire_opinfo *op = shca_wire_op(fc[i].opcode);
		bool cut_short = false;

		strcpy(copy, out);
		fr = frame_text(copy, i + 1);
		if (!fr)
			harness_fail(__FILE__, __LINE__, "frame %u missing",
				     i + 1);
#define NEED(s)                                                             \
	do {                                                                \
		if (!strstr(fr, s)) {                                       \
			fprintf(stderr, "%s\n", fr);                        \
			harness_fail(__FILE__, __LINE__,                    \
				     "frame %u (%s): no \"%s\"", i + 1,     \
				     op->name, s);                          \
		}                                                           \
	} while (0)
		if (strstr(fr, "Malformed") || strstr(fr, "Expert Info (Err") ||
		    strstr(fr, "Expert Info (Warn") ||
		    strstr(fr, "Checksum Status: Bad")) {
			if (!allow_heuristics || !only_heuristic_errors(fr)) {
				fprintf(stderr, "%s\n", fr);
				harness_fail(__FILE__, __LINE__,
					     "frame %u (%s): tshark reports an "
					     "error",
					     i + 1, op->name);
			}
			cut_short = true;
			heuristic_errors++;
		}
		NEED("\nInfiniBand\n");
		NEED("Base Transport Header");
		NEED("Opcode: ");
		NEED(fc[i].ws_name);
		NEED("Destination Port: 4791");
		NEED("Header Version: 0");
		if (fc[i].ws_extra)
			NEED(fc[i].ws_extra);
		for (j = 0; j < ARRAY_LEN(ws_headers); j++) {
			bool has = strstr(fr, ws_headers[j].title);

			if (has != !!(op->mask & ws_headers[j].mask))
				harness_fail(__FILE__, __LINE__,
					     "frame %u (%s): \"%s\" %s", i + 1,
					     op->name, ws_headers[j].title,
					     has ? "unexpected" : "missing");
		}
		if (!cut_short) {
			NEED("Invariant CRC: ");
			if (fc[i].len) {
				char want[32];

				snprintf(want, sizeof(want),
					 "Data (%u bytes)",
					 fc[i].len + shca_wire_pad(fc[i].len));
				NEED(want);
			}
		}
#undef NEED
	}
	ASSERT_NULL(frame_text(out, n + 1));
	printf("  tshark decoded %u frames as InfiniBand", n);
	if (heuristic_errors)
		printf(", %u cut short by Wireshark payload heuristics",
		       heuristic_errors);
	printf("\n");
	if (!allow_heuristics)
		ASSERT_EQ(heuristic_errors, 0);
	free(copy);
	free(out);
}

TEST(pcap_tshark_decodes_every_opcode)
{
	tshark_check(cases, ARRAY_LEN(cases), false);
}

/*
 * FLUSH (0x1c: FETH, RETH) and ATOMIC WRITE (0x1d: RETH, 8 bytes) of IBA
 * Annex A19.  Debian 12's Wireshark (4.0) has no names for them: it
 * prints the BTH, "Unknown (28)", and the rest as vendor data.  Its BTH
 * must be whole and right, and the rest must be the headers softhca
 * built, byte for byte (a later Wireshark that names them: its name).
 */
TEST(pcap_tshark_annex_a19_opcodes)
{
	static const struct {
		uint8_t opcode;
		const char *unknown, *named, *rest;
	} fc[] = {
		/* FETH: PLT 1 (global), SEL 1 (region); RETH */
		{ SHCA_OP_RC_FLUSH, "Opcode: Unknown (28)", "FLUSH (28)",
		  "00000011" "00007f1234560000" "00abcd01" "00000040" },
		/* RETH of 8 bytes, the 8 bytes */
		{ SHCA_OP_RC_ATOMIC_WRITE, "Opcode: Unknown (29)",
		  "ATOMIC WRITE (29)",
		  "00007f1234560000" "00abcd01" "00000008"
		  "0102030405060708" },
	};
	const uint8_t bytes[8] = { 1, 2, 3, 4, 5, 6, 7, 8 };
	const char *path = tmp_file("a19");
	static uint8_t pkt[SHCA_WIRE_MAX_PKT];
	struct shca_pcap *pcap;
	struct shca_wire_msg m, back;
	char cmd[512], *out, *fr;
	unsigned int i;
	ssize_t n;
	int status;

	if (!in_path("tshark"))
		SKIP_ENV("tshark not installed (Debian package tshark, "
			 "scripts/install-deps.sh)");
	ASSERT_EQ(shca_pcap_open(path, 0, &pcap), 0);
	for (i = 0; i < ARRAY_LEN(fc); i++) {
		memset(&m, 0, sizeof(m));
		m.opcode = fc[i].opcode;
		m.pkey = SHCA_PKEY_DEFAULT;
		m.dqpn = 0x000c21;
		m.psn = 0x000100 + i;
		m.ackreq = true;
		m.va = 0x00007f1234560000ull;
		m.rkey = 0x00abcd01;
		if (fc[i].opcode == SHCA_OP_RC_FLUSH) {
			m.dma_len = 64;
			m.flush_plt = SHCA_FLUSH_PLT_GLOBAL;
			m.flush_sel = SHCA_FLUSH_SEL_MR;
		} else {
			m.dma_len = 8;
			m.payload = bytes;
			m.payload_len = 8;
		}
		n = shca_wire_build(pkt, sizeof(pkt), &m);
		ASSERT_GT(n, 0);
		/* and softhca reads back what it wrote */
		ASSERT_EQ(shca_wire_parse(pkt, (size_t)n, &back), 0);
		ASSERT_EQ(back.flush_plt, m.flush_plt);
		ASSERT_EQ(back.flush_sel, m.flush_sel);
		ASSERT_U64_EQ(back.va, m.va);
		ASSERT_EQ(back.rkey, m.rkey);
		ASSERT_EQ(back.dma_len, m.dma_len);
		ASSERT_EQ(back.payload_len, m.payload_len);
		ASSERT_EQ(shca_pcap_write(pcap, gid4_a, gid4_b, pkt, (size_t)n,
					  NULL),
			  0);
	}
	ASSERT_EQ(shca_pcap_close(pcap), 0);
	snprintf(cmd, sizeof(cmd),
		 "tshark -n -r '%s' -V -o ip.check_checksum:TRUE "
		 "-o udp.check_checksum:TRUE 2>&1",
		 path);
	out = run(cmd, &status);
	unlink(path);
	ASSERT_EQ(status, 0);
	for (i = 0; i < ARRAY_LEN(fc); i++) {
		char *copy = strdup(out);

		ASSERT_NOT_NULL(copy);
		fr = frame_text(copy, i + 1);
		ASSERT_NOT_NULL(fr);
		if (!strstr(fr, "\nInfiniBand\n") ||
		    !strstr(fr, "Header Version: 0") ||
		    !strstr(fr, "Destination Queue Pair: 0x000c21") ||
		    strstr(fr, "Checksum Status: Bad") ||
		    (!strstr(fr, fc[i].unknown) && !strstr(fr, fc[i].named)) ||
		    (strstr(fr, fc[i].unknown) && !strstr(fr, fc[i].rest))) {
			fprintf(stderr, "%s\n", fr);
			harness_fail(__FILE__, __LINE__, "frame %u", i + 1);
		}
		free(copy);
	}
	free(out);
}

/*
 * Short SEND payloads: the transport headers decode; the only complaints
 * allowed are those of Wireshark's own payload heuristics (see above).
 */
TEST(pcap_tshark_short_payloads)
{
	static struct frame_case fc[40];
	unsigned int n = 0, len;

	for (len = 0; len < 16; len++)
		fc[n++] = (struct frame_case){ 0x04, len, 0,
					       RC "SEND Only (4)", NULL };
	for (len = 1; len < 16; len += 3)
		fc[n++] = (struct frame_case){ 0x02, len, 0,
					       RC "SEND Last (2)", NULL };
	fc[n++] = (struct frame_case){ 0x17, 0, 0,
				       RC "SEND Only with Invalidate (23)",
				       NULL };
	fc[n++] = (struct frame_case){ 0x64, 0, 0, UD "SEND only (100)",
				       NULL };
	fc[n++] = (struct frame_case){ 0x65, 0, 0,
				       UD "SEND only with Immediate (101)",
				       NULL };
	fc[n++] = (struct frame_case){ 0x24, 0, 0, UC "SEND Only (36)", NULL };
	fc[n++] = (struct frame_case){ 0x0a, 0, 0, RC "RDMA WRITE Only (10)",
				       NULL };
	ASSERT_LE(n, ARRAY_LEN(fc));
	tshark_check(fc, n, true);
}
