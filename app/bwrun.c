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
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "bwclient.h"
#include "exec/executor.h"
#include "exec/plan.h"
#include "graph.h"
#include "host.h"
#include "model_inputs.h"

#define PROG "bwrun"

#define BATCH_MAX 65536u
#define REPEAT_MAX 10000000u
#define INPUT_FILES_MAX 64

#define VALUES_SHOWN 8          /* first values printed per output */
#define OP_TYPES_MAX 256
#define TENSORS_MAX 64          /* graph inputs, and outputs, bwrun handles */
#define GPU_WAIT_S 30           /* a launch not finished by then is reported, not waited for */
#define FAKE_WAIT_S 900         /* the fake runs programs naively on one CPU thread: an encoder at fp16
				 * takes minutes on a loaded 2-core host */

struct input_file {
	const char *name;
	const char *path;
};

struct opts {
	const char *model;
	int64_t batch;
	bool batch_given;
	uint64_t seed;
	unsigned int repeat, warmup, workers;
	bool optimize;
	bool gpu;                       /* --device gpu */
	const char *gpu_module;         /* NULL: libbwgpu.so where the loader looks; "fake": the fake device */
	int gpu_index;
	uint32_t precision;             /* enum gpu_precision */
	uint32_t launch_mode;           /* enum gpu_launch_mode */
	uint32_t layout;                /* enum gpu_layout */
	const char *output_dir, *save_inputs;
	struct input_file inputs[INPUT_FILES_MAX];
	unsigned int num_inputs;
};

/* Everything one run of the model needs, whichever executor runs it. */
struct runner {
	const struct rt_graph *g;
	const struct rt_plan *plan;     /* of the batch size; the executor's own in executor mode */
	struct rt_plan *seq_plan;       /* sequential mode: ours to free */
	struct rt_executor *ex;         /* executor mode */
	void *arena;                    /* sequential mode */
	struct rt_tensor in[TENSORS_MAX];  /* bound dtype and shape; data: in the arena (sequential) */
	struct rt_tensor out[TENSORS_MAX];
	size_t in_bytes[TENSORS_MAX], out_bytes[TENSORS_MAX];
	void *in_data[TENSORS_MAX];     /* the inputs' bytes, kept apart: the arena reuses them */
	void *out_data[TENSORS_MAX];    /* executor mode: where outputs are scattered to */
	/* executor mode: one batch of one task carrying every row */
	struct bw_batch_task task;
	struct bw_batch_task *tasks[1];
	struct bw_batch batch;
	bool done;
	enum bw_status status;
	char msg[RT_EXECUTOR_MSG_MAX];
	/* --device gpu */
	struct gpu_host_device gpu;
	struct gpu_stream *gstream;
	struct gpu_host_program prog;
	struct gpu_executor *gex;
	uint8_t *gmem;                  /* inputs and outputs, registered with the device */
	size_t gmem_bytes;
};

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

