/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A device program: what the host compiles a model into and a device module runs.
 * One program holds the model at every allowed batch size: per size, a list of ops (struct gpu_op)
 * over one arena, with the graph's inputs and outputs at fixed arena offsets; the constants (weights,
 * folded values) are one blob shared by every size. Plain C structs with no pointers into the host's
 * memory that a kernel follows: an operand is a (space, offset) pair, resolved on the device against
 * the arena of one (size, slot) and the constants' device copy. So the same struct goes by value to a
 * CUDA kernel, to the fake device's CPU loop, and into a CUDA graph captured once per (size, slot).
 *
 * The batch table (struct gpu_batch_table) is the one thing that changes per launch: it lives in
 * mapped pinned host memory at an address fixed when the graph is captured; the host writes the
 * batch's segments (device addresses of request rows in registered packet buffers, and of the reply
 * areas) and a generation into it, then launches; the graph gathers, runs the ops, scatters, and
 * writes the generation into the slot's completion word. Kernels report data faults (an index out of
 * range) in the table's fault word rather than failing the context.
 *
 * No CUDA, no DPDK, no runtime headers: included by gpu.h, the modules, and nvcc-compiled kernels.
 */
#ifndef BW_GPU_PROGRAM_H
#define BW_GPU_PROGRAM_H

#include <stdint.h>

#define GPU_PROG_RANK_MAX 8      /* BW_MAX_RANK */
#define GPU_PROG_TENSORS_MAX 8   /* BW_BATCH_TENSORS_MAX: graph inputs, and outputs */
#define GPU_PROG_SIZES_MAX 32    /* RT_BATCH_SIZES_MAX */
#define GPU_PROG_NAME_MAX 64
#define GPU_OP_INPUTS_MAX 4      /* CONV's x, weights, bias and residual */
#define GPU_PROG_ALIGN 256       /* bytes: arenas, the constants blob and each constant in it */
#define GPU_PROG_TENSOR_ALIGN 64 /* bytes: arena offsets of graph inputs and outputs (the runtime's
				  * planner puts every tensor on 64 bytes) */

/* Where an operand lies. */
enum gpu_space {
	GPU_SPACE_NONE = 0,  /* an optional operand left out */
	GPU_SPACE_ARENA = 1, /* offset into the arena of the (size, slot) being run */
	GPU_SPACE_CONST = 2, /* offset into the program's constants */
};

struct gpu_ref {
	uint32_t space;   /* enum gpu_space */
	uint32_t dtype;   /* ONNX TensorProto.DataType (enum bw_dtype) */
	uint64_t offset;  /* bytes */
};

enum gpu_op_code {
	GPU_OP_UNARY = 1,  /* out[i] = fn(in0[i]), float; alpha/beta: LeakyRelu's alpha, Clip's lo/hi */
	GPU_OP_BINARY,     /* out[i] = fn(in0[.], in1[.]), float, broadcast by strides (u.bcast) */
	GPU_OP_WHERE,      /* out[i] = in0[.] (bool) ? in1[.] : in2[.], float, broadcast (u.bcast) */
	GPU_OP_CAST,       /* out[i] = (to) in0[i]; u.cast */
	GPU_OP_COPY,       /* count bytes from in0 to out (Reshape, Flatten, Squeeze, Unsqueeze, Identity) */
	GPU_OP_PERMUTE,    /* out[i] = in0[sum idx_d * strides[d]]: Transpose, Expand (u.bcast: a_strides) */
	GPU_OP_GATHER,     /* Gather on an axis; u.gather; indices int64 or int32 in in1 */
	GPU_OP_SOFTMAX,    /* over the last axis: u.rows */
	GPU_OP_LAYERNORM,  /* over the last axis: in1 scale, in2 bias (or NONE); alpha = epsilon; u.rows */
	GPU_OP_REDUCE,     /* u.reduce: out[o, i] = fn over r of in0[o, r, i] */
	GPU_OP_GEMM,       /* u.gemm: out[b] = act(alpha * op(A[b]) op(B[b]) + bias), A in0, B in1, bias in2 */
	GPU_OP_CONV,       /* u.conv, 2-D NCHW (or NHWC: u.conv.nhwc): out = act(conv(in0, in1 weights [m][c/group][kh][kw]) + in2
			    * (bias, m floats, or NONE) + in3 (a residual of out's shape, or NONE)); fn:
			    * gpu_activation */
	GPU_OP_POOL,       /* u.conv's geometry (m = c, group = c), 2-D NCHW or NHWC: fn gpu_pool_fn over each
			    * window */
	GPU_OP_CODE_COUNT
};

