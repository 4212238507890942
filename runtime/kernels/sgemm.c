/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * batchwire's SGEMM for convolutions and FusedGemm (sgemm.h): the GotoBLAS/BLIS structure with a
 * micro-kernel per instruction set (6 x 16 on AVX2/FMA, 8 x 32 on AVX-512), and three things
 * OpenBLAS's cblas_sgemm cannot do from outside:
 *
 *  - the weights (A) are packed into the micro-kernel's panels once, at load, by rt_graph_optimize,
 *    where OpenBLAS packs them again on every call (its sgemm_itcopy: 4 % of ResNet-50's time);
 *  - B is packed straight from the NCHW image through the convolution's window geometry, so the
 *    im2col matrix is never written and then copied again into panels (im2col plus OpenBLAS's
 *    sgemm_oncopy: 13 % of ResNet-50's time), and the scratch is one packed block, not K x N;
 *  - the bias, the residual and the activation are applied to each tile in registers as it is
 *    stored for the last time, instead of a pass to write the bias before and one for the
 *    activation after (3 %).
 *
 * Blocking: for each block of RT_SG_NC columns and of up to RT_SG_KC rows of k, B's block is packed
 * (512 KiB at most: it stays in L2); for each block of RT_SG_MC rows of A, each mr-row micro-panel
 * of A (L1) meets every nr-column micro-panel of B's block in turn, so C and a residual are read and
 * written along 8 rows at a time, streams the prefetchers follow. Goto's order (B's blocks of 2048
 * columns, 2 MiB, in L3; a B micro-panel in L1 meeting every A panel, C's tiles 120 rows apart) was
 * 5 % slower on ResNet-50 at batch 1 on a Sapphire Rapids core, its 56x56 1x1 convs 10-20 %: their
 * packed B spilled out of L2, and a residual read across 120 rows at once. k is split into blocks
 * of equal size (576 = 3 x 192, not 256 + 256 + 64), as the packed A's layout records.
 *
 * The AVX2 micro-kernel keeps 12 accumulators (6 rows x 2 registers of 8), broadcasts one A value
 * per row and loads 16 B values per k: 12 FMAs per 2 loads and 6 broadcasts, no spills. Its edge
 * tiles (fewer than 6 rows or 16 columns) go through a 6 x 16 buffer on the stack. FusedGemm's rows
 * of activations that 6-row panels would leave part empty go to 4-row panels (kernel_4x16): a
 * batch of 8 is 4 + 4 rows, not 6 + 2 computed as 12 (the MLP at batch 8 on an AMD EPYC: 631 ->
 * 452-478 us). The AVX-512 one (kernel_avx512) is the same shape at twice the width and a third
 * more rows, with masked edges.
 * The path (struct sg_path) is chosen from rt_cpu_isa_active(), once per process (isa.c), so that
 * the layouts packed at load and the kernels agree; below AVX2 rt_sg_available() is false and the
 * optimizer packs nothing (the conv kernel keeps the OpenBLAS path).
 */
#include <immintrin.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "act256.h"
#include "act512.h"
#include "graph.h"
#include "sgemm.h"
/* vecmath.h's GELU at AVX2's width, for the 6x16 tiles' epilogue: its helpers built for AVX2 and FMA,
 * as vecmath.c's x86-64-v3 variant (the same bits), and callable with ymm values (clang refuses a
 * 32-byte vector passed to a function without AVX, even one always inlined) */
#define VL 8
#ifdef __clang__ /* (the fuzzers build the runtime's sources with clang) */
#pragma clang attribute push(__attribute__((target("avx2,fma"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma")
#endif
#include "vecmath.h"
#ifdef __clang__
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

/*
 * The micro-kernels, which the per-path drivers call through their path's table: forced inline, so
 * that the call (direct once the table is a constant) is inlined into the tile loop. Not at -Og
 * (BW_OPT_DEBUG, meson.build), where GCC would refuse to build them.
 */
#ifdef BW_OPT_DEBUG
#define SG_KERNEL_INLINE static inline
#else
#define SG_KERNEL_INLINE static inline __attribute__((always_inline))
#endif

#define SG_TARGET __attribute__((target("avx2,fma")))
#define SG512_TARGET __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx2,fma")))

struct tile_out;

/* A micro-kernel: C's tile (mr <= path->mr rows, nr <= path->nr columns) from kc steps of a packed
 * A panel (kc x path->mr) and a packed B panel (kc x path->nr). */
typedef void sg_kernel_fn(int64_t kc, const float *a, const float *b, float *c, int64_t ldc, int64_t mr, int64_t nr,
			  const struct tile_out *t);

/*
 * The last column panel of a block when it is at most SG_NARROW_MAX wide, for cnt <= SG_NARROW_ROWS
 * row panels at once (a_stride floats apart): C's tiles c[p] (mr[p] rows), their epilogues t[p].
 */
typedef void sg_narrow_fn(int64_t kc, const float *a, int64_t a_stride, int cnt, const float *b, int64_t nr,
			  float *const *c, int64_t ldc, const int64_t *mr, const struct tile_out *t);

#define SG_NARROW_MAX 4  /* columns */
#define SG_NARROW_ROWS 8 /* row panels a call */

struct sg_images;
/* The convolutions' driver (sg_gemm_body) compiled for a path, its micro-kernel inlined. */
typedef void sg_run_fn(int64_t m, int64_t n, int64_t k, const float *ap, const struct rt_sg_b *b,
		       const struct sg_images *im, float *c, int64_t ldc, const struct rt_sg_epilogue *ep, float *bbuf);

/*
 * What a path fixes: its tile, and with it the layout of every packed operand (weights packed at
 * load included), and its k blocks. The path is the instruction set's (rt_cpu_isa_active), chosen
 * once per process before the first model loads, so weights packed at load always meet the kernel
 * that reads them.
 */
struct sg_path {
	const char *name;
	int mr, nr;       /* the tile: rows of A per panel, columns of B per panel */
	int64_t kc, kc_b; /* most k per block: convolutions (A packed at load), FusedGemm (B packed at load) */
	sg_kernel_fn *kernel;
	sg_run_fn *run;   /* rt_sg_gemm and rt_sg_gemm_images: the driver with kernel inlined */
	int tail_mr;      /* rt_sg_gemm_bpacked: rows of the panels that take a block's last rows, or 0 */
	sg_kernel_fn *tail_kernel;
	sg_narrow_fn *narrow; /* the convolutions' narrow last column panel, or NULL: the kernel's */
};

#define SG_TAIL_MR 4 /* AVX2's tail panels: 8 rows as 4 + 4 */

static sg_kernel_fn kernel_6x16, kernel_4x16, kernel_avx512;
static sg_narrow_fn narrow_avx2, narrow_avx512;
static sg_run_fn sg_gemm_avx2, sg_gemm_avx512;

/*
 * AVX2: 6 x 16, two ymm per row, 12 accumulators. AVX-512: 8 x 32, two zmm per row, 16
 * accumulators, 2 B loads and 8 broadcasts per 16 FMAs; its B panel (32 KiB at k 256) stays in
 * SPR's 48 KiB L1 with an A panel beside it, which FusedGemm's 384-deep block (48 KiB) would not.
 */
static const struct sg_path g_sg_avx2 = {
	"avx2 6x16", RT_SG_MR, RT_SG_NR, RT_SG_KC, RT_SG_KC_B, kernel_6x16, sg_gemm_avx2, SG_TAIL_MR, kernel_4x16,
	narrow_avx2,
};
static const struct sg_path g_sg_avx512 = {
	"avx512 8x32", 8, 32, RT_SG_KC, RT_SG_KC, kernel_avx512, sg_gemm_avx512, 0, NULL, narrow_avx512,
};

static const struct sg_path *sg_path(void)
{
	return rt_cpu_isa_active() >= RT_CPU_ISA_AVX512 ? &g_sg_avx512 : &g_sg_avx2;
}

bool rt_sg_available(void)
{
	return rt_cpu_isa_active() >= RT_CPU_ISA_AVX2;
}

const char *rt_sg_path_name(void)
{
	return rt_sg_available() ? sg_path()->name : "none";
}

/* k in equal blocks of at most kc_max (RT_SG_KC for convolutions, RT_SG_KC_B for FusedGemm). */
static int64_t k_blocks(int64_t k, int64_t kc_max)
{
	int64_t nb = (k + kc_max - 1) / kc_max;

	return nb > 0 ? (k + nb - 1) / nb : 1;
}

static int64_t k_block(const struct sg_path *sp, int64_t k)
{
	return k_blocks(k, sp->kc);
}

static int64_t k_block_b(const struct sg_path *sp, int64_t k)
{
	return k_blocks(k, sp->kc_b);
}

bool rt_sg_one_block(int64_t k)
{
	return rt_sg_available() && k_block(sg_path(), k) >= k;
}

static int64_t panels(const struct sg_path *sp, int64_t m)
{
	return (m + sp->mr - 1) / sp->mr;
}

static int64_t col_panels(const struct sg_path *sp, int64_t n)
{
	return (n + sp->nr - 1) / sp->nr;
}

size_t rt_sg_packed_floats(int64_t m, int64_t k)
{
	const struct sg_path *sp = sg_path();

	return (size_t)(panels(sp, m) * sp->mr * k);
}

/* For each k block (at k0, kc deep): for each mr-row panel: kc x mr, k-major; rows past m are 0. */
void rt_sg_pack_a(const float *a, int64_t lda, int64_t m, int64_t k, float *ap)
{
	const struct sg_path *sp = sg_path();
	int64_t mp = panels(sp, m), kcb = k_block(sp, k), mr = sp->mr;

	for (int64_t k0 = 0; k0 < k; k0 += kcb) {
		int64_t kc = k - k0 < kcb ? k - k0 : kcb;

		for (int64_t p = 0; p < mp; p++) {
			float *dst = ap + k0 * mp * mr + p * kc * mr;

			for (int64_t kk = 0; kk < kc; kk++) {
				for (int64_t r = 0; r < mr; r++) {
					int64_t row = p * mr + r;

					dst[kk * mr + r] = row < m ? a[row * lda + k0 + kk] : 0.0f;
				}
			}
		}
	}
}

size_t rt_sg_scratch_floats(int64_t n, int64_t k)
{
	const struct sg_path *sp = sg_path();
	int64_t nc = n < RT_SG_NC ? n : RT_SG_NC;

	return (size_t)(k_block(sp, k) * col_panels(sp, nc) * sp->nr);
}

/* ---- packing B ----------------------------------------------------------------------------------- */

/*
 * Rows k0..k0+kc, columns j0..j0+nc of a row-major matrix, into nr-column panels (zero-padded).
 * A row at a time across every panel: the source is read in order, one page after the next, where
 * a panel at a time reads kc rows a stride apart (an image's channels: 12 KiB apart at 56 x 56),
 * a page each, kc pages per panel.
 */
SG_TARGET static void pack_b_matrix(const struct rt_sg_b *b, int64_t k0, int64_t kc, int64_t j0, int64_t nc,
				    int64_t nr, float *bp)
{
	int64_t whole = nc / nr;

	for (int64_t kk = 0; kk < kc; kk++) {
		const float *src = b->x + (k0 + kk) * b->ldb + j0;
		float *dst = bp + kk * nr;

		for (int64_t p = 0; p < whole; p++, src += nr, dst += kc * nr)
			for (int64_t h = 0; h < nr; h += 8)
				_mm256_storeu_ps(dst + h, _mm256_loadu_ps(src + h));
	}
	if (whole * nr == nc)
		return;
	/* the last panel, part full */
	bp += whole * kc * nr;
	for (int64_t kk = 0; kk < kc; kk++) {
		const float *src = b->x + (k0 + kk) * b->ldb + j0 + whole * nr;

		for (int64_t jj = 0; jj < nr; jj++)
			bp[kk * nr + jj] = jj < nc - whole * nr ? src[jj] : 0.0f;
	}
}

/* Images side by side (rt_sg_gemm_images): column j of the GEMM is column j % cols of image j / cols. */
struct sg_images {
	int64_t cols;
	int64_t x_stride, c_stride; /* floats from one image's B (C, z) to the next's */
};

/* pack_b_matrix's panels over images side by side: a panel's columns may come from two images. */
SG_TARGET static void pack_b_images(const struct rt_sg_b *b, const struct sg_images *im, int64_t k0, int64_t kc,
				    int64_t j0, int64_t nc, int64_t nr, float *bp)
{
	for (int64_t j = 0; j < nc; j += nr, bp += kc * nr) {
		int64_t w = nc - j < nr ? nc - j : nr;

		for (int64_t done = 0; done < nr;) {
			int64_t col = j0 + j + done, cc = col % im->cols, len;
			const float *src;

			if (done >= w) {
				for (int64_t kk = 0; kk < kc; kk++)
					for (int64_t jj = done; jj < nr; jj++)
						bp[kk * nr + jj] = 0.0f;
				break;
			}
			len = im->cols - cc < w - done ? im->cols - cc : w - done;
			src = b->x + (col / im->cols) * im->x_stride + k0 * b->ldb + cc;
			for (int64_t kk = 0; kk < kc; kk++, src += b->ldb) {
				float *d = bp + kk * nr + done;

				for (int64_t jj = 0; jj < len; jj++)
					d[jj] = src[jj];
			}
			done += len;
		}
	}
}

#define PACK_RUNS_MAX 3 /* rows 3 or more columns wide: 8 lanes touch at most 3 of them */
#define PACK_GROUP 16   /* columns the im2col packer makes at once */

/*
 * Stride 1 with outputs as wide as the input rows (a "same" convolution: 3x3 pad 1, 5x5 pad 2):
 * output column o = oh * ow_n + ow under kernel offset (ki, kj) reads input value o + shift(ki, kj)
 * of its channel, so a group's 16 columns of a row of the matrix are one contiguous load whatever
 * output rows they cross, with the lanes whose input row or column lies in the padding masked off
 * (not read: zero). Which lanes those are depends on the group and the kernel offset only, so a
 * group's masks are made once for each of the kh * kw offsets, and each of its kc rows is then a
 * masked load and a store. The general path below takes a run per output row a group touches, and
 * on the small CNN's 14- and 28-wide images nearly every group crosses one: this path packs those
 * convolutions 5x faster.
 */
#define PACK_TAPS_MAX 49 /* kernel offsets the same-width path makes masks for: up to 7x7 */

struct pack_same {
	int64_t shift[RT_SG_KC]; /* per row of the block: its channel's offset plus shift(ki, kj) */
	int tap[RT_SG_KC];       /* per row: its kernel offset, ki * kw + kj */
	int64_t oh, ow;          /* the output position of the next group's first column */
};

static bool pack_same_applies(const struct rt_k_window *w)
{
	return w->stride[0] == 1 && w->stride[1] == 1 && w->out[1] == w->in[1] &&
	       w->kernel[0] * w->kernel[1] <= PACK_TAPS_MAX;
}

static void pack_same_rows(const struct rt_k_window *w, int64_t k0, int64_t kc, int64_t j0, struct pack_same *ps)
{
	int64_t kh = w->kernel[0], kw = w->kernel[1], iw_n = w->in[1], plane = w->in[0] * iw_n;

	/* row k0 + kk is (channel, ki, kj), counted up without a division per row */
	for (int64_t kk = 0, ch = k0 / (kh * kw), ki = k0 / kw % kh, kj = k0 % kw; kk < kc; kk++) {
		ps->shift[kk] = ch * plane + (ki * w->dilation[0] - w->pad_begin[0]) * iw_n + kj * w->dilation[1] -
				w->pad_begin[1];
		ps->tap[kk] = (int)(ki * kw + kj);
		if (++kj == kw) {
			kj = 0;
			if (++ki == kh) {
				ki = 0;
				ch++;
			}
		}
	}
	ps->oh = j0 / w->out[1];
	ps->ow = j0 % w->out[1];
}

static void pack_same_next_group(const struct rt_k_window *w, struct pack_same *ps)
{
	for (ps->ow += PACK_GROUP; ps->ow >= w->out[1]; ps->oh++)
		ps->ow -= w->out[1];
}

/*
 * The masks are made with vector compares on the lanes' output rows and columns: per group, kh
 * row masks, kw column masks and their kh * kw products. Made bit by bit they cost more than the
 * rows they mask on the first conv of a network, whose block is only kh * kw rows deep.
 */
SG_TARGET static void pack_b_same_avx2(const struct rt_sg_b *b, int64_t k0, int64_t kc, int64_t j0, int64_t nc,
				       int64_t nr, float *bp)
{
	const struct rt_k_window *w = b->conv;
	const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), one = _mm256_set1_epi32(1);
	const __m256i ow_n = _mm256_set1_epi32((int)w->out[1]);
	int64_t kh = w->kernel[0], kw = w->kernel[1];
	struct pack_same ps;
	__m256i vmask[PACK_TAPS_MAX][2];

	pack_same_rows(w, k0, kc, j0, &ps);
	for (int64_t j = 0, padded = (nc + nr - 1) / nr * nr; j < padded; j += PACK_GROUP) {
		const float *x = b->x + j0 + j;
		float *gp = bp + j / nr * kc * nr + j % nr; /* the group's first column in its panel */

		for (int h = 0; h < 2; h++) {
			__m256i ohs = _mm256_set1_epi32((int)ps.oh);
			__m256i ows = _mm256_add_epi32(_mm256_set1_epi32((int)ps.ow + 8 * h), lane);
			__m256i live = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(nc - j - 8 * h)), lane), wrap;
			__m256i rows[PACK_TAPS_MAX], cols[PACK_TAPS_MAX];

			/* columns past the end of an output row are the next row's */
			for (;;) {
				wrap = _mm256_cmpgt_epi32(ows, _mm256_sub_epi32(ow_n, one));
				if (_mm256_testz_si256(wrap, wrap))
					break;
				ows = _mm256_sub_epi32(ows, _mm256_and_si256(wrap, ow_n));
				ohs = _mm256_sub_epi32(ohs, wrap); /* wrap lanes are -1 */
			}
			for (int64_t ki = 0; ki < kh; ki++) {
				int ih0 = (int)(ki * w->dilation[0] - w->pad_begin[0]);

				rows[ki] = _mm256_andnot_si256(_mm256_cmpgt_epi32(_mm256_set1_epi32(-ih0), ohs),
							       _mm256_cmpgt_epi32(_mm256_set1_epi32((int)w->in[0] - ih0), ohs));
			}
			for (int64_t kj = 0; kj < kw; kj++) {
				int woff = (int)(kj * w->dilation[1] - w->pad_begin[1]);

				cols[kj] = _mm256_and_si256(live, _mm256_andnot_si256(
					_mm256_cmpgt_epi32(_mm256_set1_epi32(-woff), ows),
					_mm256_cmpgt_epi32(_mm256_set1_epi32((int)w->in[1] - woff), ows)));
			}
			for (int64_t ki = 0; ki < kh; ki++) {
				for (int64_t kj = 0; kj < kw; kj++)
					vmask[ki * kw + kj][h] = _mm256_and_si256(rows[ki], cols[kj]);
			}
		}
		pack_same_next_group(w, &ps);
		for (int64_t kk = 0; kk < kc; kk++) {
			const float *src = x + ps.shift[kk]; /* may point outside the image: masked lanes are not read */

			_mm256_storeu_ps(gp + kk * nr, _mm256_maskload_ps(src, vmask[ps.tap[kk]][0]));
			_mm256_storeu_ps(gp + kk * nr + 8, _mm256_maskload_ps(src + 8, vmask[ps.tap[kk]][1]));
		}
	}
}

