/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Compiling a graph into a device program (host.h): for each allowed batch size, the runtime plans
 * the graph for RT_DEVICE_GPU (shapes bound, constants folded on the host, one arena laid out in
 * sequential order, which is the order a stream runs ops in), then each remaining step is lowered to
 * device ops by its GPU kernel's lowering function (lower.c). Constants the ops read (initializers,
 * folded values) are gathered into one blob, each once.
 *
 * GPU_PRECISION_FP16 is a pass over the float32 program: every float operand becomes float16 where it
 * lies (a tensor keeps its float32-sized place and uses its first half), the float constants are
 * converted in the blob, and the graph's float inputs and outputs, which travel as float32 rows, get a
 * CAST op from/to a float32 area added to the arena. Kernels compute in float whatever they store.
 *
 * GPU_LAYOUT_NHWC is a pass before it: every CONV (with constant weights) and POOL op computes in NHWC,
 * its weights permuted in the blob; the tensors they produce stay NHWC while only such ops read them,
 * and a PERMUTE op gives any other reader (and the graph's outputs) the NCHW copy it expects, once per
 * tensor. A tensor of 1x1 spatial size is the same in both layouts and never permuted: ResNet-50 needs
 * one PERMUTE in all, of its input.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/plan.h"
#include "graph.h"
#include "lower.h"
#include "program_math.h"

#define OPS_INITIAL 64
#define OP_NOT_FROM_A_NODE UINT32_MAX /* op_node of ops the compiler adds */
#define CONSTS_INITIAL (1u << 20)

struct const_entry {
	const void *data;
	uint64_t offset;
	uint64_t nbytes;
	bool to_half;   /* read as float by some op of an fp16 program: converted once, at the end */
	bool to_nhwc;   /* the weights of an NHWC CONV: [m][cpg][kh][kw] permuted to [m][kh][kw][cpg] */
	int64_t m, cpg, kh, kw;
};

struct builder {
	struct gpu_compiled *c;
	uint32_t size_idx;
	uint32_t node;             /* the node being lowered */
	struct gpu_op *ops;
	uint32_t *op_node;
	uint32_t nb_ops, cap_ops;
	uint8_t *consts;
	uint64_t const_bytes, const_cap;
	struct const_entry *entries;
	uint32_t nb_entries, cap_entries;
	uint64_t arena_bytes;      /* the plan's, grown by areas the compiler adds */
	uint32_t precision;        /* enum gpu_precision */
	uint32_t layout;           /* GPU_LAYOUT_NCHW or GPU_LAYOUT_NHWC (AUTO resolved) */
	uint32_t nhwc_ops;         /* CONV and POOL ops the NHWC pass converted, all sizes */
};

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

/* ---- GPU_LAYOUT_NHWC ------------------------------------------------------------------------------ */

#define NHWC_REGIONS_MAX 64 /* NHWC tensors alive at once; past it, a CONV or POOL stays NCHW */

/* A tensor a converted op wrote in NHWC, alive until an op writes over its bytes. */
struct nhwc_region {
	uint64_t offset, bytes;
	int64_t n, c, h, w;
	bool has_copy;
	uint64_t copy;          /* its NCHW copy's arena offset, made for the first reader that needs it */
};

struct nhwc_pass {
	struct builder *b;
	struct nhwc_region regions[NHWC_REGIONS_MAX];
	uint32_t nb_regions;
};

/* A PERMUTE of a float tensor [n][c][h][w] into NHWC (to_nhwc) or of an NHWC one back to NCHW. */
static struct gpu_op permute_op(uint64_t from, uint64_t to, int64_t n, int64_t c, int64_t h, int64_t w, bool to_nhwc)
{
	struct gpu_op op;

	memset(&op, 0, sizeof(op));
	op.code = GPU_OP_PERMUTE;
	op.in[0] = (struct gpu_ref){ .space = GPU_SPACE_ARENA, .dtype = BW_DTYPE_F32, .offset = from };
	op.out = (struct gpu_ref){ .space = GPU_SPACE_ARENA, .dtype = BW_DTYPE_F32, .offset = to };
	op.count = (uint64_t)(n * c * h * w);
	op.u.bcast.rank = 4;
	if (to_nhwc) { /* out [n][h][w][c] reads in (n, c, h, w) */
		int64_t dims[4] = { n, h, w, c }, strides[4] = { c * h * w, w, 1, h * w };

		memcpy(op.u.bcast.dims, dims, sizeof(dims));
		memcpy(op.u.bcast.strides[0], strides, sizeof(strides));
	} else { /* out [n][c][h][w] reads in (n, h, w, c) */
		int64_t dims[4] = { n, c, h, w }, strides[4] = { h * w * c, 1, w * c, c };

		memcpy(op.u.bcast.dims, dims, sizeof(dims));
		memcpy(op.u.bcast.strides[0], strides, sizeof(strides));
	}
	return op;
}

/*
 * Bytes an op writes from its output's offset, exactly: too many would retire a live NHWC tensor
 * beside the output (and a later CONV would permute it a second time), too few would keep one whose
 * bytes were overwritten.
 */
static uint64_t op_out_bytes(const struct gpu_op *op)
{
	uint64_t elem = gpu_dtype_bytes(op->out.dtype); /* gpu_program_check accepts no other dtype */

	switch (op->code) {
	case GPU_OP_COPY:
		return op->count;
	case GPU_OP_GATHER:
		return op->count * op->u.gather.elem_bytes;
	case GPU_OP_GEMM:
		return (uint64_t)((op->u.gemm.batch - 1) * op->u.gemm.stride_c + op->u.gemm.m * op->u.gemm.n) * elem;
	case GPU_OP_SOFTMAX:
	case GPU_OP_LAYERNORM:
		return (uint64_t)(op->u.rows.rows * op->u.rows.cols) * elem;
	case GPU_OP_REDUCE:
		return (uint64_t)(op->u.reduce.outer * op->u.reduce.inner) * elem;
	default:
		return op->count * elem;
	}
}

static struct nhwc_region *region_at(struct nhwc_pass *ps, uint64_t offset)
{
	for (uint32_t i = 0; i < ps->nb_regions; i++)
		if (offset >= ps->regions[i].offset && offset < ps->regions[i].offset + ps->regions[i].bytes)
			return &ps->regions[i];
	return NULL;
}

/* An op writing [offset, offset + bytes) ends the NHWC tensors there. */
static void regions_retire(struct nhwc_pass *ps, uint64_t offset, uint64_t bytes)
{
	for (uint32_t i = 0; i < ps->nb_regions;) {
		const struct nhwc_region *r = &ps->regions[i];

		if (r->offset < offset + bytes && offset < r->offset + r->bytes)
			ps->regions[i] = ps->regions[--ps->nb_regions];
		else
			i++;
	}
}

/* The NCHW copy of region r, made (by a PERMUTE emitted now) the first time a reader needs it. */
static int region_nchw(struct nhwc_pass *ps, struct nhwc_region *r, uint64_t *offset)
{
	struct gpu_op op;
	int rc;

	if (!r->has_copy) {
		r->copy = gpu_lower_arena_area(ps->b, r->bytes);
		op = permute_op(r->offset, r->copy, r->n, r->c, r->h, r->w, false);
		rc = gpu_lower_emit(ps->b, &op);
		if (rc < 0)
			return rc;
		r->has_copy = true;
	}
	*offset = r->copy;
	return 0;
}

/* Marks CONV op's constant weights for the permutation to [m][kh][kw][cpg]. */
static int weights_to_nhwc(struct builder *b, const struct gpu_op *op)
{
	int64_t m = op->u.conv.m, cpg = op->u.conv.c / op->u.conv.group, kh = op->u.conv.kh, kw = op->u.conv.kw;

	for (uint32_t i = 0; i < b->nb_entries; i++) {
		struct const_entry *e = &b->entries[i];

		if (e->offset != op->in[1].offset)
			continue;
		if (e->to_nhwc && (e->m != m || e->cpg != cpg || e->kh != kh || e->kw != kw))
			return -EINVAL; /* one blob of weights read as two convolutions' */
		e->to_nhwc = true;
		e->m = m, e->cpg = cpg, e->kh = kh, e->kw = kw;
		return 0;
	}
	return -EINVAL;
}

/* One op of the pass: its operands made to agree with its layout, then the op itself. */
static int nhwc_op(struct nhwc_pass *ps, struct gpu_op op)
{
	bool window = op.code == GPU_OP_CONV || op.code == GPU_OP_POOL;
	bool convert = window && ps->nb_regions < NHWC_REGIONS_MAX && op.in[0].dtype == BW_DTYPE_F32 &&
		       (op.code == GPU_OP_POOL || op.in[1].space == GPU_SPACE_CONST);
	int rc = 0;

	for (unsigned int k = 0; k < GPU_OP_INPUTS_MAX && rc == 0; k++) {
		struct gpu_ref *r = &op.in[k];
		bool nhwc_operand = convert && (k == 0 || (k == 3 && op.code == GPU_OP_CONV));
		struct nhwc_region *reg;

		if (r->space != GPU_SPACE_ARENA)
			continue;
		reg = region_at(ps, r->offset);
		if (nhwc_operand && reg != NULL && reg->offset == r->offset)
			continue; /* NHWC already */
		if (nhwc_operand) {
			/* an NCHW tensor (or the NCHW copy of part of one): into NHWC, unless 1x1 */
			int64_t n = op.u.conv.n, c = k == 0 ? op.u.conv.c : op.u.conv.m;
			int64_t h = k == 0 ? op.u.conv.h : op.u.conv.oh, w = k == 0 ? op.u.conv.w : op.u.conv.ow;
			uint64_t from = r->offset;
			struct gpu_op p;

			if (reg != NULL) { /* part of an NHWC tensor, read as NCHW: from its copy */
				rc = region_nchw(ps, reg, &from);
				from += r->offset - reg->offset;
			}
			if (rc < 0 || h * w == 1) {
				r->offset = from;
				continue;
			}
			r->offset = gpu_lower_arena_area(ps->b, (uint64_t)(n * c * h * w) * 4);
			p = permute_op(from, r->offset, n, c, h, w, true);
			rc = gpu_lower_emit(ps->b, &p);
			continue;
		}
		if (reg != NULL) { /* an NCHW reader of an NHWC tensor: its copy, at the same place in it */
			uint64_t copy;

			rc = region_nchw(ps, reg, &copy);
			r->offset = copy + (r->offset - reg->offset);
		}
	}
	if (rc < 0)
		return rc;
	regions_retire(ps, op.out.offset, op_out_bytes(&op));
	if (convert) {
		op.u.conv.nhwc = 1;
		if (op.code == GPU_OP_CONV && (rc = weights_to_nhwc(ps->b, &op)) < 0)
			return rc;
		ps->b->nhwc_ops++;
		if (op.u.conv.oh * op.u.conv.ow > 1)
			ps->regions[ps->nb_regions++] = (struct nhwc_region){
				.offset = op.out.offset, .bytes = op.count * 4, .n = op.u.conv.n, .c = op.u.conv.m,
				.h = op.u.conv.oh, .w = op.u.conv.ow };
	}
	return gpu_lower_emit(ps->b, &op);
}

/* The NHWC pass over one size's ops (see the top of this file): a new op list, op by op. */
static int size_to_nhwc(struct builder *b, struct gpu_program_size *sz, const struct rt_graph *g, char *err,
			size_t cap)
{
	struct gpu_op *old = b->ops;
	uint32_t *old_node = b->op_node, nb_old = b->nb_ops;
	struct nhwc_pass *ps = calloc(1, sizeof(*ps));
	int rc = 0;

	if (ps == NULL)
		return -ENOMEM;
	ps->b = b;
	b->ops = NULL;
	b->op_node = NULL;
	b->nb_ops = b->cap_ops = 0;
	for (uint32_t i = 0; i < nb_old && rc == 0; i++) {
		b->node = old_node[i]; /* a PERMUTE made for an op is charged to its node */
		rc = nhwc_op(ps, old[i]);
	}
	/* the scatter reads outputs as NCHW */
	b->node = OP_NOT_FROM_A_NODE;
	for (uint32_t i = 0; i < g->num_outputs && rc == 0; i++) {
		struct nhwc_region *reg = region_at(ps, sz->output_offset[i]);

		if (reg != NULL)
			rc = region_nchw(ps, reg, &sz->output_offset[i]);
	}
	free(old);
	free(old_node);
	free(ps);
	if (rc == -EINVAL)
		snprintf(err, cap, "nhwc: a CONV's weights are not one constant of their own");
	return rc;
}

/* Each NHWC CONV's weights: [m][cpg][kh][kw] to [m][kh][kw][cpg], in place (through a copy). */
static int consts_to_nhwc(struct builder *b)
{
	for (uint32_t i = 0; i < b->nb_entries; i++) {
		const struct const_entry *e = &b->entries[i];
		float *w = (float *)(void *)(b->consts + e->offset), *src;
		size_t n = (size_t)(e->m * e->cpg * e->kh * e->kw);

		if (!e->to_nhwc)
			continue;
		if (n * sizeof(float) != e->nbytes)
			return -EINVAL;
		src = malloc(e->nbytes);
		if (src == NULL)
			return -ENOMEM;
		memcpy(src, w, e->nbytes);
		for (int64_t co = 0; co < e->m; co++)
			for (int64_t ci = 0; ci < e->cpg; ci++)
				for (int64_t ky = 0; ky < e->kh; ky++)
					for (int64_t kx = 0; kx < e->kw; kx++)
						w[((co * e->kh + ky) * e->kw + kx) * e->cpg + ci] =
							src[((co * e->cpg + ci) * e->kh + ky) * e->kw + kx];
		free(src);
	}
	return 0;
}

/* ---- GPU_PRECISION_FP16 --------------------------------------------------------------------------- */

/* A float32 operand becomes float16 in place; a constant's entry is marked for conversion. */
static int ref_to_half(struct builder *b, struct gpu_ref *r)
{
	if (r->space == GPU_SPACE_NONE || r->dtype != BW_DTYPE_F32)
		return 0;
	r->dtype = BW_DTYPE_F16;
	if (r->space != GPU_SPACE_CONST)
		return 0;
	for (uint32_t i = 0; i < b->nb_entries; i++)
		if (b->entries[i].offset == r->offset) {
			b->entries[i].to_half = true;
			return 0;
		}
	return -EINVAL; /* lowerings refer to constants by their start: const_ref's offsets */
}

static int op_to_half(struct builder *b, struct gpu_op *op)
{
	bool float_copy = op->code == GPU_OP_COPY && op->in[0].dtype == BW_DTYPE_F32;
	bool float_gather = op->code == GPU_OP_GATHER && op->in[0].dtype == BW_DTYPE_F32;
	int rc = ref_to_half(b, &op->out);

	for (unsigned int k = 0; k < GPU_OP_INPUTS_MAX && rc == 0; k++)
		rc = ref_to_half(b, &op->in[k]);
	if (float_copy)
		op->count /= 2; /* bytes */
	if (float_gather)
		op->u.gather.elem_bytes = 2;
	if (op->code == GPU_OP_CAST) {
		op->u.cast.from = op->in[0].dtype;
		op->u.cast.to = op->out.dtype;
	}
	return rc;
}

/* A CAST of count elements, added by the compiler. */
static struct gpu_op cast_op(uint64_t from_offset, uint32_t from, uint64_t to_offset, uint32_t to, uint64_t count)
{
	struct gpu_op op;

	memset(&op, 0, sizeof(op));
	op.code = GPU_OP_CAST;
	op.in[0] = (struct gpu_ref){ .space = GPU_SPACE_ARENA, .dtype = from, .offset = from_offset };
	op.out = (struct gpu_ref){ .space = GPU_SPACE_ARENA, .dtype = to, .offset = to_offset };
	op.count = count;
	op.u.cast.from = from;
	op.u.cast.to = to;
	return op;
}

/*
 * The fp16 pass over one size's ops (see the top of this file). Graph input i: the gather now fills a
 * new float32 area, and a CAST at the start writes its float16 copy where the ops read the input.
 * Output i: a CAST at the end reads the ops' float16 result into a new float32 area the scatter reads.
 */
static int size_to_half(struct builder *b, const struct rt_graph *g, struct gpu_program_size *sz, int64_t batch,
			char *err, size_t cap)
{
	struct gpu_op casts[GPU_PROG_TENSORS_MAX];
	uint32_t nb_casts = 0, first = b->nb_ops;
	int rc = 0;

	for (uint32_t i = 0; i < b->nb_ops && rc == 0; i++)
		rc = op_to_half(b, &b->ops[i]);
	if (rc < 0) {
		snprintf(err, cap, "batch %lld: fp16: an op refers into the middle of a constant", (long long)batch);
		return rc;
	}
	for (uint32_t i = 0; i < g->num_inputs; i++) {
		const struct rt_tensor *v = &g->values[g->inputs[i]].tensor;
		uint64_t bytes = (uint64_t)b->c->prog.input_row_bytes[i] * (uint64_t)batch, f32;

		if (v->dtype != BW_DTYPE_F32)
			continue;
		f32 = gpu_lower_arena_area(b, bytes);
		casts[nb_casts++] = cast_op(f32, BW_DTYPE_F32, sz->input_offset[i], BW_DTYPE_F16, bytes / 4);
		sz->input_offset[i] = f32;
	}
	/* the input casts go first: make room at the front of the op list */
	b->node = OP_NOT_FROM_A_NODE;
	for (uint32_t k = 0; k < nb_casts && rc == 0; k++)
		rc = gpu_lower_emit(b, &casts[k]);
	if (rc < 0)
		return rc;
	if (nb_casts > 0) {
		memmove(b->ops + nb_casts, b->ops, (size_t)first * sizeof(*b->ops));
		memmove(b->op_node + nb_casts, b->op_node, (size_t)first * sizeof(*b->op_node));
		memcpy(b->ops, casts, (size_t)nb_casts * sizeof(*b->ops));
		for (uint32_t k = 0; k < nb_casts; k++)
			b->op_node[k] = OP_NOT_FROM_A_NODE;
	}
	for (uint32_t i = 0; i < g->num_outputs && rc == 0; i++) {
		const struct rt_tensor *v = &g->values[g->outputs[i]].tensor;
		uint64_t bytes = (uint64_t)b->c->prog.output_row_bytes[i] * (uint64_t)batch, f32;
		struct gpu_op op;

		if (v->dtype != BW_DTYPE_F32)
			continue;
		f32 = gpu_lower_arena_area(b, bytes);
		op = cast_op(sz->output_offset[i], BW_DTYPE_F16, f32, BW_DTYPE_F32, bytes / 4);
		sz->output_offset[i] = f32;
		rc = gpu_lower_emit(b, &op);
	}
	return rc;
}

/* Each constant some fp16 op reads as float: float32 to float16 in place, in its first half. */
static void consts_to_half(struct builder *b)
{
	for (uint32_t i = 0; i < b->nb_entries; i++) {
		const struct const_entry *e = &b->entries[i];
		uint8_t *p = b->consts + e->offset;

		if (!e->to_half)
			continue;
		/* element j's half goes to bytes [2j, 2j + 2), which element j's float has already left */
		for (uint64_t j = 0; j < e->nbytes / 4; j++) {
			float f;
			uint16_t h;

			memcpy(&f, p + j * 4, sizeof(f));
			h = gpu_float_to_half(f);
			memcpy(p + j * 2, &h, sizeof(h));
		}
	}
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
	/* every task has at least one row: a segment per task and tensor, and one padding run per input */
	c->prog.max_segments = c->max_tasks * (g->num_inputs + g->num_outputs) + g->num_inputs;

	memset(&b, 0, sizeof(b));
	b.c = c;
	b.precision = precision;
	b.layout = layout;
	for (unsigned int i = 0; i < nb_sizes && rc == 0; i++) {
		b.size_idx = i;
		c->prog.nb_sizes = i + 1;
		rc = compile_size(&b, g, sizes[i], err, cap);
	}
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
