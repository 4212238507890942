/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Private to runtime/kernels: 3x3, stride-1 convolutions by Winograd's F(2x2, 3x3) on batchwire's
 * GEMM (winograd.c says why and how). AVX2/FMA only, like sgemm.h: the optimizer packs weights for
 * it only where rt_sg_available().
 */
#ifndef BW_RT_KERNELS_WINOGRAD_H
#define BW_RT_KERNELS_WINOGRAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sgemm.h"

/** Whether a convolution of this geometry and group count is one F(2x2, 3x3) computes. */
bool rt_wg_applies(const struct rt_k_window *w, int64_t group);

/** Floats of the transformed, packed weights of m output and c input channels. */
size_t rt_wg_packed_floats(int64_t m, int64_t c);

/**
 * Transforms 3x3 weights w [m][c][3][3] and packs them into out (rt_wg_packed_floats). At load
 * only: it allocates a temporary. \return 0 or -ENOMEM.
 */
int rt_wg_pack_weights(const float *w, int64_t m, int64_t c, float *out);

/** Images of a batch of n that rt_wg_conv puts side by side in each GEMM (1 to n). */
int64_t rt_wg_group_images(const struct rt_k_window *w, int64_t n);

/** Floats of scratch rt_wg_conv needs for a group of images images (rt_wg_group_images). */
size_t rt_wg_scratch_floats(const struct rt_k_window *w, int64_t m, int64_t c, int64_t images);

/**
 * n images: y [n][m][out] = act(conv(x [n][c][in], weights) + bias + z), z NULL or of y's shape;
 * scratch of rt_wg_scratch_floats(w, m, c, rt_wg_group_images(w, n)) floats. Allocates nothing.
 */
void rt_wg_conv(const struct rt_k_window *w, int64_t m, int64_t c, int64_t n, const float *x, const float *packed,
		float *y, const float *bias, const float *z, const struct rt_k_act_spec *act, float *scratch);

#endif /* BW_RT_KERNELS_WINOGRAD_H */
