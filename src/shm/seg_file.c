// SPDX-License-Identifier: MIT
/*
 * Registered memory that is already shared (issue 13): a MAP_SHARED
 * mapping of the program's own file is not re-backed by the pool (other
 * processes may map the same file: a copy would part from them), it is
 * handed to peers as it is.  The owner keeps a descriptor of the file
 * open while a segment over it lives; a peer opens it again through
 * /proc/<owner>/fd/<n> (shm/segmap.c), which the kernel grants on the
 * same terms as CMA (ptrace read access to the owner), and maps it.
 *
 * Only a file that cannot hurt a peer is shared so (shca_segmap_check_
 * file): a memfd or other tmpfs file of our uid, sealed against shrinking
 * (F_SEAL_SHRINK) and not against writes.  A peer's load or store beyond
 * the end of a file raises SIGBUS, and a file that is not sealed can be
 * truncated by the owner or by any process of the user at any moment;
 * nothing a peer checks before an access (the size) still holds during
 * it.  softhca cannot seal a file for the program (that would change what
 * the program itself may do with it; POSIX shm files cannot be sealed at
 * all), so such memory keeps the CMA path, whose copy returns EFAULT
 * instead.  hugetlbfs files keep it too: a peer's fault on a huge page
 * the file does not hold yet raises SIGBUS when the huge pages run out.
 *
 * A System V shared memory segment (shmget, shmat: "/SYSV<key>" on the
 * kernel's internal mount, whose inode number is the segment's id) cannot
 * shrink at all: it is shared as it is too, named by its id, which a peer
 * of the same user attaches (shmat, allowed on Linux after IPC_RMID while
 * the segment lives: UCX and others remove theirs at once).  Not a
 * hugetlb one: its pages are reserved at shmget unless SHM_NORESERVE,
 * which nothing shows afterwards, and without a reservation a peer's
 * fault raises SIGBUS when the huge pages run out.
 *
 * The descriptor is found without privileges where possible:
 *   1. /proc/self/map_files/<start>-<end> (needs CAP_CHECKPOINT_RESTORE
 *      or CAP_SYS_ADMIN on most kernels);
 *   2. the mapping's path, if it names one that still exists (a tmpfs
 *      file, POSIX shm under /dev/shm);
 *   3. a descriptor the program still holds (a memfd), found in
 *      /proc/self/fd and opened again read-write;
 * each one kept only if it is the same inode as the mapping.
 */
#include <ctype.h>
#include <dirent.h>
#include <stdbool.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/shm.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include "segmap.h"
#include "seg.h"

#define PS	4096ull

/* Is st a regular file, the one mapped by v? */
static bool is_vma_file(const struct stat *st, const struct shca_vma *v)
{
	return S_ISREG(st->st_mode) && (uint64_t)st->st_ino == v->ino &&
	       major(st->st_dev) == v->dev_major &&
	       minor(st->st_dev) == v->dev_minor;
}

/*
 * path opened read-write if it is the regular file mapped by v, else -1.
 * Looked at before it is opened: opening a device node that a program
 * mapped shared (a GPU's, a NIC's) may do something.
 */
static int open_vma_file(const char *path, const struct shca_vma *v)
{
	struct stat st;
	int fd;

	if (stat(path, &st) || !is_vma_file(&st, v))
		return -1;
	fd = open(path, O_RDWR | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0)
		return -1;
	if (fstat(fd, &st) || !is_vma_file(&st, v)) {
		close(fd);
		return -1;
	}
	return fd;
}

/* 3: a descriptor of ours for the same inode, opened again read-write
 * (ours may be read-only, and its file offset is the program's). */
static int by_fd_scan(const struct shca_vma *v)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int fd = -1;

	if (!d)
		return -1;
	while (fd < 0 && (e = readdir(d))) {
		char path[64];
		struct stat st;
		char *end;
		long n = strtol(e->d_name, &end, 10);

		if (*end || n < 0 || n == dirfd(d))
			continue;
		if (fstat((int)n, &st) || !is_vma_file(&st, v))
			continue;
		snprintf(path, sizeof(path), "/proc/self/fd/%ld", n);
		fd = open_vma_file(path, v);
	}
	closedir(d);
	return fd;
}

/* The file under v, read-write, or -1. */
static int file_open(const struct shca_vma *v)
{
	size_t nl = strlen(v->name);
	char path[64];
	int fd;

	snprintf(path, sizeof(path), "/proc/self/map_files/%lx-%lx",
		 (unsigned long)v->start, (unsigned long)v->end);
	fd = open_vma_file(path, v);
	if (fd < 0 && v->name[0] == '/' &&
	    (nl < 10 || strcmp(v->name + nl - 10, " (deleted)")))
		fd = open_vma_file(v->name, v);
	if (fd < 0)
		fd = by_fd_scan(v);
	return fd;
}

/* Is v a mapping of a System V segment ("/SYSV" and 8 hex digits, maybe
 * " (deleted)", on a kernel-internal mount)? */
static bool is_sysv(const struct shca_vma *v)
{
	const char *n = v->name;
	int i;

	if (v->dev_major || strncmp(n, "/SYSV", 5) || v->ino > INT32_MAX)
		return false;
	for (i = 5; i < 13; i++)
		if (!isxdigit((unsigned char)n[i]))
			return false;
	return !n[13] || !strcmp(n + 13, " (deleted)");
}

/* [s, e) of v, a System V segment: NULL (*shmid, *foff), or why not. */
static const char *sysv_open(const struct shca_vma *v, uintptr_t s,
			     uintptr_t e, int *shmid, uint64_t *foff)
{
	struct shmid_ds ds;
	uint64_t off = v->pgoff + (s - v->start);
	int id = (int)v->ino;

	if (v->page_size != PS)
		return "hugetlb System V segment (a peer's fault may raise "
		       "SIGBUS: SHM_NORESERVE cannot be seen)";
	if (shmctl(id, IPC_STAT, &ds))
		return "System V segment: no IPC_STAT";
	if (ds.shm_perm.uid != getuid())
		return "System V segment of another user";
	if ((uint64_t)ds.shm_segsz < off + (e - s))
		return "range beyond the System V segment's end";
	*shmid = id;
	*foff = off;
	return NULL;
}

const char *shca_seg_file_open(const struct shca_vma *v, uintptr_t s,
			       uintptr_t e, int *fdp, uint64_t *foff,
			       int *shmid)
{
	const char *why;
	uint64_t off;
	int fd;

	*fdp = -1;
	*shmid = -1;
	if ((v->prot & (PROT_READ | PROT_WRITE)) == (PROT_READ | PROT_WRITE) &&
	    is_sysv(v))
		return sysv_open(v, s, e, shmid, foff);
	if (!v->ino && !v->dev_major && !v->dev_minor)
		return "shared anonymous mapping";
	if (v->page_size != PS)
		return "hugetlb mapping (a peer's fault may raise SIGBUS)";
	if ((v->prot & (PROT_READ | PROT_WRITE)) != (PROT_READ | PROT_WRITE))
		return "shared file mapping not read-write";
	off = v->pgoff + (s - v->start);
	fd = file_open(v);
	if (fd < 0)
		return "shared file mapping: no descriptor of the file";
	why = shca_segmap_check_file(fd, off + (e - s));
	if (why) {
		close(fd);
		return why;
	}
	*fdp = fd;
	*foff = off;
	return NULL;
}
