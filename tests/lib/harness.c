// SPDX-License-Identifier: MIT
#include <signal.h>
#include <stdarg.h>
#include <unistd.h>
#include <sys/wait.h>

#include "harness.h"

#define MAX_TESTS 512
#define EXIT_SKIP 77

static struct {
	const char *name;
	test_fn fn;
} tests[MAX_TESTS];
static int ntests;

void harness_register(const char *name, test_fn fn)
{
	if (ntests == MAX_TESTS) {
		fprintf(stderr, "harness: too many tests\n");
		exit(2);
	}
	tests[ntests].name = name;
	tests[ntests].fn = fn;
	ntests++;
}

void harness_fail(const char *file, int line, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "  FAIL %s:%d: ", file, line);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	fflush(stderr);
	_exit(1);
}

void harness_skip(const char *why)
{
	printf("  skip reason: %s\n", why);
	fflush(stdout);
	_exit(EXIT_SKIP);
}

int harness_ci(void)
{
	const char *ci = getenv("CI");

	return ci && *ci && strcmp(ci, "0") && strcmp(ci, "false");
}

void harness_skip_env(const char *file, int line, const char *why)
{
	if (harness_ci())
		harness_fail(file, line, "CI=true and this machine lacks what "
			     "the case needs (a skip elsewhere): %s", why);
	harness_skip(why);
}

static int run_one(int i, int num)
{
	int timeout = getenv("TEST_TIMEOUT") ? atoi(getenv("TEST_TIMEOUT")) : 60;
	int status;
	pid_t pid;

	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		/* its own process group: what it forks goes with it */
		setpgid(0, 0);
		harness_crash_report();
		alarm((unsigned int)timeout);
		tests[i].fn();
		fflush(stdout);
		_exit(0);
	}
	if (pid > 0)
		setpgid(pid, pid);	/* whichever of the two runs first */
	if (pid < 0 || waitpid(pid, &status, 0) < 0) {
		printf("not ok %d - %s # cannot fork\n", num, tests[i].name);
		return 1;
	}
	/* a case that failed or timed out may leave the peer it forked
	 * running (spinning on a step that never comes): it ends here,
	 * not minutes later beside the next case */
	kill(-pid, SIGKILL);
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
		printf("ok %d - %s\n", num, tests[i].name);
		return 0;
	}
	if (WIFEXITED(status) && WEXITSTATUS(status) == EXIT_SKIP) {
		printf("ok %d - %s # SKIP\n", num, tests[i].name);
		return -1;
	}
	if (WIFSIGNALED(status))
		printf("not ok %d - %s # signal %d%s\n", num, tests[i].name,
		       WTERMSIG(status),
		       WTERMSIG(status) == SIGALRM ? " (timeout)" : "");
	else
		printf("not ok %d - %s # exit %d\n", num, tests[i].name,
		       WEXITSTATUS(status));
	return 1;
}

/* Case i runs: every case without arguments, else the named ones. */
static int selected(int i, int argc, char **argv)
{
	int j;

	if (argc < 2)
		return 1;
	for (j = 1; j < argc; j++)
		if (!strcmp(argv[j], tests[i].name))
			return 1;
	return 0;
}

/* An argument that names no case is a mistake (a renamed case in a
 * script): refuse it rather than pass with nothing run. */
static int check_names(int argc, char **argv)
{
	int i, j, bad = 0;

	for (j = 1; j < argc; j++) {
		for (i = 0; i < ntests; i++)
			if (!strcmp(argv[j], tests[i].name))
				break;
		if (i == ntests) {
			fprintf(stderr, "harness: no case named '%s'\n",
				argv[j]);
			bad = 1;
		}
	}
	return bad;
}

int main(int argc, char **argv)
{
	int i, num = 0, plan = 0, failed = 0, skipped = 0, passed = 0, r;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (check_names(argc, argv))
		return 2;
	for (i = 0; i < ntests; i++)
		plan += selected(i, argc, argv);
	printf("1..%d\n", plan);
	for (i = 0; i < ntests; i++) {
		if (!selected(i, argc, argv))
			continue;
		r = run_one(i, ++num);
		if (r > 0)
			failed++;
		else if (r < 0)
			skipped++;
		else
			passed++;
	}
	printf("# %d passed, %d failed, %d skipped\n", passed, failed, skipped);
	if (failed)
		return 1;
	return skipped ? EXIT_SKIP : 0;
}

int harness_run(const char *cmd, char **out)
{
	size_t n = 0, cap = 65536;
	char *buf;
	FILE *f;
	int st;

	fflush(stdout);
	fflush(stderr);
	f = popen(cmd, "r");
	ASSERT_NOT_NULL(f);
	buf = malloc(cap);
	ASSERT_NOT_NULL(buf);
	for (;;) {
		size_t r;

		if (n + 1 == cap) {
			cap *= 2;
			buf = realloc(buf, cap);
			ASSERT_NOT_NULL(buf);
		}
		r = fread(buf + n, 1, cap - 1 - n, f);
		if (!r)
			break;
		n += r;
	}
	buf[n] = '\0';
	st = pclose(f);
	ASSERT(WIFEXITED(st));
	free(*out);
	*out = buf;
	return WEXITSTATUS(st);
}
