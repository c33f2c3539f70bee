// SPDX-License-Identifier: MIT
/*
 * Deregistration against a peer that writes (issue 13): after
 * ibv_dereg_mr returns, no byte of a peer's WRITE lands in the old range
 * any more, on the mapped path and the CMA path (the access lanes: the
 * peer claims one before it reads the MR entry, the owner drains them),
 * and a peer killed while it writes (perhaps holding a lane) does not
 * keep dereg from returning, reaped or still a zombie.  The peer's claims
 * show in the owner's lane bitmap (which the drain reads instead of every
 * lane).
 *
 * The owner is the test's process; the writer is forked (duo_fork): it
 * writes 64 KiB messages in a loop, each carrying its sequence number in
 * every word, until one fails.  The owner keeps the memory allocated and
 * watches it: a snapshot taken when dereg returned must still be what the
 * memory holds once the writer has stopped.
 */
#include <signal.h>
#include <unistd.h>
#include <sys/wait.h>

#include "harness.h"
#include "ep.h"
#include "arena_peer.h"
#include "shm/arena.h"

#define MEM	(1u << 20)	/* the MR the writer writes into */
#define MSG	(64u << 10)
#define BIG	(4u << 20)	/* the killed writer's messages */

struct target {
	uint64_t addr;
	uint32_t rkey;
	uint32_t len;
};

/* Write msg-byte messages into the target from the owner until one fails;
 * then tell how many went through. */
static void writer(int fd, void *arg)
{
	uint32_t msg = *(uint32_t *)arg;
	struct ibv_send_wr wr, *bad;
	struct ibv_sge sge;
	struct target t;
	struct ep_opts o;
	struct ibv_wc wc;
	uint64_t i, *w;
	struct ep b;
	uint32_t k;

	ep_default_opts(&o, IBV_QPT_RC);
	o.buf_size = msg;
	o.retry_cnt = 0;
	o.timeout = 10;
	ep_open_remote(&b, &o, fd);
	xread(fd, &t, sizeof(t));
	duo_signal(fd, 'u');
	w = (uint64_t *)b.buf;
	for (i = 1; i < 10000000; i++) {
		for (k = 0; k < msg / 8; k++)
			w[k] = i;
		memset(&wr, 0, sizeof(wr));
		sge.addr = (uintptr_t)b.buf;
		sge.length = msg;
		sge.lkey = b.mr->lkey;
		wr.wr_id = i;
		wr.sg_list = &sge;
		wr.num_sge = 1;
		wr.opcode = IBV_WR_RDMA_WRITE;
		wr.send_flags = IBV_SEND_SIGNALED;
		/* round the MR: every message lands somewhere in it */
		wr.wr.rdma.remote_addr = t.addr + (i * msg) % t.len;
		wr.wr.rdma.rkey = t.rkey;
		ASSERT_EQ(ibv_post_send(b.qp, &wr, &bad), 0);
		ep_poll(b.scq, &wc, 1);
		if (wc.status != IBV_WC_SUCCESS)
			break;
	}
	xwrite(fd, &i, sizeof(i));
	duo_expect(fd, 'q');
	ep_destroy(&b);
}

/* How many lanes of this process's arena have their busy bit set. */
static int busy_lanes(void)
{
	/* ours, not the writer's arena that we map as its peer */
	uint64_t *busy = shca_lanes_busy(shca_arena_lanes(arena_own_base()));
	int n = 0;

	for (int g = 0; g < SHCA_ARENA_LANES / 64; g++)
		n += __builtin_popcountll(__atomic_load_n(&busy[g],
							  __ATOMIC_SEQ_CST));
	return n;
}

/* How many lanes of this process's arena pid holds now. */
static int lanes_of(pid_t pid)
{
	uint64_t *lanes = shca_arena_lanes(arena_own_base());
	int n = 0;

	for (int k = 0; k < SHCA_ARENA_LANES; k++)
		n += SHCA_LANE_PID(__atomic_load_n(&lanes[k],
						   __ATOMIC_SEQ_CST)) == pid;
	return n;
}

/* Wait (up to ~10 s) until the writer's messages show in mem. */
static void wait_written(const uint64_t *mem, size_t words)
{
	int tries;
	size_t k;

	for (tries = 0; tries < 10000; tries++) {
		for (k = 0; k < words; k += 512)
			if (__atomic_load_n(&mem[k], __ATOMIC_RELAXED) > 2)
				return;
		usleep(1000);
	}
	harness_fail(__FILE__, __LINE__, "the writer's messages never came");
}

