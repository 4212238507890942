/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * gpu/elementwise_math.h on the CPU: the __host__ __device__ per-element arithmetic the device
 * kernels will run, checked element by element against the ONNX backend node tests' expected outputs
 * (Debian's libonnx-testdata, read with the conformance runner's decoder) at the runner's tolerance,
 * |got - want| <= 1e-7 + 1e-3 |want|, NaN equal to NaN. Float32 data only.
 *
 * Node tests used (every test_data_set_N of each):
 *   test_relu; test_leakyrelu (alpha 0.1), test_leakyrelu_example (0.1), test_leakyrelu_default;
 *   test_clip, test_clip_example, test_clip_inbounds, test_clip_outbounds, test_clip_splitbounds,
 *   test_clip_default_min, test_clip_default_max, test_clip_default_inbounds;
 *   test_sigmoid, test_sigmoid_example; test_tanh, test_tanh_example; test_exp, test_exp_example;
 *   test_erf; test_sqrt, test_sqrt_example; test_reciprocal, test_reciprocal_example;
 *   test_neg, test_neg_example; test_abs;
 *   test_add, test_add_bcast; test_sub, test_sub_bcast, test_sub_example; test_mul, test_mul_bcast,
 *   test_mul_example; test_div, test_div_bcast, test_div_example;
 *   test_pow, test_pow_example, test_pow_bcast_scalar, test_pow_bcast_array;
 *   test_max_example, test_max_one_input, test_max_two_inputs, test_max_float32;
 *   test_min_example, test_min_one_input, test_min_two_inputs, test_min_float32;
 *   test_where_example.
 * Broadcasting here is only what the arithmetic needs to be reached: equal shapes, and an input whose
 * shape is a suffix of the output's (a scalar included); a data set needing more is skipped, counted
 * and printed (none of the above does today). The other tests of these ops are not float32 (the
 * integer Clip, Max and Min tests, the mixed-type Pow tests, test_where_long_example: int64).
 * Gelu has no node test in this data (opset 20): it is checked against the erf formula in double.
 * The attributes (LeakyRelu's alpha, which of Clip's optional inputs a test gives) are the ONNX test
 * generator's, written in the table: a wrong one fails against the expected output.
 *
 * Each data set also goes through the CPU kernel of the op (found in the registry as the loader finds
 * it, opset 13, run on the same tensors), and the two results must agree at the same tolerance. How
 * many data sets agree bit for bit is printed: all of them today, since the header copies the
 * expressions of runtime/kernels/unary.c and elementwise.c and here both call the same libm. The
 * tolerance, not bit equality, is the contract: on the device expf, erff, tanhf and powf are CUDA's,
 * a few ulp from glibc's.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../bw_cunit.h"
#include "../conformance/testdata.h"
#include "graph.h"
#include "elementwise_math.h"

#define HD_RTOL 1e-3 /* tests/conformance/conformance.c's CONFORMANCE_RTOL and _ATOL */
#define HD_ATOL 1e-7

enum hd_kind { K_UNARY, K_LEAKY, K_CLIP, K_BINARY, K_FOLD, K_WHERE };

/* which of Clip's optional inputs, min and max, a test's data set gives, in order */
enum clip_bounds { CLIP_NONE, CLIP_MIN, CLIP_MAX, CLIP_BOTH };

struct hd_case {
	const char *test;
	const char *op;         /* the CPU kernel's op_type */
	enum hd_kind kind;
	float (*unary)(float);
	float (*binary)(float, float);
	float alpha;            /* LeakyRelu */
	enum clip_bounds clip;  /* Clip */
};

