// SPDX-License-Identifier: MIT
/*
 * The impostor of tests/security/test_samehost.sh: another user on the
 * host who wants to stand in for a victim's peer, or stall it.
 *
 *   samehost_impostor occupy UID BASE
 *       (as the impostor) binds every name a softhca process of UID used
 *       to listen on (abstract \0softhca-UID-PORT, all 1024 ports of BASE),
 *       makes the names softhca would fall back to without a home
 *       directory (/dev/shm/softhca-UID, mode 0777, with sockets for every
 *       port and a host table), old-style host tables (0666, valid magic)
 *       and symlinks where tables used to be, and tries to make names
 *       inside the victim's private directories (must be denied).  Prints
 *       what it holds, "ready", and holds it all until stdin closes.
 *
 *   samehost_impostor serve BASE PORT KIND [UID]
 *       (as root) binds PORT's name in root's own private directory, as
 *       only root could, then listens and answers with a hello and an
 *       arena memfd named "impostor", which it truncates right after:
 *         other-user  listens as UID (SO_PEERCRED says UID)
 *         unsealed    listens as root, the memfd is not sealed
 *         wrong-pid   listens as root, the hello names another pid
 *         bad-pool    listens as root, the arena is sealed and well
 *                     formed, the pool beside it is not sealed against
 *                     shrinking (a peer that mapped it could be made to
 *                     fault by an ftruncate)
 *       Prints "ready"; serves until killed (60 s at most).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <netinet/in.h>

#include "common/slot.h"
#include "shm/arena.h"
#include "shm/sock.h"

#ifndef SO_NETNS_COOKIE
#define SO_NETNS_COOKIE 71
#endif

static void raise_nofile(void)
{
	struct rlimit r;

	if (!getrlimit(RLIMIT_NOFILE, &r)) {
		r.rlim_cur = r.rlim_max;
		setrlimit(RLIMIT_NOFILE, &r);
	}
}

static int bind_path(const char *path)
{
	struct sockaddr_un sa;
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);

	memset(&sa, 0, sizeof(sa));
	sa.sun_family = AF_UNIX;
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) ||
	    listen(fd, 8)) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return fd;
}

static int bind_abstract(unsigned int uid, unsigned int port)
{
	struct sockaddr_un sa;
	int n, fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);

	memset(&sa, 0, sizeof(sa));
	sa.sun_family = AF_UNIX;
	n = snprintf(sa.sun_path + 1, sizeof(sa.sun_path) - 1,
		     "softhca-%u-%u", uid, port);
	if (fd < 0 ||
	    bind(fd, (struct sockaddr *)&sa,
		 (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 +
			     (size_t)n)) ||
	    listen(fd, 8)) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return fd;
}

/* A file that looks like a host table: the magic, mode 0666. */
static int fake_table(const char *path)
{
	uint64_t hdr[4] = { 0x54534f4841484353ull, 2, 0, 0 };
	int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW, 0666);

	if (fd < 0)
		return -1;
	fchmod(fd, 0666);
	if (ftruncate(fd, 1 << 20) ||
	    pwrite(fd, hdr, sizeof(hdr), 0) != (ssize_t)sizeof(hdr)) {
		close(fd);
		return -1;
	}
	close(fd);
	return 0;
}

static uint64_t cookie(void)
{
	uint64_t c = 0;
	socklen_t l = sizeof(c);
	int s = socket(AF_UNIX, SOCK_DGRAM, 0);

	getsockopt(s, SOL_SOCKET, SO_NETNS_COOKIE, &c, &l);
	close(s);
	return c;
}

