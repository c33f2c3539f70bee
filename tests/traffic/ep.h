/* SPDX-License-Identifier: MIT */
/*
 * Endpoints for the traffic tests: a QP with its CQs and a registered
 * buffer, connected to another endpoint in this process or in a child
 * process (over a socketpair that carries the connection data, the way
 * ibv_rc_pingpong exchanges it over TCP).
 *
 * Two namespaces: with SHCA_TEST_NETNS_A and SHCA_TEST_NETNS_B set (names
 * of /var/run/netns entries, or paths), a two-process test runs its two
 * sides on two "hosts": the forked process (duo_fork, or a fork that calls
 * ep_netns_child) enters namespace B at once, the other one enters A when
 * it creates its first endpoint.  Each side then opens the device of its
 * namespace's interface (SHCA_TEST_NETNS_DEV, else the first device other
 * than softhca_lo with an IPv4 address), uses the GID of that address (of
 * its IPv6 address, not link-local, with SHCA_TEST_NETNS_GID=ipv6),
 * and the port's active MTU as path MTU and UD limit.  The socketpair
 * still carries the connection data.  One-process cases skip.  Without
 * the variables nothing changes: softhca_lo, GID 0, MTU 4096.
 */
#ifndef SOFTHCA_TEST_EP_H
#define SOFTHCA_TEST_EP_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
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
	struct ibv_pd *pd;		/* ep_opts.pdom: the parent domain */
	struct ibv_pd *base_pd;		/* ep_opts.pdom: the PD it holds */
	struct ibv_cq *scq, *rcq;
	struct ibv_cq_ex *scqx, *rcqx;	/* ep_opts.wc_flags: CQs ex */
	struct ibv_comp_channel *ch;
	struct ibv_qp *qp;
	struct ibv_qp_ex *qpx;		/* ep_opts.send_ops_flags */
	struct ibv_mr *mr;
	struct ibv_ah *ah;		/* UD: to the peer */
	struct ibv_srq *srq;		/* ep_opts.use_srq: the QP's SRQ */
	uint8_t *buf;
	size_t size;
	enum ibv_qp_type type;
	struct ep_info self, peer;
	int gid_index;
	enum ibv_mtu mtu;		/* path MTU; UD: the largest payload */
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
	enum ibv_mtu mtu;		/* path MTU; 0: the device's */
	struct ibv_srq *srq;		/* the caller's SRQ (in its PD) */
	bool use_srq;			/* or one of the endpoint's own */
	void *cq_context;		/* of both CQs */
	bool qp_access_set;		/* QP access other than the MR's: */
	int qp_access;			/* these */
	uint64_t wc_flags;		/* non-zero: create_cq_ex */
	uint64_t send_ops_flags;	/* non-zero: ibv_create_qp_ex, qpx */
	/* non-NULL: everything is created on a parent domain of the
	 * endpoint's PD made with these attributes (their pd is filled in):
	 * MR, SRQ, QP, AH, and with wc_flags the CQs
	 * (IBV_CQ_INIT_ATTR_MASK_PD) */
	const struct ibv_parent_domain_init_attr *pdom;
};

void ep_default_opts(struct ep_opts *o, enum ibv_qp_type type);
/* Create (to INIT); fails the test on error. */
void ep_create(struct ep *e, const struct ep_opts *o);
/* Move to RTR and RTS towards e->peer (UD: and make e->ah). */
void ep_connect(struct ep *e, const struct ep_opts *o);
void ep_to_rtr(struct ep *e, const struct ep_opts *o);
void ep_to_rts(struct ep *e, const struct ep_opts *o);
/* Destroy what is left (a test may destroy the QP, SRQ or CQs itself
 * and set the pointer to NULL). */
void ep_destroy(struct ep *e);

/* The largest UD payload (the MTU), in bytes. */
uint32_t ep_mtu_bytes(const struct ep *e);

/* Wait for n completions on cq (fails the test after ~10 s). */
void ep_poll(struct ibv_cq *cq, struct ibv_wc *wc, int n);
/* One successful completion, spinning on ibv_poll_cq without a pause
 * (the thread that makes the net path's progress: issue 15); fails the
 * test after ~10 s or on an error status. */
struct ibv_wc ep_spin_one(struct ibv_cq *cq);

/* Exchange ep_info over fd (both sides call it). */
void ep_exchange(int fd, const struct ep_info *mine, struct ep_info *theirs);
void xwrite(int fd, const void *p, size_t len);
void xread(int fd, void *p, size_t len);

/* ------------------------------------------------------------------ */
/* Helpers of the error and event tests                                */

/* Post one WR: opcode, len bytes at buf + off, signaled, immediate data
 * htonl(wr_id) (RC/UC: the peer's buffer at remote_off for RDMA and
 * atomics; UD: to the peer). */
int ep_post(struct ep *e, uint64_t wr_id, enum ibv_wr_opcode op,
	    uint64_t off, uint32_t len, uint64_t remote_off,
	    unsigned int flags);
/* The same from len bytes at addr through lkey (any MR of e's PD). */
int ep_post_key(struct ep *e, uint64_t wr_id, enum ibv_wr_opcode op,
		uint64_t addr, uint32_t lkey, uint32_t len,
		uint64_t remote_off, unsigned int flags);
/* Post one signaled 8-byte atomic (op) from buf + off to the peer's
 * buffer at remote_off, with compare_add and swap. */
