/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Unit tests of bench/bwload's network-free parts (load.h): the histogram against exact percentiles
 * of sorted samples, the schedule under a scripted clock, the mix parser's every message and its
 * pick frequencies, conservation, and the report's exact text and valid JSON.
 */
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../bw_cunit.h"

#include "load.h"

#define NB_SAMPLES 100000
#define NS_PER_MS UINT64_C(1000000)
#define NS_PER_S UINT64_C(1000000000)

/* Test data from a stream of its own, so that a change in the code under test's rng cannot hide in
 * the data it is checked with. */
static uint64_t g_data_rng;

static uint64_t data_next(void)
{
	return bw_splitmix64(&g_data_rng);
}

static double data_unit(void) /* [0, 1) */
{
	return (double)(data_next() >> 11) * 0x1p-53;
}

/* Output of a printing function, as a string (freed by the caller). */
#define CAPTURE(buf, call)                                                                                   \
	do {                                                                                                 \
		size_t capture_len_;                                                                         \
		FILE *f = open_memstream(&(buf), &capture_len_);                                             \
		CU_ASSERT_PTR_NOT_NULL_FATAL(f);                                                             \
		call;                                                                                        \
		fclose(f);                                                                                   \
	} while (0)

/* ---- histogram ----------------------------------------------------------------------------------- */

static struct load_hist g_h, g_h2, g_h3;
static uint64_t g_samples[NB_SAMPLES];

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* The upper edge of v's bucket, as the percentile reads it: with a far larger value beside it, rank
 * 1 (p50 of 2) lies in v's bucket and the clamp to max does not reach it. */
static uint64_t edge_of(uint64_t v)
{
	load_hist_init(&g_h3);
	load_hist_record(&g_h3, v);
	load_hist_record(&g_h3, LOAD_HIST_MAX_NS - 1);
	return load_hist_percentile(&g_h3, 50);
}

static void test_hist_empty(void)
{
	load_hist_init(&g_h);
	CU_ASSERT_EQUAL(g_h.count, 0);
	CU_ASSERT_EQUAL(g_h.min_ns, UINT64_MAX);
	CU_ASSERT_EQUAL(g_h.max_ns, 0);
	CU_ASSERT_EQUAL(load_hist_percentile(&g_h, 0), 0);
	CU_ASSERT_EQUAL(load_hist_percentile(&g_h, 50), 0);
	CU_ASSERT_EQUAL(load_hist_percentile(&g_h, 100), 0);
	CU_ASSERT_EQUAL(load_hist_mean(&g_h), 0);
}

static void test_hist_exact_small(void)
{
	load_hist_init(&g_h);
	for (uint64_t v = 128; v-- > 0;) /* descending: order must not matter */
		load_hist_record(&g_h, v);
	for (unsigned int i = 0; i < 128; i++) /* rank i + 1 holds i */
		CU_ASSERT_EQUAL(load_hist_percentile(&g_h, (i + 1) * 100.0 / 128), i);
	CU_ASSERT_EQUAL(load_hist_percentile(&g_h, 0), 0);
	CU_ASSERT_EQUAL(load_hist_percentile(&g_h, 100), 127);
	for (uint64_t v = 0; v < 128; v++)
		CU_ASSERT_EQUAL(edge_of(v), v);
}

static void test_hist_bucket_edges(void)
{
	uint64_t prev_edge = 127;
	unsigned int per_power = 0, k = 7;

	/* every value of 2^7..2^13: buckets follow on without gaps, 64 per power of two, each at most
	 * 1/64 of its values wide */
	for (uint64_t v = 128; v < (UINT64_C(1) << 14); v++) {
		uint64_t e = edge_of(v);

		if (v == (UINT64_C(1) << (k + 1))) {
			CU_ASSERT_EQUAL(per_power, 64);
			per_power = 0;
			k++;
		}
		CU_ASSERT_TRUE_FATAL(e >= v);
		CU_ASSERT_TRUE(e - v < v / 64);
		if (v == prev_edge + 1) { /* a new bucket: its width is 2^(k-6) */
			CU_ASSERT_EQUAL(e - v + 1, UINT64_C(1) << (k - 6));
			per_power++;
		} else {
			CU_ASSERT_EQUAL(e, prev_edge);
		}
		prev_edge = e;
	}
	CU_ASSERT_EQUAL(per_power, 64);
	for (k = 7; k < 40; k++) {
		uint64_t p = UINT64_C(1) << k;

		CU_ASSERT_EQUAL(edge_of(p - 1), p - 1);
		CU_ASSERT_EQUAL(edge_of(p), p + (p >> 6) - 1);
		CU_ASSERT_EQUAL(edge_of(p + (p >> 6)), p + 2 * (p >> 6) - 1);
	}
}

enum dist { DIST_UNIFORM, DIST_EXPONENTIAL, DIST_BIMODAL };

static uint64_t draw(enum dist d)
{
	switch (d) {
	case DIST_UNIFORM: return data_next() % (10 * NS_PER_MS);
	case DIST_EXPONENTIAL: return (uint64_t)(-log1p(-data_unit()) * 200e3); /* mean 200 us */
	default: return 0;
	}
}

static void fill(enum dist d)
{
	g_data_rng = 1000 + d;
	for (unsigned int i = 0; i < NB_SAMPLES; i++) {
		if (d == DIST_BIMODAL) /* exactly 90% near 1 us, 10% near 10 ms */
			g_samples[i] = i % 10 != 9 ? 1000 + data_next() % 50 : 10 * NS_PER_MS + data_next() % 1000;
		else
			g_samples[i] = draw(d);
	}
}

/* Percentiles in thousandths of a percent, so that the exact rank is integer arithmetic. */
static const uint64_t g_pct_milli[] = {0, 1, 1000, 10000, 25000, 50000, 75000, 90000, 90001, 99000, 99900,
				       99990, 99999, 100000};

static void check_distribution(enum dist d)
{
	double sum = 0;

	fill(d);
	load_hist_init(&g_h);
	for (unsigned int i = 0; i < NB_SAMPLES; i++) {
		load_hist_record(&g_h, g_samples[i]);
		sum += (double)g_samples[i];
	}
	qsort(g_samples, NB_SAMPLES, sizeof(g_samples[0]), cmp_u64);
	CU_ASSERT_EQUAL(g_h.count, NB_SAMPLES);
	CU_ASSERT_EQUAL(g_h.min_ns, g_samples[0]);
	CU_ASSERT_EQUAL(g_h.max_ns, g_samples[NB_SAMPLES - 1]);
	CU_ASSERT_EQUAL(g_h.saturated, 0);
	CU_ASSERT_DOUBLE_EQUAL(load_hist_mean(&g_h), sum / NB_SAMPLES, 1e-6);
	for (size_t j = 0; j < sizeof(g_pct_milli) / sizeof(g_pct_milli[0]); j++) {
		uint64_t pm = g_pct_milli[j];
		uint64_t rank = (pm * NB_SAMPLES + 99999) / 100000; /* ceil(pct / 100 * count) */
		uint64_t exact = rank == 0 ? g_samples[0] : g_samples[rank - 1];
		uint64_t got = load_hist_percentile(&g_h, (double)pm / 1000);

		if (!(got >= exact && got - exact <= exact / 64 && got <= g_h.max_ns))
			printf("\n  dist %d p%.3f: exact %lu, histogram %lu\n", d, (double)pm / 1000,
			       (unsigned long)exact, (unsigned long)got);
		CU_ASSERT_TRUE(got >= exact);
		CU_ASSERT_TRUE(got - exact <= exact / 64);
		CU_ASSERT_TRUE(got <= g_h.max_ns);
		if (exact < 128)
			CU_ASSERT_EQUAL(got, exact);
	}
}

