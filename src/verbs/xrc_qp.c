// SPDX-License-Identifier: MIT
/*
 * ibv_open_qp: XRC_RECV QPs shared by the processes of an XRC domain
 * (docs/xrc.md, "Opened QPs").
 *
 * A QP lives in its creator's process: its state, its entry in the arena,
 * its net-path receive side.  A process that opened the same domain opens
 * it by number: it connects to the creator's socket (shm/peer.c, a
 * control connection) and asks; the creator's server thread for that
 * connection checks the number and the domain (the kernel's ib_open_qp:
 * an XRC_RECV QP of the domain, else EINVAL) and from then on carries out
 * the opener's modify and query with the creator's own verbs, whose
 * checker validates every attribute as for a local caller.  The opener's
 * handle is the connection: ibv_destroy_qp closes it, and so does the
 * opener's exit; each open connection is one reference.
 *
 * The creator's ibv_destroy_qp while others hold it opened ends only its
 * handle (the kernel's __ib_destroy_shared_qp): the QP stays, an orphan,
 * until the last opener closes, then the server destroys it.  The QP
 * cannot outlive its creator's process or device context (its arena and
 * objects): their end ends it for the openers too, whose connections are
 * closed; their handles then answer modify and query with EIO, and
 * destroy with 0.
 *
 * Everything an opener sends is hostile: requests of a fixed size and
 * magic, an operation from the table, modify only after a successful
 * open, attributes checked by modify_qp's checker (no pointers in them).
 * A connection holds a thread: one that has not opened a QP within
 * XQP_OPEN_WAIT_S of its start, or does not take its answer within that
 * time, is closed, and one process holds at most XQP_MAX_PER_PEER of
 * the XQP_MAX_SERVED connections (docs/xrc.md, "Opened QPs").
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "shca.h"
#include "../common/slot.h"
#include "../engine/xport.h"
#include "../shm/peer.h"

#define XQP_MAGIC	0x5051584148434853ull	/* "SHCHAXQP" */
/* an opener waits this long for the creator's answer */
#define XQP_ANSWER_TIMEOUT_S	30
/* control connections served at once (a thread each): more are closed */
#define XQP_MAX_SERVED		1024
/* ... of them, one process's (SO_PEERCRED) */
#define XQP_MAX_PER_PEER	256
/* a connection opens its QP within this time of its start, and takes
 * each answer within it, or is closed */
#define XQP_OPEN_WAIT_S		5

enum xqp_op {
	XQP_OPEN = 1,
	XQP_MODIFY,
	XQP_QUERY,
};

struct xqp_req {
	uint64_t magic;
	uint32_t op;
	uint32_t qpn;
	uint64_t xrcd;
	int32_t mask;
	uint32_t pad;
	struct ibv_qp_attr attr;
};

struct xqp_ans {
	int32_t ret;
	uint32_t pad;
	struct ibv_qp_attr attr;
};

/* The creator's side: one per control connection (xqp_lock). */
struct xqp_srv {
	int fd;
	pid_t pid;			/* the process serving it (a forked
					 * child's copy is not its to end) */
	pid_t peer;			/* the process at the other end */
	struct timespec deadline;	/* to open a QP by */
	struct shca_qp *qp;		/* opened; NULL: not (yet, or gone) */
	struct xqp_srv *next;
};

/* The opener's handle. */
struct shca_xqp {
	struct shca_qp qp;		/* zeroed: no other verb takes it */
	int fd;
	pthread_mutex_t lock;		/* one request at a time */
	struct shca_xrcd *xrcd;
	struct shca_xqp *next;
};

static pthread_mutex_t xqp_lock = PTHREAD_MUTEX_INITIALIZER;
static struct xqp_srv *srv_list;	/* creator side */
static unsigned int srv_count;
/* orphans a server thread is destroying (xqp_lock; srv_idle), in
 * process destroying_pid (a forked child has no such threads) */
static unsigned int srv_destroying;
static pid_t destroying_pid;
static pthread_cond_t srv_idle = PTHREAD_COND_INITIALIZER;
static pthread_mutex_t open_lock = PTHREAD_MUTEX_INITIALIZER;
static struct shca_xqp *open_list;	/* opener side (open_lock) */

/* ------------------------------------------------------------------ */
/* The creator's side                                                  */

