// SPDX-License-Identifier: MIT
/*
 * The host table (shm/host.c: multicast membership, the CMA path's atomic
 * locks) made by many processes at once: they must all end up on one.
 * A table used to be published with linkat then unlinkat, two names for
 * a moment; a process joining in that moment took it for a hard link,
 * removed the name and made its own, and the two processes then served
 * atomics under different locks (seen as a FETCH_ADD result below an
 * earlier one in traffic_test_mapped_atomic under TSan).
 *
 * Each round: no table (the last round's users are gone, so the first
 * joiner removes the stale one), then PROCS processes released at once
 * attach a multicast group, which makes or joins the table.  Each reports
 * the inode of the host table it mapped (/proc/self/maps) and whether
 * that file still has its name; all must be one, named file.  A race
 * lost shows as two inodes or a "(deleted)" mapping.  Not every round
 * can hit the window; the assertion itself holds in every round.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "harness.h"
#include "common.h"

#define PROCS	8
#define ROUNDS	10

struct seen {
	unsigned long ino;		/* 0: no host table mapped */
	int deleted;
};

/* The host table this process maps (its file's name ends in host-v2). */
static struct seen host_mapping(void)
{
	struct seen s = { 0, 0 };
	char line[512];
	FILE *f = fopen("/proc/self/maps", "r");

	if (!f)
		return s;
	while (fgets(line, sizeof(line), f)) {
		unsigned long ino = 0;
		char *p = strstr(line, "/host-v2");

		if (!p || sscanf(line, "%*s %*s %*s %*s %lu", &ino) != 1)
			continue;
		s.ino = ino;
		s.deleted = strstr(p, "(deleted)") != NULL;
	}
	fclose(f);
	return s;
}

/* One joiner: released by a byte on go, reports on out, then waits for
 * the round's end (its table stays in use until all have reported). */
static void joiner(int go, int out, int end)
{
	union ibv_gid mgid = { .raw = { 0xff, 0x0e } };
	struct ibv_qp_init_attr ia = { 0 };
	struct ibv_context *ctx = open_lo();
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct seen s;
	char c;

	pd = ibv_alloc_pd(ctx);
	cq = ibv_create_cq(ctx, 4, NULL, NULL, 0);
	ia.send_cq = ia.recv_cq = cq;
	ia.qp_type = IBV_QPT_UD;
	ia.cap.max_send_wr = ia.cap.max_recv_wr = 1;
	ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
	qp = pd && cq ? ibv_create_qp(pd, &ia) : NULL;
	mgid.raw[15] = (uint8_t)getpid();
	if (!qp || read(go, &c, 1) != 1 || ibv_attach_mcast(qp, &mgid, 0))
		_exit(2);
	s = host_mapping();
	if (write(out, &s, sizeof(s)) != sizeof(s) || read(end, &c, 1) < 0)
		_exit(3);
	_exit(0);
}

TEST(many_processes_one_host_table)
{
	int r, i, split = 0;

	for (r = 0; r < ROUNDS; r++) {
		int go[2], out[2], end[2];
		struct seen s[PROCS];
		pid_t pid[PROCS];
		char bytes[PROCS];

		ASSERT_EQ(pipe(go), 0);
		ASSERT_EQ(pipe(out), 0);
		ASSERT_EQ(pipe(end), 0);
		for (i = 0; i < PROCS; i++) {
			pid[i] = fork();
			ASSERT(pid[i] >= 0);
			if (!pid[i]) {
				close(go[1]);
				close(out[0]);
				close(end[1]);
				joiner(go[0], out[1], end[0]);
			}
		}
		close(go[0]);
		close(out[1]);
		close(end[0]);
		memset(bytes, 'g', sizeof(bytes));
		ASSERT_EQ(write(go[1], bytes, PROCS), PROCS);
		for (i = 0; i < PROCS; i++)
			ASSERT_EQ(read(out[0], &s[i], sizeof(s[i])),
				  (ssize_t)sizeof(s[i]));
		close(end[1]);		/* the round ends */
		for (i = 0; i < PROCS; i++) {
			int st;

			ASSERT_EQ(waitpid(pid[i], &st, 0), pid[i]);
			ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 0);
		}
		close(go[1]);
		close(out[0]);
		for (i = 0; i < PROCS; i++) {
			ASSERT(s[i].ino != 0);
			if (s[i].ino != s[0].ino || s[i].deleted)
				split++;
		}
	}
	printf("  %d rounds of %d processes, %d saw another table\n", ROUNDS,
	       PROCS, split);
	ASSERT_EQ(split, 0);
}
