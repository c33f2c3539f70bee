// SPDX-License-Identifier: MIT
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "../common/log.h"
#include "arena.h"
#include "host.h"

#define HOST_MAGIC	0x54534f4841484353ull	/* "SHCAHOST" */
#define HOST_VERSION	1
#define ATOMIC_STRIPES	1024

struct host_mcast_entry {
	uint8_t gid[16];
	int32_t slot;		/* -1: free */
	uint32_t qpn;
};

struct host_shm {
	uint64_t magic;		/* written last by the creator */
	uint32_t version;
	uint32_t pad;
	struct shca_plock mcast_lock;
	struct host_mcast_entry mcast[SHCA_HOST_MCAST_ENTRIES];
	struct shca_plock atomic[ATOMIC_STRIPES];
};

static pthread_mutex_t host_lock = PTHREAD_MUTEX_INITIALIZER;
static struct host_shm *host;

static void host_name(char *buf, size_t len)
{
	struct stat st;
	unsigned long long ns = 0;

	/* one table per network namespace: different namespaces are
	 * different hosts to softhca */
	if (!stat("/proc/self/ns/net", &st))
		ns = (unsigned long long)st.st_ino;
	snprintf(buf, len, "/softhca-%u-%llu-v%d", (unsigned int)getuid(), ns,
		 HOST_VERSION);
}

static struct host_shm *host_map(void)
{
	char name[96];
	struct host_shm *h;
	bool creator = true;
	int fd, i;

	host_name(name, sizeof(name));
	fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0 && errno == EEXIST) {
		creator = false;
		fd = shm_open(name, O_RDWR | O_CLOEXEC, 0600);
	}
	if (fd < 0)
		return NULL;
	if (creator && ftruncate(fd, sizeof(*h))) {
		close(fd);
		shm_unlink(name);
		return NULL;
	}
	/* wait for the creator to size it */
	for (i = 0; !creator && i < 1000; i++) {
		struct stat st;

		if (!fstat(fd, &st) && (size_t)st.st_size >= sizeof(*h))
			break;
		usleep(1000);
	}
	h = mmap(NULL, sizeof(*h), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (h == MAP_FAILED)
		return NULL;
	if (creator) {
		shca_plock_init(&h->mcast_lock);
		for (i = 0; i < SHCA_HOST_MCAST_ENTRIES; i++)
			h->mcast[i].slot = -1;
		for (i = 0; i < ATOMIC_STRIPES; i++)
			shca_plock_init(&h->atomic[i]);
		h->version = HOST_VERSION;
		__atomic_store_n(&h->magic, HOST_MAGIC, __ATOMIC_RELEASE);
	} else {
		for (i = 0; i < 5000 && __atomic_load_n(&h->magic,
					__ATOMIC_ACQUIRE) != HOST_MAGIC; i++)
			usleep(1000);
		if (h->magic != HOST_MAGIC) {
			shca_err("host table %s is not initialised", name);
			munmap(h, sizeof(*h));
			errno = EPROTO;
			return NULL;
		}
	}
	return h;
}

static struct host_shm *host_get(void)
{
	pthread_mutex_lock(&host_lock);
	if (!host)
		host = host_map();
	pthread_mutex_unlock(&host_lock);
	return host;
}

static unsigned int stripe(pid_t pid, uint64_t addr)
{
	uint64_t x = (addr >> 3) ^ ((uint64_t)(uint32_t)pid << 29);

	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	return (unsigned int)(x % ATOMIC_STRIPES);
}

int shca_host_atomic_lock(pid_t pid, uint64_t addr)
{
	struct host_shm *h = host_get();

	if (!h)
		return -errno;
	shca_plock_lock(&h->atomic[stripe(pid, addr)]);
	return 0;
}

void shca_host_atomic_unlock(pid_t pid, uint64_t addr)
{
	shca_plock_unlock(&host->atomic[stripe(pid, addr)]);
}

int shca_host_mcast_attach(const union ibv_gid *mgid, int slot, uint32_t qpn)
{
	struct host_shm *h = host_get();
	int i, free_i = -1, ret = 0;

	if (!h)
		return -errno;
	shca_plock_lock(&h->mcast_lock);
	for (i = 0; i < SHCA_HOST_MCAST_ENTRIES; i++) {
		struct host_mcast_entry *e = &h->mcast[i];

		if (e->slot < 0) {
			if (free_i < 0)
				free_i = i;
			continue;
		}
		if (e->slot == slot && e->qpn == qpn &&
		    !memcmp(e->gid, mgid->raw, 16))
			goto out;
	}
	if (free_i < 0) {
		ret = -ENOMEM;
		goto out;
	}
	memcpy(h->mcast[free_i].gid, mgid->raw, 16);
	h->mcast[free_i].qpn = qpn;
	h->mcast[free_i].slot = slot;
out:
	shca_plock_unlock(&h->mcast_lock);
	return ret;
}

void shca_host_mcast_detach(const union ibv_gid *mgid, int slot, uint32_t qpn)
{
	struct host_shm *h = host_get();
	int i;

	if (!h)
		return;
	shca_plock_lock(&h->mcast_lock);
	for (i = 0; i < SHCA_HOST_MCAST_ENTRIES; i++) {
		struct host_mcast_entry *e = &h->mcast[i];

		if (e->slot == slot && e->qpn == qpn &&
		    !memcmp(e->gid, mgid->raw, 16))
			e->slot = -1;
	}
	shca_plock_unlock(&h->mcast_lock);
}

int shca_host_mcast_members(const union ibv_gid *mgid,
			    struct shca_mcast_member *out, int max)
{
	struct host_shm *h = host_get();
	int i, n = 0;

	if (!h)
		return 0;
	shca_plock_lock(&h->mcast_lock);
	for (i = 0; i < SHCA_HOST_MCAST_ENTRIES && n < max; i++) {
		struct host_mcast_entry *e = &h->mcast[i];

		if (e->slot >= 0 && !memcmp(e->gid, mgid->raw, 16)) {
			out[n].slot = e->slot;
			out[n].qpn = e->qpn;
			n++;
		}
	}
	shca_plock_unlock(&h->mcast_lock);
	return n;
}
