/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Device programs (gpu/program.h) on the fake device: the CI proof of gpu/program_math.h, the
 * per-item arithmetic the CUDA module's kernels run too, and of the fake's instances and launches.
 *
 * - ops: each op code against the runtime's CPU kernels. A single-node ONNX model (onnx_build.h) is
 *   planned and run on the CPU with seeded random inputs; the same node is written by hand as a
 *   struct gpu_op (this tests the arithmetic and the fake, not a compiler) and run through a real
 *   instance: host buffers registered, the batch table's segments gathered into the arena, the op
 *   run, the output scattered back, the completion word polled. Outputs are compared bit for bit
 *   where both sides do the same float operations in the same order (elementwise, Where, Cast,
 *   Transpose, Gather, the reductions, Copy), else within REL_TOL (Softmax, LayerNormalization,
 *   MatMul, Gemm: each case says why).
 * - batch tables: several tasks' rows gathered at row offsets, padding rows zero-filled, outputs
 *   scattered to per-task places and nowhere else (canaries), generations on one slot and across two
 *   streams finished in either order.
 * - faults: a Gather index out of range (table fault, output 0, the launch still completes), a sticky
 *   error, a refused launch, indexes out of range, a bad segment, and gpu_program_check's refusals
 *   one rule at a time.
 * The suites that make instances run twice, once per launch mode (their init sets g_mode): a doorbell
 * instance must keep instance_launch's contract in every case a graph instance does. Then the
 * doorbell ring itself (doorbell.h's host protocol, which the CUDA module runs too): every (size,
 * slot) in flight in changing orders with the ring wrapping, completions in ring order, a slot rung
 * again while others are in flight, instance_destroy idle and with launches rung, a refused doorbell,
 * and a ring overrun (a slot rung while in flight) losing the device.
 */
#include <errno.h>
#include <math.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../bw_cunit.h"
#include "../runtime/onnx_build.h"

#include "copy_plan.h"
#include "defs.h"
#include "exec/plan.h"
#include "fake.h"
#include "gpu.h"
#include "graph.h"
#include "program_math.h"

#define TEST_OPSET 17
#define TEST_IR 8
/*
 * Where the two sides' float operations differ (the CPU's Softmax and LayerNormalization accumulate
 * in double, MatMul/Gemm go through OpenBLAS's blocking and FMAs), results agree to 1e-5 relative; a
 * result under 1 in magnitude is held to 1e-5 absolute, since the inputs are O(1) and a result near
 * 0 is a cancellation whose rounding error is of the inputs' size, not of the result's.
 */
#define REL_TOL 1e-5
#define CANARY 0xee
#define CANARY_BYTES 64
#define MAX_IN 4
#define DIM(a) (sizeof(a) / sizeof((a)[0]))
#define BW_DTYPE_BF16 16 /* a dtype the device does not handle */

static const struct gpu_ops *g_ops;
static uint32_t g_mode = GPU_LAUNCH_GRAPH; /* enum gpu_launch_mode every instance here is made with */
static uint64_t g_rng = 0x2545f4914f6cdd1dull;

/* Uniform in [-1, 1), deterministic (xorshift64*). */
static float rnd(void)
{
	g_rng ^= g_rng >> 12;
	g_rng ^= g_rng << 25;
	g_rng ^= g_rng >> 27;
	return (float)((g_rng * 0x2545f4914f6cdd1dull) >> 40) / (float)(1 << 23) - 1.0f;
}

static void fill_rnd(float *x, size_t n, float scale, float offset)
{
	for (size_t i = 0; i < n; i++)
		x[i] = scale * rnd() + offset;
}

static int64_t elems_of(int rank, const int64_t *dims)
{
	int64_t n = 1;

	for (int d = 0; d < rank; d++)
		n *= dims[d];
	return n;
}

/* ---- the CPU side: one model planned and run by the runtime ------------------------------------------- */

static Onnx__ModelProto *model_new(void)
{
	return onnx_build_model_new(NULL, TEST_IR, TEST_OPSET);
}

/* Runs m (freed here) on the CPU; inputs in graph-input order; output 0's bytes must be out_bytes. */
static void cpu_run(Onnx__ModelProto *m, const void *const *inputs, unsigned int nb_in, void *out, size_t out_bytes)
{
	struct rt_tensor in[MAX_IN], outs[MAX_IN];
	char err[RT_ERR_MAX];
	struct rt_graph *g;
	struct rt_plan *plan;
	size_t len;
	uint8_t *buf = onnx_build_pack(m, &len);
	void *arena;
	int rc;

	onnx_build_model_free(m);
	g = rt_graph_load_buffer(buf, len, NULL, err, sizeof(err));
	free(buf);
	if (g == NULL)
		fprintf(stderr, "load: %s\n", err);
	CU_ASSERT_PTR_NOT_NULL_FATAL(g);
	plan = rt_plan_create(g, 0, RT_DEVICE_CPU, err, sizeof(err));
	if (plan == NULL)
		fprintf(stderr, "plan: %s\n", err);
	CU_ASSERT_PTR_NOT_NULL_FATAL(plan);
	CU_ASSERT_EQUAL_FATAL(rt_plan_num_inputs(plan), nb_in);
	CU_ASSERT_EQUAL_FATAL(rt_plan_num_outputs(plan), 1);
	arena = aligned_alloc(RT_PLAN_ALIGN, rt_plan_arena_bytes(plan));
	CU_ASSERT_PTR_NOT_NULL_FATAL(arena);
	memset(arena, 0, rt_plan_arena_bytes(plan));
	rt_plan_bind(plan, arena, in, outs);
	for (unsigned int i = 0; i < nb_in; i++)
		memcpy(in[i].data, inputs[i], (size_t)rt_tensor_elems(&in[i]) * rt_dtype_size(in[i].dtype));
	rc = rt_plan_run(plan, arena, err, sizeof(err));
	if (rc != 0)
		fprintf(stderr, "run: %s\n", err);
	CU_ASSERT_EQUAL_FATAL(rc, 0);
	CU_ASSERT_EQUAL_FATAL((size_t)rt_tensor_elems(&outs[0]) * rt_dtype_size(outs[0].dtype), out_bytes);
	memcpy(out, outs[0].data, out_bytes);
	free(arena);
	rt_plan_free(plan);
	rt_graph_free(g);
}

static void in_f32(Onnx__ModelProto *m, const char *name, int rank, const int64_t *dims)
{
	onnx_build_input(m, name, BW_DTYPE_FLOAT, rank, dims);
}

static void out_any(Onnx__ModelProto *m, const char *name, int32_t dtype)
{
	onnx_build_output(m, name, dtype, -1, NULL);
}

static void init_f32_scalar(Onnx__ModelProto *m, const char *name, float v)
{
	Onnx__TensorProto *t = onnx_build_initializer(m, name, BW_DTYPE_FLOAT, 0, NULL);

	PUSH(t->float_data, t->n_float_data, v);
}

static void init_i64(Onnx__ModelProto *m, const char *name, const int64_t *v, size_t n)
{
	int64_t dims[1] = { (int64_t)n };
	Onnx__TensorProto *t = onnx_build_initializer(m, name, BW_DTYPE_INT64, 1, dims);

	for (size_t i = 0; i < n; i++)
		PUSH(t->int64_data, t->n_int64_data, v[i]);
}

/* ---- the device side: one program of one size run through a real instance ------------------------------ */

/*
 * One case: graph inputs (host data), one output, constants, scratch. case_layout places them in the
 * arena (each GPU_PROG_ALIGN-aligned); arena_in/arena_out/scratch_ref name them in ops.
 */
struct dev_case {
	unsigned int nb_in;
	const void *in[MAX_IN];
	size_t in_bytes[MAX_IN];
	size_t out_bytes;
	size_t scratch_bytes;
	const void *consts;
	size_t const_bytes;
	/* case_layout's */
	uint64_t in_off[MAX_IN], out_off, scratch_off, arena_bytes;
};

static uint64_t align_up(uint64_t n)
{
	return (n + GPU_PROG_ALIGN - 1) / GPU_PROG_ALIGN * GPU_PROG_ALIGN;
}

static void case_layout(struct dev_case *c)
{
	uint64_t at = 0;

	for (unsigned int t = 0; t < c->nb_in; t++) {
		c->in_off[t] = at;
		at += align_up(c->in_bytes[t]);
	}
	c->out_off = at;
	at += align_up(c->out_bytes);
	c->scratch_off = at;
	at += align_up(c->scratch_bytes);
	c->arena_bytes = at;
}

static struct gpu_ref arena_in(const struct dev_case *c, unsigned int t, uint32_t dtype)
{
	return (struct gpu_ref){ .space = GPU_SPACE_ARENA, .dtype = dtype, .offset = c->in_off[t] };
}

static struct gpu_ref arena_out(const struct dev_case *c, uint32_t dtype)
{
	return (struct gpu_ref){ .space = GPU_SPACE_ARENA, .dtype = dtype, .offset = c->out_off };
}

static struct gpu_ref const_ref(uint64_t offset, uint32_t dtype)
{
	return (struct gpu_ref){ .space = GPU_SPACE_CONST, .dtype = dtype, .offset = offset };
}

static struct gpu_dev *open_fake(void)
{
	struct gpu_fake_config cfg = { .nb_devices = 1, .mode = GPU_FAKE_ON_DEMAND, .seed = 1 };
	struct gpu_dev *dev = NULL;
	char err[GPU_ERR_MAX];

	gpu_fake_configure(&cfg);
	CU_ASSERT_EQUAL_FATAL(g_ops->dev_open(0, &dev, err, sizeof(err)), 0);
	return dev;
}

static uint64_t dev_addr_of(struct gpu_dev *dev, const void *p, size_t len)
{
	uint64_t a = 0;

	CU_ASSERT_EQUAL_FATAL(g_ops->host_to_dev(dev, p, len, &a), 0);
	return a;
}

/*
 * Runs ops on the fake as the host will: the inputs in one registered "packet" buffer, gathered by the
 * table; the output scattered into the same buffer between canaries, then copied to out.
 * \return the table's fault (its op in *fault_op when not NULL).
 */
static uint32_t dev_run(const struct dev_case *c, const struct gpu_op *ops, uint32_t nb_ops, void *out,
			uint32_t *fault_op)
{
	struct gpu_dev *dev = open_fake();
	struct gpu_stream *stream = NULL;
	struct gpu_loaded *loaded = NULL;
	struct gpu_instance *inst = NULL;
	struct gpu_program prog;
	struct gpu_batch_table *t;
	char err[GPU_ERR_MAX];
	size_t pkt_bytes = 0, in_at[MAX_IN], out_at, bad = 0;
	uint8_t *pkt;
	uint32_t fault;
	int rc;

	for (unsigned int i = 0; i < c->nb_in; i++) {
		in_at[i] = pkt_bytes;
		pkt_bytes += (c->in_bytes[i] + 63) & ~(size_t)63;
	}
	out_at = pkt_bytes + CANARY_BYTES;
	pkt_bytes = out_at + c->out_bytes + CANARY_BYTES;
	pkt = aligned_alloc(64, (pkt_bytes + 63) & ~(size_t)63);
	CU_ASSERT_PTR_NOT_NULL_FATAL(pkt);
	memset(pkt, CANARY, pkt_bytes);
	for (unsigned int i = 0; i < c->nb_in; i++)
		memcpy(pkt + in_at[i], c->in[i], c->in_bytes[i]);
	CU_ASSERT_EQUAL_FATAL(g_ops->host_register(dev, pkt, pkt_bytes, NULL, err, sizeof(err)), 0);
	CU_ASSERT_EQUAL_FATAL(g_ops->stream_create(dev, &stream, err, sizeof(err)), 0);

	memset(&prog, 0, sizeof(prog));
	snprintf(prog.name, sizeof(prog.name), "case");
	prog.nb_inputs = c->nb_in;
	prog.nb_outputs = 1;
	for (unsigned int i = 0; i < c->nb_in; i++) {
		prog.input_row_bytes[i] = (uint32_t)c->in_bytes[i];
		prog.sizes[0].input_offset[i] = c->in_off[i];
	}
	prog.output_row_bytes[0] = (uint32_t)c->out_bytes;
	prog.max_segments = c->nb_in + 1;
	prog.nb_sizes = 1;
	prog.sizes[0].batch = 1;
	prog.sizes[0].nb_ops = nb_ops;
	prog.sizes[0].ops = ops;
	prog.sizes[0].arena_bytes = c->arena_bytes;
	prog.sizes[0].output_offset[0] = c->out_off;
	prog.consts = c->consts;
	prog.const_bytes = c->const_bytes;
	rc = g_ops->program_load(dev, &prog, &loaded, err, sizeof(err));
	if (rc != 0)
		fprintf(stderr, "program_load: %s\n", err);
	CU_ASSERT_EQUAL_FATAL(rc, 0);
	CU_ASSERT_EQUAL_FATAL(g_ops->instance_create(loaded, stream, 1, g_mode, &inst, err, sizeof(err)), 0);

	t = g_ops->instance_table(inst, 0, 0);
	CU_ASSERT_PTR_NOT_NULL_FATAL(t);
	for (unsigned int i = 0; i < c->nb_in; i++)
		t->segments[i] = (struct gpu_segment){ .addr = dev_addr_of(dev, pkt + in_at[i], c->in_bytes[i]),
						       .offset = 0, .len = (uint32_t)c->in_bytes[i], .tensor = i };
	t->segments[c->nb_in] = (struct gpu_segment){ .addr = dev_addr_of(dev, pkt + out_at, c->out_bytes),
						      .len = (uint32_t)c->out_bytes, .tensor = 0 };
	t->nb_gather = c->nb_in;
	t->nb_scatter = 1;
	t->generation = 1;
	t->fault = 0;
	CU_ASSERT_EQUAL(g_ops->instance_launch(inst, 0, 0, err, sizeof(err)), 0);
	CU_ASSERT_FALSE(gpu_word_reached(g_ops->instance_word(inst, 0, 0), 1)); /* queued, not run */
	CU_ASSERT_EQUAL(gpu_fake_complete_all(dev), 1);
	CU_ASSERT_TRUE(gpu_word_reached(g_ops->instance_word(inst, 0, 0), 1));
	memcpy(out, pkt + out_at, c->out_bytes);
	for (size_t i = 0; i < CANARY_BYTES; i++)
		bad += (pkt[out_at - 1 - i] != CANARY) + (pkt[out_at + c->out_bytes + i] != CANARY);
	CU_ASSERT_EQUAL(bad, 0);
	CU_ASSERT_EQUAL(g_ops->health(dev, err, sizeof(err)), 0);
	fault = t->fault;
	if (fault_op != NULL)
		*fault_op = t->fault_op;

	g_ops->instance_destroy(inst);
	g_ops->program_unload(loaded);
	g_ops->stream_destroy(stream);
	CU_ASSERT_EQUAL(g_ops->host_unregister(dev, pkt, err, sizeof(err)), 0);
	g_ops->dev_close(dev);
	free(pkt);
	return fault;
}

/* ---- comparing ------------------------------------------------------------------------------------------ */

/* Bit for bit (NaN payloads included: both sides compute them with the same expression). */
static void expect_bits(const char *what, const void *got, const void *want, size_t bytes)
{
	int rc = memcmp(got, want, bytes);

	if (rc != 0) {
		for (size_t i = 0; i < bytes; i++) {
			if (((const uint8_t *)got)[i] != ((const uint8_t *)want)[i]) {
				fprintf(stderr, "\n    %s: first difference at byte %zu\n", what, i);
				break;
			}
		}
	}
	CU_ASSERT_EQUAL(rc, 0);
}

static void expect_close(const char *what, const float *got, const float *want, size_t n)
{
	size_t bad = 0;

	for (size_t i = 0; i < n; i++) {
		double w = want[i], d = fabs((double)got[i] - w), lim = REL_TOL * fmax(fabs(w), 1.0);

		if (!(d <= lim) && !(isnan(got[i]) && isnan(want[i]))) {
			if (bad++ == 0)
				fprintf(stderr, "\n    %s: element %zu: %.9g, CPU %.9g\n", what, i, (double)got[i], w);
		}
	}
	CU_ASSERT_EQUAL(bad, 0);
}

/* ---- a. each op code against the CPU kernels ------------------------------------------------------------ */

#define U_ELEMS 24
static const int64_t g_u_dims[3] = { 2, 3, 4 };

struct unary_case {
	const char *onnx;
	uint32_t fn;
	float scale, offset;
};

