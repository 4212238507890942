/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Private to runtime/kernels: the lane masks of 16-float edges (every AVX-512 kernel's), and the
 * activations a GEMM's epilogue applies to 16 floats in a zmm register as it stores them (sgemm.c's
 * AVX-512 micro-kernel, amx.c's block stores), the same
 * results as rt_vm_act's for Relu, LeakyRelu and Clip (NaN: Relu gives 0, the others pass it).
 * Gelu is not in rt_act16: its callers apply rt_vm_act to the stored row, or on the bf16 paths
 * rt_gelu_bf16 (below).
 */
#ifndef BW_RT_KERNELS_ACT512_H
#define BW_RT_KERNELS_ACT512_H

#include <immintrin.h>

#include "fused.h"

/* The lanes of 16 that hold one of live values (live <= 0: none): a row's edge, masked. */
static inline __mmask16 lane_mask16(int64_t live)
{
	return live >= 16 ? (__mmask16)0xffff : live <= 0 ? (__mmask16)0 : (__mmask16)((1u << live) - 1);
}

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
 * Gelu (its erf form, x * Phi(x)) of 16 floats, for the epilogues of the bf16 paths (amx.c), whose
 * products were rounded to bf16 (2^-9) before they got here. Phi is a table of polynomials: one of
 * degree 4 per interval of 0.375 over [-6, 6), in the interval's own variable d = x - start, so
 * the five coefficients of 16 lanes are five two-register permutes (vpermt2ps, 32 entries) and
 * Horner's rule is four FMAs: about 18 instructions for 16 values, where an erf by a rational
 * form and an exp takes 31. The tail below 0 was fitted to Phi's relative error (7.8e-5 of the
 * value above x = -4), the rest to its absolute error (2e-7); below -6 Phi is taken as 0 (it is
 * 1e-9 there), above 5.99 as Phi(5.99), 1 to within 2e-7. +inf gives +inf;
 * -inf and NaN give NaN, as rt_vm_act does. gelu_table.py (bf16) makes the table and replays these
 * steps in float32 against erf in double.
 */
#define RT_GELU_INTERVALS 32
#define RT_GELU_WIDTH 0.375f
#define RT_GELU_START -6.0f

static const float rt_gelu_phi_table[5][RT_GELU_INTERVALS] __attribute__((aligned(64))) = {
	/* coefficient n of interval i at [n][i], from gelu_table.py */
	/* largest error over [-10, 10]: 6.24e-07 of |gelu(x)| + |x| / 10; relative
	 * 7.76e-05 above x = -4, 0.000491 above -5.4 */
	{ 9.87180782e-10f, 9.27934085e-09f, 7.60717427e-08f, 5.44146758e-07f, 3.39808344e-06f, 1.85380613e-05f,
	  8.84207111e-05f, 0.000369085261f, 0.00134990725f, 0.00433245301f, 0.0122244582f, 0.0303963162f,
	  0.0668071359f, 0.130294487f, 0.226627395f, 0.353830338f, 0.500000119f, 0.646169841f,
	  0.773372591f, 0.869705379f, 0.93319273f, 0.969603598f, 0.987775505f, 0.995667577f,
	  0.998650134f, 0.999630928f, 0.999911606f, 0.999981463f, 0.999996603f, 0.999999464f,
	  0.99999994f, 1.0f },
	{ 5.96351324e-09f, 5.29998232e-08f, 4.08811019e-07f, 2.7372605e-06f, 1.59117335e-05f, 8.03124567e-05f,
	  0.000352016068f, 0.00133998762f, 0.00443033781f, 0.0127234375f, 0.031741865f, 0.0687930733f,
	  0.129527077f, 0.211882323f, 0.30113256f, 0.371839911f, 0.39892444f, 0.371847719f,
	  0.301142931f, 0.211888313f, 0.129527107f, 0.068790026f, 0.0317389853f, 0.0127219912f,
	  0.00442999834f, 0.00134008052f, 0.000352151954f, 8.03886651e-05f, 1.59411393e-05f, 2.74598892e-06f,
	  4.10893051e-07f, 5.34079447e-08f },
	{ 2.12501057e-08f, 1.7055936e-07f, 1.1894067e-06f, 7.20048774e-06f, 3.78013792e-05f, 0.000171865046f,
	  0.000675575924f, 0.00229110243f, 0.00668497197f, 0.0167195853f, 0.0356567428f, 0.0643299371f,
	  0.0969185606f, 0.119046181f, 0.113028936f, 0.0700569302f, 0.000383393024f, -0.0695574433f,
	  -0.11303746f, -0.119428493f, -0.0973438621f, -0.0645704418f, -0.0356946923f, -0.016653996f,
	  -0.00660786824f, -0.00224053743f, -0.00065139035f, -0.000162767145f, -3.50185583e-05f, -6.49566846e-06f,
	  -1.03992897e-06f, -1.43815399e-07f },
	{ 9.74915881e-09f, 1.10397401e-07f, 9.4225328e-07f, 6.43718067e-06f, 3.60695121e-05f, 0.000167619539f,
	  0.000648919551f, 0.00209298148f, 0.00560135115f, 0.0123220459f, 0.0218653176f, 0.0300624631f,
	  0.0287204627f, 0.0104926964f, -0.0226595458f, -0.05577619f, -0.0693870038f, -0.0545924231f,
	  -0.0212112796f, 0.0112137608f, 0.0285524093f, 0.0295044295f, 0.0214210693f, 0.012148696f,
	  0.00560590718f, 0.00214809435f, 0.000691672903f, 0.000188572536f, 4.37556409e-05f, 8.67322251e-06f,
	  1.47271896e-06f, 2.14671942e-07f },
	{ 1.28591608e-07f, 8.62249124e-07f, 4.93221205e-06f, 2.39839501e-05f, 9.86760788e-05f, 0.000341199921f,
	  0.000981687452f, 0.00231263391f, 0.00433251355f, 0.00605470361f, 0.00513076456f, -0.000917226193f,
	  -0.0115740057f, -0.0210937746f, -0.0213240143f, -0.00914754253f, 0.00900115911f, 0.0212538689f,
	  0.0211770106f, 0.011764803f, 0.00109229982f, -0.00505665783f, -0.00607665069f, -0.00439510588f,
	  -0.00236907369f, -0.0010157465f, -0.000356801174f, -0.000104368642f, -2.56797339e-05f, -5.35073877e-06f,
	  -9.4865743e-07f, -1.43616433e-07f },
};

