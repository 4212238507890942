/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The GPU's kernels in the runtime's registry, and how each node becomes device ops (program.h).
 * Shape inference is the CPU kernel's (the same ONNX rules, one implementation); what a GPU kernel
 * adds is its lowering: the op codes, the broadcast strides, the GEMM's extents. A node the device
 * does not run (an op missing here, an attribute or shape a lowering refuses) fails the compile with
 * the node named, at load, never at run time.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <batchwire/err.h>

#include "fused_ops.h" /* the runtime's window geometry and fused activations: one reading of them */
#include "lower.h"
#include "program_math.h"

#define F32 RT_DTYPE_BIT(BW_DTYPE_FLOAT)
#define ANY_NUMERIC (RT_DTYPE_BIT(1) | RT_DTYPE_BIT(2) | RT_DTYPE_BIT(3) | RT_DTYPE_BIT(4) | RT_DTYPE_BIT(5) | \
		     RT_DTYPE_BIT(6) | RT_DTYPE_BIT(7) | RT_DTYPE_BIT(9) | RT_DTYPE_BIT(10) | RT_DTYPE_BIT(11) | \
		     RT_DTYPE_BIT(12) | RT_DTYPE_BIT(13))

/* A node the GPU does not run: why says what stops it. \return -ENOTSUP. */
#define refuse(why, cap, ...) bw_err((why), (cap), -ENOTSUP, __VA_ARGS__)

/* Elements of a bound tensor (every dimension known once planned). */
static uint64_t elems_of(const struct rt_tensor *t)
{
	return (uint64_t)rt_tensor_elems(t);
}

static uint64_t prod(const struct rt_tensor *t, int from, int to)
{
	uint64_t n = 1;

	for (int d = from; d < to; d++)
		n *= (uint64_t)t->dims[d];
	return n;
}

static struct gpu_op op_new(uint32_t code, const struct gpu_lower_operand *out)
{
	struct gpu_op op;

	memset(&op, 0, sizeof(op));
	op.code = code;
	op.out = out[0].ref;
	op.count = elems_of(&out[0].tensor);
	return op;
}

static int need_float(const struct gpu_lower_operand *o, unsigned int count, char *why, size_t cap)
{
	for (unsigned int i = 0; i < count; i++)
		if (o[i].present && o[i].tensor.dtype != BW_DTYPE_FLOAT)
			return refuse(why, cap, "input %u is %s: the GPU computes float", i, rt_dtype_name(o[i].tensor.dtype));
	return 0;
}

/*
 * Broadcast strides of input `in` against the output shape (numpy rules, right-aligned): the input's
 * own element stride along each output dimension, 0 where the input has 1 there.
 */
static int bcast_strides(struct gpu_op *op, unsigned int k, const struct rt_tensor *in, const struct rt_tensor *out,
			 char *why, size_t cap)
{
	int64_t stride = 1;
	int shift = (int)out->rank - (int)in->rank;

	if (out->rank > GPU_PROG_RANK_MAX)
		return refuse(why, cap, "rank %u: the GPU takes up to %d", out->rank, GPU_PROG_RANK_MAX);
	if (shift < 0)
		return refuse(why, cap, "input %u has a higher rank than the output", k);
	op->u.bcast.rank = out->rank > 0 ? out->rank : 1;
	if (out->rank == 0) {
		op->u.bcast.dims[0] = 1;
		op->u.bcast.strides[k][0] = 0;
		return 0;
	}
	for (int d = (int)out->rank - 1; d >= 0; d--) {
		int64_t od = out->dims[d], id = d - shift >= 0 ? in->dims[d - shift] : 1;

		op->u.bcast.dims[d] = od;
		if (id == od)
			op->u.bcast.strides[k][d] = od == 1 ? 0 : stride;
		else if (id == 1)
			op->u.bcast.strides[k][d] = 0;
		else
			return refuse(why, cap, "input %u dimension %d (%lld) does not broadcast to %lld", k, d,
				      (long long)id, (long long)od);
		stride *= id;
	}
	return 0;
}

/* ---- elementwise ------------------------------------------------------------------------------ */

static const struct {
	const char *op;
	enum gpu_unary_fn fn;
} g_unary[] = {
	{ "Relu", GPU_UNARY_RELU }, { "LeakyRelu", GPU_UNARY_LEAKY_RELU }, { "Clip", GPU_UNARY_CLIP },
	{ "Sigmoid", GPU_UNARY_SIGMOID }, { "Tanh", GPU_UNARY_TANH }, { "Exp", GPU_UNARY_EXP },
	{ "Erf", GPU_UNARY_ERF }, { "Sqrt", GPU_UNARY_SQRT }, { "Reciprocal", GPU_UNARY_RECIPROCAL },
	{ "Neg", GPU_UNARY_NEG }, { "Abs", GPU_UNARY_ABS },
};

