/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * 3x3, stride-1 convolutions by Winograd's minimal filtering (Lavin and Gray, 2015) on batchwire's
 * GEMM, in two forms: F(2x2, 3x3) and F(4x4, 3x3).
 *
 * Why: ResNet-50's 3x3 convolutions were where batchwire trailed onnxruntime most (58 ms against
 * 47 at batch 1, docs/performance.md). F(2x2, 3x3) does a 2x2 block of outputs with 16 products
 * per input channel instead of 36 (2.25x less GEMM work); F(4x4, 3x3) a 4x4 block with 36 instead
 * of 144 (4x). F(2x2)'s transforms only add, subtract and halve: its output is the convolution's to
 * float rounding. F(4x4)'s multiply by up to 8 and 1/24, so its error grows (about 5e-6 of the
 * largest output over 512 channels, against 5e-7 for a direct fp32 sum), and its transformed
 * weights are 36 matrices, not 16: 2.25x the bytes per conv, streamed once per group of images.
 * rt_wg_choose_tile takes F(4x4) where the output tiles fill it and that stream stays small.
 *
 * How: the output is cut into t x t tiles (t = 2 or 4), each reading an a x a input patch d
 * (a = t + 2). Per tile and channel, V = Bt d B (a^2 values); per output and input channel, U = G g
 * Gt (the 3x3 weights, done once at load: rt_wg_pack_weights). For each of the a^2 positions xi of
 * a tile, M_xi = U_xi . V_xi is one GEMM [M, C] x [C, tiles] (weights packed for sgemm.c's
 * micro-kernel at load). Then Y = At M A gives each tile's t x t outputs, where the bias, the
 * residual and the activation are applied.
 *
 *   F(2x2, 3x3):
 *   Bt = | 1  0 -1  0 |   G = | 1    0    0   |   At = | 1  1  1  0 |
 *        | 0  1  1  0 |       | 1/2  1/2  1/2 |        | 0  1 -1 -1 |
 *        | 0 -1  1  0 |       | 1/2 -1/2  1/2 |
 *        | 0  1  0 -1 |       | 0    0    1   |
 *
 *   F(4x4, 3x3) (points 0, +-1, +-2 and infinity):
 *   Bt = | 4  0 -5  0  1  0 |   G = |  1/4    0     0   |   At = | 1  1  1  1  1  0 |
 *        | 0 -4 -4  1  1  0 |       | -1/6  -1/6  -1/6  |        | 0  1 -1  2 -2  0 |
 *        | 0  4 -4 -1  1  0 |       | -1/6   1/6  -1/6  |        | 0  1  1  4  4  0 |
 *        | 0 -2 -1  2  1  0 |       |  1/24  1/12  1/6  |        | 0  1 -1  8 -8  1 |
 *        | 0  2 -1 -2  1  0 |       |  1/24 -1/12  1/6  |
 *        | 0  4  0 -5  0  1 |       |  0      0     1   |
 *
 * The transforms run on 8 tiles at once (AVX2). F(2x2): a patch row's even and odd columns for 8
 * tiles are two deinterleaves of 16 consecutive values of the (zero-padded) input row, and a tile
 * row's outputs are the interleave of two vectors. F(4x4): a patch row's columns j = 0..5 for 8
 * tiles are every fourth value from j, a 4x4 transpose in each 128-bit lane of loads paired so
 * that lane 0 holds tiles 0-3 and lane 1 tiles 4-7; the 4 outputs of a tile row go back through
 * the same transpose. Scratch (the planner's): V and M as a^2 matrices each with rows padded by 8
 * tiles (so a vector of 8 tiles may run past a row's end into room that the next row, or the
 * padding, overwrites), a padded input rows, and the GEMM's packing buffer.
 */
#include <errno.h>
#include <immintrin.h>
#include <stdlib.h>
#include <string.h>

#include "act256.h"
#include "winograd.h"

#define WG_TARGET __attribute__((target("avx2,fma")))
#define WG_ALPHA_MAX 6

/* What a form fixes: its tile, its patch, its weight transform and its two data transforms. */
struct wg_form {
	int tile;  /* outputs per tile edge */
	int alpha; /* input patch edge, tile + 2; a^2 transform positions */
	const double (*g)[3]; /* G: alpha x 3 */
	/* V for every tile of one channel plane x, rows of V ld_xi apart per position xi */
	void (*input)(const struct wg_form *f, const struct rt_k_window *w, const float *x, float *v, int64_t ld_xi,
		      float *prow);
	/* Y = At M A for one output channel (mo: M's row of xi 0), plus bias, z, activation */
	void (*output)(const struct rt_k_window *w, const float *mo, int64_t ld_xi, float bias, const float *z,
		       float *y, const struct rt_k_act_spec *act);
};

static const struct wg_form g_forms[2];

static const struct wg_form *form(int tile)
{
	return &g_forms[tile == 4];
}

static int64_t positions(const struct wg_form *f)
{
	return (int64_t)f->alpha * f->alpha;
}

bool rt_wg_tile_valid(int64_t tile)
{
	return tile == 2 || tile == 4;
}

size_t rt_wg_packed_floats(int tile, int64_t m, int64_t c)
{
	return (size_t)positions(form(tile)) * rt_sg_packed_floats(m, c);
}

/* U = G g Gt per (output channel, input channel), in double; then each xi's [M, C] packed. */
int rt_wg_pack_weights(int tile, const float *w, int64_t m, int64_t c, float *out)
{
	const struct wg_form *f = form(tile);
	int al = f->alpha;
	size_t per = rt_sg_packed_floats(m, c);
	float *u = malloc((size_t)(positions(f) * m * c) * sizeof(float) + 1); /* at load: the optimizer's */

	if (u == NULL)
		return -ENOMEM;
	for (int64_t o = 0; o < m; o++) {
		for (int64_t i = 0; i < c; i++) {
			const float *g = w + (o * c + i) * 9;
			double t[WG_ALPHA_MAX][3];

			for (int a = 0; a < al; a++) {
				for (int b = 0; b < 3; b++)
					t[a][b] = f->g[a][0] * g[b] + f->g[a][1] * g[3 + b] + f->g[a][2] * g[6 + b];
			}
			for (int a = 0; a < al; a++) {
				for (int b = 0; b < al; b++) {
					double v = t[a][0] * f->g[b][0] + t[a][1] * f->g[b][1] + t[a][2] * f->g[b][2];

					u[((int64_t)(a * al + b) * m + o) * c + i] = (float)v;
				}
			}
		}
	}
	for (int64_t xi = 0; xi < positions(f); xi++)
		rt_sg_pack_a(u + xi * m * c, c, m, c, out + xi * per);
	free(u);
	return 0;
}

static int64_t tiles_across(const struct wg_form *f, int64_t out)
{
	return (out + f->tile - 1) / f->tile;
}

/* Tiles of one image. */
static int64_t image_tiles(const struct wg_form *f, const struct rt_k_window *w)
{
	return tiles_across(f, w->out[0]) * tiles_across(f, w->out[1]);
}

/* A V/M row: the tiles of `images` images side by side, padded by 8 tiles. */
static int64_t tiles_padded(const struct wg_form *f, const struct rt_k_window *w, int64_t images)
{
	return images * image_tiles(f, w) + 8;
}

/*
 * Images whose tiles go side by side into each GEMM: enough for WG_GROUP_COLS columns, in groups
 * of as even a size as the batch allows. ResNet-50's last stage has 16 tiles an image: one image
 * a GEMM filled half of the 32-column panels and streamed the 16 MiB of its 16 transformed weight
 * matrices from L3 once per image.
 */
#define WG_GROUP_COLS 128

int64_t rt_wg_group_images(int tile, const struct rt_k_window *w, int64_t n)
{
	int64_t per = image_tiles(form(tile), w), want = (WG_GROUP_COLS + per - 1) / per, groups;

	if (n <= 1)
		return 1;
	want = want < n ? want : n;
	groups = (n + want - 1) / want;
	return (n + groups - 1) / groups;
}

/*
 * A padded input row: what the 8-tile vectors read past the last tile's patch stays inside it.
 * F(2x2) reads up to 2 tw + 17 for tiles from tw, F(4x4) up to 4 tw + 35.
 */
static int64_t prow_len(const struct wg_form *f, const struct rt_k_window *w)
{
	return f->tile * tiles_across(f, w->out[1]) + (f->tile == 4 ? 32 : 18);
}

/*
 * F(4x4) on an output 13 to 16 wide (ResNet-50's 14 x 14) has rows of 4 tiles: half of each 8-tile
 * vector of its transforms. There each vector takes two tile rows, lane 0 the first's 4 tiles and
 * lane 1 the next's (adjacent in V and M, a row being 4 tiles), from 10 padded input rows.
 */
static bool paired_rows(const struct wg_form *f, const struct rt_k_window *w)
{
	return f->tile == 4 && tiles_across(f, w->out[1]) == 4;
}

/* Padded input rows the scratch holds: a patch's, or two tile rows' where rows are paired. */
static int64_t prow_rows(const struct wg_form *f)
{
	return f->tile == 4 ? f->alpha + f->tile : f->alpha;
}

size_t rt_wg_scratch_floats(int tile, const struct rt_k_window *w, int64_t m, int64_t c, int64_t images)
{
	const struct wg_form *f = form(tile);
	int64_t tp = tiles_padded(f, w, images);

	return (size_t)(positions(f) * (c + m) * tp + prow_rows(f) * prow_len(f, w)) +
	       rt_sg_scratch_floats(images * image_tiles(f, w), c);
}

bool rt_wg_applies(const struct rt_k_window *w, int64_t group)
{
	return w->nsp == 2 && group == 1 && w->kernel[0] == 3 && w->kernel[1] == 3 && w->stride[0] == 1 &&
	       w->stride[1] == 1 && w->dilation[0] == 1 && w->dilation[1] == 1 && w->out[0] > 0 && w->out[1] > 0;
}

/*
 * F(4x4) where an image gives it 16 tiles or more: it does 36 products per 16 outputs against
 * F(2x2)'s 16 per 4, but its weights are 2.25x larger and each GEMM reads all of them for the
 * group's columns. At 7 x 7 (4 tiles of 4, 16 of 2) ResNet-50's last stage streamed 37.7 MB of
 * weights a conv for 4 columns at batch 1: 3.9 ms against F(2x2)'s 2.0 (an AMD EPYC); at 14 x 14 (16
 * tiles) F(4x4) took 1.42-1.48 ms against 1.61-1.66, at 28 x 28 1.26 against 1.68, at 56 x 56 1.5
 * against 2.1.
 */
int rt_wg_choose_tile(int64_t out_h, int64_t out_w)
{
	const struct wg_form *f4 = form(4);

	if (out_h <= 0 || out_w <= 0)
		return 2;
	return tiles_across(f4, out_h) * tiles_across(f4, out_w) >= 16 ? 4 : 2;
}

/*
 * A tile row's outputs for one output row: nv vectors of 8 (bias already added), count of them
 * inside the output; plus the residual zr (or NULL), the activation, stored at yr.
 */
WG_TARGET static inline void store_outputs(float *yr, const float *zr, const __m256 *o, int nv, int64_t count,
					   const struct rt_k_act_spec *act)
{
	float tmp[32];

	if (count == 8 * nv) {
		for (int i = 0; i < nv; i++) {
			__m256 v = o[i];

			if (zr != NULL)
				v = _mm256_add_ps(v, _mm256_loadu_ps(zr + 8 * i));
			_mm256_storeu_ps(yr + 8 * i, rt_act8(v, act));
		}
		return;
	}
	for (int i = 0; i < nv; i++)
		_mm256_storeu_ps(tmp + 8 * i, o[i]);
	for (int64_t k = 0; k < count; k++)
		yr[k] = rt_act1(tmp[k] + (zr != NULL ? zr[k] : 0.0f), act);
}

/*
 * The input rows of tile row th and on: rows rows from 'tile * th', zero-padded left by pad_begin
 * and right to plen; input column ic lands at prow index ic + pad_begin (past plen it is unused).
 */
static void pad_rows(const struct wg_form *f, const struct rt_k_window *w, const float *x, int64_t th, int rows,
		     float *prow)
{
	int64_t plen = prow_len(f, w);

	for (int r = 0; r < rows; r++) {
		int64_t ih = f->tile * th - w->pad_begin[0] + r, lo = w->pad_begin[1], n = w->in[1];
		float *pr = prow + r * plen;

		memset(pr, 0, (size_t)plen * sizeof(float));
		if (ih < 0 || ih >= w->in[0])
			continue;
		if (lo + n > plen)
			n = plen - lo;
		if (n > 0)
			memcpy(pr + lo, x + ih * w->in[1], (size_t)n * sizeof(float));
	}
}

/* ---- F(2x2, 3x3) ------------------------------------------------------------------------------- */

/* 16 consecutive floats' even and odd elements, 8 each, in order. */
WG_TARGET static inline void deinterleave(const float *p, __m256 *even, __m256 *odd)
{
	__m256 lo = _mm256_loadu_ps(p), hi = _mm256_loadu_ps(p + 8);

	*even = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(2, 0, 2, 0))),
						       _MM_SHUFFLE(3, 1, 2, 0)));
	*odd = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(3, 1, 3, 1))),
						      _MM_SHUFFLE(3, 1, 2, 0)));
}

