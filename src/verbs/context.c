// SPDX-License-Identifier: MIT
/*
 * Contexts: ibv_open_device/ibv_close_device, the device, port, GID and
 * P_Key queries, and the op tables that header inlines call through.
 *
 * The context is a real struct verbs_context (abi_compat = extended, sz =
 * sizeof(struct verbs_context)) so that verbs_get_ctx_op() in clients finds
 * every op; ops softhca does not implement return EOPNOTSUPP
 * (unsupported.c), as rdma-core's dummy ops do.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/mman.h>

#include "../common/slot.h"
#include "shca.h"
#include "unsupported.h"

/* rdma-core's private enum ibv_gid_type_sysfs (driver.h) */
enum {
	SHCA_GID_TYPE_SYSFS_IB_ROCE_V1 = 0,
	SHCA_GID_TYPE_SYSFS_ROCE_V2 = 1,
};

/* ------------------------------------------------------------------ */
/* Queries                                                             */

static void fill_device_attr(struct shca_device *dev,
			     struct ibv_device_attr *a)
{
	memset(a, 0, sizeof(*a));
	snprintf(a->fw_ver, sizeof(a->fw_ver), "%s", SHCA_FW_VER);
	a->node_guid = dev->node_guid;
	a->sys_image_guid = shca_sys_image_guid(dev);
	a->max_mr_size = SHCA_MAX_MR_SIZE;
	a->page_size_cap = SHCA_PAGE_SIZE_CAP;
	a->vendor_id = SHCA_VENDOR_ID;
	a->vendor_part_id = SHCA_VENDOR_PART_ID;
	a->hw_ver = SHCA_HW_VER;
	a->max_qp = SHCA_MAX_QP;
	a->max_qp_wr = SHCA_MAX_QP_WR;
	a->device_cap_flags = IBV_DEVICE_RC_RNR_NAK_GEN |
			      IBV_DEVICE_CURR_QP_STATE_MOD |
			      IBV_DEVICE_SYS_IMAGE_GUID |
			      IBV_DEVICE_PORT_ACTIVE_EVENT |
			      IBV_DEVICE_SRQ_RESIZE |
			      IBV_DEVICE_MEM_WINDOW |
			      IBV_DEVICE_MEM_WINDOW_TYPE_2B |
			      IBV_DEVICE_XRC;
	a->max_sge = SHCA_MAX_SGE;
	a->max_sge_rd = SHCA_MAX_SGE_RD;
	a->max_cq = SHCA_MAX_CQ;
	a->max_cqe = SHCA_MAX_CQE;
	a->max_mr = SHCA_MAX_MR;
	a->max_pd = SHCA_MAX_PD;
	a->max_qp_rd_atom = SHCA_MAX_QP_RD_ATOM;
	a->max_ee_rd_atom = 0;
	a->max_res_rd_atom = SHCA_MAX_QP_RD_ATOM * SHCA_MAX_QP;
	a->max_qp_init_rd_atom = SHCA_MAX_QP_INIT_RD_ATOM;
	a->max_ee_init_rd_atom = 0;
	a->atomic_cap = IBV_ATOMIC_HCA;
	a->max_ee = 0;
	a->max_rdd = 0;
	a->max_mw = SHCA_MAX_MW;
	a->max_raw_ipv6_qp = 0;
	a->max_raw_ethy_qp = 0;
	a->max_mcast_grp = SHCA_MAX_MCAST_GRP;
	a->max_mcast_qp_attach = SHCA_MAX_MCAST_QP_ATTACH;
	a->max_total_mcast_qp_attach =
		SHCA_MAX_MCAST_GRP * SHCA_MAX_MCAST_QP_ATTACH;
	a->max_ah = SHCA_MAX_AH;
	a->max_fmr = 0;
	a->max_map_per_fmr = 0;
	a->max_srq = SHCA_MAX_SRQ;
	a->max_srq_wr = SHCA_MAX_SRQ_WR;
	a->max_srq_sge = SHCA_MAX_SRQ_SGE;
	a->max_pkeys = SHCA_MAX_PKEYS;
	a->local_ca_ack_delay = 15;
	a->phys_port_cnt = 1;
}

