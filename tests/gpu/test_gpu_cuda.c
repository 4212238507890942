/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The CUDA module on a real GPU (registered only when the module was built). Without a device it
 * prints the probe's reason and exits 77, which meson reports as SKIP: never a silent pass.
 *
 * With one: open device 0, register host memory, have a program of one COPY op gather a row from it
 * and scatter the row back into it, poll the completion word from here (no synchronize call), check
 * the bytes; then launch/poll round trips of it. The round trip time is printed, never asserted. Then
 * device programs (program.h): hand-built programs loaded, instantiated and launched as graphs, their
 * batches gathered from and scattered into registered host memory, the results compared with
 * program_math.h's per-item functions run here on a host copy of the arena (what the fake device
 * does), and a Gather index out of range reported in the table's fault word. CONV ops go through cuDNN where the module finds it (BW_CUDNN_LOG=1 prints each plan;
 * BW_CUDNN=0 runs the same tests on the generic kernel). Then the doorbell launch mode on two programs:
 * mixed sizes and slots in flight at once, results and words checked, and its round trip printed
 * beside graph mode's. argv[1]: the module, or --fake: the same tests on the fake device (gpu/fake.h,
 * its own thread finishing the work), which CI runs so that this test is known right before a GPU
 * runs it.
 */
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../bw_cunit.h"

#include "fake.h"
#include "gpu.h"
#include "program_math.h"

#define HOST_BYTES (4u << 20)         /* the registered region */
#define PAGE_BYTES 4096
#define WAIT_NS (5ll * 1000000000ll)  /* longest wait for one completion word */
#define ROUND_TRIPS 1000
#define SLOTS 8
#define COPY_ROW_BYTES (64u << 10)    /* test_register_and_copy's row: inside HOST_BYTES, 256-aligned */

static const struct gpu_ops *g_ops;
static struct gpu_dev *g_dev;
static bool g_fake; /* --fake */

static long long now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

/* ---- device programs ----------------------------------------------------------------------------- */

#define PROG_BATCH_MAX 4
#define PROG_SLOTS 2
#define REL_TOLERANCE 1e-5f
/* CONV through cuDNN: its algorithms (Winograd, FFT, implicit GEMM) sum in other orders than
 * gpu_conv_item, and some transform the data first */
#define CONV_REL_TOLERANCE 1e-3f
#define CONV_F16_REL_TOLERANCE 1e-2f
/* where a batch's request rows and replies lie in the registered region: one page per tensor; batches
 * in flight together each have an area of their own */
#define REQ_AREA_OFF 0
#define REPLY_AREA_OFF (GPU_PROG_TENSORS_MAX * PAGE_BYTES)
#define AREA_BYTES (2 * REPLY_AREA_OFF)

/* program 1's arena: one 256-byte slot per tensor, enough for batch 4 of each */
enum { A_X = 0, A_T0 = 256, A_T1 = 512, A_T2 = 768, A_T3 = 1024, A_Y = 1280, A_T5 = 1536, A_BYTES = 1792 };
/* and its constants */
enum { C_W = 0, C_BIAS = 512, C_ADD = 768, C_W2 = 1024, C_BYTES = 1280 };

static struct gpu_ref arena_ref(uint32_t dtype, uint64_t off)
{
	return (struct gpu_ref){ .space = GPU_SPACE_ARENA, .dtype = dtype, .offset = off };
}

static struct gpu_ref const_ref(uint32_t dtype, uint64_t off)
{
	return (struct gpu_ref){ .space = GPU_SPACE_CONST, .dtype = dtype, .offset = off };
}

static struct gpu_op gemm_op(struct gpu_ref a, struct gpu_ref b, struct gpu_ref bias, struct gpu_ref out, uint32_t act,
			     float alpha, int64_t batch, int64_t m, int64_t n, int64_t k, uint32_t trans_b)
{
	struct gpu_op op = { .code = GPU_OP_GEMM, .fn = act, .in = { a, b, bias }, .out = out,
			     .count = (uint64_t)(batch * m * n), .alpha = alpha };

	op.u.gemm.batch = batch;
	op.u.gemm.m = m;
	op.u.gemm.n = n;
	op.u.gemm.k = k;
	op.u.gemm.trans_b = trans_b;
	op.u.gemm.stride_c = m * n; /* the output is dense (gpu_program_check) */
	return op;
}

/*
 * Program 1 at batch b, x [b, 8] in, y and z [b, 4] out:
 *   t0 = relu(x); t1 = relu(t0 W + bias) (GEMM, bias epilogue); t2 = t1 + c (broadcast over rows);
 *   t3 = 0.5 t2 W2^T (GEMM, trans_b); y = softmax(t3);
 *   z[r] = t2[r] W2^T as a batched GEMM of b 1x16 matrices, W2 broadcast (batch stride 0) and t2's
 *   rows 64 bytes apart (below cuBLASLt's default 256-byte alignment).
 */
static uint32_t mlp_ops(uint32_t b, struct gpu_op *ops)
{
	struct gpu_ref none = { 0 };

	ops[0] = (struct gpu_op){ .code = GPU_OP_UNARY, .fn = GPU_UNARY_RELU, .in = { arena_ref(BW_DTYPE_FLOAT, A_X) },
				  .out = arena_ref(BW_DTYPE_FLOAT, A_T0), .count = b * 8u };
	ops[1] = gemm_op(arena_ref(BW_DTYPE_FLOAT, A_T0), const_ref(BW_DTYPE_FLOAT, C_W), const_ref(BW_DTYPE_FLOAT, C_BIAS),
			 arena_ref(BW_DTYPE_FLOAT, A_T1), GPU_ACT_RELU, 1.0f, 1, b, 16, 8, 0);
	ops[2] = (struct gpu_op){ .code = GPU_OP_BINARY, .fn = GPU_BINARY_ADD,
				  .in = { arena_ref(BW_DTYPE_FLOAT, A_T1), const_ref(BW_DTYPE_FLOAT, C_ADD) },
				  .out = arena_ref(BW_DTYPE_FLOAT, A_T2), .count = b * 16u };
	ops[2].u.bcast.rank = 2;
	ops[2].u.bcast.dims[0] = b;
	ops[2].u.bcast.dims[1] = 16;
	ops[2].u.bcast.strides[0][0] = 16;
	ops[2].u.bcast.strides[0][1] = 1;
	ops[2].u.bcast.strides[1][0] = 0;
	ops[2].u.bcast.strides[1][1] = 1;
	ops[2].u.bcast.strides[2][1] = 1;
	ops[3] = gemm_op(arena_ref(BW_DTYPE_FLOAT, A_T2), const_ref(BW_DTYPE_FLOAT, C_W2), none,
			 arena_ref(BW_DTYPE_FLOAT, A_T3), GPU_ACT_NONE, 0.5f, 1, b, 4, 16, 1);
	ops[4] = (struct gpu_op){ .code = GPU_OP_SOFTMAX, .in = { arena_ref(BW_DTYPE_FLOAT, A_T3) },
				  .out = arena_ref(BW_DTYPE_FLOAT, A_Y), .count = b * 4u };
	ops[4].u.rows.rows = b;
	ops[4].u.rows.cols = 4;
	ops[5] = gemm_op(arena_ref(BW_DTYPE_FLOAT, A_T2), const_ref(BW_DTYPE_FLOAT, C_W2), none,
			 arena_ref(BW_DTYPE_FLOAT, A_T5), GPU_ACT_NONE, 1.0f, b, 1, 4, 16, 1);
	ops[5].u.gemm.stride_a = 16;
	ops[5].u.gemm.stride_b = 0;
	ops[5].u.gemm.stride_c = 4;
	return 6;
}

