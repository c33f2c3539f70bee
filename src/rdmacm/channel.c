// SPDX-License-Identifier: MIT
/*
 * Event channels and events.
 *
 * A channel is a FIFO of events and an eventfd.  Invariant (under
 * cm_lock): the eventfd's counter is non-zero exactly when the FIFO is
 * not empty, so the fd polls readable when an event waits, works in
 * epoll, and rdma_get_cm_event() honours O_NONBLOCK on it (-1/EAGAIN) or
 * sleeps until an event comes, as rdma-core's write to
 * /dev/infiniband/rdma_cm does: in a read() of the eventfd, which a signal
 * interrupts by the kernel's rule (common/evfd.h: EINTR unless the handler
 * has SA_RESTART).  That read takes the counter; the reader writes it
 * again if events remain after it took its own.
 *
 * A thread asleep in rdma_get_cm_event when the channel is destroyed (a
 * CM thread the application does not stop, rping's) sleeps on for good,
 * as one in rdma-core's read of the closed rdma_cm fd does: the channel,
 * its memory and its fd, stays for it.
 *
 * Event accounting follows the kernel's ucma and rdma-core: an event
 * counts against its owner (the listener for CONNECT_REQUEST) when it is
 * retrieved, and again when it is acked; rdma_destroy_id, rdma_migrate_id
 * and rdma_leave_multicast wait until every retrieved event is acked.
 * Events not retrieved yet are dropped with their id; a dropped
 * CONNECT_REQUEST takes its new id with it (the requester gets a REJ).
 *
 * Some events need work in the caller's thread when they are retrieved,
 * as in rdma-core: a CONNECT_RESPONSE on an id with a QP moves the QP to
 * RTR and RTS and sends the RTU, and becomes ESTABLISHED (or
 * CONNECT_ERROR); a MULTICAST_JOIN attaches the QP; a REJECTED moves the
 * QP to the error state.
 */
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "cma.h"
#include "../common/evfd.h"
#include "../common/nocancel.h"

struct cm_channel *cm_channel_new(void)
{
	struct cm_channel *ch = calloc(1, sizeof(*ch));

	if (!ch)
		return NULL;
	ch->ch.fd = eventfd(0, EFD_CLOEXEC);
	if (ch->ch.fd < 0) {
		free(ch);
		return NULL;
	}
	ch->tail = &ch->head;
	return ch;
}

static void fd_signal(struct cm_channel *ch)
{
	shca_evfd_signal(ch->ch.fd);
}

/* Reset the counter: the FIFO just became empty.  Never blocks, even
 * when a waiter's read took the counter first (common/evfd.h). */
static void fd_clear(struct cm_channel *ch)
{
	shca_evfd_drain(ch->ch.fd);
}

static void event_free(struct cm_event *ev)
{
	if (ev->child)
		cm_id_destroy_locked(ev->child);
	free(ev);
}

/* A channel no id ever used. */
void cm_channel_free(struct cm_channel *ch)
{
	ch->destroyed = true;
	ch->nids++;
	cm_channel_put(ch);
}

void cm_channel_put(struct cm_channel *ch)
{
	struct cm_event *ev;

	if (!ch || --ch->nids > 0 || !ch->destroyed || ch->waiters)
		return;
	while ((ev = ch->head)) {
		ch->head = ev->next;
		event_free(ev);
	}
	close(ch->ch.fd);
	free(ch);
}

struct cm_event *cm_event_new(struct cm_id *id, enum rdma_cm_event_type type,
			      int status)
{
	struct cm_event *ev = calloc(1, sizeof(*ev));

	if (!ev) {
		shca_err("out of memory: %s on an id lost",
			 rdma_event_str(type));
		return NULL;
	}
	ev->event.id = &id->id;
	ev->event.event = type;
	ev->event.status = status;
	ev->owner = id;
	return ev;
}

/*
 * Copy private data into the event and point the event's parameters at
 * it: param.ud for UD ids (SIDR), param.conn otherwise.
 */
