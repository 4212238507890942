/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The doorbell launch mode's ring (gpu.h's GPU_LAUNCH_DOORBELL), shared by the CUDA module (host side
 * in cuda_doorbell.c, dispatcher kernel in doorbell.cu) and the fake device, so that the fake's tests
 * run the host protocol the module runs. Plain C, no CUDA: nvcc compiles it too.
 *
 * One ring per instance, in memory both sides reach (CUDA: mapped pinned host memory). The host
 * writes the (size, slot) to launch into entries[pos & mask], then publishes pos + 1 in seq with a
 * release store: that is the whole launch. The device side (CUDA's dispatcher, the fake's worker)
 * keeps its own next position, takes entries in ring order once seq passes them, and runs them one
 * after another, so completions come in ring order.
 *
 * Why the ring never overwrites an entry not yet taken: a (size, slot) is launched again only after
 * its completion word was seen, so the entries between the device's position and seq name distinct
 * pairs (a pair taken twice there would mean a launch behind an entry not yet taken had completed).
 * Hence at most nb_sizes * nb_slots entries are ever waiting, and a ring of more entries than that
 * always has room, for the stop entry at shutdown as well. A power of two, so that pos & mask stays
 * right when the 32-bit positions wrap.
 */
#ifndef BW_GPU_DOORBELL_H
#define BW_GPU_DOORBELL_H

#include <stdint.h>

#define GPU_DOORBELL_STOP 0xffffffffu /* an entry's size_idx: the dispatcher ends (instance_destroy) */
#define GPU_DOORBELL_LINE_BYTES 64

struct gpu_doorbell_entry {
	uint32_t size_idx; /* or GPU_DOORBELL_STOP */
	uint32_t slot;
};

/*
 * Each side writes its own cache lines: the host's line is read by the device's polling, the device's
 * line changes only when a dispatcher parks or fails, so the host's read of it hits its cache.
 *
 * park_now (host, cold): set while the module makes a device-wide synchronising call (cudaFree,
 * cudaFreeHost, cudaDeviceSynchronize wait for every stream, a running dispatcher's too). The device
 * side takes nothing from a ring with it set, even with entries waiting, and the CUDA dispatcher
 * parks at once; the entries wait for the resume (cuda_doorbell.c says who restarts the chain). It
 * sits beside seq so that one 8-byte read per poll gets both.
 */
struct gpu_doorbell_ring {
	/* written by the host */
	uint32_t seq;            /* positions published: entries [0, seq) are launches */
	uint32_t park_now;       /* nonzero: take nothing, park now */
	uint32_t epoch;          /* CUDA: dispatcher chains started, written by the holder of starting */
	uint32_t starting;       /* CUDA: 1 while a thread starts a chain or a park holds the ring (CAS) */
	uint8_t host_pad[GPU_DOORBELL_LINE_BYTES - 4 * sizeof(uint32_t)];
	/* written by the device */
	uint32_t parked;         /* CUDA: the epoch a dispatcher read when it last parked */
	uint32_t fault;          /* CUDA: the cudaError_t of a failed device-side launch; 0: none */
	uint32_t fault_pos;      /* its ring position */
	uint32_t fault_graph;    /* the graph it launched: size_idx * nb_slots + slot */
	uint8_t dev_pad[GPU_DOORBELL_LINE_BYTES - 4 * sizeof(uint32_t)];
	struct gpu_doorbell_entry entries[]; /* mask + 1 */
};

#ifndef __cplusplus
/* the dispatcher reads seq (low half) and park_now (high half) as one little-endian 8-byte word */
_Static_assert(__builtin_offsetof(struct gpu_doorbell_ring, seq) == 0, "seq opens the host line");
_Static_assert(__builtin_offsetof(struct gpu_doorbell_ring, park_now) == 4, "park_now beside seq");
_Static_assert(__builtin_offsetof(struct gpu_doorbell_ring, parked) == GPU_DOORBELL_LINE_BYTES,
	       "the device's line is the second");
#endif

/** \return the ring's entries for nb_graphs (size, slot) pairs: the power of two above nb_graphs. */
static inline uint32_t gpu_doorbell_entries(uint32_t nb_graphs)
{
	uint32_t n = 1;

	while (n <= nb_graphs)
		n <<= 1;
	return n;
}

/** \return the bytes of a ring of nb_entries entries. */
static inline uint64_t gpu_doorbell_ring_bytes(uint32_t nb_entries)
{
	return sizeof(struct gpu_doorbell_ring) + (uint64_t)nb_entries * sizeof(struct gpu_doorbell_entry);
}

/*
 * The CUDA module's dispatcher (doorbell.cu), in device memory, written by the host once when the
 * instance is made; afterwards only the dispatcher writes it (next). Handles are cudaGraphExec_t.
 */
struct gpu_doorbell_dispatch {
	uint64_t ring;            /* struct gpu_doorbell_ring *: its device address */
	uint64_t self;            /* the dispatcher graph, instantiated for device launch: how it goes on */
	uint64_t park_after_ns;   /* idle this long, the dispatcher parks (cuda_doorbell.c says why) */
	uint32_t next;            /* the next position to take */
	uint32_t mask;            /* the ring's entries - 1 */
	uint32_t nb_slots, nb_graphs;
	uint64_t graphs[];        /* the work graphs, size_idx * nb_slots + slot, instantiated for device launch */
};

#ifndef __CUDACC__
/**
 * (hot, host) Publishes position pos (the host's count of launches so far): the entry, then seq with
 * a release store, so whoever reads seq with acquire reads the entry, and the batch table the caller
 * wrote before, as they are. Memory writes only.
 */
static inline void gpu_doorbell_post(struct gpu_doorbell_ring *ring, uint32_t mask, uint32_t pos, uint32_t size_idx,
				     uint32_t slot)
{
	struct gpu_doorbell_entry *e = &ring->entries[pos & mask];

	__atomic_store_n(&e->size_idx, size_idx, __ATOMIC_RELAXED);
	__atomic_store_n(&e->slot, slot, __ATOMIC_RELAXED);
	__atomic_store_n(&ring->seq, pos + 1, __ATOMIC_RELEASE);
}
#endif

#endif /* BW_GPU_DOORBELL_H */
