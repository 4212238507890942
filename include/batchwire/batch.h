/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The batch descriptor and the executor interface: what a polling core's batcher hands to whatever
 * runs a model (the CPU workers, the GPU runtime, the built-in echo model). DPDK-free.
 *
 * A batch is a descriptor, not a copy: it lists its tasks, and each task points at its rows inside
 * the request's own memory (packet buffers; a request of several datagrams is several buffers, and a
 * task's rows may cross from one into the next: struct bw_pages). The batcher never copies tensor data; the executor
 * gathers the rows (and pads) into its own memory and scatters the outputs back per task, discarding
 * the padding rows. bw_batch_gather/bw_batch_scatter (below) do both for executors on the CPU.
 */
#ifndef BATCHWIRE_BATCH_H
#define BATCHWIRE_BATCH_H

#include <stddef.h>
#include <stdbool.h>
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
	BW_DISPATCH_VERSION,  /* a task admitted to another model version came: versions never share one */
	BW_DISPATCH_COUNT
};

/** The name telemetry and /metrics give a dispatch reason ("full"...; "unknown" past the enum). */
static inline const char *bw_dispatch_reason_name(unsigned int reason)
{
	static const char *const names[BW_DISPATCH_COUNT] = {"full", "timeout", "deadline", "slo", "idle", "drain",
								    "version"};

	return reason < BW_DISPATCH_COUNT ? names[reason] : "unknown";
}

/*
 * A message body as it arrived: cut into pages, one per datagram, every page but the last holding
 * page_len bytes (protocol v1's slices, docs/protocol.md "Segmentation"). Page k holds the body's
 * bytes [k * page_len, (k + 1) * page_len), in its own packet buffer.
 */
struct bw_pages {
	uint8_t *const *page;
	uint32_t page_len;
	uint32_t nb_pages;
};

/*
 * Rows of one tensor of one task, row-major: contiguous at data, or, when pages is set, the paged
 * body's bytes [offset, offset + len), which may cross from one page into the next anywhere.
 */
struct bw_segment {
	uint8_t *data;                /* NULL when pages is set */
	uint32_t len;                 /* rows * bytes per row */
	uint32_t offset;              /* with pages: the first byte's place in the body */
	const struct bw_pages *pages; /* NULL: contiguous */
};

/** len contiguous bytes at data. */
static inline struct bw_segment bw_segment_flat(uint8_t *data, uint32_t len)
{
	return (struct bw_segment){data, len, 0, NULL};
}

/** The segment's bytes [at, at + len): the rows of a piece of a task (at and len inside s). */
static inline struct bw_segment bw_segment_slice(const struct bw_segment *s, uint32_t at, uint32_t len)
{
	if (s->pages == NULL)
		return bw_segment_flat(s->data + at, len);
	return (struct bw_segment){NULL, len, s->offset + at, s->pages};
}

/**
 * The contiguous run of s's bytes that starts at byte at (< s->len): *ptr is its first byte.
 * \return its length: all of the rest of s when contiguous, else up to the end of the page.
 */
static inline uint32_t bw_segment_run(const struct bw_segment *s, uint32_t at, uint8_t **ptr)
{
	uint32_t pos, in_page, room;

	if (s->pages == NULL) {
		*ptr = s->data + at;
		return s->len - at;
	}
	pos = s->offset + at;
	in_page = pos % s->pages->page_len;
	*ptr = s->pages->page[pos / s->pages->page_len] + in_page;
	room = s->pages->page_len - in_page;
	return room < s->len - at ? room : s->len - at;
}

/** Copies s's bytes to dst (s->len bytes). */
static inline void bw_segment_read(const struct bw_segment *s, uint8_t *dst)
{
	uint8_t *run;

	for (uint32_t at = 0, n; at < s->len; at += n) {
		n = bw_segment_run(s, at, &run);
		memcpy(dst + at, run, n);
	}
}

/** Copies s->len bytes from src into s; src may be s's own bytes (contiguous: computed in place). */
static inline void bw_segment_write(const struct bw_segment *s, const uint8_t *src)
{
	uint8_t *run;

	for (uint32_t at = 0, n; at < s->len; at += n) {
		n = bw_segment_run(s, at, &run);
		if (run != src + at)
			memmove(run, src + at, n);
	}
}

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
	uint32_t version;     /* the model version every task was admitted to: it runs on that one */
	bool version_pinned;  /* a task named that version: no other may run the batch (else, when that
			       * version is gone, the one serving may) */
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

		bw_segment_read(s, out);
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
		/* an executor may have computed in place: bw_segment_write skips the bytes already there */
		bw_segment_write(&batch->tasks[i]->outputs[output], src);
		src += batch->tasks[i]->outputs[output].len;
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
