/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * 2-D convolutions of little depth (k = input channels x taps <= RT_DC_K_MAX) on AVX-512 and on
 * AVX2, with output pixels as the GEMM's rows and output channels as its columns, the image read in
 * place.
 *
 * Why: sgemm.c's im2col GEMM puts output channels on the tile's rows and pixels on its 32 columns,
 * so its B panels are the im2col matrix, packed from the image for every image: on the small CNN's
 * second conv (16 -> 32 channels, 3x3 on 14x14) the packing was a sixth of the conv's time, and
 * 196 pixels fill 6.1 panels of 32, the last mostly padding. Here a tile is 8 pixels x 32 output
 * channels: a row of the tile broadcasts its pixel's input value for each k straight from the image
 * (a per-k offset from the pixel's window corner, the eight corners anywhere in the image, so a
 * tile crosses output rows freely and only the last of the image's tiles is short), and the
 * weights, packed at load k-major in blocks of 32 channels (k x 32: 18 KiB for that conv), are the
 * tile's two vector loads per k and stay in L1 with the image beside them. Per k: 2 loads, 8
 * broadcasts (folded into the FMAs), 16 FMAs, as sgemm.c's kernel, without its packing.
 *
 * The padding is a zero border made once per image in scratch (the image's channels, each with its
 * pads around it), so no lane needs a test. The tile leaves its registers pixel-major and is stored
 * to NCHW's channel-major rows through 8 x 8 transposes: four per tile, about 100 shuffles against
 * 16 k FMAs, the bias and activation applied before (per channel they are one vector across a row)
 * unless a residual must be added first.
 *
 * On AVX2 (16 ymm registers, no masks, no embedded broadcasts) the tiles are smaller and the weights
 * are packed the same way, so that the optimizer's layout does not depend on the level: a pixel tile
 * is 6 pixels x 16 channels (half a packed block; 12 accumulators, sgemm.c's 6x16 shape, 2 loads
 * and 6 broadcasts per 12 FMAs), stored through the same transposes with two rows empty; a row tile
 * 4 channels x 16 pixels, a pooled one 2 channels x two conv rows x 16 pixels; and a 2x2 pool is
 * folded into pixel tiles too, a tile per pooled pixel (its window's four conv pixels x 16
 * channels). A table of the two paths (struct dc_path) is chosen from rt_cpu_isa_active(), once
 * per call; each path's entry is the loops over images and tiles compiled for it, its tiles
 * inlined (no call per tile) but AVX-512's pixel tile, whose eight row pointers need the general
 * registers the loop around it would take (dc_tile_avx512).
 */
#include <immintrin.h>
#include <string.h>

#include "act256.h"
#include "act512.h"
#include "conv_direct.h"

/*
 * The tiles, which each path's loops call through the path's table: forced inline, so that the
 * call (direct once the table is a constant) is inlined into the loop. Not at -Og (BW_OPT_DEBUG,
 * meson.build), where GCC would refuse to build them.
 */
#ifdef BW_OPT_DEBUG
#define DC_TILE_INLINE static inline
#else
#define DC_TILE_INLINE static inline __attribute__((always_inline))
#endif

#define DC_TARGET __attribute__((target("avx512f,avx512dq,avx512vl,avx2,fma")))
#define DC2_TARGET __attribute__((target("avx2,fma")))
#define DC_ROWS 8  /* pixels per tile */
#define DC_COLS 32 /* output channels per tile and per block of the packed weights */
#define DC2_PIXELS 6          /* AVX2: pixels per pixel tile */
#define DC2_CHANNELS 16       /* AVX2: output channels per pixel tile, half a packed block */
#define DC2_ROW_PIXELS 16     /* AVX2: pixels per row tile, pooled or not */
#define DC2_ROW_CHANNELS 4    /* AVX2: output channels per row tile */
#define DC2_POOL_CHANNELS 2   /* AVX2: output channels per pooled row tile */

bool rt_dc_available(void)
{
	return rt_cpu_isa_active() >= RT_CPU_ISA_AVX2;
}

bool rt_dc_applies(enum rt_dc_tiles tiles, int nsp, int64_t group, int64_t k, const int64_t *strides)
{
	if (nsp != 2 || group != 1 || k <= 0 || k > RT_DC_K_MAX)
		return false;
	return tiles == RT_DC_PIXELS || (tiles == RT_DC_ROWS && strides[0] == 1 && strides[1] == 1);
}

/* Output channels per block of the packed weights. */
static int64_t dc_block_channels(enum rt_dc_tiles tiles)
{
	return tiles == RT_DC_PIXELS ? DC_COLS : DC_ROWS;
}

size_t rt_dc_packed_floats(enum rt_dc_tiles tiles, int64_t m, int64_t k)
{
	int64_t per = dc_block_channels(tiles);

	return (size_t)((m + per - 1) / per * k * per);
}

void rt_dc_pack_weights(enum rt_dc_tiles tiles, const float *w, int64_t m, int64_t k, float *out)
{
	int64_t per = dc_block_channels(tiles);

	for (int64_t blk = 0; blk * per < m; blk++) {
		for (int64_t i = 0; i < k; i++) {
			for (int64_t j = 0; j < per; j++) {
				int64_t ch = blk * per + j;

				*out++ = ch < m ? w[ch * k + i] : 0.0f;
			}
		}
	}
}

/* The padded image's plane: the input's rows and columns with the pads on either side. */
static int64_t padded_h(const struct rt_k_window *w)
{
	return w->in[0] + w->pad_begin[0] + w->pad_end[0];
}

static int64_t padded_w(const struct rt_k_window *w)
{
	return w->in[1] + w->pad_begin[1] + w->pad_end[1];
}

static bool has_pads(const struct rt_k_window *w)
{
	return w->pad_begin[0] != 0 || w->pad_end[0] != 0 || w->pad_begin[1] != 0 || w->pad_end[1] != 0;
}

static int64_t k_depth(const struct rt_k_window *w, int64_t c)
{
	return c * w->kernel[0] * w->kernel[1];
}

/* The offsets (RT_DC_K_MAX int32), 64-byte aligned, then the padded image when there are pads. */
size_t rt_dc_scratch_bytes(const struct rt_k_window *w, int64_t c)
{
	size_t offs = (size_t)RT_DC_K_MAX * sizeof(int32_t);

	return offs + (has_pads(w) ? (size_t)(c * padded_h(w) * padded_w(w)) * sizeof(float) : 0);
}

/*
 * x into a zeroed border, channel by channel and row by row. The border's zeros are written once,
 * for the first image (scratch keeps them: only the interior is rewritten for the next), and a row
 * is one masked load and store per 16 floats: the CNN's rows are 14 and 28 floats, where a memcpy
 * and two memsets a row cost more than the copy.
 */
DC_TARGET static void pad_image_avx512(const struct rt_k_window *w, int64_t c, const float *x, float *xp, bool border)
{
	int64_t hp = padded_h(w), wp = padded_w(w), h = w->in[0], wd = w->in[1];
	int64_t first = w->pad_begin[0] * wp + w->pad_begin[1];

	if (border)
		memset(xp, 0, (size_t)(c * hp * wp) * sizeof(float));
	for (int64_t ch = 0; ch < c; ch++) {
		float *p = xp + ch * hp * wp + first;

		for (int64_t r = 0; r < h; r++, x += wd, p += wp) {
			for (int64_t j = 0; j < wd; j += 16) {
				__mmask16 m = lane_mask16(wd - j);

				_mm512_mask_storeu_ps(p + j, m, _mm512_maskz_loadu_ps(m, x + j));
			}
		}
	}
}

/* pad_image_avx512 without masks: a row is a copy (rows of 14 or 28 floats: a memcpy each). */
static void pad_image_avx2(const struct rt_k_window *w, int64_t c, const float *x, float *xp, bool border)
{
	int64_t hp = padded_h(w), wp = padded_w(w), h = w->in[0], wd = w->in[1];
	int64_t first = w->pad_begin[0] * wp + w->pad_begin[1];

	if (border)
		memset(xp, 0, (size_t)(c * hp * wp) * sizeof(float));
	for (int64_t ch = 0; ch < c; ch++) {
		float *p = xp + ch * hp * wp + first;

		for (int64_t r = 0; r < h; r++, x += wd, p += wp)
			memcpy(p, x, (size_t)wd * sizeof(float));
	}
}

struct dc_tile {
	const float *rows[DC_ROWS]; /* each pixel's window corner in the (padded) image (6 on AVX2) */
	const int32_t *off;         /* k offsets from a corner */
	int64_t k;
	const float *w;             /* the block's packed weights, k x DC_COLS */
	const float *bias;          /* the block's first channel's, or NULL */
	const float *z;             /* y's shape, at the block's first channel and the tile's first pixel */
	float *y;                   /* likewise */
	int64_t plane;              /* floats between two channels of y and z */
	int64_t pixels, channels;   /* of the tile's 8 x 32 (AVX2: 6 x 16) that are the output's */
	const struct rt_k_act_spec *act;
};

/*
 * One tile; wide: 32 channels (two zmm a pixel) or 16 (one). The channels past t->channels hold
 * the packed zeros and are not stored; the pixels past t->pixels repeat pixel 0 and are not stored.
 */
DC_TARGET static inline __attribute__((always_inline)) void dc_tile_run(const struct dc_tile *t, bool wide)
{
	__m512 acc0[DC_ROWS], acc1[DC_ROWS];
	const float *rows[DC_ROWS];
	const float *w = t->w;
	bool late = t->z != NULL; /* the residual goes in before the bias-and-activation */
	__mmask8 store = (__mmask8)((1u << t->pixels) - 1);

#pragma GCC unroll 8
	for (int r = 0; r < DC_ROWS; r++) {
		acc0[r] = acc1[r] = _mm512_setzero_ps();
		rows[r] = t->rows[r];
	}
#pragma GCC unroll 2
	for (int64_t i = 0; i < t->k; i++, w += DC_COLS) {
		int32_t o = t->off[i];
		__m512 w0 = _mm512_loadu_ps(w), w1 = wide ? _mm512_loadu_ps(w + 16) : w0;

#pragma GCC unroll 8
		for (int r = 0; r < DC_ROWS; r++) {
			__m512 a = _mm512_set1_ps(rows[r][o]);

			acc0[r] = _mm512_fmadd_ps(a, w0, acc0[r]);
			if (wide)
				acc1[r] = _mm512_fmadd_ps(a, w1, acc1[r]);
		}
	}
	if (!late) {
		__mmask16 m0 = lane_mask16(t->channels);
		__mmask16 m1 = lane_mask16(t->channels - 16);
		__m512 b0 = t->bias != NULL ? _mm512_maskz_loadu_ps(m0, t->bias) : _mm512_setzero_ps();
		__m512 b1 = t->bias != NULL && wide ? _mm512_maskz_loadu_ps(m1, t->bias + 16) : _mm512_setzero_ps();

#pragma GCC unroll 8
		for (int r = 0; r < DC_ROWS; r++) {
			acc0[r] = rt_act16(_mm512_add_ps(acc0[r], b0), t->act);
			if (wide)
				acc1[r] = rt_act16(_mm512_add_ps(acc1[r], b1), t->act);
		}
	}
	/* four (two) groups of 8 channels: pixel-major in, one row of 8 pixels per channel out */
	for (int grp = 0; grp < (wide ? 4 : 2); grp++) {
		__m256 v[8];

#pragma GCC unroll 8
		for (int r = 0; r < DC_ROWS; r++) {
			__m512 a = grp < 2 ? acc0[r] : acc1[r];

			v[r] = grp % 2 == 0 ? _mm512_castps512_ps256(a) : _mm512_extractf32x8_ps(a, 1);
		}
		rt_transpose8(v);
#pragma GCC unroll 8
		for (int j = 0; j < 8; j++) {
			int64_t ch = grp * 8 + j;
			__m256 o = v[j];

			if (ch >= t->channels)
				break;
			if (late) {
				o = _mm256_add_ps(o, _mm256_maskz_loadu_ps(store, t->z + ch * t->plane));
				if (t->bias != NULL)
					o = _mm256_add_ps(o, _mm256_set1_ps(t->bias[ch]));
				o = _mm512_castps512_ps256(rt_act16(_mm512_castps256_ps512(o), t->act));
			}
			_mm256_mask_storeu_ps(t->y + ch * t->plane, store, o);
		}
	}
}

DC_TARGET static inline __attribute__((always_inline)) void dc_tile32(const struct dc_tile *t)
{
	dc_tile_run(t, true);
}

DC_TARGET static inline __attribute__((always_inline)) void dc_tile16(const struct dc_tile *t)
{
	dc_tile_run(t, false);
}

/*
 * RT_DC_ROWS: 8 output channels x up to 32 pixels of one output row, at stride 1 the pixels' inputs
 * for a k are one run of the padded image: two (masked) loads and eight broadcasts of the panel's
 * weights per k, sgemm.c's tile with the image for its packed B. For shallow convs (the small
 * CNN's first: one channel, 9 taps, 28 wide), where the pixel tiles' transposes cost more than the
 * FMAs: the output rows are the store's runs.
 */
struct dc_row_tile {
	const float *b;     /* the padded image at the tile's first pixel's window corner */
	const int32_t *off; /* k offsets from it */
	int64_t k;
	const float *w;     /* the panel's packed weights, k x DC_ROWS */
	const float *bias;  /* the panel's first channel's, or NULL */
	const float *z;     /* y's shape, at the panel's first channel and the tile's first pixel */
	float *y;           /* likewise */
	int64_t plane, pixels, channels;
	const struct rt_k_act_spec *act;
	int64_t row_stride;  /* pooled tiles: floats between two conv rows' inputs */
	int64_t first;       /* the panel's first channel this tile computes (0 for AVX-512's unpooled) */
};

DC_TARGET static inline __attribute__((always_inline)) void dc_row_tile_run(const struct dc_row_tile *t, bool wide)
{
	__m512 acc0[DC_ROWS], acc1[DC_ROWS];
	__mmask16 m0 = lane_mask16(t->pixels);
	__mmask16 m1 = lane_mask16(t->pixels - 16);
	const float *w = t->w;

#pragma GCC unroll 8
	for (int r = 0; r < DC_ROWS; r++)
		acc0[r] = acc1[r] = _mm512_setzero_ps();
	for (int64_t i = 0; i < t->k; i++, w += DC_ROWS) {
		const float *b = t->b + t->off[i];
		__m512 b0 = _mm512_maskz_loadu_ps(m0, b), b1 = wide ? _mm512_maskz_loadu_ps(m1, b + 16) : b0;

#pragma GCC unroll 8
		for (int r = 0; r < DC_ROWS; r++) {
			__m512 a = _mm512_set1_ps(w[r]);

			acc0[r] = _mm512_fmadd_ps(a, b0, acc0[r]);
			if (wide)
				acc1[r] = _mm512_fmadd_ps(a, b1, acc1[r]);
		}
	}
#pragma GCC unroll 8
	for (int r = 0; r < DC_ROWS; r++) {
		__m512 v0 = acc0[r], v1 = acc1[r];
		float *y = t->y + r * t->plane;

		if (r >= t->channels)
			break;
		if (t->bias != NULL) {
			v0 = _mm512_add_ps(v0, _mm512_set1_ps(t->bias[r]));
			v1 = _mm512_add_ps(v1, _mm512_set1_ps(t->bias[r]));
		}
		if (t->z != NULL) {
			v0 = _mm512_add_ps(v0, _mm512_maskz_loadu_ps(m0, t->z + r * t->plane));
			if (wide)
				v1 = _mm512_add_ps(v1, _mm512_maskz_loadu_ps(m1, t->z + r * t->plane + 16));
		}
		_mm512_mask_storeu_ps(y, m0, rt_act16(v0, t->act));
		if (wide)
			_mm512_mask_storeu_ps(y + 16, m1, rt_act16(v1, t->act));
	}
}

/*
 * Row tiles with a 2x2, stride-2 MaxPool after them (attribute "pool"): 4 output channels x two
 * conv rows x up to 32 pixels, the activation on each conv value, then the max of the two rows and
 * of each column pair, in the order MaxPool takes them, stored as one pooled row of up to 16: the
 * conv's own output (4x the pooled bytes) is never written and read back. A conv row or column
 * past the last whole window is not computed, as MaxPool would not read it.
 */
#define DC_POOL_CH 4

DC_TARGET DC_TILE_INLINE void dc_row_tile_pool(const struct dc_row_tile *t)
{
	const __m512i even_idx = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
	const __m512i odd_idx = _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
	__m512 acc[DC_POOL_CH][2][2];
	__mmask16 m0 = lane_mask16(t->pixels);
	__mmask16 m1 = lane_mask16(t->pixels - 16);
	__mmask16 out = (__mmask16)((1u << (t->pixels / 2)) - 1);
	const float *w = t->w;
	int64_t below = t->row_stride; /* the second conv row's inputs: one padded row further */

#pragma GCC unroll 4
	for (int c = 0; c < DC_POOL_CH; c++)
		acc[c][0][0] = acc[c][0][1] = acc[c][1][0] = acc[c][1][1] = _mm512_setzero_ps();
	for (int64_t i = 0; i < t->k; i++, w += DC_ROWS) {
		const float *b = t->b + t->off[i];
		__m512 b00 = _mm512_maskz_loadu_ps(m0, b), b01 = _mm512_maskz_loadu_ps(m1, b + 16);
		__m512 b10 = _mm512_maskz_loadu_ps(m0, b + below), b11 = _mm512_maskz_loadu_ps(m1, b + below + 16);

#pragma GCC unroll 4
		for (int c = 0; c < DC_POOL_CH; c++) {
			__m512 a = _mm512_set1_ps(w[t->first + c]);

			acc[c][0][0] = _mm512_fmadd_ps(a, b00, acc[c][0][0]);
			acc[c][0][1] = _mm512_fmadd_ps(a, b01, acc[c][0][1]);
			acc[c][1][0] = _mm512_fmadd_ps(a, b10, acc[c][1][0]);
			acc[c][1][1] = _mm512_fmadd_ps(a, b11, acc[c][1][1]);
		}
	}
#pragma GCC unroll 4
	for (int c = 0; c < DC_POOL_CH; c++) {
		__m512 bias = _mm512_set1_ps(t->bias != NULL && t->first + c < t->channels ? t->bias[t->first + c] : 0.0f);
		__m512 r00 = rt_act16(_mm512_add_ps(acc[c][0][0], bias), t->act);
		__m512 r01 = rt_act16(_mm512_add_ps(acc[c][0][1], bias), t->act);
		__m512 r10 = rt_act16(_mm512_add_ps(acc[c][1][0], bias), t->act);
		__m512 r11 = rt_act16(_mm512_add_ps(acc[c][1][1], bias), t->act);
		/* MaxPool's order: the later row against the first, then the odd column against the even */
		__m512 v0 = _mm512_max_ps(r10, r00), v1 = _mm512_max_ps(r11, r01);
		__m512 m = _mm512_max_ps(_mm512_permutex2var_ps(v0, odd_idx, v1), _mm512_permutex2var_ps(v0, even_idx, v1));

		if (t->first + c >= t->channels)
			break;
		_mm512_mask_storeu_ps(t->y + (t->first + c) * t->plane, out, m);
	}
}

DC_TARGET static inline __attribute__((always_inline)) void dc_row_tile32(const struct dc_row_tile *t)
{
	dc_row_tile_run(t, true);
}

DC_TARGET static inline __attribute__((always_inline)) void dc_row_tile16(const struct dc_row_tile *t)
{
	dc_row_tile_run(t, false);
}

/*
 * Not inlined into its loop, unlike the other tiles: the k loop holds eight row pointers, the
 * offsets, the weights and the count in general registers, and inlined beside the loop's own
 * (pixel, row, channel block) GCC keeps seven of the row pointers in xmm registers and moves one
 * back before each broadcast, a vmovq that takes port 0 from the FMAs: the small CNN's conv2 at
 * batch 8 ran 125 us against 87 so on a Sapphire Rapids Xeon. The call, once per 8 x 32 tile of
 * up to 144 k steps, costs less.
 */
DC_TARGET static __attribute__((noinline)) void dc_tile_avx512(const struct dc_tile *t)
{
	if (t->channels > 16)
		dc_tile32(t);
	else
		dc_tile16(t);
}

DC_TARGET DC_TILE_INLINE void dc_row_tile_avx512(const struct dc_row_tile *t)
{
	if (t->pixels > 16)
		dc_row_tile32(t);
	else
		dc_row_tile16(t);
}

/* ---- AVX2 ---------------------------------------------------------------------------------------- */

/*
 * The first n (0..8) floats of v to p, in whole 16-, 8- and 4-byte stores: vmaskmovps's store form
 * is microcoded on AMD's cores (a dozen cycles or more), and a 6-pixel tile stores 16 rows.
 */
DC2_TARGET static inline void store_first(float *p, __m256 v, int64_t n)
{
	__m128 part = _mm256_castps256_ps128(v);

	if (n >= 8) {
		_mm256_storeu_ps(p, v);
		return;
	}
	if (n >= 4) {
		_mm_storeu_ps(p, part);
		part = _mm256_extractf128_ps(v, 1);
		p += 4;
		n -= 4;
	}
	if (n >= 2) {
		_mm_storel_pi((__m64 *)(void *)p, part);
		part = _mm_movehl_ps(part, part);
		p += 2;
		n -= 2;
	}
	if (n >= 1)
		_mm_store_ss(p, part);
}

/*
 * A pixel tile: 6 pixels x 16 channels (wide) or 8, t->w at the half block's first channel (rows of
 * DC_COLS floats). The pixels past t->pixels repeat pixel 0 and are not stored.
 */
DC2_TARGET static inline __attribute__((always_inline)) void dc2_tile_run(const struct dc_tile *t, bool wide)
{
	__m256 acc0[DC2_PIXELS], acc1[DC2_PIXELS];
	const float *rows[DC2_PIXELS];
	const float *w = t->w;
	bool late = t->z != NULL; /* the residual goes in before the bias-and-activation */
	__m256i live = lane_mask8(t->pixels); /* the residual's pixels */

#pragma GCC unroll 6
	for (int r = 0; r < DC2_PIXELS; r++) {
		acc0[r] = acc1[r] = _mm256_setzero_ps();
		rows[r] = t->rows[r];
	}
#pragma GCC unroll 2
	for (int64_t i = 0; i < t->k; i++, w += DC_COLS) {
		int32_t o = t->off[i];
		__m256 w0 = _mm256_loadu_ps(w), w1 = wide ? _mm256_loadu_ps(w + 8) : w0;

#pragma GCC unroll 6
		for (int r = 0; r < DC2_PIXELS; r++) {
			__m256 a = _mm256_broadcast_ss(rows[r] + o);

			acc0[r] = _mm256_fmadd_ps(a, w0, acc0[r]);
			if (wide)
				acc1[r] = _mm256_fmadd_ps(a, w1, acc1[r]);
		}
	}
	if (!late) {
		__m256 b0 = t->bias != NULL ? _mm256_maskload_ps(t->bias, lane_mask8(t->channels)) : _mm256_setzero_ps();
		__m256 b1 = t->bias != NULL && wide ? _mm256_maskload_ps(t->bias + 8, lane_mask8(t->channels - 8)) :
						      _mm256_setzero_ps();

#pragma GCC unroll 6
		for (int r = 0; r < DC2_PIXELS; r++) {
			acc0[r] = rt_act8(_mm256_add_ps(acc0[r], b0), t->act);
			if (wide)
				acc1[r] = rt_act8(_mm256_add_ps(acc1[r], b1), t->act);
		}
	}
	/* two (one) groups of 8 channels: pixel-major in, one row of 6 pixels per channel out */
	for (int grp = 0; grp < (wide ? 2 : 1); grp++) {
		__m256 v[8];

#pragma GCC unroll 6
		for (int r = 0; r < DC2_PIXELS; r++)
			v[r] = grp == 0 ? acc0[r] : acc1[r];
		v[6] = v[7] = _mm256_setzero_ps();
		rt_transpose8(v);
#pragma GCC unroll 8
		for (int j = 0; j < 8; j++) {
			int64_t ch = grp * 8 + j;
			__m256 o = v[j];

			if (ch >= t->channels)
				break;
			if (late) {
				o = _mm256_add_ps(o, _mm256_maskload_ps(t->z + ch * t->plane, live));
				if (t->bias != NULL)
					o = _mm256_add_ps(o, _mm256_set1_ps(t->bias[ch]));
				o = rt_act8(o, t->act);
			}
			store_first(t->y + ch * t->plane, o, t->pixels);
		}
	}
}

DC2_TARGET DC_TILE_INLINE void dc_tile_avx2(const struct dc_tile *t)
{
	if (t->channels > 8)
		dc2_tile_run(t, true);
	else
		dc2_tile_run(t, false);
}

/*
 * A pooled pixel tile: one pixel of a 2x2, stride-2 MaxPool's output x 16 channels (wide) or 8. Its
 * window's four conv pixels (t->rows[0..3]: top left, top right, bottom left, bottom right) are the
 * tile's rows: 8 accumulators, 2 loads and 4 broadcasts per 8 FMAs. Each is activated, then pooled
 * in MaxPool's order (the later row against the first, then the odd column against the even: the
 * unfused kernels' bits), and one float a channel is stored: no transposes, and the conv's output,
 * four times the pool's, is never written.
 */
DC2_TARGET static inline __attribute__((always_inline)) void dc2_pool_tile_run(const struct dc_tile *t, bool wide)
{
	__m256 acc0[4], acc1[4];
	const float *w = t->w;
	float out[DC2_CHANNELS];

#pragma GCC unroll 4
	for (int r = 0; r < 4; r++)
		acc0[r] = acc1[r] = _mm256_setzero_ps();
#pragma GCC unroll 2
	for (int64_t i = 0; i < t->k; i++, w += DC_COLS) {
		int32_t o = t->off[i];
		__m256 w0 = _mm256_loadu_ps(w), w1 = wide ? _mm256_loadu_ps(w + 8) : w0;

#pragma GCC unroll 4
		for (int r = 0; r < 4; r++) {
			__m256 a = _mm256_broadcast_ss(t->rows[r] + o);

			acc0[r] = _mm256_fmadd_ps(a, w0, acc0[r]);
			if (wide)
				acc1[r] = _mm256_fmadd_ps(a, w1, acc1[r]);
		}
	}
	{
		__m256 b0 = t->bias != NULL ? _mm256_maskload_ps(t->bias, lane_mask8(t->channels)) : _mm256_setzero_ps();
		__m256 b1 = t->bias != NULL && wide ? _mm256_maskload_ps(t->bias + 8, lane_mask8(t->channels - 8)) :
						      _mm256_setzero_ps();

#pragma GCC unroll 4
		for (int r = 0; r < 4; r++) {
			acc0[r] = rt_act8(_mm256_add_ps(acc0[r], b0), t->act);
			acc1[r] = rt_act8(_mm256_add_ps(acc1[r], b1), t->act);
		}
		_mm256_storeu_ps(out, _mm256_max_ps(_mm256_max_ps(acc0[3], acc0[1]), _mm256_max_ps(acc0[2], acc0[0])));
		_mm256_storeu_ps(out + 8, _mm256_max_ps(_mm256_max_ps(acc1[3], acc1[1]), _mm256_max_ps(acc1[2], acc1[0])));
	}
	for (int64_t ch = 0; ch < t->channels; ch++)
		t->y[ch * t->plane] = out[ch];
}

DC2_TARGET DC_TILE_INLINE void dc_pool_tile_avx2(const struct dc_tile *t)
{
	if (t->channels > 8)
		dc2_pool_tile_run(t, true);
	else
		dc2_pool_tile_run(t, false);
}

/* b's 8 floats, or the first live of them (the rest 0) when masked. */
DC2_TARGET static inline __m256 dc2_load(const float *b, bool masked, __m256i live)
{
	return masked ? _mm256_maskload_ps(b, live) : _mm256_loadu_ps(b);
}

/*
 * A row tile: 4 channels (from t->first) x 16 pixels (wide) or 8; masked: the pixels past t->pixels
 * are neither loaded nor stored (a whole tile reads no further than its last pixel's window).
 */
DC2_TARGET static inline __attribute__((always_inline)) void dc2_row_tile_run(const struct dc_row_tile *t, bool wide,
									  bool masked)
{
	__m256 acc0[DC2_ROW_CHANNELS], acc1[DC2_ROW_CHANNELS];
	__m256i m0 = lane_mask8(t->pixels), m1 = lane_mask8(t->pixels - 8);
	const float *w = t->w + t->first;

#pragma GCC unroll 4
	for (int r = 0; r < DC2_ROW_CHANNELS; r++)
		acc0[r] = acc1[r] = _mm256_setzero_ps();
	for (int64_t i = 0; i < t->k; i++, w += DC_ROWS) {
		const float *b = t->b + t->off[i];
		__m256 b0 = dc2_load(b, masked, m0), b1 = wide ? dc2_load(b + 8, masked, m1) : b0;

#pragma GCC unroll 4
		for (int r = 0; r < DC2_ROW_CHANNELS; r++) {
			__m256 a = _mm256_broadcast_ss(w + r);

			acc0[r] = _mm256_fmadd_ps(a, b0, acc0[r]);
			if (wide)
				acc1[r] = _mm256_fmadd_ps(a, b1, acc1[r]);
		}
	}
#pragma GCC unroll 4
	for (int r = 0; r < DC2_ROW_CHANNELS; r++) {
		int64_t ch = t->first + r;
		__m256 v0 = acc0[r], v1 = acc1[r];
		float *y = t->y + ch * t->plane;

		if (ch >= t->channels)
			break;
		if (t->bias != NULL) {
			v0 = _mm256_add_ps(v0, _mm256_set1_ps(t->bias[ch]));
			v1 = _mm256_add_ps(v1, _mm256_set1_ps(t->bias[ch]));
		}
		if (t->z != NULL) {
			v0 = _mm256_add_ps(v0, dc2_load(t->z + ch * t->plane, masked, m0));
			if (wide)
				v1 = _mm256_add_ps(v1, dc2_load(t->z + ch * t->plane + 8, masked, m1));
		}
		v0 = rt_act8(v0, t->act);
		v1 = rt_act8(v1, t->act);
		if (masked) {
			store_first(y, v0, t->pixels);
			if (wide)
				store_first(y + 8, v1, t->pixels - 8);
		} else {
			_mm256_storeu_ps(y, v0);
			if (wide)
				_mm256_storeu_ps(y + 8, v1);
		}
	}
}

DC2_TARGET DC_TILE_INLINE void dc_row_tile_avx2(const struct dc_row_tile *t)
{
	if (t->pixels == DC2_ROW_PIXELS)
		dc2_row_tile_run(t, true, false);
	else if (t->pixels > 8)
		dc2_row_tile_run(t, true, true);
	else if (t->pixels == 8)
		dc2_row_tile_run(t, false, false);
	else
		dc2_row_tile_run(t, false, true);
}

/*
 * dc_row_tile_pool on AVX2: 2 channels (from t->first) x two conv rows x up to 16 pixels, pooled
 * into a row of up to 8. The column pairs' maxima: the even and the odd lanes of the two vectors,
 * gathered by one shuffle within each 128-bit half and one permute of 64-bit pairs across them.
 */
DC2_TARGET static inline __attribute__((always_inline)) void dc2_row_tile_pool_run(const struct dc_row_tile *t,
										   bool masked)
{
	__m256 acc[DC2_POOL_CHANNELS][2][2];
	__m256i m0 = lane_mask8(t->pixels), m1 = lane_mask8(t->pixels - 8);
	const float *w = t->w + t->first;
	int64_t below = t->row_stride; /* the second conv row's inputs: one padded row further */

#pragma GCC unroll 2
	for (int c = 0; c < DC2_POOL_CHANNELS; c++)
		acc[c][0][0] = acc[c][0][1] = acc[c][1][0] = acc[c][1][1] = _mm256_setzero_ps();
	for (int64_t i = 0; i < t->k; i++, w += DC_ROWS) {
		const float *b = t->b + t->off[i];
		__m256 b00 = dc2_load(b, masked, m0), b01 = dc2_load(b + 8, masked, m1);
		__m256 b10 = dc2_load(b + below, masked, m0), b11 = dc2_load(b + below + 8, masked, m1);

#pragma GCC unroll 2
		for (int c = 0; c < DC2_POOL_CHANNELS; c++) {
			__m256 a = _mm256_broadcast_ss(w + c);

			acc[c][0][0] = _mm256_fmadd_ps(a, b00, acc[c][0][0]);
			acc[c][0][1] = _mm256_fmadd_ps(a, b01, acc[c][0][1]);
			acc[c][1][0] = _mm256_fmadd_ps(a, b10, acc[c][1][0]);
			acc[c][1][1] = _mm256_fmadd_ps(a, b11, acc[c][1][1]);
		}
	}
#pragma GCC unroll 2
	for (int c = 0; c < DC2_POOL_CHANNELS; c++) {
		int64_t ch = t->first + c;
		__m256 bias = _mm256_set1_ps(t->bias != NULL && ch < t->channels ? t->bias[ch] : 0.0f);
		__m256 r00 = rt_act8(_mm256_add_ps(acc[c][0][0], bias), t->act);
		__m256 r01 = rt_act8(_mm256_add_ps(acc[c][0][1], bias), t->act);
		__m256 r10 = rt_act8(_mm256_add_ps(acc[c][1][0], bias), t->act);
		__m256 r11 = rt_act8(_mm256_add_ps(acc[c][1][1], bias), t->act);
		/* MaxPool's order: the later row against the first, then the odd column against the even */
		__m256 v0 = _mm256_max_ps(r10, r00), v1 = _mm256_max_ps(r11, r01);
		__m256 even = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(v0, v1, 0x88)), 0xd8));
		__m256 odd = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(v0, v1, 0xdd)), 0xd8));
		__m256 m = _mm256_max_ps(odd, even);

		if (ch >= t->channels)
			break;
		if (masked)
			store_first(t->y + ch * t->plane, m, t->pixels / 2);
		else
			_mm256_storeu_ps(t->y + ch * t->plane, m);
	}
}

