// SPDX-License-Identifier: MIT
/*
 * Registered memory that is already shared (issue 13, shm/seg_file.c):
 * a responder's MR over a MAP_SHARED mapping of its own memfd or POSIX
 * shm file.  A memfd sealed against shrinking is shared as it is: the
 * responder's mr_mapped counts it, the requester's WRITE, READ and
 * atomics go through its mapping of the same file (map_xfers, no
 * cma_xfers), and the bytes are in the file itself (read back through a
 * descriptor, not only the registered range).  A file that can shrink
 * (an unsealed memfd, POSIX shm) keeps CMA (mr_cma, cma_xfers), with the
 * same results; shrunk under a peer, the peer's access completes in error
 * and the peer lives on.  A hugetlbfs memfd keeps CMA too.  A System V
 * segment (shmget, removed with IPC_RMID at once, as UCX does) is shared
 * as it is, attached by the peer; a hugetlb one keeps CMA.
 *
 * The responder is the forked process (duo_fork); its MR's address and
 * R_Key go over the socketpair; steps are single bytes.
 */
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "harness.h"
#include "ep.h"

#define FLEN	(1u << 20)	/* the file */
#define W_OFF	0		/* RDMA WRITE lands here */
#define R_OFF	(256u << 10)	/* READ from here */
#define MLEN	(128u << 10)	/* both */
#define A_OFF	(512u << 10)	/* the atomics' word */
#define START	0x1000000000000001ull
#define MR_ACCESS (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | \
		   IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC)

enum kind { MEMFD_SEALED, MEMFD, POSIX_SHM, HUGETLB, SYSV, SYSV_HUGETLB };

#define HUGE_LEN	(2u << 20)	/* the hugetlb kinds' length */

static bool is_sysv(enum kind k)
{
	return k == SYSV || k == SYSV_HUGETLB;
}

/* The length of kind k's memory. */
static size_t kind_len(enum kind k)
{
	return k == HUGETLB || k == SYSV_HUGETLB ? HUGE_LEN : FLEN;
}

struct mr_info {
	uint64_t addr;
	uint32_t rkey;
	int32_t mapped;		/* the responder's mr_mapped moved */
	int64_t file_bytes;	/* ... and its map_file_bytes */
};

/* The process's counter name, as `softhca stat` shows it. */
#define proc_counter(pid, name) ep_stat_counter(SOFTHCA_TOOL, pid, name)

/* make_file's attach of a System V segment, for map_kind */
static void *kept_attach;

/* The file of kind k, FLEN bytes: its descriptor (the responder's); a
 * System V kind: the segment's id, already removed (IPC_RMID: it lives
 * while attached), or -1. */
static int make_file(enum kind k)
{
	char name[64];
	int fd = -1;

	switch (k) {
	case SYSV:
	case SYSV_HUGETLB:
		fd = shmget(IPC_PRIVATE, kind_len(k), IPC_CREAT | 0600 |
			    (k == SYSV_HUGETLB ? SHM_HUGETLB : 0));
		if (fd >= 0) {
			void *p = shmat(fd, NULL, 0);

			/* attached once, so that IPC_RMID keeps it */
			ASSERT(p != (void *)-1);
			ASSERT_EQ(shmctl(fd, IPC_RMID, NULL), 0);
			kept_attach = p;
		}
		return fd;
	case MEMFD_SEALED:
		fd = memfd_create("shca-test-sealed", MFD_ALLOW_SEALING);
		ASSERT(fd >= 0);
		ASSERT_EQ(ftruncate(fd, FLEN), 0);
		ASSERT_EQ(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK), 0);
		return fd;
	case MEMFD:
		fd = memfd_create("shca-test-memfd", 0);
		break;
	case POSIX_SHM:
		snprintf(name, sizeof(name), "/shca-test-%d", (int)getpid());
		fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
		ASSERT(fd >= 0);
		ASSERT_EQ(shm_unlink(name), 0);
		break;
	case HUGETLB:
		fd = memfd_create("shca-test-huge", MFD_HUGETLB);
		if (fd >= 0 && ftruncate(fd, 2u << 20)) {
			close(fd);
			fd = -1;
		}
		return fd;
	}
	ASSERT(fd >= 0);
	ASSERT_EQ(ftruncate(fd, FLEN), 0);
	return fd;
}

/* Kind k's memory, mapped read-write. */
static uint8_t *map_kind(enum kind k, int ffd)
{
	void *m;

	if (is_sysv(k)) {
		m = kept_attach;	/* make_file's */
		kept_attach = NULL;
		return m;
	}
	m = mmap(NULL, kind_len(k), PROT_READ | PROT_WRITE, MAP_SHARED, ffd,
		 0);
	ASSERT(m != MAP_FAILED);
	return m;
}