static void test_unary(void)
{
	/*
	 * All exact: the (unoptimized) CPU kernels compute each element with elementwise_math.h's float
	 * expression and the same libm calls (test_hd_math checks those expressions). On CUDA the libm
	 * calls are CUDA's, which differ in the last ulps: that is not what this test proves.
	 */
	static const struct unary_case cases[] = {
		{ "Relu", GPU_UNARY_RELU, 2, 0 },     { "LeakyRelu", GPU_UNARY_LEAKY_RELU, 2, 0 },
		{ "Clip", GPU_UNARY_CLIP, 2, 0 },     { "Sigmoid", GPU_UNARY_SIGMOID, 4, 0 },
		{ "Tanh", GPU_UNARY_TANH, 3, 0 },     { "Erf", GPU_UNARY_ERF, 2, 0 },
		{ "Exp", GPU_UNARY_EXP, 3, 0 },       { "Sqrt", GPU_UNARY_SQRT, 2, 2 },
		{ "Neg", GPU_UNARY_NEG, 2, 0 },       { "Abs", GPU_UNARY_ABS, 2, 0 },
	};

	for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
		const struct unary_case *uc = &cases[k];
		float x[U_ELEMS], want[U_ELEMS], got[U_ELEMS];
		const void *ins[1] = { x };
		Onnx__ModelProto *m = model_new();
		Onnx__NodeProto *n;
		struct dev_case c = { .nb_in = 1, .in = { x }, .in_bytes = { sizeof(x) }, .out_bytes = sizeof(got) };
		struct gpu_op op;

		fill_rnd(x, U_ELEMS, uc->scale, uc->offset);
		in_f32(m, "x", 3, g_u_dims);
		out_any(m, "y", BW_DTYPE_FLOAT);
		if (uc->fn == GPU_UNARY_CLIP) {
			init_f32_scalar(m, "lo", -0.5f);
			init_f32_scalar(m, "hi", 0.7f);
			onnx_build_node(m, NULL, uc->onnx, "x,lo,hi", "y");
		} else {
			n = onnx_build_node(m, NULL, uc->onnx, "x", "y");
			if (uc->fn == GPU_UNARY_LEAKY_RELU)
				onnx_build_attr_float(n, "alpha", 0.13f);
		}
		cpu_run(m, ins, 1, want, sizeof(want));

		case_layout(&c);
		memset(&op, 0, sizeof(op));
		op.code = GPU_OP_UNARY;
		op.fn = uc->fn;
		op.in[0] = arena_in(&c, 0, BW_DTYPE_FLOAT);
		op.out = arena_out(&c, BW_DTYPE_FLOAT);
		op.count = U_ELEMS;
		op.alpha = uc->fn == GPU_UNARY_CLIP ? -0.5f : 0.13f;
		op.beta = 0.7f;
		CU_ASSERT_EQUAL(dev_run(&c, &op, 1, got, NULL), GPU_FAULT_NONE);
		expect_bits(uc->onnx, got, want, sizeof(got));
	}
}

/* Numpy broadcasting: the element stride of an input of in_rank dims along each of the output's dims. */
static void bcast_strides(int out_rank, const int64_t *out_dims, int in_rank, const int64_t *in_dims, int64_t *strides)
{
	int64_t s = 1;

	for (int d = out_rank - 1; d >= 0; d--) {
		int id = d - (out_rank - in_rank);

		if (id < 0 || in_dims[id] == 1) {
			strides[d] = 0;
		} else {
			CU_ASSERT_EQUAL_FATAL(in_dims[id], out_dims[d]);
			strides[d] = s;
		}
		if (id >= 0)
			s *= in_dims[id];
	}
}

struct shape {
	int rank;
	int64_t dims[4];
};

static void test_binary(void)
{
	static const char *const names[GPU_BINARY_COUNT] = { "Add", "Sub", "Mul", "Div", "Pow", "Max", "Min" };
	/* a with b, broadcast both ways */
	static const struct shape pairs[][2] = {
		{ { 3, { 2, 3, 4 } }, { 1, { 4 } } },
		{ { 3, { 2, 3, 4 } }, { 2, { 3, 1 } } },
		{ { 3, { 2, 3, 4 } }, { 1, { 1 } } },
		{ { 2, { 3, 1 } }, { 3, { 2, 1, 4 } } },
		{ { 3, { 2, 3, 4 } }, { 3, { 2, 3, 4 } } },
	};
	const int64_t out_dims[3] = { 2, 3, 4 };

	for (uint32_t fn = 0; fn < GPU_BINARY_COUNT; fn++) {
		for (size_t p = 0; p < sizeof(pairs) / sizeof(pairs[0]); p++) {
			const struct shape *a = &pairs[p][0], *b = &pairs[p][1];
			int64_t na = elems_of(a->rank, a->dims), nb = elems_of(b->rank, b->dims);
			float xa[24], xb[24], want[24], got[24];
			const void *ins[2] = { xa, xb };
			Onnx__ModelProto *m = model_new();
			struct dev_case c = { .nb_in = 2, .in = { xa, xb },
					      .in_bytes = { (size_t)na * 4, (size_t)nb * 4 }, .out_bytes = sizeof(got) };
			struct gpu_op op;
			char what[64];

			/* Pow: positive bases (a negative one to a fraction is NaN on both sides: proves little) */
			fill_rnd(xa, (size_t)na, fn == GPU_BINARY_POW ? 1.0f : 2.0f, fn == GPU_BINARY_POW ? 1.5f : 0);
			fill_rnd(xb, (size_t)nb, 2.0f, 0);
			if (fn == GPU_BINARY_DIV)
				for (int64_t i = 0; i < nb; i++)
					xb[i] += xb[i] < 0 ? -0.25f : 0.25f;
			in_f32(m, "a", a->rank, a->dims);
			in_f32(m, "b", b->rank, b->dims);
			out_any(m, "y", BW_DTYPE_FLOAT);
			onnx_build_node(m, NULL, names[fn], "a,b", "y");
			cpu_run(m, ins, 2, want, sizeof(want));

			case_layout(&c);
			memset(&op, 0, sizeof(op));
			op.code = GPU_OP_BINARY;
			op.fn = fn;
			op.in[0] = arena_in(&c, 0, BW_DTYPE_FLOAT);
			op.in[1] = arena_in(&c, 1, BW_DTYPE_FLOAT);
			op.out = arena_out(&c, BW_DTYPE_FLOAT);
			op.count = 24;
			op.u.bcast.rank = 3;
			memcpy(op.u.bcast.dims, out_dims, sizeof(out_dims));
			bcast_strides(3, out_dims, a->rank, a->dims, op.u.bcast.strides[0]);
			bcast_strides(3, out_dims, b->rank, b->dims, op.u.bcast.strides[1]);
			CU_ASSERT_EQUAL(dev_run(&c, &op, 1, got, NULL), GPU_FAULT_NONE);
			/* exact: one IEEE operation per element on both sides (Pow: libm's powf on both) */
			snprintf(what, sizeof(what), "%s pair %zu", names[fn], p);
			expect_bits(what, got, want, sizeof(got));
		}
	}
}

static void test_where(void)
{
	const int64_t cd[3] = { 2, 3, 4 }, xd[1] = { 4 }, yd[2] = { 3, 1 };
	uint8_t cond[24];
	float x[4], y[3], want[24], got[24];
	const void *ins[3] = { cond, x, y };
	Onnx__ModelProto *m = model_new();
	struct dev_case c = { .nb_in = 3, .in = { cond, x, y }, .in_bytes = { sizeof(cond), sizeof(x), sizeof(y) },
			      .out_bytes = sizeof(got) };
	struct gpu_op op;

	for (int i = 0; i < 24; i++)
		cond[i] = rnd() > 0;
	fill_rnd(x, 4, 2, 0);
	fill_rnd(y, 3, 2, 0);
	onnx_build_input(m, "c", BW_DTYPE_BOOL, 3, cd);
	in_f32(m, "x", 1, xd);
	in_f32(m, "y", 2, yd);
	out_any(m, "z", BW_DTYPE_FLOAT);
	onnx_build_node(m, NULL, "Where", "c,x,y", "z");
	cpu_run(m, ins, 3, want, sizeof(want));

	case_layout(&c);
	memset(&op, 0, sizeof(op));
	op.code = GPU_OP_WHERE;
	op.in[0] = arena_in(&c, 0, BW_DTYPE_BOOL);
	op.in[1] = arena_in(&c, 1, BW_DTYPE_FLOAT);
	op.in[2] = arena_in(&c, 2, BW_DTYPE_FLOAT);
	op.out = arena_out(&c, BW_DTYPE_FLOAT);
	op.count = 24;
	op.u.bcast.rank = 3;
	memcpy(op.u.bcast.dims, cd, sizeof(cd));
	bcast_strides(3, cd, 3, cd, op.u.bcast.strides[0]);
	bcast_strides(3, cd, 1, xd, op.u.bcast.strides[1]);
	bcast_strides(3, cd, 2, yd, op.u.bcast.strides[2]);
	CU_ASSERT_EQUAL(dev_run(&c, &op, 1, got, NULL), GPU_FAULT_NONE);
	expect_bits("Where", got, want, sizeof(got)); /* a selection: no arithmetic */
}

static void cast_case(const char *what, uint32_t from, uint32_t to, const void *x, size_t n)
{
	const int64_t dims[1] = { (int64_t)n };
	const void *ins[1] = { x };
	size_t from_b = rt_dtype_size((uint8_t)from), to_b = rt_dtype_size((uint8_t)to);
	uint8_t want[64 * 8], got[64 * 8];
	Onnx__ModelProto *m = model_new();
	Onnx__NodeProto *node;
	struct dev_case c = { .nb_in = 1, .in = { x }, .in_bytes = { n * from_b }, .out_bytes = n * to_b };
	struct gpu_op op;

	CU_ASSERT_FATAL(n <= 64);
	onnx_build_input(m, "x", (int32_t)from, 1, dims);
	out_any(m, "y", (int32_t)to);
	node = onnx_build_node(m, NULL, "Cast", "x", "y");
	onnx_build_attr_int(node, "to", to);
	cpu_run(m, ins, 1, want, n * to_b);

	case_layout(&c);
	memset(&op, 0, sizeof(op));
	op.code = GPU_OP_CAST;
	op.in[0] = arena_in(&c, 0, from);
	op.out = arena_out(&c, to);
	op.count = n;
	op.u.cast.from = from;
	op.u.cast.to = to;
	CU_ASSERT_EQUAL(dev_run(&c, &op, 1, got, NULL), GPU_FAULT_NONE);
	expect_bits(what, got, want, n * to_b); /* one conversion per element, through double on both sides */
}

static void test_cast(void)
{
	int64_t i64[32];
	float f[32];
	uint8_t b[32];

	for (int i = 0; i < 32; i++) {
		/* small, negative, and past 2^24 (where float rounds) */
		i64[i] = (int64_t)(rnd() * 1000.0f) * (i % 4 == 0 ? 100003 : 1) - (i == 5 ? (1ll << 40) + 1 : 0);
		f[i] = rnd() * 300.0f;
		b[i] = rnd() > 0;
	}
	cast_case("Cast int64 -> float", BW_DTYPE_INT64, BW_DTYPE_FLOAT, i64, 32);
	cast_case("Cast float -> int64", BW_DTYPE_FLOAT, BW_DTYPE_INT64, f, 32);
	cast_case("Cast bool -> float", BW_DTYPE_BOOL, BW_DTYPE_FLOAT, b, 32);
}

static void transpose_case(const int64_t *perm, uint32_t dtype)
{
	const int64_t dims[4] = { 2, 3, 4, 5 };
	int64_t in_strides[4] = { 60, 20, 5, 1 };
	uint8_t x[120 * 8], want[120 * 8], got[120 * 8];
	size_t eb = rt_dtype_size((uint8_t)dtype);
	const void *ins[1] = { x };
	Onnx__ModelProto *m = model_new();
	Onnx__NodeProto *node;
	struct dev_case c = { .nb_in = 1, .in = { x }, .in_bytes = { 120 * eb }, .out_bytes = 120 * eb };
	struct gpu_op op;
	char what[64];

	for (int i = 0; i < 120; i++) {
		if (dtype == BW_DTYPE_FLOAT)
			((float *)x)[i] = rnd();
		else
			((int64_t *)x)[i] = (int64_t)(rnd() * 1e6) * (1ll << 20);
	}
	onnx_build_input(m, "x", (int32_t)dtype, 4, dims);
	out_any(m, "y", (int32_t)dtype);
	node = onnx_build_node(m, NULL, "Transpose", "x", "y");
	onnx_build_attr_ints(node, "perm", perm, 4);
	cpu_run(m, ins, 1, want, 120 * eb);

	case_layout(&c);
	memset(&op, 0, sizeof(op));
	op.code = GPU_OP_PERMUTE;
	op.in[0] = arena_in(&c, 0, dtype);
	op.out = arena_out(&c, dtype);
	op.count = 120;
	op.u.bcast.rank = 4;
	for (int d = 0; d < 4; d++) {
		op.u.bcast.dims[d] = dims[perm[d]];
		op.u.bcast.strides[0][d] = in_strides[perm[d]];
	}
	CU_ASSERT_EQUAL(dev_run(&c, &op, 1, got, NULL), GPU_FAULT_NONE);
	snprintf(what, sizeof(what), "Transpose %lld%lld%lld%lld dtype %u", (long long)perm[0], (long long)perm[1],
		 (long long)perm[2], (long long)perm[3], dtype);
	expect_bits(what, got, want, 120 * eb); /* moves bytes */
}

static void test_transpose(void)
{
	static const int64_t p0213[4] = { 0, 2, 1, 3 }, p0231[4] = { 0, 2, 3, 1 };

	transpose_case(p0213, BW_DTYPE_FLOAT);
	transpose_case(p0231, BW_DTYPE_FLOAT);
	transpose_case(p0231, BW_DTYPE_INT64); /* the 8-byte path */
}

static void test_gather(void)
{
	const int64_t dd[3] = { 5, 3, 4 }, id[2] = { 2, 2 };
	const int64_t idx[4] = { 0, -1, 3, -5 };
	float data[60], want[48], got[48];
	const void *ins[2] = { data, idx };
	Onnx__ModelProto *m = model_new();
	Onnx__NodeProto *node;
	struct dev_case c = { .nb_in = 2, .in = { data, idx }, .in_bytes = { sizeof(data), sizeof(idx) },
			      .out_bytes = sizeof(got) };
	struct gpu_op op;

	fill_rnd(data, 60, 2, 0);
	in_f32(m, "d", 3, dd);
	onnx_build_input(m, "i", BW_DTYPE_INT64, 2, id);
	out_any(m, "y", BW_DTYPE_FLOAT);
	node = onnx_build_node(m, NULL, "Gather", "d,i", "y");
	onnx_build_attr_int(node, "axis", 0);
	cpu_run(m, ins, 2, want, sizeof(want));

	case_layout(&c);
	memset(&op, 0, sizeof(op));
	op.code = GPU_OP_GATHER;
	op.in[0] = arena_in(&c, 0, BW_DTYPE_FLOAT);
	op.in[1] = arena_in(&c, 1, BW_DTYPE_INT64);
	op.out = arena_out(&c, BW_DTYPE_FLOAT);
	op.count = 48;
	op.u.gather.outer = 1;
	op.u.gather.axis_len = 5;
	op.u.gather.nb_idx = 4;
	op.u.gather.inner = 12;
	op.u.gather.elem_bytes = 4;
	CU_ASSERT_EQUAL(dev_run(&c, &op, 1, got, NULL), GPU_FAULT_NONE);
	expect_bits("Gather axis 0", got, want, sizeof(got));
}

static void test_softmax(void)
{
	const int64_t dims[3] = { 2, 3, 8 };
	float x[48], want[48], got[48];
	const void *ins[1] = { x };
	Onnx__ModelProto *m = model_new();
	struct dev_case c = { .nb_in = 1, .in = { x }, .in_bytes = { sizeof(x) }, .out_bytes = sizeof(got) };
	struct gpu_op op;

	fill_rnd(x, 48, 4, 0);
	in_f32(m, "x", 3, dims);
	out_any(m, "y", BW_DTYPE_FLOAT);
	onnx_build_attr_int(onnx_build_node(m, NULL, "Softmax", "x", "y"), "axis", -1);
	cpu_run(m, ins, 1, want, sizeof(want));

	case_layout(&c);
	memset(&op, 0, sizeof(op));
	op.code = GPU_OP_SOFTMAX;
	op.in[0] = arena_in(&c, 0, BW_DTYPE_FLOAT);
	op.out = arena_out(&c, BW_DTYPE_FLOAT);
	op.count = 48;
	op.u.rows.rows = 6;
	op.u.rows.cols = 8;
	CU_ASSERT_EQUAL(dev_run(&c, &op, 1, got, NULL), GPU_FAULT_NONE);
	/* the CPU's exp and sum are double, then times 1/sum; the device's expf, a float sum, a division */
	expect_close("Softmax", got, want, 48);
}

/* Scale and bias in the constants, as a compiler puts weights. */
static void layernorm_case(bool with_bias)
{
	const int64_t dims[3] = { 2, 3, 8 }, pd[1] = { 8 };
	float x[48], consts[128], want[48], got[48];
	const float *scale = consts, *bias = consts + 64; /* bias at byte 256: GPU_PROG_ALIGN */
	const void *ins[3] = { x, scale, bias };
	Onnx__ModelProto *m = model_new();
	struct dev_case c = { .nb_in = 1, .in = { x }, .in_bytes = { sizeof(x) }, .out_bytes = sizeof(got),
			      .consts = consts, .const_bytes = sizeof(consts) };
	struct gpu_op op;

	memset(consts, 0, sizeof(consts));
	fill_rnd(x, 48, 3, 0.5f);
	fill_rnd(consts, 8, 1, 1);
	fill_rnd(consts + 64, 8, 1, 0);
	in_f32(m, "x", 3, dims);
	in_f32(m, "s", 1, pd);
	if (with_bias)
		in_f32(m, "b", 1, pd);
	out_any(m, "y", BW_DTYPE_FLOAT);
	onnx_build_attr_int(onnx_build_node(m, NULL, "LayerNormalization", with_bias ? "x,s,b" : "x,s", "y"), "axis",
			    -1);
	cpu_run(m, ins, with_bias ? 3 : 2, want, sizeof(want));

	case_layout(&c);
	memset(&op, 0, sizeof(op));
	op.code = GPU_OP_LAYERNORM;
	op.in[0] = arena_in(&c, 0, BW_DTYPE_FLOAT);
	op.in[1] = const_ref(0, BW_DTYPE_FLOAT);
	if (with_bias)
		op.in[2] = const_ref(256, BW_DTYPE_FLOAT);
	op.out = arena_out(&c, BW_DTYPE_FLOAT);
	op.count = 48;
	op.alpha = 1e-5f; /* ONNX's default epsilon */
	op.u.rows.rows = 6;
	op.u.rows.cols = 8;
	CU_ASSERT_EQUAL(dev_run(&c, &op, 1, got, NULL), GPU_FAULT_NONE);
	/* the CPU's mean, variance and scaling are double, the device's float: REL_TOL */
	expect_close(with_bias ? "LayerNormalization with bias" : "LayerNormalization", got, want, 48);
}

