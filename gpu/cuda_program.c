/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Device programs on the CUDA module: load (check, copy, constants to the device,
 * a cuBLASLt plan per GEMM op), instances (per (size, slot) an arena, a mapped batch table, a mapped
 * completion word and one CUDA graph: gather, the ops, scatter, completion write), and the launch,
 * which is one cudaGraphLaunch. Everything that allocates or asks the library anything happens at
 * load or instance creation, so the polling lcore's launch does nothing else.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "copy_plan.h"
#include "cuda_defs.h"
#include "program_math.h"

/*
 * Per instance: the workspace the heuristic may choose algorithms for. 32 MiB is NVIDIA's
 * recommendation for Hopper (cuBLAS's own default workspace there): below it, the heuristic leaves
 * out split-K and stream-K algorithms that need more scratch, which the small-batch GEMMs served here
 * are the ones to gain from.
 */
#define CUBLASLT_WORKSPACE_BYTES (32u << 20)
#define TABLE_ALIGN_BYTES 64                /* batch tables start on a cache line */
#define WORDS_ALIGN_BYTES 64
/* A launch's fault pair (program_math.h: code, op) in device memory just past the program's arena:
 * the kernels raise faults there, the completion kernel copies them into the mapped table. */
#define FAULT_PAIR_BYTES 64
#define FAULT_PAIR(arena, size) ((uint32_t *)(void *)((arena) + (size).arena_bytes))

/* The cuBLASLt side of one GEMM op: row-major C = op(A) op(B) is run as column-major C^T = op(B)^T op(A)^T. */
struct gemm_plan {
	cublasLtMatmulDesc_t desc;
	cublasLtMatrixLayout_t lt_a;   /* cuBLAS's A: the op's B */
	cublasLtMatrixLayout_t lt_b;   /* cuBLAS's B: the op's A */
	cublasLtMatrixLayout_t lt_d;   /* C and D: the op's output (beta is 0: C is never read) */
	cublasLtMatmulAlgo_t algo;
	bool bias_in_arena;            /* its pointer differs per slot: set at capture */
};

struct gpu_loaded {
	struct gpu_dev *dev;
	struct gpu_program *prog;             /* our copy: ops and alpha values live here */
	uint8_t *consts_dev;                  /* NULL when the program has no constants */
	cublasLtHandle_t lt;                  /* NULL when the program has no GEMM op */
	struct gemm_plan *plans[GPU_PROG_SIZES_MAX]; /* per size, nb_ops entries; GEMM ops' filled */
	struct cudnn_prog *dnn;               /* NULL when no CONV op runs on cuDNN (cudnn.c) */
	size_t workspace_bytes;               /* each instance's: cuBLASLt's and the largest cuDNN plan's */
	/* two lcores creating instances at once would both set an arena bias pointer on a shared
	 * descriptor between setting it and recording the matmul, or the cuDNN handle's stream between
	 * setting it and recording a convolution (start-up only) */
	pthread_mutex_t capture_lock;
};

struct instance_graph {
	uint8_t *arena;          /* device memory, arena_bytes of its size */
	cudaGraphExec_t exec;
};

struct gpu_instance {
	struct gpu_loaded *lp;
	struct gpu_stream *stream;
	uint32_t nb_sizes, nb_slots;
	size_t table_stride;               /* bytes between two batch tables */
	uint8_t *tables;                   /* host: table (size, slot) at (size * nb_slots + slot) * stride */
	uint8_t *tables_dev;               /* their device address */
	volatile uint32_t *words;          /* host: word (size, slot) at size * nb_slots + slot */
	uint32_t *words_dev;
	void *workspace;                   /* cuBLASLt's and cuDNN's (lp->workspace_bytes); shared by the
					    * graphs and the ops: the stream serialises them */
	uint32_t mode;                     /* enum gpu_launch_mode */
	struct cuda_doorbell *doorbell;    /* GPU_LAUNCH_DOORBELL's ring and dispatcher (cuda_doorbell.c) */
	struct instance_graph graphs[];    /* nb_sizes * nb_slots */
};

static const float g_beta_zero = 0.0f;

/* A failed allocation is -ENOMEM to the caller; anything else -EIO (cuda_fail's). */
static int alloc_fail(struct gpu_dev *dev, const char *call, cudaError_t e, char *err, size_t cap)
{
	int rc = cuda_fail(dev, call, e, err, cap);

	return e == cudaErrorMemoryAllocation ? -ENOMEM : rc;
}

static int lt_fail(const struct gpu_dev *dev, uint32_t s, uint32_t i, const char *call, cublasStatus_t st,
		   char *err, size_t cap)
{
	gpu_err(err, cap, "size %u op %u (GEMM): %s: %s", s, i, call, dev->lt.status_string(st));
	return st == CUBLAS_STATUS_ALLOC_FAILED ? -ENOMEM : st == CUBLAS_STATUS_NOT_SUPPORTED ? -ENOTSUP : -EIO;
}

/*
 * The alignment cuBLASLt may count on for an operand: the base (cudaMalloc's, 256 bytes) plus its
 * offset, and every batch's stride. The heuristic assumes 256 unless told, and an algorithm picked
 * for 256 would refuse an operand at, say, offset 64 when the matmul runs.
 */
