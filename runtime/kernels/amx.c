/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The bf16 GEMM on AMX tiles (bf16.h). One TDPBF16PS multiplies a 16 x 32 bf16 tile of A by a
 * 32 x 16 tile of W (16 rows of k pairs, VNNI order) into 16 x 16 fp32 accumulators: 8192
 * multiply-adds in one instruction, where an AVX-512 FMA does 16.
 *
 * Blocking: C in 32 x 32 blocks, 2 x 2 accumulator tiles (tmm0-3), two A tiles (tmm4, tmm5: rows
 * i..i+15 and i+16..i+31) and two W tiles (tmm6, tmm7: columns j..j+15, j+16..j+31) per 32 of k.
 * rt_bf16_gemm_rows loads A's tiles straight from bf16 rows (their stride, one offset per tap);
 * fp32 A is first rounded RT_BF16_ROWS_BLOCK rows at a time into scratch, k padded to 32 with
 * zeros, and read the same way. Rows past the last multiple of 32 are loaded on tiles configured
 * to the rows that exist. W's tiles are contiguous (1 KiB each), packed at load with n and k padded
 * to 32. The accumulators go through a 32 x 32 fp32 buffer on the stack, where AVX-512 applies
 * alpha, the bias, the residual and the activation and stores the rows and columns that exist
 * (rt_bf16_gemm_rows: which loop goes outside, and why, is said there).
 *
 * With the weights on the left (convolutions: rt_bf16_gemm_apacked) the roles turn: W's tiles are A
 * tiles, packed at load, and B is packed per call, 32 columns at a time over the whole of k: sgemm.c's
 * packers make its fp32 panels (from a matrix, or from an image through the conv's geometry, with
 * no column matrix), 256 rows of k at a time into a staging buffer, and each pair of k rows is
 * rounded and interleaved into the tiles' VNNI order. The C blocks down the column block then
 * reuse that B block from L1/L2 while W's tiles stream (B is staged GROUP_COLS columns at a time,
 * for the packer's sake: see group_cols). Where B is small and W large (ResNet-50's
 * last stages: 49 or 196 columns, W up to 4.5 MiB in bf16), that would stream W from L3 once per
 * 32 columns; there the whole of B is rounded first (at most B_WHOLE_BYTES, in L2) and W's row
 * blocks go outside, each read once.
 *
 * Linux gives a process AMX's tile state only once it asks (arch_prctl, isa.c does at selection);
 * the tile configuration is per thread, so each call loads it, and releases the tiles on return
 * (TILERELEASE: a thread off the GEMM does not carry 8 KiB of tile state through context switches).
 */
#include <immintrin.h>
#include <string.h>

#include "act512.h"
#include "bf16.h"
#include "graph.h"
#include "sgemm.h"

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

/* The bf16 words of two fp32 vectors, lo's and hi's, interleaved: lo0 hi0 lo1 hi1 ... (a VNNI row). */
AMX_TARGET static inline __m512i vnni_pairs(__m512 lo, __m512 hi)
{
	const __m512i interleave = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8,
						    23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);

	return _mm512_permutexvar_epi16(interleave, (__m512i)_mm512_cvtne2ps_pbh(hi, lo));
}

/*
 * ns 1: per pair of k rows and 16 columns, two loads, one rounding, one interleave, one store.
 * ks 1: per column and 32 of k, one load pair: the 32 rounded values are, as 16 32-bit words, the
 * column's pairs for the 16 rows of its tile, scattered at the tile's row pitch.
 */
AMX_TARGET void rt_bf16_pack_b_fast(const float *w, int64_t ks, int64_t ns, int64_t k, int64_t n, uint16_t *wp)
{
	int64_t kp = round_up(k, TILE_K), np = round_up(n, BLOCK), kblocks = kp / TILE_K;

	if (ns == 1) {
		for (int64_t p = 0; p < np / TILE_ROWS; p++) {
			int64_t left = n - p * TILE_ROWS;
			__mmask16 mask = lane_mask16(left);
			uint16_t *tiles = wp + p * kblocks * W_TILE_ELEMS;

			for (int64_t kk = 0; kk < kp; kk += 2) {
				const float *row = w + kk * ks + p * TILE_ROWS;
				__m512 lo = kk < k ? _mm512_maskz_loadu_ps(mask, row) : _mm512_setzero_ps();
				__m512 hi = kk + 1 < k ? _mm512_maskz_loadu_ps(mask, row + ks) : _mm512_setzero_ps();

				_mm512_storeu_si512((void *)(tiles + kk / TILE_K * W_TILE_ELEMS + kk % TILE_K / 2 * TILE_K),
						    vnni_pairs(lo, hi));
			}
		}
		return;
	}
	if (ks == 1) {
		const __m512i rows = _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
							_mm512_set1_epi32(TILE_K / 2));

		for (int64_t col = 0; col < np; col++) {
			const float *src = w + col * ns;

			for (int64_t kb = 0; kb < kblocks; kb++) {
				int64_t left = col < n ? k - kb * TILE_K : 0;
				__mmask16 m0 = lane_mask16(left);
				__mmask16 m1 = lane_mask16(left - 16);
				__m512i v = (__m512i)_mm512_cvtne2ps_pbh(_mm512_maskz_loadu_ps(m1, src + kb * TILE_K + 16),
									 _mm512_maskz_loadu_ps(m0, src + kb * TILE_K));
				uint16_t *t = wp + (col / TILE_ROWS * kblocks + kb) * W_TILE_ELEMS + col % TILE_ROWS * 2;

				_mm512_i32scatter_epi32((void *)t, rows, v, 4);
			}
		}
		return;
	}
	rt_bf16_pack_b(w, ks, ns, k, n, wp);
}

size_t rt_bf16_scratch_bytes(int64_t m, int64_t k)
{
	int64_t rows = m < RT_BF16_ROWS_BLOCK ? round_up(m > 0 ? m : 1, BLOCK) : RT_BF16_ROWS_BLOCK;

	return (size_t)(rows * round_up(k, TILE_K)) * sizeof(uint16_t);
}

/* Rows i0..i0+rows of A into bf16 (kp per row, zero past k). */
AMX_TARGET static void round_rows(const float *a, int64_t lda, int64_t i0, int64_t rows, int64_t k, int64_t kp,
				  uint16_t *dst)
{
	for (int64_t r = 0; r < rows; r++) {
		uint16_t *d = dst + r * kp;

		for (int64_t kk = 0; kk < kp; kk += 32) {
			const float *s = a + (i0 + r) * lda + kk;
			int64_t left = k - kk;
			__mmask16 lo = lane_mask16(left);
			__mmask16 hi = lane_mask16(left - 16);
			__m512bh v = _mm512_cvtne2ps_pbh(_mm512_maskz_loadu_ps(hi, s + 16), _mm512_maskz_loadu_ps(lo, s));

			_mm512_storeu_si512((void *)(d + kk), (__m512i)v);
		}
	}
}

