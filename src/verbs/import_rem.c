// SPDX-License-Identifier: MIT
/*
 * Imports from another process (docs/import.md, "Another process's
 * cmd_fd"): ibv_import_device of a cmd_fd received by SCM_RIGHTS or
 * pidfd_getfd, then ibv_import_pd and ibv_import_mr by handle.
 *
 * Possession of the cmd_fd is the capability, as with the kernel's uverbs
 * file.  The command file (a memfd, context.c) starts with a record that
 * says who owns it (its slot and pid); the importer connects to that
 * process's peer socket (a control connection, shm/peer.c, service
 * SHCA_CTRL_IMPORT) and sends the descriptor itself with its first
 * request.  The owner compares the received file's identity (device and
 * inode, fstat) with its own open command files: a memfd written to look
 * like one proves nothing, as its inode is another.  From then on the
 * connection may ask for that file's objects by handle, and nothing else:
 *
 *   IMP_FILE  the descriptor (SCM_RIGHTS): the device's name, or ENOENT
 *   IMP_PD    a PD of the file: its identity in the owner's arena (the
 *             handle of the PD MRs and QPs are compared by)
 *   IMP_MR    an MR of the file: keys, length, access, iova, PD identity
 *   IMP_DM    a DM of the file: its length, and its memfd (SCM_RIGHTS,
 *             with the answer) for the importer to map (dm.c)
 *   IMP_DEALLOC_PD, IMP_DEREG_MR, IMP_FREE_DM
 *             destroy a PD, an MR or a DM of the file through an import
 *             (the owner's own verb: EBUSY for a PD or a DM in use; the
 *             lanes drained)
 *   IMP_PD_SHADOW, IMP_PD_DROP (no answer)
 *             the importer made a shadow of a PD of the file (its
 *             identity there, and the importer's slot), or destroyed
 *             it: the owner's table of importers (arena.h
 *             shca_pd_imp_shm), whose R_Keys its QPs of the PD answer
 *             (docs/import.md, "The importer's R_Keys")
 *
 * Imports take no reference (the kernel's import is a query by handle):
 * the owner's objects stay its own, and its destroy ends them for every
 * importer.  The owner serves these requests in its engine thread: each
 * is a table look-up and one answer (sent without waiting: an importer
 * that does not read is cut off).  A process serves at most
 * IMP_MAX_SERVED connections at once, IMP_MAX_PER_PEER of one process,
 * and closes one that has not proven a file IMP_PROVE_WAIT_S after it
 * began.
 *
 * Everything received is hostile: records of a fixed size and magic, the
 * record of the command file read with its bounds and checked against
 * the kernel's word (SO_PEERCRED) for who answers, answers checked for
 * range before use.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>

#include "shca.h"
#include "../common/slot.h"
#include "../engine/engine.h"
#include "../shm/peer.h"
#include "../shm/sock.h"

#define REC_MAGIC	0x454c494641434853ull	/* "SHCAFILE" */
#define REC_VERSION	1
#define IMP_MAGIC	0x504d494143434853ull	/* "SHCCAIMP" */
/* an importer waits this long for an answer */
#define IMP_ANSWER_TIMEOUT_S	30
/* importers' connections an owner serves at once: more are closed */
#define IMP_MAX_SERVED	256
/* ... of them, one process's (SO_PEERCRED) */
#define IMP_MAX_PER_PEER	64
/* a connection proves its file within this time of its start, or is
 * closed */
#define IMP_PROVE_WAIT_S	5
/* entries of one process in the table of importers (a process imports
 * a PD once per context): one cannot take every place */
#define IMP_MAX_SHADOWS_PER_PEER	32

/* At the start of every command file. */
struct cmd_rec {
	uint64_t magic;
	uint32_t version;
	int32_t slot;
	int32_t pid;
	uint32_t pad;
};