static uint32_t operand_align_bytes(const struct gpu_ref *r, int64_t batch, int64_t stride_elems, uint32_t elem_bytes)
{
	uint64_t bits = r->offset | GPU_PROG_ALIGN;

	if (batch > 1)
		bits |= (uint64_t)stride_elems * elem_bytes;
	return (uint32_t)(bits & (~bits + 1)); /* the lowest bit set: at most GPU_PROG_ALIGN */
}

static int layout_make(const struct gpu_dev *dev, uint32_t s, uint32_t i, cublasLtMatrixLayout_t *l,
		       cudaDataType_t type, int64_t rows, int64_t cols, int64_t ld, int64_t batch, int64_t stride,
		       char *err, size_t cap)
{
	const struct cublaslt_api *lt = &dev->lt;
	cublasStatus_t st = lt->layout_create(l, type, (uint64_t)rows, (uint64_t)cols, ld);

	if (st == CUBLAS_STATUS_SUCCESS && batch > 1) {
		int32_t count = (int32_t)batch;

		st = lt->layout_set(*l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count));
		if (st == CUBLAS_STATUS_SUCCESS) /* 0 broadcasts one matrix over the batch */
			st = lt->layout_set(*l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof(stride));
	}
	return st == CUBLAS_STATUS_SUCCESS ? 0 : lt_fail(dev, s, i, "cublasLtMatrixLayout", st, err, cap);
}

/*
 * The data type of a GEMM op: float32, or float16 (fp16 programs: A, B, C/D and the bias all 16F, the
 * compute and alpha/beta still float). The compiler never mixes them within one GEMM (fp16 mode
 * converts every float tensor, and CAST ops meet the graph's float32 inputs and outputs).
 * \return 0 and *type, *elem_bytes; -EINVAL naming the op.
 */
static int gemm_dtype(const struct gpu_op *op, uint32_t s, uint32_t i, cudaDataType_t *type, uint32_t *elem_bytes,
		      char *err, size_t cap)
{
	uint32_t d = op->out.dtype;

	if ((d != BW_DTYPE_FLOAT && d != BW_DTYPE_FLOAT16) || op->in[0].dtype != d || op->in[1].dtype != d ||
	    (op->in[2].space != GPU_SPACE_NONE && op->in[2].dtype != d)) {
		gpu_err(err, cap, "size %u op %u (GEMM): dtypes A %u, B %u, bias %u, out %u: cuBLASLt plans all float32 "
			"(1) or all float16 (10)", s, i, op->in[0].dtype, op->in[1].dtype,
			op->in[2].space != GPU_SPACE_NONE ? op->in[2].dtype : d, d);
		return -EINVAL;
	}
	*type = d == BW_DTYPE_FLOAT16 ? CUDA_R_16F : CUDA_R_32F;
	*elem_bytes = gpu_dtype_bytes(d);
	return 0;
}