/* V[xi][ch][t] = (Bt d B)[xi] for every tile t of channel ch (x: the channel's plane). */
WG_TARGET static void input_f2(const struct wg_form *f, const struct rt_k_window *w, const float *x, float *v,
			       int64_t ld_xi, float *prow)
{
	int64_t th_n = tiles_across(f, w->out[0]), tw_n = tiles_across(f, w->out[1]), plen = prow_len(f, w);

	for (int64_t th = 0; th < th_n; th++) {
		pad_rows(f, w, x, th, f->alpha, prow);
		for (int64_t tw = 0; tw < tw_n; tw += 8) {
			__m256 d[4][4], e[4][4];
			int64_t t0 = th * tw_n + tw;

			for (int r = 0; r < 4; r++) {
				deinterleave(prow + r * plen + 2 * tw, &d[r][0], &d[r][1]);
				deinterleave(prow + r * plen + 2 * tw + 2, &d[r][2], &d[r][3]);
				/* d B: columns */
				e[r][0] = _mm256_sub_ps(d[r][0], d[r][2]);
				e[r][1] = _mm256_add_ps(d[r][1], d[r][2]);
				e[r][2] = _mm256_sub_ps(d[r][2], d[r][1]);
				e[r][3] = _mm256_sub_ps(d[r][1], d[r][3]);
			}
			/* Bt (d B): rows */
			for (int j = 0; j < 4; j++) {
				_mm256_storeu_ps(v + (0 * 4 + j) * ld_xi + t0, _mm256_sub_ps(e[0][j], e[2][j]));
				_mm256_storeu_ps(v + (1 * 4 + j) * ld_xi + t0, _mm256_add_ps(e[1][j], e[2][j]));
				_mm256_storeu_ps(v + (2 * 4 + j) * ld_xi + t0, _mm256_sub_ps(e[2][j], e[1][j]));
				_mm256_storeu_ps(v + (3 * 4 + j) * ld_xi + t0, _mm256_sub_ps(e[1][j], e[3][j]));
			}
		}
	}
}

