// SPDX-License-Identifier: MIT
/*
 * Stream rsockets: moving data, as rdma-core's protocol does it.
 *
 * Sending.  Data is copied into the send ring (sbuf) and written with
 * RDMA WRITE WITH IMM (op DATA, the byte count) straight into the
 * receive buffer the peer advertised: target_sgl[target_sge], filled
 * front to back; a write never crosses the end of an advertised buffer.
 * A send needs a send queue entry, RS_SNDLOWAT bytes of ring, a credit
 * (sseq_no != sseq_comp: the peer has a receive WQE and a message slot
 * for it) and a target with room.  The first write of a call is 2 KiB,
 * each next one doubles up to 64 KiB (rdma-core's overlap of copy and
 * transfer).
 *
 * Receiving.  The peer writes into our rbuf; each DATA immediate queues
 * its length (rmsg).  rrecv copies from rbuf in order; once half of rbuf
 * was read, that half is advertised again: an SGL message writes its
 * rs_sge into the peer's table (entry remote_sge, in turn) with the new
 * credit limit (rseq_no + rq_size) in the immediate.  With less to offer,
 * an SGL message without data carries the credits alone, sent when half
 * of the credits were used (rseq_comp).
 *
 * Control messages (SGL, CTRL) are limited to RS_QP_CTRL_SIZE in flight
 * (ctrl_seqno/ctrl_max_seqno), and that many send queue entries are kept
 * for them.
 *
 * What the peer writes is checked before use: a DATA length beyond what
 * we advertised, or more messages than credits allow, is a protocol
 * error (the connection fails with EPROTO), never a read outside rbuf.
 * An advertised buffer is used only once its SGL message arrived (the
 * completion orders it after the write of the entry); rdma-core reads the
 * table entry as soon as its length is non-zero.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include "rsocket.h"

#define RS_WR_RECV		(1ull << 63)
#define RS_CQ_BATCH		16

/* ------------------------------------------------------------------ */
/* Posting                                                             */

int rs_post_write(struct rsocket *rs, struct ibv_sge *sgl, int nsge,
		  uint32_t msg, bool with_imm, int flags, uint64_t addr,
		  uint32_t rkey)
{
	struct ibv_send_wr wr, *bad;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = msg;
	wr.sg_list = sgl;
	wr.num_sge = nsge;
	wr.opcode = with_imm ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE;
	wr.send_flags = flags;
	wr.imm_data = htobe32(msg);
	wr.wr.rdma.remote_addr = addr;
	wr.wr.rdma.rkey = rkey;
	return -ibv_post_send(rs->st.id->qp, &wr, &bad);
}

/* A zero-byte WRITE WITH IMM carrying a control code */
int rs_post_ctrl(struct rsocket *rs, enum rs_ctrl ctrl)
{
	return rs_post_write(rs, NULL, 0, rs_msg(RS_OP_CTRL, ctrl), true, 0,
			     0, 0);
}

int rs_post_recv(struct rsocket *rs)
{
	struct ibv_recv_wr wr = { .wr_id = RS_WR_RECV }, *bad;

	return -ibv_post_recv(rs->st.id->qp, &wr, &bad);
}

/*
 * Copy len bytes from an iovec cursor into the send ring at its head (in
 * one or two pieces where the ring wraps): the scatter list of the write.
 * The caller made sure len <= sbuf_avail.
 */
uint32_t rs_stage(struct rsocket *rs, const struct iovec **iov,
		  size_t *iov_off, uint32_t len, struct ibv_sge *sgl,
		  int *nsge, int *flags)
{
	struct rs_stream *st = &rs->st;
	uint32_t piece[2], done = 0;
	int i;

	piece[0] = MIN(len, rs->sbuf_size - st->sbuf_head);
	piece[1] = len - piece[0];
	*nsge = piece[1] ? 2 : 1;
	for (i = 0; i < *nsge; i++) {
		uint8_t *dst = st->sbuf + st->sbuf_head;
		uint32_t left = piece[i];

		sgl[i].addr = (uintptr_t)dst;
		sgl[i].length = piece[i];
		sgl[i].lkey = st->smr->lkey;
		while (left) {
			size_t n = MIN((size_t)left,
				       (*iov)->iov_len - *iov_off);

			memcpy(dst, (uint8_t *)(*iov)->iov_base + *iov_off, n);
			dst += n;
			left -= n;
			*iov_off += n;
			if (*iov_off == (*iov)->iov_len) {
				(*iov)++;
				*iov_off = 0;
			}
		}
		done += piece[i];
		st->sbuf_head = (st->sbuf_head + piece[i]) % rs->sbuf_size;
	}
	*flags = len <= rs->sq_inline ? IBV_SEND_INLINE : 0;
	return done;
}

