// SPDX-License-Identifier: MIT
/*
 * rdma_get_cm_event and the calls that wait in it (a synchronous id's
 * rdma_get_request) end with -1 and errno EINTR when a signal handler
 * installed without SA_RESTART runs while they sleep, and sleep on after
 * one installed with it, as rdma-core's write() to the kernel's rdma_cm
 * file does (signal(7)).  The signals are real: see tests/lib/kick.h.
 */
#include <string.h>
#include <unistd.h>

#include "cm_common.h"
#include "kick.h"

struct resolver {
	struct rdma_cm_id *id;
};

/* The event the wait gets: ADDR_RESOLVED of an id on its channel. */
static void resolve_now(void *arg)
{
	struct resolver *r = arg;
	struct sockaddr_in dst;

	make_addr(&dst, loopback_ip(), 0);
	rdma_resolve_addr(r->id, NULL, (struct sockaddr *)&dst, 2000);
}

TEST(get_cm_event_eintr_without_sa_restart)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_event *ev;
	struct resolver r;
	struct kicker k;
	int ret, err;

	ASSERT_NOT_NULL(ch);
	ASSERT_EQ(rdma_create_id(ch, &r.id, NULL, RDMA_PS_TCP), 0);
	kick_install(0);
	kick_start(&k, 0, NULL, NULL);
	ret = rdma_get_cm_event(ch, &ev);
	err = errno;
	kick_stop(&k);
	ASSERT_EQ(ret, -1);
	ASSERT_EQ(err, EINTR);
	ASSERT_GT(kick_hits, 0);
	/* the channel still works */
	resolve_now(&r);
	expect_event_ack(ch, RDMA_CM_EVENT_ADDR_RESOLVED);
	ASSERT_EQ(rdma_destroy_id(r.id), 0);
	rdma_destroy_event_channel(ch);
}

TEST(get_cm_event_restarts_with_sa_restart)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_event *ev;
	struct resolver r;
	struct kicker k;
	int ret;

	ASSERT_NOT_NULL(ch);
	ASSERT_EQ(rdma_create_id(ch, &r.id, NULL, RDMA_PS_TCP), 0);
	kick_install(SA_RESTART);
	kick_start(&k, 20, resolve_now, &r);
	ret = rdma_get_cm_event(ch, &ev);
	kick_stop(&k);
	ASSERT_EQ(ret, 0);
	ASSERT_EQ(ev->event, RDMA_CM_EVENT_ADDR_RESOLVED);
	ASSERT(ev->id == r.id);
	ASSERT_GT(kick_hits, 0);
	ASSERT_EQ(rdma_ack_cm_event(ev), 0);
	ASSERT_EQ(rdma_destroy_id(r.id), 0);
	rdma_destroy_event_channel(ch);
}

/* A synchronous listener's rdma_get_request sleeps until a connect
 * request comes: a signal without SA_RESTART ends it. */
TEST(get_request_eintr_without_sa_restart)
{
	struct rdma_cm_id *listener, *child = NULL;
	struct sockaddr_in sin;
	struct kicker k;
	int ret, err;

	ASSERT_EQ(rdma_create_id(NULL, &listener, NULL, RDMA_PS_TCP), 0);
	make_addr(&sin, loopback_ip(), 0);
	ASSERT_EQ(rdma_bind_addr(listener, (struct sockaddr *)&sin), 0);
	ASSERT_EQ(rdma_listen(listener, 4), 0);
	kick_install(0);
	kick_start(&k, 0, NULL, NULL);
	ret = rdma_get_request(listener, &child);
	err = errno;
	kick_stop(&k);
	ASSERT_EQ(ret, -1);
	ASSERT_EQ(err, EINTR);
	ASSERT_NULL(child);
	ASSERT_EQ(rdma_destroy_id(listener), 0);
}
