// SPDX-License-Identifier: MIT
/* userfaultfd for the deregistration tests: see uffd.h. */
#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <unistd.h>
#include <linux/userfaultfd.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>

#include "harness.h"
#include "uffd.h"

int uffd_open(void)
{
	struct uffdio_api api = { .api = UFFD_API };
	int fd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);

	if (fd < 0)
		SKIP_ENV("no userfaultfd here (it needs CAP_SYS_PTRACE or "
			 "vm.unprivileged_userfaultfd=1: the copies fault in "
			 "the kernel)");
	ASSERT_EQ(ioctl(fd, UFFDIO_API, &api), 0);
	return fd;
}

void uffd_watch(int fd, void *addr, size_t len)
{
	struct uffdio_register r = {
		.range = { (uintptr_t)addr, len },
		.mode = UFFDIO_REGISTER_MODE_MISSING,
	};

	ASSERT_EQ(ioctl(fd, UFFDIO_REGISTER, &r), 0);
}

uint64_t uffd_fault(int fd)
{
	struct uffd_msg msg;
	struct pollfd p = { fd, POLLIN, 0 };

	for (int tries = 0; tries < 100; tries++) {
		if (poll(&p, 1, 100) == 1 &&
		    read(fd, &msg, sizeof(msg)) == (ssize_t)sizeof(msg)) {
			ASSERT_EQ(msg.event, UFFD_EVENT_PAGEFAULT);
			return msg.arg.pagefault.address &
			       ~(uint64_t)(UFFD_PAGE - 1);
		}
	}
	harness_fail(__FILE__, __LINE__, "nothing touched the missing page");
	return 0;
}

void uffd_supply(int fd, uint64_t page, uint8_t b)
{
	static uint8_t src[UFFD_PAGE] __attribute__((aligned(UFFD_PAGE)));
	struct uffdio_copy c = { .dst = page, .src = (uintptr_t)src,
				 .len = UFFD_PAGE };

	memset(src, b, UFFD_PAGE);
	ASSERT_EQ(ioctl(fd, UFFDIO_COPY, &c), 0);
}

static void *dereg_run(void *arg)
{
	struct dereg *d = arg;

	d->ret = ibv_dereg_mr(d->mr);
	__atomic_store_n(&d->done, true, __ATOMIC_RELEASE);
	return NULL;
}

void dereg_start(struct dereg *d, struct ibv_mr *mr)
{
	d->mr = mr;
	d->ret = -1;
	d->done = false;
	ASSERT_EQ(pthread_create(&d->t, NULL, dereg_run, d), 0);
}

bool dereg_returns_soon(struct dereg *d)
{
	for (int looks = 0; looks < 200 &&
	     !__atomic_load_n(&d->done, __ATOMIC_ACQUIRE); looks++)
		usleep(1000);
	return __atomic_load_n(&d->done, __ATOMIC_ACQUIRE);
}

void dereg_join(struct dereg *d)
{
	ASSERT_EQ(pthread_join(d->t, NULL), 0);
	ASSERT_EQ(d->ret, 0);
}