/*
 * One 32 x 32 block of products into acc (32 rows of fp32, ldacc apart): A's two 16-row tiles from
 * a0 and a1, rows a_stride bytes apart, the next 32 of k a_step values on; B's two 16-column VNNI
 * tiles from b0 and b1, 1 KiB each, the next 32 of k a tile on.
 */
AMX_TARGET static inline void tiles_2x2(const uint16_t *a0, const uint16_t *a1, int64_t a_step, int64_t a_stride,
					const uint16_t *b0, const uint16_t *b1, int64_t kblocks, float *acc,
					int64_t ldacc)
{
	int64_t acc_stride = ldacc * (int64_t)sizeof(float);

	_tile_zero(0);
	_tile_zero(1);
	_tile_zero(2);
	_tile_zero(3);
	for (int64_t kb = 0; kb < kblocks; kb++) {
		_tile_loadd(4, a0 + kb * a_step, a_stride);
		_tile_loadd(5, a1 + kb * a_step, a_stride);
		_tile_loadd(6, b0 + kb * W_TILE_ELEMS, TILE_K * sizeof(uint16_t));
		_tile_loadd(7, b1 + kb * W_TILE_ELEMS, TILE_K * sizeof(uint16_t));
		_tile_dpbf16ps(0, 4, 6);
		_tile_dpbf16ps(1, 4, 7);
		_tile_dpbf16ps(2, 5, 6);
		_tile_dpbf16ps(3, 5, 7);
	}
	_tile_stored(0, acc, acc_stride);
	_tile_stored(1, acc + 16, acc_stride);
	_tile_stored(2, acc + 16 * ldacc, acc_stride);
	_tile_stored(3, acc + 16 * ldacc + 16, acc_stride);
	__asm__ volatile("" ::: "memory"); /* acc was written behind the compiler's back */
}

/*
 * Rows of A rounded to bf16 a block at a time into scratch (RT_BF16_ROWS_BLOCK rows, k padded to
 * 32 with zeros), each block then the GEMM over bf16 rows (rt_bf16_gemm_rows).
 */
AMX_TARGET void rt_bf16_gemm_a32(int64_t m, int64_t n, int64_t k, const float *a, int64_t lda, const uint16_t *wp,
				 const struct rt_bf16_epilogue *ep, void *c, void *scratch)
{
	static const int64_t no_offset[1] = { 0 };
	int64_t kp = round_up(k, TILE_K);
	uint16_t *abf = scratch;
	struct rt_bf16_rows rows = { .base = abf, .row_stride = kp, .depth = kp, .ntaps = 1, .tap_off = no_offset };
	size_t esize = ep->c_fp32 ? sizeof(float) : sizeof(uint16_t);

	for (int64_t i0 = 0; i0 < m; i0 += RT_BF16_ROWS_BLOCK) {
		int64_t count = m - i0 < RT_BF16_ROWS_BLOCK ? m - i0 : RT_BF16_ROWS_BLOCK;
		struct rt_bf16_grid dense = { .per_image = count, .width = count, .valid_h = 1, .valid_w = count };

		round_rows(a, lda, i0, count, k, kp, abf);
		/* the tile loads are asm that names no memory: the rounded rows must be stored before */
		__asm__ volatile("" ::: "memory");
		rt_bf16_gemm_rows(count, n, &rows, &dense, wp, ep, (char *)c + (size_t)(i0 * ep->ldc) * esize);
	}
}

AMX_TARGET void rt_bf16_gemm_bpacked(int64_t m, int64_t n, int64_t k, const float *a, int64_t lda,
				     const uint16_t *wp, float *c, int64_t ldc, float alpha, const float *col_bias,
				     const struct rt_k_act_spec *act, void *scratch)
{
	struct rt_bf16_epilogue ep = { .alpha = alpha, .bias = col_bias, .act = *act, .ldc = ldc, .c_fp32 = true };

	rt_bf16_gemm_a32(m, n, k, a, lda, wp, &ep, c, scratch);
}

/* ---- weights on the left ------------------------------------------------------------------------ */

#define STAGE_K RT_SG_KC /* rows of k sgemm.c's packers make at once */
#define B_WHOLE_BYTES (1u << 20) /* B rounded whole, W's row blocks outside, up to this */
#define GROUP_COLS 256           /* columns of B staged and rounded at once where it is not whole */

size_t rt_bf16_packed_a_elems(int64_t m, int64_t k)
{
	return (size_t)(round_up(m, BLOCK) * round_up(k, TILE_K));
}

/* Tile (mb, kb) of W: rows 16mb..16mb+15, k 32kb..32kb+31, row-major (64 bytes a row), at
 * ((mb * kblocks) + kb) * 512; rows past m and k past k are zero. */
void rt_bf16_pack_a(const float *w, int64_t ldw, int64_t m, int64_t k, uint16_t *wp)
{
	int64_t kp = round_up(k, TILE_K), mp = round_up(m, BLOCK), kblocks = kp / TILE_K;

	for (int64_t row = 0; row < mp; row++) {
		for (int64_t kk = 0; kk < kp; kk++) {
			uint16_t *t = wp + (row / TILE_ROWS * kblocks + kk / TILE_K) * W_TILE_ELEMS;

			t[row % TILE_ROWS * TILE_K + kk % TILE_K] = row < m && kk < k ? rt_bf16_from_float(w[row * ldw + kk]) : 0;
		}
	}
}

/* Whether B is rounded whole before the row blocks of W (the header comment says why). */
static bool b_whole(int64_t n, int64_t k)
{
	return (size_t)round_up(k, TILE_K) * (size_t)round_up(n, BLOCK) * sizeof(uint16_t) <= B_WHOLE_BYTES;
}

/*
 * Columns of B staged and rounded at once: all of them, or GROUP_COLS. sgemm.c's packer works out
 * each row's geometry once per call, so it is called for as many columns as the staging holds, not
 * per 32 (which made packing a third of ResNet-50's time in bf16).
 */
static int64_t group_cols(int64_t n, int64_t k)
{
	return b_whole(n, k) ? round_up(n, BLOCK) : GROUP_COLS;
}