SG512_TARGET static void pack_b_same_avx512(const struct rt_sg_b *b, int64_t k0, int64_t kc, int64_t j0,
					    int64_t nc, int64_t nr, float *bp)
{
	const struct rt_k_window *w = b->conv;
	const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
	const __m512i ow_n = _mm512_set1_epi32((int)w->out[1]);
	int64_t kh = w->kernel[0], kw = w->kernel[1];
	struct pack_same ps;
	__mmask16 mask[PACK_TAPS_MAX];

	pack_same_rows(w, k0, kc, j0, &ps);
	for (int64_t j = 0, padded = (nc + nr - 1) / nr * nr; j < padded; j += PACK_GROUP) {
		const float *x = b->x + j0 + j;
		float *gp = bp + j / nr * kc * nr + j % nr;
		__m512i ohs = _mm512_set1_epi32((int)ps.oh), ows = _mm512_add_epi32(_mm512_set1_epi32((int)ps.ow), lane);
		__mmask16 live = _mm512_cmpgt_epi32_mask(_mm512_set1_epi32((int)(nc - j)), lane), wrap, rows[PACK_TAPS_MAX];

		while ((wrap = _mm512_cmpge_epi32_mask(ows, ow_n)) != 0) {
			ows = _mm512_mask_sub_epi32(ows, wrap, ows, ow_n);
			ohs = _mm512_mask_add_epi32(ohs, wrap, ohs, _mm512_set1_epi32(1));
		}
		for (int64_t ki = 0; ki < kh; ki++) {
			int ih0 = (int)(ki * w->dilation[0] - w->pad_begin[0]);

			rows[ki] = _mm512_cmpge_epi32_mask(ohs, _mm512_set1_epi32(-ih0)) &
				   _mm512_cmplt_epi32_mask(ohs, _mm512_set1_epi32((int)w->in[0] - ih0));
		}
		for (int64_t kj = 0; kj < kw; kj++) {
			int woff = (int)(kj * w->dilation[1] - w->pad_begin[1]);
			__mmask16 col = live & _mm512_cmpge_epi32_mask(ows, _mm512_set1_epi32(-woff)) &
					_mm512_cmplt_epi32_mask(ows, _mm512_set1_epi32((int)w->in[1] - woff));

			for (int64_t ki = 0; ki < kh; ki++)
				mask[ki * kw + kj] = rows[ki] & col;
		}
		pack_same_next_group(w, &ps);
		for (int64_t kk = 0; kk < kc; kk++)
			_mm512_storeu_ps(gp + kk * nr, _mm512_maskz_loadu_ps(mask[ps.tap[kk]], x + ps.shift[kk]));
	}
}