/* Clip's bound from opset 11 on: an optional scalar input, constant for the device. */
static int clip_bound(const struct gpu_lower_operand *o, float dflt, float *v, char *why, size_t cap)
{
	*v = dflt;
	if (!o->present)
		return 0;
	if (o->host_data == NULL || o->tensor.dtype != BW_DTYPE_FLOAT || elems_of(&o->tensor) != 1)
		return refuse(why, cap, "Clip bounds must be float constants on the GPU");
	*v = *(const float *)o->host_data;
	return 0;
}

static int lower_unary(struct builder *b, const struct rt_node *n, const struct gpu_lower_operand *in,
		       const struct gpu_lower_operand *out, char *why, size_t cap)
{
	struct gpu_op op = op_new(GPU_OP_UNARY, out);
	int rc = need_float(in, 1, why, cap);
	unsigned int i;

	if (rc < 0)
		return rc;
	for (i = 0; i < sizeof(g_unary) / sizeof(g_unary[0]); i++)
		if (strcmp(g_unary[i].op, n->op_type) == 0)
			break;
	if (i == sizeof(g_unary) / sizeof(g_unary[0]))
		return refuse(why, cap, "not a unary op");
	op.fn = g_unary[i].fn;
	op.in[0] = in[0].ref;
	if (op.fn == GPU_UNARY_LEAKY_RELU) {
		op.alpha = rt_attr_float(n, "alpha", BW_LEAKY_RELU_ALPHA_DEFAULT);
	} else if (op.fn == GPU_UNARY_CLIP) {
		if (n->opset < 11) {
			op.alpha = rt_attr_float(n, "min", -INFINITY);
			op.beta = rt_attr_float(n, "max", INFINITY);
		} else {
			rc = clip_bound(&in[1], -INFINITY, &op.alpha, why, cap);
			if (rc == 0)
				rc = clip_bound(&in[2], INFINITY, &op.beta, why, cap);
			if (rc < 0)
				return rc;
		}
	}
	return gpu_lower_emit(b, &op);
}

static const struct {
	const char *op;
	enum gpu_binary_fn fn;
} g_binary[] = {
	{ "Add", GPU_BINARY_ADD }, { "Sub", GPU_BINARY_SUB }, { "Mul", GPU_BINARY_MUL }, { "Div", GPU_BINARY_DIV },
	{ "Pow", GPU_BINARY_POW }, { "Max", GPU_BINARY_MAX }, { "Min", GPU_BINARY_MIN },
};

static int lower_binary(struct builder *b, const struct rt_node *n, const struct gpu_lower_operand *in,
			const struct gpu_lower_operand *out, char *why, size_t cap)
{
	struct gpu_op op = op_new(GPU_OP_BINARY, out);
	int rc;
	unsigned int i;

	if (n->num_inputs != 2 || !in[0].present || !in[1].present)
		return refuse(why, cap, "%u inputs: the GPU takes two", n->num_inputs);
	rc = need_float(in, 2, why, cap);
	if (rc < 0)
		return rc;
	for (i = 0; i < sizeof(g_binary) / sizeof(g_binary[0]); i++)
		if (strcmp(g_binary[i].op, n->op_type) == 0)
			break;
	if (i == sizeof(g_binary) / sizeof(g_binary[0]))
		return refuse(why, cap, "not a binary op");
	op.fn = g_binary[i].fn;
	op.in[0] = in[0].ref;
	op.in[1] = in[1].ref;
	rc = bcast_strides(&op, 0, &in[0].tensor, &out[0].tensor, why, cap);
	if (rc == 0)
		rc = bcast_strides(&op, 1, &in[1].tensor, &out[0].tensor, why, cap);
	return rc < 0 ? rc : gpu_lower_emit(b, &op);
}

static int lower_where(struct builder *b, const struct rt_node *n, const struct gpu_lower_operand *in,
		       const struct gpu_lower_operand *out, char *why, size_t cap)
{
	struct gpu_op op = op_new(GPU_OP_WHERE, out);
	int rc;

	(void)n;
	if (in[0].tensor.dtype != BW_DTYPE_BOOL)
		return refuse(why, cap, "the condition must be bool");
	rc = need_float(in + 1, 2, why, cap);
	for (unsigned int k = 0; k < 3 && rc == 0; k++) {
		op.in[k] = in[k].ref;
		rc = bcast_strides(&op, k, &in[k].tensor, &out[0].tensor, why, cap);
	}
	return rc < 0 ? rc : gpu_lower_emit(b, &op);
}

