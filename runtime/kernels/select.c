/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Kernels that select or scatter elements by data: TopK, GatherND, ScatterElements (and the older
 * Scatter), ScatterND, Compress, NonZero, ReverseSequence. Where the output shape depends on data
 * (TopK's K, Compress's condition, NonZero) that data must be known at load.
 */
#include <inttypes.h>
#include <string.h>

#include "kernels.h"

static int64_t index_at(const struct rt_tensor *t, int64_t i)
{
	return t->dtype == BW_DTYPE_INT64 ? ((const int64_t *)t->data)[i] : ((const int32_t *)t->data)[i];
}

/* ---- TopK ---------------------------------------------------------------------------------------- */

static int topk_plan(const struct rt_node *node, const struct rt_tensor *inputs, int64_t *axis, int64_t *k, char *err,
		     size_t err_cap)
{
	const struct rt_tensor *x = &inputs[0];
	int rc;

	if ((rc = rt_k_attr_int(node, "axis", -1, axis, err, err_cap)) < 0 ||
	    (rc = rt_k_axis(*axis, x->rank, "attribute 'axis'", axis, err, err_cap)) < 0)
		return rc;
	if (node->opset < 10) {
		if ((rc = rt_k_attr_int(node, "k", -1, k, err, err_cap)) < 0)
			return rc;
	} else {
		unsigned int n;

		if ((rc = rt_k_need_input(node, inputs, 1, "K", RT_DTYPE_BIT(BW_DTYPE_INT64), err, err_cap)) < 0 ||
		    (rc = rt_k_read_ints(&inputs[1], "K", k, 1, &n, err, err_cap)) < 0)
			return rc;
		if (n != 1)
			return bw_err(err, err_cap, -EINVAL, "input 'K' must hold one value");
	}
	if (*k < 0 || (x->dims[*axis] >= 0 && *k > x->dims[*axis]))
		return bw_err(err, err_cap, -EINVAL, "'K' %" PRId64 " is out of range for axis %" PRId64 " of size %"
			      PRId64, *k, *axis, x->dims[*axis]);
	return 0;
}

RT_K_INFER(topk)
{
	int64_t axis, k;
	int rc;

	if ((rc = rt_k_need_input(node, inputs, 0, "X", RT_K_DTYPE_NUMERIC, err, err_cap)) < 0 ||
	    (rc = topk_plan(node, inputs, &axis, &k, err, err_cap)) < 0)
		return rc;
	for (unsigned int o = 0; o < 2 && o < node->num_outputs; o++) {
		outputs[o].dtype = o == 0 ? inputs[0].dtype : BW_DTYPE_INT64;
		outputs[o].rank = inputs[0].rank;
		memcpy(outputs[o].dims, inputs[0].dims, sizeof(outputs[o].dims));
		outputs[o].dims[axis] = k;
	}
	return 0;
}

RT_K_SCRATCH(topk)
{
	int64_t axis = rt_attr_int(node, "axis", -1);

	if (axis < 0)
		axis += inputs[0].rank;
	return axis >= 0 && axis < inputs[0].rank ? (size_t)inputs[0].dims[axis] * sizeof(int64_t) : 0;
}

/* a goes before b: the larger (or smaller) value, on a tie the lower index */
struct lane {
	const void *data;
	uint8_t dtype;
	int64_t base, stride;
	bool largest;
};

static bool before(const struct lane *l, int64_t a, int64_t b)
{
	double va = rt_k_load_f64(l->data, l->dtype, l->base + a * l->stride);
	double vb = rt_k_load_f64(l->data, l->dtype, l->base + b * l->stride);

	if (va != vb)
		return l->largest ? va > vb : va < vb;
	return a < b;
}

