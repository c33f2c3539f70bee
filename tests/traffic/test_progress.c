// SPDX-License-Identifier: MIT
/*
 * Progress where the application already is (issue 15, engine.c's
 * shca_engine_progress and shca_engine_wait), on the net path
 * (SOFTHCA_NET=1 in every case, or two namespaces):
 *
 *  - a thread that spins on ibv_poll_cq does the net path's receive and
 *    ACK work itself: its process's app_progress counter moves, and every
 *    message of a ping-pong arrives intact;
 *  - with SOFTHCA_POLL_PROGRESS=0 the same ping-pong works and the counter
 *    stays 0 (the engine thread alone: the switch, and the counter's
 *    meaning);
 *  - a process that never polls still gets its WRITEs placed and its
 *    SENDs received, and a requester that never polls gets its
 *    completions and its channel event (the engine thread's part); the
 *    counter of a process that never polled stays 0;
 *  - two threads polling one CQ get every completion exactly once;
 *  - a thread asleep in ibv_get_cq_event does the work itself (its
 *    counter moves) and gets every event;
 *  - with SOFTHCA_POLL_QUIET=1, while a thread polls, the engine thread
 *    leaves the sockets to it (engine_quiet moves in the ping-pong;
 *    without the setting too in processes pinned to one CPU; stays 0
 *    without it on more CPUs, with it 0, and with
 *    SOFTHCA_POLL_PROGRESS=0); a
 *    poller that stops without a completion has what comes next placed
 *    all the same (the engine takes the sockets back: engine_takeovers);
 *    a poll that returns a completion gives them back at once (what
 *    comes next is placed with no takeover; SOFTHCA_POLL_QUIET's period,
 *    not the shorter hold's, before a takeover), and its thread's next
 *    empty poll within the check's period takes them again at once;
 *  - held ACKs (SOFTHCA_NET_ACK_HOLD_US): in a ping-pong both processes'
 *    ACKs wait for the replies (net_acks_held moves; stays 0 with the
 *    setting 0), also under lost and duplicated packets; an ACK held by
 *    a poller that then stops goes all the same (the engine thread's
 *    timer: net_acks_late), which the sender, never sending again,
 *    needs to complete;
 *  - the poller's yield (SOFTHCA_NET_YIELD_US): after every empty poll
 *    with the setting 0 or on one CPU, at most once a period elsewhere
 *    (net_poll_yields; net_poll_waits apart).
 *
 * The counters are read with `softhca stat`, from outside the process.
 */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "ep.h"

#define PINGS 400
#define MSG 8

/* This process's counter name, as `softhca stat` shows it. */
static uint64_t my_counter(const char *name)
{
	return (uint64_t)ep_stat_counter(SOFTHCA_TOOL, getpid(), name);
}

static uint64_t my_progress(void)
{
	return my_counter("app_progress");
}

static void net_on(void)
{
	setenv("SOFTHCA_NET", "1", 1);
}

/* ------------------------------------------------------------------ */
/* Ping-pong: i-th message carries ep_pattern(i) both ways             */

static void pp_send(struct ep *e, uint32_t i)
{
	ep_fill_pattern(e->buf, MSG, i, 0);
	ASSERT_EQ(ep_post(e, i, IBV_WR_SEND, 0, MSG, 0, 0), 0);
}

static void pp_recv(struct ep *e, uint32_t i)
{
	struct ibv_wc wc = ep_spin_one(e->rcq);
	int64_t d;

	ASSERT_U64_EQ(wc.wr_id, i);
	ASSERT_EQ(wc.byte_len, MSG);
	d = ep_find_pattern_diff(e->buf + 4096, MSG, i, 0);
	if (d >= 0)
		harness_fail(__FILE__, __LINE__, "message %u: byte %lld",
			     i, (long long)d);
}

/* Both sides: receive i (the child) or send it (the parent) first;
 * messages base .. base + PINGS - 1. */
static void pingpong(struct ep *e, bool first, uint32_t base)
{
	uint32_t i;

	for (i = base; i < base + PINGS; i++) {
		ASSERT_EQ(ep_post_recv(e, i, 4096, MSG), 0);
		if (first) {
			pp_send(e, i);
			ep_spin_one(e->scq);
			pp_recv(e, i);
		} else {
			pp_recv(e, i);
			pp_send(e, i);
			ep_spin_one(e->scq);
		}
	}
}

/*
 * Who does the work when a message lands is the scheduler's choice: the
 * engine thread sleeps in epoll, the application thread spins, and on a
 * loaded machine the engine can win every race for a whole round (CI's
 * sanitizer run saw 1 and 0 of 400).  So the ping-pong goes on, round
 * after round, until both processes saw their polling thread do the
 * work, or MAX_ROUNDS rounds found it never did: a poll path that never
 * progresses fails after MAX_ROUNDS * PINGS round trips, the counters
 * that only the engine moves fail in one round.
 */
#define MAX_ROUNDS 25

/* Where pp_child pins itself before it opens its device (-1: it stays
 * where the parent was; pin_one_cpu) */
static int child_cpu = -1;

static void pin_to(int cpu);

/* The child: a round, then its app_progress, engine_quiet and
 * net_acks_held over fd, until told 'x'. */
