// SPDX-License-Identifier: MIT
/*
 * The small exported helpers: the *_str functions, static rate
 * conversions, fork support, ibv_get_sysfs_path.
 *
 * Reference: rdma-core 44 enum_strs.c, verbs.c (ibv_rate_to_mult,
 * mult_to_ibv_rate, ibv_rate_to_mbps, mbps_to_ibv_rate), memory.c
 * (ibv_fork_init and ibv_is_fork_initialized on a kernel with copy-on-fork
 * for pinned pages), sysfs.c; the libibverbs 1.0 compat symbols (not
 * supported: they fail with ENOSYS).
 */
#include <dlfcn.h>
#include <stdlib.h>
#include <unistd.h>

#include "harness.h"
#include "common.h"

const char *ibv_get_sysfs_path(void);

TEST(node_type_str)
{
	ASSERT_STR_EQ(ibv_node_type_str(IBV_NODE_CA),
		      "InfiniBand channel adapter");
	ASSERT_STR_EQ(ibv_node_type_str(IBV_NODE_SWITCH), "InfiniBand switch");
	ASSERT_STR_EQ(ibv_node_type_str(IBV_NODE_RNIC), "iWARP NIC");
	ASSERT_STR_EQ(ibv_node_type_str(IBV_NODE_UNSPECIFIED), "unspecified");
	ASSERT_STR_EQ(ibv_node_type_str(IBV_NODE_UNKNOWN), "unknown");
	ASSERT_STR_EQ(ibv_node_type_str((enum ibv_node_type)100), "unknown");
}

TEST(port_state_str)
{
	ASSERT_STR_EQ(ibv_port_state_str(IBV_PORT_NOP),
		      "no state change (NOP)");
	ASSERT_STR_EQ(ibv_port_state_str(IBV_PORT_DOWN), "down");
	ASSERT_STR_EQ(ibv_port_state_str(IBV_PORT_ACTIVE), "active");
	ASSERT_STR_EQ(ibv_port_state_str(IBV_PORT_ACTIVE_DEFER),
		      "active defer");
	ASSERT_STR_EQ(ibv_port_state_str((enum ibv_port_state)6), "unknown");
	ASSERT_STR_EQ(ibv_port_state_str((enum ibv_port_state) - 1), "unknown");
}

TEST(event_type_str)
{
	ASSERT_STR_EQ(ibv_event_type_str(IBV_EVENT_CQ_ERR), "CQ error");
	ASSERT_STR_EQ(ibv_event_type_str(IBV_EVENT_QP_FATAL),
		      "local work queue catastrophic error");
	ASSERT_STR_EQ(ibv_event_type_str(IBV_EVENT_COMM_EST),
		      "communication established");
	ASSERT_STR_EQ(ibv_event_type_str(IBV_EVENT_DEVICE_FATAL),
		      "local catastrophic error");
	ASSERT_STR_EQ(ibv_event_type_str(IBV_EVENT_QP_LAST_WQE_REACHED),
		      "last WQE reached");
	ASSERT_STR_EQ(ibv_event_type_str(IBV_EVENT_GID_CHANGE),
		      "GID table change");
	ASSERT_STR_EQ(ibv_event_type_str(IBV_EVENT_WQ_FATAL), "WQ fatal");
	ASSERT_STR_EQ(
	    ibv_event_type_str((enum ibv_event_type)(IBV_EVENT_WQ_FATAL + 1)),
	    "unknown");
	ASSERT_STR_EQ(ibv_event_type_str((enum ibv_event_type) - 1), "unknown");
}

