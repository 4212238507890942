/* SPDX-License-Identifier: BSD-3-Clause */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rte_lcore.h>
#include <rte_malloc.h>
#include <rte_mempool.h>
#include <rte_pause.h>
#include <rte_ring.h>
#include <rte_ring_elem.h>
#include <rte_telemetry.h>

#include "exec/executor.h"
#include "exec/plan.h"
#include "graph.h"
#include "host.h"
#include "service.h"

#define APP_SUBMIT_BURST 8      /* batches an owner worker takes from its submit ring per turn */
#define APP_COMPLETION_BURST 32 /* completions a poller hands on per turn */
#define APP_FAIL_LOG_EVERY 1024 /* after the first 10, one failed batch in this many is logged */
/* GPU batches in flight this long with none finishing: ask the device whether it is still there (a
 * lost CUDA context fails no call until one is made). Only then: the question is not free. */
#define APP_GPU_HEALTH_CHECK_US 100000
#define APP_GPU_STREAM_WORDS 1  /* the executor's graphs write their own words; the stream needs none */

/* A finished batch on its way from a model's owner worker back to the lcore that submitted it. */
struct app_completion {
	struct bw_batch *batch;
	uint32_t status;
	uint32_t valid_outputs;
};

/* Counters of a model's executor side: written by its owner worker only (device gpu: one set per
 * polling lcore, written by that lcore), read by telemetry. */
struct app_exec_stats {
	uint64_t batches_started;
	uint64_t batches_done;
	uint64_t batches_failed;
	uint64_t queue_wait_us;  /* sum over batches: dispatched by the batcher -> started by the owner */
	uint64_t compute_us;     /* sum over batches: started -> completion seen by the owner */
	uint64_t busy_waits;     /* every slot of a batch's size was in flight: it waited its turn */
};

/* One worker lcore's part of a model: which worker index it is. */
struct app_worker {
	struct app_model *model;
	unsigned int index;
};

/* One model as served. Read-only after init except where marked. */
struct app_model {
	struct rt_model spec;           /* registered; MODEL_INFO describes it */
	struct app_model_config cfg;
	struct bat_limiter *limiter;    /* in-flight limit shared by every polling lcore */
	/* ONNX on the GPU: the program, compiled and loaded once; each polling lcore has its executor */
	struct gpu_compiled *gpu_compiled;
	struct gpu_loaded *gpu_loaded;
	/* ONNX on the CPU */
	struct rt_executor *executor;
	struct rte_ring *submit_ring;   /* MP: polling lcores; SC: the owner worker */
	unsigned int ring_size;         /* of the submit and the completion rings: > every batch in flight */
	uint32_t reply_desc_bytes;      /* output descriptors with their names, as every reply has them */
	uint32_t output_row_bytes;      /* all outputs of one row */
	struct app_worker workers[APP_MODEL_WORKERS_MAX];
	char poller_name[APP_MODEL_NAME_MAX + 8];
	/* the owner worker's */
	struct bw_batch *stash __rte_cache_aligned; /* refused for want of a slot: started first next turn */
	struct app_exec_stats stats;
} __rte_cache_aligned;

/* One model on one polling lcore. */
struct app_channel {
	struct app_lcore *lcore;
	struct app_model *model;
	struct bat_queue *queue;
	struct rte_ring *completions;   /* ONNX on the CPU: SP from the owner worker, SC by this lcore */
	struct gpu_executor *gpu;       /* ONNX on the GPU: made on this lcore's thread (app_service_lcore_start) */
	struct app_exec_stats gpu_stats;
};

/* A batch finished on its polling lcore without leaving it (echo, a GPU launch that failed). */
struct app_deferred {
	struct bw_batch *batch;
	enum bw_status status;
};

/* One polling lcore's part of the service: written only by that lcore (telemetry reads stats). */
struct app_lcore {
	struct dp_lcore *dp;
	unsigned int nb_channels;
	struct app_channel channels[APP_MODELS_MAX]; /* index: the model's id */
	/* batches finished at submit, waiting for the completion poller: SP/SC on one lcore */
	struct app_deferred deferred[APP_DEFERRED_MAX];
	uint32_t deferred_head;
	uint32_t deferred_count;
	/* the GPU, when a model of this lcore runs on it */
	struct gpu_stream *gpu_stream;
	uint64_t now_tsc;               /* the completion poller's clock, for the GPU executor's callbacks */
	uint64_t gpu_progress_tsc;      /* last GPU completion, or last health check */
	uint64_t gpu_health_checks;
} __rte_cache_aligned;

/*
 * The device the models with device = gpu run on, opened at init before any lcore runs; hd.ops NULL
 * when no model does. The first lcore to see a sticky error marks it lost: its models answer
 * UNAVAILABLE from then on, and each lcore fails its own batches in flight.
 */
struct app_gpu {
	struct gpu_host_device hd;
	unsigned int nb_regions;
	void *regions[GPU_REGIONS_MAX]; /* host memory registered with it (the mbuf pools) */
	uint64_t registered_bytes;
	uint32_t lost;                  /* 0 healthy, 1 being marked, 2 lost (lost_why written) */
	char lost_why[GPU_ERR_MAX];
};

static struct app_lcore g_lcores[RTE_MAX_LCORE];
static struct app_service *g_service;
static struct app_gpu g_gpu;

/* (hot) \return true once the GPU was found unhealthy: a plain load. */
static inline bool gpu_lost(void)
{
	return __atomic_load_n(&g_gpu.lost, __ATOMIC_RELAXED) != 0;
}

static const char *gpu_lost_why(void)
{
	return __atomic_load_n(&g_gpu.lost, __ATOMIC_ACQUIRE) == 2 ? g_gpu.lost_why : "";
}

