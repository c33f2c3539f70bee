// SPDX-License-Identifier: MIT
/*
 * SOFTHCA_NET_SPIN_US as common/env.c parses it (shca_net_spin_parse):
 * unset or empty is off; a decimal number up to SHCA_NET_SPIN_US_MAX is
 * taken as written; a larger one, however large, is clamped to the
 * maximum (-ERANGE); anything that is not a plain decimal number is off
 * (-EINVAL), "-1" included (strtoull alone would make it huge).
 */
#include <errno.h>
#include <stdio.h>

#include "harness.h"
#include "common/env.h"

static void check(const char *s, int ret, unsigned int us)
{
	unsigned int got = 12345;
	int r = shca_net_spin_parse(s, &got);

	printf("  \"%s\": %d, %u\n", s ? s : "(null)", r, got);
	ASSERT_EQ(r, ret);
	ASSERT_EQ(got, us);
}

TEST(off_when_unset_or_empty)
{
	check(NULL, 0, 0);
	check("", 0, 0);
	check("0", 0, 0);
}

TEST(taken_as_written)
{
	check("1", 0, 1);
	check("50", 0, 50);
	check("007", 0, 7);
	check("1000", 0, SHCA_NET_SPIN_US_MAX);
}

TEST(clamped_to_the_maximum)
{
	check("1001", -ERANGE, SHCA_NET_SPIN_US_MAX);
	check("4294967297", -ERANGE, SHCA_NET_SPIN_US_MAX);
	check("99999999999999999999999999", -ERANGE, SHCA_NET_SPIN_US_MAX);
}

TEST(not_a_number_is_off)
{
	check("-1", -EINVAL, 0);
	check("+5", -EINVAL, 0);
	check(" 5", -EINVAL, 0);
	check("5 ", -EINVAL, 0);
	check("50us", -EINVAL, 0);
	check("0x10", -EINVAL, 0);
	check("abc", -EINVAL, 0);
}
