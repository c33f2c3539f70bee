// SPDX-License-Identifier: MIT
/*
 * QPs and SRQs of ids, and the attributes of their transitions.
 *
 * rdma_init_qp_attr answers what the kernel's rdma_init_qp_attr and the
 * IB CM's ib_cm_init_qp_attr answer for a RoCE port: before the CM
 * exchange (and always for UD) the INIT attributes, then from the REQ/REP
 * exchanged: the address vector of the path, the peer's QPN, the PSNs
 * (RTR: our starting PSN, RTS: the peer's), the negotiated
 * responder_resources and initiator_depth, retry and RNR retry counts,
 * the local ACK timeout.  rdma_connect/rdma_accept move the id's QP
 * through INIT/RTR/RTS with them, as rdma-core does, unless the
 * application owns its QP (rdma_init_qp_attr + rdma_establish).
 *
 * rdma_create_qp makes, as rdma-core's does, a completion channel and a
 * CQ for each direction the caller did not give (cq_context is the id:
 * rdma_get_send_comp/rdma_get_recv_comp assert it), uses the device's
 * default PD when given none, and moves the QP to INIT (UD: to RTS).
 */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

#include "cma.h"

/* The states in which the IB CM answers INIT / RTR and RTS attributes. */
static bool cm_init_ok(enum cm_ib_state s)
{
	return s == IB_REQ_SENT || s == IB_REQ_RCVD || s == IB_REP_SENT ||
	       s == IB_REP_RCVD || s == IB_ESTABLISHED;
}

static bool cm_rtr_ok(enum cm_ib_state s)
{
	return s == IB_REQ_RCVD || s == IB_REP_SENT || s == IB_REP_RCVD ||
	       s == IB_ESTABLISHED;
}

/* cm_lock held.  0 or -errno. */
int cm_init_qp_attr(struct cm_id *id, struct ibv_qp_attr *attr, int *mask)
{
	enum ibv_qp_state state = attr->qp_state;
	enum ibv_qp_type t = id->id.qp_type;
	/* the kernel's ib_cm_init_qp_attr: a responder's attributes for RC
	 * and XRC targets, a requester's for RC and XRC initiators; an XRC
	 * target's RTS takes the timeout too */
	bool resp = t == IBV_QPT_RC || t == IBV_QPT_XRC_RECV;
	bool req = t == IBV_QPT_RC || t == IBV_QPT_XRC_SEND;

	if (!id->dev)
		return -EINVAL;
	memset(attr, 0, sizeof(*attr));
	attr->qp_state = state;
	if (cm_is_ud(id) || id->ib == IB_NONE) {
		/* cma_ib_init_qp_attr */
		attr->pkey_index = 0;		/* P_Key 0xffff */
		attr->port_num = id->id.port_num;
		*mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT;
		if (cm_is_ud(id)) {
			attr->qkey = cm_qkey(id);
			*mask |= IBV_QP_QKEY;
		} else {
			attr->qp_access_flags = 0;
			*mask |= IBV_QP_ACCESS_FLAGS;
		}
	} else {
		switch (state) {
		case IBV_QPS_INIT:
			if (!cm_init_ok(id->ib))
				return -EINVAL;
			*mask = IBV_QP_STATE | IBV_QP_ACCESS_FLAGS |
				IBV_QP_PKEY_INDEX | IBV_QP_PORT;
			attr->qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
			if (id->cm_responder_resources)
				attr->qp_access_flags |=
					IBV_ACCESS_REMOTE_READ |
					IBV_ACCESS_REMOTE_ATOMIC;
			attr->pkey_index = 0;
			attr->port_num = id->id.port_num;
			break;
		case IBV_QPS_RTR:
			if (!cm_rtr_ok(id->ib))
				return -EINVAL;
			*mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
				IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
			cm_ah_from_path(id, &attr->ah_attr);
			attr->path_mtu = id->path_mtu;
			attr->dest_qp_num = id->remote_qpn;
			if (resp) {
				*mask |= IBV_QP_MAX_DEST_RD_ATOMIC |
					 IBV_QP_MIN_RNR_TIMER;
				attr->max_dest_rd_atomic =
					id->cm_responder_resources;
				attr->min_rnr_timer = 0;
			}
			break;
		case IBV_QPS_RTS:
			if (!cm_rtr_ok(id->ib))
				return -EINVAL;
			*mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
			attr->sq_psn = id->sq_psn;
			if (req) {
				*mask |= IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
					 IBV_QP_MAX_QP_RD_ATOMIC;
				attr->retry_cnt = id->retry_count;
				attr->rnr_retry = id->rnr_retry_count;
				attr->max_rd_atomic = id->cm_initiator_depth;
			}
			if (req || resp) {
				*mask |= IBV_QP_TIMEOUT;
				attr->timeout = id->timeout;
			}
			break;
		default:
			return -EINVAL;
		}
	}
	/* the RDMA CM's own choices over the IB CM's */
	if (state == IBV_QPS_RTR)
		attr->rq_psn = id->seq_num;
	if ((*mask & IBV_QP_TIMEOUT) && id->ack_timeout_set)
		attr->timeout = id->ack_timeout;
	return 0;
}

