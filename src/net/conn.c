// SPDX-License-Identifier: MIT
/*
 * The net path's sockets (net.h): TCP connections with their send queues
 * and framing, UDP datagrams, multicast, fault injection and the pcap
 * trace.
 *
 * Threads: any thread queues packets (shca_net_send) under the
 * connection's lock and writes what the socket takes; only the engine
 * thread reads sockets and closes them.  A sender that meets a write
 * error shuts the socket down, which the engine sees as a hang-up.
 * Outgoing connection objects are never freed (requesters keep pointers);
 * a closed one is opened again by the next send.  Incoming ones (accepted,
 * never adopted as outgoing) are recycled when their socket closes: that
 * moves the object's generation on (shca_net_conn_gen), and who
 * keeps a pointer to an incoming object past the packet it came with
 * (READ responses) checks it, so that what was meant for one peer never
 * goes to the next one the object serves.
 *
 * Floods (docs/security.md "Flooding and exhaustion"): the listener backs
 * off while accept4 runs out of descriptors, accepted sockets are capped
 * (SOFTHCA_NET_MAX_CONNS), a connection that says no hello in time is
 * closed (SOFTHCA_NET_HELLO_MS), and so is one idle in both directions
 * with nothing queued (SOFTHCA_NET_IDLE_MS).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <linux/sockios.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include "../common/dma.h"
#include "../common/log.h"
#include "../common/slot.h"
#include "../common/stat.h"
#include "../common/util.h"
#include "../engine/engine.h"
#include "../shm/mem.h"
#include "../wire/pcap.h"
#include "../wire/wire.h"
#include "handshake.h"
#include "net.h"

#define FRAME_HDR	4
#define MAX_PKT		(SHCA_WIRE_MAX_PMTU + 128)
#define RBUF_SIZE	(256 * 1024)
#define MAX_WRITE_IOV	512		/* per sendmsg (UIO_MAXIOV is 1024) */

/* One queued packet: frame header + IB headers in hdr[], then payload. */
struct chunk {
	struct chunk *next;
	void *owned;
	uint32_t qpn;			/* whose payload it references (0: none) */
	uint32_t psn;			/* ... the (first) packet's PSN (qpn set) */
	uint32_t frames;		/* packets: 1, or a train's */
	size_t ib_bytes;		/* the packets' bytes (counted) */
	struct shca_lane lane;		/* held for the registered memory it
					 * references, not the QP's (READ
					 * responses): shca_net_drain_key */
	bool defer;			/* SHCA_NET_DEFER */
	uint8_t cls;			/* 0, or 1 + its pool class */
	bool ack;			/* a plain ACK (SHCA_NET_ACK) ... */
	uint32_t ack_qpn;		/* ... of this QP */
	bool untraced;			/* ... whose trace waits (trace_tail) */
	size_t len, off;		/* bytes in all, bytes written */
	int niov;
	struct iovec *iov;		/* [0]: frame and IB headers */
	unsigned char hdr[];
};

/* Where the handshake (handshake.h) stands; c->lock for writes, the
 * engine thread reads. */
enum conn_hs {
	HS_NONE,			/* outgoing, not connected yet */
	HS_HELLO_SENT,			/* opener: waits for CHALLENGE and
					 * WELCOME */
	HS_WAIT_HELLO,			/* acceptor: nothing received yet */
	HS_WAIT_PROOF,			/* acceptor: CHALLENGE sent */
	HS_DONE,			/* the peer is proven: IB frames flow */
};

/* The handshake's bounds: a CHALLENGE sent again every HS_RESEND_NS (UDP
 * may lose it), the whole given HS_DEADLINE_NS before the connection is
 * closed (and counted). */
#define HS_RESEND_NS	200000000ull
#define HS_DEADLINE_NS	5000000000ull

enum conn_state {
	CONN_DOWN,			/* no socket: the next send connects */
	CONN_CONNECTING,
	CONN_UP,
	CONN_CLOSING,			/* shut down, the engine closes it */
};

struct shca_conn {
	pthread_mutex_t lock;		/* state, fd, queue */
	enum conn_state state;
	int fd;
	bool incoming;			/* accepted: answers only */
	bool want_out;			/* EPOLLOUT armed */
	struct shca_net_addr addr;	/* src: this end, dst: the other */
	struct sockaddr_storage peer;
	socklen_t peer_len;
	struct chunk *head, *tail;
	size_t queued;
	struct chunk *held;		/* fault "reorder": sent after the next */
	struct shca_timer held_timer;	/* ... or alone, 1 ms later */
	uint64_t stall_until;		/* fault "stall": nothing written
					 * before (0: none) */
	struct shca_timer stall_timer;	/* ... then the queue is */
	struct delayed *delayed;	/* fault "delay": on their way */
	/* engine thread only */
	unsigned char *rbuf;
	size_t rlen;
	bool expect;			/* shca_net_expect: expect_qpn's */
	uint32_t expect_qpn;
	uint8_t placing;		/* frames were placed: read little
					 * (place_gap) before the next
					 * placement, for PLACE_MISSES usual
					 * reads that expect none */
	uint32_t place_mtu;		/* the last placement's path MTU */
	bool runs;			/* the peer sends run frames (net.h) */
	/* who is at the other end (handshake.h) */
	enum conn_hs hs;
	bool bound;			/* outgoing: from addr.src (the QP's
					 * sgid), so the peer sees that */
	bool proof_sent;		/* opener: nonce_a is known */
	uint16_t local_port;		/* this end's port */
	uint16_t id_port;		/* the peer's slot port, proven */
	uint16_t hs_claim;		/* acceptor: the port HELLO claimed */
	uint64_t hs_deadline;
	uint8_t nonce_o[SHCA_HS_NONCE];
	uint8_t nonce_a[SHCA_HS_NONCE];
	struct shca_timer hs_timer;
	/* flooding and exhaustion (engine thread, but activity) */
	bool accepted;			/* the socket is an accepted one */
	bool greeted;			/* its opener's hello came */
	bool spare;			/* recycled: on the spare list */
	uint32_t gen;			/* moves on when recycled */
	uint32_t resets;		/* moves on when a socket goes, with
					 * what was on its way (atomic) */
	uint64_t activity;		/* frames in or out (atomic) */
	uint64_t seen;			/* activity at the last look */
	struct shca_timer life;		/* hello timeout, then idle checks */
	bool key_abort;			/* closed by the key limit (end) */
	/* small requests held for the peer's next answer
	 * (shca_net_flush_defer; c->lock) */
	uint32_t unanswered;		/* SHCA_NET_DEFER packets written since
					 * the peer's last batch */
	bool must_write;		/* a packet that may not wait is
					 * queued */
	/* ACKs held for the poller's next packet (acks_hold; c->lock) */
	bool acks_held;
	uint64_t held_at;		/* since when */
	struct shca_conn *next;
};

static pthread_mutex_t conns_lock = PTHREAD_MUTEX_INITIALIZER;
static struct shca_conn *conns;
static shca_net_rx_fn rx_fn;
static bool net_used;			/* a connection or datagram was seen */
static pid_t started_pid;		/* shca_net_start's, written last */
static int mcast_fd = -1;		/* bound to SHCA_NET_MCAST_PORT */
static int mcast_send4 = -1, mcast_send6 = -1;

/* Was the net path started in this process (not a forked parent's)?
 * Any thread: true makes what shca_net_start set up visible to it (a
 * completion channel's waiter races the first modify to RTR). */
static bool started_here(void)
{
	return __atomic_load_n(&started_pid, __ATOMIC_ACQUIRE) ==
	       shca_getpid();
}

/* Flood limits, read at start (docs/security.md) */
#define DEFAULT_MAX_CONNS	4096	/* accepted sockets open at once */
#define DEFAULT_HELLO_MS	5000
#define DEFAULT_IDLE_MS		60000
static unsigned long max_conns = DEFAULT_MAX_CONNS;	/* 0: no cap */
/* SOFTHCA_NET_DEFER: small requests wait while the peer owes answers to
 * more than this many already written (0: always written at once); 2
 * lets a ping-pong's request go at once although the previous one's
 * answer may not be counted yet */
#define DEFAULT_DEFER		2
static uint32_t defer_max = DEFAULT_DEFER;
/* SOFTHCA_NET_ACK_HOLD_US: how long at most an ACK made while an
 * application thread polls waits for a packet to go with (acks_hold; 0:
 * never held) */
#define DEFAULT_ACK_HOLD_US	500
#define MAX_ACK_HOLD_US		100000
static uint64_t ack_hold_ns = DEFAULT_ACK_HOLD_US * 1000ull;
/* SOFTHCA_NET_YIELD_US: how often at most a poller that may run on more
 * than one CPU lets other threads run (shca_net_poll_idle; 0: after
 * every empty poll) */
#define DEFAULT_YIELD_US	500
#define MAX_YIELD_US		1000000
static uint64_t yield_ns = DEFAULT_YIELD_US * 1000ull;
static uint64_t hello_ns = DEFAULT_HELLO_MS * 1000000ull;
static uint64_t idle_ns = DEFAULT_IDLE_MS * 1000000ull;	/* 0: never */
static unsigned long n_accepted;	/* engine thread */
static struct shca_conn *spare;		/* recycled incoming objects */
/* Batches being handed up (deliver), for the exit flush and a QP's
 * modify (shca_net_acks_out): a receive completion is visible before the
 * batch's ACKs are written (atomic). */
static unsigned int rx_busy;
/* Connections whose ACKs wait for the poller's next packet (acks_hold;
 * atomic) */
static unsigned int n_held;

/* ------------------------------------------------------------------ */
/* Faults and trace                                                    */

struct faults {
	bool on;			/* drop, dup, delay, reorder, reset */
	double drop, dup, delay, reorder, reset;
	unsigned int delay_ms;
	double stall;			/* apart: it moves no packet */
	unsigned int stall_ms;
	uint64_t rng;
	pthread_mutex_t lock;
};

static struct faults faults = { .lock = PTHREAD_MUTEX_INITIALIZER };
static struct shca_pcap *pcap;

/*
 * SOFTHCA_FAULTS=drop=P,dup=P,delay=P,delay_ms=N,reorder=P,reset=P,
 * stall=P,stall_ms=N,seed=N (P a probability per packet sent, 0..1).
 */
static void faults_parse(void)
{
	const char *env = getenv("SOFTHCA_FAULTS");
	char *s, *tok, *save = NULL;

	faults.delay_ms = 5;
	faults.stall_ms = 20;
	faults.rng = 0x9e3779b97f4a7c15ull ^ (uint64_t)shca_getpid();
	if (!env || !*env)
		return;
	s = strdup(env);
	if (!s)
		return;
	for (tok = strtok_r(s, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(tok, '=');
		double v;

		if (!eq) {
			shca_warn("SOFTHCA_FAULTS: ignoring '%s'", tok);
			continue;
		}
		*eq = 0;
		v = strtod(eq + 1, NULL);
		if (!strcmp(tok, "drop"))
			faults.drop = v;
		else if (!strcmp(tok, "dup"))
			faults.dup = v;
		else if (!strcmp(tok, "delay"))
			faults.delay = v;
		else if (!strcmp(tok, "delay_ms"))
			faults.delay_ms = (unsigned int)v;
		else if (!strcmp(tok, "reorder"))
			faults.reorder = v;
		else if (!strcmp(tok, "reset"))
			faults.reset = v;
		else if (!strcmp(tok, "stall"))
			faults.stall = v;
		else if (!strcmp(tok, "stall_ms"))
			faults.stall_ms = (unsigned int)v;
		else if (!strcmp(tok, "seed"))
			faults.rng = (uint64_t)v * 0x9e3779b97f4a7c15ull + 1;
		else
			shca_warn("SOFTHCA_FAULTS: unknown fault '%s'", tok);
	}
	free(s);
	faults.on = faults.drop > 0 || faults.dup > 0 || faults.delay > 0 ||
		    faults.reorder > 0 || faults.reset > 0;
	if (faults.on || faults.stall > 0)
		shca_info("fault injection: drop %g dup %g delay %g (%u ms) "
			  "reorder %g reset %g stall %g (%u ms)", faults.drop,
			  faults.dup, faults.delay, faults.delay_ms,
			  faults.reorder, faults.reset, faults.stall,
			  faults.stall_ms);
}

static bool fault_roll(double p)
{
	uint64_t x;

	if (p <= 0)
		return false;
	pthread_mutex_lock(&faults.lock);
	/* xorshift64*: reproducible with seed= */
	x = faults.rng;
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	faults.rng = x;
	pthread_mutex_unlock(&faults.lock);
	if ((double)((x * 0x2545f4914f6cdd1dull) >> 11) / (double)(1ull << 53) >=
	    p)
		return false;
	shca_stat_add(shca_stat_proc(), SHCA_STAT_FAULTS_INJECTED, 1);
	return true;
}

static void pcap_open(void)
{
	const char *path = getenv("SOFTHCA_PCAP");
	char buf[4096];
	int ret;

	if (!path || !*path)
		return;
	/* one file per process: name.PID when the name has no %p */
	if (strstr(path, "%p")) {
		const char *p = strstr(path, "%p");

		snprintf(buf, sizeof(buf), "%.*s%d%s", (int)(p - path), path,
			 (int)shca_getpid(), p + 2);
		path = buf;
	}
	ret = shca_pcap_open(path, 0, &pcap);
	if (ret)
		shca_warn("SOFTHCA_PCAP=%s: %s", path, strerror(-ret));
}

/* Record one packet, headers and payload gathered. */
static void trace(const uint8_t src[16], const uint8_t dst[16],
		  const void *hdr, size_t hlen, const struct iovec *pl,
		  int npl)
{
	unsigned char buf[MAX_PKT];
	size_t len = hlen;
	int i;

	if (!pcap || hlen > sizeof(buf))
		return;
	memcpy(buf, hdr, hlen);
	for (i = 0; i < npl; i++) {
		if (len + pl[i].iov_len > sizeof(buf))
			return;
		memcpy(buf + len, pl[i].iov_base, pl[i].iov_len);
		len += pl[i].iov_len;
	}
	shca_pcap_write(pcap, src, dst, buf, len, NULL);
}

/*
 * A plain ACK queued last is traced when no later ACK can be folded into
 * it any more (ack_merge): before anything is queued behind it, before a
 * byte of it is written, or when the queue goes.  The trace then holds
 * what went out, once, where it went, and as many ACKs as were counted.
 * c->lock held.
 */
static void trace_tail(struct shca_conn *c)
{
	struct chunk *t = c->tail;

	if (!t || !t->untraced)
		return;
	t->untraced = false;
	trace(c->addr.src, c->addr.dst,
	      (const unsigned char *)t->iov[0].iov_base + FRAME_HDR,
	      t->iov[0].iov_len - FRAME_HDR, NULL, 0);
}

static void count_sent(uint32_t pkts, size_t len)
{
	struct shca_stat_block *s = shca_stat_proc();

	shca_stat_add(s, SHCA_STAT_SENT_PKTS, pkts);
	shca_stat_add(s, SHCA_STAT_SENT_BYTES, len);
}

/* ------------------------------------------------------------------ */
/* Addresses                                                           */

static void gid_from_sa(uint8_t gid[16], const struct sockaddr_storage *ss)
{
	memset(gid, 0, 16);
	if (ss->ss_family == AF_INET6) {
		memcpy(gid, &((const struct sockaddr_in6 *)ss)->sin6_addr, 16);
	} else if (ss->ss_family == AF_INET) {
		gid[10] = gid[11] = 0xff;
		memcpy(gid + 12, &((const struct sockaddr_in *)ss)->sin_addr, 4);
	}
}

static uint16_t sa_port(const struct sockaddr_storage *ss)
{
	return ntohs(ss->ss_family == AF_INET6 ?
			     ((const struct sockaddr_in6 *)ss)->sin6_port :
			     ((const struct sockaddr_in *)ss)->sin_port);
}

static bool gid_is_v4(const uint8_t gid[16])
{
	static const uint8_t pfx[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
					 0xff, 0xff };

	return !memcmp(gid, pfx, 12);
}

/* ifindex: the interface a link-local address is on (its scope; a
 * link-local destination without one is EINVAL to connect and sendmsg) */
static socklen_t sa_from_gid(struct sockaddr_storage *ss,
			     const uint8_t gid[16], uint16_t port,
			     unsigned int ifindex)
{
	memset(ss, 0, sizeof(*ss));
	if (gid_is_v4(gid)) {
		struct sockaddr_in *s4 = (struct sockaddr_in *)ss;

		s4->sin_family = AF_INET;
		s4->sin_port = htons(port);
		memcpy(&s4->sin_addr, gid + 12, 4);
		return sizeof(*s4);
	} else {
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ss;

		s6->sin6_family = AF_INET6;
		s6->sin6_port = htons(port);
		memcpy(&s6->sin6_addr, gid, 16);
		if (IN6_IS_ADDR_LINKLOCAL(&s6->sin6_addr))
			s6->sin6_scope_id = ifindex;
		return sizeof(*s6);
	}
}

/* What names a connection, read under its lock (the engine fills the
 * local address when a connect completes, and a merge moves addresses);
 * conns_lock -> c->lock is the order the exit flush takes too. */
struct conn_ident {
	struct shca_net_addr addr;
	uint16_t port;
	bool bound;
	bool incoming;
};

static void conn_ident(struct shca_conn *c, struct conn_ident *id)
{
	pthread_mutex_lock(&c->lock);
	id->addr = c->addr;
	id->port = sa_port(&c->peer);
	id->bound = c->bound;
	id->incoming = c->incoming;	/* adopt() clears it */
	pthread_mutex_unlock(&c->lock);
}

static void fill_local(struct shca_conn *c)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);

	if (!getsockname(c->fd, (struct sockaddr *)&ss, &len)) {
		gid_from_sa(c->addr.src, &ss);
		c->local_port = sa_port(&ss);
	}
}