/*
 * On-demand paging (docs/dm-odp.md): every MR may be ODP, implicit ODP
 * too, and what an ODP MR can serve per transport is all that softhca
 * does on it: RC send, receive, write, read, atomics and SRQ receives;
 * UC send, receive and write; UD send and receive; XRC as RC (an XRC
 * receive is always an SRQ receive), as mlx5 reports it
 * (tests/traffic/test_xrc_traffic.c xrc_two_processes_odp).
 */
static uint32_t rc_odp_caps(void)
{
	return IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV |
	       IBV_ODP_SUPPORT_WRITE | IBV_ODP_SUPPORT_READ |
	       IBV_ODP_SUPPORT_ATOMIC | IBV_ODP_SUPPORT_SRQ_RECV;
}

static void fill_odp_caps(struct ibv_odp_caps *c)
{
	const uint32_t sr = IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV;

	c->general_caps = IBV_ODP_SUPPORT | IBV_ODP_SUPPORT_IMPLICIT;
	c->per_transport_caps.rc_odp_caps = rc_odp_caps();
	c->per_transport_caps.uc_odp_caps = sr | IBV_ODP_SUPPORT_WRITE;
	c->per_transport_caps.ud_odp_caps = sr;
}

int shca_query_device_ex(struct ibv_context *ctx,
			 const struct ibv_query_device_ex_input *input,
			 struct ibv_device_attr_ex *attr, size_t attr_size)
{
	struct ibv_device_attr_ex full;

	if (!shca_ctx_live(ctx))
		return shca_ret_errno(-EBADF);	/* a closed context */
	if (input && input->comp_mask)
		return shca_ret_errno(-EINVAL);
	if (attr_size < sizeof(attr->orig_attr))
		return shca_ret_errno(-EINVAL);
	memset(&full, 0, sizeof(full));
	fill_device_attr(to_sctx(ctx)->dev, &full.orig_attr);
	full.comp_mask = 0;
	full.completion_timestamp_mask = ~0ull;
	full.hca_core_clock = SHCA_CORE_CLOCK_KHZ;
	/* IBA Annex A19: ATOMIC WRITE, and FLUSH of the global visibility
	 * placement type (not persistence: docs/conformance.md) */
	full.device_cap_flags_ex = full.orig_attr.device_cap_flags |
				   SHCA_DEVICE_ATOMIC_WRITE |
				   SHCA_DEVICE_FLUSH_GLOBAL;
	full.phys_port_cnt_ex = 1;
	full.max_dm_size = SHCA_MAX_DM_SIZE;
	fill_odp_caps(&full.odp_caps);
	full.xrc_odp_caps = rc_odp_caps();
	shca_tm_fill_caps(&full.tm_caps);
	memcpy(attr, &full, MIN(attr_size, sizeof(full)));
	if (attr_size > sizeof(full))
		memset((char *)attr + sizeof(full), 0,
		       attr_size - sizeof(full));
	return 0;
}

bool shca_port_valid(struct ibv_context *ctx, unsigned int port)
{
	(void)ctx;
	return port == SHCA_PORT_NUM;
}

int shca_query_port(struct ibv_context *ctx, uint8_t port,
		    struct ibv_port_attr *attr, size_t attr_len)
{
	struct shca_device *dev;
	struct ibv_port_attr a;

	if (!shca_ctx_live(ctx))
		return shca_ret_errno(-EBADF);	/* a closed context */
	if (!shca_port_valid(ctx, port))
		return shca_ret_errno(-EINVAL);
	dev = to_sctx(ctx)->dev;
	memset(&a, 0, sizeof(a));
	/* the interface's link: state, and phys_state below */
	shca_device_port_state(dev, &a.state, &a.phys_state);
	a.max_mtu = IBV_MTU_4096;
	a.active_mtu = shca_device_active_mtu(dev);
	a.gid_tbl_len = (int)shca_device_gid_tbl_len(dev);
	a.port_cap_flags = SHCA_PORT_CAP_FLAGS;
	a.max_msg_sz = SHCA_MAX_MSG_SZ;
	a.bad_pkey_cntr = 0;
	a.qkey_viol_cntr = 0;
	a.pkey_tbl_len = SHCA_MAX_PKEYS;
	a.lid = 0;
	a.sm_lid = 0;
	a.lmc = 0;
	a.max_vl_num = 1;
	a.sm_sl = 0;
	a.subnet_timeout = 0;
	a.init_type_reply = 0;
	a.active_width = SHCA_ACTIVE_WIDTH;
	a.active_speed = SHCA_ACTIVE_SPEED;
	a.link_layer = IBV_LINK_LAYER_ETHERNET;
	a.flags = IBV_QPF_GRH_REQUIRED;
	a.port_cap_flags2 = 0;
	memcpy(attr, &a, MIN(attr_len, sizeof(a)));
	if (attr_len > sizeof(a))
		memset((char *)attr + sizeof(a), 0, attr_len - sizeof(a));
	return 0;
}

