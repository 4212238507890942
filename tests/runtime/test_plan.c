/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Unit tests of the planner and the first executor, on graphs made by hand with kernels of a "test"
 * domain registered here, so they need neither the ONNX loader nor the CPU kernels: the arena layout
 * (no two tensors alive together overlap, scratch included; a chain needs less than the sum; graph
 * outputs are never overwritten), symbolic batch binding, constant folding at plan time, values known
 * at plan time, and runs (a diamond's result; a failing kernel's error names its node).
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../bw_cunit.h"

#include "exec/plan.h"

#define TEST_OPSET 1
#define TEST_VALUES_MAX 32
#define TEST_NODES_MAX 16
#define TEST_IO_MAX 4

/* ---- kernels of the "test" domain ------------------------------------------------------------------ */

static unsigned int g_add_runs; /* TestAdd runs, to see folding happen at plan time only */

static int same_shape_infer(const struct rt_node *node, const struct rt_tensor *in, struct rt_tensor *out, char *err,
			    size_t cap)
{
	for (uint16_t i = 1; i < node->num_inputs; i++) {
		if (in[i].rank != in[0].rank || memcmp(in[i].dims, in[0].dims, in[0].rank * sizeof(int64_t)) != 0) {
			snprintf(err, cap, "input %u has another shape than input 0", i);
			return -EINVAL;
		}
	}
	out[0] = in[0];
	out[0].data = NULL;
	return 0;
}

static int64_t elems(const struct rt_tensor *t)
{
	return rt_tensor_elems(t);
}

static int add_run(const struct rt_node *node, const struct rt_tensor *in, struct rt_tensor *out, void *scratch,
		   char *err, size_t cap)
{
	const float *a = in[0].data, *b = in[1].data;
	float *y = out[0].data;

	(void)node, (void)scratch, (void)err, (void)cap;
	g_add_runs++;
	for (int64_t i = 0; i < elems(&out[0]); i++)
		y[i] = a[i] + b[i];
	return 0;
}

static int mul_run(const struct rt_node *node, const struct rt_tensor *in, struct rt_tensor *out, void *scratch,
		   char *err, size_t cap)
{
	const float *a = in[0].data, *b = in[1].data;
	float *y = out[0].data;

	(void)node, (void)scratch, (void)err, (void)cap;
	for (int64_t i = 0; i < elems(&out[0]); i++)
		y[i] = a[i] * b[i];
	return 0;
}

static int fail_run(const struct rt_node *node, const struct rt_tensor *in, struct rt_tensor *out, void *scratch,
		    char *err, size_t cap)
{
	(void)node, (void)in, (void)out, (void)scratch;
	snprintf(err, cap, "deliberate failure");
	return -EIO;
}

/* TestScratch: y = 2x, after scribbling over a scratch as large as x (it must overlap nothing live). */
static size_t scratch_bytes(const struct rt_node *node, const struct rt_tensor *in, const struct rt_tensor *out)
{
	(void)node, (void)out;
	return (size_t)elems(&in[0]) * sizeof(float);
}

static int scratch_run(const struct rt_node *node, const struct rt_tensor *in, struct rt_tensor *out, void *scratch,
		       char *err, size_t cap)
{
	const float *x = in[0].data;
	float *y = out[0].data;

	(void)node;
	if (scratch == NULL) {
		snprintf(err, cap, "no scratch");
		return -EINVAL;
	}
	memset(scratch, 0xab, scratch_bytes(node, in, out));
	for (int64_t i = 0; i < elems(&out[0]); i++)
		y[i] = 2 * x[i];
	return 0;
}

/* TestConst: no inputs, float[4] {1, 2, 3, 4}. */
static int const_infer(const struct rt_node *node, const struct rt_tensor *in, struct rt_tensor *out, char *err,
		       size_t cap)
{
	(void)node, (void)in, (void)err, (void)cap;
	out[0] = (struct rt_tensor){ .dtype = BW_DTYPE_FLOAT, .rank = 1, .dims = { 4 } };
	return 0;
}

static int const_run(const struct rt_node *node, const struct rt_tensor *in, struct rt_tensor *out, void *scratch,
		     char *err, size_t cap)
{
	float *y = out[0].data;

	(void)node, (void)in, (void)scratch, (void)err, (void)cap;
	for (int i = 0; i < 4; i++)
		y[i] = (float)(i + 1);
	return 0;
}

/* TestFill: input int64[1] n; output float[n], every element n. Its shape needs n's value. */
static int fill_infer(const struct rt_node *node, const struct rt_tensor *in, struct rt_tensor *out, char *err,
		      size_t cap)
{
	(void)node;
	if (in[0].data == NULL) {
		snprintf(err, cap, "input 0 (the count) must be known at plan time");
		return -ENOTSUP;
	}
	out[0] = (struct rt_tensor){ .dtype = BW_DTYPE_FLOAT, .rank = 1, .dims = { *(const int64_t *)in[0].data } };
	return 0;
}

