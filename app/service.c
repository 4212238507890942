/* SPDX-License-Identifier: BSD-3-Clause */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <rte_lcore.h>

#include "service.h"

/* One polling lcore's part of the service: written only by that lcore (telemetry reads stats). */
struct app_lcore {
	struct dp_lcore *dp;
	struct bat_queue *echo_queue;
	/* batches the echo executor has finished, waiting for the completion poller: SP/SC on one lcore */
	struct bw_batch *completions[APP_ECHO_COMPLETIONS];
	uint32_t completions_head;
	uint32_t completions_count;
} __rte_cache_aligned;

static struct app_lcore g_lcores[RTE_MAX_LCORE];
static struct app_service *g_service;

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

/* A batched model reads the first dimension of every tensor as the request's rows. */
static uint32_t request_rows(const struct dp_request *req, char *msg, size_t cap)
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

static enum bw_status echo_submit(struct app_lcore *al, struct dp_request *req, char *msg, size_t cap)
{
	struct bat_queue *q = al->echo_queue;
	const struct bat_options *opts = bat_queue_options(q);
	uint32_t rows = request_rows(req, msg, cap);
	struct bat_job *job;
	enum bw_status status;

	if (rows == 0)
		return BW_STATUS_INVALID_ARGUMENT;
	job = bat_job_alloc(q);
	if (job == NULL) {
		snprintf(msg, cap, "no free request slot in this core's batcher");
		return BW_STATUS_RESOURCE_EXHAUSTED;
	}
	job->rows = rows;
	job->priority = req->hdr->priority;
	job->arrival_tsc = req->arrival_tsc;
	job->deadline_tsc = req->hdr->deadline_us != BW_DEADLINE_NONE
				    ? req->arrival_tsc + plat_us_to_tsc(req->hdr->deadline_us) : 0;
	job->num_inputs = req->num_tensors;
	job->num_outputs = req->num_tensors;
	for (uint16_t i = 0; i < req->num_tensors; i++) {
		/* Echo computes in place: each output is its input, in the request mbuf the reply reuses. */
		struct bw_segment seg = {(uint8_t *)req->tensors[i].data, req->tensors[i].desc->data_len};
		job->inputs[i] = seg;
		job->outputs[i] = seg;
	}
	job->owner[0] = req->mbuf;
	job->owner[1] = req->hdr;
	status = bat_submit(q, job, req->arrival_tsc);
	if (status == BW_STATUS_UNAVAILABLE)
		snprintf(msg, cap, "the batch scheduling queue is full (max_enqueued_batches %u, max_queue_size %u)",
			 opts->max_enqueued_batches, opts->max_queue_size);
	else if (status != BW_STATUS_OK)
		snprintf(msg, cap, "batch of %u rows refused: max_batch_size is %u", rows, opts->max_batch_size);
	else
		req->held = true;
	return status;
}

static enum bw_status service_infer(void *ctx __rte_unused, const void *handle, struct dp_request *req,
				    uint32_t body_cap __rte_unused, uint32_t *reply_len, uint16_t *reply_tensors,
				    char *msg, size_t msg_cap)
{
	const struct rt_model *model = handle;

	switch (model->kind) {
	case RT_MODEL_ECHO:
		*reply_len = req->hdr->body_len;
		*reply_tensors = req->num_tensors;
		return echo_submit(&g_lcores[rte_lcore_id()], req, msg, msg_cap);
	}
	snprintf(msg, msg_cap, "model '%s' has a kind this server cannot run", model->name);
	return BW_STATUS_INTERNAL;
}

/* The batcher is done with a request: answer it from the mbuf it has held. */
static void echo_job_done(void *ctx, struct bat_job *job, enum bw_status status)
{
	struct app_lcore *al = ctx;
	struct bw_hdr *hdr = job->owner[1];
	const char *msg = NULL;

	if (status == BW_STATUS_DEADLINE_EXCEEDED)
		msg = "the request's deadline passed before its batch ran";
	else if (status != BW_STATUS_OK)
		msg = "its batch failed";
	/* Echo's outputs are its inputs, already where the reply body goes. */
	dp_request_complete(al->dp, job->owner[0], hdr, status, hdr->body_len, hdr->num_tensors, msg);
}

