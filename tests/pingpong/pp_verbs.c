// SPDX-License-Identifier: MIT
/*
 * shca_pingpong's verbs side: the device, one CQ (an ibv_cq_ex with -t),
 * the QPs (an SRQ for PP_SRQ, created with ibv_create_qp_ex for -N), one
 * memory region holding the send buffer and the receive slots, the moves
 * to RTR and RTS, posting and polling.  Errors are printed here and
 * returned as -1; the caller ends the program.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "pp.h"

static int err(const char *what, int e)
{
	pp_fail("%s: %s", what, strerror(e));
	return -1;
}

static bool is_ud(const struct pp_ctx *c)
{
	return c->o->type == PP_UD;
}

static enum ibv_qp_type qp_type(const struct pp_ctx *c)
{
	switch (c->o->type) {
	case PP_UC:
		return IBV_QPT_UC;
	case PP_UD:
		return IBV_QPT_UD;
	default:
		return IBV_QPT_RC;
	}
}

static struct ibv_context *open_dev(const char *name)
{
	struct ibv_device **l = ibv_get_device_list(NULL), *d = NULL;
	struct ibv_context *ctx = NULL;
	int i;

	if (!l) {
		err("ibv_get_device_list", errno);
		return NULL;
	}
	for (i = 0; l[i]; i++)
		if (!name || !strcmp(ibv_get_device_name(l[i]), name)) {
			d = l[i];
			break;
		}
	if (!d)
		pp_fail("no device %s", name ? name : "at all");
	else if (!(ctx = ibv_open_device(d)))
		err("ibv_open_device", errno);
	ibv_free_device_list(l);
	return ctx;
}

static int create_cq(struct pp_ctx *c, int cqe)
{
	if (c->o->events && !(c->channel = ibv_create_comp_channel(c->ctx)))
		return err("ibv_create_comp_channel", errno);
	if (c->o->timestamps) {
		struct ibv_cq_init_attr_ex a = {
			.cqe = (uint32_t)cqe,
			.channel = c->channel,
			.wc_flags = IBV_WC_EX_WITH_BYTE_LEN |
				    IBV_WC_EX_WITH_QP_NUM |
				    IBV_WC_EX_WITH_SRC_QP |
				    IBV_WC_EX_WITH_COMPLETION_TIMESTAMP,
		};

		c->cqx = ibv_create_cq_ex(c->ctx, &a);
		if (!c->cqx)
			return err("ibv_create_cq_ex", errno);
		c->cq = ibv_cq_ex_to_cq(c->cqx);
	} else {
		c->cq = ibv_create_cq(c->ctx, cqe, NULL, c->channel, 0);
		if (!c->cq)
			return err("ibv_create_cq", errno);
	}
	return 0;
}

static int create_qp(struct pp_ctx *c, int i)
{
	struct ibv_qp_init_attr_ex a = {
		.send_cq = c->cq,
		.recv_cq = c->cq,
		.srq = c->srq,
		.cap = {
			.max_send_wr = 1,
			.max_recv_wr = c->srq ? 0 : (uint32_t)c->o->rx_depth,
			.max_send_sge = 1,
			.max_recv_sge = 1,
		},
		.qp_type = qp_type(c),
		.comp_mask = IBV_QP_INIT_ATTR_PD,
		.pd = c->pd,
	};
	struct ibv_qp_attr m = {
		.qp_state = IBV_QPS_INIT,
		.port_num = (uint8_t)c->o->ib_port,
	};
	int mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT, e;

	if (c->o->new_send) {
		a.comp_mask |= IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
		a.send_ops_flags = IBV_QP_EX_WITH_SEND;
	}
	c->qp[i] = ibv_create_qp_ex(c->ctx, &a);
	if (!c->qp[i])
		return err("ibv_create_qp_ex", errno);
	if (c->o->new_send && !(c->qpx[i] = ibv_qp_to_qp_ex(c->qp[i])))
		return err("ibv_qp_to_qp_ex", errno);
	if (is_ud(c)) {
		m.qkey = PP_QKEY;
		mask |= IBV_QP_QKEY;
	} else {
		mask |= IBV_QP_ACCESS_FLAGS;
	}
	e = ibv_modify_qp(c->qp[i], &m, mask);
	if (e)
		return err("ibv_modify_qp INIT", e);
	c->self.qpn[i] = c->qp[i]->qp_num;
	c->self.psn[i] = (uint32_t)lrand48() & 0xffffff;
	return 0;
}

int pp_open(struct pp_ctx *c)
{
	const struct pp_opts *o = c->o;
	struct ibv_port_attr pa;
	size_t send_len;
	int i, e;

	srand48((long)getpid() ^ (long)time(NULL));
	c->grh = is_ud(c) ? PP_GRH : 0;
	if (!(c->ctx = open_dev(o->dev)))
		return -1;
	e = ibv_query_port(c->ctx, (uint8_t)o->ib_port, &pa);
	if (e)
		return err("ibv_query_port", e);
	c->mtu = o->mtu ? o->mtu : pa.active_mtu;
	if (is_ud(c) && o->size > (128u << c->mtu)) {
		pp_fail("UD: %u bytes do not fit the MTU (%u)", o->size,
			128u << c->mtu);
		return -1;
	}
	e = ibv_query_gid(c->ctx, (uint8_t)o->ib_port, o->gid_index,
			  &c->sgid);
	if (e)
		return err("ibv_query_gid", e);
	c->self.gid = c->sgid;
	if (!(c->pd = ibv_alloc_pd(c->ctx)))
		return err("ibv_alloc_pd", errno);

	/* the send buffer, then the receive slots: guard, SGE, guard */
	c->nslots = (uint32_t)o->rx_depth * (o->type == PP_SRQ ? 1 : o->nqp);
	send_len = ((size_t)o->size + 63) & ~(size_t)63;
	c->stride = PP_FRONT + c->grh + o->size + PP_SLACK + PP_BACK;
	c->stride = (c->stride + 63) & ~(size_t)63;
	c->buf_len = send_len + c->nslots * c->stride;
	/* whole pages, as rdma-core's examples and perftest allocate: only
	 * the pages wholly inside an MR take the mapped same-host path
	 * (README, "Mapped registered memory") */
	c->buf_len = (c->buf_len + 4095) & ~(size_t)4095;
	if (posix_memalign((void **)&c->buf, 4096, c->buf_len))
		return err("posix_memalign", ENOMEM);
	memset(c->buf, 0, send_len);
	c->mr = ibv_reg_mr(c->pd, c->buf, c->buf_len, IBV_ACCESS_LOCAL_WRITE);
	if (!c->mr)
		return err("ibv_reg_mr", errno);

	if (create_cq(c, (int)c->nslots + o->nqp + 1))
		return -1;
	if (o->type == PP_SRQ) {
		struct ibv_srq_init_attr sa = {
			.attr = { .max_wr = (uint32_t)c->nslots, .max_sge = 1 },
		};

		if (!(c->srq = ibv_create_srq(c->pd, &sa)))
			return err("ibv_create_srq", errno);
	}
	for (i = 0; i < o->nqp; i++)
		if (create_qp(c, i))
			return -1;
	if (o->events) {
		e = ibv_req_notify_cq(c->cq, 0);
		if (e)
			return err("ibv_req_notify_cq", e);
		c->cq_armed = true;
	}
	return 0;
}