static const struct hd_case g_cases[] = {
	{"test_relu", "Relu", K_UNARY, bw_relu, NULL, 0, 0},
	{"test_leakyrelu", "LeakyRelu", K_LEAKY, NULL, NULL, 0.1f, 0},
	{"test_leakyrelu_example", "LeakyRelu", K_LEAKY, NULL, NULL, 0.1f, 0},
	{"test_leakyrelu_default", "LeakyRelu", K_LEAKY, NULL, NULL, BW_LEAKY_RELU_ALPHA_DEFAULT, 0},
	{"test_clip", "Clip", K_CLIP, NULL, NULL, 0, CLIP_BOTH},
	{"test_clip_example", "Clip", K_CLIP, NULL, NULL, 0, CLIP_BOTH},
	{"test_clip_inbounds", "Clip", K_CLIP, NULL, NULL, 0, CLIP_BOTH},
	{"test_clip_outbounds", "Clip", K_CLIP, NULL, NULL, 0, CLIP_BOTH},
	{"test_clip_splitbounds", "Clip", K_CLIP, NULL, NULL, 0, CLIP_BOTH},
	{"test_clip_default_min", "Clip", K_CLIP, NULL, NULL, 0, CLIP_MIN},
	{"test_clip_default_max", "Clip", K_CLIP, NULL, NULL, 0, CLIP_MAX},
	{"test_clip_default_inbounds", "Clip", K_CLIP, NULL, NULL, 0, CLIP_NONE},
	{"test_sigmoid", "Sigmoid", K_UNARY, bw_sigmoid, NULL, 0, 0},
	{"test_sigmoid_example", "Sigmoid", K_UNARY, bw_sigmoid, NULL, 0, 0},
	{"test_tanh", "Tanh", K_UNARY, bw_tanh, NULL, 0, 0},
	{"test_tanh_example", "Tanh", K_UNARY, bw_tanh, NULL, 0, 0},
	{"test_exp", "Exp", K_UNARY, bw_exp, NULL, 0, 0},
	{"test_exp_example", "Exp", K_UNARY, bw_exp, NULL, 0, 0},
	{"test_erf", "Erf", K_UNARY, bw_erf, NULL, 0, 0},
	{"test_sqrt", "Sqrt", K_UNARY, bw_sqrt, NULL, 0, 0},
	{"test_sqrt_example", "Sqrt", K_UNARY, bw_sqrt, NULL, 0, 0},
	{"test_reciprocal", "Reciprocal", K_UNARY, bw_reciprocal, NULL, 0, 0},
	{"test_reciprocal_example", "Reciprocal", K_UNARY, bw_reciprocal, NULL, 0, 0},
	{"test_neg", "Neg", K_UNARY, bw_neg, NULL, 0, 0},
	{"test_neg_example", "Neg", K_UNARY, bw_neg, NULL, 0, 0},
	{"test_abs", "Abs", K_UNARY, bw_abs, NULL, 0, 0},
	{"test_add", "Add", K_BINARY, NULL, bw_add, 0, 0},
	{"test_add_bcast", "Add", K_BINARY, NULL, bw_add, 0, 0},
	{"test_sub", "Sub", K_BINARY, NULL, bw_sub, 0, 0},
	{"test_sub_bcast", "Sub", K_BINARY, NULL, bw_sub, 0, 0},
	{"test_sub_example", "Sub", K_BINARY, NULL, bw_sub, 0, 0},
	{"test_mul", "Mul", K_BINARY, NULL, bw_mul, 0, 0},
	{"test_mul_bcast", "Mul", K_BINARY, NULL, bw_mul, 0, 0},
	{"test_mul_example", "Mul", K_BINARY, NULL, bw_mul, 0, 0},
	{"test_div", "Div", K_BINARY, NULL, bw_div, 0, 0},
	{"test_div_bcast", "Div", K_BINARY, NULL, bw_div, 0, 0},
	{"test_div_example", "Div", K_BINARY, NULL, bw_div, 0, 0},
	{"test_pow", "Pow", K_BINARY, NULL, bw_pow, 0, 0},
	{"test_pow_example", "Pow", K_BINARY, NULL, bw_pow, 0, 0},
	{"test_pow_bcast_scalar", "Pow", K_BINARY, NULL, bw_pow, 0, 0},
	{"test_pow_bcast_array", "Pow", K_BINARY, NULL, bw_pow, 0, 0},
	{"test_max_example", "Max", K_FOLD, NULL, bw_max, 0, 0},
	{"test_max_one_input", "Max", K_FOLD, NULL, bw_max, 0, 0},
	{"test_max_two_inputs", "Max", K_FOLD, NULL, bw_max, 0, 0},
	{"test_max_float32", "Max", K_FOLD, NULL, bw_max, 0, 0},
	{"test_min_example", "Min", K_FOLD, NULL, bw_min, 0, 0},
	{"test_min_one_input", "Min", K_FOLD, NULL, bw_min, 0, 0},
	{"test_min_two_inputs", "Min", K_FOLD, NULL, bw_min, 0, 0},
	{"test_min_float32", "Min", K_FOLD, NULL, bw_min, 0, 0},
	{"test_where_example", "Where", K_WHERE, NULL, NULL, 0, 0},
};