/* The echo executor: nothing to compute, so a batch is finished as soon as it is submitted; it
 * completes from the completion poller, never inside submit, like a real executor's would. */
static int echo_executor_submit(void *ctx, struct bw_batch *batch)
{
	struct app_lcore *al = ctx;

	if (al->completions_count == APP_ECHO_COMPLETIONS)
		return -ENOBUFS;
	al->completions[(al->completions_head + al->completions_count++) % APP_ECHO_COMPLETIONS] = batch;
	return 0;
}

static enum plat_poll_result echo_completion_poll(void *arg)
{
	struct app_lcore *al = arg;
	uint64_t now;

	if (al->completions_count == 0)
		return PLAT_POLL_IDLE;
	now = plat_tsc_now();
	while (al->completions_count != 0) {
		struct bw_batch *batch = al->completions[al->completions_head];

		al->completions_head = (al->completions_head + 1) % APP_ECHO_COMPLETIONS;
		al->completions_count--;
		bat_batch_complete(batch, BW_STATUS_OK, now);
	}
	return PLAT_POLL_BUSY;
}

static enum plat_poll_result batch_window_poll(void *arg)
{
	struct app_lcore *al = arg;

	return bat_poll(al->echo_queue, plat_tsc_now()) != 0 ? PLAT_POLL_BUSY : PLAT_POLL_IDLE;
}

