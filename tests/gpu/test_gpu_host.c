/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * gpu/'s host side against the fake device: models compiled into device programs (gpu_compile), run
 * by the GPU executor through batch tables and graph launches, and compared with the runtime's CPU
 * plan on the same padded batch. Also: refusals at compile time, slots, out-of-order completion on two
 * streams, unregistered memory, a kernel fault, a lost device.
 *
 * argv[1], argv[2], argv[3]: models/mlp.onnx, models/minilm.onnx and models/cnn.onnx (built by models/;
 * a missing one fails the tests that need it with its path named). The CNN is optimised for the GPU
 * first (its Conv + BatchNormalization + Relu become FusedConv, weights left in ONNX's layout).
 */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../bw_cunit.h"
#include "../runtime/onnx_build.h"
#include "defs.h"
#include "exec/executor.h"
#include "exec/plan.h"
#include "fake.h"
#include "graph.h"
#include "host.h"

#define ROWS_MAX 8
#define SLOTS 2

static const char *g_mlp_path = "models/mlp.onnx";
static const char *g_minilm_path = "models/minilm.onnx";
static const char *g_cnn_path = "models/cnn.onnx";
static const char *g_resnet50_path = "models/resnet50.onnx";
static uint32_t g_mode = GPU_LAUNCH_GRAPH; /* the executors' launch mode: each suite's init sets it */

/* The device side of a test: the fake, opened, with one or two streams. */
struct rig {
	const struct gpu_ops *ops;
	struct gpu_dev *dev;
	struct gpu_stream *stream[2];
	struct rt_graph *g;
	struct gpu_host_program prog;
	struct gpu_executor *ex[2];
	uint8_t *mem;            /* registered: every task's inputs and outputs */
	size_t mem_bytes;
};

static int rig_open_at(struct rig *r, struct rt_graph *g, const int64_t *sizes, unsigned int nb_sizes,
		       unsigned int nb_streams, size_t mem_bytes, const struct gpu_compile_options *o)
{
	struct gpu_fake_config cfg = { .nb_devices = 1, .mode = GPU_FAKE_ON_DEMAND, .seed = 7 };
	char err[GPU_ERR_MAX] = "";
	void *dev_addr;
	int rc;

	memset(r, 0, sizeof(*r));
	gpu_fake_configure(&cfg);
	r->ops = gpu_fake_ops();
	r->g = g;
	CU_ASSERT_PTR_NOT_NULL_FATAL(g);
	rc = r->ops->dev_open(0, &r->dev, err, sizeof(err));
	CU_ASSERT_EQUAL_FATAL(rc, 0);
	/* the daemon's and bwrun's way, on a fake opened by hand (ON_DEMAND: the test finishes the work) */
	rc = gpu_host_program_load(&(struct gpu_host_device){.ops = r->ops, .dev = r->dev, .info.name = "fake"}, g,
				   sizes, nb_sizes, o, &r->prog, err, sizeof(err));
	if (rc != 0)
		printf("\n  gpu_host_program_load: %s\n", err);
	CU_ASSERT_EQUAL_FATAL(rc, 0);
	for (unsigned int s = 0; s < nb_streams; s++) {
		CU_ASSERT_EQUAL_FATAL(r->ops->stream_create(r->dev, &r->stream[s], err, sizeof(err)), 0);
		r->ex[s] = gpu_executor_create(r->ops, r->dev, r->prog.loaded, r->prog.compiled, r->stream[s], SLOTS,
						 g_mode, err,
					       sizeof(err));
		if (r->ex[s] == NULL)
			printf("\n  gpu_executor_create: %s\n", err);
		CU_ASSERT_PTR_NOT_NULL_FATAL(r->ex[s]);
	}
	r->mem_bytes = mem_bytes;
	r->mem = aligned_alloc(4096, (mem_bytes + 4095) & ~(size_t)4095);
	CU_ASSERT_PTR_NOT_NULL_FATAL(r->mem);
	memset(r->mem, 0, mem_bytes);
	rc = r->ops->host_register(r->dev, r->mem, mem_bytes, &dev_addr, err, sizeof(err));
	CU_ASSERT_EQUAL_FATAL(rc, 0);
	return 0;
}

static int rig_open(struct rig *r, struct rt_graph *g, const int64_t *sizes, unsigned int nb_sizes,
		    unsigned int nb_streams, size_t mem_bytes)
{
	const struct gpu_compile_options o = { GPU_PRECISION_FP32, GPU_LAYOUT_AUTO };

	return rig_open_at(r, g, sizes, nb_sizes, nb_streams, mem_bytes, &o);
}

static void rig_close(struct rig *r)
{
	for (unsigned int s = 0; s < 2; s++) {
		gpu_executor_destroy(r->ex[s]);
		if (r->stream[s] != NULL)
			r->ops->stream_destroy(r->stream[s]);
	}
	gpu_host_program_unload(&(struct gpu_host_device){.ops = r->ops, .dev = r->dev}, &r->prog);
	if (r->mem != NULL)
		r->ops->host_unregister(r->dev, r->mem, NULL, 0);
	r->ops->dev_close(r->dev);
	rt_graph_free(r->g);
	free(r->mem);
}

struct done {
	unsigned int count;
	struct bw_batch *batch[8];
	enum bw_status status[8];
	char msg[8][RT_EXECUTOR_MSG_MAX];
};

static void on_done(void *ctx, const struct bw_completion *c)
{
	struct done *d = ctx;

	if (d->count < 8) {
		d->batch[d->count] = c->batch;
		d->status[d->count] = c->status;
		snprintf(d->msg[d->count], sizeof(d->msg[0]), "%s", c->msg);
	}
	d->count++;
}

static struct rt_graph *load(const char *path)
{
	char err[RT_ERR_MAX] = "";
	struct rt_graph *g;

	CU_ASSERT_EQUAL(rt_cpu_kernels_register(), 0);
	g = rt_graph_load(path, err, sizeof(err));
	if (g == NULL)
		printf("\n  %s: %s (build models/ with onnx and numpy installed)\n", path, err);
	return g;
}

/* A model as bwrun --device gpu and the daemon take it: loaded, then optimised for the GPU (report:
 * NULL, or what the optimiser did). Fatal when either fails. */
static struct rt_graph *load_for_gpu(const char *path, struct rt_opt_report *report)
{
	char err[RT_ERR_MAX] = "";
	struct rt_graph *g = load(path);
	int rc;

	CU_ASSERT_PTR_NOT_NULL_FATAL(g);
	CU_ASSERT_EQUAL_FATAL(gpu_kernels_register(), 0);
	rc = rt_graph_optimize(g, RT_DEVICE_GPU, report, err, sizeof(err));
	if (rc != 0)
		printf("\n  %s: optimising for the GPU: %s\n", path, err);
	CU_ASSERT_EQUAL_FATAL(rc, 0);
	return g;
}

/* A deterministic value for element i of input t: ids below vocab for int64 inputs, else floats. */
static void fill_input(uint8_t dtype, void *p, size_t n, unsigned int seed, int64_t vocab, bool mask)
{
	uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;

	for (size_t i = 0; i < n; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		if (dtype == BW_DTYPE_INT64)
			((int64_t *)p)[i] = mask ? (int64_t)((i % 128) < 100) : (int64_t)(x % (uint64_t)vocab);
		else
			((float *)p)[i] = (float)((double)(x % 20001) / 10000.0 - 1.0);
	}
}

/*
 * Runs the model on the CPU at the padded size with the tasks' rows (zero padding) and checks each
 * task's output rows against it: relative to the output's largest magnitude, within tol.
 */
static void check_against_cpu(struct rig *r, const struct bw_batch *batch, double tol)
{
	char err[RT_ERR_MAX] = "";
	struct rt_plan *p = rt_plan_create(r->g, batch->padded_size, RT_DEVICE_CPU, err, sizeof(err));
	struct rt_tensor in[GPU_PROG_TENSORS_MAX], out[GPU_PROG_TENSORS_MAX];
	void *arena;

	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	arena = aligned_alloc(RT_PLAN_ALIGN, rt_plan_arena_bytes(p));
	CU_ASSERT_PTR_NOT_NULL_FATAL(arena);
	rt_plan_bind(p, arena, in, out);
	for (uint32_t t = 0; t < r->prog.compiled->prog.nb_inputs; t++) {
		uint32_t rb = r->prog.compiled->prog.input_row_bytes[t], row = 0;

		memset(in[t].data, 0, (size_t)rb * batch->padded_size);
		for (uint16_t k = 0; k < batch->num_tasks; k++) {
			memcpy((uint8_t *)in[t].data + (size_t)row * rb, batch->tasks[k]->inputs[t].data,
			       batch->tasks[k]->inputs[t].len);
			row += batch->tasks[k]->rows;
		}
	}
	CU_ASSERT_EQUAL_FATAL(rt_plan_run(p, arena, err, sizeof(err)), 0);
	for (uint32_t t = 0; t < r->prog.compiled->prog.nb_outputs; t++) {
		uint32_t rb = r->prog.compiled->prog.output_row_bytes[t], row = 0;
		const float *ref = out[t].data;
		size_t n = (size_t)rb / sizeof(float) * batch->size;
		double scale = 1e-30, worst = 0.0;

		for (size_t i = 0; i < n; i++)
			scale = fabs(ref[i]) > scale ? fabs(ref[i]) : scale;
		for (uint16_t k = 0; k < batch->num_tasks; k++) {
			const float *got = (const float *)batch->tasks[k]->outputs[t].data;
			size_t m = batch->tasks[k]->outputs[t].len / sizeof(float);

			for (size_t i = 0; i < m; i++) {
				double d = fabs((double)got[i] - ref[(size_t)row * rb / sizeof(float) + i]);

				worst = d > worst ? d : worst;
				CU_ASSERT_FALSE(isnan(got[i]));
			}
			row += batch->tasks[k]->rows;
		}
		CU_ASSERT(worst <= tol * scale);
		if (worst > tol * scale)
			printf("\n  output %u: max abs error %g, scale %g\n", t, worst, scale);
	}
	free(arena);
	rt_plan_free(p);
}

/* Lays out tasks of the given rows in r->mem: inputs then outputs, each task's rows contiguous. */
static void make_batch(struct rig *r, struct bw_batch *batch, struct bw_batch_task *tasks,
		       struct bw_batch_task **ptrs, const uint32_t *rows, uint16_t nb_tasks, uint32_t padded,
		       size_t *mem_off, unsigned int seed)
{
	const struct gpu_program *prog = &r->prog.compiled->prog;
	int64_t vocab = 30522;

	memset(batch, 0, sizeof(*batch));
	batch->padded_size = padded;
	batch->num_tasks = nb_tasks;
	batch->num_inputs = (uint16_t)prog->nb_inputs;
	batch->num_outputs = (uint16_t)prog->nb_outputs;
	batch->tasks = ptrs;
	for (uint16_t k = 0; k < nb_tasks; k++) {
		struct bw_batch_task *task = &tasks[k];

		memset(task, 0, sizeof(*task));
		ptrs[k] = task;
		task->rows = rows[k];
		batch->size += rows[k];
		for (uint32_t t = 0; t < prog->nb_inputs; t++) {
			const struct rt_value *v = &r->g->values[r->g->inputs[t]];

			task->inputs[t].data = r->mem + *mem_off;
			task->inputs[t].len = rows[k] * prog->input_row_bytes[t];
			fill_input(v->tensor.dtype, task->inputs[t].data,
				   task->inputs[t].len / rt_dtype_size(v->tensor.dtype), seed + k * 31 + t, vocab,
				   strcmp(v->name, "attention_mask") == 0);
			*mem_off += (task->inputs[t].len + 63) & ~(size_t)63;
		}
		for (uint32_t t = 0; t < prog->nb_outputs; t++) {
			task->outputs[t].data = r->mem + *mem_off;
			task->outputs[t].len = rows[k] * prog->output_row_bytes[t];
			memset(task->outputs[t].data, 0xa5, task->outputs[t].len);
			*mem_off += (task->outputs[t].len + 63) & ~(size_t)63;
		}
	}
	CU_ASSERT_FATAL(*mem_off <= r->mem_bytes);
}

/* ---- compile ---------------------------------------------------------------------------------- */

static void test_compile_mlp(void)
{
	const int64_t sizes[] = { 1, 4, 8 };
	struct rt_graph *g = load(g_mlp_path);
	struct gpu_compiled *c = NULL;
	char err[GPU_ERR_MAX] = "";

	CU_ASSERT_PTR_NOT_NULL_FATAL(g);
	CU_ASSERT_EQUAL_FATAL(gpu_compile(g, sizes, 3, GPU_PRECISION_FP32, &c, err, sizeof(err)), 0);
	CU_ASSERT_EQUAL(c->prog.nb_sizes, 3);
	CU_ASSERT_EQUAL(c->prog.nb_inputs, 1);
	CU_ASSERT_EQUAL(c->prog.input_row_bytes[0], 784 * sizeof(float));
	/* a segment per task and tensor, a padding run, and a run per packet buffer the rows may cross */
	CU_ASSERT_EQUAL(c->prog.max_segments, 8 * 2 + 1 + (8 * 784 * 4 / BW_SLICE_MIN + 8) +
						      (8 * c->prog.output_row_bytes[0] / BW_SLICE_MIN + 8));
	for (unsigned int i = 0; i < 3; i++) {
		unsigned int gemms = 0;

		CU_ASSERT_EQUAL(c->prog.sizes[i].batch, (uint32_t)sizes[i]);
		for (uint32_t o = 0; o < c->prog.sizes[i].nb_ops; o++)
			gemms += c->prog.sizes[i].ops[o].code == GPU_OP_GEMM;
		CU_ASSERT_EQUAL(gemms, 3);
		CU_ASSERT_EQUAL(c->prog.sizes[i].ops[0].u.gemm.m, sizes[i]);
	}
	CU_ASSERT_EQUAL(gpu_program_check(&c->prog, err, sizeof(err)), 0);
	CU_ASSERT_STRING_NOT_EQUAL(gpu_compiled_op_node(c, 0, 0), "?");
	CU_ASSERT_STRING_EQUAL(gpu_compiled_op_node(c, 5, 0), "?");
	gpu_compiled_free(c);
	rt_graph_free(g);
}

static void test_compile_refusals(void)
{
	const int64_t sizes[] = { 1, 2 }, bad_sizes[] = { 2, 1 };
	Onnx__ModelProto *m = onnx_build_model_new("test", 8, 17);
	/* a 1-D convolution: the GPU runs 2-D ones */
	const int64_t dims[] = { -1, 1, 4 }, w_dims[] = { 1, 1, 3 }, o_dims[] = { -1, 1, 2 };
	struct gpu_compiled *c = NULL;
	char err[GPU_ERR_MAX] = "";
	struct rt_graph *g;
	uint8_t *buf;
	size_t len;

	onnx_build_input(m, "x", BW_DTYPE_FLOAT, 3, dims);
	onnx_build_output(m, "y", BW_DTYPE_FLOAT, 3, o_dims);
	Onnx__TensorProto *w = onnx_build_initializer(m, "w", BW_DTYPE_FLOAT, 3, w_dims);
	w->n_float_data = 3;
	w->float_data = calloc(3, sizeof(float));
	onnx_build_node(m, "the_conv", "Conv", "x,w", "y");
	buf = onnx_build_pack(m, &len);
	CU_ASSERT_EQUAL(rt_cpu_kernels_register(), 0);
	g = rt_graph_load_buffer(buf, len, NULL, err, sizeof(err));
	CU_ASSERT_PTR_NOT_NULL_FATAL(g);
	CU_ASSERT_EQUAL(gpu_compile(g, sizes, 2, GPU_PRECISION_FP32, &c, err, sizeof(err)), -ENOTSUP);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "the_conv"));
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "the GPU runs 2-D"));
	CU_ASSERT_EQUAL(gpu_compile(g, bad_sizes, 2, GPU_PRECISION_FP32, &c, err, sizeof(err)), -EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "ascending"));
	CU_ASSERT_EQUAL(gpu_compile(g, sizes, 0, GPU_PRECISION_FP32, &c, err, sizeof(err)), -EINVAL);
	rt_graph_free(g);
	free(buf);
	onnx_build_model_free(m);
}

