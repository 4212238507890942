/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Kernels that move elements without computing on them: Transpose, Concat, Split, Slice, Gather,
 * Expand, Tile. They copy elements by size, so they serve every fixed-size type (shapes in int64
 * as much as activations in float). Transpose, Slice and Expand are one strided copy each.
 */
#include <inttypes.h>
#include <string.h>

#include "kernels.h"

static void copy_shape(struct rt_tensor *out, const struct rt_tensor *in)
{
	out->dtype = in->dtype;
	out->rank = in->rank;
	memcpy(out->dims, in->dims, sizeof(out->dims));
}

/* ---- Transpose ----------------------------------------------------------------------------------- */

static int transpose_perm(const struct rt_node *node, int rank, int64_t *perm, char *err, size_t err_cap)
{
	unsigned int n;
	bool seen[RT_MAX_RANK] = {false};
	int rc = rt_k_attr_ints(node, "perm", perm, RT_MAX_RANK, &n, err, err_cap);

	if (rc < 0)
		return rc;
	if (rc == 0) {
		for (int d = 0; d < rank; d++)
			perm[d] = rank - 1 - d;
		return 0;
	}
	if (n != (unsigned int)rank)
		return bw_err(err, err_cap, -EINVAL, "attribute 'perm' has %u values for rank %d", n, rank);
	for (int d = 0; d < rank; d++) {
		if (perm[d] < 0 || perm[d] >= rank || seen[perm[d]])
			return bw_err(err, err_cap, -EINVAL, "attribute 'perm' is not a permutation of 0..%d",
				      rank - 1);
		seen[perm[d]] = true;
	}
	return 0;
}

RT_K_INFER(transpose)
{
	int64_t perm[RT_MAX_RANK];
	int rc;

	if ((rc = rt_k_need_input(node, inputs, 0, "data", RT_K_DTYPE_ALL, err, err_cap)) < 0 ||
	    (rc = transpose_perm(node, inputs[0].rank, perm, err, err_cap)) < 0)
		return rc;
	copy_shape(&outputs[0], &inputs[0]);
	for (int d = 0; d < inputs[0].rank; d++)
		outputs[0].dims[d] = inputs[0].dims[perm[d]];
	return 0;
}

RT_K_RUN(transpose)
{
	int64_t perm[RT_MAX_RANK], in_strides[RT_MAX_RANK], strides[RT_MAX_RANK];
	int rc = transpose_perm(node, inputs[0].rank, perm, err, err_cap);

	if (rc < 0)
		return rc;
	rt_k_strides(&inputs[0], in_strides);
	for (int d = 0; d < inputs[0].rank; d++)
		strides[d] = in_strides[perm[d]];
	rt_k_copy_strided(outputs[0].data, inputs[0].data, outputs[0].rank, outputs[0].dims, strides,
			  rt_dtype_size(inputs[0].dtype));
	return 0;
}

/* ---- Concat -------------------------------------------------------------------------------------- */