/*
 * The same block of the im2col matrix of a 2-D convolution, read from the image: row r of the
 * matrix is (channel, kernel row, kernel column), column o is (output row, output column). Per
 * panel of 16 columns and row r, the usual case is one output row whose 16 inputs are all inside
 * the image: two loads and two stores at stride 1, two loads and a shuffle more at stride 2. Panels
 * that cross an output row or touch the padding take, at stride 1, a masked load per row they touch
 * (AVX's vmaskmovps reads only the lanes inside the image), and otherwise a gather. Per-row geometry
 * is computed once per block (kc <= RT_SG_KC). A path whose panels are wider (nr 32) gets each
 * panel as groups of 16 columns side by side, and the groups of its last panel past nc as zeros.
 */
SG_TARGET static void pack_b_im2col(const struct rt_sg_b *b, int64_t k0, int64_t kc, int64_t j0, int64_t nc,
				    int64_t nr, float *bp)
{
	const struct rt_k_window *w = b->conv;
	int64_t ih_n = w->in[0], iw_n = w->in[1], ow_n = w->out[1], kh = w->kernel[0], kw = w->kernel[1];
	int64_t sh = w->stride[0], sw = w->stride[1], plane = ih_n * iw_n;
	int64_t chan[RT_SG_KC], ih0[RT_SG_KC], woff[RT_SG_KC], lo[RT_SG_KC], hi[RT_SG_KC];

	if (pack_same_applies(w)) {
		(rt_cpu_isa_active() >= RT_CPU_ISA_AVX512 ? pack_b_same_avx512 : pack_b_same_avx2)(b, k0, kc, j0, nc, nr, bp);
		return;
	}
	for (int64_t kk = 0; kk < kc; kk++) {
		int64_t r = k0 + kk, ki = r / kw % kh, kj = r % kw, last;

		chan[kk] = r / (kh * kw) * plane;
		ih0[kk] = ki * w->dilation[0] - w->pad_begin[0];
		woff[kk] = kj * w->dilation[1] - w->pad_begin[1];
		last = iw_n - 1 - woff[kk];
		lo[kk] = woff[kk] >= 0 ? 0 : (-woff[kk] + sw - 1) / sw;
		hi[kk] = last < 0 ? 0 : last / sw + 1;
		hi[kk] = hi[kk] < ow_n ? hi[kk] : ow_n;
		lo[kk] = lo[kk] < hi[kk] ? lo[kk] : hi[kk];
	}
	for (int64_t j = 0, padded = (nc + nr - 1) / nr * nr; j < padded; j += PACK_GROUP) {
		int64_t o0 = j0 + j, cnt = nc - j < PACK_GROUP ? nc - j : PACK_GROUP, oh = o0 / ow_n, ow = o0 % ow_n;
		float *gp = bp + j / nr * kc * nr + j % nr; /* the group's first column in its panel */
		bool one_row = cnt == PACK_GROUP && ow + PACK_GROUP <= ow_n;
		int32_t lane_oh[PACK_GROUP], lane_ow[PACK_GROUP], lane_live[PACK_GROUP];
		__m256i ohs[2], ows[2], live[2];
		/* at stride 1, each half's lanes as runs of consecutive columns of one output row */
		struct { int64_t ohs, ow0; int l0, l1; } runs[2][PACK_RUNS_MAX];
		int nruns[2] = { 0, 0 };
		bool use_runs = sw == 1, ready = false; /* the lanes' geometry: made when a row first needs it */

		if (cnt <= 0) {
			/* a group of the last panel wholly past nc */
			for (int64_t kk = 0; kk < kc; kk++) {
				_mm256_storeu_ps(gp + kk * nr, _mm256_setzero_ps());
				_mm256_storeu_ps(gp + kk * nr + 8, _mm256_setzero_ps());
			}
			continue;
		}
		for (int64_t kk = 0; kk < kc; kk++) {
			float *d = gp + kk * nr;
			int64_t ih = oh * sh + ih0[kk];

			if (one_row && ih >= 0 && ih < ih_n && ow >= lo[kk] && ow + PACK_GROUP <= hi[kk] && sw <= 2) {
				const float *src = b->x + chan[kk] + ih * iw_n + ow * sw + woff[kk];

				if (sw == 1) {
					_mm256_storeu_ps(d, _mm256_loadu_ps(src));
					_mm256_storeu_ps(d + 8, _mm256_loadu_ps(src + 8));
				} else {
					/* the even elements of 32: [a0 a2 b0 b2 | a4 a6 b4 b6] -> in order */
					for (int h = 0; h < 2; h++, src += 16) {
						__m256 a = _mm256_loadu_ps(src), c = _mm256_loadu_ps(src + 8);
						__m256 e = _mm256_shuffle_ps(a, c, _MM_SHUFFLE(2, 0, 2, 0));

						_mm256_storeu_ps(d + 8 * h, _mm256_castpd_ps(_mm256_permute4x64_pd(
							_mm256_castps_pd(e), _MM_SHUFFLE(3, 1, 2, 0))));
					}
				}
				continue;
			}
			if (!ready) {
				/* each lane's output position (input row and column at kernel offset 0) */
				for (int64_t t = 0, rh = oh, rw = ow; t < PACK_GROUP; t++) {
					lane_oh[t] = (int32_t)(rh * sh);
					lane_ow[t] = (int32_t)(rw * sw);
					lane_live[t] = t < cnt ? -1 : 0;
					if (++rw == ow_n) {
						rw = 0;
						rh++;
					}
				}
				for (int h = 0; h < 2; h++) {
					ohs[h] = _mm256_loadu_si256((const __m256i *)(lane_oh + 8 * h));
					ows[h] = _mm256_loadu_si256((const __m256i *)(lane_ow + 8 * h));
					live[h] = _mm256_loadu_si256((const __m256i *)(lane_live + 8 * h));
					for (int l = 0; use_runs && l < 8; l++) {
						int t = 8 * h + l;

						if (t >= cnt)
							break;
						if (l == 0 || lane_ow[t] != lane_ow[t - 1] + 1) {
							if (nruns[h] == PACK_RUNS_MAX) {
								use_runs = false;
								break;
							}
							runs[h][nruns[h]].ohs = lane_oh[t];
							runs[h][nruns[h]].ow0 = lane_ow[t];
							runs[h][nruns[h]].l0 = l;
							nruns[h]++;
						}
						runs[h][nruns[h] - 1].l1 = l + 1;
					}
				}
				ready = true;
			}
			/*
			 * Stride 1, the rest: per run, a masked load of the lanes whose columns are inside
			 * the image (masked-out lanes are not read, and read as 0), the runs ORed together.
			 */
			if (use_runs) {
				const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);

				for (int h = 0; h < 2; h++) {
					__m256 v = _mm256_setzero_ps();

					for (int r = 0; r < nruns[h]; r++) {
						int64_t rih = runs[h][r].ohs + ih0[kk], shift = runs[h][r].ow0 - runs[h][r].l0;
						int64_t a = lo[kk] - shift, e = hi[kk] - shift;
						__m256i mask;

						a = a > runs[h][r].l0 ? a : runs[h][r].l0;
						e = e < runs[h][r].l1 ? e : runs[h][r].l1;
						if (rih < 0 || rih >= ih_n || a >= e)
							continue;
						mask = _mm256_and_si256(_mm256_cmpgt_epi32(lane, _mm256_set1_epi32((int)a - 1)),
									_mm256_cmpgt_epi32(_mm256_set1_epi32((int)e), lane));
						/* lane l is column l + shift: the base may point before the row */
						v = _mm256_or_ps(v, _mm256_maskload_ps(b->x + chan[kk] + rih * iw_n + woff[kk] + shift,
										       mask));
					}
					_mm256_storeu_ps(d + 8 * h, v);
				}
				continue;
			}
			/* the rest, 8 at a time: a gather of the lanes inside the image, zeros elsewhere */
			for (int h = 0; h < 2; h++) {
				__m256i ihv = _mm256_add_epi32(ohs[h], _mm256_set1_epi32((int)ih0[kk]));
				__m256i iwv = _mm256_add_epi32(ows[h], _mm256_set1_epi32((int)woff[kk]));
				__m256i in = _mm256_and_si256(
					_mm256_and_si256(_mm256_cmpgt_epi32(ihv, _mm256_set1_epi32(-1)),
							 _mm256_cmpgt_epi32(_mm256_set1_epi32((int)ih_n), ihv)),
					_mm256_and_si256(_mm256_cmpgt_epi32(iwv, _mm256_set1_epi32(-1)),
							 _mm256_cmpgt_epi32(_mm256_set1_epi32((int)iw_n), iwv)));
				__m256i idx = _mm256_add_epi32(_mm256_mullo_epi32(ihv, _mm256_set1_epi32((int)iw_n)), iwv);

				in = _mm256_and_si256(in, live[h]);
				_mm256_storeu_ps(d + 8 * h, _mm256_mask_i32gather_ps(_mm256_setzero_ps(), b->x + chan[kk], idx,
										       _mm256_castsi256_ps(in), 4));
			}
		}
	}
}

