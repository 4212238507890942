/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The planner: binds a graph's shapes to one batch size, resolves kernels for one device, folds
 * constant subgraphs by running them now, and lays out one arena in which no two tensors that may be
 * alive at the same time overlap.
 *
 * The arena's two layouts, and the lifetimes they read (the births and deaths set here), are
 * plan_arena.c's. Everything here runs at load time, so it allocates freely.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "defs.h"
#include "plan_arena.h"

/* Ops whose output is not a function of their inputs: never folded. */
static const char *const g_nondeterministic_ops[] = {
	"RandomNormal", "RandomNormalLike", "RandomUniform", "RandomUniformLike", "Multinomial", "Bernoulli",
};

/*
 * Ops whose output depends on their inputs' shapes only: folded once the shapes are bound, their
 * kernels then called with data NULL for inputs not known at plan time (they must read shapes only).
 */
static const char *const g_shape_only_ops[] = { "Shape", "Size" };

static bool op_in(const struct rt_node *n, const char *const *ops, size_t count)
{
	if (n->domain[0] != '\0' && strcmp(n->domain, "ai.onnx") != 0)
		return false;
	for (size_t i = 0; i < count; i++) {
		if (strcmp(n->op_type, ops[i]) == 0)
			return true;
	}
	return false;
}

void *rt_exec_zalloc(size_t nbytes)
{
	size_t len = rt_align_up(nbytes != 0 ? nbytes : 1);
	void *mem = aligned_alloc(RT_PLAN_ALIGN, len);

	if (mem != NULL)
		memset(mem, 0, len);
	return mem;
}

/* Bytes of a tensor whose shape must be concrete; why says what is wrong otherwise. */
static int tensor_nbytes(const struct rt_tensor *t, size_t *nbytes, char *why, size_t cap)
{
	size_t n = rt_dtype_size(t->dtype);

	if (n == 0)
		return bw_err(why, cap, -ENOTSUP, "element type %s cannot be computed", rt_dtype_name(t->dtype));
	if (t->rank > RT_MAX_RANK)
		return bw_err(why, cap, -EINVAL, "rank %u exceeds %u", t->rank, RT_MAX_RANK);
	for (uint8_t d = 0; d < t->rank; d++) {
		if (t->dims[d] < 0)
			return bw_err(why, cap, -ENOTSUP, "dimension %u is not known at plan time", d);
		if (__builtin_mul_overflow(n, (size_t)t->dims[d], &n) || n > RT_PLAN_TENSOR_BYTES_MAX)
			return bw_err(why, cap, -E2BIG, "shape is too large (over %zu bytes)",
				      RT_PLAN_TENSOR_BYTES_MAX);
	}
	*nbytes = n;
	return 0;
}

/* ---- graph inputs and initializers ------------------------------------------------------------ */

