/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Plans and their execution. A plan is one rt_graph bound to one batch size on one device: every
 * shape concrete, every node's kernel resolved, initializer-only subgraphs folded into constants, and
 * every other tensor given an offset in one arena by a liveness-based planner. A plan is read-only
 * once made, so several executor slots share it, each with its own arena; the hot path
 * (rt_plan_run) neither allocates, locks nor makes a system call.
 *
 * The arena is the caller's: rt_plan_arena_bytes() bytes, RT_PLAN_ALIGN-aligned (aligned_alloc works:
 * the size is a multiple of the alignment). It holds, from offset 0: the tensor descriptors each node
 * is called with, then the tensors (graph inputs, intermediates, graph outputs) and the nodes'
 * scratch. rt_plan_bind tells where a graph's inputs go and where its outputs come out.
 *
 * A plan points into its graph (nodes, initializer data): free the plan before the graph.
 * docs/runtime.md has the whole path of a batch.
 */
#ifndef BW_RT_PLAN_H
#define BW_RT_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "graph.h"

#define RT_PLAN_ALIGN 64 /* bytes: the arena, every tensor and every scratch area in it */
/* One tensor; beyond it a model is refused. A fuzzing build may set a lower one (tests/fuzz). */
#ifndef RT_PLAN_TENSOR_BYTES_MAX
#define RT_PLAN_TENSOR_BYTES_MAX ((size_t)1 << 36)
#endif

struct rt_plan;

/**
 * Plans a graph for one batch size and device: binds every symbolic dimension of the graph inputs
 * to batch, resolves each node's kernel (rt_kernel_find with the dtype of its first input), infers
 * every output shape, folds deterministic nodes whose inputs are all constant (and Shape/Size, whose
 * outputs depend on shapes only: their kernels get data NULL for inputs not constant) by running
 * them now, and lays out the arena.
 * \param batch  the batch size symbolic dimensions take; <= 0 when the graph has none (refused
 *               otherwise)
 * \param err    one line naming the node (or graph input) at fault and why
 * \return the plan, or NULL.
 */
struct rt_plan *rt_plan_create(const struct rt_graph *g, int64_t batch, enum rt_device dev, char *err,
			       size_t cap);

/**
 * rt_plan_create, with values of some graph inputs known at plan time. known is NULL or holds one
 * tensor per graph input (g->inputs order); an entry with data non-NULL gives that input's shape
 * (dtype and declared dimensions must agree) and its value, which shape inference may read (a
 * Reshape's shape, a Slice's starts): the plan then holds only for runs with those same values in
 * those inputs (rt_plan_run does not check). The inputs stay arena tensors filled at run time, and
 * nodes computed from them still run at run time: nothing is folded on their account. The
 * conformance runner uses this, as ONNX node tests feed such operands as graph inputs.
 */
struct rt_plan *rt_plan_create_known(const struct rt_graph *g, int64_t batch, enum rt_device dev,
				     const struct rt_tensor *known, char *err, size_t cap);

/* How the arena is shared between tensors. */
enum rt_plan_layout {
	/*
	 * For rt_plan_run: lifetimes are node indices of the sequential order, and each step's scratch
	 * lies in the arena, live at that step only.
	 */
	RT_PLAN_LAYOUT_SEQUENTIAL,
	/*
	 * For rt_executor, where steps run in any order the step graph allows, several at once: tensor B
	 * may take tensor A's bytes only if B's producer is a transitive successor of A's producer and of
	 * every step that reads A (reachability over the step graph, not indices). Scratch is not in the
	 * arena: each worker has one region of rt_plan_worker_scratch_bytes(), whatever step it runs.
	 */
	RT_PLAN_LAYOUT_CONCURRENT,
};

/**
 * rt_plan_create_known with a choice of layout (the two above call it with SEQUENTIAL).
 * \param known  NULL, or one tensor per graph input as for rt_plan_create_known
 */
struct rt_plan *rt_plan_create_layout(const struct rt_graph *g, int64_t batch, enum rt_device dev,
				      const struct rt_tensor *known, enum rt_plan_layout layout, char *err, size_t cap);

