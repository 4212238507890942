/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Depth-first batches (plan.h): a batch of B rows run as B / s runs of a plan of s rows, one after
 * the other, so that a batch's tensors are never larger than a chunk's. Once a batch holds more
 * than a few rows, a model's intermediate tensors outgrow the core's L2 (a transformer's [B * 128,
 * 384] activations are 6 MiB at B = 32) and the ops between its GEMMs, then the GEMMs' packing,
 * wait for memory; a chunk's stay close. It is correct because rows are independent: the batcher's
 * own contract (padding rows, requests split across batches) relies on it.
 *
 * Whether it pays depends on the model and the CPU (a GEMM at 128 rows may run slower per row than
 * at 1024), so rt_plan_chunk_choose measures: the whole plan against each candidate, on the same
 * generated inputs, the fastest of a few runs each after a warm-up, at load.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "defs.h"

#define CHUNK_IO_MAX 64 /* graph inputs, and outputs, a chunked run handles (bwrun's limit) */

static size_t rt_tensor_nbytes(const struct rt_tensor *t)
{
	int64_t elems = rt_tensor_elems(t);

	return elems > 0 ? (size_t)elems * rt_dtype_size(t->dtype) : 0;
}

/* Bytes of one row of each graph input and output of p (p->batch rows). */
static void row_bytes(const struct rt_plan *p, const struct rt_tensor *in, const struct rt_tensor *out, size_t *in_row,
		      size_t *out_row)
{
	int64_t rows = p->batch > 0 ? p->batch : 1;

	for (uint32_t i = 0; i < p->graph->num_inputs; i++)
		in_row[i] = rt_tensor_nbytes(&in[i]) / (size_t)rows;
	for (uint32_t o = 0; o < p->graph->num_outputs; o++)
		out_row[o] = rt_tensor_nbytes(&out[o]) / (size_t)rows;
}

int rt_plan_run_chunks(const struct rt_plan *p, void *arena, int64_t batch, const struct rt_tensor *inputs,
		       const struct rt_tensor *outputs, char *err, size_t cap)
{
	const struct rt_graph *g = p->graph;
	struct rt_tensor in[CHUNK_IO_MAX], out[CHUNK_IO_MAX];
	size_t in_row[CHUNK_IO_MAX], out_row[CHUNK_IO_MAX];
	int64_t chunk = p->batch;
	int rc;

	if (unlikely(chunk <= 0 || batch <= 0 || batch % chunk != 0 || g->num_inputs > CHUNK_IO_MAX ||
		     g->num_outputs > CHUNK_IO_MAX))
		return bw_err(err, cap, -EINVAL, "a batch of %" PRId64 " rows does not split into chunks of %" PRId64,
			      batch, chunk);
	rt_plan_bind(p, arena, in, out);
	row_bytes(p, in, out, in_row, out_row);
	for (int64_t c = 0; c < batch / chunk; c++) {
		for (uint32_t i = 0; i < g->num_inputs; i++)
			memcpy(in[i].data, (const uint8_t *)inputs[i].data + (size_t)c * chunk * in_row[i],
			       (size_t)chunk * in_row[i]);
		rc = rt_plan_run(p, arena, err, cap);
		if (unlikely(rc != 0))
			return rc;
		for (uint32_t o = 0; o < g->num_outputs; o++)
			memcpy((uint8_t *)outputs[o].data + (size_t)c * chunk * out_row[o], out[o].data,
			       (size_t)chunk * out_row[o]);
	}
	return 0;
}

/* ---- choosing ------------------------------------------------------------------------------------- */

static double now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

/* A plan of rows rows, its arena, and the full batch's inputs and outputs it is timed on. */
struct trial {
	struct rt_plan *plan;
	void *arena;
};

/* The arena of t's plan (t->plan freed when there is no memory for it). */
static int trial_arena(struct trial *t, char *err, size_t cap)
{
	t->arena = rt_exec_zalloc(rt_plan_arena_bytes(t->plan));
	if (t->arena == NULL) {
		size_t bytes = rt_plan_arena_bytes(t->plan);

		rt_plan_free(t->plan);
		t->plan = NULL;
		return bw_err(err, cap, -ENOMEM, "out of memory for an arena of %zu bytes", bytes);
	}
	return 0;
}

static int trial_make(const struct rt_graph *g, int64_t rows, struct trial *t, char *err, size_t cap)
{
	t->plan = rt_plan_create(g, rows, RT_DEVICE_CPU, err, cap);
	if (t->plan == NULL)
		return -EINVAL;
	return trial_arena(t, err, cap);
}

static void trial_free(struct trial *t)
{
	rt_plan_free(t->plan);
	free(t->arena);
	*t = (struct trial){ 0 };
}

