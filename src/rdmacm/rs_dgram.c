// SPDX-License-Identifier: MIT
/*
 * Datagram rsockets over UD, as rdma-core's protocol has them.
 *
 * A datagram rsocket is a UDP socket (its address: rbind binds it) plus
 * one UD QP per local address it sends from (ds_qp, bound through an
 * RDMA_PS_UDP rdma_cm id, Q_Key RDMA_UDP_QKEY).  Every UD message starts
 * with a ds_header carrying the sending socket's address, which rrecvfrom
 * reports.  A destination (ds_dest) is known by its socket address; its
 * QPN is learnt on first contact, over UDP:
 *
 *   A -> B's UDP port:  ds_udp_header {op DATA, A's QPN, A's IP} + data
 *   B: learns A's QPN (address handle), forwards the data to its own QP
 *      with A's ds_header (a UD send to itself), and answers
 *   B -> A's UDP port:  ds_udp_header {op CTRL, B's QPN, B's IP}
 *   A: learns B's QPN; from then on A sends to B's QP directly.
 *
 * rdma-core does the UDP side in a service thread; here whoever touches
 * the socket (a send, a receive, rpoll, a blocking wait) reads its UDP
 * port, whose descriptor is part of the socket's epoll fd.  Every
 * datagram read there is checked (tag, version against the sender's
 * family, lengths) before use.
 *
 * Sizes: receive buffers are RS_SNDLOWAT bytes, the receive queue holds
 * rbuf_size / RS_SNDLOWAT of them (rdma-core's ds_set_qp_size).  A
 * message larger than a buffer or than the path MTU (1024 bytes on a
 * 1500-byte Ethernet link) less its header is EMSGSIZE here; rdma-core
 * does not check (it overruns its buffer).
 */
#include <arpa/inet.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/uio.h>

#include "rsocket.h"

#define DS_WR_RECV		(1ull << 63)
#define DS_GRH_LEN		40
#define DS_UDP_BATCH		64
#define DS_RESOLVE_MS		2000

struct ds_qp {
	struct rs_src src;		/* RS_SRC_DSQP */
	struct ds_qp *next;
	struct rdma_cm_id *id;
	struct sockaddr_storage addr;	/* our address on its interface */
	struct ds_header hdr;		/* in front of what it sends */
	struct ibv_comp_channel *cq_chan;
	struct ibv_cq *cq;
	bool cq_armed;
	struct ibv_mr *smr, *rmr;
	uint8_t *rbuf;			/* rbuf_size, then the GRH slot */
	struct ibv_ah *self_ah;
	uint32_t max_msg;		/* ds_header + payload */
};

struct ds_dest {
	struct ds_dest *next;
	struct sockaddr_storage addr;
	struct ds_qp *qp;		/* the QP that reaches it */
	struct ibv_ah *ah;		/* NULL until its QPN is known */
	uint32_t qpn;
};

struct ds_rmsg {
	struct ds_qp *qp;
	uint32_t offset, length;	/* length: ds_header + payload */
};

static socklen_t sa_len(const struct sockaddr *sa)
{
	return sa->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6) :
					   sizeof(struct sockaddr_in);
}

/* Same family, port and address (what names a datagram socket) */
static bool same_addr(const struct sockaddr *a, const struct sockaddr *b)
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

static void set_port(struct sockaddr *sa, uint16_t be_port)
{
	if (sa->sa_family == AF_INET)
		((struct sockaddr_in *)sa)->sin_port = be_port;
	else
		((struct sockaddr_in6 *)sa)->sin6_port = be_port;
}

static uint16_t get_port(const struct sockaddr *sa)
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

