// SPDX-License-Identifier: MIT
/*
 * From what a program passed to what the view holds (shim.h): paths
 * relative to the working directory or to a directory descriptor, the
 * descriptors that stand for the view's directories, stat data, and the
 * descriptors a file of the view is read from.
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/sysmacros.h>

#include "shim.h"

/* ------------------------------------------------------------------ */
/* Descriptors of the view's directories                               */

/*
 * A program that opens a directory of the view gets a memfd standing for
 * it, registered here with the directory's path.  The registration is
 * checked against the descriptor's inode at each use: a program that
 * closed it, and got the number back for another file, is not misled.
 */
#define NREG 4096

struct reg {
	dev_t dev;
	ino_t ino;
	char *vpath;
};

static struct reg regs[NREG];
static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static int reg_count;		/* registrations: 0 means no lookups */

bool shim_maybe_view_fd(int fd)
{
	return fd >= 0 && fd < NREG &&
	       __atomic_load_n(&reg_count, __ATOMIC_RELAXED) &&
	       __atomic_load_n(&regs[fd].vpath, __ATOMIC_RELAXED);
}

static void reg_drop(int fd)	/* reg_lock held */
{
	free(regs[fd].vpath);
	__atomic_store_n(&regs[fd].vpath, NULL, __ATOMIC_RELAXED);
	__atomic_fetch_sub(&reg_count, 1, __ATOMIC_RELAXED);
}

/* The path fd was registered with, if fd is still that descriptor. */
static bool reg_get(int fd, char *out, size_t len)
{
	struct stat st;
	bool ok = false;

	if (!shim_maybe_view_fd(fd))
		return false;
	pthread_mutex_lock(&reg_lock);
	if (regs[fd].vpath) {
		if (shca_next_fstat(fd, &st) || st.st_dev != regs[fd].dev ||
		    st.st_ino != regs[fd].ino) {
			reg_drop(fd);
		} else {
			snprintf(out, len, "%s", regs[fd].vpath);
			ok = true;
		}
	}
	pthread_mutex_unlock(&reg_lock);
	return ok;
}

static void reg_put(int fd, const char *vpath)
{
	struct stat st;
	char *copy;

	if (fd < 0 || fd >= NREG || shca_next_fstat(fd, &st))
		return;
	copy = strdup(vpath);
	if (!copy)
		return;
	pthread_mutex_lock(&reg_lock);
	if (regs[fd].vpath)
		reg_drop(fd);
	regs[fd].dev = st.st_dev;
	regs[fd].ino = st.st_ino;
	__atomic_fetch_add(&reg_count, 1, __ATOMIC_RELAXED);
	__atomic_store_n(&regs[fd].vpath, copy, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&reg_lock);
}

void shim_dir_fd_forget(int fd)
{
	if (!shim_maybe_view_fd(fd))
		return;
	pthread_mutex_lock(&reg_lock);
	if (regs[fd].vpath)
		reg_drop(fd);
	pthread_mutex_unlock(&reg_lock);
}

void shim_dir_fd_dup(int oldfd, int newfd)
{
	char vpath[PATH_MAX];

	if (newfd == oldfd || !reg_get(oldfd, vpath, sizeof(vpath)))
		return;
	reg_put(newfd, vpath);
}

/* A descriptor of an object of its own (for the inode check). */
static int placeholder(bool cloexec)
{
	int fd = memfd_create("softhca-view", cloexec ? MFD_CLOEXEC : 0);
	int p[2];

	if (fd >= 0)
		return fd;
	/* no memfd (seccomp): a pipe's read end is an inode of its own */
	if (pipe2(p, cloexec ? O_CLOEXEC : 0))
		return -errno;
	close(p[1]);
	return p[0];
}

int shim_dir_fd(const struct shca_vfs_node *dir, bool cloexec)
{
	int fd = placeholder(cloexec);

	if (fd >= 0)
		reg_put(fd, dir->path);
	return fd;
}

/* ------------------------------------------------------------------ */
/* Paths                                                               */