/* Fills a program's header for one input and nb_outputs outputs of the given row bytes. */
static void prog_header(struct gpu_program *p, const char *name, uint32_t in_row, uint32_t nb_outputs,
			const uint32_t *out_rows)
{
	memset(p, 0, sizeof(*p));
	snprintf(p->name, sizeof(p->name), "%s", name);
	p->nb_inputs = 1;
	p->input_row_bytes[0] = in_row;
	p->nb_outputs = nb_outputs;
	for (uint32_t t = 0; t < nb_outputs; t++)
		p->output_row_bytes[t] = out_rows[t];
	p->max_segments = PROG_BATCH_MAX * (1 + nb_outputs);
}

static uint64_t g_seed = 12345;

/* A repeatable value in [-1, 1): the test must not depend on the host's rand(). */
static float next_value(void)
{
	g_seed = g_seed * 6364136223846793005ull + 1442695040888963407ull;
	return (float)((g_seed >> 33) % 2000) / 1000.0f - 1.0f;
}

/* The region every test registers: requests and replies of one batch. */
struct prog_env {
	uint8_t *mem;
	struct gpu_stream *stream;
};

static int prog_env_open(struct prog_env *env)
{
	char err[GPU_ERR_MAX];
	void *dev_addr;

	env->mem = aligned_alloc(PAGE_BYTES, HOST_BYTES);
	if (env->mem == NULL)
		return -ENOMEM;
	memset(env->mem, 0, HOST_BYTES);
	if (g_ops->host_register(g_dev, env->mem, HOST_BYTES, &dev_addr, err, sizeof(err)) < 0 ||
	    g_ops->stream_create(g_dev, &env->stream, err, sizeof(err)) < 0) {
		fprintf(stderr, "%s\n", err);
		return -EIO;
	}
	return 0;
}

static void prog_env_close(struct prog_env *env)
{
	char err[GPU_ERR_MAX];

	g_ops->stream_destroy(env->stream);
	g_ops->host_unregister(g_dev, env->mem, err, sizeof(err));
	free(env->mem);
}

/*
 * Writes one batch of nb_rows rows (padded to the size's batch with zero rows) for (size_idx, slot)
 * into area: the request rows of input 0 are in[], written into the registered region; gather segments
 * (one per row, the padding ones with addr 0) read them there, scatter segments write each output row
 * into its reply area (filled with 0xee first).
 */
static void batch_prepare(struct prog_env *env, const struct gpu_program *prog, struct gpu_instance *inst,
			  uint32_t size_idx, uint32_t slot, const uint8_t *in, uint32_t nb_rows, uint32_t generation,
			  uint32_t area)
{
	const struct gpu_program_size *sz = &prog->sizes[size_idx];
	struct gpu_batch_table *t = g_ops->instance_table(inst, size_idx, slot);
	uint8_t *base = env->mem + (size_t)area * AREA_BYTES;
	uint32_t in_row = prog->input_row_bytes[0], nseg = 0, r, o;
	uint64_t dev_addr;

	CU_ASSERT_PTR_NOT_NULL_FATAL(t);
	memcpy(base + REQ_AREA_OFF, in, (size_t)nb_rows * in_row);
	memset(base + REPLY_AREA_OFF, 0xee, (size_t)prog->nb_outputs * PAGE_BYTES);
	for (r = 0; r < sz->batch; r++) {
		struct gpu_segment *seg = &t->segments[nseg++];

		seg->addr = 0; /* a padding row: zeros */
		if (r < nb_rows) {
			CU_ASSERT_EQUAL(g_ops->host_to_dev(g_dev, base + REQ_AREA_OFF + r * in_row, in_row, &dev_addr), 0);
			seg->addr = dev_addr;
		}
		seg->offset = (uint64_t)r * in_row;
		seg->len = in_row;
		seg->tensor = 0;
	}
	t->nb_gather = nseg;
	for (o = 0; o < prog->nb_outputs; o++) {
		uint32_t out_row = prog->output_row_bytes[o];

		for (r = 0; r < nb_rows; r++) {
			struct gpu_segment *seg = &t->segments[nseg++];
			uint8_t *reply = base + REPLY_AREA_OFF + o * PAGE_BYTES + r * out_row;

			CU_ASSERT_EQUAL(g_ops->host_to_dev(g_dev, reply, out_row, &dev_addr), 0);
			*seg = (struct gpu_segment){ .addr = dev_addr, .offset = (uint64_t)r * out_row, .len = out_row,
						     .tensor = o };
		}
	}
	t->nb_scatter = nseg - t->nb_gather;
	t->fault = GPU_FAULT_NONE;
	t->fault_op = 0;
	t->generation = generation;
}

/* Spins until (size_idx, slot)'s word reaches generation. \return 1, or 0 after WAIT_NS (reason printed). */
static int batch_wait(struct gpu_instance *inst, uint32_t size_idx, uint32_t slot, uint32_t generation)
{
	volatile uint32_t *word = g_ops->instance_word(inst, size_idx, slot);
	char err[GPU_ERR_MAX];
	long long start = now_ns();

	while (!gpu_word_reached(word, generation) && now_ns() - start < WAIT_NS)
		;
	if (gpu_word_reached(word, generation))
		return 1;
	g_ops->health(g_dev, err, sizeof(err));
	fprintf(stderr, "\n    size %u slot %u: no completion word %u after %lld ns (word %u; %s)\n", size_idx, slot,
		generation, WAIT_NS, *word, err);
	return 0;
}

/*
 * Registration, and the device reaching registered memory: a program of one COPY op gathers a row from
 * the registered region and scatters it back into another part of it; then ROUND_TRIPS launches of it,
 * each polled on its completion word from here (no synchronize call). The round trip time is printed,
 * never asserted.
 */
