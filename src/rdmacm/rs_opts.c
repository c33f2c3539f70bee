// SPDX-License-Identifier: MIT
/*
 * rsetsockopt, rgetsockopt and rfcntl, with the options rdma-core's
 * rsocket knows (rsocket(7)):
 *
 *   SOL_SOCKET    SO_REUSEADDR (the rdma_cm id's option), SO_RCVBUF and
 *                 SO_SNDBUF (twice the value, as Linux; before the
 *                 buffers exist), SO_LINGER, SO_KEEPALIVE, SO_OOBINLINE
 *                 (recorded), SO_ERROR (read and cleared)
 *   IPPROTO_TCP   TCP_NODELAY, TCP_MAXSEG (the path MTU), TCP_KEEPIDLE,
 *                 TCP_KEEPCNT, TCP_KEEPINTVL
 *   IPPROTO_IPV6  IPV6_V6ONLY (the id's AFONLY)
 *   SOL_RDMA      RDMA_SQSIZE, RDMA_RQSIZE, RDMA_INLINE, RDMA_IOMAPSIZE,
 *                 RDMA_ROUTE: before connecting only (EINVAL after)
 *
 * Anything else is ENOTSUP.  A datagram rsocket passes every option but
 * SOL_RDMA to its UDP socket first, as rdma-core does.
 *
 * Where softhca differs: option lengths are checked (EINVAL for a value
 * shorter than an int, as the kernel does; rdma-core reads past it); the
 * buffer sizes are kept between 4 KiB and 1 GiB; RDMA_ROUTE reads back
 * what was set (rdma-core copies the wrong way); SO_KEEPALIVE sends no
 * probes (there is no service thread; softhca's rdma_cm reports a peer
 * that is gone as a disconnection by itself); rfcntl also serves
 * F_GETFD/F_SETFD, on the rsocket's own descriptor; TCP_INFO gives the
 * state and segment size of a stream (rdma-core: ENOTSUP).
 */
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/tcp.h>
#include <infiniband/sa.h>

#include "rsocket.h"

static uint32_t buf_size(int v, uint32_t min)
{
	uint64_t s = (uint64_t)(uint32_t)v << 1;

	return (uint32_t)MIN(MAX(s, (uint64_t)min), (uint64_t)RS_MAX_MEM);
}

static unsigned int default_keepalive(void)
{
	unsigned int t = 7200;
	FILE *f = fopen("/proc/sys/net/ipv4/tcp_keepalive_time", "r");

	if (f) {
		if (fscanf(f, "%u", &t) != 1)
			t = 7200;
		fclose(f);
	}
	return t;
}

static int set_rdma(struct rsocket *rs, int optname, const void *optval,
		    socklen_t optlen)
{
	uint32_t v;

	if (rs->state >= RS_OPENING)
		return -EINVAL;
	if (optname == RDMA_ROUTE) {
		void *copy;

		if (rs->type != SOCK_STREAM || !optlen)
			return -EINVAL;
		copy = malloc(optlen);
		if (!copy)
			return -ENOMEM;
		memcpy(copy, optval, optlen);
		free(rs->st.route);
		rs->st.route = copy;
		rs->st.route_len = optlen;
		return 0;
	}
	if (optlen < sizeof(int))
		return -EINVAL;
	memcpy(&v, optval, sizeof(v));
	switch (optname) {
	case RDMA_SQSIZE:
		rs->sq_size = (uint16_t)MIN(v, (uint32_t)RS_QP_MAX_SIZE);
		return 0;
	case RDMA_RQSIZE:
		rs->rq_size = (uint16_t)MIN(v, (uint32_t)RS_QP_MAX_SIZE);
		return 0;
	case RDMA_INLINE:
		rs->sq_inline = (uint16_t)MIN(v, (uint32_t)RS_QP_MAX_SIZE);
		return 0;
	case RDMA_IOMAPSIZE:
		if (rs->type != SOCK_STREAM)
			return -EINVAL;
		/* the size the connection data can carry (one byte) */
		rs->st.target_iomap_size = rs_scale_to_value(
			(uint8_t)rs_value_to_scale((int)v, 8), 8);
		return 0;
	default:
		return -ENOTSUP;
	}
}