static const char *g_node_dir;
static unsigned int g_sets_run, g_sets_skipped, g_tests_missing, g_sets_cpu_identical;

static bool close_enough(float got, float want)
{
	double x = got, y = want;

	return (isnan(x) && isnan(y)) || x == y || fabs(x - y) <= HD_ATOL + HD_RTOL * fabs(y);
}

/*
 * t's element count when t broadcasts to out by the rule handled here (equal shapes, or t's shape a
 * suffix of out's: output element i then reads t[i % count]), else 0.
 */
static int64_t suffix_elems(const struct rt_tensor *t, const struct rt_tensor *out)
{
	if (t->rank > out->rank)
		return 0;
	for (uint8_t d = 0; d < t->rank; d++) {
		if (t->dims[d] != out->dims[out->rank - t->rank + d])
			return 0;
	}
	return rt_tensor_elems(t);
}

/*
 * Runs the CPU kernel of c->op on the data set's inputs into out (n floats).
 * \return 0, or the kernel's negative errno (printed).
 */
static int cpu_run(const struct hd_case *c, const struct testdata_tensors *in, float *out, int64_t n)
{
	struct rt_attr alpha = {.name = "alpha", .type = RT_ATTR_FLOAT, .f = c->alpha};
	struct rt_node node = {.name = "n", .op_type = (char *)c->op, .domain = "", .opset = 13};
	struct rt_tensor ins[TESTDATA_TENSORS_MAX], outs[1];
	int32_t in_ids[TESTDATA_TENSORS_MAX], out_ids[1] = {TESTDATA_TENSORS_MAX};
	const struct rt_kernel *k;
	char err[RT_ERR_MAX];
	void *scratch = NULL;
	unsigned int nin = in->count;
	int rc;

	memset(ins, 0, sizeof(ins));
	memset(outs, 0, sizeof(outs));
	for (unsigned int i = 0; i < nin; i++)
		ins[i] = in->t[i];
	if (c->kind == K_CLIP && c->clip == CLIP_MAX) { /* x, max: min left out */
		ins[2] = in->t[1];
		ins[1] = (struct rt_tensor){0};
		nin = 3;
	}
	for (unsigned int i = 0; i < nin; i++)
		in_ids[i] = ins[i].dtype == 0 ? RT_VALUE_NONE : (int32_t)i;
	node.num_inputs = (uint16_t)nin;
	node.num_outputs = 1;
	node.inputs = in_ids;
	node.outputs = out_ids;
	if (c->kind == K_LEAKY) {
		node.attrs = &alpha;
		node.num_attrs = 1;
	}
	k = rt_kernel_find(c->op, "", node.opset, ins[0].dtype, RT_DEVICE_CPU, err, sizeof(err));
	if (k == NULL) {
		printf("  CPU kernel %s: %s\n", c->op, err);
		return -ENOENT;
	}
	rc = k->infer(&node, ins, outs, err, sizeof(err));
	if (rc == 0 && rt_tensor_elems(&outs[0]) != n) {
		snprintf(err, sizeof(err), "%lld elements, expected %lld", (long long)rt_tensor_elems(&outs[0]),
			 (long long)n);
		rc = -EINVAL;
	}
	if (rc == 0) {
		size_t bytes = k->scratch_bytes != NULL ? k->scratch_bytes(&node, ins, outs) : 0;

		scratch = bytes > 0 ? malloc(bytes) : NULL;
		outs[0].data = out;
		rc = bytes > 0 && scratch == NULL ? -ENOMEM : k->run(&node, ins, outs, scratch, err, sizeof(err));
		free(scratch);
	}
	if (rc < 0)
		printf("  CPU kernel %s: %d %s\n", c->op, rc, err);
	return rc;
}

