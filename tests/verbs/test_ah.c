// SPDX-License-Identifier: MIT
/*
 * Addressing: ibv_create_ah / ibv_destroy_ah on a RoCE v2 port,
 * ibv_init_ah_from_wc / ibv_create_ah_from_wc (rdma-core 44's reading of
 * the 40 bytes before a UD message: an IPv6 header, or an IPv4 header in
 * the last 20), and ibv_attach_mcast / ibv_detach_mcast.
 */
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/ip.h>

#include "harness.h"
#include "common.h"
#include "netenv.h"

struct env {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
};

static void env_open(struct env *e)
{
	e->ctx = open_lo();
	e->pd = ibv_alloc_pd(e->ctx);
	ASSERT_NOT_NULL(e->pd);
	e->cq = ibv_create_cq(e->ctx, 16, NULL, NULL, 0);
	ASSERT_NOT_NULL(e->cq);
}

static bool gid_zero(const union ibv_gid *g)
{
	static const union ibv_gid zero;

	return !memcmp(g, &zero, sizeof(*g));
}

/* The index of gid in the port's table, or -1. */
static int gid_index(struct ibv_context *ctx, const union ibv_gid *gid)
{
	struct ibv_port_attr pa;
	union ibv_gid g;
	int i;

	ASSERT_EQ(ibv_query_port(ctx, 1, &pa), 0);
	for (i = 0; i < pa.gid_tbl_len; i++) {
		ASSERT_EQ(ibv_query_gid(ctx, 1, i, &g), 0);
		if (!gid_zero(&g) && !memcmp(&g, gid, sizeof(g)))
			return i;
	}
	return -1;
}

static void v4_gid(union ibv_gid *g, const char *ip)
{
	memset(g, 0, sizeof(*g));
	g->raw[10] = 0xff;
	g->raw[11] = 0xff;
	ASSERT_EQ(inet_pton(AF_INET, ip, &g->raw[12]), 1);
}

static struct ibv_ah_attr good_ah(struct ibv_context *ctx)
{
	struct ibv_ah_attr a;

	memset(&a, 0, sizeof(a));
	a.is_global = 1;
	a.port_num = 1;
	a.grh.sgid_index = 0;
	a.grh.hop_limit = 64;
	ASSERT_EQ(ibv_query_gid(ctx, 1, 0, &a.grh.dgid), 0);
	ASSERT(!gid_zero(&a.grh.dgid));
	return a;
}

/* ------------------------------------------------------------------ */
/* Address handles                                                     */

TEST(create_and_destroy_ah)
{
	struct ibv_ah_attr a;
	struct ibv_ah *ah;
	struct env e;

	env_open(&e);
	a = good_ah(e.ctx);
	ah = ibv_create_ah(e.pd, &a);
	ASSERT_NOT_NULL(ah);
	ASSERT(ah->context == e.ctx);
	ASSERT(ah->pd == e.pd);
	/* the PD is in use while the AH lives */
	ASSERT_EQ(ibv_dealloc_pd(e.pd), EBUSY);
	ASSERT_EQ(ibv_destroy_ah(ah), 0);
	ASSERT_EQ(ibv_dealloc_pd(e.pd), 0);
}

