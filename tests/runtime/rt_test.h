/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What the planner's and the executor's unit tests share: graphs made by hand (no ONNX loader) and
 * kernels of a "test" domain (no CPU kernels) that each test program registers among its own. The
 * helpers assert with CUnit; they belong to a test that runs.
 */
#ifndef BW_TESTS_RT_TEST_H
#define BW_TESTS_RT_TEST_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "graph.h"

#define TEST_OPSET 1
#define TEST_VALUES_MAX 48
#define TEST_NODES_MAX 32
#define TEST_IO_MAX 4

/* ---- kernels of the "test" domain ------------------------------------------------------------------ */

/* A kernel of the "test" domain for one element type, on the CPU, at opsets 1 to 100. */
#define TK_KERNEL(op, dt, inf, sb, rn)                                                                         \
	{ .op_type = op, .domain = "test", .opset_min = 1, .opset_max = 100, .dtypes = RT_DTYPE_BIT(dt),      \
	  .device = RT_DEVICE_CPU, .infer = inf, .scratch_bytes = sb, .run = rn }

/** Every input has input 0's shape; the output too. */
int tk_same_shape_infer(const struct rt_node *node, const struct rt_tensor *in, struct rt_tensor *out, char *err,
			size_t cap);

/*
 * The kernels every program here has, all float: TestAdd (y = a + b; counts its runs in tk_add_runs),
 * TestFail (fails with -EIO, "deliberate failure"; counts its runs in tk_fail_runs), TestScratch
 * (y = 2x, after scribbling over a scratch as large as x, which must overlap nothing live) and
 * TestAccumulate (y = a + b like TestAdd, whose kernel lets y take b's bytes: rt_kernel.in_place).
 */
extern _Atomic unsigned int tk_add_runs;
extern _Atomic unsigned int tk_fail_runs;

/** Registers those kernels and the program's own[count] (a CUnit suite's init). \return 0, or -1. */
int tk_register(const struct rt_kernel *own, unsigned int count);

/* ---- graphs made by hand ---------------------------------------------------------------------------- */

struct test_graph {
	struct rt_graph g;
	struct rt_value values[TEST_VALUES_MAX];
	struct rt_node nodes[TEST_NODES_MAX];
	int32_t node_io[TEST_NODES_MAX][2][TEST_IO_MAX];
	int32_t inputs[TEST_IO_MAX];
	int32_t outputs[TEST_IO_MAX];
};

/** An empty graph (calloc'd: free it). */
struct test_graph *tg_new(void);

/** A new value of the graph, of no type yet. */
int32_t tg_value(struct test_graph *t, const char *name, enum rt_value_kind kind);

/** A graph input of dtype[d0, d1] (d0 may be RT_DIM_SYMBOLIC). */
int32_t tg_input(struct test_graph *t, const char *name, uint8_t dtype, int64_t d0, int64_t d1);

/** An initializer of float[n] over data (not copied). */
int32_t tg_initializer(struct test_graph *t, const char *name, const float *data, int64_t n);

/** A node of the "test" domain with up to two inputs (-2: none) and one new output value named after the node. */
int32_t tg_node(struct test_graph *t, const char *op, const char *name, int32_t a, int32_t b);

/** Makes v a graph output. */
void tg_output(struct test_graph *t, int32_t v);

struct rt_plan;

/** Whether a step of p wrote value b over value a, or a over b (rt_plan_step_info.in_place_input). */
bool tg_in_place_pair(const struct rt_plan *p, const struct rt_graph *g, int32_t a, int32_t b);

/** The arena offset of value v, an arena tensor of p. */
size_t tg_offset(const struct rt_plan *p, int32_t v);

#endif /* BW_TESTS_RT_TEST_H */
