/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Conv (+ BatchNormalization) (+ Add of a residual) (+ Relu / LeakyRelu / Clip) -> FusedConv.
 *
 * BatchNormalization after a Conv is folded into the Conv's weights and bias at load:
 * BN(y) = (y - mean) * a + beta with a = scale / sqrt(var + eps) per channel, and y = W x + b, so
 * BN(y) = (a W) x + ((b - mean) * a + beta): new weights and bias, computed in double, and the
 * BatchNormalization node is gone. Only when all of BN's parameters and the Conv's weights are
 * constants, BN is in inference mode with one output, and nothing else reads the Conv's output (a
 * second reader would need the unnormalized values). A following Add whose other operand has the
 * output's shape (checked at OPT_SHAPE_BATCH, so a broadcast batch dim is not taken for the batch)
 * becomes the kernel's residual input Z, and an activation its epilogue: what ResNet's blocks are.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "defs.h"
#include "kernels/bf16.h"
#include "kernels/conv_direct.h"
#include "kernels/winograd.h"

/* ---- activations (shared with fuse_gemm.c) ------------------------------------------------------ */

bool opt_match_act(const struct opt_ctx *c, int32_t n, int32_t v, const char **kind, float *params,
		   uint32_t *nparams)
{
	const struct rt_node *node;

	if (n < 0 || c->dead[n])
		return false;
	node = &c->g->nodes[n];
	if (node->num_inputs < 1 || node->inputs[0] != v || node->num_outputs != 1)
		return false;
	*nparams = 0;
	if (opt_is_op(c, n, "Relu")) {
		*kind = "Relu";
		return true;
	}
	if (opt_is_op(c, n, "LeakyRelu")) {
		const struct rt_attr *a = rt_node_attr(node, "alpha");

		if (a != NULL && a->type != RT_ATTR_FLOAT)
			return false;
		*kind = "LeakyRelu";
		params[0] = a != NULL ? a->f : 0.01f;
		*nparams = 1;
		return true;
	}
	if (opt_is_op(c, n, "Clip")) {
		float lo = -INFINITY, hi = INFINITY;

		if (node->opset < 11) {
			lo = rt_attr_float(node, "min", -INFINITY);
			hi = rt_attr_float(node, "max", INFINITY);
		} else {
			if (node->num_inputs > 1 && node->inputs[1] != RT_VALUE_NONE &&
			    !opt_const_scalar(c, node->inputs[1], &lo))
				return false;
			if (node->num_inputs > 2 && node->inputs[2] != RT_VALUE_NONE &&
			    !opt_const_scalar(c, node->inputs[2], &hi))
				return false;
		}
		/* Clip gives max for x < min when min > max: the same as a lower bound of max */
		*kind = "Clip";
		params[0] = lo > hi ? hi : lo;
		params[1] = hi;
		*nparams = 2;
		return true;
	}
	return false;
}

int opt_set_act(struct rt_node *n, const char *kind, const float *params, uint32_t nparams)
{
	int rc = opt_attr_string(n, "activation", kind);

	if (rc == 0 && nparams > 0)
		rc = opt_attr_floats(n, "activation_params", params, nparams);
	return rc;
}

/* ---- the pattern ----------------------------------------------------------------------------------- */

struct conv_match {
	int32_t bn, add, act;  /* node indices, -1 when absent */
	int32_t z;             /* the residual value */
	int32_t out;           /* the pattern's output value */
	const char *act_kind;
	float act_params[2];
	uint32_t act_nparams;
};

static bool float_const(const struct opt_ctx *c, int32_t v, int64_t elems)
{
	const struct rt_tensor *t;

	if (!opt_is_const(c, v))
		return false;
	t = &c->g->values[v].tensor;
	return t->dtype == BW_DTYPE_FLOAT && (elems < 0 || (t->rank == 1 && t->dims[0] == elems));
}