/* One DATA message into the current target; the target moves on once
 * full (rdma-core's rs_write_data) */
static int write_data(struct rsocket *rs, struct ibv_sge *sgl, int nsge,
		      uint32_t len, int flags)
{
	struct rs_stream *st = &rs->st;
	volatile struct rs_sge *t = &st->target_sgl[st->target_sge];
	uint64_t addr = t->addr;
	uint32_t rkey = t->key;

	st->sseq_no++;
	st->sqe_avail--;
	st->sbuf_avail -= len;
	t->addr = addr + len;
	t->length -= len;
	if (!t->length) {
		st->target_valid[st->target_sge] = false;
		st->target_sge = (st->target_sge + 1) % RS_SGL_SIZE;
	}
	return rs_post_write(rs, sgl, nsge, rs_msg(RS_OP_DATA, len), true,
			     flags, addr, rkey);
}

/* ------------------------------------------------------------------ */
/* Credits                                                             */

bool rs_ctrl_avail(struct rsocket *rs)
{
	return rs->st.ctrl_seqno != rs->st.ctrl_max_seqno;
}

static void send_credits(struct rsocket *rs)
{
	struct rs_stream *st = &rs->st;
	uint32_t half = rs->rbuf_size >> 1;
	/* the limit as rdma-core computes it, not cut to 16 bits: the reader
	 * keeps the low 16 */
	uint32_t msg = rs_msg(RS_OP_SGL, (uint32_t)st->rseq_no + rs->rq_size);
	struct ibv_sge ibsge;
	struct rs_sge sge;
	int flags;

	st->ctrl_seqno++;
	st->rseq_comp = st->rseq_no + (rs->rq_size >> 1);
	if (st->rbuf_avail < half) {
		rs_post_write(rs, NULL, 0, msg, true, 0, 0, 0);
		return;
	}
	sge.addr = (uintptr_t)&st->rbuf[st->rbuf_free_offset];
	sge.key = st->rmr->rkey;
	sge.length = half;
	if (st->swap) {	/* written in the reader's byte order */
		sge.addr = __builtin_bswap64(sge.addr);
		sge.key = __builtin_bswap32(sge.key);
		sge.length = __builtin_bswap32(sge.length);
	}
	if (rs->sq_inline >= sizeof(sge)) {
		ibsge.addr = (uintptr_t)&sge;
		ibsge.lkey = 0;
		flags = IBV_SEND_INLINE;
	} else {
		void *slot = st->sbuf + rs->sbuf_size + sizeof(sge) *
			     (st->ctrl_seqno & (RS_QP_CTRL_SIZE - 1));

		memcpy(slot, &sge, sizeof(sge));
		ibsge.addr = (uintptr_t)slot;
		ibsge.lkey = st->smr->lkey;
		flags = 0;
	}
	ibsge.length = sizeof(sge);
	rs_post_write(rs, &ibsge, 1, msg, true, flags,
		      st->remote_sgl.addr + st->remote_sge * sizeof(sge),
		      st->remote_sgl.key);
	st->rbuf_avail -= half;
	st->rbuf_granted += half;
	st->rbuf_free_offset += half;
	if (st->rbuf_free_offset >= rs->rbuf_size)
		st->rbuf_free_offset = 0;
	st->remote_sge = (st->remote_sge + 1) % st->remote_sgl.length;
}

static void update_credits(struct rsocket *rs)
{
	struct rs_stream *st = &rs->st;

	if ((st->rbuf_avail >= (rs->rbuf_size >> 1) ||
	     (int16_t)(st->rseq_no - st->rseq_comp) >= 0) &&
	    rs_ctrl_avail(rs) && (rs->state & RS_CONNECTED))
		send_credits(rs);
}

/* ------------------------------------------------------------------ */
/* Completions                                                         */

