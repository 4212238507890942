/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Unit tests of the convolutions read in place (runtime/kernels/conv_direct.c), called directly,
 * against a double-precision reference: both tile kinds, every remainder of the output channels
 * against their blocks (8 and 32) and the tiles' (AVX2: 4 and 16), of the pixels against a tile's 8
 * and 32 (AVX2: 6 and 16), pads on each side, strides, dilations, one channel and many, several
 * images (the padded image's border is written for the first only), the bias, the residual and
 * each activation; nothing written past the output. meson runs it once per instruction-set level:
 * the avx2 and avx512 levels run their own tiles, below AVX2 it is a SKIP with the reason.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <CUnit/Basic.h>

#include "isa_level.h"
#include "kernels/conv_direct.h"

#define GUARD 64 /* floats past the output that must keep their value */
#define GUARD_VALUE 1234.5f

static unsigned int g_seed = 4242;

static float *rand_floats(size_t n)
{
	float *p = malloc((n + GUARD) * sizeof(float));

	CU_ASSERT_FATAL(p != NULL);
	for (size_t i = 0; i < n + GUARD; i++)
		p[i] = (float)rand_r(&g_seed) / (float)RAND_MAX * 2.0f - 1.0f;
	return p;
}

static const struct rt_k_act_spec g_acts[] = {
	{ .kind = RT_K_ACT_NONE }, { .kind = RT_K_ACT_RELU }, { .kind = RT_K_ACT_LEAKY_RELU, .a = 0.1f },
	{ .kind = RT_K_ACT_CLIP, .a = -0.5f, .b = 0.75f },
};
#define NUM_ACTS (sizeof(g_acts) / sizeof(g_acts[0]))

static double act_ref(double v, const struct rt_k_act_spec *act)
{
	switch (act->kind) {
	case RT_K_ACT_RELU: return v > 0 ? v : 0;
	case RT_K_ACT_LEAKY_RELU: return v < 0 ? v * act->a : v;
	case RT_K_ACT_CLIP: return v < act->a ? act->a : v > act->b ? act->b : v;
	default: return v;
	}
}

struct geom {
	int64_t c, h, w, kh, kw, sh, sw, dh, dw, pt, pl, pb, pr;
};

static void window_of(const struct geom *g, struct rt_k_window *w)
{
	memset(w, 0, sizeof(*w));
	w->nsp = 2;
	w->in[0] = g->h, w->in[1] = g->w;
	w->kernel[0] = g->kh, w->kernel[1] = g->kw;
	w->stride[0] = g->sh, w->stride[1] = g->sw;
	w->dilation[0] = g->dh, w->dilation[1] = g->dw;
	w->pad_begin[0] = g->pt, w->pad_begin[1] = g->pl;
	w->pad_end[0] = g->pb, w->pad_end[1] = g->pr;
	w->out[0] = (g->h + g->pt + g->pb - (g->kh - 1) * g->dh - 1) / g->sh + 1;
	w->out[1] = (g->w + g->pl + g->pr - (g->kw - 1) * g->dw - 1) / g->sw + 1;
}

/* The reference conv's value at (img, o, oh, ow), its activation applied; *mag the bound's terms. */
static double conv_ref(const struct geom *g, const struct rt_k_window *w, const float *x, const float *wt,
		       const float *b, const float *z, int64_t img, int64_t m, int64_t o, int64_t oh, int64_t ow,
		       const struct rt_k_act_spec *act, double *mag)
{
	int64_t k = g->c * g->kh * g->kw, in_size = g->h * g->w, at = ((img * m + o) * w->out[0] + oh) * w->out[1] + ow;
	double s = 0;

	*mag = 0;
	for (int64_t ch = 0; ch < g->c; ch++) {
		for (int64_t ki = 0; ki < g->kh; ki++) {
			for (int64_t kj = 0; kj < g->kw; kj++) {
				int64_t ih = oh * g->sh - g->pt + ki * g->dh, iw = ow * g->sw - g->pl + kj * g->dw;
				double prod;

				if (ih < 0 || ih >= g->h || iw < 0 || iw >= g->w)
					continue;
				prod = (double)x[(img * g->c + ch) * in_size + ih * g->w + iw] *
				       wt[o * k + (ch * g->kh + ki) * g->kw + kj];
				s += prod;
				*mag += fabs(prod);
			}
		}
	}
	s += (b != NULL ? b[o] : 0) + (z != NULL ? z[at] : 0);
	*mag += (b != NULL ? fabs(b[o]) : 0) + (z != NULL ? fabs(z[at]) : 0);
	return act_ref(s, act);
}

/* One case: n images, m output channels, through a 2x2 stride-2 MaxPool when pool; \return the
 * number of wrong or clobbered values (0, 1). */
static int check(enum rt_dc_tiles tiles, const struct geom *g, int64_t n, int64_t m, bool bias, bool residual,
		 const struct rt_k_act_spec *act, bool pool)
{
	struct rt_k_window w;
	int64_t k = g->c * g->kh * g->kw, plane, in_size = g->h * g->w, count;
	float *x, *wt, *b, *z, *y, *packed;
	void *scratch;
	int bad = 0;

	window_of(g, &w);
	plane = pool ? (w.out[0] / 2) * (w.out[1] / 2) : w.out[0] * w.out[1];
	count = n * m * plane;
	residual &= !pool;
	CU_ASSERT_FATAL(rt_dc_applies(tiles, 2, 1, k, w.stride));
	x = rand_floats((size_t)(n * g->c * in_size));
	wt = rand_floats((size_t)(m * k));
	b = rand_floats((size_t)m);
	z = rand_floats((size_t)(n * m * w.out[0] * w.out[1]));
	y = rand_floats((size_t)count);
	packed = malloc(rt_dc_packed_floats(tiles, m, k) * sizeof(float));
	scratch = aligned_alloc(64, (rt_dc_scratch_bytes(&w, g->c) + 63) / 64 * 64);
	CU_ASSERT_FATAL(packed != NULL && scratch != NULL);
	memset(scratch, 0x7f, rt_dc_scratch_bytes(&w, g->c)); /* whatever it held before: not zeros */
	for (int i = 0; i < GUARD; i++)
		y[count + i] = GUARD_VALUE;
	rt_dc_pack_weights(tiles, wt, m, k, packed);
	rt_dc_conv(tiles, &w, n, m, g->c, x, packed, y, bias ? b : NULL, residual ? z : NULL, act, pool, scratch);
	for (int64_t img = 0; img < n && !bad; img++) {
		for (int64_t o = 0; o < m && !bad; o++) {
			for (int64_t p = 0; p < plane && !bad; p++) {
				int64_t pw_n = pool ? w.out[1] / 2 : w.out[1], oh = p / pw_n, ow = p % pw_n;
				int64_t at = (img * m + o) * plane + p;
				double want, mag;

				if (pool) { /* the max of the window's four, each activated */
					want = -INFINITY;
					mag = 0;
					for (int dy = 0; dy < 2; dy++)
						for (int dx = 0; dx < 2; dx++) {
							double mg, v = conv_ref(g, &w, x, wt, bias ? b : NULL, NULL, img, m, o,
										2 * oh + dy, 2 * ow + dx, act, &mg);

							want = v > want ? v : want;
							mag = mg > mag ? mg : mag;
						}
				} else {
					want = conv_ref(g, &w, x, wt, bias ? b : NULL, residual ? z : NULL, img, m, o, oh, ow, act,
							&mag);
				}
				if (!(fabs((double)y[at] - want) <= 1e-5 * (1.0 + mag))) {
					printf("\n  tiles %d%s c %lld %lldx%lld k %lldx%lld s %lld,%lld d %lld,%lld pads %lld %lld %lld "
					       "%lld n %lld m %lld: image %lld channel %lld pixel %lld is %.9g, want %.9g\n", (int)tiles,
					       pool ? " pooled" : "", (long long)g->c, (long long)g->h, (long long)g->w,
					       (long long)g->kh, (long long)g->kw, (long long)g->sh, (long long)g->sw,
					       (long long)g->dh, (long long)g->dw, (long long)g->pt, (long long)g->pl,
					       (long long)g->pb, (long long)g->pr, (long long)n, (long long)m, (long long)img,
					       (long long)o, (long long)p, (double)y[at], want);
					bad = 1;
				}
			}
		}
	}
	for (int i = 0; i < GUARD && !bad; i++) {
		if (y[count + i] != GUARD_VALUE) {
			printf("\n  tiles %d m %lld: float %d past the output was written\n", (int)tiles, (long long)m, i);
			bad = 1;
		}
	}
	free(x), free(wt), free(b), free(z), free(y), free(packed), free(scratch);
	return bad;
}

static const int64_t g_channels[] = { 1, 7, 8, 9, 15, 16, 17, 24, 31, 32, 33, 65 };
#define NUM_CHANNELS (sizeof(g_channels) / sizeof(g_channels[0]))

static int sweep(enum rt_dc_tiles tiles, const struct geom *geoms, size_t count, bool pool)
{
	int bad = 0;

	for (size_t i = 0; i < count; i++)
		for (size_t j = 0; j < NUM_CHANNELS; j++)
			bad += check(tiles, &geoms[i], 1 + (int64_t)(i + j) % 3, g_channels[j], (i + j) % 4 != 3,
				     (i + 2 * j) % 3 == 0, &g_acts[(i + j) % NUM_ACTS], pool);
	return bad;
}

static void test_pixel_tiles(void)
{
	static const struct geom geoms[] = {
		{ 16, 14, 14, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1 }, /* the small CNN's second conv */
		{ 3, 23, 19, 7, 7, 2, 2, 1, 1, 3, 3, 3, 3 },  /* a stem: 7x7 stride 2 pad 3 */
		{ 4, 9, 11, 3, 3, 1, 1, 1, 1, 0, 0, 0, 0 },   /* no pads: the image read as it is */
		{ 5, 10, 13, 3, 2, 2, 1, 2, 1, 1, 0, 2, 1 },  /* asymmetric pads, strides, a dilation */
		{ 64, 5, 3, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0 },   /* 1x1, 15 pixels: under two tiles */
		{ 28, 3, 3, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1 },   /* 252 deep, near RT_DC_K_MAX; 9 pixels */
		{ 2, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0 },    /* one pixel */
		{ 6, 4, 5, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1 },    /* 20 pixels: 2 past AVX2's tiles of 6 */
		{ 3, 5, 7, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1 },    /* 35 pixels: 5 past them */
	};

	CU_ASSERT_EQUAL(sweep(RT_DC_PIXELS, geoms, sizeof(geoms) / sizeof(geoms[0]), false), 0);
}

static void test_row_tiles(void)
{
	static const struct geom geoms[] = {
		{ 1, 28, 28, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1 },  /* the small CNN's first conv: rows of 28 */
		{ 2, 5, 40, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1 },   /* rows of 40: a full tile and 8 */
		{ 3, 6, 16, 3, 1, 1, 1, 1, 1, 1, 0, 1, 0 },   /* rows of exactly 16 */
		{ 1, 7, 33, 3, 3, 1, 1, 2, 2, 2, 1, 0, 3 },   /* dilations, asymmetric pads, rows of 33 */
		{ 4, 4, 5, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0 },    /* no pads */
	};

	CU_ASSERT_EQUAL(sweep(RT_DC_ROWS, geoms, sizeof(geoms) / sizeof(geoms[0]), false), 0);
}

/* Row tiles with the 2x2 MaxPool folded in: even and odd output sizes (the last row or column out of
 * every window is not computed), rows of more than 32 pixels, channel remainders against the tiles'
 * 4 and the panels' 8. */
static void test_row_tiles_pooled(void)
{
	static const struct geom geoms[] = {
		{ 1, 28, 28, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1 },  /* the small CNN's first conv and pool */
		{ 2, 7, 9, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1 },    /* 7x9: an odd row and column left out */
		{ 3, 6, 70, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1 },   /* rows of 70: 35 outputs, three tiles */
		{ 1, 5, 33, 3, 3, 1, 1, 2, 2, 2, 1, 0, 3 },   /* dilations, asymmetric pads */
		{ 2, 2, 2, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0 },    /* one window */
	};

	CU_ASSERT_EQUAL(sweep(RT_DC_ROWS, geoms, sizeof(geoms) / sizeof(geoms[0]), true), 0);
}

/*
 * Pixel tiles with the 2x2 MaxPool folded in, one tile a pooled pixel (AVX2; the AVX-512 path has no
 * such tile and must say so): the small CNN's second conv and pool, odd sizes, strides and a
 * dilation, one window, channel remainders against the tile's 16 and 8 and the blocks' 32.
 */
static void test_pixel_tiles_pooled(void)
{
	static const struct geom geoms[] = {
		{ 16, 14, 14, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1 }, /* the small CNN's second conv and pool */
		{ 3, 7, 9, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1 },    /* 7x9: an odd row and column left out */
		{ 5, 10, 13, 3, 2, 2, 1, 2, 1, 1, 0, 2, 1 },  /* asymmetric pads, strides, a dilation */
		{ 28, 4, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1 },   /* 252 deep */
		{ 2, 2, 2, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0 },    /* one window */
	};

	if (rt_cpu_isa_active() >= RT_CPU_ISA_AVX512) {
		printf("\n    (pixel tiles take no pool at %s: checked that they say so)\n",
		       rt_cpu_isa_name(rt_cpu_isa_active()));
		CU_ASSERT_FALSE(rt_dc_pool_applies(RT_DC_PIXELS));
		CU_ASSERT_TRUE(rt_dc_pool_applies(RT_DC_ROWS));
		return;
	}
	CU_ASSERT_TRUE_FATAL(rt_dc_pool_applies(RT_DC_PIXELS));
	CU_ASSERT_EQUAL(sweep(RT_DC_PIXELS, geoms, sizeof(geoms) / sizeof(geoms[0]), true), 0);
}

static void test_applies(void)
{
	int64_t one[2] = { 1, 1 }, two[2] = { 2, 2 };

	CU_ASSERT_TRUE(rt_dc_applies(RT_DC_PIXELS, 2, 1, 144, two));
	CU_ASSERT_TRUE(rt_dc_applies(RT_DC_ROWS, 2, 1, 9, one));
	CU_ASSERT_FALSE(rt_dc_applies(RT_DC_ROWS, 2, 1, 9, two));            /* rows need stride 1 */
	CU_ASSERT_FALSE(rt_dc_applies(RT_DC_PIXELS, 2, 2, 144, one));        /* grouped */
	CU_ASSERT_FALSE(rt_dc_applies(RT_DC_PIXELS, 1, 1, 9, one));          /* 1-D */
	CU_ASSERT_FALSE(rt_dc_applies(RT_DC_PIXELS, 2, 1, RT_DC_K_MAX + 1, one));
	CU_ASSERT_EQUAL(rt_dc_packed_floats(RT_DC_PIXELS, 33, 10), 2 * 32 * 10);
	CU_ASSERT_EQUAL(rt_dc_packed_floats(RT_DC_ROWS, 9, 10), 2 * 8 * 10);
}

int main(void)
{
	int status = isa_level_check();
	CU_TestInfo tests[] = {
		{"pixel tiles: channel and pixel remainders, pads, strides, dilations, epilogues", test_pixel_tiles},
		{"row tiles: channel and row remainders, pads, dilations, epilogues", test_row_tiles},
		{"row tiles with a 2x2 MaxPool: odd sizes, long rows, channel remainders", test_row_tiles_pooled},
		{"pixel tiles with a 2x2 MaxPool: odd sizes, strides, channel remainders", test_pixel_tiles_pooled},
		{"which convs, and the packed sizes", test_applies},
		CU_TEST_INFO_NULL,
	};
	CU_SuiteInfo suites[] = {
		{"conv_direct", NULL, NULL, NULL, NULL, tests},
		CU_SUITE_INFO_NULL,
	};

	if (status >= 0)
		return status;
	if (!rt_dc_available()) {
		char why[128];

		snprintf(why, sizeof(why), "the convolutions read in place need AVX2 and FMA; the kernels run at %s",
			 rt_cpu_isa_name(rt_cpu_isa_active()));
		return bw_cunit_skip(why);
	}
	return bw_cunit_run(suites);
}
