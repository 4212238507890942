/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cuDNN for the CONV op, opened with dlopen when the first program with a CONV op is loaded
 * on a device, for the reasons cublaslt.c gives: the module names no CUDA library (ldd shows none).
 * Unlike cuBLASLt, cuDNN is optional: CONV has a correct generic kernel (gpu_conv_item), so a host
 * without cuDNN, or BW_CUDNN=0, runs every CONV op there and dev->dnn_why keeps the reason. Where the
 * library is looked for (cuda_lib_open), in order (the first dlopen that works wins, except that
 * $BW_CUDNN_LIB, when set, is the only place looked):
 *   $BW_CUDNN_LIB                       a file (pip: site-packages/nvidia/cudnn/lib/libcudnn.so.9)
 *   libcudnn.so.9                       the loader's path (LD_LIBRARY_PATH, ld.so.cache)
 *   BW_CUDA_ROOT/lib64/libcudnn.so.9    the toolkit the module was built against
 * cuDNN 9's libcudnn.so.9 is a shim that finds its sub-libraries (libcudnn_cnn.so.9...) beside itself
 * ($ORIGIN), so the directory must hold the whole set.
 *
 * The API is cuDNN's legacy descriptor API (tensor/filter/convolution/activation descriptors): enough
 * for NCHW and NHWC convolutions (u.conv.nhwc: CUDNN_TENSOR_NHWC tensors, KRSC filters) with bias,
 * residual and Relu, deprecated in 9.x but exported by the shim.
 *
 * At program_load each CONV op that cuDNN can run gets a plan: descriptors, and the algorithm chosen by
 * timing every candidate on scratch buffers (cudnnFindConvolutionForwardAlgorithmEx, as PyTorch's
 * cudnn.benchmark does) within CUDNN_WORKSPACE_CAP_BYTES; identical geometries share one search. How it
 * runs:
 *   Relu                     cudnnConvolutionBiasActivationForward with the fastest algorithm (bias or a
 *                            zero bias, the residual as z with alpha2 = 1, or z = y with alpha2 = 0)
 *   no Relu, bias/residual   the same with an IDENTITY activation, which cuDNN allows only with
 *                            IMPLICIT_PRECOMP_GEMM; when that algorithm is not available, separate calls
 *   neither                  cudnnConvolutionForward
 *   separate calls           cudnnConvolutionForward, cudnnAddTensor (bias, then residual; a residual
 *                            that is the output itself becomes the convolution's beta = 1) and
 *                            cudnnActivationForward (Relu, in place)
 * Every plan is run once at load on scratch buffers: the fused call's refusal of a configuration shows
 * there (the plan then takes the separate calls; when those fail too, the generic kernel), and cuDNN's
 * lazy set-up (kernel loading) happens before a graph capture rather than inside one.
 *
 * Types: float32 operands are CUDNN_DATA_FLOAT with CUDNN_FMA_MATH (no TF32: like cuBLASLt's
 * CUBLAS_COMPUTE_32F, results stay close to the generic kernel's); float16 operands are
 * CUDNN_DATA_HALF with a FLOAT compute type (cuDNN's PSEUDO_HALF_CONFIG) and tensor-core math; the
 * bias has the data's type (HALF in that config): a constant bias of the other float type is
 * converted at load (batchwire/half.h's bw_float_to_half / bw_half_to_float) into memory the plan
 * owns. alpha and beta are floats in both configurations.
 * NaN: the activation does not propagate NaN, as bw_relu (x > 0 ? x : 0) does not.
 *
 * Recording (graph_capture): cudnnSetStream on the program's handle to the capturing stream, then the
 * plan's calls with the (size, slot) arena's addresses and the instance's workspace, then the handle
 * back on the legacy stream (NULL); the caller holds the program's capture lock throughout, since the
 * handle (and its stream) is shared by the program's instances.
 *
 * One file of ~850 lines on purpose, a tenth of it this comment and the stubs of a build without
 * cudnn.h at the end: the plan search, the run and the recording share struct conv_plan and the
 * dlopen'd table, and tests/gpu/test_cudnn.c includes the file whole to reach them.
 */
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_defs.h"
#include "program_math.h"

#ifndef BW_CUDA_ROOT
#define BW_CUDA_ROOT "/usr/local/cuda"
#endif

#if BW_HAVE_CUDNN

#define CUDNN_SONAME "libcudnn.so.9"
#define CUDNN_ENV_LIB "BW_CUDNN_LIB"
#define CUDNN_ENV_SWITCH "BW_CUDNN" /* "0": never use cuDNN */
#define CUDNN_ENV_LOG "BW_CUDNN_LOG" /* "1": one line per CONV op's plan on stderr, at load */
#define CUDNN_MAJOR_WANTED 9
#define CUDNN_WORKSPACE_CAP_BYTES ((size_t)64 << 20) /* the most workspace one CONV plan may use */

/* What makes two CONV ops the same problem to cuDNN: one algorithm search serves both. */
struct conv_key {
	int64_t geo[16];   /* n c h w m oh ow kh kw stride_h stride_w pad_h pad_w dil_h dil_w group */
	uint32_t dtype;
	uint32_t fn;
	uint8_t bias, z, z_is_y, nhwc;
};

enum bias_kind {
	BIAS_NONE,   /* no bias: the fused call gets the program's zero buffer */
	BIAS_FIXED,  /* a device address fixed at load: a constant, or its converted copy */
	BIAS_ARENA,  /* in the arena: resolved per (size, slot) at capture */
};

/* One CONV op's plan. */
struct conv_plan {
	bool planned;
	bool fused;                /* cudnnConvolutionBiasActivationForward; else the separate calls */
	bool relu;
	bool z_is_y;               /* the residual is the output itself (same bytes) */
	uint8_t bias_kind;         /* enum bias_kind */
	struct conv_key key;
	cudnnTensorDescriptor_t x, y, bias;
	cudnnFilterDescriptor_t w;
	cudnnConvolutionDescriptor_t conv;
	cudnnActivationDescriptor_t act;   /* RELU, or IDENTITY for a fused call without Relu */
	cudnnConvolutionFwdAlgo_t algo;
	cudnnMathType_t math;
	size_t workspace_bytes;
	float time_ms;             /* the search's time for algo (log only) */
	const void *bias_dev;      /* BIAS_FIXED's address */
	void *bias_owned;          /* a converted constant bias (cudaMalloc'd), else NULL */
};

struct cudnn_prog {
	struct gpu_dev *dev;
	const struct gpu_program *prog;    /* the loaded copy: ops and host constants */
	const uint8_t *consts_dev;
	cudnnHandle_t handle;
	void *zero_bias;                   /* zeros, the largest m of any plan, for fused calls without bias */
	uint32_t nb_conv, nb_planned;
	bool log;
	char why[GPU_ERR_MAX];             /* the first CONV op left to the generic kernel, and why */
	struct conv_plan *plans[GPU_PROG_SIZES_MAX]; /* per size, nb_ops entries; CONV ops' filled */
};

/* Scratch device memory for the algorithm search and the warm-up runs, freed after planning. */
struct scratch {
	void *x, *w, *y, *z, *ws;
};

static const float g_one = 1.0f, g_zero = 0.0f;

/* ---- opening the library -------------------------------------------------------------------------- */

static void api_close(struct cudnn_api *a)
{
	if (a->lib != NULL)
		dlclose(a->lib);
	memset(a, 0, sizeof(*a));
}

static int resolve(struct gpu_dev *dev, const char *name, void **fn)
{
	*fn = dlsym(dev->dnn.lib, name);
	if (*fn != NULL)
		return 0;
	gpu_err(dev->dnn_why, sizeof(dev->dnn_why), "cuDNN %s has no symbol %s (not cuDNN 9?)", dev->dnn.path, name);
	return -ENOTSUP;
}

static int api_open(struct gpu_dev *dev)
{
	struct cudnn_api *a = &dev->dnn;
	const char *sw = getenv(CUDNN_ENV_SWITCH);
	int rc = 0;

	if (sw != NULL && strcmp(sw, "0") == 0) {
		gpu_err(dev->dnn_why, sizeof(dev->dnn_why), "cuDNN disabled (%s=0)", CUDNN_ENV_SWITCH);
		return -ENOTSUP;
	}
	a->lib = cuda_lib_open("cuDNN", CUDNN_ENV_LIB, CUDNN_SONAME, a->path, sizeof(a->path), dev->dnn_why,
			       sizeof(dev->dnn_why));
	if (a->lib == NULL)
		return -ENOTSUP;
#define DNN_RESOLVE(field, sym) \
	if (rc == 0) \
		rc = resolve(dev, #sym, (void **)&a->field)
	DNN_RESOLVE(get_version, cudnnGetVersion);
	DNN_RESOLVE(status_string, cudnnGetErrorString);
	DNN_RESOLVE(create, cudnnCreate);
	DNN_RESOLVE(destroy, cudnnDestroy);
	DNN_RESOLVE(set_stream, cudnnSetStream);
	DNN_RESOLVE(tensor_create, cudnnCreateTensorDescriptor);
	DNN_RESOLVE(tensor_set, cudnnSetTensor4dDescriptor);
	DNN_RESOLVE(tensor_destroy, cudnnDestroyTensorDescriptor);
	DNN_RESOLVE(filter_create, cudnnCreateFilterDescriptor);
	DNN_RESOLVE(filter_set, cudnnSetFilter4dDescriptor);
	DNN_RESOLVE(filter_destroy, cudnnDestroyFilterDescriptor);
	DNN_RESOLVE(conv_create, cudnnCreateConvolutionDescriptor);
	DNN_RESOLVE(conv_set, cudnnSetConvolution2dDescriptor);
	DNN_RESOLVE(conv_set_groups, cudnnSetConvolutionGroupCount);
	DNN_RESOLVE(conv_set_math, cudnnSetConvolutionMathType);
	DNN_RESOLVE(conv_destroy, cudnnDestroyConvolutionDescriptor);
	DNN_RESOLVE(act_create, cudnnCreateActivationDescriptor);
	DNN_RESOLVE(act_set, cudnnSetActivationDescriptor);
	DNN_RESOLVE(act_destroy, cudnnDestroyActivationDescriptor);
	DNN_RESOLVE(fwd_find, cudnnFindConvolutionForwardAlgorithmEx);
	DNN_RESOLVE(conv_fwd, cudnnConvolutionForward);
	DNN_RESOLVE(conv_bias_act_fwd, cudnnConvolutionBiasActivationForward);
	DNN_RESOLVE(add_tensor, cudnnAddTensor);
	DNN_RESOLVE(act_fwd, cudnnActivationForward);
#undef DNN_RESOLVE
	if (rc == 0) {
		/* needs no device: a version check before anything touches one */
		a->version = a->get_version();
		if (a->version / 10000 != CUDNN_MAJOR_WANTED) {
			gpu_err(dev->dnn_why, sizeof(dev->dnn_why), "cuDNN %s is version %zu, not %d.x", a->path,
				a->version, CUDNN_MAJOR_WANTED);
			rc = -ENOTSUP;
		}
	}
	if (rc < 0)
		api_close(a);
	return rc;
}

int cudnn_open(struct gpu_dev *dev)
{
	if (!dev->dnn_tried) {
		dev->dnn_tried = true;
		dev->dnn_why[0] = '\0';
		api_open(dev);
	}
	return dev->dnn.lib != NULL ? 0 : -ENOTSUP;
}

void cudnn_close(struct gpu_dev *dev)
{
	api_close(&dev->dnn);
	dev->dnn_tried = false;
}

/* ---- what cuDNN can run ----------------------------------------------------------------------------- */

static bool dnn_dtype(uint32_t dtype, cudnnDataType_t *t)
{
	if (dtype != BW_DTYPE_FLOAT && dtype != BW_DTYPE_FLOAT16)
		return false;
	*t = dtype == BW_DTYPE_FLOAT16 ? CUDNN_DATA_HALF : CUDNN_DATA_FLOAT;
	return true;
}

static bool refs_overlap(const struct gpu_ref *a, uint64_t a_bytes, const struct gpu_ref *b, uint64_t b_bytes)
{
	return a->space == b->space && a->offset < b->offset + b_bytes && b->offset < a->offset + a_bytes;
}

/*
 * Whether cuDNN can run op as the generic kernel does, and its key. cuDNN pads symmetrically: an
 * output size that only asymmetric (ONNX end) padding gives stays with the generic kernel, as do
 * extents past int, mixed data types and a residual overlapping the output without being it.
 * \return true, or false with why.
 */
static bool conv_supported(const struct gpu_op *op, struct conv_key *k, char *why, size_t cap)
{
	const int64_t *g;
	cudnnDataType_t t;
	uint64_t eb = gpu_dtype_bytes(op->in[0].dtype);
	uint64_t y_bytes;
	int64_t want_oh, want_ow;
	bool bias = op->in[2].space != GPU_SPACE_NONE, z = op->in[3].space != GPU_SPACE_NONE;

	memset(k, 0, sizeof(*k));
	k->geo[0] = op->u.conv.n, k->geo[1] = op->u.conv.c, k->geo[2] = op->u.conv.h, k->geo[3] = op->u.conv.w;
	k->geo[4] = op->u.conv.m, k->geo[5] = op->u.conv.oh, k->geo[6] = op->u.conv.ow;
	k->geo[7] = op->u.conv.kh, k->geo[8] = op->u.conv.kw, k->geo[9] = op->u.conv.stride_h;
	k->geo[10] = op->u.conv.stride_w, k->geo[11] = op->u.conv.pad_h, k->geo[12] = op->u.conv.pad_w;
	k->geo[13] = op->u.conv.dil_h, k->geo[14] = op->u.conv.dil_w, k->geo[15] = op->u.conv.group;
	k->dtype = op->in[0].dtype;
	k->fn = op->fn;
	k->bias = bias;
	k->z = z;
	k->nhwc = op->u.conv.nhwc != 0;
	g = k->geo;
	if (!dnn_dtype(op->in[0].dtype, &t)) {
		gpu_err(why, cap, "dtype %u (cuDNN plans float32 and float16)", op->in[0].dtype);
		return false;
	}
	if (op->in[1].dtype != op->in[0].dtype || op->out.dtype != op->in[0].dtype ||
	    (z && op->in[3].dtype != op->in[0].dtype)) {
		gpu_err(why, cap, "mixed dtypes x %u, w %u, z %u, y %u", op->in[0].dtype, op->in[1].dtype,
			op->in[3].dtype, op->out.dtype);
		return false;
	}
	if (bias && op->in[2].dtype != op->in[0].dtype &&
	    (op->in[2].space != GPU_SPACE_CONST || (op->in[2].dtype != BW_DTYPE_FLOAT && op->in[2].dtype != BW_DTYPE_FLOAT16))) {
		gpu_err(why, cap, "bias dtype %u differs from the data's %u and is not a float constant", op->in[2].dtype,
			op->in[0].dtype);
		return false;
	}
	for (int d = 0; d < 16; d++) {
		if (g[d] > INT_MAX) {
			gpu_err(why, cap, "an extent past int");
			return false;
		}
	}
	if (op->fn != GPU_ACT_NONE && op->fn != GPU_ACT_RELU) {
		gpu_err(why, cap, "activation %u", op->fn);
		return false;
	}
	want_oh = (g[2] + 2 * g[11] - g[13] * (g[7] - 1) - 1) / g[9] + 1;
	want_ow = (g[3] + 2 * g[12] - g[14] * (g[8] - 1) - 1) / g[10] + 1;
	if (want_oh != g[5] || want_ow != g[6]) {
		gpu_err(why, cap, "output %lld x %lld is not what symmetric padding gives (%lld x %lld)", (long long)g[5],
			(long long)g[6], (long long)want_oh, (long long)want_ow);
		return false;
	}
	/* cuDNN's tensors hold at most 2^31 - 1 elements */
	if (g[0] * g[1] * g[2] * g[3] > INT_MAX || g[0] * g[4] * g[5] * g[6] > INT_MAX) {
		gpu_err(why, cap, "a tensor of more than %d elements", INT_MAX);
		return false;
	}
	y_bytes = (uint64_t)(g[0] * g[4] * g[5] * g[6]) * eb;
	if (refs_overlap(&op->in[0], (uint64_t)(g[0] * g[1] * g[2] * g[3]) * eb, &op->out, y_bytes)) {
		gpu_err(why, cap, "the input overlaps the output");
		return false;
	}
	if (z && refs_overlap(&op->in[3], y_bytes, &op->out, y_bytes)) {
		if (op->in[3].space != op->out.space || op->in[3].offset != op->out.offset) {
			gpu_err(why, cap, "the residual partly overlaps the output");
			return false;
		}
		k->z_is_y = 1;
	}
	return true;
}

/* ---- plans ----------------------------------------------------------------------------------------------- */

static void plan_free(struct gpu_dev *dev, struct conv_plan *p)
{
	const struct cudnn_api *a = &dev->dnn;

	if (p->x != NULL)
		a->tensor_destroy(p->x);
	if (p->y != NULL)
		a->tensor_destroy(p->y);
	if (p->bias != NULL)
		a->tensor_destroy(p->bias);
	if (p->w != NULL)
		a->filter_destroy(p->w);
	if (p->conv != NULL)
		a->conv_destroy(p->conv);
	if (p->act != NULL)
		a->act_destroy(p->act);
	if (p->bias_owned != NULL)
		cudaFree(p->bias_owned);
	memset(p, 0, sizeof(*p));
}

/* The descriptors of op: x, w, y, bias [1, m, 1, 1], the convolution and the activation. */
static cudnnStatus_t plan_descriptors(const struct cudnn_api *a, const struct gpu_op *op, struct conv_plan *p)
{
	const int64_t *g = p->key.geo;
	cudnnDataType_t t = CUDNN_DATA_FLOAT;
	/* NHWC: x, y, z [n][h][w][c] and the weights [m][kh][kw][c/group] (cuDNN's KRSC); a [1, m, 1, 1]
	 * bias is the same bytes either way */
	cudnnTensorFormat_t f = p->key.nhwc ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW;
	cudnnStatus_t st;

	dnn_dtype(op->in[0].dtype, &t); /* conv_supported accepted it */
	p->math = t == CUDNN_DATA_FLOAT ? CUDNN_FMA_MATH : CUDNN_TENSOR_OP_MATH;
	st = a->tensor_create(&p->x);
	if (st == CUDNN_STATUS_SUCCESS)
		st = a->tensor_set(p->x, f, t, (int)g[0], (int)g[1], (int)g[2], (int)g[3]);
	if (st == CUDNN_STATUS_SUCCESS)
		st = a->tensor_create(&p->y);
	if (st == CUDNN_STATUS_SUCCESS)
		st = a->tensor_set(p->y, f, t, (int)g[0], (int)g[4], (int)g[5], (int)g[6]);
	if (st == CUDNN_STATUS_SUCCESS)
		st = a->tensor_create(&p->bias);
	if (st == CUDNN_STATUS_SUCCESS)
		st = a->tensor_set(p->bias, f, t, 1, (int)g[4], 1, 1);
	if (st == CUDNN_STATUS_SUCCESS)
		st = a->filter_create(&p->w);
	if (st == CUDNN_STATUS_SUCCESS)
		st = a->filter_set(p->w, t, f, (int)g[4], (int)(g[1] / g[15]), (int)g[7], (int)g[8]);
	if (st == CUDNN_STATUS_SUCCESS)
		st = a->conv_create(&p->conv);
	/* FLOAT compute for both data types: float16 data is then cuDNN's PSEUDO_HALF_CONFIG */
	if (st == CUDNN_STATUS_SUCCESS)
		st = a->conv_set(p->conv, (int)g[11], (int)g[12], (int)g[9], (int)g[10], (int)g[13], (int)g[14],
				 CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT);
	if (st == CUDNN_STATUS_SUCCESS && g[15] > 1)
		st = a->conv_set_groups(p->conv, (int)g[15]);
	if (st == CUDNN_STATUS_SUCCESS)
		st = a->conv_set_math(p->conv, p->math);
	if (st == CUDNN_STATUS_SUCCESS)
		st = a->act_create(&p->act);
	if (st == CUDNN_STATUS_SUCCESS)
		st = a->act_set(p->act, p->relu ? CUDNN_ACTIVATION_RELU : CUDNN_ACTIVATION_IDENTITY,
				CUDNN_NOT_PROPAGATE_NAN, 0.0);
	return st;
}

/*
 * The plan's calls on the handle's current stream. bias: NULL for none (separate calls only; the
 * fused call always gets one); z: NULL for none, or y itself (z_is_y).
 */
static cudnnStatus_t plan_run(const struct cudnn_api *a, cudnnHandle_t h, const struct conv_plan *p, const void *x,
			      const void *w, const void *bias, const void *z, void *y, void *ws)
{
	cudnnStatus_t st;

	if (p->fused) {
		/* no residual: z = y with alpha2 = 0 (z must be a tensor of y's shape) */
		return a->conv_bias_act_fwd(h, &g_one, p->x, x, p->w, w, p->conv, p->algo, ws, p->workspace_bytes,
					    z != NULL ? &g_one : &g_zero, p->y, z != NULL ? z : y, p->bias, bias, p->act,
					    p->y, y);
	}
	/* a residual that is the output itself: the convolution adds onto it (beta = 1) */
	st = a->conv_fwd(h, &g_one, p->x, x, p->w, w, p->conv, p->algo, ws, p->workspace_bytes,
			 p->z_is_y ? &g_one : &g_zero, p->y, y);
	if (st == CUDNN_STATUS_SUCCESS && bias != NULL)
		st = a->add_tensor(h, &g_one, p->bias, bias, &g_one, p->y, y);
	if (st == CUDNN_STATUS_SUCCESS && z != NULL && !p->z_is_y)
		st = a->add_tensor(h, &g_one, p->y, z, &g_one, p->y, y);
	if (st == CUDNN_STATUS_SUCCESS && p->relu)
		st = a->act_fwd(h, p->act, &g_one, p->y, y, &g_zero, p->y, y);
	return st;
}

/* The bias pointer a run gets: the plan's fixed one, the arena's, or the zero buffer for a fused call. */
static const void *plan_bias(const struct cudnn_prog *dp, const struct conv_plan *p, const struct gpu_op *op,
			     uint8_t *arena)
{
	switch (p->bias_kind) {
	case BIAS_FIXED:
		return p->bias_dev;
	case BIAS_ARENA:
		return arena + op->in[2].offset;
	default:
		return p->fused ? dp->zero_bias : NULL;
	}
}

/* A constant bias of the other float type, converted into device memory the plan owns. */
static int bias_convert(struct cudnn_prog *dp, const struct gpu_op *op, struct conv_plan *p, char *err, size_t cap)
{
	const uint8_t *src = (const uint8_t *)dp->prog->consts + op->in[2].offset;
	uint64_t m = (uint64_t)op->u.conv.m, j;
	bool to_half = op->in[0].dtype == BW_DTYPE_FLOAT16;
	void *host = malloc(m * (to_half ? 2 : 4));
	cudaError_t e;

	if (host == NULL) {
		gpu_err(err, cap, "cuDNN bias conversion: out of memory");
		return -ENOMEM;
	}
	for (j = 0; j < m; j++) {
		if (to_half) {
			float f;

			memcpy(&f, src + j * 4, 4);
			((uint16_t *)host)[j] = bw_float_to_half(f);
		} else {
			uint16_t v;

			memcpy(&v, src + j * 2, 2);
			((float *)host)[j] = bw_half_to_float(v);
		}
	}
	e = cudaMalloc(&p->bias_owned, m * (to_half ? 2 : 4));
	if (e == cudaSuccess)
		e = cudaMemcpy(p->bias_owned, host, m * (to_half ? 2 : 4), cudaMemcpyHostToDevice);
	free(host);
	if (e != cudaSuccess) {
		if (e == cudaErrorMemoryAllocation) {
			p->bias_owned = NULL;
			gpu_err(err, cap, "cudaMalloc (cuDNN bias): out of device memory");
			return -ENOMEM;
		}
		return cuda_fail(dp->dev, "cudaMemcpy (cuDNN bias)", e, err, cap);
	}
	p->bias_dev = p->bias_owned;
	return 0;
}

/* \return the index in perf of the fastest algorithm that ran within the cap (want: any, or only that one). */
static int perf_pick(const cudnnConvolutionFwdAlgoPerf_t *perf, int n, int want)
{
	for (int r = 0; r < n; r++)
		if (perf[r].status == CUDNN_STATUS_SUCCESS && perf[r].memory <= CUDNN_WORKSPACE_CAP_BYTES &&
		    (want < 0 || (int)perf[r].algo == want))
			return r;
	return -1;
}

static void plan_choose(struct conv_plan *p, const cudnnConvolutionFwdAlgoPerf_t *perf, int r, bool fused)
{
	p->fused = fused;
	p->algo = perf[r].algo;
	p->workspace_bytes = perf[r].memory;
	p->time_ms = perf[r].time;
	/* float32 stays on FMA math whatever the search reports: never TF32 */
	if (p->math != CUDNN_FMA_MATH)
		p->math = perf[r].mathType;
}

/*
 * Plans op i of size s. \return 0 planned; 1 left to the generic kernel (why); a negative errno for a
 * CUDA failure (err).
 */
static int plan_op(struct cudnn_prog *dp, uint32_t s, uint32_t i, const struct scratch *sc, char *why, size_t wcap,
		   char *err, size_t cap)
{
	const struct cudnn_api *a = &dp->dev->dnn;
	const struct gpu_op *op = &dp->prog->sizes[s].ops[i];
	struct conv_plan *p = &dp->plans[s][i];
	cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
	const struct conv_plan *same = NULL;
	const void *w, *bias, *z;
	int nb_perf = 0, best, precomp, rc;
	cudnnStatus_t st;

	if (!conv_supported(op, &p->key, why, wcap))
		return 1;
	p->relu = op->fn == GPU_ACT_RELU;
	p->z_is_y = p->key.z_is_y;
	p->bias_kind = op->in[2].space == GPU_SPACE_NONE ? BIAS_NONE :
		       op->in[2].space == GPU_SPACE_CONST ? BIAS_FIXED : BIAS_ARENA;
	st = plan_descriptors(a, op, p);
	if (st != CUDNN_STATUS_SUCCESS) {
		gpu_err(why, wcap, "descriptors: %s", a->status_string(st));
		return 1;
	}
	if (p->bias_kind == BIAS_FIXED) {
		if (op->in[2].dtype != op->in[0].dtype) {
			rc = bias_convert(dp, op, p, err, cap);
			if (rc < 0)
				return rc;
		} else {
			p->bias_dev = dp->consts_dev + op->in[2].offset;
		}
	}

	/* an identical problem planned before: its search holds for this op too */
	for (uint32_t s2 = 0; s2 <= s && same == NULL; s2++)
		for (uint32_t i2 = 0; i2 < (s2 == s ? i : dp->prog->sizes[s2].nb_ops) && same == NULL; i2++)
			if (dp->plans[s2][i2].planned && memcmp(&dp->plans[s2][i2].key, &p->key, sizeof(p->key)) == 0)
				same = &dp->plans[s2][i2];
	if (same != NULL) {
		p->fused = same->fused;
		p->algo = same->algo;
		p->workspace_bytes = same->workspace_bytes;
		p->time_ms = same->time_ms;
		p->math = same->math;
		if (a->conv_set_math(p->conv, p->math) != CUDNN_STATUS_SUCCESS) {
			gpu_err(why, wcap, "cudnnSetConvolutionMathType failed");
			return 1;
		}
		p->planned = true;
		return 0;
	}

	w = op->in[1].space == GPU_SPACE_CONST ? (const void *)(dp->consts_dev + op->in[1].offset) : sc->w;
	st = a->fwd_find(dp->handle, p->x, sc->x, p->w, w, p->conv, p->y, sc->y, CUDNN_CONVOLUTION_FWD_ALGO_COUNT,
			 &nb_perf, perf, sc->ws, CUDNN_WORKSPACE_CAP_BYTES);
	if (st != CUDNN_STATUS_SUCCESS) {
		gpu_err(why, wcap, "cudnnFindConvolutionForwardAlgorithmEx: %s", a->status_string(st));
		return 1;
	}
	best = perf_pick(perf, nb_perf, -1);
	if (best < 0) {
		gpu_err(why, wcap, "no algorithm within a %zu-byte workspace", CUDNN_WORKSPACE_CAP_BYTES);
		return 1;
	}
	precomp = perf_pick(perf, nb_perf, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM);
	/* a residual that is y itself goes through the separate calls: the convolution's beta = 1 reads y
	 * before writing it, which the fused call does not promise for z */
	if (p->relu && !p->z_is_y)
		plan_choose(p, perf, best, true);
	else if ((p->bias_kind != BIAS_NONE || p->key.z) && !p->z_is_y && precomp >= 0)
		plan_choose(p, perf, precomp, true); /* IDENTITY is only fused with this algorithm */
	else
		plan_choose(p, perf, best, false);

	/* warm-up on scratch: cuDNN refuses here what it would refuse inside a capture */
	z = p->key.z ? (p->z_is_y ? sc->y : sc->z) : NULL;
	for (int attempt = 0; attempt < 2; attempt++) {
		bias = p->bias_kind == BIAS_ARENA ? dp->zero_bias : plan_bias(dp, p, op, NULL);
		st = a->conv_set_math(p->conv, p->math);
		if (st == CUDNN_STATUS_SUCCESS)
			st = plan_run(a, dp->handle, p, sc->x, w, bias, z, sc->y, sc->ws);
		if (st == CUDNN_STATUS_SUCCESS || !p->fused)
			break;
		plan_choose(p, perf, best, false); /* the fused call refused it: the separate calls */
	}
	if (st != CUDNN_STATUS_SUCCESS) {
		gpu_err(why, wcap, "%s: %s", p->fused ? "cudnnConvolutionBiasActivationForward" : "separate calls",
			a->status_string(st));
		return 1;
	}
	p->planned = true;
	return 0;
}

static void plan_log(const struct cudnn_prog *dp, uint32_t s, uint32_t i, const char *why)
{
	const struct conv_plan *p = &dp->plans[s][i];

	if (!dp->log)
		return;
	if (p->planned)
		fprintf(stderr, "cudnn: %s size %u op %u: algo %d %s, math %d, workspace %zu, %.3f ms\n", dp->prog->name, s,
			i, (int)p->algo, p->fused ? "fused" : "separate", (int)p->math, p->workspace_bytes,
			(double)p->time_ms);
	else
		fprintf(stderr, "cudnn: %s size %u op %u: generic kernel: %s\n", dp->prog->name, s, i, why);
}

static void scratch_free(struct scratch *sc)
{
	cudaFree(sc->x);
	cudaFree(sc->w);
	cudaFree(sc->y);
	cudaFree(sc->z);
	cudaFree(sc->ws);
	memset(sc, 0, sizeof(*sc));
}

/* Scratch for the largest x, non-constant w, y and the workspace cap; zeros in x, w, and the zero bias. */
static int scratch_alloc(struct cudnn_prog *dp, struct scratch *sc, char *err, size_t cap)
{
	const struct gpu_program *prog = dp->prog;
	uint64_t x_max = 0, w_max = 0, y_max = 0, m_max = 0;
	cudaError_t e;
	char why[8];

	for (uint32_t s = 0; s < prog->nb_sizes; s++) {
		for (uint32_t i = 0; i < prog->sizes[s].nb_ops; i++) {
			const struct gpu_op *op = &prog->sizes[s].ops[i];
			struct conv_key k;
			uint64_t eb = gpu_dtype_bytes(op->in[0].dtype), x, w, y;

			if (op->code != GPU_OP_CONV || !conv_supported(op, &k, why, sizeof(why)))
				continue;
			x = (uint64_t)(k.geo[0] * k.geo[1] * k.geo[2] * k.geo[3]) * eb;
			w = (uint64_t)(k.geo[4] * (k.geo[1] / k.geo[15]) * k.geo[7] * k.geo[8]) * eb;
			y = (uint64_t)(k.geo[0] * k.geo[4] * k.geo[5] * k.geo[6]) * eb;
			x_max = x > x_max ? x : x_max;
			y_max = y > y_max ? y : y_max;
			m_max = (uint64_t)k.geo[4] > m_max ? (uint64_t)k.geo[4] : m_max;
			if (op->in[1].space != GPU_SPACE_CONST)
				w_max = w > w_max ? w : w_max;
		}
	}
	if (x_max == 0)
		return 0;
	e = cudaMalloc(&sc->x, x_max);
	if (e == cudaSuccess)
		e = cudaMalloc(&sc->y, y_max);
	if (e == cudaSuccess)
		e = cudaMalloc(&sc->z, y_max);
	if (e == cudaSuccess && w_max > 0)
		e = cudaMalloc(&sc->w, w_max);
	if (e == cudaSuccess)
		e = cudaMalloc(&sc->ws, CUDNN_WORKSPACE_CAP_BYTES);
	if (e == cudaSuccess)
		e = cudaMalloc(&dp->zero_bias, m_max * sizeof(float));
	/* zeros: the search's timings should not depend on NaN or denormal garbage */
	if (e == cudaSuccess)
		e = cudaMemset(sc->x, 0, x_max);
	if (e == cudaSuccess)
		e = cudaMemset(sc->z, 0, y_max);
	if (e == cudaSuccess && w_max > 0)
		e = cudaMemset(sc->w, 0, w_max);
	if (e == cudaSuccess)
		e = cudaMemset(dp->zero_bias, 0, m_max * sizeof(float));
	if (e == cudaSuccess)
		return 1;
	if (e == cudaErrorMemoryAllocation) {
		gpu_err(err, cap, "program %s: cudaMalloc (cuDNN scratch, %llu + 2 x %llu + %zu bytes): out of device memory",
			prog->name, (unsigned long long)x_max, (unsigned long long)y_max, CUDNN_WORKSPACE_CAP_BYTES);
		return -ENOMEM;
	}
	return cuda_fail(dp->dev, "cudaMemset (cuDNN scratch)", e, err, cap);
}

void cudnn_program_free(struct gpu_dev *dev, struct cudnn_prog *dp)
{
	if (dp == NULL)
		return;
	for (uint32_t s = 0; s < GPU_PROG_SIZES_MAX; s++) {
		if (dp->plans[s] == NULL)
			continue;
		for (uint32_t i = 0; i < dp->prog->sizes[s].nb_ops; i++)
			plan_free(dev, &dp->plans[s][i]);
		free(dp->plans[s]);
	}
	if (dp->handle != NULL)
		dev->dnn.destroy(dp->handle);
	cudaFree(dp->zero_bias);
	free(dp);
}

int cudnn_program_plan(struct gpu_dev *dev, const struct gpu_program *prog, const uint8_t *consts_dev,
		       struct cudnn_prog **out, size_t *workspace_bytes, char *err, size_t cap)
{
	const char *log_env = getenv(CUDNN_ENV_LOG);
	bool log = log_env != NULL && strcmp(log_env, "1") == 0;
	struct scratch sc = { 0 };
	struct cudnn_prog *dp;
	char why[GPU_ERR_MAX];
	uint32_t nb_conv = 0;
	cudnnStatus_t st;
	cudaError_t e;
	int rc = 0;

	*out = NULL;
	for (uint32_t s = 0; s < prog->nb_sizes; s++)
		for (uint32_t i = 0; i < prog->sizes[s].nb_ops; i++)
			nb_conv += prog->sizes[s].ops[i].code == GPU_OP_CONV;
	if (nb_conv == 0)
		return 0;
	if (cudnn_open(dev) < 0) {
		/* no cuDNN: the generic kernel, dev->dnn_why says why */
		if (log)
			fprintf(stderr, "cudnn: %s: 0 of %u CONV ops planned: %s\n", prog->name, nb_conv, dev->dnn_why);
		return 0;
	}
	dp = calloc(1, sizeof(*dp));
	if (dp == NULL) {
		gpu_err(err, cap, "program %s: out of memory", prog->name);
		return -ENOMEM;
	}
	dp->dev = dev;
	dp->prog = prog;
	dp->consts_dev = consts_dev;
	dp->nb_conv = nb_conv;
	dp->log = log;
	st = dev->dnn.create(&dp->handle);
	if (st != CUDNN_STATUS_SUCCESS) {
		/* e.g. a sub-library missing beside libcudnn.so.9: the program runs without cuDNN */
		dp->handle = NULL;
		gpu_err(dev->dnn_why, sizeof(dev->dnn_why), "cudnnCreate: %s", dev->dnn.status_string(st));
		if (dp->log)
			fprintf(stderr, "cudnn: %s: 0 of %u CONV ops planned: %s\n", prog->name, nb_conv, dev->dnn_why);
		cudnn_program_free(dev, dp);
		return 0;
	}
	for (uint32_t s = 0; s < prog->nb_sizes; s++) {
		dp->plans[s] = calloc(prog->sizes[s].nb_ops ? prog->sizes[s].nb_ops : 1, sizeof(struct conv_plan));
		if (dp->plans[s] == NULL) {
			gpu_err(err, cap, "program %s: out of memory", prog->name);
			rc = -ENOMEM;
			goto fail;
		}
	}
	rc = scratch_alloc(dp, &sc, err, cap);
	if (rc < 0)
		goto fail;
	if (dp->log)
		fprintf(stderr, "cudnn: %s: %s, version %zu, %u CONV ops\n", prog->name, dev->dnn.path, dev->dnn.version,
			nb_conv);
	for (uint32_t s = 0; rc >= 0 && s < prog->nb_sizes; s++) {
		for (uint32_t i = 0; i < prog->sizes[s].nb_ops; i++) {
			if (prog->sizes[s].ops[i].code != GPU_OP_CONV)
				continue;
			why[0] = '\0';
			rc = plan_op(dp, s, i, &sc, why, sizeof(why), err, cap);
			if (rc < 0)
				goto fail;
			if (rc == 1) {
				plan_free(dev, &dp->plans[s][i]); /* planned stays false: the generic kernel */
				if (dp->why[0] == '\0')
					gpu_err(dp->why, sizeof(dp->why), "size %u op %u: %s", s, i, why); /* truncated is fine */
			} else {
				dp->nb_planned++;
				if (dp->plans[s][i].workspace_bytes > *workspace_bytes)
					*workspace_bytes = dp->plans[s][i].workspace_bytes;
			}
			plan_log(dp, s, i, why);
		}
	}
	/* a refused warm-up may leave a launch error behind, which the next kernel launch's
	 * cudaGetLastError would report as its own: clear it; a sticky one stays, and shows in the
	 * synchronisation (the warm-up runs went on the handle's stream, the legacy one) */
	cudaGetLastError();
	e = cudaDeviceSynchronize();
	if (e != cudaSuccess) {
		rc = cuda_fail(dev, "cuDNN warm-up (cudaDeviceSynchronize)", e, err, cap);
		goto fail;
	}
	scratch_free(&sc);
	if (dp->log)
		fprintf(stderr, "cudnn: %s: %u of %u CONV ops planned%s%s\n", prog->name, dp->nb_planned, dp->nb_conv,
			dp->why[0] ? "; first left out: " : "", dp->why);
	if (dp->nb_planned == 0) {
		cudnn_program_free(dev, dp);
		return 0;
	}
	*out = dp;
	return 0;
fail:
	cudaDeviceSynchronize(); /* nothing of ours may still run on what we free */
	scratch_free(&sc);
	cudnn_program_free(dev, dp);
	return rc;
}

bool cudnn_planned(const struct cudnn_prog *dp, uint32_t s, uint32_t i)
{
	return dp != NULL && dp->plans[s] != NULL && dp->plans[s][i].planned;
}

int cudnn_record(struct cudnn_prog *dp, uint32_t s, uint32_t slot, uint32_t i, uint8_t *arena, void *workspace,
		 cudaStream_t stream, char *err, size_t cap)
{
	const struct cudnn_api *a = &dp->dev->dnn;
	const struct gpu_op *op = &dp->prog->sizes[s].ops[i];
	const struct conv_plan *p = &dp->plans[s][i];
	const uint8_t *consts = dp->consts_dev;
	cudnnStatus_t st;

	st = a->set_stream(dp->handle, stream);
	/* alpha and beta are host pointers: the capture copies their values into the graph */
	if (st == CUDNN_STATUS_SUCCESS)
		st = plan_run(a, dp->handle, p, gpu_ref_addr(&op->in[0], arena, consts),
			      gpu_ref_addr(&op->in[1], arena, consts), plan_bias(dp, p, op, arena),
			      op->in[3].space != GPU_SPACE_NONE ? gpu_ref_addr(&op->in[3], arena, consts) : NULL,
			      gpu_ref_addr(&op->out, arena, consts), workspace);
	/* back to the legacy stream, still under the caller's capture lock: the handle is the program's,
	 * and the capturing stream is one lcore's, destroyed when that lcore stops; a handle left on it
	 * would hand cuDNN a dead stream in any later call made outside a recording (the next program
	 * instance's recording sets its own first) */
	if (st == CUDNN_STATUS_SUCCESS) {
		st = a->set_stream(dp->handle, NULL);
		if (st != CUDNN_STATUS_SUCCESS) {
			gpu_err(err, cap, "size %u slot %u op %u (CONV): cudnnSetStream (back to the legacy stream): %s",
				s, slot, i, a->status_string(st));
			return -EIO;
		}
		return 0;
	}
	a->set_stream(dp->handle, NULL);
	gpu_err(err, cap, "size %u slot %u op %u (CONV): cuDNN %s (capture): %s", s, slot, i,
		p->fused ? "cudnnConvolutionBiasActivationForward" : "convolution", a->status_string(st));
	return st == CUDNN_STATUS_ALLOC_FAILED ? -ENOMEM : -EIO;
}

#else /* !BW_HAVE_CUDNN: built against a toolkit without cudnn.h; every CONV op on the generic kernel */

int cudnn_open(struct gpu_dev *dev)
{
	dev->dnn_tried = true;
	gpu_err(dev->dnn_why, sizeof(dev->dnn_why), "the module was built without cuDNN (no cudnn.h in %s/include)",
		BW_CUDA_ROOT);
	return -ENOTSUP;
}

void cudnn_close(struct gpu_dev *dev)
{
	dev->dnn_tried = false;
}

int cudnn_program_plan(struct gpu_dev *dev, const struct gpu_program *prog, const uint8_t *consts_dev,
		       struct cudnn_prog **out, size_t *workspace_bytes, char *err, size_t cap)
{
	(void)prog, (void)consts_dev, (void)workspace_bytes, (void)err, (void)cap;
	*out = NULL;
	cudnn_open(dev);
	return 0;
}

void cudnn_program_free(struct gpu_dev *dev, struct cudnn_prog *dp)
{
	(void)dev, (void)dp;
}

bool cudnn_planned(const struct cudnn_prog *dp, uint32_t s, uint32_t i)
{
	(void)dp, (void)s, (void)i;
	return false;
}

int cudnn_record(struct cudnn_prog *dp, uint32_t s, uint32_t slot, uint32_t i, uint8_t *arena, void *workspace,
		 cudaStream_t stream, char *err, size_t cap)
{
	(void)dp, (void)arena, (void)workspace, (void)stream;
	gpu_err(err, cap, "size %u slot %u op %u (CONV): the module was built without cuDNN", s, slot, i);
	return -ENOTSUP;
}

#endif /* BW_HAVE_CUDNN */
