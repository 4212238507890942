/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The vector math at 16 lanes, for the kernels' AVX-512 and AMX levels (vecmath.c's table takes it
 * there). A translation unit of its own because vecmath.h's vector types have one width per unit.
 *
 * The target names the AVX-512 subsets every such CPU has (Skylake-X, Zen 4, Sapphire Rapids) rather
 * than one CPU's arch, and FMA, which the polynomials are contracted into as on x86-64-v3: a lane's
 * result is then the same as the AVX2 build's. The whole unit is built for it (the pragma), so that
 * vecmath.h's helpers may use its intrinsics (VM_AVX512_OPS).
 */
#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "fused.h" /* vecmath.h's includes, before the target applies to what follows */

#define VL 16
#define VM_AVX512_OPS /* vecmath.h may use AVX-512's own instructions where they give the same bits */
#ifdef __clang__ /* (the fuzzers build the runtime's sources with clang) */
#pragma clang attribute push(__attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,fma"))), apply_to = function)
#else
#pragma GCC target("avx512f,avx512bw,avx512dq,avx512vl,fma")
#endif

#include "vecmath.h"

#define VM_AVX512 __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,fma")))

VM_VARIANTS(_avx512, VM_AVX512)

const struct vm_ops rt_vm_ops_avx512 = VM_OPS(_avx512);

#ifdef __clang__
#pragma clang attribute pop
#endif
