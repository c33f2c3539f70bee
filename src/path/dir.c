// SPDX-License-Identifier: MIT
/*
 * Listing the view: opendir, fdopendir, readdir (and _r, 64), closedir,
 * dirfd, rewinddir, telldir, seekdir, scandir.
 *
 * A directory stream of the view is one of the slots below, handed out as
 * the DIR pointer: every function that takes a DIR tells a slot from the
 * C library's streams by its address alone.  A slot holds the listing
 * taken when the directory was opened ("." and ".." first, as sysfs
 * lists them) and the descriptor that stands for the directory.
 *
 * /dev and /sys/class are real directories that would not list the
 * view's roots: their streams are wrapped in a slot too, which reads the
 * real stream to its end and then adds "infiniband" (and
 * "infiniband_verbs") unless the real directory had them.
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "shim.h"

#define NSLOTS 128		/* view streams open at once, per process */

struct vdir {
	int used;			/* atomic: slot taken */
	pthread_mutex_t lock;		/* one reader at a time */
	int fd;				/* stand-in (view), or -1 */
	DIR *real;			/* merge: the real directory's stream */
	const char *const *extra;	/* merge: names to add */
	unsigned int seen;		/* merge: extras the real one had */
	struct shca_vfs_dirent *ents;	/* view: the listing, after . .. */
	int n;
	long pos;			/* next entry: 0 ".", 1 "..", 2... */
	uint64_t ino, parent_ino;
	struct dirent64 de;		/* what readdir returns */
};

static struct vdir slots[NSLOTS] = {
	[0 ... NSLOTS - 1] = { .lock = PTHREAD_MUTEX_INITIALIZER, .fd = -1 },
};

static struct vdir *as_vdir(void *d)
{
	char *p = d;

	if (p < (char *)slots || p >= (char *)(slots + NSLOTS))
		return NULL;
	return (struct vdir *)d;
}

static struct vdir *slot_get(void)
{
	int i, zero;

	for (i = 0; i < NSLOTS; i++) {
		zero = 0;
		if (__atomic_compare_exchange_n(&slots[i].used, &zero, 1, false,
						__ATOMIC_ACQUIRE,
						__ATOMIC_RELAXED))
			return &slots[i];
	}
	errno = EMFILE;
	return NULL;
}

static void slot_put(struct vdir *v)
{
	free(v->ents);
	v->ents = NULL;
	v->n = 0;
	v->pos = 0;
	v->fd = -1;
	v->real = NULL;
	v->extra = NULL;
	v->seen = 0;
	__atomic_store_n(&v->used, 0, __ATOMIC_RELEASE);
}

static uint64_t hash_path(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ull;

	while (*s)
		h = (h ^ (unsigned char)*s++) * 0x100000001b3ull;
	return h ? h : 1;
}

/* A stream over the view directory dir, reading through fd (taken). */
static DIR *view_stream(const struct shca_vfs_node *dir, int fd)
{
	struct vdir *v = slot_get();
	char parent[PATH_MAX], *slash;
	int n;

	if (!v)
		return NULL;
	n = shca_vfs_list(dir, &v->ents);
	if (n < 0) {
		slot_put(v);
		errno = -n;
		return NULL;
	}
	v->n = n;
	v->fd = fd;
	v->ino = dir->ino;
	snprintf(parent, sizeof(parent), "%s", dir->path);
	slash = strrchr(parent, '/');
	if (slash)
		*(slash == parent ? slash + 1 : slash) = '\0';
	v->parent_ino = hash_path(parent);
	return (DIR *)v;
}

static DIR *open_view_dir(const struct shca_vfs_node *dir)
{
	int fd, e;
	DIR *d;

	if (dir->type != SHCA_VFS_DIR) {
		errno = ENOTDIR;
		return NULL;
	}
	fd = shim_dir_fd(dir, true);
	if (fd < 0) {
		errno = -fd;
		return NULL;
	}
	d = view_stream(dir, fd);
	if (!d) {
		e = errno;
		shim_dir_fd_forget(fd);
		close(fd);
		errno = e;
	}
	return d;
}

/* "/dev", "/dev/", "/sys/class", "//sys/class/" ...: the real
 * directories that list the view's roots; NULL for any other. */
static const char *const *merge_names(const char *path)
{
	char norm[32];
	size_t n = 0;

	if (!path || path[0] != '/' || strlen(path) >= sizeof(norm))
		return NULL;
	for (; *path; path++)
		if (*path != '/' || !n || norm[n - 1] != '/')
			norm[n++] = *path;
	if (n > 1 && norm[n - 1] == '/')
		n--;
	norm[n] = '\0';
	return shca_vfs_extra_names(norm);
}

static DIR *merge_stream(DIR *real, const char *const *extra)
{
	struct vdir *v;

	if (!real)
		return NULL;
	v = slot_get();
	if (!v)
		return real;	/* the real listing alone, rather than none */
	v->real = real;
	v->extra = extra;
	return (DIR *)v;
}

