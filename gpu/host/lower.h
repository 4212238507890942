/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Inside gpu/'s host side: how a node becomes device ops. compile.c walks a plan's steps and calls the
 * lowering its GPU kernel carries (rt_kernel.device_impl, filled in lower.c); a lowering reads the
 * node's bound operands and appends ops with gpu_lower_emit.
 */
#ifndef BW_GPU_LOWER_H
#define BW_GPU_LOWER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "graph.h"
#include "host.h"

#define RT_LOWER_OPERANDS_MAX 16

struct builder; /* gpu/compile_defs.h */

/* A node's operand: its bound dtype and shape, where it lies, and its host data when constant. */
struct gpu_lower_operand {
	bool present;            /* false: an optional operand the model left out */
	struct rt_tensor tensor;
	size_t nbytes;
	struct gpu_ref ref;
	const void *host_data;   /* GPU_SPACE_CONST: the constant's bytes, for attributes-as-inputs */
};

struct gpu_lowering {
	/** \return 0, or -ENOTSUP / -EINVAL with why naming the attribute or shape the GPU does not run. */
	int (*lower)(struct builder *b, const struct rt_node *n, const struct gpu_lower_operand *in,
		     const struct gpu_lower_operand *out, char *why, size_t cap);
};

/** Appends an op for the node being lowered. \return 0 or -ENOMEM. */
int gpu_lower_emit(struct builder *b, const struct gpu_op *op);

/** \return the offset of a new area of bytes in the arena (beyond the plan's). */
uint64_t gpu_lower_arena_area(struct builder *b, uint64_t bytes);

#endif /* BW_GPU_LOWER_H */
