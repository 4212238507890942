/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Unit tests of the CPU kernels (runtime/kernels): each op built as a node by hand, found through
 * the registry, inferred and run on small tensors whose expected values are worked out by hand in
 * the comments. Infer errors must be -EINVAL (or -ENOTSUP) with a message naming the attribute or
 * input at fault. Outputs are filled with a pattern before each run, so an element a kernel forgets
 * to write shows up.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../bw_cunit.h"

#include "graph.h"
#include "isa_level.h"

/* ---- building and running one node ----------------------------------------------------------- */

#define MAX_ATTRS 8
#define MAX_IO 8
#define ARENA_BYTES (1u << 20)

static struct rt_node g_node;
static struct rt_attr g_attrs[MAX_ATTRS];
static int64_t g_attr_ints[MAX_ATTRS][16];
static int32_t g_in_ids[MAX_IO], g_out_ids[MAX_IO];
static struct rt_tensor g_out[MAX_IO];
static const struct rt_kernel *g_kernel;
static char g_err[RT_ERR_MAX];
static unsigned char g_arena[ARENA_BYTES] __attribute__((aligned(64)));

static void node_new(const char *op, int64_t opset)
{
	memset(&g_node, 0, sizeof(g_node));
	memset(g_attrs, 0, sizeof(g_attrs));
	g_node.name = "n";
	g_node.op_type = (char *)op;
	g_node.domain = "";
	g_node.opset = opset;
	g_node.attrs = g_attrs;
}

static struct rt_attr *attr_add(const char *name, enum rt_attr_type type)
{
	struct rt_attr *a = &g_attrs[g_node.num_attrs++];

	CU_ASSERT_FATAL(g_node.num_attrs <= MAX_ATTRS);
	a->name = (char *)name;
	a->type = type;
	return a;
}

static void attr_int(const char *name, int64_t v)
{
	attr_add(name, RT_ATTR_INT)->i = v;
}

static void attr_float(const char *name, float v)
{
	attr_add(name, RT_ATTR_FLOAT)->f = v;
}

static void attr_str(const char *name, const char *v)
{
	attr_add(name, RT_ATTR_STRING)->s = (char *)v;
}

static void attr_ints(const char *name, unsigned int n, const int64_t *v)
{
	struct rt_attr *a = attr_add(name, RT_ATTR_INTS);

	memcpy(g_attr_ints[g_node.num_attrs - 1], v, n * sizeof(*v));
	a->ints = g_attr_ints[g_node.num_attrs - 1];
	a->count = n;
}

#define ATTR_INTS(name, ...)                                                                                 \
	attr_ints(name, sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t), (const int64_t[]){__VA_ARGS__})

/* Tensors: T_F(D(2, 3), 1, 2, 3, 4, 5, 6) is a 2x3 float tensor; S0 the shape of a scalar. */
#define D(...) (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), (const int64_t[]){__VA_ARGS__}
#define S0 0, NULL
#define T_F(dims, ...) tensor(BW_DTYPE_FLOAT, (const float[]){__VA_ARGS__}, dims)
#define T_I64(dims, ...) tensor(BW_DTYPE_INT64, (const int64_t[]){__VA_ARGS__}, dims)
#define T_I32(dims, ...) tensor(BW_DTYPE_INT32, (const int32_t[]){__VA_ARGS__}, dims)
#define T_I8(dims, ...) tensor(BW_DTYPE_INT8, (const int8_t[]){__VA_ARGS__}, dims)
#define T_U8(dims, ...) tensor(BW_DTYPE_UINT8, (const uint8_t[]){__VA_ARGS__}, dims)
#define T_B(dims, ...) tensor(BW_DTYPE_BOOL, (const uint8_t[]){__VA_ARGS__}, dims)
/* the shape only: data unknown at load */
#define T_SHAPE(dtype, dims) tensor(dtype, NULL, dims)
#define NONE ((struct rt_tensor){0})

static struct rt_tensor tensor(uint8_t dtype, const void *data, int rank, const int64_t *dims)
{
	struct rt_tensor t = {.dtype = dtype, .rank = (uint8_t)rank, .data = (void *)data};

	if (rank > 0)
		memcpy(t.dims, dims, (size_t)rank * sizeof(int64_t));
	return t;
}

/* Finds the kernel for the node (as the loader would) and runs its shape inference. */
static int infer_n(unsigned int nin, const struct rt_tensor *in, unsigned int nout)
{
	char why[RT_ERR_MAX];

	g_err[0] = '\0';
	g_node.num_inputs = (uint16_t)nin;
	g_node.num_outputs = (uint16_t)nout;
	g_node.inputs = g_in_ids;
	g_node.outputs = g_out_ids;
	for (unsigned int i = 0; i < nin; i++)
		g_in_ids[i] = in[i].dtype == 0 ? RT_VALUE_NONE : (int32_t)i;
	for (unsigned int i = 0; i < nout; i++)
		g_out_ids[i] = (int32_t)(MAX_IO + i);
	memset(g_out, 0, sizeof(g_out));
	g_kernel = rt_kernel_find(g_node.op_type, "", g_node.opset, nin > 0 ? in[0].dtype : 0, RT_DEVICE_CPU, why,
				  sizeof(why));
	if (g_kernel == NULL) {
		snprintf(g_err, sizeof(g_err), "%s", why);
		return -ENOENT;
	}
	return g_kernel->infer(&g_node, in, g_out, g_err, sizeof(g_err));
}

/* infer, then outputs and scratch from the arena (filled with a pattern), then run */
static int run_n(unsigned int nin, const struct rt_tensor *in, unsigned int nout)
{
	size_t used = 0, scratch_bytes;
	void *scratch = NULL;
	int rc = infer_n(nin, in, nout);

	if (rc < 0)
		return rc;
	for (unsigned int o = 0; o < nout; o++) {
		size_t bytes = (size_t)rt_tensor_elems(&g_out[o]) * rt_dtype_size(g_out[o].dtype);

		CU_ASSERT_FATAL(rt_tensor_elems(&g_out[o]) >= 0 && used + bytes + 64 <= ARENA_BYTES);
		g_out[o].data = g_arena + used;
		memset(g_out[o].data, 0x7f, bytes);
		used += (bytes + 63) & ~(size_t)63;
	}
	scratch_bytes = g_kernel->scratch_bytes != NULL ? g_kernel->scratch_bytes(&g_node, in, g_out) : 0;
	if (scratch_bytes > 0) {
		CU_ASSERT_FATAL(used + scratch_bytes <= ARENA_BYTES);
		scratch = g_arena + used;
	}
	return g_kernel->run(&g_node, in, g_out, scratch, g_err, sizeof(g_err));
}

#define INS(...) (const struct rt_tensor[]){__VA_ARGS__}
#define NIN(...) (unsigned int)(sizeof((struct rt_tensor[]){__VA_ARGS__}) / sizeof(struct rt_tensor))
/* RUN(nout, inputs...) and INFER(nout, inputs...) return the kernel's status */
#define RUN(nout, ...) run_n(NIN(__VA_ARGS__), INS(__VA_ARGS__), nout)
#define INFER(nout, ...) infer_n(NIN(__VA_ARGS__), INS(__VA_ARGS__), nout)
#define RUN_OK(nout, ...)                                                                                    \
	do {                                                                                                 \
		int rc_ = RUN(nout, __VA_ARGS__);                                                            \
		if (rc_ != 0)                                                                                \
			printf("\n  %s: %d %s ", g_node.op_type, rc_, g_err);                                \
		CU_ASSERT_EQUAL_FATAL(rc_, 0);                                                               \
	} while (0)

/* ---- checking outputs ------------------------------------------------------------------------ */

static void expect_dims(unsigned int o, int rank, const int64_t *dims)
{
	bool same = g_out[o].rank == rank;

	for (int d = 0; same && d < rank; d++)
		same = g_out[o].dims[d] == dims[d];
	if (!same) {
		char buf[96] = "[";

		for (int d = 0; d < g_out[o].rank; d++)
			snprintf(buf + strlen(buf), sizeof(buf) - strlen(buf), "%s%lld", d ? "," : "",
				 (long long)g_out[o].dims[d]);
		printf("\n  %s output %u has shape %s] ", g_node.op_type, o, buf);
	}
	CU_ASSERT_TRUE(same);
}

static void expect_f(unsigned int o, size_t n, const float *want)
{
	long bad = -1;

	CU_ASSERT_EQUAL_FATAL(g_out[o].dtype, BW_DTYPE_FLOAT);
	CU_ASSERT_EQUAL_FATAL(rt_tensor_elems(&g_out[o]), (int64_t)n);
	for (size_t i = 0; i < n && bad < 0; i++) {
		float got = ((const float *)g_out[o].data)[i];

		if (!(fabsf(got - want[i]) <= 1e-5f + 1e-5f * fabsf(want[i])) && !(isnan(got) && isnan(want[i])))
			bad = (long)i;
	}
	if (bad >= 0)
		printf("\n  %s output %u [%ld]: got %.7g, want %.7g ", g_node.op_type, o, bad,
		       ((const float *)g_out[o].data)[bad], want[bad]);
	CU_ASSERT_EQUAL(bad, -1);
}

static void expect_i64(unsigned int o, size_t n, const int64_t *want)
{
	CU_ASSERT_EQUAL_FATAL(g_out[o].dtype, BW_DTYPE_INT64);
	CU_ASSERT_EQUAL_FATAL(rt_tensor_elems(&g_out[o]), (int64_t)n);
	CU_ASSERT_EQUAL(memcmp(g_out[o].data, want, n * sizeof(*want)), 0);
}

/* bool, int8, uint8, int32, half...: the raw bytes */
static void expect_bytes(unsigned int o, uint8_t dtype, size_t n, const void *want)
{
	CU_ASSERT_EQUAL_FATAL(g_out[o].dtype, dtype);
	CU_ASSERT_EQUAL_FATAL(rt_tensor_elems(&g_out[o]), (int64_t)n);
	CU_ASSERT_EQUAL(memcmp(g_out[o].data, want, n * rt_dtype_size(dtype)), 0);
}

#define EXPECT_DIMS(o, ...) expect_dims(o, D(__VA_ARGS__))
#define EXPECT_SCALAR(o) expect_dims(o, 0, NULL)
#define EXPECT_F(o, ...) expect_f(o, sizeof((float[]){__VA_ARGS__}) / sizeof(float), (const float[]){__VA_ARGS__})
#define EXPECT_I64(o, ...)                                                                                   \
	expect_i64(o, sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t), (const int64_t[]){__VA_ARGS__})
