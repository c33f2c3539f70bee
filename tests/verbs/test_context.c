// SPDX-License-Identifier: MIT
/*
 * Contexts and queries: ibv_open_device/ibv_close_device, the verbs_context
 * that header inlines find, ibv_query_device, the query_device_ex op,
 * ibv_query_port (the query_port op and the legacy exported symbol),
 * ibv_query_gid, ibv_query_gid_type, ibv_query_gid_ex, ibv_query_gid_table,
 * ibv_query_pkey, ibv_get_pkey_index.
 *
 * Reference: rdma-core 44 libibverbs/verbs.c (__lib_query_port,
 * ibv_query_gid, ibv_query_pkey), cmd_device.c (ibv_cmd_query_device_any,
 * __ibv_query_gid_ex, _ibv_query_gid_table, and the 16-bit ioctl attribute
 * length in cmd_ioctl.c), the kernel's uverbs_std_types_device.c
 * (QUERY_GID_ENTRY, QUERY_GID_TABLE) and cache.c (rdma_get_gid_attr:
 * index past the table EINVAL, empty entry ENODATA).
 */
#include <endian.h>
#include <fcntl.h>
#include <net/if.h>
#include <stddef.h>
#include <unistd.h>

#include "harness.h"
#include "common.h"

/* rdma-core exports it @IBVERBS_PRIVATE_34; no public header declares it */
int ibv_query_gid_type(struct ibv_context *context, uint8_t port_num,
		       unsigned int index, int *type);
#define GID_TYPE_SYSFS_IB_ROCE_V1 0
#define GID_TYPE_SYSFS_ROCE_V2 1

/* The exported ibv_query_port@IBVERBS_1.1 (48-byte struct), not the macro */
typedef int (*legacy_query_port_fn)(struct ibv_context *, uint8_t,
				    struct _compat_ibv_port_attr *);

static int lo_gid_tbl_len(struct ibv_context *ctx)
{
	struct ibv_port_attr pa;

	ASSERT_EQ(ibv_query_port(ctx, 1, &pa), 0);
	return pa.gid_tbl_len;
}

/* The first GID index holding no address (softhca_lo has 1 or 2). */
static int empty_gid_index(struct ibv_context *ctx)
{
	int i, len = lo_gid_tbl_len(ctx);
	union ibv_gid gid;
	static const union ibv_gid zero;

	for (i = 0; i < len; i++) {
		ASSERT_EQ(ibv_query_gid(ctx, 1, i, &gid), 0);
		if (!memcmp(&gid, &zero, sizeof(gid)))
			return i;
	}
	SKIP("every GID index is in use");
}

/* ------------------------------------------------------------------ */
/* Open and close                                                      */

TEST(open_close)
{
	struct ibv_context *ctx = open_lo(), *ctx2 = open_lo();

	ASSERT(ctx != ctx2);
	ASSERT_STR_EQ(ctx->device->name, "softhca_lo");
	ASSERT_GE(ctx->num_comp_vectors, 1);
	ASSERT_GE(ctx->async_fd, 0);
	ASSERT_GE(ctx->cmd_fd, 0);
	ASSERT_NE(ctx->async_fd, ctx2->async_fd);
	ASSERT_GE(fcntl(ctx->async_fd, F_GETFD), 0);
	ASSERT_GE(fcntl(ctx->cmd_fd, F_GETFD), 0);
	ASSERT_EQ(ibv_close_device(ctx), 0);
	/* the other context is not affected */
	ASSERT_GE(fcntl(ctx2->async_fd, F_GETFD), 0);
	ASSERT_EQ(lo_gid_tbl_len(ctx2) > 0, 1);
	ASSERT_EQ(ibv_close_device(ctx2), 0);
}

