// SPDX-License-Identifier: MIT
/*
 * The rsocket API (rdma/rsocket.h) between two processes: stream
 * transfers checked byte for byte both ways (blocking, MSG_WAITALL,
 * iovecs, MSG_PEEK, two threads on one socket), non-blocking connect,
 * accept and receive (EINPROGRESS, EAGAIN), rpoll and rselect mixing an
 * rsocket with a pipe, rshutdown and rclose as the peer sees them,
 * options (SOL_SOCKET, IPPROTO_TCP, SOL_RDMA), riomap + riowrite, and
 * datagrams with their data and source addresses.  Every socket binds
 * port 0; the port travels to the peer over a pipe.
 */
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/select.h>
#include <sys/uio.h>
#include <unistd.h>

#include <infiniband/sa.h>
#include <rdma/rsocket.h>

#include "cm_common.h"
#include "kick.h"

#define MIN(a, b) ((a) < (b) ? (a) : (b))
#define MAX(a, b) ((a) > (b) ? (a) : (b))

static void fill(uint8_t *buf, size_t len, uint32_t seed)
{
	size_t i;

	for (i = 0; i < len; i++)
		buf[i] = (uint8_t)((seed * 131 + i * 7 + (i >> 9)) & 0xff);
}

/* the index of the first wrong byte, or len */
static size_t check(const uint8_t *buf, size_t len, uint32_t seed)
{
	size_t i;

	for (i = 0; i < len; i++)
		if (buf[i] != (uint8_t)((seed * 131 + i * 7 + (i >> 9)) & 0xff))
			return i;
	return len;
}

#define ASSERT_DATA(buf, len, seed) ASSERT_EQ(check(buf, len, seed), len)

static uint16_t sock_port(int fd)
{
	struct sockaddr_in sin;
	socklen_t len = sizeof(sin);

	ASSERT_EQ(rgetsockname(fd, (struct sockaddr *)&sin, &len), 0);
	ASSERT_EQ(len, sizeof(sin));
	ASSERT_EQ(sin.sin_family, AF_INET);
	return ntohs(sin.sin_port);
}

