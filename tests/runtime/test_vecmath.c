/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Unit tests of the vector math (runtime/kernels/vecmath.c and vecmath_avx512.c) through its entry
 * points, against double-precision references: the activations, softmax and layernorm rows, and the
 * fills, at every length from 1 to past two 16-lane vectors, so that each width's tails and full
 * vectors are both checked, and each element's result is checked not to depend on where it lies in
 * the array. meson runs the program once per instruction-set level (BW_CPU_ISA), so each table
 * (baseline, x86-64-v3, AVX-512) is checked on any CPU that runs it; test_opt checks exp and erf
 * against libm at each level.
 */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../bw_cunit.h"
#include "isa_level.h"
#include "kernels/act512.h"
#include "kernels/fused.h"

#define LEN_MAX 40 /* lengths 1..LEN_MAX: every tail of 8 and 16 lanes, then full vectors and a tail */

static unsigned int g_seed = 2024;

static float rand_in(float lo, float hi)
{
	return lo + (hi - lo) * (float)rand_r(&g_seed) / (float)RAND_MAX;
}

static bool same_bits(float a, float b)
{
	return memcmp(&a, &b, sizeof(a)) == 0;
}

static double gelu_ref(double x)
{
	return x * 0.5 * (1.0 + erf(x / sqrt(2.0)));
}

/*
 * GELU against erf in double, over [-10, 10]: x times vecmath.h's Phi, a table of polynomials for
 * the normal tail fitted to its relative error (gelu_table.py fp32 replays the float steps: 1.6e-7
 * of |gelu(x)| + |x| / 10, the rounding of the product at large |x| included, and 1.9e-5 of
 * gelu(x) itself in (-4, 0), where 1 + erf used to cancel to 4.7e-4).
 */
static void test_gelu(void)
{
	enum { N = 20001 };
	static float x[N], y[N];
	const struct rt_k_act_spec gelu = { .kind = RT_K_ACT_GELU };
	double worst = 0, worst_tail = 0;

	for (int i = 0; i < N; i++)
		x[i] = -10.0f + 20.0f * (float)i / (N - 1);
	memcpy(y, x, sizeof(y));
	rt_vm_act(y, N, &gelu);
	for (int i = 0; i < N; i++) {
		double want = gelu_ref(x[i]), err = fabs(y[i] - want);
		double d = err / (fabs(want) + fabs(x[i]) * 1e-1 + 1e-30);

		worst = d > worst ? d : worst;
		if (x[i] > -4.0f && x[i] < 0.0f && err / fabs(want) > worst_tail)
			worst_tail = err / fabs(want);
	}
	printf("\n    gelu: largest error %.3g of |gelu(x)| + |x| / 10, %.3g of gelu(x) in (-4, 0)\n", worst,
	       worst_tail);
	CU_ASSERT(worst < 1e-6);
	CU_ASSERT(worst_tail < 5e-5);
	x[0] = NAN;
	x[1] = -INFINITY;
	x[2] = INFINITY;
	rt_vm_act(x, 3, &gelu);
	CU_ASSERT(isnan(x[0]));
	CU_ASSERT(isnan(x[1])); /* -inf * 0: as x * 0.5 * (1 + erf(x)) is in float */
	CU_ASSERT_EQUAL(x[2], INFINITY);
}

/*
 * The bf16 paths' GELU (act512.h: x times a table of polynomials for Phi, absolute error 2e-7,
 * relative 7.8e-5 in the tail above -4) against erf in double over [-10, 10], every tail length,
 * and the specials.
 */