DC2_TARGET DC_TILE_INLINE void dc_row_tile_pool_avx2(const struct dc_row_tile *t)
{
	if (t->pixels == DC2_ROW_PIXELS)
		dc2_row_tile_pool_run(t, false);
	else
		dc2_row_tile_pool_run(t, true);
}

/* ---- the paths ----------------------------------------------------------------------------------- */

/* One call's arguments, which every image's loops share (rt_dc_conv's). */
struct dc_conv_args {
	const struct rt_k_window *w;
	enum rt_dc_tiles tiles;
	bool pool, pads;
	int64_t n, m, c, k, wp, in_size, plane;
	const float *x, *packed, *bias, *z;
	float *y, *xp;
	const int32_t *off;
	const struct rt_k_act_spec *act;
};

/*
 * What an instruction set's tiles are: the loops below cut the output by these sizes, and conv is
 * those loops compiled for it with its tiles inlined (dc_conv_images).
 */
struct dc_path {
	void (*conv)(const struct dc_conv_args *a);
	void (*pad)(const struct rt_k_window *w, int64_t c, const float *x, float *xp, bool border);
	void (*pixel_tile)(const struct dc_tile *t);
	int tile_pixels, tile_channels;           /* a pixel tile's (channels: DC_COLS or a half block) */
	void (*row_tile)(const struct dc_row_tile *t);
	int row_pixels, row_channels;             /* a row tile's (channels: of a DC_ROWS block) */
	void (*pool_tile)(const struct dc_row_tile *t);
	int pool_pixels, pool_channels;           /* conv pixels along a row, channels of a pooled tile */
	void (*pool_pixel_tile)(const struct dc_tile *t); /* NULL: pixel tiles take no pool at this level */
	int pool_pixel_channels;                  /* channels of a pooled pixel tile (a half block) */
};