RT_K_INFER(concat)
{
	int64_t axis, sum = 0;
	const struct rt_tensor *first = &inputs[0];
	int rc;

	if (node->num_inputs < 1)
		return bw_err(err, err_cap, -EINVAL, "Concat needs at least one input");
	if ((rc = rt_k_need_input(node, inputs, 0, "inputs", RT_K_DTYPE_ALL, err, err_cap)) < 0)
		return rc;
	if (rt_node_attr(node, "axis") == NULL && node->opset >= 4)
		return bw_err(err, err_cap, -EINVAL, "attribute 'axis' is missing");
	if ((rc = rt_k_attr_int(node, "axis", 1, &axis, err, err_cap)) < 0 ||
	    (rc = rt_k_axis(axis, first->rank, "attribute 'axis'", &axis, err, err_cap)) < 0)
		return rc;
	for (unsigned int k = 0; k < node->num_inputs; k++) {
		const struct rt_tensor *in = &inputs[k];
		char a[96], b[96];

		if ((rc = rt_k_need_input(node, inputs, k, "inputs", RT_K_DTYPE_ALL, err, err_cap)) < 0)
			return rc;
		if (in->dtype != first->dtype)
			return bw_err(err, err_cap, -EINVAL, "input %u is %s but input 0 is %s", k,
				      rt_dtype_name(in->dtype), rt_dtype_name(first->dtype));
		if (in->rank != first->rank)
			goto mismatch;
		for (int d = 0; d < first->rank; d++) {
			if (d != axis && in->dims[d] != first->dims[d] && in->dims[d] >= 0 && first->dims[d] >= 0)
				goto mismatch;
		}
		if (sum < 0 || in->dims[axis] < 0)
			sum = -1;
		else if (__builtin_add_overflow(sum, in->dims[axis], &sum))
			return bw_err(err, err_cap, -EINVAL, "the inputs' axis %" PRId64 " sums past 2^63", axis);
		continue;
mismatch:
		return bw_err(err, err_cap, -EINVAL, "input %u %s does not match input 0 %s outside axis %" PRId64,
			      k, rt_k_dims_str(in, a, sizeof(a)), rt_k_dims_str(first, b, sizeof(b)), axis);
	}
	copy_shape(&outputs[0], first);
	outputs[0].dims[axis] = sum;
	return 0;
}

RT_K_RUN(concat)
{
	int64_t axis = rt_attr_int(node, "axis", 1);
	const struct rt_tensor *out = &outputs[0];
	size_t esize = rt_dtype_size(out->dtype);
	int64_t outer, inner;
	char *dst = out->data;

	if (axis < 0)
		axis += out->rank;
	outer = rt_k_dims_prod(out, 0, (int)axis);
	inner = rt_k_dims_prod(out, (int)axis + 1, out->rank) * (int64_t)esize;
	for (int64_t o = 0; o < outer; o++) {
		for (unsigned int k = 0; k < node->num_inputs; k++) {
			size_t chunk = (size_t)(inputs[k].dims[axis] * inner);

			memcpy(dst, (const char *)inputs[k].data + (size_t)o * chunk, chunk);
			dst += chunk;
		}
	}
	return 0;
}

/* ---- Split --------------------------------------------------------------------------------------- */

static int split_sizes(const struct rt_node *node, const struct rt_tensor *inputs, int64_t *axis,
		       int64_t *sizes, char *err, size_t err_cap)
{
	const struct rt_tensor *in = &inputs[0];
	unsigned int n, nout = node->num_outputs;
	int64_t sum = 0, dim;
	int rc;

	if (nout < 1 || nout > RT_K_MAX_INPUTS)
		return bw_err(err, err_cap, -EINVAL, "Split needs 1 to %d outputs, has %u", RT_K_MAX_INPUTS, nout);
	if ((rc = rt_k_attr_int(node, "axis", 0, axis, err, err_cap)) < 0 ||
	    (rc = rt_k_axis(*axis, in->rank, "attribute 'axis'", axis, err, err_cap)) < 0)
		return rc;
	dim = in->dims[*axis];
	rc = rt_k_ints_attr_or_input(node, inputs, "split", 1, 13, sizes, RT_K_MAX_INPUTS, &n, err, err_cap);
	if (rc < 0)
		return rc;
	if (rc == 0) {
		if (dim >= 0 && dim % nout != 0)
			return bw_err(err, err_cap, -EINVAL, "axis %" PRId64 " (%" PRId64 ") does not split into %u "
				      "equal parts", *axis, dim, nout);
		for (unsigned int i = 0; i < nout; i++)
			sizes[i] = dim < 0 ? RT_DIM_SYMBOLIC : dim / nout;
		return 0;
	}
	if (n != nout)
		return bw_err(err, err_cap, -EINVAL, "'split' has %u sizes for %u outputs", n, nout);
	for (unsigned int i = 0; i < n; i++) {
		if (sizes[i] < 0)
			return bw_err(err, err_cap, -EINVAL, "'split' has a negative size");
		if (__builtin_add_overflow(sum, sizes[i], &sum))
			return bw_err(err, err_cap, -EINVAL, "'split' sizes sum past 2^63");
	}
	if (dim >= 0 && sum != dim)
		return bw_err(err, err_cap, -EINVAL, "'split' sizes sum to %" PRId64 ", axis %" PRId64 " is %" PRId64,
			      sum, *axis, dim);
	return 0;
}

