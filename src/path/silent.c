// SPDX-License-Identifier: MIT
/*
 * The shim's log sink (common/log.h): it runs inside programs that do not
 * expect softhca to print, so it never does, and it has no constructor.
 * Defining these keeps common/log.c (and its constructor) out of the
 * shim's link.
 */
#include <stdarg.h>

#include "../common/log.h"

int shca_log_level = SHCA_LOG_NONE;

void shca_log_init(void)
{
}

void shca_vlog(int level, const char *func, const char *fmt, va_list ap)
{
	(void)level;
	(void)func;
	(void)fmt;
	(void)ap;
}

void shca_log_at(int level, const char *func, const char *fmt, ...)
{
	(void)level;
	(void)func;
	(void)fmt;
}