enum gpu_unary_fn {
	GPU_UNARY_RELU, GPU_UNARY_LEAKY_RELU, GPU_UNARY_CLIP, GPU_UNARY_SIGMOID, GPU_UNARY_TANH,
	GPU_UNARY_GELU, GPU_UNARY_EXP, GPU_UNARY_ERF, GPU_UNARY_SQRT, GPU_UNARY_RECIPROCAL, GPU_UNARY_NEG,
	GPU_UNARY_ABS, GPU_UNARY_IDENTITY, GPU_UNARY_COUNT
};

enum gpu_binary_fn {
	GPU_BINARY_ADD, GPU_BINARY_SUB, GPU_BINARY_MUL, GPU_BINARY_DIV, GPU_BINARY_POW, GPU_BINARY_MAX,
	GPU_BINARY_MIN, GPU_BINARY_COUNT
};

enum gpu_reduce_fn { GPU_REDUCE_SUM, GPU_REDUCE_MEAN, GPU_REDUCE_MAX, GPU_REDUCE_MIN, GPU_REDUCE_COUNT };

enum gpu_activation { GPU_ACT_NONE, GPU_ACT_RELU, GPU_ACT_COUNT };

/* POOL: MAX skips padding; AVG divides by the window (count_include_pad) or by its cells inside. */
enum gpu_pool_fn { GPU_POOL_MAX, GPU_POOL_AVG, GPU_POOL_COUNT };

/* Faults kernels raise in gpu_batch_table.fault (the first one wins; fault_op says which op). */
enum gpu_fault {
	GPU_FAULT_NONE = 0,
	GPU_FAULT_INDEX = 1, /* a Gather index out of range: that output element is written 0 */
};

/*
 * One op. Element counts and shapes are those of the batch size the op belongs to. Strides and
 * offsets count elements of the operand's dtype, except COPY's count (bytes).
 */
struct gpu_op {
	uint32_t code;            /* enum gpu_op_code */
	uint32_t fn;              /* gpu_unary_fn, gpu_binary_fn, gpu_reduce_fn, gpu_pool_fn; GEMM, CONV:
				   * gpu_activation */
	struct gpu_ref in[GPU_OP_INPUTS_MAX];
	struct gpu_ref out;
	uint64_t count;           /* output elements (COPY: bytes) */
	float alpha, beta;        /* UNARY: LeakyRelu alpha, Clip lo (alpha) and hi (beta); LAYERNORM: epsilon
				   * (alpha); GEMM: alpha (beta unused: a C input becomes a BINARY op) */
	union {
		/* BINARY, WHERE, PERMUTE: the output's shape and, for each input, its element stride
		 * along each output dimension (0 where it is broadcast) */
		struct {
			uint32_t rank;
			int64_t dims[GPU_PROG_RANK_MAX];
			int64_t strides[3][GPU_PROG_RANK_MAX];
		} bcast;
		struct {
			uint32_t from, to; /* dtypes: float, double, int64, int32, uint8, int8, bool */
		} cast;
		/* out[o, j, i] = data[o, idx[j], i]: data in0 [outer, axis_len, inner], idx in1 [nb_idx],
		 * out [outer, nb_idx, inner]; a negative index counts from the end */
		struct {
			int64_t outer, axis_len, nb_idx, inner;
			uint32_t elem_bytes;
		} gather;
		struct {
			int64_t rows, cols;
		} rows;
		struct {
			int64_t outer, reduced, inner;
		} reduce;
		/* row-major: A [batch][m x k] (trans_a: stored [k x m]), B [batch][k x n] (trans_b: [n x k]),
		 * out [batch][m x n]; a batch stride of 0 broadcasts that operand; bias: n floats or NONE */
		struct {
			int64_t batch, m, n, k;
			int64_t stride_a, stride_b, stride_c;
			uint32_t trans_a, trans_b;
		} gemm;
		/* CONV and POOL: input [n][c][h][w], output [n][m][oh][ow]; a window's cell (ky, kx) of output
		 * (y, x) reads input (y * stride_h - pad_h + ky * dil_h, x * stride_w - pad_w + kx * dil_w),
		 * outside the input: padding (zero for CONV, skipped or counted for POOL). nhwc: the input,
		 * the residual and the output are stored [n][h][w][c] instead, CONV's weights
		 * [m][kh][kw][c/group] (channels innermost: tensor cores' native layout) */
		struct {
			int64_t n, c, h, w;
			int64_t m, oh, ow;
			int64_t kh, kw, stride_h, stride_w, pad_h, pad_w, dil_h, dil_w;
			int64_t group;              /* CONV: c and m are multiples of it */
			uint32_t count_include_pad; /* POOL AVG */
			uint32_t nhwc;              /* 0: NCHW, 1: NHWC (see above) */
		} conv;
	} u;
};

