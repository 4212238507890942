/* SPDX-License-Identifier: BSD-3-Clause */
/* Hand-made graphs and "test"-domain kernels for the planner's and the executor's unit tests (rt_test.h). */
#include "rt_test.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <CUnit/CUnit.h>

#include "exec/plan.h"

/* ---- kernels of the "test" domain ------------------------------------------------------------------ */

_Atomic unsigned int tk_add_runs;
_Atomic unsigned int tk_fail_runs;

int tk_same_shape_infer(const struct rt_node *node, const struct rt_tensor *in, struct rt_tensor *out, char *err,
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

/* TestScratch: y = 2x, after scribbling over a scratch as large as x (it must overlap nothing live). */
static size_t tk_scratch_bytes(const struct rt_node *node, const struct rt_tensor *in, const struct rt_tensor *out)
{
	(void)node, (void)out;
	return (size_t)rt_tensor_elems(&in[0]) * sizeof(float);
}

static int tk_scratch_run(const struct rt_node *node, const struct rt_tensor *in, struct rt_tensor *out,
			  void *scratch, char *err, size_t cap)
{
	const float *x = in[0].data;
	float *y = out[0].data;

	if (scratch == NULL) {
		snprintf(err, cap, "no scratch");
		return -EINVAL;
	}
	memset(scratch, 0xab, tk_scratch_bytes(node, in, out));
	for (int64_t i = 0; i < rt_tensor_elems(&out[0]); i++)
		y[i] = 2 * x[i];
	return 0;
}

/* TestAdd: y = a + b. */
static int tk_add_run(const struct rt_node *node, const struct rt_tensor *in, struct rt_tensor *out,
		      void *scratch, char *err, size_t cap)
{
	const float *a = in[0].data, *b = in[1].data;
	float *y = out[0].data;

	(void)node, (void)scratch, (void)err, (void)cap;
	atomic_fetch_add(&tk_add_runs, 1);
	for (int64_t i = 0; i < rt_tensor_elems(&out[0]); i++)
		y[i] = a[i] + b[i];
	return 0;
}

/* TestAccumulate: y = a + b, which may take b's bytes (each b[i] read before y[i] is written). */
static int tk_accumulate_in_place(const struct rt_node *node, const struct rt_tensor *in, const struct rt_tensor *out)
{
	(void)in, (void)out;
	return node->num_inputs == 2 ? 1 : -1;
}

/* TestFail: fails, naming nothing but itself. */
static int tk_fail_run(const struct rt_node *node, const struct rt_tensor *in, struct rt_tensor *out,
		       void *scratch, char *err, size_t cap)
{
	(void)node, (void)in, (void)out, (void)scratch;
	atomic_fetch_add(&tk_fail_runs, 1);
	snprintf(err, cap, "deliberate failure");
	return -EIO;
}

static const struct rt_kernel g_shared_kernels[] = {
	TK_KERNEL("TestAdd", BW_DTYPE_FLOAT, tk_same_shape_infer, NULL, tk_add_run),
	TK_KERNEL("TestFail", BW_DTYPE_FLOAT, tk_same_shape_infer, NULL, tk_fail_run),
	TK_KERNEL("TestScratch", BW_DTYPE_FLOAT, tk_same_shape_infer, tk_scratch_bytes, tk_scratch_run),
	{ .op_type = "TestAccumulate", .domain = "test", .opset_min = 1, .opset_max = 100,
	  .dtypes = RT_DTYPE_BIT(BW_DTYPE_FLOAT), .device = RT_DEVICE_CPU, .infer = tk_same_shape_infer,
	  .run = tk_add_run, .in_place = tk_accumulate_in_place },
};

int tk_register(const struct rt_kernel *own, unsigned int count)
{
	if (rt_kernels_register(g_shared_kernels, sizeof(g_shared_kernels) / sizeof(g_shared_kernels[0])) != 0)
		return -1;
	return rt_kernels_register(own, count) == 0 ? 0 : -1;
}

/* ---- graphs made by hand ---------------------------------------------------------------------------- */

struct test_graph *tg_new(void)
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

int32_t tg_value(struct test_graph *t, const char *name, enum rt_value_kind kind)
{
	int32_t v = (int32_t)t->g.num_values++;

	CU_ASSERT_FATAL(t->g.num_values <= TEST_VALUES_MAX);
	t->values[v] = (struct rt_value){ .name = (char *)name, .kind = kind, .producer = -1 };
	return v;
}

int32_t tg_input(struct test_graph *t, const char *name, uint8_t dtype, int64_t d0, int64_t d1)
{
	int32_t v = tg_value(t, name, RT_VALUE_INPUT);

	t->values[v].tensor = (struct rt_tensor){ .dtype = dtype, .rank = 2, .dims = { d0, d1 } };
	t->inputs[t->g.num_inputs++] = v;
	return v;
}

int32_t tg_initializer(struct test_graph *t, const char *name, const float *data, int64_t n)
{
	int32_t v = tg_value(t, name, RT_VALUE_INITIALIZER);

	t->values[v].tensor = (struct rt_tensor){ .dtype = BW_DTYPE_FLOAT, .rank = 1, .dims = { n },
						  .data = (void *)data };
	t->values[v].nbytes = (size_t)n * sizeof(float);
	return v;
}

int32_t tg_node(struct test_graph *t, const char *op, const char *name, int32_t a, int32_t b)
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

void tg_output(struct test_graph *t, int32_t v)
{
	t->values[v].is_output = true;
	t->outputs[t->g.num_outputs++] = v;
}

bool tg_in_place_pair(const struct rt_plan *p, const struct rt_graph *g, int32_t a, int32_t b)
{
	for (uint32_t s = 0; a >= 0 && b >= 0 && s < rt_plan_num_steps(p); s++) {
		struct rt_plan_step_info si;
		const struct rt_node *n;

		CU_ASSERT_EQUAL_FATAL(rt_plan_step_info(p, s, &si), 0);
		n = &g->nodes[si.node];
		if (si.in_place_input >= 0 && ((n->inputs[si.in_place_input] == a && n->outputs[0] == b) ||
					       (n->inputs[si.in_place_input] == b && n->outputs[0] == a)))
			return true;
	}
	return false;
}

size_t tg_offset(const struct rt_plan *p, int32_t v)
{
	struct rt_plan_value_info vi;

	CU_ASSERT_EQUAL_FATAL(rt_plan_value_info(p, v, &vi), 0);
	CU_ASSERT_EQUAL(vi.placement, RT_PLACE_ARENA);
	return vi.offset;
}