/* heapsort: no allocation, O(n log n); the heap keeps the element that goes last on top */
static void sift(const struct lane *l, int64_t *h, int64_t i, int64_t n)
{
	for (;;) {
		int64_t c = 2 * i + 1, t;

		if (c >= n)
			return;
		if (c + 1 < n && before(l, h[c], h[c + 1]))
			c++;
		if (!before(l, h[i], h[c]))
			return;
		t = h[i];
		h[i] = h[c];
		h[c] = t;
		i = c;
	}
}

static void lane_sort(const struct lane *l, int64_t *h, int64_t n)
{
	for (int64_t i = 0; i < n; i++)
		h[i] = i;
	for (int64_t i = n / 2 - 1; i >= 0; i--)
		sift(l, h, i, n);
	for (int64_t end = n - 1; end > 0; end--) {
		int64_t t = h[0];

		h[0] = h[end];
		h[end] = t;
		sift(l, h, 0, end);
	}
}

RT_K_RUN(topk)
{
	const struct rt_tensor *x = &inputs[0];
	size_t esize = rt_dtype_size(x->dtype);
	int64_t axis, k, outer, n, inner, *order = scratch;
	int64_t *indices = rt_k_has_output(node, 1) ? outputs[1].data : NULL;
	struct lane l = {.data = x->data, .dtype = x->dtype, .largest = rt_attr_int(node, "largest", 1) != 0};
	int rc = topk_plan(node, inputs, &axis, &k, err, err_cap);

	if (rc < 0)
		return rc;
	outer = rt_k_dims_prod(x, 0, (int)axis);
	n = x->dims[axis];
	inner = rt_k_dims_prod(x, (int)axis + 1, x->rank);
	if (k == 0 || n == 0)
		return 0;
	if (order == NULL)
		return bw_err(err, err_cap, -EINVAL, "TopK needs scratch memory and got none");
	l.stride = inner;
	for (int64_t o = 0; o < outer; o++) {
		for (int64_t i = 0; i < inner; i++) {
			l.base = o * n * inner + i;
			lane_sort(&l, order, n);
			for (int64_t j = 0; j < k; j++) {
				int64_t dst = (o * k + j) * inner + i;

				memcpy((char *)outputs[0].data + dst * (int64_t)esize,
				       (const char *)x->data + (l.base + order[j] * inner) * (int64_t)esize, esize);
				if (indices != NULL)
					indices[dst] = order[j];
			}
		}
	}
	return 0;
}

/* ---- GatherND ------------------------------------------------------------------------------------ */

struct gnd_plan {
	int64_t b, k, batches, tuples, slice;
};

static int gnd_plan(const struct rt_node *node, const struct rt_tensor *data, const struct rt_tensor *idx,
		    struct gnd_plan *p, char *err, size_t err_cap)
{
	int rc = rt_k_attr_int(node, "batch_dims", 0, &p->b, err, err_cap);

	if (rc < 0)
		return rc;
	if (idx->rank < 1 || p->b < 0 || p->b >= idx->rank || p->b >= data->rank)
		return bw_err(err, err_cap, -EINVAL, "attribute 'batch_dims' %" PRId64 " does not fit ranks %u and %u",
			      p->b, data->rank, idx->rank);
	p->k = idx->dims[idx->rank - 1];
	if (p->k < 1 || p->k > data->rank - p->b)
		return bw_err(err, err_cap, -EINVAL, "input 'indices' last dim %" PRId64 " exceeds the rank of 'data'",
			      p->k);
	for (int d = 0; d < p->b; d++) {
		if (idx->dims[d] != data->dims[d])
			return bw_err(err, err_cap, -EINVAL, "batch dim %d of 'indices' and 'data' differ", d);
	}
	p->batches = rt_k_dims_prod(data, 0, (int)p->b);
	p->tuples = rt_k_dims_prod(idx, (int)p->b, idx->rank - 1);
	p->slice = rt_k_dims_prod(data, (int)(p->b + p->k), data->rank);
	return 0;
}