DC_TARGET static void dc_conv_avx512(const struct dc_conv_args *a);
DC2_TARGET static void dc_conv_avx2(const struct dc_conv_args *a);

static const struct dc_path g_dc_avx512 = {
	dc_conv_avx512, pad_image_avx512, dc_tile_avx512, DC_ROWS, DC_COLS, dc_row_tile_avx512, 32, DC_ROWS,
	dc_row_tile_pool, 32, DC_POOL_CH, NULL, 0,
};
static const struct dc_path g_dc_avx2 = {
	dc_conv_avx2, pad_image_avx2, dc_tile_avx2, DC2_PIXELS, DC2_CHANNELS, dc_row_tile_avx2, DC2_ROW_PIXELS, DC2_ROW_CHANNELS,
	dc_row_tile_pool_avx2, DC2_ROW_PIXELS, DC2_POOL_CHANNELS, dc_pool_tile_avx2, DC2_CHANNELS,
};

static const struct dc_path *dc_path(void)
{
	return rt_cpu_isa_active() >= RT_CPU_ISA_AVX512 ? &g_dc_avx512 : &g_dc_avx2;
}

bool rt_dc_pool_applies(enum rt_dc_tiles tiles)
{
	return rt_dc_available() && (tiles == RT_DC_ROWS || (tiles == RT_DC_PIXELS && dc_path()->pool_pixel_tile != NULL));
}

