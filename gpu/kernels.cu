// SPDX-License-Identifier: BSD-3-Clause
// The CUDA module's kernels, called from cuda.c through extern "C" launchers that return a
// cudaError_t as an int (cuda.c is C and sees no CUDA C++).
#include <cstddef>
#include <cstdint>

#include <cuda_runtime.h>

#include "elementwise_math.h"

#define FILL_THREADS 256
#define FILL_BLOCKS_MAX 1024

// Writes byte over [dst, dst + len): dst is a registered host region's device address.
__global__ void bwgpu_fill_kernel(uint8_t *dst, size_t len, uint8_t byte)
{
	size_t stride = (size_t)gridDim.x * blockDim.x;

	for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < len; i += stride)
		dst[i] = byte;
	// the writes cross PCIe to host memory: make them visible to the host before a later signal
	__threadfence_system();
}

extern "C" int bwgpu_fill_launch(void *stream, void *dst, size_t len, uint8_t byte)
{
	size_t blocks = (len + FILL_THREADS - 1) / FILL_THREADS;

	if (blocks > FILL_BLOCKS_MAX)
		blocks = FILL_BLOCKS_MAX;
	bwgpu_fill_kernel<<<(unsigned int)blocks, FILL_THREADS, 0, (cudaStream_t)stream>>>((uint8_t *)dst, len,
											      byte);
	return (int)cudaGetLastError();
}

// The per-element arithmetic (elementwise_math.h) as device code: one grid-stride kernel template per
// arity, instantiated for every function, so nvcc proves each compiles for sm_90. Not launched yet:
// step 3's elementwise kernels take it over.
#define BW_HD_UNARY(NAME) \
	struct NAME##_op { \
		__device__ float operator()(float x) const { return NAME(x); } \
	};
#define BW_HD_BINARY(NAME) \
	struct NAME##_op { \
		__device__ float operator()(float x, float y) const { return NAME(x, y); } \
	};
BW_HD_UNARY(bw_relu)
BW_HD_UNARY(bw_sigmoid)
BW_HD_UNARY(bw_tanh)
BW_HD_UNARY(bw_gelu)
BW_HD_UNARY(bw_exp)
BW_HD_UNARY(bw_erf)
BW_HD_UNARY(bw_sqrt)
BW_HD_UNARY(bw_reciprocal)
BW_HD_UNARY(bw_neg)
BW_HD_UNARY(bw_abs)
BW_HD_BINARY(bw_leaky_relu) // x, alpha
BW_HD_BINARY(bw_add)
BW_HD_BINARY(bw_sub)
BW_HD_BINARY(bw_mul)
BW_HD_BINARY(bw_div)
BW_HD_BINARY(bw_pow)
BW_HD_BINARY(bw_max)
BW_HD_BINARY(bw_min)

template <typename Op> __global__ void bwgpu_unary_kernel(const float *x, float *y, size_t n)
{
	size_t stride = (size_t)gridDim.x * blockDim.x;

	for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
		y[i] = Op()(x[i]);
}

template <typename Op> __global__ void bwgpu_binary_kernel(const float *a, const float *b, float *y, size_t n)
{
	size_t stride = (size_t)gridDim.x * blockDim.x;

	for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
		y[i] = Op()(a[i], b[i]);
}

__global__ void bwgpu_clip_kernel(const float *x, float *y, size_t n, float lo, float hi)
{
	size_t stride = (size_t)gridDim.x * blockDim.x;

	for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
		y[i] = bw_clip(x[i], lo, hi);
}

__global__ void bwgpu_where_kernel(const uint8_t *c, const float *a, const float *b, float *y, size_t n)
{
	size_t stride = (size_t)gridDim.x * blockDim.x;

	for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
		y[i] = bw_where(c[i], a[i], b[i]);
}

template __global__ void bwgpu_unary_kernel<bw_relu_op>(const float *, float *, size_t);
template __global__ void bwgpu_unary_kernel<bw_sigmoid_op>(const float *, float *, size_t);
template __global__ void bwgpu_unary_kernel<bw_tanh_op>(const float *, float *, size_t);
template __global__ void bwgpu_unary_kernel<bw_gelu_op>(const float *, float *, size_t);
template __global__ void bwgpu_unary_kernel<bw_exp_op>(const float *, float *, size_t);
template __global__ void bwgpu_unary_kernel<bw_erf_op>(const float *, float *, size_t);
template __global__ void bwgpu_unary_kernel<bw_sqrt_op>(const float *, float *, size_t);
template __global__ void bwgpu_unary_kernel<bw_reciprocal_op>(const float *, float *, size_t);
template __global__ void bwgpu_unary_kernel<bw_neg_op>(const float *, float *, size_t);
template __global__ void bwgpu_unary_kernel<bw_abs_op>(const float *, float *, size_t);
template __global__ void bwgpu_binary_kernel<bw_leaky_relu_op>(const float *, const float *, float *, size_t);
template __global__ void bwgpu_binary_kernel<bw_add_op>(const float *, const float *, float *, size_t);
template __global__ void bwgpu_binary_kernel<bw_sub_op>(const float *, const float *, float *, size_t);
template __global__ void bwgpu_binary_kernel<bw_mul_op>(const float *, const float *, float *, size_t);
template __global__ void bwgpu_binary_kernel<bw_div_op>(const float *, const float *, float *, size_t);
template __global__ void bwgpu_binary_kernel<bw_pow_op>(const float *, const float *, float *, size_t);
template __global__ void bwgpu_binary_kernel<bw_max_op>(const float *, const float *, float *, size_t);
template __global__ void bwgpu_binary_kernel<bw_min_op>(const float *, const float *, float *, size_t);