static void pp_child(int fd, void *arg)
{
	struct ep_opts o;
	struct ep b;
	uint32_t r;
	uint64_t n[3];
	char c;

	(void)arg;
	if (child_cpu >= 0)
		pin_to(child_cpu);
	ep_default_opts(&o, IBV_QPT_RC);
	ep_open_remote(&b, &o, fd);
	for (r = 0;; r++) {
		pingpong(&b, false, r * PINGS);
		n[0] = my_progress();
		n[1] = my_counter("engine_quiet");
		n[2] = my_counter("net_acks_held");
		xwrite(fd, n, sizeof(n));
		xread(fd, &c, 1);
		if (c == 'x')
			break;
		ASSERT_EQ(c, 'm');
	}
	ep_destroy(&b);	/* after the parent's last read of its counter */
}

/* Both processes' engine_quiet and net_acks_held after the last
 * pingpong_case, and this process's net_poll_yields and net_poll_waits. */
static uint64_t quiet_mine, quiet_theirs, held_mine, held_theirs;
static uint64_t yields_mine, waits_mine;

enum { WANT_BOTH = 1, WANT_QUIET = 2, WANT_HELD = 4 };

/* Rounds until both app_progress counters moved (WANT_BOTH), both
 * engine_quiet counters (WANT_QUIET), both net_acks_held (WANT_HELD); or
 * after one round without any. */
static void pingpong_rounds(unsigned int want, uint64_t *mine,
			    uint64_t *theirs)
{
	uint64_t n[3];

	struct ep_opts o;
	struct duo d;
	struct ep a;
	uint32_t r;

	net_on();
	duo_fork(&d, pp_child, NULL);
	ep_default_opts(&o, IBV_QPT_RC);
	ep_open_remote(&a, &o, d.fd);
	for (r = 0;; r++) {
		pingpong(&a, true, r * PINGS);
		*mine = my_progress();
		quiet_mine = my_counter("engine_quiet");
		held_mine = my_counter("net_acks_held");
		yields_mine = my_counter("net_poll_yields");
		waits_mine = my_counter("net_poll_waits");
		xread(d.fd, n, sizeof(n));
		*theirs = n[0];
		quiet_theirs = n[1];
		held_theirs = n[2];
		if (r + 1 == MAX_ROUNDS ||
		    ((!(want & WANT_BOTH) || (*mine && *theirs)) &&
		     (!(want & WANT_QUIET) || (quiet_mine && quiet_theirs)) &&
		     (!(want & WANT_HELD) || (held_mine && held_theirs))))
			break;
		duo_signal(d.fd, 'm');
	}
	ep_net_check();
	duo_signal(d.fd, 'x');
	duo_wait(&d);
	ep_destroy(&a);
	printf("  app_progress: %llu here, %llu in the peer; engine_quiet: "
	       "%llu, %llu; net_acks_held: %llu, %llu; %u round trips\n",
	       (unsigned long long)*mine, (unsigned long long)*theirs,
	       (unsigned long long)quiet_mine,
	       (unsigned long long)quiet_theirs,
	       (unsigned long long)held_mine,
	       (unsigned long long)held_theirs, (r + 1) * PINGS);
}

static void pingpong_case(bool want_both, uint64_t *mine, uint64_t *theirs)
{
	pingpong_rounds(want_both ? WANT_BOTH : 0, mine, theirs);
}

/* SOFTHCA_POLL_QUIET as the run gives it (the _quiet run sets it) */
static bool quiet_on(void)
{
	const char *s = getenv("SOFTHCA_POLL_QUIET");

	return s && atoi(s) > 0;
}

TEST(polling_thread_does_the_work)
{
	uint64_t mine, theirs;

	unsetenv("SOFTHCA_POLL_PROGRESS");
	pingpong_rounds(WANT_BOTH | (quiet_on() ? WANT_QUIET : 0), &mine,
			&theirs);
	ASSERT_GT(mine, 0);
	ASSERT_GT(theirs, 0);
	if (quiet_on()) {
		ASSERT_GT(quiet_mine, 0);
		ASSERT_GT(quiet_theirs, 0);
	} else {
		ASSERT_U64_EQ(quiet_mine, 0);
		ASSERT_U64_EQ(quiet_theirs, 0);
	}
}

/* A wait for a message is a streak of empty polls, unless the engine
 * thread wins the race for it every time (rounds, as above). */
TEST(quiet_pingpong)
{
	uint64_t mine, theirs;

	unsetenv("SOFTHCA_POLL_PROGRESS");
	setenv("SOFTHCA_POLL_QUIET", "1", 1);
	pingpong_rounds(WANT_QUIET, &mine, &theirs);
	ASSERT_GT(quiet_mine, 0);
	ASSERT_GT(quiet_theirs, 0);
}

/* The CPUs this process may run on. */
static int my_cpus(cpu_set_t *set)
{
	ASSERT_EQ(sched_getaffinity(0, sizeof(*set), set), 0);
	return CPU_COUNT(set);
}

/* This thread on CPU cpu alone, as taskset -c does. */
static void pin_to(int cpu)
{
	cpu_set_t one;

	CPU_ZERO(&one);
	CPU_SET(cpu, &one);
	ASSERT_EQ(sched_setaffinity(0, sizeof(one), &one), 0);
}

/* This process (and the peer it forks next) on one CPU: the first it
 * may run on.  The peer then moves to the next one (child_cpu), as a
 * pinned server and client sit on two cores, if there is one: two
 * ping-pong processes on one CPU hand it to each other at every
 * sched_yield of an empty poll, and the one that answers first seldom
 * polls five times in a row (engine_quiet 0 in 10,000 round trips). */
