/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Convolutions on NHWC bf16 tensors (precision bf16, the CPU at the amx level), and the two
 * conversions at the edges of the region of a graph that runs them (fused.h: FusedConvNhwc,
 * ToNhwcBf16, FromNhwcBf16).
 *
 * Why NHWC in bf16: with an image's channels contiguous, the pixels of a 1x1 conv are the rows of
 * the GEMM's A as they lie in memory, and AMX's tiles load them in place (rt_bf16_gemm_rows); a
 * stride-1 kh x kw conv is kh * kw such GEMMs at constant offsets into a zero-padded copy of the
 * image, summed in the same accumulators. NCHW fp32, where every conv packed an im2col of its
 * image into fp32 panels and rounded those into tiles, spent half of ResNet-50's time on that
 * packing and on fp32 stores. Tensors between these convs are bf16, so each layer also reads and
 * writes half the bytes. Strided convs gather their im2col rows (bf16, channels contiguous per tap)
 * into scratch, one memcpy per pixel and tap.
 */
#include <inttypes.h>
#include <string.h>

#include "bf16.h"
#include "fused.h"

/* The most taps (kh * kw) a stride-1 conv sums as offsets; a larger kernel gathers. */
#define NHWC_TAPS_MAX 49

enum nhwc_mode {
	NHWC_DIRECT, /* 1x1, stride 1, no padding: A is X itself */
	NHWC_PADDED, /* stride 1: a zero-padded copy of X, one offset per tap */
	NHWC_GATHER, /* any other: im2col rows gathered into scratch */
};

struct nhwc_plan {
	int64_t n, h, w, c, m, kh, kw, ho, wo, hp, wp; /* hp x wp: the padded image */
	struct rt_k_window win;
	enum nhwc_mode mode;
};

static int nhwc_plan(const struct rt_node *node, const struct rt_tensor *inputs, struct nhwc_plan *p, char *err,
		     size_t err_cap)
{
	const struct rt_attr *shape = rt_node_attr(node, "weight_shape");
	const struct rt_tensor *x = &inputs[0];
	struct rt_tensor x_nchw = { .dtype = BW_DTYPE_FLOAT, .rank = 4 };
	int64_t group;
	int rc;

	memset(p, 0, sizeof(*p));
	if ((rc = rt_k_need_input(node, inputs, 0, "X", RT_DTYPE_BIT(BW_DTYPE_BFLOAT16), err, err_cap)) < 0 ||
	    (rc = rt_k_need_input(node, inputs, 1, "W", RT_DTYPE_BIT(BW_DTYPE_BFLOAT16), err, err_cap)) < 0 ||
	    (rc = rt_k_attr_int(node, "group", 1, &group, err, err_cap)) < 0)
		return rc;
	if (!rt_bf16_available())
		return bw_err(err, err_cap, -ENOTSUP, "NHWC bf16 convolutions need the CPU kernels at the amx level");
	if (shape == NULL || shape->type != RT_ATTR_INTS || shape->count != 4)
		return bw_err(err, err_cap, -EINVAL, "attribute 'weight_shape' must be 4 ints");
	if (x->rank != 4 || group != 1)
		return bw_err(err, err_cap, -EINVAL, "input 'X' must be 4-D NHWC, the conv ungrouped");
	p->n = x->dims[0];
	p->h = x->dims[1];
	p->w = x->dims[2];
	p->c = x->dims[3];
	p->m = shape->ints[0];
	p->kh = shape->ints[2];
	p->kw = shape->ints[3];
	if (p->h < 0 || p->w < 0 || p->c < 0)
		return bw_err(err, err_cap, -ENOTSUP, "symbolic spatial or channel dims are not supported");
	if (shape->ints[1] != p->c || p->c % 32 != 0 || p->m < 1 || p->kh < 1 || p->kw < 1)
		return bw_err(err, err_cap, -EINVAL, "weight_shape [%" PRId64 ",%" PRId64 ",%" PRId64 ",%" PRId64
			      "] does not fit 'X' of %" PRId64 " channels (a multiple of 32)", shape->ints[0],
			      shape->ints[1], shape->ints[2], shape->ints[3], p->c);
	x_nchw.dims[0] = p->n;
	x_nchw.dims[1] = p->c;
	x_nchw.dims[2] = p->h;
	x_nchw.dims[3] = p->w;
	if ((rc = rt_k_window_init(node, &x_nchw, &shape->ints[2], false, true, &p->win, err, err_cap)) < 0)
		return rc;
	if (p->win.dilation[0] != 1 || p->win.dilation[1] != 1)
		return bw_err(err, err_cap, -EINVAL, "NHWC convolutions are undilated");
	p->ho = p->win.out[0];
	p->wo = p->win.out[1];
	if (p->ho < 1 || p->wo < 1)
		return bw_err(err, err_cap, -EINVAL, "the output would be empty");
	if (inputs[1].rank != 1 || rt_tensor_elems(&inputs[1]) != (int64_t)rt_bf16_packed_b_elems(p->kh * p->kw * p->c, p->m))
		return bw_err(err, err_cap, -EINVAL, "input 'W' must hold %zu packed bf16 values",
			      rt_bf16_packed_b_elems(p->kh * p->kw * p->c, p->m));
	p->hp = p->h + p->win.pad_begin[0] + p->win.pad_end[0];
	p->wp = p->w + p->win.pad_begin[1] + p->win.pad_end[1];
	if (p->win.stride[0] != 1 || p->win.stride[1] != 1 || p->kh * p->kw > NHWC_TAPS_MAX)
		p->mode = NHWC_GATHER;
	else if (p->kh == 1 && p->kw == 1 && p->hp == p->h && p->wp == p->w)
		p->mode = NHWC_DIRECT;
	else
		p->mode = NHWC_PADDED;
	return 0;
}

