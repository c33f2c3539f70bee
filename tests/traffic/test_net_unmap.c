// SPDX-License-Identifier: MIT
/*
 * A send buffer is the application's again once its WQE completed
 * (ibv_post_send(3)): it may deregister and unmap it at once, and softhca
 * reads nothing of it any more.  On the net path an RC packet of 512 bytes
 * or more references the application's memory until the socket takes it
 * (net/transport.c COPY_BELOW); a resend (go-back-N) may still be queued,
 * unwritten, when the ACK of an earlier copy arrives and the WQE
 * completes.  Written after the unmap, it read unmapped memory: EFAULT,
 * and the connection was reset (every QP on it with it).
 *
 * Resends are induced from the receiving process: it delays every packet
 * it sends by 6 ms (SOFTHCA_FAULTS delay), the sender's ACK timer is
 * ~4 ms, so each window is sent again while its ACKs are on their way.
 * The sending process's own fault is "stall" only (now and then its
 * connection takes nothing for 20 ms, as a socket a slow peer keeps full;
 * the other faults copy every payload, which hides the case): a resend
 * caught by a stall is still queued when the first copy's ACK comes.  Two
 * QPs share the connection, each with windows of 64 messages of 64 KiB.
 * Each buffer is unmapped as soon as its WQE completes, at an address
 * that is never mapped again in the run (a reused one would hide a late
 * read), then deregistered.  Every WQE must succeed and the sender's
 * connection must never have been reset (conn_resets in `softhca stat`).
 * Without the release (transport.c release_head) every run fails: the
 * resend is written from the unmapped buffer, EFAULT, the connection
 * reset.  Without the stall the race is the machine's: main failed about
 * half its runs on a loaded machine, none on an idle one.
 */
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/wait.h>

#include "harness.h"
#include "ep.h"

#define proc_counter(pid, name) ep_stat_counter(SOFTHCA_TOOL, pid, name)

#define MSG	(64u << 10)
#define WIN	64		/* WQEs posted at once: the net window */
#define NQP	2		/* QPs on the one connection */
#define RQ	(2 * WIN)	/* receives posted: no RNR NAK */
#define ROUNDS	32

struct rx_arg {
	bool send;
	uint64_t total;		/* SEND: receives to complete per QP */
};

struct rx_report {
	uint64_t ok;
	uint32_t status;	/* the first bad one, or IBV_WC_SUCCESS */
};

/* One completion of any of n CQs (fails after ~10 s). */
static void poll_any(struct ep *e, int n, bool recv, struct ibv_wc *wc,
		     int *which)
{
	struct timespec t0, t;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		for (int q = 0; q < n; q++) {
			int got = ibv_poll_cq(recv ? e[q].rcq : e[q].scq, 1,
					      wc);

			ASSERT_GE(got, 0);
			if (got) {
				*which = q;
				return;
			}
		}
		clock_gettime(CLOCK_MONOTONIC, &t);
		if (t.tv_sec - t0.tv_sec > 10)
			harness_fail(__FILE__, __LINE__, "no completion in "
				     "10 s");
		sched_yield();
	}
}

/* The receiver: its packets (ACKs) delayed; with SENDs, it keeps RQ
 * receives posted on each QP until total have completed there. */
static void receiver(int fd, void *arg)
{
	const struct rx_arg *ra = arg;
	struct rx_report rep = { 0, IBV_WC_SUCCESS };
	uint64_t got[NQP] = { 0 };
	struct ep_opts o;
	struct ibv_wc wc;
	struct ep b[NQP];
	int q, i;

	setenv("SOFTHCA_FAULTS", "delay=1,delay_ms=6,seed=7", 1);
	ep_default_opts(&o, IBV_QPT_RC);
	o.buf_size = (size_t)RQ * MSG;
	o.max_recv_wr = RQ;
	for (q = 0; q < NQP; q++) {
		ep_open_remote(&b[q], &o, fd);
		for (i = 0; ra->send && i < RQ; i++)
			ASSERT_EQ(ep_post_recv(&b[q], (uint64_t)i,
					       (uint64_t)i * MSG, MSG), 0);
	}
	duo_signal(fd, 'r');
	while (ra->send && rep.ok < ra->total * NQP) {
		poll_any(b, NQP, true, &wc, &q);
		if (wc.status != IBV_WC_SUCCESS) {
			rep.status = wc.status;
			break;
		}
		rep.ok++;
		if (++got[q] + RQ <= ra->total)
			ASSERT_EQ(ep_post_recv(&b[q], wc.wr_id,
					       wc.wr_id * MSG, MSG), 0);
	}
	xwrite(fd, &rep, sizeof(rep));
	duo_expect(fd, 'q');
	for (q = 0; q < NQP; q++)
		ep_destroy(&b[q]);
}

