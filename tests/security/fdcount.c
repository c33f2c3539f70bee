// SPDX-License-Identifier: MIT
/* The descriptors of a process, read from /proc (fdcount.h). */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "harness.h"
#include "fdcount.h"

int count_fds(pid_t pid)
{
	char path[64];
	struct dirent *d;
	DIR *dir;
	int n = 0;

	snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	dir = opendir(path);
	ASSERT(dir);
	while ((d = readdir(dir)))
		if (d->d_name[0] != '.')
			n++;
	closedir(dir);
	return n - (pid == getpid());	/* not the DIR's own */
}

int highest_fd(void)
{
	struct dirent *d;
	DIR *dir = opendir("/proc/self/fd");
	int hi = 0;

	ASSERT(dir);
	while ((d = readdir(dir)))
		if (d->d_name[0] != '.' && atoi(d->d_name) > hi)
			hi = atoi(d->d_name);
	closedir(dir);
	return hi;
}
