/* SPDX-License-Identifier: MIT */
/*
 * softhca's rsockets: the objects behind an rsocket descriptor and the
 * table of contents of the implementation (prototypes grouped by the file
 * that defines them).  The protocol is rdma-core's (rs_wire.h,
 * docs/rsockets.md); the code is softhca's own, built on the public
 * rdma_cm and verbs API of this library and of softhca's libibverbs.
 *
 * Descriptors.  An rsocket's number is a real descriptor that it owns: an
 * epoll fd that is readable whenever one of the socket's sources may have
 * news (its CQ channel, its CM channel, its UDP port).  The number can
 * never collide with another open file, so librspreload's fd map and
 * rpoll's mix of rsockets and ordinary descriptors both work.
 *
 * No threads.  rdma-core runs service threads (accept, CM events, UDP
 * first contact, keepalive); softhca does that work in the calls that
 * need it: whoever waits on an rsocket (a blocking call, rpoll, rselect)
 * sleeps in poll() on its epoll fd and consumes what woke it (rs_poll.c).
 *
 * Locks.  rs->lock guards the socket's state, counters and queues; it is
 * never held across a sleep.  rs->slock and rs->rlock serialize senders
 * and receivers (taken before rs->lock), so a sender waiting for credits
 * lets a receiver run.  The fd table is read without locks.
 *
 * Errors: -errno inside; the exported calls return -1 and set errno.
 */
#ifndef SOFTHCA_RSOCKET_H
#define SOFTHCA_RSOCKET_H

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>
#include <rdma/rsocket.h>

#include "rs_wire.h"
#include "../common/log.h"
#include "../common/util.h"

/* rdma-core's sizes and defaults (rsocket.c; /etc/rdma/rsocket files are
 * not read: softhca needs no configuration) */
#define RS_OLAP_START_SIZE	2048	/* first write of a send, doubles */
#define RS_MAX_TRANSFER		65536	/* largest single write */
#define RS_SNDLOWAT		2048	/* send space that makes POLLOUT;
					 * datagram buffer size */
#define RS_QP_MIN_SIZE		16
#define RS_QP_MAX_SIZE		0xfffe
#define RS_QP_CTRL_SIZE		4	/* control messages in flight */
#define RS_SGL_SIZE		2	/* receive buffers advertised */
#define RS_DEF_INLINE		64
#define RS_DEF_SQSIZE		384
#define RS_DEF_RQSIZE		384
#define RS_DEF_MEM		(1 << 17)	/* receive buffer */
#define RS_DEF_WMEM		(1 << 17)	/* send buffer */
#define RS_MAX_MEM		(1u << 30)	/* SO_RCVBUF/SO_SNDBUF cap */
#define RS_MIN_RMEM		(2 * RS_SNDLOWAT)
#define RS_MAX_DESTS		4096	/* datagram peers remembered */

/* States: rdma-core's bit layout, ordered passive < opening < connected
 * < disconnected, so that "state >= RS_OPENING" means "too late for
 * SOL_RDMA options". */
enum {
	RS_INIT			= 0,
	RS_BOUND		= 0x0001,
	RS_LISTENING		= 0x0002,
	RS_OPENING		= 0x0004,
	RS_RESOLVING_ADDR	= RS_OPENING | 0x0010,
	RS_RESOLVING_ROUTE	= RS_OPENING | 0x0020,
	RS_CONNECTING		= RS_OPENING | 0x0040,
	RS_ACCEPTING		= RS_OPENING | 0x0080,
	RS_CONNECTED		= 0x0100,
	RS_WRITABLE		= 0x0200,
	RS_READABLE		= 0x0400,
	RS_CONNECT_RDWR		= RS_CONNECTED | RS_READABLE | RS_WRITABLE,
	RS_CONNECT_ERROR	= 0x0800,
	RS_DISCONNECTED		= 0x1000,
	RS_ERROR		= 0x2000,
};

/* What an epoll event of an rsocket's fd comes from */
enum rs_src_kind {
	RS_SRC_CQ,		/* stream: the CQ's completion channel */
	RS_SRC_CM,		/* stream: the rdma_cm event channel */
	RS_SRC_UDP,		/* datagram: the UDP port (first contact) */
	RS_SRC_DSQP,		/* datagram: one UD QP's completion channel */
};

struct rs_src {
	enum rs_src_kind kind;
};

/* A CONNECT_REQUEST taken from a listener's channel, not accepted yet */
struct rs_req {
	struct rs_req *next;
	struct rdma_cm_event *event;	/* held: acked when accepted */
};

/* A buffer registered with riomap */
struct rs_iomap_mr {
	struct rs_iomap_mr *next;
	uint64_t offset;
	struct ibv_mr *mr;
	int index;			/* in the peer's table; -1: local */
};