static void test_hist_uniform(void)
{
	check_distribution(DIST_UNIFORM);
}

static void test_hist_exponential(void)
{
	check_distribution(DIST_EXPONENTIAL);
}

static void test_hist_bimodal(void)
{
	check_distribution(DIST_BIMODAL);
	/* rank 90000 is the last of the 1 us mode, rank 90001 the first of the 10 ms one */
	CU_ASSERT_TRUE(load_hist_percentile(&g_h, 90) < 1100);
	CU_ASSERT_TRUE(load_hist_percentile(&g_h, 90.001) >= 10 * NS_PER_MS);
	CU_ASSERT_TRUE(load_hist_percentile(&g_h, 50) < 1100);
	CU_ASSERT_TRUE(load_hist_percentile(&g_h, 99) >= 10 * NS_PER_MS);
}

static void test_hist_min_max_mean(void)
{
	load_hist_init(&g_h);
	load_hist_record(&g_h, 10);
	load_hist_record(&g_h, 3);
	load_hist_record(&g_h, 1000003);
	load_hist_record(&g_h, 2);
	CU_ASSERT_EQUAL(g_h.count, 4);
	CU_ASSERT_EQUAL(g_h.min_ns, 2);
	CU_ASSERT_EQUAL(g_h.max_ns, 1000003);
	CU_ASSERT_DOUBLE_EQUAL(load_hist_mean(&g_h), 1000018.0 / 4, 1e-9);
	CU_ASSERT_EQUAL(load_hist_percentile(&g_h, 0), 2);
	CU_ASSERT_EQUAL(load_hist_percentile(&g_h, 100), 1000003);
	CU_ASSERT_EQUAL(load_hist_percentile(&g_h, 99.99), 1000003); /* the bucket's edge, clamped to max */
	CU_ASSERT_EQUAL(load_hist_percentile(&g_h, 25), 2);
	CU_ASSERT_EQUAL(load_hist_percentile(&g_h, 25.01), 3);
	CU_ASSERT_EQUAL(load_hist_percentile(&g_h, 75), 10);
	CU_ASSERT_EQUAL(load_hist_percentile(&g_h, -1), 2);
	CU_ASSERT_EQUAL(load_hist_percentile(&g_h, 1000), 1000003);
}

/* pct / 100 * count comes out a hair above the integer rank for these (99.9 / 100 * 1000 is
 * 999.0000000000001): the rank is still that integer, not the next. */
static void test_hist_rank_rounding(void)
{
	load_hist_init(&g_h);
	for (unsigned int i = 0; i < 999; i++)
		load_hist_record(&g_h, 5);
	load_hist_record(&g_h, 100);
	CU_ASSERT_EQUAL(load_hist_percentile(&g_h, 99.9), 5);
	CU_ASSERT_EQUAL(load_hist_percentile(&g_h, 99.91), 100);

	load_hist_init(&g_h);
	for (unsigned int i = 0; i < 100; i++)
		load_hist_record(&g_h, i < 7 ? 1 : i < 56 ? 2 : 3);
	CU_ASSERT_EQUAL(load_hist_percentile(&g_h, 7), 1);   /* 7.000000000000001 */
	CU_ASSERT_EQUAL(load_hist_percentile(&g_h, 7.5), 2);
	CU_ASSERT_EQUAL(load_hist_percentile(&g_h, 56), 2);  /* 56.00000000000001 */
	CU_ASSERT_EQUAL(load_hist_percentile(&g_h, 57), 3);  /* 56.99999999999999 */
	CU_ASSERT_EQUAL(load_hist_percentile(&g_h, 0.5), 1); /* rank at least 1 */
}

static void test_hist_saturated(void)
{
	load_hist_init(&g_h);
	load_hist_record(&g_h, LOAD_HIST_MAX_NS - 1);
	CU_ASSERT_EQUAL(g_h.saturated, 0);
	load_hist_record(&g_h, LOAD_HIST_MAX_NS);
	CU_ASSERT_EQUAL(g_h.saturated, 1);
	load_hist_record(&g_h, LOAD_HIST_MAX_NS * 2);
	CU_ASSERT_EQUAL(g_h.saturated, 2);
	CU_ASSERT_EQUAL(g_h.count, 3);
	CU_ASSERT_EQUAL(g_h.buckets[LOAD_HIST_BUCKETS - 1], 3);
	CU_ASSERT_EQUAL(g_h.max_ns, LOAD_HIST_MAX_NS * 2);
	CU_ASSERT_EQUAL(load_hist_percentile(&g_h, 100), LOAD_HIST_MAX_NS * 2);
	CU_ASSERT_EQUAL(load_hist_percentile(&g_h, 50), LOAD_HIST_MAX_NS - 1);

	/* only saturated values: the last bucket's edge is below them all, so the clamp to min answers */
	load_hist_init(&g_h);
	load_hist_record(&g_h, LOAD_HIST_MAX_NS * 4);
	CU_ASSERT_EQUAL(load_hist_percentile(&g_h, 50), LOAD_HIST_MAX_NS * 4);
	CU_ASSERT_EQUAL(g_h.saturated, 1);
	CU_ASSERT_DOUBLE_EQUAL(load_hist_mean(&g_h), (double)(LOAD_HIST_MAX_NS * 4), 1);
}

static void check_hist_equal(const struct load_hist *a, const struct load_hist *b)
{
	CU_ASSERT_EQUAL(a->count, b->count);
	CU_ASSERT_EQUAL(a->min_ns, b->min_ns);
	CU_ASSERT_EQUAL(a->max_ns, b->max_ns);
	CU_ASSERT_EQUAL(a->saturated, b->saturated);
	CU_ASSERT_EQUAL(a->sum_ns, b->sum_ns); /* integer sums far below 2^53: exact */
	CU_ASSERT_EQUAL(memcmp(a->buckets, b->buckets, sizeof(a->buckets)), 0);
}