#define EXPECT_RAW(o, dtype, type, ...)                                                                      \
	expect_bytes(o, dtype, sizeof((type[]){__VA_ARGS__}) / sizeof(type), (const type[]){__VA_ARGS__})

/* An error: rc and the words the message must contain (the attribute or input at fault). */
static void expect_err_at(int rc, int want_rc, const char *words, int line)
{
	if (rc != want_rc || strstr(g_err, words) == NULL)
		printf("\n  line %d %s: rc %d (want %d), err \"%s\" (want \"%s\") ", line, g_node.op_type, rc,
		       want_rc, g_err, words);
	CU_ASSERT_EQUAL(rc, want_rc);
	CU_ASSERT_PTR_NOT_NULL(strstr(g_err, words));
}

#define EXPECT_ERR(rc, want_rc, words) expect_err_at(rc, want_rc, words, __LINE__)

/* ---- registry -------------------------------------------------------------------------------- */

static void test_register(void)
{
	char why[RT_ERR_MAX];

	CU_ASSERT_EQUAL(rt_cpu_kernels_register(), 0);
	CU_ASSERT_EQUAL(rt_cpu_kernels_register(), 0); /* idempotent */
	CU_ASSERT_PTR_NOT_NULL(rt_kernel_find("Add", "", 14, BW_DTYPE_FLOAT, RT_DEVICE_CPU, why, sizeof(why)));
	CU_ASSERT_PTR_NOT_NULL(rt_kernel_find("Add", "", 7, BW_DTYPE_INT64, RT_DEVICE_CPU, why, sizeof(why)));
	CU_ASSERT_PTR_NOT_NULL(rt_kernel_find("Softmax", "", 11, BW_DTYPE_FLOAT, RT_DEVICE_CPU, why, sizeof(why)));
	CU_ASSERT_PTR_NOT_NULL(rt_kernel_find("Softmax", "", 13, BW_DTYPE_FLOAT, RT_DEVICE_CPU, why, sizeof(why)));
	CU_ASSERT_PTR_NOT_NULL(rt_kernel_find("Where", "", 16, BW_DTYPE_BOOL, RT_DEVICE_CPU, why, sizeof(why)));
	/* Add before 7 had the legacy broadcast attribute */
	CU_ASSERT_PTR_NULL(rt_kernel_find("Add", "", 6, BW_DTYPE_FLOAT, RT_DEVICE_CPU, why, sizeof(why)));
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "opset 6"));
	CU_ASSERT_PTR_NULL(rt_kernel_find("LayerNormalization", "", 16, BW_DTYPE_FLOAT, RT_DEVICE_CPU, why,
					  sizeof(why)));
	CU_ASSERT_PTR_NULL(rt_kernel_find("Add", "", 18, BW_DTYPE_FLOAT, RT_DEVICE_CPU, why, sizeof(why)));
	CU_ASSERT_PTR_NULL(rt_kernel_find("Conv", "", 11, BW_DTYPE_INT64, RT_DEVICE_CPU, why, sizeof(why)));
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "int64"));
	CU_ASSERT_PTR_NULL(rt_kernel_find("NoSuchOp", "", 13, BW_DTYPE_FLOAT, RT_DEVICE_CPU, why, sizeof(why)));
}

/* ---- elementwise ----------------------------------------------------------------------------- */

static void test_add_broadcast(void)
{
	node_new("Add", 14);
	/* [2,3] + [3]: the row added to each row */
	RUN_OK(1, T_F(D(2, 3), 1, 2, 3, 4, 5, 6), T_F(D(3), 10, 20, 30));
	EXPECT_DIMS(0, 2, 3);
	EXPECT_F(0, 11, 22, 33, 14, 25, 36);
	/* [2,1] + [1,3]: both sides broadcast */
	RUN_OK(1, T_F(D(2, 1), 1, 2), T_F(D(1, 3), 10, 20, 30));
	EXPECT_DIMS(0, 2, 3);
	EXPECT_F(0, 11, 21, 31, 12, 22, 32);
	/* [3,1,2] + [2,1]: ranks differ, every dim broadcasts somewhere */
	RUN_OK(1, T_F(D(3, 1, 2), 1, 2, 3, 4, 5, 6), T_F(D(2, 1), 10, 20));
	EXPECT_DIMS(0, 3, 2, 2);
	EXPECT_F(0, 11, 12, 21, 22, 13, 14, 23, 24, 15, 16, 25, 26);
	/* uint8 wraps: 250 + 10 = 260 - 256 */
	RUN_OK(1, T_U8(D(2), 250, 1), T_U8(D(2), 10, 2));
	EXPECT_RAW(0, BW_DTYPE_UINT8, uint8_t, 4, 3);
	/* int64 shape arithmetic with a scalar */
	RUN_OK(1, T_I64(D(2), 3, 4), T_I64(S0, 1));
	EXPECT_I64(0, 4, 5);

	node_new("Sub", 14);
	RUN_OK(1, T_F(S0, 5), T_F(D(2), 1, 2)); /* scalar - vector */
	EXPECT_DIMS(0, 2);
	EXPECT_F(0, 4, 3);

	node_new("Mul", 14);
	RUN_OK(1, T_F(D(2, 2), 1, 2, 3, 4), T_F(D(2, 1), 2, 3)); /* column broadcast */
	EXPECT_F(0, 2, 4, 9, 12);
	RUN_OK(1, T_I32(D(2), 100000, -3), T_I32(D(2), 100000, 7)); /* 10^10 wraps in int32 */
	EXPECT_RAW(0, BW_DTYPE_INT32, int32_t, (int32_t)(10000000000LL - 2 * 4294967296LL), -21);

	node_new("Div", 14);
	RUN_OK(1, T_F(D(2), 1, -3), T_F(D(2), 4, 2));
	EXPECT_F(0, 0.25f, -1.5f);
	/* integer division truncates toward zero; by zero gives 0 rather than a trap */
	RUN_OK(1, T_I64(D(5), 7, -7, 7, -7, 5), T_I64(D(5), 2, 2, -2, -2, 0));
	EXPECT_I64(0, 3, -3, -3, 3, 0);
}

static void test_mod_pow_compare(void)
{
	node_new("Mod", 13);
	RUN_OK(1, T_I64(D(2), -7, 7), T_I64(D(2), 3, -3)); /* Python's %: the divisor's sign */
	EXPECT_I64(0, 2, -2);
	attr_int("fmod", 1);
	RUN_OK(1, T_I64(D(2), -7, 7), T_I64(D(2), 3, -3)); /* C's fmod: the dividend's sign */
	EXPECT_I64(0, -1, 1);
	node_new("Mod", 13);
	EXPECT_ERR(INFER(1, T_F(D(1), 1), T_F(D(1), 1)), -EINVAL, "'fmod'");

	node_new("Pow", 15);
	RUN_OK(1, T_F(D(3), 1, 2, 3), T_F(S0, 2));
	EXPECT_F(0, 1, 4, 9);
	RUN_OK(1, T_F(D(2), 2, 4), T_I64(D(2), 3, -1)); /* the exponent's type may differ from 12 on */
	EXPECT_F(0, 8, 0.25f);
	RUN_OK(1, T_I64(D(2), 3, -2), T_I64(D(2), 3, 3));
	EXPECT_I64(0, 27, -8);
	node_new("Pow", 11);
	EXPECT_ERR(INFER(1, T_F(D(2), 2, 4), T_I64(D(2), 3, -1)), -EINVAL, "'Y'");

	node_new("Equal", 13);
	RUN_OK(1, T_I64(D(3), 1, 2, 3), T_I64(D(3), 1, 5, 3));
	EXPECT_RAW(0, BW_DTYPE_BOOL, uint8_t, 1, 0, 1);
	node_new("Greater", 13);
	RUN_OK(1, T_F(D(2, 2), 1, 2, 3, 4), T_F(S0, 2));
	EXPECT_RAW(0, BW_DTYPE_BOOL, uint8_t, 0, 0, 1, 1);
	node_new("LessOrEqual", 16);
	RUN_OK(1, T_I32(D(3), 1, 2, 3), T_I32(D(1), 2));
	EXPECT_RAW(0, BW_DTYPE_BOOL, uint8_t, 1, 1, 0);
	node_new("And", 7);
	RUN_OK(1, T_B(D(2, 2), 1, 1, 0, 0), T_B(D(2), 1, 0));
	EXPECT_RAW(0, BW_DTYPE_BOOL, uint8_t, 1, 0, 0, 0);
	node_new("Not", 1);
	RUN_OK(1, T_B(D(2), 1, 0));
	EXPECT_RAW(0, BW_DTYPE_BOOL, uint8_t, 0, 1);
}

static void test_variadic_where(void)
{
	node_new("Max", 13);
	RUN_OK(1, T_F(D(3), 1, 5, 3), T_F(D(3), 4, 2, 6), T_F(S0, 3));
	EXPECT_F(0, 4, 5, 6);
	node_new("Min", 13);
	RUN_OK(1, T_I64(D(2, 1), 1, 5), T_I64(D(2), 3, 0)); /* [2,1] and [2] make [2,2] */
	EXPECT_DIMS(0, 2, 2);
	EXPECT_I64(0, 1, 0, 3, 0);
	node_new("Sum", 13);
	RUN_OK(1, T_F(D(2), 1, 2), T_F(D(2), 3, 4), T_F(D(1), 10));
	EXPECT_F(0, 14, 16);
	node_new("Mean", 13);
	RUN_OK(1, T_F(D(2), 1, 2), T_F(D(2), 3, 4));
	EXPECT_F(0, 2, 3);

	node_new("Where", 16);
	/* condition [2,1] picks whole rows of X [2,2], or the scalar Y */
	RUN_OK(1, T_B(D(2, 1), 1, 0), T_F(D(2, 2), 1, 2, 3, 4), T_F(S0, -1));
	EXPECT_DIMS(0, 2, 2);
	EXPECT_F(0, 1, 2, -1, -1);
	RUN_OK(1, T_B(D(3), 0, 1, 0), T_I64(D(3), 1, 2, 3), T_I64(D(3), 7, 8, 9));
	EXPECT_I64(0, 7, 2, 9);
	EXPECT_ERR(INFER(1, T_B(D(3), 0, 1, 0), T_F(D(3), 1, 2, 3), T_I64(D(3), 7, 8, 9)), -EINVAL, "'Y'");
	EXPECT_ERR(INFER(1, T_B(D(2), 0, 1), T_F(D(3), 1, 2, 3), T_F(D(3), 7, 8, 9)), -EINVAL, "'condition'");
}

