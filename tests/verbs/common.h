/* SPDX-License-Identifier: MIT */
/* Helpers shared by the verbs tests. */
#ifndef SOFTHCA_TEST_VERBS_COMMON_H
#define SOFTHCA_TEST_VERBS_COMMON_H

#include <infiniband/verbs.h>

/* Open the loopback device (softhca_lo); fails the test if absent. */
struct ibv_context *open_lo(void);
struct ibv_device *find_device(struct ibv_device **list, const char *name);
/* RC QP qp connected to itself with remote rights access, RESET -> RTS;
 * fails the test if a step does. */
void connect_self(struct ibv_qp *qp, unsigned int access);

#endif