RT_K_INFER(gather_nd)
{
	const struct rt_tensor *data = &inputs[0], *idx = &inputs[1];
	struct gnd_plan p;
	int rc, r = 0;

	if ((rc = rt_k_need_input(node, inputs, 0, "data", RT_K_DTYPE_ALL, err, err_cap)) < 0 ||
	    (rc = rt_k_need_input(node, inputs, 1, "indices", RT_DTYPE_BIT(BW_DTYPE_INT64), err, err_cap)) < 0 ||
	    (rc = gnd_plan(node, data, idx, &p, err, err_cap)) < 0)
		return rc;
	if (idx->rank - 1 + data->rank - p.b - p.k > RT_MAX_RANK)
		return bw_err(err, err_cap, -EINVAL, "GatherND output rank exceeds %d", RT_MAX_RANK);
	for (int d = 0; d < idx->rank - 1; d++)
		outputs[0].dims[r++] = idx->dims[d];
	for (int d = (int)(p.b + p.k); d < data->rank; d++)
		outputs[0].dims[r++] = data->dims[d];
	outputs[0].rank = (uint8_t)r;
	outputs[0].dtype = data->dtype;
	return 0;
}

/* The element offset in data of index tuple t of batch bt, or -1 if an index is out of range. */
static int64_t nd_offset(const struct rt_tensor *data, const struct rt_tensor *idx, int64_t b, int64_t k,
			 const int64_t *strides, int64_t bt, int64_t batch_stride, int64_t tuple)
{
	int64_t off = bt * batch_stride;

	for (int64_t j = 0; j < k; j++) {
		int64_t dim = data->dims[b + j], v = ((const int64_t *)idx->data)[tuple * k + j];

		if (v < -dim || v >= dim)
			return -1;
		off += (v < 0 ? v + dim : v) * strides[b + j];
	}
	return off;
}

RT_K_RUN(gather_nd)
{
	const struct rt_tensor *data = &inputs[0], *idx = &inputs[1];
	int64_t strides[RT_MAX_RANK], esize = (int64_t)rt_dtype_size(data->dtype);
	char *dst = outputs[0].data;
	struct gnd_plan p;
	int rc = gnd_plan(node, data, idx, &p, err, err_cap);

	if (rc < 0)
		return rc;
	rt_k_strides(data, strides);
	for (int64_t bt = 0; bt < p.batches; bt++) {
		for (int64_t t = 0; t < p.tuples; t++) {
			int64_t off = nd_offset(data, idx, p.b, p.k, strides, bt, p.b > 0 ? strides[p.b - 1] : 0,
						bt * p.tuples + t);

			if (off < 0)
				return bw_err(err, err_cap, -EINVAL, "input 'indices' has an index out of range");
			memcpy(dst, (const char *)data->data + off * esize, (size_t)(p.slice * esize));
			dst += p.slice * esize;
		}
	}
	return 0;
}

/* ---- ScatterElements Scatter ScatterND ----------------------------------------------------------- */

enum scatter_red { RED_NONE, RED_ADD, RED_MUL };

static int scatter_red(const struct rt_node *node, enum scatter_red *red, char *err, size_t err_cap)
{
	const char *r = node->opset >= 16 ? rt_attr_string(node, "reduction", "none") : "none";

	if (strcmp(r, "none") == 0)
		*red = RED_NONE;
	else if (strcmp(r, "add") == 0)
		*red = RED_ADD;
	else if (strcmp(r, "mul") == 0)
		*red = RED_MUL;
	else
		return bw_err(err, err_cap, -EINVAL, "attribute 'reduction' has unknown value '%s'", r);
	return 0;
}

