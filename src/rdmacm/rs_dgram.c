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

#include "rs_dgram.h"


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
	n = MIN(*len, ds_sa_len((struct sockaddr *)&ss));
	memcpy(sa, &ss, n);
	*len = n;
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
int ds_init_ep(struct rsocket *rs)
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
	ret = ds_init_ep(rs);
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
	if (ds_get_port((struct sockaddr *)&ss))
		return 0;
	memset(&ss, 0, sizeof(ss));
	ss.ss_family = (sa_family_t)rs->domain;
	if (bind(rs->dg.udp, (struct sockaddr *)&ss,
		 ds_sa_len((struct sockaddr *)&ss)))
		return -errno;
	return 0;
}

int ds_connect(struct rsocket *rs, const struct sockaddr *addr,
	       socklen_t addrlen)
{
	int ret;

	pthread_mutex_lock(&rs->slock);
	pthread_mutex_lock(&rs->lock);
	ret = ds_init_ep(rs);
	if (!ret && connect(rs->dg.udp, addr, addrlen))
		ret = -errno;
	if (!ret)
		ret = ds_get_dest(rs, addr, &rs->dg.conn_dest);
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
				ds_post_recv(rs, qp, off);
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

bool ds_can_send(struct rsocket *rs)
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
	if ((events & POLLOUT) && ds_can_send(rs))
		revents |= POLLOUT;
	return revents;
}

/* ------------------------------------------------------------------ */
/* Sending                                                             */

int ds_send_ud(struct rsocket *rs, struct ds_qp *qp, struct ibv_ah *ah,
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
	if (addr && (addrlen < ds_sa_len(addr) ||
		     (addr->sa_family != AF_INET &&
		      addr->sa_family != AF_INET6)))
		return -EINVAL;
	pthread_mutex_lock(&rs->slock);
	pthread_mutex_lock(&rs->lock);
	ret = ds_init_ep(rs);
	if (!ret)
		ret = autobind(rs);
	if (ret)
		goto out;
	if (addr && (!rs->dg.conn_dest ||
		     !ds_same_addr((struct sockaddr *)&rs->dg.conn_dest->addr,
				addr))) {
		ret = ds_get_dest(rs, addr, &rs->dg.conn_dest);
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
		ret = ds_send_udp(rs, d, RS_OP_DATA, iov, iovcnt);
		goto out;
	}
	if (!ds_can_send(rs)) {
		ret = get_comp(rs, nonblock, ds_can_send);
		if (ret)
			goto out;
	}
	ret = ds_send_ud(rs, d->qp, d->ah, d->qpn, &d->qp->hdr, iov, iovcnt,
			 len);
	if (!ret)
		ret = (ssize_t)len;
out:
	pthread_mutex_unlock(&rs->lock);
	pthread_mutex_unlock(&rs->slock);
	return ret;
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
		ds_post_recv(rs, m->qp, m->offset);
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
		ds_free_qp(qp);
	}
	free(dg->sbuf);
	free(dg->dmsg);
	if (dg->udp >= 0)
		close(dg->udp);
}
