/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The runtime's IR: an ONNX model as loaded (rt_graph), its tensors (rt_value) and nodes (rt_node) in
 * topological order, and the kernel interface every device registers through (rt_kernel). DPDK-free;
 * everything here is built at load time and read-only while the model runs.
 *
 * Layers inside runtime/:
 *   onnx_load.c  ONNX protobuf (protobuf-c, generated at build time) -> rt_graph
 *   registry.c   kernels keyed by (op, domain, opset range, dtype, device)
 *   kernels/     CPU kernels: shape inference at load, run at run time
 *   exec/        plan.c: shapes bound for one batch size, constant folding, liveness-based arena;
 *                exec.c: the sequential runner; executor.c: the lock-free multi-worker executor
 */
#ifndef BW_RT_GRAPH_H
#define BW_RT_GRAPH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <batchwire/wire.h>

#define RT_MAX_RANK BW_MAX_RANK
#define RT_ERR_MAX 256           /* room for one error message */
#define RT_DIM_SYMBOLIC (-1)     /* a dim_param or unknown dimension (the batch dimension) */
#define RT_VALUE_NONE (-1)       /* an optional input or output left out */

/* Element types: ONNX TensorProto.DataType numbers (enum bw_dtype), plus STRING, never computed. */
#define RT_DTYPE_STRING 8

/* A tensor's type and shape; data is NULL when only the shape is known (load-time inference). */
struct rt_tensor {
	uint8_t dtype;
	uint8_t rank;
	int64_t dims[RT_MAX_RANK];
	void *data;
};

/** Elements of a shape (1 for a scalar); 0 if any dim is 0; -1 if any dim is symbolic, or if the
 * product passes INT64_MAX (a shape no plan takes). */
int64_t rt_tensor_elems(const struct rt_tensor *t);
/** Bytes per element of a dtype, 0 for STRING or an unknown type. */
size_t rt_dtype_size(uint8_t dtype);
/** Lower-case ONNX name of a dtype ("float", "int64"...), "unknown" otherwise. */
const char *rt_dtype_name(uint8_t dtype);

enum rt_value_kind {
	RT_VALUE_INPUT,        /* a graph input: filled from the batch */
	RT_VALUE_INITIALIZER,  /* constant data from the model file */
	RT_VALUE_INTERMEDIATE, /* produced by a node */
};

/* One tensor of the graph. */
struct rt_value {
	char *name;
	enum rt_value_kind kind;
	struct rt_tensor tensor; /* dtype and shape as declared or inferred; data for initializers */
	size_t nbytes;           /* of data, when known */
	int32_t producer;        /* node index, or -1 */
	bool is_output;          /* a graph output */
};

enum rt_attr_type {
	RT_ATTR_FLOAT = 1,
	RT_ATTR_INT = 2,
	RT_ATTR_STRING = 3,
	RT_ATTR_TENSOR = 4,
	RT_ATTR_GRAPH = 5,
	RT_ATTR_FLOATS = 6,
	RT_ATTR_INTS = 7,
	RT_ATTR_STRINGS = 8,
}; /* ONNX AttributeProto.AttributeType numbers */

struct rt_attr {
	char *name;
	enum rt_attr_type type;
	float f;
	int64_t i;
	char *s;                 /* STRING (NUL-terminated copy) */
	uint32_t count;          /* FLOATS, INTS, STRINGS */
	float *floats;
	int64_t *ints;
	char **strings;
	struct rt_tensor tensor; /* TENSOR: data owned by the graph */
};

struct rt_kernel;

struct rt_node {
	char *name;              /* the model's, or "<op_type>_<index>" when it had none */
	char *op_type;
	char *domain;            /* "" for the default ONNX domain */
	int64_t opset;           /* the model's opset for this node's domain */
	uint16_t num_inputs;
	uint16_t num_outputs;
	int32_t *inputs;         /* value indices, RT_VALUE_NONE for an omitted optional input */
	int32_t *outputs;
	uint16_t num_attrs;
	struct rt_attr *attrs;
	const struct rt_kernel *kernel; /* resolved at load */
};

struct rt_opset {
	char *domain;
	int64_t version;
};

struct rt_graph {
	char *name;
	int64_t ir_version;
	uint16_t num_opsets;
	struct rt_opset *opsets;
	uint32_t num_values;
	struct rt_value *values;
	uint32_t num_nodes;
	struct rt_node *nodes;   /* topological order */
	uint32_t num_inputs;
	int32_t *inputs;         /* graph inputs that are not initializers, in model order */
	uint32_t num_outputs;
	int32_t *outputs;
	uint64_t memory_budget;  /* bytes its constants and its executors' arenas may take; 0: no limit */
};