TEST(create_ah_checks)
{
	struct ibv_port_attr pa;
	struct ibv_ah_attr a;
	union ibv_gid g;
	struct env e;
	int i, empty = -1;

	env_open(&e);
	ASSERT_EQ(ibv_query_port(e.ctx, 1, &pa), 0);
	ASSERT_EQ(pa.link_layer, IBV_LINK_LAYER_ETHERNET);
	/* RoCE: no AH without a GRH */
	a = good_ah(e.ctx);
	a.is_global = 0;
	ASSERT_NULL_ERRNO(ibv_create_ah(e.pd, &a), EINVAL);
	a = good_ah(e.ctx);
	a.port_num = 0;
	ASSERT_NULL_ERRNO(ibv_create_ah(e.pd, &a), EINVAL);
	a.port_num = 2;
	ASSERT_NULL_ERRNO(ibv_create_ah(e.pd, &a), EINVAL);
	/* the source GID index: past the table EINVAL, empty ENODATA */
	a = good_ah(e.ctx);
	a.grh.sgid_index = (uint8_t)pa.gid_tbl_len;
	if (pa.gid_tbl_len < 256)
		ASSERT_NULL_ERRNO(ibv_create_ah(e.pd, &a), EINVAL);
	for (i = 0; i < pa.gid_tbl_len && empty < 0; i++) {
		ASSERT_EQ(ibv_query_gid(e.ctx, 1, i, &g), 0);
		if (gid_zero(&g))
			empty = i;
	}
	if (empty < 0)
		SKIP("no empty GID entry to try");
	a.grh.sgid_index = (uint8_t)empty;
	ASSERT_NULL_ERRNO(ibv_create_ah(e.pd, &a), ENODATA);
}

/* ------------------------------------------------------------------ */
/* Address vectors from completions                                    */

static uint16_t csum(const void *p, size_t len)
{
	const uint8_t *b = p;
	uint32_t sum = 0;
	size_t i;

	for (i = 0; i < len; i += 2)
		sum += (uint32_t)(b[i] << 8 | b[i + 1]);
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return htons((uint16_t)~sum);
}

/* A RoCE v2 "GRH" for IPv4: the IPv4 header in the last 20 bytes. */
static void grh_ipv4(struct ibv_grh *grh, const char *src, const char *dst,
		     uint8_t tos, uint8_t ttl, bool good_csum)
{
	struct iphdr ip;

	memset(grh, 0, sizeof(*grh));
	memset(&ip, 0, sizeof(ip));
	ip.version = 4;
	ip.ihl = 5;
	ip.tos = tos;
	ip.tot_len = htons(60);
	ip.ttl = ttl;
	ip.protocol = IPPROTO_UDP;
	ASSERT_EQ(inet_pton(AF_INET, src, &ip.saddr), 1);
	ASSERT_EQ(inet_pton(AF_INET, dst, &ip.daddr), 1);
	ip.check = csum(&ip, sizeof(ip));
	if (!good_csum)
		ip.check ^= 0x0101;
	memcpy((uint8_t *)grh + 20, &ip, sizeof(ip));
}

static struct ibv_wc wc_with(int flags)
{
	struct ibv_wc wc;

	memset(&wc, 0, sizeof(wc));
	wc.wc_flags = flags;
	wc.slid = 0x1234;
	wc.sl = 3;
	wc.dlid_path_bits = 2;
	return wc;
}