int rdma_init_qp_attr(struct rdma_cm_id *rid, struct ibv_qp_attr *attr,
		      int *mask)
{
	int ret;

	if (!rid || !attr || !mask)
		return cm_err(-EINVAL);
	pthread_mutex_lock(&cm_lock);
	ret = cm_init_qp_attr(to_cm_id(rid), attr, mask);
	pthread_mutex_unlock(&cm_lock);
	return ret ? cm_err(ret) : 0;
}

static int modify(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask)
{
	int ret = ibv_modify_qp(qp, attr, mask);

	return ret > 0 ? -ret : ret;
}

/* rdma-core's ucma_modify_qp_rtr: INIT again (the attributes the CM now
 * knows), then RTR.  cm_lock held. */
int cm_modify_qp_rtr(struct cm_id *id, uint8_t resp_res)
{
	struct ibv_qp_attr attr;
	int mask, ret;

	if (!id->id.qp)
		return 0;
	attr.qp_state = IBV_QPS_INIT;
	ret = cm_init_qp_attr(id, &attr, &mask);
	if (!ret)
		ret = modify(id->id.qp, &attr, mask);
	if (ret)
		return ret;
	attr.qp_state = IBV_QPS_RTR;
	ret = cm_init_qp_attr(id, &attr, &mask);
	if (ret)
		return ret;
	if (resp_res != RDMA_MAX_RESP_RES)
		attr.max_dest_rd_atomic = resp_res;
	return modify(id->id.qp, &attr, mask);
}

int cm_modify_qp_rts(struct cm_id *id, uint8_t init_depth)
{
	struct ibv_qp_attr attr;
	int mask, ret;

	if (!id->id.qp)
		return 0;
	attr.qp_state = IBV_QPS_RTS;
	ret = cm_init_qp_attr(id, &attr, &mask);
	if (ret)
		return ret;
	if (init_depth != RDMA_MAX_INIT_DEPTH)
		attr.max_rd_atomic = init_depth;
	return modify(id->id.qp, &attr, mask);
}

int cm_modify_qp_err(struct cm_id *id)
{
	struct ibv_qp_attr attr = { .qp_state = IBV_QPS_ERR };

	if (!id->id.qp)
		return 0;
	return modify(id->id.qp, &attr, IBV_QP_STATE);
}

/*
 * A CONNECT_RESPONSE retrieved on an id with a QP (rdma-core's
 * ucma_process_conn_resp_ece): ECE, RTR, RTS, RTU.  0, or -1 with errno
 * (the event's status, as in rdma-core).  cm_lock held.
 */
