/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Unit tests of rt_graph_optimize (runtime/opt) and the kernels it rewrites into (FusedConv,
 * FusedGemm, the fast Softmax, LayerNormalization and MaxPool). Each model is built here with the
 * structs protoc-c generates from onnx.proto and loaded twice: once as is, once optimized. Both are
 * planned at the same batch size and run on the same random inputs, and their outputs must agree to
 * float rounding (|a - b| <= 1e-4 * max(1, |a|)); the optimized graph's node counts and report say
 * what was fused. Patterns that must be left alone (a BatchNormalization whose Conv output has a
 * second reader, non-constant weights, biases that would broadcast the output, a GELU with the
 * wrong constant, Softmax over an inner axis) are checked to come out unchanged. Small images (the
 * CNN's blocks, the same-width im2col packer's edges, the 2x2 stride-2 MaxPool) are checked at
 * batches 1, 3 and 8, with each batch's optimized graph's FusedConvs and MaxPools counted. The vector exp and
 * erf are checked against libm, and an optimized model's run against the heap (no call while it
 * runs, as tests/runtime/test_noalloc.c checks the unoptimized kernels).
 */
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../bw_cunit.h"

#include "alloc_count.h"
#include "exec/executor.h"
#include "exec/plan.h"
#include "graph.h"
#include "isa_level.h"
#include "kernels/fused.h"
#include "kernels/bf16.h"
#include "kernels/sgemm.h"
#include "onnx.pb-c.h"
#include "runtime.h"
#include "onnx_build.h"

#define OPT_TEST_TOL 1e-4
#define OPT_TEST_OPSET 17
#define OPT_TEST_IR 8

/* ---- building models with the generated structs (onnx_build.h) -------------------------------------- */

static uint64_t g_rng = 0x9e3779b97f4a7c15ull;

/* Uniform in [-1, 1), deterministic (xorshift64*). */
static float rnd(void)
{
	g_rng ^= g_rng >> 12;
	g_rng ^= g_rng << 25;
	g_rng ^= g_rng >> 27;
	return (float)((g_rng * 0x2545f4914f6cdd1dull) >> 40) / (float)(1 << 23) - 1.0f;
}

static Onnx__ModelProto *model_new(void)
{
	return onnx_build_model_new(NULL, OPT_TEST_IR, OPT_TEST_OPSET);
}

/* A float value; dims of -1 are the symbolic batch "N"; rank < 0: type without a shape. */
static void input(Onnx__ModelProto *m, const char *name, int rank, const int64_t *dims)
{
	onnx_build_input(m, name, ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, rank, dims);
}

static void output(Onnx__ModelProto *m, const char *name)
{
	onnx_build_output(m, name, ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, -1, NULL);
}

/* A float initializer; data NULL: random values scale * U[-1, 1) + offset. */
static void init(Onnx__ModelProto *m, const char *name, int rank, const int64_t *dims, const float *data,
		 float scale, float offset)
{
	Onnx__TensorProto *t = onnx_build_initializer(m, name, ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, (size_t)rank, dims);
	int64_t n = 1;

	for (int d = 0; d < rank; d++)
		n *= dims[d];
	for (int64_t i = 0; i < n; i++)
		PUSH(t->float_data, t->n_float_data, data != NULL ? data[i] : scale * rnd() + offset);
}

static void scalar(Onnx__ModelProto *m, const char *name, float v)
{
	init(m, name, 0, NULL, &v, 0, 0);
}

/* ---- loading, running and comparing ---------------------------------------------------------------- */

/* What the optimized side is built for: fp32 and OPT_TEST_TOL, unless test_bf16 says otherwise. */
static enum rt_precision g_precision = RT_PRECISION_FP32;
static double g_tol = OPT_TEST_TOL;

struct run {
	struct rt_graph *g;
	struct rt_plan *plan;
	void *arena;
	struct rt_tensor in[4], out[4];
};

static void run_setup(struct run *r, const uint8_t *buf, size_t len, bool optimize, int64_t batch,
		      struct rt_opt_report *report)
{
	char err[RT_ERR_MAX];

	memset(r, 0, sizeof(*r));
	r->g = rt_graph_load_buffer(buf, len, NULL, err, sizeof(err));
	if (r->g == NULL)
		fprintf(stderr, "load: %s\n", err);
	CU_ASSERT_PTR_NOT_NULL_FATAL(r->g);
	if (optimize) {
		int rc = rt_graph_optimize_with(r->g, RT_DEVICE_CPU, &(struct rt_opt_options){ .precision = g_precision },
						report, err, sizeof(err));

		if (rc != 0)
			fprintf(stderr, "optimize: %s\n", err);
		CU_ASSERT_EQUAL_FATAL(rc, 0);
	}
	r->plan = rt_plan_create(r->g, batch, RT_DEVICE_CPU, err, sizeof(err));
	if (r->plan == NULL)
		fprintf(stderr, "plan (%s): %s\n", optimize ? "optimized" : "as loaded", err);
	CU_ASSERT_PTR_NOT_NULL_FATAL(r->plan);
	CU_ASSERT_FATAL(rt_plan_num_inputs(r->plan) <= 4 && rt_plan_num_outputs(r->plan) <= 4);
	r->arena = aligned_alloc(RT_PLAN_ALIGN, rt_plan_arena_bytes(r->plan));
	CU_ASSERT_PTR_NOT_NULL_FATAL(r->arena);
	memset(r->arena, 0, rt_plan_arena_bytes(r->plan));
	rt_plan_bind(r->plan, r->arena, r->in, r->out);
}

static void run_free(struct run *r)
{
	rt_plan_free(r->plan);
	rt_graph_free(r->g);
	free(r->arena);
}

static void run_once(struct run *r)
{
	char err[RT_ERR_MAX];
	int rc = rt_plan_run(r->plan, r->arena, err, sizeof(err));

	if (rc != 0)
		fprintf(stderr, "run: %s\n", err);
	CU_ASSERT_EQUAL_FATAL(rc, 0);
}

static uint32_t count_op(const struct rt_graph *g, const char *op)
{
	uint32_t n = 0;

	for (uint32_t i = 0; i < g->num_nodes; i++)
		n += strcmp(g->nodes[i].op_type, op) == 0;
	return n;
}

static uint32_t report_count(const struct rt_opt_report *r, const char *what)
{
	for (uint32_t k = 0; k < r->num_kinds; k++) {
		if (strcmp(r->kinds[k].what, what) == 0)
			return r->kinds[k].count;
	}
	return 0;
}

/* An op the optimized graph must hold so many of (check_same_counting). */
struct op_count {
	const char *op;
	uint32_t count;
};

/* Steps of the last optimized plan check_same_counting ran that wrote their output over an input. */
static uint32_t g_in_place;

/*
 * Loads m as is and optimized, runs both at each batch size on the same random inputs and checks the
 * outputs agree; also checks the optimized run makes no heap call, and that each batch size's
 * optimized graph holds the ops of expect as counted. The optimized graph (of the last batch size)
 * and its report are returned for the caller's checks.
 */
static struct rt_graph *check_same_counting(Onnx__ModelProto *m, const int64_t *batches, unsigned int nb,
					    struct rt_opt_report *report, const struct op_count *expect,
					    unsigned int nexpect)
{
	size_t len;
	uint8_t *buf = onnx_build_pack(m, &len);
	struct rt_graph *kept = NULL;

	onnx__model_proto__free_unpacked(m, NULL);
	for (unsigned int b = 0; b < nb; b++) {
		struct run ref, opt;
		struct rt_plan_stats stats;
		float *saved[4];
		double worst = 0;

		run_setup(&ref, buf, len, false, batches[b], NULL);
		run_setup(&opt, buf, len, true, batches[b], report);
		rt_plan_stats(opt.plan, &stats);
		g_in_place = stats.in_place;
		for (unsigned int e = 0; e < nexpect; e++)
			CU_ASSERT_EQUAL(count_op(opt.g, expect[e].op), expect[e].count);
		/* inputs kept apart: a run reuses an input's bytes once the last node reading it is done */
		for (uint32_t i = 0; i < rt_plan_num_inputs(ref.plan); i++) {
			int64_t n = rt_tensor_elems(&ref.in[i]);

			saved[i] = malloc((size_t)n * sizeof(float) + 1);
			CU_ASSERT_PTR_NOT_NULL_FATAL(saved[i]);
			for (int64_t j = 0; j < n; j++)
				saved[i][j] = 2.0f * rnd();
			memcpy(ref.in[i].data, saved[i], (size_t)n * sizeof(float));
			memcpy(opt.in[i].data, saved[i], (size_t)n * sizeof(float));
		}
		run_once(&ref);
		run_once(&opt); /* a warm-up: a library may set itself up on its first call */
		for (uint32_t i = 0; i < rt_plan_num_inputs(ref.plan); i++) {
			memcpy(opt.in[i].data, saved[i], (size_t)rt_tensor_elems(&ref.in[i]) * sizeof(float));
			free(saved[i]);
		}
		alloc_count_start();
		run_once(&opt);
		alloc_count_stop();
		CU_ASSERT_EQUAL(alloc_count_allocs() + alloc_count_frees(), 0);
		for (uint32_t o = 0; o < rt_plan_num_outputs(ref.plan); o++) {
			int64_t n = rt_tensor_elems(&ref.out[o]);

			CU_ASSERT_EQUAL(n, rt_tensor_elems(&opt.out[o]));
			for (int64_t j = 0; j < n && n == rt_tensor_elems(&opt.out[o]); j++) {
				double a = ((float *)ref.out[o].data)[j], e = ((float *)opt.out[o].data)[j];
				double d = fabs(a - e) / fmax(1.0, fabs(a));

				worst = d > worst || isnan(d) ? d : worst;
			}
		}
		if (!(worst <= g_tol))
			fprintf(stderr, "batch %lld: largest difference %g\n", (long long)batches[b], worst);
		CU_ASSERT(worst <= g_tol);
		run_free(&ref);
		if (b + 1 == nb) {
			kept = opt.g;
			opt.g = NULL;
		}
		run_free(&opt);
	}
	free(buf);
	return kept;
}

static struct rt_graph *check_same(Onnx__ModelProto *m, const int64_t *batches, unsigned int nb,
				   struct rt_opt_report *report)
{
	return check_same_counting(m, batches, nb, report, NULL, 0);
}

static const int64_t g_batches[] = {1, 3};
#define NB (sizeof(g_batches) / sizeof(g_batches[0]))

/* ---- Conv ------------------------------------------------------------------------------------------ */

static void bn_params(Onnx__ModelProto *m, const char *prefix, int64_t c)
{
	char name[64];

	snprintf(name, sizeof(name), "%s_scale", prefix);
	init(m, name, 1, &c, NULL, 0.5f, 1.0f);
	snprintf(name, sizeof(name), "%s_bias", prefix);
	init(m, name, 1, &c, NULL, 0.3f, 0.0f);
	snprintf(name, sizeof(name), "%s_mean", prefix);
	init(m, name, 1, &c, NULL, 0.3f, 0.0f);
	snprintf(name, sizeof(name), "%s_var", prefix);
	init(m, name, 1, &c, NULL, 0.4f, 1.0f);
}

