// SPDX-License-Identifier: MIT
/*
 * retry_cnt counts retries, not tries (IBA 9.7.6.1.3): the first try of a
 * request waits its whole local ACK timeout like every retry, so with
 * retry_cnt = n a peer that never answers is given up after n + 1
 * timeouts.  The same-host path learns at once that nothing will answer
 * (the peer's process is gone); it must still wait the first try's
 * timeout, not count it at the try.
 *
 * The check is by state, not by time: with retry_cnt = 0 and an ACK
 * timeout of 8.6 s (timeout 21), the request posted to a dead peer has
 * not completed when ibv_post_send returns; moving the QP to ERR then
 * flushes it (WR_FLUSH_ERR).  Counting the first try's timeout at the try
 * completes it with RETRY_EXC_ERR inside ibv_post_send.  (The total
 * count, retry_cnt + 1 timeouts, is checked by tests/traffic/test_stat.c:
 * peer_gone_retry_exceeded_counted.)  Both paths: ctest runs it again
 * with SOFTHCA_NET=1 (traffic_test_retry_count_net), where the first
 * WRITE must have gone through TCP.
 */
#include <signal.h>
#include <string.h>
#include <unistd.h>
#include <sys/wait.h>

#include "harness.h"
#include "ep.h"

#define DST	(1u << 20)

static void first_try_waits(enum ibv_wr_opcode op, uint32_t len)
{
	struct ibv_qp_attr attr;
	struct ep_opts o;
	struct duo d;
	struct ep a;
	int status;

	duo_fork(&d, ep_victim, NULL);
	ep_default_opts(&o, IBV_QPT_RC);
	o.timeout = 21;		/* 4.096 us << 21: 8.6 s */
	o.retry_cnt = 0;
	ep_open_remote(&a, &o, d.fd);
	duo_expect(d.fd, 'u');
	/* it works while the peer lives (and the connection is up) */
	ASSERT_EQ(ep_post(&a, 0xa1, IBV_WR_RDMA_WRITE, 0, 16, DST, 0), 0);
	ep_expect(a.scq, a.qp, 0xa1, IBV_WC_SUCCESS);
	ep_net_check();

	ASSERT_EQ(kill(d.pid, SIGKILL), 0);
	ASSERT_EQ(waitpid(d.pid, &status, 0), d.pid);
	ASSERT(WIFSIGNALED(status));

	ASSERT_EQ(ep_post(&a, 0xa2, op, 0, len, DST, 0), 0);
	/* the try is still waiting for its ACK */
	ep_expect_empty(a.scq);
	ASSERT_EQ(ep_qp_state(a.qp), IBV_QPS_RTS);
	memset(&attr, 0, sizeof(attr));
	attr.qp_state = IBV_QPS_ERR;
	ASSERT_EQ(ibv_modify_qp(a.qp, &attr, IBV_QP_STATE), 0);
	ep_expect(a.scq, a.qp, 0xa2, IBV_WC_WR_FLUSH_ERR);

	close(d.fd);
	ep_destroy(&a);
}

TEST(retry_cnt_0_first_try_waits_write)
{
	first_try_waits(IBV_WR_RDMA_WRITE, 16);
}

TEST(retry_cnt_0_first_try_waits_send)
{
	first_try_waits(IBV_WR_SEND, 16);
}

TEST(retry_cnt_0_first_try_waits_read)
{
	first_try_waits(IBV_WR_RDMA_READ, 16);
}

