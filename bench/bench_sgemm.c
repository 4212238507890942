/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * bench_sgemm: batchwire's packed GEMMs (runtime/kernels/sgemm.c) at the path BW_CPU_ISA and the
 * CPU give, against OpenBLAS's cblas_sgemm on the same products, one thread, on the shapes the four
 * models of models/ run: FusedGemm (weights packed on the right) for the transformer's projections
 * and the MLP, and the convolutions' GEMM (weights packed on the left) for ResNet-50's 1x1s and
 * Winograd's products; and, where the kernels run at the amx level, the bf16 GEMM on AMX tiles on the
 * FusedGemm shapes (its error relative to the largest fp32 output beside it). The BERT-base shape
 * is the one oneDNN 2.6.3 (Debian's) was measured on for the choice between it and our own kernels
 * (docs/runtime.md). A program, not a test: it prints what it measured.
 *
 * Per shape: the median time per call over BENCH_RUNS runs (each at least BENCH_RUN_NS long; ours
 * and OpenBLAS's alternate run by run, so a neighbour's load falls on both), GFLOP/s (2 m n k per
 * call), our speed over OpenBLAS's, the fraction of the CPU's FMA peak (measured first, at the
 * path's vector width) and the largest difference between the two results. The last line:
 *
 *   sgemm_path=<name> sgemm_vs_openblas_geomean=<x> sgemm_peak_fraction_geomean=<x>
 *
 * Usage: OPENBLAS_NUM_THREADS=1 [BW_CPU_ISA=avx2] bench_sgemm [--quick]
 */
#include <immintrin.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cblas.h>

#include "graph.h"
#include "kernels/bf16.h"
#include "kernels/sgemm.h"

#define BENCH_RUNS 15
#define BENCH_RUNS_QUICK 3
#define BENCH_RUN_NS 20000000LL
#define BENCH_RUN_NS_QUICK 2000000LL

enum shape_kind { SHAPE_BPACKED, SHAPE_APACKED };

static const struct shape {
	const char *what;
	enum shape_kind kind;
	int64_t m, n, k;
} g_shapes[] = {
	{"transformer QKV/out, batch 1", SHAPE_BPACKED, 128, 384, 384},
	{"transformer FFN up, batch 1", SHAPE_BPACKED, 128, 1536, 384},
	{"transformer FFN down, batch 1", SHAPE_BPACKED, 128, 384, 1536},
	{"transformer FFN up, batch 8", SHAPE_BPACKED, 1024, 1536, 384},
	{"BERT-base FFN up (oneDNN measured here: 0.66 ms bf16)", SHAPE_BPACKED, 128, 3072, 768},
	{"attention scores, per head", SHAPE_BPACKED, 128, 128, 32},
	{"attention context, per head", SHAPE_BPACKED, 128, 32, 128},
	{"MLP fc1, batch 8", SHAPE_BPACKED, 8, 1024, 784},
	{"MLP fc2, batch 32", SHAPE_BPACKED, 32, 1024, 1024},
	{"ResNet 1x1 64->256 at 56x56", SHAPE_APACKED, 256, 3136, 64},
	{"ResNet 1x1 1024->256 at 14x14", SHAPE_APACKED, 256, 196, 1024},
	{"ResNet 1x1 2048->512 at 7x7", SHAPE_APACKED, 512, 49, 2048},
	{"Winograd 64->64 at 56x56 (a tile product)", SHAPE_APACKED, 64, 784, 64},
	{"Winograd 256->256 at 14x14", SHAPE_APACKED, 256, 49, 256},
};

static long long now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000000000LL + t.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* The FMA peak at one vector width: 16 independent chains, GFLOP/s. */
__attribute__((target("avx512f"))) static double peak_512(void)
{
	__m512 acc[16], x = _mm512_set1_ps(1.0000001f), y = _mm512_set1_ps(1e-7f);
	long long t0, n = 20000000;
	float sink[16];

	for (int i = 0; i < 16; i++)
		acc[i] = _mm512_set1_ps((float)i);
	t0 = now_ns();
	for (long long k = 0; k < n; k++) {
#pragma GCC unroll 16
		for (int i = 0; i < 16; i++)
			acc[i] = _mm512_fmadd_ps(acc[i], x, y);
	}
	t0 = now_ns() - t0;
	for (int i = 1; i < 16; i++)
		acc[0] = _mm512_add_ps(acc[0], acc[i]);
	_mm512_storeu_ps(sink, acc[0]);
	if (sink[0] == 12345.0f)
		printf("%g\n", sink[0]);
	return (double)n * 16 * 16 * 2 / (double)t0;
}

__attribute__((target("avx2,fma"))) static double peak_256(void)
{
	__m256 acc[12], x = _mm256_set1_ps(1.0000001f), y = _mm256_set1_ps(1e-7f);
	long long t0, n = 20000000;
	float sink[8];

	for (int i = 0; i < 12; i++)
		acc[i] = _mm256_set1_ps((float)i);
	t0 = now_ns();
	for (long long k = 0; k < n; k++) {
#pragma GCC unroll 12
		for (int i = 0; i < 12; i++)
			acc[i] = _mm256_fmadd_ps(acc[i], x, y);
	}
	t0 = now_ns() - t0;
	for (int i = 1; i < 12; i++)
		acc[0] = _mm256_add_ps(acc[0], acc[i]);
	_mm256_storeu_ps(sink, acc[0]);
	if (sink[0] == 12345.0f)
		printf("%g\n", sink[0]);
	return (double)n * 12 * 8 * 2 / (double)t0;
}

struct run_ctx {
	const struct shape *s;
	float *a, *b, *packed, *scratch, *c;
	uint16_t *wbf;
	void *bf_scratch;
	struct rt_sg_b src;
	struct rt_sg_epilogue ep;
	struct rt_k_act_spec none;
};

static void call_ours(struct run_ctx *x)
{
	const struct shape *s = x->s;

	if (s->kind == SHAPE_BPACKED)
		rt_sg_gemm_bpacked(s->m, s->n, s->k, x->a, s->k, x->packed, x->c, s->n, 1.0f, NULL, &x->none, x->scratch);
	else
		rt_sg_gemm(s->m, s->n, s->k, x->packed, &x->src, x->c, s->n, &x->ep, x->scratch);
}

static void call_bf16(struct run_ctx *x)
{
	const struct shape *s = x->s;

	rt_bf16_gemm_bpacked(s->m, s->n, s->k, x->a, s->k, x->wbf, x->c, s->n, 1.0f, NULL, &x->none, x->bf_scratch);
}

static void call_blas(struct run_ctx *x)
{
	const struct shape *s = x->s;

	cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)s->m, (int)s->n, (int)s->k, 1.0f, x->a, (int)s->k,
		    x->b, (int)s->n, 0.0f, x->c, (int)s->n);
}