static void pin_one_cpu(void)
{
	cpu_set_t set;
	int cpu, next;

	my_cpus(&set);
	for (cpu = 0; !CPU_ISSET(cpu, &set); cpu++)
		;
	for (next = cpu + 1; next < CPU_SETSIZE && !CPU_ISSET(next, &set);
	     next++)
		;
	child_cpu = next < CPU_SETSIZE ? next : -1;
	pin_to(cpu);
}

/* Unset, on more than one CPU: off, the engine thread is woken as
 * before. */
TEST(quiet_off_by_default_unpinned)
{
	uint64_t mine, theirs;
	cpu_set_t set;

	if (my_cpus(&set) < 2)
		SKIP("this process may run on one CPU only: the setting's "
		     "default is on there (quiet_on_by_default_pinned)");
	unsetenv("SOFTHCA_POLL_PROGRESS");
	unsetenv("SOFTHCA_POLL_QUIET");
	pingpong_case(false, &mine, &theirs);
	ASSERT_U64_EQ(quiet_mine, 0);
	ASSERT_U64_EQ(quiet_theirs, 0);
}

/* Unset, in processes that may run on one CPU only: on. */
TEST(quiet_on_by_default_pinned)
{
	uint64_t mine, theirs;

	unsetenv("SOFTHCA_POLL_PROGRESS");
	unsetenv("SOFTHCA_POLL_QUIET");
	pin_one_cpu();
	pingpong_rounds(WANT_QUIET, &mine, &theirs);
	ASSERT_GT(quiet_mine, 0);
	ASSERT_GT(quiet_theirs, 0);
}

/* 0 is off, pinned or not. */
TEST(quiet_zero_is_off_pinned)
{
	uint64_t mine, theirs;

	unsetenv("SOFTHCA_POLL_PROGRESS");
	setenv("SOFTHCA_POLL_QUIET", "0", 1);
	pin_one_cpu();
	pingpong_case(false, &mine, &theirs);
	unsetenv("SOFTHCA_POLL_QUIET");
	ASSERT_U64_EQ(quiet_mine, 0);
	ASSERT_U64_EQ(quiet_theirs, 0);
}

TEST(poll_progress_off_engine_alone)
{
	uint64_t mine, theirs;

	setenv("SOFTHCA_POLL_PROGRESS", "0", 1);
	pingpong_case(false, &mine, &theirs);
	ASSERT_U64_EQ(mine, 0);
	ASSERT_U64_EQ(theirs, 0);
	ASSERT_U64_EQ(quiet_mine, 0);
	ASSERT_U64_EQ(quiet_theirs, 0);
}

/* ------------------------------------------------------------------ */
/* Nobody polls                                                        */

#define WRITES 16

/* Never polls: waits on its memory for the parent's WRITEs, then for
 * the SEND's bytes in its receive buffer; reports its counter. */
static void quiet_child(int fd, void *arg)
{
	volatile uint8_t *last;
	struct ep_opts o;
	struct ep b;
	uint64_t n;
	int i;

	(void)arg;
	ep_default_opts(&o, IBV_QPT_RC);
	ep_create(&b, &o);
	memset(b.buf, EP_SENTINEL, b.size);
	ASSERT_EQ(ep_post_recv(&b, 7, 8192, MSG), 0);
	ep_exchange(fd, &b.self, &b.peer);
	ep_connect(&b, &o);
	duo_signal(fd, 'r');
	for (i = 0; i < WRITES; i++) {
		last = b.buf + (size_t)i * 256 + 255;
		while (*last == EP_SENTINEL)
			usleep(100);
		ASSERT_EQ(ep_find_pattern_diff(b.buf + (size_t)i * 256, 256,
					       100 + (uint32_t)i, 0), -1);
	}
	last = b.buf + 8192 + MSG - 1;
	while (*last == EP_SENTINEL)
		usleep(100);
	ASSERT_EQ(ep_find_pattern_diff(b.buf + 8192, MSG, 999, 0), -1);
	n = my_progress();
	xwrite(fd, &n, sizeof(n));
	/* the receive's completion is there without a poll of ours
	 * before this one */
	ep_expect(b.rcq, b.qp, 7, IBV_WC_SUCCESS);
	duo_expect(fd, 'x');
	ep_destroy(&b);
}

