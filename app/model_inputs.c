/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Generated model inputs and element access by dtype, shared by bwrun and the GPU benchmark
 * (bench/gpu_launch.c), so that both feed a model the same data for the same seed.
 */
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "model_inputs.h"
#include "program_math.h" /* gpu_half_to_float, gpu_float_to_half: bit-exact, round to nearest even */

double bw_elem_get(uint8_t dtype, const void *data, size_t i)
{
	switch (dtype) {
	case BW_DTYPE_FLOAT: return ((const float *)data)[i];
	case BW_DTYPE_DOUBLE: return ((const double *)data)[i];
	case BW_DTYPE_FLOAT16: return gpu_half_to_float(((const uint16_t *)data)[i]);
	case BW_DTYPE_BFLOAT16: {
		uint32_t bits = (uint32_t)((const uint16_t *)data)[i] << 16;
		float f;

		memcpy(&f, &bits, sizeof(f));
		return f;
	}
	case BW_DTYPE_INT64: return (double)((const int64_t *)data)[i];
	case BW_DTYPE_INT32: return ((const int32_t *)data)[i];
	case BW_DTYPE_INT16: return ((const int16_t *)data)[i];
	case BW_DTYPE_INT8: return ((const int8_t *)data)[i];
	case BW_DTYPE_UINT64: return (double)((const uint64_t *)data)[i];
	case BW_DTYPE_UINT32: return ((const uint32_t *)data)[i];
	case BW_DTYPE_UINT16: return ((const uint16_t *)data)[i];
	case BW_DTYPE_UINT8:
	case BW_DTYPE_BOOL: return ((const uint8_t *)data)[i];
	default: return NAN;
	}
}

void bw_elem_set(uint8_t dtype, void *data, size_t i, double v)
{
	switch (dtype) {
	case BW_DTYPE_FLOAT: ((float *)data)[i] = (float)v; break;
	case BW_DTYPE_DOUBLE: ((double *)data)[i] = v; break;
	case BW_DTYPE_FLOAT16: ((uint16_t *)data)[i] = gpu_float_to_half((float)v); break;
	case BW_DTYPE_BFLOAT16: { /* truncation: generated data need not round */
		float f = (float)v;
		uint32_t bits;

		memcpy(&bits, &f, sizeof(bits));
		((uint16_t *)data)[i] = (uint16_t)(bits >> 16);
		break;
	}
	case BW_DTYPE_INT64: ((int64_t *)data)[i] = (int64_t)v; break;
	case BW_DTYPE_INT32: ((int32_t *)data)[i] = (int32_t)v; break;
	case BW_DTYPE_INT16: ((int16_t *)data)[i] = (int16_t)v; break;
	case BW_DTYPE_INT8: ((int8_t *)data)[i] = (int8_t)v; break;
	case BW_DTYPE_UINT64: ((uint64_t *)data)[i] = (uint64_t)v; break;
	case BW_DTYPE_UINT32: ((uint32_t *)data)[i] = (uint32_t)v; break;
	case BW_DTYPE_UINT16: ((uint16_t *)data)[i] = (uint16_t)v; break;
	case BW_DTYPE_UINT8:
	case BW_DTYPE_BOOL: ((uint8_t *)data)[i] = (uint8_t)v; break;
	default: break;
	}
}

static bool dtype_is_float(uint8_t dtype)
{
	return dtype == BW_DTYPE_FLOAT || dtype == BW_DTYPE_DOUBLE || dtype == BW_DTYPE_FLOAT16 ||
	       dtype == BW_DTYPE_BFLOAT16;
}

/* splitmix64 (Steele, Lea, Flood): tiny, good enough for test data, the same on every host. */
static uint64_t splitmix64(uint64_t *state)
{
	uint64_t z = (*state += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* Seeded data, as --help describes it. Each input has its own stream, so adding a --input for one
 * input does not change what the others get. */
void bw_input_generate(const struct rt_tensor *t, size_t nbytes, uint32_t index, uint64_t seed, const char *name,
		       void *data)
{
	size_t elem = rt_dtype_size(t->dtype), n = elem != 0 ? nbytes / elem : 0;
	size_t row = t->rank > 0 && t->dims[t->rank - 1] > 0 ? (size_t)t->dims[t->rank - 1] : 1;
	uint64_t state = seed ^ (0x51ed2701a3c9e5b7ull * (index + 1));
	bool mask = strstr(name, "mask") != NULL;

	for (size_t i = 0; i < n; i++) {
		uint64_t r = splitmix64(&state);
		double v;

		if (dtype_is_float(t->dtype))
			v = (double)(r >> 40) * 0x1p-24 * 2.0 - 1.0; /* 24 bits: exact in float */
		else if (mask)
			v = (i % row) < row - row / 4 ? 1 : 0;
		else if (t->dtype == BW_DTYPE_BOOL)
			v = (double)(r >> 63);
		else
			v = (double)(r % BW_INPUT_INT_RANGE);
		bw_elem_set(t->dtype, data, i, v);
	}
}
