/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Microseconds <-> clock ticks at a given frequency: the one conversion platform/ (the TSC, at EAL's
 * frequency) and batching/ (whatever clock its caller hands it) share. The product goes through 128
 * bits, so no budget overflows it: us * hz overflows 64 bits past about 1.8e19, an hour at 5 GHz.
 * A result too large for 64 bits saturates (UINT64_MAX ticks: later than anything the clock reaches).
 */
#ifndef BATCHWIRE_CLOCK_H
#define BATCHWIRE_CLOCK_H

#include <stdint.h>

#define BW_US_PER_S 1000000u

/** \return us microseconds in ticks of a hz clock, rounded down; UINT64_MAX when it does not fit. */
static inline uint64_t bw_us_to_ticks(uint64_t us, uint64_t hz)
{
	unsigned __int128 t = (unsigned __int128)us * hz / BW_US_PER_S;

	return t > UINT64_MAX ? UINT64_MAX : (uint64_t)t;
}

/** \return ticks of a hz clock (hz > 0) in microseconds, rounded down; UINT64_MAX when it does not fit. */
static inline uint64_t bw_ticks_to_us(uint64_t ticks, uint64_t hz)
{
	unsigned __int128 us = (unsigned __int128)ticks * BW_US_PER_S / hz;

	return us > UINT64_MAX ? UINT64_MAX : (uint64_t)us;
}

#endif /* BATCHWIRE_CLOCK_H */
