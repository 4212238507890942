/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * One model's batcher on one polling core: TensorFlow's batching rules on fixed pools. Each priority
 * level has a FIFO of batches (at most max_enqueued_batches, the open one last); closed batches leave
 * the FIFO for the executor when the shared in-flight limit allows, higher priorities first.
 * Everything is allocated in bat_queue_create; the hot functions only move pointers between free
 * stacks, FIFOs and the executor.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <batchwire/clock.h>

#include "batching.h"

/* A batch as the queue keeps it: the executor's descriptor plus the window's bookkeeping. */
struct batch_slot {
	struct bw_batch pub;
	uint64_t min_deadline; /* earliest deadline of its tasks, 0: none */
	bool closed;
};

struct batch_fifo {
	struct batch_slot **slots; /* a ring of fifo_mask + 1 >= max_enqueued_batches entries */
	uint32_t head;
	uint32_t count;
};

struct bat_queue {
	struct bat_options opts;
	struct bat_limiter *limiter;
	struct bw_executor executor;
	bat_job_done_fn done;
	void *done_ctx;
	uint64_t tsc_hz;
	uint64_t timeout_ticks;
	uint64_t default_deadline_ticks;
	uint64_t slo_ticks;
	uint64_t deadline_guard_ticks;
	uint64_t rng;
	uint32_t capacity;         /* rows per batch */
	uint32_t fifo_mask;        /* FIFO ring size - 1: a power of two, so no division per lookup */
	uint32_t queued_tasks;     /* tasks waiting in FIFOs */
	uint32_t in_flight;        /* this queue's batches at the executor */
	bool may_draw;             /* a batch closed or completed since the last fractional draw */
	uint32_t seen_in_flight;   /* the executor's in-flight count at the last look */
	struct batch_fifo fifo[BAT_PRIORITY_LEVELS_MAX];
	/* free stacks over the pools below */
	struct batch_slot **batch_free;
	uint32_t nb_batch_free;
	struct bw_batch_task **task_free;
	uint32_t nb_task_free;
	struct bat_job **job_free;
	uint32_t nb_job_free;
	/* pools */
	struct batch_slot *batches;
	struct bw_batch_task **task_ptrs; /* capacity pointers per batch */
	struct bw_batch_task *tasks;
	struct bat_job *jobs;
	uint32_t nb_batches, nb_tasks, nb_jobs;
	double compute_ewma_us[BAT_BATCH_SIZE_MAX + 1]; /* by padded size; 0: not learnt yet */
	struct bat_stats stats;
};

static uint64_t us_to_ticks(const struct bat_queue *q, uint64_t us)
{
	return bw_us_to_ticks(us, q->tsc_hz);
}

static uint64_t ticks_to_us(const struct bat_queue *q, uint64_t ticks)
{
	return bw_ticks_to_us(ticks, q->tsc_hz);
}

