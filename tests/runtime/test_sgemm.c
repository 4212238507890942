/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Unit tests of the packed GEMMs (runtime/kernels/sgemm.c) and the bf16 GEMM on AMX tiles (amx.c),
 * called directly, against a double-precision reference: every remainder of M, N and K against the
 * path's tile and blocks (edge tiles, several k blocks, several row blocks), each epilogue, the
 * convolution packer's geometries, and the models' shapes. meson runs the program once per
 * instruction-set level (BW_CPU_ISA): each level's path is checked on any CPU that runs it, a level
 * the CPU lacks is a SKIP with the reason (isa_level.h). The bf16 cases run at the amx level, in a run
 * of their own (main).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <CUnit/Basic.h>

#include "isa_level.h"
#include "kernels/bf16.h"
#include "kernels/sgemm.h"

static unsigned int g_seed = 12345;

static float *rand_floats(size_t n)
{
	float *p = aligned_alloc(64, (n * sizeof(float) + 63) / 64 * 64 + 64);

	CU_ASSERT_FATAL(p != NULL);
	for (size_t i = 0; i < n; i++)
		p[i] = (float)rand_r(&g_seed) / (float)RAND_MAX * 2.0f - 1.0f;
	return p;
}

static double act_ref(double v, const struct rt_k_act_spec *act)
{
	switch (act->kind) {
	case RT_K_ACT_RELU: return v > 0 ? v : 0;
	case RT_K_ACT_LEAKY_RELU: return v < 0 ? v * act->a : v;
	case RT_K_ACT_CLIP: return v < act->a ? act->a : v > act->b ? act->b : v;
	case RT_K_ACT_GELU: return v * 0.5 * (1.0 + erf(v / sqrt(2.0)));
	default: return v;
	}
}

/* |got - want| <= tol * (1 + sum of |products|): the bound of a k-term float sum. */
static int compare(const float *got, const double *want, const double *mag, int64_t count, double tol,
		   const char *what)
{
	for (int64_t i = 0; i < count; i++) {
		if (!(fabs((double)got[i] - want[i]) <= tol * (1.0 + mag[i]))) {
			printf("\n  %s: element %lld is %.9g, want %.9g\n", what, (long long)i, (double)got[i], want[i]);
			return 1;
		}
	}
	return 0;
}

/* What the tiles multiply: v rounded to bf16, as a double (v itself at fp32). */
static double as_tiles(float v, bool bf16)
{
	uint32_t u = (uint32_t)rt_bf16_from_float(v) << 16;
	float f;

	if (!bf16)
		return v;
	memcpy(&f, &u, sizeof(f));
	return f;
}

static const struct rt_k_act_spec g_acts[] = {
	{ .kind = RT_K_ACT_NONE }, { .kind = RT_K_ACT_RELU }, { .kind = RT_K_ACT_LEAKY_RELU, .a = 0.1f },
	{ .kind = RT_K_ACT_CLIP, .a = -0.5f, .b = 0.75f }, { .kind = RT_K_ACT_GELU },
};
#define NUM_ACTS (sizeof(g_acts) / sizeof(g_acts[0]))

/* ---- weights on the left: C = epilogue(W . B) ------------------------------------------------------ */

static void gemm_apacked(int64_t m, int64_t n, int64_t k, const float *w, const struct rt_sg_b *src, float *c,
			 const struct rt_sg_epilogue *ep, bool bf16)
{
	void *wp, *scratch;

	if (bf16) {
		wp = aligned_alloc(64, (rt_bf16_packed_a_elems(m, k) * 2 + 63) / 64 * 64);
		scratch = aligned_alloc(64, (rt_bf16_apacked_scratch_bytes(n, k) + 63) / 64 * 64);
		CU_ASSERT_FATAL(wp != NULL && scratch != NULL);
		rt_bf16_pack_a(w, k, m, k, wp);
		rt_bf16_gemm_apacked(m, n, k, wp, src, c, n, ep, scratch);
	} else {
		wp = rand_floats(rt_sg_packed_floats(m, k));
		scratch = rand_floats(rt_sg_scratch_floats(n, k));
		rt_sg_pack_a(w, k, m, k, wp);
		rt_sg_gemm(m, n, k, wp, src, c, n, ep, scratch);
	}
	free(wp);
	free(scratch);
}

static int check_apacked(int64_t m, int64_t n, int64_t k, const struct rt_k_act_spec *act, bool bias, bool z,
			 bool bf16)
{
	float *w = rand_floats((size_t)(m * k)), *b = rand_floats((size_t)(k * n)), *rb = rand_floats((size_t)m);
	float *zz = rand_floats((size_t)(m * n)), *c = rand_floats((size_t)(m * n));
	double *want = malloc(sizeof(double) * (size_t)(m * n)), *mag = malloc(sizeof(double) * (size_t)(m * n));
	struct rt_sg_b src = { .x = b, .ldb = n };
	struct rt_sg_epilogue ep = { .row_bias = bias ? rb : NULL, .z = z ? zz : NULL, .act = *act };
	char what[128];
	int bad;

	CU_ASSERT_FATAL(want != NULL && mag != NULL);
	gemm_apacked(m, n, k, w, &src, c, &ep, bf16);
	for (int64_t i = 0; i < m; i++) {
		for (int64_t j = 0; j < n; j++) {
			double s = 0, a = 0;

			for (int64_t kk = 0; kk < k; kk++) {
				double p = as_tiles(w[i * k + kk], bf16) * as_tiles(b[kk * n + j], bf16);

				s += p;
				a += fabs(p);
			}
			s += (bias ? rb[i] : 0) + (z ? zz[i * n + j] : 0);
			want[i * n + j] = act_ref(s, act);
			mag[i * n + j] = a;
		}
	}
	snprintf(what, sizeof(what), "%s W.B m %lld n %lld k %lld act %d bias %d z %d", bf16 ? "bf16" : "fp32",
		 (long long)m, (long long)n, (long long)k, (int)act->kind, bias, z);
	bad = compare(c, want, mag, m * n, 1e-5, what);
	free(w), free(b), free(rb), free(zz), free(c), free(want), free(mag);
	return bad;
}

