// SPDX-License-Identifier: MIT
/*
 * README's "Between hosts: the net path" claims that no other test backs
 * (issue 16), checked on one host through the sockets the two processes
 * hold (/proc/self/fd against /proc/net/tcp and tcp6), not through
 * softhca's own counters:
 *
 *  - SOFTHCA_NET=1 puts every destination on the net path, also on one
 *    host: RC and UC traffic between two processes of this host goes
 *    over TCP;
 *  - RC and UC go over one TCP connection per ordered pair of processes,
 *    opened on first use, to the port the destination names (a TCP port
 *    the responder process listens on): none before the first message,
 *    one after it, still one after a second QP pair (UC) sent too;
 *  - without SOFTHCA_NET the same exchange uses no TCP connection at all
 *    (the same-host path);
 *  - a peer process that refuses CMA (not dumpable: process_vm_writev on
 *    it fails with EPERM) is reached over the net path all the same, on
 *    the host's own address (root only: both processes become nobody).
 *
 * Every message is checked byte for byte against a sentinel-filled
 * destination.
 */
#include <dirent.h>
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/prctl.h>

#include "harness.h"
#include "ep.h"

#define SENTINEL 0xA5
#define LEN 3000

/* ------------------------------------------------------------------ */
/* This process's TCP sockets                                          */

struct tcp_sock {
	unsigned int state;		/* 1 ESTABLISHED, 10 LISTEN */
	unsigned int lport, rport;
};

static bool has_inode(const unsigned long *inodes, int n, unsigned long ino)
{
	int i;

	for (i = 0; i < n; i++)
		if (inodes[i] == ino)
			return true;
	return false;
}

/* The TCP sockets (IPv4 and IPv6) this process holds; their count. */
static int my_tcp(struct tcp_sock *out, int max)
{
	static const char *const tables[] = { "/proc/net/tcp",
					      "/proc/net/tcp6" };
	unsigned long inodes[1024];
	char path[300], link[64], line[512];
	struct dirent *d;
	int n = 0, got = 0;
	unsigned int t;
	DIR *dir;

	dir = opendir("/proc/self/fd");
	ASSERT_NOT_NULL(dir);
	while ((d = readdir(dir)) && n < 1024) {
		ssize_t len;

		snprintf(path, sizeof(path), "/proc/self/fd/%s", d->d_name);
		len = readlink(path, link, sizeof(link) - 1);
		if (len <= 0)
			continue;
		link[len] = '\0';
		if (sscanf(link, "socket:[%lu]", &inodes[n]) == 1)
			n++;
	}
	closedir(dir);
	for (t = 0; t < 2; t++) {
		FILE *f = fopen(tables[t], "r");

		if (!f)
			continue;	/* no IPv6 */
		if (!fgets(line, sizeof(line), f))
			line[0] = '\0';		/* the header */
		while (fgets(line, sizeof(line), f)) {
			unsigned int lport, rport, state;
			unsigned long ino;
			char la[64], ra[64];

			if (sscanf(line, " %*s %63[0-9A-Fa-f]:%x "
				   "%63[0-9A-Fa-f]:%x %x %*s %*s %*s %*s "
				   "%*s %lu", la, &lport, ra, &rport, &state,
				   &ino) != 6)
				continue;
			if (!has_inode(inodes, n, ino) || got == max)
				continue;
			out[got].state = state;
			out[got].lport = lport;
			out[got].rport = rport;
			got++;
		}
		fclose(f);
	}
	return got;
}

/* This process's established TCP connections; the first one's ports. */
static int established(unsigned int *lport, unsigned int *rport)
{
	struct tcp_sock s[64];
	int i, n = my_tcp(s, 64), e = 0;

	for (i = 0; i < n; i++) {
		if (s[i].state != 1)
			continue;
		if (!e && lport)
			*lport = s[i].lport;
		if (!e && rport)
			*rport = s[i].rport;
		e++;
	}
	return e;
}