static int bind_input(struct rt_plan *p, uint32_t i, const struct rt_tensor *known, char *err, size_t cap)
{
	const struct rt_graph *g = p->graph;
	int32_t v = g->inputs[i];
	const struct rt_value *gv;
	struct rt_plan_value *pv;
	char why[RT_ERR_MAX];
	int rc;

	if (v < 0 || (uint32_t)v >= g->num_values)
		return bw_err(err, cap, -EINVAL, "graph input %u: value index %d out of range", i, v);
	gv = &g->values[v];
	pv = &p->values[v];
	pv->tensor = gv->tensor;
	pv->tensor.data = NULL;
	if (known != NULL && known->data != NULL) {
		if (gv->tensor.dtype != 0 && known->dtype != gv->tensor.dtype)
			return bw_err(err, cap, -EINVAL, "graph input %s: value given is %s, declared %s",
				      gv->name, rt_dtype_name(known->dtype), rt_dtype_name(gv->tensor.dtype));
		/* dtype 0: nothing declared (the loader's convention), so nothing to check */
		if (gv->tensor.dtype != 0 && known->rank != gv->tensor.rank)
			return bw_err(err, cap, -EINVAL, "graph input %s: value given has rank %u, declared %u",
				      gv->name, known->rank, gv->tensor.rank);
		for (uint8_t d = 0; gv->tensor.dtype != 0 && d < gv->tensor.rank; d++) {
			if (gv->tensor.dims[d] >= 0 && gv->tensor.dims[d] != known->dims[d])
				return bw_err(err, cap, -EINVAL,
					      "graph input %s: dimension %u of the value given is %lld, declared %lld",
					      gv->name, d, (long long)known->dims[d], (long long)gv->tensor.dims[d]);
		}
		pv->tensor = *known;
		pv->known = true;
	} else {
		if (gv->tensor.dtype == 0)
			return bw_err(err, cap, -EINVAL, "graph input %s: no type and shape declared", gv->name);
		for (uint8_t d = 0; d < pv->tensor.rank && d < RT_MAX_RANK; d++) {
			if (pv->tensor.dims[d] >= 0)
				continue;
			if (p->batch <= 0)
				return bw_err(err, cap, -EINVAL,
					      "graph input %s: dimension %u is symbolic and no batch size was given",
					      gv->name, d);
			pv->tensor.dims[d] = p->batch;
		}
	}
	rc = tensor_nbytes(&pv->tensor, &pv->nbytes, why, sizeof(why));
	if (rc != 0)
		return bw_err(err, cap, rc, "graph input %s: %s", gv->name, why);
	pv->placement = RT_PLACE_ARENA;
	pv->birth = -1;
	pv->death = -1;
	return 0;
}

static int bind_graph_inputs(struct rt_plan *p, const struct rt_tensor *known, char *err, size_t cap)
{
	const struct rt_graph *g = p->graph;

	for (uint32_t v = 0; v < g->num_values; v++) {
		const struct rt_value *gv = &g->values[v];
		struct rt_plan_value *pv = &p->values[v];

		if (gv->kind != RT_VALUE_INITIALIZER)
			continue;
		pv->tensor = gv->tensor;
		pv->nbytes = gv->nbytes;
		pv->placement = RT_PLACE_CONST;
		pv->birth = -1;
		pv->death = -1;
	}
	for (uint32_t i = 0; i < g->num_inputs; i++) {
		int rc = bind_input(p, i, known != NULL ? &known[i] : NULL, err, cap);
		if (rc != 0)
			return rc;
	}
	return 0;
}

/* ---- nodes -------------------------------------------------------------------------------------- */

/* Scratch arrays for one node's operands while planning. */
struct node_work {
	struct rt_tensor *in;
	struct rt_tensor *out;
	size_t *out_nbytes;  /* per output; omitted outputs without a shape: 0 */
	bool *out_valid;     /* an omitted output whose shape infer gave (room is made for it) */
	uint32_t cap;
};

/*
 * Runs a node now, into plan-owned memory (folding, or computing a value shape inference may need).
 * \return 0 with w->out[j].data allocated for every output with a shape, or the kernel's error.
 */
static int run_now(const struct rt_node *n, const struct rt_kernel *k, struct node_work *w, char *why, size_t cap)
{
	size_t scratch_len = 0;
	void *scratch = NULL;
	int rc = 0;

	for (uint16_t j = 0; j < n->num_outputs; j++) {
		w->out[j].data = NULL;
		if (!w->out_valid[j])
			continue;
		w->out[j].data = rt_exec_zalloc(w->out_nbytes[j]);
		if (w->out[j].data == NULL)
			rc = -ENOMEM;
	}
	if (rc == 0 && k->scratch_bytes != NULL) {
		scratch_len = k->scratch_bytes(n, w->in, w->out);
		if (scratch_len > 0 && (scratch = rt_exec_zalloc(scratch_len)) == NULL)
			rc = -ENOMEM;
	}
	if (rc == 0) {
		why[0] = '\0';
		rc = k->run(n, w->in, w->out, scratch, why, cap);
		if (rc != 0 && why[0] == '\0')
			snprintf(why, cap, "kernel failed (error %d)", rc);
	} else {
		snprintf(why, cap, "out of memory");
	}
	free(scratch);
	for (uint16_t j = 0; j < n->num_outputs; j++) {
		/* omitted outputs were only room to write into */
		if (rc != 0 || n->outputs[j] == RT_VALUE_NONE) {
			free(w->out[j].data);
			w->out[j].data = NULL;
		}
	}
	return rc;
}