static void check_apacked_edges(bool bf16)
{
	/* every remainder of the tiles (6 or 8 rows, 16 or 32 columns) and k across its block of 256 */
	static const int64_t ms[] = { 1, 2, 5, 6, 7, 8, 9, 13, 16, 17, 64, 121 };
	static const int64_t ns[] = { 1, 3, 8, 15, 16, 17, 31, 32, 33, 49, 65 };
	static const int64_t ks[] = { 0, 1, 3, 9, 64, 255, 256, 257, 577 };
	int bad = 0;

	for (size_t i = 0; i < sizeof(ms) / sizeof(ms[0]); i++)
		for (size_t j = 0; j < sizeof(ns) / sizeof(ns[0]); j++)
			for (size_t l = 0; l < sizeof(ks) / sizeof(ks[0]); l++)
				bad += check_apacked(ms[i], ns[j], ks[l], &g_acts[(i + j + l) % NUM_ACTS], (i + l) % 2 == 0,
						     (j + l) % 3 == 0, bf16);
	CU_ASSERT_EQUAL(bad, 0);
}

static void test_apacked_edges(void)
{
	check_apacked_edges(false);
}

static void check_apacked_model_shapes(bool bf16)
{
	int bad = 0;

	/* ResNet-50's 1x1s and Winograd's products, and a block of columns wider than RT_SG_NC */
	bad += check_apacked(256, 3136, 64, &g_acts[1], true, false, bf16);
	bad += check_apacked(64, 196, 1024, &g_acts[0], true, true, bf16);
	bad += check_apacked(512, 49, 512, &g_acts[1], true, true, bf16);
	bad += check_apacked(16, RT_SG_NC + 40, 9, &g_acts[0], false, false, bf16);
	/* at bf16, a B too big to round whole (over 1 MiB): column blocks outside, W's rows inside */
	bad += check_apacked(40, 2100, 300, &g_acts[3], true, true, bf16);
	CU_ASSERT_EQUAL(bad, 0);
}

static void test_apacked_model_shapes(void)
{
	check_apacked_model_shapes(false);
}

/* The convolution packer: B is im2col of an image, read through the window geometry. */
static int check_conv(int64_t cin, int64_t h, int64_t wd, int64_t kh, int64_t kw, int64_t stride, int64_t pad,
		      int64_t dil, int64_t cout, bool bf16)
{
	int64_t oh = (h + 2 * pad - dil * (kh - 1) - 1) / stride + 1, ow = (wd + 2 * pad - dil * (kw - 1) - 1) / stride + 1;
	int64_t k = cin * kh * kw, n = oh * ow;
	struct rt_k_window win = { .nsp = 2 };
	float *x = rand_floats((size_t)(cin * h * wd)), *w = rand_floats((size_t)(cout * k));
	float *c = rand_floats((size_t)(cout * n));
	double *want = malloc(sizeof(double) * (size_t)(cout * n)), *mag = malloc(sizeof(double) * (size_t)(cout * n));
	struct rt_sg_epilogue ep = { .act = g_acts[0] };
	struct rt_sg_b src = { .x = x, .ldb = h * wd, .conv = &win };
	char what[160];
	int bad;

	CU_ASSERT_FATAL(want != NULL && mag != NULL);
	win.in[0] = h, win.in[1] = wd, win.out[0] = oh, win.out[1] = ow, win.kernel[0] = kh, win.kernel[1] = kw;
	win.stride[0] = win.stride[1] = stride, win.pad_begin[0] = win.pad_begin[1] = pad;
	win.pad_end[0] = win.pad_end[1] = pad, win.dilation[0] = win.dilation[1] = dil;
	gemm_apacked(cout, n, k, w, &src, c, &ep, bf16);
	for (int64_t o = 0; o < cout; o++) {
		for (int64_t p = 0; p < n; p++) {
			double s = 0, a = 0;

			for (int64_t r = 0; r < k; r++) {
				int64_t ch = r / (kh * kw), ki = r / kw % kh, kj = r % kw;
				int64_t ih = p / ow * stride - pad + ki * dil, iw = p % ow * stride - pad + kj * dil;
				double v = ih >= 0 && ih < h && iw >= 0 && iw < wd ? as_tiles(x[(ch * h + ih) * wd + iw], bf16) : 0.0;

				s += as_tiles(w[o * k + r], bf16) * v;
				a += fabs(as_tiles(w[o * k + r], bf16) * v);
			}
			want[o * n + p] = s;
			mag[o * n + p] = a;
		}
	}
	snprintf(what, sizeof(what), "%s conv cin %lld %lldx%lld k %lldx%lld s %lld p %lld d %lld", bf16 ? "bf16" : "fp32",
		 (long long)cin,
		 (long long)h, (long long)wd, (long long)kh, (long long)kw, (long long)stride, (long long)pad,
		 (long long)dil);
	bad = compare(c, want, mag, cout * n, 1e-5, what);
	free(x), free(w), free(c), free(want), free(mag);
	return bad;
}