static int lower_cast(struct builder *b, const struct rt_node *n, const struct gpu_lower_operand *in,
		      const struct gpu_lower_operand *out, char *why, size_t cap)
{
	struct gpu_op op = op_new(GPU_OP_CAST, out);

	(void)n;
	if (!gpu_cast_dtype_ok(in[0].tensor.dtype) || !gpu_cast_dtype_ok(out[0].tensor.dtype))
		return refuse(why, cap, "a cast from %s to %s", rt_dtype_name(in[0].tensor.dtype),
			      rt_dtype_name(out[0].tensor.dtype));
	op.in[0] = in[0].ref;
	op.u.cast.from = in[0].tensor.dtype;
	op.u.cast.to = out[0].tensor.dtype;
	return gpu_lower_emit(b, &op);
}

/* Reshape, Flatten, Squeeze, Unsqueeze, Identity, Dropout (inference): the bytes, as they are. */
static int lower_copy(struct builder *b, const struct rt_node *n, const struct gpu_lower_operand *in,
		      const struct gpu_lower_operand *out, char *why, size_t cap)
{
	struct gpu_op op = op_new(GPU_OP_COPY, out);

	for (uint16_t j = 1; j < n->num_outputs; j++)
		if (out[j].present)
			return refuse(why, cap, "output %u (a mask) is not computed on the GPU", j);
	op.in[0] = in[0].ref;
	op.count = out[0].nbytes;
	if (in[0].nbytes != out[0].nbytes)
		return refuse(why, cap, "input and output sizes differ");
	return gpu_lower_emit(b, &op);
}

static int lower_transpose(struct builder *b, const struct rt_node *n, const struct gpu_lower_operand *in,
			   const struct gpu_lower_operand *out, char *why, size_t cap)
{
	struct gpu_op op = op_new(GPU_OP_PERMUTE, out);
	const struct rt_attr *perm = rt_node_attr(n, "perm");
	const struct rt_tensor *t = &in[0].tensor;
	int64_t stride[GPU_PROG_RANK_MAX];
	uint32_t eb = (uint32_t)rt_dtype_size(t->dtype);

	if (eb != 1 && eb != 4 && eb != 8)
		return refuse(why, cap, "elements of %u bytes", eb);
	if (t->rank == 0 || t->rank > GPU_PROG_RANK_MAX)
		return refuse(why, cap, "rank %u", t->rank);
	stride[t->rank - 1] = 1;
	for (int d = (int)t->rank - 2; d >= 0; d--)
		stride[d] = stride[d + 1] * t->dims[d + 1];
	op.in[0] = in[0].ref;
	op.u.bcast.rank = t->rank;
	for (uint8_t d = 0; d < t->rank; d++) {
		int64_t axis = perm != NULL ? perm->ints[d] : (int64_t)t->rank - 1 - d;

		op.u.bcast.dims[d] = out[0].tensor.dims[d];
		op.u.bcast.strides[0][d] = stride[axis];
	}
	return gpu_lower_emit(b, &op);
}

static int lower_expand(struct builder *b, const struct rt_node *n, const struct gpu_lower_operand *in,
			const struct gpu_lower_operand *out, char *why, size_t cap)
{
	struct gpu_op op = op_new(GPU_OP_PERMUTE, out);
	uint32_t eb = (uint32_t)rt_dtype_size(in[0].tensor.dtype);
	int rc;

	(void)n;
	if (eb != 1 && eb != 4 && eb != 8)
		return refuse(why, cap, "elements of %u bytes", eb);
	op.in[0] = in[0].ref;
	rc = bcast_strides(&op, 0, &in[0].tensor, &out[0].tensor, why, cap);
	return rc < 0 ? rc : gpu_lower_emit(b, &op);
}

static int lower_gather(struct builder *b, const struct rt_node *n, const struct gpu_lower_operand *in,
			const struct gpu_lower_operand *out, char *why, size_t cap)
{
	struct gpu_op op = op_new(GPU_OP_GATHER, out);
	const struct rt_tensor *t = &in[0].tensor;
	int64_t axis = rt_attr_int(n, "axis", 0);

	if (axis < 0)
		axis += t->rank;
	if (axis < 0 || axis >= t->rank)
		return refuse(why, cap, "axis out of range");
	if (in[1].tensor.dtype != BW_DTYPE_INT64 && in[1].tensor.dtype != BW_DTYPE_INT32)
		return refuse(why, cap, "indices of type %s", rt_dtype_name(in[1].tensor.dtype));
	op.in[0] = in[0].ref;
	op.in[1] = in[1].ref;
	op.u.gather.outer = (int64_t)prod(t, 0, (int)axis);
	op.u.gather.axis_len = t->dims[axis];
	op.u.gather.inner = (int64_t)prod(t, (int)axis + 1, t->rank);
	op.u.gather.nb_idx = (int64_t)elems_of(&in[1].tensor);
	op.u.gather.elem_bytes = (uint32_t)rt_dtype_size(t->dtype);
	if (op.u.gather.elem_bytes == 0)
		return refuse(why, cap, "elements of type %s", rt_dtype_name(t->dtype));
	return gpu_lower_emit(b, &op);
}

