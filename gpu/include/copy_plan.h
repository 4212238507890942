/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The batch table's gather and scatter (program.h's segments): which block and thread copies which
 * bytes of which segment. Written once for both sides (BW_HD): the CUDA module's segment kernel
 * (program_kernels.cu) runs these functions on every thread of its grid, and the fake device
 * (fake_run.c, gpu_copy_emulate) runs the same functions for every block and thread in turn, so the
 * fake's tests cover the very partition the GPU runs; only the 16-byte load and store differ.
 *
 * Why this shape: the segments' host side is mapped pinned memory, so every load crosses PCIe with
 * a round trip of about a microsecond. Throughput comes from bytes in flight, so
 *   - every segment is cut into chunks of GPU_COPY_CHUNK_BYTES and the chunks of all segments are
 *     dealt round-robin to the whole grid: a batch in one segment still keeps every block busy, and
 *     many small segments spread over the blocks rather than queueing one per block;
 *   - a thread loads GPU_COPY_UNROLL 16-byte vectors before it stores any, so each thread has that
 *     many reads outstanding;
 *   - chunk boundaries are 16-byte aligned in the destination (chunks are counted from the aligned
 *     address below its start), so only a segment's first and last chunk have a byte-wise head or
 *     tail, of fewer than 16 bytes;
 *   - every load and every store of the interior is a 16-byte aligned vector, whatever the two
 *     alignments: where source and destination agree mod 16 a vector is loaded and stored as is;
 *     otherwise (packet payloads: the usual case) the two aligned source words a destination vector
 *     straddles are loaded and funnel-shifted into it (gpu_copy_funnel16), so a misaligned segment
 *     still moves 16 bytes per access, never one. A zero fill (gather segment with addr 0) stores
 *     vectors of zeros.
 * Source and destination never alias: one side is the arena (device memory), the other host memory.
 * The shifted path reads up to 15 bytes before and after a thread's share, but only within aligned
 * 16-byte words holding one of its bytes: such a word never leaves the page (nor the cudaMalloc
 * allocation, 256-byte aligned) its share lies in, and cudaHostRegister pins and maps whole pages.
 * The fake's load (gpu_copy_ld16_share) hands those bytes over as GPU_COPY_POISON and refuses a word
 * holding none of the share's bytes, so its tests see a wrong shift and a load that could fault.
 *
 * Numbering: chunk c of segment s is global chunk first(s) + c, first(s) the chunks of the segments
 * before s in the same direction; block b copies the global chunks g with g % nb_blocks == b.
 */
#ifndef BW_GPU_COPY_PLAN_H
#define BW_GPU_COPY_PLAN_H

#include <stddef.h>
#include <stdint.h>
#ifndef __CUDACC__
#include <assert.h>
#include <string.h>
#endif

#include <batchwire/compiler.h>

#include "program.h"

#define GPU_COPY_THREADS 256u   /* threads per block of the segment kernel */
#define GPU_COPY_VEC_BYTES 16u  /* one vector load or store */
#define GPU_COPY_UNROLL 4u      /* vectors (or byte groups) a thread has in flight */
/* bytes per chunk: every thread of the block copies GPU_COPY_UNROLL vectors of it */
#define GPU_COPY_CHUNK_BYTES (GPU_COPY_THREADS * GPU_COPY_VEC_BYTES * GPU_COPY_UNROLL)
/* Grid cap: 1024 blocks of 256 threads fill an H200's 132 SMs (8 each) with 16 MiB in flight; bigger
 * copies loop over their chunks. */
#define GPU_COPY_BLOCKS_MAX 1024u
/* (the fake) what its load gives for source bytes outside a thread's share: a wrong shift puts them
 * into the destination, where the tests see them */
#define GPU_COPY_POISON 0xa5u

/* the device pass only: the host compiler sees the same __host__ __device__ code and knows no unroll */
#ifdef __CUDA_ARCH__
#define GPU_COPY_UNROLL_LOOP _Pragma("unroll")
#else
#define GPU_COPY_UNROLL_LOOP
#endif

/* 16 bytes, loaded and stored whole (ld/st.128 on the device, which faults on an address not 16-byte
 * aligned: the fake's asserts stand in for that fault). */
struct __attribute__((aligned(16))) gpu_copy_vec {
	uint64_t lo, hi;
};

