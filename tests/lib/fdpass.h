/* SPDX-License-Identifier: MIT */
/*
 * A descriptor and a record over a Unix socket (SCM_RIGHTS), for tests
 * whose two processes hand each other a cmd_fd or a memfd.  Failures are
 * assertions of the calling test.
 */
#ifndef SOFTHCA_TEST_FDPASS_H
#define SOFTHCA_TEST_FDPASS_H

#include <stddef.h>

/* len bytes of data with fd attached. */
void fdpass_send(int sock, int fd, const void *data, size_t len);
/* len bytes into data, and the descriptor that came with them. */
int fdpass_recv(int sock, void *data, size_t len);

#endif