static int occupy(unsigned int uid, unsigned int base)
{
	unsigned int port, abstract = 0, fallback = 0, tables = 0, denied = 0;
	unsigned int tried = 0;
	char path[512], dir[160], victim[64];
	struct stat st;
	struct dirent *e;
	DIR *d;
	char c;

	raise_nofile();
	for (port = base; port < base + SHCA_NUM_SLOTS; port++)
		if (bind_abstract(uid, port) >= 0)
			abstract++;

	/* the predictable fallback: made first, open to all */
	snprintf(dir, sizeof(dir), "/dev/shm/softhca-%u", uid);
	mkdir(dir, 0777);
	chmod(dir, 0777);
	snprintf(dir, sizeof(dir), "/dev/shm/softhca-%u/net-%llu", uid,
		 (unsigned long long)cookie());
	mkdir(dir, 0777);
	chmod(dir, 0777);
	for (port = base; port < base + SHCA_NUM_SLOTS; port++) {
		snprintf(path, sizeof(path), "%s/%u", dir, port);
		if (bind_path(path) >= 0)
			fallback++;
	}
	snprintf(path, sizeof(path), "%s/host-v2", dir);
	tables += !fake_table(path);

	/* old-style tables, and symlinks where they were */
	if (!stat("/proc/self/ns/net", &st)) {
		snprintf(path, sizeof(path), "/dev/shm/softhca-%u-%llu-v1", uid,
			 (unsigned long long)st.st_ino);
		tables += !fake_table(path);
		snprintf(path, sizeof(path), "/dev/shm/softhca-%u-%llu-v2", uid,
			 (unsigned long long)st.st_ino);
		tables += !symlink("/etc/passwd", path);
	}

	/* the victim's private directories, which it can see but not enter */
	snprintf(victim, sizeof(victim), "softhca-%u-", uid);
	d = opendir("/dev/shm");
	while (d && (e = readdir(d))) {
		if (strncmp(e->d_name, victim, strlen(victim)))
			continue;
		snprintf(path, sizeof(path), "/dev/shm/%s", e->d_name);
		if (lstat(path, &st) || !S_ISDIR(st.st_mode) ||
		    st.st_uid != uid)
			continue;	/* not a directory of the victim's */
		snprintf(path, sizeof(path), "/dev/shm/%s/net-%llu",
			 e->d_name, (unsigned long long)cookie());
		tried++;
		if (mkdir(path, 0777) && errno == EACCES)
			denied++;
		snprintf(path, sizeof(path), "/dev/shm/%s/net-%llu/%u",
			 e->d_name, (unsigned long long)cookie(), base);
		tried++;
		if (bind_path(path) < 0 && errno == EACCES)
			denied++;
		snprintf(path, sizeof(path), "/dev/shm/%s/net-%llu/host-v2",
			 e->d_name, (unsigned long long)cookie());
		tried++;
		if (fake_table(path) && errno == EACCES)
			denied++;
	}
	if (d)
		closedir(d);
	printf("occupied: %u abstract names, %u fallback names, %u tables; "
	       "private: %u of %u attempts denied\n",
	       abstract, fallback, tables, denied, tried);
	printf("ready\n");
	fflush(stdout);
	while (read(0, &c, 1) > 0)
		;
	return 0;
}

/* An arena as softhca would send it (header valid), named "impostor". */
static int impostor_arena(pid_t pid, bool sealed)
{
	struct shca_arena_hdr h;
	uint64_t size = 64ull << 20;
	int fd = memfd_create("impostor", MFD_CLOEXEC | MFD_ALLOW_SEALING);

	if (fd < 0 || ftruncate(fd, (off_t)size))
		return -1;
	memset(&h, 0, sizeof(h));
	h.magic = SHCA_ARENA_MAGIC;
	h.version = SHCA_ARENA_VERSION;
	h.pid = pid;
	h.uid = getuid();
	h.size = size;
	h.qp_table_off = 4096;
	h.mr_table_off = 4096 + SHCA_ARENA_QP_ENTRIES * 8;
	h.heap_off = h.mr_table_off +
		     SHCA_ARENA_MR_ENTRIES * sizeof(struct shca_mr_shm);
	h.seg_table_off = h.heap_off;
	h.lanes_off = h.seg_table_off +
		      SHCA_ARENA_SEG_ENTRIES * sizeof(struct shca_seg_shm);
	h.pd_imp_off = h.lanes_off + SHCA_ARENA_LANE_BYTES;
	h.heap_off = h.pd_imp_off +
		     SHCA_ARENA_PD_IMPS * sizeof(struct shca_pd_imp_shm);
	if (h.heap_off > size)
		h.heap_off = size;
	if (pwrite(fd, &h, sizeof(h), 0) != (ssize_t)sizeof(h))
		return -1;
	if (sealed && fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW))
		return -1;
	return fd;
}

