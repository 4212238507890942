// SPDX-License-Identifier: BSD-3-Clause
// The doorbell launch mode's dispatcher (doorbell.h, cuda_doorbell.c): a one-thread kernel in a graph
// that takes the next ring entry once the host has published it and tail-launches that (size, slot)'s
// work graph, then itself, so it runs again only once the work graph is done: it never holds an SM
// while a batch runs (cuDNN's and cuBLASLt's kernels get the whole device), and batches run one after
// another in ring order, as graph launches on one stream do. Idle, it polls the ring's seq in mapped
// host memory with __nanosleep between reads, and after park_after_ns it parks (returns without going
// on), so that the stream drains and device-wide synchronising calls (cudaFree) do not wait forever
// on it; the host starts it again (cuda_doorbell.c). It also parks at once, work waiting or not, while
// the ring's park_now is set: the module is making such a call itself (cuda_doorbell.c).
//
// Device-side cudaGraphLaunch is an external function the driver resolves when it loads the module
// (as printf's vprintf): nvlink leaves it undefined even with cudadevrt, so this file needs neither
// -rdc nor cudadevrt.
#include <cstdint>

#include <cuda_runtime.h>

#include "doorbell.h"

#define DOORBELL_POLL_NS 256 // between two reads of seq across PCIe (a read takes about 1 us itself)

__device__ static inline uint32_t load_acquire_sys(const uint32_t *p)
{
	uint32_t v;

	asm volatile("ld.acquire.sys.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
	return v;
}

__device__ static inline uint64_t globaltimer_ns(void)
{
	uint64_t t;

	asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
	return t;
}

__device__ static inline uint64_t load_acquire_sys_u64(const uint64_t *p)
{
	uint64_t v;

	asm volatile("ld.acquire.sys.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
	return v;
}

// Positions wrap at 2^32: "seq is past pos" is a signed difference.
__device__ static inline bool published(const struct gpu_doorbell_ring *ring, uint32_t pos)
{
	return (int32_t)(load_acquire_sys(&ring->seq) - pos) > 0;
}

// Says the chain has ended: the epoch it read goes into parked (cuda_doorbell.c's handshake).
__device__ static inline void announce_parked(struct gpu_doorbell_ring *ring)
{
	*(volatile uint32_t *)&ring->parked = *(volatile uint32_t *)&ring->epoch;
	__threadfence_system();
}

__global__ void bwgpu_doorbell_kernel(struct gpu_doorbell_dispatch *d)
{
	struct gpu_doorbell_ring *ring = (struct gpu_doorbell_ring *)d->ring;
	volatile struct gpu_doorbell_entry *entry;
	uint32_t pos = d->next, size_idx, slot, graph = 0;
	uint64_t start = globaltimer_ns();
	cudaError_t e;

	for (;;) {
		// seq and park_now in one read across PCIe (doorbell.h: adjacent, little-endian)
		uint64_t w = load_acquire_sys_u64((const uint64_t *)(const void *)&ring->seq);

		if ((uint32_t)(w >> 32) != 0) {
			// park now, even with work waiting: the host is about to make a device-wide
			// synchronising call, and whoever clears park_now starts a chain for what waits
			announce_parked(ring);
			return;
		}
		if ((int32_t)((uint32_t)w - pos) > 0)
			break;
		if (globaltimer_ns() - start < d->park_after_ns) {
			__nanosleep(DOORBELL_POLL_NS);
			continue;
		}
		// Park: say so, fence, look at seq once more. The host stores seq, fences, then reads parked
		// (cuda_doorbell_ring): one of the two sees the other's store, so a doorbell is never missed.
		// Work found here is served; the host may have started another chain on seeing parked: it
		// runs after this one (the same stream), finds nothing and parks.
		announce_parked(ring);
		if (!published(ring, pos))
			return;
		break;
	}
	entry = &ring->entries[pos & d->mask];
	size_idx = entry->size_idx;
	slot = entry->slot;
	if (size_idx == GPU_DOORBELL_STOP)
		return; // next stays on the stop entry: a chain started after this one stops too
	d->next = pos + 1;
	e = cudaErrorInvalidValue; // the host checked the indexes: only a corrupted ring gets here
	if (slot < d->nb_slots && size_idx < d->nb_graphs / d->nb_slots) {
		graph = size_idx * d->nb_slots + slot;
		e = cudaGraphLaunch((cudaGraphExec_t)d->graphs[graph], cudaStreamGraphTailLaunch);
		if (e == cudaSuccess)
			e = cudaGraphLaunch((cudaGraphExec_t)d->self, cudaStreamGraphTailLaunch);
	}
	if (e != cudaSuccess) {
		// the host's next doorbell reads why; the trap makes it sticky, so health() sees it too
		ring->fault_pos = pos;
		ring->fault_graph = graph;
		__threadfence_system();
		*(volatile uint32_t *)&ring->fault = (uint32_t)e;
		__threadfence_system();
		__trap();
	}
}

// Captured into the dispatcher graph (one block of one thread) by cuda_doorbell.c.
extern "C" int bwgpu_doorbell_launch(void *stream, struct gpu_doorbell_dispatch *dispatch_dev)
{
	bwgpu_doorbell_kernel<<<1, 1, 0, (cudaStream_t)stream>>>(dispatch_dev);
	return (int)cudaGetLastError();
}

// Loads the kernel now (the runtime loads modules lazily): a driver that cannot link it (device-side
// graph launch) fails here, when the instance is made, not at the first doorbell.
extern "C" int bwgpu_doorbell_check(void)
{
	struct cudaFuncAttributes a;

	return (int)cudaFuncGetAttributes(&a, bwgpu_doorbell_kernel);
}
