// SPDX-License-Identifier: MIT
/*
 * The private directory of this user's same-host names (rundir.h).
 *
 * Every directory on the way is opened with O_NOFOLLOW and checked on its
 * descriptor (fstat), never by a second look-up of the path: owner ours,
 * no access for group or others.  A directory that fails is refused: not
 * used, counted, logged with what to do.
 *
 * The base directory's name is softhca-<uid>-<tag>: the tag is SipHash-2-4
 * (Aumasson and Bernstein's PRF, written here from the paper) of the uid,
 * the boot id and a candidate number n under the user's key, so the name
 * of the next boot cannot be guessed from this one's.  n = 1..SPARES-1
 * give spare names for the case where another user took a name of ours
 * after it was removed (a tmpfs cleaner, systemd-logind's RemoveIPC):
 * every process takes the first candidate that is ours, else makes the
 * first that is free.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include "../common/log.h"
#include "../common/util.h"
#include "rundir.h"

#ifndef SO_NETNS_COOKIE
#define SO_NETNS_COOKIE 71
#endif

#define SPARES		4
#define KEY_LEN		16

static pthread_mutex_t rundir_lock = PTHREAD_MUTEX_INITIALIZER;
static struct shca_rundir the_dir = { .fd = -1 };
static int base_fd = -1;
static char net_name[40];
static pid_t dir_pid;
static bool dir_used;
static unsigned int refusals;

/* ------------------------------------------------------------------ */
/* SipHash-2-4                                                        */

static uint64_t rotl(uint64_t x, int b)
{
	return (x << b) | (x >> (64 - b));
}

#define SIPROUND                                                  \
	do {                                                      \
		v0 += v1; v1 = rotl(v1, 13); v1 ^= v0;            \
		v0 = rotl(v0, 32);                                \
		v2 += v3; v3 = rotl(v3, 16); v3 ^= v2;            \
		v0 += v3; v3 = rotl(v3, 21); v3 ^= v0;            \
		v2 += v1; v1 = rotl(v1, 17); v1 ^= v2;            \
		v2 = rotl(v2, 32);                                \
	} while (0)