SHCA_DEFAULT_VERSION(ibv_query_device)
int shca_latest_ibv_query_device(struct ibv_context *context,
		     struct ibv_device_attr *device_attr)
{
	return shca_query_device_ex(context, NULL,
		container_of(device_attr, struct ibv_device_attr_ex, orig_attr),
		sizeof(*device_attr));
}

#undef ibv_query_port
SHCA_DEFAULT_VERSION(ibv_query_port)
int shca_latest_ibv_query_port(struct ibv_context *context, uint8_t port_num,
		   struct _compat_ibv_port_attr *port_attr)
{
	/* rdma-core's struct _compat_ibv_port_attr: up to and with flags */
	return shca_query_port(context, port_num,
			       (struct ibv_port_attr *)port_attr,
			       offsetof(struct ibv_port_attr, port_cap_flags2));
}

/*
 * One GID entry.  Returns 0, EINVAL (bad port or index, bad flags or entry
 * size) or ENODATA (an empty entry), as the kernel's QUERY_GID_ENTRY.
 */
static int query_gid_entry(struct ibv_context *ctx, uint32_t port,
			   uint32_t index, struct ibv_gid_entry *entry)
{
	struct shca_device *dev;
	union ibv_gid gid;
	static const union ibv_gid zero;

	if (!shca_ctx_live(ctx))
		return EBADF;		/* a closed context */
	dev = to_sctx(ctx)->dev;
	if (!shca_port_valid(ctx, port) || index > INT32_MAX)
		return EINVAL;
	if (shca_device_gid(dev, (int)index, &gid))
		return EINVAL;
	if (!memcmp(&gid, &zero, sizeof(gid)))
		return ENODATA;
	memset(entry, 0, sizeof(*entry));
	entry->gid = gid;
	entry->gid_index = index;
	entry->port_num = port;
	entry->gid_type = IBV_GID_TYPE_ROCE_V2;
	entry->ndev_ifindex = dev->ifindex;
	return 0;
}

/*
 * rdma-core marshals each output buffer of an ioctl in a 16-bit length: a
 * larger buffer fails with EINVAL before the kernel sees it.
 */
#define SHCA_IOCTL_ATTR_MAX	UINT16_MAX

/*
 * The kernel's QUERY_GID_ENTRY: flags must be 0, the entry at least a
 * struct ibv_gid_entry (a larger one is zero-filled), port and index
 * within the table (EINVAL), the entry in use (ENODATA).
 */
int _ibv_query_gid_ex(struct ibv_context *context, uint32_t port_num,
		      uint32_t gid_index, struct ibv_gid_entry *entry,
		      uint32_t flags, size_t entry_size)
{
	struct ibv_gid_entry e;
	int ret;

	if (entry_size > SHCA_IOCTL_ATTR_MAX)
		return shca_ret_errno(-EINVAL);
	if (flags || entry_size < sizeof(e))
		return shca_ret_errno(-EINVAL);
	ret = query_gid_entry(context, port_num, gid_index, &e);
	if (ret)
		return shca_ret_errno(ret);
	memset(entry, 0, entry_size);
	memcpy(entry, &e, sizeof(e));
	return 0;
}

/*
 * The kernel's QUERY_GID_TABLE: the valid entries of every port, each
 * entry_size bytes apart, of which the first min(entry_size, 32) are
 * written and the rest zeroed.  flags must be 0; entry_size and
 * max_entries non-zero; too many valid entries for max_entries is EINVAL
 * with nothing written.  Returns the count or -errno.
 */
