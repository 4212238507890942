/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Which instruction set the CPU kernels run (graph.h, "CPU kernels' instruction set"): chosen once,
 * before the first model loads, from what this CPU and kernel run, what the operator asked for in
 * BW_CPU_ISA, and which levels have kernels built. Everything that has a choice of kernel
 * (sgemm.c's packed GEMMs, Winograd, the small direct GEMM, the optimizer's packing decisions) reads
 * rt_cpu_isa_active() instead of asking the CPU itself, so that forcing a lower level moves all of
 * them at once and one machine can run every path it can execute.
 *
 * OpenBLAS dispatches on its own (OPENBLAS_CORETYPE, read by its constructor before main); we name
 * the core it chose beside ours, since its kernels are part of what runs.
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "graph.h"
#include "sgemm.h"

/* Linux's arch_prctl request and xstate component for AMX tile data (asm/prctl.h, the kernel's
 * Documentation/arch/x86/xstate.rst); spelled out so the build does not need a recent kernel header. */
#define ARCH_GET_XCOMP_SUPP 0x1021
#define ARCH_REQ_XCOMP_PERM 0x1023
#define XFEATURE_XTILEDATA 18

static const struct isa_level {
	const char *name;     /* BW_CPU_ISA's value and the log's word */
	const char *features; /* what the CPU must have, for messages */
	bool built;           /* whether any kernel of this level exists */
} g_levels[RT_CPU_ISA_COUNT] = {
	[RT_CPU_ISA_BASELINE] = {"baseline", "x86-64 (SSE2)", true},
	[RT_CPU_ISA_AVX2] = {"avx2", "AVX2 and FMA", true},
	[RT_CPU_ISA_AVX512] = {"avx512", "AVX-512 F, BW, DQ and VL", true},
	[RT_CPU_ISA_AMX] = {"amx", "AMX tiles, AMX-BF16 and AVX512-BF16, with the kernel's permission", true},
};

static struct {
	pthread_once_t once;
	int ret;                  /* of the selection: 0 or a negative errno */
	char err[160];            /* why it failed */
	enum rt_cpu_isa cpu;      /* the highest level this CPU and kernel run */
	enum rt_cpu_isa requested;
	bool overridden;          /* requested came from BW_CPU_ISA */
	enum rt_cpu_isa active;   /* the kernels that run */
	int amx_refused;          /* errno of the tile-state request Linux refused, else 0 */
} g_isa = {.once = PTHREAD_ONCE_INIT};

const char *rt_cpu_isa_name(enum rt_cpu_isa isa)
{
	return (unsigned int)isa < RT_CPU_ISA_COUNT ? g_levels[isa].name : "?";
}

/* Whether Linux lets processes use AMX tile data (5.16 and later); the permission itself is asked for
 * once per process, when the AMX level is chosen (isa_select). */
static bool os_supports_amx(void)
{
	unsigned long features = 0;

	if (syscall(SYS_arch_prctl, ARCH_GET_XCOMP_SUPP, &features) != 0)
		return false;
	return (features & (1UL << XFEATURE_XTILEDATA)) != 0;
}

/* libgcc's __builtin_cpu_supports checks XGETBV for the AVX and AVX-512 register state as well as
 * CPUID, so an OS that does not save those registers reads as a CPU without them. */
static enum rt_cpu_isa cpu_detect(void)
{
	__builtin_cpu_init();
	if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma"))
		return RT_CPU_ISA_BASELINE;
	if (!__builtin_cpu_supports("avx512f") || !__builtin_cpu_supports("avx512bw") ||
	    !__builtin_cpu_supports("avx512dq") || !__builtin_cpu_supports("avx512vl"))
		return RT_CPU_ISA_AVX2;
	if (!__builtin_cpu_supports("amx-tile") || !__builtin_cpu_supports("amx-bf16") ||
	    !__builtin_cpu_supports("avx512bf16") || !os_supports_amx())
		return RT_CPU_ISA_AVX512;
	return RT_CPU_ISA_AMX;
}