/* ---- the executor on the fake ------------------------------------------------------------------- */

static void test_mlp_batches(void)
{
	const int64_t sizes[] = { 1, 4, 8 };
	const uint32_t rows_a[] = { 1 }, rows_b[] = { 2, 1 }, rows_c[] = { 3, 1, 2, 2 };
	struct bw_batch_task tasks[4], *ptrs[4];
	struct bw_batch batch;
	struct rig r;
	size_t off;

	rig_open(&r, load(g_mlp_path), sizes, 3, 1, 1 << 20);
	/* full, padded (3 rows in a batch of 4), several tasks */
	const struct {
		const uint32_t *rows;
		uint16_t n;
		uint32_t padded;
	} cases[] = { { rows_a, 1, 1 }, { rows_b, 2, 4 }, { rows_c, 4, 8 } };

	for (unsigned int i = 0; i < 3; i++) {
		struct done d = { 0 };

		off = 0;
		make_batch(&r, &batch, tasks, ptrs, cases[i].rows, cases[i].n, cases[i].padded, &off, 100 + i);
		CU_ASSERT_EQUAL_FATAL(gpu_executor_submit(r.ex[0], &batch), 0);
		CU_ASSERT_EQUAL(gpu_executor_in_flight(r.ex[0]), 1);
		CU_ASSERT_EQUAL(gpu_executor_poll(r.ex[0], on_done, &d, 8), 0); /* not run yet */
		CU_ASSERT(gpu_fake_complete_all(r.dev) >= 1);
		CU_ASSERT_EQUAL(gpu_executor_poll(r.ex[0], on_done, &d, 8), 1);
		CU_ASSERT_EQUAL(d.count, 1);
		CU_ASSERT_EQUAL(d.status[0], BW_STATUS_OK);
		CU_ASSERT_PTR_EQUAL(d.batch[0], &batch);
		check_against_cpu(&r, &batch, 1e-5);
	}
	rig_close(&r);
}