static void test_hist_merge(void)
{
	struct load_hist empty;

	load_hist_init(&g_h);  /* a: exponential */
	load_hist_init(&g_h2); /* b: bimodal and one saturated */
	load_hist_init(&g_h3); /* both */
	fill(DIST_EXPONENTIAL);
	for (unsigned int i = 0; i < NB_SAMPLES / 2; i++) {
		load_hist_record(&g_h, g_samples[i]);
		load_hist_record(&g_h3, g_samples[i]);
	}
	fill(DIST_BIMODAL);
	g_samples[7] = LOAD_HIST_MAX_NS + 5;
	for (unsigned int i = 0; i < NB_SAMPLES / 2; i++) {
		load_hist_record(&g_h2, g_samples[i]);
		load_hist_record(&g_h3, g_samples[i]);
	}
	load_hist_merge(&g_h, &g_h2);
	check_hist_equal(&g_h, &g_h3);
	CU_ASSERT_EQUAL(g_h.count, NB_SAMPLES);
	CU_ASSERT_EQUAL(g_h.saturated, 1);

	/* an empty side changes nothing, on either side */
	load_hist_init(&empty);
	load_hist_merge(&g_h, &empty);
	check_hist_equal(&g_h, &g_h3);
	load_hist_merge(&empty, &g_h3);
	check_hist_equal(&empty, &g_h3);
}

/* ---- schedule ------------------------------------------------------------------------------------ */

#define WHEN_CAP 100001
static uint64_t g_when[WHEN_CAP + 8], g_when2[WHEN_CAP];

static void test_sched_init_refuses(void)
{
	struct load_sched s;
	const double bad_rates[] = {0, -5, NAN, INFINITY, -INFINITY};

	for (size_t i = 0; i < sizeof(bad_rates) / sizeof(bad_rates[0]); i++) {
		CU_ASSERT_EQUAL(load_sched_init(&s, LOAD_MODE_FIXED, bad_rates[i], 1, 0, 0, 1), -EINVAL);
		CU_ASSERT_EQUAL(load_sched_init(&s, LOAD_MODE_POISSON, bad_rates[i], 1, 0, 0, 1), -EINVAL);
	}
	CU_ASSERT_EQUAL(load_sched_init(&s, LOAD_MODE_CLOSED, 1000, 0, 0, 0, 1), -EINVAL);
	CU_ASSERT_EQUAL(load_sched_init(&s, (enum load_mode)99, 1000, 1, 0, 0, 1), -EINVAL);
	CU_ASSERT_EQUAL(load_sched_init(NULL, LOAD_MODE_FIXED, 1000, 1, 0, 0, 1), -EINVAL);
	CU_ASSERT_EQUAL(load_sched_init(&s, LOAD_MODE_FIXED, 1000, 0, 0, 0, 1), 0);   /* outstanding unused */
	CU_ASSERT_EQUAL(load_sched_init(&s, LOAD_MODE_POISSON, 0.5, 0, 0, 0, 1), 0);
	CU_ASSERT_EQUAL(load_sched_init(&s, LOAD_MODE_CLOSED, 0, 4, 0, 0, 1), 0);     /* rate unused */
}

/* Calls at irregular times (gaps of 0..3 ms, max 1..40 per call) over 10 s at 1000/s. */
static void test_sched_fixed_irregular(void)
{
	const uint64_t start = 5 * NS_PER_S; /* not 0: times are from start_ns */
	const uint64_t end = start + 10 * NS_PER_S;
	struct load_sched s;
	uint64_t now = start, total = 0, n;
	unsigned int max, calls = 0;

	g_data_rng = 7;
	CU_ASSERT_EQUAL_FATAL(load_sched_init(&s, LOAD_MODE_FIXED, 1000, 0, 0, start, 1), 0);
	while (now < end) {
		max = 1 + (unsigned int)(data_next() % 40);
		for (unsigned int i = 0; i < 8; i++)
			g_when[total + max + i] = UINT64_MAX; /* past max: must stay untouched */
		n = load_sched_due(&s, now, 0, g_when + total, max);
		CU_ASSERT_TRUE_FATAL(n <= max);
		for (unsigned int i = 0; i < 8; i++)
			CU_ASSERT_EQUAL(g_when[total + max + i], UINT64_MAX);
		for (uint64_t i = total; i < total + n; i++)
			CU_ASSERT_TRUE(g_when[i] <= now);
		total += n;
		CU_ASSERT_TRUE_FATAL(total <= 10000);
		now += data_next() % (3 * NS_PER_MS);
		calls++;
	}
	/* the last call just before 10 s: whatever max held back is still due */
	do {
		n = load_sched_due(&s, end - 1, 0, g_when + total, 40);
		total += n;
		CU_ASSERT_TRUE_FATAL(total <= 10000);
	} while (n > 0);
	CU_ASSERT_EQUAL(total, 10000);
	CU_ASSERT_EQUAL(s.issued, 10000);
	for (uint64_t i = 0; i < total; i++)
		CU_ASSERT_EQUAL(g_when[i], start + i * NS_PER_MS);
	CU_ASSERT_TRUE(calls > 3000); /* the calls were irregular and many, not one big one */
	CU_ASSERT_EQUAL(load_sched_due(&s, end - 1, 0, g_when, 40), 0);
	CU_ASSERT_EQUAL(load_sched_due(&s, end, 0, g_when, 40), 1);
	CU_ASSERT_EQUAL(g_when[0], end);
	CU_ASSERT_FALSE(load_sched_done(&s)); /* no limit */
}

static void test_sched_backlog(void)
{
	struct load_sched s;

	CU_ASSERT_EQUAL_FATAL(load_sched_init(&s, LOAD_MODE_FIXED, 1000, 0, 0, 0, 1), 0);
	CU_ASSERT_EQUAL(load_sched_due(&s, 0, 0, g_when, 100), 1);
	CU_ASSERT_EQUAL(g_when[0], 0);
	CU_ASSERT_EQUAL(load_sched_due(&s, 999999, 0, g_when, 100), 0);
	/* 50.5 ms late: the 50 it missed, with the times they were due at, oldest first */
	CU_ASSERT_EQUAL_FATAL(load_sched_due(&s, 50500000, 0, g_when, 100), 50);
	for (unsigned int j = 0; j < 50; j++) {
		CU_ASSERT_EQUAL(g_when[j], (j + 1) * NS_PER_MS);
		CU_ASSERT_TRUE(g_when[j] < 50500000);
	}
	/* at 100 ms, 10 at a time: still the oldest first, none skipped */
	CU_ASSERT_EQUAL(load_sched_due(&s, 100 * NS_PER_MS, 0, g_when, 0), 0);
	CU_ASSERT_EQUAL(s.issued, 51);
	CU_ASSERT_EQUAL_FATAL(load_sched_due(&s, 100 * NS_PER_MS, 0, g_when, 10), 10);
	CU_ASSERT_EQUAL(g_when[0], 51 * NS_PER_MS);
	CU_ASSERT_EQUAL(g_when[9], 60 * NS_PER_MS);
	CU_ASSERT_EQUAL_FATAL(load_sched_due(&s, 100 * NS_PER_MS, 0, g_when, 100), 40);
	CU_ASSERT_EQUAL(g_when[0], 61 * NS_PER_MS);
	CU_ASSERT_EQUAL(g_when[39], 100 * NS_PER_MS);

	/* Poisson: the same, its late requests ascending and in the past */
	CU_ASSERT_EQUAL_FATAL(load_sched_init(&s, LOAD_MODE_POISSON, 1000, 0, 0, 0, 3), 0);
	unsigned int n = load_sched_due(&s, 100 * NS_PER_MS, 0, g_when, 1000);
	CU_ASSERT_TRUE(n > 50 && n < 200);
	CU_ASSERT_EQUAL(g_when[0], 0);
	for (unsigned int j = 1; j < n; j++)
		CU_ASSERT_TRUE(g_when[j] >= g_when[j - 1] && g_when[j] <= 100 * NS_PER_MS);
	CU_ASSERT_TRUE(s.next_ns > 100 * NS_PER_MS);
}

