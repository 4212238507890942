/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Compiling a graph into a device program (host.h): for each allowed batch size, the runtime plans
 * the graph for RT_DEVICE_GPU (shapes bound, constants folded on the host, one arena laid out in
 * sequential order, which is the order a stream runs ops in), then each remaining step is lowered to
 * device ops by its GPU kernel's lowering function (lower.c). Constants the ops read (initializers,
 * folded values) are gathered into one blob, each once.
 *
 * Two passes then rewrite each size's ops: GPU_LAYOUT_NHWC (compile_nhwc.c), then GPU_PRECISION_FP16
 * (compile_fp16.c). The builder they share with this file is compile_defs.h's.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compile_defs.h"
#include "exec/plan.h"
#include "lower.h"

#define OPS_INITIAL 64
#define CONSTS_INITIAL (1u << 20)

static int grow(void **p, uint32_t *cap, uint32_t need, size_t elem)
{
	uint32_t n = *cap == 0 ? OPS_INITIAL : *cap;
	void *q;

	if (need <= *cap)
		return 0;
	while (n < need)
		n *= 2;
	q = realloc(*p, (size_t)n * elem);
	if (q == NULL)
		return -ENOMEM;
	*p = q;
	*cap = n;
	return 0;
}

int gpu_lower_emit(struct builder *b, const struct gpu_op *op)
{
	uint32_t cap = b->cap_ops;

	if (grow((void **)&b->ops, &cap, b->nb_ops + 1, sizeof(*b->ops)) < 0)
		return -ENOMEM;
	if (cap != b->cap_ops) {
		uint32_t *q = realloc(b->op_node, (size_t)cap * sizeof(*q));

		if (q == NULL)
			return -ENOMEM;
		b->op_node = q;
		b->cap_ops = cap;
	}
	b->ops[b->nb_ops] = *op;
	b->op_node[b->nb_ops] = b->node;
	b->nb_ops++;
	return 0;
}

static uint64_t prog_align(uint64_t n)
{
	return (n + GPU_PROG_ALIGN - 1) & ~(uint64_t)(GPU_PROG_ALIGN - 1);
}

uint64_t gpu_lower_arena_area(struct builder *b, uint64_t bytes)
{
	uint64_t off = prog_align(b->arena_bytes);

	b->arena_bytes = off + bytes;
	return off;
}

/* The constant's offset in the blob, adding it the first time it is seen. */
static int const_ref(struct builder *b, const void *data, size_t nbytes, uint64_t *offset)
{
	uint64_t off;

	for (uint32_t i = 0; i < b->nb_entries; i++)
		if (b->entries[i].data == data) {
			*offset = b->entries[i].offset;
			return 0;
		}
	off = prog_align(b->const_bytes);
	if (off + nbytes > b->const_cap) {
		uint64_t n = b->const_cap == 0 ? CONSTS_INITIAL : b->const_cap;
		uint8_t *q;

		while (n < off + nbytes)
			n *= 2;
		q = realloc(b->consts, n);
		if (q == NULL)
			return -ENOMEM;
		memset(q + b->const_cap, 0, n - b->const_cap);
		b->consts = q;
		b->const_cap = n;
	}
	if (grow((void **)&b->entries, &b->cap_entries, b->nb_entries + 1, sizeof(*b->entries)) < 0)
		return -ENOMEM;
	if (nbytes > 0)
		memcpy(b->consts + off, data, nbytes);
	b->const_bytes = off + nbytes;
	b->entries[b->nb_entries++] = (struct const_entry){ .data = data, .offset = off, .nbytes = nbytes };
	*offset = off;
	return 0;
}

