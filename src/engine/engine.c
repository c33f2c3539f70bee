// SPDX-License-Identifier: MIT
/*
 * The engine thread (see engine.h).  Everything it does is driven by one
 * epoll set: the doorbell eventfd, a timerfd set to the earliest timer,
 * and the fds others asked it to watch (the peer listener and connections).
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <poll.h>
#include <unistd.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>

#include "../common/backoff.h"
#include "../common/env.h"
#include "../common/log.h"
#include "../common/nocancel.h"
#include "../common/stat.h"
#include "../common/util.h"
#include "../shm/arena.h"
#include "engine.h"

struct watch {
	int fd;
	shca_fd_fn fn;
	void *arg;
	struct watch *next;
};

static pthread_mutex_t engine_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t timer_done = PTHREAD_COND_INITIALIZER;
static pid_t engine_pid;
static pthread_t engine_thread;
static int epfd = -1, doorbell = -1, timerfd = -1;
static void (*doorbell_fn)(void);
static struct watch *watches;
static struct shca_timer *timers;	/* sorted by deadline */
static struct shca_timer *running_timer;
/* fd callbacks: one running (under engine_lock), and how many ended */
static bool dispatching;
static uint64_t dispatch_epoch;
static pthread_cond_t dispatch_done = PTHREAD_COND_INITIALIZER;
/* epoll_wait results taken, and the last batch whose callbacks all ran
 * (shca_engine_sync); under engine_lock, signalled by dispatch_done */
static uint64_t batch_taken, batch_done;
static __thread bool in_engine;
/*
 * Who is the engine right now: the engine thread while it handles a
 * batch, or an application thread whose poll found its CQ empty
 * (shca_engine_progress).  One at a time, so every callback and timer
 * still runs in one thread at a time, as if in the engine thread.
 * app_runs counts the batches application threads ran (written under
 * run_lock).
 */
static pthread_mutex_t run_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t app_runs;
static int run_cpu = -1;	/* where an application thread holds it */

/*
 * With SOFTHCA_POLL_QUIET=N the engine thread sleeps on outer: the
 * doorbell, the timerfd and, but while an application thread polls (a
 * streak of empty polls), epfd with everything else.  A poller looks at
 * epfd itself after every empty poll (shca_engine_progress), so a
 * message for it needs no wake-up of the engine thread, whose CPU is
 * often the poller's own.
 * - A thread's QUIET_AFTER-th empty poll in a row takes epfd out of
 *   outer (one that polls once and stops does not).
 * - A poll that returns completions puts it back once no other thread
 *   is in a streak: the poller may go and spin on its memory, where
 *   only the engine thread can place what comes next.  It does what
 *   epfd holds first, which would wake the engine thread at once.
 * - A check (quiet_timer) puts it back if no empty poll came for
 *   quiet_check_ns: a thread that polled and then stopped without a
 *   completion (or died) costs what comes for it about that much after
 *   its last empty poll.  The pollers push the check later as they go
 *   (quiet_keep, at most every half period): while a thread polls, the
 *   timer does not wake the engine thread, whose wake-up on a poller's
 *   one CPU costs that poller two context switches.
 * - The check also runs poll_watch_fn (the net path's held ACKs,
 *   net/conn.c), work that is due only once the pollers stop, so that
 *   it needs no timer of its own while one polls.
 * Under quiet_lock: streaks, streak_gen (also read relaxed),
 * epfd_watched, empty_polls_seen(_at), quiet_due (also read relaxed).  A
 * thread is in the current streak set while its shca_my_streak equals
 * streak_gen; a check that takes over bumps streak_gen and so ends
 * them all.
 */
#define QUIET_AFTER	4
static int outer = -1;
static pthread_mutex_t quiet_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned int streaks;
static uint64_t streak_gen = 1;
static bool epfd_watched;
static uint64_t empty_polls, empty_polls_seen, empty_polls_seen_at;
static uint64_t quiet_check_ns;	/* SOFTHCA_POLL_QUIET, read once */
static struct shca_timer quiet_timer;
static uint64_t quiet_due;		/* quiet_timer's deadline */
static void (*poll_watch_fn)(void);	/* shca_engine_poll_watch */
static uint64_t poll_watch_ns;
__thread uint64_t shca_my_streak;
__thread unsigned int shca_my_empties;
static __thread uint64_t my_streak_left;	/* when it last ended one */

