// SPDX-License-Identifier: MIT
/*
 * A QP destroyed while a peer on this host is in the middle of a SEND
 * into it.  The requester of the same host runs the responder's rules in
 * its own thread: it finds the destination QP's record in the owner's
 * arena, takes a receive WQE under the receive queue's lock, copies, and
 * then reads the record again for the receive CQ that gets the
 * completion.  ibv_destroy_qp must not give the record back to the arena
 * while such a receive is under way: a QP or CQ created meanwhile (by
 * another thread of the owner) would take its memory, and the requester
 * would read the CQ from whatever lies there (seen before the fix: no CQ,
 * so the receive was taken for an overrun, the WQE vanished and the SEND
 * ended in RETRY_EXC_ERR; a new QP's record there would put the
 * completion in the new QP's CQ).
 *
 * The SEND's source page is watched by a userfaultfd, so the requester
 * stops in the copy; the owner's main thread destroys the QP (its own
 * receive queue, or one that takes from an SRQ), and a second thread of
 * it creates a QP with a CQ of its own once the destroy is under way,
 * then the page is supplied.  The SEND must complete successfully (its
 * receive was taken before the destroy) and the new CQ stay empty.
 * If the machine is so slow that the destroy has not reached the point
 * where it waits for the receive within its head start (WAIT_MS), the
 * case cannot catch the fault in that run; it never fails wrongly.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/mman.h>

#include "harness.h"
#include "ep.h"
#include "uffd.h"

#define WAIT_MS 300	/* the destroy's head start before the create */

/* the owner's second thread: a QP and a CQ created while its main thread
 * destroys the first QP */
struct creator {
	pthread_t t;
	struct ep *b;
	int fd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
};

static void *create_meanwhile(void *arg)
{
	struct creator *c = arg;
	struct timespec ts = { WAIT_MS / 1000, (WAIT_MS % 1000) * 1000000L };
	struct ibv_qp_init_attr ia;

	nanosleep(&ts, NULL);
	c->cq = ibv_create_cq(c->b->ctx, 16, NULL, NULL, 0);
	ASSERT_NOT_NULL(c->cq);
	memset(&ia, 0, sizeof(ia));
	ia.send_cq = c->cq;
	ia.recv_cq = c->cq;
	ia.qp_type = IBV_QPT_RC;
	ia.cap.max_send_wr = ia.cap.max_recv_wr = 16;
	ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
	c->qp = ibv_create_qp(c->b->pd, &ia);
	ASSERT_NOT_NULL(c->qp);
	duo_signal(c->fd, 'n');
	return NULL;
}

/* arg: the QP takes its receives from an SRQ (bool) */
static void responder(int fd, void *arg)
{
	struct creator c = { .fd = fd };
	struct ibv_wc wc;
	struct ep_opts o;
	struct ep b;

	ep_default_opts(&o, IBV_QPT_RC);
	o.use_srq = *(const bool *)arg;
	ep_open_remote(&b, &o, fd);
	ASSERT_EQ(ep_post_recv(&b, 0x5e, 0, 64), 0);
	duo_signal(fd, 'r');
	duo_expect(fd, 'd');	/* the SEND stopped in its copy */
	c.b = &b;
	ASSERT_EQ(pthread_create(&c.t, NULL, create_meanwhile, &c), 0);
	ASSERT_EQ(ibv_destroy_qp(b.qp), 0);
	b.qp = NULL;
	ASSERT_EQ(pthread_join(c.t, NULL), 0);
	duo_expect(fd, 'c');	/* the SEND's post returned */
	/* the new QP's CQ received nothing */
	ASSERT_EQ(ibv_poll_cq(c.cq, 1, &wc), 0);
	ASSERT_EQ(ibv_destroy_qp(c.qp), 0);
	ASSERT_EQ(ibv_destroy_cq(c.cq), 0);
	duo_signal(fd, 'k');
	duo_expect(fd, 'x');
	ep_destroy(&b);
}

/* ibv_post_send of one signaled SEND from the watched page, in a thread
 * of its own (it stops in the copy) */
struct sender {
	pthread_t t;
	struct ep *a;
	struct ibv_mr *mr;
	int ret;
};

static void *send_one(void *arg)
{
	struct sender *s = arg;

	s->ret = ep_post_key(s->a, 1, IBV_WR_SEND, (uintptr_t)s->mr->addr,
			     s->mr->lkey, 64, 0, 0);
	return NULL;
}

static void run(bool srq)
{
	struct sender s = { .ret = -1 };
	struct ep_opts o;
	struct duo d;
	struct ep a;
	uint8_t *mem;
	int ufd;

	/* the same host's requester, its source page left where the
	 * program put it (no shared re-backing: the userfaultfd stays) */
	ep_skip_if_netns();
	unsetenv("SOFTHCA_NET");
	ASSERT_EQ(setenv("SOFTHCA_MAP", "0", 1), 0);
	ufd = uffd_open();
	duo_fork(&d, responder, &srq);
	ep_default_opts(&o, IBV_QPT_RC);
	ep_open_remote(&a, &o, d.fd);
	mem = mmap(NULL, UFFD_PAGE, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT(mem != MAP_FAILED);
	s.mr = ibv_reg_mr(a.pd, mem, UFFD_PAGE, IBV_ACCESS_LOCAL_WRITE);
	ASSERT_NOT_NULL(s.mr);
	ASSERT_EQ(madvise(mem, UFFD_PAGE, MADV_DONTNEED), 0);
	uffd_watch(ufd, mem, UFFD_PAGE);
	duo_expect(d.fd, 'r');

	s.a = &a;
	ASSERT_EQ(pthread_create(&s.t, NULL, send_one, &s), 0);
	ASSERT_EQ(uffd_fault(ufd), (uintptr_t)mem);
	duo_signal(d.fd, 'd');
	duo_expect(d.fd, 'n');	/* a QP created while the first goes */
	uffd_supply(ufd, (uintptr_t)mem, 0x77);
	ASSERT_EQ(pthread_join(s.t, NULL), 0);
	ASSERT_EQ(s.ret, 0);
	duo_signal(d.fd, 'c');
	duo_expect(d.fd, 'k');
	/* the receive was taken before the destroy: it completes */
	ep_expect(a.scq, a.qp, 1, IBV_WC_SUCCESS);
	duo_signal(d.fd, 'x');
	duo_wait(&d);
	ASSERT_EQ(ibv_dereg_mr(s.mr), 0);
	ep_destroy(&a);
	munmap(mem, UFFD_PAGE);
	close(ufd);
}

TEST(send_into_a_qp_destroyed_meanwhile) { run(false); }
/* the QP's receives from an SRQ, which stays: its lock passed through */
TEST(send_into_a_qp_of_an_srq_destroyed_meanwhile) { run(true); }