/* Runs one data set through the case's function. \return 1 run, 0 skipped (printed), -1 unreadable. */
static int run_set(const struct hd_case *c, const char *set_dir)
{
	struct testdata_tensors in, out;
	char why[256];
	int64_t n, nin[TESTDATA_TENSORS_MAX];
	unsigned int bad = 0, cpu_bad = 0;
	float *got_all = NULL, *cpu = NULL;
	int rc = 1;

	memset(&in, 0, sizeof(in));
	memset(&out, 0, sizeof(out));
	if (testdata_tensors_read(set_dir, "input", &in, why, sizeof(why)) < 0 ||
	    testdata_tensors_read(set_dir, "output", &out, why, sizeof(why)) < 0) {
		fprintf(stderr, "  %s: %s\n", set_dir, why);
		rc = -1;
		goto done;
	}
	if (out.count != 1 || in.count == 0) {
		fprintf(stderr, "  %s: %u inputs, %u outputs\n", set_dir, in.count, out.count);
		rc = -1;
		goto done;
	}
	n = rt_tensor_elems(&out.t[0]);
	for (unsigned int k = 0; k < in.count; k++) {
		bool cond = c->kind == K_WHERE && k == 0;

		if (in.t[k].dtype != (cond ? BW_DTYPE_BOOL : BW_DTYPE_FLOAT) || out.t[0].dtype != BW_DTYPE_FLOAT) {
			printf("  skip %s: input %u is %s, not float32\n", set_dir, k, rt_dtype_name(in.t[k].dtype));
			rc = 0;
			goto done;
		}
		nin[k] = suffix_elems(&in.t[k], &out.t[0]);
		if (nin[k] <= 0) {
			printf("  skip %s: input %u needs broadcasting this test does not do\n", set_dir, k);
			rc = 0;
			goto done;
		}
	}
	got_all = malloc((size_t)n * sizeof(float));
	cpu = malloc((size_t)n * sizeof(float));
	CU_ASSERT_FATAL(got_all != NULL && cpu != NULL);
	for (int64_t i = 0; i < n; i++) {
		const float *x = in.t[0].data;
		float got = 0, want = ((const float *)out.t[0].data)[i], lo = -INFINITY, hi = INFINITY;

		switch (c->kind) {
		case K_UNARY: got = c->unary(x[i % nin[0]]); break;
		case K_LEAKY: got = bw_leaky_relu(x[i % nin[0]], c->alpha); break;
		case K_CLIP:
			if (c->clip == CLIP_MIN || c->clip == CLIP_BOTH)
				lo = *(const float *)in.t[1].data;
			if (c->clip == CLIP_MAX)
				hi = *(const float *)in.t[1].data;
			if (c->clip == CLIP_BOTH)
				hi = *(const float *)in.t[2].data;
			got = bw_clip(x[i % nin[0]], lo, hi);
			break;
		case K_BINARY:
			got = c->binary(x[i % nin[0]], ((const float *)in.t[1].data)[i % nin[1]]);
			break;
		case K_FOLD: /* Max, Min: variadic, folded left to right as the CPU kernel does */
			got = x[i % nin[0]];
			for (unsigned int k = 1; k < in.count; k++)
				got = c->binary(got, ((const float *)in.t[k].data)[i % nin[k]]);
			break;
		case K_WHERE:
			got = bw_where(((const uint8_t *)in.t[0].data)[i % nin[0]],
				       ((const float *)in.t[1].data)[i % nin[1]],
				       ((const float *)in.t[2].data)[i % nin[2]]);
			break;
		}
		got_all[i] = got;
		if (!close_enough(got, want)) {
			if (bad++ == 0)
				printf("  %s: element %lld is %.9g, expected %.9g\n", set_dir, (long long)i, got, want);
		}
	}
	CU_ASSERT_EQUAL(bad, 0);
	CU_ASSERT_EQUAL_FATAL(cpu_run(c, &in, cpu, n), 0);
	for (int64_t i = 0; i < n; i++) {
		if (!close_enough(got_all[i], cpu[i]) && cpu_bad++ == 0)
			printf("  %s: element %lld is %.9g, the CPU kernel's %.9g\n", set_dir, (long long)i,
			       got_all[i], cpu[i]);
	}
	CU_ASSERT_EQUAL(cpu_bad, 0);
	if (memcmp(got_all, cpu, (size_t)n * sizeof(float)) == 0)
		g_sets_cpu_identical++;
done:
	free(got_all);
	free(cpu);
	testdata_tensors_free(&in);
	testdata_tensors_free(&out);
	return rc;
}