void cm_event_pdata(struct cm_event *ev, const void *pdata, size_t len,
		    bool ud)
{
	if (!len)
		return;
	memcpy(ev->private_data, pdata, len);
	if (ud) {
		ev->event.param.ud.private_data = ev->private_data;
		ev->event.param.ud.private_data_len = (uint8_t)len;
	} else {
		ev->event.param.conn.private_data = ev->private_data;
		ev->event.param.conn.private_data_len = (uint8_t)len;
	}
}

/*
 * A connection request arrived for listener: child, the new id, joins the
 * listener's children (pending until accepted or rejected) and the
 * CONNECT_REQUEST event is made, for the caller to fill and queue.  NULL
 * (and child destroyed) without memory.  cm_lock held.
 */
struct cm_event *cm_listener_adopt(struct cm_id *listener,
				   struct cm_id *child)
{
	struct cm_event *ev;

	child->listener = listener;
	child->next_child = listener->children;
	listener->children = child;
	child->req_pending = true;
	listener->pending_reqs++;
	ev = cm_event_new(child, RDMA_CM_EVENT_CONNECT_REQUEST, 0);
	if (!ev) {
		cm_id_destroy_locked(child);
		return NULL;
	}
	ev->child = child;
	ev->event.listen_id = &listener->id;
	return ev;
}

/* Queue ev on its owner's channel.  cm_lock held. */
void cm_event_queue(struct cm_id *owner, struct cm_event *ev)
{
	struct cm_channel *ch = owner->chan;

	if (!ev)
		return;
	ev->owner = owner;
	if (!ch || ch->destroyed) {
		event_free(ev);
		return;
	}
	shca_dbg("id %p: %s status %d", (void *)ev->event.id,
		 rdma_event_str(ev->event.event), ev->event.status);
	ev->next = NULL;
	if (!ch->head)
		fd_signal(ch);
	*ch->tail = ev;
	ch->tail = &ev->next;
}

/* Unlink the queued events that match; returns them as a list. */
static struct cm_event *channel_take(struct cm_channel *ch,
				     bool (*match)(struct cm_event *, void *),
				     void *arg)
{
	struct cm_event **pp, *ev, *taken = NULL, **ttail = &taken;
	bool had = ch->head != NULL;

	for (pp = &ch->head; (ev = *pp);) {
		if (!match(ev, arg)) {
			pp = &ev->next;
			continue;
		}
		*pp = ev->next;
		ev->next = NULL;
		*ttail = ev;
		ttail = &ev->next;
	}
	ch->tail = &ch->head;
	for (ev = ch->head; ev; ev = ev->next)
		ch->tail = &ev->next;
	if (had && !ch->head)
		fd_clear(ch);
	return taken;
}

static bool owned_by(struct cm_event *ev, void *id)
{
	return ev->owner == id;
}

static bool of_mc(struct cm_event *ev, void *mc)
{
	return ev->mc == mc;
}

/* Drop id's events that were not retrieved.  cm_lock held. */
void cm_channel_drop_events(struct cm_id *id)
{
	struct cm_event *ev;

	if (!id->chan)
		return;
	ev = channel_take(id->chan, owned_by, id);
	while (ev) {
		struct cm_event *next = ev->next;

		event_free(ev);
		ev = next;
	}
}

void cm_channel_drop_mc_events(struct cm_mc *mc)
{
	struct cm_event *ev = channel_take(mc->id->chan, of_mc, mc);

	while (ev) {
		struct cm_event *next = ev->next;

		free(ev);
		ev = next;
	}
}

/* Move id's waiting events to another channel (rdma_migrate_id). */
void cm_channel_move_events(struct cm_id *id, struct cm_channel *to)
{
	struct cm_event *ev = channel_take(id->chan, owned_by, id);

	while (ev) {
		struct cm_event *next = ev->next;

		if (!to->head)
			fd_signal(to);
		ev->next = NULL;
		*to->tail = ev;
		to->tail = &ev->next;
		ev = next;
	}
}

static struct cm_event *channel_pop(struct cm_channel *ch)
{
	struct cm_event *ev = ch->head;