RT_K_INFER(split)
{
	int64_t axis, sizes[RT_K_MAX_INPUTS];
	int rc;

	if ((rc = rt_k_need_input(node, inputs, 0, "input", RT_K_DTYPE_ALL, err, err_cap)) < 0 ||
	    (rc = split_sizes(node, inputs, &axis, sizes, err, err_cap)) < 0)
		return rc;
	for (unsigned int i = 0; i < node->num_outputs; i++) {
		copy_shape(&outputs[i], &inputs[0]);
		outputs[i].dims[axis] = sizes[i];
	}
	return 0;
}

RT_K_RUN(split)
{
	const struct rt_tensor *in = &inputs[0];
	int64_t axis, sizes[RT_K_MAX_INPUTS], outer, inner;
	const char *src = in->data;
	int rc = split_sizes(node, inputs, &axis, sizes, err, err_cap);

	if (rc < 0)
		return rc;
	outer = rt_k_dims_prod(in, 0, (int)axis);
	inner = rt_k_dims_prod(in, (int)axis + 1, in->rank) * (int64_t)rt_dtype_size(in->dtype);
	for (int64_t o = 0; o < outer; o++) {
		for (unsigned int k = 0; k < node->num_outputs; k++) {
			size_t chunk = (size_t)(sizes[k] * inner);

			if (rt_k_has_output(node, k))
				memcpy((char *)outputs[k].data + (size_t)o * chunk, src, chunk);
			src += chunk;
		}
	}
	return 0;
}

/* ---- Slice --------------------------------------------------------------------------------------- */

/* Per dim of data: first element, step and count (dims not sliced: 0, 1, dim). */
struct slice_plan {
	int64_t start[RT_MAX_RANK], step[RT_MAX_RANK], count[RT_MAX_RANK];
};