static void unmap_after_completion(bool send)
{
	struct rx_arg ra = { send, (uint64_t)ROUNDS * WIN };
	size_t span = (size_t)ROUNDS * NQP * WIN * MSG;
	static struct ibv_mr *mr[NQP][WIN];
	long long resends = 0;
	struct rx_report rep;
	struct ep a[NQP];
	struct ep_opts o;
	struct ibv_wc wc;
	uint8_t *va, *p;
	struct duo d;
	int round, q, i, done;

	setenv("SOFTHCA_NET", "1", 1);
	setenv("SOFTHCA_MAP", "0", 1);
	/* the run's buffers, each at an address of its own */
	va = mmap(NULL, span, PROT_NONE,
		  MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	ASSERT(va != MAP_FAILED);
	duo_fork(&d, receiver, &ra);
	setenv("SOFTHCA_FAULTS", "stall=0.01,stall_ms=20,seed=3", 1);
	ep_default_opts(&o, IBV_QPT_RC);
	o.buf_size = MSG;
	o.max_send_wr = WIN;
	o.timeout = 10;		/* ~4 ms: sent again before the ACK comes */
	for (q = 0; q < NQP; q++)
		ep_open_remote(&a[q], &o, d.fd);
	duo_expect(d.fd, 'r');
	p = va;
	for (round = 0; round < ROUNDS; round++) {
		for (i = 0; i < WIN; i++) {
			for (q = 0; q < NQP; q++, p += MSG) {
				struct ibv_send_wr wr, *bad;
				struct ibv_sge sge;

				ASSERT(mmap(p, MSG, PROT_READ | PROT_WRITE,
					    MAP_FIXED | MAP_PRIVATE |
						    MAP_ANONYMOUS,
					    -1, 0) == p);
				memset(p, (int)(round + i) | 1, MSG);
				mr[q][i] = ibv_reg_mr(a[q].pd, p, MSG,
						      IBV_ACCESS_LOCAL_WRITE);
				ASSERT(mr[q][i] != NULL);
				memset(&wr, 0, sizeof(wr));
				sge.addr = (uintptr_t)p;
				sge.length = MSG;
				sge.lkey = mr[q][i]->lkey;
				wr.wr_id = (uint64_t)i;
				wr.sg_list = &sge;
				wr.num_sge = 1;
				wr.send_flags = IBV_SEND_SIGNALED;
				wr.opcode = send ? IBV_WR_SEND :
						   IBV_WR_RDMA_WRITE;
				wr.wr.rdma.remote_addr =
					a[q].peer.addr + (uint64_t)i * MSG;
				wr.wr.rdma.rkey = a[q].peer.rkey;
				ASSERT_EQ(ibv_post_send(a[q].qp, &wr, &bad),
					  0);
			}
		}
		for (done = 0; done < NQP * WIN; done++) {
			uint8_t *m;

			poll_any(a, NQP, false, &wc, &q);
			if (wc.status == IBV_WC_RETRY_EXC_ERR &&
			    !proc_counter(getpid(), "conn_resets")) {
				kill(d.pid, SIGKILL);
				waitpid(d.pid, NULL, 0);
				SKIP("the ACKs came later than 8 timeouts (a "
				     "loaded machine): the QP ran out of "
				     "retries, the connection was never "
				     "reset");
			}
			if (wc.status != IBV_WC_SUCCESS)
				harness_fail(__FILE__, __LINE__,
					     "round %d: QP %d's WQE %llu "
					     "ended %s", round, q,
					     (unsigned long long)wc.wr_id,
					     ibv_wc_status_str(wc.status));
			/* the buffer is the application's again: gone at
			 * once (an MR outlives its memory's mapping), its
			 * MR after */
			m = mr[q][wc.wr_id]->addr;
			ASSERT(mmap(m, MSG, PROT_NONE,
				    MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS |
					    MAP_NORESERVE,
				    -1, 0) == m);
			ASSERT_EQ(ibv_dereg_mr(mr[q][wc.wr_id]), 0);
		}
	}
	for (q = 0; q < NQP; q++)
		resends += ep_stat_qp_counter(SOFTHCA_TOOL, getpid(),
					      a[q].qp->qp_num, "retrans_pkts");
	printf("  %d rounds of %d x %u %s of %u KiB, %lld go-back-N "
	       "resends, %lld stalls\n", ROUNDS, NQP, WIN,
	       send ? "SENDs" : "WRITEs", MSG >> 10, resends,
	       proc_counter(getpid(), "faults_injected"));
	ASSERT_EQ(proc_counter(getpid(), "conn_resets"), 0);
	ep_net_check();
	xread(d.fd, &rep, sizeof(rep));
	duo_signal(d.fd, 'q');
	duo_wait(&d);
	ASSERT_EQ(rep.status, IBV_WC_SUCCESS);
	ASSERT_U64_EQ(rep.ok, send ? ra.total * NQP : 0);
	for (q = 0; q < NQP; q++)
		ep_destroy(&a[q]);
	munmap(va, span);
}

TEST(write_buffer_unmapped_after_completion)
{
	unmap_after_completion(false);
}

TEST(send_buffer_unmapped_after_completion)
{
	unmap_after_completion(true);
}