/* A pixel tile's fields for the per channels from channel c0 of m (its packed weights' half block). */
static struct dc_tile pixel_tile_at(int64_t c0, int64_t per, int64_t m, const int32_t *off, int64_t k,
				    const float *packed, int64_t plane, const float *bias, const struct rt_k_act_spec *act)
{
	int64_t blk = c0 / DC_COLS;

	return (struct dc_tile){
		.off = off, .k = k, .w = packed + blk * k * DC_COLS + (c0 - blk * DC_COLS), .plane = plane,
		.act = act, .bias = bias != NULL ? bias + c0 : NULL, .channels = m - c0 < per ? m - c0 : per,
	};
}

static inline __attribute__((always_inline)) void dc_conv_pixels(const struct dc_path *dp, const struct rt_k_window *w, int64_t m, const float *img,
			   int64_t wp, const int32_t *off, int64_t k, const float *packed, float *y, const float *bias,
			   const float *z, const struct rt_k_act_spec *act)
{
	int64_t ow_n = w->out[1], plane = w->out[0] * ow_n;

	for (int64_t c0 = 0; c0 < m; c0 += dp->tile_channels) {
		struct dc_tile t = pixel_tile_at(c0, dp->tile_channels, m, off, k, packed, plane, bias, act);
		int64_t oh = 0, ow = 0; /* the next tile's first pixel */

		for (int64_t p0 = 0; p0 < plane; p0 += dp->tile_pixels) {
			t.pixels = plane - p0 < dp->tile_pixels ? plane - p0 : dp->tile_pixels;
			for (int r = 0; r < dp->tile_pixels; r++) {
				if (r < t.pixels) {
					t.rows[r] = img + oh * w->stride[0] * wp + ow * w->stride[1];
					if (++ow == ow_n) {
						ow = 0;
						oh++;
					}
				} else {
					t.rows[r] = t.rows[0];
				}
			}
			t.y = y + c0 * plane + p0;
			t.z = z != NULL ? z + c0 * plane + p0 : NULL;
			dp->pixel_tile(&t);
		}
	}
}

