/* SPDX-License-Identifier: MIT */
/*
 * Logging.  The level comes from SOFTHCA_LOG (error, warn, info, debug or
 * 0..4); messages go to stderr, or to the file named by SOFTHCA_LOG_FILE.
 * Data-path debug messages use shca_dbg_dp(), compiled out unless
 * SOFTHCA_DEBUG_DATAPATH is defined.
 */
#ifndef SOFTHCA_LOG_H
#define SOFTHCA_LOG_H

#include <stdarg.h>

enum shca_log_level {
	SHCA_LOG_NONE = 0,
	SHCA_LOG_ERR = 1,
	SHCA_LOG_WARN = 2,
	SHCA_LOG_INFO = 3,
	SHCA_LOG_DEBUG = 4,
};

extern int shca_log_level;

void shca_log_init(void);
void shca_vlog(int level, const char *func, const char *fmt, va_list ap);
void shca_log_at(int level, const char *func, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

#define shca_log(level, ...)                                       \
	do {                                                       \
		if ((level) <= shca_log_level)                     \
			shca_log_at(level, __func__, __VA_ARGS__); \
	} while (0)

#define shca_err(...) shca_log(SHCA_LOG_ERR, __VA_ARGS__)
#define shca_warn(...) shca_log(SHCA_LOG_WARN, __VA_ARGS__)
#define shca_info(...) shca_log(SHCA_LOG_INFO, __VA_ARGS__)
#define shca_dbg(...) shca_log(SHCA_LOG_DEBUG, __VA_ARGS__)

/* Warn once per call site: for conditions a program can trigger in a loop. */
#define shca_warn_once(...)                              \
	do {                                             \
		static int warned_;                      \
		if (!__atomic_exchange_n(&warned_, 1,    \
					 __ATOMIC_RELAXED)) \
			shca_warn(__VA_ARGS__);          \
	} while (0)

#define shca_info_once(...)                              \
	do {                                             \
		static int told_;                        \
		if (!__atomic_exchange_n(&told_, 1,      \
					 __ATOMIC_RELAXED)) \
			shca_info(__VA_ARGS__);          \
	} while (0)

#ifdef SOFTHCA_DEBUG_DATAPATH
#define shca_dbg_dp(...) shca_dbg(__VA_ARGS__)
#else
#define shca_dbg_dp(...) do { } while (0)
#endif

#endif