/* The cold path: the first lcore to see it says why; the others see the flag. */
static void gpu_mark_lost(const char *why)
{
	uint32_t healthy = 0;

	if (!__atomic_compare_exchange_n(&g_gpu.lost, &healthy, 1, false, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
		return;
	snprintf(g_gpu.lost_why, sizeof(g_gpu.lost_why), "%s", why);
	__atomic_store_n(&g_gpu.lost, 2, __ATOMIC_RELEASE);
	PLAT_LOG(ERR, app, "GPU %d (%s) is unhealthy: %s; the models on it answer UNAVAILABLE from now on",
		 g_gpu.hd.index, g_gpu.hd.info.name, why);
}

/* Off the hot path (a failed launch, a stall): asks the device and marks it lost when it is. */
static void gpu_health_check(void)
{
	char why[GPU_ERR_MAX];

	if (g_gpu.hd.ops->health(g_gpu.hd.dev, why, sizeof(why)) != 0)
		gpu_mark_lost(why);
}

/* ---- the dataplane's view ----------------------------------------------------------------------- */

static const void *service_lookup(void *ctx, uint32_t id, const char *name, uint32_t name_len)
{
	const struct rt_registry *reg = ctx;

	if (id == BW_MODEL_ID_ANY)
		return rt_registry_find_name(reg, name, name_len);
	return rt_registry_find_id(reg, id);
}

static uint32_t service_priority_levels(const void *model)
{
	return ((const struct rt_model *)model)->priority_levels;
}

static int service_describe(const void *model, uint8_t *buf, uint32_t cap)
{
	return rt_model_describe(model, buf, cap);
}

/* Echo: any tensors, the first dimension of every one is the request's rows. */
static uint32_t echo_request_rows(const struct dp_request *req, char *msg, size_t cap)
{
	uint32_t rows;

	if (req->num_tensors == 0 || req->num_tensors > BW_BATCH_TENSORS_MAX) {
		snprintf(msg, cap, "a batched model takes 1..%u tensors, got %u", BW_BATCH_TENSORS_MAX,
			 req->num_tensors);
		return 0;
	}
	rows = req->tensors[0].desc->rank > 0 ? req->tensors[0].desc->dims[0] : 0;
	for (uint16_t i = 0; i < req->num_tensors; i++) {
		const struct bw_tensor_desc *d = req->tensors[i].desc;
		if (d->rank == 0 || d->dims[0] != rows || rows == 0) {
			snprintf(msg, cap, "tensor %u: a batched model needs the batch dimension first, non-zero and "
				 "equal in every tensor", i);
			return 0;
		}
	}
	return rows;
}

static void shape_format(char *buf, size_t cap, const uint32_t *dims, uint8_t rank, bool batch_as_n)
{
	size_t off = (size_t)snprintf(buf, cap, "[");

	for (uint8_t d = 0; d < rank && off < cap; d++) {
		if (d == 0 && batch_as_n)
			off += (size_t)snprintf(buf + off, cap - off, "N");
		else
			off += (size_t)snprintf(buf + off, cap - off, "%s%u", d > 0 ? "," : "", dims[d]);
	}
	if (off < cap)
		snprintf(buf + off, cap - off, "]");
}

/*
 * ONNX: matches the request's tensors to the model's inputs (by index, or by name when the index is
 * BW_TENSOR_BY_NAME) and checks dtype and shape. \return the rows, or 0 with msg saying why.
 */
static uint32_t onnx_request_bind(const struct rt_model *model, const struct dp_request *req,
				  const struct bw_tensor_view **by_input, char *msg, size_t cap)
{
	uint32_t rows = 0;

	if (req->num_tensors != model->num_inputs) {
		snprintf(msg, cap, "model '%s' takes %u input tensors, got %u", model->name, model->num_inputs,
			 req->num_tensors);
		return 0;
	}
	memset(by_input, 0, model->num_inputs * sizeof(by_input[0]));
	for (uint16_t t = 0; t < req->num_tensors; t++) {
		const struct bw_tensor_view *v = &req->tensors[t];
		const struct bw_tensor_desc *d = v->desc;
		uint16_t i = d->index;

		if (i == BW_TENSOR_BY_NAME) {
			for (i = 0; i < model->num_inputs; i++) {
				if (strlen(model->inputs[i].name) == d->name_len &&
				    memcmp(model->inputs[i].name, v->name, d->name_len) == 0)
					break;
			}
			if (i == model->num_inputs) {
				snprintf(msg, cap, "tensor %u: model '%s' has no input named '%.*s'", t, model->name,
					 (int)RTE_MIN(d->name_len, 64), v->name);
				return 0;
			}
		} else if (i >= model->num_inputs) {
			snprintf(msg, cap, "tensor %u: input index %u out of range: model '%s' has %u inputs", t, i,
				 model->name, model->num_inputs);
			return 0;
		}
		const struct rt_tensor_spec *spec = &model->inputs[i];
		if (by_input[i] != NULL) {
			snprintf(msg, cap, "input '%s' given twice", spec->name);
			return 0;
		}
		by_input[i] = v;
		if (d->dtype != spec->dtype) {
			snprintf(msg, cap, "input '%s': dtype %s, expected %s", spec->name, rt_dtype_name(d->dtype),
				 rt_dtype_name(spec->dtype));
			return 0;
		}
		bool shape_ok = d->rank == spec->rank && d->dims[0] != 0 && (rows == 0 || d->dims[0] == rows);
		for (uint8_t k = 1; shape_ok && k < d->rank; k++)
			shape_ok = d->dims[k] == spec->dims[k];
		if (!shape_ok) {
			char got[96], want[96];
			uint32_t dims[BW_MAX_RANK];

			memcpy(dims, d->dims, sizeof(dims)); /* the descriptor is packed: no pointer into it */
			shape_format(got, sizeof(got), dims, d->rank, false);
			shape_format(want, sizeof(want), spec->dims, spec->rank, true);
			snprintf(msg, cap, "input '%s': shape %s, expected %s with N > 0 rows, the same N in every input",
				 spec->name, got, want);
			return 0;
		}
		rows = d->dims[0];
	}
	return rows;
}

/* A blank job for a request of rows rows and these tensor counts, or NULL with msg saying why. */
static struct bat_job *job_take(struct bat_queue *q, uint32_t rows, uint16_t num_inputs, uint16_t num_outputs,
				char *msg, size_t cap)
{
	struct bat_job *job = bat_job_alloc(q);

	if (job == NULL) {
		snprintf(msg, cap, "no free request slot in this core's batcher");
		return NULL;
	}
	job->rows = rows;
	job->num_inputs = num_inputs;
	job->num_outputs = num_outputs;
	return job;
}

/* Fills what every batched job has and queues it; the caller filled rows and segments. */
static enum bw_status job_submit(struct bat_queue *q, struct bat_job *job, struct dp_request *req, char *msg,
				 size_t cap)
{
	const struct bat_options *opts = bat_queue_options(q);
	enum bw_status status;

	job->priority = req->hdr->priority;
	job->arrival_tsc = req->arrival_tsc;
	job->deadline_tsc = req->hdr->deadline_us != BW_DEADLINE_NONE
				    ? req->arrival_tsc + plat_us_to_tsc(req->hdr->deadline_us) : 0;
	job->owner[0] = req->mbuf;
	job->owner[1] = req->hdr;
	status = bat_submit(q, job, req->arrival_tsc);
	if (status == BW_STATUS_UNAVAILABLE)
		snprintf(msg, cap, "the batch scheduling queue is full (max_enqueued_batches %u, max_queue_size %u)",
			 opts->max_enqueued_batches, opts->max_queue_size);
	else if (status != BW_STATUS_OK)
		snprintf(msg, cap, "batch of %u rows refused: max_batch_size is %u", job->rows, opts->max_batch_size);
	else
		req->held = true;
	return status;
}

static enum bw_status echo_submit(struct app_channel *ch, struct dp_request *req, char *msg, size_t cap)
{
	uint32_t rows = echo_request_rows(req, msg, cap);
	struct bat_job *job;

	if (rows == 0)
		return BW_STATUS_INVALID_ARGUMENT;
	job = job_take(ch->queue, rows, req->num_tensors, req->num_tensors, msg, cap);
	if (job == NULL)
		return BW_STATUS_RESOURCE_EXHAUSTED;
	for (uint16_t i = 0; i < req->num_tensors; i++) {
		/* Echo computes in place: each output is its input, in the request mbuf the reply reuses. */
		struct bw_segment seg = {(uint8_t *)req->tensors[i].data, req->tensors[i].desc->data_len};
		job->inputs[i] = seg;
		job->outputs[i] = seg;
	}
	return job_submit(ch->queue, job, req, msg, cap);
}

/*
 * The outputs are staged in the request's own mbuf past everything the request holds (its body, and
 * the room the reply's descriptors will take), so that no output row lands on an input row a later
 * piece of a split request still has to gather. The reply is then descriptors + the staged bytes,
 * moved down once (onnx_job_done).
 */
static enum bw_status onnx_submit(struct app_channel *ch, struct dp_request *req, uint32_t body_cap, char *msg,
				  size_t cap)
{
	const struct rt_model *model = &ch->model->spec;
	const struct bw_tensor_view *by_input[RT_MODEL_TENSORS_MAX];
	uint32_t rows = onnx_request_bind(model, req, by_input, msg, cap);
	uint32_t stage, per_row = ch->model->output_row_bytes;
	uint64_t out_bytes;
	struct bat_job *job;
	uint8_t *out;

	if (rows == 0)
		return BW_STATUS_INVALID_ARGUMENT;
	stage = bw_pad8(RTE_MAX(req->hdr->body_len, ch->model->reply_desc_bytes));
	out_bytes = (uint64_t)rows * per_row; /* rows come from the wire: no 32-bit overflow */
	if (stage + out_bytes > body_cap) {
		uint32_t room = body_cap > stage ? body_cap - stage : 0;
		snprintf(msg, cap, "the reply to %u rows (%" PRIu64 " bytes of outputs) does not fit one datagram at this "
			 "MTU: send at most %u rows per request (multi-packet requests come later)", rows, out_bytes,
			 room / per_row);
		return BW_STATUS_INVALID_ARGUMENT;
	}
	job = job_take(ch->queue, rows, model->num_inputs, model->num_outputs, msg, cap);
	if (job == NULL)
		return BW_STATUS_RESOURCE_EXHAUSTED;
	for (uint16_t i = 0; i < model->num_inputs; i++)
		job->inputs[i] = (struct bw_segment){(uint8_t *)by_input[i]->data, by_input[i]->desc->data_len};
	out = req->body + stage;
	for (uint16_t o = 0; o < model->num_outputs; o++) {
		uint32_t len = rows * model->output_row_bytes[o];
		job->outputs[o] = (struct bw_segment){out, len};
		out += len;
	}
	return job_submit(ch->queue, job, req, msg, cap);
}

static enum bw_status service_infer(void *ctx __rte_unused, const void *handle, struct dp_request *req,
				    uint32_t body_cap, uint32_t *reply_len, uint16_t *reply_tensors, char *msg,
				    size_t msg_cap)
{
	const struct rt_model *model = handle;
	struct app_channel *ch = &g_lcores[rte_lcore_id()].channels[model->id];

	switch (model->kind) {
	case RT_MODEL_ECHO:
		*reply_len = req->hdr->body_len;
		*reply_tensors = req->num_tensors;
		return echo_submit(ch, req, msg, msg_cap);
	case RT_MODEL_ONNX:
		if (unlikely(ch->gpu != NULL && gpu_lost())) {
			snprintf(msg, msg_cap, "model '%s' is unavailable: its GPU is unhealthy (%s)", model->name,
				 gpu_lost_why());
			return BW_STATUS_UNAVAILABLE;
		}
		return onnx_submit(ch, req, body_cap, msg, msg_cap);
	}
	snprintf(msg, msg_cap, "model '%s' has a kind this server cannot run", model->name);
	return BW_STATUS_INTERNAL;
}

static const char *job_error_message(enum bw_status status)
{
	switch (status) {
	case BW_STATUS_DEADLINE_EXCEEDED:
		return "the request's deadline passed before its batch ran";
	case BW_STATUS_UNAVAILABLE:
		return "the model could not take its batch (its executor was full, or its GPU is unhealthy)";
	case BW_STATUS_INTERNAL:
		return "the model failed on its batch; the server log names the node";
	default:
		return "its batch failed";
	}
}

/* The batcher is done with an echo request: answer it from the mbuf it has held. */
static void echo_job_done(void *ctx, struct bat_job *job, enum bw_status status)
{
	struct app_channel *ch = ctx;
	struct bw_hdr *hdr = job->owner[1];

	/* Echo's outputs are its inputs, already where the reply body goes. */
	dp_request_complete(ch->lcore->dp, job->owner[0], hdr, status, hdr->body_len, hdr->num_tensors,
			    status == BW_STATUS_OK ? NULL : job_error_message(status));
}

/* An ONNX request is done: descriptors at the body, the staged outputs moved right behind them. */
static void onnx_job_done(void *ctx, struct bat_job *job, enum bw_status status)
{
	struct app_channel *ch = ctx;
	const struct rt_model *model = &ch->model->spec;
	struct bw_hdr *hdr = job->owner[1];
	uint8_t *body = (uint8_t *)(hdr + 1), *p = body;
	uint32_t out_bytes = job->rows * ch->model->output_row_bytes;

	if (status != BW_STATUS_OK) {
		dp_request_complete(ch->lcore->dp, job->owner[0], hdr, status, 0, 0, job_error_message(status));
		return;
	}
	/* The staging area starts at or past the end of the descriptors: writing them first is safe. */
	for (uint16_t o = 0; o < model->num_outputs; o++) {
		const struct rt_tensor_spec *spec = &model->outputs[o];
		struct bw_tensor_desc desc = {
			.index = o,
			.dtype = spec->dtype,
			.rank = spec->rank,
			.name_len = (uint16_t)strlen(spec->name),
			.data_len = job->rows * model->output_row_bytes[o],
		};
		uint32_t name_room = bw_pad8(desc.name_len);

		memcpy(desc.dims, spec->dims, sizeof(desc.dims));
		desc.dims[0] = job->rows;
		memcpy(p, &desc, sizeof(desc));
		p += sizeof(desc);
		memcpy(p, spec->name, desc.name_len);
		memset(p + desc.name_len, 0, name_room - desc.name_len);
		p += name_room;
	}
	memmove(p, job->outputs[0].data, out_bytes);
	dp_request_complete(ch->lcore->dp, job->owner[0], hdr, BW_STATUS_OK, (uint32_t)(p - body) + out_bytes,
			    model->num_outputs, NULL);
}

/* ---- executors ---------------------------------------------------------------------------------- */

/* A batch finished at submit completes from the completion poller, never inside submit (the batcher
 * is still dispatching it), as a real executor's would. \return 0, or -ENOBUFS (UNAVAILABLE). */
static int deferred_push(struct app_lcore *al, struct bw_batch *batch, enum bw_status status)
{
	if (al->deferred_count == APP_DEFERRED_MAX)
		return -ENOBUFS;
	al->deferred[(al->deferred_head + al->deferred_count++) % APP_DEFERRED_MAX] =
		(struct app_deferred){batch, status};
	return 0;
}

/* The echo executor: nothing to compute, so a batch is finished as soon as it is submitted. */
static int echo_executor_submit(void *ctx, struct bw_batch *batch)
{
	return deferred_push(ctx, batch, BW_STATUS_OK);
}

/* An ONNX batch leaves its polling lcore for the model's owner worker; the ring says where it returns. */
static int onnx_executor_submit(void *ctx, struct bw_batch *batch)
{
	struct app_channel *ch = ctx;

	batch->exec_route = ch->completions;
	return rte_ring_mp_enqueue(ch->model->submit_ring, batch) == 0 ? 0 : -ENOBUFS;
}

/* Owner worker: hands a completion to the lcore that submitted the batch. */
static void completion_send(struct rte_ring *ring, struct bw_batch *batch, enum bw_status status, uint32_t valid)
{
	struct app_completion c = {batch, (uint32_t)status, valid};

	/* The ring holds more entries than the model can have batches in flight: a full ring is only its
	 * consumer being behind, never a lost completion, so wait for it rather than drop. */
	while (rte_ring_sp_enqueue_elem(ring, &c, sizeof(c)) != 0)
		rte_pause();
}

/* Rate-limited: the first 10 failures of a counter set, then one in APP_FAIL_LOG_EVERY. */
static void failure_log(const struct app_model *m, const struct app_exec_stats *st, const char *msg)
{
	if (st->batches_failed <= 10 || st->batches_failed % APP_FAIL_LOG_EVERY == 0)
		PLAT_LOG(WARNING, app, "model '%s': batch failed (%" PRIu64 " so far%s): %s", m->spec.name,
			 st->batches_failed, st == &m->stats ? "" : " on this lcore", msg);
}

static void model_failure_log(struct app_model *m, const char *msg)
{
	failure_log(m, &m->stats, msg);
}

static void model_completion(void *ctx, const struct rt_completion *c)
{
	struct app_model *m = ctx;
	uint64_t now = plat_tsc_now();
	struct bw_batch *b = c->batch;

	m->stats.batches_done++;
	m->stats.compute_us += plat_tsc_to_us(now - b->started_tsc);
	if (c->status != BW_STATUS_OK) {
		m->stats.batches_failed++;
		model_failure_log(m, c->msg);
	}
	completion_send(b->exec_route, b, c->status, c->valid_outputs);
}

/* \return 0, or -EBUSY when every slot of its size is in flight (the caller keeps it for later). */
static int model_batch_start(struct app_model *m, struct bw_batch *b)
{
	/* Read after the dequeue: a clock read before it could precede the batch's dispatch on its
	 * polling lcore. The TSC is invariant and synchronised across cores. */
	uint64_t now = plat_tsc_now();
	int ret;

	b->started_tsc = now;
	ret = rt_executor_submit(m->executor, b);
	if (ret == -EBUSY)
		return ret;
	m->stats.batches_started++;
	m->stats.queue_wait_us += now > b->dispatched_tsc ? plat_tsc_to_us(now - b->dispatched_tsc) : 0;
	if (ret != 0) {
		/* The batcher only makes batches of the sizes the executor was planned for: a bug, but the
		 * requests still get an answer. */
		m->stats.batches_done++;
		m->stats.batches_failed++;
		model_failure_log(m, "the executor refused the batch (no plan for its size)");
		completion_send(b->exec_route, b, BW_STATUS_INTERNAL, 0);
	}
	return 0;
}

static unsigned int model_batches_start(struct app_model *m)
{
	unsigned int started = 0;
	struct bw_batch *b;

	if (m->stash != NULL) {
		if (model_batch_start(m, m->stash) != 0)
			return 0;
		m->stash = NULL;
		started++;
	}
	while (started < APP_SUBMIT_BURST && rte_ring_sc_dequeue(m->submit_ring, (void **)&b) == 0) {
		if (model_batch_start(m, b) != 0) {
			m->stash = b;
			m->stats.busy_waits++;
			break;
		}
		started++;
	}
	return started;
}

/* The model's first worker: starts batches, runs steps, hands completions back. */
static enum plat_poll_result model_owner_poll(void *arg)
{
	struct app_worker *w = arg;
	struct app_model *m = w->model;
	unsigned int done = model_batches_start(m);

	done += rt_executor_work(m->executor, 0);
	done += rt_executor_poll_completions(m->executor, model_completion, m, APP_COMPLETION_BURST);
	return done != 0 ? PLAT_POLL_BUSY : PLAT_POLL_IDLE;
}

static enum plat_poll_result model_worker_poll(void *arg)
{
	struct app_worker *w = arg;

	return rt_executor_work(w->model->executor, w->index) != 0 ? PLAT_POLL_BUSY : PLAT_POLL_IDLE;
}

/* ---- the GPU executor: on the polling lcore itself --------------------------------------------- */

/*
 * (hot) A batch on the GPU starts where it was batched, at once: the batch table written and one
 * graph launched. A launch that fails completes its batch with INTERNAL (from the completion poller)
 * and has the device asked whether it is lost.
 */
static int gpu_channel_submit(void *ctx, struct bw_batch *batch)
{
	struct app_channel *ch = ctx;
	struct app_exec_stats *st = &ch->gpu_stats;
	const char *why;
	int rc;

	if (unlikely(gpu_lost()))
		return -ENODEV; /* UNAVAILABLE, as the model now is */
	batch->started_tsc = plat_tsc_now();
	rc = gpu_executor_submit(ch->gpu, batch);
	if (likely(rc == 0)) {
		st->batches_started++;
		return 0;
	}
	if (rc == -EBUSY) {
		/* slots >= the in-flight limit (config.c) makes this a bug; the batch is refused, not lost */
		st->busy_waits++;
		return rc;
	}
	st->batches_started++;
	st->batches_done++;
	st->batches_failed++;
	why = rc == -EIO ? gpu_executor_error(ch->gpu) :
	      rc == -EFAULT ? "a request's memory is not registered with the GPU" :
	      "the GPU executor has no graph for the batch's size";
	failure_log(ch->model, st, why);
	if (rc == -EIO)
		gpu_health_check();
	return deferred_push(ch->lcore, batch, BW_STATUS_INTERNAL);
}

static void gpu_batch_done(void *ctx, const struct rt_completion *c)
{
	struct app_channel *ch = ctx;
	struct app_exec_stats *st = &ch->gpu_stats;
	uint64_t now = ch->lcore->now_tsc;
	struct bw_batch *b = c->batch;

	st->batches_done++;
	st->compute_us += now > b->started_tsc ? plat_tsc_to_us(now - b->started_tsc) : 0;
	if (c->status != BW_STATUS_OK) {
		st->batches_failed++;
		failure_log(ch->model, st, c->msg);
	}
	bat_batch_complete(b, c->status, now);
}

/* (hot) This lcore's finished launches of one model; all of them at once when the device is lost. */
static unsigned int gpu_channel_poll(struct app_channel *ch)
{
	if (unlikely(gpu_lost()) && gpu_executor_in_flight(ch->gpu) > 0)
		return gpu_executor_fail_all(ch->gpu, gpu_batch_done, ch,
					     "the GPU is unhealthy: the batch's launch will never finish");
	return gpu_executor_poll(ch->gpu, gpu_batch_done, ch, APP_COMPLETION_BURST);
}

/* Launches in flight and none finishing for APP_GPU_HEALTH_CHECK_US: is the device still there? */
static void gpu_stall_check(struct app_lcore *al, unsigned int completed, bool in_flight)
{
	if (completed != 0 || !in_flight || gpu_lost()) {
		al->gpu_progress_tsc = al->now_tsc;
		return;
	}
	if (al->now_tsc - al->gpu_progress_tsc < plat_us_to_tsc(APP_GPU_HEALTH_CHECK_US))
		return;
	al->gpu_progress_tsc = al->now_tsc;
	al->gpu_health_checks++;
	gpu_health_check();
}

/* ---- the polling lcore's pollers ---------------------------------------------------------------- */

static enum plat_poll_result completions_poll(void *arg)
{
	struct app_lcore *al = arg;
	struct app_completion done[APP_COMPLETION_BURST];
	unsigned int total = 0, on_gpu = 0;
	bool gpu_in_flight = false;
	uint64_t now = plat_tsc_now();

	al->now_tsc = now;
	while (al->deferred_count != 0) {
		struct app_deferred d = al->deferred[al->deferred_head];

		al->deferred_head = (al->deferred_head + 1) % APP_DEFERRED_MAX;
		al->deferred_count--;
		bat_batch_complete(d.batch, d.status, now);
		total++;
	}
	for (unsigned int c = 0; c < al->nb_channels; c++) {
		struct rte_ring *ring = al->channels[c].completions;
		unsigned int n;

		if (al->channels[c].gpu != NULL) {
			on_gpu += gpu_channel_poll(&al->channels[c]);
			gpu_in_flight |= gpu_executor_in_flight(al->channels[c].gpu) > 0;
			continue;
		}
		if (ring == NULL)
			continue;
		n = rte_ring_sc_dequeue_burst_elem(ring, done, sizeof(done[0]), APP_COMPLETION_BURST, NULL);
		for (unsigned int i = 0; i < n; i++)
			bat_batch_complete(done[i].batch, (enum bw_status)done[i].status, now);
		total += n;
	}
	if (al->gpu_stream != NULL)
		gpu_stall_check(al, on_gpu, gpu_in_flight);
	total += on_gpu;
	return total != 0 ? PLAT_POLL_BUSY : PLAT_POLL_IDLE;
}

static enum plat_poll_result batch_windows_poll(void *arg)
{
	struct app_lcore *al = arg;
	uint64_t now = plat_tsc_now();
	unsigned int work = 0;

	for (unsigned int c = 0; c < al->nb_channels; c++)
		work += bat_poll(al->channels[c].queue, now);
	return work != 0 ? PLAT_POLL_BUSY : PLAT_POLL_IDLE;
}

/* ---- set-up ------------------------------------------------------------------------------------- */

static void model_free(struct app_model *m)
{
	if (m == NULL)
		return;
	if (m->gpu_loaded != NULL)
		g_gpu.hd.ops->program_unload(m->gpu_loaded);
	gpu_compiled_free(m->gpu_compiled);
	rt_executor_destroy(m->executor);
	rte_ring_free(m->submit_ring);
	bat_limiter_destroy(m->limiter);
	rt_model_fini(&m->spec);
	rte_free(m);
}

static void batching_to_spec(struct rt_model *spec, const struct bat_options *o)
{
	spec->priority_levels = o->priority_levels;
	spec->max_batch_size = o->max_batch_size;
	spec->num_batch_sizes = (uint16_t)RTE_MIN(o->num_allowed_batch_sizes, RT_BATCH_SIZES_MAX);
	for (uint16_t i = 0; i < spec->num_batch_sizes; i++)
		spec->batch_sizes[i] = o->allowed_batch_sizes[i];
}

static int workers_check(struct app_model_config *mc, FILE *err)
{
	if (mc->nb_workers == 0) {
		mc->workers[0] = rte_get_main_lcore();
		mc->nb_workers = 1;
	}
	for (unsigned int w = 0; w < mc->nb_workers; w++) {
		if (!rte_lcore_is_enabled(mc->workers[w])) {
			fprintf(err, "batchwire: invalid workers of model '%s': lcore %u is not enabled in EAL: expected "
				"lcores given to EAL with -l or --lcores\n", mc->name, mc->workers[w]);
			return -EINVAL;
		}
	}
	return 0;
}

static void load_report(const struct app_model *m, const struct rt_opt_report *rep, const int64_t *sizes,
			unsigned int nb_sizes)
{
	char fusions[512] = "";
	size_t off = 0, arena = 0;

	for (uint32_t k = 0; k < rep->num_kinds && off < sizeof(fusions); k++)
		off += (size_t)snprintf(fusions + off, sizeof(fusions) - off, "%s%s x%u", k > 0 ? ", " : "",
					rep->kinds[k].what, rep->kinds[k].count);
	for (unsigned int s = 0; s < nb_sizes; s++)
		arena += rt_plan_arena_bytes(rt_executor_plan(m->executor, sizes[s]));
	PLAT_LOG(INFO, app, "model '%s' (id %u) from %s: %u inputs, %u outputs, %u nodes (%u after "
		 "optimisation%s%s), %u batch sizes up to %" PRId64 ", %u slots each (%zu KiB of arenas), "
		 "%u worker lcores from %u", m->spec.name, m->spec.id, m->cfg.path, m->spec.num_inputs,
		 m->spec.num_outputs, rep->nodes_before, rep->nodes_after, off > 0 ? ": " : "", fusions, nb_sizes,
		 sizes[nb_sizes - 1], m->cfg.slots, arena * m->cfg.slots / 1024, m->cfg.nb_workers, m->cfg.workers[0]);
}

/* The reply's fixed parts: every reply carries the output descriptors with their names. */
static void reply_layout(struct app_model *m)
{
	for (uint16_t o = 0; o < m->spec.num_outputs; o++) {
		m->reply_desc_bytes += (uint32_t)sizeof(struct bw_tensor_desc) +
				       bw_pad8((uint32_t)strlen(m->spec.outputs[o].name));
		m->output_row_bytes += m->spec.output_row_bytes[o];
	}
}

/*
 * device = gpu: compiles the graph into a device program (one op list per allowed size) and loads it
 * on the device once; each polling lcore makes its executor (arenas, tables, graphs) on its own thread.
 */
static int gpu_model_create(struct app_model *m, FILE *err)
{
	struct app_model_config *mc = &m->cfg;
	const struct bat_options *o = &mc->batching;
	int64_t sizes[BAT_ALLOWED_SIZES_MAX];
	char why[GPU_ERR_MAX * 2];
	size_t arena = 0;
	int ret;

	for (unsigned int i = 0; i < o->num_allowed_batch_sizes; i++)
		sizes[i] = o->allowed_batch_sizes[i];
	ret = gpu_compile_with(m->spec.graph, sizes, o->num_allowed_batch_sizes,
			       &(struct gpu_compile_options){ mc->precision, mc->layout }, &m->gpu_compiled, why, sizeof(why));
	if (ret != 0) {
		fprintf(err, "batchwire: model '%s' (%s): on the GPU: %s\n", mc->name, mc->path, why);
		return ret;
	}
	ret = g_gpu.hd.ops->program_load(g_gpu.hd.dev, &m->gpu_compiled->prog, &m->gpu_loaded, why, sizeof(why));
	if (ret != 0) {
		fprintf(err, "batchwire: model '%s' (%s): loading its program on GPU %d: %s\n", mc->name, mc->path,
			g_gpu.hd.index, why);
		return ret;
	}
	/* a slot per batch the in-flight limit lets through: a dispatched batch always finds one */
	if (mc->slots == 0)
		mc->slots = app_model_inflight_max(mc);
	for (uint32_t i = 0; i < m->gpu_compiled->prog.nb_sizes; i++)
		arena += m->gpu_compiled->prog.sizes[i].arena_bytes;
	reply_layout(m);
	PLAT_LOG(INFO, app, "model '%s' (id %u) from %s on GPU %d (%s), %s, %s, %s launch: %u inputs, %u outputs, %u "
		 "nodes, %u device ops at size %" PRId64 ", %u batch sizes up to %" PRId64 ", %u slots each per polling "
		 "lcore (%zu KiB of device arenas per lcore), %zu KiB of constants", m->spec.name, m->spec.id, mc->path,
		 g_gpu.hd.index, g_gpu.hd.info.name, gpu_precision_name(mc->precision),
		 gpu_layout_name(m->gpu_compiled->layout), gpu_launch_mode_name(mc->launch_mode), m->spec.num_inputs, m->spec.num_outputs,
		 m->spec.graph->num_nodes, m->gpu_compiled->prog.sizes[o->num_allowed_batch_sizes - 1].nb_ops,
		 sizes[o->num_allowed_batch_sizes - 1], o->num_allowed_batch_sizes,
		 sizes[o->num_allowed_batch_sizes - 1], mc->slots, arena * mc->slots / 1024,
		 m->gpu_compiled->prog.const_bytes / 1024);
	return 0;
}

static int onnx_model_create(struct app_model *m, FILE *err)
{
	struct app_model_config *mc = &m->cfg;
	const struct bat_options *o = &mc->batching;
	int64_t sizes[BAT_BATCH_SIZE_MAX];
	unsigned int nb_sizes = 0, inflight = app_model_inflight_max(mc);
	bool on_gpu = mc->device == APP_DEVICE_GPU;
	struct rt_opt_report rep;
	char why[RT_ERR_MAX * 2], name[RTE_RING_NAMESIZE];
	int ret;

	ret = on_gpu ? 0 : workers_check(mc, err);
	if (ret != 0)
		return ret;
	/* on the GPU: the graph as the file has it (the CPU's fused ops are CPU kernels) */
	ret = rt_onnx_model_load(&m->spec, m->spec.id, mc->name, mc->path, on_gpu ? RT_DEVICE_GPU : RT_DEVICE_CPU,
				 &rep, why, sizeof(why));
	if (ret != 0) {
		fprintf(err, "batchwire: model '%s' (%s): %s\n", mc->name, mc->path, why);
		return ret;
	}
	if (on_gpu)
		return gpu_model_create(m, err);
	if (o->num_allowed_batch_sizes > 0) {
		for (unsigned int i = 0; i < o->num_allowed_batch_sizes; i++)
			sizes[nb_sizes++] = o->allowed_batch_sizes[i];
	} else {
		for (uint32_t s = 1; s <= bat_options_batch_capacity(o); s++)
			sizes[nb_sizes++] = s;
	}
	/* Each slot is an arena per batch size; more slots than the in-flight limit would never be used,
	 * and one more than the workers keeps them busy while a batch is gathered or scattered. */
	if (mc->slots == 0)
		mc->slots = RTE_MAX(1u, RTE_MIN(inflight, mc->nb_workers + 1));
	m->executor = rt_executor_create(m->spec.graph, sizes, nb_sizes, mc->nb_workers, mc->slots, why, sizeof(why));
	if (m->executor == NULL) {
		fprintf(err, "batchwire: model '%s' (%s): %s\n", mc->name, mc->path, why);
		return -EINVAL;
	}
	m->ring_size = rte_align32pow2(inflight + 1);
	snprintf(name, sizeof(name), "bw_sub_%u", m->spec.id);
	m->submit_ring = rte_ring_create(name, m->ring_size, (int)rte_lcore_to_socket_id(mc->workers[0]), RING_F_SC_DEQ);
	if (m->submit_ring == NULL) {
		fprintf(err, "batchwire: model '%s': cannot create its submit ring: %s\n", mc->name,
			rte_strerror(rte_errno));
		return -rte_errno;
	}
	for (unsigned int w = 0; w < mc->nb_workers; w++)
		m->workers[w] = (struct app_worker){m, w};
	reply_layout(m);
	snprintf(m->poller_name, sizeof(m->poller_name), "model_%s", mc->name);
	load_report(m, &rep, sizes, nb_sizes);
	return 0;
}

static int model_create(struct app_service *svc, struct app_model_config *mc, uint32_t id, FILE *err)
{
	struct app_model *m = rte_zmalloc("bw_model", sizeof(*m), RTE_CACHE_LINE_SIZE);
	int ret;

	if (m == NULL) {
		fprintf(err, "batchwire: model '%s': out of memory\n", mc->name);
		return -ENOMEM;
	}
	m->cfg = *mc;
	if (app_model_is_echo(mc)) {
		ret = rt_echo_init(&m->spec, id, mc->name);
	} else {
		m->spec.id = id;
		ret = onnx_model_create(m, err);
	}
	if (ret == 0) {
		batching_to_spec(&m->spec, &mc->batching);
		m->limiter = bat_limiter_create(&mc->batching);
		ret = m->limiter != NULL ? 0 : -ENOMEM;
	}
	if (ret == 0)
		ret = rt_registry_add(&svc->registry, &m->spec);
	if (ret != 0) {
		model_free(m);
		return ret;
	}
	svc->models[svc->nb_models++] = m;
	return 0;
}

/* Opens the device when a model runs on it: a host without one stops here, saying why. */
static int gpu_open(const struct app_config *cfg, FILE *err)
{
	const char *user = NULL, *module = cfg->gpu_module[0] != '\0' ? cfg->gpu_module : NULL;
	char why[GPU_ERR_MAX * 2];
	int ret;

	for (unsigned int i = 0; i < cfg->nb_models && user == NULL; i++)
		if (cfg->models[i].device == APP_DEVICE_GPU)
			user = cfg->models[i].name;
	if (user == NULL)
		return 0;
	ret = gpu_kernels_register();
	if (ret == 0)
		ret = gpu_host_device_open(module, cfg->gpu_index, &g_gpu.hd, why, sizeof(why));
	else
		snprintf(why, sizeof(why), "registering the GPU kernels: %s", strerror(-ret));
	if (ret != 0) {
		fprintf(err, "batchwire: model '%s' has device = gpu, but the GPU cannot be used: %s\n", user, why);
		return ret;
	}
	PLAT_LOG(INFO, app, "GPU %d: %s (compute capability %d.%d, %" PRIu64 " MiB, %d SMs) through the %s module%s%s",
		 g_gpu.hd.index, g_gpu.hd.info.name, g_gpu.hd.info.cc_major, g_gpu.hd.info.cc_minor,
		 g_gpu.hd.info.total_mem_bytes >> 20, g_gpu.hd.info.multiprocessors, g_gpu.hd.ops->name,
		 g_gpu.hd.module.handle != NULL ? " " : "", g_gpu.hd.module.handle != NULL ? g_gpu.hd.module.path : "");
	return 0;
}

/* The CPU kernels' instruction set, chosen once before any model loads, said once in the log. */
static int cpu_kernels_choose(FILE *err)
{
	char line[256];

	if (rt_cpu_isa_select(line, sizeof(line)) != 0) {
		fprintf(err, "batchwire: CPU kernels: %s\n", line);
		return -ENOTSUP;
	}
	rt_cpu_isa_describe(line, sizeof(line));
	PLAT_LOG(INFO, app, "CPU kernels: %s", line);
	return 0;
}

int app_service_init(struct app_service *svc, struct app_config *cfg, FILE *err)
{
	int ret;

	memset(svc, 0, sizeof(*svc));
	memset(&g_gpu, 0, sizeof(g_gpu));
	ret = cpu_kernels_choose(err);
	if (ret == 0)
		ret = gpu_open(cfg, err);
	/* echo first: it keeps id 0 whatever the configuration lists */
	for (unsigned int pass = 0; pass < 2 && ret == 0; pass++) {
		for (unsigned int i = 0; i < cfg->nb_models && ret == 0; i++) {
			if (app_model_is_echo(&cfg->models[i]) == (pass == 0))
				ret = model_create(svc, &cfg->models[i], svc->nb_models, err);
		}
	}
	if (ret != 0) {
		app_service_fini(svc);
		return ret;
	}
	svc->ops = (struct dp_model_ops){
		.lookup = service_lookup,
		.priority_levels = service_priority_levels,
		.describe = service_describe,
		.infer = service_infer,
		.ctx = &svc->registry,
	};
	g_service = svc;
	return 0;
}

/* The GPU's per-lcore parts, on the main thread at exit: the lcores have stopped launching. */
static void gpu_lcores_fini(void)
{
	for (unsigned int l = 0; l < RTE_MAX_LCORE; l++) {
		struct app_lcore *al = &g_lcores[l];

		for (unsigned int c = 0; c < al->nb_channels; c++) {
			gpu_executor_destroy(al->channels[c].gpu);
			al->channels[c].gpu = NULL;
		}
		if (al->gpu_stream != NULL)
			g_gpu.hd.ops->stream_destroy(al->gpu_stream);
		al->gpu_stream = NULL;
	}
}

void app_service_fini(struct app_service *svc)
{
	if (g_gpu.hd.ops != NULL)
		gpu_lcores_fini();
	for (unsigned int i = 0; i < svc->nb_models; i++)
		model_free(svc->models[i]);
	svc->nb_models = 0;
	if (g_gpu.hd.ops != NULL) {
		for (unsigned int r = 0; r < g_gpu.nb_regions; r++)
			g_gpu.hd.ops->host_unregister(g_gpu.hd.dev, g_gpu.regions[r], NULL, 0);
		gpu_host_device_close(&g_gpu.hd);
		memset(&g_gpu, 0, sizeof(g_gpu));
	}
	/* The registry and the ops point at the models just freed. */
	memset(&svc->registry, 0, sizeof(svc->registry));
	memset(&svc->ops, 0, sizeof(svc->ops));
	if (g_service == svc)
		g_service = NULL;
}

int app_service_lcore_init(struct app_service *svc, struct dp_lcore *dp)
{
	struct app_lcore *al = &g_lcores[dp->lcore_id];
	int socket = (int)rte_lcore_to_socket_id(dp->lcore_id);

	memset(al, 0, sizeof(*al));
	al->dp = dp;
	for (unsigned int i = 0; i < svc->nb_models; i++) {
		struct app_model *m = svc->models[i];
		struct app_channel *ch = &al->channels[i];
		struct bw_executor ex;
		bat_job_done_fn done;

		ch->lcore = al;
		ch->model = m;
		if (m->spec.kind == RT_MODEL_ECHO) {
			ex = (struct bw_executor){.submit = echo_executor_submit, .ctx = al};
			done = echo_job_done;
		} else if (m->gpu_loaded != NULL) {
			/* its executor is made on the lcore's own thread, by app_service_lcore_start */
			ex = (struct bw_executor){.submit = gpu_channel_submit, .ctx = ch};
			done = onnx_job_done;
		} else {
			char name[RTE_RING_NAMESIZE];

			snprintf(name, sizeof(name), "bw_cpl_%u_%u", m->spec.id, dp->lcore_id);
			ch->completions = rte_ring_create_elem(name, sizeof(struct app_completion), m->ring_size, socket,
							       RING_F_SP_ENQ | RING_F_SC_DEQ);
			if (ch->completions == NULL)
				return -rte_errno;
			ex = (struct bw_executor){.submit = onnx_executor_submit, .ctx = ch};
			done = onnx_job_done;
		}
		ch->queue = bat_queue_create(&m->cfg.batching, m->limiter, &ex, done, ch, plat_tsc_hz,
					     plat_tsc_now() ^ (dp->lcore_id * 0x9e3779b97f4a7c15ULL) ^ i);
		if (ch->queue == NULL)
			return -ENOMEM;
		al->nb_channels = i + 1;
	}
	return 0;
}

int app_service_lcore_start(unsigned int lcore_id, char *err, size_t cap)
{
	struct app_lcore *al = &g_lcores[lcore_id];
	char why[GPU_ERR_MAX * 2];
	int ret;

	for (unsigned int c = 0; c < al->nb_channels; c++) {
		struct app_channel *ch = &al->channels[c];
		struct app_model *m = ch->model;

		if (m->gpu_loaded == NULL || ch->gpu != NULL)
			continue;
		if (al->gpu_stream == NULL) {
			ret = g_gpu.hd.ops->stream_create(g_gpu.hd.dev, APP_GPU_STREAM_WORDS, &al->gpu_stream, why,
							  sizeof(why));
			if (ret != 0) {
				snprintf(err, cap, "lcore %u: a stream on GPU %d: %s", lcore_id, g_gpu.hd.index, why);
				return ret;
			}
		}
		ch->gpu = gpu_executor_create(g_gpu.hd.ops, g_gpu.hd.dev, m->gpu_loaded, m->gpu_compiled, al->gpu_stream,
					      m->cfg.slots, m->cfg.launch_mode, why, sizeof(why));
		if (ch->gpu == NULL) {
			snprintf(err, cap, "lcore %u: model '%s' on GPU %d: %s", lcore_id, m->spec.name, g_gpu.hd.index,
				 why);
			return -ENOMEM;
		}
	}
	al->gpu_progress_tsc = plat_tsc_now();
	return 0;
}

/* A mempool's memory chunks, page-aligned, for the device to register. */
struct region_list {
	unsigned int count;
	bool overflow;
	struct {
		uintptr_t start, end;
	} r[GPU_REGIONS_MAX];
};

static void region_add(struct rte_mempool *mp __rte_unused, void *opaque, struct rte_mempool_memhdr *memhdr,
		       unsigned int mem_idx __rte_unused)
{
	struct region_list *list = opaque;
	uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);

	if (list->count == GPU_REGIONS_MAX) {
		list->overflow = true;
		return;
	}
	list->r[list->count].start = (uintptr_t)memhdr->addr & ~(page - 1);
	list->r[list->count].end = ((uintptr_t)memhdr->addr + memhdr->len + page - 1) & ~(page - 1);
	list->count++;
}

static int region_cmp(const void *a, const void *b)
{
	uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;

	return x < y ? -1 : x > y;
}

int app_service_memory_register(struct rte_mempool *const *pools, unsigned int nb_pools, FILE *err)
{
	struct region_list list = {0};
	char why[GPU_ERR_MAX];
	unsigned int merged = 0;

	if (g_gpu.hd.ops == NULL)
		return 0;
	for (unsigned int p = 0; p < nb_pools; p++) {
		bool seen = false;

		for (unsigned int q = 0; q < p; q++)
			seen |= pools[q] == pools[p];
		if (!seen)
			rte_mempool_mem_iter(pools[p], region_add, &list);
	}
	/* Chunks rounded out to pages may touch or overlap: one registration per run of them. */
	qsort(list.r, list.count, sizeof(list.r[0]), region_cmp);
	for (unsigned int i = 0; i < list.count; i++) {
		if (merged > 0 && list.r[i].start <= list.r[merged - 1].end)
			list.r[merged - 1].end = RTE_MAX(list.r[merged - 1].end, list.r[i].end);
		else
			list.r[merged++] = list.r[i];
	}
	if (list.overflow) {
		fprintf(err, "batchwire: the mbuf pools have more than %d memory chunks: the GPU cannot register them "
			"all (expected hugepages, or fewer pools)\n", GPU_REGIONS_MAX);
		return -ENOSPC;
	}
	for (unsigned int i = 0; i < merged; i++) {
		void *addr = (void *)list.r[i].start, *dev_addr;
		size_t len = list.r[i].end - list.r[i].start;
		int ret = g_gpu.hd.ops->host_register(g_gpu.hd.dev, addr, len, &dev_addr, why, sizeof(why));

		if (ret != 0) {
			fprintf(err, "batchwire: registering %zu KiB of mbuf pool memory with GPU %d: %s\n", len >> 10,
				g_gpu.hd.index, why);
			return ret;
		}
		g_gpu.regions[g_gpu.nb_regions++] = addr;
		g_gpu.registered_bytes += len;
	}
	PLAT_LOG(INFO, app, "GPU %d reads requests from and writes replies into the mbuf pools: %u regions, %" PRIu64
		 " MiB registered", g_gpu.hd.index, g_gpu.nb_regions, g_gpu.registered_bytes >> 20);
	return 0;
}

bool app_service_is_worker(unsigned int lcore_id)
{
	for (unsigned int i = 0; g_service != NULL && i < g_service->nb_models; i++) {
		const struct app_model *m = g_service->models[i];

		for (unsigned int w = 0; m->executor != NULL && w < m->cfg.nb_workers; w++) {
			if (m->cfg.workers[w] == lcore_id)
				return true;
		}
	}
	return false;
}

unsigned int app_service_pollers(unsigned int lcore_id, bool polling, bool working, struct plat_poller *pollers)
{
	struct app_lcore *al = &g_lcores[lcore_id];
	unsigned int n = 0;

	if (polling && al->dp != NULL) {
		pollers[n++] = (struct plat_poller){"rx", dp_rx_poll, al->dp};
		pollers[n++] = (struct plat_poller){"batch_windows", batch_windows_poll, al};
		pollers[n++] = (struct plat_poller){"completions", completions_poll, al};
	}
	for (unsigned int i = 0; working && g_service != NULL && i < g_service->nb_models; i++) {
		struct app_model *m = g_service->models[i];

		for (unsigned int w = 0; m->executor != NULL && w < m->cfg.nb_workers; w++) {
			if (m->cfg.workers[w] != lcore_id || n == PLAT_POLLERS_MAX - 1)
				continue;
			pollers[n++] = (struct plat_poller){m->poller_name, w == 0 ? model_owner_poll : model_worker_poll,
							    &m->workers[w]};
		}
	}
	if (polling && al->dp != NULL)
		pollers[n++] = (struct plat_poller){"tx_drain", dp_tx_drain_poll, al->dp};
	return n;
}

static bool lcore_queues_empty(const struct app_lcore *al)
{
	for (unsigned int c = 0; c < al->nb_channels; c++) {
		if (!bat_queue_empty(al->channels[c].queue))
			return false;
	}
	return true;
}

bool app_service_lcore_drain(unsigned int lcore_id, uint64_t max_us)
{
	struct app_lcore *al = &g_lcores[lcore_id];
	uint64_t end = plat_tsc_now() + plat_us_to_tsc(max_us);
	struct plat_poller pollers[PLAT_POLLERS_MAX];
	unsigned int n = 0;

	for (unsigned int c = 0; c < al->nb_channels; c++)
		bat_queue_drain(al->channels[c].queue, plat_tsc_now());
	/* No RX: no new requests; but if this lcore is also a worker, its steps must keep running. */
	pollers[n++] = (struct plat_poller){"batch_windows", batch_windows_poll, al};
	pollers[n++] = (struct plat_poller){"completions", completions_poll, al};
	n += app_service_pollers(lcore_id, false, true, pollers + n);
	while (!lcore_queues_empty(al) && plat_tsc_now() < end) {
		for (unsigned int i = 0; i < n; i++)
			pollers[i].poll(pollers[i].arg);
	}
	dp_tx_flush(al->dp);
	return lcore_queues_empty(al);
}

/* ---- telemetry ---------------------------------------------------------------------------------- */

static void stats_add(struct bat_stats *sum, const struct bat_stats *s)
{
	sum->jobs += s->jobs;
	sum->jobs_done += s->jobs_done;
	sum->rejected_full += s->rejected_full;
	sum->rejected_too_large += s->rejected_too_large;
	sum->splits += s->splits;
	sum->deadline_expired += s->deadline_expired;
	sum->batches += s->batches;
	sum->batches_failed += s->batches_failed;
	sum->rows += s->rows;
	sum->padding_rows += s->padding_rows;
	sum->window_wait_us += s->window_wait_us;
	for (unsigned int r = 0; r < BW_DISPATCH_COUNT; r++)
		sum->dispatch[r] += s->dispatch[r];
	for (unsigned int z = 0; z <= BAT_BATCH_SIZE_MAX; z++)
		sum->by_size[z] += s->by_size[z];
}

/* One model's batcher counters over every polling lcore (model < 0: every model). */
static void stats_sum(int model, struct bat_stats *sum)
{
	memset(sum, 0, sizeof(*sum));
	for (unsigned int l = 0; l < RTE_MAX_LCORE; l++) {
		const struct app_lcore *al = &g_lcores[l];

		for (unsigned int c = 0; c < al->nb_channels; c++) {
			if (model < 0 || (unsigned int)model == c)
				stats_add(sum, bat_queue_stats(al->channels[c].queue));
		}
	}
}

static void batch_keys_add(struct rte_tel_data *d, const struct bat_stats *sum, const char *prefix)
{
	static const char *const reasons[BW_DISPATCH_COUNT] = {"full", "timeout", "deadline", "slo", "idle", "drain"};
	static const struct {
		const char *name;
		size_t offset;
	} keys[] = {
		{"requests", offsetof(struct bat_stats, jobs)},
		{"requests_done", offsetof(struct bat_stats, jobs_done)},
		{"rejected_full", offsetof(struct bat_stats, rejected_full)},
		{"rejected_too_large", offsetof(struct bat_stats, rejected_too_large)},
		{"splits", offsetof(struct bat_stats, splits)},
		{"deadline_expired", offsetof(struct bat_stats, deadline_expired)},
		{"batches", offsetof(struct bat_stats, batches)},
		{"failed", offsetof(struct bat_stats, batches_failed)},
		{"rows", offsetof(struct bat_stats, rows)},
		{"padding_rows", offsetof(struct bat_stats, padding_rows)},
		{"window_wait_us", offsetof(struct bat_stats, window_wait_us)},
	};
	struct rte_tel_data *dispatch, *sizes;
	char key[64];

	for (unsigned int k = 0; k < RTE_DIM(keys); k++) {
		snprintf(key, sizeof(key), "%s%s", prefix, keys[k].name);
		rte_tel_data_add_dict_u64(d, key, *(const uint64_t *)((const uint8_t *)sum + keys[k].offset));
	}
	dispatch = rte_tel_data_alloc();
	sizes = rte_tel_data_alloc();
	if (dispatch == NULL || sizes == NULL) {
		rte_tel_data_free(dispatch);
		rte_tel_data_free(sizes);
		return;
	}
	rte_tel_data_start_dict(dispatch);
	for (unsigned int r = 0; r < BW_DISPATCH_COUNT; r++)
		rte_tel_data_add_dict_u64(dispatch, reasons[r], sum->dispatch[r]);
	rte_tel_data_start_dict(sizes);
	for (unsigned int z = 1; z <= BAT_BATCH_SIZE_MAX; z++) {
		if (sum->by_size[z] == 0)
			continue;
		snprintf(key, sizeof(key), "%u", z);
		if (rte_tel_data_add_dict_u64(sizes, key, sum->by_size[z]) != 0)
			break; /* the dict is full (256 entries): the largest sizes are left out */
	}
	snprintf(key, sizeof(key), "%sdispatch", prefix);
	rte_tel_data_add_dict_container(d, key, dispatch, 0);
	snprintf(key, sizeof(key), "%ssizes", prefix);
	rte_tel_data_add_dict_container(d, key, sizes, 0);
}

void app_service_telemetry(struct rte_tel_data *d)
{
	struct bat_stats sum;
	uint64_t inflight = 0;

	stats_sum(-1, &sum);
	batch_keys_add(d, &sum, "batch_");
	for (unsigned int i = 0; g_service != NULL && i < g_service->nb_models; i++)
		inflight += bat_limiter_in_flight(g_service->models[i]->limiter);
	rte_tel_data_add_dict_u64(d, "batch_inflight", inflight);
}

/* A model on the GPU: the executor keys of a CPU model, summed over its polling lcores, and the GPU's. */
static void gpu_model_keys_add(struct rte_tel_data *d, const struct app_model *m)
{
	struct app_exec_stats sum = {0};
	struct gpu_executor_stats gs = {0};
	uint64_t in_flight = 0;

	for (unsigned int l = 0; l < RTE_MAX_LCORE; l++) {
		const struct app_lcore *al = &g_lcores[l];
		const struct app_channel *ch = m->spec.id < al->nb_channels ? &al->channels[m->spec.id] : NULL;
		struct gpu_executor_stats one;

		if (ch == NULL || ch->gpu == NULL)
			continue;
		sum.batches_started += ch->gpu_stats.batches_started;
		sum.batches_done += ch->gpu_stats.batches_done;
		sum.batches_failed += ch->gpu_stats.batches_failed;
		sum.compute_us += ch->gpu_stats.compute_us;
		sum.busy_waits += ch->gpu_stats.busy_waits;
		gpu_executor_stats(ch->gpu, &one);
		gs.launched += one.launched;
		gs.completed += one.completed;
		gs.faulted += one.faulted;
		gs.launch_errors += one.launch_errors;
		in_flight += gpu_executor_in_flight(ch->gpu);
	}
	rte_tel_data_add_dict_u64(d, "available", gpu_lost() ? 0 : 1);
	rte_tel_data_add_dict_string(d, "precision", gpu_precision_name(m->cfg.precision));
	rte_tel_data_add_dict_string(d, "layout", gpu_layout_name(m->gpu_compiled->layout));
	rte_tel_data_add_dict_string(d, "launch_mode", gpu_launch_mode_name(m->cfg.launch_mode));
	rte_tel_data_add_dict_u64(d, "exec_batches_started", sum.batches_started);
	rte_tel_data_add_dict_u64(d, "exec_batches_done", sum.batches_done);
	rte_tel_data_add_dict_u64(d, "exec_batches_failed", sum.batches_failed);
	rte_tel_data_add_dict_u64(d, "exec_queue_wait_us", 0); /* launched where it was batched, at once */
	rte_tel_data_add_dict_u64(d, "exec_compute_us", sum.compute_us);
	rte_tel_data_add_dict_u64(d, "exec_busy_waits", sum.busy_waits);
	rte_tel_data_add_dict_u64(d, "gpu_launched", gs.launched);
	rte_tel_data_add_dict_u64(d, "gpu_completed", gs.completed);
	rte_tel_data_add_dict_u64(d, "gpu_faulted", gs.faulted);
	rte_tel_data_add_dict_u64(d, "gpu_launch_errors", gs.launch_errors);
	rte_tel_data_add_dict_u64(d, "gpu_in_flight", in_flight);
}

/* /batchwire/gpu: the device the models with device = gpu run on, and whether it is healthy. */
static int gpu_cb(const char *cmd __rte_unused, const char *params __rte_unused, struct rte_tel_data *d)
{
	uint64_t checks = 0;
	char cc[16];

	rte_tel_data_start_dict(d);
	rte_tel_data_add_dict_u64(d, "in_use", g_gpu.hd.ops != NULL);
	if (g_gpu.hd.ops == NULL)
		return 0;
	for (unsigned int l = 0; l < RTE_MAX_LCORE; l++)
		checks += g_lcores[l].gpu_health_checks;
	snprintf(cc, sizeof(cc), "%d.%d", g_gpu.hd.info.cc_major, g_gpu.hd.info.cc_minor);
	rte_tel_data_add_dict_string(d, "module", g_gpu.hd.ops->name);
	rte_tel_data_add_dict_u64(d, "index", (uint64_t)g_gpu.hd.index);
	rte_tel_data_add_dict_string(d, "name", g_gpu.hd.info.name);
	rte_tel_data_add_dict_string(d, "compute_capability", cc);
	rte_tel_data_add_dict_u64(d, "memory_mib", g_gpu.hd.info.total_mem_bytes >> 20);
	rte_tel_data_add_dict_u64(d, "healthy", gpu_lost() ? 0 : 1);
	rte_tel_data_add_dict_string(d, "reason", gpu_lost() ? gpu_lost_why() : "");
	rte_tel_data_add_dict_u64(d, "regions", g_gpu.nb_regions);
	rte_tel_data_add_dict_u64(d, "registered_bytes", g_gpu.registered_bytes);
	rte_tel_data_add_dict_u64(d, "stall_health_checks", checks);
	return 0;
}

static int models_cb(const char *cmd __rte_unused, const char *params __rte_unused, struct rte_tel_data *d)
{
	rte_tel_data_start_array(d, RTE_TEL_STRING_VAL);
	for (unsigned int i = 0; g_service != NULL && i < g_service->nb_models; i++)
		rte_tel_data_add_array_string(d, g_service->models[i]->spec.name);
	return 0;
}

static int model_cb(const char *cmd __rte_unused, const char *params, struct rte_tel_data *d)
{
	const struct rt_model *spec;
	struct app_model *m;
	struct bat_stats sum;

	if (params == NULL || g_service == NULL)
		return -EINVAL;
	spec = rt_registry_find_name(&g_service->registry, params, (uint32_t)strlen(params));
	if (spec == NULL)
		return -EINVAL;
	m = g_service->models[spec->id];
	stats_sum((int)spec->id, &sum);
	rte_tel_data_start_dict(d);
	rte_tel_data_add_dict_u64(d, "id", spec->id);
	rte_tel_data_add_dict_string(d, "kind", spec->kind == RT_MODEL_ECHO ? "echo" : "onnx");
	rte_tel_data_add_dict_string(d, "device", m->cfg.device == APP_DEVICE_GPU ? "gpu" : "cpu");
	rte_tel_data_add_dict_u64(d, "workers", m->executor != NULL ? m->cfg.nb_workers : 0);
	rte_tel_data_add_dict_u64(d, "slots", m->executor != NULL ? m->cfg.slots : 0);
	batch_keys_add(d, &sum, "");
	rte_tel_data_add_dict_u64(d, "inflight", bat_limiter_in_flight(m->limiter));
	rte_tel_data_add_dict_u64(d, "inflight_limit_milli", (uint64_t)(bat_limiter_limit(m->limiter) * 1000));
	if (m->gpu_loaded != NULL)
		gpu_model_keys_add(d, m);
	if (m->executor != NULL) {
		struct rt_executor_stats es;

		rt_executor_stats(m->executor, &es);
		rte_tel_data_add_dict_u64(d, "exec_batches_started", m->stats.batches_started);
		rte_tel_data_add_dict_u64(d, "exec_batches_done", m->stats.batches_done);
		rte_tel_data_add_dict_u64(d, "exec_batches_failed", m->stats.batches_failed);
		rte_tel_data_add_dict_u64(d, "exec_queue_wait_us", m->stats.queue_wait_us);
		rte_tel_data_add_dict_u64(d, "exec_compute_us", m->stats.compute_us);
		rte_tel_data_add_dict_u64(d, "exec_busy_waits", m->stats.busy_waits);
		rte_tel_data_add_dict_u64(d, "exec_steps_run", es.steps_run);
		rte_tel_data_add_dict_u64(d, "exec_steps_failed", es.steps_failed);
	}
	return 0;
}

int app_service_telemetry_register(void)
{
	int ret = rte_telemetry_register_cmd("/batchwire/models", models_cb, "Names of the models served. No parameters.");

	if (ret == 0)
		ret = rte_telemetry_register_cmd("/batchwire/model", model_cb,
						 "One model's counters: requests, batches by size, padding, window and queue "
						 "wait, compute time. Parameter: the model's name.");
	if (ret == 0)
		ret = rte_telemetry_register_cmd("/batchwire/gpu", gpu_cb,
						 "The GPU of the models with device = gpu: name, health and the reason "
						 "when unhealthy, host memory registered. No parameters.");
	return ret;
}
