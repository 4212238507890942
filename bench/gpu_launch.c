/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * gpu_launch: what one batch costs on the GPU beyond the model's own device time. It loads
 * an ONNX model as bwrun --device gpu does (rt_graph_load, rt_graph_optimize for the GPU,
 * gpu_compile at every requested batch size), loads the program, and for each precision and launch
 * mode makes one stream and one instance on a thread of its own, registers an input and an output
 * buffer (page-aligned host memory), writes each batch table itself (gather segments from the input
 * buffer, scatter segments into the output buffer, seeded inputs as bwrun makes them) and measures
 * per batch size:
 *
 *   graph_ms            the device's time per graph: ops->instance_time over --graph-iters launches
 *                       back to back ("na" while the module refuses it with -ENOTSUP)
 *   e2e_p50_us, _p99_   host clock (CLOCK_MONOTONIC, vDSO: no system call) from just before
 *                       instance_launch to the completion word seen, one batch at a time
 *   launch_cpu_us       host time inside the instance_launch call, mean
 *   syscalls_per_batch  system calls the launching thread makes per batch (table written, launch,
 *                       word polled), counted by tests/gpu/syscount.h's seccomp trap over
 *                       --syscall-batches batches; the numbers seen most in syscalls_top
 *   e2e_vs_graph        e2e_p50 / graph time: how far a lone batch is from the device's own time
 *
 * Timing and counting are separate passes: the counting filter never comes off a thread (and makes
 * every trapped call slow), so it is installed only after every size was timed, and on the item's own
 * thread, never on main.
 *
 * One key=value line per (precision, mode, size), then a summary line; --output FILE gets the same
 * lines (and the refusals, as '#' lines). A precision or mode the compiler or the module refuses is
 * reported and skipped: the run goes on, and exits 1 at the end. Exit status: 0 every item measured;
 * 1 an item refused or failed, or an error; 77 no device (the reason printed); 2 usage.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "graph.h"
#include "host.h"
#include "model_inputs.h"
#include "syscount.h"

#define PROG "gpu_launch"

#define EXIT_SKIP 77               /* no device: nothing to measure (meson's SKIP) */
#define EXIT_USAGE 2
#define SIZES_MAX GPU_PROG_SIZES_MAX
#define BATCH_MAX 4096u
#define ITERS_MAX 10000000u
#define ITERS_DEFAULT 1000u        /* timed batches per size, one at a time */
#define WARMUP_DEFAULT 100u        /* untimed batches per size first */
#define GRAPH_ITERS_DEFAULT 200u   /* launches instance_time times back to back */
#define SYSCALL_BATCHES_DEFAULT 100u
#define WAIT_NS (10ll * 1000000000ll) /* a batch not done by then is a failure */
#define POLL_CLOCK_EVERY 4096u     /* polls between clock reads while waiting for a word */
#define TENSOR_ALIGN 64            /* bytes between tensors in the host buffers */
#define PAGE_BYTES 4096
#define TOP_SYSCALLS 5


struct opts {
	const char *model;
	int64_t sizes[SIZES_MAX];
	unsigned int nb_sizes;
	bool precision[GPU_PRECISION_COUNT];
	bool mode[GPU_LAUNCH_MODE_COUNT];
	uint32_t layout;                 /* enum gpu_layout */
	const char *gpu_module;
	int gpu_index;
	uint64_t seed;
	unsigned int iters, warmup, graph_iters, syscall_batches;
	const char *output;
};

/* What one (precision, mode, size) measured. NAN: not measured. */
struct measure {
	double graph_ms;
	double e2e_p50_us, e2e_p99_us, e2e_mean_us;
	double launch_cpu_us;
	double syscalls_per_batch;
	char syscalls_top[128];
	bool outputs_finite;
};

/* One (precision, mode): run on a thread of its own (item_main). */
struct item {
	const struct opts *o;
	const struct gpu_host_device *hd;
	const struct gpu_compiled *compiled;
	struct gpu_loaded *loaded;
	uint32_t precision, mode;
	uint8_t *in, *out;               /* registered host buffers */
	uint64_t in_off[GPU_PROG_TENSORS_MAX], out_off[GPU_PROG_TENSORS_MAX];
	uint32_t out_dtype[GPU_PROG_TENSORS_MAX];
	/* results */
	struct measure m[SIZES_MAX];
	bool measured[SIZES_MAX];
	char err[GPU_ERR_MAX * 2];       /* "" unless the item failed */
	bool refused;                    /* the module refused the mode (not a failure of the run) */
	char syscount_note[256];         /* why syscalls were not counted */
	char graph_note[GPU_ERR_MAX];    /* why graph_ms is na */
};

