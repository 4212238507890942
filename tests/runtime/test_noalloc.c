/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The hot path's check on real models: while rt_plan_run runs a model, no heap allocation and no
 * thread creation happens anywhere in the process, OpenBLAS included.
 *
 * The models are the ONNX node tests of Debian's libonnx-testdata whose ops are all claimed in
 * tests/conformance/claims.txt (less its "!test" exclusions): the set the conformance runner holds
 * the runtime to, about 680 models with Conv, ConvTranspose, Gemm, MatMul, the pools, the
 * normalizations, Softmax, the reductions and Resize among them. Each is loaded, planned
 * (rt_plan_create_known, as the runner does: node tests feed shapes and axes as graph inputs), given
 * its arena and test_data_set_0's inputs, run once to warm up (a library may set itself up on its
 * first call), and then run again while counting. The node tests' GEMMs are tiny, so two models built
 * here with ResNet and BERT-base layer shapes (a symbolic batch planned at 1 and 4) take OpenBLAS
 * through its blocked paths too. What is counted:
 *
 *  - heap calls: malloc, calloc, realloc, free, posix_memalign, aligned_alloc, memalign, valloc and
 *    pvalloc are defined in alloc_count.c, linked into this executable. A definition in the
 *    executable takes the place of libc's for the whole process (libc's own internal calls and
 *    OpenBLAS's too); each forwards to glibc's __libc_* allocator and counts while counting is on.
 *    Under AddressSanitizer, which owns malloc, the sanitizer's malloc/free hooks count instead.
 *  - threads: pthread_create is defined here too and forwards to libc's (dlsym RTLD_NEXT), counting
 *    every creation, even of a thread that is gone by the end; and the entries of /proc/self/task
 *    are compared before and after, which sees threads made any other way (clone). Under
 *    AddressSanitizer, whose interceptor must own pthread_create, only /proc/self/task counts.
 *
 * Both must be 0 for every model; one line per model says what was counted. A self-check first shows
 * the counters see a malloc inside libc and a new thread, and that OpenBLAS was told one thread (a
 * pool started before main is no new thread, but would share the GEMMs). Exits 77 (skip) when the
 * node-test directory is missing.
 *
 * Usage: test_noalloc [DIR [PATTERN...]]   (fnmatch patterns of test names; default: the node set)
 */
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cblas.h>

#include "../bw_cunit.h"

#include "alloc_count.h"
#include "graph.h"
#include "isa_level.h"
#include "exec/plan.h"
#include "onnx.pb-c.h"
#include "../conformance/testdata.h"

#ifndef NOALLOC_CLAIMS
#define NOALLOC_CLAIMS "claims.txt"
#endif
#define NOALLOC_DIR_DEFAULT "/usr/share/libonnx-testdata/data/node"
#define NOALLOC_DATA_SET "test_data_set_0"
#define NOALLOC_TENSORS_MAX TESTDATA_TENSORS_MAX
#define NOALLOC_MODELS_MIN 30 /* fewer claimed models than this means the set was not found */

#define NOALLOC_ASAN ALLOC_COUNT_ASAN

/* ---- counting (heap calls: alloc_count.c) ------------------------------------------------------------ */

static atomic_ulong g_threads; /* pthread_create calls */

static void counting_start(void)
{
	atomic_store(&g_threads, 0);
	alloc_count_start();
}

static void counting_stop(void)
{
	alloc_count_stop();
}

#if !NOALLOC_ASAN
typedef int (*pthread_create_fn)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);
static _Atomic(pthread_create_fn) g_real_pthread_create;

int pthread_create(pthread_t *thread, const pthread_attr_t *attr, void *(*start)(void *), void *arg)
{
	pthread_create_fn real = atomic_load(&g_real_pthread_create);

	if (real == NULL) {
		real = (pthread_create_fn)dlsym(RTLD_NEXT, "pthread_create");
		if (real == NULL)
			return EAGAIN;
		atomic_store(&g_real_pthread_create, real);
	}
	if (alloc_count_on())
		atomic_fetch_add_explicit(&g_threads, 1, memory_order_relaxed);
	return real(thread, attr, start, arg);
}
#endif

