/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Kernels that change only a tensor's shape (Identity, Reshape, Flatten, Squeeze, Unsqueeze: their
 * run is a copy, or nothing when the planner gave the output the input's memory) and the ones that
 * make tensors from shapes or attributes (Shape, Size, Constant, ConstantOfShape, Range).
 */
#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "kernels.h"

static void copy_same(struct rt_tensor *out, const struct rt_tensor *in)
{
	int64_t n = rt_tensor_elems(in);

	if (out->data != in->data && n > 0)
		memmove(out->data, in->data, (size_t)n * rt_dtype_size(in->dtype));
}

/* Shape-only kernels share this run: the bytes do not change. */
static int run_copy(const struct rt_tensor *inputs, struct rt_tensor *outputs)
{
	copy_same(&outputs[0], &inputs[0]);
	return 0;
}

/* ---- Identity ------------------------------------------------------------------------------------ */

RT_K_INFER(identity)
{
	int rc = rt_k_need_input(node, inputs, 0, "input", RT_K_DTYPE_ALL, err, err_cap);

	if (rc < 0)
		return rc;
	outputs[0].dtype = inputs[0].dtype;
	outputs[0].rank = inputs[0].rank;
	memcpy(outputs[0].dims, inputs[0].dims, sizeof(outputs[0].dims));
	return 0;
}

RT_K_RUN(identity)
{
	return run_copy(inputs, outputs);
}

/* ---- Reshape ------------------------------------------------------------------------------------- */

RT_K_INFER(reshape)
{
	int64_t shape[RT_MAX_RANK], allowzero = 0, known = 1, total;
	unsigned int n;
	int neg = -1, rc;
	bool zero = false;
	char a[96], b[96];
	struct rt_tensor *out = &outputs[0];

	if ((rc = rt_k_need_input(node, inputs, 0, "data", RT_K_DTYPE_ALL, err, err_cap)) < 0 ||
	    (rc = rt_k_need_input(node, inputs, 1, "shape", RT_DTYPE_BIT(BW_DTYPE_INT64), err, err_cap)) < 0)
		return rc;
	if (node->opset >= 14 && (rc = rt_k_attr_int(node, "allowzero", 0, &allowzero, err, err_cap)) < 0)
		return rc;
	rc = rt_k_read_ints(&inputs[1], "shape", shape, RT_MAX_RANK, &n, err, err_cap);
	if (rc < 0)
		return rc;
	out->rank = (uint8_t)n;
	for (unsigned int i = 0; i < n; i++) {
		int64_t v = shape[i];

		if (v == -1) {
			if (neg >= 0)
				return bw_err(err, err_cap, -EINVAL, "input 'shape' has more than one -1");
			neg = (int)i;
			continue;
		}
		if (v < -1)
			return bw_err(err, err_cap, -EINVAL, "input 'shape' has invalid dim %" PRId64, v);
		if (v == 0 && allowzero == 0) {
			if (i >= inputs[0].rank)
				return bw_err(err, err_cap, -EINVAL,
					      "input 'shape' copies dim %u (0) but 'data' has rank %u", i,
					      inputs[0].rank);
			v = inputs[0].dims[i];
		}
		zero |= v == 0;
		out->dims[i] = v;
		if (v < 0 || known < 0)
			known = -1;
		else if (__builtin_mul_overflow(known, v, &known))
			return bw_err(err, err_cap, -EINVAL, "input 'shape' has more than 2^63 elements");
	}
	if (neg >= 0 && zero && allowzero != 0)
		return bw_err(err, err_cap, -EINVAL, "input 'shape' has both 0 and -1 with allowzero set");
	total = rt_tensor_elems(&inputs[0]);
	if (neg >= 0) {
		if (total < 0 || known < 0) {
			out->dims[neg] = RT_DIM_SYMBOLIC;
		} else if (known == 0 || total % known != 0) {
			out->dims[neg] = 1;
			return bw_err(err, err_cap, -EINVAL, "cannot reshape 'data' %s to 'shape' %s",
				      rt_k_dims_str(&inputs[0], a, sizeof(a)), rt_k_dims_str(out, b, sizeof(b)));
		} else {
			out->dims[neg] = total / known;
		}
	} else if (total >= 0 && known >= 0 && total != known) {
		return bw_err(err, err_cap, -EINVAL, "cannot reshape 'data' %s to 'shape' %s",
			      rt_k_dims_str(&inputs[0], a, sizeof(a)), rt_k_dims_str(out, b, sizeof(b)));
	}
	out->dtype = inputs[0].dtype;
	return 0;
}