uint64_t shca_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void shca_engine_quiesce(void)
{
	uint64_t e;

	if (in_engine)
		return;
	pthread_mutex_lock(&engine_lock);
	e = dispatch_epoch;
	while (dispatching && dispatch_epoch == e)
		pthread_cond_wait(&dispatch_done, &engine_lock);
	pthread_mutex_unlock(&engine_lock);
}

/*
 * The engine's epoll_wait harvests every fd that is readable when it
 * returns.  A batch taken after this call started (batch_taken + 1, with
 * the doorbell written so that one comes even if nothing else is ready)
 * includes every socket that held data before it, and when that batch is
 * done, so is what the data said.  Not from the engine thread, nor in a
 * process whose engine does not run; no cancellation point.
 */
void shca_engine_sync(void)
{
	uint64_t want, one = 1;
	int cs;

	if (in_engine)
		return;
	cs = shca_cancel_off();
	pthread_mutex_lock(&engine_lock);
	if (engine_pid != shca_getpid() || doorbell < 0) {
		pthread_mutex_unlock(&engine_lock);
		shca_cancel_restore(cs);
		return;
	}
	want = batch_taken + 1;
	if (write(doorbell, &one, sizeof(one)) == sizeof(one))
		while (batch_done < want)
			pthread_cond_wait(&dispatch_done, &engine_lock);
	pthread_mutex_unlock(&engine_lock);
	shca_cancel_restore(cs);
}

bool shca_in_engine(void)
{
	return in_engine;
}

/* What the timerfd is set to (0: nothing); engine_lock. */
static uint64_t timerfd_at;

/* engine_lock held */
static void program_timerfd(void)
{
	struct itimerspec its;

	memset(&its, 0, sizeof(its));
	timerfd_at = 0;
	if (timers) {
		uint64_t d = timers->deadline ? timers->deadline : 1;

		its.it_value.tv_sec = (time_t)(d / 1000000000ull);
		its.it_value.tv_nsec = (long)(d % 1000000000ull);
		timerfd_at = d;
	}
	timerfd_settime(timerfd, TFD_TIMER_ABSTIME, &its, NULL);
}

/* engine_lock held */
static void timer_unlink(struct shca_timer *t)
{
	struct shca_timer **pp;

	for (pp = &timers; *pp; pp = &(*pp)->next)
		if (*pp == t) {
			*pp = t->next;
			break;
		}
	__atomic_store_n(&t->armed, false, __ATOMIC_RELEASE);
	t->next = NULL;
}

/*
 * Arm t for deadline (engine_lock held).  exact: also when the timerfd is
 * set earlier than the first deadline now, set it later (a system call),
 * so that it does not go off for nothing: for a deadline pushed later
 * and later while nothing is due (quiet_keep).
 */
static void timer_set(struct shca_timer *t, uint64_t deadline, bool exact)
{
	struct shca_timer **pp;
	uint64_t head;

	if (t->armed)
		timer_unlink(t);
	t->gen++;
	t->deadline = deadline;
	for (pp = &timers; *pp && (*pp)->deadline <= deadline;
	     pp = &(*pp)->next)
		;
	t->next = *pp;
	*pp = t;
	__atomic_store_n(&t->armed, true, __ATOMIC_RELEASE);
	if (timerfd < 0)
		return;
	/* a timerfd already set to go off no later is left as it is: it
	 * sets itself to the head when it does (run_timers).  The RC ACK
	 * timer is armed for every message and disarmed by its ACK; this
	 * makes it one early wake-up per timeout, not a system call per
	 * message */
	head = timers->deadline ? timers->deadline : 1;
	if ((timers == t && (!timerfd_at || timerfd_at > head)) ||
	    (exact && timerfd_at && timerfd_at < head))
		program_timerfd();
}

void shca_timer_arm(struct shca_timer *t, uint64_t deadline)
{
	pthread_mutex_lock(&engine_lock);
	timer_set(t, deadline, false);
	pthread_mutex_unlock(&engine_lock);
}

void shca_timer_disarm(struct shca_timer *t)
{
	pthread_mutex_lock(&engine_lock);
	if (t->armed)
		timer_unlink(t);
	t->gen++;
	pthread_mutex_unlock(&engine_lock);
}

/* An expiry acts only on the deadline it came for: a fn that waited for a
 * lock while its timer was armed anew (or disarmed) lets it be. */