SHIM DIR *opendir(const char *path)
{
	DIR *(*f)(const char *) = NEXT(opendir);
	const char *const *extra;
	struct shim_res *r;
	DIR *d;
	int ret, e;

	if (!f) {
		errno = ENOSYS;
		return NULL;
	}
	if (shca_vfs_maybe(path)) {
		ret = shim_lookup(AT_FDCWD, path, true, &r);
		if (ret == SHIM_NODE) {
			d = open_view_dir(&r->node);
			e = errno;
			free(r);
			errno = e;
			return d;
		}
		if (ret == SHIM_REAL) {
			d = f(r->real);
			e = errno;
			free(r);
			errno = e;
			return d;
		}
		if (ret < 0) {
			errno = -ret;
			return NULL;
		}
	}
	extra = merge_names(path);
	if (extra)
		return merge_stream(f(path), extra);
	return f(path);
}

SHIM DIR *fdopendir(int fd)
{
	DIR *(*f)(int) = NEXT(fdopendir);
	struct shim_res *r;
	DIR *d;
	int ret, e;

	ret = shim_dirfd_node(fd, &r);
	if (ret < 0) {
		errno = -ret;
		return NULL;
	}
	if (ret) {
		if (r->node.type != SHCA_VFS_DIR) {
			free(r);
			errno = ENOTDIR;
			return NULL;
		}
		d = view_stream(&r->node, fd);
		e = errno;
		free(r);
		errno = e;
		return d;
	}
	if (!f) {
		errno = ENOSYS;
		return NULL;
	}
	return f(fd);
}

/* The next entry of a view stream (v->lock held), or NULL at the end. */
static struct dirent64 *view_next(struct vdir *v)
{
	struct dirent64 *de = &v->de;
	const char *name;
	unsigned char type;
	uint64_t ino;

	if (v->pos < 0 || v->pos >= (long)v->n + 2)
		return NULL;
	if (v->pos < 2) {
		name = v->pos ? ".." : ".";
		type = DT_DIR;
		ino = v->pos ? v->parent_ino : v->ino;
	} else {
		name = v->ents[v->pos - 2].name;
		type = v->ents[v->pos - 2].d_type;
		ino = v->ents[v->pos - 2].ino;
	}
	memset(de, 0, offsetof(struct dirent64, d_name));
	de->d_ino = ino;
	de->d_off = v->pos + 1;
	de->d_reclen = sizeof(*de);
	de->d_type = type;
	snprintf(de->d_name, sizeof(de->d_name), "%s", name);
	v->pos++;
	return de;
}

/* The next entry of a merged stream: the real ones, then the extras. */
static struct dirent64 *merge_next(struct vdir *v)
{
	struct dirent64 *(*f)(DIR *) = NEXT(readdir64);
	struct dirent64 *de;
	unsigned int i;

	if (f && v->pos == 0) {
		de = f(v->real);
		if (de) {
			for (i = 0; v->extra[i]; i++)
				if (!strcmp(de->d_name, v->extra[i]))
					v->seen |= 1u << i;
			return de;
		}
		v->pos = 1;
	}
	for (i = (unsigned int)v->pos - 1; v->extra[i]; i++) {
		v->pos++;
		if (v->seen & (1u << i))
			continue;
		de = &v->de;
		memset(de, 0, offsetof(struct dirent64, d_name));
		de->d_ino = hash_path(v->extra[i]);
		de->d_reclen = sizeof(*de);
		de->d_type = DT_DIR;
		snprintf(de->d_name, sizeof(de->d_name), "%s", v->extra[i]);
		return de;
	}
	return NULL;
}

static struct dirent64 *vdir_next(struct vdir *v)
{
	return v->real ? merge_next(v) : view_next(v);
}

SHIM struct dirent64 *readdir64(DIR *d)
{
	struct dirent64 *(*f)(DIR *);
	struct vdir *v = as_vdir(d);
	struct dirent64 *de;

	if (v) {
		pthread_mutex_lock(&v->lock);
		de = vdir_next(v);
		pthread_mutex_unlock(&v->lock);
		return de;
	}
	f = NEXT(readdir64);
	return f ? f(d) : NULL;
}

/* On this ABI struct dirent is struct dirent64. */
_Static_assert(sizeof(struct dirent) == sizeof(struct dirent64),
	       "dirent and dirent64 differ");

SHIM struct dirent *readdir(DIR *d)
{
	struct dirent *(*f)(DIR *);

	if (as_vdir(d))
		return (struct dirent *)readdir64(d);
	f = NEXT(readdir);
	return f ? f(d) : NULL;
}

/* deprecated for programs, still called by some (UCX's libucs) */
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

SHIM int readdir64_r(DIR *d, struct dirent64 *entry,
		     struct dirent64 **result)
{
	int (*f)(DIR *, struct dirent64 *, struct dirent64 **);
	struct vdir *v = as_vdir(d);
	struct dirent64 *de;

	if (v) {
		pthread_mutex_lock(&v->lock);
		de = vdir_next(v);
		if (de)
			memcpy(entry, de, sizeof(*entry));
		pthread_mutex_unlock(&v->lock);
		*result = de ? entry : NULL;
		return 0;
	}
	f = NEXT(readdir64_r);
	return f ? f(d, entry, result) : ENOSYS;
}