RT_K_RUN(reshape)
{
	return run_copy(inputs, outputs);
}

/* ---- Flatten ------------------------------------------------------------------------------------- */

RT_K_INFER(flatten)
{
	int64_t axis;
	int rc;

	if ((rc = rt_k_need_input(node, inputs, 0, "input", RT_K_DTYPE_ALL, err, err_cap)) < 0 ||
	    (rc = rt_k_attr_int(node, "axis", 1, &axis, err, err_cap)) < 0)
		return rc;
	/* axis may equal rank: [prod(all), 1] */
	if (axis < -(int64_t)inputs[0].rank || axis > inputs[0].rank)
		return bw_err(err, err_cap, -EINVAL, "attribute 'axis' %" PRId64 " is out of range for rank %u",
			      axis, inputs[0].rank);
	if (axis < 0)
		axis += inputs[0].rank;
	outputs[0].dtype = inputs[0].dtype;
	outputs[0].rank = 2;
	outputs[0].dims[0] = rt_k_dims_prod(&inputs[0], 0, (int)axis);
	outputs[0].dims[1] = rt_k_dims_prod(&inputs[0], (int)axis, inputs[0].rank);
	return 0;
}

RT_K_RUN(flatten)
{
	return run_copy(inputs, outputs);
}

/* ---- Squeeze and Unsqueeze ----------------------------------------------------------------------- */

RT_K_INFER(squeeze)
{
	bool unsqueeze = strcmp(node->op_type, "Unsqueeze") == 0;
	int64_t axes[RT_MAX_RANK];
	unsigned int n;
	const struct rt_tensor *in = &inputs[0];
	struct rt_tensor *out = &outputs[0];
	int rc;

	if ((rc = rt_k_need_input(node, inputs, 0, "data", RT_K_DTYPE_ALL, err, err_cap)) < 0)
		return rc;
	rc = rt_k_ints_attr_or_input(node, inputs, "axes", 1, 13, axes, RT_MAX_RANK, &n, err, err_cap);
	if (rc < 0)
		return rc;
	out->dtype = in->dtype;
	if (unsqueeze) {
		bool added[RT_MAX_RANK] = {false};
		int rank = in->rank + (int)n, k = 0;

		if (rc == 0)
			return bw_err(err, err_cap, -EINVAL, "%s 'axes' is missing",
				      node->opset < 13 ? "attribute" : "input");
		if (rank > RT_MAX_RANK)
			return bw_err(err, err_cap, -EINVAL, "Unsqueeze to rank %d exceeds %d", rank, RT_MAX_RANK);
		if ((rc = rt_k_axes(axes, n, rank, "'axes'", err, err_cap)) < 0)
			return rc;
		for (unsigned int i = 0; i < n; i++)
			added[axes[i]] = true;
		for (int d = 0; d < rank; d++)
			out->dims[d] = added[d] ? 1 : in->dims[k++];
		out->rank = (uint8_t)rank;
		return 0;
	}
	{
		bool drop[RT_MAX_RANK] = {false};
		int k = 0;

		if ((rc = rt_k_axes(axes, n, in->rank, "'axes'", err, err_cap)) < 0)
			return rc;
		for (unsigned int i = 0; i < n; i++) {
			if (in->dims[axes[i]] > 1 || in->dims[axes[i]] == 0)
				return bw_err(err, err_cap, -EINVAL,
					      "'axes' names axis %" PRId64 " of 'data' which is %" PRId64 ", not 1",
					      axes[i], in->dims[axes[i]]);
			drop[axes[i]] = true;
		}
		for (int d = 0; d < in->rank; d++) {
			if (n == 0 ? in->dims[d] == 1 : drop[d])
				continue;
			out->dims[k++] = in->dims[d];
		}
		out->rank = (uint8_t)k;
	}
	return 0;
}

