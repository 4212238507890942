/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Kernels that place elements by index arithmetic: Pad, DepthToSpace, SpaceToDepth, Trilu,
 * GatherElements, OneHot, EyeLike. Like layout.c they copy elements by size, for every fixed-size
 * type.
 */
#include <inttypes.h>
#include <string.h>

#include <batchwire/elem.h> /* bw_elem_set: Pad's constant value, EyeLike's ones and zeros */

#include "kernels.h"

static void copy_shape(struct rt_tensor *out, const struct rt_tensor *in)
{
	out->dtype = in->dtype;
	out->rank = in->rank;
	memcpy(out->dims, in->dims, sizeof(out->dims));
}

/* Reads an index of an int32 or int64 tensor. */
static int64_t index_at(const struct rt_tensor *t, int64_t i)
{
	return t->dtype == BW_DTYPE_INT64 ? ((const int64_t *)t->data)[i] : ((const int32_t *)t->data)[i];
}

/* ---- Pad ----------------------------------------------------------------------------------------- */

enum pad_mode { PAD_CONSTANT, PAD_REFLECT, PAD_EDGE };

struct pad_plan {
	enum pad_mode mode;
	int64_t begin[RT_MAX_RANK], end[RT_MAX_RANK];
};

/* Before opset 11 pads and value are attributes; from 11 on pads and constant_value are inputs. */
static int pad_plan(const struct rt_node *node, const struct rt_tensor *inputs, struct pad_plan *p, char *err,
		    size_t err_cap)
{
	const struct rt_tensor *in = &inputs[0];
	const char *mode = rt_attr_string(node, "mode", "constant");
	int64_t pads[2 * RT_MAX_RANK];
	unsigned int n;
	float value;
	int rc, r = in->rank;

	if (strcmp(mode, "constant") == 0)
		p->mode = PAD_CONSTANT;
	else if (strcmp(mode, "reflect") == 0)
		p->mode = PAD_REFLECT;
	else if (strcmp(mode, "edge") == 0)
		p->mode = PAD_EDGE;
	else
		return bw_err(err, err_cap, -EINVAL, "attribute 'mode' has unknown value '%s'", mode);
	if (node->opset < 11) {
		if ((rc = rt_k_attr_ints(node, "pads", pads, 2 * RT_MAX_RANK, &n, err, err_cap)) < 0 ||
		    (rc = rt_k_attr_float(node, "value", 0, &value, err, err_cap)) < 0)
			return rc;
	} else {
		if ((rc = rt_k_need_input(node, inputs, 1, "pads", RT_DTYPE_BIT(BW_DTYPE_INT64), err, err_cap)) < 0 ||
		    (rc = rt_k_read_ints(&inputs[1], "pads", pads, 2 * RT_MAX_RANK, &n, err, err_cap)) < 0)
			return rc;
		if (rt_k_has_input(node, inputs, 2) &&
		    (inputs[2].dtype != in->dtype || rt_tensor_elems(&inputs[2]) != 1))
			return bw_err(err, err_cap, -EINVAL, "input 'constant_value' must be a %s scalar",
				      rt_dtype_name(in->dtype));
	}
	if (n != 2 * (unsigned int)r)
		return bw_err(err, err_cap, -EINVAL, "'pads' has %u values for rank %d", n, r);
	for (int d = 0; d < r; d++) {
		int64_t dim = in->dims[d], padded;

		p->begin[d] = pads[d];
		p->end[d] = pads[d + r];
		if (dim < 0)
			continue;
		if (__builtin_add_overflow(dim, p->begin[d], &padded) || __builtin_add_overflow(padded, p->end[d], &padded))
			return bw_err(err, err_cap, -EINVAL, "'pads' of axis %d overflow", d);
		if (padded < 0 || p->begin[d] < -dim || p->end[d] < -dim)
			return bw_err(err, err_cap, -EINVAL, "'pads' crop axis %d (%" PRId64 ") below nothing", d, dim);
		if (p->mode != PAD_CONSTANT && dim == 0 && (p->begin[d] > 0 || p->end[d] > 0))
			return bw_err(err, err_cap, -EINVAL, "attribute 'mode' %s cannot pad the empty axis %d", mode, d);
	}
	return 0;
}

