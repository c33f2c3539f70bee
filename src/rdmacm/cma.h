/* SPDX-License-Identifier: MIT */
/*
 * softhca's librdmacm: the objects behind the public structs, and the
 * table of contents of the library (prototypes grouped by the file that
 * defines them).
 *
 * There is no kernel rdma_cm behind this library.  The connection manager
 * runs in the process: rdma_cm port numbers are real TCP ports (RC and UC
 * ids: a listening socket, one stream per connection, as iWARP does) or
 * UDP ports (UD ids: SIDR-style datagrams), and the IB CM exchange (REQ,
 * REP, RTU, REJ, DREQ, DREP, SIDR REQ/REP; wire.h) travels over them.
 *
 * Threads.  One mutex, cm_lock, guards every id, channel, socket and
 * timer.  Calls run in the caller's thread and never block while holding
 * it, except in pthread_cond_wait (destroy waiting for acks).  A small CM
 * thread (loop.c), started on first need, sleeps in epoll on the sockets
 * and one timerfd; it reads messages, turns them into events and runs the
 * timers.  The QP transitions that rdma-core makes in the caller's thread
 * (rdma_accept; the CONNECT_RESPONSE processed in rdma_get_cm_event) are
 * made there too, never in the CM thread.
 *
 * Errors: inside, functions return -errno; the exported calls return -1
 * with errno set, as rdma-core does (cm_err()).
 */
#ifndef SOFTHCA_CMA_H
#define SOFTHCA_CMA_H

#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>

#include "wire.h"
#include "../common/log.h"
#include "../common/util.h"

/* IB CM values the events carry (IBA 12.6.7.2, 12.6.11 / ib_cm.h) */
#define IB_CM_REJ_TIMEOUT			1
#define IB_CM_REJ_INVALID_SERVICE_ID		8
#define IB_CM_REJ_CONSUMER_DEFINED		28
#define IB_CM_REJ_VENDOR_OPTION_NOT_SUPPORTED	35
#define IB_SIDR_SUCCESS				0
#define IB_SIDR_UNSUPPORTED			1
#define IB_SIDR_REJECT				2

/* Path record and timing values of the kernel's RoCE route (cma.c) */
#define CM_PACKET_LIFE_TIME	18	/* CMA_IBOE_PACKET_LIFETIME */
#define CM_HOP_LIMIT		64
#define CM_MAX_GIDS		32
#define CM_MAX_PRIVATE_DATA	256	/* an event's private data */
#define CM_DEFAULT_BACKLOG	1024	/* rdma_ucm's max_backlog */
#define CM_DREQ_TIMEOUT_MS	17000	/* 4 x 4.3 s (IB CM's 20) */
#define CM_SIDR_TIMEOUT_MS	1000	/* between SIDR REQ resends */
#define CM_SIDR_RETRIES		8

static inline int cm_err(int neg_errno)
{
	errno = -neg_errno;
	return -1;
}

/* ------------------------------------------------------------------ */
/* Objects                                                             */

struct cm_device {
	struct cm_device *next;
	struct ibv_device *ibdev;
	struct ibv_context *verbs;	/* opened once, shared, kept */
	struct ibv_pd *pd;		/* default PD while refcnt > 0 */
	struct ibv_xrcd *xrcd;		/* XRC domain of the ids that name
					 * none (their QPs and SRQs), kept */
	int refcnt;			/* ids + rdma_get_devices lists */
	int max_qpsize;
	uint8_t max_initiator_depth;
	uint8_t max_responder_resources;
	enum ibv_mtu active_mtu;
	uint8_t link_layer;
	unsigned int ifindex;		/* of softhca_<ifname>, or 0 */
	bool loopback;			/* its interface is IFF_LOOPBACK */
	bool present;			/* in ibv_get_device_list now */
};

/* The states of an id, as the kernel's rdma_cm has them (enum
 * rdma_cm_state), without the *_QUERY ones: resolution is immediate. */
