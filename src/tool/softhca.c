// SPDX-License-Identifier: MIT
/*
 * softhca: the command-line tool.
 *
 *   softhca run -- CMD [ARGS...]   run CMD with softhca's libibverbs and
 *                                  librdmacm first on the library path
 *   softhca devices                list devices, ports and GIDs
 *   softhca stat [--pid PID] [--all]
 *                                  the counters of running processes
 */
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <sys/mman.h>
#include <infiniband/verbs.h>

#include "../common/slot.h"
#include "../common/stat.h"
#include "../shm/arena.h"
#include "../shm/peer.h"

/* The counter names, as many to a line as fit in 72 columns. */
static void print_counter_names(FILE *out)
{
	int i, col = 0;

	for (i = 0; i < SHCA_STAT_MAX; i++) {
		int n = (int)strlen(shca_stat_names[i]);

		if (col && col + 1 + n > 72) {
			fputc('\n', out);
			col = 0;
		}
		col += fprintf(out, "%s%s", col ? " " : "           ",
			       shca_stat_names[i]);
	}
	fputc('\n', out);
}

static void usage(FILE *out)
{
	fprintf(out,
		"usage: softhca run -- CMD [ARGS...]\n"
		"       softhca devices\n"
		"       softhca stat [--pid PID] [--all]\n"
		"\n"
		"  run      run CMD on the soft stack: softhca's libibverbs.so.1\n"
		"           and librdmacm.so.1 come first on LD_LIBRARY_PATH\n"
		"  devices  list softhca devices, their ports and GID tables\n"
		"  stat     the counters of the running softhca processes of\n"
		"           this user in this network namespace (same\n"
		"           SOFTHCA_PORT_BASE), read without disturbing them:\n"
		"           --pid PID one process only; --all zeros too.\n"
		"           One line per process, then per device (the sum of\n"
		"           its QPs) and per QP, each 'key value' pairs:\n"
		"             pid P slot S qps N [COUNTER VALUE...]\n"
		"             pid P device NAME qps N [COUNTER VALUE...]\n"
		"             pid P device NAME qp 0xQPN type T state S"
		" [COUNTER VALUE...]\n"
		"           The process line holds what belongs to no QP\n"
		"           (dropped packets, connections).  Counters:\n");
	print_counter_names(out);
}