/* base + "/" + rel into out: false when it does not fit. */
static bool join(char *out, size_t len, const char *base, const char *rel)
{
	int n = snprintf(out, len, "%s/%s", base, rel);

	return n > 0 && (size_t)n < len;
}

int shim_resolve(int dirfd, const char *path, bool follow,
		 struct shim_res *r)
{
	char base[PATH_MAX];
	bool in_view_dir = false;
	ssize_t n;
	int ret;

	if (!path || !*path)
		return SHIM_PASS;
	if (path[0] == '/') {
		if (strlen(path) >= sizeof(r->abs))
			return SHIM_PASS;
		memcpy(r->abs, path, strlen(path) + 1);
	} else {
		if (dirfd != AT_FDCWD && reg_get(dirfd, base, sizeof(base))) {
			in_view_dir = true;
		} else if (!shca_vfs_maybe(path)) {
			return SHIM_PASS;
		} else if (dirfd == AT_FDCWD) {
			if (!getcwd(base, sizeof(base)))
				return SHIM_PASS;
		} else {
			char proc[64];

			snprintf(proc, sizeof(proc), "/proc/self/fd/%d", dirfd);
			n = shca_next_readlink(proc, base, sizeof(base) - 1);
			if (n <= 0 || base[0] != '/')
				return SHIM_PASS;
			base[n] = '\0';
		}
		if (!join(r->abs, sizeof(r->abs), base, path))
			return in_view_dir ? -ENAMETOOLONG : SHIM_PASS;
	}
	ret = shca_vfs_resolve(r->abs, follow, &r->node, r->real,
			       sizeof(r->real));
	switch (ret) {
	case SHCA_VFS_FOUND:
		return SHIM_NODE;
	case SHCA_VFS_REAL:
		return SHIM_REAL;
	case SHCA_VFS_NOT_OURS:
		if (!in_view_dir)
			return SHIM_PASS;
		/* ".." out of a view directory: its descriptor is a
		 * stand-in, the kernel cannot resolve from it */
		memcpy(r->real, r->abs, strlen(r->abs) + 1);
		return SHIM_REAL;
	}
	return ret;
}

int shim_lookup(int dirfd, const char *path, bool follow,
		struct shim_res **rp)
{
	struct shim_res *r = malloc(sizeof(*r));
	int ret;

	*rp = NULL;
	if (!r)
		return -ENOMEM;
	ret = shim_resolve(dirfd, path, follow, r);
	if (ret == SHIM_NODE || ret == SHIM_REAL)
		*rp = r;
	else
		free(r);
	return ret;
}

int shim_dirfd_node(int fd, struct shim_res **rp)
{
	char vpath[PATH_MAX];
	int ret;

	*rp = NULL;
	if (!reg_get(fd, vpath, sizeof(vpath)))
		return 0;
	ret = shim_lookup(AT_FDCWD, vpath, true, rp);
	if (ret == SHIM_NODE)
		return 1;
	if (*rp) {
		free(*rp);
		*rp = NULL;
	}
	return ret < 0 ? ret : -ENOENT;
}

/* ------------------------------------------------------------------ */
/* stat data                                                           */

/* The device of the file system a view tree stands in: /sys's, /dev's. */
static dev_t tree_dev(bool dev_tree)
{
	static dev_t devs[2];
	static int known[2];
	int i = dev_tree;
	struct stat st;

	if (__atomic_load_n(&known[i], __ATOMIC_ACQUIRE))
		return devs[i];
	if (shca_next_fstatat(AT_FDCWD, dev_tree ? "/dev" : "/sys", &st, 0))
		return 0;
	devs[i] = st.st_dev;
	__atomic_store_n(&known[i], 1, __ATOMIC_RELEASE);
	return devs[i];
}