struct rs_stream {
	struct rdma_event_channel *chan;
	struct rdma_cm_id *id;
	struct ibv_comp_channel *cq_chan;
	struct ibv_cq *cq;
	struct rs_src src_cq, src_cm;
	bool cq_armed;
	unsigned int unacked_cq_events;
	void *route;			/* RDMA_ROUTE, until connect */
	size_t route_len;
	struct rs_req *reqs, **reqs_tail;	/* listener */
	uint64_t tcp_opts;
	unsigned int keepalive_time;

	/* send side */
	uint16_t sseq_no, sseq_comp;	/* messages sent; the peer's limit */
	uint32_t ctrl_seqno, ctrl_max_seqno;
	int sqe_avail;
	uint8_t *sbuf;			/* sbuf_size ring + control slots */
	struct ibv_mr *smr;
	uint32_t sbuf_avail, sbuf_head;
	void *tbuf;			/* the peer writes here: SGL, iomaps */
	struct ibv_mr *tmr;
	volatile struct rs_sge *target_sgl;
	bool target_valid[RS_SGL_SIZE];	/* written, and its SGL imm seen */
	int target_sge, sgl_next;
	volatile struct rs_iomap *target_iomap;
	struct rs_iomap *iomap_seen;	/* entries whose imm arrived */
	int target_iomap_size;		/* our table's size (the peer's to
					 * fill); the option's value */
	struct rs_sge remote_sgl;	/* the peer's SGL table */
	struct rs_sge remote_iomap;	/* the peer's iomap table */
	int remote_sge;			/* next entry of it we write */
	bool swap;			/* the peer has the other byte order */

	/* receive side */
	uint8_t *rbuf;
	struct ibv_mr *rmr;
	uint32_t rbuf_offset;		/* next byte to read */
	uint32_t rbuf_free_offset;	/* next half to advertise */
	uint32_t rbuf_avail;		/* read, not advertised again */
	uint64_t rbuf_granted;		/* advertised, not written yet */
	uint16_t rseq_no, rseq_comp;
	uint32_t *rmsg;			/* lengths of unread messages */
	int rmsg_head, rmsg_tail;	/* ring of rq_size + 1 */

	/* riomap */
	struct rs_iomap_mr *iomaps;	/* sent to the peer, or local */
	struct rs_iomap_mr *iomap_queue;	/* to send */
	struct rs_iomap_mr *remote_iomappings;	/* remote_iomap.length */
};

struct ds_qp;
struct ds_dest;

struct rs_dgram {
	int udp;			/* the socket's address and port */
	struct rs_src src_udp;
	struct ds_qp *qps;
	struct ds_dest *dests, *conn_dest;
	int ndests;
	uint8_t *sbuf;			/* sq_size slots of RS_SNDLOWAT */
	uint8_t *smsg_free;		/* free slot list, linked in place */
	int sqe_avail, rqe_avail;
	struct ds_rmsg *dmsg;		/* ring of rq_size + 1 */
	int dmsg_head, dmsg_tail;
};

struct rsocket {
	int type;			/* SOCK_STREAM or SOCK_DGRAM */
	int domain;
	int index;			/* == epfd */
	int epfd;
	pthread_mutex_t lock, slock, rlock;
	int state;
	int err;			/* SO_ERROR */
	int fd_flags;			/* rfcntl's F_GETFL/F_SETFL */
	uint64_t so_opts, ipv6_opts;	/* option bits as rdma-core keeps */
	uint32_t sbuf_size, rbuf_size;
	uint16_t sq_size, rq_size, sq_inline;
	union {
		struct rs_stream st;
		struct rs_dgram dg;
	};
};

static inline int rs_err(int neg_errno)
{
	errno = -neg_errno;
	return -1;
}

static inline bool rs_nonblocking(const struct rsocket *rs, int flags)
{
	return (rs->fd_flags & O_NONBLOCK) || (flags & MSG_DONTWAIT);
}

/* ------------------------------------------------------------------ */
/* Table of contents                                                   */

/* rsocket.c: the descriptor table, life of an rsocket, names */
struct rsocket *rs_lookup(int fd);
struct rsocket *rs_alloc(const struct rsocket *parent, int type, int domain);
int rs_insert(struct rsocket *rs);
void rs_free(struct rsocket *rs);
int rs_epoll_add(struct rsocket *rs, int fd, struct rs_src *src);
void rs_epoll_del(struct rsocket *rs, int fd);
void rs_copy_addr(struct sockaddr *dst, const struct sockaddr *src,
		  socklen_t *len);