static void fill_ah(const struct pp_ctx *c, struct ibv_ah_attr *ah)
{
	memset(ah, 0, sizeof(*ah));
	ah->is_global = 1;
	ah->port_num = (uint8_t)c->o->ib_port;
	ah->grh.dgid = c->peer.gid;
	ah->grh.sgid_index = (uint8_t)c->o->gid_index;
	ah->grh.hop_limit = 1;
}

/* INIT -> RTR -> RTS toward c->peer. */
int pp_connect(struct pp_ctx *c)
{
	int i, e;

	if (is_ud(c)) {
		struct ibv_ah_attr ah;

		fill_ah(c, &ah);
		if (!(c->ah = ibv_create_ah(c->pd, &ah)))
			return err("ibv_create_ah", errno);
	}
	for (i = 0; i < c->o->nqp; i++) {
		struct ibv_qp_attr a = { .qp_state = IBV_QPS_RTR };
		int mask = IBV_QP_STATE;

		if (!is_ud(c)) {
			a.path_mtu = c->mtu;
			a.dest_qp_num = c->peer.qpn[i];
			a.rq_psn = c->peer.psn[i];
			fill_ah(c, &a.ah_attr);
			mask |= IBV_QP_AV | IBV_QP_PATH_MTU |
				IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
			if (c->o->type != PP_UC) {
				a.max_dest_rd_atomic = 1;
				a.min_rnr_timer = 12;
				mask |= IBV_QP_MAX_DEST_RD_ATOMIC |
					IBV_QP_MIN_RNR_TIMER;
			}
		}
		e = ibv_modify_qp(c->qp[i], &a, mask);
		if (e)
			return err("ibv_modify_qp RTR", e);
		memset(&a, 0, sizeof(a));
		a.qp_state = IBV_QPS_RTS;
		a.sq_psn = c->self.psn[i];
		mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
		if (c->o->type != PP_UC && !is_ud(c)) {
			a.timeout = 14;
			a.retry_cnt = 7;
			a.rnr_retry = 7;
			a.max_rd_atomic = 1;
			mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
				IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
		}
		e = ibv_modify_qp(c->qp[i], &a, mask);
		if (e)
			return err("ibv_modify_qp RTS", e);
	}
	return 0;
}