static void test_layernorm(void)
{
	layernorm_case(true);
	layernorm_case(false);
}

static void reduce_case(const char *onnx, uint32_t fn, int keepdims)
{
	static const int64_t axes[1] = { 1 };
	const int64_t dims[3] = { 2, 3, 4 };
	float x[24], want[8], got[8];
	const void *ins[1] = { x };
	Onnx__ModelProto *m = model_new();
	Onnx__NodeProto *node;
	struct dev_case c = { .nb_in = 1, .in = { x }, .in_bytes = { sizeof(x) }, .out_bytes = sizeof(got) };
	struct gpu_op op;
	char what[64];

	fill_rnd(x, 24, 2, 0);
	in_f32(m, "x", 3, dims);
	out_any(m, "y", BW_DTYPE_FLOAT);
	if (fn == GPU_REDUCE_SUM) { /* opset 13: axes an input */
		init_i64(m, "axes", axes, 1);
		node = onnx_build_node(m, NULL, onnx, "x,axes", "y");
	} else {                    /* ReduceMean until opset 18: an attribute */
		node = onnx_build_node(m, NULL, onnx, "x", "y");
		onnx_build_attr_ints(node, "axes", axes, 1);
	}
	onnx_build_attr_int(node, "keepdims", keepdims);
	cpu_run(m, ins, 1, want, sizeof(want));

	case_layout(&c);
	memset(&op, 0, sizeof(op));
	op.code = GPU_OP_REDUCE;
	op.fn = fn;
	op.in[0] = arena_in(&c, 0, BW_DTYPE_FLOAT);
	op.out = arena_out(&c, BW_DTYPE_FLOAT);
	op.count = 8;
	op.u.reduce.outer = 2;
	op.u.reduce.reduced = 3;
	op.u.reduce.inner = 4;
	CU_ASSERT_EQUAL(dev_run(&c, &op, 1, got, NULL), GPU_FAULT_NONE);
	snprintf(what, sizeof(what), "%s keepdims %d", onnx, keepdims);
	expect_bits(what, got, want, sizeof(got)); /* a float sum in the same order, one division */
}

static void test_reduce(void)
{
	reduce_case("ReduceSum", GPU_REDUCE_SUM, 0);
	reduce_case("ReduceSum", GPU_REDUCE_SUM, 1);
	reduce_case("ReduceMean", GPU_REDUCE_MEAN, 0);
	reduce_case("ReduceMean", GPU_REDUCE_MEAN, 1);
}

/* MatMul a x b; b_const: B in the constants (weights). */
static void matmul_case(const char *what, const struct shape *a, const struct shape *b, int64_t batch, int64_t mm,
			int64_t k, int64_t n, int64_t stride_a, int64_t stride_b, bool b_const)
{
	int64_t na = elems_of(a->rank, a->dims), nb = elems_of(b->rank, b->dims), no = batch * mm * n;
	float xa[256], xb[256], want[256], got[256];
	const void *ins[2] = { xa, xb };
	Onnx__ModelProto *m = model_new();
	struct dev_case c = { .nb_in = b_const ? 1 : 2, .in = { xa, xb },
			      .in_bytes = { (size_t)na * 4, (size_t)nb * 4 }, .out_bytes = (size_t)no * 4 };
	struct gpu_op op;

	CU_ASSERT_FATAL(na <= 256 && nb <= 256 && no <= 256);
	if (b_const) {
		c.consts = xb;
		c.const_bytes = (size_t)nb * 4;
	}
	fill_rnd(xa, (size_t)na, 2, 0);
	fill_rnd(xb, (size_t)nb, 2, 0);
	in_f32(m, "a", a->rank, a->dims);
	in_f32(m, "b", b->rank, b->dims);
	out_any(m, "y", BW_DTYPE_FLOAT);
	onnx_build_node(m, NULL, "MatMul", "a,b", "y");
	cpu_run(m, ins, 2, want, (size_t)no * 4);

	case_layout(&c);
	memset(&op, 0, sizeof(op));
	op.code = GPU_OP_GEMM;
	op.fn = GPU_ACT_NONE;
	op.in[0] = arena_in(&c, 0, BW_DTYPE_FLOAT);
	op.in[1] = b_const ? const_ref(0, BW_DTYPE_FLOAT) : arena_in(&c, 1, BW_DTYPE_FLOAT);
	op.out = arena_out(&c, BW_DTYPE_FLOAT);
	op.count = (uint64_t)no;
	op.alpha = 1.0f;
	op.u.gemm = (typeof(op.u.gemm)){ .batch = batch, .m = mm, .n = n, .k = k, .stride_a = stride_a,
					 .stride_b = stride_b, .stride_c = mm * n };
	CU_ASSERT_EQUAL(dev_run(&c, &op, 1, got, NULL), GPU_FAULT_NONE);
	expect_close(what, got, want, (size_t)no); /* BLAS blocks and fuses multiply-adds: REL_TOL */
}

static void test_matmul(void)
{
	static const struct shape a2 = { 2, { 3, 4 } }, b2 = { 2, { 4, 5 } };
	static const struct shape a4 = { 4, { 2, 3, 4, 5 } }, b4 = { 4, { 2, 3, 5, 6 } };
	static const struct shape a3 = { 3, { 2, 3, 4 } };

	matmul_case("MatMul [3,4]x[4,5]", &a2, &b2, 1, 3, 4, 5, 12, 20, false);
	matmul_case("MatMul [2,3,4,5]x[2,3,5,6]", &a4, &b4, 6, 4, 5, 6, 20, 30, false);
	matmul_case("MatMul [2,3,4]x[4,5] (weights in constants)", &a3, &b2, 2, 3, 4, 5, 12, 0, true);
}

static void gemm_case(bool trans_a, bool relu_after)
{
	const int64_t ad[2] = { trans_a ? 4 : 3, trans_a ? 3 : 4 }, bd[2] = { 5, 4 }, cd[1] = { 5 };
	float xa[12], xb[20], bias[5], want[15], got[15];
	const void *ins[3] = { xa, xb, bias };
	Onnx__ModelProto *m = model_new();
	Onnx__NodeProto *node;
	struct dev_case c = { .nb_in = 3, .in = { xa, xb, bias }, .in_bytes = { sizeof(xa), sizeof(xb), sizeof(bias) },
			      .out_bytes = sizeof(got) };
	struct gpu_op op;

	fill_rnd(xa, 12, 2, 0);
	fill_rnd(xb, 20, 2, 0);
	fill_rnd(bias, 5, 2, 0);
	in_f32(m, "a", 2, ad);
	in_f32(m, "b", 2, bd);
	in_f32(m, "c", 1, cd);
	out_any(m, "y", BW_DTYPE_FLOAT);
	node = onnx_build_node(m, NULL, "Gemm", "a,b,c", relu_after ? "g" : "y");
	onnx_build_attr_int(node, "transB", 1);
	if (trans_a)
		onnx_build_attr_int(node, "transA", 1);
	onnx_build_attr_float(node, "alpha", 0.5f);
	if (relu_after)
		onnx_build_node(m, NULL, "Relu", "g", "y");
	cpu_run(m, ins, 3, want, sizeof(want));

	case_layout(&c);
	memset(&op, 0, sizeof(op));
	op.code = GPU_OP_GEMM;
	op.fn = relu_after ? GPU_ACT_RELU : GPU_ACT_NONE;
	op.in[0] = arena_in(&c, 0, BW_DTYPE_FLOAT);
	op.in[1] = arena_in(&c, 1, BW_DTYPE_FLOAT);
	op.in[2] = arena_in(&c, 2, BW_DTYPE_FLOAT);
	op.out = arena_out(&c, BW_DTYPE_FLOAT);
	op.count = 15;
	op.alpha = 0.5f;
	op.u.gemm = (typeof(op.u.gemm)){ .batch = 1, .m = 3, .n = 5, .k = 4, .stride_a = 12, .stride_b = 20,
					 .stride_c = 15, .trans_a = trans_a, .trans_b = 1 };
	CU_ASSERT_EQUAL(dev_run(&c, &op, 1, got, NULL), GPU_FAULT_NONE);
	expect_close(trans_a ? "Gemm transA transB bias" : relu_after ? "Gemm transB bias + Relu" : "Gemm transB bias",
		     got, want, 15);
}

static void test_gemm(void)
{
	gemm_case(false, false);
	gemm_case(true, false);
	gemm_case(false, true); /* GPU_ACT_RELU: Gemm then Relu on the CPU */
}

/*
 * Conv, grouped, strided, padded and dilated: x [2,4,7,6], w [6,2,3,3], group 2, strides (2,1), pads
 * 1, dilations (2,1) -> y [2,6,3,6]; with a bias, and (fused) a residual and Relu after it.
 */
static void conv_case(bool fused)
{
	static const int64_t xd[4] = { 2, 4, 7, 6 }, wd[4] = { 6, 2, 3, 3 }, bd[1] = { 6 }, yd[4] = { 2, 6, 3, 6 };
	static const int64_t strides[2] = { 2, 1 }, pads[4] = { 1, 1, 1, 1 }, dil[2] = { 2, 1 };
	static float x[2 * 4 * 7 * 6], w[6 * 2 * 9], bias[6], z[2 * 6 * 3 * 6], want[2 * 6 * 3 * 6], got[2 * 6 * 3 * 6];
	const void *ins[4] = { x, w, bias, z };
	Onnx__ModelProto *m = model_new();
	Onnx__NodeProto *node;
	struct dev_case c = { .nb_in = fused ? 4 : 3, .in = { x, w, bias, z },
			      .in_bytes = { sizeof(x), sizeof(w), sizeof(bias), sizeof(z) }, .out_bytes = sizeof(got) };
	struct gpu_op op;

	fill_rnd(x, DIM(x), 2, 0);
	fill_rnd(w, DIM(w), 1, 0);
	fill_rnd(bias, DIM(bias), 1, 0);
	fill_rnd(z, DIM(z), 2, 0);
	in_f32(m, "x", 4, xd);
	in_f32(m, "w", 4, wd);
	in_f32(m, "b", 1, bd);
	if (fused)
		in_f32(m, "z", 4, yd);
	out_any(m, "y", BW_DTYPE_FLOAT);
	node = onnx_build_node(m, NULL, "Conv", "x,w,b", fused ? "c" : "y");
	onnx_build_attr_int(node, "group", 2);
	onnx_build_attr_ints(node, "strides", strides, 2);
	onnx_build_attr_ints(node, "pads", pads, 4);
	onnx_build_attr_ints(node, "dilations", dil, 2);
	if (fused) {
		onnx_build_node(m, NULL, "Add", "c,z", "s");
		onnx_build_node(m, NULL, "Relu", "s", "y");
	}
	cpu_run(m, ins, c.nb_in, want, sizeof(want));

	case_layout(&c);
	memset(&op, 0, sizeof(op));
	op.code = GPU_OP_CONV;
	op.fn = fused ? GPU_ACT_RELU : GPU_ACT_NONE;
	for (unsigned int i = 0; i < c.nb_in; i++)
		op.in[i] = arena_in(&c, i, BW_DTYPE_FLOAT);
	op.out = arena_out(&c, BW_DTYPE_FLOAT);
	op.count = DIM(got);
	op.u.conv = (typeof(op.u.conv)){ .n = 2, .c = 4, .h = 7, .w = 6, .m = 6, .oh = 3, .ow = 6, .kh = 3, .kw = 3,
					 .stride_h = 2, .stride_w = 1, .pad_h = 1, .pad_w = 1, .dil_h = 2, .dil_w = 1,
					 .group = 2 };
	CU_ASSERT_EQUAL(dev_run(&c, &op, 1, got, NULL), GPU_FAULT_NONE);
	expect_close(fused ? "Conv (grouped, strided, dilated) + Add + Relu" : "Conv (grouped, strided, dilated)", got,
		     want, DIM(got));
}

static void test_conv(void)
{
	conv_case(false);
	conv_case(true);
}

/* MaxPool and AveragePool (3x3, stride 2, pads 1; with and without the padding counted) on
 * x [2,3,7,7] -> [2,3,4,4], and GlobalAveragePool -> [2,3,1,1]. */
static void pool_case(const char *onnx, uint32_t fn, int count_include_pad)
{
	static const int64_t xd[4] = { 2, 3, 7, 7 }, k[2] = { 3, 3 }, strides[2] = { 2, 2 }, pads[4] = { 1, 1, 1, 1 };
	static float x[2 * 3 * 7 * 7], want[2 * 3 * 4 * 4], got[2 * 3 * 4 * 4];
	bool global = strcmp(onnx, "GlobalAveragePool") == 0;
	size_t n = global ? 6 : DIM(got);
	const void *ins[1] = { x };
	Onnx__ModelProto *m = model_new();
	Onnx__NodeProto *node;
	struct dev_case c = { .nb_in = 1, .in = { x }, .in_bytes = { sizeof(x) }, .out_bytes = n * sizeof(float) };
	struct gpu_op op;
	char what[64];

	fill_rnd(x, DIM(x), 2, 0);
	in_f32(m, "x", 4, xd);
	out_any(m, "y", BW_DTYPE_FLOAT);
	node = onnx_build_node(m, NULL, onnx, "x", "y");
	if (!global) {
		onnx_build_attr_ints(node, "kernel_shape", k, 2);
		onnx_build_attr_ints(node, "strides", strides, 2);
		onnx_build_attr_ints(node, "pads", pads, 4);
		if (count_include_pad)
			onnx_build_attr_int(node, "count_include_pad", 1);
	}
	cpu_run(m, ins, 1, want, n * sizeof(float));

	case_layout(&c);
	memset(&op, 0, sizeof(op));
	op.code = GPU_OP_POOL;
	op.fn = fn;
	op.in[0] = arena_in(&c, 0, BW_DTYPE_FLOAT);
	op.out = arena_out(&c, BW_DTYPE_FLOAT);
	op.count = n;
	if (global)
		op.u.conv = (typeof(op.u.conv)){ .n = 2, .c = 3, .h = 7, .w = 7, .m = 3, .oh = 1, .ow = 1, .kh = 7, .kw = 7,
						 .stride_h = 1, .stride_w = 1, .dil_h = 1, .dil_w = 1, .group = 3 };
	else
		op.u.conv = (typeof(op.u.conv)){ .n = 2, .c = 3, .h = 7, .w = 7, .m = 3, .oh = 4, .ow = 4, .kh = 3, .kw = 3,
						 .stride_h = 2, .stride_w = 2, .pad_h = 1, .pad_w = 1, .dil_h = 1,
						 .dil_w = 1, .group = 3, .count_include_pad = (uint32_t)count_include_pad };
	CU_ASSERT_EQUAL(dev_run(&c, &op, 1, got, NULL), GPU_FAULT_NONE);
	snprintf(what, sizeof(what), "%s%s", onnx, count_include_pad ? " count_include_pad" : "");
	if (fn == GPU_POOL_MAX)
		expect_bits(what, got, want, n * sizeof(float)); /* a max is exact */
	else
		expect_close(what, got, want, n);
}

static void test_pool(void)
{
	pool_case("MaxPool", GPU_POOL_MAX, 0);
	pool_case("AveragePool", GPU_POOL_AVG, 0);
	pool_case("AveragePool", GPU_POOL_AVG, 1);
	pool_case("GlobalAveragePool", GPU_POOL_AVG, 0);
}

static void test_copy(void)
{
	/* COPY has no ONNX node of its own here (Reshape & co. become it): whole words, then odd bytes */
	static const size_t lens[2] = { 96, 23 };

	for (int k = 0; k < 2; k++) {
		uint8_t x[96], got[96];
		struct dev_case c = { .nb_in = 1, .in = { x }, .in_bytes = { lens[k] }, .out_bytes = lens[k] };
		struct gpu_op op;

		for (size_t i = 0; i < lens[k]; i++)
			x[i] = (uint8_t)(i * 37 + 11);
		case_layout(&c);
		memset(&op, 0, sizeof(op));
		op.code = GPU_OP_COPY;
		op.in[0] = arena_in(&c, 0, BW_DTYPE_UINT8);
		op.out = arena_out(&c, BW_DTYPE_UINT8);
		op.count = lens[k];
		CU_ASSERT_EQUAL(dev_run(&c, &op, 1, got, NULL), GPU_FAULT_NONE);
		expect_bits("Copy", got, x, lens[k]);
	}
}

/* ---- a'. float16 operands ---------------------------------------------------------------------------- */

/* Half <-> float by bits: every half widens exactly and narrows back to itself; narrowing agrees with the
 * compiler's own _Float16 conversion (round to nearest even) on edge cases and random bit patterns. */
static void test_half_conversion(void)
{
	static const uint32_t edges[] = { 0x00000000u, 0x80000000u, 0x3f800000u, 0x477fe000u, 0x477fefffu,
					  0x477ff000u, 0x477ff001u, 0x7f800000u, 0xff800000u, 0x38800000u,
					  0x387fffffu, 0x33000000u, 0x33000001u, 0x32ffffffu, 0x33c00000u,
					  0x34200000u, 0x3f801000u, 0x3f803000u, 0x3f801001u, 0x00000001u };
	uint32_t bad = 0;

	for (uint32_t h = 0; h < 0x10000u; h++) {
		float f = bw_half_to_float((uint16_t)h);

		if (isnan(f))
			bad += (h & 0x7c00u) != 0x7c00u || (h & 0x3ffu) == 0 || !isnan(bw_half_to_float(bw_float_to_half(f)));
		else
			bad += bw_float_to_half(f) != h;
	}
	CU_ASSERT_EQUAL(bad, 0);
#ifdef __FLT16_MAX__
	for (uint32_t i = 0; i < DIM(edges) + 200000u; i++) {
		uint32_t bits = i < DIM(edges) ? edges[i] : (uint32_t)(rnd() * 2147483648.0f) ^ (i << 20);
		float f;
		_Float16 want;
		uint16_t want_bits;

		memcpy(&f, &bits, sizeof(f));
		if (isnan(f))
			continue;
		want = (_Float16)f;
		memcpy(&want_bits, &want, sizeof(want_bits));
		if (bw_float_to_half(f) != want_bits && bad++ == 0)
			fprintf(stderr, "\n    %#x: %#x, _Float16 %#x\n", bits, bw_float_to_half(f), want_bits);
	}
	CU_ASSERT_EQUAL(bad, 0);
#else
	(void)edges;
#endif
}