TEST(init_ah_from_wc_ipv4)
{
	struct ibv_ah_attr ah;
	union ibv_gid local, remote;
	struct ibv_wc wc = wc_with(IBV_WC_GRH);
	struct ibv_grh grh;
	struct env e;
	int idx;

	env_open(&e);
	v4_gid(&local, "127.0.0.1");
	idx = gid_index(e.ctx, &local);
	ASSERT_GE(idx, 0);	/* softhca_lo holds lo's 127.0.0.1 */
	grh_ipv4(&grh, "10.1.2.3", "127.0.0.1", 0x28, 33, true);
	memset(&ah, 0xee, sizeof(ah));
	ASSERT_EQ(ibv_init_ah_from_wc(e.ctx, 1, &wc, &grh, &ah), 0);
	v4_gid(&remote, "10.1.2.3");
	ASSERT_EQ(ah.is_global, 1);
	ASSERT_EQ(memcmp(&ah.grh.dgid, &remote, 16), 0);
	ASSERT_EQ(ah.grh.sgid_index, idx);
	ASSERT_EQ(ah.grh.hop_limit, 33);
	ASSERT_EQ(ah.grh.traffic_class, 0x28);
	ASSERT_EQ(ah.grh.flow_label, 0);
	ASSERT_EQ(ah.dlid, 0x1234);
	ASSERT_EQ(ah.sl, 3);
	ASSERT_EQ(ah.src_path_bits, 2);
	ASSERT_EQ(ah.port_num, 1);
	ASSERT_EQ(ah.static_rate, 0);

	/* garbage in the first 20 bytes that looks like IPv6 version 6:
	 * a well-formed IPv4 header behind it still wins */
	grh.version_tclass_flow = htonl(6u << 28 | 0x12345);
	ASSERT_EQ(ibv_init_ah_from_wc(e.ctx, 1, &wc, &grh, &ah), 0);
	ASSERT_EQ(memcmp(&ah.grh.dgid, &remote, 16), 0);
	ASSERT_EQ(ah.grh.flow_label, 0x12345);	/* read regardless */

	/* a multicast destination is no GID of ours */
	grh_ipv4(&grh, "10.1.2.3", "224.0.0.9", 0, 1, true);
	ASSERT_EQ(ibv_init_ah_from_wc(e.ctx, 1, &wc, &grh, &ah), -1);
	ASSERT_EQ(errno, EINVAL);
	/* nor is an address the port does not have */
	grh_ipv4(&grh, "10.1.2.3", "10.9.9.9", 0, 1, true);
	errno = 0;
	ASSERT_EQ(ibv_init_ah_from_wc(e.ctx, 1, &wc, &grh, &ah), -1);
	ASSERT_EQ(errno, EINVAL);
}

TEST(init_ah_from_wc_ipv6)
{
	union ibv_gid local, remote;
	struct ibv_wc wc = wc_with(IBV_WC_GRH);
	struct ibv_ah_attr ah;
	struct ibv_grh grh;
	struct env e;
	int idx;

	netenv_need(NETENV_IP6_LO);
	env_open(&e);
	memset(&local, 0, sizeof(local));
	local.raw[15] = 1;		/* ::1 */
	idx = gid_index(e.ctx, &local);
	ASSERT_GE(idx, 0);	/* lo has ::1: softhca_lo has its GID */
	memset(&remote, 0, sizeof(remote));
	remote.raw[0] = 0xfd;
	remote.raw[15] = 0x42;

	memset(&grh, 0, sizeof(grh));
	grh.version_tclass_flow = htonl(6u << 28 | 0x5au << 20 | 0xabcde);
	grh.next_hdr = IPPROTO_UDP;
	grh.hop_limit = 17;
	grh.sgid = remote;
	grh.dgid = local;
	ASSERT_EQ(ibv_init_ah_from_wc(e.ctx, 1, &wc, &grh, &ah), 0);
	ASSERT_EQ(ah.is_global, 1);
	ASSERT_EQ(memcmp(&ah.grh.dgid, &remote, 16), 0);
	ASSERT_EQ(ah.grh.sgid_index, idx);
	ASSERT_EQ(ah.grh.hop_limit, 17);
	ASSERT_EQ(ah.grh.traffic_class, 0x5a);
	ASSERT_EQ(ah.grh.flow_label, 0xabcde);
	ASSERT_EQ(ah.port_num, 1);

	/* RoCE v1 (next header 0x1b): our GIDs are v2, none matches */
	grh.next_hdr = 0x1b;
	ASSERT_EQ(ibv_init_ah_from_wc(e.ctx, 1, &wc, &grh, &ah), -1);
	ASSERT_EQ(errno, EINVAL);
	grh.next_hdr = IPPROTO_TCP;
	ASSERT_EQ(ibv_init_ah_from_wc(e.ctx, 1, &wc, &grh, &ah), -1);
	ASSERT_EQ(errno, EPROTONOSUPPORT);
	/* sent to a multicast group */
	grh.next_hdr = IPPROTO_UDP;
	grh.dgid.raw[0] = 0xff;
	ASSERT_EQ(ibv_init_ah_from_wc(e.ctx, 1, &wc, &grh, &ah), -1);
	ASSERT_EQ(errno, EINVAL);
}

