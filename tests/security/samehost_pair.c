// SPDX-License-Identifier: MIT
/*
 * The victim of tests/security/test_samehost.sh: plain verbs on
 * softhca_lo, nothing of softhca's internals.
 *
 *   samehost_pair pair         two processes (fork): the client RDMA-WRITEs
 *                              4 KiB into the server's buffer and runs 100
 *                              FETCH_ADDs on its counter; both check what
 *                              they see, and that they mapped nothing of
 *                              another user's
 *   samehost_pair probe SLOT [UID]
 *                              an RC QP connected to QPN (SLOT << 14 | 2)
 *                              on this host, where an impostor listens: a
 *                              WRITE must end in an error completion, and
 *                              nothing of the impostor's must be mapped.
 *                              With UID (as root): first a child that
 *                              becomes UID, keeping CAP_DAC_OVERRIDE to
 *                              get past the private directory as only root
 *                              could, connects to our own socket and must
 *                              get no hello (SO_PEERCRED on accept)
 *
 *   samehost_pair hold         opens the device and makes a QP (so its name
 *                              is in the private directory), prints
 *                              "held PORT" and waits to be killed
 *
 * Each process prints its own counters at the end (`softhca stat --pid`,
 * SOFTHCA_TOOL) for the script to read.  Exit 0: all as expected.
 */
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <linux/capability.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <infiniband/verbs.h>

#define BUF	4096
#define ADDS	100

#define DIE(...)                                                     \
	do {                                                         \
		fprintf(stderr, "[%d] ", (int)getpid());             \
		fprintf(stderr, __VA_ARGS__);                        \
		fputc('\n', stderr);                                 \
		exit(1);                                             \
	} while (0)

struct ep {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	uint8_t *buf;		/* BUF bytes, then the 8-byte counter */
	union ibv_gid gid;
};

struct info {
	uint32_t qpn;
	uint32_t rkey;
	uint64_t addr;
	union ibv_gid gid;
};

