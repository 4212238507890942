/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Conv, batchwire's FusedConv and ConvTranspose: im2col (col2im) and one GEMM per image and group on
 * OpenBLAS (linalg.c's rt_k_gemm), the column buffer from the arena as scratch.
 *
 * Layout: NCHW activations and ONNX's [M, C/group, kernel...] weights are exactly the operands the
 * row-major GEMM wants (W is A [M/group, C/group * kernel], the columns are B [C/group * kernel,
 * out]), so the CPU library's preferred layout is the model's own and no reorder is needed anywhere
 * (unlike oneDNN's blocked formats: see linalg.c for why OpenBLAS). A 1x1, stride-1, unpadded conv
 * needs no im2col at all: X is its own column matrix, and the conv is one plain GEMM.
 *
 * The epilogue: the bias (and, for FusedConv, a residual Z) is written into Y before the GEMM, which
 * then accumulates into it (beta 1: no separate pass to zero Y, none to add the bias); FusedConv's
 * activation runs on each group's output right after its GEMM, while it is still in cache.
 */
#include <inttypes.h>
#include <string.h>

#include "bf16.h"
#include "conv_direct.h"
#include "winograd.h"

/* ---- Conv ---------------------------------------------------------------------------------------- */

struct conv_plan {
	struct rt_k_window w;
	int64_t n, c, m, group, cg, mg, ksize, in_size, out_size;
	bool direct; /* 1x1, stride 1, no pad: X is its own im2col matrix */
};

static int conv_plan(const struct rt_node *node, const struct rt_tensor *inputs, bool transpose,
		     struct conv_plan *p, char *err, size_t err_cap)
{
	const struct rt_tensor *x = &inputs[0], *w = &inputs[1];
	int rc;

	memset(p, 0, sizeof(*p));
	if ((rc = rt_k_need_input(node, inputs, 0, "X", RT_DTYPE_BIT(BW_DTYPE_FLOAT), err, err_cap)) < 0 ||
	    (rc = rt_k_need_input(node, inputs, 1, "W", RT_DTYPE_BIT(BW_DTYPE_FLOAT), err, err_cap)) < 0 ||
	    (rc = rt_k_attr_int(node, "group", 1, &p->group, err, err_cap)) < 0)
		return rc;
	if (x->rank < 3 || w->rank != x->rank)
		return bw_err(err, err_cap, -EINVAL, "inputs 'X' (rank %u) and 'W' (rank %u) must have the same "
			      "rank >= 3", x->rank, w->rank);
	if (p->group < 1)
		return bw_err(err, err_cap, -EINVAL, "attribute 'group' must be positive");
	p->n = x->dims[0];
	p->c = x->dims[1];
	if (p->c < 0 || rt_k_dims_prod(w, 0, w->rank) < 0)
		return bw_err(err, err_cap, -ENOTSUP, "symbolic channel or kernel dims are not supported");
	if (p->c % p->group != 0)
		return bw_err(err, err_cap, -EINVAL, "input 'X' has %" PRId64 " channels, not a multiple of 'group' %"
			      PRId64, p->c, p->group);
	p->cg = p->c / p->group;
	if (!transpose) {
		p->m = w->dims[0];
		if (w->dims[1] != p->cg)
			return bw_err(err, err_cap, -EINVAL, "input 'W' has %" PRId64 " input channels, expected %" PRId64,
				      w->dims[1], p->cg);
		if (p->m % p->group != 0)
			return bw_err(err, err_cap, -EINVAL, "input 'W' has %" PRId64 " filters, not a multiple of 'group' %"
				      PRId64, p->m, p->group);
		p->mg = p->m / p->group;
	} else {
		if (w->dims[0] != p->c)
			return bw_err(err, err_cap, -EINVAL, "input 'W' has %" PRId64 " input channels, 'X' has %" PRId64,
				      w->dims[0], p->c);
		p->mg = w->dims[1];
		p->m = p->mg * p->group;
	}
	if (rt_k_has_input(node, inputs, 2)) {
		if ((rc = rt_k_need_input(node, inputs, 2, "B", RT_DTYPE_BIT(BW_DTYPE_FLOAT), err, err_cap)) < 0)
			return rc;
		if (inputs[2].rank != 1 || inputs[2].dims[0] != p->m)
			return bw_err(err, err_cap, -EINVAL, "input 'B' must be 1-D of %" PRId64 " values", p->m);
	}
	p->ksize = rt_k_dims_prod(w, 2, w->rank);
	p->in_size = rt_k_dims_prod(x, 2, x->rank);
	return 0;
}

static int conv_setup(const struct rt_node *node, const struct rt_tensor *inputs, struct conv_plan *p,
		      char *err, size_t err_cap)
{
	int rc = conv_plan(node, inputs, false, p, err, err_cap);

	if (rc < 0)
		return rc;
	if ((rc = rt_k_window_init(node, &inputs[0], &inputs[1].dims[2], false, true, &p->w, err, err_cap)) < 0)
		return rc;
	p->out_size = 1;
	p->direct = true;
	for (int i = 0; i < p->w.nsp; i++) {
		p->out_size = p->out_size < 0 || p->w.out[i] < 0 ? -1 : p->out_size * p->w.out[i];
		p->direct &= p->w.kernel[i] == 1 && p->w.stride[i] == 1 && p->w.pad_begin[i] == 0 &&
			     p->w.pad_end[i] == 0;
	}
	if (!rt_k_blas_dim_ok(p->cg * p->ksize) || !rt_k_blas_dim_ok(p->out_size < 0 ? 0 : p->out_size))
		return bw_err(err, err_cap, -ENOTSUP, "Conv dims beyond 2^31 are not supported");
	return 0;
}

/* Conv and ConvTranspose: N x M x spatial output, float. */
static int conv_output_shape(int setup_rc, const struct conv_plan *p, const struct rt_tensor *x, struct rt_tensor *y)
{
	if (setup_rc < 0)
		return setup_rc;
	y->dtype = BW_DTYPE_FLOAT;
	y->rank = x->rank;
	y->dims[0] = p->n;
	y->dims[1] = p->m;
	memcpy(&y->dims[2], p->w.out, (size_t)p->w.nsp * sizeof(int64_t));
	return 0;
}

RT_K_INFER(conv)
{
	struct conv_plan p;

	return conv_output_shape(conv_setup(node, inputs, &p, err, err_cap), &p, &inputs[0], &outputs[0]);
}

RT_K_SCRATCH(conv)
{
	struct conv_plan p;
	char err[RT_ERR_MAX];

	if (conv_setup(node, inputs, &p, err, sizeof(err)) < 0 || p.direct || p.out_size < 0)
		return 0;
	return (size_t)(p.cg * p.ksize * p.out_size) * sizeof(float);
}

/* col[(c * ksize + kk) * out_size + o] = x[c][input position of output o under kernel offset kk] */
static void im2col(const struct conv_plan *p, const float *x, float *col)
{
	const struct rt_k_window *w = &p->w;
	int nsp = w->nsp, last = nsp - 1;
	int64_t in_stride[RT_MAX_RANK], s = 1, orow = w->out[last], outer = p->out_size / (orow ? orow : 1);

	for (int i = last; i >= 0; i--) {
		in_stride[i] = s;
		s *= w->in[i];
	}
	for (int64_t c = 0; c < p->cg; c++) {
		int64_t kk[RT_MAX_RANK] = {0};

		for (int64_t kidx = 0; kidx < p->ksize; kidx++) {
			int64_t o[RT_MAX_RANK] = {0};

			for (int64_t r = 0; r < outer; r++) {
				int64_t off = c * p->in_size;
				bool inside = true;

				for (int i = 0; i < last; i++) {
					int64_t pos = o[i] * w->stride[i] - w->pad_begin[i] + kk[i] * w->dilation[i];

					inside &= pos >= 0 && pos < w->in[i];
					off += pos * in_stride[i];
				}
				{
					int64_t base = -w->pad_begin[last] + kk[last] * w->dilation[last];
					int64_t st = w->stride[last], in = w->in[last];

					for (int64_t j = 0; j < orow; j++) {
						int64_t pos = base + j * st;

						*col++ = inside && pos >= 0 && pos < in ? x[off + pos] : 0.0f;
					}
				}
				for (int i = last - 1; i >= 0; i--) {
					if (++o[i] < w->out[i])
						break;
					o[i] = 0;
				}
			}
			for (int i = last; i >= 0; i--) {
				if (++kk[i] < w->kernel[i])
					break;
				kk[i] = 0;
			}
		}
	}
}

/*
 * The 2-D case, which is nearly every model's: per (channel, kernel row, kernel column) and output
 * row, the columns that fall inside the input are one range, found once per kernel column, so a
 * row is a memset, a copy (a memcpy at stride 1) and a memset, without a test per element.
 */
static void im2col_2d(const struct conv_plan *p, const float *x, float *col)
{
	const struct rt_k_window *w = &p->w;
	int64_t ih_n = w->in[0], iw_n = w->in[1], oh_n = w->out[0], ow_n = w->out[1];
	int64_t sh = w->stride[0], sw = w->stride[1], dh = w->dilation[0], dw = w->dilation[1];

	for (int64_t c = 0; c < p->cg; c++) {
		const float *xc = x + c * p->in_size;

		for (int64_t ki = 0; ki < w->kernel[0]; ki++) {
			for (int64_t kj = 0; kj < w->kernel[1]; kj++) {
				int64_t woff = kj * dw - w->pad_begin[1], last = iw_n - 1 - woff;
				int64_t lo = woff >= 0 ? 0 : (-woff + sw - 1) / sw, hi = last < 0 ? 0 : last / sw + 1;

				hi = hi < ow_n ? hi : ow_n;
				lo = lo < hi ? lo : hi;
				for (int64_t oh = 0; oh < oh_n; oh++, col += ow_n) {
					int64_t ih = oh * sh - w->pad_begin[0] + ki * dh;
					const float *row;

					if (ih < 0 || ih >= ih_n || hi == lo) {
						memset(col, 0, (size_t)ow_n * sizeof(float));
						continue;
					}
					row = xc + ih * iw_n;
					memset(col, 0, (size_t)lo * sizeof(float));
					if (sw == 1) {
						memcpy(col + lo, row + lo + woff, (size_t)(hi - lo) * sizeof(float));
					} else {
						for (int64_t ow = lo; ow < hi; ow++)
							col[ow] = row[ow * sw + woff];
					}
					memset(col + hi, 0, (size_t)(ow_n - hi) * sizeof(float));
				}
			}
		}
	}
}

/*
 * Y = act(conv(X, W) + bias + z): per image and group, the bias (and z) written into Y, the GEMM
 * accumulating into it, the activation over the group's outputs. Plain Conv is this without z and
 * activation.
 */
static int conv_compute(const struct rt_node *node, const struct rt_tensor *inputs, struct rt_tensor *out,
			float *col, const float *z, const struct rt_k_act_spec *act, char *err, size_t err_cap)
{
	struct conv_plan p;
	const float *x = inputs[0].data, *w = inputs[1].data;
	const float *bias = rt_k_has_input(node, inputs, 2) ? inputs[2].data : NULL;
	float *y = out->data;
	int rc = conv_setup(node, inputs, &p, err, err_cap);

	if (rc < 0)
		return rc;
	if (!p.direct && col == NULL && p.out_size > 0)
		return bw_err(err, err_cap, -EINVAL, "Conv needs scratch memory and got none");
	for (int64_t b = 0; b < p.n; b++) {
		for (int64_t g = 0; g < p.group; g++) {
			const float *xg = x + (b * p.c + g * p.cg) * p.in_size;
			int64_t first = b * p.m + g * p.mg; /* the group's first output channel, over the batch */
			float *yg = y + first * p.out_size, beta = 0.0f;

			if (!p.direct)
				(p.w.nsp == 2 ? im2col_2d : im2col)(&p, xg, col);
			if (bias != NULL || z != NULL) {
				for (int64_t ch = 0; ch < p.mg; ch++)
					rt_vm_fill(yg + ch * p.out_size, bias != NULL ? bias[g * p.mg + ch] : 0.0f,
						   z != NULL ? z + (first + ch) * p.out_size : NULL, p.out_size);
				beta = 1.0f;
			}
			rt_k_gemm(BW_DTYPE_FLOAT, false, false, p.mg, p.out_size, p.cg * p.ksize, 1.0f,
				  w + g * p.mg * p.cg * p.ksize, p.cg * p.ksize, p.direct ? xg : col, p.out_size, beta, yg,
				  p.out_size);
			if (act != NULL)
				rt_vm_act(yg, p.mg * p.out_size, act);
		}
	}
	return 0;
}

RT_K_RUN(conv)
{
	return conv_compute(node, inputs, &outputs[0], scratch, NULL, NULL, err, err_cap);
}

/* ---- FusedConv ----------------------------------------------------------------------------------- */

/*
 * With "packed_weights" 1, input W is the weights packed for sgemm.c at load, per group (with
 * "winograd" 2 or 4 as well, transformed for winograd.c's F(2x2, 3x3) or F(4x4, 3x3) first; with
 * "direct" instead, packed for conv_direct.c's tiles of that enum rt_dc_tiles, and with "pool" 1 a
 * 2x2, stride-2 MaxPool folded into its tiles: the output is the pooled one); with 2 (precision bf16), rounded into
 * AMX's tiles for amx.c, per group. "weight_shape" gives the ONNX shape
 * [M, C/group, kH, kW] they came from: what the geometry is read from. The inputs are then seen
 * with W's tensor rebuilt from that shape (data NULL).
 */
static int fused_inputs(const struct rt_node *node, const struct rt_tensor *inputs, struct rt_tensor *ins,
			bool *packed, char *err, size_t err_cap)
{
	const struct rt_attr *shape = rt_node_attr(node, "weight_shape");
	unsigned int n = node->num_inputs < 4 ? node->num_inputs : 4;

	memset(ins, 0, 4 * sizeof(*ins));
	memcpy(ins, inputs, n * sizeof(*ins));
	*packed = rt_attr_int(node, "packed_weights", 0) != 0;
	if (!*packed)
		return 0;
	if (shape == NULL || shape->type != RT_ATTR_INTS || shape->count != 4)
		return bw_err(err, err_cap, -EINVAL, "attribute 'weight_shape' must be 4 ints with packed weights");
	ins[1] = (struct rt_tensor){ .dtype = BW_DTYPE_FLOAT, .rank = 4 };
	memcpy(ins[1].dims, shape->ints, 4 * sizeof(int64_t));
	return 0;
}

RT_K_INFER(fused_conv)
{
	struct rt_k_act_spec act;
	struct rt_tensor ins[4];
	bool packed;
	char x[96], y[96];
	int rc = fused_inputs(node, inputs, ins, &packed, err, err_cap);

	if (rc < 0 || (rc = rt_k_conv_infer(node, ins, outputs, err, err_cap)) < 0 ||
	    (rc = rt_k_act_read(node, &act, err, err_cap)) < 0)
		return rc;
	if (act.kind == RT_K_ACT_GELU)
		return bw_err(err, err_cap, -ENOTSUP, "FusedConv does not apply Gelu");
	if (packed) {
		struct conv_plan p;
		size_t want;

		if ((rc = conv_setup(node, ins, &p, err, err_cap)) < 0)
			return rc;
		bool bf16 = rt_attr_int(node, "packed_weights", 0) == RT_K_PACKED_BF16;
		int64_t direct = rt_attr_int(node, "direct", 0), wg_tile = rt_attr_int(node, "winograd", 0);

		if (wg_tile != 0 && !rt_wg_tile_valid(wg_tile))
			return bw_err(err, err_cap, -EINVAL, "attribute 'winograd' must be 2 (F(2x2,3x3)) or 4 "
				      "(F(4x4,3x3))");
		want = bf16 ? (size_t)p.group * rt_bf16_packed_a_elems(p.mg, p.cg * p.ksize) :
		       wg_tile != 0 ? rt_wg_packed_floats((int)wg_tile, p.m, p.c) :
		       direct != 0 ? rt_dc_packed_floats((enum rt_dc_tiles)direct, p.m, p.cg * p.ksize) :
		       (size_t)p.group * rt_sg_packed_floats(p.mg, p.cg * p.ksize);
		if (direct != 0 && direct != RT_DC_PIXELS && direct != RT_DC_ROWS)
			return bw_err(err, err_cap, -EINVAL, "attribute 'direct' must be %d (pixel tiles) or %d (row "
				      "tiles)", RT_DC_PIXELS, RT_DC_ROWS);
		if (direct != 0 && (bf16 || wg_tile != 0 || !rt_dc_available() ||
				    !rt_dc_applies((enum rt_dc_tiles)direct, p.w.nsp, p.group, p.cg * p.ksize, p.w.stride)))
			return bw_err(err, err_cap, -ENOTSUP, "attribute 'direct' needs the CPU kernels at the avx2 "
				      "level or above and an ungrouped 2-D fp32 conv at most %d deep (row tiles: stride 1)",
				      RT_DC_K_MAX);
		if (direct != 0 && (p.w.in[0] + p.w.pad_begin[0] + p.w.pad_end[0]) * (p.w.in[1] + p.w.pad_begin[1] +
			       p.w.pad_end[1]) * p.c > INT32_MAX / 2)
			return bw_err(err, err_cap, -ENOTSUP, "attribute 'direct' needs a padded image under 2^30 values");
		if (rt_attr_int(node, "pool", 0) != 0) {
			/* a 2x2, stride-2 MaxPool folded in: conv_direct.c's tiles where they take it, no residual */
			if (direct == 0 || !rt_dc_pool_applies((enum rt_dc_tiles)direct) ||
			    rt_k_has_input(node, inputs, 3) || p.w.out[0] < 2 || p.w.out[1] < 2)
				return bw_err(err, err_cap, -EINVAL, "attribute 'pool' needs direct tiles that take a pool "
					      "at this level (row tiles; pixel tiles at avx2), no input 'Z', and an "
					      "output of 2x2 or more");
			outputs[0].dims[2] = p.w.out[0] / 2;
			outputs[0].dims[3] = p.w.out[1] / 2;
		}
		if (bf16 && (wg_tile != 0 || !rt_bf16_available()))
			return bw_err(err, err_cap, -ENOTSUP, "bf16 packed weights need the CPU kernels at the amx "
				      "level, and no Winograd");
		if (wg_tile != 0 && !rt_wg_applies(&p.w, p.group))
			return bw_err(err, err_cap, -EINVAL, "attribute 'winograd' needs a 3x3, stride-1, ungrouped conv");
		if (!rt_sg_available())
			return bw_err(err, err_cap, -ENOTSUP, "packed weights need AVX2 and FMA");
		if (p.w.nsp != 2)
			return bw_err(err, err_cap, -ENOTSUP, "packed weights are for 2-D convolutions");
		if (p.in_size > INT32_MAX / 2 || p.w.in[1] * p.w.stride[1] > INT32_MAX / 2)
			return bw_err(err, err_cap, -ENOTSUP, "packed weights need an input plane under 2^30 values");
		if (inputs[1].dtype != (bf16 ? BW_DTYPE_BFLOAT16 : BW_DTYPE_FLOAT) ||
		    rt_tensor_elems(&inputs[1]) != (int64_t)want)
			return bw_err(err, err_cap, -EINVAL, "input 'W' must hold %zu packed %s values", want,
				      bf16 ? "bf16" : "float");
	}
	if (rt_k_has_input(node, inputs, 3)) {
		const struct rt_tensor *z = &inputs[3];

		if ((rc = rt_k_need_input(node, inputs, 3, "Z", RT_DTYPE_BIT(BW_DTYPE_FLOAT), err, err_cap)) < 0)
			return rc;
		if (z->rank != outputs[0].rank || memcmp(z->dims, outputs[0].dims, z->rank * sizeof(int64_t)) != 0)
			return bw_err(err, err_cap, -EINVAL, "input 'Z' %s must have the output's shape %s",
				      rt_k_dims_str(z, x, sizeof(x)), rt_k_dims_str(&outputs[0], y, sizeof(y)));
	}
	return 0;
}

/*
 * A batch of convolutions whose images leave the last tile of columns part empty (7 x 7 = 49
 * outputs against tiles of 32: a quarter of ResNet-50's last stage computed on zeros) runs as one
 * GEMM with the images side by side, their columns filling each other's tiles. (A last tile of half
 * the columns wastes nothing: the kernels run it at half width.)
 */
static bool conv_images_side_by_side(const struct conv_plan *p, bool bf16)
{
	return !bf16 && p->group == 1 && p->n > 1 && p->out_size % (rt_sg_tile_cols() / 2) != 0;
}

/* Which kernel runs a conv with packed weights, as the optimizer's attributes (checked by infer) say. */
enum packed_path { PACKED_WINOGRAD, PACKED_DIRECT, PACKED_BF16_TILES, PACKED_SGEMM };

static enum packed_path packed_path(const struct rt_node *node)
{
	if (rt_attr_int(node, "winograd", 0) != 0)
		return PACKED_WINOGRAD;
	if (rt_attr_int(node, "direct", 0) != 0)
		return PACKED_DIRECT;
	return rt_attr_int(node, "packed_weights", 0) == RT_K_PACKED_BF16 ? PACKED_BF16_TILES : PACKED_SGEMM;
}

RT_K_SCRATCH(fused_conv)
{
	struct rt_tensor ins[4];
	struct conv_plan p;
	char err[RT_ERR_MAX];
	bool packed;

	if (fused_inputs(node, inputs, ins, &packed, err, sizeof(err)) < 0)
		return 0;
	if (!packed)
		return rt_k_conv_scratch(node, ins, outputs);
	if (conv_setup(node, ins, &p, err, sizeof(err)) < 0 || p.out_size < 0)
		return 0;
	switch (packed_path(node)) {
	case PACKED_WINOGRAD: {
		int tile = (int)rt_attr_int(node, "winograd", 0);

		return rt_wg_tile_valid(tile) ?
			       rt_wg_scratch_floats(tile, &p.w, p.m, p.c, rt_wg_group_images(tile, &p.w, p.n)) * sizeof(float) :
			       0;
	}
	case PACKED_DIRECT:
		return rt_dc_scratch_bytes(&p.w, p.c);
	case PACKED_BF16_TILES:
		return rt_bf16_apacked_scratch_bytes(p.out_size, p.cg * p.ksize);
	case PACKED_SGEMM:
		break;
	}
	if (conv_images_side_by_side(&p, false))
		return rt_sg_images_scratch_floats(p.out_size, p.n, p.cg * p.ksize) * sizeof(float);
	return rt_sg_scratch_floats(p.out_size, p.cg * p.ksize) * sizeof(float);
}

/* Per image and group, one rt_sg_gemm: B packed from the image, the epilogue on the tiles. */
static int conv_packed(const struct rt_node *node, const struct rt_tensor *ins, const float *wp,
		       struct rt_tensor *out, float *bbuf, const float *z, const struct rt_k_act_spec *act, char *err,
		       size_t err_cap)
{
	struct conv_plan p;
	const float *x = ins[0].data, *bias = rt_k_has_input(node, ins, 2) ? ins[2].data : NULL;
	float *y = out->data;
	int rc = conv_setup(node, ins, &p, err, err_cap);
	int64_t k, per_group;
	bool bf16;

	if (rc < 0)
		return rc;
	if (bbuf == NULL && p.out_size > 0)
		return bw_err(err, err_cap, -EINVAL, "FusedConv needs scratch memory and got none");
	switch (packed_path(node)) {
	case PACKED_WINOGRAD:
		rt_wg_conv((int)rt_attr_int(node, "winograd", 0), &p.w, p.m, p.c, p.n, x, wp, y, bias, z, act, bbuf);
		return 0;
	case PACKED_DIRECT:
		rt_dc_conv((enum rt_dc_tiles)rt_attr_int(node, "direct", 0), &p.w, p.n, p.m, p.c, x, wp, y, bias, z, act,
			   rt_attr_int(node, "pool", 0) != 0, bbuf);
		return 0;
	case PACKED_BF16_TILES:
	case PACKED_SGEMM:
		break;
	}
	k = p.cg * p.ksize;
	bf16 = packed_path(node) == PACKED_BF16_TILES;
	if (conv_images_side_by_side(&p, bf16)) {
		struct rt_sg_b src = { .x = x, .ldb = p.in_size, .conv = p.direct ? NULL : &p.w };
		struct rt_sg_epilogue ep = { .row_bias = bias, .z = z, .act = *act };

		rt_sg_gemm_images(p.m, p.out_size, p.n, k, wp, &src, p.c * p.in_size, y, p.m * p.out_size, &ep, bbuf);
		return 0;
	}
	per_group = bf16 ? (int64_t)rt_bf16_packed_a_elems(p.mg, k) : (int64_t)rt_sg_packed_floats(p.mg, k);
	for (int64_t b = 0; b < p.n; b++) {
		for (int64_t g = 0; g < p.group; g++) {
			int64_t first = b * p.m + g * p.mg;
			struct rt_sg_b src = { .x = x + (b * p.c + g * p.cg) * p.in_size, .ldb = p.in_size,
					       .conv = p.direct ? NULL : &p.w };
			struct rt_sg_epilogue ep = { .row_bias = bias != NULL ? bias + g * p.mg : NULL,
						     .z = z != NULL ? z + first * p.out_size : NULL, .act = *act };

			if (bf16)
				rt_bf16_gemm_apacked(p.mg, p.out_size, k, (const uint16_t *)(const void *)wp + g * per_group,
						     &src, y + first * p.out_size, p.out_size, &ep, bbuf);
			else
				rt_sg_gemm(p.mg, p.out_size, k, wp + g * per_group, &src, y + first * p.out_size,
					   p.out_size, &ep, bbuf);
		}
	}
	return 0;
}

RT_K_RUN(fused_conv)
{
	struct rt_k_act_spec act;
	struct rt_tensor ins[4];
	const float *z = rt_k_has_input(node, inputs, 3) ? inputs[3].data : NULL;
	bool packed;
	int rc = fused_inputs(node, inputs, ins, &packed, err, err_cap);

	if (rc < 0 || (rc = rt_k_act_read(node, &act, err, err_cap)) < 0)
		return rc;
	if (packed)
		return conv_packed(node, ins, inputs[1].data, &outputs[0], scratch, z, &act, err, err_cap);
	return conv_compute(node, inputs, &outputs[0], scratch, z, &act, err, err_cap);
}

/*
 * The output may take the residual's bytes where each element of Y is written once, after Z's
 * element there is read: weights not packed (conv_compute fills Y from Z element by element, then
 * the GEMM accumulates into it), or packed for the fp32 GEMMs with k in one block (its epilogue
 * reads Z's row of a tile and stores C's). Not the Winograd, direct or bf16 tiles' paths.
 */
int rt_k_fused_conv_in_place(const struct rt_node *node, const struct rt_tensor *inputs,
			     const struct rt_tensor *outputs)
{
	struct rt_tensor ins[4];
	struct conv_plan p;
	char why[8];
	bool packed;

	(void)outputs;
	if (!rt_k_has_input(node, inputs, 3) || fused_inputs(node, inputs, ins, &packed, why, sizeof(why)) < 0 ||
	    conv_setup(node, ins, &p, why, sizeof(why)) < 0)
		return -1;
	if (!packed)
		return 3;
	return packed_path(node) == PACKED_SGEMM && rt_sg_one_block(p.cg * p.ksize) ? 3 : -1;
}

/* ---- ConvTranspose ------------------------------------------------------------------------------- */

static void add_bias(float *y, const float *bias, int64_t n, int64_t m, int64_t size)
{
	for (int64_t b = 0; b < n; b++) {
		for (int64_t ch = 0; ch < m; ch++) {
			float *ys = y + (b * m + ch) * size;

			for (int64_t i = 0; i < size; i++)
				ys[i] += bias[ch];
		}
	}
}

static int convt_setup(const struct rt_node *node, const struct rt_tensor *inputs, struct conv_plan *p,
		       char *err, size_t err_cap)
{
	struct rt_k_window *w = &p->w;
	int64_t vals[2 * RT_MAX_RANK], out_pad[RT_MAX_RANK] = {0}, out_shape[RT_MAX_RANK];
	const char *auto_pad = rt_attr_string(node, "auto_pad", "NOTSET");
	unsigned int n, nshape;
	int rc = conv_plan(node, inputs, true, p, err, err_cap), nsp;
	bool same;

	if (rc < 0)
		return rc;
	/* strides, dilations, pads and kernel_shape read as for Conv; the output size is computed below */
	{
		struct rt_tensor fake = inputs[0];

		for (int i = 2; i < fake.rank; i++)
			fake.dims[i] = 1 << 20; /* big enough that Conv's "input smaller than kernel" check passes */
		if ((rc = rt_k_window_init(node, &fake, &inputs[1].dims[2], false, true, w, err, err_cap)) < 0)
			return rc;
	}
	nsp = w->nsp;
	if ((rc = rt_k_attr_ints(node, "output_padding", vals, RT_MAX_RANK, &n, err, err_cap)) < 0)
		return rc;
	if (rc == 1 && n != (unsigned int)nsp)
		return bw_err(err, err_cap, -EINVAL, "attribute 'output_padding' has %u values, expected %d", n, nsp);
	for (int i = 0; rc == 1 && i < nsp; i++) {
		if (vals[i] < 0 || vals[i] >= (w->stride[i] > w->dilation[i] ? w->stride[i] : w->dilation[i]))
			return bw_err(err, err_cap, -EINVAL, "attribute 'output_padding' must be in [0, max(stride, dilation))");
		out_pad[i] = vals[i];
	}
	if ((rc = rt_k_attr_ints(node, "output_shape", out_shape, RT_MAX_RANK, &nshape, err, err_cap)) < 0)
		return rc;
	if (rc == 1 && nshape == (unsigned int)nsp + 2) { /* the full shape: keep the spatial part */
		memmove(out_shape, out_shape + 2, (size_t)nsp * sizeof(int64_t));
		nshape = (unsigned int)nsp;
	}
	if (rc == 1 && nshape != (unsigned int)nsp)
		return bw_err(err, err_cap, -EINVAL, "attribute 'output_shape' has %u values, expected %d", nshape, nsp);
	same = strcmp(auto_pad, "SAME_UPPER") == 0 || strcmp(auto_pad, "SAME_LOWER") == 0;
	p->out_size = 1;
	for (int i = 0; i < nsp; i++) {
		int64_t in = inputs[0].dims[i + 2], eff = (w->kernel[i] - 1) * w->dilation[i] + 1;
		int64_t full = w->stride[i] * (in - 1) + out_pad[i] + eff;

		w->in[i] = in;
		if (in < 0)
			return bw_err(err, err_cap, -ENOTSUP, "symbolic spatial dims are not supported");
		if (nshape > 0 || same) {
			int64_t out = nshape > 0 ? out_shape[i] : in * w->stride[i], total = full - out;

			if (total < 0)
				total = 0; /* a larger output_shape is zero-extended at the end */
			if (strcmp(auto_pad, "SAME_UPPER") == 0) {
				w->pad_begin[i] = total / 2;
				w->pad_end[i] = total - total / 2;
			} else {
				w->pad_end[i] = total / 2;
				w->pad_begin[i] = total - total / 2;
			}
			w->out[i] = out;
		} else {
			w->out[i] = full - w->pad_begin[i] - w->pad_end[i];
		}
		if (w->out[i] <= 0)
			return bw_err(err, err_cap, -EINVAL, "ConvTranspose output spatial dim %d would be %" PRId64, i,
				      w->out[i]);
		p->out_size *= w->out[i];
	}
	if (!rt_k_blas_dim_ok(p->mg * p->ksize) || !rt_k_blas_dim_ok(p->in_size))
		return bw_err(err, err_cap, -ENOTSUP, "ConvTranspose dims beyond 2^31 are not supported");
	return 0;
}

RT_K_INFER(conv_transpose)
{
	struct conv_plan p;

	return conv_output_shape(convt_setup(node, inputs, &p, err, err_cap), &p, &inputs[0], &outputs[0]);
}

RT_K_SCRATCH(conv_transpose)
{
	struct conv_plan p;
	char err[RT_ERR_MAX];

	if (convt_setup(node, inputs, &p, err, sizeof(err)) < 0)
		return 0;
	return (size_t)(p.mg * p.ksize * p.in_size) * sizeof(float);
}

/* y[m][position of input i under kernel offset kk] += col[(m * ksize + kk) * in_size + i] */
static void col2im(const struct conv_plan *p, const float *col, float *y)
{
	const struct rt_k_window *w = &p->w;
	int nsp = w->nsp;
	int64_t out_stride[RT_MAX_RANK], s = 1;

	for (int i = nsp - 1; i >= 0; i--) {
		out_stride[i] = s;
		s *= w->out[i];
	}
	for (int64_t m = 0; m < p->mg; m++) {
		int64_t kk[RT_MAX_RANK] = {0};

		for (int64_t kidx = 0; kidx < p->ksize; kidx++) {
			int64_t ii[RT_MAX_RANK] = {0};

			for (int64_t i = 0; i < p->in_size; i++, col++) {
				int64_t off = m * p->out_size;
				bool inside = true;

				for (int d = 0; d < nsp; d++) {
					int64_t pos = ii[d] * w->stride[d] - w->pad_begin[d] + kk[d] * w->dilation[d];

					inside &= pos >= 0 && pos < w->out[d];
					off += pos * out_stride[d];
				}
				if (inside)
					y[off] += *col;
				for (int d = nsp - 1; d >= 0; d--) {
					if (++ii[d] < w->in[d])
						break;
					ii[d] = 0;
				}
			}
			for (int d = nsp - 1; d >= 0; d--) {
				if (++kk[d] < w->kernel[d])
					break;
				kk[d] = 0;
			}
		}
	}
}

RT_K_RUN(conv_transpose)
{
	struct conv_plan p;
	const float *x = inputs[0].data, *w = inputs[1].data;
	float *y = outputs[0].data, *col = scratch;
	int rc = convt_setup(node, inputs, &p, err, err_cap);

	if (rc < 0)
		return rc;
	if (col == NULL && p.in_size > 0)
		return bw_err(err, err_cap, -EINVAL, "ConvTranspose needs scratch memory and got none");
	memset(y, 0, (size_t)(p.n * p.m * p.out_size) * sizeof(float));
	for (int64_t b = 0; b < p.n; b++) {
		for (int64_t g = 0; g < p.group; g++) {
			const float *xg = x + (b * p.c + g * p.cg) * p.in_size;

			/* col [(mg * ksize) x in] = W_g^T [(mg * ksize) x cg] * X_g [cg x in] */
			rt_k_gemm(BW_DTYPE_FLOAT, true, false, p.mg * p.ksize, p.in_size, p.cg, 1.0f,
			     w + g * p.cg * p.mg * p.ksize, p.mg * p.ksize, xg, p.in_size, 0.0f, col, p.in_size);
			col2im(&p, col, y + (b * p.m + g * p.mg) * p.out_size);
		}
	}
	if (rt_k_has_input(node, inputs, 2))
		add_bias(y, inputs[2].data, p.n, p.m, p.out_size);
	return 0;
}