/*
 * Copies segment seg into pages of page_len bytes carved from r->mem at *mem_off, its first byte at
 * offset `at` of the paged body (as a tensor after a request's descriptors), and points seg at them.
 */
#define PAGED_PAGES_MAX 64
struct paged {
	uint8_t *page[PAGED_PAGES_MAX];
	struct bw_pages pages;
};

static void segment_page(struct rig *r, struct bw_segment *seg, struct paged *pg, uint32_t page_len, uint32_t at,
			 size_t *mem_off)
{
	uint32_t n = (at + seg->len + page_len - 1) / page_len;
	struct bw_segment paged;

	CU_ASSERT_FATAL(n <= PAGED_PAGES_MAX);
	for (uint32_t k = 0; k < n; k++) {
		/* pages far apart, as mbufs are: a run that ran past its page would read the gap */
		pg->page[k] = r->mem + *mem_off;
		memset(pg->page[k], 0x5a, page_len + 64);
		*mem_off += ((size_t)page_len + 64 + 63) & ~(size_t)63;
	}
	CU_ASSERT_FATAL(*mem_off <= r->mem_bytes);
	pg->pages = (struct bw_pages){pg->page, page_len, n};
	paged = (struct bw_segment){NULL, seg->len, at, &pg->pages};
	bw_segment_write(&paged, seg->data);
	*seg = paged;
}

