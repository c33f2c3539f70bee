// SPDX-License-Identifier: MIT
/*
 * Deregistration against a peer on the net path (issue 13, as hardware
 * gives it): once ibv_dereg_mr returns, the responder neither writes nor
 * reads the old range any more.  The net path's responder reaches its
 * own registered memory through the same access lanes as same-host
 * peers (engine/responder.c shca_respond_hold): a WRITE's middle packets
 * received straight into place (net/conn.c read_placed) and each train
 * of READ responses hold one, so the drain of ibv_dereg_mr waits for
 * them; none is held between two reads of the socket, so a peer that
 * stops in the middle of a WRITE keeps no deregistration waiting, and
 * READ responses queued behind a full socket are given a copy by the
 * drain, so a peer that stops reading keeps none waiting either.
 *
 * Every case runs SOFTHCA_NET=1 (both processes: the writer or reader is
 * forked) and checks that TCP carried the bytes.  The owner's memory
 * outlives the MR: the MR is the middle of a larger mapping it keeps, so
 * a byte that lands after dereg lands in memory still mapped and shows.
 *
 * Two cases catch the responder in the middle of its copy for certain: a
 * page of the MR is left out (MADV_DONTNEED) and watched with a
 * userfaultfd, so the engine thread that copies into or out of it stops
 * there until the test supplies the page.  The test then deregisters from
 * another thread and supplies the page only once dereg has returned, or,
 * while dereg has not, after a bounded number of looks (the fix makes it
 * wait: dereg cannot return first).  Supplied after dereg returned, the
 * page holds what the owner wrote after dereg; the responder must not
 * write over it, nor send it in a READ that succeeds.  A third does the
 * same on the requester's side: a READ's response placed into the
 * requester's own MR (its L_Key) stops at a missing page while the
 * requester deregisters that MR (net/transport.c local_hold).
 */
#include <signal.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/wait.h>

#include "harness.h"
#include "ep.h"
#include "uffd.h"

#define PAGE	UFFD_PAGE
#define FILL	0xee	/* what the owner writes after dereg returned */
#define OLD	0x11	/* the MR's bytes before */
#define DATA	0x22	/* what the peer writes */

struct target {
	uint64_t addr;
	uint32_t rkey;
	uint32_t len;
	uint32_t msg;		/* the peer's message size */
};

/* Both processes on the net path, the owner's MR left where the program
 * put it (SOFTHCA_MAP=0: no segment, so a userfaultfd on it stays). */
static void net_env(bool map)
{
	setenv("SOFTHCA_NET", "1", 1);
	setenv("SOFTHCA_MAP", map ? "1" : "0", 1);
}