/* ---- rows and reductions ---------------------------------------------------------------------- */

static int lower_softmax(struct builder *b, const struct rt_node *n, const struct gpu_lower_operand *in,
			 const struct gpu_lower_operand *out, char *why, size_t cap)
{
	struct gpu_op op = op_new(GPU_OP_SOFTMAX, out);
	const struct rt_tensor *t = &in[0].tensor;
	int64_t axis = rt_attr_int(n, "axis", n->opset < 13 ? 1 : -1);
	int rc = need_float(in, 1, why, cap);

	if (rc < 0)
		return rc;
	if (axis < 0)
		axis += t->rank;
	if (t->rank == 0 || axis < 0 || axis >= t->rank)
		return refuse(why, cap, "axis out of range");
	/* before opset 13 Softmax works on the 2-D view [dims before axis, dims from axis on] */
	if (n->opset >= 13 && axis != t->rank - 1)
		return refuse(why, cap, "Softmax over axis %lld of %u: the GPU takes the last axis", (long long)axis,
			      t->rank);
	op.in[0] = in[0].ref;
	op.u.rows.cols = (int64_t)prod(t, (int)axis, t->rank);
	op.u.rows.rows = (int64_t)prod(t, 0, (int)axis);
	return gpu_lower_emit(b, &op);
}

static int lower_layernorm(struct builder *b, const struct rt_node *n, const struct gpu_lower_operand *in,
			   const struct gpu_lower_operand *out, char *why, size_t cap)
{
	struct gpu_op op = op_new(GPU_OP_LAYERNORM, out);
	const struct rt_tensor *t = &in[0].tensor;
	int64_t axis = rt_attr_int(n, "axis", -1);
	int rc = need_float(in, 3, why, cap);

	if (rc < 0)
		return rc;
	if (axis < 0)
		axis += t->rank;
	if (axis < 0 || axis >= t->rank)
		return refuse(why, cap, "axis out of range");
	for (uint16_t j = 1; j < n->num_outputs; j++)
		if (out[j].present)
			return refuse(why, cap, "output %u (mean or inverse deviation) is not computed on the GPU", j);
	op.u.rows.cols = (int64_t)prod(t, (int)axis, t->rank);
	op.u.rows.rows = (int64_t)prod(t, 0, (int)axis);
	if (elems_of(&in[1].tensor) != (uint64_t)op.u.rows.cols ||
	    (in[2].present && elems_of(&in[2].tensor) != (uint64_t)op.u.rows.cols))
		return refuse(why, cap, "scale and bias must cover the normalised dimensions exactly");
	op.in[0] = in[0].ref;
	op.in[1] = in[1].ref;
	if (in[2].present)
		op.in[2] = in[2].ref;
	op.alpha = rt_attr_float(n, "epsilon", 1e-5f);
	return gpu_lower_emit(b, &op);
}

