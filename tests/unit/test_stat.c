// SPDX-License-Identifier: MIT
/*
 * Counters (common/stat.h) and `softhca stat`: the names table; the
 * process's block, which counting never creates; and the tool reading a
 * live process's arena from outside — this process listens on its slot
 * as any softhca process does, holds QP records with counters it bumped
 * through shca_stat_add, and runs the tool on itself.  The tool's output
 * must be exact, and the process must be left as it was.
 */
#include <ctype.h>
#include <dirent.h>
#include <stdint.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "common/slot.h"
#include "common/stat.h"
#include "shm/arena.h"
#include "shm/peer.h"

TEST(names_complete_unique_lowercase)
{
	int i, j;

	for (i = 0; i < SHCA_STAT_MAX; i++) {
		const char *n = shca_stat_names[i];

		ASSERT_NOT_NULL(n);
		ASSERT(*n);
		for (j = 0; n[j]; j++)
			ASSERT(islower((unsigned char)n[j]) || n[j] == '_');
		for (j = 0; j < i; j++)
			ASSERT(strcmp(n, shca_stat_names[j]));
	}
	/* the names by enum, as rxe's hw_counters spell them */
	ASSERT_STR_EQ(shca_stat_names[SHCA_STAT_SENT_PKTS], "sent_pkts");
	ASSERT_STR_EQ(shca_stat_names[SHCA_STAT_RCVD_RNR_ERR], "rcvd_rnr_err");
	ASSERT_STR_EQ(shca_stat_names[SHCA_STAT_RETRY_RNR_EXCEEDED_ERR],
		      "retry_rnr_exceeded_err");
	ASSERT_STR_EQ(shca_stat_names[SHCA_STAT_FAULTS_INJECTED],
		      "faults_injected");
}

TEST(proc_block_needs_the_arena)
{
	struct shca_stat_block *b;
	struct shca_arena *a;
	pid_t pid;
	int status;

	/* nothing made the arena yet: no block, and counting is a no-op */
	ASSERT_NULL(shca_stat_proc());
	shca_stat_add(shca_stat_proc(), SHCA_STAT_DROPPED_PKTS, 1);
	ASSERT_NULL(shca_stat_proc());

	a = shca_arena_self();
	ASSERT_NOT_NULL(a);
	b = shca_stat_proc();
	ASSERT(b == &shca_arena_hdr(a->base)->stats);
	ASSERT_U64_EQ(b->v[SHCA_STAT_DROPPED_PKTS], 0);
	shca_stat_add(b, SHCA_STAT_DROPPED_PKTS, 2);
	shca_stat_add(b, SHCA_STAT_DROPPED_PKTS, 3);
	ASSERT_U64_EQ(b->v[SHCA_STAT_DROPPED_PKTS], 5);

	/* a forked child does not count into its parent's arena */
	pid = fork();
	ASSERT_GE(pid, 0);
	if (!pid)
		_exit(shca_stat_proc() == NULL ? 0 : 1);
	ASSERT_EQ(waitpid(pid, &status, 0), pid);
	ASSERT(WIFEXITED(status));
	ASSERT_EQ(WEXITSTATUS(status), 0);
	ASSERT_U64_EQ(b->v[SHCA_STAT_DROPPED_PKTS], 5);
}

/* ------------------------------------------------------------------ */
/* The tool on this process                                            */

/* A QP record in this process's arena, as qp.c makes one. */
static struct shca_qp_shm *fake_qp(int slot, uint32_t index, const char *dev,
				   enum ibv_qp_type type,
				   enum ibv_qp_state state)
{
	struct shca_arena *a = shca_arena_self();
	struct shca_qp_shm *q = shca_arena_alloc(sizeof(*q));

	ASSERT_NOT_NULL(q);
	q->qpn = shca_qpn_make(slot, index);
	q->qp_type = type;
	q->state = state;
	snprintf(q->dev, sizeof(q->dev), "%s", dev);
	__atomic_store_n(&shca_arena_qp_table(a->base)[index],
			 shca_arena_off(a, q), __ATOMIC_RELEASE);
	return q;
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

static int count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int n = 0;

