/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Inside a plan: shared by plan.c, which builds it, exec.c, which runs it in order on one thread, and
 * executor.c, which runs it on several workers. The step table is the executor's node table: each
 * slot seeds per-step atomic pending counts from pending_inputs and releases consumers[] as steps
 * finish.
 */
#ifndef BW_RT_EXEC_DEFS_H
#define BW_RT_EXEC_DEFS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <batchwire/compiler.h> /* likely, unlikely */
#include <batchwire/err.h>      /* bw_err: plan and executor errors */

#include "exec/plan.h"

#define RT_PLAN_OFFSET_NONE SIZE_MAX /* an operand not in the arena: constant data, or omitted */

static inline size_t rt_align_up(size_t n)
{
	return (n + RT_PLAN_ALIGN - 1) & ~(size_t)(RT_PLAN_ALIGN - 1);
}

/** Zeroed, RT_PLAN_ALIGN-aligned memory, made at plan or executor creation only (zeroing faults the
 * pages in now rather than on the hot path). Free with free(). */
void *rt_exec_zalloc(size_t nbytes);

/* One operand of a step as its kernel will see it. */
struct rt_plan_operand {
	struct rt_tensor tensor; /* dtype and shape; data: a constant's, or NULL */
	size_t offset;           /* arena offset of its data, or RT_PLAN_OFFSET_NONE: tensor.data as is */
	bool in_scratch;         /* an output the model left out: offset is into the step's scratch */
};

struct rt_plan_step {
	const struct rt_node *node;
	const struct rt_kernel *kernel;
	uint32_t node_index;
	uint16_t num_inputs;
	uint16_t num_outputs;
	struct rt_plan_operand *operands; /* inputs, then outputs */
	size_t desc_offset;        /* its num_inputs + num_outputs descriptors in the arena */
	size_t scratch_offset;     /* kernel scratch, then room for outputs the model left out
				    * (sequential layout; the concurrent one uses the worker's scratch) */
	size_t scratch_bytes;      /* the kernel's part only (NULL scratch when 0) */
	size_t scratch_total;      /* with the omitted outputs */
	uint32_t pending_inputs;   /* distinct steps producing its inputs */
	uint32_t num_consumers;
	uint32_t *consumers;       /* distinct steps reading its outputs, ascending */
	bool feeds_output;         /* a graph output depends on it: its failure fails a request */
	int32_t in_place_wanted;   /* the input the kernel lets output 0 take (rt_kernel.in_place), or -1 */
	int32_t in_place_input;    /* the one it took (layout_arena), or -1 */
};

struct rt_plan_value {
	struct rt_tensor tensor;   /* bound shape; data: constant data, or a known value while planning */
	size_t nbytes;
	enum rt_plan_placement placement;
	size_t offset;
	int32_t birth, death;
	bool owned;                /* tensor.data is the plan's to free */
	bool known;                /* data known at plan time but computed at run time too */
};

struct rt_plan {
	const struct rt_graph *graph;
	int64_t batch;
	enum rt_device device;
	enum rt_plan_layout layout;
	struct rt_plan_value *values; /* graph->num_values */
	uint32_t num_steps;
	struct rt_plan_step *steps;
	uint32_t num_folded;
	uint32_t num_in_place;     /* steps whose output 0 took an input's bytes */
	size_t arena_bytes;
	size_t descriptor_bytes;
	size_t tensor_bytes;
	size_t tensor_bytes_sum;
	size_t constant_bytes;
	size_t worker_scratch_bytes; /* the largest step scratch, aligned */
	uint64_t budget_base;        /* the graph's constants when planning began (its memory_budget's) */
	uint64_t run_now_bytes;      /* outputs of nodes run while planning, so far */
};

/**
 * Runs one step in arena (exec.c), with scratch the start of the step's scratch area (the arena's,
 * at scratch_offset, in the sequential layout; the worker's in the concurrent one).
 * \return 0 or the kernel's error, its message in kerr.
 */
int rt_exec_step(const struct rt_plan_step *s, uint8_t *arena, uint8_t *scratch, char *kerr, size_t kerr_cap);

#endif /* BW_RT_EXEC_DEFS_H */