static int serve(unsigned int base, unsigned int port, const char *kind,
		 unsigned int uid)
{
	struct sockaddr_un sa;
	socklen_t len;
	int ls, c;

	alarm(60);
	/* the port itself, as its owner would hold it (so that no softhca
	 * process takes the port and with it the name) */
	{
		struct sockaddr_in6 a6;
		int zero = 0, one = 1, t = socket(AF_INET6, SOCK_STREAM, 0);

		setsockopt(t, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
		setsockopt(t, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		memset(&a6, 0, sizeof(a6));
		a6.sin6_family = AF_INET6;
		a6.sin6_port = htons((uint16_t)port);
		if (bind(t, (struct sockaddr *)&a6, sizeof(a6)) || listen(t, 1)) {
			perror("port");
			return 1;
		}
	}
	/* root's own private directory: only root (or its user) gets in */
	if (shca_sock_addr(&sa, &len, (uint16_t)port, true)) {
		perror("sock_addr");
		return 1;
	}
	unlink(sa.sun_path);
	ls = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (ls < 0 || bind(ls, (struct sockaddr *)&sa, len)) {
		perror("bind");
		return 1;
	}
	if (!strcmp(kind, "other-user") &&
	    (setresgid(uid, uid, uid) || setresuid(uid, uid, uid))) {
		perror("setresuid");
		return 1;
	}
	/* SO_PEERCRED of a connection reports who called listen() */
	if (listen(ls, 8)) {
		perror("listen");
		return 1;
	}
	printf("ready\n");
	fflush(stdout);
	bool bad_pool = !strcmp(kind, "bad-pool");

	for (;;) {
		struct shca_hello h;
		int fds[3];

		c = accept(ls, NULL, NULL);
		if (c < 0)
			continue;
		memset(&h, 0, sizeof(h));
		h.magic = SHCA_HELLO_MAGIC;
		h.version = SHCA_ARENA_VERSION;
		h.pid = getpid() + !strcmp(kind, "wrong-pid");
		h.slot = port - base;
		h.uid = getuid();
		fds[0] = impostor_arena(h.pid, bad_pool);
		fds[1] = eventfd(0, EFD_CLOEXEC);
		/* a pool as a real owner's (sealed against shrinking), so
		 * that the arena is the one thing wrong; or not (bad-pool) */
		fds[2] = memfd_create("softhca-mem", MFD_CLOEXEC |
						      MFD_ALLOW_SEALING);
		if (fds[2] >= 0 && !bad_pool)
			(void)fcntl(fds[2], F_ADD_SEALS, F_SEAL_SHRINK);
		shca_sock_send_fds(c, &h, sizeof(h), fds, 3);
		/* the attack, once the victim has had time to map it: a
		 * peer that mapped it would fault on touch */
		usleep(200000);
		if (fds[0] >= 0 && !bad_pool && ftruncate(fds[0], 0))
			perror("ftruncate");
		if (fds[2] >= 0 && bad_pool && ftruncate(fds[2], 0))
			perror("ftruncate");
		close(fds[0]);
		close(fds[1]);
		close(fds[2]);
	}
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	signal(SIGPIPE, SIG_IGN);
	if (argc == 4 && !strcmp(argv[1], "occupy"))
		return occupy((unsigned int)atoi(argv[2]),
			      (unsigned int)atoi(argv[3]));
	if ((argc == 5 || argc == 6) && !strcmp(argv[1], "serve"))
		return serve((unsigned int)atoi(argv[2]),
			     (unsigned int)atoi(argv[3]), argv[4],
			     argc == 6 ? (unsigned int)atoi(argv[5]) : 0);
	fprintf(stderr, "usage: samehost_impostor occupy UID BASE | "
		"serve BASE PORT KIND [UID]\n");
	return 2;
}