static inline BW_HD struct gpu_copy_vec gpu_copy_ld16(const uint8_t *p)
{
#ifdef __CUDACC__
	return *(const struct gpu_copy_vec *)(const void *)p;
#else
	struct gpu_copy_vec v;

	assert(((uintptr_t)p & (GPU_COPY_VEC_BYTES - 1)) == 0);
	memcpy(&v, p, sizeof(v)); /* one 16-byte move; no aliasing question on the host */
	return v;
#endif
}

static inline BW_HD void gpu_copy_st16(uint8_t *p, struct gpu_copy_vec v)
{
#ifdef __CUDACC__
	*(struct gpu_copy_vec *)(void *)p = v;
#else
	assert(((uintptr_t)p & (GPU_COPY_VEC_BYTES - 1)) == 0);
	memcpy(p, &v, sizeof(v));
#endif
}

/*
 * The aligned 16-byte source word at p, of which the thread's share is [lo, hi) (addresses). The GPU
 * loads it whole (see the opening comment for why that is safe); the fake copies only the share's
 * bytes and poisons the others, and asserts the word holds one of them.
 */
static inline BW_HD struct gpu_copy_vec gpu_copy_ld16_share(const uint8_t *p, uintptr_t lo, uintptr_t hi)
{
#ifdef __CUDACC__
	(void)lo;
	(void)hi;
	return gpu_copy_ld16(p);
#else
	uintptr_t a = (uintptr_t)p;
	struct gpu_copy_vec v;
	uint8_t b[GPU_COPY_VEC_BYTES];

	if (a >= lo && a + GPU_COPY_VEC_BYTES <= hi)
		return gpu_copy_ld16(p);
	assert((a & (GPU_COPY_VEC_BYTES - 1)) == 0);
	assert(a < hi && a + GPU_COPY_VEC_BYTES > lo); /* else it might lie on a page nobody mapped */
	for (uint32_t i = 0; i < GPU_COPY_VEC_BYTES; i++)
		b[i] = a + i >= lo && a + i < hi ? *(const uint8_t *)(a + i) : (uint8_t)GPU_COPY_POISON;
	memcpy(&v, b, sizeof(v));
	return v;
#endif
}

/* The low 32 bits of hi:lo shifted right by s (0..31) bits: the device's funnel shift (SHF). */
static inline BW_HD uint32_t gpu_copy_funnel_r32(uint32_t lo, uint32_t hi, uint32_t s)
{
#ifdef __CUDA_ARCH__
	return __funnelshift_r(lo, hi, s);
#else
	s &= 31;
	return s == 0 ? lo : (lo >> s) | (hi << (32 - s));
#endif
}

/*
 * Bytes [r, r + 16) of the 32 bytes w0 then w1 (r 0..15; both little-endian, host and device): the
 * destination vector whose source starts r bytes into the aligned word w0. Whole 8- and 4-byte steps
 * are selects on bits of r, the rest one funnel shift per 32-bit lane: every index is a constant, so
 * the lanes stay in registers (no local memory), and r is the same for the whole segment, so the
 * selects never diverge a warp.
 */
static inline BW_HD struct gpu_copy_vec gpu_copy_funnel16(struct gpu_copy_vec w0, struct gpu_copy_vec w1, uint32_t r)
{
	uint32_t x[8] = { (uint32_t)w0.lo, (uint32_t)(w0.lo >> 32), (uint32_t)w0.hi, (uint32_t)(w0.hi >> 32),
			  (uint32_t)w1.lo, (uint32_t)(w1.lo >> 32), (uint32_t)w1.hi, (uint32_t)(w1.hi >> 32) };
	uint32_t y[6], z[5], o[4];
	struct gpu_copy_vec v;

	GPU_COPY_UNROLL_LOOP
	for (uint32_t i = 0; i < 6; i++)
		y[i] = (r & 8) != 0 ? x[i + 2] : x[i];
	GPU_COPY_UNROLL_LOOP
	for (uint32_t i = 0; i < 5; i++)
		z[i] = (r & 4) != 0 ? y[i + 1] : y[i];
	GPU_COPY_UNROLL_LOOP
	for (uint32_t i = 0; i < 4; i++)
		o[i] = gpu_copy_funnel_r32(z[i], z[i + 1], (r & 3) * 8);
	v.lo = (uint64_t)o[0] | (uint64_t)o[1] << 32;
	v.hi = (uint64_t)o[2] | (uint64_t)o[3] << 32;
	return v;
}