TEST(init_ah_from_wc_other_cases)
{
	struct ibv_wc wc = wc_with(0);
	struct ibv_ah_attr ah;
	struct ibv_grh grh;
	struct env e;

	env_open(&e);
	/* no GRH flag: a local (non-global) AV from the completion */
	memset(&grh, 0, sizeof(grh));
	grh.version_tclass_flow = htonl(0x777);
	memset(&ah, 0xee, sizeof(ah));
	ASSERT_EQ(ibv_init_ah_from_wc(e.ctx, 1, &wc, &grh, &ah), 0);
	ASSERT_EQ(ah.is_global, 0);
	ASSERT_EQ(ah.dlid, 0x1234);
	ASSERT_EQ(ah.sl, 3);
	ASSERT_EQ(ah.port_num, 1);
	ASSERT_EQ(ah.grh.flow_label, 0x777);
	ASSERT_EQ(ah.grh.sgid_index, 0);

	/* neither IPv6 nor IPv4 */
	wc.wc_flags = IBV_WC_GRH;
	memset(&grh, 0, sizeof(grh));
	errno = 0;
	ASSERT_EQ(ibv_init_ah_from_wc(e.ctx, 1, &wc, &grh, &ah), -1);
	ASSERT_EQ(errno, EPROTONOSUPPORT);
	/* version 6 and a bad IPv4 checksum: read as IPv6 */
	grh_ipv4(&grh, "10.1.2.3", "127.0.0.1", 0, 1, false);
	grh.version_tclass_flow = htonl(6u << 28);
	grh.next_hdr = 99;
	ASSERT_EQ(ibv_init_ah_from_wc(e.ctx, 1, &wc, &grh, &ah), -1);
	ASSERT_EQ(errno, EPROTONOSUPPORT);
}

TEST(create_ah_from_wc)
{
	struct ibv_wc wc = wc_with(IBV_WC_GRH);
	union ibv_gid local;
	struct ibv_grh grh;
	struct ibv_ah *ah;
	struct env e;

	env_open(&e);
	v4_gid(&local, "127.0.0.1");
	ASSERT_GE(gid_index(e.ctx, &local), 0);
	grh_ipv4(&grh, "127.0.0.1", "127.0.0.1", 0, 64, true);
	ah = ibv_create_ah_from_wc(e.pd, &wc, &grh, 1);
	ASSERT_NOT_NULL(ah);
	ASSERT(ah->pd == e.pd);
	ASSERT_EQ(ibv_destroy_ah(ah), 0);
	/* no GRH: a non-global AV, which a RoCE port refuses */
	wc.wc_flags = 0;
	ASSERT_NULL_ERRNO(ibv_create_ah_from_wc(e.pd, &wc, &grh, 1), EINVAL);
	wc.wc_flags = IBV_WC_GRH;
	grh_ipv4(&grh, "127.0.0.1", "10.9.9.9", 0, 64, true);
	ASSERT_NULL_ERRNO(ibv_create_ah_from_wc(e.pd, &wc, &grh, 1), EINVAL);
}

/* ------------------------------------------------------------------ */
/* Multicast                                                           */

static struct ibv_qp *qp_new(struct env *e, enum ibv_qp_type t)
{
	struct ibv_qp_init_attr a = {
		.send_cq = e->cq,
		.recv_cq = e->cq,
		.cap = { .max_send_wr = 1, .max_recv_wr = 1,
			 .max_send_sge = 1, .max_recv_sge = 1 },
		.qp_type = t,
	};
	struct ibv_qp *qp = ibv_create_qp(e->pd, &a);

	ASSERT_NOT_NULL(qp);
	return qp;
}