static int gemm_plan_make(struct gpu_loaded *lp, uint32_t s, uint32_t i, char *err, size_t cap)
{
	const struct gpu_dev *dev = lp->dev;
	const struct cublaslt_api *lt = &dev->lt;
	const struct gpu_op *op = &lp->prog->sizes[s].ops[i];
	struct gemm_plan *p = &lp->plans[s][i];
	int64_t m = op->u.gemm.m, n = op->u.gemm.n, k = op->u.gemm.k, batch = op->u.gemm.batch;
	int32_t trans_a = op->u.gemm.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N; /* cuBLAS's A is the op's B */
	int32_t trans_b = op->u.gemm.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
	bool bias = op->in[2].space != GPU_SPACE_NONE, relu = op->fn == GPU_ACT_RELU;
	uint32_t epilogue = bias ? (relu ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_BIAS) :
				   (relu ? CUBLASLT_EPILOGUE_RELU : CUBLASLT_EPILOGUE_DEFAULT);
	uint64_t workspace = CUBLASLT_WORKSPACE_BYTES;
	uint32_t align_a, align_b, align_d, eb;
	cublasLtMatmulPreference_t pref = NULL;
	cublasLtMatmulHeuristicResult_t found;
	cudaDataType_t type;
	int nb_found = 0, rc;
	cublasStatus_t st;

	rc = gemm_dtype(op, s, i, &type, &eb, err, cap);
	if (rc < 0)
		return rc;
	align_a = operand_align_bytes(&op->in[1], batch, op->u.gemm.stride_b, eb);
	align_b = operand_align_bytes(&op->in[0], batch, op->u.gemm.stride_a, eb);
	align_d = operand_align_bytes(&op->out, batch, op->u.gemm.stride_c, eb);
	/* FP32 accumulation and float alpha/beta for both types: 16F data is 16F storage only */
	st = lt->desc_create(&p->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F);
	if (st == CUBLAS_STATUS_SUCCESS)
		st = lt->desc_set(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &trans_a, sizeof(trans_a));
	if (st == CUBLAS_STATUS_SUCCESS)
		st = lt->desc_set(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &trans_b, sizeof(trans_b));
	if (st == CUBLAS_STATUS_SUCCESS && epilogue != CUBLASLT_EPILOGUE_DEFAULT)
		st = lt->desc_set(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof(epilogue));
	if (st == CUBLAS_STATUS_SUCCESS && bias && type == CUDA_R_16F) {
		/* said, not left to the default (D's type, the same): the float32 path stays as it was run */
		int32_t bias_type = (int32_t)type;

		st = lt->desc_set(p->desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type, sizeof(bias_type));
	}
	if (st == CUBLAS_STATUS_SUCCESS && bias && op->in[2].space == GPU_SPACE_CONST) {
		/* a constant: one address for every slot of every instance, set once */
		const void *bias_dev = lp->consts_dev + op->in[2].offset;

		st = lt->desc_set(p->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias_dev, sizeof(bias_dev));
	}
	if (st != CUBLAS_STATUS_SUCCESS)
		return lt_fail(dev, s, i, "cublasLtMatmulDesc", st, err, cap);
	p->bias_in_arena = bias && op->in[2].space == GPU_SPACE_ARENA;

	/* column-major views of the row-major buffers: a stored [r x c] row-major is [c x r] column-major */
	rc = op->u.gemm.trans_b ?
		layout_make(dev, s, i, &p->lt_a, type, k, n, k, batch, op->u.gemm.stride_b, err, cap) :
		layout_make(dev, s, i, &p->lt_a, type, n, k, n, batch, op->u.gemm.stride_b, err, cap);
	if (rc == 0)
		rc = op->u.gemm.trans_a ?
			layout_make(dev, s, i, &p->lt_b, type, m, k, m, batch, op->u.gemm.stride_a, err, cap) :
			layout_make(dev, s, i, &p->lt_b, type, k, m, k, batch, op->u.gemm.stride_a, err, cap);
	if (rc == 0)
		rc = layout_make(dev, s, i, &p->lt_d, type, n, m, n, batch, op->u.gemm.stride_c, err, cap);
	if (rc < 0)
		return rc;

	st = lt->pref_create(&pref);
	if (st == CUBLAS_STATUS_SUCCESS)
		st = lt->pref_set(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace, sizeof(workspace));
	if (st == CUBLAS_STATUS_SUCCESS)
		st = lt->pref_set(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &align_a, sizeof(align_a));
	if (st == CUBLAS_STATUS_SUCCESS)
		st = lt->pref_set(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &align_b, sizeof(align_b));
	if (st == CUBLAS_STATUS_SUCCESS)
		st = lt->pref_set(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &align_d, sizeof(align_d));
	if (st == CUBLAS_STATUS_SUCCESS)
		st = lt->pref_set(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &align_d, sizeof(align_d));
	if (st == CUBLAS_STATUS_SUCCESS)
		st = lt->heuristic(lp->lt, p->desc, p->lt_a, p->lt_b, p->lt_d, p->lt_d, pref, 1, &found, &nb_found);
	if (pref != NULL)
		lt->pref_destroy(pref);
	if (st != CUBLAS_STATUS_SUCCESS && st != CUBLAS_STATUS_NOT_SUPPORTED)
		return lt_fail(dev, s, i, "cublasLtMatmulAlgoGetHeuristic", st, err, cap);
	if (st == CUBLAS_STATUS_NOT_SUPPORTED || nb_found == 0 || found.state != CUBLAS_STATUS_SUCCESS) {
		gpu_err(err, cap,
			"size %u op %u (GEMM batch %lld m %lld n %lld k %lld, alignment %u/%u/%u bytes): cuBLASLt has no "
			"algorithm within a %u-byte workspace", s, i, (long long)batch, (long long)m, (long long)n,
			(long long)k, align_a, align_b, align_d, CUBLASLT_WORKSPACE_BYTES);
		return -ENOTSUP;
	}
	p->algo = found.algo;
	return 0;
}

static void gemm_plan_free(const struct gpu_dev *dev, struct gemm_plan *p)
{
	if (p->lt_a != NULL)
		dev->lt.layout_destroy(p->lt_a);
	if (p->lt_b != NULL)
		dev->lt.layout_destroy(p->lt_b);
	if (p->lt_d != NULL)
		dev->lt.layout_destroy(p->lt_d);
	if (p->desc != NULL)
		dev->lt.desc_destroy(p->desc);
}

/*
 * Runs every GEMM plan once at load, outside any capture, on scratch (an arena of the largest size and
 * a workspace; its contents do not matter): the first cublasLtMatmul of a handle sets up its
 * internals and loads each algorithm's kernels (lazily loaded modules), work that has no place inside
 * a stream capture, which graph_capture would otherwise be the first to do. cuDNN's plans get the same
 * (cudnn.c's warm-up runs). Errors are the library's, as a capture would have met them.
 */