/* Header inlines reach the extended ops through verbs_get_ctx_op(). */
TEST(verbs_context_ops)
{
	struct ibv_context *ctx = open_lo();
	struct verbs_context *v = verbs_get_ctx(ctx);

	ASSERT_NOT_NULL(v);
	ASSERT_GE(v->sz, sizeof(struct verbs_context));
	ASSERT_NOT_NULL(verbs_get_ctx_op(ctx, query_port));
	ASSERT_NOT_NULL(verbs_get_ctx_op(ctx, query_device_ex));
	ASSERT_NOT_NULL(verbs_get_ctx_op(ctx, create_cq_ex));
	ASSERT_NOT_NULL(ctx->ops.poll_cq);
	ASSERT_NOT_NULL(ctx->ops.req_notify_cq);
	ASSERT_NOT_NULL(ctx->ops.post_send);
	ASSERT_NOT_NULL(ctx->ops.post_recv);
	ASSERT_NOT_NULL(ctx->ops.post_srq_recv);
	ASSERT_EQ(ibv_close_device(ctx), 0);
}

/* cmd_fd stands for the uverbs file: dup()-able (pyverbs does it). */
TEST(cmd_fd_dup)
{
	struct ibv_context *ctx = open_lo();
	int fd = dup(ctx->cmd_fd);

	ASSERT_GE(fd, 0);
	ASSERT_EQ(close(fd), 0);
	ASSERT_EQ(ibv_close_device(ctx), 0);
}

/* ------------------------------------------------------------------ */
/* ibv_query_device and the query_device_ex op                         */

TEST(query_device)
{
	struct ibv_context *ctx = open_lo();
	struct ibv_device_attr a;
	long page = sysconf(_SC_PAGESIZE);

	memset(&a, 0xa5, sizeof(a));
	ASSERT_EQ(ibv_query_device(ctx, &a), 0);
	ASSERT_NE(a.fw_ver[0], 0);
	ASSERT_U64_EQ(a.node_guid, ibv_get_device_guid(ctx->device));
	ASSERT(a.max_mr_size > (uint64_t)page);
	ASSERT_GE(a.page_size_cap & (uint64_t)page, (uint64_t)page);
	ASSERT_GT(a.max_qp, 0);
	ASSERT_GT(a.max_qp_wr, 0);
	ASSERT_GT(a.max_sge, 0);
	ASSERT_GT(a.max_cq, 0);
	ASSERT_GT(a.max_cqe, 0);
	ASSERT_GT(a.max_mr, 0);
	ASSERT_GT(a.max_pd, 0);
	ASSERT_GT(a.max_pkeys, 0);
	ASSERT_GE(a.max_qp_rd_atom, 1);
	ASSERT_EQ(a.phys_port_cnt, 1);
	/* memory windows, type 1 and 2B (tests/verbs/test_mw.c) */
	ASSERT_GT(a.max_mw, 0);
	ASSERT(a.device_cap_flags & IBV_DEVICE_MEM_WINDOW);
	ASSERT_EQ(ibv_close_device(ctx), 0);
}

static int call_query_device_ex(struct ibv_context *ctx,
				const struct ibv_query_device_ex_input *in,
				void *attr, size_t size)
{
	struct verbs_context *v = verbs_get_ctx_op(ctx, query_device_ex);

	ASSERT_NOT_NULL(v);
	return v->query_device_ex(ctx, in, attr, size);
}

TEST(query_device_ex_op)
{
	struct ibv_context *ctx = open_lo();
	struct ibv_device_attr_ex ex;
	struct ibv_device_attr a;

	memset(&ex, 0xa5, sizeof(ex));
	ASSERT_EQ(call_query_device_ex(ctx, NULL, &ex, sizeof(ex)), 0);
	ASSERT_EQ(ibv_query_device(ctx, &a), 0);
	ASSERT_EQ(memcmp(&ex.orig_attr, &a, sizeof(a)), 0);
	ASSERT_EQ(ex.phys_port_cnt_ex, 1);
	/* ODP and device memory are offered (test_odp.c, test_dm.c) */
	ASSERT_EQ(ex.odp_caps.general_caps,
		  IBV_ODP_SUPPORT | IBV_ODP_SUPPORT_IMPLICIT);
	ASSERT_NE(ex.max_dm_size, 0);
	ASSERT_EQ(ibv_close_device(ctx), 0);
}

