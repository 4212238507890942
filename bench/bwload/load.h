/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * bwload's parts that know no network: the latency histogram, the arrival schedule, the request mix
 * and the run's counts. DPDK-free and clock-free (every time is a nanosecond count the caller
 * passes), so that tests drive them with a scripted clock. bwload.c puts them on a port.
 */
#ifndef BW_LOAD_H
#define BW_LOAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <batchwire/inputs.h> /* bw_splitmix64, to seed the stream below */
#include <batchwire/status.h>
#include <batchwire/wire.h>

/* ---- random stream -------------------------------------------------------------------------------
 * xorshift64* (Vigna): the Poisson schedule's gaps and the mix's picks. Zero is its fixed point, so a
 * state comes from load_rng_seed, which never returns it; the same seed gives the same stream on
 * every host. */
static inline uint64_t load_rng_seed(uint64_t seed)
{
	uint64_t state = bw_splitmix64(&seed);

	return state != 0 ? state : UINT64_C(0x9e3779b97f4a7c15);
}

static inline uint64_t load_rng_next(uint64_t *state)
{
	uint64_t x = *state;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*state = x;
	return x * UINT64_C(0x2545f4914f6cdd1d);
}

/* ---- histogram (hist.c) -------------------------------------------------------------------------
 * Log-linear, as HdrHistogram: values below 2^LOAD_HIST_SUB_BITS ns are exact; above, each power of
 * two is cut into 2^(LOAD_HIST_SUB_BITS - 1) equal buckets, so a value is known within 1/64 (1.6%)
 * of itself. Values from 0 to LOAD_HIST_MAX_NS - 1 (about 18 minutes): that is what the buckets
 * cover; LOAD_HIST_MAX_NS and above count in the last bucket and raise `saturated`. Plain counters:
 * one histogram per thread, merged when read. */
#define LOAD_HIST_SUB_BITS 7
#define LOAD_HIST_MAX_NS (UINT64_C(1) << 40)
#define LOAD_HIST_BUCKETS ((40 - LOAD_HIST_SUB_BITS + 2) << (LOAD_HIST_SUB_BITS - 1))

struct load_hist {
	uint64_t count;
	uint64_t min_ns;    /* UINT64_MAX while empty */
	uint64_t max_ns;
	uint64_t saturated; /* values at or above LOAD_HIST_MAX_NS */
	double sum_ns;
	uint64_t buckets[LOAD_HIST_BUCKETS];
};

void load_hist_init(struct load_hist *h);
void load_hist_record(struct load_hist *h, uint64_t ns);
/** Adds src's values to dst. */
void load_hist_merge(struct load_hist *dst, const struct load_hist *src);
/**
 * The value at or below which pct percent of the values lie (pct in 0..100): the upper edge of the
 * bucket that holds that rank, never above max_ns nor below min_ns. 0 when empty.
 */
uint64_t load_hist_percentile(const struct load_hist *h, double pct);
/** The mean, 0 when empty. */
double load_hist_mean(const struct load_hist *h);

/* ---- schedule (sched.c) --------------------------------------------------------------------------
 * When requests are due. Open loop (fixed rate, or Poisson arrivals at a mean rate): request i's
 * intended send time is fixed by the schedule alone, whatever the replies do, and latency is
 * measured from it (no coordinated omission: a stalled generator or server shows as latency, not
 * as fewer samples). Request 0 is due at start_ns in both open modes. Closed loop: N requests
 * outstanding, each sent when one completes. */
enum load_mode {
	LOAD_MODE_FIXED,   /* every 1/rate seconds */
	LOAD_MODE_POISSON, /* exponential gaps of mean 1/rate (a fixed-seed xorshift stream) */
	LOAD_MODE_CLOSED,  /* `outstanding` in flight */
};

struct load_sched {
	enum load_mode mode;
	double rate;          /* requests per second (open loop) */
	uint32_t outstanding; /* closed loop */
	uint64_t start_ns;
	uint64_t next_ns;     /* open loop: the next request's intended send time */
	uint64_t issued;      /* requests handed out by load_sched_due */
	uint64_t limit;       /* stop after this many (0: no limit) */
	uint64_t rng;
};

/** \return 0, or -EINVAL (rate not finite and > 0 in open loop, outstanding 0 in closed loop). */
int load_sched_init(struct load_sched *s, enum load_mode mode, double rate, uint32_t outstanding, uint64_t limit,
		    uint64_t start_ns, uint64_t seed);
/**
 * The requests due at now_ns: up to max of them, their intended send times in when[] (open loop:
 * the schedule's, oldest first, possibly in the past when the caller fell behind; closed loop:
 * now_ns, as many as outstanding - in_flight). \return how many.
 */