enum imp_op {
	IMP_FILE = 1,
	IMP_PD,
	IMP_MR,
	IMP_DEALLOC_PD,
	IMP_DEREG_MR,
	IMP_DM,
	IMP_FREE_DM,
	IMP_PD_SHADOW,
	IMP_PD_DROP,
};

struct imp_req {
	uint64_t magic;
	uint32_t op;
	uint32_t handle;
	uint32_t shadow;		/* IMP_PD_SHADOW, _DROP */
	int32_t slot;			/* IMP_PD_SHADOW: the importer's */
};

struct imp_ans {
	int32_t ret;
	uint32_t pd;			/* the PD's identity */
	uint32_t lkey, rkey, access, pad;
	uint64_t length, iova;
	char dev[IBV_SYSFS_NAME_MAX];	/* IMP_FILE: the device's name */
};

/* The importer's way to the owner of a file. */
struct shca_rfile {
	int fd;				/* the control connection */
	int slot;
	pid_t pid;
	pid_t opener;			/* this process (a forked child
					 * shares the connection) */
	pthread_mutex_t lock;		/* one request at a time */
};

/* The owner's side of one connection (the engine thread's). */
struct imp_srv {
	struct shca_timer timer;	/* to prove the file by */
	int fd;
	pid_t peer;			/* the process at the other end */
	bool proven;			/* IMP_FILE answered: dev, ino set */
	dev_t dev;
	ino_t ino;
	struct imp_srv *next;
};

static pthread_mutex_t srv_lock = PTHREAD_MUTEX_INITIALIZER;
static struct imp_srv *srv_list;	/* under srv_lock */
static unsigned int srv_count;		/* under srv_lock */

/* ------------------------------------------------------------------ */
/* The record                                                          */

/* Who owns the file fd (just made by this process): its slot and pid. */
void shca_rimport_record(int fd)
{
	const struct shca_slot *s = shca_slot_get();
	struct cmd_rec r;

	if (!s)
		return;
	memset(&r, 0, sizeof(r));
	r.magic = REC_MAGIC;
	r.version = REC_VERSION;
	r.slot = s->slot;
	r.pid = shca_getpid();
	if (pwrite(fd, &r, sizeof(r), 0) != (ssize_t)sizeof(r))
		shca_dbg("command file record: %s", strerror(errno));
}

/* ------------------------------------------------------------------ */
/* The owner's side                                                    */

/* IMP_FILE: is fd the file of one of our open contexts?  Its device. */
static int srv_file(struct imp_srv *s, int fd, struct imp_ans *a)
{
	struct shca_device *dev;
	struct stat st;

	if (fstat(fd, &st))
		return -EINVAL;
	dev = shca_ufile_owner_dev(st.st_dev, st.st_ino);
	if (!dev)
		return -ENOENT;
	s->dev = st.st_dev;
	s->ino = st.st_ino;
	s->proven = true;
	snprintf(a->dev, sizeof(a->dev), "%s", dev->ibdev.name);
	return 0;
}

/* IMP_PD: a PD of the file, by handle. */
static int srv_pd(struct imp_srv *s, uint32_t handle, struct imp_ans *a)
{
	struct shca_obj *o = shca_obj_find_file(SHCA_OT_PD, handle, s->dev,
						s->ino);
	struct shca_pd *pd;

	if (!o)
		return -ENOENT;
	pd = container_of(o, struct shca_pd, obj);
	a->pd = pd->prot->obj.handle;
	shca_obj_put(o);
	return 0;
}

/* IMP_MR: an MR of the file, by handle. */
static int srv_mr(struct imp_srv *s, uint32_t handle, struct imp_ans *a)
{
	struct shca_obj *o = shca_obj_find_file(SHCA_OT_MR, handle, s->dev,
						s->ino);
	struct shca_mr *mr;

	if (!o)
		return -ENOENT;
	mr = container_of(o, struct shca_mr, obj);
	a->pd = mr->pd->prot->obj.handle;
	a->lkey = mr->ibmr.lkey;
	a->rkey = mr->ibmr.rkey;
	a->access = mr->access;
	a->length = mr->ibmr.length;
	a->iova = mr->iova;
	shca_obj_put(o);
	return 0;
}