static void check_conv_packer(bool bf16)
{
	int bad = 0;

	bad += check_conv(3, 28, 28, 3, 3, 1, 1, 1, 16, bf16);   /* rows wider than a group, padding */
	bad += check_conv(16, 14, 14, 3, 3, 1, 1, 1, 32, bf16);  /* the CNN's second conv: panels cross rows */
	bad += check_conv(4, 7, 7, 3, 3, 1, 1, 1, 8, bf16);      /* 49 columns: a last panel of 1 */
	bad += check_conv(3, 30, 30, 7, 7, 2, 3, 1, 9, bf16);    /* the stem's geometry */
	bad += check_conv(8, 15, 17, 3, 3, 2, 1, 1, 7, bf16);    /* stride 2, odd sizes */
	bad += check_conv(2, 12, 12, 3, 3, 1, 2, 2, 5, bf16);    /* dilation: the gather */
	bad += check_conv(5, 9, 40, 1, 1, 1, 0, 1, 13, bf16);    /* 1x1 */
	bad += check_conv(40, 9, 9, 3, 3, 1, 1, 1, 33, bf16);    /* k 360: two staging blocks */
	bad += check_conv(64, 41, 39, 3, 3, 1, 1, 1, 24, bf16);  /* bf16: B too big to round whole, groups of 256 */
	CU_ASSERT_EQUAL(bad, 0);
}

static void test_conv_packer(void)
{
	check_conv_packer(false);
}

/* ---- weights on the right: C = act(alpha * A . B + bias) ------------------------------------------- */

static int check_bpacked(int64_t m, int64_t n, int64_t k, const struct rt_k_act_spec *act, float alpha, bool bias,
			 bool bf16)
{
	float *a = rand_floats((size_t)(m * k)), *b = rand_floats((size_t)(k * n)), *cb = rand_floats((size_t)n);
	float *c = rand_floats((size_t)(m * n));
	double *want = malloc(sizeof(double) * (size_t)(m * n)), *mag = malloc(sizeof(double) * (size_t)(m * n));
	void *packed, *scratch;
	char what[128];
	int bad;

	CU_ASSERT_FATAL(want != NULL && mag != NULL);
	if (bf16) {
		packed = aligned_alloc(64, (rt_bf16_packed_b_elems(k, n) * 2 + 63) / 64 * 64);
		scratch = aligned_alloc(64, (rt_bf16_scratch_bytes(m, k) + 63) / 64 * 64);
		CU_ASSERT_FATAL(packed != NULL && scratch != NULL);
		/* B packed at load, or per call as attention's are: rows contiguous, or columns (B stored as
		 * its transpose) */
		switch ((m + n + k) % 3) {
		case 0: rt_bf16_pack_b(b, n, 1, k, n, packed); break;
		case 1: rt_bf16_pack_b_fast(b, n, 1, k, n, packed); break;
		default: {
			float *bt = rand_floats((size_t)(k * n));

			for (int64_t kk = 0; kk < k; kk++)
				for (int64_t j = 0; j < n; j++)
					bt[j * k + kk] = b[kk * n + j];
			rt_bf16_pack_b_fast(bt, 1, k, k, n, packed);
			free(bt);
		}
		}
		rt_bf16_gemm_bpacked(m, n, k, a, k, packed, c, n, alpha, bias ? cb : NULL, act, scratch);
	} else {
		packed = rand_floats(rt_sg_packed_b_floats(k, n));
		scratch = rand_floats(rt_sg_scratch_a_floats(k));
		rt_sg_pack_b(b, n, k, n, packed);
		rt_sg_gemm_bpacked(m, n, k, a, k, packed, c, n, alpha, bias ? cb : NULL, act, scratch);
	}
	for (int64_t i = 0; i < m; i++) {
		for (int64_t j = 0; j < n; j++) {
			double s = 0, mg = 0;

			for (int64_t kk = 0; kk < k; kk++) {
				/* at bf16 the reference multiplies the operands as the tiles hold them */
				double x = a[i * k + kk], y = b[kk * n + j];

				if (bf16) {
					uint32_t ux = (uint32_t)rt_bf16_from_float(a[i * k + kk]) << 16;
					uint32_t uy = (uint32_t)rt_bf16_from_float(b[kk * n + j]) << 16;
					float fx, fy;

					memcpy(&fx, &ux, sizeof(fx));
					memcpy(&fy, &uy, sizeof(fy));
					x = fx, y = fy;
				}
				s += x * y;
				mg += fabs(x * y);
			}
			want[i * n + j] = act_ref(alpha * s + (bias ? cb[j] : 0), act);
			mag[i * n + j] = fabs(alpha) * mg + (bias ? fabs(cb[j]) : 0);
		}
	}
	snprintf(what, sizeof(what), "%s A.W m %lld n %lld k %lld act %d", bf16 ? "bf16" : "fp32", (long long)m,
		 (long long)n, (long long)k, (int)act->kind);
	bad = compare(c, want, mag, m * n, 1e-5, what);
	free(a), free(b), free(cb), free(c), free(packed), free(scratch), free(want), free(mag);
	return bad;
}

