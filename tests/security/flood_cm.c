// SPDX-License-Identifier: MIT
/*
 * A connection flood against an rdma_cm listener (issue 11: "the CM
 * listener keeps its pause").  The victim listens on 127.0.0.1 (a port of
 * this test's range) with 20 descriptors to spare; a flooder opens 300 TCP
 * connections to it, which the CM accepts until accept4 fails with EMFILE.
 * The CM thread must then pause, not spin: strace counts its accept4
 * calls over 3 s of exhaustion (a count, not a speed: a handful with the
 * pause, hundreds of thousands with a spin).  After the flood the
 * victim's descriptors are back to their number before it, its listener
 * has taken every connection left queued, and a real client connects and
 * sends a message.  Skips without strace or when it
 * may not trace the victim.
 */
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include "cm_common.h"
#include "fdcount.h"

#define CM_PORT		31150	/* this test's range: 31100-31199 */
#define HEADROOM	20
#define N_TCP		300
#define EXIT_SKIP	77

static void pause_ms(int ms)
{
	poll(NULL, 0, ms);
}

/* The real client: connects when told, sends "ping", disconnects. */
static void client(struct peer *p, void *arg)
{
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id;
	char ping[16] = "ping";

	(void)arg;
	ASSERT_EQ(peer_recv(p), 1);
	ch = rdma_create_event_channel();
	ASSERT_NOT_NULL(ch);
	ASSERT_EQ(rdma_create_id(ch, &id, NULL, RDMA_PS_TCP), 0);
	resolve_to(ch, id, loopback_ip(), CM_PORT);
	make_qp(id, IBV_QPT_RC);
	ASSERT_EQ(rdma_connect(id, NULL), 0);
	expect_event_ack(ch, RDMA_CM_EVENT_ESTABLISHED);
	send_buf(id, ping, sizeof(ping));
	ASSERT_EQ(peer_recv(p), 2);
	ASSERT_EQ(rdma_disconnect(id), 0);
	expect_event_ack(ch, RDMA_CM_EVENT_DISCONNECTED);
	rdma_destroy_qp(id);
	ASSERT_EQ(rdma_destroy_id(id), 0);
	rdma_destroy_event_channel(ch);
}

/* accept4 calls of pid's threads over ms, as strace sees them; -1: strace
 * could not trace it. */
static int traced_accepts(pid_t pid, int ms)
{
	char out[] = "/tmp/softhca-flood-cm-XXXXXX", spid[16], line[512];
	int fd = mkstemp(out), n = 0, status;
	bool attached = false;
	pid_t st;
	FILE *f;

	ASSERT_GE(fd, 0);
	close(fd);
	snprintf(spid, sizeof(spid), "%d", (int)pid);
	st = fork();
	ASSERT_GE(st, 0);
	if (st == 0) {
		int null = open("/dev/null", O_WRONLY);

		dup2(null, 2);
		execlp("strace", "strace", "-f", "-e", "trace=accept4,accept",
		       "-o", out, "-p", spid, (char *)NULL);
		_exit(127);
	}
	pause_ms(ms);
	kill(st, SIGINT);
	ASSERT_EQ(waitpid(st, &status, 0), st);
	f = fopen(out, "r");
	ASSERT(f);
	while (fgets(line, sizeof(line), f)) {
		attached = true;
		n += strstr(line, "accept4(") || strstr(line, "accept(");
	}
	fclose(f);
	unlink(out);
	/* strace wrote nothing at all: never attached (no strace, or
	 * ptrace refused) */
	if (!attached && WIFEXITED(status) && WEXITSTATUS(status))
		return -1;
	return n;
}

/* Connections waiting in the accept queue of the IPv4 listener on port,
 * as /proc/net/tcp gives it (rx_queue of a LISTEN socket), or -1. */
static int listen_queue(uint16_t port)
{
	char line[256], want[32];
	unsigned int rx;
	int n = -1;
	FILE *f = fopen("/proc/net/tcp", "r");

	if (!f)
		return -1;
	snprintf(want, sizeof(want), ":%04X 00000000:0000 0A ", port);
	while (fgets(line, sizeof(line), f)) {
		char *p = strstr(line, want);

		if (p && sscanf(p + strlen(want), "%*x:%x", &rx) == 1)
			n = (int)rx;
	}
	fclose(f);
	return n;
}