static void test_register_and_copy(void)
{
	uint8_t *mem = aligned_alloc(PAGE_BYTES, HOST_BYTES);
	struct gpu_stream *s = NULL;
	struct gpu_loaded *lp = NULL;
	struct gpu_instance *inst = NULL;
	struct gpu_batch_table *t;
	struct gpu_program prog;
	struct gpu_op op = { .code = GPU_OP_COPY, .count = COPY_ROW_BYTES };
	uint32_t row = COPY_ROW_BYTES, gen = 1, i, bad = 0, done = 0;
	char err[GPU_ERR_MAX];
	void *dev_addr = NULL;
	long long start;

	CU_ASSERT_PTR_NOT_NULL_FATAL(mem);
	for (i = 0; i < HOST_BYTES; i++)
		mem[i] = (uint8_t)(i * 131u + 7u);
	CU_ASSERT_EQUAL_FATAL(g_ops->host_register(g_dev, mem, HOST_BYTES, &dev_addr, err, sizeof(err)), 0);
	CU_ASSERT_EQUAL(g_ops->host_regions(g_dev), 1);
	CU_ASSERT_EQUAL(g_ops->host_register(g_dev, mem + 64, 64, NULL, err, sizeof(err)), -EEXIST);
	/* cudaHostRegister pins whole pages: a neighbour sharing the region's last page is refused up
	 * front, -EEXIST naming the page, not cudaErrorHostMemoryAlreadyRegistered's -EIO */
	{
		uint8_t *pair = aligned_alloc(PAGE_BYTES, 2 * PAGE_BYTES);

		CU_ASSERT_PTR_NOT_NULL_FATAL(pair);
		CU_ASSERT_EQUAL(g_ops->host_register(g_dev, pair, 100, NULL, err, sizeof(err)), 0);
		CU_ASSERT_EQUAL(g_ops->host_register(g_dev, pair + 200, 100, NULL, err, sizeof(err)), -EEXIST);
		CU_ASSERT_PTR_NOT_NULL(strstr(err, "shares"));
		CU_ASSERT_EQUAL(g_ops->host_register(g_dev, pair + PAGE_BYTES, 100, NULL, err, sizeof(err)), 0);
		CU_ASSERT_EQUAL(g_ops->health(g_dev, err, sizeof(err)), 0);
		CU_ASSERT_EQUAL(g_ops->host_unregister(g_dev, pair, err, sizeof(err)), 0);
		CU_ASSERT_EQUAL(g_ops->host_unregister(g_dev, pair + PAGE_BYTES, err, sizeof(err)), 0);
		free(pair);
	}
	CU_ASSERT_EQUAL_FATAL(g_ops->stream_create(g_dev, &s, err, sizeof(err)), 0);

	prog_header(&prog, "copy", row, 1, &row);
	prog.max_segments = 2;
	prog.nb_sizes = 1;
	op.in[0] = arena_ref(BW_DTYPE_UINT8, 0);
	op.out = arena_ref(BW_DTYPE_UINT8, COPY_ROW_BYTES);
	prog.sizes[0] = (struct gpu_program_size){ .batch = 1, .nb_ops = 1, .ops = &op,
						   .arena_bytes = 2 * COPY_ROW_BYTES, .output_offset = { COPY_ROW_BYTES } };
	CU_ASSERT_EQUAL_FATAL(g_ops->program_load(g_dev, &prog, &lp, err, sizeof(err)), 0);
	CU_ASSERT_EQUAL_FATAL(g_ops->instance_create(lp, s, 1, GPU_LAUNCH_GRAPH, &inst, err, sizeof(err)), 0);
	t = g_ops->instance_table(inst, 0, 0);
	t->nb_gather = 1;
	t->nb_scatter = 1;
	t->segments[0] = (struct gpu_segment){ .len = COPY_ROW_BYTES };
	t->segments[1] = (struct gpu_segment){ .len = COPY_ROW_BYTES };
	/* the row at the region's start goes to its last row */
	CU_ASSERT_EQUAL(g_ops->host_to_dev(g_dev, mem, COPY_ROW_BYTES, &t->segments[0].addr), 0);
	CU_ASSERT_EQUAL(g_ops->host_to_dev(g_dev, mem + HOST_BYTES - COPY_ROW_BYTES, COPY_ROW_BYTES,
					   &t->segments[1].addr), 0);
	memset(mem + HOST_BYTES - COPY_ROW_BYTES, 0, COPY_ROW_BYTES);
	t->generation = gen;
	CU_ASSERT_EQUAL(g_ops->instance_launch(inst, 0, 0, err, sizeof(err)), 0);
	CU_ASSERT_EQUAL_FATAL(batch_wait(inst, 0, 0, gen), 1);
	for (i = 0; i < COPY_ROW_BYTES; i++)
		bad += mem[HOST_BYTES - COPY_ROW_BYTES + i] != mem[i];
	CU_ASSERT_EQUAL(bad, 0);

	start = now_ns();
	for (i = 0; i < ROUND_TRIPS; i++) {
		t->generation = ++gen;
		if (g_ops->instance_launch(inst, 0, 0, err, sizeof(err)) != 0 || !batch_wait(inst, 0, 0, gen))
			break;
		done++;
	}
	CU_ASSERT_EQUAL(done, ROUND_TRIPS);
	printf("\n    launch -> poll round trip (a %u-byte COPY program): %.2f us mean over %u\n", COPY_ROW_BYTES,
	       (double)(now_ns() - start) / 1000.0 / (done ? done : 1), done);
	CU_ASSERT_EQUAL(g_ops->health(g_dev, err, sizeof(err)), 0);
	g_ops->instance_destroy(inst);
	g_ops->program_unload(lp);
	g_ops->stream_destroy(s);
	CU_ASSERT_EQUAL(g_ops->host_unregister(g_dev, mem, err, sizeof(err)), 0);
	CU_ASSERT_EQUAL(g_ops->host_unregister(g_dev, mem, err, sizeof(err)), -ENOENT);
	free(mem);
}

/*
 * The replies of a finished batch in area against the same batch through program_math.h on a host
 * arena (what the fake device does). \return the table's fault.
 */
static int batch_check(struct prog_env *env, const struct gpu_program *prog, struct gpu_instance *inst,
		       uint32_t size_idx, uint32_t slot, const uint8_t *in, uint32_t nb_rows, uint32_t area, float rel_tol)
{
	const struct gpu_program_size *sz = &prog->sizes[size_idx];
	struct gpu_batch_table *t = g_ops->instance_table(inst, size_idx, slot);
	const uint8_t *base = env->mem + (size_t)area * AREA_BYTES;
	struct gpu_batch_table *ref_table = calloc(1, gpu_batch_table_bytes(1));
	uint8_t *arena = calloc(1, sz->arena_bytes);
	uint32_t in_row = prog->input_row_bytes[0], o, bad = 0;
	int fault = (int)t->fault;

	CU_ASSERT_PTR_NOT_NULL_FATAL(arena);
	CU_ASSERT_PTR_NOT_NULL_FATAL(ref_table);
	memcpy(arena + sz->input_offset[0], in, (size_t)nb_rows * in_row);
	for (uint32_t i = 0; i < sz->nb_ops; i++)
		for (uint64_t it = 0; it < gpu_op_items(&sz->ops[i]); it++)
			gpu_op_item(&sz->ops[i], i, arena, prog->consts, &ref_table->fault, it);
	CU_ASSERT_EQUAL(fault, (int)ref_table->fault);
	if (fault != GPU_FAULT_NONE)
		CU_ASSERT_EQUAL(t->fault_op, ref_table->fault_op);
	for (o = 0; o < prog->nb_outputs; o++) {
		uint32_t n = nb_rows * prog->output_row_bytes[o] / (uint32_t)sizeof(float);
		const float *want = (const float *)(arena + sz->output_offset[o]);
		const float *got = (const float *)(base + REPLY_AREA_OFF + o * PAGE_BYTES);

		for (uint32_t e = 0; e < n; e++) {
			float tol = rel_tol * fmaxf(fabsf(want[e]), 1.0f);

			if (!(fabsf(got[e] - want[e]) <= tol)) {
				if (bad++ < 8)
					fprintf(stderr, "\n    size %u slot %u output %u element %u: device %.9g, host %.9g",
						size_idx, slot, o, e, (double)got[e], (double)want[e]);
			}
		}
		/* nothing written past the batch's replies */
		CU_ASSERT_EQUAL(base[REPLY_AREA_OFF + o * PAGE_BYTES + nb_rows * prog->output_row_bytes[o]], 0xee);
	}
	CU_ASSERT_EQUAL(bad, 0);
	free(arena);
	free(ref_table);
	return fault;
}

/*
 * Runs one batch on (size_idx, slot) in area 0 and compares it with the host's run, within rel_tol.
 * \return the table's fault after the launch, or -1 when the word never came.
 */
static int run_and_compare_tol(struct prog_env *env, const struct gpu_program *prog, struct gpu_instance *inst,
			       uint32_t size_idx, uint32_t slot, const uint8_t *in, uint32_t nb_rows, uint32_t generation,
			       float rel_tol)
{
	char err[GPU_ERR_MAX];

	batch_prepare(env, prog, inst, size_idx, slot, in, nb_rows, generation, 0);
	CU_ASSERT_EQUAL_FATAL(g_ops->instance_launch(inst, size_idx, slot, err, sizeof(err)), 0);
	if (!batch_wait(inst, size_idx, slot, generation))
		return -1;
	return batch_check(env, prog, inst, size_idx, slot, in, nb_rows, 0, rel_tol);
}

static int run_and_compare(struct prog_env *env, const struct gpu_program *prog, struct gpu_instance *inst,
			   uint32_t size_idx, uint32_t slot, const uint8_t *in, uint32_t nb_rows, uint32_t generation)
{
	return run_and_compare_tol(env, prog, inst, size_idx, slot, in, nb_rows, generation, REL_TOLERANCE);
}

#define MLP_IN_FLOATS 8
static const uint32_t g_batches[2] = { 2, PROG_BATCH_MAX };

