// SPDX-License-Identifier: MIT
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/uio.h>

#include "../common/dma.h"
#include "../common/log.h"
#include "../common/slot.h"
#include "../common/stat.h"
#include "../common/util.h"
#include "../engine/engine.h"
#include "arena.h"
#include "peer.h"
#include "rundir.h"
#include "segmap.h"
#include "sock.h"

#define CONNECT_TIMEOUT_S 5

#define CHAN_REQ_MAGIC	0x6e61684348434853ull	/* "SHCHChan" */
#define CTRL_REQ_MAGIC	0x6c72744348434853ull	/* "SHCHCtrl" */

/* A peer asks for the eventfd of one of our completion channels. */
struct chan_req {
	uint64_t magic;
	uint32_t idx;
	uint32_t gen;
};

struct shca_peer_chan {
	uint32_t gen;
	int fd;			/* -1: not known */
};

static pthread_mutex_t peers_lock = PTHREAD_MUTEX_INITIALIZER;
static struct shca_peer *peers[SHCA_NUM_SLOTS];
static int listen_fd = -1;
static pid_t listen_pid;
static int (*channel_fd_fn)(uint32_t idx, uint32_t gen);
/* the control services' servers, by service (peer.h) */
static void (*ctrl_fn[SHCA_CTRL_NUM])(int fd);

static uint16_t listen_port;

/*
 * A refused peer (another user, a pid that does not own the arena, an
 * arena or descriptor that fails its checks): counted, and logged the
 * first times only (a peer can make it happen in a loop).
 */
static void refused(enum shca_stat what, int slot, const char *why)
{
	static unsigned int logged;

	shca_stat_add(shca_stat_proc(), what, 1);
	if (__atomic_fetch_add(&logged, 1, __ATOMIC_RELAXED) < 8)
		shca_warn("refusing same-host peer%s%d: %s",
			  slot >= 0 ? " in slot " : " ", slot, why);
}

/*
 * Is fd an eventfd?  Doorbells and channels are written with write(2): a
 * pipe or a socket passed in their place could block us.  Where /proc
 * cannot tell, it is taken as one.
 */
static bool is_eventfd(int fd)
{
	char path[32], link[64];
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	n = readlink(path, link, sizeof(link) - 1);
	if (n < 0)
		return true;
	link[n] = '\0';
	return !strcmp(link, "anon_inode:[eventfd]");
}

void shca_peer_on_channel_request(int (*fn)(uint32_t idx, uint32_t gen))
{
	__atomic_store_n(&channel_fd_fn, fn, __ATOMIC_RELEASE);
}

void shca_peer_on_control(enum shca_ctrl_svc svc, void (*fn)(int fd))
{
	__atomic_store_n(&ctrl_fn[svc], fn, __ATOMIC_RELEASE);
}

/* The answer to a channel request: the descriptor, or none (fd < 0). */
static int send_fd(int sock, int fd)
{
	int32_t answer = fd >= 0 ? 0 : -ENOENT;

	return shca_sock_send_fds(sock, &answer, sizeof(answer), &fd,
				  fd >= 0 ? 1 : 0);
}

/* ------------------------------------------------------------------ */
/* Owner side: the listener, run by the engine thread                  */

/*
 * After the hello a peer sends nothing, or requests for channel fds, or
 * one control request that makes the connection a control connection
 * (handed to the verbs layer's server, shca_peer_on_control); a hang-up
 * or anything else ends the connection.
 */
