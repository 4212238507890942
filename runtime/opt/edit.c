/* SPDX-License-Identifier: BSD-3-Clause */
/* Graph edits the optimizer's passes share: the readers index, new initializers, fused nodes, compaction. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <batchwire/err.h>

#include "defs.h"

#define OPT_HUGE_PAGE_BYTES ((size_t)2 << 20)
#include "kernels/fused.h"

int opt_error(struct opt_ctx *c, int rc, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	rc = bw_verr(c->err, c->err_cap, rc, fmt, ap);
	va_end(ap);
	return rc;
}

/* ---- the readers index -------------------------------------------------------------------------- */

static int ensure_dead(struct opt_ctx *c)
{
	bool *d;

	if (c->dead_cap >= c->g->num_nodes + 1)
		return 0;
	d = realloc(c->dead, (c->g->num_nodes + 1) * sizeof(*d));
	if (d == NULL)
		return -ENOMEM;
	memset(d + c->dead_cap, 0, (c->g->num_nodes + 1 - c->dead_cap) * sizeof(*d));
	c->dead = d;
	c->dead_cap = c->g->num_nodes + 1;
	return 0;
}

int opt_index(struct opt_ctx *c)
{
	const struct rt_graph *g = c->g;
	uint32_t nv = g->num_values, total = 0;
	uint32_t *start = calloc((size_t)nv + 2, sizeof(*start)), *fill;
	int32_t *readers;

	if (start == NULL || ensure_dead(c) != 0) {
		free(start);
		return opt_error(c, -ENOMEM, "out of memory");
	}
	for (uint32_t n = 0; n < g->num_nodes; n++) {
		for (uint16_t j = 0; !c->dead[n] && j < g->nodes[n].num_inputs; j++) {
			int32_t v = g->nodes[n].inputs[j];

			if (v >= 0 && (uint32_t)v < nv) {
				start[v + 1]++;
				total++;
			}
		}
	}
	for (uint32_t v = 0; v < nv; v++)
		start[v + 1] += start[v];
	readers = malloc(((size_t)total + 1) * sizeof(*readers));
	fill = calloc((size_t)nv + 1, sizeof(*fill));
	if (readers == NULL || fill == NULL) {
		free(start);
		free(readers);
		free(fill);
		return opt_error(c, -ENOMEM, "out of memory");
	}
	for (uint32_t n = 0; n < g->num_nodes; n++) {
		for (uint16_t j = 0; !c->dead[n] && j < g->nodes[n].num_inputs; j++) {
			int32_t v = g->nodes[n].inputs[j];

			if (v >= 0 && (uint32_t)v < nv)
				readers[start[v] + fill[v]++] = (int32_t)n;
		}
	}
	free(fill);
	free(c->reader_start);
	free(c->readers);
	c->reader_start = start;
	c->readers = readers;
	c->indexed_values = nv;
	return 0;
}

uint32_t opt_num_readers(const struct opt_ctx *c, int32_t v)
{
	if (v < 0 || (uint32_t)v >= c->indexed_values)
		return 0;
	return c->reader_start[v + 1] - c->reader_start[v] + (c->g->values[v].is_output ? 1 : 0);
}

int32_t opt_reader(const struct opt_ctx *c, int32_t v, uint32_t k)
{
	return c->readers[c->reader_start[v] + k];
}

int32_t opt_sole_reader(const struct opt_ctx *c, int32_t v)
{
	if (v < 0 || (uint32_t)v >= c->indexed_values || c->g->values[v].is_output ||
	    c->reader_start[v + 1] - c->reader_start[v] != 1)
		return -1;
	return c->readers[c->reader_start[v]];
}

bool opt_is_op(const struct opt_ctx *c, int32_t n, const char *op)
{
	const struct rt_node *node;

	if (n < 0 || (uint32_t)n >= c->g->num_nodes || c->dead[n])
		return false;
	node = &c->g->nodes[n];
	return (node->domain[0] == '\0' || strcmp(node->domain, "ai.onnx") == 0) && strcmp(node->op_type, op) == 0;
}

