// SPDX-License-Identifier: MIT
/*
 * bench/tcplat: an 8 B TCP ping-pong that never sleeps, the busy-poll
 * baseline of bench/netns.sh beside qperf's blocking tcp_lat.  Both ends
 * set TCP_NODELAY and SO_BUSY_POLL (BUSY_US microseconds, 0 leaves it
 * unset) and, in mode "spin", wait for each message in a non-blocking
 * recv() loop that spins (the figure netns.sh reports); mode "block" waits
 * in a blocking recv() instead (SO_BUSY_POLL then spins inside the kernel,
 * where the device has a NAPI context to poll).  A benchmark, not a test.
 *
 *   tcplat server PORT MODE BUSY_US            one client, then exit
 *   tcplat client ADDR PORT MODE BUSY_US ITERS
 *
 * The client prints one line:
 *   tcplat: mode spin busy_poll 50 (set) iters N avg_us A median_us M
 * with one-way latencies (half of a round trip), like qperf's tcp_lat.
 * "busy_poll 50 (EPERM)" says the kernel refused it (raising it above
 * net.core.busy_read needs CAP_NET_ADMIN): the figure is the spin alone.
 */
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MSG 8
#define WARMUP 1000
#define MAX_ITERS 10000000L
#define STALL_SECS 10.0

static int spin;
static int server_side;  /* the client closing between messages ends it: exit 0 */

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void die(const char *what)
{
	fprintf(stderr, "tcplat: %s: %s\n", what, strerror(errno));
	exit(1);
}

/* Both ends: no Nagle, the busy-poll budget; says whether the kernel took it. */
static const char *setup(int fd, int busy_us)
{
	int one = 1;

	if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)))
		die("TCP_NODELAY");
	if (busy_us <= 0)
		return "unset";
	if (setsockopt(fd, SOL_SOCKET, SO_BUSY_POLL, &busy_us, sizeof(busy_us)))
		return errno == EPERM ? "EPERM" : "refused";
	return "set";
}

/* All MSG bytes or exit: a peer that closes or stalls ends the run. */
static void recv_msg(int fd, char *buf)
{
	size_t got = 0;
	unsigned long spins = 0;
	double start = 0;
	ssize_t n;

	while (got < MSG) {
		n = recv(fd, buf + got, MSG - got, spin ? MSG_DONTWAIT : 0);
		if (n > 0) {
			got += (size_t)n;
			continue;
		}
		if (n == 0 && server_side && got == 0)
			exit(0);
		if (n == 0) {
			fprintf(stderr, "tcplat: peer closed\n");
			exit(1);
		}
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN && errno != EWOULDBLOCK)
			die("recv");
		/* spinning: a bounded wait, checked every 64 Ki spins */
		if ((++spins & 0xffff) == 0) {
			if (start == 0)
				start = now();
			else if (now() - start > STALL_SECS) {
				fprintf(stderr, "tcplat: no message for %.0f s\n", STALL_SECS);
				exit(1);
			}
		}
	}
}

static void send_msg(int fd, const char *buf)
{
	size_t put = 0;
	ssize_t n;

	while (put < MSG) {
		n = send(fd, buf + put, MSG - put, MSG_NOSIGNAL);
		if (n > 0)
			put += (size_t)n;
		else if (n < 0 && errno != EINTR && errno != EAGAIN)
			die("send");
	}
}

static int parse_mode(const char *s)
{
	if (!strcmp(s, "spin"))
		return 1;
	if (!strcmp(s, "block"))
		return 0;
	fprintf(stderr, "tcplat: mode is spin or block, not %s\n", s);
	exit(2);
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static int server(const char *port, int busy_us)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	int one = 1, ls, fd;
	char buf[MSG];

	sa.sin_port = htons((unsigned short)atoi(port));
	sa.sin_addr.s_addr = htonl(INADDR_ANY);
	ls = socket(AF_INET, SOCK_STREAM, 0);
	if (ls < 0)
		die("socket");
	setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(ls, (struct sockaddr *)&sa, sizeof(sa)) || listen(ls, 1))
		die("bind/listen");
	server_side = 1;
	fd = accept(ls, NULL, NULL);
	if (fd < 0)
		die("accept");
	close(ls);
	setup(fd, busy_us);
	for (;;) {  /* ends when the client closes (recv_msg exits) */
		recv_msg(fd, buf);
		send_msg(fd, buf);
	}
	return 0;
}

static int client(const char *addr, const char *port, int busy_us, long iters)
{
	struct addrinfo hints = { .ai_family = AF_INET, .ai_socktype = SOCK_STREAM }, *ai;
	char buf[MSG] = "pingpong";
	double *t, t0, t1, sum = 0;
	const char *busy;
	long i;
	int fd;

	if (iters < 1 || iters > MAX_ITERS) {
		fprintf(stderr, "tcplat: ITERS 1..%ld\n", MAX_ITERS);
		return 2;
	}
	if (getaddrinfo(addr, port, &hints, &ai))
		die("getaddrinfo");
	fd = socket(ai->ai_family, SOCK_STREAM, 0);
	if (fd < 0 || connect(fd, ai->ai_addr, ai->ai_addrlen))
		die("connect");
	freeaddrinfo(ai);
	busy = setup(fd, busy_us);
	t = malloc((size_t)iters * sizeof(*t));
	if (!t)
		die("malloc");
	for (i = 0; i < WARMUP; i++) {
		send_msg(fd, buf);
		recv_msg(fd, buf);
	}
	for (i = 0; i < iters; i++) {
		t0 = now();
		send_msg(fd, buf);
		recv_msg(fd, buf);
		t1 = now();
		t[i] = (t1 - t0) * 1e6 / 2;
		sum += t[i];
	}
	close(fd);
	qsort(t, (size_t)iters, sizeof(*t), cmp);
	printf("tcplat: mode %s busy_poll %d (%s) iters %ld avg_us %.3f median_us %.3f\n",
	       spin ? "spin" : "block", busy_us, busy, iters, sum / (double)iters,
	       t[iters / 2]);
	free(t);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 5 && !strcmp(argv[1], "server")) {
		spin = parse_mode(argv[3]);
		return server(argv[2], atoi(argv[4]));
	}
	if (argc == 7 && !strcmp(argv[1], "client")) {
		spin = parse_mode(argv[4]);
		return client(argv[2], argv[3], atoi(argv[5]), atol(argv[6]));
	}
	fprintf(stderr, "usage: tcplat server PORT MODE BUSY_US\n"
		"       tcplat client ADDR PORT MODE BUSY_US ITERS\n");
	return 2;
}
