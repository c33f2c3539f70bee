// SPDX-License-Identifier: MIT
/*
 * Asynchronous events and completion channels.
 *
 * Both are a queue behind an eventfd that is readable exactly while the
 * queue is non-empty: the eventfd counter is written for every event
 * queued (so that an edge-triggered epoll sees each one, as with the
 * kernel's event files) and drained when the queue goes back to empty,
 * both under the queue lock.  A reader that finds the queue empty sleeps in
 * a read() of the eventfd, as rdma-core's reader of the kernel's event file
 * does, so that signals interrupt it by the same rule (common/evfd.h):
 * EINTR after a handler without SA_RESTART.  That read takes the counter:
 * the reader writes it again if events remain once it has taken its own,
 * so several threads may wait on one channel.  A client that sets
 * O_NONBLOCK on the fd gets EAGAIN from the verb, as with rdma-core's
 * kernel-backed fds.
 *
 * Events count as "reported" when a client receives them; destroying an
 * object removes its undelivered events, as the kernel does, and waits for
 * the acks of the delivered ones (see the destroy verbs).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/eventfd.h>

#include "shca.h"
#include "../common/evfd.h"
#include "../common/nocancel.h"
#include "../engine/engine.h"
#include "../net/net.h"
#include "../shm/peer.h"

struct shca_event {
	struct shca_event *next;
	enum ibv_event_type type;	/* async events only */
	void *obj;			/* shca object, or the CQ for channels */
};

int shca_event_queue_init(struct shca_event_queue *q)
{
	memset(q, 0, sizeof(*q));
	q->fd = eventfd(0, EFD_CLOEXEC);
	if (q->fd < 0)
		return -errno;
	pthread_mutex_init(&q->lock, NULL);
	return 0;
}

void shca_event_queue_destroy(struct shca_event_queue *q)
{
	struct shca_event *ev, *next;

	for (ev = q->head; ev; ev = next) {
		next = ev->next;
		free(ev);
	}
	q->head = q->tail = NULL;
	if (q->fd >= 0)
		close(q->fd);
	q->fd = -1;
	pthread_mutex_destroy(&q->lock);
}

/* Append without signalling: the reader's own collect step. */
static void queue_append(struct shca_event_queue *q, struct shca_event *ev)
{
	if (q->tail)
		q->tail->next = ev;
	else
		q->head = ev;
	q->tail = ev;
}

static void queue_push(struct shca_event_queue *q, enum ibv_event_type type,
		       void *obj)
{
	struct shca_event *ev = calloc(1, sizeof(*ev));
	int cs;

	if (!ev) {
		shca_warn_once("out of memory: event dropped");
		return;
	}
	ev->type = type;
	ev->obj = obj;
	/* the caller may be an application thread that is being
	 * cancelled: write() must not end it with the lock held */
	cs = shca_cancel_off();
	pthread_mutex_lock(&q->lock);
	queue_append(q, ev);
	/* every event wakes the fd, as the kernel's event files do */
	shca_evfd_signal(q->fd);
	pthread_mutex_unlock(&q->lock);
	shca_cancel_restore(cs);
}

/*
 * A completion channel's waiter in a process that uses the net path
 * waits for the engine's work too and does it itself (issue 15): 0 look
 * again, -errno, or -EAGAIN: wait on the eventfd alone.  A non-blocking
 * channel gets one pass of that work before its EAGAIN.
 */
static int chan_wait(int fd)
{
	int fl, ret;

	if (!shca_net_active())
		return -EAGAIN;
	shca_net_acks_out(true);	/* held for this thread's next post */
	fl = fcntl(fd, F_GETFL);
	if (fl >= 0 && (fl & O_NONBLOCK))
		return shca_engine_progress() > 0 ? 0 : -EAGAIN;
	ret = shca_engine_wait(fd);
	if (ret == -EINTR && shca_signals_restart())
		ret = 0;
	return ret;
}

/*
 * Take the first event; wait for one unless the client made the fd
 * non-blocking.  deliver() runs under the queue lock, so an object cannot
 * be destroyed between leaving the queue and being counted as reported.
 * The wait is the one cancellation point (common/nocancel.h): a thread
 * cancelled anywhere else in here would leave the queue locked.
 */