/* BatchNormalization n reading v, foldable into a conv of m output channels. */
static bool match_bn(const struct opt_ctx *c, int32_t n, int32_t v, int64_t m)
{
	const struct rt_node *node = &c->g->nodes[n];

	if (!opt_is_op(c, n, "BatchNormalization") || node->num_inputs != 5 || node->inputs[0] != v)
		return false;
	if (rt_attr_int(node, "training_mode", 0) != 0 || rt_attr_int(node, "spatial", 1) != 1)
		return false;
	for (uint16_t j = 1; j < node->num_outputs; j++) {
		if (node->outputs[j] != RT_VALUE_NONE)
			return false;
	}
	for (uint16_t j = 1; j < 5; j++) {
		if (!float_const(c, node->inputs[j], m))
			return false;
	}
	return true;
}

/* An Add of v and another value of v's shape (known at a batch size that shows the batch dim). */
static bool match_add(const struct opt_ctx *c, int32_t n, int32_t v, int32_t *z)
{
	const struct rt_node *node = &c->g->nodes[n];
	const struct rt_tensor *sv, *sz;

	int32_t other;

	if (!opt_is_op(c, n, "Add") || node->num_inputs != 2 || !c->shapes_distinct)
		return false;
	if (node->inputs[0] == v && node->inputs[1] != v)
		other = node->inputs[1];
	else if (node->inputs[1] == v && node->inputs[0] != v)
		other = node->inputs[0];
	else
		return false;
	sv = opt_shape(c, v);
	sz = opt_shape(c, other);
	if (sv == NULL || sz == NULL || sv->dtype != BW_DTYPE_FLOAT || sz->dtype != BW_DTYPE_FLOAT ||
	    sv->rank != sz->rank || memcmp(sv->dims, sz->dims, sv->rank * sizeof(int64_t)) != 0)
		return false;
	*z = other;
	return true;
}

static void match(const struct opt_ctx *c, uint32_t ci, bool w_const, int64_t m, struct conv_match *mt)
{
	int32_t r;

	*mt = (struct conv_match){ .bn = -1, .add = -1, .act = -1, .z = RT_VALUE_NONE };
	mt->out = c->g->nodes[ci].outputs[0];
	r = opt_sole_reader(c, mt->out);
	if (w_const && r >= 0 && match_bn(c, r, mt->out, m)) {
		mt->bn = r;
		mt->out = c->g->nodes[r].outputs[0];
		r = opt_sole_reader(c, mt->out);
	}
	if (r >= 0 && match_add(c, r, mt->out, &mt->z)) {
		mt->add = r;
		mt->out = c->g->nodes[r].outputs[0];
		r = opt_sole_reader(c, mt->out);
	}
	if (r >= 0 && opt_match_act(c, r, mt->out, &mt->act_kind, mt->act_params, &mt->act_nparams)) {
		mt->act = r;
		mt->out = c->g->nodes[r].outputs[0];
	}
}

/* W' = a W, b' = (b - mean) a + beta, per output channel; new initializers. */
static int fold_bn(struct opt_ctx *c, const struct rt_node *conv, const struct rt_node *bn, int32_t *w_out,
		   int32_t *b_out)
{
	const struct rt_graph *g = c->g;
	const struct rt_tensor wt = g->values[conv->inputs[1]].tensor; /* a copy: values move on adding one */
	const float *w = wt.data, *scale = g->values[bn->inputs[1]].tensor.data;
	const float *beta = g->values[bn->inputs[2]].tensor.data, *mean = g->values[bn->inputs[3]].tensor.data;
	const float *var = g->values[bn->inputs[4]].tensor.data, *b = NULL;
	double eps = rt_attr_float(bn, "epsilon", 1e-5f);
	int64_t m = wt.dims[0], per = rt_tensor_elems(&wt) / (m > 0 ? m : 1);
	float *nw = opt_alloc_floats(m * per), *nb = opt_alloc_floats(m);

	if (conv->num_inputs > 2 && conv->inputs[2] != RT_VALUE_NONE)
		b = g->values[conv->inputs[2]].tensor.data;
	if (nw == NULL || nb == NULL) {
		free(nw);
		free(nb);
		return opt_error(c, -ENOMEM, "out of memory");
	}
	for (int64_t o = 0; o < m; o++) {
		double a = (double)scale[o] / sqrt((double)var[o] + eps);

		for (int64_t i = 0; i < per; i++)
			nw[o * per + i] = (float)(a * w[o * per + i]);
		nb[o] = (float)(((b != NULL ? (double)b[o] : 0.0) - mean[o]) * a + beta[o]);
	}
	*w_out = opt_add_initializer(c, conv->name, "W_bn", BW_DTYPE_FLOAT, wt.rank, wt.dims, nw);
	if (*w_out < 0) {
		free(nb);
		return *w_out;
	}
	*b_out = opt_add_initializer(c, conv->name, "B_bn", BW_DTYPE_FLOAT, 1, &m, nb);
	return *b_out < 0 ? *b_out : 0;
}