static void protocol_error(struct rsocket *rs, const char *what)
{
	shca_warn_once("rsocket %d: the peer broke the protocol: %s",
		       rs->index, what);
	rs->state = RS_ERROR;
	rs->err = EPROTO;
}

/* A message from the peer; false when the connection ended */
static bool recv_msg(struct rsocket *rs, const struct ibv_wc *wc)
{
	struct rs_stream *st = &rs->st;
	uint32_t msg = be32toh(wc->imm_data);
	uint32_t data = rs_msg_data(msg);
	int next;

	if (!(wc->wc_flags & IBV_WC_WITH_IMM)) {
		protocol_error(rs, "message without immediate data");
		return false;
	}
	switch (rs_msg_op(msg)) {
	case RS_OP_SGL:
		st->sseq_comp = (uint16_t)data;
		if (wc->byte_len == sizeof(struct rs_sge)) {
			/* a new target in table entry sgl_next */
			st->target_valid[st->sgl_next] = true;
			st->sgl_next = (st->sgl_next + 1) % RS_SGL_SIZE;
		}
		return true;
	case RS_OP_IOMAP_SGL:
		rs_iomap_seen(rs, data);
		return true;
	case RS_OP_CTRL:
		if (data == RS_CTRL_DISCONNECT) {
			rs->state = RS_DISCONNECTED;
			return false;
		}
		if (data == RS_CTRL_SHUTDOWN) {
			if (!(rs->state & RS_WRITABLE)) {
				rs->state = RS_DISCONNECTED;
				return false;
			}
			rs->state &= ~RS_READABLE;
		}
		return true;
	case RS_OP_WRITE:
		return true;
	default:	/* DATA, and the reserved data ops as rdma-core */
		next = (st->rmsg_tail + 1) % (rs->rq_size + 1);
		if (data > st->rbuf_granted || next == st->rmsg_head) {
			protocol_error(rs, data > st->rbuf_granted ?
				       "data beyond the advertised buffer" :
				       "more messages than credits");
			return false;
		}
		st->rbuf_granted -= data;
		st->rmsg[st->rmsg_tail] = data;
		st->rmsg_tail = next;
		return true;
	}
}

static void send_done(struct rsocket *rs, const struct ibv_wc *wc)
{
	struct rs_stream *st = &rs->st;
	uint32_t msg = (uint32_t)wc->wr_id;

	switch (rs_msg_op(msg)) {
	case RS_OP_SGL:
		st->ctrl_max_seqno++;
		break;
	case RS_OP_CTRL:
		st->ctrl_max_seqno++;
		if (rs_msg_data(msg) == RS_CTRL_DISCONNECT)
			rs->state = RS_DISCONNECTED;
		break;
	case RS_OP_IOMAP_SGL:
		st->sqe_avail++;
		st->sbuf_avail += sizeof(struct rs_iomap);
		break;
	default:
		st->sqe_avail++;
		st->sbuf_avail += rs_msg_data(msg);
		break;
	}
	if (wc->status != IBV_WC_SUCCESS && (rs->state & RS_CONNECTED)) {
		rs->state = RS_ERROR;
		rs->err = EIO;
	}
}

/* Take every completion; receive WQEs consumed are posted again while
 * connected.  rs->lock held; true if there was any. */
bool rs_cq_input(struct rsocket *rs)
{
	struct ibv_wc wc[RS_CQ_BATCH];
	int i, n, rcnt = 0, ret = 0;
	bool more = true, any = false;

	if (!rs->st.cq)
		return false;
	while (more && (n = ibv_poll_cq(rs->st.cq, RS_CQ_BATCH, wc)) > 0) {
		any = true;
		for (i = 0; i < n; i++) {
			if (!(wc[i].wr_id & RS_WR_RECV)) {
				send_done(rs, &wc[i]);
				continue;
			}
			if (wc[i].status != IBV_WC_SUCCESS)
				continue;	/* flushed */
			rcnt++;
			if (more && !recv_msg(rs, &wc[i]))
				more = false;
		}
	}
	if (!(rs->state & RS_CONNECTED))
		return any;
	while (!ret && rcnt--)
		ret = rs_post_recv(rs);
	if (ret) {
		rs->state = RS_ERROR;
		rs->err = -ret;
	}
	return any;
}