static int lower_reduce(struct builder *b, const struct rt_node *n, const struct gpu_lower_operand *in,
			const struct gpu_lower_operand *out, char *why, size_t cap)
{
	struct gpu_op op = op_new(GPU_OP_REDUCE, out);
	const struct rt_tensor *t = &in[0].tensor;
	bool reduced[GPU_PROG_RANK_MAX] = { false };
	const struct rt_attr *attr = rt_node_attr(n, "axes");
	int64_t nb_axes = 0, first = -1, last = -1;
	int rc = need_float(in, 1, why, cap);

	if (rc < 0)
		return rc;
	if (t->rank > GPU_PROG_RANK_MAX)
		return refuse(why, cap, "rank %u", t->rank);
	op.fn = strcmp(n->op_type, "ReduceSum") == 0 ? GPU_REDUCE_SUM :
		strcmp(n->op_type, "ReduceMean") == 0 ? GPU_REDUCE_MEAN :
		strcmp(n->op_type, "ReduceMax") == 0 ? GPU_REDUCE_MAX : GPU_REDUCE_MIN;
	if (n->num_inputs > 1 && in[1].present) {
		if (in[1].host_data == NULL || in[1].tensor.dtype != BW_DTYPE_INT64)
			return refuse(why, cap, "the axes must be an int64 constant on the GPU");
		nb_axes = (int64_t)elems_of(&in[1].tensor);
		for (int64_t i = 0; i < nb_axes; i++) {
			int64_t a = ((const int64_t *)in[1].host_data)[i];

			a = a < 0 ? a + t->rank : a;
			if (a < 0 || a >= t->rank)
				return refuse(why, cap, "axis out of range");
			reduced[a] = true;
		}
	} else if (attr != NULL) {
		nb_axes = attr->count;
		for (int64_t i = 0; i < nb_axes; i++) {
			int64_t a = attr->ints[i] < 0 ? attr->ints[i] + t->rank : attr->ints[i];

			if (a < 0 || a >= t->rank)
				return refuse(why, cap, "axis out of range");
			reduced[a] = true;
		}
	}
	if (nb_axes == 0) {
		if (rt_attr_int(n, "noop_with_empty_axes", 0) != 0)
			return lower_copy(b, n, in, out, why, cap);
		for (uint8_t d = 0; d < t->rank; d++)
			reduced[d] = true;
	}
	for (int d = 0; d < t->rank; d++)
		if (reduced[d]) {
			if (first < 0)
				first = d;
			else if (last != d - 1)
				return refuse(why, cap, "the reduced axes must be adjacent on the GPU");
			last = d;
		}
	op.in[0] = in[0].ref;
	op.u.reduce.outer = first < 0 ? (int64_t)elems_of(t) : (int64_t)prod(t, 0, (int)first);
	op.u.reduce.reduced = first < 0 ? 1 : (int64_t)prod(t, (int)first, (int)last + 1);
	op.u.reduce.inner = first < 0 ? 1 : (int64_t)prod(t, (int)last + 1, t->rank);
	return gpu_lower_emit(b, &op);
}

/* ---- matrix products -------------------------------------------------------------------------- */

/*
 * MatMul: [..., m, k] x [..., k, n]. A 2-D B (weights, the common case) folds A's leading dimensions
 * into m: one GEMM. Otherwise the leading dimensions must match, or one side's must all be 1
 * (broadcast: a batch stride of 0).
 */
static int lower_matmul(struct builder *b, const struct rt_node *n, const struct gpu_lower_operand *in,
			const struct gpu_lower_operand *out, char *why, size_t cap)
{
	struct gpu_op op = op_new(GPU_OP_GEMM, out);
	const struct rt_tensor *a = &in[0].tensor, *bt = &in[1].tensor, *o = &out[0].tensor;
	int rc = need_float(in, 2, why, cap);

	(void)n;
	if (rc < 0)
		return rc;
	if (a->rank < 2 || bt->rank < 2)
		return refuse(why, cap, "a 1-D operand of MatMul on the GPU");
	op.in[0] = in[0].ref;
	op.in[1] = in[1].ref;
	op.alpha = 1.0f;
	op.u.gemm.k = a->dims[a->rank - 1];
	op.u.gemm.n = bt->dims[bt->rank - 1];
	if (bt->rank == 2) {
		op.u.gemm.batch = 1;
		op.u.gemm.m = (int64_t)prod(a, 0, a->rank - 1);
	} else {
		uint64_t batch_a = prod(a, 0, a->rank - 2), batch_b = prod(bt, 0, bt->rank - 2);
		uint64_t batch_o = prod(o, 0, o->rank - 2);

		op.u.gemm.m = a->dims[a->rank - 2];
		op.u.gemm.batch = (int64_t)batch_o;
		/* each side's leading dimensions either are the output's (no dimension of them can be a
		 * broadcast 1 when the products agree) or are all 1 */
		if ((batch_a != batch_o && batch_a != 1) || (batch_b != batch_o && batch_b != 1))
			return refuse(why, cap, "MatMul batch dimensions broadcast partly: the GPU takes equal or all-1");
		op.u.gemm.stride_a = batch_a == 1 ? 0 : op.u.gemm.m * op.u.gemm.k;
		op.u.gemm.stride_b = batch_b == 1 ? 0 : op.u.gemm.k * op.u.gemm.n;
	}
	op.u.gemm.stride_c = op.u.gemm.m * op.u.gemm.n;
	return gpu_lower_emit(b, &op);
}