static int gemm_warm_up(struct gpu_loaded *lp, char *err, size_t cap)
{
	struct gpu_dev *dev = lp->dev;
	const struct gpu_program *prog = lp->prog;
	uint8_t *arena = NULL, *workspace = NULL;
	uint64_t arena_bytes = 0;
	cublasStatus_t st = CUBLAS_STATUS_SUCCESS;
	cudaError_t e;

	for (uint32_t s = 0; s < prog->nb_sizes; s++)
		if (prog->sizes[s].arena_bytes > arena_bytes)
			arena_bytes = prog->sizes[s].arena_bytes;
	e = cudaMalloc((void **)&arena, arena_bytes + FAULT_PAIR_BYTES);
	if (e == cudaSuccess)
		e = cudaMalloc((void **)&workspace, CUBLASLT_WORKSPACE_BYTES);
	if (e != cudaSuccess) {
		cudaFree(arena);
		return alloc_fail(dev, "cudaMalloc (cuBLASLt warm-up scratch)", e, err, cap);
	}
	for (uint32_t s = 0; st == CUBLAS_STATUS_SUCCESS && s < prog->nb_sizes; s++) {
		for (uint32_t i = 0; st == CUBLAS_STATUS_SUCCESS && i < prog->sizes[s].nb_ops; i++) {
			const struct gpu_op *op = &prog->sizes[s].ops[i];
			struct gemm_plan *p = &lp->plans[s][i];

			if (op->code != GPU_OP_GEMM)
				continue;
			if (p->bias_in_arena) {
				const void *bias_dev = arena + op->in[2].offset;

				/* set again per slot at capture, under the capture lock */
				st = dev->lt.desc_set(p->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias_dev, sizeof(bias_dev));
			}
			if (st == CUBLAS_STATUS_SUCCESS)
				st = dev->lt.matmul(lp->lt, p->desc, &op->alpha, gpu_ref_addr(&op->in[1], arena, lp->consts_dev),
						    p->lt_a, gpu_ref_addr(&op->in[0], arena, lp->consts_dev), p->lt_b,
						    &g_beta_zero, gpu_ref_addr(&op->out, arena, lp->consts_dev), p->lt_d,
						    gpu_ref_addr(&op->out, arena, lp->consts_dev), p->lt_d, &p->algo,
						    workspace, CUBLASLT_WORKSPACE_BYTES, NULL);
			if (st != CUBLAS_STATUS_SUCCESS)
				gpu_err(err, cap, "size %u op %u (GEMM): cublasLtMatmul (warm-up at load): %s", s, i,
					dev->lt.status_string(st));
		}
	}
	e = cudaDeviceSynchronize();
	cudaFree(workspace);
	cudaFree(arena);
	if (st != CUBLAS_STATUS_SUCCESS)
		return st == CUBLAS_STATUS_ALLOC_FAILED ? -ENOMEM : -EIO;
	if (e != cudaSuccess)
		return cuda_fail(dev, "cuBLASLt warm-up (cudaDeviceSynchronize)", e, err, cap);
	return 0;
}

static bool program_has_op(const struct gpu_program *prog, uint32_t code)
{
	for (uint32_t s = 0; s < prog->nb_sizes; s++)
		for (uint32_t i = 0; i < prog->sizes[s].nb_ops; i++)
			if (prog->sizes[s].ops[i].code == code)
				return true;
	return false;
}

void cuda_program_unload(struct gpu_loaded *lp)
{
	uint32_t s, i;

	if (lp == NULL)
		return;
	cudaSetDevice(lp->dev->index);
	/* cudaFree and the libraries' teardown wait for the whole device: the dispatchers park meanwhile */
	cuda_doorbells_park(lp->dev);
	for (s = 0; s < GPU_PROG_SIZES_MAX; s++) {
		if (lp->plans[s] == NULL)
			continue;
		for (i = 0; i < lp->prog->sizes[s].nb_ops; i++)
			gemm_plan_free(lp->dev, &lp->plans[s][i]);
		free(lp->plans[s]);
	}
	if (lp->lt != NULL)
		lp->dev->lt.destroy(lp->lt);
	cudnn_program_free(lp->dev, lp->dnn);
	cudaFree(lp->consts_dev);
	cuda_doorbells_resume(lp->dev);
	gpu_program_free(lp->prog);
	pthread_mutex_destroy(&lp->capture_lock);
	free(lp);
}

