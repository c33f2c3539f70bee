/* SPDX-License-Identifier: MIT */
/* The descriptors of a process, read from /proc (the flood tests). */
#ifndef SHCA_TEST_FDCOUNT_H
#define SHCA_TEST_FDCOUNT_H

#include <sys/types.h>

/* How many descriptors pid has open (not counting the one used to look,
 * when pid is this process). */
int count_fds(pid_t pid);

/* The highest descriptor number this process has open. */
int highest_fd(void);

#endif
