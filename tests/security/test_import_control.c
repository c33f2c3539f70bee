// SPDX-License-Identifier: MIT
/*
 * The import service attacked (docs/import.md, "Another process's
 * cmd_fd"; src/verbs/import_rem.c).  This process owns a context with a
 * PD and an MR, and a second context (another command file) with its
 * own; as an attacker it connects to its own peer socket the way
 * shca_peer_control_connect does (service SHCA_CTRL_IMPORT) and writes
 * records of its own making (a copy of import_rem.c's wire):
 *
 *   records    before a file is proven: a request for a PD, a file
 *              request without a descriptor or with two, a PD request
 *              with one, a wrong magic, a short record, a long one, an
 *              unknown op (each closes the connection); a forged command
 *              file (a memfd of the name with a copy of the record) and
 *              a pipe: ENOENT, and the connection proves nothing
 *   proven     the real cmd_fd: the device's name; a PD and an MR of
 *              that file by handle (the owner's identity and keys); a
 *              handle of nothing, of the other type, of the other file's
 *              objects: ENOENT (to import or to destroy); a destroy of a
 *              PD in use EBUSY; a DM: its length and its memfd (sealed
 *              against shrinking, the DM's bytes), the other file's
 *              ENOENT without a descriptor, its free with an MR EBUSY; an unknown op EINVAL; a second file
 *              request closes the connection
 *   idle       a connection that proves nothing is closed (the owner's
 *              5 s; a bounded wait of 30 s here)
 *   per_peer   one process holds at most 64 connections: the next is
 *              closed at once, and served once one is given back
 *   shadows    IMP_PD_SHADOW and IMP_PD_DROP (no answer; the table of
 *              importers in the owner's arena, read here as a peer
 *              reads it): before a file is proven, the connection
 *              closes; a shadow of a PD of the proven file is one entry
 *              (the PD's identity, the slot it says, the pid the kernel
 *              says), once however often it comes; another file's PD, a
 *              slot out of range, a shadow 0: nothing; one process
 *              takes at most 32 entries; a DROP of another connection's
 *              shadow changes nothing, of its own frees it; the
 *              connection's end frees the rest, the PD's destroy its
 *              own
 *
 * After each, a forked child imports the context and the PD as a
 * legitimate importer does.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "arena_peer.h"
#include "common.h"
#include "fdpass.h"
#include "shm/arena.h"
#include "shm/sock.h"

/* The wire of src/shm/peer.c and src/verbs/import_rem.c, as an attacker
 * writes it. */
#define CTRL_REQ_MAGIC	0x6c72744348434853ull
#define SVC_IMPORT	1
#define IMP_MAGIC	0x504d494143434853ull
#define MAX_PER_PEER	64

enum { OP_FILE = 1, OP_PD, OP_MR, OP_DEALLOC_PD, OP_DEREG_MR, OP_DM,
       OP_FREE_DM, OP_PD_SHADOW, OP_PD_DROP, OP_BOGUS = 77 };
#define MAX_SHADOWS_PER_PEER	32

struct ctrl_req {
	uint64_t magic;
	uint32_t idx;
	uint32_t gen;
};

struct req {
	uint64_t magic;
	uint32_t op;
	uint32_t handle;
	uint32_t shadow;
	int32_t slot;
};

struct ans {
	int32_t ret;
	uint32_t pd;
	uint32_t lkey, rkey, access, pad;
	uint64_t length, iova;
	char dev[64];
};

/* The command file's record (import_rem.c): the owner's slot. */
struct rec {
	uint64_t magic;
	uint32_t version;
	int32_t slot;
	int32_t pid;
	uint32_t pad;
};

static int owner_slot;

struct owner {
	struct ibv_context *ctx, *ctx2;
	struct ibv_pd *pd, *pd2;
	struct ibv_mr *mr, *mr2;
	struct ibv_dm *dm, *dm2;
	struct ibv_mr *dmr;		/* a DM MR on dm */
	void *buf, *buf2;
};