__attribute__((target("avx512f"))) static void test_gelu_bf16(void)
{
	enum { N = 20001 };
	static float x[N], y[N];
	double worst = 0, tail = 0;

	for (int i = 0; i < N; i++)
		x[i] = -10.0f + 20.0f * (float)i / (N - 1);
	memcpy(y, x, sizeof(y));
	rt_gelu_bf16(y, N);
	for (int i = 0; i < N; i++) {
		double want = gelu_ref(x[i]), d = fabs(y[i] - want) / (fabs(want) + fabs(x[i]) * 1e-1 + 1e-30);

		worst = d > worst ? d : worst;
		if (x[i] >= -4.0f && x[i] < 0.0f && fabs(y[i] - want) / fabs(want) > tail)
			tail = fabs(y[i] - want) / fabs(want);
	}
	printf("\n    gelu (bf16 paths): largest error %.3g of |gelu(x)| + |x| / 10, %.3g of gelu(x) in [-4, 0)\n",
	       worst, tail);
	CU_ASSERT(worst < 1e-6);
	CU_ASSERT(tail < 2e-4); /* 2^-9, bf16's rounding, is 2e-3 */
	for (int n = 1; n <= LEN_MAX; n++) { /* a tail leaves what follows it alone */
		float v[LEN_MAX + 1];

		for (int i = 0; i <= LEN_MAX; i++)
			v[i] = (float)i * 0.25f - 3.0f;
		rt_gelu_bf16(v, n);
		CU_ASSERT(same_bits(v[n], (float)n * 0.25f - 3.0f));
		CU_ASSERT(fabs(v[n - 1] - gelu_ref((float)(n - 1) * 0.25f - 3.0f)) < 1e-6);
	}
	x[0] = NAN;
	x[1] = -INFINITY;
	x[2] = INFINITY;
	x[3] = 0.0f;
	x[4] = -40.0f;
	rt_gelu_bf16(x, 5);
	CU_ASSERT(isnan(x[0]));
	CU_ASSERT(isnan(x[1]));
	CU_ASSERT_EQUAL(x[2], INFINITY);
	CU_ASSERT_EQUAL(x[3], 0.0f);
	CU_ASSERT(x[4] <= 0.0f && x[4] > -1e-30f);
}

/* Relu, LeakyRelu and Clip are exact: the comparisons and one product of the scalar definitions. */
static void test_piecewise(void)
{
	const struct rt_k_act_spec acts[] = {
		{ .kind = RT_K_ACT_RELU }, { .kind = RT_K_ACT_LEAKY_RELU, .a = 0.1f },
		{ .kind = RT_K_ACT_CLIP, .a = -0.5f, .b = 0.75f },
	};
	float x[LEN_MAX], y[LEN_MAX];

	for (size_t a = 0; a < sizeof(acts) / sizeof(acts[0]); a++) {
		for (int n = 1; n <= LEN_MAX; n++) {
			for (int i = 0; i < n; i++)
				x[i] = y[i] = rand_in(-2.0f, 2.0f);
			x[0] = y[0] = NAN;
			rt_vm_act(y, n, &acts[a]);
			for (int i = 0; i < n; i++) {
				float v = x[i], want;

				switch (acts[a].kind) {
				case RT_K_ACT_RELU: want = v > 0 ? v : 0; break;
				case RT_K_ACT_LEAKY_RELU: want = v < 0 ? v * acts[a].a : v; break;
				default: want = v < acts[a].a ? acts[a].a : v > acts[a].b ? acts[a].b : v; break;
				}
				CU_ASSERT(same_bits(y[i], want));
			}
		}
	}
}

/*
 * Each element's result, for every entry point that maps elements one to one, is the same at every
 * length and offset: a tail goes through the same vector code as the full vectors.
 */
static void test_position_independent(void)
{
	enum { N = LEN_MAX + 16 };
	const struct rt_k_act_spec gelu = { .kind = RT_K_ACT_GELU };
	float x[N], full_exp[N], full_erf[N], full_gelu[N], y[LEN_MAX];

	for (int i = 0; i < N; i++)
		x[i] = rand_in(-5.0f, 5.0f);
	rt_vm_exp(full_exp, x, N);
	rt_vm_erf(full_erf, x, N);
	memcpy(full_gelu, x, sizeof(full_gelu));
	rt_vm_act(full_gelu, N, &gelu);
	for (int off = 0; off < 16; off++) {
		for (int n = 1; n <= LEN_MAX; n++) {
			bool ok = true;

			rt_vm_exp(y, x + off, n);
			for (int i = 0; i < n; i++)
				ok &= same_bits(y[i], full_exp[off + i]);
			rt_vm_erf(y, x + off, n);
			for (int i = 0; i < n; i++)
				ok &= same_bits(y[i], full_erf[off + i]);
			memcpy(y, x + off, (size_t)n * sizeof(float));
			rt_vm_act(y, n, &gelu);
			for (int i = 0; i < n; i++)
				ok &= same_bits(y[i], full_gelu[off + i]);
			if (!ok)
				printf("\n    offset %d, length %d: a result differs from the long array's\n", off, n);
			CU_ASSERT(ok);
		}
	}
}

/*
 * Softmax rows against double: exp within 3 ulp, the row's sum and 1 / sum a few more roundings.
 * Rows from 1 to LEN_MAX and the transformer's 128, values over [-30, 30] (exp(x - max) down to
 * 1e-26), and rows at a large offset (only the differences count).
 */