static int lower_gemm(struct builder *b, const struct rt_node *n, const struct gpu_lower_operand *in,
		      const struct gpu_lower_operand *out, char *why, size_t cap)
{
	struct gpu_op op = op_new(GPU_OP_GEMM, out);
	const struct rt_tensor *a = &in[0].tensor, *bt = &in[1].tensor;
	float beta = rt_attr_float(n, "beta", 1.0f);
	int rc = need_float(in, 3, why, cap);

	if (rc < 0)
		return rc;
	if (a->rank != 2 || bt->rank != 2)
		return refuse(why, cap, "Gemm operands must be 2-D");
	op.in[0] = in[0].ref;
	op.in[1] = in[1].ref;
	op.alpha = rt_attr_float(n, "alpha", 1.0f);
	op.u.gemm.trans_a = rt_attr_int(n, "transA", 0) != 0;
	op.u.gemm.trans_b = rt_attr_int(n, "transB", 0) != 0;
	op.u.gemm.batch = 1;
	op.u.gemm.m = op.u.gemm.trans_a ? a->dims[1] : a->dims[0];
	op.u.gemm.k = op.u.gemm.trans_a ? a->dims[0] : a->dims[1];
	op.u.gemm.n = op.u.gemm.trans_b ? bt->dims[0] : bt->dims[1];
	op.u.gemm.stride_c = op.u.gemm.m * op.u.gemm.n;
	if (n->num_inputs > 2 && in[2].present) {
		const struct rt_tensor *c = &in[2].tensor;
		bool vector = elems_of(c) == (uint64_t)op.u.gemm.n && (c->rank == 1 || (c->rank == 2 && c->dims[0] == 1));

		if (beta != 1.0f)
			return refuse(why, cap, "Gemm with beta %g: the GPU takes C with beta 1", (double)beta);
		if (vector && op.u.gemm.n > 1) {
			op.in[2] = in[2].ref; /* the bias epilogue */
		} else {
			/* C broadcast over [m, n]: added after the product, in place */
			struct gpu_op add = op_new(GPU_OP_BINARY, out);

			rc = gpu_lower_emit(b, &op);
			add.fn = GPU_BINARY_ADD;
			add.in[0] = out[0].ref;
			add.in[1] = in[2].ref;
			if (rc == 0)
				rc = bcast_strides(&add, 0, &out[0].tensor, &out[0].tensor, why, cap);
			if (rc == 0)
				rc = bcast_strides(&add, 1, c, &out[0].tensor, why, cap);
			return rc < 0 ? rc : gpu_lower_emit(b, &add);
		}
	}
	return gpu_lower_emit(b, &op);
}

/* ---- the registry ----------------------------------------------------------------------------- */

/* Shapes as the CPU kernel infers them: one set of ONNX rules for every device. */
static int gpu_infer(const struct rt_node *n, const struct rt_tensor *in, struct rt_tensor *out, char *err,
		     size_t cap)
{
	uint8_t dtype = 0;
	const struct rt_kernel *k;

	for (uint16_t j = 0; j < n->num_inputs && dtype == 0; j++)
		dtype = in[j].dtype;
	k = rt_kernel_find(n->op_type, n->domain, n->opset, dtype, RT_DEVICE_CPU, err, cap);
	return k == NULL ? -ENOTSUP : k->infer(n, in, out, err, cap);
}

/* The window geometry of a 2-D NCHW Conv or pool, as the CPU kernels read it (rt_k_window_init). */
static int window_fill(struct gpu_op *op, const struct rt_node *n, const struct rt_tensor *x, const int64_t *kernel,
		       bool pooling, char *why, size_t cap)
{
	struct rt_k_window win;
	int rc;

	if (x->rank != 4)
		return refuse(why, cap, "a %u-D window: the GPU runs 2-D (NCHW)", x->rank >= 2 ? x->rank - 2 : 0);
	rc = rt_k_window_init(n, x, kernel, pooling, true, &win, why, cap);
	if (rc < 0)
		return rc;
	op->u.conv.n = x->dims[0];
	op->u.conv.c = x->dims[1];
	op->u.conv.h = x->dims[2];
	op->u.conv.w = x->dims[3];
	op->u.conv.oh = win.out[0];
	op->u.conv.ow = win.out[1];
	op->u.conv.kh = win.kernel[0];
	op->u.conv.kw = win.kernel[1];
	op->u.conv.stride_h = win.stride[0];
	op->u.conv.stride_w = win.stride[1];
	op->u.conv.pad_h = win.pad_begin[0];
	op->u.conv.pad_w = win.pad_begin[1];
	op->u.conv.dil_h = win.dilation[0];
	op->u.conv.dil_w = win.dilation[1];
	return 0;
}

/*
 * Conv, and the runtime's FusedConv (a Conv with a BatchNormalization folded into its weights, a
 * residual Z and an activation): one CONV op, Relu in its epilogue; another activation runs after it
 * in place as a UNARY op.
 */