static int fill_run(const struct rt_node *node, const struct rt_tensor *in, struct rt_tensor *out, void *scratch,
		    char *err, size_t cap)
{
	float *y = out[0].data;

	(void)node, (void)scratch, (void)err, (void)cap;
	for (int64_t i = 0; i < elems(&out[0]); i++)
		y[i] = (float)*(const int64_t *)in[0].data;
	return 0;
}

/* TestCopy: y = x, int64. */
static int copy_run(const struct rt_node *node, const struct rt_tensor *in, struct rt_tensor *out, void *scratch,
		    char *err, size_t cap)
{
	(void)node, (void)scratch, (void)err, (void)cap;
	memcpy(out[0].data, in[0].data, (size_t)elems(&in[0]) * sizeof(int64_t));
	return 0;
}

/* Shape of the default domain, as a stand-in for the CPU kernel: it must never read data. */
static unsigned int g_shape_runs;

static int shape_infer(const struct rt_node *node, const struct rt_tensor *in, struct rt_tensor *out, char *err,
		       size_t cap)
{
	(void)node, (void)err, (void)cap;
	out[0] = (struct rt_tensor){ .dtype = BW_DTYPE_INT64, .rank = 1, .dims = { in[0].rank } };
	return 0;
}

static int shape_run(const struct rt_node *node, const struct rt_tensor *in, struct rt_tensor *out, void *scratch,
		     char *err, size_t cap)
{
	(void)node, (void)scratch, (void)err, (void)cap;
	g_shape_runs++;
	for (uint8_t d = 0; d < in[0].rank; d++)
		((int64_t *)out[0].data)[d] = in[0].dims[d];
	return 0;
}

#define TEST_KERNEL(op, dt, inf, sb, rn)                                                                       \
	{ .op_type = op, .domain = "test", .opset_min = 1, .opset_max = 100, .dtypes = RT_DTYPE_BIT(dt),      \
	  .device = RT_DEVICE_CPU, .infer = inf, .scratch_bytes = sb, .run = rn }

static const struct rt_kernel g_test_kernels[] = {
	TEST_KERNEL("TestAdd", BW_DTYPE_FLOAT, same_shape_infer, NULL, add_run),
	TEST_KERNEL("TestMul", BW_DTYPE_FLOAT, same_shape_infer, NULL, mul_run),
	TEST_KERNEL("TestFail", BW_DTYPE_FLOAT, same_shape_infer, NULL, fail_run),
	TEST_KERNEL("TestScratch", BW_DTYPE_FLOAT, same_shape_infer, scratch_bytes, scratch_run),
	{ .op_type = "TestConst", .domain = "test", .opset_min = 1, .opset_max = 100, .dtypes = 0,
	  .device = RT_DEVICE_CPU, .infer = const_infer, .run = const_run },
	TEST_KERNEL("TestFill", BW_DTYPE_INT64, fill_infer, NULL, fill_run),
	TEST_KERNEL("TestCopy", BW_DTYPE_INT64, same_shape_infer, NULL, copy_run),
	{ .op_type = "Shape", .domain = "", .opset_min = 1, .opset_max = 17, .dtypes = RT_DTYPE_BIT(BW_DTYPE_FLOAT),
	  .device = RT_DEVICE_CPU, .infer = shape_infer, .run = shape_run },
};

/* ---- graphs made by hand ---------------------------------------------------------------------------- */

struct test_graph {
	struct rt_graph g;
	struct rt_value values[TEST_VALUES_MAX];
	struct rt_node nodes[TEST_NODES_MAX];
	int32_t node_io[TEST_NODES_MAX][2][TEST_IO_MAX];
	int32_t inputs[TEST_IO_MAX];
	int32_t outputs[TEST_IO_MAX];
};

static struct test_graph *tg_new(void)
{
	struct test_graph *t = calloc(1, sizeof(*t));

	CU_ASSERT_PTR_NOT_NULL_FATAL(t);
	t->g.name = (char *)"test";
	t->g.values = t->values;
	t->g.nodes = t->nodes;
	t->g.inputs = t->inputs;
	t->g.outputs = t->outputs;
	return t;
}

static int32_t tg_value(struct test_graph *t, const char *name, enum rt_value_kind kind)
{
	int32_t v = (int32_t)t->g.num_values++;

	CU_ASSERT_FATAL(t->g.num_values <= TEST_VALUES_MAX);
	t->values[v] = (struct rt_value){ .name = (char *)name, .kind = kind, .producer = -1 };
	return v;
}

