// SPDX-License-Identifier: MIT
/*
 * The sysfs view's counters (docs/discovery.md) follow the traffic of
 * the processes that are running: two processes exchange RC SENDs, over
 * the net path (SOFTHCA_NET=1) and over the same-host path, and
 * `paths_stress cat` under the path shim, a third process, reads
 * ports/1/hw_counters and ports/1/counters of softhca_lo before and after.  The oracle is what
 * the test itself sent.
 *
 * As root the test runs in a network namespace of its own (only lo, and
 * only its own processes): then the counters are exactly 0 before the
 * traffic and again once its QPs are gone, the PMA counters equal the
 * hw_counters they come from, and libibverbs' ibv_read_sysfs_file (no
 * shim in this process) reads what the shim shows.  Otherwise other
 * processes of this user on softhca_lo add to the sums, and only lower
 * bounds are checked.
 */
#include <sched.h>
#include <stdlib.h>
#include <unistd.h>
#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include "harness.h"
#include "ep.h"

/* libibverbs exports it; rdma-core's headers declare it for providers */
int ibv_read_sysfs_file(const char *dir, const char *file, char *buf,
			size_t size);

#define MSGS	200		/* RC SENDs of 64 bytes: a packet each */
#define MSG_LEN	64

struct counters {
	long long sent_pkts, rcvd_pkts, sent_bytes;
	long long xmit_packets, rcv_packets, xmit_data;
};

/* `paths_stress cat` of softhca_lo's port files under the shim (shim) or without:
 * the exit status, the values in *v. */
static int view_read(bool shim, struct counters *v)
{
	static const char *const files[] = {
		"hw_counters/sent_pkts", "hw_counters/rcvd_pkts",
		"hw_counters/sent_bytes", "counters/port_xmit_packets",
		"counters/port_rcv_packets", "counters/port_xmit_data",
	};
	long long *dst[] = { &v->sent_pkts, &v->rcvd_pkts, &v->sent_bytes,
			     &v->xmit_packets, &v->rcv_packets,
			     &v->xmit_data };
	char cmd[2048], *out = NULL, *p, *end;
	size_t off;
	unsigned int i;
	int ret;

	off = (size_t)snprintf(cmd, sizeof(cmd), "%s%s " PATHS_STRESS " cat",
			       shim ? "LD_PRELOAD=" : "",
			       shim ? SOFTHCA_SHIM : "");
	for (i = 0; i < 6; i++)
		off += (size_t)snprintf(cmd + off, sizeof(cmd) - off,
					" /sys/class/infiniband/softhca_lo/"
					"ports/1/%s", files[i]);
	snprintf(cmd + off, sizeof(cmd) - off, " 2>/dev/null");
	ret = harness_run(cmd, &out);
	p = out;
	for (i = 0; !ret && i < 6; i++) {
		*dst[i] = strtoll(p, &end, 10);
		if (end == p || *end != '\n')
			harness_fail(__FILE__, __LINE__, "not a counter: %s",
				     out);
		p = end + 1;
	}
	free(out);
	return ret;
}

static struct counters view(void)
{
	struct counters v;

	ASSERT_EQ(view_read(true, &v), 0);
	return v;
}

/* A namespace of our own, with lo up: false when not allowed. */
static bool private_netns(void)
{
	struct ifreq ifr;
	int fd, ok;

	if (geteuid() != 0 || unshare(CLONE_NEWNET))
		return false;
	fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	ASSERT(fd >= 0);
	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "lo");
	ok = !ioctl(fd, SIOCGIFFLAGS, &ifr);
	ifr.ifr_flags |= IFF_UP;
	ok = ok && !ioctl(fd, SIOCSIFFLAGS, &ifr);
	close(fd);
	ASSERT(ok);
	return true;
}

static void opts(struct ep_opts *o)
{
	ep_default_opts(o, IBV_QPT_RC);
	o->max_send_wr = MSGS;
	o->max_recv_wr = MSGS;
}

static void responder(int fd, void *arg)
{
	struct ep_opts o;
	struct ep b;
	int i;

	(void)arg;
	opts(&o);
	ep_open_remote(&b, &o, fd);
	for (i = 0; i < MSGS; i++)
		ASSERT_EQ(ep_post_recv(&b, (uint64_t)i, 0, MSG_LEN), 0);
	duo_signal(fd, 'p');
	for (i = 0; i < MSGS; i++)
		ep_expect(b.rcq, b.qp, (uint64_t)i, IBV_WC_SUCCESS);
	duo_signal(fd, 'd');
	duo_expect(fd, 'q');
	ep_destroy(&b);
}

/* libibverbs' own answer for a file of the view, without the shim. */
static long long verbs_read(struct ibv_context *ctx, const char *file)
{
	char buf[64];

	ASSERT(ibv_read_sysfs_file(ctx->device->ibdev_path, file, buf,
				   sizeof(buf)) > 0);
	return strtoll(buf, NULL, 10);
}