/* Nanoseconds per call of one run lasting at least run_ns. */
static double time_run(void (*fn)(struct run_ctx *), struct run_ctx *x, long long run_ns)
{
	long long t0 = now_ns(), t;
	long calls = 0;

	do {
		fn(x);
		calls++;
		t = now_ns() - t0;
	} while (t < run_ns);
	return (double)t / (double)calls;
}

static float *fill(size_t n, unsigned int *seed)
{
	float *p = aligned_alloc(64, (n * sizeof(float) + 63) / 64 * 64);

	for (size_t i = 0; p != NULL && i < n; i++)
		p[i] = (float)rand_r(seed) / (float)RAND_MAX * 2.0f - 1.0f;
	return p;
}

int main(int argc, char **argv)
{
	bool quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
	int runs = quick ? BENCH_RUNS_QUICK : BENCH_RUNS;
	long long run_ns = quick ? BENCH_RUN_NS_QUICK : BENCH_RUN_NS;
	char line[256];
	double peak, log_speed = 0, log_frac = 0;
	unsigned int seed = 1;
	int shapes = 0;

	if (rt_cpu_isa_select(line, sizeof(line)) != 0) {
		fprintf(stderr, "bench_sgemm: %s\n", line);
		return 1;
	}
	if (!rt_sg_available()) {
		fprintf(stderr, "bench_sgemm: the packed GEMMs need AVX2 and FMA; the kernels run at %s\n",
			rt_cpu_isa_name(rt_cpu_isa_active()));
		return 1;
	}
	openblas_set_num_threads(1);
	rt_cpu_isa_describe(line, sizeof(line));
	/* the best of 5: the first runs can meet the core before its clock has risen */
	peak = 0;
	for (int r = 0; r < 5; r++) {
		double p = rt_cpu_isa_active() >= RT_CPU_ISA_AVX512 ? peak_512() : peak_256();

		peak = p > peak ? p : peak;
	}
	printf("CPU kernels: %s\npath %s; FMA peak at its width %.1f GFLOP/s (one core, the best of 5 runs)\n", line,
	       rt_sg_path_name(), peak);
	printf("%-44s %6s %6s %6s %10s %10s %7s %6s %9s %10s %9s\n", "shape", "m", "n", "k", "ours GF/s", "BLAS GF/s",
	       "ours/BL", "peak", "max diff", "bf16 GF/s", "bf16 err");
	for (size_t si = 0; si < sizeof(g_shapes) / sizeof(g_shapes[0]); si++) {
		const struct shape *s = &g_shapes[si];
		struct run_ctx x = { .s = s, .none = { .kind = RT_K_ACT_NONE } };
		double t_ours[BENCH_RUNS], t_blas[BENCH_RUNS], t_bf[BENCH_RUNS], flop = 2.0 * (double)(s->m * s->n * s->k);
		double diff = 0, bf_err = 0, ref_max = 0;
		bool bf = s->kind == SHAPE_BPACKED && rt_bf16_available();
		float *ref;
		size_t packed, scratch;

		x.a = fill((size_t)(s->m * s->k), &seed);
		x.b = fill((size_t)(s->k * s->n), &seed);
		x.c = fill((size_t)(s->m * s->n), &seed);
		ref = fill((size_t)(s->m * s->n), &seed);
		packed = s->kind == SHAPE_BPACKED ? rt_sg_packed_b_floats(s->k, s->n) : rt_sg_packed_floats(s->m, s->k);
		scratch = s->kind == SHAPE_BPACKED ? rt_sg_scratch_a_floats(s->k) : rt_sg_scratch_floats(s->n, s->k);
		x.packed = fill(packed, &seed);
		x.scratch = fill(scratch, &seed);
		if (x.a == NULL || x.b == NULL || x.c == NULL || ref == NULL || x.packed == NULL || x.scratch == NULL) {
			fprintf(stderr, "bench_sgemm: out of memory\n");
			return 1;
		}
		if (s->kind == SHAPE_BPACKED)
			rt_sg_pack_b(x.b, s->n, s->k, s->n, x.packed);
		else
			rt_sg_pack_a(x.a, s->k, s->m, s->k, x.packed);
		x.src = (struct rt_sg_b){ .x = x.b, .ldb = s->n };
		x.ep = (struct rt_sg_epilogue){ .act = { .kind = RT_K_ACT_NONE } };
		call_blas(&x);
		memcpy(ref, x.c, (size_t)(s->m * s->n) * sizeof(float));
		call_ours(&x);
		for (int64_t i = 0; i < s->m * s->n; i++) {
			diff = fmax(diff, fabs((double)x.c[i] - (double)ref[i]));
			ref_max = fmax(ref_max, fabs((double)ref[i]));
		}
		if (bf) {
			x.wbf = aligned_alloc(64, (rt_bf16_packed_b_elems(s->k, s->n) * 2 + 63) / 64 * 64);
			x.bf_scratch = aligned_alloc(64, (rt_bf16_scratch_bytes(s->m, s->k) + 63) / 64 * 64);
			if (x.wbf == NULL || x.bf_scratch == NULL) {
				fprintf(stderr, "bench_sgemm: out of memory\n");
				return 1;
			}
			rt_bf16_pack_b(x.b, s->n, 1, s->k, s->n, x.wbf);
			call_bf16(&x);
			/* relative to the largest output: bf16 keeps 8 bits of mantissa of each operand */
			for (int64_t i = 0; i < s->m * s->n; i++)
				bf_err = fmax(bf_err, fabs((double)x.c[i] - (double)ref[i]) / ref_max);
		}
		for (int r = 0; r < runs; r++) {
			t_ours[r] = time_run(call_ours, &x, run_ns);
			t_blas[r] = time_run(call_blas, &x, run_ns);
			t_bf[r] = bf ? time_run(call_bf16, &x, run_ns) : 0;
		}
		qsort(t_ours, (size_t)runs, sizeof(double), cmp_double);
		qsort(t_blas, (size_t)runs, sizeof(double), cmp_double);
		qsort(t_bf, (size_t)runs, sizeof(double), cmp_double);
		{
			double g_ours = flop / t_ours[runs / 2], g_blas = flop / t_blas[runs / 2];

			printf("%-44s %6lld %6lld %6lld %10.1f %10.1f %7.2f %5.0f%% %9.2g", s->what, (long long)s->m,
			       (long long)s->n, (long long)s->k, g_ours, g_blas, g_ours / g_blas, 100.0 * g_ours / peak, diff);
			if (bf)
				printf(" %10.1f %9.2g\n", flop / t_bf[runs / 2], bf_err);
			else
				printf(" %10s %9s\n", "na", "na");
			log_speed += log(g_ours / g_blas);
			log_frac += log(g_ours / peak);
			shapes++;
		}
		free(x.a), free(x.b), free(x.c), free(ref), free(x.packed), free(x.scratch), free(x.wbf), free(x.bf_scratch);
	}
	printf("sgemm_path=%s sgemm_vs_openblas_geomean=%.3f sgemm_peak_fraction_geomean=%.3f\n",
	       rt_sg_path_name(), exp(log_speed / shapes), exp(log_frac / shapes));
	return 0;
}
