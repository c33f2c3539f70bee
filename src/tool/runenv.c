// SPDX-License-Identifier: MIT
/*
 * The environment of `softhca run` and `softhca env` (runenv.h).
 */
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runenv.h"

#define SHIM_NAME "libsofthca_path.so"

/* <dir of this executable>/../lib, resolved, where the libraries are. */
static int lib_dir(char *out, size_t len, const char **missing)
{
	char exe[PATH_MAX], dir[PATH_MAX + 8], probe[PATH_MAX + 32];
	static const char *const need[] = { "libibverbs.so.1", SHIM_NAME };
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	unsigned int i;

	if (n < 0)
		return -errno;
	exe[n] = '\0';
	snprintf(dir, sizeof(dir), "%s/../lib", dirname(exe));
	if (!realpath(dir, out)) {
		if (strlen(dir) >= len)
			return -ENAMETOOLONG;
		memcpy(out, dir, strlen(dir) + 1);
	}
	for (i = 0; i < sizeof(need) / sizeof(need[0]); i++) {
		snprintf(probe, sizeof(probe), "%s/%s", out, need[i]);
		if (access(probe, R_OK)) {
			*missing = need[i];
			return -ENOENT;
		}
	}
	return 0;
}

/*
 * first, then the entries of old (split at any of seps) other than
 * first and empty ones, joined with ':'.  NULL when out of memory.
 */
static char *prepend(const char *first, const char *old, const char *seps)
{
	size_t len = strlen(first) + (old ? strlen(old) : 0) + 2;
	char *out = malloc(len), *copy, *t, *save = NULL;

	if (!out)
		return NULL;
	snprintf(out, len, "%s", first);
	if (!old || !*old)
		return out;
	copy = strdup(old);
	if (!copy) {
		free(out);
		return NULL;
	}
	for (t = strtok_r(copy, seps, &save); t;
	     t = strtok_r(NULL, seps, &save)) {
		if (!strcmp(t, first))
			continue;
		strcat(out, ":");
		strcat(out, t);
	}
	free(copy);
	return out;
}

int runenv_get(struct runenv *e, const char **missing)
{
	char dir[PATH_MAX], shim[PATH_MAX + 32];
	int ret;

	memset(e, 0, sizeof(*e));
	*missing = NULL;
	ret = lib_dir(dir, sizeof(dir), missing);
	if (ret)
		return ret;
	snprintf(shim, sizeof(shim), "%s/%s", dir, SHIM_NAME);
	e->ld_library_path = prepend(dir, getenv("LD_LIBRARY_PATH"), ":");
	/* ld.so splits LD_PRELOAD at spaces and colons */
	e->ld_preload = prepend(shim, getenv("LD_PRELOAD"), " :");
	if (!e->ld_library_path || !e->ld_preload) {
		runenv_free(e);
		return -ENOMEM;
	}
	return 0;
}

void runenv_free(struct runenv *e)
{
	free(e->ld_library_path);
	free(e->ld_preload);
	memset(e, 0, sizeof(*e));
}
