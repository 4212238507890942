/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * batching: TensorFlow's BatchFunction semantics (and its AdaptiveSharedBatchScheduler's in-flight
 * limit) on one polling core. A bat_queue batches the requests of one model that arrive on one core;
 * its windows are timed by the caller's clock (the TSC in the daemon, a scripted one in tests), so
 * there are no threads, timers, locks or system calls, and nothing is allocated after creation.
 * It knows no packets and no models: requests are rows in memory, models are a struct bw_executor.
 * docs/batching.md explains every option and rule.
 */
#ifndef BW_BATCHING_H
#define BW_BATCHING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <batchwire/batch.h>
#include <batchwire/hist.h>
#include <batchwire/status.h>

#define BAT_BATCH_SIZE_MAX 1024        /* largest batch batchwire runs */
#define BAT_ALLOWED_SIZES_MAX 32
#define BAT_PRIORITY_LEVELS_MAX 8
#define BAT_ENQUEUED_BATCHES_MAX 4096
#define BAT_INFLIGHT_MAX 1024
#define BAT_STEP_MAX (1.0 / 8)         /* adaptive step bounds, as TensorFlow's */
#define BAT_STEP_MIN (1.0 / 128)
#define BAT_SLO_EWMA_WEIGHT 0.125      /* weight of the newest compute time in its size's average */
#define BAT_DEADLINE_GUARD_US 10       /* a window closes this long before its most urgent deadline */

/* Options of one model's batching, named as TensorFlow names them (docs/batching.md). */
struct bat_options {
	int32_t num_batch_threads;        /* > 0: at most this many batches in flight; <= 0: adaptive */
	uint32_t max_batch_size;
	uint32_t batch_timeout_micros;
	uint32_t max_enqueued_batches;
	uint16_t num_allowed_batch_sizes; /* 0: every size 1..max_batch_size, no padding */
	uint32_t allowed_batch_sizes[BAT_ALLOWED_SIZES_MAX];
	bool enable_large_batch_splitting;
	uint32_t max_execution_batch_size; /* 0: derived (last allowed size, else max_batch_size) */
	/* adaptive in-flight limit (used when num_batch_threads <= 0) */
	uint32_t min_inflight_batches;
	uint32_t initial_inflight_batches;
	uint32_t max_inflight_batches;
	uint32_t batches_to_average_over;
	/* queue policy */
	uint64_t default_timeout_micros;  /* 0: no deadline unless the request brings one */
	uint16_t priority_levels;
	uint32_t max_queue_size;          /* tasks waiting on one core; 0: only max_enqueued_batches */
	/* extensions, off by default */
	uint32_t slo_micros;
	bool dispatch_when_idle;
};

/** TensorFlow's defaults as batchwire applies them (docs/batching.md). */
void bat_options_defaults(struct bat_options *opts);

/**
 * Sets one option from text ("max_batch_size", "32"; "allowed_batch_sizes", "8,16,32").
 * \return 0, or -EINVAL with one line in msg naming the option, the value and what is accepted.
 */
int bat_option_set(struct bat_options *opts, const char *key, const char *value, char *msg, size_t cap);

/**
 * Derives what TensorFlow derives (adaptive mode, the execution batch size) and validates the whole.
 * \return 0, or -EINVAL with msg naming the option at fault.
 */
int bat_options_finalize(struct bat_options *opts, char *msg, size_t cap);

/** Capacity of one batch: max_execution_batch_size with splitting, else max_batch_size. */
uint32_t bat_options_batch_capacity(const struct bat_options *opts);

/** Smallest allowed size >= size (size itself when no sizes are given). */
uint32_t bat_options_padded_size(const struct bat_options *opts, uint32_t size);

/* ---- the in-flight limit of one executor, shared by every core that feeds it ------------------- */

struct bat_limiter;

/** \return a limiter per finalized opts (fixed at num_batch_threads, or adaptive), or NULL. */
struct bat_limiter *bat_limiter_create(const struct bat_options *opts);
void bat_limiter_destroy(struct bat_limiter *lim);

/**
 * Takes an in-flight slot when in_flight < limit; with a fractional headroom h = limit - in_flight
 * below 1, with probability h (rng: the caller's own xorshift state, so cores never share one).
 */
bool bat_limiter_try_acquire(struct bat_limiter *lim, uint64_t *rng);

/** Gives a slot back; latency_us (batch creation to completion) feeds the adaptive rule. */
void bat_limiter_release(struct bat_limiter *lim, uint64_t latency_us);

double bat_limiter_limit(const struct bat_limiter *lim);
uint32_t bat_limiter_in_flight(const struct bat_limiter *lim);

/* ---- one model's batcher on one polling core ------------------------------------------------- */

