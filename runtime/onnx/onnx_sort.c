/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Graph-wide checks of the loader: the protobuf nesting bound (before protobuf-c sees the bytes),
 * the topological order of the nodes (Kahn's algorithm; a cycle is an error naming a node on it),
 * and that every node's op has a kernel at its opset.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "onnx_defs.h"
#include "onnx_load.h"

/* ---- protobuf nesting ---------------------------------------------------------------------------- */

static int read_varint(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
	*v = 0;
	for (unsigned int shift = 0; shift < 64; shift += 7) {
		if (*p == end)
			return -EINVAL;
		*v |= (uint64_t)(**p & 0x7f) << shift;
		if ((*(*p)++ & 0x80) == 0)
			return 0;
	}
	return -EINVAL;
}

/* \return 0, -EINVAL when the framing is broken, -E2BIG when messages nest too deep. */
static int nesting_walk(const uint8_t *p, const uint8_t *end, const ProtobufCMessageDescriptor *desc,
			unsigned int depth)
{
	if (depth > RT_ONNX_NESTING_MAX)
		return -E2BIG;
	while (p < end) {
		const ProtobufCFieldDescriptor *f;
		uint64_t tag, len;
		int rc;

		if (read_varint(&p, end, &tag) != 0 || (tag >> 3) == 0 || (tag >> 3) > UINT32_MAX)
			return -EINVAL;
		switch (tag & 7) {
		case 0: /* varint */
			if (read_varint(&p, end, &len) != 0)
				return -EINVAL;
			break;
		case 1: /* 64-bit */
			if (end - p < 8)
				return -EINVAL;
			p += 8;
			break;
		case 5: /* 32-bit */
			if (end - p < 4)
				return -EINVAL;
			p += 4;
			break;
		case 2: /* length-delimited: a submessage when the descriptor says so */
			if (read_varint(&p, end, &len) != 0 || len > (uint64_t)(end - p))
				return -EINVAL;
			f = protobuf_c_message_descriptor_get_field(desc, (unsigned int)(tag >> 3));
			if (f != NULL && f->type == PROTOBUF_C_TYPE_MESSAGE) {
				rc = nesting_walk(p, p + len, f->descriptor, depth + 1);
				if (rc != 0)
					return rc;
			}
			p += len;
			break;
		default: /* groups: protobuf-c refuses them too */
			return -EINVAL;
		}
	}
	return 0;
}

int onnx_check_nesting(struct onnx_ctx *c, const uint8_t *buf, size_t len)
{
	int rc = len > 0 ? nesting_walk(buf, buf + len, &onnx__model_proto__descriptor, 1) : 0;

	if (rc == -E2BIG)
		return onnx_fail(c, "model: protobuf messages nest deeper than %d levels", RT_ONNX_NESTING_MAX);
	if (rc != 0)
		return onnx_fail(c, "model: not a valid ONNX protobuf (truncated or corrupt)");
	return 0;
}

/* ---- topological order --------------------------------------------------------------------------- */

/* A binary min-heap of node indices: among ready nodes the earliest in the file goes first, so a
 * file already in order keeps its order. */
struct ready_heap {
	uint32_t *v;
	uint32_t n;
};

static void heap_push(struct ready_heap *h, uint32_t x)
{
	uint32_t i = h->n++;

	for (; i > 0 && h->v[(i - 1) / 2] > x; i = (i - 1) / 2)
		h->v[i] = h->v[(i - 1) / 2];
	h->v[i] = x;
}

static uint32_t heap_pop(struct ready_heap *h)
{
	uint32_t top = h->v[0], x = h->v[--h->n], i = 0;

	for (;;) {
		uint32_t child = 2 * i + 1;
		if (child >= h->n)
			break;
		if (child + 1 < h->n && h->v[child + 1] < h->v[child])
			child++;
		if (h->v[child] >= x)
			break;
		h->v[i] = h->v[child];
		i = child;
	}
	if (h->n > 0)
		h->v[i] = x;
	return top;
}

/* Every node left unsorted waits for another one left unsorted; walking back num_nodes steps from any
 * of them ends on a cycle. */
static uint32_t node_on_cycle(const struct rt_graph *g, const uint32_t *pending)
{
	uint32_t cur = 0;

	while (pending[cur] == 0)
		cur++;
	for (uint32_t step = 0; step < g->num_nodes; step++) {
		const struct rt_node *n = &g->nodes[cur];

		for (uint16_t k = 0; k < n->num_inputs; k++) {
			int32_t v = n->inputs[k];
			if (v != RT_VALUE_NONE && g->values[v].producer >= 0 && pending[g->values[v].producer] > 0) {
				cur = (uint32_t)g->values[v].producer;
				break;
			}
		}
	}
	return cur;
}

int onnx_sort_nodes(struct onnx_ctx *c)
{
	struct rt_graph *g = c->g;
	uint32_t nn = g->num_nodes, nv = g->num_values, done = 0;
	uint32_t *pending = calloc(nn + 1, sizeof(*pending));   /* producers not yet placed, per node */
	uint32_t *order = malloc((nn + 1) * sizeof(*order));
	size_t *first = calloc(nv + 2, sizeof(*first));          /* consumers of value v: edges[first[v]..] */
	struct ready_heap heap = {.v = malloc((nn + 1) * sizeof(*heap.v))};
	struct rt_node *sorted = NULL;
	uint32_t *edges = NULL;
	size_t nedges = 0;
	int rc = 0;

	if (pending == NULL || order == NULL || first == NULL || heap.v == NULL)
		goto nomem;
	for (uint32_t i = 0; i < nn; i++) {
		for (uint16_t k = 0; k < g->nodes[i].num_inputs; k++) {
			int32_t v = g->nodes[i].inputs[k];
			if (v != RT_VALUE_NONE && g->values[v].producer >= 0) {
				pending[i]++;
				first[v + 2]++;
				nedges++;
			}
		}
	}
	for (uint32_t v = 0; v < nv; v++)
		first[v + 2] += first[v + 1];
	edges = malloc((nedges + 1) * sizeof(*edges));
	if (edges == NULL)
		goto nomem;
	for (uint32_t i = 0; i < nn; i++) {
		for (uint16_t k = 0; k < g->nodes[i].num_inputs; k++) {
			int32_t v = g->nodes[i].inputs[k];
			if (v != RT_VALUE_NONE && g->values[v].producer >= 0)
				edges[first[v + 1]++] = i;
		}
	}
	/* first[v] .. first[v + 1] now spans value v's consumers */

	for (uint32_t i = 0; i < nn; i++) {
		if (pending[i] == 0)
			heap_push(&heap, i);
	}
	while (heap.n > 0) {
		uint32_t i = heap_pop(&heap);

		order[done++] = i;
		for (uint16_t k = 0; k < g->nodes[i].num_outputs; k++) {
			int32_t v = g->nodes[i].outputs[k];
			if (v == RT_VALUE_NONE)
				continue;
			for (size_t e = first[v]; e < first[v + 1]; e++) {
				if (--pending[edges[e]] == 0)
					heap_push(&heap, edges[e]);
			}
		}
	}
	if (done < nn) {
		const struct rt_node *n = &g->nodes[node_on_cycle(g, pending)];
		rc = onnx_fail(c, "graph: cycle through node " Q " (%.64s)", n->name, n->op_type);
		goto out;
	}

	sorted = malloc((nn + 1) * sizeof(*sorted));
	if (sorted == NULL)
		goto nomem;
	for (uint32_t k = 0; k < nn; k++) {
		sorted[k] = g->nodes[order[k]];
		pending[order[k]] = k; /* reused: file index -> sorted index */
	}
	for (uint32_t v = 0; v < nv; v++) {
		if (g->values[v].producer >= 0)
			g->values[v].producer = (int32_t)pending[g->values[v].producer];
	}
	free(g->nodes);
	g->nodes = sorted;
	goto out;
nomem:
	rc = onnx_fail_errno(c, -ENOMEM, "model: out of memory");
out:
	free(pending);
	free(order);
	free(first);
	free(heap.v);
	free(edges);
	return rc;
}

/* ---- kernels ------------------------------------------------------------------------------------- */

int rt_graph_check_kernels(const struct rt_graph *g, enum rt_device dev, char *err, size_t err_cap)
{
	struct onnx_ctx c = {.err = err, .err_cap = err_cap};
	char why[RT_ERR_MAX];

	for (uint32_t i = 0; i < g->num_nodes; i++) {
		const struct rt_node *n = &g->nodes[i];

		if (rt_kernel_find(n->op_type, n->domain, n->opset, 0, dev, why, sizeof(why)) == NULL)
			return onnx_fail_errno(&c, -ENOTSUP, "node " Q " (%.64s): %s", n->name, n->op_type, why);
	}
	return 0;
}