static int queue_pop(struct shca_event_queue *q,
		     void (*deliver)(struct shca_event *ev, void *arg),
		     void *arg)
{
	bool took = false;	/* this thread's wait took the counter */
	int cs = shca_cancel_off();

	for (;;) {
		struct shca_event *ev;
		int ret;

		pthread_mutex_lock(&q->lock);
		if (q->collect)
			q->collect(q);
		if (!q->head) {
			/* nothing: a stale wake-up, or a mark set after we
			 * looked and before the write we drain now */
			shca_evfd_drain(q->fd);
			if (q->collect)
				q->collect(q);
		}
		ev = q->head;
		if (ev) {
			q->head = ev->next;
			if (!q->head) {
				q->tail = NULL;
				shca_evfd_drain(q->fd);
				if (q->collect) {
					q->collect(q);
					if (q->head)
						shca_evfd_signal(q->fd);
				}
			} else if (took) {
				/* readable again: events remain */
				shca_evfd_signal(q->fd);
			}
			deliver(ev, arg);
			pthread_mutex_unlock(&q->lock);
			shca_cancel_restore(cs);
			free(ev);
			return 0;
		}
		pthread_mutex_unlock(&q->lock);

		/* as rdma-core's read() of the event file: EAGAIN when the
		 * fd is non-blocking, EINTR after a handler without
		 * SA_RESTART, restarted after one with it; a cancellation
		 * point, with no lock held */
		shca_cancel_restore(cs);
		ret = q->progress ? chan_wait(q->fd) : -EAGAIN;
		if (ret == -EAGAIN)
			ret = shca_evfd_wait(q->fd);
		if (ret < 0)
			return ret;
		took = ret > 0;
		cs = shca_cancel_off();
	}
}

static void queue_remove_obj(struct shca_event_queue *q, void *obj)
{
	struct shca_event **pp, *ev, *last = NULL;
	bool had = false;
	int cs = shca_cancel_off();

	pthread_mutex_lock(&q->lock);
	had = q->head != NULL;
	for (pp = &q->head; (ev = *pp);) {
		if (ev->obj == obj) {
			*pp = ev->next;
			free(ev);
			continue;
		}
		last = ev;
		pp = &ev->next;
	}
	q->tail = last;
	if (had && !q->head)
		shca_evfd_drain(q->fd);
	pthread_mutex_unlock(&q->lock);
	shca_cancel_restore(cs);
}

/* ------------------------------------------------------------------ */
/* Asynchronous events                                                 */

/* Not destroyed yet (a destroy waiting for acks still counts). */
static bool obj_alive(const struct shca_obj *o, enum shca_otype t)
{
	return __atomic_load_n(&o->magic, __ATOMIC_ACQUIRE) ==
	       SHCA_OBJ_MAGIC + (uint32_t)t;
}

static bool event_is_cq(enum ibv_event_type t)
{
	return t == IBV_EVENT_CQ_ERR;
}

static bool event_is_srq(enum ibv_event_type t)
{
	return t == IBV_EVENT_SRQ_ERR || t == IBV_EVENT_SRQ_LIMIT_REACHED;
}

static bool event_is_port(enum ibv_event_type t)
{
	switch (t) {
	case IBV_EVENT_PORT_ACTIVE:
	case IBV_EVENT_PORT_ERR:
	case IBV_EVENT_LID_CHANGE:
	case IBV_EVENT_PKEY_CHANGE:
	case IBV_EVENT_SM_CHANGE:
	case IBV_EVENT_CLIENT_REREGISTER:
	case IBV_EVENT_GID_CHANGE:
		return true;
	default:
		return false;
	}
}

/*
 * Queue an async event.  obj is the shca_qp / shca_cq / shca_srq the event
 * is about, a port number cast to a pointer for port events, or NULL for
 * IBV_EVENT_DEVICE_FATAL.
 */
void shca_async_event(struct shca_context *sctx, enum ibv_event_type type,
		      void *obj)
{
	shca_dbg("%s: %s", sctx->dev->ibdev.name, ibv_event_type_str(type));
	queue_push(&sctx->async, type, obj);
}

void shca_async_forget(struct shca_context *sctx, void *obj)
{
	queue_remove_obj(&sctx->async, obj);
}

