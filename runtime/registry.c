/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The kernel registry: every device runtime registers its kernels here at start-up, keyed by
 * (op, domain, opset range, dtypes, device). Filled before any model loads, read-only afterwards.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "graph.h"

#define RT_KERNELS_MAX 512

static const struct rt_kernel *g_kernels[RT_KERNELS_MAX];
static unsigned int g_nb_kernels;

int rt_kernels_register(const struct rt_kernel *kernels, unsigned int count)
{
	for (unsigned int i = 0; i < count; i++) {
		const struct rt_kernel *k = &kernels[i];

		for (unsigned int j = 0; j < g_nb_kernels; j++) {
			const struct rt_kernel *o = g_kernels[j];
			if (o == k)
				goto next; /* registering the same table twice is harmless */
			if (strcmp(o->op_type, k->op_type) == 0 && strcmp(o->domain, k->domain) == 0 &&
			    o->device == k->device && (o->dtypes & k->dtypes) != 0 && o->opset_min <= k->opset_max &&
			    k->opset_min <= o->opset_max)
				return -EEXIST;
		}
		if (g_nb_kernels == RT_KERNELS_MAX)
			return -ENOSPC;
		g_kernels[g_nb_kernels++] = k;
next:;
	}
	return 0;
}

const struct rt_kernel *rt_kernel_find(const char *op_type, const char *domain, int64_t opset, uint8_t dtype,
				       enum rt_device device, char *why, size_t why_cap)
{
	bool op_known = false, opset_known = false;
	int64_t lo = INT64_MAX, hi = INT64_MIN;

	for (unsigned int i = 0; i < g_nb_kernels; i++) {
		const struct rt_kernel *k = g_kernels[i];

		if (strcmp(k->op_type, op_type) != 0 || strcmp(k->domain, domain) != 0 || k->device != device)
			continue;
		op_known = true;
		lo = k->opset_min < lo ? k->opset_min : lo;
		hi = k->opset_max > hi ? k->opset_max : hi;
		if (opset < k->opset_min || opset > k->opset_max)
			continue;
		opset_known = true;
		/* dtype 0: any; the caller only asks whether the op exists at this opset. A dtype past the
		 * mask (a hostile model's) matches nothing. */
		if (dtype == 0 || (dtype < 32 && (k->dtypes & RT_DTYPE_BIT(dtype)) != 0))
			return k;
	}
	if (!op_known)
		snprintf(why, why_cap, "op %s%s%s is not supported", domain, domain[0] != '\0' ? "." : "", op_type);
	else if (!opset_known)
		snprintf(why, why_cap, "op %s at opset %lld is not supported (opsets %lld..%lld are)", op_type,
			 (long long)opset, (long long)lo, (long long)hi);
	else
		snprintf(why, why_cap, "op %s does not support element type %s", op_type, rt_dtype_name(dtype));
	return NULL;
}