static FILE *g_out; /* --output, or NULL */

static void die(int status, const char *fmt, ...) __attribute__((format(printf, 2, 3), noreturn));

/* One line on stderr (and in --output as a '#' line), then exit. */
static void die(int status, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, PROG ": ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	if (g_out != NULL) {
		fprintf(g_out, "# " PROG ": ");
		va_start(ap, fmt);
		vfprintf(g_out, fmt, ap);
		va_end(ap);
		fputc('\n', g_out);
		fclose(g_out);
	}
	exit(status);
}

/* A line for both stdout and --output. */
static void emit(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void emit(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	if (g_out != NULL) {
		va_start(ap, fmt);
		vfprintf(g_out, fmt, ap);
		va_end(ap);
		fflush(g_out);
	}
	fflush(stdout);
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: " PROG " [options] MODEL.onnx\n"
		"Measures what a batch costs on the GPU beyond the model's device time: device time per graph,\n"
		"launch-to-completion on the host, CPU time in the launch call, system calls per batch.\n"
		"\n"
		"  --batch LIST          batch sizes, ascending, comma-separated (default 1,8,32)\n"
		"  --precision LIST      fp32, fp16 or fp32,fp16 (default fp32)\n"
		"  --launch-mode LIST    graph, doorbell or graph,doorbell (default graph)\n"
		"  --layout L            auto (default: nhwc for fp16, nchw for fp32), nchw or nhwc\n"
		"  --gpu-module PATH     the device module (default: libbwgpu.so where the loader looks);\n"
		"                        'fake': the fake device, on the CPU (a smoke run: times mean nothing)\n"
		"  --gpu-index N         the device (default 0)\n"
		"  --seed S              seed of the generated inputs (default %u), as bwrun's\n"
		"  --iters N             timed batches per size, one at a time (default %u)\n"
		"  --warmup N            untimed batches per size before them (default %u)\n"
		"  --graph-iters N       launches back to back for the device time (default %u)\n"
		"  --syscall-batches N   batches whose system calls are counted (default %u; 0: not counted)\n"
		"  --output FILE         also write the result lines to FILE\n"
		"  -h, --help            this text\n"
		"\n"
		"One line per (precision, mode, size):\n"
		"  model=M precision=P layout=L mode=M batch=N graph_ms=X e2e_p50_us=X e2e_p99_us=X e2e_mean_us=X\n"
		"  launch_cpu_us=X syscalls_per_batch=X syscalls_top=NAME:COUNT,... e2e_vs_graph=X outputs_finite=yes|no\n"
		"('na' where not measured), then: summary model=M items=N measured=N refused=N failed=N module=NAME\n"
		"Exit status: 0 all measured; 1 something refused or failed; 2 usage; 77 no device.\n",
		BW_INPUT_SEED_DEFAULT, ITERS_DEFAULT, WARMUP_DEFAULT, GRAPH_ITERS_DEFAULT, SYSCALL_BATCHES_DEFAULT);
}

static unsigned long long parse_uint(const char *opt, const char *s, unsigned long long lo, unsigned long long hi)
{
	unsigned long long v;
	char *end;

	errno = 0;
	v = strtoull(s, &end, 0);
	if (errno != 0 || end == s || *end != '\0' || s[0] == '-' || v < lo || v > hi)
		die(EXIT_USAGE, "%s: '%s' is not an integer in [%llu, %llu]", opt, s, lo, hi);
	return v;
}

/* "a,b": each name (one host.h's parse function knows: gpu_precision_parse, ...) set in want[]; an
 * unknown name is a usage error. */
static void parse_names(const char *opt, char *list, int (*parse)(const char *name), const char *expected,
			unsigned int nb, bool *want)
{
	char *save = NULL;

	memset(want, 0, nb * sizeof(*want));
	for (char *tok = strtok_r(list, ",", &save); tok != NULL; tok = strtok_r(NULL, ",", &save)) {
		int i = parse(tok);

		if (i < 0 || (unsigned int)i >= nb)
			die(EXIT_USAGE, "%s: '%s' is not one of %s", opt, tok, expected);
		want[i] = true;
	}
}