/* Entries of /proc/self/task: the process's threads. Allocates (opendir): call it outside a count. */
static int task_count(void)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	int n = 0;

	if (d == NULL)
		return -1;
	while ((e = readdir(d)) != NULL)
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

/* ---- one model ------------------------------------------------------------------------------------- */

/* The node tests and the patterns of the names to check (tests/conformance/testdata.c reads the
 * claims table and the test data, as it does for the conformance runner). */
static char *g_dir = NOALLOC_DIR_DEFAULT;
static char **g_patterns;
static int g_num_patterns;

struct model_counts {
	unsigned long allocs, frees, threads;
	int tasks_before, tasks_after;
	uint32_t steps;
	size_t arena_bytes;
};

static void copy_inputs(const struct testdata_tensors *in, const struct rt_tensor *bound)
{
	for (unsigned int i = 0; i < in->count; i++) {
		if (in->nbytes[i] > 0)
			memcpy(bound[i].data, in->t[i].data, in->nbytes[i]);
	}
}

/*
 * Loads, plans and runs one model twice, counting during the second run.
 * \return 0, or -1 with why saying which step failed (the counts then mean nothing).
 */
static int model_check(const char *test_dir, struct model_counts *c, char *why, size_t cap)
{
	struct rt_tensor bound_in[NOALLOC_TENSORS_MAX];
	char path[4200], err[RT_ERR_MAX * 2];
	struct testdata_tensors in = { .count = 0 };
	struct rt_plan *plan = NULL;
	struct rt_graph *g;
	void *arena = NULL;
	int rc = -1;

	memset(c, 0, sizeof(*c));
	snprintf(path, sizeof(path), "%s/model.onnx", test_dir);
	g = rt_graph_load(path, err, sizeof(err));
	if (g == NULL) {
		snprintf(why, cap, "load: %s", err);
		return -1;
	}
	snprintf(path, sizeof(path), "%s/%s", test_dir, NOALLOC_DATA_SET);
	if (testdata_tensors_read(path, "input", &in, err, sizeof(err)) != 0) {
		snprintf(why, cap, "%s", err);
		goto out;
	}
	if (in.count != g->num_inputs) {
		snprintf(why, cap, "%s has %u inputs, the graph %u", NOALLOC_DATA_SET, in.count, g->num_inputs);
		goto out;
	}
	testdata_bfloat16_inputs(&in, g);
	plan = rt_plan_create_known(g, 0, RT_DEVICE_CPU, in.t, err, sizeof(err));
	if (plan == NULL) {
		snprintf(why, cap, "plan: %s", err);
		goto out;
	}
	c->arena_bytes = rt_plan_arena_bytes(plan);
	c->steps = rt_plan_num_steps(plan);
	arena = aligned_alloc(RT_PLAN_ALIGN, c->arena_bytes > 0 ? c->arena_bytes : RT_PLAN_ALIGN);
	if (arena == NULL) {
		snprintf(why, cap, "no memory for an arena of %zu bytes", c->arena_bytes);
		goto out;
	}
	rt_plan_bind(plan, arena, bound_in, NULL);
	copy_inputs(&in, bound_in);
	if (rt_plan_run(plan, arena, err, sizeof(err)) != 0) {
		snprintf(why, cap, "warm-up run: %s", err);
		goto out;
	}
	copy_inputs(&in, bound_in); /* the first run may have reused the inputs' bytes */

	c->tasks_before = task_count();
	counting_start();
	rc = rt_plan_run(plan, arena, err, sizeof(err));
	counting_stop();
	c->tasks_after = task_count();
	c->allocs = alloc_count_allocs();
	c->frees = alloc_count_frees();
	c->threads = atomic_load(&g_threads);
	if (rc != 0)
		snprintf(why, cap, "counted run: %s", err);
out:
	free(arena);
	rt_plan_free(plan);
	testdata_tensors_free(&in);
	rt_graph_free(g);
	return rc != 0 ? -1 : 0;
}