#define H_IN0 64  /* [1][4][4][4] for CONV and POOL; [4][16] rows; A [4][16] */
#define H_IN1 128 /* weights, B [16][4], LayerNormalization's scale */

/* One op of each float kind over in0 (H_IN0 values) and in1 (H_IN1), its operands of dtype dt. */
static struct gpu_op half_case_op(const struct dev_case *c, int kind, uint32_t dt)
{
	struct gpu_op op;

	memset(&op, 0, sizeof(op));
	op.in[0] = arena_in(c, 0, dt);
	op.in[1] = arena_in(c, 1, dt);
	op.out = arena_out(c, dt);
	switch (kind) {
	case 0:
		op.code = GPU_OP_UNARY, op.fn = GPU_UNARY_GELU, op.count = H_IN0;
		op.in[1].space = GPU_SPACE_NONE;
		break;
	case 1:
		op.code = GPU_OP_BINARY, op.fn = GPU_BINARY_MUL, op.count = H_IN0;
		op.u.bcast.rank = 1, op.u.bcast.dims[0] = H_IN0, op.u.bcast.strides[0][0] = 1, op.u.bcast.strides[1][0] = 2;
		break;
	case 2:
		op.code = GPU_OP_SOFTMAX, op.count = H_IN0, op.u.rows.rows = 4, op.u.rows.cols = 16;
		op.in[1].space = GPU_SPACE_NONE;
		break;
	case 3:
		op.code = GPU_OP_LAYERNORM, op.count = H_IN0, op.u.rows.rows = 4, op.u.rows.cols = 16, op.alpha = 1e-5f;
		break;
	case 4:
		op.code = GPU_OP_REDUCE, op.fn = GPU_REDUCE_MEAN, op.count = 4;
		op.u.reduce.outer = 4, op.u.reduce.reduced = 16, op.u.reduce.inner = 1;
		op.in[1].space = GPU_SPACE_NONE;
		break;
	case 5:
		op.code = GPU_OP_GEMM, op.fn = GPU_ACT_RELU, op.count = 16, op.alpha = 1.0f;
		op.u.gemm = (typeof(op.u.gemm)){ .batch = 1, .m = 4, .n = 4, .k = 16, .stride_c = 16 };
		break;
	case 6:
		op.code = GPU_OP_CONV, op.fn = GPU_ACT_RELU, op.count = 32;
		op.u.conv = (typeof(op.u.conv)){ .n = 1, .c = 4, .h = 4, .w = 4, .m = 2, .oh = 4, .ow = 4, .kh = 3,
						 .kw = 3, .stride_h = 1, .stride_w = 1, .pad_h = 1, .pad_w = 1,
						 .dil_h = 1, .dil_w = 1, .group = 1 };
		break;
	default:
		op.code = GPU_OP_POOL, op.fn = GPU_POOL_AVG, op.count = 16;
		op.u.conv = (typeof(op.u.conv)){ .n = 1, .c = 4, .h = 4, .w = 4, .m = 4, .oh = 2, .ow = 2, .kh = 2,
						 .kw = 2, .stride_h = 2, .stride_w = 2, .dil_h = 1, .dil_w = 1, .group = 4 };
		op.in[1].space = GPU_SPACE_NONE;
		break;
	}
	return op;
}

/*
 * Each float op kind with float16 operands against itself with float32 operands holding the same
 * (half-exact) values: items compute in float and round once when they store, so the float16 result
 * is the float32 result rounded, bit for bit.
 */
static void test_half_ops(void)
{
	static const char *const names[] = { "Gelu", "Mul", "Softmax", "LayerNormalization", "ReduceMean", "Gemm+Relu",
					     "Conv+Relu", "AveragePool" };
	float x[H_IN0], w[H_IN1], got32[H_IN0];
	uint16_t xh[H_IN0], wh[H_IN1], got16[H_IN0];

	fill_rnd(x, H_IN0, 2.0f, 0.0f);
	fill_rnd(w, H_IN1, 0.5f, 0.1f);
	for (int i = 0; i < H_IN0; i++)
		x[i] = bw_half_to_float(xh[i] = bw_float_to_half(x[i]));
	for (int i = 0; i < H_IN1; i++)
		w[i] = bw_half_to_float(wh[i] = bw_float_to_half(w[i]));
	for (int kind = 0; kind < (int)DIM(names); kind++) {
		struct dev_case c32 = { .nb_in = 2, .in = { x, w }, .in_bytes = { sizeof(x), sizeof(w) } };
		struct dev_case c16 = { .nb_in = 2, .in = { xh, wh }, .in_bytes = { sizeof(xh), sizeof(wh) } };
		struct gpu_op op;
		uint32_t bad = 0;
		uint64_t n;

		c32.out_bytes = c16.out_bytes = sizeof(got32); /* laid out for the largest output */
		case_layout(&c32);
		case_layout(&c16);
		op = half_case_op(&c32, kind, BW_DTYPE_FLOAT);
		n = op.count;
		c32.out_bytes = n * sizeof(float);
		CU_ASSERT_EQUAL(dev_run(&c32, &op, 1, got32, NULL), GPU_FAULT_NONE);
		op = half_case_op(&c16, kind, BW_DTYPE_FLOAT16);
		c16.out_bytes = n * sizeof(uint16_t);
		CU_ASSERT_EQUAL(dev_run(&c16, &op, 1, got16, NULL), GPU_FAULT_NONE);
		for (uint64_t i = 0; i < n; i++)
			if (got16[i] != bw_float_to_half(got32[i]) && bad++ == 0)
				fprintf(stderr, "\n    %s float16: element %llu: %#x, float32 %.9g rounds to %#x\n", names[kind],
					(unsigned long long)i, got16[i], (double)got32[i], bw_float_to_half(got32[i]));
		CU_ASSERT_EQUAL(bad, 0);
	}
}

/* CAST between float32 and float16 (the compiler's casts at an fp16 program's inputs and outputs). */
static void test_half_cast(void)
{
	float x[H_IN0], back[H_IN0];
	uint16_t h[H_IN0];
	struct dev_case c = { .nb_in = 1, .in = { x }, .in_bytes = { sizeof(x) }, .out_bytes = sizeof(h) };
	struct dev_case d = { .nb_in = 1, .in = { h }, .in_bytes = { sizeof(h) }, .out_bytes = sizeof(back) };
	struct gpu_op op;
	uint32_t bad = 0;

	fill_rnd(x, H_IN0, 1000.0f, 0.0f);
	x[0] = 70000.0f;   /* past the largest half: infinity */
	x[1] = 1e-6f;      /* a subnormal half */
	case_layout(&c);
	memset(&op, 0, sizeof(op));
	op.code = GPU_OP_CAST, op.count = H_IN0;
	op.in[0] = arena_in(&c, 0, BW_DTYPE_FLOAT), op.out = arena_out(&c, BW_DTYPE_FLOAT16);
	op.u.cast.from = BW_DTYPE_FLOAT, op.u.cast.to = BW_DTYPE_FLOAT16;
	CU_ASSERT_EQUAL(dev_run(&c, &op, 1, h, NULL), GPU_FAULT_NONE);
	case_layout(&d);
	op.in[0] = arena_in(&d, 0, BW_DTYPE_FLOAT16), op.out = arena_out(&d, BW_DTYPE_FLOAT);
	op.u.cast.from = BW_DTYPE_FLOAT16, op.u.cast.to = BW_DTYPE_FLOAT;
	CU_ASSERT_EQUAL(dev_run(&d, &op, 1, back, NULL), GPU_FAULT_NONE);
	for (int i = 0; i < H_IN0; i++)
		bad += h[i] != bw_float_to_half(x[i]) || back[i] != bw_half_to_float(h[i]);
	CU_ASSERT_EQUAL(bad, 0);
	CU_ASSERT_TRUE(isinf(back[0]));
	CU_ASSERT_TRUE(back[1] > 0.0f && fabsf(back[1] - 1e-6f) < 6e-8f);
}

/* ---- b. batch tables ------------------------------------------------------------------------------------ */

#define ROW_FLOATS 4
#define ROW_BYTES (ROW_FLOATS * 4)
static const float g_row_const[ROW_FLOATS] = { 10, 20, 30, 40 };

/* y = x + [10, 20, 30, 40] per row, at batch 2 and 4 */
struct add_program {
	struct gpu_op ops[2];
	struct gpu_program prog;
};

static void add_program_init(struct add_program *ap)
{
	static const uint32_t batches[2] = { 2, 4 };

	memset(ap, 0, sizeof(*ap));
	snprintf(ap->prog.name, sizeof(ap->prog.name), "add-rows");
	ap->prog.nb_inputs = 1;
	ap->prog.nb_outputs = 1;
	ap->prog.input_row_bytes[0] = ROW_BYTES;
	ap->prog.output_row_bytes[0] = ROW_BYTES;
	ap->prog.max_segments = 6;
	ap->prog.nb_sizes = 2;
	ap->prog.consts = g_row_const;
	ap->prog.const_bytes = sizeof(g_row_const);
	for (int s = 0; s < 2; s++) {
		struct gpu_op *op = &ap->ops[s];
		struct gpu_program_size *sz = &ap->prog.sizes[s];

		op->code = GPU_OP_BINARY;
		op->fn = GPU_BINARY_ADD;
		op->in[0] = (struct gpu_ref){ .space = GPU_SPACE_ARENA, .dtype = BW_DTYPE_FLOAT, .offset = 0 };
		op->in[1] = const_ref(0, BW_DTYPE_FLOAT);
		op->out = (struct gpu_ref){ .space = GPU_SPACE_ARENA, .dtype = BW_DTYPE_FLOAT, .offset = 256 };
		op->count = batches[s] * ROW_FLOATS;
		op->u.bcast.rank = 2;
		op->u.bcast.dims[0] = batches[s];
		op->u.bcast.dims[1] = ROW_FLOATS;
		op->u.bcast.strides[0][0] = ROW_FLOATS;
		op->u.bcast.strides[0][1] = 1;
		op->u.bcast.strides[1][1] = 1;
		sz->batch = batches[s];
		sz->nb_ops = 1;
		sz->ops = op;
		sz->arena_bytes = 512;
		sz->input_offset[0] = 0;
		sz->output_offset[0] = 256;
	}
}

static struct gpu_segment seg(uint64_t addr, uint64_t offset, uint32_t len)
{
	return (struct gpu_segment){ .addr = addr, .offset = offset, .len = len, .tensor = 0 };
}

/* Every byte of buf outside [a0, a0 + l0), ... is still CANARY. */
static size_t canaries_broken(const uint8_t *buf, size_t bytes, const size_t *starts, const size_t *lens, int n)
{
	size_t broken = 0;

	for (size_t i = 0; i < bytes; i++) {
		bool inside = false;

		for (int k = 0; k < n; k++)
			inside |= i >= starts[k] && i < starts[k] + lens[k];
		broken += !inside && buf[i] != CANARY;
	}
	return broken;
}

static void expect_rows(const char *what, const uint8_t *reply, const float *rows, int nb_rows)
{
	float want[4 * ROW_FLOATS], got[4 * ROW_FLOATS];

	for (int r = 0; r < nb_rows; r++)
		for (int j = 0; j < ROW_FLOATS; j++)
			want[r * ROW_FLOATS + j] = (rows != NULL ? rows[r * ROW_FLOATS + j] : 0.0f) + g_row_const[j];
	memcpy(got, reply, (size_t)nb_rows * ROW_BYTES);
	expect_bits(what, got, want, (size_t)nb_rows * ROW_BYTES);
}

static void test_batch_table(void)
{
	/* requests and replies as they would lie in packet buffers: anywhere in registered memory */
	static uint8_t requests[1024] __attribute__((aligned(64)));
	static uint8_t replies[1024] __attribute__((aligned(64)));
	const size_t a_req = 40, b_req = 520, a_rep = 64, b_rep = 200, pad_rep = 400;
	const size_t starts[3] = { a_rep, b_rep, pad_rep }, lens[3] = { ROW_BYTES, 2 * ROW_BYTES, ROW_BYTES };
	struct gpu_dev *dev = open_fake();
	struct gpu_stream *stream = NULL;
	struct gpu_loaded *loaded = NULL;
	struct gpu_instance *inst = NULL;
	struct add_program ap;
	struct gpu_batch_table *t;
	char err[GPU_ERR_MAX];
	float a[ROW_FLOATS], b[2 * ROW_FLOATS], a2[ROW_FLOATS];
	uint64_t req, rep;

	add_program_init(&ap);
	memset(replies, CANARY, sizeof(replies));
	fill_rnd(a, ROW_FLOATS, 2, 0);
	fill_rnd(b, 2 * ROW_FLOATS, 2, 0);
	memcpy(requests + a_req, a, sizeof(a));
	memcpy(requests + b_req, b, sizeof(b));
	CU_ASSERT_EQUAL_FATAL(g_ops->host_register(dev, requests, sizeof(requests), NULL, err, sizeof(err)), 0);
	CU_ASSERT_EQUAL_FATAL(g_ops->host_register(dev, replies, sizeof(replies), NULL, err, sizeof(err)), 0);
	req = dev_addr_of(dev, requests, sizeof(requests));
	rep = dev_addr_of(dev, replies, sizeof(replies));
	CU_ASSERT_EQUAL_FATAL(g_ops->stream_create(dev, &stream, err, sizeof(err)), 0);
	CU_ASSERT_EQUAL_FATAL(g_ops->program_load(dev, &ap.prog, &loaded, err, sizeof(err)), 0);
	CU_ASSERT_EQUAL_FATAL(g_ops->instance_create(loaded, stream, 2, g_mode, &inst, err, sizeof(err)), 0);

	/* batch 4 (size 1), slot 1: task A's row at row 0, task B's two at rows 1-2, row 3 padding */
	t = g_ops->instance_table(inst, 1, 1);
	t->segments[0] = seg(req + a_req, 0, ROW_BYTES);
	t->segments[1] = seg(req + b_req, ROW_BYTES, 2 * ROW_BYTES);
	t->segments[2] = seg(0, 3 * ROW_BYTES, ROW_BYTES);
	t->segments[3] = seg(rep + a_rep, 0, ROW_BYTES);
	t->segments[4] = seg(rep + b_rep, ROW_BYTES, 2 * ROW_BYTES);
	t->segments[5] = seg(rep + pad_rep, 3 * ROW_BYTES, ROW_BYTES); /* the padding row's output, to look at */
	t->nb_gather = 3;
	t->nb_scatter = 3;
	t->generation = 1;
	CU_ASSERT_EQUAL(g_ops->instance_launch(inst, 1, 1, err, sizeof(err)), 0);
	CU_ASSERT_EQUAL(gpu_fake_complete(stream), 1);
	CU_ASSERT_TRUE(gpu_word_reached(g_ops->instance_word(inst, 1, 1), 1));
	expect_rows("task A", replies + a_rep, a, 1);
	expect_rows("task B", replies + b_rep, b, 2);
	expect_rows("padding row (zero-filled: the arena starts poisoned)", replies + pad_rep, NULL, 1);
	CU_ASSERT_EQUAL(canaries_broken(replies, sizeof(replies), starts, lens, 3), 0);
	/* the other (size, slot) words untouched */
	CU_ASSERT_EQUAL(*g_ops->instance_word(inst, 1, 0), 0);
	CU_ASSERT_EQUAL(*g_ops->instance_word(inst, 0, 1), 0);

	/* the same slot again: task A alone, rows 1-3 padding; generation 2 */
	fill_rnd(a2, ROW_FLOATS, 2, 0);
	memcpy(requests + a_req, a2, sizeof(a2));
	t->segments[0] = seg(req + a_req, 0, ROW_BYTES);
	t->segments[1] = seg(0, ROW_BYTES, 3 * ROW_BYTES);
	t->segments[2] = seg(rep + a_rep, 0, ROW_BYTES);
	t->nb_gather = 2;
	t->nb_scatter = 1;
	t->generation = 2;
	CU_ASSERT_EQUAL(g_ops->instance_launch(inst, 1, 1, err, sizeof(err)), 0);
	CU_ASSERT_TRUE(gpu_word_reached(g_ops->instance_word(inst, 1, 1), 1)); /* still the last one's */
	CU_ASSERT_EQUAL(gpu_fake_complete_all(dev), 1);
	CU_ASSERT_TRUE(gpu_word_reached(g_ops->instance_word(inst, 1, 1), 2));
	expect_rows("task A, second launch", replies + a_rep, a2, 1);
	expect_rows("task B, not scattered again", replies + b_rep, b, 2);
	CU_ASSERT_EQUAL(canaries_broken(replies, sizeof(replies), starts, lens, 3), 0);

	/* destroy waits for queued launches: generation 3 runs before the instance goes */
	memcpy(requests + a_req, a, sizeof(a));
	t->generation = 3;
	CU_ASSERT_EQUAL(g_ops->instance_launch(inst, 1, 1, err, sizeof(err)), 0);
	g_ops->instance_destroy(inst);
	CU_ASSERT_EQUAL(gpu_fake_pending(dev), 0);
	expect_rows("task A, finished by instance_destroy", replies + a_rep, a, 1);

	g_ops->program_unload(loaded);
	g_ops->stream_destroy(stream);
	g_ops->dev_close(dev);
}