ssize_t _ibv_query_gid_table(struct ibv_context *context,
			     struct ibv_gid_entry *entries,
			     size_t max_entries, uint32_t flags,
			     size_t entry_size)
{
	struct ibv_gid_entry found[SHCA_NETIF_MAX_ADDRS];
	size_t n = 0, i, copy;
	unsigned int index, len;

	if (!shca_ctx_live(context))
		return -shca_ret_errno(-EBADF);	/* a closed context */
	if (entry_size && max_entries > SHCA_IOCTL_ATTR_MAX / entry_size)
		return -shca_ret_errno(-EINVAL);
	if (flags || !entry_size || !max_entries)
		return -shca_ret_errno(-EINVAL);
	len = shca_device_gid_tbl_len(to_sctx(context)->dev);
	for (index = 0; index < len; index++) {
		struct ibv_gid_entry e;

		if (query_gid_entry(context, SHCA_PORT_NUM, index, &e))
			continue;
		if (n == max_entries || n == ARRAY_SIZE(found))
			return -shca_ret_errno(-EINVAL);
		found[n++] = e;
	}
	copy = MIN(entry_size, sizeof(found[0]));
	for (i = 0; i < n; i++) {
		char *dst = (char *)entries + i * entry_size;

		memcpy(dst, &found[i], copy);
		if (entry_size > copy)
			memset(dst + copy, 0, entry_size - copy);
	}
	return (ssize_t)n;
}

SHCA_DEFAULT_VERSION(ibv_query_gid)
int shca_latest_ibv_query_gid(struct ibv_context *context, uint8_t port_num,
			      int index, union ibv_gid *gid)
{
	struct ibv_gid_entry e;
	int ret;

	if (index < 0) {
		errno = EINVAL;
		return -1;
	}
	ret = query_gid_entry(context, port_num, (uint32_t)index, &e);
	if (ret == ENODATA) {
		memset(gid, 0, sizeof(*gid));
		return 0;
	}
	if (ret) {
		errno = ret;
		return -1;
	}
	*gid = e.gid;
	return 0;
}

int ibv_query_gid_type(struct ibv_context *context, uint8_t port_num,
		       unsigned int index, int *type);
int ibv_query_gid_type(struct ibv_context *context, uint8_t port_num,
		       unsigned int index, int *type)
{
	struct ibv_gid_entry e;
	int ret;

	ret = query_gid_entry(context, port_num, index, &e);
	if (ret == ENODATA) {
		*type = SHCA_GID_TYPE_SYSFS_IB_ROCE_V1;
		return 0;
	}
	if (ret) {
		errno = ret;
		return -1;
	}
	*type = SHCA_GID_TYPE_SYSFS_ROCE_V2;
	return 0;
}

/*
 * rdma-core reads ports/N/pkeys/I from sysfs: a missing port or index is a
 * missing file, -1 with errno ENOENT.
 */
SHCA_DEFAULT_VERSION(ibv_query_pkey)
int shca_latest_ibv_query_pkey(struct ibv_context *context, uint8_t port_num,
			       int index, __be16 *pkey)
{
	if (!shca_ctx_live(context)) {
		errno = EBADF;		/* a closed context */
		return -1;
	}
	if (!shca_port_valid(context, port_num) || index < 0 ||
	    index >= SHCA_MAX_PKEYS) {
		errno = ENOENT;
		return -1;
	}
	*pkey = htobe16(SHCA_DEFAULT_PKEY);
	return 0;
}

int ibv_get_pkey_index(struct ibv_context *context, uint8_t port_num,
		       __be16 pkey)
{
	__be16 pkey_i;
	int i;

	for (i = 0;; i++) {
		if (ibv_query_pkey(context, port_num, i, &pkey_i) < 0)
			return -1;
		if (pkey == pkey_i)
			return i;
	}
}

static int query_rt_values(struct ibv_context *context,
			   struct ibv_values_ex *values)
{
	struct timespec ts;

	if (!shca_ctx_live(context))
		return shca_ret_errno(-EBADF);	/* a closed context */
	if (values->comp_mask & ~(uint32_t)IBV_VALUES_MASK_RAW_CLOCK)
		return shca_ret_errno(-EINVAL);
	if (values->comp_mask & IBV_VALUES_MASK_RAW_CLOCK) {
		clock_gettime(CLOCK_MONOTONIC, &ts);
		/* raw clock in hca_core_clock ticks (1 GHz): nanoseconds */
		values->raw_clock.tv_sec = 0;
		values->raw_clock.tv_nsec =
			(long)((uint64_t)ts.tv_sec * 1000000000ull +
			       (uint64_t)ts.tv_nsec);
	}
	return 0;
}

/* ------------------------------------------------------------------ */
/* Open and close                                                      */