static void deliver_async(struct shca_event *ev, void *arg)
{
	struct ibv_async_event *out = arg;

	memset(out, 0, sizeof(*out));
	out->event_type = ev->type;
	if (event_is_cq(ev->type)) {
		struct shca_cq *cq = ev->obj;

		out->element.cq = ibv_cq_ex_to_cq(&cq->cqx);
		pthread_mutex_lock(&cq->cqx.mutex);
		cq->async_events_reported++;
		pthread_mutex_unlock(&cq->cqx.mutex);
	} else if (event_is_srq(ev->type)) {
		struct shca_srq *srq = ev->obj;

		out->element.srq = &srq->ibsrq;
		pthread_mutex_lock(&srq->ibsrq.mutex);
		srq->events_reported++;
		pthread_mutex_unlock(&srq->ibsrq.mutex);
	} else if (event_is_port(ev->type)) {
		out->element.port_num = (int)(uintptr_t)ev->obj;
	} else if (ev->type == IBV_EVENT_DEVICE_FATAL) {
		out->element.port_num = 0;
	} else {
		struct shca_qp *qp = ev->obj;

		out->element.qp = &qp->ibqp;
		pthread_mutex_lock(&qp->ibqp.mutex);
		qp->events_reported++;
		pthread_mutex_unlock(&qp->ibqp.mutex);
	}
}

SHCA_DEFAULT_VERSION(ibv_get_async_event)
int shca_latest_ibv_get_async_event(struct ibv_context *context,
			struct ibv_async_event *event)
{
	struct ibv_async_event ev;
	int ret;

	if (!shca_ctx_live(context)) {
		errno = EBADF;		/* its async fd is closed */
		return -1;
	}
	ret = queue_pop(&to_sctx(context)->async, deliver_async, &ev);
	if (ret) {
		errno = -ret;
		return -1;
	}
	*event = ev;
	return 0;
}

/*
 * An ack for an object that is gone (a context closed under it, or an
 * event acknowledged twice after the destroy) counts nowhere: the
 * object's quarantined header says it is dead.
 */
SHCA_DEFAULT_VERSION(ibv_ack_async_event)
void shca_latest_ibv_ack_async_event(struct ibv_async_event *event)
{
	switch (event->event_type) {
	case IBV_EVENT_CQ_ERR: {
		struct ibv_cq *cq = event->element.cq;

		if (!obj_alive(&to_scq(cq)->obj, SHCA_OT_CQ))
			return;
		pthread_mutex_lock(&cq->mutex);
		cq->async_events_completed++;
		pthread_cond_signal(&cq->cond);
		pthread_mutex_unlock(&cq->mutex);
		return;
	}
	case IBV_EVENT_QP_FATAL:
	case IBV_EVENT_QP_REQ_ERR:
	case IBV_EVENT_QP_ACCESS_ERR:
	case IBV_EVENT_COMM_EST:
	case IBV_EVENT_SQ_DRAINED:
	case IBV_EVENT_PATH_MIG:
	case IBV_EVENT_PATH_MIG_ERR:
	case IBV_EVENT_QP_LAST_WQE_REACHED: {
		struct ibv_qp *qp = event->element.qp;

		if (!obj_alive(&to_sqp(qp)->obj, SHCA_OT_QP))
			return;
		pthread_mutex_lock(&qp->mutex);
		qp->events_completed++;
		pthread_cond_signal(&qp->cond);
		pthread_mutex_unlock(&qp->mutex);
		return;
	}
	case IBV_EVENT_SRQ_ERR:
	case IBV_EVENT_SRQ_LIMIT_REACHED: {
		struct ibv_srq *srq = event->element.srq;

		if (!obj_alive(&to_ssrq(srq)->obj, SHCA_OT_SRQ))
			return;
		pthread_mutex_lock(&srq->mutex);
		srq->events_completed++;
		pthread_cond_signal(&srq->cond);
		pthread_mutex_unlock(&srq->mutex);
		return;
	}
	case IBV_EVENT_WQ_FATAL: {
		struct ibv_wq *wq = event->element.wq;

		pthread_mutex_lock(&wq->mutex);
		wq->events_completed++;
		pthread_cond_signal(&wq->cond);
		pthread_mutex_unlock(&wq->mutex);
		return;
	}
	default:
		return;
	}
}

/* ------------------------------------------------------------------ */
/* Completion channels                                                 */

/*
 * The process's channel table: what a peer names (index and generation)
 * when it asks for a channel's eventfd.  The live channels are also on a
 * list, which tells a channel from a destroyed one or a stranger without
 * reading it.
 */
#define MAX_CHANNELS 4096
#define SHCA_CHAN_MAGIC	0x5ca0c4a7u
#define SHCA_CHAN_DEAD	0xdeadc4a7u