/* dst[i] (op)= src[j] for any element type */
static void scatter_one(void *dst, int64_t i, const void *src, int64_t j, uint8_t dtype, enum scatter_red red)
{
	size_t esize = rt_dtype_size(dtype);

	if (red == RED_NONE) {
		memcpy((char *)dst + i * (int64_t)esize, (const char *)src + j * (int64_t)esize, esize);
		return;
	}
#define SCATTER_RED(T)                                                                                       \
	do {                                                                                                 \
		T *d = (T *)dst + i;                                                                         \
		const T s = ((const T *)src)[j];                                                             \
		*d = red == RED_ADD ? (T)(*d + s) : (T)(*d * s);                                             \
	} while (0)
	switch (dtype) {
	case BW_DTYPE_FLOAT: SCATTER_RED(float); break;
	case BW_DTYPE_DOUBLE: SCATTER_RED(double); break;
	case BW_DTYPE_INT32: SCATTER_RED(int32_t); break;
	case BW_DTYPE_INT64: SCATTER_RED(int64_t); break;
	default: break; /* refused at load */
	}
#undef SCATTER_RED
}

static int scatter_types(const struct rt_node *node, const struct rt_tensor *inputs, enum scatter_red *red,
			 char *err, size_t err_cap)
{
	int rc;

	if ((rc = rt_k_need_input(node, inputs, 0, "data", RT_K_DTYPE_ALL, err, err_cap)) < 0 ||
	    (rc = rt_k_need_input(node, inputs, 1, "indices", RT_K_DTYPE_INDEX, err, err_cap)) < 0 ||
	    (rc = rt_k_need_input(node, inputs, 2, "updates", RT_DTYPE_BIT(inputs[0].dtype), err, err_cap)) < 0 ||
	    (rc = scatter_red(node, red, err, err_cap)) < 0)
		return rc;
	if (*red != RED_NONE && (RT_DTYPE_BIT(inputs[0].dtype) & (RT_K_DTYPE_FLOATS | RT_K_DTYPE_INDEX)) == 0)
		return bw_err(err, err_cap, -ENOTSUP, "attribute 'reduction' on %s is not supported",
			      rt_dtype_name(inputs[0].dtype));
	return 0;
}

RT_K_INFER(scatter_elements)
{
	const struct rt_tensor *data = &inputs[0], *idx = &inputs[1], *upd = &inputs[2];
	enum scatter_red red = RED_NONE; /* set by scatter_red; initialised for gcc -O2's flow analysis */
	int64_t axis;
	char a[96], b[96];
	int rc;

	if ((rc = scatter_types(node, inputs, &red, err, err_cap)) < 0 ||
	    (rc = rt_k_attr_int(node, "axis", 0, &axis, err, err_cap)) < 0 ||
	    (rc = rt_k_axis(axis, data->rank, "attribute 'axis'", &axis, err, err_cap)) < 0)
		return rc;
	if (idx->rank != data->rank || upd->rank != idx->rank ||
	    memcmp(idx->dims, upd->dims, idx->rank * sizeof(int64_t)) != 0)
		return bw_err(err, err_cap, -EINVAL, "inputs 'indices' %s and 'updates' %s must have one shape of the "
			      "rank of 'data'", rt_k_dims_str(idx, a, sizeof(a)), rt_k_dims_str(upd, b, sizeof(b)));
	outputs[0] = (struct rt_tensor){.dtype = data->dtype, .rank = data->rank, .data = outputs[0].data};
	memcpy(outputs[0].dims, data->dims, sizeof(outputs[0].dims));
	return 0;
}

