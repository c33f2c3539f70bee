// SPDX-License-Identifier: MIT
/*
 * Datagram rsockets, the UD side: one UD QP per local address a socket
 * sends from, address handles from the routes rdma_cm resolves, the
 * destinations a socket knows, and the first contact over the socket's
 * UDP port (rdma-core's udp_svc), described in rs_dgram.c.
 */
#include <arpa/inet.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/uio.h>

#include "rs_dgram.h"

socklen_t ds_sa_len(const struct sockaddr *sa)
{
	return sa->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6) :
					   sizeof(struct sockaddr_in);
}

/* Same family, port and address (what names a datagram socket) */
bool ds_same_addr(const struct sockaddr *a, const struct sockaddr *b)
{
	const struct sockaddr_in *a4 = (const void *)a, *b4 = (const void *)b;
	const struct sockaddr_in6 *a6 = (const void *)a, *b6 = (const void *)b;

	if (a->sa_family != b->sa_family)
		return false;
	if (a->sa_family == AF_INET)
		return a4->sin_port == b4->sin_port &&
		       a4->sin_addr.s_addr == b4->sin_addr.s_addr;
	return a6->sin6_port == b6->sin6_port &&
	       !memcmp(&a6->sin6_addr, &b6->sin6_addr, 16);
}

void ds_set_port(struct sockaddr *sa, uint16_t be_port)
{
	if (sa->sa_family == AF_INET)
		((struct sockaddr_in *)sa)->sin_port = be_port;
	else
		((struct sockaddr_in6 *)sa)->sin6_port = be_port;
}

uint16_t ds_get_port(const struct sockaddr *sa)
{
	return sa->sa_family == AF_INET ?
	       ((const struct sockaddr_in *)sa)->sin_port :
	       ((const struct sockaddr_in6 *)sa)->sin6_port;
}

/* rdma-core's rs_any_addr: wildcard and loopback both need the route */
static bool any_addr(const struct sockaddr *sa)
{
	const struct sockaddr_in *s4 = (const void *)sa;
	const struct sockaddr_in6 *s6 = (const void *)sa;

	if (sa->sa_family == AF_INET)
		return s4->sin_addr.s_addr == htonl(INADDR_ANY) ||
		       s4->sin_addr.s_addr == htonl(INADDR_LOOPBACK);
	return !memcmp(&s6->sin6_addr, &in6addr_any, 16) ||
	       !memcmp(&s6->sin6_addr, &in6addr_loopback, 16);
}

void ds_format_hdr(struct ds_header *h, const struct sockaddr *sa)
{
	const struct sockaddr_in *s4 = (const void *)sa;
	const struct sockaddr_in6 *s6 = (const void *)sa;

	memset(h, 0, sizeof(*h));
	if (sa->sa_family == AF_INET) {
		h->version = 4;
		h->length = DS_IPV4_HDR_LEN;
		h->port = s4->sin_port;
		h->addr.ipv4 = s4->sin_addr.s_addr;
	} else {
		h->version = 6;
		h->length = DS_IPV6_HDR_LEN;
		h->port = s6->sin6_port;
		h->addr.ipv6.flowinfo = s6->sin6_flowinfo;
		memcpy(h->addr.ipv6.addr, &s6->sin6_addr, 16);
	}
}

/* The sender's address from a checked ds_header (rdma-core's ds_set_src:
 * copies what fits, *len becomes what was copied) */
/* ------------------------------------------------------------------ */
/* QPs, address handles, destinations                                  */

int ds_post_recv(struct rsocket *rs, struct ds_qp *qp, uint32_t offset)
{
	struct ibv_sge sge[2] = {
		{ (uintptr_t)qp->rbuf + rs->rbuf_size, DS_GRH_LEN,
		  qp->rmr->lkey },
		{ (uintptr_t)qp->rbuf + offset, RS_SNDLOWAT, qp->rmr->lkey },
	};
	struct ibv_recv_wr wr = { .wr_id = DS_WR_RECV | offset,
				  .sg_list = sge, .num_sge = 2 }, *bad;

	return -ibv_post_recv(qp->id->qp, &wr, &bad);
}

static int gid_index(struct ibv_context *verbs, uint8_t port,
		     const union ibv_gid *gid)
{
	struct ibv_port_attr pa;
	union ibv_gid g;
	int i;

	if (ibv_query_port(verbs, port, &pa))
		return -1;
	for (i = 0; i < pa.gid_tbl_len; i++)
		if (!ibv_query_gid(verbs, port, i, &g) &&
		    !memcmp(&g, gid, sizeof(g)))
			return i;
	return -1;
}

