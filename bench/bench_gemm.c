/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * bench_gemm: the CPU GEMM library, chosen by measurement. Single-threaded FP32 GEMM,
 * row-major as the runtime calls it, on the shapes the runtime's kernels hand to BLAS: OpenBLAS's
 * cblas_sgemm (openblas_set_num_threads(1)) against oneDNN's dnnl_sgemm (Debian's build runs on
 * OpenMP: omp_set_num_threads(1)). A program, not a test: it prints what it measured.
 *
 * For each shape and library: the first call's time, then the median time per call of
 * BENCH_RUNS runs taken after a warm-up (each run times enough calls to last BENCH_RUN_NS_MIN; the
 * libraries alternate run by run, so a neighbour's load on a shared machine falls on both), GFLOP/s
 * (2*M*N*K per call) and OpenBLAS's speed over oneDNN's (for M = 1 also OpenBLAS's sgemv, what a
 * kernel could call instead for a batch of one); heap calls made by one steady-state call
 * (malloc and friends are interposed, as in tests/runtime/test_noalloc.c) and the largest
 * difference from OpenBLAS sgemm's result. Then the threads each library's first call left in
 * /proc/self/task. The last line is machine-readable:
 *
 *   openblas_vs_dnnl_geomean=<geometric mean over the shapes of OpenBLAS GFLOP/s / oneDNN GFLOP/s>
 *
 * (> 1: OpenBLAS is faster; "n/a" when built without oneDNN.)
 *
 * Usage: bench_gemm [--quick] [--default-threads]
 *   --quick            5 runs of at least 2 ms each (a smoke run)
 *   --default-threads  tell neither library to use one thread: only count the threads each starts
 */
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cblas.h>

#ifdef BENCH_HAVE_DNNL
#include <omp.h>
#include <oneapi/dnnl/dnnl.h>
#endif

#define BENCH_RUNS 25               /* measured runs per shape and library; the median is reported */
#define BENCH_RUNS_QUICK 5
#define BENCH_RUN_NS_MIN 10000000LL /* 10 ms: each run times at least this long */
#define BENCH_RUN_NS_MIN_QUICK 2000000LL
#define BENCH_WARMUP_NS 50000000LL  /* 50 ms of calls per shape and library before measuring */
#define BENCH_ALIGN 64              /* bytes: as the runtime's arena aligns tensors (RT_PLAN_ALIGN) */

/* ---- the shapes ------------------------------------------------------------------------------------- */

/* C[M,N] = op(A)[M,K] * op(B)[K,N], row-major, as the runtime's Conv (im2col), Gemm and MatMul call it. */
struct shape {
	const char *name;
	int m, n, k;
	bool trans_b;  /* B stored [N,K]: a Gemm with transB=1, as exported FC layers are */
};

static const struct shape g_shapes[] = {
	/* ResNet-50-like convolutions as im2col GEMMs: M output channels, N output pixels, K = C*kh*kw
	 * (conv1's K = 3*7*7 at a 56x56 output; the real conv1 outputs 112x112) */
	{ "resnet conv1 7x7 (M64 N3136 K147)", 64, 3136, 147, false },
	{ "resnet 3x3 c64 (M64 N3136 K576)", 64, 3136, 576, false },
	{ "resnet 3x3 c128 (M256 N784 K1152)", 256, 784, 1152, false },
	{ "resnet 3x3 c512 (M512 N49 K4608)", 512, 49, 4608, false },
	/* the classifier: Gemm transB=1, batch 1 and 32 */
	{ "fc 1x2048x1000 (transB)", 1, 1000, 2048, true },
	{ "fc 32x2048x1000 (transB)", 32, 1000, 2048, true },
	/* BERT-base, sequence 128: the attention projections and the FFN's first MatMul */
	{ "bert 128x768x768", 128, 768, 768, false },
	{ "bert 128x768x3072", 128, 3072, 768, false },
};

#define NB_SHAPES (sizeof(g_shapes) / sizeof(g_shapes[0]))

enum lib {
	LIB_OPENBLAS,
	LIB_DNNL,
	LIB_OPENBLAS_GEMV, /* M = 1 only: what a kernel could call instead of sgemm for a batch of one */
	NB_LIBS,
};

static const char *const g_lib_names[NB_LIBS] = { "OpenBLAS", "oneDNN", "OpenBLAS gemv" };

/* ---- heap calls (not under AddressSanitizer, which owns malloc) -------------------------------------- */

static atomic_ulong g_heap_calls;

#if defined(__SANITIZE_ADDRESS__)
#define BENCH_COUNTS_HEAP 0
#else
#define BENCH_COUNTS_HEAP 1
extern void *__libc_malloc(size_t size);
extern void *__libc_calloc(size_t n, size_t size);
extern void *__libc_realloc(void *p, size_t size);
extern void __libc_free(void *p);
extern void *__libc_memalign(size_t align, size_t size);

static inline void heap_call(void)
{
	atomic_fetch_add_explicit(&g_heap_calls, 1, memory_order_relaxed);
}

void *malloc(size_t size)
{
	heap_call();
	return __libc_malloc(size);
}

void *calloc(size_t n, size_t size)
{
	heap_call();
	return __libc_calloc(n, size);
}

void *realloc(void *p, size_t size)
{
	heap_call();
	return __libc_realloc(p, size);
}

void free(void *p)
{
	if (p != NULL)
		heap_call();
	__libc_free(p);
}

int posix_memalign(void **out, size_t align, size_t size)
{
	void *p;

	if (align == 0 || (align & (align - 1)) != 0 || align % sizeof(void *) != 0)
		return EINVAL;
	heap_call();
	p = __libc_memalign(align, size);
	if (p == NULL)
		return ENOMEM;
	*out = p;
	return 0;
}

void *aligned_alloc(size_t align, size_t size)
{
	if (align == 0 || (align & (align - 1)) != 0) {
		errno = EINVAL;
		return NULL;
	}
	heap_call();
	return __libc_memalign(align, size);
}

void *memalign(size_t align, size_t size)
{
	heap_call();
	return __libc_memalign(align, size);
}
#endif

/* ---- helpers --------------------------------------------------------------------------------------- */

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* Entries of /proc/self/task: the process's threads. */
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

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return (x > y) - (x < y);
}

