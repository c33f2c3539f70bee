/* SPDX-License-Identifier: MIT */
/*
 * The pause of a listener whose accept4 ran out of descriptors (EMFILE,
 * ENFILE) or memory (ENOBUFS, ENOMEM): the socket stays readable, so a
 * listener that simply returned would be woken again at once and spin.
 * It stops watching instead and tries again after a delay that doubles
 * from SHCA_BACKOFF_MIN_MS to SHCA_BACKOFF_MAX_MS while accept keeps
 * failing, and starts from the minimum again after one succeeds (the
 * usual exponential backoff; libuv's uv__server_io answers EMFILE with a
 * reserved descriptor instead, which softhca does not keep).
 *
 * Used by the engine's listeners (engine.h: shca_listen_backoff) and the
 * rdma_cm listener (its own thread and timer).
 */
#ifndef SOFTHCA_COMMON_BACKOFF_H
#define SOFTHCA_COMMON_BACKOFF_H

#include <errno.h>
#include <stdbool.h>

#define SHCA_BACKOFF_MIN_MS	10u
#define SHCA_BACKOFF_MAX_MS	1000u

/* An accept4 errno that a pause may cure (a resource, not the peer). */
static inline bool shca_accept_exhausted(int err)
{
	return err == EMFILE || err == ENFILE || err == ENOBUFS ||
	       err == ENOMEM;
}

/* The next delay (ms) of a backoff whose state is *ms (0: fresh). */
static inline unsigned int shca_backoff_next(unsigned int *ms)
{
	unsigned int d = *ms ? *ms : SHCA_BACKOFF_MIN_MS;

	*ms = d >= SHCA_BACKOFF_MAX_MS / 2 ? SHCA_BACKOFF_MAX_MS : 2 * d;
	return d;
}

static inline void shca_backoff_reset(unsigned int *ms)
{
	*ms = 0;
}

#endif