static void test_binary_errors(void)
{
	node_new("Add", 14);
	EXPECT_ERR(INFER(1, T_F(D(2, 3), 0), T_F(D(2), 0)), -EINVAL, "'A' [2,3] and 'B' [2]");
	EXPECT_ERR(INFER(1, T_F(D(2), 0), T_I64(D(2), 0)), -EINVAL, "'B'");
	EXPECT_ERR(INFER(1, T_F(D(2), 0)), -EINVAL, "'B' is missing");
	/* the batch dim unknown at load: it stays unknown, the known dims broadcast */
	CU_ASSERT_EQUAL(INFER(1, T_SHAPE(BW_DTYPE_FLOAT, D(-1, 3)), T_F(D(3), 0)), 0);
	EXPECT_DIMS(0, -1, 3);
}

static float sigmoid(float x)
{
	return 1.0f / (1.0f + expf(-x));
}

static void test_unary(void)
{
	const struct rt_tensor x = T_F(D(5), -2, -0.5f, 0, 0.5f, 2);

	node_new("Relu", 14);
	RUN_OK(1, x);
	EXPECT_F(0, 0, 0, 0, 0.5f, 2);
	RUN_OK(1, T_I32(D(2), -3, 3));
	EXPECT_RAW(0, BW_DTYPE_INT32, int32_t, 0, 3);
	node_new("LeakyRelu", 16);
	attr_float("alpha", 0.1f);
	RUN_OK(1, x);
	EXPECT_F(0, -0.2f, -0.05f, 0, 0.5f, 2);
	node_new("LeakyRelu", 16); /* alpha defaults to 0.01 */
	RUN_OK(1, x);
	EXPECT_F(0, -0.02f, -0.005f, 0, 0.5f, 2);
	node_new("Abs", 13);
	RUN_OK(1, x);
	EXPECT_F(0, 2, 0.5f, 0, 0.5f, 2);
	RUN_OK(1, T_I64(D(2), -5, 5));
	EXPECT_I64(0, 5, 5);
	node_new("Neg", 13);
	RUN_OK(1, x);
	EXPECT_F(0, 2, 0.5f, 0, -0.5f, -2);
	node_new("Floor", 13);
	RUN_OK(1, x);
	EXPECT_F(0, -2, -1, 0, 0, 2);
	node_new("Ceil", 13);
	RUN_OK(1, x);
	EXPECT_F(0, -2, 0, 0, 1, 2);
	node_new("Sigmoid", 13);
	RUN_OK(1, x);
	EXPECT_F(0, sigmoid(-2), sigmoid(-0.5f), 0.5f, sigmoid(0.5f), sigmoid(2));
	node_new("Tanh", 13);
	RUN_OK(1, x);
	EXPECT_F(0, tanhf(-2), tanhf(-0.5f), 0, tanhf(0.5f), tanhf(2));
	node_new("Erf", 13);
	RUN_OK(1, x);
	EXPECT_F(0, erff(-2), erff(-0.5f), 0, erff(0.5f), erff(2));
	node_new("Exp", 13);
	RUN_OK(1, x);
	EXPECT_F(0, expf(-2), expf(-0.5f), 1, expf(0.5f), expf(2));
	node_new("Sqrt", 13);
	RUN_OK(1, T_F(D(2, 2), 0, 1, 4, 9));
	EXPECT_DIMS(0, 2, 2);
	EXPECT_F(0, 0, 1, 2, 3);
	node_new("Reciprocal", 13);
	RUN_OK(1, T_F(D(4), -2, -0.5f, 0.5f, 2));
	EXPECT_F(0, -0.5f, -2, 2, 0.5f);
	node_new("Identity", 16);
	RUN_OK(1, T_I64(D(2), 1, -1));
	EXPECT_I64(0, 1, -1);

	node_new("Sqrt", 13);
	EXPECT_ERR(INFER(1, T_I64(D(1), 4)), -ENOENT, "int64"); /* no int Sqrt in the registry */
	node_new("LeakyRelu", 16);
	attr_int("alpha", 1); /* an int where a float belongs */
	EXPECT_ERR(INFER(1, x), -EINVAL, "'alpha'");
}

static void test_clip(void)
{
	const struct rt_tensor x = T_F(D(4), -2, 0, 2, 5);

	node_new("Clip", 13);
	RUN_OK(1, x, T_F(S0, 0), T_F(S0, 3));
	EXPECT_F(0, 0, 0, 2, 3);
	RUN_OK(1, x, T_F(S0, 1)); /* min only */
	EXPECT_F(0, 1, 1, 2, 5);
	RUN_OK(1, x, NONE, T_F(S0, 1)); /* max only */
	EXPECT_F(0, -2, 0, 1, 1);
	RUN_OK(1, x, T_F(S0, 3), T_F(S0, 1)); /* min > max: everything is max */
	EXPECT_F(0, 1, 1, 1, 1);
	RUN_OK(1, T_I8(D(3), -100, 5, 100), T_I8(S0, -10), T_I8(S0, 10));
	EXPECT_RAW(0, BW_DTYPE_INT8, int8_t, -10, 5, 10);
	EXPECT_ERR(INFER(1, x, T_F(D(2), 0, 1)), -EINVAL, "'min'");
	/* before opset 11 the bounds are attributes */
	node_new("Clip", 6);
	attr_float("min", -1);
	attr_float("max", 1);
	RUN_OK(1, x);
	EXPECT_F(0, -1, 0, 1, 1);
}

static void test_cast(void)
{
	node_new("Cast", 13);
	attr_int("to", BW_DTYPE_INT64);
	RUN_OK(1, T_F(D(3), 1.7f, -1.7f, 0)); /* truncation toward zero */
	EXPECT_I64(0, 1, -1, 0);
	node_new("Cast", 13);
	attr_int("to", BW_DTYPE_FLOAT);
	RUN_OK(1, T_I64(D(2), 3, -4));
	EXPECT_F(0, 3, -4);
	node_new("Cast", 13);
	attr_int("to", BW_DTYPE_BOOL);
	RUN_OK(1, T_F(D(3), 0, 0.5f, -2));
	EXPECT_RAW(0, BW_DTYPE_BOOL, uint8_t, 0, 1, 1);
	node_new("Cast", 13);
	attr_int("to", BW_DTYPE_INT32);
	RUN_OK(1, T_I64(D(2), 5, -6));
	EXPECT_RAW(0, BW_DTYPE_INT32, int32_t, 5, -6);
	/* IEEE half: 1 = 0x3c00, 0.5 = 0x3800, -2 = 0xc000, 65504 the largest, 1e5 overflows, 1e-7 is
	 * 1.68 units of the smallest subnormal (2^-24) and rounds to 2 */
	node_new("Cast", 13);
	attr_int("to", BW_DTYPE_FLOAT16);
	RUN_OK(1, T_F(D(6), 1, 0.5f, -2, 65504, 1e5f, 1e-7f));
	EXPECT_RAW(0, BW_DTYPE_FLOAT16, uint16_t, 0x3c00, 0x3800, 0xc000, 0x7bff, 0x7c00, 0x0002);
	node_new("Cast", 13);
	attr_int("to", BW_DTYPE_FLOAT);
	RUN_OK(1, tensor(BW_DTYPE_FLOAT16, (const uint16_t[]){0x3c00, 0xc000, 0x0001}, D(3)));
	EXPECT_F(0, 1, -2, 5.9604645e-8f);
	node_new("Cast", 13);
	attr_int("to", BW_DTYPE_BFLOAT16);
	RUN_OK(1, T_F(D(2), 1, -2));
	EXPECT_RAW(0, BW_DTYPE_BFLOAT16, uint16_t, 0x3f80, 0xc000);

	node_new("Cast", 13);
	EXPECT_ERR(INFER(1, T_F(D(1), 0)), -EINVAL, "'to'");
	attr_int("to", 99);
	EXPECT_ERR(INFER(1, T_F(D(1), 0)), -EINVAL, "'to'");
}

/* ---- softmax and reductions ------------------------------------------------------------------ */

static void test_softmax(void)
{
	/* softmax(1, 2, 3) = (e^-2, e^-1, 1) / (1 + e^-1 + e^-2) */
	node_new("Softmax", 13);
	RUN_OK(1, T_F(D(2, 3), 1, 2, 3, 1, 1, 1));
	EXPECT_F(0, 0.09003057f, 0.24472847f, 0.66524096f, 1 / 3.0f, 1 / 3.0f, 1 / 3.0f);
	/* opset 11, axis 1 (default) on [2,2,2]: each batch is one row of 4 */
	node_new("Softmax", 11);
	RUN_OK(1, T_F(D(2, 2, 2), 0, 0, 0, 0, 1, 2, 3, 4));
	EXPECT_DIMS(0, 2, 2, 2);
	EXPECT_F(0, 0.25f, 0.25f, 0.25f, 0.25f, 0.0320586f, 0.08714432f, 0.23688282f, 0.64391426f);
	/* opset 13, axis 1 on the same: pairs along dim 1, (1,3) and (2,4): 1 / (1 + e^2) */
	node_new("Softmax", 13);
	attr_int("axis", 1);
	RUN_OK(1, T_F(D(2, 2, 2), 0, 0, 0, 0, 1, 2, 3, 4));
	EXPECT_F(0, 0.5f, 0.5f, 0.5f, 0.5f, 0.11920292f, 0.11920292f, 0.88079708f, 0.88079708f);
	node_new("LogSoftmax", 13);
	RUN_OK(1, T_F(D(3), 1, 2, 3));
	EXPECT_F(0, -2.40760596f, -1.40760596f, -0.40760596f);
	node_new("Softmax", 13);
	attr_int("axis", 2);
	EXPECT_ERR(INFER(1, T_F(D(2, 3), 0)), -EINVAL, "'axis'");
}