static void parse_sizes(char *list, struct opts *o)
{
	char *save = NULL;

	o->nb_sizes = 0;
	for (char *tok = strtok_r(list, ",", &save); tok != NULL; tok = strtok_r(NULL, ",", &save)) {
		if (o->nb_sizes == SIZES_MAX)
			die(EXIT_USAGE, "--batch: more than %d sizes", SIZES_MAX);
		o->sizes[o->nb_sizes] = (int64_t)parse_uint("--batch", tok, 1, BATCH_MAX);
		if (o->nb_sizes > 0 && o->sizes[o->nb_sizes] <= o->sizes[o->nb_sizes - 1])
			die(EXIT_USAGE, "--batch: sizes must be ascending, without repeats");
		o->nb_sizes++;
	}
	if (o->nb_sizes == 0)
		die(EXIT_USAGE, "--batch: no size given");
}

static void parse_args(int argc, char **argv, struct opts *o)
{
	enum { OPT_BATCH = 256, OPT_PRECISION, OPT_MODE, OPT_GPU_MODULE, OPT_GPU_INDEX, OPT_SEED, OPT_ITERS,
	       OPT_WARMUP, OPT_GRAPH_ITERS, OPT_SYSCALL_BATCHES, OPT_OUTPUT, OPT_LAYOUT };
	static const struct option longopts[] = {
		{ "batch", required_argument, NULL, OPT_BATCH },
		{ "precision", required_argument, NULL, OPT_PRECISION },
		{ "launch-mode", required_argument, NULL, OPT_MODE },
		{ "layout", required_argument, NULL, OPT_LAYOUT },
		{ "gpu-module", required_argument, NULL, OPT_GPU_MODULE },
		{ "gpu-index", required_argument, NULL, OPT_GPU_INDEX },
		{ "seed", required_argument, NULL, OPT_SEED },
		{ "iters", required_argument, NULL, OPT_ITERS },
		{ "warmup", required_argument, NULL, OPT_WARMUP },
		{ "graph-iters", required_argument, NULL, OPT_GRAPH_ITERS },
		{ "syscall-batches", required_argument, NULL, OPT_SYSCALL_BATCHES },
		{ "output", required_argument, NULL, OPT_OUTPUT },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	char defaults[] = "1,8,32";
	int c, rc;

	*o = (struct opts){ .seed = BW_INPUT_SEED_DEFAULT, .iters = ITERS_DEFAULT, .warmup = WARMUP_DEFAULT,
			    .graph_iters = GRAPH_ITERS_DEFAULT, .syscall_batches = SYSCALL_BATCHES_DEFAULT };
	o->precision[GPU_PRECISION_FP32] = true;
	o->mode[GPU_LAUNCH_GRAPH] = true;
	parse_sizes(defaults, o);
	opterr = 0; /* our own one-line messages */
	while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
		switch (c) {
		case OPT_BATCH:
			parse_sizes(optarg, o);
			break;
		case OPT_PRECISION:
			parse_names("--precision", optarg, gpu_precision_parse, "fp32, fp16", GPU_PRECISION_COUNT, o->precision);
			break;
		case OPT_MODE:
			parse_names("--launch-mode", optarg, gpu_launch_mode_parse, "graph, doorbell", GPU_LAUNCH_MODE_COUNT,
				    o->mode);
			break;
		case OPT_LAYOUT:
			rc = gpu_layout_parse(optarg);
			if (rc < 0)
				die(EXIT_USAGE, "--layout: '%s' is not one of auto, nchw, nhwc", optarg);
			o->layout = (uint32_t)rc;
			break;
		case OPT_GPU_MODULE:
			o->gpu_module = optarg;
			break;
		case OPT_GPU_INDEX:
			o->gpu_index = (int)parse_uint("--gpu-index", optarg, 0, GPU_DEVICES_MAX - 1);
			break;
		case OPT_SEED:
			o->seed = parse_uint("--seed", optarg, 0, UINT64_MAX);
			break;
		case OPT_ITERS:
			o->iters = (unsigned int)parse_uint("--iters", optarg, 1, ITERS_MAX);
			break;
		case OPT_WARMUP:
			o->warmup = (unsigned int)parse_uint("--warmup", optarg, 0, ITERS_MAX);
			break;
		case OPT_GRAPH_ITERS:
			o->graph_iters = (unsigned int)parse_uint("--graph-iters", optarg, 1, ITERS_MAX);
			break;
		case OPT_SYSCALL_BATCHES:
			o->syscall_batches = (unsigned int)parse_uint("--syscall-batches", optarg, 0, ITERS_MAX);
			break;
		case OPT_OUTPUT:
			o->output = optarg;
			break;
		case 'h':
			usage(stdout);
			exit(0);
		case ':':
			die(EXIT_USAGE, "option %s needs an argument (see --help)", argv[optind - 1]);
		case '?':
		default:
			if (optopt > 0 && optopt < 256)
				die(EXIT_USAGE, "option -%c is unknown (see --help)", optopt);
			die(EXIT_USAGE, "option %s is unknown (see --help)", argv[optind - 1]);
		}
	}
	if (optind != argc - 1)
		die(EXIT_USAGE, optind == argc ? "no model file given (see --help)" : "one model file at a time (see --help)");
	o->model = argv[optind];
}

