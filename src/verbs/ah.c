// SPDX-License-Identifier: MIT
/*
 * Addressing: address handles, address vectors built from a received
 * completion, and the multicast groups UD QPs join.
 *
 * The port is RoCE v2 (link layer Ethernet): a destination is a GID, the
 * GRH is required (is_global), and the source GID index must name a GID
 * of the port.  The checks and their errno are the core's
 * (rdma_check_ah_attr, rdma_get_gid_attr): EINVAL, or ENODATA for an
 * index inside the GID table whose entry is empty.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/ip.h>

#include "shca.h"
#include "../net/transport.h"
#include "../common/env.h"
#include "../common/slot.h"
#include "../shm/host.h"

static bool gid_is_zero(const union ibv_gid *gid)
{
	static const union ibv_gid zero;

	return !memcmp(gid, &zero, sizeof(*gid));
}

int shca_check_ah_attr(struct ibv_context *ctx,
		       const struct ibv_ah_attr *attr)
{
	union ibv_gid sgid;

	if (!shca_port_valid(ctx, attr->port_num))
		return -EINVAL;
	if (!attr->is_global)
		return -EINVAL;		/* RoCE: the GRH is required */
	if (shca_device_gid(to_sctx(ctx)->dev, attr->grh.sgid_index, &sgid))
		return -EINVAL;		/* past the GID table */
	if (gid_is_zero(&sgid))
		return -ENODATA;	/* an empty entry */
	return 0;
}

/* ------------------------------------------------------------------ */
/* Address handles                                                     */

/*
 * A PD the handle does not name (destroyed, garbled): EINVAL, as the
 * kernel's CREATE_AH answers a failed PD lookup.
 */
struct ibv_ah *shca_create_ah(struct ibv_pd *pd, struct ibv_ah_attr *attr)
{
	struct shca_context *sctx;
	struct shca_pd *spd;
	struct shca_ah *ah;
	int ret;

	if (!pd || !attr)
		return SHCA_ERR_PTR(EINVAL);
	spd = shca_pd_lookup(pd, NULL);
	if (!spd)
		return SHCA_ERR_PTR(EINVAL);
	sctx = to_sctx(pd->context);	/* an imported PD's: the importer */
	ret = shca_check_ah_attr(pd->context, attr);
	if (ret)
		goto err_pd;

	ret = -ENOMEM;
	pthread_mutex_lock(&sctx->lock);
	if (sctx->nah >= SHCA_MAX_AH) {
		pthread_mutex_unlock(&sctx->lock);
		goto err_pd;
	}
	sctx->nah++;
	pthread_mutex_unlock(&sctx->lock);

	ah = calloc(1, sizeof(*ah));
	if (ah) {
		ret = shca_obj_add(&ah->obj, SHCA_OT_AH, pd->context, &ah->ibah,
				   &ah->ibah.handle);
		if (ret) {
			free(ah);
			ah = NULL;
		}
	}
	if (!ah) {
		pthread_mutex_lock(&sctx->lock);
		sctx->nah--;
		pthread_mutex_unlock(&sctx->lock);
		goto err_pd;
	}
	ah->ibah.context = pd->context;
	ah->ibah.pd = pd;
	ah->pd = spd;
	ah->attr = *attr;
	/* the same-host path: a unicast destination on this host (unless
	 * SOFTHCA_NET=1), and this host's members of a multicast group */
	ah->local = (!shca_net_forced() &&
		     shca_gid_is_local(&attr->grh.dgid)) ||
		    attr->grh.dgid.raw[0] == 0xff;
	shca_pd_get(ah->pd);
	shca_obj_put(&spd->obj);
	return &ah->ibah;

err_pd:
	shca_obj_put(&spd->obj);
	return SHCA_ERR_PTR(-ret);
}

/* ah holds a use (shca_ah_lookup), which this consumes. */
int shca_ah_destroy(struct shca_ah *ah)
{
	struct shca_context *sctx = to_sctx(ah->obj.ctx);
	int ret = shca_obj_claim(&ah->obj, NULL);

	if (ret) {
		shca_obj_put(&ah->obj);
		return ret;
	}
	shca_pd_put(ah->pd);
	pthread_mutex_lock(&sctx->lock);
	sctx->nah--;
	pthread_mutex_unlock(&sctx->lock);
	shca_obj_retire(&ah->obj, ah, sizeof(*ah));
	return 0;
}

/* A handle that names no AH: ENOENT, as the kernel's object lookup. */
int shca_destroy_ah(struct ibv_ah *ibah)
{
	struct shca_ah *ah = shca_ah_lookup(ibah, NULL);

	if (!ah)
		return -ENOENT;
	return shca_ah_destroy(ah);
}