int rsetsockopt(int socket, int level, int optname, const void *optval,
		socklen_t optlen)
{
	struct rsocket *rs = rs_lookup(socket);
	bool stream, on = false;
	uint64_t *bits = NULL;
	int ret = -ENOTSUP, v = 0;

	if (!rs)
		return rs_err(-EBADF);
	if (!optval)
		return rs_err(-EFAULT);
	stream = rs->type == SOCK_STREAM;
	if (level == SOL_RDMA) {
		pthread_mutex_lock(&rs->lock);
		ret = set_rdma(rs, optname, optval, optlen);
		pthread_mutex_unlock(&rs->lock);
		return ret ? rs_err(ret) : 0;
	}
	if (optlen >= sizeof(int))
		memcpy(&v, optval, sizeof(v));
	on = v != 0;
	if (!stream) {
		if (setsockopt(rs->dg.udp, level, optname, optval, optlen))
			return -1;
		ret = 0;
	}
	if (optname != SO_LINGER && optlen < sizeof(int))
		return rs_err(-EINVAL);
	pthread_mutex_lock(&rs->lock);
	switch (level) {
	case SOL_SOCKET:
		bits = &rs->so_opts;
		switch (optname) {
		case SO_REUSEADDR:
			ret = 0;
			if (stream &&
			    rdma_set_option(rs->st.id, RDMA_OPTION_ID,
					    RDMA_OPTION_ID_REUSEADDR, &v,
					    sizeof(v)) &&
			    errno != ENOSYS && rs->state == RS_INIT)
				ret = -errno;
			break;
		case SO_RCVBUF:
			if ((stream && !rs->st.rbuf) ||
			    (!stream && !rs->dg.qps))
				rs->rbuf_size = buf_size(v, RS_MIN_RMEM);
			ret = 0;
			break;
		case SO_SNDBUF:
			if ((stream && !rs->st.sbuf) ||
			    (!stream && !rs->dg.sbuf))
				rs->sbuf_size = buf_size(v, RS_SNDLOWAT << 1);
			ret = 0;
			break;
		case SO_LINGER:
			if (optlen < sizeof(struct linger)) {
				ret = -EINVAL;
				break;
			}
			/* the bit is inverted so that 0 means "on" */
			on = !((const struct linger *)optval)->l_onoff;
			ret = 0;
			break;
		case SO_KEEPALIVE:
			if (stream && on && !rs->st.keepalive_time)
				rs->st.keepalive_time = default_keepalive();
			ret = 0;
			break;
		case SO_OOBINLINE:
			ret = 0;
			break;
		}
		break;
	case IPPROTO_TCP:
		if (!stream)
			break;
		bits = &rs->st.tcp_opts;
		switch (optname) {
		case TCP_KEEPCNT:
		case TCP_KEEPINTVL:
		case TCP_MAXSEG:
			ret = 0;	/* RC is reliable: nothing to tune */
			break;
		case TCP_KEEPIDLE:
			if (v <= 0) {
				ret = -EINVAL;
				break;
			}
			rs->st.keepalive_time = (unsigned int)v;
			ret = 0;
			break;
		case TCP_NODELAY:
			ret = 0;
			break;
		}
		break;
	case IPPROTO_IPV6:
		bits = &rs->ipv6_opts;
		if (optname == IPV6_V6ONLY) {
			ret = 0;
			if (stream && rdma_set_option(rs->st.id, RDMA_OPTION_ID,
						      RDMA_OPTION_ID_AFONLY,
						      &v, sizeof(v)))
				ret = -errno;
		}
		break;
	}
	if (!ret && bits && optname < 64) {
		if (on)
			*bits |= 1ull << optname;
		else
			*bits &= ~(1ull << optname);
	}
	pthread_mutex_unlock(&rs->lock);
	return ret ? rs_err(ret) : 0;
}