enum cm_state {
	CM_IDLE,
	CM_ADDR_BOUND,
	CM_ADDR_RESOLVED,
	CM_ROUTE_RESOLVED,
	CM_LISTEN,
	CM_CONNECT,
	CM_DISCONNECT,
	CM_DESTROYING,
};

/* The IB CM side of a connection (the kernel's cm_id.ib); IB_NONE while
 * no exchange was started, which is when rdma_disconnect, rdma_reject and
 * rdma_notify answer EINVAL. */
enum cm_ib_state {
	IB_NONE,
	IB_IDLE,
	IB_REQ_SENT,
	IB_REQ_RCVD,
	IB_REP_SENT,
	IB_REP_RCVD,
	IB_ESTABLISHED,
	IB_DREQ_SENT,
	IB_DREQ_RCVD,
	IB_TIMEWAIT,
	IB_SIDR_REQ_SENT,
	IB_SIDR_REQ_RCVD,
};

struct cm_id;

struct cm_timer {
	struct cm_timer *next;
	uint64_t deadline;		/* CLOCK_MONOTONIC, ms */
	void (*fn)(struct cm_timer *t);
	bool armed;
};

enum cm_sock_kind {
	CM_SOCK_LISTEN,			/* TCP listening socket */
	CM_SOCK_STREAM,			/* TCP: one connection */
	CM_SOCK_DGRAM,			/* UDP: a UD id's port */
};

struct cm_sock {
	int fd;
	uint32_t serial;		/* tells a reused fd from this one */
	enum cm_sock_kind kind;
	struct cm_id *id;		/* the id it serves, or NULL */
	struct cm_id *listener;		/* stream accepted, no REQ yet */
	struct cm_sock *next_pending;	/* listener's list of those */
	int refs;			/* DGRAM: the id + UD children */
	bool connecting;		/* stream: connect() under way */
	bool registered;
	bool hup;			/* stream: peer gone, nothing more */
	bool closing;			/* stream: close once flushed */
	uint32_t events;
	size_t in_len;
	uint8_t in[CM_MSG_MAX];
	size_t out_len, out_cap;
	uint8_t *out;
};

struct cm_channel {
	struct rdma_event_channel ch;	/* public: fd is an eventfd */
	struct cm_event *head, **tail;
	int nids;
	int waiters;			/* threads asleep in rdma_get_cm_event */
	bool destroyed;
};

struct cm_mc {
	struct cm_mc *next;
	struct cm_id *id;
	void *context;
	int events_reported, events_completed;
	uint16_t join_flags;
	union ibv_gid mgid;
	uint16_t mlid;
	struct sockaddr_storage addr;
	socklen_t addrlen;
};

struct cm_event {
	struct rdma_cm_event event;	/* first: what the caller gets */
	uint8_t private_data[CM_MAX_PRIVATE_DATA];
	struct cm_event *next;
	struct cm_id *owner;		/* whose ack count this event is */
	struct cm_mc *mc;
	struct cm_id *child;		/* CONNECT_REQUEST: the new id */
	bool conn_resp;			/* CONNECT_RESPONSE to process */
	struct ibv_ece ece;		/* the REP's ECE */
};

struct cm_id {
	struct rdma_cm_id id;		/* first: the public part */
	enum cm_state state;
	enum cm_ib_state ib;
	struct cm_device *dev;
	uint8_t sgid_index;
	bool sync;			/* private channel (NULL at create) */
	struct cm_channel *chan;
	pthread_cond_t cond;		/* acks: destroy, migrate, leave */
	int events_reported, events_completed;
	struct ibv_sa_path_rec path;	/* route.path_rec points here */

	/* options (rdma_set_option) */
	uint8_t tos;
	bool tos_set;
	uint8_t ack_timeout;
	bool ack_timeout_set;
	bool reuseaddr;
	int afonly;			/* -1: not set */

	/* transport */
	struct cm_sock *sock;
	struct cm_id *listener;		/* child: its listener, if any */
	int backlog, pending_reqs;	/* listener */
	struct cm_sock *pending;	/* listener: streams before REQ */