/* ---- timing ------------------------------------------------------------------------------------------ */

static inline int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts); /* vDSO: no system call on x86-64 Linux with a TSC clock */
	return (int64_t)ts.tv_sec * 1000000000ll + ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* Nearest rank: the smallest value at or above the fraction. v sorted. */
static double percentile(const double *v, unsigned int n, double frac)
{
	size_t k = (size_t)ceil(frac * n);

	return v[k > 0 ? k - 1 : 0];
}

/* ---- one item: a (precision, mode) on its own thread ---------------------------------------------------- */

struct size_ctx {
	struct gpu_batch_table *table;
	volatile uint32_t *word;
	uint32_t generation;
	uint32_t nb_segments;
	struct gpu_segment segs[2 * GPU_PROG_TENSORS_MAX]; /* one gather per input, one scatter per output */
};

/* The batch table as the executor writes it: segments, counts, fault cleared, the next generation. */
static void write_table(const struct item *it, struct size_ctx *sc)
{
	const struct gpu_program *prog = &it->compiled->prog;

	memcpy(sc->table->segments, sc->segs, sc->nb_segments * sizeof(sc->segs[0]));
	sc->table->nb_gather = prog->nb_inputs;
	sc->table->nb_scatter = prog->nb_outputs;
	sc->table->fault = GPU_FAULT_NONE;
	sc->table->fault_op = 0;
	if (++sc->generation == 0)
		sc->generation = 1; /* 0 is a fresh word's value */
	sc->table->generation = sc->generation;
	/* the table is complete before the launch is queued: the device reads it after the launch */
	__atomic_thread_fence(__ATOMIC_RELEASE);
}

/* Spins until the word reaches the generation; the clock is read now and then, for the deadline only. */
static int wait_word(struct item *it, uint32_t size_idx, const struct size_ctx *sc, int64_t start)
{
	unsigned int spins = 0;

	while (!gpu_word_reached(sc->word, sc->generation)) {
		if (++spins % POLL_CLOCK_EVERY == 0 && now_ns() - start > WAIT_NS) {
			char why[GPU_ERR_MAX] = "healthy";

			it->hd->ops->health(it->hd->dev, why, sizeof(why));
			snprintf(it->err, sizeof(it->err), "no completion after %lld s (device: %s)", WAIT_NS / 1000000000ll,
				 why);
			return -ETIMEDOUT;
		}
	}
	if (sc->table->fault != GPU_FAULT_NONE) {
		snprintf(it->err, sizeof(it->err), "a kernel raised fault %u in device op %u (node %s)", sc->table->fault,
			 sc->table->fault_op, gpu_compiled_op_node(it->compiled, size_idx, sc->table->fault_op));
		return -EIO;
	}
	return 0;
}

/* One batch: table, launch, word. *launch_ns: inside instance_launch; *e2e_ns: launch to word seen. */
static int one_batch(struct item *it, struct gpu_instance *inst, uint32_t size_idx, struct size_ctx *sc,
		     int64_t *launch_ns, int64_t *e2e_ns)
{
	int64_t t0, t1;
	int rc;

	write_table(it, sc);
	t0 = now_ns();
	rc = it->hd->ops->instance_launch(inst, size_idx, 0, it->err, sizeof(it->err));
	t1 = now_ns();
	if (rc != 0)
		return rc;
	rc = wait_word(it, size_idx, sc, t0);
	if (e2e_ns != NULL)
		*e2e_ns = now_ns() - t0;
	if (launch_ns != NULL)
		*launch_ns = t1 - t0;
	return rc;
}