/* A graph input of float[d0, d1] (d0 may be RT_DIM_SYMBOLIC). */
static int32_t tg_input(struct test_graph *t, const char *name, uint8_t dtype, int64_t d0, int64_t d1)
{
	int32_t v = tg_value(t, name, RT_VALUE_INPUT);

	t->values[v].tensor = (struct rt_tensor){ .dtype = dtype, .rank = 2, .dims = { d0, d1 } };
	t->inputs[t->g.num_inputs++] = v;
	return v;
}

static int32_t tg_initializer(struct test_graph *t, const char *name, const float *data, int64_t n)
{
	int32_t v = tg_value(t, name, RT_VALUE_INITIALIZER);

	t->values[v].tensor = (struct rt_tensor){ .dtype = BW_DTYPE_FLOAT, .rank = 1, .dims = { n },
						  .data = (void *)data };
	t->values[v].nbytes = (size_t)n * sizeof(float);
	return v;
}

/* A node with up to two inputs (-2: none) and one new output value named after the node. */
static int32_t tg_node(struct test_graph *t, const char *op, const char *name, int32_t a, int32_t b)
{
	uint32_t i = t->g.num_nodes++;
	struct rt_node *n = &t->nodes[i];
	int32_t out;

	CU_ASSERT_FATAL(t->g.num_nodes <= TEST_NODES_MAX);
	out = tg_value(t, name, RT_VALUE_INTERMEDIATE);
	t->values[out].producer = (int32_t)i;
	*n = (struct rt_node){ .name = (char *)name, .op_type = (char *)op, .domain = (char *)"test",
			       .opset = TEST_OPSET, .inputs = t->node_io[i][0], .outputs = t->node_io[i][1],
			       .num_outputs = 1 };
	if (a != -2)
		n->inputs[n->num_inputs++] = a;
	if (b != -2)
		n->inputs[n->num_inputs++] = b;
	n->outputs[0] = out;
	return out;
}

static void tg_output(struct test_graph *t, int32_t v)
{
	t->values[v].is_output = true;
	t->outputs[t->g.num_outputs++] = v;
}

static void *arena_new(const struct rt_plan *p)
{
	void *arena = aligned_alloc(RT_PLAN_ALIGN, rt_plan_arena_bytes(p));

	CU_ASSERT_PTR_NOT_NULL_FATAL(arena);
	memset(arena, 0x5a, rt_plan_arena_bytes(p)); /* garbage: nothing may rely on zeroes */
	return arena;
}

static void fill(float *x, int64_t n, float base)
{
	for (int64_t i = 0; i < n; i++)
		x[i] = base + (float)i;
}

/* ---- the arena layout ------------------------------------------------------------------------------- */

struct span {
	size_t lo, hi;        /* bytes [lo, hi) */
	int32_t birth, death; /* node indices, both included */
};

/*
 * Every pair of arena tensors (and node scratch areas) whose lifetimes meet must be disjoint; every
 * one lies inside the arena, after the descriptors, 64-byte aligned.
 * \return the number of pairs with meeting lifetimes that were checked.
 */
static unsigned int check_layout(const struct rt_plan *p, const struct rt_graph *g)
{
	struct span spans[TEST_VALUES_MAX + TEST_NODES_MAX];
	struct rt_plan_stats st;
	unsigned int count = 0, pairs = 0;

	rt_plan_stats(p, &st);
	CU_ASSERT_EQUAL(st.arena_bytes, rt_plan_arena_bytes(p));
	CU_ASSERT_EQUAL(st.arena_bytes % RT_PLAN_ALIGN, 0);
	for (uint32_t v = 0; v < g->num_values; v++) {
		struct rt_plan_value_info vi;

		CU_ASSERT_EQUAL_FATAL(rt_plan_value_info(p, (int32_t)v, &vi), 0);
		if (vi.placement != RT_PLACE_ARENA || vi.nbytes == 0)
			continue;
		spans[count++] = (struct span){ vi.offset, vi.offset + vi.nbytes, vi.birth, vi.death };
		if (g->values[v].is_output)
			CU_ASSERT_EQUAL(vi.death, (int32_t)g->num_nodes);
	}
	for (uint32_t s = 0; s < rt_plan_num_steps(p); s++) {
		struct rt_plan_step_info si;

		CU_ASSERT_EQUAL_FATAL(rt_plan_step_info(p, s, &si), 0);
		if (si.scratch_bytes == 0)
			continue;
		spans[count++] = (struct span){ si.scratch_offset, si.scratch_offset + si.scratch_bytes,
						(int32_t)si.node, (int32_t)si.node };
	}
	for (unsigned int i = 0; i < count; i++) {
		CU_ASSERT(spans[i].lo >= st.descriptor_bytes);
		CU_ASSERT(spans[i].hi <= st.arena_bytes);
		CU_ASSERT_EQUAL(spans[i].lo % RT_PLAN_ALIGN, 0);
		for (unsigned int j = i + 1; j < count; j++) {
			if (spans[i].birth > spans[j].death || spans[j].birth > spans[i].death)
				continue;
			pairs++;
			if (!(spans[i].hi <= spans[j].lo || spans[j].hi <= spans[i].lo)) {
				printf("\n  overlap: [%zu,%zu) nodes %d..%d and [%zu,%zu) nodes %d..%d\n", spans[i].lo,
				       spans[i].hi, spans[i].birth, spans[i].death, spans[j].lo, spans[j].hi,
				       spans[j].birth, spans[j].death);
				CU_FAIL("two live tensors overlap");
			}
		}
	}
	return pairs;
}

