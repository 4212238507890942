/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Unit tests of the planner and the first executor, on graphs made by hand (rt_test.c) with kernels
 * of a "test" domain registered here, so they need neither the ONNX loader nor the CPU kernels: the
 * arena layout (no two tensors alive together overlap, scratch included; a chain needs less than the
 * sum; graph outputs are never overwritten), symbolic batch binding, constant folding at plan time,
 * values known at plan time, and runs (a diamond's result; a failing kernel's error names its node).
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../bw_cunit.h"

#include "exec/plan.h"
#include "rt_test.h"

/* ---- kernels of the "test" domain (with rt_test.c's TestAdd, TestFail, TestScratch) ---------------- */

/* TestMul: y = a * b. */
static int mul_run(const struct rt_node *node, const struct rt_tensor *in, struct rt_tensor *out, void *scratch,
		   char *err, size_t cap)
{
	const float *a = in[0].data, *b = in[1].data;
	float *y = out[0].data;

	(void)node, (void)scratch, (void)err, (void)cap;
	for (int64_t i = 0; i < rt_tensor_elems(&out[0]); i++)
		y[i] = a[i] * b[i];
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
	for (int64_t i = 0; i < rt_tensor_elems(&out[0]); i++)
		y[i] = (float)*(const int64_t *)in[0].data;
	return 0;
}

/* TestCopy: y = x, int64. */
static int copy_run(const struct rt_node *node, const struct rt_tensor *in, struct rt_tensor *out, void *scratch,
		    char *err, size_t cap)
{
	(void)node, (void)scratch, (void)err, (void)cap;
	memcpy(out[0].data, in[0].data, (size_t)rt_tensor_elems(&in[0]) * sizeof(int64_t));
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

static const struct rt_kernel g_test_kernels[] = {
	TK_KERNEL("TestMul", BW_DTYPE_FLOAT, tk_same_shape_infer, NULL, mul_run),
	{ .op_type = "TestConst", .domain = "test", .opset_min = 1, .opset_max = 100, .dtypes = 0,
	  .device = RT_DEVICE_CPU, .infer = const_infer, .run = const_run },
	TK_KERNEL("TestFill", BW_DTYPE_INT64, fill_infer, NULL, fill_run),
	TK_KERNEL("TestCopy", BW_DTYPE_INT64, tk_same_shape_infer, NULL, copy_run),
	{ .op_type = "Shape", .domain = "", .opset_min = 1, .opset_max = 17, .dtypes = RT_DTYPE_BIT(BW_DTYPE_FLOAT),
	  .device = RT_DEVICE_CPU, .infer = shape_infer, .run = shape_run },
};

/* ---- arenas and inputs ------------------------------------------------------------------------------ */

/* known: NULL, or one tensor per graph input as rt_plan_create_known takes them. */
static struct rt_plan *plan_create(const struct test_graph *t, int64_t batch, enum rt_device dev,
				   const struct rt_tensor *known, char *err, size_t cap)
{
	return known != NULL ? rt_plan_create_known(&t->g, batch, dev, known, err, cap)
			     : rt_plan_create(&t->g, batch, dev, err, cap);
}

/* Plans t for batch on the CPU; the test stops, saying why, if t does not plan. */
static struct rt_plan *plan_ok(const struct test_graph *t, int64_t batch, const struct rt_tensor *known)
{
	char err[RT_ERR_MAX];
	struct rt_plan *p = plan_create(t, batch, RT_DEVICE_CPU, known, err, sizeof(err));

	if (p == NULL)
		printf("\n  %s\n", err);
	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	return p;
}

/* t must not plan on dev (batch 0), and its error must say what (and also, unless NULL). */
static void plan_refused(const struct test_graph *t, enum rt_device dev, const struct rt_tensor *known,
			 const char *what, const char *also)
{
	char err[RT_ERR_MAX];
	struct rt_plan *p = plan_create(t, 0, dev, known, err, sizeof(err));

	CU_ASSERT_PTR_NULL(p);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, what));
	if (also != NULL)
		CU_ASSERT_PTR_NOT_NULL(strstr(err, also));
	rt_plan_free(p);
}

static void *arena_new(const struct rt_plan *p)
{
	void *arena = aligned_alloc(RT_PLAN_ALIGN, rt_plan_arena_bytes(p));

	CU_ASSERT_PTR_NOT_NULL_FATAL(arena);
	memset(arena, 0x5a, rt_plan_arena_bytes(p)); /* garbage: nothing may rely on zeroes */
	return arena;
}