/* rs_conn.c: stream connections (rdma_cm, the QP, connection data) */
int rs_stream_open(struct rsocket *rs);
void rs_stream_close(struct rsocket *rs);
int rs_stream_bind(struct rsocket *rs, const struct sockaddr *addr);
int rs_stream_listen(struct rsocket *rs, int backlog);
int rs_stream_accept(struct rsocket *rs, struct sockaddr *addr,
		     socklen_t *addrlen);
int rs_stream_connect(struct rsocket *rs, const struct sockaddr *addr,
		      socklen_t addrlen);
int rs_connecting(struct rsocket *rs, bool nonblock);
int rs_stream_shutdown(struct rsocket *rs, int how);
void rs_cm_input(struct rsocket *rs);

/* rs_stream.c: the stream data path (credits, SGLs, messages) */
void rs_process(struct rsocket *rs);
/* rs_poll.c: wake every thread asleep on an rsocket to look again */
void rs_wake_sleepers(void);
int rs_get_comp(struct rsocket *rs, bool nonblock,
		bool (*test)(struct rsocket *rs));
bool rs_can_send(struct rsocket *rs);
bool rs_conn_can_send(struct rsocket *rs);
bool rs_have_rdata(struct rsocket *rs);
bool rs_conn_have_rdata(struct rsocket *rs);
bool rs_ctrl_avail(struct rsocket *rs);
bool rs_conn_all_sends_done(struct rsocket *rs);
int rs_post_ctrl(struct rsocket *rs, enum rs_ctrl ctrl);
int rs_post_recv(struct rsocket *rs);
int rs_post_write(struct rsocket *rs, struct ibv_sge *sgl, int nsge,
		  uint32_t msg, bool with_imm, int flags, uint64_t addr,
		  uint32_t rkey);
uint32_t rs_stage(struct rsocket *rs, const struct iovec **iov,
		  size_t *iov_off, uint32_t len, struct ibv_sge *sgl,
		  int *nsge, int *flags);
bool rs_cq_input(struct rsocket *rs);

/* rs_iomap.c: riomap, riounmap, riowrite */
int rs_send_iomaps(struct rsocket *rs, bool nonblock);
void rs_iomap_seen(struct rsocket *rs, uint32_t index);
void rs_iomap_free_all(struct rsocket *rs);

/* rs_dgram.c: datagram rsockets over UD (the socket; rs_dgram.h) */
int ds_open(struct rsocket *rs);
int ds_init_ep(struct rsocket *rs);
bool ds_can_send(struct rsocket *rs);
int ds_send_ud(struct rsocket *rs, struct ds_qp *qp, struct ibv_ah *ah,
	       uint32_t qpn, const struct ds_header *hdr,
	       const struct iovec *iov, int iovcnt, size_t len);
void ds_close(struct rsocket *rs);
int ds_bind(struct rsocket *rs, const struct sockaddr *addr,
	    socklen_t addrlen);
int ds_connect(struct rsocket *rs, const struct sockaddr *addr,
	       socklen_t addrlen);
ssize_t ds_sendto(struct rsocket *rs, const struct iovec *iov, int iovcnt,
		  int flags, const struct sockaddr *addr, socklen_t addrlen);
ssize_t ds_recvfrom(struct rsocket *rs, void *buf, size_t len, int flags,
		    struct sockaddr *src, socklen_t *srclen);
short ds_poll_revents(struct rsocket *rs, short events);
void ds_arm(struct rsocket *rs);
void ds_qp_input(struct rsocket *rs, struct rs_src *src);
void ds_process(struct rsocket *rs);

/* rs_ud.c: UD QPs, address handles, destinations, first contact */
socklen_t ds_sa_len(const struct sockaddr *sa);
bool ds_same_addr(const struct sockaddr *a, const struct sockaddr *b);
void ds_set_port(struct sockaddr *sa, uint16_t be_port);
uint16_t ds_get_port(const struct sockaddr *sa);
void ds_format_hdr(struct ds_header *h, const struct sockaddr *sa);
int ds_post_recv(struct rsocket *rs, struct ds_qp *qp, uint32_t offset);
void ds_free_qp(struct ds_qp *qp);
int ds_get_dest(struct rsocket *rs, const struct sockaddr *addr,
		struct ds_dest **out);
ssize_t ds_send_udp(struct rsocket *rs, struct ds_dest *d, uint8_t op,
		    const struct iovec *iov, int iovcnt);
void ds_udp_input(struct rsocket *rs);

/* rs_poll.c: waiting (the gate), events, rpoll and rselect */
int rs_wait(struct rsocket *rs);
bool rs_events(struct rsocket *rs);
short rs_poll_revents(struct rsocket *rs, short events, bool arm);

#endif