static uint64_t le64(const uint8_t *p, size_t n)
{
	uint64_t v = 0;
	size_t i;

	for (i = 0; i < n; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

uint64_t shca_siphash(const uint8_t key[16], const void *data, size_t len)
{
	const uint8_t *p = data;
	uint64_t k0 = le64(key, 8), k1 = le64(key + 8, 8), m;
	uint64_t v0 = k0 ^ 0x736f6d6570736575ull;
	uint64_t v1 = k1 ^ 0x646f72616e646f6dull;
	uint64_t v2 = k0 ^ 0x6c7967656e657261ull;
	uint64_t v3 = k1 ^ 0x7465646279746573ull;
	size_t i;

	for (i = 0; i + 8 <= len; i += 8) {
		m = le64(p + i, 8);
		v3 ^= m;
		SIPROUND;
		SIPROUND;
		v0 ^= m;
	}
	m = le64(p + i, len - i) | (uint64_t)(len & 0xff) << 56;
	v3 ^= m;
	SIPROUND;
	SIPROUND;
	v0 ^= m;
	v2 ^= 0xff;
	SIPROUND;
	SIPROUND;
	SIPROUND;
	SIPROUND;
	return v0 ^ v1 ^ v2 ^ v3;
}

/* ------------------------------------------------------------------ */
/* Checks                                                             */

static void refuse(const char *what, const char *why, const char *hint)
{
	static unsigned int logged;

	__atomic_add_fetch(&refusals, 1, __ATOMIC_RELAXED);
	if (__atomic_fetch_add(&logged, 1, __ATOMIC_RELAXED) < 4)
		shca_err("refusing %s: %s%s%s", what, why, hint ? "; " : "",
			 hint ? hint : "");
}

/* Ours and private: owner uid, a directory, no group/other access. */
static int check_private_dir(int fd, const char *what)
{
	struct stat st;
	char why[96];

	if (fstat(fd, &st))
		return -errno;
	if (!S_ISDIR(st.st_mode))
		snprintf(why, sizeof(why), "not a directory");
	else if (st.st_uid != getuid())
		snprintf(why, sizeof(why), "owned by uid %u, not by us",
			 (unsigned int)st.st_uid);
	else if (st.st_mode & 077)
		snprintf(why, sizeof(why), "mode %04o, not 0700",
			 (unsigned int)(st.st_mode & 07777));
	else
		return 0;
	refuse(what, why, "another user may have made it first (see "
	       "docs/security.md, \"Same host\")");
	return -EPERM;
}

/*
 * Open (and make, if create) the private directory name under dirfd: the
 * descriptor, or -errno (-EPERM when refused).
 */
static int open_private(int dirfd, const char *parent, const char *name,
			bool create)
{
	char what[192];
	int fd, ret;

	if (create && mkdirat(dirfd, name, 0700) && errno != EEXIST)
		return -errno;
	fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
				 O_CLOEXEC);
	snprintf(what, sizeof(what), "%s/%s", parent, name);
	if (fd < 0) {
		ret = -errno;
		/* a symlink (ELOOP) or a file (ENOTDIR) in its place */
		if (ret == -ELOOP || ret == -ENOTDIR) {
			refuse(what, "a symlink or a file, not our directory",
			       NULL);
			return -EPERM;
		}
		return ret;
	}
	ret = check_private_dir(fd, what);
	if (ret) {
		close(fd);
		return ret;
	}
	return fd;
}

/* ------------------------------------------------------------------ */
/* The key, the boot id, the namespace                                 */

/* The home directory of our uid (from the password database, so that
 * every process of the user agrees), if it is ours and not writable by
 * others: a descriptor, or -1. */
static int open_home(void)
{
	struct passwd pw, *res = NULL;
	struct stat st;
	char buf[4096];
	int fd;

	if (getpwuid_r(getuid(), &pw, buf, sizeof(buf), &res) || !res ||
	    !pw.pw_dir || pw.pw_dir[0] != '/')
		return -1;
	fd = open(pw.pw_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	if (fstat(fd, &st) || st.st_uid != getuid() || (st.st_mode & 022)) {
		close(fd);
		return -1;
	}
	return fd;
}

static int read_key(int kd, uint8_t key[KEY_LEN])
{
	struct stat st;
	int fd, ok;

	fd = openat(kd, "key", O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ok = !fstat(fd, &st) && S_ISREG(st.st_mode) &&
	     st.st_uid == getuid() && !(st.st_mode & 077) &&
	     st.st_size == KEY_LEN && read(fd, key, KEY_LEN) == KEY_LEN;
	close(fd);
	if (!ok) {
		refuse("~/.softhca/key", "not a private file of ours of 16 bytes",
		       "remove it");
		return -EPERM;
	}
	return 0;
}

/* ~/.softhca/key: 16 random bytes, made once (link: one maker wins). */
static int user_key(uint8_t key[KEY_LEN], bool create)
{
	char tmp[32];
	uint8_t fresh[KEY_LEN];
	int home, kd, fd, ret;

	home = open_home();
	if (home < 0)
		return -ENOENT;
	kd = open_private(home, "~", ".softhca", create);
	close(home);
	if (kd < 0)
		return kd;
	ret = read_key(kd, key);
	if (ret == -ENOENT && create) {
		snprintf(tmp, sizeof(tmp), "key.%d", (int)getpid());
		fd = openat(kd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW |
				     O_CLOEXEC, 0600);
		if (fd >= 0) {
			shca_random(fresh, sizeof(fresh));
			if (write(fd, fresh, sizeof(fresh)) == KEY_LEN &&
			    !fsync(fd))
				linkat(kd, tmp, kd, "key", 0);
			close(fd);
			unlinkat(kd, tmp, 0);
		}
		ret = read_key(kd, key);
	}
	close(kd);
	return ret;
}

static void read_boot_id(uint8_t id[16])
{
	char buf[64];
	unsigned int i, n = 0;
	ssize_t len;
	int fd;

	memset(id, 0, 16);
	fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	len = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	for (i = 0; len > 0 && i < (unsigned int)len && n < 32; i++) {
		char c = buf[i];
		int v = c >= '0' && c <= '9' ? c - '0' :
			c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;

		if (v < 0)
			continue;
		id[n / 2] |= (uint8_t)(v << (n % 2 ? 0 : 4));
		n++;
	}
}

/* The namespace's cookie, or its inode number (before Linux 5.14, where
 * a number can come back after the namespace is gone). */
static int net_id(uint64_t *cookie, char *name, size_t len)
{
	socklen_t sl = sizeof(*cookie);
	struct stat st;
	int s;

	s = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (s >= 0) {
		int r = getsockopt(s, SOL_SOCKET, SO_NETNS_COOKIE, cookie, &sl);

		close(s);
		if (!r) {
			snprintf(name, len, "net-%llu",
				 (unsigned long long)*cookie);
			return 0;
		}
	}
	if (stat("/proc/self/ns/net", &st))
		return -errno;
	*cookie = 0;
	snprintf(name, len, "netino-%llu", (unsigned long long)st.st_ino);
	return 0;
}

/* ------------------------------------------------------------------ */
/* The directory                                                      */

/* /dev/shm (a tmpfs), or /tmp; root's or ours, sticky if writable by all
 * (so that nobody renames our directory away). */
static int open_root(const char **path)
{
	static const char *const roots[] = { "/dev/shm", "/tmp" };
	struct stat st;
	unsigned int i;
	int fd;

	for (i = 0; i < ARRAY_SIZE(roots); i++) {
		fd = open(roots[i], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (fd < 0)
			continue;
		if (!fstat(fd, &st) &&
		    (st.st_uid == 0 || st.st_uid == getuid()) &&
		    (!(st.st_mode & 002) || (st.st_mode & S_ISVTX))) {
			*path = roots[i];
			return fd;
		}
		close(fd);
	}
	return -ENOENT;
}

/* Is name under root a directory of ours (1), absent (0), or someone
 * else's or not a directory (-1)? */
static int probe_base(int root, const char *name)
{
	struct stat st;

	if (fstatat(root, name, &st, AT_SYMLINK_NOFOLLOW))
		return errno == ENOENT ? 0 : -1;
	return S_ISDIR(st.st_mode) && st.st_uid == getuid() ? 1 : -1;
}

static int open_base(bool create, char *path, size_t len)
{
	uint8_t key[KEY_LEN], msg[21];
	const char *root_path = NULL;
	char names[SPARES][64];
	int root, i, pick = -1, free_i = -1, fd, ret;
	uint32_t uid = getuid();

	ret = user_key(key, create);
	if (ret == -EPERM)
		return ret;
	root = open_root(&root_path);
	if (root < 0)
		return root;
	if (ret) {
		shca_info_once("no usable ~/.softhca/key (home directory "
			       "missing or not ours): same-host names go "
			       "in %s/softhca-%u, a name another user can "
			       "take first", root_path, uid);
		snprintf(names[0], sizeof(names[0]), "softhca-%u", uid);
		pick = 0;
	} else {
		memcpy(msg, &uid, 4);
		read_boot_id(msg + 4);
		for (i = 0; i < SPARES; i++) {
			uint64_t tag;

			/* each spare its own hash: one name tells nothing
			 * of the others */
			msg[20] = (uint8_t)i;
			tag = shca_siphash(key, msg, sizeof(msg));
			snprintf(names[i], sizeof(names[i]),
				 "softhca-%u-%016llx", uid,
				 (unsigned long long)tag);
			ret = probe_base(root, names[i]);
			if (ret > 0 && pick < 0)
				pick = i;
			if (!ret && free_i < 0)
				free_i = i;
			if (ret < 0) {
				char what[96];

				snprintf(what, sizeof(what), "%s/%s",
					 root_path, names[i]);
				refuse(what, "not a directory of ours",
				       "using a spare name");
			}
		}
		if (pick < 0)
			pick = free_i >= 0 ? free_i : 0;
	}
	fd = open_private(root, root_path, names[pick], create);
	close(root);
	if (fd >= 0)
		snprintf(path, len, "%.16s/%.63s", root_path, names[pick]);
	return fd;
}

static void close_dir(void)
{
	if (the_dir.fd >= 0)
		close(the_dir.fd);
	if (base_fd >= 0)
		close(base_fd);
	the_dir.fd = -1;
	base_fd = -1;
}

static int open_dir(bool create)
{
	char base_path[96];
	int bfd, nfd, ret;

	ret = net_id(&the_dir.cookie, net_name, sizeof(net_name));
	if (ret)
		return ret;
	bfd = open_base(create, base_path, sizeof(base_path));
	if (bfd < 0)
		return bfd;
	nfd = open_private(bfd, base_path, net_name, create);
	if (nfd < 0) {
		close(bfd);
		return nfd;
	}
	base_fd = bfd;
	the_dir.fd = nfd;
	snprintf(the_dir.path, sizeof(the_dir.path), "%.95s/%.39s", base_path,
		 net_name);
	read_boot_id(the_dir.boot_id);
	dir_pid = getpid();
	return 0;
}

const struct shca_rundir *shca_rundir_get(bool create)
{
	int ret = 0;

	pthread_mutex_lock(&rundir_lock);
	if (the_dir.fd >= 0 && dir_pid != getpid()) {
		/* a forked child: maybe another namespace by now */
		close_dir();
		dir_used = false;
	}
	if (the_dir.fd < 0)
		ret = open_dir(create);
	pthread_mutex_unlock(&rundir_lock);
	if (ret) {
		errno = -ret;
		return NULL;
	}
	return &the_dir;
}

void shca_rundir_reset(void)
{
	pthread_mutex_lock(&rundir_lock);
	close_dir();
	pthread_mutex_unlock(&rundir_lock);
}

void shca_rundir_mark_used(void)
{
	__atomic_store_n(&dir_used, true, __ATOMIC_RELAXED);
}

unsigned int shca_rundir_take_refusals(void)
{
	return __atomic_exchange_n(&refusals, 0, __ATOMIC_RELAXED);
}

/*
 * Last of the destructors (the names and the host table are removed by
 * theirs first): the namespace's directory goes if it is empty.  A process
 * making a name in it at the same moment sees ENOENT and makes it again.
 * The base directory stays: its name is known now, and another user could
 * make it first next time.
 */
__attribute__((destructor(101))) static void rundir_exit(void)
{
	if (!dir_used || base_fd < 0 || dir_pid != getpid())
		return;
	unlinkat(base_fd, net_name, AT_REMOVEDIR);
}