/* XQP_OPEN (xqp_lock held): an XRC_RECV QP of ours in domain xrcd. */
static int srv_open(struct xqp_srv *s, uint32_t qpn, uint64_t xrcd)
{
	struct shca_qp *qp;

	if (s->qp)
		return -EINVAL;		/* once per connection */
	qp = shca_qp_lookup(qpn);
	if (!qp || qp->ibqp.qp_type != IBV_QPT_XRC_RECV || !xrcd ||
	    qp->xrcd_id != xrcd || qp->xclosing)
		return -EINVAL;
	qp->xopens++;
	s->qp = qp;
	return 0;
}

/* XQP_MODIFY and XQP_QUERY (xqp_lock held): the creator's own verbs,
 * with a use of the QP so that no destroy runs under them. */
static int srv_call(struct xqp_srv *s, const struct xqp_req *r,
		    struct xqp_ans *a)
{
	struct ibv_qp_init_attr init;
	struct ibv_qp_attr attr;
	int ret;

	if (!s->qp)
		return -EINVAL;
	if (r->op == XQP_MODIFY) {
		attr = r->attr;
		ret = shca_modify_qp_use(s->qp, &attr, r->mask);
	} else {
		ret = shca_query_qp_use(s->qp, &a->attr, r->mask, &init);
	}
	return ret;
}

/* The end of a connection: its reference dropped; the last one of an
 * orphan destroys it (outside the lock: the destroy detaches servers). */
static void srv_close(struct xqp_srv *s)
{
	struct shca_qp *doomed = NULL, *qp;
	struct xqp_srv **pp;

	pthread_mutex_lock(&xqp_lock);
	for (pp = &srv_list; *pp; pp = &(*pp)->next)
		if (*pp == s) {
			*pp = s->next;
			srv_count--;
			break;
		}
	qp = s->qp;
	if (qp && --qp->xopens == 0 && qp->xorphan) {
		qp->xclosing = true;
		doomed = qp;
		if (destroying_pid != shca_getpid()) {
			destroying_pid = shca_getpid();
			srv_destroying = 0;
		}
		srv_destroying++;
	}
	pthread_mutex_unlock(&xqp_lock);
	close(s->fd);
	free(s);
	if (!doomed)
		return;
	qp = shca_qp_lookup_obj(&doomed->ibqp, NULL);
	if (qp && shca_qp_destroy(qp, false))
		shca_warn("an orphaned XRC_RECV QP %#x is busy: left",
			  doomed->ibqp.qp_num);
	pthread_mutex_lock(&xqp_lock);
	if (!--srv_destroying)
		pthread_cond_broadcast(&srv_idle);
	pthread_mutex_unlock(&xqp_lock);
}

/* A context that closes: its QPs' servers let go of them (their
 * openers see EOF; a request already taken is answered EINVAL), and it
 * waits for the orphans a server thread is destroying: the destroy and a
 * server's modify use the context (its object table, its lock), and
 * close_children leaves a QP that another thread holds. */
void shca_xqp_quiesce(struct ibv_context *ctx)
{
	struct xqp_srv *s;

	pthread_mutex_lock(&xqp_lock);
	for (s = srv_list; s; s = s->next)
		if (s->qp && s->qp->ibqp.context == ctx) {
			s->qp = NULL;
			if (s->pid == getpid())
				shutdown(s->fd, SHUT_RDWR);
		}
	while (srv_destroying && destroying_pid == shca_getpid())
		pthread_cond_wait(&srv_idle, &xqp_lock);
	pthread_mutex_unlock(&xqp_lock);
}

/* Until its QP is opened (the server's own answer said so: s->qp is
 * also cleared by the QP's destroy, under xqp_lock) a connection waits
 * for a request until its deadline only: false when that has passed.
 * Then it waits at will (an opener holds its handle as long as it
 * likes). */