/* A new arena for p with p's graph inputs bound to in[] and its outputs to out[]. */
static void *arena_bound(const struct rt_plan *p, struct rt_tensor *in, struct rt_tensor *out)
{
	void *arena = arena_new(p);

	rt_plan_bind(p, arena, in, out);
	return arena;
}

/* Frees what a test made: its arena, its plan and its graph. */
static void plan_done(struct test_graph *t, struct rt_plan *p, void *arena)
{
	free(arena);
	rt_plan_free(p);
	free(t);
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
	int32_t value;        /* -1: a step's scratch */
};

/*
 * Every pair of arena tensors (and node scratch areas) whose lifetimes meet must be disjoint, but an
 * output written over an input (in_place_input), which must lie exactly there; every one lies
 * inside the arena, after the descriptors, 64-byte aligned.
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
		spans[count++] = (struct span){ vi.offset, vi.offset + vi.nbytes, vi.birth, vi.death, (int32_t)v };
		if (g->values[v].is_output)
			CU_ASSERT_EQUAL(vi.death, (int32_t)g->num_nodes);
	}
	for (uint32_t s = 0; s < rt_plan_num_steps(p); s++) {
		struct rt_plan_step_info si;

		CU_ASSERT_EQUAL_FATAL(rt_plan_step_info(p, s, &si), 0);
		if (si.scratch_bytes == 0)
			continue;
		spans[count++] = (struct span){ si.scratch_offset, si.scratch_offset + si.scratch_bytes,
						(int32_t)si.node, (int32_t)si.node, -1 };
	}
	for (unsigned int i = 0; i < count; i++) {
		CU_ASSERT(spans[i].lo >= st.descriptor_bytes);
		CU_ASSERT(spans[i].hi <= st.arena_bytes);
		CU_ASSERT_EQUAL(spans[i].lo % RT_PLAN_ALIGN, 0);
		for (unsigned int j = i + 1; j < count; j++) {
			if (spans[i].birth > spans[j].death || spans[j].birth > spans[i].death)
				continue;
			if (tg_in_place_pair(p, g, spans[i].value, spans[j].value)) {
				CU_ASSERT(spans[i].lo == spans[j].lo && spans[i].hi == spans[j].hi);
				continue;
			}
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
	p = plan_ok(t, 0, NULL);
	CU_ASSERT(check_layout(p, &t->g) > 8);
	rt_plan_stats(p, &st);
	CU_ASSERT_EQUAL(st.steps, 8);
	CU_ASSERT_EQUAL(st.folded, 0);
	/* nine tensors and four scratches end to end; at most three at a time */
	CU_ASSERT_EQUAL(st.tensor_bytes_sum, 13 * CHAIN_N * sizeof(float));
	CU_ASSERT(st.tensor_bytes <= 3 * CHAIN_N * sizeof(float));
	CU_ASSERT(st.arena_bytes < st.tensor_bytes_sum);

	arena = arena_bound(p, &in, &out);
	CU_ASSERT_EQUAL(in.rank, 2);
	CU_ASSERT_EQUAL(in.dims[1], CHAIN_N);
	fill(in.data, CHAIN_N, 0);
	CU_ASSERT_EQUAL(rt_plan_run(p, arena, err, sizeof(err)), 0);
	/* four doublings by Scratch, four by Add: x * 256 */
	for (int i = 0; i < CHAIN_N; i++)
		CU_ASSERT_DOUBLE_EQUAL(((float *)out.data)[i], 256.0 * i, 1e-3);
	plan_done(t, p, arena);
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
	p = plan_ok(t, 0, NULL);
	check_layout(p, &t->g);
	CU_ASSERT_EQUAL(rt_plan_value_info(p, a, &ai), 0);
	CU_ASSERT_EQUAL(ai.placement, RT_PLACE_ARENA);
	CU_ASSERT_EQUAL(ai.birth, 0);
	CU_ASSERT_EQUAL(ai.death, (int32_t)t->g.num_nodes);
	CU_ASSERT_EQUAL(rt_plan_value_info(p, -1, &ai), -EINVAL);

	arena = arena_bound(p, &in, out);
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
	plan_done(t, p, arena);
}

/*
 * Outputs over inputs (rt_kernel.in_place): TestAccumulate's y takes b's bytes where b dies there,
 * a chain of them ends in one place; not where b is read later, is a graph input or output, or is
 * read twice by the node.
 *   p = x + x; z = p + p; y1 = Acc(p, z); y2 = Acc(x, y1)         z -> y1 -> y2 in one place
 *   r = x + x; u = Acc(x, r); v = r + u                          r read after: u elsewhere
 *   w = Acc(y2, x)                                               x a graph input
 *   o = x + x (output); q = Acc(v, o)                            o a graph output
 *   t2 = x + x; d = Acc(t2, t2); e = q + w + d ...               t2 read twice
 */