/*
 * Rows that cross packet buffers (a request of several datagrams): every task's input and output in
 * pages, starting mid-page, the gather and scatter one table run per piece; the outputs, read back
 * from their pages, equal the CPU's, and nothing was written past a piece.
 */
static void test_mlp_paged(void)
{
	const int64_t sizes[] = { 1, 4, 8 };
	const uint32_t rows[] = { 3, 1, 2, 2 };
	struct bw_batch_task tasks[4], *ptrs[4];
	struct bw_segment flat_in[4], flat_out[4];
	static struct paged pin[4], pout[4];
	struct bw_batch batch;
	struct done d = { 0 };
	struct rig r;
	size_t off = 0;

	rig_open(&r, load(g_mlp_path), sizes, 3, 1, 4 << 20);
	make_batch(&r, &batch, tasks, ptrs, rows, 4, 8, &off, 300);
	for (uint16_t k = 0; k < 4; k++) {
		flat_in[k] = tasks[k].inputs[0];
		flat_out[k] = tasks[k].outputs[0];
		/* 700-byte slices: a 3136-byte row crosses 4 or 5 of them; outputs in 256-byte pages
		 * (BW_SLICE_MIN), 40-byte rows starting at 200: the first crosses */
		segment_page(&r, &tasks[k].inputs[0], &pin[k], 700, 56 + 8 * k, &off);
		segment_page(&r, &tasks[k].outputs[0], &pout[k], BW_SLICE_MIN, 200, &off);
	}
	CU_ASSERT_EQUAL_FATAL(gpu_executor_submit(r.ex[0], &batch), 0);
	CU_ASSERT(gpu_fake_complete_all(r.dev) >= 1);
	CU_ASSERT_EQUAL(gpu_executor_poll(r.ex[0], on_done, &d, 8), 1);
	CU_ASSERT_EQUAL(d.status[0], BW_STATUS_OK);
	for (uint16_t k = 0; k < 4; k++) {
		const struct bw_pages *pg = &pout[k].pages;
		uint32_t end = 200 + flat_out[k].len;

		bw_segment_read(&tasks[k].outputs[0], flat_out[k].data);
		/* the bytes around the output in its pages are untouched */
		for (uint32_t b = 0; b < pg->nb_pages * pg->page_len; b++) {
			uint8_t v = pg->page[b / pg->page_len][b % pg->page_len];
			if (b < 200 || b >= end)
				CU_ASSERT_EQUAL(v, 0x5a);
		}
		tasks[k].inputs[0] = flat_in[k];
		tasks[k].outputs[0] = flat_out[k];
	}
	check_against_cpu(&r, &batch, 1e-5);
	rig_close(&r);
}

static void test_minilm_batch(void)
{
	const int64_t sizes[] = { 1, 2 };
	const uint32_t rows[] = { 1 };
	struct bw_batch_task tasks[1], *ptrs[1];
	struct bw_batch batch;
	struct done d = { 0 };
	struct rig r;
	size_t off = 0;

	rig_open(&r, load(g_minilm_path), sizes, 2, 1, 1 << 20);
	make_batch(&r, &batch, tasks, ptrs, rows, 1, 2, &off, 7); /* one row padded to 2 */
	CU_ASSERT_EQUAL_FATAL(gpu_executor_submit(r.ex[0], &batch), 0);
	gpu_fake_complete_all(r.dev);
	CU_ASSERT_EQUAL(gpu_executor_poll(r.ex[0], on_done, &d, 8), 1);
	CU_ASSERT_EQUAL(d.status[0], BW_STATUS_OK);
	check_against_cpu(&r, &batch, 1e-4);
	rig_close(&r);
}

/* The CNN, optimised for the GPU: FusedConv (Conv + BatchNormalization + Relu), MaxPool, Gemm; rows 1
 * and 2 run at 4. */
