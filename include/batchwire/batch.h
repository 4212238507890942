/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The batch descriptor and the executor interface: what a polling core's batcher hands to whatever
 * runs a model (the CPU workers, the GPU runtime, the built-in echo model). DPDK-free.
 *
 * A batch is a descriptor, not a copy: it lists its tasks, and each task points at its rows inside
 * the request's own memory (packet buffers). The batcher never copies tensor data; the executor
 * gathers the rows (and pads) into its own memory and scatters the outputs back per task, discarding
 * the padding rows. bw_batch_gather/bw_batch_scatter (below) do both for executors on the CPU.
 */
#ifndef BATCHWIRE_BATCH_H
#define BATCHWIRE_BATCH_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

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
 * Copies input `input` of every task into dst (padded_size rows of row_bytes), the padding rows
 * repeating row 0 of the first task: real data, so no kernel sees garbage or NaNs. With
 * bw_batch_scatter, the only place a CPU executor copies batch data.
 */
static inline void bw_batch_gather(const struct bw_batch *batch, unsigned int input, uint8_t *dst, uint32_t row_bytes)
{
	uint8_t *out = dst;

	for (uint16_t i = 0; i < batch->num_tasks; i++) {
		const struct bw_segment *s = &batch->tasks[i]->inputs[input];

		memcpy(out, s->data, s->len);
		out += s->len;
	}
	for (uint32_t r = batch->size; r < batch->padded_size; r++) {
		memcpy(out, dst, row_bytes);
		out += row_bytes;
	}
}

/** Copies output `output`'s rows from src back to each task's output segment; padding rows are dropped. */
static inline void bw_batch_scatter(const struct bw_batch *batch, unsigned int output, const uint8_t *src)
{
	for (uint16_t i = 0; i < batch->num_tasks; i++) {
		const struct bw_segment *s = &batch->tasks[i]->outputs[output];

		if (s->data != src) /* an executor may have computed in place */
			memmove(s->data, src, s->len);
		src += s->len;
	}
}

/* A finished batch, as every executor reports it (the CPU runtime, the GPU executor, echo). */
struct bw_completion {
	struct bw_batch *batch;
	enum bw_status status;  /* OK when every output is valid */
	const char *msg;        /* "" when OK; else why, one line (the node and kernel for a CPU model) */
	uint32_t valid_outputs; /* bit o: output o was computed and written to the tasks */
};

typedef void (*bw_completion_fn)(void *arg, const struct bw_completion *c);

/* Where an executor's counters go: telemetry passes one, the executor adds each counter by name. */
typedef void (*bw_stat_fn)(void *sink, const char *name, uint64_t value);

/*
 * What runs a model's batches, one instance per model and polling lcore, as the batcher and that
 * lcore see it: the echo model, a CPU model's worker lcores, a GPU. submit, poll and health run on the
 * polling lcore's hot path: they must not block, lock, allocate or make a system call. A batch
 * submitted completes exactly once, through poll's done on the same lcore, whatever the outcome; the
 * lcore then hands it to bat_batch_complete. Optional members are NULL where there is nothing to do.
 */
struct bw_executor_ops {
	const char *name; /* "echo", "cpu", "gpu" */
	/** On the polling lcore's own thread, before its loop (optional). \return 0 or -errno, with err. */
	int (*lcore_start)(void *ctx, char *err, size_t cap);
	/** After the polling lcore has stopped, on the main thread: frees the instance (optional). */
	void (*lcore_stop)(void *ctx);
	/** \return 0 once the batch is on its way, or a negative errno (it then fails UNAVAILABLE). */
	int (*submit)(void *ctx, struct bw_batch *batch);
	/** Hands up to max finished batches to done (optional: none finish here). \return how many. */
	unsigned int (*poll)(void *ctx, bw_completion_fn done, void *arg, unsigned int max);
	/**
	 * Per request, before it is batched (optional: always healthy): a load or two. \return 0 while
	 * the executor can run batches, else -ENODEV with why written.
	 */
	int (*health)(const void *ctx, char *why, size_t cap);
	/** (any thread) Adds this instance's counters to sink (optional). */
	void (*stats)(const void *ctx, bw_stat_fn add, void *sink);
};

struct bw_executor {
	const struct bw_executor_ops *ops;
	void *ctx;
};

#endif /* BATCHWIRE_BATCH_H */
