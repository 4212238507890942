/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Private to runtime/kernels: batchwire's own single-precision GEMM for convolutions, with the left
 * operand (the weights) packed once at load (sgemm.c says why and how).
 *
 *   C[m, n] = epilogue(A[m, k] . B[k, n]),  C row-major with leading dimension ldc
 *
 * For convolutions, A (the weights) comes pre-packed (rt_sg_pack_a, at load); B is packed per call,
 * block by block, by a packer the caller chooses: from a row-major matrix, or straight from an NCHW
 * image through the im2col geometry of a 2-D convolution (no column matrix is ever built). The
 * epilogue adds a bias per row and a residual z of C's layout, and applies Relu, LeakyRelu or Clip,
 * all on the tile in registers.
 *
 * For FusedGemm the weights are the right operand: B pre-packed (rt_sg_pack_b), the activations A
 * packed per call; the epilogue scales by alpha, adds a bias per column and applies any activation.
 */
#ifndef BW_RT_KERNELS_SGEMM_H
#define BW_RT_KERNELS_SGEMM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fused.h"

/* The tile and k blocks are the path's (sgemm.c: AVX2 6 x 16, AVX-512 8 x 32); these are AVX2's. */
#define RT_SG_MR 6     /* rows of the AVX2 micro-kernel's tile */
#define RT_SG_NR 16    /* columns: two AVX registers */
#define RT_SG_KC 256   /* most k per block: a B micro-panel (16 KiB) and an A one stay in L1 */
#define RT_SG_KC_B 384 /* FusedGemm's on AVX2: the transformer's K = 384 in one block (measured 2 % faster) */
#define RT_SG_MC 120   /* rows per A block (20 panels, 120 KiB at KC): L2 */
#define RT_SG_NC 512   /* columns per B block (512 KiB at KC): L2 */
#define RT_SG_ROWS_MIN 2 /* FusedGemm: one row of activations is a GEMV (OpenBLAS, on Bt); from 2 the packed kernel */
#define RT_SG_MC_ROWS 192 /* FusedGemm: most rows of activations per packed block (192 KiB at KC): L2 */

/** Whether the kernels run at AVX2 or above (rt_cpu_isa_active). Decided once, at load, by the optimizer. */
bool rt_sg_available(void);

/**
 * The micro-kernel that runs ("avx2 6x16", "avx512 8x32"; "none" below AVX2). It fixes the layout
 * of every packed operand, weights packed at load included: it is the instruction set's, chosen
 * once per process.
 */
const char *rt_sg_path_name(void);

/** Floats of A packed for m x k. */
size_t rt_sg_packed_floats(int64_t m, int64_t k);

/** Packs row-major a[m, k] (leading dimension lda) into ap (rt_sg_packed_floats(m, k) floats). */
void rt_sg_pack_a(const float *a, int64_t lda, int64_t m, int64_t k, float *ap);

/* Where B comes from. */
struct rt_sg_b {
	const float *x;          /* a row-major matrix [k, n] (ldb), or an image's channels [C][H][W] */
	int64_t ldb;
	const struct rt_k_window *conv; /* NULL: a matrix; else the 2-D geometry B is im2col of */
};

struct rt_sg_epilogue {
	const float *row_bias;   /* per row of C, or NULL */
	const float *z;          /* added, C's layout (ldc), or NULL */
	struct rt_k_act_spec act; /* NONE, RELU, LEAKY_RELU or CLIP */
};

/** Floats of scratch rt_sg_gemm needs for n columns and depth k. */
size_t rt_sg_scratch_floats(int64_t n, int64_t k);

/**
 * C = epilogue(A . B) with A pre-packed; bbuf holds rt_sg_scratch_floats(n, k) floats.
 * Allocates nothing.
 */
void rt_sg_gemm(int64_t m, int64_t n, int64_t k, const float *ap, const struct rt_sg_b *b, float *c, int64_t ldc,
		const struct rt_sg_epilogue *ep, float *bbuf);

