/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Private to runtime/kernels: the bf16 GEMMs on AMX tiles (amx.c) that a CPU model with precision
 * bf16 runs its FusedGemms, convolutions and attention products on, fp32 accumulation:
 *
 *   C[m, n] = act(alpha * bf16(A)[m, k] . W[k, n] + bias[n] (+ Z))
 *
 * W is rounded and packed at load (rt_bf16_pack_b) into the tiles' VNNI layout. A is read in
 * place where it is bf16 already (rt_bf16_gemm_rows: an NHWC image, a FusedGemm's bf16 input), or
 * rounded from fp32 block by block into scratch (rt_bf16_gemm_a32, rt_bf16_gemm_bpacked); C is fp32
 * or bf16 as the epilogue says. Grouped and dilated convs keep NCHW fp32 with the weights on the
 * left (rt_bf16_gemm_apacked). Only on a CPU whose kernels run at the AMX level (rt_bf16_available).
 */
#ifndef BW_RT_KERNELS_BF16_H
#define BW_RT_KERNELS_BF16_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fused.h"

#define RT_BF16_ROWS_BLOCK 256 /* rows of A rounded to bf16 at once (scratch: 256 x k x 2 bytes) */

/** Whether the kernels run at the AMX level (AMX-TILE, AMX-BF16, AVX512-BF16, the kernel's permission). */
bool rt_bf16_available(void);

/** bf16 elements of W [k, n] packed for the tiles (k and n rounded up to 32). */
size_t rt_bf16_packed_b_elems(int64_t k, int64_t n);

/** Rounds (to nearest even) and packs w, element (kk, col) at w[kk * ks + col * ns], into wp. */
void rt_bf16_pack_b(const float *w, int64_t ks, int64_t ns, int64_t k, int64_t n, uint16_t *wp);

/**
 * rt_bf16_pack_b for an operand packed per call (attention's K and V): vector code where the
 * columns (ns 1) or the k values (ks 1) are contiguous, the scalar loop otherwise. At the amx level.
 */
void rt_bf16_pack_b_fast(const float *w, int64_t ks, int64_t ns, int64_t k, int64_t n, uint16_t *wp);

/** Bytes of scratch rt_bf16_gemm_bpacked needs for m rows and depth k. */
size_t rt_bf16_scratch_bytes(int64_t m, int64_t k);

/**
 * C = act(alpha * A . W + col_bias) with W packed by rt_bf16_pack_b; A row-major fp32 (lda), C
 * row-major (ldc); act any activation. scratch: rt_bf16_scratch_bytes(m, k), 64-byte aligned.
 * Allocates nothing, makes no system call; the tiles are configured on entry and released on return.
 */
void rt_bf16_gemm_bpacked(int64_t m, int64_t n, int64_t k, const float *a, int64_t lda, const uint16_t *wp, float *c,
			  int64_t ldc, float alpha, const float *col_bias, const struct rt_k_act_spec *act, void *scratch);

/**
 * rt_bf16_gemm_bpacked with the epilogue's options (C in bf16 where ep->c_fp32 is false: a FusedGemm
 * whose output only FusedGemms read; ep->z unused).
 */
struct rt_bf16_epilogue;
void rt_bf16_gemm_a32(int64_t m, int64_t n, int64_t k, const float *a, int64_t lda, const uint16_t *wp,
		      const struct rt_bf16_epilogue *ep, void *c, void *scratch);

/* ---- weights on the left (convolutions): C[m, n] = epilogue(W[m, k] . B[k, n]) -------------------- */

/** bf16 elements of W [m, k] packed as AMX A tiles (m rounded up to 32, k to 32). */
size_t rt_bf16_packed_a_elems(int64_t m, int64_t k);

/** Rounds and packs row-major w [m, k] (leading dimension ldw) into wp. */
void rt_bf16_pack_a(const float *w, int64_t ldw, int64_t m, int64_t k, uint16_t *wp);

/** Bytes of scratch rt_bf16_gemm_apacked needs for n columns and depth k (B in bf16, its fp32 staging). */
size_t rt_bf16_apacked_scratch_bytes(int64_t n, int64_t k);

/**
 * C = epilogue(W . B), W packed by rt_bf16_pack_a, B a matrix or an image through a conv's
 * geometry (sgemm.h's struct rt_sg_b), packed per call into bf16 tiles; the epilogue's row bias,
 * residual z and activation applied in fp32 (sgemm.h's struct rt_sg_epilogue). scratch:
 * rt_bf16_apacked_scratch_bytes(n, k), 64-byte aligned. Allocates nothing, makes no system call.
 */
struct rt_sg_b;
struct rt_sg_epilogue;
void rt_bf16_gemm_apacked(int64_t m, int64_t n, int64_t k, const uint16_t *wp, const struct rt_sg_b *b, float *c,
			  int64_t ldc, const struct rt_sg_epilogue *ep, void *scratch);

/* ---- activations on the left, bf16 in memory (NHWC convolutions) --------------------------------- */

/*
 * The rows of A read straight by the tiles from bf16 memory, without packing: row q's k values for
 * tap t are the depth values at base + q * row_stride + tap_off[t] (depth a multiple of 32, k =
 * ntaps * depth, tap-major). A 1x1 conv on an NHWC image is one tap (its pixels are the rows); a
 * stride-1 conv on an NHWC image padded around is kh * kw taps, each a constant offset from the
 * output pixel's own position in the padded image (the grid below says which rows are pixels).
 */
struct rt_bf16_rows {
	const uint16_t *base;
	int64_t row_stride; /* elements */
	int64_t depth;      /* elements per tap, a multiple of 32 */
	int ntaps;
	const int64_t *tap_off; /* elements, ntaps of them */
};

/*
 * Which of the GEMM's rows are output pixels: rows come in images of per_image rows, width to a
 * grid row, and only grid rows below valid_h and columns below valid_w are pixels; pixel (image, y,
 * x) is row (image * valid_h + y) * valid_w + x of C. A dense grid (width valid_w, per_image
 * valid_h * valid_w) maps every row q to row q.
 */
struct rt_bf16_grid {
	int64_t per_image, width, valid_h, valid_w;
};

/* What rt_bf16_gemm_rows does with each block of products before it stores it. */
struct rt_bf16_epilogue {
	float alpha;              /* the products scaled (1: a conv) */
	const float *bias;        /* fp32 per column, or NULL */
	const uint16_t *z;        /* a bf16 residual laid out as C, or NULL */
	struct rt_k_act_spec act; /* any activation, Gelu included */
	int64_t ldc;              /* elements from one row of C (and of Z) to the next */
	bool c_fp32;              /* C is fp32 (else bf16) */
};

/**
 * C = act(alpha * A . W + bias + Z) for m rows of A (struct rt_bf16_rows) and n columns, W packed
 * by rt_bf16_pack_b over k = ntaps * depth; the rows that are pixels (struct rt_bf16_grid) are
 * stored, fp32 accumulation and epilogue. A is read only at the rows below m and the offsets its
 * taps name. Allocates nothing, makes no system call; the tiles are configured on entry and
 * released on return.
 */
void rt_bf16_gemm_rows(int64_t m, int64_t n, const struct rt_bf16_rows *a, const struct rt_bf16_grid *grid,
		       const uint16_t *wp, const struct rt_bf16_epilogue *ep, void *c);

/* ---- attention on the tiles ------------------------------------------------------------------------ */

/*
 * One head of attention, y = softmax(alpha * Q . Kᵀ + mask) . V * c_alpha: m query rows of depth d,
 * n keys, dv columns of V. K and V come packed as rt_bf16_pack_b_fast packs a B (Kᵀ: d x n; V:
 * n x dv); Q is fp32, rounded here.
 */
struct rt_bf16_attention {
	int64_t m, n, d, dv;
	const float *q;          /* m rows of d, ldq apart */
	int64_t ldq;
	const uint16_t *k_tiles; /* Kᵀ, d x n */
	const uint16_t *v_tiles; /* V, n x dv */
	const float *mask;       /* n values added to every row of the scores, or NULL */
	float alpha, c_alpha;    /* the scores' scale, the context's */
	float *y;                /* m rows of dv, ldy apart */
	int64_t ldy;
};

/**
 * Attention's softmax for the tiles: for each of rows rows of x (ldx apart), s = alpha * x + mask
 * (n values added to every row, or NULL) and e = exp(s - max s) over its n values; e rounded to
 * bf16 into p (rows ldp apart, zeros from n to n_pad), and inv[r] = scale / sum(e): the division
 * of ONNX's Softmax moved past the product with V, where it is one multiply a value of the context.
 * x is scratch: it holds s on return.
 * vecmath_avx512.c's, with the vector math's exp; AVX512-BF16 only (the amx level).
 */
void rt_bf16_softmax_rows(float *x, int64_t ldx, int64_t rows, int64_t n, float alpha, const float *mask,
			  uint16_t *p, int64_t ldp, int64_t n_pad, float scale, float *inv);

/** Scratch rt_bf16_attention needs for n keys of depth d (64-byte aligned). */
size_t rt_bf16_attention_scratch_bytes(int64_t n, int64_t d);

/**
 * The head 32 query rows at a time, each block's scores, softmax and context in L1: the scores of
 * 32 rows go from the tiles to fp32 scratch, rt_bf16_softmax_rows makes their exponentials the
 * bf16 A of the context's product, whose epilogue applies each row's 1 / sum. Nothing of the scores
 * reaches the arena; allocates nothing, makes no system call.
 */
void rt_bf16_attention(const struct rt_bf16_attention *at, void *scratch);

/**
 * The depth k of an NHWC bf16 conv's packed weights (FusedConvNhwc's W: rt_bf16_pack_b of k x m)
 * for c input channels, a kh x kw kernel and strides [2]: kh * kw * c, its taps (ky, kx, c) as
 * they lie in the image, but for a stride-2 conv of at most 4 channels, which conv_nhwc.c runs as
 * a stride-1 conv over a space-to-depth copy of its image (each 2 x 2 block of pixels one pixel of
 * 16 channels) and whose weights follow that copy.
 */
int64_t rt_bf16_conv_depth(int64_t c, int64_t kh, int64_t kw, const int64_t *strides);

/**
 * w [m, c, kh, kw] (ONNX's layout) as the k x m matrix (rt_bf16_conv_depth's k) whose
 * rt_bf16_pack_b FusedConvNhwc reads; kn holds k * m floats.
 */
void rt_bf16_conv_weights_kn(const float *w, int64_t m, int64_t c, int64_t kh, int64_t kw, const int64_t *strides,
			     float *kn);

/** One image NCHW fp32 [c, hw] -> NHWC bf16 [hw, c], rounded to nearest even. At the amx level. */
void rt_bf16_nchw_to_nhwc(const float *x, int64_t c, int64_t hw, uint16_t *y);

/** One image NHWC bf16 [hw, c] -> NCHW fp32 [c, hw] (exact). At the amx level. */
void rt_bf16_nhwc_to_nchw(const uint16_t *x, int64_t c, int64_t hw, float *y);

/** fp32 -> bf16, round to nearest even (NaN stays NaN): what the packing and the conversion do. */
uint16_t rt_bf16_from_float(float f);

#endif /* BW_RT_KERNELS_BF16_H */