/** \return the chunks of a len-byte copy to dst (counted from dst rounded down to 16 bytes); 0 for len 0. */
static inline BW_HD uint64_t gpu_copy_chunks(uintptr_t dst, uint32_t len)
{
	return len == 0 ? 0 : ((dst & (GPU_COPY_VEC_BYTES - 1)) + (uint64_t)len + GPU_COPY_CHUNK_BYTES - 1) /
				      GPU_COPY_CHUNK_BYTES;
}

/** Bytes [*lo, *hi) of the copy that chunk c covers (c < gpu_copy_chunks(dst, len)). */
static inline BW_HD void gpu_copy_chunk_range(uintptr_t dst, uint32_t len, uint64_t c, uint64_t *lo, uint64_t *hi)
{
	uint64_t mis = dst & (GPU_COPY_VEC_BYTES - 1);
	uint64_t a = c * GPU_COPY_CHUNK_BYTES, b = a + GPU_COPY_CHUNK_BYTES;

	*lo = a > mis ? a - mis : 0;
	*hi = b - mis < len ? b - mis : len;
}

/** \return the first chunk of a segment that block b copies, its first global chunk being first. */
static inline BW_HD uint64_t gpu_copy_first_chunk(uint64_t first, uint32_t b, uint32_t nb_blocks)
{
	uint64_t r = first % nb_blocks;

	return b >= r ? b - r : b + nb_blocks - r;
}

/*
 * Thread t's share of bytes [lo, hi) from src (NULL: zeros) to dst: of the 16-byte aligned interior
 * of dst, vector t + u * GPU_COPY_THREADS for u < GPU_COPY_UNROLL (a chunk has at most that many),
 * all loads before any store; the head and tail bytes (fewer than 16 each) one per thread. The source
 * of an interior vector starts r = (src - dst) mod 16 bytes into an aligned word: r == 0 loads that
 * word, otherwise it and the next one, funnel-shifted by r bytes. The second word is the next lane's
 * first, so a warp's two loads ask for the same sectors but one.
 */
static inline BW_HD void gpu_copy_thread(uint8_t *dst, const uint8_t *src, uint64_t lo, uint64_t hi, uint32_t t)
{
	uint64_t head = (GPU_COPY_VEC_BYTES - (((uintptr_t)dst + lo) & (GPU_COPY_VEC_BYTES - 1))) &
			(GPU_COPY_VEC_BYTES - 1);
	uint64_t vlo = lo + head < hi ? lo + head : hi;
	uint64_t nb_vec = (hi - vlo) / GPU_COPY_VEC_BYTES, vhi = vlo + nb_vec * GPU_COPY_VEC_BYTES;
	uint32_t r = (uint32_t)(((uintptr_t)src - (uintptr_t)dst) & (GPU_COPY_VEC_BYTES - 1));
	/* the aligned source word under the interior's first vector (computed as an address: it may lie
	 * before src) and the share's source bytes, which the fake's loads keep to */
	uintptr_t word0 = (uintptr_t)src + vlo - r, share_lo = (uintptr_t)src + lo, share_hi = (uintptr_t)src + hi;
	struct gpu_copy_vec v[GPU_COPY_UNROLL], w[GPU_COPY_UNROLL];

	GPU_COPY_UNROLL_LOOP
	for (uint32_t u = 0; u < GPU_COPY_UNROLL; u++) {
		uint64_t k = t + (uint64_t)u * GPU_COPY_THREADS;
		const uint8_t *p = (const uint8_t *)(word0 + k * GPU_COPY_VEC_BYTES);

		v[u].lo = v[u].hi = w[u].lo = w[u].hi = 0;
		if (src == NULL || k >= nb_vec)
			continue;
		if (r == 0) {
			v[u] = gpu_copy_ld16(p);
		} else {
			v[u] = gpu_copy_ld16_share(p, share_lo, share_hi);
			w[u] = gpu_copy_ld16_share(p + GPU_COPY_VEC_BYTES, share_lo, share_hi);
		}
	}
	GPU_COPY_UNROLL_LOOP
	for (uint32_t u = 0; u < GPU_COPY_UNROLL; u++) {
		uint64_t k = t + (uint64_t)u * GPU_COPY_THREADS;

		if (k < nb_vec)
			gpu_copy_st16(dst + vlo + k * GPU_COPY_VEC_BYTES,
				      src != NULL && r != 0 ? gpu_copy_funnel16(v[u], w[u], r) : v[u]);
	}
	if (t < vlo - lo)
		dst[lo + t] = src != NULL ? src[lo + t] : 0;
	if (t < hi - vhi)
		dst[vhi + t] = src != NULL ? src[vhi + t] : 0;
}