/* One line on stderr and exit 1: bwrun is run by hand and by scripts, both read the first line. */
static void die(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, PROG ": ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: " PROG " [options] MODEL.onnx\n"
		"Runs an ONNX model through batchwire's CPU runtime and reports placement, outputs and timings.\n"
		"\n"
		"  --batch N            bind the batch dimension to N (default 1)\n"
		"  --input NAME=FILE    input NAME from a NumPy .npy file (repeatable); its dtype and shape must be\n"
		"                       the model's with the batch dimension = N\n"
		"  --seed S             seed for inputs not given (default %u): floats uniform in [-1,1); integers\n"
		"                       in [0,%d), except names containing \"mask\": ones, last quarter of each row 0\n"
		"  --save-inputs DIR    write the inputs used as DIR/NAME.npy\n"
		"  --output-dir DIR     write each output as DIR/NAME.npy\n"
		"  --repeat N           timed runs (default 1)\n"
		"  --warmup N           untimed runs before them (default 0)\n"
		"  --workers N          1 (default): rt_plan_run on this thread; N > 1: the daemon's multi-worker\n"
		"                       executor with N workers (this thread is worker 0)\n"
		"  --no-optimize        skip the load-time graph rewrites (fusions, layouts)\n"
		"  --device cpu|gpu     where the model runs (default cpu); gpu: the GPU executor, the time is\n"
		"                       launch to completion seen, gather and scatter included\n"
		"  --gpu-module PATH    the device module for --device gpu (default: libbwgpu.so beside bwrun or\n"
		"                       in the build or install tree); 'fake': the fake device, on the CPU\n"
		"  --gpu-index N        the device to use (default 0)\n"
		"  --precision P        fp32 (default) or fp16: float tensors and weights in half precision on\n"
		"                       the device, fp32 accumulation; inputs and outputs stay fp32\n"
		"  --layout L           auto (default: nhwc for fp16, nchw for fp32), nchw or nhwc: where the\n"
		"                       device's convolutions keep their channels\n"
		"  --launch-mode M      graph (default): one graph launch per batch; doorbell: the launch is a\n"
		"                       memory write the device's dispatcher picks up\n"
		"  -h, --help           this text\n"
		"\n"
		"File names: a tensor name's characters other than [A-Za-z0-9._-] become '_'.\n"
		"Environment: BW_CPU_ISA=baseline|avx2|avx512|amx caps the CPU kernels' instruction set (default:\n"
		"  the highest this CPU runs; the 'cpu' line says which run and why).\n"
		"Last line: model=F batch=N workers=N runs=N mean_us=X p50_us=X p99_us=X min_us=X device=D\n"
		"Exit status: 0 on success, 1 on any error (one line on stderr).\n",
		BW_INPUT_SEED_DEFAULT, BW_INPUT_INT_RANGE);
}

static unsigned long long parse_uint(const char *opt, const char *s, unsigned long long lo, unsigned long long hi)
{
	unsigned long long v;
	char *end;

	errno = 0;
	v = strtoull(s, &end, 0);
	if (errno != 0 || end == s || *end != '\0' || s[0] == '-' || v < lo || v > hi)
		die("%s: '%s' is not an integer in [%llu, %llu]", opt, s, lo, hi);
	return v;
}