static void format_hdr(struct ds_header *h, const struct sockaddr *sa)
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
static void hdr_to_addr(const struct ds_header *h, struct sockaddr *sa,
			socklen_t *len)
{
	struct sockaddr_storage ss;
	struct sockaddr_in *s4 = (void *)&ss;
	struct sockaddr_in6 *s6 = (void *)&ss;
	socklen_t n;

	memset(&ss, 0, sizeof(ss));
	if (h->version == 4) {
		s4->sin_family = AF_INET;
		s4->sin_port = h->port;
		s4->sin_addr.s_addr = h->addr.ipv4;
	} else {
		s6->sin6_family = AF_INET6;
		s6->sin6_port = h->port;
		s6->sin6_flowinfo = h->addr.ipv6.flowinfo;
		memcpy(&s6->sin6_addr, h->addr.ipv6.addr, 16);
	}
	n = MIN(*len, sa_len((struct sockaddr *)&ss));
	memcpy(sa, &ss, n);
	*len = n;
}

/* ------------------------------------------------------------------ */
/* QPs, address handles, destinations                                  */

static int post_recv(struct rsocket *rs, struct ds_qp *qp, uint32_t offset)
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
	set_port((struct sockaddr *)&src, 0);
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

static void free_qp(struct ds_qp *qp)
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
	memcpy(&qp->addr, src, sa_len(src));
	format_hdr(&qp->hdr, src);
	/* the id takes a port of its own: the socket's is the UDP's */
	memcpy(&bind, src, sa_len(src));
	set_port((struct sockaddr *)&bind, 0);
	ret = -ENOMEM;
	if (rdma_create_id(NULL, &qp->id, qp, RDMA_PS_UDP) ||
	    rdma_bind_addr(qp->id, (struct sockaddr *)&bind) ||
	    !qp->id->verbs || !qp->id->pd)
		goto err_errno;
	qp->rbuf = calloc(1, rs->rbuf_size + DS_GRH_LEN);
	if (!qp->rbuf)
		goto err;
	qp->smr = ibv_reg_mr(qp->id->pd, rs->dg.sbuf,
			     (size_t)rs->sq_size * RS_SNDLOWAT,
			     IBV_ACCESS_LOCAL_WRITE);
	qp->rmr = ibv_reg_mr(qp->id->pd, qp->rbuf,
			     rs->rbuf_size + DS_GRH_LEN, IBV_ACCESS_LOCAL_WRITE);
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
		ret = post_recv(rs, qp, (uint32_t)i * RS_SNDLOWAT);
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
	free_qp(qp);
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
	port = get_port((struct sockaddr *)src);
	fd = socket(dst->sa_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	len = sizeof(*src);
	if (connect(fd, dst, sa_len(dst)) ||
	    getsockname(fd, (struct sockaddr *)src, &len))
		ret = -errno;
	close(fd);
	set_port((struct sockaddr *)src, port);
	return ret;
}

static int get_dest(struct rsocket *rs, const struct sockaddr *addr,
		    struct ds_dest **out)
{
	struct sockaddr_storage src;
	struct ds_dest *d;
	struct ds_qp *qp;
	int ret;

