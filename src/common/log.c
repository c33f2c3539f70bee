// SPDX-License-Identifier: MIT
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>
#include <pthread.h>

#include "log.h"

int shca_log_level = SHCA_LOG_WARN;
static FILE *log_file;

static int parse_level(const char *s)
{
	static const char *const names[] = { "none", "error", "warn", "info",
					      "debug" };
	unsigned int i;

	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (!strcasecmp(s, names[i]))
			return (int)i;
	if (s[0] >= '0' && s[0] <= '9')
		return atoi(s) > SHCA_LOG_DEBUG ? SHCA_LOG_DEBUG : atoi(s);
	return SHCA_LOG_WARN;
}

static void log_init_once(void)
{
	const char *lvl = getenv("SOFTHCA_LOG");
	const char *file = getenv("SOFTHCA_LOG_FILE");

	if (lvl)
		shca_log_level = parse_level(lvl);
	if (file)
		log_file = fopen(file, "ae");
}

void shca_log_init(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;

	pthread_once(&once, log_init_once);
}

void shca_vlog(int level, const char *func, const char *fmt, va_list ap)
{
	static const char *const tags[] = { "", "error", "warning", "info",
					     "debug" };
	FILE *out = log_file ? log_file : stderr;
	char msg[512];

	vsnprintf(msg, sizeof(msg), fmt, ap);
	fprintf(out, "softhca[%d] %s: %s%s%s\n", (int)getpid(),
		tags[level < 0 ? 0 : level > 4 ? 4 : level],
		level >= SHCA_LOG_DEBUG ? func : "",
		level >= SHCA_LOG_DEBUG ? ": " : "", msg);
	fflush(out);
}

void shca_log_at(int level, const char *func, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	shca_vlog(level, func, fmt, ap);
	va_end(ap);
}

__attribute__((constructor)) static void log_ctor(void)
{
	shca_log_init();
}
