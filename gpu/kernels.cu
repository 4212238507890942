// SPDX-License-Identifier: BSD-3-Clause
// The CUDA module's kernels, called from cuda.c through extern "C" launchers that return a
// cudaError_t as an int (cuda.c is C and sees no CUDA C++).
#include <cstddef>
#include <cstdint>

#include <cuda_runtime.h>

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