/* ---- the tests ------------------------------------------------------------------------------------- */

static int suite_init(void)
{
	alloc_count_init();
	return rt_cpu_kernels_register() == 0 ? 0 : -1;
}

static atomic_bool g_thread_release;

static void *waiting_thread(void *arg)
{
	(void)arg;
	while (!atomic_load(&g_thread_release))
		;
	return NULL;
}

/* The counters are not vacuous: what they must see, they see. */
static void test_counters_see(void)
{
	void *(*volatile do_malloc)(size_t) = malloc; /* volatile: the compiler may not drop the pair */
	char *(*volatile do_strdup)(const char *) = strdup;
	void *p = NULL, *q, *r;
	int before, during, rc;
	pthread_t t;

	counting_start(); /* no CUnit assert while counting: a failed one allocates */
	q = do_malloc(24);
	r = do_strdup("allocated inside libc"); /* libc calls malloc internally: interposed too */
	rc = posix_memalign(&p, 64, 128);
	free(q);
	free(r);
	free(p);
	counting_stop();
	CU_ASSERT_EQUAL(rc, 0);
	CU_ASSERT_EQUAL(alloc_count_allocs(), 3);
	CU_ASSERT_EQUAL(alloc_count_frees(), 3);

	before = task_count();
	atomic_store(&g_thread_release, false);
	counting_start();
	rc = pthread_create(&t, NULL, waiting_thread, NULL);
	counting_stop();
	CU_ASSERT_FATAL(rc == 0);
	during = task_count();
	atomic_store(&g_thread_release, true);
	pthread_join(t, NULL);
	CU_ASSERT(before > 0);
	CU_ASSERT_EQUAL(during, before + 1);
	CU_ASSERT_EQUAL(atomic_load(&g_threads), NOALLOC_ASAN ? 0 : 1);

	/* A pool OpenBLAS started before main (OPENBLAS_NUM_THREADS unset) is no new thread, but its
	 * threads would share the GEMMs: the runtime must have told OpenBLAS one thread. */
	CU_ASSERT_EQUAL(openblas_get_num_threads(), 1);
}

/* The op families the hot-path rule is checked on, each of which must be among the models checked. */
static const char *const g_families[] = {
	"test_conv_", "test_gemm_", "test_matmul_", "test_averagepool_", "test_maxpool_",
	"test_layer_normalization_", "test_softmax_", "test_reduce_", "test_resize_",
};