static void owner_open(struct owner *w)
{
	w->ctx = open_lo();
	w->ctx2 = open_lo();
	w->pd = ibv_alloc_pd(w->ctx);
	w->pd2 = ibv_alloc_pd(w->ctx2);
	ASSERT_NOT_NULL(w->pd);
	ASSERT_NOT_NULL(w->pd2);
	ASSERT_EQ(posix_memalign(&w->buf, 4096, 4096), 0);
	ASSERT_EQ(posix_memalign(&w->buf2, 4096, 4096), 0);
	w->mr = ibv_reg_mr(w->pd, w->buf, 4096, IBV_ACCESS_LOCAL_WRITE);
	w->mr2 = ibv_reg_mr(w->pd2, w->buf2, 4096, IBV_ACCESS_LOCAL_WRITE);
	ASSERT_NOT_NULL(w->mr);
	ASSERT_NOT_NULL(w->mr2);
	{
		struct ibv_alloc_dm_attr da = { .length = 8192 };

		w->dm = ibv_alloc_dm(w->ctx, &da);
		w->dm2 = ibv_alloc_dm(w->ctx2, &da);
		ASSERT_NOT_NULL(w->dm);
		ASSERT_NOT_NULL(w->dm2);
		w->dmr = ibv_reg_dm_mr(w->pd, w->dm, 0, 8192,
				       IBV_ACCESS_ZERO_BASED |
				       IBV_ACCESS_LOCAL_WRITE);
		ASSERT_NOT_NULL(w->dmr);
	}
	{
		struct rec r;

		ASSERT_EQ(pread(w->ctx->cmd_fd, &r, sizeof(r), 0),
			  (ssize_t)sizeof(r));
		ASSERT_EQ(r.pid, getpid());
		owner_slot = r.slot;
	}
}

static void owner_close(struct owner *w)
{
	ASSERT_EQ(ibv_dereg_mr(w->dmr), 0);
	ASSERT_EQ(ibv_free_dm(w->dm), 0);
	ASSERT_EQ(ibv_free_dm(w->dm2), 0);
	ASSERT_EQ(ibv_dereg_mr(w->mr), 0);
	ASSERT_EQ(ibv_dereg_mr(w->mr2), 0);
	ASSERT_EQ(ibv_dealloc_pd(w->pd), 0);
	ASSERT_EQ(ibv_dealloc_pd(w->pd2), 0);
	ASSERT_EQ(ibv_close_device(w->ctx), 0);
	ASSERT_EQ(ibv_close_device(w->ctx2), 0);
	free(w->buf);
	free(w->buf2);
}

/* A control connection for the import service to our own socket (the
 * library's slot, as the record says: this program's own copy of the
 * slot code has none). */
static int ctl_connect(void)
{
	struct ctrl_req req = { CTRL_REQ_MAGIC, SVC_IMPORT, 0 };
	struct timeval tv = { 30, 0 };
	struct shca_hello h;
	int fd, fds[3];
	pid_t owner;

	fd = shca_sock_connect(owner_slot, 10, &owner);
	ASSERT_GE(fd, 0);
	ASSERT_EQ(shca_sock_recv_hello(fd, &h, fds), 0);
	close(fds[0]);
	close(fds[1]);
	close(fds[2]);
	ASSERT_EQ(h.pid, getpid());
	ASSERT_EQ(send(fd, &req, sizeof(req), MSG_NOSIGNAL),
		  (ssize_t)sizeof(req));
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	return fd;
}

/* Send len bytes (with nfds descriptors) as one message; the answer in
 * *a: true, or false when the owner closed the connection instead. */
static bool xchg(int fd, const void *p, size_t len, const int *fds, int nfds,
		 struct ans *a)
{
	ssize_t n;

	if (shca_sock_send_fds(fd, p, len, fds, nfds))
		return false;
	n = recv(fd, a, sizeof(*a), 0);
	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
		harness_fail(__FILE__, __LINE__, "no answer in 30 s");
	if (n <= 0)
		return false;
	ASSERT_EQ(n, (ssize_t)sizeof(*a));
	return true;
}

