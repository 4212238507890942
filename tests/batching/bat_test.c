/* SPDX-License-Identifier: BSD-3-Clause */
/* The harness, executor stub and checks the unit tests of batching/ share (bat_test.h). */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bat_test.h"

/* ---- a job as its owner sees it ------------------------------------------------------------------ */

/* Every input byte distinct per row (7 is odd, so row * 7 differs mod 256 for any two rows). */
static uint8_t in_byte(unsigned int id, uint32_t row, unsigned int k)
{
	return (uint8_t)(id * 31u + row * 7u + k * 2u + 1u);
}

/* The stub model: each output byte is its input byte xor 0xa5. */
static uint8_t model_byte(uint8_t in)
{
	return (uint8_t)(in ^ 0xa5);
}

static void job_rec_init(struct job_rec *r, unsigned int id, uint32_t rows)
{
	memset(r, 0, sizeof(*r));
	r->rows = rows;
	r->status = BW_STATUS_COUNT;
	for (uint32_t row = 0; row < JOB_ROWS_MAX; row++) {
		for (unsigned int k = 0; k < ROW_BYTES; k++)
			r->in[row * ROW_BYTES + k] = in_byte(id, row, k);
	}
	memset(r->out, CANARY, sizeof(r->out));
}

/* The job's output holds the model's result for each of its rows, in order, and nothing past them. */
bool job_output_ok(const struct job_rec *r)
{
	for (uint32_t i = 0; i < r->rows * ROW_BYTES; i++) {
		if (r->out[i] != model_byte(r->in[i]))
			return false;
	}
	for (uint32_t i = r->rows * ROW_BYTES; i < sizeof(r->out); i++) {
		if (r->out[i] != CANARY)
			return false;
	}
	return true;
}

/* ---- the executor stub and the harness ----------------------------------------------------------- */

static int stub_submit(void *ctx, struct bw_batch *batch)
{
	struct harness *h = ctx;
	struct rec_batch *rb;

	if (h->nb_rec == REC_BATCHES_MAX || batch->num_tasks > REC_TASKS_MAX) {
		CU_FAIL("stub executor: too many batches or tasks to record");
		return -ENOSPC;
	}
	h->in_submit = true;
	rb = &h->rec[h->nb_rec++];
	memset(rb, 0, sizeof(*rb));
	rb->batch = batch;
	rb->size = batch->size;
	rb->padded_size = batch->padded_size;
	rb->num_tasks = batch->num_tasks;
	rb->reason = batch->reason;
	rb->priority = batch->priority;
	rb->version = batch->version;
	rb->created_tsc = batch->created_tsc;
	rb->dispatched_tsc = batch->dispatched_tsc;
	for (uint16_t i = 0; i < batch->num_tasks; i++) {
		const struct bw_batch_task *t = batch->tasks[i];
		const struct bat_job *job = t->job;

		rb->tasks[i] = (struct rec_task){
			.rows = t->rows,
			.row_offset = t->row_offset,
			.in0 = t->inputs[0],
			.out0 = t->outputs[0],
			.owner = job->owner[0],
		};
	}
	if (h->submit_ret != 0) {
		rb->failed_submit = true;
		rb->completed = true;
	}
	h->in_submit = false;
	return h->submit_ret;
}

const struct bw_executor_ops g_stub_ops = {.name = "stub", .submit = stub_submit};

void on_done(void *ctx, struct bat_job *job, enum bw_status status)
{
	struct harness *h = ctx;
	struct job_rec *r = job->owner[0];

	if (h->in_submit)
		h->done_in_submit++;
	r->done_calls++;
	r->status = status;
	r->done_order = ++h->done_calls;
}

void harness_init(struct harness *h, const struct bat_options *opts)
{
	char msg[MSG_CAP] = "";
	struct bw_executor exec;
	int ret;

	memset(h, 0, sizeof(*h));
	h->opts = *opts;
	ret = bat_options_finalize(&h->opts, msg, sizeof(msg));
	if (ret != 0)
		printf("\n  finalize: %s ", msg);
	CU_ASSERT_EQUAL_FATAL(ret, 0);
	h->rec = calloc(REC_BATCHES_MAX, sizeof(*h->rec));
	CU_ASSERT_PTR_NOT_NULL_FATAL(h->rec);
	h->lim = bat_limiter_create(&h->opts);
	CU_ASSERT_PTR_NOT_NULL_FATAL(h->lim);
	exec = (struct bw_executor){.ops = &g_stub_ops, .ctx = h};
	h->q = bat_queue_create(&h->opts, h->lim, &exec, on_done, h, TSC_HZ_1US, 0x5eed);
	CU_ASSERT_PTR_NOT_NULL_FATAL(h->q);
}

void harness_fini(struct harness *h)
{
	CU_ASSERT_EQUAL(h->done_in_submit, 0);
	bat_queue_destroy(h->q);
	bat_limiter_destroy(h->lim);
	free(h->rec);
}

/* Options most queue tests start from: defaults, a fixed limit of `threads`, short windows. */
struct bat_options opts_base(int32_t threads, uint32_t max_batch_size, uint32_t timeout_us)
{
	struct bat_options o;

	bat_options_defaults(&o);
	o.num_batch_threads = threads;
	o.max_batch_size = max_batch_size;
	o.batch_timeout_micros = timeout_us;
	return o;
}

void set_sizes(struct bat_options *o, unsigned int n, const uint32_t *sizes)
{
	o->num_allowed_batch_sizes = (uint16_t)n;
	for (unsigned int i = 0; i < n; i++)
		o->allowed_batch_sizes[i] = sizes[i];
}