/* 1x1, stride 1, no padding: the conv kernel's direct path, one GEMM on X itself. */
static bool conv_is_gemm(const struct opt_ctx *c, const struct rt_node *conv)
{
	const struct rt_tensor *w = &c->g->values[conv->inputs[1]].tensor;
	const struct rt_attr *strides = rt_node_attr(conv, "strides"), *pads = rt_node_attr(conv, "pads");
	const char *auto_pad = rt_attr_string(conv, "auto_pad", "NOTSET");

	if (w->rank < 3 || (strcmp(auto_pad, "NOTSET") != 0 && strcmp(auto_pad, "VALID") != 0))
		return false;
	for (int d = 2; d < w->rank; d++) {
		if (w->dims[d] != 1)
			return false;
	}
	for (uint32_t i = 0; strides != NULL && i < strides->count; i++) {
		if (strides->ints[i] != 1)
			return false;
	}
	for (uint32_t i = 0; pads != NULL && i < pads->count; i++) {
		if (pads->ints[i] != 0)
			return false;
	}
	return true;
}

/* "Conv+BatchNormalization+Add+Relu" and its kin: the report's kinds are static strings. */
static const char *kind_name(bool bn, bool add, const char *act)
{
	static const char *const names[2][2][4] = {
		{ { "Conv", "Conv+Relu", "Conv+LeakyRelu", "Conv+Clip" },
		  { "Conv+Add", "Conv+Add+Relu", "Conv+Add+LeakyRelu", "Conv+Add+Clip" } },
		{ { "Conv+BatchNormalization", "Conv+BatchNormalization+Relu", "Conv+BatchNormalization+LeakyRelu",
		    "Conv+BatchNormalization+Clip" },
		  { "Conv+BatchNormalization+Add", "Conv+BatchNormalization+Add+Relu",
		    "Conv+BatchNormalization+Add+LeakyRelu", "Conv+BatchNormalization+Add+Clip" } },
	};
	int a = act == NULL ? 0 : strcmp(act, "Relu") == 0 ? 1 : strcmp(act, "LeakyRelu") == 0 ? 2 : 3;

	return names[bn][add][a];
}

/*
 * The weights packed for sgemm.c's micro-kernel, per group (sgemm.h): when the CPU has AVX2 and FMA
 * and the conv is 2-D (what its B packer reads). The ONNX shape goes along as an attribute.
 */
/*
 * Input channels below which a 3x3 conv stays on the im2col GEMM: the 16 Winograd GEMMs have depth
 * C, and the small CNN's 1- and 16-channel convs ran 2-4x slower through them (per-tile work and
 * transforms outweigh 2.25x fewer multiplications); ResNet-50's have 64 to 512.
 */
#define OPT_WINOGRAD_CHANNELS_MIN 32

static bool all_ones(const struct rt_node *conv, const char *name)
{
	const struct rt_attr *a = rt_node_attr(conv, name);

	for (uint32_t i = 0; a != NULL && i < a->count; i++) {
		if (a->type != RT_ATTR_INTS || a->ints[i] != 1)
			return false;
	}
	return true;
}

