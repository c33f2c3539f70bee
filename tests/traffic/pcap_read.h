/* SPDX-License-Identifier: MIT */
/*
 * A SOFTHCA_PCAP trace read by hand, for tests that check softhca's
 * counters against what it put on the wire: the pcap file format (global
 * header, then a 16-byte header per record), each record an Ethernet
 * frame holding IPv4 or IPv6, UDP to the RoCE v2 port 4791, the IB packet
 * (BTH .. pad) and its 4-byte ICRC.  Nothing of softhca's codec is used.
 * Header-only: included by the test files that need it.
 */
#ifndef SOFTHCA_TEST_PCAP_READ_H
#define SOFTHCA_TEST_PCAP_READ_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#define PCAP_ROCE_PORT	4791
#define PCAP_ICRC	4

static inline uint32_t pcap_be(const uint8_t *p, int n)
{
	uint32_t v = 0;

	while (n--)
		v = v << 8 | *p++;
	return v;
}

/* BTH fields (IBA 9.2) of an IB packet */
static inline uint8_t pcap_bth_opcode(const uint8_t *ib)
{
	return ib[0];
}

static inline uint32_t pcap_bth_dqpn(const uint8_t *ib)
{
	return pcap_be(ib + 5, 3);
}

static inline uint32_t pcap_bth_psn(const uint8_t *ib)
{
	return pcap_be(ib + 9, 3);
}

/*
 * Call fn(ib, len, arg) for each record of the trace at path, ib the IB
 * packet (BTH .. pad, len bytes, without the ICRC), in the order they
 * were written.  A file that is not such a trace fails the test.
 * Returns the number of records.
 */
static inline unsigned long pcap_each(const char *path,
				      void (*fn)(const uint8_t *ib,
						 uint32_t len, void *arg),
				      void *arg)
{
	uint8_t gh[24], rh[16], *f;
	unsigned long n = 0;
	FILE *fp = fopen(path, "rb");
	uint32_t magic;

	if (!fp)
		harness_fail(__FILE__, __LINE__, "%s: %s", path,
			     strerror(errno));
	ASSERT_EQ(fread(gh, 1, sizeof(gh), fp), sizeof(gh));
	memcpy(&magic, gh, 4);
	/* this host's byte order; microsecond or nanosecond stamps */
	ASSERT(magic == 0xa1b2c3d4u || magic == 0xa1b23c4du);
	ASSERT_EQ(gh[20] | gh[21] << 8, 1);	/* LINKTYPE_ETHERNET */
	f = malloc(65536);
	ASSERT_NOT_NULL(f);
	while (fread(rh, 1, sizeof(rh), fp) == sizeof(rh)) {
		uint32_t incl, orig, l3;
		uint16_t etype;

		memcpy(&incl, rh + 8, 4);
		memcpy(&orig, rh + 12, 4);
		ASSERT_EQ(incl, orig);
		ASSERT_LE(incl, 65536);
		ASSERT_EQ(fread(f, 1, incl, fp), incl);
		etype = (uint16_t)pcap_be(f + 12, 2);
		ASSERT(etype == 0x0800 || etype == 0x86dd);
		l3 = etype == 0x0800 ? 20 : 40;
		ASSERT_GE(incl, 14 + l3 + 8 + 12 + PCAP_ICRC);
		ASSERT_EQ(pcap_be(f + 14 + l3 + 2, 2), PCAP_ROCE_PORT);
		fn(f + 14 + l3 + 8, incl - 14 - l3 - 8 - PCAP_ICRC, arg);
		n++;
	}
	fclose(fp);
	free(f);
	return n;
}

/* The trace name SOFTHCA_PCAP=tmpl gives process pid ("%p": the pid). */
static inline void pcap_name(const char *tmpl, int pid, char *path,
			     size_t n)
{
	const char *p = strstr(tmpl, "%p");

	ASSERT_NOT_NULL(p);
	snprintf(path, n, "%.*s%d%s", (int)(p - tmpl), tmpl, pid, p + 2);
}

#endif