bool opt_is_ours(const struct opt_ctx *c, int32_t n, const char *op)
{
	const struct rt_node *node;

	if (n < 0 || (uint32_t)n >= c->g->num_nodes || c->dead[n])
		return false;
	node = &c->g->nodes[n];
	return node->domain != NULL && strcmp(node->domain, RT_K_DOMAIN) == 0 && strcmp(node->op_type, op) == 0;
}

bool opt_is_const(const struct opt_ctx *c, int32_t v)
{
	return v >= 0 && (uint32_t)v < c->g->num_values && c->g->values[v].kind == RT_VALUE_INITIALIZER &&
	       c->g->values[v].tensor.data != NULL;
}

bool opt_const_scalar(const struct opt_ctx *c, int32_t v, float *out)
{
	const struct rt_tensor *t;

	if (!opt_is_const(c, v))
		return false;
	t = &c->g->values[v].tensor;
	if (t->dtype != BW_DTYPE_FLOAT || rt_tensor_elems(t) != 1)
		return false;
	*out = *(const float *)t->data;
	return true;
}

const struct rt_tensor *opt_shape(const struct opt_ctx *c, int32_t v)
{
	if (v < 0 || (uint32_t)v >= c->num_shapes || c->shapes[v].dtype == 0)
		return NULL;
	return &c->shapes[v];
}

/* ---- new values and nodes ---------------------------------------------------------------------------- */

/*
 * Weights the GEMMs stream on every run (a transformer layer's 7 MiB, a ResNet stage's 5-15 MiB) are
 * more pages than the TLB covers at 4 KiB; where they are large, 2 MiB-aligned and advised as huge
 * pages (the kernel's transparent huge pages are commonly "madvise" only), the page walks go.
 */
float *opt_alloc_floats(int64_t n)
{
	size_t bytes = ((size_t)(n > 0 ? n : 1) * sizeof(float) + 63) & ~(size_t)63;
	bool huge = bytes >= OPT_HUGE_PAGE_BYTES;
	float *p;

	if (huge)
		bytes = (bytes + OPT_HUGE_PAGE_BYTES - 1) & ~(size_t)(OPT_HUGE_PAGE_BYTES - 1);
	p = aligned_alloc(huge ? OPT_HUGE_PAGE_BYTES : 64, bytes);
	if (p != NULL && huge)
		(void)madvise(p, bytes, MADV_HUGEPAGE); /* advice: without it, 4 KiB pages work as well */
	if (p != NULL)
		memset(p, 0, bytes);
	return p;
}

int32_t opt_add_initializer(struct opt_ctx *c, const char *base, const char *suffix, uint8_t dtype, int rank,
			    const int64_t *dims, void *data)
{
	struct rt_graph *g = c->g;
	struct rt_value *values, *v;
	char name[256];
	int64_t elems = 1;

	snprintf(name, sizeof(name), "%s/%s", base, suffix);
	for (unsigned int k = 2; rt_graph_value_find(g, name) >= 0; k++)
		snprintf(name, sizeof(name), "%s/%s_%u", base, suffix, k);
	values = realloc(g->values, ((size_t)g->num_values + 2) * sizeof(*values));
	if (values == NULL) {
		free(data);
		return opt_error(c, -ENOMEM, "out of memory");
	}
	g->values = values;
	v = &g->values[g->num_values];
	memset(v, 0, sizeof(*v));
	v->name = strdup(name);
	if (v->name == NULL) {
		free(data);
		return opt_error(c, -ENOMEM, "out of memory");
	}
	v->kind = RT_VALUE_INITIALIZER;
	v->producer = -1;
	v->tensor.dtype = dtype;
	v->tensor.rank = (uint8_t)rank;
	for (int d = 0; d < rank; d++) {
		v->tensor.dims[d] = dims[d];
		elems *= dims[d];
	}
	v->tensor.data = data;
	v->nbytes = (size_t)elems * rt_dtype_size(dtype);
	return (int32_t)g->num_values++;
}