#define CHAIN_N 1024 /* floats per tensor: large enough that reuse shows past the descriptors */

/* x -> Scratch -> Add(a,a) -> Scratch -> Add -> ... : each tensor dies at the next node but one. */
static void test_chain_layout(void)
{
	struct test_graph *t = tg_new();
	char names[8][16];
	int32_t x = tg_input(t, "x", BW_DTYPE_FLOAT, 1, CHAIN_N), v = x;
	struct rt_plan_stats st;
	struct rt_tensor in, out;
	char err[RT_ERR_MAX];
	struct rt_plan *p;
	void *arena;

	for (int i = 0; i < 8; i++) {
		snprintf(names[i], sizeof(names[i]), "n%u", (unsigned int)i & 7);
		v = tg_node(t, i % 2 == 0 ? "TestScratch" : "TestAdd", names[i], v, i % 2 == 0 ? -2 : v);
	}
	tg_output(t, v);
	p = rt_plan_create(&t->g, 0, RT_DEVICE_CPU, err, sizeof(err));
	if (p == NULL)
		printf("\n  %s\n", err);
	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	CU_ASSERT(check_layout(p, &t->g) > 8);
	rt_plan_stats(p, &st);
	CU_ASSERT_EQUAL(st.steps, 8);
	CU_ASSERT_EQUAL(st.folded, 0);
	/* nine tensors and four scratches end to end; at most three at a time */
	CU_ASSERT_EQUAL(st.tensor_bytes_sum, 13 * CHAIN_N * sizeof(float));
	CU_ASSERT(st.tensor_bytes <= 3 * CHAIN_N * sizeof(float));
	CU_ASSERT(st.arena_bytes < st.tensor_bytes_sum);

	arena = arena_new(p);
	rt_plan_bind(p, arena, &in, &out);
	CU_ASSERT_EQUAL(in.rank, 2);
	CU_ASSERT_EQUAL(in.dims[1], CHAIN_N);
	fill(in.data, CHAIN_N, 0);
	CU_ASSERT_EQUAL(rt_plan_run(p, arena, err, sizeof(err)), 0);
	/* four doublings by Scratch, four by Add: x * 256 */
	for (int i = 0; i < CHAIN_N; i++)
		CU_ASSERT_DOUBLE_EQUAL(((float *)out.data)[i], 256.0 * i, 1e-3);
	free(arena);
	rt_plan_free(p);
	free(t);
}

/* An early graph output must survive every node after it. */
static void test_outputs_kept(void)
{
	struct test_graph *t = tg_new();
	int32_t x = tg_input(t, "x", BW_DTYPE_FLOAT, 4, 64);
	int32_t a = tg_node(t, "TestAdd", "a", x, x);
	int32_t b = tg_node(t, "TestScratch", "b", a, -2);
	int32_t c = tg_node(t, "TestAdd", "c", b, b);
	int32_t d = tg_node(t, "TestScratch", "d", c, -2);
	int32_t e = tg_node(t, "TestAdd", "e", d, d);
	struct rt_plan_value_info ai;
	struct rt_tensor in, out[2];
	char err[RT_ERR_MAX];
	struct rt_plan *p;
	void *arena;

	tg_output(t, a);
	tg_output(t, e);
	p = rt_plan_create(&t->g, 0, RT_DEVICE_CPU, err, sizeof(err));
	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	check_layout(p, &t->g);
	CU_ASSERT_EQUAL(rt_plan_value_info(p, a, &ai), 0);
	CU_ASSERT_EQUAL(ai.placement, RT_PLACE_ARENA);
	CU_ASSERT_EQUAL(ai.birth, 0);
	CU_ASSERT_EQUAL(ai.death, (int32_t)t->g.num_nodes);
	CU_ASSERT_EQUAL(rt_plan_value_info(p, -1, &ai), -EINVAL);

	arena = arena_new(p);
	rt_plan_bind(p, arena, &in, out);
	fill(in.data, 4 * 64, 1);
	CU_ASSERT_EQUAL(rt_plan_run(p, arena, err, sizeof(err)), 0);
	for (int i = 0; i < 4 * 64; i++) {
		CU_ASSERT_DOUBLE_EQUAL(((float *)out[0].data)[i], 2.0 * (1 + i), 1e-3);
		CU_ASSERT_DOUBLE_EQUAL(((float *)out[1].data)[i], 32.0 * (1 + i), 1e-2);
	}
	/* a second run on the same arena: inputs are written anew (their bytes are reused once read) */
	fill(in.data, 4 * 64, 1);
	CU_ASSERT_EQUAL(rt_plan_run(p, arena, err, sizeof(err)), 0);
	CU_ASSERT_DOUBLE_EQUAL(((float *)out[0].data)[5], 12.0, 1e-3);
	/* misaligned arenas are refused */
	CU_ASSERT_EQUAL(rt_plan_run(p, (uint8_t *)arena + 8, err, sizeof(err)), -EINVAL);
	free(arena);
	rt_plan_free(p);
	free(t);
}