/* ------------------------------------------------------------------ */
/* Address vectors from a received completion                          */

/*
 * The index of the first GID table entry holding gid with this type, as
 * rdma-core's ibv_find_gid_index walks ibv_query_gid and
 * ibv_query_gid_type: an empty entry reads as a zero GID of type RoCE v1,
 * every other entry here is RoCE v2.  -1 with errno EINVAL (what
 * ibv_query_gid answers past the table) if none.
 */
static int find_gid_index(struct ibv_context *ctx, uint8_t port_num,
			  const union ibv_gid *gid, bool roce_v2)
{
	struct shca_device *dev = to_sctx(ctx)->dev;
	union ibv_gid g;
	int i;

	if (!shca_port_valid(ctx, port_num))
		goto none;
	for (i = 0; !shca_device_gid(dev, i, &g); i++)
		if (gid_is_zero(&g) != roce_v2 &&
		    !memcmp(&g, gid, sizeof(g)))
			return i;
none:
	errno = EINVAL;
	return -1;
}

static void ipv4_to_gid(uint32_t addr_be, union ibv_gid *gid)
{
	memset(gid, 0, sizeof(*gid));
	gid->raw[10] = 0xff;
	gid->raw[11] = 0xff;
	memcpy(&gid->raw[12], &addr_be, 4);
}

/* One's complement checksum of an IPv4 header, its check field zeroed. */
static uint16_t ipv4_header_csum(const struct iphdr *ip)
{
	uint16_t w[10];
	uint32_t sum = 0;
	int i;

	memcpy(w, ip, sizeof(w));
	w[5] = 0;
	for (i = 0; i < 10; i++)
		sum += w[i];
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)~sum;
}

/*
 * What the 40 bytes before a UD message hold on RoCE v2: an IPv6 header,
 * or an IPv4 header in the last 20 (the RoCE v2 annex).  4, 6, or -1 with
 * errno EPROTONOSUPPORT, decided as rdma-core and the kernel decide: not
 * IPv6 but IPv4 -> 4; IPv6 version bits with a well-formed IPv4 header
 * (IHL 5, right checksum) in the last 20 bytes -> 4; else 6.
 */
static int grh_ip_version(const struct ibv_grh *grh, struct iphdr *ip4)
{
	memcpy(ip4, (const uint8_t *)grh + 20, sizeof(*ip4));
	if ((be32toh(grh->version_tclass_flow) >> 28) != 6) {
		if (ip4->version == 4)
			return 4;
		errno = EPROTONOSUPPORT;
		return -1;
	}
	if (ip4->ihl != 5)
		return 6;
	return ipv4_header_csum(ip4) == ip4->check ? 4 : 6;
}

static int ah_from_ipv4(struct ibv_context *ctx, uint8_t port_num,
			const struct iphdr *ip, struct ibv_ah_attr *ah)
{
	union ibv_gid local;
	int idx;

	/* a multicast destination is not one of our GIDs */
	if (IN_MULTICAST(ntohl(ip->daddr))) {
		errno = EINVAL;
		return -1;
	}
	ipv4_to_gid(ip->daddr, &local);
	idx = find_gid_index(ctx, port_num, &local, true);
	if (idx < 0)
		return -1;
	ipv4_to_gid(ip->saddr, &ah->grh.dgid);
	ah->grh.sgid_index = (uint8_t)idx;
	ah->grh.hop_limit = ip->ttl;
	ah->grh.traffic_class = ip->tos;
	return 0;
}

#define IB_NEXT_HDR	0x1b	/* RoCE v1: the IB transport follows */

static int ah_from_ipv6(struct ibv_context *ctx, uint8_t port_num,
			const struct ibv_grh *grh, struct ibv_ah_attr *ah)
{
	bool roce_v2;
	int idx;

	if (grh->dgid.raw[0] == 0xff) {
		errno = EINVAL;	/* sent to a multicast group */
		return -1;
	}
	if (grh->next_hdr == IPPROTO_UDP) {
		roce_v2 = true;
	} else if (grh->next_hdr == IB_NEXT_HDR) {
		roce_v2 = false;
	} else {
		errno = EPROTONOSUPPORT;
		return -1;
	}
	idx = find_gid_index(ctx, port_num, &grh->dgid, roce_v2);
	if (idx < 0)
		return -1;
	ah->grh.dgid = grh->sgid;
	ah->grh.sgid_index = (uint8_t)idx;
	ah->grh.hop_limit = grh->hop_limit;
	ah->grh.traffic_class =
		(uint8_t)(be32toh(grh->version_tclass_flow) >> 20);
	return 0;
}

