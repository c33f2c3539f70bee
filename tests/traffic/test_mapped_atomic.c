// SPDX-License-Identifier: MIT
/*
 * RDMA atomics from many processes on one word (issue 13): N processes
 * x M FETCH_ADDs give exactly N*M, on the mapped path (the CPU's atomic
 * instructions on our mapping of the owner's word) mixed with the owner's
 * own __atomic_fetch_add on the word, and with half the processes on the
 * CMA path (SOFTHCA_MAP=0: read, add, write under the host's lock stripe)
 * and half mapped, which the same stripe keeps atomic with each other.
 * Each process checks that the originals its adds return strictly
 * increase (others add in between, nobody subtracts).
 */
#include <unistd.h>

#include "harness.h"
#include "ep.h"

#define NPROC	4
#define M	1000
#define WORD	256		/* the word's offset in the owner's buffer */

/* M FETCH_ADDs of 1 on the owner's word; every original is larger than
 * the one before (others add in between, never subtract). */
static void adder(int fd, void *arg)
{
	struct ibv_send_wr wr, *bad;
	struct ibv_sge sge;
	struct ep_opts o;
	uint64_t prev = 0, got, addr;
	uint32_t rkey;
	struct ep b;
	int i;

	setenv("SOFTHCA_MAP", arg ? "0" : "1", 1);
	ep_default_opts(&o, IBV_QPT_RC);
	o.buf_size = 4096;
	ep_open_remote(&b, &o, fd);
	xread(fd, &addr, sizeof(addr));
	xread(fd, &rkey, sizeof(rkey));
	duo_expect(fd, 'g');
	for (i = 0; i < M; i++) {
		memset(&wr, 0, sizeof(wr));
		sge.addr = (uintptr_t)b.buf;
		sge.length = 8;
		sge.lkey = b.mr->lkey;
		wr.wr_id = (uint64_t)i;
		wr.sg_list = &sge;
		wr.num_sge = 1;
		wr.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
		wr.send_flags = IBV_SEND_SIGNALED;
		wr.wr.atomic.remote_addr = addr;
		wr.wr.atomic.rkey = rkey;
		wr.wr.atomic.compare_add = 1;
		ASSERT_EQ(ibv_post_send(b.qp, &wr, &bad), 0);
		ep_expect(b.scq, b.qp, (uint64_t)i, IBV_WC_SUCCESS);
		memcpy(&got, b.buf, 8);
		if (i)
			ASSERT_GT(got, prev);
		prev = got;
	}
	duo_signal(fd, 'd');
	duo_expect(fd, 'q');
	ep_destroy(&b);
}

/* NPROC adders (cma_mask: which on the CMA path), the owner adding M
 * itself when own_adds: the word ends at exactly the sum. */
static void many_adders(unsigned int cma_mask, bool own_adds)
{
	struct ibv_mr *mr[NPROC];
	struct ep_opts o;
	struct duo d[NPROC];
	struct ep a[NPROC];
	uint64_t *w, expect, addr, own = 0;
	uint8_t *mem;
	int i;

	/* the owner maps its memory, whatever the environment says */
	setenv("SOFTHCA_MAP", "1", 1);
	/* all forks first: a child decides its own SOFTHCA_MAP */
	for (i = 0; i < NPROC; i++)
		duo_fork(&d[i], adder,
			 (cma_mask >> i) & 1 ? (void *)1 : NULL);
	ep_default_opts(&o, IBV_QPT_RC);
	o.buf_size = 4096;
	/* one word, registered in each QP's PD (MRs over the same page) */
	ASSERT_EQ(posix_memalign((void **)&mem, 4096, 4096), 0);
	memset(mem, 0, 4096);
	w = (uint64_t *)(mem + WORD);
	addr = (uintptr_t)w;
	for (i = 0; i < NPROC; i++) {
		ep_open_remote(&a[i], &o, d[i].fd);
		mr[i] = ibv_reg_mr(a[i].pd, mem, 4096,
				   IBV_ACCESS_LOCAL_WRITE |
					   IBV_ACCESS_REMOTE_WRITE |
					   IBV_ACCESS_REMOTE_ATOMIC);
		ASSERT(mr[i] != NULL);
		xwrite(d[i].fd, &addr, sizeof(addr));
		xwrite(d[i].fd, &mr[i]->rkey, sizeof(mr[i]->rkey));
	}
	for (i = 0; i < NPROC; i++)
		duo_signal(d[i].fd, 'g');
	/* the owner adds as long as any adder still runs */
	for (i = 0; i < NPROC; i++) {
		while (own_adds && !ep_readable(d[i].fd, 0)) {
			int k;

			for (k = 0; k < 64; k++)
				__atomic_fetch_add(w, 1, __ATOMIC_SEQ_CST);
			own += 64;
		}
		duo_expect(d[i].fd, 'd');
	}
	if (own_adds)
		ASSERT_GT(own, 0);
	expect = (uint64_t)NPROC * M + own;
	ASSERT_EQ(__atomic_load_n(w, __ATOMIC_SEQ_CST), expect);
	for (i = 0; i < NPROC; i++) {
		duo_signal(d[i].fd, 'q');
		duo_wait(&d[i]);
		ASSERT_EQ(ibv_dereg_mr(mr[i]), 0);
		ep_destroy(&a[i]);
	}
	free(mem);
}

TEST(fetch_add_many_processes_mapped_and_own)
{
	many_adders(0, true);
}

TEST(fetch_add_many_processes_mapped_and_cma)
{
	many_adders(0x5, false);
}