/* Every TCP socket of this process, for a count that was not the one
 * expected (CI13 saw two established once, not reproduced since). */
static void show_tcp(const char *when)
{
	struct tcp_sock s[64];
	int i, n = my_tcp(s, 64);

	printf("  %s: %d TCP sockets\n", when, n);
	for (i = 0; i < n; i++)
		printf("    state %u, port %u -> %u\n", s[i].state,
		       s[i].lport, s[i].rport);
}

/* Is port one this process listens on? */
static bool listening_on(unsigned int port)
{
	struct tcp_sock s[64];
	int i, n = my_tcp(s, 64);

	for (i = 0; i < n; i++)
		if (s[i].state == 10 && s[i].lport == port)
			return true;
	return false;
}

/* ------------------------------------------------------------------ */

static void fill(uint8_t *p, size_t len, unsigned int seed)
{
	size_t i;

	for (i = 0; i < len; i++) {
		uint8_t v = (uint8_t)(seed * 29 + i * 13 + (i >> 8) + 1);

		p[i] = v == 0 || v == SENTINEL ? (uint8_t)(v + 3) : v;
	}
}

static void expect_msg(const struct ep *e, size_t off, unsigned int seed)
{
	uint8_t want[LEN];
	size_t i;

	fill(want, LEN, seed);
	for (i = 0; i < LEN; i++)
		if (e->buf[off + i] != want[i])
			harness_fail(__FILE__, __LINE__,
				     "message %u byte %zu: 0x%02x, expected "
				     "0x%02x", seed, i, e->buf[off + i],
				     want[i]);
	ASSERT_EQ(e->buf[off + LEN], SENTINEL);
}

/* The responder: an RC and a UC endpoint; takes one SEND on each. */
static void responder(int fd, void *arg)
{
	bool net = arg != NULL;
	struct ep_opts orc, ouc;
	struct ep rc, uc;
	unsigned int lport = 0, rport = 0, from;

	ep_default_opts(&orc, IBV_QPT_RC);
	ep_default_opts(&ouc, IBV_QPT_UC);
	ep_open_remote(&rc, &orc, fd);
	ep_open_remote(&uc, &ouc, fd);
	memset(rc.buf, SENTINEL, 65536);
	memset(uc.buf, SENTINEL, 65536);
	ASSERT_EQ(ep_post_recv(&rc, 0xb1, 0, LEN + 64), 0);
	ASSERT_EQ(ep_post_recv(&uc, 0xb2, 0, LEN + 64), 0);
	duo_signal(fd, 'p');
	ep_expect(rc.rcq, rc.qp, 0xb1, IBV_WC_SUCCESS);
	expect_msg(&rc, 0, 1);
	ep_expect(uc.rcq, uc.qp, 0xb2, IBV_WC_SUCCESS);
	expect_msg(&uc, 0, 2);
	/* the requester's connection, accepted on a port this process
	 * listens on; the requester checks that it is the one it opened */
	if (net) {
		ASSERT_EQ(established(&lport, &rport), 1);
		ASSERT(listening_on(lport));
	} else {
		ASSERT_EQ(established(NULL, NULL), 0);
	}
	xwrite(fd, &lport, sizeof(lport));
	xwrite(fd, &rport, sizeof(rport));
	xread(fd, &from, sizeof(from));
	ep_destroy(&uc);
	ep_destroy(&rc);
}

/* A responder that refuses CMA: not dumpable, so that another process
 * of its user without CAP_SYS_PTRACE may not ptrace it (ptrace(2)). */
static void undumpable_responder(int fd, void *arg)
{
	ASSERT_EQ(prctl(PR_SET_DUMPABLE, 0), 0);
	responder(fd, arg);
}

enum path { SAME_HOST, NET_FORCED, CMA_REFUSED };