static int plan_node(struct rt_plan *p, uint32_t ni, struct node_work *w, bool have_known, int32_t *step_of,
		     char *err, size_t cap)
{
	const struct rt_graph *g = p->graph;
	const struct rt_node *n = &g->nodes[ni];
	const struct rt_kernel *k;
	bool all_const = true, all_data = true, deterministic, fold;
	size_t omitted_bytes = 0;
	uint8_t dtype = 0;
	char why[RT_ERR_MAX];
	int rc;

	step_of[ni] = -1;
	for (uint16_t j = 0; j < n->num_inputs; j++) {
		int32_t v = n->inputs[j];
		const struct rt_plan_value *pv;

		memset(&w->in[j], 0, sizeof(w->in[j]));
		if (v == RT_VALUE_NONE)
			continue;
		if (v < 0 || (uint32_t)v >= g->num_values)
			return bw_err(err, cap, -EINVAL, "node %s (%s): input %u: value index %d out of range",
				      n->name, n->op_type, j, v);
		pv = &p->values[v];
		if (pv->placement == RT_PLACE_NONE)
			return bw_err(err, cap, -EINVAL, "node %s (%s): input %u (%s) is not computed before it",
				      n->name, n->op_type, j, g->values[v].name);
		w->in[j] = pv->tensor;
		if (dtype == 0)
			dtype = pv->tensor.dtype;
		if (pv->placement != RT_PLACE_CONST)
			all_const = false;
		if (pv->tensor.data == NULL && pv->nbytes > 0)
			all_data = false;
	}

	/* Folding runs on the host whatever the device: a node that folds takes the CPU kernel (a device's
	 * kernels may not run on the host at all, and need not cover the ops of constant subgraphs). */
	deterministic = !op_in(n, g_nondeterministic_ops, sizeof(g_nondeterministic_ops) / sizeof(char *));
	fold = deterministic && (all_const || op_in(n, g_shape_only_ops, sizeof(g_shape_only_ops) / sizeof(char *)));
	k = rt_kernel_find(n->op_type, n->domain, n->opset, dtype, fold ? RT_DEVICE_CPU : p->device, why, sizeof(why));
	if (k == NULL)
		return bw_err(err, cap, -ENOTSUP, "node %s (%s): %s", n->name, n->op_type, why);
	memset(w->out, 0, n->num_outputs * sizeof(w->out[0]));
	why[0] = '\0';
	rc = k->infer(n, w->in, w->out, why, sizeof(why));
	if (rc != 0)
		return bw_err(err, cap, rc < 0 ? rc : -EINVAL, "node %s (%s): %s", n->name, n->op_type,
			      why[0] != '\0' ? why : "shape inference failed");

	for (uint16_t j = 0; j < n->num_outputs; j++) {
		int32_t v = n->outputs[j];

		w->out[j].data = NULL;
		w->out_nbytes[j] = 0;
		w->out_valid[j] = false;
		if (v == RT_VALUE_NONE) {
			/* left out by the model: room in the node's scratch, should the kernel write it */
			if (w->out[j].dtype != 0 && tensor_nbytes(&w->out[j], &w->out_nbytes[j], why, sizeof(why)) == 0) {
				w->out_valid[j] = true;
				omitted_bytes += rt_align_up(w->out_nbytes[j]);
			}
			continue;
		}
		if (v < 0 || (uint32_t)v >= g->num_values)
			return bw_err(err, cap, -EINVAL, "node %s (%s): output %u: value index %d out of range",
				      n->name, n->op_type, j, v);
		if (p->values[v].placement != RT_PLACE_NONE)
			return bw_err(err, cap, -EINVAL, "node %s (%s): output %u (%s) is already defined",
				      n->name, n->op_type, j, g->values[v].name);
		rc = tensor_nbytes(&w->out[j], &w->out_nbytes[j], why, sizeof(why));
		if (rc != 0)
			return bw_err(err, cap, rc, "node %s (%s): output %u (%s): %s", n->name, n->op_type, j,
				      g->values[v].name, why);
		w->out_valid[j] = true;
	}

	if (fold && p->graph->memory_budget != 0) {
		uint64_t add = 0;

		for (uint16_t j = 0; j < n->num_outputs; j++)
			add += w->out_valid[j] ? w->out_nbytes[j] : 0;
		/* made before anything runs: a few bytes of file may ask for more than the host has */
		if (p->budget_base + p->run_now_bytes + add > p->graph->memory_budget)
			return bw_err(err, cap, -EFBIG, "node %s (%s): computing its output of %" PRIu64 " MiB while "
				      "planning would take the model past its memory budget of %" PRIu64 " MiB "
				      "(memory_budget_mb)", n->name, n->op_type, add >> 20, p->graph->memory_budget >> 20);
		p->run_now_bytes += add;
	}
	if (fold) {
		rc = run_now(n, k, w, why, sizeof(why));
		if (rc != 0)
			return bw_err(err, cap, rc, "node %s (%s): constant folding failed: %s", n->name, n->op_type,
				      why);
		for (uint16_t j = 0; j < n->num_outputs; j++) {
			struct rt_plan_value *pv;

			if (n->outputs[j] == RT_VALUE_NONE)
				continue;
			pv = &p->values[n->outputs[j]];
			pv->tensor = w->out[j];
			pv->nbytes = w->out_nbytes[j];
			pv->placement = RT_PLACE_CONST;
			pv->owned = true;
			pv->birth = (int32_t)ni;
			pv->death = (int32_t)ni;
		}
		p->num_folded++;
		return 0;
	}

	/* a step: its operands' templates now, their arena offsets once the layout is done */
	struct rt_plan_step *s = &p->steps[p->num_steps];

	s->node = n;
	s->kernel = k;
	s->node_index = ni;
	s->num_inputs = n->num_inputs;
	s->num_outputs = n->num_outputs;
	s->operands = calloc((size_t)n->num_inputs + n->num_outputs + 1, sizeof(s->operands[0]));
	if (s->operands == NULL)
		return bw_err(err, cap, -ENOMEM, "node %s (%s): out of memory", n->name, n->op_type);
	p->num_steps++;
	step_of[ni] = (int32_t)(p->num_steps - 1);
	s->scratch_bytes = k->scratch_bytes != NULL ? k->scratch_bytes(n, w->in, w->out) : 0;
	s->in_place_wanted = k->in_place != NULL && n->num_outputs > 0 ? k->in_place(n, w->in, w->out) : -1;
	s->in_place_input = -1;
	if (s->in_place_wanted >= (int32_t)n->num_inputs)
		s->in_place_wanted = -1;
	s->scratch_total = rt_align_up(s->scratch_bytes) + omitted_bytes;
	for (uint16_t j = 0; j < n->num_inputs; j++) {
		struct rt_plan_operand *o = &s->operands[j];
		int32_t v = n->inputs[j];

		o->offset = RT_PLAN_OFFSET_NONE;
		if (v == RT_VALUE_NONE)
			continue;
		o->tensor = p->values[v].tensor;
		if (p->values[v].placement == RT_PLACE_ARENA) {
			o->tensor.data = NULL;
			if (p->values[v].death < (int32_t)ni)
				p->values[v].death = (int32_t)ni;
		}
	}
	size_t omitted_at = rt_align_up(s->scratch_bytes);
	for (uint16_t j = 0; j < n->num_outputs; j++) {
		struct rt_plan_operand *o = &s->operands[n->num_inputs + j];
		struct rt_plan_value *pv;

		o->tensor = w->out[j];
		o->tensor.data = NULL;
		o->offset = RT_PLAN_OFFSET_NONE;
		if (n->outputs[j] == RT_VALUE_NONE) {
			if (w->out_valid[j]) {
				o->offset = omitted_at; /* into the step's scratch, wherever that lies */
				o->in_scratch = true;
				omitted_at += rt_align_up(w->out_nbytes[j]);
			}
			continue;
		}
		pv = &p->values[n->outputs[j]];
		pv->tensor = w->out[j];
		pv->tensor.data = NULL;
		pv->nbytes = w->out_nbytes[j];
		pv->placement = RT_PLACE_ARENA;
		pv->birth = (int32_t)ni;
		pv->death = (int32_t)ni;
	}

	/*
	 * With input values given, compute this node's outputs now too when all its inputs are known, so
	 * the shape inference of the nodes after it can read them. Failing here is not an error: the
	 * value stays unknown and the node runs (and fails, if it does) at run time.
	 */
	if (have_known && all_data && deterministic && run_now(n, k, w, why, sizeof(why)) == 0) {
		for (uint16_t j = 0; j < n->num_outputs; j++) {
			struct rt_plan_value *pv;

			if (n->outputs[j] == RT_VALUE_NONE)
				continue;
			pv = &p->values[n->outputs[j]];
			pv->tensor.data = w->out[j].data;
			pv->owned = true;
			pv->known = true;
		}
	}
	return 0;
}

