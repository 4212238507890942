/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The vector math at 16 lanes, for the kernels' AVX-512 and AMX levels (vecmath.c's table takes it
 * there). A translation unit of its own because vecmath.h's vector types have one width per unit.
 *
 * The target names the AVX-512 subsets every such CPU has (Skylake-X, Zen 4, Sapphire Rapids) rather
 * than one CPU's arch, and FMA, which the polynomials are contracted into as on x86-64-v3: a lane's
 * result is then the same as the AVX2 build's. The whole unit is built for it (the pragma), so that
 * vecmath.h's helpers may use its intrinsics (VM_AVX512_OPS).
 */
#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "bf16.h"
#include "fused.h" /* vecmath.h's includes, before the target applies to what follows */

#define VL 16
#define VM_AVX512_OPS /* vecmath.h may use AVX-512's own instructions where they give the same bits */
#ifdef __clang__ /* (the fuzzers build the runtime's sources with clang) */
#pragma clang attribute push(__attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,fma"))), apply_to = function)
#else
#pragma GCC target("avx512f,avx512bw,avx512dq,avx512vl,fma")
#endif

#include "vecmath.h"

#define VM_AVX512 __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,fma")))

VM_VARIANTS(_avx512, VM_AVX512)

const struct vm_ops rt_vm_ops_avx512 = VM_OPS(_avx512);

/* The AMX level's own: AVX-512 with its bf16 conversions (the whole list: clang's attribute replaces
 * the pushed one where GCC's adds to the pragma's). */
#define VM_AVX512_BF16 __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,fma,avx512bf16")))

/*
 * rt_bf16_softmax_rows (bf16.h): two passes a row, s = alpha * x + mask (one FMA) written back
 * over x with its max, then exp(s - max) summed in fp32 and stored rounded (VCVTNEPS2BF16, as the
 * tiles' A is rounded elsewhere); the row's tail in masked lanes (-inf for the max, nothing stored
 * or summed past n). x is the caller's scratch: its values are s on return.
 */
VM_AVX512_BF16 void rt_bf16_softmax_rows(float *x, int64_t ldx, int64_t rows, int64_t n, float alpha,
					 const float *mask, uint16_t *p, int64_t ldp, int64_t n_pad, float scale,
					 float *inv)
{
	const __m512 va = _mm512_set1_ps(alpha), ninf = _mm512_set1_ps(-INFINITY), zero = _mm512_setzero_ps();
	int64_t full = n / VL * VL;
	__mmask16 tail = (__mmask16)((1u << (n - full)) - 1);

	for (int64_t r = 0; r < rows; r++, x += ldx, p += ldp) {
		__m512 vm = ninf, vs = _mm512_setzero_ps(), s, e;
		float mx;
		int64_t i;

		for (i = 0; i < full; i += VL) {
			s = _mm512_fmadd_ps(_mm512_loadu_ps(x + i), va, mask != NULL ? _mm512_loadu_ps(mask + i) : zero);
			_mm512_storeu_ps(x + i, s);
			vm = _mm512_max_ps(vm, s);
		}
		if (tail != 0) {
			s = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(tail, x + i), va,
					    mask != NULL ? _mm512_maskz_loadu_ps(tail, mask + i) : zero);
			_mm512_mask_storeu_ps(x + i, tail, s);
			vm = _mm512_max_ps(vm, _mm512_mask_mov_ps(ninf, tail, s));
		}
		mx = vhmax((vf)vm);
		for (i = 0; i < full; i += VL) {
			e = (__m512)vexp((vf)_mm512_sub_ps(_mm512_loadu_ps(x + i), _mm512_set1_ps(mx)));
			vs = _mm512_add_ps(vs, e);
			_mm256_storeu_si256((void *)(p + i), (__m256i)_mm512_cvtneps_pbh(e));
		}
		if (tail != 0) {
			s = _mm512_maskz_loadu_ps(tail, x + i);
			e = _mm512_maskz_mov_ps(tail, (__m512)vexp((vf)_mm512_sub_ps(s, _mm512_set1_ps(mx))));
			vs = _mm512_add_ps(vs, e);
			_mm256_mask_storeu_epi16(p + i, tail, (__m256i)_mm512_cvtneps_pbh(e));
		}
		for (i = n; i < n_pad; i++)
			p[i] = 0;
		inv[r] = scale / vsum((vf)vs);
	}
}

#ifdef __clang__
#pragma clang attribute pop
#endif