/*
 * An address handle from qp's address to dst, from the route rdma_cm
 * resolves (rdma-core's udp_svc_create_ah: a GRH when the path has more
 * than one hop, which every RoCE path has).
 */
static struct ibv_ah *make_ah(struct ds_qp *qp, const struct sockaddr *dst)
{
	struct sockaddr_storage src = qp->addr;
	struct ibv_sa_path_rec *p;
	struct rdma_cm_id *id;
	struct ibv_ah_attr attr;
	struct ibv_ah *ah = NULL;
	int idx;

	if (rdma_create_id(NULL, &id, NULL, RDMA_PS_UDP))
		return NULL;
	ds_set_port((struct sockaddr *)&src, 0);
	if (rdma_resolve_addr(id, (struct sockaddr *)&src,
			      (struct sockaddr *)dst, DS_RESOLVE_MS) ||
	    rdma_resolve_route(id, DS_RESOLVE_MS) || !id->route.num_paths)
		goto out;
	p = id->route.path_rec;
	memset(&attr, 0, sizeof(attr));
	if (p->hop_limit > 1) {
		idx = gid_index(qp->id->verbs, qp->id->port_num, &p->sgid);
		attr.is_global = 1;
		attr.grh.dgid = p->dgid;
		attr.grh.flow_label = be32toh(p->flow_label);
		attr.grh.sgid_index = idx < 0 ? 0 : (uint8_t)idx;
		attr.grh.hop_limit = p->hop_limit;
		attr.grh.traffic_class = p->traffic_class;
	}
	attr.dlid = be16toh(p->dlid);
	attr.sl = p->sl;
	attr.port_num = qp->id->port_num;
	ah = ibv_create_ah(qp->id->pd, &attr);
out:
	rdma_destroy_id(id);
	return ah;
}

void ds_free_qp(struct ds_qp *qp)
{
	if (qp->self_ah)
		ibv_destroy_ah(qp->self_ah);
	if (qp->id && qp->id->qp)
		rdma_destroy_qp(qp->id);
	if (qp->cq)
		ibv_destroy_cq(qp->cq);
	if (qp->cq_chan)
		ibv_destroy_comp_channel(qp->cq_chan);
	if (qp->smr)
		ibv_dereg_mr(qp->smr);
	if (qp->rmr)
		ibv_dereg_mr(qp->rmr);
	free(qp->rbuf);
	if (qp->id)
		rdma_destroy_id(qp->id);
	free(qp);
}

static int create_qp(struct rsocket *rs, const struct sockaddr *src,
		     struct ds_qp **out)
{
	struct ibv_qp_init_attr attr;
	struct sockaddr_storage bind;
	struct ibv_port_attr pa;
	struct ds_qp *qp;
	int i, ret;