static int64_t stage_rows(int64_t k)
{
	return k < STAGE_K ? (k > 0 ? k : 1) : STAGE_K;
}

/* bf16 values of B's tiles held at once. */
static size_t b_elems(int64_t n, int64_t k)
{
	return (size_t)round_up(k, TILE_K) * (size_t)group_cols(n, k);
}

size_t rt_bf16_apacked_scratch_bytes(int64_t n, int64_t k)
{
	return b_elems(n, k) * sizeof(uint16_t) + (size_t)(stage_rows(k) * group_cols(n, k)) * sizeof(float);
}

/*
 * Rows k0..k0+kc of the staged fp32 panels (panel p: kc x 16, k-major) into the B tiles of the
 * column block: pair (2r, 2r+1) of k becomes row r of its tile, the two values of each column side
 * by side. pad: also the zero rows from k0+kc up to the next multiple of 32.
 */
AMX_TARGET static void stage_to_tiles(const float *stage, int64_t kc, int64_t k0, int64_t kblocks, bool pad,
				      uint16_t *bb)
{
	int64_t end = pad ? round_up(kc, TILE_K) : kc;

	for (int p = 0; p < 2; p++) {
		const float *panel = stage + p * kc * TILE_ROWS;
		uint16_t *tiles = bb + p * kblocks * W_TILE_ELEMS;

		for (int64_t kk = 0; kk < end; kk += 2) {
			int64_t at = k0 + kk;
			__m512 lo = kk < kc ? _mm512_loadu_ps(panel + kk * TILE_ROWS) : _mm512_setzero_ps();
			__m512 hi = kk + 1 < kc ? _mm512_loadu_ps(panel + (kk + 1) * TILE_ROWS) : _mm512_setzero_ps();

			_mm512_storeu_si512((void *)(tiles + at / TILE_K * W_TILE_ELEMS + at % TILE_K / 2 * TILE_K),
					    vnni_pairs(lo, hi));
		}
	}
}

/* The 32 x 32 block's accumulators into rows i.. and columns j.. of C that exist, with the conv's
 * epilogue: the row's bias, the residual, the activation. */
AMX_TARGET static void block_store_rows(const float *acc, int64_t rows, int64_t cols, float *c, int64_t ldc,
					const float *row_bias, const float *z, const struct rt_k_act_spec *act)
{
	__mmask16 m0 = lane_mask16(cols);
	__mmask16 m1 = lane_mask16(cols - 16);

	for (int64_t r = 0; r < rows; r++) {
		float *cr = c + r * ldc;
		__m512 v0 = _mm512_load_ps(acc + r * BLOCK), v1 = _mm512_load_ps(acc + r * BLOCK + 16);

		if (row_bias != NULL) {
			v0 = _mm512_add_ps(v0, _mm512_set1_ps(row_bias[r]));
			v1 = _mm512_add_ps(v1, _mm512_set1_ps(row_bias[r]));
		}
		if (z != NULL) {
			v0 = _mm512_add_ps(v0, _mm512_maskz_loadu_ps(m0, z + r * ldc));
			v1 = _mm512_add_ps(v1, _mm512_maskz_loadu_ps(m1, z + r * ldc + 16));
		}
		_mm512_mask_storeu_ps(cr, m0, rt_act16(v0, act));
		_mm512_mask_storeu_ps(cr + 16, m1, rt_act16(v1, act));
		if (act->kind == RT_K_ACT_GELU)
			rt_gelu_bf16(cr, cols);
	}
}

/* A matrix B (a 1x1 conv's image) straight into the tiles, without sgemm.c's fp32 panels between. */
AMX_TARGET static void round_matrix_block(const struct rt_sg_b *b, int64_t k, int64_t j, int64_t nc, uint16_t *bb)
{
	int64_t kp = round_up(k, TILE_K), kblocks = kp / TILE_K;

	for (int p = 0; p < 2; p++) {
		int64_t left = nc - p * TILE_ROWS;
		__mmask16 mask = lane_mask16(left);
		const float *col = b->x + j + p * TILE_ROWS;
		uint16_t *tiles = bb + p * kblocks * W_TILE_ELEMS;

		for (int64_t kk = 0; kk < kp; kk += 2) {
			__m512 lo = kk < k ? _mm512_maskz_loadu_ps(mask, col + kk * b->ldb) : _mm512_setzero_ps();
			__m512 hi = kk + 1 < k ? _mm512_maskz_loadu_ps(mask, col + (kk + 1) * b->ldb) : _mm512_setzero_ps();

			_mm512_storeu_si512((void *)(tiles + kk / TILE_K * W_TILE_ELEMS + kk % TILE_K / 2 * TILE_K),
					    vnni_pairs(lo, hi));
		}
	}
}

/* Columns j0..j0+ncols (ncols <= group_cols) of B over the whole of k, into the tiles of their
 * column blocks of 32, block b at bb + b * kp * 32. */
AMX_TARGET static void round_columns(const struct rt_sg_b *b, int64_t k, int64_t j0, int64_t ncols, float *stage,
				     uint16_t *bb)
{
	int64_t kp = round_up(k, TILE_K), kblocks = kp / TILE_K, blocks = (ncols + BLOCK - 1) / BLOCK;

	if (b->conv == NULL) {
		for (int64_t jb = 0; jb < blocks; jb++)
			round_matrix_block(b, k, j0 + jb * BLOCK, ncols - jb * BLOCK < BLOCK ? ncols - jb * BLOCK : BLOCK,
					   bb + jb * kp * BLOCK);
		return;
	}
	for (int64_t k0 = 0; k0 < k; k0 += STAGE_K) {
		int64_t kc = k - k0 < STAGE_K ? k - k0 : STAGE_K, panels = (ncols + TILE_ROWS - 1) / TILE_ROWS;

		rt_sg_pack_b_block(b, k0, kc, j0, ncols, TILE_ROWS, stage);
		if (panels % 2 != 0) /* the last block's second panel is past ncols: zeros */
			memset(stage + panels * kc * TILE_ROWS, 0, (size_t)kc * TILE_ROWS * sizeof(float));
		for (int64_t jb = 0; jb < blocks; jb++)
			stage_to_tiles(stage + 2 * jb * kc * TILE_ROWS, kc, k0, kblocks, k0 + kc >= k, bb + jb * kp * BLOCK);
	}
}