int cm_conn_resp(struct cm_id *id, struct cm_event *ev)
{
	struct ibv_ece ece = { .vendor_id = ev->ece.vendor_id,
			       .options = ev->ece.options };
	int ret;

	if (!ece.vendor_id) {
		ece.vendor_id = id->local_ece.vendor_id;
		ece.options = 0;
	} else if (ece.vendor_id != id->local_ece.vendor_id) {
		cm_modify_qp_err(id);
		return cm_err(-EINVAL);
	}
	id->remote_ece.vendor_id = ev->ece.vendor_id;
	ret = ibv_set_ece(id->id.qp, &ece);
	if (ret && ret != EOPNOTSUPP)
		return cm_err(-ret);
	ret = cm_modify_qp_rtr(id, RDMA_MAX_RESP_RES);
	if (!ret)
		ret = cm_modify_qp_rts(id, RDMA_MAX_INIT_DEPTH);
	if (!ret)
		ret = cm_establish_stream(id);
	if (ret) {
		cm_modify_qp_err(id);
		return cm_err(ret);
	}
	ret = ibv_query_ece(id->id.qp, &ece);
	if (ret && ret != EOPNOTSUPP) {
		cm_modify_qp_err(id);
		return cm_err(-ret);
	}
	id->local_ece.options = ret == EOPNOTSUPP ? 0 : ece.options;
	return 0;
}

/* ------------------------------------------------------------------ */
/* CQs, QPs, SRQs                                                      */

static void destroy_cqs(struct rdma_cm_id *id)
{
	if (id->qp_type == IBV_QPT_XRC_RECV && id->srq)
		return;
	if (id->recv_cq) {
		ibv_destroy_cq(id->recv_cq);
		if (id->send_cq && id->send_cq != id->recv_cq)
			ibv_destroy_cq(id->send_cq);
	} else if (id->send_cq) {
		ibv_destroy_cq(id->send_cq);
	}
	id->recv_cq = NULL;
	id->send_cq = NULL;
	if (id->recv_cq_channel) {
		ibv_destroy_comp_channel(id->recv_cq_channel);
		if (id->send_cq_channel &&
		    id->send_cq_channel != id->recv_cq_channel)
			ibv_destroy_comp_channel(id->send_cq_channel);
	} else if (id->send_cq_channel) {
		ibv_destroy_comp_channel(id->send_cq_channel);
	}
	id->recv_cq_channel = NULL;
	id->send_cq_channel = NULL;
}

static int create_cqs(struct rdma_cm_id *id, uint32_t send_size,
		      uint32_t recv_size)
{
	if (recv_size) {
		id->recv_cq_channel = ibv_create_comp_channel(id->verbs);
		if (!id->recv_cq_channel)
			goto err;
		id->recv_cq = ibv_create_cq(id->verbs, (int)recv_size, id,
					    id->recv_cq_channel, 0);
		if (!id->recv_cq)
			goto err;
	}
	if (send_size) {
		id->send_cq_channel = ibv_create_comp_channel(id->verbs);
		if (!id->send_cq_channel)
			goto err;
		id->send_cq = ibv_create_cq(id->verbs, (int)send_size, id,
					    id->send_cq_channel, 0);
		if (!id->send_cq)
			goto err;
	}
	return 0;
err:
	destroy_cqs(id);
	return -1;
}

/*
 * The XRC domain of an id that names none: one per device, as rdma-core's
 * ucma_get_xrcd, so that the XRC_RECV QP and the XRC SRQ of rdma_xserver
 * (neither naming one) are of the same domain.  NULL with errno.
 */
static struct ibv_xrcd *get_xrcd(struct rdma_cm_id *rid)
{
	static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
	struct ibv_xrcd_init_attr attr = {
		.comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS,
		.fd = -1,
		.oflags = O_CREAT,
	};
	struct cm_device *dev = to_cm_id(rid)->dev;
	struct ibv_xrcd *x;

	if (!dev) {
		errno = EINVAL;
		return NULL;
	}
	pthread_mutex_lock(&lock);
	if (!dev->xrcd)
		dev->xrcd = ibv_open_xrcd(rid->verbs, &attr);
	x = dev->xrcd;
	pthread_mutex_unlock(&lock);
	return x;
}

