/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The ONNX conformance runner: runs backend tests laid out as Debian's libonnx-testdata lays them out
 * (DIR/test_x/model.onnx, DIR/test_x/test_data_set_N/{input,output}_M.pb) through the runtime: load
 * (rt_graph_load), plan (rt_plan_create_known: node tests feed shapes, axes and the like as graph
 * inputs, so their values are given to shape inference), bind the inputs, run (rt_plan_run), compare
 * every output with the expected one. One line per test, then a summary:
 *
 *   pass test_add
 *   FAIL test_x: <why>
 *   unsupported test_y: <the loader's or the planner's error>
 *   N passed, N failed, N unsupported
 *
 * The claims table (claims.txt) lists the ops the runtime claims: a test is claimed when every op of
 * its model is. The exit status is 1 when a claimed test failed or was unsupported, else 0; 77 (skip)
 * when the directory is missing. Each test runs in a child process, so a crashing kernel is one FAIL
 * line and not the end of the run (--no-fork runs them in-process, for a debugger).
 *
 * Usage: conformance [--claims FILE] [--no-fork] [--ops] [--executor N] [--optimize] [--skip REASON]
 *                    [DIR [PATTERN...]]
 *   PATTERN: fnmatch patterns of test names to run (default: all)
 *   --ops: print each test's ops instead of running it (to maintain the claims table)
 *   --executor N: run each data set through rt_executor (concurrent layout, one batch of one row
 *                 whose only task carries the whole tensors) with N worker threads, not rt_plan_run
 *   --optimize: rt_graph_optimize each model after loading it, so the node tests check the kernels
 *               the optimizer rewrites into (batchwire's fused and fast-path ones) too
 */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <batchwire/err.h>
#include <batchwire/half.h>

#include "graph.h"
#include "exec/executor.h"
#include "exec/plan.h"
#include "testdata.h"

#ifndef CONFORMANCE_CLAIMS
#define CONFORMANCE_CLAIMS "claims.txt"
#endif
#define CONFORMANCE_DIR_DEFAULT "/usr/share/libonnx-testdata/data/node"
#define CONFORMANCE_RTOL 1e-3 /* the ONNX backend tests' tolerances */
#define CONFORMANCE_ATOL 1e-7
#define CONFORMANCE_TEST_TIMEOUT_S 60
#define CONFORMANCE_MSG_MAX 512
#define CONFORMANCE_TENSORS_MAX TESTDATA_TENSORS_MAX
#define CONFORMANCE_EXIT_SKIP 77

static unsigned int g_executor_workers; /* --executor N; 0: rt_plan_run */
static bool g_optimize;                 /* --optimize */

enum verdict {
	VERDICT_PASS = 'P',
	VERDICT_FAIL = 'F',
	VERDICT_UNSUPPORTED = 'U',
};

struct result {
	enum verdict verdict;
	char msg[CONFORMANCE_MSG_MAX];
};

static enum verdict set_result(struct result *r, enum verdict v, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static enum verdict set_result(struct result *r, enum verdict v, const char *fmt, ...)
{
	va_list ap;

	r->verdict = v;
	va_start(ap, fmt);
	bw_verr(r->msg, sizeof(r->msg), 0, fmt, ap);
	va_end(ap);
	return v;
}

/* ---- comparison -------------------------------------------------------------------------------------- */

/* Element i as a double, for messages and the float comparison. */
static double elem_double(const struct rt_tensor *t, size_t i)
{
	switch (t->dtype) {
	case BW_DTYPE_FLOAT: return ((const float *)t->data)[i];
	case BW_DTYPE_DOUBLE: return ((const double *)t->data)[i];
	case BW_DTYPE_FLOAT16: return bw_half_to_float(((const uint16_t *)t->data)[i]);
	case BW_DTYPE_BFLOAT16: return bw_bf16_to_float(((const uint16_t *)t->data)[i]);
	case BW_DTYPE_INT8: return ((const int8_t *)t->data)[i];
	case BW_DTYPE_UINT8: case BW_DTYPE_BOOL: return ((const uint8_t *)t->data)[i];
	case BW_DTYPE_INT16: return ((const int16_t *)t->data)[i];
	case BW_DTYPE_UINT16: return ((const uint16_t *)t->data)[i];
	case BW_DTYPE_INT32: return ((const int32_t *)t->data)[i];
	case BW_DTYPE_UINT32: return ((const uint32_t *)t->data)[i];
	case BW_DTYPE_INT64: return (double)((const int64_t *)t->data)[i];
	case BW_DTYPE_UINT64: return (double)((const uint64_t *)t->data)[i];
	default: return 0;
	}
}

static bool is_float_type(uint8_t dtype)
{
	return dtype == BW_DTYPE_FLOAT || dtype == BW_DTYPE_DOUBLE || dtype == BW_DTYPE_FLOAT16 ||
	       dtype == BW_DTYPE_BFLOAT16;
}

static const char *dims_str(const struct rt_tensor *t, char *buf, size_t cap)
{
	size_t off = (size_t)snprintf(buf, cap, "[");

	for (uint8_t d = 0; d < t->rank && off < cap; d++)
		off += (size_t)snprintf(buf + off, cap - off, "%s%lld", d ? "," : "", (long long)t->dims[d]);
	if (off < cap)
		snprintf(buf + off, cap - off, "]");
	return buf;
}

/*
 * |got - want| <= atol + rtol * |want| for floating types (NaN equals NaN, infinities equal
 * themselves); integers and bool exact.
 * \return true when equal, or false with why naming the first element that differs.
 */
static bool tensor_matches(const struct rt_tensor *got, const struct rt_tensor *want, char *why, size_t cap)
{
	char a[96], b[96];
	size_t n = 1, esize = rt_dtype_size(want->dtype), bad = 0, first = SIZE_MAX;

	if (got->dtype != want->dtype) {
		snprintf(why, cap, "element type %s, expected %s", rt_dtype_name(got->dtype), rt_dtype_name(want->dtype));
		return false;
	}
	if (got->rank != want->rank || memcmp(got->dims, want->dims, want->rank * sizeof(int64_t)) != 0) {
		snprintf(why, cap, "shape %s, expected %s", dims_str(got, a, sizeof(a)), dims_str(want, b, sizeof(b)));
		return false;
	}
	for (uint8_t d = 0; d < want->rank; d++)
		n *= (size_t)want->dims[d];
	for (size_t i = 0; i < n; i++) {
		bool ok;

		if (is_float_type(want->dtype)) {
			double x = elem_double(got, i), y = elem_double(want, i);

			ok = (isnan(x) && isnan(y)) || x == y ||
			     fabs(x - y) <= CONFORMANCE_ATOL + CONFORMANCE_RTOL * fabs(y);
		} else {
			ok = memcmp((const uint8_t *)got->data + i * esize, (const uint8_t *)want->data + i * esize,
				    esize) == 0;
		}
		if (!ok) {
			if (first == SIZE_MAX)
				first = i;
			bad++;
		}
	}
	if (bad == 0)
		return true;
	snprintf(why, cap, "shape %s: %zu of %zu elements differ, first at %zu: got %.9g, expected %.9g",
		 dims_str(want, a, sizeof(a)), bad, n, first, elem_double(got, first), elem_double(want, first));
	return false;
}

/* ---- through the executor ----------------------------------------------------------------------------- */

struct executor_worker {
	pthread_t thread;
	struct rt_executor *ex;
	unsigned int index;
	_Atomic bool *stop;
};

static void *executor_worker_main(void *arg)
{
	struct executor_worker *w = arg;

	while (!atomic_load_explicit(w->stop, memory_order_relaxed)) {
		if (rt_executor_work(w->ex, w->index) == 0)
			sched_yield();
	}
	return NULL;
}

struct executor_result {
	bool done;
	enum bw_status status;
	char msg[RT_EXECUTOR_MSG_MAX];
};

static void executor_done(void *ctx, struct bw_batch *b, enum bw_status status, const char *msg)
{
	struct executor_result *res = ctx;

	(void)b;
	res->done = true;
	res->status = status;
	snprintf(res->msg, sizeof(res->msg), "%s", msg);
}

/*
 * Runs a data set as one batch of one row through an executor with g_executor_workers worker
 * threads; out[i] gets each output's shape and, in out_mem[i], its data.
 * \return 0; 1 with why when the executor cannot be made (unsupported); -1 with why when the run fails.
 */
static int run_executor(const struct rt_graph *g, const struct testdata_tensors *in, struct rt_tensor *out,
			void **out_mem, char *why, size_t cap)
{
	static const int64_t one_row = 1;
	struct executor_worker workers[RT_EXECUTOR_WORKERS_MAX];
	struct executor_result res = { 0 };
	struct bw_batch_task task = { .rows = 1 };
	struct bw_batch_task *tasks[1] = { &task };
	struct bw_batch batch = { .size = 1, .padded_size = 1, .num_tasks = 1, .num_inputs = (uint16_t)g->num_inputs,
				  .num_outputs = (uint16_t)g->num_outputs, .tasks = tasks };
	const struct rt_plan *plan;
	struct rt_executor *ex;
	_Atomic bool stop = false;
	unsigned int started = 0;
	int rc = 0;

	ex = rt_executor_create_known(g, in->t, &one_row, 1, g_executor_workers, 1, why, cap);
	if (ex == NULL)
		return 1;
	plan = rt_executor_plan(ex, one_row);
	for (uint32_t i = 0; i < g->num_inputs; i++)
		task.inputs[i] = bw_segment_flat(in->t[i].data, (uint32_t)in->nbytes[i]);
	for (uint32_t o = 0; o < g->num_outputs; o++) {
		struct rt_plan_value_info vi;

		rt_plan_value_info(plan, g->outputs[o], &vi);
		out_mem[o] = malloc(vi.nbytes > 0 ? vi.nbytes : 1);
		if (out_mem[o] == NULL) {
			snprintf(why, cap, "out of memory");
			rc = -1;
			goto out;
		}
		out[o] = vi.tensor;
		out[o].data = out_mem[o];
		task.outputs[o] = bw_segment_flat(out_mem[o], (uint32_t)vi.nbytes);
	}
	for (; started < g_executor_workers; started++) {
		workers[started] = (struct executor_worker){ .ex = ex, .index = started, .stop = &stop };
		if (pthread_create(&workers[started].thread, NULL, executor_worker_main, &workers[started]) != 0) {
			snprintf(why, cap, "cannot start worker %u", started);
			rc = -1;
			goto out;
		}
	}
	rc = rt_executor_submit(ex, &batch);
	if (rc != 0) {
		snprintf(why, cap, "rt_executor_submit: %s", strerror(-rc));
		rc = -1;
		goto out;
	}
	/* the test's alarm ends a run that never completes */
	while (rt_executor_poll(ex, executor_done, &res, 1) == 0)
		sched_yield();
	if (res.status != BW_STATUS_OK) {
		snprintf(why, cap, "%s: %.400s", bw_status_name(res.status), res.msg);
		rc = -1;
	}
out:
	atomic_store(&stop, true);
	for (unsigned int w = 0; w < started; w++)
		pthread_join(workers[w].thread, NULL);
	rt_executor_destroy(ex);
	return rc;
}

/* Runs one data set of a loaded model. */
static enum verdict run_data_set(const struct rt_graph *g, const char *set_dir, const char *set_name,
				 struct result *r)
{
	struct testdata_tensors in = { 0 }, want = { 0 };
	struct rt_tensor bound_in[CONFORMANCE_TENSORS_MAX], bound_out[CONFORMANCE_TENSORS_MAX];
	char why[RT_ERR_MAX * 2];
	struct rt_plan *plan = NULL;
	void *arena = NULL, *out_mem[CONFORMANCE_TENSORS_MAX] = { NULL };
	int rc;

	if (testdata_tensors_read(set_dir, "input", &in, why, sizeof(why)) != 0 ||
	    testdata_tensors_read(set_dir, "output", &want, why, sizeof(why)) != 0) {
		set_result(r, VERDICT_UNSUPPORTED, "%s: %s", set_name, why);
		goto out;
	}
	if (in.count != g->num_inputs) {
		set_result(r, VERDICT_UNSUPPORTED, "%s has %u inputs, the graph %u", set_name, in.count, g->num_inputs);
		goto out;
	}
	if (want.count != g->num_outputs) {
		set_result(r, VERDICT_FAIL, "%s has %u outputs, the graph %u", set_name, want.count, g->num_outputs);
		goto out;
	}
	testdata_bfloat16_inputs(&in, g);
	if (g_executor_workers > 0) {
		rc = run_executor(g, &in, bound_out, out_mem, why, sizeof(why));
		if (rc != 0) {
			set_result(r, rc > 0 ? VERDICT_UNSUPPORTED : VERDICT_FAIL, "%s%s%s", rc > 0 ? "" : set_name,
				   rc > 0 ? "" : ": ", why);
			goto out;
		}
		goto compare;
	}
	plan = rt_plan_create_known(g, 0, RT_DEVICE_CPU, in.t, why, sizeof(why));
	if (plan == NULL) {
		set_result(r, VERDICT_UNSUPPORTED, "%s", why);
		goto out;
	}
	arena = aligned_alloc(RT_PLAN_ALIGN, rt_plan_arena_bytes(plan));
	if (arena == NULL) {
		set_result(r, VERDICT_FAIL, "no memory for an arena of %zu bytes", rt_plan_arena_bytes(plan));
		goto out;
	}
	memset(arena, 0xa5, rt_plan_arena_bytes(plan)); /* garbage, as a reused arena holds */
	rt_plan_bind(plan, arena, bound_in, bound_out);
	for (unsigned int i = 0; i < in.count; i++) {
		if (in.nbytes[i] > 0)
			memcpy(bound_in[i].data, in.t[i].data, in.nbytes[i]);
	}
	rc = rt_plan_run(plan, arena, why, sizeof(why));
	if (rc != 0) {
		set_result(r, VERDICT_FAIL, "%s: %s", set_name, why);
		goto out;
	}
compare:
	for (unsigned int i = 0; i < want.count; i++) {
		testdata_bfloat16(&want.t[i], bound_out[i].dtype);
		if (!tensor_matches(&bound_out[i], &want.t[i], why, sizeof(why))) {
			set_result(r, VERDICT_FAIL, "%s: output %u (%s): %s", set_name, i, g->values[g->outputs[i]].name,
				   why);
			goto out;
		}
	}
	set_result(r, VERDICT_PASS, "%s", "");
out:
	for (unsigned int i = 0; i < CONFORMANCE_TENSORS_MAX; i++)
		free(out_mem[i]);
	free(arena);
	rt_plan_free(plan);
	testdata_tensors_free(&in);
	testdata_tensors_free(&want);
	return r->verdict;
}

static void run_test(const char *test_dir, struct result *r)
{
	char path[4096], err[RT_ERR_MAX];
	struct rt_graph *g;
	size_t num_sets = 0;
	char **sets;

	if (rt_cpu_kernels_register() != 0) {
		set_result(r, VERDICT_FAIL, "rt_cpu_kernels_register failed");
		return;
	}
	snprintf(path, sizeof(path), "%s/model.onnx", test_dir);
	g = rt_graph_load(path, err, sizeof(err));
	if (g == NULL) {
		set_result(r, VERDICT_UNSUPPORTED, "%s", err);
		return;
	}
	if (g_optimize && rt_graph_optimize(g, RT_DEVICE_CPU, NULL, err, sizeof(err)) != 0) {
		set_result(r, VERDICT_FAIL, "rt_graph_optimize: %s", err);
		rt_graph_free(g);
		return;
	}
	testdata_list_dir(test_dir, "test_data_set_", &sets, &num_sets);
	if (num_sets == 0)
		set_result(r, VERDICT_UNSUPPORTED, "no test_data_set_* directory");
	for (size_t i = 0; i < num_sets; i++) {
		snprintf(path, sizeof(path), "%s/%s", test_dir, sets[i]);
		if (run_data_set(g, path, sets[i], r) != VERDICT_PASS)
			break;
	}
	testdata_free_list(sets, num_sets);
	rt_graph_free(g);
}

/* Runs a test in a child, so that a crash or a hang is that test's FAIL and nothing more. */
static void run_test_isolated(const char *test_dir, struct result *r)
{
	int fds[2], status = 0;
	size_t got = 0;
	pid_t pid;

	fflush(stdout);
	if (pipe(fds) != 0 || (pid = fork()) < 0) {
		set_result(r, VERDICT_FAIL, "cannot fork: %s", strerror(errno));
		return;
	}
	if (pid == 0) {
		struct result mine = { .verdict = VERDICT_FAIL, .msg = "no verdict" };

		close(fds[0]);
		alarm(CONFORMANCE_TEST_TIMEOUT_S);
		run_test(test_dir, &mine);
		if (write(fds[1], &mine, sizeof(mine)) != (ssize_t)sizeof(mine))
			_exit(2);
		_exit(0);
	}
	close(fds[1]);
	while (got < sizeof(*r)) {
		ssize_t n = read(fds[0], (char *)r + got, sizeof(*r) - got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	close(fds[0]);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (got == sizeof(*r))
		return;
	if (WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM)
		set_result(r, VERDICT_FAIL, "timed out after %d s", CONFORMANCE_TEST_TIMEOUT_S);
	else if (WIFSIGNALED(status))
		set_result(r, VERDICT_FAIL, "crashed: %s", strsignal(WTERMSIG(status)));
	else
		set_result(r, VERDICT_FAIL, "exited with status %d and no verdict", WEXITSTATUS(status));
}

/* ---- main --------------------------------------------------------------------------------------------- */

static void usage(const char *prog)
{
	fprintf(stderr, "usage: %s [--claims FILE] [--no-fork] [--ops] [--executor N] [--optimize] [--skip REASON] "
		"[DIR [PATTERN...]]\n",
		prog);
}

int main(int argc, char **argv)
{
	const char *dir = CONFORMANCE_DIR_DEFAULT, *claims_path = CONFORMANCE_CLAIMS;
	unsigned int passed = 0, failed = 0, unsupported = 0, claimed = 0, claimed_bad = 0;
	bool isolate = true, list_ops = false;
	struct testdata_claims claims;
	struct stat st;
	char **tests;
	size_t num_tests = 0;
	int argi = 1, rc;

	setvbuf(stdout, NULL, _IOLBF, 0);
	for (; argi < argc && strncmp(argv[argi], "--", 2) == 0; argi++) {
		if (strcmp(argv[argi], "--claims") == 0 && argi + 1 < argc) {
			claims_path = argv[++argi];
		} else if (strcmp(argv[argi], "--ops") == 0) {
			list_ops = true;
		} else if (strcmp(argv[argi], "--no-fork") == 0) {
			isolate = false;
		} else if (strcmp(argv[argi], "--executor") == 0 && argi + 1 < argc) {
			char *end;
			unsigned long n = strtoul(argv[++argi], &end, 10);

			if (*end != '\0' || n == 0 || n > RT_EXECUTOR_WORKERS_MAX) {
				fprintf(stderr, "--executor: 1 to %d workers\n", RT_EXECUTOR_WORKERS_MAX);
				return 2;
			}
			g_executor_workers = (unsigned int)n;
		} else if (strcmp(argv[argi], "--optimize") == 0) {
			g_optimize = true;
		} else if (strcmp(argv[argi], "--skip") == 0 && argi + 1 < argc) {
			printf("SKIP: %s\n", argv[argi + 1]);
			return CONFORMANCE_EXIT_SKIP;
		} else {
			usage(argv[0]);
			return 2;
		}
	}
	if (argi < argc)
		dir = argv[argi++];
	{
		/* meson runs the suite again at lower instruction-set levels (BW_CPU_ISA): one this CPU
		 * lacks is a skip, a value that names none a failure */
		char why[256];

		rc = rt_cpu_isa_select(why, sizeof(why));
		if (rc == -ENOTSUP) {
			printf("SKIP: %s\n", why);
			return CONFORMANCE_EXIT_SKIP;
		}
		if (rc != 0) {
			fprintf(stderr, "CPU kernels: %s\n", why);
			return 2;
		}
		rt_cpu_isa_describe(why, sizeof(why));
		printf("CPU kernels: %s\n", why);
	}
	rc = testdata_claims_load(&claims, claims_path);
	if (rc != 0) {
		fprintf(stderr, "%s: cannot read the claims table: %s\n", claims_path, strerror(-rc));
		testdata_claims_free(&claims);
		return 2;
	}
	errno = 0;
	if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
		printf("SKIP: %s: %s\n", dir, errno != 0 ? strerror(errno) : "not a directory");
		testdata_claims_free(&claims);
		return CONFORMANCE_EXIT_SKIP;
	}
	testdata_list_dir(dir, NULL, &tests, &num_tests);

	for (size_t i = 0; i < num_tests; i++) {
		char test_dir[4096], model[4200];
		struct result r = { .verdict = VERDICT_FAIL, .msg = "not run" };
		const char *excluded;
		bool is_claimed;

		snprintf(test_dir, sizeof(test_dir), "%s/%s", dir, tests[i]);
		snprintf(model, sizeof(model), "%s/model.onnx", test_dir);
		if (!testdata_is_file(model) || !testdata_wanted(tests[i], argv + argi, argc - argi))
			continue;
		if (list_ops) {
			char **ops;
			int count = testdata_model_ops(model, &ops);

			printf("%s:", tests[i]);
			for (int j = 0; j < count; j++)
				printf(" %s", ops[j]);
			printf("\n");
			testdata_free_list(ops, count > 0 ? (size_t)count : 0);
			continue;
		}
		excluded = testdata_claims_excluded(&claims, tests[i]);
		is_claimed = excluded == NULL && testdata_model_claimed(&claims, model);
		if (isolate)
			run_test_isolated(test_dir, &r);
		else
			run_test(test_dir, &r);
		claimed += is_claimed;
		switch (r.verdict) {
		case VERDICT_PASS:
			passed++;
			printf("pass %s\n", tests[i]);
			break;
		case VERDICT_UNSUPPORTED:
			unsupported++;
			claimed_bad += is_claimed;
			printf("unsupported %s: %s%s%s%s%s\n", tests[i], r.msg, is_claimed ? " [claimed]" : "",
			       excluded != NULL ? " [not claimed: " : "", excluded != NULL ? excluded : "",
			       excluded != NULL ? "]" : "");
			break;
		default:
			failed++;
			claimed_bad += is_claimed;
			printf("FAIL %s: %s%s%s%s%s\n", tests[i], r.msg, is_claimed ? " [claimed]" : "",
			       excluded != NULL ? " [not claimed: " : "", excluded != NULL ? excluded : "",
			       excluded != NULL ? "]" : "");
			break;
		}
	}
	printf("claimed: %u tests of %zu claimed ops, %u of them failed or unsupported\n", claimed, claims.num_ops,
	       claimed_bad);
	printf("%u passed, %u failed, %u unsupported\n", passed, failed, unsupported);
	testdata_free_list(tests, num_tests);
	testdata_claims_free(&claims);
	return claimed_bad > 0 ? 1 : 0;
}
