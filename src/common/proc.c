// SPDX-License-Identifier: MIT
/*
 * Is a peer's process (or thread) gone?  kill(pid, 0) answers ESRCH only
 * once its parent has reaped it: a process killed in the middle of an
 * access stays a zombie until then, and a parent that never waits (or
 * waits for something else first: the owner itself, in its ibv_dereg_mr)
 * would keep a lane or a lock of the dead process held for ever.
 *
 * /proc/<id>/stat says more: the task's state after the command's last
 * ')' (Z zombie, X dead) and the number of threads (field 20).  A
 * process is gone when it no longer exists, or its leader is a zombie
 * with no thread left but itself (a leader that called pthread_exit is
 * a zombie too while other threads still run: that process lives).
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util.h"

/* id's state letter and thread count from /proc/<id>/stat; false when
 * it cannot be read (gone, or no /proc). */
static bool stat_of(pid_t id, char *state, long *threads)
{
	char path[48], buf[1024], *p;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)id);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return false;
	buf[n] = '\0';
	p = strrchr(buf, ')');
	if (!p || p[1] != ' ' || !p[2])
		return false;
	*state = p[2];
	/* fields 3.. follow: state is 3, num_threads 20 */
	p += 3;
	for (int f = 3; f < 20 && p; f++) {
		p = strchr(p, ' ');
		if (p)
			p++;
	}
	*threads = p ? strtol(p, NULL, 10) : 0;
	return true;
}

static bool gone(pid_t id, bool process)
{
	long threads = 0;
	char state = 0;

	if (id <= 0)
		return true;
	if (kill(id, 0) && errno == ESRCH)
		return true;
	if (!stat_of(id, &state, &threads))
		return false;	/* not known: alive, as before */
	if (state != 'Z' && state != 'X')
		return false;
	return !process || threads <= 1;
}

bool shca_proc_gone(pid_t pid)
{
	return gone(pid, true);
}

bool shca_thread_gone(pid_t tid)
{
	return gone(tid, false);
}
