/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The CUDA module's private declarations, shared by its files: cuda.c (devices, registration,
 * streams), cuda_program.c (programs, instances, launch), cuda_doorbell.c (the doorbell launch mode),
 * cublaslt.c (cuBLASLt, opened with dlopen), cudnn.c (cuDNN for CONV ops, opened with dlopen) and the
 * launchers of program_kernels.cu. C: the .cu side sees only the extern "C" launchers.
 */
#ifndef BW_GPU_CUDA_DEFS_H
#define BW_GPU_CUDA_DEFS_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>             /* cublasLt.h uses FILE */

#include <cuda_runtime_api.h>
#include <cublasLt.h>          /* types only: the functions come from dlopen (struct cublaslt_api) */
#ifndef BW_HAVE_CUDNN
#define BW_HAVE_CUDNN 1        /* meson says 0 when the toolkit has no cudnn.h */
#endif
#if BW_HAVE_CUDNN
#include <cudnn.h>             /* types only: the functions come from dlopen (struct cudnn_api) */
#endif

#include "defs.h"

/*
 * The cuBLASLt functions the module calls, resolved with dlsym. __typeof__ keeps each pointer's type
 * the header's own, so a changed signature fails the build instead of the call.
 */
struct cublaslt_api {
	void *lib;             /* dlopen's handle; NULL until the first program with a GEMM op */
	char path[4096];       /* the file it came from */
	__typeof__(&cublasLtCreate) create;
	__typeof__(&cublasLtDestroy) destroy;
	__typeof__(&cublasLtGetStatusString) status_string;
	__typeof__(&cublasLtMatmulDescCreate) desc_create;
	__typeof__(&cublasLtMatmulDescDestroy) desc_destroy;
	__typeof__(&cublasLtMatmulDescSetAttribute) desc_set;
	__typeof__(&cublasLtMatrixLayoutCreate) layout_create;
	__typeof__(&cublasLtMatrixLayoutDestroy) layout_destroy;
	__typeof__(&cublasLtMatrixLayoutSetAttribute) layout_set;
	__typeof__(&cublasLtMatmulPreferenceCreate) pref_create;
	__typeof__(&cublasLtMatmulPreferenceDestroy) pref_destroy;
	__typeof__(&cublasLtMatmulPreferenceSetAttribute) pref_set;
	__typeof__(&cublasLtMatmulAlgoGetHeuristic) heuristic;
	__typeof__(&cublasLtMatmul) matmul;
};

/*
 * The cuDNN functions the module calls (cudnn.c), resolved with dlsym like struct cublaslt_api. They are
 * cuDNN's legacy (descriptor) API, which cuDNN 9 still exports from libcudnn.so.9 and marks deprecated
 * (no warning unless CUDNN_WARN_DEPRECATED is defined).
 */
struct cudnn_api {
	void *lib;             /* dlopen's handle; NULL until the first program with a CONV op */
	char path[4096];       /* the file it came from */
	size_t version;        /* cudnnGetVersion(): 90100 is 9.1.0 */
#if BW_HAVE_CUDNN
	__typeof__(&cudnnGetVersion) get_version;
	__typeof__(&cudnnGetErrorString) status_string;
	__typeof__(&cudnnCreate) create;
	__typeof__(&cudnnDestroy) destroy;
	__typeof__(&cudnnSetStream) set_stream;
	__typeof__(&cudnnCreateTensorDescriptor) tensor_create;
	__typeof__(&cudnnSetTensor4dDescriptor) tensor_set;
	__typeof__(&cudnnDestroyTensorDescriptor) tensor_destroy;
	__typeof__(&cudnnCreateFilterDescriptor) filter_create;
	__typeof__(&cudnnSetFilter4dDescriptor) filter_set;
	__typeof__(&cudnnDestroyFilterDescriptor) filter_destroy;
	__typeof__(&cudnnCreateConvolutionDescriptor) conv_create;
	__typeof__(&cudnnSetConvolution2dDescriptor) conv_set;
	__typeof__(&cudnnSetConvolutionGroupCount) conv_set_groups;
	__typeof__(&cudnnSetConvolutionMathType) conv_set_math;
	__typeof__(&cudnnDestroyConvolutionDescriptor) conv_destroy;
	__typeof__(&cudnnCreateActivationDescriptor) act_create;
	__typeof__(&cudnnSetActivationDescriptor) act_set;
	__typeof__(&cudnnDestroyActivationDescriptor) act_destroy;
	__typeof__(&cudnnFindConvolutionForwardAlgorithmEx) fwd_find;
	__typeof__(&cudnnConvolutionForward) conv_fwd;
	__typeof__(&cudnnConvolutionBiasActivationForward) conv_bias_act_fwd;
	__typeof__(&cudnnAddTensor) add_tensor;
	__typeof__(&cudnnActivationForward) act_fwd;
#endif
};