static bool srv_wait_set(struct xqp_srv *s, bool opened, bool *untimed)
{
	struct timeval tv = { 0, 0 };
	struct timespec now;
	int64_t left;

	if (*untimed)
		return true;
	if (opened) {
		*untimed = true;
		return !setsockopt(s->fd, SOL_SOCKET, SO_RCVTIMEO, &tv,
				   sizeof(tv));
	}
	clock_gettime(CLOCK_MONOTONIC, &now);
	left = (int64_t)(s->deadline.tv_sec - now.tv_sec) * 1000000 +
	       (s->deadline.tv_nsec - now.tv_nsec) / 1000;
	if (left <= 0)
		return false;
	tv.tv_sec = left / 1000000;
	tv.tv_usec = left % 1000000;
	return !setsockopt(s->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
}

static void *srv_run(void *arg)
{
	struct xqp_srv *s = arg;
	bool opened = false, untimed = false;
	struct xqp_req r;
	struct xqp_ans a;
	ssize_t n;

	for (;;) {
		if (!srv_wait_set(s, opened, &untimed))
			break;
		/* one record a message (SOCK_SEQPACKET): MSG_TRUNC gives a
		 * longer message's length, which ends the connection too */
		n = recv(s->fd, &r, sizeof(r), MSG_TRUNC);
		if (n < 0 && errno == EINTR)
			continue;	/* (a timed recv is not restarted) */
		if (n != (ssize_t)sizeof(r) || r.magic != XQP_MAGIC)
			break;
		memset(&a, 0, sizeof(a));
		pthread_mutex_lock(&xqp_lock);
		switch (r.op) {
		case XQP_OPEN:
			a.ret = srv_open(s, r.qpn, r.xrcd);
			opened |= !a.ret;
			break;
		case XQP_MODIFY:
		case XQP_QUERY:
			a.ret = srv_call(s, &r, &a);
			break;
		default:
			a.ret = -EINVAL;
			break;
		}
		pthread_mutex_unlock(&xqp_lock);
		if (send(s->fd, &a, sizeof(a), MSG_NOSIGNAL) !=
		    (ssize_t)sizeof(a))
			break;
	}
	srv_close(s);
	return NULL;
}

/* A control connection from the engine (shm/peer.c): a thread serves it
 * (modify may wait for things the engine thread does). */
static void on_control(int fd)
{
	struct timeval tv = { XQP_OPEN_WAIT_S, 0 };
	struct xqp_srv *s = calloc(1, sizeof(*s)), *o;
	struct ucred cred;
	socklen_t len = sizeof(cred);
	unsigned int mine = 0;
	pthread_attr_t pa;
	pthread_t t;
	int flags;

	flags = fcntl(fd, F_GETFL);
	if (!s || flags < 0 || fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) ||
	    getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) ||
	    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv))) {
		free(s);
		close(fd);
		return;
	}
	s->fd = fd;
	s->pid = getpid();
	s->peer = cred.pid;
	clock_gettime(CLOCK_MONOTONIC, &s->deadline);
	s->deadline.tv_sec += XQP_OPEN_WAIT_S;
	pthread_mutex_lock(&xqp_lock);
	for (o = srv_list; o; o = o->next)
		mine += o->peer == s->peer;
	if (srv_count >= XQP_MAX_SERVED || mine >= XQP_MAX_PER_PEER) {
		pthread_mutex_unlock(&xqp_lock);
		free(s);
		close(fd);
		return;
	}
	s->next = srv_list;
	srv_list = s;
	srv_count++;
	pthread_mutex_unlock(&xqp_lock);
	pthread_attr_init(&pa);
	pthread_attr_setdetachstate(&pa, PTHREAD_CREATE_DETACHED);
	if (pthread_create(&t, &pa, srv_run, s))
		srv_close(s);
	pthread_attr_destroy(&pa);
}

void shca_xqp_serve(void)
{
	shca_peer_on_control(SHCA_CTRL_XQP, on_control);
}

/*
 * The creator's ibv_destroy_qp of an XRC_RECV QP: true when others hold
 * it opened, and it became an orphan (its handle ends, its domain's
 * reference goes: the QP lives on, xrc_qp.c's header); *gone when the
 * handle names an orphan already (ENOENT).
 */
bool shca_xqp_orphan(struct shca_qp *qp, bool *gone)
{
	struct shca_xrcd *x = NULL;
	bool kept = false;

	*gone = false;
	pthread_mutex_lock(&xqp_lock);
	if (qp->xorphan || qp->xclosing) {
		*gone = true;
	} else if (qp->xopens) {
		qp->xorphan = true;
		x = qp->xrcd;
		qp->xrcd = NULL;
		kept = true;
	}
	pthread_mutex_unlock(&xqp_lock);
	if (x)
		shca_xrcd_put(x);
	return kept;
}