int cuda_program_load(struct gpu_dev *dev, const struct gpu_program *prog, struct gpu_loaded **out, char *err,
		      size_t cap)
{
	struct gpu_loaded *lp;
	cublasStatus_t st;
	bool parked = false;
	cudaError_t e;
	uint32_t s, i;
	int rc;

	rc = cuda_check(dev, err, cap);
	if (rc == 0)
		rc = gpu_program_check(prog, err, cap);
	if (rc < 0)
		return rc;
	lp = calloc(1, sizeof(*lp));
	if (lp == NULL || (lp->prog = gpu_program_copy(prog)) == NULL) {
		free(lp);
		gpu_err(err, cap, "program %s: out of memory", prog->name);
		return -ENOMEM;
	}
	lp->dev = dev;
	pthread_mutex_init(&lp->capture_lock, NULL);
	cudaSetDevice(dev->index);
	if (prog->const_bytes > 0) {
		e = cudaMalloc((void **)&lp->consts_dev, prog->const_bytes);
		if (e != cudaSuccess) {
			rc = alloc_fail(dev, "cudaMalloc (constants)", e, err, cap);
			goto fail;
		}
		e = cudaMemcpy(lp->consts_dev, prog->consts, prog->const_bytes, cudaMemcpyHostToDevice);
		if (e != cudaSuccess) {
			rc = cuda_fail(dev, "cudaMemcpy (constants)", e, err, cap);
			goto fail;
		}
	}
	/*
	 * The warm-ups' cudaDeviceSynchronize and cudaFree, and cuDNN's timing of algorithms, wait for the
	 * whole device (a reload under traffic): the doorbell dispatchers park meanwhile.
	 */
	parked = program_has_op(prog, GPU_OP_GEMM) || program_has_op(prog, GPU_OP_CONV);
	if (parked)
		cuda_doorbells_park(dev);
	if (program_has_op(prog, GPU_OP_GEMM)) {
		rc = cublaslt_open(dev, err, cap);
		if (rc < 0)
			goto fail;
		st = dev->lt.create(&lp->lt);
		if (st != CUBLAS_STATUS_SUCCESS) {
			gpu_err(err, cap, "cublasLtCreate: %s", dev->lt.status_string(st));
			rc = st == CUBLAS_STATUS_ALLOC_FAILED ? -ENOMEM : -EIO;
			lp->lt = NULL;
			goto fail;
		}
		for (s = 0; s < prog->nb_sizes; s++) {
			lp->plans[s] = calloc(prog->sizes[s].nb_ops ? prog->sizes[s].nb_ops : 1, sizeof(struct gemm_plan));
			if (lp->plans[s] == NULL) {
				gpu_err(err, cap, "program %s: out of memory", prog->name);
				rc = -ENOMEM;
				goto fail;
			}
			for (i = 0; i < prog->sizes[s].nb_ops; i++) {
				if (prog->sizes[s].ops[i].code != GPU_OP_GEMM)
					continue;
				rc = gemm_plan_make(lp, s, i, err, cap);
				if (rc < 0)
					goto fail;
			}
		}
		lp->workspace_bytes = CUBLASLT_WORKSPACE_BYTES;
		rc = gemm_warm_up(lp, err, cap);
		if (rc < 0)
			goto fail;
	}
	/* CONV ops cuDNN can run get a plan; the others (or all, without cuDNN) keep the generic kernel */
	rc = cudnn_program_plan(dev, lp->prog, lp->consts_dev, &lp->dnn, &lp->workspace_bytes, err, cap);
	if (rc < 0)
		goto fail;
	if (parked)
		cuda_doorbells_resume(dev);
	*out = lp;
	return 0;
fail:
	if (parked)
		cuda_doorbells_resume(dev);
	cuda_program_unload(lp);
	return rc;
}

/* ---- instances --------------------------------------------------------------------------------------- */

static inline uint32_t graph_index(const struct gpu_instance *inst, uint32_t size_idx, uint32_t slot)
{
	return size_idx * inst->nb_slots + slot;
}

/* Records one GEMM op into the capture: cuBLAS's A is the op's B (see struct gemm_plan). */
static int gemm_record(struct gpu_instance *inst, uint32_t s, uint32_t slot, uint32_t i, uint8_t *arena, char *err,
		       size_t cap)
{
	struct gpu_loaded *lp = inst->lp;
	const struct cublaslt_api *lt = &lp->dev->lt;
	const struct gpu_op *op = &lp->prog->sizes[s].ops[i];
	struct gemm_plan *p = &lp->plans[s][i];
	const uint8_t *a = gpu_ref_addr(&op->in[1], arena, lp->consts_dev);
	const uint8_t *b = gpu_ref_addr(&op->in[0], arena, lp->consts_dev);
	uint8_t *d = gpu_ref_addr(&op->out, arena, lp->consts_dev);
	cublasStatus_t st = CUBLAS_STATUS_SUCCESS;

	if (p->bias_in_arena) {
		const void *bias_dev = arena + op->in[2].offset;

		pthread_mutex_lock(&lp->capture_lock);
		st = lt->desc_set(p->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias_dev, sizeof(bias_dev));
	}
	/* alpha and beta are host pointers: the capture copies their values into the graph */
	if (st == CUBLAS_STATUS_SUCCESS)
		st = lt->matmul(lp->lt, p->desc, &op->alpha, a, p->lt_a, b, p->lt_b, &g_beta_zero, d, p->lt_d, d,
				p->lt_d, &p->algo, inst->workspace, CUBLASLT_WORKSPACE_BYTES,
				inst->stream->stream);
	if (p->bias_in_arena)
		pthread_mutex_unlock(&lp->capture_lock);
	if (st == CUBLAS_STATUS_SUCCESS)
		return 0;
	gpu_err(err, cap, "size %u slot %u op %u (GEMM): cublasLtMatmul (capture): %s", s, slot, i,
		lt->status_string(st));
	return st == CUBLAS_STATUS_ALLOC_FAILED ? -ENOMEM : -EIO;
}