void ep_post_atomic(struct ep *e, uint64_t wr_id, enum ibv_wr_opcode op,
		    uint64_t off, uint64_t remote_off, uint64_t cmp_add,
		    uint64_t swap);
/* Post one receive of len bytes at buf + off (to the SRQ if there is
 * one); returns the verb's result. */
int ep_post_recv(struct ep *e, uint64_t wr_id, uint64_t off, uint32_t len);

/* Poll one completion (fails after ~10 s) and check wr_id, status and
 * (unless qp is NULL) qp_num; returns it. */
struct ibv_wc ep_expect(struct ibv_cq *cq, struct ibv_qp *qp, uint64_t wr_id,
			enum ibv_wc_status status);
/* The CQ holds no completion now. */
void ep_expect_empty(struct ibv_cq *cq);

enum ibv_qp_state ep_qp_state(struct ibv_qp *qp);
/* Wait (up to ~10 s) until the QP is in state. */
void ep_wait_qp_state(struct ibv_qp *qp, enum ibv_qp_state state);

/* Wait (up to ~10 s) for the next async event; it must be of type. */
void ep_wait_async(struct ibv_context *ctx, enum ibv_event_type type,
		   struct ibv_async_event *ev);
/* No async event is pending now. */
void ep_expect_no_async(struct ibv_context *ctx);
/* Is fd readable within ms milliseconds? */
bool ep_readable(int fd, int ms);

/*
 * Two processes: fork a child that runs fn(fd, arg) and exits 0; the
 * parent gets the other end of a socketpair.  duo_wait() checks the
 * child's exit status.
 */
struct duo {
	pid_t pid;
	int fd;
};

void duo_fork(struct duo *d, void (*fn)(int fd, void *arg), void *arg);
/* A duo side: an RC endpoint connected to the parent's (ep_open_remote
 * with the default options), 'u' once up, then asleep until killed. */
void ep_victim(int fd, void *arg);
void duo_wait(struct duo *d);
/* Stop the other process (SIGSTOP) and wait until it is seen stopped;
 * SIGCONT lets it go on. */
void duo_stop(const struct duo *d);
/* One byte each way: a step both sides reached. */
void duo_signal(int fd, char c);
void duo_expect(int fd, char c);

/*
 * Two namespaces (SHCA_TEST_NETNS_A/B): is this such a run?  The forked
 * side of a two-process test that does not use duo_fork calls
 * ep_netns_child() first thing (it enters B; nothing without the
 * variables).  A one-process case calls ep_skip_if_netns() (ep_pair
 * does): it skips, saying why.
 */
bool ep_netns(void);
void ep_netns_child(void);
void ep_skip_if_netns(void);

/* ------------------------------------------------------------------ */
/* Data checks (issue 16)                                              */

/*
 * A destination is pre-filled with EP_SENTINEL before a message lands in
 * it, and a message carries ep_pattern(seed, offset): never 0 (a zeroed
 * buffer does not match it), never the sentinel (an untouched byte does
 * not), and different for each seed (message) and each offset (a byte
 * placed at the wrong offset, or a stale byte of an earlier message,
 * does not).  After the message, every byte around it is checked to be
 * the sentinel still: an overrun shows.
 */
#define EP_SENTINEL 0xa5

uint8_t ep_pattern(uint32_t seed, uint64_t i);
/* p[k] = ep_pattern(seed, from + k) for k < len */
void ep_fill_pattern(uint8_t *p, uint64_t len, uint32_t seed, uint64_t from);
/* The first k < len with p[k] != ep_pattern(seed, from + k), or -1. */
int64_t ep_find_pattern_diff(const uint8_t *p, uint64_t len, uint32_t seed,
			     uint64_t from);
/* The first k < len with p[k] != EP_SENTINEL, or -1. */
int64_t ep_find_non_sentinel(const uint8_t *p, uint64_t len);
/* The first k < len with a[k] != b[k], or -1 (memcmp, then the byte). */
int64_t ep_find_diff(const uint8_t *a, const uint8_t *b, uint64_t len);

/*
 * Evidence that traffic took the net path (SOFTHCA_NET=1), from the kernel
 * rather than from softhca: the bytes this process's TCP sockets sent
 * (acknowledged) and received (TCP_INFO), and the records of a pcap file
 * (SOFTHCA_PCAP; UD's datagrams have no per-socket count).
 */
uint64_t ep_tcp_bytes(void);
uint64_t ep_pcap_records(const char *path);
/* With SOFTHCA_NET=1 in the environment (the _net ctest runs of the
 * one-process RC tests), fail unless this process's TCP sockets carried
 * bytes: a test that names both paths must not pass on the same-host
 * path twice.  Nothing without it. */
void ep_net_check(void);

/* Counter name of process pid, as `tool stat --pid PID --all` (the
 * softhca command) prints it; fails the test if either is missing. */
long long ep_stat_counter(const char *tool, pid_t pid, const char *name);
/* ... and one of QP qpn's counters (its line "... qp 0xQPN ..."). */
long long ep_stat_qp_counter(const char *tool, pid_t pid, uint32_t qpn,
			     const char *name);

/* Create both endpoints of this process and connect them to each other
 * (skips in a two-namespace run). */
void ep_pair(struct ep *a, const struct ep_opts *oa, struct ep *b,
	     const struct ep_opts *ob);
/* Create, exchange over fd and connect: one side of a two-process pair. */
void ep_open_remote(struct ep *e, const struct ep_opts *o, int fd);

#endif
