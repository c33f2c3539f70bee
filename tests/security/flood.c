// SPDX-License-Identifier: MIT
/*
 * Connection floods (issue 11, docs/security.md "Flooding and
 * exhaustion").  The victim (this test's process) holds a live RC pair
 * with a partner process, on the same-host path (case same_host) or the
 * net path (case net: SOFTHCA_NET=1), and runs under a low RLIMIT_NOFILE
 * with a low connection cap and short hello and idle timeouts.  A flooder
 * process opens hundreds of TCP connections to the victim's slot port and
 * hundreds of connections to its same-host listener (found the way an
 * attacker finds it: the victim's listening unix sockets in /proc), until
 * both listeners run out of descriptors.
 *
 * While its descriptors are exhausted `softhca stat` cannot reach the
 * victim (the tool asks the same-host listener for the arena), so the
 * flooder reads the counters from the victim's arena itself, opened
 * through /proc/PID/fd before the flood as its user may; after the flood
 * the tool must show them too.
 *
 * Asserted, by counts and never by speed:
 *   - while descriptors are exhausted the engine does not spin: its
 *     wake-ups (engine_wakeups in `softhca stat`) over a few seconds stay
 *     in the hundreds, where a listener that returned with epoll still
 *     reporting it would give hundreds of thousands; both listeners are
 *     paused (net_accept_backoffs, shm_accept_backoffs go on counting);
 *   - connections over the cap are refused (net_conns_refused) and those
 *     that never say hello are closed (net_hello_timeouts); on the net
 *     path the pair's own connection, idle during the flood, is closed
 *     (net_idle_closes) and opens again with the next message;
 *   - after the flood the victim's descriptors are back to their number
 *     before it, the pair's SEND, WRITE and READ pass with their data
 *     checked, and the engine is idle (a handful of wake-ups a second).
 */
#include <dirent.h>
#include <fcntl.h>
#include <stddef.h>
#include <poll.h>
#include <stdbool.h>
#include <stdlib.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "harness.h"
#include "fdcount.h"
#include "ep.h"
#include "shm/arena.h"		/* where the counters are */

#define CAP		"24"	/* SOFTHCA_NET_MAX_CONNS */
#define HEADROOM	40	/* descriptors the victim has left */
#define HELLO_MS	"1500"
#define IDLE_MS		"2000"
#define N_TCP		300	/* per burst */
#define N_UNIX		400
#define ROUND		8
#define XFER		(64 * 1024)	/* WRITE and READ: 16 packets */

/* What the victim tells the flooder. */
struct target {
	pid_t pid;
	uint16_t port;
	int fds;		/* its descriptors before the flood */
	bool net;
};

/* ------------------------------------------------------------------ */
/* The victim and its partner                                          */

static void fill(uint8_t *p, size_t n, uint8_t seed)
{
	size_t i;

	for (i = 0; i < n; i++)
		p[i] = (uint8_t)(seed + i * 7 + (i >> 8));
}

static void partner(int fd, void *arg)
{
	struct ep_opts o;
	struct ep b;
	char cmd;
	int i;

	(void)arg;
	/* the victim's side closes the idle connection, never this one:
	 * its counter tells */
	setenv("SOFTHCA_NET_IDLE_MS", "0", 1);
	ep_default_opts(&o, IBV_QPT_RC);
	ep_open_remote(&b, &o, fd);
	for (;;) {
		xread(fd, &cmd, 1);
		if (cmd == 'q')
			break;
		ASSERT_EQ(cmd, 'r');
		for (i = 0; i < ROUND; i++)
			ASSERT_EQ(ep_post_recv(&b, (uint64_t)i,
					       4096u * (uint64_t)i, 256), 0);
		duo_signal(fd, 'p');
		for (i = 0; i < ROUND; i++) {
			uint8_t want[256];

			ep_expect(b.rcq, b.qp, (uint64_t)i, IBV_WC_SUCCESS);
			fill(want, sizeof(want), (uint8_t)(cmd + i));
			ASSERT(!memcmp(b.buf + 4096u * (uint64_t)i, want,
				       sizeof(want)));
		}
		duo_signal(fd, 'd');
	}
	ep_destroy(&b);
}