static void test_cnn_batch(void)
{
	const int64_t sizes[] = { 2, 4 };
	const uint32_t rows[] = { 1, 2 };
	struct bw_batch_task tasks[2], *ptrs[2];
	struct rt_opt_report rep;
	unsigned int convs = 0, pools = 0;
	struct bw_batch batch;
	struct done d = { 0 };
	struct rt_graph *g;
	struct rig r;
	size_t off = 0;

	g = load_for_gpu(g_cnn_path, &rep);
	CU_ASSERT(rep.nodes_after < rep.nodes_before); /* the BatchNormalizations and Relus folded in */
	rig_open(&r, g, sizes, 2, 1, 1 << 20);
	for (uint32_t o = 0; o < r.prog.compiled->prog.sizes[1].nb_ops; o++) {
		const struct gpu_op *op = &r.prog.compiled->prog.sizes[1].ops[o];

		convs += op->code == GPU_OP_CONV;
		pools += op->code == GPU_OP_POOL;
		if (op->code == GPU_OP_CONV)
			CU_ASSERT(op->fn == GPU_ACT_RELU && op->in[2].space == GPU_SPACE_CONST);
	}
	CU_ASSERT_EQUAL(convs, 2);
	CU_ASSERT_EQUAL(pools, 2);
	make_batch(&r, &batch, tasks, ptrs, rows, 2, 4, &off, 9); /* 3 rows padded to 4 */
	CU_ASSERT_EQUAL_FATAL(gpu_executor_submit(r.ex[0], &batch), 0);
	gpu_fake_complete_all(r.dev);
	CU_ASSERT_EQUAL(gpu_executor_poll(r.ex[0], on_done, &d, 8), 1);
	CU_ASSERT_EQUAL(d.status[0], BW_STATUS_OK);
	check_against_cpu(&r, &batch, 1e-4);
	rig_close(&r);
}

/*
 * fp16: the program's float operands are float16, its float inputs and outputs cast at the ends, its
 * float weights converted in place; the MLP and the CNN agree with the CPU to half precision's
 * measure (1e-2 of the output's scale: ~10 layers of rounding to 11 bits, accumulation in fp32).
 */
static void test_fp16(void)
{
	const int64_t sizes[] = { 2, 4 };
	const uint32_t rows[] = { 1, 2 };
	const char *const paths[2] = { g_mlp_path, g_cnn_path };

	for (int k = 0; k < 2; k++) {
		struct bw_batch_task tasks[2], *ptrs[2];
		struct bw_batch batch;
		const struct gpu_compile_options o = { GPU_PRECISION_FP16, GPU_LAYOUT_AUTO };
		struct done d = { 0 };
		struct rt_graph *g = load_for_gpu(paths[k], NULL);
		const struct gpu_program_size *sz;
		uint32_t halves = 0, floats = 0;
		struct rig r;
		size_t off = 0;

		rig_open_at(&r, g, sizes, 2, 1, 1 << 20, &o);
		/* auto: NHWC for fp16, where there are convolutions */
		CU_ASSERT_EQUAL(r.prog.compiled->layout, k == 1 ? GPU_LAYOUT_NHWC : GPU_LAYOUT_NCHW);
		sz = &r.prog.compiled->prog.sizes[1];
		CU_ASSERT_TRUE_FATAL(sz->nb_ops >= 3);
		CU_ASSERT(sz->ops[0].code == GPU_OP_CAST && sz->ops[0].u.cast.from == BW_DTYPE_FLOAT &&
			  sz->ops[0].u.cast.to == BW_DTYPE_FLOAT16 && sz->ops[0].in[0].offset == sz->input_offset[0]);
		CU_ASSERT(sz->ops[sz->nb_ops - 1].code == GPU_OP_CAST &&
			  sz->ops[sz->nb_ops - 1].out.offset == sz->output_offset[0] &&
			  sz->ops[sz->nb_ops - 1].out.dtype == BW_DTYPE_FLOAT);
		CU_ASSERT_STRING_EQUAL(gpu_compiled_op_node(r.prog.compiled, 1, 0), "(added by the compiler: a copy or cast)");
		for (uint32_t o = 1; o + 1 < sz->nb_ops; o++) {
			halves += sz->ops[o].out.dtype == BW_DTYPE_FLOAT16;
			floats += sz->ops[o].out.dtype == BW_DTYPE_FLOAT;
		}
		CU_ASSERT(halves > 0);
		CU_ASSERT_EQUAL(floats, 0);
		make_batch(&r, &batch, tasks, ptrs, rows, 2, 4, &off, 11); /* 3 rows padded to 4 */
		CU_ASSERT_EQUAL_FATAL(gpu_executor_submit(r.ex[0], &batch), 0);
		gpu_fake_complete_all(r.dev);
		CU_ASSERT_EQUAL(gpu_executor_poll(r.ex[0], on_done, &d, 8), 1);
		CU_ASSERT_EQUAL(d.status[0], BW_STATUS_OK);
		check_against_cpu(&r, &batch, 1e-2);
		rig_close(&r);
	}
	CU_ASSERT_EQUAL(gpu_precision_parse("fp16"), GPU_PRECISION_FP16);
	CU_ASSERT_EQUAL(gpu_precision_parse("half"), -EINVAL);
	CU_ASSERT_STRING_EQUAL(gpu_precision_name(GPU_PRECISION_FP32), "fp32");
	CU_ASSERT_EQUAL(gpu_launch_mode_parse("doorbell"), GPU_LAUNCH_DOORBELL);
	CU_ASSERT_STRING_EQUAL(gpu_launch_mode_name(7), "?");
}

/*
 * NHWC: the CNN's CONV and POOL ops run NHWC with their weights permuted; a PERMUTE only at the input
 * and where the classifier reads a tensor of more than 1x1; results equal NCHW's bit for bit (the
 * per-item kernels sum in the same order in both layouts).
 */