RT_K_RUN(squeeze)
{
	return run_copy(inputs, outputs);
}

/* ---- Shape and Size ------------------------------------------------------------------------------ */

/* Shape's start and end (opset 15) clamp like Python slices. */
static void shape_range(const struct rt_node *node, int rank, int64_t *start, int64_t *end)
{
	*start = node->opset >= 15 ? rt_attr_int(node, "start", 0) : 0;
	*end = node->opset >= 15 ? rt_attr_int(node, "end", rank) : rank;
	if (*start < 0)
		*start += rank;
	if (*end < 0)
		*end += rank;
	*start = *start < 0 ? 0 : *start > rank ? rank : *start;
	*end = *end < 0 ? 0 : *end > rank ? rank : *end;
	if (*end < *start)
		*end = *start;
}

RT_K_INFER(shape)
{
	int64_t start, end, v;
	int rc;

	if ((rc = rt_k_need_input(node, inputs, 0, "data", RT_K_DTYPE_ALL, err, err_cap)) < 0 ||
	    (rc = rt_k_attr_int(node, "start", 0, &v, err, err_cap)) < 0 ||
	    (rc = rt_k_attr_int(node, "end", 0, &v, err, err_cap)) < 0)
		return rc;
	shape_range(node, inputs[0].rank, &start, &end);
	outputs[0].dtype = BW_DTYPE_INT64;
	outputs[0].rank = 1;
	outputs[0].dims[0] = end - start;
	return 0;
}

RT_K_RUN(shape)
{
	int64_t start, end;

	shape_range(node, inputs[0].rank, &start, &end);
	for (int64_t d = start; d < end; d++)
		((int64_t *)outputs[0].data)[d - start] = inputs[0].dims[d];
	return 0;
}

RT_K_INFER(size)
{
	int rc = rt_k_need_input(node, inputs, 0, "data", RT_K_DTYPE_ALL, err, err_cap);

	if (rc < 0)
		return rc;
	outputs[0].dtype = BW_DTYPE_INT64;
	outputs[0].rank = 0;
	return 0;
}

RT_K_RUN(size)
{
	*(int64_t *)outputs[0].data = rt_tensor_elems(&inputs[0]);
	return 0;
}

/* ---- Constant ------------------------------------------------------------------------------------ */

/* The one value attribute a Constant carries. */
static const struct rt_attr *constant_value(const struct rt_node *node, char *err, size_t err_cap, int *rc)
{
	static const char *const names[] = {"value", "value_float", "value_floats", "value_int", "value_ints",
					    "sparse_value", "value_string", "value_strings"};
	const struct rt_attr *found = NULL;

	*rc = 0;
	for (unsigned int i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		const struct rt_attr *a = rt_node_attr(node, names[i]);

		if (a == NULL)
			continue;
		if (found != NULL) {
			*rc = bw_err(err, err_cap, -EINVAL, "attributes '%s' and '%s' both set", found->name,
				     a->name);
			return NULL;
		}
		if (i >= 5) {
			*rc = bw_err(err, err_cap, -ENOTSUP, "attribute '%s' is not supported", names[i]);
			return NULL;
		}
		found = a;
	}
	if (found == NULL)
		*rc = bw_err(err, err_cap, -EINVAL, "attribute 'value' is missing");
	return found;
}