static void gap_stats(const uint64_t *when, unsigned int n, double *mean, double *cv)
{
	double sum = 0, sq = 0;

	for (unsigned int i = 1; i < n; i++)
		sum += (double)(when[i] - when[i - 1]);
	*mean = sum / (n - 1);
	for (unsigned int i = 1; i < n; i++) {
		double d = (double)(when[i] - when[i - 1]) - *mean;

		sq += d * d;
	}
	*cv = sqrt(sq / (n - 2)) / *mean;
}

static void test_sched_poisson_stats(void)
{
	const double rates[] = {1000, 1e6};
	struct load_sched s;
	double mean, cv;

	for (size_t r = 0; r < sizeof(rates) / sizeof(rates[0]); r++) {
		CU_ASSERT_EQUAL_FATAL(load_sched_init(&s, LOAD_MODE_POISSON, rates[r], 0, 0, 0, 42), 0);
		CU_ASSERT_EQUAL_FATAL(load_sched_due(&s, UINT64_MAX / 2, 0, g_when, WHEN_CAP), WHEN_CAP);
		CU_ASSERT_EQUAL(g_when[0], 0);
		for (unsigned int i = 1; i < WHEN_CAP; i++)
			CU_ASSERT_TRUE_FATAL(g_when[i] >= g_when[i - 1]);
		gap_stats(g_when, WHEN_CAP, &mean, &cv); /* 100,000 gaps */
		printf("\n  rate %.0f/s: mean gap %.1f ns (expected %.1f), cv %.4f ", rates[r], mean, 1e9 / rates[r], cv);
		CU_ASSERT_DOUBLE_EQUAL(mean, 1e9 / rates[r], 0.02 * 1e9 / rates[r]);
		CU_ASSERT_DOUBLE_EQUAL(cv, 1.0, 0.03); /* fixed gaps: 0; uniform: 0.58 */
	}
}

static void test_sched_poisson_seed(void)
{
	struct load_sched a, b;
	unsigned int got = 0, n;
	bool differ = false;

	/* same seed, same times, however the calls cut them */
	CU_ASSERT_EQUAL_FATAL(load_sched_init(&a, LOAD_MODE_POISSON, 1000, 0, 0, 77, 9), 0);
	CU_ASSERT_EQUAL_FATAL(load_sched_init(&b, LOAD_MODE_POISSON, 1000, 0, 0, 77, 9), 0);
	CU_ASSERT_EQUAL_FATAL(load_sched_due(&a, UINT64_MAX / 2, 0, g_when, 1000), 1000);
	g_data_rng = 11;
	for (uint64_t now = 0; got < 1000; now += data_next() % (5 * NS_PER_MS)) {
		n = load_sched_due(&b, now, 0, g_when2 + got, 1000 - got < 7 ? 1000 - got : 7);
		got += n;
	}
	CU_ASSERT_EQUAL(memcmp(g_when, g_when2, 1000 * sizeof(g_when[0])), 0);

	CU_ASSERT_EQUAL_FATAL(load_sched_init(&b, LOAD_MODE_POISSON, 1000, 0, 0, 77, 10), 0);
	CU_ASSERT_EQUAL_FATAL(load_sched_due(&b, UINT64_MAX / 2, 0, g_when2, 1000), 1000);
	for (unsigned int i = 1; i < 1000; i++)
		differ |= g_when[i] != g_when2[i];
	CU_ASSERT_TRUE(differ);
}

static void test_sched_closed(void)
{
	struct load_sched s;

	CU_ASSERT_EQUAL_FATAL(load_sched_init(&s, LOAD_MODE_CLOSED, 0, 8, 0, 0, 1), 0);
	memset(g_when, 0, 64 * sizeof(g_when[0]));
	CU_ASSERT_EQUAL(load_sched_due(&s, 123, 0, g_when, 64), 8);
	for (unsigned int i = 0; i < 8; i++)
		CU_ASSERT_EQUAL(g_when[i], 123);
	CU_ASSERT_EQUAL(g_when[8], 0);
	CU_ASSERT_EQUAL(load_sched_due(&s, 124, 8, g_when, 64), 0);
	CU_ASSERT_EQUAL(load_sched_due(&s, 125, 5, g_when, 64), 3);
	CU_ASSERT_EQUAL(g_when[2], 125);
	CU_ASSERT_EQUAL(load_sched_due(&s, 126, 20, g_when, 64), 0); /* more in flight than outstanding */
	CU_ASSERT_EQUAL(load_sched_due(&s, 127, 0, g_when, 3), 3);   /* max holds */
	CU_ASSERT_EQUAL(load_sched_due(&s, 127, 1, g_when, 0), 0);
	CU_ASSERT_EQUAL(s.issued, 14);
	CU_ASSERT_FALSE(load_sched_done(&s));
}

static void test_sched_limit(void)
{
	struct load_sched s;

	CU_ASSERT_EQUAL_FATAL(load_sched_init(&s, LOAD_MODE_FIXED, 1000, 0, 25, 0, 1), 0);
	CU_ASSERT_EQUAL(load_sched_due(&s, 10 * NS_PER_MS, 0, g_when, 100), 11);
	CU_ASSERT_FALSE(load_sched_done(&s));
	CU_ASSERT_EQUAL(load_sched_due(&s, NS_PER_S, 0, g_when, 100), 14);
	CU_ASSERT_EQUAL(g_when[13], 24 * NS_PER_MS);
	CU_ASSERT_TRUE(load_sched_done(&s));
	CU_ASSERT_EQUAL(load_sched_due(&s, 2 * NS_PER_S, 0, g_when, 100), 0);
	CU_ASSERT_EQUAL(s.issued, 25);

	CU_ASSERT_EQUAL_FATAL(load_sched_init(&s, LOAD_MODE_CLOSED, 0, 8, 10, 0, 1), 0);
	CU_ASSERT_EQUAL(load_sched_due(&s, 1, 0, g_when, 64), 8);
	CU_ASSERT_FALSE(load_sched_done(&s));
	CU_ASSERT_EQUAL(load_sched_due(&s, 2, 0, g_when, 64), 2);
	CU_ASSERT_TRUE(load_sched_done(&s));
	CU_ASSERT_EQUAL(load_sched_due(&s, 3, 0, g_when, 64), 0);

	CU_ASSERT_EQUAL_FATAL(load_sched_init(&s, LOAD_MODE_POISSON, 1000, 0, 5, 0, 1), 0);
	CU_ASSERT_EQUAL(load_sched_due(&s, NS_PER_S, 0, g_when, 3), 3);
	CU_ASSERT_EQUAL(load_sched_due(&s, NS_PER_S, 0, g_when, 3), 2);
	CU_ASSERT_TRUE(load_sched_done(&s));
	CU_ASSERT_EQUAL(load_sched_due(&s, NS_PER_S, 0, g_when, 3), 0);

	/* limit 0: never done */
	CU_ASSERT_EQUAL_FATAL(load_sched_init(&s, LOAD_MODE_CLOSED, 0, 1000, 0, 0, 1), 0);
	for (unsigned int i = 0; i < 100; i++)
		CU_ASSERT_EQUAL(load_sched_due(&s, i, 0, g_when, 1000), 1000);
	CU_ASSERT_FALSE(load_sched_done(&s));
}