int32_t opt_add_value(struct opt_ctx *c, const char *base, const char *suffix)
{
	int64_t none = 0;
	int32_t v = opt_add_initializer(c, base, suffix, 0, 0, &none, NULL);

	if (v >= 0) {
		c->g->values[v].kind = RT_VALUE_INTERMEDIATE;
		c->g->values[v].nbytes = 0;
	}
	return v;
}

int opt_set_nodes(struct opt_ctx *c, struct rt_node *nodes, uint32_t count)
{
	bool *dead = calloc((size_t)count + 1, sizeof(*dead));

	if (dead == NULL)
		return opt_error(c, -ENOMEM, "out of memory");
	free(c->g->nodes);
	c->g->nodes = nodes;
	c->g->num_nodes = count;
	free(c->dead);
	c->dead = dead;
	c->dead_cap = count + 1;
	free(c->reader_start);
	free(c->readers);
	c->reader_start = NULL;
	c->readers = NULL;
	c->indexed_values = 0;
	/* the nodes moved: every value's producer is found again */
	for (uint32_t v = 0; v < c->g->num_values; v++)
		c->g->values[v].producer = -1;
	for (uint32_t n = 0; n < count; n++) {
		for (uint16_t j = 0; j < nodes[n].num_outputs; j++) {
			if (nodes[n].outputs[j] >= 0)
				c->g->values[nodes[n].outputs[j]].producer = (int32_t)n;
		}
	}
	return 0;
}

void opt_node_free(struct rt_node *n)
{
	free(n->name);
	free(n->op_type);
	free(n->domain);
	free(n->inputs);
	free(n->outputs);
	for (uint16_t k = 0; k < n->num_attrs; k++) {
		struct rt_attr *a = &n->attrs[k];

		free(a->name);
		free(a->s);
		free(a->floats);
		free(a->ints);
		for (uint32_t i = 0; a->strings != NULL && i < a->count; i++)
			free(a->strings[i]);
		free(a->strings);
		free(a->tensor.data);
	}
	free(n->attrs);
	memset(n, 0, sizeof(*n));
}

void opt_kill(struct opt_ctx *c, uint32_t n)
{
	opt_node_free(&c->g->nodes[n]);
	c->dead[n] = true;
}

/* The graph's opset import of batchwire's domain, added once. */
static int import_domain(struct opt_ctx *c)
{
	struct rt_graph *g = c->g;
	struct rt_opset *o;

	for (uint16_t i = 0; i < g->num_opsets; i++) {
		if (strcmp(g->opsets[i].domain, RT_K_DOMAIN) == 0)
			return 0;
	}
	o = realloc(g->opsets, ((size_t)g->num_opsets + 1) * sizeof(*o));
	if (o == NULL)
		return -ENOMEM;
	g->opsets = o;
	o[g->num_opsets].domain = strdup(RT_K_DOMAIN);
	if (o[g->num_opsets].domain == NULL)
		return -ENOMEM;
	o[g->num_opsets].version = RT_K_DOMAIN_OPSET;
	g->num_opsets++;
	return 0;
}

static int set_op(struct opt_ctx *c, struct rt_node *n, const char *op)
{
	char *op_type = strdup(op), *domain = strdup(RT_K_DOMAIN);

	if (op_type == NULL || domain == NULL || import_domain(c) != 0) {
		free(op_type);
		free(domain);
		return opt_error(c, -ENOMEM, "out of memory");
	}
	free(n->op_type);
	free(n->domain);
	n->op_type = op_type;
	n->domain = domain;
	n->opset = RT_K_DOMAIN_OPSET;
	n->kernel = NULL;
	return 0;
}

int opt_rename_op(struct opt_ctx *c, uint32_t n, const char *op)
{
	return set_op(c, &c->g->nodes[n], op);
}

int opt_set_domain(struct opt_ctx *c, uint32_t n)
{
	char op[64];

	snprintf(op, sizeof(op), "%s", c->g->nodes[n].op_type);
	return set_op(c, &c->g->nodes[n], op);
}