static void on_conn_event(int fd, uint32_t events, void *arg)
{
	int (*fn)(uint32_t, uint32_t) =
		__atomic_load_n(&channel_fd_fn, __ATOMIC_ACQUIRE);
	void (*cfn)(int) = NULL;
	struct chan_req req;
	ssize_t n;

	(void)arg;
	n = (events & EPOLLIN) ? read(fd, &req, sizeof(req)) : 0;
	/* a control request names its service in idx (peer.h) */
	if (n == (ssize_t)sizeof(req) && req.magic == CTRL_REQ_MAGIC &&
	    req.idx < SHCA_CTRL_NUM)
		cfn = __atomic_load_n(&ctrl_fn[req.idx], __ATOMIC_ACQUIRE);
	if (cfn && !(events & (EPOLLHUP | EPOLLERR))) {
		/* the server reads it from now on, with its own checks */
		shca_engine_unwatch(fd);
		cfn(fd);
		return;
	}
	if (n == (ssize_t)sizeof(req) && req.magic == CHAN_REQ_MAGIC) {
		int cfd = fn ? fn(req.idx, req.gen) : -1;

		send_fd(fd, cfd);
		if (cfd >= 0)
			close(cfd);
		if (!(events & (EPOLLHUP | EPOLLERR)))
			return;
	}
	if (n < 0 && errno == EAGAIN)
		return;
	shca_engine_unwatch(fd);
	close(fd);
}

static void send_hello(int fd)
{
	struct shca_arena *a = shca_arena_self();
	const struct shca_slot *s = shca_slot_get();
	struct shca_hello h;
	int fds[3], ret;

	if (!a || !s)
		return;
	memset(&h, 0, sizeof(h));
	h.magic = SHCA_HELLO_MAGIC;
	h.version = SHCA_ARENA_VERSION;
	h.pid = shca_getpid();
	h.slot = (uint32_t)s->slot;
	h.uid = getuid();
	h.arena_addr = (uint64_t)(uintptr_t)a->base;
	fds[0] = a->fd;
	fds[1] = shca_engine_doorbell_fd();
	fds[2] = a->pool_fd;
	ret = shca_sock_send_fds(fd, &h, sizeof(h), fds, 3);
	if (ret)
		shca_dbg("hello: %s", strerror(-ret));
}

static struct shca_listen_backoff listen_backoff;