/* Floats in [-1, 1), the rest zero bytes (a valid index into any table, a mask of nothing). */
static void inputs_fill(struct rt_tensor *in, uint32_t n)
{
	uint32_t x = 12345;

	for (uint32_t i = 0; i < n; i++) {
		size_t bytes = rt_tensor_nbytes(&in[i]);

		memset(in[i].data, 0, bytes);
		if (in[i].dtype != BW_DTYPE_FLOAT)
			continue;
		for (size_t e = 0; e < bytes / sizeof(float); e++) {
			x = x * 1664525u + 1013904223u;
			((float *)in[i].data)[e] = (float)(x >> 8) / (float)(1u << 23) - 1.0f;
		}
	}
}

#define TRIAL_US 50000.0 /* a candidate runs again until this much has been timed, */
#define TRIAL_RUNS_MAX 64 /* or this many times: the fastest run counts (a shared machine's noise is
			   * all upward), and one run of a large batch is enough */

/* The fastest of a few runs of the batch through t (in chunks when t's plan has fewer rows), after a
 * warm-up run. */
static int trial_time(struct trial *t, int64_t batch, const struct rt_tensor *in, const struct rt_tensor *out,
		      double *us, char *err, size_t cap)
{
	double timed = 0, best = 0;
	int rc = rt_plan_run_chunks(t->plan, t->arena, batch, in, out, err, cap);

	for (int run = 0; rc == 0 && run < TRIAL_RUNS_MAX && timed < TRIAL_US; run++) {
		double start = now_us(), dt;

		rc = rt_plan_run_chunks(t->plan, t->arena, batch, in, out, err, cap);
		dt = now_us() - start;
		timed += dt;
		best = run == 0 || dt < best ? dt : best;
	}
	*us = best;
	return rc;
}

#define CHUNK_CANDIDATES_MAX 16 /* whole and the chunk sizes timed, at most */

/* A new plan of rows rows timed on the batch (rows == batch: the whole plan). */
static int rows_time(const struct rt_graph *g, int64_t rows, int64_t batch, const struct rt_tensor *in,
		     const struct rt_tensor *out, double *us, char *err, size_t cap)
{
	struct trial t = { 0 };
	int rc = trial_make(g, rows, &t, err, cap);

	if (rc == 0)
		rc = trial_time(&t, batch, in, out, us, err, cap);
	trial_free(&t);
	return rc;
}

