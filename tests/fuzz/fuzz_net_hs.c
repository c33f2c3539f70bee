// SPDX-License-Identifier: MIT
/*
 * libFuzzer target for the net path's connection handshake (net/conn.c,
 * net/handshake.h) and its admission, through real sockets: the input is
 * written to a TCP connection to this process's own listener on
 * 127.0.0.1 (or sent as a datagram to its slot port), and the engine
 * thread reads it as it reads any stranger's bytes.
 *
 * Input: a mode byte, then the bytes the stranger sends.
 *   mode % 4 == 0   the bytes from the start of a new connection
 *   mode % 4 == 1   after a HELLO that claims our own UDP port (in the
 *                   slot range): the CHALLENGE comes, no PROOF goes
 *   mode % 4 == 2   after a complete handshake as ourselves (HELLO, the
 *                   CHALLENGE answered with PROOF, WELCOME read; it
 *                   must complete, first time)
 *   mode % 4 == 3   one datagram to the slot's UDP port
 * Set up once: softhca_lo opened, the net path started, listening on
 * 127.0.0.1; no QP has us as its destination, so whatever we send, the
 * only bytes that may come back are the handshake's (checked: nothing in
 * modes 0 and 1, exactly the WELCOME in mode 2).  After the bytes, we
 * shut our side down and read until softhca closes the connection: each
 * input is handled whole before the next.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <infiniband/verbs.h>

#include "fuzz.h"
#include "common/slot.h"
#include "common/stat.h"
#include "net/handshake.h"
#include "net/net.h"
#include "net/transport.h"
#include "verbs/shca.h"

#define CHECK(cond)                                                       \
	do {                                                              \
		if (!(cond)) {                                            \
			int e_ = errno;                                   \
									  \
			fprintf(stderr, "%s:%d: CHECK(%s) failed "        \
				"(errno %d: %s)\n", __FILE__, __LINE__,    \
				#cond, e_, strerror(e_));                 \
			abort();                                          \
		}                                                         \
	} while (0)

#define WAIT_MS		3000
#define HS_WAIT_MS	10000

static struct {
	bool ready;
	struct ibv_context *ctx;
	uint16_t port;			/* softhca's slot port */
	uint16_t uport;			/* our UDP port, in the slot range */
	int udp;
} hz;

static void setup(void)
{
	static const uint8_t lo[16] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
					0xff, 0xff, 127, 0, 0, 1 };
	struct ibv_device **list;
	const struct shca_slot *s;
	int n, i;

	list = ibv_get_device_list(&n);
	CHECK(list);
	for (i = 0; i < n; i++)
		if (!strcmp(ibv_get_device_name(list[i]), "softhca_lo"))
			break;
	if (i == n)
		fuzz_skip_env("fuzz_net_hs", "no softhca_lo device (the "
			      "loopback interface has no address)");
	hz.ctx = ibv_open_device(list[i]);
	CHECK(hz.ctx);
	CHECK(!shca_net_start(shca_net_rx));
	CHECK(!shca_net_listen_addr(lo, to_sdev(list[i])->ifindex));
	ibv_free_device_list(list);
	s = shca_slot_get();
	CHECK(s);
	hz.port = s->port;
	/* our own "slot": a UDP port of the range at 127.0.0.1 */
	for (i = SHCA_NUM_SLOTS - 1; i >= 0; i--) {
		struct sockaddr_in sa = { .sin_family = AF_INET };

		hz.udp = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK |
						 SOCK_CLOEXEC, 0);
		CHECK(hz.udp >= 0);
		sa.sin_addr.s_addr = htonl(0x7f000001);
		sa.sin_port = htons((uint16_t)(shca_port_base() + i));
		if (!bind(hz.udp, (struct sockaddr *)&sa, sizeof(sa))) {
			hz.uport = ntohs(sa.sin_port);
			break;
		}
		close(hz.udp);
	}
	CHECK(i >= 0);
	hz.ready = true;
}

static struct sockaddr_in slot_addr(void)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };

	sa.sin_addr.s_addr = htonl(0x7f000001);
	sa.sin_port = htons(hz.port);
	return sa;
}

/*
 * poll() for up to ms, again after a signal: libFuzzer's -timeout is a
 * SIGALRM every timeout/2 + 1 s whose handler has no SA_RESTART, so any
 * call of ours that blocks may end with EINTR (softhca's own threads
 * block signals).  What poll returns, never -1 with EINTR.
 */
static int poll_ms(struct pollfd *p, nfds_t n, int ms)
{
	struct timespec end, now;
	int r, left = ms;

	clock_gettime(CLOCK_MONOTONIC, &end);
	end.tv_sec += ms / 1000;
	end.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (end.tv_nsec >= 1000000000L) {
		end.tv_sec++;
		end.tv_nsec -= 1000000000L;
	}
	while ((r = poll(p, n, left)) < 0 && errno == EINTR) {
		clock_gettime(CLOCK_MONOTONIC, &now);
		left = (int)((end.tv_sec - now.tv_sec) * 1000 +
			     (end.tv_nsec - now.tv_nsec) / 1000000L);
		if (left < 0)
			left = 0;
	}
	return r;
}

