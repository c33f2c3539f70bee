// SPDX-License-Identifier: MIT
/*
 * A net connection's life timer acts only on what holds once it has the
 * connection's lock (net/conn.c life_fire, engine.c shca_timer_stale).
 *
 * The race: the timer expires, the engine unlinks it and calls life_fire,
 * which waits for c->lock; meanwhile the holder of the lock (a sender)
 * queues a frame and writes it, or arms the timer anew.  When life_fire
 * gets the lock, the connection is not idle (a frame went out), or the
 * expiry is stale (a new deadline stands); before the fix it read the
 * activity before taking the lock and closed the live connection as idle.
 *
 * White box, no timing: net/conn.c is compiled into this test (its
 * struct and static callbacks), the rest of libibverbs linked statically
 * as in test_retry_timer; an RC pair in this process on the net path,
 * its connection up and quiet after one WRITE, the idle period the
 * default minute (no expiry comes by itself).  The test holds c->lock,
 * arms the life timer for now (the expiry, by hand), waits until the
 * engine has unlinked it (life_fire is then blocked on the lock), then
 * does what a sender does under that lock, or nothing (the control: an
 * idle connection is closed, so the test sees a callback that acts), and
 * lets the lock go; shca_engine_sync() returns after the batch that ran
 * the callback.
 */
#include "net/conn.c"

#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>
#include <infiniband/verbs.h>

#include "harness.h"
#include "ep.h"
#include "verbs/shca.h"

#define WAIT_STEPS	10000		/* of 1 ms: the engine's bound, 10 s */

enum meanwhile { M_NOTHING, M_FRAME, M_REARM };

static uint64_t idle_closes(void)
{
	return __atomic_load_n(
		&shca_stat_proc()->v[SHCA_STAT_NET_IDLE_CLOSES],
		__ATOMIC_RELAXED);
}

static void run(enum meanwhile m)
{
	struct shca_conn *c;
	struct ep_opts o;
	struct ep a, b;
	uint64_t closes0;
	bool up;
	int i;

	ASSERT_EQ(setenv("SOFTHCA_NET", "1", 1), 0);
	ep_default_opts(&o, IBV_QPT_RC);
	ep_pair(&a, &o, &b, &o);
	ASSERT_EQ(ep_post(&a, 1, IBV_WR_RDMA_WRITE, 0, 64, 0, 0), 0);
	ep_expect(a.scq, a.qp, 1, IBV_WC_SUCCESS);
	c = to_sqp(a.qp)->net.conn;
	ASSERT_NOT_NULL(c);
	for (i = 0; i < WAIT_STEPS && shca_net_queued(c); i++)
		usleep(1000);
	ASSERT_EQ(shca_net_queued(c), 0);
	ASSERT(idle_ns != 0);

	pthread_mutex_lock(&c->lock);
	ASSERT_EQ(c->state, CONN_UP);
	ASSERT(c->life.fn == life_fire);
	/* the last look saw what has been so far: idle from here on */
	c->seen = __atomic_load_n(&c->activity, __ATOMIC_RELAXED);
	closes0 = idle_closes();
	shca_timer_arm(&c->life, shca_now_ns());
	for (i = 0; i < WAIT_STEPS && shca_timer_armed(&c->life); i++)
		usleep(1000);
	ASSERT(!shca_timer_armed(&c->life));	/* life_fire waits */
	if (m == M_FRAME) {
		/* a sender's frame, queued and written under the lock
		 * (enqueue_locked counts it so) */
		__atomic_fetch_add(&c->activity, 1, __ATOMIC_RELAXED);
	} else if (m == M_REARM) {
		/* the timer armed anew under the lock (life_start) */
		shca_timer_arm(&c->life, shca_now_ns() + idle_ns);
	}
	pthread_mutex_unlock(&c->lock);
	shca_engine_sync();	/* the callback's batch is over */

	pthread_mutex_lock(&c->lock);
	up = c->fd >= 0 && c->state == CONN_UP;
	pthread_mutex_unlock(&c->lock);
	if (m == M_NOTHING) {
		/* the expiry stands, the connection was idle: closed */
		ASSERT(!up);
		ASSERT_U64_EQ(idle_closes(), closes0 + 1);
	} else {
		/* a frame went out, or a new deadline stands: kept */
		ASSERT(up);
		ASSERT_U64_EQ(idle_closes(), closes0);
		ASSERT(shca_timer_armed(&c->life));
		/* and it carries traffic still */
		ASSERT_EQ(ep_post(&a, 2, IBV_WR_RDMA_WRITE, 0, 64, 0, 0), 0);
		ep_expect(a.scq, a.qp, 2, IBV_WC_SUCCESS);
	}
	ep_destroy(&a);
	ep_destroy(&b);
}

TEST(idle_connection_closed) { run(M_NOTHING); }
TEST(frame_while_waiting_kept) { run(M_FRAME); }
TEST(rearmed_while_waiting_kept) { run(M_REARM); }