/* ---- after the last node ---------------------------------------------------------------------- */

static int finish_values(struct rt_plan *p, char *err, size_t cap)
{
	const struct rt_graph *g = p->graph;
	bool *needed = calloc(g->num_values + 1, sizeof(bool));

	if (needed == NULL)
		return bw_err(err, cap, -ENOMEM, "out of memory");
	for (uint32_t i = 0; i < g->num_outputs; i++) {
		int32_t v = g->outputs[i];

		if (v < 0 || (uint32_t)v >= g->num_values || p->values[v].placement == RT_PLACE_NONE) {
			free(needed);
			return bw_err(err, cap, -EINVAL, "graph output %u (%s) is not computed by the graph", i,
				      v >= 0 && (uint32_t)v < g->num_values ? g->values[v].name : "?");
		}
		needed[v] = true;
		/* what the model declares (dtype 0: nothing) must be what was inferred; dims may differ
		 * where an exporter fixed the batch dimension */
		const struct rt_tensor *decl = &g->values[v].tensor, *got = &p->values[v].tensor;
		if (decl->dtype != 0 && (decl->dtype != got->dtype || decl->rank != got->rank)) {
			free(needed);
			return bw_err(err, cap, -EINVAL, "graph output %s: inferred %s of rank %u, declared %s of rank %u",
				      g->values[v].name, rt_dtype_name(got->dtype), got->rank, rt_dtype_name(decl->dtype),
				      decl->rank);
		}
		if (p->values[v].placement == RT_PLACE_ARENA)
			p->values[v].death = (int32_t)g->num_nodes;
	}
	for (uint32_t s = 0; s < p->num_steps; s++) {
		const struct rt_node *n = p->steps[s].node;

		for (uint16_t j = 0; j < n->num_inputs; j++) {
			if (n->inputs[j] != RT_VALUE_NONE)
				needed[n->inputs[j]] = true;
		}
	}
	for (uint32_t v = 0; v < g->num_values; v++) {
		struct rt_plan_value *pv = &p->values[v];

		if (pv->known) {
			/* a value known only while planning: the arena holds it at run time */
			if (pv->owned)
				free(pv->tensor.data);
			pv->tensor.data = NULL;
			pv->owned = false;
			pv->known = false;
		}
		if (pv->placement == RT_PLACE_CONST && pv->owned) {
			if (needed[v]) {
				p->constant_bytes += pv->nbytes;
			} else {
				/* folded into what consumed it: nothing reads it at run time */
				free(pv->tensor.data);
				pv->tensor.data = NULL;
				pv->owned = false;
				pv->placement = RT_PLACE_NONE;
			}
		}
	}
	free(needed);
	return 0;
}