/**
 * Thread t of block b's share of one segment: len bytes from src (NULL: zeros) to dst, the segment's
 * chunks numbered from first. \return the segment's chunks (the next segment's first is first + it).
 */
static inline BW_HD uint64_t gpu_copy_segment(uint8_t *dst, const uint8_t *src, uint32_t len, uint64_t first,
					      uint32_t b, uint32_t nb_blocks, uint32_t t)
{
	uint64_t n = gpu_copy_chunks((uintptr_t)dst, len);

	for (uint64_t c = gpu_copy_first_chunk(first, b, nb_blocks); c < n; c += nb_blocks) {
		uint64_t lo, hi;

		gpu_copy_chunk_range((uintptr_t)dst, len, c, &lo, &hi);
		gpu_copy_thread(dst, src, lo, hi, t);
	}
	return n;
}

/**
 * Segment s of table t (s < nb_gather: a gather into the arena; else a scatter out of it): where its
 * bytes go and come from. *src NULL: a gather of zeros (padding rows). \return 0, or -1 for a tensor
 * index past the offsets' arrays (a host bug: the segment is skipped, not read past them).
 */
static inline BW_HD int gpu_copy_segment_ends(const struct gpu_program_size *sz, uint32_t nb_gather,
					      const struct gpu_segment *seg, uint32_t s, uint8_t *arena, uint8_t **dst,
					      const uint8_t **src)
{
	if (seg->tensor >= GPU_PROG_TENSORS_MAX)
		return -1;
	if (s < nb_gather) {
		*dst = arena + sz->input_offset[seg->tensor] + seg->offset;
		*src = seg->addr != 0 ? (const uint8_t *)(uintptr_t)seg->addr : NULL;
	} else {
		*dst = (uint8_t *)(uintptr_t)seg->addr;
		*src = arena + sz->output_offset[seg->tensor] + seg->offset;
	}
	return 0;
}

/**
 * \return the blocks of the segment kernel for one direction of a size: enough for every chunk of the
 * largest table (all rows of every input, or output, plus two partial chunks per segment), at most
 * GPU_COPY_BLOCKS_MAX; fixed when the graph is captured.
 */
static inline uint32_t gpu_copy_blocks(const struct gpu_program *prog, const struct gpu_program_size *sz, int scatter)
{
	uint64_t bytes = 0, chunks;
	uint32_t n = scatter ? prog->nb_outputs : prog->nb_inputs;

	for (uint32_t i = 0; i < n && i < GPU_PROG_TENSORS_MAX; i++)
		bytes += (uint64_t)sz->batch * (scatter ? prog->output_row_bytes : prog->input_row_bytes)[i];
	chunks = bytes / GPU_COPY_CHUNK_BYTES + 2ull * prog->max_segments;
	return chunks == 0 ? 1 : chunks < GPU_COPY_BLOCKS_MAX ? (uint32_t)chunks : GPU_COPY_BLOCKS_MAX;
}

#ifndef __CUDACC__
/**
 * (the fake device, tests) The whole grid's work on one segment, block after block and thread after
 * thread: what the kernel's nb_blocks x GPU_COPY_THREADS threads do to it, in some order (their
 * pieces are disjoint). \return the segment's chunks, as gpu_copy_segment.
 */
static inline uint64_t gpu_copy_emulate(uint8_t *dst, const uint8_t *src, uint32_t len, uint64_t first,
					uint32_t nb_blocks)
{
	uint64_t n = gpu_copy_chunks((uintptr_t)dst, len);

	/* only the blocks that own one of its chunks: the others' gpu_copy_segment does nothing */
	for (uint64_t c = 0; c < n && c < nb_blocks; c++)
		for (uint32_t t = 0; t < GPU_COPY_THREADS; t++)
			gpu_copy_segment(dst, src, len, first, (uint32_t)((first + c) % nb_blocks), nb_blocks, t);
	return n;
}
#endif

#endif /* BW_GPU_COPY_PLAN_H */