static void test_conv_bn_relu(void)
{
	static const int64_t x[] = {-1, 3, 9, 9}, w[] = {8, 3, 3, 3}, b[] = {8}, pads[] = {1, 1, 1, 1};
	Onnx__ModelProto *m = model_new();
	struct rt_opt_report rep;
	struct rt_graph *g;
	Onnx__NodeProto *n;

	input(m, "x", 4, x);
	init(m, "w", 4, w, NULL, 0.3f, 0);
	init(m, "b", 1, b, NULL, 0.1f, 0);
	bn_params(m, "bn", 8);
	n = onnx_build_node(m, NULL, "Conv", "x,w,b", "c");
	onnx_build_attr_ints(n, "pads", pads, 4);
	n = onnx_build_node(m, NULL, "BatchNormalization", "c,bn_scale,bn_bias,bn_mean,bn_var", "n");
	onnx_build_attr_float(n, "epsilon", 1e-3f);
	onnx_build_node(m, NULL, "Relu", "n", "y");
	output(m, "y");
	g = check_same(m, g_batches, NB, &rep);
	CU_ASSERT_EQUAL(g->num_nodes, 1);
	CU_ASSERT_EQUAL(count_op(g, "FusedConv"), 1);
	CU_ASSERT_STRING_EQUAL(g->nodes[0].domain, RT_K_DOMAIN);
	CU_ASSERT_EQUAL(report_count(&rep, "Conv+BatchNormalization+Relu"), 1);
	CU_ASSERT_EQUAL(rep.nodes_before, 3);
	CU_ASSERT_EQUAL(rep.nodes_after, 1);
	/* the original weights and BN parameters are gone: only x, the new W and B, y */
	CU_ASSERT_EQUAL(g->num_values, 4);
	rt_graph_free(g);
}

/* A ResNet bottleneck's tail: Conv + BN + Add(shortcut) + Relu, and a BN-only downsample. */
static void test_conv_bn_add_relu(void)
{
	static const int64_t x[] = {-1, 4, 8, 8}, w[] = {4, 4, 3, 3}, w1[] = {4, 4, 1, 1}, pads[] = {1, 1, 1, 1};
	Onnx__ModelProto *m = model_new();
	struct rt_opt_report rep;
	struct rt_graph *g;
	Onnx__NodeProto *n;

	input(m, "x", 4, x);
	init(m, "w", 4, w, NULL, 0.3f, 0);
	init(m, "w1", 4, w1, NULL, 0.5f, 0);
	bn_params(m, "bn", 4);
	bn_params(m, "bn1", 4);
	n = onnx_build_node(m, NULL, "Conv", "x,w", "c");
	onnx_build_attr_ints(n, "pads", pads, 4);
	onnx_build_node(m, NULL, "Conv", "x,w1", "c1");
	onnx_build_node(m, NULL, "BatchNormalization", "c1,bn1_scale,bn1_bias,bn1_mean,bn1_var", "s");
	onnx_build_node(m, NULL, "BatchNormalization", "c,bn_scale,bn_bias,bn_mean,bn_var", "n");
	onnx_build_node(m, NULL, "Add", "n,s", "a");
	onnx_build_node(m, NULL, "Relu", "a", "y");
	output(m, "y");
	g = check_same(m, g_batches, NB, &rep);
	CU_ASSERT_EQUAL(g->num_nodes, 2);
	CU_ASSERT_EQUAL(count_op(g, "FusedConv"), 2);
	CU_ASSERT_EQUAL(report_count(&rep, "Conv+BatchNormalization+Add+Relu"), 1);
	CU_ASSERT_EQUAL(report_count(&rep, "Conv+BatchNormalization"), 1);
	CU_ASSERT_EQUAL(report_count(&rep, "1x1 Conv as GEMM"), 1);
	rt_graph_free(g);
}

/* im2col's paths: stride 2, uneven pads, dilation, groups; activations LeakyRelu and Clip. */
static void test_conv_geometry_acts(void)
{
	static const int64_t x[] = {-1, 4, 11, 10}, w[] = {6, 2, 3, 3}, w2[] = {5, 6, 1, 1}, b2[] = {5};
	static const int64_t strides[] = {2, 2}, pads[] = {1, 0, 2, 1}, dil[] = {2, 1};
	Onnx__ModelProto *m = model_new();
	struct rt_opt_report rep;
	struct rt_graph *g;
	Onnx__NodeProto *n;

	input(m, "x", 4, x);
	init(m, "w", 4, w, NULL, 0.4f, 0);
	init(m, "w2", 4, w2, NULL, 0.4f, 0);
	init(m, "b2", 1, b2, NULL, 0.4f, 0);
	scalar(m, "lo", -0.2f);
	scalar(m, "hi", 0.3f);
	n = onnx_build_node(m, NULL, "Conv", "x,w", "c");
	onnx_build_attr_ints(n, "strides", strides, 2);
	onnx_build_attr_ints(n, "pads", pads, 4);
	onnx_build_attr_ints(n, "dilations", dil, 2);
	onnx_build_attr_int(n, "group", 2);
	n = onnx_build_node(m, NULL, "LeakyRelu", "c", "l");
	onnx_build_attr_float(n, "alpha", 0.2f);
	onnx_build_node(m, NULL, "Conv", "l,w2,b2", "c2");
	onnx_build_node(m, NULL, "Clip", "c2,lo,hi", "y");
	output(m, "y");
	g = check_same(m, g_batches, NB, &rep);
	CU_ASSERT_EQUAL(g->num_nodes, 2);
	CU_ASSERT_EQUAL(report_count(&rep, "Conv+LeakyRelu"), 1);
	CU_ASSERT_EQUAL(report_count(&rep, "Conv+Clip"), 1);
	rt_graph_free(g);
}

/*
 * The packed path's B packer on wide rows (panels inside one output row: the copy and the stride-2
 * shuffle) and narrow ones (panels across rows), with a 7x7 stride-2 stem like ResNet's.
 */
static void test_conv_packer_paths(void)
{
	static const int64_t x[] = {-1, 3, 20, 70}, w7[] = {8, 3, 7, 7}, w3[] = {6, 8, 3, 3}, w1[] = {5, 6, 1, 1};
	static const int64_t x2[] = {-1, 32, 9, 15}, w32[] = {7, 32, 3, 3}, p_odd[] = {1, 1, 0, 2};
	static const int64_t s2[] = {2, 2}, p3[] = {3, 3, 3, 3}, p1[] = {1, 1, 1, 1};
	Onnx__ModelProto *m = model_new();
	struct rt_opt_report rep;
	struct rt_graph *g;
	Onnx__NodeProto *n;

	input(m, "x", 4, x);
	init(m, "w7", 4, w7, NULL, 0.2f, 0);
	init(m, "w3", 4, w3, NULL, 0.2f, 0);
	init(m, "w1", 4, w1, NULL, 0.3f, 0);
	n = onnx_build_node(m, NULL, "Conv", "x,w7", "a"); /* [N, 8, 10, 35] */
	onnx_build_attr_ints(n, "strides", s2, 2);
	onnx_build_attr_ints(n, "pads", p3, 4);
	n = onnx_build_node(m, NULL, "Conv", "a,w3", "b"); /* [N, 6, 10, 35] */
	onnx_build_attr_ints(n, "pads", p1, 4);
	n = onnx_build_node(m, NULL, "Conv", "b,w1", "c"); /* 1x1 stride 2: [N, 5, 5, 18] */
	onnx_build_attr_ints(n, "strides", s2, 2);
	onnx_build_node(m, NULL, "Relu", "c", "y");
	/*
	 * 3x3 stride 2, 288 deep (past the direct tiles: the im2col GEMM), outputs 8 wide: every group
	 * of 16 columns crosses output rows (the packer's gathers), with even and uneven pads around
	 */
	input(m, "x2", 4, x2);
	init(m, "w32", 4, w32, NULL, 0.1f, 0);
	n = onnx_build_node(m, NULL, "Conv", "x2,w32", "y2"); /* [N, 7, 5, 8] */
	onnx_build_attr_ints(n, "strides", s2, 2);
	onnx_build_attr_ints(n, "pads", p1, 4);
	n = onnx_build_node(m, NULL, "Conv", "x2,w32", "y3"); /* pads 1 1 0 2: [N, 7, 4, 8] */
	onnx_build_attr_ints(n, "strides", s2, 2);
	onnx_build_attr_ints(n, "pads", p_odd, 4);
	output(m, "y");
	output(m, "y2");
	output(m, "y3");
	g = check_same(m, g_batches, NB, &rep);
	CU_ASSERT_EQUAL(count_op(g, "Conv") + count_op(g, "FusedConv"), 5);
	CU_ASSERT_EQUAL(report_count(&rep, "Conv+Relu"), 1);
	rt_graph_free(g);
}

/*
 * Winograd for 3x3 stride-1 convs of 32 channels or more, F(2x2, 3x3) where an image gives
 * F(4x4, 3x3) fewer than 16 tiles and F(4x4) from there: odd and even output sizes (cut tiles), no
 * padding, uneven padding, more input channels than one k block (300), a ragged panel of output
 * channels, rows of tiles shorter than the transforms' 8 and longer (10: 8 + 2), then a residual
 * and an activation on each form's output. The images of a batch share each GEMM: x's 36 tiles of
 * 2 an image put a batch of 3 in one group, x2's 20 tiles of 4 (14 x 20 outputs) too, x3's 80 (30
 * x 37) go in groups of 2 and 1.
 */
static void test_conv_winograd(void)
{
	static const int64_t x[] = {-1, 300, 9, 20}, w1[] = {36, 300, 3, 3}, w2[] = {36, 36, 3, 3}, w3[] = {33, 36, 3, 3};
	static const int64_t w4[] = {36, 33, 1, 1}, x2[] = {-1, 32, 14, 20}, w5[] = {40, 32, 3, 3};
	static const int64_t x3[] = {-1, 40, 30, 37}, w6[] = {48, 40, 3, 3}, w7[] = {48, 48, 3, 3};
	static const int64_t pads_odd[] = {0, 1, 2, 1}, p1[] = {1, 1, 1, 1};
	Onnx__ModelProto *m = model_new();
	struct rt_opt_report rep;
	struct rt_graph *g;
	Onnx__NodeProto *n;

	input(m, "x", 4, x);
	init(m, "w1", 4, w1, NULL, 0.05f, 0);
	init(m, "w2", 4, w2, NULL, 0.1f, 0);
	init(m, "w3", 4, w3, NULL, 0.2f, 0);
	init(m, "w4", 4, w4, NULL, 0.2f, 0);
	input(m, "x2", 4, x2);
	init(m, "w5", 4, w5, NULL, 0.1f, 0);
	input(m, "x3", 4, x3);
	init(m, "w6", 4, w6, NULL, 0.1f, 0);
	init(m, "w7", 4, w7, NULL, 0.1f, 0);
	n = onnx_build_node(m, NULL, "Conv", "x2,w5", "y2"); /* [N, 40, 14, 20] */
	onnx_build_attr_ints(n, "pads", p1, 4);
	onnx_build_node(m, NULL, "Conv", "x,w1", "a");  /* no padding: [N, 36, 7, 18] */
	n = onnx_build_node(m, NULL, "Conv", "a,w2", "b"); /* pads top 0, left 1, bottom 2, right 1: [N, 36, 7, 18] */
	onnx_build_attr_ints(n, "pads", pads_odd, 4);
	n = onnx_build_node(m, NULL, "Conv", "b,w3", "c"); /* 33 output channels: panels of 6 rows with a ragged last */
	onnx_build_attr_ints(n, "pads", p1, 4);
	onnx_build_node(m, NULL, "Conv", "c,w4", "d");
	onnx_build_node(m, NULL, "Add", "d,a", "s");
	n = onnx_build_node(m, NULL, "LeakyRelu", "s", "y");
	onnx_build_attr_float(n, "alpha", 0.1f);
	n = onnx_build_node(m, NULL, "Conv", "x3,w6", "e"); /* uneven padding: [N, 48, 30, 37] */
	onnx_build_attr_ints(n, "pads", pads_odd, 4);
	n = onnx_build_node(m, NULL, "Conv", "e,w7", "f");
	onnx_build_attr_ints(n, "pads", p1, 4);
	onnx_build_node(m, NULL, "Add", "f,e", "h");
	onnx_build_node(m, NULL, "Relu", "h", "y3");
	output(m, "y");
	output(m, "y2");
	output(m, "y3");
	g = check_same(m, g_batches, NB, &rep);
	CU_ASSERT_EQUAL(report_count(&rep, "Conv+Add+LeakyRelu"), 1);
	CU_ASSERT_EQUAL(report_count(&rep, "Conv+Add+Relu"), 1);
	CU_ASSERT_EQUAL(report_count(&rep, "3x3 Conv as Winograd F(2x2,3x3)"), rt_sg_available() ? 3 : 0);
	CU_ASSERT_EQUAL(report_count(&rep, "3x3 Conv as Winograd F(4x4,3x3)"), rt_sg_available() ? 3 : 0);
	rt_graph_free(g);
}