/* Captures, instantiates and uploads the graph of (size s, slot). */
static int graph_capture(struct gpu_instance *inst, uint32_t s, uint32_t slot, char *err, size_t cap)
{
	struct gpu_loaded *lp = inst->lp;
	struct gpu_dev *dev = lp->dev;
	const struct gpu_program *prog = lp->prog;
	struct gpu_program_size size = prog->sizes[s];
	uint32_t idx = graph_index(inst, s, slot);
	struct instance_graph *g = &inst->graphs[idx];
	struct gpu_batch_table *table_dev = (struct gpu_batch_table *)(inst->tables_dev + idx * inst->table_stride);
	cudaStream_t stream = inst->stream->stream;
	cudaGraph_t graph = NULL;
	char call[96] = "";
	cudaError_t e, end_e;
	uint32_t i;
	int rc = 0;

	size.ops = NULL; /* the kernels get offsets only; nothing on the device follows a host pointer */
	e = cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal);
	if (e != cudaSuccess) {
		snprintf(call, sizeof(call), "size %u slot %u: cudaStreamBeginCapture", s, slot);
		return cuda_fail(dev, call, e, err, cap);
	}
	e = (cudaError_t)bwgpu_segments_launch(stream, &size, prog->max_segments, table_dev, g->arena, 0,
					       gpu_copy_blocks(prog, &prog->sizes[s], 0));
	if (e != cudaSuccess)
		snprintf(call, sizeof(call), "size %u slot %u: gather kernel launch", s, slot);
	for (i = 0; e == cudaSuccess && rc == 0 && i < size.nb_ops; i++) {
		const struct gpu_op *op = &prog->sizes[s].ops[i];

		if (op->code == GPU_OP_GEMM) {
			rc = gemm_record(inst, s, slot, i, g->arena, err, cap);
			continue;
		}
		if (op->code == GPU_OP_CONV && cudnn_planned(lp->dnn, s, i)) {
			/* the handle is the program's: its stream is set per recording */
			pthread_mutex_lock(&lp->capture_lock);
			rc = cudnn_record(lp->dnn, s, slot, i, g->arena, inst->workspace, stream, err, cap);
			pthread_mutex_unlock(&lp->capture_lock);
			continue;
		}
		e = (cudaError_t)bwgpu_op_launch(stream, op, i, g->arena, lp->consts_dev, FAULT_PAIR(g->arena, size));
		if (e != cudaSuccess)
			snprintf(call, sizeof(call), "size %u slot %u op %u (code %u): kernel launch", s, slot, i, op->code);
	}
	if (e == cudaSuccess && rc == 0) {
		e = (cudaError_t)bwgpu_segments_launch(stream, &size, prog->max_segments, table_dev, g->arena, 1,
						       gpu_copy_blocks(prog, &prog->sizes[s], 1));
		if (e != cudaSuccess)
			snprintf(call, sizeof(call), "size %u slot %u: scatter kernel launch", s, slot);
	}
	if (e == cudaSuccess && rc == 0) {
		e = (cudaError_t)bwgpu_complete_launch(stream, table_dev, FAULT_PAIR(g->arena, size),
						       inst->words_dev + idx);
		if (e != cudaSuccess)
			snprintf(call, sizeof(call), "size %u slot %u: completion kernel launch", s, slot);
	}
	/* always end the capture, so the stream is usable again whatever failed inside it */
	end_e = cudaStreamEndCapture(stream, &graph);
	if (e != cudaSuccess || rc < 0 || end_e != cudaSuccess) {
		if (graph != NULL)
			cudaGraphDestroy(graph);
		if (rc < 0) {
			cudaGetLastError(); /* the library's failure may have left a launch error behind */
			return rc;
		}
		if (e == cudaSuccess) {
			e = end_e;
			snprintf(call, sizeof(call), "size %u slot %u: cudaStreamEndCapture", s, slot);
		}
		rc = cuda_fail(dev, call, e, err, cap);
		cudaGetLastError();
		return rc;
	}
	/* instantiated (for device launch in doorbell mode) and uploaded now, so the first launch does not
	 * pay for moving the graph to the device */
	snprintf(call, sizeof(call), "size %u slot %u", s, slot);
	rc = cuda_graph_instantiate(dev, graph, inst->mode == GPU_LAUNCH_DOORBELL, stream, &g->exec, call, err, cap);
	cudaGraphDestroy(graph); /* the exec keeps what it needs */
	return rc;
}

void cuda_instance_destroy(struct gpu_instance *inst)
{
	struct gpu_dev *dev;
	uint32_t i;

	if (inst == NULL)
		return;
	dev = inst->lp->dev;
	cudaSetDevice(dev->index);
	cuda_doorbell_stop(inst->doorbell); /* its dispatcher runs what was rung, then ends */
	/* the frees below wait for the whole device: the other instances' dispatchers park meanwhile */
	cuda_doorbells_park(dev);
	if (!dev->lost)
		cudaStreamSynchronize(inst->stream->stream); /* shutdown: launches may still use what we free */
	cuda_doorbell_free(inst->doorbell);
	for (i = 0; i < inst->nb_sizes * inst->nb_slots; i++) {
		if (inst->graphs[i].exec != NULL)
			cudaGraphExecDestroy(inst->graphs[i].exec);
		cudaFree(inst->graphs[i].arena);
	}
	cudaFree(inst->workspace);
	if (inst->tables != NULL)
		cudaFreeHost(inst->tables);
	if (inst->words != NULL)
		cudaFreeHost((void *)inst->words);
	cuda_doorbells_resume(dev);
	free(inst);
}

