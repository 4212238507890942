/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * ONNX model file -> rt_graph. protobuf-c (code generated at build time from Debian's onnx.proto)
 * decodes the bytes; everything here validates what it decoded and copies it into memory the graph
 * owns, so no protobuf-c struct outlives the load. The file may be hostile (the loader is fuzzed):
 * every count, size and index is checked before use, and each failure is one line naming the node
 * or tensor and the field at fault.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <batchwire/err.h>

#include "onnx_defs.h"
#include "onnx_load.h"

/* A value index must fit int32_t and the name map's capacity (twice the values) a uint32_t. */
#define ONNX_VALUES_MAX (UINT32_C(1) << 28)

/* ---- errors -------------------------------------------------------------------------------------- */

static int vfail(struct onnx_ctx *c, int err, const char *fmt, va_list ap)
{
	bw_verr(c->err, c->err_cap, err, fmt, ap);
	if (c->err != NULL && c->err_cap > 0) {
		/* names come from the file: keep the message one printable line */
		for (char *p = c->err; *p != '\0'; p++) {
			if ((unsigned char)*p < 0x20 || *p == 0x7f)
				*p = '?';
		}
	}
	return err;
}

int onnx_fail(struct onnx_ctx *c, const char *fmt, ...)
{
	va_list ap;
	int rc;

	va_start(ap, fmt);
	rc = vfail(c, -EINVAL, fmt, ap);
	va_end(ap);
	return rc;
}

int onnx_fail_errno(struct onnx_ctx *c, int err, const char *fmt, ...)
{
	va_list ap;
	int rc;

	va_start(ap, fmt);
	rc = vfail(c, err, fmt, ap);
	va_end(ap);
	return rc;
}

static int fail_nomem(struct onnx_ctx *c)
{
	return onnx_fail_errno(c, -ENOMEM, "model: out of memory");
}

/* ---- value names --------------------------------------------------------------------------------- */

static uint32_t name_hash(const char *s)
{
	uint32_t h = 2166136261u; /* FNV-1a */

	for (; *s != '\0'; s++)
		h = (h ^ (uint8_t)*s) * 16777619u;
	return h;
}

static int map_init(struct onnx_ctx *c, size_t max_values)
{
	size_t cap = 16;

	while (cap < 2 * max_values)
		cap <<= 1;
	c->map = malloc(cap * sizeof(*c->map));
	if (c->map == NULL)
		return fail_nomem(c);
	memset(c->map, 0xff, cap * sizeof(*c->map)); /* -1: empty */
	c->map_cap = (uint32_t)cap;
	return 0;
}

static int32_t map_find(const struct onnx_ctx *c, const char *name)
{
	uint32_t mask = c->map_cap - 1;

	for (uint32_t i = name_hash(name) & mask;; i = (i + 1) & mask) {
		int32_t idx = c->map[i];
		if (idx < 0 || strcmp(c->g->values[idx].name, name) == 0)
			return idx;
	}
}

/* Adds a value that map_find does not know; the map is never more than half full. */
static int32_t value_add(struct onnx_ctx *c, const char *name, enum rt_value_kind kind)
{
	struct rt_graph *g = c->g;
	struct rt_value *v = &g->values[g->num_values];
	uint32_t mask = c->map_cap - 1, i;

	v->name = strdup(name);
	if (v->name == NULL)
		return fail_nomem(c);
	v->kind = kind;
	v->producer = -1;
	for (i = name_hash(name) & mask; c->map[i] >= 0; i = (i + 1) & mask)
		;
	c->map[i] = (int32_t)g->num_values;
	return (int32_t)g->num_values++;
}

/* ---- model header -------------------------------------------------------------------------------- */

static int64_t opset_of(const struct rt_graph *g, const char *domain)
{
	for (uint16_t i = 0; i < g->num_opsets; i++) {
		if (strcmp(g->opsets[i].domain, domain) == 0)
			return g->opsets[i].version;
	}
	return 0;
}

/* "ai.onnx" is another name of the default domain. */
static const char *domain_norm(const char *domain)
{
	return domain == NULL || strcmp(domain, "ai.onnx") == 0 ? "" : domain;
}

static int load_header(struct onnx_ctx *c, const Onnx__ModelProto *m)
{
	struct rt_graph *g = c->g;

	if (!m->has_ir_version)
		return onnx_fail(c, "model: no ir_version");
	if (m->ir_version > RT_ONNX_IR_VERSION_MAX)
		return onnx_fail(c, "model: ir_version %lld is newer than supported (<= %d)", (long long)m->ir_version,
				 RT_ONNX_IR_VERSION_MAX);
	if (m->ir_version < RT_ONNX_IR_VERSION_MIN)
		return onnx_fail(c, "model: ir_version %lld is older than supported (>= %d)", (long long)m->ir_version,
				 RT_ONNX_IR_VERSION_MIN);
	g->ir_version = m->ir_version;

	if (m->n_opset_import > UINT16_MAX)
		return onnx_fail(c, "model: %zu opset_import entries, more than %u", m->n_opset_import, UINT16_MAX);
	g->opsets = calloc(m->n_opset_import + 1, sizeof(*g->opsets));
	if (g->opsets == NULL)
		return fail_nomem(c);
	for (size_t i = 0; i < m->n_opset_import; i++) {
		const Onnx__OperatorSetIdProto *op = m->opset_import[i];
		const char *domain = domain_norm(op->domain);

		if (!op->has_version || op->version < 1)
			return onnx_fail(c, "model: opset_import of domain " Q " has no valid version", domain);
		if (opset_of(g, domain) != 0)
			return onnx_fail(c, "model: opset_import lists domain " Q " twice", domain);
		if (domain[0] == '\0' && op->version > RT_ONNX_OPSET_MAX)
			return onnx_fail(c, "model: opset %lld of the default domain is newer than supported (<= %d)",
					 (long long)op->version, RT_ONNX_OPSET_MAX);
		g->opsets[g->num_opsets].domain = strdup(domain);
		if (g->opsets[g->num_opsets].domain == NULL)
			return fail_nomem(c);
		g->opsets[g->num_opsets++].version = op->version;
	}
	if (opset_of(g, "") == 0)
		return onnx_fail(c, "model: no opset_import for the default ONNX domain");
	return 0;
}

/* ---- initializers and graph inputs --------------------------------------------------------------- */

static int load_initializers(struct onnx_ctx *c, const Onnx__GraphProto *gp)
{
	char what[RT_ERR_MAX];

	if (gp->n_sparse_initializer > 0)
		return onnx_fail(c, "graph: sparse initializers are not supported");
	for (size_t i = 0; i < gp->n_initializer; i++) {
		const Onnx__TensorProto *tp = gp->initializer[i];
		const char *name = onnx_str(tp->name);
		struct rt_value *v;
		int32_t idx;
		int rc;

		if (name[0] == '\0')
			return onnx_fail(c, "initializer %zu has no name", i);
		if (map_find(c, name) >= 0)
			return onnx_fail(c, "initializer " Q " is listed twice", name);
		idx = value_add(c, name, RT_VALUE_INITIALIZER);
		if (idx < 0)
			return idx;
		v = &c->g->values[idx];
		snprintf(what, sizeof(what), "initializer " Q, name);
		rc = onnx_tensor_decode(c, tp, what, &v->tensor, &v->nbytes);
		if (rc != 0)
			return rc;
	}
	return 0;
}

/* Why a graph input's type gives no tensor shape (onnx_type_read returned 0). */
static const char *type_gap(const Onnx__TypeProto *tp)
{
	if (tp == NULL)
		return "no type";
	switch (tp->value_case) {
	case ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE:
		if (tp->tensor_type == NULL || !tp->tensor_type->has_elem_type || tp->tensor_type->elem_type == 0)
			return "no element type";
		return "a tensor without a shape (the runtime needs its rank)";
	case ONNX__TYPE_PROTO__VALUE_SEQUENCE_TYPE:
		return "a sequence; only tensors are supported";
	case ONNX__TYPE_PROTO__VALUE_MAP_TYPE:
		return "a map; only tensors are supported";
	case ONNX__TYPE_PROTO__VALUE_OPTIONAL_TYPE:
		return "an optional; only tensors are supported";
	case ONNX__TYPE_PROTO__VALUE_SPARSE_TENSOR_TYPE:
		return "a sparse tensor; only dense tensors are supported";
	default:
		return "no type";
	}
}

static int load_inputs(struct onnx_ctx *c, const Onnx__GraphProto *gp)
{
	struct rt_graph *g = c->g;
	char what[RT_ERR_MAX];

	g->inputs = calloc(gp->n_input + 1, sizeof(*g->inputs));
	if (g->inputs == NULL)
		return fail_nomem(c);
	for (size_t i = 0; i < gp->n_input; i++) {
		const Onnx__ValueInfoProto *vi = gp->input[i];
		const char *name = onnx_str(vi->name);
		int32_t idx = name[0] != '\0' ? map_find(c, name) : -1;
		int rc;

		if (name[0] == '\0')
			return onnx_fail(c, "graph input %zu has no name", i);
		snprintf(what, sizeof(what), "graph input " Q, name);
		if (idx >= 0 && g->values[idx].kind == RT_VALUE_INITIALIZER) {
			/* an initializer that a caller may override: we treat it as a constant */
			struct rt_tensor declared = {0};
			uint8_t have = g->values[idx].tensor.dtype;

			rc = onnx_type_read(c, vi->type, what, &declared);
			if (rc < 0)
				return rc;
			if (rc > 0 && declared.dtype != have)
				return onnx_fail(c, "%s: declared %s, its initializer is %s", what,
						 rt_dtype_name(declared.dtype), rt_dtype_name(have));
			continue;
		}
		if (idx >= 0)
			return onnx_fail(c, "%s is listed twice", what);
		idx = value_add(c, name, RT_VALUE_INPUT);
		if (idx < 0)
			return idx;
		rc = onnx_type_read(c, vi->type, what, &g->values[idx].tensor);
		if (rc < 0)
			return rc;
		if (rc == 0)
			return onnx_fail(c, "%s: %s", what, type_gap(vi->type));
		g->inputs[g->num_inputs++] = idx;
	}
	return 0;
}

/* ---- nodes --------------------------------------------------------------------------------------- */

static int copy_node_header(struct onnx_ctx *c, const Onnx__NodeProto *np, size_t index, struct rt_node *n)
{
	const char *op = onnx_str(np->op_type);
	const char *domain = domain_norm(np->domain);

	if (op[0] == '\0')
		return onnx_fail(c, "node %zu " Q ": no op_type", index, onnx_str(np->name));
	n->op_type = strdup(op);
	n->domain = strdup(domain);
	if (np->name != NULL && np->name[0] != '\0')
		n->name = strdup(np->name);
	else if (asprintf(&n->name, "%s_%zu", op, index) < 0)
		n->name = NULL;
	if (n->op_type == NULL || n->domain == NULL || n->name == NULL)
		return fail_nomem(c);
	n->opset = opset_of(c->g, domain);
	if (n->opset == 0)
		return onnx_fail(c, "node " Q " (%.64s): domain " Q " is not in the model's opset_import", n->name, op,
				 domain);
	if (np->n_input > UINT16_MAX || np->n_output > UINT16_MAX || np->n_attribute > UINT16_MAX)
		return onnx_fail(c, "node " Q " (%.64s): more than %u inputs, outputs or attributes", n->name, op,
				 UINT16_MAX);
	/* every op has an output, and every kernel writes its first (an optional one may be named "") */
	if (np->n_output == 0)
		return onnx_fail(c, "node " Q " (%.64s): no outputs", n->name, op);
	return 0;
}

/* First pass over a node: its outputs become values, each produced once. */
static int load_node_outputs(struct onnx_ctx *c, const Onnx__NodeProto *np, uint32_t index)
{
	struct rt_graph *g = c->g;
	struct rt_node *n = &g->nodes[index];

	n->outputs = malloc((np->n_output + 1) * sizeof(*n->outputs));
	if (n->outputs == NULL)
		return fail_nomem(c);
	for (size_t k = 0; k < np->n_output; k++) {
		const char *name = onnx_str(np->output[k]);
		int32_t idx;

		n->outputs[n->num_outputs++] = RT_VALUE_NONE;
		if (name[0] == '\0')
			continue; /* an optional output left out */
		idx = map_find(c, name);
		if (idx >= 0) {
			const struct rt_value *v = &g->values[idx];
			if (v->producer >= 0)
				return onnx_fail(c, "value " Q " is produced by both node " Q " (%.64s) and node " Q " (%.64s)",
						 name, g->nodes[v->producer].name, g->nodes[v->producer].op_type, n->name,
						 n->op_type);
			return onnx_fail(c, "node " Q " (%.64s): output " Q " is also %s", n->name, n->op_type, name,
					 v->kind == RT_VALUE_INPUT ? "a graph input" : "an initializer");
		}
		idx = value_add(c, name, RT_VALUE_INTERMEDIATE);
		if (idx < 0)
			return idx;
		g->values[idx].producer = (int32_t)index;
		n->outputs[n->num_outputs - 1] = idx;
	}
	return 0;
}

static int copy_strings(struct onnx_ctx *c, struct rt_attr *a, const ProtobufCBinaryData *src, size_t count)
{
	a->strings = calloc(count + 1, sizeof(*a->strings));
	if (a->strings == NULL)
		return fail_nomem(c);
	for (size_t i = 0; i < count; i++) {
		a->strings[i] = strndup(src[i].len > 0 ? (const char *)src[i].data : "", src[i].len);
		if (a->strings[i] == NULL)
			return fail_nomem(c);
		a->count++; /* rt_graph_free frees what was copied */
	}
	return 0;
}

static int load_attr(struct onnx_ctx *c, struct rt_node *n, const Onnx__AttributeProto *ap, size_t index)
{
	struct rt_attr *a = &n->attrs[n->num_attrs];
	const char *name = onnx_str(ap->name);
	char what[RT_ERR_MAX];

	if (name[0] == '\0')
		return onnx_fail(c, "node " Q " (%.64s): attribute %zu has no name", n->name, n->op_type, index);
	if (rt_node_attr(n, name) != NULL)
		return onnx_fail(c, "node " Q " (%.64s): attribute " Q " is given twice", n->name, n->op_type, name);
	a->name = strdup(name);
	if (a->name == NULL)
		return fail_nomem(c);
	n->num_attrs++;
	snprintf(what, sizeof(what), "node " Q " (%.64s): attribute " Q, n->name, n->op_type, name);
	if (ap->ref_attr_name != NULL && ap->ref_attr_name[0] != '\0')
		return onnx_fail(c, "%s refers to a function attribute, which only a function body may do", what);
	if (!ap->has_type)
		return onnx_fail(c, "%s has no type", what);
	switch (ap->type) {
	case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT:
		a->f = ap->f;
		break;
	case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INT:
		a->i = ap->i;
		break;
	case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING:
		a->s = strndup(ap->s.len > 0 ? (const char *)ap->s.data : "", ap->s.len);
		if (a->s == NULL)
			return fail_nomem(c);
		break;
	case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__TENSOR: {
		size_t nbytes;

		if (ap->t == NULL)
			return onnx_fail(c, "%s: type TENSOR but no tensor", what);
		int rc = onnx_tensor_decode(c, ap->t, what, &a->tensor, &nbytes);
		if (rc != 0)
			return rc;
		break;
	}
	case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPH:
	case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__GRAPHS:
		return onnx_fail(c, "node " Q " (%.64s): subgraph attributes are not supported (attribute " Q ")", n->name,
				 n->op_type, name);
	case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS:
		if (ap->n_floats > UINT32_MAX)
			return onnx_fail(c, "%s: too many floats", what);
		a->floats = malloc((ap->n_floats + 1) * sizeof(*a->floats));
		if (a->floats == NULL)
			return fail_nomem(c);
		if (ap->n_floats > 0)
			memcpy(a->floats, ap->floats, ap->n_floats * sizeof(*a->floats));
		a->count = (uint32_t)ap->n_floats;
		break;
	case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS:
		if (ap->n_ints > UINT32_MAX)
			return onnx_fail(c, "%s: too many ints", what);
		a->ints = malloc((ap->n_ints + 1) * sizeof(*a->ints));
		if (a->ints == NULL)
			return fail_nomem(c);
		if (ap->n_ints > 0)
			memcpy(a->ints, ap->ints, ap->n_ints * sizeof(*a->ints));
		a->count = (uint32_t)ap->n_ints;
		break;
	case ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRINGS:
		if (ap->n_strings > UINT32_MAX)
			return onnx_fail(c, "%s: too many strings", what);
		if (copy_strings(c, a, ap->strings, ap->n_strings) != 0)
			return -ENOMEM;
		break;
	default: /* SPARSE_TENSOR(S), TENSORS, TYPE_PROTO(S), UNDEFINED, or a number from nowhere */
		return onnx_fail(c, "%s has type %d, which is not supported", what, (int)ap->type);
	}
	a->type = (enum rt_attr_type)ap->type;
	return 0;
}

/* Second pass over a node: its inputs resolve to values, its attributes are copied. */
static int load_node_rest(struct onnx_ctx *c, const Onnx__NodeProto *np, uint32_t index)
{
	struct rt_node *n = &c->g->nodes[index];
	int rc;

	n->inputs = malloc((np->n_input + 1) * sizeof(*n->inputs));
	n->attrs = calloc(np->n_attribute + 1, sizeof(*n->attrs));
	if (n->inputs == NULL || n->attrs == NULL)
		return fail_nomem(c);
	for (size_t k = 0; k < np->n_input; k++) {
		const char *name = onnx_str(np->input[k]);
		int32_t idx = name[0] != '\0' ? map_find(c, name) : RT_VALUE_NONE;

		if (name[0] != '\0' && idx < 0)
			return onnx_fail(c,
					 "node " Q " (%.64s): input " Q
					 " is neither a graph input, an initializer nor a node output",
					 n->name, n->op_type, name);
		n->inputs[n->num_inputs++] = idx;
	}
	for (size_t k = 0; k < np->n_attribute; k++) {
		rc = load_attr(c, n, np->attribute[k], k);
		if (rc != 0)
			return rc;
	}
	return 0;
}

static int load_nodes(struct onnx_ctx *c, const Onnx__GraphProto *gp)
{
	struct rt_graph *g = c->g;
	int rc;

	g->nodes = calloc(gp->n_node + 1, sizeof(*g->nodes));
	if (g->nodes == NULL)
		return fail_nomem(c);
	for (uint32_t i = 0; i < gp->n_node; i++) {
		g->num_nodes = i + 1; /* so rt_graph_free sees what was filled */
		rc = copy_node_header(c, gp->node[i], i, &g->nodes[i]);
		if (rc == 0)
			rc = load_node_outputs(c, gp->node[i], i);
		if (rc != 0)
			return rc;
	}
	for (uint32_t i = 0; i < gp->n_node; i++) {
		rc = load_node_rest(c, gp->node[i], i);
		if (rc != 0)
			return rc;
	}
	return 0;
}

/* ---- declared types and graph outputs ------------------------------------------------------------ */

/* value_info and graph outputs give what a node produces; a declaration without a shape is skipped. */
static int declare(struct onnx_ctx *c, const Onnx__ValueInfoProto *vi, int32_t idx, const char *what)
{
	struct rt_value *v = &c->g->values[idx];
	struct rt_tensor t = {0};
	int rc;

	if (v->kind != RT_VALUE_INTERMEDIATE)
		return 0; /* inputs and initializers have their own */
	rc = onnx_type_read(c, vi->type, what, &t);
	if (rc > 0)
		v->tensor = t;
	return rc < 0 ? rc : 0;
}

static int load_declarations(struct onnx_ctx *c, const Onnx__GraphProto *gp)
{
	struct rt_graph *g = c->g;
	char what[RT_ERR_MAX];
	int rc;

	for (size_t i = 0; i < gp->n_value_info; i++) {
		const char *name = onnx_str(gp->value_info[i]->name);
		int32_t idx = map_find(c, name);

		if (idx < 0)
			continue; /* names no value of this graph: nothing to declare */
		snprintf(what, sizeof(what), "value_info " Q, name);
		rc = declare(c, gp->value_info[i], idx, what);
		if (rc != 0)
			return rc;
	}

	if (gp->n_output == 0)
		return onnx_fail(c, "graph: no outputs");
	g->outputs = calloc(gp->n_output, sizeof(*g->outputs));
	if (g->outputs == NULL)
		return fail_nomem(c);
	for (size_t i = 0; i < gp->n_output; i++) {
		const char *name = onnx_str(gp->output[i]->name);
		int32_t idx = name[0] != '\0' ? map_find(c, name) : -1;

		if (name[0] == '\0')
			return onnx_fail(c, "graph output %zu has no name", i);
		snprintf(what, sizeof(what), "graph output " Q, name);
		if (idx < 0)
			return onnx_fail(c, "%s is not produced by any node, nor a graph input or an initializer", what);
		if (g->values[idx].is_output)
			return onnx_fail(c, "%s is listed twice", what);
		rc = declare(c, gp->output[i], idx, what);
		if (rc != 0)
			return rc;
		g->values[idx].is_output = true;
		g->outputs[g->num_outputs++] = idx;
	}
	return 0;
}

/* ---- the whole model ----------------------------------------------------------------------------- */

static int load_model(struct onnx_ctx *c, const Onnx__ModelProto *m)
{
	const Onnx__GraphProto *gp = m->graph;
	size_t max_values;
	int rc;

	rc = load_header(c, m);
	if (rc != 0)
		return rc;
	if (gp == NULL)
		return onnx_fail(c, "model: no graph");
	c->g->name = strdup(onnx_str(gp->name));
	if (c->g->name == NULL)
		return fail_nomem(c);

	if (gp->n_node >= ONNX_VALUES_MAX)
		return onnx_fail(c, "graph: %zu nodes, more than %u", gp->n_node, ONNX_VALUES_MAX - 1);
	max_values = gp->n_input + gp->n_initializer;
	for (size_t i = 0; i < gp->n_node && max_values < ONNX_VALUES_MAX; i++)
		max_values += gp->node[i]->n_output;
	if (max_values >= ONNX_VALUES_MAX)
		return onnx_fail(c, "graph: more than %u values", ONNX_VALUES_MAX - 1);
	c->g->values = calloc(max_values + 1, sizeof(*c->g->values));
	if (c->g->values == NULL)
		return fail_nomem(c);
	rc = map_init(c, max_values);
	if (rc == 0)
		rc = load_initializers(c, gp);
	if (rc == 0)
		rc = load_inputs(c, gp);
	if (rc == 0)
		rc = load_nodes(c, gp);
	if (rc == 0)
		rc = load_declarations(c, gp);
	if (rc == 0)
		rc = onnx_sort_nodes(c);
	return rc;
}

struct rt_graph *rt_graph_load_buffer(const void *buf, size_t len, const char *dir, char *err, size_t err_cap)
{
	struct onnx_ctx c = {.err = err, .err_cap = err_cap, .dir = dir};
	Onnx__ModelProto *m;
	int rc;

	if (err != NULL && err_cap > 0)
		err[0] = '\0';
	if (buf == NULL && len > 0) {
		onnx_fail(&c, "model: no bytes");
		return NULL;
	}
	if ((uint64_t)len > (uint64_t)RT_ONNX_FILE_BYTES_MAX) {
		onnx_fail(&c, "model: %zu bytes, more than protobuf's 2 GiB limit", len);
		return NULL;
	}
	if (onnx_check_nesting(&c, buf, len) != 0)
		return NULL;
	m = onnx__model_proto__unpack(NULL, len, buf);
	if (m == NULL) {
		onnx_fail(&c, "model: not a valid ONNX protobuf (truncated or corrupt)");
		return NULL;
	}
	c.g = calloc(1, sizeof(*c.g));
	rc = c.g != NULL ? load_model(&c, m) : fail_nomem(&c);
	onnx__model_proto__free_unpacked(m, NULL);
	free(c.map);
	free(c.dir_real);
	/*
	 * Every node's op must exist at its opset. The check always runs, so an empty registry (kernels
	 * not registered yet) refuses every model: the registry cannot say whether it is empty, and a
	 * graph that loads but cannot run would only fail later, further from the cause.
	 */
	if (rc == 0)
		rc = rt_graph_check_kernels(c.g, RT_DEVICE_CPU, err, err_cap);
	if (rc != 0) {
		rt_graph_free(c.g);
		return NULL;
	}
	return c.g;
}

struct rt_graph *rt_graph_load(const char *path, char *err, size_t err_cap)
{
	struct onnx_ctx c = {.err = err, .err_cap = err_cap};
	struct rt_graph *g = NULL;
	uint8_t *buf = NULL;
	char *dir = NULL, *slash;
	struct stat st;
	size_t done = 0;
	int fd;

	if (err != NULL && err_cap > 0)
		err[0] = '\0';
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		onnx_fail(&c, "model: cannot open '%s': %s", path, strerror(errno));
		return NULL;
	}
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		onnx_fail(&c, "model: '%s' is not a regular file", path);
		goto out;
	}
	if (st.st_size > RT_ONNX_FILE_BYTES_MAX) {
		onnx_fail(&c, "model: '%s' is %lld bytes, more than protobuf's 2 GiB limit", path,
			  (long long)st.st_size);
		goto out;
	}
	buf = malloc((size_t)st.st_size + 1);
	dir = strdup(path);
	if (buf == NULL || dir == NULL) {
		fail_nomem(&c);
		goto out;
	}
	while (done < (size_t)st.st_size) {
		ssize_t n = read(fd, buf + done, (size_t)st.st_size - done);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			onnx_fail(&c, "model: reading '%s': %s", path, n < 0 ? strerror(errno) : "file shrank");
			goto out;
		}
		done += (size_t)n;
	}
	/* external data paths are relative to the model's directory */
	slash = strrchr(dir, '/');
	if (slash == NULL)
		strcpy(dir, ".");
	else
		slash[slash == dir ? 1 : 0] = '\0';
	g = rt_graph_load_buffer(buf, done, dir, err, err_cap);