/*
 * The executor's node table: who waits for whom (through arena tensors: constants order nothing at
 * run time), and which steps a graph output depends on.
 */
static int link_steps(struct rt_plan *p, const int32_t *step_of, char *err, size_t cap)
{
	const struct rt_graph *g = p->graph;
	int32_t *seen = malloc(((size_t)p->num_steps + 1) * sizeof(int32_t));

	if (seen == NULL)
		return bw_err(err, cap, -ENOMEM, "out of memory");
	/* two passes over the producer of each arena input: count, then fill (ascending by step) */
	for (int pass = 0; pass < 2; pass++) {
		for (uint32_t s = 0; s < p->num_steps; s++)
			seen[s] = -1;
		for (uint32_t s = 0; s < p->num_steps; s++) {
			struct rt_plan_step *st = &p->steps[s];

			for (uint16_t j = 0; j < st->num_inputs; j++) {
				int32_t v = st->node->inputs[j], ps;

				if (v == RT_VALUE_NONE || p->values[v].placement != RT_PLACE_ARENA ||
				    p->values[v].birth < 0)
					continue;
				ps = step_of[p->values[v].birth];
				if (ps < 0 || seen[ps] == (int32_t)s)
					continue;
				seen[ps] = (int32_t)s;
				if (pass == 0) {
					st->pending_inputs++;
					p->steps[ps].num_consumers++;
				} else {
					p->steps[ps].consumers[p->steps[ps].num_consumers++] = s;
				}
			}
		}
		if (pass == 0) {
			for (uint32_t s = 0; s < p->num_steps; s++) {
				struct rt_plan_step *st = &p->steps[s];

				st->consumers = calloc((size_t)st->num_consumers + 1, sizeof(uint32_t));
				if (st->consumers == NULL) {
					free(seen);
					return bw_err(err, cap, -ENOMEM, "out of memory");
				}
				st->num_consumers = 0;
			}
		}
	}
	free(seen);

	for (uint32_t s = p->num_steps; s-- > 0;) {
		struct rt_plan_step *st = &p->steps[s];

		for (uint16_t j = 0; j < st->num_outputs && !st->feeds_output; j++) {
			int32_t v = st->node->outputs[j];

			st->feeds_output = v != RT_VALUE_NONE && p->values[v].death == (int32_t)g->num_nodes;
		}
		for (uint32_t k = 0; k < st->num_consumers && !st->feeds_output; k++)
			st->feeds_output = p->steps[st->consumers[k]].feeds_output;
	}
	return 0;
}

