/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Private to runtime/opt: the state of one rt_graph_optimize call and the graph edits its passes
 * share. Everything here runs at load time, so it allocates freely; a failed allocation fails the
 * whole call (-ENOMEM) and leaves the graph unusable, as graph.h says.
 *
 * How a pass edits: it finds a pattern starting at a live node, checks every node of it has no
 * reader outside the pattern (opt_sole_reader), then rewrites the pattern's last node in place into
 * the fused node (the last node: every input of the pattern is computed before it, and every reader
 * of its output after it, so the topological order holds) and kills the others. opt_compact then
 * drops the dead nodes and the values nothing reads any more (the weights a folded BatchNormalization
 * replaced), renumbering what is left.
 */
#ifndef BW_RT_OPT_DEFS_H
#define BW_RT_OPT_DEFS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "graph.h"

/*
 * The batch size at which shapes are inferred for the passes that need them. 2, not 1: a dimension
 * that is the batch then reads 2, and cannot be mistaken for a broadcast 1.
 */
#define OPT_SHAPE_BATCH 2

struct opt_ctx {
	struct rt_graph *g;
	enum rt_device dev;
	enum rt_precision precision; /* the CPU's: what FusedGemm's weights are packed for */
	uint64_t constant_bytes;     /* what the graph's constants take, kept by folding against its budget */
	uint64_t fold_cap;           /* the largest output folding makes (opt_fold_constants) */
	struct rt_opt_report *report;
	char *err;
	size_t err_cap;
	/* readers of each value, rebuilt by opt_index: the node of every input slot reading it */
	uint32_t *reader_start;  /* num_values + 1 offsets into readers */
	int32_t *readers;
	uint32_t indexed_values; /* values the index covers (later ones: read by their creator only) */
	bool *dead;              /* per node */
	uint32_t dead_cap;
	/* shapes at OPT_SHAPE_BATCH (opt_shapes), for values below num_shapes; dtype 0: unknown */
	struct rt_tensor *shapes;
	uint32_t num_shapes;
	bool shapes_distinct;    /* bound at OPT_SHAPE_BATCH (not at 1, the fallback) */
};

/* The report's kind for the GEMMs precision bf16 moved to AMX's tiles (convs, FusedGemm, FusedMatMul). */
#define RT_OPT_KIND_BF16 "GEMM in bf16 on AMX tiles"