/*
 * The address vector that answers the sender of a received message: its
 * source becomes our destination, and the GID it was sent to names our
 * source GID.  As rdma-core 44: 0, or -1 with errno.
 */
int ibv_init_ah_from_wc(struct ibv_context *context, uint8_t port_num,
			struct ibv_wc *wc, struct ibv_grh *grh,
			struct ibv_ah_attr *ah_attr)
{
	struct iphdr ip4;

	if (!shca_ctx_live(context)) {
		errno = EBADF;		/* a closed context */
		return -1;
	}
	memset(ah_attr, 0, sizeof(*ah_attr));
	ah_attr->grh.flow_label = be32toh(grh->version_tclass_flow) & 0xfffff;
	ah_attr->dlid = wc->slid;
	ah_attr->sl = wc->sl;
	ah_attr->src_path_bits = wc->dlid_path_bits;
	ah_attr->port_num = port_num;
	if (!(wc->wc_flags & IBV_WC_GRH))
		return 0;

	ah_attr->is_global = 1;
	switch (grh_ip_version(grh, &ip4)) {
	case 4:
		return ah_from_ipv4(context, port_num, &ip4, ah_attr);
	case 6:
		return ah_from_ipv6(context, port_num, grh, ah_attr);
	default:
		return -1;
	}
}

struct ibv_ah *ibv_create_ah_from_wc(struct ibv_pd *pd, struct ibv_wc *wc,
				     struct ibv_grh *grh, uint8_t port_num)
{
	struct ibv_ah_attr attr;
	struct shca_pd *spd;

	/* the context of a PD that is live (what create_ah will check) */
	spd = shca_pd_lookup(pd, NULL);
	if (!spd)
		return SHCA_ERR_PTR(EINVAL);
	shca_obj_put(&spd->obj);
	if (ibv_init_ah_from_wc(pd->context, port_num, wc, grh, &attr))
		return NULL;
	return shca_create_ah(pd, &attr);
}

/* ------------------------------------------------------------------ */
/* Multicast                                                           */

/*
 * The groups this process's QPs joined, with the number of QPs in each:
 * at most SHCA_MAX_MCAST_GRP groups of SHCA_MAX_MCAST_QP_ATTACH QPs
 * (ENOMEM beyond, as rxe).  Each QP keeps its own (GID, LID) list, as
 * uverbs does: attaching a pair twice succeeds once, detaching a pair
 * that is not there is EINVAL.  On RoCE the LID plays no part.
 */
struct mcast_group {
	union ibv_gid gid;
	unsigned int nqps;
	struct mcast_group *next;
};

static pthread_mutex_t mcast_lock = PTHREAD_MUTEX_INITIALIZER;
static struct mcast_group *mcast_groups;
static unsigned int mcast_ngroups;

/* IPv6 multicast ff00::/8, or IPv4-mapped 224.0.0.0/4 */
static bool gid_is_multicast(const union ibv_gid *gid)
{
	static const uint8_t v4mapped[12] = { [10] = 0xff, [11] = 0xff };

	if (gid->raw[0] == 0xff)
		return true;
	return !memcmp(gid->raw, v4mapped, sizeof(v4mapped)) &&
	       (gid->raw[12] & 0xf0) == 0xe0;
}

static struct mcast_group **group_find(const union ibv_gid *gid)
{
	struct mcast_group **pp;

	for (pp = &mcast_groups; *pp; pp = &(*pp)->next)
		if (!memcmp(&(*pp)->gid, gid, sizeof(*gid)))
			return pp;
	return pp;
}

static bool qp_in_group(const struct shca_qp *qp, const union ibv_gid *gid)
{
	const struct shca_mcast *m;

	for (m = qp->mcast; m; m = m->next)
		if (!memcmp(&m->gid, gid, sizeof(*gid)))
			return true;
	return false;
}

/* A QP joins gid's group; with mcast_lock held.  0 or -errno. */
static int group_join(const union ibv_gid *gid)
{
	struct mcast_group **pp = group_find(gid), *g = *pp;

	if (!g) {
		if (mcast_ngroups >= SHCA_MAX_MCAST_GRP)
			return -ENOMEM;
		g = calloc(1, sizeof(*g));
		if (!g)
			return -ENOMEM;
		g->gid = *gid;
		*pp = g;
		mcast_ngroups++;
	}
	if (g->nqps >= SHCA_MAX_MCAST_QP_ATTACH)
		return -ENOMEM;
	g->nqps++;
	return 0;
}

static void group_leave(const union ibv_gid *gid)
{
	struct mcast_group **pp = group_find(gid), *g = *pp;

	if (!g)
		return;
	if (--g->nqps == 0) {
		*pp = g->next;
		free(g);
		mcast_ngroups--;
	}
}