TEST(query_device_ex_bad_input)
{
	struct ibv_context *ctx = open_lo();
	struct ibv_query_device_ex_input in = {.comp_mask = 1};
	struct ibv_device_attr_ex ex;

	/* ibv_cmd_query_device_any: comp_mask, then the size */
	ASSERT_EQ(call_query_device_ex(ctx, &in, &ex, sizeof(ex)), EINVAL);
	ASSERT_EQ(
	    call_query_device_ex(ctx, NULL, &ex, sizeof(ex.orig_attr) - 1),
	    EINVAL);
	ASSERT_EQ(call_query_device_ex(ctx, NULL, &ex, 0), EINVAL);
	in.comp_mask = 0;
	ASSERT_EQ(call_query_device_ex(ctx, &in, &ex, sizeof(ex)), 0);
	/* the inline checks comp_mask itself */
	in.comp_mask = 1;
	ASSERT_EQ(ibv_query_device_ex(ctx, &in, &ex), EINVAL);
	ASSERT_EQ(ibv_query_device_ex(ctx, NULL, &ex), 0);
	ASSERT_EQ(ibv_close_device(ctx), 0);
}

/* attr_size honoured: nothing written past it, and past what it knows
 * the library writes zeros (an application built with newer headers). */
TEST(query_device_ex_attr_size)
{
	struct ibv_context *ctx = open_lo();
	unsigned char buf[sizeof(struct ibv_device_attr_ex) + 64];
	size_t small = sizeof(struct ibv_device_attr);
	size_t i;

	memset(buf, 0xa5, sizeof(buf));
	ASSERT_EQ(call_query_device_ex(ctx, NULL, buf, small), 0);
	for (i = small; i < sizeof(buf); i++)
		ASSERT_EQ(buf[i], 0xa5);
	ASSERT_EQ(((struct ibv_device_attr *)buf)->phys_port_cnt, 1);

	memset(buf, 0xa5, sizeof(buf));
	ASSERT_EQ(call_query_device_ex(ctx, NULL, buf, sizeof(buf)), 0);
	for (i = sizeof(struct ibv_device_attr_ex); i < sizeof(buf); i++)
		ASSERT_EQ(buf[i], 0);
	ASSERT_EQ(ibv_close_device(ctx), 0);
}

/* ------------------------------------------------------------------ */
/* ibv_query_port: the op and the legacy symbol                        */

TEST(query_port)
{
	struct ibv_context *ctx = open_lo();
	struct ibv_port_attr pa;

	memset(&pa, 0xa5, sizeof(pa));
	ASSERT_EQ(ibv_query_port(ctx, 1, &pa), 0);
	ASSERT_EQ(pa.state, IBV_PORT_ACTIVE);
	ASSERT_EQ(pa.link_layer, IBV_LINK_LAYER_ETHERNET);
	ASSERT_EQ(pa.active_mtu, IBV_MTU_4096); /* lo's MTU is 65536 */
	ASSERT_EQ(pa.pkey_tbl_len, 1);
	ASSERT_GE(pa.gid_tbl_len, 2);
	ASSERT_EQ(pa.lid, 0);
	ASSERT_NE(pa.active_width, 0);
	ASSERT_NE(pa.active_speed, 0);
	ASSERT_EQ(ibv_close_device(ctx), 0);
}

/* The kernel's ib_query_port(): a port outside 1..phys_port_cnt. */
TEST(query_port_bad_port)
{
	struct ibv_context *ctx = open_lo();
	struct ibv_port_attr pa;

	ASSERT_EQ(ibv_query_port(ctx, 0, &pa), EINVAL);
	ASSERT_EQ(ibv_query_port(ctx, 2, &pa), EINVAL);
	ASSERT_EQ(ibv_query_port(ctx, 255, &pa), EINVAL);
	ASSERT_EQ(ibv_close_device(ctx), 0);
}

