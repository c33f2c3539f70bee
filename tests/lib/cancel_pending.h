/* SPDX-License-Identifier: MIT */
/*
 * A call made by a thread whose cancellation request is already pending
 * (deferred, enabled) when the call starts: the call is the first place
 * where the request could act (tests of common/nocancel.h: a verb must
 * reach no cancellation point with a lock held).
 */
#ifndef SOFTHCA_TEST_CANCEL_PENDING_H
#define SOFTHCA_TEST_CANCEL_PENDING_H

/*
 * Run fn(arg) so in a new thread and return what it returned; assert
 * that it returned at all and that the thread was cancelled afterwards,
 * at its own pthread_testcancel, not inside fn.
 */
int cancel_pending_call(int (*fn)(void *arg), void *arg);

#endif