static void test_nhwc(void)
{
	const int64_t sizes[] = { 4 };
	const uint32_t rows[] = { 1, 2 };
	float got[2][64];
	size_t got_bytes = 0;

	for (uint32_t layout = GPU_LAYOUT_NCHW; layout <= GPU_LAYOUT_NHWC; layout++) {
		const struct gpu_compile_options o = { GPU_PRECISION_FP32, layout };
		struct bw_batch_task tasks[2], *ptrs[2];
		struct bw_batch batch;
		struct done d = { 0 };
		struct rt_graph *g = load_for_gpu(g_cnn_path, NULL);
		unsigned int windows = 0, nhwc = 0, permutes = 0;
		struct rig r;
		size_t off = 0;

		rig_open_at(&r, g, sizes, 1, 1, 1 << 20, &o);
		CU_ASSERT_EQUAL(r.prog.compiled->layout, layout);
		for (uint32_t i = 0; i < r.prog.compiled->prog.sizes[0].nb_ops; i++) {
			const struct gpu_op *op = &r.prog.compiled->prog.sizes[0].ops[i];
			bool window = op->code == GPU_OP_CONV || op->code == GPU_OP_POOL;

			windows += window;
			nhwc += window && op->u.conv.nhwc;
			permutes += op->code == GPU_OP_PERMUTE;
		}
		CU_ASSERT_EQUAL(windows, 4);
		CU_ASSERT_EQUAL(nhwc, layout == GPU_LAYOUT_NHWC ? 4 : 0);
		CU_ASSERT_EQUAL(permutes, layout == GPU_LAYOUT_NHWC ? 2 : 0);
		make_batch(&r, &batch, tasks, ptrs, rows, 2, 4, &off, 13);
		CU_ASSERT_EQUAL_FATAL(gpu_executor_submit(r.ex[0], &batch), 0);
		gpu_fake_complete_all(r.dev);
		CU_ASSERT_EQUAL(gpu_executor_poll(r.ex[0], on_done, &d, 8), 1);
		CU_ASSERT_EQUAL(d.status[0], BW_STATUS_OK);
		check_against_cpu(&r, &batch, 1e-4);
		got_bytes = tasks[1].outputs[0].len;
		CU_ASSERT_FATAL(got_bytes <= sizeof(got[0]));
		memcpy(got[layout - GPU_LAYOUT_NCHW], tasks[1].outputs[0].data, got_bytes);
		rig_close(&r);
	}
	CU_ASSERT_EQUAL(memcmp(got[0], got[1], got_bytes), 0);
}

/*
 * ResNet-50 compiled (not run: the fake takes minutes): fp16's automatic layout is NHWC, every CONV
 * and POOL converted, one PERMUTE (of the input) in all, since every other tensor an op that is not a
 * CONV or POOL reads is 1x1; fp32's is NCHW, no PERMUTE. A PERMUTE more would mean the pass lost
 * track of an NHWC tensor and permuted it twice.
 */
static void test_resnet50_layouts(void)
{
	const int64_t sizes[] = { 1 };
	char err[RT_ERR_MAX] = "";
	struct rt_graph *g = load_for_gpu(g_resnet50_path, NULL);

	for (uint32_t precision = GPU_PRECISION_FP32; precision <= GPU_PRECISION_FP16; precision++) {
		const struct gpu_compile_options o = { precision, GPU_LAYOUT_AUTO };
		bool fp16 = precision == GPU_PRECISION_FP16;
		unsigned int convs = 0, pools = 0, nhwc = 0, permutes = 0, casts = 0;
		struct gpu_compiled *c = NULL;
		int rc = gpu_compile_with(g, sizes, 1, &o, &c, err, sizeof(err));

		if (rc != 0)
			printf("\n  gpu_compile_with: %s\n", err);
		CU_ASSERT_EQUAL_FATAL(rc, 0);
		for (uint32_t i = 0; i < c->prog.sizes[0].nb_ops; i++) {
			const struct gpu_op *op = &c->prog.sizes[0].ops[i];

			convs += op->code == GPU_OP_CONV;
			pools += op->code == GPU_OP_POOL;
			nhwc += (op->code == GPU_OP_CONV || op->code == GPU_OP_POOL) && op->u.conv.nhwc;
			permutes += op->code == GPU_OP_PERMUTE;
			casts += op->code == GPU_OP_CAST;
		}
		CU_ASSERT_EQUAL(c->layout, fp16 ? GPU_LAYOUT_NHWC : GPU_LAYOUT_NCHW);
		CU_ASSERT_EQUAL(convs, 53);
		CU_ASSERT_EQUAL(pools, 2);
		CU_ASSERT_EQUAL(nhwc, fp16 ? 55 : 0);
		CU_ASSERT_EQUAL(permutes, fp16 ? 1 : 0);
		CU_ASSERT_EQUAL(casts, fp16 ? 2 : 0);
		CU_ASSERT_EQUAL(gpu_program_check(&c->prog, err, sizeof(err)), 0);
		gpu_compiled_free(c);
	}
	rt_graph_free(g);
}

