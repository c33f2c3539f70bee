// SPDX-License-Identifier: MIT
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "env.h"
#include "log.h"
#include "slot.h"

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

/*
 * SOFTHCA_PORT_BASE: the first port of the range processes take their
 * slot from (common/slot.h).  Read each time: tools and the path shim
 * have no slot of their own and follow the environment they run in.
 */
uint16_t shca_port_base(void)
{
	const char *s = getenv("SOFTHCA_PORT_BASE");
	long v;

	if (!s || !*s)
		return SHCA_DEFAULT_PORT_BASE;
	v = strtol(s, NULL, 0);
	if (v < 1 || v > 65535 - (long)SHCA_NUM_SLOTS) {
		shca_warn_once("SOFTHCA_PORT_BASE=%s out of range, using %d", s,
			       SHCA_DEFAULT_PORT_BASE);
		return SHCA_DEFAULT_PORT_BASE;
	}
	return (uint16_t)v;
}

int shca_env_uint(const char *s, unsigned int max, unsigned int *v)
{
	unsigned long long n;
	char *end;

	*v = 0;
	if (!s || !*s)
		return 0;
	/* digits only: strtoull would take "-1" as a huge number, and
	 * " 5" or "0x10" are not what the table documents */
	if (*s < '0' || *s > '9')
		return -EINVAL;
	errno = 0;
	n = strtoull(s, &end, 10);
	if (*end)
		return -EINVAL;
	if (errno == ERANGE || n > max) {
		*v = max;
		return -ERANGE;
	}
	*v = (unsigned int)n;
	return 0;
}

int shca_net_spin_parse(const char *s, unsigned int *us)
{
	return shca_env_uint(s, SHCA_NET_SPIN_US_MAX, us);
}
