// SPDX-License-Identifier: MIT
/*
 * The rsocket API's front door: the descriptor table, creating and
 * closing rsockets, and the calls that only dispatch to the stream
 * (rs_conn.c) or datagram (rs_dgram.c) side: rsocket, rbind, rlisten,
 * raccept, rconnect, rshutdown, rclose, rgetpeername, rgetsockname.
 *
 * The table maps a descriptor number to its rsocket.  It has two levels
 * of RS_TABLE_BLOCK entries whose blocks, once allocated, are never freed,
 * so a lookup is two atomic loads and no lock: the data calls look the
 * socket up on every call.  Only numbers the process itself was given by
 * rsocket()/raccept() are found; any other number is EBADF, as in
 * rdma-core, which is how librspreload's wrapped calls and rpoll tell
 * rsockets from ordinary descriptors.
 */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/epoll.h>

#include "rsocket.h"

#define RS_TABLE_BLOCK	1024
#define RS_TABLE_MAX	(RS_TABLE_BLOCK * RS_TABLE_BLOCK)

static struct rsocket **rs_table[RS_TABLE_BLOCK];
static pthread_mutex_t rs_table_lock = PTHREAD_MUTEX_INITIALIZER;

struct rsocket *rs_lookup(int fd)
{
	struct rsocket **block;

	if (fd < 0 || fd >= RS_TABLE_MAX)
		return NULL;
	block = __atomic_load_n(&rs_table[fd / RS_TABLE_BLOCK],
				__ATOMIC_ACQUIRE);
	if (!block)
		return NULL;
	return __atomic_load_n(&block[fd % RS_TABLE_BLOCK], __ATOMIC_ACQUIRE);
}

static int table_set(int fd, struct rsocket *rs)
{
	struct rsocket **block;

	if (fd < 0 || fd >= RS_TABLE_MAX)
		return -EMFILE;
	pthread_mutex_lock(&rs_table_lock);
	block = rs_table[fd / RS_TABLE_BLOCK];
	if (!block) {
		block = calloc(RS_TABLE_BLOCK, sizeof(*block));
		if (!block) {
			pthread_mutex_unlock(&rs_table_lock);
			return -ENOMEM;
		}
		__atomic_store_n(&rs_table[fd / RS_TABLE_BLOCK], block,
				 __ATOMIC_RELEASE);
	}
	__atomic_store_n(&block[fd % RS_TABLE_BLOCK], rs, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&rs_table_lock);
	return 0;
}

int rs_insert(struct rsocket *rs)
{
	return table_set(rs->index, rs);
}

/*
 * A new rsocket and its epoll fd (its number).  An accepted socket
 * inherits the listener's sizes, as rdma-core's rs_alloc does; nothing
 * else (an accepted socket is blocking, as with accept(2)).
 */
struct rsocket *rs_alloc(const struct rsocket *parent, int type, int domain)
{
	struct rsocket *rs = calloc(1, sizeof(*rs));

	if (!rs)
		return NULL;
	rs->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (rs->epfd < 0) {
		free(rs);
		return NULL;
	}
	rs->index = rs->epfd;
	rs->type = type;
	rs->domain = domain;
	pthread_mutex_init(&rs->lock, NULL);
	pthread_mutex_init(&rs->slock, NULL);
	pthread_mutex_init(&rs->rlock, NULL);
	if (parent) {
		rs->sbuf_size = parent->sbuf_size;
		rs->rbuf_size = parent->rbuf_size;
		rs->sq_inline = parent->sq_inline;
		rs->sq_size = parent->sq_size;
		rs->rq_size = parent->rq_size;
		rs->st.ctrl_max_seqno = parent->st.ctrl_max_seqno;
		rs->st.target_iomap_size = parent->st.target_iomap_size;
	} else {
		rs->sbuf_size = RS_DEF_WMEM;
		rs->rbuf_size = RS_DEF_MEM;
		rs->sq_inline = RS_DEF_INLINE;
		rs->sq_size = RS_DEF_SQSIZE;
		rs->rq_size = RS_DEF_RQSIZE;
		if (type == SOCK_STREAM)
			rs->st.ctrl_max_seqno = RS_QP_CTRL_SIZE;
	}
	if (type == SOCK_DGRAM)
		rs->dg.udp = -1;
	return rs;
}

void rs_free(struct rsocket *rs)
{
	if (rs_lookup(rs->index) == rs)
		table_set(rs->index, NULL);
	close(rs->epfd);
	pthread_mutex_destroy(&rs->lock);
	pthread_mutex_destroy(&rs->slock);
	pthread_mutex_destroy(&rs->rlock);
	free(rs);
}

int rs_epoll_add(struct rsocket *rs, int fd, struct rs_src *src)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = src };

	return epoll_ctl(rs->epfd, EPOLL_CTL_ADD, fd, &ev) ? -errno : 0;
}

void rs_epoll_del(struct rsocket *rs, int fd)
{
	epoll_ctl(rs->epfd, EPOLL_CTL_DEL, fd, NULL);
}

/* As rdma-core: copy what fits, report the full size of the family's
 * address (a NULL buffer with *len 0 asks only for the size). */
void rs_copy_addr(struct sockaddr *dst, const struct sockaddr *src,
		  socklen_t *len)
{
	socklen_t size = src->sa_family == AF_INET6 ?
			 sizeof(struct sockaddr_in6) :
			 sizeof(struct sockaddr_in);

	if (dst)
		memcpy(dst, src, MIN(*len, size));
	*len = size;
}

/* ------------------------------------------------------------------ */
/* The calls                                                           */