static pthread_mutex_t chan_lock = PTHREAD_MUTEX_INITIALIZER;
static struct shca_comp_channel *chan_table[MAX_CHANNELS];
static uint32_t chan_gen;
static struct shca_comp_channel *chan_live;

/* Is ch a live channel of ctx (NULL: of any context)? */
bool shca_channel_valid(struct ibv_comp_channel *ch, struct ibv_context *ctx)
{
	struct shca_comp_channel *c;
	bool found = false;

	pthread_mutex_lock(&chan_lock);
	for (c = chan_live; c && !found; c = c->live_next)
		found = &c->ch == ch;
	pthread_mutex_unlock(&chan_lock);
	return found && (!ctx || ch->context == ctx);
}

/* A duplicate of channel idx's eventfd if it still has generation gen,
 * or -1: for a peer that asked (shm/peer.c). */
static int channel_fd_for_peer(uint32_t idx, uint32_t gen)
{
	int fd = -1;

	pthread_mutex_lock(&chan_lock);
	if (idx < MAX_CHANNELS && chan_table[idx] &&
	    chan_table[idx]->gen == gen)
		fd = fcntl(chan_table[idx]->q.fd, F_DUPFD_CLOEXEC, 0);
	pthread_mutex_unlock(&chan_lock);
	return fd;
}

/*
 * Completions that fired one of the channel's CQs, marked by peers.  The
 * mark is taken with one exchange: the engine thread's doorbell
 * (cq.c shca_cq_doorbell) takes it the same way, and a look followed by
 * a clear let both report one firing (two events for one arm: seen under
 * TSan, test_events channel_solicited_only_error_wakes_two_process).
 */
static void channel_collect(struct shca_event_queue *q)
{
	struct shca_comp_channel *ch = container_of(q, struct shca_comp_channel,
						    q);
	struct shca_cq *cq;

	for (cq = ch->cqs; cq; cq = cq->chan_next) {
		struct shca_event *ev;

		if (!__atomic_load_n(&cq->shm->notify_pending,
				     __ATOMIC_ACQUIRE))
			continue;
		ev = calloc(1, sizeof(*ev));
		if (!ev)
			return;	/* left marked: the next reader takes it */
		if (!__atomic_exchange_n(&cq->shm->notify_pending, 0,
					 __ATOMIC_ACQ_REL)) {
			free(ev);	/* the doorbell took it meanwhile */
			continue;
		}
		ev->obj = cq;
		queue_append(q, ev);
	}
}

/* A context that is not open: EBADF (its uverbs file is closed). */
struct ibv_comp_channel *ibv_create_comp_channel(struct ibv_context *context)
{
	struct shca_comp_channel *ch;
	uint32_t i;
	int ret;

	if (!shca_ctx_live(context))
		return SHCA_ERR_PTR(EBADF);
	ch = calloc(1, sizeof(*ch));
	if (!ch)
		return SHCA_ERR_PTR(ENOMEM);
	ret = shca_event_queue_init(&ch->q);
	if (ret) {
		free(ch);
		return SHCA_ERR_PTR(-ret);
	}
	ch->q.collect = channel_collect;
	ch->q.progress = true;
	ch->ch.context = context;
	ch->ch.fd = ch->q.fd;
	ch->ch.refcnt = 0;
	shca_peer_on_channel_request(channel_fd_for_peer);

	pthread_mutex_lock(&chan_lock);
	for (i = 0; i < MAX_CHANNELS && chan_table[i]; i++)
		;
	if (i < MAX_CHANNELS) {
		ch->idx = i;
		ch->gen = ++chan_gen;
		chan_table[i] = ch;
	} else {
		ch->idx = UINT32_MAX;	/* peers go through the doorbell */
	}
	ch->magic = SHCA_CHAN_MAGIC;
	ch->live_next = chan_live;
	chan_live = ch;
	pthread_mutex_unlock(&chan_lock);
	return &ch->ch;
}