static void parse_args(int argc, char **argv, struct opts *o)
{
	enum { OPT_BATCH = 256, OPT_INPUT, OPT_SEED, OPT_SAVE_INPUTS, OPT_OUTPUT_DIR, OPT_REPEAT, OPT_WARMUP,
	       OPT_WORKERS, OPT_NO_OPTIMIZE, OPT_DEVICE, OPT_GPU_MODULE, OPT_GPU_INDEX, OPT_PRECISION, OPT_LAUNCH_MODE,
	       OPT_LAYOUT };
	static const struct option longopts[] = {
		{ "batch", required_argument, NULL, OPT_BATCH },
		{ "input", required_argument, NULL, OPT_INPUT },
		{ "seed", required_argument, NULL, OPT_SEED },
		{ "save-inputs", required_argument, NULL, OPT_SAVE_INPUTS },
		{ "output-dir", required_argument, NULL, OPT_OUTPUT_DIR },
		{ "repeat", required_argument, NULL, OPT_REPEAT },
		{ "warmup", required_argument, NULL, OPT_WARMUP },
		{ "workers", required_argument, NULL, OPT_WORKERS },
		{ "no-optimize", no_argument, NULL, OPT_NO_OPTIMIZE },
		{ "device", required_argument, NULL, OPT_DEVICE },
		{ "gpu-module", required_argument, NULL, OPT_GPU_MODULE },
		{ "gpu-index", required_argument, NULL, OPT_GPU_INDEX },
		{ "precision", required_argument, NULL, OPT_PRECISION },
		{ "launch-mode", required_argument, NULL, OPT_LAUNCH_MODE },
		{ "layout", required_argument, NULL, OPT_LAYOUT },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	bool gpu_only = false; /* an option only --device gpu takes was given */
	int c, rc;

	*o = (struct opts){ .batch = 1, .seed = BW_INPUT_SEED_DEFAULT, .repeat = 1, .workers = 1, .optimize = true };
	opterr = 0; /* our own one-line messages */
	/* The leading ':' tells a missing argument (':') from an unknown option ('?'). */
	while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
		switch (c) {
		case OPT_BATCH:
			o->batch = (int64_t)parse_uint("--batch", optarg, 1, BATCH_MAX);
			o->batch_given = true;
			break;
		case OPT_INPUT: {
			char *eq = strchr(optarg, '=');

			if (eq == NULL || eq == optarg || eq[1] == '\0')
				die("--input: '%s' is not NAME=FILE.npy", optarg);
			if (o->num_inputs == INPUT_FILES_MAX)
				die("--input: more than %d inputs", INPUT_FILES_MAX);
			*eq = '\0';
			for (unsigned int i = 0; i < o->num_inputs; i++)
				if (strcmp(o->inputs[i].name, optarg) == 0)
					die("--input: %s given twice", optarg);
			o->inputs[o->num_inputs++] = (struct input_file){ optarg, eq + 1 };
			break;
		}
		case OPT_SEED:
			o->seed = parse_uint("--seed", optarg, 0, UINT64_MAX);
			break;
		case OPT_SAVE_INPUTS:
			o->save_inputs = optarg;
			break;
		case OPT_OUTPUT_DIR:
			o->output_dir = optarg;
			break;
		case OPT_REPEAT:
			o->repeat = (unsigned int)parse_uint("--repeat", optarg, 1, REPEAT_MAX);
			break;
		case OPT_WARMUP:
			o->warmup = (unsigned int)parse_uint("--warmup", optarg, 0, REPEAT_MAX);
			break;
		case OPT_WORKERS:
			o->workers = (unsigned int)parse_uint("--workers", optarg, 1, RT_EXECUTOR_WORKERS_MAX);
			break;
		case OPT_NO_OPTIMIZE:
			o->optimize = false;
			break;
		case OPT_DEVICE:
			if (strcmp(optarg, "cpu") != 0 && strcmp(optarg, "gpu") != 0)
				die("--device: '%s' is neither cpu nor gpu", optarg);
			o->gpu = strcmp(optarg, "gpu") == 0;
			break;
		case OPT_GPU_MODULE:
			o->gpu_module = optarg;
			break;
		case OPT_GPU_INDEX:
			o->gpu_index = (int)parse_uint("--gpu-index", optarg, 0, GPU_DEVICES_MAX - 1);
			break;
		case OPT_PRECISION:
			rc = gpu_precision_parse(optarg);
			if (rc < 0)
				die("--precision: '%s' is neither fp32 nor fp16", optarg);
			o->precision = (uint32_t)rc;
			gpu_only = true;
			break;
		case OPT_LAYOUT:
			rc = gpu_layout_parse(optarg);
			if (rc < 0)
				die("--layout: '%s' is none of auto, nchw, nhwc", optarg);
			o->layout = (uint32_t)rc;
			gpu_only = true;
			break;
		case OPT_LAUNCH_MODE:
			rc = gpu_launch_mode_parse(optarg);
			if (rc < 0)
				die("--launch-mode: '%s' is neither graph nor doorbell", optarg);
			o->launch_mode = (uint32_t)rc;
			gpu_only = true;
			break;
		case 'h':
			usage(stdout);
			exit(0);
		case ':':
			die("option %s needs an argument (see --help)", argv[optind - 1]);
		case '?':
		default:
			if (optopt > 0 && optopt < 256)
				die("option -%c is unknown (see --help)", optopt);
			die("option %s is unknown (see --help)", argv[optind - 1]);
		}
	}
	if (optind != argc - 1)
		die(optind == argc ? "no model file given (see --help)" : "one model file at a time (see --help)");
	if (!o->gpu && (o->gpu_module != NULL || o->gpu_index != 0 || gpu_only))
		die("--gpu-module, --gpu-index, --precision, --layout and --launch-mode go with --device gpu");
	if (o->gpu && o->workers != 1)
		die("--workers is the CPU executor's: --device gpu runs on one polling thread");
	o->model = argv[optind];
}