/* Two lcores' executors: the second stream's launch finishes first, each learns only of its own. */
static void test_out_of_order_and_slots(void)
{
	const int64_t sizes[] = { 1, 4 };
	const uint32_t one[] = { 1 };
	struct bw_batch_task tasks[4][1], *ptrs[4][1];
	struct bw_batch batch[4];
	struct done d0 = { 0 }, d1 = { 0 };
	struct rig r;
	size_t off = 0;

	rig_open(&r, load(g_mlp_path), sizes, 2, 2, 1 << 20);
	for (unsigned int i = 0; i < 4; i++)
		make_batch(&r, &batch[i], tasks[i], ptrs[i], one, 1, 1, &off, 50 + i);
	CU_ASSERT_EQUAL(gpu_executor_submit(r.ex[0], &batch[0]), 0);
	CU_ASSERT_EQUAL(gpu_executor_submit(r.ex[0], &batch[1]), 0);
	CU_ASSERT_EQUAL(gpu_executor_submit(r.ex[0], &batch[2]), -EBUSY); /* SLOTS of size 1 in flight */
	CU_ASSERT_EQUAL(gpu_executor_submit(r.ex[1], &batch[2]), 0);
	CU_ASSERT_EQUAL(gpu_fake_complete(r.stream[1]), 1);
	CU_ASSERT_EQUAL(gpu_executor_poll(r.ex[0], on_done, &d0, 8), 0);
	CU_ASSERT_EQUAL(gpu_executor_poll(r.ex[1], on_done, &d1, 8), 1);
	CU_ASSERT_PTR_EQUAL(d1.batch[0], &batch[2]);
	CU_ASSERT_EQUAL(gpu_fake_complete(r.stream[0]), 1);
	CU_ASSERT_EQUAL(gpu_executor_poll(r.ex[0], on_done, &d0, 8), 1);
	CU_ASSERT_PTR_EQUAL(d0.batch[0], &batch[0]);
	/* a freed slot takes a new launch; its word must wait for the new generation */
	CU_ASSERT_EQUAL(gpu_executor_submit(r.ex[0], &batch[3]), 0);
	CU_ASSERT_EQUAL(gpu_executor_poll(r.ex[0], on_done, &d0, 8), 0);
	gpu_fake_complete_all(r.dev);
	CU_ASSERT_EQUAL(gpu_executor_poll(r.ex[0], on_done, &d0, 8), 2);
	CU_ASSERT_EQUAL(d0.count, 3);
	for (unsigned int i = 0; i < 4; i++)
		check_against_cpu(&r, &batch[i], 1e-5);
	/* refusals: a size the program lacks, memory the device cannot reach */
	batch[0].padded_size = 3;
	CU_ASSERT_EQUAL(gpu_executor_submit(r.ex[0], &batch[0]), -EINVAL);
	batch[0].padded_size = 1;
	uint8_t *unregistered = malloc(784 * sizeof(float));
	CU_ASSERT_PTR_NOT_NULL_FATAL(unregistered);
	tasks[0][0].inputs[0].data = unregistered;
	CU_ASSERT_EQUAL(gpu_executor_submit(r.ex[0], &batch[0]), -EFAULT);
	CU_ASSERT_EQUAL(gpu_executor_in_flight(r.ex[0]), 0);
	free(unregistered);
	rig_close(&r);
}

/* A Gather index out of range: the batch fails INTERNAL naming the node; the device stays healthy. */
static void test_kernel_fault(void)
{
	const int64_t sizes[] = { 1 }, in_dims[] = { -1, 2 }, table_dims[] = { 10, 4 }, out_dims[] = { -1, 2, 4 };
	Onnx__ModelProto *m = onnx_build_model_new("test", 8, 17);
	struct bw_batch_task task, *ptr = &task;
	struct bw_batch batch;
	struct done d = { 0 };
	char err[GPU_ERR_MAX] = "";
	struct rig r;
	uint8_t *buf;
	size_t len, off = 0;

	onnx_build_input(m, "ids", BW_DTYPE_INT64, 2, in_dims);
	onnx_build_output(m, "emb", BW_DTYPE_FLOAT, 3, out_dims);
	Onnx__TensorProto *t = onnx_build_initializer(m, "table", BW_DTYPE_FLOAT, 2, table_dims);
	t->n_float_data = 40;
	t->float_data = calloc(40, sizeof(float));
	CU_ASSERT_PTR_NOT_NULL_FATAL(t->float_data);
	for (int i = 0; i < 40; i++)
		t->float_data[i] = (float)i;
	onnx_build_node(m, "lookup", "Gather", "table,ids", "emb");
	buf = onnx_build_pack(m, &len);
	CU_ASSERT_EQUAL(rt_cpu_kernels_register(), 0);
	rig_open(&r, rt_graph_load_buffer(buf, len, NULL, err, sizeof(err)), sizes, 1, 1, 1 << 16);
	make_batch(&r, &batch, &task, &ptr, (const uint32_t[]){ 1 }, 1, 1, &off, 1);
	((int64_t *)task.inputs[0].data)[0] = 3;
	((int64_t *)task.inputs[0].data)[1] = -1; /* the last row: 9 */
	CU_ASSERT_EQUAL_FATAL(gpu_executor_submit(r.ex[0], &batch), 0);
	gpu_fake_complete_all(r.dev);
	CU_ASSERT_EQUAL(gpu_executor_poll(r.ex[0], on_done, &d, 8), 1);
	CU_ASSERT_EQUAL(d.status[0], BW_STATUS_OK);
	CU_ASSERT_EQUAL(((float *)task.outputs[0].data)[0], 12.0f);
	CU_ASSERT_EQUAL(((float *)task.outputs[0].data)[7], 39.0f);

	((int64_t *)task.inputs[0].data)[1] = 10;
	CU_ASSERT_EQUAL_FATAL(gpu_executor_submit(r.ex[0], &batch), 0);
	gpu_fake_complete_all(r.dev);
	CU_ASSERT_EQUAL(gpu_executor_poll(r.ex[0], on_done, &d, 8), 1);
	CU_ASSERT_EQUAL(d.status[1], BW_STATUS_INTERNAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(d.msg[1], "lookup"));
	CU_ASSERT_PTR_NOT_NULL(strstr(d.msg[1], "out of range"));
	CU_ASSERT_EQUAL(r.ops->health(r.dev, err, sizeof(err)), 0);

	/* the device is lost: launches fail, what was in flight is failed by the caller */
	CU_ASSERT_EQUAL_FATAL(gpu_executor_submit(r.ex[0], &batch), 0);
	gpu_fake_inject(r.dev, GPU_FAKE_FAULT_STICKY, "test: context lost");
	CU_ASSERT_EQUAL(gpu_executor_submit(r.ex[0], &batch), -EIO);
	CU_ASSERT_PTR_NOT_NULL(strstr(gpu_executor_error(r.ex[0]), "context lost"));
	CU_ASSERT_EQUAL(gpu_executor_poll(r.ex[0], on_done, &d, 8), 0);
	CU_ASSERT_EQUAL(gpu_executor_fail_all(r.ex[0], on_done, &d, "device lost"), 1);
	CU_ASSERT_EQUAL(d.status[2], BW_STATUS_INTERNAL);
	CU_ASSERT_EQUAL(gpu_executor_in_flight(r.ex[0]), 0);
	struct gpu_executor_stats st;
	gpu_executor_stats(r.ex[0], &st);
	CU_ASSERT_EQUAL(st.launched, 3);
	CU_ASSERT_EQUAL(st.faulted, 1);
	CU_ASSERT_EQUAL(st.launch_errors, 1);
	rig_close(&r);
	free(buf);
	onnx_build_model_free(m);
}