RT_K_INFER(constant)
{
	int rc;
	const struct rt_attr *a = constant_value(node, err, err_cap, &rc);
	struct rt_tensor *out = &outputs[0];

	if (a == NULL)
		return rc;
	switch (a->type) {
	case RT_ATTR_TENSOR:
		if (rt_dtype_size(a->tensor.dtype) == 0)
			return bw_err(err, err_cap, -ENOTSUP, "attribute 'value' has unsupported type %s",
				      rt_dtype_name(a->tensor.dtype));
		if (a->tensor.rank > RT_MAX_RANK || rt_tensor_elems(&a->tensor) < 0 ||
		    (a->tensor.data == NULL && rt_tensor_elems(&a->tensor) > 0))
			return bw_err(err, err_cap, -EINVAL, "attribute 'value' has no data");
		out->dtype = a->tensor.dtype;
		out->rank = a->tensor.rank;
		memcpy(out->dims, a->tensor.dims, sizeof(out->dims));
		return 0;
	case RT_ATTR_FLOAT:
	case RT_ATTR_INT:
		out->dtype = a->type == RT_ATTR_FLOAT ? BW_DTYPE_FLOAT : BW_DTYPE_INT64;
		out->rank = 0;
		return 0;
	case RT_ATTR_FLOATS:
	case RT_ATTR_INTS:
		out->dtype = a->type == RT_ATTR_FLOATS ? BW_DTYPE_FLOAT : BW_DTYPE_INT64;
		out->rank = 1;
		out->dims[0] = a->count;
		return 0;
	default:
		return bw_err(err, err_cap, -EINVAL, "attribute '%s' has the wrong type", a->name);
	}
}

RT_K_RUN(constant)
{
	int rc;
	const struct rt_attr *a = constant_value(node, err, err_cap, &rc);
	int64_t n = rt_tensor_elems(&outputs[0]);

	if (a == NULL)
		return rc;
	switch (a->type) {
	case RT_ATTR_TENSOR:
		if (n > 0)
			memcpy(outputs[0].data, a->tensor.data, (size_t)n * rt_dtype_size(a->tensor.dtype));
		break;
	case RT_ATTR_FLOAT: *(float *)outputs[0].data = a->f; break;
	case RT_ATTR_INT: *(int64_t *)outputs[0].data = a->i; break;
	case RT_ATTR_FLOATS: memcpy(outputs[0].data, a->floats, a->count * sizeof(float)); break;
	default: memcpy(outputs[0].data, a->ints, a->count * sizeof(int64_t)); break;
	}
	return 0;
}

/* ---- ConstantOfShape ----------------------------------------------------------------------------- */

RT_K_INFER(constant_of_shape)
{
	const struct rt_attr *a = rt_node_attr(node, "value");
	int64_t shape[RT_MAX_RANK];
	unsigned int n;
	int rc;

	if ((rc = rt_k_need_input(node, inputs, 0, "input", RT_DTYPE_BIT(BW_DTYPE_INT64), err, err_cap)) < 0 ||
	    (rc = rt_k_read_ints(&inputs[0], "input", shape, RT_MAX_RANK, &n, err, err_cap)) < 0)
		return rc;
	if (a != NULL && (a->type != RT_ATTR_TENSOR || rt_tensor_elems(&a->tensor) != 1 ||
			  rt_dtype_size(a->tensor.dtype) == 0 || a->tensor.data == NULL))
		return bw_err(err, err_cap, -EINVAL, "attribute 'value' must be a one-element tensor");
	for (unsigned int i = 0; i < n; i++) {
		if (shape[i] < 0)
			return bw_err(err, err_cap, -EINVAL, "input 'input' has negative dim %" PRId64, shape[i]);
		outputs[0].dims[i] = shape[i];
	}
	outputs[0].rank = (uint8_t)n;
	outputs[0].dtype = a != NULL ? a->tensor.dtype : BW_DTYPE_FLOAT;
	return 0;
}

RT_K_RUN(constant_of_shape)
{
	const struct rt_attr *a = rt_node_attr(node, "value");
	size_t esize = rt_dtype_size(outputs[0].dtype);
	int64_t n = rt_tensor_elems(&outputs[0]);

	if (a == NULL) {
		memset(outputs[0].data, 0, (size_t)n * esize);
		return 0;
	}
	for (int64_t i = 0; i < n; i++)
		memcpy((char *)outputs[0].data + i * (int64_t)esize, a->tensor.data, esize);
	return 0;
}