TEST(never_polled_qp_completes)
{
	struct ibv_cq *ev_cq;
	struct ep_opts o;
	struct duo d;
	struct ep a;
	uint64_t theirs;
	void *ctx;
	int i;

	net_on();
	duo_fork(&d, quiet_child, NULL);
	ep_default_opts(&o, IBV_QPT_RC);
	o.channel = true;
	ep_open_remote(&a, &o, d.fd);
	ASSERT_EQ(ibv_req_notify_cq(a.scq, 0), 0);
	duo_expect(d.fd, 'r');
	for (i = 0; i < WRITES; i++) {
		ep_fill_pattern(a.buf + (size_t)i * 256, 256, 100 + (uint32_t)i,
				0);
		ASSERT_EQ(ep_post(&a, (uint64_t)i, IBV_WR_RDMA_WRITE,
				  (uint64_t)i * 256, 256, (uint64_t)i * 256,
				  0), 0);
	}
	ep_fill_pattern(a.buf + 8192, MSG, 999, 0);
	ASSERT_EQ(ep_post(&a, 99, IBV_WR_SEND, 8192, MSG, 0, 0), 0);
	xread(d.fd, &theirs, sizeof(theirs));
	/* the peer's engine thread did it all */
	ASSERT_U64_EQ(theirs, 0);
	/* ours too: the event comes without a poll or a get_cq_event */
	ASSERT(ep_readable(a.ch->fd, 10000));
	ASSERT_U64_EQ(my_progress(), 0);
	ASSERT_EQ(ibv_get_cq_event(a.ch, &ev_cq, &ctx), 0);
	ASSERT(ev_cq == a.scq);
	ibv_ack_cq_events(ev_cq, 1);
	for (i = 0; i < WRITES; i++)
		ep_expect(a.scq, a.qp, (uint64_t)i, IBV_WC_SUCCESS);
	ep_expect(a.scq, a.qp, 99, IBV_WC_SUCCESS);
	ep_net_check();
	duo_signal(d.fd, 'x');
	duo_wait(&d);
	ep_destroy(&a);
}

/* ------------------------------------------------------------------ */
/* Two pollers, one CQ                                                 */

#define BATCH 300
#define ROUNDS 4

struct two {
	struct ibv_cq *cq;
	uint8_t seen[BATCH];
	int got;			/* under lock */
	pthread_mutex_t lock;
	int err;
};

static void *two_poller(void *arg)
{
	struct two *t = arg;
	struct timespec t0, now;
	struct ibv_wc wc[4];
	int n, i;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		pthread_mutex_lock(&t->lock);
		n = t->got;
		pthread_mutex_unlock(&t->lock);
		if (n >= BATCH)
			return NULL;
		n = ibv_poll_cq(t->cq, 4, wc);
		if (n < 0) {
			t->err = 1;
			return NULL;
		}
		pthread_mutex_lock(&t->lock);
		for (i = 0; i < n; i++) {
			if (wc[i].status != IBV_WC_SUCCESS ||
			    wc[i].wr_id >= BATCH || t->seen[wc[i].wr_id]++)
				t->err = 2;
			t->got++;
		}
		pthread_mutex_unlock(&t->lock);
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (now.tv_sec - t0.tv_sec > 10) {
			t->err = 3;
			return NULL;
		}
	}
}

static void two_child(int fd, void *arg)
{
	struct ep_opts o;
	struct ep b;
	int r, i;

	(void)arg;
	ep_default_opts(&o, IBV_QPT_RC);
	o.max_recv_wr = BATCH;
	o.cqe = 2 * BATCH;
	ep_open_remote(&b, &o, fd);
	for (r = 0; r < ROUNDS; r++) {
		struct two t = { .cq = b.rcq };
		pthread_t th[2];

		pthread_mutex_init(&t.lock, NULL);
		for (i = 0; i < BATCH; i++)
			ASSERT_EQ(ep_post_recv(&b, (uint64_t)i, 0, MSG), 0);
		ASSERT_EQ(pthread_create(&th[0], NULL, two_poller, &t), 0);
		ASSERT_EQ(pthread_create(&th[1], NULL, two_poller, &t), 0);
		duo_signal(fd, 'g');
		pthread_join(th[0], NULL);
		pthread_join(th[1], NULL);
		if (t.err)
			harness_fail(__FILE__, __LINE__, "round %d: error %d "
				     "after %d completions", r, t.err, t.got);
		ASSERT_EQ(t.got, BATCH);
		for (i = 0; i < BATCH; i++)
			ASSERT_EQ(t.seen[i], 1);
		ep_expect_empty(b.rcq);
	}
	duo_signal(fd, 'd');
	duo_expect(fd, 'x');
	ep_destroy(&b);
}

TEST(two_threads_poll_one_cq)
{
	struct ep_opts o;
	struct duo d;
	struct ep a;
	int r, i;

	net_on();
	duo_fork(&d, two_child, NULL);
	ep_default_opts(&o, IBV_QPT_RC);
	o.max_send_wr = 64;
	ep_open_remote(&a, &o, d.fd);
	for (r = 0; r < ROUNDS; r++) {
		duo_expect(d.fd, 'g');
		for (i = 0; i < BATCH; i++) {
			ASSERT_EQ(ep_post(&a, (uint64_t)i, IBV_WR_SEND, 0, MSG,
					  0, 0), 0);
			/* a window of 32 in flight */
			if (i >= 32)
				ep_spin_one(a.scq);
		}
		for (i = 0; i < 32; i++)
			ep_spin_one(a.scq);
	}
	duo_expect(d.fd, 'd');
	ep_net_check();
	duo_signal(d.fd, 'x');
	duo_wait(&d);
	ep_destroy(&a);
}

/* ------------------------------------------------------------------ */
/* A thread asleep in ibv_get_cq_event                                 */

/* Rounds of PINGS messages, each followed by the child's app_progress,
 * until the parent says 'x' (see MAX_ROUNDS). */