/*
 * pack_b_im2col's panels over images side by side: the panels inside one image are packed from it
 * in place, in one call (the packer sets up each of its kc rows once a call); one whose columns
 * cross into the next image has each image's part packed into stage (one panel, zeros past the
 * part) and its columns copied into place.
 */
static void pack_b_images_im2col(const struct rt_sg_b *b, const struct sg_images *im, int64_t k0, int64_t kc,
				 int64_t j0, int64_t nc, int64_t nr, float *bp, float *stage)
{
	for (int64_t j = 0; j < nc;) {
		int64_t w = nc - j < nr ? nc - j : nr, col = j0 + j, cc = col % im->cols;
		int64_t whole = (im->cols - cc) / nr, left = (nc - j + nr - 1) / nr;
		struct rt_sg_b one = *b;

		one.x = b->x + (col / im->cols) * im->x_stride;
		if (whole > 0 || cc + w <= im->cols) {
			/* panels inside this image, up to its last whole one (or the block's end) */
			int64_t p = whole < left ? whole : left, cols;

			p = p > 0 ? p : 1;
			cols = p * nr < nc - j ? p * nr : nc - j;
			pack_b_im2col(&one, k0, kc, cc, cols, nr, bp);
			j += p * nr;
			bp += p * kc * nr;
			continue;
		}
		for (int64_t done = 0; done < w;) {
			int64_t len;

			col = j0 + j + done;
			cc = col % im->cols;
			len = im->cols - cc < w - done ? im->cols - cc : w - done;
			one.x = b->x + (col / im->cols) * im->x_stride;
			pack_b_im2col(&one, k0, kc, cc, len, nr, stage);
			for (int64_t kk = 0; kk < kc; kk++)
				memcpy(bp + kk * nr + done, stage + kk * nr, (size_t)len * sizeof(float));
			done += len;
		}
		for (int64_t kk = 0; kk < kc; kk++)
			for (int64_t jj = w; jj < nr; jj++)
				bp[kk * nr + jj] = 0.0f;
		j += nr;
		bp += kc * nr;
	}
}

void rt_sg_pack_b_block(const struct rt_sg_b *b, int64_t k0, int64_t kc, int64_t j0, int64_t nc, int64_t nr,
			float *bp)
{
	(b->conv != NULL ? pack_b_im2col : pack_b_matrix)(b, k0, kc, j0, nc, nr, bp);
}

/* ---- the micro-kernel ---------------------------------------------------------------------------- */

struct tile_out {
	bool first, last;          /* C not written yet / k's last block: apply the epilogue */
	float alpha;               /* scales the product (the last block's sum), before the biases */
	const float *row_bias;     /* at the tile's first row */
	const float *col_bias;     /* at the tile's first column */
	const float *z;            /* at the tile's first element */
	const struct rt_k_act_spec *act;
};

/*
 * The AVX2 tiles' epilogue: acc holds rows x 16 (acc[2r], acc[2r + 1]); mr x nr of it are C's. A
 * whole tile is stored from registers, an edge one through a buffer on the stack.
 */
SG_TARGET static inline __attribute__((always_inline)) void tile_store_avx2(const __m256 *acc, int rows, float *c,
									  int64_t ldc, int64_t mr, int64_t nr,
									  const struct tile_out *t)
{
	if (mr == rows && nr == RT_SG_NR) {
		__m256 out[2 * RT_SG_MR];

		for (int r = 0; r < rows; r++) {
			float *cr = c + r * ldc;
			__m256 v0 = acc[2 * r], v1 = acc[2 * r + 1];

			if (!t->first) {
				v0 = _mm256_add_ps(v0, _mm256_loadu_ps(cr));
				v1 = _mm256_add_ps(v1, _mm256_loadu_ps(cr + 8));
			}
			if (t->last) {
				if (t->alpha != 1.0f) {
					v0 = _mm256_mul_ps(v0, _mm256_set1_ps(t->alpha));
					v1 = _mm256_mul_ps(v1, _mm256_set1_ps(t->alpha));
				}
				if (t->row_bias != NULL) {
					__m256 bias = _mm256_set1_ps(t->row_bias[r]);

					v0 = _mm256_add_ps(v0, bias);
					v1 = _mm256_add_ps(v1, bias);
				}
				if (t->col_bias != NULL) {
					v0 = _mm256_add_ps(v0, _mm256_loadu_ps(t->col_bias));
					v1 = _mm256_add_ps(v1, _mm256_loadu_ps(t->col_bias + 8));
				}
				if (t->z != NULL) {
					v0 = _mm256_add_ps(v0, _mm256_loadu_ps(t->z + r * ldc));
					v1 = _mm256_add_ps(v1, _mm256_loadu_ps(t->z + r * ldc + 8));
				}
				v0 = rt_act8(v0, t->act);
				v1 = rt_act8(v1, t->act);
			}
			out[2 * r] = v0;
			out[2 * r + 1] = v1;
		}
		if (t->last && t->act->kind == RT_K_ACT_GELU) {
			/* the tile's 2 x rows vectors side by side: independent chains, where a row at a time
			 * waits on each lookup and polynomial in turn (vecmath.h's vgelu: rt_vm_act's bits) */
#pragma GCC unroll 12
			for (int i = 0; i < 2 * rows; i++)
				out[i] = (__m256)vgelu((vf)out[i]);
		}
		for (int r = 0; r < rows; r++) {
			_mm256_storeu_ps(c + r * ldc, out[2 * r]);
			_mm256_storeu_ps(c + r * ldc + 8, out[2 * r + 1]);
		}
		return;
	}
	{
		float tmp[RT_SG_MR * RT_SG_NR];

		for (int r = 0; r < rows; r++) {
			_mm256_storeu_ps(tmp + r * RT_SG_NR, acc[2 * r]);
			_mm256_storeu_ps(tmp + r * RT_SG_NR + 8, acc[2 * r + 1]);
		}
		for (int64_t r = 0; r < mr; r++) {
			for (int64_t j = 0; j < nr; j++) {
				float v = tmp[r * RT_SG_NR + j] + (t->first ? 0.0f : c[r * ldc + j]);

				if (t->last) {
					v *= t->alpha;
					if (t->row_bias != NULL)
						v += t->row_bias[r];
					if (t->col_bias != NULL)
						v += t->col_bias[j];
					if (t->z != NULL)
						v += t->z[r * ldc + j];
					v = rt_act1(v, t->act);
				}
				c[r * ldc + j] = v;
			}
			if (t->last && t->act->kind == RT_K_ACT_GELU)
				rt_vm_act(c + r * ldc, nr, t->act);
		}
	}
}

/*
 * k steps ahead that the 6x16 kernel prefetches its A panel (768 bytes), as the AVX-512 kernel
 * does: a conv's weights stream from memory once per image, and at 14x14 and 7x7 outputs each
 * weight meets too few columns to hide the miss (ResNet-50 at batch 1 on an AMD EPYC, the per-step
 * minima of alternating runs: 91.3 and 88.7 ms with it against 93.2 and 91.5 without; 16 and 64
 * steps ahead the same as 32).
 */
#define SG_PF_K 32