void shca_context_fill_ops(struct shca_context *sctx)
{
	struct verbs_context *v = &sctx->vctx;
	struct ibv_context_ops *o = &v->context.ops;

	shca_unsupported_fill(v);

	v->query_port = shca_query_port;
	v->query_device_ex = shca_query_device_ex;
	v->query_rt_values = query_rt_values;
	v->create_cq_ex = shca_create_cq_ex;
	v->create_qp_ex = shca_create_qp_ex;
	v->create_srq_ex = shca_create_srq_ex;
	v->open_xrcd = shca_open_xrcd;
	v->open_qp = shca_open_qp;
	v->close_xrcd = shca_close_xrcd;
	v->get_srq_num = shca_get_srq_num;
	v->alloc_td = shca_alloc_td;
	v->dealloc_td = shca_dealloc_td;
	v->alloc_parent_domain = shca_alloc_parent_domain;
	v->advise_mr = shca_advise_mr;
	v->alloc_dm = shca_alloc_dm;
	v->free_dm = shca_free_dm;
	v->reg_dm_mr = shca_reg_dm_mr;
	v->post_srq_ops = shca_post_srq_ops;

	o->_compat_query_device = ibv_query_device;
	o->_compat_query_port = ibv_query_port;
	o->poll_cq = shca_poll_cq;
	o->req_notify_cq = shca_req_notify_cq;
	o->post_srq_recv = shca_post_srq_recv;
	o->post_send = shca_post_send;
	o->post_recv = shca_post_recv;
	o->alloc_mw = shca_alloc_mw;
	o->bind_mw = shca_bind_mw;
	o->dealloc_mw = shca_dealloc_mw;
}

/*
 * A context on a command file: cmd_fd becomes the context's (closed by
 * ibv_close_device), uf the file it shares (a reference taken by the
 * caller).  The context or NULL with errno.
 */
static struct ibv_context *context_new(struct ibv_device *device, int cmd_fd,
				       struct shca_ufile *uf)
{
	struct shca_context *sctx;
	struct ibv_context *ctx;
	int ret;

	sctx = calloc(1, sizeof(*sctx));
	if (!sctx)
		return SHCA_ERR_PTR(ENOMEM);
	sctx->dev = to_sdev(device);
	sctx->ufile = uf;
	pthread_mutex_init(&sctx->lock, NULL);
	ret = shca_event_queue_init(&sctx->async);
	if (ret)
		goto err_free;

	ctx = &sctx->vctx.context;
	ctx->device = device;
	ctx->cmd_fd = cmd_fd;
	ctx->async_fd = sctx->async.fd;
	ctx->num_comp_vectors = SHCA_NUM_COMP_VECTORS;
	pthread_mutex_init(&ctx->mutex, NULL);
	ctx->abi_compat = __VERBS_ABI_IS_EXTENDED;
	sctx->vctx.sz = sizeof(struct verbs_context);
	shca_context_fill_ops(sctx);
	ret = shca_ctx_register(ctx);
	if (ret)
		goto err_mutex;
	/* port events from now on, and the port's state kept current */
	shca_device_link_attach(sctx);
	return ctx;

err_mutex:
	pthread_mutex_destroy(&ctx->mutex);
	shca_event_queue_destroy(&sctx->async);
err_free:
	free(sctx);
	errno = -ret;
	return NULL;
}

SHCA_DEFAULT_VERSION(ibv_open_device)
struct ibv_context *shca_latest_ibv_open_device(struct ibv_device *device)
{
	struct shca_ufile *uf;
	struct ibv_context *ctx;
	int fd, err;

	shca_log_init();
	/* the process's port (its slot) is taken here, so that the process
	 * that finds every port taken learns it now, with a message that
	 * says what to do (common/slot.c), not later from ibv_create_qp */
	if (!shca_slot_get())
		return NULL;
	/*
	 * cmd_fd stands for the uverbs file: a real descriptor private to the
	 * context, so that clients may dup() or poll it harmlessly, and
	 * import the context from a dup of it (import.c).
	 */
	fd = memfd_create(SHCA_CMD_FD_NAME, MFD_CLOEXEC);
	if (fd < 0)
		return NULL;
	uf = shca_ufile_new(to_sdev(device), fd);
	if (!uf) {
		err = errno;
		close(fd);
		errno = err;
		return NULL;
	}
	ctx = context_new(device, fd, uf);
	if (!ctx) {
		err = errno;
		shca_ufile_put(uf);
		close(fd);
		errno = err;
		return NULL;
	}
	shca_dbg("opened %s", device->name);
	return ctx;
}