/* ---- b'. the gather and scatter's partition (copy_plan.h) ----------------------------------------------- */

#define PLAN_LARGE_BYTES ((1u << 20) + 3) /* a large segment: many chunks, an odd tail */
#define PLAN_PAD 64                       /* canary bytes either side of every copy */

static const uint32_t g_plan_lens[] = { 0, 1, 15, 16, 17, 100, GPU_COPY_CHUNK_BYTES - 1, GPU_COPY_CHUNK_BYTES,
					GPU_COPY_CHUNK_BYTES + 1, 3 * GPU_COPY_CHUNK_BYTES + 17, PLAN_LARGE_BYTES };

static uint8_t plan_byte(size_t i)
{
	return (uint8_t)(i * 131u + (i >> 8) * 7u + 1u);
}

/* \return how many of n bytes at p are not CANARY. */
static size_t not_canary(const uint8_t *p, size_t n)
{
	size_t bad = 0;

	for (size_t i = 0; i < n; i++)
		bad += p[i] != CANARY;
	return bad;
}

/* The funnel shift on its own: bytes [r, r + 16) of two words, for every r, against the bytes. */
static void test_copy_funnel(void)
{
	uint8_t words[2 * GPU_COPY_VEC_BYTES], want[GPU_COPY_VEC_BYTES], got[GPU_COPY_VEC_BYTES];
	struct gpu_copy_vec w0, w1, v;
	size_t wrong = 0;

	for (uint32_t seed = 0; seed < 8; seed++)
		for (uint32_t r = 0; r < GPU_COPY_VEC_BYTES; r++) {
			for (uint32_t i = 0; i < sizeof(words); i++)
				words[i] = plan_byte(seed * 977u + i * 13u);
			memcpy(&w0, words, sizeof(w0));
			memcpy(&w1, words + GPU_COPY_VEC_BYTES, sizeof(w1));
			memcpy(want, words + r, sizeof(want));
			v = gpu_copy_funnel16(w0, w1, r);
			memcpy(got, &v, sizeof(got));
			wrong += memcmp(got, want, sizeof(got)) != 0;
		}
	CU_ASSERT_EQUAL(wrong, 0);
}

/*
 * The grid's partition copied on the CPU (gpu_copy_emulate: every block and thread the kernel runs):
 * every source and destination alignment 0..15 (the interior as 16-byte vectors either way: as they
 * are where the two agree mod 16, funnel-shifted otherwise; the fake's loads poison every source byte
 * outside a thread's share and assert no load misses it), every length, zero fills, a segment's
 * chunks starting anywhere in the round-robin and one block or many. The bytes arrive, nothing
 * outside them is written.
 */
static void test_copy_plan(void)
{
	static const struct { uint64_t first; uint32_t blocks; } grids[] = {
		{ 0, 1 }, { 5, 3 }, { 1000, GPU_COPY_BLOCKS_MAX }, { 62, 64 },
	};
	const size_t bytes = PLAN_LARGE_BYTES + 2 * PLAN_PAD + 32;
	uint8_t *src = aligned_alloc(64, (bytes + 63) & ~(size_t)63), *dst = aligned_alloc(64, (bytes + 63) & ~(size_t)63);
	size_t wrong = 0, outside = 0, chunks_wrong = 0;

	CU_ASSERT_PTR_NOT_NULL_FATAL(src);
	CU_ASSERT_PTR_NOT_NULL_FATAL(dst);
	for (size_t i = 0; i < bytes; i++)
		src[i] = plan_byte(i);
	for (uint32_t a = 0; a < 16; a++)
		for (uint32_t d = 0; d < 16; d++)
			for (size_t k = 0; k < sizeof(g_plan_lens) / sizeof(g_plan_lens[0]); k++) {
				uint32_t len = g_plan_lens[k];
				/* the large one at every alignment pair, on one grid (4 would take long at -O0) */
				size_t nb_grids = len == PLAN_LARGE_BYTES ? 1 : sizeof(grids) / sizeof(grids[0]);

				for (size_t g = 0; g < nb_grids; g++)
					for (int zero = 0; zero < 2; zero++) {
						const uint8_t *s = zero ? NULL : src + PLAN_PAD + a;
						uint8_t *o = dst + PLAN_PAD + d;
						uint64_t n;

						if (zero && a > 0)
							continue; /* a zero fill has no source alignment */
						memset(dst, CANARY, PLAN_PAD + d + len + PLAN_PAD);
						n = gpu_copy_emulate(o, s, len, grids[g].first, grids[g].blocks);
						chunks_wrong += n != gpu_copy_chunks((uintptr_t)o, len);
						chunks_wrong += len > 0 && n > (uint64_t)len / GPU_COPY_CHUNK_BYTES + 2;
						for (uint32_t i = 0; i < len; i++)
							wrong += o[i] != (zero ? 0 : s[i]);
						outside += not_canary(dst, PLAN_PAD + d) + not_canary(o + len, PLAN_PAD);
					}
			}
	CU_ASSERT_EQUAL(wrong, 0);
	CU_ASSERT_EQUAL(outside, 0);
	CU_ASSERT_EQUAL(chunks_wrong, 0);

	/* the arithmetic itself: chunk boundaries after the first are 16-byte aligned in the destination,
	 * chunks tile [0, len) in order, and block b takes the chunks the round-robin gives it */
	for (uint32_t d = 0; d < 16; d++) {
		uint64_t prev = 0, lo, hi, n = gpu_copy_chunks(d, PLAN_LARGE_BYTES);

		for (uint64_t c = 0; c < n; c++) {
			gpu_copy_chunk_range(d, PLAN_LARGE_BYTES, c, &lo, &hi);
			CU_ASSERT_EQUAL(lo, prev);
			CU_ASSERT_TRUE(hi > lo && hi - lo <= GPU_COPY_CHUNK_BYTES);
			CU_ASSERT_TRUE(c == 0 || (d + lo) % GPU_COPY_VEC_BYTES == 0);
			prev = hi;
		}
		CU_ASSERT_EQUAL(prev, PLAN_LARGE_BYTES);
	}
	for (uint32_t b = 0; b < 7; b++)
		CU_ASSERT_EQUAL((11 + gpu_copy_first_chunk(11, b, 7)) % 7, b);
	free(src);
	free(dst);
}

/*
 * The same through the fake device's gather and scatter (fake_run.c runs copy_plan.h's partition):
 * two inputs, each made of several segments (a tensor crossing segments, zero runs between them),
 * of every length above, the first destination alignment 0..15 and every segment's source shifted
 * from its destination by (d + k) mod 16, so each length crosses at every one of the 16 relative
 * alignments (the funnel shift's every case); the outputs (the same arena bytes: the program has no
 * op) scattered in pieces of the same lengths between canaries of the reply buffer, each piece
 * shifted from its arena bytes by (d + 7 * piece) mod 16 likewise.
 */
#define GS_ROW0 (PLAN_LARGE_BYTES + 8 * GPU_COPY_CHUNK_BYTES) /* every length, zero runs between */
#define GS_ROW1 4096u
#define GS_SEGMENTS 64

static void test_gather_scatter_alignments(void)
{
	const size_t req_bytes = GS_ROW0 + GS_ROW1 + 2 * GS_SEGMENTS * 32, rep_bytes = req_bytes + GS_SEGMENTS * PLAN_PAD;
	/* C11's aligned_alloc wants a size that is a multiple of the alignment (ASan holds it to that) */
	uint8_t *requests = aligned_alloc(4096, (req_bytes + 4095) & ~(size_t)4095);
	uint8_t *replies = aligned_alloc(4096, (rep_bytes + 4095) & ~(size_t)4095);
	uint8_t *want = malloc(GS_ROW0 + GS_ROW1); /* the two tensors as the gather must leave them */
	struct gpu_dev *dev = open_fake();
	struct gpu_stream *stream = NULL;
	struct gpu_loaded *loaded = NULL;
	struct gpu_instance *inst = NULL;
	struct gpu_program prog;
	struct gpu_batch_table *t;
	char err[GPU_ERR_MAX];
	uint64_t req, rep;
	size_t wrong = 0, outside = 0;
	const uint32_t nb_lens = sizeof(g_plan_lens) / sizeof(g_plan_lens[0]);

	CU_ASSERT_PTR_NOT_NULL_FATAL(requests);
	CU_ASSERT_PTR_NOT_NULL_FATAL(replies);
	CU_ASSERT_PTR_NOT_NULL_FATAL(want);
	memset(&prog, 0, sizeof(prog));
	snprintf(prog.name, sizeof(prog.name), "gather-scatter");
	prog.nb_inputs = prog.nb_outputs = 2;
	prog.input_row_bytes[0] = prog.output_row_bytes[0] = GS_ROW0;
	prog.input_row_bytes[1] = prog.output_row_bytes[1] = GS_ROW1;
	prog.max_segments = GS_SEGMENTS;
	prog.nb_sizes = 1;
	prog.sizes[0].batch = 1;
	prog.sizes[0].arena_bytes = ((GS_ROW0 + GPU_PROG_ALIGN - 1) / GPU_PROG_ALIGN + GS_ROW1 / GPU_PROG_ALIGN) *
				    GPU_PROG_ALIGN;
	prog.sizes[0].input_offset[1] = prog.sizes[0].output_offset[1] =
		(GS_ROW0 + GPU_PROG_ALIGN - 1) / GPU_PROG_ALIGN * GPU_PROG_ALIGN;
	for (size_t i = 0; i < req_bytes; i++)
		requests[i] = plan_byte(i);
	CU_ASSERT_EQUAL_FATAL(g_ops->host_register(dev, requests, req_bytes, NULL, err, sizeof(err)), 0);
	CU_ASSERT_EQUAL_FATAL(g_ops->host_register(dev, replies, rep_bytes, NULL, err, sizeof(err)), 0);
	req = dev_addr_of(dev, requests, req_bytes);
	rep = dev_addr_of(dev, replies, rep_bytes);
	CU_ASSERT_EQUAL_FATAL(g_ops->stream_create(dev, &stream, err, sizeof(err)), 0);
	CU_ASSERT_EQUAL_FATAL(g_ops->program_load(dev, &prog, &loaded, err, sizeof(err)), 0);
	CU_ASSERT_EQUAL_FATAL(g_ops->instance_create(loaded, stream, 1, g_mode, &inst, err, sizeof(err)), 0);
	t = g_ops->instance_table(inst, 0, 0);
	for (uint32_t d = 0; d < 16; d++) {
		uint32_t n = 0, ns, tensor_end[2];
		size_t src_at = 0, rep_at = PLAN_PAD;

		/* gather: per tensor a zero run of d bytes, then each length from requests at (d + k) mod 16
		 * past its destination's alignment, followed by a zero run of k bytes; input 1 takes the
		 * short lengths */
		for (uint32_t tensor = 0; tensor < 2; tensor++) {
			uint64_t at = 0;
			uint8_t *w = want + (tensor ? GS_ROW0 : 0);

			t->segments[n++] = (struct gpu_segment){ .addr = 0, .offset = 0, .len = d, .tensor = tensor };
			memset(w, 0, d);
			at = d;
			for (uint32_t k = 0; k < (tensor ? 6 : nb_lens); k++) {
				uint32_t len = g_plan_lens[k];

				src_at = (src_at + 15) / 16 * 16 + (at + d + k) % 16;
				t->segments[n++] = (struct gpu_segment){ .addr = req + src_at, .offset = at, .len = len,
									 .tensor = tensor };
				memcpy(w + at, requests + src_at, len);
				src_at += len;
				at += len;
				t->segments[n++] = (struct gpu_segment){ .addr = 0, .offset = at, .len = k, .tensor = tensor };
				memset(w + at, 0, k);
				at += k;
			}
			tensor_end[tensor] = (uint32_t)at;
		}
		t->nb_gather = n;
		/* scatter: each tensor's [0, end) in pieces of the same lengths, each (d + 7 * piece) mod 16
		 * past its arena bytes' alignment, after PLAN_PAD canaries */
		ns = 0;
		memset(replies, CANARY, rep_bytes);
		for (uint32_t tensor = 0; tensor < 2; tensor++)
			for (uint32_t at = 0, k = 0; at < tensor_end[tensor]; k++) {
				uint32_t left = tensor_end[tensor] - at, len = g_plan_lens[k % nb_lens];

				len = len == 0 ? 7 : len < left ? len : left;
				rep_at = (rep_at + PLAN_PAD + 15) / 16 * 16 + (at + d + 7 * ns) % 16;
				CU_ASSERT_FATAL(n + ns < GS_SEGMENTS && rep_at + len + PLAN_PAD <= rep_bytes);
				t->segments[n + ns++] = (struct gpu_segment){ .addr = rep + rep_at, .offset = at, .len = len,
									      .tensor = tensor };
				rep_at += len;
				at += len;
			}
		t->nb_scatter = ns;
		t->generation = d + 1;
		CU_ASSERT_EQUAL_FATAL(g_ops->instance_launch(inst, 0, 0, err, sizeof(err)), 0);
		CU_ASSERT_EQUAL(gpu_fake_complete_all(dev), 1);
		CU_ASSERT_FATAL(gpu_word_reached(g_ops->instance_word(inst, 0, 0), d + 1));
		/* every piece holds its tensor's bytes; every byte between pieces is a canary */
		{
			size_t prev_end = 0;

			for (uint32_t i = 0; i < ns; i++) {
				const struct gpu_segment *sg = &t->segments[n + i];
				const uint8_t *got = replies + (sg->addr - rep);
				const uint8_t *w = want + (sg->tensor ? GS_ROW0 : 0) + sg->offset;

				wrong += memcmp(got, w, sg->len) != 0;
				outside += not_canary(replies + prev_end, (size_t)(got - replies) - prev_end);
				prev_end = (size_t)(got - replies) + sg->len;
			}
			outside += not_canary(replies + prev_end, rep_bytes - prev_end);
		}
	}
	CU_ASSERT_EQUAL(wrong, 0);
	CU_ASSERT_EQUAL(outside, 0);
	CU_ASSERT_EQUAL(g_ops->health(dev, err, sizeof(err)), 0);
	g_ops->instance_destroy(inst);
	g_ops->program_unload(loaded);
	g_ops->stream_destroy(stream);
	g_ops->dev_close(dev);
	free(want);
	free(requests);
	free(replies);
}

/* Two instances on two streams, finished in the opposite order of their launches. */
static void test_two_streams(void)
{
	static uint8_t mem[512] __attribute__((aligned(64)));
	struct gpu_dev *dev = open_fake();
	struct gpu_stream *s[2] = { NULL, NULL };
	struct gpu_instance *inst[2] = { NULL, NULL };
	struct gpu_loaded *loaded = NULL;
	struct add_program ap;
	char err[GPU_ERR_MAX];
	float x[2][2 * ROW_FLOATS];
	uint64_t base;

	add_program_init(&ap);
	memset(mem, CANARY, sizeof(mem));
	CU_ASSERT_EQUAL_FATAL(g_ops->host_register(dev, mem, sizeof(mem), NULL, err, sizeof(err)), 0);
	base = dev_addr_of(dev, mem, sizeof(mem));
	CU_ASSERT_EQUAL_FATAL(g_ops->program_load(dev, &ap.prog, &loaded, err, sizeof(err)), 0);
	for (int k = 0; k < 2; k++) {
		struct gpu_batch_table *t;

		CU_ASSERT_EQUAL_FATAL(g_ops->stream_create(dev, &s[k], err, sizeof(err)), 0);
		CU_ASSERT_EQUAL_FATAL(g_ops->instance_create(loaded, s[k], 1, g_mode, &inst[k], err, sizeof(err)), 0);
		fill_rnd(x[k], 2 * ROW_FLOATS, 2, 0);
		memcpy(mem + k * 64, x[k], sizeof(x[k]));
		t = g_ops->instance_table(inst[k], 0, 0);
		t->segments[0] = seg(base + (uint64_t)k * 64, 0, 2 * ROW_BYTES);
		t->segments[1] = seg(base + 256 + (uint64_t)k * 64, 0, 2 * ROW_BYTES);
		t->nb_gather = 1;
		t->nb_scatter = 1;
		t->generation = k == 0 ? 7 : 9;
		CU_ASSERT_EQUAL(g_ops->instance_launch(inst[k], 0, 0, err, sizeof(err)), 0);
	}
	CU_ASSERT_EQUAL(gpu_fake_complete(s[1]), 1);
	CU_ASSERT_TRUE(gpu_word_reached(g_ops->instance_word(inst[1], 0, 0), 9));
	CU_ASSERT_FALSE(gpu_word_reached(g_ops->instance_word(inst[0], 0, 0), 7));
	expect_rows("stream 1 first", mem + 256 + 64, x[1], 2);
	CU_ASSERT_EQUAL(mem[256], CANARY); /* stream 0's reply not written yet */
	CU_ASSERT_EQUAL(gpu_fake_complete(s[1]), 0);
	CU_ASSERT_EQUAL(gpu_fake_complete(s[0]), 1);
	CU_ASSERT_TRUE(gpu_word_reached(g_ops->instance_word(inst[0], 0, 0), 7));
	CU_ASSERT_TRUE(gpu_word_reached(g_ops->instance_word(inst[1], 0, 0), 9));
	expect_rows("stream 0 second", mem + 256, x[0], 2);
	for (int k = 0; k < 2; k++) {
		g_ops->instance_destroy(inst[k]);
		g_ops->stream_destroy(s[k]);
	}
	g_ops->program_unload(loaded);
	g_ops->dev_close(dev);
}

#define THREAD_LAUNCHES 200  /* per stream */
#define THREAD_SLOTS 4
#define THREAD_TIMEOUT_S 40  /* a liveness bound (valgrind, a loaded host), not a timing check */

/*
 * The fake's own thread finishes launches of two streams in a random order while the host polls
 * words, as the daemon's lcores will: a slot is reused only once its word reached its generation,
 * and every reply then holds its own launch's rows.
 */
