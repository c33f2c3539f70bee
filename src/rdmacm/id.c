// SPDX-License-Identifier: MIT
/*
 * The life of an id: creation, destruction, migration between channels,
 * options, and the synchronous mode.
 *
 * A synchronous id (created with a NULL channel) gets a private channel,
 * and each call that starts an operation then waits on it for the
 * operation's event, as rdma-core's ucma_complete() does: the event stays
 * in id->event until the next such call or rdma_destroy_id acks it.
 */
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>

#include "cma.h"
#include "../common/util.h"

static const char *const state_names[] = {
	[CM_IDLE] = "IDLE",
	[CM_ADDR_BOUND] = "ADDR_BOUND",
	[CM_ADDR_RESOLVED] = "ADDR_RESOLVED",
	[CM_ROUTE_RESOLVED] = "ROUTE_RESOLVED",
	[CM_LISTEN] = "LISTEN",
	[CM_CONNECT] = "CONNECT",
	[CM_DISCONNECT] = "DISCONNECT",
	[CM_DESTROYING] = "DESTROYING",
};

const char *cm_state_name(enum cm_state s)
{
	return (unsigned int)s < ARRAY_SIZE(state_names) ? state_names[s] : "?";
}

static void id_timer_fired(struct cm_timer *t)
{
	cm_id_timer(container_of(t, struct cm_id, timer));
}

/* A new id on channel ch.  cm_lock held. */
struct cm_id *cm_id_new(struct cm_channel *ch, void *context,
			enum rdma_port_space ps, enum ibv_qp_type qp_type)
{
	struct cm_id *id = calloc(1, sizeof(*id));

	if (!id)
		return NULL;
	if (pthread_cond_init(&id->cond, NULL)) {
		free(id);
		return NULL;
	}
	id->id.context = context;
	id->id.ps = ps;
	id->id.qp_type = qp_type;
	id->id.channel = &ch->ch;
	id->chan = ch;
	ch->nids++;
	id->state = CM_IDLE;
	id->ib = IB_NONE;
	id->afonly = -1;
	id->seq_num = shca_random_u32() & 0xffffff;
	id->timer.fn = id_timer_fired;
	return id;
}

/* rdma_create_id with an explicit QP type (rdma-core's rdma_create_id2). */
int cm_create_id(struct rdma_event_channel *channel, struct rdma_cm_id **out,
		 void *context, enum rdma_port_space ps,
		 enum ibv_qp_type qp_type)
{
	struct cm_channel *ch;
	struct cm_id *id;
	int ret = cm_init();

	if (ret)
		return ret;
	if (!out)
		return -EINVAL;
	switch (ps) {
	case RDMA_PS_TCP:
	case RDMA_PS_UDP:
	case RDMA_PS_IPOIB:
	case RDMA_PS_IB:
		break;
	default:
		return -EINVAL;
	}
	pthread_mutex_lock(&cm_lock);
	ch = channel ? to_cm_channel(channel) : cm_channel_new();
	if (!ch) {
		pthread_mutex_unlock(&cm_lock);
		return -ENOMEM;
	}
	id = cm_id_new(ch, context, ps, qp_type);
	if (!id) {
		if (!channel)
			cm_channel_free(ch);
		pthread_mutex_unlock(&cm_lock);
		return -ENOMEM;
	}
	id->sync = !channel;
	pthread_mutex_unlock(&cm_lock);
	*out = &id->id;
	return 0;
}

int rdma_create_id(struct rdma_event_channel *channel, struct rdma_cm_id **id,
		   void *context, enum rdma_port_space ps)
{
	enum ibv_qp_type qp_type = (ps == RDMA_PS_IPOIB || ps == RDMA_PS_UDP) ?
				   IBV_QPT_UD : IBV_QPT_RC;
	int ret = cm_create_id(channel, id, context, ps, qp_type);

	return ret ? cm_err(ret) : 0;
}