/* ---- binding, folding, known values ---------------------------------------------------------------- */

static void test_symbolic_batch(void)
{
	struct test_graph *t = tg_new();
	int32_t x = tg_input(t, "x", BW_DTYPE_FLOAT, RT_DIM_SYMBOLIC, 3);
	int32_t y = tg_node(t, "TestAdd", "y", x, x);
	struct rt_plan_value_info yi;
	struct rt_tensor in, out;
	char err[RT_ERR_MAX];
	struct rt_plan *p;
	void *arena;

	tg_output(t, y);
	p = rt_plan_create(&t->g, 0, RT_DEVICE_CPU, err, sizeof(err));
	CU_ASSERT_PTR_NULL(p);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "graph input x"));
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "symbolic"));

	for (int64_t batch = 1; batch <= 8; batch *= 2) {
		p = rt_plan_create(&t->g, batch, RT_DEVICE_CPU, err, sizeof(err));
		CU_ASSERT_PTR_NOT_NULL_FATAL(p);
		CU_ASSERT_EQUAL(rt_plan_value_info(p, y, &yi), 0);
		CU_ASSERT_EQUAL(yi.tensor.rank, 2);
		CU_ASSERT_EQUAL(yi.tensor.dims[0], batch);
		CU_ASSERT_EQUAL(yi.tensor.dims[1], 3);
		CU_ASSERT_EQUAL(yi.nbytes, (size_t)batch * 3 * sizeof(float));
		arena = arena_new(p);
		rt_plan_bind(p, arena, &in, &out);
		CU_ASSERT_EQUAL(in.dims[0], batch);
		CU_ASSERT_EQUAL(out.dims[0], batch);
		fill(in.data, batch * 3, 0);
		CU_ASSERT_EQUAL(rt_plan_run(p, arena, err, sizeof(err)), 0);
		CU_ASSERT_DOUBLE_EQUAL(((float *)out.data)[batch * 3 - 1], 2.0 * (batch * 3 - 1), 1e-3);
		free(arena);
		rt_plan_free(p);
	}
	/* the graph is untouched: the next batch size binds afresh */
	CU_ASSERT_EQUAL(t->values[x].tensor.dims[0], RT_DIM_SYMBOLIC);
	free(t);
}

static const float g_weights[4] = { 1, 2, 3, 4 };

