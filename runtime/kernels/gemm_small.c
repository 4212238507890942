/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The small direct GEMM (sgemm.h, rt_gemm_small): C = alpha * A . B + beta * C, A and B not
 * transposed, row-major, read where they lie: no packing, no scratch, no heap.
 *
 * Why: on CPUs where OpenBLAS 0.3.21 (Debian 12) picks its SkylakeX kernels (SkylakeX, Cooperlake,
 * SapphireRapids cores), cblas_sgemm and cblas_dgemm with neither operand transposed and
 * M * N * K <= 100^3 go to its "small matrix" kernels, and those malloc and free a buffer on every
 * call for most shapes (probed: 735 of 1836 random such shapes of sgemm, the same share of dgemm;
 * no transposed case and nothing above the bound). A kernel of a worker lcore may not allocate, so
 * rt_k_gemm sends exactly those calls here, on every CPU, which also makes them independent of the
 * core OpenBLAS picked. At these sizes packing does not pay (OpenBLAS's own reason for the small
 * kernels): the operands fit in L2.
 *
 * The AVX2 kernel keeps a 6 x 16 tile of C in 12 registers, loads 16 B values per k and broadcasts
 * one A value per row: 12 FMAs per 2 loads and 6 broadcasts; the AVX-512 one an 8 x 32 tile in 16
 * of its 32 registers. A column edge reads and writes through masks (masked-off lanes are never
 * touched, so a row's end may be the end of its buffer); a row edge takes a tile of 4 or 2 rows,
 * repeating the first row where it has fewer, whose results are not stored. The portable kernel
 * (any x86-64, and doubles everywhere) has the same shape in plain C for the compiler to vectorise.
 */
#include <immintrin.h>
#include <stdbool.h>

#include "act256.h"
#include "act512.h"
#include "graph.h"
#include "sgemm.h"

#define GS_TARGET __attribute__((target("avx2,fma")))
#define GS_MR 6
#define GS_NR 16 /* two AVX registers of floats */
#define GS_C_MR 4
#define GS_C_NR 8

static inline int64_t min64(int64_t a, int64_t b)
{
	return a < b ? a : b;
}

/* ---- AVX2 and FMA -------------------------------------------------------------------------------- */

/* One tile: rows a[0..mr) (repeats past the edge), columns j..j+w of B and C; full: w == GS_NR. mr
 * is a constant at each call (GS_MR, 4 or 2), so the loops unroll into registers and a row edge
 * computes at most one row more than it stores. */
GS_TARGET static inline __attribute__((always_inline)) void tile_avx2(const float *const *arow, const float *b,
								      int64_t ldb, int64_t k, float *c, int64_t ldc,
								      int mr, int64_t rows, int64_t w, float alpha,
								      float beta, bool full)
{
	__m256 acc[GS_MR][2];
	__m256i m0 = full ? _mm256_set1_epi32(-1) : lane_mask8(w), m1 = full ? m0 : lane_mask8(w - 8);
	__m256 va = _mm256_set1_ps(alpha), vb = _mm256_set1_ps(beta);

#pragma GCC unroll 6
	for (int r = 0; r < mr; r++)
		acc[r][0] = acc[r][1] = _mm256_setzero_ps();
	for (int64_t p = 0; p < k; p++, b += ldb) {
		__m256 b0 = full ? _mm256_loadu_ps(b) : _mm256_maskload_ps(b, m0);
		__m256 b1 = full ? _mm256_loadu_ps(b + 8) : _mm256_maskload_ps(b + 8, m1);

#pragma GCC unroll 6
		for (int r = 0; r < mr; r++) {
			__m256 a = _mm256_broadcast_ss(arow[r] + p);

			acc[r][0] = _mm256_fmadd_ps(a, b0, acc[r][0]);
			acc[r][1] = _mm256_fmadd_ps(a, b1, acc[r][1]);
		}
	}
	/* constant indices only (unrolled, rows tested inside): a variable one would keep acc in memory */
#pragma GCC unroll 6
	for (int r = 0; r < mr; r++, c += ldc) {
		__m256 v0 = _mm256_mul_ps(va, acc[r][0]), v1 = _mm256_mul_ps(va, acc[r][1]);

		if (r >= rows)
			break;

		if (beta != 0.0f) { /* beta 0 never reads C: it may hold anything, NaN included */
			v0 = _mm256_fmadd_ps(vb, full ? _mm256_loadu_ps(c) : _mm256_maskload_ps(c, m0), v0);
			v1 = _mm256_fmadd_ps(vb, full ? _mm256_loadu_ps(c + 8) : _mm256_maskload_ps(c + 8, m1), v1);
		}
		if (full) {
			_mm256_storeu_ps(c, v0);
			_mm256_storeu_ps(c + 8, v1);
		} else {
			_mm256_maskstore_ps(c, m0, v0);
			_mm256_maskstore_ps(c + 8, m1, v1);
		}
	}
}

GS_TARGET static void gemm_small_f32_avx2(int64_t m, int64_t n, int64_t k, float alpha, const float *a, int64_t lda,
					  const float *b, int64_t ldb, float beta, float *c, int64_t ldc)
{
	for (int64_t i = 0; i < m; i += GS_MR) {
		int64_t rows = min64(GS_MR, m - i);
		const float *arow[GS_MR];

		for (int r = 0; r < GS_MR; r++)
			arow[r] = a + (i + (r < rows ? r : 0)) * lda;
		for (int64_t j = 0; j < n; j += GS_NR) {
			int64_t w = min64(GS_NR, n - j);
			const float *bj = b + j;
			float *cij = c + i * ldc + j;

			if (rows > 4 && w == GS_NR)
				tile_avx2(arow, bj, ldb, k, cij, ldc, GS_MR, rows, w, alpha, beta, true);
			else if (rows > 4)
				tile_avx2(arow, bj, ldb, k, cij, ldc, GS_MR, rows, w, alpha, beta, false);
			else if (rows > 2)
				tile_avx2(arow, bj, ldb, k, cij, ldc, 4, rows, w, alpha, beta, w == GS_NR);
			else
				tile_avx2(arow, bj, ldb, k, cij, ldc, 2, rows, w, alpha, beta, w == GS_NR);
		}
	}
}

/* ---- AVX-512 ------------------------------------------------------------------------------------- */

#define GS_512_TARGET __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,fma")))
#define GS_512_MR 8
#define GS_512_NR 32 /* two AVX-512 registers of floats */

/* As tile_avx2, mr x 32 (mr 8, 4 or 2): at 8, 16 accumulators of the 32 registers, 16 FMAs per 2
 * loads and 8 broadcasts. */
GS_512_TARGET static inline __attribute__((always_inline)) void tile_avx512(const float *const *arow, const float *b,
									    int64_t ldb, int64_t k, float *c,
									    int64_t ldc, int mr, int64_t rows,
									    int64_t w, float alpha, float beta)
{
	__m512 acc[GS_512_MR][2];
	__mmask16 m0 = lane_mask16(w), m1 = lane_mask16(w - 16);
	__m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);

#pragma GCC unroll 8
	for (int r = 0; r < mr; r++)
		acc[r][0] = acc[r][1] = _mm512_setzero_ps();
	for (int64_t p = 0; p < k; p++, b += ldb) {
		__m512 b0 = _mm512_maskz_loadu_ps(m0, b), b1 = _mm512_maskz_loadu_ps(m1, b + 16);

#pragma GCC unroll 8
		for (int r = 0; r < mr; r++) {
			__m512 a = _mm512_set1_ps(arow[r][p]);

			acc[r][0] = _mm512_fmadd_ps(a, b0, acc[r][0]);
			acc[r][1] = _mm512_fmadd_ps(a, b1, acc[r][1]);
		}
	}
#pragma GCC unroll 8
	for (int r = 0; r < mr; r++, c += ldc) {
		__m512 v0 = _mm512_mul_ps(va, acc[r][0]), v1 = _mm512_mul_ps(va, acc[r][1]);

		if (r >= rows)
			break;
		if (beta != 0.0f) {
			v0 = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m0, c), v0);
			v1 = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m1, c + 16), v1);
		}
		_mm512_mask_storeu_ps(c, m0, v0);
		_mm512_mask_storeu_ps(c + 16, m1, v1);
	}
}