	qp = calloc(1, sizeof(*qp));
	if (!qp)
		return -ENOMEM;
	qp->src.kind = RS_SRC_DSQP;
	memcpy(&qp->addr, src, ds_sa_len(src));
	ds_format_hdr(&qp->hdr, src);
	/* the id takes a port of its own: the socket's is the UDP's */
	memcpy(&bind, src, ds_sa_len(src));
	ds_set_port((struct sockaddr *)&bind, 0);
	ret = -ENOMEM;
	if (rdma_create_id(NULL, &qp->id, qp, RDMA_PS_UDP) ||
	    rdma_bind_addr(qp->id, (struct sockaddr *)&bind))
		goto err_errno;
	/*
	 * A loopback source binds no device (the kernel's rule, addr.c):
	 * resolving the address itself attaches softhca_lo.  rdma-core's
	 * rsocket, on a kernel, has no device for 127.0.0.1 and fails here;
	 * softhca has one, and udpong on 127.0.0.1 works.
	 */
	if (!qp->id->verbs &&
	    rdma_resolve_addr(qp->id, NULL, (struct sockaddr *)src, 2000))
		goto err_errno;
	if (!qp->id->verbs || !qp->id->pd)
		goto err;
	qp->rbuf = calloc(1, rs->rbuf_size + DS_GRH_LEN);
	if (!qp->rbuf)
		goto err;
	qp->smr = ibv_reg_mr(qp->id->pd, rs->dg.sbuf,
			     (size_t)rs->sq_size * RS_SNDLOWAT,
			     IBV_ACCESS_LOCAL_WRITE);
	qp->rmr = ibv_reg_mr(qp->id->pd, qp->rbuf,
			     rs->rbuf_size + DS_GRH_LEN,
			     IBV_ACCESS_LOCAL_WRITE);
	qp->cq_chan = ibv_create_comp_channel(qp->id->verbs);
	if (!qp->smr || !qp->rmr || !qp->cq_chan)
		goto err_errno;
	qp->cq = ibv_create_cq(qp->id->verbs, rs->sq_size + rs->rq_size, qp,
			       qp->cq_chan, 0);
	if (!qp->cq)
		goto err_errno;
	memset(&attr, 0, sizeof(attr));
	attr.qp_context = qp;
	attr.send_cq = qp->cq;
	attr.recv_cq = qp->cq;
	attr.qp_type = IBV_QPT_UD;
	attr.sq_sig_all = 1;
	attr.cap.max_send_wr = rs->sq_size;
	attr.cap.max_recv_wr = rs->rq_size;
	attr.cap.max_send_sge = 1;
	attr.cap.max_recv_sge = 2;
	attr.cap.max_inline_data = rs->sq_inline;
	if (rdma_create_qp(qp->id, NULL, &attr))
		goto err_errno;
	rs->sq_inline = attr.cap.max_inline_data;
	qp->max_msg = RS_SNDLOWAT;
	if (!ibv_query_port(qp->id->verbs, qp->id->port_num, &pa))
		qp->max_msg = MIN(qp->max_msg, 128u << pa.active_mtu);
	qp->self_ah = make_ah(qp, src);
	if (!qp->self_ah)
		goto err_errno;
	{
		int fl = fcntl(qp->cq_chan->fd, F_GETFL);

		if (fl < 0 || fcntl(qp->cq_chan->fd, F_SETFL,
				    fl | O_NONBLOCK) < 0)
			goto err_errno;
	}
	ret = rs_epoll_add(rs, qp->cq_chan->fd, &qp->src);
	if (ret)
		goto err;
	for (i = 0; i < rs->rq_size; i++) {
		ret = ds_post_recv(rs, qp, (uint32_t)i * RS_SNDLOWAT);
		if (ret) {
			rs_epoll_del(rs, qp->cq_chan->fd);
			goto err;
		}
	}
	qp->next = rs->dg.qps;
	rs->dg.qps = qp;
	*out = qp;
	return 0;
err_errno:
	ret = errno ? -errno : -ENOMEM;
err:
	ds_free_qp(qp);
	return ret;
}

/*
 * Our address towards dst: the UDP socket's, or, bound to a wildcard or
 * loopback address, the one the routing table picks (rdma-core's
 * ds_get_src_addr), with the socket's port.
 */
static int src_addr(struct rsocket *rs, const struct sockaddr *dst,
		    struct sockaddr_storage *src)
{
	socklen_t len = sizeof(*src);
	uint16_t port;
	int fd, ret = 0;

	if (getsockname(rs->dg.udp, (struct sockaddr *)src, &len))
		return -errno;
	if (!any_addr((struct sockaddr *)src))
		return 0;
	port = ds_get_port((struct sockaddr *)src);
	fd = socket(dst->sa_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	len = sizeof(*src);
	if (connect(fd, dst, ds_sa_len(dst)) ||
	    getsockname(fd, (struct sockaddr *)src, &len))
		ret = -errno;
	close(fd);
	ds_set_port((struct sockaddr *)src, port);
	return ret;
}

int ds_get_dest(struct rsocket *rs, const struct sockaddr *addr,
		    struct ds_dest **out)
{
	struct sockaddr_storage src;
	struct ds_dest *d;
	struct ds_qp *qp;
	int ret;