/* Everything softhca sends until it closes (or WAIT_MS): its length. */
static size_t read_all(int fd, unsigned char *buf, size_t cap)
{
	size_t got = 0;

	for (;;) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		unsigned char scratch[256];
		ssize_t r;

		if (poll_ms(&p, 1, WAIT_MS) <= 0)
			return got;
		r = recv(fd, got < cap ? buf + got : scratch,
			 got < cap ? cap - got : sizeof(scratch), 0);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return got;
		got += (size_t)r;
	}
}

static void udp_drain(void)
{
	unsigned char b[64];

	while (recv(hz.udp, b, sizeof(b), MSG_DONTWAIT) >= 0)
		;
}

static void send_hello(int fd)
{
	struct shca_hs_hello h = { .version = SHCA_HS_VERSION };
	uint8_t f[SHCA_HS_FRAME_MAX];
	size_t n;

	h.port = hz.uport;
	memset(h.nonce, 0x4e, sizeof(h.nonce));
	n = shca_hs_hello_build(f, &h);
	CHECK(send(fd, f, n, MSG_NOSIGNAL) == (ssize_t)n);
}

/* One TcpExt counter of /proc/net/netstat (a line of names, then one of
 * values), on stderr. */
static void netstat_show(const char *name)
{
	static char names[8192], vals[8192];
	char *sn, *sv, *n, *v;
	FILE *f = fopen("/proc/net/netstat", "r");

	while (f && fgets(names, sizeof(names), f) &&
	       fgets(vals, sizeof(vals), f)) {
		if (strncmp(names, "TcpExt:", 7))
			continue;
		n = strtok_r(names, " \n", &sn);
		v = strtok_r(vals, " \n", &sv);
		while (n && v && strcmp(n, name)) {
			n = strtok_r(NULL, " \n", &sn);
			v = strtok_r(NULL, " \n", &sv);
		}
		if (n && v)
			fprintf(stderr, "  TcpExt %s: %s\n", name, v);
	}
	if (f)
		fclose(f);
}

/* What to look at when softhca fell silent (a handshake that did not
 * complete): this process's counters that are not 0, each thread's
 * state and kernel wait channel, and the kernel's listen queue drops
 * since boot (a full accept queue drops the handshake's last ACK).  CI
 * saw this once, not reproduced in 14 runs of 10-60 s here. */
/* The first line of /proc/self/task/TID/FILE, at most width bytes of it,
 * on stderr after label. */
static void task_show(const char *tid, const char *file, const char *label,
		      int width)
{
	char path[300], line[512];
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/task/%s/%s", tid, file);
	f = fopen(path, "r");
	if (f && fgets(line, sizeof(line), f))
		fprintf(stderr, "%s%.*s\n", label, width,
			strtok(line, "\n"));
	if (f)
		fclose(f);
}

static void dump_state(void)
{
	const struct shca_stat_block *b = shca_stat_proc();
	struct dirent *d;
	unsigned int i;
	DIR *dir;

	for (i = 0; b && i < SHCA_STAT_MAX; i++)
		if (b->v[i])
			fprintf(stderr, "  counter %s: %llu\n", shca_stat_names[i],
				(unsigned long long)b->v[i]);
	dir = opendir("/proc/self/task");
	while (dir && (d = readdir(dir))) {
		if (d->d_name[0] == '.')
			continue;
		task_show(d->d_name, "stat", "  thread ", 40);
		task_show(d->d_name, "wchan", "    wchan ", 64);
	}
	if (dir)
		closedir(dir);
	netstat_show("ListenOverflows");
	netstat_show("ListenDrops");
}

/*
 * The rest of a handshake as ourselves: each CHALLENGE for this
 * connection's port answered with its PROOF (softhca sends its CHALLENGE
 * again every 200 ms until a PROOF with its nonce comes, and ignores one
 * with another nonce: a CHALLENGE left from an earlier connection from
 * the same port gets a PROOF that is ignored, and the next one completes
 * it), until the WELCOME.  No retry on a new connection: a handshake
 * that does not complete is a bug.  HS_WAIT_MS without any progress only
 * ends a hung input (softhca closes an unfinished handshake after 5 s).
 */