struct bat_queue *bat_queue_create(const struct bat_options *opts, struct bat_limiter *limiter,
				   const struct bw_executor *executor, bat_job_done_fn done, void *done_ctx,
				   uint64_t tsc_hz, uint64_t rng_seed)
{
	struct bat_queue *q;
	uint32_t max_in_flight;

	if (opts == NULL || limiter == NULL || executor == NULL || executor->ops == NULL || executor->ops->submit == NULL || done == NULL ||
	    tsc_hz == 0 || opts->priority_levels == 0 || opts->priority_levels > BAT_PRIORITY_LEVELS_MAX)
		return NULL;
	q = calloc(1, sizeof(*q));
	if (q == NULL)
		return NULL;
	q->opts = *opts;
	q->limiter = limiter;
	q->executor = *executor;
	q->done = done;
	q->done_ctx = done_ctx;
	q->tsc_hz = tsc_hz;
	q->timeout_ticks = us_to_ticks(q, opts->batch_timeout_micros);
	q->default_deadline_ticks = us_to_ticks(q, opts->default_timeout_micros);
	q->slo_ticks = us_to_ticks(q, opts->slo_micros);
	q->deadline_guard_ticks = us_to_ticks(q, BAT_DEADLINE_GUARD_US);
	q->rng = rng_seed | 1; /* xorshift must not start at 0 */
	q->capacity = bat_options_batch_capacity(opts);

	/* Every batch that can exist at once: full FIFOs plus as many in flight as the limit allows. */
	max_in_flight = opts->num_batch_threads > 0 ? (uint32_t)opts->num_batch_threads : opts->max_inflight_batches;
	q->nb_batches = opts->priority_levels * opts->max_enqueued_batches + max_in_flight;
	q->nb_tasks = q->nb_batches * q->capacity; /* a task has at least one row */
	q->nb_jobs = q->nb_tasks;
	q->batches = calloc(q->nb_batches, sizeof(*q->batches));
	q->task_ptrs = calloc(q->nb_tasks, sizeof(*q->task_ptrs));
	q->tasks = calloc(q->nb_tasks, sizeof(*q->tasks));
	q->jobs = calloc(q->nb_jobs, sizeof(*q->jobs));
	q->batch_free = calloc(q->nb_batches, sizeof(*q->batch_free));
	q->task_free = calloc(q->nb_tasks, sizeof(*q->task_free));
	q->job_free = calloc(q->nb_jobs, sizeof(*q->job_free));
	q->fifo_mask = 1;
	while (q->fifo_mask + 1 < opts->max_enqueued_batches)
		q->fifo_mask = (q->fifo_mask << 1) | 1;
	for (uint16_t p = 0; p < opts->priority_levels; p++)
		q->fifo[p].slots = calloc(q->fifo_mask + 1, sizeof(*q->fifo[p].slots));
	if (q->batches == NULL || q->task_ptrs == NULL || q->tasks == NULL || q->jobs == NULL ||
	    q->batch_free == NULL || q->task_free == NULL || q->job_free == NULL) {
		bat_queue_destroy(q);
		return NULL;
	}
	for (uint16_t p = 0; p < opts->priority_levels; p++) {
		if (q->fifo[p].slots == NULL) {
			bat_queue_destroy(q);
			return NULL;
		}
	}
	for (uint32_t i = 0; i < q->nb_batches; i++) {
		q->batches[i].pub.tasks = &q->task_ptrs[(size_t)i * q->capacity];
		q->batches[i].pub.owner = q;
		q->batch_free[q->nb_batch_free++] = &q->batches[i];
	}
	for (uint32_t i = 0; i < q->nb_tasks; i++)
		q->task_free[q->nb_task_free++] = &q->tasks[i];
	for (uint32_t i = 0; i < q->nb_jobs; i++)
		q->job_free[q->nb_job_free++] = &q->jobs[i];
	return q;
}

void bat_queue_destroy(struct bat_queue *q)
{
	if (q == NULL)
		return;
	for (uint16_t p = 0; p < BAT_PRIORITY_LEVELS_MAX; p++)
		free(q->fifo[p].slots);
	free(q->batches);
	free(q->task_ptrs);
	free(q->tasks);
	free(q->jobs);
	free(q->batch_free);
	free(q->task_free);
	free(q->job_free);
	free(q);
}

const struct bat_stats *bat_queue_stats(const struct bat_queue *q)
{
	return &q->stats;
}

const struct bat_options *bat_queue_options(const struct bat_queue *q)
{
	return &q->opts;
}

bool bat_queue_empty(const struct bat_queue *q)
{
	for (uint16_t p = 0; p < q->opts.priority_levels; p++) {
		if (q->fifo[p].count != 0)
			return false;
	}
	return q->in_flight == 0;
}

struct bat_job *bat_job_alloc(struct bat_queue *q)
{
	struct bat_job *job;

	if (q->nb_job_free == 0)
		return NULL;
	job = q->job_free[--q->nb_job_free];
	/* Only what an owner may leave unset: the segments are read only up to num_inputs/outputs, and
	 * clearing all 300 bytes costs more than the rest of a request's trip through the batcher. */
	job->rows = 0;
	job->priority = 0;
	job->arrival_tsc = 0;
	job->deadline_tsc = 0;
	job->num_inputs = 0;
	job->num_outputs = 0;
	job->owner[0] = job->owner[1] = job->owner[2] = NULL;
	job->version = 0;
	job->version_pinned = false;
	return job;
}