/* What pack_weights made. */
enum conv_packing {
	CONV_PACKED = 1, /* for sgemm.c's im2col GEMM */
	CONV_WINOGRAD,   /* transformed for winograd.c's F(2x2, 3x3) */
	CONV_WINOGRAD_F4, /* for its F(4x4, 3x3) */
	CONV_DIRECT_PIXELS, /* in blocks of 32 output channels for conv_direct.c's pixel tiles */
	CONV_DIRECT_ROWS,   /* in panels of 8 output channels for its row tiles */
	CONV_BF16,       /* rounded into AMX's tiles for amx.c's GEMM (precision bf16) */
	CONV_BF16_NHWC,  /* rounded into AMX's tiles as the right operand, for conv_nhwc.c */
};

/*
 * At precision bf16 every 2-D conv goes to AMX's tiles, none to Winograd (its transforms would add
 * their rounding to bf16's). A conv whose depth or output channels are far below a tile's 32 (the
 * small CNN's first: 9 deep, 16 channels, 7/8 of its tiles padding) stays fp32, where it runs
 * faster: the CNN at bf16 in 20.3 us a batch of 1 against 21.8 with that conv on tiles, 445 against
 * 513 at 32 (medians of 3 alternating runs).
 */
#define OPT_BF16_DEPTH_MIN 32
#define OPT_BF16_CHANNELS_MIN 16

static bool bf16_applies(const struct rt_tensor *wt, int64_t group)
{
	return wt->dims[1] * wt->dims[2] * wt->dims[3] >= OPT_BF16_DEPTH_MIN && wt->dims[0] / group >= OPT_BF16_CHANNELS_MIN;
}

/*
 * An ungrouped, undilated one runs on NHWC bf16 tensors (conv_nhwc.c; opt_nhwc_region wires the
 * region's tensors and edges): its weights become the GEMM's right operand, k ordered as the taps
 * read the image (rt_bf16_conv_weights_kn). Grouped and dilated ones keep NCHW and the im2col GEMM.
 */
static bool nhwc_applies(const struct rt_node *conv, const struct rt_tensor *wt, int64_t group)
{
	return group == 1 && wt->rank == 4 && bf16_applies(wt, group) && all_ones(conv, "dilations");
}

static int pack_weights_nhwc(struct opt_ctx *c, const struct rt_node *conv, const struct rt_tensor *wt,
			     int32_t *packed)
{
	int64_t strides[2] = { 1, 1 };
	const struct rt_attr *st = rt_node_attr(conv, "strides");
	int64_t m = wt->dims[0], ch = wt->dims[1], kh = wt->dims[2], kw = wt->dims[3], k, total;
	const float *w = wt->data;
	float *kn;
	uint16_t *wp;

	if (st != NULL && st->type == RT_ATTR_INTS && st->count == 2)
		memcpy(strides, st->ints, sizeof(strides));
	k = rt_bf16_conv_depth(ch, kh, kw, strides);
	total = (int64_t)rt_bf16_packed_b_elems(k, m);
	kn = opt_alloc_floats(k * m);
	wp = (uint16_t *)opt_alloc_floats((total + 1) / 2);

	if (kn == NULL || wp == NULL) {
		free(kn);
		free(wp);
		return opt_error(c, -ENOMEM, "out of memory");
	}
	rt_bf16_conv_weights_kn(w, m, ch, kh, kw, strides, kn);
	rt_bf16_pack_b(kn, m, 1, k, m, wp);
	free(kn);
	*packed = opt_add_initializer(c, conv->name, "W_bf16_nhwc", BW_DTYPE_BFLOAT16, 1, &total, wp);
	return *packed < 0 ? *packed : CONV_BF16_NHWC;
}