static void check_bpacked_edges(bool bf16)
{
	/* rows across tiles (6, 8, 16, 32; AVX2's 4-row tail panels: every remainder past 6, with and
	 * without whole panels before) and RT_SG_MC_ROWS / RT_BF16_ROWS_BLOCK; k across 32, 256, 384 */
	static const int64_t ms[] = { 1, 2, 3, 4, 7, 8, 9, 14, 15, 16, 17, 31, 33, 193, 257 };
	static const int64_t ns[] = { 1, 5, 15, 16, 17, 31, 32, 33, 47, 100 };
	static const int64_t ks[] = { 0, 1, 2, 31, 32, 33, 255, 257, 385 };
	int bad = 0;

	for (size_t i = 0; i < sizeof(ms) / sizeof(ms[0]); i++)
		for (size_t j = 0; j < sizeof(ns) / sizeof(ns[0]); j++)
			for (size_t l = 0; l < sizeof(ks) / sizeof(ks[0]); l++)
				bad += check_bpacked(ms[i], ns[j], ks[l], &g_acts[(i + 2 * j + l) % NUM_ACTS],
						     (i + j) % 2 ? 1.0f : 0.5f, (j + l) % 2 == 0, bf16);
	CU_ASSERT_EQUAL(bad, 0);
}

static void test_bpacked_edges(void)
{
	check_bpacked_edges(false);
}

static void test_bpacked_model_shapes(void)
{
	int bad = 0;

	/* the transformer's projections and attention products, the MLP's layers */
	bad += check_bpacked(128, 384, 384, &g_acts[0], 1.0f, true, false);
	bad += check_bpacked(128, 1536, 384, &g_acts[4], 1.0f, true, false);
	bad += check_bpacked(128, 384, 1536, &g_acts[0], 1.0f, true, false);
	bad += check_bpacked(128, 128, 32, &g_acts[0], 0.17677669f, false, false);
	bad += check_bpacked(8, 1024, 784, &g_acts[1], 1.0f, true, false);
	CU_ASSERT_EQUAL(bad, 0);
}

static void test_bf16_edges(void)
{
	check_bpacked_edges(true);
}

static void test_bf16_model_shapes(void)
{
	int bad = 0;

	bad += check_bpacked(128, 384, 384, &g_acts[0], 1.0f, true, true);
	bad += check_bpacked(128, 1536, 384, &g_acts[4], 1.0f, true, true);
	bad += check_bpacked(128, 384, 1536, &g_acts[0], 1.0f, true, true);
	bad += check_bpacked(1, 1024, 784, &g_acts[1], 1.0f, true, true);
	bad += check_bpacked(32, 10, 1024, &g_acts[0], 1.0f, true, true);
	CU_ASSERT_EQUAL(bad, 0);
}

static void test_bf16_apacked(void)
{
	check_apacked_edges(true);
	check_apacked_model_shapes(true);
	check_conv_packer(true);
}

/* ---- activations on the left, read in place from bf16 rows (NHWC convolutions) -------------------- */

static float bf16_value(uint16_t h)
{
	uint32_t u = (uint32_t)h << 16;
	float f;

	memcpy(&f, &u, sizeof(f));
	return f;
}

/*
 * One rt_bf16_gemm_rows against a double reference: A random bf16 rows (rows_total of row_stride),
 * ntaps taps at tap_off, the grid's pixels written and nothing else (C starts as NaNs, with a guard
 * after it), the output within bf16's rounding of the reference.
 */