static void test_softmax(void)
{
	enum { ROWS = 3, N_MAX = 130 };
	static float x[ROWS * N_MAX], y[ROWS * N_MAX];
	int lens[LEN_MAX + 2];
	double worst = 0;

	for (int n = 1; n <= LEN_MAX; n++)
		lens[n - 1] = n;
	lens[LEN_MAX] = 128;
	lens[LEN_MAX + 1] = 130;
	for (size_t l = 0; l < sizeof(lens) / sizeof(lens[0]); l++) {
		int n = lens[l];

		for (int i = 0; i < ROWS * n; i++)
			x[i] = rand_in(-30.0f, 30.0f) + (i / n == 2 ? 1000.0f : 0.0f);
		rt_vm_softmax_rows(y, x, ROWS, n);
		for (int r = 0; r < ROWS; r++) {
			const float *xr = x + r * n, *yr = y + r * n;
			float mx = -INFINITY;
			double sum = 0;

			/* x - max rounded to float, as ONNX's definition in float has it: that rounding
			 * (up to 2e-6 relative in exp at x - max near -60) is not the vector code's */
			for (int i = 0; i < n; i++)
				mx = xr[i] > mx ? xr[i] : mx;
			for (int i = 0; i < n; i++)
				sum += exp((double)(xr[i] - mx));
			for (int i = 0; i < n; i++) {
				double want = exp((double)(xr[i] - mx)) / sum;

				worst = fmax(worst, fabs(yr[i] - want) / want);
			}
		}
	}
	printf("\n    softmax: largest relative error %.3g\n", worst);
	CU_ASSERT(worst < 8e-7); /* exp's 4e-7 (test_opt), and the sum's and 1 / sum's roundings */
}

/*
 * LayerNormalization rows against double: scale and bias per element, a scalar scale and bias, no
 * bias; rows from 1 to LEN_MAX and the transformer's 384, with a large mean (the two passes keep the
 * variance of the differences).
 */
static void test_layernorm(void)
{
	enum { ROWS = 2, N_MAX = 384 };
	static float x[ROWS * N_MAX], y[ROWS * N_MAX], scale[N_MAX], bias[N_MAX];
	const float eps = 1e-5f;
	double worst = 0;

	for (int i = 0; i < N_MAX; i++) {
		scale[i] = rand_in(0.5f, 1.5f);
		bias[i] = rand_in(-1.0f, 1.0f);
	}
	for (int n = 1; n <= N_MAX; n += n < LEN_MAX ? 1 : N_MAX - LEN_MAX) {
		for (int form = 0; form < 3; form++) {
			int64_t n_scale = form == 1 ? 1 : n, n_bias = form == 1 ? 1 : n;
			const float *b = form == 2 ? NULL : bias;

			for (int i = 0; i < ROWS * n; i++)
				x[i] = rand_in(-3.0f, 3.0f) + (i / n == 1 ? 100.0f : 0.0f);
			rt_vm_layernorm_rows(y, x, ROWS, n, scale, n_scale, b, n_bias, eps);
			for (int r = 0; r < ROWS; r++) {
				const float *xr = x + r * n, *yr = y + r * n;
				double mean = 0, var = 0;

				for (int i = 0; i < n; i++)
					mean += xr[i];
				mean /= n;
				for (int i = 0; i < n; i++)
					var += (xr[i] - mean) * (xr[i] - mean);
				var /= n;
				for (int i = 0; i < n; i++) {
					double s = scale[n_scale == 1 ? 0 : i];
					double want = (xr[i] - mean) / sqrt(var + eps) * s +
						      (b != NULL ? b[n_bias == 1 ? 0 : i] : 0.0);
					double d = fabs(yr[i] - want) / (1.0 + fabs(want));

					worst = d > worst ? d : worst;
				}
			}
		}
	}
	printf("\n    layernorm: largest error %.3g of 1 + |y|\n", worst);
	/* the rows at mean 100: the float sum reaches 38400 (ulp 0.004), and the mean's roundings carry
	 * through x - mean into y divided by the deviation, about 1.7 */
	CU_ASSERT(worst < 4e-5);
}