/* IMP_DM: a DM of the file, by handle: its length, and a descriptor of
 * its memfd in *fd (the caller closes it once sent). */
static int srv_dm(struct imp_srv *s, uint32_t handle, struct imp_ans *a,
		  int *fd)
{
	struct shca_obj *o = shca_obj_find_file(SHCA_OT_DM, handle, s->dev,
						s->ino);
	struct shca_dm *dm;

	if (!o)
		return -ENOENT;
	dm = container_of(o, struct shca_dm, obj);
	a->length = dm->length;
	*fd = fcntl(dm->fd, F_DUPFD_CLOEXEC, 0);
	shca_obj_put(o);
	return *fd < 0 ? -ENOMEM : 0;
}

/* IMP_DEALLOC_PD, IMP_DEREG_MR, IMP_FREE_DM: the owner's destroy, as if
 * through its own name (docs/import.md: a destroy through any name
 * destroys). */
static int srv_destroy(struct imp_srv *s, enum shca_otype t, uint32_t handle)
{
	struct shca_obj *o = shca_obj_find_file(t, handle, s->dev, s->ino);

	if (!o)
		return -ENOENT;
	if (t == SHCA_OT_PD)
		return shca_pd_destroy(container_of(o, struct shca_pd, obj));
	if (t == SHCA_OT_DM)
		return shca_dm_destroy(container_of(o, struct shca_dm, obj));
	return shca_mr_destroy(container_of(o, struct shca_mr, obj));
}

/* ------------------------------------------------------------------ */
/* The importers of this process's PDs                                 */

/*
 * The table peers read (arena.h shca_pd_imp_shm), and which connection
 * each entry came on: an entry lives until its importer destroys its
 * shadow (IMP_PD_DROP), its connection ends, or the PD goes here
 * (shca_rimport_pd_gone).  Written under tab_lock, by the engine thread
 * (the requests) and by whichever thread destroys a PD.
 */
static pthread_mutex_t tab_lock = PTHREAD_MUTEX_INITIALIZER;
static struct imp_srv *tab_conn[SHCA_ARENA_PD_IMPS];	/* NULL: free */
static unsigned int tab_used;				/* entries used */
static pid_t tab_pid;			/* whose they are (not a forked
					 * child's: its arena is new) */

/* A forked child's copy of the entries is its parent's (its arena is
 * new): forgotten.  tab_lock held. */
static void tab_own(void)
{
	if (tab_used && tab_pid != shca_getpid()) {
		memset(tab_conn, 0, sizeof(tab_conn));
		tab_used = 0;
	}
}

static struct shca_pd_imp_shm *tab(void)
{
	struct shca_arena *a = shca_arena_self();

	return a ? shca_arena_pd_imps(a->base, a->size) : NULL;
}

/* The entries of s (NULL: of any connection) that match pd and shadow
 * (0: any) freed; tab_lock held. */
static void tab_free(struct imp_srv *s, uint32_t pd, uint32_t shadow)
{
	static const struct shca_pd_imp_shm none;
	struct shca_pd_imp_shm *t, e;
	unsigned int i;

	tab_own();
	if (!tab_used)
		return;		/* (every PD's destroy comes here) */
	t = tab();
	for (i = 0; t && tab_used && i < SHCA_ARENA_PD_IMPS; i++) {
		if (!tab_conn[i] || (s && tab_conn[i] != s) ||
		    !shca_pd_imp_shm_read(&t[i], &e) ||
		    (pd && e.pd != pd) || (shadow && e.shadow != shadow))
			continue;
		shca_pd_imp_shm_write(&t[i], &none);
		tab_conn[i] = NULL;
		tab_used--;
	}
}