static int slice_plan(const struct rt_node *node, const struct rt_tensor *inputs, struct slice_plan *p,
		      char *err, size_t err_cap)
{
	const struct rt_tensor *in = &inputs[0];
	int64_t starts[RT_MAX_RANK], ends[RT_MAX_RANK], axes[RT_MAX_RANK], steps[RT_MAX_RANK];
	unsigned int n, n2, na = 0, ns = 0;
	int rank = in->rank, rc;

	if (node->opset < 10) {
		if ((rc = rt_k_attr_ints(node, "starts", starts, RT_MAX_RANK, &n, err, err_cap)) < 0 ||
		    (rc == 0 && (rc = bw_err(err, err_cap, -EINVAL, "attribute 'starts' is missing")) < 0) ||
		    (rc = rt_k_attr_ints(node, "ends", ends, RT_MAX_RANK, &n2, err, err_cap)) < 0 ||
		    (rc == 0 && (rc = bw_err(err, err_cap, -EINVAL, "attribute 'ends' is missing")) < 0) ||
		    (rc = rt_k_attr_ints(node, "axes", axes, RT_MAX_RANK, &na, err, err_cap)) < 0)
			return rc;
	} else {
		if ((rc = rt_k_need_input(node, inputs, 1, "starts", RT_K_DTYPE_INDEX, err, err_cap)) < 0 ||
		    (rc = rt_k_need_input(node, inputs, 2, "ends", RT_K_DTYPE_INDEX, err, err_cap)) < 0 ||
		    (rc = rt_k_read_ints(&inputs[1], "starts", starts, RT_MAX_RANK, &n, err, err_cap)) < 0 ||
		    (rc = rt_k_read_ints(&inputs[2], "ends", ends, RT_MAX_RANK, &n2, err, err_cap)) < 0)
			return rc;
		if (rt_k_has_input(node, inputs, 3) &&
		    (rc = rt_k_read_ints(&inputs[3], "axes", axes, RT_MAX_RANK, &na, err, err_cap)) < 0)
			return rc;
		if (rt_k_has_input(node, inputs, 4) &&
		    (rc = rt_k_read_ints(&inputs[4], "steps", steps, RT_MAX_RANK, &ns, err, err_cap)) < 0)
			return rc;
	}
	if (n2 != n)
		return bw_err(err, err_cap, -EINVAL, "'starts' has %u values but 'ends' has %u", n, n2);
	if (na == 0) {
		for (unsigned int i = 0; i < n; i++)
			axes[i] = i;
		na = n;
	}
	if (na != n)
		return bw_err(err, err_cap, -EINVAL, "'axes' has %u values but 'starts' has %u", na, n);
	if (ns == 0) {
		for (unsigned int i = 0; i < n; i++)
			steps[i] = 1;
		ns = n;
	}
	if (ns != n)
		return bw_err(err, err_cap, -EINVAL, "'steps' has %u values but 'starts' has %u", ns, n);
	if ((rc = rt_k_axes(axes, na, rank, "'axes'", err, err_cap)) < 0)
		return rc;
	for (int d = 0; d < rank; d++) {
		p->start[d] = 0;
		p->step[d] = 1;
		p->count[d] = in->dims[d];
	}
	for (unsigned int i = 0; i < n; i++) {
		int64_t d = axes[i], dim = in->dims[d], s = starts[i], e = ends[i], st = steps[i];

		if (st == 0)
			return bw_err(err, err_cap, -EINVAL, "'steps' must not be 0");
		p->step[d] = st;
		if (dim < 0) {
			p->count[d] = RT_DIM_SYMBOLIC;
			continue;
		}
		if (s < 0)
			s += dim;
		if (e < 0)
			e += dim;
		if (st > 0) {
			s = s < 0 ? 0 : s > dim ? dim : s;
			e = e < 0 ? 0 : e > dim ? dim : e;
			p->count[d] = e > s ? (e - s - 1) / st + 1 : 0;
		} else {
			s = s < 0 ? 0 : s > dim - 1 ? dim - 1 : s;
			e = e < -1 ? -1 : e > dim - 1 ? dim - 1 : e;
			/* -st would overflow for INT64_MIN; that step takes one element */
			p->count[d] = s > e ? (st == INT64_MIN ? 1 : (s - e - 1) / (-st) + 1) : 0;
		}
		p->start[d] = s;
	}
	return 0;
}

RT_K_INFER(slice)
{
	struct slice_plan p;
	int rc;

	if ((rc = rt_k_need_input(node, inputs, 0, "data", RT_K_DTYPE_ALL, err, err_cap)) < 0 ||
	    (rc = slice_plan(node, inputs, &p, err, err_cap)) < 0)
		return rc;
	copy_shape(&outputs[0], &inputs[0]);
	memcpy(outputs[0].dims, p.count, inputs[0].rank * sizeof(int64_t));
	return 0;
}

RT_K_RUN(slice)
{
	struct slice_plan p;
	int64_t in_strides[RT_MAX_RANK], strides[RT_MAX_RANK], off = 0;
	size_t esize = rt_dtype_size(inputs[0].dtype);
	int rc = slice_plan(node, inputs, &p, err, err_cap);

	if (rc < 0)
		return rc;
	rt_k_strides(&inputs[0], in_strides);
	for (int d = 0; d < inputs[0].rank; d++) {
		off += p.start[d] * in_strides[d];
		strides[d] = p.step[d] * in_strides[d];
	}
	rt_k_copy_strided(outputs[0].data, (const char *)inputs[0].data + off * (int64_t)esize, inputs[0].rank,
			  p.count, strides, esize);
	return 0;
}

/* ---- Gather -------------------------------------------------------------------------------------- */