static int check_rows(int64_t m, int64_t n, int64_t depth, int ntaps, const int64_t *tap_off, int64_t row_stride,
		      const struct rt_bf16_grid *grid, int64_t pixels, const struct rt_k_act_spec *act, bool bias_on,
		      bool z_on)
{
	int64_t k = ntaps * depth, reach = 0, guard = 64;
	uint16_t *a, *wp, *z, *c;
	float *w = rand_floats((size_t)(k * n)), *bias = rand_floats((size_t)n), *abuf;
	double *want = calloc((size_t)(pixels * n) + 1, sizeof(double)), *mag = calloc((size_t)(pixels * n) + 1, sizeof(double));
	char what[160];
	int bad = 0;

	for (int t = 0; t < ntaps; t++)
		reach = tap_off[t] > reach ? tap_off[t] : reach;
	abuf = rand_floats((size_t)((m - 1) * row_stride + reach + depth));
	a = malloc((size_t)((m - 1) * row_stride + reach + depth) * sizeof(uint16_t));
	z = malloc((size_t)(pixels * n) * sizeof(uint16_t) + 2);
	c = malloc((size_t)(pixels * n + guard) * sizeof(uint16_t));
	wp = aligned_alloc(64, (rt_bf16_packed_b_elems(k, n) * 2 + 63) / 64 * 64);
	CU_ASSERT_FATAL(a != NULL && z != NULL && c != NULL && wp != NULL && want != NULL && mag != NULL);
	for (int64_t i = 0; i < (m - 1) * row_stride + reach + depth; i++)
		a[i] = rt_bf16_from_float(abuf[i]);
	for (int64_t i = 0; i < pixels * n; i++)
		z[i] = rt_bf16_from_float((float)rand_r(&g_seed) / (float)RAND_MAX - 0.5f);
	for (int64_t i = 0; i < pixels * n + guard; i++)
		c[i] = 0x7fc1; /* a NaN: a pixel left unwritten fails, a write past C shows in the guard */
	rt_bf16_pack_b(w, n, 1, k, n, wp);
	for (int64_t q = 0; q < m; q++) {
		int64_t image = q / grid->per_image, r = q % grid->per_image, y = r / grid->width, x = r % grid->width, px;

		if (y >= grid->valid_h || x >= grid->valid_w)
			continue;
		px = (image * grid->valid_h + y) * grid->valid_w + x;
		for (int64_t j = 0; j < n; j++) {
			double s = bias_on ? bias[j] : 0.0, mg = fabs(s);

			for (int t = 0; t < ntaps; t++) {
				for (int64_t kk = 0; kk < depth; kk++) {
					double p = bf16_value(a[q * row_stride + tap_off[t] + kk]) * as_tiles(w[(t * depth + kk) * n + j], true);

					s += p;
					mg += fabs(p);
				}
			}
			if (z_on) {
				s += bf16_value(z[px * n + j]);
				mg += fabs(bf16_value(z[px * n + j]));
			}
			want[px * n + j] = act_ref(s, act);
			mag[px * n + j] = mg + fabs(want[px * n + j]);
		}
	}
	rt_bf16_gemm_rows(m, n, &(struct rt_bf16_rows){ a, row_stride, depth, ntaps, tap_off }, grid, wp,
			  &(struct rt_bf16_epilogue){ .alpha = 1.0f, .bias = bias_on ? bias : NULL, .z = z_on ? z : NULL,
						      .act = *act, .ldc = n },
			  c);
	snprintf(what, sizeof(what), "bf16 rows m %lld n %lld depth %lld taps %d act %d bias %d z %d", (long long)m,
		 (long long)n, (long long)depth, ntaps, (int)act->kind, bias_on, z_on);
	for (int64_t i = 0; i < pixels * n && !bad; i++) {
		float got = bf16_value(c[i]);

		/* bf16's 8 bits of the result, and the products' rounding carried through the sum */
		if (!(fabs((double)got - want[i]) <= 1e-2 * (1.0 + mag[i]))) {
			printf("\n  %s: element %lld is %.6g, want %.6g\n", what, (long long)i, (double)got, want[i]);
			bad = 1;
		}
	}
	for (int64_t i = pixels * n; i < pixels * n + guard && !bad; i++) {
		if (c[i] != 0x7fc1) {
			printf("\n  %s: written past C at %lld\n", what, (long long)i);
			bad = 1;
		}
	}
	free(a);
	free(abuf);
	free(w);
	free(bias);
	free(z);
	free(c);
	free(wp);
	free(want);
	free(mag);
	return bad;
}

static void test_bf16_rows(void)
{
	static const int64_t one[] = { 0 }, two[] = { 0, 5 * 32 };
	int64_t taps[9];
	int bad = 0;

	/* dense rows, W in L2 (row blocks outside): every row remainder, column counts around 32, depth
	 * 32 and 64 (the shallow schedule, 16 rows at a time) and 96 (32 x 32 blocks) */
	for (int64_t m = 1; m <= 70; m += (m < 34 ? 1 : 9)) {
		int64_t n = m % 4 == 0 ? 16 : m % 4 == 1 ? 32 : m % 4 == 2 ? 48 : 70, depth = 32 * (1 + m % 3);
		struct rt_bf16_grid dense = { m, m, 1, m };

		bad += check_rows(m, n, depth, 1, one, depth + (m % 2 == 0 ? 0 : 32), &dense, m, &g_acts[m % 4],
				  m % 5 != 0, m % 5 != 1);
	}
	/* two taps of depth 32: the shallow schedule's second A tile from the second tap */
	bad += check_rows(40, 48, 32, 2, two, 32, &(struct rt_bf16_grid){ 40, 40, 1, 40 }, 40, &g_acts[1], true, true);
	/* a padded image's taps (two 4 x 3 images in 6 x 5 grids, 3 x 3 taps), the rows past each
	 * image's pixels computed and discarded */
	for (int ky = 0; ky < 3; ky++)
		for (int kx = 0; kx < 3; kx++)
			taps[ky * 3 + kx] = (ky * 5 + kx) * 32;
	bad += check_rows(30 + 3 * 5 + 3, 40, 32, 9, taps, 32, &(struct rt_bf16_grid){ 30, 5, 4, 3 }, 24, &g_acts[1],
			  true, true);
	/* W over 1 MiB (column blocks outside, rows in chunks): ResNet-50's last 3x3 at a batch of 1, a
	 * 7 x 7 image in a 9 x 9 grid, 61 rows (a last block of 29), n not a multiple of 32 */
	for (int ky = 0; ky < 3; ky++)
		for (int kx = 0; kx < 3; kx++)
			taps[ky * 3 + kx] = (ky * 9 + kx) * 128;
	bad += check_rows(6 * 9 + 7, 488, 128, 9, taps, 128, &(struct rt_bf16_grid){ 81, 9, 7, 7 }, 49, &g_acts[3],
			  true, true);
	bad += check_rows(49, 1040, 512, 1, one, 512, &(struct rt_bf16_grid){ 49, 49, 1, 49 }, 49, &g_acts[0], false,
			  false);
	CU_ASSERT_EQUAL(bad, 0);
}

