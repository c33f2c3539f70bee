// SPDX-License-Identifier: MIT
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "../common/log.h"
#include "../common/util.h"
#include "arena.h"
#include "host.h"
#include "rundir.h"

#define HOST_MAGIC	0x54534f4841484353ull	/* "SHCAHOST" */
#define HOST_VERSION	2	/* 2: owner, namespace, in the private dir */
#define HOST_NAME	"host-v2"
#define ATOMIC_STRIPES	1024

struct host_mcast_entry {
	uint8_t gid[16];
	int32_t slot;		/* -1: free */
	uint32_t qpn;
};

struct host_shm {
	uint64_t magic;		/* written last by the creator */
	uint32_t version;
	uint32_t uid;		/* the user it belongs to */
	uint64_t cookie;	/* the network namespace's (rundir.h) */
	uint8_t boot_id[16];	/* ... of this boot */
	uint64_t size;		/* sizeof(struct host_shm) */
	struct shca_plock mcast_lock;
	struct host_mcast_entry mcast[SHCA_HOST_MCAST_ENTRIES];
	struct shca_plock atomic[ATOMIC_STRIPES];
};

static pthread_mutex_t host_lock = PTHREAD_MUTEX_INITIALIZER;
static struct host_shm *host;
static int host_fd = -1;	/* holds LOCK_SH while we use it */
static pid_t host_pid;

/*
 * The table is the file host-v2 in the user's private directory for the
 * network namespace (rundir.h): another user can neither make it nor open
 * it, and a new namespace gets a new directory (its cookie is never
 * reused within a boot), so nothing is adopted.  Every user holds
 * flock(LOCK_SH) on it; whoever gets LOCK_EX|LOCK_NB finds nobody else
 * there (the last one out, or one after a crash: the kernel releases the
 * locks of a dead process) and removes it.  A table is published (linked
 * under its name) only once it is initialised and locked by its maker, so
 * a table under the name with no lock holder is always a stale one.
 */

static void host_refused(const char *dir, const char *why)
{
	static unsigned int logged;

	shca_stat_add(shca_stat_proc(), SHCA_STAT_HOST_TABLE_REFUSED, 1);
	if (__atomic_fetch_add(&logged, 1, __ATOMIC_RELAXED) < 4)
		shca_err("refusing host table %s/" HOST_NAME ": %s; replacing "
			 "it with one of ours", dir, why);
}