static void job_free(struct bat_queue *q, struct bat_job *job)
{
	q->job_free[q->nb_job_free++] = job;
}

/* ---- FIFO of one priority level --------------------------------------------------------------- */

static struct batch_slot *fifo_at(const struct batch_fifo *f, const struct bat_queue *q, uint32_t i)
{
	return f->slots[(f->head + i) & q->fifo_mask];
}

static struct batch_slot *fifo_open_batch(const struct batch_fifo *f, const struct bat_queue *q)
{
	struct batch_slot *tail;

	if (f->count == 0)
		return NULL;
	tail = fifo_at(f, q, f->count - 1);
	return tail->closed ? NULL : tail;
}

static void fifo_push(struct batch_fifo *f, const struct bat_queue *q, struct batch_slot *b)
{
	f->slots[(f->head + f->count) & q->fifo_mask] = b;
	f->count++;
}

/* Removes entry i (usually the head; a middle one only when expiry emptied it). */
static void fifo_remove(struct batch_fifo *f, const struct bat_queue *q, uint32_t i)
{
	if (i == 0) {
		f->head = (f->head + 1) & q->fifo_mask;
		f->count--;
		return;
	}
	for (; i + 1 < f->count; i++)
		f->slots[(f->head + i) & q->fifo_mask] = f->slots[(f->head + i + 1) & q->fifo_mask];
	f->count--;
}

static struct batch_slot *batch_open(struct bat_queue *q, struct batch_fifo *f, const struct bat_job *job, uint64_t now)
{
	struct batch_slot *b = q->batch_free[--q->nb_batch_free];

	b->pub.version = job->version;
	b->pub.version_pinned = false;
	b->pub.size = 0;
	b->pub.padded_size = 0;
	b->pub.num_tasks = 0;
	b->pub.priority = job->priority;
	b->pub.created_tsc = now;
	b->pub.dispatched_tsc = 0;
	b->min_deadline = 0;
	b->closed = false;
	fifo_push(f, q, b);
	return b;
}

static void batch_close(struct bat_queue *q, struct batch_slot *b, enum bw_dispatch_reason reason)
{
	b->closed = true;
	b->pub.reason = (uint8_t)reason;
	q->may_draw = true;
}

static void batch_free(struct bat_queue *q, struct batch_slot *b)
{
	for (uint16_t i = 0; i < b->pub.num_tasks; i++)
		q->task_free[q->nb_task_free++] = b->pub.tasks[i];
	q->batch_free[q->nb_batch_free++] = b;
}

/* ---- completion -------------------------------------------------------------------------------- */

/* One piece of a job has its outcome; the job completes with its first error after its last piece. */
static void piece_done(struct bat_queue *q, struct bat_job *job, enum bw_status status, uint64_t now)
{
	if (status != BW_STATUS_OK && job->status == BW_STATUS_OK)
		job->status = (uint16_t)status;
	if (--job->pieces_pending != 0)
		return;
	q->stats.jobs_done++;
	/* done() builds the reply and hands it to TX now: arrival to TX, as the client waits for it */
	bw_hist_record(&q->stats.latency_us, now > job->arrival_tsc ? ticks_to_us(q, now - job->arrival_tsc) : 0);
	q->done(q->done_ctx, job, (enum bw_status)job->status);
	job_free(q, job);
}

void bat_batch_complete(struct bw_batch *pub, enum bw_status status, uint64_t now)
{
	struct batch_slot *b = (struct batch_slot *)pub;
	struct bat_queue *q = pub->owner;
	uint32_t padded = pub->padded_size;
	/* an executor that starts batches later than they are submitted says when (echo's start at once) */
	uint64_t started = pub->started_tsc > pub->dispatched_tsc ? pub->started_tsc : pub->dispatched_tsc;

	bw_hist_record(&q->stats.queue_us, ticks_to_us(q, started - pub->dispatched_tsc));
	bw_hist_record(&q->stats.compute_us, now > started ? ticks_to_us(q, now - started) : 0);
	if (status == BW_STATUS_OK) {
		/* Learn what this padded size costs, for the SLO and deadline closes. */
		double compute_us = (double)ticks_to_us(q, now - pub->dispatched_tsc);
		double *avg = &q->compute_ewma_us[padded];
		*avg = *avg == 0 ? compute_us : *avg + BAT_SLO_EWMA_WEIGHT * (compute_us - *avg);
	} else {
		q->stats.batches_failed++;
	}
	q->in_flight--;
	q->may_draw = true;
	bat_limiter_release(q->limiter, ticks_to_us(q, now - pub->created_tsc));
	for (uint16_t i = 0; i < pub->num_tasks; i++)
		piece_done(q, pub->tasks[i]->job, status, now);
	batch_free(q, b);
}

