/* SPDX-License-Identifier: MIT */
/*
 * The engine, its table of contents by file:
 *
 *   engine.c     the engine thread, its fds and timers
 *   requester.c  a QP's send queue, WQE by WQE, handed to a transport
 *   completer.c  how a send WQE ends: completion, the QP after an error
 *   responder.c  the responder's rules, for whichever transport
 *   xport.c/.h   the one interface to the transports below (shca_stages
 *                up, struct shca_transport_ops down)
 */
#ifndef SOFTHCA_ENGINE_H
#define SOFTHCA_ENGINE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>
#include <infiniband/verbs.h>

struct shca_qp;
struct shca_send_wqe;
struct shca_peer;
struct shca_lane;
struct shca_xfer;
struct shca_xfer_result;
struct shca_stat_block;
struct shca_xfer_tally;

/* ------------------------------------------------------------------ */
/*
 * engine.c: the engine thread, one per process, blocked in epoll.  It
 * wakes only for control work: a peer connecting, a peer's doorbell (work
 * it left for this process's objects), a peer hanging up, and timers (RNR
 * and retry).  It never spins: an idle process uses no CPU.
 */

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
	uint64_t gen;		/* arms, disarms and cancels (engine_lock) */
	uint64_t fired;		/* gen when the expiry that runs fn came */
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
/* From fn, once it holds the lock it waited for: was t armed again,
 * disarmed or cancelled since the expiry that runs fn?  Then that expiry
 * is stale (a new deadline stands, or none should), and fn does nothing. */
bool shca_timer_stale(struct shca_timer *t);

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

/* true in the engine thread itself, and in an application thread while
 * it is the engine (shca_engine_progress) */
bool shca_in_engine(void);

/*
 * Progress where the application already is (issue 15): a thread whose
 * poll found nothing carries out, itself, one batch of what the engine
 * thread would have been woken for (the net path's sockets above all:
 * the responder's and the completer's work), so that the completion it
 * waits for needs no hand-off to another thread.  Only if no other
 * thread is the engine at that moment; never blocks.  1: it handled
 * something; 0: nothing was waiting; -EBUSY: another thread is the
 * engine right now; -EAGAIN: the engine thread does it all here (no
 * engine in this process yet, SOFTHCA_POLL_PROGRESS=0, or called from
 * the engine).  A spinning caller lets other threads run after it
 * (net/conn.c's shca_net_poll_idle).
 */
int shca_engine_progress(void);

/*
 * May the calling thread run on more than one CPU (its affinity, asked
 * again at most every 100 ms: taskset -p may change it)?  now:
 * shca_now_ns().
 */
bool shca_thread_cpus_many(uint64_t now);

/*
 * An application thread's poll found nothing at now (shca_now_ns; from
 * net/conn.c): with SOFTHCA_POLL_QUIET, while it goes on polling, the
 * engine thread is not woken for the sockets, which the poller reads
 * itself (engine.c, outer); then shca_engine_progress.  -EAGAIN as
 * there.
 */
int shca_engine_poll_empty(uint64_t now);

/*
 * Work that is due only once the polling threads stop: with
 * SOFTHCA_POLL_QUIET, fn runs in the engine thread at the check that
 * follows a poller's last empty poll, at most max_ns after it (engine.c,
 * outer), instead of on a timer of its own that would wake the engine
 * thread while they poll.  shca_engine_poll_watched: true while that
 * check is armed, so that fn will run (false without SOFTHCA_POLL_QUIET
 * and while no thread polls).  One fn per process (net/conn.c's held
 * ACKs).
 */
void shca_engine_poll_watch(void (*fn)(void), uint64_t max_ns);
bool shca_engine_poll_watched(void);

/* A poll that found completions ends its thread's streak of empty ones:
 * the engine thread watches the sockets again, unless another thread
 * still polls. */
extern __thread uint64_t shca_my_streak;
extern __thread unsigned int shca_my_empties;
void shca_engine_streak_end(void);

static inline void shca_engine_poll_found(void)
{
	shca_my_empties = 0;
	if (__builtin_expect(shca_my_streak != 0, 0))
		shca_engine_streak_end();
}

