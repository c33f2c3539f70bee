// SPDX-License-Identifier: MIT
/*
 * Direct data placement: riomap, riounmap, riowrite (rsocket(7)).
 *
 * Each side offers the other a table of RDMA_IOMAPSIZE entries right
 * after its SGL table (connection data: target_iomap_size).  riomap with
 * PROT_WRITE registers a buffer and writes its rs_iomap entry (offset,
 * address, rkey, length) into a free slot of the *peer's* table with an
 * IOMAP_SGL message whose immediate names the slot; the entry goes out
 * before the next data the socket sends (rdma-core sends it from the
 * next rsend, rsendv or riowrite).  riowrite looks the offset up in the
 * peer-written entries of *our* table and places the bytes with a plain
 * RDMA WRITE: the receiver sees nothing, but the data lands before
 * anything sent after it (RC order).
 *
 * As rdma-core: an IOMAP_SGL message uses a credit that the receiver
 * never returns (it is not a data message); riounmap tells the peer
 * nothing (its entry stays until the slot is reused); PROT_NONE only
 * registers the buffer.  softhca reads an entry of its table only once
 * the entry's IOMAP_SGL message arrived, from a copy taken then.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>

#include "rsocket.h"

/* The peer wrote entry index of our table (IOMAP_SGL): keep a copy */
void rs_iomap_seen(struct rsocket *rs, uint32_t index)
{
	struct rs_stream *st = &rs->st;

	if (index >= (uint32_t)st->target_iomap_size)
		return;		/* not a slot we offered */
	memcpy(&st->iomap_seen[index], (const void *)&st->target_iomap[index],
	       sizeof(st->iomap_seen[index]));
}

static struct rs_iomap_mr *free_slot(struct rsocket *rs)
{
	struct rs_stream *st = &rs->st;
	uint32_t i;

	if (!st->remote_iomappings && st->remote_iomap.length) {
		st->remote_iomappings = calloc(st->remote_iomap.length,
					       sizeof(*st->remote_iomappings));
		if (!st->remote_iomappings)
			return NULL;
		for (i = 0; i < st->remote_iomap.length; i++)
			st->remote_iomappings[i].index = (int)i;
	}
	for (i = 0; i < st->remote_iomap.length; i++)
		if (!st->remote_iomappings[i].mr)
			return &st->remote_iomappings[i];
	return NULL;
}

/* Send the queued entries, in order.  rs->slock and rs->lock held. */
int rs_send_iomaps(struct rsocket *rs, bool nonblock)
{
	struct rs_stream *st = &rs->st;
	struct rs_iomap_mr *m;
	struct ibv_sge sgl[2];
	struct rs_iomap iom;
	struct iovec v = { &iom, sizeof(iom) };
	const struct iovec *iov;
	size_t off;
	int ret = 0, nsge, flags;

	while ((m = st->iomap_queue)) {
		if (!rs_can_send(rs)) {
			ret = rs_get_comp(rs, nonblock, rs_conn_can_send);
			if (ret)
				break;
			if (!(rs->state & RS_WRITABLE)) {
				ret = -ECONNRESET;
				break;
			}
			continue;
		}
		iom.offset = m->offset;
		iom.sge.addr = (uintptr_t)m->mr->addr;
		iom.sge.length = (uint32_t)m->mr->length;
		iom.sge.key = m->mr->rkey;
		if (st->swap) {
			iom.offset = __builtin_bswap64(iom.offset);
			iom.sge.addr = __builtin_bswap64(iom.sge.addr);
			iom.sge.length = __builtin_bswap32(iom.sge.length);
			iom.sge.key = __builtin_bswap32(iom.sge.key);
		}
		iov = &v;
		off = 0;
		rs_stage(rs, &iov, &off, sizeof(iom), sgl, &nsge, &flags);
		st->sseq_no++;
		st->sqe_avail--;
		st->sbuf_avail -= sizeof(iom);
		ret = rs_post_write(rs, sgl, nsge,
				    rs_msg(RS_OP_IOMAP_SGL, (uint32_t)m->index),
				    true, flags,
				    st->remote_iomap.addr +
				    (uint64_t)m->index * sizeof(iom),
				    st->remote_iomap.key);
		st->iomap_queue = m->next;
		m->next = st->iomaps;
		st->iomaps = m;
		if (ret)
			break;
	}
	return ret;
}

static void release(struct rs_iomap_mr *m)
{
	ibv_dereg_mr(m->mr);
	m->mr = NULL;
	if (m->index < 0)
		free(m);
}

void rs_iomap_free_all(struct rsocket *rs)
{
	struct rs_stream *st = &rs->st;
	struct rs_iomap_mr *m, *next;
	int k;

	for (k = 0; k < 2; k++) {
		for (m = k ? st->iomap_queue : st->iomaps; m; m = next) {
			next = m->next;
			release(m);
		}
	}
	st->iomaps = st->iomap_queue = NULL;
	free(st->remote_iomappings);
	st->remote_iomappings = NULL;
}

/*
 * offset -1 maps the buffer at its own address (rdma-core); prot is
 * PROT_WRITE (the peer may riowrite to it) or PROT_NONE (registered for
 * local use only).  ENOMEM when the peer's table is full.
 */