RT_K_INFER(pad)
{
	struct pad_plan p;
	int rc;

	if ((rc = rt_k_need_input(node, inputs, 0, "data", RT_K_DTYPE_ALL, err, err_cap)) < 0 ||
	    (rc = pad_plan(node, inputs, &p, err, err_cap)) < 0)
		return rc;
	copy_shape(&outputs[0], &inputs[0]);
	for (int d = 0; d < inputs[0].rank; d++)
		outputs[0].dims[d] = inputs[0].dims[d] < 0 ? RT_DIM_SYMBOLIC : inputs[0].dims[d] + p.begin[d] + p.end[d];
	return 0;
}

/* An input coordinate for output coordinate o along a dim of n, or -1 for the constant. */
static int64_t pad_source(enum pad_mode mode, int64_t o, int64_t begin, int64_t n)
{
	int64_t i = o - begin;

	if (i >= 0 && i < n)
		return i;
	if (mode == PAD_CONSTANT)
		return -1;
	if (mode == PAD_EDGE || n == 1)
		return i < 0 ? 0 : n - 1;
	while (i < 0 || i >= n) { /* reflect without repeating the edge: period 2 (n - 1) */
		if (i < 0)
			i = -i;
		if (i >= n)
			i = 2 * (n - 1) - i;
	}
	return i;
}

RT_K_RUN(pad)
{
	const struct rt_tensor *in = &inputs[0], *out = &outputs[0];
	size_t esize = rt_dtype_size(in->dtype);
	int64_t strides[RT_MAX_RANK], idx[RT_MAX_RANK] = {0}, rows = 1, inner, n = rt_tensor_elems(out);
	unsigned char cval[8] = {0};
	char *dst = out->data;
	struct pad_plan p;
	int r = in->rank, rc = pad_plan(node, inputs, &p, err, err_cap);

	if (rc < 0)
		return rc;
	if (node->opset < 11)
		bw_elem_set(in->dtype, cval, 0, rt_attr_float(node, "value", 0));
	else if (rt_k_has_input(node, inputs, 2))
		memcpy(cval, inputs[2].data, esize);
	if (n <= 0)
		return 0;
	if (r == 0) {
		memcpy(dst, in->data, esize);
		return 0;
	}
	rt_k_strides(in, strides);
	inner = out->dims[r - 1];
	for (int d = 0; d < r - 1; d++)
		rows *= out->dims[d];
	for (int64_t row = 0; row < rows; row++, dst += inner * (int64_t)esize) {
		int64_t off = 0;
		bool constant = false;

		for (int d = 0; d < r - 1; d++) {
			int64_t i = pad_source(p.mode, idx[d], p.begin[d], in->dims[d]);

			constant |= i < 0;
			off += i * strides[d];
		}
		for (int64_t j = 0; j < inner; j++) {
			int64_t i = constant ? -1 : pad_source(p.mode, j, p.begin[r - 1], in->dims[r - 1]);

			memcpy(dst + j * (int64_t)esize, i < 0 ? (const void *)cval : (const char *)in->data + (off + i) * (int64_t)esize,
			       esize);
		}
		for (int d = r - 2; d >= 0; d--) {
			if (++idx[d] < out->dims[d])
				break;
			idx[d] = 0;
		}
	}
	return 0;
}

/* ---- DepthToSpace SpaceToDepth ------------------------------------------------------------------- */

/* Both are one 6-D strided copy: the dims walked in output order and the input strides for them. */
static int d2s_plan(const struct rt_node *node, const struct rt_tensor *x, int64_t *dims, int64_t *strides,
		    struct rt_tensor *out, char *err, size_t err_cap)
{
	bool to_space = strcmp(node->op_type, "DepthToSpace") == 0;
	const char *mode = rt_attr_string(node, "mode", "DCR");
	int64_t b, n = x->dims[0], c = x->dims[1], h = x->dims[2], w = x->dims[3];
	int rc;