/* ---- Range --------------------------------------------------------------------------------------- */

#define RT_K_DTYPE_RANGE                                                                                     \
	(RT_K_DTYPE_FLOATS | RT_DTYPE_BIT(BW_DTYPE_INT16) | RT_DTYPE_BIT(BW_DTYPE_INT32) |                   \
	 RT_DTYPE_BIT(BW_DTYPE_INT64))

RT_K_INFER(range)
{
	static const char *const names[] = {"start", "limit", "delta"};
	double v[3], count;
	int rc;

	for (unsigned int i = 0; i < 3; i++) {
		if ((rc = rt_k_need_input(node, inputs, i, names[i], RT_K_DTYPE_RANGE, err, err_cap)) < 0)
			return rc;
		if (inputs[i].dtype != inputs[0].dtype)
			return bw_err(err, err_cap, -EINVAL, "input '%s' is %s but 'start' is %s", names[i],
				      rt_dtype_name(inputs[i].dtype), rt_dtype_name(inputs[0].dtype));
		if (rt_tensor_elems(&inputs[i]) != 1 || inputs[i].rank > 1)
			return bw_err(err, err_cap, -EINVAL, "input '%s' must be a scalar", names[i]);
		if (inputs[i].data == NULL)
			return bw_err(err, err_cap, -ENOTSUP, "input '%s' must be a constant", names[i]);
		v[i] = rt_k_load_f64(inputs[i].data, inputs[i].dtype, 0);
	}
	if (v[2] == 0)
		return bw_err(err, err_cap, -EINVAL, "input 'delta' must not be 0");
	count = fmax(ceil((v[1] - v[0]) / v[2]), 0);
	if (!(count < (double)INT64_MAX)) /* 2^63, and infinity */
		return bw_err(err, err_cap, -EINVAL, "inputs 'start', 'limit' and 'delta' give more than 2^63 values");
	outputs[0].dtype = inputs[0].dtype;
	outputs[0].rank = 1;
	outputs[0].dims[0] = (int64_t)count;
	return 0;
}

RT_K_RUN(range)
{
	int64_t n = outputs[0].dims[0];

	switch (outputs[0].dtype) {
	case BW_DTYPE_FLOAT: {
		float s = *(const float *)inputs[0].data, d = *(const float *)inputs[2].data;
		for (int64_t i = 0; i < n; i++)
			((float *)outputs[0].data)[i] = s + (float)i * d;
		break;
	}
	case BW_DTYPE_DOUBLE: {
		double s = *(const double *)inputs[0].data, d = *(const double *)inputs[2].data;
		for (int64_t i = 0; i < n; i++)
			((double *)outputs[0].data)[i] = s + (double)i * d;
		break;
	}
	default: {
		int64_t s, d;

		if (inputs[0].dtype == BW_DTYPE_INT64) { /* not through double: past 2^53 it is not exact, at
							   * 2^63 not an int64 */
			s = *(const int64_t *)inputs[0].data;
			d = *(const int64_t *)inputs[2].data;
		} else {
			s = (int64_t)rt_k_load_f64(inputs[0].data, inputs[0].dtype, 0);
			d = (int64_t)rt_k_load_f64(inputs[2].data, inputs[2].dtype, 0);
		}
		for (int64_t i = 0; i < n; i++) {
			int64_t v = (int64_t)((uint64_t)s + (uint64_t)i * (uint64_t)d); /* wraps, as the integer types do */
			if (outputs[0].dtype == BW_DTYPE_INT16)
				((int16_t *)outputs[0].data)[i] = (int16_t)v;
			else if (outputs[0].dtype == BW_DTYPE_INT32)
				((int32_t *)outputs[0].data)[i] = (int32_t)v;
			else
				((int64_t *)outputs[0].data)[i] = v;
		}
	}
	}
	return 0;
}