void pp_close(struct pp_ctx *c)
{
	int i;

	if (c->ah)
		ibv_destroy_ah(c->ah);
	for (i = 0; i < PP_MAX_QP; i++)
		if (c->qp[i])
			ibv_destroy_qp(c->qp[i]);
	if (c->srq)
		ibv_destroy_srq(c->srq);
	if (c->cq)
		ibv_destroy_cq(c->cq);
	if (c->channel)
		ibv_destroy_comp_channel(c->channel);
	if (c->mr)
		ibv_dereg_mr(c->mr);
	if (c->pd)
		ibv_dealloc_pd(c->pd);
	if (c->ctx)
		ibv_close_device(c->ctx);
	free(c->buf);
	free(c->base);
}

uint8_t *pp_send_buf(const struct pp_ctx *c)
{
	return c->buf;
}

uint8_t *pp_slot(const struct pp_ctx *c, uint32_t slot)
{
	return c->buf + c->buf_len - (size_t)(c->nslots - slot) * c->stride;
}

/* Post receive slot (filled with the sentinel first): to the SRQ, or to
 * the receive queue of QP slot / rx_depth. */
int pp_post_recv(struct pp_ctx *c, uint32_t slot)
{
	struct ibv_sge s = {
		.addr = (uintptr_t)pp_slot(c, slot) + PP_FRONT,
		.length = c->grh + c->o->size + PP_SLACK,
		.lkey = c->mr->lkey,
	};
	struct ibv_recv_wr wr = { .wr_id = slot, .sg_list = &s, .num_sge = 1 };
	struct ibv_recv_wr *bad;
	int e;

	pp_reset_slot(c, slot);
	if (c->srq)
		e = ibv_post_srq_recv(c->srq, &wr, &bad);
	else
		e = ibv_post_recv(c->qp[slot / (uint32_t)c->o->rx_depth], &wr,
				  &bad);
	return e ? err("ibv_post_recv", e) : 0;
}

/* Send iteration iter's message, on QP iter % nqp. */
int pp_post_send(struct pp_ctx *c, uint32_t iter)
{
	int q = (int)(iter % (uint32_t)c->o->nqp), e;
	struct ibv_sge s = {
		.addr = (uintptr_t)pp_send_buf(c),
		.length = c->o->size,
		.lkey = c->mr->lkey,
	};

	if (c->o->new_send) {
		struct ibv_qp_ex *x = c->qpx[q];

		ibv_wr_start(x);
		x->wr_id = PP_SEND_TAG | iter;
		x->wr_flags = IBV_SEND_SIGNALED;
		ibv_wr_send(x);
		if (is_ud(c))
			ibv_wr_set_ud_addr(x, c->ah, c->peer.qpn[q], PP_QKEY);
		ibv_wr_set_sge(x, s.lkey, s.addr, s.length);
		e = ibv_wr_complete(x);
	} else {
		struct ibv_send_wr wr = {
			.wr_id = PP_SEND_TAG | iter,
			.sg_list = &s,
			.num_sge = 1,
			.opcode = IBV_WR_SEND,
			.send_flags = IBV_SEND_SIGNALED,
		}, *bad;

		if (is_ud(c)) {
			wr.wr.ud.ah = c->ah;
			wr.wr.ud.remote_qpn = c->peer.qpn[q];
			wr.wr.ud.remote_qkey = PP_QKEY;
		}
		e = ibv_post_send(c->qp[q], &wr, &bad);
	}
	return e ? err("ibv_post_send", e) : 0;
}

