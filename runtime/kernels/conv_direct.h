/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Private to runtime/kernels: 2-D convolutions of few input channels computed with output pixels as
 * the GEMM's rows and output channels as its columns, reading the image in place (conv_direct.c says
 * why and how). AVX2 and AVX-512 (the same packed weights, each level's own tiles): the optimizer
 * packs weights for it only where rt_dc_available().
 */
#ifndef BW_RT_KERNELS_CONV_DIRECT_H
#define BW_RT_KERNELS_CONV_DIRECT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sgemm.h"

/* Deepest k (input channels x taps) taken: a block's weights (k x 32 floats, 32 KiB) stay in L1. */
#define RT_DC_K_MAX 256

/* How the output is cut into tiles, and with it how the weights are packed ("direct" of FusedConv). */
enum rt_dc_tiles {
	RT_DC_PIXELS = 1, /* 8 output pixels (anywhere in the image) x 32 output channels (AVX2: 6 x 16) */
	RT_DC_ROWS = 2,   /* 8 output channels x 32 pixels along one output row (AVX2: 4 x 16): stride 1 only */
};

/** Whether the kernels run at AVX2 or above (rt_cpu_isa_active), the lowest level with these tiles. */
bool rt_dc_available(void);

/**
 * Whether a convolution of nsp spatial dims, group count, depth k (input channels x taps) and
 * strides (nsp of them) is one rt_dc_conv computes with these tiles.
 */
bool rt_dc_applies(enum rt_dc_tiles tiles, int nsp, int64_t group, int64_t k, const int64_t *strides);

/** Floats of the packed weights of m output channels and depth k. */
size_t rt_dc_packed_floats(enum rt_dc_tiles tiles, int64_t m, int64_t k);

/** Packs ONNX weights w [m][k] (k = C x kH x kW) into out (rt_dc_packed_floats): blocks of channels, k-major. */
void rt_dc_pack_weights(enum rt_dc_tiles tiles, const float *w, int64_t m, int64_t k, float *out);

/** Bytes of scratch rt_dc_conv needs for images of c channels. */
size_t rt_dc_scratch_bytes(const struct rt_k_window *w, int64_t c);

/**
 * Whether rt_dc_conv takes a 2x2, stride-2 MaxPool into these tiles at the active level: row tiles
 * from AVX2 up, pixel tiles at AVX2 (the AVX-512 path has no pooled pixel tile).
 */
bool rt_dc_pool_applies(enum rt_dc_tiles tiles);

/**
 * n images: y [n][m][out] = act(conv(x [n][c][in], weights) + bias + z), bias and z NULL or as in
 * FusedConv, z of y's shape. With pool (where rt_dc_pool_applies(tiles), z NULL), y is that output
 * through a 2x2, stride-2 MaxPool, [n][m][oh/2][ow/2]. Allocates nothing; scratch holds
 * rt_dc_scratch_bytes.
 */
void rt_dc_conv(enum rt_dc_tiles tiles, const struct rt_k_window *w, int64_t n, int64_t m, int64_t c,
		const float *x, const float *packed, float *y, const float *bias, const float *z,
		const struct rt_k_act_spec *act, bool pool, void *scratch);

#endif /* BW_RT_KERNELS_CONV_DIRECT_H */
