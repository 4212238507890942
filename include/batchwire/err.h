/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * One-line error messages into a caller's buffer, the way every module reports why a call failed
 * (err/cap parameters, or a context's): the one helper the runtime, gpu/ (its device modules link
 * nothing of the runtime) and the client library share, so header-only.
 */
#ifndef BATCHWIRE_ERR_H
#define BATCHWIRE_ERR_H

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

/** Writes the message into err when there is room (err NULL or cap 0: none is wanted). \return rc. */
static inline int bw_verr(char *err, size_t cap, int rc, const char *fmt, va_list ap)
	__attribute__((format(printf, 4, 0)));

static inline int bw_verr(char *err, size_t cap, int rc, const char *fmt, va_list ap)
{
	if (err != NULL && cap > 0)
		vsnprintf(err, cap, fmt, ap);
	return rc;
}

/**
 * printf-style bw_verr, so that a failing path is one statement: return bw_err(err, cap, -EINVAL, ...).
 * \return rc
 */
static inline int bw_err(char *err, size_t cap, int rc, const char *fmt, ...) __attribute__((format(printf, 4, 5)));

static inline int bw_err(char *err, size_t cap, int rc, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	rc = bw_verr(err, cap, rc, fmt, ap);
	va_end(ap);
	return rc;
}

#endif /* BATCHWIRE_ERR_H */
