// SPDX-License-Identifier: MIT
/*
 * Unloading: a client that dlopen()s librdmacm (through a plug-in: Open
 * MPI's mtl/ofi loads libfabric, which needs librdmacm and libibverbs)
 * and dlclose()s it when done.  softhca's libraries run threads of their
 * own (the CM thread, the engine thread), blocked in epoll for the life
 * of the process: both libraries must stay mapped after dlclose (linked
 * with -z nodelete), or those threads would run unmapped code.
 *
 * Not linked with the libraries: they are opened by path (SHCA_IBVERBS,
 * SHCA_RDMACM), libibverbs first so that librdmacm's dependency is this
 * one, not the system's.
 */
#include <arpa/inet.h>
#include <dlfcn.h>
#include <netinet/in.h>

#include <rdma/rdma_cma.h>

#include "harness.h"

TEST(dlclose_keeps_the_libraries_mapped)
{
	struct rdma_event_channel *(*create_channel)(void);
	void (*destroy_channel)(struct rdma_event_channel *);
	int (*create_id)(struct rdma_event_channel *, struct rdma_cm_id **,
			 void *, enum rdma_port_space);
	int (*resolve_addr)(struct rdma_cm_id *, struct sockaddr *,
			    struct sockaddr *, int);
	int (*destroy_id)(struct rdma_cm_id *);
	struct sockaddr_in dst = { .sin_family = AF_INET,
				   .sin_port = htons(7) };
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id;
	void *verbs, *cm;

	verbs = dlopen(SHCA_IBVERBS, RTLD_NOW | RTLD_GLOBAL);
	ASSERT_NOT_NULL(verbs);
	cm = dlopen(SHCA_RDMACM, RTLD_NOW | RTLD_LOCAL);
	ASSERT_NOT_NULL(cm);
	*(void **)&create_channel = dlsym(cm, "rdma_create_event_channel");
	*(void **)&destroy_channel = dlsym(cm, "rdma_destroy_event_channel");
	*(void **)&create_id = dlsym(cm, "rdma_create_id");
	*(void **)&resolve_addr = dlsym(cm, "rdma_resolve_addr");
	*(void **)&destroy_id = dlsym(cm, "rdma_destroy_id");
	ASSERT(create_channel && destroy_channel && create_id &&
	       resolve_addr && destroy_id);

	/* the CM thread (a bound socket) and the engine thread (an open
	 * device, softhca_lo) start */
	ch = create_channel();
	ASSERT_NOT_NULL(ch);
	ASSERT_EQ(create_id(ch, &id, NULL, RDMA_PS_TCP), 0);
	ASSERT_EQ(inet_pton(AF_INET, "127.0.0.1", &dst.sin_addr), 1);
	ASSERT_EQ(resolve_addr(id, NULL, (struct sockaddr *)&dst, 2000), 0);
	ASSERT_NOT_NULL(id->verbs);
	ASSERT_EQ(destroy_id(id), 0);
	destroy_channel(ch);

	ASSERT_EQ(dlclose(cm), 0);
	ASSERT_EQ(dlclose(verbs), 0);
	/* still there: RTLD_NOLOAD finds a loaded object only */
	cm = dlopen(SHCA_RDMACM, RTLD_NOW | RTLD_NOLOAD);
	ASSERT_NOT_NULL(cm);
	verbs = dlopen(SHCA_IBVERBS, RTLD_NOW | RTLD_NOLOAD);
	ASSERT_NOT_NULL(verbs);
}