enum rt_plan_layout rt_plan_get_layout(const struct rt_plan *p);

/**
 * Bytes of scratch one worker needs to run any step of the plan (a step's kernel scratch and room for
 * the outputs the model leaves out), a multiple of RT_PLAN_ALIGN; 0 when no step needs any. In the
 * sequential layout the arena already holds it.
 */
size_t rt_plan_worker_scratch_bytes(const struct rt_plan *p);

void rt_plan_free(struct rt_plan *p);

/** Bytes of arena one run needs, a multiple of RT_PLAN_ALIGN. */
size_t rt_plan_arena_bytes(const struct rt_plan *p);
uint32_t rt_plan_num_inputs(const struct rt_plan *p);
uint32_t rt_plan_num_outputs(const struct rt_plan *p);

/**
 * The graph's inputs and outputs (model order) as they lie in one arena: dtype, bound shape and data.
 * The caller writes each input's bytes at inputs[i].data before every rt_plan_run (once the last node
 * reading an input has run, its bytes are reused) and reads outputs after it.
 * An output that is a constant (an initializer, a folded node) points into the plan or the graph,
 * not into the arena: read it, never write it.
 * \param inputs   rt_plan_num_inputs() tensors, or NULL
 * \param outputs  rt_plan_num_outputs() tensors, or NULL
 */
void rt_plan_bind(const struct rt_plan *p, void *arena, struct rt_tensor *inputs, struct rt_tensor *outputs);

/**
 * Runs every node that was not folded, in topological order, on the calling thread. Allocates
 * nothing; kernels get their tensors and scratch in arena.
 * \return 0, or the failing kernel's negative errno with err saying "node NAME (OP): why";
 *         -EINVAL when arena is not RT_PLAN_ALIGN-aligned, or the plan has the concurrent layout
 *         (its scratch is not in the arena: rt_executor runs it).
 */
int rt_plan_run(const struct rt_plan *p, void *arena, char *err, size_t cap);

/**
 * rt_plan_run for steps first..first+count-1 only (rt_plan_num_steps in all, in order): for a tool
 * that times each step (bwrun --profile). Running every step once, in order, is one rt_plan_run.
 * \return as rt_plan_run; -EINVAL also for a range past the last step.
 */
int rt_plan_run_steps(const struct rt_plan *p, void *arena, uint32_t first, uint32_t count, char *err, size_t cap);

/* ---- depth first: a batch in chunks of rows (chunk.c) -------------------------------------------- */

/**
 * Runs batch rows through p, a plan of fewer rows (its chunk, which must divide batch), one chunk
 * after the other: chunk c's rows of every graph input copied from inputs[i].data into the arena,
 * rt_plan_run, its rows of every output copied to outputs[o].data. The batch's tensors are then never
 * larger than one chunk's. Rows must be independent of each other, as every batched model's are
 * (the batcher pads and splits batches on that contract). inputs and outputs: the graph's, model
 * order, batch rows each (only data is read). With p->batch == batch it is one rt_plan_run and two
 * copies. \return as rt_plan_run; -EINVAL for a batch the chunk does not divide.
 */
int rt_plan_run_chunks(const struct rt_plan *p, void *arena, int64_t batch, const struct rt_tensor *inputs,
		       const struct rt_tensor *outputs, char *err, size_t cap);

/**
 * Chooses how to run a batch of batch rows on the CPU: whole, or in chunks of one of the candidate
 * row counts (those that divide batch and are smaller). Plans each and runs it on the same
 * generated inputs (floats in [-1, 1), other types zero): a warm-up, then runs until 50 ms or 64
 * runs have been timed, the fastest counting; where whole and another size come within 3 % of the
 * fastest, each size that close is timed again and keeps its faster time; a chunk size must then
 * beat whole by 1 % to be taken. At load, not on the hot path: it allocates, and takes two runs of
 * each candidate or about 0.1 s, whichever is longer (twice that for the close ones). report: one
 * line with every time measured.
 * \return the rows to plan for (batch: whole), or a negative errno with err saying why.
 */