/* The bytes of kind k's memory as the file (or another attach of the
 * segment) holds them, not through the registered mapping. */
static void read_back(enum kind k, int ffd, uint8_t *back)
{
	size_t len = kind_len(k);
	void *q;

	if (!is_sysv(k)) {
		ASSERT_EQ(pread(ffd, back, len, 0), (ssize_t)len);
		return;
	}
	q = shmat(ffd, NULL, SHM_RDONLY);
	ASSERT(q != (void *)-1);
	memcpy(back, q, len);
	ASSERT_EQ(shmdt(q), 0);
}

/* Can this host give a memfd huge pages (hugetlbfs, a free huge page)? */
static bool hugetlb_usable(void)
{
	int fd = make_file(HUGETLB);
	void *p;

	if (fd < 0)
		return false;
	p = mmap(NULL, 2u << 20, PROT_READ | PROT_WRITE, MAP_SHARED |
		 MAP_POPULATE, fd, 0);
	close(fd);
	if (p == MAP_FAILED)
		return false;
	munmap(p, 2u << 20);
	return true;
}

/*
 * The responder: the file mapped shared, sentinels, the READ's pattern
 * and the atomics' word in it, an MR over it; then checks of what landed,
 * through the mapping and through the file.
 */
static void responder(int fd, void *arg)
{
	enum kind k = *(enum kind *)arg;
	size_t len = kind_len(k);
	long long mapped0, fb0;
	struct mr_info mi;
	struct ep_opts o;
	struct ibv_mr *mr;
	struct ep b;
	uint8_t *m, *back;
	uint64_t w;
	int ffd = make_file(k);

	ASSERT(ffd >= 0);
	m = map_kind(k, ffd);
	memset(m, EP_SENTINEL, len);
	ep_fill_pattern(m + R_OFF, MLEN, 2, 0);
	w = START;
	memcpy(m + A_OFF, &w, 8);

	ep_default_opts(&o, IBV_QPT_RC);
	ep_create(&b, &o);
	ep_exchange(fd, &b.self, &b.peer);
	ep_connect(&b, &o);
	mapped0 = proc_counter(getpid(), "mr_mapped");
	fb0 = proc_counter(getpid(), "map_file_bytes");
	mr = ibv_reg_mr(b.pd, m, len, MR_ACCESS);
	ASSERT_NOT_NULL(mr);
	mi.addr = (uintptr_t)m;
	mi.rkey = mr->rkey;
	mi.mapped = (int32_t)(proc_counter(getpid(), "mr_mapped") - mapped0);
	mi.file_bytes = proc_counter(getpid(), "map_file_bytes") - fb0;
	xwrite(fd, &mi, sizeof(mi));
	/* the registration moved nothing: the mapping is still the file */
	back = malloc(len);
	ASSERT_NOT_NULL(back);
	read_back(k, ffd, back);
	ASSERT_EQ(ep_find_diff(back, m, len), -1);

	duo_expect(fd, 'w');		/* the WRITE, READ, atomics */
	for (int pass = 0; pass < 2; pass++) {
		const uint8_t *v = pass ? back : m;

		if (pass)
			read_back(k, ffd, back);
		ASSERT_EQ(ep_find_pattern_diff(v + W_OFF, MLEN, 1, 0), -1);
		ASSERT_EQ(ep_find_non_sentinel(v + W_OFF + MLEN, 4096), -1);
		ASSERT_EQ(ep_find_pattern_diff(v + R_OFF, MLEN, 2, 0), -1);
		memcpy(&w, v + A_OFF, 8);
		ASSERT_EQ(w, 0x0badcafe0badcafeull);
		ASSERT_EQ(ep_find_non_sentinel(v + A_OFF - 64, 64), -1);
		ASSERT_EQ(ep_find_non_sentinel(v + A_OFF + 8, 56), -1);
	}
	free(back);
	duo_signal(fd, 'W');

	if (k == MEMFD || k == POSIX_SHM) {
		/* shrunk under the peer: its next access must not crash it */
		duo_expect(fd, 't');
		ASSERT_EQ(ftruncate(ffd, 0), 0);
		duo_signal(fd, 'T');
	} else if (k == MEMFD_SEALED) {
		/* the seal is what makes the peer's mapping safe */
		ASSERT_NE(ftruncate(ffd, 0), 0);
		ASSERT_EQ(errno, EPERM);
	}
	duo_expect(fd, 'q');
	ASSERT_EQ(ibv_dereg_mr(mr), 0);
	if (is_sysv(k)) {
		ASSERT_EQ(shmdt(m), 0);	/* the last attach: it goes */
	} else {
		munmap(m, len);
		close(ffd);
	}
	ep_destroy(&b);
}

