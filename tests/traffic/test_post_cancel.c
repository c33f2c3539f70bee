// SPDX-License-Identifier: MIT
/*
 * A thread with a cancellation request pending posts a SEND to another
 * process whose receive CQ is armed: the same-host requester writes that
 * process's channel eventfd itself, with the QP's exec_lock held.  A
 * posting verb does not turn cancellation off (35 ns a post); it marks
 * the thread, and each cancellation point softhca calls turns it off for
 * itself (common/nocancel.h, common/sys.c's NOCANCEL).  The post must
 * return (the thread is cancelled at its own pthread_testcancel), the
 * SEND complete, the responder get its event, and the QP be destroyed
 * (a thread cancelled inside the write left exec_lock held: the destroy
 * hung).
 */
#include <pthread.h>
#include <semaphore.h>

#include "ep.h"
#include "harness.h"

#if defined(__SANITIZE_ADDRESS__)
/* as in tests/security/test_cq_cancel.c: ASan's sigaltstack() in a
 * cancelled thread's exit writes into the unwound frames' stale shadow */
const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
	return "use_sigaltstack=0";
}
#endif

static int cq_marker;

static void armed_child(int fd, void *arg)
{
	struct ibv_cq *cq;
	struct ep_opts o;
	void *ctx;
	struct ep b;

	(void)arg;
	ep_default_opts(&o, IBV_QPT_RC);
	o.channel = true;
	o.cq_context = &cq_marker;
	ep_open_remote(&b, &o, fd);
	ASSERT_EQ(ep_post_recv(&b, 0xb1, 0, 4096), 0);
	ASSERT_EQ(ibv_req_notify_cq(b.rcq, 0), 0);
	duo_signal(fd, 'r');
	ASSERT_EQ(ibv_get_cq_event(b.ch, &cq, &ctx), 0);
	ASSERT(cq == b.rcq);
	ASSERT(ctx == &cq_marker);
	ibv_ack_cq_events(cq, 1);
	ep_expect(b.rcq, b.qp, 0xb1, IBV_WC_SUCCESS);
	duo_signal(fd, 'c');
	ep_destroy(&b);
}

struct victim {
	struct ep *a;
	sem_t ready, cancelled;
	volatile int done;	/* the post returned, with this + 1 */
};

static void *victim_main(void *arg)
{
	struct victim *v = arg;

	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, NULL);
	sem_post(&v->ready);
	while (sem_wait(&v->cancelled))
		;
	pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, NULL);
	v->done = ep_post(v->a, 0xa1, IBV_WR_SEND, 0, 32, 0, 0) + 1;
	pthread_testcancel();
	return NULL;
}

TEST(cancel_pending_post_send_to_an_armed_peer)
{
	struct victim v = { 0 };
	struct ep_opts o;
	struct duo d;
	struct ep a;
	pthread_t t;
	void *res;

	duo_fork(&d, armed_child, NULL);
	ep_default_opts(&o, IBV_QPT_RC);
	ep_open_remote(&a, &o, d.fd);
	duo_expect(d.fd, 'r');
	v.a = &a;
	sem_init(&v.ready, 0, 0);
	sem_init(&v.cancelled, 0, 0);
	ASSERT_EQ(pthread_create(&t, NULL, victim_main, &v), 0);
	while (sem_wait(&v.ready))
		;
	ASSERT_EQ(pthread_cancel(t), 0);
	sem_post(&v.cancelled);
	ASSERT_EQ(pthread_join(t, &res), 0);
	/* cancelled at pthread_testcancel, not inside the post */
	ASSERT(res == PTHREAD_CANCELED);
	ASSERT_EQ(v.done, 1);
	ep_expect(a.scq, a.qp, 0xa1, IBV_WC_SUCCESS);
	duo_expect(d.fd, 'c');
	duo_wait(&d);
	ep_destroy(&a);
}