/*
 * Tear an id down, wait for its events to be acked, free it.  cm_lock
 * held (released while waiting).
 */
void cm_id_destroy_locked(struct cm_id *id)
{
	struct cm_channel *ch;
	struct cm_id **pp, *c;

	id->state = CM_DESTROYING;
	cm_timer_cancel(&id->timer);
	free(id->req_copy);
	id->req_copy = NULL;
	if (cm_is_ud(id))
		cm_dgram_teardown(id);
	else
		cm_stream_teardown(id);
	for (c = id->children; c; c = c->next_child)
		c->listener = NULL;
	id->children = NULL;
	if (id->listener) {
		for (pp = &id->listener->children; *pp;
		     pp = &(*pp)->next_child) {
			if (*pp == id) {
				*pp = id->next_child;
				break;
			}
		}
		if (id->req_pending)
			id->listener->pending_reqs--;
		id->listener = NULL;
	}
	cm_channel_drop_events(id);
	while (id->events_completed < id->events_reported)
		pthread_cond_wait(&id->cond, &cm_lock);
	cm_mc_free_all(id);
	cm_device_put(id->dev);
	ch = id->chan;
	if (id->sync)
		ch->destroyed = true;
	cm_channel_put(ch);
	pthread_cond_destroy(&id->cond);
	free(id->qp_init_attr);
	free(id->connect);
	free(id);
}

int rdma_destroy_id(struct rdma_cm_id *rid)
{
	struct cm_id *id;

	if (!rid)
		return cm_err(-EINVAL);
	id = to_cm_id(rid);
	pthread_mutex_lock(&cm_lock);
	if (rid->event) {
		cm_ack_event(to_cm_event(rid->event));
		rid->event = NULL;
	}
	cm_id_destroy_locked(id);
	pthread_mutex_unlock(&cm_lock);
	return 0;
}

/*
 * For a synchronous id: wait for the event the call just started and
 * turn its status into a return value (rdma-core's ucma_complete).
 * cm_lock not held.
 */
int cm_complete(struct cm_id *id)
{
	struct rdma_cm_event *ev;
	int ret;

	if (!id->sync)
		return 0;
	if (id->id.event) {
		pthread_mutex_lock(&cm_lock);
		cm_ack_event(to_cm_event(id->id.event));
		pthread_mutex_unlock(&cm_lock);
		id->id.event = NULL;
	}
	ret = cm_get_event(id->chan, &ev);
	if (ret)
		return cm_err(ret);
	id->id.event = ev;
	if (!ev->status)
		return 0;
	if (ev->event == RDMA_CM_EVENT_REJECTED)
		return cm_err(-ECONNREFUSED);
	return cm_err(ev->status < 0 ? ev->status : -ev->status);
}

int rdma_migrate_id(struct rdma_cm_id *rid, struct rdma_event_channel *channel)
{
	struct cm_channel *to, *from;
	struct cm_id *id;
	bool sync = !channel;

	if (!rid)
		return cm_err(-EINVAL);
	id = to_cm_id(rid);
	pthread_mutex_lock(&cm_lock);
	if (id->sync && !channel) {
		pthread_mutex_unlock(&cm_lock);
		return cm_err(-EINVAL);
	}
	to = channel ? to_cm_channel(channel) : cm_channel_new();
	if (!to) {
		pthread_mutex_unlock(&cm_lock);
		return cm_err(-ENOMEM);
	}
	from = id->chan;
	cm_channel_move_events(id, to);
	if (id->sync) {
		if (rid->event) {
			cm_ack_event(to_cm_event(rid->event));
			rid->event = NULL;
		}
		from->destroyed = true;
	}
	id->chan = to;
	to->nids++;
	rid->channel = &to->ch;
	id->sync = sync;
	cm_channel_put(from);
	while (id->events_completed < id->events_reported)
		pthread_cond_wait(&id->cond, &cm_lock);
	pthread_mutex_unlock(&cm_lock);
	return 0;
}