RT_K_INFER(fused_conv_nhwc)
{
	struct rt_k_act_spec act;
	struct nhwc_plan p;
	struct rt_tensor *y = &outputs[0];
	int rc = nhwc_plan(node, inputs, &p, err, err_cap);

	if (rc < 0 || (rc = rt_k_act_read(node, &act, err, err_cap)) < 0)
		return rc;
	if (act.kind == RT_K_ACT_GELU)
		return bw_err(err, err_cap, -ENOTSUP, "FusedConvNhwc does not apply Gelu");
	*y = (struct rt_tensor){ .dtype = BW_DTYPE_BFLOAT16, .rank = 4, .dims = { p.n, p.ho, p.wo, p.m } };
	if (rt_k_has_input(node, inputs, 2) && (inputs[2].dtype != BW_DTYPE_FLOAT || inputs[2].rank != 1 ||
						inputs[2].dims[0] != p.m))
		return bw_err(err, err_cap, -EINVAL, "input 'B' must be %" PRId64 " floats", p.m);
	if (rt_k_has_input(node, inputs, 3)) {
		const struct rt_tensor *z = &inputs[3];

		if (z->dtype != BW_DTYPE_BFLOAT16 || z->rank != 4 || memcmp(z->dims, y->dims, 4 * sizeof(int64_t)) != 0)
			return bw_err(err, err_cap, -EINVAL, "input 'Z' must be bf16 of the output's shape");
	}
	return 0;
}

RT_K_SCRATCH(fused_conv_nhwc)
{
	struct nhwc_plan p;
	char err[RT_ERR_MAX];

	if (nhwc_plan(node, inputs, &p, err, sizeof(err)) < 0 || p.n < 0)
		return 0;
	switch (p.mode) {
	case NHWC_PADDED: return (size_t)(p.n * p.hp * p.wp * p.c) * sizeof(uint16_t);
	case NHWC_GATHER: return (size_t)(p.n * p.ho * p.wo * p.kh * p.kw * p.c) * sizeof(uint16_t);
	default: return 0;
	}
}

/* X into the interior of its zero-padded copy. */
static void pad_copy(const struct nhwc_plan *p, const uint16_t *x, uint16_t *xp)
{
	int64_t top = p->win.pad_begin[0], left = p->win.pad_begin[1], right = p->wp - p->w - left;
	size_t px = (size_t)p->c * sizeof(uint16_t);

	for (int64_t b = 0; b < p->n; b++) {
		for (int64_t y = 0; y < p->hp; y++) {
			uint16_t *row = xp + ((b * p->hp + y) * p->wp) * p->c;
			int64_t iy = y - top;

			if (iy < 0 || iy >= p->h) {
				memset(row, 0, (size_t)p->wp * px);
				continue;
			}
			memset(row, 0, (size_t)left * px);
			memcpy(row + left * p->c, x + ((b * p->h + iy) * p->w) * p->c, (size_t)p->w * px);
			memset(row + (left + p->w) * p->c, 0, (size_t)right * px);
		}
	}
}

/* Each output pixel's row: for every tap (ky, kx) the input pixel's c channels, or zeros in the padding. */
static void gather_rows(const struct nhwc_plan *p, const uint16_t *x, uint16_t *rows)
{
	size_t px = (size_t)p->c * sizeof(uint16_t);

	for (int64_t b = 0; b < p->n; b++) {
		for (int64_t oy = 0; oy < p->ho; oy++) {
			for (int64_t ox = 0; ox < p->wo; ox++) {
				uint16_t *r = rows + ((b * p->ho + oy) * p->wo + ox) * p->kh * p->kw * p->c;

				for (int64_t ky = 0; ky < p->kh; ky++) {
					int64_t iy = oy * p->win.stride[0] + ky - p->win.pad_begin[0];

					for (int64_t kx = 0; kx < p->kw; kx++, r += p->c) {
						int64_t ix = ox * p->win.stride[1] + kx - p->win.pad_begin[1];

						if (iy < 0 || iy >= p->h || ix < 0 || ix >= p->w)
							memset(r, 0, px);
						else
							memcpy(r, x + ((b * p->h + iy) * p->w + ix) * p->c, px);
					}
				}
			}
		}
	}
}