/**
 * C = epilogue(A . B) for images side by side: B is `images` of what rt_sg_gemm takes (row-major
 * [k, cols] matrices, or images of b->conv's geometry with cols outputs), image i's at b->x + i *
 * x_image_stride, and C's (and the epilogue's z) at c + i * c_image_stride, each [m, cols]. One GEMM
 * of images * cols columns, so an image whose columns do not fill the last tile (7 x 7 = 49 against
 * 32 a tile) shares it with the next image's instead of zeros; the sums are the same, in the same
 * order, as rt_sg_gemm's per image. bbuf holds rt_sg_images_scratch_floats(cols, images, k) floats.
 * Allocates nothing.
 */
void rt_sg_gemm_images(int64_t m, int64_t cols, int64_t images, int64_t k, const float *ap, const struct rt_sg_b *b,
		       int64_t x_image_stride, float *c, int64_t c_image_stride, const struct rt_sg_epilogue *ep,
		       float *bbuf);

/** Floats of scratch rt_sg_gemm_images needs. */
size_t rt_sg_images_scratch_floats(int64_t cols, int64_t images, int64_t k);

/**
 * Whether rt_sg_gemm and rt_sg_gemm_images take depth k in one block: each element of C is then
 * stored once, by the epilogue, after it has read z's element there, so z may be C's own memory.
 * (Over more blocks the first stores partial sums before the last reads z.)
 */
bool rt_sg_one_block(int64_t k);

/** Columns of B per micro-kernel tile on the path chosen (16 or 32). */
int64_t rt_sg_tile_cols(void);

/**
 * Packs rows k0..k0+kc (kc <= RT_SG_KC) and columns j0..j0+nc of B into panels of nr columns
 * (16 or 32; zeros past nc), k-major, as rt_sg_gemm does for its own blocks: what amx.c's bf16 GEMM
 * rounds into its tiles.
 */
void rt_sg_pack_b_block(const struct rt_sg_b *b, int64_t k0, int64_t kc, int64_t j0, int64_t nc, int64_t nr,
			float *bp);

/* ---- the weights on the right (FusedGemm): C[m, n] = act(alpha * A . B + bias[n]) ------------------ */

/** Floats of B [k, n] packed into the path's column panels. */
size_t rt_sg_packed_b_floats(int64_t k, int64_t n);

/** Packs row-major b[k, n] (leading dimension ldb) into bp (rt_sg_packed_b_floats(k, n) floats). */
void rt_sg_pack_b(const float *b, int64_t ldb, int64_t k, int64_t n, float *bp);

/** rt_sg_pack_b for a B given through strides: element (kk, col) at b[kk * ks + col * ns]. */
void rt_sg_pack_b_strided(const float *b, int64_t ks, int64_t ns, int64_t k, int64_t n, float *bp);

/** Floats of scratch rt_sg_gemm_bpacked needs for depth k (a block of A's rows, packed). */
size_t rt_sg_scratch_a_floats(int64_t k);

/**
 * C = act(alpha * A . B + col_bias) with B pre-packed, A row-major (lda); act may be any activation,
 * Gelu included (applied to each tile's rows as they are stored). abuf: rt_sg_scratch_a_floats(k).
 */
void rt_sg_gemm_bpacked(int64_t m, int64_t n, int64_t k, const float *a, int64_t lda, const float *bp, float *c,
			int64_t ldc, float alpha, const float *col_bias, const struct rt_k_act_spec *act, float *abuf);

/* ---- small GEMMs, read in place (gemm_small.c) ---------------------------------------------------- */

#define RT_GEMM_SMALL_MNK_MAX 1e6 /* OpenBLAS's small-matrix bound: 100^3 multiply-adds */

/** Whether rt_k_gemm sends this call to the small direct GEMM: neither operand transposed, m*n*k small. */
bool rt_gemm_small_fits(bool ta, bool tb, int64_t m, int64_t n, int64_t k);

/**
 * C[m, n] = alpha * A[m, k] . B[k, n] + beta * C, row-major, at the kernels' instruction set; beta 0
 * never reads C. No packing and no scratch: for small sizes (rt_gemm_small_fits), any size works.
 */
void rt_gemm_small_f32(int64_t m, int64_t n, int64_t k, float alpha, const float *a, int64_t lda, const float *b,
		       int64_t ldb, float beta, float *c, int64_t ldc);
void rt_gemm_small_f64(int64_t m, int64_t n, int64_t k, double alpha, const double *a, int64_t lda, const double *b,
		       int64_t ldb, double beta, double *c, int64_t ldc);

#endif /* BW_RT_KERNELS_SGEMM_H */
