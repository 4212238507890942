/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What the unit tests of batching/ share (one program per source: test_options, test_queue,
 * test_limiter, test_gather): a harness that drives one queue with a scripted clock, an executor stub
 * that records the batches it receives, jobs as their owner sees them, and the checks the cases make.
 *
 * Queues are created with tsc_hz = 1000000, so one tick is one microsecond and every `now` in the
 * cases reads as microseconds. The tests complete recorded batches with bat_batch_complete, never from
 * inside submit. done() counts its calls per job, so "exactly once" is checked by counting.
 */
#ifndef BW_TEST_BAT_H
#define BW_TEST_BAT_H

#include <stdbool.h>
#include <stdint.h>

#include <CUnit/CUnit.h>

#include "batching.h"

#define TSC_HZ_1US 1000000u /* one tick per microsecond */
#define ROW_BYTES 4
#define JOB_ROWS_MAX 40     /* larger than any max_batch_size the cases use, for the too-large cases */
#define CANARY_BYTES 8
#define CANARY 0xee
#define REC_BATCHES_MAX 4096
#define REC_TASKS_MAX 32
#define MSG_CAP 256

/* ---- a job as its owner sees it ------------------------------------------------------------------ */

struct job_rec {
	unsigned int done_calls;
	enum bw_status status;
	unsigned int done_order; /* harness done count when it completed: 1 is the first */
	uint32_t rows;
	bool accepted;
	uint8_t in[JOB_ROWS_MAX * ROW_BYTES];
	uint8_t out[JOB_ROWS_MAX * ROW_BYTES + CANARY_BYTES];
};

/** \return true when the job's output holds the stub model's result for each of its rows, in order,
 *  and nothing is written past them. */
bool job_output_ok(const struct job_rec *r);

/* ---- the executor stub and the harness ----------------------------------------------------------- */

struct rec_task {
	uint32_t rows;
	uint32_t row_offset;
	struct bw_segment in0, out0;
	struct job_rec *owner;
};

/* A batch as the stub received it, copied at submit. */
struct rec_batch {
	struct bw_batch *batch; /* valid until completed */
	uint32_t size, padded_size;
	uint16_t num_tasks;
	uint8_t reason, priority;
	uint32_t version;
	uint64_t created_tsc, dispatched_tsc;
	struct rec_task tasks[REC_TASKS_MAX];
	bool failed_submit; /* the stub refused it: the queue completed it itself */
	bool completed;
};

struct harness {
	struct bat_options opts;
	struct bat_limiter *lim;
	struct bat_queue *q;
	int submit_ret;      /* what the stub's submit returns */
	unsigned int nb_rec; /* batches received, refused ones included */
	struct rec_batch *rec;
	unsigned int done_calls;
	unsigned int done_in_submit; /* done() while the stub's submit runs: must stay 0 */
	bool in_submit;
	uint32_t version;    /* what submit_full tags its jobs with (bat_job.version) */
};

/* The stub executor: its ctx is a struct harness, whose rec[] it fills. */
extern const struct bw_executor_ops g_stub_ops;

/** The queue's done(): its ctx is a struct harness; counts the call on the job's struct job_rec. */
void on_done(void *ctx, struct bat_job *job, enum bw_status status);

/** Finalizes opts (which must be valid) and creates the limiter and the queue over the stub. */
void harness_init(struct harness *h, const struct bat_options *opts);
void harness_fini(struct harness *h);

/** Options most queue tests start from: defaults, a fixed limit of `threads`, short windows. */
struct bat_options opts_base(int32_t threads, uint32_t max_batch_size, uint32_t timeout_us);
void set_sizes(struct bat_options *o, unsigned int n, const uint32_t *sizes);

/** A job with one input and one output of rows * ROW_BYTES, arriving at now. \return bat_submit's. */
enum bw_status submit_full(struct harness *h, struct job_rec *r, unsigned int id, uint32_t rows,
			   uint8_t priority, uint64_t deadline, uint64_t now);
/** submit_full with a fresh id, priority 0 and no deadline of its own. */
enum bw_status submit(struct harness *h, struct job_rec *r, uint32_t rows, uint64_t now);

/** Completes recorded batch i; with OK, runs the stub model on it first (gather, transform, scatter). */
void complete(struct harness *h, unsigned int i, enum bw_status status, uint64_t now);

/* ---- checks -------------------------------------------------------------------------------------- */

/* Every counter of a queue, exactly. window_wait_us and by_size are checked where they matter. */
struct want {
	uint64_t jobs, jobs_done, rejected_full, rejected_too_large, splits, deadline_expired;
	uint64_t batches, batches_failed, rows, padding_rows;
	uint64_t dispatch[BW_DISPATCH_COUNT];
};

void check_stats(const struct harness *h, const struct want *w, int line);

#define CHECK_STATS(h, ...) check_stats((h), &(struct want){__VA_ARGS__}, __LINE__)

/** Task t of a recorded batch: whose it is, its rows and row offset, and segments into its own memory. */
void check_task(const struct rec_batch *rb, unsigned int t, const struct job_rec *owner, uint32_t rows,
		uint32_t row_offset);

void check_done_once(const struct job_rec *r, enum bw_status status);

/* ---- limiters ------------------------------------------------------------------------------------ */

/** An adaptive limiter (num_batch_threads 0) with these bounds and batches_to_average_over = window. */
struct bat_limiter *limiter_adaptive(uint32_t min, uint32_t initial, uint32_t max, uint32_t window);

/** One batch through the limiter: taken (the limit is >= 1 with none in flight) and given back. */
void one_batch(struct bat_limiter *lim, uint64_t latency_us);

#endif /* BW_TEST_BAT_H */