static void test_threaded(void)
{
	static uint8_t mem[2][THREAD_SLOTS][64] __attribute__((aligned(64)));
	struct gpu_fake_config cfg = { .nb_devices = 1, .mode = GPU_FAKE_THREAD, .seed = 7 };
	struct gpu_dev *dev = NULL;
	struct gpu_stream *s[2] = { NULL, NULL };
	struct gpu_instance *inst[2] = { NULL, NULL };
	struct gpu_loaded *loaded = NULL;
	struct add_program ap;
	char err[GPU_ERR_MAX];
	uint32_t launched[2] = { 0, 0 }, done[2] = { 0, 0 }, gen[2][THREAD_SLOTS], wrong = 0;
	bool busy[2][THREAD_SLOTS];
	time_t start = time(NULL);

	add_program_init(&ap);
	gpu_fake_configure(&cfg);
	CU_ASSERT_EQUAL_FATAL(g_ops->dev_open(0, &dev, err, sizeof(err)), 0);
	CU_ASSERT_EQUAL_FATAL(g_ops->host_register(dev, mem, sizeof(mem), NULL, err, sizeof(err)), 0);
	CU_ASSERT_EQUAL_FATAL(g_ops->program_load(dev, &ap.prog, &loaded, err, sizeof(err)), 0);
	memset(busy, 0, sizeof(busy));
	memset(gen, 0, sizeof(gen));
	for (int k = 0; k < 2; k++) {
		CU_ASSERT_EQUAL_FATAL(g_ops->stream_create(dev, &s[k], err, sizeof(err)), 0);
		CU_ASSERT_EQUAL_FATAL(g_ops->instance_create(loaded, s[k], THREAD_SLOTS, g_mode, &inst[k], err, sizeof(err)), 0);
	}
	while ((done[0] < THREAD_LAUNCHES || done[1] < THREAD_LAUNCHES) && time(NULL) - start < THREAD_TIMEOUT_S) {
		for (int k = 0; k < 2; k++) {
			for (uint32_t slot = 0; slot < THREAD_SLOTS; slot++) {
				uint8_t *row = mem[k][slot];
				struct gpu_batch_table *t = g_ops->instance_table(inst[k], 0, slot);

				if (busy[k][slot]) {
					float got[ROW_FLOATS];

					if (!gpu_word_reached(g_ops->instance_word(inst[k], 0, slot), gen[k][slot]))
						continue;
					/* in place: row 0 (its value gen) became gen + const */
					memcpy(got, row, sizeof(got));
					for (int j = 0; j < ROW_FLOATS; j++)
						wrong += got[j] != (float)gen[k][slot] + g_row_const[j];
					busy[k][slot] = false;
					done[k]++;
				}
				if (launched[k] == THREAD_LAUNCHES)
					continue;
				for (int j = 0; j < ROW_FLOATS; j++)
					((float *)row)[j] = (float)(launched[k] + 1);
				t->segments[0] = seg((uint64_t)(uintptr_t)row, 0, ROW_BYTES);
				t->segments[1] = seg(0, ROW_BYTES, ROW_BYTES);
				t->segments[2] = seg((uint64_t)(uintptr_t)row, 0, ROW_BYTES);
				t->nb_gather = 2;
				t->nb_scatter = 1;
				t->generation = gen[k][slot] = ++launched[k];
				CU_ASSERT_EQUAL(g_ops->instance_launch(inst[k], 0, slot, err, sizeof(err)), 0);
				busy[k][slot] = true;
			}
		}
		sched_yield();
	}
	CU_ASSERT_EQUAL(done[0], THREAD_LAUNCHES);
	CU_ASSERT_EQUAL(done[1], THREAD_LAUNCHES);
	CU_ASSERT_EQUAL(wrong, 0);
	for (int k = 0; k < 2; k++) {
		g_ops->instance_destroy(inst[k]);
		g_ops->stream_destroy(s[k]);
	}
	g_ops->program_unload(loaded);
	g_ops->dev_close(dev);
}

/* instance_time: the graph run iters times, the host clock around it; the word reaches the generation. */
static void test_instance_time(void)
{
	static uint8_t mem[128] __attribute__((aligned(64)));
	struct gpu_dev *dev = open_fake();
	struct gpu_stream *stream = NULL;
	struct gpu_loaded *loaded = NULL;
	struct gpu_instance *inst = NULL;
	struct add_program ap;
	struct gpu_batch_table *t;
	char err[GPU_ERR_MAX];
	double ms = -1.0;
	float x[4 * ROW_FLOATS];

	add_program_init(&ap);
	fill_rnd(x, 4 * ROW_FLOATS, 2, 0);
	memcpy(mem, x, sizeof(x));
	CU_ASSERT_EQUAL_FATAL(g_ops->host_register(dev, mem, sizeof(mem), NULL, err, sizeof(err)), 0);
	CU_ASSERT_EQUAL_FATAL(g_ops->stream_create(dev, &stream, err, sizeof(err)), 0);
	CU_ASSERT_EQUAL_FATAL(g_ops->program_load(dev, &ap.prog, &loaded, err, sizeof(err)), 0);
	CU_ASSERT_EQUAL_FATAL(g_ops->instance_create(loaded, stream, 2, g_mode, &inst, err, sizeof(err)), 0);
	t = g_ops->instance_table(inst, 1, 1);
	t->segments[0] = seg((uint64_t)(uintptr_t)mem, 0, 4 * ROW_BYTES);
	t->segments[1] = seg((uint64_t)(uintptr_t)mem + 64, 0, 4 * ROW_BYTES); /* out of place: runs are repeatable */
	t->nb_gather = 1;
	t->nb_scatter = 1;
	t->generation = 3;

	CU_ASSERT_EQUAL(g_ops->instance_time(inst, 1, 1, 5, &ms, err, sizeof(err)), 0);
	CU_ASSERT(ms > 0.0);
	CU_ASSERT_TRUE(gpu_word_reached(g_ops->instance_word(inst, 1, 1), 3));
	expect_rows("timed launches", mem + 64, x, 4);
	CU_ASSERT_EQUAL(*g_ops->instance_word(inst, 1, 0), 0); /* no other slot ran */
	CU_ASSERT_EQUAL(gpu_fake_pending(dev), 0);

	CU_ASSERT_EQUAL(g_ops->instance_time(inst, 2, 0, 5, &ms, err, sizeof(err)), -EINVAL);
	CU_ASSERT_EQUAL(g_ops->instance_time(inst, 0, 2, 5, &ms, err, sizeof(err)), -EINVAL);
	CU_ASSERT_EQUAL(g_ops->instance_time(inst, 1, 1, 0, &ms, err, sizeof(err)), -EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "iters"));

	g_ops->instance_destroy(inst);
	g_ops->program_unload(loaded);
	g_ops->stream_destroy(stream);
	g_ops->dev_close(dev);
}

/* ---- doorbell launches (GPU_LAUNCH_DOORBELL): the ring's host protocol on the fake ------------------------ */

#define DB_SLOTS 3
#define DB_PAIRS (2 * DB_SLOTS)     /* the add program's 2 sizes: the ring has 8 entries */
#define DB_ROUNDS 5                 /* 30 launches: the ring wraps more than thrice */
#define DB_AREA 128                 /* bytes per (size, slot): 4 rows in, 4 rows out */

struct db_env {
	struct gpu_dev *dev;
	struct gpu_stream *stream;
	struct gpu_loaded *loaded;
	struct gpu_instance *inst;
	struct add_program ap;
	uint8_t *mem;                   /* DB_PAIRS areas, registered */
};

static void db_open(struct db_env *env, struct gpu_dev *dev, uint32_t nb_slots)
{
	char err[GPU_ERR_MAX];

	memset(env, 0, sizeof(*env));
	env->dev = dev;
	add_program_init(&env->ap);
	env->mem = aligned_alloc(64, 2 * nb_slots * DB_AREA);
	CU_ASSERT_PTR_NOT_NULL_FATAL(env->mem);
	memset(env->mem, CANARY, 2 * nb_slots * DB_AREA);
	CU_ASSERT_EQUAL_FATAL(g_ops->host_register(dev, env->mem, 2 * nb_slots * DB_AREA, NULL, err, sizeof(err)), 0);
	CU_ASSERT_EQUAL_FATAL(g_ops->stream_create(dev, &env->stream, err, sizeof(err)), 0);
	CU_ASSERT_EQUAL_FATAL(g_ops->program_load(dev, &env->ap.prog, &env->loaded, err, sizeof(err)), 0);
	CU_ASSERT_EQUAL_FATAL(g_ops->instance_create(env->loaded, env->stream, nb_slots, GPU_LAUNCH_DOORBELL, &env->inst,
						     err, sizeof(err)), 0);
}

/* Destroys what db_open made (the instance too, unless the test did). */
static void db_close(struct db_env *env)
{
	char err[GPU_ERR_MAX];

	g_ops->instance_destroy(env->inst);
	g_ops->program_unload(env->loaded);
	g_ops->stream_destroy(env->stream);
	CU_ASSERT_EQUAL(g_ops->host_unregister(env->dev, env->mem, err, sizeof(err)), 0);
	free(env->mem);
}

/* Pair k = size * nb_slots + slot: its batch (all rows value) in its area, out of place, then the doorbell. */
static void db_launch(struct db_env *env, uint32_t nb_slots, uint32_t k, uint32_t generation, float value)
{
	uint32_t size_idx = k / nb_slots, slot = k % nb_slots, rows = env->ap.prog.sizes[size_idx].batch;
	struct gpu_batch_table *t = g_ops->instance_table(env->inst, size_idx, slot);
	uint8_t *area = env->mem + (size_t)k * DB_AREA;
	char err[GPU_ERR_MAX];

	for (uint32_t j = 0; j < rows * ROW_FLOATS; j++)
		((float *)(void *)area)[j] = value;
	memset(area + DB_AREA / 2, CANARY, DB_AREA / 2);
	t->segments[0] = seg((uint64_t)(uintptr_t)area, 0, rows * ROW_BYTES);
	t->segments[1] = seg((uint64_t)(uintptr_t)area + DB_AREA / 2, 0, rows * ROW_BYTES);
	t->nb_gather = 1;
	t->nb_scatter = 1;
	t->generation = generation;
	CU_ASSERT_EQUAL(g_ops->instance_launch(env->inst, size_idx, slot, err, sizeof(err)), 0);
}

/* Pair k's reply holds its batch of value + the constant row. */
static void db_expect(struct db_env *env, uint32_t nb_slots, uint32_t k, float value)
{
	uint32_t rows = env->ap.prog.sizes[k / nb_slots].batch;
	float in[4 * ROW_FLOATS];

	for (uint32_t j = 0; j < rows * ROW_FLOATS; j++)
		in[j] = value;
	expect_rows("doorbell launch", env->mem + (size_t)k * DB_AREA + DB_AREA / 2, in, (int)rows);
}

/*
 * Every (size, slot) in flight at once, rung in a different order each round; completions come in
 * ring order, one per gpu_fake_complete, each with its own batch; then a slot reused while the
 * others are still in flight.
 */
static void test_doorbell_interleave(void)
{
	struct db_env env;
	uint32_t gen = 0, order[DB_PAIRS], gens[DB_PAIRS];

	db_open(&env, open_fake(), DB_SLOTS);
	for (uint32_t round = 0; round < DB_ROUNDS; round++) {
		for (uint32_t i = 0; i < DB_PAIRS; i++) {
			order[i] = (i * 5 + round * 3) % DB_PAIRS; /* 5 is prime to 6: a permutation */
			gens[i] = ++gen;
			db_launch(&env, DB_SLOTS, order[i], gens[i], (float)gens[i]);
		}
		CU_ASSERT_EQUAL(gpu_fake_pending(env.dev), DB_PAIRS);
		for (uint32_t i = 0; i < DB_PAIRS; i++) {
			uint32_t k = order[i];

			CU_ASSERT_FALSE(gpu_word_reached(g_ops->instance_word(env.inst, k / DB_SLOTS, k % DB_SLOTS), gens[i]));
			CU_ASSERT_EQUAL(gpu_fake_complete(env.stream), 1);
			CU_ASSERT_TRUE(gpu_word_reached(g_ops->instance_word(env.inst, k / DB_SLOTS, k % DB_SLOTS), gens[i]));
			if (i + 1 < DB_PAIRS) {
				uint32_t next = order[i + 1];

				CU_ASSERT_FALSE(gpu_word_reached(g_ops->instance_word(env.inst, next / DB_SLOTS,
											next % DB_SLOTS), gens[i + 1]));
			}
			db_expect(&env, DB_SLOTS, k, (float)gens[i]);
		}
		CU_ASSERT_EQUAL(gpu_fake_complete(env.stream), 0);
	}

	/* pairs 0, 4, 5 in flight; 0 completes and is rung again behind 4 and 5 */
	db_launch(&env, DB_SLOTS, 0, ++gen, 1.0f);
	db_launch(&env, DB_SLOTS, 4, ++gen, 2.0f);
	db_launch(&env, DB_SLOTS, 5, ++gen, 3.0f);
	CU_ASSERT_EQUAL(gpu_fake_complete(env.stream), 1);
	CU_ASSERT_TRUE(gpu_word_reached(g_ops->instance_word(env.inst, 0, 0), gen - 2));
	db_launch(&env, DB_SLOTS, 0, ++gen, 4.0f);
	CU_ASSERT_EQUAL(gpu_fake_pending(env.dev), 3);
	CU_ASSERT_EQUAL(gpu_fake_complete_all(env.dev), 3);
	CU_ASSERT_TRUE(gpu_word_reached(g_ops->instance_word(env.inst, 1, 1), gen - 2));
	CU_ASSERT_TRUE(gpu_word_reached(g_ops->instance_word(env.inst, 1, 2), gen - 1));
	CU_ASSERT_TRUE(gpu_word_reached(g_ops->instance_word(env.inst, 0, 0), gen));
	db_expect(&env, DB_SLOTS, 0, 4.0f);
	db_expect(&env, DB_SLOTS, 4, 2.0f);
	db_expect(&env, DB_SLOTS, 5, 3.0f);
	CU_ASSERT_EQUAL(g_ops->health(env.dev, NULL, 0), 0);
	db_close(&env);
	g_ops->dev_close(env.dev);
}

/* instance_destroy: idle, and with launches rung (they run first, as the CUDA module's stop entry waits). */
static void test_doorbell_destroy(void)
{
	struct gpu_fake_config cfg = { .nb_devices = 1, .mode = GPU_FAKE_THREAD, .seed = 3 };
	struct gpu_dev *dev = open_fake();
	char err[GPU_ERR_MAX];
	struct db_env env;

	db_open(&env, dev, DB_SLOTS); /* idle */
	db_close(&env);
	CU_ASSERT_EQUAL(gpu_fake_pending(dev), 0);

	db_open(&env, dev, DB_SLOTS);
	db_launch(&env, DB_SLOTS, 5, 7, 1.5f);
	db_launch(&env, DB_SLOTS, 0, 8, 2.5f);
	db_launch(&env, DB_SLOTS, 3, 9, 3.5f);
	CU_ASSERT_EQUAL(gpu_fake_pending(dev), 3);
	g_ops->instance_destroy(env.inst);
	env.inst = NULL;
	CU_ASSERT_EQUAL(gpu_fake_pending(dev), 0);
	db_expect(&env, DB_SLOTS, 5, 1.5f);
	db_expect(&env, DB_SLOTS, 0, 2.5f);
	db_expect(&env, DB_SLOTS, 3, 3.5f);
	db_close(&env);
	g_ops->dev_close(dev);

	/* the fake's thread taking entries while the instance goes */
	gpu_fake_configure(&cfg);
	CU_ASSERT_EQUAL_FATAL(g_ops->dev_open(0, &dev, err, sizeof(err)), 0);
	db_open(&env, dev, DB_SLOTS);
	for (uint32_t k = 0; k < DB_PAIRS; k++)
		db_launch(&env, DB_SLOTS, k, 100 + k, (float)k);
	g_ops->instance_destroy(env.inst);
	env.inst = NULL;
	CU_ASSERT_EQUAL(gpu_fake_pending(dev), 0);
	for (uint32_t k = 0; k < DB_PAIRS; k++)
		db_expect(&env, DB_SLOTS, k, (float)k);
	db_close(&env);
	g_ops->dev_close(dev);
}

static bool db_reached(struct db_env *env, uint32_t nb_slots, uint32_t k, uint32_t generation)
{
	return gpu_word_reached(g_ops->instance_word(env->inst, k / nb_slots, k % nb_slots), generation);
}

/*
 * Parking (the CUDA module's park_now around device-wide synchronising calls): rung launches are held,
 * pending but taken by nothing, through nested parks, for an instance made during a park too; they
 * run after the last resume. An instance destroyed while parked still runs what was rung on it.
 */
