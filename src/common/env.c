// SPDX-License-Identifier: MIT
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "env.h"
#include "log.h"

static pthread_once_t env_once = PTHREAD_ONCE_INIT;
static bool net_forced;

static void env_read(void)
{
	const char *s = getenv("SOFTHCA_NET");

	if (!s || !*s || !strcmp(s, "0"))
		return;
	if (strcmp(s, "1")) {
		shca_warn("SOFTHCA_NET=%s: expected 0 or 1, ignored", s);
		return;
	}
	net_forced = true;
	shca_info("SOFTHCA_NET=1: the net path for every destination");
}

bool shca_net_forced(void)
{
	pthread_once(&env_once, env_read);
	return net_forced;
}