/* Program 1 (mlp_ops) at batch 2 and 4, its constants random. */
static void mlp_program(struct gpu_program *prog, struct gpu_op ops[2][8], float *consts)
{
	static const uint32_t out_rows[] = { 4 * sizeof(float), 4 * sizeof(float) };

	prog_header(prog, "mlp", MLP_IN_FLOATS * sizeof(float), 2, out_rows);
	for (uint32_t s = 0; s < 2; s++) {
		prog->sizes[s] = (struct gpu_program_size){ .batch = g_batches[s], .ops = ops[s],
							    .nb_ops = mlp_ops(g_batches[s], ops[s]), .arena_bytes = A_BYTES,
							    .input_offset = { A_X }, .output_offset = { A_Y, A_T5 } };
	}
	prog->nb_sizes = 2;
	for (uint32_t i = 0; i < C_BYTES / sizeof(float); i++)
		consts[i] = next_value();
	prog->consts = consts;
	prog->const_bytes = C_BYTES;
}

static void test_program_mlp(void)
{
	const uint32_t *batches = g_batches;
	struct gpu_op ops[2][8];
	float consts[C_BYTES / sizeof(float)], in[PROG_BATCH_MAX * 8];
	struct gpu_program prog;
	struct gpu_loaded *lp = NULL;
	struct gpu_instance *inst = NULL;
	struct prog_env env;
	char err[GPU_ERR_MAX];
	uint32_t s, slot, gen = 0;
	uint64_t dev_addr;

	CU_ASSERT_EQUAL_FATAL(prog_env_open(&env), 0);
	mlp_program(&prog, ops, consts);

	/* host_to_dev: inside the region, and its edges */
	CU_ASSERT_EQUAL(g_ops->host_to_dev(g_dev, env.mem, HOST_BYTES, &dev_addr), 0);
	CU_ASSERT_EQUAL(g_ops->host_to_dev(g_dev, env.mem + 1, HOST_BYTES, &dev_addr), -EFAULT);
	CU_ASSERT_EQUAL(g_ops->host_to_dev(g_dev, env.mem - 1, 1, &dev_addr), -EFAULT);

	CU_ASSERT_EQUAL(g_ops->program_load(g_dev, &prog, &lp, err, sizeof(err)), 0);
	if (lp == NULL) {
		fprintf(stderr, "\n    program_load: %s\n", err);
		prog_env_close(&env);
		return;
	}
	memset(ops, 0, sizeof(ops)); /* the module keeps its own copy */
	mlp_ops(batches[0], ops[0]);
	mlp_ops(batches[1], ops[1]);
	CU_ASSERT_EQUAL(g_ops->instance_create(lp, env.stream, 0, GPU_LAUNCH_GRAPH, &inst, err, sizeof(err)), -EINVAL);
	CU_ASSERT_EQUAL(g_ops->instance_create(lp, env.stream, PROG_SLOTS, GPU_LAUNCH_GRAPH, &inst, err, sizeof(err)), 0);
	if (inst == NULL) {
		fprintf(stderr, "\n    instance_create: %s\n", err);
		g_ops->program_unload(lp);
		prog_env_close(&env);
		return;
	}
	CU_ASSERT_PTR_NULL(g_ops->instance_table(inst, 2, 0));
	CU_ASSERT_PTR_NULL(g_ops->instance_word(inst, 0, PROG_SLOTS));
	CU_ASSERT_EQUAL(g_ops->instance_launch(inst, 0, PROG_SLOTS, err, sizeof(err)), -EINVAL);
	CU_ASSERT_EQUAL(g_ops->instance_launch(inst, 2, 0, err, sizeof(err)), -EINVAL);

	/* every (size, slot), twice each so a slot's second launch runs on new data and a new generation;
	 * batch 4 with 3 rows has one padding row */
	for (int round = 0; round < 2; round++) {
		for (s = 0; s < 2; s++) {
			for (slot = 0; slot < PROG_SLOTS; slot++) {
				uint32_t rows = s == 1 && slot == 1 ? 3 : batches[s];

				for (uint32_t e = 0; e < PROG_BATCH_MAX * 8; e++)
					in[e] = next_value();
				CU_ASSERT_EQUAL(run_and_compare(&env, &prog, inst, s, slot, (const uint8_t *)in, rows,
								++gen), GPU_FAULT_NONE);
			}
		}
	}
	CU_ASSERT_EQUAL(g_ops->health(g_dev, err, sizeof(err)), 0);
	g_ops->instance_destroy(inst);
	g_ops->program_unload(lp);
	prog_env_close(&env);
}

/* Gather rows of a constant [5 x 3] table by each request's int64 index: an index out of range
 * raises GPU_FAULT_INDEX in the table (its row comes back zero) and the device stays healthy. */
static void test_program_gather_fault(void)
{
	enum { G_IDX = 0, G_OUT = 256, G_BYTES = 512 };
	static const uint32_t out_rows[] = { 3 * sizeof(float) };
	struct gpu_op op = { .code = GPU_OP_GATHER, .in = { const_ref(BW_DTYPE_FLOAT, 0), arena_ref(BW_DTYPE_INT64, G_IDX) },
			     .out = arena_ref(BW_DTYPE_FLOAT, G_OUT), .count = PROG_BATCH_MAX * 3 };
	static const int64_t bad_idx[PROG_BATCH_MAX] = { 1, -1, 7, 0 }, good_idx[PROG_BATCH_MAX] = { 4, 3, -5, 2 };
	float data[15];
	struct gpu_program prog;
	struct gpu_loaded *lp = NULL;
	struct gpu_instance *inst = NULL;
	struct prog_env env;
	char err[GPU_ERR_MAX];

	op.u.gather.outer = 1;
	op.u.gather.axis_len = 5;
	op.u.gather.nb_idx = PROG_BATCH_MAX;
	op.u.gather.inner = 3;
	op.u.gather.elem_bytes = sizeof(float);
	for (int i = 0; i < 15; i++)
		data[i] = (float)(i + 1);
	CU_ASSERT_EQUAL_FATAL(prog_env_open(&env), 0);
	prog_header(&prog, "gather", sizeof(int64_t), 1, out_rows);
	prog.nb_sizes = 1;
	prog.sizes[0] = (struct gpu_program_size){ .batch = PROG_BATCH_MAX, .nb_ops = 1, .ops = &op,
						   .arena_bytes = G_BYTES, .input_offset = { G_IDX },
						   .output_offset = { G_OUT } };
	prog.consts = data;
	prog.const_bytes = sizeof(data);

	CU_ASSERT_EQUAL(g_ops->program_load(g_dev, &prog, &lp, err, sizeof(err)), 0);
	if (lp == NULL) {
		fprintf(stderr, "\n    program_load: %s\n", err);
		prog_env_close(&env);
		return;
	}
	CU_ASSERT_EQUAL(g_ops->instance_create(lp, env.stream, 1, GPU_LAUNCH_GRAPH, &inst, err, sizeof(err)), 0);
	if (inst != NULL) {
		CU_ASSERT_EQUAL(run_and_compare(&env, &prog, inst, 0, 0, (const uint8_t *)bad_idx, PROG_BATCH_MAX, 1),
				GPU_FAULT_INDEX);
		CU_ASSERT_EQUAL(g_ops->instance_table(inst, 0, 0)->fault_op, 0);
		CU_ASSERT_EQUAL(((const float *)(env.mem + REPLY_AREA_OFF))[2 * 3], 0.0f);
		CU_ASSERT_EQUAL(g_ops->health(g_dev, err, sizeof(err)), 0);
		/* the host zeroes the fault; the next batch of the same slot is clean */
		CU_ASSERT_EQUAL(run_and_compare(&env, &prog, inst, 0, 0, (const uint8_t *)good_idx, PROG_BATCH_MAX, 2),
				GPU_FAULT_NONE);
		g_ops->instance_destroy(inst);
	} else {
		fprintf(stderr, "\n    instance_create: %s\n", err);
	}
	g_ops->program_unload(lp);
	prog_env_close(&env);
}