/* ---- submit ------------------------------------------------------------------------------------ */

/* A piece's segments: its rows of each of the job's tensors. */
static void task_pieces_cut(struct bw_batch_task *t, const struct bat_job *job, uint32_t row_offset, uint32_t rows)
{
	for (uint16_t i = 0; i < job->num_inputs; i++) {
		uint32_t row_bytes = job->inputs[i].len / job->rows;
		t->inputs[i] = bw_segment_slice(&job->inputs[i], row_offset * row_bytes, rows * row_bytes);
	}
	for (uint16_t i = 0; i < job->num_outputs; i++) {
		uint32_t row_bytes = job->outputs[i].len / job->rows;
		t->outputs[i] = bw_segment_slice(&job->outputs[i], row_offset * row_bytes, rows * row_bytes);
	}
}

static void task_add(struct bat_queue *q, struct batch_slot *b, struct bat_job *job, uint32_t row_offset,
		     uint32_t rows)
{
	struct bw_batch_task *t = q->task_free[--q->nb_task_free];

	t->rows = rows;
	t->row_offset = row_offset;
	t->job = job;
	if (rows == job->rows) { /* the whole request: its segments as they are, no arithmetic */
		memcpy(t->inputs, job->inputs, job->num_inputs * sizeof(job->inputs[0]));
		memcpy(t->outputs, job->outputs, job->num_outputs * sizeof(job->outputs[0]));
	} else {
		task_pieces_cut(t, job, row_offset, rows);
	}
	b->pub.tasks[b->pub.num_tasks++] = t;
	b->pub.size += rows;
	b->pub.version_pinned |= job->version_pinned;
	b->pub.num_inputs = job->num_inputs;
	b->pub.num_outputs = job->num_outputs;
	if (job->deadline_tsc != 0 && (b->min_deadline == 0 || job->deadline_tsc < b->min_deadline))
		b->min_deadline = job->deadline_tsc;
	q->queued_tasks++;
	job->pieces++;
	job->pieces_pending++;
	if (b->pub.size == q->capacity)
		batch_close(q, b, BW_DISPATCH_FULL);
}

static bool job_shape_ok(const struct bat_job *job)
{
	if (job->num_inputs > BW_BATCH_TENSORS_MAX || job->num_outputs > BW_BATCH_TENSORS_MAX)
		return false;
	if (job->rows == 1) /* every length is a whole number of one row */
		return true;
	for (uint16_t i = 0; i < job->num_inputs; i++) {
		if (job->inputs[i].len % job->rows != 0)
			return false;
	}
	for (uint16_t i = 0; i < job->num_outputs; i++) {
		if (job->outputs[i].len % job->rows != 0)
			return false;
	}
	return true;
}

enum bw_status bat_submit(struct bat_queue *q, struct bat_job *job, uint64_t now)
{
	struct batch_fifo *f;
	struct batch_slot *open;
	uint32_t room, first, pieces, new_batches;

	if (job->rows == 0 || job->priority >= q->opts.priority_levels || !job_shape_ok(job) ||
	    job->rows > q->opts.max_batch_size) {
		if (job->rows > q->opts.max_batch_size)
			q->stats.rejected_too_large++;
		job_free(q, job);
		return BW_STATUS_INVALID_ARGUMENT;
	}
	if (job->deadline_tsc == 0 && q->default_deadline_ticks != 0)
		job->deadline_tsc = job->arrival_tsc + q->default_deadline_ticks;

