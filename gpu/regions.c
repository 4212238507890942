/* SPDX-License-Identifier: BSD-3-Clause */
/* Registered host regions' bookkeeping, for the CUDA module and the fake alike. */
#include <errno.h>
#include <stdlib.h>

#include "defs.h"

/*
 * [start, end) rounded out to page boundaries (page a power of two; 0 or 1: bytes). An end in the
 * address space's last page saturates instead of wrapping to 0 (no user mapping lies there).
 */
static void page_round(uintptr_t *start, uintptr_t *end, size_t page)
{
	uintptr_t mask = (uintptr_t)page - 1;

	if (page <= 1)
		return;
	*start &= ~mask;
	*end = *end > UINTPTR_MAX - mask ? UINTPTR_MAX : (*end + mask) & ~mask;
}

int gpu_regions_check(const struct gpu_regions *rs, const void *addr, size_t len, char *err, size_t cap)
{
	uintptr_t start = (uintptr_t)addr;
	uintptr_t pstart = start, pend = start + len;
	unsigned int i;

	if (addr == NULL || len == 0 || start + len < start) {
		gpu_err(err, cap, "host region %p + %zu: not a region (NULL, empty or wrapping)", addr, len);
		return -EINVAL;
	}
	page_round(&pstart, &pend, rs->page);
	for (i = 0; i < rs->n; i++) {
		const struct gpu_region *r = &rs->r[i];
		uintptr_t rstart = r->start, rend = r->start + r->len;

		if (start < r->start + r->len && r->start < start + len) {
			gpu_err(err, cap, "host region %p + %zu overlaps registered region %p + %zu", addr, len,
				(void *)r->start, r->len);
			return -EEXIST;
		}
		page_round(&rstart, &rend, rs->page);
		if (pstart < rend && rstart < pend) {
			gpu_err(err, cap, "host region %p + %zu shares a %zu-byte page with registered region %p + %zu "
				"(the device pins whole pages): register page-aligned ranges, or one region covering both",
				addr, len, rs->page, (void *)r->start, r->len);
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

static int range_cmp(const void *a, const void *b)
{
	const struct gpu_host_range *x = a, *y = b;

	return x->start < y->start ? -1 : x->start > y->start;
}

unsigned int gpu_host_ranges_merge(struct gpu_host_range *r, unsigned int n, size_t page)
{
	unsigned int merged = 0;

	for (unsigned int i = 0; i < n; i++)
		page_round(&r[i].start, &r[i].end, page);
	if (n > 1)
		qsort(r, n, sizeof(*r), range_cmp);
	for (unsigned int i = 0; i < n; i++) {
		if (r[i].end <= r[i].start)
			continue; /* empty: nothing to register */
		if (merged > 0 && r[i].start <= r[merged - 1].end) {
			if (r[i].end > r[merged - 1].end)
				r[merged - 1].end = r[i].end;
		} else {
			r[merged++] = r[i];
		}
	}
	return merged;
}
