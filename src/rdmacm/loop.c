// SPDX-License-Identifier: MIT
/*
 * The CM thread: one per process, started on first need, asleep in
 * epoll_wait on the CM's sockets and on one timerfd.  It never spins: an
 * idle process costs nothing.  Each readiness is handled under cm_lock.
 *
 * Sockets are found from an epoll event through a table indexed by fd;
 * the event carries the fd and a serial number, so an event for a socket
 * that a caller closed meanwhile (its fd perhaps reused) finds nothing and
 * is dropped.  That is what lets any thread close a socket at any time.
 *
 * Streams are framed here: bytes are read until a whole CM message is in
 * (wire.h gives its length from the header), which conn.c then handles.
 * Output that the socket does not take at once is buffered and written
 * when it becomes writable.
 *
 * Timers are a list sorted by deadline; the timerfd is armed for the
 * first one.  Their callbacks run in this thread, under cm_lock.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "cma.h"

pthread_mutex_t cm_lock = PTHREAD_MUTEX_INITIALIZER;

#define TIMER_TOKEN	UINT64_MAX
#define MAX_EVENTS	64

static struct {
	pthread_once_t once;
	int err;
	int epfd;
	int tfd;
	struct cm_sock **by_fd;
	int nfds;
	uint32_t serial;
	struct cm_timer *timers;
} loop = { .once = PTHREAD_ONCE_INIT, .epfd = -1, .tfd = -1 };

uint64_t cm_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static uint64_t token_of(const struct cm_sock *s)
{
	return (uint64_t)(uint32_t)s->fd << 32 | s->serial;
}

static struct cm_sock *sock_lookup(uint64_t token)
{
	int fd = (int)(token >> 32);
	struct cm_sock *s;

	if (fd < 0 || fd >= loop.nfds)
		return NULL;
	s = loop.by_fd[fd];
	return s && s->serial == (uint32_t)token ? s : NULL;
}

/* ------------------------------------------------------------------ */
/* Timers                                                              */

static void timers_program(void)
{
	struct itimerspec its = { 0 };

	if (loop.timers) {
		uint64_t d = loop.timers->deadline;

		its.it_value.tv_sec = (time_t)(d / 1000);
		its.it_value.tv_nsec = (long)(d % 1000) * 1000000;
		if (!its.it_value.tv_sec && !its.it_value.tv_nsec)
			its.it_value.tv_nsec = 1;
	}
	if (loop.tfd >= 0)
		timerfd_settime(loop.tfd, TFD_TIMER_ABSTIME, &its, NULL);
}

static void timer_unlink(struct cm_timer *t)
{
	struct cm_timer **pp;

	for (pp = &loop.timers; *pp; pp = &(*pp)->next) {
		if (*pp == t) {
			*pp = t->next;
			break;
		}
	}
	t->next = NULL;
	t->armed = false;
}

/* Arm (or re-arm) t to fire in ms milliseconds.  cm_lock held. */
void cm_timer_arm(struct cm_timer *t, unsigned int ms)
{
	struct cm_timer **pp;
	bool first;

	if (t->armed)
		timer_unlink(t);
	t->deadline = cm_now_ms() + ms;
	for (pp = &loop.timers; *pp && (*pp)->deadline <= t->deadline;
	     pp = &(*pp)->next)
		;
	t->next = *pp;
	*pp = t;
	t->armed = true;
	first = loop.timers == t;
	if (first)
		timers_program();
}

void cm_timer_cancel(struct cm_timer *t)
{
	if (!t->armed)
		return;
	timer_unlink(t);
	timers_program();
}

static void timers_run(void)
{
	uint64_t now = cm_now_ms();
	struct cm_timer *t;

	while ((t = loop.timers) && t->deadline <= now) {
		loop.timers = t->next;
		t->next = NULL;
		t->armed = false;
		t->fn(t);
	}
	timers_program();
}

/* ------------------------------------------------------------------ */
/* Sockets                                                             */

struct cm_sock *cm_sock_new(int fd, enum cm_sock_kind kind)
{
	struct cm_sock *s;

	if (fd >= loop.nfds) {
		int n = loop.nfds ? loop.nfds : 64;
		struct cm_sock **t;

		while (n <= fd)
			n *= 2;
		t = realloc(loop.by_fd, (size_t)n * sizeof(*t));
		if (!t)
			return NULL;
		memset(t + loop.nfds, 0, (size_t)(n - loop.nfds) * sizeof(*t));
		loop.by_fd = t;
		loop.nfds = n;
	}
	s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	s->fd = fd;
	s->kind = kind;
	s->refs = 1;
	if (++loop.serial == 0)
		++loop.serial;
	s->serial = loop.serial;
	loop.by_fd[fd] = s;
	return s;
}