/* The fills are exact: a copy, or one sum per element. */
static void test_fills(void)
{
	enum { ROWS = 3 };
	float y[ROWS * LEN_MAX], bias[LEN_MAX], z[ROWS * LEN_MAX];

	for (int i = 0; i < ROWS * LEN_MAX; i++)
		z[i] = rand_in(-1.0f, 1.0f);
	for (int i = 0; i < LEN_MAX; i++)
		bias[i] = rand_in(-1.0f, 1.0f);
	for (int n = 1; n <= LEN_MAX; n++) {
		bool ok = true;

		rt_vm_fill_rows(y, bias, NULL, ROWS, n);
		for (int i = 0; i < ROWS * n; i++)
			ok &= same_bits(y[i], bias[i % n]);
		rt_vm_fill_rows(y, bias, z, ROWS, n);
		for (int i = 0; i < ROWS * n; i++)
			ok &= same_bits(y[i], bias[i % n] + z[i]);
		rt_vm_fill(y, 0.25f, NULL, n);
		for (int i = 0; i < n; i++)
			ok &= same_bits(y[i], 0.25f);
		rt_vm_fill(y, 0.25f, z, n);
		for (int i = 0; i < n; i++)
			ok &= same_bits(y[i], z[i] + 0.25f);
		CU_ASSERT(ok);
	}
}

/*
 * exp's bits over 2^24 floats spread over every exponent (bit patterns 257 apart, infinities and NaNs
 * among them), hashed: with FMA (the avx2 level's 8 lanes, avx512's and amx's 16, each its own
 * instructions) they are one set of bits, this one. A change to exp at any level that moves bits
 * for some of these inputs fails here (one confined to a few ties among all 2^32 floats could pass:
 * the AVX-512 exp was compared with the 8-lane one over all 2^32 by hand, 20 s, none differed);
 * below FMA (baseline) the polynomial rounds otherwise and is not compared.
 */
#define EXP_BITS_FNV1A 0x3eb4331cb64d6d05ull

static void test_exp_bits(void)
{
	enum { CHUNK = 4096 };
	static float x[CHUNK], y[CHUNK];
	uint64_t h = 0xcbf29ce484222325ull;

	for (uint32_t i = 0; i < (1u << 24); i += CHUNK) {
		for (uint32_t k = 0; k < CHUNK; k++) {
			uint32_t u = (i + k) * 257u;

			memcpy(&x[k], &u, sizeof(u));
		}
		rt_vm_exp(y, x, CHUNK);
		for (uint32_t k = 0; k < CHUNK; k++) {
			uint32_t u;

			memcpy(&u, &y[k], sizeof(u));
			h = (h ^ u) * 0x100000001b3ull;
		}
	}
	if (rt_cpu_isa_active() == RT_CPU_ISA_BASELINE)
		return;
	if (h != EXP_BITS_FNV1A)
		printf("\n    exp's bits hash to %#llx at %s, not %#llx\n", (unsigned long long)h,
		       rt_cpu_isa_name(rt_cpu_isa_active()), EXP_BITS_FNV1A);
	CU_ASSERT_EQUAL(h, EXP_BITS_FNV1A);
}

int main(int argc, char **argv)
{
	int status;

	/* "gelu-bf16": the bf16 paths' GELU alone, where the CPU has AVX-512 (those paths need AMX) */
	if (argc > 1 && strcmp(argv[1], "gelu-bf16") == 0) {
		CU_TestInfo only[] = { {"bf16 paths' GELU against erf in double", test_gelu_bf16}, CU_TEST_INFO_NULL };
		CU_SuiteInfo suite[] = { {"vecmath: bf16 GELU", NULL, NULL, NULL, NULL, only}, CU_SUITE_INFO_NULL };

		if (!__builtin_cpu_supports("avx512f"))
			return bw_cunit_skip("this CPU has no AVX-512F: the bf16 paths' GELU does not run here");
		return bw_cunit_run(suite);
	}
	status = isa_level_check();
	CU_TestInfo tests[] = {
		{"GELU against erf in double", test_gelu},
		{"Relu, LeakyRelu, Clip: exact, every length", test_piecewise},
		{"exp, erf, GELU: the same result at every length and offset", test_position_independent},
		{"exp: the same bits at every level with FMA, 2^24 floats", test_exp_bits},
		{"softmax rows against double, every length", test_softmax},
		{"layernorm rows against double: each form of scale and bias", test_layernorm},
		{"fills: exact, every length", test_fills},
		CU_TEST_INFO_NULL,
	};
	CU_SuiteInfo suites[] = {
		{"vecmath", NULL, NULL, NULL, NULL, tests},
		CU_SUITE_INFO_NULL,
	};

	if (status >= 0)
		return status;
	return bw_cunit_run(suites);
}
