/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The in-flight limit of one executor, shared by every polling core that feeds it, lock-free.
 *
 * Fixed (num_batch_threads > 0): at most num_batch_threads batches in flight, as TensorFlow's
 * SharedBatchScheduler with that many batch threads.
 *
 * Adaptive (num_batch_threads <= 0): TensorFlow's AdaptiveSharedBatchScheduler. Every
 * batches_to_average_over completions, the average latency (batch creation to completion) of the
 * window is compared with the previous window's: if it fell, the step doubles when the previous
 * window had fallen too and halves otherwise (within [1/128, 1/8]); if it did not fall, the direction
 * reverses. Then limit += direction * limit * step, within [min, max]. Initial state: step 1/8,
 * direction +1, previous average 0 (so the first window always reverses), as TensorFlow's.
 *
 * Concurrency: completions from several cores add (1 << 48 | latency) to one 64-bit word; the core
 * whose addition completes a window computes the new limit and subtracts exactly the window it read,
 * so additions for the next window are never lost. Only that core writes the rule's state, and the
 * next window cannot complete before its subtraction (release) is seen (acquire).
 */
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "batching.h"

#define WINDOW_COUNT_SHIFT 48
#define WINDOW_SUM_MASK ((UINT64_C(1) << WINDOW_COUNT_SHIFT) - 1)

struct bat_limiter {
	_Atomic uint32_t in_flight;
	_Atomic uint64_t limit_bits; /* a double; written by the window's last completer only */
	_Atomic uint64_t window;     /* completions << 48 | latency sum in us */
	bool adaptive;
	uint32_t window_size;
	double min_limit, max_limit;
	/* the rule's state: written only by the core that completes a window */
	double step;
	double direction;
	double last_avg_latency;
	bool last_decreased;
};

static double limit_load(const struct bat_limiter *lim)
{
	uint64_t bits = atomic_load_explicit(&lim->limit_bits, memory_order_relaxed);
	double v;

	memcpy(&v, &bits, sizeof(v));
	return v;
}

static void limit_store(struct bat_limiter *lim, double v)
{
	uint64_t bits;

	memcpy(&bits, &v, sizeof(bits));
	atomic_store_explicit(&lim->limit_bits, bits, memory_order_relaxed);
}

struct bat_limiter *bat_limiter_create(const struct bat_options *opts)
{
	struct bat_limiter *lim = calloc(1, sizeof(*lim));

	if (lim == NULL)
		return NULL;
	lim->adaptive = opts->num_batch_threads <= 0;
	if (lim->adaptive) {
		limit_store(lim, opts->initial_inflight_batches);
		lim->min_limit = opts->min_inflight_batches;
		lim->max_limit = opts->max_inflight_batches;
		lim->window_size = opts->batches_to_average_over;
	} else {
		limit_store(lim, opts->num_batch_threads);
	}
	lim->step = BAT_STEP_MAX;
	lim->direction = 1;
	return lim;
}

void bat_limiter_destroy(struct bat_limiter *lim)
{
	free(lim);
}

double bat_limiter_limit(const struct bat_limiter *lim)
{
	return limit_load(lim);
}

uint32_t bat_limiter_in_flight(const struct bat_limiter *lim)
{
	return atomic_load_explicit(&lim->in_flight, memory_order_relaxed);
}

/* xorshift64*: a uniform double in [0, 1) from the caller's own state. */
static double rng_uniform(uint64_t *state)
{
	uint64_t x = *state;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*state = x;
	return (double)((x * UINT64_C(0x2545F4914F6CDD1D)) >> 11) * 0x1.0p-53;
}

bool bat_limiter_try_acquire(struct bat_limiter *lim, uint64_t *rng)
{
	uint32_t cur = atomic_load_explicit(&lim->in_flight, memory_order_relaxed);

	for (;;) {
		double headroom = limit_load(lim) - cur;

		if (headroom <= 0)
			return false;
		/* A fractional limit admits its last batch with probability equal to the fraction. */
		if (headroom < 1 && rng_uniform(rng) >= headroom)
			return false;
		if (atomic_compare_exchange_weak_explicit(&lim->in_flight, &cur, cur + 1, memory_order_acquire,
							  memory_order_relaxed))
			return true;
	}
}

static void window_close(struct bat_limiter *lim, uint32_t count, uint64_t sum_us)
{
	double avg = (double)sum_us / count;
	bool decreased = avg < lim->last_avg_latency;
	double limit = limit_load(lim);

	if (decreased) {
		/* Better because we moved the right way: go faster. Better because we backed off a
		 * mistake: go slower, so as not to oscillate. */
		lim->step *= lim->last_decreased ? 2 : 0.5;
		lim->step = fmin(fmax(lim->step, BAT_STEP_MIN), BAT_STEP_MAX);
	} else {
		lim->direction = -lim->direction;
	}
	limit += lim->direction * limit * lim->step;
	limit_store(lim, fmin(fmax(limit, lim->min_limit), lim->max_limit));
	lim->last_avg_latency = avg;
	lim->last_decreased = decreased;
}

void bat_limiter_release(struct bat_limiter *lim, uint64_t latency_us)
{
	const uint64_t one = UINT64_C(1) << WINDOW_COUNT_SHIFT;
	uint64_t word;

	atomic_fetch_sub_explicit(&lim->in_flight, 1, memory_order_release);
	if (!lim->adaptive)
		return;

	uint64_t add = one | (latency_us & WINDOW_SUM_MASK);
	word = atomic_fetch_add_explicit(&lim->window, add, memory_order_acq_rel) + add;
	/* Only the completion that brings the count to window_size closes the window: the word as it
	 * left it holds exactly that window, whatever others add meanwhile. */
	if ((word >> WINDOW_COUNT_SHIFT) != lim->window_size)
		return;
	do {
		uint32_t count = (uint32_t)(word >> WINDOW_COUNT_SHIFT);

		window_close(lim, count, word & WINDOW_SUM_MASK);
		word = atomic_fetch_sub_explicit(&lim->window, word, memory_order_acq_rel) - word;
		/* Completions that arrived while this window was being closed counted past window_size,
		 * so none of them closes the next one: do it here, over all of them. */
	} while ((word >> WINDOW_COUNT_SHIFT) >= lim->window_size);
}