/*
 * F(4x4, 3x3) on outputs 13 to 16 wide: rows of 4 tiles, whose transforms take two tile rows a
 * vector. 14 x 14 (ResNet-50's third stage: 4 tile rows), 18 x 13 (5: the last pair's second row
 * past the output), with a residual and an activation; batches of 3 share a GEMM (16 and 20 tiles
 * an image), so a last pair's second row runs into the next image's tiles.
 */
static void test_conv_winograd_paired_rows(void)
{
	static const int64_t x4[] = {-1, 32, 14, 14}, x5[] = {-1, 32, 18, 13}, w[] = {40, 32, 3, 3};
	static const int64_t w2[] = {40, 40, 3, 3}, p1[] = {1, 1, 1, 1};
	Onnx__ModelProto *m = model_new();
	struct rt_opt_report rep;
	struct rt_graph *g;
	Onnx__NodeProto *n;

	input(m, "x4", 4, x4);
	input(m, "x5", 4, x5);
	init(m, "w", 4, w, NULL, 0.1f, 0);
	init(m, "w2", 4, w2, NULL, 0.1f, 0);
	n = onnx_build_node(m, NULL, "Conv", "x4,w", "c4"); /* [N, 40, 14, 14] */
	onnx_build_attr_ints(n, "pads", p1, 4);
	onnx_build_node(m, NULL, "Relu", "c4", "y4");
	n = onnx_build_node(m, NULL, "Conv", "x5,w", "c5"); /* [N, 40, 18, 13] */
	onnx_build_attr_ints(n, "pads", p1, 4);
	n = onnx_build_node(m, NULL, "Conv", "c5,w2", "d5");
	onnx_build_attr_ints(n, "pads", p1, 4);
	onnx_build_node(m, NULL, "Add", "d5,c5", "s5");
	onnx_build_node(m, NULL, "Relu", "s5", "y5");
	output(m, "y4");
	output(m, "y5");
	g = check_same(m, g_batches, NB, &rep);
	CU_ASSERT_EQUAL(report_count(&rep, "3x3 Conv as Winograd F(4x4,3x3)"), rt_sg_available() ? 3 : 0);
	rt_graph_free(g);
}

/* Weights that are an input: nothing to pack, the OpenBLAS path with the residual and activation. */
static void test_conv_unpacked(void)
{
	static const int64_t x[] = {-1, 4, 9, 9}, w[] = {4, 4, 3, 3}, pads[] = {1, 1, 1, 1};
	Onnx__ModelProto *m = model_new();
	struct rt_opt_report rep;
	struct rt_graph *g;
	Onnx__NodeProto *n;

	input(m, "x", 4, x);
	input(m, "w", 4, w);
	n = onnx_build_node(m, NULL, "Conv", "x,w", "c");
	onnx_build_attr_ints(n, "pads", pads, 4);
	onnx_build_node(m, NULL, "Add", "x,c", "a");
	onnx_build_node(m, NULL, "Relu", "a", "y");
	output(m, "y");
	g = check_same(m, g_batches, NB, &rep);
	CU_ASSERT_EQUAL(g->num_nodes, 1);
	CU_ASSERT_EQUAL(report_count(&rep, "Conv+Add+Relu"), 1);
	CU_ASSERT_EQUAL(rt_attr_int(&g->nodes[0], "packed_weights", 0), 0);
	rt_graph_free(g);
}

/* BN after a Conv whose output something else reads too: nothing may change. */
static void test_conv_bn_second_reader(void)
{
	static const int64_t x[] = {-1, 3, 6, 6}, w[] = {4, 3, 3, 3};
	Onnx__ModelProto *m = model_new();
	struct rt_opt_report rep;
	struct rt_graph *g;

	input(m, "x", 4, x);
	init(m, "w", 4, w, NULL, 0.3f, 0);
	bn_params(m, "bn", 4);
	onnx_build_node(m, NULL, "Conv", "x,w", "c");
	onnx_build_node(m, NULL, "BatchNormalization", "c,bn_scale,bn_bias,bn_mean,bn_var", "y");
	onnx_build_node(m, NULL, "Relu", "c", "z");
	output(m, "y");
	output(m, "z");
	g = check_same(m, g_batches, NB, &rep);
	CU_ASSERT_EQUAL(g->num_nodes, 3);
	CU_ASSERT_EQUAL(count_op(g, "BatchNormalization"), 1);
	CU_ASSERT_EQUAL(count_op(g, "Relu"), 1);
	/* the Conv itself may have its weights packed (a FusedConv with nothing fused) */
	CU_ASSERT_EQUAL(count_op(g, "Conv") + count_op(g, "FusedConv"), 1);
	CU_ASSERT_EQUAL(rep.nodes_after, rep.nodes_before);
	rt_graph_free(g);
}

/* BN whose statistics are not constants, and an Add that broadcasts: not folded, not a residual. */
static void test_conv_not_fusable(void)
{
	static const int64_t x[] = {-1, 3, 6, 6}, w[] = {4, 3, 3, 3}, c4[] = {4}, bc[] = {1, 4, 1, 1};
	Onnx__ModelProto *m = model_new();
	struct rt_opt_report rep;
	struct rt_graph *g;

	input(m, "x", 4, x);
	input(m, "mean", 1, c4);
	init(m, "w", 4, w, NULL, 0.3f, 0);
	init(m, "bcast", 4, bc, NULL, 0.3f, 0);
	bn_params(m, "bn", 4);
	onnx_build_node(m, NULL, "Conv", "x,w", "c");
	onnx_build_node(m, NULL, "BatchNormalization", "c,bn_scale,bn_bias,mean,bn_var", "n");
	onnx_build_node(m, NULL, "Conv", "x,w", "c2");
	onnx_build_node(m, NULL, "Add", "c2,bcast", "y2");
	onnx_build_node(m, NULL, "Add", "n,y2", "y");
	output(m, "y");
	g = check_same(m, g_batches, NB, &rep);
	CU_ASSERT_EQUAL(count_op(g, "BatchNormalization"), 1);
	CU_ASSERT_EQUAL(count_op(g, "Conv") + count_op(g, "FusedConv"), 2);
	CU_ASSERT_EQUAL(count_op(g, "Add"), 2);
	for (uint32_t i = 0; i < g->num_nodes; i++) { /* no residual input taken */
		if (strcmp(g->nodes[i].op_type, "FusedConv") == 0)
			CU_ASSERT(g->nodes[i].inputs[3] == RT_VALUE_NONE);
	}
	CU_ASSERT_EQUAL(rep.nodes_after, rep.nodes_before);
	rt_graph_free(g);
}

/* ---- MatMul and Gemm -------------------------------------------------------------------------------- */

static void test_matmul_add_relu(void)
{
	static const int64_t a[] = {-1, 5, 16}, b[] = {16, 24}, c[] = {24}, a2[] = {-1, 16}, b2[] = {16, 40};
	Onnx__ModelProto *m = model_new();
	struct rt_opt_report rep;
	struct rt_graph *g;

	input(m, "a", 3, a);
	input(m, "a2", 2, a2);
	init(m, "b", 2, b, NULL, 0.3f, 0);
	init(m, "c", 1, c, NULL, 0.3f, 0);
	init(m, "b2", 2, b2, NULL, 0.3f, 0);
	init(m, "c2", 1, b2 + 1, NULL, 0.3f, 0);
	onnx_build_node(m, NULL, "MatMul", "a,b", "p");
	onnx_build_node(m, NULL, "Add", "c,p", "q"); /* bias first: Add commutes */
	onnx_build_node(m, NULL, "Relu", "q", "y");
	onnx_build_node(m, NULL, "MatMul", "a2,b2", "p2");
	onnx_build_node(m, NULL, "Add", "p2,c2", "y2");
	output(m, "y");
	output(m, "y2");
	g = check_same(m, g_batches, NB, &rep);
	CU_ASSERT_EQUAL(g->num_nodes, 2);
	CU_ASSERT_EQUAL(count_op(g, "FusedGemm"), 2);
	CU_ASSERT_EQUAL(report_count(&rep, "MatMul+Add+Relu"), 1);
	CU_ASSERT_EQUAL(report_count(&rep, "MatMul+Add"), 1);
	rt_graph_free(g);
}

/* Both ways exporters write the erf GELU, after MatMul + Add. */
static void gelu_model(bool mul_first, float div, bool *ok)
{
	static const int64_t a[] = {-1, 7, 12}, b[] = {12, 20}, c[] = {20};
	Onnx__ModelProto *m = model_new();
	struct rt_opt_report rep;
	struct rt_graph *g;

	input(m, "a", 3, a);
	init(m, "b", 2, b, NULL, 0.5f, 0);
	init(m, "c", 1, c, NULL, 0.5f, 0);
	scalar(m, "half", 0.5f);
	scalar(m, "one", 1.0f);
	scalar(m, "k", div);
	onnx_build_node(m, NULL, "MatMul", "a,b", "p");
	onnx_build_node(m, NULL, "Add", "p,c", "x");
	if (mul_first) { /* HF BERT: x * 0.5 * (1 + erf(x * (1/sqrt2))) */
		onnx_build_node(m, NULL, "Mul", "x,k", "d");
		onnx_build_node(m, NULL, "Erf", "d", "e");
		onnx_build_node(m, NULL, "Add", "one,e", "f");
		onnx_build_node(m, NULL, "Mul", "half,x", "h");
		onnx_build_node(m, NULL, "Mul", "h,f", "y");
	} else { /* torch.nn.GELU: (x * (1 + erf(x / sqrt2))) * 0.5 */
		onnx_build_node(m, NULL, "Div", "x,k", "d");
		onnx_build_node(m, NULL, "Erf", "d", "e");
		onnx_build_node(m, NULL, "Add", "e,one", "f");
		onnx_build_node(m, NULL, "Mul", "x,f", "h");
		onnx_build_node(m, NULL, "Mul", "h,half", "y");
	}
	output(m, "y");
	g = check_same(m, g_batches, NB, &rep);
	*ok = g->num_nodes == 1 && report_count(&rep, "MatMul+Add+Gelu") == 1;
	if (!*ok)
		CU_ASSERT_EQUAL(report_count(&rep, "MatMul+Add"), 1);
	rt_graph_free(g);
}