static void test_node_tests(void)
{
	for (size_t t = 0; t < sizeof(g_cases) / sizeof(g_cases[0]); t++) {
		const struct hd_case *c = &g_cases[t];
		char dir[4096], set_dir[4096 + 256];
		char **sets = NULL;
		size_t nsets = 0;

		snprintf(dir, sizeof(dir), "%s/%s", g_node_dir, c->test);
		if (testdata_list_dir(dir, "test_data_set_", &sets, &nsets) < 0 || nsets == 0) {
			printf("  missing: %s\n", dir);
			g_tests_missing++;
			CU_FAIL("a listed node test is missing");
			continue;
		}
		for (size_t s = 0; s < nsets; s++) {
			int rc;

			snprintf(set_dir, sizeof(set_dir), "%s/%s", dir, sets[s]);
			rc = run_set(c, set_dir);
			CU_ASSERT(rc >= 0);
			if (rc > 0)
				g_sets_run++;
			else if (rc == 0)
				g_sets_skipped++;
		}
		testdata_free_list(sets, nsets);
	}
	printf("\n  node tests: %zu listed, %u data sets run, %u skipped (broadcasting or type), %u missing;"
	       " %u of the runs bit-identical to the CPU kernel\n",
	       sizeof(g_cases) / sizeof(g_cases[0]), g_sets_run, g_sets_skipped, g_tests_missing,
	       g_sets_cpu_identical);
	CU_ASSERT(g_sets_run > 0);
}

/* Gelu has no node test here: the erf form in double over [-8, 8] and the far tails. */
static void test_gelu(void)
{
	static const float tails[] = {-100.0f, -20.0f, 20.0f, 100.0f, 0.0f, -0.0f};
	unsigned int bad = 0;

	for (int i = -8000; i <= 8000; i++) {
		float x = (float)i / 1000.0f;
		double want = (double)x * 0.5 * (1.0 + erf((double)x / sqrt(2.0)));

		if (!close_enough(bw_gelu(x), (float)want) && bad++ == 0)
			printf("  gelu(%g) = %.9g, expected %.9g\n", x, bw_gelu(x), want);
	}
	for (size_t i = 0; i < sizeof(tails) / sizeof(tails[0]); i++) {
		double x = tails[i], want = x * 0.5 * (1.0 + erf(x / sqrt(2.0)));

		CU_ASSERT(close_enough(bw_gelu(tails[i]), (float)want));
	}
	CU_ASSERT_EQUAL(bad, 0);
	CU_ASSERT(isnan(bw_gelu(NAN)));
}