/* When the host booted (/proc/stat btime), as sysfs times its nodes. */
static time_t boot_time(void)
{
	static time_t t;
	static int known;
	char buf[8192], *p;
	ssize_t n = -1;
	int fd;

	if (__atomic_load_n(&known, __ATOMIC_ACQUIRE))
		return t;
	fd = shca_next_openat(AT_FDCWD, "/proc/stat", O_RDONLY | O_CLOEXEC, 0);
	if (fd >= 0) {
		n = read(fd, buf, sizeof(buf) - 1);
		close(fd);
	}
	if (n > 0) {
		buf[n] = '\0';
		p = strstr(buf, "\nbtime ");
		if (p)
			t = (time_t)strtoll(p + 7, NULL, 10);
	}
	__atomic_store_n(&known, 1, __ATOMIC_RELEASE);
	return t;
}

void shim_fill_stat(const struct shca_vfs_node *n, struct stat *st)
{
	static const mode_t types[] = {
		[SHCA_VFS_DIR] = S_IFDIR, [SHCA_VFS_FILE] = S_IFREG,
		[SHCA_VFS_LINK] = S_IFLNK, [SHCA_VFS_CHR] = S_IFCHR,
	};
	char target[PATH_MAX];
	time_t t = boot_time();
	int len;

	memset(st, 0, sizeof(*st));
	st->st_dev = tree_dev(n->dev_tree);
	st->st_ino = (ino_t)n->ino;
	st->st_mode = types[n->type] | n->mode;
	st->st_nlink = n->type == SHCA_VFS_DIR ? 2 : 1;
	st->st_uid = 0;
	st->st_gid = 0;
	if (n->type == SHCA_VFS_CHR)
		st->st_rdev = makedev(n->rdev_major, n->rdev_minor);
	if (n->type == SHCA_VFS_FILE)
		st->st_size = 4096;		/* sysfs: a page */
	if (n->type == SHCA_VFS_LINK) {
		len = shca_vfs_readlink(n, target, sizeof(target));
		st->st_size = len > 0 ? len : 0;
	}
	st->st_blksize = 4096;
	st->st_blocks = 0;
	st->st_atim.tv_sec = t;
	st->st_mtim.tv_sec = t;
	st->st_ctim.tv_sec = t;
}

int shim_access(const struct shca_vfs_node *n, int mode, bool effective)
{
	uid_t uid = effective ? geteuid() : getuid();
	unsigned int perm;

	if (mode == F_OK)
		return 0;
	if (uid == 0) {
		/* root: read and write; execute where anyone may */
		perm = 06 | ((n->mode & 0111) ? 01 : 0);
	} else {
		/* root owns every node: the "other" bits */
		perm = n->mode & 07;
	}
	if (((mode & R_OK) && !(perm & 04)) ||
	    ((mode & W_OK) && !(perm & 02)) ||
	    ((mode & X_OK) && !(perm & 01)))
		return -EACCES;
	return 0;
}

/* ------------------------------------------------------------------ */
/* Files                                                               */

int shim_file_fd(const struct shca_vfs_node *n, bool cloexec)
{
	char page[4096];
	unsigned int seals = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE |
			     F_SEAL_SEAL;
	int len, fd, p[2], e;
	ssize_t w;

	len = shca_vfs_read(n, page, sizeof(page));
	if (len == -EINVAL) {
		/* sysfs opens the file and fails its read with EINVAL; so
		 * does read on an epoll descriptor */
		fd = epoll_create1(cloexec ? EPOLL_CLOEXEC : 0);
		return fd < 0 ? -errno : fd;
	}
	if (len < 0)
		return len;
	fd = memfd_create("softhca-sysfs", MFD_ALLOW_SEALING |
						   (cloexec ? MFD_CLOEXEC : 0));
	if (fd < 0) {
		/* no memfd (seccomp): a pipe holds a page */
		if (pipe2(p, cloexec ? O_CLOEXEC : 0))
			return -errno;
		w = write(p[1], page, (size_t)len);
		close(p[1]);
		if (w != len) {
			close(p[0]);
			return -EIO;
		}
		return p[0];
	}
	w = write(fd, page, (size_t)len);
	if (w != len || lseek(fd, 0, SEEK_SET) ||
	    fcntl(fd, F_ADD_SEALS, seals)) {
		e = w < 0 ? errno : EIO;
		close(fd);
		return -e;
	}
	return fd;
}
