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

#include <stdint.h>

/* This process's own arena, found in /proc/self/maps (a forked child
 * also maps the one it inherited: ours names our pid in its header);
 * fails the test if there is none. */
char *arena_own_base(void);

struct shca_pd_imp_shm;
/* The entries of the table of importers (arena.h shca_pd_imp_shm) of
 * the arena at base (arena_own_base's, found before peers' arenas are
 * mapped beside it: that search reads their headers) that name PD
 * identity pd and shadow (0: any), read as a peer reads them; the last
 * one found in *last if not NULL. */
unsigned int arena_pd_imps(char *base, uint32_t pd, uint32_t shadow,
			   struct shca_pd_imp_shm *last);

#endif