/* rdma-core's rs_convert_sa_path: a path record as ibv_path_data */
static void path_data(const struct ibv_sa_path_rec *p, struct ibv_path_data *d)
{
	uint32_t fl_hop = be32toh(p->flow_label) << 8;

	memset(d, 0, sizeof(*d));
	d->path.dgid = p->dgid;
	d->path.sgid = p->sgid;
	d->path.dlid = p->dlid;
	d->path.slid = p->slid;
	d->path.flowlabel_hoplimit = htobe32(fl_hop | p->hop_limit);
	d->path.tclass = p->traffic_class;
	d->path.reversible_numpath = (uint8_t)(p->reversible << 7 | 1);
	d->path.pkey = p->pkey;
	d->path.qosclass_sl = htobe16(p->sl);
	d->path.mtu = (uint8_t)(p->mtu | 2 << 6);	/* exactly */
	d->path.rate = (uint8_t)(p->rate | 2 << 6);
	d->path.packetlifetime = (uint8_t)(p->packet_life_time | 2 << 6);
	d->flags = p->preference;
}

static int get_route(struct rsocket *rs, void *optval, socklen_t *optlen)
{
	struct rdma_cm_id *id = rs->st.id;
	struct ibv_path_data d;
	socklen_t len = 0;
	int i;

	if (rs->type != SOCK_STREAM)
		return -ENOTSUP;
	if (rs->st.route) {
		if (*optlen < rs->st.route_len)
			return -EINVAL;
		memcpy(optval, rs->st.route, rs->st.route_len);
		*optlen = (socklen_t)rs->st.route_len;
		return 0;
	}
	if (*optlen < sizeof(d))
		return -EINVAL;
	for (i = 0; id && i < id->route.num_paths &&
		    len + sizeof(d) <= *optlen; i++) {
		path_data(&id->route.path_rec[i], &d);
		memcpy((uint8_t *)optval + len, &d, sizeof(d));
		len += sizeof(d);
	}
	*optlen = len;
	return 0;
}

static int get_int(struct rsocket *rs, int level, int optname, int *v)
{
	struct rdma_cm_id *id = rs->type == SOCK_STREAM ? rs->st.id : NULL;

	switch (level) {
	case SOL_SOCKET:
		switch (optname) {
		case SO_REUSEADDR:
		case SO_KEEPALIVE:
		case SO_OOBINLINE:
			*v = !!(rs->so_opts & (1ull << optname));
			return 0;
		case SO_RCVBUF:
			*v = (int)rs->rbuf_size;
			return 0;
		case SO_SNDBUF:
			*v = (int)rs->sbuf_size;
			return 0;
		case SO_ERROR:
			*v = rs->err;
			rs->err = 0;
			return 0;
		}
		return -ENOTSUP;
	case IPPROTO_TCP:
		if (rs->type != SOCK_STREAM)
			return -ENOTSUP;
		switch (optname) {
		case TCP_KEEPCNT:
		case TCP_KEEPINTVL:
			*v = 1;		/* not applicable */
			return 0;
		case TCP_KEEPIDLE:
			*v = (int)rs->st.keepalive_time;
			return 0;
		case TCP_NODELAY:
			*v = !!(rs->st.tcp_opts & (1ull << optname));
			return 0;
		case TCP_MAXSEG:
			*v = id && id->route.num_paths ?
			     1 << (7 + id->route.path_rec->mtu) : 2048;
			return 0;
		}
		return -ENOTSUP;
	case IPPROTO_IPV6:
		if (optname != IPV6_V6ONLY)
			return -ENOTSUP;
		*v = !!(rs->ipv6_opts & (1ull << optname));
		return 0;
	case SOL_RDMA:
		switch (optname) {
		case RDMA_SQSIZE:
			*v = rs->sq_size;
			return 0;
		case RDMA_RQSIZE:
			*v = rs->rq_size;
			return 0;
		case RDMA_INLINE:
			*v = rs->sq_inline;
			return 0;
		case RDMA_IOMAPSIZE:
			*v = rs->type == SOCK_STREAM ?
			     rs->st.target_iomap_size : 0;
			return 0;
		}
		return -ENOTSUP;
	}
	return -ENOTSUP;
}