/* One 32 x 32 block of C: rows i.., columns j.. (nc of them), from W's row block a0 and B's column block bb. */
AMX_TARGET static inline void c_block(const uint16_t *a0, const uint16_t *bb, int64_t kblocks, int64_t rows,
				      int64_t nc, float *c, int64_t ldc, const float *row_bias, const float *z,
				      const struct rt_k_act_spec *act, float *acc)
{
	/* W's tiles are contiguous like B's: the next k block a tile on, rows 64 bytes apart */
	tiles_2x2(a0, a0 + kblocks * W_TILE_ELEMS, W_TILE_ELEMS, TILE_K * sizeof(uint16_t), bb,
		  bb + kblocks * W_TILE_ELEMS, kblocks, acc, BLOCK);
	block_store_rows(acc, rows, nc, c, ldc, row_bias, z, act);
}

AMX_TARGET void rt_bf16_gemm_apacked(int64_t m, int64_t n, int64_t k, const uint16_t *wp, const struct rt_sg_b *b,
				     float *c, int64_t ldc, const struct rt_sg_epilogue *ep, void *scratch)
{
	struct tile_config cfg = { .palette = 1 };
	float acc[BLOCK * BLOCK] __attribute__((aligned(64)));
	int64_t kp = round_up(k, TILE_K), kblocks = kp / TILE_K, block_elems = kp * BLOCK;
	uint16_t *bb = scratch;
	float *stage = (float *)(void *)((char *)scratch + b_elems(n, k) * sizeof(uint16_t));
	bool whole = b_whole(n, k);

	if (m <= 0 || n <= 0)
		return;
	for (int t = 0; t < 8; t++) {
		cfg.rows[t] = TILE_ROWS;
		cfg.colsb[t] = TILE_K * sizeof(uint16_t);
	}
	__asm__ volatile("ldtilecfg %0" ::"m"(cfg));
	if (whole) {
		round_columns(b, k, 0, n, stage, bb);
		__asm__ volatile("" ::: "memory"); /* the tile loads name no memory */
		for (int64_t i = 0; i < m; i += BLOCK)
			for (int64_t j = 0; j < n; j += BLOCK)
				c_block(wp + i / TILE_ROWS * kblocks * W_TILE_ELEMS, bb + j / BLOCK * block_elems, kblocks,
					m - i < BLOCK ? m - i : BLOCK, n - j < BLOCK ? n - j : BLOCK, c + i * ldc + j, ldc,
					ep->row_bias != NULL ? ep->row_bias + i : NULL,
					ep->z != NULL ? ep->z + i * ldc + j : NULL, &ep->act, acc);
		_tile_release();
		return;
	}
	for (int64_t g0 = 0; g0 < n; g0 += GROUP_COLS) {
		round_columns(b, k, g0, n - g0 < GROUP_COLS ? n - g0 : GROUP_COLS, stage, bb);
		__asm__ volatile("" ::: "memory");
		for (int64_t j = g0; j < n && j < g0 + GROUP_COLS; j += BLOCK)
			for (int64_t i = 0; i < m; i += BLOCK)
				c_block(wp + i / TILE_ROWS * kblocks * W_TILE_ELEMS, bb + (j - g0) / BLOCK * block_elems,
					kblocks, m - i < BLOCK ? m - i : BLOCK, n - j < BLOCK ? n - j : BLOCK, c + i * ldc + j,
					ldc, ep->row_bias != NULL ? ep->row_bias + i : NULL,
					ep->z != NULL ? ep->z + i * ldc + j : NULL, &ep->act, acc);
	}
	_tile_release();
}

/* ---- activations on the left, read straight from bf16 rows (NHWC convolutions) ----------------- */

/*
 * Rows of A whose tiles are kept in L2 while every column block of W passes them: W is read once per
 * chunk of this many bytes of A (ResNet-50's deepest 1x1 convs at a batch of 32: 1568 rows of 4 KiB,
 * W 2 MiB, read 7 times from L3).
 */
#define ROWS_CHUNK_BYTES (1u << 20)
#define W_IN_L2_BYTES (1 << 20) /* W up to this: row blocks outside (rt_bf16_gemm_rows) */

/* 16 bf16 values (those of mask m; zeros for the rest) widened to fp32. */
AMX_TARGET static inline __m512 bf16x16_load(const uint16_t *p, __mmask16 m)
{
	return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, p)), 16));
}

AMX_TARGET static inline void bf16x16_store(uint16_t *p, __mmask16 m, __m512 v)
{
	_mm256_mask_storeu_epi16(p, m, (__m256i)_mm512_cvtneps_pbh(v));
}

/* Where grid row q lands in C, or -1 for a row that is no pixel. */
static inline int64_t grid_pixel(const struct rt_bf16_grid *g, int64_t q)
{
	int64_t image = q / g->per_image, r = q % g->per_image, y = r / g->width, x = r % g->width;

	return y < g->valid_h && x < g->valid_w ? (image * g->valid_h + y) * g->valid_w + x : -1;
}

/* One row of C from v0 | v1 (columns j..j+31 of mask mc, m0 | m1), rounded to bf16 or not. */
AMX_TARGET static inline void row_put(void *c, int64_t at, bool fp32, __mmask16 m0, __mmask16 m1, __mmask32 mc,
				      __m512 v0, __m512 v1)
{
	if (fp32) {
		_mm512_mask_storeu_ps((float *)c + at, m0, v0);
		_mm512_mask_storeu_ps((float *)c + at + 16, m1, v1);
	} else {
		_mm512_mask_storeu_epi16((uint16_t *)c + at, mc, (__m512i)_mm512_cvtne2ps_pbh(v1, v0));
	}
}

/*
 * The rows' loop of rows_store, its conditions constants where the caller makes them so: the block's
 * rows r_from..rows (grid rows i + r) into the pixels they are, columns j.. (mask m0 | m1, mc):
 * alpha, bias, Z (one 64-byte load a row), the activation, one store a row (64 bytes in bf16).
 */
