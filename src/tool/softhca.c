// SPDX-License-Identifier: MIT
/*
 * softhca: the command-line tool.
 *
 *   softhca run -- CMD [ARGS...]   run CMD with softhca's libibverbs and
 *                                  librdmacm first on the library path,
 *                                  and its path shim preloaded
 *   softhca env                    the same environment, as shell
 *                                  export lines
 *   softhca devices                list devices, ports and GIDs
 *   softhca stat [--pid PID] [--all]
 *                                  the counters of running processes
 */
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <infiniband/verbs.h>

#include "../common/stat.h"
#include "../sysfs/counters.h"
#include "runenv.h"

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
		"       softhca env\n"
		"       softhca devices\n"
		"       softhca stat [--pid PID] [--all]\n"
		"\n"
		"  run      run CMD on the soft stack: softhca's libibverbs.so.1\n"
		"           and librdmacm.so.1 come first on LD_LIBRARY_PATH,\n"
		"           and its path shim (libsofthca_path.so) first on\n"
		"           LD_PRELOAD, so that programs that look for devices\n"
		"           in /dev/infiniband and /sys/class/infiniband find\n"
		"           them; what these variables held stays after them\n"
		"  env      print that environment as shell export lines:\n"
		"             eval \"$(softhca env)\"\n"
		"  devices  list softhca devices, their ports and GID tables\n"
		"  stat     the counters of the running softhca processes of\n"
		"           this user in this network namespace (same\n"
		"           SOFTHCA_PORT_BASE), read without disturbing them:\n"
		"           --pid PID one process only; --all zeros too\n"
		"           (and engine_wakeups, which looking moves).\n"
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

static int get_env(struct runenv *e)
{
	const char *missing;
	int ret = runenv_get(e, &missing);

	if (ret == -ENOENT && missing)
		fprintf(stderr, "softhca: cannot find %s next to this "
			"program (in ../lib)\n", missing);
	else if (ret)
		fprintf(stderr, "softhca: %s\n", strerror(-ret));
	return ret;
}

static int cmd_run(int argc, char **argv)
{
	struct runenv e;

	if (argc > 0 && !strcmp(argv[0], "--")) {
		argc--;
		argv++;
	}
	if (argc < 1) {
		usage(stderr);
		return 2;
	}
	if (get_env(&e))
		return 1;
	if (setenv("LD_LIBRARY_PATH", e.ld_library_path, 1) ||
	    setenv("LD_PRELOAD", e.ld_preload, 1)) {
		fprintf(stderr, "softhca: %s\n", strerror(errno));
		return 1;
	}
	runenv_free(&e);
	execvp(argv[0], argv);
	fprintf(stderr, "softhca: cannot run %s: %s\n", argv[0],
		strerror(errno));
	return 127;
}

/* A shell word: single-quoted, each ' as '\''. */
static void print_quoted(const char *s)
{
	putchar('\'');
	for (; *s; s++) {
		if (*s == '\'')
			fputs("'\\''", stdout);
		else
			putchar(*s);
	}
	putchar('\'');
}

/* `eval "$(softhca env)"`: the environment of `softhca run`, exported. */
static int cmd_env(int argc, char **argv)
{
	struct runenv e;

	(void)argv;
	if (argc) {
		usage(stderr);
		return 2;
	}
	if (get_env(&e))
		return 1;
	fputs("export LD_LIBRARY_PATH=", stdout);
	print_quoted(e.ld_library_path);
	fputs("\nexport LD_PRELOAD=", stdout);
	print_quoted(e.ld_preload);
	putchar('\n');
	runenv_free(&e);
	return fflush(stdout) ? 1 : 0;
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
		/* engine_wakeups moves whenever the process is looked at
		 * (the tool's connection wakes its engine): --all only */
		if (all || (b->v[i] && i != SHCA_STAT_ENGINE_WAKEUPS))
			printf(" %s %llu", shca_stat_names[i],
			       (unsigned long long)b->v[i]);
	printf("\n");
}

/*
 * pid P slot S qps N ...                       the process's own block
 * pid P device softhca_D qps N ...             the sum of its QPs
 * pid P device softhca_D qp 0xQPN type T state S ...
 */
static void print_proc(const struct shca_counters_proc *p, bool all)
{
	const struct shca_counters_qp *qps = p->qps;
	struct shca_stat_block sum;
	int n = p->nqps, i, j;

	printf("pid %d slot %d qps %d", (int)p->pid, p->slot, n);
	print_counters(&p->stats, all);
	/* the QPs come sorted by device, then QPN */
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
}

static void stat_error(int slot, int err, void *arg)
{
	(void)arg;
	fprintf(stderr, "softhca: slot %d: %s%s\n", slot, strerror(err),
		err == EPROTO ? " (another softhca version?)" : "");
}

static int cmd_stat(int argc, char **argv)
{
	struct shca_counters_proc *procs;
	bool all = false;
	long want = 0;
	int i, n;

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
	/* a stopped owner must not hold the tool for long */
	n = shca_counters_collect((pid_t)want, 5, &procs, stat_error, NULL);
	if (n < 0) {
		fprintf(stderr, "softhca: %s\n", strerror(-n));
		return 1;
	}
	for (i = 0; i < n; i++)
		print_proc(&procs[i], all);
	shca_counters_free(procs, n);
	if (want && !n) {
		fprintf(stderr, "softhca: no softhca process with pid %ld "
			"here (this user, this network namespace)\n", want);
		return 1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	if (!strcmp(argv[1], "run"))
		return cmd_run(argc - 2, argv + 2);
	if (!strcmp(argv[1], "env"))
		return cmd_env(argc - 2, argv + 2);
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
