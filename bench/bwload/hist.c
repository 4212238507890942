/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The latency histogram (load.h). Bucket index of a value v:
 *   v < 2^SUB_BITS:  v itself (exact);
 *   otherwise, with k = floor(log2 v) and shift = k - (SUB_BITS - 1):
 *                    shift * 2^(SUB_BITS-1) + (v >> shift)
 * (v >> shift) runs over [2^(SUB_BITS-1), 2^SUB_BITS), so each power of two [2^k, 2^(k+1)) gets
 * 2^(SUB_BITS-1) buckets of width 2^shift <= v / 2^(SUB_BITS-1), and the first of them follows the
 * exact ones with no gap. Recording costs a count-leading-zeros and an add; reading walks the
 * buckets once.
 */
#include <math.h>
#include <string.h>

#include "load.h"

#define SUB_HALF (1u << (LOAD_HIST_SUB_BITS - 1)) /* buckets per power of two above the exact ones */
#define EXACT_MAX (UINT64_C(1) << LOAD_HIST_SUB_BITS)

_Static_assert(((40 - LOAD_HIST_SUB_BITS) + 2) * SUB_HALF == LOAD_HIST_BUCKETS,
	       "the buckets cover exactly [0, 2^40)");
_Static_assert(LOAD_HIST_MAX_NS == UINT64_C(1) << 40, "LOAD_HIST_BUCKETS assumes 2^40");

static unsigned int bucket_of(uint64_t v)
{
	unsigned int shift;

	if (v < EXACT_MAX)
		return (unsigned int)v;
	shift = (unsigned int)(63 - __builtin_clzll(v)) - (LOAD_HIST_SUB_BITS - 1);
	return shift * SUB_HALF + (unsigned int)(v >> shift);
}

/* The largest value bucket i holds. */
static uint64_t bucket_upper(unsigned int i)
{
	unsigned int shift;
	uint64_t sub;

	if (i < EXACT_MAX)
		return i;
	shift = i / SUB_HALF - 1;
	sub = i % SUB_HALF + SUB_HALF;
	return (sub << shift) + (UINT64_C(1) << shift) - 1;
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