AMX_TARGET static inline __attribute__((always_inline)) void
rows_store_loop(const float *acc, int64_t i, int64_t r_from, int64_t rows, int64_t j, __mmask16 m0, __mmask16 m1,
		__mmask32 mc, __m512 va, __m512 b0, __m512 b1, const struct rt_bf16_grid *grid, const uint16_t *z,
		int64_t ldc, const struct rt_k_act_spec *act, void *c, const bool dense, const bool with_z,
		const bool fp32, const bool gelu, const bool scale)
{
	for (int64_t r = r_from; r < rows; r++) {
		int64_t px = dense ? i + r : grid_pixel(grid, i + r), at = px * ldc + j;
		__m512 v0 = _mm512_load_ps(acc + r * BLOCK), v1 = _mm512_load_ps(acc + r * BLOCK + 16);

		if (!dense && px < 0)
			continue;
		v0 = scale ? _mm512_fmadd_ps(v0, va, b0) : _mm512_add_ps(v0, b0);
		v1 = scale ? _mm512_fmadd_ps(v1, va, b1) : _mm512_add_ps(v1, b1);
		if (with_z) {
			__m512i zz = _mm512_maskz_loadu_epi16(mc, z + at);

			v0 = _mm512_add_ps(v0, _mm512_castsi512_ps(_mm512_slli_epi32(
						       _mm512_cvtepu16_epi32(_mm512_castsi512_si256(zz)), 16)));
			v1 = _mm512_add_ps(v1, _mm512_castsi512_ps(_mm512_slli_epi32(
						       _mm512_cvtepu16_epi32(_mm512_extracti64x4_epi64(zz, 1)), 16)));
		}
		if (gelu) {
			v0 = rt_gelu16_bf16(v0);
			v1 = rt_gelu16_bf16(v1);
		} else {
			v0 = rt_act16(v0, act);
			v1 = rt_act16(v1, act);
		}
		row_put(c, at, fp32, m0, m1, mc, v0, v1);
	}
}

/*
 * Rows r_from..rows of the block's accumulators (the block's rows i.., grid rows i + r) into the
 * pixels they are, columns j.. (cols of them). Gelu, which rt_act16 does not do, is rt_gelu16_bf16
 * on the same registers. The convolutions' usual case (a dense grid, bf16 out, alpha 1, no Gelu;
 * with or without a residual) runs a loop compiled for it, with the epilogue's fields in locals:
 * read through ep, which C's stores might alias, they were reloaded and tested every row. Where k
 * is short the epilogue is most of the conv: ResNet-50's 64 -> 256 1x1 conv with its residual (two
 * steps of tiles a block) took 225 us at batch 1 on a Sapphire Rapids core, 73 without any
 * epilogue; this loop took it to 218-229 from 236-249 (and the 256 -> 64 conv to 108-113 from
 * 118-123). Most of what was left was the tile unit and this epilogue taking turns, which
 * rt_bf16_gemm_shallow's alternating accumulators remove for such k.
 */
AMX_TARGET static void rows_store(float *acc, int64_t i, int64_t r_from, int64_t rows, int64_t j, int64_t cols,
				  const struct rt_bf16_grid *grid, const struct rt_bf16_epilogue *ep, void *c)
{
	__mmask16 m0 = lane_mask16(cols);
	__mmask16 m1 = lane_mask16(cols - 16);
	__mmask32 mc = cols >= 32 ? 0xffffffffu : (__mmask32)((1u << cols) - 1);
	__m512 va = _mm512_set1_ps(ep->alpha);
	__m512 b0 = ep->bias != NULL ? _mm512_maskz_loadu_ps(m0, ep->bias + j) : _mm512_setzero_ps();
	__m512 b1 = ep->bias != NULL ? _mm512_maskz_loadu_ps(m1, ep->bias + j + 16) : _mm512_setzero_ps();
	bool dense = grid->width == grid->valid_w && grid->per_image == grid->valid_h * grid->valid_w;
	bool gelu = ep->act.kind == RT_K_ACT_GELU, fp32 = ep->c_fp32, scale = ep->alpha != 1.0f;
	const struct rt_k_act_spec act = ep->act;
	const uint16_t *z = ep->z;
	int64_t ldc = ep->ldc;

	if (dense && !fp32 && !gelu && !scale && z != NULL)
		rows_store_loop(acc, i, r_from, rows, j, m0, m1, mc, va, b0, b1, grid, z, ldc, &act, c, true, true,
				false, false, false);
	else if (dense && !fp32 && !gelu && !scale)
		rows_store_loop(acc, i, r_from, rows, j, m0, m1, mc, va, b0, b1, grid, z, ldc, &act, c, true, false,
				false, false, false);
	else
		rows_store_loop(acc, i, r_from, rows, j, m0, m1, mc, va, b0, b1, grid, z, ldc, &act, c, dense,
				z != NULL, fp32, gelu, scale);
}

/* A block whose epilogue waits for the next block's tile instructions (rt_bf16_gemm_rows): rows
 * below done are stored. */
struct rows_pending {
	int64_t i, rows, j, done;
	float *acc;
};

/* The pending block's rows up to row `to` (its rows at most). */
AMX_TARGET static inline void rows_finish_to(struct rows_pending *p, int64_t to, int64_t n,
					     const struct rt_bf16_grid *grid, const struct rt_bf16_epilogue *ep,
					     void *c)
{
	if (p->acc == NULL || p->done >= p->rows)
		return;
	to = to < p->rows ? to : p->rows;
	rows_store(p->acc, p->i, p->done, to, p->j, n - p->j < BLOCK ? n - p->j : BLOCK, grid, ep, c);
	p->done = to;
}

AMX_TARGET static void rows_finish(struct rows_pending *p, int64_t n, const struct rt_bf16_grid *grid,
				   const struct rt_bf16_epilogue *ep, void *c)
{
	rows_finish_to(p, BLOCK, n, grid, ep, c);
}

/*
 * One block of C: A rows i.. (the tiles' rows as configured: 16 and 16, or fewer at the edge; two
 * row tiles or one), W's column block at w0 / w1, over every tap and 32 of depth; and the pending
 * block's epilogue, a few rows after each step's tile instructions. Issued after all of them, the
 * epilogue's few hundred AVX-512 instructions filled the reorder buffer behind the block's tile
 * stores, which wait for its last products, and the next block's tiles could not start: the
 * transformer's FFN-up GEMM (k 384) 142-147 -> 121-130 us, the whole at bf16 and batch 8 35-39 ->
 * 32 ms.
 */