static const char *dims_str(const struct rt_tensor *t, char *buf, size_t cap)
{
	size_t n = 0;

	n += (size_t)snprintf(buf + n, cap - n, "[");
	for (unsigned int d = 0; d < t->rank && n < cap; d++)
		n += (size_t)snprintf(buf + n, cap - n, "%s%" PRId64, d ? "," : "", t->dims[d]);
	if (n < cap)
		snprintf(buf + n, cap - n, "]");
	return buf;
}

static const char *bytes_str(size_t b, char *buf, size_t cap)
{
	if (b >= (size_t)1 << 20)
		snprintf(buf, cap, "%.1f MiB", (double)b / (1 << 20));
	else if (b >= (size_t)10 << 10)
		snprintf(buf, cap, "%.1f KiB", (double)b / (1 << 10));
	else
		snprintf(buf, cap, "%zu B", b);
	return buf;
}

static double now_us(void)
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

static void write_npy(const char *dir, const char *name, const struct rt_tensor *t, const void *data)
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

/* ---- the placement report ---------------------------------------------------------------------- */

struct op_count {
	const char *op, *domain;
	const char *device;
	unsigned int nodes, steps;
};

static const char *device_name(enum rt_device d)
{
	return d == RT_DEVICE_CPU ? "cpu" : d == RT_DEVICE_GPU ? "gpu" : "?";
}

static void print_model(const struct rt_graph *g, const char *path)
{
	printf("model  %s (IR %" PRId64 ", opsets", path, g->ir_version);
	for (uint16_t i = 0; i < g->num_opsets; i++)
		printf("%s %s %" PRId64, i ? "," : "", g->opsets[i].domain[0] ? g->opsets[i].domain : "ai.onnx",
		       g->opsets[i].version);
	printf(")\n");
}

