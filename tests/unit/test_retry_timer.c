// SPDX-License-Identifier: MIT
/*
 * The QP's retry timer acts only on the deadline it was woken for
 * (engine/requester.c qp_retry_timer, engine.c shca_timer_stale).
 *
 * The race: the timer expires, the engine unlinks it and calls its
 * callback, which waits for the QP's exec_lock; a post holding that lock
 * meanwhile finds the timer unarmed and arms it anew for the WQE it
 * sends.  When the callback gets the lock, no deadline has passed (the
 * one that stands is the post's), yet without the check it treats the
 * WQEs in flight as timed out: it sends them again and counts a retry
 * against retry_cnt.
 *
 * White box, no timing: the library is linked statically (its objects,
 * as tests/fuzz's targets), an RC pair in this process on the net path
 * (SOFTHCA_NET=1) with every data packet dropped (SOFTHCA_FAULTS=drop=1:
 * no ACK ever comes) and an ACK timeout of about a minute, so that no
 * expiry comes by itself.  The test holds A's exec_lock (recursive, as a
 * post does), arms the timer for now (the expiry, by hand), waits until
 * the engine has unlinked it (its callback is then blocked on the lock),
 * and then either
 *   - posts a second WRITE while still holding the lock: the post arms
 *     the timer again; after the lock goes, the callback must do nothing
 *     (head_retries, local_ack_timeout and retrans_pkts unchanged);
 *   - or lets the lock go at once: the expiry stands, and the callback
 *     counts one timeout, one retry and sends the WQE again (this case
 *     shows the test sees a callback that acts).
 * The end of the callback is known without a clock: shca_engine_sync()
 * returns after the engine's next batch, which starts only after the one
 * running the callback ended.
 */
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>
#include <infiniband/verbs.h>

#include "harness.h"
#include "ep.h"
#include "common/stat.h"
#include "engine/engine.h"
#include "shm/arena.h"
#include "verbs/shca.h"
#include "net/net.h"

#define WAIT_STEPS	10000		/* of 1 ms: the engine's bound, 10 s */

struct snap {
	uint32_t head_retries;
	uint64_t timeouts;		/* local_ack_timeout */
	uint64_t retrans;		/* retrans_pkts */
};

/* exec_lock held (a QP's counters, read as `softhca stat` does) */
static void snap(struct shca_qp *qp, struct snap *s)
{
	s->head_retries = qp->head_retries;
	s->timeouts = __atomic_load_n(
		&qp->shm->stats.v[SHCA_STAT_LOCAL_ACK_TIMEOUT],
		__ATOMIC_RELAXED);
	s->retrans = __atomic_load_n(&qp->shm->stats.v[SHCA_STAT_RETRANS_PKTS],
				     __ATOMIC_RELAXED);
}

static void setup(struct ep *a, struct ep *b)
{
	struct shca_qp *qp;
	struct ep_opts o;
	int i;

	ASSERT_EQ(setenv("SOFTHCA_NET", "1", 1), 0);
	ASSERT_EQ(setenv("SOFTHCA_FAULTS", "drop=1", 1), 0);
	ep_default_opts(&o, IBV_QPT_RC);
	o.timeout = 24;		/* 4.096 us << 24: 69 s, never by itself */
	o.retry_cnt = 7;
	ep_pair(a, &o, b, &o);
	qp = to_sqp(a->qp);
	/* the first try, dropped: the ACK timer armed for it */
	ASSERT_EQ(ep_post(a, 1, IBV_WR_RDMA_WRITE, 0, 64, 0, 0), 0);
	ASSERT(shca_timer_armed(&qp->retry_timer));
	ASSERT_NOT_NULL(qp->shm);
	/* the connection up (its handshake is no data packet: not
	 * dropped): an expiry while it opens is no timeout (rc_timer) */
	ASSERT(qp->net.on);
	ASSERT_NOT_NULL(qp->net.conn);
	for (i = 0; i < WAIT_STEPS && shca_net_queued(qp->net.conn); i++)
		usleep(1000);
	ASSERT_EQ(shca_net_queued(qp->net.conn), 0);
}

/* exec_lock held: the timer expires now; returns once the engine has
 * taken it (its callback runs, and waits for the lock). */
static void expire_now(struct shca_qp *qp)
{
	int i;

	shca_timer_arm(&qp->retry_timer, shca_now_ns());
	for (i = 0; i < WAIT_STEPS && shca_timer_armed(&qp->retry_timer); i++)
		usleep(1000);
	ASSERT(!shca_timer_armed(&qp->retry_timer));
}

static void run(bool post_meanwhile)
{
	struct snap s0, s1;
	struct shca_qp *qp;
	struct ep a, b;

	setup(&a, &b);
	qp = to_sqp(a.qp);
	pthread_mutex_lock(&qp->exec_lock);
	expire_now(qp);
	snap(qp, &s0);
	if (post_meanwhile) {
		/* the post (exec_lock is recursive) sends its WQE and arms
		 * the timer, which it finds unarmed */
		ASSERT_EQ(ep_post(&a, 2, IBV_WR_RDMA_WRITE, 64, 64, 64, 0), 0);
		ASSERT(shca_timer_armed(&qp->retry_timer));
	}
	pthread_mutex_unlock(&qp->exec_lock);
	/* the callback's batch is over */
	shca_engine_sync();
	pthread_mutex_lock(&qp->exec_lock);
	snap(qp, &s1);
	pthread_mutex_unlock(&qp->exec_lock);
	printf("  head_retries %u -> %u, local_ack_timeout %llu -> %llu, "
	       "retrans_pkts %llu -> %llu\n", s0.head_retries,
	       s1.head_retries, (unsigned long long)s0.timeouts,
	       (unsigned long long)s1.timeouts,
	       (unsigned long long)s0.retrans,
	       (unsigned long long)s1.retrans);
	if (post_meanwhile) {
		/* a stale expiry: nothing sent again, nothing counted */
		ASSERT_EQ(s1.head_retries, s0.head_retries);
		ASSERT_U64_EQ(s1.timeouts, s0.timeouts);
		ASSERT_U64_EQ(s1.retrans, s0.retrans);
		ASSERT(shca_timer_armed(&qp->retry_timer));
	} else {
		/* the expiry stands: one timeout, one retry, sent again */
		ASSERT_EQ(s1.head_retries, s0.head_retries + 1);
		ASSERT_U64_EQ(s1.timeouts, s0.timeouts + 1);
		ASSERT_U64_EQ(s1.retrans, s0.retrans + 1);
	}
	/* no completion either way: the WQEs are still in flight */
	ep_expect_empty(a.scq);
	ep_destroy(&a);
	ep_destroy(&b);
}

TEST(expired_retry_timer_retries)
{
	run(false);
}

TEST(rearmed_while_waiting_no_retry)
{
	run(true);
}