/* Mapped pinned host memory, zeroed, and its device address. */
static int mapped_alloc(struct gpu_dev *dev, const char *what, size_t bytes, void **host, void **dev_addr, char *err,
			size_t cap)
{
	char call[64];
	cudaError_t e = cudaHostAlloc(host, bytes, cudaHostAllocMapped | cudaHostAllocPortable);

	if (e != cudaSuccess) {
		*host = NULL;
		snprintf(call, sizeof(call), "cudaHostAlloc (%s)", what);
		return alloc_fail(dev, call, e, err, cap);
	}
	memset(*host, 0, bytes);
	e = cudaHostGetDevicePointer(dev_addr, *host, 0);
	if (e != cudaSuccess) {
		snprintf(call, sizeof(call), "cudaHostGetDevicePointer (%s)", what);
		return cuda_fail(dev, call, e, err, cap);
	}
	return 0;
}

/*
 * The doorbell mode's dispatcher (cuda_doorbell.c) over the instance's graphs. The device launches
 * them: the arenas' zeroing and the graphs' uploads, queued on the caller's stream, must be done first.
 */
static int doorbell_make(struct gpu_instance *inst, char *err, size_t cap)
{
	struct gpu_dev *dev = inst->lp->dev;
	uint32_t nb_graphs = inst->nb_sizes * inst->nb_slots;
	cudaGraphExec_t *execs = calloc(nb_graphs, sizeof(*execs));
	cudaError_t e;
	int rc;

	if (execs == NULL) {
		gpu_err(err, cap, "instance of %s: out of memory", inst->lp->prog->name);
		return -ENOMEM;
	}
	e = cudaStreamSynchronize(inst->stream->stream);
	if (e != cudaSuccess) {
		free(execs);
		return cuda_fail(dev, "cudaStreamSynchronize (before the doorbell)", e, err, cap);
	}
	for (uint32_t i = 0; i < nb_graphs; i++)
		execs[i] = inst->graphs[i].exec;
	rc = cuda_doorbell_create(dev, execs, nb_graphs, inst->nb_slots, &inst->doorbell, err, cap);
	free(execs);
	return rc;
}

int cuda_instance_create(struct gpu_loaded *lp, struct gpu_stream *stream, uint32_t nb_slots, uint32_t mode,
			 struct gpu_instance **out, char *err, size_t cap)
{
	struct gpu_dev *dev = lp->dev;
	const struct gpu_program *prog = lp->prog;
	struct gpu_instance *inst;
	uint32_t nb_graphs, s, slot;
	void *tables_dev = NULL, *words_dev = NULL, *words = NULL;
	size_t words_bytes;
	cudaError_t e;
	int rc;

	if (nb_slots == 0 || nb_slots > GPU_INSTANCE_SLOTS_MAX) {
		gpu_err(err, cap, "instance of %s with %u slots: 1 to %u", prog->name, nb_slots, GPU_INSTANCE_SLOTS_MAX);
		return -EINVAL;
	}
	if (mode >= GPU_LAUNCH_MODE_COUNT) {
		gpu_err(err, cap, "instance of %s: launch mode %u unknown", prog->name, mode);
		return -EINVAL;
	}
	if (stream->dev != dev) {
		gpu_err(err, cap, "instance of %s: the stream belongs to device %d, the program to device %d",
			prog->name, stream->dev->index, dev->index);
		return -EINVAL;
	}
	rc = cuda_check(dev, err, cap);
	if (rc < 0)
		return rc;
	nb_graphs = prog->nb_sizes * nb_slots;
	inst = calloc(1, sizeof(*inst) + nb_graphs * sizeof(inst->graphs[0]));
	if (inst == NULL) {
		gpu_err(err, cap, "instance of %s: out of memory", prog->name);
		return -ENOMEM;
	}
	inst->lp = lp;
	inst->stream = stream;
	inst->mode = mode;
	inst->nb_sizes = prog->nb_sizes;
	inst->nb_slots = nb_slots;
	inst->table_stride = (gpu_batch_table_bytes(prog->max_segments) + TABLE_ALIGN_BYTES - 1) &
			     ~(size_t)(TABLE_ALIGN_BYTES - 1);
	cudaSetDevice(dev->index); /* this thread's current device: the captures below run on it */

	rc = mapped_alloc(dev, "batch tables", inst->table_stride * nb_graphs, (void **)&inst->tables, &tables_dev, err,
			  cap);
	if (rc < 0)
		goto fail;
	inst->tables_dev = tables_dev;
	words_bytes = ((size_t)nb_graphs * sizeof(uint32_t) + WORDS_ALIGN_BYTES - 1) & ~(size_t)(WORDS_ALIGN_BYTES - 1);
	rc = mapped_alloc(dev, "completion words", words_bytes, &words, &words_dev, err, cap);
	inst->words = words;
	if (rc < 0)
		goto fail;
	inst->words_dev = words_dev;
	if (lp->workspace_bytes > 0) {
		e = cudaMalloc(&inst->workspace, lp->workspace_bytes);
		if (e != cudaSuccess) {
			inst->workspace = NULL;
			rc = alloc_fail(dev, "cudaMalloc (workspace)", e, err, cap);
			goto fail;
		}
	}
	for (s = 0; s < prog->nb_sizes; s++) {
		for (slot = 0; slot < nb_slots; slot++) {
			struct instance_graph *g = &inst->graphs[graph_index(inst, s, slot)];
			/* the launch's fault pair lives past the program's arena, in device memory */
			uint64_t bytes = prog->sizes[s].arena_bytes + FAULT_PAIR_BYTES;

			e = cudaMalloc((void **)&g->arena, bytes);
			/* never-written bytes read as 0, the same every run; on the instance's stream, so the
			 * graphs' launches come after it (the legacy stream would not order a non-blocking one) */
			if (e == cudaSuccess)
				e = cudaMemsetAsync(g->arena, 0, bytes, stream->stream);
			if (e != cudaSuccess) {
				rc = alloc_fail(dev, "cudaMalloc (arena)", e, err, cap);
				goto fail;
			}
		}
	}
	for (s = 0; s < prog->nb_sizes; s++) {
		for (slot = 0; slot < nb_slots; slot++) {
			rc = graph_capture(inst, s, slot, err, cap);
			if (rc < 0)
				goto fail;
		}
	}
	if (mode == GPU_LAUNCH_DOORBELL) {
		rc = doorbell_make(inst, err, cap);
		if (rc < 0)
			goto fail;
	}
	*out = inst;
	return 0;
fail:
	cuda_instance_destroy(inst);
	return rc;
}