static void ep_open(struct ep *e)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_qp_init_attr qa;
	struct ibv_qp_attr a;
	int i;

	if (!list)
		DIE("no device list: %s", strerror(errno));
	for (i = 0; list[i]; i++)
		if (!strcmp(ibv_get_device_name(list[i]), "softhca_lo"))
			break;
	if (!list[i])
		DIE("no softhca_lo");
	e->ctx = ibv_open_device(list[i]);
	if (!e->ctx)
		DIE("ibv_open_device: %s", strerror(errno));
	ibv_free_device_list(list);
	if (ibv_query_gid(e->ctx, 1, 0, &e->gid))
		DIE("query_gid");
	e->pd = ibv_alloc_pd(e->ctx);
	e->cq = ibv_create_cq(e->ctx, 16, NULL, NULL, 0);
	e->buf = aligned_alloc(4096, BUF + 4096);
	if (!e->pd || !e->cq || !e->buf)
		DIE("pd/cq/buf");
	memset(e->buf, 0, BUF + 8);
	e->mr = ibv_reg_mr(e->pd, e->buf, BUF + 8,
			   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			   IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC);
	if (!e->mr)
		DIE("reg_mr: %s", strerror(errno));
	memset(&qa, 0, sizeof(qa));
	qa.send_cq = e->cq;
	qa.recv_cq = e->cq;
	qa.qp_type = IBV_QPT_RC;
	qa.cap.max_send_wr = 16;
	qa.cap.max_recv_wr = 16;
	qa.cap.max_send_sge = 1;
	qa.cap.max_recv_sge = 1;
	e->qp = ibv_create_qp(e->pd, &qa);
	if (!e->qp)
		DIE("create_qp: %s", strerror(errno));
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
			    IBV_ACCESS_REMOTE_ATOMIC;
	if (ibv_modify_qp(e->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
			  IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
		DIE("INIT");
}

/* RTR and RTS towards (gid, qpn); a short timeout for the probe. */
static void ep_connect(struct ep *e, const union ibv_gid *gid, uint32_t qpn)
{
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = qpn;
	a.rq_psn = 0;
	a.max_dest_rd_atomic = 4;
	a.min_rnr_timer = 1;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = *gid;
	a.ah_attr.grh.hop_limit = 1;
	a.ah_attr.port_num = 1;
	if (ibv_modify_qp(e->qp, &a, IBV_QP_STATE | IBV_QP_AV |
			  IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
			  IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		DIE("RTR: %s", strerror(errno));
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 0;
	a.timeout = 8;		/* ~1 ms */
	a.retry_cnt = 1;
	a.rnr_retry = 1;
	a.max_rd_atomic = 4;
	if (ibv_modify_qp(e->qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN |
			  IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
			  IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC))
		DIE("RTS: %s", strerror(errno));
}

static enum ibv_wc_status post_wait(struct ep *e, enum ibv_wr_opcode op,
				    uint64_t raddr, uint32_t rkey,
				    uint32_t len, uint64_t *result)
{
	struct ibv_sge sge = { (uintptr_t)e->buf, len, e->mr->lkey };
	struct ibv_send_wr wr, *bad;
	struct ibv_wc wc;
	int n;

	memset(&wr, 0, sizeof(wr));
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = op;
	wr.send_flags = IBV_SEND_SIGNALED;
	if (op == IBV_WR_ATOMIC_FETCH_AND_ADD) {
		sge.addr = (uintptr_t)(e->buf + BUF);
		wr.wr.atomic.remote_addr = raddr;
		wr.wr.atomic.rkey = rkey;
		wr.wr.atomic.compare_add = 1;
	} else {
		wr.wr.rdma.remote_addr = raddr;
		wr.wr.rdma.rkey = rkey;
	}
	if (ibv_post_send(e->qp, &wr, &bad))
		DIE("post_send: %s", strerror(errno));
	while (!(n = ibv_poll_cq(e->cq, 1, &wc)))
		usleep(100);
	if (n < 0)
		DIE("poll_cq");
	if (result)
		memcpy(result, e->buf + BUF, 8);
	return wc.status;
}

/*
 * Nothing mapped here is another user's (the file behind each mapping,
 * through /proc/self/map_files where we may read it), and nothing carries
 * the impostor's name.  Returns the number of offending mappings.
 */
static int foreign_mappings(void)
{
	char line[512], path[128];
	FILE *f = fopen("/proc/self/maps", "r");
	int bad = 0;

	if (!f)
		DIE("maps");
	while (fgets(line, sizeof(line), f)) {
		unsigned long lo, hi;
		struct stat st;

		if (strstr(line, "impostor")) {
			fprintf(stderr, "[%d] mapped: %s", (int)getpid(),
				line);
			bad++;
			continue;
		}
		if (sscanf(line, "%lx-%lx", &lo, &hi) != 2)
			continue;
		snprintf(path, sizeof(path), "/proc/self/map_files/%lx-%lx",
			 lo, hi);
		if (!stat(path, &st) && st.st_uid != getuid()) {
			fprintf(stderr, "[%d] mapped a file of uid %u: %s",
				(int)getpid(), (unsigned int)st.st_uid, line);
			bad++;
		}
	}
	fclose(f);
	return bad;
}

/* Our counters, as `softhca stat` shows them to anyone of our user. */
static void print_stat(void)
{
	const char *tool = getenv("SOFTHCA_TOOL");
	char cmd[512];

	if (!tool)
		return;
	snprintf(cmd, sizeof(cmd), "%s stat --pid %d --all", tool,
		 (int)getpid());
	fflush(stdout);
	if (system(cmd))
		fprintf(stderr, "[%d] softhca stat failed\n", (int)getpid());
}

static void xwrite(int fd, const void *p, size_t n)
{
	if (write(fd, p, n) != (ssize_t)n)
		DIE("pipe write");
}

static void xread(int fd, void *p, size_t n)
{
	if (read(fd, p, n) != (ssize_t)n)
		DIE("pipe read");
}

static int run_pair(void)
{
	int to_client[2], to_server[2], status, i, bad;
	struct info me, peer;
	struct ep e;
	pid_t child;
	char b = 0;

	if (pipe(to_client) || pipe(to_server))
		DIE("pipe");
	child = fork();
	if (child < 0)
		DIE("fork");
	/* each end once, so that a side that dies is an EOF, not a hang */
	if (child) {
		close(to_client[0]);
		close(to_server[1]);
	} else {
		close(to_client[1]);
		close(to_server[0]);
	}
	alarm(60);
	memset(&e, 0, sizeof(e));
	ep_open(&e);
	me.qpn = e.qp->qp_num;
	me.rkey = e.mr->rkey;
	me.addr = (uintptr_t)e.buf;
	me.gid = e.gid;
	if (child) {
		/* server: gives its QP, waits for the client to be done */
		xwrite(to_client[1], &me, sizeof(me));
		xread(to_server[0], &peer, sizeof(peer));
		ep_connect(&e, &peer.gid, peer.qpn);
		xwrite(to_client[1], &b, 1);
		xread(to_server[0], &b, 1);
		for (i = 0; i < BUF; i++)
			if (e.buf[i] != (uint8_t)(i * 7 + 1))
				DIE("server: byte %d is %u after the WRITE", i,
				    e.buf[i]);
		if (*(uint64_t *)(e.buf + BUF) != ADDS)
			DIE("server: counter %llu after %d FETCH_ADDs",
			    (unsigned long long)*(uint64_t *)(e.buf + BUF),
			    ADDS);
		bad = foreign_mappings();
		print_stat();
		xwrite(to_client[1], &b, 1);
		if (waitpid(child, &status, 0) != child || !WIFEXITED(status) ||
		    WEXITSTATUS(status))
			DIE("client failed");
		if (bad)
			DIE("server mapped something of another user's");
		printf("pair ok: WRITE %d bytes, %d FETCH_ADDs\n", BUF, ADDS);
		return 0;
	}
	/* client */
	xread(to_client[0], &peer, sizeof(peer));
	xwrite(to_server[1], &me, sizeof(me));
	ep_connect(&e, &peer.gid, peer.qpn);
	xread(to_client[0], &b, 1);
	for (i = 0; i < BUF; i++)
		e.buf[i] = (uint8_t)(i * 7 + 1);
	if (post_wait(&e, IBV_WR_RDMA_WRITE, peer.addr, peer.rkey, BUF,
		      NULL) != IBV_WC_SUCCESS)
		DIE("client: WRITE failed");
	for (i = 0; i < ADDS; i++) {
		uint64_t old = ~0ull;
		enum ibv_wc_status st = post_wait(&e,
			IBV_WR_ATOMIC_FETCH_AND_ADD, peer.addr + BUF,
			peer.rkey, 8, &old);

		if (st != IBV_WC_SUCCESS || old != (uint64_t)i)
			DIE("client: FETCH_ADD %d: status %d, old %llu", i,
			    st, (unsigned long long)old);
	}
	bad = foreign_mappings();
	print_stat();
	xwrite(to_server[1], &b, 1);
	xread(to_client[0], &b, 1);
	exit(bad ? 1 : 0);
}

#ifndef SO_NETNS_COOKIE
#define SO_NETNS_COOKIE 71
#endif

/*
 * As uid, with CAP_DAC_OVERRIDE kept (what root could do, to test the
 * second wall): connect to our own same-host socket.  Returns 0 when the
 * owner closed it without a hello, 1 when it sent one.
 */
static int connect_as(uid_t uid, unsigned int port)
{
	struct __user_cap_header_struct hdr = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct data[2];
	struct sockaddr_un sa;
	struct timeval tv = { 3, 0 };
	char pattern[256], buf[64];
	uint64_t cookie = 0;
	socklen_t cl = sizeof(cookie);
	glob_t g;
	int s, n;

	s = socket(AF_UNIX, SOCK_DGRAM, 0);
	getsockopt(s, SOL_SOCKET, SO_NETNS_COOKIE, &cookie, &cl);
	close(s);
	snprintf(pattern, sizeof(pattern), "/dev/shm/softhca-%u-*/net-%llu/%u",
		 (unsigned int)getuid(), (unsigned long long)cookie, port);
	if (glob(pattern, 0, NULL, &g) || g.gl_pathc != 1)
		DIE("no single socket %s", pattern);
	memset(&sa, 0, sizeof(sa));
	sa.sun_family = AF_UNIX;
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", g.gl_pathv[0]);
	globfree(&g);
	if (prctl(PR_SET_KEEPCAPS, 1) || setresgid(uid, uid, uid) ||
	    setresuid(uid, uid, uid))
		DIE("setresuid: %s", strerror(errno));
	memset(data, 0, sizeof(data));
	data[0].permitted = data[0].effective = 1u << CAP_DAC_OVERRIDE;
	if (syscall(SYS_capset, &hdr, data))
		DIE("capset: %s", strerror(errno));
	s = socket(AF_UNIX, SOCK_SEQPACKET, 0);
	setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	if (connect(s, (struct sockaddr *)&sa, sizeof(sa)))
		DIE("connect as uid %u: %s", (unsigned int)uid,
		    strerror(errno));
	n = (int)recv(s, buf, sizeof(buf), 0);
	printf("connect as uid %u: %s\n", (unsigned int)uid,
	       n > 0 ? "got a hello" : "closed without a hello");
	return n > 0;
}

static int run_probe(int slot, int uid)
{
	struct ep e;
	enum ibv_wc_status st;
	int status;

	alarm(60);
	memset(&e, 0, sizeof(e));
	ep_open(&e);
	if (uid >= 0) {
		const char *b = getenv("SOFTHCA_PORT_BASE");
		unsigned int port = (unsigned int)(b ? atoi(b) : 24000) +
				    (e.qp->qp_num >> 14);
		pid_t c = fork();

		if (!c)
			_exit(connect_as((uid_t)uid, port));
		if (waitpid(c, &status, 0) != c || !WIFEXITED(status) ||
		    WEXITSTATUS(status))
			DIE("a connection of uid %d got our hello", uid);
	}
	ep_connect(&e, &e.gid, (uint32_t)slot << 14 | 2);
	st = post_wait(&e, IBV_WR_RDMA_WRITE, 4096, 0x1234, 64, NULL);
	printf("probe slot %d: WRITE status %s\n", slot, ibv_wc_status_str(st));
	print_stat();
	if (foreign_mappings())
		DIE("probe mapped something of the impostor's");
	return st == IBV_WC_SUCCESS;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc == 2 && !strcmp(argv[1], "pair"))
		return run_pair();
	if (argc == 2 && !strcmp(argv[1], "hold")) {
		const char *b = getenv("SOFTHCA_PORT_BASE");
		struct ep e;

		memset(&e, 0, sizeof(e));
		ep_open(&e);
		printf("held %u\n", (unsigned int)(b ? atoi(b) : 24000) +
					     (e.qp->qp_num >> 14));
		alarm(60);
		for (;;)
			pause();
	}
	if ((argc == 3 || argc == 4) && !strcmp(argv[1], "probe"))
		return run_probe(atoi(argv[2]), argc == 4 ? atoi(argv[3]) : -1);
	fprintf(stderr, "usage: samehost_pair pair | probe SLOT [UID]\n");
	return 2;
}