/*
 * Y = At M A per tile, for output channel o (mo: M's row o of xi 0, xi apart by ld_xi): two output
 * rows of 16 values for 8 tiles, the bias, residual and activation applied, stored where they
 * fall inside the output (a tile past the right or bottom edge is cut).
 */
WG_TARGET static void output_f2(const struct rt_k_window *w, const float *mo, int64_t ld_xi, float bias,
				const float *z, float *y, const struct rt_k_act_spec *act)
{
	int64_t oh_n = w->out[0], ow_n = w->out[1], th_n = (oh_n + 1) / 2, tw_n = (ow_n + 1) / 2;
	__m256 bv = _mm256_set1_ps(bias);

	for (int64_t th = 0; th < th_n; th++) {
		for (int64_t tw = 0; tw < tw_n; tw += 8) {
			__m256 mm[4][4], s[2][4];
			int64_t t0 = th * tw_n + tw;

			for (int xi = 0; xi < 16; xi++)
				mm[xi / 4][xi % 4] = _mm256_loadu_ps(mo + xi * ld_xi + t0);
			for (int j = 0; j < 4; j++) {
				s[0][j] = _mm256_add_ps(_mm256_add_ps(mm[0][j], mm[1][j]), mm[2][j]);
				s[1][j] = _mm256_sub_ps(_mm256_sub_ps(mm[1][j], mm[2][j]), mm[3][j]);
			}
			for (int i = 0; i < 2; i++) {
				int64_t oh = 2 * th + i, col = 2 * tw, count = ow_n - col < 16 ? ow_n - col : 16;
				__m256 a = _mm256_add_ps(_mm256_add_ps(s[i][0], s[i][1]), s[i][2]);
				__m256 b = _mm256_sub_ps(_mm256_sub_ps(s[i][1], s[i][2]), s[i][3]);
				__m256 lo = _mm256_unpacklo_ps(a, b), hi = _mm256_unpackhi_ps(a, b), o[2];

				if (oh >= oh_n)
					break;
				o[0] = _mm256_add_ps(_mm256_permute2f128_ps(lo, hi, 0x20), bv);
				o[1] = _mm256_add_ps(_mm256_permute2f128_ps(lo, hi, 0x31), bv);
				store_outputs(y + oh * ow_n + col, z != NULL ? z + oh * ow_n + col : NULL, o, 2, count, act);
			}
		}
	}
}

