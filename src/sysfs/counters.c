// SPDX-License-Identifier: MIT
/*
 * Reading other processes' counters (counters.h).  Every value read from
 * an arena is another process's word: offsets are checked against the
 * size of the arena before a read, names are cut to what an interface
 * name may hold.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../common/slot.h"
#include "../shm/arena.h"
#include "../shm/sock.h"
#include "counters.h"

#define QP_TABLE_BYTES	((size_t)SHCA_ARENA_QP_ENTRIES * sizeof(uint64_t))

/* Exactly len bytes at off, or -EPROTO (the arena is shorter). */
static int read_at(int fd, void *buf, size_t len, uint64_t off)
{
	size_t got = 0;
	ssize_t n;

	while (got < len) {
		n = pread(fd, (char *)buf + got, len - got,
			  (off_t)(off + got));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -EPROTO;
		got += (size_t)n;
	}
	return 0;
}

/* The arena's header, checked against the hello that brought it. */
static int read_header(int fd, const struct shca_hello *h,
		       struct shca_arena_hdr *hdr)
{
	int ret = read_at(fd, hdr, sizeof(*hdr), 0);

	if (ret)
		return ret;
	if (hdr->magic != SHCA_ARENA_MAGIC ||
	    hdr->version != SHCA_ARENA_VERSION || hdr->pid != h->pid ||
	    hdr->size < sizeof(*hdr) + QP_TABLE_BYTES ||
	    hdr->size > (1ull << 40) ||
	    hdr->qp_table_off < sizeof(*hdr) || hdr->qp_table_off % 8 ||
	    hdr->qp_table_off > hdr->size - QP_TABLE_BYTES)
		return -EPROTO;
	return 0;
}

/* A QP record's interface name: printable, never a space, never empty. */
static void clean_name(char *out, const char *in, size_t in_len)
{
	size_t i;

	for (i = 0; i < in_len && i < IF_NAMESIZE - 1 && in[i]; i++)
		out[i] = in[i] <= ' ' || in[i] > '~' ? '?' : in[i];
	if (!i)
		out[i++] = '?';
	out[i] = '\0';
}

static int qp_cmp(const void *a, const void *b)
{
	const struct shca_counters_qp *x = a, *y = b;
	int c = strcmp(x->dev, y->dev);

	if (c)
		return c;
	return x->qpn < y->qpn ? -1 : x->qpn > y->qpn;
}

/* The live QPs of the arena behind fd: 0 or -errno. */
static int read_qps(int fd, const struct shca_arena_hdr *hdr,
		    struct shca_counters_proc *p)
{
	uint64_t *tbl = malloc(QP_TABLE_BYTES);
	struct shca_counters_qp *qps = NULL, *q;
	int n = 0, cap = 0, ret;
	uint32_t i;

	if (!tbl)
		return -ENOMEM;
	ret = read_at(fd, tbl, QP_TABLE_BYTES, hdr->qp_table_off);
	for (i = 0; !ret && i < SHCA_ARENA_QP_ENTRIES; i++) {
		struct shca_qp_shm rec;
		uint64_t off = tbl[i];

		if (!off || off % 8 || off > hdr->size - sizeof(rec))
			continue;
		if (read_at(fd, &rec, sizeof(rec), off))
			continue;
		/* 0: being destroyed; another index: not a record */
		if (!rec.qpn || shca_qpn_index(rec.qpn) != i)
			continue;
		if (n == cap) {
			cap = cap ? 2 * cap : 16;
			q = realloc(qps, (size_t)cap * sizeof(*qps));
			if (!q) {
				ret = -ENOMEM;
				break;
			}
			qps = q;
		}
		q = &qps[n++];
		clean_name(q->dev, rec.dev, sizeof(rec.dev));
		q->qpn = rec.qpn;
		q->qp_type = rec.qp_type;
		q->state = rec.state;
		q->stats = rec.stats;
		shca_stat_own_into(&q->stats, &rec.own);
	}
	free(tbl);
	if (ret) {
		free(qps);
		return ret;
	}
	if (n)
		qsort(qps, (size_t)n, sizeof(*qps), qp_cmp);
	p->qps = qps;
	p->nqps = n;
	return 0;
}