static bool outputs_finite(const struct item *it, uint32_t batch)
{
	const struct gpu_program *prog = &it->compiled->prog;

	for (uint32_t t = 0; t < prog->nb_outputs; t++) {
		if (it->out_dtype[t] != BW_DTYPE_FLOAT)
			continue;
		const float *f = (const float *)(it->out + it->out_off[t]);
		size_t n = (size_t)batch * prog->output_row_bytes[t] / sizeof(float);

		for (size_t i = 0; i < n; i++)
			if (!isfinite(f[i]))
				return false;
	}
	return true;
}

/* Pass 1 for one size: warm-up, device time, then e2e and launch CPU time over --iters batches. */
static int time_size(struct item *it, struct gpu_instance *inst, uint32_t s, struct size_ctx *sc, double *e2e_us)
{
	const struct opts *o = it->o;
	struct measure *m = &it->m[s];
	double launch_sum = 0, e2e_sum = 0;
	int rc;

	for (unsigned int i = 0; i < o->warmup; i++) {
		rc = one_batch(it, inst, s, sc, NULL, NULL);
		if (rc != 0)
			return rc;
	}
	m->graph_ms = NAN;
	{
		double ms = 0;

		/* instance_time launches the table as written: the last batch's, the slot idle */
		rc = it->hd->ops->instance_time(inst, s, 0, o->graph_iters, &ms, it->graph_note, sizeof(it->graph_note));
		if (rc == 0)
			m->graph_ms = ms;
		else if (rc != -ENOTSUP)
			return rc; /* graph_note holds the reason; not a refusal but a failure */
		/* the word now holds the table's generation: the next batch takes the one after it */
	}
	for (unsigned int i = 0; i < o->iters; i++) {
		int64_t l, e;

		rc = one_batch(it, inst, s, sc, &l, &e);
		if (rc != 0)
			return rc;
		launch_sum += (double)l / 1e3;
		e2e_us[i] = (double)e / 1e3;
		e2e_sum += e2e_us[i];
	}
	qsort(e2e_us, o->iters, sizeof(double), cmp_double);
	m->e2e_p50_us = percentile(e2e_us, o->iters, 0.50);
	m->e2e_p99_us = percentile(e2e_us, o->iters, 0.99);
	m->e2e_mean_us = e2e_sum / o->iters;
	m->launch_cpu_us = launch_sum / o->iters;
	m->outputs_finite = outputs_finite(it, it->compiled->prog.sizes[s].batch);
	return 0;
}

/* Pass 2, every size: the system calls of --syscall-batches batches, with the filter on this thread. */
static int count_syscalls(struct item *it, struct gpu_instance *inst, struct size_ctx *scs)
{
	const struct opts *o = it->o;
	char err[256];
	int rc;

	for (uint32_t s = 0; s < it->o->nb_sizes; s++)
		it->m[s].syscalls_per_batch = NAN;
	if (o->syscall_batches == 0) {
		snprintf(it->syscount_note, sizeof(it->syscount_note), "--syscall-batches 0");
		return 0;
	}
	rc = syscount_install(err, sizeof(err));
	if (rc != 0) {
		snprintf(it->syscount_note, sizeof(it->syscount_note), "%s", err);
		return 0; /* no count, nothing wrong with the GPU */
	}
	for (uint32_t s = 0; s < o->nb_sizes; s++) {
		struct syscount a, b, d;

		syscount_read(&a);
		for (unsigned int i = 0; i < o->syscall_batches; i++) {
			rc = one_batch(it, inst, s, &scs[s], NULL, NULL);
			if (rc != 0)
				return rc;
		}
		syscount_read(&b);
		syscount_delta(&b, &a, &d);
		it->m[s].syscalls_per_batch = (double)d.total / o->syscall_batches;
		syscount_top(&d, TOP_SYSCALLS, it->m[s].syscalls_top, sizeof(it->m[s].syscalls_top));
	}
	return 0;
}

