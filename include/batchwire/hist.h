/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Log-linear histograms, as HdrHistogram: values below 2^sub_bits are exact; above, each power of two
 * [2^k, 2^(k+1)) is cut into 2^(sub_bits - 1) equal buckets, so a value is known within
 * 1/2^(sub_bits - 1) of itself. The bucket of v, with k = floor(log2 v) and shift = k - (sub_bits - 1):
 *   v < 2^sub_bits:  v itself;
 *   otherwise:       shift * 2^(sub_bits - 1) + (v >> shift)
 * (v >> shift runs over [2^(sub_bits-1), 2^sub_bits), so the first bucket of a power follows the
 * last of the one below with no gap). Recording is a count-leading-zeros and an add.
 *
 * struct bw_hist is the server's: microseconds, 4 buckets a power of two (within 25%), from 0 to
 * 2^32 µs (71 minutes); larger values count in the last bucket. Plain counters written by one
 * thread (a polling lcore) and summed when read: a reader may see a value counted in `count`
 * before its bucket, never a torn counter. DPDK-free: bwcli and bwload use the same arithmetic.
 */
#ifndef BATCHWIRE_HIST_H
#define BATCHWIRE_HIST_H

#include <stdint.h>

/** The bucket of v in a histogram of sub_bits (v below the top of its range). */
static inline unsigned int bw_hist_bucket(uint64_t v, unsigned int sub_bits)
{
	unsigned int shift;

	if (v < (UINT64_C(1) << sub_bits))
		return (unsigned int)v;
	shift = (unsigned int)(63 - __builtin_clzll(v)) - (sub_bits - 1);
	return (shift << (sub_bits - 1)) + (unsigned int)(v >> shift);
}

/** The largest value bucket i of a histogram of sub_bits holds. */
static inline uint64_t bw_hist_bucket_upper(unsigned int i, unsigned int sub_bits)
{
	unsigned int half = 1u << (sub_bits - 1), shift;
	uint64_t sub;

	if (i < (1u << sub_bits))
		return i;
	shift = i / half - 1;
	sub = i % half + half;
	return (sub << shift) + (UINT64_C(1) << shift) - 1;
}

/** Buckets that cover [0, 2^range_bits) at sub_bits. */
#define BW_HIST_BUCKETS_FOR(range_bits, sub_bits) ((((range_bits) - (sub_bits)) + 2) << ((sub_bits) - 1))

#define BW_HIST_SUB_BITS 3
#define BW_HIST_RANGE_BITS 32
#define BW_HIST_BUCKETS BW_HIST_BUCKETS_FOR(BW_HIST_RANGE_BITS, BW_HIST_SUB_BITS) /* 124 */

/* A server-side distribution of microseconds (or of any count: batch sizes). */
struct bw_hist {
	uint64_t count;
	uint64_t sum;
	uint64_t buckets[BW_HIST_BUCKETS];
};

static inline void bw_hist_record(struct bw_hist *h, uint64_t v)
{
	unsigned int i = v < (UINT64_C(1) << BW_HIST_RANGE_BITS) ? bw_hist_bucket(v, BW_HIST_SUB_BITS)
								: BW_HIST_BUCKETS - 1;

	h->buckets[i]++;
	h->count++;
	h->sum += v;
}

/** Adds src's values to dst. */
static inline void bw_hist_merge(struct bw_hist *dst, const struct bw_hist *src)
{
	for (unsigned int i = 0; i < BW_HIST_BUCKETS; i++)
		dst->buckets[i] += src->buckets[i];
	dst->count += src->count;
	dst->sum += src->sum;
}

/** Values at or below `le` (counted exactly when le is a bucket's upper edge). */
static inline uint64_t bw_hist_count_le(const struct bw_hist *h, uint64_t le)
{
	uint64_t n = 0;

	for (unsigned int i = 0; i < BW_HIST_BUCKETS && bw_hist_bucket_upper(i, BW_HIST_SUB_BITS) <= le; i++)
		n += h->buckets[i];
	return n;
}

/**
 * The value below which a fraction q (0..1) of the values lie: the upper edge of the bucket that
 * holds rank ceil(q * count). 0 when empty.
 */
static inline uint64_t bw_hist_quantile(const struct bw_hist *h, double q)
{
	uint64_t rank, seen = 0;

	if (h->count == 0)
		return 0;
	rank = (uint64_t)(q * (double)h->count + 0.999999);
	if (rank < 1)
		rank = 1;
	if (rank > h->count)
		rank = h->count;
	for (unsigned int i = 0; i < BW_HIST_BUCKETS; i++) {
		seen += h->buckets[i];
		if (seen >= rank)
			return bw_hist_bucket_upper(i, BW_HIST_SUB_BITS);
	}
	return bw_hist_bucket_upper(BW_HIST_BUCKETS - 1, BW_HIST_SUB_BITS);
}

#endif /* BATCHWIRE_HIST_H */