/* rdma-core's __lib_query_port: a short struct gets a prefix, a long one
 * is zeroed past struct ibv_port_attr. */
TEST(query_port_op_attr_len)
{
	struct ibv_context *ctx = open_lo();
	struct verbs_context *v = verbs_get_ctx_op(ctx, query_port);
	unsigned char buf[sizeof(struct ibv_port_attr) + 32];
	struct ibv_port_attr ref;
	size_t i;

	ASSERT_NOT_NULL(v);
	ASSERT_EQ(v->query_port(ctx, 1, &ref, sizeof(ref)), 0);

	memset(buf, 0xa5, sizeof(buf));
	ASSERT_EQ(v->query_port(ctx, 1, (void *)buf, 20), 0);
	ASSERT_EQ(memcmp(buf, &ref, 20), 0);
	for (i = 20; i < sizeof(buf); i++)
		ASSERT_EQ(buf[i], 0xa5);

	memset(buf, 0xa5, sizeof(buf));
	ASSERT_EQ(v->query_port(ctx, 1, (void *)buf, sizeof(buf)), 0);
	ASSERT_EQ(memcmp(buf, &ref, sizeof(ref)), 0);
	for (i = sizeof(ref); i < sizeof(buf); i++)
		ASSERT_EQ(buf[i], 0);

	ASSERT_EQ(v->query_port(ctx, 2, (void *)buf, sizeof(ref)), EINVAL);
	ASSERT_EQ(ibv_close_device(ctx), 0);
}

/* ibv_query_port@IBVERBS_1.1 takes rdma-core's 48-byte _compat struct. */
TEST(query_port_legacy_symbol)
{
	legacy_query_port_fn legacy = ibv_query_port;
	struct ibv_context *ctx = open_lo();
	unsigned char buf[sizeof(struct ibv_port_attr) + 16];
	const size_t compat = offsetof(struct ibv_port_attr, port_cap_flags2);
	struct ibv_port_attr ref;
	size_t i;

	ASSERT_EQ(compat, 48);
	ASSERT_EQ(ibv_query_port(ctx, 1, &ref), 0);
	memset(buf, 0xa5, sizeof(buf));
	ASSERT_EQ(legacy(ctx, 1, (void *)buf), 0);
	ASSERT_EQ(memcmp(buf, &ref, compat), 0);
	for (i = compat; i < sizeof(buf); i++)
		ASSERT_EQ(buf[i], 0xa5);
	ASSERT_EQ(legacy(ctx, 0, (void *)buf), EINVAL);
	ASSERT_EQ(legacy(ctx, 2, (void *)buf), EINVAL);
	ASSERT_EQ(ibv_close_device(ctx), 0);
}

/* ------------------------------------------------------------------ */
/* GIDs                                                                */

TEST(query_gid)
{
	struct ibv_context *ctx = open_lo();
	static const union ibv_gid zero;
	union ibv_gid gid;
	int empty = empty_gid_index(ctx);

	ASSERT_EQ(ibv_query_gid(ctx, 1, 0, &gid), 0);
	ASSERT_NE(memcmp(&gid, &zero, sizeof(gid)), 0);
	/* rdma-core keeps the old API: an empty entry reads as zero */
	memset(&gid, 0xa5, sizeof(gid));
	ASSERT_EQ(ibv_query_gid(ctx, 1, empty, &gid), 0);
	ASSERT_EQ(memcmp(&gid, &zero, sizeof(gid)), 0);
	ASSERT_EQ(ibv_close_device(ctx), 0);
}