RT_K_RUN(scatter_elements)
{
	const struct rt_tensor *data = &inputs[0], *idx = &inputs[1], *upd = &inputs[2];
	int64_t axis = rt_attr_int(node, "axis", 0), strides[RT_MAX_RANK], pos[RT_MAX_RANK] = {0};
	int64_t n = rt_tensor_elems(idx), dim;
	enum scatter_red red = RED_NONE; /* set by scatter_red; initialised for gcc -O2's flow analysis */
	int rc = scatter_red(node, &red, err, err_cap);

	if (rc < 0)
		return rc;
	if (axis < 0)
		axis += data->rank;
	dim = data->dims[axis];
	rt_k_strides(data, strides);
	for (int64_t i = 0; i < n; i++) { /* check first, so a bad index writes nothing */
		int64_t v = index_at(idx, i);

		if (v < -dim || v >= dim)
			return bw_err(err, err_cap, -EINVAL, "input 'indices' has %" PRId64 ", out of range", v);
	}
	if (outputs[0].data != data->data)
		memcpy(outputs[0].data, data->data, (size_t)rt_tensor_elems(data) * rt_dtype_size(data->dtype));
	for (int64_t i = 0; i < n; i++) {
		int64_t v = index_at(idx, i), off = 0;

		for (int d = 0; d < data->rank; d++)
			off += (d == axis ? (v < 0 ? v + dim : v) : pos[d]) * strides[d];
		scatter_one(outputs[0].data, off, upd->data, i, data->dtype, red);
		for (int d = idx->rank - 1; d >= 0; d--) {
			if (++pos[d] < idx->dims[d])
				break;
			pos[d] = 0;
		}
	}
	return 0;
}

RT_K_INFER(scatter_nd)
{
	const struct rt_tensor *data = &inputs[0], *idx = &inputs[1], *upd = &inputs[2];
	enum scatter_red red = RED_NONE; /* set by scatter_red; initialised for gcc -O2's flow analysis */
	int64_t k;
	int rc;
	bool ok;

	if ((rc = scatter_types(node, inputs, &red, err, err_cap)) < 0)
		return rc;
	if (idx->dtype != BW_DTYPE_INT64 || idx->rank < 1)
		return bw_err(err, err_cap, -EINVAL, "input 'indices' must be int64 of rank >= 1");
	k = idx->dims[idx->rank - 1];
	if (k < 1 || k > data->rank)
		return bw_err(err, err_cap, -EINVAL, "input 'indices' last dim %" PRId64 " exceeds the rank of 'data'", k);
	/* updates: indices.shape[:-1] + data.shape[k:] */
	ok = upd->rank == idx->rank - 1 + data->rank - k;
	for (int d = 0; ok && d < idx->rank - 1; d++)
		ok = upd->dims[d] == idx->dims[d];
	for (int d = (int)k; ok && d < data->rank; d++)
		ok = upd->dims[idx->rank - 1 + d - k] == data->dims[d];
	if (!ok)
		return bw_err(err, err_cap, -EINVAL, "input 'updates' must have the shape indices[:-1] + data[k:]");
	outputs[0] = (struct rt_tensor){.dtype = data->dtype, .rank = data->rank, .data = outputs[0].data};
	memcpy(outputs[0].dims, data->dims, sizeof(outputs[0].dims));
	return 0;
}

RT_K_RUN(scatter_nd)
{
	const struct rt_tensor *data = &inputs[0], *idx = &inputs[1], *upd = &inputs[2];
	int64_t strides[RT_MAX_RANK], k = idx->dims[idx->rank - 1];
	int64_t tuples = rt_k_dims_prod(idx, 0, idx->rank - 1), slice = rt_k_dims_prod(data, (int)k, data->rank);
	enum scatter_red red = RED_NONE; /* set by scatter_red; initialised for gcc -O2's flow analysis */
	int rc = scatter_red(node, &red, err, err_cap);

	if (rc < 0)
		return rc;
	rt_k_strides(data, strides);
	for (int64_t t = 0; t < tuples; t++) {
		if (nd_offset(data, idx, 0, k, strides, 0, 0, t) < 0)
			return bw_err(err, err_cap, -EINVAL, "input 'indices' has an index out of range");
	}
	if (outputs[0].data != data->data)
		memcpy(outputs[0].data, data->data, (size_t)rt_tensor_elems(data) * rt_dtype_size(data->dtype));
	for (int64_t t = 0; t < tuples; t++) {
		int64_t off = nd_offset(data, idx, 0, k, strides, 0, 0, t);

		for (int64_t j = 0; j < slice; j++)
			scatter_one(outputs[0].data, off + j, upd->data, t * slice + j, data->dtype, red);
	}
	return 0;
}

/* ---- Compress NonZero ---------------------------------------------------------------------------- */