int opt_make_fused(struct opt_ctx *c, uint32_t dst, uint32_t src, const char *op, const int32_t *inputs,
		   uint16_t n_in, int32_t out)
{
	struct rt_graph *g = c->g;
	struct rt_node *d = &g->nodes[dst];
	int32_t *in = malloc(((size_t)n_in + 1) * sizeof(*in)), *outs = malloc(2 * sizeof(*outs));

	if (in == NULL || outs == NULL) {
		free(in);
		free(outs);
		return opt_error(c, -ENOMEM, "out of memory");
	}
	memcpy(in, inputs, n_in * sizeof(*in));
	outs[0] = out;
	if (src != dst) {
		opt_node_free(d);
		*d = g->nodes[src];
		memset(&g->nodes[src], 0, sizeof(g->nodes[src]));
		c->dead[src] = true;
	}
	free(d->inputs);
	free(d->outputs);
	d->inputs = in;
	d->num_inputs = n_in;
	d->outputs = outs;
	d->num_outputs = 1;
	return set_op(c, d, op);
}

/* ---- attributes ----------------------------------------------------------------------------------- */

static struct rt_attr *attr_new(struct rt_node *n, const char *name)
{
	struct rt_attr *attrs;

	opt_attr_remove(n, name);
	attrs = realloc(n->attrs, ((size_t)n->num_attrs + 1) * sizeof(*attrs));
	if (attrs == NULL)
		return NULL;
	n->attrs = attrs;
	memset(&attrs[n->num_attrs], 0, sizeof(attrs[0]));
	attrs[n->num_attrs].name = strdup(name);
	if (attrs[n->num_attrs].name == NULL)
		return NULL;
	return &attrs[n->num_attrs++];
}

int opt_attr_string(struct rt_node *n, const char *name, const char *value)
{
	struct rt_attr *a = attr_new(n, name);

	if (a == NULL)
		return -ENOMEM;
	a->type = RT_ATTR_STRING;
	a->s = strdup(value);
	return a->s != NULL ? 0 : -ENOMEM;
}

int opt_attr_floats(struct rt_node *n, const char *name, const float *values, uint32_t count)
{
	struct rt_attr *a = attr_new(n, name);

	if (a == NULL)
		return -ENOMEM;
	a->type = RT_ATTR_FLOATS;
	a->floats = malloc(((size_t)count + 1) * sizeof(float));
	if (a->floats == NULL)
		return -ENOMEM;
	memcpy(a->floats, values, count * sizeof(float));
	a->count = count;
	return 0;
}

int opt_attr_ints(struct rt_node *n, const char *name, const int64_t *values, uint32_t count)
{
	struct rt_attr *a = attr_new(n, name);

	if (a == NULL)
		return -ENOMEM;
	a->type = RT_ATTR_INTS;
	a->ints = malloc(((size_t)count + 1) * sizeof(int64_t));
	if (a->ints == NULL)
		return -ENOMEM;
	memcpy(a->ints, values, count * sizeof(int64_t));
	a->count = count;
	return 0;
}

int opt_attr_float(struct rt_node *n, const char *name, float value)
{
	struct rt_attr *a = attr_new(n, name);

	if (a == NULL)
		return -ENOMEM;
	a->type = RT_ATTR_FLOAT;
	a->f = value;
	return 0;
}

int opt_attr_int(struct rt_node *n, const char *name, int64_t value)
{
	struct rt_attr *a = attr_new(n, name);

	if (a == NULL)
		return -ENOMEM;
	a->type = RT_ATTR_INT;
	a->i = value;
	return 0;
}

void opt_attr_remove(struct rt_node *n, const char *name)
{
	for (uint16_t k = 0; k < n->num_attrs; k++) {
		struct rt_attr *a = &n->attrs[k];

		if (strcmp(a->name, name) != 0)
			continue;
		free(a->name);
		free(a->s);
		free(a->floats);
		free(a->ints);
		for (uint32_t i = 0; a->strings != NULL && i < a->count; i++)
			free(a->strings[i]);
		free(a->strings);
		free(a->tensor.data);
		memmove(a, a + 1, (size_t)(n->num_attrs - k - 1) * sizeof(*a));
		n->num_attrs--;
		return;
	}
}