TEST(query_gid_bad_args)
{
	struct ibv_context *ctx = open_lo();
	int len = lo_gid_tbl_len(ctx);
	union ibv_gid gid;

	errno = 0;
	ASSERT_EQ(ibv_query_gid(ctx, 1, len, &gid), -1);
	ASSERT_EQ(errno, EINVAL);
	errno = 0;
	ASSERT_EQ(ibv_query_gid(ctx, 1, -1, &gid), -1);
	ASSERT_EQ(errno, EINVAL);
	errno = 0;
	ASSERT_EQ(ibv_query_gid(ctx, 0, 0, &gid), -1);
	ASSERT_EQ(errno, EINVAL);
	errno = 0;
	ASSERT_EQ(ibv_query_gid(ctx, 2, 0, &gid), -1);
	ASSERT_EQ(errno, EINVAL);
	ASSERT_EQ(ibv_close_device(ctx), 0);
}

TEST(query_gid_type)
{
	struct ibv_context *ctx = open_lo();
	int empty = empty_gid_index(ctx);
	int len = lo_gid_tbl_len(ctx);
	int type = -1;

	ASSERT_EQ(ibv_query_gid_type(ctx, 1, 0, &type), 0);
	ASSERT_EQ(type, GID_TYPE_SYSFS_ROCE_V2);
	/* empty entry: 0 and IB/RoCE v1, as rdma-core answers */
	type = -1;
	ASSERT_EQ(ibv_query_gid_type(ctx, 1, (unsigned int)empty, &type), 0);
	ASSERT_EQ(type, GID_TYPE_SYSFS_IB_ROCE_V1);
	errno = 0;
	ASSERT_EQ(ibv_query_gid_type(ctx, 1, (unsigned int)len, &type), -1);
	ASSERT_EQ(errno, EINVAL);
	errno = 0;
	ASSERT_EQ(ibv_query_gid_type(ctx, 2, 0, &type), -1);
	ASSERT_EQ(errno, EINVAL);
	ASSERT_EQ(ibv_close_device(ctx), 0);
}

TEST(query_gid_ex)
{
	struct ibv_context *ctx = open_lo();
	struct ibv_gid_entry e;
	union ibv_gid gid;

	memset(&e, 0xa5, sizeof(e));
	ASSERT_EQ(ibv_query_gid_ex(ctx, 1, 0, &e, 0), 0);
	ASSERT_EQ(ibv_query_gid(ctx, 1, 0, &gid), 0);
	ASSERT_EQ(memcmp(&e.gid, &gid, sizeof(gid)), 0);
	ASSERT_EQ(e.gid_index, 0);
	ASSERT_EQ(e.port_num, 1);
	ASSERT_EQ(e.gid_type, IBV_GID_TYPE_ROCE_V2);
	ASSERT_EQ(e.ndev_ifindex, if_nametoindex("lo"));
	ASSERT_EQ(ibv_close_device(ctx), 0);
}

/* QUERY_GID_ENTRY: flags, entry size, port, index, empty entry. */
TEST(query_gid_ex_errors)
{
	struct ibv_context *ctx = open_lo();
	int len = lo_gid_tbl_len(ctx), empty = empty_gid_index(ctx);
	struct ibv_gid_entry e;

	ASSERT_EQ(ibv_query_gid_ex(ctx, 1, 0, &e, 1), EINVAL);
	ASSERT_EQ(_ibv_query_gid_ex(ctx, 1, 0, &e, 0, sizeof(e) - 1), EINVAL);
	ASSERT_EQ(_ibv_query_gid_ex(ctx, 1, 0, &e, 0, 0), EINVAL);
	ASSERT_EQ(ibv_query_gid_ex(ctx, 0, 0, &e, 0), EINVAL);
	ASSERT_EQ(ibv_query_gid_ex(ctx, 2, 0, &e, 0), EINVAL);
	ASSERT_EQ(ibv_query_gid_ex(ctx, 1, (uint32_t)len, &e, 0), EINVAL);
	ASSERT_EQ(ibv_query_gid_ex(ctx, 1, UINT32_MAX, &e, 0), EINVAL);
	ASSERT_EQ(ibv_query_gid_ex(ctx, 1, (uint32_t)empty, &e, 0), ENODATA);
	ASSERT_EQ(ibv_close_device(ctx), 0);
}

