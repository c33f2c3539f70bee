// SPDX-License-Identifier: MIT
/*
 * Event channels and events: a real fd (poll, epoll, O_NONBLOCK ->
 * EAGAIN), blocking waits, acks and what rdma_destroy_id and
 * rdma_migrate_id do with events.
 */
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "cm_common.h"
#include "asleep.h"

static bool readable(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };

	return poll(&p, 1, 0) == 1 && (p.revents & POLLIN);
}

static void resolve_start(struct rdma_cm_id *id)
{
	struct sockaddr_in dst;

	make_addr(&dst, loopback_ip(), 7);
	ASSERT_EQ(rdma_resolve_addr(id, NULL, (struct sockaddr *)&dst,
				    2000), 0);
}

TEST(nonblocking_channel)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_event *ev;
	struct rdma_cm_id *id;

	ASSERT_NOT_NULL(ch);
	ASSERT_GE(ch->fd, 0);
	ASSERT_EQ(fcntl(ch->fd, F_SETFL, fcntl(ch->fd, F_GETFL) | O_NONBLOCK),
		  0);
	errno = 0;
	ASSERT_EQ(rdma_get_cm_event(ch, &ev), -1);
	ASSERT_EQ(errno, EAGAIN);
	ASSERT(!readable(ch->fd));

	ASSERT_EQ(rdma_create_id(ch, &id, ch, RDMA_PS_TCP), 0);
	resolve_start(id);
	ASSERT(readable(ch->fd));
	ASSERT_EQ(rdma_get_cm_event(ch, &ev), 0);
	ASSERT_EQ(ev->event, RDMA_CM_EVENT_ADDR_RESOLVED);
	ASSERT_EQ(ev->status, 0);
	ASSERT(ev->id == id);
	ASSERT_NULL(ev->listen_id);
	ASSERT(ev->id->context == ch);
	ASSERT(!readable(ch->fd));
	ASSERT_EQ(rdma_get_cm_event(ch, &ev), -1);
	ASSERT_EQ(errno, EAGAIN);

	/* two events: readable until both are taken */
	ASSERT_EQ(rdma_resolve_route(id, 2000), 0);
	ASSERT_EQ(rdma_ack_cm_event(ev), 0);
	ASSERT(readable(ch->fd));
	ASSERT_EQ(rdma_get_cm_event(ch, &ev), 0);
	ASSERT_EQ(ev->event, RDMA_CM_EVENT_ROUTE_RESOLVED);
	ASSERT_EQ(rdma_ack_cm_event(ev), 0);
	ASSERT(!readable(ch->fd));
	ASSERT_EQ(rdma_destroy_id(id), 0);
	rdma_destroy_event_channel(ch);
}

TEST(epoll_channel)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct epoll_event ev = { .events = EPOLLIN }, out;
	struct rdma_cm_id *id;
	int ep = epoll_create1(0);

	ASSERT_GE(ep, 0);
	ASSERT_EQ(epoll_ctl(ep, EPOLL_CTL_ADD, ch->fd, &ev), 0);
	ASSERT_EQ(epoll_wait(ep, &out, 1, 0), 0);
	ASSERT_EQ(rdma_create_id(ch, &id, NULL, RDMA_PS_TCP), 0);
	resolve_start(id);
	ASSERT_EQ(epoll_wait(ep, &out, 1, -1), 1);
	expect_event_ack(ch, RDMA_CM_EVENT_ADDR_RESOLVED);
	ASSERT_EQ(epoll_wait(ep, &out, 1, 0), 0);
	close(ep);
	ASSERT_EQ(rdma_destroy_id(id), 0);
	rdma_destroy_event_channel(ch);
}

struct waiter {
	struct rdma_event_channel *ch;
	struct rdma_cm_event *ev;
	pid_t tid;
	int ret, returned;
};

static void *wait_event(void *arg)
{
	struct waiter *w = arg;

	asleep_self(&w->tid);
	w->ret = rdma_get_cm_event(w->ch, &w->ev);
	__atomic_store_n(&w->returned, 1, __ATOMIC_RELEASE);
	return NULL;
}

/* Sleeps on the channel's fd (rdma-core reads the rdma_cm file) until
 * the event comes, then returns it. */
