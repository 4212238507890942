/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The arrival schedule (load.h). Open loop: request 0 is due at start_ns; in fixed mode request i at
 * start_ns + i/rate, computed from i each time rather than by adding 1/rate, so that rounding does
 * not drift over a long run; in Poisson mode each request after the previous one by an exponential
 * gap. A request's time comes from the schedule alone: a caller that polls late gets every request
 * it missed, oldest first, with the times they should have left at, and the latency measured from
 * those times shows the stall (no coordinated omission). No clock is read here.
 */
#include <errno.h>
#include <math.h>
#include <string.h>

#include "load.h"

#define NS_PER_S 1e9

int load_sched_init(struct load_sched *s, enum load_mode mode, double rate, uint32_t outstanding, uint64_t limit,
		    uint64_t start_ns, uint64_t seed)
{
	if (s == NULL)
		return -EINVAL;
	switch (mode) {
	case LOAD_MODE_FIXED:
	case LOAD_MODE_POISSON:
		if (!isfinite(rate) || !(rate > 0))
			return -EINVAL;
		break;
	case LOAD_MODE_CLOSED:
		if (outstanding == 0)
			return -EINVAL;
		break;
	default:
		return -EINVAL;
	}
	memset(s, 0, sizeof(*s));
	s->mode = mode;
	s->rate = rate;
	s->outstanding = outstanding;
	s->limit = limit;
	s->start_ns = start_ns;
	s->next_ns = start_ns;
	s->rng = load_rng_seed(seed);
	return 0;
}

/* An exponential gap of mean 1/rate, by inversion: u in [0, 1) so 1 - u is never 0. */
static uint64_t poisson_gap_ns(struct load_sched *s)
{
	double u = (double)(load_rng_next(&s->rng) >> 11) * 0x1p-53;

	/* rounded, not truncated: truncation would shorten the mean gap by half a nanosecond */
	return (uint64_t)llround(-log1p(-u) / s->rate * NS_PER_S);
}

/* Request issued + 1's intended time, once request `issued` has been handed out. */
static uint64_t next_open_ns(struct load_sched *s)
{
	if (s->mode == LOAD_MODE_FIXED)
		/* long double: issued * 1e9 stays exact far past where a double's 53 bits would round it */
		return s->start_ns + (uint64_t)((long double)s->issued * NS_PER_S / s->rate);
	return s->next_ns + poisson_gap_ns(s);
}

unsigned int load_sched_due(struct load_sched *s, uint64_t now_ns, uint32_t in_flight, uint64_t *when,
			    unsigned int max)
{
	unsigned int n = 0;

	if (s->limit != 0) {
		uint64_t left = s->issued < s->limit ? s->limit - s->issued : 0;

		if (left < max)
			max = (unsigned int)left;
	}
	if (s->mode == LOAD_MODE_CLOSED) {
		uint32_t free_slots = in_flight < s->outstanding ? s->outstanding - in_flight : 0;

		n = free_slots < max ? free_slots : max;
		for (unsigned int i = 0; i < n; i++)
			when[i] = now_ns;
		s->issued += n;
		return n;
	}
	while (n < max && s->next_ns <= now_ns) {
		when[n++] = s->next_ns;
		s->issued++;
		s->next_ns = next_open_ns(s);
	}
	return n;
}

bool load_sched_done(const struct load_sched *s)
{
	return s->limit != 0 && s->issued >= s->limit;
}