/* Compress keeps the slices along axis (or of the flattened input) whose condition is true. */
static int compress_plan(const struct rt_node *node, const struct rt_tensor *inputs, bool *flat, int64_t *axis,
			 int64_t *kept, char *err, size_t err_cap)
{
	const struct rt_tensor *x = &inputs[0], *cond = &inputs[1];
	int64_t dim, n;
	int rc;

	*flat = rt_node_attr(node, "axis") == NULL;
	*axis = 0;
	if (!*flat && ((rc = rt_k_attr_int(node, "axis", 0, axis, err, err_cap)) < 0 ||
		       (rc = rt_k_axis(*axis, x->rank, "attribute 'axis'", axis, err, err_cap)) < 0))
		return rc;
	if (cond->rank != 1)
		return bw_err(err, err_cap, -EINVAL, "input 'condition' must be 1-D");
	if (cond->data == NULL)
		return bw_err(err, err_cap, -ENOTSUP, "input 'condition' must be a constant");
	dim = *flat ? rt_tensor_elems(x) : x->dims[*axis];
	n = cond->dims[0] < dim ? cond->dims[0] : dim;
	*kept = 0;
	for (int64_t i = 0; i < n; i++)
		*kept += ((const uint8_t *)cond->data)[i] != 0;
	return 0;
}

RT_K_INFER(compress)
{
	int64_t axis, kept;
	bool flat;
	int rc;

	if ((rc = rt_k_need_input(node, inputs, 0, "input", RT_K_DTYPE_ALL, err, err_cap)) < 0 ||
	    (rc = rt_k_need_input(node, inputs, 1, "condition", RT_DTYPE_BIT(BW_DTYPE_BOOL), err, err_cap)) < 0 ||
	    (rc = compress_plan(node, inputs, &flat, &axis, &kept, err, err_cap)) < 0)
		return rc;
	outputs[0].dtype = inputs[0].dtype;
	if (flat) {
		outputs[0].rank = 1;
		outputs[0].dims[0] = kept;
	} else {
		outputs[0].rank = inputs[0].rank;
		memcpy(outputs[0].dims, inputs[0].dims, sizeof(outputs[0].dims));
		outputs[0].dims[axis] = kept;
	}
	return 0;
}

RT_K_RUN(compress)
{
	const struct rt_tensor *x = &inputs[0];
	const uint8_t *cond = inputs[1].data;
	int64_t axis, kept, outer, dim, inner, esize = (int64_t)rt_dtype_size(x->dtype);
	char *dst = outputs[0].data;
	bool flat;
	int rc = compress_plan(node, inputs, &flat, &axis, &kept, err, err_cap);

	if (rc < 0)
		return rc;
	outer = flat ? 1 : rt_k_dims_prod(x, 0, (int)axis);
	dim = flat ? rt_tensor_elems(x) : x->dims[axis];
	inner = (flat ? 1 : rt_k_dims_prod(x, (int)axis + 1, x->rank)) * esize;
	for (int64_t o = 0; o < outer; o++) {
		for (int64_t i = 0; i < dim && i < inputs[1].dims[0]; i++) {
			if (!cond[i])
				continue;
			memcpy(dst, (const char *)x->data + (o * dim + i) * inner, (size_t)inner);
			dst += inner;
		}
	}
	return 0;
}

static bool nonzero_at(const struct rt_tensor *x, int64_t i)
{
	return rt_k_load_f64(x->data, x->dtype, i) != 0;
}

RT_K_INFER(nonzero)
{
	int64_t n = rt_tensor_elems(&inputs[0]), count = 0;
	int rc = rt_k_need_input(node, inputs, 0, "X", RT_K_DTYPE_NUMERIC | RT_DTYPE_BIT(BW_DTYPE_BOOL), err, err_cap);

	if (rc < 0)
		return rc;
	if (inputs[0].data == NULL)
		return bw_err(err, err_cap, -ENOTSUP, "input 'X' must be a constant (NonZero's shape is its data's)");
	for (int64_t i = 0; i < n; i++)
		count += nonzero_at(&inputs[0], i);
	outputs[0].dtype = BW_DTYPE_INT64;
	outputs[0].rank = 2;
	outputs[0].dims[0] = inputs[0].rank;
	outputs[0].dims[1] = count;
	return 0;
}