/*
 * The corners the node tests do not reach, as the CPU kernels (runtime/kernels/unary.c,
 * elementwise.c) compute them for float: their expressions, evaluated here on the same inputs.
 */
static void test_cpu_semantics(void)
{
	const float nan = NAN, inf = INFINITY;

	CU_ASSERT_EQUAL(bw_relu(nan), 0.0f); /* x > 0 ? x : 0 */
	CU_ASSERT(isnan(bw_leaky_relu(nan, 0.01f)));
	CU_ASSERT(isnan(bw_clip(nan, -1.0f, 1.0f)));
	CU_ASSERT_EQUAL(bw_clip(5.0f, 2.0f, 1.0f), 1.0f); /* min > max: max */
	CU_ASSERT_EQUAL(bw_clip(-5.0f, 2.0f, 1.0f), 1.0f);
	CU_ASSERT_EQUAL(bw_clip(0.5f, -inf, inf), 0.5f);
	CU_ASSERT_EQUAL(bw_sigmoid(-1000.0f), 0.0f); /* no inf/inf */
	CU_ASSERT_EQUAL(bw_sigmoid(1000.0f), 1.0f);
	CU_ASSERT(isnan(bw_sigmoid(nan)));
	CU_ASSERT(isnan(bw_max(nan, 1.0f)) && isnan(bw_max(1.0f, nan))); /* NaN propagates, unlike fmaxf */
	CU_ASSERT(isnan(bw_min(nan, 1.0f)) && isnan(bw_min(1.0f, nan)));
	CU_ASSERT_EQUAL(bw_max(-inf, 3.0f), 3.0f);
	CU_ASSERT_EQUAL(bw_pow(3.0f, 2.0f), 9.0f);
	CU_ASSERT(isnan(bw_pow(-8.0f, 1.0f / 3.0f)));
	CU_ASSERT_EQUAL(bw_reciprocal(0.0f), inf);
	CU_ASSERT(signbit(bw_neg(0.0f)));
	CU_ASSERT_EQUAL(bw_abs(-inf), inf);
	CU_ASSERT(isnan(bw_sqrt(-1.0f)));
	CU_ASSERT_EQUAL(bw_where(1, 1.0f, 2.0f), 1.0f);
	CU_ASSERT_EQUAL(bw_where(0, 1.0f, 2.0f), 2.0f);
}

int main(int argc, char **argv)
{
	static CU_TestInfo node_tests[] = {
		{"ONNX node tests through the BW_HD functions", test_node_tests},
		CU_TEST_INFO_NULL,
	};
	static CU_TestInfo edge_tests[] = {
		{"Gelu against the erf formula in double", test_gelu},
		{"NaN, infinities and bounds as the CPU kernels have them", test_cpu_semantics},
		CU_TEST_INFO_NULL,
	};
	static CU_SuiteInfo suites[] = {
		{"hd math: node tests", NULL, NULL, NULL, NULL, node_tests},
		{"hd math: corners", NULL, NULL, NULL, NULL, edge_tests},
		CU_SUITE_INFO_NULL,
	};

	if (argc != 2) {
		fprintf(stderr, "usage: %s ONNX_NODE_TEST_DIR\n", argv[0]);
		return 1;
	}
	g_node_dir = argv[1];
	if (rt_cpu_kernels_register() != 0) {
		fprintf(stderr, "rt_cpu_kernels_register failed\n");
		return 1;
	}
	if (access(g_node_dir, R_OK) != 0) {
		printf("SKIP: %s not readable (apt install libonnx-testdata)\n", g_node_dir);
		return BW_TEST_EXIT_SKIP;
	}
	return bw_cunit_run(suites);
}
