/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Private to runtime/kernels: the kernels of batchwire's own domain ("ai.batchwire") that
 * rt_graph_optimize (runtime/opt/) rewrites ONNX nodes into, the vector math they share (vecmath.c),
 * and the GEMM call every linear-algebra kernel goes through (linalg.c).
 *
 * The ops (opset 1 of the domain), each computing exactly what the nodes it replaces computed, up
 * to float rounding:
 *
 *   FusedConv(X, W, B?, Z?)   Y = act(Conv(X, W) + B + Z): Conv's attributes, plus "activation" and
 *                             "activation_params" below. B is a BatchNormalization folded into the
 *                             weights at load, or the Conv's own bias; Z a residual of Y's shape.
 *   FusedGemm(A, B, C?, Bt?)  Y = act(alpha * A . B + C): A [..., K] (any rank >= 1, its rows
 *                             multiplied as one matrix), B [K, N] (pre-packed at load: a Gemm's
 *                             transB is applied once, there), C a bias of N values added to every
 *                             row, Bt the same B as [N, K], kept where a row count of 1 (a batch of
 *                             one) makes the call a GEMV that reads it faster; attribute alpha.
 *                             "packed_weights" (RT_K_PACKED_*) says how B was packed at load, and
 *                             "weight_shape" [K, N] its shape before: fp32 for sgemm.c (1-D
 *                             float), bf16 for AMX's tiles (bf16.h; 1-D bfloat16, no Bt).
 *                             With bf16 weights, "output_bf16" 1 writes Y in bf16 (for FusedGemms
 *                             only), and A may be bf16 (its depth a multiple of 32): read in place.
 *   FusedMatMul(A, B, C?)     Y = Reshape(Transpose(alpha * MatMul(A', B') + C, y_perm), y_shape) with
 *                             A' = Transpose(Reshape(A, a_shape), a_perm) and B' likewise: the
 *                             Reshape/Transpose pairs attention writes around its MatMuls, and the
 *                             scale after the scores, read and written through strides instead of
 *                             copied. Operands of equal rank <= 4 and equal batch dims; each matrix
 *                             row- or column-contiguous (infer refuses otherwise). C (attention's
 *                             mask) is [batch'..., 1, N], each batch' dim the product's or 1: one
 *                             row added to every row of a product, in its epilogue. Attribute
 *                             "bf16" 1 (precision bf16): each product on AMX tiles, its operands
 *                             rounded to bf16 as they are packed, fp32 accumulation.
 *   FusedAttention(Q, K, Mask?, V)  FusedMatMul(Softmax(FusedMatMul(Q, K, Mask)), V): the scores'
 *                             product with attributes prefixed "s_" (a_shape, a_perm, b_shape,
 *                             b_perm, alpha; no y_perm or y_shape), a last-axis softmax of them,
 *                             and the context's product with attributes prefixed "c_" (b_*, y_*,
 *                             alpha; its A is the scores as they are); "bf16" as FusedMatMul's.
 *                             One batch index's scores at a time, in scratch.
 *   Softmax(X)                softmax over the last axis, float (any opset's last-axis softmax).
 *   LayerNormalization(X, Scale, B?)  float, over the dims from 'axis' on; output 0 only.
 *   MaxPool(X)                2-D NCHW float, no Indices output, no dilation: ONNX MaxPool.
 *   FusedConvNhwc(X, W, B?, Z?)  FusedConv on NHWC bf16 tensors (precision bf16, amx level): X
 *                             [N, H, W, C] bf16; W packed at load by
 *                             rt_bf16_pack_b over k = (ky, kx, c), tap-major, "weight_shape" its
 *                             ONNX shape [M, C, kH, kW]; B fp32; Z and Y bf16 [N, Ho, Wo, M].
 *                             Ungrouped, undilated; Conv's strides, pads and auto_pad.
 *   MaxPoolNhwcBf16(X)        MaxPool (2-D, no Indices, no dilation) on NHWC bf16.
 *   ToNhwcBf16(X)             NCHW float -> NHWC bf16 (rounded to nearest even), and
 *   FromNhwcBf16(X)           NHWC bf16 -> NCHW float: the edges of a region of FusedConvNhwc.
 *
 * Activations ("activation", a string; "activation_params", floats):
 *   "" or absent: none; "Relu"; "LeakyRelu" [alpha]; "Clip" [min, max]; "Gelu": x * 0.5 *
 *   (1 + erf(x / sqrt(2))), the exact (erf) GELU that exporters write as five nodes.
 */
#ifndef BW_RT_KERNELS_FUSED_H
#define BW_RT_KERNELS_FUSED_H

#include <stdbool.h>
#include <stdint.h>

#include "kernels.h"

/* The domain, the activations (rt_k_act_spec, rt_k_act_read) and the window geometry are
 * fused_ops.h's: a device runtime's kernels read them too. */

/* FusedGemm's "packed_weights": how input B was packed at load (0 or absent: not packed). */
#define RT_K_PACKED_FP32 1 /* sgemm.c's panels, rt_sg_pack_b */
#define RT_K_PACKED_BF16 2 /* AMX's tiles, rt_bf16_pack_b (precision bf16) */

/* ---- vector math (vecmath.c): AVX2/FMA where the CPU has them, chosen when the program loads ------ */

/** y[i] = act(y[i]) for n floats. */
void rt_vm_act(float *y, int64_t n, const struct rt_k_act_spec *act);

/** y[r * n + j] = bias[j] (+ z[r * n + j] when z): the GEMM's C before it accumulates into it. */
void rt_vm_fill_rows(float *y, const float *bias, const float *z, int64_t rows, int64_t n);

/** y[i] = v (+ z[i] when z) for n floats: one channel's bias (and residual) before a conv's GEMM. */
void rt_vm_fill(float *y, float v, const float *z, int64_t n);

/** Softmax of each of rows rows of n contiguous floats. */
void rt_vm_softmax_rows(float *y, const float *x, int64_t rows, int64_t n);

/**
 * LayerNormalization of rows rows of n floats: (x - mean) / sqrt(var + eps) * scale + bias, scale and
 * bias of n_scale / n_bias elements (n or 1; bias NULL: none).
 */
void rt_vm_layernorm_rows(float *y, const float *x, int64_t rows, int64_t n, const float *scale, int64_t n_scale,
			  const float *bias, int64_t n_bias, float eps);

/** expf and erff of n floats (the vector versions the kernels use, for the tests). */
void rt_vm_exp(float *y, const float *x, int64_t n);
void rt_vm_erf(float *y, const float *x, int64_t n);

/* ---- the GEMM call (linalg.c) ------------------------------------------------------------------------ */

/**
 * C[m, n] = alpha * op(A)[m, k] . op(B)[k, n] + beta * C, row-major, float or double, on OpenBLAS;
 * one row (m == 1) goes to GEMV, small untransposed products to rt_gemm_small_*. beta 0 never
 * reads C. Allocates nothing.
 */
void rt_k_gemm(uint8_t dtype, bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const void *a,
	       int64_t lda, const void *b, int64_t ldb, float beta, void *c, int64_t ldc);

/** BLAS dims are int: \return whether v fits. */
static inline bool rt_k_blas_dim_ok(int64_t v)
{
	return v >= 0 && v <= INT32_MAX;
}

/* ---- entry points (cpu.c's table) -------------------------------------------------------------------- */

/* conv.c */
RT_K_DECLARE(fused_conv);
RT_K_SCRATCH(fused_conv);
/* Output over the residual Z (input 3) where the conv's path reads it only at the element it writes. */
int rt_k_fused_conv_in_place(const struct rt_node *node, const struct rt_tensor *inputs, const struct rt_tensor *outputs);
/* linalg.c */
RT_K_DECLARE(fused_gemm);
RT_K_DECLARE(fused_matmul);
RT_K_SCRATCH(fused_matmul);
RT_K_DECLARE(fused_attention);
RT_K_SCRATCH(fused_attention);
RT_K_SCRATCH(fused_gemm);
/* fastpath.c */
RT_K_DECLARE(fast_softmax);
RT_K_DECLARE(fast_layernorm);
RT_K_DECLARE(fast_maxpool);
RT_K_SCRATCH(fast_maxpool);
/* conv_nhwc.c */
RT_K_DECLARE(fused_conv_nhwc);
RT_K_SCRATCH(fused_conv_nhwc);
/* Output over the residual Z (input 3), which the epilogue reads only at the element it writes. */
int rt_k_fused_conv_nhwc_in_place(const struct rt_node *node, const struct rt_tensor *inputs,
				  const struct rt_tensor *outputs);
RT_K_DECLARE(to_nhwc_bf16);
RT_K_DECLARE(from_nhwc_bf16);
RT_K_DECLARE(maxpool_nhwc_bf16);

#endif /* BW_RT_KERNELS_FUSED_H */