	/* Work out the pieces and the batches they need before touching anything. */
	f = &q->fifo[job->priority];
	open = fifo_open_batch(f, q);
	/* a window of another version has no room for it: it closes, one of its version opens */
	room = open != NULL && open->pub.version == job->version ? q->capacity - open->pub.size : 0;
	if (!q->opts.enable_large_batch_splitting) {
		first = job->rows <= room ? job->rows : 0;
		pieces = 1;
		new_batches = first != 0 ? 0 : 1;
	} else {
		/* [min(r, n), L, ..., tail]: fill what the open batch has left, then full batches. */
		first = job->rows < room ? job->rows : room;
		uint32_t rest = job->rows - first;
		new_batches = (rest + q->capacity - 1) / q->capacity;
		pieces = (first != 0) + new_batches;
	}
	if (f->count + new_batches > q->opts.max_enqueued_batches ||
	    (q->opts.max_queue_size != 0 && q->queued_tasks + pieces > q->opts.max_queue_size) ||
	    q->nb_batch_free < new_batches || q->nb_task_free < pieces) {
		q->stats.rejected_full++;
		job_free(q, job);
		return BW_STATUS_UNAVAILABLE; /* TF: "The batch scheduling queue ... is full" */
	}

	job->status = BW_STATUS_OK;
	job->pieces = 0;
	job->pieces_pending = 0;
	uint32_t offset = 0;
	if (first != 0) {
		task_add(q, open, job, 0, first);
		offset = first;
	} else if (open != NULL) {
		/* the next task does not fit, or is of another version: the window is over */
		batch_close(q, open, open->pub.version == job->version ? BW_DISPATCH_FULL : BW_DISPATCH_VERSION);
	}
	while (offset < job->rows) {
		uint32_t rows = job->rows - offset < q->capacity ? job->rows - offset : q->capacity;
		struct batch_slot *b = batch_open(q, f, job, now);

		task_add(q, b, job, offset, rows);
		offset += rows;
	}
	q->stats.jobs++;
	if (job->pieces > 1)
		q->stats.splits++;
	return BW_STATUS_OK;
}

/* ---- the window poller ------------------------------------------------------------------------- */

/* Takes tasks whose deadline has passed out of a batch. \return how many. */
static uint32_t batch_expire(struct bat_queue *q, struct batch_slot *b, uint64_t now)
{
	uint16_t kept = 0;
	uint32_t expired = 0;

	b->min_deadline = 0;
	for (uint16_t i = 0; i < b->pub.num_tasks; i++) {
		struct bw_batch_task *t = b->pub.tasks[i];
		struct bat_job *job = t->job;

		if (job->deadline_tsc != 0 && job->deadline_tsc <= now) {
			b->pub.size -= t->rows;
			q->task_free[q->nb_task_free++] = t;
			q->queued_tasks--;
			q->stats.deadline_expired++;
			expired++;
			piece_done(q, job, BW_STATUS_DEADLINE_EXCEEDED, now);
			continue;
		}
		if (job->deadline_tsc != 0 && (b->min_deadline == 0 || job->deadline_tsc < b->min_deadline))
			b->min_deadline = job->deadline_tsc;
		b->pub.tasks[kept++] = t;
	}
	b->pub.num_tasks = kept;
	return expired;
}

static uint64_t predicted_compute_ticks(const struct bat_queue *q, uint32_t size)
{
	return us_to_ticks(q, (uint64_t)q->compute_ewma_us[bat_options_padded_size(&q->opts, size)]);
}

/* Should the open window close now, and why. \return BW_DISPATCH_COUNT to keep it open. */
static enum bw_dispatch_reason window_due(struct bat_queue *q, const struct batch_slot *b, uint64_t now)
{
	uint64_t age = now - b->pub.created_tsc;
	uint64_t predicted;

