// SPDX-License-Identifier: MIT
/*
 * `softhca stat` on live endpoints: the tool finds the processes of this
 * user in this network namespace, and lists each one's device and QPs
 * (QPN, type, state) while they work; traffic before and after the tool
 * looked goes on undisturbed, and a state change shows at the next look.
 * In a two-namespace run (SHCA_TEST_NETNS_A/B) each side sees only
 * itself.  The requester's error counters move as its errors happen, on
 * the same-host path and on the net path alike: an RNR NAK with rnr_retry
 * 0, a peer that died (retry_cnt + 1 ACK timeouts, then RETRY_EXC_ERR).
 * (The counter machinery itself is checked in tests/unit/test_stat.)
 */
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <unistd.h>
#include <sys/wait.h>

#include "harness.h"
#include "ep.h"

#define ROUND 8		/* messages per round */

struct who {
	int pid;
	uint32_t qpn;
	char dev[64];
};

static void who_am_i(struct who *w, const struct ep *e)
{
	memset(w, 0, sizeof(*w));
	w->pid = (int)getpid();
	w->qpn = e->qp->qp_num;
	snprintf(w->dev, sizeof(w->dev), "%s",
		 ibv_get_device_name(e->ctx->device));
}

/*
 * Run `softhca stat ARGS`: its whole stdout in *out (malloc'd; read to the
 * end, other tests' processes may make it long), its exit status returned.
 */
static int run_stat(const char *args, char **out)
{
	char cmd[512];

	snprintf(cmd, sizeof(cmd), "%s stat %s 2>/dev/null", SOFTHCA_TOOL,
		 args);
	return harness_run(cmd, out);
}

/* Is there a line that is the formatted text, or starts with it and a
 * space (the counters)? */
static bool __attribute__((format(printf, 2, 3)))
has_line(const char *out, const char *fmt, ...)
{
	char want[256];
	const char *p = out;
	size_t n;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(want, sizeof(want), fmt, ap);
	va_end(ap);
	n = strlen(want);
	while (*p) {
		if (!strncmp(p, want, n) && (p[n] == ' ' || p[n] == '\n'))
			return true;
		p = strchr(p, '\n');
		if (!p)
			break;
		p++;
	}
	return false;
}

#define ASSERT_LINE(out, ...)                                              \
	do {                                                               \
		if (!has_line(out, __VA_ARGS__))                           \
			harness_fail(__FILE__, __LINE__,                   \
				     "no line %s in:\n%s", #__VA_ARGS__,   \
				     out);                                 \
	} while (0)