/* Pixel tiles and a 2x2 stride-2 MaxPool: a tile per pooled pixel; y is [m][oh/2][ow/2]. */
static inline __attribute__((always_inline)) void dc_conv_pixels_pool(const struct dc_path *dp, const struct rt_k_window *w, int64_t m, const float *img,
				int64_t wp, const int32_t *off, int64_t k, const float *packed, float *y,
				const float *bias, const struct rt_k_act_spec *act)
{
	int64_t ph_n = w->out[0] / 2, pw_n = w->out[1] / 2, plane = ph_n * pw_n;
	int64_t down = w->stride[0] * wp, right = w->stride[1];

	for (int64_t c0 = 0; c0 < m; c0 += dp->pool_pixel_channels) {
		struct dc_tile t = pixel_tile_at(c0, dp->pool_pixel_channels, m, off, k, packed, plane, bias, act);

		for (int64_t ph = 0; ph < ph_n; ph++) {
			for (int64_t pw = 0; pw < pw_n; pw++) {
				const float *corner = img + 2 * ph * down + 2 * pw * right;

				t.rows[0] = corner;
				t.rows[1] = corner + right;
				t.rows[2] = corner + down;
				t.rows[3] = corner + down + right;
				t.y = y + c0 * plane + ph * pw_n + pw;
				dp->pool_pixel_tile(&t);
			}
		}
	}
}

