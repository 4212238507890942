/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The multi-worker executor (executor.h). Everything is allocated by rt_executor_create; afterwards
 * submit, work and poll only move indices through two bounded rings and count down atomics.
 *
 * Slots. Each batch size has nb_slots slots; a slot is an arena (the plan's concurrent layout), a
 * pending count per step, an error mark per value, and the batch it runs. Free slots are a stack per
 * size that only the owner touches (submit pops, poll pushes), so it needs no atomics.
 *
 * Work ring. One bounded MPMC ring (Vyukov's array queue) of (slot << 32 | step) items, sized so it
 * is never full: a step enters it at most once per batch, so slots x steps items at most (the ring
 * has twice that). The owner pushes a batch's root steps; workers pop steps and push consumers whose
 * count reaches zero.
 *
 * Done ring. The same ring type, of slot indices, room for twice every slot: the worker that
 * finishes a batch's last step pushes it; the owner pops in rt_executor_poll.
 *
 * Memory orders. A ring cell's sequence number is stored with release after its item (and, before
 * that, whatever the pusher wrote: the gathered inputs, the seeded counts, a step's outputs) and
 * loaded with acquire before the item is read, so a popped step sees everything its pusher saw. A
 * step's worker decrements each consumer's pending count with acq_rel: the decrement that reaches
 * zero reads the last of a release sequence made of every producer's decrement, so it, and the
 * worker that pops the consumer after it, sees the outputs (and error marks) of all of the
 * consumer's producers. The slot's remaining-steps count works the same way for the whole batch:
 * the worker whose decrement reaches zero sees every step's outputs and marks, scatters them, and
 * publishes the completion through the done ring, after which it touches the slot no more; the
 * owner's acquire pop sees the status and message and may reuse the slot. The failure message is
 * claimed with a CAS on the slot's failed word, so one writer fills it, and the remaining count
 * publishes it. Relaxed is enough for the rings' position counters (they order nothing: the cells'
 * sequence numbers do) and for the per-worker statistics.
 *
 * Progress. Vyukov's ring is lock-free except in one window per cell: between claiming a cell (its
 * CAS) and publishing it (its release store), a pusher holds up the popper of that cell, and a
 * popper holds up the pusher that comes round to that cell one lap later (ring_push waits there:
 * with the rings sized for every item, a taken cell can only be one being freed). Workers are pinned
 * lcores that are not preempted, so the window is a few instructions; threads that are preempted
 * there (tests on a shared machine) stall the other side until they run again, nothing worse.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "defs.h"
#include "exec/executor.h"

#define EXEC_CACHE_LINE 64
_Static_assert(RT_PLAN_ALIGN % EXEC_CACHE_LINE == 0, "rt_exec_zalloc's memory holds cache-aligned structs");
#define EXEC_RING_CELLS_MAX ((uint64_t)1 << 28) /* 4 GiB of cells: a configuration past reason */
#define EXEC_SIZES_MAX 64


/* ---- Vyukov's bounded MPMC ring ---------------------------------------------------------------------- */

struct exec_cell {
	_Atomic uint64_t seq; /* pos: free for the push at pos; pos + 1: holds the item pushed at pos */
	uint64_t item;
};

struct exec_ring {
	alignas(EXEC_CACHE_LINE) _Atomic uint64_t enqueue_pos; /* pushers */
	alignas(EXEC_CACHE_LINE) _Atomic uint64_t dequeue_pos; /* poppers */
	alignas(EXEC_CACHE_LINE) uint64_t mask;                /* read-only after create */
	struct exec_cell *cells;
};

static int ring_init(struct exec_ring *r, uint64_t min_cells)
{
	uint64_t cells = 2;

	while (cells < min_cells)
		cells <<= 1;
	if (cells > EXEC_RING_CELLS_MAX)
		return -E2BIG;
	r->cells = rt_exec_zalloc(cells * sizeof(r->cells[0]));
	if (r->cells == NULL)
		return -ENOMEM;
	for (uint64_t i = 0; i < cells; i++) {
		atomic_init(&r->cells[i].seq, i);
		r->cells[i].item = 0;
	}
	r->mask = cells - 1;
	atomic_init(&r->enqueue_pos, 0);
	atomic_init(&r->dequeue_pos, 0);
	return 0;
}

static void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ volatile("yield");
#else
	atomic_signal_fence(memory_order_seq_cst);
#endif
}

/*
 * Pushes an item into a ring its users never overfill: the executor sizes each ring for every item
 * that can be in it at once. A cell still taken from the previous lap can then only be one that a
 * popper has claimed and not yet freed (it is between its CAS and its release store, a few
 * instructions unless it was preempted there): wait for it rather than fail.
 */