int64_t rt_plan_chunk_choose(const struct rt_graph *g, int64_t batch, const int64_t *candidates, unsigned int nb,
			     char *report, size_t report_cap, char *err, size_t cap);

/* A whole batch whose arena is at most this fits a core's L2 on the servers this was sized for (2 MiB
 * on Sapphire Rapids, 1 MiB on Zen 4; Zen 3's is 512 KiB, where the small CNN at batch 32, 785 KiB,
 * ran no faster in chunks of 4, 8 or 16): chunks could not keep it closer, so rt_plan_chunk_auto
 * does not measure it. */
#define RT_PLAN_CHUNK_ARENA_MIN ((size_t)1 << 20)

/**
 * rt_plan_chunk_choose over chunks of 1, 2, 4 and 8 rows, for a batch of 2 rows or more whose whole
 * plan's arena is larger than RT_PLAN_CHUNK_ARENA_MIN; batch (whole, nothing timed) otherwise.
 * What the daemon's `chunk_rows = auto` and bwrun's default do. report as rt_plan_chunk_choose's.
 */
int64_t rt_plan_chunk_auto(const struct rt_graph *g, int64_t batch, char *report, size_t report_cap, char *err,
			   size_t cap);

/* ---- what the planner decided: for tests, tools and the executors ------------------------------ */

enum rt_plan_placement {
	RT_PLACE_NONE,  /* not computed: a constant no longer needed, or a value nothing produced */
	RT_PLACE_ARENA, /* at offset in the arena, live between birth and death */
	RT_PLACE_CONST, /* data owned by the graph (initializer) or the plan (folded) */
};

struct rt_plan_value_info {
	enum rt_plan_placement placement;
	struct rt_tensor tensor; /* bound dtype and shape; data for a constant, NULL otherwise */
	size_t nbytes;
	size_t offset;           /* RT_PLACE_ARENA */
	/* Lifetime in node indices, both ends included: from the producing node (-1: a graph input)
	 * to the last node that reads it at run time (num_nodes: a graph output). The sequential layout
	 * shares bytes by these; the concurrent one by the step graph (rt_plan_step_info). */
	int32_t birth, death;
};

/** \return 0, or -EINVAL for a value index out of range. */
int rt_plan_value_info(const struct rt_plan *p, int32_t value, struct rt_plan_value_info *info);

/* A step: one node left to run at run time. */
struct rt_plan_step_info {
	uint32_t node;             /* index in the graph */
	const struct rt_kernel *kernel; /* the kernel the planner resolved for the plan's device */
	size_t scratch_offset;     /* arena offset of its scratch (and of room for omitted outputs);
				    * 0 in the concurrent layout: the start of the worker's scratch */
	size_t scratch_bytes;      /* 0: none */
	uint32_t pending_inputs;   /* distinct steps it waits for */
	uint32_t num_consumers;
	const uint32_t *consumers; /* distinct steps that wait for it */
	/* The input whose bytes output 0 took (rt_kernel.in_place), or -1: it had a kernel that may,
	 * and nothing read that input after this step, so both have the same offset. */
	int32_t in_place_input;
};

uint32_t rt_plan_num_steps(const struct rt_plan *p);
/** \return 0, or -EINVAL for a step out of range. */
int rt_plan_step_info(const struct rt_plan *p, uint32_t step, struct rt_plan_step_info *info);

struct rt_plan_stats {
	size_t arena_bytes;       /* rt_plan_arena_bytes */
	size_t descriptor_bytes;  /* node descriptors at the start of the arena */
	size_t tensor_bytes;      /* the rest: tensors and scratch as laid out */
	size_t tensor_bytes_sum;  /* the same without reuse: every tensor and scratch area end to end */
	size_t constant_bytes;    /* folded constants the plan keeps */
	size_t worker_scratch_bytes; /* rt_plan_worker_scratch_bytes */
	uint32_t steps;           /* nodes run at run time */
	uint32_t folded;          /* nodes run at plan time */
	uint32_t in_place;        /* steps writing their output over an input (in_place_input) */
};

void rt_plan_stats(const struct rt_plan *p, struct rt_plan_stats *stats);

#endif /* BW_RT_PLAN_H */