/* Move a new QP to INIT (connected) or RTS (UD), as rdma-core does. */
static int init_qp(struct cm_id *id, struct ibv_qp *qp)
{
	struct ibv_qp_attr attr;
	int mask, ret;

	pthread_mutex_lock(&cm_lock);
	attr.qp_state = IBV_QPS_INIT;
	ret = cm_init_qp_attr(id, &attr, &mask);
	pthread_mutex_unlock(&cm_lock);
	if (!ret)
		ret = modify(qp, &attr, mask);
	if (ret || !cm_is_ud(id))
		return ret;
	attr.qp_state = IBV_QPS_RTR;
	ret = modify(qp, &attr, IBV_QP_STATE);
	if (ret)
		return ret;
	attr.qp_state = IBV_QPS_RTS;
	attr.sq_psn = 0;
	return modify(qp, &attr, IBV_QP_STATE | IBV_QP_SQ_PSN);
}

/* rdma-core's init_ece/set_local_ece: softhca's QPs have no ECE, the
 * local options become 0 (and the vendor ID that of the QP: 0). */
static int qp_ece(struct cm_id *id, struct ibv_qp *qp)
{
	struct ibv_ece ece = { 0 };
	int ret = ibv_query_ece(qp, &ece);

	if (ret && ret != EOPNOTSUPP)
		return -ret;
	pthread_mutex_lock(&cm_lock);
	id->local_ece.vendor_id = ece.vendor_id;
	id->local_ece.options = ece.options;
	pthread_mutex_unlock(&cm_lock);
	if (!id->remote_ece.vendor_id)
		return 0;
	ece.vendor_id = id->local_ece.vendor_id;
	ece.options = id->remote_ece.vendor_id == id->local_ece.vendor_id ?
		      id->remote_ece.options : 0;
	ret = ibv_set_ece(qp, &ece);
	return ret && ret != EOPNOTSUPP ? -ret : 0;
}

int rdma_create_qp_ex(struct rdma_cm_id *rid, struct ibv_qp_init_attr_ex *attr)
{
	struct cm_id *id;
	struct ibv_qp *qp;
	int ret;

	if (!rid || !attr)
		return cm_err(-EINVAL);
	if (rid->qp || !rid->verbs)
		return cm_err(-EINVAL);
	id = to_cm_id(rid);
	if (!(attr->comp_mask & IBV_QP_INIT_ATTR_PD) || !attr->pd) {
		attr->comp_mask |= IBV_QP_INIT_ATTR_PD;
		attr->pd = rid->pd;
	} else if (rid->verbs != attr->pd->context) {
		return cm_err(-EINVAL);
	}
	if ((rid->recv_cq && attr->recv_cq && rid->recv_cq != attr->recv_cq) ||
	    (rid->send_cq && attr->send_cq && rid->send_cq != attr->send_cq))
		return cm_err(-EINVAL);
	if (rid->qp_type == IBV_QPT_XRC_RECV &&
	    (!(attr->comp_mask & IBV_QP_INIT_ATTR_XRCD) || !attr->xrcd)) {
		attr->xrcd = get_xrcd(rid);
		if (!attr->xrcd)
			return -1;
		attr->comp_mask |= IBV_QP_INIT_ATTR_XRCD;
	}
	if (create_cqs(rid,
		       attr->send_cq || rid->send_cq ? 0 :
						       attr->cap.max_send_wr,
		       attr->recv_cq || rid->recv_cq ? 0 :
						       attr->cap.max_recv_wr))
		return -1;
	if (!attr->send_cq)
		attr->send_cq = rid->send_cq;
	if (!attr->recv_cq)
		attr->recv_cq = rid->recv_cq;
	if (rid->srq && !attr->srq)
		attr->srq = rid->srq;
	qp = ibv_create_qp_ex(rid->verbs, attr);
	if (!qp) {
		ret = errno ? -errno : -ENOMEM;
		goto err_cqs;
	}
	ret = qp_ece(id, qp);
	if (!ret)
		ret = init_qp(id, qp);
	if (ret)
		goto err_qp;
	/* an XRC_RECV QP has no PD (ibv_create_qp_ex(3)): the id keeps
	 * the device's, which its XRC SRQ takes (rdma_xserver -c x) */
	if (qp->pd)
		rid->pd = qp->pd;
	rid->qp = qp;
	return 0;
err_qp:
	ibv_destroy_qp(qp);
err_cqs:
	destroy_cqs(rid);
	return cm_err(ret);
}