static void flooder(int fd, pid_t victim, int limit, int baseline)
{
	struct sockaddr_in sin;
	struct rlimit rl;
	static int held[N_TCP];
	int n = 0, i, fds = 0, accepts, queued = -1;
	char c = 'f';

	ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &rl), 0);
	rl.rlim_cur = rl.rlim_max < 4096 ? rl.rlim_max : 4096;
	ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &rl), 0);
	make_addr(&sin, loopback_ip(), CM_PORT);
	for (i = 0; i < N_TCP; i++) {
		int s = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);

		ASSERT_GE(s, 0);
		if (connect(s, (struct sockaddr *)&sin, sizeof(sin)) &&
		    errno != EINPROGRESS) {
			close(s);
			continue;
		}
		held[n++] = s;
	}
	/* the victim runs out of descriptors */
	for (i = 0; i < 200; i++) {
		fds = count_fds(victim);
		if (fds >= limit - 1)
			break;
		pause_ms(100);
	}
	ASSERT_GE(fds, limit - 1);
	accepts = traced_accepts(victim, 3000);
	if (accepts < 0) {
		printf("  skip reason: strace cannot trace the victim\n");
		fflush(stdout);
		_exit(EXIT_SKIP);
	}
	printf("  accept4 calls over 3 s out of descriptors: %d\n", accepts);
	fflush(stdout);
	/* paused, and trying again: not a spin */
	ASSERT_GE(accepts, 1);
	ASSERT_LT(accepts, 100);

	for (i = 0; i < n; i++)
		close(held[i]);
	/* over when the victim has its descriptors back and has taken
	 * every closed connection left queued on its listener: with some
	 * still queued, it would take them (up to its limit) while the
	 * real client connects */
	for (i = 0; i < 200; i++) {
		fds = count_fds(victim);
		queued = listen_queue(CM_PORT);
		if (fds <= baseline && queued == 0)
			break;
		pause_ms(100);
	}
	printf("  connections still queued on the listener: %d\n", queued);
	ASSERT_EQ(queued, 0);
	printf("  victim descriptors: %d before the flood, %d after\n",
	       baseline, fds);
	ASSERT_LE(fds, baseline);
	ASSERT_EQ(write(fd, &c, 1), 1);
}

TEST(cm_listener_pauses)
{
	struct rdma_event_channel *ch;
	struct rdma_cm_id *lid, *id;
	struct rdma_cm_event *ev;
	struct sockaddr_in sin;
	struct rlimit rl;
	struct ibv_mr *mr;
	char buf[16] = "";
	struct peer p;
	int sv[2], baseline, status;
	pid_t fl;
	char c;

	ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &rl), 0);
	if (rl.rlim_max < N_TCP + 64)
		SKIP("the hard RLIMIT_NOFILE is too low for the flooder");
	peer_start(&p, client, NULL);
	ch = rdma_create_event_channel();
	ASSERT_NOT_NULL(ch);
	ASSERT_EQ(rdma_create_id(ch, &lid, NULL, RDMA_PS_TCP), 0);
	make_addr(&sin, loopback_ip(), CM_PORT);
	ASSERT_EQ(rdma_bind_addr(lid, (struct sockaddr *)&sin), 0);
	ASSERT_EQ(rdma_listen(lid, 128), 0);

	ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	baseline = count_fds(getpid()) - 1;	/* sv[1] goes */
	ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &rl), 0);
	rl.rlim_cur = (rlim_t)(highest_fd() + 1 + HEADROOM);
	fflush(stdout);
	fl = fork();
	ASSERT_GE(fl, 0);
	if (fl == 0) {
		close(sv[0]);
		flooder(sv[1], getppid(), (int)rl.rlim_cur, baseline);
		_exit(0);
	}
	close(sv[1]);
	ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &rl), 0);
	if (read(sv[0], &c, 1) != 1) {
		ASSERT_EQ(waitpid(fl, &status, 0), fl);
		if (WIFEXITED(status) && WEXITSTATUS(status) == EXIT_SKIP)
			SKIP_ENV("strace cannot trace the victim");
		harness_fail(__FILE__, __LINE__, "the flooder failed "
			     "(status 0x%x)", status);
	}
	ASSERT_EQ(waitpid(fl, &status, 0), fl);
	ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	close(sv[0]);

	/* the listener takes a real client again */
	peer_send(&p, 1);
	ev = expect_event(ch, RDMA_CM_EVENT_CONNECT_REQUEST);
	id = ev->id;
	ASSERT_EQ(rdma_ack_cm_event(ev), 0);
	make_qp(id, IBV_QPT_RC);
	post_recv_buf(id, buf, sizeof(buf), &mr);
	ASSERT_EQ(rdma_accept(id, NULL), 0);
	expect_event_ack(ch, RDMA_CM_EVENT_ESTABLISHED);
	recv_done(id, mr);
	ASSERT_STR_EQ(buf, "ping");
	peer_send(&p, 2);
	expect_event_ack(ch, RDMA_CM_EVENT_DISCONNECTED);
	ASSERT_EQ(rdma_disconnect(id), 0);
	rdma_destroy_qp(id);
	ASSERT_EQ(rdma_destroy_id(id), 0);
	ASSERT_EQ(rdma_destroy_id(lid), 0);
	rdma_destroy_event_channel(ch);
	peer_wait(&p);
}