static bool request(int fd, uint32_t op, uint32_t handle, int file,
		    struct ans *a)
{
	struct req r = { IMP_MAGIC, op, handle, 0, 0 };

	return xchg(fd, &r, sizeof(r), &file, file >= 0, a);
}

/* A request whose answer may bring a descriptor: *got (-1: none). */
static void request_fd(int fd, uint32_t op, uint32_t handle, struct ans *a,
		       int *got)
{
	struct req r = { IMP_MAGIC, op, handle, 0, 0 };

	*got = -1;
	ASSERT_EQ(shca_sock_send_fds(fd, &r, sizeof(r), NULL, 0), 0);
	ASSERT_GE(shca_sock_recv_fds(fd, a, sizeof(*a), got, 1), 0);
}

/* One connection, one record: closed by the owner. */
static void refused(const void *p, size_t len, const int *fds, int nfds)
{
	struct ans a;
	int fd = ctl_connect();

	ASSERT(!xchg(fd, p, len, fds, nfds, &a));
	close(fd);
}

/* A memfd named as a command file, holding a copy of fd's record. */
static int forge(int fd)
{
	char rec[256];
	ssize_t n = pread(fd, rec, sizeof(rec), 0);
	int f = memfd_create("softhca-context", MFD_CLOEXEC);

	ASSERT_GT(n, 0);
	ASSERT_GE(f, 0);
	ASSERT_EQ(pwrite(f, rec, (size_t)n, 0), n);
	return f;
}

/*
 * A legitimate importer, from another process: the owner still serves.
 * It is forked at the start of the case, before the case's first verb
 * (the owner's threads): a child forked from a threaded process runs no
 * thread of its own under TSan (it dies with TSan's exit status 66 when
 * the import starts softhca's), so the owner's command file and PD
 * handle come to it afterwards by SCM_RIGHTS.
 */
struct importer {
	pid_t pid;
	int sock;
};

static void importer_fork(struct importer *im)
{
	int sv[2];

	ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	im->pid = fork();
	ASSERT_GE(im->pid, 0);
	if (!im->pid) {
		struct ibv_context *ic;
		struct ibv_pd *pd = NULL;
		uint32_t handle;
		int fd;

		close(sv[0]);
		/* the owner's case ended before legit(): EOF, an assertion */
		fd = fdpass_recv(sv[1], &handle, sizeof(handle));
		ic = ibv_import_device(fd);
		if (ic)
			pd = ibv_import_pd(ic, handle);
		_exit(pd && pd->handle == handle ? 0 : 1);
	}
	close(sv[1]);
	im->sock = sv[0];
}

static void legit(struct importer *im, const struct owner *w)
{
	int st;

	fdpass_send(im->sock, w->ctx->cmd_fd, &w->pd->handle,
		    sizeof(w->pd->handle));
	ASSERT_EQ(waitpid(im->pid, &st, 0), im->pid);
	close(im->sock);
	ASSERT(WIFEXITED(st));
	ASSERT_EQ(WEXITSTATUS(st), 0);
}

