// SPDX-License-Identifier: MIT
/*
 * The legitimate pair of the net admission tests (test_netauth.sh): an RC
 * server whose registered buffer the attacker aims at, and its client.
 *
 *   netauth_peer server DEV CTLPORT
 *   netauth_peer client DEV SERVER_IP CTLPORT
 *
 * They exchange QPN, PSN, GID, R_Key and address over a TCP socket
 * (CTLPORT), connect their RC QPs over the net path, and the client
 * WRITEs 16 bytes at offset 0 of the server's 4096-byte buffer (the rest
 * holds 0x5a) and READs the whole buffer back ("ROUND1_OK").  The server
 * then prints what an attacker would know (INFO: QPN, R_Key, address,
 * the PSN it expects, its peer's QPN and pid) and waits.  The client
 * waits for a line on stdin (the attack is over), does a second round
 * with other bytes ("ROUND2_OK": the pair still passes traffic and the
 * buffer holds only what the client wrote) and tells the server, which
 * checks its buffer and that its QP is still RTS ("SERVER_OK"), then
 * waits for a line on stdin (its counters are read) before both exit.
 *
 * Exit status 0 only if every check passed.
 */
#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <infiniband/verbs.h>

#define BUF_LEN		4096
#define FILL		0x5a

struct info {
	uint32_t qpn, psn, rkey;
	uint64_t addr;
	uint8_t gid[16];
};

static void die(const char *what)
{
	fprintf(stderr, "netauth_peer: %s\n", what);
	printf("FAIL %s\n", what);
	fflush(stdout);
	exit(1);
}

static struct ibv_context *open_dev(const char *name)
{
	struct ibv_device **l = ibv_get_device_list(NULL);
	struct ibv_context *ctx = NULL;
	int i;

	for (i = 0; l && l[i]; i++)
		if (!strcmp(ibv_get_device_name(l[i]), name))
			ctx = ibv_open_device(l[i]);
	if (l)
		ibv_free_device_list(l);
	if (!ctx)
		die("no such device");
	return ctx;
}

/* The first IPv4-mapped GID of port 1 (the interface's IPv4 address). */
static int pick_gid(struct ibv_context *ctx, union ibv_gid *gid)
{
	static const uint8_t v4[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
					0xff, 0xff };
	int i;

	for (i = 0; i < 16; i++)
		if (!ibv_query_gid(ctx, 1, i, gid) && !memcmp(gid->raw, v4, 12))
			return i;
	if (ibv_query_gid(ctx, 1, 0, gid))
		die("no GID");
	return 0;
}

static int sgid_index;

static void xfer(int fd, struct info *mine, struct info *theirs)
{
	if (write(fd, mine, sizeof(*mine)) != sizeof(*mine))
		die("ctl write");
	if (recv(fd, theirs, sizeof(*theirs), MSG_WAITALL) != sizeof(*theirs))
		die("ctl read");
}

static void connect_qp(struct ibv_qp *qp, const struct info *mine,
		       const struct info *peer)
{
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
				  IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
		die("INIT");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = peer->qpn;
	a.rq_psn = mine->psn;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	a.ah_attr.is_global = 1;
	a.ah_attr.port_num = 1;
	a.ah_attr.grh.hop_limit = 64;
	a.ah_attr.grh.sgid_index = (uint8_t)sgid_index;
	memcpy(a.ah_attr.grh.dgid.raw, peer->gid, 16);
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
				  IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
				  IBV_QP_MAX_DEST_RD_ATOMIC |
				  IBV_QP_MIN_RNR_TIMER))
		die("RTR");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.sq_psn = peer->psn;	/* (the peer's rq_psn is what it expects) */
	a.max_rd_atomic = 1;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT |
				  IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
				  IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC))
		die("RTS");
}