/* ---- F(4x4, 3x3) ------------------------------------------------------------------------------- */

/* Four floats at lo in lane 0, four at hi in lane 1. */
WG_TARGET static inline __m256 load_lanes(const float *lo, const float *hi)
{
	return _mm256_insertf128_ps(_mm256_castps128_ps256(_mm_loadu_ps(lo)), _mm_loadu_ps(hi), 1);
}

/* The 4x4 transpose of rows r0..r3 in each 128-bit lane: c[j] holds element j of each row. */
WG_TARGET static inline void transpose_lanes(__m256 r0, __m256 r1, __m256 r2, __m256 r3, __m256 *c)
{
	__m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1);
	__m256 t2 = _mm256_unpacklo_ps(r2, r3), t3 = _mm256_unpackhi_ps(r2, r3);

	c[0] = _mm256_shuffle_ps(t0, t2, 0x44);
	c[1] = _mm256_shuffle_ps(t0, t2, 0xee);
	c[2] = _mm256_shuffle_ps(t1, t3, 0x44);
	c[3] = _mm256_shuffle_ps(t1, t3, 0xee);
}

/* Bt's rows on six vectors: out[i] = sum_j Bt[i][j] in[j]. */
WG_TARGET static inline void bt6(const __m256 *in, __m256 *out)
{
	__m256 four = _mm256_set1_ps(4.0f), five = _mm256_set1_ps(5.0f), two = _mm256_set1_ps(2.0f);
	__m256 a = _mm256_fnmadd_ps(four, in[2], in[4]), b = _mm256_fnmadd_ps(four, in[1], in[3]);
	__m256 c = _mm256_sub_ps(in[4], in[2]), d = _mm256_mul_ps(two, _mm256_sub_ps(in[3], in[1]));

	out[0] = _mm256_fmadd_ps(four, in[0], _mm256_fnmadd_ps(five, in[2], in[4]));
	out[1] = _mm256_add_ps(a, b);
	out[2] = _mm256_sub_ps(a, b);
	out[3] = _mm256_add_ps(c, d);
	out[4] = _mm256_sub_ps(c, d);
	out[5] = _mm256_fmadd_ps(four, in[1], _mm256_fnmadd_ps(five, in[3], in[5]));
}

