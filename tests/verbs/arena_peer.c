// SPDX-License-Identifier: MIT
/* This process's arena, as a peer maps it: see arena_peer.h. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "arena_peer.h"
#include "shm/arena.h"

char *arena_own_base(void)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[512];
	unsigned long lo = 0;

	ASSERT_NOT_NULL(f);
	while (fgets(line, sizeof(line), f))
		if (strstr(line, "softhca-arena") &&
		    sscanf(line, "%lx-", &lo) == 1 &&
		    shca_arena_hdr((void *)lo)->pid == getpid())
			break;
		else
			lo = 0;
	fclose(f);
	ASSERT_NE(lo, 0);
	return (char *)lo;
}