/* Fixed per size: the gather segments from the input buffer, the scatter segments into the output one. */
static int size_segments(struct item *it, uint32_t s, struct size_ctx *sc)
{
	const struct gpu_program *prog = &it->compiled->prog;
	uint32_t batch = prog->sizes[s].batch, n = 0;

	for (uint32_t t = 0; t < prog->nb_inputs; t++) {
		struct gpu_segment *g = &sc->segs[n++];

		g->len = batch * prog->input_row_bytes[t];
		g->offset = 0;
		g->tensor = t;
		if (it->hd->ops->host_to_dev(it->hd->dev, it->in + it->in_off[t], g->len, &g->addr) != 0)
			goto unregistered;
	}
	for (uint32_t t = 0; t < prog->nb_outputs; t++) {
		struct gpu_segment *g = &sc->segs[n++];

		g->len = batch * prog->output_row_bytes[t];
		g->offset = 0;
		g->tensor = t;
		if (it->hd->ops->host_to_dev(it->hd->dev, it->out + it->out_off[t], g->len, &g->addr) != 0)
			goto unregistered;
	}
	sc->nb_segments = n;
	return 0;
unregistered:
	snprintf(it->err, sizeof(it->err), "batch %u: a segment is outside the registered buffers", batch);
	return -EFAULT;
}

static void *item_main(void *arg)
{
	struct item *it = arg;
	const struct gpu_ops *ops = it->hd->ops;
	const struct opts *o = it->o;
	struct size_ctx scs[SIZES_MAX];
	struct gpu_stream *stream = NULL;
	struct gpu_instance *inst = NULL;
	double *e2e_us = calloc(o->iters, sizeof(double));
	int rc;

	if (e2e_us == NULL) {
		snprintf(it->err, sizeof(it->err), "out of memory");
		return NULL;
	}
	/* the stream and the instance on this thread: CUDA's current device and the graphs' capture are per thread */
	rc = ops->stream_create(it->hd->dev, &stream, it->err, sizeof(it->err));
	if (rc == 0) {
		rc = ops->instance_create(it->loaded, stream, 1, it->mode, &inst, it->err, sizeof(it->err));
		it->refused = rc == -ENOTSUP;
	}
	for (uint32_t s = 0; rc == 0 && s < o->nb_sizes; s++) {
		scs[s] = (struct size_ctx){ .table = ops->instance_table(inst, s, 0), .word = ops->instance_word(inst, s, 0) };
		if (scs[s].table == NULL || scs[s].word == NULL) {
			snprintf(it->err, sizeof(it->err), "no batch table or word for size index %u", s);
			rc = -EINVAL;
			break;
		}
		scs[s].generation = *scs[s].word; /* the next generation differs from what the word holds */
		rc = size_segments(it, s, &scs[s]);
	}
	for (uint32_t s = 0; rc == 0 && s < o->nb_sizes; s++) {
		rc = time_size(it, inst, s, &scs[s], e2e_us);
		if (rc == 0)
			it->measured[s] = true;
		else if (it->err[0] == '\0')
			snprintf(it->err, sizeof(it->err), "batch %u: %s", it->compiled->prog.sizes[s].batch,
				 it->graph_note[0] ? it->graph_note : strerror(-rc));
	}
	if (rc == 0)
		rc = count_syscalls(it, inst, scs);
	if (inst != NULL)
		ops->instance_destroy(inst);
	if (stream != NULL)
		ops->stream_destroy(stream);
	free(e2e_us);
	return NULL;
}

/* ---- main -------------------------------------------------------------------------------------------------- */

static const char *base_name(const char *path)
{
	const char *slash = strrchr(path, '/');

	return slash != NULL ? slash + 1 : path;
}

/* "%.6g" or "na": scripts read both. */
static const char *num(double v, char *buf, size_t cap)
{
	if (isnan(v))
		snprintf(buf, cap, "na");
	else
		snprintf(buf, cap, "%.6g", v);
	return buf;
}

