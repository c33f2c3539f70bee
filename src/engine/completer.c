// SPDX-License-Identifier: MIT
/*
 * The completer: how a send WQE ends.  Its completion (if signaled, or in
 * error), an atomic's result placed in its local buffer, and, after an
 * error, the QP's fate: RC to the error state, UC and UD to the send queue
 * error state (IBA 10.3.1, 10.8.3.3), both flushing what is left of the
 * send queue.  The requester (requester.c) completes what the same host
 * answered at once; a transport that completes WQEs from its own
 * acknowledgements (the net's RC window) comes here through shca_stages
 * (xport.h).
 */
#include <string.h>

#include "../verbs/shca.h"
#include "engine.h"

/* IBA 9.4.5: the atomic's original value lands in its 8-byte local
 * buffer, scattered over its SGEs in order. */
void shca_atomic_result(const struct iovec *iov, int niov, uint64_t orig)
{
	const char *src = (const char *)&orig;
	size_t left = sizeof(orig);
	int i;

	for (i = 0; i < niov && left; i++) {
		size_t n = iov[i].iov_len < left ? iov[i].iov_len : left;

		memcpy(iov[i].iov_base, src, n);
		src += n;
		left -= n;
	}
}

/* IBA 10.8.3: a send WQE's completion goes to the send CQ when it is
 * signaled (or the QP signals all) and always when it ends in error.  A
 * WQE with a bounce buffer (verbs/import_key.c: the net path's RC on an
 * import) places a READ's or an atomic's bytes first. */
enum ibv_wc_status shca_complete_send(struct shca_qp *qp,
				      const struct shca_send_wqe *w,
				      enum ibv_wc_status status,
				      uint32_t byte_len)
{
	struct ibv_wc wc;

	if (w->imp)
		status = shca_imp_send_done(w, status);
	if (status == IBV_WC_SUCCESS && !qp->sq_sig_all &&
	    !(w->wr.send_flags & IBV_SEND_SIGNALED))
		return status;
	memset(&wc, 0, sizeof(wc));
	wc.wr_id = w->wr.wr_id;
	wc.status = status;
	wc.opcode = shca_wr_wc_opcode(w->wr.opcode);
	wc.byte_len = byte_len;
	wc.qp_num = qp->ibqp.qp_num;
	/* the sender's completion of a message with immediate data says
	 * so, as mlx5's and rxe's do */
	if (status == IBV_WC_SUCCESS &&
	    (w->wr.opcode == IBV_WR_SEND_WITH_IMM ||
	     w->wr.opcode == IBV_WR_RDMA_WRITE_WITH_IMM))
		wc.wc_flags = IBV_WC_WITH_IMM;
	shca_cq_push(qp->scq, &wc, false);
	return status;
}

/*
 * IBA 10.3.1 (SQEr): on UC and UD, a send WQE completed in error moves the
 * QP to the Send Queue Error state: what is left of the send queue is
 * flushed, the receive queue goes on working, and ibv_modify_qp(RTS)
 * resumes sending.  The locks as shca_qp_to_error() takes them.
 */
static void qp_to_sqe(struct shca_qp *qp)
{
	pthread_mutex_lock(&qp->lock);
	if (qp->attr.qp_state == IBV_QPS_RTS) {
		pthread_mutex_lock(&qp->sq.lock);
		pthread_mutex_lock(&qp->rq.lock);
		qp->attr.qp_state = IBV_QPS_SQE;
		qp->attr.cur_qp_state = IBV_QPS_SQE;
		qp->ibqp.state = IBV_QPS_SQE;
		shca_sq_flush(qp);
		shca_qp_publish(qp);
		pthread_mutex_unlock(&qp->rq.lock);
		pthread_mutex_unlock(&qp->sq.lock);
	}
	pthread_mutex_unlock(&qp->lock);
}

/* After a send WQE completed in error: RC to ERR, UC and UD to SQE. */
void shca_sq_failed(struct shca_qp *qp)
{
	if (shca_qpt_rc(qp->ibqp.qp_type))
		shca_qp_to_error(qp);
	else
		qp_to_sqe(qp);
}