TEST(wc_status_str)
{
	ASSERT_STR_EQ(ibv_wc_status_str(IBV_WC_SUCCESS), "success");
	ASSERT_STR_EQ(ibv_wc_status_str(IBV_WC_LOC_LEN_ERR),
		      "local length error");
	ASSERT_STR_EQ(ibv_wc_status_str(IBV_WC_WR_FLUSH_ERR),
		      "Work Request Flushed Error");
	ASSERT_STR_EQ(ibv_wc_status_str(IBV_WC_REM_ACCESS_ERR),
		      "remote access error");
	ASSERT_STR_EQ(ibv_wc_status_str(IBV_WC_RETRY_EXC_ERR),
		      "transport retry counter exceeded");
	ASSERT_STR_EQ(ibv_wc_status_str(IBV_WC_RNR_RETRY_EXC_ERR),
		      "RNR retry counter exceeded");
	ASSERT_STR_EQ(ibv_wc_status_str(IBV_WC_TM_RNDV_INCOMPLETE),
		      "TM software rendezvous");
	ASSERT_STR_EQ(ibv_wc_status_str(
			  (enum ibv_wc_status)(IBV_WC_TM_RNDV_INCOMPLETE + 1)),
		      "unknown");
	ASSERT_STR_EQ(ibv_wc_status_str((enum ibv_wc_status) - 1), "unknown");
}

/* Every rate rdma-core knows, with its multiplier and Mb/s. */
static const struct {
	enum ibv_rate rate;
	int mult, mbps;
} rates[] = {
    {IBV_RATE_2_5_GBPS, 1, 2500},	{IBV_RATE_5_GBPS, 2, 5000},
    {IBV_RATE_10_GBPS, 4, 10000},	{IBV_RATE_20_GBPS, 8, 20000},
    {IBV_RATE_30_GBPS, 12, 30000},	{IBV_RATE_40_GBPS, 16, 40000},
    {IBV_RATE_60_GBPS, 24, 60000},	{IBV_RATE_80_GBPS, 32, 80000},
    {IBV_RATE_120_GBPS, 48, 120000},	{IBV_RATE_14_GBPS, -1, 14062},
    {IBV_RATE_56_GBPS, -1, 56250},	{IBV_RATE_112_GBPS, -1, 112500},
    {IBV_RATE_168_GBPS, -1, 168750},	{IBV_RATE_25_GBPS, -1, 25781},
    {IBV_RATE_100_GBPS, -1, 103125},	{IBV_RATE_200_GBPS, -1, 206250},
    {IBV_RATE_300_GBPS, -1, 309375},	{IBV_RATE_28_GBPS, 11, 28125},
    {IBV_RATE_50_GBPS, 20, 53125},	{IBV_RATE_400_GBPS, 160, 425000},
    {IBV_RATE_600_GBPS, 240, 637500},	{IBV_RATE_800_GBPS, 320, 850000},
    {IBV_RATE_1200_GBPS, 480, 1275000},
};

TEST(rate_conversions)
{
	unsigned int i;

	for (i = 0; i < sizeof(rates) / sizeof(rates[0]); i++) {
		ASSERT_EQ(ibv_rate_to_mult(rates[i].rate), rates[i].mult);
		ASSERT_EQ(ibv_rate_to_mbps(rates[i].rate), rates[i].mbps);
		ASSERT_EQ(mbps_to_ibv_rate(rates[i].mbps), rates[i].rate);
		if (rates[i].mult > 0)
			ASSERT_EQ(mult_to_ibv_rate(rates[i].mult),
				  rates[i].rate);
	}
}

TEST(rate_conversions_unknown)
{
	ASSERT_EQ(ibv_rate_to_mult(IBV_RATE_MAX), -1);
	ASSERT_EQ(ibv_rate_to_mult((enum ibv_rate)100), -1);
	ASSERT_EQ(ibv_rate_to_mbps(IBV_RATE_MAX), -1);
	ASSERT_EQ(ibv_rate_to_mbps((enum ibv_rate) - 1), -1);
	ASSERT_EQ(mult_to_ibv_rate(0), IBV_RATE_MAX);
	ASSERT_EQ(mult_to_ibv_rate(-1), IBV_RATE_MAX);
	ASSERT_EQ(mult_to_ibv_rate(3), IBV_RATE_MAX);
	ASSERT_EQ(mbps_to_ibv_rate(0), IBV_RATE_MAX);
	ASSERT_EQ(mbps_to_ibv_rate(-1), IBV_RATE_MAX);
	ASSERT_EQ(mbps_to_ibv_rate(14000), IBV_RATE_MAX);
	ASSERT_EQ(mbps_to_ibv_rate(100000), IBV_RATE_MAX);
}

int ibv_dontfork_range(void *base, size_t size);
int ibv_dofork_range(void *base, size_t size);