static void test_doorbell_park(void)
{
	struct gpu_dev *dev = open_fake();
	struct db_env a, b, c;

	db_open(&a, dev, DB_SLOTS);
	db_open(&b, dev, DB_SLOTS);
	db_launch(&a, DB_SLOTS, 0, 1, 1.0f);
	db_launch(&a, DB_SLOTS, 1, 2, 2.0f);
	gpu_fake_doorbells_park(dev);
	db_launch(&a, DB_SLOTS, 2, 3, 3.0f);
	db_launch(&b, DB_SLOTS, 4, 4, 4.0f);
	CU_ASSERT_EQUAL(gpu_fake_pending(dev), 4);
	CU_ASSERT_EQUAL(gpu_fake_complete(a.stream), 0);
	CU_ASSERT_EQUAL(gpu_fake_complete(b.stream), 0);
	CU_ASSERT_EQUAL(gpu_fake_complete_all(dev), 0);
	gpu_fake_doorbells_park(dev); /* nested: the inner resume holds them still */
	db_open(&c, dev, DB_SLOTS);   /* made during the park: parked too */
	db_launch(&c, DB_SLOTS, 3, 5, 5.0f);
	gpu_fake_doorbells_resume(dev);
	CU_ASSERT_EQUAL(gpu_fake_complete_all(dev), 0);
	CU_ASSERT_EQUAL(gpu_fake_pending(dev), 5);
	CU_ASSERT_FALSE(db_reached(&a, DB_SLOTS, 0, 1));
	CU_ASSERT_FALSE(db_reached(&b, DB_SLOTS, 4, 4));
	CU_ASSERT_FALSE(db_reached(&c, DB_SLOTS, 3, 5));
	gpu_fake_doorbells_resume(dev);
	/* in ring order per instance */
	CU_ASSERT_EQUAL(gpu_fake_complete(a.stream), 1);
	CU_ASSERT_TRUE(db_reached(&a, DB_SLOTS, 0, 1));
	CU_ASSERT_FALSE(db_reached(&a, DB_SLOTS, 1, 2));
	CU_ASSERT_EQUAL(gpu_fake_complete_all(dev), 4);
	CU_ASSERT_TRUE(db_reached(&a, DB_SLOTS, 1, 2));
	CU_ASSERT_TRUE(db_reached(&a, DB_SLOTS, 2, 3));
	CU_ASSERT_TRUE(db_reached(&b, DB_SLOTS, 4, 4));
	CU_ASSERT_TRUE(db_reached(&c, DB_SLOTS, 3, 5));
	db_expect(&a, DB_SLOTS, 0, 1.0f);
	db_expect(&a, DB_SLOTS, 1, 2.0f);
	db_expect(&a, DB_SLOTS, 2, 3.0f);
	db_expect(&b, DB_SLOTS, 4, 4.0f);
	db_expect(&c, DB_SLOTS, 3, 5.0f);

	/* destroyed while parked: its own launches still run (the stop entry), the others' stay held */
	gpu_fake_doorbells_park(dev);
	db_launch(&a, DB_SLOTS, 5, 6, 6.0f);
	db_launch(&c, DB_SLOTS, 0, 7, 7.0f);
	g_ops->instance_destroy(c.inst);
	c.inst = NULL;
	db_expect(&c, DB_SLOTS, 0, 7.0f);
	CU_ASSERT_EQUAL(gpu_fake_pending(dev), 1);
	CU_ASSERT_EQUAL(gpu_fake_complete_all(dev), 0);
	gpu_fake_doorbells_resume(dev);
	CU_ASSERT_EQUAL(gpu_fake_complete_all(dev), 1);
	db_expect(&a, DB_SLOTS, 5, 6.0f);
	db_close(&c);
	CU_ASSERT_EQUAL(g_ops->health(dev, NULL, 0), 0);
	db_close(&b);
	db_close(&a);
	g_ops->dev_close(dev);
}

/* Waits for pair k's word (the fake's thread runs it); false after a bound that only a hang reaches. */
static bool db_wait(struct db_env *env, uint32_t nb_slots, uint32_t k, uint32_t generation)
{
	for (long i = 0; i < 10L * 1000 * 1000 && !db_reached(env, nb_slots, k, generation); i++)
		sched_yield();
	return db_reached(env, nb_slots, k, generation);
}

/*
 * instance_destroy and program_unload of one model while another doorbell instance has launches rung
 * and in flight: they park it around their frees and let it go again, so its launches are neither
 * lost nor left parked; on demand, and with the fake's thread taking entries meanwhile.
 */
static void test_doorbell_destroy_others_live(void)
{
	struct gpu_fake_config cfg = { .nb_devices = 1, .mode = GPU_FAKE_THREAD, .seed = 5 };
	struct gpu_dev *dev = open_fake();
	char err[GPU_ERR_MAX];
	struct db_env a, b;
	uint32_t gen = 0;

	db_open(&a, dev, DB_SLOTS);
	db_open(&b, dev, DB_SLOTS);
	for (uint32_t k = 0; k < DB_PAIRS; k++)
		db_launch(&a, DB_SLOTS, k, ++gen, (float)k);
	db_launch(&b, DB_SLOTS, 1, 50, 0.5f);
	g_ops->instance_destroy(b.inst); /* with a's launches rung */
	b.inst = NULL;
	db_expect(&b, DB_SLOTS, 1, 0.5f);
	db_close(&b); /* program_unload, likewise */
	CU_ASSERT_EQUAL(gpu_fake_pending(dev), DB_PAIRS);
	CU_ASSERT_EQUAL(gpu_fake_complete_all(dev), DB_PAIRS); /* not left parked */
	for (uint32_t k = 0; k < DB_PAIRS; k++)
		db_expect(&a, DB_SLOTS, k, (float)k);
	db_close(&a);
	g_ops->dev_close(dev);

	gpu_fake_configure(&cfg);
	CU_ASSERT_EQUAL_FATAL(g_ops->dev_open(0, &dev, err, sizeof(err)), 0);
	db_open(&a, dev, DB_SLOTS);
	for (uint32_t round = 0; round < DB_ROUNDS; round++) {
		db_open(&b, dev, DB_SLOTS);
		for (uint32_t k = 0; k < DB_PAIRS; k++) {
			gen++;
			db_launch(&a, DB_SLOTS, k, gen, (float)(gen % 7));
		}
		db_launch(&b, DB_SLOTS, round % DB_PAIRS, 1, 1.0f);
		db_close(&b);
		for (uint32_t k = 0; k < DB_PAIRS; k++) {
			uint32_t g = gen - DB_PAIRS + 1 + k;

			CU_ASSERT_TRUE_FATAL(db_wait(&a, DB_SLOTS, k, g));
			db_expect(&a, DB_SLOTS, k, (float)(g % 7));
		}
	}
	CU_ASSERT_EQUAL(gpu_fake_pending(dev), 0);
	CU_ASSERT_EQUAL(g_ops->health(dev, NULL, 0), 0);
	db_close(&a);
	g_ops->dev_close(dev);
}

/*
 * A caller ringing a slot still in flight breaks the ring's bound: the fake loses the device naming
 * it (CUDA would run the wrong batches). And a refused doorbell (GPU_FAKE_FAULT_NEXT_LAUNCH) posts nothing.
 */
static void test_doorbell_faults(void)
{
	struct gpu_dev *dev = open_fake();
	char err[GPU_ERR_MAX];
	struct db_env env;

	db_open(&env, dev, 1); /* 2 pairs: a ring of 4 */
	gpu_fake_inject(dev, GPU_FAKE_FAULT_NEXT_LAUNCH, "injected refusal");
	CU_ASSERT_EQUAL(g_ops->instance_launch(env.inst, 0, 0, err, sizeof(err)), -EIO);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "injected refusal"));
	CU_ASSERT_EQUAL(gpu_fake_pending(dev), 0);
	CU_ASSERT_EQUAL(g_ops->health(dev, err, sizeof(err)), 0);
	for (uint32_t i = 0; i < 5; i++)
		db_launch(&env, 1, 0, i + 1, 1.0f);
	CU_ASSERT_EQUAL(gpu_fake_complete_all(dev), 1); /* the first take finds the overrun, runs nothing */
	CU_ASSERT_EQUAL(g_ops->health(dev, err, sizeof(err)), -EIO);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "overrun"));
	CU_ASSERT_EQUAL(g_ops->instance_launch(env.inst, 1, 0, err, sizeof(err)), -EIO);
	CU_ASSERT_EQUAL(g_ops->instance_launch(env.inst, 1, 1, err, sizeof(err)), -EINVAL);
	db_close(&env); /* drops what is left: the device is lost */
	CU_ASSERT_EQUAL(gpu_fake_pending(dev), 0);
	g_ops->dev_close(dev);
}

/* ---- c. faults ------------------------------------------------------------------------------------------ */

/* Relu into scratch, then Gather from it (op 1) with an index out of range. */
static void test_gather_fault(void)
{
	const int64_t idx[3] = { 1, 7, -2 };
	float data[20], got[12], want[12];
	struct dev_case c = { .nb_in = 2, .in = { data, idx }, .in_bytes = { sizeof(data), sizeof(idx) },
			      .out_bytes = sizeof(got), .scratch_bytes = sizeof(data) };
	struct gpu_op ops[2];
	uint32_t fault_op = 99;

	fill_rnd(data, 20, 2, 0);
	case_layout(&c);
	memset(ops, 0, sizeof(ops));
	ops[0].code = GPU_OP_UNARY;
	ops[0].fn = GPU_UNARY_RELU;
	ops[0].in[0] = arena_in(&c, 0, BW_DTYPE_FLOAT);
	ops[0].out = (struct gpu_ref){ .space = GPU_SPACE_ARENA, .dtype = BW_DTYPE_FLOAT, .offset = c.scratch_off };
	ops[0].count = 20;
	ops[1].code = GPU_OP_GATHER;
	ops[1].in[0] = ops[0].out;
	ops[1].in[1] = arena_in(&c, 1, BW_DTYPE_INT64);
	ops[1].out = arena_out(&c, BW_DTYPE_FLOAT);
	ops[1].count = 12;
	ops[1].u.gather = (typeof(ops[1].u.gather)){ .outer = 1, .axis_len = 5, .nb_idx = 3, .inner = 4,
						     .elem_bytes = 4 };
	for (int j = 0; j < 4; j++) {
		want[j] = bw_relu(data[4 + j]);
		want[4 + j] = 0.0f; /* the faulting index's elements */
		want[8 + j] = bw_relu(data[12 + j]);
	}
	/* dev_run checks the word arrived: the launch completes despite the fault */
	CU_ASSERT_EQUAL(dev_run(&c, ops, 2, got, &fault_op), GPU_FAULT_INDEX);
	CU_ASSERT_EQUAL(fault_op, 1);
	expect_bits("Gather with index 7 of 5", got, want, sizeof(got));
}

static void test_launch_errors(void)
{
	static uint8_t mem[256] __attribute__((aligned(64)));
	struct gpu_dev *dev = open_fake();
	struct gpu_stream *stream = NULL;
	struct gpu_loaded *loaded = NULL;
	struct gpu_instance *inst = NULL;
	struct add_program ap;
	struct gpu_batch_table *t;
	char err[GPU_ERR_MAX];
	uint64_t a = 0;

	add_program_init(&ap);
	CU_ASSERT_EQUAL_FATAL(g_ops->stream_create(dev, &stream, err, sizeof(err)), 0);
	CU_ASSERT_EQUAL_FATAL(g_ops->program_load(dev, &ap.prog, &loaded, err, sizeof(err)), 0);
	CU_ASSERT_EQUAL(g_ops->instance_create(loaded, stream, 0, g_mode, &inst, err, sizeof(err)), -EINVAL);
	CU_ASSERT_EQUAL(g_ops->instance_create(loaded, stream, 2, GPU_LAUNCH_MODE_COUNT, &inst, err, sizeof(err)), -EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "launch mode"));
	CU_ASSERT_EQUAL_FATAL(g_ops->instance_create(loaded, stream, 2, g_mode, &inst, err, sizeof(err)), 0);

	/* host_to_dev: registered memory only, whole ranges only */
	CU_ASSERT_EQUAL(g_ops->host_to_dev(dev, mem, 16, &a), -EFAULT);
	CU_ASSERT_EQUAL_FATAL(g_ops->host_register(dev, mem, 128, NULL, err, sizeof(err)), 0);
	CU_ASSERT_EQUAL(g_ops->host_to_dev(dev, mem + 100, 28, &a), 0);
	CU_ASSERT_EQUAL(a, (uint64_t)(uintptr_t)(mem + 100)); /* the fake's device address is the host's */
	CU_ASSERT_EQUAL(g_ops->host_to_dev(dev, mem + 100, 29, &a), -EFAULT);
	CU_ASSERT_EQUAL(g_ops->host_to_dev(dev, mem + 128, 1, &a), -EFAULT);

	/* indexes out of range */
	CU_ASSERT_EQUAL(g_ops->instance_launch(inst, 2, 0, err, sizeof(err)), -EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "size 2 slot 0"));
	CU_ASSERT_EQUAL(g_ops->instance_launch(inst, 0, 2, err, sizeof(err)), -EINVAL);
	CU_ASSERT_PTR_NULL(g_ops->instance_table(inst, 0, 2));
	CU_ASSERT_PTR_NULL(g_ops->instance_word(inst, 2, 0));
	CU_ASSERT_EQUAL(gpu_fake_pending(dev), 0);

	/* a refused launch: -EIO, nothing queued, the device healthy, the next launch goes */
	t = g_ops->instance_table(inst, 0, 0);
	t->segments[0] = seg(0, 0, 2 * ROW_BYTES);
	t->segments[1] = seg((uint64_t)(uintptr_t)mem, 0, 2 * ROW_BYTES);
	t->nb_gather = 1;
	t->nb_scatter = 1;
	t->generation = 5;
	gpu_fake_inject(dev, GPU_FAKE_FAULT_NEXT_LAUNCH, "injected refusal");
	CU_ASSERT_EQUAL(g_ops->instance_launch(inst, 0, 0, err, sizeof(err)), -EIO);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "injected refusal"));
	CU_ASSERT_EQUAL(gpu_fake_pending(dev), 0);
	CU_ASSERT_EQUAL(g_ops->health(dev, err, sizeof(err)), 0);
	CU_ASSERT_EQUAL(g_ops->instance_launch(inst, 0, 0, err, sizeof(err)), 0);
	CU_ASSERT_EQUAL(gpu_fake_complete_all(dev), 1);
	CU_ASSERT_TRUE(gpu_word_reached(g_ops->instance_word(inst, 0, 0), 5));

	/* sticky: queued work never finishes, launches -EIO, health -EIO with the first reason */
	t->generation = 6;
	CU_ASSERT_EQUAL(g_ops->instance_launch(inst, 0, 0, err, sizeof(err)), 0);
	gpu_fake_inject(dev, GPU_FAKE_FAULT_STICKY, "illegal address (injected)");
	CU_ASSERT_EQUAL(gpu_fake_complete_all(dev), 0);
	CU_ASSERT_FALSE(gpu_word_reached(g_ops->instance_word(inst, 0, 0), 6));
	CU_ASSERT_EQUAL(g_ops->instance_launch(inst, 0, 0, err, sizeof(err)), -EIO);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "illegal address (injected)"));
	CU_ASSERT_EQUAL(g_ops->health(dev, err, sizeof(err)), -EIO);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "illegal address (injected)"));
	g_ops->instance_destroy(inst); /* drops its launch: the device is lost */
	CU_ASSERT_EQUAL(gpu_fake_pending(dev), 0);
	g_ops->program_unload(loaded);
	g_ops->stream_destroy(stream);
	g_ops->dev_close(dev);
}

/* A segment pointing outside registered memory loses the device, as an illegal address would. */
static void test_bad_segment(void)
{
	static uint8_t mem[256] __attribute__((aligned(64)));
	static uint8_t unregistered[64] __attribute__((aligned(64)));
	struct gpu_dev *dev = open_fake();
	struct gpu_stream *stream = NULL;
	struct gpu_loaded *loaded = NULL;
	struct gpu_instance *inst = NULL;
	struct add_program ap;
	struct gpu_batch_table *t;
	char err[GPU_ERR_MAX];

	add_program_init(&ap);
	memset(unregistered, CANARY, sizeof(unregistered));
	CU_ASSERT_EQUAL_FATAL(g_ops->host_register(dev, mem, sizeof(mem), NULL, err, sizeof(err)), 0);
	CU_ASSERT_EQUAL_FATAL(g_ops->stream_create(dev, &stream, err, sizeof(err)), 0);
	CU_ASSERT_EQUAL_FATAL(g_ops->program_load(dev, &ap.prog, &loaded, err, sizeof(err)), 0);
	CU_ASSERT_EQUAL_FATAL(g_ops->instance_create(loaded, stream, 1, g_mode, &inst, err, sizeof(err)), 0);
	t = g_ops->instance_table(inst, 0, 0);
	t->segments[0] = seg((uint64_t)(uintptr_t)mem, 0, 2 * ROW_BYTES);
	t->segments[1] = seg((uint64_t)(uintptr_t)unregistered, 0, 2 * ROW_BYTES);
	t->nb_gather = 1;
	t->nb_scatter = 1;
	t->generation = 1;
	CU_ASSERT_EQUAL(g_ops->instance_launch(inst, 0, 0, err, sizeof(err)), 0);
	CU_ASSERT_EQUAL(gpu_fake_complete_all(dev), 1);
	CU_ASSERT_FALSE(gpu_word_reached(g_ops->instance_word(inst, 0, 0), 1));
	CU_ASSERT_EQUAL(unregistered[0], CANARY);
	CU_ASSERT_EQUAL(g_ops->health(dev, err, sizeof(err)), -EIO);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "not registered memory"));
	g_ops->instance_destroy(inst);
	g_ops->program_unload(loaded);
	g_ops->stream_destroy(stream);
	g_ops->dev_close(dev);
}

/* gpu_program_check, one rule at a time, on copies of a valid program. */
static void expect_refused(const char *rule, const struct add_program *ap, const char *err_part)
{
	char err[GPU_ERR_MAX] = "";
	int rc = gpu_program_check(&ap->prog, err, sizeof(err));

	if (rc != -EINVAL || strstr(err, err_part) == NULL)
		fprintf(stderr, "\n    %s: rc %d, err \"%s\", wanted \"%s\"\n", rule, rc, err, err_part);
	CU_ASSERT(rc == -EINVAL && strstr(err, err_part) != NULL);
}

/* ap with size 1 (batch 4) pointing at its own ops, after *ap was copied */
static void fix_ops(struct add_program *ap)
{
	ap->prog.sizes[0].ops = &ap->ops[0];
	ap->prog.sizes[1].ops = &ap->ops[1];
}