static void test_reduce(void)
{
	const struct rt_tensor x = T_F(D(2, 3), 1, 2, 3, 4, 5, 6);

	/* [2,2,2] 0..7, mean over axis 1: (0+2)/2, (1+3)/2, (4+6)/2, (5+7)/2 */
	node_new("ReduceMean", 13);
	ATTR_INTS("axes", 1);
	RUN_OK(1, T_F(D(2, 2, 2), 0, 1, 2, 3, 4, 5, 6, 7));
	EXPECT_DIMS(0, 2, 1, 2);
	EXPECT_F(0, 1, 2, 5, 6);
	/* ReduceSum 13: axes is an input, -1 is the last axis */
	node_new("ReduceSum", 13);
	attr_int("keepdims", 0);
	RUN_OK(1, x, T_I64(D(1), -1));
	EXPECT_DIMS(0, 2);
	EXPECT_F(0, 6, 15);
	node_new("ReduceSum", 13); /* no axes: everything, kept as [1,1] */
	RUN_OK(1, x);
	EXPECT_DIMS(0, 1, 1);
	EXPECT_F(0, 21);
	node_new("ReduceSum", 13);
	attr_int("noop_with_empty_axes", 1);
	RUN_OK(1, x, T_I64(D(0), 0));
	EXPECT_DIMS(0, 2, 3);
	EXPECT_F(0, 1, 2, 3, 4, 5, 6);
	node_new("ReduceSum", 11); /* before 13: the attribute */
	ATTR_INTS("axes", 0);
	RUN_OK(1, x);
	EXPECT_DIMS(0, 1, 3);
	EXPECT_F(0, 5, 7, 9);
	node_new("ReduceSum", 13);
	RUN_OK(1, T_I64(D(3), 1, 2, 3), T_I64(D(1), 0));
	EXPECT_I64(0, 6);
	node_new("ReduceMax", 13);
	RUN_OK(1, x);
	EXPECT_DIMS(0, 1, 1);
	EXPECT_F(0, 6);
	node_new("ReduceMin", 13);
	ATTR_INTS("axes", 1);
	attr_int("keepdims", 0);
	RUN_OK(1, x);
	EXPECT_F(0, 1, 4);

	node_new("ReduceMean", 13);
	ATTR_INTS("axes", 2);
	EXPECT_ERR(INFER(1, x), -EINVAL, "'axes'");
	node_new("ReduceSum", 13);
	EXPECT_ERR(INFER(1, x, T_SHAPE(BW_DTYPE_INT64, D(1))), -ENOTSUP, "input 'axes' must be a constant");
}

/* ---- shapes and layout ----------------------------------------------------------------------- */

static void test_reshape_flatten(void)
{
	const struct rt_tensor x = T_F(D(2, 3), 1, 2, 3, 4, 5, 6);

	node_new("Reshape", 14);
	RUN_OK(1, x, T_I64(D(2), 3, -1));
	EXPECT_DIMS(0, 3, 2);
	EXPECT_F(0, 1, 2, 3, 4, 5, 6);
	CU_ASSERT_EQUAL(INFER(1, T_SHAPE(BW_DTYPE_FLOAT, D(2, 3, 4)), T_I64(D(2), 0, -1)), 0); /* 0: dim 0 */
	EXPECT_DIMS(0, 2, 12);
	CU_ASSERT_EQUAL(INFER(1, T_SHAPE(BW_DTYPE_FLOAT, D(-1, 3, 4)), T_I64(D(2), 0, 12)), 0);
	EXPECT_DIMS(0, -1, 12);
	CU_ASSERT_EQUAL(INFER(1, T_SHAPE(BW_DTYPE_FLOAT, D(-1, 3, 4)), T_I64(D(2), -1, 4)), 0);
	EXPECT_DIMS(0, -1, 4);
	attr_int("allowzero", 1); /* 0 is a real 0 */
	CU_ASSERT_EQUAL(INFER(1, T_SHAPE(BW_DTYPE_FLOAT, D(0, 3)), T_I64(D(2), 3, 0)), 0);
	EXPECT_DIMS(0, 3, 0);
	node_new("Reshape", 14);
	EXPECT_ERR(INFER(1, x, T_SHAPE(BW_DTYPE_INT64, D(2))), -ENOTSUP, "input 'shape' must be a constant");
	EXPECT_ERR(INFER(1, x, T_I64(D(2), -1, -1)), -EINVAL, "'shape'");
	EXPECT_ERR(INFER(1, x, T_I64(D(1), 4)), -EINVAL, "'shape'");

	node_new("Flatten", 13);
	attr_int("axis", 0);
	CU_ASSERT_EQUAL(INFER(1, T_SHAPE(BW_DTYPE_FLOAT, D(2, 3, 4))), 0);
	EXPECT_DIMS(0, 1, 24);
	node_new("Flatten", 13);
	attr_int("axis", -1);
	RUN_OK(1, T_F(D(2, 1, 2), 1, 2, 3, 4));
	EXPECT_DIMS(0, 2, 2);
	EXPECT_F(0, 1, 2, 3, 4);
	node_new("Flatten", 13);
	attr_int("axis", 3);
	CU_ASSERT_EQUAL(INFER(1, T_SHAPE(BW_DTYPE_FLOAT, D(2, 3, 4))), 0);
	EXPECT_DIMS(0, 24, 1);
	node_new("Flatten", 13);
	attr_int("axis", 4);
	EXPECT_ERR(INFER(1, T_SHAPE(BW_DTYPE_FLOAT, D(2, 3, 4))), -EINVAL, "'axis'");
}

static void test_transpose_concat_split(void)
{
	node_new("Transpose", 13); /* default: dims reversed */
	RUN_OK(1, T_F(D(2, 3), 1, 2, 3, 4, 5, 6));
	EXPECT_DIMS(0, 3, 2);
	EXPECT_F(0, 1, 4, 2, 5, 3, 6);
	/* perm (1,0,2) on [2,2,2] 0..7: out[i][j] = in[j][i], rows of 2 */
	node_new("Transpose", 13);
	ATTR_INTS("perm", 1, 0, 2);
	RUN_OK(1, T_I64(D(2, 2, 2), 0, 1, 2, 3, 4, 5, 6, 7));
	EXPECT_I64(0, 0, 1, 4, 5, 2, 3, 6, 7);
	node_new("Transpose", 13);
	ATTR_INTS("perm", 0, 0);
	EXPECT_ERR(INFER(1, T_F(D(2, 2), 0)), -EINVAL, "'perm'");

	node_new("Concat", 13);
	attr_int("axis", -1);
	RUN_OK(1, T_F(D(2, 1), 1, 2), T_F(D(2, 2), 3, 4, 5, 6));
	EXPECT_DIMS(0, 2, 3);
	EXPECT_F(0, 1, 3, 4, 2, 5, 6);
	node_new("Concat", 13);
	attr_int("axis", 0);
	RUN_OK(1, T_I64(D(1), 1), T_I64(D(2), 2, 3), T_I64(D(0), 0));
	EXPECT_I64(0, 1, 2, 3);
	node_new("Concat", 13);
	attr_int("axis", 1);
	EXPECT_ERR(INFER(1, T_F(D(2, 2), 0), T_F(D(3, 2), 0)), -EINVAL, "input 1 [3,2]");
	node_new("Concat", 13);
	EXPECT_ERR(INFER(1, T_F(D(2), 0), T_F(D(2), 0)), -EINVAL, "'axis'");

	/* Split 13: sizes as an input */
	node_new("Split", 13);
	attr_int("axis", 1);
	RUN_OK(2, T_F(D(2, 3), 1, 2, 3, 4, 5, 6), T_I64(D(2), 1, 2));
	EXPECT_DIMS(0, 2, 1);
	EXPECT_F(0, 1, 4);
	EXPECT_DIMS(1, 2, 2);
	EXPECT_F(1, 2, 3, 5, 6);
	node_new("Split", 11); /* before 13: the attribute */
	ATTR_INTS("split", 2, 1);
	RUN_OK(2, T_F(D(3), 1, 2, 3));
	EXPECT_F(0, 1, 2);
	EXPECT_F(1, 3);
	node_new("Split", 13); /* equal parts */
	RUN_OK(2, T_I64(D(4), 1, 2, 3, 4));
	EXPECT_I64(0, 1, 2);
	EXPECT_I64(1, 3, 4);
	EXPECT_ERR(INFER(2, T_F(D(3), 0)), -EINVAL, "equal parts");
	EXPECT_ERR(INFER(2, T_F(D(3), 0), T_I64(D(2), 1, 1)), -EINVAL, "'split'");
}

static void test_slice(void)
{
	const struct rt_tensor x = T_F(D(3, 4), 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11);

	/* rows reversed: start -1, end "minus infinity", step -1 */
	node_new("Slice", 13);
	RUN_OK(1, x, T_I64(D(1), -1), T_I64(D(1), INT64_MIN), T_I64(D(1), 0), T_I64(D(1), -1));
	EXPECT_DIMS(0, 3, 4);
	EXPECT_F(0, 8, 9, 10, 11, 4, 5, 6, 7, 0, 1, 2, 3);
	/* columns 1 and 3: axis -1, end past the dim, step 2 */
	RUN_OK(1, x, T_I64(D(1), 1), T_I64(D(1), INT64_MAX), T_I64(D(1), -1), T_I64(D(1), 2));
	EXPECT_DIMS(0, 3, 2);
	EXPECT_F(0, 1, 3, 5, 7, 9, 11);
	/* both axes, default axes and steps, int32 starts/ends */
	RUN_OK(1, x, T_I32(D(2), 1, -3), T_I32(D(2), 100, 3));
	EXPECT_DIMS(0, 2, 2);
	EXPECT_F(0, 5, 6, 9, 10);
	/* a start past the end: empty */
	CU_ASSERT_EQUAL(INFER(1, x, T_I64(D(1), 5), T_I64(D(1), 10)), 0);
	EXPECT_DIMS(0, 0, 4);
	EXPECT_ERR(INFER(1, x, T_I64(D(1), 0), T_I64(D(1), 1), T_I64(D(1), 0), T_I64(D(1), 0)), -EINVAL, "'steps'");
	EXPECT_ERR(INFER(1, x, T_SHAPE(BW_DTYPE_INT64, D(1)), T_I64(D(1), 1)), -ENOTSUP,
		   "input 'starts' must be a constant");
	EXPECT_ERR(INFER(1, x, T_I64(D(1), 0), T_I64(D(1), 1), T_I64(D(1), 2)), -EINVAL, "'axes'");
	/* before 10: attributes, no steps */
	node_new("Slice", 9);
	ATTR_INTS("starts", 0, 1);
	ATTR_INTS("ends", 2, 3);
	RUN_OK(1, x);
	EXPECT_F(0, 1, 2, 5, 6);
}