bool shca_timer_stale(struct shca_timer *t)
{
	bool stale;

	pthread_mutex_lock(&engine_lock);
	stale = t->gen != t->fired;
	pthread_mutex_unlock(&engine_lock);
	return stale;
}

/* After this returns, fn is neither pending nor running (unless called
 * from fn itself): a running fn that armed its timer again (a retry) is
 * disarmed once it is done. */
void shca_timer_cancel(struct shca_timer *t)
{
	pthread_mutex_lock(&engine_lock);
	t->gen++;
	for (;;) {
		if (t->armed)
			timer_unlink(t);
		if (running_timer != t || in_engine)
			break;
		pthread_cond_wait(&timer_done, &engine_lock);
	}
	pthread_mutex_unlock(&engine_lock);
}

static void run_timers(void)
{
	uint64_t exp, now = shca_now_ns();

	while (read(timerfd, &exp, sizeof(exp)) < 0 && errno == EINTR)
		;
	pthread_mutex_lock(&engine_lock);
	while (timers && timers->deadline <= now) {
		struct shca_timer *t = timers;

		timer_unlink(t);
		t->fired = t->gen;
		running_timer = t;
		pthread_mutex_unlock(&engine_lock);
		t->fn(t);
		pthread_mutex_lock(&engine_lock);
		running_timer = NULL;
		pthread_cond_broadcast(&timer_done);
		now = shca_now_ns();
	}
	program_timerfd();
	pthread_mutex_unlock(&engine_lock);
}

static void run_doorbell(void)
{
	uint64_t v;

	while (read(doorbell, &v, sizeof(v)) < 0 && errno == EINTR)
		;
	void (*fn)(void) = __atomic_load_n(&doorbell_fn, __ATOMIC_ACQUIRE);

	if (fn)
		fn();
}

/*
 * One batch of epoll results, in whichever thread is the engine for now
 * (run_lock held): the doorbell, the timers, the fds' callbacks.
 */
static void run_batch(const struct epoll_event *evs, int n)
{
	uint64_t batch;
	int i;

	pthread_mutex_lock(&engine_lock);
	batch = ++batch_taken;
	pthread_mutex_unlock(&engine_lock);
	for (i = 0; i < n; i++) {
		int fd = evs[i].data.fd;
		struct watch *w;
		shca_fd_fn fn = NULL;
		void *warg = NULL;

		if (fd == doorbell) {
			run_doorbell();
			continue;
		}
		if (fd == timerfd) {
			run_timers();
			continue;
		}
		pthread_mutex_lock(&engine_lock);
		for (w = watches; w; w = w->next)
			if (w->fd == fd) {
				fn = w->fn;
				warg = w->arg;
			}
		dispatching = fn != NULL;
		pthread_mutex_unlock(&engine_lock);
		if (!fn)
			continue;
		fn(fd, evs[i].events, warg);
		pthread_mutex_lock(&engine_lock);
		dispatching = false;
		dispatch_epoch++;
		pthread_cond_broadcast(&dispatch_done);
		pthread_mutex_unlock(&engine_lock);
	}
	pthread_mutex_lock(&engine_lock);
	batch_done = batch;
	pthread_cond_broadcast(&dispatch_done);
	pthread_mutex_unlock(&engine_lock);
}

/*
 * The engine thread's turn.  An application thread that holds run_lock
 * is doing what woke us, for a few microseconds.  On another CPU, spin
 * (yielding) a while before sleeping on the lock, so that its unlock
 * needs no futex wake (a system call on the poller's path, per message).
 * On our CPU, sleep at once: a yield would hand the CPU to a thread
 * that, once it let go of the lock, may spin on its memory for a whole
 * time slice while we wait to be scheduled; the unlock's wake-up runs us
 * as soon as it comes.
 */
static void engine_take_run_lock(void)
{
	int i;

	for (i = 0; i < 64; i++) {
		if (!pthread_mutex_trylock(&run_lock))
			return;
		if (__atomic_load_n(&run_cpu, __ATOMIC_RELAXED) ==
		    sched_getcpu())
			break;
		sched_yield();
	}
	pthread_mutex_lock(&run_lock);
}

/*
 * SOFTHCA_NET_SPIN_US (issue 15): after a batch, the engine thread looks
 * again without sleeping for up to this long (ns here; 0: never), so
 * that what comes soon after, the next message of a ping-pong above all,
 * finds it awake instead of paying a wake-up.  Read once per engine.
 */