/* SENDs the partner checks, a WRITE into its buffer and a READ of it
 * back, compared. */
static void round_trip(struct ep *a, int fd, uint8_t seed)
{
	const uint64_t src = 1 << 20, back = 2 << 20, dst = 3 << 20;
	int i;

	duo_signal(fd, 'r');
	duo_expect(fd, 'p');
	for (i = 0; i < ROUND; i++) {
		fill(a->buf + 4096u * (uint64_t)i, 256, (uint8_t)('r' + i));
		ASSERT_EQ(ep_post(a, (uint64_t)i, IBV_WR_SEND,
				  4096u * (uint64_t)i, 256, 0, 0), 0);
	}
	for (i = 0; i < ROUND; i++)
		ep_expect(a->scq, a->qp, (uint64_t)i, IBV_WC_SUCCESS);
	duo_expect(fd, 'd');

	fill(a->buf + src, XFER, seed);
	memset(a->buf + back, 0, XFER);
	ASSERT_EQ(ep_post(a, 100, IBV_WR_RDMA_WRITE, src, XFER, dst, 0), 0);
	ep_expect(a->scq, a->qp, 100, IBV_WC_SUCCESS);
	ASSERT_EQ(ep_post(a, 101, IBV_WR_RDMA_READ, back, XFER, dst, 0), 0);
	ep_expect(a->scq, a->qp, 101, IBV_WC_SUCCESS);
	ASSERT(!memcmp(a->buf + src, a->buf + back, XFER));
}

/* ------------------------------------------------------------------ */
/* The flooder                                                         */

/* The victim's process counters (its arena's header block). */
struct snap {
	unsigned long long wakeups, net_backoffs, shm_backoffs, refused,
		hello_timeouts, idle_closes;
};

/* The victim's arena, opened through /proc/PID/fd (its memfd). */
static int arena_open(pid_t pid)
{
	char path[48];
	struct dirent *d;
	int fd = -1;
	DIR *dir;

	snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	dir = opendir(path);
	ASSERT(dir);
	while (fd < 0 && (d = readdir(dir))) {
		char link[320], target[128];
		ssize_t l;

		snprintf(link, sizeof(link), "%s/%s", path, d->d_name);
		l = readlink(link, target, sizeof(target) - 1);
		if (l <= 0)
			continue;
		target[l] = 0;
		if (strstr(target, "memfd:softhca-arena"))
			fd = open(link, O_RDONLY | O_CLOEXEC);
	}
	closedir(dir);
	if (fd < 0)
		harness_fail(__FILE__, __LINE__, "no arena among %s", path);
	return fd;
}

static void snap(int afd, struct snap *s)
{
	struct shca_stat_block b;

	ASSERT_EQ(pread(afd, &b, sizeof(b),
			offsetof(struct shca_arena_hdr, stats)),
		  (ssize_t)sizeof(b));
	s->wakeups = b.v[SHCA_STAT_ENGINE_WAKEUPS];
	s->net_backoffs = b.v[SHCA_STAT_NET_ACCEPT_BACKOFFS];
	s->shm_backoffs = b.v[SHCA_STAT_SHM_ACCEPT_BACKOFFS];
	s->refused = b.v[SHCA_STAT_NET_CONNS_REFUSED];
	s->hello_timeouts = b.v[SHCA_STAT_NET_HELLO_TIMEOUTS];
	s->idle_closes = b.v[SHCA_STAT_NET_IDLE_CLOSES];
}

/* pid's line of `softhca stat --all` (in *out, to free), or NULL. */
static char *tool_line(pid_t pid, char **out)
{
	char cmd[512], want[64], *line, *end;

	*out = NULL;
	snprintf(cmd, sizeof(cmd), "%s stat --pid %d --all 2>/dev/null",
		 SOFTHCA_TOOL, (int)pid);
	ASSERT_EQ(harness_run(cmd, out), 0);
	snprintf(want, sizeof(want), "pid %d slot ", (int)pid);
	line = *out ? strstr(*out, want) : NULL;
	if (line) {
		end = strchr(line, '\n');
		if (end)
			*end = 0;
	}
	return line;
}