	ASSERT_NOT_NULL(d);
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

TEST(tool_prints_this_process)
{
	const struct shca_slot *s;
	struct shca_qp_shm *q1, *q2, *q3, *gone;
	struct shca_stat_block before;
	char want[2048], args[64], args_all[64], line[1024], *out = NULL;
	int pid = (int)getpid(), fds, i, tokens;
	char *p;

	ASSERT_EQ(shca_peer_listen(), 0);
	s = shca_slot_get();
	ASSERT_NOT_NULL(s);
	q1 = fake_qp(s->slot, 2, "lo", IBV_QPT_RC, IBV_QPS_RTS);
	q2 = fake_qp(s->slot, 3, "lo", IBV_QPT_UD, IBV_QPS_INIT);
	q3 = fake_qp(s->slot, 4, "eth9", IBV_QPT_RC, IBV_QPS_ERR);
	/* being destroyed (qp.c clears the QPN first): not listed */
	gone = fake_qp(s->slot, 5, "lo", IBV_QPT_RC, IBV_QPS_RTS);
	gone->qpn = 0;
	shca_stat_add(&q1->stats, SHCA_STAT_SENT_PKTS, 10);
	shca_stat_add(&q1->stats, SHCA_STAT_SENT_BYTES, 4096);
	shca_stat_add(&q1->stats, SHCA_STAT_RCVD_RNR_ERR, 2);
	shca_stat_add(&q2->stats, SHCA_STAT_SENT_PKTS, 5);
	shca_stat_add(&q3->stats, SHCA_STAT_ACCESS_ERR, 1);
	shca_stat_add(&gone->stats, SHCA_STAT_SENT_PKTS, 99);
	/* a same-host requester's own counts (shm/xfer.c) are the QP's */
	shca_stat_own_add(&q1->own.sent_pkts, 3);
	shca_stat_own_add(&q1->own.sent_bytes, 8);
	shca_stat_own_add(&q1->own.rcvd_pkts, 1);
	shca_stat_own_add(&q1->own.rcvd_bytes, 64);
	shca_stat_add(shca_stat_proc(), SHCA_STAT_DROPPED_PKTS, 3);
	/* taking the slot may have reclaimed a name a killed process left
	 * (shm/sock.c): a count of this machine's past, not of this test */
	shca_stat_proc()->v[SHCA_STAT_SHM_STALE_NAMES] = 0;
	before = q1->stats;
	fds = count_fds();

	snprintf(args, sizeof(args), "--pid %d", pid);
	snprintf(args_all, sizeof(args_all), "--all --pid %d", pid);
	ASSERT_EQ(run_stat(args, &out), 0);
	snprintf(want, sizeof(want),
		 "pid %d slot %d qps 3 dropped_pkts 3\n"
		 "pid %d device softhca_eth9 qps 1 access_err 1\n"
		 "pid %d device softhca_eth9 qp 0x%06x type RC state ERR"
		 " access_err 1\n"
		 "pid %d device softhca_lo qps 2 sent_pkts 18 sent_bytes 4104"
		 " rcvd_rnr_err 2 rcvd_pkts 1 rcvd_bytes 64\n"
		 "pid %d device softhca_lo qp 0x%06x type RC state RTS"
		 " sent_pkts 13 sent_bytes 4104 rcvd_rnr_err 2 rcvd_pkts 1"
		 " rcvd_bytes 64\n"
		 "pid %d device softhca_lo qp 0x%06x type UD state INIT"
		 " sent_pkts 5\n",
		 pid, s->slot, pid, pid, q3->qpn, pid, pid, q1->qpn, pid,
		 q2->qpn);
	ASSERT_STR_EQ(out, want);

	/* the counters move: the next look sees it */
	shca_stat_add(&q2->stats, SHCA_STAT_LOCAL_ACK_TIMEOUT, 7);
	ASSERT_EQ(run_stat(args, &out), 0);
	snprintf(line, sizeof(line),
		 "pid %d device softhca_lo qp 0x%06x type UD state INIT"
		 " sent_pkts 5 local_ack_timeout 7\n", pid, q2->qpn);
	ASSERT_NOT_NULL(strstr(out, line));

	/* --all: every counter, zeros too, in the names' order */
	ASSERT_EQ(run_stat(args_all, &out), 0);
	snprintf(line, sizeof(line),
		 "pid %d device softhca_lo qp 0x%06x type UD state INIT ",
		 pid, q2->qpn);
	p = strstr(out, line);
	ASSERT_NOT_NULL(p);
	p += strlen(line);
	for (i = 0; i < SHCA_STAT_MAX; i++) {
		char name[64];
		unsigned long long v;
		int used = 0;

		ASSERT_EQ(sscanf(p, "%63s %llu%n", name, &v, &used), 2);
		ASSERT_STR_EQ(name, shca_stat_names[i]);
		ASSERT_U64_EQ(v, q2->stats.v[i]);
		p += used;
		while (*p == ' ')
			p++;
	}
	ASSERT_EQ(*p, '\n');
	/* ... and the process line too */
	snprintf(line, sizeof(line), "pid %d slot %d qps 3 ", pid, s->slot);
	p = strstr(out, line);
	ASSERT_NOT_NULL(p);
	for (tokens = 0; *p != '\n'; p++)
		tokens += *p == ' ';
	ASSERT_EQ(tokens, 6 + 2 * SHCA_STAT_MAX - 1);

	/* the tool changed nothing: counters, and no connection left open
	 * once the engine saw the tool hang up */
	ASSERT(!memcmp(&before, &q1->stats, sizeof(before)));
	ASSERT_EQ(q1->state, IBV_QPS_RTS);
	for (i = 0; i < 200 && count_fds() != fds; i++)
		usleep(10000);
	ASSERT_EQ(count_fds(), fds);
	free(out);
}

TEST(tool_errors)
{
	char *out = NULL;

	/* usage errors: status 2 */
	ASSERT_EQ(run_stat("--pid abc", &out), 2);
	ASSERT_EQ(run_stat("--pid 0", &out), 2);
	ASSERT_EQ(run_stat("--pid", &out), 2);
	ASSERT_EQ(run_stat("--bogus", &out), 2);
	/* pid 1 is no softhca process of ours here: nothing, status 1 */
	ASSERT_EQ(run_stat("--pid 1", &out), 1);
	ASSERT_STR_EQ(out, "");
	free(out);
}