/** Formats ctx->err; \return rc. */
int opt_error(struct opt_ctx *c, int rc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* ---- what reads what (edit.c) ---------------------------------------------------------------------- */

/** Rebuilds the readers index over the live nodes. \return 0 or -ENOMEM. */
int opt_index(struct opt_ctx *c);

/** Input slots of live nodes reading v, plus one if v is a graph output. */
uint32_t opt_num_readers(const struct opt_ctx *c, int32_t v);

/** The node reading v, if exactly one input slot of one node does and v is no graph output; else -1. */
int32_t opt_sole_reader(const struct opt_ctx *c, int32_t v);

/** The k-th reader of v (k < opt_num_readers, graph output not counted). */
int32_t opt_reader(const struct opt_ctx *c, int32_t v, uint32_t k);

/** Whether node n (>= 0) is live and op of the default ONNX domain. */
bool opt_is_op(const struct opt_ctx *c, int32_t n, const char *op);

/** Whether node n (>= 0) is live and op of batchwire's domain (a fused or fast-path node). */
bool opt_is_ours(const struct opt_ctx *c, int32_t n, const char *op);

/** Whether v is an initializer with data (a constant). */
bool opt_is_const(const struct opt_ctx *c, int32_t v);

/** v's constant float scalar (one element) in *out; false if v is none. */
bool opt_const_scalar(const struct opt_ctx *c, int32_t v, float *out);

/** The inferred shape of v, or NULL when unknown. */
const struct rt_tensor *opt_shape(const struct opt_ctx *c, int32_t v);

/* ---- editing (edit.c) -------------------------------------------------------------------------------- */

/**
 * A new initializer base + "/" + suffix (made unique), owning data (malloc'd or aligned_alloc'd).
 * \return its value index, or -ENOMEM (data is then freed).
 */
int32_t opt_add_initializer(struct opt_ctx *c, const char *base, const char *suffix, uint8_t dtype, int rank,
			    const int64_t *dims, void *data);

/** A new intermediate value base + "/" + suffix (made unique), its shape left to the plan. \return its index or -ENOMEM. */
int32_t opt_add_value(struct opt_ctx *c, const char *base, const char *suffix);

/**
 * Replaces the graph's node array with nodes (count of them, malloc'd, topologically ordered; the
 * old array is freed, not its nodes' contents, which nodes is expected to hold) and finds every
 * value's producer again. Invalidates the index; no node is dead. \return 0 or -ENOMEM.
 */
int opt_set_nodes(struct opt_ctx *c, struct rt_node *nodes, uint32_t count);

/** Zeroed float storage for n elements, 64-byte aligned, or NULL. */
float *opt_alloc_floats(int64_t n);

/**
 * Turns node dst into the fused node: takes src's name and attributes (src == dst: keeps its own),
 * sets op (batchwire's domain), inputs (n_in of them, RT_VALUE_NONE allowed) and one output, out.
 * src, when not dst, is killed. \return 0 or -ENOMEM.
 */
int opt_make_fused(struct opt_ctx *c, uint32_t dst, uint32_t src, const char *op, const int32_t *inputs,
		   uint16_t n_in, int32_t out);

/** Makes node n batchwire's op, keeping its inputs, outputs and attributes. \return 0 or -ENOMEM. */
int opt_rename_op(struct opt_ctx *c, uint32_t n, const char *op);

/** Moves node n into batchwire's domain under the same op name (a fast-path kernel). */
int opt_set_domain(struct opt_ctx *c, uint32_t n);

/** Frees what a node owns (name, op, inputs, outputs, attributes) and zeroes it. */
void opt_node_free(struct rt_node *n);

/** Frees node n's contents and marks it dead. */
void opt_kill(struct opt_ctx *c, uint32_t n);

/** Adds (or replaces) a STRING / FLOATS / INTS / INT / FLOAT attribute of node n. \return 0 or -ENOMEM. */
int opt_attr_string(struct rt_node *n, const char *name, const char *value);
int opt_attr_floats(struct rt_node *n, const char *name, const float *values, uint32_t count);
int opt_attr_ints(struct rt_node *n, const char *name, const int64_t *values, uint32_t count);
int opt_attr_int(struct rt_node *n, const char *name, int64_t value);
int opt_attr_float(struct rt_node *n, const char *name, float value);

/** Removes node n's attribute name, if present. */
void opt_attr_remove(struct rt_node *n, const char *name);

/**
 * Drops dead nodes and the values no live node reads or writes and that are neither graph inputs nor
 * outputs, renumbering the rest; recomputes producers. Invalidates the index and the shapes.
 * \return 0 or -ENOMEM.
 */
int opt_compact(struct opt_ctx *c);

/** Adds count to the report's entry what (a static string). */
void opt_report(struct opt_ctx *c, const char *what, uint32_t count);

/* ---- the passes ------------------------------------------------------------------------------------ */

/* fold.c: nodes whose inputs are all constants (Constant nodes included) become initializers. */
int opt_fold_constants(struct opt_ctx *c);
/* fold.c: shapes of every value at OPT_SHAPE_BATCH (or 1), from a plan of the graph; 0 even when
 * no plan can be made (the passes needing shapes then do nothing), or -ENOMEM. */
int opt_shapes(struct opt_ctx *c);
void opt_shapes_free(struct opt_ctx *c);
/* fuse_conv.c: Conv (+ BatchNormalization) (+ Add) (+ activation) -> FusedConv. */
int opt_fuse_conv(struct opt_ctx *c);
/* fuse_gemm.c: MatMul/Gemm with constant B (+ Add bias) (+ activation, + erf GELU) -> FusedGemm. */
int opt_fuse_gemm(struct opt_ctx *c);
/* fuse_matmul.c: MatMul of computed operands with their Reshape/Transpose and a scale -> FusedMatMul. */
int opt_fuse_matmul(struct opt_ctx *c);
/* fuse_matmul.c: FusedMatMul (scores) -> Softmax -> FusedMatMul (context) -> FusedAttention. After
 * opt_fast_paths: the Softmax is then batchwire's last-axis one. */
int opt_fuse_attention(struct opt_ctx *c);
/* fastpath.c: Softmax (last axis), LayerNormalization, 2-D MaxPool -> batchwire's fast kernels. */
int opt_fast_paths(struct opt_ctx *c);
/* nhwc.c: the FusedConvNhwc nodes fuse_conv made read and write NHWC bf16 tensors, with the
 * conversions where the region meets the rest of the graph. */
int opt_nhwc_region(struct opt_ctx *c);
/* fuse_gemm.c: at bf16, a FusedGemm only FusedGemms read (as A) writes its output in bf16. */
int opt_bf16_handoff(struct opt_ctx *c);

/* ---- activations as epilogues (fuse_conv.c, shared with fuse_gemm.c) -------------------------------- */

/*
 * Whether node n (reading v) is an activation an epilogue computes: Relu, LeakyRelu, or a Clip whose
 * bounds are constants. On success kind is "Relu"/"LeakyRelu"/"Clip" and params/nparams its
 * activation_params.
 */
bool opt_match_act(const struct opt_ctx *c, int32_t n, int32_t v, const char **kind, float *params,
		   uint32_t *nparams);

/** Sets "activation" (and "activation_params" when nparams > 0) on node n. \return 0 or -ENOMEM. */
int opt_set_act(struct rt_node *n, const char *kind, const float *params, uint32_t nparams);

#endif /* BW_RT_OPT_DEFS_H */