/* A stream listener on 127.0.0.1, port 0; returns its fd */
static int listener(uint16_t *port)
{
	struct sockaddr_in sin;
	int fd = rsocket(AF_INET, SOCK_STREAM, 0);

	ASSERT_GE(fd, 0);
	make_addr(&sin, "127.0.0.1", 0);
	ASSERT_EQ(rbind(fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
	ASSERT_EQ(rlisten(fd, 4), 0);
	*port = sock_port(fd);
	ASSERT_NE(*port, 0);
	return fd;
}

static int connect_to(uint16_t port)
{
	struct sockaddr_in sin;
	int fd = rsocket(AF_INET, SOCK_STREAM, 0);

	ASSERT_GE(fd, 0);
	make_addr(&sin, "127.0.0.1", port);
	ASSERT_EQ(rconnect(fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
	return fd;
}

static void send_all(int fd, const uint8_t *buf, size_t len)
{
	size_t off = 0;

	while (off < len) {
		/* odd pieces: writes that do not line up with buffers */
		size_t n = MIN(len - off, (size_t)(37 * 1024 + 11));
		ssize_t r = rsend(fd, buf + off, n, 0);

		ASSERT_GT(r, 0);
		off += (size_t)r;
	}
}

static void recv_all(int fd, uint8_t *buf, size_t len)
{
	size_t off = 0;

	while (off < len) {
		ssize_t r = rrecv(fd, buf + off, len - off, 0);

		ASSERT_GT(r, 0);
		off += (size_t)r;
	}
}


/* ------------------------------------------------------------------ */
/* Signals: a blocking rrecv as a recv on a TCP socket                 */

/* The peer: connects, then sends one message each time it is asked. */
static void talk_client(struct peer *p, void *arg)
{
	uint8_t b[100];
	int fd;

	(void)arg;
	fd = connect_to((uint16_t)peer_recv(p));
	peer_send(p, 1);
	while (peer_recv(p)) {
		fill(b, sizeof(b), 7);
		send_all(fd, b, sizeof(b));
	}
	ASSERT_EQ(rclose(fd), 0);
}

static void ask_to_send(void *arg)
{
	peer_send(arg, 1);
}

/* rrecv asleep, real signals: without SA_RESTART it ends with EINTR; with
 * it, it sleeps on and gets the message (tests/lib/kick.h) */
TEST(stream_recv_and_signals)
{
	struct kicker k;
	struct peer p;
	uint8_t b[100];
	uint16_t port;
	int lfd, fd, err;
	ssize_t r;

	peer_start(&p, talk_client, NULL);
	lfd = listener(&port);
	peer_send(&p, port);
	fd = raccept(lfd, NULL, NULL);
	ASSERT_GE(fd, 0);
	ASSERT_EQ(peer_recv(&p), 1);

	kick_install(0);
	kick_start(&k, 0, NULL, NULL);
	r = rrecv(fd, b, sizeof(b), 0);
	err = errno;
	kick_stop(&k);
	ASSERT_EQ(r, -1);
	ASSERT_EQ(err, EINTR);
	ASSERT_GT(kick_hits, 0);

	kick_install(SA_RESTART);
	kick_start(&k, 20, ask_to_send, &p);
	recv_all(fd, b, sizeof(b));
	kick_stop(&k);
	ASSERT_DATA(b, sizeof(b), 7);
	ASSERT_GT(kick_hits, 0);

	peer_send(&p, 0);
	peer_wait(&p);
	ASSERT_EQ(rclose(fd), 0);
	ASSERT_EQ(rclose(lfd), 0);
}

/* ------------------------------------------------------------------ */
/* Stream transfers                                                    */

#define BIG (3u << 20)		/* several times the 256 KiB buffers */

static void echo_client(struct peer *p, void *arg)
{
	uint8_t *buf = malloc(BIG);
	struct sockaddr_in peer;
	socklen_t len = sizeof(peer);
	int fd;

	ASSERT_NOT_NULL(buf);
	fd = connect_to((uint16_t)peer_recv(p));
	ASSERT_EQ(rgetpeername(fd, (struct sockaddr *)&peer, &len), 0);
	ASSERT_EQ(ntohl(peer.sin_addr.s_addr), INADDR_LOOPBACK);
	peer_send(p, sock_port(fd));
	fill(buf, BIG, 1);
	send_all(fd, buf, BIG);
	memset(buf, 0, BIG);
	recv_all(fd, buf, BIG);
	ASSERT_DATA(buf, BIG, 2);
	/* the server closed: end of stream */
	ASSERT_EQ(rrecv(fd, buf, 1, 0), 0);
	ASSERT_EQ(rclose(fd), 0);
	free(buf);
}

TEST(stream_transfer)
{
	uint8_t *buf = malloc(BIG);
	struct sockaddr_in from;
	socklen_t len = sizeof(from);
	struct peer p;
	uint16_t port;
	int lfd, fd;

	ASSERT_NOT_NULL(buf);
	peer_start(&p, echo_client, NULL);
	lfd = listener(&port);
	peer_send(&p, port);
	fd = raccept(lfd, (struct sockaddr *)&from, &len);
	ASSERT_GE(fd, 0);
	ASSERT_EQ(len, sizeof(from));
	ASSERT_EQ(ntohl(from.sin_addr.s_addr), INADDR_LOOPBACK);
	/* the peer's own view of its port matches ours */
	ASSERT_EQ(ntohs(from.sin_port), peer_recv(&p));
	ASSERT_EQ(sock_port(fd), port);
	recv_all(fd, buf, BIG);
	ASSERT_DATA(buf, BIG, 1);
	fill(buf, BIG, 2);
	send_all(fd, buf, BIG);
	ASSERT_EQ(rshutdown(fd, SHUT_RDWR), 0);
	ASSERT_EQ(rclose(fd), 0);
	ASSERT_EQ(rclose(lfd), 0);
	peer_wait(&p);
	free(buf);
}

/* MSG_WAITALL, vectors both ways, MSG_PEEK, rread/rwrite */
static void vec_client(struct peer *p, void *arg)
{
	uint8_t a[1000], b[70000], c[3];
	struct iovec iov[3] = { { a, sizeof(a) }, { b, sizeof(b) },
				{ c, sizeof(c) } };
	struct msghdr msg = { .msg_iov = iov, .msg_iovlen = 3 };
	uint8_t all[sizeof(a) + sizeof(b) + sizeof(c)];
	int fd = connect_to((uint16_t)peer_recv(p));

	fill(all, sizeof(all), 7);
	memcpy(a, all, sizeof(a));
	memcpy(b, all + sizeof(a), sizeof(b));
	memcpy(c, all + sizeof(a) + sizeof(b), sizeof(c));
	ASSERT_EQ(rsendmsg(fd, &msg, 0), (ssize_t)sizeof(all));
	ASSERT_EQ(rwritev(fd, iov, 3), (ssize_t)sizeof(all));
	ASSERT_EQ(rwrite(fd, all, 10), 10);
	ASSERT_EQ(rclose(fd), 0);
}

TEST(stream_waitall_vectors_peek)
{
	static uint8_t buf[2 * 71003 + 10], x[3000], y[68003];
	struct iovec iov[2] = { { x, sizeof(x) }, { y, sizeof(y) } };
	struct msghdr msg = { .msg_iov = iov, .msg_iovlen = 2 };
	struct peer p;
	uint16_t port;
	int lfd, fd;
	uint8_t peek[10];

	peer_start(&p, vec_client, NULL);
	lfd = listener(&port);
	peer_send(&p, port);
	fd = raccept(lfd, NULL, NULL);
	ASSERT_GE(fd, 0);
	/* peeking leaves the data where it was */
	ASSERT_EQ(rrecv(fd, peek, sizeof(peek), MSG_PEEK | MSG_WAITALL),
		  (ssize_t)sizeof(peek));
	ASSERT_DATA(peek, sizeof(peek), 7);
	ASSERT_EQ(rrecv(fd, buf, 71003, MSG_WAITALL), 71003);
	ASSERT_DATA(buf, 71003, 7);
	/* the second copy, scattered over two buffers */
	ASSERT_EQ(rrecvmsg(fd, &msg, MSG_WAITALL), 71003);
	memcpy(buf, x, sizeof(x));
	memcpy(buf + sizeof(x), y, sizeof(y));
	ASSERT_DATA(buf, 71003, 7);
	ASSERT_EQ(rread(fd, buf, 10), 10);
	ASSERT_DATA(buf, 10, 7);
	ASSERT_EQ(rread(fd, buf, 10), 0);	/* closed */
	ASSERT_EQ(rclose(fd), 0);
	ASSERT_EQ(rclose(lfd), 0);
	peer_wait(&p);
}

/* Two threads on one socket, both sides: one sends while the other
 * receives (each side's sends wait for the other side's reads) */
struct duplex {
	int fd;
	uint32_t seed;
	uint8_t *buf;
};

static void *duplex_sender(void *arg)
{
	struct duplex *d = arg;

	fill(d->buf, BIG, d->seed);
	send_all(d->fd, d->buf, BIG);
	return NULL;
}

static void duplex(int fd, uint32_t out_seed, uint32_t in_seed)
{
	struct duplex d = { .fd = fd, .seed = out_seed, .buf = malloc(BIG) };
	uint8_t *in = malloc(BIG);
	pthread_t t;

	ASSERT_NOT_NULL(d.buf);
	ASSERT_NOT_NULL(in);
	ASSERT_EQ(pthread_create(&t, NULL, duplex_sender, &d), 0);
	recv_all(fd, in, BIG);
	ASSERT_EQ(pthread_join(t, NULL), 0);
	ASSERT_DATA(in, BIG, in_seed);
	free(in);
	free(d.buf);
}

static void duplex_peer(struct peer *p, void *arg)
{
	int fd = connect_to((uint16_t)peer_recv(p));

	duplex(fd, 5, 6);
	ASSERT_EQ(rclose(fd), 0);
}

TEST(stream_two_threads)
{
	struct peer p;
	uint16_t port;
	int lfd, fd;

	peer_start(&p, duplex_peer, NULL);
	lfd = listener(&port);
	peer_send(&p, port);
	fd = raccept(lfd, NULL, NULL);
	ASSERT_GE(fd, 0);
	duplex(fd, 6, 5);
	ASSERT_EQ(rclose(fd), 0);
	ASSERT_EQ(rclose(lfd), 0);
	peer_wait(&p);
}

/* ------------------------------------------------------------------ */
/* Non-blocking                                                        */

static void set_nonblock(int fd)
{
	int fl = rfcntl(fd, F_GETFL);

	ASSERT_GE(fl, 0);
	ASSERT_EQ(rfcntl(fd, F_SETFL, fl | O_NONBLOCK), 0);
	ASSERT(rfcntl(fd, F_GETFL) & O_NONBLOCK);
}

static short poll1(int fd, short events, int timeout)
{
	struct pollfd pfd = { .fd = fd, .events = events };
	int n = rpoll(&pfd, 1, timeout);

	ASSERT_GE(n, 0);
	ASSERT_EQ(n, pfd.revents ? 1 : 0);
	return pfd.revents;
}

static void nb_client(struct peer *p, void *arg)
{
	static uint8_t buf[4 << 20];
	struct sockaddr_in sin;
	socklen_t len = sizeof(int);
	size_t sent = 0;
	int fd, err = -1;
	ssize_t n;

	fd = rsocket(AF_INET, SOCK_STREAM, 0);
	ASSERT_GE(fd, 0);
	set_nonblock(fd);
	make_addr(&sin, "127.0.0.1", (uint16_t)peer_recv(p));
	/* nobody accepts yet: the connection cannot be complete */
	errno = 0;
	ASSERT_EQ(rconnect(fd, (struct sockaddr *)&sin, sizeof(sin)), -1);
	ASSERT_EQ(errno, EINPROGRESS);
	errno = 0;
	ASSERT_EQ(rrecv(fd, buf, 1, 0), -1);
	ASSERT_EQ(errno, EAGAIN);
	peer_send(p, 1);		/* now accept */
	while (!(poll1(fd, POLLOUT, -1) & POLLOUT))
		;
	ASSERT_EQ(rgetsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len), 0);
	ASSERT_EQ(err, 0);
	errno = 0;
	ASSERT_EQ(rrecv(fd, buf, 1, 0), -1);	/* connected, no data */
	ASSERT_EQ(errno, EAGAIN);

	/* fill the server's buffers until EAGAIN: it is not reading */
	fill(buf, sizeof(buf), 9);
	for (;;) {
		n = rsend(fd, buf + sent, MIN(sizeof(buf) - sent, 50000), 0);
		if (n < 0) {
			ASSERT_EQ(errno, EAGAIN);
			break;
		}
		ASSERT_GT(n, 0);
		sent += (size_t)n;
		ASSERT_LT(sent, sizeof(buf));	/* flow control stops it */
	}
	ASSERT_EQ(poll1(fd, POLLOUT, 0), 0);
	peer_send(p, (uint32_t)sent);
	/* once the server has read it all, sending is possible again */
	ASSERT_EQ(peer_recv(p), 2);
	while (!(poll1(fd, POLLOUT, -1) & POLLOUT))
		;
	ASSERT_EQ(rsend(fd, buf + sent, 1, MSG_DONTWAIT), 1);
	ASSERT_EQ(rclose(fd), 0);
}

TEST(stream_nonblocking)
{
	static uint8_t buf[4 << 20];
	struct peer p;
	uint16_t port;
	uint32_t sent;
	int lfd, fd;

	peer_start(&p, nb_client, NULL);
	lfd = listener(&port);
	set_nonblock(lfd);
	errno = 0;
	ASSERT_EQ(raccept(lfd, NULL, NULL), -1);	/* none pending */
	ASSERT_EQ(errno, EAGAIN);
	ASSERT_EQ(poll1(lfd, POLLIN, 0), 0);
	peer_send(&p, port);
	ASSERT_EQ(peer_recv(&p), 1);
	while (!(poll1(lfd, POLLIN, -1) & POLLIN))
		;
	fd = raccept(lfd, NULL, NULL);
	ASSERT_GE(fd, 0);
	/* accept(2) semantics: the new socket does not inherit O_NONBLOCK */
	ASSERT_EQ(rfcntl(fd, F_GETFL) & O_NONBLOCK, 0);
	sent = peer_recv(&p);
	ASSERT_GT(sent, 0);
	recv_all(fd, buf, sent);
	ASSERT_DATA(buf, sent, 9);
	peer_send(&p, 2);
	recv_all(fd, buf + sent, 1);
	ASSERT_DATA(buf, sent + 1, 9);
	ASSERT_EQ(rrecv(fd, buf, 1, 0), 0);
	ASSERT_EQ(rclose(fd), 0);
	ASSERT_EQ(rclose(lfd), 0);
	peer_wait(&p);
}

/* ------------------------------------------------------------------ */
/* rpoll and rselect with an ordinary descriptor                       */

static void poll_client(struct peer *p, void *arg)
{
	uint8_t buf[64];
	int fd = connect_to((uint16_t)peer_recv(p));

	fill(buf, sizeof(buf), 3);
	ASSERT_EQ(peer_recv(p), 1);
	ASSERT_EQ(rsend(fd, buf, 5, 0), 5);
	ASSERT_EQ(peer_recv(p), 2);
	ASSERT_EQ(rsend(fd, buf + 5, 7, 0), 7);
	ASSERT_EQ(peer_recv(p), 3);
	ASSERT_EQ(rclose(fd), 0);
}

TEST(rpoll_rselect_mixed)
{
	struct pollfd pfd[2];
	uint8_t buf[64], c;
	struct peer p;
	int lfd, fd, pipefd[2], n, seen;
	struct timeval tv;
	fd_set rd;
	uint16_t port;

	ASSERT_EQ(pipe(pipefd), 0);
	peer_start(&p, poll_client, NULL);
	lfd = listener(&port);
	peer_send(&p, port);
	fd = raccept(lfd, NULL, NULL);
	ASSERT_GE(fd, 0);
	ASSERT_NE(fd, pipefd[0]);

	pfd[0] = (struct pollfd){ .fd = fd, .events = POLLIN };
	pfd[1] = (struct pollfd){ .fd = pipefd[0], .events = POLLIN };
	ASSERT_EQ(rpoll(pfd, 2, 0), 0);
	ASSERT_EQ(rpoll(pfd, 2, 20), 0);	/* times out, nothing ready */
	ASSERT_EQ(write(pipefd[1], "x", 1), 1);
	ASSERT_EQ(rpoll(pfd, 2, -1), 1);
	ASSERT_EQ(pfd[0].revents, 0);
	ASSERT_EQ(pfd[1].revents, POLLIN);
	ASSERT_EQ(read(pipefd[0], &c, 1), 1);

	peer_send(&p, 1);			/* 5 bytes on the rsocket */
	n = rpoll(pfd, 2, -1);
	ASSERT_EQ(n, 1);
	ASSERT_EQ(pfd[0].revents, POLLIN);
	ASSERT_EQ(pfd[1].revents, 0);
	ASSERT_EQ(rrecv(fd, buf, sizeof(buf), 0), 5);
	ASSERT_DATA(buf, 5, 3);

	/* rselect: the pipe at once, the rsocket when its data lands */
	ASSERT_EQ(write(pipefd[1], "y", 1), 1);
	peer_send(&p, 2);			/* 7 more bytes */
	for (seen = 0; seen != 3;) {
		FD_ZERO(&rd);
		FD_SET(fd, &rd);
		FD_SET(pipefd[0], &rd);
		n = rselect(MAX(fd, pipefd[0]) + 1, &rd, NULL, NULL, NULL);
		ASSERT_GE(n, 1);
		ASSERT_EQ(n, FD_ISSET(fd, &rd) + FD_ISSET(pipefd[0], &rd));
		seen |= FD_ISSET(fd, &rd) ? 1 : 0;
		seen |= FD_ISSET(pipefd[0], &rd) ? 2 : 0;
		if (FD_ISSET(pipefd[0], &rd))
			ASSERT_EQ(read(pipefd[0], &c, 1), 1);
		if (FD_ISSET(fd, &rd)) {
			ASSERT_EQ(rrecv(fd, buf + 5, sizeof(buf), 0), 7);
			fill(buf + 32, 12, 3);
			ASSERT_EQ(memcmp(buf + 5, buf + 32 + 5, 7), 0);
		}
	}
	/* nothing left: a timed rselect returns 0 and clears the set */
	FD_ZERO(&rd);
	FD_SET(fd, &rd);
	FD_SET(pipefd[0], &rd);
	tv.tv_sec = 0;
	tv.tv_usec = 20000;
	ASSERT_EQ(rselect(MAX(fd, pipefd[0]) + 1, &rd, NULL, NULL, &tv), 0);
	ASSERT(!FD_ISSET(fd, &rd) && !FD_ISSET(pipefd[0], &rd));

	peer_send(&p, 3);			/* the peer closes */
	pfd[0].events = POLLIN;
	while (!(pfd[0].revents & POLLHUP))
		ASSERT_GE(rpoll(pfd, 1, -1), 1);
	ASSERT(pfd[0].revents & POLLIN);	/* end of stream to read */
	ASSERT_EQ(rrecv(fd, buf, 1, 0), 0);
	ASSERT_EQ(rclose(fd), 0);
	ASSERT_EQ(rclose(lfd), 0);
	close(pipefd[0]);
	close(pipefd[1]);
	peer_wait(&p);
}

/* ------------------------------------------------------------------ */
/* Shutdown and close                                                  */

static void shut_client(struct peer *p, void *arg)
{
	uint8_t buf[4000];
	int fd = connect_to((uint16_t)peer_recv(p));
	short re;

	fill(buf, 1000, 11);
	send_all(fd, buf, 1000);
	ASSERT_EQ(rshutdown(fd, SHUT_WR), 0);
	errno = 0;
	ASSERT_EQ(rsend(fd, buf, 1, 0), -1);	/* our write side is shut */
	ASSERT_EQ(errno, ECONNRESET);
	/* still reading: the server answers after our end of stream */
	recv_all(fd, buf, 2000);
	ASSERT_DATA(buf, 2000, 12);
	ASSERT_EQ(rrecv(fd, buf, 1, 0), 0);	/* the server closed */
	re = poll1(fd, POLLIN | POLLOUT, 0);
	ASSERT(re & POLLHUP);
	ASSERT(re & POLLIN);
	ASSERT_EQ(rclose(fd), 0);
	errno = 0;
	ASSERT_EQ(rrecv(fd, buf, 1, 0), -1);	/* gone */
	ASSERT_EQ(errno, EBADF);
	errno = 0;
	ASSERT_EQ(rclose(fd), -1);
	ASSERT_EQ(errno, EBADF);
}

TEST(stream_shutdown_close)
{
	uint8_t buf[2000];
	struct peer p;
	uint16_t port;
	int lfd, fd;

	peer_start(&p, shut_client, NULL);
	lfd = listener(&port);
	peer_send(&p, port);
	fd = raccept(lfd, NULL, NULL);
	ASSERT_GE(fd, 0);
	recv_all(fd, buf, 1000);
	ASSERT_DATA(buf, 1000, 11);
	ASSERT_EQ(rrecv(fd, buf, 1, 0), 0);	/* its SHUT_WR */
	ASSERT_EQ(rrecv(fd, buf, 1, 0), 0);	/* and it stays so */
	ASSERT(poll1(fd, POLLOUT, -1) & POLLOUT);
	fill(buf, 2000, 12);
	send_all(fd, buf, 2000);
	ASSERT_EQ(rclose(fd), 0);
	ASSERT_EQ(rclose(lfd), 0);
	peer_wait(&p);
}

/* ------------------------------------------------------------------ */
/* Options                                                             */

static int get_int(int fd, int level, int name)
{
	socklen_t len = sizeof(int);
	int v = -12345;

	ASSERT_EQ(rgetsockopt(fd, level, name, &v, &len), 0);
	ASSERT_EQ(len, sizeof(int));
	return v;
}

static void set_int(int fd, int level, int name, int v)
{
	ASSERT_EQ(rsetsockopt(fd, level, name, &v, sizeof(v)), 0);
}

static void opt_server(struct peer *p, void *arg)
{
	uint8_t *buf = malloc(300000);
	uint16_t port;
	int lfd, fd;

	ASSERT_NOT_NULL(buf);
	lfd = rsocket(AF_INET, SOCK_STREAM, 0);
	ASSERT_GE(lfd, 0);
	set_int(lfd, SOL_RDMA, RDMA_SQSIZE, 40);
	set_int(lfd, SOL_RDMA, RDMA_RQSIZE, 24);
	ASSERT_EQ(rclose(lfd), 0);
	lfd = listener(&port);
	set_int(lfd, SOL_RDMA, RDMA_SQSIZE, 40);	/* listening: allowed */
	set_int(lfd, SOL_RDMA, RDMA_RQSIZE, 24);
	peer_send(p, port);
	fd = raccept(lfd, NULL, NULL);
	ASSERT_GE(fd, 0);
	/* an accepted socket inherits the listener's sizes */
	ASSERT_EQ(get_int(fd, SOL_RDMA, RDMA_SQSIZE), 40);
	ASSERT_EQ(get_int(fd, SOL_RDMA, RDMA_RQSIZE), 24);
	recv_all(fd, buf, 300000);
	ASSERT_DATA(buf, 300000, 13);
	fill(buf, 300000, 14);
	send_all(fd, buf, 300000);
	ASSERT_EQ(rrecv(fd, buf, 1, 0), 0);
	ASSERT_EQ(rclose(fd), 0);
	ASSERT_EQ(rclose(lfd), 0);
	free(buf);
}

TEST(options)
{
	uint8_t *buf = malloc(300000);
	struct ibv_path_data path[2];
	struct linger lg = { 1, 5 };
	struct tcp_info ti;
	struct sockaddr_in sin;
	socklen_t len;
	struct peer p;
	union ibv_gid gid;
	int fd, v, pipefd[2];

	ASSERT_NOT_NULL(buf);
	fd = rsocket(AF_INET, SOCK_STREAM, 0);
	ASSERT_GE(fd, 0);
	/* SOL_RDMA before connecting */
	ASSERT_EQ(get_int(fd, SOL_RDMA, RDMA_SQSIZE), 384);
	ASSERT_EQ(get_int(fd, SOL_RDMA, RDMA_RQSIZE), 384);
	ASSERT_EQ(get_int(fd, SOL_RDMA, RDMA_INLINE), 64);
	ASSERT_EQ(get_int(fd, SOL_RDMA, RDMA_IOMAPSIZE), 0);
	set_int(fd, SOL_RDMA, RDMA_SQSIZE, 100);
	set_int(fd, SOL_RDMA, RDMA_RQSIZE, 50);
	set_int(fd, SOL_RDMA, RDMA_INLINE, 32);
	set_int(fd, SOL_RDMA, RDMA_IOMAPSIZE, 1000);
	ASSERT_EQ(get_int(fd, SOL_RDMA, RDMA_SQSIZE), 100);
	ASSERT_EQ(get_int(fd, SOL_RDMA, RDMA_RQSIZE), 50);
	ASSERT_EQ(get_int(fd, SOL_RDMA, RDMA_INLINE), 32);
	/* one byte on the wire: 128 | 1000 >> 8, read back as 3 * 256 */
	ASSERT_EQ(get_int(fd, SOL_RDMA, RDMA_IOMAPSIZE), 768);
	set_int(fd, SOL_RDMA, RDMA_IOMAPSIZE, 5);
	ASSERT_EQ(get_int(fd, SOL_RDMA, RDMA_IOMAPSIZE), 5);
	/* SOL_SOCKET and IPPROTO_TCP */
	set_int(fd, SOL_SOCKET, SO_RCVBUF, 100000);
	ASSERT_EQ(get_int(fd, SOL_SOCKET, SO_RCVBUF), 200000);
	set_int(fd, SOL_SOCKET, SO_SNDBUF, 50000);
	ASSERT_EQ(get_int(fd, SOL_SOCKET, SO_SNDBUF), 100000);
	set_int(fd, IPPROTO_TCP, TCP_NODELAY, 1);
	ASSERT_EQ(get_int(fd, IPPROTO_TCP, TCP_NODELAY), 1);
	set_int(fd, IPPROTO_TCP, TCP_NODELAY, 0);
	ASSERT_EQ(get_int(fd, IPPROTO_TCP, TCP_NODELAY), 0);
	set_int(fd, SOL_SOCKET, SO_REUSEADDR, 1);
	ASSERT_EQ(get_int(fd, SOL_SOCKET, SO_REUSEADDR), 1);
	set_int(fd, SOL_SOCKET, SO_KEEPALIVE, 1);
	ASSERT_EQ(get_int(fd, SOL_SOCKET, SO_KEEPALIVE), 1);
	set_int(fd, IPPROTO_TCP, TCP_KEEPIDLE, 30);
	ASSERT_EQ(get_int(fd, IPPROTO_TCP, TCP_KEEPIDLE), 30);
	errno = 0;
	v = 0;
	ASSERT_EQ(rsetsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &v, sizeof(v)),
		  -1);
	ASSERT_EQ(errno, EINVAL);
	ASSERT_EQ(rsetsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg)), 0);
	memset(&lg, 0, sizeof(lg));
	len = sizeof(lg);
	ASSERT_EQ(rgetsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, &len), 0);
	ASSERT_EQ(lg.l_onoff, 1);
	ASSERT_EQ(get_int(fd, SOL_SOCKET, SO_ERROR), 0);
	/* what rsockets do not know, and bad lengths */
	errno = 0;
	v = 1;
	ASSERT_EQ(rsetsockopt(fd, SOL_SOCKET, SO_BROADCAST, &v, sizeof(v)), -1);
	ASSERT_EQ(errno, ENOTSUP);
	errno = 0;
	len = sizeof(v);
	ASSERT_EQ(rgetsockopt(fd, SOL_SOCKET, SO_BROADCAST, &v, &len), -1);
	ASSERT_EQ(errno, ENOTSUP);
	errno = 0;
	ASSERT_EQ(rsetsockopt(fd, SOL_SOCKET, SO_RCVBUF, &v, 2), -1);
	ASSERT_EQ(errno, EINVAL);
	errno = 0;
	len = 2;
	ASSERT_EQ(rgetsockopt(fd, SOL_SOCKET, SO_RCVBUF, &v, &len), -1);
	ASSERT_EQ(errno, EINVAL);
	errno = 0;
	ASSERT_EQ(rfcntl(fd, F_GETOWN), -1);
	ASSERT_EQ(errno, ENOTSUP);
	ASSERT_EQ(pipe(pipefd), 0);
	errno = 0;
	len = sizeof(v);
	ASSERT_EQ(rgetsockopt(pipefd[0], SOL_SOCKET, SO_ERROR, &v, &len), -1);
	ASSERT_EQ(errno, EBADF);
	close(pipefd[0]);
	close(pipefd[1]);

	/* connected: the sizes stay, SOL_RDMA is closed, the path shows */
	peer_start(&p, opt_server, NULL);
	make_addr(&sin, "127.0.0.1", (uint16_t)peer_recv(&p));
	ASSERT_EQ(rconnect(fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
	ASSERT_EQ(get_int(fd, SOL_RDMA, RDMA_SQSIZE), 100);
	ASSERT_EQ(get_int(fd, SOL_RDMA, RDMA_RQSIZE), 50);
	ASSERT_GE(get_int(fd, SOL_RDMA, RDMA_INLINE), 32);
	errno = 0;
	v = 64;
	ASSERT_EQ(rsetsockopt(fd, SOL_RDMA, RDMA_SQSIZE, &v, sizeof(v)), -1);
	ASSERT_EQ(errno, EINVAL);
	ASSERT_EQ(get_int(fd, IPPROTO_TCP, TCP_MAXSEG), 4096); /* lo's MTU */
	len = sizeof(ti);
	ASSERT_EQ(rgetsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len), 0);
	ASSERT_EQ(ti.tcpi_state, TCP_ESTABLISHED);
	len = sizeof(path);
	ASSERT_EQ(rgetsockopt(fd, SOL_RDMA, RDMA_ROUTE, path, &len), 0);
	ASSERT_EQ(len, sizeof(path[0]));
	memset(&gid, 0, sizeof(gid));
	gid.raw[10] = gid.raw[11] = 0xff;
	gid.raw[12] = 127;
	gid.raw[15] = 1;
	ASSERT_EQ(memcmp(&path[0].path.dgid, &gid, sizeof(gid)), 0);
	/* small queues and little inline data still move everything */
	fill(buf, 300000, 13);
	send_all(fd, buf, 300000);
	recv_all(fd, buf, 300000);
	ASSERT_DATA(buf, 300000, 14);
	ASSERT_EQ(rclose(fd), 0);
	peer_wait(&p);
	free(buf);
}