static uint64_t spin_ns;

static void spin_read(void)
{
	const char *s = getenv("SOFTHCA_NET_SPIN_US");
	unsigned int us;
	int ret = shca_net_spin_parse(s, &us);

	if (ret == -EINVAL)
		shca_warn("SOFTHCA_NET_SPIN_US=%s: expected a number of "
			  "microseconds (0 .. %u), spin off", s,
			  SHCA_NET_SPIN_US_MAX);
	else if (ret == -ERANGE)
		shca_warn("SOFTHCA_NET_SPIN_US=%s: at most %u, using %u", s,
			  SHCA_NET_SPIN_US_MAX, SHCA_NET_SPIN_US_MAX);
	spin_ns = (uint64_t)us * 1000u;
}

/* The CPUs this thread may run on (0: the kernel did not say). */
static int cpus_here(void)
{
	cpu_set_t set;

	return sched_getaffinity(0, sizeof(set), &set) ? 0 : CPU_COUNT(&set);
}

bool shca_thread_cpus_many(uint64_t now)
{
	static __thread uint64_t asked_at;
	static __thread bool many;

	if (!asked_at || now - asked_at >= 100000000ull) {
		many = cpus_here() > 1;
		asked_at = now;
	}
	return many;
}

/*
 * Look for a batch without sleeping until the clock reaches until: its
 * size, 0 when the time ran out with nothing, or < 0 (epoll_wait's
 * error).  Bounded by until whatever comes: the caller sleeps next.
 * Between looks the CPU goes to whoever else wants it (sched_yield).
 */
static int engine_spin(struct epoll_event *evs, uint64_t until)
{
	int n;

	for (;;) {
		n = epoll_wait(epfd, evs, 16, 0);
		if (n)
			return n;
		if (shca_now_ns() >= until)
			return 0;
		sched_yield();
	}
}

static bool poll_quiet_env(void);

static void *engine_main(void *arg)
{
	struct epoll_event evs[16];
	uint64_t spin_until = 0;
	bool quiet = poll_quiet_env();	/* sleep on outer */
	sigset_t all;

	(void)arg;
	/* the application's signals go to its own threads */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	in_engine = true;
	spin_read();
	/* held until the process ends: how peers know it did (arena.h) */
	shca_arena_hold_life();
	for (;;) {
		uint64_t gen = __atomic_load_n(&app_runs, __ATOMIC_ACQUIRE);
		int n = 0;

		if (spin_until) {
			n = engine_spin(evs, spin_until);
			spin_until = 0;
			if (n > 0)
				shca_stat_add(shca_stat_proc(),
					      SHCA_STAT_ENGINE_SPIN_BATCHES, 1);
		}
		if (!n && quiet) {
			struct epoll_event o[3];

			/* outer says there is work; epfd holds it all */
			n = epoll_wait(outer, o, 3, -1);
			if (n > 0)
				n = epoll_wait(epfd, evs, 16, 0);
		} else if (!n) {
			n = epoll_wait(epfd, evs, 16, -1);
		}
		/* counted, a batch found by the spin too (not its empty
		 * looks): an idle engine's count stands still, a runaway
		 * one's runs away (tests/security/flood.c) */
		if (n >= 0)
			shca_stat_add(shca_stat_proc(),
				      SHCA_STAT_ENGINE_WAKEUPS, 1);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			shca_err("engine: epoll_wait: %s", strerror(errno));
			return NULL;
		}
		if (!n)		/* a poller took it meanwhile */
			continue;
		engine_take_run_lock();
		/* an application thread was the engine meanwhile: what woke
		 * us may be done, and a callback must not read a socket on
		 * old news (read them afresh) */
		if (__atomic_load_n(&app_runs, __ATOMIC_RELAXED) != gen)
			n = epoll_wait(epfd, evs, 16, 0);
		if (n > 0)
			run_batch(evs, n);
		pthread_mutex_unlock(&run_lock);
		/* bounded: a spin starts only after a batch, and ends
		 * spin_ns after it, in a sleep unless another came.  Only
		 * where it takes no CPU from the application: a thread that
		 * may run on one CPU only (taskset) shares it with the
		 * application's threads, and a spin there delays the very
		 * thread it waits for (README: pinned ib_write_lat 13x
		 * slower on average with the spin forced there). */
		if (n > 0 && spin_ns) {
			uint64_t now = shca_now_ns();

			if (shca_thread_cpus_many(now))
				spin_until = now + spin_ns;
		}
	}
	return NULL;
}