/* Row tiles and a 2x2 stride-2 MaxPool: y is the pooled output [m][oh/2][ow/2]. */
static inline __attribute__((always_inline)) void dc_conv_rows_pool(const struct dc_path *dp, const struct rt_k_window *w, int64_t m, const float *img,
			      int64_t wp, const int32_t *off, int64_t k, const float *packed, float *y,
			      const float *bias, const struct rt_k_act_spec *act)
{
	int64_t ph_n = w->out[0] / 2, pw_n = w->out[1] / 2, plane = ph_n * pw_n, per = dp->pool_pixels / 2;

	for (int64_t blk = 0; blk * DC_ROWS < m; blk++) {
		struct dc_row_tile t = {
			.off = off, .k = k, .w = packed + blk * k * DC_ROWS, .plane = plane, .act = act,
			.bias = bias != NULL ? bias + blk * DC_ROWS : NULL, .row_stride = wp,
			.channels = m - blk * DC_ROWS < DC_ROWS ? m - blk * DC_ROWS : DC_ROWS,
		};

		for (t.first = 0; t.first < t.channels; t.first += dp->pool_channels) {
			for (int64_t ph = 0; ph < ph_n; ph++) {
				for (int64_t pw = 0; pw < pw_n; pw += per) {
					t.pixels = 2 * (pw_n - pw < per ? pw_n - pw : per);
					t.b = img + 2 * ph * wp + 2 * pw;
					t.y = y + blk * DC_ROWS * plane + ph * pw_n + pw;
					dp->pool_tile(&t);
				}
			}
		}
	}
}

