/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * GPU_LAYOUT_NHWC, a pass before the fp16 one (compile_fp16.c): every CONV (with constant weights) and
 * POOL op computes in NHWC, its weights permuted in the blob; the tensors they produce stay NHWC while
 * only such ops read them, and a PERMUTE op gives any other reader (and the graph's outputs) the NCHW
 * copy it expects, once per tensor. A tensor of 1x1 spatial size is the same in both layouts and never
 * permuted: ResNet-50 needs one PERMUTE in all, of its input.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compile_defs.h"
#include "lower.h"
#include "program_math.h"

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
	op.in[0] = (struct gpu_ref){ .space = GPU_SPACE_ARENA, .dtype = BW_DTYPE_FLOAT, .offset = from };
	op.out = (struct gpu_ref){ .space = GPU_SPACE_ARENA, .dtype = BW_DTYPE_FLOAT, .offset = to };
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
	bool convert = window && ps->nb_regions < NHWC_REGIONS_MAX && op.in[0].dtype == BW_DTYPE_FLOAT &&
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
int size_to_nhwc(struct builder *b, struct gpu_program_size *sz, const struct rt_graph *g, char *err,
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
int consts_to_nhwc(struct builder *b)
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