/* The requester's side of kind k; mapped: the responder's file is shared
 * as it is (else CMA). */
static void run(enum kind k, bool mapped)
{
	long long map0, cma0, map1, cma1;
	struct mr_info mi;
	struct ep_opts o;
	struct ibv_wc wc;
	struct duo d;
	struct ep a;
	uint64_t got;

	setenv("SOFTHCA_MAP", "1", 1);
	duo_fork(&d, responder, &k);
	ep_default_opts(&o, IBV_QPT_RC);
	ep_open_remote(&a, &o, d.fd);
	xread(d.fd, &mi, sizeof(mi));
	ASSERT_EQ(mi.mapped, mapped ? 1 : 0);
	/* in place: the whole file range, nothing re-backed */
	ASSERT_EQ(mi.file_bytes, mapped ? (int64_t)kind_len(k) : 0);
	/* ep_post and post_atomic aim at the file's MR */
	a.peer.addr = mi.addr;
	a.peer.rkey = mi.rkey;
	map0 = proc_counter(getpid(), "map_xfers");
	cma0 = proc_counter(getpid(), "cma_xfers");

	ep_fill_pattern(a.buf, MLEN, 1, 0);
	ASSERT_EQ(ep_post(&a, 1, IBV_WR_RDMA_WRITE, 0, MLEN, W_OFF, 0), 0);
	ep_expect(a.scq, a.qp, 1, IBV_WC_SUCCESS);
	memset(a.buf + MLEN, 0, MLEN);
	ASSERT_EQ(ep_post(&a, 2, IBV_WR_RDMA_READ, MLEN, MLEN, R_OFF, 0), 0);
	ep_expect(a.scq, a.qp, 2, IBV_WC_SUCCESS);
	ASSERT_EQ(ep_find_pattern_diff(a.buf + MLEN, MLEN, 2, 0), -1);
	ep_post_atomic(&a, 3, IBV_WR_ATOMIC_FETCH_AND_ADD, 0, A_OFF, 0x41, 0);
	ep_expect(a.scq, a.qp, 3, IBV_WC_SUCCESS);
	memcpy(&got, a.buf, 8);
	ASSERT_EQ(got, START);
	ep_post_atomic(&a, 4, IBV_WR_ATOMIC_CMP_AND_SWP, 8, A_OFF, START + 0x41,
		       0x0badcafe0badcafeull);
	ep_expect(a.scq, a.qp, 4, IBV_WC_SUCCESS);
	memcpy(&got, a.buf + 8, 8);
	ASSERT_EQ(got, START + 0x41);
	duo_signal(d.fd, 'w');
	duo_expect(d.fd, 'W');

	/* four accesses of the responder's memory, by which path */
	map1 = proc_counter(getpid(), "map_xfers");
	cma1 = proc_counter(getpid(), "cma_xfers");
	ASSERT_EQ(map1 - map0, mapped ? 4 : 0);
	ASSERT_EQ(cma1 - cma0, mapped ? 0 : 4);

	if (k == MEMFD || k == POSIX_SHM) {
		duo_signal(d.fd, 't');
		duo_expect(d.fd, 'T');
		ASSERT_EQ(ep_post(&a, 5, IBV_WR_RDMA_WRITE, 0, MLEN, W_OFF, 0),
			  0);
		ep_poll(a.scq, &wc, 1);
		ASSERT_EQ(wc.wr_id, 5);
		ASSERT_NE(wc.status, IBV_WC_SUCCESS);
	}
	duo_signal(d.fd, 'q');
	duo_wait(&d);
	ep_destroy(&a);
}

TEST(memfd_sealed_mapped)
{
	run(MEMFD_SEALED, true);
}

TEST(memfd_unsealed_cma)
{
	run(MEMFD, false);
}

TEST(posix_shm_cma)
{
	run(POSIX_SHM, false);
}

TEST(hugetlb_cma)
{
	if (!hugetlb_usable())
		SKIP("no hugetlbfs memfd with a free huge page on this host");
	run(HUGETLB, false);
}

TEST(sysv_mapped)
{
	run(SYSV, true);
}

/* Can this host give a System V segment a huge page? */
static bool sysv_hugetlb_usable(void)
{
	int id = shmget(IPC_PRIVATE, HUGE_LEN, IPC_CREAT | 0600 | SHM_HUGETLB);

	if (id < 0)
		return false;
	shmctl(id, IPC_RMID, NULL);
	return true;
}

TEST(sysv_hugetlb_cma)
{
	if (!sysv_hugetlb_usable())
		SKIP("no System V segment of huge pages on this host");
	run(SYSV_HUGETLB, false);
}
