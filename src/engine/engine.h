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

#endif
