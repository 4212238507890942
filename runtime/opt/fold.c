/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Constants and shapes for the passes. Folding turns every node whose inputs are all initializers
 * (Constant nodes, a Transpose of a weight, the scalars of an exported GELU) into initializers, so the
 * fusions see constant weights and scalars where exporters wrote nodes; the planner would fold them
 * per batch size anyway, but only after the fusions had been decided. Shapes come from a plan of the
 * graph at OPT_SHAPE_BATCH: the planner's shape inference, not a second one.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "defs.h"
#include "exec/plan.h"

/* Ops whose output is not a function of their inputs (the planner's list). */
static const char *const g_random_ops[] = {
	"RandomNormal", "RandomNormalLike", "RandomUniform", "RandomUniformLike", "Multinomial", "Bernoulli",
};

#define FOLD_IO_MAX 16

static bool foldable(const struct opt_ctx *c, const struct rt_node *n)
{
	const struct rt_graph *g = c->g;

	if (n->num_inputs > FOLD_IO_MAX || n->num_outputs > FOLD_IO_MAX)
		return false;
	if (n->domain[0] != '\0' && strcmp(n->domain, "ai.onnx") != 0)
		return false;
	for (size_t i = 0; i < sizeof(g_random_ops) / sizeof(g_random_ops[0]); i++) {
		if (strcmp(n->op_type, g_random_ops[i]) == 0)
			return false;
	}
	for (uint16_t j = 0; j < n->num_inputs; j++) {
		if (n->inputs[j] != RT_VALUE_NONE && !opt_is_const(c, n->inputs[j]))
			return false;
	}
	for (uint16_t j = 0; j < n->num_outputs; j++) {
		/* a graph output stays the output of a node: an initializer output is a special case
		 * every consumer of the graph would have to know */
		if (n->outputs[j] != RT_VALUE_NONE && g->values[n->outputs[j]].is_output)
			return false;
	}
	return true;
}

/* Runs node n on its constant inputs; its outputs become initializers. \return 1 folded, 0 not, <0. */
static int fold_node(struct opt_ctx *c, uint32_t ni)
{
	struct rt_graph *g = c->g;
	const struct rt_node *n = &g->nodes[ni];
	struct rt_tensor in[FOLD_IO_MAX], out[FOLD_IO_MAX];
	const struct rt_kernel *k;
	uint8_t dtype = 0;
	void *scratch = NULL;
	char why[RT_ERR_MAX];
	uint64_t added = 0;
	int rc = 0;

	memset(in, 0, sizeof(in));
	memset(out, 0, sizeof(out));
	for (uint16_t j = 0; j < n->num_inputs; j++) {
		if (n->inputs[j] == RT_VALUE_NONE)
			continue;
		in[j] = g->values[n->inputs[j]].tensor;
		dtype = dtype != 0 ? dtype : in[j].dtype;
	}
	/* constants are computed here, on the host, whatever device runs the rest */
	k = rt_kernel_find(n->op_type, n->domain, n->opset, dtype, RT_DEVICE_CPU, why, sizeof(why));
	if (k == NULL || k->infer(n, in, out, why, sizeof(why)) != 0)
		return 0; /* the planner will say what is wrong, naming the node */
	for (uint16_t j = 0; j < n->num_outputs; j++) {
		int64_t elems = rt_tensor_elems(&out[j]);
		size_t bytes;

		/* too large to make here: left to run time, where the planner and the budget judge it */
		if (elems < 0 || rt_dtype_size(out[j].dtype) == 0 ||
		    __builtin_mul_overflow((size_t)elems, rt_dtype_size(out[j].dtype), &bytes) ||
		    bytes > c->fold_cap)
			goto fail;
		added += bytes;
		if (g->memory_budget != 0 && c->constant_bytes + added > g->memory_budget) {
			rc = -EFBIG;
			snprintf(c->err, c->err_cap, "node %s: folding its output of %zu bytes would take the model's "
				 "constants to %" PRIu64 " MiB, above its memory budget of %" PRIu64 " MiB (memory_budget_mb)",
				 n->name != NULL ? n->name : "?", bytes, (c->constant_bytes + added) >> 20,
				 g->memory_budget >> 20);
			goto fail;
		}
		out[j].data = calloc(bytes + 64, 1);
		if (out[j].data == NULL) {
			rc = -ENOMEM;
			goto fail;
		}
	}
	if (k->scratch_bytes != NULL) {
		size_t bytes = k->scratch_bytes(n, in, out);

		if (bytes > 0 && (scratch = aligned_alloc(64, (bytes + 63) & ~(size_t)63)) == NULL) {
			rc = -ENOMEM;
			goto fail;
		}
	}
	if (k->run(n, in, out, scratch, why, sizeof(why)) != 0)
		goto fail;
	free(scratch);
	c->constant_bytes += added;
	for (uint16_t j = 0; j < n->num_outputs; j++) {
		struct rt_value *v;

		if (n->outputs[j] == RT_VALUE_NONE) {
			free(out[j].data);
			continue;
		}
		v = &g->values[n->outputs[j]];
		v->kind = RT_VALUE_INITIALIZER;
		v->tensor = out[j];
		v->nbytes = (size_t)rt_tensor_elems(&out[j]) * rt_dtype_size(out[j].dtype);
		v->producer = -1;
	}
	opt_kill(c, ni);
	return 1;
fail:
	free(scratch);
	for (uint16_t j = 0; j < n->num_outputs; j++)
		free(out[j].data);
	if (rc == -EFBIG)
		return rc; /* c->err says why */
	return rc < 0 ? opt_error(c, rc, "out of memory") : 0;
}