	if (!ev)
		return NULL;
	ch->head = ev->next;
	if (!ch->head) {
		ch->tail = &ch->head;
		fd_clear(ch);
	}
	ev->next = NULL;
	return ev;
}

static void event_done(struct cm_event *ev)
{
	if (ev->mc)
		ev->mc->events_completed++;
	ev->owner->events_completed++;
	pthread_cond_broadcast(&ev->owner->cond);
}

/*
 * The work rdma-core does on an event as it is retrieved.  false: the
 * event is discarded (counted as retrieved and acked).
 */
static bool event_process(struct cm_event *ev)
{
	struct cm_id *id = to_cm_id(ev->event.id);

	if (ev->mc)
		ev->mc->events_reported++;
	ev->owner->events_reported++;

	switch (ev->event.event) {
	case RDMA_CM_EVENT_CONNECT_REQUEST:
		if (id->req_pending && id->listener)
			id->listener->pending_reqs--;
		id->req_pending = false;
		ev->child = NULL;	/* the caller's now */
		break;
	case RDMA_CM_EVENT_CONNECT_RESPONSE:
		if (!ev->conn_resp)
			break;
		ev->conn_resp = false;
		if (!id->id.qp) {
			id->remote_ece.vendor_id = ev->ece.vendor_id;
			id->remote_ece.options = ev->ece.options;
			break;
		}
		ev->event.status = cm_conn_resp(id, ev);
		if (!ev->event.status) {
			ev->event.event = RDMA_CM_EVENT_ESTABLISHED;
		} else {
			ev->event.event = RDMA_CM_EVENT_CONNECT_ERROR;
			id->connect_error = true;
		}
		break;
	case RDMA_CM_EVENT_REJECTED:
		if (id->connect_error)
			return false;
		cm_modify_qp_err(id);
		break;
	case RDMA_CM_EVENT_DISCONNECTED:
		if (id->connect_error)
			return false;
		break;
	case RDMA_CM_EVENT_MULTICAST_JOIN:
		ev->event.status = cm_mc_attach(ev);
		if (ev->event.status)
			ev->event.event = RDMA_CM_EVENT_MULTICAST_ERROR;
		break;
	default:
		break;
	}
	return true;
}

static bool fd_nonblocking(int fd)
{
	int fl = fcntl(fd, F_GETFL);

	return fl >= 0 && (fl & O_NONBLOCK);
}

/* A thread cancelled asleep in rdma_get_cm_event: it no longer keeps
 * the channel (freed here if it was destroyed meanwhile). */
static void wait_cancelled(void *arg)
{
	struct cm_channel *ch = arg;

	pthread_mutex_lock(&cm_lock);
	ch->waiters--;
	ch->nids++;
	cm_channel_put(ch);
	pthread_mutex_unlock(&cm_lock);
}

/* A thread whose channel was destroyed while it slept: it sleeps for
 * good (signals interrupt it; it goes back to sleep), in the caller's
 * cancel state cs: cancellable as in a read of a closed rdma_cm fd.
 * cm_lock held. */
static void __attribute__((noreturn)) sleep_for_good(struct cm_channel *ch,
						     int cs)
{
	ch->waiters++;		/* the channel stays, for this thread */
	pthread_mutex_unlock(&cm_lock);
	pthread_cleanup_push(wait_cancelled, ch);
	shca_cancel_restore(cs);
	for (;;)
		poll(NULL, 0, -1);
	pthread_cleanup_pop(0);
}

/*
 * rdma_get_cm_event without the init check: cm_lock not held.  The sleep
 * is the one cancellation point, as rdma-core's write() to the rdma_cm
 * file is: none while cm_lock is held (common/nocancel.h).
 */
