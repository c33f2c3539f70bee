// SPDX-License-Identifier: MIT
/*
 * Run under the path shim (tests/traffic/test_sysfs.c): threads that list,
 * stat, open and read the view at once, with the same answers every time,
 * while other threads list and read real directories through the same
 * interposed functions.  Exit 0 when every answer was right, else 1 with
 * what went wrong.
 *
 * `paths_stress cat FILE...` prints the files one after the other, as
 * cat(1) would: test_sysfs reads the view with it (a program of this
 * build, so a sanitizer build's shim finds its runtime already loaded).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#define THREADS 8
#define ROUNDS 300

static const char *port = "/sys/class/infiniband/softhca_lo/ports/1";
static char guid[64];
static int errors;

static void bad(const char *what, const char *detail)
{
	__atomic_fetch_add(&errors, 1, __ATOMIC_RELAXED);
	fprintf(stderr, "%s: %s\n", what, detail);
}

static int count_entries(const char *path)
{
	struct dirent *de;
	DIR *d = opendir(path);
	int n = 0;

	if (!d)
		return -1;
	while ((de = readdir(d)))
		n++;
	closedir(d);
	return n;
}

static int read_file(const char *path, char *buf, size_t len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -1;
	n = read(fd, buf, len - 1);
	close(fd);
	if (n < 0)
		return -1;
	buf[n] = '\0';
	return (int)n;
}

static void *view_thread(void *arg)
{
	char buf[256], rp[PATH_MAX], path[PATH_MAX];
	struct stat st;
	int i, fd;

	(void)arg;
	for (i = 0; i < ROUNDS; i++) {
		/* ". ..", 9 attributes, gids gid_attrs pkeys counters
		 * hw_counters */
		if (count_entries(port) != 16)
			bad("list ports/1", "not 16 entries");
		snprintf(path, sizeof(path), "%s/../../node_guid", port);
		if (read_file(path, buf, sizeof(buf)) < 0 || strcmp(buf, guid))
			bad("read node_guid", buf);
		if (stat("/dev/infiniband", &st) || !S_ISDIR(st.st_mode))
			bad("stat /dev/infiniband", strerror(errno));
		if (!realpath(port, rp) || strcmp(rp, port))
			bad("realpath", rp);
		fd = open(port, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (fd < 0 || fstatat(fd, "state", &st, 0) ||
		    !S_ISREG(st.st_mode))
			bad("fstatat(dir, state)", strerror(errno));
		if (fd >= 0)
			close(fd);
	}
	return NULL;
}

static void *real_thread(void *arg)
{
	char buf[256];
	int i;

	(void)arg;
	for (i = 0; i < ROUNDS; i++) {
		if (count_entries("/proc/self/task") < 1)
			bad("list /proc/self/task", strerror(errno));
		if (read_file("/proc/self/stat", buf, sizeof(buf)) <= 0)
			bad("read /proc/self/stat", strerror(errno));
	}
	return NULL;
}

static int cat(int n, char **files)
{
	char buf[4096];
	ssize_t r;
	int i, fd;

	for (i = 0; i < n; i++) {
		fd = open(files[i], O_RDONLY | O_CLOEXEC);
		if (fd < 0) {
			perror(files[i]);
			return 1;
		}
		while ((r = read(fd, buf, sizeof(buf))) > 0)
			if (fwrite(buf, 1, (size_t)r, stdout) != (size_t)r)
				return 1;
		close(fd);
		if (r < 0) {
			perror(files[i]);
			return 1;
		}
	}
	return fflush(stdout) ? 1 : 0;
}

int main(int argc, char **argv)
{
	pthread_t t[THREADS];
	int i;

	if (argc > 1 && !strcmp(argv[1], "cat"))
		return cat(argc - 2, argv + 2);
	if (read_file("/sys/class/infiniband/softhca_lo/node_guid", guid,
		      sizeof(guid)) <= 0) {
		perror("node_guid (not under the shim?)");
		return 1;
	}
	for (i = 0; i < THREADS; i++)
		pthread_create(&t[i], NULL, i % 2 ? real_thread : view_thread,
			       NULL);
	for (i = 0; i < THREADS; i++)
		pthread_join(t[i], NULL);
	printf("%d errors\n", errors);
	return errors ? 1 : 0;
}
