/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * bwrun: runs one ONNX model file through batchwire's runtime on this host, outside the daemon: the
 * tool a user reaches for before deploying a model. It loads and optimises the model as the daemon
 * does, plans it for one batch size, runs it on given or generated inputs, and prints a placement
 * report (ops, kernels, fusions, arena), the outputs and timings. Outputs and inputs can be saved
 * as .npy files, so other tools (the agreement test, bwcli) can replay and compare exactly.
 *
 * DPDK-free: the runtime and the client library's .npy codec, nothing else. With --workers 1 it
 * runs rt_plan_run on this thread (the sequential layout); with more, the multi-worker executor
 * the daemon uses (concurrent layout, gather and scatter), this thread being worker 0. With
 * --device gpu it compiles the model into a device program and runs it through the GPU executor the
 * daemon uses (batch table, one graph launch, completion polled from mapped memory), on the CUDA
 * module or, with --gpu-module fake, on the fake device (the CPU).
 *
 * The last line is machine-readable:
 *   model=<basename> batch=<N> workers=<N> runs=<N> mean_us=<x> p50_us=<x> p99_us=<x> min_us=<x> device=<d>
 *
 * Its files: bwrun_args.c (the command line), bwrun_report.c (the report and the outputs), bwrun_gpu.c
 * (--device gpu), this one (inputs, running, timing, main); bwrun.h what they share.
 */
#include "bwrun.h"

