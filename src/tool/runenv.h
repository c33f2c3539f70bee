/* SPDX-License-Identifier: MIT */
/*
 * The environment `softhca run` gives a program and `softhca env` prints:
 * softhca's library directory first on LD_LIBRARY_PATH (its
 * libibverbs.so.1 and librdmacm.so.1 replace the system's), and its path
 * shim first on LD_PRELOAD (the devices appear under /dev/infiniband and
 * /sys/class/infiniband: docs/discovery.md).  What the caller had stays,
 * after them; an entry already there is not repeated, so applying the
 * environment twice changes nothing.
 */
#ifndef SOFTHCA_TOOL_RUNENV_H
#define SOFTHCA_TOOL_RUNENV_H

struct runenv {
	char *ld_library_path;
	char *ld_preload;
};

/* From this process's environment: 0, or -errno (-ENOENT: the libraries
 * are not next to this program, *missing names the one). */
int runenv_get(struct runenv *e, const char **missing);
void runenv_free(struct runenv *e);

#endif