/* A job with one input and one output of rows * ROW_BYTES, arriving at now. */
enum bw_status submit_full(struct harness *h, struct job_rec *r, unsigned int id, uint32_t rows,
			   uint8_t priority, uint64_t deadline, uint64_t now)
{
	struct bat_job *job = bat_job_alloc(h->q);
	enum bw_status st;

	CU_ASSERT_PTR_NOT_NULL_FATAL(job);
	job_rec_init(r, id, rows);
	job->rows = rows;
	job->priority = priority;
	job->arrival_tsc = now;
	job->deadline_tsc = deadline;
	job->num_inputs = 1;
	job->num_outputs = 1;
	job->inputs[0] = bw_segment_flat(r->in, rows * ROW_BYTES);
	job->outputs[0] = bw_segment_flat(r->out, rows * ROW_BYTES);
	job->owner[0] = r;
	job->version = h->version;
	st = bat_submit(h->q, job, now);
	r->accepted = st == BW_STATUS_OK;
	return st;
}

enum bw_status submit(struct harness *h, struct job_rec *r, uint32_t rows, uint64_t now)
{
	static unsigned int id;

	return submit_full(h, r, ++id, rows, 0, 0, now);
}

/* The stub model on the CPU: gather input 0, transform every padded row, scatter output 0. */
static void run_model(const struct rec_batch *rb)
{
	uint8_t buf[(REC_TASKS_MAX + BAT_BATCH_SIZE_MAX) * ROW_BYTES];

	CU_ASSERT_FATAL(rb->padded_size <= BAT_BATCH_SIZE_MAX);
	bw_batch_gather(rb->batch, 0, buf, ROW_BYTES);
	for (uint32_t i = 0; i < rb->padded_size * ROW_BYTES; i++)
		buf[i] = model_byte(buf[i]);
	bw_batch_scatter(rb->batch, 0, buf);
}

void complete(struct harness *h, unsigned int i, enum bw_status status, uint64_t now)
{
	struct rec_batch *rb = &h->rec[i];

	CU_ASSERT_FATAL(i < h->nb_rec);
	CU_ASSERT_FATAL(!rb->completed);
	if (status == BW_STATUS_OK)
		run_model(rb);
	rb->completed = true;
	bat_batch_complete(rb->batch, status, now);
}

/* ---- checks -------------------------------------------------------------------------------------- */

#define STAT_EQ(field)                                                                                   \
	do {                                                                                             \
		CU_ASSERT_EQUAL(s->field, w->field);                                                     \
		if (s->field != w->field)                                                                \
			printf("\n  line %d: stats." #field " %llu, want %llu ", line,                   \
			       (unsigned long long)s->field, (unsigned long long)w->field);              \
	} while (0)

void check_stats(const struct harness *h, const struct want *w, int line)
{
	const struct bat_stats *s = bat_queue_stats(h->q);

	STAT_EQ(jobs);
	STAT_EQ(jobs_done);
	STAT_EQ(rejected_full);
	STAT_EQ(rejected_too_large);
	STAT_EQ(splits);
	STAT_EQ(deadline_expired);
	STAT_EQ(batches);
	STAT_EQ(batches_failed);
	STAT_EQ(rows);
	STAT_EQ(padding_rows);
	for (unsigned int r = 0; r < BW_DISPATCH_COUNT; r++)
		STAT_EQ(dispatch[r]);
}

/* The task records of batch rb: rows and row offsets, and whose they are. */
void check_task(const struct rec_batch *rb, unsigned int t, const struct job_rec *owner, uint32_t rows,
		uint32_t row_offset)
{
	CU_ASSERT_FATAL(t < rb->num_tasks);
	CU_ASSERT_PTR_EQUAL(rb->tasks[t].owner, owner);
	CU_ASSERT_EQUAL(rb->tasks[t].rows, rows);
	CU_ASSERT_EQUAL(rb->tasks[t].row_offset, row_offset);
	/* the segments point into the request's own memory, at its row offset: no copy */
	CU_ASSERT_PTR_EQUAL(rb->tasks[t].in0.data, owner->in + row_offset * ROW_BYTES);
	CU_ASSERT_EQUAL(rb->tasks[t].in0.len, rows * ROW_BYTES);
	CU_ASSERT_PTR_EQUAL(rb->tasks[t].out0.data, owner->out + row_offset * ROW_BYTES);
	CU_ASSERT_EQUAL(rb->tasks[t].out0.len, rows * ROW_BYTES);
}

void check_done_once(const struct job_rec *r, enum bw_status status)
{
	CU_ASSERT_EQUAL(r->done_calls, 1);
	CU_ASSERT_EQUAL(r->status, status);
}

/* ---- limiters ------------------------------------------------------------------------------------ */

struct bat_limiter *limiter_adaptive(uint32_t min, uint32_t initial, uint32_t max, uint32_t window)
{
	struct bat_options o;
	char msg[MSG_CAP] = "";
	struct bat_limiter *lim;

	bat_options_defaults(&o);
	o.num_batch_threads = 0;
	o.min_inflight_batches = min;
	o.initial_inflight_batches = initial;
	o.max_inflight_batches = max;
	o.batches_to_average_over = window;
	CU_ASSERT_EQUAL_FATAL(bat_options_finalize(&o, msg, sizeof(msg)), 0);
	lim = bat_limiter_create(&o);
	CU_ASSERT_PTR_NOT_NULL_FATAL(lim);
	return lim;
}

/* One batch through the limiter: taken (the limit is >= 1 with none in flight) and given back. */
void one_batch(struct bat_limiter *lim, uint64_t latency_us)
{
	uint64_t rng = 42;

	CU_ASSERT_TRUE(bat_limiter_try_acquire(lim, &rng));
	bat_limiter_release(lim, latency_us);
}