/* A node operand as the lowering functions see it: the bound tensor and where it lies. */
static int operand_of(struct builder *b, const struct rt_plan *p, int32_t value, struct gpu_lower_operand *o,
		      char *err, size_t cap)
{
	struct rt_plan_value_info info;
	int rc;

	memset(o, 0, sizeof(*o));
	if (value == RT_VALUE_NONE)
		return 0;
	rc = rt_plan_value_info(p, value, &info);
	if (rc < 0) {
		snprintf(err, cap, "value %d: not in the plan", value);
		return rc;
	}
	o->present = true;
	o->tensor = info.tensor;
	o->nbytes = info.nbytes;
	o->ref.dtype = info.tensor.dtype;
	switch (info.placement) {
	case RT_PLACE_ARENA:
		o->ref.space = GPU_SPACE_ARENA;
		o->ref.offset = info.offset;
		o->tensor.data = NULL;
		return 0;
	case RT_PLACE_CONST:
		o->ref.space = GPU_SPACE_CONST;
		o->host_data = info.tensor.data;
		return const_ref(b, info.tensor.data, info.nbytes, &o->ref.offset);
	default:
		snprintf(err, cap, "value %d is not computed", value);
		return -EINVAL;
	}
}

static int lower_step(struct builder *b, const struct rt_plan *p, uint32_t step, char *err, size_t cap)
{
	struct gpu_lower_operand in[RT_LOWER_OPERANDS_MAX], out[RT_LOWER_OPERANDS_MAX];
	struct rt_plan_step_info si;
	const struct rt_graph *g = b->c->graph;
	const struct rt_node *n;
	const struct gpu_lowering *low;
	char why[RT_ERR_MAX];
	int rc;

	rc = rt_plan_step_info(p, step, &si);
	if (rc < 0)
		return rc;
	n = &g->nodes[si.node];
	b->node = si.node;
	if (n->num_inputs > RT_LOWER_OPERANDS_MAX || n->num_outputs > RT_LOWER_OPERANDS_MAX) {
		snprintf(err, cap, "node %s (%s): %u inputs and %u outputs: more than the GPU lowers", n->name,
			 n->op_type, n->num_inputs, n->num_outputs);
		return -ENOTSUP;
	}
	why[0] = '\0';
	memset(in, 0, sizeof(in)); /* operands past the node's count read as left out */
	memset(out, 0, sizeof(out));
	for (uint16_t j = 0; j < n->num_inputs && rc == 0; j++)
		rc = operand_of(b, p, n->inputs[j], &in[j], why, sizeof(why));
	for (uint16_t j = 0; j < n->num_outputs && rc == 0; j++)
		rc = operand_of(b, p, n->outputs[j], &out[j], why, sizeof(why));
	if (rc == 0) {
		/* the GPU kernel the planner resolved for the step: its device_impl is the lowering */
		low = si.kernel != NULL ? si.kernel->device_impl : NULL;
		if (low == NULL) {
			snprintf(why, sizeof(why), "kernel without a GPU lowering");
			rc = -ENOTSUP;
		} else
			rc = low->lower(b, n, in, out, why, sizeof(why));
	}
	if (rc < 0)
		snprintf(err, cap, "node %s (%s) at batch %u: %s", n->name, n->op_type,
			 b->c->prog.sizes[b->size_idx].batch, why[0] != '\0' ? why : "cannot run on the GPU");
	return rc;
}

/*
 * A graph output's bytes must be in the arena for the scatter kernel: an output that is a constant
 * (or a graph input passed through) is copied into an area the compiler adds.
 */
static int place_output(struct builder *b, const struct rt_plan *p, int32_t value, uint64_t *offset,
			size_t *nbytes, char *err, size_t cap)
{
	struct gpu_lower_operand o;
	struct gpu_op op;
	int rc = operand_of(b, p, value, &o, err, cap);

	if (rc < 0)
		return rc;
	*nbytes = o.nbytes;
	if (o.ref.space == GPU_SPACE_ARENA) {
		*offset = o.ref.offset;
		return 0;
	}
	memset(&op, 0, sizeof(op));
	op.code = GPU_OP_COPY;
	op.in[0] = o.ref;
	op.out.space = GPU_SPACE_ARENA;
	op.out.dtype = o.ref.dtype;
	op.out.offset = gpu_lower_arena_area(b, o.nbytes);
	op.count = o.nbytes;
	*offset = op.out.offset;
	b->node = OP_NOT_FROM_A_NODE;
	return gpu_lower_emit(b, &op);
}