/*
 * Completions taken here may be what another thread asleep on this
 * socket waits for (data it would read, credits it would send with):
 * taken by polling, they leave no event on the socket's fd to wake it,
 * so the sleepers are woken to look again (rs_poll.c's gate).  Without
 * it, a thread that sent while another received on one socket could
 * take the other's data and leave it asleep for good (seen in
 * tests/cm/test_rsocket.c stream_two_threads, 1 run in ~20).
 */
void rs_process(struct rsocket *rs)
{
	if (rs_cq_input(rs))
		rs_wake_sleepers();
	update_credits(rs);
}

/*
 * Until test() holds: completions first, then (blocking) arm the CQ and
 * sleep on the socket's fd.  A non-blocking call looks once at the
 * socket's event sources before EAGAIN (a CM event may end the wait).
 * rs->lock held; 0 or -errno (-EAGAIN, -EINTR).
 */
int rs_get_comp(struct rsocket *rs, bool nonblock,
		bool (*test)(struct rsocket *rs))
{
	bool looked = false;
	int ret;

	for (;;) {
		rs_process(rs);
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
		if (!rs->st.cq_armed) {
			ibv_req_notify_cq(rs->st.cq, 0);
			rs->st.cq_armed = true;
			continue;
		}
		ret = rs_wait(rs);
		if (ret)
			return ret;
	}
}

/* ------------------------------------------------------------------ */
/* Conditions                                                          */

bool rs_can_send(struct rsocket *rs)
{
	struct rs_stream *st = &rs->st;

	return st->sqe_avail > 0 && st->sbuf_avail >= RS_SNDLOWAT &&
	       st->sseq_no != st->sseq_comp &&
	       st->target_valid[st->target_sge] &&
	       st->target_sgl[st->target_sge].length != 0;
}

bool rs_conn_can_send(struct rsocket *rs)
{
	return rs_can_send(rs) || !(rs->state & RS_WRITABLE);
}

bool rs_have_rdata(struct rsocket *rs)
{
	return rs->st.rmsg_head != rs->st.rmsg_tail;
}

bool rs_conn_have_rdata(struct rsocket *rs)
{
	return rs_have_rdata(rs) || !(rs->state & RS_READABLE);
}

bool rs_conn_all_sends_done(struct rsocket *rs)
{
	struct rs_stream *st = &rs->st;

	return (int)(st->ctrl_max_seqno - st->ctrl_seqno) + st->sqe_avail ==
	       rs->sq_size || !(rs->state & RS_CONNECTED);
}

/* ------------------------------------------------------------------ */
/* Send and receive                                                    */

/*
 * A stream call on a socket that is not connected yet: finish a
 * connection under way (EAGAIN when non-blocking, as rdma-core), refuse
 * one that never started.
 */
static int stream_ready(struct rsocket *rs, bool nonblock)
{
	int ret = 0;

	if (!(rs->state & RS_OPENING))
		return rs->st.id && rs->st.id->qp && rs->st.rmsg ? 0 :
								   -ENOTCONN;
	pthread_mutex_lock(&rs->lock);
	if (rs->state & RS_OPENING)
		ret = rs_connecting(rs, nonblock);
	pthread_mutex_unlock(&rs->lock);
	if (ret == -EINPROGRESS)
		return -EAGAIN;
	return ret;
}

static size_t iov_total(const struct iovec *iov, int iovcnt)
{
	size_t len = 0;
	int i;

	for (i = 0; i < iovcnt; i++)
		len += iov[i].iov_len;
	return len;
}