static float *matrix_new(size_t elems, uint32_t *seed)
{
	float *m = aligned_alloc(BENCH_ALIGN, (elems * sizeof(float) + BENCH_ALIGN - 1) / BENCH_ALIGN * BENCH_ALIGN);

	for (size_t i = 0; m != NULL && i < elems; i++) {
		*seed = *seed * 1664525u + 1013904223u; /* values in [-1, 1) */
		m[i] = (float)(*seed >> 8) / (float)(1u << 23) - 1.0f;
	}
	return m;
}

struct operands {
	const struct shape *s;
	float *a, *b, *c[NB_LIBS];
};

/* One GEMM with library lib. \return 0, or -1 when the library refused it. */
static int gemm(enum lib lib, const struct operands *o)
{
	const struct shape *s = o->s;
	int ldb = s->trans_b ? s->k : s->n;

	if (lib == LIB_OPENBLAS) {
		cblas_sgemm(CblasRowMajor, CblasNoTrans, s->trans_b ? CblasTrans : CblasNoTrans, s->m, s->n, s->k, 1.0f,
			    o->a, s->k, o->b, ldb, 0.0f, o->c[lib], s->n);
		return 0;
	}
	if (lib == LIB_OPENBLAS_GEMV) { /* c[1,N] = a[1,K] * op(B): y = op(B)^T a */
		if (s->m != 1)
			return -1;
		if (s->trans_b)
			cblas_sgemv(CblasRowMajor, CblasNoTrans, s->n, s->k, 1.0f, o->b, s->k, o->a, 1, 0.0f, o->c[lib], 1);
		else
			cblas_sgemv(CblasRowMajor, CblasTrans, s->k, s->n, 1.0f, o->b, s->n, o->a, 1, 0.0f, o->c[lib], 1);
		return 0;
	}
#ifdef BENCH_HAVE_DNNL
	return dnnl_sgemm('N', s->trans_b ? 'T' : 'N', s->m, s->n, s->k, 1.0f, o->a, s->k, o->b, ldb, 0.0f, o->c[lib],
			  s->n) == dnnl_success ? 0 : -1;
#else
	return -1;
#endif
}

/* ---- measuring --------------------------------------------------------------------------------------- */

struct figures {
	double first_us;        /* the very first call on this shape */
	double median_us;       /* per call */
	double min_us, max_us;  /* per call, over the runs */
	double gflops;          /* at the median */
	unsigned long heap;     /* heap calls in one steady-state call */
	bool ok;
};

struct lib_state {
	int64_t run_ns[BENCH_RUNS];
	unsigned int calls_per_run;
};

static void measure_shape(const struct shape *s, bool have[NB_LIBS], unsigned int runs, int64_t run_ns_min,
			  struct figures fig[NB_LIBS], double *max_diff)
{
	struct lib_state st[NB_LIBS];
	struct operands o = { .s = s };
	uint32_t seed = 12345;
	size_t celems = (size_t)s->m * (size_t)s->n;