/* ------------------------------------------------------------------ */
/* Sending                                                             */

/*
 * Chunks that hold a copy of a whole packet come and go by the hundred: a
 * READ's responses, RD_QUEUED bytes per connection (net/transport.c), in
 * MTU-sized copies.  From malloc, every burst freed at once let glibc
 * give the top of its heap back, and the next burst faulted it in again:
 * page faults and page zeroing took about a quarter of a READ
 * responder's CPU (perf, 64 KiB ib_read_bw between two namespaces, path
 * MTU 1024).  So such chunks come in POOL_CLASSES sizes, for payloads up
 * to 256 << i bytes, and up to POOL_BYTES of each size wait for reuse.
 * pool_lock: pools.
 */
#define POOL_CLASSES	9		/* payloads up to 256 ... 65536 (a
					 * copied train, READ responses) */
#define POOL_MIN	128		/* smaller payloads: malloc's */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
/* none kept: the sanitizers see every free, and a chunk used after it */
#define POOL_BYTES	0u
#else
#define POOL_BYTES	(2u << 20)	/* kept, per class */
#endif
#define HDR_ROOM	(MAX_PKT - SHCA_WIRE_MAX_PMTU)	/* headers, pad */
static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
	struct chunk *head;
	size_t bytes;
} pools[POOL_CLASSES];

/* The bytes of a chunk of class i: one iovec and its end mark, the frame
 * header, IB headers and pad, the payload. */
static size_t class_size(unsigned int i)
{
	return sizeof(struct chunk) + 2 * sizeof(struct iovec) + FRAME_HDR +
	       HDR_ROOM + ((size_t)256 << i) + 8;
}

/* The class of a copied payload of plen bytes, size bytes in all;
 * 0: none (malloc's), else 1 + its index. */
static uint8_t pool_class(size_t plen, size_t size)
{
	unsigned int i;

	if (plen < POOL_MIN)
		return 0;
	for (i = 0; i < POOL_CLASSES; i++)
		if (size <= class_size(i))
			return (uint8_t)(i + 1);
	return 0;
}

static struct chunk *pool_alloc(uint8_t cls)
{
	struct chunk *k;

	pthread_mutex_lock(&pool_lock);
	k = pools[cls - 1].head;
	if (k) {
		pools[cls - 1].head = k->next;
		pools[cls - 1].bytes -= class_size(cls - 1u);
	}
	pthread_mutex_unlock(&pool_lock);
	return k ? k : malloc(class_size(cls - 1u));
}

static void chunk_free(struct chunk *k)
{
	shca_mem_lane_put(&k->lane);	/* the socket took its bytes */
	free(k->owned);
	if (k->cls) {
		size_t sz = class_size(k->cls - 1u);

		pthread_mutex_lock(&pool_lock);
		if (pools[k->cls - 1].bytes + sz <= POOL_BYTES) {
			k->next = pools[k->cls - 1].head;
			pools[k->cls - 1].head = k;
			pools[k->cls - 1].bytes += sz;
			k = NULL;
		}
		pthread_mutex_unlock(&pool_lock);
	}
	free(k);
}

static void queue_free(struct shca_conn *c)
{
	struct chunk *k, *n;

	trace_tail(c);
	for (k = c->head; k; k = n) {
		n = k->next;
		chunk_free(k);
	}
	c->head = c->tail = NULL;
	c->queued = 0;
	if (c->acks_held) {
		c->acks_held = false;
		__atomic_sub_fetch(&n_held, 1, __ATOMIC_RELAXED);
	}
	if (c->held) {
		chunk_free(c->held);
		c->held = NULL;
	}
}

/* Shut the socket down (any thread); the engine closes it on the hang-up. */
static void conn_fail(struct shca_conn *c)
{
	if (c->state == CONN_UP || c->state == CONN_CONNECTING) {
		shutdown(c->fd, SHUT_RDWR);
		c->state = CONN_CLOSING;
		shca_stat_add(shca_stat_proc(), SHCA_STAT_CONN_RESETS, 1);
	}
	__atomic_fetch_add(&c->resets, 1, __ATOMIC_RELEASE);
	queue_free(c);
}

/* Write what the socket takes; c->lock held. */
static void flush_locked(struct shca_conn *c)
{
	if (c->stall_until) {
		/* fault "stall": the socket takes nothing yet (stall_fire
		 * writes when it ends) */
		if (shca_now_ns() < c->stall_until)
			return;
		c->stall_until = 0;
	}
	if (c->state == CONN_UP && c->tail && c->tail->untraced) {
		/* written now, as it is: nothing more folds into it */
		trace_tail(c);
		c->tail->ack = false;
	}
	while (c->state == CONN_UP && c->head) {
		struct iovec v[MAX_WRITE_IOV];
		struct msghdr mh = { 0 };
		struct chunk *k;
		int n = 0, i;
		ssize_t w;

		/* whole chunks (a chunk has at most MAX_WRITE_IOV) */
		for (k = c->head; k && n + k->niov <= MAX_WRITE_IOV;
		     k = k->next) {
			size_t skip = k->off;

			for (i = 0; i < k->niov; i++) {
				if (skip >= k->iov[i].iov_len) {
					skip -= k->iov[i].iov_len;
					continue;
				}
				v[n].iov_base = (char *)k->iov[i].iov_base + skip;
				v[n].iov_len = k->iov[i].iov_len - skip;
				skip = 0;
				n++;
			}
		}
		mh.msg_iov = v;
		mh.msg_iovlen = (size_t)n;
		/* no SIGPIPE for the application when the peer is gone */
		SHCA_DMA_BEGIN();	/* payloads read from registered memory */
		w = sendmsg(c->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
		SHCA_DMA_END();
		if (w < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN) {
				if (!c->want_out) {
					c->want_out = true;
					shca_engine_watch_events(
						c->fd, EPOLLIN | EPOLLOUT);
				}
				return;
			}
			/* EPIPE, ECONNRESET, or EFAULT: a payload that is no
			 * longer mapped; the stream is lost either way */
			shca_dbg("net: write to port %u: %s",
				 sa_port(&c->peer), strerror(errno));
			conn_fail(c);
			return;
		}
		c->queued -= (size_t)w;
		while (w > 0) {
			k = c->head;
			if ((size_t)w < k->len - k->off) {
				k->off += (size_t)w;
				break;
			}
			w -= (ssize_t)(k->len - k->off);
			c->head = k->next;
			if (!c->head)
				c->tail = NULL;
			if (k->defer)
				c->unanswered++;	/* the peer owes */
			chunk_free(k);
		}
	}
	if (!c->head) {
		c->must_write = false;
		if (c->acks_held) {	/* went with a packet of the poller */
			c->acks_held = false;
			__atomic_sub_fetch(&n_held, 1, __ATOMIC_RELAXED);
		}
	}
	if (c->want_out && c->state == CONN_UP && !c->head) {
		c->want_out = false;
		shca_engine_watch_events(c->fd, EPOLLIN);
	}
}

/*
 * Senders write at once, unless the socket was full: then the engine
 * writes when it drains (EPOLLOUT), and trying before that would be a
 * wasted system call for every packet queued.  c->lock held.
 */
static void flush_unless_full(struct shca_conn *c)
{
	if (!c->want_out)
		flush_locked(c);
}

static void conn_event(int fd, uint32_t events, void *arg);
static void conn_close(struct shca_conn *c);

/* ------------------------------------------------------------------ */
/* Flooding and exhaustion                                             */

/*
 * A connection's life timer (engine thread).  An accepted socket whose
 * opener said no hello within SOFTHCA_NET_HELLO_MS is closed.  Then every
 * SOFTHCA_NET_IDLE_MS a connection on which no frame went either way
 * since the last look, with nothing queued, is closed: it goes after one
 * to two idle periods of silence, and the next send opens an outgoing one
 * again as after any close.  The activity is read under c->lock: a
 * sender that queued a frame while this waited for the lock (it counts
 * under the lock) keeps the connection; an expiry whose timer was armed
 * again or disarmed meanwhile does nothing (shca_timer_stale).
 */
static void life_fire(struct shca_timer *t)
{
	struct shca_conn *c = container_of(t, struct shca_conn, life);
	enum shca_stat why;
	uint64_t act;

	pthread_mutex_lock(&c->lock);
	if (c->fd < 0 || shca_timer_stale(t)) {
		pthread_mutex_unlock(&c->lock);
		return;
	}
	act = __atomic_load_n(&c->activity, __ATOMIC_RELAXED);
	if (c->accepted && !c->greeted) {
		why = SHCA_STAT_NET_HELLO_TIMEOUTS;
	} else if (idle_ns && c->state == CONN_UP && act == c->seen &&
		   !c->head && !c->held && !c->delayed) {
		why = SHCA_STAT_NET_IDLE_CLOSES;
	} else {
		c->seen = act;
		if (idle_ns)
			shca_timer_arm(&c->life, shca_now_ns() + idle_ns);
		pthread_mutex_unlock(&c->lock);
		return;
	}
	c->state = CONN_CLOSING;	/* closed on purpose: no reset */
	pthread_mutex_unlock(&c->lock);
	shca_stat_add(shca_stat_proc(), why, 1);
	shca_dbg("net: closing the connection of port %u: %s",
		 sa_port(&c->peer), why == SHCA_STAT_NET_IDLE_CLOSES ?
		 "idle" : "no hello");
	conn_close(c);
}

/* (Re)start c's life timer, ns from now (0: not at all).  Any thread;
 * c->lock held or c not yet seen by others. */
static void life_start(struct shca_conn *c, uint64_t ns)
{
	c->seen = __atomic_load_n(&c->activity, __ATOMIC_RELAXED);
	c->life.fn = life_fire;
	if (ns)
		shca_timer_arm(&c->life, shca_now_ns() + ns);
}

/*
 * The hello came on the socket accepted as in, which now sits in c (adopt
 * may move it into the outgoing object of the same peer).  Engine thread.
 */
static void conn_greeted(struct shca_conn *in, struct shca_conn *c)
{
	if (c != in) {
		if (c->fd >= 0)
			c->accepted = in->accepted;
		else if (in->accepted)
			n_accepted--;	/* the move failed: socket closed */
		in->accepted = false;
	}
	c->greeted = true;
	if (!shca_timer_armed(&c->life))
		life_start(c, idle_ns);
}

/*
 * An incoming object whose socket closed: off the list, onto the spare
 * list, for the next accept.  Its memory stays (stale pointers read its
 * generation, never freed memory).  Engine thread.
 */
static void conn_recycle(struct shca_conn *c)
{
	struct shca_conn **pp;

	pthread_mutex_lock(&conns_lock);
	for (pp = &conns; *pp; pp = &(*pp)->next)
		if (*pp == c) {
			*pp = c->next;
			break;
		}
	c->spare = true;
	c->next = spare;
	spare = c;
	pthread_mutex_unlock(&conns_lock);
}

uint32_t shca_net_conn_gen(struct shca_conn *c)
{
	return __atomic_load_n(&c->gen, __ATOMIC_ACQUIRE);
}

uint32_t shca_net_conn_resets(struct shca_conn *c)
{
	return __atomic_load_n(&c->resets, __ATOMIC_ACQUIRE);
}

bool shca_net_runs_premade(void)
{
	return !faults.on && !pcap;
}

bool shca_net_faults_drop(void)
{
	return faults.drop > 0;
}

/* A number from the environment, or def (below min: def, with a warning) */
static uint64_t env_num(const char *name, uint64_t def, uint64_t min)
{
	const char *s = getenv(name);
	char *end;
	unsigned long long v;

	if (!s || !*s)
		return def;
	errno = 0;
	v = strtoull(s, &end, 0);
	if (errno || *end || v < min) {
		shca_warn("%s=%s: expected a number of at least %llu, using "
			  "%llu", name, s, (unsigned long long)min,
			  (unsigned long long)def);
		return def;
	}
	return v;
}

static void limits_read(void)
{
	max_conns = (unsigned long)env_num("SOFTHCA_NET_MAX_CONNS",
					   DEFAULT_MAX_CONNS, 0);
	hello_ns = env_num("SOFTHCA_NET_HELLO_MS", DEFAULT_HELLO_MS, 1) *
		   1000000ull;
	idle_ns = env_num("SOFTHCA_NET_IDLE_MS", DEFAULT_IDLE_MS, 0) *
		  1000000ull;
	defer_max = (uint32_t)MIN(env_num("SOFTHCA_NET_DEFER", DEFAULT_DEFER,
					  0), 1u << 20);
	ack_hold_ns = MIN(env_num("SOFTHCA_NET_ACK_HOLD_US",
				  DEFAULT_ACK_HOLD_US, 0),
			  MAX_ACK_HOLD_US) * 1000ull;
	yield_ns = MIN(env_num("SOFTHCA_NET_YIELD_US", DEFAULT_YIELD_US, 0),
		       MAX_YIELD_US) * 1000ull;
}

/*
 * The handshake (handshake.h) is written straight to the socket, ahead of
 * anything queued: its frames are small and each is the only thing in
 * flight on a new connection, so the socket takes it whole (or the
 * connection is broken).  c->lock held.
 */
static int hs_write(struct shca_conn *c, const uint8_t *f, size_t len)
{
	ssize_t w;

	do {
		w = send(c->fd, f, len, MSG_NOSIGNAL | MSG_DONTWAIT);
	} while (w < 0 && errno == EINTR);
	return w == (ssize_t)len ? 0 : -EIO;
}

static void hs_refused(const char *why, const struct shca_conn *c)
{
	shca_stat_add(shca_stat_proc(), SHCA_STAT_NET_HS_REFUSED, 1);
	if (!strcmp(why, "wrong secret"))
		shca_warn_once("net: a connection failed the shared-secret "
			       "check (SOFTHCA_NET_SECRET differs or is set "
			       "on one side only); such connections are "
			       "refused and counted in net_handshake_refused");
	shca_dbg("net: connection with port %u refused: %s",
		 sa_port(&c->peer), why);
}

static void hs_timer_fire(struct shca_timer *t);

/* Opener, connected: HELLO names this process's slot port. */
static int hs_send_hello(struct shca_conn *c)
{
	const struct shca_slot *s = shca_slot_get();
	struct shca_hs_hello h = { .version = SHCA_HS_VERSION };
	uint8_t f[SHCA_HS_FRAME_MAX];

	if (!s)
		return -EADDRINUSE;
	h.flags = shca_hs_secret_set() ? SHCA_HS_FLAG_SECRET : 0;
	h.port = s->port;
	shca_random(c->nonce_o, SHCA_HS_NONCE);
	memcpy(h.nonce, c->nonce_o, SHCA_HS_NONCE);
	c->hs = HS_HELLO_SENT;
	c->proof_sent = false;
	return hs_write(c, f, shca_hs_hello_build(f, &h));
}

/* Both ends: the handshake must be over by hs_deadline (c->lock held). */
static void hs_arm(struct shca_conn *c)
{
	c->hs_deadline = shca_now_ns() + HS_DEADLINE_NS;
	c->hs_timer.fn = hs_timer_fire;
	shca_timer_arm(&c->hs_timer, c->hs_deadline);
}