/* The channel of a new CQ: its CQ list, and where peers find it. */
void shca_channel_add_cq(struct shca_comp_channel *ch, struct shca_cq *cq)
{
	pthread_mutex_lock(&ch->q.lock);
	cq->chan_next = ch->cqs;
	ch->cqs = cq;
	if (ch->idx != UINT32_MAX) {
		cq->shm->chan_gen = ch->gen;
		__atomic_store_n(&cq->shm->chan_idx, ch->idx + 1,
				 __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&ch->q.lock);
}

/*
 * EBUSY while CQs use the channel, as rdma-core answers; the check and the
 * teardown under the context mutex, which CQ creation takes to count a
 * new user.  A channel that is not live is EBADF, as closing its file
 * again would be.  Its context may be closed already (the channel is the
 * client's file, as with rdma-core): it has no CQ left then.
 */
int ibv_destroy_comp_channel(struct ibv_comp_channel *channel)
{
	struct shca_comp_channel *ch = to_schan(channel), **pp;
	struct ibv_context *context = NULL;
	int ret = 0;

	pthread_mutex_lock(&chan_lock);
	for (pp = &chan_live; *pp && *pp != ch; pp = &(*pp)->live_next)
		;
	if (*pp && shca_ctx_live(channel->context))
		context = channel->context;
	pthread_mutex_unlock(&chan_lock);
	if (!*pp)
		return shca_ret_errno(-EBADF);

	if (context)
		pthread_mutex_lock(&context->mutex);
	pthread_mutex_lock(&chan_lock);
	for (pp = &chan_live; *pp && *pp != ch; pp = &(*pp)->live_next)
		;
	if (!*pp)
		ret = -EBADF;		/* another thread destroyed it */
	else if (channel->refcnt)
		ret = -EBUSY;
	if (!ret) {
		*pp = ch->live_next;
		if (ch->idx < MAX_CHANNELS)
			chan_table[ch->idx] = NULL;
		ch->magic = SHCA_CHAN_DEAD;
	}
	pthread_mutex_unlock(&chan_lock);
	if (context)
		pthread_mutex_unlock(&context->mutex);
	if (ret)
		return shca_ret_errno(ret);
	shca_event_queue_destroy(&ch->q);
	shca_quarantine(ch, sizeof(*ch));
	return 0;
}

/* The CQ's armed notification fired: queue it on its channel. */
void shca_cq_comp_event(struct shca_cq *cq)
{
	if (cq->chan)
		queue_push(&cq->chan->q, 0, cq);
}

/* A CQ goes: its undelivered events and its place in the channel. */
void shca_channel_forget_cq(struct shca_comp_channel *ch, struct shca_cq *cq)
{
	struct shca_cq **pp;

	pthread_mutex_lock(&ch->q.lock);
	__atomic_store_n(&cq->shm->chan_idx, 0, __ATOMIC_RELEASE);
	for (pp = &ch->cqs; *pp; pp = &(*pp)->chan_next)
		if (*pp == cq) {
			*pp = cq->chan_next;
			break;
		}
	pthread_mutex_unlock(&ch->q.lock);
	queue_remove_obj(&ch->q, cq);
}

static void deliver_comp(struct shca_event *ev, void *arg)
{
	struct shca_cq *cq = ev->obj;

	*(struct shca_cq **)arg = cq;
	pthread_mutex_lock(&cq->cqx.mutex);
	cq->comp_events_reported++;
	pthread_mutex_unlock(&cq->cqx.mutex);
}

SHCA_DEFAULT_VERSION(ibv_get_cq_event)
int shca_latest_ibv_get_cq_event(struct ibv_comp_channel *channel,
				  struct ibv_cq **cq, void **cq_context)
{
	struct shca_comp_channel *ch = to_schan(channel);
	struct shca_cq *scq = NULL;
	int ret;

	/* a destroyed channel (quarantined): EBADF, as a read of a closed
	 * file would give */
	if (__atomic_load_n(&ch->magic, __ATOMIC_ACQUIRE) != SHCA_CHAN_MAGIC) {
		errno = EBADF;
		return -1;
	}
	ret = queue_pop(&ch->q, deliver_comp, &scq);
	if (ret) {
		errno = -ret;
		return -1;
	}
	*cq = ibv_cq_ex_to_cq(&scq->cqx);
	*cq_context = scq->cqx.cq_context;
	return 0;
}

SHCA_DEFAULT_VERSION(ibv_ack_cq_events)
void shca_latest_ibv_ack_cq_events(struct ibv_cq *cq, unsigned int nevents)
{
	if (!obj_alive(&to_scq(cq)->obj, SHCA_OT_CQ))
		return;	/* destroyed with its context: nothing waits */
	pthread_mutex_lock(&cq->mutex);
	cq->comp_events_completed += nevents;
	pthread_cond_signal(&cq->cond);
	pthread_mutex_unlock(&cq->mutex);
}