	for (d = rs->dg.dests; d; d = d->next)
		if (ds_same_addr((struct sockaddr *)&d->addr, addr))
			goto found;
	if (rs->dg.ndests >= RS_MAX_DESTS)
		return -ENOBUFS;
	ret = src_addr(rs, addr, &src);
	if (ret)
		return ret;
	for (qp = rs->dg.qps; qp; qp = qp->next)
		if (ds_same_addr((struct sockaddr *)&qp->addr,
			      (struct sockaddr *)&src))
			break;
	if (!qp) {
		ret = create_qp(rs, (struct sockaddr *)&src, &qp);
		if (ret)
			return ret;
	}
	d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	memcpy(&d->addr, addr, ds_sa_len(addr));
	d->qp = qp;
	d->next = rs->dg.dests;
	rs->dg.dests = d;
	rs->dg.ndests++;
found:
	*out = d;
	return 0;
}

ssize_t ds_send_udp(struct rsocket *rs, struct ds_dest *d, uint8_t op,
			const struct iovec *iov, int iovcnt)
{
	struct ds_udp_header h;
	struct iovec v[9];
	struct msghdr m;
	ssize_t n;

	if (iovcnt > 8)
		return -ENOTSUP;	/* rdma-core's limit */
	memset(&h, 0, sizeof(h));
	h.tag = htobe32(DS_UDP_TAG);
	h.version = d->qp->hdr.version;
	h.op = op;
	h.qpn = htobe32(d->qp->id->qp->qp_num & 0xffffff);
	if (h.version == 4) {
		h.length = DS_UDP_IPV4_HDR_LEN;
		h.addr.ipv4 = d->qp->hdr.addr.ipv4;
	} else {
		h.length = DS_UDP_IPV6_HDR_LEN;
		memcpy(h.addr.ipv6, d->qp->hdr.addr.ipv6.addr, 16);
	}
	v[0].iov_base = &h;
	v[0].iov_len = h.length;
	if (iovcnt)
		memcpy(&v[1], iov, sizeof(*iov) * iovcnt);
	memset(&m, 0, sizeof(m));
	m.msg_name = &d->addr;
	m.msg_namelen = ds_sa_len((struct sockaddr *)&d->addr);
	m.msg_iov = v;
	m.msg_iovlen = iovcnt + 1;
	n = sendmsg(rs->dg.udp, &m, MSG_DONTWAIT);
	if (n < 0)
		return -errno;
	return n - h.length;
}

/* A UD send of hdr + payload from qp (a slot of the send ring) */
/* ------------------------------------------------------------------ */
/* First contact on the UDP port                                       */

static bool valid_udp_hdr(const struct ds_udp_header *h, size_t n,
			  const struct sockaddr *from)
{
	if (n < DS_UDP_IPV4_HDR_LEN || be32toh(h->tag) != DS_UDP_TAG)
		return false;
	if (h->version == 4 && from->sa_family == AF_INET &&
	    h->length == DS_UDP_IPV4_HDR_LEN)
		return true;
	return h->version == 6 && from->sa_family == AF_INET6 &&
	       h->length == DS_UDP_IPV6_HDR_LEN && n >= DS_UDP_IPV6_HDR_LEN;
}

/* One datagram from the UDP port (rdma-core's udp_svc_process_rs) */
static void udp_datagram(struct rsocket *rs, const uint8_t *buf, size_t n,
			 const struct sockaddr *from)
{
	const struct ds_udp_header *h = (const void *)buf;
	uint32_t qpn = be32toh(h->qpn) & 0xffffff;
	struct ds_header fwd;
	struct iovec payload;
	struct ds_dest *d;

	if (!valid_udp_hdr(h, n, from) || ds_get_dest(rs, from, &d))
		return;
	if (h->op == RS_OP_DATA)
		ds_send_udp(rs, d, RS_OP_CTRL, NULL, 0); /* my QPN */
	if (!d->ah || d->qpn != qpn) {
		if (d->ah)
			ibv_destroy_ah(d->ah);
		d->ah = make_ah(d->qp, from);
		d->qpn = qpn;
	}
	if (h->op != RS_OP_DATA)
		return;
	/* the data: to our own QP, as if it came from the sender's */
	ds_format_hdr(&fwd, from);
	payload.iov_base = (void *)(buf + h->length);
	payload.iov_len = n - h->length;
	if (fwd.length + payload.iov_len > d->qp->max_msg)
		return;
	ds_process(rs);
	if (!ds_can_send(rs))
		return;		/* a datagram: dropped */
	ds_send_ud(rs, d->qp, d->qp->self_ah, d->qp->id->qp->qp_num, &fwd,
		&payload, 1, payload.iov_len);
}

/* Whatever waits on the UDP port.  rs->lock held. */
void ds_udp_input(struct rsocket *rs)
{
	uint8_t buf[RS_SNDLOWAT];
	struct sockaddr_storage from;
	socklen_t len;
	ssize_t n;
	int i;

	if (rs->state == RS_INIT && ds_init_ep(rs))
		return;
	for (i = 0; i < DS_UDP_BATCH; i++) {
		len = sizeof(from);
		n = recvfrom(rs->dg.udp, buf, sizeof(buf), MSG_DONTWAIT,
			     (struct sockaddr *)&from, &len);
		if (n < 0)
			return;
		udp_datagram(rs, buf, (size_t)n, (struct sockaddr *)&from);
	}
}