AMX_TARGET static inline void rows_block(const struct rt_bf16_rows *a, int64_t i, bool two, const uint16_t *w0,
					 const uint16_t *w1, float *acc, struct rows_pending *p, int64_t n,
					 const struct rt_bf16_grid *grid, const struct rt_bf16_epilogue *ep, void *c)
{
	int64_t stride = a->row_stride * (int64_t)sizeof(uint16_t), per_tap = a->depth / TILE_K;
	const uint16_t *row0 = a->base + i * a->row_stride, *row1 = row0 + TILE_ROWS * a->row_stride;
	/* the pending block's rows, a share after each step of k: all of them by the last */
	int64_t steps = a->ntaps * per_tap, step = steps > 0 ? (BLOCK + steps - 1) / steps : BLOCK, to = 0;

	_tile_zero(0);
	_tile_zero(1);
	if (two) {
		_tile_zero(2);
		_tile_zero(3);
	}
	for (int t = 0; t < a->ntaps; t++) {
		const uint16_t *a0 = row0 + a->tap_off[t], *a1 = row1 + a->tap_off[t];
		const uint16_t *b0 = w0 + t * per_tap * W_TILE_ELEMS, *b1 = w1 + t * per_tap * W_TILE_ELEMS;

		for (int64_t kb = 0; kb < per_tap; kb++) {
			_tile_loadd(4, a0 + kb * TILE_K, stride);
			_tile_loadd(6, b0 + kb * W_TILE_ELEMS, TILE_K * sizeof(uint16_t));
			_tile_loadd(7, b1 + kb * W_TILE_ELEMS, TILE_K * sizeof(uint16_t));
			_tile_dpbf16ps(0, 4, 6);
			_tile_dpbf16ps(1, 4, 7);
			if (two) {
				_tile_loadd(5, a1 + kb * TILE_K, stride);
				_tile_dpbf16ps(2, 5, 6);
				_tile_dpbf16ps(3, 5, 7);
			}
			to += step;
			rows_finish_to(p, to, n, grid, ep, c);
		}
	}
	rows_finish(p, n, grid, ep, c); /* (no step of k: depth 0) */
	_tile_stored(0, acc, BLOCK * sizeof(float));
	_tile_stored(1, acc + 16, BLOCK * sizeof(float));
	if (two) {
		_tile_stored(2, acc + 16 * BLOCK, BLOCK * sizeof(float));
		_tile_stored(3, acc + 16 * BLOCK + 16, BLOCK * sizeof(float));
	}
	__asm__ volatile("" ::: "memory"); /* acc was written behind the compiler's back */
}

/* Tiles of rows0 rows for tmm0/1/4 and rows1 for tmm2/3/5 (0: unused), 32 of k (64 bytes) a row. */
AMX_TARGET static void rows_config(int rows0, int rows1)
{
	struct tile_config cfg = { .palette = 1 };

	for (int t = 0; t < 8; t++) {
		bool second = t == 2 || t == 3 || t == 5;
		int rows = t >= 6 ? TILE_ROWS : second ? rows1 : rows0;

		cfg.rows[t] = (uint8_t)rows;
		cfg.colsb[t] = rows > 0 ? TILE_K * sizeof(uint16_t) : 0;
	}
	__asm__ volatile("ldtilecfg %0" ::"m"(cfg));
}

/*
 * One 16 x 32 block of a shallow GEMM (rt_bf16_gemm_shallow) on the accumulator pair (t0, t1): the
 * row group's k blocks already in tmm4 (and tmm5), W's column block at w0 / w1 through tmm6 / tmm7,
 * the pending block's rows a share after each k block, then the pair stored to acc. The tile
 * numbers are immediates, hence one function per pair.
 */
#define SHALLOW_BLOCK(name, t0, t1)                                                                          \
	AMX_TARGET static inline void name(int64_t kblocks, const uint16_t *w0, const uint16_t *w1, float *acc,   \
					   struct rows_pending *p, int64_t n, const struct rt_bf16_grid *grid,    \
					   const struct rt_bf16_epilogue *ep, void *c)                            \
	{                                                                                                  \
		_tile_zero(t0);                                                                            \
		_tile_zero(t1);                                                                            \
		_tile_loadd(6, w0, TILE_K * sizeof(uint16_t));                                             \
		_tile_dpbf16ps(t0, 4, 6);                                                                  \
		_tile_loadd(7, w1, TILE_K * sizeof(uint16_t));                                             \
		_tile_dpbf16ps(t1, 4, 7);                                                                  \
		if (kblocks > 1) {                                                                         \
			rows_finish_to(p, TILE_ROWS / 2, n, grid, ep, c);                                  \
			_tile_loadd(6, w0 + W_TILE_ELEMS, TILE_K * sizeof(uint16_t));                      \
			_tile_dpbf16ps(t0, 5, 6);                                                          \
			_tile_loadd(7, w1 + W_TILE_ELEMS, TILE_K * sizeof(uint16_t));                      \
			_tile_dpbf16ps(t1, 5, 7);                                                          \
		}                                                                                          \
		rows_finish(p, n, grid, ep, c);                                                            \
		_tile_stored(t0, acc, BLOCK * sizeof(float));                                              \
		_tile_stored(t1, acc + TILE_ROWS, BLOCK * sizeof(float));                                  \
		__asm__ volatile("" ::: "memory"); /* acc was written behind the compiler's back */        \
	}
SHALLOW_BLOCK(shallow_block_01, 0, 1)
SHALLOW_BLOCK(shallow_block_23, 2, 3)
#undef SHALLOW_BLOCK

/*
 * rt_bf16_gemm_rows where k is at most 64 (two tiles of depth: ResNet-50's first-stage 1x1 convs
 * from 64 channels) and W fits in L2. Rows go 16 at a time, their one or two A tiles loaded once
 * for every column block; each 16 x 32 block of C accumulates on one pair of tiles while the
 * other pair, the block before, is stored and its epilogue runs between this block's products.
 * With all four accumulators in one 32 x 32 block, the next block could not zero them before
 * their stores had read them, which wait for the block's last products: the tile unit and the
 * AVX-512 epilogue took turns. The 64 -> 256 conv with its residual, alone at batch 1 on a
 * Sapphire Rapids core: 166-177 us against 190-198; at batch 8 1.48-1.57 ms against 1.68-1.75.
 * The loads are the same: per 16 x 32 block two tiles of W a k block, as in the 32 x 32 one.
 */