static void test_gather(void)
{
	const struct rt_tensor x = T_F(D(3, 2), 1, 2, 3, 4, 5, 6);

	node_new("Gather", 13);
	RUN_OK(1, x, T_I64(D(2), 2, -3)); /* rows 2 and 0 */
	EXPECT_DIMS(0, 2, 2);
	EXPECT_F(0, 5, 6, 1, 2);
	attr_int("axis", 1); /* [3,2] by [1,2] indices on axis 1: [3,1,2] */
	RUN_OK(1, x, T_I32(D(1, 2), 1, 0));
	EXPECT_DIMS(0, 3, 1, 2);
	EXPECT_F(0, 2, 1, 4, 3, 6, 5);
	/* the Shape -> Gather pattern: a scalar index gives a scalar */
	node_new("Gather", 13);
	RUN_OK(1, T_I64(D(3), 7, 8, 9), T_I64(S0, 1));
	EXPECT_SCALAR(0);
	EXPECT_I64(0, 8);
	EXPECT_ERR(INFER(1, x, T_I64(D(1), 3)), -EINVAL, "'indices'");
	/* indices known only at run: checked there, nothing written */
	{
		int64_t bad[1] = {-4};
		struct rt_tensor idx = T_SHAPE(BW_DTYPE_INT64, D(1));

		CU_ASSERT_EQUAL(INFER(1, x, idx), 0);
		idx.data = bad;
		EXPECT_ERR(RUN(1, x, idx), -EINVAL, "'indices'");
	}
	node_new("Gather", 13);
	attr_int("axis", 2);
	EXPECT_ERR(INFER(1, x, T_I64(D(1), 0)), -EINVAL, "'axis'");
}

static void test_squeeze_unsqueeze(void)
{
	node_new("Unsqueeze", 13);
	RUN_OK(1, T_F(D(3), 1, 2, 3), T_I64(D(2), 0, -1)); /* axes against the output rank 3 */
	EXPECT_DIMS(0, 1, 3, 1);
	EXPECT_F(0, 1, 2, 3);
	CU_ASSERT_EQUAL(INFER(1, T_F(S0, 1), T_I64(D(1), 0)), 0); /* scalar to [1] */
	EXPECT_DIMS(0, 1);
	EXPECT_ERR(INFER(1, T_F(D(3), 0), T_I64(D(2), 0, 0)), -EINVAL, "'axes'");
	EXPECT_ERR(INFER(1, T_F(D(3), 0)), -EINVAL, "'axes'");
	node_new("Unsqueeze", 11); /* before 13: the attribute */
	ATTR_INTS("axes", 1);
	CU_ASSERT_EQUAL(INFER(1, T_F(D(2, 3), 0)), 0);
	EXPECT_DIMS(0, 2, 1, 3);

	node_new("Squeeze", 13);
	RUN_OK(1, T_F(D(1, 3, 1), 1, 2, 3), T_I64(D(1), -3));
	EXPECT_DIMS(0, 3, 1);
	EXPECT_F(0, 1, 2, 3);
	CU_ASSERT_EQUAL(INFER(1, T_F(D(1, 3, 1), 0)), 0); /* no axes: every 1 */
	EXPECT_DIMS(0, 3);
	EXPECT_ERR(INFER(1, T_F(D(1, 3, 1), 0), T_I64(D(1), 1)), -EINVAL, "'axes'");
}

static void test_shape_constant(void)
{
	node_new("Shape", 15);
	RUN_OK(1, T_SHAPE(BW_DTYPE_FLOAT, D(2, 3, 4)));
	EXPECT_I64(0, 2, 3, 4);
	attr_int("start", -2);
	RUN_OK(1, T_SHAPE(BW_DTYPE_FLOAT, D(2, 3, 4)));
	EXPECT_I64(0, 3, 4);
	node_new("Shape", 15);
	attr_int("end", 1);
	RUN_OK(1, T_SHAPE(BW_DTYPE_FLOAT, D(2, 3, 4)));
	EXPECT_I64(0, 2);
	node_new("Size", 13);
	RUN_OK(1, T_SHAPE(BW_DTYPE_FLOAT, D(2, 3, 4)));
	EXPECT_SCALAR(0);
	EXPECT_I64(0, 24);

	node_new("Constant", 13);
	ATTR_INTS("value_ints", 1, 2, 3);
	RUN_OK(1);
	EXPECT_I64(0, 1, 2, 3);
	node_new("Constant", 13);
	attr_float("value_float", 2.5f);
	RUN_OK(1);
	EXPECT_SCALAR(0);
	EXPECT_F(0, 2.5f);
	node_new("Constant", 13);
	attr_add("value", RT_ATTR_TENSOR)->tensor = T_F(D(2), 1.5f, -2.5f);
	RUN_OK(1);
	EXPECT_DIMS(0, 2);
	EXPECT_F(0, 1.5f, -2.5f);
	node_new("Constant", 13);
	EXPECT_ERR(INFER(1), -EINVAL, "'value'");

	node_new("ConstantOfShape", 9);
	attr_add("value", RT_ATTR_TENSOR)->tensor = T_I64(D(1), 7);
	RUN_OK(1, T_I64(D(2), 2, 1));
	EXPECT_DIMS(0, 2, 1);
	EXPECT_I64(0, 7, 7);
	node_new("Expand", 13);
	RUN_OK(1, T_F(D(2, 1), 1, 2), T_I64(D(3), 2, 1, 3));
	EXPECT_DIMS(0, 2, 2, 3);
	EXPECT_F(0, 1, 1, 1, 2, 2, 2, 1, 1, 1, 2, 2, 2);
	node_new("Tile", 13);
	RUN_OK(1, T_F(D(2, 2), 1, 2, 3, 4), T_I64(D(2), 2, 1));
	EXPECT_DIMS(0, 4, 2);
	EXPECT_F(0, 1, 2, 3, 4, 1, 2, 3, 4);
}

/* ---- linear algebra -------------------------------------------------------------------------- */

static void test_matmul(void)
{
	/* [[1,2,3],[4,5,6]] x [[1,2],[3,4],[5,6]] = [[22,28],[49,64]] */
	const struct rt_tensor a = T_F(D(2, 3), 1, 2, 3, 4, 5, 6), b = T_F(D(3, 2), 1, 2, 3, 4, 5, 6);

	node_new("MatMul", 13);
	RUN_OK(1, a, b);
	EXPECT_DIMS(0, 2, 2);
	EXPECT_F(0, 22, 28, 49, 64);
	/* a batch of A against one B: the second A picks rows 1 and 2 of B */
	RUN_OK(1, T_F(D(2, 2, 3), 1, 2, 3, 4, 5, 6, 1, 0, 0, 0, 1, 0), b);
	EXPECT_DIMS(0, 2, 2, 2);
	EXPECT_F(0, 22, 28, 49, 64, 1, 2, 3, 4);
	/* batch dims broadcast both ways: A [2,1,1,2] rows (1,2) (3,4); B [3,2,1] columns (1,1) (1,0)
	 * (0,1); out[i][j] = row i . column j */
	RUN_OK(1, T_F(D(2, 1, 1, 2), 1, 2, 3, 4), T_F(D(3, 2, 1), 1, 1, 1, 0, 0, 1));
	EXPECT_DIMS(0, 2, 3, 1, 1);
	EXPECT_F(0, 3, 1, 2, 7, 3, 4);
	/* A [1,2,2] (identity) against B [2,2,2]: B */
	RUN_OK(1, T_F(D(1, 2, 2), 1, 0, 0, 1), T_F(D(2, 2, 2), 1, 2, 3, 4, 5, 6, 7, 8));
	EXPECT_DIMS(0, 2, 2, 2);
	EXPECT_F(0, 1, 2, 3, 4, 5, 6, 7, 8);
	/* 1-D operands: a dim added, then removed */
	RUN_OK(1, T_F(D(3), 1, 2, 3), T_F(D(3), 4, 5, 6));
	EXPECT_SCALAR(0);
	EXPECT_F(0, 32);
	RUN_OK(1, T_F(D(3), 1, 2, 3), b);
	EXPECT_DIMS(0, 2);
	EXPECT_F(0, 22, 28);
	RUN_OK(1, a, T_F(D(3), 1, 0, -1));
	EXPECT_DIMS(0, 2);
	EXPECT_F(0, -2, -2);
	EXPECT_ERR(INFER(1, a, a), -EINVAL, "'A' [2,3] and 'B' [2,3]");
	EXPECT_ERR(INFER(1, T_F(D(2, 2, 3), 0), T_F(D(3, 3, 2), 0)), -EINVAL, "batch dims");
}

static void test_gemm(void)
{
	const struct rt_tensor a = T_F(D(2, 3), 1, 2, 3, 4, 5, 6), b = T_F(D(3, 2), 1, 2, 3, 4, 5, 6);

	/* A B = [[22,28],[49,64]]; C [2] adds (1,-1) to each row */
	node_new("Gemm", 13);
	RUN_OK(1, a, b, T_F(D(2), 1, -1));
	EXPECT_DIMS(0, 2, 2);
	EXPECT_F(0, 23, 27, 50, 63);
	RUN_OK(1, a, b, T_F(D(2, 1), 10, 20)); /* C [2,1]: per row */
	EXPECT_F(0, 32, 38, 69, 84);
	RUN_OK(1, a, b); /* no C (optional from 11) */
	EXPECT_F(0, 22, 28, 49, 64);
	/* both stored transposed, alpha 0.5, beta 2, scalar C 1: 0.5 A B + 2 */
	node_new("Gemm", 13);
	attr_int("transA", 1);
	attr_int("transB", 1);
	attr_float("alpha", 0.5f);
	attr_float("beta", 2);
	RUN_OK(1, T_F(D(3, 2), 1, 4, 2, 5, 3, 6), T_F(D(2, 3), 1, 3, 5, 2, 4, 6), T_F(S0, 1));
	EXPECT_F(0, 13, 16, 26.5f, 34);
	node_new("Gemm", 13);
	EXPECT_ERR(INFER(1, a, b, T_F(D(3), 0)), -EINVAL, "'C'");
	EXPECT_ERR(INFER(1, a, a), -EINVAL, "'B'");
	attr_int("transB", 1);
	CU_ASSERT_EQUAL(INFER(1, a, a), 0); /* A Aᵀ is fine */
	EXPECT_DIMS(0, 2, 2);
}

/* ---- normalization --------------------------------------------------------------------------- */