static void test_program_check(void)
{
	struct add_program base, ap;
	struct gpu_dev *dev;
	struct gpu_loaded *loaded = NULL;
	char err[GPU_ERR_MAX];

	add_program_init(&base);
	CU_ASSERT_EQUAL(gpu_program_check(&base.prog, err, sizeof(err)), 0);

	ap = base, fix_ops(&ap);
	ap.ops[1].out.offset = 512 - 32; /* 64 bytes of output from 480 in a 512-byte arena */
	expect_refused("operand past the arena", &ap, "size 4 op 0 (BINARY): out: bytes [480, 544) past the arena");

	ap = base, fix_ops(&ap);
	ap.ops[1].in[1].offset = 4; /* 16 bytes of constants; 4 floats from byte 4 */
	expect_refused("operand past the constants", &ap, "size 4 op 0 (BINARY): in1: bytes [4, 20) past the constants");

	ap = base, fix_ops(&ap);
	/* rows 5 floats apart: 1 + 3 * 5 + 3 = 19 floats from 448 (dense, 16 would fit) */
	ap.ops[1].u.bcast.strides[0][0] = 5;
	ap.ops[1].in[0].offset = 448;
	expect_refused("broadcast strides past the arena", &ap, "size 4 op 0 (BINARY): in0: bytes [448, 524) past the arena");

	ap = base, fix_ops(&ap);
	ap.ops[0].code = 99;
	expect_refused("bad code", &ap, "size 2 op 0 (?): unknown op code 99");

	ap = base, fix_ops(&ap);
	ap.ops[0].fn = GPU_BINARY_COUNT;
	expect_refused("bad fn", &ap, "size 2 op 0 (BINARY): function 7 unknown");

	ap = base, fix_ops(&ap);
	ap.ops[0].in[0].dtype = BW_DTYPE_INT64;
	expect_refused("bad dtype", &ap, "size 2 op 0 (BINARY): in0: dtype 7, this op computes float");

	ap = base, fix_ops(&ap);
	ap.ops[0].u.bcast.rank = GPU_PROG_RANK_MAX + 1;
	expect_refused("rank too large", &ap, "size 2 op 0 (BINARY): rank 9 above 8");

	ap = base, fix_ops(&ap);
	ap.ops[0].u.bcast.dims[1] = 0;
	expect_refused("a zero dimension", &ap, "dimension 1 is 0");

	ap = base, fix_ops(&ap);
	ap.prog.sizes[1].batch = 2;
	expect_refused("sizes not ascending", &ap, "must be non-zero and ascending");

	ap = base, fix_ops(&ap);
	ap.prog.sizes[1].input_offset[0] = 512; /* 4 rows of 16 bytes from 512 in a 512-byte arena */
	expect_refused("input past the arena", &ap, "size 4: graph input 0: 4 rows of 16 bytes at offset 512 past the arena");

	ap = base, fix_ops(&ap);
	ap.prog.max_segments = 0;
	expect_refused("max_segments 0", &ap, "max_segments 0");

	ap = base, fix_ops(&ap);
	ap.prog.nb_sizes = 0;
	expect_refused("no sizes", &ap, "0 batch sizes");

	ap = base, fix_ops(&ap);
	ap.ops[0].in[0].space = GPU_SPACE_NONE;
	expect_refused("a required operand missing", &ap, "in0 is required and missing");

	ap = base, fix_ops(&ap);
	ap.ops[0].out = const_ref(0, BW_DTYPE_FLOAT);
	expect_refused("an output in the constants", &ap, "out must be in the arena");

	ap = base, fix_ops(&ap);
	ap.ops[0].in[0].offset = 2;
	expect_refused("a misaligned operand", &ap, "not aligned");

	ap = base, fix_ops(&ap);
	ap.ops[0].count = 9;
	expect_refused("count not the shape's", &ap, "count 9 is not the shape's 8 elements");

	/* other ops' rules */
	ap = base, fix_ops(&ap);
	ap.ops[0].code = GPU_OP_WHERE;
	ap.ops[0].in[2] = ap.ops[0].in[1];
	expect_refused("Where's condition not bool", &ap, "size 2 op 0 (WHERE): in0: condition dtype 1");

	ap = base, fix_ops(&ap);
	memset(&ap.ops[0], 0, sizeof(ap.ops[0]));
	ap.ops[0] = (struct gpu_op){ .code = GPU_OP_CAST, .in[0] = { GPU_SPACE_ARENA, BW_DTYPE_BF16, 0 },
				     .out = { GPU_SPACE_ARENA, BW_DTYPE_FLOAT, 256 }, .count = 8,
				     .u.cast = { .from = BW_DTYPE_BF16, .to = BW_DTYPE_FLOAT } };
	expect_refused("Cast from bfloat16", &ap, "cast from dtype 16 to 1");

	ap = base, fix_ops(&ap);
	ap.ops[0] = (struct gpu_op){ .code = GPU_OP_GATHER, .in[0] = { GPU_SPACE_ARENA, BW_DTYPE_FLOAT, 0 },
				     .in[1] = { GPU_SPACE_CONST, BW_DTYPE_FLOAT, 0 },
				     .out = { GPU_SPACE_ARENA, BW_DTYPE_FLOAT, 256 }, .count = 4,
				     .u.gather = { .outer = 1, .axis_len = 2, .nb_idx = 1, .inner = 4, .elem_bytes = 4 } };
	expect_refused("Gather's indices float", &ap, "indices dtype 1");
	ap.ops[0].in[1].dtype = BW_DTYPE_INT32;
	ap.ops[0].u.gather.elem_bytes = 0;
	expect_refused("Gather's elem_bytes 0", &ap, "elem_bytes 0");
	ap.ops[0].u.gather.elem_bytes = 4;
	CU_ASSERT_EQUAL(gpu_program_check(&ap.prog, err, sizeof(err)), 0);
	ap.ops[0].u.gather.axis_len = 64; /* data: 64 rows of 4 floats from 0: past the 512-byte arena */
	expect_refused("Gather's data extent", &ap, "in0: bytes [0, 1024) past the arena");

	ap = base, fix_ops(&ap);
	ap.ops[0] = (struct gpu_op){ .code = GPU_OP_PERMUTE, .in[0] = { GPU_SPACE_ARENA, BW_DTYPE_BF16, 0 },
				     .out = { GPU_SPACE_ARENA, BW_DTYPE_BF16, 256 }, .count = 8,
				     .u.bcast = { .rank = 1, .dims = { 8 }, .strides = { { 1 } } } };
	expect_refused("Permute of bfloat16", &ap, "out: dtype 16, not one of 1, 2, 4 or 8 bytes");
	ap.ops[0].in[0].dtype = ap.ops[0].out.dtype = BW_DTYPE_FLOAT16; /* 2-byte elements: float16's */
	CU_ASSERT_EQUAL(gpu_program_check(&ap.prog, err, sizeof(err)), 0);

	ap = base, fix_ops(&ap);
	ap.ops[0] = (struct gpu_op){ .code = GPU_OP_GEMM, .in[0] = { GPU_SPACE_ARENA, BW_DTYPE_FLOAT, 0 },
				     .in[1] = { GPU_SPACE_CONST, BW_DTYPE_FLOAT, 0 },
				     .out = { GPU_SPACE_ARENA, BW_DTYPE_FLOAT, 256 }, .count = 4, .alpha = 1,
				     .u.gemm = { .batch = 1, .m = 2, .n = 2, .k = 2, .stride_c = 4 } };
	CU_ASSERT_EQUAL(gpu_program_check(&ap.prog, err, sizeof(err)), 0);
	ap.ops[0].u.gemm.trans_b = 1;
	ap.ops[0].u.gemm.k = 3; /* B [2 x 3]: 6 floats from 0 in 16 bytes of constants */
	expect_refused("GEMM's B past the constants", &ap, "size 2 op 0 (GEMM): in1: bytes [0, 24) past the constants");
	ap.ops[0].u.gemm.k = 2;
	ap.ops[0].u.gemm.batch = 2; /* a broadcast B (stride 0); A 2 x 4 floats, out 2 x 4 */
	ap.ops[0].u.gemm.stride_a = 4;
	ap.ops[0].u.gemm.stride_c = 4;
	CU_ASSERT_EQUAL(gpu_program_check(&ap.prog, err, sizeof(err)), 0);
	ap.ops[0].u.gemm.stride_a = 125; /* A[1] at 125 floats: 129 floats in all */
	expect_refused("GEMM's batch stride past the arena", &ap, "in0: bytes [0, 516) past the arena");
	ap.ops[0].u.gemm.stride_a = 4;
	ap.ops[0].u.gemm.stride_c = 5;
	expect_refused("GEMM's stride_c", &ap, "stride_c 5");

	ap = base, fix_ops(&ap);
	ap.ops[0] = (struct gpu_op){ .code = GPU_OP_CONV, .in[0] = { GPU_SPACE_ARENA, BW_DTYPE_FLOAT, 0 },
				     .in[1] = { GPU_SPACE_CONST, BW_DTYPE_FLOAT, 0 },
				     .out = { GPU_SPACE_ARENA, BW_DTYPE_FLOAT, 256 }, .count = 9,
				     .u.conv = { .n = 1, .c = 1, .h = 4, .w = 4, .m = 1, .oh = 3, .ow = 3, .kh = 2, .kw = 2,
						 .stride_h = 1, .stride_w = 1, .dil_h = 1, .dil_w = 1, .group = 1 } };
	CU_ASSERT_EQUAL(gpu_program_check(&ap.prog, err, sizeof(err)), 0);
	ap.ops[0].u.conv.nhwc = 2;
	expect_refused("CONV's layout", &ap, "layout 2 unknown (0 NCHW, 1 NHWC)");
	ap.ops[0].u.conv.nhwc = 1;
	CU_ASSERT_EQUAL(gpu_program_check(&ap.prog, err, sizeof(err)), 0);
	ap.ops[0].u.conv.nhwc = 0;
	ap.ops[0].u.conv.group = 2;
	expect_refused("CONV's group", &ap, "size 2 op 0 (CONV): c 1 and m 1 are not multiples of group 2");
	ap.ops[0].u.conv.group = 1;
	ap.ops[0].u.conv.kw = 3; /* weights 1 x 1 x 2 x 3: 24 bytes in 16 of constants */
	ap.ops[0].u.conv.ow = 2;
	ap.ops[0].count = 6;
	expect_refused("CONV's weights past the constants", &ap, "in1: bytes [0, 24) past the constants");
	ap.ops[0].u.conv.kw = 2;
	ap.ops[0].u.conv.ow = 3;
	ap.ops[0].count = 9;
	ap.ops[0].u.conv.pad_h = 2; /* a window of 2 rows wholly in the padding */
	expect_refused("CONV's padding", &ap, "padding 2, 0");
	ap.ops[0].u.conv.pad_h = 0;
	ap.ops[0].u.conv.oh = 5; /* the last windows would start past the input */
	ap.ops[0].count = 15;
	expect_refused("CONV's output dims", &ap, "its last windows start past");
	ap.ops[0] = (struct gpu_op){ .code = GPU_OP_POOL, .fn = GPU_POOL_MAX, .in[0] = { GPU_SPACE_ARENA, BW_DTYPE_FLOAT, 0 },
				     .out = { GPU_SPACE_ARENA, BW_DTYPE_FLOAT, 256 }, .count = 9,
				     .u.conv = { .n = 1, .c = 1, .h = 4, .w = 4, .m = 2, .oh = 3, .ow = 3, .kh = 2, .kw = 2,
						 .stride_h = 1, .stride_w = 1, .dil_h = 1, .dil_w = 1, .group = 1 } };
	expect_refused("POOL's count", &ap, "count 9 is not n * m * oh * ow = 18");
	ap.ops[0].count = 18;
	expect_refused("POOL's channels", &ap, "pooling keeps the channels: m 2, c 1");
	ap.ops[0].u.conv.m = 1;
	ap.ops[0].count = 9;
	CU_ASSERT_EQUAL(gpu_program_check(&ap.prog, err, sizeof(err)), 0);
	ap.ops[0].fn = GPU_POOL_COUNT;
	expect_refused("POOL's function", &ap, "function 2 unknown");

	/* program_load refuses what the check refuses, with its line */
	ap = base, fix_ops(&ap);
	ap.ops[0].fn = 42;
	dev = open_fake();
	CU_ASSERT_EQUAL(g_ops->program_load(dev, &ap.prog, &loaded, err, sizeof(err)), -EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "size 2 op 0 (BINARY): function 42 unknown"));
	g_ops->dev_close(dev);
}

/* The module keeps its own copy: the host's program may be freed (here: scribbled on) after load. */
static void test_program_copy(void)
{
	struct add_program ap;
	struct gpu_program *copy;

	add_program_init(&ap);
	copy = gpu_program_copy(&ap.prog);
	CU_ASSERT_PTR_NOT_NULL_FATAL(copy);
	CU_ASSERT_PTR_NOT_EQUAL(copy->sizes[0].ops, ap.prog.sizes[0].ops);
	CU_ASSERT_PTR_NOT_EQUAL(copy->consts, ap.prog.consts);
	CU_ASSERT_EQUAL(memcmp(copy->sizes[1].ops, &ap.ops[1], sizeof(ap.ops[1])), 0);
	CU_ASSERT_EQUAL(memcmp(copy->consts, g_row_const, sizeof(g_row_const)), 0);
	CU_ASSERT_EQUAL((uintptr_t)copy->consts % GPU_PROG_ALIGN, 0);
	memset(ap.ops, 0, sizeof(ap.ops));
	CU_ASSERT_EQUAL(gpu_program_check(copy, NULL, 0), 0);
	gpu_program_free(copy);
}

/* The suites that make instances run once per launch mode: their init picks it. */
static int mode_graph(void)
{
	g_mode = GPU_LAUNCH_GRAPH;
	return 0;
}

static int mode_doorbell(void)
{
	g_mode = GPU_LAUNCH_DOORBELL;
	return 0;
}

int main(void)
{
	static CU_TestInfo op_tests[] = {
		{ "unary functions", test_unary },
		{ "binary functions with broadcasting", test_binary },
		{ "Where", test_where },
		{ "Cast", test_cast },
		{ "Transpose", test_transpose },
		{ "Gather", test_gather },
		{ "Softmax", test_softmax },
		{ "LayerNormalization", test_layernorm },
		{ "ReduceSum, ReduceMean", test_reduce },
		{ "MatMul", test_matmul },
		{ "Gemm", test_gemm },
		{ "Conv: grouped, strided, padded, dilated; bias, residual, Relu", test_conv },
		{ "MaxPool, AveragePool (with and without pads counted), GlobalAveragePool", test_pool },
		{ "Copy", test_copy },
		{ "half <-> float conversion", test_half_conversion },
		{ "float16 operands: each float op kind, rounded once", test_half_ops },
		{ "Cast between float32 and float16", test_half_cast },
		CU_TEST_INFO_NULL,
	};
	static CU_TestInfo table_tests[] = {
		{ "gather, pad, scatter, generations on one slot", test_batch_table },
		{ "gather and scatter: every alignment and segment layout", test_gather_scatter_alignments },
		{ "two streams finished in the opposite order", test_two_streams },
		{ "two streams on the fake's thread", test_threaded },
		{ "instance_time", test_instance_time },
		CU_TEST_INFO_NULL,
	};
	static CU_TestInfo fault_tests[] = {
		{ "Gather index out of range", test_gather_fault },
		{ "launch errors, host_to_dev, sticky error", test_launch_errors },
		{ "a segment outside registered memory", test_bad_segment },
		CU_TEST_INFO_NULL,
	};
	static CU_TestInfo doorbell_tests[] = {
		{ "every (size, slot) in flight, rung in changing orders, the ring wrapping", test_doorbell_interleave },
		{ "instance_destroy idle, with launches rung, on the fake's thread", test_doorbell_destroy },
		{ "parked: rung launches held through nested parks, run after the resume", test_doorbell_park },
		{ "instance_destroy and program_unload with another instance's launches rung",
		  test_doorbell_destroy_others_live },
		{ "a refused doorbell; a ring overrun loses the device", test_doorbell_faults },
		CU_TEST_INFO_NULL,
	};
	static CU_TestInfo copy_plan_tests[] = {
		{ "funnel shift: bytes r..r+15 of two words for every r", test_copy_funnel },
		{ "every alignment pair and length, zero fills, grids: bytes in, nothing outside", test_copy_plan },
		CU_TEST_INFO_NULL,
	};
	static CU_TestInfo check_tests[] = {
		{ "gpu_program_check refusals", test_program_check },
		{ "gpu_program_copy", test_program_copy },
		CU_TEST_INFO_NULL,
	};
	static CU_SuiteInfo suites[] = {
		{ "ops against the CPU kernels (graph launch)", mode_graph, NULL, NULL, NULL, op_tests },
		{ "batch tables (graph launch)", mode_graph, NULL, NULL, NULL, table_tests },
		{ "faults (graph launch)", mode_graph, NULL, NULL, NULL, fault_tests },
		{ "ops against the CPU kernels (doorbell launch)", mode_doorbell, NULL, NULL, NULL, op_tests },
		{ "batch tables (doorbell launch)", mode_doorbell, NULL, NULL, NULL, table_tests },
		{ "faults (doorbell launch)", mode_doorbell, NULL, NULL, NULL, fault_tests },
		{ "doorbell ring", NULL, NULL, NULL, NULL, doorbell_tests },
		{ "gather and scatter partition (copy_plan.h)", NULL, NULL, NULL, NULL, copy_plan_tests },
		{ "program checks", NULL, NULL, NULL, NULL, check_tests },
		CU_SUITE_INFO_NULL,
	};

	if (rt_cpu_kernels_register() != 0) {
		fprintf(stderr, "rt_cpu_kernels_register failed\n");
		return 1;
	}
	g_ops = gpu_fake_ops();
	return bw_cunit_run(suites);
}