/* At's rows on six vectors: out[i] = sum_j At[i][j] in[j]. */
WG_TARGET static inline void at6(const __m256 *in, __m256 *out)
{
	__m256 p = _mm256_add_ps(in[1], in[2]), q = _mm256_sub_ps(in[1], in[2]);
	__m256 r = _mm256_add_ps(in[3], in[4]), s = _mm256_sub_ps(in[3], in[4]);

	out[0] = _mm256_add_ps(_mm256_add_ps(in[0], p), r);
	out[1] = _mm256_fmadd_ps(_mm256_set1_ps(2.0f), s, q);
	out[2] = _mm256_fmadd_ps(_mm256_set1_ps(4.0f), r, p);
	out[3] = _mm256_add_ps(_mm256_fmadd_ps(_mm256_set1_ps(8.0f), s, q), in[5]);
}

WG_TARGET static void input_f4(const struct wg_form *f, const struct rt_k_window *w, const float *x, float *v,
			       int64_t ld_xi, float *prow)
{
	int64_t th_n = tiles_across(f, w->out[0]), tw_n = tiles_across(f, w->out[1]), plen = prow_len(f, w);
	bool paired = paired_rows(f, w);

	for (int64_t th = 0; th < th_n; th += paired ? 2 : 1) {
		pad_rows(f, w, x, th, paired ? 10 : 6, prow);
		for (int64_t tw = 0; tw < tw_n; tw += 8) {
			__m256 e[6][6], col[6], vt[6];
			int64_t t0 = th * tw_n + tw;

			for (int r = 0; r < 6; r++) {
				/*
				 * d[r][j] of tiles tw..tw+7: p[4t + j]; lane 0 tiles 0-3, lane 1 tiles 4-7 (paired:
				 * the next tile row's 0-3, its patch rows 4 input rows down)
				 */
				const float *p = prow + r * plen + 4 * tw, *q = paired ? p + 4 * plen : p + 16;
				__m256 r1 = load_lanes(p + 4, q + 4), r2 = load_lanes(p + 8, q + 8);
				__m256 r3 = load_lanes(p + 12, q + 12), d[8];

				transpose_lanes(load_lanes(p, q), r1, r2, r3, d);
				transpose_lanes(r1, r2, r3, load_lanes(p + 16, q + 16), d + 4);
				/* d B: the row's six columns */
				bt6(d, e[r]);
			}
			/* Bt (d B): down each column */
			for (int j = 0; j < 6; j++) {
				for (int r = 0; r < 6; r++)
					col[r] = e[r][j];
				bt6(col, vt);
				for (int i = 0; i < 6; i++)
					_mm256_storeu_ps(v + (i * 6 + j) * ld_xi + t0, vt[i]);
			}
		}
	}
}