static void test_models_noalloc(void)
{
	unsigned int checked = 0, bad = 0, family_seen[sizeof(g_families) / sizeof(g_families[0])] = { 0 };
	struct testdata_claims claims;
	size_t num_tests = 0;
	char **tests = NULL;
	int rc;

	rc = testdata_claims_load(&claims, NOALLOC_CLAIMS);
	if (rc != 0) {
		printf("cannot read the claims table %s: %s\n", NOALLOC_CLAIMS, strerror(-rc));
		testdata_claims_free(&claims);
		CU_FAIL_FATAL("claims table unreadable");
	}
	CU_ASSERT_FATAL(testdata_list_dir(g_dir, NULL, &tests, &num_tests) == 0);
	printf("\nthreads at start: %d (OPENBLAS_NUM_THREADS=%s)\n", task_count(),
	       getenv("OPENBLAS_NUM_THREADS") != NULL ? getenv("OPENBLAS_NUM_THREADS") : "unset");

	for (size_t i = 0; i < num_tests; i++) {
		char test_dir[4096], model[4200], why[RT_ERR_MAX * 3];
		struct model_counts c;
		bool ok;

		if (!testdata_wanted(tests[i], g_patterns, g_num_patterns))
			continue;
		snprintf(test_dir, sizeof(test_dir), "%s/%s", g_dir, tests[i]);
		snprintf(model, sizeof(model), "%s/model.onnx", test_dir);
		if (testdata_claims_excluded(&claims, tests[i]) != NULL || !testdata_model_claimed(&claims, model))
			continue;
		checked++;
		if (model_check(test_dir, &c, why, sizeof(why)) != 0) {
			bad++;
			printf("FAIL %s: %s\n", tests[i], why);
			CU_FAIL("a claimed model did not load, plan or run");
			continue;
		}
		ok = c.allocs == 0 && c.frees == 0 && c.threads == 0 && c.tasks_after == c.tasks_before;
		bad += !ok;
		printf("%s %s: %lu mallocs, %lu frees, %lu threads created, tasks %d -> %d (%u steps, arena %zu bytes)\n",
		       ok ? "ok" : "FAIL", tests[i], c.allocs, c.frees, c.threads, c.tasks_before, c.tasks_after,
		       c.steps, c.arena_bytes);
		CU_ASSERT_EQUAL(c.allocs, 0);
		CU_ASSERT_EQUAL(c.frees, 0);
		CU_ASSERT_EQUAL(c.threads, 0);
		CU_ASSERT_EQUAL(c.tasks_after, c.tasks_before);
		for (size_t f = 0; f < sizeof(g_families) / sizeof(g_families[0]); f++)
			family_seen[f] += strncmp(tests[i], g_families[f], strlen(g_families[f])) == 0;
	}
	printf("%u claimed models checked, %u with a heap call, a new thread or an error%s\n", checked, bad,
	       NOALLOC_ASAN ? " (AddressSanitizer: heap calls counted by its hooks, threads by /proc only)" : "");
	if (g_num_patterns == 0) {
		CU_ASSERT(checked >= NOALLOC_MODELS_MIN);
		for (size_t f = 0; f < sizeof(g_families) / sizeof(g_families[0]); f++) {
			if (family_seen[f] == 0)
				printf("FAIL: no claimed model %s* was checked\n", g_families[f]);
			CU_ASSERT(family_seen[f] > 0);
		}
	}
	testdata_free_list(tests, num_tests);
	testdata_claims_free(&claims);
}

/* ---- model-sized GEMMs: two models built here ------------------------------------------------------ */

/*
 * The node tests' GEMMs are a few elements wide, and OpenBLAS takes other paths (blocking, packing
 * into its buffer) for real layers. Two models built here have the shapes of real ones, with a
 * symbolic batch bound at plan time:
 *   convnet: X[N,64,56,56] -> Conv 3x3 64 (+bias, pads 1) -> Relu -> MaxPool 2x2 -> Conv 3x3 128 ->
 *            Relu -> GlobalAveragePool -> Flatten -> Gemm 1000 (transB) -> Softmax   (ResNet's shapes)
 *   ffn:     X[N,128,768] -> MatMul 3072 -> Add -> Relu -> MatMul 768 -> Add X -> LayerNormalization
 *            (a BERT-base feed-forward block)
 */
#define BIG_OPSET 17 /* LayerNormalization */

static const int64_t g_big_batches[] = { 1, 4 };

#define PB_PUSH(arr, n, x)                                              \
	do {                                                            \
		(arr) = realloc((arr), ((n) + 1) * sizeof(*(arr)));     \
		CU_ASSERT_FATAL((arr) != NULL);                         \
		(arr)[(n)++] = (x);                                     \
	} while (0)

static void *pb_alloc(size_t size)
{
	void *p = calloc(1, size);

	CU_ASSERT_FATAL(p != NULL);
	return p;
}