/* Operand offsets, once the layout is done. */
static void bind_operands(struct rt_plan *p)
{
	for (uint32_t s = 0; s < p->num_steps; s++) {
		struct rt_plan_step *st = &p->steps[s];
		const struct rt_node *n = st->node;

		for (uint16_t j = 0; j < n->num_inputs; j++) {
			int32_t v = n->inputs[j];

			if (v != RT_VALUE_NONE && p->values[v].placement == RT_PLACE_ARENA)
				st->operands[j].offset = p->values[v].offset;
		}
		for (uint16_t j = 0; j < n->num_outputs; j++) {
			int32_t v = n->outputs[j];

			if (v != RT_VALUE_NONE)
				st->operands[n->num_inputs + j].offset = p->values[v].offset;
		}
	}
}

/* ---- the API ---------------------------------------------------------------------------------- */

struct rt_plan *rt_plan_create_layout(const struct rt_graph *g, int64_t batch, enum rt_device dev,
				      const struct rt_tensor *known, enum rt_plan_layout layout, char *err, size_t cap)
{
	struct node_work w = { 0 };
	int32_t *step_of = NULL;
	struct rt_plan *p;
	bool have_known = false;
	uint32_t max_io = 1;
	int rc = -ENOMEM;

	if (err != NULL && cap > 0)
		err[0] = '\0';
	if (g == NULL) {
		bw_err(err, cap, -EINVAL, "no graph");
		return NULL;
	}
	if (layout != RT_PLAN_LAYOUT_SEQUENTIAL && layout != RT_PLAN_LAYOUT_CONCURRENT) {
		bw_err(err, cap, -EINVAL, "unknown layout %d", (int)layout);
		return NULL;
	}
	for (uint32_t i = 0; known != NULL && i < g->num_inputs; i++)
		have_known = have_known || known[i].data != NULL;
	for (uint32_t i = 0; i < g->num_nodes; i++) {
		if (g->nodes[i].num_inputs > max_io)
			max_io = g->nodes[i].num_inputs;
		if (g->nodes[i].num_outputs > max_io)
			max_io = g->nodes[i].num_outputs;
	}
	p = calloc(1, sizeof(*p));
	if (p == NULL)
		goto nomem;
	p->graph = g;
	p->budget_base = g->memory_budget != 0 ? rt_graph_constant_bytes(g) : 0;
	p->batch = batch;
	p->device = dev;
	p->layout = layout;
	p->values = calloc((size_t)g->num_values + 1, sizeof(p->values[0]));
	p->steps = calloc((size_t)g->num_nodes + 1, sizeof(p->steps[0]));
	step_of = calloc((size_t)g->num_nodes + 1, sizeof(step_of[0]));
	w.cap = max_io;
	w.in = calloc(max_io, sizeof(w.in[0]));
	w.out = calloc(max_io, sizeof(w.out[0]));
	w.out_nbytes = calloc(max_io, sizeof(w.out_nbytes[0]));
	w.out_valid = calloc(max_io, sizeof(w.out_valid[0]));
	if (p->values == NULL || p->steps == NULL || step_of == NULL || w.in == NULL || w.out == NULL ||
	    w.out_nbytes == NULL || w.out_valid == NULL)
		goto nomem;

	rc = bind_graph_inputs(p, known, err, cap);
	for (uint32_t i = 0; rc == 0 && i < g->num_nodes; i++)
		rc = plan_node(p, i, &w, have_known, step_of, err, cap);
	if (rc == 0)
		rc = finish_values(p, err, cap);
	if (rc == 0)
		rc = link_steps(p, step_of, err, cap);
	if (rc == 0)
		rc = layout_arena(p, step_of, err, cap);
	if (rc == 0)
		bind_operands(p);
	goto out;
nomem:
	bw_err(err, cap, -ENOMEM, "out of memory");
out:
	free(step_of);
	free(w.in);
	free(w.out);
	free(w.out_nbytes);
	free(w.out_valid);
	if (rc != 0) {
		rt_plan_free(p);
		return NULL;
	}
	return p;
}

