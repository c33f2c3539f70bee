// SPDX-License-Identifier: MIT
/*
 * The counter collector (sysfs/counters.c) against owners that lie: a
 * forked "owner" listens on a slot's socket (SOFTHCA_PORT_BASE of the
 * test's own, so no real process is in view) and hands out an arena this
 * test wrote by hand.  A good arena is read exactly; a QP record with a
 * stray offset, a wrong index or a garbage name is skipped or cleaned; a
 * bad magic, a header bigger than its memfd, a pid that is not the
 * hello's, a hello without its descriptors are refused (EPROTO) without a
 * crash; a hello that names another pid than the listener's (SO_PEERCRED)
 * is refused (EPERM); an owner that never answers costs its timeout; a
 * socket of another user's under our name is refused (EPERM, root only).
 */
#include <signal.h>
#include <stdbool.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "common/slot.h"
#include "shm/arena.h"
#include "shm/sock.h"
#include "sysfs/counters.h"

#define BASE	62000		/* only our sockets carry it: above the
				 * ranges tests and runs use (31500's 1024
				 * slots held those of a run with
				 * SOFTHCA_PORT_BASE=32000, and the case
				 * collected them too) */
#define SLOT	7
#define QPT	4096		/* the QP table's offset */
#define HEAP	(QPT + SHCA_ARENA_QP_ENTRIES * 8)

enum lie {
	GOOD, BAD_MAGIC, SHORT_FILE, HUGE_SIZE, OTHER_PID, NO_FDS, SILENT,
	HELLO_PID,
};

/* An arena as the owner would have it, with what lie says wrong. */
static int make_arena(enum lie lie)
{
	struct shca_arena_hdr h;
	struct shca_qp_shm q;
	uint64_t size = HEAP + 4 * 4096, off;
	int fd = memfd_create("test-arena", MFD_CLOEXEC);

	ASSERT(fd >= 0);
	ASSERT_EQ(ftruncate(fd, lie == SHORT_FILE ? 4096 : (off_t)size), 0);
	memset(&h, 0, sizeof(h));
	h.magic = lie == BAD_MAGIC ? 0x1234 : SHCA_ARENA_MAGIC;
	h.version = SHCA_ARENA_VERSION;
	/* the owner's pid, as the listener's credentials say */
	h.pid = lie == OTHER_PID ? getpid() + 1 : getpid();
	h.size = lie == HUGE_SIZE ? (1ull << 41) : size;
	h.qp_table_off = QPT;
	h.stats.v[SHCA_STAT_DROPPED_PKTS] = 5;
	ASSERT_EQ(pwrite(fd, &h, sizeof(h), 0), (ssize_t)sizeof(h));
	if (lie == SHORT_FILE)
		return fd;

	/* index 3: a good QP on "lo" */
	memset(&q, 0, sizeof(q));
	q.qpn = shca_qpn_make(SLOT, 3);
	q.qp_type = IBV_QPT_RC;
	q.state = IBV_QPS_RTS;
	snprintf(q.dev, sizeof(q.dev), "lo");
	q.stats.v[SHCA_STAT_SENT_PKTS] = 100;
	q.stats.v[SHCA_STAT_SENT_BYTES] = 6400;
	off = HEAP;
	ASSERT_EQ(pwrite(fd, &q, sizeof(q), (off_t)off), (ssize_t)sizeof(q));
	ASSERT_EQ(pwrite(fd, &off, 8, QPT + 3 * 8), 8);
	/* index 4: a garbage name, cleaned (and not "lo") */
	q.qpn = shca_qpn_make(SLOT, 4);
	memset(q.dev, 0xff, sizeof(q.dev));	/* no NUL either */
	q.stats.v[SHCA_STAT_SENT_PKTS] = 7;
	off = HEAP + 1024;
	ASSERT_EQ(pwrite(fd, &q, sizeof(q), (off_t)off), (ssize_t)sizeof(q));
	ASSERT_EQ(pwrite(fd, &off, 8, QPT + 4 * 8), 8);
	/* index 5: the record says index 6: not a record */
	q.qpn = shca_qpn_make(SLOT, 6);
	snprintf(q.dev, sizeof(q.dev), "lo");
	off = HEAP + 2048;
	ASSERT_EQ(pwrite(fd, &q, sizeof(q), (off_t)off), (ssize_t)sizeof(q));
	ASSERT_EQ(pwrite(fd, &off, 8, QPT + 5 * 8), 8);
	/* index 8: past the end; index 9: unaligned; index 10: huge */
	off = size - 8;
	ASSERT_EQ(pwrite(fd, &off, 8, QPT + 8 * 8), 8);
	off = HEAP + 3;
	ASSERT_EQ(pwrite(fd, &off, 8, QPT + 9 * 8), 8);
	off = ~0ull - 7;
	ASSERT_EQ(pwrite(fd, &off, 8, QPT + 10 * 8), 8);
	return fd;
}

/*
 * Fork an owner of SLOT that answers every connection as lie says, and
 * return once it listens (as another user's process: other_user).
 */