/*
 * A CNN block at batch 2 and 4 (3 rows: a padding row): x [b,2,5,5] -> CONV 3x3 pad 1 + bias + Relu
 * (weights and bias constants) -> t [b,4,5,5] -> POOL max 2x2 stride 2 -> y [b,4,2,2]; and t -> POOL
 * average over the whole image -> z [b,4,1,1]. The CUDA module runs CONV with cuDNN when it finds it
 * (cudnn.c; else, and for POOL, its per-item kernel); the host reference is gpu_conv_item.
 */
enum { K_X = 0, K_T = 1024, K_Y = 2816, K_Z = 3072, K_BYTES = 3328, K_W = 0, K_B = 512, K_CONST_BYTES = 528 };

static void conv_geometry(struct gpu_op *op, int64_t n, int64_t c, int64_t hw, int64_t m, int64_t k, int64_t stride,
			  int64_t pad, int64_t dil, int64_t group)
{
	op->u.conv.n = n, op->u.conv.c = c, op->u.conv.h = hw, op->u.conv.w = hw, op->u.conv.m = m;
	op->u.conv.kh = k, op->u.conv.kw = k, op->u.conv.stride_h = stride, op->u.conv.stride_w = stride;
	op->u.conv.pad_h = pad, op->u.conv.pad_w = pad, op->u.conv.dil_h = dil, op->u.conv.dil_w = dil;
	op->u.conv.group = group;
	op->u.conv.oh = (hw + 2 * pad - dil * (k - 1) - 1) / stride + 1;
	op->u.conv.ow = op->u.conv.oh;
	op->count = (uint64_t)(n * m * op->u.conv.oh * op->u.conv.ow);
}

static uint32_t cnn_ops(uint32_t b, struct gpu_op *ops)
{
	ops[0] = (struct gpu_op){ .code = GPU_OP_CONV, .fn = GPU_ACT_RELU,
				  .in = { arena_ref(BW_DTYPE_FLOAT, K_X), const_ref(BW_DTYPE_FLOAT, K_W),
					  const_ref(BW_DTYPE_FLOAT, K_B) },
				  .out = arena_ref(BW_DTYPE_FLOAT, K_T), .count = b * 100u };
	ops[0].u.conv.n = b, ops[0].u.conv.c = 2, ops[0].u.conv.h = 5, ops[0].u.conv.w = 5;
	ops[0].u.conv.m = 4, ops[0].u.conv.oh = 5, ops[0].u.conv.ow = 5, ops[0].u.conv.kh = 3, ops[0].u.conv.kw = 3;
	ops[0].u.conv.stride_h = 1, ops[0].u.conv.stride_w = 1, ops[0].u.conv.pad_h = 1, ops[0].u.conv.pad_w = 1;
	ops[0].u.conv.dil_h = 1, ops[0].u.conv.dil_w = 1, ops[0].u.conv.group = 1;
	ops[1] = (struct gpu_op){ .code = GPU_OP_POOL, .fn = GPU_POOL_MAX, .in = { arena_ref(BW_DTYPE_FLOAT, K_T) },
				  .out = arena_ref(BW_DTYPE_FLOAT, K_Y), .count = b * 16u };
	ops[1].u.conv = ops[0].u.conv;
	ops[1].u.conv.c = 4, ops[1].u.conv.group = 4, ops[1].u.conv.oh = 2, ops[1].u.conv.ow = 2;
	ops[1].u.conv.kh = 2, ops[1].u.conv.kw = 2, ops[1].u.conv.stride_h = 2, ops[1].u.conv.stride_w = 2;
	ops[1].u.conv.pad_h = 0, ops[1].u.conv.pad_w = 0;
	ops[2] = (struct gpu_op){ .code = GPU_OP_POOL, .fn = GPU_POOL_AVG, .in = { arena_ref(BW_DTYPE_FLOAT, K_T) },
				  .out = arena_ref(BW_DTYPE_FLOAT, K_Z), .count = b * 4u };
	ops[2].u.conv = ops[1].u.conv;
	ops[2].u.conv.oh = 1, ops[2].u.conv.ow = 1, ops[2].u.conv.kh = 5, ops[2].u.conv.kw = 5;
	ops[2].u.conv.stride_h = 1, ops[2].u.conv.stride_w = 1;
	return 3;
}

#define CNN_IN_FLOATS 50

/* The CNN block (cnn_ops) at batch 2 and 4, its constants random. */
static void cnn_program(struct gpu_program *prog, struct gpu_op ops[2][4], float *consts)
{
	static const uint32_t out_rows[] = { 16 * sizeof(float), 4 * sizeof(float) };

	prog_header(prog, "cnn", CNN_IN_FLOATS * sizeof(float), 2, out_rows);
	for (uint32_t s = 0; s < 2; s++)
		prog->sizes[s] = (struct gpu_program_size){ .batch = g_batches[s], .ops = ops[s],
							    .nb_ops = cnn_ops(g_batches[s], ops[s]), .arena_bytes = K_BYTES,
							    .input_offset = { K_X }, .output_offset = { K_Y, K_Z } };
	prog->nb_sizes = 2;
	for (uint32_t i = 0; i < K_CONST_BYTES / sizeof(float); i++)
		consts[i] = next_value();
	prog->consts = consts;
	prog->const_bytes = K_CONST_BYTES;
}

/* One CONV program: its ops at batch 2 and PROG_BATCH_MAX, random constants and inputs. */
struct conv_case {
	const char *name;
	uint32_t (*ops)(const struct conv_case *cc, uint32_t b, struct gpu_op *ops);
	void (*consts)(const struct conv_case *cc, uint8_t *blob); /* NULL, or fixes the random floats */
	uint32_t in_row, nb_outputs;
	uint32_t out_rows[3];
	uint64_t arena_bytes, input_offset, output_offset[3], const_bytes;
	uint32_t dtype;   /* the ops' float operands: float32, or float16 between CASTs */
	uint32_t nhwc;    /* CONV and POOL ops' layout */
	float rel_tol;
};

static uint32_t cnn_case_ops(const struct conv_case *cc, uint32_t b, struct gpu_op *ops)
{
	(void)cc;
	return cnn_ops(b, ops);
}

/*
 * Every CONV feature, at batch 2 and 4 (3 rows), x [b,4,7,7] in:
 *   z  = POOL avg 3x3 stride 2 (x)                                       [b,4,3,3]
 *   ya = relu(CONV 3x3 group 2 stride 2 pad 1 dilation 2 (x) + bias + z)  [b,4,3,3]  output 0
 *   yb = relu(CONV 3x3 (x)), no bias, no residual                         [b,6,5,5]  output 1
 *   p  = SQRT(x): NaN where x < 0, then
 *   p  = CONV 1x1 (x) + bias, no Relu, no residual, written over p         [b,4,7,7]  output 2
 * On cuDNN: ya and yb take the fused call (a zero bias for yb, z = y with alpha2 = 0); p the fused call
 * with an IDENTITY activation (IMPLICIT_PRECOMP_GEMM) or the separate calls, and the NaN that p held
 * shows whether alpha2 = 0 keeps cuDNN from reading z. In float16 the ops work on float16 areas
 * between CASTs (as gpu_compile's fp16 pass makes them) and ya's bias stays a float32 constant, which
 * the plan converts; in NHWC every CONV and POOL op stores [n][h][w][c], the weights [m][kh][kw][c/g].
 */
enum { F_X = 0, F_Z = 3328, F_YA = 4096, F_YB = 4864, F_P = 7424, F_BYTES = 10752,
       F_XH = 10752, F_ZH = 12544, F_YAH = 13056, F_YBH = 13568, F_PH = 14848, F16_BYTES = 16640,
       F_WA = 0, F_BA = 512, F_WB = 768, F_WC = 1792, F_BC = 2048, F_CONST_BYTES = 2064 };