GS_512_TARGET static void gemm_small_f32_avx512(int64_t m, int64_t n, int64_t k, float alpha, const float *a,
						int64_t lda, const float *b, int64_t ldb, float beta, float *c,
						int64_t ldc)
{
	for (int64_t i = 0; i < m; i += GS_512_MR) {
		int64_t rows = min64(GS_512_MR, m - i);
		const float *arow[GS_512_MR];

		for (int r = 0; r < GS_512_MR; r++)
			arow[r] = a + (i + (r < rows ? r : 0)) * lda;
		for (int64_t j = 0; j < n; j += GS_512_NR) {
			int64_t w = min64(GS_512_NR, n - j);
			const float *bj = b + j;
			float *cij = c + i * ldc + j;

			if (rows > 4)
				tile_avx512(arow, bj, ldb, k, cij, ldc, GS_512_MR, rows, w, alpha, beta);
			else if (rows > 2)
				tile_avx512(arow, bj, ldb, k, cij, ldc, 4, rows, w, alpha, beta);
			else
				tile_avx512(arow, bj, ldb, k, cij, ldc, 2, rows, w, alpha, beta);
		}
	}
}

/* ---- portable ------------------------------------------------------------------------------------ */

/* A tile of rows x w (at most GS_C_MR x GS_C_NR); the full one has constant bounds to unroll. */
#define GEMM_SMALL_PORTABLE(NAME, T)                                                                          \
	static inline __attribute__((always_inline)) void NAME##_tile(const T *a, int64_t lda, const T *b,     \
								      int64_t ldb, int64_t k, T *c, int64_t ldc,  \
								      int64_t rows, int64_t w, T alpha, T beta)   \
	{                                                                                                      \
		T acc[GS_C_MR][GS_C_NR] = {{0}};                                                               \
                                                                                                               \
		for (int64_t p = 0; p < k; p++, b += ldb) {                                                     \
			for (int64_t r = 0; r < rows; r++) {                                                    \
				T x = a[r * lda + p];                                                           \
                                                                                                               \
				for (int64_t t = 0; t < w; t++)                                                 \
					acc[r][t] += x * b[t];                                                  \
			}                                                                                       \
		}                                                                                               \
		for (int64_t r = 0; r < rows; r++, c += ldc) {                                                  \
			for (int64_t t = 0; t < w; t++)                                                         \
				c[t] = beta == 0 ? alpha * acc[r][t] : alpha * acc[r][t] + beta * c[t];          \
		}                                                                                               \
	}                                                                                                      \
                                                                                                               \
	static void NAME(int64_t m, int64_t n, int64_t k, T alpha, const T *a, int64_t lda, const T *b,        \
			 int64_t ldb, T beta, T *c, int64_t ldc)                                               \
	{                                                                                                      \
		for (int64_t i = 0; i < m; i += GS_C_MR) {                                                      \
			int64_t rows = min64(GS_C_MR, m - i);                                                   \
                                                                                                               \
			for (int64_t j = 0; j < n; j += GS_C_NR) {                                              \
				int64_t w = min64(GS_C_NR, n - j);                                              \
				const T *ai = a + i * lda;                                                      \
				T *ci = c + i * ldc + j;                                                        \
                                                                                                               \
				if (rows == GS_C_MR && w == GS_C_NR)                                            \
					NAME##_tile(ai, lda, b + j, ldb, k, ci, ldc, GS_C_MR, GS_C_NR, alpha, beta); \
				else                                                                            \
					NAME##_tile(ai, lda, b + j, ldb, k, ci, ldc, rows, w, alpha, beta);     \
			}                                                                                       \
		}                                                                                               \
	}