AMX_TARGET static void rt_bf16_gemm_shallow(int64_t m, int64_t n, const struct rt_bf16_rows *a,
					    const struct rt_bf16_grid *grid, const uint16_t *wp,
					    const struct rt_bf16_epilogue *ep, void *c)
{
	float acc[2][TILE_ROWS * BLOCK] __attribute__((aligned(64)));
	int64_t stride = a->row_stride * (int64_t)sizeof(uint16_t), per_tap = a->depth / TILE_K;
	int64_t kblocks = a->ntaps * per_tap;
	struct rows_pending pending = { 0 };
	int cur = 0;

	rows_config(TILE_ROWS, TILE_ROWS);
	for (int64_t i = 0; i < m; i += TILE_ROWS) {
		const uint16_t *row = a->base + i * a->row_stride;
		int64_t rows = m - i < TILE_ROWS ? m - i : TILE_ROWS;

		if (rows < TILE_ROWS)
			rows_config((int)rows, (int)rows); /* the accumulators and A: only rows that exist */
		_tile_loadd(4, row + a->tap_off[0], stride);
		if (kblocks > 1) /* k block 1: the second tap (depth 32) or the first tap's second 32 (depth 64) */
			_tile_loadd(5, per_tap == 1 ? row + a->tap_off[1] : row + a->tap_off[0] + TILE_K, stride);
		for (int64_t j = 0; j < n; j += BLOCK) {
			const uint16_t *w0 = wp + (j / TILE_ROWS) * kblocks * W_TILE_ELEMS, *w1 = w0 + kblocks * W_TILE_ELEMS;

			if (cur == 0)
				shallow_block_01(kblocks, w0, w1, acc[0], &pending, n, grid, ep, c);
			else
				shallow_block_23(kblocks, w0, w1, acc[1], &pending, n, grid, ep, c);
			pending = (struct rows_pending){ .i = i, .rows = rows, .j = j, .acc = acc[cur] };
			cur ^= 1;
		}
	}
	rows_finish(&pending, n, grid, ep, c);
	_tile_release();
}

AMX_TARGET void rt_bf16_gemm_rows(int64_t m, int64_t n, const struct rt_bf16_rows *a, const struct rt_bf16_grid *grid,
				  const uint16_t *wp, const struct rt_bf16_epilogue *ep, void *c)
{
	float acc[2][BLOCK * BLOCK] __attribute__((aligned(64)));
	int64_t kblocks = a->ntaps * a->depth / TILE_K, full = m / BLOCK * BLOCK, edge = m - full;
	/* a row's own bytes: the taps of a padded image read its neighbours' */
	int64_t row_bytes = a->row_stride * (int64_t)sizeof(uint16_t);
	int64_t chunk = (int64_t)ROWS_CHUNK_BYTES / (row_bytes > 0 ? row_bytes : 1) / BLOCK * BLOCK;
	bool w_in_l2 = kblocks * TILE_K * ((n + BLOCK - 1) / BLOCK * BLOCK) * (int64_t)sizeof(uint16_t) <= W_IN_L2_BYTES;
	struct rows_pending pending = { 0 };
	int cur = 0;

	if (m <= 0 || n <= 0)
		return;
	if (w_in_l2 && kblocks >= 1 && kblocks <= 2) {
		rt_bf16_gemm_shallow(m, n, a, grid, wp, ep, c);
		return;
	}
	if (chunk < BLOCK)
		chunk = BLOCK;
	rows_config(TILE_ROWS, TILE_ROWS);
	/*
	 * Each block's epilogue runs between the next block's tile instructions (rows_block): the AVX-512
	 * stores of one overlap the tile unit's products of the other (acc double-buffered). Rows past
	 * the last multiple of 32 are done on tiles configured to their rows: nothing past row m is read.
	 *
	 * Where W fits in L2 the row blocks go outside: each 32 rows of C (and of Z) are finished whole
	 * before the next, one stream through memory. Column blocks outside would touch 64 bytes of
	 * every row per pass: at a batch of 32, ResNet-50's first-stage 1x1 convs (256 columns) ran at
	 * 4.4 GB/s of C and Z, each line fetched again on every pass.
	 */
	if (w_in_l2) {
		for (int64_t i = 0; i < m; i += BLOCK) {
			int64_t rows = m - i < BLOCK ? m - i : BLOCK;

			if (rows < BLOCK)
				rows_config(rows < TILE_ROWS ? (int)rows : TILE_ROWS, rows > TILE_ROWS ? (int)rows - TILE_ROWS : 0);
			for (int64_t j = 0; j < n; j += BLOCK) {
				const uint16_t *w0 = wp + (j / TILE_ROWS) * kblocks * W_TILE_ELEMS;

				rows_block(a, i, rows > TILE_ROWS, w0, w0 + kblocks * W_TILE_ELEMS, acc[cur], &pending, n,
					   grid, ep, c);
				pending = (struct rows_pending){ .i = i, .rows = rows, .j = j, .acc = acc[cur] };
				cur ^= 1;
			}
		}
		rows_finish(&pending, n, grid, ep, c);
		_tile_release();
		return;
	}
	/*
	 * Otherwise W streams: column blocks outside, each over a chunk of rows kept in L2, the rows past
	 * the last multiple of 32 with each column block of the last chunk, W's tiles still in cache
	 * (ResNet-50's last stage at a batch of 1: 49 rows, 4.5 MiB of W read once, not twice).
	 */
	for (int64_t i0 = 0; i0 < m; i0 += chunk) {
		int64_t end = full - i0 < chunk ? full : i0 + chunk;
		bool last = i0 + chunk >= m;

		for (int64_t j = 0; j < n; j += BLOCK) {
			const uint16_t *w0 = wp + (j / TILE_ROWS) * kblocks * W_TILE_ELEMS, *w1 = w0 + kblocks * W_TILE_ELEMS;

			for (int64_t i = i0; i < end; i += BLOCK) {
				rows_block(a, i, true, w0, w1, acc[cur], &pending, n, grid, ep, c);
				pending = (struct rows_pending){ .i = i, .rows = BLOCK, .j = j, .acc = acc[cur] };
				cur ^= 1;
			}
			if (last && edge > 0) {
				rows_config(edge < TILE_ROWS ? (int)edge : TILE_ROWS, edge > TILE_ROWS ? (int)edge - TILE_ROWS : 0);
				rows_block(a, full, edge > TILE_ROWS, w0, w1, acc[cur], &pending, n, grid, ep, c);
				pending = (struct rows_pending){ .i = full, .rows = edge, .j = j, .acc = acc[cur] };
				cur ^= 1;
				rows_config(TILE_ROWS, TILE_ROWS);
			}
		}
	}
	rows_finish(&pending, n, grid, ep, c);
	_tile_release();
}

/* ---- attention ----------------------------------------------------------------------------------- */

/* The parts of rt_bf16_attention's scratch, each 64-byte aligned: Q's block rounded (32 x dp bf16),
 * its scores (32 x np fp32), their exponentials (32 x np bf16), the rows' 1 / sum. */
struct attn_scratch {
	uint16_t *q, *p;
	float *s, *inv;
};

static size_t attn_parts(int64_t n, int64_t d, void *base, struct attn_scratch *parts)
{
	size_t np = (size_t)round_up(n, BLOCK), dp = (size_t)round_up(d, TILE_K);
	size_t q = BLOCK * dp * 2, s = BLOCK * np * 4, p = BLOCK * np * 2, inv = BLOCK * 4;

	if (parts != NULL) {
		parts->q = base;
		parts->s = (float *)((char *)base + q);
		parts->p = (uint16_t *)((char *)parts->s + s);
		parts->inv = (float *)((char *)parts->p + p);
	}
	return q + s + p + inv; /* each a multiple of 64 */
}