/*
 * Sleep until fd (a completion channel's eventfd) is readable, or until
 * the engine has work; that work this thread then carries out itself
 * (waiting for the engine thread if it is at it), so that the event it
 * waits for is not a hand-off from the engine thread.  0: look again
 * (fd may be readable); -errno from poll (EINTR); -EAGAIN: as for
 * shca_engine_progress, wait on fd alone.  A cancellation point while
 * it sleeps, not while it works.
 */
int shca_engine_wait(int fd);

/* ------------------------------------------------------------------ */
/* requester.c: a QP's send queue in order (transports reach these     */
/* through shca_stages, xport.h)                                       */

/* Execute what the send queue holds (called after post_send queued work,
 * when a QP returns to RTS, and by retry timers). */
int shca_sq_execute(struct shca_qp *qp);
/* The same with the QP's exec_lock held (a post queues under it). */
void shca_sq_execute_locked(struct shca_qp *qp);

/* The message length of a WQE (inline or its SGEs). */
uint64_t shca_wqe_length(const struct shca_send_wqe *w);

/* The WQE's local buffers as iovecs (at most 64), checked against this
 * process's MR table; IBV_WC_LOC_PROT_ERR when an L_Key does not cover. */
enum ibv_wc_status shca_wqe_local_iov(struct shca_qp *qp,
				      const struct shca_send_wqe *w,
				      bool write, struct iovec *iov,
				      int *niov);

/* The 40-byte GRH a UD receive buffer starts with. */
void shca_build_grh(uint8_t *grh, const union ibv_gid *sgid,
		    const struct ibv_global_route *dst, uint64_t payload);

/* ------------------------------------------------------------------ */
/* completer.c: how a send WQE ends                                    */

/* An atomic's 8-byte result into its local buffer, scattered over its
 * SGEs in order (their lengths add up to 8: checked at the try). */
void shca_atomic_result(const struct iovec *iov, int niov, uint64_t orig);

/* Complete a send WQE (if signaled or in error); the status it took (a
 * bounce's copy-out may fail: verbs/import_key.c). */
enum ibv_wc_status shca_complete_send(struct shca_qp *qp,
				      const struct shca_send_wqe *w,
				      enum ibv_wc_status status,
				      uint32_t byte_len);

/* After a send WQE completed in error: RC to ERR, UC and UD to SQE. */
void shca_sq_failed(struct shca_qp *qp);

/* ------------------------------------------------------------------ */
/* responder.c: the responder's rules (transports reach them through   */
/* shca_stages, xport.h)                                               */

/* Carry out request x against the QP it names in p's arena: the answer in
 * res (an absent or unreachable responder: RC gets no response, UC and UD
 * lose the message). */
void shca_respond(struct shca_peer *p, const struct shca_xfer *x,
		  struct shca_xfer_result *res);
/* ... p held by the caller (shca_stages.respond_held) */
void shca_respond_held(struct shca_peer *p, const struct shca_xfer *x,
		       struct shca_xfer_result *res);
/* The responder's counts a run gathered in t, into their block
 * (shca_stages.count_flush). */
void shca_xfer_tally_flush(struct shca_xfer_tally *t);
/* An L_Key of p's MR in its PD pd, for an importer of that PD (verbs/
 * import_key.c), under the caller's access (shm/mem.h): 0 with *va, its
 * address in p, or -ENOKEY, -EACCES, -EBUSY. */
int shca_owner_lkey(struct shca_peer *p, uint32_t pd, uint32_t key,
		    uint32_t access, uint64_t addr, uint64_t len, uint64_t *va);
/* The net path's own reads and writes of this process's (p's) memory
 * through an R_Key, under an access lane held in *lane until unhold
 * (shca_stages.hold, .unhold): 0 with *va, or -ENOKEY, -EACCES, -EBUSY. */
int shca_respond_hold(struct shca_peer *p, uint32_t qpn, uint32_t pd,
		      uint32_t key, uint32_t access, uint64_t addr,
		      uint64_t len, struct shca_lane *lane, void **va);
void shca_respond_unhold(struct shca_lane *lane);

#endif
