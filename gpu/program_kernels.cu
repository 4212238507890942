// SPDX-License-Identifier: BSD-3-Clause
// The kernels of a device program's graph: gather, one generic kernel for every op but GEMM
// (cuBLASLt's), scatter and the completion write. Each computes what program_math.h (the ops) and
// copy_plan.h (the gather and scatter's partition) say, the same functions the fake device runs on
// the CPU, so the fake's tests cover the arithmetic and the partition, and only the launch shapes
// are this file's own. Called from cuda_program.c (C) through extern "C"
// launchers returning a cudaError_t as an int; they run only inside a stream capture.
#include <cstddef>
#include <cstdint>

#include <cuda_runtime.h>

#include "copy_plan.h"
#include "program_math.h"

#define OP_THREADS 256
#define OP_BLOCKS_MAX 4096u // grid-stride beyond: Hopper has 132 SMs, this is ~30 blocks of 256 each

// Segments a block holds in shared memory at a time: the table is mapped host memory, read once per
// block in tiles rather than once per chunk across PCIe.
#define SEGMENT_TILE 64

// Gather (scatter == 0): segments [0, nb_gather); scatter: [nb_gather, nb_gather + nb_scatter).
// copy_plan.h says which block and thread copies what: every segment cut into chunks dealt to the
// whole grid, 16-byte accesses with several in flight. Counts beyond max_segments (a host bug) are
// clamped rather than read past the table. Launched with GPU_COPY_THREADS threads per block.
__global__ void __launch_bounds__(GPU_COPY_THREADS) bwgpu_segments_kernel(struct gpu_program_size size,
									   uint32_t max_segments,
									   const struct gpu_batch_table *table,
									   uint8_t *arena, int scatter)
{
	__shared__ struct gpu_segment tile[SEGMENT_TILE];
	__shared__ uint32_t nb_gather, first, end;
	uint64_t chunk = 0; // the global number of the next segment's first chunk

	if (threadIdx.x == 0) {
		uint32_t g = table->nb_gather, n = table->nb_scatter;

		g = g < max_segments ? g : max_segments;
		n = n < max_segments - g ? n : max_segments - g;
		nb_gather = g;
		first = scatter ? g : 0;
		end = scatter ? g + n : g;
	}
	__syncthreads();
	for (uint32_t base = first; base < end; base += SEGMENT_TILE) {
		uint32_t nb = end - base < SEGMENT_TILE ? end - base : SEGMENT_TILE;

		for (uint32_t i = threadIdx.x; i < nb; i += blockDim.x)
			tile[i] = table->segments[base + i];
		__syncthreads();
		for (uint32_t i = 0; i < nb; i++) {
			uint8_t *dst;
			const uint8_t *src;

			if (gpu_copy_segment_ends(&size, nb_gather, &tile[i], base + i, arena, &dst, &src) == 0)
				chunk += gpu_copy_segment(dst, src, tile[i].len, chunk, blockIdx.x, gridDim.x, threadIdx.x);
		}
		__syncthreads(); // before the next tile overwrites this one
	}
	if (scatter)
		__threadfence_system(); // the replies cross PCIe into host memory: visible before the word
}

__global__ void bwgpu_op_kernel(struct gpu_op op, uint32_t op_index, uint8_t *arena, const uint8_t *consts,
				uint32_t *fault_dev, uint64_t items)
{
	uint64_t stride = (uint64_t)gridDim.x * blockDim.x;

	for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < items; i += stride)
		gpu_op_item(&op, op_index, arena, consts, fault_dev, i);
}

__global__ void bwgpu_complete_kernel(struct gpu_batch_table *table, uint32_t *fault_dev, uint32_t *word)
{
	// the launch's fault pair (device memory) into the table, reset for the next launch of the graph
	table->fault_op = fault_dev[1];
	table->fault = fault_dev[0];
	fault_dev[0] = 0;
	fault_dev[1] = 0;
	// orders this launch's earlier writes (the scatter's, the fault) before the word, for the host
	__threadfence_system();
	*(volatile uint32_t *)word = *(const volatile uint32_t *)&table->generation;
}

extern "C" int bwgpu_segments_launch(void *stream, const struct gpu_program_size *size, uint32_t max_segments,
				     const struct gpu_batch_table *table_dev, uint8_t *arena, int scatter,
				     uint32_t blocks)
{
	bwgpu_segments_kernel<<<blocks, GPU_COPY_THREADS, 0, (cudaStream_t)stream>>>(*size, max_segments, table_dev,
										       arena, scatter);
	return (int)cudaGetLastError();
}

extern "C" int bwgpu_op_launch(void *stream, const struct gpu_op *op, uint32_t op_index, uint8_t *arena,
			       const uint8_t *consts, uint32_t *fault_dev)
{
	uint64_t items = gpu_op_items(op), blocks = (items + OP_THREADS - 1) / OP_THREADS;

	if (items == 0)
		return (int)cudaSuccess;
	if (blocks > OP_BLOCKS_MAX)
		blocks = OP_BLOCKS_MAX;
	bwgpu_op_kernel<<<(unsigned int)blocks, OP_THREADS, 0, (cudaStream_t)stream>>>(*op, op_index, arena, consts,
										      fault_dev, items);
	return (int)cudaGetLastError();
}

extern "C" int bwgpu_complete_launch(void *stream, struct gpu_batch_table *table_dev, uint32_t *fault_dev,
				     uint32_t *word_dev)
{
	bwgpu_complete_kernel<<<1, 1, 0, (cudaStream_t)stream>>>(table_dev, fault_dev, word_dev);
	return (int)cudaGetLastError();
}