/* k = w + w and c = TestConst() are computed once, at plan time; y = x + k + c at run time. */
static void test_constant_folding(void)
{
	struct test_graph *t = tg_new();
	int32_t x = tg_input(t, "x", BW_DTYPE_FLOAT, 1, 4);
	int32_t w = tg_initializer(t, "w", g_weights, 4);
	int32_t k = tg_node(t, "TestAdd", "k", w, w);
	int32_t c = tg_node(t, "TestConst", "c", -2, -2);
	int32_t kc = tg_node(t, "TestAdd", "kc", k, c);
	int32_t y0 = tg_node(t, "TestMul", "y0", x, x);
	int32_t y = tg_node(t, "TestAdd", "y", y0, kc);
	struct rt_plan_value_info ki, ci, kci;
	struct rt_plan_stats st;
	struct rt_tensor in, out[2];
	char err[RT_ERR_MAX];
	struct rt_plan *p;
	void *arena;

	/* x is float[1, 4] and kc float[4]: TestAdd wants equal shapes, so reshape kc's view */
	t->values[x].tensor.rank = 1;
	t->values[x].tensor.dims[0] = 4;
	tg_output(t, y);
	tg_output(t, kc);
	g_add_runs = 0;
	p = rt_plan_create(&t->g, 0, RT_DEVICE_CPU, err, sizeof(err));
	if (p == NULL)
		printf("\n  %s\n", err);
	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	CU_ASSERT_EQUAL(g_add_runs, 2); /* k and kc, now */
	rt_plan_stats(p, &st);
	CU_ASSERT_EQUAL(st.folded, 3);
	CU_ASSERT_EQUAL(st.steps, 2);
	CU_ASSERT_EQUAL(rt_plan_value_info(p, kc, &kci), 0);
	CU_ASSERT_EQUAL(kci.placement, RT_PLACE_CONST);
	CU_ASSERT_PTR_NOT_NULL_FATAL(kci.tensor.data);
	for (int i = 0; i < 4; i++)
		CU_ASSERT_DOUBLE_EQUAL(((float *)kci.tensor.data)[i], 3.0 * (i + 1), 1e-6);
	/* k and c fed only the folded kc: the plan keeps none of them */
	CU_ASSERT_EQUAL(rt_plan_value_info(p, k, &ki), 0);
	CU_ASSERT_EQUAL(ki.placement, RT_PLACE_NONE);
	CU_ASSERT_EQUAL(rt_plan_value_info(p, c, &ci), 0);
	CU_ASSERT_EQUAL(ci.placement, RT_PLACE_NONE);
	CU_ASSERT_EQUAL(st.constant_bytes, 4 * sizeof(float));
	check_layout(p, &t->g);

	arena = arena_new(p);
	rt_plan_bind(p, arena, &in, out);
	CU_ASSERT_PTR_EQUAL(out[1].data, kci.tensor.data); /* a constant output is the plan's */
	fill(in.data, 4, 1);
	CU_ASSERT_EQUAL(rt_plan_run(p, arena, err, sizeof(err)), 0);
	CU_ASSERT_EQUAL(g_add_runs, 3); /* only y ran */
	for (int i = 0; i < 4; i++)
		CU_ASSERT_DOUBLE_EQUAL(((float *)out[0].data)[i], (i + 1.0) * (i + 1.0) + 3.0 * (i + 1), 1e-5);
	free(arena);
	rt_plan_free(p);
	free(t);
}

/* Shape(x) depends on x's shape only: it folds for each batch size, x stays an arena input. */
static void test_shape_folds(void)
{
	struct test_graph *t = tg_new();
	int32_t x = tg_input(t, "x", BW_DTYPE_FLOAT, RT_DIM_SYMBOLIC, 3);
	int32_t s = tg_node(t, "Shape", "shape", x, -2);
	int32_t y = tg_node(t, "TestAdd", "y", x, x);
	struct rt_plan_value_info si, xi;
	char err[RT_ERR_MAX];
	struct rt_plan *p;

	t->nodes[0].domain = (char *)"";
	tg_output(t, s);
	tg_output(t, y);
	g_shape_runs = 0;
	p = rt_plan_create(&t->g, 6, RT_DEVICE_CPU, err, sizeof(err));
	if (p == NULL)
		printf("\n  %s\n", err);
	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	CU_ASSERT_EQUAL(g_shape_runs, 1);
	CU_ASSERT_EQUAL(rt_plan_num_steps(p), 1);
	CU_ASSERT_EQUAL(rt_plan_value_info(p, s, &si), 0);
	CU_ASSERT_EQUAL_FATAL(si.placement, RT_PLACE_CONST);
	CU_ASSERT_EQUAL(((int64_t *)si.tensor.data)[0], 6);
	CU_ASSERT_EQUAL(((int64_t *)si.tensor.data)[1], 3);
	CU_ASSERT_EQUAL(rt_plan_value_info(p, x, &xi), 0);
	CU_ASSERT_EQUAL(xi.placement, RT_PLACE_ARENA);
	CU_ASSERT_EQUAL(xi.death, 1); /* read by y only: Shape does not read it at run time */
	rt_plan_free(p);
	free(t);
}