__attribute__((target("avx512f"))) static inline __m512 rt_gelu16_bf16(__m512 x)
{
	const float(*c)[RT_GELU_INTERVALS] = rt_gelu_phi_table;
	/* -5.9999995, the float above -6: t stays >= 0, its floor a valid interval */
	__m512 xc = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(-5.9999995f)), _mm512_set1_ps(5.99f));
	__m512 t = _mm512_fmadd_ps(xc, _mm512_set1_ps(1.0f / RT_GELU_WIDTH),
				   _mm512_set1_ps(-RT_GELU_START / RT_GELU_WIDTH));
	__m512 fi = _mm512_roundscale_ps(t, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
	/* the interval's start, fi * 0.375 - 6, is exact: d keeps x's own digits, whatever t's rounding */
	__m512 start = _mm512_fmadd_ps(fi, _mm512_set1_ps(RT_GELU_WIDTH), _mm512_set1_ps(RT_GELU_START));
	__m512 d = _mm512_sub_ps(xc, start);
	__m512i i = _mm512_cvttps_epi32(fi);
	/* below -6 (and -inf: -inf * 0 is NaN, as in rt_vm_act) Phi is 0; a NaN x stays NaN in x * Phi */
	__mmask16 inside = _mm512_cmp_ps_mask(x, _mm512_set1_ps(RT_GELU_START), _CMP_NLT_UQ);
	__m512 p = _mm512_permutex2var_ps(_mm512_load_ps(c[4]), i, _mm512_load_ps(c[4] + 16));

	p = _mm512_fmadd_ps(p, d, _mm512_permutex2var_ps(_mm512_load_ps(c[3]), i, _mm512_load_ps(c[3] + 16)));
	p = _mm512_fmadd_ps(p, d, _mm512_permutex2var_ps(_mm512_load_ps(c[2]), i, _mm512_load_ps(c[2] + 16)));
	p = _mm512_fmadd_ps(p, d, _mm512_permutex2var_ps(_mm512_load_ps(c[1]), i, _mm512_load_ps(c[1] + 16)));
	p = _mm512_maskz_fmadd_ps(inside, p, d,
				  _mm512_permutex2var_ps(_mm512_load_ps(c[0]), i, _mm512_load_ps(c[0] + 16)));
	return _mm512_mul_ps(x, p);
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