/*
 * A graph input's or output's bytes per batch row, as the plan bound it: the same at every size, or
 * the tensor is not batch-major (rt_onnx_model_load refuses such models; a direct caller may not).
 */
static int row_bytes_set(uint32_t *row_bytes, bool first, size_t nbytes, int64_t batch, const char *what,
			 const char *name, char *err, size_t cap)
{
	uint64_t row = nbytes / (uint64_t)batch;

	if (nbytes % (uint64_t)batch != 0 || row > UINT32_MAX || (!first && row != *row_bytes)) {
		snprintf(err, cap, "graph %s %s: %zu bytes at batch %lld are not rows of one size", what, name, nbytes,
			 (long long)batch);
		return -ENOTSUP;
	}
	*row_bytes = (uint32_t)row;
	return 0;
}

static int compile_size(struct builder *b, const struct rt_graph *g, int64_t batch, char *err, size_t cap)
{
	struct gpu_program_size *sz = &b->c->prog.sizes[b->size_idx];
	struct rt_plan *p;
	int rc = 0;

	p = rt_plan_create(g, batch, RT_DEVICE_GPU, err, cap);
	if (p == NULL)
		return -ENOTSUP;
	b->ops = NULL;
	b->op_node = NULL;
	b->nb_ops = b->cap_ops = 0;
	b->arena_bytes = rt_plan_arena_bytes(p);
	sz->batch = (uint32_t)batch;
	for (uint32_t i = 0; i < g->num_inputs && rc == 0; i++) {
		struct gpu_lower_operand o;

		rc = operand_of(b, p, g->inputs[i], &o, err, cap);
		if (rc == 0 && o.ref.space != GPU_SPACE_ARENA) {
			snprintf(err, cap, "graph input %s is not in the arena", g->values[g->inputs[i]].name);
			rc = -EINVAL;
		}
		sz->input_offset[i] = o.ref.offset;
		if (rc == 0)
			rc = row_bytes_set(&b->c->prog.input_row_bytes[i], b->size_idx == 0, o.nbytes, batch, "input",
					   g->values[g->inputs[i]].name, err, cap);
	}
	for (uint32_t s = 0; s < rt_plan_num_steps(p) && rc == 0; s++)
		rc = lower_step(b, p, s, err, cap);
	for (uint32_t i = 0; i < g->num_outputs && rc == 0; i++) {
		size_t nbytes = 0;

		rc = place_output(b, p, g->outputs[i], &sz->output_offset[i], &nbytes, err, cap);
		if (rc == 0)
			rc = row_bytes_set(&b->c->prog.output_row_bytes[i], b->size_idx == 0, nbytes, batch, "output",
					   g->values[g->outputs[i]].name, err, cap);
	}
	if (rc == 0 && b->layout == GPU_LAYOUT_NHWC)
		rc = size_to_nhwc(b, sz, g, err, cap);
	if (rc == 0 && b->precision == GPU_PRECISION_FP16)
		rc = size_to_half(b, g, sz, batch, err, cap);
	rt_plan_free(p);
	sz->ops = b->ops;
	sz->nb_ops = b->nb_ops;
	b->c->op_node[b->size_idx] = b->op_node;
	sz->arena_bytes = prog_align(b->arena_bytes);
	if (rc == -ENOMEM)
		snprintf(err, cap, "batch %lld: out of memory", (long long)batch);
	return rc;
}