/* A request as its owner submits it. Taken from the queue's pool with bat_job_alloc. */
struct bat_job {
	uint32_t rows;          /* the request's batch dimension */
	uint8_t priority;       /* 0 is the most urgent */
	uint64_t arrival_tsc;
	uint64_t deadline_tsc;  /* 0: none of its own (default_timeout_micros applies) */
	uint16_t num_inputs;
	uint16_t num_outputs;
	struct bw_segment inputs[BW_BATCH_TENSORS_MAX];  /* all rows of each input */
	struct bw_segment outputs[BW_BATCH_TENSORS_MAX]; /* room for all rows of each output */
	void *owner[3];         /* the owner's (the daemon keeps the mbuf, the protocol header, the message) */
	uint32_t version;       /* the owner's tag (the daemon: the model version the request was admitted
				 * to): a batch holds jobs of one version only (bw_batch.version) */
	bool version_pinned;    /* the request named that version: its batch may not run on another */
	/* the batcher's */
	uint32_t pieces_pending;
	uint16_t status;
	uint16_t pieces;
};

/** Called once per job, on the polling lcore, when its last piece completes (or expires). */
typedef void (*bat_job_done_fn)(void *ctx, struct bat_job *job, enum bw_status status);

/* Counters of one queue: plain integers written by its lcore only. */
struct bat_stats {
	uint64_t jobs;                         /* accepted */
	uint64_t jobs_done;
	uint64_t rejected_full;                /* UNAVAILABLE: queue full */
	uint64_t rejected_too_large;           /* INVALID_ARGUMENT: larger than max_batch_size */
	uint64_t splits;                       /* jobs cut into more than one piece */
	uint64_t deadline_expired;             /* pieces that expired before dispatch */
	uint64_t batches;                      /* dispatched */
	uint64_t batches_failed;               /* completed with an error status */
	uint64_t rows;                         /* real rows dispatched */
	uint64_t padding_rows;
	uint64_t window_wait_us;               /* sum over batches of window open to dispatch */
	uint64_t dispatch[BW_DISPATCH_COUNT];  /* batches by reason */
	uint64_t by_size[BAT_BATCH_SIZE_MAX + 1]; /* batches by padded size */
	/* distributions, in µs of the caller's clock but batch_rows */
	struct bw_hist window_us;              /* per batch: its window opened -> dispatched */
	struct bw_hist queue_us;               /* per batch: dispatched -> the executor started it */
	struct bw_hist compute_us;             /* per batch: started -> complete on this lcore */
	struct bw_hist latency_us;             /* per request: arrival -> answered (its reply to TX) */
	struct bw_hist batch_rows;             /* per batch: real rows (padding left out) */
};

struct bat_queue;

/**
 * Creates a queue for finalized opts, with every task, job and batch it can ever hold allocated now.
 * \param tsc_hz  ticks per second of the clock the caller passes as now
 * \return the queue, or NULL (invalid arguments or out of memory).
 */
struct bat_queue *bat_queue_create(const struct bat_options *opts, struct bat_limiter *limiter,
				   const struct bw_executor *executor, bat_job_done_fn done, void *done_ctx,
				   uint64_t tsc_hz, uint64_t rng_seed);
void bat_queue_destroy(struct bat_queue *q);

/** \return a blank job from the pool, or NULL when every job is in use. */
struct bat_job *bat_job_alloc(struct bat_queue *q);

/**
 * Queues a job filled by its owner. \return 0 (done() will be called once, later), or the status it
 * completes with at once (UNAVAILABLE: queue full; INVALID_ARGUMENT: too large, bad priority or no
 * rows), in which case done() is not called and the job is back in the pool.
 */
enum bw_status bat_submit(struct bat_queue *q, struct bat_job *job, uint64_t now);

/**
 * The window poller: expires tasks past their deadline, closes windows whose time has come and
 * dispatches closed batches while the executor's in-flight limit allows.
 * \return the number of things it did (0: idle).
 */
unsigned int bat_poll(struct bat_queue *q, uint64_t now);

/**
 * Completes a batch on its owning lcore: every task (every piece) gets the status exactly once; a
 * job's done() runs after its last piece, with its first error or OK. Feeds the adaptive limit and
 * the per-size compute-time average.
 */
void bat_batch_complete(struct bw_batch *batch, enum bw_status status, uint64_t now);

/** Shutdown: closes every open window (reason DRAIN); bat_poll then dispatches them. */
void bat_queue_drain(struct bat_queue *q);

/** \return true when nothing is queued or in flight. */
bool bat_queue_empty(const struct bat_queue *q);

const struct bat_stats *bat_queue_stats(const struct bat_queue *q);
const struct bat_options *bat_queue_options(const struct bat_queue *q);

#endif /* BW_BATCHING_H */
