// SPDX-License-Identifier: BSD-3-Clause
// The kernels of a device program's graph: gather, one generic kernel for every op but GEMM
// (cuBLASLt's), scatter and the completion write. Each computes what program_math.h says,
// the same functions the fake device runs on the CPU, so the fake's tests cover the arithmetic and
// only the launch shapes are this file's own. Called from cuda_program.c (C) through extern "C"
// launchers returning a cudaError_t as an int; they run only inside a stream capture.
#include <cstddef>
#include <cstdint>

#include <cuda_runtime.h>

#include "program_math.h"

#define SEGMENT_THREADS 256
#define OP_THREADS 256
#define OP_BLOCKS_MAX 4096u // grid-stride beyond: Hopper has 132 SMs, this is ~30 blocks of 256 each

// A batch table of one segment: a block copies its segment into shared memory once, so the per-byte
// calls of gpu_segment_byte read the segment there instead of across PCIe from the mapped table.
#define ONE_SEGMENT_TABLE_BYTES (sizeof(struct gpu_batch_table) + sizeof(struct gpu_segment))

// Gather (scatter == 0): segments [0, nb_gather); scatter: [nb_gather, nb_gather + nb_scatter). One
// block per segment, grid-stride over segments; counts beyond max_segments (a host bug) are clamped
// rather than read past the table.
__global__ void bwgpu_segments_kernel(struct gpu_program_size size, uint32_t max_segments,
				      const struct gpu_batch_table *table, uint8_t *arena, int scatter)
{
	__shared__ __align__(16) uint8_t one_bytes[ONE_SEGMENT_TABLE_BYTES];
	__shared__ uint32_t first, end;
	struct gpu_batch_table *one = (struct gpu_batch_table *)one_bytes;

	if (threadIdx.x == 0) {
		uint32_t nb_gather = table->nb_gather, nb_scatter = table->nb_scatter;

		nb_gather = nb_gather < max_segments ? nb_gather : max_segments;
		nb_scatter = nb_scatter < max_segments - nb_gather ? nb_scatter : max_segments - nb_gather;
		first = scatter ? nb_gather : 0;
		end = scatter ? nb_gather + nb_scatter : nb_gather;
		one->nb_gather = scatter ? 0 : 1; // segment 0 of one is a gather or a scatter
		one->nb_scatter = scatter ? 1 : 0;
	}
	__syncthreads();
	for (uint32_t s = first + blockIdx.x; s < end; s += gridDim.x) {
		if (threadIdx.x == 0)
			one->segments[0] = table->segments[s];
		__syncthreads();
		// a tensor index beyond the offsets' arrays would read past them: skip the segment
		if (one->segments[0].tensor < GPU_PROG_TENSORS_MAX)
			for (uint32_t j = threadIdx.x; j < one->segments[0].len; j += blockDim.x)
				gpu_segment_byte(&size, one, 0, j, arena);
		__syncthreads(); // before thread 0 overwrites the segment
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
	bwgpu_segments_kernel<<<blocks, SEGMENT_THREADS, 0, (cudaStream_t)stream>>>(*size, max_segments, table_dev,
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
