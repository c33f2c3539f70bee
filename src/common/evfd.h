/* SPDX-License-Identifier: MIT */
/*
 * Waiting on an eventfd the way a reader of a kernel event file waits.
 *
 * rdma-core's blocking calls (ibv_get_cq_event, ibv_get_async_event,
 * rdma_get_cm_event) sleep in a read() or write() on a kernel file: a
 * signal whose handler was installed with SA_RESTART restarts the call,
 * one without it makes the call fail with EINTR.  poll() is never
 * restarted (signal(7)), so a wait built on poll cannot tell the two
 * apart; a blocking read() on the eventfd gets exactly the kernel's rule.
 * A blocking read takes the counter, so whoever waits this way must write
 * it again when events remain (shca_evfd_wait's return value says when),
 * and no one may drain the counter with a read that could block: the
 * drain is a read with RWF_NOWAIT, which eventfds honour since Linux 5.12.
 * On an older kernel both fall back to poll(): the wait then fails with
 * EINTR after any handled signal.
 */
#ifndef SOFTHCA_COMMON_EVFD_H
#define SOFTHCA_COMMON_EVFD_H

#include <stdbool.h>

/* Take the counter if it is non-zero, never blocking.  true if it was. */
bool shca_evfd_drain(int fd);

/* Add one to the counter (an event is there). */
void shca_evfd_signal(int fd);

/*
 * Sleep until the counter is non-zero.  1: the counter was taken (the
 * caller writes it again if its queue is still not empty), 0: woken
 * without taking it (poll fallback), -EINTR: a signal handler without
 * SA_RESTART ran, -EAGAIN: the fd is non-blocking, or another -errno.
 */
int shca_evfd_wait(int fd);

/*
 * After a wait that cannot tell which signal interrupted it (poll,
 * epoll: never restarted, signal(7)) ended with EINTR: would the kernel
 * have restarted a read or recv?  true when every signal this process
 * catches has a handler with SA_RESTART, the usual cases being all of
 * them (glibc's signal()) or none (a program that ends waits with a
 * signal, as qperf does); a mix counts as "not restarted".  Handlers of
 * the signals a fault raises (SIGSEGV, SIGBUS, ...) do not count: they
 * never interrupt a sleeping thread.
 */
bool shca_signals_restart(void);

#endif
