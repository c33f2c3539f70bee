// SPDX-License-Identifier: MIT
/*
 * libshca_crash.so: tests/lib/crash.c's fatal-signal report in programs
 * that are not ours (rping, the ping-pongs), preloaded by the namespace
 * tests (tests/netns/lib.sh netns_pair).  A client that crashes once in
 * a few hundred CI runs then leaves its stack in the log, not only
 * "exit 139".  A program that installs its own handlers (libfabric)
 * replaces this one; SIGALRM is left alone (qperf uses it).
 */
#include "harness.h"

__attribute__((constructor)) static void crash_preload(void)
{
	harness_crash_handlers();
}
