/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * gpu/'s host side (library bwgpuhost): what the appliance runs on the host to serve a model on a
 * device. It sits above the runtime (it compiles the runtime's plans) and beside the device modules
 * (it drives them through struct gpu_ops); no CUDA, no DPDK.
 *
 *   rt_graph --gpu_compile--> gpu_compiled (a device program: one op list per allowed batch size)
 *            ops->program_load, ops->instance_create (per polling lcore: arenas, tables, graphs)
 *   bw_batch --gpu_executor_submit--> batch table + one graph launch
 *            gpu_executor_poll <-- completion words (mapped host memory) --> bw_completion
 *
 * The GPU's kernels are registered in the runtime's kernel registry (gpu_kernels_register) with
 * device RT_DEVICE_GPU: the planner resolves and shape-checks a GPU plan's nodes through them, and
 * their device_impl says how each node becomes device ops.
 */
#ifndef BW_GPU_HOST_H
#define BW_GPU_HOST_H

#include <sched.h>
#include <stddef.h>
#include <stdint.h>

#include <batchwire/batch.h>

#include "gpu.h"

struct rt_graph;

/** Registers the GPU's kernels with the runtime (idempotent). \return 0 or a negative errno. */
int gpu_kernels_register(void);

/* A model compiled for the device: the program a module loads, and where each op came from. */
struct gpu_compiled {
	struct gpu_program prog;                 /* its ops and constants are owned here */
	uint32_t layout;                         /* GPU_LAYOUT_NHWC when some CONV or POOL op runs NHWC (what
						  * GPU_LAYOUT_AUTO came to) */
	uint32_t *op_node[GPU_PROG_SIZES_MAX];   /* per size: the graph node index of each op */
	const struct rt_graph *graph;            /* for node names in error messages */
	uint32_t max_tasks;                      /* tasks one batch may have (the largest size) */
};

/* The precision a model runs in on the device ([model] precision). */
enum gpu_precision {
	GPU_PRECISION_FP32 = 0,
	GPU_PRECISION_FP16 = 1, /* float tensors and weights in half precision (converted at compile),
				 * accumulation in fp32; graph inputs and outputs stay fp32 */
	GPU_PRECISION_COUNT
};

/* Where convolutions keep their channels ([model] layout). */
enum gpu_layout {
	GPU_LAYOUT_AUTO = 0,  /* NHWC for fp16 (tensor cores' layout), NCHW for fp32 */
	GPU_LAYOUT_NCHW = 1,  /* the model's own */
	GPU_LAYOUT_NHWC = 2,  /* CONV and POOL in NHWC, weights permuted at compile; a PERMUTE where an op
			       * that is neither reads their tensors */
	GPU_LAYOUT_COUNT
};

struct gpu_compile_options {
	uint32_t precision; /* enum gpu_precision */
	uint32_t layout;    /* enum gpu_layout */
};

/**
 * Compiles a graph (loaded, not optimised for the CPU) for the device at each batch size: plans it
 * with RT_DEVICE_GPU (the planner folds constants on the host), lowers every remaining node through
 * its GPU kernel, gathers the constants into one blob, and lays out the batch table's segments.
 * \param sizes      the allowed batch sizes, ascending
 * \param precision  enum gpu_precision (the layout is GPU_LAYOUT_AUTO's: gpu_compile_with sets both)
 * \param err        one line: the node that cannot run on the device and why
 * \return 0 and *out, or a negative errno (-ENOTSUP for an op or shape the device does not run).
 */
int gpu_compile(const struct rt_graph *g, const int64_t *sizes, unsigned int nb_sizes, uint32_t precision,
		struct gpu_compiled **out, char *err, size_t cap);
/** gpu_compile with every option: precision and layout. */
int gpu_compile_with(const struct rt_graph *g, const int64_t *sizes, unsigned int nb_sizes,
		     const struct gpu_compile_options *o, struct gpu_compiled **out, char *err, size_t cap);
void gpu_compiled_free(struct gpu_compiled *c);

/** \return "fp32", "fp16": the names configs and options use; "?" for another value. */
const char *gpu_precision_name(uint32_t precision);
/** \return the enum gpu_precision of a name ("fp32", "fp16"), or -EINVAL. */
int gpu_precision_parse(const char *name);
/** \return "auto", "nchw", "nhwc": enum gpu_layout's names; "?" for another value. */
const char *gpu_layout_name(uint32_t layout);
/** \return the enum gpu_layout of a name, or -EINVAL. */
int gpu_layout_parse(const char *name);
/** \return "graph", "doorbell": enum gpu_launch_mode's names; "?" for another value. */
const char *gpu_launch_mode_name(uint32_t mode);
/** \return the enum gpu_launch_mode of a name ("graph", "doorbell"), or -EINVAL. */
int gpu_launch_mode_parse(const char *name);

/** \return the name of the node op op_index of size size_idx came from ("?" when out of range). */
const char *gpu_compiled_op_node(const struct gpu_compiled *c, uint32_t size_idx, uint32_t op_index);

/* ---- opening a device ------------------------------------------------------------------------------ */

#define GPU_HOST_FAKE_MODULE "fake" /* the module name that selects the fake device (gpu/fake.h) */

/* A device as a host-side program holds it: the module it came from, the device, what the probe said. */
struct gpu_host_device {
	struct gpu_module module;      /* handle NULL for the fake device */
	const struct gpu_ops *ops;
	struct gpu_dev *dev;
	int index;
	struct gpu_device_info info;   /* name, compute capability, memory */
};

/**
 * Loads a module (or the fake device when module is GPU_HOST_FAKE_MODULE), probes it and opens device
 * index.
 * \param module  the module file; NULL: libbwgpu.so where gpu_module_load looks
 * \param err     one line: the module not found, "no CUDA device present: ...", the index out of range
 * \return 0; -ENOENT, -ENOEXEC, -EPROTO (the module); -ENODEV (no such device); dev_open's error.
 */
int gpu_host_device_open(const char *module, int index, struct gpu_host_device *hd, char *err, size_t cap);

/**
 * gpu_host_device_open with the calling thread allowed on driver_cpus while the module probes and
 * opens the device, then put back on the CPUs it had. Why: the CUDA driver starts its helper threads
 * (cuInit, at the probe's first call, and context creation, at dev_open) on the calling thread, and
 * they inherit its affinity; called on a polling lcore they would share its core for the process's
 * life. A DPDK program passes its control threads' CPUs (rte_ctrl_thread_create's set), where the
 * driver's threads wake without taking a polling core's time; the fake's thread (GPU_FAKE_THREAD)
 * is created the same way, which is how the tests see it.
 * \param driver_cpus  NULL: the thread's affinity is left alone (gpu_host_device_open)
 * \return gpu_host_device_open's; also the negative errno of pthread_setaffinity_np (driver_cpus
 *         holds no CPU this process may use: nothing opened; or the old CPUs could not be put back:
 *         the device closed again), err naming which.
 */
int gpu_host_device_open_on(const char *module, int index, const cpu_set_t *driver_cpus, struct gpu_host_device *hd,
			    char *err, size_t cap);

/** Closes the device and unloads its module (its streams, programs and regions must be gone). */
void gpu_host_device_close(struct gpu_host_device *hd);

/* A model's program on a device: compiled from its graph, then checked and loaded on the device. */
struct gpu_host_program {
	struct gpu_compiled *compiled;
	struct gpu_loaded *loaded;
};

/**
 * gpu_compile_with, then the device's program_load: what every host-side program (the daemon, bwrun,
 * the benchmarks, the tests) does with a graph before making executors of it.
 * \param err  "compiling: ..." or "loading on DEVICE: ..."
 * \return 0 with p filled; gpu_compile_with's error (-ENOTSUP: a node the GPU does not run) or
 *         program_load's, with nothing left to free.
 */
int gpu_host_program_load(const struct gpu_host_device *hd, const struct rt_graph *g, const int64_t *sizes,
			  unsigned int nb_sizes, const struct gpu_compile_options *o, struct gpu_host_program *p,
			  char *err, size_t cap);

/** Unloads and frees what gpu_host_program_load made (p zeroed; a zeroed p is fine). */
void gpu_host_program_unload(const struct gpu_host_device *hd, struct gpu_host_program *p);

/* ---- the executor: one per (model, polling lcore) ------------------------------------------------- */

struct gpu_executor;

/**
 * Makes an instance of a loaded program on the caller's stream and the bookkeeping around it. Call it
 * on the thread that will submit and poll (the instance's graphs are captured on its stream).
 * \param nb_slots     batches of one size in flight at once
 * \param launch_mode  enum gpu_launch_mode (instance_create's)
 * \return the executor, or NULL with err and errno: EINVAL, ENOMEM, or instance_create's error.
 */
struct gpu_executor *gpu_executor_create(const struct gpu_ops *ops, struct gpu_dev *dev, struct gpu_loaded *loaded,
					 const struct gpu_compiled *compiled, struct gpu_stream *stream,
					 uint32_t nb_slots, uint32_t launch_mode, char *err, size_t cap);
void gpu_executor_destroy(struct gpu_executor *ex);

/**
 * (hot) Starts a batch: takes a free slot of its padded size, writes the batch table (each task's
 * input rows and output places as device addresses of registered memory, zero rows for the padding)
 * and launches that (size, slot)'s graph. No lock, allocation or system call.
 * \return 0 (the batch completes through gpu_executor_poll, once); -EINVAL (no such size, or the
 *         batch does not fit it); -EBUSY (every slot of that size in flight); -EFAULT (a task's
 *         memory is not registered with the device); -EIO (the launch failed; the device may be
 *         unhealthy). On error nothing was launched and the batch is the caller's to fail.
 */
int gpu_executor_submit(struct gpu_executor *ex, struct bw_batch *batch);

/**
 * (hot) Collects finished launches (at most max), in whatever order the device finished them, and
 * calls fn for each: status OK, or INTERNAL with the op and node a kernel faulted in.
 * \return the batches completed.
 */
unsigned int gpu_executor_poll(struct gpu_executor *ex, bw_completion_fn fn, void *ctx, unsigned int max);

/**
 * Completes every batch in flight with INTERNAL and msg (the device was lost: its launches will never
 * finish), freeing their slots. \return how many.
 */
unsigned int gpu_executor_fail_all(struct gpu_executor *ex, bw_completion_fn fn, void *ctx, const char *msg);

/** \return the last launch error's line (after submit returned -EIO), "" before any. */
const char *gpu_executor_error(const struct gpu_executor *ex);

/** \return batches launched and not yet polled. */
unsigned int gpu_executor_in_flight(const struct gpu_executor *ex);

/** The instance's batch sizes (in the program's order) and slots per size. */
unsigned int gpu_executor_nb_sizes(const struct gpu_executor *ex);
unsigned int gpu_executor_nb_slots(const struct gpu_executor *ex);
/** Batch size of size index size_idx (0 past the last). */
uint32_t gpu_executor_size(const struct gpu_executor *ex, unsigned int size_idx);
/** Graphs of (size index, slot) launched so far (any thread: a counter only its lcore writes). */
uint64_t gpu_executor_slot_launches(const struct gpu_executor *ex, unsigned int size_idx, unsigned int slot);

struct gpu_executor_stats {
	uint64_t launched;       /* graphs launched */
	uint64_t completed;      /* completions delivered, faulted ones included */
	uint64_t faulted;        /* completed with a kernel fault (INTERNAL) */
	uint64_t launch_errors;  /* submit returned -EIO */
	uint64_t no_slot;        /* submit returned -EBUSY */
};

void gpu_executor_stats(const struct gpu_executor *ex, struct gpu_executor_stats *st);

#endif /* BW_GPU_HOST_H */