	if ((rc = rt_k_attr_int(node, "blocksize", 0, &b, err, err_cap)) < 0)
		return rc;
	if (b < 1)
		return bw_err(err, err_cap, -EINVAL, "attribute 'blocksize' must be positive");
	if (x->rank != 4)
		return bw_err(err, err_cap, -EINVAL, "input 'input' must be 4-D, has rank %u", x->rank);
	if (c < 0 || h < 0 || w < 0)
		return bw_err(err, err_cap, -ENOTSUP, "symbolic channel or spatial dims are not supported");
	copy_shape(out, x);
	if (to_space) {
		int64_t cc = c / (b * b);

		if (c % (b * b) != 0)
			return bw_err(err, err_cap, -EINVAL, "input 'input' has %" PRId64 " channels, not a multiple of "
				      "'blocksize' squared", c);
		if (strcmp(mode, "DCR") != 0 && strcmp(mode, "CRD") != 0)
			return bw_err(err, err_cap, -EINVAL, "attribute 'mode' has unknown value '%s'", mode);
		out->dims[1] = cc;
		out->dims[2] = h * b;
		out->dims[3] = w * b;
		/* out [n, cc, h, b1, w, b2] from in [n, b1, b2, cc, h, w] (DCR) or [n, cc, b1, b2, h, w] (CRD) */
		int64_t s_b1 = mode[0] == 'D' ? b * cc * h * w : b * h * w, s_b2 = mode[0] == 'D' ? cc * h * w : h * w;
		int64_t s_c = mode[0] == 'D' ? h * w : b * b * h * w;
		const int64_t d[6] = {n, cc, h, b, w, b}, s[6] = {c * h * w, s_c, w, s_b1, 1, s_b2};

		memcpy(dims, d, sizeof(d));
		memcpy(strides, s, sizeof(s));
	} else {
		if (h % b != 0 || w % b != 0)
			return bw_err(err, err_cap, -EINVAL, "input 'input' spatial dims are not multiples of 'blocksize'");
		out->dims[1] = c * b * b;
		out->dims[2] = h / b;
		out->dims[3] = w / b;
		/* out [n, b1, b2, c, h', w'] from in [n, c, h', b1, w', b2] */
		const int64_t d[6] = {n, b, b, c, h / b, w / b}, s[6] = {c * h * w, w, 1, h * w, b * w, b};

		memcpy(dims, d, sizeof(d));
		memcpy(strides, s, sizeof(s));
	}
	return 0;
}

RT_K_INFER(depth_to_space)
{
	int64_t dims[6], strides[6];
	int rc = rt_k_need_input(node, inputs, 0, "input", RT_K_DTYPE_ALL, err, err_cap);

	if (rc < 0)
		return rc;
	return d2s_plan(node, &inputs[0], dims, strides, &outputs[0], err, err_cap);
}

RT_K_RUN(depth_to_space)
{
	int64_t dims[6], strides[6];
	struct rt_tensor out;
	int rc = d2s_plan(node, &inputs[0], dims, strides, &out, err, err_cap);

	if (rc < 0)
		return rc;
	rt_k_copy_strided(outputs[0].data, inputs[0].data, 6, dims, strides, rt_dtype_size(inputs[0].dtype));
	return 0;
}

/* ---- Trilu --------------------------------------------------------------------------------------- */

RT_K_INFER(trilu)
{
	int64_t upper;
	int rc;

	if ((rc = rt_k_need_input(node, inputs, 0, "input", RT_K_DTYPE_ALL, err, err_cap)) < 0 ||
	    (rc = rt_k_attr_int(node, "upper", 1, &upper, err, err_cap)) < 0)
		return rc;
	if (inputs[0].rank < 2)
		return bw_err(err, err_cap, -EINVAL, "input 'input' must have rank >= 2, has %u", inputs[0].rank);
	if (rt_k_has_input(node, inputs, 1) &&
	    (inputs[1].dtype != BW_DTYPE_INT64 || rt_tensor_elems(&inputs[1]) != 1))
		return bw_err(err, err_cap, -EINVAL, "input 'k' must be an int64 scalar");
	copy_shape(&outputs[0], &inputs[0]);
	return 0;
}

