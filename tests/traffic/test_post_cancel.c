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
#include "cancel_pending.h"
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

static int post_send(void *a)
{
	return ep_post(a, 0xa1, IBV_WR_SEND, 0, 32, 0, 0);
}

TEST(cancel_pending_post_send_to_an_armed_peer)
{
	struct ep_opts o;
	struct duo d;
	struct ep a;

	duo_fork(&d, armed_child, NULL);
	ep_default_opts(&o, IBV_QPT_RC);
	ep_open_remote(&a, &o, d.fd);
	duo_expect(d.fd, 'r');
	ASSERT_EQ(cancel_pending_call(post_send, &a), 0);
	ep_expect(a.scq, a.qp, 0xa1, IBV_WC_SUCCESS);
	duo_expect(d.fd, 'c');
	duo_wait(&d);
	ep_destroy(&a);
}