RT_K_RUN(nonzero)
{
	const struct rt_tensor *x = &inputs[0];
	int64_t n = rt_tensor_elems(x), count = outputs[0].dims[1], k = 0, pos[RT_MAX_RANK] = {0};
	int64_t *y = outputs[0].data;

	for (int64_t i = 0; i < n; i++) {
		if (nonzero_at(x, i)) {
			if (k == count)
				return bw_err(err, err_cap, -EINVAL, "input 'X' has more non-zeros than at load");
			for (int d = 0; d < x->rank; d++)
				y[d * count + k] = pos[d];
			k++;
		}
		for (int d = x->rank - 1; d >= 0; d--) {
			if (++pos[d] < x->dims[d])
				break;
			pos[d] = 0;
		}
	}
	return k == count ? 0 : bw_err(err, err_cap, -EINVAL, "input 'X' has fewer non-zeros than at load");
}

/* ---- ReverseSequence ----------------------------------------------------------------------------- */

RT_K_INFER(reverse_sequence)
{
	const struct rt_tensor *x = &inputs[0];
	int64_t batch, time;
	int rc;

	if ((rc = rt_k_need_input(node, inputs, 0, "input", RT_K_DTYPE_ALL, err, err_cap)) < 0 ||
	    (rc = rt_k_need_input(node, inputs, 1, "sequence_lens", RT_DTYPE_BIT(BW_DTYPE_INT64), err, err_cap)) < 0 ||
	    (rc = rt_k_attr_int(node, "batch_axis", 1, &batch, err, err_cap)) < 0 ||
	    (rc = rt_k_attr_int(node, "time_axis", 0, &time, err, err_cap)) < 0)
		return rc;
	if (x->rank < 2 || (batch != 0 && batch != 1) || (time != 0 && time != 1) || batch == time)
		return bw_err(err, err_cap, -EINVAL, "attributes 'batch_axis' and 'time_axis' must be 0 and 1");
	if (inputs[1].rank != 1 || (inputs[1].dims[0] != x->dims[batch] && x->dims[batch] >= 0))
		return bw_err(err, err_cap, -EINVAL, "input 'sequence_lens' must hold one length per batch");
	outputs[0].dtype = x->dtype;
	outputs[0].rank = x->rank;
	memcpy(outputs[0].dims, x->dims, sizeof(outputs[0].dims));
	return 0;
}

RT_K_RUN(reverse_sequence)
{
	const struct rt_tensor *x = &inputs[0];
	int64_t batch = rt_attr_int(node, "batch_axis", 1), time = rt_attr_int(node, "time_axis", 0);
	int64_t strides[RT_MAX_RANK], inner = rt_k_dims_prod(x, 2, x->rank), esize = (int64_t)rt_dtype_size(x->dtype);
	const int64_t *lens = inputs[1].data;

	rt_k_strides(x, strides);
	for (int64_t b = 0; b < x->dims[batch]; b++) {
		int64_t len = lens[b];

		if (len < 0 || len > x->dims[time])
			return bw_err(err, err_cap, -EINVAL, "input 'sequence_lens' has %" PRId64 ", out of range", len);
		for (int64_t t = 0; t < x->dims[time]; t++) {
			int64_t src = t < len ? len - 1 - t : t;
			int64_t off_d = b * strides[batch] + t * strides[time], off_s = b * strides[batch] + src * strides[time];

			memcpy((char *)outputs[0].data + off_d * esize, (const char *)x->data + off_s * esize,
			       (size_t)(inner * esize));
		}
	}
	return 0;
}
