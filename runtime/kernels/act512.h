/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Private to runtime/kernels: the activations a GEMM's epilogue applies to 16 floats in a zmm
 * register as it stores them (sgemm.c's AVX-512 micro-kernel, amx.c's block stores), the same
 * results as rt_vm_act's for Relu, LeakyRelu and Clip (NaN: Relu gives 0, the others pass it).
 * Gelu is not in rt_act16: its callers apply rt_vm_act to the stored row, or on the bf16 paths
 * rt_gelu_bf16 (below).
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

/*
 * Gelu (its erf form) of 16 floats, for the epilogues of the bf16 paths (amx.c), whose products were
 * rounded to bf16 (2^-9) before they got here: erf by Abramowitz and Stegun's 7.1.26 (|error| <=
 * 1.5e-7 over the whole line, one rational form, no branch to select), e^(-z^2) by Cephes' degree-5
 * polynomial scaled with vscalefps. About half the instructions of rt_vm_act's Gelu, whose erf is
 * exact to fp32 and evaluates two polynomials for every value. 1 + erf(z) is formed as erfc(|z|)
 * for z < 0, so the tail stays relative; from |z| = 10 on, erf is +-1 exactly. +inf gives +inf; -inf
 * and NaN give NaN, as rt_vm_act does.
 */
__attribute__((target("avx512f"))) static inline __m512 rt_gelu16_bf16(__m512 x)
{
	const __m512 one = _mm512_set1_ps(1.0f), zero = _mm512_setzero_ps();
	__m512 z = _mm512_mul_ps(x, _mm512_set1_ps(0.70710678118654752f));
	/* erfc(10) is 2e-45: past it nothing changes, and t stays finite for an infinite x */
	__m512 a = _mm512_min_ps(_mm512_abs_ps(z), _mm512_set1_ps(10.0f));
	__m512 d = _mm512_fmadd_ps(a, _mm512_set1_ps(0.3275911f), one);
	__m512 t = _mm512_rcp14_ps(d), p, y, n, r, q, e, s;

	t = _mm512_mul_ps(t, _mm512_fnmadd_ps(d, t, _mm512_set1_ps(2.0f))); /* one Newton step: 2^-28 */
	p = _mm512_fmadd_ps(_mm512_set1_ps(1.061405429f), t, _mm512_set1_ps(-1.453152027f));
	p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(1.421413741f));
	p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(-0.284496736f));
	p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(0.254829592f));
	p = _mm512_mul_ps(p, t);
	y = _mm512_fnmadd_ps(a, a, zero); /* -z^2, in [-100, 0] */
	n = _mm512_roundscale_ps(_mm512_mul_ps(y, _mm512_set1_ps(1.44269504088896341f)),
				 _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
	r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), y);
	r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
	q = _mm512_fmadd_ps(_mm512_set1_ps(1.9875691500e-4f), r, _mm512_set1_ps(1.3981999507e-3f));
	q = _mm512_fmadd_ps(q, r, _mm512_set1_ps(8.3334519073e-3f));
	q = _mm512_fmadd_ps(q, r, _mm512_set1_ps(4.1665795894e-2f));
	q = _mm512_fmadd_ps(q, r, _mm512_set1_ps(1.6666665459e-1f));
	q = _mm512_fmadd_ps(q, r, _mm512_set1_ps(5.0000001201e-1f));
	e = _mm512_scalef_ps(_mm512_fmadd_ps(q, _mm512_mul_ps(r, r), _mm512_add_ps(r, one)), n);
	e = _mm512_mul_ps(p, e); /* erfc(|z|); 0 from 10 on, as rt_vm_act's erf is 1 there */
	e = _mm512_mask_mov_ps(e, _mm512_cmp_ps_mask(a, _mm512_set1_ps(10.0f), _CMP_GE_OQ), zero);
	s = _mm512_mask_mov_ps(_mm512_sub_ps(_mm512_set1_ps(2.0f), e), _mm512_cmp_ps_mask(x, zero, _CMP_LT_OQ), e);
	return _mm512_mul_ps(_mm512_mul_ps(x, _mm512_set1_ps(0.5f)), s);
}

/* rt_gelu16_bf16 over n floats in place (a masked tail). */
__attribute__((target("avx512f"))) static inline void rt_gelu_bf16(float *v, int64_t n)
{
	int64_t i = 0;

	for (; i + 16 <= n; i += 16)
		_mm512_storeu_ps(v + i, rt_gelu16_bf16(_mm512_loadu_ps(v + i)));
	if (i < n) {
		__mmask16 m = (__mmask16)((1u << (n - i)) - 1);

		_mm512_mask_storeu_ps(v + i, m, rt_gelu16_bf16(_mm512_maskz_loadu_ps(m, v + i)));
	}
}

#endif /* BW_RT_KERNELS_ACT512_H */