/* Watch s for these epoll events (0: stop watching).  cm_lock held. */
int cm_sock_watch(struct cm_sock *s, uint32_t events)
{
	struct epoll_event ev = { .events = events, .data.u64 = token_of(s) };
	int op;

	if (!events) {
		if (s->registered)
			epoll_ctl(loop.epfd, EPOLL_CTL_DEL, s->fd, NULL);
		s->registered = false;
		s->events = 0;
		return 0;
	}
	op = s->registered ? EPOLL_CTL_MOD : EPOLL_CTL_ADD;
	if (epoll_ctl(loop.epfd, op, s->fd, &ev))
		return -errno;
	s->registered = true;
	s->events = events;
	return 0;
}

void cm_sock_close(struct cm_sock *s)
{
	if (!s)
		return;
	cm_sock_watch(s, 0);
	if (s->fd >= 0 && s->fd < loop.nfds && loop.by_fd[s->fd] == s)
		loop.by_fd[s->fd] = NULL;
	close(s->fd);
	free(s->out);
	free(s);
}

void cm_sock_put(struct cm_sock *s)
{
	if (s && --s->refs == 0)
		cm_sock_close(s);
}

static uint32_t stream_events(const struct cm_sock *s);

/*
 * Let a stream go once what was sent on it is out (a REJ, a DREQ...):
 * nothing more is read from it.  The kernel sends what the socket holds
 * on close; this is for what it has not taken yet.
 */
void cm_sock_release(struct cm_sock *s)
{
	if (!s)
		return;
	s->id = NULL;
	s->listener = NULL;
	if (s->kind != CM_SOCK_STREAM || !s->out_len || s->hup) {
		cm_sock_close(s);
		return;
	}
	s->closing = true;
	if (cm_sock_watch(s, stream_events(s)))
		cm_sock_close(s);
}

static int out_append(struct cm_sock *s, const uint8_t *p, size_t len)
{
	if (s->out_len + len > s->out_cap) {
		size_t cap = s->out_cap ? s->out_cap * 2 : 1024;
		uint8_t *o;

		while (cap < s->out_len + len)
			cap *= 2;
		o = realloc(s->out, cap);
		if (!o)
			return -ENOMEM;
		s->out = o;
		s->out_cap = cap;
	}
	memcpy(s->out + s->out_len, p, len);
	s->out_len += len;
	return 0;
}

static uint32_t stream_events(const struct cm_sock *s)
{
	uint32_t ev = s->closing ? 0 : EPOLLIN | EPOLLRDHUP;

	if (s->connecting || s->out_len)
		ev |= EPOLLOUT;
	return ev;
}

/*
 * Send a whole message on a stream, now or, for what the socket does not
 * take, when it becomes writable.  0, or -EPIPE once the peer is gone.
 */
int cm_sock_send(struct cm_sock *s, const void *msg, size_t len)
{
	const uint8_t *p = msg;
	ssize_t n = 0;
	int ret;

	if (!s || s->hup)
		return -EPIPE;
	if (!s->connecting && !s->out_len) {
		n = send(s->fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0) {
			if (errno != EAGAIN && errno != EWOULDBLOCK &&
			    errno != EINTR)
				return -EPIPE;
			n = 0;
		}
		if ((size_t)n == len)
			return 0;
	}
	ret = out_append(s, p + n, len - (size_t)n);
	if (ret)
		return ret;
	return cm_sock_watch(s, stream_events(s));
}

static void stream_flush(struct cm_sock *s)
{
	while (s->out_len) {
		ssize_t n = send(s->fd, s->out, s->out_len,
				 MSG_NOSIGNAL | MSG_DONTWAIT);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno != EAGAIN && errno != EWOULDBLOCK)
				s->out_len = 0;	/* reading sees it */
			break;
		}
		memmove(s->out, s->out + n, s->out_len - (size_t)n);
		s->out_len -= (size_t)n;
	}
	if (s->closing && !s->out_len) {
		cm_sock_close(s);
		return;
	}
	cm_sock_watch(s, stream_events(s));
}

/* Read what there is; hand over each whole message.  s may be gone on
 * return (closed by a handler). */
static void stream_readable(struct cm_sock *s)
{
	uint64_t token = token_of(s);
	uint8_t msg[CM_MSG_MAX];

	for (;;) {
		ssize_t n = recv(s->fd, s->in + s->in_len,
				 sizeof(s->in) - s->in_len, MSG_DONTWAIT);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		if (n <= 0) {
			cm_stream_hangup(s);
			return;
		}
		s->in_len += (size_t)n;
		for (;;) {
			size_t len;
			int ret = cm_wire_peek_length(s->in, s->in_len, &len);

			if (ret == -EAGAIN || (!ret && len > s->in_len))
				break;
			if (ret) {
				shca_warn("bad CM message: stream closed");
				cm_stream_hangup(s);
				return;
			}
			memcpy(msg, s->in, len);
			memmove(s->in, s->in + len, s->in_len - len);
			s->in_len -= len;
			cm_stream_input(s, msg, len);
			if (sock_lookup(token) != s || s->hup)
				return;
		}
	}
}