static void chan_child(int fd, void *arg)
{
	struct ibv_cq *cq;
	struct ep_opts o;
	struct ep b;
	uint32_t i;
	void *ctx;
	uint64_t n;
	char c = 'm';

	(void)arg;
	ep_default_opts(&o, IBV_QPT_RC);
	o.channel = true;
	ep_open_remote(&b, &o, fd);
	for (i = 0; c == 'm'; i++) {
		struct ibv_wc wc;

		ASSERT_EQ(ep_post_recv(&b, i, 4096, MSG), 0);
		ASSERT_EQ(ibv_req_notify_cq(b.rcq, 0), 0);
		duo_signal(fd, 'a');
		/* asleep until the message's event */
		ASSERT_EQ(ibv_get_cq_event(b.ch, &cq, &ctx), 0);
		ASSERT(cq == b.rcq);
		ibv_ack_cq_events(cq, 1);
		ASSERT_EQ(ibv_poll_cq(b.rcq, 1, &wc), 1);
		ASSERT_EQ(wc.status, IBV_WC_SUCCESS);
		ASSERT_U64_EQ(wc.wr_id, i);
		ASSERT_EQ(ep_find_pattern_diff(b.buf + 4096, MSG, i, 0), -1);
		if ((i + 1) % PINGS)
			continue;
		n = my_progress();
		xwrite(fd, &n, sizeof(n));
		xread(fd, &c, 1);
		ASSERT(c == 'm' || c == 'x');
	}
	ep_destroy(&b);
}

TEST(channel_waiter_does_the_work)
{
	struct ep_opts o;
	struct duo d;
	struct ep a;
	uint64_t theirs;
	uint32_t i;

	unsetenv("SOFTHCA_POLL_PROGRESS");
	net_on();
	duo_fork(&d, chan_child, NULL);
	ep_default_opts(&o, IBV_QPT_RC);
	ep_open_remote(&a, &o, d.fd);
	for (i = 0;; i++) {
		duo_expect(d.fd, 'a');
		/* let the peer fall asleep in get_cq_event first */
		usleep(200);
		pp_send(&a, i);
		ep_spin_one(a.scq);
		if ((i + 1) % PINGS)
			continue;
		xread(d.fd, &theirs, sizeof(theirs));
		if (theirs || i + 1 == MAX_ROUNDS * PINGS)
			break;
		duo_signal(d.fd, 'm');
	}
	printf("  the waiter's app_progress: %llu of %u messages\n",
	       (unsigned long long)theirs, i + 1);
	ep_net_check();
	duo_signal(d.fd, 'x');
	ASSERT_GT(theirs, 0);
	duo_wait(&d);
	ep_destroy(&a);
}

/* ------------------------------------------------------------------ */
/* A poller that stops: with or without a completion                   */

#define STREAK_POLLS 64		/* empty polls: well past QUIET_AFTER */
#define STOP_ROUNDS 8

/* Spin on the last byte of len bytes at buf + off until it is not the
 * sentinel (no poll: only the engine can place it), then check them;
 * 10 s at most. */
static void wait_placed(struct ep *b, uint64_t off, uint32_t len,
			uint32_t seed)
{
	volatile uint8_t *last = b->buf + off + len - 1;
	int i;

	for (i = 0; *last == EP_SENTINEL; i++) {
		if (i == 500000)
			harness_fail(__FILE__, __LINE__, "the WRITE at %llu "
				     "was never placed",
				     (unsigned long long)off);
		usleep(20);
	}
	ASSERT_EQ(ep_find_pattern_diff(b->buf + off, len, seed, 0), -1);
}

/*
 * The child, round r: the receive CQ is polled empty STREAK_POLLS times
 * (a streak: the engine leaves the sockets to this thread).  With a
 * completion (arg non-NULL) a receive was posted first, and the
 * parent's SEND is then polled for, so that the streak ends in a
 * completion; without, the CQ is left as it is.  Then it waits,
 * without polling, for the parent's WRITE, and reports its engine_quiet
 * and engine_takeovers from before and after.
 */
static void stop_child(int fd, void *arg)
{
	bool found = arg != NULL;
	struct ep_opts o;
	struct ep b;
	uint64_t n[4];
	int r, i;

	ep_default_opts(&o, IBV_QPT_RC);
	ep_create(&b, &o);
	memset(b.buf, EP_SENTINEL, b.size);
	ep_exchange(fd, &b.self, &b.peer);
	ep_connect(&b, &o);
	for (r = 0; r < STOP_ROUNDS; r++) {
		struct ibv_wc wc;

		n[0] = my_counter("engine_quiet");
		n[1] = my_counter("engine_takeovers");
		if (found)
			ASSERT_EQ(ep_post_recv(&b, (uint64_t)r, 8192, MSG),
				  0);
		for (i = 0; i < STREAK_POLLS; i++)
			ASSERT_EQ(ibv_poll_cq(b.rcq, 1, &wc), 0);
		if (found) {
			duo_signal(fd, 's');	/* send it */
			wc = ep_spin_one(b.rcq);
			ASSERT_EQ(wc.status, IBV_WC_SUCCESS);
		}
		duo_signal(fd, 'w');		/* write now */
		wait_placed(&b, (uint64_t)r * 256, 256, 300 + (uint32_t)r);
		n[2] = my_counter("engine_quiet");
		n[3] = my_counter("engine_takeovers");
		/* without a completion the takeover must come, if after the
		 * WRITE (an engine thread woken by the check that still saw
		 * polls places what is there); 10 s at most */
		for (i = 0; !found && n[3] == n[1] && i < 1000; i++) {
			usleep(10000);
			n[3] = my_counter("engine_takeovers");
		}
		if (!found && n[3] == n[1])
			harness_fail(__FILE__, __LINE__, "round %d: no "
				     "takeover in 10 s", r);
		xwrite(fd, n, sizeof(n));
	}
	duo_expect(fd, 'x');
	ep_destroy(&b);
}

