/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Vector math for the fused and fast-path kernels: activations, exp, erf, softmax and layer
 * normalization rows.
 *
 * Why written here rather than libm: expf and erff are scalar calls of 10-50 ns each, and a
 * transformer's GELU and softmax run them on millions of elements per batch (with libm's, 17 % and
 * 16 % of MiniLM's time at batch 1, docs/performance.md). These are polynomial versions on 8 or 16
 * floats at once, accurate to a few ulp: exp is Cephes' (range reduction by ln 2 in two parts, a
 * degree-6 polynomial), erf is x * P(x^2) below 0.921875 and 1 - exp(Q(|x|)) above it (P and Q
 * fitted to erf and log(erfc) in double; the largest error against erf over [-6, 6] is 2e-7
 * relative below the split, 8e-8 absolute above it), and erf(x) is +-1 from 3.925 on, where erfc is
 * below half a float ulp of 1. GELU is not erf's: x times the normal tail from a table of
 * polynomials looked up by a permute (vecmath.h's vgelu says why and how close).
 *
 * Why GCC vector types: one source (vecmath.h) serves every x86-64. Each entry point is compiled
 * three times: here at 8 lanes for x86-64-v3 (AVX2 and FMA: the 8 lanes are one register) and for
 * the baseline (two SSE registers), in vecmath_avx512.c at 16 lanes for AVX-512 (one register), and
 * reached through the table of the level the CPU kernels run at (isa.c: chosen once, BW_CPU_ISA
 * moves it with the GEMMs), so nothing here tests the CPU at run time. Tails shorter than a vector
 * go through the same vector code on a padded copy, so an element's result does not depend on where
 * it lies in the array.
 */
#define VL 8
#include "vecmath.h"

#include "graph.h"

#define VM_V3 __attribute__((target("arch=x86-64-v3")))

VM_VARIANTS(_v3, VM_V3)
VM_VARIANTS(_base, )

static const struct vm_ops g_vm_base = VM_OPS(_base);
static const struct vm_ops g_vm_v3 = VM_OPS(_v3);

/* By level: AVX2 takes the x86-64-v3 variants (one 8-float register a vector), AVX-512 and AMX
 * vecmath_avx512.c's (one 16-float register). */
static const struct vm_ops *const g_vm_by_isa[RT_CPU_ISA_COUNT] = {
	[RT_CPU_ISA_BASELINE] = &g_vm_base,
	[RT_CPU_ISA_AVX2] = &g_vm_v3,
	[RT_CPU_ISA_AVX512] = &rt_vm_ops_avx512,
	[RT_CPU_ISA_AMX] = &rt_vm_ops_avx512,
};

static inline const struct vm_ops *vm_ops(void)
{
	return g_vm_by_isa[rt_cpu_isa_active()];
}

void rt_vm_act(float *y, int64_t n, const struct rt_k_act_spec *act)
{
	vm_ops()->act(y, n, act);
}

void rt_vm_fill_rows(float *y, const float *bias, const float *z, int64_t rows, int64_t n)
{
	vm_ops()->fill_rows(y, bias, z, rows, n);
}

void rt_vm_fill(float *y, float v, const float *z, int64_t n)
{
	vm_ops()->fill(y, v, z, n);
}

void rt_vm_exp(float *y, const float *x, int64_t n)
{
	vm_ops()->exp(y, x, n);
}

void rt_vm_erf(float *y, const float *x, int64_t n)
{
	vm_ops()->erf(y, x, n);
}

void rt_vm_softmax_rows(float *y, const float *x, int64_t rows, int64_t n)
{
	vm_ops()->softmax_rows(y, x, rows, n);
}

void rt_vm_layernorm_rows(float *y, const float *x, int64_t rows, int64_t n, const float *scale, int64_t n_scale,
			  const float *bias, int64_t n_bias, float eps)
{
	vm_ops()->layernorm_rows(y, x, rows, n, scale, n_scale, bias, n_bias, eps);
}