static void test_in_place(void)
{
	struct test_graph *t = tg_new();
	int32_t x = tg_input(t, "x", BW_DTYPE_FLOAT, 2, 64);
	int32_t p = tg_node(t, "TestAdd", "p", x, x), z = tg_node(t, "TestAdd", "z", p, p);
	int32_t y1 = tg_node(t, "TestAccumulate", "y1", p, z), y2 = tg_node(t, "TestAccumulate", "y2", x, y1);
	int32_t r = tg_node(t, "TestAdd", "r", x, x), u = tg_node(t, "TestAccumulate", "u", x, r);
	int32_t v = tg_node(t, "TestAdd", "v", r, u), w = tg_node(t, "TestAccumulate", "w", y2, x);
	int32_t o = tg_node(t, "TestAdd", "o", x, x), q = tg_node(t, "TestAccumulate", "q", v, o);
	int32_t t2 = tg_node(t, "TestAdd", "t2", x, x), d = tg_node(t, "TestAccumulate", "d", t2, t2);
	int32_t e = tg_node(t, "TestAdd", "e", tg_node(t, "TestAdd", "qw", q, w), d);
	struct rt_plan_stats st;
	struct rt_tensor in, out[2];
	char err[RT_ERR_MAX];
	struct rt_plan *pl;
	void *arena;

	tg_output(t, o);
	tg_output(t, e);
	pl = plan_ok(t, 0, NULL);
	check_layout(pl, &t->g);
	rt_plan_stats(pl, &st);
	CU_ASSERT_EQUAL(st.in_place, 2);
	CU_ASSERT_EQUAL(tg_offset(pl, y1), tg_offset(pl, z));
	CU_ASSERT_EQUAL(tg_offset(pl, y2), tg_offset(pl, z));
	CU_ASSERT_NOT_EQUAL(tg_offset(pl, u), tg_offset(pl, r));
	CU_ASSERT_NOT_EQUAL(tg_offset(pl, q), tg_offset(pl, o));
	for (uint32_t s = 0; s < rt_plan_num_steps(pl); s++) {
		struct rt_plan_step_info si;
		const char *name;

		rt_plan_step_info(pl, s, &si);
		name = t->g.nodes[si.node].name;
		CU_ASSERT_EQUAL(si.in_place_input, strcmp(name, "y1") == 0 || strcmp(name, "y2") == 0 ? 1 : -1);
	}

	arena = arena_bound(pl, &in, out);
	fill(in.data, 2 * 64, -3);
	CU_ASSERT_EQUAL(rt_plan_run(pl, arena, err, sizeof(err)), 0);
	for (int i = 0; i < 2 * 64; i++) {
		double xv = -3.0 + i;
		/* y2 = x + 2x + 4x; w = y2 + x; v = 2x + 3x; q = v + 2x; d = 4x; e = q + w + d */
		CU_ASSERT_DOUBLE_EQUAL(((float *)out[0].data)[i], 2 * xv, 1e-3);
		CU_ASSERT_DOUBLE_EQUAL(((float *)out[1].data)[i], 7 * xv + 8 * xv + 4 * xv, 1e-3);
	}
	plan_done(t, pl, arena);
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
	plan_refused(t, RT_DEVICE_CPU, NULL, "graph input x", "symbolic");

	for (int64_t batch = 1; batch <= 8; batch *= 2) {
		p = plan_ok(t, batch, NULL);
		CU_ASSERT_EQUAL(rt_plan_value_info(p, y, &yi), 0);
		CU_ASSERT_EQUAL(yi.tensor.rank, 2);
		CU_ASSERT_EQUAL(yi.tensor.dims[0], batch);
		CU_ASSERT_EQUAL(yi.tensor.dims[1], 3);
		CU_ASSERT_EQUAL(yi.nbytes, (size_t)batch * 3 * sizeof(float));
		arena = arena_bound(p, &in, &out);
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
	atomic_store(&tk_add_runs, 0);
	p = plan_ok(t, 0, NULL);
	CU_ASSERT_EQUAL(atomic_load(&tk_add_runs), 2); /* k and kc, now */
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

	arena = arena_bound(p, &in, out);
	CU_ASSERT_PTR_EQUAL(out[1].data, kci.tensor.data); /* a constant output is the plan's */
	fill(in.data, 4, 1);
	CU_ASSERT_EQUAL(rt_plan_run(p, arena, err, sizeof(err)), 0);
	CU_ASSERT_EQUAL(atomic_load(&tk_add_runs), 3); /* only y ran */
	for (int i = 0; i < 4; i++)
		CU_ASSERT_DOUBLE_EQUAL(((float *)out[0].data)[i], (i + 1.0) * (i + 1.0) + 3.0 * (i + 1), 1e-5);
	plan_done(t, p, arena);
}

/* Shape(x) depends on x's shape only: it folds for each batch size, x stays an arena input. */
static void test_shape_folds(void)
{
	struct test_graph *t = tg_new();
	int32_t x = tg_input(t, "x", BW_DTYPE_FLOAT, RT_DIM_SYMBOLIC, 3);
	int32_t s = tg_node(t, "Shape", "shape", x, -2);
	int32_t y = tg_node(t, "TestAdd", "y", x, x);
	struct rt_plan_value_info si, xi;
	struct rt_plan *p;

	t->nodes[0].domain = (char *)"";
	tg_output(t, s);
	tg_output(t, y);
	g_shape_runs = 0;
	p = plan_ok(t, 6, NULL);
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
	plan_refused(t, RT_DEVICE_CPU, NULL, "node fill (TestFill)", NULL);

	p = plan_ok(t, 0, &known);
	CU_ASSERT_EQUAL(rt_plan_num_steps(p), 2); /* known, not constant: both still run */
	CU_ASSERT_EQUAL(rt_plan_value_info(p, c, &ci), 0);
	CU_ASSERT_EQUAL(ci.placement, RT_PLACE_ARENA);
	CU_ASSERT_PTR_NULL(ci.tensor.data);
	arena = arena_bound(p, &in, &out);
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
	plan_refused(t, RT_DEVICE_CPU, &known, "graph input n", NULL);
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
	plan_refused(t, RT_DEVICE_CPU, NULL, "node mystery (TestNope)", "not supported");

	/* no GPU kernels here */
	t->nodes[0].op_type = (char *)"TestAdd";
	t->nodes[0].num_inputs = 2;
	t->nodes[0].inputs[1] = x;
	plan_refused(t, RT_DEVICE_GPU, NULL, "node mystery", NULL);

	/* shape inference refuses: its error names the node */
	t->nodes[0].inputs[1] = z;
	plan_refused(t, RT_DEVICE_CPU, NULL, "node mystery (TestAdd)", "another shape");

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
	plan_refused(t, RT_DEVICE_CPU, NULL, "not computed", NULL);
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
	p = plan_ok(t, 0, NULL);
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

	arena = arena_bound(p, &in, &out);
	fill(in.data, 8 * 16, -10);
	CU_ASSERT_EQUAL(rt_plan_run(p, arena, err, sizeof(err)), 0);
	for (int i = 0; i < 8 * 16; i++) {
		double v = -10.0 + i;

		CU_ASSERT_DOUBLE_EQUAL(((float *)out.data)[i], 2 * v + v * v, 1e-3);
	}
	plan_done(t, p, arena);
}

/* x -> a = x + x -> boom (fails) -> y = boom + boom */
static void test_failing_kernel(void)
{
	struct test_graph *t = tg_new();
	int32_t x = tg_input(t, "x", BW_DTYPE_FLOAT, 2, 2);
	int32_t f = tg_node(t, "TestFail", "boom", tg_node(t, "TestAdd", "a", x, x), -2);
	int32_t y = tg_node(t, "TestAdd", "y", f, f);
	char err[RT_ERR_MAX];
	struct rt_plan *p;
	void *arena;

	tg_output(t, y);
	p = plan_ok(t, 0, NULL);
	arena = arena_new(p);
	atomic_store(&tk_add_runs, 0);
	CU_ASSERT_EQUAL(rt_plan_run(p, arena, err, sizeof(err)), -EIO);
	CU_ASSERT_STRING_EQUAL(err, "node boom (TestFail): deliberate failure");
	CU_ASSERT_EQUAL(atomic_load(&tk_add_runs), 1); /* y, after it, never ran */
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
	return tk_register(g_test_kernels, sizeof(g_test_kernels) / sizeof(g_test_kernels[0]));
}

static CU_TestInfo g_layout_tests[] = {
	{ "a chain reuses memory; no live tensors overlap", test_chain_layout },
	{ "graph outputs live to the end", test_outputs_kept },
	{ "outputs over inputs where the kernel may and the input dies", test_in_place },
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