/* y = Fill(Copy(n)): Fill's shape needs n's value, which only a caller that knows it can give. */
static void test_known_inputs(void)
{
	struct test_graph *t = tg_new();
	int32_t n = tg_input(t, "n", BW_DTYPE_INT64, 1, 1);
	int32_t c = tg_node(t, "TestCopy", "c", n, -2);
	int32_t y = tg_node(t, "TestFill", "fill", c, -2);
	int64_t count = 5;
	struct rt_tensor known = { .dtype = BW_DTYPE_INT64, .rank = 2, .dims = { 1, 1 }, .data = &count };
	struct rt_plan_value_info ci;
	struct rt_tensor in, out;
	char err[RT_ERR_MAX];
	struct rt_plan *p;
	void *arena;

	tg_output(t, y);
	p = rt_plan_create(&t->g, 0, RT_DEVICE_CPU, err, sizeof(err));
	CU_ASSERT_PTR_NULL(p);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "node fill (TestFill)"));

	p = rt_plan_create_known(&t->g, 0, RT_DEVICE_CPU, &known, err, sizeof(err));
	if (p == NULL)
		printf("\n  %s\n", err);
	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	CU_ASSERT_EQUAL(rt_plan_num_steps(p), 2); /* known, not constant: both still run */
	CU_ASSERT_EQUAL(rt_plan_value_info(p, c, &ci), 0);
	CU_ASSERT_EQUAL(ci.placement, RT_PLACE_ARENA);
	CU_ASSERT_PTR_NULL(ci.tensor.data);
	arena = arena_new(p);
	rt_plan_bind(p, arena, &in, &out);
	CU_ASSERT_EQUAL(out.rank, 1);
	CU_ASSERT_EQUAL(out.dims[0], 5);
	*(int64_t *)in.data = 5;
	CU_ASSERT_EQUAL(rt_plan_run(p, arena, err, sizeof(err)), 0);
	for (int i = 0; i < 5; i++)
		CU_ASSERT_DOUBLE_EQUAL(((float *)out.data)[i], 5.0, 1e-6);
	free(arena);
	rt_plan_free(p);

	/* a value of another shape than declared is refused */
	known.dims[1] = 2;
	p = rt_plan_create_known(&t->g, 0, RT_DEVICE_CPU, &known, err, sizeof(err));
	CU_ASSERT_PTR_NULL(p);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "graph input n"));
	free(t);
}

static void test_plan_errors(void)
{
	struct test_graph *t = tg_new();
	int32_t x = tg_input(t, "x", BW_DTYPE_FLOAT, 2, 2);
	int32_t z = tg_input(t, "z", BW_DTYPE_FLOAT, 2, 3);
	int32_t a = tg_node(t, "TestNope", "mystery", x, -2);
	char err[RT_ERR_MAX];
	struct rt_plan *p;

	tg_output(t, a);
	CU_ASSERT_PTR_NULL(rt_plan_create(&t->g, 0, RT_DEVICE_CPU, err, sizeof(err)));
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "node mystery (TestNope)"));
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "not supported"));

	/* no GPU kernels here */
	t->nodes[0].op_type = (char *)"TestAdd";
	t->nodes[0].num_inputs = 2;
	t->nodes[0].inputs[1] = x;
	CU_ASSERT_PTR_NULL(rt_plan_create(&t->g, 0, RT_DEVICE_GPU, err, sizeof(err)));
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "node mystery"));

	/* shape inference refuses: its error names the node */
	t->nodes[0].inputs[1] = z;
	CU_ASSERT_PTR_NULL(rt_plan_create(&t->g, 0, RT_DEVICE_CPU, err, sizeof(err)));
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "node mystery (TestAdd)"));
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "another shape"));

	/* a graph output declared other than inferred */
	t->nodes[0].inputs[1] = x;
	t->values[a].tensor = (struct rt_tensor){ .dtype = BW_DTYPE_DOUBLE, .rank = 2, .dims = { 2, 2 } };
	CU_ASSERT_PTR_NULL(rt_plan_create(&t->g, 0, RT_DEVICE_CPU, err, sizeof(err)));
	CU_ASSERT_STRING_EQUAL(err, "graph output mystery: inferred float of rank 2, declared double of rank 2");
	t->values[a].tensor.dtype = BW_DTYPE_FLOAT;
	CU_ASSERT_PTR_NOT_NULL(p = rt_plan_create(&t->g, 0, RT_DEVICE_CPU, err, sizeof(err)));
	rt_plan_free(p);

	/* an input read before anything computes it */
	t->nodes[0].inputs[1] = a;
	CU_ASSERT_PTR_NULL(rt_plan_create(&t->g, 0, RT_DEVICE_CPU, err, sizeof(err)));
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "not computed"));
	free(t);
}

/* ---- runs -------------------------------------------------------------------------------------------- */

