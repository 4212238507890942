/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * runtime: the models the appliance serves and what MODEL_INFO says about them: the built-in echo
 * model (outputs = inputs) and ONNX models (loaded, optimised and checked here; run by the executor of
 * exec/executor.h). DPDK-free: nothing here touches packets.
 */
#ifndef BW_RUNTIME_H
#define BW_RUNTIME_H

#include <stdint.h>

#include <batchwire/wire.h>

#define RT_MODEL_NAME_MAX 64
#define RT_MODELS_MAX 64
#define RT_BATCH_SIZES_MAX 32 /* as many as a batching configuration allows */
#define RT_MODEL_TENSORS_MAX 16
#define RT_ECHO_MODEL_ID 0
#define RT_ECHO_MODEL_NAME "echo"

enum rt_model_kind {
	RT_MODEL_ECHO, /* replies with its inputs as outputs */
	RT_MODEL_ONNX, /* an ONNX graph run by an executor */
};

struct rt_graph;
struct rt_opt_options;
struct rt_opt_report;

/* A model input or output as MODEL_INFO describes it; a dim of 0 is dynamic. */
struct rt_tensor_spec {
	char name[RT_MODEL_NAME_MAX];
	uint8_t dtype;
	uint8_t rank;
	uint32_t dims[BW_MAX_RANK];
	/* An integer input that indexes a constant table (a Gather's indices: token ids): its values
	 * must lie in [-index_bound, index_bound), the smallest such table's rows, or the Gather fails
	 * the whole batch at run time. 0: no bound known. */
	int64_t index_bound;
};

struct rt_model {
	uint32_t id;
	char name[RT_MODEL_NAME_MAX];
	enum rt_model_kind kind;
	uint16_t flags;            /* BW_MODEL_F_* */
	uint16_t priority_levels;  /* >= 1 */
	uint32_t max_batch_size;   /* 0: not batched */
	uint16_t num_batch_sizes;
	uint32_t batch_sizes[RT_BATCH_SIZES_MAX];
	uint16_t num_inputs;
	uint16_t num_outputs;
	struct rt_tensor_spec inputs[RT_MODEL_TENSORS_MAX];
	struct rt_tensor_spec outputs[RT_MODEL_TENSORS_MAX];
	/* RT_MODEL_ONNX */
	struct rt_graph *graph;    /* loaded and optimised; owned by the model */
	uint32_t input_row_bytes[RT_MODEL_TENSORS_MAX];  /* bytes of one batch row of each input */
	uint32_t output_row_bytes[RT_MODEL_TENSORS_MAX]; /* and of each output */
	uint32_t version;          /* served (MODEL_INFO's); 0: none. A reload changes it (atomic) */
};

/* The models being served, by id and by name. Filled at start-up, read-only afterwards. */
struct rt_registry {
	const struct rt_model *models[RT_MODELS_MAX];
	unsigned int count;
};

/** \return 0, -EEXIST when the id or name is taken, -ENOSPC when full, -EINVAL for an empty name. */
int rt_registry_add(struct rt_registry *reg, const struct rt_model *model);
const struct rt_model *rt_registry_find_id(const struct rt_registry *reg, uint32_t id);
/** name need not be NUL-terminated (it comes from the wire). */
const struct rt_model *rt_registry_find_name(const struct rt_registry *reg, const char *name, uint32_t len);

/** Fills the built-in echo model. \return 0 or -EINVAL when the name does not fit. */
int rt_echo_init(struct rt_model *model, uint32_t id, const char *name);

/**
 * Loads an ONNX model to serve batched: loads the file, optimises the graph for device and checks
 * what batching needs: at most BW_BATCH_TENSORS_MAX inputs and outputs, each with the batch
 * dimension first and every other dimension static (outputs checked by planning batches of 1 and 2).
 * Fills the tensor specs MODEL_INFO reports (dims[0] = 0: the batch) and the row sizes.
 * \param opts    how to optimise (rt_graph_optimize_with; NULL: fp32)
 * \param report  what optimisation did (may be NULL)
 * \param err     one line: the loader's error, or the tensor and dimension at fault
 * \return 0 or a negative errno; on error nothing is left to free.
 */
int rt_onnx_model_load(struct rt_model *model, uint32_t id, const char *name, const char *path, int device,
		       const struct rt_opt_options *opts, struct rt_opt_report *report, char *err, size_t cap);

/** Frees what a model owns (its graph). */
void rt_model_fini(struct rt_model *model);

/**
 * Writes the MODEL_INFO reply body of docs/protocol.md.
 * \return its length, or -EMSGSIZE when it does not fit cap bytes.
 */
int rt_model_describe(const struct rt_model *model, uint8_t *buf, uint32_t cap);

#endif /* BW_RUNTIME_H */