SG_TARGET SG_KERNEL_INLINE void kernel_6x16(int64_t kc, const float *a, const float *b, float *c, int64_t ldc, int64_t mr,
				  int64_t nr, const struct tile_out *t)
{
	__m256 acc[2 * RT_SG_MR];

	if (nr <= RT_SG_NR / 2) {
		/*
		 * A panel of 8 columns or fewer computes its left half only: half the FMAs, at 6 chains
		 * for 8 in flight, rather than 16 columns for 1 (the convolutions' driver gives those of
		 * 4 columns or fewer to narrow_avx2 instead).
		 */
		__m256 c00 = _mm256_setzero_ps(), c10 = c00, c20 = c00, c30 = c00, c40 = c00, c50 = c00;

#pragma GCC unroll 4
		for (int64_t k = 0; k < kc; k++, a += RT_SG_MR, b += RT_SG_NR) {
			__m256 b0 = _mm256_loadu_ps(b);

			_mm_prefetch((const char *)(a + SG_PF_K * RT_SG_MR), _MM_HINT_T0);
			c00 = _mm256_fmadd_ps(_mm256_broadcast_ss(a + 0), b0, c00);
			c10 = _mm256_fmadd_ps(_mm256_broadcast_ss(a + 1), b0, c10);
			c20 = _mm256_fmadd_ps(_mm256_broadcast_ss(a + 2), b0, c20);
			c30 = _mm256_fmadd_ps(_mm256_broadcast_ss(a + 3), b0, c30);
			c40 = _mm256_fmadd_ps(_mm256_broadcast_ss(a + 4), b0, c40);
			c50 = _mm256_fmadd_ps(_mm256_broadcast_ss(a + 5), b0, c50);
		}
		acc[0] = c00, acc[2] = c10, acc[4] = c20, acc[6] = c30, acc[8] = c40, acc[10] = c50;
		for (int r = 0; r < RT_SG_MR; r++)
			acc[2 * r + 1] = _mm256_setzero_ps();
	} else {
		__m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00;
		__m256 c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;

#pragma GCC unroll 4
		for (int64_t k = 0; k < kc; k++, a += RT_SG_MR, b += RT_SG_NR) {
			__m256 b0 = _mm256_loadu_ps(b), b1 = _mm256_loadu_ps(b + 8), av;

			_mm_prefetch((const char *)(a + SG_PF_K * RT_SG_MR), _MM_HINT_T0);
			av = _mm256_broadcast_ss(a + 0);
			c00 = _mm256_fmadd_ps(av, b0, c00);
			c01 = _mm256_fmadd_ps(av, b1, c01);
			av = _mm256_broadcast_ss(a + 1);
			c10 = _mm256_fmadd_ps(av, b0, c10);
			c11 = _mm256_fmadd_ps(av, b1, c11);
			av = _mm256_broadcast_ss(a + 2);
			c20 = _mm256_fmadd_ps(av, b0, c20);
			c21 = _mm256_fmadd_ps(av, b1, c21);
			av = _mm256_broadcast_ss(a + 3);
			c30 = _mm256_fmadd_ps(av, b0, c30);
			c31 = _mm256_fmadd_ps(av, b1, c31);
			av = _mm256_broadcast_ss(a + 4);
			c40 = _mm256_fmadd_ps(av, b0, c40);
			c41 = _mm256_fmadd_ps(av, b1, c41);
			av = _mm256_broadcast_ss(a + 5);
			c50 = _mm256_fmadd_ps(av, b0, c50);
			c51 = _mm256_fmadd_ps(av, b1, c51);
		}
		acc[0] = c00, acc[1] = c01, acc[2] = c10, acc[3] = c11, acc[4] = c20, acc[5] = c21;
		acc[6] = c30, acc[7] = c31, acc[8] = c40, acc[9] = c41, acc[10] = c50, acc[11] = c51;
	}
	tile_store_avx2(acc, RT_SG_MR, c, ldc, mr, nr, t);
}

/* A panel's narrow tile to C: v[r] holds row r's nc columns (lanes past nc zero). */
typedef void sg_narrow_store_fn(__m256 *v, float *c, int64_t ldc, int64_t mr, int nc, const struct tile_out *t);

/*
 * The narrow last panel (1 to SG_NARROW_MAX columns: the last of N = 49, 7x7 outputs, is 1 wide on
 * AVX2, of N = 196 4 on either path) for g row panels at once: the rows of a panel (6 on AVX2, 8 on
 * AVX-512) in the lanes, per k step one A load a panel and NC broadcasts of B, NC FMAs a panel
 * where the tile's 8- or 16-column half takes 6 or 8. Each sum is still one chain over k in order,
 * as in the tile, so an image alone gets the bits it gets side by side in a batch; the g panels'
 * g x NC chains (8, or 6 at 3 columns) cover the FMA's latency. On AVX2 the A load of 8 lanes reads
 * 2 values of the next k step, ignored; the last k step's is masked, as nothing may follow the
 * panel. The A panels come from L2: the driver runs this after the row block's whole column panels.
 */
SG_TARGET static inline __attribute__((always_inline)) void narrow_panels(int64_t kc, const float *a, int64_t a_stride,
									 const float *b, int64_t nr_p, const int mr_p,
									 const int g, const int nc, float *const *c,
									 int64_t ldc, const int64_t *mr,
									 const struct tile_out *t,
									 sg_narrow_store_fn *store)
{
	const __m256i six = _mm256_setr_epi32(-1, -1, -1, -1, -1, -1, 0, 0);
	__m256 s[SG_NARROW_ROWS][SG_NARROW_MAX];
	int64_t k = 0;

#pragma GCC unroll 8
	for (int p = 0; p < SG_NARROW_ROWS; p++) {
#pragma GCC unroll 4
		for (int j = 0; j < SG_NARROW_MAX; j++)
			s[p][j] = _mm256_setzero_ps();
	}
	for (; k + (mr_p < 8) < kc; k++) {
#pragma GCC unroll 8
		for (int p = 0; p < g; p++) {
			const __m256 av = _mm256_loadu_ps(a + p * a_stride + k * mr_p);

#pragma GCC unroll 4
			for (int j = 0; j < nc; j++)
				s[p][j] = _mm256_fmadd_ps(av, _mm256_broadcast_ss(b + k * nr_p + j), s[p][j]);
		}
	}
	for (; k < kc; k++) {
#pragma GCC unroll 8
		for (int p = 0; p < g; p++) {
			const __m256 av = _mm256_maskload_ps(a + p * a_stride + k * mr_p, six);

#pragma GCC unroll 4
			for (int j = 0; j < nc; j++)
				s[p][j] = _mm256_fmadd_ps(av, _mm256_broadcast_ss(b + k * nr_p + j), s[p][j]);
		}
	}
#pragma GCC unroll 8
	for (int p = 0; p < g; p++) {
		__m256 v[8];

#pragma GCC unroll 8
		for (int j = 0; j < 8; j++)
			v[j] = j < nc ? s[p][j < SG_NARROW_MAX ? j : 0] : _mm256_setzero_ps();
		rt_transpose8(v);
		store(v, c[p], ldc, mr[p], nc, &t[p]);
	}
}

SG_TARGET SG_KERNEL_INLINE void narrow_store(__m256 *v, float *c, int64_t ldc, int64_t mr, int nc,
					     const struct tile_out *t)
{
	__m256 acc[2 * RT_SG_MR];

#pragma GCC unroll 6
	for (int r = 0; r < RT_SG_MR; r++) {
		acc[2 * r] = v[r];
		acc[2 * r + 1] = _mm256_setzero_ps();
	}
	tile_store_avx2(acc, RT_SG_MR, c, ldc, mr, nc, t);
}

SG_TARGET SG_KERNEL_INLINE void narrow_group(int64_t kc, const float *a, int64_t a_stride, const float *b, const int g,
					     const int nc, float *const *c, int64_t ldc, const int64_t *mr,
					     const struct tile_out *t)
{
	narrow_panels(kc, a, a_stride, b, RT_SG_NR, RT_SG_MR, g, nc, c, ldc, mr, t, narrow_store);
}

typedef void sg_narrow_group_fn(int64_t kc, const float *a, int64_t a_stride, const float *b, int g, int nc,
				float *const *c, int64_t ldc, const int64_t *mr, const struct tile_out *t);

/* A path's group with the columns and the group's size constants: 8 chains where the panels allow. */
SG_TARGET static inline __attribute__((always_inline)) void narrow_cols(int64_t kc, const float *a, int64_t a_stride,
								       int cnt, const float *b, const int nc, float *const *c,
								       int64_t ldc, const int64_t *mr, const struct tile_out *t,
								       sg_narrow_group_fn *group)
{
	const int g = nc <= 2 ? 8 / nc : 2;
	int p = 0;

	for (; p + g <= cnt; p += g)
		group(kc, a + p * a_stride, a_stride, b, g, nc, c + p, ldc, mr + p, t + p);
	for (int h = g / 2; h >= 1; h /= 2) {
		if (p + h <= cnt) {
			group(kc, a + p * a_stride, a_stride, b, h, nc, c + p, ldc, mr + p, t + p);
			p += h;
		}
	}
}

/* The path's narrow entry: its group (inlined, the pointer a constant) for each width. */
SG_TARGET static inline __attribute__((always_inline)) void narrow_widths(int64_t kc, const float *a, int64_t a_stride,
									 int cnt, const float *b, int64_t nr,
									 float *const *c, int64_t ldc, const int64_t *mr,
									 const struct tile_out *t, sg_narrow_group_fn *group)
{
	switch (nr) {
	case 1:
		narrow_cols(kc, a, a_stride, cnt, b, 1, c, ldc, mr, t, group);
		break;
	case 2:
		narrow_cols(kc, a, a_stride, cnt, b, 2, c, ldc, mr, t, group);
		break;
	case 3:
		narrow_cols(kc, a, a_stride, cnt, b, 3, c, ldc, mr, t, group);
		break;
	default:
		narrow_cols(kc, a, a_stride, cnt, b, 4, c, ldc, mr, t, group);
		break;
	}
}

SG_TARGET static void narrow_avx2(int64_t kc, const float *a, int64_t a_stride, int cnt, const float *b, int64_t nr,
				  float *const *c, int64_t ldc, const int64_t *mr, const struct tile_out *t)
{
	narrow_widths(kc, a, a_stride, cnt, b, nr, c, ldc, mr, t, narrow_group);
}

/*
 * 4 x 16, 8 accumulators (enough to cover the FMAs' latency): the row panels of rt_sg_gemm_bpacked
 * that 6-row panels would leave part empty (8 rows of activations are 4 + 4, not 6 + 2 computed as
 * 6 + 6: the MLP's batch of 8). Per k 2 loads and 4 broadcasts for 8 FMAs.
 */
