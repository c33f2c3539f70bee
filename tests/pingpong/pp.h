/* SPDX-License-Identifier: MIT */
/*
 * shca_pingpong: softhca's own checked ping-pong (issue 16).  Two
 * processes, a server and a client, exchange their QP numbers over TCP
 * as Debian's ibv_*_pingpong do, then bounce SEND messages: RC, UC, UD,
 * or an SRQ shared by several RC QPs; completion events (-e), the new
 * post-send API (-N: ibv_wr_*), the extended CQ with completion
 * timestamps (-t: ibv_cq_ex).  Unlike the Debian clients, whose -c reads
 * one byte per page on the server only, every side checks every byte it
 * receives: the message against a pattern that depends on the sender,
 * the iteration and the offset and is never the sentinel; the bytes
 * before and after it (the rest of the receive SGE and a guard past it)
 * still the sentinel the slot was filled with before it was posted; UD's
 * 40 GRH bytes against the sender's and receiver's addresses.
 *
 *   pp.h           this: options, the context, the functions by file
 *   shca_pingpong.c  main: options, the TCP exchange, the loop, the report
 *   pp_verbs.c     the verbs resources, posting and polling
 *   pp_check.c     the pattern, the sentinel and every check of a buffer
 */
#ifndef SOFTHCA_PP_H
#define SOFTHCA_PP_H

#include <stdbool.h>
#include <stdint.h>
#include <infiniband/verbs.h>

#define PP_MAX_QP	16
#define PP_SENTINEL	0xa5	/* a receive slot's bytes when posted */
#define PP_FRONT	64	/* guard before the receive SGE */
#define PP_SLACK	64	/* the SGE is longer than the message */
#define PP_BACK		64	/* guard after the receive SGE */
#define PP_GRH		40
#define PP_QKEY		0x11111111u
#define PP_MAX_SIZE	(1u << 30)
/* a send's wr_id: PP_SEND_TAG | iteration; a receive's: its slot */
#define PP_SEND_TAG	((uint64_t)1 << 63)

enum pp_type { PP_RC, PP_UC, PP_UD, PP_SRQ };

struct pp_opts {
	const char *dev;	/* -d: NULL, the first device */
	int gid_index;		/* -g */
	int ib_port;		/* -i */
	const char *tcp_port;	/* -p */
	enum pp_type type;	/* -T */
	uint32_t size;		/* -s */
	uint32_t iters;		/* -n */
	enum ibv_mtu mtu;	/* -m; 0: the port's active MTU */
	int nqp;		/* -q: QPs on the SRQ (1 otherwise) */
	int rx_depth;		/* -r: receives posted per receive queue */
	bool events;		/* -e */
	bool new_send;		/* -N */
	bool timestamps;	/* -t */
	bool stat;		/* -S: softhca stat of itself at the end */
	const char *server;	/* the server's address; NULL: serve */
};

/* What one side tells the other (network byte order on the wire). */
struct pp_dest {
	union ibv_gid gid;
	uint32_t qpn[PP_MAX_QP];
	uint32_t psn[PP_MAX_QP];
};

/* One completion, whichever API polled it. */
struct pp_wc {
	uint64_t wr_id;
	enum ibv_wc_status status;
	enum ibv_wc_opcode opcode;
	uint32_t byte_len;
	uint32_t qp_num;
	uint32_t src_qp;
	unsigned int wc_flags;
	uint64_t ts;		/* -t only */
};

struct pp_ctx {
	const struct pp_opts *o;
	int side;		/* 0 server, 1 client: part of the pattern */
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_comp_channel *channel;
	struct ibv_cq *cq;
	struct ibv_cq_ex *cqx;	/* -t */
	struct ibv_srq *srq;
	struct ibv_qp *qp[PP_MAX_QP];
	struct ibv_qp_ex *qpx[PP_MAX_QP];	/* -N */
	struct ibv_ah *ah;	/* UD: to the peer */
	struct ibv_mr *mr;
	uint8_t *buf;		/* send area, then the receive slots */
	size_t buf_len;
	size_t stride;		/* of a receive slot */
	uint32_t grh;		/* PP_GRH for UD, else 0 */
	uint32_t nslots;
	bool cq_armed;
	int tcp_fd;		/* the exchange (the peer ending) */
	bool tcp_data;		/* the peer wrote on it (it is done) */
	uint64_t nevents;
	enum ibv_mtu mtu;
	struct pp_dest self, peer;
	union ibv_gid sgid;
	uint8_t *base;		/* pp_check: the per-offset part */
	uint64_t checked;	/* bytes of messages checked */
};

/* pp_verbs.c */
int pp_open(struct pp_ctx *c);
int pp_connect(struct pp_ctx *c);
void pp_close(struct pp_ctx *c);
uint8_t *pp_slot(const struct pp_ctx *c, uint32_t slot);
uint8_t *pp_send_buf(const struct pp_ctx *c);
int pp_post_recv(struct pp_ctx *c, uint32_t slot);
int pp_post_send(struct pp_ctx *c, uint32_t iter);
int pp_poll(struct pp_ctx *c, struct pp_wc *wc);
uint64_t pp_clock(struct pp_ctx *c);
const char *pp_gid_str(const union ibv_gid *g, char *s, size_t len);

/* pp_check.c */
int pp_pattern_init(struct pp_ctx *c);
void pp_fill_send(struct pp_ctx *c, uint32_t iter);
int pp_check_send(const struct pp_ctx *c, uint32_t iter);
int pp_check_slot(struct pp_ctx *c, uint32_t slot, uint32_t iter);
void pp_reset_slot(struct pp_ctx *c, uint32_t slot);

/* shca_pingpong.c */
void pp_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