/* x -> a = x + x, b = x * x -> y = a + b */
static void test_diamond(void)
{
	struct test_graph *t = tg_new();
	int32_t x = tg_input(t, "x", BW_DTYPE_FLOAT, 8, 16);
	int32_t a = tg_node(t, "TestAdd", "a", x, x);
	int32_t b = tg_node(t, "TestMul", "b", x, x);
	int32_t y = tg_node(t, "TestAdd", "y", a, b);
	struct rt_plan_step_info s0, s1, s2;
	struct rt_tensor in, out;
	char err[RT_ERR_MAX];
	struct rt_plan *p;
	void *arena;

	tg_output(t, y);
	p = rt_plan_create(&t->g, 0, RT_DEVICE_CPU, err, sizeof(err));
	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	CU_ASSERT(check_layout(p, &t->g) > 0);
	/* the node table the multi-worker executor will walk */
	CU_ASSERT_EQUAL_FATAL(rt_plan_num_steps(p), 3);
	rt_plan_step_info(p, 0, &s0);
	rt_plan_step_info(p, 1, &s1);
	rt_plan_step_info(p, 2, &s2);
	CU_ASSERT_EQUAL(s0.pending_inputs, 0);
	CU_ASSERT_EQUAL(s1.pending_inputs, 0);
	CU_ASSERT_EQUAL(s2.pending_inputs, 2);
	CU_ASSERT_EQUAL_FATAL(s0.num_consumers, 1);
	CU_ASSERT_EQUAL(s0.consumers[0], 2);
	CU_ASSERT_EQUAL_FATAL(s1.num_consumers, 1);
	CU_ASSERT_EQUAL(s1.consumers[0], 2);
	CU_ASSERT_EQUAL(s2.num_consumers, 0);
	CU_ASSERT_EQUAL(rt_plan_step_info(p, 3, &s2), -EINVAL);

	arena = arena_new(p);
	rt_plan_bind(p, arena, &in, &out);
	fill(in.data, 8 * 16, -10);
	CU_ASSERT_EQUAL(rt_plan_run(p, arena, err, sizeof(err)), 0);
	for (int i = 0; i < 8 * 16; i++) {
		double v = -10.0 + i;

		CU_ASSERT_DOUBLE_EQUAL(((float *)out.data)[i], 2 * v + v * v, 1e-3);
	}
	free(arena);
	rt_plan_free(p);
	free(t);
}

static void test_failing_kernel(void)
{
	struct test_graph *t = tg_new();
	int32_t x = tg_input(t, "x", BW_DTYPE_FLOAT, 2, 2);
	int32_t a = tg_node(t, "TestAdd", "a", x, x);
	int32_t f = tg_node(t, "TestFail", "boom", a, -2);
	int32_t y = tg_node(t, "TestAdd", "y", f, f);
	char err[RT_ERR_MAX];
	struct rt_plan *p;
	void *arena;

	tg_output(t, y);
	p = rt_plan_create(&t->g, 0, RT_DEVICE_CPU, err, sizeof(err));
	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	arena = arena_new(p);
	g_add_runs = 0;
	CU_ASSERT_EQUAL(rt_plan_run(p, arena, err, sizeof(err)), -EIO);
	CU_ASSERT_STRING_EQUAL(err, "node boom (TestFail): deliberate failure");
	CU_ASSERT_EQUAL(g_add_runs, 1); /* y, after it, never ran */
	free(arena);
	rt_plan_free(p);

	/* a failing node whose inputs are constant fails the plan instead */
	t->g.num_inputs = 0;
	t->values[x].kind = RT_VALUE_INITIALIZER;
	t->values[x].tensor = (struct rt_tensor){ .dtype = BW_DTYPE_FLOAT, .rank = 2, .dims = { 2, 2 },
						  .data = (void *)g_weights };
	t->values[x].nbytes = sizeof(g_weights);
	CU_ASSERT_PTR_NULL(rt_plan_create(&t->g, 0, RT_DEVICE_CPU, err, sizeof(err)));
	CU_ASSERT_STRING_EQUAL(err, "node boom (TestFail): constant folding failed: deliberate failure");
	free(t);
}

static int suite_init(void)
{
	return rt_kernels_register(g_test_kernels, sizeof(g_test_kernels) / sizeof(g_test_kernels[0])) == 0 ? 0 : -1;
}

static CU_TestInfo g_layout_tests[] = {
	{ "a chain reuses memory; no live tensors overlap", test_chain_layout },
	{ "graph outputs live to the end", test_outputs_kept },
	CU_TEST_INFO_NULL,
};

static CU_TestInfo g_binding_tests[] = {
	{ "symbolic dims take the batch size", test_symbolic_batch },
	{ "constant subgraphs fold at plan time", test_constant_folding },
	{ "Shape folds once shapes are bound", test_shape_folds },
	{ "input values known at plan time", test_known_inputs },
	{ "plan errors name the node", test_plan_errors },
	CU_TEST_INFO_NULL,
};

static CU_TestInfo g_run_tests[] = {
	{ "diamond", test_diamond },
	{ "a failing kernel's error names its node", test_failing_kernel },
	CU_TEST_INFO_NULL,
};

int main(void)
{
	CU_SuiteInfo suites[] = {
		{ "plan: arena layout", suite_init, NULL, NULL, NULL, g_layout_tests },
		{ "plan: binding and folding", suite_init, NULL, NULL, NULL, g_binding_tests },
		{ "exec: runs", suite_init, NULL, NULL, NULL, g_run_tests },
		CU_SUITE_INFO_NULL,
	};

	return bw_cunit_run(suites);
}