static void wait_one(struct ibv_cq *cq, const char *what)
{
	struct ibv_wc wc;
	time_t end = time(NULL) + 60;
	int n;

	while ((n = ibv_poll_cq(cq, 1, &wc)) == 0 && time(NULL) < end)
		;
	if (n != 1 || wc.status != IBV_WC_SUCCESS) {
		fprintf(stderr, "netauth_peer: %s: %s\n", what,
			n == 1 ? ibv_wc_status_str(wc.status) :
				 "no completion");
		die(what);
	}
}

static void rdma(struct ibv_qp *qp, struct ibv_cq *cq, struct ibv_mr *mr,
		 enum ibv_wr_opcode op, void *local, uint32_t len,
		 const struct info *peer)
{
	struct ibv_sge sge = { (uintptr_t)local, len, mr->lkey };
	struct ibv_send_wr wr, *bad;

	memset(&wr, 0, sizeof(wr));
	wr.opcode = op;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.wr.rdma.remote_addr = peer->addr;
	wr.wr.rdma.rkey = peer->rkey;
	if (ibv_post_send(qp, &wr, &bad))
		die("post_send");
	wait_one(cq, op == IBV_WR_RDMA_WRITE ? "WRITE" : "READ");
}

/* the client's round: WRITE msg at 0, READ everything, compare */
static void round_trip(struct ibv_qp *qp, struct ibv_cq *cq,
		       struct ibv_mr *mr, unsigned char *buf,
		       const struct info *peer, const char *msg)
{
	unsigned char want[BUF_LEN];

	memcpy(buf, msg, 16);
	rdma(qp, cq, mr, IBV_WR_RDMA_WRITE, buf, 16, peer);
	memset(buf, 0, BUF_LEN);
	rdma(qp, cq, mr, IBV_WR_RDMA_READ, buf, BUF_LEN, peer);
	memset(want, FILL, sizeof(want));
	memcpy(want, msg, 16);
	if (memcmp(buf, want, BUF_LEN))
		die("the server's buffer is not what the client wrote");
}