/* rt_plan_chunk_choose, nothing timed when the whole plan's arena is at most arena_min bytes. */
static int64_t chunk_choose(const struct rt_graph *g, int64_t batch, const int64_t *candidates, unsigned int nb,
			    size_t arena_min, char *report, size_t report_cap, char *err, size_t cap)
{
	struct rt_tensor in[CHUNK_IO_MAX], out[CHUNK_IO_MAX];
	struct trial whole = { 0 };
	int64_t best = batch, rows[CHUNK_CANDIDATES_MAX];
	double us[CHUNK_CANDIDATES_MAX], best_us = 0, near;
	unsigned int nb_timed = 0, fastest = 0, close = 0;
	size_t off;
	int rc;

	if (report_cap > 0)
		report[0] = '\0';
	if (g->num_inputs > CHUNK_IO_MAX || g->num_outputs > CHUNK_IO_MAX)
		return bw_err(err, cap, -EINVAL, "more graph inputs or outputs than %d", CHUNK_IO_MAX);
	whole.plan = rt_plan_create(g, batch, RT_DEVICE_CPU, err, cap);
	if (whole.plan == NULL)
		return -EINVAL;
	if (rt_plan_arena_bytes(whole.plan) <= arena_min) {
		snprintf(report, report_cap, "batch %" PRId64 ": whole (its arena of %zu KiB is at most %zu KiB: not timed)",
			 batch, rt_plan_arena_bytes(whole.plan) >> 10, arena_min >> 10);
		trial_free(&whole);
		return batch;
	}
	rc = trial_arena(&whole, err, cap);
	if (rc != 0)
		return rc;
	/* the whole plan's own inputs and outputs hold the batch: the candidates read and write them */
	rt_plan_bind(whole.plan, whole.arena, in, out);
	inputs_fill(in, g->num_inputs);
	/* its outputs' bytes may be reused for its inputs: the chunks' results go to copies */
	struct rt_tensor in_copy[CHUNK_IO_MAX], out_copy[CHUNK_IO_MAX];
	void *bufs[2 * CHUNK_IO_MAX] = { NULL };
	unsigned int nb_bufs = 0;

	for (uint32_t i = 0; i < g->num_inputs; i++) {
		in_copy[i] = in[i];
		in_copy[i].data = bufs[nb_bufs++] = rt_exec_zalloc(rt_align_up(rt_tensor_nbytes(&in[i])));
		if (in_copy[i].data == NULL)
			goto oom;
		memcpy(in_copy[i].data, in[i].data, rt_tensor_nbytes(&in[i]));
	}
	for (uint32_t o = 0; o < g->num_outputs; o++) {
		out_copy[o] = out[o];
		out_copy[o].data = bufs[nb_bufs++] = rt_exec_zalloc(rt_align_up(rt_tensor_nbytes(&out[o])));
		if (out_copy[o].data == NULL)
			goto oom;
	}
	rc = trial_time(&whole, batch, in_copy, out_copy, &us[0], err, cap);
	trial_free(&whole);
	if (rc != 0)
		goto done;
	rows[0] = batch;
	nb_timed = 1;
	off = (size_t)snprintf(report, report_cap, "batch %" PRId64 ": whole %.0f us", batch, us[0]);
	for (unsigned int k = 0; k < nb && nb_timed < CHUNK_CANDIDATES_MAX; k++) {
		if (candidates[k] <= 0 || candidates[k] >= batch || batch % candidates[k] != 0)
			continue;
		rows[nb_timed] = candidates[k];
		rc = rows_time(g, candidates[k], batch, in_copy, out_copy, &us[nb_timed], err, cap);
		if (rc != 0)
			goto done;
		if (off < report_cap)
			off += (size_t)snprintf(report + off, report_cap - off, ", chunks of %" PRId64 " %.0f us",
						candidates[k], us[nb_timed]);
		nb_timed++;
	}
	/*
	 * A large batch's trial is one run, with one run's noise: where whole and another size are
	 * within 3 % of the fastest, every size that close runs once more and keeps its faster time.
	 * ResNet-50 in fp32 at a batch of 32 on a Sapphire Rapids core ran 3-7 % faster in chunks of 2
	 * to 8, yet one load in three kept whole on single runs (whole 1506 ms, chunks of 2 1473 ms).
	 */
	for (unsigned int k = 0; k < nb_timed; k++)
		fastest = us[k] < us[fastest] ? k : fastest;
	near = us[fastest] * 1.03;
	for (unsigned int k = 0; k < nb_timed; k++)
		close += us[k] <= near;
	for (unsigned int k = 0; k < nb_timed && close > 1 && us[0] <= near; k++) {
		double again;

		if (us[k] > near)
			continue;
		rc = rows_time(g, rows[k], batch, in_copy, out_copy, &again, err, cap);
		if (rc != 0)
			goto done;
		if (off < report_cap && k == 0)
			off += (size_t)snprintf(report + off, report_cap - off, "; again: whole %.0f us", again);
		else if (off < report_cap)
			off += (size_t)snprintf(report + off, report_cap - off, ", chunks of %" PRId64 " %.0f us", rows[k],
						again);
		us[k] = again < us[k] ? again : us[k];
	}
	/* a chunked run must still win, if only by 1 %: whole is simpler */
	for (unsigned int k = 1; k < nb_timed; k++) {
		if (us[k] < us[0] * 0.99 && (best == batch || us[k] < best_us)) {
			best = rows[k];
			best_us = us[k];
		}
	}
	if (off < report_cap)
		snprintf(report + off, report_cap - off, ": %s", best == batch ? "whole" : "chunks");
	rc = 0;
done:
	for (unsigned int b = 0; b < nb_bufs; b++)
		free(bufs[b]);
	return rc != 0 ? rc : best;
oom:
	trial_free(&whole);
	rc = bw_err(err, cap, -ENOMEM, "out of memory for the batch's inputs and outputs");
	goto done;
}

int64_t rt_plan_chunk_choose(const struct rt_graph *g, int64_t batch, const int64_t *candidates, unsigned int nb,
			     char *report, size_t report_cap, char *err, size_t cap)
{
	return chunk_choose(g, batch, candidates, nb, 0, report, report_cap, err, cap);
}

int64_t rt_plan_chunk_auto(const struct rt_graph *g, int64_t batch, char *report, size_t report_cap, char *err,
			   size_t cap)
{
	static const int64_t candidates[] = { 1, 2, 4, 8 };

	if (report_cap > 0)
		report[0] = '\0';
	if (batch <= 1)
		return batch;
	/* the whole plan is made once: its arena decides whether anything is timed */
	return chunk_choose(g, batch, candidates, sizeof(candidates) / sizeof(candidates[0]), RT_PLAN_CHUNK_ARENA_MIN,
			    report, report_cap, err, cap);
}