static void print_placement(const struct runner *r, const struct opts *o, const struct rt_opt_report *rep)
{
	const struct rt_graph *g = r->g;
	struct op_count ops[OP_TYPES_MAX];
	unsigned int num_ops = 0, steps = rt_plan_num_steps(r->plan);
	/* per node, the kernel the planner resolved for its step; NULL: folded, run on the host at plan time */
	const struct rt_kernel **ran = calloc(g->num_nodes + 1, sizeof(*ran));
	struct rt_plan_stats st;
	char a[32], b[32], c[32], d[32], e[32], f[32];

	if (ran == NULL)
		die("out of memory");
	for (uint32_t s = 0; s < steps; s++) {
		struct rt_plan_step_info si;

		if (rt_plan_step_info(r->plan, s, &si) == 0 && si.node < g->num_nodes)
			ran[si.node] = si.kernel;
	}
	for (uint32_t n = 0; n < g->num_nodes; n++) {
		const struct rt_node *node = &g->nodes[n];
		unsigned int i;

		for (i = 0; i < num_ops; i++)
			if (strcmp(ops[i].op, node->op_type) == 0 && strcmp(ops[i].domain, node->domain) == 0)
				break;
		if (i == num_ops) {
			if (num_ops == OP_TYPES_MAX)
				continue;
			/* folded nodes ran on the host (CPU kernels), whatever the device */
			ops[num_ops++] = (struct op_count){ node->op_type, node->domain,
							    ran[n] != NULL ? device_name(ran[n]->device) : "cpu", 0, 0 };
		}
		ops[i].nodes++;
		ops[i].steps += ran[n] != NULL;
	}
	free(ran);

	printf("graph  %u nodes loaded, %u after optimisation%s\n", rep->nodes_before, rep->nodes_after,
	       o->optimize ? "" : " (--no-optimize)");
	if (o->optimize) {
		if (rep->num_kinds == 0)
			printf("optimise  nothing rewritten\n");
		for (uint32_t i = 0; i < rep->num_kinds && i < RT_OPT_KINDS_MAX; i++)
			printf("optimise  %-40s x%u\n", rep->kinds[i].what, rep->kinds[i].count);
	}
	printf("ops    %-34s %6s %6s %6s  %s\n", "op", "nodes", "run", "folded", "kernel");
	for (unsigned int i = 0; i < num_ops; i++) {
		char name[128];

		snprintf(name, sizeof(name), "%s%s%s", ops[i].domain, ops[i].domain[0] ? "." : "", ops[i].op);
		printf("       %-34s %6u %6u %6u  %s\n", name, ops[i].nodes, ops[i].steps, ops[i].nodes - ops[i].steps,
		       ops[i].device);
	}
	rt_plan_stats(r->plan, &st);
	printf("plan   batch %" PRId64 ", %s: %u steps, %u nodes folded\n", o->batch,
	       o->gpu ? "device program, one graph launch per batch" :
	       o->workers == 1 ? "sequential layout, rt_plan_run on this thread"
			       : "concurrent layout, multi-worker executor",
	       st.steps, st.folded);
	if (o->gpu)
		return; /* the device's arena and constants are reported by setup_gpu */
	printf("arena  %s (tensors %s, %s without reuse; descriptors %s); constants %s; worker scratch %s%s\n",
	       bytes_str(st.arena_bytes, a, sizeof(a)), bytes_str(st.tensor_bytes, b, sizeof(b)),
	       bytes_str(st.tensor_bytes_sum, c, sizeof(c)), bytes_str(st.descriptor_bytes, d, sizeof(d)),
	       bytes_str(st.constant_bytes, e, sizeof(e)), bytes_str(st.worker_scratch_bytes, f, sizeof(f)),
	       o->workers == 1 ? " (in the arena)" : " per worker");
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
static void on_done(void *ctx, const struct bw_completion *c)
{
	struct runner *r = ctx;

	r->done = true;
	r->status = c->status;
	snprintf(r->msg, sizeof(r->msg), "%s", c->msg);
}
static void setup(struct runner *r, const struct opts *o)
{
	const struct rt_graph *g = r->g;
	char err[RT_EXECUTOR_MSG_MAX];

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
		r->seq_plan = rt_plan_create(g, o->batch, RT_DEVICE_CPU, err, sizeof(err));
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
		r->ex = rt_executor_create(g, &o->batch, 1, o->workers, 1, err, sizeof(err));
		if (r->ex == NULL)
			die("%s: %s", o->model, err);
		r->plan = rt_executor_plan(r->ex, o->batch);
		if (g->num_inputs > BW_BATCH_TENSORS_MAX || g->num_outputs > BW_BATCH_TENSORS_MAX)
			die("%s: the executor takes at most %d inputs and outputs", o->model, BW_BATCH_TENSORS_MAX);
	}
	/* Dtypes and shapes as bound (for the executor, data comes and goes with the batch). */
	for (uint32_t i = 0; i < g->num_inputs; i++) {
		struct rt_plan_value_info vi;

		rt_plan_value_info(r->plan, g->inputs[i], &vi);
		r->in[i] = (struct rt_tensor){ .dtype = vi.tensor.dtype, .rank = vi.tensor.rank, .data = r->in[i].data };
		memcpy(r->in[i].dims, vi.tensor.dims, sizeof(vi.tensor.dims));
		r->in_bytes[i] = vi.nbytes;
	}
	for (uint32_t i = 0; i < g->num_outputs; i++) {
		struct rt_plan_value_info vi;

		rt_plan_value_info(r->plan, g->outputs[i], &vi);
		r->out[i] = (struct rt_tensor){ .dtype = vi.tensor.dtype, .rank = vi.tensor.rank, .data = r->out[i].data };
		memcpy(r->out[i].dims, vi.tensor.dims, sizeof(vi.tensor.dims));
		r->out_bytes[i] = vi.nbytes;
	}
}