TEST(blocking_get)
{
	struct waiter w = { .ch = rdma_create_event_channel() };
	struct rdma_cm_id *id;
	pthread_t t;

	ASSERT_EQ(rdma_create_id(w.ch, &id, NULL, RDMA_PS_TCP), 0);
	ASSERT_EQ(pthread_create(&t, NULL, wait_event, &w), 0);
	ASSERT_ASLEEP_ON_FD(&w.tid, &w.returned, w.ch->fd);
	resolve_start(id);
	ASSERT_EQ(pthread_join(t, NULL), 0);
	ASSERT_EQ(w.ret, 0);
	ASSERT_EQ(w.ev->event, RDMA_CM_EVENT_ADDR_RESOLVED);
	ASSERT_EQ(rdma_ack_cm_event(w.ev), 0);
	ASSERT_EQ(rdma_destroy_id(id), 0);
	rdma_destroy_event_channel(w.ch);
}

TEST(event_str_and_bad_args)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();

	ASSERT_STR_EQ(rdma_event_str(RDMA_CM_EVENT_ADDR_RESOLVED),
		      "RDMA_CM_EVENT_ADDR_RESOLVED");
	ASSERT_STR_EQ(rdma_event_str(RDMA_CM_EVENT_CONNECT_REQUEST),
		      "RDMA_CM_EVENT_CONNECT_REQUEST");
	ASSERT_STR_EQ(rdma_event_str(RDMA_CM_EVENT_TIMEWAIT_EXIT),
		      "RDMA_CM_EVENT_TIMEWAIT_EXIT");
	ASSERT_STR_EQ(rdma_event_str((enum rdma_cm_event_type)99),
		      "UNKNOWN EVENT");
	errno = 0;
	ASSERT_EQ(rdma_ack_cm_event(NULL), -1);
	ASSERT_EQ(errno, EINVAL);
	ASSERT_EQ(rdma_get_cm_event(ch, NULL), -1);
	ASSERT_EQ(errno, EINVAL);
	rdma_destroy_event_channel(ch);
}

struct destroyer {
	struct rdma_cm_id *id;
	pid_t tid;
	int done;
};

static void *destroy_thread(void *arg)
{
	struct destroyer *d = arg;

	asleep_self(&d->tid);
	rdma_destroy_id(d->id);
	__atomic_store_n(&d->done, 1, __ATOMIC_SEQ_CST);
	return NULL;
}

/* rdma_destroy_id sleeps in a condition wait until the id's events are
 * acked (as rdma-core's ucma_destroy_kern_id then waits for
 * events_completed); the id's condition variable is private, so any
 * condition wait (not a lock) counts. */
TEST(destroy_waits_for_ack)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct destroyer d = { 0 };
	struct rdma_cm_event *ev;
	pthread_t t;

	ASSERT_EQ(rdma_create_id(ch, &d.id, NULL, RDMA_PS_TCP), 0);
	resolve_start(d.id);
	ev = expect_event(ch, RDMA_CM_EVENT_ADDR_RESOLVED);
	ASSERT_EQ(pthread_create(&t, NULL, destroy_thread, &d), 0);
	/* the event is not acked: rdma_destroy_id is still waiting */
	ASSERT_ASLEEP_IN_COND(&d.tid, &d.done, NULL);
	ASSERT_EQ(rdma_ack_cm_event(ev), 0);
	ASSERT_EQ(pthread_join(t, NULL), 0);
	ASSERT_EQ(d.done, 1);
	rdma_destroy_event_channel(ch);
}

TEST(destroy_drops_queued_events)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_event *ev;
	struct rdma_cm_id *id;

	ASSERT_EQ(rdma_create_id(ch, &id, NULL, RDMA_PS_TCP), 0);
	resolve_start(id);
	ASSERT(readable(ch->fd));
	ASSERT_EQ(rdma_destroy_id(id), 0);
	ASSERT(!readable(ch->fd));
	fcntl(ch->fd, F_SETFL, O_NONBLOCK);
	ASSERT_EQ(rdma_get_cm_event(ch, &ev), -1);
	ASSERT_EQ(errno, EAGAIN);
	rdma_destroy_event_channel(ch);
}