/*
 * TCP_INFO, which rdma-core does not offer, for the programs that report
 * it (iperf3 prints garbage retransmit counts when it fails): the state
 * and segment size, and zero retransmissions (RC retransmits below).
 */
static int get_tcp_info(struct rsocket *rs, void *optval, socklen_t *optlen)
{
	struct tcp_info ti;
	int mss = 2048;

	get_int(rs, IPPROTO_TCP, TCP_MAXSEG, &mss);
	memset(&ti, 0, sizeof(ti));
	ti.tcpi_state = (rs->state & RS_CONNECTED) ? TCP_ESTABLISHED :
			rs->state == RS_LISTENING ? TCP_LISTEN : TCP_CLOSE;
	ti.tcpi_snd_mss = (uint32_t)mss;
	ti.tcpi_rcv_mss = (uint32_t)mss;
	*optlen = MIN(*optlen, (socklen_t)sizeof(ti));
	memcpy(optval, &ti, *optlen);
	return 0;
}

int rgetsockopt(int socket, int level, int optname, void *optval,
		socklen_t *optlen)
{
	struct rsocket *rs = rs_lookup(socket);
	struct linger l;
	int ret, v = 0;

	if (!rs)
		return rs_err(-EBADF);
	if (!optval || !optlen)
		return rs_err(-EFAULT);
	pthread_mutex_lock(&rs->lock);
	if (level == SOL_RDMA && optname == RDMA_ROUTE) {
		ret = get_route(rs, optval, optlen);
	} else if (level == IPPROTO_TCP && optname == TCP_INFO &&
		   rs->type == SOCK_STREAM) {
		ret = get_tcp_info(rs, optval, optlen);
	} else if (level == SOL_SOCKET && optname == SO_LINGER) {
		ret = -EINVAL;
		if (*optlen >= sizeof(l)) {
			l.l_onoff = !(rs->so_opts & (1ull << SO_LINGER));
			l.l_linger = 0;
			memcpy(optval, &l, sizeof(l));
			*optlen = sizeof(l);
			ret = 0;
		}
	} else {
		ret = get_int(rs, level, optname, &v);
		if (!ret && *optlen < sizeof(int))
			ret = -EINVAL;
		if (!ret) {
			memcpy(optval, &v, sizeof(v));
			*optlen = sizeof(v);
		}
	}
	pthread_mutex_unlock(&rs->lock);
	return ret ? rs_err(ret) : 0;
}

/* O_NONBLOCK is all rsockets read from the flags (rdma-core keeps the
 * whole word); every internal descriptor is non-blocking anyway. */
int rfcntl(int socket, int cmd, ...)
{
	struct rsocket *rs = rs_lookup(socket);
	va_list ap;
	int arg, ret;

	if (!rs)
		return rs_err(-EBADF);
	va_start(ap, cmd);
	switch (cmd) {
	case F_GETFL:
		ret = rs->fd_flags;
		break;
	case F_SETFL:
		arg = va_arg(ap, int);
		rs->fd_flags = arg;
		ret = 0;
		break;
	case F_GETFD:
		ret = fcntl(rs->index, F_GETFD);
		break;
	case F_SETFD:
		arg = va_arg(ap, int);
		ret = fcntl(rs->index, F_SETFD, arg);
		break;
	default:
		ret = rs_err(-ENOTSUP);
		break;
	}
	va_end(ap);
	return ret;
}
