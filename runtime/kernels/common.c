/* SPDX-License-Identifier: BSD-3-Clause */
/* Helpers shared by the CPU kernels: dims in messages, attributes, axes, shapes, broadcasting, strided copies. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "kernels.h"

const char *rt_k_dims_str(const struct rt_tensor *t, char *buf, size_t cap)
{
	size_t len = 0;

	len += (size_t)snprintf(buf, cap, "[");
	for (uint8_t d = 0; d < t->rank && len < cap; d++) {
		if (t->dims[d] < 0)
			len += (size_t)snprintf(buf + len, cap - len, "%s?", d ? "," : "");
		else
			len += (size_t)snprintf(buf + len, cap - len, "%s%" PRId64, d ? "," : "", t->dims[d]);
	}
	if (len < cap)
		snprintf(buf + len, cap - len, "]");
	return buf;
}

bool rt_k_has_input(const struct rt_node *node, const struct rt_tensor *inputs, unsigned int i)
{
	if (i >= node->num_inputs)
		return false;
	if (node->inputs != NULL && node->inputs[i] == RT_VALUE_NONE)
		return false;
	return inputs[i].dtype != 0;
}

bool rt_k_has_output(const struct rt_node *node, unsigned int i)
{
	if (i >= node->num_outputs)
		return false;
	return node->outputs == NULL || node->outputs[i] != RT_VALUE_NONE;
}

int rt_k_need_input(const struct rt_node *node, const struct rt_tensor *inputs, unsigned int i,
		    const char *name, uint32_t mask, char *err, size_t err_cap)
{
	if (!rt_k_has_input(node, inputs, i))
		return bw_err(err, err_cap, -EINVAL, "input '%s' is missing", name);
	if (inputs[i].dtype >= 32 || (RT_DTYPE_BIT(inputs[i].dtype) & mask) == 0)
		return bw_err(err, err_cap, -ENOTSUP, "input '%s' has unsupported type %s", name,
			      rt_dtype_name(inputs[i].dtype));
	if (inputs[i].rank > RT_MAX_RANK)
		return bw_err(err, err_cap, -EINVAL, "input '%s' has rank %u > %d", name, inputs[i].rank,
			      RT_MAX_RANK);
	return 0;
}

int rt_k_attr_int(const struct rt_node *node, const char *name, int64_t dflt, int64_t *out, char *err,
		  size_t err_cap)
{
	const struct rt_attr *a = rt_node_attr(node, name);

	*out = dflt;
	if (a == NULL)
		return 0;
	if (a->type != RT_ATTR_INT)
		return bw_err(err, err_cap, -EINVAL, "attribute '%s' must be an int", name);
	*out = a->i;
	return 0;
}

int rt_k_attr_float(const struct rt_node *node, const char *name, float dflt, float *out, char *err,
		    size_t err_cap)
{
	const struct rt_attr *a = rt_node_attr(node, name);

	*out = dflt;
	if (a == NULL)
		return 0;
	if (a->type != RT_ATTR_FLOAT)
		return bw_err(err, err_cap, -EINVAL, "attribute '%s' must be a float", name);
	*out = a->f;
	return 0;
}

int rt_k_attr_ints(const struct rt_node *node, const char *name, int64_t *out, unsigned int cap,
		   unsigned int *count, char *err, size_t err_cap)
{
	const struct rt_attr *a = rt_node_attr(node, name);

	*count = 0;
	if (a == NULL)
		return 0;
	if (a->type != RT_ATTR_INTS)
		return bw_err(err, err_cap, -EINVAL, "attribute '%s' must be a list of ints", name);
	if (a->count > cap)
		return bw_err(err, err_cap, -EINVAL, "attribute '%s' has %u values, at most %u allowed", name,
			      a->count, cap);
	if (a->count > 0)
		memcpy(out, a->ints, a->count * sizeof(*out));
	*count = a->count;
	return 1;
}

int rt_k_axis(int64_t axis, int rank, const char *what, int64_t *out, char *err, size_t err_cap)
{
	if (axis < -rank || axis >= rank)
		return bw_err(err, err_cap, -EINVAL, "%s %" PRId64 " is out of range for rank %d", what, axis,
			      rank);
	*out = axis < 0 ? axis + rank : axis;
	return 0;
}

int rt_k_read_ints(const struct rt_tensor *t, const char *name, int64_t *out, unsigned int cap,
		   unsigned int *count, char *err, size_t err_cap)
{
	int64_t n = rt_tensor_elems(t);

	if (t->dtype != BW_DTYPE_INT64 && t->dtype != BW_DTYPE_INT32)
		return bw_err(err, err_cap, -EINVAL, "input '%s' must be int64, not %s", name,
			      rt_dtype_name(t->dtype));
	if (t->rank > 1)
		return bw_err(err, err_cap, -EINVAL, "input '%s' must be 1-D, has rank %u", name, t->rank);
	if (n < 0 || t->data == NULL)
		return bw_err(err, err_cap, -ENOTSUP, "input '%s' must be a constant", name);
	if (n > (int64_t)cap)
		return bw_err(err, err_cap, -EINVAL, "input '%s' has %" PRId64 " values, at most %u allowed",
			      name, n, cap);
	for (int64_t i = 0; i < n; i++)
		out[i] = t->dtype == BW_DTYPE_INT64 ? ((const int64_t *)t->data)[i] : ((const int32_t *)t->data)[i];
	*count = (unsigned int)n;
	return 0;
}

int rt_k_ints_attr_or_input(const struct rt_node *node, const struct rt_tensor *inputs, const char *name,
			    unsigned int input_index, int64_t since_opset, int64_t *out, unsigned int cap,
			    unsigned int *count, char *err, size_t err_cap)
{
	int rc;

	*count = 0;
	if (node->opset < since_opset)
		return rt_k_attr_ints(node, name, out, cap, count, err, err_cap);
	if (rt_node_attr(node, name) != NULL)
		return bw_err(err, err_cap, -EINVAL, "attribute '%s' is an input from opset %lld on", name,
			      (long long)since_opset);
	if (!rt_k_has_input(node, inputs, input_index))
		return 0;
	rc = rt_k_read_ints(&inputs[input_index], name, out, cap, count, err, err_cap);
	return rc < 0 ? rc : 1;
}

int rt_k_axes(int64_t *axes, unsigned int count, int rank, const char *what, char *err, size_t err_cap)
{
	for (unsigned int i = 0; i < count; i++) {
		int rc = rt_k_axis(axes[i], rank, what, &axes[i], err, err_cap);

		if (rc < 0)
			return rc;
		for (unsigned int j = 0; j < i; j++) {
			if (axes[j] == axes[i])
				return bw_err(err, err_cap, -EINVAL, "%s repeats axis %" PRId64, what, axes[i]);
		}
	}
	return 0;
}

double rt_k_load_f64(const void *data, uint8_t dtype, int64_t i)
{
	switch (dtype) {
	case BW_DTYPE_FLOAT: return ((const float *)data)[i];
	case BW_DTYPE_DOUBLE: return ((const double *)data)[i];
	case BW_DTYPE_FLOAT16: return bw_half_to_float(((const uint16_t *)data)[i]);
	case BW_DTYPE_BFLOAT16: return bw_bf16_to_float(((const uint16_t *)data)[i]);
	case BW_DTYPE_INT8: return ((const int8_t *)data)[i];
	case BW_DTYPE_INT16: return ((const int16_t *)data)[i];
	case BW_DTYPE_INT32: return ((const int32_t *)data)[i];
	case BW_DTYPE_INT64: return (double)((const int64_t *)data)[i];
	case BW_DTYPE_UINT8:
	case BW_DTYPE_BOOL: return ((const uint8_t *)data)[i];
	case BW_DTYPE_UINT16: return ((const uint16_t *)data)[i];
	case BW_DTYPE_UINT32: return ((const uint32_t *)data)[i];
	case BW_DTYPE_UINT64: return (double)((const uint64_t *)data)[i];
	default: return 0.0;
	}
}

int64_t rt_k_dims_prod(const struct rt_tensor *t, int lo, int hi)
{
	int64_t n = 1;
	bool overflow = false, zero = false;

	for (int d = lo; d < hi; d++) {
		if (t->dims[d] < 0)
			return -1;
		zero |= t->dims[d] == 0;
		overflow |= __builtin_mul_overflow(n, t->dims[d], &n);
	}
	return zero ? 0 : overflow ? -1 : n;
}

void rt_k_strides(const struct rt_tensor *t, int64_t *strides)
{
	int64_t s = 1;

	for (int d = t->rank - 1; d >= 0; d--) {
		strides[d] = s;
		s *= t->dims[d];
	}
}

/* ---- broadcasting ------------------------------------------------------------------------------ */

