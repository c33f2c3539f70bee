// SPDX-License-Identifier: MIT
/*
 * How often a long message on the net path asks for an ACK (IBA 9.2: the
 * BTH's AckReq bit; net/transport.c ack_every): every 64 packets, or
 * every 256 KiB of payload where the path MTU is smaller than 4096 but
 * every 256 packets at most, and with its last packet: four times in a
 * 1 MiB WRITE at path MTU 1024 and 4096, sixteen at 256.
 * Each ACK is a sendmsg for the responder and each packet that asks for
 * one ends a placement, so asking every 64 packets at MTU 1024 (16 a MiB)
 * cost a bulk WRITE's responder a fifth of its time.
 *
 * Counted in the requester's SOFTHCA_PCAP trace (tests/traffic/
 * pcap_read.h, nothing of softhca's codec): the distinct PSNs of its RDMA
 * WRITE packets with AckReq set, so that a packet sent again counts once.
 * Both ends use the path MTU under test; each WRITE is read back.
 * The ACK timeout is ~1 s (timeout 18), not ep.c's 67 ms: a TSan build
 * that writes a trace record per packet, on two busy cores, took longer
 * than 67 ms for 256 packets now and then, and each expiry sends the
 * head again whole (transport.c probe_head), 4096 packets at MTU 256,
 * which put the READ behind it past its retries (CI: RETRY_EXC_ERR, 5 in
 * 8 runs beside two busy loops, none in 10 with timeout 18).  What is
 * counted here is which packets ask, not when the timer fires.
 *
 *   ackreq_per_mib_mtu_256    1 MiB WRITEs at path MTU 256: 16 a WRITE
 *                             (every 256 packets)
 *   ackreq_per_mib_mtu_1024   ... at 1024: 4 (every 256 packets)
 *   ackreq_per_mib_mtu_4096   ... at 4096: 4 (every 64 packets)
 */
#include <unistd.h>

#include "harness.h"
#include "ep.h"
#include "pcap_read.h"

#define LEN	(1024 * 1024)
#define WRITES	2

/* the RC RDMA WRITE opcodes (IBA 9.2.1): FIRST .. ONLY_WITH_IMMEDIATE */
#define OP_WRITE_FIRST	0x06
#define OP_WRITE_ONLY_IMM 0x0b

/* Connect e with both ends at path MTU mtu (the other end does the same). */
static void open_at(struct ep *e, int fd, enum ibv_mtu mtu, size_t buf_size)
{
	struct ep_opts o;

	ep_default_opts(&o, IBV_QPT_RC);
	o.buf_size = buf_size;
	o.mtu = mtu;
	o.timeout = 18;		/* ~1 s: see the top of the file */
	ep_open_remote(e, &o, fd);
}

/* The responder: its MTU from the parent, then it waits for 'x'. */
static void responder(int fd, void *arg)
{
	struct ep b;

	open_at(&b, fd, *(enum ibv_mtu *)arg, LEN);
	duo_signal(fd, 'r');
	duo_expect(fd, 'x');
	ep_destroy(&b);
}

struct ackreqs {
	uint32_t dqpn;
	uint32_t n;
	uint32_t psn[512];
};

static void count_ackreq(const uint8_t *ib, uint32_t len, void *arg)
{
	struct ackreqs *a = arg;
	uint32_t psn, i;

	ASSERT_GE(len, 12);
	if (pcap_bth_dqpn(ib) != a->dqpn ||
	    pcap_bth_opcode(ib) < OP_WRITE_FIRST ||
	    pcap_bth_opcode(ib) > OP_WRITE_ONLY_IMM || !(ib[8] & 0x80))
		return;
	psn = pcap_bth_psn(ib);
	for (i = 0; i < a->n; i++)
		if (a->psn[i] == psn)
			return;		/* sent again */
	ASSERT_LT(a->n, 512);
	a->psn[a->n++] = psn;
}

static void ackreq_case(enum ibv_mtu mtu, uint32_t per_write)
{
	char tmpl[256], path[300];
	struct ackreqs a = { 0 };
	struct duo d;
	struct ep e;
	uint32_t i;
	int64_t diff;

	snprintf(tmpl, sizeof(tmpl), "%s/softhca-ackreq-%d-%%p.pcap",
		 getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", (int)getpid());
	ASSERT_EQ(setenv("SOFTHCA_NET", "1", 1), 0);
	ASSERT_EQ(setenv("SOFTHCA_PCAP", tmpl, 1), 0);
	duo_fork(&d, responder, &mtu);
	open_at(&e, d.fd, mtu, 2 * LEN);
	duo_expect(d.fd, 'r');
	for (i = 0; i < WRITES; i++) {
		ep_fill_pattern(e.buf, LEN, 30 + i, 0);
		ASSERT_EQ(ep_post(&e, i, IBV_WR_RDMA_WRITE, 0, LEN, 0, 0), 0);
		ep_expect(e.scq, e.qp, i, IBV_WC_SUCCESS);
		memset(e.buf + LEN, 0, LEN);
		ASSERT_EQ(ep_post(&e, i, IBV_WR_RDMA_READ, LEN, LEN, 0, 0), 0);
		ep_expect(e.scq, e.qp, i, IBV_WC_SUCCESS);
		diff = ep_find_pattern_diff(e.buf + LEN, LEN, 30 + i, 0);
		if (diff >= 0)
			harness_fail(__FILE__, __LINE__, "WRITE %u: byte %lld",
				     i, (long long)diff);
	}
	ep_net_check();
	a.dqpn = e.peer.qpn;
	duo_signal(d.fd, 'x');
	duo_wait(&d);
	ep_destroy(&e);
	unsetenv("SOFTHCA_PCAP");
	/* each record is written as its packet is queued */
	pcap_name(tmpl, getpid(), path, sizeof(path));
	pcap_each(path, count_ackreq, &a);
	unlink(path);
	pcap_name(tmpl, d.pid, path, sizeof(path));
	unlink(path);
	printf("  path MTU %u: %u packets of %u WRITEs of 1 MiB asked for "
	       "an ACK\n", 128u << mtu, a.n, WRITES);
	ASSERT_EQ(a.n, per_write * WRITES);
}

TEST(ackreq_per_mib_mtu_256)
{
	ackreq_case(IBV_MTU_256, 16);
}

TEST(ackreq_per_mib_mtu_1024)
{
	ackreq_case(IBV_MTU_1024, 4);
}

TEST(ackreq_per_mib_mtu_4096)
{
	ackreq_case(IBV_MTU_4096, 4);
}