/* ---- compaction ----------------------------------------------------------------------------------- */

int opt_compact(struct opt_ctx *c)
{
	struct rt_graph *g = c->g;
	uint32_t nn = 0, nv = 0;
	int32_t *map = malloc(((size_t)g->num_values + 1) * sizeof(*map));
	bool *used = calloc((size_t)g->num_values + 1, sizeof(*used));

	if (map == NULL || used == NULL || ensure_dead(c) != 0) {
		free(map);
		free(used);
		return opt_error(c, -ENOMEM, "out of memory");
	}
	for (uint32_t n = 0; n < g->num_nodes; n++) {
		if (c->dead[n])
			continue;
		g->nodes[nn] = g->nodes[n];
		c->dead[nn] = false;
		for (uint16_t j = 0; j < g->nodes[nn].num_inputs; j++) {
			if (g->nodes[nn].inputs[j] >= 0)
				used[g->nodes[nn].inputs[j]] = true;
		}
		for (uint16_t j = 0; j < g->nodes[nn].num_outputs; j++) {
			if (g->nodes[nn].outputs[j] >= 0)
				used[g->nodes[nn].outputs[j]] = true;
		}
		nn++;
	}
	for (uint32_t n = nn; n < g->num_nodes; n++) {
		memset(&g->nodes[n], 0, sizeof(g->nodes[n]));
		c->dead[n] = false;
	}
	g->num_nodes = nn;
	for (uint32_t i = 0; i < g->num_inputs; i++)
		used[g->inputs[i]] = true;
	for (uint32_t i = 0; i < g->num_outputs; i++)
		used[g->outputs[i]] = true;
	for (uint32_t v = 0; v < g->num_values; v++) {
		if (!used[v]) {
			free(g->values[v].name);
			free(g->values[v].tensor.data);
			map[v] = -1;
			continue;
		}
		map[v] = (int32_t)nv;
		g->values[nv] = g->values[v];
		g->values[nv].producer = -1;
		nv++;
	}
	g->num_values = nv;
	for (uint32_t n = 0; n < nn; n++) {
		struct rt_node *node = &g->nodes[n];

		for (uint16_t j = 0; j < node->num_inputs; j++) {
			if (node->inputs[j] >= 0)
				node->inputs[j] = map[node->inputs[j]];
		}
		for (uint16_t j = 0; j < node->num_outputs; j++) {
			if (node->outputs[j] < 0)
				continue;
			node->outputs[j] = map[node->outputs[j]];
			g->values[node->outputs[j]].producer = (int32_t)n;
		}
	}
	for (uint32_t i = 0; i < g->num_inputs; i++)
		g->inputs[i] = map[g->inputs[i]];
	for (uint32_t i = 0; i < g->num_outputs; i++)
		g->outputs[i] = map[g->outputs[i]];
	free(map);
	free(used);
	free(c->reader_start);
	free(c->readers);
	c->reader_start = NULL;
	c->readers = NULL;
	c->indexed_values = 0;
	opt_shapes_free(c);
	return 0;
}

void opt_report(struct opt_ctx *c, const char *what, uint32_t count)
{
	struct rt_opt_report *r = c->report;
	uint32_t k;

	if (r == NULL || count == 0)
		return;
	for (k = 0; k < r->num_kinds; k++) {
		if (strcmp(r->kinds[k].what, what) == 0)
			break;
	}
	if (k == r->num_kinds) {
		if (k == RT_OPT_KINDS_MAX)
			return; /* the report is for people: a rare 17th kind is left out, not an error */
		r->kinds[k].what = what;
		r->kinds[k].count = 0;
		r->num_kinds++;
	}
	r->kinds[k].count += count;
}
