// SPDX-License-Identifier: MIT
/*
 * The engine thread's bounded spin (issue 15, engine.c engine_spin,
 * SOFTHCA_NET_SPIN_US), on the net path (SOFTHCA_NET=1, an RC pair in
 * this process: both ends' packets go through its engine):
 *
 *  - with the spin on, a ping-pong of SENDs arrives intact, and the
 *    engine found work while it spun (engine_spin_batches in `softhca
 *    stat` moved: the spin ran, so the next check means something);
 *  - once the traffic stops, the engine thread ends up asleep in
 *    epoll_wait without timeout (asleep.h: seen in /proc as the call it
 *    sleeps in, not as a time), whatever the spin's length: an idle
 *    process sleeps.  A spin without end fails here;
 *  - the same with SOFTHCA_POLL_PROGRESS on (the default), where the
 *    polling thread and the spinning engine race for the same work;
 *  - without the variable, and on a process that may use one CPU only
 *    (it would take that CPU from the application), the engine never
 *    spins: engine_spin_batches stays 0, and it sleeps as well.
 */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "asleep.h"
#include "ep.h"

#define PINGS 500
#define MSG 8
#define RECV_OFF 4096

static long long spin_batches(void)
{
	return ep_stat_counter(SOFTHCA_TOOL, getpid(), "engine_spin_batches");
}

/* i goes a to b, then b to a, each checked byte by byte. */
static void one_way(struct ep *from, struct ep *to, uint32_t i)
{
	int64_t d;

	memset(to->buf + RECV_OFF, EP_SENTINEL, MSG);
	ASSERT_EQ(ep_post_recv(to, i, RECV_OFF, MSG), 0);
	ep_fill_pattern(from->buf, MSG, i, 0);
	ASSERT_EQ(ep_post(from, i, IBV_WR_SEND, 0, MSG, 0, 0), 0);
	ASSERT_U64_EQ(ep_spin_one(from->scq).wr_id, i);
	ASSERT_U64_EQ(ep_spin_one(to->rcq).wr_id, i);
	d = ep_find_pattern_diff(to->buf + RECV_OFF, MSG, i, 0);
	if (d >= 0)
		harness_fail(__FILE__, __LINE__, "message %u: byte %lld", i,
			     (long long)d);
}

/* A ping-pong, then the engine seen asleep; spin_batches afterwards. */
static long long pingpong_then_idle(void)
{
	struct ep_opts o;
	struct ep a, b;
	long long spun;
	uint32_t i;

	setenv("SOFTHCA_NET", "1", 1);
	ep_default_opts(&o, IBV_QPT_RC);
	o.buf_size = RECV_OFF + 4096;
	ep_pair(&a, &o, &b, &o);
	for (i = 0; i < PINGS; i++) {
		one_way(&a, &b, 2 * i);
		one_way(&b, &a, 2 * i + 1);
	}
	ep_net_check();
	spun = spin_batches();
	/* traffic over, QPs still there: the engine must go to sleep on
	 * its own (a destroy would wake it); the only epoll user here */
	ASSERT_SOME_THREAD_IN_EPOLL();
	ep_destroy(&a);
	ep_destroy(&b);
	printf("  engine_spin_batches: %lld in %u messages\n", spun,
	       2 * PINGS);
	return spun;
}

static void two_cpus_or_skip(void)
{
	cpu_set_t set;

	ASSERT_EQ(sched_getaffinity(0, sizeof(set), &set), 0);
	if (CPU_COUNT(&set) < 2)
		SKIP_ENV("this process may run on one CPU only: the engine "
			 "does not spin there (see the pinned case)");
}

TEST(spin_on_engine_alone)
{
	two_cpus_or_skip();
	/* the longest spin there is: the sleep after it is no accident */
	setenv("SOFTHCA_NET_SPIN_US", "1000", 1);
	setenv("SOFTHCA_POLL_PROGRESS", "0", 1);
	ASSERT_GT(pingpong_then_idle(), 0);
}

TEST(spin_on_with_poll_progress)
{
	two_cpus_or_skip();
	setenv("SOFTHCA_NET_SPIN_US", "1000", 1);
	unsetenv("SOFTHCA_POLL_PROGRESS");
	pingpong_then_idle();
}

TEST(spin_off_by_default)
{
	unsetenv("SOFTHCA_NET_SPIN_US");
	setenv("SOFTHCA_POLL_PROGRESS", "0", 1);
	ASSERT_EQ(pingpong_then_idle(), 0);
}

TEST(spin_off_on_one_cpu)
{
	cpu_set_t set;

	/* as `taskset -c 0`: the engine thread inherits it */
	CPU_ZERO(&set);
	CPU_SET(sched_getcpu(), &set);
	ASSERT_EQ(sched_setaffinity(0, sizeof(set), &set), 0);
	setenv("SOFTHCA_NET_SPIN_US", "1000", 1);
	setenv("SOFTHCA_POLL_PROGRESS", "0", 1);
	ASSERT_EQ(pingpong_then_idle(), 0);
}
