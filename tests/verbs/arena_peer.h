/* SPDX-License-Identifier: MIT */
/*
 * The tests that play a same-host peer of their own process
 * (security/test_hostile_arena.c, test_hostile_imptag.c, test_churn.c;
 * verbs/test_mw.c, test_remap.c; traffic/test_mapped_dereg.c): where
 * this process's arena is mapped, to read or forge it as a peer would
 * (its layout: src/shm/arena.h).
 */
#ifndef SOFTHCA_TEST_ARENA_PEER_H
#define SOFTHCA_TEST_ARENA_PEER_H

/* This process's own arena, found in /proc/self/maps (a forked child
 * also maps the one it inherited: ours names our pid in its header);
 * fails the test if there is none. */
char *arena_own_base(void);

#endif