/* ------------------------------------------------------------------ */
/* riomap and riowrite                                                 */

#define MAPLEN 65536
#define MAPOFF 0x10000

static void io_client(struct peer *p, void *arg)
{
	static uint8_t data[MAPLEN], word[4];
	int fd = rsocket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in sin;

	ASSERT_GE(fd, 0);
	/* the table the server's mappings are written into */
	set_int(fd, SOL_RDMA, RDMA_IOMAPSIZE, 2);
	make_addr(&sin, "127.0.0.1", (uint16_t)peer_recv(p));
	ASSERT_EQ(rconnect(fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
	/* a local mapping: offset -1 is the buffer's address */
	ASSERT_EQ(riomap(fd, data, sizeof(data), PROT_NONE, 0, -1),
		  (off_t)(uintptr_t)data);
	ASSERT_EQ(riounmap(fd, data, sizeof(data)), 0);
	recv_all(fd, word, sizeof(word));	/* the mapping came first */
	fill(data, MAPLEN, 21);
	ASSERT_EQ(riowrite(fd, data, MAPLEN, MAPOFF, 0), (size_t)MAPLEN);
	/* past the end of the mapping: a short write */
	fill(data, MAPLEN, 22);
	ASSERT_EQ(riowrite(fd, data, 10000, MAPOFF + MAPLEN - 4000, 0),
		  (size_t)4000);
	/* nothing mapped there */
	errno = 0;
	ASSERT_EQ(riowrite(fd, data, 10, MAPOFF + 2 * MAPLEN, 0), (size_t)-1);
	ASSERT_EQ(errno, EINVAL);
	ASSERT_EQ(rsend(fd, "done", 4, 0), 4);
	ASSERT_EQ(rrecv(fd, word, 1, 0), 0);
	ASSERT_EQ(rclose(fd), 0);
}

TEST(riomap_riowrite)
{
	static uint8_t map[MAPLEN], expect[MAPLEN];
	uint8_t word[4];
	struct peer p;
	uint16_t port;
	int lfd, fd;

	peer_start(&p, io_client, NULL);
	lfd = listener(&port);
	errno = 0;
	ASSERT_EQ(riomap(lfd, map, sizeof(map), PROT_WRITE, 0, 0), -1);
	ASSERT_EQ(errno, EINVAL);		/* no connection yet */
	peer_send(&p, port);
	fd = raccept(lfd, NULL, NULL);
	ASSERT_GE(fd, 0);
	errno = 0;
	ASSERT_EQ(riomap(fd, map, sizeof(map), PROT_READ, 0, 0), -1);
	ASSERT_EQ(errno, EINVAL);
	ASSERT_EQ(riomap(fd, map, sizeof(map), PROT_WRITE, 0, MAPOFF),
		  MAPOFF);
	ASSERT_EQ(rsend(fd, "map!", 4, 0), 4);
	recv_all(fd, word, sizeof(word));
	ASSERT_EQ(memcmp(word, "done", 4), 0);
	/* the first write whole, the second over its last 4000 bytes */
	fill(expect, MAPLEN, 21);
	fill(expect + MAPLEN - 4000, 4000, 22);
	ASSERT_EQ(memcmp(map, expect, MAPLEN), 0);
	ASSERT_EQ(riounmap(fd, map, sizeof(map)), 0);
	errno = 0;
	ASSERT_EQ(riounmap(fd, map, sizeof(map)), -1);
	ASSERT_EQ(errno, EINVAL);
	ASSERT_EQ(rclose(fd), 0);
	ASSERT_EQ(rclose(lfd), 0);
	peer_wait(&p);
}

/* ------------------------------------------------------------------ */
/* Datagrams                                                           */

static int dgram_socket(const char *ip, uint16_t *port)
{
	struct sockaddr_in sin;
	int fd = rsocket(AF_INET, SOCK_DGRAM, 0);

	ASSERT_GE(fd, 0);
	if (ip) {
		make_addr(&sin, ip, 0);
		ASSERT_EQ(rbind(fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
		*port = sock_port(fd);
	}
	return fd;
}

static void dg_client(struct peer *p, void *arg)
{
	static const size_t sizes[] = { 1, 1000, 2040 };
	uint8_t buf[4096];
	struct sockaddr_in srv, from;
	socklen_t len = sizeof(from);
	int fd = dgram_socket(NULL, NULL);
	size_t i;

	make_addr(&srv, "127.0.0.1", (uint16_t)peer_recv(p));
	/* first contact: an unbound socket gets a port, as UDP's */
	fill(buf, 100, 31);
	ASSERT_EQ(rsendto(fd, buf, 100, 0, (struct sockaddr *)&srv,
			  sizeof(srv)), 100);
	peer_send(p, sock_port(fd));
	memset(buf, 0, sizeof(buf));
	ASSERT_EQ(rrecvfrom(fd, buf, sizeof(buf), 0, (struct sockaddr *)&from,
			    &len), 1500);
	ASSERT_DATA(buf, 1500, 32);
	ASSERT_EQ(len, sizeof(from));
	ASSERT_EQ(from.sin_family, AF_INET);
	ASSERT_EQ(from.sin_port, srv.sin_port);
	ASSERT_EQ(from.sin_addr.s_addr, srv.sin_addr.s_addr);
	/* connected: rsend; the largest message a buffer holds, and one
	 * byte more */
	ASSERT_EQ(rconnect(fd, (struct sockaddr *)&srv, sizeof(srv)), 0);
	for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		fill(buf, sizes[i], 40 + (uint32_t)i);
		ASSERT_EQ(rsend(fd, buf, sizes[i], 0), (ssize_t)sizes[i]);
	}
	errno = 0;
	ASSERT_EQ(rsend(fd, buf, 2041, 0), -1);
	ASSERT_EQ(errno, EMSGSIZE);
	ASSERT_EQ(rrecv(fd, buf, sizeof(buf), 0), 3);	/* "end" */
	ASSERT_EQ(memcmp(buf, "end", 3), 0);
	ASSERT_EQ(rclose(fd), 0);
}

TEST(dgram_sendto_recvfrom)
{
	uint8_t buf[4096], small[100];
	struct sockaddr_in from;
	socklen_t len = sizeof(from);
	struct peer p;
	uint16_t port;
	int fd;

	peer_start(&p, dg_client, NULL);
	fd = dgram_socket("127.0.0.1", &port);
	peer_send(&p, port);
	ASSERT_EQ(rrecvfrom(fd, buf, sizeof(buf), 0, (struct sockaddr *)&from,
			    &len), 100);
	ASSERT_DATA(buf, 100, 31);
	/* the sender as it named itself: its own port, its address */
	ASSERT_EQ(len, sizeof(from));
	ASSERT_EQ(ntohs(from.sin_port), peer_recv(&p));
	ASSERT_EQ(ntohl(from.sin_addr.s_addr), INADDR_LOOPBACK);
	fill(buf, 1500, 32);
	ASSERT_EQ(rsendto(fd, buf, 1500, 0, (struct sockaddr *)&from, len),
		  1500);
	/* 1 byte; 1000 peeked, then read; 2040 truncated to 100 */
	ASSERT_EQ(rrecv(fd, buf, sizeof(buf), 0), 1);
	ASSERT_DATA(buf, 1, 40);
	ASSERT_EQ(rrecv(fd, buf, sizeof(buf), MSG_PEEK), 1000);
	ASSERT_DATA(buf, 1000, 41);
	memset(buf, 0, sizeof(buf));
	ASSERT_EQ(rrecv(fd, buf, sizeof(buf), 0), 1000);
	ASSERT_DATA(buf, 1000, 41);
	ASSERT_EQ(rrecv(fd, small, sizeof(small), 0), (ssize_t)sizeof(small));
	ASSERT_DATA(small, sizeof(small), 42);
	errno = 0;
	ASSERT_EQ(rrecv(fd, buf, sizeof(buf), MSG_DONTWAIT), -1);
	ASSERT_EQ(errno, EAGAIN);	/* the rest of it is gone */
	ASSERT(poll1(fd, POLLOUT, 0) & POLLOUT);
	ASSERT_EQ(poll1(fd, POLLIN, 0), 0);
	ASSERT_EQ(rsendto(fd, "end", 3, 0, (struct sockaddr *)&from, len), 3);
	peer_wait(&p);
	ASSERT_EQ(rclose(fd), 0);
}

/* ------------------------------------------------------------------ */
/* Errors                                                              */

#define ASSERT_FAILS(expr, err)                                          \
	do {                                                             \
		errno = 0;                                               \
		ASSERT_EQ((long)(expr), -1);                             \
		ASSERT_EQ(errno, err);                                   \
	} while (0)

TEST(errors)
{
	struct sockaddr_in sin;
	uint16_t port;
	uint8_t buf[8];
	socklen_t len = sizeof(int);
	int fd, dfd, lfd, pipefd[2], v;

	ASSERT_FAILS(rsocket(AF_UNIX, SOCK_STREAM, 0), ENOTSUP);
	ASSERT_FAILS(rsocket(AF_INET, SOCK_RAW, 0), ENOTSUP);
	ASSERT_FAILS(rsocket(AF_INET, SOCK_STREAM, IPPROTO_UDP), ENOTSUP);
	ASSERT_EQ(pipe(pipefd), 0);
	make_addr(&sin, "127.0.0.1", 0);
	ASSERT_FAILS(rbind(pipefd[0], (struct sockaddr *)&sin, sizeof(sin)),
		     EBADF);
	ASSERT_FAILS(rsend(pipefd[1], buf, 1, 0), EBADF);
	ASSERT_FAILS(rclose(pipefd[0]), EBADF);
	close(pipefd[0]);
	close(pipefd[1]);

	fd = rsocket(AF_INET, SOCK_STREAM, 0);
	ASSERT_GE(fd, 0);
	ASSERT_FAILS(rrecv(fd, buf, 1, 0), ENOTCONN);
	ASSERT_FAILS(rsend(fd, buf, 1, 0), ENOTCONN);
	ASSERT_FAILS(raccept(fd, NULL, NULL), EBADF);	/* not listening */
	ASSERT_FAILS(rsendto(fd, buf, 1, 0, (struct sockaddr *)&sin,
			     sizeof(sin)), EISCONN);
	ASSERT_FAILS(rshutdown(fd, 42), EINVAL);
	/* a port nobody listens on: refused, and SO_ERROR says so once */
	lfd = listener(&port);
	ASSERT_EQ(rclose(lfd), 0);
	make_addr(&sin, "127.0.0.1", port);
	ASSERT_FAILS(rconnect(fd, (struct sockaddr *)&sin, sizeof(sin)),
		     ECONNREFUSED);
	ASSERT_EQ(rgetsockopt(fd, SOL_SOCKET, SO_ERROR, &v, &len), 0);
	ASSERT_EQ(v, ECONNREFUSED);
	ASSERT_EQ(get_int(fd, SOL_SOCKET, SO_ERROR), 0);
	ASSERT_EQ(rclose(fd), 0);
	ASSERT_FAILS(rclose(fd), EBADF);

	dfd = rsocket(AF_INET, SOCK_DGRAM, 0);
	ASSERT_GE(dfd, 0);
	ASSERT_FAILS(rlisten(dfd, 1), EOPNOTSUPP);
	ASSERT_FAILS(rrecv(dfd, buf, 1, MSG_DONTWAIT), EINVAL); /* unused */
	ASSERT_FAILS(rsend(dfd, buf, 1, 0), EDESTADDRREQ);
	ASSERT_EQ(rclose(dfd), 0);
}