static int lower_conv(struct builder *b, const struct rt_node *n, const struct gpu_lower_operand *in,
		      const struct gpu_lower_operand *out, char *why, size_t cap)
{
	const struct rt_tensor *x = &in[0].tensor, *w = &in[1].tensor;
	bool fused = strcmp(n->op_type, "FusedConv") == 0;
	struct rt_k_act_spec act = { .kind = RT_K_ACT_NONE };
	struct gpu_op op = op_new(GPU_OP_CONV, out), post;
	int rc;

	if ((rc = need_float(in, n->num_inputs, why, cap)) < 0)
		return rc;
	if (fused && rt_attr_int(n, "packed_weights", 0) != 0)
		return refuse(why, cap, "its weights are packed for the CPU's kernels");
	if (w->rank != 4)
		return refuse(why, cap, "weights of rank %u: the GPU runs 2-D convolutions", w->rank);
	if ((rc = window_fill(&op, n, x, &w->dims[2], false, why, cap)) < 0)
		return rc;
	if (fused && (rc = rt_k_act_read(n, &act, why, cap)) < 0)
		return rc;
	op.u.conv.m = w->dims[0];
	op.u.conv.group = rt_attr_int(n, "group", 1);
	if (op.u.conv.group <= 0 || x->dims[1] != w->dims[1] * op.u.conv.group)
		return refuse(why, cap, "%lld input channels, weights for %lld per group of %lld", (long long)x->dims[1],
			      (long long)w->dims[1], (long long)op.u.conv.group);
	op.in[0] = in[0].ref;
	op.in[1] = in[1].ref;
	if (n->num_inputs > 2 && in[2].present)
		op.in[2] = in[2].ref;
	if (fused && n->num_inputs > 3 && in[3].present)
		op.in[3] = in[3].ref;
	op.fn = act.kind == RT_K_ACT_RELU ? GPU_ACT_RELU : GPU_ACT_NONE;
	if ((rc = gpu_lower_emit(b, &op)) < 0 || act.kind == RT_K_ACT_NONE || act.kind == RT_K_ACT_RELU)
		return rc;
	post = op_new(GPU_OP_UNARY, out);
	post.in[0] = out[0].ref;
	post.fn = act.kind == RT_K_ACT_LEAKY_RELU ? GPU_UNARY_LEAKY_RELU :
		  act.kind == RT_K_ACT_CLIP ? GPU_UNARY_CLIP : GPU_UNARY_GELU;
	post.alpha = act.a;
	post.beta = act.b;
	return gpu_lower_emit(b, &post);
}

/* MaxPool (output 0 only), AveragePool, GlobalAveragePool (a window of the whole image). */
static int lower_pool(struct builder *b, const struct rt_node *n, const struct gpu_lower_operand *in,
		      const struct gpu_lower_operand *out, char *why, size_t cap)
{
	const struct rt_tensor *x = &in[0].tensor;
	struct gpu_op op = op_new(GPU_OP_POOL, out);
	int rc;

	if ((rc = need_float(in, 1, why, cap)) < 0)
		return rc;
	if (n->num_outputs > 1 && n->outputs[1] != RT_VALUE_NONE)
		return refuse(why, cap, "MaxPool's Indices output: the GPU computes values only");
	if (strcmp(n->op_type, "GlobalAveragePool") == 0) {
		if (x->rank != 4)
			return refuse(why, cap, "a %u-D pool: the GPU runs 2-D (NCHW)", x->rank >= 2 ? x->rank - 2 : 0);
		op.u.conv = (typeof(op.u.conv)){ .n = x->dims[0], .c = x->dims[1], .h = x->dims[2], .w = x->dims[3],
						 .oh = 1, .ow = 1, .kh = x->dims[2], .kw = x->dims[3], .stride_h = 1,
						 .stride_w = 1, .dil_h = 1, .dil_w = 1 };
		op.fn = GPU_POOL_AVG;
	} else {
		if ((rc = window_fill(&op, n, x, NULL, true, why, cap)) < 0)
			return rc;
		op.fn = strcmp(n->op_type, "MaxPool") == 0 ? GPU_POOL_MAX : GPU_POOL_AVG;
		op.u.conv.count_include_pad = rt_attr_int(n, "count_include_pad", 0) != 0;
	}
	op.u.conv.m = op.u.conv.c;
	op.u.conv.group = op.u.conv.c;
	op.in[0] = in[0].ref;
	return gpu_lower_emit(b, &op);
}

static const struct gpu_lowering g_lower_unary = { lower_unary };
static const struct gpu_lowering g_lower_binary = { lower_binary };
static const struct gpu_lowering g_lower_where = { lower_where };
static const struct gpu_lowering g_lower_cast = { lower_cast };
static const struct gpu_lowering g_lower_copy = { lower_copy };
static const struct gpu_lowering g_lower_transpose = { lower_transpose };
static const struct gpu_lowering g_lower_expand = { lower_expand };
static const struct gpu_lowering g_lower_gather = { lower_gather };
static const struct gpu_lowering g_lower_softmax = { lower_softmax };
static const struct gpu_lowering g_lower_layernorm = { lower_layernorm };
static const struct gpu_lowering g_lower_reduce = { lower_reduce };
static const struct gpu_lowering g_lower_matmul = { lower_matmul };
static const struct gpu_lowering g_lower_gemm = { lower_gemm };
static const struct gpu_lowering g_lower_conv = { lower_conv };
static const struct gpu_lowering g_lower_pool = { lower_pool };