SG_TARGET static void kernel_4x16(int64_t kc, const float *a, const float *b, float *c, int64_t ldc, int64_t mr,
				  int64_t nr, const struct tile_out *t)
{
	__m256 acc[2 * SG_TAIL_MR];
	__m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00, c30 = c00, c31 = c00;

	if (nr <= RT_SG_NR / 2) {
#pragma GCC unroll 4
		for (int64_t k = 0; k < kc; k++, a += SG_TAIL_MR, b += RT_SG_NR) {
			__m256 b0 = _mm256_loadu_ps(b);

			c00 = _mm256_fmadd_ps(_mm256_broadcast_ss(a + 0), b0, c00);
			c10 = _mm256_fmadd_ps(_mm256_broadcast_ss(a + 1), b0, c10);
			c20 = _mm256_fmadd_ps(_mm256_broadcast_ss(a + 2), b0, c20);
			c30 = _mm256_fmadd_ps(_mm256_broadcast_ss(a + 3), b0, c30);
		}
	} else {
#pragma GCC unroll 4
		for (int64_t k = 0; k < kc; k++, a += SG_TAIL_MR, b += RT_SG_NR) {
			__m256 b0 = _mm256_loadu_ps(b), b1 = _mm256_loadu_ps(b + 8), av;

			av = _mm256_broadcast_ss(a + 0);
			c00 = _mm256_fmadd_ps(av, b0, c00);
			c01 = _mm256_fmadd_ps(av, b1, c01);
			av = _mm256_broadcast_ss(a + 1);
			c10 = _mm256_fmadd_ps(av, b0, c10);
			c11 = _mm256_fmadd_ps(av, b1, c11);
			av = _mm256_broadcast_ss(a + 2);
			c20 = _mm256_fmadd_ps(av, b0, c20);
			c21 = _mm256_fmadd_ps(av, b1, c21);
			av = _mm256_broadcast_ss(a + 3);
			c30 = _mm256_fmadd_ps(av, b0, c30);
			c31 = _mm256_fmadd_ps(av, b1, c31);
		}
	}
	acc[0] = c00, acc[1] = c01, acc[2] = c10, acc[3] = c11, acc[4] = c20, acc[5] = c21, acc[6] = c30, acc[7] = c31;
	tile_store_avx2(acc, SG_TAIL_MR, c, ldc, mr, nr, t);
}

/* ---- the AVX-512 micro-kernel -------------------------------------------------------------------- */

#define SG512_MR 8
#define SG512_NR 32
/*
 * k steps ahead that the A panel is prefetched (1 KiB): a conv's weights stream from memory once
 * per image, and at 7x7 outputs each weight meets only 49 columns, too few FMAs to hide the miss
 * behind (ResNet-50 at batch 1: 56-58 ms with it against 60-63 without, alternating runs).
 */
#define SG512_PF_K 32

/*
 * Row r of an AVX-512 tile, its two halves v0 | v1 (lanes m0 | m1), C's row at cr: C's earlier
 * blocks added, and on k's last block alpha, the row's and the columns' biases, z and the
 * activation (Gelu aside). The narrow panels pass m1 0: the second half loads nothing.
 */
SG512_TARGET static inline __attribute__((always_inline)) void row_out512(__m512 *v0, __m512 *v1, __mmask16 m0,
									  __mmask16 m1, const struct tile_out *t, int r,
									  int64_t ldc, const float *cr)
{
	if (!t->first) {
		*v0 = _mm512_add_ps(*v0, _mm512_maskz_loadu_ps(m0, cr));
		*v1 = _mm512_add_ps(*v1, _mm512_maskz_loadu_ps(m1, cr + 16));
	}
	if (t->last) {
		if (t->alpha != 1.0f) {
			*v0 = _mm512_mul_ps(*v0, _mm512_set1_ps(t->alpha));
			*v1 = _mm512_mul_ps(*v1, _mm512_set1_ps(t->alpha));
		}
		if (t->row_bias != NULL) {
			__m512 bias = _mm512_set1_ps(t->row_bias[r]);

			*v0 = _mm512_add_ps(*v0, bias);
			*v1 = _mm512_add_ps(*v1, bias);
		}
		if (t->col_bias != NULL) {
			*v0 = _mm512_add_ps(*v0, _mm512_maskz_loadu_ps(m0, t->col_bias));
			*v1 = _mm512_add_ps(*v1, _mm512_maskz_loadu_ps(m1, t->col_bias + 16));
		}
		if (t->z != NULL) {
			*v0 = _mm512_add_ps(*v0, _mm512_maskz_loadu_ps(m0, t->z + r * ldc));
			*v1 = _mm512_add_ps(*v1, _mm512_maskz_loadu_ps(m1, t->z + r * ldc + 16));
		}
		*v0 = rt_act16(*v0, t->act);
		*v1 = rt_act16(*v1, t->act);
	}
}

/*
 * 8 rows x 32 columns: 16 zmm accumulators, per k two B loads and eight broadcasts (folded into the
 * FMAs as {1to16} operands). A panel of 16 columns or fewer computes its left half only. Edges need
 * no buffer: the columns past nr are masked off C's loads and stores, the rows past mr not stored.
 */
SG512_TARGET SG_KERNEL_INLINE void kernel_avx512(int64_t kc, const float *a, const float *b, float *c, int64_t ldc, int64_t mr,
				       int64_t nr, const struct tile_out *t)
{
	__m512 acc0[SG512_MR], acc1[SG512_MR];
	float tile[SG512_MR * SG512_NR] __attribute__((aligned(64)));
	bool gelu = t->last && t->act->kind == RT_K_ACT_GELU;
	__mmask16 m0 = lane_mask16(nr);
	__mmask16 m1 = lane_mask16(nr - 16);

#pragma GCC unroll 8
	for (int r = 0; r < SG512_MR; r++)
		acc0[r] = acc1[r] = _mm512_setzero_ps();
	if (nr <= 16) {
#pragma GCC unroll 4
		for (int64_t k = 0; k < kc; k++, a += SG512_MR, b += SG512_NR) {
			__m512 b0 = _mm512_loadu_ps(b);

			_mm_prefetch((const char *)(a + SG512_PF_K * SG512_MR), _MM_HINT_T0);

#pragma GCC unroll 8
			for (int r = 0; r < SG512_MR; r++)
				acc0[r] = _mm512_fmadd_ps(_mm512_set1_ps(a[r]), b0, acc0[r]);
		}
	} else {
#pragma GCC unroll 4
		for (int64_t k = 0; k < kc; k++, a += SG512_MR, b += SG512_NR) {
			__m512 b0 = _mm512_loadu_ps(b), b1 = _mm512_loadu_ps(b + 16);

			_mm_prefetch((const char *)(a + SG512_PF_K * SG512_MR), _MM_HINT_T0);

#pragma GCC unroll 8
			for (int r = 0; r < SG512_MR; r++) {
				__m512 av = _mm512_set1_ps(a[r]);

				acc0[r] = _mm512_fmadd_ps(av, b0, acc0[r]);
				acc1[r] = _mm512_fmadd_ps(av, b1, acc1[r]);
			}
		}
	}
#pragma GCC unroll 8
	for (int r = 0; r < SG512_MR; r++) {
		float *cr = c + r * ldc;
		__m512 v0 = acc0[r], v1 = acc1[r];

		if (r >= mr)
			break;
		row_out512(&v0, &v1, m0, m1, t, r, ldc, cr);
		if (gelu) {
			_mm512_store_ps(tile + r * SG512_NR, v0);
			_mm512_store_ps(tile + r * SG512_NR + 16, v1);
			continue;
		}
		_mm512_mask_storeu_ps(cr, m0, v0);
		_mm512_mask_storeu_ps(cr + 16, m1, v1);
	}
	if (gelu) {
		/* Gelu, which rt_act16 does not do, over the whole tile at once: one call, not one a row */
		rt_vm_act(tile, mr * SG512_NR, t->act);
		for (int64_t r = 0; r < mr; r++) {
			_mm512_mask_storeu_ps(c + r * ldc, m0, _mm512_load_ps(tile + r * SG512_NR));
			_mm512_mask_storeu_ps(c + r * ldc + 16, m1, _mm512_load_ps(tile + r * SG512_NR + 16));
		}
	}
}

/*
 * The narrow last panel on AVX-512 (narrow_panels): 8-row panels, a panel's rows exactly a ymm's
 * lanes, stored with the tile's epilogue on nc masked lanes a row.
 */
SG512_TARGET SG_KERNEL_INLINE void narrow_store512(__m256 *v, float *c, int64_t ldc, int64_t mr, int nc,
						   const struct tile_out *t)
{
	float tile[SG512_MR * 8] __attribute__((aligned(32)));
	const __mmask8 m = (__mmask8)((1u << nc) - 1);
	bool gelu = t->last && t->act->kind == RT_K_ACT_GELU;

	for (int r = 0; r < mr; r++) {
		float *cr = c + r * ldc;
		__m512 v0 = _mm512_castps256_ps512(v[r]), v1 = _mm512_setzero_ps();
		__m256 x;

		row_out512(&v0, &v1, m, 0, t, r, ldc, cr);
		x = _mm512_castps512_ps256(v0);

		if (gelu)
			_mm256_store_ps(tile + r * 8, x);
		else
			_mm256_mask_storeu_ps(cr, m, x);
	}
	if (gelu) {
		/* Gelu, which rt_act16 does not do: the tile at once, as kernel_avx512 does */
		rt_vm_act(tile, mr * 8, t->act);
		for (int r = 0; r < mr; r++)
			_mm256_mask_storeu_ps(c + r * ldc, m, _mm256_load_ps(tile + r * 8));
	}
}

