// SPDX-License-Identifier: MIT
/*
 * Waiting on rsockets: rpoll, rselect, and the sleep of a blocking call.
 *
 * Every rsocket has one descriptor to sleep on: its epoll fd (its
 * number), readable when its CQ channel, CM channel or UDP port may have
 * news.  A sleeper polls that fd (rpoll: those of all its rsockets, and
 * the caller's ordinary descriptors as they are, in the same poll(2)
 * call), then consumes what woke it (rs_events): the CQ event, the CM
 * events, the UDP datagrams.
 *
 * Several threads may sleep on one rsocket; the one that consumes an
 * event leaves the others asleep on a descriptor that is quiet again.
 * As rdma-core does with its "pollsignal", every sleeper also polls one
 * process-wide eventfd (the gate): a thread that consumed events while
 * others sleep writes it, they all wake and look again; the last one out
 * resets it, and no thread starts a new sleep while it is set.
 *
 * Readiness is rdma-core's (rs_poll_rs): a connected stream is POLLIN
 * with data queued or its read side closed, POLLOUT when rsend would not
 * block, POLLHUP once disconnected, POLLERR after an error; a listener
 * POLLIN with a request waiting; a failed connect POLLIN|POLLOUT|POLLERR;
 * a datagram socket POLLIN with a message, POLLOUT with a free send slot.
 * Two differences, as TCP has it: POLLHUP waits until the data that
 * arrived before the disconnection has been read (rdma-core reports it at
 * once, and a program that stops at POLLHUP -- rstream -T a -- loses the
 * end of the stream), and a socket that can no longer write is POLLOUT
 * (rsend fails at once) instead of never.
 */
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/select.h>

#include "rsocket.h"
#include "../common/evfd.h"

static pthread_mutex_t gate_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t gate_once = PTHREAD_ONCE_INIT;
static int gate_fd = -1;
static unsigned int gate_sleepers;
static bool gate_set;

static void gate_init(void)
{
	gate_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (gate_fd < 0)
		shca_warn("rsocket: no eventfd for the poll gate: %s",
			  strerror(errno));
}

/*
 * Before a sleep, and before the last look at what the sleep waits for:
 * from here on, a thread that consumes events opens the gate for this
 * one.  Entered after that look, a consumer in between (another thread
 * of the socket taking the CQ event and the completions this one waits
 * for) would leave it asleep for good on a quiet descriptor.  False if
 * the gate is set: the caller yields and looks again.
 */
static bool gate_enter(void)
{
	pthread_once(&gate_once, gate_init);
	pthread_mutex_lock(&gate_lock);
	if (gate_set) {
		pthread_mutex_unlock(&gate_lock);
		return false;
	}
	gate_sleepers++;
	pthread_mutex_unlock(&gate_lock);
	return true;
}

static void gate_leave(void)
{
	uint64_t v;

	pthread_mutex_lock(&gate_lock);
	if (!--gate_sleepers && gate_set) {
		while (read(gate_fd, &v, sizeof(v)) < 0 && errno == EINTR)
			;
		gate_set = false;
	}
	pthread_mutex_unlock(&gate_lock);
}

/* Events were consumed: whoever sleeps must look again */
static void gate_open(void)
{
	uint64_t one = 1;

	pthread_mutex_lock(&gate_lock);
	if (gate_sleepers && !gate_set && gate_fd >= 0) {
		while (write(gate_fd, &one, sizeof(one)) < 0 && errno == EINTR)
			;
		gate_set = true;
	}
	pthread_mutex_unlock(&gate_lock);
}

/* Completions were taken by polling (rs_process): the same */
void rs_wake_sleepers(void)
{
	gate_open();	/* no sleeper yet: no gate to open, nothing done */
}

/* Consume what is ready on the socket's sources, never blocking; true
 * if anything was.  rs->lock held. */
bool rs_events(struct rsocket *rs)
{
	struct epoll_event ev[8];
	struct ibv_cq *cq;
	bool any = false;
	void *ctx;
	int i, n;

	n = epoll_wait(rs->epfd, ev, ARRAY_SIZE(ev), 0);
	for (i = 0; i < n; i++) {
		struct rs_src *src = ev[i].data.ptr;

		any = true;
		switch (src->kind) {
		case RS_SRC_CQ:
			if (!ibv_get_cq_event(rs->st.cq_chan, &cq, &ctx)) {
				ibv_ack_cq_events(cq, 1);
				rs->st.cq_armed = false;
			}
			break;
		case RS_SRC_CM:
			rs_cm_input(rs);
			break;
		case RS_SRC_UDP:
			ds_udp_input(rs);
			break;
		case RS_SRC_DSQP:
			ds_qp_input(rs, src);
			break;
		}
	}
	return any;
}

/*
 * Sleep until the socket's fd (or the gate) is readable, then consume
 * its events.  rs->lock held, released while asleep.  0, or -EINTR.
 * A signal ends the sleep with EINTR the way it would end rdma-core's
 * read of the completion channel (or a recv): unless the handlers have
 * SA_RESTART (common/evfd.h), in which case the caller's loop goes on.
 */