/* Rounds of stop_child; the counts of rounds whose streak was quiet and
 * whose WRITE needed a takeover. */
static void stop_case(bool found, int *quiet, int *taken)
{
	struct ep_opts o;
	struct duo d;
	struct ep a;
	uint64_t n[4];
	int r;

	unsetenv("SOFTHCA_POLL_PROGRESS");
	/* with a completion, a check period no round lasts: a takeover
	 * could only come from a missing give-back (a check that found the
	 * poller descheduled for a whole period is no evidence) */
	setenv("SOFTHCA_POLL_QUIET", found ? "60000" : "1", 1);
	net_on();
	duo_fork(&d, stop_child, found ? (void *)1 : NULL);
	ep_default_opts(&o, IBV_QPT_RC);
	ep_open_remote(&a, &o, d.fd);
	*quiet = *taken = 0;
	for (r = 0; r < STOP_ROUNDS; r++) {
		if (found) {
			duo_expect(d.fd, 's');
			ep_fill_pattern(a.buf + 8192, MSG, 200 + (uint32_t)r,
					0);
			ASSERT_EQ(ep_post(&a, 1000 + (uint64_t)r, IBV_WR_SEND,
					  8192, MSG, 0, 0), 0);
			ep_expect(a.scq, a.qp, 1000 + (uint64_t)r,
				  IBV_WC_SUCCESS);
		}
		duo_expect(d.fd, 'w');
		ep_fill_pattern(a.buf + (size_t)r * 256, 256,
				300 + (uint32_t)r, 0);
		ASSERT_EQ(ep_post(&a, (uint64_t)r, IBV_WR_RDMA_WRITE,
				  (uint64_t)r * 256, 256, (uint64_t)r * 256, 0),
			  0);
		ep_expect(a.scq, a.qp, (uint64_t)r, IBV_WC_SUCCESS);
		xread(d.fd, n, sizeof(n));
		*quiet += n[2] > n[0];
		*taken += n[3] > n[1];
	}
	ep_net_check();
	duo_signal(d.fd, 'x');
	duo_wait(&d);
	ep_destroy(&a);
	printf("  of %d rounds: %d quiet, %d taken over\n", STOP_ROUNDS,
	       *quiet, *taken);
}

/* Nothing gave the sockets back: the engine took them, and the WRITE
 * was placed (else the child waits for ever). */
TEST(stopped_poller_taken_over)
{
	int quiet, taken;

	stop_case(false, &quiet, &taken);
	ASSERT_EQ(quiet, STOP_ROUNDS);
	ASSERT_EQ(taken, STOP_ROUNDS);
}

/* The completion gave them back: every WRITE was placed at once, with
 * no takeover (without the give-back, none is placed before the check,
 * a minute later: wait_placed fails). */
TEST(completion_gives_sockets_back)
{
	int quiet, taken;

	stop_case(true, &quiet, &taken);
	ASSERT_EQ(quiet, STOP_ROUNDS);
	ASSERT_EQ(taken, 0);
}

/*
 * A thread that ended a streak with a completion is a poller: its next
 * empty poll within the check's period starts a streak at once, without
 * the warm-up of QUIET_AFTER empty polls that a thread polling once
 * needs (in a ping-pong the answer to what it sent next would otherwise
 * come while the engine thread watches the sockets again, and wake it on
 * the poller's CPU); after a period without polls it needs the warm-up
 * again.  The period here: SOFTHCA_POLL_QUIET's (no held ACKs, whose
 * hold could shorten it).  A round of the child: a streak of
 * STREAK_POLLS empty polls that the parent's first SEND ends; one empty
 * poll, right away in even rounds, after RESUME_COLD_US in odd ones;
 * then the parent's second SEND, and a sleep without a call into the
 * library.  In a streak the engine thread leaves the SEND on the socket
 * and the child's next poll finds its CQ empty (it reads the socket
 * itself); outside one the engine thread has placed it: the poll returns
 * it.  The sleep in a streak is a fraction of half the period, before
 * which no check comes (a check wakes the engine thread, which then does
 * all it finds: engine.c, outer), with room for a loaded machine.
 */
#define NEVER_AGAIN 31		/* ACK timeout 4.096 us << 31: 2.4 hours */
#define RESUME_ROUNDS 4
#define RESUME_QUIET_MS "400"	/* the period */
#define RESUME_COLD_US 500000	/* more than the period */
#define RESUME_NEXT_US 50000	/* in a streak: an eighth of it */
#define RESUME_PLACE_US 300000	/* outside one: the engine's time */