WG_TARGET static void output_f4(const struct rt_k_window *w, const float *mo, int64_t ld_xi, float bias,
				const float *z, float *y, const struct rt_k_act_spec *act)
{
	int64_t oh_n = w->out[0], ow_n = w->out[1], th_n = (oh_n + 3) / 4, tw_n = (ow_n + 3) / 4;
	bool paired = paired_rows(form(4), w); /* lane 1: the next tile row's */
	__m256 bv = _mm256_set1_ps(bias);

	for (int64_t th = 0; th < th_n; th += paired ? 2 : 1) {
		for (int64_t tw = 0; tw < tw_n; tw += 8) {
			__m256 s[4][6], col[6], row[4];
			int64_t t0 = th * tw_n + tw;

			/* At M: down each column */
			for (int j = 0; j < 6; j++) {
				__m256 out[4];

				for (int i = 0; i < 6; i++)
					col[i] = _mm256_loadu_ps(mo + (i * 6 + j) * ld_xi + t0);
				at6(col, out);
				for (int i = 0; i < 4; i++)
					s[i][j] = out[i];
			}
			for (int i = 0; i < 4; i++) {
				int64_t oh = 4 * th + i, c0 = 4 * tw, count = ow_n - c0 < 32 ? ow_n - c0 : 32;
				__m256 q[4], o[4];

				if (oh >= oh_n)
					break;
				/* (At M) A: the row's 4 outputs of 8 tiles; back to tile order by the lanes' transpose */
				at6(s[i], row);
				transpose_lanes(row[0], row[1], row[2], row[3], q);
				o[0] = _mm256_add_ps(_mm256_permute2f128_ps(q[0], q[1], 0x20), bv);
				o[1] = _mm256_add_ps(_mm256_permute2f128_ps(q[2], q[3], 0x20), bv);
				o[2] = _mm256_add_ps(_mm256_permute2f128_ps(q[0], q[1], 0x31), bv);
				o[3] = _mm256_add_ps(_mm256_permute2f128_ps(q[2], q[3], 0x31), bv);
				if (paired) {
					/* o[0..1]: row oh's 16 (tiles 0-3), o[2..3]: the next tile row's, 4 rows down */
					store_outputs(y + oh * ow_n, z != NULL ? z + oh * ow_n : NULL, o, 2, ow_n, act);
					if (oh + 4 < oh_n)
						store_outputs(y + (oh + 4) * ow_n, z != NULL ? z + (oh + 4) * ow_n : NULL, o + 2,
							      2, ow_n, act);
					continue;
				}
				store_outputs(y + oh * ow_n + c0, z != NULL ? z + oh * ow_n + c0 : NULL, o, 4, count, act);
			}
		}
	}
}