static ssize_t stream_sendv(struct rsocket *rs, const struct iovec *iov,
			    int iovcnt, int flags)
{
	bool nonblock = rs_nonblocking(rs, flags);
	uint32_t xfer, olen = RS_OLAP_START_SIZE;
	size_t len = iov_total(iov, iovcnt), left = len, iov_off = 0;
	struct ibv_sge sgl[2];
	int ret, nsge, wflags;

	ret = stream_ready(rs, nonblock);
	if (ret)
		return ret;
	pthread_mutex_lock(&rs->slock);
	pthread_mutex_lock(&rs->lock);
	if (rs->st.iomap_queue)
		ret = rs_send_iomaps(rs, nonblock);
	while (!ret && left) {
		if (!(rs->state & RS_WRITABLE)) {
			ret = -ECONNRESET;
			break;
		}
		if (!rs_can_send(rs)) {
			ret = rs_get_comp(rs, nonblock, rs_conn_can_send);
			if (ret)
				break;
			continue;	/* writable again checked above */
		}
		if (olen < left) {
			xfer = olen;
			if (olen < RS_MAX_TRANSFER)
				olen <<= 1;
		} else {
			xfer = left;
		}
		xfer = MIN(xfer, rs->st.sbuf_avail);
		xfer = MIN(xfer, rs->st.target_sgl[rs->st.target_sge].length);
		rs_stage(rs, &iov, &iov_off, xfer, sgl, &nsge, &wflags);
		ret = write_data(rs, sgl, nsge, xfer, wflags);
		if (ret)
			break;
		left -= xfer;
	}
	rs_process(rs);
	pthread_mutex_unlock(&rs->lock);
	pthread_mutex_unlock(&rs->slock);
	return ret && left == len ? ret : (ssize_t)(len - left);
}

/* Copy n bytes of rbuf from offset off (wrapping) to an iovec cursor */
static void copy_out(struct rsocket *rs, uint32_t off, uint32_t n,
		     const struct iovec **iov, size_t *iov_off)
{
	while (n) {
		size_t c = MIN((size_t)n, (size_t)(rs->rbuf_size - off));

		c = MIN(c, (*iov)->iov_len - *iov_off);
		memcpy((uint8_t *)(*iov)->iov_base + *iov_off,
		       rs->st.rbuf + off, c);
		n -= c;
		off = (off + c) % rs->rbuf_size;
		*iov_off += c;
		if (*iov_off == (*iov)->iov_len) {
			(*iov)++;
			*iov_off = 0;
		}
	}
}

/* MSG_PEEK: what the next rrecv would return, consuming nothing */
static size_t peek(struct rsocket *rs, const struct iovec *iov, size_t len)
{
	struct rs_stream *st = &rs->st;
	int head = st->rmsg_head;
	uint32_t off = st->rbuf_offset, n;
	size_t iov_off = 0, left = len;

	while (left && head != st->rmsg_tail) {
		n = (uint32_t)MIN(left, (size_t)st->rmsg[head]);
		copy_out(rs, off, n, &iov, &iov_off);
		off = (off + n) % rs->rbuf_size;
		left -= n;
		head = (head + 1) % (rs->rq_size + 1);
	}
	return len - left;
}

/* Data still queued is received after the peer has gone (rdma-core) */
static ssize_t stream_recvv(struct rsocket *rs, const struct iovec *iov,
			    int iovcnt, int flags)
{
	struct rs_stream *st = &rs->st;
	bool nonblock = rs_nonblocking(rs, flags);
	size_t len = iov_total(iov, iovcnt), left = len, iov_off = 0;
	uint32_t n;
	int ret;

	ret = stream_ready(rs, nonblock);
	if (ret)
		return ret;
	pthread_mutex_lock(&rs->rlock);
	pthread_mutex_lock(&rs->lock);
	do {
		if (!rs_have_rdata(rs)) {
			ret = rs_get_comp(rs, nonblock, rs_conn_have_rdata);
			if (ret)
				break;
		}
		if (flags & MSG_PEEK) {
			left = len - peek(rs, iov, left);
			break;
		}
		while (left && rs_have_rdata(rs)) {
			uint32_t *m = &st->rmsg[st->rmsg_head];

			if (left < *m) {
				n = (uint32_t)left;
				*m -= n;
			} else {
				n = *m;
				st->rseq_no++;
				st->rmsg_head = (st->rmsg_head + 1) %
						(rs->rq_size + 1);
			}
			copy_out(rs, st->rbuf_offset, n, &iov, &iov_off);
			st->rbuf_offset = (st->rbuf_offset + n) % rs->rbuf_size;
			st->rbuf_avail += n;
			left -= n;
		}
	} while (left && (flags & MSG_WAITALL) && (rs->state & RS_READABLE));
	update_credits(rs);
	pthread_mutex_unlock(&rs->lock);
	pthread_mutex_unlock(&rs->rlock);
	return ret && left == len ? ret : (ssize_t)(len - left);
}

/* ------------------------------------------------------------------ */
/* The calls                                                           */