/* IMP_PD_SHADOW: r's importer (s's process, its slot as it says) made
 * shadow r->shadow of the PD r->handle names.  A full table, or one that
 * holds IMP_MAX_SHADOWS_PER_PEER of that process's, takes no more: that
 * importer's R_Keys fail through our QPs.  A slot that is not the
 * process's only makes the entry useless (the responder finds another
 * pid there). */
static void srv_pd_shadow(struct imp_srv *s, const struct imp_req *r)
{
	struct shca_pd_imp_shm *t, e = { 0 };
	unsigned int i, mine = 0, free_at = SHCA_ARENA_PD_IMPS;
	struct shca_obj *o;
	struct shca_pd *pd;

	if (!r->shadow || r->slot < 0 || r->slot >= (int32_t)SHCA_NUM_SLOTS)
		return;
	o = shca_obj_find_file(SHCA_OT_PD, r->handle, s->dev, s->ino);
	if (!o)
		return;
	pd = container_of(o, struct shca_pd, obj)->prot;
	e.pd = pd->obj.handle;
	/* our WQEs on it may name the importer's L_Keys (import_key.c) */
	__atomic_store_n(&pd->imported, true, __ATOMIC_RELEASE);
	shca_obj_put(o);
	e.slot = (uint32_t)r->slot;
	e.pid = (uint32_t)s->peer;
	e.shadow = r->shadow;
	pthread_mutex_lock(&tab_lock);
	tab_own();
	t = tab();
	for (i = 0; t && i < SHCA_ARENA_PD_IMPS; i++) {
		struct shca_pd_imp_shm c;

		if (!tab_conn[i]) {
			free_at = MIN(free_at, i);
			continue;
		}
		mine += tab_conn[i]->peer == s->peer;
		if (tab_conn[i] == s && shca_pd_imp_shm_read(&t[i], &c) &&
		    c.pd == e.pd && c.shadow == e.shadow)
			break;		/* known already */
	}
	if (t && i == SHCA_ARENA_PD_IMPS && free_at < SHCA_ARENA_PD_IMPS &&
	    mine < IMP_MAX_SHADOWS_PER_PEER) {
		shca_pd_imp_shm_write(&t[free_at], &e);
		tab_conn[free_at] = s;
		tab_used++;
		tab_pid = shca_getpid();
		/* a destroy of the PD since the look-up above may have
		 * forgotten its entries before this one was there */
		o = shca_obj_find_file(SHCA_OT_PD, r->handle, s->dev, s->ino);
		if (o)
			shca_obj_put(o);
		else
			tab_free(s, e.pd, e.shadow);
	}
	pthread_mutex_unlock(&tab_lock);
}

void shca_rimport_pd_gone(uint32_t pd)
{
	pthread_mutex_lock(&tab_lock);
	tab_free(NULL, pd, 0);
	pthread_mutex_unlock(&tab_lock);
}

/* The end of a connection (engine thread). */
static void srv_end(int fd, struct imp_srv *s)
{
	struct imp_srv **pp;

	pthread_mutex_lock(&tab_lock);
	tab_free(s, 0, 0);
	pthread_mutex_unlock(&tab_lock);
	shca_timer_cancel(&s->timer);
	shca_engine_unwatch(fd);
	close(fd);
	pthread_mutex_lock(&srv_lock);
	for (pp = &srv_list; *pp; pp = &(*pp)->next)
		if (*pp == s) {
			*pp = s->next;
			srv_count--;
			break;
		}
	pthread_mutex_unlock(&srv_lock);
	free(s);
}

/* A connection that has not proven its file in time is closed: without
 * that, connections that never send would hold every place. */
static void srv_idle(struct shca_timer *t)
{
	struct imp_srv *s = container_of(t, struct imp_srv, timer);

	if (!s->proven)
		srv_end(s->fd, s);
}

/* A request on a connection (engine thread): one record, one answer.  A
 * descriptor comes with IMP_FILE only, once. */
