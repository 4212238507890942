/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * GPU_PRECISION_FP16, a pass over the float32 program after the NHWC one (compile_nhwc.c): every float
 * operand becomes float16 where it lies (a tensor keeps its float32-sized place and uses its first
 * half), the float constants are converted in the blob, and the graph's float inputs and outputs, which
 * travel as float32 rows, get a CAST op from/to a float32 area added to the arena. Kernels compute in
 * float whatever they store.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "compile_defs.h"
#include "lower.h"
#include "program_math.h"

/* A float32 operand becomes float16 in place; a constant's entry is marked for conversion. */
static int ref_to_half(struct builder *b, struct gpu_ref *r)
{
	if (r->space == GPU_SPACE_NONE || r->dtype != BW_DTYPE_FLOAT)
		return 0;
	r->dtype = BW_DTYPE_FLOAT16;
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
	bool float_copy = op->code == GPU_OP_COPY && op->in[0].dtype == BW_DTYPE_FLOAT;
	bool float_gather = op->code == GPU_OP_GATHER && op->in[0].dtype == BW_DTYPE_FLOAT;
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
int size_to_half(struct builder *b, const struct rt_graph *g, struct gpu_program_size *sz, int64_t batch,
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

		if (v->dtype != BW_DTYPE_FLOAT)
			continue;
		f32 = gpu_lower_arena_area(b, bytes);
		casts[nb_casts++] = cast_op(f32, BW_DTYPE_FLOAT, sz->input_offset[i], BW_DTYPE_FLOAT16, bytes / 4);
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

		if (v->dtype != BW_DTYPE_FLOAT)
			continue;
		f32 = gpu_lower_arena_area(b, bytes);
		op = cast_op(sz->output_offset[i], BW_DTYPE_FLOAT16, f32, BW_DTYPE_FLOAT, bytes / 4);
		sz->output_offset[i] = f32;
		rc = gpu_lower_emit(b, &op);
	}
	return rc;
}

/* Each constant some fp16 op reads as float: float32 to float16 in place, in its first half. */
void consts_to_half(struct builder *b)
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
			h = bw_float_to_half(f);
			memcpy(p + j * 2, &h, sizeof(h));
		}
	}
}