static void ring_push(struct exec_ring *r, uint64_t item)
{
	uint64_t pos = atomic_load_explicit(&r->enqueue_pos, memory_order_relaxed);
	struct exec_cell *c;

	for (;;) {
		int64_t dif;

		c = &r->cells[pos & r->mask];
		/* acquire: the popper that freed this cell has read its old item */
		dif = (int64_t)(atomic_load_explicit(&c->seq, memory_order_acquire) - pos);
		if (dif == 0) {
			if (atomic_compare_exchange_weak_explicit(&r->enqueue_pos, &pos, pos + 1, memory_order_relaxed,
								  memory_order_relaxed))
				break;
		} else {
			if (dif < 0)
				cpu_relax();
			pos = atomic_load_explicit(&r->enqueue_pos, memory_order_relaxed);
		}
	}
	c->item = item;
	atomic_store_explicit(&c->seq, pos + 1, memory_order_release); /* publishes item and all before it */
}

/* \return false when empty. */
static bool ring_pop(struct exec_ring *r, uint64_t *item)
{
	uint64_t pos = atomic_load_explicit(&r->dequeue_pos, memory_order_relaxed);
	struct exec_cell *c;

	for (;;) {
		int64_t dif;

		c = &r->cells[pos & r->mask];
		dif = (int64_t)(atomic_load_explicit(&c->seq, memory_order_acquire) - (pos + 1));
		if (dif == 0) {
			if (atomic_compare_exchange_weak_explicit(&r->dequeue_pos, &pos, pos + 1, memory_order_relaxed,
								  memory_order_relaxed))
				break;
		} else if (dif < 0) {
			return false;
		} else {
			pos = atomic_load_explicit(&r->dequeue_pos, memory_order_relaxed);
		}
	}
	*item = c->item;
	atomic_store_explicit(&c->seq, pos + r->mask + 1, memory_order_release); /* free for the next lap */
	return true;
}

/* ---- the executor ------------------------------------------------------------------------------------- */

/* One batch size: its plan and what submit needs to know of it. */
struct exec_size {
	struct rt_plan *plan;                            /* of chunk_rows rows */
	uint32_t padded_rows;
	uint32_t chunk_rows;                             /* padded_rows: whole; fewer: depth first */
	uint32_t nb_chunks;
	uint32_t num_roots;
	uint32_t *roots;                                 /* steps that wait for nothing */
	uint32_t in_row_bytes[BW_BATCH_TENSORS_MAX];
	uint32_t out_row_bytes[BW_BATCH_TENSORS_MAX];
	uint32_t nb_free;                                /* owner only */
	uint32_t *free_slots;                            /* owner only: a stack of slot indices */
};

struct exec_slot {
	/* the first lines: written at create, and by the owner at submit; read by the workers */
	struct bw_batch *batch;
	struct exec_size *size;
	uint8_t *arena;
	_Atomic uint32_t *pending;  /* per step: producers not finished yet */
	uint32_t *error_of;         /* per value: 0, or 1 + the failed step whose error it carries */
	uint8_t *in_data[BW_BATCH_TENSORS_MAX];
	const uint8_t *out_data[BW_BATCH_TENSORS_MAX];
	/* a size run in chunks: the whole batch's inputs, gathered at submit, and outputs, scattered at
	 * the end; between them each chunk's rows go in and out of the arena */
	uint8_t *in_stage[BW_BATCH_TENSORS_MAX];
	uint8_t *out_stage[BW_BATCH_TENSORS_MAX];
	uint32_t chunk;             /* the chunk running: the owner sets 0, the finishing worker advances it */
	/* next line: counted down by every step's worker */
	alignas(EXEC_CACHE_LINE) _Atomic uint32_t remaining; /* steps not finished yet */
	_Atomic uint32_t failed;    /* 0, or 1 + the step whose message msg holds */
	/* the failing step's worker (msg) and the completing worker (the rest); read by the owner */
	enum bw_status status;
	uint32_t valid_outputs;
	char msg[RT_EXECUTOR_MSG_MAX];
};

_Static_assert(offsetof(struct exec_slot, remaining) % EXEC_CACHE_LINE == 0, "remaining on its own line");

struct exec_worker {
	uint8_t *scratch;           /* worker_scratch_bytes, for whatever step it runs */
	/* written by this worker only; relaxed so a reader elsewhere is not a data race */
	_Atomic uint64_t steps_run, steps_failed, steps_skipped, batches_done, batches_failed;
	char kerr[RT_ERR_MAX];
} __attribute__((aligned(EXEC_CACHE_LINE)));