/* The process in slot: 0, or -errno (-ECONNREFUSED/-ENOENT: nobody). */
static int read_proc(int slot, pid_t want, int timeout_s,
		     struct shca_counters_proc *p)
{
	struct shca_arena_hdr hdr;
	struct shca_hello h;
	pid_t owner = 0;
	int sock, fds[3], ret;

	/* our uid only (SO_PEERCRED), and the pid that listens owns the
	 * hello and the arena (read_header) */
	sock = shca_sock_connect(slot, timeout_s, &owner);
	if (sock < 0)
		return sock == -EACCES ? -EPERM : sock;
	ret = shca_sock_recv_hello(sock, &h, fds);
	close(sock);
	if (ret)
		return ret;
	close(fds[1]);		/* the doorbell: a looker rings nothing */
	close(fds[2]);		/* the pool: a looker maps nothing */
	if (h.pid != owner) {
		close(fds[0]);
		return -EPERM;
	}
	if (want && h.pid != want) {
		close(fds[0]);
		return -ESRCH;
	}
	ret = read_header(fds[0], &h, &hdr);
	if (!ret) {
		memset(p, 0, sizeof(*p));
		p->pid = h.pid;
		p->slot = slot;
		p->stats = hdr.stats;
		ret = read_qps(fds[0], &hdr, p);
	}
	close(fds[0]);
	return ret;
}

/*
 * The slots with a name in this user's directory for this namespace
 * (shm/rundir.h): 0, or -errno when it cannot be read (then every slot is
 * tried).
 */
static int live_slots(uint8_t *live)
{
	return shca_sock_live_slots(live);
}

static int proc_cmp(const void *a, const void *b)
{
	const struct shca_counters_proc *x = a, *y = b;

	return x->pid < y->pid ? -1 : x->pid > y->pid;
}

int shca_counters_collect(pid_t want_pid, int timeout_s,
			  struct shca_counters_proc **out,
			  void (*on_error)(int slot, int err, void *arg),
			  void *arg)
{
	struct shca_counters_proc *procs, *p;
	uint8_t live[SHCA_NUM_SLOTS];
	int n = 0, slot, ret;

	*out = NULL;
	procs = calloc(SHCA_NUM_SLOTS, sizeof(*procs));
	if (!procs)
		return -ENOMEM;
	/* the slots whose socket is there; all of them when we cannot tell */
	memset(live, 0, sizeof(live));
	if (live_slots(live))
		memset(live, 1, sizeof(live));
	/* each slot's socket: the processes of this user in this netns */
	for (slot = 0; slot < (int)SHCA_NUM_SLOTS; slot++) {
		if (!live[slot])
			continue;
		p = &procs[n];
		ret = read_proc(slot, want_pid, timeout_s, p);
		if (!ret) {
			n++;
			continue;
		}
		if (ret == -ENOMEM) {
			shca_counters_free(procs, n);
			return ret;
		}
		if (ret != -ECONNREFUSED && ret != -ENOENT && ret != -ESRCH &&
		    on_error)
			on_error(slot, -ret, arg);
	}
	if (n)
		qsort(procs, (size_t)n, sizeof(*procs), proc_cmp);
	*out = procs;
	return n;
}

void shca_counters_free(struct shca_counters_proc *procs, int n)
{
	int i;

	for (i = 0; procs && i < n; i++)
		free(procs[i].qps);
	free(procs);
}

void shca_counters_sum_dev(const struct shca_counters_proc *procs, int n,
			   const char *ifname, struct shca_stat_block *sum)
{
	int i, j, k;

	memset(sum, 0, sizeof(*sum));
	for (i = 0; i < n; i++)
		for (j = 0; j < procs[i].nqps; j++) {
			const struct shca_counters_qp *q = &procs[i].qps[j];

			if (strcmp(q->dev, ifname))
				continue;
			for (k = 0; k < SHCA_STAT_MAX; k++)
				sum->v[k] += q->stats.v[k];
		}
}