static int isa_parse(const char *s, enum rt_cpu_isa *out)
{
	for (int i = 0; i < RT_CPU_ISA_COUNT; i++) {
		if (strcmp(s, g_levels[i].name) == 0) {
			*out = (enum rt_cpu_isa)i;
			return 0;
		}
	}
	return -EINVAL;
}

static void isa_select(void)
{
	const char *env = getenv(RT_CPU_ISA_ENV);

	g_isa.cpu = cpu_detect();
	g_isa.requested = g_isa.cpu;
	g_isa.active = RT_CPU_ISA_BASELINE;
	if (env != NULL && env[0] != '\0') {
		g_isa.overridden = true;
		if (isa_parse(env, &g_isa.requested) != 0) {
			snprintf(g_isa.err, sizeof(g_isa.err), "%s=%s: not one of baseline, avx2, avx512, amx",
				 RT_CPU_ISA_ENV, env);
			g_isa.ret = -EINVAL;
			return;
		}
		if (g_isa.requested > g_isa.cpu) {
			snprintf(g_isa.err, sizeof(g_isa.err), "%s=%s: this CPU lacks %s (it runs up to %s)",
				 RT_CPU_ISA_ENV, env, g_levels[g_isa.requested].features, rt_cpu_isa_name(g_isa.cpu));
			g_isa.ret = -ENOTSUP;
			return;
		}
	}
	for (int i = (int)g_isa.requested; i >= 0; i--) {
		if (g_levels[i].built) {
			g_isa.active = (enum rt_cpu_isa)i;
			break;
		}
	}
	/*
	 * Linux hands a process AMX's tile state (8 KiB per thread's signal frame and XSAVE area) only
	 * once it asks, for all its threads, and kills one that executes a tile instruction before. Asked
	 * here, at start-up: a system call that the hot path never makes.
	 */
	if (g_isa.active == RT_CPU_ISA_AMX && syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) != 0) {
		g_isa.amx_refused = errno;
		g_isa.active = RT_CPU_ISA_AVX512;
	}
}

int rt_cpu_isa_select(char *err, size_t cap)
{
	pthread_once(&g_isa.once, isa_select);
	if (g_isa.ret != 0 && err != NULL)
		snprintf(err, cap, "%s", g_isa.err);
	return g_isa.ret;
}

enum rt_cpu_isa rt_cpu_isa_active(void)
{
	pthread_once(&g_isa.once, isa_select);
	return g_isa.active;
}

enum rt_cpu_isa rt_cpu_isa_detected(void)
{
	pthread_once(&g_isa.once, isa_select);
	return g_isa.cpu;
}

int rt_cpu_isa_describe(char *buf, size_t cap)
{
	char why[112];
	int off = 0;

	pthread_once(&g_isa.once, isa_select);
	if (g_isa.ret != 0)
		return snprintf(buf, cap, "not chosen: %s", g_isa.err);
	if (g_isa.overridden)
		off = snprintf(why, sizeof(why), "%s=%s", RT_CPU_ISA_ENV, rt_cpu_isa_name(g_isa.requested));
	if (g_isa.amx_refused != 0)
		snprintf(why + off, sizeof(why) - (size_t)off, "%sLinux refused AMX's tile state: %s", off > 0 ? ", " : "",
			 strerror(g_isa.amx_refused));
	else if (g_isa.active < g_isa.requested)
		snprintf(why + off, sizeof(why) - (size_t)off, "%sthe highest level built", off > 0 ? ", " : "");
	else if (off == 0)
		snprintf(why, sizeof(why), "the CPU's highest");
	return snprintf(buf, cap, "%s (%s; this CPU runs up to %s); packed GEMMs %s%s; OpenBLAS %s core",
			rt_cpu_isa_name(g_isa.active), why, rt_cpu_isa_name(g_isa.cpu), rt_sg_path_name(),
			g_isa.active >= RT_CPU_ISA_AMX ? ", bf16 on AMX tiles" : "", openblas_get_corename());
}