static void test_norm(void)
{
	/* channel 0: (x - 1) / sqrt(4) * 1 + 0; channel 1: (x - 3) / sqrt(1) * 2 + 1 */
	node_new("BatchNormalization", 15);
	attr_float("epsilon", 0);
	RUN_OK(1, T_F(D(1, 2, 1, 2), 1, 2, 3, 4), T_F(D(2), 1, 2), T_F(D(2), 0, 1), T_F(D(2), 1, 3),
	       T_F(D(2), 4, 1));
	EXPECT_F(0, 0, 0.5f, 1, 3);
	attr_int("training_mode", 1);
	EXPECT_ERR(INFER(1, T_F(D(1, 2), 0), T_F(D(2), 0), T_F(D(2), 0), T_F(D(2), 0), T_F(D(2), 0)), -ENOTSUP,
		   "'training_mode'");
	node_new("BatchNormalization", 15);
	EXPECT_ERR(INFER(1, T_F(D(1, 2), 0), T_F(D(3), 0), T_F(D(2), 0), T_F(D(2), 0), T_F(D(2), 0)), -EINVAL,
		   "'scale'");

	/* rows (1,3) and (0,4): means 2 and 2, variances 1 and 4, so (-1,1) both; scale (2,1), B (0,1) */
	node_new("LayerNormalization", 17);
	attr_float("epsilon", 0);
	RUN_OK(3, T_F(D(2, 2), 1, 3, 0, 4), T_F(D(2), 2, 1), T_F(D(2), 0, 1));
	EXPECT_F(0, -2, 2, -2, 2);
	EXPECT_DIMS(1, 2, 1);
	EXPECT_F(1, 2, 2);
	EXPECT_F(2, 1, 0.5f);
	/* axis 0: one group of everything, scale over all four */
	node_new("LayerNormalization", 17);
	attr_int("axis", 0);
	attr_float("epsilon", 0);
	RUN_OK(1, T_F(D(2, 2), 1, 3, 1, 3), T_F(D(2, 2), 1, 1, 1, 1));
	EXPECT_F(0, -1, 1, -1, 1);
	node_new("LayerNormalization", 17);
	EXPECT_ERR(INFER(1, T_F(D(2, 2), 0), T_F(D(3), 0)), -EINVAL, "'Scale'");
}

/* ---- pooling --------------------------------------------------------------------------------- */

static const float g_x16[16] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
static const float g_x9[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};

static void test_maxpool(void)
{
	const struct rt_tensor x4 = tensor(BW_DTYPE_FLOAT, g_x16, D(1, 1, 4, 4));
	const struct rt_tensor x3 = tensor(BW_DTYPE_FLOAT, g_x9, D(1, 1, 3, 3));

	/* 2x2 windows, stride 2, on 0..15: the bottom-right of each */
	node_new("MaxPool", 12);
	ATTR_INTS("kernel_shape", 2, 2);
	ATTR_INTS("strides", 2, 2);
	RUN_OK(2, x4);
	EXPECT_DIMS(0, 1, 1, 2, 2);
	EXPECT_F(0, 5, 7, 13, 15);
	EXPECT_I64(1, 5, 7, 13, 15);
	attr_int("storage_order", 1); /* column-major indices: w * 4 + h */
	RUN_OK(2, x4);
	EXPECT_I64(1, 5, 13, 7, 15);
	/* 3x3, stride 2, pads 1 on 1..9: windows (1,2,4,5) (2,3,5,6) (4,5,7,8) (5,6,8,9) */
	node_new("MaxPool", 12);
	ATTR_INTS("kernel_shape", 3, 3);
	ATTR_INTS("strides", 2, 2);
	ATTR_INTS("pads", 1, 1, 1, 1);
	RUN_OK(1, x3);
	EXPECT_DIMS(0, 1, 1, 2, 2);
	EXPECT_F(0, 5, 6, 8, 9);
	/* 3x3 stride 2 on 4x4: floor mode one window; ceil mode adds the clipped ones */
	node_new("MaxPool", 12);
	ATTR_INTS("kernel_shape", 3, 3);
	ATTR_INTS("strides", 2, 2);
	RUN_OK(1, x4);
	EXPECT_DIMS(0, 1, 1, 1, 1);
	EXPECT_F(0, 10);
	attr_int("ceil_mode", 1);
	RUN_OK(1, x4);
	EXPECT_DIMS(0, 1, 1, 2, 2);
	EXPECT_F(0, 10, 11, 14, 15);
	/* 2x2 dilated by 2 (a 3x3 span), stride 1: (0,2,8,10) (1,3,9,11) (4,6,12,14) (5,7,13,15) */
	node_new("MaxPool", 12);
	ATTR_INTS("kernel_shape", 2, 2);
	ATTR_INTS("dilations", 2, 2);
	RUN_OK(1, x4);
	EXPECT_DIMS(0, 1, 1, 2, 2);
	EXPECT_F(0, 10, 11, 14, 15);
	/* 1-D, and uint8 */
	node_new("MaxPool", 12);
	ATTR_INTS("kernel_shape", 2);
	ATTR_INTS("strides", 2);
	RUN_OK(1, T_F(D(1, 1, 5), 1, 5, 2, 4, 3));
	EXPECT_DIMS(0, 1, 1, 2);
	EXPECT_F(0, 5, 4);
	RUN_OK(1, T_U8(D(1, 1, 4), 1, 200, 3, 4));
	EXPECT_RAW(0, BW_DTYPE_UINT8, uint8_t, 200, 4);

	node_new("MaxPool", 12);
	EXPECT_ERR(INFER(1, x4), -EINVAL, "'kernel_shape'");
	ATTR_INTS("kernel_shape", 2, 2);
	ATTR_INTS("pads", 1, 1, 1);
	EXPECT_ERR(INFER(1, x4), -EINVAL, "'pads'");
	node_new("MaxPool", 12);
	ATTR_INTS("kernel_shape", 5, 5);
	EXPECT_ERR(INFER(1, x4), -EINVAL, "kernel");
	node_new("MaxPool", 12);
	ATTR_INTS("kernel_shape", 2, 2);
	attr_str("auto_pad", "SAME");
	EXPECT_ERR(INFER(1, x4), -EINVAL, "'auto_pad'");
}

static void test_avgpool(void)
{
	const struct rt_tensor x3 = tensor(BW_DTYPE_FLOAT, g_x9, D(1, 1, 3, 3));
	const struct rt_tensor x2 = T_F(D(1, 1, 2, 2), 1, 2, 3, 4);

	/* the windows of the MaxPool case: sums 12, 16, 24, 28 over 4 real elements, or over 9 */
	node_new("AveragePool", 11);
	ATTR_INTS("kernel_shape", 3, 3);
	ATTR_INTS("strides", 2, 2);
	ATTR_INTS("pads", 1, 1, 1, 1);
	RUN_OK(1, x3);
	EXPECT_F(0, 3, 4, 6, 7);
	attr_int("count_include_pad", 1);
	RUN_OK(1, x3);
	EXPECT_F(0, 12 / 9.0f, 16 / 9.0f, 24 / 9.0f, 28 / 9.0f);
	/* SAME_UPPER pads the end: (1,2,3,4) (2,4) (3,4) (4); SAME_LOWER the start */
	node_new("AveragePool", 11);
	ATTR_INTS("kernel_shape", 2, 2);
	attr_str("auto_pad", "SAME_UPPER");
	RUN_OK(1, x2);
	EXPECT_DIMS(0, 1, 1, 2, 2);
	EXPECT_F(0, 2.5f, 3, 3.5f, 4);
	node_new("AveragePool", 11);
	ATTR_INTS("kernel_shape", 2, 2);
	attr_str("auto_pad", "SAME_LOWER");
	RUN_OK(1, x2);
	EXPECT_F(0, 1, 1.5f, 2, 2.5f);
	node_new("AveragePool", 11);
	ATTR_INTS("kernel_shape", 2, 2);
	attr_str("auto_pad", "VALID");
	RUN_OK(1, x2);
	EXPECT_DIMS(0, 1, 1, 1, 1);
	EXPECT_F(0, 2.5f);

	node_new("GlobalAveragePool", 1);
	RUN_OK(1, T_F(D(1, 2, 2, 2), 1, 2, 3, 4, 5, 6, 7, 8));
	EXPECT_DIMS(0, 1, 2, 1, 1);
	EXPECT_F(0, 2.5f, 6.5f);
	node_new("GlobalMaxPool", 1);
	RUN_OK(1, T_F(D(1, 2, 2), 1, 4, 3, 2));
	EXPECT_DIMS(0, 1, 2, 1);
	EXPECT_F(0, 4, 3);
}

/* ---- convolution ----------------------------------------------------------------------------- */

static void test_conv(void)
{
	const struct rt_tensor x3 = tensor(BW_DTYPE_FLOAT, g_x9, D(1, 1, 3, 3));
	const struct rt_tensor ones3 = T_F(D(1, 1, 3, 3), 1, 1, 1, 1, 1, 1, 1, 1, 1);
	const struct rt_tensor ones2 = T_F(D(1, 1, 2, 2), 1, 1, 1, 1);

	/* 3x3 box sums of 1..9 with pads 1; bias 1 */
	node_new("Conv", 11);
	ATTR_INTS("pads", 1, 1, 1, 1);
	RUN_OK(1, x3, ones3, T_F(D(1), 1));
	EXPECT_DIMS(0, 1, 1, 3, 3);
	EXPECT_F(0, 13, 22, 17, 28, 46, 34, 25, 40, 29);
	/* stride 2: the corners of the above, without bias */
	ATTR_INTS("strides", 2, 2);
	RUN_OK(1, x3, ones3);
	EXPECT_DIMS(0, 1, 1, 2, 2);
	EXPECT_F(0, 12, 16, 24, 28);
	/* 2x2 dilated by 2 on 3x3: the four corners 1 + 3 + 7 + 9 */
	node_new("Conv", 11);
	ATTR_INTS("dilations", 2, 2);
	RUN_OK(1, x3, ones2);
	EXPECT_DIMS(0, 1, 1, 1, 1);
	EXPECT_F(0, 20);
	/* SAME_LOWER, 2x2: the extra pad row and column come first */
	node_new("Conv", 11);
	attr_str("auto_pad", "SAME_LOWER");
	RUN_OK(1, x3, ones2);
	EXPECT_DIMS(0, 1, 1, 3, 3);
	EXPECT_F(0, 1, 3, 5, 5, 12, 16, 11, 24, 28);
	/* groups: two channels, each with its own 1x1 filter (2 and -1) */
	node_new("Conv", 11);
	attr_int("group", 2);
	RUN_OK(1, T_F(D(1, 2, 2, 2), 1, 2, 3, 4, 5, 6, 7, 8), T_F(D(2, 1, 1, 1), 2, -1));
	EXPECT_DIMS(0, 1, 2, 2, 2);
	EXPECT_F(0, 2, 4, 6, 8, -5, -6, -7, -8);
	/* no groups: one filter sums the two channels; batch of 2 */
	node_new("Conv", 11);
	RUN_OK(1, T_F(D(2, 2, 1, 2), 1, 2, 3, 4, 5, 6, 7, 8), T_F(D(1, 2, 1, 1), 1, 1));
	EXPECT_DIMS(0, 2, 1, 1, 2);
	EXPECT_F(0, 4, 6, 12, 14);
	/* 1-D, stride 2: (1-2, 3-4) */
	node_new("Conv", 11);
	ATTR_INTS("strides", 2);
	RUN_OK(1, T_F(D(1, 1, 5), 1, 2, 3, 4, 5), T_F(D(1, 1, 2), 1, -1));
	EXPECT_DIMS(0, 1, 1, 2);
	EXPECT_F(0, -1, -1);

	node_new("Conv", 11);
	EXPECT_ERR(INFER(1, T_F(D(1, 2, 3, 3), 0), ones3), -EINVAL, "'W'");
	attr_int("group", 2);
	EXPECT_ERR(INFER(1, x3, ones3), -EINVAL, "'group'");
	node_new("Conv", 11);
	ATTR_INTS("pads", 1, 1);
	EXPECT_ERR(INFER(1, x3, ones3), -EINVAL, "'pads'");
	node_new("Conv", 11);
	ATTR_INTS("kernel_shape", 2, 2);
	EXPECT_ERR(INFER(1, x3, ones3), -EINVAL, "'kernel_shape'");
	node_new("Conv", 11);
	EXPECT_ERR(INFER(1, x3, ones3, T_F(D(2), 0, 0)), -EINVAL, "'B'");
}

