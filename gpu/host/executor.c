/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The GPU executor (host.h): one per (model, polling lcore), driven by that lcore only, so nothing in
 * it is shared and nothing locks. Each (size, slot) has its batch table and completion word in mapped
 * host memory and its captured graph; submit writes the table and launches the graph, poll reads the
 * words of the launches in flight. A slot's word is never reset: a launch waits for the slot's next
 * generation (0 skipped, the value of a fresh word), so a stale write can never be mistaken for it.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <batchwire/err.h>
#include <batchwire/compiler.h> /* likely, unlikely */

#include "exec/executor.h"
#include "host.h"

struct exec_slot {
	struct bw_batch *batch;
	uint32_t generation;     /* the value its word reaches when the launch is done */
	struct gpu_batch_table *table;
	volatile uint32_t *word;
	uint64_t launches;       /* graphs of this (size, slot) launched: its lcore writes, telemetry reads */
};

struct exec_size {
	uint32_t batch;
	uint32_t nb_free;
	uint32_t *free_stack;    /* nb_free slot indices */
	struct exec_slot *slots; /* nb_slots */
};

struct gpu_executor {
	const struct gpu_ops *ops;
	struct gpu_dev *dev;
	struct gpu_instance *inst;
	const struct gpu_compiled *compiled;
	uint32_t nb_slots, nb_sizes;
	struct exec_size sizes[GPU_PROG_SIZES_MAX];
	uint32_t *busy;          /* nb_busy in-flight (size index << 16 | slot), unordered */
	uint32_t nb_busy;
	struct gpu_executor_stats stats;
	char msg[RT_EXECUTOR_MSG_MAX]; /* the last completion's or launch's message */
};

#define BUSY_ENTRY(size_idx, slot) ((uint32_t)(size_idx) << 16 | (uint32_t)(slot))
#define BUSY_SIZE(e) ((e) >> 16)
#define BUSY_SLOT(e) ((e)&0xffffu)

struct gpu_executor *gpu_executor_create(const struct gpu_ops *ops, struct gpu_dev *dev, struct gpu_loaded *loaded,
					 const struct gpu_compiled *compiled, struct gpu_stream *stream,
					 uint32_t nb_slots, uint32_t launch_mode, char *err, size_t cap)
{
	struct gpu_executor *ex;
	bool ok;
	int rc;

	if (ops == NULL || dev == NULL || loaded == NULL || compiled == NULL || stream == NULL || nb_slots == 0 ||
	    nb_slots > 0xffffu) {
		errno = -bw_err(err, cap, -EINVAL, "GPU executor: bad arguments (%u slots)", nb_slots);
		return NULL;
	}
	ex = calloc(1, sizeof(*ex));
	if (ex == NULL) {
		errno = -bw_err(err, cap, -ENOMEM, "GPU executor: out of memory");
		return NULL;
	}
	ex->ops = ops;
	ex->dev = dev;
	ex->compiled = compiled;
	ex->nb_slots = nb_slots;
	ex->nb_sizes = compiled->prog.nb_sizes;
	rc = ops->instance_create(loaded, stream, nb_slots, launch_mode, &ex->inst, err, cap);
	if (rc < 0) {
		free(ex);
		errno = -rc; /* instance_create's reason, in err */
		return NULL;
	}
	ex->busy = calloc((size_t)ex->nb_sizes * nb_slots, sizeof(*ex->busy));
	ok = ex->busy != NULL;
	for (uint32_t i = 0; i < ex->nb_sizes && ok; i++) {
		struct exec_size *sz = &ex->sizes[i];

		sz->batch = compiled->prog.sizes[i].batch;
		sz->free_stack = calloc(nb_slots, sizeof(*sz->free_stack));
		sz->slots = calloc(nb_slots, sizeof(*sz->slots));
		ok = sz->free_stack != NULL && sz->slots != NULL;
		for (uint32_t s = 0; s < nb_slots && ok; s++) {
			sz->free_stack[s] = nb_slots - 1 - s; /* slot 0 on top */
			sz->slots[s].table = ops->instance_table(ex->inst, i, s);
			sz->slots[s].word = ops->instance_word(ex->inst, i, s);
			/* continue from what the word holds, so a new generation always differs from it */
			sz->slots[s].generation = *sz->slots[s].word;
		}
		sz->nb_free = nb_slots;
	}
	if (!ok) {
		gpu_executor_destroy(ex);
		errno = -bw_err(err, cap, -ENOMEM, "GPU executor: out of memory");
		return NULL;
	}
	return ex;
}

