/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Inside gpu/'s compiler: the builder compile.c fills for each batch size, which the lowering functions
 * append ops to (lower.h) and the NHWC and fp16 passes rewrite (compile_nhwc.c, compile_fp16.c).
 */
#ifndef BW_GPU_COMPILE_DEFS_H
#define BW_GPU_COMPILE_DEFS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "graph.h"
#include "host.h"

#define OP_NOT_FROM_A_NODE UINT32_MAX /* op_node of ops the compiler adds */

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

/* GPU_LAYOUT_NHWC (compile_nhwc.c): one size's ops, then every NHWC CONV's weights in the blob. */
int size_to_nhwc(struct builder *b, struct gpu_program_size *sz, const struct rt_graph *g, char *err, size_t cap);
int consts_to_nhwc(struct builder *b);

/* GPU_PRECISION_FP16 (compile_fp16.c): one size's ops, then the float constants the ops read. */
int size_to_half(struct builder *b, const struct rt_graph *g, struct gpu_program_size *sz, int64_t batch,
		 char *err, size_t cap);
void consts_to_half(struct builder *b);

#endif /* BW_GPU_COMPILE_DEFS_H */