struct rt_executor {
	struct exec_ring work;      /* (slot << 32 | step) ready to run */
	struct exec_ring done;      /* slots whose batch finished */
	const struct rt_graph *graph;
	unsigned int nb_sizes, nb_workers, nb_slots, total_slots;
	uint32_t all_outputs;       /* the valid_outputs of a batch that went well */
	size_t worker_scratch_bytes;
	struct exec_size *sizes;
	struct exec_slot *slots;    /* size-major: size i owns [i * nb_slots, (i + 1) * nb_slots) */
	struct exec_worker *workers;
	/* the owner's */
	unsigned int in_flight;
	_Atomic uint64_t owner_batches_done; /* batches with no step, completed by submit */
};

static void counter_inc(_Atomic uint64_t *c)
{
	atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + 1, memory_order_relaxed);
}

/* Rows of one graph tensor in a plan: its bytes split into padded rows. */
static int row_bytes(const struct rt_plan *plan, int32_t v, int64_t batch, const char *what, uint32_t *out,
		     char *err, size_t cap)
{
	struct rt_plan_value_info vi;

	if (rt_plan_value_info(plan, v, &vi) != 0)
		return bw_err(err, cap, -EINVAL, "%s: value %d out of range", what, v);
	if (vi.nbytes % (size_t)batch != 0 || vi.nbytes / (size_t)batch > UINT32_MAX)
		return bw_err(err, cap, -EINVAL, "%s: %zu bytes do not split into %lld rows", what, vi.nbytes,
			      (long long)batch);
	*out = (uint32_t)(vi.nbytes / (size_t)batch);
	return 0;
}

static int size_init(struct rt_executor *ex, struct exec_size *sz, const struct rt_tensor *known, int64_t batch,
		     int64_t chunk, char *err, size_t cap)
{
	const struct rt_graph *g = ex->graph;
	char why[RT_ERR_MAX], what[RT_ERR_MAX];
	uint32_t num_steps;
	int rc;

	if (chunk <= 0 || chunk > batch || batch % chunk != 0)
		return bw_err(err, cap, -EINVAL, "batch size %lld: chunks of %lld rows do not divide it", (long long)batch,
			      (long long)chunk);
	sz->plan = rt_plan_create_layout(g, chunk, RT_DEVICE_CPU, known, RT_PLAN_LAYOUT_CONCURRENT, why, sizeof(why));
	if (sz->plan == NULL)
		return bw_err(err, cap, -EINVAL, "batch size %lld%s: %s", (long long)batch,
			      chunk < batch ? " (in chunks)" : "", why);
	sz->padded_rows = (uint32_t)batch;
	sz->chunk_rows = (uint32_t)chunk;
	/* nothing to run (outputs are inputs or constants): one chunk does it */
	if (sz->plan->num_steps == 0 && chunk < batch) {
		rt_plan_free(sz->plan);
		return size_init(ex, sz, known, batch, batch, err, cap);
	}
	sz->nb_chunks = (uint32_t)(batch / chunk);
	for (uint32_t i = 0; i < g->num_inputs; i++) {
		snprintf(what, sizeof(what), "batch size %lld: graph input %s", (long long)batch,
			 g->values[g->inputs[i]].name);
		rc = row_bytes(sz->plan, g->inputs[i], chunk, what, &sz->in_row_bytes[i], err, cap);
		if (rc != 0)
			return rc;
	}
	for (uint32_t o = 0; o < g->num_outputs; o++) {
		snprintf(what, sizeof(what), "batch size %lld: graph output %s", (long long)batch,
			 g->values[g->outputs[o]].name);
		rc = row_bytes(sz->plan, g->outputs[o], chunk, what, &sz->out_row_bytes[o], err, cap);
		if (rc != 0)
			return rc;
	}
	num_steps = sz->plan->num_steps;
	sz->roots = calloc((size_t)num_steps + 1, sizeof(uint32_t));
	sz->free_slots = calloc((size_t)ex->nb_slots + 1, sizeof(uint32_t));
	if (sz->roots == NULL || sz->free_slots == NULL)
		return bw_err(err, cap, -ENOMEM, "out of memory");
	for (uint32_t s = 0; s < num_steps; s++) {
		if (sz->plan->steps[s].pending_inputs == 0)
			sz->roots[sz->num_roots++] = s;
	}
	if (rt_plan_worker_scratch_bytes(sz->plan) > ex->worker_scratch_bytes)
		ex->worker_scratch_bytes = rt_plan_worker_scratch_bytes(sz->plan);
	return 0;
}

/*
 * Before any arena is allocated: what the slots' arenas and staging areas and the workers' scratch
 * will take, beside the graph's constants, against the graph's memory budget. \return 0 or -EFBIG.
 */
