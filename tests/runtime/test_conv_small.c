/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Unit tests of the small-image convolution and pooling paths: sgemm.c's same-width im2col packer
 * (stride 1, outputs as wide as the input: one masked load per row of 16 columns, whatever output
 * rows they cross) and fastpath.c's 2x2 stride-2 MaxPool. Each model is built here, loaded as is
 * (Conv on OpenBLAS, the reference MaxPool) and optimized (FusedConv on packed weights, the fast
 * MaxPool), run at several batch sizes on the same random inputs, and the outputs must agree to
 * float rounding (|a - b| <= 1e-4 * max(1, |a|)); the optimized run must make no heap call. meson
 * runs this at each instruction-set level (BW_CPU_ISA), so the AVX2 and AVX-512 packers and pool
 * rows and the portable pool rows are each checked.
 */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../bw_cunit.h"

#include "alloc_count.h"
#include "exec/plan.h"
#include "graph.h"
#include "isa_level.h"
#include "onnx.pb-c.h"
#include "onnx_build.h"

#define SMALL_TEST_TOL 1e-4
#define SMALL_TEST_OPSET 17
#define SMALL_TEST_IR 8

static uint64_t g_rng = 0x2545f4914f6cdd1dull;

/* Uniform in [-1, 1), deterministic (xorshift64*). */
static float rnd(void)
{
	g_rng ^= g_rng >> 12;
	g_rng ^= g_rng << 25;
	g_rng ^= g_rng >> 27;
	return (float)((g_rng * 0x2545f4914f6cdd1dull) >> 40) / (float)(1 << 23) - 1.0f;
}

/* A model with input "x" [N, c, h, w] and output "y". */
static Onnx__ModelProto *model_new(int64_t c, int64_t h, int64_t w)
{
	Onnx__ModelProto *m = onnx_build_model_new(NULL, SMALL_TEST_IR, SMALL_TEST_OPSET);
	const int64_t dims[] = {-1, c, h, w};

	onnx_build_input(m, "x", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, 4, dims);
	onnx_build_output(m, "y", ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, -1, NULL);
	return m;
}

/* A float initializer of random values scale * U[-1, 1) + offset. */
static void init(Onnx__ModelProto *m, const char *name, int rank, const int64_t *dims, float scale, float offset)
{
	Onnx__TensorProto *t = onnx_build_initializer(m, name, ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, (size_t)rank, dims);
	int64_t n = 1;

	for (int d = 0; d < rank; d++)
		n *= dims[d];
	for (int64_t i = 0; i < n; i++)
		PUSH(t->float_data, t->n_float_data, scale * rnd() + offset);
}

/* Conv in -> out (cout filters of kh x kw over cin channels, bias) with pads, dilations, then BN and Relu. */
static void conv_bn_relu(Onnx__ModelProto *m, const char *prefix, const char *in, const char *out, int64_t cin,
			 int64_t cout, int64_t kh, int64_t kw, const int64_t *pads, const int64_t *dilations)
{
	char w[32], b[32], c[32], bn[160], n[32];
	const int64_t wd[] = {cout, cin, kh, kw};
	Onnx__NodeProto *node;
	static const char *const bn_parts[] = {"scale", "bias", "mean", "var"};
	static const float bn_scale[] = {0.5f, 0.3f, 0.3f, 0.4f}, bn_offset[] = {1.0f, 0.0f, 0.0f, 1.0f};

	snprintf(w, sizeof(w), "%s_w", prefix);
	snprintf(b, sizeof(b), "%s_b", prefix);
	snprintf(c, sizeof(c), "%s_c", prefix);
	snprintf(n, sizeof(n), "%s_n", prefix);
	init(m, w, 4, wd, 1.0f / (float)(cin * kh * kw), 0.0f);
	init(m, b, 1, &cout, 0.1f, 0.0f);
	snprintf(bn, sizeof(bn), "%s,%s,%s", in, w, b);
	node = onnx_build_node(m, NULL, "Conv", bn, c);
	onnx_build_attr_ints(node, "pads", pads, 4);
	if (dilations != NULL)
		onnx_build_attr_ints(node, "dilations", dilations, 2);
	snprintf(bn, sizeof(bn), "%s", c);
	for (int i = 0; i < 4; i++) {
		char part[40];

		snprintf(part, sizeof(part), "%s_%s", prefix, bn_parts[i]);
		init(m, part, 1, &cout, bn_scale[i], bn_offset[i]);
		snprintf(bn + strlen(bn), sizeof(bn) - strlen(bn), ",%s", part);
	}
	onnx_build_node(m, NULL, "BatchNormalization", bn, n);
	onnx_build_node(m, NULL, "Relu", n, out);
}

