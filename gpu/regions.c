/* SPDX-License-Identifier: BSD-3-Clause */
/* Registered host regions' bookkeeping, for the CUDA module and the fake alike. */
#include <errno.h>

#include "defs.h"

int gpu_regions_check(const struct gpu_regions *rs, const void *addr, size_t len, char *err, size_t cap)
{
	uintptr_t start = (uintptr_t)addr;
	unsigned int i;

	if (addr == NULL || len == 0 || start + len < start) {
		gpu_err(err, cap, "host region %p + %zu: not a region (NULL, empty or wrapping)", addr, len);
		return -EINVAL;
	}
	for (i = 0; i < rs->n; i++) {
		const struct gpu_region *r = &rs->r[i];

		if (start < r->start + r->len && r->start < start + len) {
			gpu_err(err, cap, "host region %p + %zu overlaps registered region %p + %zu", addr, len,
				(void *)r->start, r->len);
			return -EEXIST;
		}
	}
	if (rs->n == GPU_REGIONS_MAX) {
		gpu_err(err, cap, "host region %p + %zu: %u regions registered already (GPU_REGIONS_MAX)", addr, len,
			rs->n);
		return -ENOSPC;
	}
	return 0;
}

void gpu_regions_add(struct gpu_regions *rs, void *addr, size_t len, void *dev_addr)
{
	rs->r[rs->n++] = (struct gpu_region){ .start = (uintptr_t)addr, .len = len, .dev_addr = dev_addr };
}

int gpu_regions_find(const struct gpu_regions *rs, const void *addr, char *err, size_t cap)
{
	unsigned int i;

	for (i = 0; i < rs->n; i++)
		if (rs->r[i].start == (uintptr_t)addr)
			return (int)i;
	gpu_err(err, cap, "host region %p is not registered", addr);
	return -ENOENT;
}

void gpu_regions_remove(struct gpu_regions *rs, unsigned int idx)
{
	rs->r[idx] = rs->r[--rs->n];
}

int gpu_regions_covers(const struct gpu_regions *rs, const void *dev_addr, size_t len, char *err, size_t cap)
{
	uintptr_t a = (uintptr_t)dev_addr;
	unsigned int i;

	for (i = 0; i < rs->n; i++) {
		uintptr_t d = (uintptr_t)rs->r[i].dev_addr;

		if (len > 0 && a >= d && a - d <= rs->r[i].len && len <= rs->r[i].len - (a - d))
			return 0;
	}
	gpu_err(err, cap, "device range %p + %zu is not inside one registered host region", dev_addr, len);
	return -EINVAL;
}