static void test_matmul_add_gelu(void)
{
	bool ok;

	gelu_model(false, 1.4142135381698608f, &ok);
	CU_ASSERT(ok);
	gelu_model(true, 0.7071067690849304f, &ok);
	CU_ASSERT(ok);
	gelu_model(false, 1.5f, &ok); /* not the GELU: left as it is, after the bias fusion */
	CU_ASSERT(!ok);
}

/* Gemm transB=1 with alpha, beta and a [1, N] C, then Relu; N < 32 at batch 1: the GEMV copy too. */
static void test_gemm_transb(void)
{
	static const int64_t a[] = {-1, 16}, b[] = {8, 16}, c[] = {1, 8};
	Onnx__ModelProto *m = model_new();
	struct rt_opt_report rep;
	struct rt_graph *g;
	Onnx__NodeProto *n;

	input(m, "a", 2, a);
	init(m, "b", 2, b, NULL, 0.5f, 0);
	init(m, "c", 2, c, NULL, 0.5f, 0);
	n = onnx_build_node(m, NULL, "Gemm", "a,b,c", "p");
	onnx_build_attr_int(n, "transB", 1);
	onnx_build_attr_float(n, "alpha", 0.5f);
	onnx_build_attr_float(n, "beta", 2.0f);
	onnx_build_node(m, NULL, "Relu", "p", "y");
	output(m, "y");
	g = check_same(m, g_batches, NB, &rep);
	CU_ASSERT_EQUAL(g->num_nodes, 1);
	CU_ASSERT_EQUAL(count_op(g, "FusedGemm"), 1);
	CU_ASSERT_EQUAL(report_count(&rep, "Gemm+Relu"), 1);
	/* B [K, N] (into panels where batchwire's GEMM runs), and [N, K] kept for the GEMV of one row */
	CU_ASSERT(report_count(&rep, "weights pre-packed") >= 1);
	CU_ASSERT_EQUAL(g->nodes[0].num_inputs, 4);
	CU_ASSERT(g->nodes[0].inputs[3] != RT_VALUE_NONE);
	CU_ASSERT_EQUAL(rt_attr_int(&g->nodes[0], "packed_weights", 0), rt_sg_available() ? 1 : 0);
	rt_graph_free(g);
}

/*
 * The packed GEMMs' blocking: depth over one k block (500 > RT_SG_KC_B, 360 > RT_SG_KC), more rows than one
 * block of activations (210 at batch 3), widths that are no multiple of the 16-column panels.
 */
static void test_packed_blocking(void)
{
	static const int64_t a[] = {-1, 70, 500}, b[] = {500, 37}, c[] = {37};
	static const int64_t x[] = {-1, 40, 7, 19}, w[] = {13, 40, 3, 3}, pads[] = {1, 1, 1, 1};
	Onnx__ModelProto *m = model_new();
	struct rt_opt_report rep;
	struct rt_graph *g;
	Onnx__NodeProto *n;

	input(m, "a", 3, a);
	input(m, "x", 4, x);
	init(m, "b", 2, b, NULL, 0.1f, 0);
	init(m, "c", 1, c, NULL, 0.5f, 0);
	init(m, "w", 4, w, NULL, 0.1f, 0);
	onnx_build_node(m, NULL, "MatMul", "a,b", "p");
	onnx_build_node(m, NULL, "Add", "p,c", "q");
	onnx_build_node(m, NULL, "Relu", "q", "y");
	n = onnx_build_node(m, NULL, "Conv", "x,w", "cv");
	onnx_build_attr_ints(n, "pads", pads, 4);
	onnx_build_node(m, NULL, "Relu", "cv", "y2");
	output(m, "y");
	output(m, "y2");
	g = check_same(m, g_batches, NB, &rep);
	CU_ASSERT_EQUAL(g->num_nodes, 2);
	CU_ASSERT_EQUAL(report_count(&rep, "MatMul+Add+Relu"), 1);
	CU_ASSERT_EQUAL(report_count(&rep, "Conv+Relu"), 1);
	rt_graph_free(g);
}

/* Non-constant B, a bias of the product's full shape, a Gemm with transA: left alone. */
static void test_gemm_not_fusable(void)
{
	static const int64_t a[] = {5, 16}, b[] = {16, 24}, full[] = {5, 24}, at[] = {16, 5};
	Onnx__ModelProto *m = model_new();
	struct rt_opt_report rep;
	struct rt_graph *g;
	Onnx__NodeProto *n;

	input(m, "a", 2, a);
	input(m, "bin", 2, b);
	input(m, "at", 2, at);
	init(m, "b", 2, b, NULL, 0.3f, 0);
	init(m, "full", 2, full, NULL, 0.3f, 0);
	onnx_build_node(m, NULL, "MatMul", "a,bin", "p");
	onnx_build_node(m, NULL, "Add", "p,full", "y");
	onnx_build_node(m, NULL, "MatMul", "a,b", "p2");
	onnx_build_node(m, NULL, "Add", "p2,full", "y2");
	n = onnx_build_node(m, NULL, "Gemm", "at,b", "y3");
	onnx_build_attr_int(n, "transA", 1);
	output(m, "y");
	output(m, "y2");
	output(m, "y3");
	g = check_same(m, g_batches, 1, &rep);
	/* the MatMul of a constant B may have its weights packed (a FusedGemm with nothing fused) */
	CU_ASSERT_EQUAL(count_op(g, "MatMul") + count_op(g, "FusedGemm"), 2);
	CU_ASSERT(count_op(g, "MatMul") >= 1);
	CU_ASSERT_EQUAL(count_op(g, "Add"), 2);
	CU_ASSERT_EQUAL(count_op(g, "Gemm"), 1);
	rt_graph_free(g);
}

/* A weight computed by a Transpose of an initializer, a bias by a Constant node: folded, then fused. */
static void test_constant_folding(void)
{
	static const int64_t a[] = {-1, 6}, bt[] = {10, 6}, perm[] = {1, 0};
	Onnx__ModelProto *m = model_new();
	Onnx__TensorProto *t = NEW(Onnx__TensorProto, ONNX__TENSOR_PROTO__INIT);
	Onnx__AttributeProto *value;
	struct rt_opt_report rep;
	struct rt_graph *g;
	Onnx__NodeProto *n;

	input(m, "a", 2, a);
	init(m, "bt", 2, bt, NULL, 0.5f, 0);
	n = onnx_build_node(m, NULL, "Transpose", "bt", "b");
	onnx_build_attr_ints(n, "perm", perm, 2);
	n = onnx_build_node(m, NULL, "Constant", "", "c");
	value = onnx_build_attr(n, "value", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR);
	t->has_data_type = true;
	t->data_type = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT;
	PUSH(t->dims, t->n_dims, 10);
	for (int i = 0; i < 10; i++)
		PUSH(t->float_data, t->n_float_data, 0.1f * (float)i);
	value->t = t;
	onnx_build_node(m, NULL, "MatMul", "a,b", "p");
	onnx_build_node(m, NULL, "Add", "p,c", "y");
	output(m, "y");
	g = check_same(m, g_batches, NB, &rep);
	CU_ASSERT_EQUAL(g->num_nodes, 1);
	CU_ASSERT_EQUAL(report_count(&rep, "constants folded"), 2);
	CU_ASSERT_EQUAL(report_count(&rep, "MatMul+Add"), 1);
	rt_graph_free(g);
}

/* ---- attention: MatMuls of computed operands, their Reshape/Transpose and the scale folded ------------ */

static void int64_init(Onnx__ModelProto *m, const char *name, const int64_t *v, int64_t n)
{
	Onnx__TensorProto *t = NEW(Onnx__TensorProto, ONNX__TENSOR_PROTO__INIT);

	t->name = strdup(name);
	t->has_data_type = true;
	t->data_type = ONNX__TENSOR_PROTO__DATA_TYPE__INT64;
	PUSH(t->dims, t->n_dims, n);
	for (int64_t i = 0; i < n; i++)
		PUSH(t->int64_data, t->n_int64_data, v[i]);
	PUSH(m->graph->initializer, m->graph->n_initializer, t);
}

/*
 * BERT's self-attention core as exporters write it (heads 3, head size 4, sequence 5): the six
 * Reshape/Transpose nodes and the Div fold into two FusedMatMuls; Transposes that leave no
 * contiguous dim in a matrix stay as they are.
 */
static void test_attention(void)
{
	static const int64_t x[] = {-1, 5, 12}, heads[] = {-1, 5, 3, 4}, hidden[] = {-1, 5, 12};
	static const int64_t p0213[] = {0, 2, 1, 3}, p0231[] = {0, 2, 3, 1}, y3[] = {-1, 4, 5}, mask[] = {1, 1, 1, 5};
	static const int64_t p210[] = {2, 1, 0}, p201[] = {2, 0, 1};
	Onnx__ModelProto *m = model_new();
	struct rt_opt_report rep;
	struct rt_graph *g;
	Onnx__NodeProto *n;

	input(m, "q", 3, x);
	input(m, "k", 3, x);
	input(m, "v", 3, x);
	input(m, "u", 3, y3);
	init(m, "mask", 4, mask, NULL, 2.0f, -1.0f); /* an additive mask bias, broadcast over batch, heads, rows */
	int64_init(m, "heads", heads, 4);
	int64_init(m, "hidden", hidden, 3);
	scalar(m, "scale", 2.0f);
	onnx_build_node(m, NULL, "Reshape", "q,heads", "q4");
	n = onnx_build_node(m, NULL, "Transpose", "q4", "qt");
	onnx_build_attr_ints(n, "perm", p0213, 4);
	onnx_build_node(m, NULL, "Reshape", "k,heads", "k4");
	n = onnx_build_node(m, NULL, "Transpose", "k4", "kt");
	onnx_build_attr_ints(n, "perm", p0231, 4);
	onnx_build_node(m, NULL, "Reshape", "v,heads", "v4");
	n = onnx_build_node(m, NULL, "Transpose", "v4", "vt");
	onnx_build_attr_ints(n, "perm", p0213, 4);
	onnx_build_node(m, NULL, "MatMul", "qt,kt", "s");
	onnx_build_node(m, NULL, "Div", "s,scale", "ss");
	onnx_build_node(m, NULL, "Add", "mask,ss", "sm");
	onnx_build_node(m, NULL, "Softmax", "sm", "p");
	onnx_build_node(m, NULL, "MatMul", "p,vt", "c");
	n = onnx_build_node(m, NULL, "Transpose", "c", "ct");
	onnx_build_attr_ints(n, "perm", p0213, 4);
	onnx_build_node(m, NULL, "Reshape", "ct,hidden", "y");
	/* u [N, 4, 5] as [5, 4, N] and [5, N, 4]: matrices with no contiguous dim, left to the MatMul */
	n = onnx_build_node(m, NULL, "Transpose", "u", "ua");
	onnx_build_attr_ints(n, "perm", p210, 3);
	n = onnx_build_node(m, NULL, "Transpose", "u", "ub");
	onnx_build_attr_ints(n, "perm", p201, 3);
	onnx_build_node(m, NULL, "MatMul", "ua,ub", "y2");
	output(m, "y");
	output(m, "y2");
	g = check_same(m, g_batches, NB, &rep);
	CU_ASSERT_EQUAL(report_count(&rep, "MatMul with Transpose/Reshape/scale folded"), 2);
	/* the two FusedMatMuls and the Softmax between them: one FusedAttention */
	CU_ASSERT_EQUAL(report_count(&rep, "attention (scores, softmax, context) fused"), 1);
	CU_ASSERT_EQUAL(count_op(g, "FusedAttention"), 1);
	CU_ASSERT_EQUAL(count_op(g, "FusedMatMul"), 0);
	CU_ASSERT_EQUAL(count_op(g, "Softmax"), 0);
	CU_ASSERT_EQUAL(count_op(g, "Div"), 0);
	CU_ASSERT_EQUAL(count_op(g, "Add"), 0); /* the mask: the scores' product's input C */
	CU_ASSERT_EQUAL(count_op(g, "MatMul"), 1); /* the one of u's views */
	CU_ASSERT_EQUAL(count_op(g, "Transpose"), 2);
	rt_graph_free(g);
}