int rt_k_broadcast_shape(const struct rt_tensor *const *ins, const char *const *names, unsigned int nin,
			 struct rt_tensor *out, char *err, size_t err_cap)
{
	uint8_t rank = 0;

	for (unsigned int k = 0; k < nin; k++)
		rank = ins[k]->rank > rank ? ins[k]->rank : rank;
	out->rank = rank;
	for (int d = 0; d < rank; d++) {
		int64_t dim = 1;

		for (unsigned int k = 0; k < nin; k++) {
			int kd = d - (rank - ins[k]->rank);
			int64_t v;

			if (kd < 0)
				continue;
			v = ins[k]->dims[kd];
			if (v == 1 || v == dim)
				continue;
			if (dim == 1 || (dim < 0 && v >= 0)) {
				dim = v;
				continue;
			}
			if (v < 0)
				continue; /* symbolic against a known dim: the known one */
			char a[64], b[64];
			unsigned int j = 0;
			for (; j < k; j++) { /* the first input that fixed dim, for the message */
				int jd = d - (rank - ins[j]->rank);
				if (jd >= 0 && ins[j]->dims[jd] == dim)
					break;
			}
			return bw_err(err, err_cap, -EINVAL, "inputs '%s' %s and '%s' %s do not broadcast",
				      names[j < k ? j : 0], rt_k_dims_str(ins[j < k ? j : 0], a, sizeof(a)),
				      names[k], rt_k_dims_str(ins[k], b, sizeof(b)));
		}
		out->dims[d] = dim;
	}
	return 0;
}