/* <dir of this executable>/../lib, where the drop-in libraries are. */
static int lib_dir(char *out, size_t len)
{
	char exe[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	char probe[PATH_MAX + 32];

	if (n < 0)
		return -errno;
	exe[n] = '\0';
	snprintf(out, len, "%s/../lib", dirname(exe));
	snprintf(probe, sizeof(probe), "%s/libibverbs.so.1", out);
	if (access(probe, R_OK))
		return -ENOENT;
	return 0;
}

static int cmd_run(int argc, char **argv)
{
	char dir[PATH_MAX], real[PATH_MAX], *path;
	const char *old = getenv("LD_LIBRARY_PATH");
	int ret;

	if (argc > 0 && !strcmp(argv[0], "--")) {
		argc--;
		argv++;
	}
	if (argc < 1) {
		usage(stderr);
		return 2;
	}
	ret = lib_dir(dir, sizeof(dir));
	if (ret) {
		fprintf(stderr, "softhca: cannot find libibverbs.so.1 next to "
			"this program: %s\n", strerror(-ret));
		return 1;
	}
	if (!realpath(dir, real))
		snprintf(real, sizeof(real), "%s", dir);
	if (asprintf(&path, "%s%s%s", real, old && *old ? ":" : "",
		     old ? old : "") < 0)
		return 1;
	setenv("LD_LIBRARY_PATH", path, 1);
	free(path);
	execvp(argv[0], argv);
	fprintf(stderr, "softhca: cannot run %s: %s\n", argv[0],
		strerror(errno));
	return 127;
}

static const char *mtu_str(enum ibv_mtu m)
{
	switch (m) {
	case IBV_MTU_256: return "256";
	case IBV_MTU_512: return "512";
	case IBV_MTU_1024: return "1024";
	case IBV_MTU_2048: return "2048";
	case IBV_MTU_4096: return "4096";
	default: return "?";
	}
}

static void print_gid(const union ibv_gid *gid)
{
	char s[INET6_ADDRSTRLEN];
	struct in6_addr a;

	memcpy(&a, gid->raw, sizeof(a));
	if (IN6_IS_ADDR_V4MAPPED(&a))
		inet_ntop(AF_INET, &a.s6_addr32[3], s, sizeof(s));
	else
		inet_ntop(AF_INET6, &a, s, sizeof(s));
	printf("%s", s);
}

static int show_device(struct ibv_device *dev)
{
	struct ibv_context *ctx = ibv_open_device(dev);
	struct ibv_port_attr port;
	uint64_t guid = be64toh(ibv_get_device_guid(dev));
	int i;

	printf("%s  node_guid %04x:%04x:%04x:%04x\n", ibv_get_device_name(dev),
	       (unsigned int)(guid >> 48) & 0xffff,
	       (unsigned int)(guid >> 32) & 0xffff,
	       (unsigned int)(guid >> 16) & 0xffff,
	       (unsigned int)guid & 0xffff);
	if (!ctx) {
		printf("  cannot open: %s\n", strerror(errno));
		return 1;
	}
	if (ibv_query_port(ctx, 1, &port)) {
		printf("  cannot query port 1: %s\n", strerror(errno));
		ibv_close_device(ctx);
		return 1;
	}
	printf("  port 1: %s, link layer %s, active MTU %s\n",
	       ibv_port_state_str(port.state),
	       port.link_layer == IBV_LINK_LAYER_ETHERNET ? "Ethernet" :
							   "InfiniBand",
	       mtu_str(port.active_mtu));
	for (i = 0; i < port.gid_tbl_len; i++) {
		union ibv_gid gid;
		static const union ibv_gid zero;

		if (ibv_query_gid(ctx, 1, i, &gid) ||
		    !memcmp(&gid, &zero, sizeof(gid)))
			continue;
		printf("    GID[%2d] ", i);
		print_gid(&gid);
		printf("  (RoCE v2)\n");
	}
	ibv_close_device(ctx);
	return 0;
}

static int cmd_devices(void)
{
	struct ibv_device **list;
	int n, i, ret = 0;

	list = ibv_get_device_list(&n);
	if (!list) {
		fprintf(stderr, "softhca: cannot list devices: %s\n",
			strerror(errno));
		return 1;
	}
	if (!n)
		printf("no devices: no network interface has an IP address\n");
	for (i = 0; i < n; i++)
		ret |= show_device(list[i]);
	ibv_free_device_list(list);
	return ret;
}

/* ------------------------------------------------------------------ */
/* stat                                                                */

struct stat_qp {
	char dev[20];			/* printable, NUL-terminated */
	uint32_t qpn;
	uint32_t qp_type;
	uint32_t state;
	struct shca_stat_block stats;
};

struct stat_proc {
	pid_t pid;
	int slot;
	void *base;			/* its arena, read-only */
	size_t size;
};

static const char *qp_type_str(uint32_t t)
{
	switch (t) {
	case IBV_QPT_RC: return "RC";
	case IBV_QPT_UC: return "UC";
	case IBV_QPT_UD: return "UD";
	case IBV_QPT_RAW_PACKET: return "RAW_PACKET";
	case IBV_QPT_XRC_SEND: return "XRC_SEND";
	case IBV_QPT_XRC_RECV: return "XRC_RECV";
	default: return "UNKNOWN";
	}
}

static const char *qp_state_str(uint32_t s)
{
	switch (s) {
	case IBV_QPS_RESET: return "RESET";
	case IBV_QPS_INIT: return "INIT";
	case IBV_QPS_RTR: return "RTR";
	case IBV_QPS_RTS: return "RTS";
	case IBV_QPS_SQD: return "SQD";
	case IBV_QPS_SQE: return "SQE";
	case IBV_QPS_ERR: return "ERR";
	default: return "UNKNOWN";
	}
}

/* Counters are updated while we read: each one atomically. */
static void stat_read(struct shca_stat_block *out,
		      const struct shca_stat_block *b)
{
	int i;

	for (i = 0; i < SHCA_STAT_MAX; i++)
		out->v[i] = __atomic_load_n(&b->v[i], __ATOMIC_RELAXED);
}

static void stat_sum(struct shca_stat_block *sum,
		     const struct shca_stat_block *b)
{
	int i;

	for (i = 0; i < SHCA_STAT_MAX; i++)
		sum->v[i] += b->v[i];
}

static void print_counters(const struct shca_stat_block *b, bool all)
{
	int i;

	for (i = 0; i < SHCA_STAT_MAX; i++)
		if (all || b->v[i])
			printf(" %s %llu", shca_stat_names[i],
			       (unsigned long long)b->v[i]);
	printf("\n");
}

/* The device name of a QP record: another process's bytes, so only
 * characters an interface name may hold, and never a space. */
static void dev_name(char *out, size_t len, const char *dev)
{
	char name[17];
	size_t i;

	memcpy(name, dev, 16);
	name[16] = '\0';
	for (i = 0; name[i]; i++)
		if (name[i] <= ' ' || name[i] > '~')
			name[i] = '?';
	snprintf(out, len, "%s", name[0] ? name : "?");
}

static int qp_cmp(const void *a, const void *b)
{
	const struct stat_qp *x = a, *y = b;
	int c = strcmp(x->dev, y->dev);

	if (c)
		return c;
	return x->qpn < y->qpn ? -1 : x->qpn > y->qpn;
}

static int proc_cmp(const void *a, const void *b)
{
	const struct stat_proc *x = a, *y = b;

	return x->pid < y->pid ? -1 : x->pid > y->pid;
}

/* The live QPs of an arena, by device and QPN.  Count, or -1. */
static int collect_qps(const struct stat_proc *p, struct stat_qp **out)
{
	const struct shca_arena_hdr *h = shca_arena_hdr(p->base);
	const uint64_t *tbl = shca_arena_ptr(p->base, p->size, h->qp_table_off,
					     SHCA_ARENA_QP_ENTRIES *
						     sizeof(uint64_t));
	struct stat_qp *qps = NULL;
	int n = 0, cap = 0;
	uint32_t i;

	*out = NULL;
	if (!tbl)
		return 0;
	for (i = 0; i < SHCA_ARENA_QP_ENTRIES; i++) {
		uint64_t off = __atomic_load_n(&tbl[i], __ATOMIC_ACQUIRE);
		const struct shca_qp_shm *q;
		struct stat_qp *s;
		uint32_t qpn;

		q = shca_arena_ptr(p->base, p->size, off, sizeof(*q));
		if (!q)
			continue;
		qpn = __atomic_load_n(&q->qpn, __ATOMIC_ACQUIRE);
		/* 0: being destroyed; another index: not a record */
		if (!qpn || shca_qpn_index(qpn) != i)
			continue;
		if (n == cap) {
			cap = cap ? 2 * cap : 64;
			s = realloc(qps, (size_t)cap * sizeof(*qps));
			if (!s) {
				free(qps);
				return -1;
			}
			qps = s;
		}
		s = &qps[n++];
		s->qpn = qpn;
		s->qp_type = __atomic_load_n(&q->qp_type, __ATOMIC_RELAXED);
		s->state = __atomic_load_n(&q->state, __ATOMIC_ACQUIRE);
		dev_name(s->dev, sizeof(s->dev), q->dev);
		stat_read(&s->stats, &q->stats);
	}
	if (n)
		qsort(qps, (size_t)n, sizeof(*qps), qp_cmp);
	*out = qps;
	return n;
}

/*
 * pid P slot S qps N ...                       the process's own block
 * pid P device softhca_D qps N ...             the sum of its QPs
 * pid P device softhca_D qp 0xQPN type T state S ...
 */
static int print_proc(const struct stat_proc *p, bool all)
{
	struct shca_stat_block b, sum;
	struct stat_qp *qps;
	int n, i, j;

	n = collect_qps(p, &qps);
	if (n < 0) {
		fprintf(stderr, "softhca: pid %d: out of memory\n",
			(int)p->pid);
		return 1;
	}
	stat_read(&b, &shca_arena_hdr(p->base)->stats);
	printf("pid %d slot %d qps %d", (int)p->pid, p->slot, n);
	print_counters(&b, all);
	for (i = 0; i < n; i = j) {
		memset(&sum, 0, sizeof(sum));
		for (j = i; j < n && !strcmp(qps[j].dev, qps[i].dev); j++)
			stat_sum(&sum, &qps[j].stats);
		printf("pid %d device softhca_%s qps %d", (int)p->pid,
		       qps[i].dev, j - i);
		print_counters(&sum, all);
		for (j = i; j < n && !strcmp(qps[j].dev, qps[i].dev); j++) {
			printf("pid %d device softhca_%s qp 0x%06x type %s "
			       "state %s", (int)p->pid, qps[j].dev, qps[j].qpn,
			       qp_type_str(qps[j].qp_type),
			       qp_state_str(qps[j].state));
			print_counters(&qps[j].stats, all);
		}
	}
	free(qps);
	return 0;
}

static int cmd_stat(int argc, char **argv)
{
	struct stat_proc *procs;
	bool all = false;
	long want = 0;
	int i, n = 0, ret = 0;

	for (i = 0; i < argc; i++) {
		char *end;

		if (!strcmp(argv[i], "--all")) {
			all = true;
		} else if (!strcmp(argv[i], "--pid") && i + 1 < argc) {
			errno = 0;
			want = strtol(argv[++i], &end, 10);
			if (errno || *end || want <= 0 || want > INT_MAX) {
				fprintf(stderr, "softhca: bad pid '%s'\n",
					argv[i]);
				return 2;
			}
		} else {
			usage(stderr);
			return 2;
		}
	}
	procs = calloc(SHCA_NUM_SLOTS, sizeof(*procs));
	if (!procs)
		return 1;
	/* every slot's socket: the processes of this user in this netns */
	for (i = 0; i < (int)SHCA_NUM_SLOTS; i++) {
		struct stat_proc *p = &procs[n];

		p->base = shca_peer_map_arena_ro(i, &p->pid, &p->size);
		if (!p->base) {
			if (errno != ECONNREFUSED && errno != ENOENT)
				fprintf(stderr, "softhca: slot %d: %s%s\n", i,
					strerror(errno),
					errno == EPROTO ?
						" (another softhca version?)" :
						"");
			continue;
		}
		if (want && p->pid != (pid_t)want) {
			munmap(p->base, p->size);
			continue;
		}
		p->slot = i;
		n++;
	}
	if (want && !n) {
		fprintf(stderr, "softhca: no softhca process with pid %ld "
			"here (this user, this network namespace)\n", want);
		ret = 1;
	}
	qsort(procs, (size_t)n, sizeof(*procs), proc_cmp);
	for (i = 0; i < n; i++) {
		ret |= print_proc(&procs[i], all);
		munmap(procs[i].base, procs[i].size);
	}
	free(procs);
	return ret;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	if (!strcmp(argv[1], "run"))
		return cmd_run(argc - 2, argv + 2);
	if (!strcmp(argv[1], "devices"))
		return cmd_devices();
	if (!strcmp(argv[1], "stat"))
		return cmd_stat(argc - 2, argv + 2);
	if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") ||
	    !strcmp(argv[1], "help")) {
		usage(stdout);
		return 0;
	}
	fprintf(stderr, "softhca: unknown command '%s'\n", argv[1]);
	usage(stderr);
	return 2;
}