TEST(attach_mcast)
{
	union ibv_gid v6, v4, v4uni, uni;
	struct ibv_qp *ud, *rc;
	struct env e;

	env_open(&e);
	ud = qp_new(&e, IBV_QPT_UD);
	rc = qp_new(&e, IBV_QPT_RC);
	memset(&v6, 0, sizeof(v6));
	v6.raw[0] = 0xff;
	v6.raw[1] = 0x0e;
	v6.raw[15] = 0x11;
	v4_gid(&v4, "230.1.2.3");
	v4_gid(&v4uni, "10.1.2.3");
	ASSERT_EQ(ibv_query_gid(e.ctx, 1, 0, &uni), 0);

	/* only UD QPs, only multicast GIDs */
	ASSERT_EQ(ibv_attach_mcast(rc, &v6, 0), EINVAL);
	ASSERT_EQ(ibv_attach_mcast(ud, &uni, 0), EINVAL);
	ASSERT_EQ(ibv_attach_mcast(ud, &v4uni, 0), EINVAL);
	ASSERT_EQ(ibv_attach_mcast(ud, &v6, 0), 0);
	ASSERT_EQ(ibv_attach_mcast(ud, &v6, 0), 0);	/* again: fine */
	ASSERT_EQ(ibv_attach_mcast(ud, &v4, 0xc001), 0);

	/* IBA o10-2.2.3: no destroy while attached */
	ASSERT_EQ(ibv_destroy_qp(ud), EBUSY);
	ASSERT_EQ(ibv_detach_mcast(ud, &v6, 0), 0);
	ASSERT_EQ(ibv_detach_mcast(ud, &v6, 0), EINVAL);	/* gone */
	ASSERT_EQ(ibv_detach_mcast(ud, &v4, 0), EINVAL);	/* other LID */
	ASSERT_EQ(ibv_detach_mcast(rc, &v4, 0xc001), EINVAL);
	ASSERT_EQ(ibv_destroy_qp(ud), EBUSY);
	ASSERT_EQ(ibv_detach_mcast(ud, &v4, 0xc001), 0);
	ASSERT_EQ(ibv_destroy_qp(ud), 0);
	ASSERT_EQ(ibv_destroy_qp(rc), 0);
}

TEST(mcast_group_holds_max_qps)
{
	struct ibv_device_attr da;
	struct ibv_qp *qps[1024];
	union ibv_gid g;
	struct env e;
	int i, n;

	env_open(&e);
	ASSERT_EQ(ibv_query_device(e.ctx, &da), 0);
	n = da.max_mcast_qp_attach;
	ASSERT_GT(n, 0);
	ASSERT_LT(n, 1024);
	memset(&g, 0, sizeof(g));
	g.raw[0] = 0xff;
	g.raw[15] = 7;
	for (i = 0; i <= n; i++)
		qps[i] = qp_new(&e, IBV_QPT_UD);
	for (i = 0; i < n; i++)
		ASSERT_EQ(ibv_attach_mcast(qps[i], &g, 0), 0);
	ASSERT_EQ(ibv_attach_mcast(qps[n], &g, 0), ENOMEM);
	/* a place freed is a place taken */
	ASSERT_EQ(ibv_detach_mcast(qps[0], &g, 0), 0);
	ASSERT_EQ(ibv_attach_mcast(qps[n], &g, 0), 0);
	/* another group is not full */
	g.raw[15] = 8;
	ASSERT_EQ(ibv_attach_mcast(qps[0], &g, 0), 0);
	ASSERT_EQ(ibv_detach_mcast(qps[0], &g, 0), 0);
	g.raw[15] = 7;
	for (i = 1; i <= n; i++) {
		ASSERT_EQ(ibv_detach_mcast(qps[i], &g, 0), 0);
		ASSERT_EQ(ibv_destroy_qp(qps[i]), 0);
	}
	ASSERT_EQ(ibv_destroy_qp(qps[0]), 0);
}