/* At precision bf16 the weights of each group go into AMX's tiles (bf16.h) for the im2col GEMM. */
static int pack_weights_bf16(struct opt_ctx *c, const struct rt_node *conv, const struct rt_tensor *wt, int64_t group,
			     int32_t *packed)
{
	int64_t k = wt->dims[1] * wt->dims[2] * wt->dims[3], mg = wt->dims[0] / group;
	int64_t per = (int64_t)rt_bf16_packed_a_elems(mg, k), total = per * group;
	uint16_t *ap = (uint16_t *)opt_alloc_floats((total + 1) / 2);

	if (ap == NULL)
		return opt_error(c, -ENOMEM, "out of memory");
	for (int64_t g = 0; g < group; g++)
		rt_bf16_pack_a((const float *)wt->data + g * mg * k, k, mg, k, ap + g * per);
	*packed = opt_add_initializer(c, conv->name, "W_bf16", BW_DTYPE_BFLOAT16, 1, &total, ap);
	return *packed < 0 ? *packed : CONV_BF16;
}

/*
 * Depth (input channels x taps) from which a conv that conv_direct.c can compute takes its pixel
 * tiles, below which its row tiles (at stride 1): the small CNN's 144-deep second conv ran in 88-94
 * us a batch of 8 on pixel tiles against 105 on the im2col GEMM (its packing gone), its 9-deep first
 * one in 20-22 on row tiles against 22-24 (on pixel tiles, 27: at so few k a tile's four transposes
 * outweigh the packing they replace).
 */
#define OPT_DIRECT_PIXELS_DEPTH_MIN 32
/*
 * Largest image (its channels with a kernel's width of border, bytes) read in place: every block of
 * 32 output channels reads all of it, so it must stay in L2. ResNet-50's stem (3 x 230 x 230, 635
 * KiB) ran faster so; its 256-deep stride-2 1x1 downsample (256 x 56 x 56, 3.1 MiB) took twice the
 * time of the im2col GEMM, which packs the image once per k block.
 */
#define OPT_DIRECT_IMAGE_MAX (1u << 20)

/*
 * conv_direct.c's tiles for a conv (\return 0: none, the im2col GEMM's): not for a 1x1, stride-1,
 * unpadded one, which needs no packing (X is its own im2col matrix), nor where X's shape is unknown.
 */
static enum rt_dc_tiles direct_tiles(const struct opt_ctx *c, const struct rt_node *conv, const struct rt_tensor *wt,
				     int64_t group, int64_t k)
{
	int64_t strides[2] = { 1, 1 }, pads[4] = { 0 };
	const struct rt_attr *st = rt_node_attr(conv, "strides"), *pd = rt_node_attr(conv, "pads");
	const struct rt_tensor *x = opt_shape(c, conv->inputs[0]);
	enum rt_dc_tiles tiles = k >= OPT_DIRECT_PIXELS_DEPTH_MIN ? RT_DC_PIXELS : RT_DC_ROWS;
	bool pointwise;

	if (st != NULL && st->type == RT_ATTR_INTS && st->count == 2)
		memcpy(strides, st->ints, sizeof(strides));
	if (pd != NULL && pd->type == RT_ATTR_INTS && pd->count == 4)
		memcpy(pads, pd->ints, sizeof(pads));
	pointwise = wt->dims[2] == 1 && wt->dims[3] == 1 && strides[0] == 1 && strides[1] == 1 &&
		    pads[0] == 0 && pads[1] == 0 && pads[2] == 0 && pads[3] == 0;
	if (!rt_dc_available() || pointwise || !rt_dc_applies(tiles, wt->rank - 2, group, k, strides))
		return 0;
	if (x == NULL || x->rank != 4 || x->dims[1] <= 0 || x->dims[2] <= 0 || x->dims[3] <= 0 ||
	    (uint64_t)(x->dims[1] * (x->dims[2] + wt->dims[2]) * (x->dims[3] + wt->dims[3])) * sizeof(float) >
		    OPT_DIRECT_IMAGE_MAX)
		return 0;
	return tiles;
}

/*
 * A 3x3, stride-1, undilated, ungrouped conv of OPT_WINOGRAD_CHANNELS_MIN input channels or more
 * goes to winograd.c, in the form rt_wg_choose_tile picks for its output: its weights are
 * transformed and packed per tile position (\return CONV_WINOGRAD or CONV_WINOGRAD_F4); any other
 * 2-D conv to the im2col GEMM (CONV_PACKED); at precision bf16, every one to AMX's (CONV_BF16).
 */