/* ---- mix ----------------------------------------------------------------------------------------- */

static struct load_mix g_mix;
static char g_err[512];

static void test_mix_accepts(void)
{
	const struct load_mix_entry *e;
	char spec[4096], *p;

	CU_ASSERT_EQUAL_FATAL(load_mix_parse("model=mlp,weight=3;model=r50,input=image:cat.npy,deadline_us=50000",
					     &g_mix, g_err, sizeof(g_err)), 0);
	CU_ASSERT_STRING_EQUAL(g_err, "");
	CU_ASSERT_EQUAL_FATAL(g_mix.nb_entries, 2);
	CU_ASSERT_EQUAL(g_mix.weight_total, 4);
	e = &g_mix.entries[0];
	CU_ASSERT_STRING_EQUAL(e->model, "mlp");
	CU_ASSERT_EQUAL(e->weight, 3);
	CU_ASSERT_EQUAL(e->rows, 1);
	CU_ASSERT_EQUAL(e->priority, 0);
	CU_ASSERT_EQUAL(e->deadline_us, 0);
	CU_ASSERT_EQUAL(e->nb_inputs, 0);
	e = &g_mix.entries[1];
	CU_ASSERT_STRING_EQUAL(e->model, "r50");
	CU_ASSERT_EQUAL(e->weight, 1);
	CU_ASSERT_EQUAL(e->deadline_us, 50000);
	CU_ASSERT_EQUAL_FATAL(e->nb_inputs, 1);
	CU_ASSERT_STRING_EQUAL(e->input_name[0], "image");
	CU_ASSERT_STRING_EQUAL(e->input_path[0], "cat.npy");

	/* every key at its limits, keys in any order; a tensor name with a colon splits at the last */
	CU_ASSERT_EQUAL_FATAL(load_mix_parse("input=a:x.npy,rows=65535,priority=255,deadline_us=4294967295,"
					     "weight=4294967295,model=m,input=input_1:0:/tmp/y.npy",
					     &g_mix, g_err, sizeof(g_err)), 0);
	e = &g_mix.entries[0];
	CU_ASSERT_STRING_EQUAL(e->model, "m");
	CU_ASSERT_EQUAL(e->rows, 65535);
	CU_ASSERT_EQUAL(e->priority, 255);
	CU_ASSERT_EQUAL(e->deadline_us, UINT32_MAX);
	CU_ASSERT_EQUAL(e->weight, UINT32_MAX);
	CU_ASSERT_EQUAL(g_mix.weight_total, UINT32_MAX);
	CU_ASSERT_EQUAL_FATAL(e->nb_inputs, 2);
	CU_ASSERT_STRING_EQUAL(e->input_name[0], "a");
	CU_ASSERT_STRING_EQUAL(e->input_path[0], "x.npy");
	CU_ASSERT_STRING_EQUAL(e->input_name[1], "input_1:0");
	CU_ASSERT_STRING_EQUAL(e->input_path[1], "/tmp/y.npy");

	/* 16 entries of weight 2^32-1: the total needs its 64 bits */
	p = spec;
	for (unsigned int i = 0; i < LOAD_MIX_MAX; i++)
		p += sprintf(p, "%smodel=m%u,weight=4294967295", i ? ";" : "", i);
	CU_ASSERT_EQUAL_FATAL(load_mix_parse(spec, &g_mix, g_err, sizeof(g_err)), 0);
	CU_ASSERT_EQUAL(g_mix.nb_entries, 16);
	CU_ASSERT_EQUAL(g_mix.weight_total, UINT64_C(16) * UINT32_MAX);
	CU_ASSERT_STRING_EQUAL(g_mix.entries[15].model, "m15");

	/* 8 inputs, a 255-character model name, a 255-character input name and a 1023-character file */
	p = spec + sprintf(spec, "model=");
	memset(p, 'n', 255);
	p += 255;
	for (unsigned int i = 0; i < LOAD_MIX_INPUTS_MAX - 1; i++)
		p += sprintf(p, ",input=in%u:f%u.npy", i, i);
	p += sprintf(p, ",input=");
	memset(p, 'i', 255);
	p[255] = ':';
	memset(p + 256, 'f', 1023);
	p[1279] = '\0';
	CU_ASSERT_EQUAL_FATAL(load_mix_parse(spec, &g_mix, g_err, sizeof(g_err)), 0);
	e = &g_mix.entries[0];
	CU_ASSERT_EQUAL(strlen(e->model), 255);
	CU_ASSERT_EQUAL_FATAL(e->nb_inputs, 8);
	CU_ASSERT_STRING_EQUAL(e->input_name[6], "in6");
	CU_ASSERT_STRING_EQUAL(e->input_path[6], "f6.npy");
	CU_ASSERT_EQUAL(strlen(e->input_name[7]), 255);
	CU_ASSERT_EQUAL(strlen(e->input_path[7]), 1023);
}

static void check_refused(const char *spec, const char *want)
{
	int ret;

	memset(g_err, 'x', sizeof(g_err));
	ret = load_mix_parse(spec, &g_mix, g_err, sizeof(g_err));
	CU_ASSERT_EQUAL(ret, -EINVAL);
	CU_ASSERT_STRING_EQUAL(g_err, want);
	CU_ASSERT_EQUAL(g_mix.nb_entries, 0);
	CU_ASSERT_EQUAL(g_mix.weight_total, 0);
	if (ret != -EINVAL || strcmp(g_err, want) != 0)
		printf("\n  spec '%.60s': got %d '%s', expected '%s'\n", spec, ret, g_err, want);
}