static int budget_check(const struct rt_executor *ex, char *err, size_t cap)
{
	const struct rt_graph *g = ex->graph;
	uint64_t constants = rt_graph_constant_bytes(g), need = (uint64_t)ex->nb_workers * ex->worker_scratch_bytes;

	if (g->memory_budget == 0)
		return 0;
	for (unsigned int i = 0; i < ex->nb_sizes; i++) {
		const struct exec_size *sz = &ex->sizes[i];
		uint64_t one = rt_plan_arena_bytes(sz->plan);

		if (sz->nb_chunks > 1) {
			for (uint32_t k = 0; k < g->num_inputs; k++)
				one += rt_align_up((size_t)sz->padded_rows * sz->in_row_bytes[k]);
			for (uint32_t o = 0; o < g->num_outputs; o++)
				one += rt_align_up((size_t)sz->padded_rows * sz->out_row_bytes[o]);
		}
		need += one * ex->nb_slots;
	}
	if (constants + need <= g->memory_budget)
		return 0;
	return bw_err(err, cap, -EFBIG, "its arenas (%u batch sizes, %u slots each) need %" PRIu64 " MiB beside %" PRIu64
		      " MiB of constants: above its memory budget of %" PRIu64 " MiB (memory_budget_mb)", ex->nb_sizes,
		      ex->nb_slots, need >> 20, constants >> 20, g->memory_budget >> 20);
}

static int slot_init(struct rt_executor *ex, struct exec_slot *slot, struct exec_size *sz)
{
	const struct rt_graph *g = ex->graph;
	struct rt_tensor in[BW_BATCH_TENSORS_MAX], out[BW_BATCH_TENSORS_MAX];

	slot->size = sz;
	slot->arena = rt_exec_zalloc(rt_plan_arena_bytes(sz->plan));
	slot->pending = rt_exec_zalloc(((size_t)sz->plan->num_steps + 1) * sizeof(slot->pending[0]));
	slot->error_of = rt_exec_zalloc(((size_t)g->num_values + 1) * sizeof(slot->error_of[0]));
	if (slot->arena == NULL || slot->pending == NULL || slot->error_of == NULL)
		return -ENOMEM;
	for (uint32_t s = 0; s < sz->plan->num_steps; s++)
		atomic_init(&slot->pending[s], 0);
	atomic_init(&slot->remaining, 0);
	atomic_init(&slot->failed, 0);
	rt_plan_bind(sz->plan, slot->arena, in, out);
	for (uint32_t i = 0; i < g->num_inputs; i++)
		slot->in_data[i] = in[i].data;
	for (uint32_t o = 0; o < g->num_outputs; o++)
		slot->out_data[o] = out[o].data;
	if (sz->nb_chunks <= 1)
		return 0;
	for (uint32_t i = 0; i < g->num_inputs; i++) {
		slot->in_stage[i] = rt_exec_zalloc(rt_align_up((size_t)sz->padded_rows * sz->in_row_bytes[i]));
		if (slot->in_stage[i] == NULL)
			return -ENOMEM;
	}
	for (uint32_t o = 0; o < g->num_outputs; o++) {
		slot->out_stage[o] = rt_exec_zalloc(rt_align_up((size_t)sz->padded_rows * sz->out_row_bytes[o]));
		if (slot->out_stage[o] == NULL)
			return -ENOMEM;
	}
	return 0;
}

