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
 * The traffic counters (packets and bytes each way) equal what the test
 * computes from the messages and the wire format, exactly, on the
 * same-host path and on the net path (SOFTHCA_NET=1, or two namespaces);
 * on the net path also for one 1 MiB WRITE packet by packet, cross-checked
 * with the frames of a SOFTHCA_PCAP trace read here, and with every packet
 * duplicated (duplicate_request, faults_injected).
 * The same-host path counts a post list's messages once per list, and a
 * completion is not seen before the counts of the messages ahead of it:
 * a list stopped after its SEND (a userfaultfd on its last WRITE's
 * source) shows both ends' counters holding everything up to the SEND;
 * the counts for a responder's QP destroyed meanwhile are dropped, not
 * added to the QP created in its memory.
 * (The counter machinery itself is checked in tests/unit/test_stat.)
 */
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/wait.h>

#include "harness.h"
#include "ep.h"
#include "pcap_read.h"
#include "uffd.h"

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

TEST(peer_gone_retry_exceeded_counted)
{
	long long before[NCOUNT], after[NCOUNT];
	struct ep_opts o;
	struct duo d;
	struct ep a;
	int status;

	duo_fork(&d, ep_victim, NULL);
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
/* Traffic counters: exact, from the wire format                       */

/*
 * What moves counts on both paths, as a NIC counts every packet through
 * its port, looped back or not: 8 SENDs of 5000 bytes, a WRITE of 10000
 * and a READ of 4096.  The counts are computed here from the messages:
 * on the same-host path the packets the messages would be at the path
 * MTU and their payload bytes (no headers, no ACKs, the READ request a
 * packet of no bytes); on the net path every IB packet as the wire
 * carries it (IBA 9.2, 9.3): BTH, RETH in a WRITE's first packet and in
 * the READ request, AETH in ACKs and in a READ's first, last or only
 * response, payload and pad, and one ACK for each SEND and WRITE (each
 * is waited for before the next is posted: no coalescing).
 */
#define TC_SENDS 8
#define TC_SEND_LEN 5000u
#define TC_WRITE_LEN 10000u
#define TC_READ_LEN 4096u

#define W_BTH	12
#define W_RETH	16
#define W_AETH	4

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

/* Does this run take the net path (two namespaces, or SOFTHCA_NET=1)? */
static bool net_path(void)
{
	const char *s = getenv("SOFTHCA_NET");

	return ep_netns() || (s && !strcmp(s, "1"));
}

/*
 * Add one message, of opcode op and len bytes, to the requester's
 * counts (req, as [SENT_P..RCVD_B]).  The responder's are the mirror.
 */
static void count_message(long long req[NTRAFFIC], enum ibv_wr_opcode op,
			  uint32_t len, uint32_t mtu, bool net)
{
	uint32_t n = pkts(len, mtu), pad = -len & 3;

	if (!net) {
		if (op == IBV_WR_RDMA_READ) {
			req[SENT_P] += 1;
			req[RCVD_P] += n;
			req[RCVD_B] += len;
		} else {
			req[SENT_P] += n;
			req[SENT_B] += len;
		}
		return;
	}
	if (op == IBV_WR_RDMA_READ) {
		/* the request; the responses, AETH in the first and last
		 * (or only) one */
		req[SENT_P] += 1;
		req[SENT_B] += W_BTH + W_RETH;
		req[RCVD_P] += n;
		req[RCVD_B] += (long long)n * W_BTH + len + pad +
			       (n == 1 ? 1 : 2) * W_AETH;
		return;
	}
	req[SENT_P] += n;
	req[SENT_B] += (long long)n * W_BTH + len + pad +
		       (op == IBV_WR_RDMA_WRITE ? W_RETH : 0);
	req[RCVD_P] += 1;			/* the ACK */
	req[RCVD_B] += W_BTH + W_AETH;
}

static void mirror(long long v[NTRAFFIC])
{
	long long t;

	t = v[SENT_P], v[SENT_P] = v[RCVD_P], v[RCVD_P] = t;
	t = v[SENT_B], v[SENT_B] = v[RCVD_B], v[RCVD_B] = t;
}

static void expect_traffic(const long long d[NTRAFFIC],
			   const long long want[NTRAFFIC])
{
	int i;

	for (i = 0; i < NTRAFFIC; i++)
		if (d[i] != want[i])
			harness_fail(__FILE__, __LINE__,
				     "%s moved by %lld, want %lld (%s path)",
				     traffic_counter[i], d[i], want[i],
				     net_path() ? "net" : "same-host");
}

/* The counts of the exchange of traffic_counted_both_sides. */
static void exchange_counts(long long req[NTRAFFIC], uint32_t mtu)
{
	int i;

	memset(req, 0, NTRAFFIC * sizeof(req[0]));
	for (i = 0; i < TC_SENDS; i++)
		count_message(req, IBV_WR_SEND, TC_SEND_LEN, mtu, net_path());
	count_message(req, IBV_WR_RDMA_WRITE, TC_WRITE_LEN, mtu, net_path());
	count_message(req, IBV_WR_RDMA_READ, TC_READ_LEN, mtu, net_path());
}

static void counted_responder(int fd, void *arg)
{
	long long before[NTRAFFIC], after[NTRAFFIC], d[NTRAFFIC];
	long long want[NTRAFFIC];
	struct ep_opts o;
	struct ep b;
	int i;

	(void)arg;
	ep_default_opts(&o, IBV_QPT_RC);
	ep_open_remote(&b, &o, fd);
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
	exchange_counts(want, qp_mtu(b.qp));
	mirror(want);
	expect_traffic(d, want);
	duo_signal(fd, 'd');
	duo_expect(fd, 'x');
	ep_destroy(&b);
}

static void traffic_counted(void)
{
	long long before[NTRAFFIC], after[NTRAFFIC], d[NTRAFFIC];
	long long want[NTRAFFIC];
	struct ep_opts o;
	struct duo d2;
	struct ep a;
	int i;

	duo_fork(&d2, counted_responder, NULL);
	ep_default_opts(&o, IBV_QPT_RC);
	ep_open_remote(&a, &o, d2.fd);
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
	exchange_counts(want, qp_mtu(a.qp));
	expect_traffic(d, want);
	duo_signal(d2.fd, 'w');
	duo_expect(d2.fd, 'd');
	duo_signal(d2.fd, 'x');
	duo_wait(&d2);
	ep_destroy(&a);
}

/* Same host (or the net path in a two-namespace run) */
TEST(traffic_counted_both_sides)
{
	traffic_counted();
}

/* The net path on one host too (SOFTHCA_NET=1; between namespaces it is
 * the net path either way) */
TEST(traffic_counted_both_sides_net)
{
	ASSERT_EQ(setenv("SOFTHCA_NET", "1", 1), 0);
	traffic_counted();
}

/* ------------------------------------------------------------------ */
/* One 1 MiB WRITE on the net path, packet by packet                   */

/*
 * A WRITE of 1 MiB at path MTU 1024 is 1024 packets (FIRST with its RETH,
 * 1022 MIDDLE, LAST), 1024 x (BTH + 1024) + RETH bytes, answered by ACKs
 * (BTH + AETH each): the packets that ask (AckReq: every 64th and the
 * LAST, net/transport.c ACK_EVERY) are each answered, and the ACKs of a
 * batch the responder read at once by its last one, so there are 1 to 16
 * of them.  Each side's QP counters must say exactly that, and the same
 * number of ACKs.  Variants:
 *   pcap  SOFTHCA_PCAP in both processes: each trace holds exactly the
 *         frames the counters count (decoded here: Ethernet, IPv4/IPv6,
 *         UDP 4791, BTH .. pad, ICRC; sent = to the peer's QPN); the
 *         middle packets then go through the ordinary receive path
 *         instead of straight into memory (conn.c), so both are counted;
 *   dup   SOFTHCA_FAULTS=dup=1 in the requester: every packet goes out
 *         twice.  The requester's QP still sent 1024 (the copies are the
 *         wire's doing, counted as faults_injected 1024), the responder
 *         received 2048, found 1024 duplicate requests and ACKed the
 *         copies that ask again (IBA 9.7.5.1.3): 2 to 32 ACKs.
 * The responder checks every byte of the WRITE too.
 */
#define BIG_LEN		(1u << 20)
#define BIG_MTU		IBV_MTU_1024
#define BIG_PKTS	1024
#define BIG_ACKREQ	((BIG_PKTS - 1) / 64 + 1)	/* packets asking */

struct big {
	bool pcap, dup;
	char pcap_tmpl[200];	/* SOFTHCA_PCAP, %p for the pid */
};

static uint8_t big_byte(uint32_t i)
{
	return (uint8_t)(0x5a ^ i ^ (i >> 8) ^ (i >> 16));
}

/* The counts both sides expect, as the requester's [SENT_P..RCVD_B], with
 * one ACK (count_message's). */
static void big_counts(long long req[NTRAFFIC])
{
	memset(req, 0, NTRAFFIC * sizeof(req[0]));
	count_message(req, IBV_WR_RDMA_WRITE, BIG_LEN, 1024, true);
	ASSERT_EQ(req[SENT_P], BIG_PKTS);
}

/*
 * Wait until qpn's counters reach want, its ACKs (the packets counted at
 * ack, the requester's RCVD_P or the responder's SENT_P, and the bytes
 * next to them) at least lo (what is still on its way: a duplicate's
 * ACK), at most ~10 s.  Then the other counters must equal want, and the
 * ACKs be lo to hi of BTH + AETH each; want then holds what was counted.
 */
static void counted_exactly(uint32_t qpn, long long want[NTRAFFIC], int ack,
			    long long lo, long long hi,
			    long long got[NTRAFFIC])
{
	int tries, i;
	bool short_;

	want[ack] = lo;
	want[ack + 1] = lo * (W_BTH + W_AETH);
	for (tries = 0; tries < 1000; tries++) {
		traffic_counters(qpn, got);
		short_ = false;
		for (i = 0; i < NTRAFFIC; i++)
			short_ |= got[i] < want[i];
		if (!short_)
			break;
		usleep(10000);
	}
	/* the last packet counted may still be being answered: until two
	 * looks 20 ms apart agree (a bound, not a measure: a count that is
	 * still short then fails below or on the other side) */
	for (tries = 0; tries < 50; tries++) {
		long long again[NTRAFFIC];

		usleep(20000);
		traffic_counters(qpn, again);
		if (!memcmp(again, got, sizeof(again)))
			break;
		memcpy(got, again, sizeof(again));
	}
	printf("  qp %#x: %lld ACKs\n", qpn, got[ack]);
	if (got[ack] >= lo && got[ack] <= hi) {
		want[ack] = got[ack];
		want[ack + 1] = got[ack] * (W_BTH + W_AETH);
	} else {
		harness_fail(__FILE__, __LINE__, "%lld ACKs, want %lld to %lld",
			     got[ack], lo, hi);
	}
	expect_traffic(got, want);
}

/* ---- the pcap trace (pcap_read.h) ---- */

struct trace_count {
	uint32_t own, peer;
	long long v[NTRAFFIC];
	unsigned int ops_sent[256];
};

static void trace_frame(const uint8_t *ib, uint32_t len, void *arg)
{
	struct trace_count *t = arg;
	uint32_t dqpn = pcap_bth_dqpn(ib);

	if (dqpn == t->peer) {
		t->v[SENT_P]++;
		t->v[SENT_B] += len;
		t->ops_sent[pcap_bth_opcode(ib)]++;
	} else if (dqpn == t->own) {
		t->v[RCVD_P]++;
		t->v[RCVD_B] += len;
	}
}

/* This side's trace holds what its counters say, then it goes. */
static void pcap_check(const struct big *g, const struct ep *e,
		       const long long counted[NTRAFFIC], bool requester)
{
	struct trace_count t;
	char path[256];
	int i;

	memset(&t, 0, sizeof(t));
	t.own = e->self.qpn;
	t.peer = e->peer.qpn;
	pcap_name(g->pcap_tmpl, (int)getpid(), path, sizeof(path));
	pcap_each(path, trace_frame, &t);
	for (i = 0; i < NTRAFFIC; i++)
		if (t.v[i] != counted[i])
			harness_fail(__FILE__, __LINE__,
				     "%s: %s %lld in the trace, %lld counted",
				     path, traffic_counter[i], t.v[i],
				     counted[i]);
	if (requester) {
		/* RC RDMA WRITE FIRST, MIDDLE, LAST (IBA table 37) */
		ASSERT_EQ(t.ops_sent[0x06], 1);
		ASSERT_EQ(t.ops_sent[0x07], BIG_PKTS - 2);
		ASSERT_EQ(t.ops_sent[0x08], 1);
	} else {
		ASSERT_EQ(t.ops_sent[0x11], t.v[SENT_P]);	/* ACKs only */
	}
	unlink(path);
}

/* Both sides: the QP at path MTU 1024, a long ACK timeout (no resend). */
static void big_open(struct ep *e, int fd)
{
	struct ep_opts o;

	ep_default_opts(&o, IBV_QPT_RC);
	o.timeout = 24;			/* ~69 s: nothing is resent */
	ep_create(e, &o);
	e->mtu = BIG_MTU;
	ep_exchange(fd, &e->self, &e->peer);
	ep_connect(e, &o);
	ASSERT_EQ(qp_mtu(e->qp), 1024);
}

static void big_responder(int fd, void *arg)
{
	const struct big *g = arg;
	long long want[NTRAFFIC], got[NTRAFFIC];
	struct ep b;
	uint32_t i;

	unsetenv("SOFTHCA_FAULTS");
	big_open(&b, fd);
	memset(b.buf, 0xa5, BIG_LEN + 4096);
	duo_signal(fd, 'p');
	duo_expect(fd, 'w');		/* the WRITE completed */
	big_counts(want);
	mirror(want);
	if (g->dup) {
		/* what arrived twice */
		want[RCVD_P] *= 2;
		want[RCVD_B] *= 2;
	}
	/* with dup, the LAST and its copy ask */
	counted_exactly(b.qp->qp_num, want, SENT_P, g->dup ? 2 : 1,
			(g->dup ? 2 : 1) * BIG_ACKREQ, got);
	/* all of them sent: the requester must have them all */
	xwrite(fd, &got[SENT_P], sizeof(got[SENT_P]));
	ASSERT_EQ(qp_counter(b.qp->qp_num, "duplicate_request"),
		  g->dup ? BIG_PKTS : 0);
	ASSERT_EQ(qp_counter(b.qp->qp_num, "out_of_seq_request"), 0);
	for (i = 0; i < BIG_LEN; i++)
		if (b.buf[i] != big_byte(i))
			harness_fail(__FILE__, __LINE__,
				     "byte %u: 0x%02x, want 0x%02x", i,
				     b.buf[i], big_byte(i));
	for (i = BIG_LEN; i < BIG_LEN + 4096; i++)
		ASSERT_EQ(b.buf[i], 0xa5);
	if (g->pcap)
		pcap_check(g, &b, got, false);
	duo_signal(fd, 'd');
	duo_expect(fd, 'x');
	ep_destroy(&b);
}

static void big_write(struct big *g)
{
	long long want[NTRAFFIC], got[NTRAFFIC], acks;
	struct duo d;
	struct ep a;
	uint32_t i;

	ASSERT_EQ(setenv("SOFTHCA_NET", "1", 1), 0);
	unsetenv("SOFTHCA_FAULTS");
	unsetenv("SOFTHCA_PCAP");
	if (g->pcap) {
		snprintf(g->pcap_tmpl, sizeof(g->pcap_tmpl),
			 "%s/softhca-stat-%d-%%p.pcap",
			 getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp",
			 (int)getpid());
		ASSERT_EQ(setenv("SOFTHCA_PCAP", g->pcap_tmpl, 1), 0);
	}
	duo_fork(&d, big_responder, g);
	/* faults here only, after the fork */
	if (g->dup)
		ASSERT_EQ(setenv("SOFTHCA_FAULTS", "dup=1", 1), 0);
	big_open(&a, d.fd);
	for (i = 0; i < BIG_LEN; i++)
		a.buf[i] = big_byte(i);
	duo_expect(d.fd, 'p');
	ASSERT_EQ(ep_post(&a, 0xb1, IBV_WR_RDMA_WRITE, 0, BIG_LEN, 0, 0), 0);
	ep_expect(a.scq, a.qp, 0xb1, IBV_WC_SUCCESS);
	big_counts(want);
	counted_exactly(a.qp->qp_num, want, RCVD_P, 1,
			(g->dup ? 2 : 1) * BIG_ACKREQ, got);
	ASSERT_EQ(ep_stat_counter(SOFTHCA_TOOL, getpid(), "faults_injected"),
		  g->dup ? BIG_PKTS : 0);
	duo_signal(d.fd, 'w');
	/* every ACK the responder sent, and no other */
	xread(d.fd, &acks, sizeof(acks));
	counted_exactly(a.qp->qp_num, want, RCVD_P, acks, acks, got);
	if (g->pcap)
		pcap_check(g, &a, got, true);
	duo_expect(d.fd, 'd');
	duo_signal(d.fd, 'x');
	duo_wait(&d);
	ep_destroy(&a);
}

TEST(net_write_1mib_counted)
{
	struct big g = { .pcap = false };

	big_write(&g);
}

TEST(net_write_1mib_counted_pcap)
{
	struct big g = { .pcap = true };

	big_write(&g);
}

TEST(net_write_1mib_duplicated_counted)
{
	struct big g = { .dup = true };

	big_write(&g);
}

/*
 * A post list that stops in the middle: eight unsignaled WRITEs, a
 * signaled SEND, and a WRITE whose source page is missing (a userfaultfd:
 * the thread that runs the list waits there).  While it waits, the SEND's
 * two completions are there, and the counters of both QPs already hold
 * the nine messages before: the requester's sent_*, the responder's
 * rcvd_* (same host: the requester counts both ends, its own per
 * message, the responder's a run of the send queue at a time, added
 * before a completion).
 */
#define LIST_WRITES 8

struct list_post {
	struct ep *a;
	struct ibv_mr *mr;	/* the stopping WRITE's source */
	int writes;		/* WRITEs before it ... */
	bool send;		/* ... and a SEND */
	pthread_t t;
	int ret;
};

static void *post_list(void *arg)
{
	struct list_post *lp = arg;
	struct ibv_send_wr wr[LIST_WRITES + 2], *bad = NULL;
	struct ibv_sge sge[LIST_WRITES + 2];
	struct ep *a = lp->a;
	int i, n = lp->writes + lp->send + 1;

	memset(wr, 0, sizeof(wr));
	for (i = 0; i < n; i++) {
		sge[i].addr = (uintptr_t)a->buf;
		sge[i].length = 8;
		sge[i].lkey = a->mr->lkey;
		wr[i].wr_id = (uint64_t)i;
		wr[i].sg_list = &sge[i];
		wr[i].num_sge = 1;
		wr[i].opcode = IBV_WR_RDMA_WRITE;
		wr[i].wr.rdma.remote_addr = a->peer.addr + 64u * (uint64_t)i;
		wr[i].wr.rdma.rkey = a->peer.rkey;
		wr[i].next = i < n - 1 ? &wr[i + 1] : NULL;
	}
	if (lp->send) {
		wr[lp->writes].opcode = IBV_WR_SEND;
		wr[lp->writes].send_flags = IBV_SEND_SIGNALED;
	}
	sge[n - 1].addr = (uintptr_t)lp->mr->addr;
	sge[n - 1].lkey = lp->mr->lkey;
	wr[n - 1].send_flags = IBV_SEND_SIGNALED;
	lp->ret = ibv_post_send(a->qp, wr, &bad);
	return NULL;
}

/* A page watched by a userfaultfd, registered in pd for a WRITE's
 * source (SOFTHCA_MAP=0 already set: no shared re-backing of it). */
static struct ibv_mr *stopping_page(struct ibv_pd *pd, int ufd,
				    uint8_t **mem)
{
	struct ibv_mr *mr;

	*mem = mmap(NULL, UFFD_PAGE, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT(*mem != MAP_FAILED);
	mr = ibv_reg_mr(pd, *mem, UFFD_PAGE, IBV_ACCESS_LOCAL_WRITE);
	ASSERT(mr != NULL);
	ASSERT_EQ(madvise(*mem, UFFD_PAGE, MADV_DONTNEED), 0);
	uffd_watch(ufd, *mem, UFFD_PAGE);
	return mr;
}

TEST(post_list_counted_before_its_completions)
{
	long long ra[NTRAFFIC], rb[NTRAFFIC], da[NTRAFFIC], db[NTRAFFIC];
	long long want[NTRAFFIC] = { 0 };
	struct list_post lp;
	struct ep_opts o;
	struct ep a, b;
	uint64_t page;
	uint8_t *mem;
	int i, ufd;

	ep_skip_if_netns();
	/* the same host's run of the send queue; the source page left
	 * where the program put it (no shared re-backing: the
	 * userfaultfd stays on it) */
	unsetenv("SOFTHCA_NET");
	ASSERT_EQ(setenv("SOFTHCA_MAP", "0", 1), 0);
	ufd = uffd_open();
	ep_default_opts(&o, IBV_QPT_RC);
	ep_pair(&a, &o, &b, &o);
	lp.mr = stopping_page(a.pd, ufd, &mem);
	page = (uintptr_t)mem;
	ASSERT_EQ(ep_post_recv(&b, 0x5e, 4096, 64), 0);
	traffic_counters(a.qp->qp_num, ra);
	traffic_counters(b.qp->qp_num, rb);

	lp.a = &a;
	lp.writes = LIST_WRITES;
	lp.send = true;
	lp.ret = -1;
	ASSERT_EQ(pthread_create(&lp.t, NULL, post_list, &lp), 0);
	/* the list's thread waits at the last WRITE's source now */
	ASSERT_EQ(uffd_fault(ufd), page);
	ep_expect(b.rcq, b.qp, 0x5e, IBV_WC_SUCCESS);
	ep_expect(a.scq, a.qp, LIST_WRITES, IBV_WC_SUCCESS);
	traffic_counters(a.qp->qp_num, da);
	traffic_counters(b.qp->qp_num, db);
	for (i = 0; i < NTRAFFIC; i++) {
		da[i] -= ra[i];
		db[i] -= rb[i];
	}
	for (i = 0; i <= LIST_WRITES; i++)
		count_message(want, i < LIST_WRITES ? IBV_WR_RDMA_WRITE :
						      IBV_WR_SEND,
			      8, qp_mtu(a.qp), false);
	expect_traffic(da, want);
	mirror(want);
	expect_traffic(db, want);

	uffd_supply(ufd, page, 0x77);
	ASSERT_EQ(pthread_join(lp.t, NULL), 0);
	ASSERT_EQ(lp.ret, 0);
	ep_expect(a.scq, a.qp, LIST_WRITES + 1, IBV_WC_SUCCESS);
	ASSERT_EQ(b.buf[64u * (LIST_WRITES + 1)], 0x77);
	/* and the last WRITE once its run ended */
	traffic_counters(a.qp->qp_num, da);
	for (i = 0; i < NTRAFFIC; i++)
		da[i] -= ra[i];
	mirror(want);
	count_message(want, IBV_WR_RDMA_WRITE, 8, qp_mtu(a.qp), false);
	expect_traffic(da, want);
	ASSERT_EQ(ibv_dereg_mr(lp.mr), 0);
	ep_destroy(&a);
	ep_destroy(&b);
	munmap(mem, UFFD_PAGE);
	close(ufd);
}

/*
 * The counts gathered for a responder's QP that its owner destroys before
 * they go in: dropped, not added to whatever took the QP's memory.  A
 * list of a WRITE and a stopping WRITE; while it waits, the responder's
 * process destroys its QP and creates another in its place (the arena
 * gives the new record the old one's memory: without the check the new
 * QP's counters show both WRITEs).  The second WRITE had found the QP
 * before it stopped at its source: its copy ends, and it completes.
 * Between two namespaces the responder counts what it receives; the
 * second WRITE, sent after the destroy, is answered by nothing.
 */
static void replaced_responder(int fd, void *arg)
{
	struct ibv_qp_init_attr ia;
	struct ibv_qp *c;
	struct ep_opts o;
	struct ep b;
	long long v;
	int i;

	(void)arg;
	ep_default_opts(&o, IBV_QPT_RC);
	ep_open_remote(&b, &o, fd);
	duo_expect(fd, 'd');
	ASSERT_EQ(ibv_destroy_qp(b.qp), 0);
	b.qp = NULL;
	memset(&ia, 0, sizeof(ia));
	ia.send_cq = b.scq;
	ia.recv_cq = b.rcq;
	ia.qp_type = IBV_QPT_RC;
	ia.cap.max_send_wr = ia.cap.max_recv_wr = (uint32_t)o.max_send_wr;
	ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
	c = ibv_create_qp(b.pd, &ia);
	ASSERT(c != NULL);
	duo_signal(fd, 'n');
	duo_expect(fd, 'c');	/* the requester's run ended */
	for (i = 0; i < NTRAFFIC; i++) {
		/* read here: a process in another namespace is not seen */
		v = ep_stat_qp_counter(SOFTHCA_TOOL, getpid(), c->qp_num,
				       traffic_counter[i]);
		if (v)
			harness_fail(__FILE__, __LINE__,
				     "%s of a new QP: %lld, counts of the "
				     "QP destroyed before it",
				     traffic_counter[i], v);
	}
	duo_signal(fd, 'k');
	duo_expect(fd, 'x');
	ASSERT_EQ(ibv_destroy_qp(c), 0);
	ep_destroy(&b);
}

TEST(post_list_counts_of_a_destroyed_qp_dropped)
{
	struct list_post lp;
	struct ep_opts o;
	struct duo d;
	struct ep a;
	uint8_t *mem;
	int ufd;

	unsetenv("SOFTHCA_NET");
	ASSERT_EQ(setenv("SOFTHCA_MAP", "0", 1), 0);
	ufd = uffd_open();
	duo_fork(&d, replaced_responder, NULL);
	ep_default_opts(&o, IBV_QPT_RC);
	o.timeout = 10;		/* the net path: RETRY_EXC_ERR in ~12 ms */
	o.retry_cnt = 2;
	ep_open_remote(&a, &o, d.fd);
	lp.mr = stopping_page(a.pd, ufd, &mem);
	lp.a = &a;
	lp.writes = 1;
	lp.send = false;
	lp.ret = -1;
	ASSERT_EQ(pthread_create(&lp.t, NULL, post_list, &lp), 0);
	ASSERT_EQ(uffd_fault(ufd), (uintptr_t)mem);
	duo_signal(d.fd, 'd');
	duo_expect(d.fd, 'n');	/* destroyed, and another in its place */
	uffd_supply(ufd, (uintptr_t)mem, 0x77);
	ASSERT_EQ(pthread_join(lp.t, NULL), 0);
	ASSERT_EQ(lp.ret, 0);
	if (!net_path()) {
		ep_expect(a.scq, a.qp, 1, IBV_WC_SUCCESS);
	} else {
		/* between hosts it is sent after the destroy: nothing
		 * answers it (nor the first, if its ACK had not come) */
		struct ibv_wc wc;
		int tries;

		wc.wr_id = 0;
		for (tries = 0; wc.wr_id != 1 && tries < 10000; tries++) {
			if (ibv_poll_cq(a.scq, 1, &wc) != 1) {
				wc.wr_id = 0;
				usleep(1000);
				continue;
			}
			ASSERT(wc.status != IBV_WC_SUCCESS);
		}
		ASSERT_EQ(wc.wr_id, 1);
	}
	duo_signal(d.fd, 'c');
	duo_expect(d.fd, 'k');
	duo_signal(d.fd, 'x');
	duo_wait(&d);
	ASSERT_EQ(ibv_dereg_mr(lp.mr), 0);
	ep_destroy(&a);
	munmap(mem, UFFD_PAGE);
	close(ufd);
}
