/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Softmax over the last axis, LayerNormalization (output 0 only) and 2-D MaxPool, float, moved to
 * batchwire's fast kernels (runtime/kernels/fastpath.c). Whether a node qualifies is asked of the fast
 * kernel itself: its infer runs on the node's inferred input shapes and must accept them and give
 * the same output shape; otherwise the node is left as it was. Softmax also needs its axis to be the
 * last one (opset 13's -1 default, or an explicit last axis; before 13 the input is coerced to 2-D
 * at the axis, which is the same computation only for the last axis).
 */
#include <errno.h>
#include <string.h>

#include "defs.h"
#include "kernels/fused.h"

#define FAST_IO_MAX 8

static bool softmax_last_axis(const struct opt_ctx *c, const struct rt_node *n)
{
	const struct rt_tensor *x = opt_shape(c, n->inputs[0]);
	int64_t axis = rt_attr_int(n, "axis", n->opset >= 13 ? -1 : 1);

	if (x == NULL || x->rank < 1)
		return false;
	return axis == -1 || axis == x->rank - 1;
}

/* Whether batchwire's kernel for n's op takes n with its inferred shapes. */
static bool fast_kernel_takes(struct opt_ctx *c, uint32_t ni)
{
	const struct rt_graph *g = c->g;
	struct rt_node *n = &g->nodes[ni];
	struct rt_tensor in[FAST_IO_MAX], out[FAST_IO_MAX];
	const struct rt_kernel *k;
	char why[RT_ERR_MAX];

	if (n->num_inputs > FAST_IO_MAX || n->num_outputs > FAST_IO_MAX || n->num_inputs < 1)
		return false;
	memset(in, 0, sizeof(in));
	memset(out, 0, sizeof(out));
	for (uint16_t j = 0; j < n->num_inputs; j++) {
		const struct rt_tensor *s;

		if (n->inputs[j] == RT_VALUE_NONE)
			continue;
		if ((s = opt_shape(c, n->inputs[j])) == NULL)
			return false;
		in[j] = *s;
		if (opt_is_const(c, n->inputs[j]))
			in[j].data = g->values[n->inputs[j]].tensor.data;
	}
	k = rt_kernel_find(n->op_type, RT_K_DOMAIN, RT_K_DOMAIN_OPSET, in[0].dtype, c->dev, why, sizeof(why));
	if (k == NULL || k->infer(n, in, out, why, sizeof(why)) != 0)
		return false;
	for (uint16_t j = 0; j < n->num_outputs; j++) {
		const struct rt_tensor *s = n->outputs[j] != RT_VALUE_NONE ? opt_shape(c, n->outputs[j]) : NULL;

		if (n->outputs[j] == RT_VALUE_NONE)
			continue;
		if (s == NULL || s->rank != out[j].rank || s->dtype != out[j].dtype ||
		    memcmp(s->dims, out[j].dims, s->rank * sizeof(int64_t)) != 0)
			return false;
	}
	return true;
}

int opt_fast_paths(struct opt_ctx *c)
{
	static const char *const ops[] = { "Softmax", "LayerNormalization", "MaxPool" };
	static const char *const what[] = { "Softmax (last axis, vectorized)", "LayerNormalization (vectorized)",
					    "MaxPool (2-D rows)" };
	uint32_t count[3] = { 0 };
	int rc = 0;

	if (c->shapes == NULL)
		return 0;
	for (uint32_t n = 0; rc == 0 && n < c->g->num_nodes; n++) {
		for (unsigned int i = 0; i < 3; i++) {
			if (!opt_is_op(c, (int32_t)n, ops[i]))
				continue;
			if (i == 0 && !softmax_last_axis(c, &c->g->nodes[n]))
				break;
			if (!fast_kernel_takes(c, n))
				break;
			rc = opt_set_domain(c, n);
			count[i]++;
			break;
		}
	}
	for (unsigned int i = 0; i < 3; i++)
		opt_report(c, what[i], count[i]);
	return rc;
}