static int pack_weights(struct opt_ctx *c, uint32_t ci, int32_t w, int32_t *packed, int64_t *shape)
{
	const struct rt_node *conv = &c->g->nodes[ci];
	const struct rt_tensor wt = c->g->values[w].tensor; /* a copy: values move on adding one */
	int64_t group = rt_attr_int(conv, "group", 1), k, mg, per, total;
	const struct rt_tensor *y = opt_shape(c, conv->outputs[0]);
	enum rt_dc_tiles tiles;
	bool winograd, direct;
	int wg_tile;
	float *ap;

	*packed = RT_VALUE_NONE;
	/* the GPU's convolutions read ONNX's layout */
	if (c->dev != RT_DEVICE_CPU || !rt_sg_available() || !float_const(c, w, -1) || wt.rank != 4 || group < 1 || wt.dims[0] % group != 0)
		return 0;
	memcpy(shape, wt.dims, 4 * sizeof(int64_t));
	if (c->precision == RT_PRECISION_BF16 && nhwc_applies(conv, &wt, group))
		return pack_weights_nhwc(c, conv, &wt, packed);
	if (c->precision == RT_PRECISION_BF16 && bf16_applies(&wt, group))
		return pack_weights_bf16(c, conv, &wt, group, packed);
	winograd = group == 1 && wt.dims[2] == 3 && wt.dims[3] == 3 && all_ones(conv, "strides") &&
		   all_ones(conv, "dilations") && wt.dims[1] >= OPT_WINOGRAD_CHANNELS_MIN;
	wg_tile = y != NULL && y->rank == 4 ? rt_wg_choose_tile(y->dims[2], y->dims[3]) : rt_wg_choose_tile(0, 0);
	k = wt.dims[1] * wt.dims[2] * wt.dims[3];
	tiles = winograd ? 0 : direct_tiles(c, conv, &wt, group, k);
	direct = tiles != 0;
	mg = wt.dims[0] / group;
	per = (int64_t)rt_sg_packed_floats(mg, k);
	total = winograd ? (int64_t)rt_wg_packed_floats(wg_tile, wt.dims[0], wt.dims[1]) :
		direct ? (int64_t)rt_dc_packed_floats(tiles, wt.dims[0], k) : per * group;
	if ((ap = opt_alloc_floats(total)) == NULL)
		return opt_error(c, -ENOMEM, "out of memory");
	if (winograd && rt_wg_pack_weights(wg_tile, wt.data, wt.dims[0], wt.dims[1], ap) != 0) {
		free(ap);
		return opt_error(c, -ENOMEM, "out of memory");
	}
	if (direct)
		rt_dc_pack_weights(tiles, wt.data, wt.dims[0], k, ap);
	for (int64_t g = 0; !winograd && !direct && g < group; g++)
		rt_sg_pack_a((const float *)wt.data + g * mg * k, k, mg, k, ap + g * per);
	*packed = opt_add_initializer(c, conv->name, "W_packed", BW_DTYPE_FLOAT, 1, &total, ap);
	if (*packed < 0)
		return *packed;
	if (winograd)
		return wg_tile == 4 ? CONV_WINOGRAD_F4 : CONV_WINOGRAD;
	return !direct ? CONV_PACKED :
	       tiles == RT_DC_ROWS ? CONV_DIRECT_ROWS : CONV_DIRECT_PIXELS;
}