/*
 * gpu_host_device_open_on: the thread the fake device starts at dev_open (where a CUDA driver starts
 * its helper threads) runs on the CPUs given, while the opener is back on its own afterwards; no
 * CPUs: the opener's; a set of none: refused, nothing opened, the opener's CPUs unchanged. On a
 * one-CPU machine "pinned" and "all" are the same set and only the plumbing is seen.
 */
static void test_device_open_on(void)
{
	cpu_set_t all, one, seen, none;
	struct gpu_host_device hd;
	char err[GPU_ERR_MAX * 2] = "";
	int first = -1;

	CU_ASSERT_EQUAL_FATAL(pthread_getaffinity_np(pthread_self(), sizeof(all), &all), 0);
	for (int c = 0; c < CPU_SETSIZE && first < 0; c++)
		if (CPU_ISSET(c, &all))
			first = c;
	CU_ASSERT_FATAL(first >= 0);
	CPU_ZERO(&one);
	CPU_SET(first, &one);
	CU_ASSERT_EQUAL_FATAL(pthread_setaffinity_np(pthread_self(), sizeof(one), &one), 0);

	CU_ASSERT_EQUAL_FATAL(gpu_host_device_open_on(GPU_HOST_FAKE_MODULE, 0, &all, &hd, err, sizeof(err)), 0);
	CU_ASSERT_EQUAL(gpu_fake_thread_cpus(hd.dev, &seen), 0);
	CU_ASSERT_TRUE(CPU_EQUAL(&seen, &all));
	CU_ASSERT_EQUAL(pthread_getaffinity_np(pthread_self(), sizeof(seen), &seen), 0);
	CU_ASSERT_TRUE(CPU_EQUAL(&seen, &one));
	gpu_host_device_close(&hd);

	CU_ASSERT_EQUAL_FATAL(gpu_host_device_open_on(GPU_HOST_FAKE_MODULE, 0, NULL, &hd, err, sizeof(err)), 0);
	CU_ASSERT_EQUAL(gpu_fake_thread_cpus(hd.dev, &seen), 0);
	CU_ASSERT_TRUE(CPU_EQUAL(&seen, &one));
	gpu_host_device_close(&hd);

	CPU_ZERO(&none);
	CU_ASSERT_EQUAL(gpu_host_device_open_on(GPU_HOST_FAKE_MODULE, 0, &none, &hd, err, sizeof(err)), -EINVAL);
	CU_ASSERT_PTR_NULL(hd.dev);
	CU_ASSERT_PTR_NOT_NULL(strstr(err, "driver's CPUs"));
	CU_ASSERT_EQUAL(pthread_getaffinity_np(pthread_self(), sizeof(seen), &seen), 0);
	CU_ASSERT_TRUE(CPU_EQUAL(&seen, &one));

	CU_ASSERT_EQUAL(pthread_setaffinity_np(pthread_self(), sizeof(all), &all), 0);
}

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

int main(int argc, char **argv)
{
	CU_TestInfo device_tests[] = {
		{ "open on the driver's CPUs: its threads there, the opener back on its own", test_device_open_on },
		CU_TEST_INFO_NULL,
	};
	CU_TestInfo compile_tests[] = {
		{ "the MLP compiles at three sizes, one GEMM per MatMul", test_compile_mlp },
		{ "a Conv and bad sizes are refused with the node named", test_compile_refusals },
		{ "ResNet-50: fp16 NHWC with one PERMUTE, fp32 NCHW", test_resnet50_layouts },
		CU_TEST_INFO_NULL,
	};
	CU_TestInfo exec_tests[] = {
		{ "MLP batches (full, padded, 4 tasks) equal the CPU's", test_mlp_batches },
		{ "MLP rows across packet buffers: gathered and scattered by piece", test_mlp_paged },
		{ "MiniLM encoder, one row padded to 2, equals the CPU's", test_minilm_batch },
		{ "CNN (FusedConv, MaxPool), rows 1,2 padded to 4, equals the CPU's", test_cnn_batch },
		{ "fp16: MLP and CNN, casts at the ends, within 1e-2 of the CPU", test_fp16 },
		{ "NHWC: the CNN's convolutions and pools, bit for bit NCHW's", test_nhwc },
		{ "two streams out of order, slots, refusals", test_out_of_order_and_slots },
		{ "a Gather index out of range fails the batch; a lost device", test_kernel_fault },
		CU_TEST_INFO_NULL,
	};
	/* the executor through doorbell launches: the launch path only, so the smaller models */
	CU_TestInfo doorbell_tests[] = {
		{ "MLP batches (full, padded, 4 tasks) equal the CPU's", test_mlp_batches },
		{ "two streams out of order, slots, refusals", test_out_of_order_and_slots },
		{ "a Gather index out of range fails the batch; a lost device", test_kernel_fault },
		CU_TEST_INFO_NULL,
	};
	CU_SuiteInfo suites[] = {
		{ "gpu device open", NULL, NULL, NULL, NULL, device_tests },
		{ "gpu compile", NULL, NULL, NULL, NULL, compile_tests },
		{ "gpu executor (fake device, graph launch)", mode_graph, NULL, NULL, NULL, exec_tests },
		{ "gpu executor (fake device, doorbell launch)", mode_doorbell, NULL, NULL, NULL, doorbell_tests },
		CU_SUITE_INFO_NULL,
	};

	if (argc > 1)
		g_mlp_path = argv[1];
	if (argc > 2)
		g_minilm_path = argv[2];
	if (argc > 3)
		g_cnn_path = argv[3];
	if (argc > 4)
		g_resnet50_path = argv[4];
	return bw_cunit_run(suites);
}
