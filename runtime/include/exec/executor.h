/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The multi-worker executor: runs one model's batches on a set of workers, several batches and
 * several independent branches of one batch at a time, with no lock, no system call and no
 * allocation after rt_executor_create. DPDK-free: workers are whatever calls rt_executor_work (a
 * worker lcore's loop in the daemon, a pthread in tests, the polling core itself with one worker).
 *
 *   owner (one thread: the polling core)            workers (any threads, each its own index)
 *   rt_executor_submit(batch) -- ready steps -->     rt_executor_work(w): pop a step, run it,
 *                                                    release its consumers; the batch's last step
 *   rt_executor_poll(done) <-- completions ---       scatters the outputs and completes it
 *
 * submit and poll belong to one thread, the owner: the slots a batch takes are the owner's to hand
 * out and take back, and completions come back to it (a daemon with several polling cores feeding a
 * model gives each its own executor). Each batch completes exactly once, whatever its kernels do.
 * docs/runtime.md has the design: queues, atomics and memory orders.
 */
#ifndef BW_RT_EXECUTOR_H
#define BW_RT_EXECUTOR_H

#include <stddef.h>
#include <stdint.h>

#include <batchwire/batch.h>
#include <batchwire/status.h>

#include "graph.h"

#define RT_EXECUTOR_WORKERS_MAX 64
#define RT_EXECUTOR_SLOTS_MAX 1024     /* per batch size */
#define RT_EXECUTOR_WORK_BURST 4        /* steps one rt_executor_work call runs at most */
#define RT_EXECUTOR_MSG_MAX (2 * RT_ERR_MAX) /* a completion message: the node, then the kernel's */

struct rt_executor;
struct rt_plan;

/* A finished batch reaches the owner's poller as a struct bw_completion (batchwire/batch.h): status
 * INTERNAL and msg "node NAME (OP): the kernel's message" when a step failed. */
typedef void (*rt_executor_done_fn)(void *ctx, struct bw_batch *batch, enum bw_status status, const char *msg);

/**
 * Creates an executor for a graph: one plan per batch size (concurrent layout), nb_slots arenas per
 * batch size, one scratch region per worker, the work queue and the completion queue, all allocated
 * now. The graph's inputs and outputs are the batch's tensors (at most BW_BATCH_TENSORS_MAX each),
 * each split into padded rows: its bytes must divide by every batch size.
 * \param batch_sizes  the padded sizes batches come in (each > 0, all different)
 * \param nb_workers   workers that will call rt_executor_work, indices 0..nb_workers-1
 * \param nb_slots     batches of one size that can be in flight at once (each has its own arena)
 * \param err          one line: the plan's error for a batch size, or what is wrong with the arguments
 * \return the executor, or NULL with errno: EINVAL (the arguments, or a batch size the graph cannot be
 *         planned at: the plan's own errno), E2BIG (a work queue too large), ENOMEM.
 */
struct rt_executor *rt_executor_create(const struct rt_graph *g, const int64_t *batch_sizes, unsigned int nb_sizes,
				       unsigned int nb_workers, unsigned int nb_slots, char *err, size_t cap);

/**
 * rt_executor_create with values of the graph inputs known at plan time, as rt_plan_create_known
 * (the conformance runner; every batch must then carry those values).
 */
struct rt_executor *rt_executor_create_known(const struct rt_graph *g, const struct rt_tensor *known,
					     const int64_t *batch_sizes, unsigned int nb_sizes, unsigned int nb_workers,
					     unsigned int nb_slots, char *err, size_t cap);

/**
 * rt_executor_create_known where some batch sizes run depth first: chunk_rows[i] (0, or a divisor
 * of batch_sizes[i] smaller than it; NULL: none) rows at a time through a plan of that many rows,
 * one chunk after the other in the slot's one arena, the batch's inputs gathered into and its
 * outputs scattered from staging of its whole size (rt_plan_run_chunks' reasoning: plan.h). The
 * worker that finishes a chunk's last step moves its outputs out, the next chunk's inputs in and
 * queues its first steps; a chunk that fails fails the batch. rt_plan_chunk_choose says which sizes
 * gain.
 */
struct rt_executor *rt_executor_create_chunked(const struct rt_graph *g, const struct rt_tensor *known,
					       const int64_t *batch_sizes, const int64_t *chunk_rows, unsigned int nb_sizes,
					       unsigned int nb_workers, unsigned int nb_slots, char *err, size_t cap);

/** Frees everything. The workers must have stopped; batches still in flight are not completed. */
void rt_executor_destroy(struct rt_executor *ex);

/**
 * Starts a batch (owner only): takes a free slot of the plan for batch->padded_size, gathers and pads
 * each graph input i from segment i of every task into the slot's arena (bw_batch_gather), seeds the
 * slot's pending counts and queues the steps that wait for nothing. No lock, system call or
 * allocation.
 * \return 0 (the batch will complete through rt_executor_poll, once), -EINVAL when no plan has that
 *         padded size or the batch does not fit it (tensor counts, rows, segment lengths), -EBUSY
 *         when every slot of that size is in flight.
 */
int rt_executor_submit(struct rt_executor *ex, struct bw_batch *batch);

/**
 * A worker's turn: pops ready steps (at most RT_EXECUTOR_WORK_BURST) and runs each with the worker's
 * scratch, or, when one of its inputs is an error value, skips it and makes its outputs errors too;
 * either way it releases the steps waiting for it. The worker that finishes a batch's last step
 * scatters its valid outputs to the tasks and queues the completion.
 * \param worker  0..nb_workers-1; no two threads may use the same index at once
 * \return the steps it ran or skipped (0: idle).
 */
unsigned int rt_executor_work(struct rt_executor *ex, unsigned int worker);

/**
 * The owner's completion poller: calls done once per finished batch (at most max), then frees the
 * batch's slot. The message is valid during the call only.
 * \return the batches completed.
 */
unsigned int rt_executor_poll(struct rt_executor *ex, rt_executor_done_fn done, void *ctx, unsigned int max);

/** rt_executor_poll with the whole completion, per-output validity included. */
unsigned int rt_executor_poll_completions(struct rt_executor *ex, bw_completion_fn fn, void *ctx,
					  unsigned int max);

/** Batches submitted and not yet polled (owner only). */
unsigned int rt_executor_in_flight(const struct rt_executor *ex);

/** The plan of one batch size (read-only: shapes, stats; of its chunk rows when it runs in chunks), or NULL. */
const struct rt_plan *rt_executor_plan(const struct rt_executor *ex, int64_t batch_size);
/** Rows a batch of batch_size runs at a time: batch_size when whole, 0 for a size it does not have. */
int64_t rt_executor_chunk_rows(const struct rt_executor *ex, int64_t batch_size);

/* Counters, summed over the workers (each worker writes its own; reads may lag a little). */
struct rt_executor_stats {
	uint64_t steps_run;       /* kernels run, failed ones included */
	uint64_t steps_failed;    /* kernels that returned an error */
	uint64_t steps_skipped;   /* not run: an input was an error value */
	uint64_t batches_done;    /* completions queued */
	uint64_t batches_failed;  /* of those, not OK */
};

void rt_executor_stats(const struct rt_executor *ex, struct rt_executor_stats *st);

#endif /* BW_RT_EXECUTOR_H */
