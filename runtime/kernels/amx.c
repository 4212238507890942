/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The bf16 GEMM on AMX tiles (bf16.h). One TDPBF16PS multiplies a 16 x 32 bf16 tile of A by a
 * 32 x 16 tile of W (16 rows of k pairs, VNNI order) into 16 x 16 fp32 accumulators: 8192
 * multiply-adds in one instruction, where an AVX-512 FMA does 16.
 *
 * Blocking: C in 32 x 32 blocks, 2 x 2 accumulator tiles (tmm0-3), two A tiles (tmm4, tmm5: rows
 * i..i+15 and i+16..i+31) and two W tiles (tmm6, tmm7: columns j..j+15, j+16..j+31) per 32 of k.
 * A block of up to RT_BF16_ROWS_BLOCK rows of A is rounded to bf16 into scratch, row-major with k
 * padded to 32 (zeros), its rows padded to 32 (zero rows): the A tiles load straight from it at
 * that stride. W's tiles are contiguous (1 KiB each), packed at load with n and k padded to 32, so
 * the two W tiles of a column block stay in L1 while the row tiles of A stream past them. The
 * accumulators go through a 32 x 32 fp32 buffer on the stack, where AVX-512 applies alpha, the
 * bias and the activation and stores the rows and columns that exist.
 *
 * Linux gives a process AMX's tile state only once it asks (arch_prctl, isa.c does at selection);
 * the tile configuration is per thread, so each call loads it, and releases the tiles on return
 * (TILERELEASE: a thread off the GEMM does not carry 8 KiB of tile state through context switches).
 */
#include <immintrin.h>
#include <string.h>

#include "bf16.h"
#include "graph.h"

#define AMX_TARGET __attribute__((target("amx-tile,amx-bf16,avx512f,avx512bw,avx512dq,avx512vl,avx512bf16,fma")))

#define TILE_ROWS 16
#define TILE_K 32    /* bf16 per tile row: 64 bytes */
#define BLOCK 32     /* C block: 2 x 2 tiles */
#define W_TILE_ELEMS (TILE_ROWS * TILE_K)

/* LDTILECFG's operand (palette 1): per tile, its rows and bytes per row. */
struct tile_config {
	uint8_t palette;
	uint8_t start_row;
	uint8_t reserved[14];
	uint16_t colsb[16];
	uint8_t rows[16];
} __attribute__((aligned(64)));

bool rt_bf16_available(void)
{
	return rt_cpu_isa_active() >= RT_CPU_ISA_AMX;
}

static int64_t round_up(int64_t x, int64_t to)
{
	return (x + to - 1) / to * to;
}

uint16_t rt_bf16_from_float(float f)
{
	uint32_t u;

	memcpy(&u, &f, sizeof(u));
	if ((u & 0x7fffffffu) > 0x7f800000u)
		return (uint16_t)((u >> 16) | 0x40u); /* NaN: quiet, sign kept */
	if ((u & 0x7f800000u) == 0)
		return (uint16_t)((u >> 16) & 0x8000u); /* denormals to zero, as VCVTNE2PS2BF16 does */
	u += 0x7fffu + ((u >> 16) & 1u);
	return (uint16_t)(u >> 16);
}

size_t rt_bf16_packed_b_elems(int64_t k, int64_t n)
{
	return (size_t)(round_up(k, TILE_K) * round_up(n, BLOCK));
}

/* Tile (p, kb) of W: columns 16p..16p+15, k 32kb..32kb+31, at ((p * kblocks) + kb) * 512; inside it,
 * row r holds k pairs (32kb + 2r, 32kb + 2r + 1) of each of the 16 columns, interleaved. */
void rt_bf16_pack_b(const float *w, int64_t ks, int64_t ns, int64_t k, int64_t n, uint16_t *wp)
{
	int64_t kp = round_up(k, TILE_K), np = round_up(n, BLOCK), kblocks = kp / TILE_K;

	for (int64_t col = 0; col < np; col++) {
		for (int64_t kk = 0; kk < kp; kk++) {
			int64_t p = col / TILE_ROWS, kb = kk / TILE_K, r = kk % TILE_K / 2;
			uint16_t *t = wp + (p * kblocks + kb) * W_TILE_ELEMS;

			t[r * TILE_K + col % TILE_ROWS * 2 + kk % 2] =
				col < n && kk < k ? rt_bf16_from_float(w[kk * ks + col * ns]) : 0;
		}
	}
}

size_t rt_bf16_scratch_bytes(int64_t m, int64_t k)
{
	int64_t rows = m < RT_BF16_ROWS_BLOCK ? round_up(m > 0 ? m : 1, BLOCK) : RT_BF16_ROWS_BLOCK;

	return (size_t)(rows * round_up(k, TILE_K)) * sizeof(uint16_t);
}

/* Rows i0..i0+rows of A into bf16 (kp per row, zero past k), and zero rows up to a multiple of 32. */
AMX_TARGET static void round_rows(const float *a, int64_t lda, int64_t i0, int64_t rows, int64_t k, int64_t kp,
				  uint16_t *dst)
{
	int64_t padded = round_up(rows, BLOCK);

	for (int64_t r = 0; r < padded; r++) {
		uint16_t *d = dst + r * kp;

		if (r >= rows) {
			memset(d, 0, (size_t)kp * sizeof(uint16_t));
			continue;
		}
		for (int64_t kk = 0; kk < kp; kk += 32) {
			const float *s = a + (i0 + r) * lda + kk;
			int64_t left = k - kk;
			__mmask16 lo = left >= 16 ? 0xffff : left > 0 ? (__mmask16)((1u << left) - 1) : 0;
			__mmask16 hi = left >= 32 ? 0xffff : left > 16 ? (__mmask16)((1u << (left - 16)) - 1) : 0;
			__m512bh v = _mm512_cvtne2ps_pbh(_mm512_maskz_loadu_ps(hi, s + 16), _mm512_maskz_loadu_ps(lo, s));

			_mm512_storeu_si512((void *)(d + kk), (__m512i)v);
		}
	}
}