static void test_mix_refuses(void)
{
	static const struct {
		const char *spec, *err;
	} cases[] = {
		{"", "entry 1: model= is required"},
		{"weight=2", "entry 1: model= is required"},
		{"model=a;", "entry 2: model= is required"},
		{"model=a;;model=b", "entry 2: model= is required"},
		{"model=a;model=b,modle=c", "entry 2: unknown key 'modle'"},
		{"model=a,Model=b", "entry 1: unknown key 'Model'"},
		{"model=a,rows=0", "entry 1: rows must be 1..65535"},
		{"model=a,rows=65536", "entry 1: rows must be 1..65535"},
		{"model=a,rows=", "entry 1: rows must be 1..65535"},
		{"model=a,rows=1x", "entry 1: rows must be 1..65535"},
		{"model=a,rows=-1", "entry 1: rows must be 1..65535"},
		{"model=a,rows= 4", "entry 1: rows must be 1..65535"},
		{"model=a,rows=18446744073709551617", "entry 1: rows must be 1..65535"},
		{"model=a,weight=0", "entry 1: weight must be 1..4294967295"},
		{"model=a,weight=+3", "entry 1: weight must be 1..4294967295"},
		{"model=a,weight=4294967296", "entry 1: weight must be 1..4294967295"},
		{"model=a,priority=256", "entry 1: priority must be 0..255"},
		{"model=a,deadline_us=4294967296", "entry 1: deadline_us must be 0..4294967295"},
		{"model=a,model=b", "entry 1: duplicate key 'model'"},
		{"model=a;model=b,rows=2,rows=2", "entry 2: duplicate key 'rows'"},
		{"model=a,weight=1,weight=1", "entry 1: duplicate key 'weight'"},
		{"model=", "entry 1: model must be 1..255 characters"},
		{"model=a,input=x", "entry 1: input must be NAME:FILE"},
		{"model=a,input=:f.npy", "entry 1: input must be NAME:FILE"},
		{"model=a,input=x:", "entry 1: input must be NAME:FILE"},
		{"model=a,input=", "entry 1: input must be NAME:FILE"},
		{"model=a,input=x:a.npy,input=x:b.npy", "entry 1: input name given twice"},
		{"model=a,rows", "entry 1: expected key=value, got 'rows'"},
		{"model=a,,rows=1", "entry 1: expected key=value, got ''"},
		{"model=a,", "entry 1: expected key=value, got ''"},
		{"model=a,=3", "entry 1: expected key=value, got '=3'"},
	};
	char spec[4096], want[128], *p;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		check_refused(cases[i].spec, cases[i].err);

	p = spec + sprintf(spec, "model=");
	memset(p, 'n', 256);
	p[256] = '\0';
	check_refused(spec, "entry 1: model must be 1..255 characters");

	p = spec + sprintf(spec, "model=a");
	for (unsigned int i = 0; i < LOAD_MIX_INPUTS_MAX + 1; i++)
		p += sprintf(p, ",input=in%u:f.npy", i);
	check_refused(spec, "entry 1: more than 8 input=");

	p = spec + sprintf(spec, "model=a,input=");
	memset(p, 'i', 256);
	strcpy(p + 256, ":f.npy");
	check_refused(spec, "entry 1: input name must be 1..255 characters");

	p = spec + sprintf(spec, "model=a,input=x:");
	memset(p, 'f', 1024);
	p[1024] = '\0';
	check_refused(spec, "entry 1: input file must be 1..1023 characters");

	p = spec;
	for (unsigned int i = 0; i < LOAD_MIX_MAX + 1; i++)
		p += sprintf(p, "%smodel=m%u", i ? ";" : "", i);
	check_refused(spec, "entry 17: more than 16 entries");

	/* a long unknown key is echoed cut short, and the line still ends */
	p = spec + sprintf(spec, "model=a,");
	memset(p, 'k', 200);
	strcpy(p + 200, "=1");
	snprintf(want, sizeof(want), "entry 1: unknown key '%.64s'", p);
	check_refused(spec, want);

	/* a short buffer is cut, never overrun; no buffer at all is no crash */
	memset(g_err, 'x', sizeof(g_err));
	CU_ASSERT_EQUAL(load_mix_parse("model=a,rows=0", &g_mix, g_err, 8), -EINVAL);
	CU_ASSERT_STRING_EQUAL(g_err, "entry 1");
	CU_ASSERT_EQUAL(g_err[8], 'x');
	CU_ASSERT_EQUAL(load_mix_parse("model=a,rows=0", &g_mix, NULL, 0), -EINVAL);
	CU_ASSERT_EQUAL(load_mix_parse(NULL, &g_mix, g_err, sizeof(g_err)), -EINVAL);
}

static void test_mix_pick(void)
{
	uint64_t counts[3] = {0}, rng = load_rng_seed(5);

	CU_ASSERT_EQUAL_FATAL(load_mix_parse("model=a,weight=5;model=b,weight=3;model=c,weight=2", &g_mix, g_err,
					     sizeof(g_err)), 0);
	for (unsigned int i = 0; i < NB_SAMPLES; i++) {
		unsigned int k = load_mix_pick(&g_mix, &rng);

		CU_ASSERT_TRUE_FATAL(k < 3);
		counts[k]++;
	}
	for (unsigned int k = 0; k < 3; k++) {
		double want = (double)g_mix.entries[k].weight / (double)g_mix.weight_total;
		double got = (double)counts[k] / NB_SAMPLES;

		printf("\n  %s: %.4f of the picks, weight %.4f ", g_mix.entries[k].model, got, want);
		CU_ASSERT_DOUBLE_EQUAL(got, want, 0.02 * want);
	}

	/* one entry: always it; a never-seeded (zero) state still spreads the picks */
	CU_ASSERT_EQUAL_FATAL(load_mix_parse("model=only,weight=9", &g_mix, g_err, sizeof(g_err)), 0);
	for (unsigned int i = 0; i < 100; i++)
		CU_ASSERT_EQUAL(load_mix_pick(&g_mix, &rng), 0);
	CU_ASSERT_EQUAL_FATAL(load_mix_parse("model=a;model=b", &g_mix, g_err, sizeof(g_err)), 0);
	rng = 0;
	counts[0] = counts[1] = 0;
	for (unsigned int i = 0; i < 1000; i++)
		counts[load_mix_pick(&g_mix, &rng)]++;
	CU_ASSERT_TRUE(counts[0] > 400 && counts[1] > 400);
}

/* ---- counts -------------------------------------------------------------------------------------- */

static struct load_counts base_counts(void)
{
	struct load_counts c = {
		.sent = 100,
		.ok = 90,
		.timeouts = 2,
		.malformed = 1,
		.in_flight = 2,
		.datagrams_out = 300,
		.datagrams_in = 290,
		.late_replies = 5,
	};

	c.errors[BW_STATUS_NOT_FOUND] = 3;
	c.errors[BW_STATUS_UNAVAILABLE] = 2;
	return c;
}