RT_K_RUN(trilu)
{
	const struct rt_tensor *in = &inputs[0];
	bool upper = rt_attr_int(node, "upper", 1) != 0;
	int64_t k = rt_k_has_input(node, inputs, 1) ? *(const int64_t *)inputs[1].data : 0;
	int64_t rows = in->dims[in->rank - 2], cols = in->dims[in->rank - 1], n = rt_tensor_elems(in);
	size_t esize = rt_dtype_size(in->dtype);
	char *o = outputs[0].data;

	if (o != in->data)
		memcpy(o, in->data, (size_t)n * esize);
	for (int64_t m = 0; rows * cols > 0 && m < n / (rows * cols); m++) {
		for (int64_t i = 0; i < rows; i++) {
			for (int64_t j = 0; j < cols; j++) {
				if (upper ? j - i < k : j - i > k)
					memset(o + ((m * rows + i) * cols + j) * (int64_t)esize, 0, esize);
			}
		}
	}
	return 0;
}

/* ---- GatherElements ------------------------------------------------------------------------------ */

RT_K_INFER(gather_elements)
{
	const struct rt_tensor *data = &inputs[0], *idx = &inputs[1];
	int64_t axis;
	int rc;

	if ((rc = rt_k_need_input(node, inputs, 0, "data", RT_K_DTYPE_ALL, err, err_cap)) < 0 ||
	    (rc = rt_k_need_input(node, inputs, 1, "indices", RT_K_DTYPE_INDEX, err, err_cap)) < 0 ||
	    (rc = rt_k_attr_int(node, "axis", 0, &axis, err, err_cap)) < 0 ||
	    (rc = rt_k_axis(axis, data->rank, "attribute 'axis'", &axis, err, err_cap)) < 0)
		return rc;
	if (idx->rank != data->rank)
		return bw_err(err, err_cap, -EINVAL, "input 'indices' has rank %u, 'data' %u", idx->rank, data->rank);
	for (int d = 0; d < data->rank; d++) {
		if (d != axis && idx->dims[d] > data->dims[d] && data->dims[d] >= 0)
			return bw_err(err, err_cap, -EINVAL, "input 'indices' dim %d (%" PRId64 ") exceeds 'data' (%" PRId64 ")",
				      d, idx->dims[d], data->dims[d]);
	}
	copy_shape(&outputs[0], idx);
	outputs[0].dtype = data->dtype;
	return 0;
}

RT_K_RUN(gather_elements)
{
	const struct rt_tensor *data = &inputs[0], *idx = &inputs[1];
	int64_t axis = rt_attr_int(node, "axis", 0), strides[RT_MAX_RANK], pos[RT_MAX_RANK] = {0};
	int64_t n = rt_tensor_elems(idx), dim;
	size_t esize = rt_dtype_size(data->dtype);
	int r = data->rank;

	if (axis < 0)
		axis += r;
	dim = data->dims[axis];
	rt_k_strides(data, strides);
	for (int64_t i = 0; i < n; i++) {
		int64_t v = index_at(idx, i), off = 0;

		if (v < -dim || v >= dim)
			return bw_err(err, err_cap, -EINVAL, "input 'indices' has %" PRId64 ", out of range for axis %"
				      PRId64 " of size %" PRId64, v, axis, dim);
		if (v < 0)
			v += dim;
		for (int d = 0; d < r; d++)
			off += (d == axis ? v : pos[d]) * strides[d];
		memcpy((char *)outputs[0].data + i * (int64_t)esize, (const char *)data->data + off * (int64_t)esize, esize);
		for (int d = r - 1; d >= 0; d--) {
			if (++pos[d] < idx->dims[d])
				break;
			pos[d] = 0;
		}
	}
	return 0;
}

/* ---- OneHot -------------------------------------------------------------------------------------- */

static int onehot_plan(const struct rt_node *node, const struct rt_tensor *inputs, int64_t *axis, int64_t *depth,
		       char *err, size_t err_cap)
{
	int rank = inputs[0].rank + 1;
	int rc;

	if ((rc = rt_k_attr_int(node, "axis", -1, axis, err, err_cap)) < 0 ||
	    (rc = rt_k_axis(*axis, rank, "attribute 'axis'", axis, err, err_cap)) < 0)
		return rc;
	if (rank > RT_MAX_RANK)
		return bw_err(err, err_cap, -EINVAL, "OneHot output rank %d exceeds %d", rank, RT_MAX_RANK);
	if (rt_tensor_elems(&inputs[1]) != 1)
		return bw_err(err, err_cap, -EINVAL, "input 'depth' must be a scalar");
	if (inputs[1].data == NULL)
		return bw_err(err, err_cap, -ENOTSUP, "input 'depth' must be a constant");
	*depth = (int64_t)rt_k_load_f64(inputs[1].data, inputs[1].dtype, 0);
	if (*depth < 1)
		return bw_err(err, err_cap, -EINVAL, "input 'depth' must be positive");
	if (rt_tensor_elems(&inputs[2]) != 2)
		return bw_err(err, err_cap, -EINVAL, "input 'values' must hold 2 values (off, on)");
	return 0;
}