static void test_conv_transpose(void)
{
	const struct rt_tensor x = T_F(D(1, 1, 2, 2), 1, 2, 3, 4), ones2 = T_F(D(1, 1, 2, 2), 1, 1, 1, 1);

	/* each input spreads over a 2x2 block; overlaps add */
	node_new("ConvTranspose", 11);
	RUN_OK(1, x, ones2);
	EXPECT_DIMS(0, 1, 1, 3, 3);
	EXPECT_F(0, 1, 3, 2, 4, 10, 6, 3, 7, 4);
	/* stride 2: the blocks do not overlap */
	ATTR_INTS("strides", 2, 2);
	RUN_OK(1, x, ones2, T_F(D(1), 0.5f));
	EXPECT_DIMS(0, 1, 1, 4, 4);
	EXPECT_F(0, 1.5f, 1.5f, 2.5f, 2.5f, 1.5f, 1.5f, 2.5f, 2.5f, 3.5f, 3.5f, 4.5f, 4.5f, 3.5f, 3.5f, 4.5f, 4.5f);
	/* pads 1 cut the border: the centre alone */
	node_new("ConvTranspose", 11);
	ATTR_INTS("pads", 1, 1, 1, 1);
	RUN_OK(1, x, ones2);
	EXPECT_DIMS(0, 1, 1, 1, 1);
	EXPECT_F(0, 10);
	/* output_shape 5x5 with stride 2 keeps the 4x4 and pads with zeros at the end */
	node_new("ConvTranspose", 11);
	ATTR_INTS("strides", 2, 2);
	ATTR_INTS("output_shape", 5, 5);
	CU_ASSERT_EQUAL(INFER(1, x, ones2), 0);
	EXPECT_DIMS(0, 1, 1, 5, 5);
	node_new("ConvTranspose", 11);
	EXPECT_ERR(INFER(1, x, T_F(D(2, 1, 2, 2), 0)), -EINVAL, "'W'");
}

/* ---- the ops beyond the core list ------------------------------------------------------------ */

static void test_pad_rearrange(void)
{
	/* pads (begin0, begin1, end0, end1) = (0, 1, 1, 0): a column before, a row after, of 9 */
	node_new("Pad", 13);
	RUN_OK(1, T_F(D(2, 2), 1, 2, 3, 4), T_I64(D(4), 0, 1, 1, 0), T_F(S0, 9));
	EXPECT_DIMS(0, 3, 3);
	EXPECT_F(0, 9, 1, 2, 9, 3, 4, 9, 9, 9);
	RUN_OK(1, T_F(D(3), 1, 2, 3), T_I64(D(2), -1, 0)); /* a negative pad crops */
	EXPECT_F(0, 2, 3);
	EXPECT_ERR(INFER(1, T_F(D(3), 0), T_I64(D(1), 1)), -EINVAL, "'pads'");
	node_new("Pad", 13);
	attr_str("mode", "reflect"); /* mirrored without the edge: 3 2 | 1 2 3 | 2 1 */
	RUN_OK(1, T_I32(D(3), 1, 2, 3), T_I64(D(2), 2, 2));
	EXPECT_RAW(0, BW_DTYPE_INT32, int32_t, 3, 2, 1, 2, 3, 2, 1);
	node_new("Pad", 13);
	attr_str("mode", "edge");
	RUN_OK(1, T_I32(D(3), 1, 2, 3), T_I64(D(2), 1, 2));
	EXPECT_RAW(0, BW_DTYPE_INT32, int32_t, 1, 1, 2, 3, 3, 3);
	node_new("Pad", 2); /* before 11: attributes */
	ATTR_INTS("pads", 1, 1);
	attr_float("value", 5);
	RUN_OK(1, T_F(D(1), 0));
	EXPECT_F(0, 5, 0, 5);

	/* 8 channels 0..7 into 2 channels of 2x2: DCR takes depth-major channels, CRD channel-major */
	node_new("DepthToSpace", 13);
	attr_int("blocksize", 2);
	RUN_OK(1, T_F(D(1, 8, 1, 1), 0, 1, 2, 3, 4, 5, 6, 7));
	EXPECT_DIMS(0, 1, 2, 2, 2);
	EXPECT_F(0, 0, 2, 4, 6, 1, 3, 5, 7);
	attr_str("mode", "CRD");
	RUN_OK(1, T_F(D(1, 8, 1, 1), 0, 1, 2, 3, 4, 5, 6, 7));
	EXPECT_F(0, 0, 1, 2, 3, 4, 5, 6, 7);
	node_new("SpaceToDepth", 13); /* the inverse of DCR */
	attr_int("blocksize", 2);
	RUN_OK(1, T_F(D(1, 2, 2, 2), 0, 2, 4, 6, 1, 3, 5, 7));
	EXPECT_DIMS(0, 1, 8, 1, 1);
	EXPECT_F(0, 0, 1, 2, 3, 4, 5, 6, 7);
	EXPECT_ERR(INFER(1, T_F(D(1, 1, 3, 2), 0)), -EINVAL, "'blocksize'");

	node_new("Trilu", 14);
	RUN_OK(1, T_I64(D(3, 3), 1, 2, 3, 4, 5, 6, 7, 8, 9));
	EXPECT_I64(0, 1, 2, 3, 0, 5, 6, 0, 0, 9);
	attr_int("upper", 0);
	RUN_OK(1, T_I64(D(3, 3), 1, 2, 3, 4, 5, 6, 7, 8, 9), T_I64(S0, -1)); /* strictly below */
	EXPECT_I64(0, 0, 0, 0, 4, 0, 0, 7, 8, 0);
}

static void test_index_ops(void)
{
	node_new("GatherElements", 13);
	attr_int("axis", 1); /* out[i][j] = data[i][idx[i][j]] */
	RUN_OK(1, T_F(D(2, 2), 1, 2, 3, 4), T_I64(D(2, 2), 0, 0, 1, 0));
	EXPECT_F(0, 1, 1, 4, 3);
	node_new("GatherElements", 13); /* axis 0: out[0][j] = data[idx[0][j]][j] */
	RUN_OK(1, T_F(D(2, 2), 1, 2, 3, 4), T_I64(D(1, 2), -1, 0));
	EXPECT_F(0, 3, 2);
	EXPECT_ERR(INFER(1, T_F(D(2, 2), 0), T_I64(D(2), 0)), -EINVAL, "'indices'");

	node_new("OneHot", 11);
	RUN_OK(1, T_I64(D(3), 0, 2, -1), T_F(S0, 3), T_F(D(2), 0, 1));
	EXPECT_DIMS(0, 3, 3);
	EXPECT_F(0, 1, 0, 0, 0, 0, 1, 0, 0, 1);
	attr_int("axis", 0);
	RUN_OK(1, T_I64(D(3), 0, 2, -1), T_F(S0, 3), T_F(D(2), 0, 1));
	EXPECT_F(0, 1, 0, 0, 0, 0, 0, 0, 1, 1);
	EXPECT_ERR(INFER(1, T_I64(D(3), 0), T_SHAPE(BW_DTYPE_FLOAT, S0), T_F(D(2), 0, 1)), -ENOTSUP,
		   "input 'depth' must be a constant");

	node_new("EyeLike", 9);
	attr_int("dtype", BW_DTYPE_FLOAT);
	attr_int("k", 1);
	RUN_OK(1, T_I32(D(2, 3), 0));
	EXPECT_F(0, 0, 1, 0, 0, 0, 1);

	node_new("CumSum", 14);
	RUN_OK(1, T_F(D(2, 3), 1, 2, 3, 4, 5, 6), T_I64(S0, 1));
	EXPECT_F(0, 1, 3, 6, 4, 9, 15);
	attr_int("exclusive", 1);
	attr_int("reverse", 1);
	RUN_OK(1, T_F(D(3), 1, 2, 3), T_I32(S0, 0));
	EXPECT_F(0, 5, 3, 0);
	EXPECT_ERR(INFER(1, T_F(D(3), 0), T_I32(S0, 1)), -EINVAL, "'axis'");
}

static void test_misc_ops(void)
{
	node_new("PRelu", 16); /* the slope per column */
	RUN_OK(1, T_F(D(2, 2), -1, 2, -3, 4), T_F(D(2), 0.5f, 0.1f));
	EXPECT_F(0, -0.5f, 2, -1.5f, 4);
	EXPECT_ERR(INFER(1, T_F(D(2), 0), T_F(D(2, 2), 0)), -EINVAL, "'slope'");

	/* channel 0 (1,3): mean 2, std 1, scale 2; channel 1 (0,4): mean 2, std 2, B 1 */
	node_new("InstanceNormalization", 6);
	attr_float("epsilon", 0);
	RUN_OK(1, T_F(D(1, 2, 1, 2), 1, 3, 0, 4), T_F(D(2), 2, 1), T_F(D(2), 0, 1));
	EXPECT_F(0, -2, 2, 0, 2);

	node_new("Dropout", 13); /* inference: the identity, nothing masked */
	RUN_OK(2, T_F(D(2), 1, 2));
	EXPECT_F(0, 1, 2);
	EXPECT_RAW(1, BW_DTYPE_BOOL, uint8_t, 1, 1);
	EXPECT_ERR(INFER(1, T_F(D(2), 1, 2), T_F(S0, 0.5f), T_B(S0, 1)), -ENOTSUP, "'training_mode'");

	node_new("IsNaN", 13);
	RUN_OK(1, T_F(D(2), NAN, 1));
	EXPECT_RAW(0, BW_DTYPE_BOOL, uint8_t, 1, 0);
	node_new("IsInf", 10);
	attr_int("detect_negative", 0);
	RUN_OK(1, T_F(D(3), INFINITY, -INFINITY, 0));
	EXPECT_RAW(0, BW_DTYPE_BOOL, uint8_t, 1, 0, 0);
	node_new("CastLike", 15);
	RUN_OK(1, T_I64(D(1), 3), T_F(D(1), 0));
	EXPECT_F(0, 3);
	node_new("Shrink", 9);
	attr_float("lambd", 1);
	attr_float("bias", 0.5f);
	RUN_OK(1, T_F(D(3), -2, 0.5f, 2));
	EXPECT_F(0, -1.5f, 0, 1.5f);
}