/* The kernel's ucma_set_option_id (rdma_set_service_type, _reuseaddr,
 * _afonly, _ack_timeout): the same checks and errno. */
static int set_option_id(struct cm_id *id, int optname, void *optval,
			 size_t optlen)
{
	int v;

	switch (optname) {
	case RDMA_OPTION_ID_TOS:
		if (optlen != sizeof(uint8_t))
			return -EINVAL;
		id->tos = *(uint8_t *)optval;
		id->tos_set = true;
		return 0;
	case RDMA_OPTION_ID_REUSEADDR:
		if (optlen != sizeof(int))
			return -EINVAL;
		v = !!*(int *)optval;
		if (!v && id->state != CM_IDLE)
			return -EINVAL;
		id->reuseaddr = v;
		if (id->sock)
			setsockopt(id->sock->fd, SOL_SOCKET, SO_REUSEADDR, &v,
				   sizeof(v));
		return 0;
	case RDMA_OPTION_ID_AFONLY:
		if (optlen != sizeof(int))
			return -EINVAL;
		if (id->state != CM_IDLE && id->state != CM_ADDR_BOUND)
			return -EINVAL;
		id->afonly = !!*(int *)optval;
		return 0;
	case RDMA_OPTION_ID_ACK_TIMEOUT:
		if (optlen != sizeof(uint8_t))
			return -EINVAL;
		if (id->id.qp_type != IBV_QPT_RC)
			return -EINVAL;
		id->ack_timeout = *(uint8_t *)optval;
		id->ack_timeout_set = true;
		return 0;
	default:
		return -ENOSYS;
	}
}

int rdma_set_option(struct rdma_cm_id *rid, int level, int optname,
		    void *optval, size_t optlen)
{
	struct cm_id *id;
	int ret;

	if (!rid)
		return cm_err(-EINVAL);
	if (!optval && optlen)
		return cm_err(-EFAULT);
	id = to_cm_id(rid);
	pthread_mutex_lock(&cm_lock);
	switch (level) {
	case RDMA_OPTION_ID:
		ret = optval ? set_option_id(id, optname, optval, optlen) :
			       -EINVAL;
		break;
	case RDMA_OPTION_IB:
		ret = optname == RDMA_OPTION_IB_PATH ?
		      cm_set_ib_path(id, optval, optlen) : -ENOSYS;
		break;
	default:
		ret = -ENOSYS;
		break;
	}
	pthread_mutex_unlock(&cm_lock);
	return ret ? cm_err(ret) : 0;
}

/* ------------------------------------------------------------------ */
/* ECE: softhca's QPs have none (ibv_query_ece: EOPNOTSUPP); what the
 * caller sets before it has a QP is carried in the REQ/REP anyway.     */

int rdma_set_local_ece(struct rdma_cm_id *rid, struct ibv_ece *ece)
{
	struct cm_id *id;

	if (!rid || rid->qp || !ece || !ece->vendor_id || ece->comp_mask)
		return cm_err(-EINVAL);
	id = to_cm_id(rid);
	pthread_mutex_lock(&cm_lock);
	id->local_ece.vendor_id = ece->vendor_id;
	id->local_ece.options = ece->options;
	pthread_mutex_unlock(&cm_lock);
	return 0;
}

int rdma_get_remote_ece(struct rdma_cm_id *rid, struct ibv_ece *ece)
{
	struct cm_id *id;

	if (!rid || rid->qp || !ece)
		return cm_err(-EINVAL);
	id = to_cm_id(rid);
	pthread_mutex_lock(&cm_lock);
	ece->vendor_id = id->remote_ece.vendor_id;
	ece->options = id->remote_ece.options;
	ece->comp_mask = 0;
	pthread_mutex_unlock(&cm_lock);
	return 0;
}
