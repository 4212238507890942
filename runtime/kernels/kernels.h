/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Private to runtime/kernels: helpers every CPU kernel shares (errors, attributes, axes, integer
 * inputs read as shapes, numpy broadcasting, strided copies) and the entry points the kernel table
 * in cpu.c lists. Kernels are stateless: everything a run needs it recomputes from the node and the
 * tensors, so infer at load and run at run time agree by construction.
 */
#ifndef BW_RT_KERNELS_H
#define BW_RT_KERNELS_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <batchwire/err.h>  /* bw_err: kernels write their errors with it */
#include <batchwire/half.h> /* float16 and bfloat16 <-> float */

#include "fused_ops.h" /* the window geometry pool.c and linalg.c share, the fused activations */
#include "graph.h"

/* The highest opset of the default domain the runtime reads (ONNX 1.12); ranges end here. */
#define RT_K_OPSET_MAX 17

#define RT_K_DTYPE_FLOATS (RT_DTYPE_BIT(BW_DTYPE_FLOAT) | RT_DTYPE_BIT(BW_DTYPE_DOUBLE))
#define RT_K_DTYPE_SINTS                                                                                     \
	(RT_DTYPE_BIT(BW_DTYPE_INT8) | RT_DTYPE_BIT(BW_DTYPE_INT16) | RT_DTYPE_BIT(BW_DTYPE_INT32) |         \
	 RT_DTYPE_BIT(BW_DTYPE_INT64))
#define RT_K_DTYPE_UINTS                                                                                     \
	(RT_DTYPE_BIT(BW_DTYPE_UINT8) | RT_DTYPE_BIT(BW_DTYPE_UINT16) | RT_DTYPE_BIT(BW_DTYPE_UINT32) |      \
	 RT_DTYPE_BIT(BW_DTYPE_UINT64))
#define RT_K_DTYPE_INTS (RT_K_DTYPE_SINTS | RT_K_DTYPE_UINTS)
#define RT_K_DTYPE_NUMERIC (RT_K_DTYPE_FLOATS | RT_K_DTYPE_INTS)
#define RT_K_DTYPE_HALFS (RT_DTYPE_BIT(BW_DTYPE_FLOAT16) | RT_DTYPE_BIT(BW_DTYPE_BFLOAT16))
/* Every fixed-size type: what data-movement kernels (Reshape, Concat, Gather...) copy byte-wise. */
#define RT_K_DTYPE_ALL (RT_K_DTYPE_NUMERIC | RT_K_DTYPE_HALFS | RT_DTYPE_BIT(BW_DTYPE_BOOL))
#define RT_K_DTYPE_INDEX (RT_DTYPE_BIT(BW_DTYPE_INT32) | RT_DTYPE_BIT(BW_DTYPE_INT64))

/* Most inputs any kernel here reads (Concat, Max, Sum... are variadic). */
#define RT_K_MAX_INPUTS 64

/* ---- errors and attributes ------------------------------------------------------------------------ */

/** "[2,3,4]" ("?" for a symbolic dim) into buf; \return buf. */
const char *rt_k_dims_str(const struct rt_tensor *t, char *buf, size_t cap);

/** Whether optional input i was given (present in the node, not RT_VALUE_NONE, typed). */
bool rt_k_has_input(const struct rt_node *node, const struct rt_tensor *inputs, unsigned int i);
/** Whether optional output i is wanted. */
bool rt_k_has_output(const struct rt_node *node, unsigned int i);

/** Checks input i is present and of a dtype in mask; name is the ONNX input name for messages. */
int rt_k_need_input(const struct rt_node *node, const struct rt_tensor *inputs, unsigned int i,
		    const char *name, uint32_t mask, char *err, size_t err_cap);

/**
 * An INT attribute with a default; a present attribute of another type is an error.
 * \return 0 or -EINVAL.
 */
int rt_k_attr_int(const struct rt_node *node, const char *name, int64_t dflt, int64_t *out, char *err,
		  size_t err_cap);
int rt_k_attr_float(const struct rt_node *node, const char *name, float dflt, float *out, char *err,
		    size_t err_cap);
/** An INTS attribute: \return 1 and count values copied, 0 when absent, -EINVAL (wrong type, > cap). */
int rt_k_attr_ints(const struct rt_node *node, const char *name, int64_t *out, unsigned int cap,
		   unsigned int *count, char *err, size_t err_cap);