void gpu_executor_destroy(struct gpu_executor *ex)
{
	if (ex == NULL)
		return;
	if (ex->inst != NULL)
		ex->ops->instance_destroy(ex->inst);
	for (uint32_t i = 0; i < ex->nb_sizes; i++) {
		free(ex->sizes[i].free_stack);
		free(ex->sizes[i].slots);
	}
	free(ex->busy);
	free(ex);
}

/* Adds one segment per task of tensor t (inputs or outputs) and, for inputs, the padding run. */
static int table_segments(struct gpu_executor *ex, const struct bw_batch *batch, struct gpu_batch_table *table,
			  uint32_t *nb, bool outputs)
{
	const struct gpu_program *prog = &ex->compiled->prog;
	uint32_t nb_tensors = outputs ? prog->nb_outputs : prog->nb_inputs;

	for (uint32_t t = 0; t < nb_tensors; t++) {
		uint32_t row_bytes = outputs ? prog->output_row_bytes[t] : prog->input_row_bytes[t];
		uint64_t row = 0;

		for (uint16_t k = 0; k < batch->num_tasks; k++) {
			const struct bw_batch_task *task = batch->tasks[k];
			const struct bw_segment *seg = outputs ? &task->outputs[t] : &task->inputs[t];
			uint8_t *run;

			if (unlikely(seg->len != (uint64_t)task->rows * row_bytes))
				return -EINVAL;
			/* one table entry per contiguous run: a request of several datagrams has one per
			 * packet buffer its rows cross */
			for (uint32_t at = 0, n; at < seg->len; at += n) {
				struct gpu_segment *out = &table->segments[*nb];

				n = bw_segment_run(seg, at, &run);
				if (unlikely(*nb >= prog->max_segments))
					return -E2BIG;
				if (unlikely(ex->ops->host_to_dev(ex->dev, run, n, &out->addr) < 0))
					return -EFAULT;
				out->offset = row * row_bytes + at;
				out->len = n;
				out->tensor = t;
				(*nb)++;
			}
			row += task->rows;
		}
		if (!outputs && batch->size < batch->padded_size) {
			struct gpu_segment *pad = &table->segments[*nb];

			if (unlikely(*nb >= prog->max_segments))
				return -E2BIG;
			(*nb)++;

			/* zero rows (gather writes zeros where addr is 0), where the CPU's bw_batch_gather repeats
			 * row 0: nothing reads the padding's outputs, and a zero row is as finite as a real one */
			pad->addr = 0;
			pad->offset = (uint64_t)batch->size * row_bytes;
			pad->len = (batch->padded_size - batch->size) * row_bytes;
			pad->tensor = t;
		}
	}
	return 0;
}

int gpu_executor_submit(struct gpu_executor *ex, struct bw_batch *batch)
{
	const struct gpu_program *prog = &ex->compiled->prog;
	struct exec_size *sz = NULL;
	struct exec_slot *slot;
	uint32_t size_idx, s, nb = 0;
	int rc;

	for (size_idx = 0; size_idx < ex->nb_sizes; size_idx++)
		if (ex->sizes[size_idx].batch == batch->padded_size) {
			sz = &ex->sizes[size_idx];
			break;
		}
	if (unlikely(sz == NULL || batch->num_inputs != prog->nb_inputs || batch->num_outputs != prog->nb_outputs ||
		     batch->size == 0 || batch->size > batch->padded_size || batch->num_tasks > ex->compiled->max_tasks))
		return -EINVAL;
	if (unlikely(sz->nb_free == 0)) {
		ex->stats.no_slot++;
		return -EBUSY;
	}
	s = sz->free_stack[sz->nb_free - 1];
	slot = &sz->slots[s];
	rc = table_segments(ex, batch, slot->table, &nb, false);
	slot->table->nb_gather = nb;
	if (rc == 0)
		rc = table_segments(ex, batch, slot->table, &nb, true);
	if (unlikely(rc < 0))
		return rc;
	slot->table->nb_scatter = nb - slot->table->nb_gather;
	slot->table->fault = GPU_FAULT_NONE;
	slot->table->fault_op = 0;
	if (++slot->generation == 0)
		slot->generation = 1;
	slot->table->generation = slot->generation;
	/* the table is complete before the launch is queued: the device reads it after the launch */
	__atomic_thread_fence(__ATOMIC_RELEASE);
	rc = ex->ops->instance_launch(ex->inst, size_idx, s, ex->msg, sizeof(ex->msg));
	if (unlikely(rc < 0)) {
		ex->stats.launch_errors++;
		return rc == -EINVAL ? -EINVAL : -EIO;
	}
	sz->nb_free--;
	slot->batch = batch;
	slot->launches++;
	ex->busy[ex->nb_busy++] = BUSY_ENTRY(size_idx, s);
	ex->stats.launched++;
	return 0;
}