int rdma_create_qp(struct rdma_cm_id *id, struct ibv_pd *pd,
		   struct ibv_qp_init_attr *qp_init_attr)
{
	struct ibv_qp_init_attr_ex attr_ex;
	int ret;

	if (!id || !qp_init_attr)
		return cm_err(-EINVAL);
	memset(&attr_ex, 0, sizeof(attr_ex));
	memcpy(&attr_ex, qp_init_attr, sizeof(*qp_init_attr));
	attr_ex.comp_mask = IBV_QP_INIT_ATTR_PD;
	attr_ex.pd = pd ? pd : id->pd;
	ret = rdma_create_qp_ex(id, &attr_ex);
	memcpy(qp_init_attr, &attr_ex, sizeof(*qp_init_attr));
	return ret;
}

void rdma_destroy_qp(struct rdma_cm_id *id)
{
	if (!id)
		return;
	if (id->qp)
		ibv_destroy_qp(id->qp);
	id->qp = NULL;
	destroy_cqs(id);
}

int rdma_create_srq_ex(struct rdma_cm_id *id, struct ibv_srq_init_attr_ex *attr)
{
	struct ibv_srq *srq;

	if (!id || !attr)
		return cm_err(-EINVAL);
	if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_TYPE))
		return cm_err(-EINVAL);
	if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_PD) || !attr->pd) {
		attr->pd = id->pd;
		attr->comp_mask |= IBV_SRQ_INIT_ATTR_PD;
	}
	if (attr->srq_type == IBV_SRQT_XRC) {
		if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_XRCD) ||
		    !attr->xrcd) {
			attr->xrcd = get_xrcd(id);
			if (!attr->xrcd)
				return -1;
		}
		if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_CQ) || !attr->cq) {
			if (create_cqs(id, 0, attr->attr.max_wr))
				return -1;
			attr->cq = id->recv_cq;
		}
		attr->comp_mask |= IBV_SRQ_INIT_ATTR_XRCD |
				   IBV_SRQ_INIT_ATTR_CQ;
	}
	srq = ibv_create_srq_ex(id->verbs, attr);
	if (!srq) {
		int err = errno;

		destroy_cqs(id);
		errno = err;
		return -1;
	}
	if (!id->pd)
		id->pd = attr->pd;
	id->srq = srq;
	return 0;
}

int rdma_create_srq(struct rdma_cm_id *id, struct ibv_pd *pd,
		    struct ibv_srq_init_attr *attr)
{
	struct ibv_srq_init_attr_ex attr_ex;
	int ret;

	if (!id || !attr)
		return cm_err(-EINVAL);
	memset(&attr_ex, 0, sizeof(attr_ex));
	memcpy(&attr_ex, attr, sizeof(*attr));
	attr_ex.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD;
	attr_ex.srq_type = id->qp_type == IBV_QPT_XRC_RECV ? IBV_SRQT_XRC :
							     IBV_SRQT_BASIC;
	attr_ex.pd = pd;
	ret = rdma_create_srq_ex(id, &attr_ex);
	memcpy(attr, &attr_ex, sizeof(*attr));
	return ret;
}

void rdma_destroy_srq(struct rdma_cm_id *id)
{
	if (!id)
		return;
	if (id->srq)
		ibv_destroy_srq(id->srq);
	id->srq = NULL;
	destroy_cqs(id);
}
