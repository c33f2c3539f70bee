// SPDX-License-Identifier: MIT
/* Eventfd waits with the kernel's signal rules: see evfd.h. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <sys/eventfd.h>
#include <sys/uio.h>
#include <unistd.h>

#include "evfd.h"

/* 0 unknown, 1 RWF_NOWAIT works on eventfds, -1 it does not */
static int nowait_ok;

static bool drain_nowait(int fd, bool *supported)
{
	uint64_t v;
	struct iovec io = { &v, sizeof(v) };
	ssize_t n;

	do
		n = preadv2(fd, &io, 1, -1, RWF_NOWAIT);
	while (n < 0 && errno == EINTR);
	*supported = n >= 0 || errno == EAGAIN;
	return n == (ssize_t)sizeof(v);
}

/* Does this kernel honour RWF_NOWAIT on an eventfd?  Asked once, of a
 * fresh eventfd (a reader's fd might be anything). */
static bool nowait_supported(void)
{
	int mode = __atomic_load_n(&nowait_ok, __ATOMIC_RELAXED);
	bool supported = false;
	int fd;

	if (mode)
		return mode > 0;
	fd = eventfd(0, EFD_CLOEXEC);
	if (fd >= 0) {
		drain_nowait(fd, &supported);
		close(fd);
	}
	__atomic_store_n(&nowait_ok, supported ? 1 : -1, __ATOMIC_RELAXED);
	return supported;
}

bool shca_evfd_drain(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	bool supported;
	uint64_t v;

	if (nowait_supported())
		return drain_nowait(fd, &supported);
	/* old kernel: nobody blocks in read() (shca_evfd_wait polls), so
	 * a readable counter is still there when this read comes */
	if (poll(&p, 1, 0) != 1)
		return false;
	while (read(fd, &v, sizeof(v)) < 0)
		if (errno != EINTR)
			return false;
	return true;
}

void shca_evfd_signal(int fd)
{
	uint64_t one = 1;

	while (write(fd, &one, sizeof(one)) < 0 && errno == EINTR)
		;
}

int shca_evfd_wait(int fd)
{
	int fl = fcntl(fd, F_GETFL);
	struct pollfd p = { .fd = fd, .events = POLLIN };
	uint64_t v;

	if (fl >= 0 && (fl & O_NONBLOCK))
		return -EAGAIN;
	if (nowait_supported()) {
		if (read(fd, &v, sizeof(v)) == (ssize_t)sizeof(v))
			return 1;
		return -errno;
	}
	if (poll(&p, 1, -1) < 0)
		return errno == EINTR && shca_signals_restart() ? 0 : -errno;
	return 0;
}

/* Raised by the faulting instruction itself, never while a thread
 * sleeps: crash handlers (UCX's, Open MPI's, the sanitizers') do not
 * count. */
static bool synchronous_signal(int sig)
{
	switch (sig) {
	case SIGSEGV:
	case SIGBUS:
	case SIGFPE:
	case SIGILL:
	case SIGTRAP:
	case SIGSYS:
		return true;
	default:
		return false;
	}
}

bool shca_signals_restart(void)
{
	struct sigaction sa;
	int sig;

	for (sig = 1; sig < NSIG; sig++) {
		if (synchronous_signal(sig) || sigaction(sig, NULL, &sa))
			continue;	/* not a signal (32, 33: glibc's) */
		if (!(sa.sa_flags & SA_SIGINFO) &&
		    (sa.sa_handler == SIG_DFL || sa.sa_handler == SIG_IGN))
			continue;
		if (!(sa.sa_flags & SA_RESTART))
			return false;
	}
	return true;
}