struct rt_executor *rt_executor_create_chunked(const struct rt_graph *g, const struct rt_tensor *known,
					       const int64_t *batch_sizes, const int64_t *chunk_rows, unsigned int nb_sizes,
					       unsigned int nb_workers, unsigned int nb_slots, char *err, size_t cap)
{
	struct rt_executor *ex = NULL;
	uint64_t work_cells = 0;
	int rc = -ENOMEM;

	if (err != NULL && cap > 0)
		err[0] = '\0';
	if (g == NULL || batch_sizes == NULL || nb_sizes == 0 || nb_sizes > EXEC_SIZES_MAX) {
		errno = -bw_err(err, cap, -EINVAL, "a graph and 1 to %d batch sizes are needed", EXEC_SIZES_MAX);
		return NULL;
	}
	if (nb_workers == 0 || nb_workers > RT_EXECUTOR_WORKERS_MAX || nb_slots == 0 ||
	    nb_slots > RT_EXECUTOR_SLOTS_MAX) {
		errno = -bw_err(err, cap, -EINVAL, "%u workers, %u slots: 1 to %d workers and 1 to %d slots are needed",
		       nb_workers, nb_slots, RT_EXECUTOR_WORKERS_MAX, RT_EXECUTOR_SLOTS_MAX);
		return NULL;
	}
	if (g->num_inputs > BW_BATCH_TENSORS_MAX || g->num_outputs > BW_BATCH_TENSORS_MAX) {
		errno = -bw_err(err, cap, -EINVAL, "the graph has %u inputs and %u outputs; a batch carries at most %d of each",
		       g->num_inputs, g->num_outputs, BW_BATCH_TENSORS_MAX);
		return NULL;
	}
	for (unsigned int i = 0; i < nb_sizes; i++) {
		if (batch_sizes[i] <= 0 || batch_sizes[i] > UINT32_MAX) {
			errno = -bw_err(err, cap, -EINVAL, "batch size %lld is not a row count", (long long)batch_sizes[i]);
			return NULL;
		}
		for (unsigned int j = 0; j < i; j++) {
			if (batch_sizes[j] == batch_sizes[i]) {
				errno = -bw_err(err, cap, -EINVAL, "batch size %lld is given twice", (long long)batch_sizes[i]);
				return NULL;
			}
		}
	}

	ex = rt_exec_zalloc(sizeof(*ex));
	if (ex == NULL)
		goto fail;
	ex->graph = g;
	ex->nb_sizes = nb_sizes;
	ex->nb_workers = nb_workers;
	ex->nb_slots = nb_slots;
	ex->total_slots = nb_sizes * nb_slots;
	ex->all_outputs = (UINT32_C(1) << g->num_outputs) - 1; /* num_outputs <= BW_BATCH_TENSORS_MAX */
	atomic_init(&ex->owner_batches_done, 0);
	ex->sizes = calloc(nb_sizes, sizeof(ex->sizes[0]));
	ex->slots = rt_exec_zalloc((size_t)ex->total_slots * sizeof(ex->slots[0]));
	ex->workers = rt_exec_zalloc((size_t)nb_workers * sizeof(ex->workers[0]));
	if (ex->sizes == NULL || ex->slots == NULL || ex->workers == NULL)
		goto fail;

	for (unsigned int i = 0; i < nb_sizes; i++) {
		rc = size_init(ex, &ex->sizes[i], known, batch_sizes[i],
			       chunk_rows != NULL && chunk_rows[i] > 0 ? chunk_rows[i] : batch_sizes[i], err, cap);
		if (rc != 0) {
			rt_executor_destroy(ex);
			errno = -rc;
			return NULL;
		}
		work_cells += (uint64_t)nb_slots * ex->sizes[i].plan->num_steps;
	}
	rc = budget_check(ex, err, cap);
	if (rc != 0) {
		rt_executor_destroy(ex);
		errno = -rc;
		return NULL;
	}
	for (unsigned int i = 0; i < nb_sizes; i++) {
		struct exec_size *sz = &ex->sizes[i];

		for (unsigned int k = 0; k < nb_slots; k++) {
			uint32_t index = i * nb_slots + k;

			if (slot_init(ex, &ex->slots[index], sz) != 0)
				goto fail;
			/* popped from the top: the lowest index first */
			sz->free_slots[nb_slots - 1 - k] = index;
		}
		sz->nb_free = nb_slots;
	}
	for (unsigned int w = 0; w < nb_workers; w++) {
		struct exec_worker *wk = &ex->workers[w];

		wk->scratch = rt_exec_zalloc(ex->worker_scratch_bytes);
		if (wk->scratch == NULL)
			goto fail;
		atomic_init(&wk->steps_run, 0);
		atomic_init(&wk->steps_failed, 0);
		atomic_init(&wk->steps_skipped, 0);
		atomic_init(&wk->batches_done, 0);
		atomic_init(&wk->batches_failed, 0);
	}
	/* twice what can be in them, so that a push rarely laps a popper still freeing its cell */
	rc = ring_init(&ex->work, 2 * work_cells);
	if (rc == 0)
		rc = ring_init(&ex->done, 2 * (uint64_t)ex->total_slots);
	if (rc == -E2BIG) {
		errno = -bw_err(err, cap, rc, "%u slots of %u batch sizes need a work queue of %llu cells, over %llu",
		       nb_slots, nb_sizes, (unsigned long long)(2 * work_cells), (unsigned long long)EXEC_RING_CELLS_MAX);
		rt_executor_destroy(ex);
		return NULL;
	}
	if (rc != 0)
		goto fail;
	return ex;
fail:
	bw_err(err, cap, -ENOMEM, "out of memory");
	rt_executor_destroy(ex);
	errno = ENOMEM;
	return NULL;
}

struct rt_executor *rt_executor_create_known(const struct rt_graph *g, const struct rt_tensor *known,
					     const int64_t *batch_sizes, unsigned int nb_sizes, unsigned int nb_workers,
					     unsigned int nb_slots, char *err, size_t cap)
{
	return rt_executor_create_chunked(g, known, batch_sizes, NULL, nb_sizes, nb_workers, nb_slots, err, cap);
}

