/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The CPU kernel table. Opset ranges are the model opsets (of the default domain) whose semantics a
 * kernel implements, from the ONNX operator changelog: the first is the version that introduced
 * the behaviour implemented (numpy broadcasting for Add at 7, the shape input of Reshape at 5...);
 * where a later version only added types, the range goes on; where semantics changed (Softmax at
 * 13, inputs instead of attributes for Clip at 11, Slice at 10, Squeeze/Unsqueeze/ReduceSum/Split
 * at 13), the kernel branches on node->opset. All ranges end at RT_K_OPSET_MAX, the newest opset
 * the loader reads. dtypes is the mask of the first input's types (Where: its condition is bool).
 */
#include <cblas.h>
#include <stdatomic.h>

#include "fused.h"

#define K(op, lo, mask, fn)                                                                                  \
	{op, "", lo, RT_K_OPSET_MAX, mask, RT_DEVICE_CPU, rt_k_##fn##_infer, NULL, rt_k_##fn##_run, NULL, NULL}
#define KS(op, lo, mask, fn)                                                                                 \
	{op, "", lo, RT_K_OPSET_MAX, mask, RT_DEVICE_CPU, rt_k_##fn##_infer, rt_k_##fn##_scratch, rt_k_##fn##_run, NULL, NULL}

/* batchwire's own ops (fused.h), which rt_graph_optimize writes: opset 1 of their domain, float */
#define KB(op, fn, scratch)                                                                                  \
	{op, RT_K_DOMAIN, RT_K_DOMAIN_OPSET, RT_K_DOMAIN_OPSET, RT_DTYPE_BIT(BW_DTYPE_FLOAT), RT_DEVICE_CPU,     \
	 rt_k_##fn##_infer, scratch, rt_k_##fn##_run, NULL, NULL}

#define F RT_K_DTYPE_FLOATS
#define NUM RT_K_DTYPE_NUMERIC
#define ALL RT_K_DTYPE_ALL
#define BOOL RT_DTYPE_BIT(BW_DTYPE_BOOL)
#define FSI (RT_K_DTYPE_FLOATS | RT_K_DTYPE_SINTS)

static const struct rt_kernel g_cpu_kernels[] = {
	/* elementwise.c */
	K("Add", 7, NUM, binary),
	K("Sub", 7, NUM, binary),
	K("Mul", 7, NUM, binary),
	K("Div", 7, NUM, binary),
	K("Mod", 10, NUM, binary),
	K("Pow", 7, FSI, pow),
	K("Equal", 7, NUM | BOOL, compare),
	K("Greater", 7, NUM, compare),
	K("Less", 7, NUM, compare),
	K("GreaterOrEqual", 12, NUM, compare),
	K("LessOrEqual", 12, NUM, compare),
	K("And", 7, BOOL, logical),
	K("Or", 7, BOOL, logical),
	K("Xor", 7, BOOL, logical),
	K("Max", 8, NUM, variadic),
	K("Min", 8, NUM, variadic),
	K("Sum", 8, F, variadic),
	K("Mean", 8, F, variadic),
	K("Where", 9, ALL, where),
	K("PRelu", 7, F, prelu),
	/* unary.c */
	K("Relu", 6, F | RT_K_DTYPE_SINTS, unary),
	K("LeakyRelu", 6, F, unary),
	K("Sigmoid", 6, F, unary),
	K("Tanh", 6, F, unary),
	K("Erf", 9, F, unary),
	K("Sqrt", 6, F, unary),
	K("Exp", 6, F, unary),
	K("Log", 6, F, unary),
	K("Abs", 6, NUM, unary),
	K("Neg", 6, F | RT_K_DTYPE_SINTS, unary),
	K("Reciprocal", 6, F, unary),
	K("Floor", 6, F, unary),
	K("Ceil", 6, F, unary),
	K("Round", 11, F, unary),
	K("Sign", 9, NUM, unary),
	K("Sin", 7, F, unary),
	K("Cos", 7, F, unary),
	K("Tan", 7, F, unary),
	K("Asin", 7, F, unary),
	K("Acos", 7, F, unary),
	K("Atan", 7, F, unary),
	K("Sinh", 9, F, unary),
	K("Cosh", 9, F, unary),
	K("Asinh", 9, F, unary),
	K("Acosh", 9, F, unary),
	K("Atanh", 9, F, unary),
	K("Softplus", 1, F, unary),
	K("Softsign", 1, F, unary),
	K("Elu", 6, F, unary),
	K("Selu", 6, F, unary),
	K("Celu", 12, F, unary),
	K("HardSigmoid", 6, F, unary),
	K("HardSwish", 14, F, unary),
	K("ThresholdedRelu", 10, F, unary),
	K("Shrink", 9, F, unary),
	K("IsNaN", 9, F, isnan),
	K("IsInf", 10, F, isnan),
	K("Dropout", 7, F, dropout),
	K("Not", 1, BOOL, not),
	K("Clip", 6, NUM, clip),
	K("Cast", 6, ALL, cast),
	{"CastLike", "", 15, RT_K_OPSET_MAX, ALL, RT_DEVICE_CPU, rt_k_cast_like_infer, NULL, rt_k_cast_run, NULL, NULL},
	/* shape.c */
	K("Identity", 1, ALL, identity),
	K("Reshape", 5, ALL, reshape),
	K("Flatten", 1, ALL, flatten),
	K("Squeeze", 1, ALL, squeeze),
	K("Unsqueeze", 1, ALL, squeeze),
	K("Shape", 1, ALL, shape),
	K("Size", 1, ALL, size),
	K("Constant", 1, ALL, constant),
	K("ConstantOfShape", 9, RT_DTYPE_BIT(BW_DTYPE_INT64), constant_of_shape),
	K("Range", 11, NUM, range),
	/* layout.c */
	K("Transpose", 1, ALL, transpose),
	K("Concat", 4, ALL, concat),
	K("Split", 2, ALL, split),
	K("Slice", 1, ALL, slice),
	K("Gather", 1, ALL, gather),
	K("Expand", 8, ALL, expand),
	K("Tile", 6, ALL, tile),
	/* index.c */
	K("Pad", 2, ALL, pad),
	K("DepthToSpace", 1, ALL, depth_to_space),
	K("SpaceToDepth", 1, ALL, depth_to_space),
	K("Trilu", 14, ALL, trilu),
	K("GatherElements", 11, ALL, gather_elements),
	K("OneHot", 9, NUM, onehot),
	K("EyeLike", 9, ALL, eyelike),
	/* reduce.c */
	KS("ReduceSum", 1, NUM, reduce),
	KS("ReduceMean", 1, NUM, reduce),
	KS("ReduceMax", 1, NUM, reduce),
	KS("ReduceMin", 1, NUM, reduce),
	KS("ReduceProd", 1, NUM, reduce),
	KS("ReduceL1", 1, NUM, reduce),
	KS("ReduceL2", 1, F, reduce),
	KS("ReduceLogSum", 1, F, reduce),
	KS("ReduceLogSumExp", 1, F, reduce),
	KS("ReduceSumSquare", 1, NUM, reduce),
	K("ArgMax", 1, NUM, argminmax),
	K("ArgMin", 1, NUM, argminmax),
	K("CumSum", 11, F | RT_K_DTYPE_INDEX, cumsum),
	K("Softmax", 1, F, softmax),
	K("LogSoftmax", 1, F, softmax),
	K("Hardmax", 1, F, softmax),
	/* norm.c */
	K("BatchNormalization", 7, RT_DTYPE_BIT(BW_DTYPE_FLOAT), batchnorm),
	K("LayerNormalization", 17, F, layernorm),
	K("InstanceNormalization", 6, F, instancenorm),
	K("LRN", 1, RT_DTYPE_BIT(BW_DTYPE_FLOAT), lrn),
	KS("MeanVarianceNormalization", 9, RT_DTYPE_BIT(BW_DTYPE_FLOAT), mvn),
	/* pool.c */
	K("MaxPool", 1, F | RT_DTYPE_BIT(BW_DTYPE_INT8) | RT_DTYPE_BIT(BW_DTYPE_UINT8), pool),
	K("AveragePool", 1, F, pool),
	K("GlobalAveragePool", 1, F, global_pool),
	K("GlobalMaxPool", 1, F, global_pool),
	/* select.c */
	KS("TopK", 1, NUM, topk),
	K("GatherND", 11, ALL, gather_nd),
	{"Scatter", "", 9, 10, ALL, RT_DEVICE_CPU, rt_k_scatter_elements_infer, NULL, rt_k_scatter_elements_run, NULL, NULL},
	K("ScatterElements", 11, ALL, scatter_elements),
	K("ScatterND", 11, ALL, scatter_nd),
	K("Compress", 9, ALL, compress),
	K("NonZero", 9, NUM | BOOL, nonzero),
	K("ReverseSequence", 10, ALL, reverse_sequence),
	/* resize.c */
	KS("Resize", 11, RT_DTYPE_BIT(BW_DTYPE_FLOAT), resize),
	{"Upsample", "", 7, 9, RT_DTYPE_BIT(BW_DTYPE_FLOAT), RT_DEVICE_CPU, rt_k_resize_infer, rt_k_resize_scratch,
	 rt_k_resize_run, NULL, NULL},
	/* linalg.c */
	K("MatMul", 1, F, matmul),
	K("Gemm", 7, F, gemm),
	KS("Conv", 1, RT_DTYPE_BIT(BW_DTYPE_FLOAT), conv),
	KS("ConvTranspose", 1, RT_DTYPE_BIT(BW_DTYPE_FLOAT), conv_transpose),
	/* batchwire's domain: conv.c, linalg.c, fastpath.c */
	{"FusedConv", RT_K_DOMAIN, RT_K_DOMAIN_OPSET, RT_K_DOMAIN_OPSET, RT_DTYPE_BIT(BW_DTYPE_FLOAT), RT_DEVICE_CPU,
	 rt_k_fused_conv_infer, rt_k_fused_conv_scratch, rt_k_fused_conv_run, NULL, rt_k_fused_conv_in_place},
	/* A in bf16 too: a FusedGemm reading one with "output_bf16" (fuse_gemm.c) */
	{"FusedGemm", RT_K_DOMAIN, RT_K_DOMAIN_OPSET, RT_K_DOMAIN_OPSET,
	 RT_DTYPE_BIT(BW_DTYPE_FLOAT) | RT_DTYPE_BIT(BW_DTYPE_BFLOAT16), RT_DEVICE_CPU, rt_k_fused_gemm_infer,
	 rt_k_fused_gemm_scratch, rt_k_fused_gemm_run, NULL, NULL},
	KB("FusedMatMul", fused_matmul, rt_k_fused_matmul_scratch),
	KB("FusedAttention", fused_attention, rt_k_fused_attention_scratch),
	KB("Softmax", fast_softmax, NULL),
	KB("LayerNormalization", fast_layernorm, NULL),
	KB("MaxPool", fast_maxpool, rt_k_fast_maxpool_scratch),
	/* conv_nhwc.c: precision bf16's region of NHWC bf16 tensors and its edges */
	{"FusedConvNhwc", RT_K_DOMAIN, RT_K_DOMAIN_OPSET, RT_K_DOMAIN_OPSET, RT_DTYPE_BIT(BW_DTYPE_BFLOAT16), RT_DEVICE_CPU,
	 rt_k_fused_conv_nhwc_infer, rt_k_fused_conv_nhwc_scratch, rt_k_fused_conv_nhwc_run, NULL,
	 rt_k_fused_conv_nhwc_in_place},
	KB("ToNhwcBf16", to_nhwc_bf16, NULL),
	{"MaxPoolNhwcBf16", RT_K_DOMAIN, RT_K_DOMAIN_OPSET, RT_K_DOMAIN_OPSET, RT_DTYPE_BIT(BW_DTYPE_BFLOAT16), RT_DEVICE_CPU,
	 rt_k_maxpool_nhwc_bf16_infer, NULL, rt_k_maxpool_nhwc_bf16_run, NULL, NULL},
	{"FromNhwcBf16", RT_K_DOMAIN, RT_K_DOMAIN_OPSET, RT_K_DOMAIN_OPSET, RT_DTYPE_BIT(BW_DTYPE_BFLOAT16), RT_DEVICE_CPU,
	 rt_k_from_nhwc_bf16_infer, NULL, rt_k_from_nhwc_bf16_run, NULL, NULL},
};

int rt_cpu_kernels_register(void)
{
	static atomic_bool blas_single;
	int ret = rt_cpu_isa_select(NULL, 0);

	if (ret != 0)
		return ret;
	/* one thread: each executor lcore runs its own GEMMs (see linalg.c) */
	if (!atomic_exchange(&blas_single, true))
		openblas_set_num_threads(1);
	return rt_kernels_register(g_cpu_kernels, sizeof(g_cpu_kernels) / sizeof(g_cpu_kernels[0]));
}
