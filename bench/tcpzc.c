// SPDX-License-Identifier: MIT
/*
 * bench/tcpzc: what issue 15's two bulk-transfer ideas could earn on this
 * machine's paths, measured on plain TCP before softhca is changed for
 * them: a stream sent with MSG_ZEROCOPY beside the same stream copied,
 * and two streams at once beside one.  For each, the bytes a second the
 * receiver took and, with MSG_ZEROCOPY, how many of the kernel's
 * completion notifications said the data were copied after all
 * (SO_EE_CODE_ZEROCOPY_COPIED: the kernel's answer for a path on which
 * zero copy does not happen, loopback and veth among them).  A benchmark,
 * not a test: bench/tcpzc.sh runs it over 127.0.0.1 and between two
 * network namespaces.
 *
 *   tcpzc server PORT
 *   tcpzc client HOST PORT SIZE SECONDS copy|zc STREAMS
 *
 * The server accepts STREAMS connections and reads each to its end; the
 * client sends SIZE-byte writes on every stream (a thread each) for
 * SECONDS and prints one line: mode, streams, size, Gb/s, and for zc the
 * notifications (completions, copied).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <linux/errqueue.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#ifndef SO_ZEROCOPY
#define SO_ZEROCOPY	60
#endif
#ifndef MSG_ZEROCOPY
#define MSG_ZEROCOPY	0x4000000
#endif
#define MAX_STREAMS	8

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void die(const char *what)
{
	perror(what);
	exit(1);
}

/* The receiver: every accepted stream read to its end, in a thread each. */
static void *drain(void *arg)
{
	int fd = (int)(long)arg;
	static char buf[1 << 20];	/* contents are not looked at */
	ssize_t n;

	while ((n = read(fd, buf, sizeof(buf))) > 0 || (n < 0 && errno == EINTR))
		;
	close(fd);
	return NULL;
}

static __attribute__((noreturn)) void server(int port)
{
	struct sockaddr_in6 sa = { .sin6_family = AF_INET6,
				   .sin6_port = htons((uint16_t)port) };
	pthread_t t;
	int ls, fd, one = 1;

	ls = socket(AF_INET6, SOCK_STREAM, 0);
	if (ls < 0)
		die("socket");
	setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(ls, (struct sockaddr *)&sa, sizeof(sa)) || listen(ls, 16))
		die("bind/listen");
	printf("listening\n");
	fflush(stdout);
	/* bounded by the caller (timeout); every stream in its thread */
	for (;;) {
		fd = accept(ls, NULL, NULL);
		if (fd < 0) {
			if (errno == EINTR)
				continue;
			die("accept");
		}
		if (pthread_create(&t, NULL, drain, (void *)(long)fd))
			die("pthread_create");
		pthread_detach(t);
	}
}

struct stream {
	int fd;
	size_t size;
	double end;
	int zc;
	char *buf;
	unsigned long long bytes, notes, copied;
	int pending;		/* zc sends not yet completed */
};

/* Read what the error queue holds: each notification covers a range of
 * sends; COPIED says the kernel copied them after all. */
static void zc_reap(struct stream *s, int wait_ms)
{
	char ctl[CMSG_SPACE(sizeof(struct sock_extended_err))];
	struct msghdr mh;
	struct cmsghdr *cm;
	struct pollfd p = { .fd = s->fd, .events = 0 };

	for (;;) {
		memset(&mh, 0, sizeof(mh));
		mh.msg_control = ctl;
		mh.msg_controllen = sizeof(ctl);
		if (recvmsg(s->fd, &mh, MSG_ERRQUEUE | MSG_DONTWAIT) < 0) {
			if (errno != EAGAIN || !wait_ms || !s->pending)
				return;
			/* POLLERR comes with the error queue's next entry */
			if (poll(&p, 1, wait_ms) <= 0)
				return;
			continue;
		}
		for (cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm)) {
			struct sock_extended_err *e =
				(struct sock_extended_err *)CMSG_DATA(cm);
			unsigned int n;

			if (e->ee_origin != SO_EE_ORIGIN_ZEROCOPY)
				continue;
			n = e->ee_data - e->ee_info + 1;
			s->notes++;
			s->pending -= (int)n;
			if (e->ee_code & SO_EE_CODE_ZEROCOPY_COPIED)
				s->copied++;
		}
	}
}

static void *sender(void *arg)
{
	struct stream *s = arg;

	while (now() < s->end) {
		ssize_t n = send(s->fd, s->buf, s->size,
				 s->zc ? MSG_ZEROCOPY : 0);

		if (n < 0) {
			if (errno == ENOBUFS && s->zc) {
				/* too many notifications outstanding */
				zc_reap(s, 10);
				continue;
			}
			if (errno == EINTR)
				continue;
			die("send");
		}
		s->bytes += (unsigned long long)n;
		if (s->zc) {
			s->pending++;
			zc_reap(s, 0);
		}
	}
	if (s->zc)
		zc_reap(s, 1000);
	shutdown(s->fd, SHUT_WR);
	return NULL;
}

static int client(const char *host, const char *port, size_t size,
		  double seconds, int zc, int nstreams)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *ai;
	struct stream st[MAX_STREAMS];
	pthread_t t[MAX_STREAMS];
	unsigned long long bytes = 0, notes = 0, copied = 0;
	double t0, t1;
	int i, one = 1;

	if (nstreams < 1 || nstreams > MAX_STREAMS)
		nstreams = 1;
	if (getaddrinfo(host, port, &hints, &ai))
		die("getaddrinfo");
	for (i = 0; i < nstreams; i++) {
		memset(&st[i], 0, sizeof(st[i]));
		st[i].fd = socket(ai->ai_family, SOCK_STREAM, 0);
		if (st[i].fd < 0 || connect(st[i].fd, ai->ai_addr,
					    ai->ai_addrlen))
			die("connect");
		if (zc && setsockopt(st[i].fd, SOL_SOCKET, SO_ZEROCOPY, &one,
				     sizeof(one)))
			die("SO_ZEROCOPY");
		st[i].size = size;
		st[i].zc = zc;
		/* page-aligned, written once: what a registered buffer is */
		st[i].buf = mmap(NULL, size, PROT_READ | PROT_WRITE,
				 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (st[i].buf == MAP_FAILED)
			die("mmap");
		memset(st[i].buf, 0x5a, size);
	}
	freeaddrinfo(ai);
	t0 = now();
	for (i = 0; i < nstreams; i++) {
		st[i].end = t0 + seconds;
		if (pthread_create(&t[i], NULL, sender, &st[i]))
			die("pthread_create");
	}
	for (i = 0; i < nstreams; i++) {
		pthread_join(t[i], NULL);
		bytes += st[i].bytes;
		notes += st[i].notes;
		copied += st[i].copied;
	}
	t1 = now();
	printf("%s streams %d size %zu: %.2f Gb/s", zc ? "zc" : "copy",
	       nstreams, size, (double)bytes * 8 / (t1 - t0) / 1e9);
	if (zc)
		printf(", notifications %llu, copied %llu", notes, copied);
	printf("\n");
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "server"))
		server(atoi(argv[2]));
	if (argc == 8 && !strcmp(argv[1], "client"))
		return client(argv[2], argv[3], (size_t)atol(argv[4]),
			      atof(argv[5]), !strcmp(argv[6], "zc"),
			      atoi(argv[7]));
	fprintf(stderr, "usage: tcpzc server PORT\n"
		"       tcpzc client HOST PORT SIZE SECONDS copy|zc STREAMS\n");
	return 2;
}