RT_K_INFER(gather)
{
	const struct rt_tensor *data = &inputs[0], *idx = &inputs[1];
	struct rt_tensor *out = &outputs[0];
	int64_t axis;
	int rc, r = 0;

	if ((rc = rt_k_need_input(node, inputs, 0, "data", RT_K_DTYPE_ALL, err, err_cap)) < 0 ||
	    (rc = rt_k_need_input(node, inputs, 1, "indices", RT_K_DTYPE_INDEX, err, err_cap)) < 0 ||
	    (rc = rt_k_attr_int(node, "axis", 0, &axis, err, err_cap)) < 0 ||
	    (rc = rt_k_axis(axis, data->rank, "attribute 'axis'", &axis, err, err_cap)) < 0)
		return rc;
	if (data->rank - 1 + idx->rank > RT_MAX_RANK)
		return bw_err(err, err_cap, -EINVAL, "Gather output rank %d exceeds %d", data->rank - 1 + idx->rank,
			      RT_MAX_RANK);
	for (int d = 0; d < axis; d++)
		out->dims[r++] = data->dims[d];
	for (int d = 0; d < idx->rank; d++)
		out->dims[r++] = idx->dims[d];
	for (int d = (int)axis + 1; d < data->rank; d++)
		out->dims[r++] = data->dims[d];
	out->rank = (uint8_t)r;
	out->dtype = data->dtype;
	/* constant indices are checked now rather than failing every run */
	if (idx->data != NULL && data->dims[axis] >= 0) {
		int64_t n = rt_tensor_elems(idx), dim = data->dims[axis];

		for (int64_t i = 0; i < n; i++) {
			int64_t v = idx->dtype == BW_DTYPE_INT64 ? ((const int64_t *)idx->data)[i]
								 : ((const int32_t *)idx->data)[i];
			if (v < -dim || v >= dim)
				return bw_err(err, err_cap, -EINVAL, "input 'indices' has %" PRId64
					      ", out of range for axis %" PRId64 " of size %" PRId64, v, axis, dim);
		}
	}
	return 0;
}

RT_K_RUN(gather)
{
	const struct rt_tensor *data = &inputs[0], *idx = &inputs[1];
	int64_t axis = rt_attr_int(node, "axis", 0), outer, inner, dim, n = rt_tensor_elems(idx);
	char *dst = outputs[0].data;

	if (axis < 0)
		axis += data->rank;
	dim = data->dims[axis];
	outer = rt_k_dims_prod(data, 0, (int)axis);
	inner = rt_k_dims_prod(data, (int)axis + 1, data->rank) * (int64_t)rt_dtype_size(data->dtype);
	for (int64_t i = 0; i < n; i++) { /* check first, so a bad index writes nothing */
		int64_t v = idx->dtype == BW_DTYPE_INT64 ? ((const int64_t *)idx->data)[i]
							 : ((const int32_t *)idx->data)[i];
		if (v < -dim || v >= dim)
			return bw_err(err, err_cap, -EINVAL,
				      "input 'indices' has %" PRId64 ", out of range for axis %" PRId64
				      " of size %" PRId64, v, axis, dim);
	}
	for (int64_t o = 0; o < outer; o++) {
		const char *src = (const char *)data->data + o * dim * inner;

		for (int64_t i = 0; i < n; i++) {
			int64_t v = idx->dtype == BW_DTYPE_INT64 ? ((const int64_t *)idx->data)[i]
								 : ((const int32_t *)idx->data)[i];
			if (v < 0)
				v += dim;
			memcpy(dst, src + v * inner, (size_t)inner);
			dst += inner;
		}
	}
	return 0;
}

/* ---- Expand -------------------------------------------------------------------------------------- */

static int expand_shape(const struct rt_node *node, const struct rt_tensor *inputs, struct rt_tensor *out,
			char *err, size_t err_cap)
{
	struct rt_tensor shape = {.dtype = BW_DTYPE_INT64};
	const struct rt_tensor *ins[2] = {&inputs[0], &shape};
	static const char *const names[] = {"input", "shape"};
	unsigned int n;
	int rc;

	if ((rc = rt_k_need_input(node, inputs, 0, "input", RT_K_DTYPE_ALL, err, err_cap)) < 0 ||
	    (rc = rt_k_need_input(node, inputs, 1, "shape", RT_DTYPE_BIT(BW_DTYPE_INT64), err, err_cap)) < 0 ||
	    (rc = rt_k_read_ints(&inputs[1], "shape", shape.dims, RT_MAX_RANK, &n, err, err_cap)) < 0)
		return rc;
	shape.rank = (uint8_t)n;
	for (unsigned int i = 0; i < n; i++) {
		if (shape.dims[i] < 0)
			return bw_err(err, err_cap, -EINVAL, "input 'shape' has negative dim %" PRId64, shape.dims[i]);
	}
	rc = rt_k_broadcast_shape(ins, names, 2, out, err, err_cap);
	out->dtype = inputs[0].dtype;
	return rc;
}