/* One batch of one task that carries every row, as a single request would (segments set by the caller). */
static void one_task_batch(struct runner *r, const struct opts *o)
{
	r->task = (struct bw_batch_task){ .rows = (uint32_t)o->batch };
	r->tasks[0] = &r->task;
	r->batch = (struct bw_batch){ .size = (uint32_t)o->batch, .padded_size = (uint32_t)o->batch, .num_tasks = 1,
				      .num_inputs = (uint16_t)r->g->num_inputs, .num_outputs = (uint16_t)r->g->num_outputs,
				      .tasks = r->tasks };
}

/* ---- the GPU ------------------------------------------------------------------------------------ */

/*
 * Opens the device, compiles and loads the program, makes the executor on this thread's stream, and
 * puts the inputs and room for the outputs in one region registered with the device: the gather and
 * scatter kernels read and write it directly, as they do packet buffers in the daemon.
 */
static void setup_gpu(struct runner *r, const struct opts *o)
{
	const struct rt_graph *g = r->g;
	static const char *const op_names[GPU_OP_CODE_COUNT] = {
		[GPU_OP_UNARY] = "unary", [GPU_OP_BINARY] = "binary", [GPU_OP_WHERE] = "where", [GPU_OP_CAST] = "cast",
		[GPU_OP_COPY] = "copy", [GPU_OP_PERMUTE] = "permute", [GPU_OP_GATHER] = "gather",
		[GPU_OP_SOFTMAX] = "softmax", [GPU_OP_LAYERNORM] = "layernorm", [GPU_OP_REDUCE] = "reduce",
		[GPU_OP_GEMM] = "gemm", [GPU_OP_CONV] = "conv", [GPU_OP_POOL] = "pool",
	};
	unsigned int counts[GPU_OP_CODE_COUNT] = { 0 };
	char err[GPU_ERR_MAX * 2], a[32], b[32];
	size_t off = 0;
	void *dev_addr;
	int rc;

	if (g->num_inputs > BW_BATCH_TENSORS_MAX || g->num_outputs > BW_BATCH_TENSORS_MAX)
		die("%s: the GPU executor takes at most %d inputs and outputs", o->model, BW_BATCH_TENSORS_MAX);
	rc = gpu_host_device_open(o->gpu_module, o->gpu_index, &r->gpu, err, sizeof(err));
	if (rc != 0)
		die("--device gpu: %s", err);
	rc = gpu_host_program_load(&r->gpu, g, &o->batch, 1, &(struct gpu_compile_options){ o->precision, o->layout },
				   &r->prog, err, sizeof(err));
	if (rc != 0)
		die("%s: on the GPU: %s", o->model, err);
	rc = r->gpu.ops->stream_create(r->gpu.dev, &r->gstream, err, sizeof(err));
	if (rc != 0)
		die("--device gpu: %s", err);
	r->gex = gpu_executor_create(r->gpu.ops, r->gpu.dev, r->prog.loaded, r->prog.compiled, r->gstream, 1, o->launch_mode, err,
				     sizeof(err));
	if (r->gex == NULL)
		die("%s: %s", o->model, err);
	for (uint32_t i = 0; i < r->prog.compiled->prog.sizes[0].nb_ops; i++)
		counts[r->prog.compiled->prog.sizes[0].ops[i].code]++;
	printf("device %s (%s module, %s, %s, %s launch): %u ops:", r->gpu.info.name, r->gpu.ops->name,
	       gpu_precision_name(o->precision), gpu_layout_name(r->prog.compiled->layout),
	       gpu_launch_mode_name(o->launch_mode), r->prog.compiled->prog.sizes[0].nb_ops);
	for (unsigned int c = 1; c < GPU_OP_CODE_COUNT; c++)
		if (counts[c] > 0)
			printf(" %s %u", op_names[c], counts[c]);
	printf("; arena %s, constants %s\n", bytes_str(r->prog.compiled->prog.sizes[0].arena_bytes, a, sizeof(a)),
	       bytes_str(r->prog.compiled->prog.const_bytes, b, sizeof(b)));

	for (uint32_t i = 0; i < g->num_inputs; i++)
		r->gmem_bytes += (r->in_bytes[i] + 63) & ~(size_t)63;
	for (uint32_t i = 0; i < g->num_outputs; i++)
		r->gmem_bytes += (r->out_bytes[i] + 63) & ~(size_t)63;
	r->gmem_bytes = (r->gmem_bytes + 4095) & ~(size_t)4095;
	r->gmem = aligned_alloc(4096, r->gmem_bytes);
	if (r->gmem == NULL)
		die("out of memory for %zu bytes of inputs and outputs", r->gmem_bytes);
	memset(r->gmem, 0, r->gmem_bytes);
	rc = r->gpu.ops->host_register(r->gpu.dev, r->gmem, r->gmem_bytes, &dev_addr, err, sizeof(err));
	if (rc != 0)
		die("--device gpu: registering %zu bytes: %s", r->gmem_bytes, err);
	one_task_batch(r, o);
	for (uint32_t i = 0; i < g->num_inputs; i++) {
		memcpy(r->gmem + off, r->in_data[i], r->in_bytes[i]);
		r->task.inputs[i] = (struct bw_segment){ r->gmem + off, (uint32_t)r->in_bytes[i] };
		off += (r->in_bytes[i] + 63) & ~(size_t)63;
	}
	for (uint32_t i = 0; i < g->num_outputs; i++) {
		r->out_data[i] = r->gmem + off; /* not ours to free: part of gmem */
		r->task.outputs[i] = (struct bw_segment){ r->gmem + off, (uint32_t)r->out_bytes[i] };
		off += (r->out_bytes[i] + 63) & ~(size_t)63;
	}
}