static void srv_event(int fd, uint32_t events, void *arg)
{
	struct imp_srv *s = arg;
	struct imp_req r;
	struct imp_ans a;
	int got = -1, out = -1, n;
	ssize_t sent;

	(void)events;
	n = shca_sock_recv_fds(fd, &r, sizeof(r), &got, 1);
	if (n == -EAGAIN || n == -EINTR)
		return;
	if (n < 0 || r.magic != IMP_MAGIC ||
	    (n == 1) != (r.op == IMP_FILE) ||
	    (r.op != IMP_FILE && !s->proven) ||
	    (r.op == IMP_FILE && s->proven)) {
		if (n == 1)
			close(got);
		srv_end(fd, s);
		return;
	}
	memset(&a, 0, sizeof(a));
	switch (r.op) {
	case IMP_FILE:
		a.ret = srv_file(s, got, &a);
		close(got);
		break;
	case IMP_PD:
		a.ret = srv_pd(s, r.handle, &a);
		break;
	case IMP_MR:
		a.ret = srv_mr(s, r.handle, &a);
		break;
	case IMP_DEALLOC_PD:
		a.ret = srv_destroy(s, SHCA_OT_PD, r.handle);
		break;
	case IMP_DEREG_MR:
		a.ret = srv_destroy(s, SHCA_OT_MR, r.handle);
		break;
	case IMP_DM:
		a.ret = srv_dm(s, r.handle, &a, &out);
		break;
	case IMP_FREE_DM:
		a.ret = srv_destroy(s, SHCA_OT_DM, r.handle);
		break;
	case IMP_PD_SHADOW:
		srv_pd_shadow(s, &r);
		return;			/* no answer */
	case IMP_PD_DROP:
		pthread_mutex_lock(&tab_lock);
		if (r.shadow)
			tab_free(s, 0, r.shadow);
		pthread_mutex_unlock(&tab_lock);
		return;
	default:
		a.ret = -EINVAL;
		break;
	}
	/* one answer, with the DM's descriptor for IMP_DM; never blocking
	 * the engine thread on an importer that does not read */
	sent = shca_sock_sendmsg_fds(fd, &a, sizeof(a), &out, out >= 0,
				     MSG_DONTWAIT);
	if (out >= 0)
		close(out);
	if (sent != (ssize_t)sizeof(a))
		srv_end(fd, s);
}

/* A control connection for this service (engine thread, shm/peer.c):
 * within the limits (all, and one process's), watched until it proves a
 * file or its time runs out. */
static void on_control(int fd)
{
	struct ucred cred;
	socklen_t len = sizeof(cred);
	struct imp_srv *s, *o;
	unsigned int mine = 0;

	s = calloc(1, sizeof(*s));
	if (!s || getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len)) {
		free(s);
		close(fd);
		return;
	}
	s->fd = fd;
	s->peer = cred.pid;
	s->timer.fn = srv_idle;
	pthread_mutex_lock(&srv_lock);
	for (o = srv_list; o; o = o->next)
		mine += o->peer == s->peer;
	if (srv_count >= IMP_MAX_SERVED || mine >= IMP_MAX_PER_PEER) {
		pthread_mutex_unlock(&srv_lock);
		free(s);
		close(fd);
		return;
	}
	s->next = srv_list;
	srv_list = s;
	srv_count++;
	pthread_mutex_unlock(&srv_lock);
	if (shca_engine_watch(fd, srv_event, s)) {
		srv_end(fd, s);
		return;
	}
	shca_timer_arm(&s->timer,
		       shca_now_ns() + IMP_PROVE_WAIT_S * 1000000000ull);
}

void shca_rimport_serve(void)
{
	shca_peer_on_control(SHCA_CTRL_IMPORT, on_control);
}

/* ------------------------------------------------------------------ */
/* The importer's side                                                 */

/* One request (with fd if >= 0) and its answer: 0 or the answer's
 * -errno, -EIO when the owner is gone or answers nonsense.  got: a
 * descriptor the answer brings (-1: none; closed unless the answer is
 * 0); NULL: none expected (one sent anyway is not received). */