/*
 * The runtime's bound on an input that indexes tables (what admission checks token ids against):
 * the rows of the smallest constant table a Gather reads with it, along the Gather's axis; none
 * for an integer input no Gather indexes.
 */
static void test_index_bounds(void)
{
	static const int64_t ids[] = {-1, 4}, t1[] = {10, 3}, t2[] = {7, 2};
	char path[] = "/tmp/bw-opt-bounds-XXXXXX", err[RT_ERR_MAX];
	Onnx__ModelProto *m = model_new();
	struct rt_model model;
	Onnx__NodeProto *n;
	uint8_t *buf;
	size_t len;
	int fd, rc;

	onnx_build_input(m, "ids", ONNX__TENSOR_PROTO__DATA_TYPE__INT64, 2, ids);
	onnx_build_input(m, "pos", ONNX__TENSOR_PROTO__DATA_TYPE__INT64, 2, ids);
	init(m, "t1", 2, t1, NULL, 1.0f, 0);
	init(m, "t2", 2, t2, NULL, 1.0f, 0);
	onnx_build_node(m, NULL, "Gather", "t1,ids", "a"); /* 10 rows */
	n = onnx_build_node(m, NULL, "Gather", "t2,ids", "b"); /* axis -2 of [7, 2]: 7 rows */
	onnx_build_attr_int(n, "axis", -2);
	n = onnx_build_node(m, NULL, "Cast", "pos", "c");
	onnx_build_attr_int(n, "to", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT);
	output(m, "a");
	output(m, "b");
	output(m, "c");
	buf = onnx_build_pack(m, &len);
	onnx__model_proto__free_unpacked(m, NULL);
	fd = mkstemp(path);
	CU_ASSERT_FATAL(fd >= 0);
	CU_ASSERT_FATAL(write(fd, buf, len) == (ssize_t)len);
	close(fd);
	free(buf);
	rc = rt_onnx_model_load(&model, 1, "bounds", path, RT_DEVICE_CPU, NULL, NULL, err, sizeof(err));
	unlink(path);
	if (rc != 0)
		fprintf(stderr, "load: %s\n", err);
	CU_ASSERT_EQUAL_FATAL(rc, 0);
	CU_ASSERT_EQUAL_FATAL(model.num_inputs, 2);
	CU_ASSERT_EQUAL(model.inputs[0].index_bound, 7);
	CU_ASSERT_EQUAL(model.inputs[1].index_bound, 0);
	rt_model_fini(&model);
}

/* ---- fast paths ------------------------------------------------------------------------------------- */

static void test_fast_paths(void)
{
	static const int64_t s[] = {-1, 3, 37}, l[] = {-1, 4, 20}, p[] = {-1, 3, 13, 12}, ln[] = {20};
	static const int64_t k3[] = {3, 3}, s2[] = {2, 2}, pads[] = {1, 1, 1, 0};
	Onnx__ModelProto *m = model_new();
	struct rt_opt_report rep;
	struct rt_graph *g;
	Onnx__NodeProto *n;

	input(m, "s", 3, s);
	input(m, "l", 3, l);
	input(m, "p", 4, p);
	init(m, "gamma", 1, ln, NULL, 0.5f, 1.0f);
	init(m, "beta", 1, ln, NULL, 0.5f, 0);
	onnx_build_node(m, NULL, "Softmax", "s", "ys");
	n = onnx_build_node(m, NULL, "Softmax", "s", "ys1"); /* an inner axis: stays the reference kernel */
	onnx_build_attr_int(n, "axis", 1);
	n = onnx_build_node(m, NULL, "LayerNormalization", "l,gamma,beta", "yl");
	onnx_build_attr_float(n, "epsilon", 1e-3f);
	n = onnx_build_node(m, NULL, "MaxPool", "p", "yp");
	onnx_build_attr_ints(n, "kernel_shape", k3, 2);
	onnx_build_attr_ints(n, "strides", s2, 2);
	onnx_build_attr_ints(n, "pads", pads, 4);
	onnx_build_attr_int(n, "ceil_mode", 1);
	output(m, "ys");
	output(m, "ys1");
	output(m, "yl");
	output(m, "yp");
	g = check_same(m, g_batches, NB, &rep);
	CU_ASSERT_EQUAL(report_count(&rep, "Softmax (last axis, vectorized)"), 1);
	CU_ASSERT_EQUAL(report_count(&rep, "LayerNormalization (vectorized)"), 1);
	CU_ASSERT_EQUAL(report_count(&rep, "MaxPool (2-D rows)"), 1);
	for (uint32_t i = 0; i < g->num_nodes; i++) {
		const struct rt_node *nd = &g->nodes[i];
		bool inner = strcmp(nd->op_type, "Softmax") == 0 && rt_attr_int(nd, "axis", -1) == 1;

		CU_ASSERT_STRING_EQUAL(nd->domain, inner ? "" : RT_K_DOMAIN);
	}
	rt_graph_free(g);
}

/* ---- the vector math against libm ------------------------------------------------------------------ */

/* ---- small images: sgemm.c's same-width im2col packer and fastpath.c's 2x2 MaxPool ---------------- */

/* A model with input "x" [N, c, h, w] and output "y". */
static Onnx__ModelProto *model_image(int64_t c, int64_t h, int64_t w)
{
	Onnx__ModelProto *m = model_new();
	const int64_t dims[] = {-1, c, h, w};

	input(m, "x", 4, dims);
	output(m, "y");
	return m;
}

/* Conv in -> out (cout filters of kh x kw over cin channels, bias) with pads, dilations, then BN and Relu. */
static void conv_bn_relu_block(Onnx__ModelProto *m, const char *prefix, const char *in, const char *out, int64_t cin,
			       int64_t cout, int64_t kh, int64_t kw, const int64_t *pads, const int64_t *dilations)
{
	char w[32], b[32], c[32], bn[160], n[32];
	const int64_t wd[] = {cout, cin, kh, kw};
	Onnx__NodeProto *node;

	snprintf(w, sizeof(w), "%s_w", prefix);
	snprintf(b, sizeof(b), "%s_b", prefix);
	snprintf(c, sizeof(c), "%s_c", prefix);
	snprintf(n, sizeof(n), "%s_n", prefix);
	init(m, w, 4, wd, NULL, 1.0f / (float)(cin * kh * kw), 0.0f);
	init(m, b, 1, &cout, NULL, 0.1f, 0.0f);
	snprintf(bn, sizeof(bn), "%s,%s,%s", in, w, b);
	node = onnx_build_node(m, NULL, "Conv", bn, c);
	onnx_build_attr_ints(node, "pads", pads, 4);
	if (dilations != NULL)
		onnx_build_attr_ints(node, "dilations", dilations, 2);
	bn_params(m, prefix, cout);
	snprintf(bn, sizeof(bn), "%s,%s_scale,%s_bias,%s_mean,%s_var", c, prefix, prefix, prefix, prefix);
	onnx_build_node(m, NULL, "BatchNormalization", bn, n);
	onnx_build_node(m, NULL, "Relu", n, out);
}

static void maxpool_2x2(Onnx__ModelProto *m, const char *in, const char *out, int64_t ceil_mode)
{
	static const int64_t two[] = {2, 2};
	Onnx__NodeProto *node = onnx_build_node(m, NULL, "MaxPool", in, out);

	onnx_build_attr_ints(node, "kernel_shape", two, 2);
	onnx_build_attr_ints(node, "strides", two, 2);
	if (ceil_mode != 0)
		onnx_build_attr_int(node, "ceil_mode", ceil_mode);
}

/* m at batches 1, 3 and 8 against the graph as loaded; each optimized graph with fused_convs
 * FusedConvs (on the packed GEMM, at avx2 and above) and fast_pools fast MaxPools. */
static void check_small(Onnx__ModelProto *m, uint32_t fused_convs, uint32_t fast_pools)
{
	static const int64_t batches[] = {1, 3, 8};
	const struct op_count expect[] = { {"FusedConv", fused_convs}, {"MaxPool", fast_pools} };
	struct rt_opt_report rep;

	rt_graph_free(check_same_counting(m, batches, 3, &rep, expect, 2));
}

/* The small CNN's convolution blocks (models/gen_models.py cnn()): 28x28 and 14x14, 3x3 pad 1. */
static void test_cnn_blocks(void)
{
	static const int64_t p1[] = {1, 1, 1, 1};
	Onnx__ModelProto *m = model_image(1, 28, 28);

	conv_bn_relu_block(m, "c1", "x", "r1", 1, 16, 3, 3, p1, NULL);
	maxpool_2x2(m, "r1", "p1", 0);
	conv_bn_relu_block(m, "c2", "p1", "r2", 16, 32, 3, 3, p1, NULL);
	maxpool_2x2(m, "r2", "y", 0);
	/*
	 * at avx2 and above the first conv's row tiles take its pool in (attribute "pool"); at avx2 the
	 * second conv's pixel tiles take its pool too (the AVX-512 path has no pooled pixel tile)
	 */
	check_small(m, 2, rt_cpu_isa_active() == RT_CPU_ISA_AVX2 ? 0 : rt_cpu_isa_active() > RT_CPU_ISA_AVX2 ? 1 : 2);
}

/*
 * The same-width packer's edges: 5x5 pad 2 on odd sizes, dilation 2, pads only at the end (the
 * output still as wide as the input), rows narrower than a group (1, 3 and 5 wide: a group crosses
 * up to 16 output rows), and 40 channels of 3x3 (k 360: two k blocks, the second starting inside a
 * channel).
 */
