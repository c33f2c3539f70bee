/* SPDX-License-Identifier: MIT */
/*
 * No thread cancellation inside softhca's locked sections.
 *
 * Programs cancel their completion thread while it sleeps in
 * ibv_get_cq_event (the rdma_cm samples' teardown does), and a
 * cancellation request may come while that thread is anywhere else in
 * the library: re-arming, polling, posting the next send, or in
 * ibv_get_cq_event itself, between taking the channel's lock and going
 * to sleep.  glibc acts on a pending request at the next cancellation
 * point -- write(), read(), preadv2(), poll(), send() -- and softhca
 * makes such calls with locks held (an eventfd signalled under the
 * queue lock, a doorbell, a peer's channel fd fetched over its socket).
 * A thread cancelled there leaves the lock held for ever, and the
 * ibv_destroy_cq or rdma_destroy_qp that follows waits on it.
 *
 * On rdma-core with a hardware provider the only cancellation point a
 * verb reaches is the read() of ibv_get_cq_event's sleep (posting and
 * polling make no system call), so that is the rule here: a verb turns
 * cancellation off for its locked work and gives the thread back its
 * own state before it sleeps in a wait that rdma-core's would sleep in
 * (common/evfd.c's shca_evfd_wait), and before it returns.
 */
#ifndef SOFTHCA_COMMON_NOCANCEL_H
#define SOFTHCA_COMMON_NOCANCEL_H

#include <pthread.h>

/* The caller's cancel state, to give back with shca_cancel_restore(). */
static inline int shca_cancel_off(void)
{
	int old = PTHREAD_CANCEL_ENABLE;

	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &old);
	return old;
}

static inline void shca_cancel_restore(int old)
{
	pthread_setcancelstate(old, NULL);
}

/*
 * The posting verbs' way to the same end (ibv_post_send, ibv_post_recv),
 * without the cost: a pthread_setcancelstate pair is two locked
 * instructions, 35 ns, a seventh of an 8-byte WRITE's post on the same
 * host, which usually reaches no cancellation point at all.  Inside, the
 * thread's depth is non-zero, and each call softhca makes of a
 * cancellation point -- all go through common/sys.c's link-time
 * wrappers, which tests/abi/check_cancel_points.sh holds to glibc's list
 * -- turns cancellation off around itself (NOCANCEL there).  A thread
 * in asynchronous cancellation mode is not kept from being cancelled
 * inside: POSIX allows it no call but the async-cancel-safe ones
 * (pthread_cancel, pthread_setcancelstate, pthread_setcanceltype), and
 * rdma-core's posts do not turn cancellation off either.
 */
extern __thread unsigned int shca_nocancel_depth
	__attribute__((visibility("hidden")));

static inline void shca_nocancel_enter(void)
{
	shca_nocancel_depth++;
}

static inline void shca_nocancel_leave(void)
{
	shca_nocancel_depth--;
}

#endif