static ssize_t do_sendv(int socket, const struct iovec *iov, int iovcnt,
			int flags, const struct sockaddr *to, socklen_t tolen)
{
	struct rsocket *rs = rs_lookup(socket);
	ssize_t ret;

	if (!rs)
		return rs_err(-EBADF);
	if (iovcnt < 0 || (iovcnt && !iov))
		return rs_err(-EINVAL);
	if (rs->type == SOCK_DGRAM)
		ret = ds_sendto(rs, iov, iovcnt, flags, to, tolen);
	else if (to || tolen)
		ret = -EISCONN;		/* rdma-core's rsendto on a stream */
	else
		ret = stream_sendv(rs, iov, iovcnt, flags);
	return ret < 0 ? rs_err((int)ret) : ret;
}

static ssize_t do_recvv(int socket, const struct iovec *iov, int iovcnt,
			int flags, struct sockaddr *from, socklen_t *fromlen)
{
	struct rsocket *rs = rs_lookup(socket);
	ssize_t ret;

	if (!rs)
		return rs_err(-EBADF);
	if (iovcnt < 0 || (iovcnt && !iov))
		return rs_err(-EINVAL);
	if (rs->type == SOCK_DGRAM) {
		/* one message into the first buffer, as rdma-core */
		ret = ds_recvfrom(rs, iovcnt ? iov[0].iov_base : NULL,
				  iovcnt ? iov[0].iov_len : 0, flags, from,
				  fromlen);
		return ret < 0 ? rs_err((int)ret) : ret;
	}
	ret = stream_recvv(rs, iov, iovcnt, flags);
	if (ret < 0)
		return rs_err((int)ret);
	if (ret > 0 && from && fromlen)
		rgetpeername(socket, from, fromlen);
	return ret;
}

ssize_t rsend(int socket, const void *buf, size_t len, int flags)
{
	struct iovec iov = { (void *)buf, len };

	return do_sendv(socket, &iov, 1, flags, NULL, 0);
}

ssize_t rsendto(int socket, const void *buf, size_t len, int flags,
		const struct sockaddr *dest_addr, socklen_t addrlen)
{
	struct iovec iov = { (void *)buf, len };

	return do_sendv(socket, &iov, 1, flags, dest_addr, addrlen);
}

/* Ancillary data is not supported (ENOTSUP, as rdma-core) */
ssize_t rsendmsg(int socket, const struct msghdr *msg, int flags)
{
	if (!msg)
		return rs_err(-EFAULT);
	if (msg->msg_control && msg->msg_controllen)
		return rs_err(-ENOTSUP);
	return do_sendv(socket, msg->msg_iov, (int)msg->msg_iovlen, flags,
			msg->msg_name, msg->msg_namelen);
}

ssize_t rwrite(int socket, const void *buf, size_t count)
{
	return rsend(socket, buf, count, 0);
}

ssize_t rwritev(int socket, const struct iovec *iov, int iovcnt)
{
	return do_sendv(socket, iov, iovcnt, 0, NULL, 0);
}

ssize_t rrecv(int socket, void *buf, size_t len, int flags)
{
	struct iovec iov = { buf, len };

	return do_recvv(socket, &iov, 1, flags, NULL, NULL);
}

ssize_t rrecvfrom(int socket, void *buf, size_t len, int flags,
		  struct sockaddr *src_addr, socklen_t *addrlen)
{
	struct iovec iov = { buf, len };

	return do_recvv(socket, &iov, 1, flags, src_addr, addrlen);
}

/*
 * Every buffer of the message is filled (rdma-core fills the first only,
 * and takes the flags from msg_flags instead of the argument).
 */
ssize_t rrecvmsg(int socket, struct msghdr *msg, int flags)
{
	if (!msg)
		return rs_err(-EFAULT);
	if (msg->msg_control && msg->msg_controllen)
		return rs_err(-ENOTSUP);
	msg->msg_flags = 0;
	return do_recvv(socket, msg->msg_iov, (int)msg->msg_iovlen, flags,
			msg->msg_name,
			msg->msg_name ? &msg->msg_namelen : NULL);
}

ssize_t rread(int socket, void *buf, size_t count)
{
	return rrecv(socket, buf, count, 0);
}

ssize_t rreadv(int socket, const struct iovec *iov, int iovcnt)
{
	return do_recvv(socket, iov, iovcnt, 0, NULL, NULL);
}