static struct gpu_op cast_op(uint64_t from_off, uint32_t from, uint64_t to_off, uint32_t to, uint64_t count)
{
	struct gpu_op op = { .code = GPU_OP_CAST, .in = { arena_ref(from, from_off) }, .out = arena_ref(to, to_off),
			     .count = count };

	op.u.cast.from = from;
	op.u.cast.to = to;
	return op;
}

static uint32_t conv_features_ops(const struct conv_case *cc, uint32_t b, struct gpu_op *ops)
{
	uint32_t d = cc->dtype, n = 0, k;
	bool h = d == BW_DTYPE_FLOAT16;
	uint64_t x = h ? F_XH : F_X, z = h ? F_ZH : F_Z, ya = h ? F_YAH : F_YA, yb = h ? F_YBH : F_YB;
	uint64_t p = h ? F_PH : F_P;
	struct gpu_ref none = { 0 };

	if (h)
		ops[n++] = cast_op(F_X, BW_DTYPE_FLOAT, F_XH, BW_DTYPE_FLOAT16, b * 196u);
	ops[n] = (struct gpu_op){ .code = GPU_OP_POOL, .fn = GPU_POOL_AVG, .in = { arena_ref(d, x) },
				  .out = arena_ref(d, z) };
	conv_geometry(&ops[n++], b, 4, 7, 4, 3, 2, 0, 1, 4);
	ops[n] = (struct gpu_op){ .code = GPU_OP_CONV, .fn = GPU_ACT_RELU,
				  .in = { arena_ref(d, x), const_ref(d, F_WA), const_ref(BW_DTYPE_FLOAT, F_BA), arena_ref(d, z) },
				  .out = arena_ref(d, ya) };
	conv_geometry(&ops[n++], b, 4, 7, 4, 3, 2, 1, 2, 2);
	ops[n] = (struct gpu_op){ .code = GPU_OP_CONV, .fn = GPU_ACT_RELU,
				  .in = { arena_ref(d, x), const_ref(d, F_WB), none, none }, .out = arena_ref(d, yb) };
	conv_geometry(&ops[n++], b, 4, 7, 6, 3, 1, 0, 1, 1);
	ops[n++] = (struct gpu_op){ .code = GPU_OP_UNARY, .fn = GPU_UNARY_SQRT, .in = { arena_ref(d, x) },
				    .out = arena_ref(d, p), .count = b * 196u };
	ops[n] = (struct gpu_op){ .code = GPU_OP_CONV, .fn = GPU_ACT_NONE,
				  .in = { arena_ref(d, x), const_ref(d, F_WC), const_ref(d, F_BC), none },
				  .out = arena_ref(d, p) };
	conv_geometry(&ops[n++], b, 4, 7, 4, 1, 1, 0, 1, 1);
	if (h) {
		ops[n++] = cast_op(F_YAH, BW_DTYPE_FLOAT16, F_YA, BW_DTYPE_FLOAT, b * 36u);
		ops[n++] = cast_op(F_YBH, BW_DTYPE_FLOAT16, F_YB, BW_DTYPE_FLOAT, b * 150u);
		ops[n++] = cast_op(F_PH, BW_DTYPE_FLOAT16, F_P, BW_DTYPE_FLOAT, b * 196u);
	}
	for (k = 0; k < n; k++)
		if (ops[k].code == GPU_OP_CONV || ops[k].code == GPU_OP_POOL)
			ops[k].u.conv.nhwc = cc->nhwc;
	return n;
}

/* float16: the weights and p's bias converted in place; ya's bias stays float32 */
static void conv_features_consts(const struct conv_case *cc, uint8_t *blob)
{
	static const uint64_t half[][2] = { { F_WA, 72 }, { F_WB, 216 }, { F_WC, 16 }, { F_BC, 4 } };

	if (cc->dtype != BW_DTYPE_FLOAT16)
		return;
	for (uint32_t r = 0; r < sizeof(half) / sizeof(half[0]); r++) {
		for (uint64_t e = 0; e < half[r][1]; e++) {
			float f;
			uint16_t v;

			memcpy(&f, blob + half[r][0] + e * sizeof(float), sizeof(f));
			v = bw_float_to_half(f);
			memcpy(blob + half[r][0] + e * sizeof(v), &v, sizeof(v));
		}
	}
}

static void conv_case_run(const struct conv_case *cc)
{
	static const uint32_t batches[] = { 2, PROG_BATCH_MAX };
	struct gpu_op ops[2][12];
	float consts[F_CONST_BYTES / sizeof(float)], in[PROG_BATCH_MAX * 196];
	struct gpu_program prog;
	struct gpu_loaded *lp = NULL;
	struct gpu_instance *inst = NULL;
	struct prog_env env;
	char err[GPU_ERR_MAX];
	uint32_t s, gen = 0;

	CU_ASSERT_FATAL(cc->const_bytes <= sizeof(consts) && cc->in_row <= sizeof(in) / PROG_BATCH_MAX);
	CU_ASSERT_EQUAL_FATAL(prog_env_open(&env), 0);
	prog_header(&prog, cc->name, cc->in_row, cc->nb_outputs, cc->out_rows);
	for (s = 0; s < 2; s++) {
		prog.sizes[s] = (struct gpu_program_size){ .batch = batches[s], .ops = ops[s],
							   .nb_ops = cc->ops(cc, batches[s], ops[s]),
							   .arena_bytes = cc->arena_bytes, .input_offset = { cc->input_offset } };
		memcpy(prog.sizes[s].output_offset, cc->output_offset, sizeof(cc->output_offset));
	}
	prog.nb_sizes = 2;
	for (s = 0; s < cc->const_bytes / sizeof(float); s++)
		consts[s] = next_value();
	if (cc->consts != NULL)
		cc->consts(cc, (uint8_t *)consts);
	prog.consts = consts;
	prog.const_bytes = cc->const_bytes;
	CU_ASSERT_EQUAL(g_ops->program_load(g_dev, &prog, &lp, err, sizeof(err)), 0);
	if (lp == NULL) {
		fprintf(stderr, "\n    program_load: %s\n", err);
		prog_env_close(&env);
		return;
	}
	CU_ASSERT_EQUAL(g_ops->instance_create(lp, env.stream, 1, GPU_LAUNCH_GRAPH, &inst, err, sizeof(err)), 0);
	if (inst != NULL) {
		for (s = 0; s < 2; s++) {
			for (uint32_t e = 0; e < PROG_BATCH_MAX * cc->in_row / sizeof(float); e++)
				in[e] = next_value();
			CU_ASSERT_EQUAL(run_and_compare_tol(&env, &prog, inst, s, 0, (const uint8_t *)in, s == 1 ? 3 : 2,
							    ++gen, cc->rel_tol),
					GPU_FAULT_NONE);
		}
		g_ops->instance_destroy(inst);
	} else {
		fprintf(stderr, "\n    instance_create: %s\n", err);
	}
	g_ops->program_unload(lp);
	prog_env_close(&env);
}

static void test_program_cnn(void)
{
	static const struct conv_case cc = { .name = "cnn", .ops = cnn_case_ops, .in_row = 50 * sizeof(float),
					     .nb_outputs = 2, .out_rows = { 16 * sizeof(float), 4 * sizeof(float) },
					     .arena_bytes = K_BYTES, .input_offset = K_X, .output_offset = { K_Y, K_Z },
					     .const_bytes = K_CONST_BYTES, .dtype = BW_DTYPE_FLOAT,
					     .rel_tol = CONV_REL_TOLERANCE };

	conv_case_run(&cc);
}

