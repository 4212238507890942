/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The latency histogram (load.h), in ns at LOAD_HIST_SUB_BITS: the bucket arithmetic is
 * include/batchwire/hist.h's, the server's own at another resolution. Recording costs a
 * count-leading-zeros and an add; reading walks the buckets once.
 */
#include <math.h>
#include <string.h>

#include <batchwire/hist.h>

#include "load.h"

_Static_assert(BW_HIST_BUCKETS_FOR(40, LOAD_HIST_SUB_BITS) == LOAD_HIST_BUCKETS, "the buckets cover exactly [0, 2^40)");
_Static_assert(LOAD_HIST_MAX_NS == UINT64_C(1) << 40, "LOAD_HIST_BUCKETS assumes 2^40");

static unsigned int bucket_of(uint64_t v)
{
	return bw_hist_bucket(v, LOAD_HIST_SUB_BITS);
}

/* The largest value bucket i holds. */
static uint64_t bucket_upper(unsigned int i)
{
	return bw_hist_bucket_upper(i, LOAD_HIST_SUB_BITS);
}

void load_hist_init(struct load_hist *h)
{
	memset(h, 0, sizeof(*h));
	h->min_ns = UINT64_MAX;
}

void load_hist_record(struct load_hist *h, uint64_t ns)
{
	unsigned int i;

	if (ns >= LOAD_HIST_MAX_NS) {
		i = LOAD_HIST_BUCKETS - 1;
		h->saturated++;
	} else {
		i = bucket_of(ns);
	}
	h->buckets[i]++;
	h->count++;
	h->sum_ns += (double)ns;
	if (ns < h->min_ns)
		h->min_ns = ns;
	if (ns > h->max_ns)
		h->max_ns = ns;
}

void load_hist_merge(struct load_hist *dst, const struct load_hist *src)
{
	for (unsigned int i = 0; i < LOAD_HIST_BUCKETS; i++)
		dst->buckets[i] += src->buckets[i];
	dst->count += src->count;
	dst->saturated += src->saturated;
	dst->sum_ns += src->sum_ns;
	if (src->min_ns < dst->min_ns)
		dst->min_ns = src->min_ns;
	if (src->max_ns > dst->max_ns)
		dst->max_ns = src->max_ns;
}

uint64_t load_hist_percentile(const struct load_hist *h, double pct)
{
	uint64_t rank, seen = 0;
	double x;

	if (h->count == 0)
		return 0;
	if (!(pct > 0)) /* NaN reads as 0 */
		return h->min_ns;
	if (pct >= 100)
		return h->max_ns;
	/*
	 * rank = ceil(pct/100 * count). pct/100 is rarely exact in binary (99.9 / 100 * 1000 comes out
	 * a hair above 999), so a product within a relative 1e-12 above an integer counts as that
	 * integer: no pct a person types is that close to a rank boundary on purpose.
	 */
	x = pct / 100.0 * (double)h->count;
	rank = (uint64_t)ceil(x - x * 1e-12);
	if (rank < 1)
		rank = 1;
	if (rank > h->count)
		rank = h->count;
	for (unsigned int i = 0; i < LOAD_HIST_BUCKETS; i++) {
		seen += h->buckets[i];
		if (seen >= rank) {
			uint64_t v = bucket_upper(i);

			if (v > h->max_ns)
				v = h->max_ns;
			if (v < h->min_ns) /* the last bucket's edge, when only saturated values are there */
				v = h->min_ns;
			return v;
		}
	}
	return h->max_ns; /* unreachable while the buckets sum to count */
}

double load_hist_mean(const struct load_hist *h)
{
	return h->count == 0 ? 0 : h->sum_ns / (double)h->count;
}