out:
	close(fd);
	free(buf);
	free(dir);
	return g;
}

/* ---- freeing ------------------------------------------------------------------------------------- */

static void attr_free(struct rt_attr *a)
{
	free(a->name);
	free(a->s);
	free(a->floats);
	free(a->ints);
	if (a->strings != NULL) {
		for (uint32_t i = 0; i < a->count; i++)
			free(a->strings[i]);
		free(a->strings);
	}
	free(a->tensor.data);
}

void rt_graph_free(struct rt_graph *g)
{
	if (g == NULL)
		return;
	for (uint32_t i = 0; g->nodes != NULL && i < g->num_nodes; i++) {
		struct rt_node *n = &g->nodes[i];

		free(n->name);
		free(n->op_type);
		free(n->domain);
		free(n->inputs);
		free(n->outputs);
		for (uint16_t k = 0; n->attrs != NULL && k < n->num_attrs; k++)
			attr_free(&n->attrs[k]);
		free(n->attrs);
	}
	free(g->nodes);
	for (uint32_t i = 0; g->values != NULL && i < g->num_values; i++) {
		free(g->values[i].name);
		free(g->values[i].tensor.data);
	}
	free(g->values);
	for (uint16_t i = 0; g->opsets != NULL && i < g->num_opsets; i++)
		free(g->opsets[i].domain);
	free(g->opsets);
	free(g->inputs);
	free(g->outputs);
	free(g->name);
	free(g);
}
