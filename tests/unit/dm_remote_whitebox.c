// SPDX-License-Identifier: MIT
/*
 * The importer's check of another process's DM (src/verbs/dm.c
 * shca_dm_map_remote; docs/import.md, "Device memory"): the owner's
 * answer to IMP_DM is hostile.  A length ibv_alloc_dm would refuse, a
 * descriptor that is no regular file, a file shorter than the length
 * (page-rounded) or one that can shrink: EPROTO, nothing mapped, and the
 * descriptor closed in every case.  A good one is mapped shared: a copy
 * through the DM is in the file.  Linked with libibverbs' own objects
 * (the .so exports the verbs API only), as unit_net_rx_oracle is.
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>

#include "harness.h"
#include "common.h"
#include "verbs/shca.h"

/* A memfd of size bytes, sealed with seals (0: none). */
static int mfd(size_t size, int seals)
{
	int fd = memfd_create("dm-test", MFD_CLOEXEC | MFD_ALLOW_SEALING);

	ASSERT_GE(fd, 0);
	ASSERT_EQ(ftruncate(fd, (off_t)size), 0);
	if (seals)
		ASSERT_EQ(fcntl(fd, F_ADD_SEALS, seals), 0);
	return fd;
}

/* Refused: EPROTO, and fd closed. */
static void refused(struct ibv_context *ctx, int fd, uint64_t length)
{
	errno = 0;
	ASSERT_NULL(shca_dm_map_remote(ctx, fd, length));
	ASSERT_EQ(errno, EPROTO);
	ASSERT_EQ(fcntl(fd, F_GETFD), -1);
	ASSERT_EQ(errno, EBADF);
}

TEST(hostile_answers)
{
	struct ibv_context *ctx = open_lo();
	int p[2];

	/* lengths ibv_alloc_dm refuses */
	refused(ctx, mfd(8192, F_SEAL_SHRINK), 0);
	refused(ctx, mfd(8192, F_SEAL_SHRINK), SHCA_MAX_DM_SIZE + 1ull);
	/* a file that can shrink under the mapping */
	refused(ctx, mfd(8192, 0), 8192);
	refused(ctx, mfd(8192, F_SEAL_GROW), 8192);
	/* shorter than the length, page-rounded */
	refused(ctx, mfd(4096, F_SEAL_SHRINK), 8192);
	refused(ctx, mfd(4096, F_SEAL_SHRINK), 4100);
	/* no regular file */
	ASSERT_EQ(pipe(p), 0);
	close(p[1]);
	refused(ctx, p[0], 8192);
	ASSERT_EQ(ibv_close_device(ctx), 0);
}

TEST(good_answer)
{
	struct ibv_context *ctx = open_lo();
	int fd = mfd(8192, F_SEAL_SHRINK), keep = dup(fd);
	struct shca_dm *dm;
	char r[8];

	ASSERT_GE(keep, 0);
	dm = shca_dm_map_remote(ctx, fd, 8000);
	ASSERT_NOT_NULL(dm);
	ASSERT_EQ(dm->length, 8000);
	ASSERT_EQ(ibv_memcpy_to_dm(&dm->ibdm, 4096, "remote!", 8), 0);
	ASSERT_EQ(pread(keep, r, 8, 4096), 8);
	ASSERT_EQ(memcmp(r, "remote!", 8), 0);
	/* the owner's length bounds the copies */
	ASSERT_EQ(ibv_memcpy_to_dm(&dm->ibdm, 8000, r, 4), EFAULT);
	ASSERT_EQ(ibv_free_dm(&dm->ibdm), 0);
	close(keep);
	ASSERT_EQ(ibv_close_device(ctx), 0);
}
