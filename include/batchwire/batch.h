/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The batch descriptor and the executor interface: what a polling core's batcher hands to whatever
 * runs a model (the CPU workers, the GPU runtime, the built-in echo model). DPDK-free.
 *
 * A batch is a descriptor, not a copy: it lists its tasks, and each task points at its rows inside
 * the request's own memory (packet buffers). The batcher never copies tensor data; the executor
 * gathers the rows (and pads) into its own memory and scatters the outputs back per task, discarding
 * the padding rows. bat_batch_gather/bat_batch_scatter (batching/) do both for executors on the CPU.
 */
#ifndef BATCHWIRE_BATCH_H
#define BATCHWIRE_BATCH_H

#include <stdint.h>

#include <batchwire/status.h>

#define BW_BATCH_TENSORS_MAX 8 /* inputs, and outputs, of a batched model */

/* Why a batch was closed and dispatched. */
enum bw_dispatch_reason {
	BW_DISPATCH_FULL,     /* it reached its capacity, or the next task did not fit */
	BW_DISPATCH_TIMEOUT,  /* batch_timeout_micros passed since its first task */
	BW_DISPATCH_DEADLINE, /* closed early so that its most urgent task can meet its deadline */
	BW_DISPATCH_SLO,      /* closed early so that its oldest task can meet slo_micros */
	BW_DISPATCH_IDLE,     /* the executor had nothing in flight (dispatch_when_idle) */
	BW_DISPATCH_DRAIN,    /* shutdown: everything queued is dispatched */
	BW_DISPATCH_COUNT
};

/* Rows of one tensor of one task: contiguous, row-major. */
struct bw_segment {
	uint8_t *data;
	uint32_t len; /* rows * bytes per row */
};

/* One task of a batch: a whole request, or one piece of a request split across batches. */
struct bw_batch_task {
	uint32_t rows;       /* rows this task puts into the batch */
	uint32_t row_offset; /* its first row within its request (non-zero for later pieces) */
	struct bw_segment inputs[BW_BATCH_TENSORS_MAX];  /* in the request's memory */
	struct bw_segment outputs[BW_BATCH_TENSORS_MAX]; /* where its output rows go */
	void *job;           /* the request it belongs to: the batcher's, not the executor's */
};

/* A closed batch as the executor receives it. */
struct bw_batch {
	uint32_t size;        /* real rows: the sum of the tasks' rows */
	uint32_t padded_size; /* rows the model runs: the smallest allowed size >= size */
	uint16_t num_tasks;
	uint16_t num_inputs;
	uint16_t num_outputs;
	uint8_t reason;       /* enum bw_dispatch_reason */
	uint8_t priority;
	uint64_t created_tsc;    /* the window opened: its first task arrived */
	uint64_t dispatched_tsc; /* handed to the executor */
	struct bw_batch_task **tasks;
	void *owner;          /* the batcher that completes it: only its polling lcore may */
	/* the executor's, from submit to completion: the batcher neither reads nor writes them */
	void *exec_route;     /* where its completion goes (the daemon: the submitting lcore's ring) */
	uint64_t started_tsc; /* the executor began running it */
};

/*
 * An executor as a batcher sees it. submit runs on the polling lcore: it must not block, lock or make
 * a system call. The batch completes later on the lcore that owns it (bw_batch.owner), through
 * bat_batch_complete, exactly once, whatever the outcome.
 */
struct bw_executor {
	/** \return 0 once the batch is on its way, or a negative errno (it then fails UNAVAILABLE). */
	int (*submit)(void *ctx, struct bw_batch *batch);
	void *ctx;
};

#endif /* BATCHWIRE_BATCH_H */