/* One completion polled (1), none now (0), or an error (-1). */
static int poll_once(struct pp_ctx *c, struct pp_wc *w)
{
	struct ibv_poll_cq_attr pa = { 0 };
	struct ibv_cq_ex *x = c->cqx;
	struct ibv_wc wc;
	int n;

	if (!x) {
		n = ibv_poll_cq(c->cq, 1, &wc);
		if (n < 0)
			return err("ibv_poll_cq", -n);
		if (!n)
			return 0;
		w->wr_id = wc.wr_id;
		w->status = wc.status;
		w->opcode = wc.opcode;
		w->byte_len = wc.byte_len;
		w->qp_num = wc.qp_num;
		w->src_qp = wc.src_qp;
		w->wc_flags = wc.wc_flags;
		w->ts = 0;
		return 1;
	}
	n = ibv_start_poll(x, &pa);
	if (n == ENOENT)
		return 0;
	if (n)
		return err("ibv_start_poll", n);
	w->wr_id = x->wr_id;
	w->status = x->status;
	w->opcode = ibv_wc_read_opcode(x);
	w->byte_len = ibv_wc_read_byte_len(x);
	w->qp_num = ibv_wc_read_qp_num(x);
	w->src_qp = ibv_wc_read_src_qp(x);
	w->wc_flags = ibv_wc_read_wc_flags(x);
	w->ts = ibv_wc_read_completion_ts(x);
	ibv_end_poll(x);
	return 1;
}

/*
 * Did the peer end (its side of the TCP exchange closed)?  A side that
 * failed ends at once, and its peer, which waits for a message that will
 * not come, says so and ends too instead of waiting for its timeout.
 * What the peer writes (it is done) stops the watch.
 */
static bool peer_ended(struct pp_ctx *c, short revents)
{
	char b;
	ssize_t n;

	if (!revents)
		return false;
	n = recv(c->tcp_fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
	if (n > 0) {
		c->tcp_data = true;
		return false;
	}
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return false;
	pp_fail("the peer ended (it closed the TCP exchange) while this "
		"side waited for a completion");
	return true;
}

/* Wait until the channel or the exchange is readable; -1: the peer ended */
static int wait_channel(struct pp_ctx *c)
{
	for (;;) {
		int tfd = c->tcp_data ? -1 : c->tcp_fd;
		struct pollfd p[2] = {
			{ .fd = c->channel->fd, .events = POLLIN },
			{ .fd = tfd, .events = POLLIN },
		};

		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			return err("poll", errno);
		}
		if (peer_ended(c, p[1].revents))
			return -1;
		if (p[0].revents)
			return 0;
	}
}

/*
 * The next completion: polled; with -e, when the CQ is empty, armed and
 * polled again (what arrived in between is not missed), then waited for
 * on the channel.  Either way the TCP exchange is watched for the peer's
 * end (without -e, every 4096 empty polls).
 */
int pp_poll(struct pp_ctx *c, struct pp_wc *w)
{
	unsigned int empty = 0;

	for (;;) {
		struct ibv_cq *ev_cq;
		void *ev_ctx;
		int n = poll_once(c, w), e;

		if (n)
			return n < 0 ? -1 : 0;
		if (!c->o->events) {
			struct pollfd p = { .fd = c->tcp_fd, .events = POLLIN };

			if (++empty % 4096 || c->tcp_data || c->tcp_fd < 0)
				continue;
			if (poll(&p, 1, 0) > 0 && peer_ended(c, p.revents))
				return -1;
			continue;
		}
		if (!c->cq_armed) {
			e = ibv_req_notify_cq(c->cq, 0);
			if (e)
				return err("ibv_req_notify_cq", e);
			c->cq_armed = true;
			continue;
		}
		if (c->tcp_fd >= 0 && wait_channel(c))
			return -1;
		if (ibv_get_cq_event(c->channel, &ev_cq, &ev_ctx))
			return err("ibv_get_cq_event", errno);
		if (ev_cq != c->cq) {
			pp_fail("ibv_get_cq_event: an event for CQ %p, not %p",
				(void *)ev_cq, (void *)c->cq);
			return -1;
		}
		ibv_ack_cq_events(ev_cq, 1);
		c->cq_armed = false;
		c->nevents++;
	}
}

/* The device clock (ibv_query_rt_values_ex), in its ticks. */
uint64_t pp_clock(struct pp_ctx *c)
{
	struct ibv_values_ex v = { .comp_mask = IBV_VALUES_MASK_RAW_CLOCK };
	int e = ibv_query_rt_values_ex(c->ctx, &v);

	if (e) {
		err("ibv_query_rt_values_ex", e);
		return 0;
	}
	return (uint64_t)v.raw_clock.tv_sec * 1000000000ull +
	       (uint64_t)v.raw_clock.tv_nsec;
}

const char *pp_gid_str(const union ibv_gid *g, char *s, size_t len)
{
	if (!inet_ntop(AF_INET6, g->raw, s, (socklen_t)len))
		snprintf(s, len, "?");
	return s;
}