static void complete_entry(struct gpu_executor *ex, uint32_t i, enum bw_status status, const char *msg,
			   bw_completion_fn fn, void *ctx)
{
	uint32_t e = ex->busy[i];
	struct exec_size *sz = &ex->sizes[BUSY_SIZE(e)];
	struct exec_slot *slot = &sz->slots[BUSY_SLOT(e)];
	struct bw_completion c = {
		.batch = slot->batch,
		.status = status,
		.msg = msg,
		.valid_outputs = status == BW_STATUS_OK ? (1u << ex->compiled->prog.nb_outputs) - 1 : 0,
	};

	ex->busy[i] = ex->busy[--ex->nb_busy];
	slot->batch = NULL;
	sz->free_stack[sz->nb_free++] = BUSY_SLOT(e);
	ex->stats.completed++;
	fn(ctx, &c);
}

unsigned int gpu_executor_poll(struct gpu_executor *ex, bw_completion_fn fn, void *ctx, unsigned int max)
{
	unsigned int done = 0;
	uint32_t i = 0;

	while (i < ex->nb_busy && done < max) {
		uint32_t e = ex->busy[i];
		struct exec_slot *slot = &ex->sizes[BUSY_SIZE(e)].slots[BUSY_SLOT(e)];

		if (!gpu_word_reached(slot->word, slot->generation)) {
			i++;
			continue;
		}
		if (likely(slot->table->fault == GPU_FAULT_NONE)) {
			complete_entry(ex, i, BW_STATUS_OK, "", fn, ctx);
		} else {
			/* the cold path: a kernel found bad data (an index out of range) */
			uint32_t op = slot->table->fault_op;

			snprintf(ex->msg, sizeof(ex->msg), "node %s (device op %u): %s",
				 gpu_compiled_op_node(ex->compiled, BUSY_SIZE(e), op), op,
				 slot->table->fault == GPU_FAULT_INDEX ? "an index is out of range" : "a device fault");
			ex->stats.faulted++;
			complete_entry(ex, i, BW_STATUS_INTERNAL, ex->msg, fn, ctx);
		}
		done++; /* entry i now holds what was last: look at it again */
	}
	return done;
}

unsigned int gpu_executor_fail_all(struct gpu_executor *ex, bw_completion_fn fn, void *ctx, const char *msg)
{
	unsigned int n = 0;

	while (ex->nb_busy > 0) {
		complete_entry(ex, ex->nb_busy - 1, BW_STATUS_INTERNAL, msg, fn, ctx);
		n++;
	}
	return n;
}

const char *gpu_executor_error(const struct gpu_executor *ex)
{
	return ex->msg;
}

unsigned int gpu_executor_nb_sizes(const struct gpu_executor *ex)
{
	return ex->nb_sizes;
}

unsigned int gpu_executor_nb_slots(const struct gpu_executor *ex)
{
	return ex->nb_slots;
}

uint32_t gpu_executor_size(const struct gpu_executor *ex, unsigned int size_idx)
{
	return size_idx < ex->nb_sizes ? ex->sizes[size_idx].batch : 0;
}

uint64_t gpu_executor_slot_launches(const struct gpu_executor *ex, unsigned int size_idx, unsigned int slot)
{
	if (size_idx >= ex->nb_sizes || slot >= ex->nb_slots)
		return 0;
	return __atomic_load_n(&ex->sizes[size_idx].slots[slot].launches, __ATOMIC_RELAXED);
}

unsigned int gpu_executor_in_flight(const struct gpu_executor *ex)
{
	return ex->nb_busy;
}

void gpu_executor_stats(const struct gpu_executor *ex, struct gpu_executor_stats *st)
{
	*st = ex->stats;
}