void rt_k_bcast_init(struct rt_k_bcast *b, const struct rt_tensor *out, const struct rt_tensor *const *ins,
		     unsigned int nin)
{
	int64_t fstrides[RT_K_BCAST_MAX_IN][RT_MAX_RANK];
	int r = out->rank;

	memset(b, 0, sizeof(*b));
	b->nin = nin;
	for (unsigned int k = 0; k < nin; k++) {
		int64_t s = 1;

		for (int d = r - 1; d >= 0; d--) {
			int kd = d - (r - ins[k]->rank);
			int64_t v = kd >= 0 ? ins[k]->dims[kd] : 1;

			fstrides[k][d] = v == 1 ? 0 : s;
			s *= v;
		}
	}
	/* drop dims of 1 and merge neighbours that every input walks contiguously */
	b->rank = 0;
	for (int d = 0; d < r; d++) {
		int m = b->rank - 1;
		bool merge = m >= 0;

		if (out->dims[d] == 1)
			continue;
		for (unsigned int k = 0; merge && k < nin; k++)
			merge = b->strides[k][m] == fstrides[k][d] * out->dims[d];
		if (merge) {
			b->dims[m] *= out->dims[d];
			for (unsigned int k = 0; k < nin; k++)
				b->strides[k][m] = fstrides[k][d];
			continue;
		}
		b->dims[b->rank] = out->dims[d];
		for (unsigned int k = 0; k < nin; k++)
			b->strides[k][b->rank] = fstrides[k][d];
		b->rank++;
	}
	if (b->rank == 0) {
		b->rank = 1;
		b->dims[0] = 1;
	}
	b->inner = b->dims[b->rank - 1];
	b->rows = 1;
	for (int d = 0; d < b->rank - 1; d++)
		b->rows *= b->dims[d];
	if (b->inner == 0)
		b->rows = 0;
	for (unsigned int k = 0; k < nin; k++)
		b->step[k] = b->strides[k][b->rank - 1];
}

void rt_k_bcast_next(struct rt_k_bcast *b)
{
	for (int d = b->rank - 2; d >= 0; d--) {
		b->idx[d]++;
		for (unsigned int k = 0; k < b->nin; k++)
			b->off[k] += b->strides[k][d];
		if (b->idx[d] < b->dims[d])
			return;
		for (unsigned int k = 0; k < b->nin; k++)
			b->off[k] -= b->strides[k][d] * b->dims[d];
		b->idx[d] = 0;
	}
}