unsigned int load_sched_due(struct load_sched *s, uint64_t now_ns, uint32_t in_flight, uint64_t *when,
			    unsigned int max);
/** \return true once `limit` requests have been handed out. */
bool load_sched_done(const struct load_sched *s);

/* ---- request mix (mix.c) -------------------------------------------------------------------------
 * What to send, from a spec of entries separated by ';', each of comma-separated key=value pairs:
 *   model=NAME (required), weight=N (default 1), rows=N (default 1), priority=N (default 0),
 *   deadline_us=N (default 0: the model's), input=NAME:FILE.npy (repeatable; default: every input
 *   generated from MODEL_INFO, as bwrun generates it)
 * e.g. "model=mlp,weight=3;model=r50,input=image:cat.npy,deadline_us=50000".
 * Bounds: weight 1..2^32-1, rows 1..65535, priority 0..255, deadline_us 0..2^32-1; input= splits at
 * its last ':' (a tensor may be named "x:0") and each input name once per entry. */
#define LOAD_MIX_MAX 16
#define LOAD_MIX_INPUTS_MAX 8
#define LOAD_NAME_MAX 256
#define LOAD_PATH_MAX 1024

struct load_mix_entry {
	char model[LOAD_NAME_MAX];
	uint32_t weight;
	uint32_t rows;
	uint8_t priority;
	uint32_t deadline_us;
	unsigned int nb_inputs;
	char input_name[LOAD_MIX_INPUTS_MAX][LOAD_NAME_MAX];
	char input_path[LOAD_MIX_INPUTS_MAX][LOAD_PATH_MAX];
};

struct load_mix {
	unsigned int nb_entries;
	struct load_mix_entry entries[LOAD_MIX_MAX];
	uint64_t weight_total;
};

/** Parses spec into mix. \return 0, or -EINVAL with one line in err naming the entry and the key. */
int load_mix_parse(const char *spec, struct load_mix *mix, char *err, size_t cap);
/**
 * A weighted pick: the index of an entry, entry i with probability weight_i / weight_total.
 * \param rng  a state from load_rng_seed, advanced by one draw
 */
unsigned int load_mix_pick(const struct load_mix *mix, uint64_t *rng);

/* ---- counts and report (report.c) ---------------------------------------------------------------- */
struct load_counts {
	uint64_t sent;                      /* requests whose every datagram left */
	uint64_t ok;
	uint64_t errors[BW_STATUS_COUNT];   /* error replies by status (OK unused) */
	uint64_t timeouts;                  /* no reply within the timeout */
	uint64_t malformed;                 /* a reply that broke the protocol */
	uint64_t in_flight;                 /* at the end: should be 0 after the drain */
	uint64_t datagrams_out;
	uint64_t datagrams_in;
	uint64_t late_replies;              /* replies after their request timed out (not counted again) */
	uint64_t ok_past_deadline;          /* OK replies that came later than their deadline_us after the
					     * send (network included): a server that answers what it
					     * accepts within its deadline keeps this near 0 */
};

/** \return the error replies of every status. */
uint64_t load_counts_errors(const struct load_counts *c);
/** \return true when sent = ok + errors + timeouts + malformed + in_flight. */
bool load_counts_conserved(const struct load_counts *c);
/** Adds src to dst. */
void load_counts_add(struct load_counts *dst, const struct load_counts *src);

/*
 * The one-second progress line, e.g.
 *   "t=3s sent=3000 ok=2990 err=0 timeout=0 inflight=10 rate=1000/s p50=812us p99=1.9ms"
 * from the counts of the run so far, the histogram of that second (interval: "-" for its
 * percentiles when it is empty) and the rate the caller measured over that second.
 */
void load_progress_print(FILE *f, double t_s, const struct load_counts *c, const struct load_hist *interval,
			 double rate);

/*
 * The run's JSON (one object: configuration given as conf_json, a JSON object text, counts, errors by
 * status name, latency p50/p90/p99/p99.9/p99.99/max/mean in us, achieved rate) to f, and the last
 * machine-readable line to out:
 *   "bwload sent=N ok=N errors=N timeouts=N malformed=N conserved=yes|no rate=X p50_us=X p99_us=X
 *    p999_us=X p9999_us=X max_us=X"
 * X with one decimal; rate is requests sent per second (0 when seconds is not > 0).
 */
void load_report_json(FILE *f, const char *conf_json, const struct load_counts *c, const struct load_hist *h,
		      double seconds);
void load_report_line(FILE *out, const struct load_counts *c, const struct load_hist *h, double seconds);

#endif /* BW_LOAD_H */