/**
 * Normalizes an axis in [-rank, rank) (or [-rank, rank] where what allows it) to [0, rank).
 * \return 0 or -EINVAL naming the attribute.
 */
int rt_k_axis(int64_t axis, int rank, const char *what, int64_t *out, char *err, size_t err_cap);

/**
 * Reads an int64/int32 tensor of at most cap elements into out (a shape, axes, starts...).
 * Data NULL: -ENOTSUP "input 'name' must be a constant". \return 0 or a negative errno.
 */
int rt_k_read_ints(const struct rt_tensor *t, const char *name, int64_t *out, unsigned int cap,
		   unsigned int *count, char *err, size_t err_cap);

/**
 * A list of ints that moved from an attribute to an optional input at some opset (axes of Squeeze,
 * Unsqueeze and ReduceSum at 13, split of Split at 13): the attribute before since_opset, input
 * input_index from then on. \return 1 when given, 0 when absent, or a negative errno.
 */
int rt_k_ints_attr_or_input(const struct rt_node *node, const struct rt_tensor *inputs, const char *name,
			    unsigned int input_index, int64_t since_opset, int64_t *out, unsigned int cap,
			    unsigned int *count, char *err, size_t err_cap);

/** Normalizes axes against rank and rejects duplicates; what names them in messages. */
int rt_k_axes(int64_t *axes, unsigned int count, int rank, const char *what, char *err, size_t err_cap);

/** Reads element i of any numeric tensor as double (scalars of Clip, ConstantOfShape...). */
double rt_k_load_f64(const void *data, uint8_t dtype, int64_t i);

/** Product of dims[lo..hi); -1 when one of them is symbolic or the product passes INT64_MAX. */
int64_t rt_k_dims_prod(const struct rt_tensor *t, int lo, int hi);

/* ---- numpy broadcasting ------------------------------------------------------------------------- */

#define RT_K_BCAST_MAX_IN 4

/**
 * The broadcast shape of inputs (numpy rules: align right, equal dims or 1). A symbolic dim against
 * 1 or itself stays symbolic. \return 0 or -EINVAL naming the inputs.
 */
int rt_k_broadcast_shape(const struct rt_tensor *const *ins, const char *const *names, unsigned int nin,
			 struct rt_tensor *out, char *err, size_t err_cap);

/*
 * An iteration over out's shape in rows of `inner` elements: for each row, off[k] is the element
 * offset of the row's first element in input k and step[k] is 0 or 1 (broadcast or not along the
 * row). Dims that every input walks the same way are merged, so rows are as long as possible.
 */
struct rt_k_bcast {
	unsigned int nin;
	int rank;                                       /* merged, >= 1 */
	int64_t dims[RT_MAX_RANK];
	int64_t strides[RT_K_BCAST_MAX_IN][RT_MAX_RANK]; /* elements; 0 where input k broadcasts */
	int64_t rows, inner;
	int64_t step[RT_K_BCAST_MAX_IN];
	/* cursor */
	int64_t idx[RT_MAX_RANK];
	int64_t off[RT_K_BCAST_MAX_IN];
};

void rt_k_bcast_init(struct rt_k_bcast *b, const struct rt_tensor *out, const struct rt_tensor *const *ins,
		     unsigned int nin);
/** Advances the cursor to the next row. */
void rt_k_bcast_next(struct rt_k_bcast *b);

/**
 * Copies a strided view of src (element strides, possibly 0 or negative) into contiguous dst.
 * Transpose, Slice and Expand are this with different strides.
 */
void rt_k_copy_strided(void *dst, const void *src, int rank, const int64_t *dims, const int64_t *src_strides,
		       size_t esize);

/** Row-major element strides of t. */
void rt_k_strides(const struct rt_tensor *t, int64_t *strides);

/* ---- entry points (cpu.c's table) ---------------------------------------------------------------- */

/* Kernels share one signature and many ignore some of it. */
#define RT_K_UNUSED __attribute__((unused))
#define RT_K_INFER(name)                                                                                     \
	int rt_k_##name##_infer(RT_K_UNUSED const struct rt_node *node, RT_K_UNUSED const struct rt_tensor *inputs, \
				struct rt_tensor *outputs, RT_K_UNUSED char *err, RT_K_UNUSED size_t err_cap)