static int fuse_one(struct opt_ctx *c, uint32_t ci, const struct conv_match *mt, uint32_t *packed_count,
		    uint32_t winograd_count[2], uint32_t *direct_count)
{
	struct rt_graph *g = c->g;
	const struct rt_node *conv = &g->nodes[ci];
	int32_t in[4] = { conv->inputs[0], conv->inputs[1], RT_VALUE_NONE, mt->z }, packed;
	int32_t last = mt->act >= 0 ? mt->act : mt->add >= 0 ? mt->add : mt->bn >= 0 ? mt->bn : (int32_t)ci;
	int64_t shape[4];
	enum rt_dc_tiles direct;
	bool bf16, nhwc;
	int rc, wg_tile;

	if (conv->num_inputs > 2)
		in[2] = conv->inputs[2];
	if (mt->bn >= 0 && (rc = fold_bn(c, conv, &g->nodes[mt->bn], &in[1], &in[2])) < 0)
		return rc;
	if ((rc = pack_weights(c, ci, in[1], &packed, shape)) < 0)
		return rc;
	if (rc == 0 && mt->bn < 0 && mt->add < 0 && mt->act < 0)
		return 0; /* nothing fused, nothing packed: the Conv kernel does the same */
	wg_tile = rc == CONV_WINOGRAD ? 2 : rc == CONV_WINOGRAD_F4 ? 4 : 0;
	direct = rc == CONV_DIRECT_PIXELS ? RT_DC_PIXELS : rc == CONV_DIRECT_ROWS ? RT_DC_ROWS : 0;
	bf16 = rc == CONV_BF16;
	nhwc = rc == CONV_BF16_NHWC;
	if (rc > 0) {
		in[1] = packed;
		(*packed_count)++;
	}
	if (mt->bn >= 0 || mt->add >= 0 || mt->act >= 0)
		opt_report(c, kind_name(mt->bn >= 0, mt->add >= 0, mt->act >= 0 ? mt->act_kind : NULL), 1);
	if (mt->bn >= 0 && mt->bn != last)
		opt_kill(c, (uint32_t)mt->bn);
	if (mt->add >= 0 && mt->add != last)
		opt_kill(c, (uint32_t)mt->add);
	if ((rc = opt_make_fused(c, (uint32_t)last, ci, nhwc ? "FusedConvNhwc" : "FusedConv", in, 4, mt->out)) < 0)
		return rc;
	if (mt->act >= 0 && opt_set_act(&g->nodes[last], mt->act_kind, mt->act_params, mt->act_nparams) != 0)
		return opt_error(c, -ENOMEM, "out of memory");
	if (packed >= 0) {
		struct rt_node *n = &g->nodes[last];

		if (opt_attr_ints(n, "weight_shape", shape, 4) != 0 ||
		    (!nhwc && opt_attr_int(n, "packed_weights", bf16 ? RT_K_PACKED_BF16 : RT_K_PACKED_FP32) != 0) ||
		    (wg_tile != 0 && opt_attr_int(n, "winograd", wg_tile) != 0) ||
		    (direct != 0 && opt_attr_int(n, "direct", direct) != 0))
			return opt_error(c, -ENOMEM, "out of memory");
		winograd_count[0] += wg_tile == 2;
		winograd_count[1] += wg_tile == 4;
		*direct_count += direct != 0;
	}
	return 0;
}

/* An ONNX MaxPool of 2x2 windows at stride 2, no padding, dilation or ceil_mode, no Indices output. */
static bool maxpool_2x2(const struct opt_ctx *c, int32_t n)
{
	static const int64_t two[2] = { 2, 2 };
	const struct rt_node *mp;
	const struct rt_attr *k, *st, *pads, *dil;

	if (n < 0 || !opt_is_op(c, n, "MaxPool"))
		return false;
	mp = &c->g->nodes[n];
	k = rt_node_attr(mp, "kernel_shape");
	st = rt_node_attr(mp, "strides");
	pads = rt_node_attr(mp, "pads");
	dil = rt_node_attr(mp, "dilations");
	if (mp->num_outputs > 1 && mp->outputs[1] != RT_VALUE_NONE)
		return false;
	if (k == NULL || k->type != RT_ATTR_INTS || k->count != 2 || memcmp(k->ints, two, sizeof(two)) != 0 ||
	    st == NULL || st->type != RT_ATTR_INTS || st->count != 2 || memcmp(st->ints, two, sizeof(two)) != 0)
		return false;
	for (uint32_t i = 0; pads != NULL && i < pads->count; i++)
		if (pads->type != RT_ATTR_INTS || pads->ints[i] != 0)
			return false;
	return all_ones(mp, "dilations") && (dil == NULL || dil->count == 2) && rt_attr_int(mp, "ceil_mode", 0) == 0 &&
	       strcmp(rt_attr_string(mp, "auto_pad", "NOTSET"), "NOTSET") == 0;
}

