/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * 3x3, stride-1 convolutions by Winograd's F(2x2, 3x3) (Lavin and Gray, 2015) on batchwire's GEMM.
 *
 * Why: ResNet-50's 3x3 convolutions were where batchwire trailed onnxruntime most (58 ms against
 * 47 at batch 1, docs/performance.md); F(2x2, 3x3) does a 2x2 block of outputs with 16 products
 * per input channel instead of 36, so the GEMM work of these convolutions drops 2.25x. The output is
 * the convolution's to float rounding: the transforms only add, subtract and halve.
 *
 * How: the output is cut into 2x2 tiles, each reading a 4x4 input patch d. Per tile and channel,
 * V = Bt d B (16 values); per output and input channel, U = G g Gt (the 3x3 weights, done once at
 * load: rt_wg_pack_weights). For each of the 16 positions xi of a tile, M_xi = U_xi . V_xi is one
 * GEMM [M, C] x [C, tiles] (weights packed for sgemm.c's micro-kernel at load). Then Y = At M A
 * gives each tile's 2x2 outputs, where the bias, the residual and the activation are applied.
 *
 *   Bt = | 1  0 -1  0 |   G = | 1    0    0   |   At = | 1  1  1  0 |
 *        | 0  1  1  0 |       | 1/2  1/2  1/2 |        | 0  1 -1 -1 |
 *        | 0 -1  1  0 |       | 1/2 -1/2  1/2 |
 *        | 0  1  0 -1 |       | 0    0    1   |
 *
 * The transforms run on 8 tiles at once (AVX2): a patch row's even and odd columns for 8 tiles are
 * two deinterleaves of 16 consecutive values of the (zero-padded) input row, and a tile row's
 * outputs are the interleave of two vectors. Scratch (the planner's): V and M as 16 matrices each
 * with rows padded by 8 tiles (so a vector of 8 tiles may run past a row's end into room that the
 * next row, or the padding, overwrites), four padded input rows, and the GEMM's packing buffer.
 */
#include <errno.h>
#include <immintrin.h>
#include <stdlib.h>
#include <string.h>

#include "act256.h"
#include "winograd.h"

#define WG_TARGET __attribute__((target("avx2,fma")))
#define WG_XI 16 /* positions of a tile's 4x4 transform */

size_t rt_wg_packed_floats(int64_t m, int64_t c)
{
	return WG_XI * rt_sg_packed_floats(m, c);
}

/* U = G g Gt per (output channel, input channel), in double; then each xi's [M, C] packed. */
int rt_wg_pack_weights(const float *w, int64_t m, int64_t c, float *out)
{
	static const double g_mat[4][3] = { {1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, -0.5, 0.5}, {0, 0, 1} };
	size_t per = rt_sg_packed_floats(m, c);
	float *u = malloc((size_t)(WG_XI * m * c) * sizeof(float) + 1); /* at load: the optimizer's */

	if (u == NULL)
		return -ENOMEM;
	for (int64_t o = 0; o < m; o++) {
		for (int64_t i = 0; i < c; i++) {
			const float *g = w + (o * c + i) * 9;
			double t[4][3];

			for (int a = 0; a < 4; a++) {
				for (int b = 0; b < 3; b++)
					t[a][b] = g_mat[a][0] * g[b] + g_mat[a][1] * g[3 + b] + g_mat[a][2] * g[6 + b];
			}
			for (int a = 0; a < 4; a++) {
				for (int b = 0; b < 4; b++) {
					double v = t[a][0] * g_mat[b][0] + t[a][1] * g_mat[b][1] + t[a][2] * g_mat[b][2];

					u[((int64_t)(a * 4 + b) * m + o) * c + i] = (float)v;
				}
			}
		}
	}
	for (int xi = 0; xi < WG_XI; xi++)
		rt_sg_pack_a(u + (int64_t)xi * m * c, c, m, c, out + xi * per);
	free(u);
	return 0;
}

/* Tiles of one image's tw-wide, th-high tiling. */
static int64_t image_tiles(const struct rt_k_window *w)
{
	return (w->out[0] + 1) / 2 * ((w->out[1] + 1) / 2);
}

/* A V/M row: the tiles of `images` images side by side, padded by 8 tiles. */
static int64_t tiles_padded(const struct rt_k_window *w, int64_t images)
{
	return images * image_tiles(w) + 8;
}

/*
 * Images whose tiles go side by side into each GEMM: enough for WG_GROUP_COLS columns, in groups
 * of as even a size as the batch allows. ResNet-50's last stage has 16 tiles an image: one image
 * a GEMM filled half of the 32-column panels and streamed the 16 MiB of its 16 transformed weight
 * matrices from L3 once per image.
 */
#define WG_GROUP_COLS 128

int64_t rt_wg_group_images(const struct rt_k_window *w, int64_t n)
{
	int64_t want = (WG_GROUP_COLS + image_tiles(w) - 1) / image_tiles(w), groups;

	if (n <= 1)
		return 1;
	want = want < n ? want : n;
	groups = (n + want - 1) / want;
	return (n + groups - 1) / groups;
}

static int64_t prow_len(const struct rt_k_window *w)
{
	return 2 * ((w->out[1] + 1) / 2) + 2 + 16;
}

size_t rt_wg_scratch_floats(const struct rt_k_window *w, int64_t m, int64_t c, int64_t images)
{
	int64_t tp = tiles_padded(w, images);

	return (size_t)(WG_XI * c * tp + WG_XI * m * tp + 4 * prow_len(w)) +
	       rt_sg_scratch_floats(images * image_tiles(w), c);
}

bool rt_wg_applies(const struct rt_k_window *w, int64_t group)
{
	return w->nsp == 2 && group == 1 && w->kernel[0] == 3 && w->kernel[1] == 3 && w->stride[0] == 1 &&
	       w->stride[1] == 1 && w->dilation[0] == 1 && w->dilation[1] == 1 && w->out[0] > 0 && w->out[1] > 0;
}

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
WG_TARGET static void input_transform(const struct rt_k_window *w, const float *x, float *v, int64_t ld_xi,
				      float *prow)
{
	int64_t ih_n = w->in[0], iw_n = w->in[1], th_n = (w->out[0] + 1) / 2, tw_n = (w->out[1] + 1) / 2;
	int64_t plen = prow_len(w);

	for (int64_t th = 0; th < th_n; th++) {
		/* the tile row's 4 input rows, zero-padded left by pad_begin and right to plen */
		for (int r = 0; r < 4; r++) {
			int64_t ih = 2 * th - w->pad_begin[0] + r, lo = w->pad_begin[1], n = iw_n;
			float *pr = prow + r * plen;

			memset(pr, 0, (size_t)plen * sizeof(float));
			if (ih < 0 || ih >= ih_n)
				continue;
			/* input column ic lands at prow index ic + pad_begin; past the row's 2*tw_n + 2 it is unused */
			if (lo + n > plen)
				n = plen - lo;
			if (n > 0)
				memcpy(pr + lo, x + ih * iw_n, (size_t)n * sizeof(float));
		}
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
WG_TARGET static void output_transform(const struct rt_k_window *w, const float *mo, int64_t ld_xi, float bias,
				       const float *z, float *y, const struct rt_k_act_spec *act)
{
	int64_t oh_n = w->out[0], ow_n = w->out[1], th_n = (oh_n + 1) / 2, tw_n = (ow_n + 1) / 2;

	for (int64_t th = 0; th < th_n; th++) {
		for (int64_t tw = 0; tw < tw_n; tw += 8) {
			__m256 mm[4][4], s[2][4];
			int64_t t0 = th * tw_n + tw;

			for (int xi = 0; xi < WG_XI; xi++)
				mm[xi / 4][xi % 4] = _mm256_loadu_ps(mo + xi * ld_xi + t0);
			for (int j = 0; j < 4; j++) {
				s[0][j] = _mm256_add_ps(_mm256_add_ps(mm[0][j], mm[1][j]), mm[2][j]);
				s[1][j] = _mm256_sub_ps(_mm256_sub_ps(mm[1][j], mm[2][j]), mm[3][j]);
			}
			for (int i = 0; i < 2; i++) {
				int64_t oh = 2 * th + i, col = 2 * tw, count = ow_n - col < 16 ? ow_n - col : 16;
				__m256 a = _mm256_add_ps(_mm256_add_ps(s[i][0], s[i][1]), s[i][2]);
				__m256 b = _mm256_sub_ps(_mm256_sub_ps(s[i][1], s[i][2]), s[i][3]);
				__m256 lo = _mm256_unpacklo_ps(a, b), hi = _mm256_unpackhi_ps(a, b), bv = _mm256_set1_ps(bias);
				__m256 o0 = _mm256_add_ps(_mm256_permute2f128_ps(lo, hi, 0x20), bv);
				__m256 o1 = _mm256_add_ps(_mm256_permute2f128_ps(lo, hi, 0x31), bv);
				float *yr = y + oh * ow_n + col;

				if (oh >= oh_n)
					break;
				if (count == 16) {
					if (z != NULL) {
						o0 = _mm256_add_ps(o0, _mm256_loadu_ps(z + oh * ow_n + col));
						o1 = _mm256_add_ps(o1, _mm256_loadu_ps(z + oh * ow_n + col + 8));
					}
					_mm256_storeu_ps(yr, rt_act8(o0, act));
					_mm256_storeu_ps(yr + 8, rt_act8(o1, act));
					continue;
				}
				{
					float tmp[16];

					_mm256_storeu_ps(tmp, o0);
					_mm256_storeu_ps(tmp + 8, o1);
					for (int64_t k = 0; k < count; k++) {
						float v = tmp[k] + (z != NULL ? z[oh * ow_n + col + k] : 0.0f);

						switch (act->kind) {
						case RT_K_ACT_RELU: v = v > 0.0f ? v : 0.0f; break;
						case RT_K_ACT_LEAKY_RELU: v = v < 0.0f ? v * act->a : v; break;
						case RT_K_ACT_CLIP: v = v < act->a ? act->a : v > act->b ? act->b : v; break;
						default: break;
						}
						yr[k] = v;
					}
				}
			}
		}
	}
}

/*
 * A group of images: V's rows hold image 0's tiles, then image 1's, ...; a vector of 8 tiles past an
 * image's last runs into the next image's first, which that image's transform, made after it,
 * overwrites (the last image's into the row's padding); the output transform reads such a vector
 * and stores only its own image's tiles.
 */
WG_TARGET static void wg_group(const struct rt_k_window *w, int64_t m, int64_t c, int64_t images, const float *x,
			       const float *packed, float *y, const float *bias, const float *z,
			       const struct rt_k_act_spec *act, float *v, float *mbuf, float *prow, float *bbuf, int64_t tp)
{
	int64_t tiles = image_tiles(w), in_plane = w->in[0] * w->in[1], out_plane = w->out[0] * w->out[1];
	size_t per = rt_sg_packed_floats(m, c);
	const struct rt_sg_epilogue none = { .act = { .kind = RT_K_ACT_NONE } };

	/* V: 16 matrices [C, images x tiles], each row tp long */
	for (int64_t ch = 0; ch < c; ch++)
		for (int64_t b = 0; b < images; b++)
			input_transform(w, x + (b * c + ch) * in_plane, v + ch * tp + b * tiles, c * tp, prow);
	for (int xi = 0; xi < WG_XI; xi++) {
		struct rt_sg_b src = { .x = v + xi * c * tp, .ldb = tp };

		rt_sg_gemm(m, images * tiles, c, packed + xi * per, &src, mbuf + xi * m * tp, tp, &none, bbuf);
	}
	for (int64_t b = 0; b < images; b++)
		for (int64_t o = 0; o < m; o++)
			output_transform(w, mbuf + o * tp + b * tiles, m * tp, bias != NULL ? bias[o] : 0.0f,
					 z != NULL ? z + (b * m + o) * out_plane : NULL, y + (b * m + o) * out_plane, act);
}

WG_TARGET void rt_wg_conv(const struct rt_k_window *w, int64_t m, int64_t c, int64_t n, const float *x,
			  const float *packed, float *y, const float *bias, const float *z,
			  const struct rt_k_act_spec *act, float *scratch)
{
	int64_t group = rt_wg_group_images(w, n), tp = tiles_padded(w, group);
	int64_t in_image = c * w->in[0] * w->in[1], out_image = m * w->out[0] * w->out[1];
	float *v = scratch, *mbuf = v + WG_XI * c * tp, *prow = mbuf + WG_XI * m * tp, *bbuf = prow + 4 * prow_len(w);

	for (int64_t b = 0; b < n; b += group) {
		int64_t images = n - b < group ? n - b : group;

		wg_group(w, m, c, images, x + b * in_image, packed, y + b * out_image, bias,
			 z != NULL ? z + b * out_image : NULL, act, v, mbuf, prow, bbuf, tiles_padded(w, images));
	}
}
