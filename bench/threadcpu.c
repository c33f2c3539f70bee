// SPDX-License-Identifier: MIT
/*
 * bench/threadcpu.c: preloaded into a benchmark's processes by
 * bench/spin_ab.sh.  At exit (a destructor), one line per thread of the
 * process with the CPU time it ran (the first field of
 * /proc/self/task/TID/schedstat, ns on a CPU), appended to THREADCPU_OUT
 * (else stderr):
 *
 *   threadcpu PID TID main|other SECONDS
 *
 * "main" is the thread whose id is the process's; in a perftest process
 * over softhca the "other" is the engine thread.  A benchmark helper,
 * not part of softhca.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

__attribute__((destructor)) static void threadcpu_report(void)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	const char *out = getenv("THREADCPU_OUT");
	FILE *o = out ? fopen(out, "a") : stderr;
	int self = getpid();

	if (!d || !o)
		return;
	while ((e = readdir(d))) {
		char p[300];
		unsigned long long ns = 0;
		FILE *f;

		if (e->d_name[0] == '.')
			continue;
		snprintf(p, sizeof(p), "/proc/self/task/%s/schedstat", e->d_name);
		f = fopen(p, "r");
		if (!f)
			continue;
		if (fscanf(f, "%llu", &ns) != 1)
			ns = 0;
		fclose(f);
		fprintf(o, "threadcpu %d %s %s %.3f\n", self, e->d_name,
			atoi(e->d_name) == self ? "main" : "other", ns / 1e9);
	}
	closedir(d);
	if (o != stderr)
		fclose(o);
}