static void dereg_while_written(bool mapped)
{
	uint32_t msg = MSG;
	struct target t;
	struct ep_opts o;
	struct ibv_mr *mr;
	struct duo d;
	struct ep a;
	uint8_t *mem, *snap;
	uint64_t n;

	/* both processes; whatever the environment said */
	setenv("SOFTHCA_MAP", mapped ? "1" : "0", 1);
	duo_fork(&d, writer, &msg);
	ep_default_opts(&o, IBV_QPT_RC);
	ep_open_remote(&a, &o, d.fd);
	ASSERT_EQ(posix_memalign((void **)&mem, 4096, MEM), 0);
	memset(mem, 0, MEM);
	mr = ibv_reg_mr(a.pd, mem, MEM, IBV_ACCESS_LOCAL_WRITE |
					       IBV_ACCESS_REMOTE_WRITE);
	ASSERT(mr != NULL);
	t.addr = (uintptr_t)mem;
	t.rkey = mr->rkey;
	t.len = MEM;
	xwrite(d.fd, &t, sizeof(t));
	duo_expect(d.fd, 'u');
	wait_written((const uint64_t *)mem, MEM / 8);
	/* the writer's lane is marked: no drain ran since to clear it */
	ASSERT_GT(busy_lanes(), 0);

	ASSERT_EQ(ibv_dereg_mr(mr), 0);
	snap = malloc(MEM);
	ASSERT(snap != NULL);
	memcpy(snap, mem, MEM);
	/* the writer stops at its first failed WRITE (the key is gone) */
	xread(d.fd, &n, sizeof(n));
	ASSERT_GT(n, 2);
	ASSERT_EQ(ep_find_diff(snap, mem, MEM), -1);
	duo_signal(d.fd, 'q');
	duo_wait(&d);
	free(snap);
	free(mem);
	ep_destroy(&a);
}

TEST(dereg_while_written_mapped)
{
	dereg_while_written(true);
}

TEST(dereg_while_written_cma)
{
	dereg_while_written(false);
}

/*
 * Kills the 4 MiB writer in the middle of its messages and deregisters:
 * reaped first, or (zombie) left a zombie until after the dereg, as a
 * parent that waits for its children later does.  How many rounds found
 * the killed writer holding a lane of ours.
 */
static int dereg_after_kill(bool zombie, int rounds)
{
	uint32_t msg = BIG;
	struct target t;
	struct ep_opts o;
	struct ibv_mr *mr;
	struct duo d;
	struct ep a;
	uint8_t *mem;
	int status, round, held = 0;
	siginfo_t si;

#if defined(__SANITIZE_THREAD__)
	/* TSan runs no thread in the child of a threaded process: after the
	 * first round this one has softhca's engine thread */
	rounds = 1;
#endif
	for (round = 0; round < rounds; round++) {
		duo_fork(&d, writer, &msg);
		ep_default_opts(&o, IBV_QPT_RC);
		ep_open_remote(&a, &o, d.fd);
		ASSERT_EQ(posix_memalign((void **)&mem, 4096, 4 * BIG), 0);
		memset(mem, 0, 4 * BIG);
		mr = ibv_reg_mr(a.pd, mem, 4 * BIG,
				IBV_ACCESS_LOCAL_WRITE |
					IBV_ACCESS_REMOTE_WRITE);
		ASSERT(mr != NULL);
		t.addr = (uintptr_t)mem;
		t.rkey = mr->rkey;
		t.len = 4 * BIG;
		xwrite(d.fd, &t, sizeof(t));
		duo_expect(d.fd, 'u');
		wait_written((const uint64_t *)mem, 4 * BIG / 8);
		usleep(1000 * (unsigned int)(round % 4));
		ASSERT_EQ(kill(d.pid, SIGKILL), 0);
		if (zombie) {	/* dead, not reaped: WNOWAIT */
			ASSERT_EQ(waitid(P_PID, (id_t)d.pid, &si,
					 WEXITED | WNOWAIT), 0);
			held += lanes_of(d.pid) > 0;
		} else {
			ASSERT_EQ(waitpid(d.pid, &status, 0), d.pid);
			ASSERT(WIFSIGNALED(status));
		}
		ASSERT_EQ(ibv_dereg_mr(mr), 0);
		if (zombie) {
			ASSERT_EQ(waitpid(d.pid, &status, 0), d.pid);
			ASSERT(WIFSIGNALED(status));
		}
		close(d.fd);
		free(mem);
		ep_destroy(&a);
	}
	return held;
}

/*
 * A writer of 4 MiB messages spends most of its time inside a copy,
 * holding a lane; killed there (and reaped), it holds the lane still
 * until the owner's drain sees its pid gone: dereg returns all the same.
 */
TEST(dereg_after_writer_killed)
{
	dereg_after_kill(false, 3);
}

/*
 * The same writer killed and left a zombie while the owner deregisters:
 * a zombie's lane is a dead process's (common/proc.c), not one to wait
 * for until its parent (here, the owner itself, after the dereg) reaps
 * it.  Up to 8 rounds, until one killed the writer inside a copy.
 */
TEST(dereg_after_writer_killed_unreaped)
{
	int rounds, held = 0, max = 8;

#if defined(__SANITIZE_THREAD__)
	max = 1;	/* as dereg_after_kill: one round */
#endif
	for (rounds = 0; rounds < max && !held; rounds++)
		held = dereg_after_kill(true, 1);
	if (max > 1)
		ASSERT_GT(held, 0);
}