/* SOFTHCA_POLL_PROGRESS=0: only the engine thread is the engine. */
static bool poll_progress_env(void)
{
	static int on = -1;
	const char *s;

	if (__atomic_load_n(&on, __ATOMIC_RELAXED) < 0) {
		s = getenv("SOFTHCA_POLL_PROGRESS");
		if (s && *s && strcmp(s, "0") && strcmp(s, "1"))
			shca_warn("SOFTHCA_POLL_PROGRESS=%s: expected 0 or 1, "
				  "ignored", s);
		__atomic_store_n(&on, !(s && !strcmp(s, "0")),
				 __ATOMIC_RELAXED);
	}
	return __atomic_load_n(&on, __ATOMIC_RELAXED);
}

/*
 * An application thread that found nothing to poll is the engine for one
 * batch (run_lock held), if epoll has one: it cannot be cancelled while
 * the callbacks run, as in the engine thread.  Its signals are not held
 * back (two system calls a batch, on the path of every message it
 * receives): a handler that runs meanwhile finds the library as inside
 * any verb, where rdma-core gives no async-signal safety either (mlx5's
 * poll holds the CQ's lock), and the batch's sends never raise SIGPIPE
 * (MSG_NOSIGNAL, as on the post path).  The batch's size, or 0.
 */
static int app_batch(void)
{
	struct epoll_event evs[16];
	int n, cs;

	n = epoll_wait(epfd, evs, 16, 0);
	if (n <= 0)
		return 0;
	cs = shca_cancel_off();
	in_engine = true;
	__atomic_store_n(&run_cpu, sched_getcpu(), __ATOMIC_RELAXED);
	shca_stat_add(shca_stat_proc(), SHCA_STAT_APP_PROGRESS, 1);
	run_batch(evs, n);
	__atomic_store_n(&run_cpu, -1, __ATOMIC_RELAXED);
	in_engine = false;
	__atomic_store_n(&app_runs, app_runs + 1, __ATOMIC_RELEASE);
	shca_cancel_restore(cs);
	return n;
}

/* May this thread be the engine in this process? */
static bool app_may_run(void)
{
	return !in_engine &&
	       __atomic_load_n(&engine_pid, __ATOMIC_ACQUIRE) ==
		       shca_getpid() &&
	       poll_progress_env();
}

/* quiet_lock held */
static void watch_epfd(void)
{
	struct epoll_event ev;

	memset(&ev, 0, sizeof(ev));
	ev.events = EPOLLIN;
	ev.data.fd = epfd;
	if (!epoll_ctl(outer, EPOLL_CTL_ADD, epfd, &ev) || errno == EEXIST)
		epfd_watched = true;
}

/* How long after a poller's last empty poll the check comes (see outer):
 * SOFTHCA_POLL_QUIET, or what poll_watch_fn needs if sooner. */
static uint64_t quiet_period(void)
{
	uint64_t w = __atomic_load_n(&poll_watch_ns, __ATOMIC_RELAXED);

	return w && w < quiet_check_ns ? w : quiet_check_ns;
}

/* The engine thread takes epfd back from pollers that stopped polling
 * without a completion, and does poll_watch_fn's work (engine context;
 * see outer).  The pollers push it later while they poll (quiet_keep),
 * and note in empty_polls_seen what they had counted then, and when: the
 * same count a check period later means no empty poll for that long. */
static void quiet_check(struct shca_timer *t)
{
	uint64_t e = __atomic_load_n(&empty_polls, __ATOMIC_RELAXED);
	void (*fn)(void) = __atomic_load_n(&poll_watch_fn, __ATOMIC_ACQUIRE);
	uint64_t now = shca_now_ns();

	if (fn)
		fn();
	pthread_mutex_lock(&quiet_lock);
	if (!epfd_watched) {
		if (e != empty_polls_seen) {
			/* polls since, none later than half a period
			 * after the last push: half a period more */
			empty_polls_seen = e;
			empty_polls_seen_at = now;
			__atomic_store_n(&quiet_due, now + quiet_period() / 2,
					 __ATOMIC_RELAXED);
			shca_timer_arm(t, quiet_due);
		} else if (now - empty_polls_seen_at < quiet_check_ns) {
			/* fn's time came first */
			__atomic_store_n(&quiet_due,
					 empty_polls_seen_at + quiet_check_ns,
					 __ATOMIC_RELAXED);
			shca_timer_arm(t, quiet_due);
		} else {
			__atomic_store_n(&streak_gen, streak_gen + 1,
					 __ATOMIC_RELAXED);
			streaks = 0;
			watch_epfd();
			shca_stat_add(shca_stat_proc(),
				      SHCA_STAT_ENGINE_TAKEOVERS, 1);
		}
	}
	pthread_mutex_unlock(&quiet_lock);
}

