/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What both device modules check before they load a program (defs.h), and the deep copy they keep.
 * The check exists because a CUDA kernel that reads or writes past its buffer does not fail cleanly:
 * it corrupts another tensor silently or loses the context (a sticky error for every model on the
 * device). So every byte an op's items can touch, derived from the same fields program_math.h reads,
 * must lie in the arena of its size or in the constants, and every access must be aligned to its
 * element (a misaligned load is a sticky error on CUDA too). All arithmetic on sizes is checked for
 * overflow: a program comes from a model file, which may say anything.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "defs.h"
#include "program_math.h"

/* Where an error line is being written, so each check says only what is wrong. */
struct check_ctx {
	char *err;
	size_t cap;
	const struct gpu_program *prog;
	const struct gpu_program_size *sz;
	uint32_t op_index;
	const char *code_name;
};

static const char *const g_code_names[GPU_OP_CODE_COUNT] = {
	[GPU_OP_UNARY] = "UNARY", [GPU_OP_BINARY] = "BINARY", [GPU_OP_WHERE] = "WHERE",
	[GPU_OP_CAST] = "CAST", [GPU_OP_COPY] = "COPY", [GPU_OP_PERMUTE] = "PERMUTE",
	[GPU_OP_GATHER] = "GATHER", [GPU_OP_SOFTMAX] = "SOFTMAX", [GPU_OP_LAYERNORM] = "LAYERNORM",
	[GPU_OP_REDUCE] = "REDUCE", [GPU_OP_GEMM] = "GEMM", [GPU_OP_CONV] = "CONV", [GPU_OP_POOL] = "POOL",
};

