// SPDX-License-Identifier: MIT
/*
 * The private directory of same-host names (shm/rundir.c), on its own:
 * the keyed hash is SipHash-2-4 (the reference vectors of Aumasson and
 * Bernstein's paper: key 00..0f, messages 00, 00 01, ...), and what
 * shca_rundir_get() makes is ours and private: the key (16 bytes, 0600),
 * /dev/shm/softhca-<uid>-<16 hex>/net-<netns cookie>, each 0700.
 */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <pwd.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include "harness.h"
#include "shm/rundir.h"

TEST(siphash_reference_vectors)
{
	uint8_t key[16], msg[64];
	int i;

	for (i = 0; i < 16; i++)
		key[i] = (uint8_t)i;
	for (i = 0; i < 64; i++)
		msg[i] = (uint8_t)i;
	ASSERT_EQ(shca_siphash(key, msg, 0), 0x726fdb47dd0e0e31ull);
	ASSERT_EQ(shca_siphash(key, msg, 1), 0x74f839c593dc67fdull);
	ASSERT_EQ(shca_siphash(key, msg, 8), 0x93f5f5799a932462ull);
	ASSERT_EQ(shca_siphash(key, msg, 15), 0xa129ca6149be45e5ull);
	ASSERT_EQ(shca_siphash(key, msg, 63), 0x958a324ceb064572ull);
	/* another key, another hash */
	key[0] ^= 1;
	ASSERT(shca_siphash(key, msg, 15) != 0xa129ca6149be45e5ull);
}

TEST(directory_is_ours_and_private)
{
	const struct shca_rundir *d = shca_rundir_get(true);
	struct passwd *pw = getpwuid(getuid());
	char want[64], key[512];
	unsigned long long cookie = 0;
	socklen_t cl = sizeof(cookie);
	struct stat st;
	int s;

	ASSERT(d != NULL);
	ASSERT_EQ(fstat(d->fd, &st), 0);
	ASSERT(S_ISDIR(st.st_mode));
	ASSERT_EQ(st.st_uid, getuid());
	ASSERT_EQ(st.st_mode & 0777, 0700);
	s = socket(AF_UNIX, SOCK_DGRAM, 0);
	ASSERT_EQ(getsockopt(s, SOL_SOCKET, 71, &cookie, &cl), 0);
	close(s);
	ASSERT_EQ(d->cookie, cookie);
	snprintf(want, sizeof(want), "/net-%llu", cookie);
	ASSERT(strstr(d->path, want) != NULL);
	ASSERT_EQ(lstat(d->path, &st), 0);
	ASSERT_EQ(st.st_mode & 0777, 0700);
	/* the parent: softhca-<uid>-<16 hex> under /dev/shm */
	snprintf(want, sizeof(want), "/dev/shm/softhca-%u-",
		 (unsigned int)getuid());
	ASSERT_EQ(strncmp(d->path, want, strlen(want)), 0);
	ASSERT_EQ(strspn(d->path + strlen(want), "0123456789abcdef"), 16);
	/* the key: 16 bytes, ours, 0600, in a 0700 directory */
	if (pw && pw->pw_dir) {
		snprintf(key, sizeof(key), "%s/.softhca/key", pw->pw_dir);
		ASSERT_EQ(lstat(key, &st), 0);
		ASSERT(S_ISREG(st.st_mode));
		ASSERT_EQ(st.st_size, 16);
		ASSERT_EQ(st.st_mode & 0777, 0600);
		snprintf(key, sizeof(key), "%s/.softhca", pw->pw_dir);
		ASSERT_EQ(lstat(key, &st), 0);
		ASSERT_EQ(st.st_mode & 0777, 0700);
	}
}