	/* the IB CM exchange */
	uint32_t seq_num;		/* our starting PSN */
	uint32_t sq_psn;		/* the peer's REQ/REP starting PSN */
	uint32_t remote_qpn;
	uint32_t qp_num;		/* REQ/REP: our QP (or the caller's) */
	bool srq;
	uint8_t initiator_depth;	/* librdmacm's choice (id_priv) */
	uint8_t responder_resources;
	uint8_t cm_initiator_depth;	/* the CM's: RTS max_rd_atomic */
	uint8_t cm_responder_resources;	/* RTR max_dest_rd_atomic */
	uint8_t retry_count, rnr_retry_count, flow_control;
	uint8_t rep_rnr_retry_count;	/* what our REP offers */
	enum ibv_mtu path_mtu;
	uint8_t timeout;		/* local ACK timeout */
	struct ibv_ece local_ece, remote_ece;
	bool connect_error;
	struct cm_timer timer;		/* DREQ, SIDR, timewait, refused REQ */
	uint8_t refused;		/* REQs sent again after a refusal */
	unsigned int accept_backoff;	/* listener out of fds: next pause,
					 * ms (common/backoff.h) */
	struct cm_wire_req *req_copy;	/* the REQ, while it may go again */

	/* UD */
	uint32_t qkey;
	uint32_t sidr_id;
	int sidr_tries;
	struct cm_wire_sidr_req sidr_req;	/* for retransmission */
	struct sockaddr_storage sidr_peer;	/* child: where to answer */
	struct sockaddr_storage sidr_local;
	struct cm_wire_sidr_rep sidr_rep;	/* child: sent answer */
	bool sidr_answered;
	struct cm_id *children;		/* listener: its requests' ids */
	struct cm_id *next_child;
	bool req_pending;		/* CONNECT_REQUEST not retrieved */

	struct cm_mc *mc_list;

	/* rdma_create_ep */
	struct ibv_qp_init_attr *qp_init_attr;
	void *connect;
	size_t connect_len;
};

static inline struct cm_id *to_cm_id(struct rdma_cm_id *id)
{
	return container_of(id, struct cm_id, id);
}

static inline struct cm_channel *to_cm_channel(struct rdma_event_channel *ch)
{
	return container_of(ch, struct cm_channel, ch);
}

static inline struct cm_event *to_cm_event(struct rdma_cm_event *ev)
{
	return container_of(ev, struct cm_event, event);
}

static inline bool cm_is_ud(const struct cm_id *id)
{
	return id->id.qp_type == IBV_QPT_UD;
}

extern pthread_mutex_t cm_lock;

/* ------------------------------------------------------------------ */
/* Table of contents                                                   */

/* device.c: devices, their shared contexts and default PDs */
int cm_init(void);
int cm_device_by_addr(const struct sockaddr *addr, struct cm_device **dev,
		      uint8_t *gid_index);
int cm_device_bind(struct cm_id *id, struct cm_device *dev, uint8_t gid_index);
void cm_device_put(struct cm_device *dev);
void cm_ip_to_gid(const struct sockaddr *addr, union ibv_gid *gid);

/* loop.c: the CM thread, sockets and timers */
int cm_loop_start(void);
struct cm_sock *cm_sock_new(int fd, enum cm_sock_kind kind);
int cm_sock_watch(struct cm_sock *s, uint32_t events);
void cm_sock_close(struct cm_sock *s);
void cm_sock_put(struct cm_sock *s);
void cm_sock_release(struct cm_sock *s);
int cm_sock_send(struct cm_sock *s, const void *msg, size_t len);
void cm_timer_arm(struct cm_timer *t, unsigned int ms);
void cm_timer_cancel(struct cm_timer *t);
uint64_t cm_now_ms(void);

/* channel.c: event channels and events */
struct cm_channel *cm_channel_new(void);
void cm_channel_put(struct cm_channel *ch);
void cm_channel_free(struct cm_channel *ch);
struct cm_event *cm_event_new(struct cm_id *id, enum rdma_cm_event_type type,
			      int status);
void cm_event_queue(struct cm_id *owner, struct cm_event *ev);
void cm_event_pdata(struct cm_event *ev, const void *pdata, size_t len,
		    bool ud);