/* The rounding the packing and the tiles share: nearest even, NaN kept, denormals to zero. */
static void test_bf16_rounding(void)
{
	static const struct { uint32_t in; uint16_t out; } cases[] = {
		{ 0x3f800000u, 0x3f80 }, /* 1.0 */
		{ 0x3f808000u, 0x3f80 }, /* halfway, even stays */
		{ 0x3f818000u, 0x3f82 }, /* halfway, odd rounds up */
		{ 0x3f808001u, 0x3f81 }, /* above halfway */
		{ 0xbf80ffffu, 0xbf81 }, /* negative */
		{ 0x7f7fffffu, 0x7f80 }, /* the largest float rounds to infinity */
		{ 0x7f800000u, 0x7f80 }, /* infinity */
		{ 0x7f800001u, 0x7fc0 }, /* a signalling NaN comes out quiet */
		{ 0x00000001u, 0x0000 }, /* denormal */
		{ 0x80400000u, 0x8000 }, /* negative denormal */
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		float f;

		memcpy(&f, &cases[i].in, sizeof(f));
		CU_ASSERT_EQUAL(rt_bf16_from_float(f), cases[i].out);
	}
}

/*
 * One head of attention on the tiles (rt_bf16_attention) against softmax(alpha * q . kᵀ + mask) . v
 * * c_alpha in double from q, k and v rounded as the tiles take them: the exponentials' rounding to
 * bf16 is what is left, 2^-9 of each product, so |error| <= 4e-3 * (sum of |p v|) + 1e-5. Rows and
 * keys past every tile and block multiple, depths past 32, operands with strides wider than the
 * row, and nothing written between y's rows.
 */
static int check_attention(int64_t m, int64_t n, int64_t d, int64_t dv, bool with_mask, float c_alpha)
{
	int64_t ldq = d + 3, ldk = d + 5, ldv = dv + 2, ldy = dv + 7;
	float *q = rand_floats((size_t)(m * ldq)), *k = rand_floats((size_t)(n * ldk)), *v = rand_floats((size_t)(n * ldv));
	float *mask = rand_floats((size_t)n), *y = rand_floats((size_t)(m * ldy)), *y0 = malloc((size_t)(m * ldy) * 4);
	uint16_t *kt = aligned_alloc(64, (rt_bf16_packed_b_elems(d, n) * 2 + 63) / 64 * 64);
	uint16_t *vt = aligned_alloc(64, (rt_bf16_packed_b_elems(n, dv) * 2 + 63) / 64 * 64);
	void *scratch = aligned_alloc(64, rt_bf16_attention_scratch_bytes(n, d));
	double *sc = malloc((size_t)n * sizeof(double));
	float alpha = 0.17f;
	char what[160];
	int bad = 0;

	for (int64_t j = 0; j < n; j++)
		mask[j] = j % 3 == 0 ? -10000.0f : mask[j];
	memcpy(y0, y, (size_t)(m * ldy) * 4);
	rt_bf16_pack_b_fast(k, 1, ldk, d, n, kt); /* kᵀ: k along a row of K, keys down */
	rt_bf16_pack_b_fast(v, ldv, 1, n, dv, vt);
	rt_bf16_attention(&(struct rt_bf16_attention){ .m = m, .n = n, .d = d, .dv = dv, .q = q, .ldq = ldq,
						       .k_tiles = kt, .v_tiles = vt, .mask = with_mask ? mask : NULL,
						       .alpha = alpha, .c_alpha = c_alpha, .y = y, .ldy = ldy },
			  scratch);
	snprintf(what, sizeof(what), "attention m %lld n %lld d %lld dv %lld mask %d", (long long)m, (long long)n,
		 (long long)d, (long long)dv, with_mask);
	for (int64_t i = 0; i < m && !bad; i++) {
		double mx = -INFINITY, sum = 0;

		for (int64_t j = 0; j < n; j++) {
			double t = 0;

			for (int64_t kk = 0; kk < d; kk++)
				t += as_tiles(q[i * ldq + kk], true) * as_tiles(k[j * ldk + kk], true);
			sc[j] = (double)alpha * t + (with_mask ? mask[j] : 0.0);
			mx = sc[j] > mx ? sc[j] : mx;
		}
		for (int64_t j = 0; j < n; j++)
			sum += (sc[j] = exp(sc[j] - mx));
		for (int64_t c = 0; c < dv && !bad; c++) {
			double want = 0, mag = 0;

			for (int64_t j = 0; j < n; j++) {
				want += sc[j] / sum * as_tiles(v[j * ldv + c], true);
				mag += sc[j] / sum * fabs(as_tiles(v[j * ldv + c], true));
			}
			want *= c_alpha;
			mag *= fabs(c_alpha);
			if (!(fabs(y[i * ldy + c] - want) <= 4e-3 * mag + 1e-5)) {
				printf("\n  %s: y[%lld][%lld] is %.9g, want %.9g\n", what, (long long)i, (long long)c,
				       (double)y[i * ldy + c], want);
				bad = 1;
			}
		}
		for (int64_t c = dv; c < ldy && !bad; c++)
			if (memcmp(&y[i * ldy + c], &y0[i * ldy + c], sizeof(float)) != 0) {
				printf("\n  %s: y[%lld][%lld], past the row, was written\n", what, (long long)i, (long long)c);
				bad = 1;
			}
	}
	free(q);
	free(k);
	free(v);
	free(mask);
	free(y);
	free(y0);
	free(kt);
	free(vt);
	free(scratch);
	free(sc);
	return bad;
}

