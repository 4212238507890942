/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Private to runtime/kernels: 3x3, stride-1 convolutions by Winograd's F(2x2, 3x3) or F(4x4, 3x3)
 * on batchwire's GEMM (winograd.c says why and how). A form is named by its output tile's edge, 2
 * or 4. AVX2/FMA only, like sgemm.h: the optimizer packs weights for
 * it only where rt_sg_available().
 */
#ifndef BW_RT_KERNELS_WINOGRAD_H
#define BW_RT_KERNELS_WINOGRAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sgemm.h"

/** Whether a convolution of this geometry and group count is one the Winograd forms compute. */
bool rt_wg_applies(const struct rt_k_window *w, int64_t group);

/** Whether tile names a form: 2 (F(2x2, 3x3)) or 4 (F(4x4, 3x3)). */
bool rt_wg_tile_valid(int64_t tile);

/** The form for a conv of an out_h x out_w output (<= 0: not known): \return 2 or 4. */
int rt_wg_choose_tile(int64_t out_h, int64_t out_w);

/** Floats of the transformed, packed weights of m output and c input channels for a form. */
size_t rt_wg_packed_floats(int tile, int64_t m, int64_t c);

/**
 * Transforms 3x3 weights w [m][c][3][3] for a form and packs them into out (rt_wg_packed_floats).
 * At load only: it allocates a temporary. \return 0 or -ENOMEM.
 */
int rt_wg_pack_weights(int tile, const float *w, int64_t m, int64_t c, float *out);

/** Images of a batch of n that rt_wg_conv puts side by side in each GEMM (1 to n). */
int64_t rt_wg_group_images(int tile, const struct rt_k_window *w, int64_t n);

/** Floats of scratch rt_wg_conv needs for a group of images images (rt_wg_group_images). */
size_t rt_wg_scratch_floats(int tile, const struct rt_k_window *w, int64_t m, int64_t c, int64_t images);

/**
 * n images by a form: y [n][m][out] = act(conv(x [n][c][in], weights) + bias + z), z NULL or of
 * y's shape; scratch of rt_wg_scratch_floats(tile, w, m, c, rt_wg_group_images(tile, w, n))
 * floats. Allocates nothing.
 */
void rt_wg_conv(int tile, const struct rt_k_window *w, int64_t m, int64_t c, int64_t n, const float *x,
		const float *packed, float *y, const float *bias, const float *z, const struct rt_k_act_spec *act,
		float *scratch);

#endif /* BW_RT_KERNELS_WINOGRAD_H */