/* A float tensor's ValueInfo: dims of -1 are the symbolic batch "N"; rank < 0: no shape. */
static Onnx__ValueInfoProto *pb_value(const char *name, int rank, const int64_t *dims)
{
	Onnx__ValueInfoProto *vi = pb_alloc(sizeof(*vi));
	Onnx__TypeProto *tp = pb_alloc(sizeof(*tp));
	Onnx__TypeProto__Tensor *tt = pb_alloc(sizeof(*tt));

	onnx__value_info_proto__init(vi);
	onnx__type_proto__init(tp);
	onnx__type_proto__tensor__init(tt);
	tt->has_elem_type = true;
	tt->elem_type = BW_DTYPE_FLOAT;
	if (rank >= 0) {
		tt->shape = pb_alloc(sizeof(*tt->shape));
		onnx__tensor_shape_proto__init(tt->shape);
	}
	for (int d = 0; d < rank; d++) {
		Onnx__TensorShapeProto__Dimension *dim = pb_alloc(sizeof(*dim));

		onnx__tensor_shape_proto__dimension__init(dim);
		if (dims[d] < 0) {
			dim->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM;
			dim->dim_param = strdup("N");
		} else {
			dim->value_case = ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE;
			dim->dim_value = dims[d];
		}
		PB_PUSH(tt->shape->dim, tt->shape->n_dim, dim);
	}
	tp->value_case = ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE;
	tp->tensor_type = tt;
	vi->name = strdup(name);
	vi->type = tp;
	return vi;
}

static Onnx__ModelProto *pb_model(void)
{
	Onnx__ModelProto *m = pb_alloc(sizeof(*m));
	Onnx__OperatorSetIdProto *op = pb_alloc(sizeof(*op));

	onnx__model_proto__init(m);
	onnx__operator_set_id_proto__init(op);
	m->has_ir_version = true;
	m->ir_version = 8;
	op->domain = strdup("");
	op->has_version = true;
	op->version = BIG_OPSET;
	PB_PUSH(m->opset_import, m->n_opset_import, op);
	m->graph = pb_alloc(sizeof(*m->graph));
	onnx__graph_proto__init(m->graph);
	m->graph->name = strdup("noalloc");
	return m;
}

/* An initializer of small pseudo-random floats (a fixed sequence: the run is the same every time). */
static void pb_weights(Onnx__ModelProto *m, const char *name, int rank, const int64_t *dims)
{
	Onnx__TensorProto *t = pb_alloc(sizeof(*t));
	uint32_t seed = 2166136261u;
	size_t n = 1;
	float *v;

	onnx__tensor_proto__init(t);
	t->name = strdup(name);
	t->has_data_type = true;
	t->data_type = BW_DTYPE_FLOAT;
	for (int d = 0; d < rank; d++) {
		PB_PUSH(t->dims, t->n_dims, dims[d]);
		n *= (size_t)dims[d];
	}
	v = pb_alloc(n * sizeof(float));
	for (size_t i = 0; i < n; i++) {
		seed = seed * 1664525u + 1013904223u;
		v[i] = ((float)(seed >> 8) / (float)(1u << 24) - 0.5f) * 0.1f;
	}
	t->has_raw_data = true;
	t->raw_data.data = (uint8_t *)v;
	t->raw_data.len = n * sizeof(float);
	PB_PUSH(m->graph->initializer, m->graph->n_initializer, t);
}

/* A node; ins and outs are comma-separated. */
static Onnx__NodeProto *pb_node(Onnx__ModelProto *m, const char *op, const char *ins, const char *outs)
{
	Onnx__NodeProto *n = pb_alloc(sizeof(*n));
	const char *lists[2] = { ins, outs };

	onnx__node_proto__init(n);
	n->op_type = strdup(op);
	for (int l = 0; l < 2; l++) {
		for (const char *p = lists[l]; *p != '\0';) {
			size_t len = strcspn(p, ",");

			if (l == 0)
				PB_PUSH(n->input, n->n_input, strndup(p, len));
			else
				PB_PUSH(n->output, n->n_output, strndup(p, len));
			p += len + (p[len] == ',');
		}
	}
	PB_PUSH(m->graph->node, m->graph->n_node, n);
	return n;
}