static double run_once_gpu(struct runner *r, const struct opts *o)
{
	char why[GPU_ERR_MAX];
	int wait_s = r->gpu.module.handle == NULL ? FAKE_WAIT_S : GPU_WAIT_S;
	double t0, t;
	int rc;

	r->done = false;
	t0 = now_us();
	rc = gpu_executor_submit(r->gex, &r->batch);
	if (rc != 0)
		die("%s: launching on %s: %s%s%s", o->model, r->gpu.info.name, strerror(-rc), rc == -EIO ? ": " : "",
		    rc == -EIO ? gpu_executor_error(r->gex) : "");
	while (gpu_executor_poll(r->gex, on_done, r, 1) == 0) {
		if (now_us() - t0 > wait_s * 1e6) {
			r->gpu.ops->health(r->gpu.dev, why, sizeof(why));
			die("%s: no completion from %s after %d s (device: %s)", o->model, r->gpu.info.name, wait_s, why);
		}
	}
	t = now_us() - t0;
	if (r->status != BW_STATUS_OK)
		die("%s: %s: %s", o->model, bw_status_name(r->status), r->msg);
	return t;
}

static void teardown_gpu(struct runner *r)
{
	gpu_executor_destroy(r->gex);
	if (r->gstream != NULL)
		r->gpu.ops->stream_destroy(r->gstream);
	gpu_host_program_unload(&r->gpu, &r->prog);
	if (r->gmem != NULL)
		r->gpu.ops->host_unregister(r->gpu.dev, r->gmem, NULL, 0);
	gpu_host_device_close(&r->gpu);
	free(r->gmem);
	for (uint32_t i = 0; i < TENSORS_MAX; i++)
		r->out_data[i] = NULL;
}