/* `softhca stat` shows counter name of pid at least min. */
static void assert_tool_shows(pid_t pid, const char *name,
			      unsigned long long min)
{
	char key[64], *out, *line, *p;

	line = tool_line(pid, &out);
	if (!line)
		harness_fail(__FILE__, __LINE__, "no line for pid %d in:\n%s",
			     (int)pid, out ? out : "");
	snprintf(key, sizeof(key), " %s ", name);
	p = strstr(line, key);
	if (!p || strtoull(p + strlen(key), NULL, 10) < min)
		harness_fail(__FILE__, __LINE__, "no %s >= %llu in: %s", name,
			     min, line);
	free(out);
}

/* Every counter of pid, as `softhca stat` shows them (a failure's
 * evidence: what keeps an engine awake). */
static void show_tool(pid_t pid)
{
	char *out, *line = tool_line(pid, &out);

	if (line) {
		printf("  victim: %s\n", line);
		fflush(stdout);
	}
	free(out);
}

static void show(const char *when, const struct snap *s)
{
	printf("  %s: engine_wakeups %llu net_accept_backoffs %llu "
	       "shm_accept_backoffs %llu net_conns_refused %llu "
	       "net_hello_timeouts %llu net_idle_closes %llu\n", when,
	       s->wakeups, s->net_backoffs, s->shm_backoffs, s->refused,
	       s->hello_timeouts, s->idle_closes);
	fflush(stdout);
}

/*
 * The victim's listening unix sockets, as /proc shows them to its user:
 * its descriptors' socket inodes, looked up in /proc/net/unix (flag
 * 00010000: listening).  Abstract names come as "@name".
 */
static int unix_listeners(pid_t pid, struct sockaddr_un *sa, socklen_t *len,
			  int max)
{
	char path[48], buf[512];
	unsigned long inos[256];
	int ninos = 0, n = 0;
	struct dirent *d;
	FILE *f;
	DIR *dir;

	snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	dir = opendir(path);
	ASSERT(dir);
	while ((d = readdir(dir)) && ninos < 256) {
		char link[320], target[64];
		ssize_t l;

		snprintf(link, sizeof(link), "%s/%s", path, d->d_name);
		l = readlink(link, target, sizeof(target) - 1);
		if (l <= 0)
			continue;
		target[l] = 0;
		if (sscanf(target, "socket:[%lu]", &inos[ninos]) == 1)
			ninos++;
	}
	closedir(dir);
	f = fopen("/proc/net/unix", "r");
	ASSERT(f);
	while (n < max && fgets(buf, sizeof(buf), f)) {
		unsigned long ino, flags;
		char name[300] = "";
		int i;

		if (sscanf(buf, "%*s %*s %*s %lx %*s %*s %lu %299s", &flags,
			   &ino, name) < 2 || !(flags & 0x10000) || !name[0])
			continue;
		for (i = 0; i < ninos && inos[i] != ino; i++)
			;
		if (i == ninos)
			continue;
		memset(&sa[n], 0, sizeof(sa[n]));
		sa[n].sun_family = AF_UNIX;
		if (name[0] == '@') {
			size_t k = strlen(name + 1);

			memcpy(sa[n].sun_path + 1, name + 1, k);
			len[n] = (socklen_t)(offsetof(struct sockaddr_un,
						      sun_path) + 1 + k);
		} else {
			size_t k = strlen(name);

			if (k >= sizeof(sa[n].sun_path))
				continue;
			memcpy(sa[n].sun_path, name, k + 1);
			len[n] = (socklen_t)sizeof(sa[n]);
		}
		n++;
	}
	fclose(f);
	return n;
}

struct held {
	int fd[2 * N_TCP + N_UNIX];
	int n;
};

static void tcp_burst(struct held *h, uint16_t port, int n)
{
	struct sockaddr_in sin;

	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_port = htons(port);
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	while (n-- > 0) {
		int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);

		ASSERT_GE(fd, 0);
		if (connect(fd, (struct sockaddr *)&sin, sizeof(sin)) &&
		    errno != EINPROGRESS) {
			close(fd);
			continue;
		}
		h->fd[h->n++] = fd;
	}
}