struct gpu_dev {
	int index;
	struct gpu_regions regions;
	struct cublaslt_api lt;     /* opened by the first program that needs it, closed by dev_close */
	struct cudnn_api dnn;       /* likewise for CONV ops; optional: without it CONV runs the generic kernel */
	bool dnn_tried;             /* cudnn_open looked once: it does not retry per program */
	char dnn_why[GPU_ERR_MAX];  /* why CONV ops do not use cuDNN on this device ("" when they may) */
	bool lost;
	char fault[GPU_ERR_MAX];
	/* the doorbell instances, parked around device-wide synchronising calls (cuda_doorbell.c); cold */
	pthread_mutex_t doorbells_lock;
	struct cuda_doorbell *doorbells; /* armed ones, linked by their next */
	uint32_t doorbell_parks;         /* cuda_doorbells_park calls not yet resumed */
};

struct gpu_stream {
	struct gpu_dev *dev;
	cudaStream_t stream;
};

/* cuda.c */
/** Records a runtime error: err's line, and the device's fault when it is sticky. \return -EIO. */
int cuda_fail(struct gpu_dev *dev, const char *call, cudaError_t e, char *err, size_t cap);
/** \return 0 while the device is healthy, else -EIO with its first fault in err. */
int cuda_check(const struct gpu_dev *dev, char *err, size_t cap);

/* cuda_lib.c */
/**
 * dlopen of a CUDA library the module does not link: $env (a file, then the only place looked), then
 * soname on the loader's path, then BW_CUDA_ROOT/lib64/soname.
 * \param what  its name in messages ("cuBLASLt")
 * \return the handle, its file in path; or NULL with why (the file that failed, or the places tried).
 */
void *cuda_lib_open(const char *what, const char *env, const char *soname, char *path, size_t path_cap, char *why,
		    size_t why_cap);

/* cublaslt.c */
/**
 * Opens cuBLASLt for dev once: $BW_CUBLASLT_LIB, then "libcublasLt.so.13" on the loader's path,
 * then BW_CUDA_ROOT/lib64; every function resolved. \return 0; -ENOTSUP naming the file or symbol.
 */
int cublaslt_open(struct gpu_dev *dev, char *err, size_t cap);
void cublaslt_close(struct gpu_dev *dev);

/* cudnn.c */
struct cudnn_prog; /* a loaded program's cuDNN handle and per-CONV-op plans */

/**
 * Opens cuDNN for dev once: BW_CUDNN=0 disables it; $BW_CUDNN_LIB (a file), then "libcudnn.so.9" on
 * the loader's path, then BW_CUDA_ROOT/lib64; every function resolved, version 9.x. Never an error to
 * the program: \return 0 when cuDNN may be used, else -ENOTSUP with dev->dnn_why saying why (disabled,
 * the files tried, a missing symbol, another major version). Later calls return the first answer.
 */
int cudnn_open(struct gpu_dev *dev);
void cudnn_close(struct gpu_dev *dev);
/**
 * Plans every CONV op of prog (the loaded copy) that cuDNN can run: descriptors, the algorithm found by
 * timing (cudnnFindConvolutionForwardAlgorithmEx) within a workspace cap, a warm-up run. Ops it cannot
 * plan keep the generic kernel. *out stays NULL when the program has no CONV op or cuDNN is absent.
 * \param workspace_bytes  raised to the largest workspace a plan needs (the instance allocates it)
 * \return 0; -ENOMEM or -EIO (a CUDA failure: err says which call).
 */
int cudnn_program_plan(struct gpu_dev *dev, const struct gpu_program *prog, const uint8_t *consts_dev,
		       struct cudnn_prog **out, size_t *workspace_bytes, char *err, size_t cap);
void cudnn_program_free(struct gpu_dev *dev, struct cudnn_prog *dp);
/** \return true when op i of size s has a cuDNN plan (NULL dp: none has). */
bool cudnn_planned(const struct cudnn_prog *dp, uint32_t s, uint32_t i);
/**
 * Records op i of size s into the capture of (s, slot) on stream: cudnnSetStream and the plan's calls
 * with the arena's addresses and the instance's workspace (at least the plans' largest). The caller
 * serialises it with every other user of the program's handle.
 * \return 0; -EIO or -ENOMEM with err naming the op and the call.
 */