/** The bytes the graph's constants (initializers, folded and packed ones) take now. */
uint64_t rt_graph_constant_bytes(const struct rt_graph *graph);

/** \return the attribute named name, or NULL. */
const struct rt_attr *rt_node_attr(const struct rt_node *node, const char *name);
/** Attribute getters with a default when absent. */
int64_t rt_attr_int(const struct rt_node *node, const char *name, int64_t dflt);
float rt_attr_float(const struct rt_node *node, const char *name, float dflt);
const char *rt_attr_string(const struct rt_node *node, const char *name, const char *dflt);

/* ---- kernels ---------------------------------------------------------------------------------- */

enum rt_device {
	RT_DEVICE_CPU = 0,
	RT_DEVICE_GPU = 1,
};

/*
 * A kernel: one op for a range of opsets, a set of dtypes and one device. infer runs at load, once
 * per node and batch size: it checks attributes and input types and writes each output's dtype and
 * shape (inputs whose data is known at load, initializers and folded constants, carry it; others
 * have data NULL). run computes; it may not allocate, lock or make a system call: what it needs
 * beyond its outputs it asks for with scratch_bytes and gets from the arena.
 */
struct rt_kernel {
	const char *op_type;
	const char *domain;       /* "" for the default ONNX domain */
	int64_t opset_min, opset_max;
	uint32_t dtypes;          /* bit (1 << dtype) for every input dtype it computes */
	enum rt_device device;
	/** \return 0, or -EINVAL/-ENOTSUP with err naming the attribute or input at fault. */
	int (*infer)(const struct rt_node *node, const struct rt_tensor *inputs, struct rt_tensor *outputs,
		     char *err, size_t err_cap);
	/** Scratch bytes run needs for these shapes (NULL: none). */
	size_t (*scratch_bytes)(const struct rt_node *node, const struct rt_tensor *inputs,
				const struct rt_tensor *outputs);
	/** \return 0, or a negative errno with err naming what failed. */
	int (*run)(const struct rt_node *node, const struct rt_tensor *inputs, struct rt_tensor *outputs,
		   void *scratch, char *err, size_t err_cap);
	/* A device runtime's own description of the kernel, NULL for the CPU's: the GPU's kernels have no
	 * run (they are never called on the host) and carry here how the node becomes device ops. */
	const void *device_impl;
	/**
	 * The input whose bytes output 0 may take, or -1 (NULL: never). Only for an input that run
	 * reads element by element, each only to compute the same element of output 0 and before
	 * writing it (a fused conv's residual). The planner places the output there where the input
	 * has output 0's dtype and shape and nothing reads it after this node
	 * (rt_plan_step_info.in_place_input).
	 */
	int (*in_place)(const struct rt_node *node, const struct rt_tensor *inputs, const struct rt_tensor *outputs);
};

#define RT_DTYPE_BIT(d) (UINT32_C(1) << (d))

/** Registers kernels (device runtimes call this at start-up). \return 0 or -ENOSPC / -EEXIST. */
int rt_kernels_register(const struct rt_kernel *kernels, unsigned int count);

/**
 * Finds the kernel for an op at an opset, input dtype and device.
 * \return the kernel, or NULL with why saying whether the op, the opset or the dtype is unsupported.
 */
const struct rt_kernel *rt_kernel_find(const char *op_type, const char *domain, int64_t opset, uint8_t dtype,
				       enum rt_device device, char *why, size_t why_cap);

/**
 * Registers the CPU kernels of runtime/kernels (idempotent); chooses their instruction set first.
 * \return 0 or a negative errno (rt_cpu_isa_select's, for a BW_CPU_ISA this host cannot honour).
 */
int rt_cpu_kernels_register(void);

/* ---- the CPU kernels' instruction set ------------------------------------------------------------ */

/* Levels in increasing order: each includes the ones below it. */
enum rt_cpu_isa {
	RT_CPU_ISA_BASELINE, /* any x86-64: portable C and OpenBLAS */
	RT_CPU_ISA_AVX2,     /* AVX2 and FMA: batchwire's packed GEMMs and Winograd */
	RT_CPU_ISA_AVX512,   /* AVX-512 F/BW/DQ/VL */
	RT_CPU_ISA_AMX,      /* AMX tiles and AMX-BF16 */
	RT_CPU_ISA_COUNT,
};

/* Names a level (baseline, avx2, avx512, amx) to run at or below what the CPU runs. */
#define RT_CPU_ISA_ENV "BW_CPU_ISA"