/* Connections to the same-host listeners, as many as they take now. */
static int unix_burst(struct held *h, const struct sockaddr_un *sa,
		      const socklen_t *len, int nsa, int n)
{
	int made = 0, i;

	for (i = 0; i < nsa; i++)
		while (made < n) {
			int fd = socket(AF_UNIX,
					SOCK_SEQPACKET | SOCK_NONBLOCK, 0);

			ASSERT_GE(fd, 0);
			if (connect(fd, (const struct sockaddr *)&sa[i],
				    len[i])) {
				close(fd);
				break;	/* its backlog is full */
			}
			h->fd[h->n++] = fd;
			made++;
		}
	return made;
}

static void pause_ms(int ms)
{
	poll(NULL, 0, ms);
}

/* Wait (up to ~20 s) until cond holds on a fresh look at the victim. */
#define WAIT_FOR(afd, s, cond)                                          \
	do {                                                            \
		int tries_ = 200;                                       \
		for (;;) {                                              \
			snap(afd, s);                                   \
			if (cond)                                       \
				break;                                  \
			if (!--tries_) {                                \
				show("gave up", s);                     \
				harness_fail(__FILE__, __LINE__,        \
					     "waited for %s", #cond);   \
			}                                               \
			pause_ms(100);                                  \
		}                                                       \
	} while (0)

static void flooder(int fd, void *arg)
{
	struct rlimit rl;
	struct sockaddr_un sa[4];
	socklen_t len[4];
	struct snap s0, s1, s2, s;
	struct target t;
	struct held *h = calloc(1, sizeof(*h));
	int nsa, made = 0, i, fds, afd;

	(void)arg;
	ASSERT(h);
	xread(fd, &t, sizeof(t));
	/* the victim's limit is not the flooder's */
	ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &rl), 0);
	rl.rlim_cur = rl.rlim_max < 4096 ? rl.rlim_max : 4096;
	ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &rl), 0);
	ASSERT_GE(rl.rlim_cur, 2 * N_TCP + N_UNIX + 64);
	nsa = unix_listeners(t.pid, sa, len, 4);
	ASSERT_GE(nsa, 1);
	afd = arena_open(t.pid);
	snap(afd, &s0);
	show("before", &s0);

	/* over the cap: refused at once */
	tcp_burst(h, t.port, N_TCP);
	WAIT_FOR(afd, &s, s.refused > s0.refused);
	/* the same-host listener runs out of descriptors ... */
	for (i = 0; i < 200 && made < N_UNIX; i++) {
		made += unix_burst(h, sa, len, nsa, N_UNIX - made);
		snap(afd, &s);
		if (s.shm_backoffs > s0.shm_backoffs)
			break;
		pause_ms(100);
	}
	ASSERT_GT(s.shm_backoffs, s0.shm_backoffs);
	/* ... and so does the net listener, with connections waiting */
	tcp_burst(h, t.port, N_TCP);
	WAIT_FOR(afd, &s, s.net_backoffs > s0.net_backoffs);
	unix_burst(h, sa, len, nsa, N_UNIX - made);

	/* exhausted: a few seconds, counted */
	snap(afd, &s1);
	show("exhausted", &s1);
	pause_ms(3000);
	snap(afd, &s2);
	show("3 s later", &s2);
	/* still exhausted all along: the paused listener failed again */
	ASSERT_GT(s2.shm_backoffs, s1.shm_backoffs);
	/* no spin: a spinning engine wakes ~10^5 times a second */
	ASSERT_LT(s2.wakeups - s1.wakeups, 3000);
	ASSERT_GT(s2.hello_timeouts, s0.hello_timeouts);

	/* the flood ends: every descriptor of it goes */
	for (i = 0; i < h->n; i++)
		close(h->fd[i]);
	h->n = 0;
	for (i = 0; i < 200; i++) {
		fds = count_fds(t.pid);
		if (fds <= t.fds)
			break;
		pause_ms(100);
	}
	printf("  victim descriptors: %d before the flood, %d after\n", t.fds,
	       fds);
	ASSERT_LE(fds, t.fds);
	if (t.net)
		/* the pair's connection, idle all along, was closed */
		WAIT_FOR(afd, &s, s.idle_closes > s0.idle_closes);

	/* the pair works (and on the net path, opens its connection again) */
	duo_signal(fd, 'f');
	duo_expect(fd, 't');
	/* and the engine goes idle: what the flood left in the listeners'
	 * backlogs is taken (and let go) once their pause ends, then a
	 * second passes with a handful of wake-ups (timers), not a spin */
	for (i = 0; i < 15; i++) {
		snap(afd, &s1);
		pause_ms(1000);
		snap(afd, &s2);
		if (s2.wakeups - s1.wakeups < 20)
			break;
	}
	show("idle", &s2);
	printf("  engine wake-ups in the last second: %llu\n",
	       s2.wakeups - s1.wakeups);
	if (s2.wakeups - s1.wakeups >= 20) {
		/* what woke it: the counters that moved in a second */
		show_tool(t.pid);
		pause_ms(1000);
		show_tool(t.pid);
	}
	ASSERT_LT(s2.wakeups - s1.wakeups, 20);
	/* and what happened shows in `softhca stat` */
	assert_tool_shows(t.pid, "net_conns_refused", 1);
	assert_tool_shows(t.pid, "net_hello_timeouts", 1);
	assert_tool_shows(t.pid, "net_accept_backoffs", 1);
	assert_tool_shows(t.pid, "shm_accept_backoffs", 1);
	if (t.net)
		assert_tool_shows(t.pid, "net_idle_closes", 1);
	close(afd);
	free(h);
}

