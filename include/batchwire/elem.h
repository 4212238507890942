/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * One element of a tensor by its dtype, as a double: how the CPU kernels store attribute values
 * (runtime/kernels/index.c), how bwrun prints outputs and how the input generator (inputs.h) stores
 * what it draws. DPDK-free and header-only, for the client's tools too.
 */
#ifndef BATCHWIRE_ELEM_H
#define BATCHWIRE_ELEM_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include <batchwire/dtype.h>
#include <batchwire/half.h>

/** \return element i of data as a double (NAN for a dtype it does not read). */
static inline double bw_elem_get(uint32_t dtype, const void *data, size_t i)
{
	switch (dtype) {
	case BW_DTYPE_FLOAT: return ((const float *)data)[i];
	case BW_DTYPE_DOUBLE: return ((const double *)data)[i];
	case BW_DTYPE_FLOAT16: return bw_half_to_float(((const uint16_t *)data)[i]);
	case BW_DTYPE_BFLOAT16: return bw_bf16_to_float(((const uint16_t *)data)[i]);
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

/** Stores v as element i of data in its dtype: float16 rounded to nearest even; bfloat16 and integers
 * truncated (v must fit the integer type); bool true for any v but 0. Nothing for another dtype. */
static inline void bw_elem_set(uint32_t dtype, void *data, size_t i, double v)
{
	switch (dtype) {
	case BW_DTYPE_FLOAT: ((float *)data)[i] = (float)v; break;
	case BW_DTYPE_DOUBLE: ((double *)data)[i] = v; break;
	case BW_DTYPE_FLOAT16: ((uint16_t *)data)[i] = bw_float_to_half((float)v); break;
	case BW_DTYPE_BFLOAT16: ((uint16_t *)data)[i] = bw_float_to_bf16((float)v); break;
	case BW_DTYPE_INT64: ((int64_t *)data)[i] = (int64_t)v; break;
	case BW_DTYPE_INT32: ((int32_t *)data)[i] = (int32_t)v; break;
	case BW_DTYPE_INT16: ((int16_t *)data)[i] = (int16_t)v; break;
	case BW_DTYPE_INT8: ((int8_t *)data)[i] = (int8_t)v; break;
	case BW_DTYPE_UINT64: ((uint64_t *)data)[i] = (uint64_t)v; break;
	case BW_DTYPE_UINT32: ((uint32_t *)data)[i] = (uint32_t)v; break;
	case BW_DTYPE_UINT16: ((uint16_t *)data)[i] = (uint16_t)v; break;
	case BW_DTYPE_UINT8: ((uint8_t *)data)[i] = (uint8_t)v; break;
	case BW_DTYPE_BOOL: ((uint8_t *)data)[i] = v != 0; break;
	default: break;
	}
}

#endif /* BATCHWIRE_ELEM_H */