static void handshake(int fd)
{
	static const uint8_t zero[SHCA_HS_MAC];
	struct pollfd p[2] = { { .fd = hz.udp, .events = POLLIN },
			       { .fd = fd, .events = POLLIN } };
	struct shca_hs_challenge ch;
	struct sockaddr_in me;
	socklen_t ml = sizeof(me);
	uint8_t d[64], f[SHCA_HS_FRAME_MAX], w[4 + SHCA_HS_WELCOME_LEN];
	size_t fl, got = 0;
	ssize_t n;

	CHECK(!getsockname(fd, (struct sockaddr *)&me, &ml));
	while (got < sizeof(w)) {
		if (poll_ms(p, 2, HS_WAIT_MS) < 1) {
			fprintf(stderr, "fuzz_net_hs: handshake from port %u: "
				"nothing for %d ms (%zu WELCOME bytes)\n",
				ntohs(me.sin_port), HS_WAIT_MS, got);
			dump_state();
			CHECK(!"handshake completes");
		}
		if (p[0].revents & POLLIN) {
			while ((n = recv(hz.udp, d, sizeof(d), 0)) < 0 &&
			       errno == EINTR)
				;
			CHECK(n > 0);
			/* (others: earlier inputs') */
			if (!shca_hs_challenge_parse(d, (size_t)n, &ch) &&
			    ch.src_port == ntohs(me.sin_port)) {
				CHECK(ch.acc_port == hz.port);
				fl = shca_hs_proof_build(f, ch.nonce, zero);
				CHECK(send(fd, f, fl, MSG_NOSIGNAL) ==
				      (ssize_t)fl);
			}
		}
		if (p[1].revents) {
			n = recv(fd, w + got, sizeof(w) - got, 0);
			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0)
				fprintf(stderr, "fuzz_net_hs: handshake from "
					"port %u: no WELCOME (%zu bytes, %s)\n",
					ntohs(me.sin_port), got,
					n < 0 ? strerror(errno) : "closed");
			CHECK(n > 0);
			got += (size_t)n;
		}
	}
	CHECK(ntohl(*(uint32_t *)w) ==
	      (SHCA_HS_CTL | SHCA_HS_WELCOME << 16 | SHCA_HS_WELCOME_LEN));
}

/* A refused connect (seen once, CI27: ECONNREFUSED after ~16,000
 * inputs, not repeated since): what the kernel holds on the listener's
 * port then, from /proc/net/tcp (state 0A: listening). */
static void refused_dump(unsigned int port)
{
	FILE *f = fopen("/proc/net/tcp", "r");
	unsigned int lport, st, listening = 0, others = 0;
	char line[256];

	if (!f)
		return;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, " %*u: %*x:%x %*x:%*x %x", &lport, &st) == 2 &&
		    lport == port) {
			if (st == 0x0a)
				listening++;
			else
				others++;
		}
	fclose(f);
	fprintf(stderr, "fuzz_net_hs: connect to port %u refused: %u "
		"listening socket(s), %u other socket(s) on it\n", port,
		listening, others);
}

/* A connection to softhca's listener from a new port of 127.0.0.1.  Its
 * close resets it (SO_LINGER 0): thousands of inputs a second would
 * otherwise leave as many ports in TIME_WAIT, and a second run within a
 * minute found none free (connect: EADDRNOTAVAIL). */
static int dial(void)
{
	struct sockaddr_in sa = slot_addr(), me = { .sin_family = AF_INET };
	struct linger lg = { .l_onoff = 1, .l_linger = 0 };
	int fd;

	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	CHECK(fd >= 0);
	CHECK(!setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg)));
	me.sin_addr.s_addr = htonl(0x7f000001);
	CHECK(!bind(fd, (struct sockaddr *)&me, sizeof(me)));
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa))) {
		/* a signal (poll_ms) ends the wait, not the connecting */
		struct pollfd p = { .fd = fd, .events = POLLOUT };
		socklen_t el = sizeof(int);
		int err = 0, e = errno;

		if (e != EINTR)
			refused_dump(ntohs(sa.sin_port));
		errno = e;
		CHECK(errno == EINTR);
		CHECK(poll_ms(&p, 1, HS_WAIT_MS) == 1);
		CHECK(!getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el));
		errno = err;
		CHECK(!err);
	}
	return fd;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	if (!hz.ready)
		setup();
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	unsigned char back[256];
	unsigned int mode;
	size_t got;
	int fd;

	if (!hz.ready)
		setup();
	if (!size)
		return 0;
	mode = data[0] % 4;
	data++;
	size--;
	udp_drain();
	if (mode == 3) {
		struct sockaddr_in sa = slot_addr();
		int u = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

		CHECK(u >= 0);
		sendto(u, data, size, 0, (struct sockaddr *)&sa, sizeof(sa));
		close(u);
		return 0;
	}
	fd = dial();
	if (mode >= 1)
		send_hello(fd);
	if (mode == 2)
		handshake(fd);
	/* softhca may close at any byte: the rest is not sent */
	if (size)
		(void)send(fd, data, size, MSG_NOSIGNAL);
	shutdown(fd, SHUT_WR);
	got = read_all(fd, back, sizeof(back));
	/* a stranger learns nothing: no byte of an IB packet comes back */
	if (got) {
		fprintf(stderr, "fuzz_net_hs: %zu bytes came back (mode %u)\n",
			got, mode);
		abort();
	}
	close(fd);
	return 0;
}