/**
 * Chooses, once per process, the level the CPU kernels run: the highest level with kernels built
 * that is no higher than what this CPU and kernel run, or than RT_CPU_ISA_ENV names. Later calls
 * return the first call's result.
 * \param err  why it failed (may be NULL)
 * \return 0, -EINVAL for a value that names no level, -ENOTSUP for a level this CPU lacks.
 */
int rt_cpu_isa_select(char *err, size_t cap);

/** The level the kernels run (baseline when selection failed). */
enum rt_cpu_isa rt_cpu_isa_active(void);

/** The highest level this CPU and kernel run, whatever was asked for or built. */
enum rt_cpu_isa rt_cpu_isa_detected(void);

const char *rt_cpu_isa_name(enum rt_cpu_isa isa);

/**
 * One line for start-up logs and bwrun: the level that runs and why, the CPU's highest, and the core
 * OpenBLAS chose. \return snprintf's.
 */
int rt_cpu_isa_describe(char *buf, size_t cap);

/* ---- loading ----------------------------------------------------------------------------------- */

/**
 * Loads an ONNX model file: checks IR version and opsets, reads initializers (raw and typed fields,
 * external data confined to the model's directory), sorts nodes topologically (a cycle is an
 * error), and resolves every node's CPU kernel and runs its shape inference where shapes are known.
 * \param err  one line naming the node and field at fault
 * \return the graph, or NULL.
 */
struct rt_graph *rt_graph_load(const char *path, char *err, size_t err_cap);

/** The same from bytes in memory; external data paths resolve against dir (NULL: refused). */
struct rt_graph *rt_graph_load_buffer(const void *buf, size_t len, const char *dir, char *err, size_t err_cap);

void rt_graph_free(struct rt_graph *graph);

/* ---- optimisation at load ---------------------------------------------------------------------- */

#define RT_OPT_KINDS_MAX 16

/* What rt_graph_optimize did, for bwrun's placement report and the daemon's load log. */
struct rt_opt_report {
	uint32_t nodes_before;
	uint32_t nodes_after;
	uint32_t num_kinds;
	struct {
		const char *what;   /* "Conv+BatchNormalization+Relu", "weights pre-packed", ... (static) */
		uint32_t count;
	} kinds[RT_OPT_KINDS_MAX];
};

/* What a CPU model computes its GEMMs in. Requests and replies are fp32 either way. */
enum rt_precision {
	RT_PRECISION_FP32, /* IEEE single throughout */
	RT_PRECISION_BF16, /* FusedGemm's weights and activations rounded to bf16, fp32 accumulation and
			    * outputs, on AMX tiles (the AMX level, rt_cpu_isa_active) */
	RT_PRECISION_COUNT,
};

const char *rt_precision_name(enum rt_precision precision);

/** \return the precision named (fp32, bf16), or -EINVAL. */
int rt_precision_parse(const char *name);

/**
 * Whether this CPU's kernels compute at precision; if not, why in one line (err).
 * \return 0 or -ENOTSUP.
 */
int rt_precision_check(enum rt_precision precision, char *err, size_t cap);

struct rt_opt_options {
	enum rt_precision precision; /* the CPU's; the GPU's is the device compiler's (gpu/host) */
	uint64_t memory_budget;      /* the graph's memory_budget from here on (0: none): what folding may
				      * add is held to it, before each allocation */
};

/* A folded constant is made only up to this size, or twice the file's largest constant (a Transpose
 * or Cast of a weight): a larger one (a file of a few hundred bytes can ask for gigabytes) is left
 * to run time, where the planner's arena and the budget judge it. */
#define RT_FOLD_BYTES_MAX ((size_t)16 << 20)

/**
 * Rewrites a loaded graph for the device before planning: exact fusions, the kernels' preferred
 * weight layouts, weights pre-packed once (at opts->precision: fp32 when opts is NULL). At fp32 the
 * graph computes the same function afterwards (up to float rounding of folded constants).
 * report may be NULL.
 * \return 0, or a negative errno with err naming the node at fault (the graph is then unusable);
 *         -ENOTSUP for a precision this CPU's kernels lack.
 */
int rt_graph_optimize_with(struct rt_graph *graph, enum rt_device device, const struct rt_opt_options *opts,
			   struct rt_opt_report *report, char *err, size_t err_cap);

/** rt_graph_optimize_with at fp32. */
int rt_graph_optimize(struct rt_graph *graph, enum rt_device device, struct rt_opt_report *report, char *err,
		      size_t err_cap);

/** \return the index of the value with this name, or -1. */
int32_t rt_graph_value_find(const struct rt_graph *graph, const char *name);

#endif /* BW_RT_GRAPH_H */