SG512_TARGET SG_KERNEL_INLINE void narrow_group512(int64_t kc, const float *a, int64_t a_stride, const float *b,
						   const int g, const int nc, float *const *c, int64_t ldc,
						   const int64_t *mr, const struct tile_out *t)
{
	narrow_panels(kc, a, a_stride, b, SG512_NR, SG512_MR, g, nc, c, ldc, mr, t, narrow_store512);
}

SG512_TARGET static void narrow_avx512(int64_t kc, const float *a, int64_t a_stride, int cnt, const float *b,
				       int64_t nr, float *const *c, int64_t ldc, const int64_t *mr,
				       const struct tile_out *t)
{
	narrow_widths(kc, a, a_stride, cnt, b, nr, c, ldc, mr, t, narrow_group512);
}

/*
 * Activations into row panels of mr = 8 (AVX-512), 6 or SG_TAIL_MR = 4 (AVX2), packed per call by
 * rt_sg_gemm_bpacked: 8 k of each row at a time through an 8 x 8 transpose in ymm registers (rows
 * past mr zero), a k's mr floats stored as 8, 4 + 2 or 4; a panel with rows past m takes the plain
 * loop. A float at a time, this packing took 2 ms of the transformer's 27 at batch 1 on a Sapphire
 * Rapids core (8 rows) and 9 % of its FFN-down GEMM (K = 1536, 6 rows) on an AMD EPYC.
 */
SG_TARGET static inline __attribute__((always_inline)) void pack_a_rows_mr(const float *a, int64_t lda, int64_t m,
									    int64_t i0, int64_t mc, int64_t k0,
									    int64_t kc, const int mr, float *abuf)
{
	for (int64_t p = 0; p * mr < mc; p++, abuf += kc * mr) {
		const float *src = a + (i0 + p * mr) * lda + k0;
		int64_t rows = m - (i0 + p * mr), kk = 0;

		for (; rows >= mr && kk + 8 <= kc; kk += 8) {
			__m256 v[8];

#pragma GCC unroll 8
			for (int i = 0; i < 8; i++)
				v[i] = i < mr ? _mm256_loadu_ps(src + i * lda + kk) : _mm256_setzero_ps();
			rt_transpose8(v);
#pragma GCC unroll 8
			for (int j = 0; j < 8; j++) {
				float *d = abuf + (kk + j) * mr;

				if (mr == 8) {
					_mm256_storeu_ps(d, v[j]);
					continue;
				}
				_mm_storeu_ps(d, _mm256_castps256_ps128(v[j]));
				if (mr == 6)
					_mm_storel_pi((__m64 *)(void *)(d + 4), _mm256_extractf128_ps(v[j], 1));
			}
		}
		for (; kk < kc; kk++)
			for (int64_t r = 0; r < mr; r++)
				abuf[kk * mr + r] = r < rows ? src[r * lda + kk] : 0.0f;
	}
}

SG_TARGET static void pack_a_rows_8(const float *a, int64_t lda, int64_t m, int64_t i0, int64_t mc, int64_t k0,
				    int64_t kc, float *abuf)
{
	pack_a_rows_mr(a, lda, m, i0, mc, k0, kc, SG512_MR, abuf);
}

SG_TARGET static void pack_a_rows_6(const float *a, int64_t lda, int64_t m, int64_t i0, int64_t mc, int64_t k0,
				    int64_t kc, float *abuf)
{
	pack_a_rows_mr(a, lda, m, i0, mc, k0, kc, RT_SG_MR, abuf);
}

SG_TARGET static void pack_a_rows_4(const float *a, int64_t lda, int64_t m, int64_t i0, int64_t mc, int64_t k0,
				    int64_t kc, float *abuf)
{
	pack_a_rows_mr(a, lda, m, i0, mc, k0, kc, SG_TAIL_MR, abuf);
}

/* ---- the driver ---------------------------------------------------------------------------------- */

#define SG_TILE_MAX (SG512_MR * SG512_NR) /* the largest tile of any path */

/*
 * A tile of images side by side whose columns cross from one image into the next: C (and z) staged
 * through buffers in the tile's own layout (ldc nr_p), the kernel run on them, C written back to
 * each image's part. \param j  the tile's first column of the whole GEMM
 */
static inline __attribute__((always_inline)) void tile_across_images(const struct sg_path *sp, const struct sg_images *im, int64_t kc, const float *a,
			       const float *b, float *c, const float *z, int64_t i, int64_t j, int64_t mr, int64_t nr,
			       struct tile_out *t)
{
	float ct[SG_TILE_MAX] __attribute__((aligned(64))), zt[SG_TILE_MAX] __attribute__((aligned(64)));
	int64_t nr_p = sp->nr;

	for (int pass = 0; pass < 3; pass++) {
		/* 0: C and z into the buffers; (the kernel between); 2: the buffer back into C */
		if (pass == 1) {
			if (t->z != NULL)
				t->z = zt;
			sp->kernel(kc, a, b, ct, nr_p, mr, nr, t);
			continue;
		}
		for (int64_t off = 0; off < nr;) {
			int64_t col = j + off, cc = col % im->cols, len = im->cols - cc < nr - off ? im->cols - cc : nr - off;
			int64_t at = (col / im->cols) * im->c_stride + i * im->cols + cc;

			for (int64_t r = 0; r < mr; r++) {
				float *cr = c + at + r * im->cols, *tr = ct + r * nr_p + off;

				if (pass == 2) {
					memcpy(cr, tr, (size_t)len * sizeof(float));
					continue;
				}
				if (!t->first)
					memcpy(tr, cr, (size_t)len * sizeof(float));
				if (t->z != NULL && t->last)
					memcpy(zt + r * nr_p + off, z + at + r * im->cols, (size_t)len * sizeof(float));
			}
			off += len;
		}
	}
}

/* Where the tile at row i, column j of the GEMM starts in C (and z): in one image when im is set. */
static inline int64_t tile_offset(const struct sg_images *im, int64_t ldc, int64_t i, int64_t j)
{
	return im != NULL ? (j / im->cols) * im->c_stride + i * ldc + j % im->cols : i * ldc + j;
}

/* The epilogue of a tile at row i whose C and z start at offset at. */
static inline struct tile_out tile_out_at(const struct rt_sg_epilogue *ep, bool first, bool last, int64_t i,
					  int64_t at)
{
	return (struct tile_out){
		.first = first, .last = last, .act = &ep->act, .alpha = 1.0f,
		.row_bias = ep->row_bias != NULL ? ep->row_bias + i : NULL,
		.z = ep->z != NULL ? ep->z + at : NULL,
	};
}

/* rt_sg_gemm over one matrix (im NULL) or images side by side (ldc: each image's cols). */
static inline __attribute__((always_inline)) void sg_gemm_body(const struct sg_path *sp, int64_t m, int64_t n,
								int64_t k, const float *ap, const struct rt_sg_b *b,
								const struct sg_images *im, float *c, int64_t ldc,
								const struct rt_sg_epilogue *ep, float *bbuf)
{
	int64_t mr_p = sp->mr, nr_p = sp->nr, mp = panels(sp, m), kcb = k_block(sp, k), ib = RT_SG_MC / mr_p;

	if (m <= 0 || n <= 0)
		return;
	for (int64_t j0 = 0; j0 < n; j0 += RT_SG_NC) {
		int64_t nc = n - j0 < RT_SG_NC ? n - j0 : RT_SG_NC;

		for (int64_t k0 = 0; k0 < k || (k == 0 && k0 == 0); k0 += kcb) {
			int64_t kc = k - k0 < kcb ? k - k0 : kcb;
			const float *apk = ap + k0 * mp * mr_p;

			if (kc > 0 && im != NULL && b->conv != NULL)
				pack_b_images_im2col(b, im, k0, kc, j0, nc, nr_p, bbuf, bbuf + rt_sg_scratch_floats(n, k));
			else if (kc > 0 && im != NULL)
				pack_b_images(b, im, k0, kc, j0, nc, nr_p, bbuf);
			else if (kc > 0)
				(b->conv != NULL ? pack_b_im2col : pack_b_matrix)(b, k0, kc, j0, nc, nr_p, bbuf);
			/* the block's last column panel, taken by sp->narrow when it is narrow (and in one image) */
			int64_t jp_last = (nc - 1) / nr_p, j_last = j0 + jp_last * nr_p, w_last = nc - jp_last * nr_p;
			bool narrow = sp->narrow != NULL && w_last <= SG_NARROW_MAX &&
				      (im == NULL || j_last % im->cols + w_last <= im->cols);
			int64_t jp_end = narrow ? jp_last : jp_last + 1;

			for (int64_t i0 = 0; i0 < mp; i0 += ib) {
				int64_t iend = i0 + ib < mp ? i0 + ib : mp;

				/* a row panel meets every column panel of the block in turn: see the header */
				for (int64_t ip = i0; ip < iend; ip++) {
					int64_t i = ip * mr_p, mr = m - i < mr_p ? m - i : mr_p;

					for (int64_t jp = 0; jp < jp_end; jp++) {
						int64_t j = j0 + jp * nr_p, nr = n - j < nr_p ? n - j : nr_p, at;
						struct tile_out t;

						if (im != NULL && j % im->cols + nr > im->cols) {
							t = tile_out_at(ep, k0 == 0, k0 + kc >= k, i, 0); /* z: the base */
							tile_across_images(sp, im, kc, apk + ip * kc * mr_p, bbuf + jp * kc * nr_p,
									   c, ep->z, i, j, mr, nr, &t);
							continue;
						}
						at = tile_offset(im, ldc, i, j);
						t = tile_out_at(ep, k0 == 0, k0 + kc >= k, i, at);
						sp->kernel(kc, apk + ip * kc * mr_p, bbuf + jp * kc * nr_p, c + at, ldc, mr, nr,
							   &t);
					}
				}
				for (int64_t ip = i0; narrow && ip < iend; ip += SG_NARROW_ROWS) {
					int cnt = iend - ip < SG_NARROW_ROWS ? (int)(iend - ip) : SG_NARROW_ROWS;
					float *cs[SG_NARROW_ROWS];
					int64_t mrs[SG_NARROW_ROWS];
					struct tile_out ts[SG_NARROW_ROWS];

					for (int p = 0; p < cnt; p++) {
						int64_t i = (ip + p) * mr_p, at = tile_offset(im, ldc, i, j_last);

						mrs[p] = m - i < mr_p ? m - i : mr_p;
						cs[p] = c + at;
						ts[p] = tile_out_at(ep, k0 == 0, k0 + kc >= k, i, at);
					}
					sp->narrow(kc, apk + ip * kc * mr_p, kc * mr_p, cnt, bbuf + jp_last * kc * nr_p, w_last,
						   cs, ldc, mrs, ts);
				}
			}
			if (k == 0)
				break;
		}
	}
}

