/* SPDX-License-Identifier: MIT */
/*
 * Endpoints for the traffic tests: a QP with its CQs and a registered
 * buffer, connected to another endpoint in this process or in a child
 * process (over a socketpair that carries the connection data, the way
 * ibv_rc_pingpong exchanges it over TCP).
 */
#ifndef SOFTHCA_TEST_EP_H
#define SOFTHCA_TEST_EP_H

#include <stdbool.h>
#include <stdint.h>
#include <infiniband/verbs.h>

struct ep_info {
	uint32_t qpn;
	uint32_t psn;
	uint32_t rkey;
	uint64_t addr;
	union ibv_gid gid;
};

struct ep {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *scq, *rcq;
	struct ibv_comp_channel *ch;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	struct ibv_ah *ah;		/* UD: to the peer */
	uint8_t *buf;
	size_t size;
	enum ibv_qp_type type;
	struct ep_info self, peer;
	int gid_index;
};

struct ep_opts {
	enum ibv_qp_type type;
	size_t buf_size;
	int max_send_wr, max_recv_wr;
	int max_sge;
	int max_inline;
	int cqe;
	int access;			/* MR and QP remote access */
	bool channel;			/* completion channel on the CQs */
	int min_rnr_timer;		/* default 1 */
	int rnr_retry;			/* default 7 */
	int timeout;			/* default 14 */
	int retry_cnt;			/* default 7 */
	struct ibv_srq *srq;
};

void ep_default_opts(struct ep_opts *o, enum ibv_qp_type type);
/* Create (to INIT); fails the test on error. */
void ep_create(struct ep *e, const struct ep_opts *o);
/* Move to RTR and RTS towards e->peer. */
void ep_connect(struct ep *e, const struct ep_opts *o);
void ep_destroy(struct ep *e);

/* Wait for n completions on cq (fails the test after ~10 s). */
void ep_poll(struct ibv_cq *cq, struct ibv_wc *wc, int n);

/* Exchange ep_info over fd (both sides call it). */
void ep_exchange(int fd, const struct ep_info *mine, struct ep_info *theirs);
void xwrite(int fd, const void *p, size_t len);
void xread(int fd, void *p, size_t len);

#endif
