/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The region of NHWC bf16 tensors (precision bf16): fuse_conv.c turned each conv it could into a
 * FusedConvNhwc but left it reading and writing the graph's NCHW float values. Here every such
 * node's output becomes an NHWC bf16 twin of that value, and its X and residual Z read the twins:
 * a twin made by another FusedConvNhwc is read as it is; any other value is converted once, by a
 * ToNhwcBf16 placed before its first NHWC reader. Where the original value is still wanted (a graph
 * output, or a reader outside the region: ResNet-50's GlobalAveragePool), a FromNhwcBf16 right after
 * the conv makes it again. A 2-D MaxPool reading the region's output joins it (MaxPoolNhwcBf16).
 * ResNet-50 gets one conversion in (the image, 3 channels) and one out (before GlobalAveragePool).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "defs.h"
#include "kernels/fused.h"

/* A node of batchwire's domain: op reading in, writing out, named after value named. */
static int conversion_node(struct opt_ctx *c, const char *op, int32_t in, int32_t out, const char *named,
			   const char *suffix, struct rt_node *n)
{
	char name[256];

	snprintf(name, sizeof(name), "%s/%s", named, suffix);
	*n = (struct rt_node){ .name = strdup(name), .op_type = strdup(op), .domain = strdup(RT_K_DOMAIN),
			       .opset = RT_K_DOMAIN_OPSET, .num_inputs = 1, .num_outputs = 1,
			       .inputs = malloc(sizeof(int32_t)), .outputs = malloc(sizeof(int32_t)) };
	if (n->name == NULL || n->op_type == NULL || n->domain == NULL || n->inputs == NULL || n->outputs == NULL) {
		opt_node_free(n);
		return opt_error(c, -ENOMEM, "out of memory");
	}
	n->inputs[0] = in;
	n->outputs[0] = out;
	return 0;
}

/* Whether v is wanted as it is: a graph output, or read by a node outside the region or, inside it,
 * other than as a conv's X or Z. */
static bool wanted_outside(const struct opt_ctx *c, const bool *nhwc, int32_t v)
{
	uint32_t readers = opt_num_readers(c, v), listed = 0;

	for (uint32_t k = 0; k < readers; k++) {
		int32_t r = opt_reader(c, v, k);
		const struct rt_node *n;

		if (r < 0)
			break;
		listed++;
		n = &c->g->nodes[r];
		if (!nhwc[r])
			return true;
		for (uint16_t j = 0; j < n->num_inputs; j++) {
			if (n->inputs[j] == v && j != 0 && j != 3)
				return true;
		}
	}
	return listed < readers || c->g->values[v].is_output;
}

int opt_nhwc_region(struct opt_ctx *c)
{
	struct rt_graph *g = c->g;
	uint32_t n_nodes = g->num_nodes, n_values = g->num_values, convs = 0, pools = 0, emitted = 0, to = 0, from = 0;
	bool *nhwc = calloc((size_t)n_nodes + 1, sizeof(*nhwc)), *back = calloc((size_t)n_nodes + 1, sizeof(*back));
	int32_t *twin = malloc(((size_t)n_values + 1) * sizeof(*twin));
	struct rt_node *out = NULL;
	bool *made = NULL; /* per slot of out: a conversion this pass made */
	int rc = 0;

	if (nhwc == NULL || back == NULL || twin == NULL) {
		rc = opt_error(c, -ENOMEM, "out of memory");
		goto done;
	}
	/* the region: the convs, and the 2-D MaxPools (fastpath.c's) reading a conv's or a pool's output */
	for (uint32_t n = 0; n < n_nodes; n++) {
		const struct rt_node *node = &g->nodes[n];
		int32_t from;

		nhwc[n] = opt_is_ours(c, (int32_t)n, "FusedConvNhwc");
		convs += nhwc[n];
		if (opt_is_ours(c, (int32_t)n, "MaxPool") && node->num_inputs == 1 && node->inputs[0] >= 0 &&
		    (from = g->values[node->inputs[0]].producer) >= 0 && nhwc[from]) {
			nhwc[n] = true;
			pools++;
		}
	}
	if (convs == 0)
		goto done;
	if ((rc = opt_index(c)) < 0)
		goto done;
	for (uint32_t n = 0; n < n_nodes; n++)
		back[n] = nhwc[n] && wanted_outside(c, nhwc, g->nodes[n].outputs[0]);
	for (uint32_t v = 0; v < n_values; v++)
		twin[v] = -1;
	/* at most one conversion in per input slot and one out per conv */
	out = calloc((size_t)n_nodes + 3 * convs, sizeof(*out));
	made = calloc((size_t)n_nodes + 3 * convs, sizeof(*made));
	if (out == NULL || made == NULL) {
		rc = opt_error(c, -ENOMEM, "out of memory");
		goto done;
	}
	for (uint32_t n = 0; n < n_nodes && rc == 0; n++) {
		struct rt_node *node = &g->nodes[n];
		int32_t y;

		if (c->dead[n])
			continue; /* opt_kill emptied it */
		if (!nhwc[n]) {
			out[emitted++] = *node;
			continue;
		}
		for (uint16_t j = 0; j < node->num_inputs && rc == 0; j++) {
			int32_t v = node->inputs[j];

			if ((j != 0 && j != 3) || v < 0)
				continue; /* a conv's W and B; a pool has only X */
			if (twin[v] < 0) {
				int32_t t = opt_add_value(c, g->values[v].name, "nhwc");

				if (t < 0 || (rc = conversion_node(c, "ToNhwcBf16", v, t, g->values[v].name, "to_nhwc",
								    &out[emitted])) < 0) {
					rc = t < 0 ? t : rc;
					break;
				}
				made[emitted++] = true;
				to++;
				twin[v] = t;
			}
			node->inputs[j] = twin[v];
		}
		if (rc < 0)
			break;
		if (opt_is_ours(c, (int32_t)n, "MaxPool") && (rc = opt_rename_op(c, n, "MaxPoolNhwcBf16")) < 0)
			break;
		y = node->outputs[0];
		if ((twin[y] = opt_add_value(c, g->values[y].name, "nhwc")) < 0) {
			rc = twin[y];
			break;
		}
		node->outputs[0] = twin[y];
		out[emitted++] = *node;
		if (back[n]) {
			if ((rc = conversion_node(c, "FromNhwcBf16", twin[y], y, g->values[y].name, "from_nhwc",
						  &out[emitted])) < 0)
				break;
			made[emitted++] = true;
			from++;
		}
	}
	if (rc < 0) {
		/* the graph is unusable after a failure (graph.h); only the conversions are this pass's to free */
		for (uint32_t k = 0; k < emitted; k++) {
			if (made[k])
				opt_node_free(&out[k]);
		}
		goto done;
	}
	if ((rc = opt_set_nodes(c, out, emitted)) < 0)
		goto done;
	out = NULL;
	opt_report(c, "Conv on NHWC bf16 tensors", convs);
	opt_report(c, "MaxPool on NHWC bf16 tensors", pools);
	opt_report(c, "NCHW <-> NHWC conversions", to + from);
done:
	free(out);
	free(made);
	free(nhwc);
	free(back);
	free(twin);
	return rc;
}