int cudnn_record(struct cudnn_prog *dp, uint32_t s, uint32_t slot, uint32_t i, uint8_t *arena, void *workspace,
		 cudaStream_t stream, char *err, size_t cap);

/* cuda_program.c: the ops table's program, instance and launch entries */
int cuda_program_load(struct gpu_dev *dev, const struct gpu_program *prog, struct gpu_loaded **out, char *err,
		      size_t cap);
void cuda_program_unload(struct gpu_loaded *lp);
int cuda_instance_create(struct gpu_loaded *lp, struct gpu_stream *stream, uint32_t nb_slots, uint32_t mode,
			 struct gpu_instance **out, char *err, size_t cap);
void cuda_instance_destroy(struct gpu_instance *inst);
struct gpu_batch_table *cuda_instance_table(struct gpu_instance *inst, uint32_t size_idx, uint32_t slot);
volatile uint32_t *cuda_instance_word(struct gpu_instance *inst, uint32_t size_idx, uint32_t slot);
int cuda_instance_launch(struct gpu_instance *inst, uint32_t size_idx, uint32_t slot, char *err, size_t cap);
int cuda_instance_time(struct gpu_instance *inst, uint32_t size_idx, uint32_t slot, uint32_t iters,
		       double *ms_per_launch, char *err, size_t cap);

/* cuda_doorbell.c: the doorbell launch mode (gpu.h's GPU_LAUNCH_DOORBELL) */
struct cuda_doorbell;
/**
 * Instantiates graph (for device launch when device_launch) and uploads it on upload. what starts the
 * error line. \return 0; -ENOTSUP naming the node device launch refuses; -EIO.
 */
int cuda_graph_instantiate(struct gpu_dev *dev, cudaGraph_t graph, bool device_launch, cudaStream_t upload,
			   cudaGraphExec_t *exec, const char *what, char *err, size_t cap);
/** A ring and a dispatcher for graphs (instantiated for device launch, uploaded, idle), size * nb_slots + slot. */
int cuda_doorbell_create(struct gpu_dev *dev, const cudaGraphExec_t *graphs, uint32_t nb_graphs, uint32_t nb_slots,
			 struct cuda_doorbell **out, char *err, size_t cap);
/** Takes db off the device's list and stops its dispatcher after what was rung (waits for it). */
void cuda_doorbell_stop(struct cuda_doorbell *db);
/** Frees a stopped doorbell. It calls cudaFree and cudaFreeHost: the caller parks the others around it. */
void cuda_doorbell_free(struct cuda_doorbell *db);
/**
 * (cold) Parks every doorbell dispatcher of dev before a device-wide synchronising call (cudaFree,
 * cudaFreeHost, cudaHostUnregister, cudaDeviceSynchronize), which would otherwise wait for a
 * dispatcher kept busy by traffic: sets each ring's park_now, waits (bounded) until each stream is
 * empty. Rung launches wait. Nests; each call is paired with cuda_doorbells_resume.
 */
void cuda_doorbells_park(struct gpu_dev *dev);
/** (cold) Ends a park: the last one clears park_now and starts each dispatcher again. */
void cuda_doorbells_resume(struct gpu_dev *dev);
/** (hot) Rings for (size_idx, slot), checked by the caller: memory writes; a cudaGraphLaunch after idle. */
int cuda_doorbell_ring(struct cuda_doorbell *db, uint32_t size_idx, uint32_t slot, char *err, size_t cap);

/* program_kernels.cu: each returns a cudaError_t as an int (cudaGetLastError after the launch) */
/** Gather (scatter == 0) or scatter segments of table into/out of arena; blocks fixed at capture. */
int bwgpu_segments_launch(void *stream, const struct gpu_program_size *size, uint32_t max_segments,
			  const struct gpu_batch_table *table_dev, uint8_t *arena, int scatter, uint32_t blocks);
/** One op other than GEMM, item by item with gpu_op_item. Nothing is launched for 0 items. */
int bwgpu_op_launch(void *stream, const struct gpu_op *op, uint32_t op_index, uint8_t *arena, const uint8_t *consts,
		    uint32_t *fault_dev);
/** The fault pair (device memory) into the table and reset, a system-wide fence, then
 * *word_dev = table->generation. */
int bwgpu_complete_launch(void *stream, struct gpu_batch_table *table_dev, uint32_t *fault_dev, uint32_t *word_dev);

#endif /* BW_GPU_CUDA_DEFS_H */