static int attach_mcast(struct shca_qp *qp, const union ibv_gid *gid,
			uint16_t lid)
{
	struct ibv_qp *ibqp = &qp->ibqp;
	struct shca_mcast *m, **pp;
	int ret = 0;

	if (ibqp->qp_type != IBV_QPT_UD || !gid || !gid_is_multicast(gid))
		return -EINVAL;
	pthread_mutex_lock(&qp->lock);
	for (pp = &qp->mcast; (m = *pp); pp = &m->next)
		if (m->lid == lid && !memcmp(&m->gid, gid, sizeof(*gid)))
			goto out;	/* already attached */
	m = calloc(1, sizeof(*m));
	if (!m) {
		ret = -ENOMEM;
		goto out;
	}
	m->gid = *gid;
	m->lid = lid;
	pthread_mutex_lock(&mcast_lock);
	if (!qp_in_group(qp, gid)) {
		ret = group_join(gid);
		/* senders on this host find the members in the host table */
		if (!ret) {
			ret = shca_host_mcast_attach(
				gid, shca_qpn_slot(ibqp->qp_num), ibqp->qp_num);
			if (ret)
				group_leave(gid);
			else
				/* and from other hosts, over IP multicast */
				shca_net_mcast(qp, gid, true);
		}
	}
	pthread_mutex_unlock(&mcast_lock);
	if (ret) {
		free(m);
		goto out;
	}
	*pp = m;
	qp->nmcast++;
out:
	pthread_mutex_unlock(&qp->lock);
	return ret;
}

static int detach_mcast(struct shca_qp *qp, const union ibv_gid *gid,
			uint16_t lid)
{
	struct ibv_qp *ibqp = &qp->ibqp;
	struct shca_mcast *m, **pp;
	int ret = -EINVAL;

	if (!gid)
		return -EINVAL;
	pthread_mutex_lock(&qp->lock);
	for (pp = &qp->mcast; (m = *pp); pp = &m->next) {
		if (m->lid != lid || memcmp(&m->gid, gid, sizeof(*gid)))
			continue;
		*pp = m->next;
		qp->nmcast--;
		free(m);
		pthread_mutex_lock(&mcast_lock);
		if (!qp_in_group(qp, gid)) {
			group_leave(gid);
			shca_host_mcast_detach(gid, shca_qpn_slot(ibqp->qp_num),
					       ibqp->qp_num);
			shca_net_mcast(qp, gid, false);
		}
		pthread_mutex_unlock(&mcast_lock);
		ret = 0;
		break;
	}
	pthread_mutex_unlock(&qp->lock);
	return ret;
}

/* A QP the handle does not name: EINVAL, as the kernel's ATTACH_MCAST. */
int shca_attach_mcast(struct ibv_qp *ibqp, const union ibv_gid *gid,
		      uint16_t lid)
{
	struct shca_qp *qp = shca_qp_lookup_obj(ibqp, NULL);
	int ret;

	if (!qp)
		return -EINVAL;
	ret = attach_mcast(qp, gid, lid);
	shca_obj_put(&qp->obj);
	return ret;
}

/* A QP the handle does not name: EINVAL, as the kernel's DETACH_MCAST. */
int shca_detach_mcast(struct ibv_qp *ibqp, const union ibv_gid *gid,
		      uint16_t lid)
{
	struct shca_qp *qp = shca_qp_lookup_obj(ibqp, NULL);
	int ret;

	if (!qp)
		return -EINVAL;
	ret = detach_mcast(qp, gid, lid);
	shca_obj_put(&qp->obj);
	return ret;
}

/* ------------------------------------------------------------------ */
/* Exported verbs                                                      */

SHCA_DEFAULT_VERSION(ibv_create_ah)
struct ibv_ah *shca_latest_ibv_create_ah(struct ibv_pd *pd,
					 struct ibv_ah_attr *attr)
{
	return shca_create_ah(pd, attr);
}

SHCA_DEFAULT_VERSION(ibv_destroy_ah)
int shca_latest_ibv_destroy_ah(struct ibv_ah *ah)
{
	return shca_ret_errno(shca_destroy_ah(ah));
}

SHCA_DEFAULT_VERSION(ibv_attach_mcast)
int shca_latest_ibv_attach_mcast(struct ibv_qp *qp, const union ibv_gid *gid,
				 uint16_t lid)
{
	return shca_ret_errno(shca_attach_mcast(qp, gid, lid));
}

SHCA_DEFAULT_VERSION(ibv_detach_mcast)
int shca_latest_ibv_detach_mcast(struct ibv_qp *qp, const union ibv_gid *gid,
				 uint16_t lid)
{
	return shca_ret_errno(shca_detach_mcast(qp, gid, lid));
}
