// SPDX-License-Identifier: MIT
/*
 * The port follows its interface's link: the helper that
 * tests/netns/test_port_netns.sh runs in a namespace while it pulls and
 * plugs the cable there (not a test by itself).
 *
 *   netns_port_events DEV PHASE...
 *
 * Opens DEV twice (every open context hears port events) and softhca_lo
 * once (which must hear none), checks that port 1 is ACTIVE / LinkUp, and
 * prints "ready".  Then, for each PHASE, waits for the event on both
 * contexts of DEV, checks ibv_query_port on each, and prints "phase N
 * done": the script's cue for its next change.
 *
 *   down:P   IBV_EVENT_PORT_ERR, then IBV_PORT_DOWN with phys_state P
 *            (2 Polling: up without carrier; 3 Disabled: admin down)
 *   up       IBV_EVENT_PORT_ACTIVE, then IBV_PORT_ACTIVE, phys_state 5
 *
 * Last, no event is left on any context.  Each wait is bounded
 * (PORT_EVENTS_WAIT seconds, default 30): a bound, not a timing check.
 * Exit 0 when every check passed, 1 otherwise ("FAIL: ..." says which).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <infiniband/verbs.h>

#define NCTX 2

static int failures;

#define CHECK(cond, ...)                                          \
	do {                                                      \
		if (cond) {                                       \
			printf("ok: ");                           \
		} else {                                          \
			printf("FAIL: ");                         \
			failures++;                               \
		}                                                 \
		printf(__VA_ARGS__);                              \
		printf("\n");                                     \
		fflush(stdout);                                   \
	} while (0)

static struct ibv_context *open_named(struct ibv_device **list,
				      const char *name)
{
	struct ibv_context *ctx;
	int flags;

	for (; *list; list++)
		if (!strcmp(ibv_get_device_name(*list), name))
			break;
	if (!*list)
		return NULL;
	ctx = ibv_open_device(*list);
	if (!ctx)
		return NULL;
	/* ibv_get_async_event answers EAGAIN rather than block */
	flags = fcntl(ctx->async_fd, F_GETFL);
	if (flags < 0 || fcntl(ctx->async_fd, F_SETFL, flags | O_NONBLOCK)) {
		ibv_close_device(ctx);
		return NULL;
	}
	return ctx;
}

static long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The next async event of ctx within wait_ms: 0, or -1 (none came). */
static int next_event(struct ibv_context *ctx, int wait_ms,
		      struct ibv_async_event *ev)
{
	long long deadline = now_ms() + wait_ms;

	for (;;) {
		struct pollfd pfd = { .fd = ctx->async_fd, .events = POLLIN };
		long long left = deadline - now_ms();

		if (!ibv_get_async_event(ctx, ev))
			return 0;
		if (errno != EAGAIN || left <= 0)
			return -1;
		poll(&pfd, 1, (int)left);
	}
}

static void check_port(struct ibv_context *ctx, int i,
		       enum ibv_port_state state, int phys)
{
	struct ibv_port_attr pa;
	int ret;

	memset(&pa, 0xa5, sizeof(pa));
	ret = ibv_query_port(ctx, 1, &pa);
	CHECK(ret == 0 && pa.state == state && pa.phys_state == phys,
	      "context %d: ibv_query_port: %d, state %s (%d), phys_state %d"
	      " (expected %s, %d)", i, ret, ibv_port_state_str(pa.state),
	      pa.state, pa.phys_state, ibv_port_state_str(state), phys);
}

static void expect_event(struct ibv_context *ctx, int i, int wait_ms,
			 enum ibv_event_type type)
{
	struct ibv_async_event ev;

	if (next_event(ctx, wait_ms, &ev)) {
		CHECK(0, "context %d: %s within %d s", i,
		      ibv_event_type_str(type), wait_ms / 1000);
		return;
	}
	CHECK(ev.event_type == type && ev.element.port_num == 1,
	      "context %d: %s on port %d (expected %s on port 1)", i,
	      ibv_event_type_str(ev.event_type), ev.element.port_num,
	      ibv_event_type_str(type));
	ibv_ack_async_event(&ev);
}

static void expect_none(struct ibv_context *ctx, const char *what)
{
	struct ibv_async_event ev;

	if (ibv_get_async_event(ctx, &ev)) {
		CHECK(errno == EAGAIN, "%s: no event left (%s)", what,
		      strerror(errno));
		return;
	}
	CHECK(0, "%s: no event left, but %s", what,
	      ibv_event_type_str(ev.event_type));
	ibv_ack_async_event(&ev);
}

int main(int argc, char **argv)
{
	struct ibv_context *ctx[NCTX], *lo;
	struct ibv_device **list;
	const char *env = getenv("PORT_EVENTS_WAIT");
	int wait_ms = (env ? atoi(env) : 30) * 1000;
	int i, p;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc < 2) {
		fprintf(stderr, "usage: %s DEV [down:P|up]...\n", argv[0]);
		return 2;
	}
	list = ibv_get_device_list(NULL);
	if (!list) {
		printf("FAIL: ibv_get_device_list: %s\n", strerror(errno));
		return 1;
	}
	for (i = 0; i < NCTX; i++) {
		ctx[i] = open_named(list, argv[1]);
		if (!ctx[i]) {
			printf("FAIL: cannot open %s\n", argv[1]);
			return 1;
		}
	}
	lo = open_named(list, "softhca_lo");
	ibv_free_device_list(list);
	CHECK(lo != NULL, "softhca_lo opened too");
	for (i = 0; i < NCTX; i++)
		check_port(ctx[i], i, IBV_PORT_ACTIVE, 5);
	printf("ready\n");
	fflush(stdout);

	for (p = 2; p < argc; p++) {
		int down = !strncmp(argv[p], "down:", 5);
		int phys = down ? atoi(argv[p] + 5) : 5;

		if (!down && strcmp(argv[p], "up")) {
			printf("FAIL: phase '%s'?\n", argv[p]);
			return 2;
		}
		for (i = 0; i < NCTX; i++)
			expect_event(ctx[i], i, wait_ms,
				     down ? IBV_EVENT_PORT_ERR :
					    IBV_EVENT_PORT_ACTIVE);
		for (i = 0; i < NCTX; i++)
			check_port(ctx[i], i, down ? IBV_PORT_DOWN :
						     IBV_PORT_ACTIVE, phys);
		printf("phase %d done (%s)\n", p - 1, argv[p]);
		fflush(stdout);
	}

	for (i = 0; i < NCTX; i++) {
		char what[32];

		snprintf(what, sizeof(what), "context %d", i);
		expect_none(ctx[i], what);
	}
	if (lo) {
		check_port(lo, NCTX, IBV_PORT_ACTIVE, 5);
		expect_none(lo, "softhca_lo");
		ibv_close_device(lo);
	}
	for (i = 0; i < NCTX; i++)
		CHECK(ibv_close_device(ctx[i]) == 0, "context %d closed", i);
	printf("%s\n", failures ? "failed" : "passed");
	return failures ? 1 : 0;
}