static void test_select_ops(void)
{
	const struct rt_tensor x = T_F(D(2, 3), 1, 3, 2, 5, 5, 4);

	node_new("TopK", 11); /* ties: the lower index first */
	RUN_OK(2, x, T_I64(D(1), 2));
	EXPECT_DIMS(0, 2, 2);
	EXPECT_F(0, 3, 2, 5, 5);
	EXPECT_I64(1, 1, 2, 0, 1);
	attr_int("largest", 0);
	RUN_OK(2, x, T_I64(D(1), 2));
	EXPECT_F(0, 1, 2, 4, 5);
	EXPECT_I64(1, 0, 2, 2, 0);
	EXPECT_ERR(INFER(2, x, T_I64(D(1), 4)), -EINVAL, "'K'");
	EXPECT_ERR(INFER(2, x, T_SHAPE(BW_DTYPE_INT64, D(1))), -ENOTSUP, "input 'K' must be a constant");

	node_new("GatherND", 13);
	RUN_OK(1, T_F(D(2, 2), 1, 2, 3, 4), T_I64(D(2, 2), 0, 0, 1, 1)); /* elements (0,0) (1,1) */
	EXPECT_F(0, 1, 4);
	RUN_OK(1, T_F(D(2, 2), 1, 2, 3, 4), T_I64(D(2, 1), 1, 0)); /* rows 1 and 0 */
	EXPECT_DIMS(0, 2, 2);
	EXPECT_F(0, 3, 4, 1, 2);
	attr_int("batch_dims", 1); /* row 1 of batch 0, row 0 of batch 1 */
	RUN_OK(1, T_F(D(2, 2, 2), 0, 1, 2, 3, 4, 5, 6, 7), T_I64(D(2, 1), 1, 0));
	EXPECT_F(0, 2, 3, 4, 5);

	node_new("ScatterElements", 16);
	attr_int("axis", 1);
	RUN_OK(1, T_F(D(1, 5), 1, 2, 3, 4, 5), T_I64(D(1, 2), 1, 3), T_F(D(1, 2), 1.1f, 2.1f));
	EXPECT_F(0, 1, 1.1f, 3, 2.1f, 5);
	attr_str("reduction", "add"); /* duplicates accumulate */
	RUN_OK(1, T_F(D(1, 5), 1, 2, 3, 4, 5), T_I64(D(1, 2), 1, -4), T_F(D(1, 2), 1.1f, 2.1f));
	EXPECT_F(0, 1, 5.2f, 3, 4, 5);
	node_new("ScatterND", 16);
	RUN_OK(1, T_F(D(4), 1, 2, 3, 4), T_I64(D(2, 1), 3, 0), T_F(D(2), 9, 10));
	EXPECT_F(0, 10, 2, 3, 9);
	attr_str("reduction", "mul");
	RUN_OK(1, T_F(D(4), 1, 2, 3, 4), T_I64(D(2, 1), 3, 0), T_F(D(2), 9, 10));
	EXPECT_F(0, 10, 2, 3, 36);
	EXPECT_ERR(INFER(1, T_F(D(4), 0), T_I64(D(2, 1), 0), T_F(D(3), 0)), -EINVAL, "'updates'");

	node_new("Compress", 11);
	attr_int("axis", 0);
	RUN_OK(1, T_F(D(3, 2), 1, 2, 3, 4, 5, 6), T_B(D(3), 0, 1, 1));
	EXPECT_DIMS(0, 2, 2);
	EXPECT_F(0, 3, 4, 5, 6);
	node_new("Compress", 11); /* no axis: the flattened input */
	RUN_OK(1, T_F(D(3, 2), 1, 2, 3, 4, 5, 6), T_B(D(5), 0, 1, 0, 0, 1));
	EXPECT_F(0, 2, 5);
	node_new("NonZero", 13); /* coordinates of (0,0) (1,0) (1,1), one row per dim */
	RUN_OK(1, T_B(D(2, 2), 1, 0, 1, 1));
	EXPECT_DIMS(0, 2, 3);
	EXPECT_I64(0, 0, 1, 1, 0, 0, 1);
	/* time-major [4,2]: batch 0 reverses its first 3 steps, batch 1 its first 1 */
	node_new("ReverseSequence", 10);
	RUN_OK(1, T_F(D(4, 2), 0, 1, 2, 3, 4, 5, 6, 7), T_I64(D(2), 3, 1));
	EXPECT_F(0, 4, 1, 2, 3, 0, 5, 6, 7);
}

static void test_resize_norms(void)
{
	/* nearest, half_pixel, round_prefer_floor: output 0..3 maps to input 0 0 1 1 */
	node_new("Resize", 13);
	RUN_OK(1, T_F(D(1, 1, 2, 2), 1, 2, 3, 4), NONE, T_F(D(4), 1, 1, 2, 2));
	EXPECT_DIMS(0, 1, 1, 4, 4);
	EXPECT_F(0, 1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4);
	node_new("Upsample", 9); /* asymmetric and floor: the same repeat */
	RUN_OK(1, T_F(D(1, 1, 2, 2), 1, 2, 3, 4), T_F(D(4), 1, 1, 2, 2));
	EXPECT_F(0, 1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4);
	/* linear, half_pixel, x2: coordinates -0.25 0.25 0.75 1.25, clamped at the edges */
	node_new("Resize", 13);
	attr_str("mode", "linear");
	RUN_OK(1, T_F(D(1, 2), 0, 10), NONE, T_F(D(2), 1, 2));
	EXPECT_F(0, 0, 2.5f, 7.5f, 10);
	/* linear, align_corners, sizes: 2 to 3 puts the middle halfway */
	attr_str("coordinate_transformation_mode", "align_corners");
	RUN_OK(1, T_F(D(1, 2), 0, 10), NONE, NONE, T_I64(D(2), 1, 3));
	EXPECT_DIMS(0, 1, 3);
	EXPECT_F(0, 0, 5, 10);
	EXPECT_ERR(INFER(1, T_F(D(1, 2), 0), NONE, T_F(D(2), 1, 2), T_I64(D(2), 1, 3)), -EINVAL, "'sizes'");
	node_new("Resize", 13);
	attr_str("mode", "area");
	EXPECT_ERR(INFER(1, T_F(D(1, 2), 0), NONE, T_F(D(2), 1, 2)), -EINVAL, "'mode'");

	/* size 3, alpha 3, beta 1, bias 1 on ones: 1 / (1 + sum of squares in the window) */
	node_new("LRN", 13);
	attr_int("size", 3);
	attr_float("alpha", 3);
	attr_float("beta", 1);
	RUN_OK(1, T_F(D(1, 3, 1, 1), 1, 1, 1));
	EXPECT_F(0, 1 / 3.0f, 0.25f, 1 / 3.0f);
	/* rows (1,3): mean 2, std 1; (2,2): std 0, so 0 / 1e-9 */
	node_new("MeanVarianceNormalization", 13);
	ATTR_INTS("axes", 1);
	RUN_OK(1, T_F(D(2, 2), 1, 3, 2, 2));
	EXPECT_F(0, -1, 1, 0, 0);
}

int main(void)
{
	static CU_TestInfo tests[] = {
		{"registry: rt_cpu_kernels_register, opsets, types", test_register},
		{"Add Sub Mul Div: broadcasting, integer types", test_add_broadcast},
		{"Mod Pow Equal Greater LessOrEqual And Not", test_mod_pow_compare},
		{"Max Min Sum Mean Where", test_variadic_where},
		{"binary infer errors and symbolic dims", test_binary_errors},
		{"unary ops", test_unary},
		{"Clip: inputs (13) and attributes (6)", test_clip},
		{"Cast", test_cast},
		{"Softmax (11 and 13) LogSoftmax", test_softmax},
		{"ReduceMean ReduceSum ReduceMax ReduceMin", test_reduce},
		{"Reshape Flatten", test_reshape_flatten},
		{"Transpose Concat Split", test_transpose_concat_split},
		{"Slice", test_slice},
		{"Gather", test_gather},
		{"Squeeze Unsqueeze", test_squeeze_unsqueeze},
		{"Shape Size Constant ConstantOfShape Expand Tile", test_shape_constant},
		{"MatMul: batched, broadcast, 1-D", test_matmul},
		{"Gemm: transposes, alpha, beta, C broadcast", test_gemm},
		{"BatchNormalization LayerNormalization", test_norm},
		{"MaxPool: strides, pads, ceil_mode, dilations, Indices", test_maxpool},
		{"AveragePool GlobalAveragePool GlobalMaxPool", test_avgpool},
		{"Conv: pads, strides, dilations, auto_pad, groups", test_conv},
		{"ConvTranspose", test_conv_transpose},
		{"Pad DepthToSpace SpaceToDepth Trilu", test_pad_rearrange},
		{"GatherElements OneHot EyeLike CumSum", test_index_ops},
		{"PRelu InstanceNormalization Dropout IsNaN IsInf CastLike Shrink", test_misc_ops},
		{"TopK GatherND ScatterElements ScatterND Compress NonZero ReverseSequence", test_select_ops},
		{"Resize Upsample LRN MeanVarianceNormalization", test_resize_norms},
		CU_TEST_INFO_NULL,
	};
	static CU_SuiteInfo suites[] = {
		{.pName = "runtime-kernels", .pTests = tests},
		CU_SUITE_INFO_NULL,
	};
	int status = isa_level_check();

	if (status >= 0)
		return status;
	if (rt_cpu_kernels_register() != 0) {
		fprintf(stderr, "rt_cpu_kernels_register failed\n");
		return 1;
	}
	return bw_cunit_run(suites);
}