TEST(records)
{
	struct importer im;
	struct req r = { IMP_MAGIC, OP_PD, 0, 0, 0 };
	char longer[sizeof(r) + 8];
	struct owner w;
	struct ans a;
	int fds[2], fd, f;

	importer_fork(&im);
	owner_open(&w);
	r.handle = w.pd->handle;
	/* a PD before a file is proven */
	refused(&r, sizeof(r), NULL, 0);
	/* a file request without a descriptor, and with two */
	r.op = OP_FILE;
	refused(&r, sizeof(r), NULL, 0);
	fds[0] = w.ctx->cmd_fd;
	fds[1] = w.ctx->cmd_fd;
	refused(&r, sizeof(r), fds, 2);
	/* a PD request with a descriptor */
	r.op = OP_PD;
	refused(&r, sizeof(r), fds, 1);
	/* wrong magic, short, long, unknown op */
	r.op = OP_FILE;
	r.magic = ~IMP_MAGIC;
	refused(&r, sizeof(r), fds, 1);
	r.magic = IMP_MAGIC;
	refused(&r, sizeof(r) - 4, fds, 1);
	memset(longer, 0, sizeof(longer));
	memcpy(longer, &r, sizeof(r));
	refused(longer, sizeof(longer), fds, 1);
	r.op = OP_BOGUS;
	refused(&r, sizeof(r), NULL, 0);
	/* a DM before a file is proven */
	r.op = OP_DM;
	r.handle = w.dm->handle;
	refused(&r, sizeof(r), NULL, 0);

	/* a forged file, a pipe: not the owner's, nothing proven */
	fd = ctl_connect();
	f = forge(w.ctx->cmd_fd);
	ASSERT(request(fd, OP_FILE, 0, f, &a));
	ASSERT_EQ(a.ret, -ENOENT);
	close(f);
	ASSERT(!request(fd, OP_PD, w.pd->handle, -1, &a));
	close(fd);
	ASSERT_EQ(pipe(fds), 0);
	fd = ctl_connect();
	ASSERT(request(fd, OP_FILE, 0, fds[0], &a));
	ASSERT_EQ(a.ret, -ENOENT);
	ASSERT(!request(fd, OP_PD, w.pd->handle, -1, &a));
	close(fd);
	close(fds[0]);
	close(fds[1]);

	legit(&im, &w);
	owner_close(&w);
}

TEST(proven)
{
	struct importer im;
	struct owner w;
	struct ans a;
	int fd;

	importer_fork(&im);
	owner_open(&w);
	fd = ctl_connect();
	ASSERT(request(fd, OP_FILE, 0, w.ctx->cmd_fd, &a));
	ASSERT_EQ(a.ret, 0);
	ASSERT_STR_EQ(a.dev, ibv_get_device_name(w.ctx->device));
	ASSERT(request(fd, OP_PD, w.pd->handle, -1, &a));
	ASSERT_EQ(a.ret, 0);
	ASSERT_EQ(a.pd, w.pd->handle);
	ASSERT(request(fd, OP_MR, w.mr->handle, -1, &a));
	ASSERT_EQ(a.ret, 0);
	ASSERT_EQ(a.pd, w.pd->handle);
	ASSERT_EQ(a.lkey, w.mr->lkey);
	ASSERT_EQ(a.rkey, w.mr->rkey);
	ASSERT_EQ(a.length, 4096);
	ASSERT_EQ(a.iova, (uintptr_t)w.buf);
	/* nothing, the other type, the other file's */
	ASSERT(request(fd, OP_PD, w.pd->handle ^ 0x5a5a0, -1, &a));
	ASSERT_EQ(a.ret, -ENOENT);
	ASSERT(request(fd, OP_PD, w.mr->handle, -1, &a));
	ASSERT(a.ret == -ENOENT || (a.ret == 0 && w.mr->handle ==
						   w.pd->handle));
	ASSERT(request(fd, OP_PD, w.pd2->handle, -1, &a));
	ASSERT_EQ(a.ret, -ENOENT);
	ASSERT(request(fd, OP_MR, w.mr2->handle, -1, &a));
	ASSERT_EQ(a.ret, -ENOENT);
	/* destroys: the other file's objects are not there, a PD in use
	 * stays */
	ASSERT(request(fd, OP_DEALLOC_PD, w.pd2->handle, -1, &a));
	ASSERT_EQ(a.ret, -ENOENT);
	ASSERT(request(fd, OP_DEREG_MR, w.mr2->handle, -1, &a));
	ASSERT_EQ(a.ret, -ENOENT);
	ASSERT(request(fd, OP_DEALLOC_PD, w.pd->handle, -1, &a));
	ASSERT_EQ(a.ret, -EBUSY);
	/* a DM: its length and one descriptor, its memory (sealed against
	 * shrinking); the other file's, nothing, and no descriptor */
	{
		char probe[4] = { 0 };
		int got, seals;

		ASSERT_EQ(ibv_memcpy_to_dm(w.dm, 0, "dm!", 4), 0);
		request_fd(fd, OP_DM, w.dm->handle, &a, &got);
		ASSERT_EQ(a.ret, 0);
		ASSERT_EQ(a.length, 8192);
		ASSERT_GE(got, 0);
		seals = fcntl(got, F_GET_SEALS);
		ASSERT(seals >= 0 && (seals & F_SEAL_SHRINK));
		ASSERT_EQ(pread(got, probe, 4, 0), 4);
		ASSERT_EQ(memcmp(probe, "dm!", 4), 0);
		close(got);
		request_fd(fd, OP_DM, w.dm2->handle, &a, &got);
		ASSERT_EQ(a.ret, -ENOENT);
		ASSERT_EQ(got, -1);
		request_fd(fd, OP_DM, w.mr->handle, &a, &got);
		ASSERT(a.ret == -ENOENT || w.mr->handle == w.dm->handle);
		if (got >= 0)
			close(got);
	}
	/* its free: the other file's not there, one with an MR stays */
	ASSERT(request(fd, OP_FREE_DM, w.dm2->handle, -1, &a));
	ASSERT_EQ(a.ret, -ENOENT);
	ASSERT(request(fd, OP_FREE_DM, w.dm->handle, -1, &a));
	ASSERT_EQ(a.ret, -EBUSY);
	ASSERT(request(fd, OP_BOGUS, 0, -1, &a));
	ASSERT_EQ(a.ret, -EINVAL);
	/* one file a connection */
	ASSERT(!request(fd, OP_FILE, 0, w.ctx2->cmd_fd, &a));
	close(fd);
	legit(&im, &w);
	owner_close(&w);
}