#define ASSERT_NO_LINE(out, ...)                                           \
	do {                                                               \
		if (has_line(out, __VA_ARGS__))                            \
			harness_fail(__FILE__, __LINE__,                   \
				     "unexpected line %s in:\n%s",         \
				     #__VA_ARGS__, out);                   \
	} while (0)

/* The lines of one process with one QP. */
static void assert_listed(const char *out, const struct who *w,
			  const char *state)
{
	ASSERT_LINE(out, "pid %d slot", w->pid);
	ASSERT_LINE(out, "pid %d device %s qps 1", w->pid, w->dev);
	ASSERT_LINE(out, "pid %d device %s qp 0x%06x type RC state %s",
		    w->pid, w->dev, w->qpn, state);
}

static void send_round(struct ep *a)
{
	int i;

	for (i = 0; i < ROUND; i++)
		ASSERT_EQ(ep_post(a, (uint64_t)i, IBV_WR_SEND, 0, 64, 0, 0), 0);
	for (i = 0; i < ROUND; i++)
		ep_expect(a->scq, a->qp, (uint64_t)i, IBV_WC_SUCCESS);
}

static void recv_round(struct ep *b, int fd)
{
	int i;

	for (i = 0; i < ROUND; i++)
		ASSERT_EQ(ep_post_recv(b, (uint64_t)i, 4096u * (uint64_t)i, 64),
			  0);
	duo_signal(fd, 'p');
	for (i = 0; i < ROUND; i++)
		ep_expect(b->rcq, b->qp, (uint64_t)i, IBV_WC_SUCCESS);
}

static void responder(int fd, void *arg)
{
	char *out = NULL;
	struct ep_opts o;
	struct who me;
	char args[32];
	struct ep b;

	(void)arg;
	ep_default_opts(&o, IBV_QPT_RC);
	ep_open_remote(&b, &o, fd);
	who_am_i(&me, &b);
	xwrite(fd, &me, sizeof(me));

	recv_round(&b, fd);
	/* this side looks at itself too */
	snprintf(args, sizeof(args), "--pid %d", me.pid);
	ASSERT_EQ(run_stat(args, &out), 0);
	assert_listed(out, &me, "RTS");
	duo_signal(fd, 'd');

	duo_expect(fd, 'm');
	recv_round(&b, fd);
	duo_signal(fd, 'e');
	duo_expect(fd, 'x');
	ep_destroy(&b);
	free(out);
}

TEST(rc_pair_two_process)
{
	char *out = NULL;
	struct ibv_qp_attr attr;
	struct who me, peer;
	struct ep_opts o;
	char args[32];
	struct duo d;
	struct ep a;

	duo_fork(&d, responder, NULL);
	ep_default_opts(&o, IBV_QPT_RC);
	ep_open_remote(&a, &o, d.fd);
	who_am_i(&me, &a);
	xread(d.fd, &peer, sizeof(peer));

	duo_expect(d.fd, 'p');
	send_round(&a);
	duo_expect(d.fd, 'd');

	/* every process of the namespace */
	ASSERT_EQ(run_stat("", &out), 0);
	assert_listed(out, &me, "RTS");
	snprintf(args, sizeof(args), "--pid %d", peer.pid);
	if (ep_netns()) {
		/* the peer is on another "host" */
		ASSERT_NO_LINE(out, "pid %d slot", peer.pid);
		ASSERT_EQ(run_stat(args, &out), 1);
	} else {
		assert_listed(out, &peer, "RTS");
		/* --pid: that process only */
		ASSERT_EQ(run_stat(args, &out), 0);
		assert_listed(out, &peer, "RTS");
		ASSERT_NO_LINE(out, "pid %d slot", me.pid);
	}

	/* looking disturbed neither side: the next round goes through */
	duo_signal(d.fd, 'm');
	duo_expect(d.fd, 'p');
	send_round(&a);
	duo_expect(d.fd, 'e');

	/* a state change shows at the next look */
	memset(&attr, 0, sizeof(attr));
	attr.qp_state = IBV_QPS_ERR;
	ASSERT_EQ(ibv_modify_qp(a.qp, &attr, IBV_QP_STATE), 0);
	snprintf(args, sizeof(args), "--pid %d", me.pid);
	ASSERT_EQ(run_stat(args, &out), 0);
	assert_listed(out, &me, "ERR");

	duo_signal(d.fd, 'x');
	duo_wait(&d);
	/* a process that is gone is not listed */
	snprintf(args, sizeof(args), "--pid %d", peer.pid);
	ASSERT_EQ(run_stat(args, &out), 1);
	ep_destroy(&a);
	free(out);
}

TEST(qps_of_one_process)
{
	char *out = NULL;
	struct ep_opts orc, oud;
	struct ep a, b, u;
	struct who wa, wb, wu;
	char args[32];
	int pid = (int)getpid();

	ep_skip_if_netns();
	ep_default_opts(&orc, IBV_QPT_RC);
	ep_default_opts(&oud, IBV_QPT_UD);
	ep_pair(&a, &orc, &b, &orc);
	ep_create(&u, &oud);	/* INIT */
	who_am_i(&wa, &a);
	who_am_i(&wb, &b);
	who_am_i(&wu, &u);
	ASSERT_STR_EQ(wa.dev, "softhca_lo");

	snprintf(args, sizeof(args), "--pid %d", pid);
	ASSERT_EQ(run_stat(args, &out), 0);
	ASSERT_LINE(out, "pid %d slot", pid);
	ASSERT_LINE(out, "pid %d device softhca_lo qps 3", pid);
	ASSERT_LINE(out, "pid %d device softhca_lo qp 0x%06x type RC state RTS",
		    pid, wa.qpn);
	ASSERT_LINE(out, "pid %d device softhca_lo qp 0x%06x type RC state RTS",
		    pid, wb.qpn);
	ASSERT_LINE(out, "pid %d device softhca_lo qp 0x%06x type UD state INIT",
		    pid, wu.qpn);

	/* a destroyed QP leaves the list */
	ibv_destroy_qp(u.qp);
	u.qp = NULL;
	ASSERT_EQ(run_stat(args, &out), 0);
	ASSERT_LINE(out, "pid %d device softhca_lo qps 2", pid);
	ASSERT_NO_LINE(out, "pid %d device softhca_lo qp 0x%06x type UD",
		       pid, wu.qpn);

	ep_destroy(&u);
	ep_destroy(&a);
	ep_destroy(&b);
	free(out);
}

/* ------------------------------------------------------------------ */
/* The requester's error counters                                      */

/*
 * Counter name of QP qpn in this process, as `softhca stat --all` shows
 * it (a line "pid P device D qp 0xQPN type T state S name value ...").
 */
static long long qp_counter(uint32_t qpn, const char *name)
{
	char args[64], want[32], key[64], *out = NULL;
	const char *line, *end, *p;
	long long v = -1;

	snprintf(args, sizeof(args), "--pid %d --all", (int)getpid());
	ASSERT_EQ(run_stat(args, &out), 0);
	snprintf(want, sizeof(want), " qp 0x%06x type ", qpn);
	snprintf(key, sizeof(key), " %s ", name);
	line = strstr(out, want);
	if (!line)
		harness_fail(__FILE__, __LINE__, "no QP 0x%06x in:\n%s", qpn,
			     out);
	end = strchr(line, '\n');
	p = strstr(line, key);
	if (p && (!end || p < end))
		v = strtoll(p + strlen(key), NULL, 10);
	else
		harness_fail(__FILE__, __LINE__, "no %s on QP 0x%06x in:\n%s",
			     name, qpn, out);
	free(out);
	return v;
}

/* The four counters of the requester's RNR and no-response cases. */
enum { RCVD_RNR, RNR_EXCEEDED, ACK_TIMEOUT, RETRY_EXCEEDED, NCOUNT };
static const char *const req_counter[NCOUNT] = {
	"rcvd_rnr_err", "retry_rnr_exceeded_err", "local_ack_timeout",
	"retry_exceeded_err",
};

static void read_counters(uint32_t qpn, long long v[NCOUNT])
{
	int i;

	for (i = 0; i < NCOUNT; i++)
		v[i] = qp_counter(qpn, req_counter[i]);
}

/* A responder that posts no receive and waits until told to go. */
static void no_receive(int fd, void *arg)
{
	struct ep_opts o;
	struct ep b;

	(void)arg;
	ep_default_opts(&o, IBV_QPT_RC);
	ep_open_remote(&b, &o, fd);
	duo_signal(fd, 'u');
	duo_expect(fd, 'x');
	ep_destroy(&b);
}

TEST(rnr_retry_0_counted)
{
	long long before[NCOUNT], after[NCOUNT];
	struct ep_opts o;
	struct duo d;
	struct ep a;

	duo_fork(&d, no_receive, NULL);
	ep_default_opts(&o, IBV_QPT_RC);
	o.rnr_retry = 0;
	ep_open_remote(&a, &o, d.fd);
	duo_expect(d.fd, 'u');
	read_counters(a.qp->qp_num, before);

	/* one RNR NAK, and no retry allowed */
	ASSERT_EQ(ep_post(&a, 0xa1, IBV_WR_SEND, 0, 16, 0, 0), 0);
	ep_expect(a.scq, a.qp, 0xa1, IBV_WC_RNR_RETRY_EXC_ERR);
	read_counters(a.qp->qp_num, after);
	ASSERT_EQ(after[RCVD_RNR] - before[RCVD_RNR], 1);
	ASSERT_EQ(after[RNR_EXCEEDED] - before[RNR_EXCEEDED], 1);
	ASSERT_EQ(after[ACK_TIMEOUT] - before[ACK_TIMEOUT], 0);
	ASSERT_EQ(after[RETRY_EXCEEDED] - before[RETRY_EXCEEDED], 0);

	duo_signal(d.fd, 'x');
	duo_wait(&d);
	ep_destroy(&a);
}

/* A responder that waits to be killed. */
static void victim(int fd, void *arg)
{
	struct ep_opts o;
	struct ep b;

	(void)arg;
	ep_default_opts(&o, IBV_QPT_RC);
	ep_open_remote(&b, &o, fd);
	duo_signal(fd, 'u');
	for (;;)
		pause();
}

TEST(peer_gone_retry_exceeded_counted)
{
	long long before[NCOUNT], after[NCOUNT];
	struct ep_opts o;
	struct duo d;
	struct ep a;
	int status;

	duo_fork(&d, victim, NULL);
	ep_default_opts(&o, IBV_QPT_RC);
	/* about 1 ms on this host; 67 ms across namespaces */
	o.timeout = ep_netns() ? 14 : 8;
	o.retry_cnt = 2;
	ep_open_remote(&a, &o, d.fd);
	duo_expect(d.fd, 'u');
	/* it works while the peer lives (and the connection is up) */
	ASSERT_EQ(ep_post(&a, 0xa1, IBV_WR_RDMA_WRITE, 0, 16, 0, 0), 0);
	ep_expect(a.scq, a.qp, 0xa1, IBV_WC_SUCCESS);
	read_counters(a.qp->qp_num, before);

	ASSERT_EQ(kill(d.pid, SIGKILL), 0);
	ASSERT_EQ(waitpid(d.pid, &status, 0), d.pid);
	ASSERT(WIFSIGNALED(status));
	/* nothing answers: the first try and retry_cnt retries time out */
	ASSERT_EQ(ep_post(&a, 0xa2, IBV_WR_RDMA_WRITE, 0, 16, 0, 0), 0);
	ep_expect(a.scq, a.qp, 0xa2, IBV_WC_RETRY_EXC_ERR);
	read_counters(a.qp->qp_num, after);
	ASSERT_EQ(after[ACK_TIMEOUT] - before[ACK_TIMEOUT], 3);
	ASSERT_EQ(after[RETRY_EXCEEDED] - before[RETRY_EXCEEDED], 1);
	ASSERT_EQ(after[RCVD_RNR] - before[RCVD_RNR], 0);
	ASSERT_EQ(after[RNR_EXCEEDED] - before[RNR_EXCEEDED], 0);

	close(d.fd);
	ep_destroy(&a);
}

/* ------------------------------------------------------------------ */
/* Traffic counters                                                    */

/*
 * What moves counts on both paths, as a NIC counts every packet through
 * its port, looped back or not: 8 SENDs of 5000 bytes, a WRITE of 10000
 * and a READ of 4096.  On the same-host path the counts are exact (the
 * packets the messages would be at the path MTU, their payload bytes, no
 * ACKs); the net path counts ACKs and header bytes too, so at least.
 */
#define TC_SENDS 8
#define TC_SEND_LEN 5000u
#define TC_WRITE_LEN 10000u
#define TC_READ_LEN 4096u

enum { SENT_P, SENT_B, RCVD_P, RCVD_B, NTRAFFIC };
static const char *const traffic_counter[NTRAFFIC] = {
	"sent_pkts", "sent_bytes", "rcvd_pkts", "rcvd_bytes",
};

static void traffic_counters(uint32_t qpn, long long v[NTRAFFIC])
{
	int i;

	for (i = 0; i < NTRAFFIC; i++)
		v[i] = qp_counter(qpn, traffic_counter[i]);
}

static uint32_t pkts(uint32_t len, uint32_t mtu)
{
	return len > mtu ? (len + mtu - 1) / mtu : 1;
}

static uint32_t qp_mtu(struct ibv_qp *qp)
{
	struct ibv_qp_init_attr ia;
	struct ibv_qp_attr a;

	ASSERT_EQ(ibv_query_qp(qp, &a, IBV_QP_PATH_MTU, &ia), 0);
	return 128u << a.path_mtu;
}

/* want: the exact same-host counts; the net path gives at least them */
static void expect_traffic(const long long d[NTRAFFIC],
			   const long long want[NTRAFFIC])
{
	int i;

	for (i = 0; i < NTRAFFIC; i++) {
		if (ep_netns() ? d[i] >= want[i] : d[i] == want[i])
			continue;
		harness_fail(__FILE__, __LINE__, "%s moved by %lld, want %s%lld",
			     traffic_counter[i], d[i], ep_netns() ? ">= " : "",
			     want[i]);
	}
}

static void counted_responder(int fd, void *arg)
{
	long long before[NTRAFFIC], after[NTRAFFIC], d[NTRAFFIC], want[NTRAFFIC];
	struct ep_opts o;
	struct ep b;
	uint32_t mtu;
	int i;

	(void)arg;
	ep_default_opts(&o, IBV_QPT_RC);
	ep_open_remote(&b, &o, fd);
	mtu = qp_mtu(b.qp);
	traffic_counters(b.qp->qp_num, before);
	for (i = 0; i < TC_SENDS; i++)
		ASSERT_EQ(ep_post_recv(&b, (uint64_t)i, 8192u * (uint64_t)i,
				       TC_SEND_LEN),
			  0);
	duo_signal(fd, 'p');
	for (i = 0; i < TC_SENDS; i++)
		ep_expect(b.rcq, b.qp, (uint64_t)i, IBV_WC_SUCCESS);
	duo_expect(fd, 'w');	/* the WRITE and the READ are done */
	traffic_counters(b.qp->qp_num, after);
	for (i = 0; i < NTRAFFIC; i++)
		d[i] = after[i] - before[i];
	want[RCVD_P] = TC_SENDS * pkts(TC_SEND_LEN, mtu) +
		       pkts(TC_WRITE_LEN, mtu) + 1;
	want[RCVD_B] = TC_SENDS * TC_SEND_LEN + TC_WRITE_LEN;
	want[SENT_P] = pkts(TC_READ_LEN, mtu);
	want[SENT_B] = TC_READ_LEN;
	expect_traffic(d, want);
	duo_signal(fd, 'd');
	duo_expect(fd, 'x');
	ep_destroy(&b);
}

TEST(traffic_counted_both_sides)
{
	long long before[NTRAFFIC], after[NTRAFFIC], d[NTRAFFIC], want[NTRAFFIC];
	struct ep_opts o;
	struct duo d2;
	struct ep a;
	uint32_t mtu;
	int i;

	duo_fork(&d2, counted_responder, NULL);
	ep_default_opts(&o, IBV_QPT_RC);
	ep_open_remote(&a, &o, d2.fd);
	mtu = qp_mtu(a.qp);
	traffic_counters(a.qp->qp_num, before);
	duo_expect(d2.fd, 'p');
	for (i = 0; i < TC_SENDS; i++) {
		ASSERT_EQ(ep_post(&a, (uint64_t)i, IBV_WR_SEND, 0, TC_SEND_LEN,
				  0, 0),
			  0);
		ep_expect(a.scq, a.qp, (uint64_t)i, IBV_WC_SUCCESS);
	}
	ASSERT_EQ(ep_post(&a, 0xa1, IBV_WR_RDMA_WRITE, 0, TC_WRITE_LEN,
			  1u << 20, 0),
		  0);
	ep_expect(a.scq, a.qp, 0xa1, IBV_WC_SUCCESS);
	ASSERT_EQ(ep_post(&a, 0xa2, IBV_WR_RDMA_READ, 0, TC_READ_LEN,
			  2u << 20, 0),
		  0);
	ep_expect(a.scq, a.qp, 0xa2, IBV_WC_SUCCESS);
	traffic_counters(a.qp->qp_num, after);
	for (i = 0; i < NTRAFFIC; i++)
		d[i] = after[i] - before[i];
	want[SENT_P] = TC_SENDS * pkts(TC_SEND_LEN, mtu) +
		       pkts(TC_WRITE_LEN, mtu) + 1;
	want[SENT_B] = TC_SENDS * TC_SEND_LEN + TC_WRITE_LEN;
	want[RCVD_P] = pkts(TC_READ_LEN, mtu);
	want[RCVD_B] = TC_READ_LEN;
	expect_traffic(d, want);
	duo_signal(d2.fd, 'w');
	duo_expect(d2.fd, 'd');
	duo_signal(d2.fd, 'x');
	duo_wait(&d2);
	ep_destroy(&a);
}