/*
 * The driver once per path, its table a constant, so that the micro-kernel is inlined into the
 * tile loop rather than called through the table per tile (a 64-deep tile is about 150 ns): the
 * 1x1 convs of ResNet-50's shapes 1-3 % faster alone on an AMD EPYC, the model's per-step minima
 * 2.6 % lower.
 */
SG_TARGET static void sg_gemm_avx2(int64_t m, int64_t n, int64_t k, const float *ap, const struct rt_sg_b *b,
				   const struct sg_images *im, float *c, int64_t ldc, const struct rt_sg_epilogue *ep,
				   float *bbuf)
{
	sg_gemm_body(&g_sg_avx2, m, n, k, ap, b, im, c, ldc, ep, bbuf);
}

SG512_TARGET static void sg_gemm_avx512(int64_t m, int64_t n, int64_t k, const float *ap, const struct rt_sg_b *b,
					const struct sg_images *im, float *c, int64_t ldc, const struct rt_sg_epilogue *ep,
					float *bbuf)
{
	sg_gemm_body(&g_sg_avx512, m, n, k, ap, b, im, c, ldc, ep, bbuf);
}

void rt_sg_gemm(int64_t m, int64_t n, int64_t k, const float *ap, const struct rt_sg_b *b, float *c, int64_t ldc,
		const struct rt_sg_epilogue *ep, float *bbuf)
{
	sg_path()->run(m, n, k, ap, b, NULL, c, ldc, ep, bbuf);
}

void rt_sg_gemm_images(int64_t m, int64_t cols, int64_t images, int64_t k, const float *ap, const struct rt_sg_b *b,
		       int64_t x_image_stride, float *c, int64_t c_image_stride, const struct rt_sg_epilogue *ep,
		       float *bbuf)
{
	const struct sg_images im = { cols, x_image_stride, c_image_stride };

	if (cols > 0)
		sg_path()->run(m, cols * images, k, ap, b, &im, c, cols, ep, bbuf);
}

size_t rt_sg_images_scratch_floats(int64_t cols, int64_t images, int64_t k)
{
	const struct sg_path *sp = sg_path();

	return rt_sg_scratch_floats(cols * images, k) + (size_t)(k_block(sp, k) * sp->nr);
}

int64_t rt_sg_tile_cols(void)
{
	return sg_path()->nr;
}

/* ---- the weights on the right: FusedGemm --------------------------------------------------------- */

size_t rt_sg_packed_b_floats(int64_t k, int64_t n)
{
	const struct sg_path *sp = sg_path();

	return (size_t)(col_panels(sp, n) * sp->nr * k);
}

/* For each k block (at k0, kc deep): for each nr-column panel: kc x nr, k-major; columns past n are 0. */
void rt_sg_pack_b_strided(const float *b, int64_t ks, int64_t ns, int64_t k, int64_t n, float *bp)
{
	const struct sg_path *sp = sg_path();
	int64_t np = col_panels(sp, n), kcb = k_block_b(sp, k), nr = sp->nr;

	for (int64_t k0 = 0; k0 < k; k0 += kcb) {
		int64_t kc = k - k0 < kcb ? k - k0 : kcb;

		for (int64_t p = 0; p < np; p++) {
			float *dst = bp + k0 * np * nr + p * kc * nr;
			int64_t live = n - p * nr < nr ? n - p * nr : nr;

			if (live < nr)
				memset(dst, 0, (size_t)(kc * nr) * sizeof(float));
			/* along whichever of B's dims is contiguous, so the reads are (attention's Kᵀ: ks 1) */
			if (ks == 1 && ns != 1) {
				for (int64_t j = 0; j < live; j++) {
					const float *src = b + k0 + (p * nr + j) * ns;

					for (int64_t kk = 0; kk < kc; kk++)
						dst[kk * nr + j] = src[kk];
				}
				continue;
			}
			for (int64_t kk = 0; kk < kc; kk++) {
				const float *src = b + (k0 + kk) * ks + p * nr * ns;

				for (int64_t j = 0; j < live; j++)
					dst[kk * nr + j] = src[j * ns];
			}
		}
	}
}

void rt_sg_pack_b(const float *b, int64_t ldb, int64_t k, int64_t n, float *bp)
{
	rt_sg_pack_b_strided(b, ldb, 1, k, n, bp);
}

size_t rt_sg_scratch_a_floats(int64_t k)
{
	return (size_t)(RT_SG_MC_ROWS * k_block_b(sg_path(), k));
}

/* Rows per block of A: balanced (128 rows are one block, not 120 + 8), a multiple of the tile's rows. */
static int64_t row_block(const struct sg_path *sp, int64_t m)
{
	int64_t nb = (m + RT_SG_MC_ROWS - 1) / RT_SG_MC_ROWS, mc = nb > 0 ? (m + nb - 1) / nb : 1;

	mc = (mc + sp->mr - 1) / sp->mr * sp->mr;
	return mc < RT_SG_MC_ROWS ? mc : RT_SG_MC_ROWS;
}

/* Rows i0..i0+mc, k0..k0+kc of row-major a into mr-row panels (rows past m zero); mr is a path's tile
 * rows or its tail's (8, 6 or 4), and every path with packed kernels has AVX2. */
static void pack_a_rows(const float *a, int64_t lda, int64_t m, int64_t i0, int64_t mc, int64_t k0, int64_t kc,
			int64_t mr, float *abuf)
{
	(mr == SG512_MR ? pack_a_rows_8 : mr == RT_SG_MR ? pack_a_rows_6 : pack_a_rows_4)(a, lda, m, i0, mc, k0, kc,
											   abuf);
}

/*
 * How mc rows split into mr-row panels and then tail_mr-row ones (*tail of them), whichever leaves
 * the fewest rows computed on zeros: on AVX2 a remainder of 1 or 2 past the 6-row panels is two
 * 4-row panels in place of the last 6, of 3 or 4 one 4-row panel. \return the mr-row panels.
 */
static int64_t row_panels(const struct sg_path *sp, int64_t mc, int64_t *tail)
{
	int64_t whole = mc / sp->mr, left = mc % sp->mr;

	*tail = 0;
	if (sp->tail_mr == 0 || left == 0)
		return (mc + sp->mr - 1) / sp->mr;
	if (left <= 2 * sp->tail_mr - sp->mr && whole > 0) {
		*tail = 2;
		return whole - 1;
	}
	if (left <= sp->tail_mr) {
		*tail = 1;
		return whole;
	}
	return whole + 1;
}

void rt_sg_gemm_bpacked(int64_t m, int64_t n, int64_t k, const float *a, int64_t lda, const float *bp, float *c,
			int64_t ldc, float alpha, const float *col_bias, const struct rt_k_act_spec *act, float *abuf)
{
	const struct sg_path *sp = sg_path();
	int64_t mr_p = sp->mr, nr_p = sp->nr;
	int64_t np = col_panels(sp, n), kcb = k_block_b(sp, k), mcb = row_block(sp, m);

	if (m <= 0 || n <= 0)
		return;
	for (int64_t k0 = 0; k0 < k || (k == 0 && k0 == 0); k0 += kcb) {
		int64_t kc = k - k0 < kcb ? k - k0 : kcb;
		const float *bpk = bp + k0 * np * nr_p;

		for (int64_t i0 = 0; i0 < m; i0 += mcb) {
			int64_t mc = m - i0 < mcb ? m - i0 : mcb, tails, mains = row_panels(sp, mc, &tails);
			int64_t tail_i0 = i0 + mains * mr_p, end = i0 + mc; /* rows past end are zeros */
			float *tail_buf = abuf + mains * kc * mr_p;

			if (kc > 0) {
				pack_a_rows(a, lda, end, i0, mains * mr_p, k0, kc, mr_p, abuf);
				if (tails > 0)
					pack_a_rows(a, lda, end, tail_i0, tails * sp->tail_mr, k0, kc, sp->tail_mr, tail_buf);
			}
			for (int64_t jp = 0; jp < np; jp++) {
				int64_t j = jp * nr_p, nr = n - j < nr_p ? n - j : nr_p;
				struct tile_out t = {
					.first = k0 == 0, .last = k0 + kc >= k, .act = act, .alpha = alpha,
					.col_bias = col_bias != NULL ? col_bias + j : NULL,
				};

				for (int64_t ip = 0; ip < mains; ip++) {
					int64_t i = i0 + ip * mr_p, mr = end - i < mr_p ? end - i : mr_p;

					sp->kernel(kc, abuf + ip * kc * mr_p, bpk + jp * kc * nr_p, c + i * ldc + j, ldc, mr,
						   nr, &t);
				}
				for (int64_t ip = 0; ip < tails; ip++) {
					int64_t i = tail_i0 + ip * sp->tail_mr, mr = end - i < sp->tail_mr ? end - i : sp->tail_mr;

					sp->tail_kernel(kc, tail_buf + ip * kc * sp->tail_mr, bpk + jp * kc * nr_p,
							c + i * ldc + j, ldc, mr, nr, &t);
				}
			}
		}
		if (k == 0)
			break;
	}
}