/* The features program in one dtype and layout; float16 is held to 1e-2 (its outputs are rounded to
 * 11 bits, and cuDNN's separate calls round between them) */
static void conv_features_run(const char *name, uint32_t dtype, uint32_t nhwc)
{
	struct conv_case cc = {
		.name = name, .ops = conv_features_ops, .consts = conv_features_consts, .in_row = 196 * sizeof(float),
		.nb_outputs = 3, .out_rows = { 36 * sizeof(float), 150 * sizeof(float), 196 * sizeof(float) },
		.arena_bytes = dtype == BW_DTYPE_FLOAT16 ? F16_BYTES : F_BYTES, .input_offset = F_X,
		.output_offset = { F_YA, F_YB, F_P }, .const_bytes = F_CONST_BYTES, .dtype = dtype, .nhwc = nhwc,
		.rel_tol = dtype == BW_DTYPE_FLOAT16 ? CONV_F16_REL_TOLERANCE : CONV_REL_TOLERANCE };

	conv_case_run(&cc);
}

static void test_program_conv_features(void)
{
	conv_features_run("conv-features", BW_DTYPE_FLOAT, 0);
}

static void test_program_conv_features_nhwc(void)
{
	conv_features_run("conv-features-nhwc", BW_DTYPE_FLOAT, 1);
}

static void test_program_conv_features_f16(void)
{
	conv_features_run("conv-features-f16", BW_DTYPE_FLOAT16, 0);
}

static void test_program_conv_features_f16_nhwc(void)
{
	conv_features_run("conv-features-f16-nhwc", BW_DTYPE_FLOAT16, 1);
}

/* ---- the doorbell launch mode ---------------------------------------------------------------------------- */

#define DB_PAIRS (2 * PROG_SLOTS)    /* (size, slot) pairs of the programs here */
#define DB_ROUNDS 3
#define DB_RANDOM_LAUNCHES 60
#define DB_ROUND_TRIPS 200
#define DB_ROUND_TRIPS_FAKE 20       /* the fake's thread naps between pieces of work: each takes ~ms */
#define DB_TIME_ITERS 100

/* A batch in flight: its pair's inputs, rows and generation; area = its pair's index. */
struct db_batch {
	bool busy;
	uint32_t rows, generation;
	float in[PROG_BATCH_MAX * CNN_IN_FLOATS];
};

static void db_ring(struct prog_env *env, const struct gpu_program *prog, struct gpu_instance *inst, uint32_t k,
		    struct db_batch *b, uint32_t in_floats, uint32_t generation)
{
	uint32_t size_idx = k / PROG_SLOTS, slot = k % PROG_SLOTS, batch = prog->sizes[size_idx].batch;
	char err[GPU_ERR_MAX];

	b->rows = generation % 2 ? batch : batch - 1; /* every other one with a padding row */
	b->generation = generation;
	for (uint32_t e = 0; e < batch * in_floats; e++)
		b->in[e] = next_value();
	batch_prepare(env, prog, inst, size_idx, slot, (const uint8_t *)b->in, b->rows, generation, k);
	CU_ASSERT_EQUAL(g_ops->instance_launch(inst, size_idx, slot, err, sizeof(err)), 0);
	b->busy = true;
}

static void db_finish(struct prog_env *env, const struct gpu_program *prog, struct gpu_instance *inst, uint32_t k,
		      struct db_batch *b, float rel_tol)
{
	CU_ASSERT_EQUAL_FATAL(batch_wait(inst, k / PROG_SLOTS, k % PROG_SLOTS, b->generation), 1);
	CU_ASSERT_EQUAL(batch_check(env, prog, inst, k / PROG_SLOTS, k % PROG_SLOTS, (const uint8_t *)b->in, b->rows, k,
				    rel_tol),
			GPU_FAULT_NONE);
	b->busy = false;
}

/* Mean microseconds of launch -> word round trips of (0, 0), one at a time. */
static double db_round_trip_us(struct prog_env *env, const struct gpu_program *prog, struct gpu_instance *inst,
			       uint32_t in_floats, uint32_t *gen)
{
	float in[PROG_BATCH_MAX * CNN_IN_FLOATS];
	char err[GPU_ERR_MAX];
	uint32_t n = g_fake ? DB_ROUND_TRIPS_FAKE : DB_ROUND_TRIPS, done = 0;
	long long start;

	for (uint32_t e = 0; e < prog->sizes[0].batch * in_floats; e++)
		in[e] = next_value();
	batch_prepare(env, prog, inst, 0, 0, (const uint8_t *)in, prog->sizes[0].batch, *gen, 0);
	start = now_ns();
	for (uint32_t i = 0; i < n; i++) {
		g_ops->instance_table(inst, 0, 0)->generation = ++*gen;
		if (g_ops->instance_launch(inst, 0, 0, err, sizeof(err)) != 0 || !batch_wait(inst, 0, 0, *gen))
			break;
		done++;
	}
	CU_ASSERT_EQUAL(done, n);
	return (double)(now_ns() - start) / 1000.0 / (done ? done : 1);
}

/*
 * Doorbell mode on one program: every (size, slot) in flight at once, rung in a different order each
 * round; then random pairs, each reused once its word came; another instance made and destroyed
 * (a park) with launches in flight; instance_destroy with launches still rung; the round trip and instance_time against graph mode (printed, not asserted).
 */