/* Executor mode: one batch of one task that carries every row, as a single request would. */
static void setup_batch(struct runner *r, const struct opts *o)
{
	const struct rt_graph *g = r->g;

	one_task_batch(r, o);
	for (uint32_t i = 0; i < g->num_inputs; i++) {
		if (r->in_bytes[i] > UINT32_MAX)
			die("input %s: %zu bytes do not fit a batch segment", g->values[g->inputs[i]].name, r->in_bytes[i]);
		r->task.inputs[i] = (struct bw_segment){ r->in_data[i], (uint32_t)r->in_bytes[i] };
	}
	for (uint32_t i = 0; i < g->num_outputs; i++) {
		r->out_data[i] = malloc(r->out_bytes[i] != 0 ? r->out_bytes[i] : 1);
		if (r->out_data[i] == NULL || r->out_bytes[i] > UINT32_MAX)
			die("output %s: cannot hold %zu bytes", g->values[g->outputs[i]].name, r->out_bytes[i]);
		r->task.outputs[i] = (struct bw_segment){ r->out_data[i], (uint32_t)r->out_bytes[i] };
	}
}

/* One inference. \return its duration in microseconds: rt_plan_run alone in sequential mode (the
 * inputs are copied in first, untimed); submit to completion, gather and scatter included, in
 * executor mode. */
static double run_once(struct runner *r, const struct opts *o)
{
	char err[RT_EXECUTOR_MSG_MAX];
	double t0;
	int rc;

	if (r->gex != NULL)
		return run_once_gpu(r, o);
	if (r->ex == NULL) {
		/* The arena reuses an input's bytes once its last reader ran: copy them in every time. */
		for (uint32_t i = 0; i < r->g->num_inputs; i++)
			memcpy(r->in[i].data, r->in_data[i], r->in_bytes[i]);
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

static void print_outputs(const struct runner *r, const struct opts *o)
{
	const struct rt_graph *g = r->g;
	char a[128];

	for (uint32_t i = 0; i < g->num_outputs; i++) {
		const char *name = g->values[g->outputs[i]].name;
		const struct rt_tensor *t = &r->out[i];
		const void *data = r->ex != NULL || r->gex != NULL ? r->out_data[i] : t->data;
		size_t elem = rt_dtype_size(t->dtype), n = elem != 0 ? r->out_bytes[i] / elem : 0;
		double lo = INFINITY, hi = -INFINITY, sum = 0;
		size_t nonfinite = 0;

		for (size_t e = 0; e < n; e++) {
			double v = bw_elem_get(t->dtype, data, e);

			if (!isfinite(v)) {
				nonfinite++;
				continue;
			}
			lo = v < lo ? v : lo;
			hi = v > hi ? v : hi;
			sum += v;
		}
		printf("output %-20s %-7s %-18s", name, rt_dtype_name(t->dtype), dims_str(t, a, sizeof(a)));
		if (n > nonfinite)
			printf(" min %.6g max %.6g mean %.6g", lo, hi, sum / (double)(n - nonfinite));
		if (nonfinite > 0)
			printf(" NON-FINITE %zu of %zu", nonfinite, n);
		printf("\n       first:");
		for (size_t e = 0; e < n && e < VALUES_SHOWN; e++)
			printf(" %.6g", bw_elem_get(t->dtype, data, e));
		printf("%s\n", n > VALUES_SHOWN ? " ..." : "");
		if (o->output_dir != NULL)
			write_npy(o->output_dir, name, t, data);
	}
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
	memset(&rep, 0, sizeof(rep));
	rep.nodes_before = rep.nodes_after = g->num_nodes;
	if (o.optimize) {
		rc = rt_graph_optimize(g, o.gpu ? RT_DEVICE_GPU : RT_DEVICE_CPU, &rep, err, sizeof(err));
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
