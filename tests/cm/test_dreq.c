// SPDX-License-Identifier: MIT
/*
 * A DREQ nobody answers: the peer's application never calls
 * rdma_disconnect (its CM queues DISCONNECTED for it and waits, as the
 * kernel's rdma_cm does: the DREP is the application's rdma_disconnect or
 * rdma_destroy_id), so no DREP comes.  The side that sent the DREQ gets
 * DISCONNECTED with status -ETIMEDOUT when the IB CM's DREQ timeout runs
 * out (the kernel's cma_ib_handler on IB_CM_DREQ_ERROR; softhca's
 * CM_DREQ_TIMEOUT_MS, 17 s, README "A DREQ nobody answers"), then
 * TIMEWAIT_EXIT after the timewait.
 *
 * One case of about 20 s.  No lower bound on the time is asserted; the
 * wait is bounded only to say what did not come.
 */
#include <poll.h>
#include <string.h>

#include "cm_common.h"

/* softhca's timeout is 17 s: far more than that is "never". */
#define NEVER_MS	45000

static void silent_server(struct peer *p, void *arg)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_id *lid, *id;
	struct rdma_cm_event *ev;

	(void)arg;
	peer_send(p, listen_on(ch, &lid, loopback_ip(), RDMA_PS_TCP));
	ev = expect_event(ch, RDMA_CM_EVENT_CONNECT_REQUEST);
	id = ev->id;
	ASSERT_EQ(rdma_ack_cm_event(ev), 0);
	make_qp(id, IBV_QPT_RC);
	ASSERT_EQ(rdma_accept(id, NULL), 0);
	expect_event_ack(ch, RDMA_CM_EVENT_ESTABLISHED);
	peer_send(p, 1);
	/* the DREQ came: DISCONNECTED, and this side says nothing */
	ev = expect_event(ch, RDMA_CM_EVENT_DISCONNECTED);
	ASSERT_EQ(ev->status, 0);
	ASSERT_EQ(rdma_ack_cm_event(ev), 0);
	peer_send(p, 2);
	/* until the other side timed out */
	ASSERT_EQ(peer_recv(p), 3);
	rdma_destroy_qp(id);
	ASSERT_EQ(rdma_destroy_id(id), 0);
	ASSERT_EQ(rdma_destroy_id(lid), 0);
	rdma_destroy_event_channel(ch);
}

TEST(unanswered_dreq_times_out)
{
	struct rdma_event_channel *ch;
	struct pollfd pfd;
	struct rdma_cm_event *ev;
	struct rdma_cm_id *id;
	struct peer p;
	uint16_t port;

	peer_start(&p, silent_server, NULL);
	port = (uint16_t)peer_recv(&p);
	ch = rdma_create_event_channel();
	ASSERT_NOT_NULL(ch);
	ASSERT_EQ(rdma_create_id(ch, &id, NULL, RDMA_PS_TCP), 0);
	resolve_to(ch, id, loopback_ip(), port);
	make_qp(id, IBV_QPT_RC);
	ASSERT_EQ(rdma_connect(id, NULL), 0);
	expect_event_ack(ch, RDMA_CM_EVENT_ESTABLISHED);
	ASSERT_EQ(peer_recv(&p), 1);

	ASSERT_EQ(rdma_disconnect(id), 0);	/* the DREQ */
	ASSERT_EQ(peer_recv(&p), 2);		/* it arrived */
	pfd = (struct pollfd){ .fd = ch->fd, .events = POLLIN };
	if (poll(&pfd, 1, NEVER_MS) != 1)
		harness_fail(__FILE__, __LINE__, "no event %d s after an "
			     "unanswered DREQ (softhca's DREQ timeout is "
			     "17 s)", NEVER_MS / 1000);
	ASSERT_EQ(rdma_get_cm_event(ch, &ev), 0);
	if (ev->event != RDMA_CM_EVENT_DISCONNECTED ||
	    ev->status != -ETIMEDOUT)
		harness_fail(__FILE__, __LINE__, "after an unanswered DREQ: "
			     "%s with status %d, expected "
			     "RDMA_CM_EVENT_DISCONNECTED with -ETIMEDOUT (%d)",
			     rdma_event_str(ev->event), ev->status,
			     -ETIMEDOUT);
	ASSERT(ev->id == id);
	ASSERT_EQ(rdma_ack_cm_event(ev), 0);
	expect_event_ack(ch, RDMA_CM_EVENT_TIMEWAIT_EXIT);

	peer_send(&p, 3);
	peer_wait(&p);
	rdma_destroy_qp(id);
	ASSERT_EQ(rdma_destroy_id(id), 0);
	rdma_destroy_event_channel(ch);
}
