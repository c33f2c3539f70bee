/* SPDX-License-Identifier: MIT */
/*
 * userfaultfd for the deregistration tests (test_net_dereg,
 * test_tm_dereg): a page of a registered range is left out
 * (MADV_DONTNEED) and watched, so the thread of softhca that copies into
 * or out of it stops there until the test supplies the page; meanwhile
 * the test deregisters from a thread of its own and sees whether
 * ibv_dereg_mr waits for that copy.
 */
#ifndef SOFTHCA_TEST_UFFD_H
#define SOFTHCA_TEST_UFFD_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <infiniband/verbs.h>

#define UFFD_PAGE 4096u

/* A userfaultfd (skips the case where there is none to be had). */
int uffd_open(void);
/* Watch [addr, addr + len) for missing pages. */
void uffd_watch(int fd, void *addr, size_t len);
/* The address of the next missing-page fault (waits up to ~10 s). */
uint64_t uffd_fault(int fd);
/* Supply the missing page at page, filled with b; wakes who waits. */
void uffd_supply(int fd, uint64_t page, uint8_t b);

/* ibv_dereg_mr in a thread of its own: the one that asked may have to
 * supply a page first. */
struct dereg {
	pthread_t t;
	struct ibv_mr *mr;
	int ret;
	bool done;
};

void dereg_start(struct dereg *d, struct ibv_mr *mr);
/* Has it returned, within a bounded number of looks (~200 ms)? */
bool dereg_returns_soon(struct dereg *d);
/* Join it; its result must be 0. */
void dereg_join(struct dereg *d);

#endif
