/* SPDX-License-Identifier: BSD-3-Clause */
/* Small helpers over the IR: dtypes, element counts, attributes, value lookup. */
#include <string.h>

#include "graph.h"

int64_t rt_tensor_elems(const struct rt_tensor *t)
{
	int64_t n = 1;
	bool overflow = false, zero = false;

	for (uint8_t d = 0; d < t->rank; d++) {
		if (t->dims[d] < 0)
			return -1;
		zero |= t->dims[d] == 0;
		overflow |= __builtin_mul_overflow(n, t->dims[d], &n);
	}
	return zero ? 0 : overflow ? -1 : n;
}

size_t rt_dtype_size(uint8_t dtype)
{
	return dtype == RT_DTYPE_STRING ? 0 : bw_dtype_size(dtype);
}

const char *rt_dtype_name(uint8_t dtype)
{
	const char *name = dtype == RT_DTYPE_STRING ? "string" : bw_dtype_name(dtype);

	return name != NULL ? name : "unknown";
}

const struct rt_attr *rt_node_attr(const struct rt_node *node, const char *name)
{
	for (uint16_t i = 0; i < node->num_attrs; i++) {
		if (strcmp(node->attrs[i].name, name) == 0)
			return &node->attrs[i];
	}
	return NULL;
}

int64_t rt_attr_int(const struct rt_node *node, const char *name, int64_t dflt)
{
	const struct rt_attr *a = rt_node_attr(node, name);

	return a != NULL && a->type == RT_ATTR_INT ? a->i : dflt;
}

float rt_attr_float(const struct rt_node *node, const char *name, float dflt)
{
	const struct rt_attr *a = rt_node_attr(node, name);

	return a != NULL && a->type == RT_ATTR_FLOAT ? a->f : dflt;
}

const char *rt_attr_string(const struct rt_node *node, const char *name, const char *dflt)
{
	const struct rt_attr *a = rt_node_attr(node, name);

	return a != NULL && a->type == RT_ATTR_STRING ? a->s : dflt;
}

int32_t rt_graph_value_find(const struct rt_graph *graph, const char *name)
{
	for (uint32_t i = 0; i < graph->num_values; i++) {
		if (strcmp(graph->values[i].name, name) == 0)
			return (int32_t)i;
	}
	return -1;
}

uint64_t rt_graph_constant_bytes(const struct rt_graph *graph)
{
	uint64_t n = 0;

	for (uint32_t v = 0; v < graph->num_values; v++)
		if (graph->values[v].kind == RT_VALUE_INITIALIZER)
			n += graph->values[v].nbytes;
	return n;
}