	for (d = rs->dg.dests; d; d = d->next)
		if (same_addr((struct sockaddr *)&d->addr, addr))
			goto found;
	if (rs->dg.ndests >= RS_MAX_DESTS)
		return -ENOBUFS;
	ret = src_addr(rs, addr, &src);
	if (ret)
		return ret;
	for (qp = rs->dg.qps; qp; qp = qp->next)
		if (same_addr((struct sockaddr *)&qp->addr,
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
	memcpy(&d->addr, addr, sa_len(addr));
	d->qp = qp;
	d->next = rs->dg.dests;
	rs->dg.dests = d;
	rs->dg.ndests++;
found:
	*out = d;
	return 0;
}

/* ------------------------------------------------------------------ */
/* Set-up                                                              */

int ds_open(struct rsocket *rs)
{
	rs->dg.udp = socket(rs->domain, SOCK_DGRAM | SOCK_NONBLOCK |
					SOCK_CLOEXEC, 0);
	if (rs->dg.udp < 0)
		return -errno;
	rs->dg.src_udp.kind = RS_SRC_UDP;
	return rs_epoll_add(rs, rs->dg.udp, &rs->dg.src_udp);
}

/* rdma-core's ds_init_ep and ds_set_qp_size: the queues follow the
 * buffers, one RS_SNDLOWAT slot per entry.  rs->lock held. */
static int init_ep(struct rsocket *rs)
{
	struct rs_dgram *dg = &rs->dg;
	uint8_t *slot;
	int i;

	if (rs->state != RS_INIT)
		return 0;
	rs->sq_size = MIN(rs->sq_size, RS_QP_MAX_SIZE);
	rs->rq_size = MIN(rs->rq_size, RS_QP_MAX_SIZE);
	if (rs->rq_size > rs->rbuf_size / RS_SNDLOWAT)
		rs->rq_size = rs->rbuf_size / RS_SNDLOWAT;
	else
		rs->rbuf_size = rs->rq_size * RS_SNDLOWAT;
	if (rs->sq_size > rs->sbuf_size / RS_SNDLOWAT)
		rs->sq_size = rs->sbuf_size / RS_SNDLOWAT;
	else
		rs->sbuf_size = rs->sq_size * RS_SNDLOWAT;
	if (!rs->sq_size || !rs->rq_size)
		return -EINVAL;
	dg->sbuf = calloc(rs->sq_size, RS_SNDLOWAT);
	dg->dmsg = calloc(rs->rq_size + 1, sizeof(*dg->dmsg));
	if (!dg->sbuf || !dg->dmsg)
		return -ENOMEM;
	/* free slots linked through their first bytes */
	for (i = rs->sq_size - 1; i >= 0; i--) {
		slot = dg->sbuf + (size_t)i * RS_SNDLOWAT;
		memcpy(slot, &dg->smsg_free, sizeof(dg->smsg_free));
		dg->smsg_free = slot;
	}
	dg->sqe_avail = rs->sq_size;
	dg->rqe_avail = rs->rq_size;
	rs->state = RS_READABLE | RS_WRITABLE;
	return 0;
}

int ds_bind(struct rsocket *rs, const struct sockaddr *addr,
	    socklen_t addrlen)
{
	int ret;

	pthread_mutex_lock(&rs->lock);
	ret = init_ep(rs);
	if (!ret && bind(rs->dg.udp, addr, addrlen))
		ret = -errno;
	pthread_mutex_unlock(&rs->lock);
	return ret;
}

/* A socket that sends before rbind gets a port now, as UDP's autobind
 * would, so that its header names a port the peer can answer */
static int autobind(struct rsocket *rs)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);

	if (getsockname(rs->dg.udp, (struct sockaddr *)&ss, &len))
		return -errno;
	if (get_port((struct sockaddr *)&ss))
		return 0;
	memset(&ss, 0, sizeof(ss));
	ss.ss_family = (sa_family_t)rs->domain;
	if (bind(rs->dg.udp, (struct sockaddr *)&ss,
		 sa_len((struct sockaddr *)&ss)))
		return -errno;
	return 0;
}

int ds_connect(struct rsocket *rs, const struct sockaddr *addr,
	       socklen_t addrlen)
{
	int ret;

	pthread_mutex_lock(&rs->slock);
	pthread_mutex_lock(&rs->lock);
	ret = init_ep(rs);
	if (!ret && connect(rs->dg.udp, addr, addrlen))
		ret = -errno;
	if (!ret)
		ret = get_dest(rs, addr, &rs->dg.conn_dest);
	pthread_mutex_unlock(&rs->lock);
	pthread_mutex_unlock(&rs->slock);
	return ret;
}

/* ------------------------------------------------------------------ */
/* Completions                                                         */