struct rt_plan *rt_plan_create_known(const struct rt_graph *g, int64_t batch, enum rt_device dev,
				     const struct rt_tensor *known, char *err, size_t cap)
{
	return rt_plan_create_layout(g, batch, dev, known, RT_PLAN_LAYOUT_SEQUENTIAL, err, cap);
}

struct rt_plan *rt_plan_create(const struct rt_graph *g, int64_t batch, enum rt_device dev, char *err,
			       size_t cap)
{
	return rt_plan_create_layout(g, batch, dev, NULL, RT_PLAN_LAYOUT_SEQUENTIAL, err, cap);
}

enum rt_plan_layout rt_plan_get_layout(const struct rt_plan *p)
{
	return p->layout;
}

size_t rt_plan_worker_scratch_bytes(const struct rt_plan *p)
{
	return p->worker_scratch_bytes;
}

void rt_plan_free(struct rt_plan *p)
{
	if (p == NULL)
		return;
	for (uint32_t v = 0; p->values != NULL && v < p->graph->num_values; v++) {
		if (p->values[v].owned)
			free(p->values[v].tensor.data);
	}
	for (uint32_t s = 0; p->steps != NULL && s < p->num_steps; s++) {
		free(p->steps[s].operands);
		free(p->steps[s].consumers);
	}
	free(p->values);
	free(p->steps);
	free(p);
}