	*max_diff = 0;
	o.a = matrix_new((size_t)s->m * (size_t)s->k, &seed);
	o.b = matrix_new((size_t)s->k * (size_t)s->n, &seed);
	for (int l = 0; l < NB_LIBS; l++)
		o.c[l] = matrix_new(celems, &seed);
	memset(fig, 0, sizeof(*fig) * NB_LIBS);
	if (o.a == NULL || o.b == NULL || o.c[LIB_OPENBLAS] == NULL || o.c[LIB_DNNL] == NULL ||
	    o.c[LIB_OPENBLAS_GEMV] == NULL) {
		fprintf(stderr, "bench_gemm: no memory for %s\n", s->name);
		goto out;
	}
	for (int l = 0; l < NB_LIBS; l++) {
		int64_t t0, t1, start;
		unsigned long heap0;

		if (!have[l])
			continue;
		t0 = now_ns();
		fig[l].ok = gemm(l, &o) == 0;
		t1 = now_ns();
		fig[l].first_us = (double)(t1 - t0) / 1e3;
		if (!fig[l].ok)
			continue;
		/* warm-up, and how many calls one run needs */
		start = now_ns();
		st[l].calls_per_run = 0;
		do {
			gemm(l, &o);
			st[l].calls_per_run++;
		} while (now_ns() - start < BENCH_WARMUP_NS);
		st[l].calls_per_run = (unsigned int)((double)st[l].calls_per_run * (double)run_ns_min /
						     (double)(now_ns() - start)) + 1;
		heap0 = atomic_load(&g_heap_calls);
		gemm(l, &o);
		fig[l].heap = atomic_load(&g_heap_calls) - heap0;
	}
	for (unsigned int r = 0; r < runs; r++) {
		for (int l = 0; l < NB_LIBS; l++) {
			int64_t t0;

			if (!have[l] || !fig[l].ok)
				continue;
			t0 = now_ns();
			for (unsigned int i = 0; i < st[l].calls_per_run; i++)
				gemm(l, &o);
			st[l].run_ns[r] = now_ns() - t0;
		}
	}
	for (int l = 0; l < NB_LIBS; l++) {
		double flop = 2.0 * s->m * s->n * s->k;

		if (!have[l] || !fig[l].ok)
			continue;
		qsort(st[l].run_ns, runs, sizeof(int64_t), cmp_i64);
		fig[l].median_us = (double)st[l].run_ns[runs / 2] / st[l].calls_per_run / 1e3;
		fig[l].min_us = (double)st[l].run_ns[0] / st[l].calls_per_run / 1e3;
		fig[l].max_us = (double)st[l].run_ns[runs - 1] / st[l].calls_per_run / 1e3;
		fig[l].gflops = flop / (fig[l].median_us * 1e3);
	}
	for (int l = LIB_DNNL; l < NB_LIBS && fig[LIB_OPENBLAS].ok; l++) { /* against OpenBLAS's sgemm */
		if (!have[l] || !fig[l].ok)
			continue;
		for (size_t i = 0; i < celems; i++) {
			double d = fabs((double)o.c[LIB_OPENBLAS][i] - (double)o.c[l][i]);

			*max_diff = d > *max_diff ? d : *max_diff;
		}
	}
out:
	free(o.a);
	free(o.b);
	for (int l = 0; l < NB_LIBS; l++)
		free(o.c[l]);
}

/* ---- main ------------------------------------------------------------------------------------------- */

static void usage(const char *prog)
{
	fprintf(stderr, "usage: %s [--quick] [--default-threads]\n", prog);
}

/* The first call of each library on a small GEMM, and the threads it left behind. */
static void count_threads(bool have[NB_LIBS], bool pinned)
{
	static const struct shape tiny = { "64x64x64", 64, 64, 64, false };
	int before = task_count(), after[NB_LIBS] = { 0 };
	struct operands o = { .s = &tiny };
	uint32_t seed = 1;

	o.a = matrix_new(64 * 64, &seed);
	o.b = matrix_new(64 * 64, &seed);
	for (int l = 0; l < NB_LIBS; l++)
		o.c[l] = matrix_new(64 * 64, &seed);
	for (int l = LIB_OPENBLAS; l <= LIB_DNNL; l++) {
		if (have[l])
			gemm(l, &o);
		after[l] = task_count();
	}
	printf("threads (/proc/self/task), libraries %s:\n", pinned ? "told to use one thread" : "at their defaults");
	printf("  at main (OpenBLAS's load-time pool is here unless OPENBLAS_NUM_THREADS=1): %d\n", before);
	printf("  OpenBLAS's first sgemm started %d\n", after[LIB_OPENBLAS] - before);
	if (have[LIB_DNNL])
		printf("  oneDNN's first sgemm started %d (OpenMP)\n", after[LIB_DNNL] - after[LIB_OPENBLAS]);
	free(o.a);
	free(o.b);
	for (int l = 0; l < NB_LIBS; l++)
		free(o.c[l]);
}