static const double g_f2[4][3] = { { 1, 0, 0 }, { 0.5, 0.5, 0.5 }, { 0.5, -0.5, 0.5 }, { 0, 0, 1 } };
static const double g_f4[6][3] = {
	{ 1.0 / 4, 0, 0 },
	{ -1.0 / 6, -1.0 / 6, -1.0 / 6 },
	{ -1.0 / 6, 1.0 / 6, -1.0 / 6 },
	{ 1.0 / 24, 1.0 / 12, 1.0 / 6 },
	{ 1.0 / 24, -1.0 / 12, 1.0 / 6 },
	{ 0, 0, 1 },
};

static const struct wg_form g_forms[2] = {
	{ .tile = 2, .alpha = 4, .g = g_f2, .input = input_f2, .output = output_f2 },
	{ .tile = 4, .alpha = 6, .g = g_f4, .input = input_f4, .output = output_f4 },
};

/*
 * A group of images: V's rows hold image 0's tiles, then image 1's, ...; a vector of 8 tiles past an
 * image's last runs into the next image's first, which that image's transform, made after it,
 * overwrites (the last image's into the row's padding); the output transform reads such a vector
 * and stores only its own image's tiles.
 */
WG_TARGET static void wg_group(const struct wg_form *f, const struct rt_k_window *w, int64_t m, int64_t c,
			       int64_t images, const float *x, const float *packed, float *y, const float *bias,
			       const float *z, const struct rt_k_act_spec *act, float *v, float *mbuf, float *prow,
			       float *bbuf, int64_t tp)
{
	int64_t tiles = image_tiles(f, w), in_plane = w->in[0] * w->in[1], out_plane = w->out[0] * w->out[1];
	size_t per = rt_sg_packed_floats(m, c);
	const struct rt_sg_epilogue none = { .act = { .kind = RT_K_ACT_NONE } };

	/* V: a^2 matrices [C, images x tiles], each row tp long */
	for (int64_t ch = 0; ch < c; ch++)
		for (int64_t b = 0; b < images; b++)
			f->input(f, w, x + (b * c + ch) * in_plane, v + ch * tp + b * tiles, c * tp, prow);
	for (int64_t xi = 0; xi < positions(f); xi++) {
		struct rt_sg_b src = { .x = v + xi * c * tp, .ldb = tp };

		rt_sg_gemm(m, images * tiles, c, packed + xi * per, &src, mbuf + xi * m * tp, tp, &none, bbuf);
	}
	for (int64_t b = 0; b < images; b++)
		for (int64_t o = 0; o < m; o++)
			f->output(w, mbuf + o * tp + b * tiles, m * tp, bias != NULL ? bias[o] : 0.0f,
				  z != NULL ? z + (b * m + o) * out_plane : NULL, y + (b * m + o) * out_plane, act);
}

WG_TARGET void rt_wg_conv(int tile, const struct rt_k_window *w, int64_t m, int64_t c, int64_t n, const float *x,
			  const float *packed, float *y, const float *bias, const float *z,
			  const struct rt_k_act_spec *act, float *scratch)
{
	const struct wg_form *f = form(tile);
	int64_t group = rt_wg_group_images(tile, w, n), tp = tiles_padded(f, w, group);
	int64_t in_image = c * w->in[0] * w->in[1], out_image = m * w->out[0] * w->out[1];
	float *v = scratch, *mbuf = v + positions(f) * c * tp, *prow = mbuf + positions(f) * m * tp;
	float *bbuf = prow + prow_rows(f) * prow_len(f, w);

	for (int64_t b = 0; b < n; b += group) {
		int64_t images = n - b < group ? n - b : group;

		wg_group(f, w, m, c, images, x + b * in_image, packed, y + b * out_image, bias,
			 z != NULL ? z + b * out_image : NULL, act, v, mbuf, prow, bbuf, tiles_padded(f, w, images));
	}
}