static void on_listen_event(int fd, uint32_t events, void *arg)
{
	int c;

	(void)events;
	(void)arg;
	c = accept4(fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
	if (c < 0) {
		/* out of fds: pause, or epoll wakes us again at once */
		listen_backoff.fd = fd;
		if (shca_listen_failed(&listen_backoff, errno))
			shca_stat_add(shca_stat_proc(),
				      SHCA_STAT_SHM_ACCEPT_BACKOFFS, 1);
		return;
	}
	shca_listen_accepted(&listen_backoff);
	/* CMA and a shared arena are for the same user only: the kernel's
	 * word for who connected (SO_PEERCRED), not the file's mode */
	if (shca_sock_peer_cred(c, NULL)) {
		refused(SHCA_STAT_SHM_CRED_REFUSED, -1,
			"a connection from another user");
		close(c);
		return;
	}
	send_hello(c);
	if (shca_engine_watch(c, on_conn_event, NULL))
		close(c);
}

/* At exit, the name goes with the process (a crash leaves it: the next
 * owner of the port removes it, shca_sock_bind). */
__attribute__((destructor)) static void peer_exit(void)
{
	if (listen_fd >= 0 && listen_pid == shca_getpid())
		shca_sock_unbind(listen_port);
}

int shca_peer_listen(void)
{
	const struct shca_slot *s;
	bool reclaimed;
	int fd, ret;

	pthread_mutex_lock(&peers_lock);
	if (listen_fd >= 0 && listen_pid == shca_getpid()) {
		pthread_mutex_unlock(&peers_lock);
		return 0;
	}
	if (listen_fd >= 0) {
		/* forked child: the parent's listener and peers */
		close(listen_fd);
		listen_fd = -1;
		memset(peers, 0, sizeof(peers));
	}
	ret = shca_engine_start();
	s = ret ? NULL : shca_slot_get();
	if (!ret && !s)
		ret = -errno;
	if (!ret && !shca_arena_self())
		ret = -errno;
	if (ret)
		goto out;
	fd = shca_sock_bind(s->port, &reclaimed);
	shca_stat_add(shca_stat_proc(), SHCA_STAT_SHM_DIR_REFUSED,
		      shca_rundir_take_refusals());
	if (reclaimed)
		shca_stat_add(shca_stat_proc(), SHCA_STAT_SHM_STALE_NAMES, 1);
	if (fd < 0 || listen(fd, 128)) {
		ret = fd < 0 ? fd : -errno;
		shca_err("cannot listen for same-host peers on port %u: %s",
			 s->port, strerror(-ret));
		if (fd >= 0)
			close(fd);
		goto out;
	}
	ret = shca_engine_watch(fd, on_listen_event, NULL);
	if (ret) {
		close(fd);
		goto out;
	}
	listen_fd = fd;
	listen_pid = shca_getpid();
	listen_port = s->port;
out:
	pthread_mutex_unlock(&peers_lock);
	return ret;
}

/* ------------------------------------------------------------------ */
/* Requester side                                                      */

static void on_peer_event(int fd, uint32_t events, void *arg)
{
	struct shca_peer *p = arg;
	char buf[64];

	if (events & (EPOLLHUP | EPOLLERR) || read(fd, buf, sizeof(buf)) <= 0) {
		shca_dbg("peer in slot %d (pid %d) is gone", p->slot,
			 (int)p->pid);
		shca_peer_set_dead(p);
		shca_engine_unwatch(fd);
		close(fd);
		p->sock = -1;
	}
}

static bool probe_cma(struct shca_peer *p, uint64_t arena_addr)
{
	uint64_t magic = 0;
	struct iovec l = { &magic, sizeof(magic) };
	struct iovec r = { (void *)(uintptr_t)arena_addr, sizeof(magic) };

	if (process_vm_readv(p->pid, &l, 1, &r, 1, 0) != sizeof(magic)) {
		shca_warn_once("process_vm_readv on pid %d refused (%s): "
			       "same-host peers need ptrace permission "
			       "(same user; Yama ptrace_scope)",
			       (int)p->pid, strerror(errno));
		return false;
	}
	return magic == SHCA_ARENA_MAGIC;
}

static struct shca_peer *peer_self(const struct shca_slot *s)
{
	struct shca_arena *a = shca_arena_self();
	struct shca_peer *p;

	if (!a)
		return NULL;
	p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	p->slot = s->slot;
	p->pid = shca_getpid();
	p->sock = -1;
	p->arena = a->base;
	p->arena_size = a->size;
	p->doorbell = shca_engine_doorbell_fd();
	p->self = true;
	p->cma = true;
	p->lanes = shca_arena_lanes(a->base);
	pthread_mutex_init(&p->chan_lock, NULL);
	return p;
}

static void refuse_layout(int slot)
{
	static unsigned int logged;

	if (__atomic_fetch_add(&logged, 1, __ATOMIC_RELAXED) < 4)
		shca_warn("refusing same-host peer in slot %d: its arena's "
			  "header changed under us", slot);
}

/*
 * The arena's lanes and segment table, at the offsets its header gives
 * in our mapping (checked again here: shca_arena_map_peer read the header
 * before it mapped the file), and its life word.  0 or -EPROTO.
 */
static int peer_tables(struct shca_peer *p, const struct shca_seg_shm **segs)
{
	const struct shca_arena_hdr *h = p->arena;
	uint64_t lanes = __atomic_load_n(&h->lanes_off, __ATOMIC_RELAXED);
	uint64_t seg = __atomic_load_n(&h->seg_table_off, __ATOMIC_RELAXED);
	uint64_t size = p->arena_size;

	if (lanes < sizeof(*h) || lanes % 8 || lanes > size ||
	    size - lanes < SHCA_ARENA_LANE_BYTES ||
	    seg < sizeof(*h) || seg % 8 || seg > size ||
	    size - seg < (uint64_t)SHCA_ARENA_SEG_ENTRIES *
				 sizeof(struct shca_seg_shm))
		return -EPROTO;
	p->lanes = (uint64_t *)((char *)p->arena + lanes);
	*segs = (const struct shca_seg_shm *)((char *)p->arena + seg);
	p->life = shca_arena_life_word(p->arena);
	return 0;
}

/*
 * Connect to the owner of slot and map its arena, trusting nothing it
 * says that the kernel does not confirm: the listener is our uid and its
 * pid (SO_PEERCRED) is the one the hello and the arena name as owner; the
 * arena passes shca_arena_map_peer's checks, the doorbell is an eventfd,
 * the pool a memfd we may map (shca_segmap_check_pool).
 */
static struct shca_peer *peer_connect(int slot)
{
	const struct shca_seg_shm *segs;
	struct shca_peer *p;
	struct shca_hello h;
	int fd, fds[3], ret;
	pid_t owner = 0;

	fd = shca_sock_connect(slot, CONNECT_TIMEOUT_S, &owner);
	if (fd < 0) {
		if (fd == -EACCES)
			refused(SHCA_STAT_SHM_CRED_REFUSED, slot,
				"its socket is another user's");
		errno = -fd;
		return NULL;
	}
	ret = shca_sock_recv_hello(fd, &h, fds);
	if (ret) {
		if (ret == -EPROTO)
			refused(SHCA_STAT_SHM_CRED_REFUSED, slot,
				"a hello not of our user");
		goto err_close;
	}
	if (h.pid != owner || owner <= 0 || h.slot != (uint32_t)slot) {
		refused(SHCA_STAT_SHM_CRED_REFUSED, slot,
			"the hello names another pid or slot than the "
			"listener's");
		ret = -EACCES;
		goto err_fds;
	}
	if (!is_eventfd(fds[1])) {
		refused(SHCA_STAT_SHM_ARENA_REFUSED, slot,
			"its doorbell is not an eventfd");
		ret = -EPROTO;
		goto err_fds;
	}
	if (shca_segmap_check_pool(fds[2])) {
		refused(SHCA_STAT_SHM_ARENA_REFUSED, slot,
			"its pool is not a memfd of ours sealed against "
			"shrinking");
		ret = -EPROTO;
		goto err_fds;
	}
	p = calloc(1, sizeof(*p));
	if (!p) {
		ret = -ENOMEM;
		goto err_fds;
	}
	p->slot = slot;
	p->pid = owner;
	p->sock = fd;
	pthread_mutex_init(&p->chan_lock, NULL);
	p->doorbell = fds[1];
	p->arena = shca_arena_map_peer(fds[0], owner, &p->arena_size);
	ret = p->arena ? 0 : -errno;
	close(fds[0]);
	if (!ret && peer_tables(p, &segs)) {
		refuse_layout(slot);
		munmap(p->arena, p->arena_size);
		ret = -EPROTO;
	}
	if (!ret) {
		const struct shca_arena_hdr *ah = p->arena;

		p->segmap = shca_segmap_new(fds[2], segs, &ah->seg_table_gen,
					    owner);
		ret = p->segmap ? 0 : -ENOMEM;
		if (ret)
			munmap(p->arena, p->arena_size);
	}
	if (ret) {
		if (ret == -EPROTO)
			shca_stat_add(shca_stat_proc(),
				      SHCA_STAT_SHM_ARENA_REFUSED, 1);
		close(fds[1]);
		close(fds[2]);
		free(p);
		goto err_close;
	}
	p->cma = probe_cma(p, h.arena_addr);
	if (shca_engine_watch(fd, on_peer_event, p))
		shca_warn("cannot watch peer %d for hang-up", slot);
	shca_dbg("peer in slot %d: pid %d, cma %d", slot, (int)p->pid, p->cma);
	return p;

err_fds:
	close(fds[0]);
	close(fds[1]);
	close(fds[2]);
err_close:
	close(fd);
	errno = -ret;
	return NULL;
}

struct shca_peer *shca_peer_get(int slot)
{
	const struct shca_slot *s = shca_slot_get();
	struct shca_peer *p;

	if (!s || slot < 0 || slot >= (int)SHCA_NUM_SLOTS) {
		errno = EINVAL;
		return NULL;
	}
	pthread_mutex_lock(&peers_lock);
	p = peers[slot];
	if (!p || shca_peer_dead(p)) {
		/* a dead peer's object stays allocated for whoever holds it */
		p = slot == s->slot ? peer_self(s) : peer_connect(slot);
		if (p)
			peers[slot] = p;
	}
	pthread_mutex_unlock(&peers_lock);
	return p;
}

struct shca_peer *shca_peer_self(void)
{
	static struct shca_peer *cached;
	static int cached_slot = -1;
	const struct shca_slot *s = shca_slot_get();
	struct shca_peer *p;

	if (!s)
		return NULL;
	if (__atomic_load_n(&cached_slot, __ATOMIC_ACQUIRE) == s->slot)
		return __atomic_load_n(&cached, __ATOMIC_RELAXED);
	p = shca_peer_get(s->slot);
	if (p) {
		__atomic_store_n(&cached, p, __ATOMIC_RELAXED);
		__atomic_store_n(&cached_slot, s->slot, __ATOMIC_RELEASE);
	}
	return p;
}

/* Ask the owner for channel idx's eventfd on a connection of our own
 * (the peer's main one is the engine thread's to watch).  fd or -errno. */
static int fetch_channel_fd(struct shca_peer *p, uint32_t idx, uint32_t gen)
{
	struct chan_req req = { CHAN_REQ_MAGIC, idx, gen };
	struct shca_hello h;
	int32_t answer = -EPROTO;
	int fd, fds[3], cfd = -EPROTO, n;
	pid_t owner = 0;

	/* the same owner as the first connection, or nothing */
	fd = shca_sock_connect(p->slot, CONNECT_TIMEOUT_S, &owner);
	if (fd < 0)
		return -ECONNREFUSED;
	if (owner != p->pid || shca_sock_recv_hello(fd, &h, fds)) {
		close(fd);
		return -ECONNREFUSED;
	}
	close(fds[0]);
	close(fds[1]);
	close(fds[2]);
	if (h.pid != p->pid || send(fd, &req, sizeof(req), MSG_NOSIGNAL) < 0)
		goto out;
	n = shca_sock_recv_fds(fd, &answer, sizeof(answer), fds, 1);
	if (n == 1 && !answer && is_eventfd(fds[0]))
		cfd = fds[0];
	else if (n == 1)
		close(fds[0]);
	if (n >= 0 && cfd < 0)
		cfd = answer ? answer : -EPROTO;
out:
	close(fd);
	return cfd;
}

/*
 * A control connection to the process in slot (its owner checked as for
 * the first connection: the pid its listener and hello name): a blocking
 * descriptor, or -errno.
 */
int shca_peer_control_connect(int slot, enum shca_ctrl_svc svc)
{
	struct chan_req req = { CTRL_REQ_MAGIC, (uint32_t)svc, 0 };
	struct shca_hello h;
	int fd, fds[3], ret;
	pid_t owner = 0;

	if (slot < 0 || slot >= (int)SHCA_NUM_SLOTS)
		return -EINVAL;
	fd = shca_sock_connect(slot, CONNECT_TIMEOUT_S, &owner);
	if (fd < 0)
		return fd;
	ret = shca_sock_recv_hello(fd, &h, fds);
	if (ret) {
		close(fd);
		return ret;
	}
	close(fds[0]);
	close(fds[1]);
	close(fds[2]);
	if (owner <= 0 || h.pid != owner || h.slot != (uint32_t)slot) {
		close(fd);
		return -EACCES;
	}
	if (send(fd, &req, sizeof(req), MSG_NOSIGNAL) != (ssize_t)sizeof(req)) {
		ret = -errno;
		close(fd);
		return ret;
	}
	return fd;
}

/* The eventfd of the peer's channel idx (generation gen), or -1. */
static int channel_fd(struct shca_peer *p, uint32_t idx, uint32_t gen)
{
	struct shca_peer_chan *c;
	int fd = -1;

	if (idx >= 4096)
		return -1;
	pthread_mutex_lock(&p->chan_lock);
	if (idx >= p->nchans) {
		unsigned int n = idx + 16, i;

		c = realloc(p->chans, n * sizeof(*c));
		if (!c)
			goto out;
		for (i = p->nchans; i < n; i++)
			c[i].fd = -1;
		p->chans = c;
		p->nchans = n;
	}
	c = &p->chans[idx];
	if (c->fd >= 0 && c->gen != gen) {
		close(c->fd);	/* a channel that is gone */
		c->fd = -1;
	}
	if (c->fd < 0) {
		int (*fn)(uint32_t, uint32_t) =
			__atomic_load_n(&channel_fd_fn, __ATOMIC_ACQUIRE);
		/* our own channel: no need (and no safe way, with the engine
		 * thread possibly waiting on a lock we hold) to ask over the
		 * socket */
		int r = p->self ? (fn ? fn(idx, gen) : -1) :
				  fetch_channel_fd(p, idx, gen);

		if (r < 0)
			goto out;
		c->fd = r;
		c->gen = gen;
	}
	fd = c->fd;
out:
	pthread_mutex_unlock(&p->chan_lock);
	return fd;
}

void shca_peer_prefetch_channel(struct shca_peer *p, struct shca_cq_shm *cq)
{
	uint32_t idx = __atomic_load_n(&cq->chan_idx, __ATOMIC_ACQUIRE);

	if (idx)
		channel_fd(p, idx - 1, cq->chan_gen);
}

void shca_peer_notify_cq(struct shca_peer *p, struct shca_cq_shm *cq)
{
	uint32_t idx = __atomic_load_n(&cq->chan_idx, __ATOMIC_ACQUIRE);
	uint64_t one = 1;
	int fd;

	__atomic_store_n(&cq->notify_pending, 1, __ATOMIC_RELEASE);
	fd = idx ? channel_fd(p, idx - 1, cq->chan_gen) : -1;
	if (fd >= 0 && write(fd, &one, sizeof(one)) == sizeof(one))
		return;
	/* the owner's engine reports it instead */
	shca_peer_doorbell(p);
}

/* A dead peer that nobody uses: give back its arena and descriptors. */
static void peer_unmap(struct shca_peer *p)
{
	bool no = false;
	unsigned int i;

	if (p->self || __atomic_load_n(&p->users, __ATOMIC_SEQ_CST) ||
	    !__atomic_compare_exchange_n(&p->unmapped, &no, true, false,
					 __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
		return;
	/* no requester is inside: every segment mapping goes, the pool
	 * with them (we do not pin a dead owner's memory) */
	shca_segmap_free(p->segmap);
	p->segmap = NULL;
	munmap(p->arena, p->arena_size);
	close(p->doorbell);
	pthread_mutex_lock(&p->chan_lock);
	for (i = 0; i < p->nchans; i++)
		if (p->chans[i].fd >= 0)
			close(p->chans[i].fd);
	free(p->chans);
	p->chans = NULL;
	p->nchans = 0;
	pthread_mutex_unlock(&p->chan_lock);
}

void shca_peer_set_dead(struct shca_peer *p)
{
	__atomic_store_n(&p->dead, true, __ATOMIC_SEQ_CST);
	peer_unmap(p);
}

bool shca_peer_hold(struct shca_peer *p)
{
	__atomic_add_fetch(&p->users, 1, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&p->dead, __ATOMIC_SEQ_CST)) {
		shca_peer_release(p);
		return false;
	}
	return true;
}

void shca_peer_release(struct shca_peer *p)
{
	if (!__atomic_sub_fetch(&p->users, 1, __ATOMIC_SEQ_CST) &&
	    __atomic_load_n(&p->dead, __ATOMIC_SEQ_CST))
		peer_unmap(p);
}

void shca_peer_doorbell(struct shca_peer *p)
{
	uint64_t one = 1;

	if (shca_peer_dead(p))
		return;
	if (write(p->doorbell, &one, sizeof(one)) < 0 && errno != EAGAIN)
		shca_dbg("doorbell of pid %d: %s", (int)p->pid,
			 strerror(errno));
}

/* Copy between iovec lists in this process (they may overlap: a QP that
 * writes its own buffer). */
void shca_copy_iov(const struct iovec *dst, int nd, const struct iovec *src,
		   int ns)
{
	size_t di = 0, doff = 0, si = 0, soff = 0;

	while ((int)di < nd && (int)si < ns) {
		size_t n = MIN(dst[di].iov_len - doff, src[si].iov_len - soff);

		if (n) {
			SHCA_DMA_BEGIN();
			memmove((char *)dst[di].iov_base + doff,
				(const char *)src[si].iov_base + soff, n);
			SHCA_DMA_END();
		}
		doff += n;
		soff += n;
		if (doff == dst[di].iov_len) {
			di++;
			doff = 0;
		}
		if (soff == src[si].iov_len) {
			si++;
			soff = 0;
		}
	}
}

static size_t iov_total(const struct iovec *v, int n)
{
	size_t t = 0;
	int i;

	for (i = 0; i < n; i++)
		t += v[i].iov_len;
	return t;
}

/* Drop the first n bytes of the iovec list v[*i .. cnt) (in place). */
static void iov_advance(struct iovec *v, int cnt, int *i, size_t n)
{
	while (*i < cnt && n >= v[*i].iov_len) {
		n -= v[*i].iov_len;
		(*i)++;
	}
	if (*i < cnt && n) {
		v[*i].iov_base = (char *)v[*i].iov_base + n;
		v[*i].iov_len -= n;
	}
}

/* One process_vm_readv/writev: the bytes moved, or -errno. */
static ssize_t vm_rw(struct shca_peer *p, const struct iovec *local, int nl,
		     const struct iovec *remote, int nr, bool write)
{
	ssize_t n = write ? process_vm_writev(p->pid, local, (unsigned long)nl,
					      remote, (unsigned long)nr, 0) :
			    process_vm_readv(p->pid, local, (unsigned long)nl,
					     remote, (unsigned long)nr, 0);

	if (n >= 0)
		return n;
	if (errno == ESRCH)
		shca_peer_set_dead(p);
	return -errno;
}

/*
 * A call moves at most MAX_RW_COUNT bytes (INT_MAX rounded down to a page,
 * 2 GiB - 4 KiB: the kernel trims the iovecs, as for read(2)), so a
 * message of max_msg_sz (2 GiB) takes two.  A partial transfer goes on
 * where it stopped; one that moves nothing means a remote page is not
 * there.
 */
static int peer_xfer(struct shca_peer *p, const struct iovec *local, int nl,
		     const struct iovec *remote, int nr, bool write)
{
	size_t want = iov_total(local, nl), done;
	struct iovec *l, *r;
	int li = 0, ri = 0, ret = 0;
	ssize_t n;

	if (p->self) {
		if (write)
			shca_copy_iov(remote, nr, local, nl);
		else
			shca_copy_iov(local, nl, remote, nr);
		return 0;
	}
	if (!want)
		return 0;
	if (nl > 1024 || nr > 1024)
		return -EINVAL;
	n = vm_rw(p, local, nl, remote, nr, write);
	if (n < 0 || (size_t)n == want)
		return n < 0 ? (int)n : 0;
	if (!n)
		return -EFAULT;
	/* the rest, from copies of the lists */
	l = malloc(sizeof(*l) * (size_t)(nl + nr));
	if (!l)
		return -ENOMEM;
	r = l + nl;
	memcpy(l, local, sizeof(*l) * (size_t)nl);
	memcpy(r, remote, sizeof(*r) * (size_t)nr);
	for (done = (size_t)n; done < want; done += (size_t)n) {
		iov_advance(l, nl, &li, (size_t)n);
		iov_advance(r, nr, &ri, (size_t)n);
		n = vm_rw(p, l + li, nl - li, r + ri, nr - ri, write);
		if (n <= 0) {
			ret = n < 0 ? (int)n : -EFAULT;
			break;
		}
	}
	free(l);
	return ret;
}

int shca_peer_write(struct shca_peer *p, const struct iovec *local, int nl,
		    const struct iovec *remote, int nr)
{
	return peer_xfer(p, local, nl, remote, nr, true);
}

int shca_peer_read(struct shca_peer *p, const struct iovec *local, int nl,
		   const struct iovec *remote, int nr)
{
	return peer_xfer(p, local, nl, remote, nr, false);
}