int app_service_init(struct app_service *svc, const struct app_config *cfg)
{
	const struct app_model_config *echo_cfg = &cfg->models[0];
	int ret;

	memset(svc, 0, sizeof(*svc));
	ret = rt_echo_init(&svc->echo, RT_ECHO_MODEL_ID, RT_ECHO_MODEL_NAME);
	if (ret != 0)
		return ret;
	/* MODEL_INFO tells clients how echo is batched. */
	svc->echo_batching = echo_cfg->batching;
	svc->echo.priority_levels = svc->echo_batching.priority_levels;
	svc->echo.max_batch_size = svc->echo_batching.max_batch_size;
	svc->echo.num_batch_sizes = svc->echo_batching.num_allowed_batch_sizes;
	for (uint16_t i = 0; i < svc->echo.num_batch_sizes && i < RT_BATCH_SIZES_MAX; i++)
		svc->echo.batch_sizes[i] = svc->echo_batching.allowed_batch_sizes[i];
	ret = rt_registry_add(&svc->registry, &svc->echo);
	if (ret != 0)
		return ret;
	svc->echo_limiter = bat_limiter_create(&svc->echo_batching);
	if (svc->echo_limiter == NULL)
		return -ENOMEM;
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

void app_service_fini(struct app_service *svc)
{
	bat_limiter_destroy(svc->echo_limiter);
	svc->echo_limiter = NULL;
}

int app_service_lcore_init(struct app_service *svc, struct dp_lcore *dp)
{
	struct app_lcore *al = &g_lcores[dp->lcore_id];
	struct bw_executor echo = {.submit = echo_executor_submit, .ctx = al};

	memset(al, 0, sizeof(*al));
	al->dp = dp;
	al->echo_queue = bat_queue_create(&svc->echo_batching, svc->echo_limiter, &echo, echo_job_done, al,
					  plat_tsc_hz, plat_tsc_now() ^ dp->lcore_id);
	return al->echo_queue != NULL ? 0 : -ENOMEM;
}

unsigned int app_service_pollers(unsigned int lcore_id, struct plat_poller *pollers)
{
	struct app_lcore *al = &g_lcores[lcore_id];
	unsigned int n = 0;

	pollers[n++] = (struct plat_poller){"rx", dp_rx_poll, al->dp};
	pollers[n++] = (struct plat_poller){"batch_windows", batch_window_poll, al};
	pollers[n++] = (struct plat_poller){"echo_completions", echo_completion_poll, al};
	pollers[n++] = (struct plat_poller){"tx_drain", dp_tx_drain_poll, al->dp};
	return n;
}

bool app_service_lcore_drain(unsigned int lcore_id, uint64_t max_us)
{
	struct app_lcore *al = &g_lcores[lcore_id];
	uint64_t end = plat_tsc_now() + plat_us_to_tsc(max_us);

	bat_queue_drain(al->echo_queue, plat_tsc_now());
	while (!bat_queue_empty(al->echo_queue) && plat_tsc_now() < end) {
		batch_window_poll(al);
		echo_completion_poll(al);
	}
	dp_tx_flush(al->dp);
	return bat_queue_empty(al->echo_queue);
}

void app_service_telemetry(struct rte_tel_data *d)
{
	static const char *const reasons[BW_DISPATCH_COUNT] = {"full", "timeout", "deadline", "slo", "idle", "drain"};
	struct bat_stats sum;
	struct rte_tel_data *dispatch, *sizes;
	char key[32];

	memset(&sum, 0, sizeof(sum));
	for (unsigned int l = 0; l < RTE_MAX_LCORE; l++) {
		const struct bat_stats *s;

		if (g_lcores[l].echo_queue == NULL)
			continue;
		s = bat_queue_stats(g_lcores[l].echo_queue);
		sum.jobs += s->jobs;
		sum.jobs_done += s->jobs_done;
		sum.rejected_full += s->rejected_full;
		sum.rejected_too_large += s->rejected_too_large;
		sum.splits += s->splits;
		sum.deadline_expired += s->deadline_expired;
		sum.batches += s->batches;
		sum.batches_failed += s->batches_failed;
		sum.rows += s->rows;
		sum.padding_rows += s->padding_rows;
		sum.window_wait_us += s->window_wait_us;
		for (unsigned int r = 0; r < BW_DISPATCH_COUNT; r++)
			sum.dispatch[r] += s->dispatch[r];
		for (unsigned int z = 0; z <= BAT_BATCH_SIZE_MAX; z++)
			sum.by_size[z] += s->by_size[z];
	}
	rte_tel_data_add_dict_u64(d, "batch_requests", sum.jobs);
	rte_tel_data_add_dict_u64(d, "batch_requests_done", sum.jobs_done);
	rte_tel_data_add_dict_u64(d, "batch_rejected_full", sum.rejected_full);
	rte_tel_data_add_dict_u64(d, "batch_rejected_too_large", sum.rejected_too_large);
	rte_tel_data_add_dict_u64(d, "batch_splits", sum.splits);
	rte_tel_data_add_dict_u64(d, "batch_deadline_expired", sum.deadline_expired);
	rte_tel_data_add_dict_u64(d, "batch_batches", sum.batches);
	rte_tel_data_add_dict_u64(d, "batch_failed", sum.batches_failed);
	rte_tel_data_add_dict_u64(d, "batch_rows", sum.rows);
	rte_tel_data_add_dict_u64(d, "batch_padding_rows", sum.padding_rows);
	rte_tel_data_add_dict_u64(d, "batch_window_wait_us", sum.window_wait_us);
	if (g_service != NULL) {
		rte_tel_data_add_dict_u64(d, "batch_inflight", bat_limiter_in_flight(g_service->echo_limiter));
		rte_tel_data_add_dict_u64(d, "batch_inflight_limit_milli",
					  (uint64_t)(bat_limiter_limit(g_service->echo_limiter) * 1000));
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
		rte_tel_data_add_dict_u64(dispatch, reasons[r], sum.dispatch[r]);
	rte_tel_data_start_dict(sizes);
	for (unsigned int z = 1; z <= BAT_BATCH_SIZE_MAX; z++) {
		if (sum.by_size[z] == 0)
			continue;
		snprintf(key, sizeof(key), "%u", z);
		if (rte_tel_data_add_dict_u64(sizes, key, sum.by_size[z]) != 0)
			break; /* the dict is full (256 entries): the largest sizes are left out */
	}
	rte_tel_data_add_dict_container(d, "batch_dispatch", dispatch, 0);
	rte_tel_data_add_dict_container(d, "batch_sizes", sizes, 0);
}