static void pb_attr_ints(Onnx__NodeProto *n, const char *name, unsigned int count, const int64_t *v)
{
	Onnx__AttributeProto *a = pb_alloc(sizeof(*a));

	onnx__attribute_proto__init(a);
	a->name = strdup(name);
	a->has_type = true;
	a->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS;
	for (unsigned int i = 0; i < count; i++)
		PB_PUSH(a->ints, a->n_ints, v[i]);
	PB_PUSH(n->attribute, n->n_attribute, a);
}

static void pb_attr_int(Onnx__NodeProto *n, const char *name, int64_t v)
{
	Onnx__AttributeProto *a = pb_alloc(sizeof(*a));

	onnx__attribute_proto__init(a);
	a->name = strdup(name);
	a->has_type = true;
	a->type = ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT;
	a->has_i = true;
	a->i = v;
	PB_PUSH(n->attribute, n->n_attribute, a);
}

static Onnx__ModelProto *convnet_model(void)
{
	static const int64_t x[] = { -1, 64, 56, 56 }, w1[] = { 64, 64, 3, 3 }, b1[] = { 64 },
			     w2[] = { 128, 64, 3, 3 }, b2[] = { 128 }, wfc[] = { 1000, 128 }, bfc[] = { 1000 },
			     pads[] = { 1, 1, 1, 1 }, pool[] = { 2, 2 };
	Onnx__ModelProto *m = pb_model();
	Onnx__NodeProto *n;

	PB_PUSH(m->graph->input, m->graph->n_input, pb_value("x", 4, x));
	PB_PUSH(m->graph->output, m->graph->n_output, pb_value("prob", -1, NULL));
	pb_weights(m, "w1", 4, w1);
	pb_weights(m, "b1", 1, b1);
	pb_weights(m, "w2", 4, w2);
	pb_weights(m, "b2", 1, b2);
	pb_weights(m, "wfc", 2, wfc);
	pb_weights(m, "bfc", 1, bfc);
	pb_attr_ints(pb_node(m, "Conv", "x,w1,b1", "c1"), "pads", 4, pads);
	pb_node(m, "Relu", "c1", "r1");
	n = pb_node(m, "MaxPool", "r1", "p1");
	pb_attr_ints(n, "kernel_shape", 2, pool);
	pb_attr_ints(n, "strides", 2, pool);
	pb_attr_ints(pb_node(m, "Conv", "p1,w2,b2", "c2"), "pads", 4, pads);
	pb_node(m, "Relu", "c2", "r2");
	pb_node(m, "GlobalAveragePool", "r2", "g");
	pb_node(m, "Flatten", "g", "f");
	pb_attr_int(pb_node(m, "Gemm", "f,wfc,bfc", "logits"), "transB", 1);
	pb_attr_int(pb_node(m, "Softmax", "logits", "prob"), "axis", 1);
	return m;
}

static Onnx__ModelProto *ffn_model(void)
{
	static const int64_t x[] = { -1, 128, 768 }, w1[] = { 768, 3072 }, b1[] = { 3072 }, w2[] = { 3072, 768 },
			     b2[] = { 768 }, gamma[] = { 768 };
	Onnx__ModelProto *m = pb_model();

	PB_PUSH(m->graph->input, m->graph->n_input, pb_value("x", 3, x));
	PB_PUSH(m->graph->output, m->graph->n_output, pb_value("y", -1, NULL));
	pb_weights(m, "w1", 2, w1);
	pb_weights(m, "b1", 1, b1);
	pb_weights(m, "w2", 2, w2);
	pb_weights(m, "b2", 1, b2);
	pb_weights(m, "gamma", 1, gamma);
	pb_weights(m, "beta", 1, gamma);
	pb_node(m, "MatMul", "x,w1", "h");
	pb_node(m, "Add", "h,b1", "hb");
	pb_node(m, "Relu", "hb", "hr");
	pb_node(m, "MatMul", "hr,w2", "o");
	pb_node(m, "Add", "o,b2", "ob");
	pb_node(m, "Add", "ob,x", "res");
	pb_attr_int(pb_node(m, "LayerNormalization", "res,gamma,beta", "y"), "axis", -1);
	return m;
}