size_t rt_plan_arena_bytes(const struct rt_plan *p)
{
	return p->arena_bytes;
}

uint32_t rt_plan_num_inputs(const struct rt_plan *p)
{
	return p->graph->num_inputs;
}

uint32_t rt_plan_num_outputs(const struct rt_plan *p)
{
	return p->graph->num_outputs;
}

static void bind_value(const struct rt_plan *p, int32_t v, uint8_t *arena, struct rt_tensor *t)
{
	const struct rt_plan_value *pv = &p->values[v];

	*t = pv->tensor;
	if (pv->placement == RT_PLACE_ARENA)
		t->data = arena + pv->offset;
}

void rt_plan_bind(const struct rt_plan *p, void *arena, struct rt_tensor *inputs, struct rt_tensor *outputs)
{
	const struct rt_graph *g = p->graph;

	for (uint32_t i = 0; inputs != NULL && i < g->num_inputs; i++)
		bind_value(p, g->inputs[i], arena, &inputs[i]);
	for (uint32_t i = 0; outputs != NULL && i < g->num_outputs; i++)
		bind_value(p, g->outputs[i], arena, &outputs[i]);
}

int rt_plan_value_info(const struct rt_plan *p, int32_t value, struct rt_plan_value_info *info)
{
	const struct rt_plan_value *pv;

	if (value < 0 || (uint32_t)value >= p->graph->num_values)
		return -EINVAL;
	pv = &p->values[value];
	*info = (struct rt_plan_value_info){
		.placement = pv->placement, .tensor = pv->tensor, .nbytes = pv->nbytes,
		.offset = pv->placement == RT_PLACE_ARENA ? pv->offset : 0, .birth = pv->birth, .death = pv->death,
	};
	return 0;
}

uint32_t rt_plan_num_steps(const struct rt_plan *p)
{
	return p->num_steps;
}

int rt_plan_step_info(const struct rt_plan *p, uint32_t step, struct rt_plan_step_info *info)
{
	const struct rt_plan_step *s;

	if (step >= p->num_steps)
		return -EINVAL;
	s = &p->steps[step];
	*info = (struct rt_plan_step_info){
		.node = s->node_index,
		.kernel = s->kernel,
		.scratch_offset = s->scratch_total != 0 && p->layout == RT_PLAN_LAYOUT_SEQUENTIAL ? s->scratch_offset : 0,
		.scratch_bytes = s->scratch_total, .pending_inputs = s->pending_inputs,
		.num_consumers = s->num_consumers, .consumers = s->consumers, .in_place_input = s->in_place_input,
	};
	return 0;
}

void rt_plan_stats(const struct rt_plan *p, struct rt_plan_stats *stats)
{
	*stats = (struct rt_plan_stats){
		.arena_bytes = p->arena_bytes, .descriptor_bytes = p->descriptor_bytes,
		.tensor_bytes = p->tensor_bytes, .tensor_bytes_sum = p->tensor_bytes_sum,
		.constant_bytes = p->constant_bytes, .worker_scratch_bytes = p->worker_scratch_bytes,
		.steps = p->num_steps, .folded = p->num_folded, .in_place = p->num_in_place,
	};
}