int cm_get_event(struct cm_channel *ch, struct rdma_cm_event **event)
{
	bool took = false;	/* this thread's wait took the counter */
	struct cm_event *ev;
	int cs = shca_cancel_off();

	pthread_mutex_lock(&cm_lock);
	for (;;) {
		int ret;

		ev = channel_pop(ch);
		if (ev && took && ch->head)
			fd_signal(ch);	/* our wait took the counter */
		took = false;
		if (ev) {
			if (event_process(ev))
				break;
			event_done(ev);
			free(ev);
			continue;
		}
		if (fd_nonblocking(ch->ch.fd)) {
			pthread_mutex_unlock(&cm_lock);
			shca_cancel_restore(cs);
			return -EAGAIN;
		}
		/* asleep, this thread keeps the channel (and its fd) from
		 * rdma_destroy_event_channel; asleep in read(), as rdma-core
		 * is in its write() to the rdma_cm file, so that a signal
		 * handler without SA_RESTART ends the wait with EINTR */
		ch->waiters++;
		pthread_mutex_unlock(&cm_lock);
		pthread_cleanup_push(wait_cancelled, ch);
		shca_cancel_restore(cs);
		ret = shca_evfd_wait(ch->ch.fd);
		cs = shca_cancel_off();
		pthread_cleanup_pop(0);
		pthread_mutex_lock(&cm_lock);
		ch->waiters--;
		if (ch->destroyed && !ch->nids)
			sleep_for_good(ch, cs);
		if (ret < 0) {
			pthread_mutex_unlock(&cm_lock);
			shca_cancel_restore(cs);
			return ret;
		}
		took = ret > 0;
	}
	pthread_mutex_unlock(&cm_lock);
	shca_cancel_restore(cs);
	*event = &ev->event;
	return 0;
}

/* rdma_ack_cm_event: cm_lock held. */
void cm_ack_event(struct cm_event *ev)
{
	event_done(ev);
	free(ev);
}

/* ------------------------------------------------------------------ */
/* Exported calls                                                      */

struct rdma_event_channel *rdma_create_event_channel(void)
{
	struct cm_channel *ch;
	int ret = cm_init();

	if (ret) {
		errno = -ret;
		return NULL;
	}
	ch = cm_channel_new();
	return ch ? &ch->ch : NULL;
}

void rdma_destroy_event_channel(struct rdma_event_channel *channel)
{
	struct cm_channel *ch;

	if (!channel)
		return;
	ch = to_cm_channel(channel);
	pthread_mutex_lock(&cm_lock);
	/* ids still on it keep it until they go: no write to a closed fd;
	 * a thread asleep in rdma_get_cm_event keeps it for good */
	cm_channel_free(ch);
	pthread_mutex_unlock(&cm_lock);
}

int rdma_get_cm_event(struct rdma_event_channel *channel,
		      struct rdma_cm_event **event)
{
	int ret = cm_init();

	if (ret)
		return cm_err(ret);
	if (!event || !channel)
		return cm_err(-EINVAL);
	ret = cm_get_event(to_cm_channel(channel), event);
	return ret ? cm_err(ret) : 0;
}

int rdma_ack_cm_event(struct rdma_cm_event *event)
{
	if (!event)
		return cm_err(-EINVAL);
	pthread_mutex_lock(&cm_lock);
	cm_ack_event(to_cm_event(event));
	pthread_mutex_unlock(&cm_lock);
	return 0;
}

const char *rdma_event_str(enum rdma_cm_event_type event)
{
#define NAME(e) [RDMA_CM_EVENT_##e] = "RDMA_CM_EVENT_" #e
	static const char *const names[] = {
		NAME(ADDR_RESOLVED),	NAME(ADDR_ERROR),
		NAME(ROUTE_RESOLVED),	NAME(ROUTE_ERROR),
		NAME(CONNECT_REQUEST),	NAME(CONNECT_RESPONSE),
		NAME(CONNECT_ERROR),	NAME(UNREACHABLE),
		NAME(REJECTED),		NAME(ESTABLISHED),
		NAME(DISCONNECTED),	NAME(DEVICE_REMOVAL),
		NAME(MULTICAST_JOIN),	NAME(MULTICAST_ERROR),
		NAME(ADDR_CHANGE),	NAME(TIMEWAIT_EXIT),
	};
#undef NAME

	if ((unsigned int)event < ARRAY_SIZE(names) && names[event])
		return names[event];
	return "UNKNOWN EVENT";
}