static bool valid_recv(struct ds_qp *qp, const struct ibv_wc *wc)
{
	const struct ds_header *h;
	uint32_t len;

	if (wc->byte_len < DS_GRH_LEN + DS_IPV4_HDR_LEN ||
	    wc->byte_len > DS_GRH_LEN + RS_SNDLOWAT)
		return false;
	len = wc->byte_len - DS_GRH_LEN;
	h = (const void *)(qp->rbuf + (uint32_t)wc->wr_id);
	return ((h->version == 4 && h->length == DS_IPV4_HDR_LEN) ||
		(h->version == 6 && h->length == DS_IPV6_HDR_LEN)) &&
	       len >= h->length;
}

/* Every QP's completions: a valid message is queued while there is room
 * (else dropped, its buffer posted again); a send frees its slot */
void ds_process(struct rsocket *rs)
{
	struct rs_dgram *dg = &rs->dg;
	struct ibv_wc wc;
	struct ds_qp *qp;
	uint8_t *slot;
	uint32_t off;

	for (qp = dg->qps; qp; qp = qp->next) {
		while (ibv_poll_cq(qp->cq, 1, &wc) > 0) {
			off = (uint32_t)wc.wr_id;
			if (!(wc.wr_id & DS_WR_RECV)) {
				slot = dg->sbuf + off;
				memcpy(slot, &dg->smsg_free,
				       sizeof(dg->smsg_free));
				dg->smsg_free = slot;
				dg->sqe_avail++;
				continue;
			}
			if (wc.status == IBV_WC_WR_FLUSH_ERR)
				continue;
			if (dg->rqe_avail && wc.status == IBV_WC_SUCCESS &&
			    valid_recv(qp, &wc)) {
				dg->rqe_avail--;
				dg->dmsg[dg->dmsg_tail] = (struct ds_rmsg){
					qp, off, wc.byte_len - DS_GRH_LEN };
				dg->dmsg_tail = (dg->dmsg_tail + 1) %
						(rs->rq_size + 1);
			} else {
				post_recv(rs, qp, off);
			}
		}
	}
}

void ds_arm(struct rsocket *rs)
{
	struct ds_qp *qp;

	for (qp = rs->dg.qps; qp; qp = qp->next) {
		if (!qp->cq_armed) {
			ibv_req_notify_cq(qp->cq, 0);
			qp->cq_armed = true;
		}
	}
}

void ds_qp_input(struct rsocket *rs, struct rs_src *src)
{
	struct ds_qp *qp = container_of(src, struct ds_qp, src);
	struct ibv_cq *cq;
	void *ctx;

	if (!ibv_get_cq_event(qp->cq_chan, &cq, &ctx)) {
		ibv_ack_cq_events(cq, 1);
		qp->cq_armed = false;
	}
}

static bool have_data(struct rsocket *rs)
{
	return rs->dg.dmsg_head != rs->dg.dmsg_tail;
}

static bool can_send(struct rsocket *rs)
{
	return rs->dg.sqe_avail > 0;
}

static bool all_sends_done(struct rsocket *rs)
{
	return rs->dg.sqe_avail == rs->sq_size;
}

/* As rs_get_comp, for the datagram side.  rs->lock held. */
static int get_comp(struct rsocket *rs, bool nonblock,
		    bool (*test)(struct rsocket *rs))
{
	bool looked = false;
	int ret;

	for (;;) {
		ds_process(rs);
		if (test(rs))
			return 0;
		if (nonblock) {
			if (!looked) {
				looked = true;
				if (rs_events(rs))
					continue;
			}
			return -EAGAIN;
		}
		if (!looked) {
			looked = true;
			ds_arm(rs);
			continue;
		}
		ret = rs_wait(rs);
		if (ret)
			return ret;
		ds_arm(rs);
	}
}

short ds_poll_revents(struct rsocket *rs, short events)
{
	short revents = 0;

	if (rs->state == RS_INIT)
		return 0;
	ds_process(rs);
	if ((events & POLLIN) && have_data(rs))
		revents |= POLLIN;
	if ((events & POLLOUT) && can_send(rs))
		revents |= POLLOUT;
	return revents;
}