#define COPY_ROW(T)                                                                                          \
	do {                                                                                                 \
		T *o = (T *)dst + done;                                                                      \
		const T *s = (const T *)src + off;                                                           \
		if (step == 1) {                                                                             \
			memcpy(o, s, (size_t)inner * sizeof(T));                                             \
		} else {                                                                                     \
			for (int64_t j = 0; j < inner; j++)                                                  \
				o[j] = s[j * step];                                                          \
		}                                                                                            \
	} while (0)

void rt_k_copy_strided(void *dst, const void *src, int rank, const int64_t *dims, const int64_t *src_strides,
		       size_t esize)
{
	int64_t idx[RT_MAX_RANK] = {0}, off = 0, rows = 1, inner, step, done = 0;

	if (rank == 0) {
		memcpy(dst, src, esize);
		return;
	}
	for (int d = 0; d < rank; d++) {
		if (dims[d] == 0)
			return;
	}
	inner = dims[rank - 1];
	step = src_strides[rank - 1];
	for (int d = 0; d < rank - 1; d++)
		rows *= dims[d];
	for (int64_t r = 0; r < rows; r++) {
		switch (esize) {
		case 1: COPY_ROW(uint8_t); break;
		case 2: COPY_ROW(uint16_t); break;
		case 4: COPY_ROW(uint32_t); break;
		default: COPY_ROW(uint64_t); break;
		}
		done += inner;
		for (int d = rank - 2; d >= 0; d--) {
			idx[d]++;
			off += src_strides[d];
			if (idx[d] < dims[d])
				break;
			off -= src_strides[d] * dims[d];
			idx[d] = 0;
		}
	}
}

/* ---- window geometry (Conv, pooling) ---------------------------------------------------------------- */

static int64_t div_floor(int64_t a, int64_t b)
{
	return a >= 0 ? a / b : -((-a + b - 1) / b);
}

static int64_t div_ceil(int64_t a, int64_t b)
{
	return -div_floor(-a, b);
}