/*
 * Entries a batch table needs at most. Every task has at least one row: one entry per task and
 * tensor, and one padding run per input. A task whose rows cross packet buffers (a request of several
 * datagrams, whose slices are at least BW_SLICE_MIN bytes) adds one entry per buffer boundary: at most
 * a batch's bytes of the tensor over BW_SLICE_MIN, plus one per task.
 */
static uint32_t table_room(const struct gpu_compiled *c)
{
	uint64_t room = (uint64_t)c->max_tasks * (c->prog.nb_inputs + c->prog.nb_outputs) + c->prog.nb_inputs;

	for (uint32_t i = 0; i < c->prog.nb_inputs; i++)
		room += (uint64_t)c->max_tasks * c->prog.input_row_bytes[i] / BW_SLICE_MIN + c->max_tasks;
	for (uint32_t o = 0; o < c->prog.nb_outputs; o++)
		room += (uint64_t)c->max_tasks * c->prog.output_row_bytes[o] / BW_SLICE_MIN + c->max_tasks;
	return room > UINT32_MAX / 2 ? UINT32_MAX / 2 : (uint32_t)room;
}

int gpu_compile(const struct rt_graph *g, const int64_t *sizes, unsigned int nb_sizes, uint32_t precision,
		struct gpu_compiled **out, char *err, size_t cap)
{
	struct gpu_compile_options o = { .precision = precision, .layout = GPU_LAYOUT_AUTO };

	return gpu_compile_with(g, sizes, nb_sizes, &o, out, err, cap);
}

int gpu_compile_with(const struct rt_graph *g, const int64_t *sizes, unsigned int nb_sizes,
		     const struct gpu_compile_options *o, struct gpu_compiled **out, char *err, size_t cap)
{
	uint32_t precision = o->precision, layout = o->layout;
	struct builder b;
	struct gpu_compiled *c;
	int rc = 0;

	if (g == NULL || sizes == NULL || nb_sizes == 0 || nb_sizes > GPU_PROG_SIZES_MAX) {
		snprintf(err, cap, "%u batch sizes: 1 to %u", nb_sizes, GPU_PROG_SIZES_MAX);
		return -EINVAL;
	}
	if (g->num_inputs > GPU_PROG_TENSORS_MAX || g->num_outputs > GPU_PROG_TENSORS_MAX) {
		snprintf(err, cap, "%u inputs and %u outputs: at most %u each on the GPU", g->num_inputs,
			 g->num_outputs, GPU_PROG_TENSORS_MAX);
		return -ENOTSUP;
	}
	for (unsigned int i = 0; i < nb_sizes; i++)
		if (sizes[i] <= 0 || sizes[i] > UINT32_MAX || (i > 0 && sizes[i] <= sizes[i - 1])) {
			snprintf(err, cap, "batch sizes must be positive and ascending (size %u is %lld)", i,
				 (long long)sizes[i]);
			return -EINVAL;
		}
	if (precision >= GPU_PRECISION_COUNT || layout >= GPU_LAYOUT_COUNT) {
		snprintf(err, cap, "precision %u or layout %u unknown", precision, layout);
		return -EINVAL;
	}
	/* tensor cores read half-precision convolutions channels-innermost: NHWC for fp16, NCHW (the
	 * model's own) for fp32 */
	if (layout == GPU_LAYOUT_AUTO)
		layout = precision == GPU_PRECISION_FP16 ? GPU_LAYOUT_NHWC : GPU_LAYOUT_NCHW;
	rc = gpu_kernels_register();
	if (rc < 0) {
		snprintf(err, cap, "registering the GPU kernels: error %d", rc);
		return rc;
	}
	c = calloc(1, sizeof(*c));
	if (c == NULL) {
		snprintf(err, cap, "out of memory");
		return -ENOMEM;
	}
	c->graph = g;
	snprintf(c->prog.name, sizeof(c->prog.name), "%s", g->name != NULL ? g->name : "model");
	c->prog.nb_inputs = g->num_inputs;
	c->prog.nb_outputs = g->num_outputs;
	c->max_tasks = (uint32_t)sizes[nb_sizes - 1];

	memset(&b, 0, sizeof(b));
	b.c = c;
	b.precision = precision;
	b.layout = layout;
	for (unsigned int i = 0; i < nb_sizes && rc == 0; i++) {
		b.size_idx = i;
		c->prog.nb_sizes = i + 1;
		rc = compile_size(&b, g, sizes[i], err, cap);
	}
	if (rc == 0)
		c->prog.max_segments = table_room(c);
	if (rc == 0 && layout == GPU_LAYOUT_NHWC && (rc = consts_to_nhwc(&b)) < 0)
		snprintf(err, cap, rc == -ENOMEM ? "out of memory" : "nhwc: CONV weights of an unexpected size");
	if (rc == 0 && precision == GPU_PRECISION_FP16)
		consts_to_half(&b);
	c->layout = b.nhwc_ops > 0 ? GPU_LAYOUT_NHWC : GPU_LAYOUT_NCHW;
	c->prog.consts = b.consts;
	c->prog.const_bytes = b.const_bytes;
	free(b.entries);
	if (rc < 0) {
		gpu_compiled_free(c);
		return rc;
	}
	*out = c;
	return 0;
}