static void test_bf16_attention(void)
{
	static const int64_t shapes[][4] = {
		{ 128, 128, 32, 32 }, /* the transformer's head */
		{ 5, 5, 4, 4 },       /* the optimizer test's */
		{ 37, 45, 40, 48 },   /* a partial row block, keys and depth past a tile, two column blocks */
		{ 64, 200, 64, 20 },  /* two row blocks, seven key blocks */
		{ 33, 1, 7, 33 },     /* one key: softmax 1 */
		{ 16, 31, 33, 17 },
	};
	int bad = 0;

	for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++)
		for (int mask = 0; mask < 2; mask++)
			bad += check_attention(shapes[i][0], shapes[i][1], shapes[i][2], shapes[i][3], mask != 0,
					       mask != 0 ? 0.5f : 1.0f);
	CU_ASSERT_EQUAL(bad, 0);
}

/*
 * Images side by side against rt_sg_gemm per image: the same sums in the same order, so equal bit
 * for bit, for images whose columns cross tiles (49, 7, 33, 1, 100 against 16 or 32) with every
 * epilogue, one k block and several; and nothing written between or past the images' outputs.
 */
static int check_images_in(int64_t m, int64_t cols, int64_t images, int64_t k, const struct rt_k_act_spec *act,
			   bool bias, bool z, const struct rt_k_window *win, int64_t in_floats)
{
	const int64_t guard = 40, x_stride = in_floats + 5, c_stride = m * cols + guard; /* gaps between images */
	float *w = rand_floats((size_t)(m * k)), *x = rand_floats((size_t)(images * x_stride));
	float *zz = rand_floats((size_t)(images * c_stride)), *rb = rand_floats((size_t)m);
	float *c = rand_floats((size_t)(images * c_stride + guard)), *ref = malloc(sizeof(float) * (size_t)(m * cols));
	float *wp = rand_floats(rt_sg_packed_floats(m, k));
	float *scratch = rand_floats(rt_sg_images_scratch_floats(cols, images, k));
	float *before = malloc(sizeof(float) * (size_t)(images * c_stride + guard));
	struct rt_sg_b src = { .x = x, .ldb = win != NULL ? win->in[0] * win->in[1] : cols, .conv = win };
	struct rt_sg_epilogue ep = { .row_bias = bias ? rb : NULL, .z = z ? zz : NULL, .act = *act };
	int bad = 0;

	CU_ASSERT_FATAL(ref != NULL && before != NULL);
	memcpy(before, c, sizeof(float) * (size_t)(images * c_stride + guard));
	rt_sg_pack_a(w, k, m, k, wp);
	rt_sg_gemm_images(m, cols, images, k, wp, &src, x_stride, c, c_stride, &ep, scratch);
	for (int64_t i = 0; i < images && bad == 0; i++) {
		struct rt_sg_b one = { .x = x + i * x_stride, .ldb = src.ldb, .conv = win };
		struct rt_sg_epilogue ep1 = { .row_bias = ep.row_bias, .z = z ? zz + i * c_stride : NULL, .act = *act };

		rt_sg_gemm(m, cols, k, wp, &one, ref, cols, &ep1, scratch);
		if (memcmp(ref, c + i * c_stride, sizeof(float) * (size_t)(m * cols)) != 0) {
			printf("\n  images side by side: m %lld cols %lld images %lld k %lld act %d: image %lld differs from "
			       "rt_sg_gemm's\n", (long long)m, (long long)cols, (long long)images, (long long)k,
			       (int)act->kind, (long long)i);
			bad = 1;
		}
		if (memcmp(before + i * c_stride + m * cols, c + i * c_stride + m * cols, sizeof(float) * (size_t)guard)) {
			printf("\n  images side by side: m %lld cols %lld images %lld k %lld: written past image %lld\n",
			       (long long)m, (long long)cols, (long long)images, (long long)k, (long long)i);
			bad = 1;
		}
	}
	free(w), free(x), free(zz), free(rb), free(c), free(ref), free(wp), free(scratch), free(before);
	return bad;
}

static int check_images(int64_t m, int64_t cols, int64_t images, int64_t k, const struct rt_k_act_spec *act,
			bool bias, bool z)
{
	return check_images_in(m, cols, images, k, act, bias, z, NULL, k * cols);
}

/* Images of a convolution's geometry side by side (B packed through im2col). */
static int check_images_conv(int64_t m, int64_t cin, int64_t h, int64_t kh, int64_t stride, int64_t pad,
			     int64_t images, const struct rt_k_act_spec *act)
{
	struct rt_k_window win = { .nsp = 2 };
	int64_t o = (h + 2 * pad - kh) / stride + 1;

	win.in[0] = win.in[1] = h, win.out[0] = win.out[1] = o, win.kernel[0] = win.kernel[1] = kh;
	win.stride[0] = win.stride[1] = stride, win.pad_begin[0] = win.pad_begin[1] = pad;
	win.pad_end[0] = win.pad_end[1] = pad, win.dilation[0] = win.dilation[1] = 1;
	return check_images_in(m, o * o, images, cin * kh * kh, act, true, images % 2 == 0, &win, cin * h * h);
}