/* ------------------------------------------------------------------ */
/* Sending                                                             */

static ssize_t send_udp(struct rsocket *rs, struct ds_dest *d, uint8_t op,
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
	m.msg_namelen = sa_len((struct sockaddr *)&d->addr);
	m.msg_iov = v;
	m.msg_iovlen = iovcnt + 1;
	n = sendmsg(rs->dg.udp, &m, MSG_DONTWAIT);
	if (n < 0)
		return -errno;
	return n - h.length;
}

/* A UD send of hdr + payload from qp (a slot of the send ring) */
static int send_ud(struct rsocket *rs, struct ds_qp *qp, struct ibv_ah *ah,
		   uint32_t qpn, const struct ds_header *hdr,
		   const struct iovec *iov, int iovcnt, size_t len)
{
	struct rs_dgram *dg = &rs->dg;
	struct ibv_send_wr wr, *bad;
	struct ibv_sge sge;
	uint8_t *slot = dg->smsg_free, *p;
	int i;

	memcpy(&dg->smsg_free, slot, sizeof(dg->smsg_free));
	dg->sqe_avail--;
	memcpy(slot, hdr, hdr->length);
	p = slot + hdr->length;
	for (i = 0; i < iovcnt; i++) {
		memcpy(p, iov[i].iov_base, iov[i].iov_len);
		p += iov[i].iov_len;
	}
	sge.addr = (uintptr_t)slot;
	sge.length = (uint32_t)(hdr->length + len);
	sge.lkey = qp->smr->lkey;
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = (uint64_t)(slot - dg->sbuf);
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_SEND;
	wr.send_flags = sge.length <= rs->sq_inline ? IBV_SEND_INLINE : 0;
	wr.wr.ud.ah = ah;
	wr.wr.ud.remote_qpn = qpn;
	wr.wr.ud.remote_qkey = RDMA_UDP_QKEY;
	return -ibv_post_send(qp->id->qp, &wr, &bad);
}

