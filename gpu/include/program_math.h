/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What each op of a device program (program.h) computes, one work item at a time, written once for
 * both sides: BW_HD makes every function __host__ __device__ under nvcc, so the CUDA module's generic
 * kernels run exactly the code the fake device runs on the CPU in CI (tests/gpu/test_program.c checks
 * it against the runtime's CPU kernels). An op is gpu_op_items() independent items; item i of:
 *   UNARY, BINARY, WHERE, CAST, PERMUTE, GATHER  output element i
 *   COPY                                          4-byte word i (byte i when count is not a multiple of 4)
 *   SOFTMAX, LAYERNORM                            row i (one thread per row)
 *   REDUCE                                        output element i
 *   GEMM                                          output element i (the fake's; the CUDA module calls cuBLASLt)
 *   CONV, POOL                                    output element i (a direct convolution / window: the
 *                                                 fake's, and the CUDA module's when cuDNN is absent)
 * The segments of a batch table are copied as copy_plan.h says.
 *
 * Float operands are float32 or float16 (a model compiled with GPU_PRECISION_FP16), each operand by its
 * own dtype: items load them into float (gpu_ldf), compute in float and round the result once when
 * they store it (gpu_stf), so half precision costs storage, never accumulation.
 */
#ifndef BW_GPU_PROGRAM_MATH_H
#define BW_GPU_PROGRAM_MATH_H

#include <stddef.h>
#include <stdint.h>

#include <batchwire/dtype.h> /* operands' dtypes: enum bw_dtype's numbers */
#include <batchwire/half.h>  /* float16 operands: the same conversion as the CPU kernels' */

#include "elementwise_math.h"
#include "program.h"

/** \return bytes of one element of a dtype the device kernels handle; 0 for any other. */
static inline BW_HD uint32_t gpu_dtype_bytes(uint32_t dtype)
{
	switch (dtype) {
	case BW_DTYPE_UINT8: case BW_DTYPE_INT8: case BW_DTYPE_BOOL: return 1;
	case BW_DTYPE_FLOAT16: return 2;
	case BW_DTYPE_FLOAT: case BW_DTYPE_INT32: return 4;
	case BW_DTYPE_INT64: case BW_DTYPE_DOUBLE: return 8;
	default: return 0;
	}
}

/* Element i of a float operand (float32 or float16), as float. */
static inline BW_HD float gpu_ldf(uint32_t dtype, const uint8_t *p, uint64_t i)
{
	return dtype == BW_DTYPE_FLOAT16 ? bw_half_to_float(((const uint16_t *)p)[i]) : ((const float *)p)[i];
}

static inline BW_HD void gpu_stf(uint32_t dtype, uint8_t *p, uint64_t i, float v)
{
	if (dtype == BW_DTYPE_FLOAT16)
		((uint16_t *)p)[i] = bw_float_to_half(v);
	else
		((float *)p)[i] = v;
}

static inline BW_HD uint8_t *gpu_ref_addr(const struct gpu_ref *r, uint8_t *arena, const uint8_t *consts)
{
	return r->space == GPU_SPACE_ARENA ? arena + r->offset :
	       r->space == GPU_SPACE_CONST ? (uint8_t *)(uintptr_t)(consts + r->offset) : NULL;
}

/*
 * A launch's fault pair: fault[0] the enum gpu_fault, fault[1] the op that raised it. The fake passes
 * &table->fault (fault_op follows it); the CUDA module a pair in device memory, which its completion
 * kernel copies into the table: device atomics on mapped host memory are not reliable over PCIe.
 * The first fault of a launch wins: later ones would only hide its cause.
 */
static inline BW_HD void gpu_raise_fault(uint32_t *fault, uint32_t code, uint32_t op_index)
{
#ifdef __CUDA_ARCH__
	if (atomicCAS(&fault[0], 0u, code) == 0u)
		fault[1] = op_index;
#else
	uint32_t none = 0;

	if (__atomic_compare_exchange_n(&fault[0], &none, code, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		fault[1] = op_index;
#endif
}

/** \return the op's independent work items (see the top of this file). */
static inline BW_HD uint64_t gpu_op_items(const struct gpu_op *op)
{
	switch (op->code) {
	case GPU_OP_COPY:
		return op->count % 4 == 0 ? op->count / 4 : op->count;
	case GPU_OP_SOFTMAX:
	case GPU_OP_LAYERNORM:
		return (uint64_t)op->u.rows.rows;
	case GPU_OP_REDUCE:
		return (uint64_t)(op->u.reduce.outer * op->u.reduce.inner);
	case GPU_OP_GEMM:
		return (uint64_t)(op->u.gemm.batch * op->u.gemm.m * op->u.gemm.n);
	default:
		return op->count;
	}
}

/* The element offset of output element i in broadcast input k. */
static inline BW_HD int64_t gpu_bcast_offset(const struct gpu_op *op, unsigned int k, uint64_t i)
{
	int64_t off = 0;

	for (int d = (int)op->u.bcast.rank - 1; d >= 0; d--) {
		int64_t dim = op->u.bcast.dims[d];
		int64_t idx = (int64_t)(i % (uint64_t)dim);

		i /= (uint64_t)dim;
		off += idx * op->u.bcast.strides[k][d];
	}
	return off;
}

static inline BW_HD float gpu_unary(uint32_t fn, float x, float alpha, float beta)
{
	switch (fn) {
	case GPU_UNARY_RELU: return bw_relu(x);
	case GPU_UNARY_LEAKY_RELU: return bw_leaky_relu(x, alpha);
	case GPU_UNARY_CLIP: return bw_clip(x, alpha, beta);
	case GPU_UNARY_SIGMOID: return bw_sigmoid(x);
	case GPU_UNARY_TANH: return bw_tanh(x);
	case GPU_UNARY_GELU: return bw_gelu(x);
	case GPU_UNARY_EXP: return bw_exp(x);
	case GPU_UNARY_ERF: return bw_erf(x);
	case GPU_UNARY_SQRT: return bw_sqrt(x);
	case GPU_UNARY_RECIPROCAL: return bw_reciprocal(x);
	case GPU_UNARY_NEG: return bw_neg(x);
	case GPU_UNARY_ABS: return bw_abs(x);
	default: return x; /* IDENTITY; program_load refuses unknown functions */
	}
}

static inline BW_HD float gpu_binary(uint32_t fn, float a, float b)
{
	switch (fn) {
	case GPU_BINARY_ADD: return bw_add(a, b);
	case GPU_BINARY_SUB: return bw_sub(a, b);
	case GPU_BINARY_MUL: return bw_mul(a, b);
	case GPU_BINARY_DIV: return bw_div(a, b);
	case GPU_BINARY_POW: return bw_pow(a, b);
	case GPU_BINARY_MAX: return bw_max(a, b);
	default: return bw_min(a, b);
	}
}

/* Casts go through double (exact for every source but int64 beyond 2^53, as the CPU kernel's). */
static inline BW_HD double gpu_load_scalar(uint32_t dtype, const uint8_t *p, uint64_t i)
{
	switch (dtype) {
	case BW_DTYPE_FLOAT: return ((const float *)p)[i];
	case BW_DTYPE_FLOAT16: return bw_half_to_float(((const uint16_t *)p)[i]);
	case BW_DTYPE_DOUBLE: return ((const double *)p)[i];
	case BW_DTYPE_INT64: return (double)((const int64_t *)p)[i];
	case BW_DTYPE_INT32: return ((const int32_t *)p)[i];
	case BW_DTYPE_INT8: return ((const int8_t *)p)[i];
	case BW_DTYPE_BOOL: return p[i] != 0;
	default: return p[i]; /* U8 */
	}
}

static inline BW_HD void gpu_store_scalar(uint32_t dtype, uint8_t *p, uint64_t i, double v)
{
	switch (dtype) {
	case BW_DTYPE_FLOAT: ((float *)p)[i] = (float)v; break;
	case BW_DTYPE_FLOAT16: ((uint16_t *)p)[i] = bw_float_to_half((float)v); break;
	case BW_DTYPE_DOUBLE: ((double *)p)[i] = v; break;
	case BW_DTYPE_INT64: ((int64_t *)p)[i] = (int64_t)v; break;
	case BW_DTYPE_INT32: ((int32_t *)p)[i] = (int32_t)v; break;
	case BW_DTYPE_INT8: ((int8_t *)p)[i] = (int8_t)v; break;
	case BW_DTYPE_BOOL: p[i] = v != 0.0; break;
	default: p[i] = (uint8_t)v; break;
	}
}

/* A float cast keeps float's own rounding (no detour through double would change it: exact). */
static inline BW_HD int gpu_cast_dtype_ok(uint32_t d)
{
	return d == BW_DTYPE_FLOAT || d == BW_DTYPE_FLOAT16 || d == BW_DTYPE_DOUBLE || d == BW_DTYPE_INT64 || d == BW_DTYPE_INT32 ||
	       d == BW_DTYPE_INT8 || d == BW_DTYPE_UINT8 || d == BW_DTYPE_BOOL;
}

static inline BW_HD void gpu_gather_item(const struct gpu_op *op, const uint8_t *data, const uint8_t *idx,
					 uint8_t *out, uint64_t i, uint32_t *fault, uint32_t op_index)
{
	uint64_t inner = (uint64_t)op->u.gather.inner, nb_idx = (uint64_t)op->u.gather.nb_idx;
	uint64_t in_i = i % inner, j = (i / inner) % nb_idx, o = i / inner / nb_idx;
	uint32_t eb = op->u.gather.elem_bytes;
	int64_t k = op->in[1].dtype == BW_DTYPE_INT64 ? ((const int64_t *)idx)[j] : ((const int32_t *)idx)[j];

	if (k < 0)
		k += op->u.gather.axis_len;
	if (k < 0 || k >= op->u.gather.axis_len) {
		gpu_raise_fault(fault, GPU_FAULT_INDEX, op_index);
		for (uint32_t b = 0; b < eb; b++)
			out[i * eb + b] = 0;
		return;
	}
	const uint8_t *src = data + ((o * (uint64_t)op->u.gather.axis_len + (uint64_t)k) * inner + in_i) * eb;

	for (uint32_t b = 0; b < eb; b++)
		out[i * eb + b] = src[b];
}

/* Softmax of row r: exp is computed twice rather than stored, so a float16 output rounds once. */
static inline BW_HD void gpu_softmax_row(const struct gpu_op *op, const uint8_t *x, uint8_t *y, uint64_t r)
{
	uint32_t xt = op->in[0].dtype, yt = op->out.dtype;
	uint64_t cols = (uint64_t)op->u.rows.cols, base = r * cols;
	float max = gpu_ldf(xt, x, base), sum = 0.0f;

	for (uint64_t c = 1; c < cols; c++) {
		float v = gpu_ldf(xt, x, base + c);

		max = v > max ? v : max;
	}
	for (uint64_t c = 0; c < cols; c++)
		sum += expf(gpu_ldf(xt, x, base + c) - max);
	for (uint64_t c = 0; c < cols; c++)
		gpu_stf(yt, y, base + c, expf(gpu_ldf(xt, x, base + c) - max) / sum);
}

static inline BW_HD void gpu_layernorm_row(const struct gpu_op *op, const uint8_t *x, const uint8_t *scale,
					   const uint8_t *bias, uint8_t *y, uint64_t r)
{
	uint32_t xt = op->in[0].dtype, st = op->in[1].dtype, bt = op->in[2].dtype, yt = op->out.dtype;
	uint64_t cols = (uint64_t)op->u.rows.cols, base = r * cols;
	float mean = 0.0f, var = 0.0f, inv;

	for (uint64_t c = 0; c < cols; c++)
		mean += gpu_ldf(xt, x, base + c);
	mean /= (float)cols;
	for (uint64_t c = 0; c < cols; c++) {
		float d = gpu_ldf(xt, x, base + c) - mean;

		var += d * d;
	}
	var /= (float)cols;
	inv = 1.0f / sqrtf(var + op->alpha);
	for (uint64_t c = 0; c < cols; c++)
		gpu_stf(yt, y, base + c,
			(gpu_ldf(xt, x, base + c) - mean) * inv * gpu_ldf(st, scale, c) +
				(bias != NULL ? gpu_ldf(bt, bias, c) : 0.0f));
}

static inline BW_HD float gpu_reduce_item(const struct gpu_op *op, const uint8_t *x, uint64_t i)
{
	uint32_t xt = op->in[0].dtype;
	uint64_t inner = (uint64_t)op->u.reduce.inner, o = i / inner, in_i = i % inner;
	uint64_t base = o * (uint64_t)op->u.reduce.reduced * inner + in_i;
	float acc = gpu_ldf(xt, x, base);

	for (int64_t r = 1; r < op->u.reduce.reduced; r++) {
		float v = gpu_ldf(xt, x, base + (uint64_t)r * inner);

		switch (op->fn) {
		case GPU_REDUCE_MAX: acc = bw_max(acc, v); break;
		case GPU_REDUCE_MIN: acc = bw_min(acc, v); break;
		default: acc += v; break;
		}
	}
	return op->fn == GPU_REDUCE_MEAN ? acc / (float)op->u.reduce.reduced : acc;
}

static inline BW_HD float gpu_gemm_item(const struct gpu_op *op, const uint8_t *a, const uint8_t *b,
					const uint8_t *bias, uint64_t i)
{
	uint32_t at = op->in[0].dtype, bt = op->in[1].dtype;
	int64_t m = op->u.gemm.m, n = op->u.gemm.n, k = op->u.gemm.k;
	int64_t col = (int64_t)(i % (uint64_t)n), row = (int64_t)((i / (uint64_t)n) % (uint64_t)m);
	int64_t bat = (int64_t)(i / (uint64_t)n / (uint64_t)m);
	uint64_t ab = (uint64_t)(bat * op->u.gemm.stride_a), bb = (uint64_t)(bat * op->u.gemm.stride_b);
	float acc = 0.0f;

	for (int64_t kk = 0; kk < k; kk++) {
		float av = gpu_ldf(at, a, ab + (uint64_t)(op->u.gemm.trans_a ? kk * m + row : row * k + kk));
		float bv = gpu_ldf(bt, b, bb + (uint64_t)(op->u.gemm.trans_b ? col * k + kk : kk * n + col));

		acc += av * bv;
	}
	acc *= op->alpha;
	if (bias != NULL)
		acc += gpu_ldf(op->in[2].dtype, bias, (uint64_t)col);
	return op->fn == GPU_ACT_RELU ? bw_relu(acc) : acc;
}

/* Output element i's coordinates: NCHW [n][ch][y][x] or NHWC [n][y][x][ch]. */
static inline BW_HD void gpu_window_coords(const struct gpu_op *op, int64_t channels, uint64_t i, int64_t *b,
					   int64_t *ch, int64_t *y, int64_t *x)
{
	uint64_t ow = (uint64_t)op->u.conv.ow, oh = (uint64_t)op->u.conv.oh, nc = (uint64_t)channels;

	if (op->u.conv.nhwc) {
		*ch = (int64_t)(i % nc);
		*x = (int64_t)((i / nc) % ow);
		*y = (int64_t)((i / nc / ow) % oh);
		*b = (int64_t)(i / nc / ow / oh);
	} else {
		*x = (int64_t)(i % ow);
		*y = (int64_t)((i / ow) % oh);
		*ch = (int64_t)((i / ow / oh) % nc);
		*b = (int64_t)(i / ow / oh / nc);
	}
}

/* The input element (b, ch, iy, ix) of a window op, in its layout. */
static inline BW_HD uint64_t gpu_window_input(const struct gpu_op *op, int64_t b, int64_t ch, int64_t iy, int64_t ix)
{
	int64_t c = op->u.conv.c, h = op->u.conv.h, wd = op->u.conv.w;

	return (uint64_t)(op->u.conv.nhwc ? ((b * h + iy) * wd + ix) * c + ch : ((b * c + ch) * h + iy) * wd + ix);
}

/* CONV's output element i: [n][m][oh][ow] (NHWC: [n][oh][ow][m]). The sum runs in the same order in
 * both layouts, so they agree bit for bit. */
static inline BW_HD float gpu_conv_item(const struct gpu_op *op, const uint8_t *x, const uint8_t *w,
					const uint8_t *bias, const uint8_t *z, uint64_t i)
{
	uint32_t xt = op->in[0].dtype, wt = op->in[1].dtype;
	int64_t m = op->u.conv.m, c = op->u.conv.c, h = op->u.conv.h, wd = op->u.conv.w;
	int64_t kh = op->u.conv.kh, kw = op->u.conv.kw;
	int64_t cpg = c / op->u.conv.group, mpg = m / op->u.conv.group, b, co, oy, ox;
	float acc = 0.0f;

	gpu_window_coords(op, m, i, &b, &co, &oy, &ox);
	for (int64_t ci = 0; ci < cpg; ci++) {
		int64_t cin = (co / mpg) * cpg + ci;

		for (int64_t ky = 0; ky < kh; ky++) {
			int64_t iy = oy * op->u.conv.stride_h - op->u.conv.pad_h + ky * op->u.conv.dil_h;

			if (iy < 0 || iy >= h)
				continue;
			for (int64_t kx = 0; kx < kw; kx++) {
				int64_t ix = ox * op->u.conv.stride_w - op->u.conv.pad_w + kx * op->u.conv.dil_w;
				uint64_t wi = (uint64_t)(op->u.conv.nhwc ? ((co * kh + ky) * kw + kx) * cpg + ci :
									   ((co * cpg + ci) * kh + ky) * kw + kx);

				if (ix >= 0 && ix < wd)
					acc += gpu_ldf(xt, x, gpu_window_input(op, b, cin, iy, ix)) * gpu_ldf(wt, w, wi);
			}
		}
	}
	if (bias != NULL)
		acc += gpu_ldf(op->in[2].dtype, bias, (uint64_t)co);
	if (z != NULL)
		acc += gpu_ldf(op->in[3].dtype, z, i);
	return op->fn == GPU_ACT_RELU ? bw_relu(acc) : acc;
}

/* POOL's output element i: [n][c][oh][ow] (NHWC: [n][oh][ow][c]), over the window of input channel
 * (b, ch). */
static inline BW_HD float gpu_pool_item(const struct gpu_op *op, const uint8_t *x, uint64_t i)
{
	uint32_t xt = op->in[0].dtype;
	int64_t h = op->u.conv.h, wd = op->u.conv.w, b, ch, oy, ox;
	float acc = op->fn == GPU_POOL_MAX ? -INFINITY : 0.0f;
	int64_t cells = 0;

	gpu_window_coords(op, op->u.conv.c, i, &b, &ch, &oy, &ox);

	for (int64_t ky = 0; ky < op->u.conv.kh; ky++) {
		int64_t iy = oy * op->u.conv.stride_h - op->u.conv.pad_h + ky * op->u.conv.dil_h;

		for (int64_t kx = 0; kx < op->u.conv.kw; kx++) {
			int64_t ix = ox * op->u.conv.stride_w - op->u.conv.pad_w + kx * op->u.conv.dil_w;
			float v;

			if (iy < 0 || iy >= h || ix < 0 || ix >= wd)
				continue;
			v = gpu_ldf(xt, x, gpu_window_input(op, b, ch, iy, ix));
			acc = op->fn == GPU_POOL_MAX ? bw_max(acc, v) : acc + v;
			cells++;
		}
	}
	if (op->fn == GPU_POOL_MAX)
		return acc;
	return acc / (float)(op->u.conv.count_include_pad ? op->u.conv.kh * op->u.conv.kw : (cells > 0 ? cells : 1));
}

/**
 * Runs work item i of op (op_index: its place in the program, for faults) over one arena; data faults
 * go to the launch's fault pair (gpu_raise_fault).
 * GEMM's items index the output row-major: out[bat][row][col] is item (bat * m + row) * n + col.
 */
static inline BW_HD void gpu_op_item(const struct gpu_op *op, uint32_t op_index, uint8_t *arena,
				     const uint8_t *consts, uint32_t *fault, uint64_t i)
{
	const uint8_t *in0 = gpu_ref_addr(&op->in[0], arena, consts);
	const uint8_t *in1 = gpu_ref_addr(&op->in[1], arena, consts);
	const uint8_t *in2 = gpu_ref_addr(&op->in[2], arena, consts);
	const uint8_t *in3 = gpu_ref_addr(&op->in[3], arena, consts);
	uint8_t *out = gpu_ref_addr(&op->out, arena, consts);
	uint32_t ot = op->out.dtype;

	switch (op->code) {
	case GPU_OP_UNARY:
		gpu_stf(ot, out, i, gpu_unary(op->fn, gpu_ldf(op->in[0].dtype, in0, i), op->alpha, op->beta));
		break;
	case GPU_OP_BINARY:
		gpu_stf(ot, out, i,
			gpu_binary(op->fn, gpu_ldf(op->in[0].dtype, in0, (uint64_t)gpu_bcast_offset(op, 0, i)),
				   gpu_ldf(op->in[1].dtype, in1, (uint64_t)gpu_bcast_offset(op, 1, i))));
		break;
	case GPU_OP_WHERE:
		gpu_stf(ot, out, i,
			bw_where(in0[gpu_bcast_offset(op, 0, i)],
				 gpu_ldf(op->in[1].dtype, in1, (uint64_t)gpu_bcast_offset(op, 1, i)),
				 gpu_ldf(op->in[2].dtype, in2, (uint64_t)gpu_bcast_offset(op, 2, i))));
		break;
	case GPU_OP_CAST:
		gpu_store_scalar(op->u.cast.to, out, i, gpu_load_scalar(op->u.cast.from, in0, i));
		break;
	case GPU_OP_COPY:
		if (op->count % 4 == 0)
			((uint32_t *)out)[i] = ((const uint32_t *)in0)[i];
		else
			out[i] = in0[i];
		break;
	case GPU_OP_PERMUTE: {
		/* elements of 1, 2, 4 or 8 bytes, by the output's dtype */
		int64_t src = gpu_bcast_offset(op, 0, i);

		if (ot == BW_DTYPE_UINT8 || ot == BW_DTYPE_INT8 || ot == BW_DTYPE_BOOL)
			out[i] = in0[src];
		else if (ot == BW_DTYPE_FLOAT16)
			((uint16_t *)out)[i] = ((const uint16_t *)in0)[src];
		else if (ot == BW_DTYPE_INT64 || ot == BW_DTYPE_DOUBLE)
			((uint64_t *)out)[i] = ((const uint64_t *)in0)[src];
		else
			((uint32_t *)out)[i] = ((const uint32_t *)in0)[src];
		break;
	}
	case GPU_OP_GATHER:
		gpu_gather_item(op, in0, in1, out, i, fault, op_index);
		break;
	case GPU_OP_SOFTMAX:
		gpu_softmax_row(op, in0, out, i);
		break;
	case GPU_OP_LAYERNORM:
		gpu_layernorm_row(op, in0, in1, in2, out, i);
		break;
	case GPU_OP_REDUCE:
		gpu_stf(ot, out, i, gpu_reduce_item(op, in0, i));
		break;
	case GPU_OP_GEMM: {
		/* batch b of the output starts at b * stride_c, as cuBLASLt places it */
		uint64_t mn = (uint64_t)(op->u.gemm.m * op->u.gemm.n);

		gpu_stf(ot, out, (i / mn) * (uint64_t)op->u.gemm.stride_c + i % mn, gpu_gemm_item(op, in0, in1, in2, i));
		break;
	}
	case GPU_OP_CONV:
		gpu_stf(ot, out, i, gpu_conv_item(op, in0, in1, in2, in3, i));
		break;
	case GPU_OP_POOL:
		gpu_stf(ot, out, i, gpu_pool_item(op, in0, i));
		break;
	default:
		break;
	}
}

#endif /* BW_GPU_PROGRAM_MATH_H */
