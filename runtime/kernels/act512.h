/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Private to runtime/kernels: the activations a GEMM's epilogue applies to 16 floats in a zmm
 * register as it stores them (sgemm.c's AVX-512 micro-kernel, amx.c's block stores), the same
 * results as rt_vm_act's for Relu, LeakyRelu and Clip (NaN: Relu gives 0, the others pass it).
 * Gelu is not here: its callers apply rt_vm_act to the stored row.
 */
#ifndef BW_RT_KERNELS_ACT512_H
#define BW_RT_KERNELS_ACT512_H

#include <immintrin.h>

#include "fused.h"

__attribute__((target("avx512f"))) static inline __m512 rt_act16(__m512 v, const struct rt_k_act_spec *act)
{
	switch (act->kind) {
	case RT_K_ACT_RELU: return _mm512_max_ps(v, _mm512_setzero_ps()); /* NaN -> 0, as x > 0 ? x : 0 */
	case RT_K_ACT_LEAKY_RELU:
		return _mm512_mask_mul_ps(v, _mm512_cmp_ps_mask(v, _mm512_setzero_ps(), _CMP_LT_OQ), v,
					  _mm512_set1_ps(act->a));
	case RT_K_ACT_CLIP: {
		__m512 hi = _mm512_set1_ps(act->b), lo = _mm512_set1_ps(act->a);

		v = _mm512_mask_mov_ps(v, _mm512_cmp_ps_mask(v, hi, _CMP_GT_OQ), hi);
		return _mm512_mask_mov_ps(v, _mm512_cmp_ps_mask(v, lo, _CMP_LT_OQ), lo);
	}
	default: return v;
	}
}

#endif /* BW_RT_KERNELS_ACT512_H */
