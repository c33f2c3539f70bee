// SPDX-License-Identifier: MIT
/*
 * The doorbell: what peers on this host left for this process to do.
 *
 * A peer that acted on our queues (the same-host path) cannot report to our
 * application itself: it marks the object in our arena (*_pending words)
 * and writes our engine's eventfd.  The engine thread then runs
 * shca_doorbell(), which turns the marks into what a NIC would have
 * delivered: completion events on channels, async events, QPs moved to
 * the error state.
 */
#include <errno.h>
#include <sched.h>
#include <string.h>
#include <unistd.h>

#include "shca.h"
#include "../engine/engine.h"
#include "../shm/peer.h"

/*
 * A QP's marks (SHCA_QP_PEND_*).  COMM_EST stays set in the arena (peers
 * then stop setting it) and is reported once; the others are taken.  The
 * engine does it at the doorbell, ibv_query_qp before it reads the state
 * (a peer marks the QP before the error completion it causes is seen).
 */
static void take_marks(struct shca_qp *qp)
{
	struct shca_context *sctx = to_sctx(qp->ibqp.context);
	bool comm_est = false;
	uint32_t bits;

	bits = __atomic_fetch_and(&qp->shm->pending, SHCA_QP_PEND_COMM_EST,
				  __ATOMIC_ACQ_REL);
	if (bits & SHCA_QP_PEND_COMM_EST) {
		/*
		 * IBA 11.6.3.1: the first message received in RTR (the
		 * peer saw RTR).  The application may have moved the QP on
		 * to RTS since: the event happened all the same.
		 */
		pthread_mutex_lock(&qp->lock);
		if (!qp->comm_est_reported &&
		    qp->attr.qp_state != IBV_QPS_RESET) {
			qp->comm_est_reported = true;
			comm_est = true;
		}
		pthread_mutex_unlock(&qp->lock);
	}
	if (comm_est)
		shca_async_event(sctx, IBV_EVENT_COMM_EST, qp);
	bits &= ~(uint32_t)SHCA_QP_PEND_COMM_EST;
	if (!bits)
		return;
	shca_qp_to_error(qp);
	if (bits & SHCA_QP_PEND_ACCESS_ERR)
		shca_async_event(sctx, IBV_EVENT_QP_ACCESS_ERR, qp);
	else if (bits & SHCA_QP_PEND_REQ_ERR)
		shca_async_event(sctx, IBV_EVENT_QP_REQ_ERR, qp);
	else if (bits & SHCA_QP_PEND_FATAL)
		shca_async_event(sctx, IBV_EVENT_QP_FATAL, qp);
}

/*
 * The engine thread may have taken the marks a moment before the
 * application's ibv_query_qp: then it is still applying them, and the
 * query must wait for it (marks_busy), or it reads the state from before
 * an error completion the application has already polled.
 */
void shca_qp_take_marks(struct shca_qp *qp)
{
	__atomic_add_fetch(&qp->marks_busy, 1, __ATOMIC_SEQ_CST);
	take_marks(qp);
	__atomic_sub_fetch(&qp->marks_busy, 1, __ATOMIC_RELEASE);
}

void shca_qp_await_marks(struct shca_qp *qp)
{
	shca_qp_take_marks(qp);
	while (__atomic_load_n(&qp->marks_busy, __ATOMIC_ACQUIRE))
		sched_yield();
}

static void qp_doorbell(struct shca_qp *qp, void *arg)
{
	(void)arg;
	shca_qp_take_marks(qp);
}

void shca_doorbell(void)
{
	shca_cq_doorbell();
	shca_srq_doorbell();
	shca_qp_foreach(qp_doorbell, NULL);
}

/* Wake this process's own engine (work to do outside the caller's locks). */
void shca_doorbell_ring(void)
{
	uint64_t one = 1;
	int fd = shca_engine_doorbell_fd();

	if (fd >= 0 && write(fd, &one, sizeof(one)) < 0)
		shca_dbg("doorbell: %s", strerror(errno));
}

static void overrun_qp(struct shca_qp *qp, void *arg)
{
	struct shca_cq *cq = arg;

	if (qp->scq == cq || qp->rcq == cq)
		shca_qp_to_error(qp);
}

/* IBA o11-5.2.2: the QPs completing to an overrun CQ go to error. */
void shca_qp_cq_overrun(struct shca_cq *cq)
{
	shca_qp_foreach(overrun_qp, cq);
}

/* Listen for peers and run the engine; once per process.  0 or -errno. */
int shca_transport_init(void)
{
	shca_engine_on_doorbell(shca_doorbell);
	shca_rimport_serve();
	return shca_peer_listen();
}