struct rt_executor *rt_executor_create(const struct rt_graph *g, const int64_t *batch_sizes, unsigned int nb_sizes,
				       unsigned int nb_workers, unsigned int nb_slots, char *err, size_t cap)
{
	return rt_executor_create_chunked(g, NULL, batch_sizes, NULL, nb_sizes, nb_workers, nb_slots, err, cap);
}

void rt_executor_destroy(struct rt_executor *ex)
{
	if (ex == NULL)
		return;
	for (unsigned int i = 0; ex->slots != NULL && i < ex->total_slots; i++) {
		free(ex->slots[i].arena);
		free(ex->slots[i].pending);
		free(ex->slots[i].error_of);
		for (unsigned int t = 0; t < BW_BATCH_TENSORS_MAX; t++) {
			free(ex->slots[i].in_stage[t]);
			free(ex->slots[i].out_stage[t]);
		}
	}
	for (unsigned int i = 0; ex->sizes != NULL && i < ex->nb_sizes; i++) {
		rt_plan_free(ex->sizes[i].plan);
		free(ex->sizes[i].roots);
		free(ex->sizes[i].free_slots);
	}
	for (unsigned int w = 0; ex->workers != NULL && w < ex->nb_workers; w++)
		free(ex->workers[w].scratch);
	free(ex->work.cells);
	free(ex->done.cells);
	free(ex->slots);
	free(ex->sizes);
	free(ex->workers);
	free(ex);
}

/* ---- the hot path ------------------------------------------------------------------------------------- */

static struct exec_size *size_find(struct rt_executor *ex, uint32_t padded)
{
	for (unsigned int i = 0; i < ex->nb_sizes; i++) {
		if (ex->sizes[i].padded_rows == padded)
			return &ex->sizes[i];
	}
	return NULL;
}

/* Whether every task's segments hold its rows of every tensor, and the rows add up to the batch. */
static bool batch_fits(const struct rt_executor *ex, const struct exec_size *sz, const struct bw_batch *b)
{
	const struct rt_graph *g = ex->graph;
	uint64_t rows = 0;

	if (b->num_inputs != g->num_inputs || b->num_outputs != g->num_outputs || b->num_tasks == 0 ||
	    b->tasks == NULL || b->size == 0 || b->size > b->padded_size)
		return false;
	for (uint16_t t = 0; t < b->num_tasks; t++) {
		const struct bw_batch_task *task = b->tasks[t];

		if (task == NULL)
			return false;
		rows += task->rows;
		for (uint32_t i = 0; i < g->num_inputs; i++) {
			if ((uint64_t)task->rows * sz->in_row_bytes[i] != task->inputs[i].len)
				return false;
		}
		for (uint32_t o = 0; o < g->num_outputs; o++) {
			if ((uint64_t)task->rows * sz->out_row_bytes[o] != task->outputs[o].len)
				return false;
		}
	}
	return rows == b->size;
}

/* Chunk c's rows of every input into the slot's arena, from the batch gathered at submit. */
static void chunk_load(const struct rt_graph *g, const struct exec_size *sz, struct exec_slot *slot, uint32_t c)
{
	for (uint32_t i = 0; i < g->num_inputs; i++) {
		size_t bytes = (size_t)sz->chunk_rows * sz->in_row_bytes[i];

		memcpy(slot->in_data[i], slot->in_stage[i] + (size_t)c * bytes, bytes);
	}
}

/* Seeds the step counts of a run of the slot's plan and queues its roots. */
static void run_start(struct rt_executor *ex, struct exec_size *sz, struct exec_slot *slot, uint32_t slot_index)
{
	const struct rt_plan *plan = sz->plan;

	/* every count before any step is queued: a root's worker may release any of them at once */
	for (uint32_t s = 0; s < plan->num_steps; s++)
		atomic_store_explicit(&slot->pending[s], plan->steps[s].pending_inputs, memory_order_relaxed);
	atomic_store_explicit(&slot->remaining, plan->num_steps, memory_order_relaxed);
	for (uint32_t r = 0; r < sz->num_roots; r++)
		ring_push(&ex->work, (uint64_t)slot_index << 32 | sz->roots[r]);
}

/*
 * A chunk of a size run depth first is done (on the worker whose step finished it, which sees every
 * step's outputs): its rows of the outputs go to the batch's, and the next chunk starts in the same
 * arena. \return true when it did; false when the batch is done (its last chunk, or a failed one).
 */