/* The 32 x 32 block's accumulators, rows i.. and columns j.. of C that exist, finished. */
AMX_TARGET static void block_store(const float *acc, int64_t rows, int64_t cols, float *c, int64_t ldc, float alpha,
				   const float *col_bias, const struct rt_k_act_spec *act)
{
	__mmask16 m0 = cols >= 16 ? 0xffff : (__mmask16)((1u << cols) - 1);
	__mmask16 m1 = cols >= 32 ? 0xffff : cols > 16 ? (__mmask16)((1u << (cols - 16)) - 1) : 0;
	__m512 va = _mm512_set1_ps(alpha), b0 = _mm512_setzero_ps(), b1 = b0;

	if (col_bias != NULL) {
		b0 = _mm512_maskz_loadu_ps(m0, col_bias);
		b1 = _mm512_maskz_loadu_ps(m1, col_bias + 16);
	}
	for (int64_t r = 0; r < rows; r++) {
		float *cr = c + r * ldc;

		_mm512_mask_storeu_ps(cr, m0, _mm512_fmadd_ps(_mm512_load_ps(acc + r * BLOCK), va, b0));
		_mm512_mask_storeu_ps(cr + 16, m1, _mm512_fmadd_ps(_mm512_load_ps(acc + r * BLOCK + 16), va, b1));
		if (act->kind != RT_K_ACT_NONE)
			rt_vm_act(cr, cols, act); /* while the row is in L1 */
	}
}

AMX_TARGET void rt_bf16_gemm_bpacked(int64_t m, int64_t n, int64_t k, const float *a, int64_t lda,
				     const uint16_t *wp, float *c, int64_t ldc, float alpha, const float *col_bias,
				     const struct rt_k_act_spec *act, void *scratch)
{
	struct tile_config cfg = { .palette = 1 };
	float acc[BLOCK * BLOCK] __attribute__((aligned(64)));
	int64_t kp = round_up(k, TILE_K), kblocks = kp / TILE_K, stride = kp * (int64_t)sizeof(uint16_t);
	uint16_t *abf = scratch;

	if (m <= 0 || n <= 0)
		return;
	for (int t = 0; t < 8; t++) {
		cfg.rows[t] = TILE_ROWS;
		cfg.colsb[t] = TILE_K * sizeof(uint16_t);
	}
	/* the whole structure is LDTILECFG's operand: an "m" of all 64 bytes, so none is left unwritten */
	__asm__ volatile("ldtilecfg %0" ::"m"(cfg));
	for (int64_t i0 = 0; i0 < m; i0 += RT_BF16_ROWS_BLOCK) {
		int64_t rows = m - i0 < RT_BF16_ROWS_BLOCK ? m - i0 : RT_BF16_ROWS_BLOCK;

		round_rows(a, lda, i0, rows, k, kp, abf);
		/* the tile loads are asm that names no memory: the rounded rows must be stored before */
		__asm__ volatile("" ::: "memory");
		for (int64_t j = 0; j < n; j += BLOCK) {
			const uint16_t *w0 = wp + (j / TILE_ROWS) * kblocks * W_TILE_ELEMS, *w1 = w0 + kblocks * W_TILE_ELEMS;

			for (int64_t i = 0; i < rows; i += BLOCK) {
				const uint16_t *a0 = abf + i * kp, *a1 = a0 + TILE_ROWS * kp;

				_tile_zero(0);
				_tile_zero(1);
				_tile_zero(2);
				_tile_zero(3);
				for (int64_t kb = 0; kb < kblocks; kb++) {
					_tile_loadd(4, a0 + kb * TILE_K, stride);
					_tile_loadd(5, a1 + kb * TILE_K, stride);
					_tile_loadd(6, w0 + kb * W_TILE_ELEMS, TILE_K * sizeof(uint16_t));
					_tile_loadd(7, w1 + kb * W_TILE_ELEMS, TILE_K * sizeof(uint16_t));
					_tile_dpbf16ps(0, 4, 6);
					_tile_dpbf16ps(1, 4, 7);
					_tile_dpbf16ps(2, 5, 6);
					_tile_dpbf16ps(3, 5, 7);
				}
				_tile_stored(0, acc, BLOCK * sizeof(float));
				_tile_stored(1, acc + 16, BLOCK * sizeof(float));
				_tile_stored(2, acc + 16 * BLOCK, BLOCK * sizeof(float));
				_tile_stored(3, acc + 16 * BLOCK + 16, BLOCK * sizeof(float));
				__asm__ volatile("" ::: "memory"); /* acc was written behind the compiler's back */
				block_store(acc, rows - i < BLOCK ? rows - i : BLOCK, n - j < BLOCK ? n - j : BLOCK,
					    c + (i0 + i) * ldc + j, ldc, alpha, col_bias != NULL ? col_bias + j : NULL, act);
			}
		}
	}
	_tile_release();
}
