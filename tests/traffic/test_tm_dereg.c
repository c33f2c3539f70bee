// SPDX-License-Identifier: MIT
/*
 * Deregistration against a same-host tag-matching rendezvous: once
 * ibv_dereg_mr returns, nothing of softhca reads the old range.  A RNDV
 * that matches a tag is answered by its sender's own process, which
 * copies the buffer its RVH names (R_Key, address, length: one of its
 * own MRs) into the tag's buffer (shm/xfer.c host_rndv_src, responder.c
 * do_rndv).  That copy holds an access lane of the sender's arena from
 * the R_Key check to its last byte, as every other access of registered
 * memory does, so the sender's ibv_dereg_mr of that MR waits for it.
 *
 * The sender's source is a 64 KiB MR in the middle of a larger mapping,
 * a page in its middle left out and watched with a userfaultfd: the copy
 * stops there (in the thread that posted the SEND).  The test then
 * deregisters from another thread and supplies the page only once dereg
 * has returned, or, while dereg has not, after a bounded number of looks
 * (dereg must not return first).  Supplied after dereg returned, the page
 * and the rest of the range hold what the owner wrote after dereg: none
 * of it may reach the tag's buffer.
 */
#include <arpa/inet.h>
#include <endian.h>
#include <pthread.h>
#include <unistd.h>
#include <infiniband/tm_types.h>
#include <sys/mman.h>

#include "harness.h"
#include "ep.h"
#include "uffd.h"

#define LEN	(64u << 10)
#define TMH	16u
#define RVH	16u
#define TAG	0x77u
#define FILL	0xee	/* what the owner writes after dereg returned */
#define OLD	0x11	/* the MR's bytes before */
#define APPCTX	0x5eedu

/* The receiver's report: the tag's completions and its buffer. */
struct report {
	uint32_t status;	/* the data completion's */
	uint32_t byte_len;
	int64_t first_fill;	/* the first byte of FILL in the buffer */
	int64_t first_other;	/* the first byte neither OLD nor FILL */
};

static int64_t find_byte(const uint8_t *p, size_t len, uint8_t b, bool eq)
{
	for (size_t i = 0; i < len; i++)
		if ((p[i] == b) == eq)
			return (int64_t)i;
	return -1;
}

/* The receiver: an RC QP on a TM SRQ, one tag of LEN bytes. */
static void receiver(int fd, void *arg)
{
	struct ibv_srq_init_attr_ex sa;
	struct ibv_qp_init_attr ia;
	struct ibv_ops_wr wr, *bad = NULL;
	struct report rep;
	struct ibv_qp_attr a;
	struct ibv_sge sge;
	struct ibv_srq *srq;
	struct ep_opts o;
	struct ibv_wc wc;
	struct ep b;
	int i;

	(void)arg;
	ep_default_opts(&o, IBV_QPT_RC);
	o.buf_size = LEN;
	ep_create(&b, &o);
	memset(&sa, 0, sizeof(sa));
	sa.attr.max_wr = 16;
	sa.attr.max_sge = 1;
	sa.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD |
		       IBV_SRQ_INIT_ATTR_CQ | IBV_SRQ_INIT_ATTR_TM;
	sa.srq_type = IBV_SRQT_TM;
	sa.pd = b.pd;
	sa.cq = b.rcq;
	sa.tm_cap.max_num_tags = 4;
	sa.tm_cap.max_ops = 4;
	srq = ibv_create_srq_ex(b.ctx, &sa);
	ASSERT_NOT_NULL(srq);
	ASSERT_EQ(ibv_destroy_qp(b.qp), 0);
	memset(&ia, 0, sizeof(ia));
	ia.send_cq = b.scq;
	ia.recv_cq = b.rcq;
	ia.srq = srq;
	ia.qp_type = IBV_QPT_RC;
	ia.cap.max_send_wr = 8;
	ia.cap.max_send_sge = 1;
	b.qp = ibv_create_qp(b.pd, &ia);
	ASSERT_NOT_NULL(b.qp);
	b.self.qpn = b.qp->qp_num;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
	ASSERT_EQ(ibv_modify_qp(b.qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
				IBV_QP_PORT | IBV_QP_ACCESS_FLAGS), 0);
	ep_exchange(fd, &b.self, &b.peer);
	ep_connect(&b, &o);

	memset(b.buf, 0, LEN);
	sge.addr = (uintptr_t)b.buf;
	sge.length = LEN;
	sge.lkey = b.mr->lkey;
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = 0xadd;
	wr.opcode = IBV_WR_TAG_ADD;
	wr.flags = IBV_OPS_SIGNALED;
	wr.tm.add.recv_wr_id = 0x71;
	wr.tm.add.sg_list = &sge;
	wr.tm.add.num_sge = 1;
	wr.tm.add.tag = TAG;
	wr.tm.add.mask = ~0ull;
	ASSERT_EQ(ibv_post_srq_ops(srq, &wr, &bad), 0);
	ep_poll(b.rcq, &wc, 1);
	ASSERT_EQ(wc.status, IBV_WC_SUCCESS);
	ASSERT_EQ(wc.opcode, IBV_WC_TM_ADD);
	duo_signal(fd, 'u');

	/* the match, then the data (or the data's failure) */
	memset(&rep, 0, sizeof(rep));
	for (i = 0; i < 2; i++) {
		ep_poll(b.rcq, &wc, 1);
		rep.status = wc.status;
		rep.byte_len = wc.byte_len;
		if (wc.status != IBV_WC_SUCCESS)
			break;
	}
	rep.first_fill = find_byte(b.buf, LEN, FILL, true);
	rep.first_other = -1;
	for (i = 0; i < (int)LEN && rep.first_other < 0; i++)
		if (b.buf[i] != OLD && b.buf[i] != FILL)
			rep.first_other = i;
	xwrite(fd, &rep, sizeof(rep));
	duo_expect(fd, 'q');
	ASSERT_EQ(ibv_destroy_qp(b.qp), 0);
	b.qp = NULL;
	ASSERT_EQ(ibv_destroy_srq(srq), 0);
	ep_destroy(&b);
}