/*
 * Plans g for a batch size, fills its input, runs it twice and counts during the second run. With
 * chunk > 0, the plan has chunk rows and runs the batch depth first (rt_plan_run_chunks), its input
 * and output of batch rows apart from the arena.
 */
static int big_check(const struct rt_graph *g, int64_t batch, int64_t chunk, struct model_counts *c, char *why,
		     size_t cap)
{
	struct rt_tensor in, out, batch_in, batch_out;
	char err[RT_ERR_MAX * 2];
	struct rt_plan *plan;
	uint32_t seed = 7;
	void *arena, *in_buf = NULL, *out_buf = NULL;
	int64_t n;
	int rc;

	memset(c, 0, sizeof(*c));
	plan = rt_plan_create(g, chunk > 0 ? chunk : batch, RT_DEVICE_CPU, err, sizeof(err));
	if (plan == NULL) {
		snprintf(why, cap, "plan: %s", err);
		return -1;
	}
	c->arena_bytes = rt_plan_arena_bytes(plan);
	c->steps = rt_plan_num_steps(plan);
	arena = aligned_alloc(RT_PLAN_ALIGN, c->arena_bytes);
	CU_ASSERT_FATAL(arena != NULL);
	rt_plan_bind(plan, arena, &in, &out);
	n = rt_tensor_elems(&in);
	if (chunk > 0) { /* the batch's input and output, batch / chunk times the plan's */
		n *= batch / chunk;
		in_buf = malloc((size_t)n * sizeof(float));
		out_buf = malloc((size_t)rt_tensor_elems(&out) * (size_t)(batch / chunk) * sizeof(float));
		CU_ASSERT_FATAL(in_buf != NULL && out_buf != NULL);
		batch_in = (struct rt_tensor){ .dtype = BW_DTYPE_FLOAT, .data = in_buf };
		batch_out = (struct rt_tensor){ .dtype = BW_DTYPE_FLOAT, .data = out_buf };
	}
	for (int run = 0; run < 2; run++) {
		for (int64_t i = 0; i < n; i++) {
			seed = seed * 1664525u + 1013904223u;
			((float *)(chunk > 0 ? in_buf : in.data))[i] = (float)(seed >> 8) / (float)(1u << 24) - 0.5f;
		}
		if (run == 0) {
			rc = chunk > 0 ? rt_plan_run_chunks(plan, arena, batch, &batch_in, &batch_out, err, sizeof(err))
				       : rt_plan_run(plan, arena, err, sizeof(err));
			if (rc != 0)
				break;
			continue;
		}
		c->tasks_before = task_count();
		counting_start();
		rc = chunk > 0 ? rt_plan_run_chunks(plan, arena, batch, &batch_in, &batch_out, err, sizeof(err))
			       : rt_plan_run(plan, arena, err, sizeof(err));
		counting_stop();
		c->tasks_after = task_count();
		c->allocs = alloc_count_allocs();
		c->frees = alloc_count_frees();
		c->threads = atomic_load(&g_threads);
	}
	if (rc != 0)
		snprintf(why, cap, "run: %s", err);
	free(in_buf);
	free(out_buf);
	free(arena);
	rt_plan_free(plan);
	return rc != 0 ? -1 : 0;
}

