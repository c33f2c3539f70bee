// SPDX-License-Identifier: MIT
/*
 * Debian's provider libraries on a softhca device.  perftest, UCX,
 * libfabric and pyverbs load libmlx5.so.1 and libefa.so.1 (bound now, to
 * IBVERBS_PRIVATE_34 symbols of libibverbs) and probe every device with
 * mlx5dv_is_supported() / efadv_query_device(); both read the provider ops
 * pointer of struct verbs_device at ibv_device + 664 and must answer "not
 * mine" cleanly for a softhca device.
 *
 * The libraries are loaded with dlopen(RTLD_NOW) as UCX does, which binds
 * every symbol they import from the libibverbs already loaded (softhca's)
 * just as DT_NEEDED with BIND_NOW does; this needs no link-time
 * dependency on them.
 *
 * Reference: rdma-core 44 providers/mlx5/mlx5.c (mlx5dv_is_supported,
 * mlx5dv_open_device: EOPNOTSUPP; mlx5dv_query_device: EOPNOTSUPP when the
 * context has no mlx5 dv ops) and providers/efa/verbs.c
 * (efadv_query_device: EOPNOTSUPP; efadv_create_cq: NULL, EOPNOTSUPP).
 */
#include <dlfcn.h>
#include <stdbool.h>
#include <infiniband/efadv.h>
#include <infiniband/mlx5dv.h>

#include "harness.h"
#include "common.h"

static void *load(const char *lib)
{
	void *h = dlopen(lib, RTLD_NOW | RTLD_GLOBAL);

	if (!h) {
		static char why[256];

		snprintf(why, sizeof(why), "%s: %s", lib, dlerror());
		if (strstr(why, "No such file"))
			SKIP_ENV(why); /* ibverbs-providers not installed */
		harness_fail(__FILE__, __LINE__, "dlopen %s", why);
	}
	return h;
}

static void *sym(void *h, const char *name)
{
	void *p = dlsym(h, name);

	if (!p)
		harness_fail(__FILE__, __LINE__, "dlsym %s: %s", name,
			     dlerror());
	return p;
}

/* Loading runs their constructors (verbs_register_driver_34). */
TEST(providers_load)
{
	void *mlx5 = load("libmlx5.so.1"), *efa = load("libefa.so.1");
	struct ibv_device **list;

	list = ibv_get_device_list(NULL);
	ASSERT_NOT_NULL(list);
	ASSERT_NOT_NULL(find_device(list, "softhca_lo"));
	ibv_free_device_list(list);
	ASSERT_EQ(dlclose(efa), 0);
	ASSERT_EQ(dlclose(mlx5), 0);
}

TEST(mlx5dv_not_supported)
{
	void *h = load("libmlx5.so.1");
	bool (*is_supported)(struct ibv_device *) =
	    sym(h, "mlx5dv_is_supported");
	struct ibv_context *(*open_dev)(struct ibv_device *,
					struct mlx5dv_context_attr *) =
	    sym(h, "mlx5dv_open_device");
	int (*query)(struct ibv_context *, struct mlx5dv_context *) =
	    sym(h, "mlx5dv_query_device");
	struct ibv_device **list = ibv_get_device_list(NULL), **d;

	ASSERT_NOT_NULL(list);
	for (d = list; *d; d++) {
		struct mlx5dv_context_attr attr = {0};
		struct mlx5dv_context dv = {0};
		struct ibv_context *ctx;

		ASSERT_EQ(is_supported(*d), false);
		ASSERT_NULL_ERRNO(open_dev(*d, &attr), EOPNOTSUPP);
		ctx = ibv_open_device(*d);
		ASSERT_NOT_NULL(ctx);
		ASSERT_EQ(query(ctx, &dv), EOPNOTSUPP);
		ASSERT_EQ(ibv_close_device(ctx), 0);
	}
	ibv_free_device_list(list);
}

TEST(efadv_not_supported)
{
	void *h = load("libefa.so.1");
	int (*query)(struct ibv_context *, struct efadv_device_attr *,
		     uint32_t) = sym(h, "efadv_query_device");
	struct ibv_cq_ex *(*create_cq)(
	    struct ibv_context *, struct ibv_cq_init_attr_ex *,
	    struct efadv_cq_init_attr *, uint32_t) = sym(h, "efadv_create_cq");
	struct ibv_context *ctx = open_lo();
	struct efadv_device_attr attr;
	struct ibv_cq_init_attr_ex cq_attr = {.cqe = 4};
	struct efadv_cq_init_attr efa_cq = {0};

	memset(&attr, 0xa5, sizeof(attr));
	ASSERT_EQ(query(ctx, &attr, sizeof(attr)), EOPNOTSUPP);
	ASSERT_NULL_ERRNO(create_cq(ctx, &cq_attr, &efa_cq, sizeof(efa_cq)),
			  EOPNOTSUPP);
	/* the context is still fine */
	ASSERT_EQ(ibv_close_device(ctx), 0);
}