/* The program at one batch size. */
struct gpu_program_size {
	uint32_t batch;
	uint32_t nb_ops;
	const struct gpu_op *ops;                   /* nb_ops, in order */
	uint64_t arena_bytes;                       /* a multiple of GPU_PROG_ALIGN */
	uint64_t input_offset[GPU_PROG_TENSORS_MAX];  /* arena offsets of the graph inputs */
	uint64_t output_offset[GPU_PROG_TENSORS_MAX]; /* and outputs */
};

struct gpu_program {
	char name[GPU_PROG_NAME_MAX];
	uint32_t nb_inputs, nb_outputs;
	uint32_t input_row_bytes[GPU_PROG_TENSORS_MAX];  /* one batch row of each graph input */
	uint32_t output_row_bytes[GPU_PROG_TENSORS_MAX];
	uint32_t max_segments;      /* gather plus scatter segments one batch table holds */
	uint32_t nb_sizes;
	struct gpu_program_size sizes[GPU_PROG_SIZES_MAX]; /* ascending batch */
	const void *consts;         /* host copy, uploaded at program_load */
	uint64_t const_bytes;
};

/*
 * One contiguous run of rows: gather copies len bytes from addr (a device address inside a registered
 * host region) to the arena at input_offset[tensor] + offset, or writes len zero bytes there when
 * addr is 0 (padding rows); scatter copies len bytes from the arena at output_offset[tensor] + offset
 * to addr.
 */
struct gpu_segment {
	uint64_t addr;
	uint64_t offset;
	uint32_t len;
	uint32_t tensor;
};

/* Per (size, slot), in mapped pinned host memory: written by the host before each launch. */
struct gpu_batch_table {
	uint32_t generation;   /* the graph's last step writes it into the slot's completion word */
	uint32_t nb_gather;    /* segments[0, nb_gather) */
	uint32_t nb_scatter;   /* segments[nb_gather, nb_gather + nb_scatter) */
	uint32_t fault;        /* enum gpu_fault, raised by kernels; the host zeroes it before launch */
	uint32_t fault_op;     /* the op that raised it */
	uint32_t reserved[11]; /* to 64 bytes: the segments start on a cache line */
	struct gpu_segment segments[]; /* gpu_program.max_segments */
};

/** Bytes of one batch table with room for max_segments segments. */
static inline uint64_t gpu_batch_table_bytes(uint32_t max_segments)
{
	return sizeof(struct gpu_batch_table) + (uint64_t)max_segments * sizeof(struct gpu_segment);
}

#endif /* BW_GPU_PROGRAM_H */
