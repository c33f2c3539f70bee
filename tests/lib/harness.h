/* SPDX-License-Identifier: MIT */
/*
 * A small test harness in libuv's manner: every TEST runs in its own
 * forked process with a timeout; ASSERT_* print both sides and the line.
 *
 *   TEST(name) { ... }             defines a case
 *   ./test_x                       runs every case
 *   ./test_x name [name...]        runs the named cases (an unknown name
 *                                  is an error: exit 2, nothing runs)
 *   SKIP("why")                    ends a case as skipped, saying why
 *   SKIP_ENV("why")                the same for something this machine
 *                                  lacks (IPv6, tshark, ...), but a failure
 *                                  under CI (CI=true, as .ci/run sets)
 *
 * Output is TAP: the plan "1..N" first, then per case "ok 3 - name",
 * "not ok 4 - name # exit 1", or a skip: the line "  skip reason: why"
 * (from the case) and then "ok 5 - name # SKIP"; last the summary
 * "# P passed, F failed, S skipped".  scripts/check.sh reads these lines
 * from ctest's log to count and list the cases (keep their format).
 * Exit status: 1 if a case failed, else 77 if a case skipped (ctest's
 * SKIP_RETURN_CODE: the binary shows as Skipped), else 0.
 */
#ifndef SOFTHCA_TEST_HARNESS_H
#define SOFTHCA_TEST_HARNESS_H

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef void (*test_fn)(void);
void harness_register(const char *name, test_fn fn);
void harness_fail(const char *file, int line, const char *fmt, ...)
	__attribute__((noreturn, format(printf, 3, 4)));
void harness_skip(const char *why) __attribute__((noreturn));
/* a fatal signal prints the crashing thread's stack (tests/lib/crash.c) */
void harness_crash_report(void);
/* the fatal-signal part only (tests/lib/crash_preload.c: other programs) */
void harness_crash_handlers(void);
void harness_skip_env(const char *file, int line, const char *why)
	__attribute__((noreturn));
/* CI=true (or any value but "", "0", "false"): the environment is
 * complete, and an environment skip is a failure. */
int harness_ci(void);
/* Run cmd (popen): its whole stdout in *out (malloc'd, the old *out
 * freed), its exit status returned; a command that did not exit fails. */
int harness_run(const char *cmd, char **out);

#define TEST(name)                                                   \
	static void test_##name(void);                               \
	__attribute__((constructor)) static void reg_##name(void)    \
	{                                                            \
		harness_register(#name, test_##name);                \
	}                                                            \
	static void test_##name(void)

#define SKIP(why) harness_skip(why)
/* Something the machine lacks, not softhca: skipped locally, failed in
 * CI, where README's claims must all be checked. */
#define SKIP_ENV(why) harness_skip_env(__FILE__, __LINE__, why)

#define ASSERT(cond)                                                     \
	do {                                                             \
		if (!(cond))                                             \
			harness_fail(__FILE__, __LINE__, "ASSERT(%s)",   \
				     #cond);                             \
	} while (0)

#define ASSERT_CMP(a, op, b)                                               \
	do {                                                               \
		long long a_ = (long long)(a), b_ = (long long)(b);        \
		if (!(a_ op b_))                                           \
			harness_fail(__FILE__, __LINE__,                   \
				     "%s %s %s: %lld vs %lld", #a, #op,    \
				     #b, a_, b_);                          \
	} while (0)

#define ASSERT_EQ(a, b) ASSERT_CMP(a, ==, b)
#define ASSERT_NE(a, b) ASSERT_CMP(a, !=, b)
#define ASSERT_GE(a, b) ASSERT_CMP(a, >=, b)
#define ASSERT_GT(a, b) ASSERT_CMP(a, >, b)
#define ASSERT_LE(a, b) ASSERT_CMP(a, <=, b)
#define ASSERT_LT(a, b) ASSERT_CMP(a, <, b)

#define ASSERT_U64_EQ(a, b)                                                \
	do {                                                               \
		uint64_t a_ = (uint64_t)(a), b_ = (uint64_t)(b);           \
		if (a_ != b_)                                              \
			harness_fail(__FILE__, __LINE__,                   \
				     "%s == %s: 0x%" PRIx64 " vs 0x%" PRIx64, \
				     #a, #b, a_, b_);                      \
	} while (0)

#define ASSERT_NULL(p)                                                   \
	do {                                                             \
		const void *p_ = (const void *)(p);                      \
		if (p_)                                                  \
			harness_fail(__FILE__, __LINE__,                 \
				     "%s is %p, expected NULL", #p, p_); \
	} while (0)

#define ASSERT_NOT_NULL(p)                                                \
	do {                                                              \
		if (!(p))                                                 \
			harness_fail(__FILE__, __LINE__,                  \
				     "%s is NULL (errno %d: %s)", #p,     \
				     errno, strerror(errno));             \
	} while (0)

#define ASSERT_STR_EQ(a, b)                                               \
	do {                                                              \
		const char *a_ = (a), *b_ = (b);                          \
		if (strcmp(a_, b_))                                       \
			harness_fail(__FILE__, __LINE__,                  \
				     "%s == %s: \"%s\" vs \"%s\"", #a,    \
				     #b, a_, b_);                         \
	} while (0)

/* A call that must fail with NULL and this errno. */
#define ASSERT_NULL_ERRNO(expr, err)                                       \
	do {                                                               \
		errno = 0;                                                 \
		const void *r_ = (const void *)(expr);                     \
		if (r_)                                                    \
			harness_fail(__FILE__, __LINE__,                   \
				     "%s succeeded, expected errno %s",    \
				     #expr, #err);                         \
		if (errno != (err))                                        \
			harness_fail(__FILE__, __LINE__,                   \
				     "%s: errno %d (%s), expected %s",     \
				     #expr, errno, strerror(errno), #err); \
	} while (0)

#endif
