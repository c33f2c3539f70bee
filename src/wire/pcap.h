/* SPDX-License-Identifier: MIT */
/*
 * A pcap writer (link type Ethernet) that turns each IB packet into the
 * RoCE v2 frame a NIC would send: Ethernet / IPv4 or IPv6 (from the GIDs) /
 * UDP to port 4791 / BTH ... payload pad / ICRC.  Wireshark and tshark
 * decode the result with their InfiniBand dissector.  Used for
 * SOFTHCA_PCAP=file.
 *
 * Thread-safe: any thread may write; each packet is one record, written
 * with one writev under the writer's lock, so a trace stays readable up to
 * its last whole record even if the process dies.
 */
#ifndef SOFTHCA_WIRE_PCAP_H
#define SOFTHCA_WIRE_PCAP_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

struct shca_pcap;

/*
 * Create (or truncate) path and write the file header.  max_bytes bounds
 * the file (0: unbounded): a record that would take it past the bound is
 * not written, and counted.  Returns 0 and *out, or -errno.
 */
int shca_pcap_open(const char *path, uint64_t max_bytes,
		   struct shca_pcap **out);

/*
 * Append one frame carrying the IB packet ib_pkt (BTH .. pad, len bytes,
 * without ICRC: the writer computes it) from sgid to dgid, stamped ts
 * (NULL: now).  The packet is written as it is, valid or not, so that a
 * trace also shows what a peer sent wrong; len must hold a BTH.
 * Returns 0, -EINVAL (len < BTH), -EMSGSIZE (larger than an IP datagram),
 * -EFBIG (past max_bytes: dropped), or -errno of the write.
 */
int shca_pcap_write(struct shca_pcap *pcap, const uint8_t sgid[16],
		    const uint8_t dgid[16], const void *ib_pkt, size_t len,
		    const struct timespec *ts);

/* Records written, and records dropped (file size bound, write errors). */
uint64_t shca_pcap_written(struct shca_pcap *pcap);
uint64_t shca_pcap_dropped(struct shca_pcap *pcap);

/* Close the file; returns 0 or -errno of close(). NULL is fine. */
int shca_pcap_close(struct shca_pcap *pcap);

#endif