/* Is the check due between half a period and a period from now? */
static bool quiet_due_soon(uint64_t now)
{
	uint64_t w = quiet_period(),
		 due = __atomic_load_n(&quiet_due, __ATOMIC_RELAXED);

	return now + w / 2 <= due && due <= now + w;
}

/* quiet_lock held: the check a period from now (armed; or moved, if it
 * was due within half a period, or later than a period: after a check
 * that did poll_watch_fn's work and found no poll since), counting the
 * empty polls so far as seen. */
static void quiet_keep(uint64_t now)
{
	uint64_t w = quiet_period();

	if (shca_timer_armed(&quiet_timer) && quiet_due_soon(now))
		return;
	__atomic_store_n(&quiet_due, now + w, __ATOMIC_RELAXED);
	empty_polls_seen = __atomic_load_n(&empty_polls, __ATOMIC_RELAXED);
	empty_polls_seen_at = now;
	pthread_mutex_lock(&engine_lock);
	timer_set(&quiet_timer, now + w, true);
	pthread_mutex_unlock(&engine_lock);
}

void shca_engine_poll_watch(void (*fn)(void), uint64_t max_ns)
{
	__atomic_store_n(&poll_watch_ns, max_ns, __ATOMIC_RELAXED);
	__atomic_store_n(&poll_watch_fn, fn, __ATOMIC_RELEASE);
}

bool shca_engine_poll_watched(void)
{
	return poll_quiet_env() && shca_timer_armed(&quiet_timer);
}

/* This thread's poll found nothing: it is in a streak (see outer). */
static void streak_enter(uint64_t now)
{
	/* a thread that ended a streak within the period (a completion it
	 * polled for) is a poller at its first empty poll: in a ping-pong
	 * the answer to what it just sent would otherwise come while the
	 * engine thread watches the sockets again, and wake it */
	if (shca_my_empties < QUIET_AFTER &&
	    now - my_streak_left > quiet_period()) {
		shca_my_empties++;
		return;
	}
	__atomic_add_fetch(&empty_polls, 1, __ATOMIC_RELAXED);
	if (shca_my_streak == __atomic_load_n(&streak_gen, __ATOMIC_RELAXED)) {
		/* the check is due in more than half a period, and no
		 * later than a period: nothing to do (a relaxed read;
		 * quiet_keep looks again) */
		if (quiet_due_soon(now))
			return;
		pthread_mutex_lock(&quiet_lock);
		if (!epfd_watched &&
		    shca_my_streak == __atomic_load_n(&streak_gen,
						      __ATOMIC_RELAXED))
			quiet_keep(now);
		pthread_mutex_unlock(&quiet_lock);
		return;
	}
	pthread_mutex_lock(&quiet_lock);
	shca_my_streak = streak_gen;
	streaks++;
	if (epfd_watched &&
	    !epoll_ctl(outer, EPOLL_CTL_DEL, epfd, NULL)) {
		epfd_watched = false;
		shca_stat_add(shca_stat_proc(), SHCA_STAT_ENGINE_QUIET, 1);
	}
	if (!epfd_watched)
		quiet_keep(now);
	pthread_mutex_unlock(&quiet_lock);
}

void shca_engine_streak_end(void)
{
	if (__atomic_load_n(&engine_pid, __ATOMIC_ACQUIRE) != shca_getpid()) {
		shca_my_streak = 0;	/* forked: the parent's */
		return;
	}
	/* what came meanwhile would wake the engine thread the moment it
	 * watches epfd again: this thread, the engine's CPU often, does it
	 * first */
	if (!pthread_mutex_trylock(&run_lock)) {
		app_batch();
		pthread_mutex_unlock(&run_lock);
	}
	pthread_mutex_lock(&quiet_lock);
	if (shca_my_streak == streak_gen && !--streaks && !epfd_watched)
		watch_epfd();
	shca_my_streak = 0;
	pthread_mutex_unlock(&quiet_lock);
	my_streak_left = shca_now_ns();
}