struct cm_event *cm_listener_adopt(struct cm_id *listener,
				   struct cm_id *child);
void cm_channel_drop_events(struct cm_id *id);
void cm_channel_drop_mc_events(struct cm_mc *mc);
void cm_channel_move_events(struct cm_id *id, struct cm_channel *to);
int cm_get_event(struct cm_channel *ch, struct rdma_cm_event **event);
void cm_ack_event(struct cm_event *ev);

/* id.c: ids and their life */
struct cm_id *cm_id_new(struct cm_channel *ch, void *context,
			enum rdma_port_space ps, enum ibv_qp_type qp_type);
int cm_create_id(struct rdma_event_channel *channel, struct rdma_cm_id **out,
		 void *context, enum rdma_port_space ps,
		 enum ibv_qp_type qp_type);
int cm_complete(struct cm_id *id);
void cm_id_destroy_locked(struct cm_id *id);
const char *cm_state_name(enum cm_state s);

/* addr.c: binding, address and route resolution */
socklen_t cm_addrlen(const struct sockaddr *addr);
bool cm_addr_any(const struct sockaddr *addr);
bool cm_addr_loopback(const struct sockaddr *addr);
uint16_t cm_addr_port(const struct sockaddr *addr);
void cm_addr_set_port(struct sockaddr *addr, uint16_t be_port);
void cm_addr_unmap(struct sockaddr_storage *ss);
int cm_bind_locked(struct cm_id *id, const struct sockaddr *addr);
int cm_sock_reopen(struct cm_id *id);
void cm_path_init(struct cm_id *id, const union ibv_gid *dgid,
		  enum ibv_mtu mtu);
void cm_ah_from_path(struct cm_id *id, struct ibv_ah_attr *ah);
int cm_set_ib_path(struct cm_id *id, const void *optval, size_t optlen);

/* conn.c: RC/UC connections over a TCP stream */
const char *cm_ib_name(enum cm_ib_state s);
void cm_id_timer(struct cm_id *id);
int cm_listen_stream(struct cm_id *id);
int cm_connect_stream(struct cm_id *id, const void *pdata, uint8_t pdata_len);
int cm_accept_stream(struct cm_id *id, const void *pdata, uint8_t pdata_len);
int cm_reject_stream(struct cm_id *id, const void *pdata, uint8_t pdata_len,
		     uint16_t reason);
int cm_disconnect_stream(struct cm_id *id);
int cm_establish_stream(struct cm_id *id);
void cm_stream_input(struct cm_sock *s, const uint8_t *msg, size_t len);
void cm_stream_hangup(struct cm_sock *s);
void cm_stream_connected(struct cm_sock *s, int err);
void cm_listen_input(struct cm_sock *s);
void cm_stream_teardown(struct cm_id *id);

/* ud.c: UD ids (SIDR over UDP) and multicast */
int cm_listen_dgram(struct cm_id *id);
int cm_connect_dgram(struct cm_id *id, const void *pdata, uint8_t pdata_len);
int cm_answer_dgram(struct cm_id *id, uint8_t status, uint32_t qkey,
		    const void *pdata, uint8_t pdata_len);
void cm_dgram_input(struct cm_sock *s);
void cm_dgram_error(struct cm_sock *s);
void cm_dgram_teardown(struct cm_id *id);
void cm_dgram_timer(struct cm_id *id);
uint32_t cm_qkey(struct cm_id *id);
int cm_mc_attach(struct cm_event *ev);
void cm_mc_free_all(struct cm_id *id);

/* qp.c: QPs, SRQs and the attributes of their transitions */
int cm_init_qp_attr(struct cm_id *id, struct ibv_qp_attr *attr, int *mask);
int cm_modify_qp_rtr(struct cm_id *id, uint8_t resp_res);
int cm_modify_qp_rts(struct cm_id *id, uint8_t init_depth);
int cm_modify_qp_err(struct cm_id *id);
int cm_conn_resp(struct cm_id *id, struct cm_event *ev);

#endif