/* The sender's SEND of the RNDV, in a thread of its own: on the same
 * host the copy runs in the thread that posts. */
struct sender {
	pthread_t t;
	struct ep *a;
	struct ibv_mr *src;
	enum ibv_wc_status status;
};

static void *send_rndv(void *arg)
{
	struct sender *s = arg;
	uint8_t *p = s->a->buf;
	uint32_t be32 = htonl(APPCTX);
	uint64_t be64 = htobe64(TAG);
	struct ibv_wc wc;

	memset(p, 0, TMH + RVH);
	p[0] = IBV_TMH_RNDV;
	memcpy(p + 4, &be32, 4);
	memcpy(p + 8, &be64, 8);
	be64 = htobe64((uintptr_t)s->src->addr);
	memcpy(p + TMH, &be64, 8);
	be32 = htonl(s->src->rkey);
	memcpy(p + TMH + 8, &be32, 4);
	be32 = htonl(LEN);
	memcpy(p + TMH + 12, &be32, 4);
	ASSERT_EQ(ep_post(s->a, 1, IBV_WR_SEND, 0, TMH + RVH, 0, 0), 0);
	ep_poll(s->a->scq, &wc, 1);
	s->status = wc.status;
	return NULL;
}

TEST(rndv_source_read_before_dereg_returns)
{
	struct sender snd;
	struct report rep;
	struct ep_opts o;
	uint8_t *map, *mem;
	struct ibv_mr *mr;
	struct dereg dr;
	uint64_t page;
	struct duo d;
	struct ep a;
	bool first;
	int ufd;

	/* the same-host path; the sender's MR left where the program put
	 * it (no shared re-backing: the userfaultfd stays on it) */
	unsetenv("SOFTHCA_NET");
	setenv("SOFTHCA_MAP", "0", 1);
	ufd = uffd_open();
	map = mmap(NULL, 3 * LEN, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT(map != MAP_FAILED);
	memset(map, OLD, 3 * LEN);
	mem = map + LEN;
	page = (uintptr_t)mem + LEN / 2;
	ASSERT_EQ(madvise((void *)(uintptr_t)page, UFFD_PAGE, MADV_DONTNEED),
		  0);
	duo_fork(&d, receiver, NULL);
	ep_default_opts(&o, IBV_QPT_RC);
	o.buf_size = UFFD_PAGE;
	ep_open_remote(&a, &o, d.fd);
	mr = ibv_reg_mr(a.pd, mem, LEN, IBV_ACCESS_LOCAL_WRITE |
					       IBV_ACCESS_REMOTE_READ);
	ASSERT(mr != NULL);
	uffd_watch(ufd, mem, LEN);
	duo_expect(d.fd, 'u');

	snd.a = &a;
	snd.src = mr;
	snd.status = IBV_WC_GENERAL_ERR;
	ASSERT_EQ(pthread_create(&snd.t, NULL, send_rndv, &snd), 0);
	ASSERT_EQ(uffd_fault(ufd), page);
	dereg_start(&dr, mr);
	first = dereg_returns_soon(&dr);
	printf("  dereg %s the rendezvous' copy\n",
	       first ? "returned before" : "waited for");
	if (first) {
		/* all written after dereg returned */
		memset(mem, FILL, page - (uintptr_t)mem);
		memset((void *)(uintptr_t)(page + UFFD_PAGE), FILL,
		       (uintptr_t)mem + LEN - page - UFFD_PAGE);
		uffd_supply(ufd, page, FILL);
	} else {
		uffd_supply(ufd, page, OLD);
	}
	dereg_join(&dr);
	if (!first)
		memset(mem, FILL, LEN);
	ASSERT_EQ(pthread_join(snd.t, NULL), 0);
	xread(d.fd, &rep, sizeof(rep));
	duo_signal(d.fd, 'q');
	duo_wait(&d);
	printf("  SEND %s, the tag's data %s (%u bytes)\n",
	       ibv_wc_status_str(snd.status),
	       ibv_wc_status_str((enum ibv_wc_status)rep.status),
	       rep.byte_len);
	if (rep.first_fill >= 0)
		harness_fail(__FILE__, __LINE__, "byte %lld of the tag's "
			     "buffer was read from the source after "
			     "ibv_dereg_mr returned",
			     (long long)rep.first_fill);
	ASSERT_EQ(rep.first_other, -1);
	ASSERT_EQ(snd.status, IBV_WC_SUCCESS);
	ASSERT_EQ(rep.status, IBV_WC_SUCCESS);
	ASSERT_EQ(rep.byte_len, LEN);
	ep_destroy(&a);
	close(ufd);
	munmap(map, 3 * LEN);
}