SHIM int readdir_r(DIR *d, struct dirent *entry, struct dirent **result)
{
	int (*f)(DIR *, struct dirent *, struct dirent **);

	if (as_vdir(d))
		return readdir64_r(d, (struct dirent64 *)entry,
				   (struct dirent64 **)result);
	f = NEXT(readdir_r);
	return f ? f(d, entry, result) : ENOSYS;
}

SHIM int closedir(DIR *d)
{
	int (*f)(DIR *) = NEXT(closedir);
	struct vdir *v = as_vdir(d);
	int ret = 0;

	if (!v)
		return f ? f(d) : shim_fail(ENOSYS);
	pthread_mutex_lock(&v->lock);
	if (v->real) {
		ret = f ? f(v->real) : shim_fail(ENOSYS);
	} else if (v->fd >= 0) {
		shim_dir_fd_forget(v->fd);
		ret = close(v->fd);
	}
	slot_put(v);
	pthread_mutex_unlock(&v->lock);
	return ret;
}

SHIM int dirfd(DIR *d)
{
	int (*f)(DIR *) = NEXT(dirfd);
	struct vdir *v = as_vdir(d);

	if (v && !v->real)
		return v->fd;
	if (!f)
		return shim_fail(ENOSYS);
	return f(v ? v->real : d);
}

SHIM void rewinddir(DIR *d)
{
	void (*f)(DIR *) = NEXT(rewinddir);
	struct vdir *v = as_vdir(d);

	if (!v) {
		if (f)
			f(d);
		return;
	}
	pthread_mutex_lock(&v->lock);
	if (v->real && f)
		f(v->real);
	v->pos = 0;
	v->seen = 0;
	pthread_mutex_unlock(&v->lock);
}

/*
 * Positions: a view stream's is its index; a merged stream has the C
 * library's while it reads the real directory, and none (-1, EINVAL)
 * once it adds its own names.
 */
SHIM long telldir(DIR *d)
{
	long (*f)(DIR *) = NEXT(telldir);
	struct vdir *v = as_vdir(d);
	long pos;

	if (!v)
		return f ? f(d) : shim_fail(ENOSYS);
	pthread_mutex_lock(&v->lock);
	if (!v->real)
		pos = v->pos;
	else if (v->pos == 0 && f)
		pos = f(v->real);
	else
		pos = shim_fail(EINVAL);
	pthread_mutex_unlock(&v->lock);
	return pos;
}

SHIM void seekdir(DIR *d, long pos)
{
	void (*f)(DIR *, long) = NEXT(seekdir);
	struct vdir *v = as_vdir(d);

	if (!v) {
		if (f)
			f(d, pos);
		return;
	}
	pthread_mutex_lock(&v->lock);
	if (!v->real) {
		v->pos = pos;
	} else if (f && pos >= 0) {
		f(v->real, pos);
		v->pos = 0;
		v->seen = 0;
	}
	pthread_mutex_unlock(&v->lock);
}

/* ------------------------------------------------------------------ */
/* scandir                                                             */

typedef int (*scan_filter)(const struct dirent *);
typedef int (*scan_compar)(const struct dirent **, const struct dirent **);

/* scandir over one of our streams (taken and closed): as glibc's. */
static int scan_stream(DIR *d, struct dirent ***list, scan_filter filter,
		       scan_compar compar)
{
	struct dirent **v = NULL, **nv, *de, *copy;
	size_t n = 0, cap = 0;
	int e;

	while ((de = readdir(d))) {
		if (filter && !filter(de))
			continue;
		if (n == cap) {
			cap = cap ? 2 * cap : 16;
			nv = realloc(v, cap * sizeof(*v));
			if (!nv)
				goto nomem;
			v = nv;
		}
		copy = malloc(sizeof(*copy));
		if (!copy)
			goto nomem;
		memcpy(copy, de, sizeof(*copy));
		v[n++] = copy;
	}
	closedir(d);
	if (compar && n)
		qsort(v, n, sizeof(*v),
		      (int (*)(const void *, const void *))compar);
	*list = v;
	return (int)n;
nomem:
	e = ENOMEM;
	while (n)
		free(v[--n]);
	free(v);
	closedir(d);
	return shim_fail(e);
}

SHIM int scandir(const char *path, struct dirent ***list, scan_filter filter,
		 scan_compar compar)
{
	int (*f)(const char *, struct dirent ***, scan_filter, scan_compar);
	DIR *d;

	if (shca_vfs_maybe(path) || merge_names(path)) {
		d = opendir(path);
		if (!d)
			return -1;
		if (as_vdir(d))
			return scan_stream(d, list, filter, compar);
		closedir(d);
	}
	f = NEXT(scandir);
	return f ? f(path, list, filter, compar) : shim_fail(ENOSYS);
}

SHIM int scandir64(const char *path, struct dirent64 ***list,
		   int (*filter)(const struct dirent64 *),
		   int (*compar)(const struct dirent64 **,
				 const struct dirent64 **))
{
	return scandir(path, (struct dirent ***)list, (scan_filter)filter,
		       (scan_compar)compar);
}