static bool chunk_next(struct rt_executor *ex, uint32_t slot_index)
{
	const struct rt_graph *g = ex->graph;
	struct exec_slot *slot = &ex->slots[slot_index];
	struct exec_size *sz = slot->size;

	for (uint32_t o = 0; o < g->num_outputs; o++) {
		size_t bytes = (size_t)sz->chunk_rows * sz->out_row_bytes[o];

		if (slot->error_of[g->outputs[o]] != 0)
			return false; /* the batch fails: its later rows would never be computed */
		memcpy(slot->out_stage[o] + (size_t)slot->chunk * bytes, slot->out_data[o], bytes);
	}
	if (slot->chunk + 1 == sz->nb_chunks)
		return false;
	slot->chunk++;
	chunk_load(g, sz, slot, slot->chunk);
	run_start(ex, sz, slot, slot_index); /* the ring's release publishes the rows and the counts */
	return true;
}

/* The batch's last step is done: scatter what is valid and hand the slot to the owner's poller. */
static void batch_finish(struct rt_executor *ex, uint32_t slot_index, struct exec_worker *w)
{
	const struct rt_graph *g = ex->graph;
	struct exec_slot *slot = &ex->slots[slot_index];
	uint32_t valid = 0;

	if (slot->size->nb_chunks > 1 && chunk_next(ex, slot_index))
		return;
	for (uint32_t o = 0; o < g->num_outputs; o++) {
		if (slot->error_of[g->outputs[o]] != 0)
			continue;
		valid |= UINT32_C(1) << o;
		bw_batch_scatter(slot->batch, o, slot->size->nb_chunks > 1 ? slot->out_stage[o] : slot->out_data[o]);
	}
	slot->valid_outputs = valid;
	/* an invalid output carries the error of a failed step that feeds it, and such a step claimed msg */
	slot->status = valid == ex->all_outputs ? BW_STATUS_OK : BW_STATUS_INTERNAL;
	if (w != NULL) {
		counter_inc(&w->batches_done);
		if (slot->status != BW_STATUS_OK)
			counter_inc(&w->batches_failed);
	} else {
		counter_inc(&ex->owner_batches_done);
	}
	ring_push(&ex->done, slot_index); /* the slot is the owner's from here */
}

int rt_executor_submit(struct rt_executor *ex, struct bw_batch *batch)
{
	const struct rt_graph *g = ex->graph;
	struct exec_size *sz = size_find(ex, batch->padded_size);
	const struct rt_plan *plan;
	struct exec_slot *slot;
	uint32_t slot_index;

	if (unlikely(sz == NULL || !batch_fits(ex, sz, batch)))
		return -EINVAL;
	if (unlikely(sz->nb_free == 0))
		return -EBUSY;
	slot_index = sz->free_slots[--sz->nb_free];
	slot = &ex->slots[slot_index];
	plan = sz->plan;
	slot->batch = batch;
	slot->msg[0] = '\0';
	slot->chunk = 0;
	for (uint32_t i = 0; i < g->num_inputs; i++)
		bw_batch_gather(batch, i, sz->nb_chunks > 1 ? slot->in_stage[i] : slot->in_data[i], sz->in_row_bytes[i]);
	if (sz->nb_chunks > 1)
		chunk_load(g, sz, slot, 0);
	atomic_store_explicit(&slot->failed, 0, memory_order_relaxed);
	ex->in_flight++;
	if (unlikely(plan->num_steps == 0)) {
		/* every output is an input or a constant: nothing to run (never in chunks: size_init) */
		batch_finish(ex, slot_index, NULL);
		return 0;
	}
	run_start(ex, sz, slot, slot_index);
	return 0;
}

/* The cold path of a failing kernel: the first failure that reaches a graph output names the batch's error. */
static void step_failed(struct exec_slot *slot, const struct rt_plan_step *st, uint32_t step, int rc,
			const char *kerr)
{
	uint32_t none = 0;

	if (!st->feeds_output ||
	    !atomic_compare_exchange_strong_explicit(&slot->failed, &none, step + 1, memory_order_relaxed,
						     memory_order_relaxed))
		return;
	/* published to the completing worker by this step's acq_rel decrement of remaining */
	if (kerr[0] != '\0')
		snprintf(slot->msg, sizeof(slot->msg), "node %s (%s): %s", st->node->name, st->node->op_type, kerr);
	else
		snprintf(slot->msg, sizeof(slot->msg), "node %s (%s): kernel failed (error %d)", st->node->name,
			 st->node->op_type, rc);
}