static int rf_call_fd(struct shca_rfile *rf, uint32_t op, uint32_t handle,
		      int fd, struct imp_ans *a, int *got)
{
	struct imp_req r = { IMP_MAGIC, op, handle, 0, 0 };
	int ret = -EIO;
	ssize_t n;

	if (got)
		*got = -1;
	pthread_mutex_lock(&rf->lock);
	if (rf->fd >= 0 &&
	    !shca_sock_send_fds(rf->fd, &r, sizeof(r), &fd, fd >= 0)) {
		if (!got)
			n = recv(rf->fd, a, sizeof(*a), 0);
		else if (shca_sock_recv_fds(rf->fd, a, sizeof(*a), got, 1) < 0)
			n = -1;	/* short, long, or more descriptors */
		else
			n = (ssize_t)sizeof(*a);
		if (n == (ssize_t)sizeof(*a))
			ret = a->ret > 0 || a->ret < -4095 ? -EIO : a->ret;
	}
	pthread_mutex_unlock(&rf->lock);
	if (ret && got && *got >= 0) {
		close(*got);
		*got = -1;
	}
	return ret;
}

static int rf_call(struct shca_rfile *rf, uint32_t op, uint32_t handle,
		   int fd, struct imp_ans *a)
{
	return rf_call_fd(rf, op, handle, fd, a, NULL);
}

void shca_rfile_free(struct shca_rfile *rf)
{
	close(rf->fd);
	pthread_mutex_destroy(&rf->lock);
	free(rf);
}

/* The device of this process named name (the owner's answer), or NULL. */
static struct shca_device *device_named(const char *name)
{
	struct shca_device **arr, *dev = NULL;
	int i, n;

	arr = shca_devices_snapshot(&n);
	for (i = 0; arr && i < n; i++)
		if (!strcmp(arr[i]->ibdev.name, name))
			dev = arr[i];
	free(arr);
	return dev;
}

/*
 * rdma-core's errors: a file no process owns (forged, or its owner has
 * closed it) EINVAL, as a descriptor that is no uverbs file; a context of
 * ours that is closed EOPNOTSUPP (import.c); an owner that serves no
 * imports (it has not allocated a PD yet: docs/import.md) ECONNREFUSED.
 */
struct ibv_context *shca_rimport_device(int cmd_fd)
{
	struct timeval tv = { IMP_ANSWER_TIMEOUT_S, 0 };
	struct shca_ufile *uf;
	struct shca_rfile *rf;
	struct shca_device *dev;
	struct ibv_context *ctx;
	struct cmd_rec rec;
	struct imp_ans a;
	pid_t pid = 0;
	int fd, ret;

	if (pread(cmd_fd, &rec, sizeof(rec), 0) != (ssize_t)sizeof(rec) ||
	    rec.magic != REC_MAGIC || rec.version != REC_VERSION ||
	    rec.slot < 0 || rec.slot >= (int)SHCA_NUM_SLOTS || rec.pid <= 0)
		return SHCA_ERR_PTR(EINVAL);
	if (rec.pid == shca_getpid())
		return SHCA_ERR_PTR(EOPNOTSUPP);
	if (!shca_slot_get())
		return NULL;
	ret = shca_transport_init();
	if (ret)
		return SHCA_ERR_PTR(-ret);
	fd = shca_peer_control_connect(rec.slot, SHCA_CTRL_IMPORT);
	if (fd < 0) {
		/* nobody answers in the slot: the owner has not started
		 * serving (alive), or is gone (or never was) */
		if (fd == -ENOMEM)
			return SHCA_ERR_PTR(ENOMEM);
		return SHCA_ERR_PTR((fd == -ENOENT || fd == -ECONNREFUSED) &&
				    !kill(rec.pid, 0) ? ECONNREFUSED :
							EINVAL);
	}
	/* the process in the slot is the one the record names */
	if (shca_sock_peer_cred(fd, &pid) || pid != rec.pid) {
		close(fd);
		return SHCA_ERR_PTR(EINVAL);
	}
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	rf = calloc(1, sizeof(*rf));
	if (!rf) {
		close(fd);
		return SHCA_ERR_PTR(ENOMEM);
	}
	rf->fd = fd;
	rf->slot = rec.slot;
	rf->pid = pid;
	rf->opener = shca_getpid();
	pthread_mutex_init(&rf->lock, NULL);
	ret = rf_call(rf, IMP_FILE, 0, cmd_fd, &a);
	a.dev[sizeof(a.dev) - 1] = '\0';
	dev = ret ? NULL : device_named(a.dev);
	if (!dev) {
		shca_rfile_free(rf);
		return SHCA_ERR_PTR(ret == -ENOMEM ? ENOMEM :
				    ret ? EINVAL : ENODEV);
	}
	uf = shca_ufile_new_remote(dev, cmd_fd, rf);
	if (!uf) {
		shca_rfile_free(rf);
		return SHCA_ERR_PTR(ENOMEM);
	}
	ctx = shca_context_import(uf, cmd_fd);
	if (!ctx) {
		ret = errno;
		shca_ufile_put(uf);
		errno = ret;
	}
	return ctx;
}

