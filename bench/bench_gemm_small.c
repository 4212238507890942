/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * bench_gemm_small: the small direct GEMM (runtime/kernels/gemm_small.c) against OpenBLAS's
 * cblas_sgemm on the untransposed products rt_k_gemm sends to it (m * n * k <= 100^3), one thread,
 * row-major, beta 0 and 1. A program, not a test: it prints what it measured.
 *
 * Per shape: the median time per call over BENCH_RUNS runs (each at least BENCH_RUN_NS long; the
 * two alternate run by run, so a neighbour's load falls on both), GFLOP/s, ours over OpenBLAS's
 * speed, and the heap calls one OpenBLAS call makes (its small-matrix kernels on SkylakeX-family
 * cores allocate: why ours exists). The kernels run at the level BW_CPU_ISA and the CPU give
 * (printed first); OpenBLAS at the core it chose (OPENBLAS_CORETYPE moves it). The last line:
 *
 *   small_vs_openblas_geomean=<geometric mean over the shapes of our GFLOP/s / OpenBLAS's>
 *
 * Usage: OPENBLAS_NUM_THREADS=1 bench_gemm_small [--quick]
 */
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cblas.h>

#include "graph.h"
#include "kernels/sgemm.h"

#define BENCH_RUNS 21
#define BENCH_RUNS_QUICK 3
#define BENCH_RUN_NS 5000000LL /* 5 ms of calls per run */
#define BENCH_RUN_NS_QUICK 500000LL

struct shape {
	const char *what;
	int m, n, k;
	float beta;
};

/* What the models' small untransposed products look like: a conv on unpacked weights (M output
 * channels, N pixels, K = C*3*3), attention's probabilities . V per head, thin MatMuls. */
static const struct shape g_shapes[] = {
	{"conv 36x81x36, residual", 36, 81, 36, 1.0f},
	{"conv 64x196x72", 64, 196, 72, 0.0f},
	{"attention 128x64x128", 128, 64, 128, 0.0f},
	{"attention 16x64x16", 16, 64, 16, 0.0f},
	{"matmul 8x128x256", 8, 128, 256, 0.0f},
	{"matmul 2x10x1024", 2, 10, 1024, 0.0f},
	{"square 100", 100, 100, 100, 1.0f},
	{"square 32", 32, 32, 32, 0.0f},
};

extern void *__libc_malloc(size_t size);
extern void __libc_free(void *p);
static atomic_bool g_counting;
static atomic_ulong g_heap_calls;

void *malloc(size_t size)
{
	if (atomic_load_explicit(&g_counting, memory_order_relaxed))
		atomic_fetch_add_explicit(&g_heap_calls, 1, memory_order_relaxed);
	return __libc_malloc(size);
}

void free(void *p)
{
	if (p != NULL && atomic_load_explicit(&g_counting, memory_order_relaxed))
		atomic_fetch_add_explicit(&g_heap_calls, 1, memory_order_relaxed);
	__libc_free(p);
}

static long long now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void call(int ours, const struct shape *s, const float *a, const float *b, float *c)
{
	if (ours)
		rt_gemm_small_f32(s->m, s->n, s->k, 1.0f, a, s->k, b, s->n, s->beta, c, s->n);
	else
		cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, s->m, s->n, s->k, 1.0f, a, s->k, b, s->n, s->beta,
			    c, s->n);
}

/* ns per call over one run of at least run_ns */
static double run_once(int ours, const struct shape *s, const float *a, const float *b, float *c, long long run_ns)
{
	long long t0 = now_ns(), t;
	long calls = 0;

	do {
		for (int i = 0; i < 16; i++)
			call(ours, s, a, b, c);
		calls += 16;
		t = now_ns();
	} while (t - t0 < run_ns);
	return (double)(t - t0) / (double)calls;
}

static int cmp_double(const void *x, const void *y)
{
	double a = *(const double *)x, b = *(const double *)y;

	return (a > b) - (a < b);
}

int main(int argc, char **argv)
{
	int quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
	int runs = quick ? BENCH_RUNS_QUICK : BENCH_RUNS;
	long long run_ns = quick ? BENCH_RUN_NS_QUICK : BENCH_RUN_NS;
	double log_sum = 0;
	char line[256];
	float *a = calloc(100 * 1024, sizeof(float)), *b = calloc(100 * 1024, sizeof(float));
	float *c[2] = {calloc(128 * 196, sizeof(float)), calloc(128 * 196, sizeof(float))};

	if (a == NULL || b == NULL || c[0] == NULL || c[1] == NULL || rt_cpu_isa_select(line, sizeof(line)) != 0) {
		fprintf(stderr, "bench_gemm_small: %s\n", a == NULL || b == NULL ? "out of memory" : line);
		return 1;
	}
	openblas_set_num_threads(1);
	for (int i = 0; i < 100 * 1024; i++) {
		a[i] = (float)(i % 17) / 17.0f - 0.5f;
		b[i] = (float)(i % 13) / 13.0f - 0.5f;
	}
	rt_cpu_isa_describe(line, sizeof(line));
	printf("kernels: %s\n", line);
	printf("%-28s %10s %10s %8s %8s %7s %14s\n", "shape (m x n x k)", "ours ns", "blas ns", "ours GF", "blas GF",
	       "ratio", "blas heap/call");
	for (size_t s = 0; s < sizeof(g_shapes) / sizeof(g_shapes[0]); s++) {
		const struct shape *sh = &g_shapes[s];
		double t[2][BENCH_RUNS], med[2], flops = 2.0 * sh->m * sh->n * sh->k, diff = 0;
		unsigned long heap;

		for (int w = 0; w < 2; w++)
			run_once(w, sh, a, b, c[w], run_ns * 4); /* warm */
		for (int r = 0; r < runs; r++)
			for (int w = 0; w < 2; w++)
				t[w][r] = run_once(w, sh, a, b, c[w], run_ns);
		for (int w = 0; w < 2; w++) {
			qsort(t[w], (size_t)runs, sizeof(double), cmp_double);
			med[w] = t[w][runs / 2];
		}
		/* the same product both ways, from the same C (beta 1 reads it) */
		memset(c[0], 0, 128 * 196 * sizeof(float));
		memset(c[1], 0, 128 * 196 * sizeof(float));
		call(1, sh, a, b, c[1]);
		atomic_store(&g_heap_calls, 0);
		atomic_store(&g_counting, true);
		call(0, sh, a, b, c[0]);
		atomic_store(&g_counting, false);
		heap = atomic_load(&g_heap_calls);
		for (int i = 0; i < sh->m * sh->n; i++)
			diff = fmax(diff, fabs((double)c[0][i] - (double)c[1][i]));
		printf("%-28s %10.0f %10.0f %8.2f %8.2f %7.2f %14lu   (largest difference %.2g)\n", sh->what, med[1], med[0],
		       flops / med[1], flops / med[0], med[0] / med[1], heap, diff);
		log_sum += log(med[0] / med[1]);
	}
	printf("small_vs_openblas_geomean=%.3f\n", exp(log_sum / (double)(sizeof(g_shapes) / sizeof(g_shapes[0]))));
	return 0;
}