/* A larger entry is zero-filled past struct ibv_gid_entry; more than the
 * 16-bit ioctl attribute length is refused by rdma-core. */
TEST(query_gid_ex_entry_size)
{
	struct ibv_context *ctx = open_lo();
	unsigned char buf[sizeof(struct ibv_gid_entry) + 16];
	struct ibv_gid_entry ref;
	static unsigned char big[70000];
	size_t i;

	ASSERT_EQ(ibv_query_gid_ex(ctx, 1, 0, &ref, 0), 0);
	memset(buf, 0xa5, sizeof(buf));
	ASSERT_EQ(_ibv_query_gid_ex(ctx, 1, 0, (void *)buf, 0, sizeof(buf)), 0);
	ASSERT_EQ(memcmp(buf, &ref, sizeof(ref)), 0);
	for (i = sizeof(ref); i < sizeof(buf); i++)
		ASSERT_EQ(buf[i], 0);
	ASSERT_EQ(_ibv_query_gid_ex(ctx, 1, 0, (void *)big, 0, 65535), 0);
	ASSERT_EQ(_ibv_query_gid_ex(ctx, 1, 0, (void *)big, 0, 65536), EINVAL);
	ASSERT_EQ(ibv_close_device(ctx), 0);
}

static ssize_t lo_valid_gids(struct ibv_context *ctx)
{
	struct ibv_gid_entry e;
	int i, len = lo_gid_tbl_len(ctx);
	ssize_t n = 0;

	for (i = 0; i < len; i++)
		n += ibv_query_gid_ex(ctx, 1, (uint32_t)i, &e, 0) == 0;
	return n;
}

TEST(query_gid_table)
{
	struct ibv_context *ctx = open_lo();
	int len = lo_gid_tbl_len(ctx);
	struct ibv_gid_entry tbl[64], e;
	ssize_t n, i;

	ASSERT_LE(len, 64);
	n = ibv_query_gid_table(ctx, tbl, (size_t)len, 0);
	ASSERT_EQ(n, lo_valid_gids(ctx));
	ASSERT_GE(n, 1);
	for (i = 0; i < n; i++) {
		ASSERT_EQ(ibv_query_gid_ex(ctx, 1, tbl[i].gid_index, &e, 0), 0);
		ASSERT_EQ(memcmp(&e, &tbl[i], sizeof(e)), 0);
	}
	/* exactly as many entries as valid GIDs is enough */
	ASSERT_EQ(ibv_query_gid_table(ctx, tbl, (size_t)n, 0), n);
	ASSERT_EQ(ibv_close_device(ctx), 0);
}

/* QUERY_GID_TABLE: flags, zero sizes, too small a buffer (nothing
 * written), and rdma-core's 16-bit limit on the whole buffer. */
TEST(query_gid_table_errors)
{
	struct ibv_context *ctx = open_lo();
	ssize_t n = lo_valid_gids(ctx);
	static struct ibv_gid_entry big[4096];
	struct ibv_gid_entry tbl[64];
	size_t i;

	ASSERT_EQ(ibv_query_gid_table(ctx, tbl, 64, 1), -EINVAL);
	ASSERT_EQ(ibv_query_gid_table(ctx, tbl, 0, 0), -EINVAL);
	ASSERT_EQ(_ibv_query_gid_table(ctx, tbl, 64, 0, 0), -EINVAL);
	memset(tbl, 0xa5, sizeof(tbl));
	ASSERT_EQ(ibv_query_gid_table(ctx, tbl, (size_t)n - 1, 0), -EINVAL);
	for (i = 0; i < sizeof(tbl); i++)
		ASSERT_EQ(((unsigned char *)tbl)[i], 0xa5);
	/* 2047 * 32 fits in 65535 bytes, 2048 * 32 does not */
	ASSERT_EQ(ibv_query_gid_table(ctx, big, 2047, 0), n);
	ASSERT_EQ(ibv_query_gid_table(ctx, big, 2048, 0), -EINVAL);
	ASSERT_EQ(ibv_query_gid_table(ctx, big, SIZE_MAX, 0), -EINVAL);
	ASSERT_EQ(ibv_close_device(ctx), 0);
}