TEST(migrate_id)
{
	struct rdma_event_channel *a = rdma_create_event_channel();
	struct rdma_event_channel *b = rdma_create_event_channel();
	struct rdma_cm_id *id, *sync_id;

	ASSERT_EQ(rdma_create_id(a, &id, NULL, RDMA_PS_TCP), 0);
	resolve_start(id);
	ASSERT(readable(a->fd));
	ASSERT_EQ(rdma_migrate_id(id, b), 0);
	ASSERT(id->channel == b);
	ASSERT(!readable(a->fd));
	ASSERT(readable(b->fd));
	expect_event_ack(b, RDMA_CM_EVENT_ADDR_RESOLVED);
	/* to a private channel: the id becomes synchronous */
	ASSERT_EQ(rdma_migrate_id(id, NULL), 0);
	ASSERT(id->channel != a && id->channel != b);
	ASSERT_EQ(rdma_resolve_route(id, 2000), 0);
	ASSERT_NOT_NULL(id->event);
	ASSERT_EQ(id->event->event, RDMA_CM_EVENT_ROUTE_RESOLVED);
	errno = 0;
	ASSERT_EQ(rdma_migrate_id(id, NULL), -1);
	ASSERT_EQ(errno, EINVAL);
	/* and back to a channel */
	ASSERT_EQ(rdma_migrate_id(id, a), 0);
	ASSERT_NULL(id->event);
	ASSERT_EQ(rdma_destroy_id(id), 0);

	ASSERT_EQ(rdma_create_id(NULL, &sync_id, NULL, RDMA_PS_TCP), 0);
	ASSERT_EQ(rdma_migrate_id(sync_id, NULL), -1);
	ASSERT_EQ(errno, EINVAL);
	ASSERT_EQ(rdma_destroy_id(sync_id), 0);
	rdma_destroy_event_channel(a);
	rdma_destroy_event_channel(b);
}

/* A process forked after the CM was used can use it afresh: a connection
 * between two ids of that process, which needs the CM thread. */
static void fresh_cm(struct peer *p, void *arg)
{
	struct rdma_event_channel *chs = rdma_create_event_channel();
	struct rdma_event_channel *chc = rdma_create_event_channel();
	struct rdma_cm_id *lid, *id, *child;
	struct rdma_cm_event *ev;
	uint16_t port;

	(void)p;
	(void)arg;
	port = listen_on(chs, &lid, loopback_ip(), RDMA_PS_TCP);
	ASSERT_EQ(rdma_create_id(chc, &id, NULL, RDMA_PS_TCP), 0);
	resolve_to(chc, id, loopback_ip(), port);
	make_qp(id, IBV_QPT_RC);
	ASSERT_EQ(rdma_connect(id, NULL), 0);
	ev = expect_event(chs, RDMA_CM_EVENT_CONNECT_REQUEST);
	child = ev->id;
	ASSERT_EQ(rdma_ack_cm_event(ev), 0);
	make_qp(child, IBV_QPT_RC);
	ASSERT_EQ(rdma_accept(child, NULL), 0);
	expect_event_ack(chc, RDMA_CM_EVENT_ESTABLISHED);
	expect_event_ack(chs, RDMA_CM_EVENT_ESTABLISHED);
	rdma_destroy_qp(id);
	ASSERT_EQ(rdma_destroy_id(id), 0);
	expect_event_ack(chs, RDMA_CM_EVENT_DISCONNECTED);
	rdma_destroy_qp(child);
	ASSERT_EQ(rdma_destroy_id(child), 0);
	ASSERT_EQ(rdma_destroy_id(lid), 0);
	rdma_destroy_event_channel(chs);
	rdma_destroy_event_channel(chc);
}

TEST(fork_after_use)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_id *id;
	struct peer p;

#ifdef __SANITIZE_THREAD__
	SKIP("TSan does not start threads in the child of a threaded process");
#endif
#ifdef __SANITIZE_ADDRESS__
	/* seen: the child's threads asleep for good on ASan's allocator
	 * lock, which a thread of the parent held at the fork */
	SKIP("gcc 12's ASan does not hold its allocator lock across fork: "
	     "the child of a threaded process may inherit it taken");
#endif
	ASSERT_EQ(rdma_create_id(ch, &id, NULL, RDMA_PS_TCP), 0);
	resolve_to(ch, id, loopback_ip(), 7);	/* the CM thread runs */
	peer_start(&p, fresh_cm, NULL);
	peer_wait(&p);
	ASSERT_EQ(rdma_destroy_id(id), 0);
	rdma_destroy_event_channel(ch);
}