int rs_wait(struct rsocket *rs)
{
	struct pollfd pfd[2];
	int n, err;

	/* entered under rs->lock: a thread that takes this socket's
	 * events once it is released opens the gate for this one */
	if (!gate_enter()) {
		pthread_mutex_unlock(&rs->lock);
		sched_yield();
		pthread_mutex_lock(&rs->lock);
		return 0;
	}
	pthread_mutex_unlock(&rs->lock);
	pfd[0].fd = rs->epfd;
	pfd[0].events = POLLIN;
	pfd[1].fd = gate_fd;
	pfd[1].events = POLLIN;
	n = poll(pfd, 2, -1);
	err = errno;
	gate_leave();
	pthread_mutex_lock(&rs->lock);
	if (n < 0 && err == EINTR && shca_signals_restart())
		return 0;
	if (n < 0)
		return -err;
	if (rs_events(rs))
		gate_open();
	return 0;
}

static short stream_revents(struct rsocket *rs, short events, bool arm)
{
	short revents;

	if (rs->state == RS_LISTENING)
		return (events & POLLIN) && rs->st.reqs ? POLLIN : 0;
	if (rs->state & RS_OPENING) {
		rs_cm_input(rs);
		if (rs->state & RS_OPENING)
			return 0;
	}
	if (rs->state == RS_CONNECT_ERROR)
		return (events & (POLLIN | POLLOUT)) | POLLERR;
	if (!(rs->state & (RS_CONNECTED | RS_DISCONNECTED | RS_ERROR)) ||
	    !rs->st.cq)
		return 0;
	for (;;) {
		rs_process(rs);
		revents = 0;
		if ((events & POLLIN) && rs_conn_have_rdata(rs))
			revents |= POLLIN;
		if ((events & POLLOUT) && rs_conn_can_send(rs))
			revents |= POLLOUT;
		if (rs->state == RS_DISCONNECTED && !rs_have_rdata(rs))
			revents |= POLLHUP;
		else if (!(rs->state & (RS_CONNECTED | RS_DISCONNECTED)))
			revents |= POLLERR;
		if (revents || !arm || rs->st.cq_armed)
			return revents;
		ibv_req_notify_cq(rs->st.cq, 0);
		rs->st.cq_armed = true;
	}
}

static short revents_now(struct rsocket *rs, short events, bool arm)
{
	short revents;

	revents = rs->type == SOCK_STREAM ? stream_revents(rs, events, arm) :
					    ds_poll_revents(rs, events);
	if (!revents && arm && rs->type == SOCK_DGRAM) {
		ds_arm(rs);
		revents = ds_poll_revents(rs, events);
	}
	return revents;
}

/*
 * The socket's revents for events now, after taking what its sources
 * hold (a request, a CM event, a first contact); with arm, also make sure
 * that a change wakes its fd (then nothing was ready).
 */
short rs_poll_revents(struct rsocket *rs, short events, bool arm)
{
	short revents;

	pthread_mutex_lock(&rs->lock);
	revents = revents_now(rs, events, false);
	if (!revents && rs_events(rs)) {
		gate_open();
		revents = revents_now(rs, events, false);
	}
	if (!revents && arm)
		revents = revents_now(rs, events, true);
	pthread_mutex_unlock(&rs->lock);
	return revents;
}

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The ordinary descriptors' revents, without waiting (the rsockets'
 * entries of pfd were already decided) */
static int poll_ordinary(struct pollfd *fds, struct pollfd *pfd,
			 struct rsocket **rss, nfds_t nfds)
{
	nfds_t i;
	int cnt = 0;

	for (i = 0; i < nfds; i++) {
		pfd[i].fd = rss[i] ? -1 : fds[i].fd;
		pfd[i].events = fds[i].events;
		pfd[i].revents = 0;
	}
	if (poll(pfd, nfds, 0) < 0)
		return -1;
	for (i = 0; i < nfds; i++) {
		if (rss[i])
			continue;
		fds[i].revents = pfd[i].revents;
		if (fds[i].revents)
			cnt++;
	}
	return cnt;
}

static int rsockets_revents(struct pollfd *fds, struct rsocket **rss,
			    nfds_t nfds, bool arm)
{
	nfds_t i;
	int cnt = 0;

	for (i = 0; i < nfds; i++) {
		if (!rss[i])
			continue;
		fds[i].revents = rs_poll_revents(rss[i], fds[i].events, arm);
		if (fds[i].revents)
			cnt++;
	}
	return cnt;
}