static void test_images(void)
{
	static const int64_t ms[] = { 1, 7, 8, 17, 64 };
	static const int64_t cols[] = { 1, 7, 33, 49, 100 };
	static const int64_t images[] = { 1, 2, 3, 8 };
	static const int64_t ks[] = { 1, 64, 577 };
	int bad = 0, n = 0;

	for (size_t i = 0; i < sizeof(ms) / sizeof(ms[0]); i++)
		for (size_t j = 0; j < sizeof(cols) / sizeof(cols[0]); j++)
			for (size_t b = 0; b < sizeof(images) / sizeof(images[0]); b++)
				for (size_t l = 0; l < sizeof(ks) / sizeof(ks[0]); l++, n++)
					bad += check_images(ms[i], cols[j], images[b], ks[l], &g_acts[n % NUM_ACTS], n % 2 == 0,
							    n % 3 != 0);
	/* ResNet-50's last stage at batch 8: 512 -> 2048 at 7 x 7 with the residual, and 2048 -> 512 */
	bad += check_images(2048, 49, 8, 512, &g_acts[1], true, true);
	bad += check_images(512, 49, 8, 2048, &g_acts[1], true, false);
	/* through im2col: ResNet-50's strided convs into 7 x 7 and 14 x 14, odd sizes, "same" 3x3 */
	bad += check_images_conv(64, 32, 14, 3, 2, 1, 4, &g_acts[1]);   /* 3x3 s2 -> 7x7 */
	bad += check_images_conv(40, 48, 13, 1, 2, 0, 3, &g_acts[0]);   /* 1x1 s2 -> 7x7 */
	bad += check_images_conv(17, 8, 28, 3, 2, 1, 2, &g_acts[2]);    /* 3x3 s2 -> 14x14 */
	bad += check_images_conv(9, 5, 7, 3, 1, 1, 5, &g_acts[3]);      /* 3x3 s1 same: the masked packer */
	bad += check_images_conv(33, 70, 9, 3, 2, 0, 8, &g_acts[4]);    /* k 630: three k blocks */
	bad += check_images_conv(8, 3, 5, 5, 1, 2, 3, &g_acts[1]);      /* 25 columns: every panel crosses */
	CU_ASSERT_EQUAL(bad, 0);
}

/*
 * The bf16 cases need the amx level, which most CPUs lack, and CUnit 2.1-3 cannot skip one case: they
 * are a run of their own (`test_sgemm bf16`, meson's runtime-sgemm-bf16) that reports SKIP with the
 * reason where bf16 does not run, so that a plain run never passes cases it did not execute.
 */
int main(int argc, char **argv)
{
	bool bf16_run = argc > 1 && strcmp(argv[1], "bf16") == 0;
	int status;
	CU_TestInfo tests[] = {
		{"W.B: every tile and block remainder, each epilogue", test_apacked_edges},
		{"W.B: ResNet-50's and Winograd's shapes", test_apacked_model_shapes},
		{"W.B from an image: the convolution packer's geometries", test_conv_packer},
		{"W.B over images side by side: rt_sg_gemm's per image, bit for bit", test_images},
		{"A.W: every tile and block remainder, alpha, bias, each activation", test_bpacked_edges},
		{"A.W: the transformer's and the MLP's shapes", test_bpacked_model_shapes},
		{"bf16 rounding", test_bf16_rounding},
		CU_TEST_INFO_NULL,
	};
	CU_TestInfo bf16_tests[] = {
		{"bf16 A.W on AMX tiles: every remainder", test_bf16_edges},
		{"bf16 A.W on AMX tiles: the models' shapes", test_bf16_model_shapes},
		{"bf16 W.B and convs on AMX tiles: remainders, shapes, geometries", test_bf16_apacked},
		{"bf16 A.W with A read in place from bf16 rows (NHWC convs): remainders, taps, grids", test_bf16_rows},
		{"bf16 attention on AMX tiles: the transformer's head, remainders, strides", test_bf16_attention},
		CU_TEST_INFO_NULL,
	};
	CU_SuiteInfo suites[] = {
		{"sgemm", NULL, NULL, NULL, NULL, tests},
		CU_SUITE_INFO_NULL,
	};
	CU_SuiteInfo bf16_suites[] = {
		{"sgemm: bf16 on AMX tiles", NULL, NULL, NULL, NULL, bf16_tests},
		CU_SUITE_INFO_NULL,
	};
	char why[128];

	if (argc > 1 && !bf16_run) {
		fprintf(stderr, "%s: unknown argument '%s' (expected none, or bf16)\n", argv[0], argv[1]);
		return 2;
	}
	status = isa_level_check();
	if (status >= 0)
		return status;
	if (bf16_run) {
		if (rt_bf16_available())
			return bw_cunit_run(bf16_suites);
		snprintf(why, sizeof(why), "bf16 runs at the amx level; the kernels run at %s (this CPU runs up to %s)",
			 rt_cpu_isa_name(rt_cpu_isa_active()), rt_cpu_isa_name(rt_cpu_isa_detected()));
		return bw_cunit_skip(why);
	}
	if (!rt_sg_available()) {
		snprintf(why, sizeof(why), "the packed GEMMs need AVX2 and FMA; the kernels run at %s",
			 rt_cpu_isa_name(rt_cpu_isa_active()));
		return bw_cunit_skip(why);
	}
	printf("not in this run: the bf16 cases (their own test: %s bf16)\n", argv[0]);
	return bw_cunit_run(suites);
}
