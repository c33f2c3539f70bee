// SPDX-License-Identifier: MIT
/*
 * pcap trace writer: each IB packet becomes a RoCE v2 frame.  The pcap
 * file format is in the writer's byte order (readers go by the magic); the
 * frame itself is built by the wire codec.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/uio.h>
#include <unistd.h>

#include "pcap.h"
#include "wire.h"

#define PCAP_MAGIC_NSEC		0xa1b23c4du	/* nanosecond timestamps */
#define PCAP_VERSION_MAJOR	2
#define PCAP_VERSION_MINOR	4
#define PCAP_SNAPLEN		262144
#define PCAP_LINKTYPE_ETHERNET	1

struct pcap_file_hdr {
	uint32_t magic;
	uint16_t version_major;
	uint16_t version_minor;
	int32_t thiszone;
	uint32_t sigfigs;
	uint32_t snaplen;
	uint32_t linktype;
};
_Static_assert(sizeof(struct pcap_file_hdr) == 24, "pcap header");

struct pcap_rec_hdr {
	uint32_t ts_sec;
	uint32_t ts_nsec;
	uint32_t incl_len;
	uint32_t orig_len;
};
_Static_assert(sizeof(struct pcap_rec_hdr) == 16, "pcap record header");

struct shca_pcap {
	pthread_mutex_t lock;
	int fd;
	uint64_t size;		/* bytes in the file */
	uint64_t max_bytes;	/* 0: unbounded */
	uint64_t written;
	uint64_t dropped;
};

/* writev all of iov[0..n), or -errno. */
static int write_all(int fd, struct iovec *iov, int n)
{
	ssize_t r;

	while (n > 0) {
		r = writev(fd, iov, n);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		while (n > 0 && (size_t)r >= iov->iov_len) {
			r -= (ssize_t)iov->iov_len;
			iov++;
			n--;
		}
		if (n > 0) {
			iov->iov_base = (char *)iov->iov_base + r;
			iov->iov_len -= (size_t)r;
		}
	}
	return 0;
}

int shca_pcap_open(const char *path, uint64_t max_bytes,
		   struct shca_pcap **out)
{
	struct pcap_file_hdr fh = {
		.magic = PCAP_MAGIC_NSEC,
		.version_major = PCAP_VERSION_MAJOR,
		.version_minor = PCAP_VERSION_MINOR,
		.snaplen = PCAP_SNAPLEN,
		.linktype = PCAP_LINKTYPE_ETHERNET,
	};
	struct iovec iov = { &fh, sizeof(fh) };
	struct shca_pcap *pcap;
	int err;

	if (max_bytes && max_bytes < sizeof(fh))
		return -EINVAL;
	pcap = calloc(1, sizeof(*pcap));
	if (!pcap)
		return -ENOMEM;
	pcap->fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (pcap->fd < 0) {
		err = -errno;
		goto err_free;
	}
	err = write_all(pcap->fd, &iov, 1);
	if (err)
		goto err_close;
	pthread_mutex_init(&pcap->lock, NULL);
	pcap->size = sizeof(fh);
	pcap->max_bytes = max_bytes;
	*out = pcap;
	return 0;

err_close:
	close(pcap->fd);
err_free:
	free(pcap);
	return err;
}

int shca_pcap_write(struct shca_pcap *pcap, const uint8_t sgid[16],
		    const uint8_t dgid[16], const void *ib_pkt, size_t len,
		    const struct timespec *ts)
{
	struct shca_eth_hdr eth;
	uint8_t net[SHCA_ROCE_MAX_HDR];
	uint8_t icrc[SHCA_ICRC_LEN];
	struct pcap_rec_hdr rh;
	struct timespec now;
	struct iovec iov[5];
	size_t frame_len;
	uint16_t sport;
	int hlen, err;

	if (len < SHCA_BTH_LEN)
		return -EINVAL;
	sport = shca_wire_roce_sport(shca_bth_dqpn(ib_pkt));
	hlen = shca_wire_roce_encap(net, sgid, dgid, sport, ib_pkt, len, icrc);
	if (hlen < 0)
		return hlen;

	shca_eth_mac_from_gid(eth.dst, dgid);
	shca_eth_mac_from_gid(eth.src, sgid);
	shca_eth_set_type(&eth, shca_ip_version(net) == 4 ? SHCA_ETH_P_IPV4 :
							     SHCA_ETH_P_IPV6);

	if (!ts) {
		clock_gettime(CLOCK_REALTIME, &now);
		ts = &now;
	}
	frame_len = sizeof(eth) + (size_t)hlen + len + SHCA_ICRC_LEN;
	rh.ts_sec = (uint32_t)ts->tv_sec;
	rh.ts_nsec = (uint32_t)ts->tv_nsec;
	rh.incl_len = (uint32_t)frame_len;
	rh.orig_len = (uint32_t)frame_len;

	iov[0] = (struct iovec){ &rh, sizeof(rh) };
	iov[1] = (struct iovec){ &eth, sizeof(eth) };
	iov[2] = (struct iovec){ net, (size_t)hlen };
	iov[3] = (struct iovec){ (void *)ib_pkt, len };
	iov[4] = (struct iovec){ icrc, sizeof(icrc) };

	pthread_mutex_lock(&pcap->lock);
	if (pcap->max_bytes &&
	    pcap->size + sizeof(rh) + frame_len > pcap->max_bytes) {
		pcap->dropped++;
		err = -EFBIG;
		goto out_unlock;
	}
	err = write_all(pcap->fd, iov, 5);
	if (err) {
		/* Leave no partial record behind. */
		if (ftruncate(pcap->fd, (off_t)pcap->size) == 0)
			lseek(pcap->fd, (off_t)pcap->size, SEEK_SET);
		pcap->dropped++;
		goto out_unlock;
	}
	pcap->size += sizeof(rh) + frame_len;
	pcap->written++;
out_unlock:
	pthread_mutex_unlock(&pcap->lock);
	return err;
}

uint64_t shca_pcap_written(struct shca_pcap *pcap)
{
	uint64_t n;

	pthread_mutex_lock(&pcap->lock);
	n = pcap->written;
	pthread_mutex_unlock(&pcap->lock);
	return n;
}

uint64_t shca_pcap_dropped(struct shca_pcap *pcap)
{
	uint64_t n;

	pthread_mutex_lock(&pcap->lock);
	n = pcap->dropped;
	pthread_mutex_unlock(&pcap->lock);
	return n;
}

int shca_pcap_close(struct shca_pcap *pcap)
{
	int err = 0;

	if (!pcap)
		return 0;
	if (close(pcap->fd))
		err = -errno;
	pthread_mutex_destroy(&pcap->lock);
	free(pcap);
	return err;
}