/*
 * SOFTHCA_POLL_QUIET=N: a polling thread keeps the engine asleep (see
 * outer), and the check that takes the sockets back from a poller that
 * stopped comes every N ms (1 .. QUIET_MAX_MS); 0: off.  Unset: on
 * (QUIET_AUTO_MS) where the thread that starts the engine may run on one
 * CPU only (taskset, an MPI rank bound to a core), off elsewhere.  With
 * one CPU the engine thread woken for a message takes it from the very
 * poller that reads the message anyway; with a CPU to spare the wake
 * costs little and the streaks' epoll_ctl calls cost more (README: the
 * unpinned READ).  Read once, at the engine's start.
 */
#define QUIET_MAX_MS	60000u
#define QUIET_AUTO_MS	1u

static bool poll_quiet_env(void)
{
	static int on = -1;

	if (__atomic_load_n(&on, __ATOMIC_RELAXED) < 0) {
		const char *s = getenv("SOFTHCA_POLL_QUIET");
		unsigned int ms;

		if (!s || !*s) {
			ms = cpus_here() == 1 ? QUIET_AUTO_MS : 0;
		} else if (shca_env_uint(s, QUIET_MAX_MS, &ms)) {
			shca_warn("SOFTHCA_POLL_QUIET=%s: expected 0 (off) or "
				  "a check period in ms (1 .. %u), off", s,
				  QUIET_MAX_MS);
			ms = 0;
		}
		quiet_check_ns = (uint64_t)ms * 1000000u;
		__atomic_store_n(&on, ms > 0, __ATOMIC_RELEASE);
	}
	return __atomic_load_n(&on, __ATOMIC_ACQUIRE);
}

int shca_engine_poll_empty(uint64_t now)
{
	if (!app_may_run())
		return -EAGAIN;
	if (poll_quiet_env())
		streak_enter(now);
	return shca_engine_progress();
}

int shca_engine_progress(void)
{
	int n;

	if (!app_may_run())
		return -EAGAIN;
	if (pthread_mutex_trylock(&run_lock))
		return -EBUSY;
	n = app_batch();
	pthread_mutex_unlock(&run_lock);
	return n > 0;
}

int shca_engine_wait(int fd)
{
	struct pollfd p[2] = { { .fd = fd, .events = POLLIN },
			       { .fd = epfd, .events = POLLIN } };
	int cs;

	if (!app_may_run())
		return -EAGAIN;
	shca_engine_poll_found();	/* asleep: not a poller */
	if (poll(p, 2, -1) < 0)
		return -errno;
	if (!(p[1].revents & POLLIN) || p[0].revents)
		return 0;
	/* the engine's work came first: this thread does it (after the
	 * engine thread, if it got there first), then looks again */
	cs = shca_cancel_off();
	pthread_mutex_lock(&run_lock);
	app_batch();
	pthread_mutex_unlock(&run_lock);
	shca_cancel_restore(cs);
	return 0;
}

static int add_fd(int ep, int fd)
{
	struct epoll_event ev;

	memset(&ev, 0, sizeof(ev));
	ev.events = EPOLLIN;
	ev.data.fd = fd;
	return epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) ? -errno : 0;
}

/* outer made: what it watches, epfd at first (engine_lock) */
static int quiet_start(void)
{
	int ret = add_fd(outer, doorbell);

	if (!ret)
		ret = add_fd(outer, timerfd);
	epfd_watched = false;
	if (!ret)
		ret = add_fd(outer, epfd);
	if (!ret)
		epfd_watched = true;
	memset(&quiet_timer, 0, sizeof(quiet_timer));
	quiet_timer.fn = quiet_check;
	return ret;
}

static void close_all(void)
{
	if (outer >= 0)
		close(outer);
	if (epfd >= 0)
		close(epfd);
	if (doorbell >= 0)
		close(doorbell);
	if (timerfd >= 0)
		close(timerfd);
	epfd = doorbell = timerfd = outer = -1;
}