static void test_counts_conserved(void)
{
	struct load_counts c = base_counts(), sum;

	CU_ASSERT_EQUAL(load_counts_errors(&c), 5);
	CU_ASSERT_TRUE(load_counts_conserved(&c));
	c.late_replies += 7; /* not counted again */
	c.datagrams_in += 7;
	CU_ASSERT_TRUE(load_counts_conserved(&c));

#define CHECK_BROKEN(field, delta)                                                                           \
	do {                                                                                                 \
		c = base_counts();                                                                           \
		c.field += (delta);                                                                          \
		CU_ASSERT_FALSE(load_counts_conserved(&c));                                                  \
	} while (0)
	CHECK_BROKEN(sent, 1);
	CHECK_BROKEN(sent, -1);
	CHECK_BROKEN(ok, 1);
	CHECK_BROKEN(errors[BW_STATUS_INTERNAL], 1);
	CHECK_BROKEN(errors[BW_STATUS_UNIMPLEMENTED], 1);
	CHECK_BROKEN(errors[BW_STATUS_OK], 1); /* a reply counted as ok and as an error */
	CHECK_BROKEN(timeouts, 1);
	CHECK_BROKEN(malformed, 1);
	CHECK_BROKEN(in_flight, 1);
#undef CHECK_BROKEN

	c = base_counts();
	sum = base_counts();
	load_counts_add(&sum, &c);
	CU_ASSERT_EQUAL(sum.sent, 200);
	CU_ASSERT_EQUAL(sum.ok, 180);
	CU_ASSERT_EQUAL(sum.errors[BW_STATUS_NOT_FOUND], 6);
	CU_ASSERT_EQUAL(sum.errors[BW_STATUS_UNAVAILABLE], 4);
	CU_ASSERT_EQUAL(sum.timeouts, 4);
	CU_ASSERT_EQUAL(sum.malformed, 2);
	CU_ASSERT_EQUAL(sum.in_flight, 4);
	CU_ASSERT_EQUAL(sum.datagrams_out, 600);
	CU_ASSERT_EQUAL(sum.datagrams_in, 580);
	CU_ASSERT_EQUAL(sum.late_replies, 10);
	CU_ASSERT_EQUAL(load_counts_errors(&sum), 10);
	CU_ASSERT_TRUE(load_counts_conserved(&sum));
}

/* ---- report -------------------------------------------------------------------------------------- */

/*
 * 90 x 100 ns (exact), 9 x 1500 ns (bucket 1488..1503), 1 x 2 ms (bucket 1998848..2015231, clamped
 * to max). Ranks: p50 -> 50 -> 100 ns; p99 -> 99 -> 1503 ns; p99.9 and p99.99 -> 100 -> 2 ms.
 */
static void report_hist(struct load_hist *h)
{
	load_hist_init(h);
	for (unsigned int i = 0; i < 90; i++)
		load_hist_record(h, 100);
	for (unsigned int i = 0; i < 9; i++)
		load_hist_record(h, 1500);
	load_hist_record(h, 2 * NS_PER_MS);
}

static struct load_counts report_counts(void)
{
	struct load_counts c = {.sent = 100, .ok = 95, .timeouts = 1, .malformed = 1, .datagrams_out = 100,
				.datagrams_in = 99};

	c.errors[BW_STATUS_NOT_FOUND] = 2;
	c.errors[BW_STATUS_UNAVAILABLE] = 1;
	return c;
}

static void test_report_line(void)
{
	struct load_counts c = report_counts();
	char *out = NULL;

	report_hist(&g_h);
	CAPTURE(out, load_report_line(f, &c, &g_h, 4.0));
	CU_ASSERT_STRING_EQUAL(out, "bwload sent=100 ok=95 errors=3 timeouts=1 malformed=1 conserved=yes rate=25.0 "
				    "p50_us=0.1 p99_us=1.5 p999_us=2000.0 p9999_us=2000.0 max_us=2000.0\n");
	free(out);

	c.in_flight = 1;
	load_hist_init(&g_h);
	CAPTURE(out, load_report_line(f, &c, &g_h, 0));
	CU_ASSERT_STRING_EQUAL(out, "bwload sent=100 ok=95 errors=3 timeouts=1 malformed=1 conserved=no rate=0.0 "
				    "p50_us=0.0 p99_us=0.0 p999_us=0.0 p9999_us=0.0 max_us=0.0\n");
	free(out);
}

static void test_progress_line(void)
{
	struct load_counts c = {.sent = 3000, .ok = 2990, .in_flight = 10};
	char *out = NULL;

	/* 98 x 812 us (bucket 811008..819199), 2 x 1.9 ms (clamped to max) */
	load_hist_init(&g_h);
	for (unsigned int i = 0; i < 98; i++)
		load_hist_record(&g_h, 812000);
	load_hist_record(&g_h, 1900000);
	load_hist_record(&g_h, 1900000);
	CAPTURE(out, load_progress_print(f, 3, &c, &g_h, 1000));
	CU_ASSERT_STRING_EQUAL(out, "t=3s sent=3000 ok=2990 err=0 timeout=0 inflight=10 rate=1000/s p50=819us p99=1.9ms\n");
	free(out);

	c.errors[BW_STATUS_INTERNAL] = 4;
	c.timeouts = 6;
	load_hist_init(&g_h);
	load_hist_record(&g_h, 500);
	load_hist_record(&g_h, 2500000000u);
	CAPTURE(out, load_progress_print(f, 12, &c, &g_h, 999.6));
	CU_ASSERT_STRING_EQUAL(out, "t=12s sent=3000 ok=2990 err=4 timeout=6 inflight=10 rate=1000/s p50=503ns p99=2.50s\n");
	free(out);

	/* the unit follows the rounded figure: 999.7 us is "1.0ms", not "1000us" */
	load_hist_init(&g_h);
	load_hist_record(&g_h, 999700);
	CAPTURE(out, load_progress_print(f, 12, &c, &g_h, 1000));
	CU_ASSERT_PTR_NOT_NULL(strstr(out, " p50=1.0ms p99=1.0ms\n"));
	free(out);
	load_hist_init(&g_h);
	load_hist_record(&g_h, 999960000);
	CAPTURE(out, load_progress_print(f, 12, &c, &g_h, 1000));
	CU_ASSERT_PTR_NOT_NULL(strstr(out, " p50=1.00s p99=1.00s\n"));
	free(out);

	load_hist_init(&g_h);
	CAPTURE(out, load_progress_print(f, 13, &c, &g_h, 0));
	CU_ASSERT_STRING_EQUAL(out, "t=13s sent=3000 ok=2990 err=4 timeout=6 inflight=10 rate=0/s p50=- p99=-\n");
	free(out);
}

/* A strict JSON (RFC 8259) recogniser: enough to say whether the report parses. */
struct json {
	const char *p;
	int depth;
};