static inline __attribute__((always_inline)) void dc_conv_rows(const struct dc_path *dp, const struct rt_k_window *w, int64_t m, const float *img,
			 int64_t wp, const int32_t *off, int64_t k, const float *packed, float *y, const float *bias,
			 const float *z, const struct rt_k_act_spec *act)
{
	int64_t oh_n = w->out[0], ow_n = w->out[1], plane = oh_n * ow_n;

	for (int64_t blk = 0; blk * DC_ROWS < m; blk++) {
		struct dc_row_tile t = {
			.off = off, .k = k, .w = packed + blk * k * DC_ROWS, .plane = plane, .act = act,
			.bias = bias != NULL ? bias + blk * DC_ROWS : NULL,
			.channels = m - blk * DC_ROWS < DC_ROWS ? m - blk * DC_ROWS : DC_ROWS,
		};
		int64_t at = blk * DC_ROWS * plane;

		for (t.first = 0; t.first < t.channels; t.first += dp->row_channels) {
			for (int64_t oh = 0; oh < oh_n; oh++) {
				for (int64_t ow = 0; ow < ow_n; ow += dp->row_pixels) {
					t.pixels = ow_n - ow < dp->row_pixels ? ow_n - ow : dp->row_pixels;
					t.b = img + oh * wp + ow;
					t.y = y + at + oh * ow_n + ow;
					t.z = z != NULL ? z + at + oh * ow_n + ow : NULL;
					dp->row_tile(&t);
				}
			}
		}
	}
}