static void report_item(const struct item *it, const char *model)
{
	const struct gpu_program *prog = &it->compiled->prog;

	for (uint32_t s = 0; s < it->o->nb_sizes; s++) {
		const struct measure *m = &it->m[s];
		char a[32], b[32], c[32], d[32], e[32], f[32], g[32];

		if (!it->measured[s])
			continue;
		emit("model=%s precision=%s layout=%s mode=%s batch=%u graph_ms=%s e2e_p50_us=%s e2e_p99_us=%s "
		     "e2e_mean_us=%s launch_cpu_us=%s syscalls_per_batch=%s syscalls_top=%s e2e_vs_graph=%s "
		     "outputs_finite=%s\n",
		     model, gpu_precision_name(it->precision), gpu_layout_name(it->compiled->layout),
		     gpu_launch_mode_name(it->mode), prog->sizes[s].batch,
		     num(m->graph_ms, a, sizeof(a)), num(m->e2e_p50_us, b, sizeof(b)), num(m->e2e_p99_us, c, sizeof(c)),
		     num(m->e2e_mean_us, d, sizeof(d)), num(m->launch_cpu_us, e, sizeof(e)),
		     num(m->syscalls_per_batch, f, sizeof(f)), isnan(m->syscalls_per_batch) ? "na" : m->syscalls_top,
		     num(m->e2e_p50_us / (m->graph_ms * 1e3), g, sizeof(g)), m->outputs_finite ? "yes" : "no");
	}
	if (it->graph_note[0] != '\0' && it->err[0] == '\0')
		emit("# %s %s: graph_ms na: %s\n", gpu_precision_name(it->precision), gpu_launch_mode_name(it->mode),
		     it->graph_note);
	if (it->syscount_note[0] != '\0')
		emit("# %s %s: syscalls not counted: %s\n", gpu_precision_name(it->precision),
		     gpu_launch_mode_name(it->mode), it->syscount_note);
}