static int op_fail(const struct check_ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Writes "size B op N (CODE): what". \return -EINVAL. */
static int op_fail(const struct check_ctx *c, const char *fmt, ...)
{
	char what[GPU_ERR_MAX];
	va_list ap;

	va_start(ap, fmt);
	bw_verr(what, sizeof(what), 0, fmt, ap);
	va_end(ap);
	gpu_err(c->err, c->cap, "size %u op %u (%s): %s", c->sz->batch, c->op_index, c->code_name, what);
	return -EINVAL;
}

static bool mul_ok(uint64_t a, uint64_t b, uint64_t *out)
{
	return !__builtin_mul_overflow(a, b, out);
}

#define OUT GPU_OP_INPUTS_MAX /* the operand index check_ref and check_float give the output */
#define FLT 0u /* check_ref's elem_bytes for a float operand: its own dtype's, 4 (float32) or 2 (float16) */

/*
 * Checks that operand k (an input, or OUT) spans elems elements of elem_bytes bytes from its offset,
 * inside its space, aligned to the element (FLT: the element of its float dtype). required: NONE is
 * refused.
 */
static int check_ref(const struct check_ctx *c, int k, uint64_t elems, uint32_t elem_bytes, bool required)
{
	const struct gpu_op *op = &c->sz->ops[c->op_index];
	const struct gpu_ref *r = k == OUT ? &op->out : &op->in[k];
	char name[8];
	uint64_t bytes, end, limit;

	if (elem_bytes == FLT)
		elem_bytes = r->dtype == BW_DTYPE_FLOAT16 ? 2 : 4;
	snprintf(name, sizeof(name), k == OUT ? "out" : "in%d", k);
	if (r->space == GPU_SPACE_NONE) {
		if (required)
			return op_fail(c, "%s is required and missing", name);
		return 0;
	}
	if (r->space != GPU_SPACE_ARENA && r->space != GPU_SPACE_CONST)
		return op_fail(c, "%s: unknown space %u", name, r->space);
	if (k == OUT && r->space != GPU_SPACE_ARENA)
		return op_fail(c, "out must be in the arena (the constants are read-only)");
	if (!mul_ok(elems, elem_bytes, &bytes) || __builtin_add_overflow(r->offset, bytes, &end))
		return op_fail(c, "%s: %llu elements of %u bytes at %llu overflow", name, (unsigned long long)elems,
			       elem_bytes, (unsigned long long)r->offset);
	limit = r->space == GPU_SPACE_ARENA ? c->sz->arena_bytes : c->prog->const_bytes;
	if (end > limit)
		return op_fail(c, "%s: bytes [%llu, %llu) past the %s (%llu bytes)", name,
			       (unsigned long long)r->offset, (unsigned long long)end,
			       r->space == GPU_SPACE_ARENA ? "arena" : "constants", (unsigned long long)limit);
	if (elem_bytes > 1 && r->offset % elem_bytes != 0)
		return op_fail(c, "%s: offset %llu not aligned to its %u-byte elements", name,
			       (unsigned long long)r->offset, elem_bytes);
	return 0;
}

static int check_float(const struct check_ctx *c, int k)
{
	const struct gpu_op *op = &c->sz->ops[c->op_index];
	const struct gpu_ref *r = k == OUT ? &op->out : &op->in[k];

	if (r->space != GPU_SPACE_NONE && r->dtype != BW_DTYPE_FLOAT && r->dtype != BW_DTYPE_FLOAT16) {
		if (k == OUT)
			return op_fail(c, "out: dtype %u, this op computes float (1) or float16 (10)", r->dtype);
		return op_fail(c, "in%d: dtype %u, this op computes float (1) or float16 (10)", k, r->dtype);
	}
	return 0;
}

/* Elements a broadcast operand spans: 1 + sum (dims[d] - 1) * strides[d]; strides >= 0. */
static int bcast_extent(const struct check_ctx *c, unsigned int k, uint64_t *out)
{
	const struct gpu_op *op = &c->sz->ops[c->op_index];
	uint64_t ext = 1;

	*out = 0;
	for (uint32_t d = 0; d < op->u.bcast.rank; d++) {
		int64_t s = op->u.bcast.strides[k][d];
		uint64_t span;

		if (s < 0)
			return op_fail(c, "input %u: negative stride %lld on dimension %u", k, (long long)s, d);
		if (!mul_ok((uint64_t)(op->u.bcast.dims[d] - 1), (uint64_t)s, &span) ||
		    __builtin_add_overflow(ext, span, &ext))
			return op_fail(c, "input %u: strides overflow", k);
	}
	*out = ext;
	return 0;
}

/* rank 1..GPU_PROG_RANK_MAX, dims > 0, count the product of dims. */
static int check_shape(const struct check_ctx *c)
{
	const struct gpu_op *op = &c->sz->ops[c->op_index];
	uint64_t n = 1;

	if (op->u.bcast.rank > GPU_PROG_RANK_MAX)
		return op_fail(c, "rank %u above %u", op->u.bcast.rank, GPU_PROG_RANK_MAX);
	for (uint32_t d = 0; d < op->u.bcast.rank; d++) {
		if (op->u.bcast.dims[d] <= 0)
			return op_fail(c, "dimension %u is %lld", d, (long long)op->u.bcast.dims[d]);
		if (!mul_ok(n, (uint64_t)op->u.bcast.dims[d], &n))
			return op_fail(c, "shape overflows");
	}
	if (n != op->count)
		return op_fail(c, "count %llu is not the shape's %llu elements", (unsigned long long)op->count,
			       (unsigned long long)n);
	return 0;
}

static int check_bcast_inputs(const struct check_ctx *c, unsigned int nb_in, const uint32_t *in_bytes)
{
	int rc = check_shape(c);

	for (unsigned int k = 0; rc == 0 && k < nb_in; k++) {
		uint64_t ext;

		rc = bcast_extent(c, k, &ext);
		if (rc == 0)
			rc = check_ref(c, (int)k, ext, in_bytes[k], true);
	}
	return rc;
}

/* Every field is positive and their product fits. */
static int positive_product(const struct check_ctx *c, const char *what, const int64_t *v, unsigned int n,
			    uint64_t *out)
{
	uint64_t p = 1;

	*out = 0;
	for (unsigned int i = 0; i < n; i++) {
		if (v[i] <= 0)
			return op_fail(c, "%s: extent %u is %lld", what, i, (long long)v[i]);
		if (!mul_ok(p, (uint64_t)v[i], &p))
			return op_fail(c, "%s: extents overflow", what);
	}
	*out = p;
	return 0;
}

static int check_gemm(const struct check_ctx *c)
{
	const struct gpu_op *op = &c->sz->ops[c->op_index];
	int64_t batch = op->u.gemm.batch, m = op->u.gemm.m, n = op->u.gemm.n, k = op->u.gemm.k;
	int64_t ext[4] = { batch, m, n, k };
	uint64_t total, mk, kn, ea, eb, rest;
	int rc;

	if (op->fn >= GPU_ACT_COUNT)
		return op_fail(c, "activation %u unknown", op->fn);
	rc = positive_product(c, "batch, m, n, k", ext, 4, &total);
	if (rc < 0)
		return rc;
	if (op->u.gemm.stride_a < 0 || op->u.gemm.stride_b < 0)
		return op_fail(c, "negative batch stride");
	/* gpu_gemm_item writes out[b] at b * m * n: the output is dense whatever stride_c says */
	if (op->u.gemm.stride_c != m * n)
		return op_fail(c, "stride_c %lld: the output is dense, m * n = %lld", (long long)op->u.gemm.stride_c,
			       (long long)(m * n));
	mk = (uint64_t)(m * k);
	kn = (uint64_t)(k * n);
	if (!mul_ok((uint64_t)(batch - 1), (uint64_t)op->u.gemm.stride_a, &rest) || __builtin_add_overflow(rest, mk, &ea) ||
	    !mul_ok((uint64_t)(batch - 1), (uint64_t)op->u.gemm.stride_b, &rest) || __builtin_add_overflow(rest, kn, &eb))
		return op_fail(c, "batch strides overflow");
	if ((rc = check_float(c, 0)) < 0 || (rc = check_float(c, 1)) < 0 || (rc = check_float(c, 2)) < 0 ||
	    (rc = check_float(c, OUT)) < 0)
		return rc;
	if ((rc = check_ref(c, 0, ea, FLT, true)) < 0 || (rc = check_ref(c, 1, eb, FLT, true)) < 0 ||
	    (rc = check_ref(c, 2, (uint64_t)n, FLT, false)) < 0)
		return rc;
	return check_ref(c, OUT, total / (uint64_t)k, FLT, true);
}

/*
 * CONV and POOL: positive extents whose products fit, strides and dilations >= 1, padding that leaves
 * every window at least one cell of the input (so MAX never returns its -inf start), the output dims
 * the geometry gives, and operands the items read inside their spaces.
 */
static int check_window(const struct check_ctx *c)
{
	const struct gpu_op *op = &c->sz->ops[c->op_index];
	bool conv = op->code == GPU_OP_CONV;
	int64_t in_ext[4] = { op->u.conv.n, op->u.conv.c, op->u.conv.h, op->u.conv.w };
	int64_t out_ext[4] = { op->u.conv.n, op->u.conv.m, op->u.conv.oh, op->u.conv.ow };
	int64_t geo[8] = { op->u.conv.kh, op->u.conv.kw, op->u.conv.stride_h, op->u.conv.stride_w, op->u.conv.dil_h,
			   op->u.conv.dil_w, op->u.conv.group, 1 };
	uint64_t in_n, out_n, geo_n, w_n;
	int rc;

	if (op->fn >= (conv ? (uint32_t)GPU_ACT_COUNT : (uint32_t)GPU_POOL_COUNT))
		return op_fail(c, "%s %u unknown", conv ? "activation" : "function", op->fn);
	if (op->u.conv.nhwc > 1)
		return op_fail(c, "layout %u unknown (0 NCHW, 1 NHWC)", op->u.conv.nhwc);
	if ((rc = positive_product(c, "n, c, h, w", in_ext, 4, &in_n)) < 0 ||
	    (rc = positive_product(c, "n, m, oh, ow", out_ext, 4, &out_n)) < 0 ||
	    (rc = positive_product(c, "kernel, strides, dilations, group", geo, 8, &geo_n)) < 0)
		return rc;
	if (out_n != op->count)
		return op_fail(c, "count %llu is not n * m * oh * ow = %llu", (unsigned long long)op->count,
			       (unsigned long long)out_n);
	if (op->u.conv.pad_h < 0 || op->u.conv.pad_w < 0 || op->u.conv.pad_h >= op->u.conv.kh * op->u.conv.dil_h ||
	    op->u.conv.pad_w >= op->u.conv.kw * op->u.conv.dil_w)
		return op_fail(c, "padding %lld, %lld: negative, or a window wholly in it", (long long)op->u.conv.pad_h,
			       (long long)op->u.conv.pad_w);
	/* the last window starts inside the input (with its begin padding): else MAX could see no cell */
	if ((op->u.conv.oh - 1) * op->u.conv.stride_h - op->u.conv.pad_h >= op->u.conv.h ||
	    (op->u.conv.ow - 1) * op->u.conv.stride_w - op->u.conv.pad_w >= op->u.conv.w)
		return op_fail(c, "output %lld x %lld: its last windows start past the %lld x %lld input",
			       (long long)op->u.conv.oh, (long long)op->u.conv.ow, (long long)op->u.conv.h,
			       (long long)op->u.conv.w);
	if ((rc = check_float(c, 0)) < 0 || (rc = check_float(c, OUT)) < 0 || (rc = check_ref(c, 0, in_n, FLT, true)) < 0)
		return rc;
	if (!conv) {
		if (op->u.conv.m != op->u.conv.c)
			return op_fail(c, "pooling keeps the channels: m %lld, c %lld", (long long)op->u.conv.m,
				       (long long)op->u.conv.c);
		return check_ref(c, OUT, out_n, FLT, true);
	}
	if (op->u.conv.c % op->u.conv.group != 0 || op->u.conv.m % op->u.conv.group != 0)
		return op_fail(c, "c %lld and m %lld are not multiples of group %lld", (long long)op->u.conv.c,
			       (long long)op->u.conv.m, (long long)op->u.conv.group);
	if (!mul_ok((uint64_t)op->u.conv.m, (uint64_t)(op->u.conv.c / op->u.conv.group), &w_n) ||
	    !mul_ok(w_n, (uint64_t)(op->u.conv.kh * op->u.conv.kw), &w_n))
		return op_fail(c, "weights overflow");
	if ((rc = check_float(c, 1)) < 0 || (rc = check_float(c, 2)) < 0 || (rc = check_float(c, 3)) < 0 ||
	    (rc = check_ref(c, 1, w_n, FLT, true)) < 0 || (rc = check_ref(c, 2, (uint64_t)op->u.conv.m, FLT, false)) < 0 ||
	    (rc = check_ref(c, 3, out_n, FLT, false)) < 0)
		return rc;
	return check_ref(c, OUT, out_n, FLT, true);
}

static int check_op(const struct check_ctx *c)
{
	const struct gpu_op *op = &c->sz->ops[c->op_index];
	static const uint32_t f4[3] = { FLT, FLT, FLT };
	int rc = 0;

	switch (op->code) {
	case GPU_OP_UNARY:
		if (op->fn >= GPU_UNARY_COUNT)
			return op_fail(c, "function %u unknown", op->fn);
		if ((rc = check_float(c, 0)) < 0 || (rc = check_float(c, OUT)) < 0)
			return rc;
		if ((rc = check_ref(c, 0, op->count, FLT, true)) < 0)
			return rc;
		return check_ref(c, OUT, op->count, FLT, true);
	case GPU_OP_BINARY:
		if (op->fn >= GPU_BINARY_COUNT)
			return op_fail(c, "function %u unknown", op->fn);
		if ((rc = check_float(c, 0)) < 0 || (rc = check_float(c, 1)) < 0 || (rc = check_float(c, OUT)) < 0)
			return rc;
		if ((rc = check_bcast_inputs(c, 2, f4)) < 0)
			return rc;
		return check_ref(c, OUT, op->count, FLT, true);
	case GPU_OP_WHERE: {
		static const uint32_t where_bytes[3] = { 1, FLT, FLT };

		if (op->in[0].dtype != BW_DTYPE_BOOL && op->in[0].dtype != BW_DTYPE_UINT8)
			return op_fail(c, "in0: condition dtype %u, not bool (9) or uint8 (2)", op->in[0].dtype);
		if ((rc = check_float(c, 1)) < 0 || (rc = check_float(c, 2)) < 0 || (rc = check_float(c, OUT)) < 0)
			return rc;
		if ((rc = check_bcast_inputs(c, 3, where_bytes)) < 0)
			return rc;
		return check_ref(c, OUT, op->count, FLT, true);
	}
	case GPU_OP_CAST:
		if (!gpu_cast_dtype_ok(op->u.cast.from) || !gpu_cast_dtype_ok(op->u.cast.to))
			return op_fail(c, "cast from dtype %u to %u: not a dtype the kernel casts", op->u.cast.from,
				       op->u.cast.to);
		if (op->in[0].dtype != op->u.cast.from || op->out.dtype != op->u.cast.to)
			return op_fail(c, "operand dtypes %u -> %u disagree with the cast's %u -> %u", op->in[0].dtype,
				       op->out.dtype, op->u.cast.from, op->u.cast.to);
		if ((rc = check_ref(c, 0, op->count, gpu_dtype_bytes(op->u.cast.from), true)) < 0)
			return rc;
		return check_ref(c, OUT, op->count, gpu_dtype_bytes(op->u.cast.to), true);
	case GPU_OP_COPY: {
		/* whole 4-byte words when count allows (gpu_op_item), so then 4-byte alignment too */
		uint32_t unit = op->count % 4 == 0 ? 4 : 1;

		if (op->count == 0)
			return op_fail(c, "count 0");
		if ((rc = check_ref(c, 0, op->count / unit, unit, true)) < 0)
			return rc;
		return check_ref(c, OUT, op->count / unit, unit, true);
	}
	case GPU_OP_PERMUTE: {
		/* gpu_op_item moves 1 byte for uint8/int8/bool, 2 for float16, 8 for int64/double, else 4:
		 * only dtypes whose size is the one it moves */
		uint32_t eb = gpu_dtype_bytes(op->out.dtype);
		uint32_t in_bytes[1] = { eb };

		if (eb == 0)
			return op_fail(c, "out: dtype %u, not one of 1, 2, 4 or 8 bytes the kernel moves", op->out.dtype);
		if (op->in[0].dtype != op->out.dtype)
			return op_fail(c, "in0 dtype %u differs from out's %u", op->in[0].dtype, op->out.dtype);
		if ((rc = check_bcast_inputs(c, 1, in_bytes)) < 0)
			return rc;
		return check_ref(c, OUT, op->count, eb, true);
	}
	case GPU_OP_GATHER: {
		int64_t data_ext[3] = { op->u.gather.outer, op->u.gather.axis_len, op->u.gather.inner };
		int64_t out_ext[3] = { op->u.gather.outer, op->u.gather.nb_idx, op->u.gather.inner };
		uint32_t eb = op->u.gather.elem_bytes;
		uint64_t data_n, out_n;

		if (op->in[1].dtype != BW_DTYPE_INT64 && op->in[1].dtype != BW_DTYPE_INT32)
			return op_fail(c, "in1: indices dtype %u, not int64 (7) or int32 (6)", op->in[1].dtype);
		if (eb == 0)
			return op_fail(c, "elem_bytes 0");
		if (gpu_dtype_bytes(op->in[0].dtype) != 0 && gpu_dtype_bytes(op->in[0].dtype) != eb)
			return op_fail(c, "elem_bytes %u, in0's dtype %u has %u", eb, op->in[0].dtype,
				       gpu_dtype_bytes(op->in[0].dtype));
		if ((rc = positive_product(c, "data", data_ext, 3, &data_n)) < 0 ||
		    (rc = positive_product(c, "output", out_ext, 3, &out_n)) < 0)
			return rc;
		if (out_n != op->count)
			return op_fail(c, "count %llu is not outer * nb_idx * inner = %llu", (unsigned long long)op->count,
				       (unsigned long long)out_n);
		if ((rc = check_ref(c, 0, data_n, eb, true)) < 0 ||
		    (rc = check_ref(c, 1, (uint64_t)op->u.gather.nb_idx, gpu_dtype_bytes(op->in[1].dtype), true)) < 0)
			return rc;
		return check_ref(c, OUT, out_n, eb, true);
	}
	case GPU_OP_SOFTMAX:
	case GPU_OP_LAYERNORM: {
		int64_t ext[2] = { op->u.rows.rows, op->u.rows.cols };
		uint64_t n;

		if ((rc = positive_product(c, "rows, cols", ext, 2, &n)) < 0)
			return rc;
		/* SOFTMAX reads no in1/in2: whatever they say is ignored */
		if ((rc = check_float(c, 0)) < 0 || (rc = check_float(c, OUT)) < 0 ||
		    (op->code == GPU_OP_LAYERNORM && ((rc = check_float(c, 1)) < 0 || (rc = check_float(c, 2)) < 0)))
			return rc;
		if ((rc = check_ref(c, 0, n, FLT, true)) < 0)
			return rc;
		if (op->code == GPU_OP_LAYERNORM &&
		    ((rc = check_ref(c, 1, (uint64_t)op->u.rows.cols, FLT, true)) < 0 ||
		     (rc = check_ref(c, 2, (uint64_t)op->u.rows.cols, FLT, false)) < 0))
			return rc;
		return check_ref(c, OUT, n, FLT, true);
	}
	case GPU_OP_REDUCE: {
		int64_t ext[3] = { op->u.reduce.outer, op->u.reduce.reduced, op->u.reduce.inner };
		int64_t out_ext[2] = { op->u.reduce.outer, op->u.reduce.inner };
		uint64_t n, out_n;

		if (op->fn >= GPU_REDUCE_COUNT)
			return op_fail(c, "function %u unknown", op->fn);
		if ((rc = positive_product(c, "outer, reduced, inner", ext, 3, &n)) < 0 ||
		    (rc = positive_product(c, "outer, inner", out_ext, 2, &out_n)) < 0)
			return rc;
		if ((rc = check_float(c, 0)) < 0 || (rc = check_float(c, OUT)) < 0)
			return rc;
		if ((rc = check_ref(c, 0, n, FLT, true)) < 0)
			return rc;
		return check_ref(c, OUT, out_n, FLT, true);
	}
	case GPU_OP_GEMM:
		return check_gemm(c);
	case GPU_OP_CONV:
	case GPU_OP_POOL:
		return check_window(c);
	default:
		return op_fail(c, "unknown op code %u", op->code);
	}
}

/* Graph inputs (out == 0) or outputs of one size: each batch * row_bytes bytes at its offset. */
static int check_tensors(const struct gpu_program *prog, const struct gpu_program_size *sz, int outputs, char *err,
			 size_t cap)
{
	uint32_t nb = outputs ? prog->nb_outputs : prog->nb_inputs;
	const uint32_t *row_bytes = outputs ? prog->output_row_bytes : prog->input_row_bytes;
	const uint64_t *offset = outputs ? sz->output_offset : sz->input_offset;
	const char *what = outputs ? "output" : "input";

	for (uint32_t t = 0; t < nb; t++) {
		uint64_t bytes = (uint64_t)sz->batch * row_bytes[t], end;

		if (row_bytes[t] == 0) {
			gpu_err(err, cap, "size %u: graph %s %u has 0 bytes per row", sz->batch, what, t);
			return -EINVAL;
		}
		if (offset[t] % GPU_PROG_TENSOR_ALIGN != 0) {
			gpu_err(err, cap, "size %u: graph %s %u at offset %llu, not a multiple of %u", sz->batch, what, t,
				(unsigned long long)offset[t], GPU_PROG_TENSOR_ALIGN);
			return -EINVAL;
		}
		if (__builtin_add_overflow(offset[t], bytes, &end) || end > sz->arena_bytes) {
			gpu_err(err, cap, "size %u: graph %s %u: %u rows of %u bytes at offset %llu past the arena (%llu bytes)",
				sz->batch, what, t, sz->batch, row_bytes[t], (unsigned long long)offset[t],
				(unsigned long long)sz->arena_bytes);
			return -EINVAL;
		}
	}
	return 0;
}

int gpu_program_check(const struct gpu_program *prog, char *err, size_t cap)
{
	if (prog == NULL) {
		gpu_err(err, cap, "no program");
		return -EINVAL;
	}
	if (memchr(prog->name, '\0', sizeof(prog->name)) == NULL) {
		gpu_err(err, cap, "program name not terminated within %u bytes", GPU_PROG_NAME_MAX);
		return -EINVAL;
	}
	if (prog->nb_inputs > GPU_PROG_TENSORS_MAX || prog->nb_outputs > GPU_PROG_TENSORS_MAX) {
		gpu_err(err, cap, "program %s: %u inputs and %u outputs, at most %u each", prog->name, prog->nb_inputs,
			prog->nb_outputs, GPU_PROG_TENSORS_MAX);
		return -EINVAL;
	}
	if (prog->nb_sizes == 0 || prog->nb_sizes > GPU_PROG_SIZES_MAX) {
		gpu_err(err, cap, "program %s: %u batch sizes, 1 to %u", prog->name, prog->nb_sizes, GPU_PROG_SIZES_MAX);
		return -EINVAL;
	}
	if (prog->max_segments == 0) {
		gpu_err(err, cap, "program %s: max_segments 0: a batch table could hold no segment", prog->name);
		return -EINVAL;
	}
	if (prog->const_bytes > 0 && prog->consts == NULL) {
		gpu_err(err, cap, "program %s: %llu bytes of constants and no data", prog->name,
			(unsigned long long)prog->const_bytes);
		return -EINVAL;
	}
	for (uint32_t s = 0; s < prog->nb_sizes; s++) {
		const struct gpu_program_size *sz = &prog->sizes[s];
		struct check_ctx c = { .err = err, .cap = cap, .prog = prog, .sz = sz };
		int rc;

		if (sz->batch == 0 || (s > 0 && sz->batch <= prog->sizes[s - 1].batch)) {
			gpu_err(err, cap, "program %s: size %u is batch %u after %u: sizes must be non-zero and ascending",
				prog->name, s, sz->batch, s > 0 ? prog->sizes[s - 1].batch : 0);
			return -EINVAL;
		}
		if (sz->arena_bytes == 0 || sz->arena_bytes % GPU_PROG_ALIGN != 0) {
			gpu_err(err, cap, "size %u: arena of %llu bytes, not a non-zero multiple of %u", sz->batch,
				(unsigned long long)sz->arena_bytes, GPU_PROG_ALIGN);
			return -EINVAL;
		}
		if (sz->nb_ops > 0 && sz->ops == NULL) {
			gpu_err(err, cap, "size %u: %u ops and no list", sz->batch, sz->nb_ops);
			return -EINVAL;
		}
		if ((rc = check_tensors(prog, sz, 0, err, cap)) < 0 || (rc = check_tensors(prog, sz, 1, err, cap)) < 0)
			return rc;
		for (c.op_index = 0; c.op_index < sz->nb_ops; c.op_index++) {
			uint32_t code = sz->ops[c.op_index].code;

			c.code_name = code < GPU_OP_CODE_COUNT && g_code_names[code] != NULL ? g_code_names[code] : "?";
			rc = check_op(&c);
			if (rc < 0)
				return rc;
		}
	}
	return 0;
}

struct gpu_program *gpu_program_copy(const struct gpu_program *prog)
{
	struct gpu_program *copy = calloc(1, sizeof(*copy));
	void *consts = NULL;

	if (copy == NULL)
		return NULL;
	*copy = *prog;
	copy->consts = NULL;
	for (uint32_t s = 0; s < copy->nb_sizes; s++)
		copy->sizes[s].ops = NULL;
	/* aligned as a device allocation is, so a constant's alignment is its offset's */
	if (prog->const_bytes > 0) {
		size_t bytes = (prog->const_bytes + GPU_PROG_ALIGN - 1) & ~(size_t)(GPU_PROG_ALIGN - 1);

		consts = aligned_alloc(GPU_PROG_ALIGN, bytes);
		if (consts == NULL)
			goto fail;
		memcpy(consts, prog->consts, prog->const_bytes);
		copy->consts = consts;
	}
	for (uint32_t s = 0; s < copy->nb_sizes; s++) {
		struct gpu_op *ops;

		if (prog->sizes[s].nb_ops == 0)
			continue;
		ops = malloc(prog->sizes[s].nb_ops * sizeof(*ops));
		if (ops == NULL)
			goto fail;
		memcpy(ops, prog->sizes[s].ops, prog->sizes[s].nb_ops * sizeof(*ops));
		copy->sizes[s].ops = ops;
	}
	return copy;
fail:
	gpu_program_free(copy);
	errno = ENOMEM;
	return NULL;
}

void gpu_program_free(struct gpu_program *prog)
{
	if (prog == NULL)
		return;
	for (uint32_t s = 0; s < prog->nb_sizes && s < GPU_PROG_SIZES_MAX; s++)
		free((void *)prog->sizes[s].ops);
	free((void *)prog->consts);
	free(prog);
}
