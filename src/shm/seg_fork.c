// SPDX-License-Identifier: MIT
/*
 * fork() and mapped registered memory.
 *
 * A segment is a MAP_SHARED mapping of the pool, and a child inherits
 * shared mappings live: without care, parent and child would write the
 * same pages.  What a child must see is what the kernel gives a child of
 * a process with pinned pages:
 *   - without ibv_fork_init, its own copy of the contents at fork time:
 *     the child handler replaces each segment by private anonymous memory
 *     holding a copy of its data pages (pread from the pool, which the
 *     child holds until then), and the parent's handler waits until the
 *     child has done so, so that the parent's own later stores cannot
 *     reach the copy (a pipe: the child closes its end when done, or by
 *     dying, or by exec);
 *   - under ibv_fork_init, nothing: rdma-core's registration marks the
 *     range MADV_DONTFORK, and so are the segments (seg.c), so the kernel
 *     maps nothing there in the child.
 * The child then forgets the parent's segments and closes the inherited
 * pool descriptor; its arena (and pool) are its own on first use.
 *
 * Only system calls run in the child handler (seg_vm.c takes no lock and
 * allocates nothing), as after a fork of a threaded process only those
 * are safe.  What differs from the kernel: the copy is made after fork()
 * returned in the kernel, so a store by another thread of the parent, or
 * by a peer, in between may show in the child (README).
 */
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>
#include <sys/mman.h>

#include "../common/log.h"
#include "arena.h"
#include "seg.h"

static int fork_pipe[2] = { -1, -1 };
static int fork_pool_fd = -1;

static void fork_prepare(void)
{
	struct shca_arena *a;
	bool copy = false;

	pthread_mutex_lock(&shca_seg_lock);
	fork_pipe[0] = fork_pipe[1] = -1;
	fork_pool_fd = -1;
	a = shca_nsegs ? shca_arena_self() : NULL;
	if (!a)
		return;
	fork_pool_fd = a->pool_fd;
	for (uint32_t i = 0; i < shca_nsegs && !copy; i++)
		copy = !shca_segs[i]->dontfork;
	if (copy && pipe2(fork_pipe, O_CLOEXEC))
		fork_pipe[0] = fork_pipe[1] = -1;
}

static void fork_parent(void)
{
	char c;

	if (fork_pipe[0] >= 0) {
		close(fork_pipe[1]);
		/* EOF when the child is done (or gone) */
		while (read(fork_pipe[0], &c, 1) < 0 && errno == EINTR)
			;
		close(fork_pipe[0]);
	}
	fork_pipe[0] = fork_pipe[1] = -1;
	pthread_mutex_unlock(&shca_seg_lock);
}

static void fork_child(void)
{
	int mfd = -1;

	if (fork_pipe[0] >= 0)
		close(fork_pipe[0]);
	if (fork_pool_fd >= 0) {
		mfd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
		for (uint32_t i = 0; i < shca_nsegs; i++) {
			const struct shca_seg *s = shca_segs[i];

			if (s->dontfork)
				continue;	/* not mapped here at all */
			if (mfd < 0 ||
			    shca_seg_privatize(s, fork_pool_fd, mfd, false)) {
				/* a live mapping of the parent's memory must
				 * not survive: better no memory at all */
				munmap((void *)s->va, s->len);
			}
		}
		/* an orphan's pages may still be the pool's where the
		 * program did not replace them */
		for (const struct shca_seg *o = shca_orphans; o;
		     o = o->next_orphan)
			if (!o->dontfork && mfd >= 0)
				(void)shca_seg_privatize(o, fork_pool_fd, mfd,
							 false);
		if (mfd >= 0)
			close(mfd);
		close(fork_pool_fd);
		shca_arena_pool_closed();
	}
	if (fork_pipe[1] >= 0)
		close(fork_pipe[1]);
	fork_pipe[0] = fork_pipe[1] = -1;
	fork_pool_fd = -1;
	shca_seg_forget_all();
	pthread_mutex_unlock(&shca_seg_lock);
}

static void fork_register(void)
{
	if (pthread_atfork(fork_prepare, fork_parent, fork_child))
		shca_warn("seg: pthread_atfork failed: a child of fork() "
			  "would share registered memory with its parent");
}

/* Before the first segment exists. */
void shca_seg_fork_init(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;

	pthread_once(&once, fork_register);
}