static void test_same_width_packer(void)
{
	static const int64_t p2[] = {2, 2, 2, 2}, p_end[] = {0, 0, 2, 2}, d2[] = {2, 2}, p1[] = {1, 1, 1, 1};
	static const int64_t sizes[][2] = {{13, 9}, {4, 1}, {7, 3}, {6, 5}, {3, 37}};

	for (unsigned int i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		Onnx__ModelProto *m = model_image(3, sizes[i][0], sizes[i][1]);

		conv_bn_relu_block(m, "a", "x", "ra", 3, 5, 5, 5, p2, NULL);
		conv_bn_relu_block(m, "b", "ra", "rb", 5, 7, 3, 3, p2, d2);
		conv_bn_relu_block(m, "c", "rb", "rc", 7, 40, 3, 3, p_end, NULL);
		conv_bn_relu_block(m, "d", "rc", "y", 40, 9, 3, 3, p1, NULL);
		check_small(m, 4, 0);
	}
}

/*
 * 2x2 stride-2 MaxPool rows: odd sizes (the last row and column left out), rows of more than one
 * vector of outputs (70 wide: 35 outputs), one output wide, rows of at most 8 outputs (two to a
 * vector at AVX-512: 8 exactly, 7 as the CNN's, an odd number of output rows); at AVX2 a row's
 * last part vector overlaps the one before it: 4 to 7 outputs (two vectors of 4), 11 and 35 (8 and
 * an overlapping 8). With ceil_mode on an odd size the last window is partial and the general path
 * runs instead.
 */
static void test_maxpool_2x2(void)
{
	static const int64_t sizes[][2] = {{7, 9}, {4, 70}, {2, 2}, {3, 33}, {10, 64}, {6, 16}, {14, 14}, {5, 15},
					   {3, 12}, {5, 22}, {2, 10}};
	Onnx__ModelProto *m;

	for (unsigned int i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		m = model_image(3, sizes[i][0], sizes[i][1]);
		maxpool_2x2(m, "x", "y", 0);
		check_small(m, 0, 1);
	}
	m = model_image(2, 7, 9);
	maxpool_2x2(m, "x", "y", 1);
	check_small(m, 0, 1);
}

/*
 * 3x3 stride-2 MaxPool (ResNet's stem pool): the outputs whose windows lie wholly inside a row are
 * vectorized at AVX2 (whole vectors of 8) and AVX-512 (16, masked), the others and rows under the
 * padding are not; widths from one column (no window inside) to more than 16 outputs, pads 0 and
 * 1, odd and even sizes.
 */
static void test_maxpool_3x3s2(void)
{
	static const int64_t sizes[][2] = {{7, 9}, {4, 112}, {5, 2}, {3, 3}, {6, 1}, {9, 33}, {3, 36}, {2, 4}};
	static const int64_t three[] = {3, 3}, two[] = {2, 2}, one[] = {1, 1, 1, 1}, none[] = {0, 0, 0, 0};

	for (unsigned int i = 0; i < 2 * sizeof(sizes) / sizeof(sizes[0]); i++) {
		unsigned int sz = i / 2;
		Onnx__ModelProto *m;
		Onnx__NodeProto *node;

		if (i % 2 == 0 && (sizes[sz][0] < 3 || sizes[sz][1] < 3))
			continue; /* unpadded, the window must fit */
		m = model_image(3, sizes[sz][0], sizes[sz][1]);
		node = onnx_build_node(m, NULL, "MaxPool", "x", "y");
		onnx_build_attr_ints(node, "kernel_shape", three, 2);
		onnx_build_attr_ints(node, "strides", two, 2);
		onnx_build_attr_ints(node, "pads", i % 2 ? one : none, 4);
		check_small(m, 0, 1);
	}
}

static void test_vecmath(void)
{
	enum { N = 40001 };
	static float x[N], y[N];
	double worst_exp = 0, worst_erf = 0;

	for (int i = 0; i < N; i++)
		x[i] = -87.0f + 175.0f * (float)i / (N - 1);
	rt_vm_exp(y, x, N);
	for (int i = 0; i < N; i++) {
		double e = exp((double)x[i]), d = fabs(y[i] - e) / e;

		worst_exp = d > worst_exp ? d : worst_exp;
	}
	for (int i = 0; i < N; i++)
		x[i] = -6.0f + 12.0f * (float)i / (N - 1);
	rt_vm_erf(y, x, N);
	for (int i = 0; i < N; i++) {
		double e = erf((double)x[i]), d = fabs(y[i] - e) / fmax(fabs(e), 1e-3);

		worst_erf = d > worst_erf ? d : worst_erf;
	}
	printf("\n    exp: largest relative error %.3g; erf: %.3g\n", worst_exp, worst_erf);
	CU_ASSERT(worst_exp < 4e-7);  /* about 3 float ulps */
	CU_ASSERT(worst_erf < 4e-7);
	x[0] = NAN;
	x[1] = -INFINITY;
	x[2] = INFINITY;
	rt_vm_erf(y, x, 3);
	CU_ASSERT(isnan(y[0]));
	CU_ASSERT_EQUAL(y[1], -1.0f);
	CU_ASSERT_EQUAL(y[2], 1.0f);
	rt_vm_exp(y, x, 3);
	CU_ASSERT(isnan(y[0]));
}

/* The small direct GEMM (gemm_small.c) against a double-precision product, at the kernels' level
 * (BW_CPU_ISA moves it): tiles cut at every row and column edge, leading dimensions wider than the
 * rows, alpha, beta 0 over a C full of NaN (never read), beta 1; and no heap call, through rt_k_gemm
 * as the kernels call it, which is where OpenBLAS's small-matrix kernels allocate on some CPUs. */
static void test_gemm_small(void)
{
	static const int64_t shapes[][3] = {{2, 16, 36}, {6, 16, 1}, {7, 17, 5}, {5, 3, 9}, {13, 40, 33},
					    {1, 1, 1}, {36, 81, 36}, {100, 100, 100}, {4, 8, 64}, {12, 31, 2}};
	static float a[128 * 130], b[128 * 130], c[128 * 130], c0[128 * 130];
	static double ad[128 * 130], bd[128 * 130], cd[128 * 130];
	unsigned int seed = 3;
	double worst = 0, worst_d = 0;

	for (size_t i = 0; i < sizeof(a) / sizeof(a[0]); i++) {
		a[i] = (float)rand_r(&seed) / RAND_MAX - 0.5f;
		b[i] = (float)rand_r(&seed) / RAND_MAX - 0.5f;
		c0[i] = (float)rand_r(&seed) / RAND_MAX - 0.5f;
		ad[i] = a[i];
		bd[i] = b[i];
	}
	for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
		int64_t m = shapes[s][0], n = shapes[s][1], k = shapes[s][2];
		int64_t lda = k + 3, ldb = n + 5, ldc = n + 2; /* wider than the rows: strides are honoured */

		CU_ASSERT(rt_gemm_small_fits(false, false, m, n, k));
		for (int beta = 0; beta < 2; beta++) {
			for (int64_t i = 0; i < m * ldc; i++) {
				c[i] = beta ? c0[i] : NAN;
				cd[i] = beta ? (double)c0[i] : NAN;
			}
			alloc_count_start();
			rt_k_gemm(BW_DTYPE_FLOAT, false, false, m, n, k, 0.75f, a, lda, b, ldb, (float)beta, c, ldc);
			rt_k_gemm(BW_DTYPE_DOUBLE, false, false, m, n, k, 0.75f, ad, lda, bd, ldb, (float)beta, cd, ldc);
			alloc_count_stop();
			CU_ASSERT_EQUAL(alloc_count_allocs() + alloc_count_frees(), 0);
			for (int64_t i = 0; i < m; i++) {
				for (int64_t j = 0; j < ldc; j++) {
					double want = beta ? c0[i * ldc + j] : 0;

					if (j >= n) { /* past the row: untouched */
						CU_ASSERT(beta ? c[i * ldc + j] == c0[i * ldc + j] : isnan(c[i * ldc + j]));
						continue;
					}
					for (int64_t p = 0; p < k; p++)
						want += 0.75 * (double)a[i * lda + p] * (double)b[p * ldb + j];
					worst = fmax(worst, fabs(c[i * ldc + j] - want));
					worst_d = fmax(worst_d, fabs(cd[i * ldc + j] - want));
				}
			}
		}
	}
	printf("\n    largest error: float %.3g, double %.3g\n", worst, worst_d);
	CU_ASSERT(worst < 1e-5); /* k <= 100 products of [-0.5, 0.5) */
	CU_ASSERT(worst_d < 1e-12);
	CU_ASSERT_FALSE(rt_gemm_small_fits(true, false, 4, 4, 4));
	CU_ASSERT_FALSE(rt_gemm_small_fits(false, true, 4, 4, 4));
	CU_ASSERT_FALSE(rt_gemm_small_fits(false, false, 101, 100, 100));
}

/*
 * At bf16 a FusedGemm whose output only FusedGemms read, as A with a depth of whole tiles, hands it
 * over in bf16: x -> g1 (Relu) -> g2 hands over (g2's depth 96); g2 -> g3 does not (g3's depth 40),
 * nor g3 (a graph output), nor g4, whose output a Relu reads as well as g5.
 */
static void test_bf16_handoff(void)
{
	static const int64_t x[] = {-1, 3, 64}, w1[] = {64, 96}, b1[] = {96}, w2[] = {96, 40}, w3[] = {40, 32};
	static const int64_t w4[] = {64, 64}, w5[] = {64, 16};
	Onnx__ModelProto *m = model_new();
	struct rt_opt_report rep;
	struct rt_graph *g;
	uint32_t handing = 0;

	input(m, "x", 3, x);
	init(m, "w1", 2, w1, NULL, 0.2f, 0);
	init(m, "b1", 1, b1, NULL, 0.3f, 0);
	init(m, "w2", 2, w2, NULL, 0.2f, 0);
	init(m, "w3", 2, w3, NULL, 0.2f, 0);
	init(m, "w4", 2, w4, NULL, 0.2f, 0);
	init(m, "w5", 2, w5, NULL, 0.2f, 0);
	onnx_build_node(m, NULL, "MatMul", "x,w1", "p1");
	onnx_build_node(m, NULL, "Add", "p1,b1", "q1");
	onnx_build_node(m, NULL, "Relu", "q1", "g1");
	onnx_build_node(m, NULL, "MatMul", "g1,w2", "g2");
	onnx_build_node(m, NULL, "MatMul", "g2,w3", "y");
	onnx_build_node(m, NULL, "MatMul", "x,w4", "g4");
	onnx_build_node(m, NULL, "MatMul", "g4,w5", "y5");
	onnx_build_node(m, NULL, "Relu", "g4", "y4");
	output(m, "y");
	output(m, "y5");
	output(m, "y4");
	g = check_same(m, g_batches, NB, &rep);
	CU_ASSERT_EQUAL(count_op(g, "FusedGemm"), 5);
	CU_ASSERT_EQUAL(report_count(&rep, "FusedGemm output kept in bf16 for the next"), 1);
	for (uint32_t n = 0; n < g->num_nodes; n++)
		handing += rt_attr_int(&g->nodes[n], "output_bf16", 0) != 0;
	CU_ASSERT_EQUAL(handing, 1);
	rt_graph_free(g);
}