int main(int argc, char **argv)
{
	static struct opts o;
	struct gpu_host_device hd;
	struct rt_opt_report rep;
	struct rt_graph *g;
	char err[GPU_ERR_MAX * 2];
	unsigned int items = 0, measured = 0, refused = 0, failed = 0;
	const char *model;
	int rc;

	parse_args(argc, argv, &o);
	if (o.output != NULL) {
		g_out = fopen(o.output, "w");
		if (g_out == NULL)
			die(1, "--output %s: %s", o.output, strerror(errno));
	}
	model = base_name(o.model);
	{
		/* "mlp.onnx" -> "mlp": the name the check script keys on */
		static char stem[256];
		char *dot;

		snprintf(stem, sizeof(stem), "%s", model);
		dot = strrchr(stem, '.');
		if (dot != NULL && dot != stem)
			*dot = '\0';
		model = stem;
	}
	rc = gpu_kernels_register();
	if (rc != 0)
		die(1, "registering the GPU kernels: %s", strerror(-rc));
	g = rt_graph_load(o.model, err, sizeof(err));
	if (g == NULL)
		die(1, "%s: %s", o.model, err);
	/* as bwrun --device gpu: the graph optimised for the GPU (BatchNormalization folded into FusedConv) */
	rc = rt_graph_optimize(g, RT_DEVICE_GPU, &rep, err, sizeof(err));
	if (rc != 0)
		die(1, "%s: optimising for the GPU: %s", o.model, err);
	rc = gpu_host_device_open(o.gpu_module, o.gpu_index, &hd, err, sizeof(err));
	if (rc != 0)
		die(rc == -ENODEV ? EXIT_SKIP : 1, "--gpu-module %s: %s", o.gpu_module != NULL ? o.gpu_module : "(default)",
		    err);
	emit("# device %s (%s module), model %s, %u nodes after optimising, iters %u, warmup %u, graph_iters %u, "
	     "syscall_batches %u\n",
	     hd.info.name, hd.ops->name, o.model, rep.nodes_after, o.iters, o.warmup, o.graph_iters, o.syscall_batches);

	for (uint32_t p = 0; p < GPU_PRECISION_COUNT; p++) {
		struct gpu_host_program prog;
		struct gpu_compiled *compiled;
		uint8_t *in = NULL, *out = NULL;
		size_t in_bytes = 0, out_bytes = 0;
		uint64_t in_off[GPU_PROG_TENSORS_MAX], out_off[GPU_PROG_TENSORS_MAX];
		uint32_t max_batch = (uint32_t)o.sizes[o.nb_sizes - 1];
		void *dev_addr;
		bool in_reg = false, out_reg = false;
		unsigned int modes = 0;

		if (!o.precision[p])
			continue;
		for (uint32_t m = 0; m < GPU_LAUNCH_MODE_COUNT; m++)
			modes += o.mode[m];
		items += modes;
		rc = gpu_host_program_load(&hd, g, o.sizes, o.nb_sizes, &(struct gpu_compile_options){ p, o.layout },
					   &prog, err, sizeof(err));
		if (rc != 0) {
			emit("# %s: %s\n", gpu_precision_name(p), err);
			fprintf(stderr, PROG ": %s: %s: %s\n", gpu_precision_name(p), o.model, err);
			if (rc == -ENOTSUP)
				refused += modes;
			else
				failed += modes;
			continue;
		}
		compiled = prog.compiled;
		/* one buffer for the inputs, one for the outputs, at the largest size; tensors 64-byte aligned */
		for (uint32_t t = 0; t < compiled->prog.nb_inputs; t++) {
			in_off[t] = in_bytes;
			in_bytes += ((size_t)max_batch * compiled->prog.input_row_bytes[t] + TENSOR_ALIGN - 1) &
				    ~(size_t)(TENSOR_ALIGN - 1);
		}
		for (uint32_t t = 0; t < compiled->prog.nb_outputs; t++) {
			out_off[t] = out_bytes;
			out_bytes += ((size_t)max_batch * compiled->prog.output_row_bytes[t] + TENSOR_ALIGN - 1) &
				     ~(size_t)(TENSOR_ALIGN - 1);
		}
		in_bytes = (in_bytes + PAGE_BYTES) & ~(size_t)(PAGE_BYTES - 1); /* never 0 */
		out_bytes = (out_bytes + PAGE_BYTES) & ~(size_t)(PAGE_BYTES - 1);
		in = aligned_alloc(PAGE_BYTES, in_bytes);
		out = aligned_alloc(PAGE_BYTES, out_bytes);
		if (in == NULL || out == NULL)
			die(1, "out of memory for %zu + %zu bytes of inputs and outputs", in_bytes, out_bytes);
		memset(in, 0, in_bytes);
		memset(out, 0, out_bytes);
		for (uint32_t t = 0; t < compiled->prog.nb_inputs; t++) {
			const struct rt_value *v = &g->values[g->inputs[t]];

			bw_input_generate(&v->tensor, (size_t)max_batch * compiled->prog.input_row_bytes[t], t, o.seed,
					  v->name, in + in_off[t]);
		}
		rc = hd.ops->host_register(hd.dev, in, in_bytes, &dev_addr, err, sizeof(err));
		in_reg = rc == 0;
		if (rc == 0) {
			rc = hd.ops->host_register(hd.dev, out, out_bytes, &dev_addr, err, sizeof(err));
			out_reg = rc == 0;
		}
		if (rc != 0) {
			emit("# %s: registering host memory: %s\n", gpu_precision_name(p), err);
			fprintf(stderr, PROG ": %s: registering host memory: %s\n", gpu_precision_name(p), err);
			failed += modes;
		}
		for (uint32_t m = 0; rc == 0 && m < GPU_LAUNCH_MODE_COUNT; m++) {
			static struct item it; /* large: off the stack; one at a time */
			pthread_t th;

			if (!o.mode[m])
				continue;
			memset(&it, 0, sizeof(it));
			it = (struct item){ .o = &o, .hd = &hd, .compiled = compiled, .loaded = prog.loaded, .precision = p,
					    .mode = m, .in = in, .out = out };
			memcpy(it.in_off, in_off, sizeof(in_off));
			memcpy(it.out_off, out_off, sizeof(out_off));
			for (uint32_t t = 0; t < compiled->prog.nb_outputs; t++)
				it.out_dtype[t] = g->values[g->outputs[t]].tensor.dtype;
			if (pthread_create(&th, NULL, item_main, &it) != 0)
				die(1, "cannot start a measuring thread");
			pthread_join(th, NULL);
			report_item(&it, model);
			if (it.err[0] != '\0') {
				emit("# %s %s: %s: %s\n", gpu_precision_name(p), gpu_launch_mode_name(m),
				     it.refused ? "refused" : "failed", it.err);
				fprintf(stderr, PROG ": %s %s on %s: %s\n", gpu_precision_name(p), gpu_launch_mode_name(m),
					hd.info.name, it.err);
				if (it.refused)
					refused++;
				else
					failed++;
			} else {
				measured++;
			}
		}
		if (out_reg)
			hd.ops->host_unregister(hd.dev, out, NULL, 0);
		if (in_reg)
			hd.ops->host_unregister(hd.dev, in, NULL, 0);
		free(in);
		free(out);
		gpu_host_program_unload(&hd, &prog);
	}
	emit("summary model=%s items=%u measured=%u refused=%u failed=%u module=%s\n", model, items, measured, refused,
	     failed, hd.ops->name);
	gpu_host_device_close(&hd);
	rt_graph_free(g);
	if (g_out != NULL)
		fclose(g_out);
	return measured == items ? 0 : 1;
}
