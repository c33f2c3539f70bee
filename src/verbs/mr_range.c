// SPDX-License-Identifier: MIT
/*
 * Is [addr, addr + len) mapped, readable, and writable if asked?  What
 * pinning the pages would have found out, without pinning (mr.c).
 *
 * The kernel answers one address at a time with the PROCMAP_QUERY ioctl
 * of /proc/self/maps (Linux 6.11 and later): the VMA that covers it, with
 * its permissions, in O(log VMAs).  Older kernels get the text of
 * /proc/self/maps walked line by line, which costs a read of every
 * mapping the process has: with tens of thousands of them (a process
 * with many CQs or QPs) registration slowed to a few thousand MRs a
 * second (issue 12).
 *
 * The query's layout is the kernel's UAPI, spelt out in common/procmap.h;
 * shm/seg_vm.c asks it (and keeps the answers for shca_seg_map).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>

#include "../shm/seg.h"
#include "shca.h"

/*
 * One descriptor of /proc/self/maps, opened by this process: a child
 * after fork() must not ask about its parent's memory through the
 * descriptor it inherited, so the pid that opened it is kept.
 */
static pthread_mutex_t maps_lock = PTHREAD_MUTEX_INITIALIZER;
static int maps_fd = -1;
static pid_t maps_pid;
static bool query_missing;	/* the kernel has no PROCMAP_QUERY */
static bool query_checked;	/* SOFTHCA_PROCMAP_QUERY read */

/* 0, -EFAULT, or -ENOTTY: ask the text instead; maps_lock held. */
static int check_by_query(uintptr_t start, uintptr_t end, bool write)
{
	struct shca_vma v;
	uintptr_t cur = start;

	if (maps_fd < 0 || maps_pid != shca_getpid()) {
		if (maps_fd >= 0)
			close(maps_fd);
		maps_fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
		maps_pid = shca_getpid();
		if (maps_fd < 0)
			return -ENOTTY;
	}
	while (cur < end) {
		/* the VMA that covers it, or the next (noted for
		 * shca_seg_map's plan, shm/seg_vm.c) */
		int ret = shca_vma_query(maps_fd, cur, &v);

		if (ret == -ENOENT || (!ret && v.start > cur))
			return -EFAULT;			/* a hole */
		if (ret)
			return -ENOTTY;
		if (!(v.prot & PROT_READ) || (write && !(v.prot & PROT_WRITE)))
			return -EFAULT;
		cur = v.end;
	}
	return 0;
}

/* The same question asked of the text of /proc/self/maps. */
static int check_by_text(uintptr_t start, uintptr_t end, bool write)
{
	uintptr_t cur = start;
	char line[512];
	int ret = -EFAULT;
	FILE *f;

	f = fopen("/proc/self/maps", "re");
	if (!f)
		return 0;	/* no procfs: nothing to check against */
	while (fgets(line, sizeof(line), f)) {
		unsigned long lo, hi;
		char perms[8];
		int c;

		if (!strchr(line, '\n'))	/* a long path: skip the rest */
			while ((c = fgetc(f)) != EOF && c != '\n')
				;
		if (sscanf(line, "%lx-%lx %7s", &lo, &hi, perms) != 3)
			continue;
		if (hi <= cur)
			continue;
		if (lo > cur)
			break;		/* a hole */
		if (perms[0] != 'r' || (write && perms[1] != 'w'))
			break;
		cur = hi;
		if (cur >= end) {
			ret = 0;
			break;
		}
	}
	fclose(f);
	return ret;
}

/* PROCMAP_QUERY's answer: 0, -EFAULT, or -ENOTTY (ask the text). */
static int check_query(uintptr_t start, uintptr_t end, bool write)
{
	int ret = -ENOTTY;

	pthread_mutex_lock(&maps_lock);
	if (!query_checked) {
		/* SOFTHCA_PROCMAP_QUERY=0: the text walk, as on kernels
		 * before 6.11 (bench/regmr.sh compares the two) */
		const char *e = getenv("SOFTHCA_PROCMAP_QUERY");

		query_missing = e && !strcmp(e, "0");
		query_checked = true;
	}
	if (!query_missing) {
		ret = check_by_query(start, end, write);
		if (ret == -ENOTTY)
			query_missing = true;
	}
	pthread_mutex_unlock(&maps_lock);
	return ret;
}

static int check_by_populate(uintptr_t start, uintptr_t end, bool write);

/* PROCMAP_QUERY where the kernel has it, else fallback's answer; 0,
 * -EFAULT, -EINVAL if the range wraps (or fallback's -ENOTTY). */
static int check_range(const void *addr, size_t len, bool write,
		       int (*fallback)(uintptr_t, uintptr_t, bool))
{
	uintptr_t start = (uintptr_t)addr;
	int ret;

	if (!len)
		return 0;
	if (len > UINTPTR_MAX - start)
		return -EINVAL;
	ret = check_query(start, start + len, write);
	if (ret != -ENOTTY)
		return ret;
	return fallback(start, start + len, write);
}

/* 0 or -EFAULT (-EINVAL if the range wraps). */
int shca_check_range(const void *addr, size_t len, bool write)
{
	return check_range(addr, len, write, check_by_text);
}

/*
 * Populate [start, end) as the access about to be made would fault it in
 * (MADV_POPULATE_READ or _WRITE, Linux 5.14): 0 when every page could be,
 * -EFAULT when one is not mapped (ENOMEM) or would fault (EFAULT).  A
 * page without the permission, or a mapping the advice does not take
 * (VM_IO, VM_PFNMAP), is EINVAL, as is an advice the kernel does not
 * know: the text of /proc/self/maps tells (rare: an error path, or such
 * a mapping); -ENOTTY where the kernel lacks the advice.
 */
static int check_by_populate(uintptr_t start, uintptr_t end, bool write)
{
	static int known;	/* 1: the kernel has the advice, -1: not */
	static char probe[1] __attribute__((aligned(4096)));
	uintptr_t ps = shca_page_size();
	uintptr_t s = start & ~(ps - 1);
	uintptr_t e = (end + ps - 1) & ~(ps - 1);
	int k = __atomic_load_n(&known, __ATOMIC_RELAXED);

	if (!k) {
		k = madvise((void *)((uintptr_t)probe & ~(ps - 1)), ps,
			    22 /* MADV_POPULATE_READ */) ? -1 : 1;
		__atomic_store_n(&known, k, __ATOMIC_RELAXED);
	}
	if (k < 0)
		return -ENOTTY;
	if (!madvise((void *)s, e - s, write ? 23 /* MADV_POPULATE_WRITE */ :
					       22 /* MADV_POPULATE_READ */))
		return 0;
	if (errno == ENOMEM || errno == EFAULT)
		return -EFAULT;
	return check_by_text(start, end, write);
}

/*
 * The question where it costs one system call (a responder's check on
 * every request, engine/responder.c): PROCMAP_QUERY; where the kernel has
 * none (before 6.11, or SOFTHCA_PROCMAP_QUERY=0), MADV_POPULATE, which
 * faults the pages in as the access that asks is about to.  0, -EFAULT,
 * -EINVAL, or -ENOTTY where neither is there (before 5.14): the text walk
 * would read every mapping of the process.
 */
int shca_check_range_fast(const void *addr, size_t len, bool write)
{
	return check_range(addr, len, write, check_by_populate);
}