TEST(idle)
{
	struct importer im;
	struct owner w;
	char b[8];
	int fd;

	importer_fork(&im);
	owner_open(&w);
	fd = ctl_connect();
	/* the owner closes it (SO_RCVTIMEO: 30 s at most) */
	errno = 0;
	ASSERT_EQ(recv(fd, b, sizeof(b), 0), 0);
	close(fd);
	legit(&im, &w);
	owner_close(&w);
}

TEST(per_peer)
{
	int fds[MAX_PER_PEER], i, fd;
	struct owner w;
	struct ans a;

	owner_open(&w);
	for (i = 0; i < MAX_PER_PEER; i++) {
		fds[i] = ctl_connect();
		ASSERT(request(fds[i], OP_FILE, 0, w.ctx->cmd_fd, &a));
		ASSERT_EQ(a.ret, 0);
	}
	fd = ctl_connect();
	ASSERT(!request(fd, OP_FILE, 0, w.ctx->cmd_fd, &a));
	close(fd);
	close(fds[0]);
	/* the owner sees the hang-up, then serves a new one */
	for (i = 0; i < 100; i++) {
		fd = ctl_connect();
		if (request(fd, OP_FILE, 0, w.ctx->cmd_fd, &a))
			break;
		close(fd);
		usleep(100000);
	}
	ASSERT_LT(i, 100);
	ASSERT_EQ(a.ret, 0);
	close(fd);
	for (i = 1; i < MAX_PER_PEER; i++)
		close(fds[i]);
	owner_close(&w);
}

/* A message with no answer (IMP_PD_SHADOW, _DROP). */
static void note(int fd, uint32_t op, uint32_t handle, uint32_t shadow,
		 int32_t slot)
{
	struct req r = { IMP_MAGIC, op, handle, shadow, slot };

	ASSERT_EQ(shca_sock_send_fds(fd, &r, sizeof(r), NULL, 0), 0);
}

/* What fd sent is done: the owner answers in order. */
static void settle(int fd, const struct owner *w)
{
	struct ans a;

	ASSERT(request(fd, OP_PD, w->pd->handle, -1, &a));
	ASSERT_EQ(a.ret, 0);
}

