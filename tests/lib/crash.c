// SPDX-License-Identifier: MIT
/*
 * A case that dies on a signal prints where: the crashing thread's frames,
 * each resolved to function and line by addr2line (module and offset when
 * addr2line is missing).  A crash that happens once in twenty CI runs
 * leaves no core file behind; this leaves its stack in the log.
 *
 * Installed in each case's process (and inherited by the processes it
 * forks).  Not under the sanitizers: they print a better report of their
 * own and own these signals.  The handler is not async-signal-safe
 * (dladdr, fork+exec of addr2line): the process is dying anyway, and
 * the worst outcome is a shorter report.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <execinfo.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <ucontext.h>
#include <unistd.h>
#include <stdlib.h>
#include <linux/futex.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "harness.h"

#define MAX_FRAMES 48

static void say(const char *s)
{
	ssize_t r = write(STDERR_FILENO, s, strlen(s));

	(void)r;
}

/* One frame: "addr2line -f -i -p -C -e module offset", or module+offset.
 * A return address points after its call: back is 1 to look inside it. */
static void frame(void *pc, int back)
{
	char off[32], line[512];
	Dl_info info;
	pid_t pid;

	if (!dladdr((char *)pc - back, &info) || !info.dli_fname) {
		snprintf(line, sizeof(line), "    %p (no module)\n", pc);
		say(line);
		return;
	}
	snprintf(off, sizeof(off), "0x%lx",
		 (unsigned long)((uintptr_t)pc - back -
				 (uintptr_t)info.dli_fbase));
	snprintf(line, sizeof(line), "    %s+%s: ", info.dli_fname, off);
	say(line);
	pid = fork();
	if (pid == 0) {
		dup2(STDERR_FILENO, STDOUT_FILENO);
		execlp("addr2line", "addr2line", "-f", "-i", "-p", "-C", "-e",
		       info.dli_fname, off, (char *)NULL);
		say("(no addr2line)\n");
		_exit(127);
	}
	if (pid > 0)
		waitpid(pid, NULL, 0);
	else
		say("(cannot fork)\n");
}

/* The lines of /proc/self/maps around addr: is it mapped, and by what */
static void maps_near(void *addr)
{
	uintptr_t a = (uintptr_t)addr, lo, hi;
	char line[512], prev[512] = "";
	bool after = false;
	FILE *f = fopen("/proc/self/maps", "r");

	if (!f)
		return;
	say("  mappings around that address:\n");
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%lx-%lx", &lo, &hi) != 2)
			continue;
		if (hi <= a) {
			snprintf(prev, sizeof(prev), "%s", line);
			continue;
		}
		if (prev[0]) {
			say("    ");
			say(prev);
			prev[0] = 0;
		}
		say(lo <= a ? "  > " : "    ");
		say(line);
		if (after || lo > a)
			break;
		after = true;
	}
	fclose(f);
}

static void on_crash(int sig, siginfo_t *si, void *uc)
{
#ifdef REG_RIP
	void *pc = (void *)((ucontext_t *)uc)->uc_mcontext.gregs[REG_RIP];
#else
	void *pc = NULL;
#endif
	void *pcs[MAX_FRAMES];
	char line[160];
	int i, n, from = 2;

	snprintf(line, sizeof(line),
		 "  CRASH: signal %d (%s) in thread %ld, address %p; stack:\n",
		 sig, strsignal(sig), (long)syscall(SYS_gettid), si->si_addr);
	say(line);
	if (sig == SIGSEGV || sig == SIGBUS) {
		struct robust_list_head *rh = NULL;
		size_t rl = 0;

		/* a process-shared robust mutex links itself to the list's
		 * head: a held one in memory gone faults the next lock */
		if (!syscall(SYS_get_robust_list, 0, &rh, &rl) && rh) {
			snprintf(line, sizeof(line),
				 "  robust list: head %p, pending %p\n",
				 (void *)rh->list.next,
				 (void *)rh->list_op_pending);
			say(line);
		}
		maps_near(si->si_addr);
	}
	if (pc)
		frame(pc, 0);	/* the faulting instruction itself */
	n = backtrace(pcs, MAX_FRAMES);
	/* this handler, the signal trampoline, then the faulting frame */
	for (i = 0; i < n; i++)
		if (pcs[i] == pc)
			from = i + 1;
	for (i = from; i < n; i++)
		frame(pcs[i], 1);
	signal(sig, SIG_DFL);
	raise(sig);
}

/* gdb's "thread apply all bt" of process pid, on stderr */
static void gdb_stacks(pid_t pid)
{
	char arg[16], line[96];
	pid_t g;

	snprintf(arg, sizeof(arg), "%d", (int)pid);
	snprintf(line, sizeof(line), "  --- process %d, every thread:\n",
		 (int)pid);
	say(line);
	g = fork();
	if (g == 0) {
		dup2(STDERR_FILENO, STDOUT_FILENO);
		execlp("gdb", "gdb", "-batch", "-nx", "-iex",
		       "set debuginfod enabled off", "-p", arg, "-ex",
		       "thread apply all bt", (char *)NULL);
		say("(no gdb)\n");
		_exit(127);
	}
	if (g > 0)
		waitpid(g, NULL, 0);
}

/* The processes this one forked (a case's peers), from /proc; no stdio
 * (malloc) in a signal handler */
static void gdb_children(void)
{
	char path[64], buf[512], *p, *end;
	ssize_t n;
	long c;
	int fd;

	snprintf(path, sizeof(path), "/proc/self/task/%d/children",
		 (int)getpid());
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return;
	buf[n] = 0;
	p = buf;
	while (*p) {
		c = strtol(p, &end, 10);
		if (end == p)
			break;
		gdb_stacks((pid_t)c);
		p = end;
	}
}

/*
 * The case's time ran out (harness alarm): every thread of it and of the
 * processes it forked, before it dies of SIGALRM as before.  A hang that
 * shows once in a hundred runs is found from these stacks.
 */
static void on_timeout(int sig)
{
	int saved = errno;

	say("  TIMEOUT: the stacks of this case's processes follow\n");
	prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
	gdb_stacks(getpid());
	gdb_children();
	signal(sig, SIG_DFL);
	errno = saved;
	raise(sig);
}

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SANITIZED 1
#else
#define SANITIZED 0
#endif

/* Fatal signals print the stack (not under the sanitizers) */
void harness_crash_handlers(void)
{
	static const int sigs[] = { SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT };
	static char altstack[64 * 1024];
	stack_t ss = { .ss_sp = altstack, .ss_size = sizeof(altstack) };
	struct sigaction sa;
	void *warm[1];
	unsigned int i;

	if (SANITIZED)
		return;
	/* backtrace() loads libgcc on first use: not inside the handler */
	backtrace(warm, 1);
	sigaltstack(&ss, NULL);
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_crash;
	/* SA_RESTART: softhca reads a handler without it as "a signal ends
	 * a wait with EINTR" (shca_signals_restart), and the cases that test
	 * that rule install their own handlers */
	sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESETHAND | SA_RESTART;
	sigemptyset(&sa.sa_mask);
	for (i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		sigaction(sigs[i], &sa, NULL);
}

void harness_crash_report(void)
{
	struct sigaction ta;

	harness_crash_handlers();
	/* a case that sets its own SIGALRM handler replaces this one */
	memset(&ta, 0, sizeof(ta));
	ta.sa_handler = on_timeout;
	ta.sa_flags = SA_RESETHAND | SA_RESTART;
	sigemptyset(&ta.sa_mask);
	sigaction(SIGALRM, &ta, NULL);
}
