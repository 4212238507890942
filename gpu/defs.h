/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * gpu/'s private helpers, shared by the CUDA module and the fake device so that both keep the same
 * bookkeeping (and the fake's tests cover the module's): the registered host regions and the one-line
 * errors. No CUDA, no DPDK.
 */
#ifndef BW_GPU_DEFS_H
#define BW_GPU_DEFS_H

#include <stddef.h>
#include <stdint.h>

#include <batchwire/err.h>

#include "gpu.h"

struct gpu_region {
	uintptr_t start;
	size_t len;
	void *dev_addr;
};

/*
 * A device's registered host regions: unsorted, at most GPU_REGIONS_MAX, touched at start-up only.
 * page: the granularity at which the device pins memory. cudaHostRegister pins whole pages and
 * refuses a range with a page already pinned (cudaErrorHostMemoryAlreadyRegistered, which would read
 * as a device error), so two regions sharing a page are refused before the call, -EEXIST. 0 or 1:
 * bytes (the fake's default, so tests may register neighbouring arrays).
 */
struct gpu_regions {
	struct gpu_region r[GPU_REGIONS_MAX];
	unsigned int n;
	size_t page;
};

/* Writes one line into err (if any), printf-style: bw_err's, for callers that return their own code. */
#define gpu_err(err, cap, ...) ((void)bw_err((err), (cap), 0, __VA_ARGS__))

/**
 * Checks that [addr, addr + len) may be added: it overlaps no region, and shares no page with one.
 * \return 0; -EINVAL (NULL, empty or wrapping), -EEXIST (overlaps region k, or shares a page with it,
 *         named in err), -ENOSPC.
 */
int gpu_regions_check(const struct gpu_regions *rs, const void *addr, size_t len, char *err, size_t cap);
/** Adds a region gpu_regions_check accepted. */
void gpu_regions_add(struct gpu_regions *rs, void *addr, size_t len, void *dev_addr);
/** \return the index of the region starting at addr, or -ENOENT (with err). */
int gpu_regions_find(const struct gpu_regions *rs, const void *addr, char *err, size_t cap);
/** \return 0 when [dev_addr, dev_addr + len) lies inside one region's device range, else -EINVAL (err). */
int gpu_regions_covers(const struct gpu_regions *rs, const void *dev_addr, size_t len, char *err, size_t cap);
/** Removes region idx (the last one takes its place). */
void gpu_regions_remove(struct gpu_regions *rs, unsigned int idx);

/* ---- programs (program_check.c): what both modules do before they load one ---------------------- */

/**
 * Checks a program before a module loads it: names, tensor counts, sizes ascending and non-zero,
 * graph input/output offsets and row bytes inside each size's arena, and every op: a known code and
 * function, dtypes the op computes, operands present where required and inside the arena or the
 * constants for the bytes the op touches (element counts, strides, GEMM extents), max_segments > 0.
 * \return 0, or -EINVAL with err naming the size, the op index and what is wrong.
 */
int gpu_program_check(const struct gpu_program *prog, char *err, size_t cap);

/** \return a deep copy (every size's ops and the constants) for a module to keep, or NULL (ENOMEM). */
struct gpu_program *gpu_program_copy(const struct gpu_program *prog);
void gpu_program_free(struct gpu_program *prog);

#endif /* BW_GPU_DEFS_H */