/* Is the name still the file we hold? */
static bool same_file(int dirfd, int fd)
{
	struct stat a, b;

	return !fstatat(dirfd, HOST_NAME, &a, AT_SYMLINK_NOFOLLOW) &&
	       !fstat(fd, &b) && a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

/* Ours, private, one name, the right size: NULL, or what is wrong. */
static const char *check_file(int fd)
{
	struct stat st;

	if (fstat(fd, &st) || !S_ISREG(st.st_mode))
		return "not a regular file";
	if (st.st_uid != getuid())
		return "another user's file";
	if (st.st_mode & 077)
		return "readable or writable by others";
	if (st.st_nlink != 1)
		return "a file with other names (hard links)";
	if ((size_t)st.st_size != sizeof(struct host_shm))
		return "of another size";
	return NULL;
}

static bool header_ok(const struct host_shm *h, const struct shca_rundir *d)
{
	return __atomic_load_n(&h->magic, __ATOMIC_ACQUIRE) == HOST_MAGIC &&
	       h->version == HOST_VERSION && h->uid == getuid() &&
	       h->cookie == d->cookie &&
	       !memcmp(h->boot_id, d->boot_id, sizeof(h->boot_id)) &&
	       h->size == sizeof(*h);
}

static struct host_shm *map_fd(int fd)
{
	void *h = mmap(NULL, sizeof(struct host_shm), PROT_READ | PROT_WRITE,
		       MAP_SHARED, fd, 0);

	return h == MAP_FAILED ? NULL : h;
}

/*
 * Give the made table (tmp) its name, atomically and without a second
 * name: 0 or -errno (-EEXIST: another process published one first).
 * linkat and then unlinkat left the table with two names in between; a
 * process joining then took it for a hard link (check_file), removed the
 * name and made a table of its own, and the two served their atomics
 * under different locks (traffic_test_mapped_atomic under TSan: a
 * FETCH_ADD result below an earlier one).
 */
static int host_publish(int dirfd, const char *tmp)
{
	if (!renameat2(dirfd, tmp, dirfd, HOST_NAME, RENAME_NOREPLACE))
		return 0;
	if (errno != EINVAL && errno != ENOSYS)
		return -errno;
	/* a file system without RENAME_NOREPLACE: two names for a moment */
	if (linkat(dirfd, tmp, dirfd, HOST_NAME, 0))
		return -errno;
	unlinkat(dirfd, tmp, 0);
	return 0;
}

/* Make, initialise, lock and publish a table: 0 or -errno (-EEXIST:
 * another process published one first). */
static int host_create(const struct shca_rundir *d)
{
	char tmp[32];
	struct host_shm *h;
	int fd, i, ret;

	snprintf(tmp, sizeof(tmp), HOST_NAME ".%d", (int)shca_getpid());
	unlinkat(d->fd, tmp, 0);	/* a dead process's with our pid */
	fd = openat(d->fd, tmp, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW |
				O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	if (ftruncate(fd, sizeof(*h)) || flock(fd, LOCK_SH)) {
		ret = -errno;
		goto err;
	}
	h = map_fd(fd);
	if (!h) {
		ret = -errno;
		goto err;
	}
	shca_plock_init(&h->mcast_lock);
	for (i = 0; i < SHCA_HOST_MCAST_ENTRIES; i++)
		h->mcast[i].slot = -1;
	for (i = 0; i < ATOMIC_STRIPES; i++)
		shca_plock_init(&h->atomic[i]);
	h->version = HOST_VERSION;
	h->uid = getuid();
	h->cookie = d->cookie;
	memcpy(h->boot_id, d->boot_id, sizeof(h->boot_id));
	h->size = sizeof(*h);
	__atomic_store_n(&h->magic, HOST_MAGIC, __ATOMIC_RELEASE);
	ret = host_publish(d->fd, tmp);
	if (ret) {
		munmap(h, sizeof(*h));
		goto err;
	}
	shca_rundir_mark_used();
	host = h;
	host_fd = fd;
	return 0;
err:
	unlinkat(d->fd, tmp, 0);
	close(fd);
	return ret;
}

/* Join the table under the name (or make one): 0, -EAGAIN to look again,
 * or -errno. */
static int host_join(const struct shca_rundir *d)
{
	struct host_shm *h;
	const char *why;
	int fd, ret;

	fd = openat(d->fd, HOST_NAME, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 && errno == ENOENT) {
		ret = host_create(d);
		return ret == -EEXIST ? -EAGAIN : ret;
	}
	if (fd < 0) {
		/* a symlink (ELOOP) or a file we may not open (EACCES): not
		 * ours to use; the directory is ours, so the name is */
		ret = -errno;
		if (ret != -ELOOP && ret != -EACCES && ret != -EPERM)
			return ret;
		host_refused(d->path, ret == -ELOOP ? "a symlink" :
			     "a file we may not open");
		unlinkat(d->fd, HOST_NAME, 0);
		return -EAGAIN;
	}
	why = check_file(fd);
	if (why) {
		host_refused(d->path, why);
		if (same_file(d->fd, fd))
			unlinkat(d->fd, HOST_NAME, 0);
		close(fd);
		return -EAGAIN;
	}
	if (!flock(fd, LOCK_EX | LOCK_NB)) {
		/* nobody holds it: left by processes that died */
		shca_dbg("removing a host table nobody uses");
		if (same_file(d->fd, fd))
			unlinkat(d->fd, HOST_NAME, 0);
		close(fd);
		return -EAGAIN;
	}
	while ((ret = flock(fd, LOCK_SH)) && errno == EINTR)
		;
	/* removed by its last user between our open and our lock? */
	if (ret || !same_file(d->fd, fd)) {
		close(fd);
		return ret ? -errno : -EAGAIN;
	}
	h = map_fd(fd);
	if (!h) {
		ret = -errno;
		close(fd);
		return ret;
	}
	if (!header_ok(h, d)) {
		/* ours, in use, and wrong: made by something else than
		 * this version of softhca; not replaced under its users */
		shca_stat_add(shca_stat_proc(), SHCA_STAT_HOST_TABLE_REFUSED,
			      1);
		shca_err("host table %s/" HOST_NAME " has a header of another "
			 "kind: refused", d->path);
		munmap(h, sizeof(*h));
		close(fd);
		return -EPROTO;
	}
	shca_rundir_mark_used();
	host = h;
	host_fd = fd;
	return 0;
}

static struct host_shm *host_map(void)
{
	const struct shca_rundir *d;
	int tries, ret = -EAGAIN;

	for (tries = 0; tries < 16 && ret == -EAGAIN; tries++) {
		d = shca_rundir_get(true);
		shca_stat_add(shca_stat_proc(), SHCA_STAT_SHM_DIR_REFUSED,
			      shca_rundir_take_refusals());
		if (!d)
			return NULL;
		ret = host_join(d);
		if (ret == -ENOENT) {
			/* the directory went away as we came */
			shca_rundir_reset();
			ret = -EAGAIN;
		}
	}
	if (ret) {
		shca_err("no host table: %s", strerror(-ret));
		errno = ret == -EAGAIN ? EBUSY : -ret;
		return NULL;
	}
	return host;
}

static struct host_shm *host_get(void)
{
	struct host_shm *h;

	pthread_mutex_lock(&host_lock);
	if (host && host_pid != shca_getpid()) {
		/* a forked child: the parent's lock is on the parent's open
		 * file; the child joins on its own */
		munmap(host, sizeof(*host));
		close(host_fd);
		host = NULL;
		host_fd = -1;
	}
	if (!host && host_map())
		host_pid = shca_getpid();
	h = host;
	pthread_mutex_unlock(&host_lock);
	return h;
}

/* The last user removes the table (a crash leaves it to the next one). */
__attribute__((destructor)) static void host_exit(void)
{
	const struct shca_rundir *d;

	if (!host || host_fd < 0 || host_pid != shca_getpid())
		return;
	if (!flock(host_fd, LOCK_EX | LOCK_NB)) {
		d = shca_rundir_get(false);
		if (d && same_file(d->fd, host_fd))
			unlinkat(d->fd, HOST_NAME, 0);
	}
	close(host_fd);
	host_fd = -1;
}

static unsigned int stripe(pid_t pid, uint64_t addr)
{
	uint64_t x = (addr >> 3) ^ ((uint64_t)(uint32_t)pid << 29);

	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	return (unsigned int)(x % ATOMIC_STRIPES);
}

int shca_host_atomic_lock(pid_t pid, uint64_t addr)
{
	struct host_shm *h = host_get();

	if (!h)
		return -errno;
	shca_plock_lock(&h->atomic[stripe(pid, addr)]);
	return 0;
}

void shca_host_atomic_unlock(pid_t pid, uint64_t addr)
{
	shca_plock_unlock(&host->atomic[stripe(pid, addr)]);
}

int shca_host_mcast_attach(const union ibv_gid *mgid, int slot, uint32_t qpn)
{
	struct host_shm *h = host_get();
	int i, free_i = -1, ret = 0;

	if (!h)
		return -errno;
	shca_plock_lock(&h->mcast_lock);
	for (i = 0; i < SHCA_HOST_MCAST_ENTRIES; i++) {
		struct host_mcast_entry *e = &h->mcast[i];

		if (e->slot < 0) {
			if (free_i < 0)
				free_i = i;
			continue;
		}
		if (e->slot == slot && e->qpn == qpn &&
		    !memcmp(e->gid, mgid->raw, 16))
			goto out;
	}
	if (free_i < 0) {
		ret = -ENOMEM;
		goto out;
	}
	memcpy(h->mcast[free_i].gid, mgid->raw, 16);
	h->mcast[free_i].qpn = qpn;
	h->mcast[free_i].slot = slot;
out:
	shca_plock_unlock(&h->mcast_lock);
	return ret;
}

void shca_host_mcast_detach(const union ibv_gid *mgid, int slot, uint32_t qpn)
{
	struct host_shm *h = host_get();
	int i;

	if (!h)
		return;
	shca_plock_lock(&h->mcast_lock);
	for (i = 0; i < SHCA_HOST_MCAST_ENTRIES; i++) {
		struct host_mcast_entry *e = &h->mcast[i];

		if (e->slot == slot && e->qpn == qpn &&
		    !memcmp(e->gid, mgid->raw, 16))
			e->slot = -1;
	}
	shca_plock_unlock(&h->mcast_lock);
}

int shca_host_mcast_members(const union ibv_gid *mgid,
			    struct shca_mcast_member *out, int max)
{
	struct host_shm *h = host_get();
	int i, n = 0;

	if (!h)
		return 0;
	shca_plock_lock(&h->mcast_lock);
	for (i = 0; i < SHCA_HOST_MCAST_ENTRIES && n < max; i++) {
		struct host_mcast_entry *e = &h->mcast[i];

		if (e->slot >= 0 && !memcmp(e->gid, mgid->raw, 16)) {
			out[n].slot = e->slot;
			out[n].qpn = e->qpn;
			n++;
		}
	}
	shca_plock_unlock(&h->mcast_lock);
	return n;
}