/*
 * The batch, image by image, through the path's loops. Compiled once per instruction set with its
 * table a constant (dc_conv_avx2, dc_conv_avx512), so that each tile is inlined into its loop: a
 * call through the table per tile cost the small CNN's first conv (9 k steps a tile) 8 % and its
 * second 6 % on an AMD EPYC (batch 32: 170 -> 156 and 690 -> 648 us).
 */
static inline __attribute__((always_inline)) void dc_conv_images(const struct dc_path *dp, const struct dc_conv_args *a)
{
	for (int64_t b = 0; b < a->n; b++) {
		const float *img = a->x + b * a->c * a->in_size, *z = a->z != NULL ? a->z + b * a->m * a->plane : NULL;
		float *y = a->y + b * a->m * a->plane;

		if (a->pads) {
			dp->pad(a->w, a->c, img, a->xp, b == 0);
			img = a->xp;
		}
		if (a->pool && a->tiles == RT_DC_ROWS)
			dc_conv_rows_pool(dp, a->w, a->m, img, a->wp, a->off, a->k, a->packed, y, a->bias, a->act);
		else if (a->pool && dp->pool_pixel_tile != NULL) /* rt_dc_pool_applies: no other pooled form */
			dc_conv_pixels_pool(dp, a->w, a->m, img, a->wp, a->off, a->k, a->packed, y, a->bias, a->act);
		else if (a->tiles == RT_DC_ROWS)
			dc_conv_rows(dp, a->w, a->m, img, a->wp, a->off, a->k, a->packed, y, a->bias, z, a->act);
		else
			dc_conv_pixels(dp, a->w, a->m, img, a->wp, a->off, a->k, a->packed, y, a->bias, z, a->act);
	}
}

DC_TARGET static void dc_conv_avx512(const struct dc_conv_args *a)
{
	dc_conv_images(&g_dc_avx512, a);
}

DC2_TARGET static void dc_conv_avx2(const struct dc_conv_args *a)
{
	dc_conv_images(&g_dc_avx2, a);
}

void rt_dc_conv(enum rt_dc_tiles tiles, const struct rt_k_window *w, int64_t n, int64_t m, int64_t c,
		const float *x, const float *packed, float *y, const float *bias, const float *z,
		const struct rt_k_act_spec *act, bool pool, void *scratch)
{
	int32_t *off = scratch;
	int64_t wp = has_pads(w) ? padded_w(w) : w->in[1], chan = (has_pads(w) ? padded_h(w) : w->in[0]) * wp, i = 0;
	struct dc_conv_args a = {
		.w = w, .tiles = tiles, .pool = pool, .pads = has_pads(w), .n = n, .m = m, .c = c, .k = k_depth(w, c),
		.wp = wp, .in_size = w->in[0] * w->in[1],
		.plane = pool ? (w->out[0] / 2) * (w->out[1] / 2) : w->out[0] * w->out[1],
		.x = x, .packed = packed, .bias = bias, .z = z, .y = y,
		.xp = (float *)(void *)((char *)scratch + (size_t)RT_DC_K_MAX * sizeof(int32_t)), .off = off, .act = act,
	};

	if (a.plane <= 0 || m <= 0)
		return;
	for (int64_t ch = 0; ch < c; ch++)
		for (int64_t ki = 0; ki < w->kernel[0]; ki++)
			for (int64_t kj = 0; kj < w->kernel[1]; kj++)
				off[i++] = (int32_t)(ch * chan + ki * w->dilation[0] * wp + kj * w->dilation[1]);
	dc_path()->conv(&a);
}