static void resume_child(int fd, void *arg)
{
	struct ibv_wc wc;
	struct ep_opts o;
	struct ep b;
	uint32_t got;
	int r, i;

	(void)arg;
	ep_default_opts(&o, IBV_QPT_RC);
	o.timeout = NEVER_AGAIN;
	ep_open_remote(&b, &o, fd);
	for (r = 0; r < RESUME_ROUNDS; r++) {
		ASSERT_EQ(ep_post_recv(&b, 2 * (uint64_t)r, 4096, MSG), 0);
		ASSERT_EQ(ep_post_recv(&b, 2 * (uint64_t)r + 1, 4096, MSG),
			  0);
		for (i = 0; i < STREAK_POLLS; i++)
			ASSERT_EQ(ibv_poll_cq(b.rcq, 1, &wc), 0);
		duo_signal(fd, 's');
		pp_recv(&b, 2 * (uint32_t)r);
		if (r % 2)
			usleep(RESUME_COLD_US);
		ASSERT_EQ(ibv_poll_cq(b.rcq, 1, &wc), 0);
		duo_signal(fd, 't');
		usleep(r % 2 ? RESUME_PLACE_US : RESUME_NEXT_US);
		got = (uint32_t)ibv_poll_cq(b.rcq, 1, &wc);
		if (got)
			ASSERT_U64_EQ(wc.wr_id, 2 * (uint64_t)r + 1);
		else
			pp_recv(&b, 2 * (uint32_t)r + 1);
		xwrite(fd, &got, sizeof(got));
		usleep(RESUME_COLD_US);		/* cold again */
	}
	duo_expect(fd, 'x');
	ep_destroy(&b);
}

TEST(streak_resumes_at_first_empty_poll)
{
	struct ep_opts o;
	struct duo d;
	struct ep a;
	uint32_t got;
	int r;

	unsetenv("SOFTHCA_POLL_PROGRESS");
	setenv("SOFTHCA_POLL_QUIET", RESUME_QUIET_MS, 1);
	setenv("SOFTHCA_NET_ACK_HOLD_US", "0", 1);
	net_on();
	duo_fork(&d, resume_child, NULL);
	ep_default_opts(&o, IBV_QPT_RC);
	o.timeout = NEVER_AGAIN;
	ep_open_remote(&a, &o, d.fd);
	for (r = 0; r < RESUME_ROUNDS; r++) {
		duo_expect(d.fd, 's');
		pp_send(&a, 2 * (uint32_t)r);
		ASSERT_U64_EQ(ep_spin_one(a.scq).wr_id, 2 * (uint64_t)r);
		duo_expect(d.fd, 't');
		pp_send(&a, 2 * (uint32_t)r + 1);
		ASSERT_U64_EQ(ep_spin_one(a.scq).wr_id, 2 * (uint64_t)r + 1);
		xread(d.fd, &got, sizeof(got));
		printf("  round %d, the empty poll %s: the SEND after it %s\n",
		       r, r % 2 ? "after a sleep" : "at once",
		       got ? "placed by the engine thread" :
			     "left to the poller");
		ASSERT_EQ(got, r % 2 ? 1u : 0u);
	}
	ep_net_check();
	duo_signal(d.fd, 'x');
	duo_wait(&d);
	ep_destroy(&a);
}

/* ------------------------------------------------------------------ */
/* The poller's yield (conn.c shca_net_poll_idle)                      */

/*
 * The poller's yield (SOFTHCA_NET_YIELD_US, conn.c shca_net_poll_idle),
 * counted as net_poll_yields, or as net_poll_waits when the poller could
 * not do the engine's work (the engine thread was busy with it): those
 * yield every time.  In this ping-pong every round trip has an empty
 * poll in this process: it posts a SEND and polls for its completion,
 * which needs the peer's ACK.  With the setting 0 a poller yields after
 * every empty poll; so does one that may run on one CPU only (taskset),
 * whatever the setting; on more CPUs, at most once a period (here a
 * second) besides its waits: the first empty poll, then one a second at
 * most for as long as the process ran.
 */
static uint64_t pingpong_yields(double *secs)
{
	struct timespec a, b;
	uint64_t mine, theirs;

	unsetenv("SOFTHCA_POLL_PROGRESS");
	ASSERT_EQ(clock_gettime(CLOCK_MONOTONIC, &a), 0);
	pingpong_case(false, &mine, &theirs);
	ASSERT_EQ(clock_gettime(CLOCK_MONOTONIC, &b), 0);
	*secs = (double)(b.tv_sec - a.tv_sec) +
		(double)(b.tv_nsec - a.tv_nsec) / 1e9;
	printf("  net_poll_yields: %llu, net_poll_waits: %llu in %.3f s\n",
	       (unsigned long long)yields_mine,
	       (unsigned long long)waits_mine, *secs);
	return yields_mine;
}

TEST(poll_yield_every_empty_poll_at_zero)
{
	double secs;

	setenv("SOFTHCA_NET_YIELD_US", "0", 1);
	ASSERT_GE(pingpong_yields(&secs) + waits_mine, PINGS / 2);
}

TEST(poll_yield_bounded_unpinned)
{
	cpu_set_t set;
	double secs;
	uint64_t y;

	if (my_cpus(&set) < 2)
		SKIP("this process may run on one CPU only: it yields after "
		     "every empty poll (poll_yield_every_empty_poll_pinned)");
	setenv("SOFTHCA_NET_YIELD_US", "1000000", 1);
	y = pingpong_yields(&secs);
	ASSERT_GE(y, 1);
	/* one more for the clock reads around the ping-pong */
	ASSERT_LE(y, 2 + (uint64_t)secs);
}

TEST(poll_yield_every_empty_poll_pinned)
{
	double secs;

	setenv("SOFTHCA_NET_YIELD_US", "1000000", 1);
	pin_one_cpu();
	ASSERT_GE(pingpong_yields(&secs) + waits_mine, PINGS / 2);
}

/* ------------------------------------------------------------------ */
/* Held ACKs (conn.c acks_hold)                                        */