/* import.c: a second context on cmd_fd's file (its reference taken). */
struct ibv_context *shca_context_import(struct shca_ufile *uf, int cmd_fd)
{
	return context_new(&shca_ufile_device(uf)->ibdev, cmd_fd, uf);
}

/* Destroy an object found by shca_obj_collect (its use consumed). */
static int destroy_left(enum shca_otype t, struct shca_obj *o)
{
	switch (t) {
	case SHCA_OT_QP:
		return shca_qp_destroy(container_of(o, struct shca_qp, obj),
				       false);
	case SHCA_OT_AH:
		return shca_ah_destroy(container_of(o, struct shca_ah, obj));
	case SHCA_OT_MW:
		return shca_mw_destroy(container_of(o, struct shca_mw, obj));
	case SHCA_OT_MR:
		return shca_mr_destroy(container_of(o, struct shca_mr, obj));
	case SHCA_OT_SRQ:
		return shca_srq_destroy(container_of(o, struct shca_srq, obj),
					false);
	case SHCA_OT_CQ:
		return shca_cq_destroy(container_of(o, struct shca_cq, obj),
				       false);
	case SHCA_OT_PD:
		return shca_pd_destroy(container_of(o, struct shca_pd, obj));
	case SHCA_OT_TD:
		return shca_td_destroy(container_of(o, struct shca_td, obj));
	case SHCA_OT_DM:
		return shca_dm_destroy(container_of(o, struct shca_dm, obj));
	default:
		shca_obj_put(o);
		return -EINVAL;
	}
}

/*
 * What the client left in a context that closes goes with it, as the
 * kernel's uverbs cleanup frees a closed file's objects: users before
 * what they use.  An object another thread is working on stays (leaked,
 * never freed under it).  Completion channels are the client's files,
 * as with rdma-core: they stay, and ibv_destroy_comp_channel frees them.
 */
static void close_children(struct ibv_context *ctx)
{
	/* PDs twice: parent domains, then the PDs they held (pdom.c) */
	static const enum shca_otype order[] = {
		SHCA_OT_QP, SHCA_OT_AH, SHCA_OT_MW, SHCA_OT_MR, SHCA_OT_DM,
		SHCA_OT_SRQ, SHCA_OT_CQ, SHCA_OT_PD, SHCA_OT_PD, SHCA_OT_TD,
	};
	unsigned int i;

	for (i = 0; i < ARRAY_SIZE(order); i++) {
		bool first_pds = order[i] == SHCA_OT_PD &&
				 i + 1 < ARRAY_SIZE(order) &&
				 order[i + 1] == SHCA_OT_PD;
		struct shca_obj **v;
		int n, j, left = 0;

		n = shca_obj_collect(order[i], ctx, &v);
		for (j = 0; j < n; j++) {
			if (first_pds &&
			    !shca_pd_is_parent(container_of(v[j],
							    struct shca_pd,
							    obj))) {
				shca_obj_put(v[j]);
				continue;
			}
			if (destroy_left(order[i], v[j]))
				left++;
		}
		free(v);
		if (left)
			shca_warn("%s: %d objects (type %d) busy at close, "
				  "left", ctx->device->name, left,
				  (int)order[i]);
	}
}

/*
 * rdma-core returns 0 always; a context that is not open (closed
 * already) is -1 with errno EBADF, never freed twice.  Its memory waits
 * in the quarantine (handle.c), so that the objects' context pointers
 * still lead to ops that refuse them.
 */
SHCA_DEFAULT_VERSION(ibv_close_device)
int shca_latest_ibv_close_device(struct ibv_context *context)
{
	struct shca_context *sctx = to_sctx(context);

	if (!shca_ctx_unregister(context)) {
		errno = EBADF;
		return -1;
	}
	shca_import_close(context);
	shca_xqp_close_ctx(context);
	shca_xqp_quiesce(context);
	close_children(context);
	shca_device_link_detach(sctx);
	shca_ufile_put(sctx->ufile);
	close(context->cmd_fd);
	shca_event_queue_destroy(&sctx->async);
	pthread_mutex_destroy(&sctx->lock);
	shca_quarantine(sctx, sizeof(*sctx));
	return 0;
}