static const char *const g_precision_names[GPU_PRECISION_COUNT] = {
	[GPU_PRECISION_FP32] = "fp32",
	[GPU_PRECISION_FP16] = "fp16",
};
static const char *const g_layout_names[GPU_LAYOUT_COUNT] = {
	[GPU_LAYOUT_AUTO] = "auto",
	[GPU_LAYOUT_NCHW] = "nchw",
	[GPU_LAYOUT_NHWC] = "nhwc",
};
static const char *const g_launch_mode_names[GPU_LAUNCH_MODE_COUNT] = {
	[GPU_LAUNCH_GRAPH] = "graph",
	[GPU_LAUNCH_DOORBELL] = "doorbell",
};

static int name_parse(const char *const *names, unsigned int n, const char *name)
{
	for (unsigned int i = 0; name != NULL && i < n; i++)
		if (strcmp(names[i], name) == 0)
			return (int)i;
	return -EINVAL;
}

const char *gpu_precision_name(uint32_t precision)
{
	return precision < GPU_PRECISION_COUNT ? g_precision_names[precision] : "?";
}

int gpu_precision_parse(const char *name)
{
	return name_parse(g_precision_names, GPU_PRECISION_COUNT, name);
}

const char *gpu_layout_name(uint32_t layout)
{
	return layout < GPU_LAYOUT_COUNT ? g_layout_names[layout] : "?";
}

int gpu_layout_parse(const char *name)
{
	return name_parse(g_layout_names, GPU_LAYOUT_COUNT, name);
}

const char *gpu_launch_mode_name(uint32_t mode)
{
	return mode < GPU_LAUNCH_MODE_COUNT ? g_launch_mode_names[mode] : "?";
}

int gpu_launch_mode_parse(const char *name)
{
	return name_parse(g_launch_mode_names, GPU_LAUNCH_MODE_COUNT, name);
}

void gpu_compiled_free(struct gpu_compiled *c)
{
	if (c == NULL)
		return;
	for (uint32_t i = 0; i < c->prog.nb_sizes; i++) {
		free((void *)c->prog.sizes[i].ops);
		free(c->op_node[i]);
	}
	free((void *)c->prog.consts);
	free(c);
}

const char *gpu_compiled_op_node(const struct gpu_compiled *c, uint32_t size_idx, uint32_t op_index)
{
	uint32_t node;

	if (c == NULL || size_idx >= c->prog.nb_sizes || op_index >= c->prog.sizes[size_idx].nb_ops)
		return "?";
	node = c->op_node[size_idx][op_index];
	return node < c->graph->num_nodes ? c->graph->nodes[node].name : "(added by the compiler: a copy or cast)";
}