static void maxpool(Onnx__ModelProto *m, const char *in, const char *out, int64_t ceil_mode)
{
	static const int64_t two[] = {2, 2};
	Onnx__NodeProto *node = onnx_build_node(m, NULL, "MaxPool", in, out);

	onnx_build_attr_ints(node, "kernel_shape", two, 2);
	onnx_build_attr_ints(node, "strides", two, 2);
	if (ceil_mode != 0)
		onnx_build_attr_int(node, "ceil_mode", ceil_mode);
}

struct run {
	struct rt_graph *g;
	struct rt_plan *plan;
	void *arena;
	struct rt_tensor in[1], out[1];
};

static void run_setup(struct run *r, const uint8_t *buf, size_t len, bool optimize, int64_t batch)
{
	struct rt_opt_report report;
	char err[RT_ERR_MAX];

	memset(r, 0, sizeof(*r));
	r->g = rt_graph_load_buffer(buf, len, NULL, err, sizeof(err));
	if (r->g == NULL)
		fprintf(stderr, "load: %s\n", err);
	CU_ASSERT_PTR_NOT_NULL_FATAL(r->g);
	if (optimize) {
		int rc = rt_graph_optimize(r->g, RT_DEVICE_CPU, &report, err, sizeof(err));

		if (rc != 0)
			fprintf(stderr, "optimize: %s\n", err);
		CU_ASSERT_EQUAL_FATAL(rc, 0);
	}
	r->plan = rt_plan_create(r->g, batch, RT_DEVICE_CPU, err, sizeof(err));
	if (r->plan == NULL)
		fprintf(stderr, "plan: %s\n", err);
	CU_ASSERT_PTR_NOT_NULL_FATAL(r->plan);
	CU_ASSERT_FATAL(rt_plan_num_inputs(r->plan) == 1 && rt_plan_num_outputs(r->plan) == 1);
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

/*
 * Runs m as loaded and optimized at batches 1, 3 and 8 on the same inputs and compares; the
 * optimized graph must hold fused convs (with the packed GEMM, at avx2 and above) and fast
 * MaxPools as counted.
 */
static void check_same(Onnx__ModelProto *m, uint32_t fused_convs, uint32_t fast_pools)
{
	static const int64_t batches[] = {1, 3, 8};
	size_t len;
	uint8_t *buf = onnx_build_pack(m, &len);

	onnx__model_proto__free_unpacked(m, NULL);
	for (unsigned int b = 0; b < sizeof(batches) / sizeof(batches[0]); b++) {
		struct run ref, opt;
		int64_t n;
		float *saved;
		double worst = 0;

		run_setup(&ref, buf, len, false, batches[b]);
		run_setup(&opt, buf, len, true, batches[b]);
		CU_ASSERT_EQUAL(count_op(opt.g, "FusedConv"), fused_convs);
		CU_ASSERT_EQUAL(count_op(opt.g, "MaxPool"), fast_pools);
		n = rt_tensor_elems(&ref.in[0]);
		saved = malloc((size_t)n * sizeof(float) + 1);
		CU_ASSERT_PTR_NOT_NULL_FATAL(saved);
		for (int64_t j = 0; j < n; j++)
			saved[j] = 2.0f * rnd();
		memcpy(ref.in[0].data, saved, (size_t)n * sizeof(float));
		memcpy(opt.in[0].data, saved, (size_t)n * sizeof(float));
		run_once(&ref);
		run_once(&opt); /* a warm-up: a library may set itself up on its first call */
		memcpy(opt.in[0].data, saved, (size_t)n * sizeof(float));
		free(saved);
		alloc_count_start();
		run_once(&opt);
		alloc_count_stop();
		CU_ASSERT_EQUAL(alloc_count_allocs() + alloc_count_frees(), 0);
		n = rt_tensor_elems(&ref.out[0]);
		CU_ASSERT_EQUAL_FATAL(n, rt_tensor_elems(&opt.out[0]));
		for (int64_t j = 0; j < n; j++) {
			double a = ((float *)ref.out[0].data)[j], e = ((float *)opt.out[0].data)[j];
			double d = fabs(a - e) / fmax(1.0, fabs(a));

			worst = d > worst || isnan(d) ? d : worst;
		}
		if (!(worst <= SMALL_TEST_TOL))
			fprintf(stderr, "batch %lld: largest difference %g\n", (long long)batches[b], worst);
		CU_ASSERT(worst <= SMALL_TEST_TOL);
		run_free(&ref);
		run_free(&opt);
	}
	free(buf);
}

/* The small CNN's convolution blocks (models/gen_models.py cnn()): 28x28 and 14x14, 3x3 pad 1. */
static void test_cnn_blocks(void)
{
	static const int64_t p1[] = {1, 1, 1, 1};
	Onnx__ModelProto *m = model_new(1, 28, 28);

	conv_bn_relu(m, "c1", "x", "r1", 1, 16, 3, 3, p1, NULL);
	maxpool(m, "r1", "p1", 0);
	conv_bn_relu(m, "c2", "p1", "r2", 16, 32, 3, 3, p1, NULL);
	maxpool(m, "r2", "y", 0);
	check_same(m, 2, 2);
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
		Onnx__ModelProto *m = model_new(3, sizes[i][0], sizes[i][1]);

		conv_bn_relu(m, "a", "x", "ra", 3, 5, 5, 5, p2, NULL);
		conv_bn_relu(m, "b", "ra", "rb", 5, 7, 3, 3, p2, d2);
		conv_bn_relu(m, "c", "rb", "rc", 7, 40, 3, 3, p_end, NULL);
		conv_bn_relu(m, "d", "rc", "y", 40, 9, 3, 3, p1, NULL);
		check_same(m, 4, 0);
	}
}