int shca_rimport_pd(struct shca_rfile *rf, uint32_t handle, int *slot,
		    pid_t *pid, uint32_t *pd_id)
{
	struct imp_ans a;
	int ret = rf_call(rf, IMP_PD, handle, -1, &a);

	if (ret)
		return ret == -EIO ? -ENOENT : ret;
	*slot = rf->slot;
	*pid = rf->pid;
	*pd_id = a.pd;
	return 0;
}

/* IMP_PD_SHADOW (drop false) or IMP_PD_DROP: a message with no answer. */
void shca_rimport_pd_shadow(struct shca_rfile *rf, uint32_t handle,
			    uint32_t shadow, bool drop)
{
	const struct shca_slot *me = shca_slot_get();
	struct imp_req r = { IMP_MAGIC, drop ? IMP_PD_DROP : IMP_PD_SHADOW,
			     handle, shadow, me ? me->slot : -1 };

	/* a forked child's shadows are its parent's entries */
	if (rf->opener != shca_getpid())
		return;
	pthread_mutex_lock(&rf->lock);
	if (rf->fd >= 0 && (me || drop))
		(void)shca_sock_send_fds(rf->fd, &r, sizeof(r), NULL, 0);
	pthread_mutex_unlock(&rf->lock);
}

int shca_rimport_mr(struct shca_rfile *rf, uint32_t handle,
		    struct shca_rmr *m)
{
	struct imp_ans a;
	int ret = rf_call(rf, IMP_MR, handle, -1, &a);

	if (ret)
		return ret == -EIO ? -ENOENT : ret;
	m->lkey = a.lkey;
	m->rkey = a.rkey;
	m->access = a.access;
	m->pd = a.pd;
	m->length = a.length;
	m->iova = a.iova;
	return 0;
}

/* The answer's descriptor is checked by dm.c (shca_dm_map_remote). */
int shca_rimport_dm(struct shca_rfile *rf, uint32_t handle,
		    uint64_t *length, int *fd)
{
	struct imp_ans a;
	int ret = rf_call_fd(rf, IMP_DM, handle, -1, &a, fd);

	if (ret)
		return ret == -EIO ? -ENOENT : ret;
	if (*fd < 0)
		return -EPROTO;	/* an answer without its memory */
	*length = a.length;
	return 0;
}

int shca_rimport_destroy_call(struct shca_rfile *rf, enum shca_otype t,
			      uint32_t handle)
{
	struct imp_ans a;
	int ret = rf_call(rf,
			  t == SHCA_OT_PD ? IMP_DEALLOC_PD :
			  t == SHCA_OT_DM ? IMP_FREE_DM :
					    IMP_DEREG_MR,
			  handle, -1, &a);

	return ret == -EIO ? -ENOENT : ret;
}