/* The owner's memory: len bytes in the middle of a mapping of 3 * len. */
static uint8_t *owner_mem(size_t len, uint8_t **map)
{
	uint8_t *m = mmap(NULL, 3 * len, PROT_READ | PROT_WRITE,
			  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	ASSERT(m != MAP_FAILED);
	*map = m;
	memset(m, OLD, 3 * len);
	return m + len;
}

/* The first k < len with p[k] != b, or -1 (p and len 8-byte aligned;
 * read a word at a time: the engine thread may be writing it). */
static int64_t find_not(const uint8_t *p, size_t len, uint8_t b)
{
	const uint64_t *w = (const uint64_t *)p;
	uint64_t all = 0x0101010101010101ull * b;

	for (size_t i = 0; i < len / 8; i++) {
		uint64_t v = __atomic_load_n(&w[i], __ATOMIC_RELAXED);

		if (v != all)
			for (size_t k = 0; k < 8; k++)
				if (((const uint8_t *)&v)[k] != b)
					return (int64_t)(i * 8 + k);
	}
	return -1;
}

/*
 * Deregister while the responder waits for the page at page: true when
 * dereg returned before the page was supplied (then supplied with FILL,
 * and the rest of the MR filled too: all written after dereg returned);
 * false when it still waited after a bounded number of looks (the page
 * supplied with OLD, dereg joined, then the MR filled with FILL).
 */
static bool dereg_at_fault(int ufd, struct ibv_mr *mr, uint8_t *mem,
			   size_t len, uint64_t page)
{
	struct dereg d;
	bool first;

	dereg_start(&d, mr);
	first = dereg_returns_soon(&d);
	printf("  dereg %s the responder's copy\n",
	       first ? "returned before" : "waited for");
	if (first) {
		memset(mem, FILL, page - (uintptr_t)mem);
		memset((void *)(uintptr_t)(page + PAGE), FILL,
		       (uintptr_t)mem + len - page - PAGE);
		uffd_supply(ufd, page, FILL);
	} else {
		uffd_supply(ufd, page, OLD);
	}
	dereg_join(&d);
	if (!first)
		memset(mem, FILL, len);
	return first;
}

/* ------------------------------------------------------------------ */
/* The peer                                                            */

/*
 * One side of the pair: WRITEs (or READs, arg) of t.msg bytes into the
 * owner's MR, one at a time, round it, until one fails or max went ('u'
 * says the first was posted).
 * Reports: the messages that succeeded, the first failure's status
 * (IBV_WC_SUCCESS if none), and how many successful READs held FILL.
 */
struct report {
	uint64_t ok;
	uint32_t status;
	uint32_t tainted;
};

struct peer_arg {
	bool read;
	uint64_t max;		/* messages at most */
	uint8_t timeout;	/* the QP's; 0: 10 (~4 ms: a READ cut short
				 * is asked again soon) */
};

static void peer(int fd, void *arg)
{
	const struct peer_arg *pa = arg;
	struct report rep = { 0, IBV_WC_SUCCESS, 0 };
	struct ibv_send_wr wr, *bad;
	struct ibv_sge sge;
	struct target t;
	struct ep_opts o;
	struct ibv_wc wc;
	struct ep b;
	uint64_t i;

	xread(fd, &t, sizeof(t));
	ep_default_opts(&o, IBV_QPT_RC);
	o.buf_size = t.msg;
	o.timeout = pa->timeout ? pa->timeout : 10;
	ep_open_remote(&b, &o, fd);
	memset(b.buf, DATA, t.msg);
	for (i = 0; i < pa->max; i++) {
		if (pa->read)
			memset(b.buf, 0, t.msg);
		memset(&wr, 0, sizeof(wr));
		sge.addr = (uintptr_t)b.buf;
		sge.length = t.msg;
		sge.lkey = b.mr->lkey;
		wr.wr_id = i;
		wr.sg_list = &sge;
		wr.num_sge = 1;
		wr.opcode = pa->read ? IBV_WR_RDMA_READ : IBV_WR_RDMA_WRITE;
		wr.send_flags = IBV_SEND_SIGNALED;
		wr.wr.rdma.remote_addr = t.addr + (i * t.msg) % t.len;
		wr.wr.rdma.rkey = t.rkey;
		ASSERT_EQ(ibv_post_send(b.qp, &wr, &bad), 0);
		if (!i)
			duo_signal(fd, 'u');
		ep_poll(b.scq, &wc, 1);
		if (wc.status != IBV_WC_SUCCESS) {
			rep.status = wc.status;
			break;
		}
		rep.ok++;
		if (pa->read && memchr(b.buf, FILL, t.msg))
			rep.tainted++;
	}
	ep_net_check();
	xwrite(fd, &rep, sizeof(rep));
	duo_expect(fd, 'q');
	ep_destroy(&b);
}

/* The owner's side: the pair, and its MR over mem handed to the peer. */
static struct ibv_mr *owner_open(struct ep *a, struct duo *d, uint8_t *mem,
				 uint32_t len, uint32_t msg, int access)
{
	struct target t;
	struct ep_opts o;
	struct ibv_mr *mr;

	ep_default_opts(&o, IBV_QPT_RC);
	o.buf_size = PAGE;
	ep_create(a, &o);
	mr = ibv_reg_mr(a->pd, mem, len, access);
	ASSERT(mr != NULL);
	t.addr = (uintptr_t)mem;
	t.rkey = mr->rkey;
	t.len = len;
	t.msg = msg;
	xwrite(d->fd, &t, sizeof(t));
	ep_exchange(d->fd, &a->self, &a->peer);
	ep_connect(a, &o);
	return mr;
}

static void owner_close(struct ep *a, struct duo *d, struct report *rep)
{
	xread(d->fd, rep, sizeof(*rep));
	duo_signal(d->fd, 'q');
	duo_wait(d);
	ep_destroy(a);
}

/* ------------------------------------------------------------------ */
/* Cases                                                               */

/*
 * A 1 MiB WRITE whose middle packets go straight into place (more than
 * 64 KiB: conn.c's placement), one page in the middle missing: the
 * engine's receive stops there.  dereg must wait until it has gone on;
 * what the owner writes after dereg returned stays.
 */
TEST(placed_write_lands_before_dereg_returns)
{
	const uint32_t len = 1u << 20;
	struct peer_arg pa = { false, 1, 0 };
	uint8_t *map, *mem;
	struct ibv_mr *mr;
	struct report rep;
	uint64_t page;
	struct duo d;
	struct ep a;
	int64_t k;
	int ufd;

	net_env(false);
	ufd = uffd_open();
	mem = owner_mem(len, &map);
	page = (uintptr_t)mem + len / 2;
	ASSERT_EQ(madvise((void *)(uintptr_t)page, PAGE, MADV_DONTNEED), 0);
	duo_fork(&d, peer, &pa);
	mr = owner_open(&a, &d, mem, len, len,
			IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	uffd_watch(ufd, mem, len);
	duo_expect(d.fd, 'u');
	ASSERT_EQ(uffd_fault(ufd), page);
	dereg_at_fault(ufd, mr, mem, len, page);
	/* the WRITE ends (refused, or it had landed whole before dereg
	 * returned); then nothing of the range may have changed */
	owner_close(&a, &d, &rep);
	k = find_not(mem, len, FILL);
	if (k >= 0)
		harness_fail(__FILE__, __LINE__, "byte %lld of the old range "
			     "is %#x, written after ibv_dereg_mr returned",
			     (long long)k, mem[k]);
	ASSERT_EQ(find_not(map, len, OLD), -1);
	ASSERT_EQ(find_not(mem + len, len, OLD), -1);
	close(ufd);
	munmap(map, 3 * len);
}

/*
 * A 64 KiB READ whose last page is missing: the engine's copy of the
 * last response stops there.  dereg must wait until it has gone on; a
 * READ that succeeds carries no byte written after dereg returned, and
 * the next READ is refused.
 */
TEST(read_response_copied_before_dereg_returns)
{
	const uint32_t len = 64u << 10;
	/* ~1 s: the responder stops for a while at the missing page */
	struct peer_arg pa = { true, 2, 18 };
	uint8_t *map, *mem;
	struct ibv_mr *mr;
	struct report rep;
	uint64_t page;
	struct duo d;
	struct ep a;
	int ufd;

	net_env(false);
	ufd = uffd_open();
	mem = owner_mem(len, &map);
	page = (uintptr_t)mem + len - PAGE;
	ASSERT_EQ(madvise((void *)(uintptr_t)page, PAGE, MADV_DONTNEED), 0);
	duo_fork(&d, peer, &pa);
	mr = owner_open(&a, &d, mem, len, len,
			IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ);
	uffd_watch(ufd, mem, len);
	duo_expect(d.fd, 'u');
	ASSERT_EQ(uffd_fault(ufd), page);
	dereg_at_fault(ufd, mr, mem, len, page);
	owner_close(&a, &d, &rep);
	printf("  %llu READs succeeded, then status %s\n",
	       (unsigned long long)rep.ok,
	       ibv_wc_status_str((enum ibv_wc_status)rep.status));
	ASSERT_EQ(rep.tainted, 0);
	/* the second READ was posted after dereg returned */
	ASSERT_LE(rep.ok, 1);
	ASSERT_EQ(rep.status, IBV_WC_REM_ACCESS_ERR);
	close(ufd);
	munmap(map, 3 * len);
}

/* A READ's responder: its buffer of len bytes of DATA, no more. */
static void read_target(int fd, void *arg)
{
	const uint32_t *len = arg;
	struct ep_opts o;
	struct ep b;

	ep_default_opts(&o, IBV_QPT_RC);
	o.buf_size = *len;
	ep_open_remote(&b, &o, fd);
	memset(b.buf, DATA, *len);
	duo_signal(fd, 'u');
	duo_expect(fd, 'q');
	ep_destroy(&b);
}

/*
 * A requester whose READ of *len bytes into its own MR over mem (watched
 * by ufd from here on, the page at page left out) is under way towards
 * read_target; returns the MR.
 */
static struct ibv_mr *read_into_watched(struct ep *a, struct duo *d,
					uint8_t *mem, uint32_t *len, int ufd,
					uint64_t page)
{
	struct ibv_send_wr wr, *bad;
	struct ibv_sge sge;
	struct ep_opts o;
	struct ibv_mr *mr;

	ASSERT_EQ(madvise((void *)(uintptr_t)page, PAGE, MADV_DONTNEED), 0);
	duo_fork(d, read_target, len);
	ep_default_opts(&o, IBV_QPT_RC);
	o.buf_size = PAGE;
	o.timeout = 18;		/* ~1 s: the copy stops for a while */
	ep_create(a, &o);
	mr = ibv_reg_mr(a->pd, mem, *len, IBV_ACCESS_LOCAL_WRITE);
	ASSERT(mr != NULL);
	ep_exchange(d->fd, &a->self, &a->peer);
	ep_connect(a, &o);
	duo_expect(d->fd, 'u');
	uffd_watch(ufd, mem, *len);
	memset(&wr, 0, sizeof(wr));
	sge.addr = (uintptr_t)mem;
	sge.length = *len;
	sge.lkey = mr->lkey;
	wr.wr_id = 7;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_RDMA_READ;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.wr.rdma.remote_addr = a->peer.addr;
	wr.wr.rdma.rkey = a->peer.rkey;
	ASSERT_EQ(ibv_post_send(a->qp, &wr, &bad), 0);
	return mr;
}

/*
 * The requester's side (transport.c place_read): a 64 KiB READ's
 * responses are placed in the requester's own MR, a page in its middle
 * missing, so the engine's copy of one response stops there.  The
 * requester deregisters that MR: dereg must wait until the copy has gone
 * on; what the owner writes after dereg returned stays (the responses
 * still to come are refused: the WQE ends LOC_PROT_ERR, unless all had
 * landed before dereg returned).
 */
TEST(read_placement_lands_before_local_dereg_returns)
{
	uint32_t len = 64u << 10;
	uint8_t *map, *mem;
	struct ibv_mr *mr;
	struct ibv_wc wc;
	uint64_t page;
	struct duo d;
	struct ep a;
	int64_t k;
	int ufd;

	net_env(false);
	ufd = uffd_open();
	mem = owner_mem(len, &map);
	page = (uintptr_t)mem + len / 2;
	mr = read_into_watched(&a, &d, mem, &len, ufd, page);
	ASSERT_EQ(uffd_fault(ufd), page);
	dereg_at_fault(ufd, mr, mem, len, page);
	ep_poll(a.scq, &wc, 1);
	printf("  the READ ended %s\n", ibv_wc_status_str(wc.status));
	if (wc.status != IBV_WC_SUCCESS)
		ASSERT_EQ(wc.status, IBV_WC_LOC_PROT_ERR);
	ep_net_check();
	duo_signal(d.fd, 'q');
	duo_wait(&d);
	ep_destroy(&a);
	k = find_not(mem, len, FILL);
	if (k >= 0)
		harness_fail(__FILE__, __LINE__, "byte %lld of the old range "
			     "is %#x, written after ibv_dereg_mr returned",
			     (long long)k, mem[k]);
	ASSERT_EQ(find_not(map, len, OLD), -1);
	ASSERT_EQ(find_not(mem + len, len, OLD), -1);
	close(ufd);
	munmap(map, 3 * len);
}

/* ibv_modify_qp to the error state in a thread of its own. */
struct to_err {
	pthread_t t;
	struct ibv_qp *qp;
	int ret;
	bool done;
};

static void *to_err_main(void *arg)
{
	struct to_err *e = arg;
	struct ibv_qp_attr attr;

	memset(&attr, 0, sizeof(attr));
	attr.qp_state = IBV_QPS_ERR;
	e->ret = ibv_modify_qp(e->qp, &attr, IBV_QP_STATE);
	__atomic_store_n(&e->done, true, __ATOMIC_RELEASE);
	return NULL;
}

/*
 * A 1 MiB READ, its placement stopped at a missing page past the first
 * 256 KiB (which one read takes the usual way), and the requester's QP
 * moved to the error state from another thread: the flush must not
 * overtake the bytes under way, so once the WQE's completion is seen,
 * success or flushed, nothing lands in its buffer any more.  Two things
 * make the modify wait, each enough alone: the placement holds the QP's
 * lock from its checks to its last byte (net/transport.c read_place), and
 * a modify to the error state waits for the engine's batch in progress
 * (qp_modify.c sync_before_error); with both taken out this fails (byte
 * 786432 written after the flush completion).  Had the modify returned
 * while the receive was stopped, the completion is taken and the buffer
 * filled before the page is supplied, and the bytes received after that
 * show.
 */
TEST(read_placement_lands_before_flush)
{
	uint32_t len = 1u << 20;
	struct to_err e = { 0 };
	uint8_t *map, *mem;
	struct ibv_mr *mr;
	struct ibv_wc wc;
	uint64_t page;
	struct duo d;
	struct ep a;
	bool first;
	int64_t k;
	int ufd, i;

	net_env(false);
	ufd = uffd_open();
	mem = owner_mem(len, &map);
	/* past the first 256 KiB, which one read takes the usual way
	 * (copied under the lock anyway): the placement's receive stops */
	page = (uintptr_t)mem + 3 * (len / 4);
	mr = read_into_watched(&a, &d, mem, &len, ufd, page);
	ASSERT_EQ(uffd_fault(ufd), page);
	e.qp = a.qp;
	ASSERT_EQ(pthread_create(&e.t, NULL, to_err_main, &e), 0);
	for (i = 0; i < 200 && !__atomic_load_n(&e.done, __ATOMIC_ACQUIRE);
	     i++)
		usleep(1000);
	first = __atomic_load_n(&e.done, __ATOMIC_ACQUIRE);
	printf("  the modify %s the receive\n",
	       first ? "returned before" : "waited for");
	if (first) {
		ep_poll(a.scq, &wc, 1);
		memset(mem, FILL, page - (uintptr_t)mem);
		memset((void *)(uintptr_t)(page + PAGE), FILL,
		       (uintptr_t)mem + len - page - PAGE);
		uffd_supply(ufd, page, FILL);
	} else {
		uffd_supply(ufd, page, OLD);
	}
	ASSERT_EQ(pthread_join(e.t, NULL), 0);
	ASSERT_EQ(e.ret, 0);
	if (!first) {
		ep_poll(a.scq, &wc, 1);
		memset(mem, FILL, len);
	}
	printf("  the READ ended %s\n", ibv_wc_status_str(wc.status));
	ASSERT_EQ(wc.wr_id, 7);
	if (wc.status != IBV_WC_SUCCESS)
		ASSERT_EQ(wc.status, IBV_WC_WR_FLUSH_ERR);
	/* whatever was still coming had its chance */
	usleep(100 * 1000);
	k = find_not(mem, len, FILL);
	if (k >= 0)
		harness_fail(__FILE__, __LINE__, "byte %lld of the READ's "
			     "buffer is %#x, written after its completion",
			     (long long)k, mem[k]);
	ASSERT(!first);
	ep_net_check();
	duo_signal(d.fd, 'q');
	duo_wait(&d);
	ASSERT_EQ(ibv_dereg_mr(mr), 0);
	ep_destroy(&a);
	close(ufd);
	munmap(map, 3 * len);
}

/*
 * The loop of issue 13 on the net path: a peer WRITEs 256 KiB messages
 * round a 4 MiB MR (placed), the owner deregisters at some point, fills
 * the range and looks at it again and again (a bounded number of times,
 * then once more after the peer stopped): nothing changes.
 */
static void dereg_while_written(bool map_on)
{
	const uint32_t len = 4u << 20, msg = 256u << 10;
	struct peer_arg pa = { false, 1000000, 0 };
	uint8_t *map, *mem;
	struct ibv_mr *mr;
	struct report rep;
	struct duo d;
	struct ep a;
	int64_t k = -1;
	int look;

	net_env(map_on);
	mem = owner_mem(len, &map);
	duo_fork(&d, peer, &pa);
	mr = owner_open(&a, &d, mem, len, msg,
			IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	duo_expect(d.fd, 'u');
	/* the WRITEs going on: a few laps' worth landed */
	for (look = 0; look < 10000 && find_not(mem, len, DATA) >= 0; look++)
		usleep(1000);
	ASSERT_EQ(ibv_dereg_mr(mr), 0);
	memset(mem, FILL, len);
	for (look = 0; look < 100 && k < 0; look++) {
		k = find_not(mem, len, FILL);
		sched_yield();
	}
	owner_close(&a, &d, &rep);
	if (k < 0)
		k = find_not(mem, len, FILL);
	if (k >= 0)
		harness_fail(__FILE__, __LINE__, "byte %lld of the old range "
			     "is %#x, written after ibv_dereg_mr returned",
			     (long long)k, mem[k]);
	printf("  %llu WRITEs, then status %s\n", (unsigned long long)rep.ok,
	       ibv_wc_status_str((enum ibv_wc_status)rep.status));
	ASSERT_EQ(rep.status, IBV_WC_REM_ACCESS_ERR);
	munmap(map, 3 * len);
}

TEST(dereg_while_written_net)
{
	dereg_while_written(false);
}

TEST(dereg_while_written_net_mapped)
{
	dereg_while_written(true);
}

/*
 * READs of msg bytes round an MR of len in a loop; the owner deregisters
 * and changes the bytes, with the reader stopped (SIGSTOP) over the
 * deregistration if stop: no READ that succeeded holds a changed byte,
 * and the READs end refused.
 */
static void dereg_while_read(uint32_t len, uint32_t msg, bool stop)
{
	/* ~270 ms: a READ cut short by the dereg is asked again then; a
	 * shorter timer can expire on a slow machine (TSan) while the
	 * responses are still coming, and the requester's go-back-N starts
	 * them over until its retries run out (RETRY_EXC_ERR, README) */
	struct peer_arg pa = { true, 1000000, 16 };
	uint8_t *map, *mem;
	struct ibv_mr *mr;
	struct report rep;
	struct duo d;
	struct ep a;

	net_env(true);
	mem = owner_mem(len, &map);
	duo_fork(&d, peer, &pa);
	mr = owner_open(&a, &d, mem, len, msg,
			IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ);
	duo_expect(d.fd, 'u');
	usleep(20000);		/* its READs under way */
	if (stop) {
		ASSERT_EQ(kill(d.pid, SIGSTOP), 0);
		usleep(100000);	/* the socket full, responses queued */
	}
	ASSERT_EQ(ibv_dereg_mr(mr), 0);
	memset(mem, FILL, len);
	if (stop)
		ASSERT_EQ(kill(d.pid, SIGCONT), 0);
	owner_close(&a, &d, &rep);
	printf("  %s%llu READs, then status %s\n",
	       stop ? "dereg returned with the reader stopped; " : "",
	       (unsigned long long)rep.ok,
	       ibv_wc_status_str((enum ibv_wc_status)rep.status));
	ASSERT_EQ(rep.tainted, 0);
	ASSERT_EQ(rep.status, IBV_WC_REM_ACCESS_ERR);
	munmap(map, 3 * len);
}

TEST(dereg_while_read_net)
{
	dereg_while_read(1u << 20, 64u << 10, false);
}

/*
 * A peer that stops reading (SIGSTOP) while READ responses wait in the
 * responder's queue behind a full socket: they reference the owner's
 * memory and hold its lane until the socket takes them (net/transport.c
 * rd_train), and a deregistration gives them a copy of their own first
 * (net/conn.c shca_net_drain_key) instead of waiting for a reader that
 * may never come back.  Let go, the peer gets no byte written after
 * dereg returned: its READ cut short (16 MiB, one READ of the whole MR)
 * is refused when asked again.
 */
TEST(stopped_reader_does_not_block_dereg)
{
	dereg_while_read(16u << 20, 16u << 20, true);
}

/*
 * The writer of stopped_writer_does_not_block_dereg: one WRITE of the
 * whole MR from a buffer whose page at the middle is left out and
 * watched with a userfaultfd that no one answers, so that its engine
 * sends the first half and stops at that page for good ('u' just before
 * the WRITE is posted).  Its own MR unmapped (SOFTHCA_MAP=0: a page of a
 * segment would not go missing); the owner's stays mapped.
 */
static void stalled_writer(int fd, void *arg)
{
	struct ibv_send_wr wr, *bad;
	struct ibv_sge sge;
	struct target t;
	struct ep_opts o;
	struct ep b;
	int ufd;

	(void)arg;
	setenv("SOFTHCA_MAP", "0", 1);
	ufd = uffd_open();
	xread(fd, &t, sizeof(t));
	ep_default_opts(&o, IBV_QPT_RC);
	o.buf_size = t.msg;
	ep_open_remote(&b, &o, fd);
	memset(b.buf, DATA, t.msg);
	ASSERT_EQ(madvise(b.buf + t.msg / 2, PAGE, MADV_DONTNEED), 0);
	uffd_watch(ufd, b.buf + t.msg / 2, PAGE);
	memset(&wr, 0, sizeof(wr));
	sge.addr = (uintptr_t)b.buf;
	sge.length = t.msg;
	sge.lkey = b.mr->lkey;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_RDMA_WRITE;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.wr.rdma.remote_addr = t.addr;
	wr.wr.rdma.rkey = t.rkey;
	/* 'u' first: the post may itself send, and stop at the page */
	duo_signal(fd, 'u');
	ASSERT_EQ(ibv_post_send(b.qp, &wr, &bad), 0);
	for (;;)
		pause();	/* until the owner's SIGKILL */
}

/*
 * A peer that stops in the middle of a WRITE (SIGSTOP: its connection
 * stays, no byte more comes) keeps no deregistration waiting: the
 * responder holds no lane between two reads of its socket.  The WRITE is
 * cut for certain: its source has a page missing at the middle
 * (stalled_writer), so its first byte lands and its last never does.
 * The writer is forked before the owner's first verb: a child of a
 * threaded process runs no thread under TSan.
 */
TEST(stopped_writer_does_not_block_dereg)
{
	const uint32_t len = 32u << 20;
	uint8_t *map, *mem;
	struct ibv_mr *mr;
	struct duo d;
	struct ep a;
	int status, look;

	net_env(true);
	close(uffd_open());	/* none to be had: skipped here */
	mem = owner_mem(len, &map);
	duo_fork(&d, stalled_writer, NULL);
	mr = owner_open(&a, &d, mem, len, len,
			IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	duo_expect(d.fd, 'u');
	/* its WRITE under way: its first half comes, then nothing */
	for (look = 0; look < 100000 &&
	     __atomic_load_n(&mem[0], __ATOMIC_RELAXED) != DATA;
	     look++)
		usleep(100);
	ASSERT_EQ(__atomic_load_n(&mem[0], __ATOMIC_RELAXED), DATA);
	ASSERT_EQ(kill(d.pid, SIGSTOP), 0);
	ep_net_check();
	ASSERT_EQ(ibv_dereg_mr(mr), 0);
	/* its last byte is not in and never will be: the WRITE was cut */
	ASSERT_EQ(__atomic_load_n(&mem[len - 1], __ATOMIC_RELAXED), OLD);
	ASSERT_EQ(kill(d.pid, SIGKILL), 0);
	ASSERT_EQ(waitpid(d.pid, &status, 0), d.pid);
	close(d.fd);
	ep_destroy(&a);
	printf("  dereg returned with the writer stopped mid-WRITE\n");
	munmap(map, 3 * len);
}