/* softhca pins nothing: fork needs no madvise, as on a kernel with
 * copy-on-fork for pinned pages, where rdma-core answers
 * IBV_FORK_UNNEEDED.  ibv_fork_init succeeds, again and again. */
TEST(fork_support)
{
	ASSERT_EQ(ibv_is_fork_initialized(), IBV_FORK_UNNEEDED);
	ASSERT_EQ(ibv_fork_init(), 0);
	ASSERT_EQ(ibv_fork_init(), 0);
	ASSERT_EQ(ibv_is_fork_initialized(), IBV_FORK_UNNEEDED);
}

static void register_one(void)
{
	struct ibv_context *ctx = open_lo();
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	static char buf[4096];
	struct ibv_mr *mr;

	ASSERT_NOT_NULL(pd);
	mr = ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
	ASSERT_NOT_NULL(mr);
	ASSERT_EQ(ibv_dereg_mr(mr), 0);
	ASSERT_EQ(ibv_dealloc_pd(pd), 0);
	ASSERT_EQ(ibv_close_device(ctx), 0);
}

/* rdma-core memory.c: ibv_fork_init after a registration (which called
 * ibv_dontfork_range) is too late: EINVAL. */
TEST(fork_init_after_registration_is_einval)
{
	register_one();
	ASSERT_EQ(ibv_fork_init(), EINVAL);
	ASSERT_EQ(ibv_is_fork_initialized(), IBV_FORK_UNNEEDED);
}

TEST(fork_init_after_dontfork_range_is_einval)
{
	static char buf[64];

	ASSERT_EQ(ibv_dontfork_range(buf, sizeof(buf)), 0);
	ASSERT_EQ(ibv_dofork_range(buf, sizeof(buf)), 0);
	ASSERT_EQ(ibv_fork_init(), EINVAL);
}

TEST(fork_init_then_register)
{
	ASSERT_EQ(ibv_fork_init(), 0);
	register_one();
	ASSERT_EQ(ibv_fork_init(), 0);
	ASSERT_EQ(ibv_is_fork_initialized(), IBV_FORK_UNNEEDED);
}

TEST(sysfs_path)
{
	if (getenv("SYSFS_PATH"))
		SKIP("SYSFS_PATH is set");
	ASSERT_STR_EQ(ibv_get_sysfs_path(), "/sys");
}

TEST(sysfs_path_from_environment)
{
	ASSERT_EQ(setenv("SYSFS_PATH", "/tmp/somewhere///", 1), 0);
	ASSERT_STR_EQ(ibv_get_sysfs_path(), "/tmp/somewhere");
	/* read once, then kept */
	ASSERT_EQ(setenv("SYSFS_PATH", "/other", 1), 0);
	ASSERT_STR_EQ(ibv_get_sysfs_path(), "/tmp/somewhere");
}

/*
 * The @IBVERBS_1.0 compat aliases (libibverbs 1.0 struct layouts) fail
 * cleanly: the verb's failure value and errno ENOSYS, never success.
 */
TEST(compat_1_0_symbols_fail)
{
	void *h = dlopen("libibverbs.so.1", RTLD_NOW | RTLD_NOLOAD);
	int (*query_device)(void *, void *);
	int (*get_async_event)(void *, void *);
	void *(*get_device_list)(int *);
	char junk[512];
	int num = 7;

	ASSERT_NOT_NULL(h);
	query_device = dlvsym(h, "ibv_query_device", "IBVERBS_1.0");
	get_async_event = dlvsym(h, "ibv_get_async_event", "IBVERBS_1.0");
	get_device_list = dlvsym(h, "ibv_get_device_list", "IBVERBS_1.0");
	ASSERT_NOT_NULL(query_device);
	ASSERT_NOT_NULL(get_async_event);
	ASSERT_NOT_NULL(get_device_list);
	ASSERT(query_device != dlvsym(h, "ibv_query_device", "IBVERBS_1.1"));
	errno = 0;
	ASSERT_EQ(query_device(junk, junk), ENOSYS);
	ASSERT_EQ(errno, ENOSYS);
	errno = 0;
	ASSERT_EQ(get_async_event(junk, junk), -1);
	ASSERT_EQ(errno, ENOSYS);
	ASSERT_NULL_ERRNO(get_device_list(&num), ENOSYS);
}
