/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Private to runtime/kernels: the activations an AVX2 kernel's epilogue applies to 8 floats in a ymm
 * register as it stores them (sgemm.c's 6x16 micro-kernel, winograd.c's output transform,
 * conv_direct.c's AVX2 tiles), the same results as rt_vm_act's for Relu, LeakyRelu and Clip (NaN:
 * Relu gives 0, the others pass it), the lane masks of 8-float edges for vmaskmov, and an 8 x 8
 * transpose. act512.h is the AVX-512 counterpart.
 */
#ifndef BW_RT_KERNELS_ACT256_H
#define BW_RT_KERNELS_ACT256_H

#include <immintrin.h>

#include "fused.h"

__attribute__((target("avx2"))) static inline __m256 rt_act8(__m256 v, const struct rt_k_act_spec *act)
{
	switch (act->kind) {
	case RT_K_ACT_RELU: return _mm256_max_ps(v, _mm256_setzero_ps()); /* NaN -> 0, as x > 0 ? x : 0 */
	case RT_K_ACT_LEAKY_RELU:
		return _mm256_blendv_ps(v, _mm256_mul_ps(v, _mm256_set1_ps(act->a)),
					_mm256_cmp_ps(v, _mm256_setzero_ps(), _CMP_LT_OQ));
	case RT_K_ACT_CLIP: {
		__m256 hi = _mm256_set1_ps(act->b), lo = _mm256_set1_ps(act->a);

		v = _mm256_blendv_ps(v, hi, _mm256_cmp_ps(v, hi, _CMP_GT_OQ));
		return _mm256_blendv_ps(v, lo, _mm256_cmp_ps(v, lo, _CMP_LT_OQ));
	}
	default: return v;
	}
}

/* rt_act8's activation on one float: the kernels' scalar edges. */
static inline float rt_act1(float v, const struct rt_k_act_spec *act)
{
	switch (act->kind) {
	case RT_K_ACT_RELU: return v > 0.0f ? v : 0.0f;
	case RT_K_ACT_LEAKY_RELU: return v < 0.0f ? v * act->a : v;
	case RT_K_ACT_CLIP: return v < act->a ? act->a : v > act->b ? act->b : v;
	default: return v;
	}
}

/* v's 8 x 8 floats transposed in place: v[j] becomes column j (the pixel tiles' stores, the packing of
 * activations into k-major row panels). */
__attribute__((target("avx2"), always_inline)) static inline void rt_transpose8(__m256 v[8])
{
	__m256 t0 = _mm256_unpacklo_ps(v[0], v[1]), t1 = _mm256_unpackhi_ps(v[0], v[1]);
	__m256 t2 = _mm256_unpacklo_ps(v[2], v[3]), t3 = _mm256_unpackhi_ps(v[2], v[3]);
	__m256 t4 = _mm256_unpacklo_ps(v[4], v[5]), t5 = _mm256_unpackhi_ps(v[4], v[5]);
	__m256 t6 = _mm256_unpacklo_ps(v[6], v[7]), t7 = _mm256_unpackhi_ps(v[6], v[7]);
	__m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xee);
	__m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xee);
	__m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xee);
	__m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xee);

	v[0] = _mm256_permute2f128_ps(u0, u4, 0x20);
	v[1] = _mm256_permute2f128_ps(u1, u5, 0x20);
	v[2] = _mm256_permute2f128_ps(u2, u6, 0x20);
	v[3] = _mm256_permute2f128_ps(u3, u7, 0x20);
	v[4] = _mm256_permute2f128_ps(u0, u4, 0x31);
	v[5] = _mm256_permute2f128_ps(u1, u5, 0x31);
	v[6] = _mm256_permute2f128_ps(u2, u6, 0x31);
	v[7] = _mm256_permute2f128_ps(u3, u7, 0x31);
}

/* The lanes of 8 that hold one of live values (live <= 0: none), as vmaskmov's mask: sign bits set. */
__attribute__((target("avx2"))) static inline __m256i lane_mask8(int64_t live)
{
	int32_t n = live >= 8 ? 8 : live <= 0 ? 0 : (int32_t)live;

	return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

#endif /* BW_RT_KERNELS_ACT256_H */