static void counters_follow_traffic(bool net)
{
	struct counters c0, c1, c2;
	struct ep_opts o;
	struct duo d;
	struct ep a;
	bool alone;
	int i;

	if (ep_netns())
		SKIP("two-namespace run: tests/netns/test_paths_netns.sh");
	alone = private_netns();
	if (!alone)
		printf("# not root: other processes may add to the counters\n");
	/* without the shim there is no such file */
	ASSERT_NE(view_read(false, &c0), 0);

	if (net)
		setenv("SOFTHCA_NET", "1", 1);
	duo_fork(&d, responder, NULL);
	opts(&o);
	ep_open_remote(&a, &o, d.fd);
	duo_expect(d.fd, 'p');

	c0 = view();
	if (alone) {
		/* two live RC QPs on softhca_lo, nothing sent yet */
		ASSERT_EQ(c0.sent_pkts, 0);
		ASSERT_EQ(c0.rcvd_pkts, 0);
		ASSERT_EQ(c0.xmit_packets, 0);
		ASSERT_EQ(c0.xmit_data, 0);
	}

	for (i = 0; i < MSGS; i++)
		ASSERT_EQ(ep_post(&a, (uint64_t)i, IBV_WR_SEND, 0, MSG_LEN, 0,
				  0),
			  0);
	for (i = 0; i < MSGS; i++)
		ep_expect(a.scq, a.qp, (uint64_t)i, IBV_WC_SUCCESS);
	duo_expect(d.fd, 'd');

	/* the requester sent MSGS packets, the responder received them */
	c1 = view();
	ASSERT_GE(c1.sent_pkts, MSGS);
	ASSERT_GE(c1.rcvd_pkts, MSGS);
	ASSERT_GE(c1.sent_bytes, (long long)MSGS * MSG_LEN);
	ASSERT_GE(c1.xmit_packets, MSGS);
	ASSERT_GE(c1.rcv_packets, MSGS);
	/* PortXmitData counts 4-byte words */
	ASSERT_GE(c1.xmit_data, (long long)MSGS * MSG_LEN / 4);
	if (alone) {
		ASSERT_GE(c1.sent_pkts - c0.sent_pkts, MSGS);
		ASSERT_EQ(c1.xmit_packets, c1.sent_pkts);
		ASSERT_EQ(c1.rcv_packets, c1.rcvd_pkts);
		ASSERT_EQ(c1.xmit_data, c1.sent_bytes / 4);
		/* libibverbs reads the same view without the shim */
		ASSERT_EQ(verbs_read(a.ctx, "ports/1/hw_counters/sent_pkts"),
			  c1.sent_pkts);
		ASSERT_EQ(verbs_read(a.ctx, "ports/1/counters/port_xmit_data"),
			  c1.xmit_data);
	}

	duo_signal(d.fd, 'q');
	duo_wait(&d);
	ep_destroy(&a);
	if (alone) {
		/* the sums are over live QPs: none is left */
		c2 = view();
		ASSERT_EQ(c2.sent_pkts, 0);
		ASSERT_EQ(c2.xmit_packets, 0);
	}
}

TEST(counters_follow_traffic_net)
{
	counters_follow_traffic(true);
}

/* the same-host path counts the packets the messages would be */
TEST(counters_follow_traffic_same_host)
{
	counters_follow_traffic(false);
}

/* The identity files agree with the verbs, with and without the shim. */
TEST(identity_agrees)
{
	struct ibv_device **list;
	char buf[256], cmd[1024], *out = NULL, want[64];
	struct ibv_context *ctx;
	uint64_t guid;
	int n, i;

	list = ibv_get_device_list(&n);
	ASSERT(list && n > 0);
	for (i = 0; i < n; i++) {
		guid = be64toh(ibv_get_device_guid(list[i]));
		snprintf(want, sizeof(want), "%04x:%04x:%04x:%04x",
			 (unsigned int)(guid >> 48) & 0xffff,
			 (unsigned int)(guid >> 32) & 0xffff,
			 (unsigned int)(guid >> 16) & 0xffff,
			 (unsigned int)guid & 0xffff);
		ASSERT(ibv_read_sysfs_file(list[i]->ibdev_path, "node_guid",
					   buf, sizeof(buf)) > 0);
		if (strcmp(buf, want))
			harness_fail(__FILE__, __LINE__, "%s: node_guid %s, "
				     "verbs %s", list[i]->name, buf, want);
		snprintf(cmd, sizeof(cmd), "LD_PRELOAD=%s " PATHS_STRESS
			 " cat %s/node_guid "
			 "/sys/class/infiniband_verbs/%s/ibdev",
			 SOFTHCA_SHIM, list[i]->ibdev_path, list[i]->dev_name);
		ASSERT_EQ(harness_run(cmd, &out), 0);
		snprintf(buf, sizeof(buf), "%s\n%s\n", want, list[i]->name);
		if (strcmp(out, buf))
			harness_fail(__FILE__, __LINE__, "%s: the shim shows "
				     "'%s', expected '%s'", list[i]->name, out,
				     buf);
		ctx = ibv_open_device(list[i]);
		ASSERT(ctx);
		ibv_close_device(ctx);
	}
	free(out);
	ibv_free_device_list(list);
}

/* Threads on the view and on real paths at once, under the shim. */
TEST(threads)
{
	char *out = NULL;
	int ret;

	ret = harness_run("LD_PRELOAD=" SOFTHCA_SHIM " " PATHS_STRESS
			  " 2>&1", &out);
	if (ret)
		harness_fail(__FILE__, __LINE__, "paths_stress: exit %d:\n%s",
			     ret, out);
	free(out);
}