static void sock_ready(struct cm_sock *s, uint32_t events)
{
	uint64_t token = token_of(s);

	switch (s->kind) {
	case CM_SOCK_LISTEN:
		cm_listen_input(s);
		break;
	case CM_SOCK_DGRAM:
		if (events & EPOLLERR)
			cm_dgram_error(s);
		if (sock_lookup(token) == s && (events & EPOLLIN))
			cm_dgram_input(s);
		break;
	case CM_SOCK_STREAM:
		if (s->connecting) {
			int err = 0;
			socklen_t len = sizeof(err);

			if (!(events & (EPOLLOUT | EPOLLERR | EPOLLHUP)))
				break;
			if (getsockopt(s->fd, SOL_SOCKET, SO_ERROR, &err, &len))
				err = errno;
			s->connecting = false;
			cm_stream_connected(s, err);
			if (sock_lookup(token) != s)
				break;
		}
		if (s->closing) {
			if (events & (EPOLLERR | EPOLLHUP))
				cm_sock_close(s);
			else if (events & EPOLLOUT)
				stream_flush(s);
			break;
		}
		if (events & EPOLLOUT) {
			stream_flush(s);
			if (sock_lookup(token) != s)
				break;
		}
		if (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR))
			stream_readable(s);
		break;
	}
}

/* ------------------------------------------------------------------ */
/* The thread                                                          */

static void *loop_main(void *arg)
{
	struct epoll_event evs[MAX_EVENTS];

	(void)arg;
	for (;;) {
		int i, n = epoll_wait(loop.epfd, evs, MAX_EVENTS, -1);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			shca_err("epoll_wait: %s", strerror(errno));
			return NULL;
		}
		pthread_mutex_lock(&cm_lock);
		for (i = 0; i < n; i++) {
			struct cm_sock *s;

			if (evs[i].data.u64 == TIMER_TOKEN) {
				uint64_t expirations;

				if (read(loop.tfd, &expirations,
					 sizeof(expirations)) < 0 &&
				    errno != EAGAIN)
					shca_dbg("timerfd: %s",
						 strerror(errno));
				timers_run();
				continue;
			}
			s = sock_lookup(evs[i].data.u64);
			if (s)
				sock_ready(s, evs[i].events);
		}
		pthread_mutex_unlock(&cm_lock);
	}
	return NULL;
}

/*
 * fork: the child has no CM thread.  Its ids (the parent's) are the
 * parent's business, but the child may use the CM afresh: it gets a new
 * epoll set and thread on first need.  cm_lock is held across fork so
 * that the child does not inherit it taken.
 */
static void fork_prepare(void)
{
	pthread_mutex_lock(&cm_lock);
}

static void fork_parent(void)
{
	pthread_mutex_unlock(&cm_lock);
}

static void fork_child(void)
{
	pthread_mutex_init(&cm_lock, NULL);
	if (loop.epfd >= 0)
		close(loop.epfd);
	if (loop.tfd >= 0)
		close(loop.tfd);
	loop.epfd = -1;
	loop.tfd = -1;
	loop.err = 0;
	if (loop.by_fd)
		memset(loop.by_fd, 0, (size_t)loop.nfds * sizeof(*loop.by_fd));
	loop.timers = NULL;
	loop.once = (pthread_once_t)PTHREAD_ONCE_INIT;
}

static void loop_init(void)
{
	static bool atfork;
	struct epoll_event ev = { .events = EPOLLIN, .data.u64 = TIMER_TOKEN };
	sigset_t all, old;
	pthread_attr_t attr;
	pthread_t thread;

	if (!atfork && !pthread_atfork(fork_prepare, fork_parent, fork_child))
		atfork = true;
	loop.epfd = epoll_create1(EPOLL_CLOEXEC);
	if (loop.epfd < 0)
		goto fail;
	loop.tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	if (loop.tfd < 0)
		goto fail;
	if (epoll_ctl(loop.epfd, EPOLL_CTL_ADD, loop.tfd, &ev))
		goto fail;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	/* the application's signals are not for this thread */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	errno = pthread_create(&thread, &attr, loop_main, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	pthread_attr_destroy(&attr);
	if (errno)
		goto fail;
	return;
fail:
	loop.err = errno ? -errno : -ENOMEM;
	shca_err("cannot start the CM thread: %s", strerror(-loop.err));
}

int cm_loop_start(void)
{
	pthread_once(&loop.once, loop_init);
	return loop.err;
}