/* Open the socket of an outgoing connection; c->lock held. */
static int connect_locked(struct shca_conn *c)
{
	int fd, one = 1, ret;

	fd = socket(c->peer.ss_family, SOCK_STREAM | SOCK_NONBLOCK |
					       SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	ret = 0;
	if (c->bound) {
		/* from the QP's own address: the peer admits its packets
		 * only from there (and sends its CHALLENGE there) */
		struct sockaddr_storage src;
		socklen_t sl;

		sl = sa_from_gid(&src, c->addr.src, 0,
				 c->peer.ss_family == AF_INET6 ?
					 ((struct sockaddr_in6 *)&c->peer)
						 ->sin6_scope_id : 0);
		if (src.ss_family != c->peer.ss_family) {
			/* an IPv4 GID toward an IPv6 one: no packet from
			 * here would be admitted there */
			shca_warn_once("net: a QP's source and destination "
				       "GIDs are of different families (IPv4 "
				       "and IPv6): it cannot connect");
			ret = -EAFNOSUPPORT;
		} else {
			setsockopt(fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT,
				   &one, sizeof(one));
			if (bind(fd, (struct sockaddr *)&src, sl))
				ret = -errno;
		}
		if (ret) {
			close(fd);
			return ret;
		}
	}
	ret = connect(fd, (struct sockaddr *)&c->peer, c->peer_len);
	if (ret && errno != EINPROGRESS) {
		ret = -errno;
		close(fd);
		return ret;
	}
	c->fd = fd;
	c->state = CONN_CONNECTING;
	c->want_out = true;
	c->hs = HS_NONE;
	fill_local(c);		/* bound by connect(): the trace's source */
	hs_arm(c);
	life_start(c, idle_ns);
	ret = shca_engine_watch(fd, conn_event, c);
	if (!ret)
		ret = shca_engine_watch_events(fd, EPOLLIN | EPOLLOUT);
	if (ret) {
		shca_engine_unwatch(fd);
		close(fd);
		c->fd = -1;
		c->state = CONN_DOWN;
		return ret;
	}
	return 0;
}

/* What a pad (IBA 9.2: 0-3 bytes to a 4-byte boundary) is made of. */
static const unsigned char pad_zero[4];

static struct chunk *chunk_make(const void *hdr, size_t hlen,
				const struct iovec *pl, int npl, size_t plen,
				bool copy, void *owned)
{
	unsigned int pad = shca_wire_pad(plen);
	size_t extra = copy ? plen : 0;
	int niov = copy ? 1 : 1 + npl, i;
	size_t size = sizeof(struct chunk) +
		      (size_t)(niov + 1) * sizeof(struct iovec) + FRAME_HDR +
		      hlen + pad + extra + 8;
	uint8_t cls = copy ? pool_class(plen, size) : 0;
	struct chunk *k;
	unsigned char *p;

	k = cls ? pool_alloc(cls) : malloc(size);
	if (!k)
		return NULL;
	k->cls = cls;
	k->iov = (struct iovec *)k->hdr;
	p = (unsigned char *)(k->iov + niov + 1);
	k->next = NULL;
	k->owned = owned;
	k->qpn = 0;
	k->psn = 0;
	k->frames = 1;
	k->lane.lane = NULL;
	k->defer = false;
	k->ack = false;
	k->ack_qpn = 0;
	k->untraced = false;
	k->off = 0;
	k->len = FRAME_HDR + hlen + plen + pad;
	k->ib_bytes = hlen + plen + pad;
	{
		uint32_t be = htonl((uint32_t)(hlen + plen + pad));

		memcpy(p, &be, FRAME_HDR);
	}
	memcpy(p + FRAME_HDR, hdr, hlen);
	k->iov[0].iov_base = p;
	k->iov[0].iov_len = FRAME_HDR + hlen;
	if (copy) {
		unsigned char *d = p + FRAME_HDR + hlen;

		SHCA_DMA_BEGIN();
		for (i = 0; i < npl; i++) {
			memcpy(d, pl[i].iov_base, pl[i].iov_len);
			d += pl[i].iov_len;
		}
		SHCA_DMA_END();
		memset(d, 0, pad);
		k->iov[0].iov_len += plen + pad;
		k->niov = 1;
		return k;
	}
	k->niov = 1;
	for (i = 0; i < npl; i++)
		if (pl[i].iov_len)
			k->iov[k->niov++] = pl[i];
	if (pad) {
		k->iov[k->niov].iov_base = (void *)pad_zero;
		k->iov[k->niov++].iov_len = pad;
	}
	return k;
}

static void enqueue_locked(struct shca_conn *c, struct chunk *k)
{
	trace_tail(c);		/* before what goes behind it */
	if (c->tail)
		c->tail->next = k;
	else
		c->head = k;
	c->tail = k;
	c->queued += k->len;
	__atomic_fetch_add(&c->activity, 1, __ATOMIC_RELAXED);
	count_sent(k->frames, k->ib_bytes);
}

struct delayed {
	struct shca_timer t;
	struct shca_conn *c;
	struct chunk *k;		/* NULL: taken at exit */
	struct delayed *next;		/* c->delayed */
};

static void delayed_fire(struct shca_timer *t)
{
	struct delayed *d = container_of(t, struct delayed, t);
	struct shca_conn *c = d->c;
	struct delayed **pp;

	pthread_mutex_lock(&c->lock);
	for (pp = &c->delayed; *pp; pp = &(*pp)->next)
		if (*pp == d) {
			*pp = d->next;
			break;
		}
	if (!d->k) {
		/* sent at exit */
	} else if (c->state == CONN_UP || c->state == CONN_CONNECTING) {
		enqueue_locked(c, d->k);
		flush_locked(c);
	} else {
		chunk_free(d->k);
	}
	pthread_mutex_unlock(&c->lock);
	free(d);
}

/* No packet came to overtake the held one: send it now.  Unless, while
 * this waited for c->lock, a sender let the held packet go and held
 * another, arming the timer anew (shca_timer_stale): that one waits its
 * own 1 ms. */
static void held_fire(struct shca_timer *t)
{
	struct shca_conn *c = container_of(t, struct shca_conn, held_timer);

	pthread_mutex_lock(&c->lock);
	if (c->held && !shca_timer_stale(t)) {
		enqueue_locked(c, c->held);
		c->held = NULL;
		flush_locked(c);
	}
	pthread_mutex_unlock(&c->lock);
}

/* Fault "stall": the pause is over, what was queued goes. */
static void stall_fire(struct shca_timer *t)
{
	struct shca_conn *c = container_of(t, struct shca_conn, stall_timer);

	pthread_mutex_lock(&c->lock);
	if (!shca_timer_stale(t)) {
		c->stall_until = 0;
		flush_locked(c);
	}
	pthread_mutex_unlock(&c->lock);
}

/*
 * Fault "stall" after a packet was queued: the connection takes nothing
 * for stall_ms, as a socket that a slow peer keeps full; its packets stay
 * queued in order, those that reference the application's memory still
 * reference it (no copy: nothing is moved in time against another).
 * c->lock held.
 */
static void stall_maybe(struct shca_conn *c)
{
	if (c->stall_until || !fault_roll(faults.stall))
		return;
	c->stall_until = shca_now_ns() + faults.stall_ms * 1000000ull;
	shca_timer_arm(&c->stall_timer, c->stall_until);
}

/* Apply SOFTHCA_FAULTS to a packet about to be queued; c->lock held.
 * true: the fault layer took (or dropped) the chunk. */
static bool fault_take(struct shca_conn *c, struct chunk *k, bool *dup,
		       bool *reset)
{
	if (fault_roll(faults.drop)) {
		chunk_free(k);
		return true;
	}
	*dup = fault_roll(faults.dup);
	/* a break after a packet that goes out: not while the connection
	 * is still opening (its queue would be lost each time, and a long
	 * window would never let it come up) */
	*reset = c->state == CONN_UP && fault_roll(faults.reset);
	if (fault_roll(faults.delay)) {
		struct delayed *d = calloc(1, sizeof(*d));

		if (d) {
			d->c = c;
			d->k = k;
			d->next = c->delayed;
			c->delayed = d;
			d->t.fn = delayed_fire;
			shca_timer_arm(&d->t, shca_now_ns() +
					      faults.delay_ms * 1000000ull);
			return true;
		}
	}
	if (!c->held && fault_roll(faults.reorder)) {
		c->held = k;
		c->held_timer.fn = held_fire;
		shca_timer_arm(&c->held_timer, shca_now_ns() + 1000000ull);
		return true;
	}
	return false;
}

/*
 * Coalesced ACKs (issue 15): a plain ACK of QP qpn replaces the one this QP
 * queued last, when that one is still the last packet queued on c and not
 * a byte of it written.  Nothing of the QP went between them, so the newer
 * ACK (a higher PSN, the MSN after it) says all the older one said (IBA
 * 9.7.5.1.2: an ACK covers every earlier request), and a NAK, a READ or
 * atomic response or any other packet queued after an ACK is never
 * overtaken by a later one.  Same QP, same length: the header is rewritten
 * in place.  c->lock held; true: k's header went into the queued ACK.
 */
static bool ack_merge(struct shca_conn *c, const struct chunk *k,
		      uint32_t qpn, unsigned int flags)
{
	struct chunk *t = c->tail;

	if (!(flags & SHCA_NET_ACK) || !t || !t->ack || t->ack_qpn != qpn ||
	    t->off || t->len != k->len || t->niov != 1 || k->niov != 1)
		return false;
	memcpy(t->iov[0].iov_base, k->iov[0].iov_base, k->iov[0].iov_len);
	return true;
}

/* c->lock taken with c up or coming up (opened here if it is down and
 * ours to open): 0; or -errno, with the lock let go and k, which was to
 * be queued, freed. */
static int lock_usable(struct shca_conn *c, struct chunk *k)
{
	int ret = 0;

	pthread_mutex_lock(&c->lock);
	if (c->state == CONN_DOWN && !c->incoming)
		ret = connect_locked(c);
	if (!ret && c->state != CONN_UP && c->state != CONN_CONNECTING)
		ret = -ENOTCONN;
	if (ret) {
		pthread_mutex_unlock(&c->lock);
		chunk_free(k);
	}
	return ret;
}

int shca_net_send(struct shca_conn *c, uint32_t qpn, const void *hdr,
		  size_t hlen, const struct iovec *pl, int npl,
		  unsigned int flags, void *owned)
{
	bool copy = flags & SHCA_NET_COPY;
	size_t plen = 0;
	bool dup = false, reset = false;
	struct chunk *k;
	int i, ret = 0;

	for (i = 0; i < npl; i++)
		plen += pl[i].iov_len;
	if (hlen + plen + 4 > MAX_PKT) {
		free(owned);
		return -EMSGSIZE;
	}
	/* faults move packets in time: they need their own copy; so does a
	 * payload in more pieces than a write takes */
	copy = copy || faults.on || npl > SHCA_MAX_NET_IOV;
	k = chunk_make(hdr, hlen, pl, npl, plen, copy, owned);
	if (!k) {
		free(owned);
		return -ENOMEM;
	}
	if (!copy && plen) {
		struct shca_bth bth;

		k->qpn = qpn;
		if (hlen >= sizeof(bth)) {
			memcpy(&bth, hdr, sizeof(bth));
			k->psn = shca_bth_psn(&bth);
		}
	}
	ret = lock_usable(c, k);
	if (ret)
		return ret;
	/* traced as sent (before the faults); a plain ACK that is queued
	 * last, into which a later one may be folded, when that is over
	 * (trace_tail) */
	if (!(flags & SHCA_NET_ACK)) {
		trace_tail(c);
		trace(c->addr.src, c->addr.dst, hdr, hlen, pl, npl);
	}
	if (faults.on && fault_take(c, k, &dup, &reset)) {
		if (flags & SHCA_NET_ACK) {
			trace_tail(c);
			trace(c->addr.src, c->addr.dst, hdr, hlen, pl, npl);
		}
		k = NULL;
	} else {
		struct chunk *d = dup ? chunk_make(hdr, hlen, pl, npl, plen,
						   true, NULL) : NULL;

		if (!d && ack_merge(c, k, qpn, flags)) {
			chunk_free(k);
			ret = SHCA_NET_MERGED;
		} else {
			enqueue_locked(c, k);
			if ((flags & SHCA_NET_ACK) && d)
				trace(c->addr.src, c->addr.dst, hdr, hlen, pl,
				      npl);
			k->ack = (flags & SHCA_NET_ACK) && !d;
			k->untraced = k->ack;
			k->ack_qpn = qpn;
			k->defer = flags & SHCA_NET_DEFER;
		}
		if (!(flags & SHCA_NET_DEFER))
			c->must_write = true;
		if (d)
			enqueue_locked(c, d);
		if (c->held) {
			/* reorder: the held packet goes after this one */
			enqueue_locked(c, c->held);
			c->held = NULL;
		}
	}
	if (faults.stall > 0)
		stall_maybe(c);
	if (!(flags & SHCA_NET_MORE) || c->queued > (1u << 20))
		flush_unless_full(c);
	if (reset) {
		/* the connection breaks after this packet: what was queued
		 * before it went out (as far as the socket takes it), not
		 * the whole window with it */
		flush_locked(c);
		conn_fail(c);
	}
	pthread_mutex_unlock(&c->lock);
	return ret;
}

/*
 * How many packets from p[i] on go in one run frame (net.h): p[i] and
 * those after it with the same BTH but for the PSN, which counts up, and
 * payloads (plen[], their lengths) of p[i]'s length, a multiple of 4;
 * none asks for an ACK; SHCA_NET_RUN_BYTES of payload at most.  1: p[i]
 * goes alone.
 */
static int run_len(const struct shca_net_pkt *p, const size_t *plen, int i,
		   int n)
{
	struct shca_bth want;
	int r = 1;

	if (p[i].count > 1 || p[i].hlen != SHCA_BTH_LEN || !plen[i] ||
	    plen[i] % 4)
		return 1;
	memcpy(&want, p[i].hdr, SHCA_BTH_LEN);
	if (shca_bth_ackreq(&want))
		return 1;
	for (; i + r < n && r < SHCA_NET_RUN_MAX &&
	       (size_t)(r + 1) * plen[i] <= SHCA_NET_RUN_BYTES;
	     r++) {
		shca_bth_set_psn(&want, shca_bth_psn(&want) + 1);
		if (p[i + r].count > 1 || p[i + r].hlen != SHCA_BTH_LEN ||
		    plen[i + r] != plen[i] ||
		    memcmp(&want, p[i + r].hdr, SHCA_BTH_LEN))
			break;
	}
	return r;
}

/*
 * A train's frames being written into its chunk k: headers into the
 * chunk's own bytes at h, payloads referenced (iovecs; a piece that goes
 * on where the one before it ends, both payloads, makes that one longer:
 * a run's payloads are one copy for the kernel) or, with copy, copied
 * after their headers, so that the chunk is one iovec.
 */
struct frames_out {
	struct chunk *k;
	unsigned char *h;
	bool copy;
	bool join;		/* the last iovec is a payload's */
};

static void out_own(struct frames_out *o, const void *b, size_t len)
{
	struct chunk *k = o->k;

	memcpy(o->h, b, len);
	if (!o->copy) {
		if (k->niov && !o->join && (unsigned char *)k->iov[k->niov - 1]
			.iov_base + k->iov[k->niov - 1].iov_len == o->h)
			k->iov[k->niov - 1].iov_len += len;
		else
			k->iov[k->niov++] = (struct iovec){ o->h, len };
	}
	o->h += len;
	o->join = false;
}

static void out_payload(struct frames_out *o, const struct iovec *v)
{
	struct chunk *k = o->k;
	struct iovec *last = k->niov ? &k->iov[k->niov - 1] : NULL;

	if (!v->iov_len)
		return;
	if (o->copy) {
		memcpy(o->h, v->iov_base, v->iov_len);
		o->h += v->iov_len;
	} else if (o->join &&
		   (char *)last->iov_base + last->iov_len == v->iov_base) {
		last->iov_len += v->iov_len;
	} else {
		k->iov[k->niov++] = *v;
		o->join = true;
	}
}

static void out_pad(struct frames_out *o, unsigned int pad)
{
	if (!pad)
		return;
	if (o->copy) {
		memset(o->h, 0, pad);
		o->h += pad;
	} else {
		o->k->iov[o->k->niov++] =
			(struct iovec){ (void *)pad_zero, pad };
		o->join = false;
	}
}

/* Packet p's frame, or the run frame of p and the r - 1 after it, or of
 * the run p is (count; plen: each packet's payload). */
static void out_frame(struct frames_out *o, const struct shca_net_pkt *p,
		      int r, size_t plen)
{
	unsigned char w[SHCA_NET_RUN_HDR];
	uint32_t be;
	int i, j;

	if (r > 1 || p->count > 1) {
		/* the entries whose payloads it carries: r, or p alone */
		int e = p->count > 1 ? 1 : r;

		r = p->count > 1 ? (int)p->count : r;
		be = htonl(SHCA_NET_RUN | (uint32_t)r);
		memcpy(w, &be, FRAME_HDR);
		be = htonl((uint32_t)plen);
		memcpy(w + FRAME_HDR, &be, 4);
		memcpy(w + FRAME_HDR + 4, p->hdr, SHCA_BTH_LEN);
		out_own(o, w, SHCA_NET_RUN_HDR);
		o->k->len += SHCA_NET_RUN_HDR + (size_t)r * plen;
		for (i = 0; i < e; i++)
			for (j = 0; j < p[i].npl; j++)
				out_payload(o, &p[i].pl[j]);
		return;
	}
	be = htonl((uint32_t)(p->hlen + plen + shca_wire_pad(plen)));
	out_own(o, &be, FRAME_HDR);
	out_own(o, p->hdr, p->hlen);
	for (j = 0; j < p->npl; j++)
		out_payload(o, &p->pl[j]);
	out_pad(o, shca_wire_pad(plen));
	o->k->len += FRAME_HDR + p->hlen + plen + shca_wire_pad(plen);
}

int shca_net_send_train(struct shca_conn *c, uint32_t qpn, uint32_t psn,
			const struct shca_net_pkt *p, int n,
			unsigned int flags, struct shca_lane *lane)
{
	struct frames_out o = { .copy = flags & SHCA_NET_COPY };
	size_t hbytes = 0, len = 0, ib = 0, size, plen[SHCA_NET_TRAIN];
	uint32_t pkts = 0;
	int niov = 0, i, j, r, ret;
	uint8_t cls = 0;
	struct chunk *k;

	if (n <= 0 || n > SHCA_NET_TRAIN)
		return n ? -EINVAL : 0;
	if (faults.on) {
		/* the injector rolls for each packet (and copies it): no
		 * runs made by the caller (shca_net_runs_premade) */
		for (i = 0; i < n; i++)
			if (p[i].count > 1)
				return -EINVAL;
		for (i = 0; i < n; i++) {
			ret = shca_net_send(c, qpn, p[i].hdr, p[i].hlen,
					    p[i].pl, p[i].npl,
					    (flags & SHCA_NET_COPY) |
						    SHCA_NET_MORE,
					    NULL);
			if (ret < 0)
				return i ? i : ret;
		}
		return n;
	}
	for (i = 0; i < n; i++) {
		uint32_t cnt = MAX(p[i].count, 1u);

		if (p[i].npl < 0 || p[i].npl > SHCA_MAX_NET_IOV)
			return -EINVAL;
		plen[i] = 0;
		for (j = 0; j < p[i].npl; j++) {
			plen[i] += p[i].pl[j].iov_len;
			niov += p[i].pl[j].iov_len != 0;
		}
		if (cnt > 1) {
			/* a run made by the caller: equal payloads; the
			 * trace wants packets (shca_net_runs_premade) */
			if (pcap || cnt > SHCA_NET_RUN_MAX ||
			    plen[i] > SHCA_NET_RUN_BYTES || plen[i] % cnt ||
			    p[i].hlen != SHCA_BTH_LEN)
				return -EINVAL;
			plen[i] /= cnt;
			if (!plen[i] || plen[i] % 4)
				return -EINVAL;
		}
		if (p[i].hlen + plen[i] + FRAME_HDR > MAX_PKT)
			return -EMSGSIZE;
		niov += 1 + (shca_wire_pad(plen[i]) != 0);
		if (cnt > 1) {
			hbytes += SHCA_NET_RUN_HDR;
			len += SHCA_NET_RUN_HDR + cnt * plen[i];
		} else {
			hbytes += FRAME_HDR + p[i].hlen;
			len += FRAME_HDR + p[i].hlen + plen[i] +
			       shca_wire_pad(plen[i]);
		}
		ib += cnt * (p[i].hlen + plen[i] + shca_wire_pad(plen[i]));
		pkts += cnt;
	}
	/* room for every packet in a frame of its own: runs take less */
	if (o.copy) {
		niov = 1;
		hbytes = len;
	} else if (niov > MAX_WRITE_IOV) {
		return -EINVAL;
	}
	size = sizeof(*k) + (size_t)(niov + 1) * sizeof(struct iovec) + hbytes;
	if (o.copy)
		cls = pool_class(len, size);
	k = cls ? pool_alloc(cls) : malloc(size);
	if (!k)
		return -ENOMEM;
	memset(k, 0, sizeof(*k));
	k->cls = cls;
	k->iov = (struct iovec *)k->hdr;
	/* a copy references nothing of the QP's; memory held by a lane is
	 * not the QP's either (not released with its WQEs) */
	k->qpn = o.copy || lane ? 0 : qpn;
	k->psn = psn & SHCA_PSN_MASK;
	k->frames = pkts;
	k->ib_bytes = ib;
	o.k = k;
	o.h = (unsigned char *)(k->iov + niov + 1);
	SHCA_DMA_BEGIN();	/* copies read registered memory */
	for (i = 0; i < n; i += r) {
		r = run_len(p, plen, i, n);
		out_frame(&o, &p[i], r, plen[i]);
	}
	SHCA_DMA_END();
	if (o.copy) {
		k->iov[0].iov_base = o.h - k->len;
		k->iov[0].iov_len = k->len;
		k->niov = 1;
	}
	ret = lock_usable(c, k);
	if (ret)
		return ret;
	if (lane && !o.copy) {
		k->lane = *lane;	/* the chunk's now */
		lane->lane = NULL;
	}
	trace_tail(c);
	for (i = 0; pcap && i < n; i++)
		trace(c->addr.src, c->addr.dst, p[i].hdr, p[i].hlen, p[i].pl,
		      p[i].npl);
	enqueue_locked(c, k);
	c->must_write = true;
	/* fault "stall" (it keeps payloads referenced: trains go on): rolled
	 * for each packet, as shca_net_send does */
	for (i = 0; (uint32_t)i < pkts && faults.stall > 0; i++)
		stall_maybe(c);
	if (c->queued > (1u << 20))
		flush_unless_full(c);
	pthread_mutex_unlock(&c->lock);
	return n;
}

/*
 * The bytes of chunk k not yet written, headers and payloads, copied into
 * memory of its own (a train interleaves them): the written part stays
 * behind one iovec that the writer skips, so k->off and k->len go on
 * meaning what they did.  false: out of memory.  c->lock held.
 */
static bool chunk_own(struct chunk *k)
{
	size_t skip = k->off, n = k->len - k->off;
	unsigned char *b, *d;
	int i;

	b = malloc(n);
	if (!b)
		return false;
	d = b;
	SHCA_DMA_BEGIN();	/* payloads in registered memory */
	for (i = 0; i < k->niov; i++) {
		size_t l = k->iov[i].iov_len;

		if (skip < l) {
			memcpy(d, (char *)k->iov[i].iov_base + skip, l - skip);
			d += l - skip;
		}
		skip = skip > l ? skip - l : 0;
	}
	SHCA_DMA_END();
	/* every chunk has room for two iovecs (niov >= 1, and the end) */
	k->iov[0].iov_base = NULL;
	k->iov[0].iov_len = k->off;
	k->iov[1].iov_base = b;
	k->iov[1].iov_len = n;
	k->niov = 2;
	free(k->owned);
	k->owned = b;
	k->qpn = 0;
	shca_mem_lane_put(&k->lane);
	return true;
}

/*
 * qpn's chunks that reference its memory, all of them or (n > 0) those
 * with a PSN in [psn, psn + n): dropped if not begun, else given memory
 * of their own.  c->lock held.
 */
static void forget_locked(struct shca_conn *c, uint32_t qpn, uint32_t psn,
			  uint32_t n)
{
	struct chunk **pp, *k;

	for (pp = &c->head; (k = *pp);) {
		/* a train's PSNs [k->psn, + frames) meet [psn, + n)? */
		if (k->qpn != qpn ||
		    (n && (uint32_t)(shca_psn_diff(k->psn, psn) +
				     (int32_t)k->frames - 1) >=
				  n + k->frames - 1)) {
			pp = &k->next;
			continue;
		}
		if (!k->off) {
			/* not begun: dropped */
			*pp = k->next;
			c->queued -= k->len;
			chunk_free(k);
			continue;
		}
		/* begun: the stream needs the rest, from memory of its own */
		if (!chunk_own(k)) {
			conn_fail(c);	/* out of memory: the stream is lost */
			break;
		}
		pp = &k->next;
	}
	c->tail = NULL;
	for (k = c->head; k; k = k->next)
		c->tail = k;
}

void shca_net_forget(struct shca_conn *c, uint32_t qpn)
{
	pthread_mutex_lock(&c->lock);
	forget_locked(c, qpn, 0, 0);
	pthread_mutex_unlock(&c->lock);
}

void shca_net_release(struct shca_conn *c, uint32_t qpn, uint32_t psn,
		      uint32_t n)
{
	if (!n)
		return;
	pthread_mutex_lock(&c->lock);
	if (c->head)
		forget_locked(c, qpn, psn & SHCA_PSN_MASK, n);
	pthread_mutex_unlock(&c->lock);
}

void shca_net_drain_key(uint32_t key)
{
	struct shca_conn *c;
	struct chunk *k;

	/* a forked child's connections are its parent's */
	if (!started_here())
		return;
	pthread_mutex_lock(&conns_lock);
	for (c = conns; c; c = c->next) {
		pthread_mutex_lock(&c->lock);
		for (k = c->head; k; k = k->next) {
			if (!k->lane.lane ||
			    SHCA_LANE_KEY(k->lane.word) != key)
				continue;
			if (!chunk_own(k)) {
				/* out of memory: the stream is lost, and
				 * the memory is not read any more */
				shca_mem_lane_put(&k->lane);
				conn_fail(c);
			}
		}
		pthread_mutex_unlock(&c->lock);
	}
	pthread_mutex_unlock(&conns_lock);
}

void shca_net_flush(struct shca_conn *c)
{
	pthread_mutex_lock(&c->lock);
	flush_unless_full(c);
	pthread_mutex_unlock(&c->lock);
}

/*
 * Small requests in a stream (net.h): while the peer owes answers to more
 * than defer_max of them already written, what is queued waits for its
 * next batch (deliver), which answers some and writes the rest in one
 * system call, as Nagle's algorithm holds small segments for the next
 * ACK.  Only written ones count: an answer is owed for those, so the
 * wait ends.  A resend, an answer or a large packet is written at once,
 * with everything before it.
 */
void shca_net_flush_defer(struct shca_conn *c)
{
	pthread_mutex_lock(&c->lock);
	if (defer_max && !c->must_write && c->unanswered > defer_max &&
	    c->head && !c->want_out) {
		pthread_mutex_unlock(&c->lock);
		shca_stat_add(shca_stat_proc(), SHCA_STAT_NET_DEFERRED, 1);
		return;
	}
	flush_unless_full(c);
	pthread_mutex_unlock(&c->lock);
}

/*
 * At exit, what this process handed to its connections still goes out, as
 * packets handed to a NIC are still on the wire: the ACK of the message
 * the application exits on, packets a "delay" or "reorder" fault holds.
 * Bounded by progress: the wait ends after 100 ms in which nothing moved
 * (no handshake step, no byte queued or unacknowledged less), and after
 * 2 s in all.  A fixed 100 ms lost what a connection still opening held
 * on a loaded machine (tests/traffic/test_exitflush.c).
 */
#define EXIT_IDLE_NS	100000000ull
#define EXIT_MAX_NS	2000000000ull

struct exit_clock {
	uint64_t idle_end, hard_end, mark;
};

/* May the flush wait on?  A changed mark is progress: another 100 ms. */
static bool exit_more(struct exit_clock *e, uint64_t mark)
{
	uint64_t now = shca_now_ns();

	if (mark != e->mark) {
		e->mark = mark;
		e->idle_end = MIN(now + EXIT_IDLE_NS, e->hard_end);
	}
	return now < e->idle_end;
}

/* A connection still opening holds packets: its handshake (run by the
 * engine thread, which still runs) lets them go once it is over.  *mark
 * moves as handshakes advance. */
static bool any_opening(uint64_t *mark)
{
	struct shca_conn *c;
	bool opening = false;

	*mark = 0;
	pthread_mutex_lock(&conns_lock);
	for (c = conns; c; c = c->next) {
		pthread_mutex_lock(&c->lock);
		if (c->state == CONN_CONNECTING && c->head) {
			opening = true;
			*mark = *mark * 31 + (uint64_t)c->hs * 8 +
				(uint64_t)c->state + 1;
		}
		pthread_mutex_unlock(&c->lock);
	}
	pthread_mutex_unlock(&conns_lock);
	return opening;
}

__attribute__((destructor)) static void conn_exit_flush(void)
{
	uint64_t now = shca_now_ns(), mark;
	struct exit_clock e = { now + EXIT_IDLE_NS, now + EXIT_MAX_NS, 0 };
	struct shca_conn *c;

	if (!started_here())
		return;
	while (!shca_in_engine() && any_opening(&mark) && exit_more(&e, mark))
		poll(NULL, 0, 1);
	/* the engine thread in a batch whose receive completion the
	 * application exits on: that batch's ACK is queued at its end */
	while (!shca_in_engine() &&
	       __atomic_load_n(&rx_busy, __ATOMIC_ACQUIRE) &&
	       exit_more(&e, e.mark))
		poll(NULL, 0, 1);
	pthread_mutex_lock(&conns_lock);
	for (c = conns; c; c = c->next) {
		struct delayed *d, *older = NULL;

		pthread_mutex_lock(&c->lock);
		/* the list holds the latest first: they go out in the order
		 * they were sent, as their timers would have sent them (all
		 * are held delay_ms) */
		while ((d = c->delayed)) {
			c->delayed = d->next;
			d->next = older;
			older = d;
		}
		c->delayed = older;
		for (d = c->delayed; d && c->state == CONN_UP; d = d->next)
			if (d->k) {
				enqueue_locked(c, d->k);
				d->k = NULL;
			}
		if (c->held && c->state == CONN_UP) {
			enqueue_locked(c, c->held);
			c->held = NULL;
		}
		c->stall_until = 0;	/* no more pauses: the exit writes */
		for (;;) {
			struct pollfd pf = { .fd = c->fd, .events = POLLOUT };

			flush_locked(c);
			if (!c->head || c->state != CONN_UP ||
			    !exit_more(&e, ~(uint64_t)c->queued))
				break;
			poll(&pf, 1, 1);
		}
		/* and until the peer's kernel has it: a process that exits
		 * with data unread resets its connections, and what its own
		 * kernel had not sent yet is lost with them */
		while (c->state == CONN_UP && !c->head) {
			int unacked = 0;

			if (ioctl(c->fd, SIOCOUTQ, &unacked) || !unacked ||
			    !exit_more(&e, (uint64_t)unacked << 1 | 1))
				break;
			poll(NULL, 0, 1);
		}
		pthread_mutex_unlock(&c->lock);
	}
	pthread_mutex_unlock(&conns_lock);
}

size_t shca_net_queued(struct shca_conn *c)
{
	size_t q;

	pthread_mutex_lock(&c->lock);
	q = c->queued + (c->held ? c->held->len : 0);
	if (c->state == CONN_CONNECTING)
		q++;
	pthread_mutex_unlock(&c->lock);
	return q;
}

/* Under c->lock, which hs_welcome/hs_proof hold when they set HS_DONE
 * (the order exec_lock -> c->lock is the senders' too) */
bool shca_net_conn_proven(struct shca_conn *c, uint8_t gid[16],
			  unsigned int *scope, uint16_t *port)
{
	bool done;

	if (!c)
		return false;
	pthread_mutex_lock(&c->lock);
	done = c->hs == HS_DONE;
	if (done) {
		memcpy(gid, c->addr.dst, 16);
		*scope = c->peer.ss_family == AF_INET6 ?
				 ((struct sockaddr_in6 *)&c->peer)->sin6_scope_id :
				 0;
		*port = c->id_port;
	}
	pthread_mutex_unlock(&c->lock);
	return done;
}

void shca_net_conn_addr(struct shca_conn *c, struct shca_net_addr *addr)
{
	pthread_mutex_lock(&c->lock);
	*addr = c->addr;
	pthread_mutex_unlock(&c->lock);
}

/* ------------------------------------------------------------------ */
/* Receiving (engine thread)                                           */

/* The engine closes a connection: after a hang-up, an error or a bad
 * frame. */
static void conn_close(struct shca_conn *c)
{
	struct delayed *d;

	if (c->spare)
		return;		/* closed and recycled already */
	pthread_mutex_lock(&c->lock);
	/* a new connection proves itself anew */
	shca_timer_disarm(&c->hs_timer);
	c->hs = c->incoming ? HS_WAIT_HELLO : HS_NONE;
	shca_timer_disarm(&c->life);
	if (c->accepted) {
		c->accepted = false;
		n_accepted--;
	}
	c->greeted = false;
	if (c->fd >= 0) {
		shca_engine_unwatch(c->fd);
		close(c->fd);
		c->fd = -1;
		if (c->state == CONN_UP || c->state == CONN_CONNECTING)
			shca_stat_add(shca_stat_proc(), SHCA_STAT_CONN_RESETS,
				      1);
	}
	__atomic_fetch_add(&c->resets, 1, __ATOMIC_RELEASE);
	c->state = CONN_DOWN;
	c->want_out = false;
	c->stall_until = 0;
	shca_timer_disarm(&c->stall_timer);
	queue_free(c);
	/* the next stream owes nothing (shca_net_flush_defer) */
	c->unanswered = 0;
	c->must_write = false;
	free(c->rbuf);
	c->rbuf = NULL;
	c->rlen = 0;
	if (c->incoming) {
		/* nothing of this peer's may reach the object's next one */
		__atomic_fetch_add(&c->gen, 1, __ATOMIC_RELEASE);
		shca_timer_disarm(&c->held_timer);
		for (d = c->delayed; d; d = d->next) {
			if (d->k)
				chunk_free(d->k);
			d->k = NULL;
		}
		c->delayed = NULL;
	}
	pthread_mutex_unlock(&c->lock);
	if (c->incoming)
		conn_recycle(c);
}

/*
 * An accepted connection named its opener's port: it becomes this
 * process's connection to that process too.  If a requester here already
 * holds a connection object for it that never connected, the socket moves
 * into that object (requesters keep their pointers); the caller goes on
 * with the returned object.  Engine thread.
 */
static struct shca_conn *adopt(struct shca_conn *in, uint16_t port)
{
	struct sockaddr_storage peer = in->peer;
	struct shca_conn *c;

	if (peer.ss_family == AF_INET6)
		((struct sockaddr_in6 *)&peer)->sin6_port = htons(port);
	else
		((struct sockaddr_in *)&peer)->sin_port = htons(port);
	pthread_mutex_lock(&conns_lock);
	for (c = conns; c; c = c->next) {
		struct conn_ident id;

		if (c == in)
			continue;
		conn_ident(c, &id);
		if (!id.incoming && !memcmp(id.addr.dst, in->addr.dst, 16) &&
		    (!id.bound || !memcmp(id.addr.src, in->addr.src, 16)) &&
		    id.port == port)
			break;
	}
	pthread_mutex_unlock(&conns_lock);
	if (c) {
		pthread_mutex_lock(&c->lock);
		if (c->state == CONN_DOWN && !c->head && in->fd >= 0) {
			/* the socket, its watch and its read buffer move */
			shca_engine_unwatch(in->fd);
			c->fd = in->fd;
			c->state = CONN_UP;
			c->addr = in->addr;
			c->local_port = in->local_port;
			c->hs = HS_DONE;
			c->id_port = port;
			c->bound = true;
			shca_timer_disarm(&c->hs_timer);
			c->rbuf = in->rbuf;
			c->rlen = in->rlen;
			in->fd = -1;
			in->rbuf = NULL;
			in->rlen = 0;
			in->state = CONN_DOWN;
			if (shca_engine_watch(c->fd, conn_event, c)) {
				close(c->fd);
				c->fd = -1;
				c->state = CONN_DOWN;
			}
			pthread_mutex_unlock(&c->lock);
			return c;
		}
		pthread_mutex_unlock(&c->lock);
		return in;	/* both opened at once: two connections */
	}
	pthread_mutex_lock(&in->lock);
	in->peer = peer;
	in->incoming = false;	/* now also ours to send requests on */
	in->bound = true;	/* from the address the peer connected to */
	pthread_mutex_unlock(&in->lock);
	return in;
}

/* ------------------------------------------------------------------ */
/* The handshake (handshake.h), engine thread                          */

static shca_net_drain_fn drain_fn;

/* Acceptor: the CHALLENGE, by UDP from this slot to the port the opener
 * claimed at the address it connected from; c->lock held. */
static void hs_send_challenge(struct shca_conn *c)
{
	const struct shca_slot *s = shca_slot_get();
	struct shca_hs_challenge ch = { .version = SHCA_HS_VERSION };
	struct sockaddr_storage to = c->peer;
	socklen_t tl = c->peer_len;
	uint8_t d[SHCA_HS_CHALLENGE_LEN];
	size_t n;

	if (!s)
		return;
	ch.flags = shca_hs_secret_set() ? SHCA_HS_FLAG_SECRET : 0;
	ch.acc_port = s->port;
	ch.src_port = sa_port(&c->peer);
	memcpy(ch.nonce, c->nonce_a, SHCA_HS_NONCE);
	n = shca_hs_challenge_build(d, &ch);
	if (to.ss_family == AF_INET) {
		/* the slot's socket is IPv6 (dual-stack): IPv4 as mapped */
		struct sockaddr_in6 s6;
		uint8_t gid[16];

		gid_from_sa(gid, &to);
		memset(&s6, 0, sizeof(s6));
		s6.sin6_family = AF_INET6;
		memcpy(&s6.sin6_addr, gid, 16);
		memcpy(&to, &s6, sizeof(s6));
		tl = sizeof(s6);
	}
	if (to.ss_family == AF_INET6)
		((struct sockaddr_in6 *)&to)->sin6_port = htons(c->hs_claim);
	else
		((struct sockaddr_in *)&to)->sin_port = htons(c->hs_claim);
	if (sendto(s->udp_fd, d, n, MSG_DONTWAIT | MSG_NOSIGNAL,
		   (struct sockaddr *)&to, tl) < 0)
		shca_dbg("net: challenge to port %u: %s", c->hs_claim,
			 strerror(errno));
}

static void hs_timer_fire(struct shca_timer *t)
{
	struct shca_conn *c = container_of(t, struct shca_conn, hs_timer);
	bool expired = false;
	uint64_t now;

	pthread_mutex_lock(&c->lock);
	if (c->fd < 0 || c->hs == HS_DONE || shca_timer_stale(t)) {
		/* over, or armed again (a new handshake's deadline) or
		 * disarmed while this waited for the lock */
		pthread_mutex_unlock(&c->lock);
		return;
	}
	now = shca_now_ns();
	if (now >= c->hs_deadline) {
		/* an accepted one is closed by its hello timeout (life_fire,
		 * SOFTHCA_NET_HELLO_MS), counted as net_hello_timeouts */
		expired = !c->incoming;
	} else if (c->hs == HS_WAIT_PROOF) {
		hs_send_challenge(c);
		shca_timer_arm(t, MIN(now + HS_RESEND_NS, c->hs_deadline));
	} else {
		shca_timer_arm(t, c->hs_deadline);
	}
	pthread_mutex_unlock(&c->lock);
	if (expired) {
		hs_refused("no proof in time", c);
		conn_close(c);
	}
}

/* Acceptor: HELLO claims a slot port; the CHALLENGE goes there. */
static int hs_hello(struct shca_conn *c, const uint8_t *b, size_t len)
{
	uint16_t base = shca_port_base();
	struct shca_hs_hello h;

	if (!c->incoming || c->hs != HS_WAIT_HELLO ||
	    shca_hs_hello_parse(b, len, &h))
		return -EPROTO;
	if (h.port < base || (unsigned int)(h.port - base) >= SHCA_NUM_SLOTS)
		return -EPROTO;
	/* both ends have a secret, or neither */
	if (!(h.flags & SHCA_HS_FLAG_SECRET) != !shca_hs_secret_set())
		return -EACCES;
	pthread_mutex_lock(&c->lock);
	c->hs_claim = h.port;
	memcpy(c->nonce_o, h.nonce, SHCA_HS_NONCE);
	shca_random(c->nonce_a, SHCA_HS_NONCE);
	c->hs = HS_WAIT_PROOF;
	hs_send_challenge(c);
	shca_timer_arm(&c->hs_timer, MIN(shca_now_ns() + HS_RESEND_NS,
					 c->hs_deadline));
	pthread_mutex_unlock(&c->lock);
	return 0;
}

/* Acceptor: PROOF echoes the CHALLENGE's nonce (and MACs it): the peer is
 * the owner of the slot it claimed; WELCOME says so.  *cp may change
 * (adopt). */
static int hs_proof(struct shca_conn **cp, const uint8_t *b)
{
	struct shca_conn *c = *cp;
	const struct shca_slot *s = shca_slot_get();
	uint8_t mac[SHCA_HS_MAC], f[SHCA_HS_FRAME_MAX];
	int ret;

	if (!c->incoming && c->hs == HS_DONE)
		return 0;	/* an answer to a CHALLENGE sent again */
	if (!c->incoming || !s)
		return -EPROTO;
	if (c->hs == HS_DONE)
		return 0;
	if (c->hs != HS_WAIT_PROOF)
		return -EPROTO;
	if (!shca_ct_equal(b, c->nonce_a, SHCA_HS_NONCE)) {
		/* a CHALLENGE someone forged made the opener echo it:
		 * ignored, the right one may still come */
		shca_stat_add(shca_stat_proc(), SHCA_STAT_NET_ADMIT_DROPS, 1);
		return 0;
	}
	shca_hs_mac(true, c->nonce_o, c->nonce_a, s->port, c->hs_claim, mac);
	if (!shca_ct_equal(b + SHCA_HS_NONCE, mac, SHCA_HS_MAC))
		return -EACCES;
	shca_hs_mac(false, c->nonce_o, c->nonce_a, s->port, c->hs_claim, mac);
	pthread_mutex_lock(&c->lock);
	ret = hs_write(c, f, shca_hs_welcome_build(f, mac));
	if (!ret) {
		c->hs = HS_DONE;
		c->id_port = c->hs_claim;
		shca_timer_disarm(&c->hs_timer);
	}
	pthread_mutex_unlock(&c->lock);
	if (ret)
		return ret;
	*cp = adopt(c, c->id_port);
	conn_greeted(c, *cp);	/* the hello timeout is over */
	return 0;
}

/* Opener: WELCOME proves the acceptor knows the secret too; what was
 * queued goes out now. */
static int hs_welcome(struct shca_conn *c, const uint8_t *b)
{
	uint8_t mac[SHCA_HS_MAC];
	const struct shca_slot *s = shca_slot_get();

	if (c->incoming || c->hs != HS_HELLO_SENT || !c->proof_sent || !s)
		return -EPROTO;
	shca_hs_mac(false, c->nonce_o, c->nonce_a, sa_port(&c->peer), s->port,
		    mac);
	if (!shca_ct_equal(b, mac, SHCA_HS_MAC))
		return -EACCES;
	pthread_mutex_lock(&c->lock);
	c->hs = HS_DONE;
	c->id_port = sa_port(&c->peer);
	shca_timer_disarm(&c->hs_timer);
	if (c->state == CONN_CONNECTING)
		c->state = CONN_UP;
	flush_locked(c);
	pthread_mutex_unlock(&c->lock);
	if (__atomic_load_n(&drain_fn, __ATOMIC_ACQUIRE))
		__atomic_load_n(&drain_fn, __ATOMIC_ACQUIRE)(c);
	return 0;
}

/*
 * Opener: a CHALLENGE datagram from the acceptor, naming the connection
 * by its ports: PROOF goes on that connection.  A CHALLENGE for no
 * connection of ours is dropped.
 */
static void hs_challenge(const struct shca_net_addr *from,
			 const struct shca_hs_challenge *ch)
{
	const struct shca_slot *s = shca_slot_get();
	uint8_t mac[SHCA_HS_MAC], f[SHCA_HS_FRAME_MAX];
	struct shca_conn *c;

	pthread_mutex_lock(&conns_lock);
	for (c = conns; c; c = c->next)
		if (!c->incoming && c->hs == HS_HELLO_SENT &&
		    c->local_port == ch->src_port &&
		    sa_port(&c->peer) == ch->acc_port &&
		    !memcmp(c->addr.dst, from->src, 16))
			break;
	pthread_mutex_unlock(&conns_lock);
	if (!c || !s) {
		shca_stat_add(shca_stat_proc(), SHCA_STAT_NET_ADMIT_DROPS, 1);
		return;
	}
	pthread_mutex_lock(&c->lock);
	if (c->hs == HS_HELLO_SENT && c->fd >= 0) {
		memcpy(c->nonce_a, ch->nonce, SHCA_HS_NONCE);
		shca_hs_mac(true, c->nonce_o, c->nonce_a, ch->acc_port,
			    s->port, mac);
		if (!hs_write(c, f, shca_hs_proof_build(f, c->nonce_a, mac)))
			c->proof_sent = true;
		else
			conn_fail(c);
	}
	pthread_mutex_unlock(&c->lock);
}

/* One control frame; *cp may change (adopt).  -errno: the connection is
 * closed. */
static int hs_frame(struct shca_conn **cp, enum shca_hs_type t,
		    const uint8_t *b, size_t len)
{
	switch (t) {
	case SHCA_HS_HELLO:
		return hs_hello(*cp, b, len);
	case SHCA_HS_PROOF:
		return hs_proof(cp, b);
	case SHCA_HS_WELCOME:
		return hs_welcome(*cp, b);
	}
	return -EPROTO;
}

/*
 * Held ACKs (issue 15).  In a ping-pong over the net path an ACK is a
 * write of its own, a few microseconds before the write of the reply that
 * the application posts once it polled the message: two system calls,
 * and two segments for the peer to wake up to, where TCP sends one.  So
 * while an application thread polls, the ACKs of a received batch wait
 * when nothing but ACKs is queued on the connection: the next packet
 * queued there (the reply, any thread's) takes them along in one write,
 * and ack_merge folds the QP's later ACKs into them meanwhile.  "While a
 * thread polls": the batch is that thread's own (shca_net_poll_idle), or
 * a thread found its CQ empty within SOFTHCA_NET_ACK_HOLD_US (the engine
 * thread's batch, whose completion the poller is about to see).  The wait
 * is bounded: every empty poll writes what is held first (a receiver that
 * answers nothing waits one poll), so does the next batch on the
 * connection (the peer sends more before the reply: a stream, whose
 * sender waits for its ACKs), a thread that goes to sleep in a
 * completion channel writes it and ends "while a thread polls"
 * (shca_net_acks_out), so does a QP's modify or destroy, after the
 * batch in progress (rdma_disconnect moves the QP to the error state
 * before its DREQ goes, which must not overtake the ACK of the message
 * that the application saw last), and the engine thread's timer writes
 * whatever waited SOFTHCA_NET_ACK_HOLD_US (a thread that stopped polling;
 * net_acks_late).  No thread polling: nothing waits.  IBA 9.7.5.1.2 lets
 * a responder coalesce ACKs; the requester's ACK timeout must be longer
 * than the hold (README).
 */
static __thread bool hold_here;		/* in shca_net_poll_idle's batch */
/* the last empty poll (atomic; starts a cache line, away from the
 * globals before it: every empty poll writes it) */
static uint64_t last_empty __attribute__((aligned(64)));
static struct shca_timer hold_timer;

/* c->lock held; true: c's queue (ACKs only) waits */
static bool acks_hold(struct shca_conn *c)
{
	const struct chunk *k;
	uint64_t now;

	if (!ack_hold_ns || c->want_out || !c->head || c->state != CONN_UP)
		return false;
	now = shca_now_ns();
	if (!hold_here &&
	    now - __atomic_load_n(&last_empty, __ATOMIC_RELAXED) > ack_hold_ns)
		return false;
	/* a second batch before the reply: a stream, not a ping-pong; its
	 * sender waits for these ACKs (its window, SOFTHCA_NET_DEFER) */
	if (c->acks_held)
		return false;
	for (k = c->head; k; k = k->next)
		if (!k->ack || k->off)
			return false;
	c->acks_held = true;
	c->held_at = now;
	__atomic_add_fetch(&n_held, 1, __ATOMIC_RELAXED);
	shca_stat_add(shca_stat_proc(), SHCA_STAT_NET_ACKS_HELD, 1);
	/* against hold_fire: it unlinks the timer, then reads n_held; here
	 * n_held moved, then the timer is read: one of the two sees the
	 * other */
	shca_full_fence();
	/* a quiet engine's check after the pollers' last empty poll writes
	 * it (hold_watch) if they stop: no timer that wakes the engine
	 * thread, on a pinned poller's CPU, while they poll */
	if (!shca_engine_poll_watched() && !shca_timer_armed(&hold_timer))
		shca_timer_arm(&hold_timer, now + ack_hold_ns);
	return true;
}

/*
 * Write the ACKs held since before `before` (every one: UINT64_MAX; else
 * the timer's, counted late).  The oldest hold left, or 0.
 */
static uint64_t acks_out(uint64_t before)
{
	struct shca_conn *c;
	uint64_t oldest = 0;

	if (!__atomic_load_n(&n_held, __ATOMIC_RELAXED))
		return 0;
	pthread_mutex_lock(&conns_lock);
	for (c = conns; c; c = c->next) {
		pthread_mutex_lock(&c->lock);
		if (c->acks_held && c->held_at < before) {
			c->acks_held = false;
			__atomic_sub_fetch(&n_held, 1, __ATOMIC_RELAXED);
			if (c->head && before != UINT64_MAX)
				shca_stat_add(shca_stat_proc(),
					      SHCA_STAT_NET_ACKS_LATE, 1);
			flush_unless_full(c);
		} else if (c->acks_held && (!oldest || c->held_at < oldest)) {
			oldest = c->held_at;
		}
		pthread_mutex_unlock(&c->lock);
	}
	pthread_mutex_unlock(&conns_lock);
	return oldest;
}

/* A QP's modify or destroy: a batch being handed up may have made a
 * completion visible (the one the application acts on) before it holds
 * its ACK at its end; that batch ends first (20 ms at most: the thread
 * running it may wait for a core). */
#define BATCH_WAIT_NS	20000000ull

void shca_net_acks_out(bool asleep)
{
	/* a forked child before its own start: the connections (and
	 * sockets) are the parent's */
	if (!started_here())
		return;
	if (asleep) {
		__atomic_store_n(&last_empty, 0, __ATOMIC_RELAXED);
	} else if (!shca_in_engine() &&
		   __atomic_load_n(&rx_busy, __ATOMIC_ACQUIRE)) {
		uint64_t end = shca_now_ns() + BATCH_WAIT_NS;

		while (__atomic_load_n(&rx_busy, __ATOMIC_ACQUIRE) &&
		       shca_now_ns() < end)
			sched_yield();
	}
	acks_out(UINT64_MAX);
}

/* The engine thread: what waited its time goes. */
static void hold_fire(struct shca_timer *t)
{
	uint64_t oldest;

	shca_full_fence();	/* see acks_hold */
	oldest = acks_out(shca_now_ns() - ack_hold_ns + 1);
	if (oldest)
		shca_timer_arm(t, oldest + ack_hold_ns);
}

/* The engine thread, at the quiet engine's check after the pollers' last
 * empty poll (shca_engine_poll_watch): what they held goes, counted late
 * (they stopped before the next packet on its connection came). */
static void hold_watch(void)
{
	shca_full_fence();	/* see acks_hold */
	acks_out(shca_now_ns() + 1);
}

/*
 * The peer sent something: write what is queued, and with it the requests
 * held for an answer from the peer (shca_net_flush_defer), which this was.
 * On an outgoing connection the peer sends answers only.
 */
static void answered(struct shca_conn *c)
{
	pthread_mutex_lock(&c->lock);
	c->unanswered = 0;
	if (!acks_hold(c))
		flush_unless_full(c);
	pthread_mutex_unlock(&c->lock);
}

/*
 * The run frame (net.h) at c->rbuf + off, whose word said n packets,
 * handed up as its packets: each BTH is written over the 12 bytes before
 * its payload, the end of the payload before it, once that packet is
 * handled.  The frame's bytes when it was whole, 0 when more must come
 * first, -1 when the stream is broken (a run no softhca sends).
 */
static ssize_t deliver_run(struct shca_conn *c, size_t off, uint32_t n,
			   uint64_t *pkts, uint64_t *bytes)
{
	unsigned char *b = c->rbuf + off;
	size_t have = c->rlen - off, total;
	struct shca_bth bth;
	uint32_t plen, i;

	if (n < 1 || n > SHCA_NET_RUN_MAX)
		return -1;
	if (have < SHCA_NET_RUN_HDR)
		return 0;
	memcpy(&plen, b + FRAME_HDR, 4);
	plen = ntohl(plen);
	if (!plen || plen % 4 || plen > SHCA_WIRE_MAX_PMTU)
		return -1;
	total = SHCA_NET_RUN_HDR + (size_t)n * plen;
	if (have < total)
		return 0;
	b += FRAME_HDR + 4;	/* the first BTH */
	memcpy(&bth, b, SHCA_BTH_LEN);
	for (i = 0; i < n; i++) {
		unsigned char *pkt = b + (size_t)i * plen;

		if (i) {
			shca_bth_set_psn(&bth, shca_bth_psn(&bth) + 1);
			memcpy(pkt, &bth, SHCA_BTH_LEN);
		}
		if (pcap)
			shca_pcap_write(pcap, c->addr.dst, c->addr.src, pkt,
					SHCA_BTH_LEN + plen, NULL);
		rx_fn(c, &c->addr, pkt, SHCA_BTH_LEN + plen);
	}
	*pkts += i;
	*bytes += (uint64_t)i * (SHCA_BTH_LEN + plen);
	return (ssize_t)total;
}

/* Cut the stream into frames and hand them up.  false: the stream is
 * broken (a length no IB packet has). */
static bool deliver(struct shca_conn *c)
{
	struct shca_stat_block *s = shca_stat_proc();
	uint64_t pkts = 0, bytes = 0;
	size_t off = 0;
	bool ok = true;

	__atomic_fetch_add(&rx_busy, 1, __ATOMIC_ACQ_REL);

	while (c->rlen - off >= FRAME_HDR) {
		uint32_t len;

		memcpy(&len, c->rbuf + off, FRAME_HDR);
		len = ntohl(len);
		if (shca_hs_is_ctl(len)) {
			enum shca_hs_type t;
			int blen = shca_hs_ctl_body(len, &t), r = -EPROTO;

			if (blen >= 0 &&
			    c->rlen - off - FRAME_HDR < (size_t)blen)
				break;
			if (blen >= 0)
				r = hs_frame(&c, t, c->rbuf + off + FRAME_HDR,
					     (size_t)blen);
			if (r) {
				hs_refused(r == -EACCES ? "wrong secret" :
							  "bad handshake", c);
				ok = false;
				break;
			}
			off += FRAME_HDR + (size_t)blen;
			continue;
		}
		if (c->hs != HS_DONE) {
			/* an IB packet before the proof: nothing of it is
			 * handled, nothing is answered */
			shca_stat_add(s, SHCA_STAT_NET_ADMIT_DROPS, 1);
			hs_refused("a packet before the handshake", c);
			ok = false;
			break;
		}
		if (len & SHCA_NET_RUN) {
			ssize_t r = deliver_run(c, off, len & ~SHCA_NET_RUN,
						&pkts, &bytes);

			if (r < 0) {
				shca_stat_add(s, SHCA_STAT_DROPPED_PKTS, 1);
				shca_dbg("net: run of %u packets: closing",
					 len & ~SHCA_NET_RUN);
				ok = false;
				break;
			}
			if (!r)
				break;
			c->runs = true;
			off += (size_t)r;
			continue;
		}
		if (len < SHCA_BTH_LEN || len > MAX_PKT) {
			shca_stat_add(s, SHCA_STAT_DROPPED_PKTS, 1);
			shca_dbg("net: frame of %u bytes: closing", len);
			ok = false;
			break;
		}
		if (c->rlen - off - FRAME_HDR < len)
			break;
		pkts++;
		bytes += len;
		if (pcap)
			shca_pcap_write(pcap, c->addr.dst, c->addr.src,
					c->rbuf + off + FRAME_HDR, len, NULL);
		rx_fn(c, &c->addr, c->rbuf + off + FRAME_HDR, len);
		off += FRAME_HDR + len;
	}
	shca_stat_add(s, SHCA_STAT_RCVD_PKTS, pkts);
	shca_stat_add(s, SHCA_STAT_RCVD_BYTES, bytes);
	if (off) {
		memmove(c->rbuf, c->rbuf + off, c->rlen - off);
		c->rlen -= off;
	}
	/* the answers to the batch (SHCA_NET_MORE, ACKs coalesced), in one
	 * write: at once, whatever the batch's size (a batch of one packet
	 * is answered as soon as it is handled) */
	answered(c);
	__atomic_fetch_sub(&rx_busy, 1, __ATOMIC_ACQ_REL);
	return ok;
}

static shca_net_drain_fn drain_fn;

void shca_net_set_drain(shca_net_drain_fn fn)
{
	__atomic_store_n(&drain_fn, fn, __ATOMIC_RELEASE);
}

static shca_net_place_fn place_fn;
static shca_net_placed_fn placed_fn;

void shca_net_set_placement(shca_net_place_fn where, shca_net_placed_fn done)
{
	__atomic_store_n(&placed_fn, done, __ATOMIC_RELAXED);
	__atomic_store_n(&place_fn, where, __ATOMIC_RELEASE);
}

void shca_net_expect(struct shca_conn *c, uint32_t qpn)
{
	c->expect = true;
	c->expect_qpn = qpn;
}

#define PLACE_MAX	32		/* frames per recvmsg */
/* Usual reads, after a placement, that may expect none before reads are
 * large again: the end of a WRITE, and what comes before the start of the
 * next (an ACK, a short SEND), keep reads small for the next WRITE. */
#define PLACE_MISSES	4

/*
 * How much a usual read takes after a placement (c->placing): the two
 * frames of the last placement's path MTU that end one WRITE and start
 * the next (its LAST, the next's FIRST), then the next placement; more
 * would take the next WRITE's middles into the buffer, to be copied from
 * there.
 */
static size_t place_gap(const struct shca_conn *c)
{
	return 2 * (FRAME_HDR + HDR_ROOM + (size_t)c->place_mtu);
}
/* From a peer that sends run frames, a read the usual way takes no more
 * than a few of them: the start of a WRITE says where its runs go, and
 * what was read before that is copied (a quarter of each 1 MiB WRITE with
 * reads of RBUF_SIZE; between two namespaces, path MTU 1024) */
#define RUNS_READ	(64 * 1024)

/* Frame j of a placement: its length word and BTH as expected? */
static bool place_match(const unsigned char *h, const struct shca_net_place *p,
			uint32_t j)
{
	struct shca_bth want = p->bth;
	uint32_t be = htonl(SHCA_BTH_LEN + p->mtu);

	shca_bth_set_psn(&want, shca_bth_psn(&p->bth) + j);
	return !memcmp(h, &be, FRAME_HDR) &&
	       !memcmp(h + FRAME_HDR, &want, SHCA_BTH_LEN);
}

/* One non-blocking receive from c into v[n], straight into registered
 * memory: what recvmsg returns. */
static ssize_t recv_placed(struct shca_conn *c, struct iovec *v, size_t n)
{
	struct msghdr mh = { .msg_iov = v, .msg_iovlen = n };
	ssize_t got;

	SHCA_DMA_BEGIN();
	do {
		got = recvmsg(c->fd, &mh, MSG_DONTWAIT);
	} while (got < 0 && errno == EINTR);
	SHCA_DMA_END();
	return got;
}

/* The run header at the start of c's buffer: is it the run p expects
 * (its first BTH, no more packets than expected, p->mtu each)?  *n: its
 * packets. */
static bool run_expected(const struct shca_conn *c,
			 const struct shca_net_place *p, uint32_t *n)
{
	struct shca_bth bth;
	uint32_t word, plen;

	memcpy(&word, c->rbuf, 4);
	memcpy(&plen, c->rbuf + FRAME_HDR, 4);
	memcpy(&bth, c->rbuf + FRAME_HDR + 4, SHCA_BTH_LEN);
	word = ntohl(word);
	*n = word & ~SHCA_NET_RUN;
	return (word & (SHCA_HS_CTL | SHCA_NET_RUN)) == SHCA_NET_RUN &&
	       *n >= 1 && *n <= p->count && *n <= SHCA_NET_RUN_MAX &&
	       ntohl(plen) == p->mtu &&
	       !memcmp(&bth, &p->bth, SHCA_BTH_LEN);
}

/*
 * The run frame (net.h) that the transport expects, received straight to
 * its place (read_placed): its header into the buffer, with one recvmsg,
 * and its payloads to p->dst, as much as has come.  Payload bytes already
 * buffered are copied there.  If the run came only in part, the buffer
 * is left holding a run frame of the packets still to come (the PSN moved
 * on) and the bytes of the first of them.  What is not the expected run
 * (another frame; a run of more packets or for another PSN) is put back
 * in the buffer, as if read the usual way: what it overwrote at p->dst is
 * inside the WRITE or READ in progress, which its own packets write
 * again.  1, 0 or -1 as read_placed; *good: the packets placed.
 */
static int read_run(struct shca_conn *c, const struct shca_net_place *p,
		    uint32_t *good)
{
	const size_t hdr = SHCA_NET_RUN_HDR;
	size_t pre = c->rlen, have = pre > hdr ? pre - hdr : 0, cap, hb, d;
	size_t total, kept;
	struct shca_bth bth;
	struct iovec v[2];
	uint32_t word, n;
	ssize_t got;
	int nv = 0;

	*good = 0;
	/* the run's own bytes when its header is in; else as many as a
	 * softhca sender puts in one (what comes after them is copied back
	 * to the buffer) */
	if (pre >= hdr) {
		if (!run_expected(c, p, &n))
			return 0;
		cap = (size_t)n * p->mtu;
	} else {
		cap = MIN((size_t)MIN(p->count, (uint32_t)SHCA_NET_RUN_MAX) *
				  p->mtu,
			  (size_t)SHCA_NET_RUN_BYTES);
	}
	if (have >= cap || pre + cap > RBUF_SIZE - hdr)
		return 0;
	if (pre < hdr) {
		v[nv].iov_base = c->rbuf + pre;
		v[nv++].iov_len = hdr - pre;
	}
	v[nv].iov_base = p->dst + have;
	v[nv++].iov_len = cap - have;
	got = recv_placed(c, v, (size_t)nv);
	if (got < 0 && errno == EAGAIN) {
		c->expect = true;	/* nothing came: still expected */
		return 0;
	}
	if (got <= 0)
		return -1;
	/* the header's bytes in the buffer, and d bytes at p->dst + have */
	hb = pre < hdr ? pre + MIN((size_t)got, hdr - pre) : pre;
	d = (size_t)got - (hb - pre);
	c->rlen = hb;
	if (hb < hdr) {
		c->expect = true;	/* not even the header yet */
		return 1;
	}
	if (!run_expected(c, p, &n)) {
		/* not the run expected: the bytes go back, in order */
		SHCA_DMA_BEGIN();
		memcpy(c->rbuf + c->rlen, p->dst + have, d);
		SHCA_DMA_END();
		c->rlen += d;
		return 1;
	}
	c->runs = true;
	SHCA_DMA_BEGIN();
	memcpy(p->dst, c->rbuf + hdr, have);	/* buffered before */
	total = have + d;
	if (total >= (size_t)n * p->mtu) {
		/* whole: what came after it is the next frame's */
		*good = n;
		kept = total - (size_t)n * p->mtu;
		memcpy(c->rbuf, p->dst + (size_t)n * p->mtu, kept);
		c->rlen = kept;
	} else {
		/* in part: a run of the rest, and what came of it */
		*good = (uint32_t)(total / p->mtu);
		kept = total - (size_t)*good * p->mtu;
		word = htonl(SHCA_NET_RUN | (n - *good));
		memcpy(c->rbuf, &word, 4);
		memcpy(&bth, c->rbuf + FRAME_HDR + 4, SHCA_BTH_LEN);
		shca_bth_set_psn(&bth, shca_bth_psn(&bth) + *good);
		memcpy(c->rbuf + FRAME_HDR + 4, &bth, SHCA_BTH_LEN);
		memcpy(c->rbuf + hdr, p->dst + (size_t)*good * p->mtu, kept);
		c->rlen = hdr + kept;
		if (!*good)
			c->expect = true;	/* still expected */
	}
	SHCA_DMA_END();
	return 1;
}

/* Is the next frame on c a run frame (net.h)?  The word buffered says;
 * without it, whether the peer has been sending runs. */
static bool run_next(const struct shca_conn *c)
{
	uint32_t word;

	if (c->rlen < FRAME_HDR)
		return c->runs;
	memcpy(&word, c->rbuf, 4);
	word = ntohl(word);
	return (word & (SHCA_HS_CTL | SHCA_NET_RUN)) == SHCA_NET_RUN;
}

/*
 * Receive the frames the transport expects straight to their place
 * (net.h).  The bytes already buffered are the start of the first frame.
 * 1: something was received, 0: not now (nothing expected, the buffered
 * bytes are something else, nothing to read), -1: the connection is gone.
 * Whatever place_fn said, placed_fn hears once, after the last byte of
 * p.dst touched here (the transport holds the memory in between).
 */
static int read_placed(struct shca_conn *c)
{
	enum { FL = FRAME_HDR + SHCA_BTH_LEN };
	unsigned char hb[PLACE_MAX][FL];
	struct iovec v[2 * PLACE_MAX];
	struct shca_net_place p;
	size_t pre = c->rlen, fsz, total, pos;
	uint32_t k, j, good = 0;
	ssize_t n;
	int first, ret = 1;

	c->expect = false;
	memset(&p, 0, sizeof(p));
	__atomic_load_n(&place_fn, __ATOMIC_ACQUIRE)(c, c->expect_qpn, &p);
	k = MIN(p.count, (uint32_t)PLACE_MAX);
	fsz = FL + (size_t)p.mtu;
	if (p.count >= 2 && run_next(c)) {
		ret = read_run(c, &p, &good);
		goto placed;
	}
	if (k < 2 || k * fsz > RBUF_SIZE || pre >= fsz ||
	    (pre >= FL && !place_match(c->rbuf, &p, 0))) {
		ret = 0;
		goto done;
	}
	for (j = 0; j < k; j++) {
		v[2 * j].iov_base = hb[j];
		v[2 * j].iov_len = FL;
		v[2 * j + 1].iov_base = p.dst + (size_t)j * p.mtu;
		v[2 * j + 1].iov_len = p.mtu;
	}
	/* what is buffered is the start of the first frame: it is not
	 * taken out of the buffer before the rest has come (EAGAIN leaves
	 * it there, and p.dst untouched) */
	first = pre >= FL;
	v[first].iov_base = (char *)v[first].iov_base + (pre - first * FL);
	v[first].iov_len -= pre - first * FL;
	n = recv_placed(c, v + first, 2 * k - (size_t)first);
	if (n < 0 && errno == EAGAIN) {
		ret = 0;		/* the buffered bytes are still there */
		/* nothing came yet: what comes next is still expected (else
		 * the next read takes RBUF_SIZE the usual way, copied) */
		c->expect = true;
		goto done;
	}
	if (n <= 0) {
		ret = -1;
		goto done;
	}
	memcpy(hb[0], c->rbuf, MIN(pre, (size_t)FL));
	if (pre > FL) {
		SHCA_DMA_BEGIN();
		memcpy(p.dst, c->rbuf + FL, pre - FL);
		SHCA_DMA_END();
	}
	total = pre + (size_t)n;
	c->rlen = 0;
	while (good < k && total >= (good + 1) * fsz &&
	       place_match(hb[good], &p, good))
		good++;
	/* the rest of the stream, whatever it is, as if read the usual way */
	SHCA_DMA_BEGIN();
	for (pos = good * fsz, j = good; pos < total; j++) {
		size_t h = MIN((size_t)FL, total - pos), d;

		memcpy(c->rbuf + c->rlen, hb[j], h);
		c->rlen += h;
		pos += h;
		d = MIN((size_t)p.mtu, total - pos);
		memcpy(c->rbuf + c->rlen, p.dst + (size_t)j * p.mtu, d);
		c->rlen += d;
		pos += d;
	}
	SHCA_DMA_END();
placed:
	if (good) {
		c->placing = PLACE_MISSES;
		c->place_mtu = p.mtu;
		shca_stat_add(shca_stat_proc(), SHCA_STAT_NET_PLACED_PKTS, good);
		shca_stat_add(shca_stat_proc(), SHCA_STAT_RCVD_PKTS, good);
		shca_stat_add(shca_stat_proc(), SHCA_STAT_RCVD_BYTES,
			      (uint64_t)good * (SHCA_BTH_LEN + p.mtu));
	}
done:
	__atomic_load_n(&placed_fn, __ATOMIC_RELAXED)(
		c, c->expect_qpn, shca_bth_psn(&p.bth), good);
	return ret;
}

static void conn_read(struct shca_conn *c)
{
	int budget = 64;

	if (!c->rbuf) {
		c->rbuf = malloc(RBUF_SIZE);
		if (!c->rbuf) {
			conn_close(c);
			return;
		}
	}
	while (budget--) {
		size_t want;
		ssize_t n;

		if (c->expect && !pcap &&
		    __atomic_load_n(&place_fn, __ATOMIC_ACQUIRE)) {
			int r = read_placed(c);

			if (r < 0) {
				conn_close(c);
				return;
			}
			if (r > 0) {
				__atomic_fetch_add(&c->activity, 1,
						   __ATOMIC_RELAXED);
				if (!c->rlen)
					answered(c);
				if ((c->rlen && !deliver(c)) || c->fd < 0) {
					conn_close(c);
					return;
				}
				continue;
			}
			if (c->expect)
				return;	/* EAGAIN: still expected */
		}
		want = c->placing ? MIN(RBUF_SIZE - c->rlen, place_gap(c)) :
		       c->runs	  ? MIN(RBUF_SIZE - c->rlen, RUNS_READ) :
				    RBUF_SIZE - c->rlen;
		n = recv(c->fd, c->rbuf + c->rlen, want, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return;
		if (n <= 0) {
			conn_close(c);
			return;
		}
		c->rlen += (size_t)n;
		__atomic_fetch_add(&c->activity, 1, __ATOMIC_RELAXED);
		if (!deliver(c) || c->fd < 0) {
			conn_close(c);
			return;
		}
		if (!c->expect && c->placing)
			c->placing--;
		/* a short read emptied the socket: no recv for EAGAIN (epoll
		 * says when more comes) */
		if ((size_t)n < want && !c->expect)
			return;
	}
}

static void conn_event(int fd, uint32_t events, void *arg)
{
	struct shca_conn *c = arg;

	(void)fd;
	if (events & EPOLLOUT) {
		pthread_mutex_lock(&c->lock);
		if (c->state == CONN_CONNECTING) {
			int err = 0;
			socklen_t l = sizeof(err);

			getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &l);
			if (err) {
				pthread_mutex_unlock(&c->lock);
				shca_dbg("net: connect to port %u: %s",
					 sa_port(&c->peer), strerror(err));
				conn_close(c);
				return;
			}
			if (c->hs == HS_NONE) {
				/* connected: the handshake first; what is
				 * queued waits for WELCOME (no packet before
				 * the proof) */
				fill_local(c);
				err = hs_send_hello(c);
				c->want_out = false;
				shca_engine_watch_events(c->fd, EPOLLIN);
				pthread_mutex_unlock(&c->lock);
				if (err)
					conn_close(c);
				return;
			}
		}
		flush_locked(c);
		pthread_mutex_unlock(&c->lock);
		if (__atomic_load_n(&drain_fn, __ATOMIC_ACQUIRE))
			__atomic_load_n(&drain_fn, __ATOMIC_ACQUIRE)(c);
	}
	if (events & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
		enum conn_state st;

		/* a sender that met a write error moves it to CLOSING */
		pthread_mutex_lock(&c->lock);
		st = c->state;
		pthread_mutex_unlock(&c->lock);
		if (st == CONN_CLOSING || (events & EPOLLERR &&
					   !(events & EPOLLIN))) {
			/* a write failed (the peer is gone): what it sent
			 * before it went is still handed up, the ACK of its
			 * last message perhaps */
			if (st == CONN_CLOSING && (events & EPOLLIN))
				conn_read(c);
			conn_close(c);
			return;
		}
		conn_read(c);
	}
}

/* A connection object, not listed yet: its caller fills in what other
 * threads look at (peer, addr, incoming) and then publishes it. */
static struct shca_conn *conn_alloc(void)
{
	struct shca_conn *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	__atomic_store_n(&net_used, true, __ATOMIC_RELAXED);
	pthread_mutex_init(&c->lock, NULL);
	c->fd = -1;
	/* set once: the engine reads it when the timer runs */
	c->stall_timer.fn = stall_fire;
	return c;
}

/* conns_lock held. */
static void conn_publish(struct shca_conn *c)
{
	c->next = conns;
	conns = c;
}

/* An object for an accepted socket: a recycled one (its generation goes
 * on from where it was) or a new one.  Engine thread. */
static struct shca_conn *conn_alloc_incoming(void)
{
	struct shca_conn *c;
	uint32_t gen;

	pthread_mutex_lock(&conns_lock);
	c = spare;
	if (c)
		spare = c->next;
	pthread_mutex_unlock(&conns_lock);
	if (!c)
		return conn_alloc();
	gen = c->gen;
	pthread_mutex_destroy(&c->lock);
	memset(c, 0, sizeof(*c));
	pthread_mutex_init(&c->lock, NULL);
	c->gen = gen;
	c->fd = -1;
	c->stall_timer.fn = stall_fire;
	return c;
}

static void listener_event(int fd, uint32_t events, void *arg)
{
	struct shca_listen_backoff *b = arg;

	(void)events;
	for (;;) {
		struct sockaddr_storage ss;
		socklen_t len = sizeof(ss);
		struct shca_conn *c;
		int cfd, one = 1;

		cfd = accept4(fd, (struct sockaddr *)&ss, &len,
			      SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (cfd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			/* out of fds: pause, or epoll wakes us at once */
			if (shca_listen_failed(b, errno))
				shca_stat_add(shca_stat_proc(),
					      SHCA_STAT_NET_ACCEPT_BACKOFFS, 1);
			return;
		}
		shca_listen_accepted(b);
		if (max_conns && n_accepted >= max_conns) {
			/* refused at once: the backlog drains, nothing of
			 * the stranger's stays */
			close(cfd);
			shca_stat_add(shca_stat_proc(),
				      SHCA_STAT_NET_CONNS_REFUSED, 1);
			shca_warn_once("net: %lu connections accepted: "
				       "refusing more (SOFTHCA_NET_MAX_CONNS)",
				       max_conns);
			continue;
		}
		setsockopt(cfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		c = conn_alloc_incoming();
		if (!c) {
			close(cfd);
			continue;
		}
		c->incoming = true;
		c->accepted = true;
		n_accepted++;
		c->fd = cfd;
		c->state = CONN_UP;	/* answers only, after HS_DONE */
		c->hs = HS_WAIT_HELLO;
		memcpy(&c->peer, &ss, sizeof(ss));
		c->peer_len = len;
		gid_from_sa(c->addr.dst, &ss);
		c->addr.src_port = sa_port(&ss);
		fill_local(c);
		hs_arm(c);
		pthread_mutex_lock(&conns_lock);
		conn_publish(c);
		pthread_mutex_unlock(&conns_lock);
		if (shca_engine_watch(cfd, conn_event, c)) {
			c->state = CONN_CLOSING;
			conn_close(c);
			continue;
		}
		life_start(c, hello_ns);
	}
}

/* One datagram: where it came from, and where to (IP_PKTINFO). */
static void udp_event(int fd, uint32_t events, void *arg)
{
	struct shca_stat_block *s = shca_stat_proc();
	bool group = fd == __atomic_load_n(&mcast_fd, __ATOMIC_ACQUIRE);
	unsigned char buf[MAX_PKT];

	(void)events;
	(void)arg;
	for (;;) {
		union {
			struct cmsghdr h;
			unsigned char b[256];
		} ctl;
		struct sockaddr_storage from;
		struct shca_net_addr addr;
		struct iovec v = { buf, sizeof(buf) };
		struct msghdr mh = { .msg_name = &from,
				     .msg_namelen = sizeof(from),
				     .msg_iov = &v,
				     .msg_iovlen = 1,
				     .msg_control = ctl.b,
				     .msg_controllen = sizeof(ctl.b) };
		struct cmsghdr *cm;
		ssize_t n = recvmsg(fd, &mh, MSG_DONTWAIT);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return;
		}
		memset(&addr, 0, sizeof(addr));
		gid_from_sa(addr.src, &from);
		addr.src_port = sa_port(&from);
		for (cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm)) {
			if (cm->cmsg_level == IPPROTO_IP &&
			    cm->cmsg_type == IP_PKTINFO) {
				struct in_pktinfo pi;

				memcpy(&pi, CMSG_DATA(cm), sizeof(pi));
				addr.dst[10] = addr.dst[11] = 0xff;
				memcpy(addr.dst + 12, &pi.ipi_addr, 4);
			} else if (cm->cmsg_level == IPPROTO_IPV6 &&
				   cm->cmsg_type == IPV6_PKTINFO) {
				struct in6_pktinfo pi;

				memcpy(&pi, CMSG_DATA(cm), sizeof(pi));
				memcpy(addr.dst, &pi.ipi6_addr, 16);
			}
		}
		if (!group && !shca_net_addr_in_use(addr.dst)) {
			/* to an address of this host that this process does
			 * not use (listen.c): not for us */
			shca_stat_add(s, SHCA_STAT_NET_ADMIT_DROPS, 1);
			continue;
		}
		if (!(mh.msg_flags & MSG_TRUNC) && !group) {
			struct shca_hs_challenge ch;

			if (!shca_hs_challenge_parse(buf, (size_t)n, &ch)) {
				hs_challenge(&addr, &ch);
				continue;
			}
		}
		if ((mh.msg_flags & MSG_TRUNC) || n < SHCA_BTH_LEN) {
			shca_stat_add(s, SHCA_STAT_DROPPED_PKTS, 1);
			continue;
		}
		__atomic_store_n(&net_used, true, __ATOMIC_RELAXED);
		shca_stat_add(s, SHCA_STAT_RCVD_PKTS, 1);
		shca_stat_add(s, SHCA_STAT_RCVD_BYTES, (uint64_t)n);
		if (pcap)
			shca_pcap_write(pcap, addr.src, addr.dst, buf,
					(size_t)n, NULL);
		rx_fn(NULL, &addr, buf, (size_t)n);
	}
}

static void want_pktinfo(int fd)
{
	int one = 1;

	setsockopt(fd, IPPROTO_IP, IP_PKTINFO, &one, sizeof(one));
	setsockopt(fd, IPPROTO_IPV6, IPV6_RECVPKTINFO, &one, sizeof(one));
}

bool shca_net_active(void)
{
	return __atomic_load_n(&net_used, __ATOMIC_RELAXED) &&
	       started_here();
}

/*
 * The poller does the net path's receive work itself when nobody else is
 * (shca_engine_progress), then lets other threads run now and then: an
 * engine thread (ours, woken for what the poller just did, or a peer
 * process's that must place a WRITE its application watches in memory)
 * would otherwise wait behind two busy threads on two cores, for a time
 * slice if the poller goes on to spin on its memory (ib_write_lat: 1-2%
 * of round trips took 2-4 ms when only an empty poll yielded, and most
 * runs had a maximum of 2-4 ms with no yield at all).  Where the poller
 * may run on one CPU only (taskset), it shares that CPU with its own
 * engine thread: it yields after every empty poll.  So does a poller
 * that could not do the engine's work (another thread is the engine
 * right now, or only the engine thread may be: shca_engine_poll_empty's
 * -EBUSY, -EAGAIN): what it waits for waits for that thread.  Elsewhere
 * at most every SOFTHCA_NET_YIELD_US: a yield after every empty poll (two
 * in a round trip) made a ping-pong a third slower on average between
 * two namespaces than one every 200-1000 us, with no better tail
 * (README, "The poller's yield").
 */
static __thread uint64_t yielded_at;

void shca_net_poll_idle(void)
{
	uint64_t now;
	int r;

	if (!shca_net_active())
		return;
	now = shca_now_ns();
	if (ack_hold_ns) {	/* held ACKs on (the default) */
		acks_out(UINT64_MAX);
		__atomic_store_n(&last_empty, now, __ATOMIC_RELAXED);
	}
	hold_here = true;
	r = shca_engine_poll_empty(now);
	hold_here = false;
	if (r < 0) {
		shca_stat_add(shca_stat_proc(), SHCA_STAT_NET_POLL_WAITS, 1);
		sched_yield();
	} else if (now - yielded_at >= yield_ns ||
		   !shca_thread_cpus_many(now)) {
		yielded_at = now;
		shca_stat_add(shca_stat_proc(), SHCA_STAT_NET_POLL_YIELDS, 1);
		sched_yield();
	}
}

int shca_net_start(shca_net_rx_fn fn)
{
	static pthread_mutex_t start_lock = PTHREAD_MUTEX_INITIALIZER;
	const struct shca_slot *s;
	int ret = 0;

	pthread_mutex_lock(&start_lock);
	if (started_here())
		goto out;
	s = shca_slot_get();
	if (!s) {
		ret = -EADDRINUSE;
		goto out;
	}
	ret = shca_engine_start();
	if (ret)
		goto out;
	if (!started_pid) {
		faults_parse();
		pcap_open();
		limits_read();
	} else {
		/* a forked child: the parent's sockets and connections are
		 * not ours */
		struct shca_conn *c;

		for (c = conns; c; c = c->next) {
			c->fd = -1;
			c->state = CONN_DOWN;
			c->hs = c->incoming ? HS_WAIT_HELLO : HS_NONE;
			c->head = c->tail = NULL;
			c->held = NULL;
			c->queued = 0;
			c->rbuf = NULL;
			c->rlen = 0;
			c->accepted = false;
			c->acks_held = false;
		}
		n_accepted = 0;
		/* a parent's thread may have held pool_lock at fork */
		pthread_mutex_init(&pool_lock, NULL);
		memset(pools, 0, sizeof(pools));
		mcast_fd = mcast_send4 = mcast_send6 = -1;
		shca_net_listen_forget();
	}
	memset(&hold_timer, 0, sizeof(hold_timer));
	hold_timer.fn = hold_fire;
	n_held = 0;
	if (ack_hold_ns)
		shca_engine_poll_watch(hold_watch, ack_hold_ns);
	rx_fn = fn;
	want_pktinfo(s->udp_fd);
	/* UD bursts (ib_send_bw -c UD) overran the default receive buffer;
	 * the kernel caps this at net.core.rmem_max */
	setsockopt(s->udp_fd, SOL_SOCKET, SO_RCVBUF, &(int){ 4 << 20 },
		   sizeof(int));
	/* the listeners are per address, non-blocking (listen.c): a
	 * connection that went away again must not leave the engine asleep
	 * in accept4 */
	shca_net_listen_start(listener_event);
	ret = shca_engine_watch(s->udp_fd, udp_event, NULL);
	if (!ret)	/* what was set up above, for started_here */
		__atomic_store_n(&started_pid, shca_getpid(),
				 __ATOMIC_RELEASE);
out:
	pthread_mutex_unlock(&start_lock);
	return ret;
}

/*
 * The connection to (gid, port): the one there is, or a new one, filled
 * in before other threads can see it; looked up and listed under one
 * hold of conns_lock, so two threads asking at once get the same one.
 */
struct shca_conn *shca_net_conn_get(const uint8_t sgid[16],
				     const uint8_t gid[16], uint16_t port,
				     unsigned int ifindex)
{
	static const uint8_t zero[16];
	struct shca_conn *c, *fresh = conn_alloc();

	if (sgid && !memcmp(sgid, zero, 16))
		sgid = NULL;
	if (fresh) {
		fresh->peer_len = sa_from_gid(&fresh->peer, gid, port,
					      ifindex);
		memcpy(fresh->addr.dst, gid, 16);
		if (sgid) {
			memcpy(fresh->addr.src, sgid, 16);
			fresh->bound = true;
		}
	}
	pthread_mutex_lock(&conns_lock);
	for (c = conns; c; c = c->next) {
		struct conn_ident id;

		conn_ident(c, &id);
		if (!id.incoming && !memcmp(id.addr.dst, gid, 16) &&
		    id.port == port &&
		    (!sgid || (id.bound && !memcmp(id.addr.src, sgid, 16))))
			break;
	}
	if (!c && fresh) {
		conn_publish(fresh);
		c = fresh;
		fresh = NULL;
	}
	pthread_mutex_unlock(&conns_lock);
	if (fresh) {
		pthread_mutex_destroy(&fresh->lock);
		free(fresh);
	}
	return c;
}

/* ------------------------------------------------------------------ */
/* Datagrams                                                           */

static bool gid_is_mcast(const uint8_t gid[16])
{
	return gid_is_v4(gid) ? (gid[12] & 0xf0) == 0xe0 : gid[0] == 0xff;
}

/*
 * The socket that sends to IPv4 or IPv6 groups: no loopback, since this
 * host's members got their copy through the host table (the same-host
 * path), and a second one would be a duplicate.  The interface is chosen
 * per datagram (mcast_out_if): threads of devices on several interfaces
 * share the socket.
 */
static int mcast_sender(bool v4)
{
	int *fdp = v4 ? &mcast_send4 : &mcast_send6;
	int zero = 0, fd = __atomic_load_n(fdp, __ATOMIC_ACQUIRE);

	if (fd >= 0)
		return fd;
	fd = socket(v4 ? AF_INET : AF_INET6,
		    SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	if ((v4 ? setsockopt(fd, IPPROTO_IP, IP_MULTICAST_LOOP, &zero,
			     sizeof(zero)) :
		  setsockopt(fd, IPPROTO_IPV6, IPV6_MULTICAST_LOOP, &zero,
			     sizeof(zero)))) {
		int e = errno;

		close(fd);
		errno = e;
		return -1;
	}
	if (!__atomic_compare_exchange_n(fdp, &(int){ -1 }, fd, false,
					 __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
		close(fd);
		fd = __atomic_load_n(fdp, __ATOMIC_ACQUIRE);
	}
	return fd;
}

union mcast_ctl {
	struct cmsghdr h;
	unsigned char b[CMSG_SPACE(sizeof(struct in6_pktinfo))];
};

/*
 * Send a datagram to a group out of interface ifindex (the device's),
 * whatever the routes say: a namespace with only its veth has no route to
 * 224.0.0.0/4 or ff00::/8, and sendmsg would fail with ENETUNREACH.
 */
static void mcast_out_if(struct msghdr *mh, union mcast_ctl *ctl, bool v4,
			 unsigned int ifindex)
{
	struct cmsghdr *cm;

	if (!ifindex)
		return;
	memset(ctl, 0, sizeof(*ctl));
	mh->msg_control = ctl->b;
	if (v4) {
		struct in_pktinfo pi = { .ipi_ifindex = (int)ifindex };

		mh->msg_controllen = CMSG_SPACE(sizeof(pi));
		cm = CMSG_FIRSTHDR(mh);
		cm->cmsg_level = IPPROTO_IP;
		cm->cmsg_type = IP_PKTINFO;
		cm->cmsg_len = CMSG_LEN(sizeof(pi));
		memcpy(CMSG_DATA(cm), &pi, sizeof(pi));
	} else {
		struct in6_pktinfo pi = { .ipi6_ifindex = ifindex };

		mh->msg_controllen = CMSG_SPACE(sizeof(pi));
		cm = CMSG_FIRSTHDR(mh);
		cm->cmsg_level = IPPROTO_IPV6;
		cm->cmsg_type = IPV6_PKTINFO;
		cm->cmsg_len = CMSG_LEN(sizeof(pi));
		memcpy(CMSG_DATA(cm), &pi, sizeof(pi));
	}
}

int shca_net_sendto(const uint8_t gid[16], uint16_t port,
		    unsigned int ifindex, const void *hdr, size_t hlen,
		    const struct iovec *pl, int npl)
{
	struct iovec v[SHCA_MAX_NET_IOV + 2];
	struct sockaddr_storage ss;
	union mcast_ctl ctl;
	struct msghdr mh;
	const struct shca_slot *s = shca_slot_get();
	size_t plen = 0;
	bool mcast = gid_is_mcast(gid);
	int fd, i, n = 0, copies = 1;

	if (!s || npl > SHCA_MAX_NET_IOV)
		return -EINVAL;
	v[n].iov_base = (void *)hdr;
	v[n++].iov_len = hlen;
	for (i = 0; i < npl; i++) {
		v[n++] = pl[i];
		plen += pl[i].iov_len;
	}
	if (shca_wire_pad(plen)) {
		v[n].iov_base = (void *)pad_zero;
		v[n++].iov_len = shca_wire_pad(plen);
	}
	fd = mcast ? mcast_sender(gid_is_v4(gid)) : s->udp_fd;
	if (fd < 0)
		return -errno;
	memset(&mh, 0, sizeof(mh));
	mh.msg_name = &ss;
	mh.msg_namelen = sa_from_gid(&ss, gid,
				     mcast ? SHCA_NET_MCAST_PORT : port,
				     ifindex);
	if (!mcast && ss.ss_family == AF_INET) {
		/* the slot's socket is IPv6: reach IPv4 as mapped */
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;

		memset(s6, 0, sizeof(*s6));
		s6->sin6_family = AF_INET6;
		s6->sin6_port = htons(port);
		memcpy(&s6->sin6_addr, gid, 16);
		mh.msg_namelen = sizeof(*s6);
	}
	mh.msg_iov = v;
	mh.msg_iovlen = (size_t)n;
	if (mcast)
		mcast_out_if(&mh, &ctl, gid_is_v4(gid), ifindex);
	if (pcap) {
		uint8_t src[16] = { 0 };

		trace(src, gid, hdr, hlen, pl, npl);
	}
	if (faults.on) {
		if (fault_roll(faults.drop))
			return 0;
		if (fault_roll(faults.dup))
			copies = 2;
	}
	while (copies--) {
		int r;

		SHCA_DMA_BEGIN();	/* the datagram's payload */
		r = sendmsg(fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL);
		SHCA_DMA_END();
		if (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
			return -errno;
		count_sent(1, hlen + plen);
	}
	return 0;
}

struct mcast_join {
	uint8_t gid[16];
	unsigned int ifindex;
	int refs;
	struct mcast_join *next;
};

static struct mcast_join *joins;
static pid_t joins_pid;			/* the process the joins are of */
static pthread_mutex_t joins_lock = PTHREAD_MUTEX_INITIALIZER;

/*
 * The socket on which this process receives from every group it joined,
 * IPv4 and IPv6: port 4791 on any address.  Every process of the host
 * that has a QP attached binds the port (SO_REUSEADDR) and the kernel
 * gives each a copy of a group's datagram; each hands it to its own QPs
 * (ud_receive).  A socket gets the groups it joined itself on the
 * interfaces it joined them on, not those of the other processes
 * (IP_MULTICAST_ALL off).
 */
static int mcast_socket(void)
{
	struct sockaddr_in6 sa;
	int fd = __atomic_load_n(&mcast_fd, __ATOMIC_ACQUIRE), one = 1, zero = 0;

	if (fd >= 0)
		return fd;
	fd = socket(AF_INET6, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
	setsockopt(fd, IPPROTO_IP, IP_MULTICAST_ALL, &zero, sizeof(zero));
	setsockopt(fd, IPPROTO_IPV6, IPV6_MULTICAST_ALL, &zero, sizeof(zero));
	/* a burst to the group must not overrun it (capped at rmem_max) */
	setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &(int){ 4 << 20 }, sizeof(int));
	want_pktinfo(fd);
	memset(&sa, 0, sizeof(sa));
	sa.sin6_family = AF_INET6;
	sa.sin6_port = htons(SHCA_NET_MCAST_PORT);
	sa.sin6_addr = in6addr_any;
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa))) {
		int e = errno;

		close(fd);
		return -e;
	}
	/* known before the engine can see a datagram on it: udp_event
	 * tells the group's datagrams from unicast ones by this fd */
	__atomic_store_n(&mcast_fd, fd, __ATOMIC_RELEASE);
	if (shca_engine_watch(fd, udp_event, NULL)) {
		int e = errno;

		__atomic_store_n(&mcast_fd, -1, __ATOMIC_RELEASE);
		close(fd);
		return -e;
	}
	return fd;
}

static int mcast_member(const uint8_t gid[16], unsigned int ifindex,
			bool join)
{
	int fd = mcast_socket();

	if (fd < 0)
		return fd;
	if (gid_is_v4(gid)) {
		struct ip_mreqn m;

		memset(&m, 0, sizeof(m));
		memcpy(&m.imr_multiaddr, gid + 12, 4);
		m.imr_ifindex = (int)ifindex;
		if (setsockopt(fd, IPPROTO_IP,
			       join ? IP_ADD_MEMBERSHIP : IP_DROP_MEMBERSHIP,
			       &m, sizeof(m)))
			return -errno;
	} else {
		struct ipv6_mreq m;

		memcpy(&m.ipv6mr_multiaddr, gid, 16);
		m.ipv6mr_interface = ifindex;
		if (setsockopt(fd, IPPROTO_IPV6,
			       join ? IPV6_JOIN_GROUP : IPV6_LEAVE_GROUP, &m,
			       sizeof(m)))
			return -errno;
	}
	return 0;
}

int shca_net_mcast_join(const uint8_t gid[16], unsigned int ifindex)
{
	struct mcast_join *j;
	int ret = 0;

	if (!gid_is_mcast(gid))
		return 0;
	pthread_mutex_lock(&joins_lock);
	if (joins_pid != shca_getpid()) {
		/* a forked child: the parent's memberships were on the
		 * parent's socket (shca_net_start forgot it) */
		while ((j = joins)) {
			joins = j->next;
			free(j);
		}
		joins_pid = shca_getpid();
	}
	for (j = joins; j; j = j->next)
		if (!memcmp(j->gid, gid, 16) && j->ifindex == ifindex)
			break;
	if (j) {
		j->refs++;
	} else {
		ret = mcast_member(gid, ifindex, true);
		j = ret ? NULL : calloc(1, sizeof(*j));
		if (j) {
			memcpy(j->gid, gid, 16);
			j->ifindex = ifindex;
			j->refs = 1;
			j->next = joins;
			joins = j;
		}
	}
	pthread_mutex_unlock(&joins_lock);
	if (ret)
		shca_warn("net: joining a multicast group on port %d: %s "
			  "(datagrams from other hosts are not received)",
			  SHCA_NET_MCAST_PORT, strerror(-ret));
	return ret;
}

void shca_net_mcast_leave(const uint8_t gid[16], unsigned int ifindex)
{
	struct mcast_join **pp = &joins, *j = NULL;

	pthread_mutex_lock(&joins_lock);
	/* (a forked child's list is the parent's: nothing of it is ours) */
	if (joins_pid == shca_getpid())
		for (pp = &joins; (j = *pp); pp = &j->next)
			if (!memcmp(j->gid, gid, 16) && j->ifindex == ifindex)
				break;
	if (j && !--j->refs) {
		*pp = j->next;
		mcast_member(gid, ifindex, false);
		free(j);
	}
	pthread_mutex_unlock(&joins_lock);
}

/* ------------------------------------------------------------------ */
/* Closing a connection that sends invalid keys (net/keyguard.c)       */

void shca_net_conn_peer(struct shca_conn *c, uint8_t gid[16],
			uint16_t *port)
{
	pthread_mutex_lock(&c->lock);
	memcpy(gid, c->addr.dst, 16);
	*port = sa_port(&c->peer);
	pthread_mutex_unlock(&c->lock);
}

/*
 * Engine thread (the receive side): shut c down now, as a failed write
 * does; the engine closes it on the hang-up.  The answers already made
 * (the NAKs of the requests that were carried out) go first, as far as
 * the socket takes them.  Until then nothing more that arrived on it is
 * carried out (shca_net_conn_aborted), the rest of the batch being read
 * included.  A requester here that uses the same connection opens a new
 * one with its next send, as after any reset.
 */
void shca_net_conn_abort(struct shca_conn *c)
{
	pthread_mutex_lock(&c->lock);
	c->key_abort = true;
	flush_locked(c);
	conn_fail(c);
	pthread_mutex_unlock(&c->lock);
}

/* Engine thread: was c aborted, and is it still that connection? */
bool shca_net_conn_aborted(struct shca_conn *c)
{
	bool ret;

	if (!c->key_abort)
		return false;
	pthread_mutex_lock(&c->lock);
	ret = c->state == CONN_CLOSING;
	if (!ret)
		c->key_abort = false;	/* open again since */
	pthread_mutex_unlock(&c->lock);
	return ret;
}
