/* SPDX-License-Identifier: MIT */
/*
 * The engine thread: one per process, blocked in epoll.  It wakes only for
 * control work: a peer connecting, a peer's doorbell (work it left for this
 * process's objects), a peer hanging up, and timers (RNR and retry).  It
 * never spins: an idle process uses no CPU.
 */
#ifndef SOFTHCA_ENGINE_H
#define SOFTHCA_ENGINE_H

#include <stdbool.h>
#include <stdint.h>

/* Start the thread (idempotent; again in a forked child).  0 or -errno. */
int shca_engine_start(void);

/* The eventfd peers write to wake this process's engine. */
int shca_engine_doorbell_fd(void);

/* What the doorbell runs, in the engine thread (set once, by libibverbs). */
void shca_engine_on_doorbell(void (*fn)(void));

/* Watch an fd; fn runs in the engine thread with the epoll events. */
typedef void (*shca_fd_fn)(int fd, uint32_t events, void *arg);
int shca_engine_watch(int fd, shca_fd_fn fn, void *arg);
void shca_engine_unwatch(int fd);
/* The epoll events (EPOLLIN, EPOLLOUT) a watched fd waits for. */
int shca_engine_watch_events(int fd, uint32_t events);

/* Timers: fn runs in the engine thread once deadline (CLOCK_MONOTONIC ns)
 * has passed.  A timer is armed at most once; arming again moves it. */
struct shca_timer {
	uint64_t deadline;
	void (*fn)(struct shca_timer *t);
	struct shca_timer *next;
	bool armed;
};

void shca_timer_arm(struct shca_timer *t, uint64_t deadline);

static inline bool shca_timer_armed(const struct shca_timer *t)
{
	return __atomic_load_n(&t->armed, __ATOMIC_ACQUIRE);
}
void shca_timer_cancel(struct shca_timer *t);
/* Unlink without waiting for a running fn: for callers holding a lock
 * that fn takes (fn must re-check what it acts on). */
void shca_timer_disarm(struct shca_timer *t);

uint64_t shca_now_ns(void);

/*
 * A listener the engine watches, paused while accept4 runs out of
 * descriptors or memory (common/backoff.h): not watched for EPOLLIN until
 * its timer watches it again, after a delay that doubles while accept
 * keeps failing.  Zero-initialised; fd set before first use.
 *
 * shca_listen_failed: accept4 failed with err.  true: a resource ran out
 * and the listener is paused (the caller counts it and returns); false:
 * some other error (EAGAIN: nothing to accept).
 * shca_listen_accepted: one was accepted; the next pause starts short.
 */
struct shca_listen_backoff {
	struct shca_timer timer;
	int fd;
	unsigned int ms;		/* backoff state: the next delay */
};

bool shca_listen_failed(struct shca_listen_backoff *b, int err);

static inline void shca_listen_accepted(struct shca_listen_backoff *b)
{
	b->ms = 0;
}

/*
 * Wait until no fd callback that was running when this was called runs
 * any more: after an object was taken out of the tables callbacks look it
 * up in (shca_qp_lookup), nothing in the engine holds it.
 */
void shca_engine_quiesce(void);

/*
 * Wait until the engine has carried out what had arrived on its fds when
 * this was called (a batch of epoll results taken afterwards is done).
 */
void shca_engine_sync(void);

/* true in the engine thread itself */
bool shca_in_engine(void);

/* ------------------------------------------------------------------ */
/* responder.c: the responder's rules (transports reach them through   */
/* shca_stages, xport.h)                                               */

struct shca_peer;
struct shca_xfer;
struct shca_xfer_result;
struct shca_stat_block;

/* Carry out request x against the QP it names in p's arena: the answer in
 * res (an absent or unreachable responder: RC gets no response, UC and UD
 * lose the message). */
void shca_respond(struct shca_peer *p, const struct shca_xfer *x,
		  struct shca_xfer_result *res);
/* The message in a QP's counters at the requester or the responder, as
 * the packets it would be on a wire (shca_stages.count). */
void shca_xfer_count(struct shca_stat_block *b, const struct shca_xfer *x,
		     bool requester);

#endif