static void doorbell_case(const struct gpu_program *prog, uint32_t in_floats, float rel_tol)
{
	static struct db_batch batches[DB_PAIRS];
	struct gpu_loaded *lp = NULL;
	struct gpu_instance *inst = NULL, *graph_inst = NULL;
	struct prog_env env;
	char err[GPU_ERR_MAX];
	uint32_t gen = 0, rng = 7, k;
	double rt_db, rt_graph, ms_db = 0, ms_graph = 0;

	CU_ASSERT_EQUAL_FATAL(prog_env_open(&env), 0);
	CU_ASSERT_EQUAL(g_ops->program_load(g_dev, prog, &lp, err, sizeof(err)), 0);
	if (lp == NULL) {
		fprintf(stderr, "\n    %s: program_load: %s\n", prog->name, err);
		prog_env_close(&env);
		return;
	}
	CU_ASSERT_EQUAL(g_ops->instance_create(lp, env.stream, PROG_SLOTS, GPU_LAUNCH_DOORBELL, &inst, err, sizeof(err)), 0);
	if (inst == NULL) {
		fprintf(stderr, "\n    %s: instance_create (doorbell): %s\n", prog->name, err);
		g_ops->program_unload(lp);
		prog_env_close(&env);
		return;
	}
	CU_ASSERT_EQUAL(g_ops->instance_launch(inst, 2, 0, err, sizeof(err)), -EINVAL);
	CU_ASSERT_EQUAL(g_ops->instance_launch(inst, 0, PROG_SLOTS, err, sizeof(err)), -EINVAL);
	memset(batches, 0, sizeof(batches));
	for (uint32_t round = 0; round < DB_ROUNDS; round++) {
		for (uint32_t i = 0; i < DB_PAIRS; i++)
			db_ring(&env, prog, inst, (i * 3 + round) % DB_PAIRS, &batches[(i * 3 + round) % DB_PAIRS],
				in_floats, ++gen);
		for (k = 0; k < DB_PAIRS; k++)
			db_finish(&env, prog, inst, k, &batches[k], rel_tol);
	}
	for (uint32_t i = 0; i < DB_RANDOM_LAUNCHES; i++) {
		rng = rng * 1103515245u + 12345u;
		k = (rng >> 16) % DB_PAIRS;
		if (batches[k].busy)
			db_finish(&env, prog, inst, k, &batches[k], rel_tol);
		db_ring(&env, prog, inst, k, &batches[k], in_floats, ++gen);
	}
	for (k = 0; k < DB_PAIRS; k++)
		if (batches[k].busy)
			db_finish(&env, prog, inst, k, &batches[k], rel_tol);
	CU_ASSERT_EQUAL(g_ops->health(g_dev, err, sizeof(err)), 0);

	rt_db = db_round_trip_us(&env, prog, inst, in_floats, &gen);
	CU_ASSERT_EQUAL(g_ops->instance_time(inst, 0, 0, DB_TIME_ITERS, &ms_db, err, sizeof(err)), 0);
	CU_ASSERT_EQUAL(g_ops->instance_create(lp, env.stream, 1, GPU_LAUNCH_GRAPH, &graph_inst, err, sizeof(err)), 0);
	if (graph_inst != NULL) {
		uint32_t graph_gen = 0;

		rt_graph = db_round_trip_us(&env, prog, graph_inst, in_floats, &graph_gen);
		CU_ASSERT_EQUAL(g_ops->instance_time(graph_inst, 0, 0, DB_TIME_ITERS, &ms_graph, err, sizeof(err)), 0);
		printf("\n    %s batch %u: launch -> word round trip %.2f us (doorbell), %.2f us (graph); graph time "
		       "%.4f ms (doorbell instance), %.4f ms (graph instance)", prog->name, prog->sizes[0].batch, rt_db,
		       rt_graph, ms_db, ms_graph);
		g_ops->instance_destroy(graph_inst);
	}

	/*
	 * Another instance made and destroyed while this one has launches in flight: its cudaFree and
	 * cudaFreeHost park this dispatcher (park_now) rather than wait behind it; the launches are held,
	 * then taken by the chain the resume starts.
	 */
	for (k = 0; k < DB_PAIRS; k++)
		db_ring(&env, prog, inst, k, &batches[k], in_floats, ++gen);
	graph_inst = NULL;
	CU_ASSERT_EQUAL(g_ops->instance_create(lp, env.stream, 1, GPU_LAUNCH_GRAPH, &graph_inst, err, sizeof(err)), 0);
	g_ops->instance_destroy(graph_inst);
	for (k = 0; k < DB_PAIRS; k++)
		db_finish(&env, prog, inst, k, &batches[k], rel_tol);
	CU_ASSERT_EQUAL(g_ops->health(g_dev, err, sizeof(err)), 0);

	/* destroy with launches rung: they run first (the stop entry comes after them) */
	for (k = 0; k < DB_PAIRS; k++)
		db_ring(&env, prog, inst, k, &batches[k], in_floats, ++gen);
	g_ops->instance_destroy(inst);
	for (k = 0; k < DB_PAIRS; k++) {
		const uint8_t *reply = env.mem + (size_t)k * AREA_BYTES + REPLY_AREA_OFF;

		/* scattered before the instance went: 0xeeeeeeee (-3.7e28) is no result here */
		CU_ASSERT_NOT_EQUAL(memcmp(reply, "\xee\xee\xee\xee", 4), 0);
	}
	/* an idle one, never rung */
	inst = NULL;
	CU_ASSERT_EQUAL(g_ops->instance_create(lp, env.stream, PROG_SLOTS, GPU_LAUNCH_DOORBELL, &inst, err, sizeof(err)), 0);
	g_ops->instance_destroy(inst);
	CU_ASSERT_EQUAL(g_ops->health(g_dev, err, sizeof(err)), 0);
	g_ops->program_unload(lp);
	prog_env_close(&env);
}

static void test_program_doorbell(void)
{
	struct gpu_op mlp[2][8], cnn[2][4];
	float mlp_consts[C_BYTES / sizeof(float)], cnn_consts[K_CONST_BYTES / sizeof(float)];
	struct gpu_program prog;

	/* cuBLASLt's kernels in device-launched graphs, then a program of the module's own kernels only */
	mlp_program(&prog, mlp, mlp_consts);
	doorbell_case(&prog, MLP_IN_FLOATS, REL_TOLERANCE);
	cnn_program(&prog, cnn, cnn_consts);
	doorbell_case(&prog, CNN_IN_FLOATS, CONV_REL_TOLERANCE); /* cuDNN's CONV: see CONV_REL_TOLERANCE */
}

/* A program the checks refuse is -EINVAL with a reason, and costs the device nothing. */
static void test_program_refused(void)
{
	struct gpu_program prog;
	struct gpu_loaded *lp = NULL;
	char err[GPU_ERR_MAX] = "";

	prog_header(&prog, "empty", 4, 0, NULL);
	prog.nb_sizes = 0; /* no batch size at all */
	CU_ASSERT_EQUAL(g_ops->program_load(g_dev, &prog, &lp, err, sizeof(err)), -EINVAL);
	CU_ASSERT_PTR_NULL(lp);
	CU_ASSERT_NOT_EQUAL(err[0], '\0');
	CU_ASSERT_EQUAL(g_ops->health(g_dev, err, sizeof(err)), 0);
}

int main(int argc, char **argv)
{
	static CU_TestInfo tests[] = {
		{ "register, a COPY program through registered memory, launch -> poll round trips",
		  test_register_and_copy },
		{ "program: relu, gemm+bias+relu, broadcast add, softmax, batched gemm", test_program_mlp },
		{ "program: gather index out of range raises the fault word", test_program_gather_fault },
		{ "program: conv + bias + relu, max pool, global average pool", test_program_cnn },
		{ "program: conv with group, stride, pad, dilation, bias, residual, relu; without bias; "
		  "bias only over NaN", test_program_conv_features },
		{ "program: the same conv features in NHWC", test_program_conv_features_nhwc },
		{ "program: the same conv features in float16 (a float32 bias converted)", test_program_conv_features_f16 },
		{ "program: the same conv features in float16, NHWC", test_program_conv_features_f16_nhwc },
		{ "program: refused by the checks", test_program_refused },
		{ "program: doorbell launches, mixed sizes and slots in flight; destroy with launches rung",
		  test_program_doorbell },
		CU_TEST_INFO_NULL,
	};
	static CU_SuiteInfo suites[] = {
		{ "cuda device 0", NULL, NULL, NULL, NULL, tests },
		CU_SUITE_INFO_NULL,
	};
	struct gpu_module mod = { 0 };
	struct gpu_probe probe;
	char err[GPU_ERR_MAX];
	int rc;

	if (argc != 2) {
		fprintf(stderr, "usage: %s MODULE|--fake\n", argv[0]);
		return 1;
	}
	if (strcmp(argv[1], "--fake") == 0) {
		/* pages pinned whole, as cudaHostRegister does */
		struct gpu_fake_config cfg = { .nb_devices = 1, .mode = GPU_FAKE_THREAD, .seed = 1,
					       .pin_page_bytes = PAGE_BYTES };

		gpu_fake_configure(&cfg);
		g_ops = gpu_fake_ops();
		g_fake = true;
	} else {
		rc = gpu_module_load(argv[1], &mod, err, sizeof(err));
		if (rc < 0) {
			fprintf(stderr, "cannot load the CUDA module: %s\n", err);
			return 1; /* it was built: failing to load it is a failure, not a skip */
		}
		g_ops = mod.ops;
	}
	g_ops->probe(&probe);
	if (probe.count == 0) {
		printf("SKIP: %s\n", probe.reason);
		if (mod.handle != NULL)
			gpu_module_unload(&mod);
		return BW_TEST_EXIT_SKIP;
	}
	printf("device 0: %s, compute capability %d.%d\n", probe.devices[0].name, probe.devices[0].cc_major,
	       probe.devices[0].cc_minor);
	if (g_ops->dev_open(0, &g_dev, err, sizeof(err)) < 0) {
		fprintf(stderr, "device 0: %s\n", err);
		if (mod.handle != NULL)
			gpu_module_unload(&mod);
		return 1;
	}
	rc = bw_cunit_run(suites);
	g_ops->dev_close(g_dev);
	if (mod.handle != NULL)
		gpu_module_unload(&mod);
	return rc;
}
