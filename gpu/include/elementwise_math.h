/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The per-element arithmetic of the elementwise ops the MLP and the transformer need on the GPU,
 * written once for both sides: BW_HD makes each function __host__ __device__ under nvcc and a plain
 * static inline function in C, so tests/gpu/test_hd_math.c runs the very code the device kernels run
 * (through program_math.h) against the ONNX node tests, on any CPU.
 *
 * Each expression is the CPU kernel's (runtime/kernels/unary.c, elementwise.c) for float, term for
 * term, so the two agree on NaN too: Relu(NaN) = 0, LeakyRelu(NaN) = NaN, Max and Min propagate a
 * NaN in either input (not fmaxf/fminf, which drop it), Clip passes a NaN through. Only float math
 * both sides have (expf, erff, tanhf, sqrtf, powf, fabsf).
 */
#ifndef BW_GPU_ELEMENTWISE_MATH_H
#define BW_GPU_ELEMENTWISE_MATH_H

#include <math.h>

#include <batchwire/compiler.h> /* BW_HD */

#define BW_LEAKY_RELU_ALPHA_DEFAULT 0.01f /* ONNX's default for LeakyRelu's alpha */
#define BW_SQRT1_2 0.70710678118654752f   /* 1 / sqrt(2), Gelu's erf argument scale */

/* ---- one input ------------------------------------------------------------------------------------ */

static inline BW_HD float bw_relu(float x)
{
	return x > 0.0f ? x : 0.0f;
}

static inline BW_HD float bw_leaky_relu(float x, float alpha)
{
	return x < 0.0f ? alpha * x : x;
}

/* lo and hi: -INFINITY and INFINITY where the model gives none. lo > hi gives hi, as ONNX says. */
static inline BW_HD float bw_clip(float x, float lo, float hi)
{
	return x < lo ? (lo > hi ? hi : lo) : x > hi ? hi : x;
}

/* Split at 0 so that exp never overflows into inf/inf. */
static inline BW_HD float bw_sigmoid(float x)
{
	return x >= 0.0f ? 1.0f / (1.0f + expf(-x)) : expf(x) / (1.0f + expf(x));
}

static inline BW_HD float bw_tanh(float x)
{
	return tanhf(x);
}

/* Gelu with approximate = "none" (the erf form), as the fused Gemm activation computes it. */
static inline BW_HD float bw_gelu(float x)
{
	return x * 0.5f * (1.0f + erff(x * BW_SQRT1_2));
}

static inline BW_HD float bw_exp(float x)
{
	return expf(x);
}

static inline BW_HD float bw_erf(float x)
{
	return erff(x);
}

static inline BW_HD float bw_sqrt(float x)
{
	return sqrtf(x);
}

static inline BW_HD float bw_reciprocal(float x)
{
	return 1.0f / x;
}

static inline BW_HD float bw_neg(float x)
{
	return -x;
}

static inline BW_HD float bw_abs(float x)
{
	return fabsf(x);
}

/* ---- two inputs ----------------------------------------------------------------------------------- */

static inline BW_HD float bw_add(float x, float y)
{
	return x + y;
}

static inline BW_HD float bw_sub(float x, float y)
{
	return x - y;
}

static inline BW_HD float bw_mul(float x, float y)
{
	return x * y;
}

static inline BW_HD float bw_div(float x, float y)
{
	return x / y;
}

/* Squaring (LayerNorm's variance, the common case) is exact, as in the CPU kernel. */
static inline BW_HD float bw_pow(float x, float y)
{
	return y == 2.0f ? x * x : powf(x, y);
}

/* A NaN in either input wins (ONNX Max/Min); x != x is the NaN test both compilers keep. */
static inline BW_HD float bw_max(float x, float y)
{
	return (x > y || x != x) ? x : y;
}

static inline BW_HD float bw_min(float x, float y)
{
	return (x < y || x != x) ? x : y;
}

/* Where: cond is the bool tensor's byte. */
static inline BW_HD float bw_where(unsigned char cond, float x, float y)
{
	return cond ? x : y;
}

#endif /* BW_GPU_ELEMENTWISE_MATH_H */