/*
 * rdma-core accepts AF_INET, AF_INET6 and AF_IB; softhca's rdma_cm has no
 * AF_IB addresses, so that one is ENOTSUP like any other family.
 * SOCK_NONBLOCK and SOCK_CLOEXEC are accepted in the type (newer
 * rdma-core masks them too; v44 refused them).
 */
int rsocket(int domain, int type, int protocol)
{
	int base = type & ~(SOCK_NONBLOCK | SOCK_CLOEXEC);
	struct rsocket *rs;
	int ret;

	if ((domain != AF_INET && domain != AF_INET6) ||
	    (base != SOCK_STREAM && base != SOCK_DGRAM) ||
	    (base == SOCK_STREAM && protocol && protocol != IPPROTO_TCP) ||
	    (base == SOCK_DGRAM && protocol && protocol != IPPROTO_UDP))
		return rs_err(-ENOTSUP);
	rs = rs_alloc(NULL, base, domain);
	if (!rs)
		return rs_err(-ENOMEM);
	if (type & SOCK_NONBLOCK)
		rs->fd_flags |= O_NONBLOCK;
	ret = base == SOCK_STREAM ? rs_stream_open(rs) : ds_open(rs);
	if (!ret)
		ret = rs_insert(rs);
	if (ret) {
		if (base == SOCK_STREAM)
			rs_stream_close(rs);
		else
			ds_close(rs);
		rs_free(rs);
		return rs_err(ret);
	}
	return rs->index;
}

static bool addr_ok(const struct sockaddr *addr, socklen_t len)
{
	if (!addr || len < sizeof(sa_family_t))
		return false;
	if (addr->sa_family == AF_INET)
		return len >= sizeof(struct sockaddr_in);
	if (addr->sa_family == AF_INET6)
		return len >= sizeof(struct sockaddr_in6);
	return true;	/* the family is the callee's to refuse */
}

int rbind(int socket, const struct sockaddr *addr, socklen_t addrlen)
{
	struct rsocket *rs = rs_lookup(socket);
	int ret;

	if (!rs)
		return rs_err(-EBADF);
	if (!addr_ok(addr, addrlen))
		return rs_err(-EINVAL);
	ret = rs->type == SOCK_STREAM ? rs_stream_bind(rs, addr) :
					ds_bind(rs, addr, addrlen);
	return ret ? rs_err(ret) : 0;
}

int rlisten(int socket, int backlog)
{
	struct rsocket *rs = rs_lookup(socket);
	int ret;

	if (!rs)
		return rs_err(-EBADF);
	if (rs->type != SOCK_STREAM)
		return rs_err(-EOPNOTSUPP);	/* as listen(2) on UDP */
	ret = rs_stream_listen(rs, backlog);
	return ret ? rs_err(ret) : 0;
}

int raccept(int socket, struct sockaddr *addr, socklen_t *addrlen)
{
	struct rsocket *rs = rs_lookup(socket);
	int ret;

	if (!rs)
		return rs_err(-EBADF);
	if (rs->type != SOCK_STREAM)
		return rs_err(-EOPNOTSUPP);
	ret = rs_stream_accept(rs, addr, addrlen);
	return ret < 0 ? rs_err(ret) : ret;
}

int rconnect(int socket, const struct sockaddr *addr, socklen_t addrlen)
{
	struct rsocket *rs = rs_lookup(socket);
	int ret;

	if (!rs)
		return rs_err(-EBADF);
	if (!addr_ok(addr, addrlen))
		return rs_err(-EINVAL);
	ret = rs->type == SOCK_STREAM ? rs_stream_connect(rs, addr, addrlen) :
					ds_connect(rs, addr, addrlen);
	return ret ? rs_err(ret) : 0;
}

/* rdma-core does nothing for a datagram rsocket but report success */
int rshutdown(int socket, int how)
{
	struct rsocket *rs = rs_lookup(socket);
	int ret;

	if (!rs)
		return rs_err(-EBADF);
	if (how != SHUT_RD && how != SHUT_WR && how != SHUT_RDWR)
		return rs_err(-EINVAL);
	if (rs->type != SOCK_STREAM)
		return 0;
	ret = rs_stream_shutdown(rs, how);
	return ret ? rs_err(ret) : 0;
}

/*
 * A connected stream says goodbye first (rshutdown SHUT_RDWR: a
 * DISCONNECT message once everything sent has completed); a datagram
 * socket lets its sends complete.
 */
int rclose(int socket)
{
	struct rsocket *rs = rs_lookup(socket);

	if (!rs)
		return rs_err(-EBADF);
	table_set(rs->index, NULL);
	if (rs->type == SOCK_STREAM) {
		if (rs->state & RS_CONNECTED)
			rs_stream_shutdown(rs, SHUT_RDWR);
		rs_stream_close(rs);
	} else {
		ds_close(rs);
	}
	rs_free(rs);
	return 0;
}

/* rgetpeername (peer) and rgetsockname */
static int get_name(int socket, struct sockaddr *addr, socklen_t *addrlen,
		    bool peer)
{
	struct rsocket *rs = rs_lookup(socket);

	if (!rs)
		return rs_err(-EBADF);
	if (!addrlen)
		return rs_err(-EFAULT);
	if (rs->type == SOCK_DGRAM)
		return peer ? getpeername(rs->dg.udp, addr, addrlen) :
			      getsockname(rs->dg.udp, addr, addrlen);
	rs_copy_addr(addr, peer ? rdma_get_peer_addr(rs->st.id) :
				  rdma_get_local_addr(rs->st.id),
		     addrlen);
	return 0;
}

int rgetpeername(int socket, struct sockaddr *addr, socklen_t *addrlen)
{
	return get_name(socket, addr, addrlen, true);
}

int rgetsockname(int socket, struct sockaddr *addr, socklen_t *addrlen)
{
	return get_name(socket, addr, addrlen, false);
}