RT_K_INFER(onehot)
{
	int64_t axis, depth;
	int rc, k = 0;

	if ((rc = rt_k_need_input(node, inputs, 0, "indices", RT_K_DTYPE_NUMERIC, err, err_cap)) < 0 ||
	    (rc = rt_k_need_input(node, inputs, 1, "depth", RT_K_DTYPE_NUMERIC, err, err_cap)) < 0 ||
	    (rc = rt_k_need_input(node, inputs, 2, "values", RT_K_DTYPE_ALL, err, err_cap)) < 0 ||
	    (rc = onehot_plan(node, inputs, &axis, &depth, err, err_cap)) < 0)
		return rc;
	outputs[0].dtype = inputs[2].dtype;
	outputs[0].rank = (uint8_t)(inputs[0].rank + 1);
	for (int d = 0; d < outputs[0].rank; d++)
		outputs[0].dims[d] = d == axis ? depth : inputs[0].dims[k++];
	return 0;
}

RT_K_RUN(onehot)
{
	const struct rt_tensor *idx = &inputs[0];
	size_t esize = rt_dtype_size(inputs[2].dtype);
	int64_t axis, depth, outer, inner;
	const char *off_on = inputs[2].data;
	char *o = outputs[0].data;
	int rc = onehot_plan(node, inputs, &axis, &depth, err, err_cap);

	if (rc < 0)
		return rc;
	outer = rt_k_dims_prod(idx, 0, (int)axis);
	inner = rt_k_dims_prod(idx, (int)axis, idx->rank);
	for (int64_t a = 0; a < outer; a++) {
		for (int64_t k = 0; k < depth; k++) {
			for (int64_t b = 0; b < inner; b++) {
				int64_t v = (int64_t)rt_k_load_f64(idx->data, idx->dtype, a * inner + b);

				if (v < 0)
					v += depth;
				memcpy(o, off_on + (v == k ? esize : 0), esize);
				o += esize;
			}
		}
	}
	return 0;
}

/* ---- EyeLike ------------------------------------------------------------------------------------- */

RT_K_INFER(eyelike)
{
	int64_t dtype, k;
	int rc;

	if ((rc = rt_k_need_input(node, inputs, 0, "input", RT_K_DTYPE_ALL, err, err_cap)) < 0 ||
	    (rc = rt_k_attr_int(node, "dtype", inputs[0].dtype, &dtype, err, err_cap)) < 0 ||
	    (rc = rt_k_attr_int(node, "k", 0, &k, err, err_cap)) < 0)
		return rc;
	if (inputs[0].rank != 2)
		return bw_err(err, err_cap, -EINVAL, "input 'input' must be 2-D, has rank %u", inputs[0].rank);
	if (dtype <= 0 || dtype >= 32 || (RT_DTYPE_BIT(dtype) & RT_K_DTYPE_ALL) == 0)
		return bw_err(err, err_cap, -EINVAL, "attribute 'dtype' (%" PRId64 ") is not a supported type", dtype);
	copy_shape(&outputs[0], &inputs[0]);
	outputs[0].dtype = (uint8_t)dtype;
	return 0;
}

RT_K_RUN(eyelike)
{
	int64_t k = rt_attr_int(node, "k", 0), rows = outputs[0].dims[0], cols = outputs[0].dims[1];

	for (int64_t i = 0; i < rows; i++) {
		for (int64_t j = 0; j < cols; j++)
			bw_elem_set(outputs[0].dtype, outputs[0].data, (size_t)(i * cols + j), j - i == k ? 1 : 0);
	}
	return 0;
}