int rpoll(struct pollfd *fds, nfds_t nfds, int timeout)
{
	struct rsocket *stack_rss[16], **rss = stack_rss;
	struct pollfd stack_pfd[17], *pfd = stack_pfd;
	int64_t start = now_ms(), left;
	bool woke, sleeper;
	int ret, cnt, n;
	nfds_t i;

	if (nfds > 16) {
		rss = calloc(nfds, sizeof(*rss));
		pfd = calloc(nfds + 1, sizeof(*pfd));
		if (!rss || !pfd) {
			ret = rs_err(-ENOMEM);
			goto out;
		}
	}
	for (i = 0; i < nfds; i++) {
		rss[i] = rs_lookup(fds[i].fd);
		fds[i].revents = 0;
	}
	for (;;) {
		cnt = rsockets_revents(fds, rss, nfds, false);
		sleeper = false;
		if (!cnt && timeout) {
			/* a sleeper before the last look (gate_enter) */
			if (!gate_enter()) {
				sched_yield();
				continue;
			}
			sleeper = true;
			cnt = rsockets_revents(fds, rss, nfds, true);
		}
		left = timeout < 0 ? -1 : timeout - (now_ms() - start);
		if (cnt || left == 0 || (timeout >= 0 && left < 0)) {
			if (sleeper)
				gate_leave();
			n = poll_ordinary(fds, pfd, rss, nfds);
			ret = n < 0 ? -1 : cnt + n;
			goto out;
		}
		for (i = 0; i < nfds; i++) {
			pfd[i].fd = rss[i] ? rss[i]->epfd : fds[i].fd;
			pfd[i].events = rss[i] ? POLLIN : fds[i].events;
			pfd[i].revents = 0;
		}
		pfd[nfds].fd = gate_fd;
		pfd[nfds].events = POLLIN;
		pfd[nfds].revents = 0;
		n = poll(pfd, nfds + 1, (int)left);
		gate_leave();
		if (n < 0) {
			ret = -1;
			goto out;
		}
		woke = false;
		cnt = 0;
		for (i = 0; i < nfds; i++) {
			if (!rss[i]) {
				fds[i].revents = pfd[i].revents;
				cnt += !!fds[i].revents;
			} else if (pfd[i].revents) {
				pthread_mutex_lock(&rss[i]->lock);
				woke |= rs_events(rss[i]);
				pthread_mutex_unlock(&rss[i]->lock);
			}
		}
		if (woke)
			gate_open();
		cnt += rsockets_revents(fds, rss, nfds, false);
		if (cnt) {
			ret = cnt;
			goto out;
		}
	}
out:
	if (rss != stack_rss)
		free(rss);
	if (pfd != stack_pfd)
		free(pfd);
	return ret;
}

/*
 * rselect over rpoll, with select(2)'s reading of revents (an error or
 * hang-up makes a descriptor readable, an error writable too, and an
 * invalid one fails the call with EBADF).  Every descriptor below nfds
 * counts, 0 included (rdma-core's rselect skips descriptor 0).
 */
int rselect(int nfds, fd_set *readfds, fd_set *writefds, fd_set *exceptfds,
	    struct timeval *timeout)
{
	struct pollfd *fds;
	int fd, i, n = 0, ret, cnt = 0, to;

	if (nfds < 0 || nfds > FD_SETSIZE)
		return rs_err(-EINVAL);
	if (timeout && (timeout->tv_sec < 0 || timeout->tv_usec < 0))
		return rs_err(-EINVAL);
	fds = calloc(nfds ? nfds : 1, sizeof(*fds));
	if (!fds)
		return rs_err(-ENOMEM);
	for (fd = 0; fd < nfds; fd++) {
		short ev = 0;
		bool ex = exceptfds && FD_ISSET(fd, exceptfds);

		if (readfds && FD_ISSET(fd, readfds))
			ev |= POLLIN;
		if (writefds && FD_ISSET(fd, writefds))
			ev |= POLLOUT;
		if (ex)
			ev |= POLLPRI;
		if (!ev)
			continue;
		fds[n].fd = fd;
		fds[n++].events = ev;
	}
	to = !timeout ? -1 :
	     (int)MIN((int64_t)timeout->tv_sec * 1000 +
		      (timeout->tv_usec + 999) / 1000, (int64_t)INT32_MAX);
	ret = rpoll(fds, n, to);
	if (ret < 0)
		goto out;
	for (i = 0; i < n; i++)
		if (fds[i].revents & POLLNVAL) {
			ret = rs_err(-EBADF);
			goto out;
		}
	if (readfds)
		FD_ZERO(readfds);
	if (writefds)
		FD_ZERO(writefds);
	if (exceptfds)
		FD_ZERO(exceptfds);
	for (i = 0; i < n; i++) {
		short re = fds[i].revents, ev = fds[i].events;

		if ((ev & POLLIN) && (re & (POLLIN | POLLHUP | POLLERR))) {
			FD_SET(fds[i].fd, readfds);
			cnt++;
		}
		if ((ev & POLLOUT) && (re & (POLLOUT | POLLERR))) {
			FD_SET(fds[i].fd, writefds);
			cnt++;
		}
		if ((ev & POLLPRI) && (re & POLLPRI)) {
			FD_SET(fds[i].fd, exceptfds);
			cnt++;
		}
	}
	ret = cnt;
out:
	free(fds);
	return ret;
}