struct gpu_batch_table *cuda_instance_table(struct gpu_instance *inst, uint32_t size_idx, uint32_t slot)
{
	if (size_idx >= inst->nb_sizes || slot >= inst->nb_slots)
		return NULL;
	return (struct gpu_batch_table *)(inst->tables + graph_index(inst, size_idx, slot) * inst->table_stride);
}

volatile uint32_t *cuda_instance_word(struct gpu_instance *inst, uint32_t size_idx, uint32_t slot)
{
	if (size_idx >= inst->nb_sizes || slot >= inst->nb_slots)
		return NULL;
	return &inst->words[graph_index(inst, size_idx, slot)];
}

/*
 * Cold (benchmarks): events around iters back-to-back launches on the instance's stream. In doorbell
 * mode as well: the graphs are the same (a device graph may be launched from the host too), and an
 * event on the dispatcher's stream would wait for it to park. The instance must be idle then (gpu.h):
 * the dispatcher does not launch this graph, nor another one sharing the cuBLASLt workspace, meanwhile.
 */
int cuda_instance_time(struct gpu_instance *inst, uint32_t size_idx, uint32_t slot, uint32_t iters,
		       double *ms_per_launch, char *err, size_t cap)
{
	struct gpu_dev *dev = inst->lp->dev;
	cudaStream_t stream = inst->stream->stream;
	cudaEvent_t start = NULL, end = NULL;
	const char *call = "cudaEventCreate";
	float ms = 0.0f;
	cudaError_t e;

	if (size_idx >= inst->nb_sizes || slot >= inst->nb_slots || iters == 0 || ms_per_launch == NULL) {
		gpu_err(err, cap, "timing of size %u slot %u, %u launches: the instance has %u sizes, %u slots; iters > 0",
			size_idx, slot, iters, inst->nb_sizes, inst->nb_slots);
		return -EINVAL;
	}
	if (dev->lost)
		return cuda_check(dev, err, cap);
	cudaSetDevice(dev->index);
	e = cudaEventCreate(&start);
	if (e == cudaSuccess)
		e = cudaEventCreate(&end);
	if (e == cudaSuccess) {
		call = "cudaEventRecord (start)";
		e = cudaEventRecord(start, stream);
	}
	for (uint32_t i = 0; e == cudaSuccess && i < iters; i++) {
		call = "cudaGraphLaunch (timing)";
		e = cudaGraphLaunch(inst->graphs[graph_index(inst, size_idx, slot)].exec, stream);
	}
	if (e == cudaSuccess) {
		call = "cudaEventRecord (end)";
		e = cudaEventRecord(end, stream);
	}
	if (e == cudaSuccess) {
		call = "cudaEventSynchronize";
		e = cudaEventSynchronize(end);
	}
	if (e == cudaSuccess) {
		call = "cudaEventElapsedTime";
		e = cudaEventElapsedTime(&ms, start, end);
	}
	if (start != NULL)
		cudaEventDestroy(start);
	if (end != NULL)
		cudaEventDestroy(end);
	if (e != cudaSuccess)
		return cuda_fail(dev, call, e, err, cap);
	*ms_per_launch = (double)ms / iters;
	return 0;
}

/*
 * (hot) One graph launch: the table and everything else were fixed when the graph was captured. In
 * doorbell mode, memory writes instead (cuda_doorbell_ring).
 */
int cuda_instance_launch(struct gpu_instance *inst, uint32_t size_idx, uint32_t slot, char *err, size_t cap)
{
	struct gpu_dev *dev = inst->lp->dev;
	cudaError_t e;

	if (size_idx >= inst->nb_sizes || slot >= inst->nb_slots) {
		gpu_err(err, cap, "launch of size %u slot %u: the instance has %u sizes, %u slots", size_idx, slot,
			inst->nb_sizes, inst->nb_slots);
		return -EINVAL;
	}
	if (dev->lost)
		return cuda_check(dev, err, cap);
	if (inst->doorbell != NULL)
		return cuda_doorbell_ring(inst->doorbell, size_idx, slot, err, cap);
	e = cudaGraphLaunch(inst->graphs[graph_index(inst, size_idx, slot)].exec, inst->stream->stream);
	if (e != cudaSuccess)
		return cuda_fail(dev, "cudaGraphLaunch", e, err, cap);
	return 0;
}