/* One line on stderr and exit 1: bwrun is run by hand and by scripts, both read the first line. */
void die(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, PROG ": ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

double now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

/* ---- inputs ------------------------------------------------------------------------------------ */

/* File names from tensor names: ONNX names may hold '/', ':' and worse. */
static void tensor_path(char *buf, size_t cap, const char *dir, const char *name)
{
	size_t n = (size_t)snprintf(buf, cap, "%s/", dir);

	for (const char *p = name; *p != '\0' && n + 5 < cap; p++) {
		char c = *p;

		buf[n++] = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
					   c == '_' || c == '-'
				   ? c
				   : '_';
	}
	snprintf(buf + n, cap - n, ".npy");
}

static void make_dir(const char *opt, const char *dir)
{
	if (mkdir(dir, 0777) != 0 && errno != EEXIST)
		die("%s %s: %s", opt, dir, strerror(errno));
}

void write_npy(const char *dir, const char *name, const struct rt_tensor *t, const void *data)
{
	uint32_t dims[RT_MAX_RANK];
	char path[4096], err[512];

	for (unsigned int d = 0; d < t->rank; d++)
		dims[d] = (uint32_t)t->dims[d];
	tensor_path(path, sizeof(path), dir, name);
	if (bwc_npy_write(path, t->dtype, t->rank, dims, data, err, sizeof(err)) != 0)
		die("%s", err);
}

/* Fills r->in_data with each graph input's bytes: from --input files, or generated. */
static void prepare_inputs(struct runner *r, const struct opts *o)
{
	const struct rt_graph *g = r->g;
	char a[128], b[128], err[512];

	for (uint32_t i = 0; i < g->num_inputs; i++) {
		const char *name = g->values[g->inputs[i]].name;
		const struct rt_tensor *t = &r->in[i];
		size_t nbytes = r->in_bytes[i];
		int file = -1;

		for (unsigned int f = 0; f < o->num_inputs; f++)
			if (strcmp(o->inputs[f].name, name) == 0)
				file = (int)f;
		if (file >= 0) {
			struct bwc_npy npy;
			bool same = true;

			if (bwc_npy_read(o->inputs[file].path, &npy, err, sizeof(err)) != 0)
				die("--input %s: %s", name, err);
			same = npy.dtype == t->dtype && npy.rank == t->rank;
			for (unsigned int d = 0; same && d < t->rank; d++)
				same = (int64_t)npy.dims[d] == t->dims[d];
			if (!same) {
				struct rt_tensor have = { .dtype = npy.dtype, .rank = npy.rank };

				for (unsigned int d = 0; d < npy.rank; d++)
					have.dims[d] = npy.dims[d];
				die("--input %s=%s: %s %s, the model wants %s %s (batch %" PRId64 ")", name,
				    o->inputs[file].path, rt_dtype_name(npy.dtype), dims_str(&have, a, sizeof(a)),
				    rt_dtype_name(t->dtype), dims_str(t, b, sizeof(b)), o->batch);
			}
			r->in_data[i] = npy.data; /* ours now: freed at exit */
			printf("input  %-20s %-7s %-18s from %s\n", name, rt_dtype_name(t->dtype),
			       dims_str(t, a, sizeof(a)), o->inputs[file].path);
		} else {
			r->in_data[i] = malloc(nbytes != 0 ? nbytes : 1);
			if (r->in_data[i] == NULL)
				die("out of memory for input %s", name);
			bw_input_generate(t, nbytes, i, o->seed, name, r->in_data[i]);
			printf("input  %-20s %-7s %-18s generated (seed %" PRIu64 ")\n", name,
			       rt_dtype_name(t->dtype), dims_str(t, a, sizeof(a)), o->seed);
		}
		if (o->save_inputs != NULL)
			write_npy(o->save_inputs, name, t, r->in_data[i]);
	}
}

/* ---- running ----------------------------------------------------------------------------------- */

struct worker_thread {
	pthread_t thread;
	struct rt_executor *ex;
	unsigned int index;
	_Atomic bool *stop;
};

static void *worker_main(void *arg)
{
	struct worker_thread *w = arg;

	while (!atomic_load_explicit(w->stop, memory_order_relaxed)) {
		/* Two cores shared with the main thread: give them up when there is nothing to run. */
		if (rt_executor_work(w->ex, w->index) == 0)
			sched_yield();
	}
	return NULL;
}

/* A finished batch, from either executor. */
void on_done(void *ctx, const struct bw_completion *c)
{
	struct runner *r = ctx;

	r->done = true;
	r->status = c->status;
	snprintf(r->msg, sizeof(r->msg), "%s", c->msg);
}

/* How many rows the CPU plan has: --chunk's, or what rt_plan_chunk_auto measured (as the daemon does). */
static int64_t chunk_rows(struct runner *r, const struct opts *o)
{
	char err[RT_EXECUTOR_MSG_MAX];
	int64_t rows;

	if (o->chunk < 0 || o->batch == 1) {
		snprintf(r->chunk_report, sizeof(r->chunk_report), "whole (%s)", o->chunk < 0 ? "--chunk off" : "batch 1");
		return o->batch;
	}
	if (o->chunk > 0) {
		snprintf(r->chunk_report, sizeof(r->chunk_report), "chunks of %" PRId64 " rows (--chunk)", o->chunk);
		return o->chunk;
	}
	rows = rt_plan_chunk_auto(r->g, o->batch, r->chunk_report, sizeof(r->chunk_report), err, sizeof(err));
	if (rows < 0)
		die("%s: choosing how to run batch %" PRId64 ": %s", o->model, o->batch, err);
	return rows;
}

static void setup(struct runner *r, const struct opts *o)
{
	const struct rt_graph *g = r->g;
	char err[RT_EXECUTOR_MSG_MAX];
	int64_t scale = 1;

	if (g->num_inputs > TENSORS_MAX || g->num_outputs > TENSORS_MAX)
		die("%s: %u inputs and %u outputs; bwrun handles %d of each", o->model, g->num_inputs, g->num_outputs,
		    TENSORS_MAX);
	if (o->gpu) {
		/* the plan the device program is compiled from, kept for the report and the shapes */
		r->seq_plan = rt_plan_create(g, o->batch, RT_DEVICE_GPU, err, sizeof(err));
		if (r->seq_plan == NULL)
			die("%s: on the GPU: %s", o->model, err);
		r->plan = r->seq_plan;
	} else if (o->workers == 1) {
		r->chunk_rows = chunk_rows(r, o);
		r->seq_plan = rt_plan_create(g, r->chunk_rows, RT_DEVICE_CPU, err, sizeof(err));
		if (r->seq_plan == NULL)
			die("%s: %s", o->model, err);
		r->plan = r->seq_plan;
		r->arena = aligned_alloc(RT_PLAN_ALIGN, rt_plan_arena_bytes(r->plan) ? rt_plan_arena_bytes(r->plan)
										      : RT_PLAN_ALIGN);
		if (r->arena == NULL)
			die("out of memory for an arena of %zu bytes", rt_plan_arena_bytes(r->plan));
		/* Touch every page now, as the daemon does at create: the first timed run should not
		 * pay for page faults. */
		memset(r->arena, 0, rt_plan_arena_bytes(r->plan));
		rt_plan_bind(r->plan, r->arena, r->in, r->out);
	} else {
		r->chunk_rows = chunk_rows(r, o);
		r->ex = rt_executor_create_chunked(g, NULL, &o->batch, &r->chunk_rows, 1, o->workers, 1, err, sizeof(err));
		if (r->ex == NULL)
			die("%s: %s", o->model, err);
		r->plan = rt_executor_plan(r->ex, o->batch);
		if (g->num_inputs > BW_BATCH_TENSORS_MAX || g->num_outputs > BW_BATCH_TENSORS_MAX)
			die("%s: the executor takes at most %d inputs and outputs", o->model, BW_BATCH_TENSORS_MAX);
	}
	if (o->gpu)
		r->chunk_rows = o->batch;
	scale = o->batch / r->chunk_rows;
	/* Dtypes and shapes as bound (for the executor, data comes and goes with the batch); a plan of
	 * chunk rows has the batch's shapes with the first dimension, the batch's, cut. */
	for (uint32_t i = 0; i < g->num_inputs; i++) {
		struct rt_plan_value_info vi;

		rt_plan_value_info(r->plan, g->inputs[i], &vi);
		if (scale > 1 && (vi.tensor.rank == 0 || vi.tensor.dims[0] != r->chunk_rows))
			die("%s: input %s has no batch dimension first: run it with --chunk off", o->model,
			    g->values[g->inputs[i]].name);
		r->in[i] = (struct rt_tensor){ .dtype = vi.tensor.dtype, .rank = vi.tensor.rank, .data = r->in[i].data };
		memcpy(r->in[i].dims, vi.tensor.dims, sizeof(vi.tensor.dims));
		r->in[i].dims[0] *= scale;
		r->in_bytes[i] = vi.nbytes * (size_t)scale;
	}
	for (uint32_t i = 0; i < g->num_outputs; i++) {
		struct rt_plan_value_info vi;

		rt_plan_value_info(r->plan, g->outputs[i], &vi);
		if (scale > 1 && (vi.tensor.rank == 0 || vi.tensor.dims[0] != r->chunk_rows))
			die("%s: output %s has no batch dimension first: run it with --chunk off", o->model,
			    g->values[g->outputs[i]].name);
		r->out[i] = (struct rt_tensor){ .dtype = vi.tensor.dtype, .rank = vi.tensor.rank, .data = r->out[i].data };
		memcpy(r->out[i].dims, vi.tensor.dims, sizeof(vi.tensor.dims));
		r->out[i].dims[0] *= scale;
		r->out_bytes[i] = vi.nbytes * (size_t)scale;
		if (scale > 1 && r->ex == NULL) { /* the chunks' outputs are gathered apart from the arena */
			r->out_data[i] = malloc(r->out_bytes[i] != 0 ? r->out_bytes[i] : 1);
			if (r->out_data[i] == NULL)
				die("out of memory for output %s", g->values[g->outputs[i]].name);
		}
	}
}

/* The batch's inputs and outputs as rt_plan_run_chunks reads them (sequential mode, in chunks). */
static void chunk_io(const struct runner *r, struct rt_tensor *in, struct rt_tensor *out)
{
	for (uint32_t i = 0; i < r->g->num_inputs; i++)
		in[i] = (struct rt_tensor){ .dtype = r->in[i].dtype, .data = r->in_data[i] };
	for (uint32_t i = 0; i < r->g->num_outputs; i++)
		out[i] = (struct rt_tensor){ .dtype = r->out[i].dtype, .data = r->out_data[i] };
}

/* One batch of one task that carries every row, as a single request would (segments set by the caller). */
void one_task_batch(struct runner *r, const struct opts *o)
{
	r->task = (struct bw_batch_task){ .rows = (uint32_t)o->batch };
	r->tasks[0] = &r->task;
	r->batch = (struct bw_batch){ .size = (uint32_t)o->batch, .padded_size = (uint32_t)o->batch, .num_tasks = 1,
				      .num_inputs = (uint16_t)r->g->num_inputs, .num_outputs = (uint16_t)r->g->num_outputs,
				      .tasks = r->tasks };
}

/* Executor mode: one batch of one task that carries every row, as a single request would. */
static void setup_batch(struct runner *r, const struct opts *o)
{
	const struct rt_graph *g = r->g;

	one_task_batch(r, o);
	for (uint32_t i = 0; i < g->num_inputs; i++) {
		if (r->in_bytes[i] > UINT32_MAX)
			die("input %s: %zu bytes do not fit a batch segment", g->values[g->inputs[i]].name, r->in_bytes[i]);
		r->task.inputs[i] = bw_segment_flat(r->in_data[i], (uint32_t)r->in_bytes[i]);
	}
	for (uint32_t i = 0; i < g->num_outputs; i++) {
		r->out_data[i] = malloc(r->out_bytes[i] != 0 ? r->out_bytes[i] : 1);
		if (r->out_data[i] == NULL || r->out_bytes[i] > UINT32_MAX)
			die("output %s: cannot hold %zu bytes", g->values[g->outputs[i]].name, r->out_bytes[i]);
		r->task.outputs[i] = bw_segment_flat(r->out_data[i], (uint32_t)r->out_bytes[i]);
	}
}

/* One inference. \return its duration in microseconds: rt_plan_run alone in sequential mode (the
 * inputs are copied in first, untimed); submit to completion, gather and scatter included, in
 * executor mode. */
/* One run, step by step, each step's time added to r->step_us. */
static double run_profiled(struct runner *r, const struct opts *o)
{
	uint32_t steps = rt_plan_num_steps(r->plan);
	int64_t chunks = o->batch / r->chunk_rows;
	struct rt_tensor in[TENSORS_MAX], out[TENSORS_MAX];
	char err[RT_ERR_MAX];
	double total = 0;

	rt_plan_bind(r->plan, r->arena, in, out);
	for (int64_t c = 0; c < chunks; c++) {
		/* a chunk's rows in, its steps one by one, its rows out (the copies untimed) */
		for (uint32_t i = 0; chunks > 1 && i < r->g->num_inputs; i++)
			memcpy(in[i].data, (const uint8_t *)r->in_data[i] + (size_t)c * (r->in_bytes[i] / chunks),
			       r->in_bytes[i] / chunks);
		for (uint32_t i = 0; i < steps; i++) {
			double t0 = now_us(), dt;
			int rc = rt_plan_run_steps(r->plan, r->arena, i, 1, err, sizeof(err));

			if (rc != 0)
				die("%s: %s", o->model, err);
			dt = now_us() - t0;
			r->step_us[i] += dt;
			total += dt;
		}
		for (uint32_t i = 0; chunks > 1 && i < r->g->num_outputs; i++)
			memcpy((uint8_t *)r->out_data[i] + (size_t)c * (r->out_bytes[i] / chunks), out[i].data,
			       r->out_bytes[i] / chunks);
	}
	return total;
}

static int cmp_step_desc(const void *a, const void *b, void *us)
{
	double x = ((const double *)us)[*(const uint32_t *)a], y = ((const double *)us)[*(const uint32_t *)b];

	return x > y ? -1 : x < y;
}

/* The ops' shares of the timed runs' time, and the slowest steps, per run. */
static void print_profile(const struct runner *r, const struct opts *o)
{
	uint32_t steps = rt_plan_num_steps(r->plan), *order = calloc(steps + 1, sizeof(*order));
	const char *ops[TENSORS_MAX * 4];
	double op_us[TENSORS_MAX * 4] = { 0 }, total = 0;
	unsigned int op_count[TENSORS_MAX * 4] = { 0 }, nops = 0;

	if (order == NULL)
		die("out of memory");
	for (uint32_t i = 0; i < steps; i++) {
		struct rt_plan_step_info info;
		const char *op;
		unsigned int k;

		rt_plan_step_info(r->plan, i, &info);
		op = r->g->nodes[info.node].op_type;
		for (k = 0; k < nops && strcmp(ops[k], op) != 0; k++)
			;
		if (k == nops && nops < sizeof(ops) / sizeof(ops[0]))
			ops[nops++] = op;
		if (k < nops) {
			op_us[k] += r->step_us[i];
			op_count[k]++;
		}
		total += r->step_us[i];
		order[i] = i;
	}
	printf("profile  %u steps, %.1f us a run (the timed runs' mean; clock reads included)\n", steps,
	       total / o->repeat);
	for (unsigned int k = 0; k < nops; k++)
		printf("profile  op %-24s x%-4u %10.1f us  %5.1f%%\n", ops[k], op_count[k], op_us[k] / o->repeat,
		       total > 0 ? 100.0 * op_us[k] / total : 0.0);
	qsort_r(order, steps, sizeof(*order), cmp_step_desc, r->step_us);
	for (uint32_t i = 0; i < steps && (o->profile_steps == 0 || i < o->profile_steps); i++) {
		struct rt_plan_step_info info;
		const struct rt_node *n;

		rt_plan_step_info(r->plan, order[i], &info);
		n = &r->g->nodes[info.node];
		printf("profile  step %-4u %-20s %10.1f us  %5.1f%%  %s\n", order[i], n->op_type,
		       r->step_us[order[i]] / o->repeat, total > 0 ? 100.0 * r->step_us[order[i]] / total : 0.0, n->name);
	}
	free(order);
}

static double run_once(struct runner *r, const struct opts *o)
{
	char err[RT_EXECUTOR_MSG_MAX];
	double t0;
	int rc;

	if (r->gex != NULL)
		return run_once_gpu(r, o);
	if (r->ex == NULL && r->chunk_rows < o->batch && r->step_us == NULL) {
		struct rt_tensor in[TENSORS_MAX], out[TENSORS_MAX];

		/* depth first: the chunks' copies in and out are part of the run, as in the daemon */
		chunk_io(r, in, out);
		t0 = now_us();
		rc = rt_plan_run_chunks(r->plan, r->arena, o->batch, in, out, err, sizeof(err));
		if (rc != 0)
			die("%s: %s", o->model, err);
		return now_us() - t0;
	}
	if (r->ex == NULL) {
		/* The arena reuses an input's bytes once its last reader ran: copy them in every time. */
		for (uint32_t i = 0; r->chunk_rows == o->batch && i < r->g->num_inputs; i++)
			memcpy(r->in[i].data, r->in_data[i], r->in_bytes[i]);
		if (r->step_us != NULL)
			return run_profiled(r, o);
		t0 = now_us();
		rc = rt_plan_run(r->plan, r->arena, err, sizeof(err));
		if (rc != 0)
			die("%s: %s", o->model, err);
		return now_us() - t0;
	}
	r->done = false;
	t0 = now_us();
	rc = rt_executor_submit(r->ex, &r->batch);
	if (rc != 0)
		die("rt_executor_submit: %s", strerror(-rc));
	while (rt_executor_poll_completions(r->ex, on_done, r, 1) == 0)
		rt_executor_work(r->ex, 0);
	t0 = now_us() - t0;
	if (r->status != BW_STATUS_OK)
		die("%s: %s: %s", o->model, bw_status_name(r->status), r->msg);
	return t0;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}
static bool graph_has_input(const struct rt_graph *g, const char *name)
{
	for (uint32_t i = 0; i < g->num_inputs; i++)
		if (strcmp(g->values[g->inputs[i]].name, name) == 0)
			return true;
	return false;
}

static const char *base_name(const char *path)
{
	const char *slash = strrchr(path, '/');

	return slash != NULL ? slash + 1 : path;
}

int main(int argc, char **argv)
{
	struct worker_thread workers[RT_EXECUTOR_WORKERS_MAX];
	static struct runner r; /* large: off the stack */
	struct rt_opt_report rep;
	struct opts o;
	struct rt_graph *g;
	_Atomic bool stop = false;
	char err[RT_ERR_MAX * 2];
	double *times, sum = 0;
	int rc;

	parse_args(argc, argv, &o);
	if (rt_cpu_isa_select(err, sizeof(err)) != 0)
		die("CPU kernels: %s", err);
	rc = o.gpu ? gpu_kernels_register() : rt_cpu_kernels_register();
	if (rc != 0)
		die("registering the kernels: %s", strerror(-rc));
	g = rt_graph_load(o.model, err, sizeof(err));
	if (g == NULL)
		die("%s: %s", o.model, err);
	r.g = g;
	/* A misspelt --input name is a usage error: say so before any work. */
	for (unsigned int f = 0; f < o.num_inputs; f++)
		if (!graph_has_input(g, o.inputs[f].name))
			die("--input %s: the model has no input of that name", o.inputs[f].name);
	print_model(g, o.model);
	rt_cpu_isa_describe(err, sizeof(err));
	printf("cpu    kernels %s\n", err);
	if (!o.gpu)
		printf("cpu    precision %s%s\n", rt_precision_name((enum rt_precision)o.cpu_precision),
		       o.cpu_precision == RT_PRECISION_BF16 ? " (FusedGemm's weights and activations in bf16, on AMX tiles)"
							    : "");
	memset(&rep, 0, sizeof(rep));
	rep.nodes_before = rep.nodes_after = g->num_nodes;
	if (o.optimize) {
		rc = rt_graph_optimize_with(g, o.gpu ? RT_DEVICE_GPU : RT_DEVICE_CPU,
					    &(struct rt_opt_options){ .precision = (enum rt_precision)o.cpu_precision }, &rep,
					    err, sizeof(err));
		if (rc != 0)
			die("%s: optimising: %s", o.model, err);
	}
	if (o.output_dir != NULL)
		make_dir("--output-dir", o.output_dir);
	if (o.save_inputs != NULL)
		make_dir("--save-inputs", o.save_inputs);

	setup(&r, &o);
	print_placement(&r, &o, &rep);
	prepare_inputs(&r, &o);
	if (o.gpu)
		setup_gpu(&r, &o);

	if (r.ex != NULL) {
		setup_batch(&r, &o);
		/* Worker 0 is this thread, between polls, as a polling core with one worker would be. */
		for (unsigned int w = 1; w < o.workers; w++) {
			workers[w] = (struct worker_thread){ .ex = r.ex, .index = w, .stop = &stop };
			if (pthread_create(&workers[w].thread, NULL, worker_main, &workers[w]) != 0)
				die("cannot start worker thread %u", w);
		}
	}
	times = calloc(o.repeat, sizeof(double));
	if (times == NULL)
		die("out of memory");
	for (unsigned int i = 0; i < o.warmup; i++)
		run_once(&r, &o);
	if (o.profile && (r.step_us = calloc(rt_plan_num_steps(r.plan) + 1, sizeof(double))) == NULL)
		die("out of memory");
	for (unsigned int i = 0; i < o.repeat; i++) {
		times[i] = run_once(&r, &o);
		sum += times[i];
	}
	if (r.ex != NULL) {
		atomic_store(&stop, true);
		for (unsigned int w = 1; w < o.workers; w++)
			pthread_join(workers[w].thread, NULL);
	}
	print_outputs(&r, &o);
	if (r.step_us != NULL)
		print_profile(&r, &o);

	qsort(times, o.repeat, sizeof(double), cmp_double);
	{
		/* Nearest rank: the smallest time at or above the fraction of runs. */
		double mean = sum / o.repeat;
		double p50 = times[(size_t)ceil(0.50 * o.repeat) - 1];
		double p99 = times[(size_t)ceil(0.99 * o.repeat) - 1];

		printf("time   %u runs after %u warm-up: mean %.1f us, p50 %.1f us, p99 %.1f us, min %.1f us, max %.1f us\n",
		       o.repeat, o.warmup, mean, p50, p99, times[0], times[o.repeat - 1]);
		printf("model=%s batch=%" PRId64 " workers=%u runs=%u mean_us=%.1f p50_us=%.1f p99_us=%.1f min_us=%.1f "
		       "device=%s\n",
		       base_name(o.model), o.batch, o.workers, o.repeat, mean, p50, p99, times[0], o.gpu ? "gpu" : "cpu");
	}

	free(times);
	free(r.step_us);
	if (o.gpu)
		teardown_gpu(&r);
	for (uint32_t i = 0; i < g->num_inputs; i++)
		free(r.in_data[i]);
	for (uint32_t i = 0; i < g->num_outputs; i++)
		free(r.out_data[i]);
	if (r.ex != NULL)
		rt_executor_destroy(r.ex);
	rt_plan_free(r.seq_plan);
	free(r.arena);
	rt_graph_free(g);
	return 0;
}