static void test_big_models_noalloc(void)
{
	static const struct {
		const char *name;
		Onnx__ModelProto *(*build)(void);
	} models[] = {
		{ "convnet (ResNet shapes)", convnet_model },
		{ "ffn (BERT-base block)", ffn_model },
	};

	printf("\n");
	for (size_t i = 0; i < sizeof(models) / sizeof(models[0]); i++) {
		Onnx__ModelProto *m = models[i].build();
		char err[RT_ERR_MAX], why[RT_ERR_MAX * 3];
		size_t len = onnx__model_proto__get_packed_size(m);
		uint8_t *buf = malloc(len + 1);
		struct rt_graph *g;

		CU_ASSERT_FATAL(buf != NULL);
		CU_ASSERT_FATAL(onnx__model_proto__pack(m, buf) == len);
		onnx__model_proto__free_unpacked(m, NULL);
		g = rt_graph_load_buffer(buf, len, NULL, err, sizeof(err));
		free(buf);
		if (g == NULL) {
			printf("FAIL %s: load: %s\n", models[i].name, err);
			CU_FAIL("a built model did not load");
			continue;
		}
		/* each batch size whole, and the largest also depth first in chunks of 1 row */
		for (size_t b = 0; b <= sizeof(g_big_batches) / sizeof(g_big_batches[0]); b++) {
			size_t nb = sizeof(g_big_batches) / sizeof(g_big_batches[0]);
			int64_t batch = g_big_batches[b < nb ? b : nb - 1], chunk = b < nb ? 0 : 1;
			struct model_counts c;
			bool ok;

			if (big_check(g, batch, chunk, &c, why, sizeof(why)) != 0) {
				printf("FAIL %s, batch %lld: %s\n", models[i].name, (long long)batch, why);
				CU_FAIL("a built model did not plan or run");
				continue;
			}
			ok = c.allocs == 0 && c.frees == 0 && c.threads == 0 && c.tasks_after == c.tasks_before;
			printf("%s %s, batch %lld%s: %lu mallocs, %lu frees, %lu threads created, tasks %d -> %d (%u steps, "
			       "arena %zu bytes)\n", ok ? "ok" : "FAIL", models[i].name, (long long)batch,
			       chunk > 0 ? " in chunks of 1" : "", c.allocs, c.frees, c.threads, c.tasks_before, c.tasks_after,
			       c.steps, c.arena_bytes);
			CU_ASSERT_EQUAL(c.allocs, 0);
			CU_ASSERT_EQUAL(c.frees, 0);
			CU_ASSERT_EQUAL(c.threads, 0);
			CU_ASSERT_EQUAL(c.tasks_after, c.tasks_before);
		}
		rt_graph_free(g);
	}
}

static CU_TestInfo g_noalloc_tests[] = {
	{ "the counters see a malloc, a free and a new thread; OpenBLAS has one", test_counters_see },
	{ "claimed node-test models: 0 mallocs, 0 threads in rt_plan_run", test_models_noalloc },
	{ "model-sized Conv, Gemm, MatMul: 0 mallocs, 0 threads in rt_plan_run (and in chunks)", test_big_models_noalloc },
	CU_TEST_INFO_NULL,
};

int main(int argc, char **argv)
{
	CU_SuiteInfo suites[] = {
		{ "runtime: no allocation, no thread while a model runs", suite_init, NULL, NULL, NULL, g_noalloc_tests },
		CU_SUITE_INFO_NULL,
	};
	struct stat st;
	int status = isa_level_check();

	if (status >= 0)
		return status;
	if (argc > 1)
		g_dir = argv[1];
	g_patterns = argv + (argc > 1 ? 2 : argc);
	g_num_patterns = argc > 2 ? argc - 2 : 0;
	if (stat(g_dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
		printf("SKIP: %s is missing (apt install libonnx-testdata)\n", g_dir);
		return BW_TEST_EXIT_SKIP;
	}
	return bw_cunit_run(suites);
}