/* Is the creator's handle qp an orphan (destroyed by its creator)? */
bool shca_xqp_is_orphan(struct shca_qp *qp)
{
	bool o;

	pthread_mutex_lock(&xqp_lock);
	o = qp->xorphan || qp->xclosing;
	pthread_mutex_unlock(&xqp_lock);
	return o;
}

/* The QP is being destroyed for good: its openers' connections end. */
void shca_xqp_detach(struct shca_qp *qp)
{
	struct xqp_srv *s;

	pthread_mutex_lock(&xqp_lock);
	for (s = srv_list; s; s = s->next)
		if (s->qp == qp) {
			s->qp = NULL;
			/* the opener sees EOF; the server's recv ends (not
			 * from a forked child: the socket is its parent's) */
			if (s->pid == getpid())
				shutdown(s->fd, SHUT_RDWR);
		}
	qp->xclosing = true;
	pthread_mutex_unlock(&xqp_lock);
}

/* ------------------------------------------------------------------ */
/* The opener's side                                                   */

/* One request and its answer: the answer's ret, or -EIO when the
 * creator (its process or the QP) is gone. */
static int xqp_call(struct shca_xqp *x, struct xqp_req *r, struct xqp_ans *a)
{
	ssize_t n;
	int ret = -EIO;

	r->magic = XQP_MAGIC;
	pthread_mutex_lock(&x->lock);
	if (x->fd >= 0 &&
	    send(x->fd, r, sizeof(*r), MSG_NOSIGNAL) == (ssize_t)sizeof(*r)) {
		n = recv(x->fd, a, sizeof(*a), 0);
		if (n == (ssize_t)sizeof(*a))
			ret = a->ret > 0 || a->ret < -4095 ? -EIO : a->ret;
	}
	pthread_mutex_unlock(&x->lock);
	return ret;
}

/* Is ibqp an opened handle of this process?  Its struct, or NULL. */
struct shca_xqp *shca_xqp_find(struct ibv_qp *ibqp)
{
	struct shca_xqp *x;

	if (!ibqp)
		return NULL;
	pthread_mutex_lock(&open_lock);
	for (x = open_list; x; x = x->next)
		if (&x->qp.ibqp == ibqp)
			break;
	pthread_mutex_unlock(&open_lock);
	return x;
}

/*
 * The open_qp op (ibv_open_qp(3)): rdma-core's checks (unknown
 * comp_mask bits EOPNOTSUPP; XRCD, NUM and TYPE needed: EINVAL), then
 * the kernel's (ib_open_qp): an XRC_RECV QP of the domain, or EINVAL.
 */
struct ibv_qp *shca_open_qp(struct ibv_context *ctx,
			    struct ibv_qp_open_attr *a)
{
	const uint32_t need = IBV_QP_OPEN_ATTR_XRCD | IBV_QP_OPEN_ATTR_NUM |
			      IBV_QP_OPEN_ATTR_TYPE;
	struct timeval tv = { XQP_ANSWER_TIMEOUT_S, 0 };
	struct xqp_req r;
	struct xqp_ans an;
	struct shca_xqp *x;
	int fd, ret;