/*
 * 2x2 stride-2 MaxPool rows: odd sizes (the last row and column left out), rows of more than one
 * vector of outputs (70 wide: 35 outputs), one output wide; with ceil_mode on an odd size the last
 * window is partial and the general path runs instead.
 */
static void test_maxpool_2x2(void)
{
	static const int64_t sizes[][2] = {{7, 9}, {4, 70}, {2, 2}, {3, 33}, {10, 64}};

	for (unsigned int i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		Onnx__ModelProto *m = model_new(3, sizes[i][0], sizes[i][1]);

		maxpool(m, "x", "y", 0);
		check_same(m, 0, 1);
	}
	{
		Onnx__ModelProto *m = model_new(2, 7, 9);

		maxpool(m, "x", "y", 1);
		check_same(m, 0, 1);
	}
}

static int suite_init(void)
{
	alloc_count_init();
	return rt_cpu_kernels_register() == 0 ? 0 : -1;
}

int main(void)
{
	static CU_TestInfo tests[] = {
		{"small CNN blocks: 3x3 pad 1 convs and 2x2 MaxPools", test_cnn_blocks},
		{"same-width packer: 5x5, dilation, end pads, narrow rows, k blocks", test_same_width_packer},
		{"2x2 stride-2 MaxPool: odd sizes, wide rows, ceil_mode", test_maxpool_2x2},
		CU_TEST_INFO_NULL,
	};
	static CU_SuiteInfo suites[] = {
		{"conv_small", suite_init, NULL, NULL, NULL, tests},
		CU_SUITE_INFO_NULL,
	};
	int status = isa_level_check();

	return status >= 0 ? status : bw_cunit_run(suites);
}
