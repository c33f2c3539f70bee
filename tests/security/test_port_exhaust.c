// SPDX-License-Identifier: MIT
/*
 * The 1025th process (issue 11): when every port of SOFTHCA_PORT_BASE's
 * range is taken, ibv_open_device fails, with EADDRINUSE and a logged
 * message that names the range and SOFTHCA_PORT_BASE, rather than a later
 * ibv_create_qp.  The test holds the 1024 ports itself (listening TCP
 * sockets on 26000..27023, a range no other test uses), so no 1024 processes
 * are needed; with one port given back, the same process opens the device
 * and its QPs carry that port's slot.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <infiniband/verbs.h>

#include "harness.h"

/* below the ephemeral range (32768-60999) and apart from every other
 * test's base, so that no connection or other test holds the port we
 * give back */
#define BASE	26000
#define NPORTS	1024

static int hold(unsigned int port)
{
	struct sockaddr_in6 sa;
	int zero = 0, one = 1;
	int fd = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);

	ASSERT(fd >= 0);
	setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
	/* as softhca binds: a port some connection uses as its local port
	 * (the ephemeral range overlaps) is still ours to listen on */
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	memset(&sa, 0, sizeof(sa));
	sa.sin6_family = AF_INET6;
	sa.sin6_port = htons((uint16_t)port);
	sa.sin6_addr = in6addr_any;
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) || listen(fd, 1)) {
		/* someone else holds it: taken all the same */
		close(fd);
		return -1;
	}
	return fd;
}

static bool udp_free(unsigned int port)
{
	struct sockaddr_in6 sa;
	int zero = 0, ok;
	int fd = socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	ASSERT(fd >= 0);
	setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
	memset(&sa, 0, sizeof(sa));
	sa.sin6_family = AF_INET6;
	sa.sin6_port = htons((uint16_t)port);
	sa.sin6_addr = in6addr_any;
	ok = !bind(fd, (struct sockaddr *)&sa, sizeof(sa));
	close(fd);
	return ok;
}

static struct ibv_device *lo_device(struct ibv_device ***list)
{
	int i;

	*list = ibv_get_device_list(NULL);
	ASSERT(*list);
	for (i = 0; (*list)[i]; i++)
		if (!strcmp(ibv_get_device_name((*list)[i]), "softhca_lo"))
			return (*list)[i];
	ASSERT(!"no softhca_lo");
	return NULL;
}

TEST(all_ports_taken_fails_at_open_with_a_message)
{
	static int fds[NPORTS];
	char log[64], line[1024];
	struct ibv_device **list;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_qp_init_attr qa;
	struct ibv_device *dev;
	struct rlimit r;
	bool said = false;
	int saved, lfd, err;
	unsigned int i, freed;
	FILE *f;

	if (getrlimit(RLIMIT_NOFILE, &r) == 0 && r.rlim_cur < r.rlim_max) {
		r.rlim_cur = r.rlim_max;
		setrlimit(RLIMIT_NOFILE, &r);
	}
	if (getrlimit(RLIMIT_NOFILE, &r) || r.rlim_cur < NPORTS + 128)
		SKIP("RLIMIT_NOFILE too low to hold 1024 ports");
	snprintf(log, sizeof(log), "/tmp/shca-port-exhaust-%d.log",
		 (int)getpid());
	setenv("SOFTHCA_PORT_BASE", "26000", 1);
	for (i = 0; i < NPORTS; i++)
		fds[i] = hold(BASE + i);

	/* the log goes to stderr (the library read SOFTHCA_LOG_FILE at
	 * load): catch it in a file */
	dev = lo_device(&list);
	saved = dup(2);
	lfd = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	ASSERT(saved >= 0 && lfd >= 0);
	dup2(lfd, 2);
	ctx = ibv_open_device(dev);
	err = errno;
	dup2(saved, 2);
	close(saved);
	close(lfd);
	ASSERT(ctx == NULL);
	ASSERT_EQ(err, EADDRINUSE);
	f = fopen(log, "r");
	ASSERT(f);
	while (fgets(line, sizeof(line), f))
		if (strstr(line, "all 1024 ports 26000-27023 are taken") &&
		    strstr(line, "set SOFTHCA_PORT_BASE"))
			said = true;
	fclose(f);
	unlink(log);
	ASSERT(said);

	/* one port back (one whose UDP side is free too, as a slot needs
	 * both): the device opens, and its QPs carry that slot */
	for (freed = 0; freed < NPORTS; freed++)
		if (fds[freed] >= 0 && udp_free(BASE + freed))
			break;
	ASSERT(freed < NPORTS);
	close(fds[freed]);
	ctx = ibv_open_device(lo_device(&list));
	ASSERT(ctx != NULL);
	pd = ibv_alloc_pd(ctx);
	cq = ibv_create_cq(ctx, 4, NULL, NULL, 0);
	ASSERT(pd && cq);
	memset(&qa, 0, sizeof(qa));
	qa.send_cq = qa.recv_cq = cq;
	qa.qp_type = IBV_QPT_RC;
	qa.cap.max_send_wr = qa.cap.max_recv_wr = 1;
	qa.cap.max_send_sge = qa.cap.max_recv_sge = 1;
	qp = ibv_create_qp(pd, &qa);
	ASSERT(qp != NULL);
	ASSERT_EQ(qp->qp_num >> 14, freed);
	ibv_destroy_qp(qp);
	ibv_destroy_cq(cq);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	ibv_free_device_list(list);
	for (i = 0; i < NPORTS; i++)
		if (i != freed && fds[i] >= 0)
			close(fds[i]);
}
