/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What a ping or infer run prints: dims and dtype names, a failure's or a mismatch's line (the first
 * ERRORS_SHOWN_MAX, then only counted), and the summary (with the datagrams the run sent and
 * received) whose last line scripts parse.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bwcli.h"

void format_dims(char *out, size_t cap, uint8_t rank, const uint32_t *dims)
{
	size_t off = 0;
	uint8_t d;

	off += (size_t)snprintf(out + off, cap - off, "[");
	for (d = 0; d < rank && off < cap; d++) {
		if (dims[d] == 0)
			off += (size_t)snprintf(out + off, cap - off, "%s?", d ? "," : "");
		else
			off += (size_t)snprintf(out + off, cap - off, "%s%u", d ? "," : "", dims[d]);
	}
	if (off < cap)
		snprintf(out + off, cap - off, "]");
}

const char *dtype_label(uint32_t dtype)
{
	static char unknown[32];
	const char *name = bwc_dtype_name(dtype);

	if (name != NULL)
		return name;
	snprintf(unknown, sizeof(unknown), "dtype(%u)", dtype);
	return unknown;
}

/* Describes a call's failure on stderr: the server's status and message, or the local error. */
void print_failure(const char *what, int rc, const struct bwc *c)
{
	if (rc > 0)
		fprintf(stderr, "%s: %s: %s\n", what, bw_status_name((uint32_t)rc), bwc_last_error(c));
	else if (rc == -ETIMEDOUT)
		fprintf(stderr, "%s: timeout: %s\n", what, bwc_last_error(c));
	else
		fprintf(stderr, "%s: %s: %s\n", what, strerror(-rc), bwc_last_error(c));
}

void note_failure(struct run_stats *st, const char *what, int rc, const struct bwc *c)
{
	if (st->errors_shown < ERRORS_SHOWN_MAX)
		print_failure(what, rc, c);
	else if (st->errors_shown == ERRORS_SHOWN_MAX)
		fprintf(stderr, "(further failures are counted, not shown)\n");
	st->errors_shown++;
}

/* An OK reply that failed a check (--expect-echo, --expect): why says what, after the request's name. */
void note_mismatch(struct run_stats *st, const char *what, const char *why)
{
	if (st->errors_shown < ERRORS_SHOWN_MAX)
		fprintf(stderr, "%s: %s\n", what, why);
	else if (st->errors_shown == ERRORS_SHOWN_MAX)
		fprintf(stderr, "(further failures are counted, not shown)\n");
	st->errors_shown++;
}

/* Adds the datagrams of the call just made, failed or not, to the run's. */
void note_datagrams(struct run_stats *st, const struct bwc *c)
{
	const struct bwc_reply *r = bwc_last_reply(c);

	st->segments_sent += r->segments_sent;
	st->segments_received += r->segments_received;
	st->segments_withheld += r->segments_withheld;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Nearest-rank percentile of sorted values, in µs. */
static double percentile_us(const uint64_t *sorted, uint64_t n, unsigned pct)
{
	uint64_t rank;

	if (n == 0)
		return 0.0;
	rank = (n * pct + 99) / 100;
	if (rank == 0)
		rank = 1;
	return (double)sorted[rank - 1] / 1000.0;
}

void print_summary(const char *what, const struct cli *cli, struct run_stats *st)
{
	double p50, p90, p99;

	qsort(st->lat_ns, st->ok, sizeof(st->lat_ns[0]), cmp_u64);
	p50 = percentile_us(st->lat_ns, st->ok, 50);
	p90 = percentile_us(st->lat_ns, st->ok, 90);
	p99 = percentile_us(st->lat_ns, st->ok, 99);

	printf("--- %s:%u %s: %" PRIu64 " sent, %" PRIu64 " ok, %" PRIu64 " errors, %" PRIu64
	       " timeouts%s\n",
	       cli->opts.host, (unsigned)cli->opts.port, what, st->sent, st->ok, st->errors,
	       st->timeouts, g_stop ? " (interrupted)" : "");
	if (st->ok > 0)
		printf("latency us: min %.1f p50 %.1f p90 %.1f p99 %.1f max %.1f\n",
		       (double)st->lat_ns[0] / 1000.0, p50, p90, p99,
		       (double)st->lat_ns[st->ok - 1] / 1000.0);
	if (st->segments_withheld != 0)
		printf("segments: %" PRIu64 " sent, %" PRIu64 " received, %" PRIu64 " withheld (--drop-permille)\n",
		       st->segments_sent, st->segments_received, st->segments_withheld);
	else
		printf("segments: %" PRIu64 " sent, %" PRIu64 " received\n", st->segments_sent, st->segments_received);
	printf("sent=%" PRIu64 " ok=%" PRIu64 " errors=%" PRIu64 " timeouts=%" PRIu64
	       " p50_us=%.1f p99_us=%.1f\n",
	       st->sent, st->ok, st->errors, st->timeouts, p50, p99);
}