/* The kernel copies min(entry_size, 32) bytes per entry and zeroes the
 * rest of each larger entry. */
TEST(query_gid_table_entry_size)
{
	struct ibv_context *ctx = open_lo();
	struct ibv_gid_entry ref[64];
	unsigned char buf[64 * 48];
	ssize_t n, i;
	size_t j;

	n = ibv_query_gid_table(ctx, ref, 64, 0);
	ASSERT_GE(n, 1);

	memset(buf, 0xa5, sizeof(buf));
	ASSERT_EQ(_ibv_query_gid_table(ctx, (void *)buf, 64, 0, 48), n);
	for (i = 0; i < n; i++) {
		ASSERT_EQ(memcmp(buf + i * 48, &ref[i], sizeof(ref[i])), 0);
		for (j = sizeof(ref[i]); j < 48; j++)
			ASSERT_EQ(buf[i * 48 + j], 0);
	}
	ASSERT_EQ(buf[n * 48], 0xa5);

	memset(buf, 0xa5, sizeof(buf));
	ASSERT_EQ(_ibv_query_gid_table(ctx, (void *)buf, 64, 0, 16), n);
	for (i = 0; i < n; i++)
		ASSERT_EQ(memcmp(buf + i * 16, &ref[i].gid, 16), 0);
	ASSERT_EQ(buf[n * 16], 0xa5);
	ASSERT_EQ(ibv_close_device(ctx), 0);
}

/* ------------------------------------------------------------------ */
/* P_Keys                                                              */

/* rdma-core reads ports/N/pkeys/I from sysfs: a missing file is ENOENT. */
TEST(query_pkey)
{
	struct ibv_context *ctx = open_lo();
	__be16 pkey = 0;

	ASSERT_EQ(ibv_query_pkey(ctx, 1, 0, &pkey), 0);
	ASSERT_EQ(be16toh(pkey), 0xffff);
	errno = 0;
	ASSERT_EQ(ibv_query_pkey(ctx, 1, 1, &pkey), -1);
	ASSERT_EQ(errno, ENOENT);
	errno = 0;
	ASSERT_EQ(ibv_query_pkey(ctx, 1, -1, &pkey), -1);
	ASSERT_EQ(errno, ENOENT);
	errno = 0;
	ASSERT_EQ(ibv_query_pkey(ctx, 2, 0, &pkey), -1);
	ASSERT_EQ(errno, ENOENT);
	errno = 0;
	ASSERT_EQ(ibv_query_pkey(ctx, 0, 0, &pkey), -1);
	ASSERT_EQ(errno, ENOENT);
	ASSERT_EQ(ibv_close_device(ctx), 0);
}

TEST(get_pkey_index)
{
	struct ibv_context *ctx = open_lo();

	ASSERT_EQ(ibv_get_pkey_index(ctx, 1, htobe16(0xffff)), 0);
	errno = 0;
	ASSERT_EQ(ibv_get_pkey_index(ctx, 1, htobe16(0x7fff)), -1);
	ASSERT_EQ(errno, ENOENT);
	errno = 0;
	ASSERT_EQ(ibv_get_pkey_index(ctx, 2, htobe16(0xffff)), -1);
	ASSERT_EQ(errno, ENOENT);
	ASSERT_EQ(ibv_close_device(ctx), 0);
}