RT_K_RUN(fused_conv_nhwc)
{
	struct rt_k_act_spec act;
	struct nhwc_plan p;
	int64_t tap_off[NHWC_TAPS_MAX] = { 0 }, rows;
	struct rt_bf16_rows a = { .ntaps = 1, .tap_off = tap_off };
	struct rt_bf16_grid grid;
	const float *bias = rt_k_has_input(node, inputs, 2) ? inputs[2].data : NULL;
	const uint16_t *z = rt_k_has_input(node, inputs, 3) ? inputs[3].data : NULL;
	int rc = nhwc_plan(node, inputs, &p, err, err_cap);

	if (rc < 0 || (rc = rt_k_act_read(node, &act, err, err_cap)) < 0)
		return rc;
	if (p.n == 0)
		return 0;
	if (p.mode != NHWC_DIRECT && scratch == NULL)
		return bw_err(err, err_cap, -EINVAL, "FusedConvNhwc needs scratch memory and got none");
	grid = (struct rt_bf16_grid){ .per_image = p.ho * p.wo, .width = p.wo, .valid_h = p.ho, .valid_w = p.wo };
	rows = p.n * p.ho * p.wo;
	switch (p.mode) {
	case NHWC_DIRECT:
		a.base = inputs[0].data;
		a.row_stride = a.depth = p.c;
		break;
	case NHWC_PADDED:
		pad_copy(&p, inputs[0].data, scratch);
		a.base = scratch;
		a.row_stride = a.depth = p.c;
		a.ntaps = (int)(p.kh * p.kw);
		for (int64_t ky = 0; ky < p.kh; ky++)
			for (int64_t kx = 0; kx < p.kw; kx++)
				tap_off[ky * p.kw + kx] = (ky * p.wp + kx) * p.c;
		/* the output pixel (y, x) sits at (y, x) of the padded grid; the last image's rows past its
		 * last pixel are not computed, so no tap reads past the copy */
		grid = (struct rt_bf16_grid){ .per_image = p.hp * p.wp, .width = p.wp, .valid_h = p.ho, .valid_w = p.wo };
		rows = (p.n - 1) * p.hp * p.wp + (p.ho - 1) * p.wp + p.wo;
		break;
	case NHWC_GATHER:
		gather_rows(&p, inputs[0].data, scratch);
		a.base = scratch;
		a.row_stride = a.depth = p.kh * p.kw * p.c;
		break;
	}
	rt_bf16_gemm_rows(rows, p.m, &a, &grid, inputs[1].data, bias, z, &act, outputs[0].data);
	return 0;
}

/* ---- the region's edges ------------------------------------------------------------------------- */

RT_K_INFER(to_nhwc_bf16)
{
	const struct rt_tensor *x = &inputs[0];
	int rc = rt_k_need_input(node, inputs, 0, "X", RT_DTYPE_BIT(BW_DTYPE_FLOAT), err, err_cap);

	if (rc < 0)
		return rc;
	if (x->rank != 4)
		return bw_err(err, err_cap, -EINVAL, "input 'X' must be 4-D NCHW");
	outputs[0] = (struct rt_tensor){ .dtype = BW_DTYPE_BFLOAT16, .rank = 4,
					 .dims = { x->dims[0], x->dims[2], x->dims[3], x->dims[1] } };
	return 0;
}

RT_K_RUN(to_nhwc_bf16)
{
	const struct rt_tensor *x = &inputs[0];
	int64_t n = x->dims[0], c = x->dims[1], hw = x->dims[2] * x->dims[3];
	const float *src = x->data;
	uint16_t *dst = outputs[0].data;

	for (int64_t b = 0; b < n; b++, src += c * hw, dst += c * hw) {
		for (int64_t ch = 0; ch < c; ch++) {
			for (int64_t i = 0; i < hw; i++)
				dst[i * c + ch] = rt_bf16_from_float(src[ch * hw + i]);
		}
	}
	return 0;
}

RT_K_INFER(from_nhwc_bf16)
{
	const struct rt_tensor *x = &inputs[0];
	int rc = rt_k_need_input(node, inputs, 0, "X", RT_DTYPE_BIT(BW_DTYPE_BFLOAT16), err, err_cap);

	if (rc < 0)
		return rc;
	if (x->rank != 4)
		return bw_err(err, err_cap, -EINVAL, "input 'X' must be 4-D NHWC");
	outputs[0] = (struct rt_tensor){ .dtype = BW_DTYPE_FLOAT, .rank = 4,
					 .dims = { x->dims[0], x->dims[3], x->dims[1], x->dims[2] } };
	return 0;
}

RT_K_RUN(from_nhwc_bf16)
{
	const struct rt_tensor *x = &inputs[0];
	int64_t n = x->dims[0], c = x->dims[3], hw = x->dims[1] * x->dims[2];
	const uint16_t *src = x->data;
	float *dst = outputs[0].data;

	for (int64_t b = 0; b < n; b++, src += c * hw, dst += c * hw) {
		for (int64_t i = 0; i < hw; i++) {
			for (int64_t ch = 0; ch < c; ch++)
				dst[ch * hw + i] = bw_bf16_to_float(src[i * c + ch]);
		}
	}
	return 0;
}