int opt_fold_constants(struct opt_ctx *c)
{
	uint32_t folded = 0;
	int rc = opt_index(c);

	/* a folded output as large as twice the file's largest constant (a Transpose or Cast of a
	 * weight), or RT_FOLD_BYTES_MAX, is made here; a larger one could only come from a few bytes
	 * asking for a lot (ConstantOfShape, Expand, Tile) */
	c->fold_cap = RT_FOLD_BYTES_MAX;
	for (uint32_t v = 0; v < c->g->num_values; v++)
		if (c->g->values[v].kind == RT_VALUE_INITIALIZER && 2 * (uint64_t)c->g->values[v].nbytes > c->fold_cap)
			c->fold_cap = 2 * (uint64_t)c->g->values[v].nbytes;

	for (uint32_t n = 0; rc == 0 && n < c->g->num_nodes; n++) {
		if (c->dead[n] || !foldable(c, &c->g->nodes[n]))
			continue;
		rc = fold_node(c, n);
		folded += rc > 0;
		rc = rc > 0 ? 0 : rc;
	}
	opt_report(c, "constants folded", folded);
	return rc;
}

void opt_shapes_free(struct opt_ctx *c)
{
	free(c->shapes);
	c->shapes = NULL;
	c->num_shapes = 0;
}

int opt_shapes(struct opt_ctx *c)
{
	struct rt_plan *p;
	char why[RT_ERR_MAX];

	opt_shapes_free(c);
	c->shapes_distinct = true;
	/* on the CPU whatever the device: shapes are the same on every device, and before the rewrites
	 * the graph may hold nodes only the CPU runs (a BatchNormalization the GPU gets folded) */
	p = rt_plan_create(c->g, OPT_SHAPE_BATCH, RT_DEVICE_CPU, why, sizeof(why));
	if (p == NULL) {
		/* a model made for batch 1 only (a Reshape to [1, -1]...): its shapes at 1 still say ranks
		 * and dtypes, but a batch dim cannot be told from a broadcast one there */
		c->shapes_distinct = false;
		p = rt_plan_create(c->g, 1, RT_DEVICE_CPU, why, sizeof(why));
	}
	if (p == NULL)
		return 0;
	c->shapes = calloc((size_t)c->g->num_values + 1, sizeof(*c->shapes));
	if (c->shapes == NULL) {
		rt_plan_free(p);
		return opt_error(c, -ENOMEM, "out of memory");
	}
	for (uint32_t v = 0; v < c->g->num_values; v++) {
		struct rt_plan_value_info info;

		if (rt_plan_value_info(p, (int32_t)v, &info) == 0) {
			c->shapes[v] = info.tensor;
			c->shapes[v].data = NULL;
		}
	}
	c->num_shapes = c->g->num_values;
	rt_plan_free(p);
	return 0;
}