RT_K_INFER(expand)
{
	return expand_shape(node, inputs, &outputs[0], err, err_cap);
}

RT_K_RUN(expand)
{
	const struct rt_tensor *in = &inputs[0];
	const struct rt_tensor *out = &outputs[0];
	int64_t in_strides[RT_MAX_RANK], strides[RT_MAX_RANK];

	rt_k_strides(in, in_strides);
	for (int d = 0; d < out->rank; d++) {
		int kd = d - (out->rank - in->rank);

		strides[d] = kd < 0 || in->dims[kd] == 1 ? 0 : in_strides[kd];
	}
	rt_k_copy_strided(out->data, in->data, out->rank, out->dims, strides, rt_dtype_size(in->dtype));
	return 0;
}

/* ---- Tile ---------------------------------------------------------------------------------------- */

RT_K_INFER(tile)
{
	int64_t reps[RT_MAX_RANK];
	unsigned int n;
	int rc;

	if ((rc = rt_k_need_input(node, inputs, 0, "input", RT_K_DTYPE_ALL, err, err_cap)) < 0 ||
	    (rc = rt_k_need_input(node, inputs, 1, "repeats", RT_DTYPE_BIT(BW_DTYPE_INT64), err, err_cap)) < 0 ||
	    (rc = rt_k_read_ints(&inputs[1], "repeats", reps, RT_MAX_RANK, &n, err, err_cap)) < 0)
		return rc;
	if (n != inputs[0].rank)
		return bw_err(err, err_cap, -EINVAL, "input 'repeats' has %u values for rank %u", n,
			      inputs[0].rank);
	copy_shape(&outputs[0], &inputs[0]);
	for (unsigned int d = 0; d < n; d++) {
		if (reps[d] < 0)
			return bw_err(err, err_cap, -EINVAL, "input 'repeats' has negative value %" PRId64, reps[d]);
		if (inputs[0].dims[d] < 0)
			outputs[0].dims[d] = RT_DIM_SYMBOLIC;
		else if (__builtin_mul_overflow(inputs[0].dims[d], reps[d], &outputs[0].dims[d]))
			return bw_err(err, err_cap, -EINVAL, "input 'repeats' %" PRId64 " overflows dim %u", reps[d], d);
	}
	return 0;
}

RT_K_RUN(tile)
{
	const struct rt_tensor *in = &inputs[0], *out = &outputs[0];
	size_t esize = rt_dtype_size(in->dtype);
	int64_t in_strides[RT_MAX_RANK], idx[RT_MAX_RANK] = {0}, rows = 1, row, n = rt_tensor_elems(out);
	int rank = in->rank;
	char *dst = out->data;

	if (n <= 0)
		return 0;
	if (rank == 0) {
		memcpy(dst, in->data, esize);
		return 0;
	}
	rt_k_strides(in, in_strides);
	row = in->dims[rank - 1] * (int64_t)esize;
	for (int d = 0; d < rank - 1; d++)
		rows *= out->dims[d];
	/* each output row is an input row repeated; its outer indices wrap modulo the input dims */
	for (int64_t r = 0; r < rows; r++) {
		int64_t off = 0;

		for (int d = 0; d < rank - 1; d++)
			off += (idx[d] % in->dims[d]) * in_strides[d];
		for (int64_t k = 0; k < out->dims[rank - 1] / in->dims[rank - 1]; k++) {
			memcpy(dst, (const char *)in->data + off * (int64_t)esize, (size_t)row);
			dst += row;
		}
		for (int d = rank - 2; d >= 0; d--) {
			if (++idx[d] < out->dims[d])
				break;
			idx[d] = 0;
		}
	}
	return 0;
}