int shca_engine_start(void)
{
	pthread_attr_t attr;
	int ret = 0;

	pthread_mutex_lock(&engine_lock);
	if (engine_pid == shca_getpid())
		goto out;
	if (engine_pid) {
		/* forked child: the parent's thread does not exist here */
		struct watch *w, *next;

		close_all();
		for (w = watches; w; w = next) {
			next = w->next;
			free(w);
		}
		watches = NULL;
		timers = NULL;
		running_timer = NULL;
		/* a thread of the parent may have been the engine at fork */
		pthread_mutex_init(&run_lock, NULL);
		app_runs = 0;
		/* the parent's pollers are not ours */
		pthread_mutex_init(&quiet_lock, NULL);
		__atomic_store_n(&streak_gen, streak_gen + 1,
				 __ATOMIC_RELAXED);
		streaks = 0;
	}
	timerfd_at = 0;
	epfd = epoll_create1(EPOLL_CLOEXEC);
	/* the engine thread sleeps on outer (see there), if at all */
	if (poll_quiet_env())
		outer = epoll_create1(EPOLL_CLOEXEC);
	doorbell = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	timerfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	if (epfd < 0 || (poll_quiet_env() && outer < 0) || doorbell < 0 ||
	    timerfd < 0) {
		ret = -errno;
		close_all();
		goto out;
	}
	ret = add_fd(epfd, doorbell);
	if (!ret)
		ret = add_fd(epfd, timerfd);
	if (!ret && outer >= 0)
		ret = quiet_start();
	if (ret) {
		close_all();
		goto out;
	}
	/* the arena first: the thread holds its life lock (arena.h) */
	shca_arena_self();
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&attr, 256 * 1024);
	ret = -pthread_create(&engine_thread, &attr, engine_main, NULL);
	pthread_attr_destroy(&attr);
	if (ret) {
		close_all();
		goto out;
	}
	__atomic_store_n(&engine_pid, shca_getpid(), __ATOMIC_RELEASE);
	if (timers)
		program_timerfd();
out:
	pthread_mutex_unlock(&engine_lock);
	return ret;
}

int shca_engine_doorbell_fd(void)
{
	return doorbell;
}

void shca_engine_on_doorbell(void (*fn)(void))
{
	__atomic_store_n(&doorbell_fn, fn, __ATOMIC_RELEASE);
}

int shca_engine_watch(int fd, shca_fd_fn fn, void *arg)
{
	struct watch *w = calloc(1, sizeof(*w));
	int ret;

	if (!w)
		return -ENOMEM;
	w->fd = fd;
	w->fn = fn;
	w->arg = arg;
	pthread_mutex_lock(&engine_lock);
	w->next = watches;
	watches = w;
	ret = add_fd(epfd, fd);
	if (ret) {
		watches = w->next;
		free(w);
	}
	pthread_mutex_unlock(&engine_lock);
	return ret;
}

int shca_engine_watch_events(int fd, uint32_t events)
{
	struct epoll_event ev;

	memset(&ev, 0, sizeof(ev));
	ev.events = events;
	ev.data.fd = fd;
	return epoll_ctl(epfd, EPOLL_CTL_MOD, fd, &ev) ? -errno : 0;
}

void shca_engine_unwatch(int fd)
{
	struct watch **pp, *w;

	pthread_mutex_lock(&engine_lock);
	epoll_ctl(epfd, EPOLL_CTL_DEL, fd, NULL);
	for (pp = &watches; (w = *pp); pp = &w->next)
		if (w->fd == fd) {
			*pp = w->next;
			free(w);
			break;
		}
	pthread_mutex_unlock(&engine_lock);
}

/* The pause is over: the listener is watched again (engine thread). */
static void listen_resume(struct shca_timer *t)
{
	struct shca_listen_backoff *b =
		container_of(t, struct shca_listen_backoff, timer);

	shca_engine_watch_events(b->fd, EPOLLIN);
}

bool shca_listen_failed(struct shca_listen_backoff *b, int err)
{
	unsigned int ms;

	if (!shca_accept_exhausted(err))
		return false;
	ms = shca_backoff_next(&b->ms);
	shca_warn_once("accept: %s: pausing the listener (%u ms, growing "
		       "to %u ms while it lasts)", strerror(err), ms,
		       SHCA_BACKOFF_MAX_MS);
	/* still registered, waiting for nothing: no wake-ups at all */
	shca_engine_watch_events(b->fd, 0);
	b->timer.fn = listen_resume;
	shca_timer_arm(&b->timer, shca_now_ns() + ms * 1000000ull);
	return true;
}