GEMM_SMALL_PORTABLE(gemm_small_f32_portable, float)
GEMM_SMALL_PORTABLE(gemm_small_f64_portable, double)

/* ---- by level ------------------------------------------------------------------------------------ */

typedef void gemm_small_f32_fn(int64_t m, int64_t n, int64_t k, float alpha, const float *a, int64_t lda,
			       const float *b, int64_t ldb, float beta, float *c, int64_t ldc);

/* The best kernel at or below each level (AMX's tiles are for bf16: floats stay on AVX-512). */
static gemm_small_f32_fn *const g_gemm_small_f32[RT_CPU_ISA_COUNT] = {
	[RT_CPU_ISA_BASELINE] = gemm_small_f32_portable,
	[RT_CPU_ISA_AVX2] = gemm_small_f32_avx2,
	[RT_CPU_ISA_AVX512] = gemm_small_f32_avx512,
	[RT_CPU_ISA_AMX] = gemm_small_f32_avx512,
};

bool rt_gemm_small_fits(bool ta, bool tb, int64_t m, int64_t n, int64_t k)
{
	return !ta && !tb && (double)m * (double)n * (double)k <= RT_GEMM_SMALL_MNK_MAX;
}

void rt_gemm_small_f32(int64_t m, int64_t n, int64_t k, float alpha, const float *a, int64_t lda, const float *b,
		       int64_t ldb, float beta, float *c, int64_t ldc)
{
	g_gemm_small_f32[rt_cpu_isa_active()](m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void rt_gemm_small_f64(int64_t m, int64_t n, int64_t k, double alpha, const double *a, int64_t lda, const double *b,
		       int64_t ldb, double beta, double *c, int64_t ldc)
{
	gemm_small_f64_portable(m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