#define RT_K_RUN(name)                                                                                       \
	int rt_k_##name##_run(RT_K_UNUSED const struct rt_node *node, RT_K_UNUSED const struct rt_tensor *inputs, \
			      struct rt_tensor *outputs, RT_K_UNUSED void *scratch, RT_K_UNUSED char *err,   \
			      RT_K_UNUSED size_t err_cap)
#define RT_K_SCRATCH(name)                                                                                   \
	size_t rt_k_##name##_scratch(RT_K_UNUSED const struct rt_node *node,                                 \
				     RT_K_UNUSED const struct rt_tensor *inputs,                             \
				     RT_K_UNUSED const struct rt_tensor *outputs)
#define RT_K_DECLARE(name)                                                                                   \
	RT_K_INFER(name);                                                                                    \
	RT_K_RUN(name)

/* elementwise.c */
RT_K_DECLARE(binary);     /* Add Sub Mul Div Mod */
RT_K_DECLARE(pow);
RT_K_DECLARE(compare);    /* Equal Greater Less GreaterOrEqual LessOrEqual */
RT_K_DECLARE(logical);    /* And Or Xor */
RT_K_DECLARE(variadic);   /* Max Min Sum Mean */
RT_K_DECLARE(where);
RT_K_DECLARE(prelu);
/* unary.c */
RT_K_DECLARE(unary);      /* Relu Sigmoid Tanh Erf Sqrt Exp Log Abs Neg ... */
RT_K_DECLARE(not);
RT_K_DECLARE(clip);
RT_K_DECLARE(cast);
RT_K_INFER(cast_like);
RT_K_DECLARE(isnan);      /* IsNaN IsInf */
RT_K_DECLARE(dropout);
/* shape.c */
RT_K_DECLARE(identity);
RT_K_DECLARE(reshape);
RT_K_DECLARE(flatten);
RT_K_DECLARE(squeeze);    /* Squeeze and Unsqueeze */
RT_K_DECLARE(shape);
RT_K_DECLARE(size);
RT_K_DECLARE(constant);
RT_K_DECLARE(constant_of_shape);
RT_K_DECLARE(range);
/* layout.c */
RT_K_DECLARE(transpose);
RT_K_DECLARE(concat);
RT_K_DECLARE(split);
RT_K_DECLARE(slice);
RT_K_DECLARE(gather);
RT_K_DECLARE(expand);
RT_K_DECLARE(tile);
/* index.c */
RT_K_DECLARE(pad);
RT_K_DECLARE(depth_to_space); /* DepthToSpace SpaceToDepth */
RT_K_DECLARE(trilu);
RT_K_DECLARE(gather_elements);
RT_K_DECLARE(onehot);
RT_K_DECLARE(eyelike);
/* reduce.c */
RT_K_DECLARE(reduce);     /* ReduceMean ReduceSum ReduceMax ReduceMin ReduceProd ... */
RT_K_SCRATCH(reduce);
RT_K_DECLARE(softmax);    /* Softmax LogSoftmax */
RT_K_DECLARE(argminmax);
RT_K_DECLARE(cumsum);
/* norm.c */
RT_K_DECLARE(batchnorm);
RT_K_DECLARE(layernorm);
RT_K_DECLARE(instancenorm);
RT_K_DECLARE(lrn);
RT_K_DECLARE(mvn);        /* MeanVarianceNormalization */
RT_K_SCRATCH(mvn);
/* pool.c */
RT_K_DECLARE(pool);       /* MaxPool AveragePool */
RT_K_DECLARE(global_pool);
/* select.c */
RT_K_DECLARE(topk);
RT_K_SCRATCH(topk);
RT_K_DECLARE(gather_nd);
RT_K_DECLARE(scatter_elements); /* ScatterElements Scatter */
RT_K_DECLARE(scatter_nd);
RT_K_DECLARE(compress);
RT_K_DECLARE(nonzero);
RT_K_DECLARE(reverse_sequence);
/* resize.c */
RT_K_DECLARE(resize);     /* Resize Upsample */
RT_K_SCRATCH(resize);
/* linalg.c */
RT_K_DECLARE(matmul);
RT_K_DECLARE(gemm);
RT_K_DECLARE(conv);
RT_K_SCRATCH(conv);
RT_K_DECLARE(conv_transpose);
RT_K_SCRATCH(conv_transpose);

#endif /* BW_RT_KERNELS_H */
