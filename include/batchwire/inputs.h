/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Seeded model inputs: the one generator bwrun, bench/gpu_launch and bwcli share, so that a model gets
 * the same data for the same seed from each of them, on every host. Header-only because bwcli links
 * nothing but the client library.
 *
 * Values: floats uniform in [-1, 1) (24 bits, exact in float; float16 rounded to nearest even,
 * bfloat16 truncated), a mask ones with the last quarter of each row 0, bools a random bit, other
 * integers uniform in [0, BW_INPUT_INT_RANGE). Each input has its own stream of numbers
 * (bw_input_stream), so giving one input from a file does not change what the others get.
 */
#ifndef BATCHWIRE_INPUTS_H
#define BATCHWIRE_INPUTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <batchwire/dtype.h>
#include <batchwire/elem.h> /* bw_elem_set: each value stored in its dtype */

#define BW_INPUT_INT_RANGE 1000   /* generated integer inputs (not masks): uniform in [0, this) */
#define BW_INPUT_SEED_DEFAULT 1u  /* bwrun's --seed, and what bwcli's model inputs use */

/* splitmix64 (Steele, Lea, Flood): tiny, good enough for test data, the same on every host. */
static inline uint64_t bw_splitmix64(uint64_t *state)
{
	uint64_t z = (*state += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/** \return the starting state of input index's stream for seed. */
static inline uint64_t bw_input_stream(uint64_t seed, uint32_t index)
{
	return seed ^ (0x51ed2701a3c9e5b7ull * ((uint64_t)index + 1));
}

/**
 * Fills elems elements of dtype at data from *state (advanced by one number per element), as the top
 * of this file says.
 * \param row   elements per row (the last dimension; 0 counts as 1): where a mask's zeros start
 * \param mask  the tensor is a mask (bwrun and bwcli: its name holds "mask")
 */
static inline void bw_input_fill(uint32_t dtype, void *data, size_t elems, size_t row, bool mask, uint64_t *state)
{
	bool is_float = dtype == BW_DTYPE_FLOAT || dtype == BW_DTYPE_DOUBLE || dtype == BW_DTYPE_FLOAT16 ||
			dtype == BW_DTYPE_BFLOAT16;

	if (row == 0)
		row = 1;
	for (size_t i = 0; i < elems; i++) {
		uint64_t r = bw_splitmix64(state);
		double v;

		if (is_float)
			v = (double)(r >> 40) * 0x1p-24 * 2.0 - 1.0; /* 24 bits: exact in float */
		else if (mask)
			v = (i % row) < row - row / 4 ? 1 : 0;
		else if (dtype == BW_DTYPE_BOOL)
			v = (double)(r >> 63);
		else
			v = (double)(r % BW_INPUT_INT_RANGE);
		bw_elem_set(dtype, data, i, v);
	}
}

#endif /* BATCHWIRE_INPUTS_H */