static void flood(bool net)
{
	struct ep_opts o;
	struct duo p, f;
	struct target t;
	struct rlimit rl;
	const char *base;
	struct ep a;

	/* a range of its own (below the ephemeral ports, apart from every
	 * other test's): counter readers of other tests running beside this
	 * one (softhca stat, the sysfs view) visit every process of their
	 * range, and each visit wakes the engine whose wake-ups are counted */
	if (!getenv("SOFTHCA_PORT_BASE"))
		setenv("SOFTHCA_PORT_BASE", "28000", 1);
	base = getenv("SOFTHCA_PORT_BASE");
	if (net)
		setenv("SOFTHCA_NET", "1", 1);
	setenv("SOFTHCA_NET_MAX_CONNS", CAP, 1);
	setenv("SOFTHCA_NET_HELLO_MS", HELLO_MS, 1);
	setenv("SOFTHCA_NET_IDLE_MS", IDLE_MS, 1);
	if (ep_netns())
		SKIP("one host: the flooder reaches the victim on loopback");
	ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &rl), 0);
	if (rl.rlim_max < 2 * N_TCP + N_UNIX + 64)
		SKIP("the hard RLIMIT_NOFILE is too low for the flooder");
	duo_fork(&p, partner, NULL);
	ep_default_opts(&o, IBV_QPT_RC);
	ep_open_remote(&a, &o, p.fd);
	round_trip(&a, p.fd, 1);

	memset(&t, 0, sizeof(t));
	t.pid = getpid();
	t.net = net;
	/* the slot is in the QPN (common/slot.h) */
	t.port = (uint16_t)((base && *base ? atoi(base) : 24000) +
			    (int)((a.qp->qp_num >> 14) & 1023));
	duo_fork(&f, flooder, NULL);
	t.fds = count_fds(getpid());
	ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &rl), 0);
	rl.rlim_cur = (rlim_t)(highest_fd() + 1 + HEADROOM);
	ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &rl), 0);
	xwrite(f.fd, &t, sizeof(t));

	duo_expect(f.fd, 'f');
	round_trip(&a, p.fd, 2);
	round_trip(&a, p.fd, 3);
	duo_signal(f.fd, 't');
	duo_wait(&f);
	duo_signal(p.fd, 'q');
	duo_wait(&p);
	ep_destroy(&a);
}

TEST(same_host)
{
	flood(false);
}

TEST(net)
{
	flood(true);
}