int main(int argc, char **argv)
{
	static const struct option long_opts[] = {
		{ "quick", no_argument, NULL, 'q' },
		{ "default-threads", no_argument, NULL, 'd' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	bool quick = false, pinned = true, have[NB_LIBS] = { true, false, true };
	unsigned int runs, shapes_both = 0;
	double log_ratio_sum = 0;
	int64_t run_ns_min, t_start = now_ns();
	int opt;

	while ((opt = getopt_long(argc, argv, "", long_opts, NULL)) != -1) {
		switch (opt) {
		case 'q':
			quick = true;
			break;
		case 'd':
			pinned = false;
			break;
		case 'h':
			usage(argv[0]);
			return 0;
		default:
			usage(argv[0]);
			return 2;
		}
	}
	if (optind != argc) {
		usage(argv[0]);
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	runs = quick ? BENCH_RUNS_QUICK : BENCH_RUNS;
	run_ns_min = quick ? BENCH_RUN_NS_MIN_QUICK : BENCH_RUN_NS_MIN;

	printf("OpenBLAS: %s\n", openblas_get_config());
#ifdef BENCH_HAVE_DNNL
	{
		const dnnl_version_t *v = dnnl_version();

		printf("oneDNN: %d.%d.%d (%s), CPU runtime %s\n", v->major, v->minor, v->patch, v->hash,
		       v->cpu_runtime == DNNL_RUNTIME_OMP ? "OpenMP" : "not OpenMP");
	}
	have[LIB_DNNL] = true;
#else
	printf("oneDNN: not built (no libdnnl-dev at configure time): OpenBLAS alone\n");
#endif
	if (pinned) {
		openblas_set_num_threads(1);
#ifdef BENCH_HAVE_DNNL
		omp_set_num_threads(1);
#endif
	}
	count_threads(have, pinned);
	if (!pinned)
		return 0;

	printf("\nsingle-threaded SGEMM, row-major, C = A*B; median of %u runs after warm-up, per call\n", runs);
	printf("%-36s %-13s %10s %10s %20s %8s %6s\n", "shape", "library", "first us", "us/call", "runs min..max us",
	       "GFLOP/s", "heap");
	for (size_t i = 0; i < NB_SHAPES; i++) {
		bool have_here[NB_LIBS];
		struct figures fig[NB_LIBS];
		double max_diff;

		memcpy(have_here, have, sizeof(have_here));
		have_here[LIB_OPENBLAS_GEMV] = g_shapes[i].m == 1;
		measure_shape(&g_shapes[i], have_here, runs, run_ns_min, fig, &max_diff);
		for (int l = 0; l < NB_LIBS; l++) {
			char range[32];

			if (!have_here[l])
				continue;
			if (!fig[l].ok) {
				printf("%-36s %-13s refused the call\n", l == 0 ? g_shapes[i].name : "", g_lib_names[l]);
				continue;
			}
			snprintf(range, sizeof(range), "%.1f..%.1f", fig[l].min_us, fig[l].max_us);
			printf("%-36s %-13s %10.1f %10.1f %20s %8.2f %6lu\n", l == 0 ? g_shapes[i].name : "", g_lib_names[l],
			       fig[l].first_us, fig[l].median_us, range, fig[l].gflops, fig[l].heap);
		}
		if (have[LIB_DNNL] && fig[LIB_OPENBLAS].ok && fig[LIB_DNNL].ok) {
			double ratio = fig[LIB_OPENBLAS].gflops / fig[LIB_DNNL].gflops;

			printf("%-36s OpenBLAS/oneDNN speed %.2f", "", ratio);
			if (fig[LIB_OPENBLAS_GEMV].ok)
				printf(", OpenBLAS gemv/oneDNN %.2f", fig[LIB_OPENBLAS_GEMV].gflops / fig[LIB_DNNL].gflops);
			printf("   max |difference| %.2g\n", max_diff);
			log_ratio_sum += log(ratio);
			shapes_both++;
		}
	}
	printf("heap: malloc-family calls in one steady-state call%s\n",
	       BENCH_COUNTS_HEAP ? "" : " (not counted under AddressSanitizer)");
	printf("(took %.1f s)\n", (double)(now_ns() - t_start) / 1e9);
	if (shapes_both > 0)
		printf("openblas_vs_dnnl_geomean=%.3f\n", exp(log_ratio_sum / shapes_both));
	else
		printf("openblas_vs_dnnl_geomean=n/a\n");
	return 0;
}
