// SPDX-License-Identifier: MIT
#include <string.h>

#include "harness.h"
#include "common.h"

struct ibv_device *find_device(struct ibv_device **list, const char *name)
{
	for (; *list; list++)
		if (!strcmp(ibv_get_device_name(*list), name))
			return *list;
	return NULL;
}

struct ibv_context *open_lo(void)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_device *dev;
	struct ibv_context *ctx;

	ASSERT_NOT_NULL(list);
	dev = find_device(list, "softhca_lo");
	ASSERT_NOT_NULL(dev);
	ctx = ibv_open_device(dev);
	ASSERT_NOT_NULL(ctx);
	ibv_free_device_list(list);
	return ctx;
}