/*
 * Precision bf16's NHWC region: ungrouped convs go to FusedConvNhwc, each of its modes once (a
 * 7x7 stride-2 stem of 3 channels on a space-to-depth copy, a padded 3x3, a 1x1 on the image
 * itself, gathered rows for a stride-2 3x3 with a residual, for a stride-2 1x1 and for a 5x5
 * stride-2 conv of 3 channels, whose 3-pixel kernel rows leave the copy's taps short of a tile row:
 * rows padded to 32, windows across the image's edges), a MaxPool
 * between them, output channels not a multiple of 32, rows that end inside a tile (9 x 7 images),
 * and every kind of edge: the graph input converted in, a residual made outside the region (by a
 * grouped conv, which stays NCHW) converted in, that conv's input converted out, and graph outputs
 * converted out.
 */
static void test_bf16_nhwc(void)
{
	static const int64_t x[] = {-1, 3, 18, 14}, w0[] = {32, 3, 7, 7}, w1[] = {64, 32, 3, 3}, w2[] = {48, 64, 1, 1};
	static const int64_t w3[] = {32, 24, 3, 3}, w4[] = {32, 64, 3, 3}, w5[] = {40, 32, 1, 1}, b5[] = {40};
	static const int64_t w6[] = {16, 3, 5, 5}, p2[] = {2, 2, 2, 2};
	static const int64_t p1[] = {1, 1, 1, 1}, p3[] = {3, 3, 3, 3}, s2[] = {2, 2}, k3[] = {3, 3};
	static const struct op_count expect[] = { {"FusedConvNhwc", 6}, {"MaxPoolNhwcBf16", 1}, {"ToNhwcBf16", 2},
						  {"FromNhwcBf16", 4}, {"FusedConv", 1} };
	Onnx__ModelProto *m = model_new();
	struct rt_opt_report rep;
	struct rt_graph *g;
	Onnx__NodeProto *n;

	input(m, "x", 4, x);
	init(m, "w0", 4, w0, NULL, 0.2f, 0);
	init(m, "w1", 4, w1, NULL, 0.1f, 0);
	init(m, "w2", 4, w2, NULL, 0.2f, 0);
	init(m, "w3", 4, w3, NULL, 0.1f, 0);
	init(m, "w4", 4, w4, NULL, 0.1f, 0);
	init(m, "w5", 4, w5, NULL, 0.2f, 0);
	init(m, "b5", 1, b5, NULL, 0.3f, 0);
	init(m, "w6", 4, w6, NULL, 0.2f, 0);
	bn_params(m, "bn", 64);
	scalar(m, "lo", -0.4f);
	scalar(m, "hi", 0.5f);
	n = onnx_build_node(m, NULL, "Conv", "x,w0", "c0"); /* the stem: [N, 32, 9, 7] */
	onnx_build_attr_ints(n, "strides", s2, 2);
	onnx_build_attr_ints(n, "pads", p3, 4);
	onnx_build_node(m, NULL, "Relu", "c0", "x0");
	n = onnx_build_node(m, NULL, "Conv", "x,w6", "c6"); /* 5x5 stride 2, gathered: [N, 16, 9, 7] */
	onnx_build_attr_ints(n, "strides", s2, 2);
	onnx_build_attr_ints(n, "pads", p2, 4);
	n = onnx_build_node(m, NULL, "Conv", "x0,w1", "c1"); /* padded: [N, 64, 9, 7] */
	onnx_build_attr_ints(n, "pads", p1, 4);
	onnx_build_node(m, NULL, "BatchNormalization", "c1,bn_scale,bn_bias,bn_mean,bn_var", "n1");
	onnx_build_node(m, NULL, "Relu", "n1", "a");
	onnx_build_node(m, NULL, "Conv", "a,w2", "c2"); /* direct, 48 channels out */
	n = onnx_build_node(m, NULL, "LeakyRelu", "c2", "b");
	onnx_build_attr_float(n, "alpha", 0.1f);
	/* c4 first: the Add is fused into the first conv of the two that reaches it */
	n = onnx_build_node(m, NULL, "Conv", "a,w4", "c4"); /* gathered, stride 2, residual c3 */
	onnx_build_attr_ints(n, "strides", s2, 2);
	onnx_build_attr_ints(n, "pads", p1, 4);
	n = onnx_build_node(m, NULL, "Conv", "b,w3", "c3"); /* grouped: NCHW, [N, 32, 5, 4] */
	onnx_build_attr_ints(n, "strides", s2, 2);
	onnx_build_attr_ints(n, "pads", p1, 4);
	onnx_build_attr_int(n, "group", 2);
	onnx_build_node(m, NULL, "Add", "c4,c3", "r");
	onnx_build_node(m, NULL, "Relu", "r", "d");
	n = onnx_build_node(m, NULL, "MaxPool", "d", "pd"); /* [N, 32, 3, 2] */
	onnx_build_attr_ints(n, "kernel_shape", k3, 2);
	onnx_build_attr_ints(n, "strides", s2, 2);
	onnx_build_attr_ints(n, "pads", p1, 4);
	n = onnx_build_node(m, NULL, "Conv", "pd,w5,b5", "c5"); /* 1x1 stride 2, gathered: [N, 40, 2, 1] */
	onnx_build_attr_ints(n, "strides", s2, 2);
	onnx_build_node(m, NULL, "Clip", "c5,lo,hi", "y");
	output(m, "y");
	output(m, "a");
	output(m, "c6");
	g = check_same_counting(m, g_batches, NB, &rep, expect, sizeof(expect) / sizeof(expect[0]));
	CU_ASSERT_EQUAL(report_count(&rep, "Conv on NHWC bf16 tensors"), 6);
	CU_ASSERT_EQUAL(report_count(&rep, "MaxPool on NHWC bf16 tensors"), 1);
	CU_ASSERT_EQUAL(report_count(&rep, "NCHW <-> NHWC conversions"), 6);
	CU_ASSERT_EQUAL(g_in_place, 1); /* c4 over its residual, which dies there */
	rt_graph_free(g);
}

/*
 * Two bottleneck blocks (64 -> 32 1x1, 3x3, 32 -> 64 1x1 with the block's input added): each last
 * conv writes its output over its residual, which dies there (the first block's over the graph
 * input, converted in at bf16; the second's over the first block's output: a chain in one place).
 * At bf16 the 1x1 convs of depth 64 and 32 run 16 rows at a time (rt_bf16_gemm_rows' shallow
 * schedule) over 63-pixel images; in fp32 the residual conv's k of 32 is one block of the GEMM.
 * Then a 320-deep conv with a residual: in place at bf16 and on the unpacked fp32 path, not where
 * the fp32 GEMM takes k in two blocks (the first would store partial sums over the residual).
 */
static void test_bottlenecks(void)
{
	static const int64_t x[] = {-1, 64, 9, 7}, wa[] = {32, 64, 1, 1}, wb[] = {32, 32, 3, 3}, wc[] = {64, 32, 1, 1};
	static const int64_t p1[] = {1, 1, 1, 1}, wu[] = {320, 64, 1, 1}, wd[] = {64, 320, 1, 1};
	static const struct op_count nhwc[] = { {"FusedConvNhwc", 8}, {"ToNhwcBf16", 1}, {"FromNhwcBf16", 1} };
	static const struct op_count nchw[] = { {"FusedConv", 8} };
	bool bf16 = g_precision == RT_PRECISION_BF16;
	Onnx__ModelProto *m = model_new();
	struct rt_opt_report rep;
	struct rt_graph *g;
	Onnx__NodeProto *n;

	input(m, "x", 4, x);
	for (int blk = 0; blk < 2; blk++) {
		char w[3][8], v[7][8], pair[24];
		const char *in = blk == 0 ? "x" : "y0";

		for (int i = 0; i < 3; i++) {
			snprintf(w[i], sizeof(w[i]), "w%d%c", blk, 'a' + i);
			init(m, w[i], 4, i == 0 ? wa : i == 1 ? wb : wc, NULL, i == 1 ? 0.1f : 0.2f, 0);
		}
		for (int i = 0; i < 6; i++)
			snprintf(v[i], sizeof(v[i]), "b%d_%d", blk, i);
		snprintf(v[6], sizeof(v[6]), "y%d", blk);
		snprintf(pair, sizeof(pair), "%s,%s", in, w[0]);
		onnx_build_node(m, NULL, "Conv", pair, v[0]);
		onnx_build_node(m, NULL, "Relu", v[0], v[1]);
		snprintf(pair, sizeof(pair), "%s,%s", v[1], w[1]);
		n = onnx_build_node(m, NULL, "Conv", pair, v[2]);
		onnx_build_attr_ints(n, "pads", p1, 4);
		onnx_build_node(m, NULL, "Relu", v[2], v[3]);
		snprintf(pair, sizeof(pair), "%s,%s", v[3], w[2]);
		onnx_build_node(m, NULL, "Conv", pair, v[4]);
		snprintf(pair, sizeof(pair), "%s,%s", v[4], in);
		onnx_build_node(m, NULL, "Add", pair, v[5]);
		onnx_build_node(m, NULL, "Relu", v[5], v[6]);
	}
	/* a residual conv 320 deep: the fp32 GEMM takes k in two blocks, so its output goes elsewhere */
	init(m, "wu", 4, wu, NULL, 0.1f, 0);
	init(m, "wd", 4, wd, NULL, 0.1f, 0);
	onnx_build_node(m, NULL, "Conv", "y1,wu", "up");
	onnx_build_node(m, NULL, "Relu", "up", "upr");
	onnx_build_node(m, NULL, "Conv", "upr,wd", "down");
	onnx_build_node(m, NULL, "Add", "down,y1", "y2");
	output(m, "y2");
	g = check_same_counting(m, g_batches, NB, &rep, bf16 ? nhwc : nchw, bf16 ? 3 : 1);
	/* the graph input's own bytes are not taken: in fp32 the first block's residual is x itself */
	CU_ASSERT_EQUAL(g_in_place, bf16 ? 3 : rt_sg_available() ? 1 : 2);
	rt_graph_free(g);
}

/*
 * NHWC bf16 gathered rows made a part at a time (about 1 MiB of rows, 320 of this conv's), where a
 * part ends one pixel into an output row whose first two pixels' windows cross the image's left
 * edge (7x7, stride 2, padding 3: 29 outputs a row, 320 = 11 x 29 + 1), and the next part starts
 * at that row's second pixel: 32 channels, too many for the space-to-depth copy. (Rows gathered
 * past a part's end would land past its scratch, in the arena, and change no output: the outputs
 * checked here are those of the rows at the parts' edges.)
 */
static void test_bf16_nhwc_parts(void)
{
	static const int64_t x[] = {-1, 32, 58, 58}, w[] = {16, 32, 7, 7}, p3[] = {3, 3, 3, 3}, s2[] = {2, 2};
	static const struct op_count expect[] = { {"FusedConvNhwc", 1}, {"ToNhwcBf16", 1}, {"FromNhwcBf16", 1} };
	Onnx__ModelProto *m = model_new();
	struct rt_opt_report rep;
	struct rt_graph *g;
	Onnx__NodeProto *n;

	input(m, "x", 4, x);
	init(m, "w", 4, w, NULL, 0.05f, 0);
	n = onnx_build_node(m, NULL, "Conv", "x,w", "c"); /* [N, 16, 29, 29] */
	onnx_build_attr_ints(n, "strides", s2, 2);
	onnx_build_attr_ints(n, "pads", p3, 4);
	onnx_build_node(m, NULL, "Relu", "c", "y");
	output(m, "y");
	g = check_same_counting(m, g_batches, NB, &rep, expect, sizeof(expect) / sizeof(expect[0]));
	CU_ASSERT_EQUAL(report_count(&rep, "Conv on NHWC bf16 tensors"), 1);
	rt_graph_free(g);
}

