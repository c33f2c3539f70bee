/* SPDX-License-Identifier: MIT */
/*
 * "Still blocked" as a state, not as a time: a thread of this process is
 * asleep in the system call a blocking verb must sleep in.
 *
 * /proc/self/task/TID/syscall (proc(5)) holds the number and arguments of
 * the call the thread sleeps in, "-1 ..." when it sleeps outside one, and
 * "running" when it runs: the kernel reads a thread's call only once the
 * thread is off the CPU.  So a call number with the right arguments means
 * "asleep there now", whatever the load on the machine.
 *
 *   ASSERT_ASLEEP_ON_FD(&tid, done, fd)
 *	tid sleeps in read(fd), or in poll/ppoll on a set that holds fd,
 *	with no timeout (how ibv_get_cq_event, ibv_get_async_event and
 *	rdma_get_cm_event wait on their fd);
 *   ASSERT_ASLEEP_IN_COND(&tid, done, cond)
 *	tid sleeps in pthread_cond_wait on the condition variable cond
 *	(NULL: on any), as a destroy verb waits for the acks of its events;
 *   ASSERT_ASLEEP_FOR_GOOD(&tid, done)
 *	tid sleeps in poll/ppoll on no fd without timeout, or in pause():
 *	where a reader of a destroyed channel is left to sleep.
 *   ASSERT_SOME_THREAD_IN_EPOLL()
 *	a thread of this process other than the caller sleeps in
 *	epoll_wait/epoll_pwait without timeout (or epoll_pwait2 with
 *	none): where an idle engine thread must be, not in a look with
 *	timeout 0 nor between looks.  Any thread, since a sanitizer adds
 *	threads of its own; in a process whose only epoll user is
 *	softhca's engine (no librdmacm), that is the engine.  Returns
 *	its id.
 *
 * tid is read with acquire until non-zero (the thread stores its own,
 * asleep_self(), before it calls the verb).  done, if not NULL, is the
 * thread's "the call came back" flag: set before the thread is seen asleep,
 * the case fails at once (the call returned instead of blocking).  The
 * wait for the thread to get there is bounded (half the harness's
 * timeout) only so that the failure says what the thread was doing
 * instead; seen asleep once, the check passes: no time threshold.
 */
#ifndef SOFTHCA_TEST_ASLEEP_H
#define SOFTHCA_TEST_ASLEEP_H

#include <sys/types.h>

/* The calling thread's id, stored with release in *tid. */
void asleep_self(pid_t *tid);

void asleep_on_fd(const char *file, int line, const pid_t *tid,
		  const int *done, int fd);
void asleep_in_cond(const char *file, int line, const pid_t *tid,
		    const int *done, const void *cond);

void asleep_for_good(const char *file, int line, const pid_t *tid,
		     const int *done);

pid_t asleep_some_in_epoll(const char *file, int line);

#define ASSERT_ASLEEP_ON_FD(tid, done, fd) \
	asleep_on_fd(__FILE__, __LINE__, tid, done, fd)
#define ASSERT_ASLEEP_IN_COND(tid, done, cond) \
	asleep_in_cond(__FILE__, __LINE__, tid, done, cond)
#define ASSERT_ASLEEP_FOR_GOOD(tid, done) \
	asleep_for_good(__FILE__, __LINE__, tid, done)
#define ASSERT_SOME_THREAD_IN_EPOLL() \
	asleep_some_in_epoll(__FILE__, __LINE__)

#endif
