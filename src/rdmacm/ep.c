// SPDX-License-Identifier: MIT
/*
 * The endpoint calls (rdma_create_ep, rdma_destroy_ep, rdma_get_request):
 * synchronous ids built from an rdma_addrinfo, with a QP made with the
 * given attributes, as rdma-core's do.  An active endpoint is resolved
 * (2 s timeouts) and holds ai_connect for rdma_connect; a passive one is
 * bound, and rdma_get_request gives each request a QP made from the
 * listener's attributes.
 */
#include <stdlib.h>
#include <string.h>

#include "cma.h"

static int passive_ep(struct rdma_cm_id *rid, struct rdma_addrinfo *res,
		      struct ibv_pd *pd, struct ibv_qp_init_attr *qp_init_attr)
{
	struct cm_id *id = to_cm_id(rid);

	if (rdma_bind_addr(rid, res->ai_src_addr))
		return -1;
	if (pd)
		rid->pd = pd;
	if (qp_init_attr) {
		id->qp_init_attr = malloc(sizeof(*qp_init_attr));
		if (!id->qp_init_attr)
			return cm_err(-ENOMEM);
		*id->qp_init_attr = *qp_init_attr;
		id->qp_init_attr->qp_type = res->ai_qp_type;
	}
	return 0;
}

int rdma_create_ep(struct rdma_cm_id **out, struct rdma_addrinfo *res,
		   struct ibv_pd *pd, struct ibv_qp_init_attr *qp_init_attr)
{
	struct rdma_cm_id *rid;
	struct cm_id *id;
	int ret;

	if (!out || !res)
		return cm_err(-EINVAL);
	ret = cm_create_id(NULL, &rid, NULL, res->ai_port_space,
			   res->ai_qp_type);
	if (ret)
		return cm_err(ret);
	id = to_cm_id(rid);
	if (res->ai_flags & RAI_PASSIVE) {
		if (passive_ep(rid, res, pd, qp_init_attr))
			goto err;
		*out = rid;
		return 0;
	}
	if (rdma_resolve_addr(rid, res->ai_src_addr, res->ai_dst_addr, 2000))
		goto err;
	if (res->ai_route_len) {
		if (rdma_set_option(rid, RDMA_OPTION_IB, RDMA_OPTION_IB_PATH,
				    res->ai_route, res->ai_route_len) ||
		    cm_complete(id))
			goto err;
	} else if (rdma_resolve_route(rid, 2000)) {
		goto err;
	}
	if (qp_init_attr) {
		qp_init_attr->qp_type = res->ai_qp_type;
		if (rdma_create_qp(rid, pd, qp_init_attr))
			goto err;
	}
	if (res->ai_connect_len) {
		id->connect = malloc(res->ai_connect_len);
		if (!id->connect) {
			errno = ENOMEM;
			goto err;
		}
		memcpy(id->connect, res->ai_connect, res->ai_connect_len);
		id->connect_len = res->ai_connect_len;
	}
	*out = rid;
	return 0;
err:
	ret = errno;
	rdma_destroy_ep(rid);
	errno = ret;
	return -1;
}

void rdma_destroy_ep(struct rdma_cm_id *id)
{
	if (!id)
		return;
	if (id->qp)
		rdma_destroy_qp(id);
	if (id->srq)
		rdma_destroy_srq(id);
	rdma_destroy_id(id);
}

int rdma_get_request(struct rdma_cm_id *listen, struct rdma_cm_id **out)
{
	struct rdma_cm_event *event;
	struct cm_id *lid;
	int ret;

	if (!listen || !out)
		return cm_err(-EINVAL);
	lid = to_cm_id(listen);
	if (!lid->sync)
		return cm_err(-EINVAL);
	if (listen->event) {
		rdma_ack_cm_event(listen->event);
		listen->event = NULL;
	}
	ret = cm_get_event(lid->chan, &event);
	if (ret)
		return cm_err(ret);
	if (event->event == RDMA_CM_EVENT_REJECTED) {
		ret = -ECONNREFUSED;
		goto err;
	}
	if (event->status) {
		ret = event->status < 0 ? event->status : -event->status;
		goto err;
	}
	if (event->event != RDMA_CM_EVENT_CONNECT_REQUEST) {
		ret = -EINVAL;
		goto err;
	}
	if (lid->qp_init_attr) {
		struct ibv_qp_init_attr attr = *lid->qp_init_attr;

		if (rdma_create_qp(event->id, listen->pd, &attr)) {
			ret = -errno;
			goto err;
		}
	}
	*out = event->id;
	(*out)->event = event;
	return 0;
err:
	listen->event = event;
	return cm_err(ret);
}
