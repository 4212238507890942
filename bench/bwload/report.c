/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The run's counts and what bwload prints of them (load.h): the progress line for a person, the JSON
 * for the record and the last line for a script. Rates are requests sent per second: for an open
 * loop that is what shows whether the generator kept to its schedule; completions are in the counts.
 */
#include <inttypes.h>
#include <math.h>

#include "load.h"

#define NS_PER_US 1e3

uint64_t load_counts_errors(const struct load_counts *c)
{
	uint64_t n = 0;

	/* errors[BW_STATUS_OK] should stay 0; it is summed anyway, so that a reply counted both as ok and
	 * as an error breaks conservation instead of hiding */
	for (unsigned int s = 0; s < BW_STATUS_COUNT; s++)
		n += c->errors[s];
	return n;
}

bool load_counts_conserved(const struct load_counts *c)
{
	return c->sent == c->ok + load_counts_errors(c) + c->timeouts + c->malformed + c->in_flight;
}

void load_counts_add(struct load_counts *dst, const struct load_counts *src)
{
	dst->sent += src->sent;
	dst->ok += src->ok;
	for (unsigned int s = 0; s < BW_STATUS_COUNT; s++)
		dst->errors[s] += src->errors[s];
	dst->timeouts += src->timeouts;
	dst->malformed += src->malformed;
	dst->in_flight += src->in_flight;
	dst->datagrams_out += src->datagrams_out;
	dst->datagrams_in += src->datagrams_in;
	dst->late_replies += src->late_replies;
	dst->ok_past_deadline += src->ok_past_deadline;
}

static double per_second(uint64_t n, double seconds)
{
	return isfinite(seconds) && seconds > 0 ? (double)n / seconds : 0;
}

/* A latency for a person: three significant figures or so, in the unit that keeps it short. */
static void human_latency(char *buf, size_t cap, uint64_t ns)
{
	if (ns < 1000)
		snprintf(buf, cap, "%" PRIu64 "ns", ns);
	else if (ns < 999500) /* below this, "%.0f" of the microseconds is still under 1000 */
		snprintf(buf, cap, "%.0fus", (double)ns / 1e3);
	else if (ns < 999950000)
		snprintf(buf, cap, "%.1fms", (double)ns / 1e6);
	else
		snprintf(buf, cap, "%.2fs", (double)ns / 1e9);
}

void load_progress_print(FILE *f, double t_s, const struct load_counts *c, const struct load_hist *interval,
			 double rate)
{
	char p50[32] = "-", p99[32] = "-";

	if (interval->count > 0) {
		human_latency(p50, sizeof(p50), load_hist_percentile(interval, 50));
		human_latency(p99, sizeof(p99), load_hist_percentile(interval, 99));
	}
	fprintf(f,
		"t=%.0fs sent=%" PRIu64 " ok=%" PRIu64 " err=%" PRIu64 " timeout=%" PRIu64 " inflight=%" PRIu64
		" rate=%.0f/s p50=%s p99=%s\n",
		t_s, c->sent, c->ok, load_counts_errors(c), c->timeouts, c->in_flight, isfinite(rate) ? rate : 0,
		p50, p99);
}

static double pct_us(const struct load_hist *h, double pct)
{
	return (double)load_hist_percentile(h, pct) / NS_PER_US;
}

void load_report_json(FILE *f, const char *conf_json, const struct load_counts *c, const struct load_hist *h,
		      double seconds)
{
	fprintf(f, "{\n  \"conf\": %s,\n", conf_json != NULL && conf_json[0] != '\0' ? conf_json : "{}");
	fprintf(f, "  \"seconds\": %.6f,\n", isfinite(seconds) ? seconds : 0);
	fprintf(f,
		"  \"counts\": {\"sent\": %" PRIu64 ", \"ok\": %" PRIu64 ", \"errors\": %" PRIu64
		", \"timeouts\": %" PRIu64 ", \"malformed\": %" PRIu64 ", \"in_flight\": %" PRIu64
		", \"datagrams_out\": %" PRIu64 ", \"datagrams_in\": %" PRIu64 ", \"late_replies\": %" PRIu64
		", \"ok_past_deadline\": %" PRIu64 "},\n",
		c->sent, c->ok, load_counts_errors(c), c->timeouts, c->malformed, c->in_flight, c->datagrams_out,
		c->datagrams_in, c->late_replies, c->ok_past_deadline);
	fprintf(f, "  \"conserved\": %s,\n", load_counts_conserved(c) ? "true" : "false");
	fprintf(f, "  \"errors_by_status\": {");
	for (unsigned int s = BW_STATUS_OK + 1; s < BW_STATUS_COUNT; s++)
		fprintf(f, "%s\"%s\": %" PRIu64, s == BW_STATUS_OK + 1 ? "" : ", ", bw_status_name(s), c->errors[s]);
	fprintf(f, "},\n");
	fprintf(f,
		"  \"latency_us\": {\"count\": %" PRIu64 ", \"min\": %.3f, \"p50\": %.3f, \"p90\": %.3f, \"p99\": %.3f"
		", \"p99.9\": %.3f, \"p99.99\": %.3f, \"max\": %.3f, \"mean\": %.3f, \"saturated\": %" PRIu64 "},\n",
		h->count, h->count > 0 ? (double)h->min_ns / NS_PER_US : 0, pct_us(h, 50), pct_us(h, 90),
		pct_us(h, 99), pct_us(h, 99.9), pct_us(h, 99.99), h->count > 0 ? (double)h->max_ns / NS_PER_US : 0,
		load_hist_mean(h) / NS_PER_US, h->saturated);
	fprintf(f, "  \"rate\": %.3f,\n", per_second(c->sent, seconds));
	fprintf(f, "  \"ok_rate\": %.3f\n}\n", per_second(c->ok, seconds));
}

void load_report_line(FILE *out, const struct load_counts *c, const struct load_hist *h, double seconds)
{
	fprintf(out,
		"bwload sent=%" PRIu64 " ok=%" PRIu64 " errors=%" PRIu64 " timeouts=%" PRIu64 " malformed=%" PRIu64
		" conserved=%s rate=%.1f p50_us=%.1f p99_us=%.1f p999_us=%.1f p9999_us=%.1f max_us=%.1f\n",
		c->sent, c->ok, load_counts_errors(c), c->timeouts, c->malformed,
		load_counts_conserved(c) ? "yes" : "no", per_second(c->sent, seconds), pct_us(h, 50), pct_us(h, 99),
		pct_us(h, 99.9), pct_us(h, 99.99), h->count > 0 ? (double)h->max_ns / NS_PER_US : 0);
}