int rt_k_window_init(const struct rt_node *node, const struct rt_tensor *x, const int64_t *kernel_from_w,
		     bool pooling, bool allow_dilations, struct rt_k_window *w, char *err, size_t err_cap)
{
	int64_t vals[2 * RT_MAX_RANK], ceil_mode = 0;
	unsigned int n;
	const char *auto_pad = rt_attr_string(node, "auto_pad", "NOTSET");
	int rc, nsp = x->rank - 2;

	memset(w, 0, sizeof(*w));
	if (x->rank < 3)
		return bw_err(err, err_cap, -EINVAL, "input 'X' must have rank >= 3 (N, C, spatial...), has %u",
			      x->rank);
	w->nsp = nsp;
	for (int i = 0; i < nsp; i++) {
		w->in[i] = x->dims[i + 2];
		w->stride[i] = 1;
		w->dilation[i] = 1;
	}
	rc = rt_k_attr_ints(node, "kernel_shape", vals, RT_MAX_RANK, &n, err, err_cap);
	if (rc < 0)
		return rc;
	if (rc == 0 && kernel_from_w == NULL)
		return bw_err(err, err_cap, -EINVAL, "attribute 'kernel_shape' is missing");
	if (rc == 1 && n != (unsigned int)nsp)
		return bw_err(err, err_cap, -EINVAL, "attribute 'kernel_shape' has %u values, expected %d", n,
			      nsp);
	for (int i = 0; i < nsp; i++) {
		w->kernel[i] = rc == 1 ? vals[i] : kernel_from_w[i];
		if (kernel_from_w != NULL && w->kernel[i] != kernel_from_w[i])
			return bw_err(err, err_cap, -EINVAL,
				      "attribute 'kernel_shape' does not match the shape of input 'W'");
		if (w->kernel[i] < 1)
			return bw_err(err, err_cap, -EINVAL, "attribute 'kernel_shape' must be positive");
	}
	rc = rt_k_attr_ints(node, "strides", vals, RT_MAX_RANK, &n, err, err_cap);
	if (rc < 0)
		return rc;
	if (rc == 1 && n != (unsigned int)nsp)
		return bw_err(err, err_cap, -EINVAL, "attribute 'strides' has %u values, expected %d", n, nsp);
	for (int i = 0; rc == 1 && i < nsp; i++) {
		if (vals[i] < 1)
			return bw_err(err, err_cap, -EINVAL, "attribute 'strides' must be positive");
		w->stride[i] = vals[i];
	}
	rc = rt_k_attr_ints(node, "dilations", vals, RT_MAX_RANK, &n, err, err_cap);
	if (rc < 0)
		return rc;
	if (rc == 1 && n != (unsigned int)nsp)
		return bw_err(err, err_cap, -EINVAL, "attribute 'dilations' has %u values, expected %d", n,
			      nsp);
	for (int i = 0; rc == 1 && i < nsp; i++) {
		if (vals[i] < 1)
			return bw_err(err, err_cap, -EINVAL, "attribute 'dilations' must be positive");
		if (vals[i] != 1 && !allow_dilations)
			return bw_err(err, err_cap, -ENOTSUP, "attribute 'dilations' other than 1 is not supported");
		w->dilation[i] = vals[i];
	}
	rc = rt_k_attr_ints(node, "pads", vals, 2 * RT_MAX_RANK, &n, err, err_cap);
	if (rc < 0)
		return rc;
	if (rc == 1 && n != 2 * (unsigned int)nsp)
		return bw_err(err, err_cap, -EINVAL, "attribute 'pads' has %u values, expected %d", n, 2 * nsp);
	for (int i = 0; rc == 1 && i < nsp; i++) {
		if (vals[i] < 0 || vals[i + nsp] < 0)
			return bw_err(err, err_cap, -EINVAL, "attribute 'pads' must not be negative");
		w->pad_begin[i] = vals[i];
		w->pad_end[i] = vals[i + nsp];
	}
	if (pooling) {
		rc = rt_k_attr_int(node, "ceil_mode", 0, &ceil_mode, err, err_cap);
		if (rc < 0)
			return rc;
	}
	for (int i = 0; i < nsp; i++) {
		int64_t eff = (w->kernel[i] - 1) * w->dilation[i] + 1, in = w->in[i], s = w->stride[i];

		if (in < 0) {
			w->out[i] = RT_DIM_SYMBOLIC;
			continue;
		}
		if (strcmp(auto_pad, "NOTSET") == 0) {
			int64_t span = in + w->pad_begin[i] + w->pad_end[i] - eff;

			if (span < 0)
				return bw_err(err, err_cap, -EINVAL,
					      "input 'X' spatial dim %d (%" PRId64 ", padded) is smaller than the "
					      "kernel (%" PRId64 ")", i, in, eff);
			if (ceil_mode) {
				w->out[i] = div_ceil(span, s) + 1;
				/* a last window starting in the end padding is dropped (ONNX, PyTorch) */
				if ((w->out[i] - 1) * s >= in + w->pad_begin[i])
					w->out[i]--;
			} else {
				w->out[i] = span / s + 1;
			}
		} else if (strcmp(auto_pad, "VALID") == 0) {
			w->pad_begin[i] = w->pad_end[i] = 0;
			if (in < eff)
				return bw_err(err, err_cap, -EINVAL,
					      "input 'X' spatial dim %d (%" PRId64 ") is smaller than the kernel "
					      "(%" PRId64 ")", i, in, eff);
			w->out[i] = (in - eff) / s + 1;
		} else if (strcmp(auto_pad, "SAME_UPPER") == 0 || strcmp(auto_pad, "SAME_LOWER") == 0) {
			int64_t total;

			w->out[i] = div_ceil(in, s);
			total = (w->out[i] - 1) * s + eff - in;
			if (total < 0)
				total = 0;
			if (auto_pad[5] == 'U') {
				w->pad_begin[i] = total / 2;
				w->pad_end[i] = total - total / 2;
			} else {
				w->pad_end[i] = total / 2;
				w->pad_begin[i] = total - total / 2;
			}
		} else {
			return bw_err(err, err_cap, -EINVAL, "attribute 'auto_pad' has unknown value '%s'",
				      auto_pad);
		}
	}
	return 0;
}
