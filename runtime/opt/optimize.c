/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rt_graph_optimize (graph.h): the CPU graph rewrites at load, before planning. In order:
 *
 *  1. constants folded (fold.c): nodes of constant inputs become initializers, so the fusions see
 *     constant weights and scalars where exporters wrote Constant or Transpose nodes;
 *  2. shapes inferred once, by a plan at OPT_SHAPE_BATCH (fold.c);
 *  3. Conv (+ BatchNormalization folded into the weights) (+ residual Add) (+ activation) ->
 *     FusedConv (fuse_conv.c);
 *  4. MatMul/Gemm with constant B (+ bias Add) (+ activation or erf GELU) -> FusedGemm, weights
 *     pre-packed in the layout the GEMM call reads (fuse_gemm.c);
 *  5. a MatMul of computed operands with the Reshape/Transpose around it and a scale after it ->
 *     FusedMatMul, reading and writing through strides (fuse_matmul.c: attention);
 *  6. Softmax, LayerNormalization and MaxPool to the vectorized kernels where they apply
 *     (fastpath.c), then attention's scores, softmax and context into one FusedAttention
 *     (fuse_matmul.c);
 *  7. dead nodes and values nothing reads any more (the weights step 3 replaced) dropped;
 *  8. at precision bf16, the convs step 3 made FusedConvNhwc read and write NHWC bf16 tensors,
 *     converted where the region meets the rest of the graph (nhwc.c); a FusedGemm that only
 *     FusedGemms read hands its output to them in bf16 (fuse_gemm.c).
 *
 * Every rewrite computes the same function up to float rounding; test_opt checks each against the
 * unrewritten graph on random data. The GPU gets steps 1-3 and 7, step 3 without the CPU's weight
 * packing (its FusedConv reads ONNX's weight layout; the GPU's kernel registry lowers it): FusedGemm's
 * and FusedMatMul's layouts, and the fast paths, are the CPU kernels'.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "defs.h"

static const char *const g_precision_names[RT_PRECISION_COUNT] = {
	[RT_PRECISION_FP32] = "fp32",
	[RT_PRECISION_BF16] = "bf16",
};

const char *rt_precision_name(enum rt_precision precision)
{
	return (unsigned int)precision < RT_PRECISION_COUNT ? g_precision_names[precision] : "?";
}

int rt_precision_parse(const char *name)
{
	for (int i = 0; i < RT_PRECISION_COUNT; i++) {
		if (strcmp(name, g_precision_names[i]) == 0)
			return i;
	}
	return -EINVAL;
}

int rt_precision_check(enum rt_precision precision, char *err, size_t cap)
{
	if (precision != RT_PRECISION_BF16 || rt_cpu_isa_active() >= RT_CPU_ISA_AMX)
		return 0;
	snprintf(err, cap, "precision bf16 needs the CPU kernels at the amx level (AMX-TILE, AMX-BF16, AVX512-BF16); "
		 "they run at %s (this CPU runs up to %s)", rt_cpu_isa_name(rt_cpu_isa_active()),
		 rt_cpu_isa_name(rt_cpu_isa_detected()));
	return -ENOTSUP;
}

int rt_graph_optimize(struct rt_graph *graph, enum rt_device device, struct rt_opt_report *report, char *err,
		      size_t err_cap)
{
	return rt_graph_optimize_with(graph, device, NULL, report, err, err_cap);
}

int rt_graph_optimize_with(struct rt_graph *graph, enum rt_device device, const struct rt_opt_options *opts,
			   struct rt_opt_report *report, char *err, size_t err_cap)
{
	struct opt_ctx c = { .g = graph, .dev = device, .report = report, .err = err, .err_cap = err_cap,
			     .precision = opts != NULL ? opts->precision : RT_PRECISION_FP32 };
	int rc;

	if (err != NULL && err_cap > 0)
		err[0] = '\0';
	if ((unsigned int)c.precision >= RT_PRECISION_COUNT) {
		snprintf(err, err_cap, "precision %d is none of fp32, bf16", (int)c.precision);
		return -EINVAL;
	}
	if (device == RT_DEVICE_CPU && (rc = rt_precision_check(c.precision, err, err_cap)) != 0)
		return rc;
	if (opts != NULL)
		graph->memory_budget = opts->memory_budget;
	c.constant_bytes = rt_graph_constant_bytes(graph);
	if (report != NULL) {
		memset(report, 0, sizeof(*report));
		report->nodes_before = graph->num_nodes;
		report->nodes_after = graph->num_nodes;
	}
	rc = opt_fold_constants(&c);
	if (rc == 0)
		rc = opt_compact(&c);
	if (rc == 0)
		rc = opt_shapes(&c);
	if (rc == 0)
		rc = opt_fuse_conv(&c);
	if (rc == 0 && device != RT_DEVICE_CPU) {
		rc = opt_compact(&c);
		goto done;
	}
	if (rc == 0)
		rc = opt_fuse_gemm(&c);
	if (rc == 0)
		rc = opt_fuse_matmul(&c);
	if (rc == 0)
		rc = opt_fast_paths(&c);
	if (rc == 0)
		rc = opt_fuse_attention(&c);
	if (rc == 0)
		rc = opt_compact(&c);
	if (rc == 0)
		rc = opt_nhwc_region(&c);
	if (rc == 0)
		rc = opt_bf16_handoff(&c);
done:
	free(c.reader_start);
	free(c.readers);
	free(c.dead);
	opt_shapes_free(&c);
	if (report != NULL)
		report->nodes_after = graph->num_nodes;
	return rc;
}