#define GPU_KERNEL(OP, DTYPES, LOWERING) \
	{ .op_type = OP, .domain = "", .opset_min = 1, .opset_max = INT64_MAX, .dtypes = DTYPES, \
	  .device = RT_DEVICE_GPU, .infer = gpu_infer, .device_impl = &LOWERING }

static const struct rt_kernel g_gpu_kernels[] = {
	GPU_KERNEL("Relu", F32, g_lower_unary),
	GPU_KERNEL("LeakyRelu", F32, g_lower_unary),
	GPU_KERNEL("Clip", F32, g_lower_unary),
	GPU_KERNEL("Sigmoid", F32, g_lower_unary),
	GPU_KERNEL("Tanh", F32, g_lower_unary),
	GPU_KERNEL("Exp", F32, g_lower_unary),
	GPU_KERNEL("Erf", F32, g_lower_unary),
	GPU_KERNEL("Sqrt", F32, g_lower_unary),
	GPU_KERNEL("Reciprocal", F32, g_lower_unary),
	GPU_KERNEL("Neg", F32, g_lower_unary),
	GPU_KERNEL("Abs", F32, g_lower_unary),
	GPU_KERNEL("Add", F32, g_lower_binary),
	GPU_KERNEL("Sub", F32, g_lower_binary),
	GPU_KERNEL("Mul", F32, g_lower_binary),
	GPU_KERNEL("Div", F32, g_lower_binary),
	GPU_KERNEL("Pow", F32, g_lower_binary),
	GPU_KERNEL("Max", F32, g_lower_binary),
	GPU_KERNEL("Min", F32, g_lower_binary),
	GPU_KERNEL("Where", RT_DTYPE_BIT(BW_DTYPE_BOOL), g_lower_where),
	GPU_KERNEL("Cast", ANY_NUMERIC, g_lower_cast),
	GPU_KERNEL("Reshape", ANY_NUMERIC, g_lower_copy),
	GPU_KERNEL("Flatten", ANY_NUMERIC, g_lower_copy),
	GPU_KERNEL("Squeeze", ANY_NUMERIC, g_lower_copy),
	GPU_KERNEL("Unsqueeze", ANY_NUMERIC, g_lower_copy),
	GPU_KERNEL("Identity", ANY_NUMERIC, g_lower_copy),
	GPU_KERNEL("Dropout", F32, g_lower_copy),
	GPU_KERNEL("Transpose", ANY_NUMERIC, g_lower_transpose),
	GPU_KERNEL("Expand", ANY_NUMERIC, g_lower_expand),
	GPU_KERNEL("Gather", ANY_NUMERIC, g_lower_gather),
	GPU_KERNEL("Softmax", F32, g_lower_softmax),
	GPU_KERNEL("LayerNormalization", F32, g_lower_layernorm),
	GPU_KERNEL("ReduceSum", F32, g_lower_reduce),
	GPU_KERNEL("ReduceMean", F32, g_lower_reduce),
	GPU_KERNEL("ReduceMax", F32, g_lower_reduce),
	GPU_KERNEL("ReduceMin", F32, g_lower_reduce),
	GPU_KERNEL("MatMul", F32, g_lower_matmul),
	GPU_KERNEL("Gemm", F32, g_lower_gemm),
	GPU_KERNEL("Conv", F32, g_lower_conv),
	GPU_KERNEL("MaxPool", F32, g_lower_pool),
	GPU_KERNEL("AveragePool", F32, g_lower_pool),
	GPU_KERNEL("GlobalAveragePool", F32, g_lower_pool),
	/* rt_graph_optimize's Conv + BatchNormalization + Add + activation, its weights left unpacked for
	 * the GPU */
	{ .op_type = "FusedConv", .domain = RT_K_DOMAIN, .opset_min = 1, .opset_max = INT64_MAX, .dtypes = F32,
	  .device = RT_DEVICE_GPU, .infer = gpu_infer, .device_impl = &g_lower_conv },
};

int gpu_kernels_register(void)
{
	int rc = rt_cpu_kernels_register();

	return rc < 0 ? rc : rt_kernels_register(g_gpu_kernels, sizeof(g_gpu_kernels) / sizeof(g_gpu_kernels[0]));
}