/*
 * Precision bf16: the fusion tests again with the optimized side at bf16 (convs, FusedGemm and the
 * attention products on AMX tiles), against the graph as loaded in fp32 within bf16's rounding,
 * with check_same's no-heap-call check; and what the report and the nodes say. Below the amx level
 * the optimizer refuses bf16 with one line.
 */
static void test_bf16(void)
{
	static const int64_t a[] = {-1, 5, 40}, b[] = {40, 24};
	char err[RT_ERR_MAX];
	struct rt_opt_report rep;
	struct rt_graph *g;
	Onnx__ModelProto *m;

	if (!rt_bf16_available()) {
		uint8_t *buf;
		size_t len;

		m = model_new();
		input(m, "a", 3, a);
		init(m, "b", 2, b, NULL, 0.3f, 0);
		onnx_build_node(m, NULL, "MatMul", "a,b", "y");
		output(m, "y");
		buf = onnx_build_pack(m, &len);
		onnx__model_proto__free_unpacked(m, NULL);
		g = rt_graph_load_buffer(buf, len, NULL, err, sizeof(err));
		CU_ASSERT_PTR_NOT_NULL_FATAL(g);
		CU_ASSERT_EQUAL(rt_graph_optimize_with(g, RT_DEVICE_CPU, &(struct rt_opt_options){ .precision = RT_PRECISION_BF16 },
						       NULL, err, sizeof(err)), -ENOTSUP);
		CU_ASSERT_PTR_NOT_NULL(strstr(err, "precision bf16 needs the CPU kernels at the amx level"));
		rt_graph_free(g);
		free(buf);
		return;
	}
	g_precision = RT_PRECISION_BF16;
	g_tol = 3e-2; /* 8-bit mantissas through two layers: a few parts in a thousand, a wrong tile ~1 */
	test_conv_bn_relu();
	test_conv_bn_add_relu();
	test_conv_geometry_acts();
	test_matmul_add_relu();
	test_matmul_add_gelu();
	test_attention();
	test_bf16_nhwc();
	test_bf16_nhwc_parts();
	test_bottlenecks();
	test_bf16_handoff();
	m = model_new();
	input(m, "a", 3, a);
	init(m, "b", 2, b, NULL, 0.3f, 0);
	onnx_build_node(m, NULL, "MatMul", "a,b", "y");
	output(m, "y");
	g = check_same(m, g_batches, NB, &rep);
	CU_ASSERT_EQUAL(report_count(&rep, "GEMM in bf16 on AMX tiles"), 1);
	CU_ASSERT_EQUAL(count_op(g, "FusedGemm"), 1);
	CU_ASSERT_EQUAL(rt_attr_int(&g->nodes[0], "packed_weights", 0), 2);
	rt_graph_free(g);
	g_precision = RT_PRECISION_FP32;
	g_tol = OPT_TEST_TOL;
}

static int suite_init(void)
{
	alloc_count_init();
	return rt_cpu_kernels_register() == 0 ? 0 : -1;
}

/*
 * x [N,4] -> MatMul W -> + ReduceSum(ConstantOfShape([count])) -> y: a constant of count floats that
 * folding, or planning, would make. \return the model's bytes (malloc'd).
 */
static uint8_t *budget_model(int64_t count, size_t *len)
{
	Onnx__ModelProto *m = model_new();
	const int64_t x_dims[] = { -1, 4 }, w_dims[] = { 4, 4 };
	Onnx__NodeProto *n;
	uint8_t *buf;

	input(m, "x", 2, x_dims);
	init(m, "W", 2, w_dims, NULL, 1, 0);
	int64_init(m, "count", &count, 1);
	onnx_build_node(m, "product", "MatMul", "x,W", "p");
	n = onnx_build_node(m, "big", "ConstantOfShape", "count", "c");
	{
		Onnx__AttributeProto *a = onnx_build_attr(n, "value", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR);
		const int64_t one = 1;

		a->t = onnx_build_tensor_new(NULL, ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 1, &one);
		PUSH(a->t->float_data, a->t->n_float_data, 1.0f);
	}
	n = onnx_build_node(m, "total", "ReduceSum", "c", "t");
	onnx_build_attr_int(n, "keepdims", 1);
	onnx_build_node(m, "sum", "Add", "p,t", "y");
	output(m, "y");
	buf = onnx_build_pack(m, len);
	onnx_build_model_free(m);
	return buf;
}

/* err says both things (printed when it does not). */
static bool err_says(const char *err, const char *a, const char *b)
{
	bool ok = strstr(err, a) != NULL && strstr(err, b) != NULL;

	if (!ok)
		fprintf(stderr, "error '%s' lacks '%s' or '%s'\n", err, a, b);
	return ok;
}

static int budget_optimize(const uint8_t *buf, size_t len, uint64_t budget, struct rt_graph **g, char *err, size_t cap)
{
	*g = rt_graph_load_buffer(buf, len, NULL, err, cap);
	CU_ASSERT_PTR_NOT_NULL_FATAL(*g);
	return rt_graph_optimize_with(*g, RT_DEVICE_CPU, &(struct rt_opt_options){ .memory_budget = budget }, NULL, err,
				      cap);
}

/*
 * A model's memory budget, held before each allocation: a constant that folding would make past it
 * (1 MiB, budget 512 KiB), one above the folding cap that planning would compute past it (32 MiB,
 * budget 16 MiB: not folded, refused while planning), arenas past it (an executor refused before
 * any arena exists); within it the same model optimises, plans and gets its executor.
 */
static void test_memory_budget(void)
{
	const int64_t sizes[] = { 1, 8 };
	struct rt_executor *ex;
	struct rt_plan *plan;
	struct rt_graph *g;
	char err[RT_ERR_MAX];
	uint8_t *buf;
	size_t len;
	int rc;

	buf = budget_model(1 << 18, &len);
	rc = budget_optimize(buf, len, 512u << 10, &g, err, sizeof(err));
	CU_ASSERT_EQUAL(rc, -EFBIG);
	CU_ASSERT(err_says(err, "folding", "memory_budget_mb"));
	rt_graph_free(g);
	rc = budget_optimize(buf, len, 64u << 20, &g, err, sizeof(err)); /* within it: folded */
	CU_ASSERT_EQUAL(rc, 0);
	rt_graph_free(g);
	free(buf);

	buf = budget_model(1 << 23, &len);
	rc = budget_optimize(buf, len, 16u << 20, &g, err, sizeof(err));
	CU_ASSERT_EQUAL(rc, 0);
	CU_ASSERT(rt_graph_constant_bytes(g) < RT_FOLD_BYTES_MAX); /* not folded: above the cap */
	plan = rt_plan_create(g, 1, RT_DEVICE_CPU, err, sizeof(err));
	CU_ASSERT_PTR_NULL(plan);
	CU_ASSERT(err_says(err, "while planning", "memory_budget_mb"));
	rt_plan_free(plan);
	rt_graph_free(g);
	free(buf);

	buf = budget_model(1 << 10, &len);
	CU_ASSERT_EQUAL_FATAL(budget_optimize(buf, len, 64u << 20, &g, err, sizeof(err)), 0);
	g->memory_budget = rt_graph_constant_bytes(g) + 64; /* no room for an arena */
	ex = rt_executor_create(g, sizes, 2, 1, 2, err, sizeof(err));
	CU_ASSERT_PTR_NULL(ex);
	CU_ASSERT_EQUAL(errno, EFBIG);
	CU_ASSERT(err_says(err, "arenas", "memory_budget_mb"));
	g->memory_budget = 64u << 20;
	ex = rt_executor_create(g, sizes, 2, 1, 2, err, sizeof(err));
	CU_ASSERT_PTR_NOT_NULL(ex);
	rt_executor_destroy(ex);
	rt_graph_free(g);
	free(buf);
}

int main(void)
{
	static CU_TestInfo tests[] = {
		{"Conv+BatchNormalization+Relu -> FusedConv", test_conv_bn_relu},
		{"Conv+BatchNormalization+Add+Relu (residual)", test_conv_bn_add_relu},
		{"bottleneck blocks write over their residuals", test_bottlenecks},
		{"Conv geometry (stride, pads, dilation, groups), LeakyRelu, Clip", test_conv_geometry_acts},
		{"packed conv B packer: wide, narrow, stride 2 (in a row and across rows), 7x7 stem", test_conv_packer_paths},
		{"3x3 stride-1 convs by Winograd F(2x2,3x3) and F(4x4,3x3)", test_conv_winograd},
		{"Winograd F(4x4,3x3) on rows of 4 tiles, two tile rows a vector", test_conv_winograd_paired_rows},
		{"FusedConv without packed weights (OpenBLAS path)", test_conv_unpacked},
		{"BatchNormalization after a Conv read twice: unchanged", test_conv_bn_second_reader},
		{"non-constant BN, broadcasting Add: unchanged", test_conv_not_fusable},
		{"MatMul+Add(+Relu) -> FusedGemm", test_matmul_add_relu},
		{"MatMul+Add+erf GELU, both exported forms", test_matmul_add_gelu},
		{"Gemm transB alpha beta C[1,N] + Relu, pre-packed", test_gemm_transb},
		{"packed GEMMs: several k blocks, row blocks, ragged panels", test_packed_blocking},
		{"MatMul/Gemm not fusable: unchanged", test_gemm_not_fusable},
		{"constants folded before fusing", test_constant_folding},
		{"attention: Reshape/Transpose/scale folded into FusedMatMul, then FusedAttention", test_attention},
		{"Softmax, LayerNormalization, MaxPool fast paths", test_fast_paths},
		{"vector exp and erf against libm", test_vecmath},
		{"small CNN blocks: 3x3 pad 1 convs and 2x2 MaxPools", test_cnn_blocks},
		{"same-width packer: 5x5, dilation, end pads, narrow rows, k blocks", test_same_width_packer},
		{"2x2 stride-2 MaxPool: odd sizes, wide rows, ceil_mode", test_maxpool_2x2},
		{"3x3 stride-2 MaxPool: windows inside and across a row's ends, pads 0 and 1", test_maxpool_3x3s2},
		{"small direct GEMM: edges, strides, alpha, beta, no heap call", test_gemm_small},
		{"precision bf16: convs, FusedGemm, attention on AMX tiles", test_bf16},
		{"an input that indexes tables: its bound from the smallest Gather table", test_index_bounds},
		{"memory budget: folding, planning and arenas refused past it", test_memory_budget},
		CU_TEST_INFO_NULL,
	};
	static CU_SuiteInfo suites[] = {
		{"optimize", suite_init, NULL, NULL, NULL, tests},
		CU_SUITE_INFO_NULL,
	};
	int status = isa_level_check();

	return status >= 0 ? status : bw_cunit_run(suites);
}