static void json_ws(struct json *j)
{
	while (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r')
		j->p++;
}

static bool json_value(struct json *j);

static bool json_string(struct json *j)
{
	if (*j->p != '"')
		return false;
	for (j->p++; *j->p != '"'; j->p++) {
		if ((unsigned char)*j->p < 0x20)
			return false;
		if (*j->p == '\\') {
			j->p++;
			if (*j->p == 'u') {
				for (int i = 1; i <= 4; i++)
					if (!strchr("0123456789abcdefABCDEF", j->p[i]) || j->p[i] == '\0')
						return false;
				j->p += 4;
			} else if (*j->p == '\0' || !strchr("\"\\/bfnrt", *j->p)) {
				return false;
			}
		}
	}
	j->p++;
	return true;
}

static bool json_digits(struct json *j)
{
	const char *s = j->p;

	while (*j->p >= '0' && *j->p <= '9')
		j->p++;
	return j->p > s;
}

static bool json_number(struct json *j)
{
	if (*j->p == '-')
		j->p++;
	if (*j->p == '0')
		j->p++;
	else if (!json_digits(j))
		return false;
	if (*j->p == '.') {
		j->p++;
		if (!json_digits(j))
			return false;
	}
	if (*j->p == 'e' || *j->p == 'E') {
		j->p++;
		if (*j->p == '+' || *j->p == '-')
			j->p++;
		if (!json_digits(j))
			return false;
	}
	return true;
}

static bool json_literal(struct json *j, const char *word)
{
	size_t len = strlen(word);

	if (strncmp(j->p, word, len) != 0)
		return false;
	j->p += len;
	return true;
}

static bool json_members(struct json *j, char close, bool keyed)
{
	j->p++;
	json_ws(j);
	if (*j->p == close) {
		j->p++;
		return true;
	}
	for (;;) {
		json_ws(j);
		if (keyed) {
			if (!json_string(j))
				return false;
			json_ws(j);
			if (*j->p++ != ':')
				return false;
		}
		if (!json_value(j))
			return false;
		json_ws(j);
		if (*j->p == close) {
			j->p++;
			return true;
		}
		if (*j->p++ != ',')
			return false;
	}
}

static bool json_value(struct json *j)
{
	bool ok;

	json_ws(j);
	if (++j->depth > 64)
		return false;
	switch (*j->p) {
	case '{': ok = json_members(j, '}', true); break;
	case '[': ok = json_members(j, ']', false); break;
	case '"': ok = json_string(j); break;
	case 't': ok = json_literal(j, "true"); break;
	case 'f': ok = json_literal(j, "false"); break;
	case 'n': ok = json_literal(j, "null"); break;
	default: ok = json_number(j); break;
	}
	j->depth--;
	return ok;
}

static bool json_valid(const char *text)
{
	struct json j = {.p = text};

	if (!json_value(&j))
		return false;
	json_ws(&j);
	return *j.p == '\0';
}

static void test_json_recogniser(void)
{
	/* the recogniser itself: it must be able to say no, or the report test below proves nothing */
	CU_ASSERT_TRUE(json_valid("{\"a\": [1, -2.5e3, true, null, \"x\\n\"], \"b\": {}}"));
	CU_ASSERT_FALSE(json_valid("{\"a\": }"));
	CU_ASSERT_FALSE(json_valid("{\"a\": 1,}"));
	CU_ASSERT_FALSE(json_valid("{\"a\": nan}"));
	CU_ASSERT_FALSE(json_valid("{\"a\": 01}"));
	CU_ASSERT_FALSE(json_valid("{\"a\": 1} x"));
	CU_ASSERT_FALSE(json_valid("{a: 1}"));
	CU_ASSERT_FALSE(json_valid("{\"a\": 1"));
	CU_ASSERT_FALSE(json_valid("{\"a\": 1.}"));
}

static void test_report_json(void)
{
	struct load_counts c = report_counts();
	char *out = NULL, want[128];

	report_hist(&g_h);
	CAPTURE(out, load_report_json(f, "{\"mode\": \"fixed\", \"rate\": 1000, \"mix\": [\"mlp\"]}", &c, &g_h, 4.0));
	CU_ASSERT_TRUE(json_valid(out));
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "\"conf\": {\"mode\": \"fixed\", \"rate\": 1000, \"mix\": [\"mlp\"]}"));
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "\"sent\": 100, \"ok\": 95, \"errors\": 3, \"timeouts\": 1, \"malformed\": 1, "
					   "\"in_flight\": 0, \"datagrams_out\": 100, \"datagrams_in\": 99, "
					   "\"late_replies\": 0"));
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "\"conserved\": true"));
	for (unsigned int s = BW_STATUS_OK + 1; s < BW_STATUS_COUNT; s++) {
		snprintf(want, sizeof(want), "\"%s\": %lu", bw_status_name(s), (unsigned long)c.errors[s]);
		CU_ASSERT_PTR_NOT_NULL(strstr(out, want));
	}
	CU_ASSERT_PTR_NULL(strstr(out, "\"OK\""));
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "\"count\": 100, \"min\": 0.100, \"p50\": 0.100, \"p90\": 0.100, "
					   "\"p99\": 1.503, \"p99.9\": 2000.000, \"p99.99\": 2000.000, "
					   "\"max\": 2000.000, \"mean\": 20.225, \"saturated\": 0"));
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "\"rate\": 25.000"));
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "\"seconds\": 4.000000"));
	if (!json_valid(out))
		printf("\n%s", out);
	free(out);

	/* no configuration, no latencies, no time, not conserved: still valid */
	c.in_flight = 3;
	load_hist_init(&g_h);
	CAPTURE(out, load_report_json(f, NULL, &c, &g_h, NAN));
	CU_ASSERT_TRUE(json_valid(out));
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "\"conf\": {}"));
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "\"conserved\": false"));
	CU_ASSERT_PTR_NOT_NULL(strstr(out, "\"rate\": 0.000"));
	if (!json_valid(out))
		printf("\n%s", out);
	free(out);
}

int main(void)
{
	static CU_TestInfo hist_tests[] = {
		{"empty: 0 everywhere", test_hist_empty},
		{"exact below 2^7", test_hist_exact_small},
		{"buckets: contiguous, 64 per power of two, <= 1/64 wide", test_hist_bucket_edges},
		{"uniform 0..10 ms against sorted percentiles", test_hist_uniform},
		{"exponential, mean 200 us, against sorted percentiles", test_hist_exponential},
		{"bimodal 1 us / 10 ms: the rank boundary", test_hist_bimodal},
		{"min, max, mean, clamps", test_hist_min_max_mean},
		{"rank: ceil(pct/100 * count) despite binary fractions", test_hist_rank_rounding},
		{"saturated at 2^40", test_hist_saturated},
		{"merge equals recording both", test_hist_merge},
		CU_TEST_INFO_NULL,
	};
	static CU_TestInfo sched_tests[] = {
		{"init refuses bad rates and outstanding", test_sched_init_refuses},
		{"fixed 1000/s, irregular calls over 10 s: i * 1 ms", test_sched_fixed_irregular},
		{"a late call gets the backlog with past times", test_sched_backlog},
		{"Poisson: mean gap within 2%, cv near 1", test_sched_poisson_stats},
		{"Poisson: same seed same times, however called", test_sched_poisson_seed},
		{"closed loop: outstanding - in_flight", test_sched_closed},
		{"limit stops every mode", test_sched_limit},
		CU_TEST_INFO_NULL,
	};
	static CU_TestInfo mix_tests[] = {
		{"accepted specs", test_mix_accepts},
		{"refused specs, every message", test_mix_refuses},
		{"pick frequencies within 2% of the weights", test_mix_pick},
		CU_TEST_INFO_NULL,
	};
	static CU_TestInfo report_tests[] = {
		{"conservation and counts_add", test_counts_conserved},
		{"the last line, exactly", test_report_line},
		{"the progress line, exactly", test_progress_line},
		{"the JSON recogniser says no", test_json_recogniser},
		{"the JSON parses and holds the counts", test_report_json},
		CU_TEST_INFO_NULL,
	};
	static CU_SuiteInfo suites[] = {
		{.pName = "bwload histogram", .pTests = hist_tests},
		{.pName = "bwload schedule", .pTests = sched_tests},
		{.pName = "bwload mix", .pTests = mix_tests},
		{.pName = "bwload report", .pTests = report_tests},
		CU_SUITE_INFO_NULL,
	};

	return bw_cunit_run(suites);
}