/* A ping-pong's ACKs wait for the replies, in both processes: by
 * default. */
TEST(acks_ride_with_replies)
{
	uint64_t mine, theirs;

	unsetenv("SOFTHCA_POLL_PROGRESS");
	unsetenv("SOFTHCA_NET_ACK_HOLD_US");
	pingpong_rounds(WANT_HELD, &mine, &theirs);
	ASSERT_GT(held_mine, 0);
	ASSERT_GT(held_theirs, 0);
}

/* SOFTHCA_NET_ACK_HOLD_US=0: none waits. */
TEST(ack_hold_off)
{
	uint64_t mine, theirs;

	unsetenv("SOFTHCA_POLL_PROGRESS");
	setenv("SOFTHCA_NET_ACK_HOLD_US", "0", 1);
	pingpong_case(false, &mine, &theirs);
	unsetenv("SOFTHCA_NET_ACK_HOLD_US");
	ASSERT_U64_EQ(held_mine, 0);
	ASSERT_U64_EQ(held_theirs, 0);
}

/* The same with packets lost and duplicated in both directions: a held
 * ACK lost, or a request lost behind one, is recovered from as before
 * (every message intact, in order, every send a success).  It found a
 * requester that stopped sending after an RNR NAK whose request a
 * duplicate then carried through (unit_net_rx_oracle,
 * ack_after_rnr_nak_ends_the_wait): the held ACK, going with the next
 * request, makes an RNR NAK likely there. */
TEST(held_acks_under_faults)
{
	uint64_t mine, theirs;

	unsetenv("SOFTHCA_POLL_PROGRESS");
	setenv("SOFTHCA_NET_ACK_HOLD_US", "500", 1);
	setenv("SOFTHCA_FAULTS", "drop=0.02,dup=0.02,seed=15", 1);
	pingpong_rounds(WANT_HELD, &mine, &theirs);
	unsetenv("SOFTHCA_FAULTS");
	ASSERT_GT(held_mine, 0);
	ASSERT_GT(held_theirs, 0);
}

#define LATE_ROUNDS 8
/*
 * An ACK is held only if its batch comes within the hold of the child's
 * last empty poll.  On a loaded machine (a sanitizer build beside another
 * test on two CPUs) the child's engine thread often took the message
 * before the child's polling thread ran again after its signal: its
 * first poll found the completion, its last empty poll was the previous
 * round's, no ACK was held and the timer had nothing to write (CI; 2
 * runs in 8 beside two CPU hogs).  So the child polls its empty CQ
 * before it signals, and the hold is long enough for the signal, the
 * parent's post and the engine's batch to fit in it under load.
 */
#define LATE_HOLD_US "50000"

/*
 * The child receives message r, spinning on its CQ (its ACK waits for a
 * reply), and then makes no call into the library at all until the
 * parent's SEND completed; then reports its net_acks_held and
 * net_acks_late.
 */
static void late_child(int fd, void *arg)
{
	struct ibv_wc wc;
	struct ep_opts o;
	struct ep b;
	uint64_t n[2];
	uint32_t r;

	(void)arg;
	ep_default_opts(&o, IBV_QPT_RC);
	o.timeout = NEVER_AGAIN;
	ep_open_remote(&b, &o, fd);
	for (r = 0; r < LATE_ROUNDS; r++) {
		ASSERT_EQ(ep_post_recv(&b, r, 4096, MSG), 0);
		ASSERT_EQ(ibv_poll_cq(b.rcq, 1, &wc), 0);
		duo_signal(fd, 's');
		pp_recv(&b, r);
		duo_expect(fd, 'c');
		n[0] = my_counter("net_acks_held");
		n[1] = my_counter("net_acks_late");
		xwrite(fd, n, sizeof(n));
	}
	duo_expect(fd, 'x');
	ep_destroy(&b);
}

/*
 * A poller that stops after its message: the parent's QP never sends
 * again (NEVER_AGAIN), so each SEND completes only if the child's held
 * ACK goes without the child: the engine thread's timer writes it
 * (net_acks_late).  Without that timer the parent waits in vain
 * (ep_spin_one fails after 10 s).
 */
TEST(held_ack_goes_when_poller_stops)
{
	struct ep_opts o;
	struct duo d;
	struct ep a;
	uint64_t n[2] = { 0, 0 };
	uint32_t r;

	unsetenv("SOFTHCA_POLL_PROGRESS");
	setenv("SOFTHCA_NET_ACK_HOLD_US", LATE_HOLD_US, 1);
	net_on();
	duo_fork(&d, late_child, NULL);
	ep_default_opts(&o, IBV_QPT_RC);
	o.timeout = NEVER_AGAIN;
	ep_open_remote(&a, &o, d.fd);
	for (r = 0; r < LATE_ROUNDS; r++) {
		duo_expect(d.fd, 's');
		pp_send(&a, r);
		ASSERT_U64_EQ(ep_spin_one(a.scq).wr_id, r);
		duo_signal(d.fd, 'c');
		xread(d.fd, n, sizeof(n));
	}
	ep_net_check();
	duo_signal(d.fd, 'x');
	duo_wait(&d);
	ep_destroy(&a);
	printf("  child: %llu ACKs held, %llu written by the timer\n",
	       (unsigned long long)n[0], (unsigned long long)n[1]);
	ASSERT_GT(n[1], 0);
}