static void one_connection(enum path path)
{
	bool net = path != SAME_HOST;
	struct ep_opts orc, ouc;
	struct ep rc, uc;
	struct duo d;
	unsigned int lport = 0, rport = 0, peer_l, peer_r, done = 1;

	if (ep_netns())
		SKIP("two-namespace run: this is about one host");
	if (path == NET_FORCED)
		setenv("SOFTHCA_NET", "1", 1);
	else
		unsetenv("SOFTHCA_NET");
	if (path == CMA_REFUSED) {
		/* both processes nobody, without CAP_SYS_PTRACE; this one
		 * dumpable again (setuid cleared it), the peer not */
		ASSERT_EQ(setgroups(0, NULL), 0);
		ASSERT_EQ(setgid(65534), 0);
		ASSERT_EQ(setuid(65534), 0);
		ASSERT_EQ(prctl(PR_SET_DUMPABLE, 1), 0);
		duo_fork(&d, undumpable_responder, (void *)1);
	} else {
		duo_fork(&d, responder, net ? (void *)1 : NULL);
	}
	ep_default_opts(&orc, IBV_QPT_RC);
	ep_default_opts(&ouc, IBV_QPT_UC);
	ep_open_remote(&rc, &orc, d.fd);
	ep_open_remote(&uc, &ouc, d.fd);
	duo_expect(d.fd, 'p');
	/* opened on first use: nothing yet */
	ASSERT_EQ(established(NULL, NULL), 0);

	fill(rc.buf, LEN, 1);
	ASSERT_EQ(ep_post(&rc, 0xa1, IBV_WR_SEND, 0, LEN, 0, 0), 0);
	ep_expect(rc.scq, rc.qp, 0xa1, IBV_WC_SUCCESS);
	if (established(NULL, NULL) != (net ? 1 : 0))
		show_tcp("after the RC SEND");
	ASSERT_EQ(established(&lport, &rport), net ? 1 : 0);
	/* a second QP to the same process: the same connection */
	fill(uc.buf, LEN, 2);
	ASSERT_EQ(ep_post(&uc, 0xa2, IBV_WR_SEND, 0, LEN, 0, 0), 0);
	ep_expect(uc.scq, uc.qp, 0xa2, IBV_WC_SUCCESS);

	xread(d.fd, &peer_l, sizeof(peer_l));
	xread(d.fd, &peer_r, sizeof(peer_r));
	if (net) {
		unsigned int l2 = 0, r2 = 0;

		if (established(NULL, NULL) != 1)
			show_tcp("after the UC SEND");
		ASSERT_EQ(established(&l2, &r2), 1);
		ASSERT_EQ(l2, lport);
		ASSERT_EQ(r2, rport);
		/* the two ends of one connection: to the responder's port */
		ASSERT_EQ(rport, peer_l);
		ASSERT_EQ(lport, peer_r);
	} else {
		ASSERT_EQ(established(NULL, NULL), 0);
	}
	xwrite(d.fd, &done, sizeof(done));
	duo_wait(&d);
	ep_destroy(&uc);
	ep_destroy(&rc);
}

TEST(softhca_net_one_tcp_connection_per_pair)
{
	one_connection(NET_FORCED);
}

/* Yama's ptrace_scope 2 and 3 refuse CMA to a process without
 * CAP_SYS_PTRACE: the pair then takes the net path by design. */
static bool cma_refused(void)
{
	FILE *f = fopen("/proc/sys/kernel/yama/ptrace_scope", "r");
	int scope = 0;

	if (f) {
		if (fscanf(f, "%d", &scope) != 1)
			scope = 0;
		fclose(f);
	}
	return scope >= 3 || (scope == 2 && geteuid() != 0);
}

TEST(same_host_path_uses_no_tcp)
{
	if (cma_refused())
		SKIP("Yama's ptrace_scope refuses CMA here: same-host pairs "
		     "take the net path");
	one_connection(SAME_HOST);
}

TEST(cma_refused_takes_the_net_path)
{
	if (geteuid() != 0)
		SKIP("needs root: both processes become nobody, one of them "
		     "not dumpable");
	one_connection(CMA_REFUSED);
}