int main(int argc, char **argv)
{
	bool server = argc == 4 && !strcmp(argv[1], "server");
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_mr *mr;
	struct ibv_qp *qp;
	struct ibv_qp_init_attr qa;
	struct ibv_qp_attr qattr;
	struct info mine, peer;
	union ibv_gid gid;
	unsigned char *buf;
	int fd;

	if (!server && !(argc == 5 && !strcmp(argv[1], "client"))) {
		fprintf(stderr, "usage: netauth_peer server DEV CTLPORT\n"
				"       netauth_peer client DEV SERVER_IP "
				"CTLPORT\n");
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	ctx = open_dev(argv[2]);
	pd = ibv_alloc_pd(ctx);
	cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	buf = aligned_alloc(4096, BUF_LEN);
	if (!pd || !cq || !buf)
		die("resources");
	memset(buf, server ? FILL : 0, BUF_LEN);
	mr = ibv_reg_mr(pd, buf, BUF_LEN, IBV_ACCESS_LOCAL_WRITE |
				      IBV_ACCESS_REMOTE_WRITE |
				      IBV_ACCESS_REMOTE_READ);
	memset(&qa, 0, sizeof(qa));
	qa.send_cq = qa.recv_cq = cq;
	qa.qp_type = IBV_QPT_RC;
	qa.cap.max_send_wr = qa.cap.max_recv_wr = 4;
	qa.cap.max_send_sge = qa.cap.max_recv_sge = 1;
	qp = mr ? ibv_create_qp(pd, &qa) : NULL;
	if (!qp)
		die("QP");
	sgid_index = pick_gid(ctx, &gid);
	memset(&mine, 0, sizeof(mine));
	mine.qpn = qp->qp_num;
	mine.psn = (uint32_t)(getpid() * 7919) & 0xffffff;
	mine.rkey = mr->rkey;
	mine.addr = (uintptr_t)buf;
	memcpy(mine.gid, gid.raw, 16);

	if (server) {
		struct sockaddr_in6 sa;
		int l = socket(AF_INET6, SOCK_STREAM, 0), one = 1, zero = 0;

		setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		setsockopt(l, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
		memset(&sa, 0, sizeof(sa));
		sa.sin6_family = AF_INET6;
		sa.sin6_port = htons((uint16_t)atoi(argv[3]));
		if (bind(l, (struct sockaddr *)&sa, sizeof(sa)) || listen(l, 1))
			die("ctl listen");
		printf("LISTENING\n");
		fd = accept(l, NULL, NULL);
		close(l);
	} else {
		struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *ai;

		if (getaddrinfo(argv[3], argv[4], &hints, &ai))
			die("ctl address");
		fd = socket(ai->ai_family, SOCK_STREAM, 0);
		if (connect(fd, ai->ai_addr, ai->ai_addrlen))
			die("ctl connect");
		freeaddrinfo(ai);
	}
	if (fd < 0)
		die("ctl");
	xfer(fd, &mine, &peer);
	connect_qp(qp, &mine, &peer);
	/* both are RTS before the first WRITE */
	{
		char c = 'r';

		if (write(fd, &c, 1) != 1 || recv(fd, &c, 1, MSG_WAITALL) != 1)
			die("ctl sync");
	}
	if (!server) {
		char line[64];

		round_trip(qp, cq, mr, buf, &peer, "LEGIT-WRITE-0001");
		printf("ROUND1_OK\n");
		if (write(fd, "1", 1) != 1)
			die("ctl");
		if (!fgets(line, sizeof(line), stdin))
			die("stdin");
		round_trip(qp, cq, mr, buf, &peer, "LEGIT-WRITE-0002");
		printf("ROUND2_OK\n");
		if (write(fd, "2", 1) != 1)
			die("ctl");
		/* the server's verdict, then both go */
		if (recv(fd, line, 1, MSG_WAITALL) != 1)
			die("ctl end");
		return 0;
	} else {
		unsigned char want[BUF_LEN];
		char c;

		if (recv(fd, &c, 1, MSG_WAITALL) != 1 || c != '1') {
			/* the client failed (a wrong secret): stay for
			 * `softhca stat` until told */
			char line[64];

			printf("NO_ROUND1\n");
			if (!fgets(line, sizeof(line), stdin))
				die("stdin");
			die("ctl round 1");
		}
		printf("INFO qpn=0x%06x rkey=0x%08x addr=0x%llx epsn=0x%06x "
		       "peer_qpn=0x%06x pid=%d\n", mine.qpn, mine.rkey,
		       (unsigned long long)mine.addr,
		       /* round 1: a WRITE (1 PSN), a READ of 4 packets */
		       (mine.psn + 5) & 0xffffff, peer.qpn, (int)getpid());
		if (recv(fd, &c, 1, MSG_WAITALL) != 1 || c != '2')
			die("ctl round 2");
		memset(want, FILL, sizeof(want));
		memcpy(want, "LEGIT-WRITE-0002", 16);
		if (memcmp(buf, want, BUF_LEN))
			die("buffer changed by someone else");
		if (ibv_query_qp(qp, &qattr, IBV_QP_STATE, &qa) ||
		    qattr.qp_state != IBV_QPS_RTS)
			die("the QP is not RTS");
		{
			/* no async event (a QP error) was raised */
			struct ibv_async_event ev;
			int flags = fcntl(ctx->async_fd, F_GETFL);

			fcntl(ctx->async_fd, F_SETFL, flags | O_NONBLOCK);
			if (!ibv_get_async_event(ctx, &ev)) {
				fprintf(stderr, "async event %s\n",
					ibv_event_type_str(ev.event_type));
				die("an async event was raised");
			}
		}
		printf("SERVER_OK\n");
		/* stays for `softhca stat` until told (a line on stdin) */
		{
			char line[64];

			if (!fgets(line, sizeof(line), stdin))
				die("stdin");
		}
		if (write(fd, "3", 1) != 1)
			die("ctl");
	}
	return 0;
}