size_t rt_bf16_attention_scratch_bytes(int64_t n, int64_t d)
{
	return attn_parts(n, d, NULL, NULL);
}

/*
 * Per block of 32 query rows: the scores' tiles (2 x 2 per 32 keys, over d) stored straight into
 * the fp32 scores, the softmax's exponentials rounded into the context's A, then per 32 columns of
 * V the context's tiles over every key, each row scaled by its 1 / sum as it is stored. The last
 * block's rows past m are zeros in Q's and P's blocks, so the tiles read only what was written.
 */
AMX_TARGET void rt_bf16_attention(const struct rt_bf16_attention *at, void *scratch)
{
	float acc[BLOCK * BLOCK] __attribute__((aligned(64)));
	int64_t np = round_up(at->n, BLOCK), dp = round_up(at->d, TILE_K);
	int64_t kb_s = dp / TILE_K, kb_c = np / TILE_K;
	struct attn_scratch w;

	if (at->m <= 0 || at->n <= 0 || at->dv <= 0)
		return;
	attn_parts(at->n, at->d, scratch, &w);
	rows_config(TILE_ROWS, TILE_ROWS);
	for (int64_t i = 0; i < at->m; i += BLOCK) {
		int64_t rows = at->m - i < BLOCK ? at->m - i : BLOCK;

		round_rows(at->q, at->ldq, i, rows, at->d, dp, w.q);
		if (rows < BLOCK) {
			memset(w.q + rows * dp, 0, (size_t)((BLOCK - rows) * dp) * sizeof(uint16_t));
			memset(w.p + rows * np, 0, (size_t)((BLOCK - rows) * np) * sizeof(uint16_t));
		}
		__asm__ volatile("" ::: "memory"); /* the tile loads below name no memory */
		for (int64_t j = 0; j < np; j += BLOCK) {
			const uint16_t *b0 = at->k_tiles + (j / TILE_ROWS) * kb_s * W_TILE_ELEMS;

			tiles_2x2(w.q, w.q + TILE_ROWS * dp, TILE_K, dp * (int64_t)sizeof(uint16_t), b0,
				  b0 + kb_s * W_TILE_ELEMS, kb_s, w.s + j, np);
		}
		rt_bf16_softmax_rows(w.s, np, rows, at->n, at->alpha, at->mask, w.p, np, np, at->c_alpha, w.inv);
		__asm__ volatile("" ::: "memory");
		for (int64_t j = 0; j < at->dv; j += BLOCK) {
			const uint16_t *b0 = at->v_tiles + (j / TILE_ROWS) * kb_c * W_TILE_ELEMS;
			int64_t cols = at->dv - j < BLOCK ? at->dv - j : BLOCK;
			__mmask16 m0 = lane_mask16(cols);
			__mmask16 m1 = lane_mask16(cols - 16);

			tiles_2x2(w.p, w.p + TILE_ROWS * np, TILE_K, np * (int64_t)sizeof(uint16_t), b0,
				  b0 + kb_c * W_TILE_ELEMS, kb_c, acc, BLOCK);
			for (int64_t r = 0; r < rows; r++) {
				__m512 scale = _mm512_set1_ps(w.inv[r]);

				row_put(at->y, (i + r) * at->ldy + j, true, m0, m1, 0,
					_mm512_mul_ps(_mm512_load_ps(acc + r * BLOCK), scale),
					_mm512_mul_ps(_mm512_load_ps(acc + r * BLOCK + 16), scale));
			}
		}
	}
	_tile_release();
}

/* Element offsets of 16 consecutive NHWC pixels of c channels: i * c. */
AMX_TARGET static inline __m512i pixel_pitch(int64_t c)
{
	return _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
				  _mm512_set1_epi32((int)c));
}

/*
 * One image between NCHW fp32 (c planes of hw) and NHWC bf16 (hw pixels of c). Channels go in
 * pairs: the two bf16 of channels (ch, ch + 1) of a pixel are one 32-bit word of the NHWC row, so
 * 16 pixels of a pair are one rounding, one interleave and one 16-word scatter (or gather) at the
 * row pitch; an odd last channel goes one value at a time.
 */
AMX_TARGET void rt_bf16_nchw_to_nhwc(const float *x, int64_t c, int64_t hw, uint16_t *y)
{
	const __m512i pitch = pixel_pitch(c);
	int64_t pairs = c / 2 * 2;

	for (int64_t p = 0; p < hw; p += 16) {
		__mmask16 m = lane_mask16(hw - p);

		for (int64_t ch = 0; ch < pairs; ch += 2) {
			__m512i words = vnni_pairs(_mm512_maskz_loadu_ps(m, x + ch * hw + p), _mm512_maskz_loadu_ps(m, x + (ch + 1) * hw + p));

			/* word i lands at element (p + i) * c + ch: scale 2 bytes an element */
			_mm512_mask_i32scatter_epi32(y + p * c + ch, m, pitch, words, 2);
		}
		for (int64_t ch = pairs; ch < c; ch++)
			for (int64_t i = p; i < p + 16 && i < hw; i++)
				y[i * c + ch] = rt_bf16_from_float(x[ch * hw + i]);
	}
}

AMX_TARGET void rt_bf16_nhwc_to_nchw(const uint16_t *x, int64_t c, int64_t hw, float *y)
{
	const __m512i pitch = pixel_pitch(c);
	int64_t pairs = c / 2 * 2;

	for (int64_t p = 0; p < hw; p += 16) {
		__mmask16 m = lane_mask16(hw - p);

		for (int64_t ch = 0; ch < pairs; ch += 2) {
			__m512i words = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), m, pitch, x + p * c + ch, 2);

			_mm512_mask_storeu_ps(y + ch * hw + p, m, _mm512_castsi512_ps(_mm512_slli_epi32(words, 16)));
			_mm512_mask_storeu_ps(y + (ch + 1) * hw + p, m,
					      _mm512_castsi512_ps(_mm512_and_si512(words, _mm512_set1_epi32((int)0xffff0000u))));
		}
		for (int64_t ch = pairs; ch < c; ch++)
			for (int64_t i = p; i < p + 16 && i < hw; i++)
				y[ch * hw + i] = bw_bf16_to_float(x[i * c + ch]);
	}
}