/*
 * A FusedConv on conv_direct.c's tiles whose only reader is a 2x2, stride-2 MaxPool takes the pool
 * into its tiles (attribute "pool"), where the level's tiles take one (rt_dc_pool_applies): the
 * conv's output (4x the pool's) is never stored. The small CNN's first conv: conv1 and pool1 at
 * batch 32, 93 + 36 us apart.
 */
static int fuse_pools(struct opt_ctx *c, uint32_t *count)
{
	struct rt_graph *g = c->g;
	int rc = opt_index(c);

	for (uint32_t n = 0; rc == 0 && n < g->num_nodes; n++) {
		const struct rt_node *conv = &g->nodes[n];
		int32_t in[4], r;

		if (!opt_is_ours(c, (int32_t)n, "FusedConv") || rt_attr_int(conv, "direct", 0) == 0 ||
		    !rt_dc_pool_applies((enum rt_dc_tiles)rt_attr_int(conv, "direct", 0)) ||
		    conv->num_inputs > 4 || (conv->num_inputs == 4 && conv->inputs[3] != RT_VALUE_NONE) ||
		    conv->num_outputs != 1)
			continue;
		r = opt_sole_reader(c, conv->outputs[0]);
		if (!maxpool_2x2(c, r))
			continue;
		memcpy(in, conv->inputs, conv->num_inputs * sizeof(in[0]));
		rc = opt_make_fused(c, (uint32_t)r, n, "FusedConv", in, conv->num_inputs, g->nodes[r].outputs[0]);
		if (rc == 0 && opt_attr_int(&g->nodes[r], "pool", 1) != 0)
			rc = opt_error(c, -ENOMEM, "out of memory");
		*count += rc == 0;
	}
	return rc;
}

int opt_fuse_conv(struct opt_ctx *c)
{
	struct rt_graph *g = c->g;
	uint32_t as_gemm = 0, packed = 0, winograd[2] = { 0, 0 }, direct = 0;
	int rc = opt_index(c);

	for (uint32_t n = 0; rc == 0 && n < g->num_nodes; n++) {
		const struct rt_node *conv = &g->nodes[n];
		struct conv_match mt;
		bool w_const, b_const;

		/* without W (named ""), it is the planner's to refuse: pack_weights reads W */
		if (!opt_is_op(c, (int32_t)n, "Conv") || conv->num_inputs < 2 || conv->inputs[1] == RT_VALUE_NONE ||
		    conv->num_outputs != 1)
			continue;
		w_const = float_const(c, conv->inputs[1], -1) && g->values[conv->inputs[1]].tensor.rank >= 3;
		if (w_const && c->dev == RT_DEVICE_CPU && conv_is_gemm(c, conv))
			as_gemm++;
		b_const = conv->num_inputs < 3 || conv->inputs[2] == RT_VALUE_NONE ||
			  float_const(c, conv->inputs[2], -1);
		match(c, n, w_const && b_const, w_const ? g->values[conv->inputs[1]].tensor.dims[0] : -1, &mt);
		rc = fuse_one(c, n, &mt, &packed, winograd, &direct);
	}
	opt_report(c, "1x1 Conv as GEMM", as_gemm);
	opt_report(c, "weights pre-packed", packed);
	if (c->precision == RT_PRECISION_BF16)
		opt_report(c, RT_OPT_KIND_BF16, packed);
	opt_report(c, "3x3 Conv as Winograd F(2x2,3x3)", winograd[0]);
	opt_report(c, "3x3 Conv as Winograd F(4x4,3x3)", winograd[1]);
	opt_report(c, "Conv read in place (direct tiles)", direct);
	if (rc == 0) {
		uint32_t pools = 0;

		rc = fuse_pools(c, &pools);
		opt_report(c, "Conv+MaxPool 2x2 in the conv's tiles", pools);
	}
	return rc;
}