off_t riomap(int socket, void *buf, size_t len, int prot, int flags,
	     off_t offset)
{
	struct rsocket *rs = rs_lookup(socket);
	int access = IBV_ACCESS_LOCAL_WRITE;
	struct rs_iomap_mr *m;
	struct rs_stream *st;
	int ret = 0;

	if (!rs)
		return rs_err(-EBADF);
	if (rs->type != SOCK_STREAM || (prot & ~PROT_WRITE))
		return rs_err(-EINVAL);
	st = &rs->st;
	pthread_mutex_lock(&rs->slock);
	pthread_mutex_lock(&rs->lock);
	if (!st->id || !st->id->pd || !st->rmsg) {
		ret = -EINVAL;		/* no connection: no PD yet */
		goto out;
	}
	if (prot & PROT_WRITE) {
		m = free_slot(rs);
		access |= IBV_ACCESS_REMOTE_WRITE;
	} else {
		m = calloc(1, sizeof(*m));
		if (m)
			m->index = -1;
	}
	if (!m) {
		ret = -ENOMEM;
		goto out;
	}
	m->mr = ibv_reg_mr(st->id->pd, buf, len, access);
	if (!m->mr) {
		ret = -errno;
		if (m->index < 0)
			free(m);
		goto out;
	}
	if (offset == -1)
		offset = (off_t)(uintptr_t)buf;
	m->offset = (uint64_t)offset;
	if (m->index >= 0) {
		struct rs_iomap_mr **tail = &st->iomap_queue;

		while (*tail)
			tail = &(*tail)->next;
		m->next = NULL;
		*tail = m;
	} else {
		m->next = st->iomaps;
		st->iomaps = m;
	}
out:
	pthread_mutex_unlock(&rs->lock);
	pthread_mutex_unlock(&rs->slock);
	return ret ? rs_err(ret) : offset;
}

int riounmap(int socket, void *buf, size_t len)
{
	struct rsocket *rs = rs_lookup(socket);
	struct rs_iomap_mr **pp, *m;
	int k, ret = -EINVAL;

	if (!rs)
		return rs_err(-EBADF);
	if (rs->type != SOCK_STREAM)
		return rs_err(-EINVAL);
	pthread_mutex_lock(&rs->slock);
	pthread_mutex_lock(&rs->lock);
	for (k = 0; k < 2 && ret; k++) {
		pp = k ? &rs->st.iomap_queue : &rs->st.iomaps;
		for (; (m = *pp); pp = &m->next) {
			if (m->mr->addr == buf && m->mr->length == len) {
				*pp = m->next;
				release(m);
				ret = 0;
				break;
			}
		}
	}
	pthread_mutex_unlock(&rs->lock);
	pthread_mutex_unlock(&rs->slock);
	return ret ? rs_err(ret) : 0;
}

/* The entry of our table (as the peer wrote it) that holds offset */
static const struct rs_iomap *find_iomap(struct rsocket *rs, uint64_t offset)
{
	const struct rs_iomap *e;
	int i;

	for (i = 0; i < rs->st.target_iomap_size; i++) {
		e = &rs->st.iomap_seen[i];
		if (e->sge.length && offset >= e->offset &&
		    offset - e->offset < e->sge.length)
			return e;
	}
	return NULL;
}

/*
 * Writes count bytes at the peer's mapped offset; returns what was
 * written (a short count stops at the end of the peer's mappings).  An
 * offset no mapping covers is EINVAL (rdma-core returns 0 written).
 */
size_t riowrite(int socket, const void *buf, size_t count, off_t offset,
		int flags)
{
	struct rsocket *rs = rs_lookup(socket);
	uint32_t xfer, olen = RS_OLAP_START_SIZE;
	struct iovec v = { (void *)buf, count };
	const struct iovec *iov = &v;
	const struct rs_iomap *e;
	size_t left = count, off = 0;
	struct ibv_sge sgl[2];
	struct rs_stream *st;
	bool nonblock;
	int ret = 0, nsge, wflags;
	uint64_t at = (uint64_t)offset;

	if (!rs)
		return (size_t)rs_err(-EBADF);
	if (rs->type != SOCK_STREAM)
		return (size_t)rs_err(-EINVAL);
	st = &rs->st;
	nonblock = rs_nonblocking(rs, flags);
	if (!(rs->state & (RS_CONNECTED | RS_DISCONNECTED)) || !st->rmsg)
		return (size_t)rs_err(-ENOTCONN);
	pthread_mutex_lock(&rs->slock);
	pthread_mutex_lock(&rs->lock);
	if (st->iomap_queue)
		ret = rs_send_iomaps(rs, nonblock);
	while (!ret && left) {
		if (!(rs->state & RS_WRITABLE)) {
			ret = -ECONNRESET;
			break;
		}
		e = find_iomap(rs, at);
		if (!e) {
			if (left == count)
				ret = -EINVAL;
			break;
		}
		if (!rs_can_send(rs)) {
			ret = rs_get_comp(rs, nonblock, rs_conn_can_send);
			if (ret)
				break;
			continue;
		}
		if (olen < left) {
			xfer = olen;
			if (olen < RS_MAX_TRANSFER)
				olen <<= 1;
		} else {
			xfer = (uint32_t)left;
		}
		xfer = MIN(xfer, st->sbuf_avail);
		xfer = (uint32_t)MIN((uint64_t)xfer,
				     e->offset + e->sge.length - at);
		rs_stage(rs, &iov, &off, xfer, sgl, &nsge, &wflags);
		st->sqe_avail--;
		st->sbuf_avail -= xfer;
		ret = rs_post_write(rs, sgl, nsge, rs_msg(RS_OP_WRITE, xfer),
				    false, wflags,
				    e->sge.addr + (at - e->offset), e->sge.key);
		if (ret)
			break;
		left -= xfer;
		at += xfer;
	}
	rs_process(rs);
	pthread_mutex_unlock(&rs->lock);
	pthread_mutex_unlock(&rs->slock);
	if (ret && left == count)
		return (size_t)rs_err(ret);
	return count - left;
}
