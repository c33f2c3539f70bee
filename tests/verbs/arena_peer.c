// SPDX-License-Identifier: MIT
/* This process's arena, as a peer maps it: see arena_peer.h. */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/uio.h>

#include "harness.h"
#include "arena_peer.h"
#include "shm/arena.h"

/* The pid in the header of the arena mapped at lo, read without a fault
 * (0 if the mapping is gone): the library unmaps a dead peer's arena
 * from its engine thread, maybe between the read of maps and this. */
static pid_t header_pid(unsigned long lo)
{
	struct shca_arena_hdr h;
	struct iovec l = { &h, sizeof(h) }, r = { (void *)lo, sizeof(h) };

	if (process_vm_readv(getpid(), &l, 1, &r, 1, 0) != (ssize_t)sizeof(h))
		return 0;
	return h.pid;
}

char *arena_own_base(void)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[512];
	unsigned long lo = 0;

	ASSERT_NOT_NULL(f);
	while (fgets(line, sizeof(line), f))
		if (strstr(line, "softhca-arena") &&
		    sscanf(line, "%lx-", &lo) == 1 &&
		    header_pid(lo) == getpid())
			break;
		else
			lo = 0;
	fclose(f);
	ASSERT_NE(lo, 0);
	return (char *)lo;
}

/* One entry read as a peer reads it (a seqlock, read again while the
 * owner's engine writes it): false if free. */
static bool imp_read(const struct shca_pd_imp_shm *t,
		     struct shca_pd_imp_shm *e)
{
	uint32_t s1, s2;

	do {
		s1 = __atomic_load_n(&t->seq, __ATOMIC_ACQUIRE);
		e->pd = __atomic_load_n(&t->pd, __ATOMIC_ACQUIRE);
		e->slot = __atomic_load_n(&t->slot, __ATOMIC_ACQUIRE);
		e->pid = __atomic_load_n(&t->pid, __ATOMIC_ACQUIRE);
		e->shadow = __atomic_load_n(&t->shadow, __ATOMIC_ACQUIRE);
		s2 = __atomic_load_n(&t->seq, __ATOMIC_ACQUIRE);
	} while (s1 != s2 || (s1 & 1));
	return e->pd != 0;
}

unsigned int arena_pd_imps(char *base, uint32_t pd, uint32_t shadow,
			   struct shca_pd_imp_shm *last)
{
	struct shca_pd_imp_shm *t, e;
	unsigned int i, n = 0;

	t = shca_arena_pd_imps(base, shca_arena_hdr(base)->size);
	ASSERT_NOT_NULL(t);
	for (i = 0; i < SHCA_ARENA_PD_IMPS; i++)
		if (imp_read(&t[i], &e) && (!pd || e.pd == pd) &&
		    (!shadow || e.shadow == shadow)) {
			n++;
			if (last)
				*last = e;
		}
	return n;
}