TEST(shadows)
{
	struct importer im;
	struct shca_pd_imp_shm e;
	struct owner w;
	struct ans a;
	struct ibv_pd *pd3;
	uint32_t i;
	int fd, fd2;
	char *self;

	importer_fork(&im);
	owner_open(&w);
	self = arena_own_base();
	/* before a file is proven: closed */
	fd = ctl_connect();
	note(fd, OP_PD_SHADOW, w.pd->handle, 0x1234, owner_slot);
	ASSERT(!request(fd, OP_PD, w.pd->handle, -1, &a));
	close(fd);
	ASSERT_EQ(arena_pd_imps(self, 0, 0, NULL), 0);

	fd = ctl_connect();
	ASSERT(request(fd, OP_FILE, 0, w.ctx->cmd_fd, &a));
	ASSERT_EQ(a.ret, 0);
	note(fd, OP_PD_SHADOW, w.pd->handle, 0x1234, owner_slot);
	note(fd, OP_PD_SHADOW, w.pd->handle, 0x1234, owner_slot);
	settle(fd, &w);
	ASSERT_EQ(arena_pd_imps(self, 0, 0, &e), 1);
	ASSERT_EQ(e.pd, w.pd->handle);
	ASSERT_EQ(e.shadow, 0x1234);
	ASSERT_EQ(e.slot, (uint32_t)owner_slot);
	ASSERT_EQ(e.pid, (uint32_t)getpid());
	/* another file's PD, a slot out of range, no shadow: nothing */
	note(fd, OP_PD_SHADOW, w.pd2->handle, 0x2345, owner_slot);
	note(fd, OP_PD_SHADOW, w.pd->handle, 0x3456, -1);
	note(fd, OP_PD_SHADOW, w.pd->handle, 0x3456, 1 << 20);
	note(fd, OP_PD_SHADOW, w.pd->handle, 0, owner_slot);
	settle(fd, &w);
	ASSERT_EQ(arena_pd_imps(self, 0, 0, NULL), 1);
	/* one process takes at most 32 places */
	for (i = 0; i < MAX_SHADOWS_PER_PEER + 8; i++)
		note(fd, OP_PD_SHADOW, w.pd->handle, 0x10000 + i,
		     owner_slot);
	settle(fd, &w);
	ASSERT_EQ(arena_pd_imps(self, w.pd->handle, 0, NULL),
		  MAX_SHADOWS_PER_PEER);
	/* a DROP: another connection's shadow stays, our own goes */
	fd2 = ctl_connect();
	ASSERT(request(fd2, OP_FILE, 0, w.ctx->cmd_fd, &a));
	ASSERT_EQ(a.ret, 0);
	note(fd2, OP_PD_DROP, 0, 0x1234, 0);
	settle(fd2, &w);
	ASSERT_EQ(arena_pd_imps(self, 0, 0x1234, NULL), 1);
	note(fd, OP_PD_DROP, 0, 0x1234, 0);
	settle(fd, &w);
	ASSERT_EQ(arena_pd_imps(self, 0, 0x1234, NULL), 0);
	ASSERT_EQ(arena_pd_imps(self, 0, 0, NULL), MAX_SHADOWS_PER_PEER - 1);
	/* the connection's end: the rest */
	close(fd);
	settle(fd2, &w);
	for (i = 0; i < 1000 && arena_pd_imps(self, 0, 0, NULL); i++)
		usleep(10000);	/* the owner's engine sees the hang-up */
	ASSERT_EQ(arena_pd_imps(self, 0, 0, NULL), 0);
	/* the PD's destroy: its entries */
	pd3 = ibv_alloc_pd(w.ctx);
	ASSERT_NOT_NULL(pd3);
	note(fd2, OP_PD_SHADOW, pd3->handle, 0x4567, owner_slot);
	note(fd2, OP_PD_SHADOW, w.pd->handle, 0x5678, owner_slot);
	settle(fd2, &w);
	ASSERT_EQ(arena_pd_imps(self, 0, 0, NULL), 2);
	ASSERT_EQ(ibv_dealloc_pd(pd3), 0);
	ASSERT_EQ(arena_pd_imps(self, 0, 0, &e), 1);
	ASSERT_EQ(e.shadow, 0x5678);
	close(fd2);

	legit(&im, &w);
	owner_close(&w);
}
