/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Compiler helpers for the DPDK-free modules (batching/, runtime/, gpu/, the client), which cannot
 * take DPDK's rte_branch_prediction.h. Each macro is defined only when nobody defined it first, so a
 * file may include this and DPDK's headers in either order (DPDK guards its own the same way).
 * C and CUDA C++ alike: nvcc compiles the headers that use BW_HD into device code.
 */
#ifndef BATCHWIRE_COMPILER_H
#define BATCHWIRE_COMPILER_H

#ifndef likely
#define likely(x) __builtin_expect(!!(x), 1)
#endif
#ifndef unlikely
#define unlikely(x) __builtin_expect(!!(x), 0)
#endif

/* A function both sides run: __host__ __device__ under nvcc, a plain function in C. */
#ifndef BW_HD
#ifdef __CUDACC__
#define BW_HD __host__ __device__
#else
#define BW_HD
#endif
#endif

#endif /* BATCHWIRE_COMPILER_H */