static pid_t owner(enum lie lie, bool other_user)
{
	struct sockaddr_un sa;
	socklen_t len;
	int ls, c, fds[3], ready[2];
	pid_t pid;
	char b;

	/* our name, also for an impostor of another uid */
	setenv("SOFTHCA_PORT_BASE", "62000", 1);
	ASSERT_EQ(shca_sock_addr(&sa, &len, BASE + SLOT, true), 0);
	unlink(sa.sun_path);
	ASSERT_EQ(pipe(ready), 0);
	pid = fork();
	ASSERT(pid >= 0);
	if (pid) {
		close(ready[1]);
		ASSERT_EQ(read(ready[0], &b, 1), 1);
		close(ready[0]);
		return pid;
	}
	close(ready[0]);
	/* root makes the name in our private directory (no other user can),
	 * then becomes the impostor: the peer credentials a connection
	 * reports are the listener's, taken at listen() */
	ls = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (ls < 0 || bind(ls, (struct sockaddr *)&sa, len))
		_exit(1);
	if (other_user && setuid(65534))
		_exit(1);
	if (listen(ls, 8))
		_exit(1);
	if (write(ready[1], "r", 1) != 1)
		_exit(1);
	for (;;) {
		struct shca_hello h = { SHCA_HELLO_MAGIC, SHCA_ARENA_VERSION,
					getpid() + (lie == HELLO_PID), SLOT,
					getuid(), 0 };

		c = accept(ls, NULL, NULL);
		if (c < 0)
			continue;
		if (lie == SILENT) {
			pause();
			continue;
		}
		fds[0] = make_arena(lie);
		fds[1] = eventfd(0, EFD_CLOEXEC);
		/* the pool, as a real owner's hello carries it */
		fds[2] = memfd_create("pool", MFD_CLOEXEC);
		shca_sock_send_fds(c, &h, sizeof(h), fds,
				   lie == NO_FDS ? 0 : 3);
		close(fds[0]);
		close(fds[1]);
		close(fds[2]);
		close(c);
	}
}

struct errs {
	int n, last;
};

static pid_t last_owner;

static void on_error(int slot, int err, void *arg)
{
	struct errs *e = arg;

	ASSERT_EQ(slot, SLOT);
	e->n++;
	e->last = err;
}

/* Collect with an owner that lies so: the count, errors in *e. */
static int collect(enum lie lie, bool other_user, struct errs *e,
		   struct shca_counters_proc **procs)
{
	pid_t pid;
	int n, status;

	setenv("SOFTHCA_PORT_BASE", "62000", 1);
	memset(e, 0, sizeof(*e));
	pid = owner(lie, other_user);
	last_owner = pid;
	n = shca_counters_collect(0, 1, procs, on_error, e);
	kill(pid, SIGKILL);
	waitpid(pid, &status, 0);
	return n;
}

TEST(good_arena_read_exactly)
{
	struct shca_counters_proc *p;
	struct shca_counters_qp *lo, *junk;
	struct shca_stat_block sum;
	struct errs e;
	int n = collect(GOOD, false, &e, &p);

	ASSERT_EQ(n, 1);
	ASSERT_EQ(e.n, 0);
	ASSERT_EQ(p[0].pid, last_owner);
	ASSERT_EQ(p[0].slot, SLOT);
	ASSERT_EQ(p[0].stats.v[SHCA_STAT_DROPPED_PKTS], 5);
	/* index 3 and 4 only, by name ("?..." before "lo") */
	ASSERT_EQ(p[0].nqps, 2);
	junk = &p[0].qps[0];
	lo = &p[0].qps[1];
	ASSERT_STR_EQ(lo->dev, "lo");
	ASSERT_EQ(lo->qpn, shca_qpn_make(SLOT, 3));
	ASSERT_EQ(lo->qp_type, IBV_QPT_RC);
	ASSERT_EQ(lo->state, IBV_QPS_RTS);
	/* 4's name cleaned: printable, cut to an interface name's room */
	ASSERT_EQ(junk->qpn, shca_qpn_make(SLOT, 4));
	ASSERT_EQ(strlen(junk->dev), IF_NAMESIZE - 1);
	ASSERT_EQ(strspn(junk->dev, "?"), IF_NAMESIZE - 1);
	shca_counters_sum_dev(p, n, "lo", &sum);
	ASSERT_EQ(sum.v[SHCA_STAT_SENT_PKTS], 100);
	ASSERT_EQ(sum.v[SHCA_STAT_SENT_BYTES], 6400);
	shca_counters_free(p, n);
}

TEST(lying_owners_refused)
{
	static const enum lie lies[] = { BAD_MAGIC, SHORT_FILE, HUGE_SIZE,
					 OTHER_PID, NO_FDS };
	struct shca_counters_proc *p;
	struct errs e;
	unsigned int i;
	int n;

	for (i = 0; i < sizeof(lies) / sizeof(lies[0]); i++) {
		n = collect(lies[i], false, &e, &p);
		ASSERT_EQ(n, 0);
		ASSERT_EQ(e.n, 1);
		ASSERT_EQ(e.last, EPROTO);
		shca_counters_free(p, n);
	}
}

TEST(hello_of_another_pid_refused)
{
	struct shca_counters_proc *p;
	struct errs e;
	int n = collect(HELLO_PID, false, &e, &p);

	ASSERT_EQ(n, 0);
	ASSERT_EQ(e.n, 1);
	ASSERT_EQ(e.last, EPERM);
	shca_counters_free(p, n);
}

TEST(silent_owner_costs_its_timeout)
{
	struct shca_counters_proc *p;
	struct errs e;
	int n = collect(SILENT, false, &e, &p);

	ASSERT_EQ(n, 0);
	ASSERT_EQ(e.n, 1);
	ASSERT(e.last == EAGAIN || e.last == ETIMEDOUT);
	shca_counters_free(p, n);
}

TEST(other_users_socket_refused)
{
	struct shca_counters_proc *p;
	struct errs e;
	int n;

	if (geteuid() != 0)
		SKIP("needs root to own a socket as another user");
	n = collect(GOOD, true, &e, &p);
	ASSERT_EQ(n, 0);
	ASSERT_EQ(e.n, 1);
	ASSERT_EQ(e.last, EPERM);
	shca_counters_free(p, n);
}