	if (!shca_ctx_live(ctx))
		return SHCA_ERR_PTR(EBADF);
	if (!a)
		return SHCA_ERR_PTR(EINVAL);
	if (a->comp_mask >= IBV_QP_OPEN_ATTR_RESERVED)
		return SHCA_ERR_PTR(EOPNOTSUPP);
	if ((a->comp_mask & need) != need ||
	    a->qp_type != IBV_QPT_XRC_RECV || a->qp_num > 0xffffff ||
	    !shca_xrcd_ok(a->xrcd, ctx))
		return SHCA_ERR_PTR(EINVAL);
	ret = shca_transport_init();
	if (ret)
		return SHCA_ERR_PTR(-ret);
	/* no process in the number's slot: no such QP */
	fd = shca_peer_control_connect(shca_qpn_slot(a->qp_num),
				       SHCA_CTRL_XQP);
	if (fd < 0)
		return SHCA_ERR_PTR(fd == -ENOMEM ? ENOMEM : EINVAL);
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	x = calloc(1, sizeof(*x));
	if (!x) {
		close(fd);
		return SHCA_ERR_PTR(ENOMEM);
	}
	x->fd = fd;
	pthread_mutex_init(&x->lock, NULL);
	memset(&r, 0, sizeof(r));
	r.op = XQP_OPEN;
	r.qpn = a->qp_num;
	r.xrcd = to_sxrcd(a->xrcd)->id;
	ret = xqp_call(x, &r, &an);
	if (ret) {
		close(fd);
		pthread_mutex_destroy(&x->lock);
		free(x);
		/* a creator that went away meanwhile: no such QP */
		return SHCA_ERR_PTR(ret == -EIO ? EINVAL : -ret);
	}
	x->xrcd = to_sxrcd(a->xrcd);
	shca_xrcd_get(x->xrcd);
	/* what rdma-core's ibv_cmd_open_qp fills in */
	x->qp.ibqp.context = ctx;
	x->qp.ibqp.qp_context = a->qp_context;
	x->qp.ibqp.qp_num = a->qp_num;
	x->qp.ibqp.qp_type = IBV_QPT_XRC_RECV;
	x->qp.ibqp.state = IBV_QPS_UNKNOWN;
	pthread_mutex_init(&x->qp.ibqp.mutex, NULL);
	pthread_cond_init(&x->qp.ibqp.cond, NULL);
	pthread_mutex_lock(&open_lock);
	x->next = open_list;
	open_list = x;
	pthread_mutex_unlock(&open_lock);
	return &x->qp.ibqp;
}

/* ibv_modify_qp on an opened QP: the creator's checks decide. */
int shca_xqp_modify(struct shca_xqp *x, struct ibv_qp_attr *attr, int mask)
{
	struct xqp_req r;
	struct xqp_ans an;
	int ret;

	if (!attr)
		return -EINVAL;
	memset(&r, 0, sizeof(r));
	r.op = XQP_MODIFY;
	r.mask = mask;
	r.attr = *attr;
	ret = xqp_call(x, &r, &an);
	if (!ret && (mask & IBV_QP_STATE))
		x->qp.ibqp.state = attr->qp_state;
	return ret;
}

/* ibv_query_qp on an opened QP: the creator's attributes; the init
 * attributes of an XRC_RECV QP (no PD, CQs, queues) from here. */
int shca_xqp_query(struct shca_xqp *x, struct ibv_qp_attr *attr, int mask,
		   struct ibv_qp_init_attr *init)
{
	struct xqp_req r;
	struct xqp_ans an;
	int ret;

	if (!attr || !init)
		return -EINVAL;
	memset(&r, 0, sizeof(r));
	r.op = XQP_QUERY;
	r.mask = mask;
	ret = xqp_call(x, &r, &an);
	if (ret)
		return ret;
	*attr = an.attr;
	memset(init, 0, sizeof(*init));
	init->qp_context = x->qp.ibqp.qp_context;
	init->qp_type = IBV_QPT_XRC_RECV;
	x->qp.ibqp.state = an.attr.qp_state;
	return 0;
}

/* A context that closes takes its opened QPs with it, as the kernel's
 * uverbs cleanup closes a file's opened QPs. */
void shca_xqp_close_ctx(struct ibv_context *ctx)
{
	struct shca_xqp *x;

	for (;;) {
		pthread_mutex_lock(&open_lock);
		for (x = open_list; x; x = x->next)
			if (x->qp.ibqp.context == ctx)
				break;
		pthread_mutex_unlock(&open_lock);
		if (!x)
			return;
		shca_xqp_destroy(x);
	}
}

/* ibv_destroy_qp on an opened QP: this process's reference goes (the
 * connection closes; the creator's server drops it). */
int shca_xqp_destroy(struct shca_xqp *x)
{
	struct shca_xqp **pp;
	bool found = false;

	pthread_mutex_lock(&open_lock);
	for (pp = &open_list; *pp; pp = &(*pp)->next)
		if (*pp == x) {
			*pp = x->next;
			found = true;
			break;
		}
	pthread_mutex_unlock(&open_lock);
	if (!found)
		return -ENOENT;	/* another thread's destroy took it */
	pthread_mutex_lock(&x->lock);
	close(x->fd);
	x->fd = -1;
	pthread_mutex_unlock(&x->lock);
	shca_xrcd_put(x->xrcd);
	pthread_mutex_destroy(&x->lock);
	/* a stale pointer finds nothing in open_list, and a zeroed QP */
	shca_quarantine(x, sizeof(*x));
	return 0;
}