ssize_t ds_sendto(struct rsocket *rs, const struct iovec *iov, int iovcnt,
		  int flags, const struct sockaddr *addr, socklen_t addrlen)
{
	bool nonblock = rs_nonblocking(rs, flags);
	struct ds_dest *d;
	size_t len = 0;
	ssize_t ret;
	int i;

	for (i = 0; i < iovcnt; i++)
		len += iov[i].iov_len;
	if (addr && (addrlen < sa_len(addr) ||
		     (addr->sa_family != AF_INET &&
		      addr->sa_family != AF_INET6)))
		return -EINVAL;
	pthread_mutex_lock(&rs->slock);
	pthread_mutex_lock(&rs->lock);
	ret = init_ep(rs);
	if (!ret)
		ret = autobind(rs);
	if (ret)
		goto out;
	if (addr && (!rs->dg.conn_dest ||
		     !same_addr((struct sockaddr *)&rs->dg.conn_dest->addr,
				addr))) {
		ret = get_dest(rs, addr, &rs->dg.conn_dest);
		if (ret)
			goto out;
	}
	d = rs->dg.conn_dest;
	if (!d) {
		ret = -EDESTADDRREQ;
		goto out;
	}
	if (len + d->qp->hdr.length > d->qp->max_msg) {
		ret = -EMSGSIZE;
		goto out;
	}
	/* the peer's answer to a first contact may wait on the UDP port */
	if (!d->ah)
		rs_events(rs);
	if (!d->ah) {
		ret = send_udp(rs, d, RS_OP_DATA, iov, iovcnt);
		goto out;
	}
	if (!can_send(rs)) {
		ret = get_comp(rs, nonblock, can_send);
		if (ret)
			goto out;
	}
	ret = send_ud(rs, d->qp, d->ah, d->qpn, &d->qp->hdr, iov, iovcnt, len);
	if (!ret)
		ret = (ssize_t)len;
out:
	pthread_mutex_unlock(&rs->lock);
	pthread_mutex_unlock(&rs->slock);
	return ret;
}

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

	if (!valid_udp_hdr(h, n, from) || get_dest(rs, from, &d))
		return;
	if (h->op == RS_OP_DATA)
		send_udp(rs, d, RS_OP_CTRL, NULL, 0);	/* here is my QPN */
	if (!d->ah || d->qpn != qpn) {
		if (d->ah)
			ibv_destroy_ah(d->ah);
		d->ah = make_ah(d->qp, from);
		d->qpn = qpn;
	}
	if (h->op != RS_OP_DATA)
		return;
	/* the data: to our own QP, as if it came from the sender's */
	format_hdr(&fwd, from);
	payload.iov_base = (void *)(buf + h->length);
	payload.iov_len = n - h->length;
	if (fwd.length + payload.iov_len > d->qp->max_msg)
		return;
	ds_process(rs);
	if (!can_send(rs))
		return;		/* a datagram: dropped */
	send_ud(rs, d->qp, d->qp->self_ah, d->qp->id->qp->qp_num, &fwd,
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

	if (rs->state == RS_INIT && init_ep(rs))
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

/* ------------------------------------------------------------------ */
/* Receiving, closing                                                  */

ssize_t ds_recvfrom(struct rsocket *rs, void *buf, size_t len, int flags,
		    struct sockaddr *src, socklen_t *srclen)
{
	struct rs_dgram *dg = &rs->dg;
	const struct ds_header *h;
	struct ds_rmsg *m;
	ssize_t ret = 0;
	size_t n;

	pthread_mutex_lock(&rs->rlock);
	pthread_mutex_lock(&rs->lock);
	if (!(rs->state & RS_READABLE)) {
		ret = -EINVAL;		/* never bound nor used: rdma-core */
		goto out;
	}
	if (!have_data(rs)) {
		ret = get_comp(rs, rs_nonblocking(rs, flags), have_data);
		if (ret)
			goto out;
	}
	m = &dg->dmsg[dg->dmsg_head];
	h = (const void *)(m->qp->rbuf + m->offset);
	n = MIN(len, (size_t)(m->length - h->length));
	if (n)
		memcpy(buf, (const uint8_t *)h + h->length, n);
	if (src && srclen)
		hdr_to_addr(h, src, srclen);
	if (!(flags & MSG_PEEK)) {
		post_recv(rs, m->qp, m->offset);
		dg->dmsg_head = (dg->dmsg_head + 1) % (rs->rq_size + 1);
		dg->rqe_avail++;
	}
	ret = (ssize_t)n;
out:
	pthread_mutex_unlock(&rs->lock);
	pthread_mutex_unlock(&rs->rlock);
	return ret;
}

/* rdma-core's ds_shutdown, then everything goes: sends complete first */
void ds_close(struct rsocket *rs)
{
	struct rs_dgram *dg = &rs->dg;
	struct ds_dest *d;
	struct ds_qp *qp;

	pthread_mutex_lock(&rs->lock);
	if (rs->state != RS_INIT) {
		rs->state &= ~(RS_READABLE | RS_WRITABLE);
		get_comp(rs, false, all_sends_done);
	}
	pthread_mutex_unlock(&rs->lock);
	while ((d = dg->dests)) {
		dg->dests = d->next;
		if (d->ah)
			ibv_destroy_ah(d->ah);
		free(d);
	}
	while ((qp = dg->qps)) {
		dg->qps = qp->next;
		rs_epoll_del(rs, qp->cq_chan->fd);
		free_qp(qp);
	}
	free(dg->sbuf);
	free(dg->dmsg);
	if (dg->udp >= 0)
		close(dg->udp);
}