	if (age >= q->timeout_ticks)
		return BW_DISPATCH_TIMEOUT;
	predicted = predicted_compute_ticks(q, b->pub.size);
	if (q->slo_ticks != 0 && age + predicted >= q->slo_ticks)
		return BW_DISPATCH_SLO;
	/* Close early enough for the most urgent task to run: its predicted compute time (0 until one
	 * is learnt) and a guard for the dispatch itself before its deadline. */
	if (b->min_deadline != 0 && now + predicted + q->deadline_guard_ticks >= b->min_deadline)
		return BW_DISPATCH_DEADLINE;
	if (q->opts.dispatch_when_idle && bat_limiter_in_flight(q->limiter) == 0)
		return BW_DISPATCH_IDLE;
	return BW_DISPATCH_COUNT;
}

static void batch_dispatch(struct bat_queue *q, struct batch_slot *b, uint64_t now)
{
	struct bw_batch *pub = &b->pub;

	pub->padded_size = bat_options_padded_size(&q->opts, pub->size);
	pub->dispatched_tsc = now;
	pub->started_tsc = 0; /* the executor's to set, if it starts the batch later */
	q->queued_tasks -= pub->num_tasks;
	q->in_flight++;
	q->stats.batches++;
	q->stats.rows += pub->size;
	q->stats.padding_rows += pub->padded_size - pub->size;
	q->stats.window_wait_us += ticks_to_us(q, now - pub->created_tsc);
	bw_hist_record(&q->stats.window_us, ticks_to_us(q, now - pub->created_tsc));
	bw_hist_record(&q->stats.batch_rows, pub->size);
	q->stats.dispatch[pub->reason]++;
	q->stats.by_size[pub->padded_size]++;
	if (q->executor.ops->submit(q->executor.ctx, pub) != 0)
		bat_batch_complete(pub, BW_STATUS_UNAVAILABLE, now);
}

unsigned int bat_poll(struct bat_queue *q, uint64_t now)
{
	unsigned int work = 0;

	for (uint16_t p = 0; p < q->opts.priority_levels; p++) {
		struct batch_fifo *f = &q->fifo[p];
		struct batch_slot *open;

		for (uint32_t i = 0; i < f->count;) {
			struct batch_slot *b = fifo_at(f, q, i);

			if (b->min_deadline != 0 && b->min_deadline <= now) {
				work += batch_expire(q, b, now);
				if (b->pub.num_tasks == 0) {
					fifo_remove(f, q, i);
					batch_free(q, b);
					continue;
				}
			}
			i++;
		}
		open = fifo_open_batch(f, q);
		if (open != NULL) {
			enum bw_dispatch_reason reason = window_due(q, open, now);
			if (reason != BW_DISPATCH_COUNT) {
				batch_close(q, open, reason);
				work++;
			}
		}
	}
	/* Strict priorities: the most urgent level with a closed batch goes first. */
	for (;;) {
		struct batch_fifo *f = NULL;
		uint16_t p;

		for (p = 0; p < q->opts.priority_levels; p++) {
			if (q->fifo[p].count != 0 && fifo_at(&q->fifo[p], q, 0)->closed) {
				f = &q->fifo[p];
				break;
			}
		}
		if (f == NULL)
			break;
		/* TensorFlow draws for a fractional headroom when a batch closes or one completes, not
		 * on every look: drawing on every poll would admit the batch almost at once. Another
		 * core's completion shows here as a changed in-flight count. */
		uint32_t in_flight = bat_limiter_in_flight(q->limiter);
		if (in_flight != q->seen_in_flight) {
			q->seen_in_flight = in_flight;
			q->may_draw = true;
		}
		if (!q->may_draw && bat_limiter_limit(q->limiter) - bat_limiter_in_flight(q->limiter) < 1)
			break;
		q->may_draw = false;
		if (!bat_limiter_try_acquire(q->limiter, &q->rng))
			break;
		q->seen_in_flight++; /* our own dispatch is not an event that earns another draw */
		struct batch_slot *b = fifo_at(f, q, 0);
		fifo_remove(f, q, 0);
		batch_dispatch(q, b, now);
		work++;
	}
	return work;
}

void bat_queue_drain(struct bat_queue *q)
{
	for (uint16_t p = 0; p < q->opts.priority_levels; p++) {
		struct batch_slot *open = fifo_open_batch(&q->fifo[p], q);
		if (open != NULL)
			batch_close(q, open, BW_DISPATCH_DRAIN);
	}
}