static void step_run(struct rt_executor *ex, struct exec_worker *w, uint64_t item)
{
	uint32_t slot_index = (uint32_t)(item >> 32), step = (uint32_t)item;
	struct exec_slot *slot = &ex->slots[slot_index];
	const struct rt_plan_step *st = &slot->size->plan->steps[step];
	const struct rt_node *n = st->node;
	uint32_t error = 0;

	/* TFRT's error values: an input that carries an error makes this step's outputs carry it too */
	for (uint16_t j = 0; j < n->num_inputs && error == 0; j++) {
		if (n->inputs[j] != RT_VALUE_NONE)
			error = slot->error_of[n->inputs[j]];
	}
	if (likely(error == 0)) {
		int rc = rt_exec_step(st, slot->arena, w->scratch, w->kerr, sizeof(w->kerr));

		counter_inc(&w->steps_run);
		if (unlikely(rc != 0)) {
			counter_inc(&w->steps_failed);
			error = step + 1;
			step_failed(slot, st, step, rc, w->kerr);
		}
	} else {
		counter_inc(&w->steps_skipped);
	}
	for (uint16_t j = 0; j < n->num_outputs; j++) {
		if (n->outputs[j] != RT_VALUE_NONE)
			slot->error_of[n->outputs[j]] = error;
	}
	/* release the consumers: the decrement that reaches zero queues the step */
	for (uint32_t k = 0; k < st->num_consumers; k++) {
		uint32_t c = st->consumers[k];

		if (atomic_fetch_sub_explicit(&slot->pending[c], 1, memory_order_acq_rel) == 1)
			ring_push(&ex->work, (uint64_t)slot_index << 32 | c);
	}
	/* after the consumers are queued, so the batch cannot finish while one of its steps is unqueued */
	if (atomic_fetch_sub_explicit(&slot->remaining, 1, memory_order_acq_rel) == 1)
		batch_finish(ex, slot_index, w);
}

unsigned int rt_executor_work(struct rt_executor *ex, unsigned int worker)
{
	struct exec_worker *w;
	unsigned int n = 0;
	uint64_t item;

	if (unlikely(worker >= ex->nb_workers))
		return 0;
	w = &ex->workers[worker];
	while (n < RT_EXECUTOR_WORK_BURST && ring_pop(&ex->work, &item)) {
		step_run(ex, w, item);
		n++;
	}
	return n;
}

unsigned int rt_executor_poll_completions(struct rt_executor *ex, bw_completion_fn fn, void *ctx,
					  unsigned int max)
{
	unsigned int n = 0;
	uint64_t item;

	while (n < max && ring_pop(&ex->done, &item)) {
		struct exec_slot *slot = &ex->slots[item];
		struct bw_completion c = { .batch = slot->batch, .status = slot->status, .msg = slot->msg,
					   .valid_outputs = slot->valid_outputs };
		struct exec_size *sz = slot->size;

		fn(ctx, &c);
		slot->batch = NULL;
		sz->free_slots[sz->nb_free++] = (uint32_t)item;
		ex->in_flight--;
		n++;
	}
	return n;
}

struct poll_adapter {
	rt_executor_done_fn done;
	void *ctx;
};

static void poll_adapt(void *ctx, const struct bw_completion *c)
{
	const struct poll_adapter *a = ctx;

	a->done(a->ctx, c->batch, c->status, c->msg);
}

unsigned int rt_executor_poll(struct rt_executor *ex, rt_executor_done_fn done, void *ctx, unsigned int max)
{
	struct poll_adapter a = { .done = done, .ctx = ctx };

	return rt_executor_poll_completions(ex, poll_adapt, &a, max);
}

unsigned int rt_executor_in_flight(const struct rt_executor *ex)
{
	return ex->in_flight;
}

const struct rt_plan *rt_executor_plan(const struct rt_executor *ex, int64_t batch_size)
{
	for (unsigned int i = 0; i < ex->nb_sizes; i++) {
		if ((int64_t)ex->sizes[i].padded_rows == batch_size)
			return ex->sizes[i].plan;
	}
	return NULL;
}

int64_t rt_executor_chunk_rows(const struct rt_executor *ex, int64_t batch_size)
{
	for (unsigned int i = 0; i < ex->nb_sizes; i++) {
		if ((int64_t)ex->sizes[i].padded_rows == batch_size)
			return ex->sizes[i].chunk_rows;
	}
	return 0;
}

void rt_executor_stats(const struct rt_executor *ex, struct rt_executor_stats *st)
{
	*st = (struct rt_executor_stats){
		.batches_done = atomic_load_explicit(&ex->owner_batches_done, memory_order_relaxed),
	};
	for (unsigned int i = 0; i < ex->nb_workers; i++) {
		const struct exec_worker *w = &ex->workers[i];

		st->steps_run += atomic_load_explicit(&w->steps_run, memory_order_relaxed);
		st->steps_failed += atomic_load_explicit(&w->steps_failed, memory_order_relaxed);
		st->steps_skipped += atomic_load_explicit(&w->steps_skipped, memory_order_relaxed);
		st->batches_done += atomic_load_explicit(&w->batches_done, memory_order_relaxed);
		st->batches_failed += atomic_load_explicit(&w->batches_failed, memory_order_relaxed);
	}
}
