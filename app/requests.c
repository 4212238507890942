/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Requests and replies: what the dataplane calls for a model (dp_model_ops), binding an INFER
 * request to its model's inputs, queueing it as a job with the polling lcore's batcher, and building
 * the reply in the request's own mbuf when the batcher is done with it. All of it on the polling
 * lcore, per request: no lock, allocation or system call.
 */
#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <rte_common.h>

#include "defs.h"
#include "graph.h"
#include "inject.h"

static const void *service_lookup(void *ctx, uint32_t id, const char *name, uint32_t name_len)
{
	const struct rt_registry *reg = ctx;

	if (id == BW_MODEL_ID_ANY)
		return rt_registry_find_name(reg, name, name_len);
	return rt_registry_find_id(reg, id & BW_MODEL_ID_MODEL_MASK);
}

static uint32_t service_priority_levels(const void *model)
{
	return ((const struct rt_model *)model)->priority_levels;
}

/* MODEL_INFO names a model, not a version: its id is the registered one's, its version the one a
 * request naming none gets (every version served has the same tensors). */
static int service_describe(const void *model, uint8_t *buf, uint32_t cap)
{
	struct app_model *m = container_of(model, struct app_model, spec);
	int len = rt_model_describe(model, buf, cap);
	uint32_t version;

	if (len >= (int)sizeof(struct bw_model_info) && m->served != NULL) {
		version = __atomic_load_n(&app_model_version(m, 0)->version, __ATOMIC_ACQUIRE);
		memcpy(buf + offsetof(struct bw_model_info, version), &version, sizeof(version));
	}
	return len;
}

/* A registered model is the spec at the head of its app_model. */
static uint32_t service_request_max(const void *model)
{
	return container_of(model, const struct app_model, spec)->cfg.max_request_bytes;
}

static bool service_source_allowed(const void *model, rte_be32_t src)
{
	return dp_allowed(container_of(model, const struct app_model, spec)->allow, src);
}

static bool service_auth_required(const void *model)
{
	return container_of(model, const struct app_model, spec)->cfg.auth_required;
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

void app_shape_format(char *buf, size_t cap, const uint32_t *dims, uint8_t rank, const char *batch)
{
	size_t off = (size_t)snprintf(buf, cap, "[");

	for (uint8_t d = 0; d < rank && off < cap; d++) {
		if (d == 0 && batch != NULL)
			off += (size_t)snprintf(buf + off, cap - off, "%s", batch);
		else
			off += (size_t)snprintf(buf + off, cap - off, "%s%u", d > 0 ? "," : "", dims[d]);
	}
	if (off < cap)
		snprintf(buf + off, cap - off, "]");
}

/* Where a tensor's payload is: contiguous in the datagram, or across the message's pages. */
static struct bw_segment tensor_segment(const struct dp_request *req, const struct bw_tensor_view *v)
{
	if (v->data != NULL)
		return bw_segment_flat((uint8_t *)v->data, v->desc->data_len);
	return (struct bw_segment){NULL, v->desc->data_len, v->offset, req->pages};
}

/* Element e of an int32 or int64 segment, wherever its bytes lie (unaligned; one may cross a page). */
static int64_t index_at(const struct bw_segment *seg, uint8_t dtype, uint32_t e)
{
	uint32_t size = dtype == BW_DTYPE_INT64 ? 8 : 4;
	int64_t v64;
	int32_t v32;

	if (seg->pages == NULL) {
		if (size == 8) {
			memcpy(&v64, seg->data + (size_t)e * 8, 8);
			return v64;
		}
		memcpy(&v32, seg->data + (size_t)e * 4, 4);
		return v32;
	}
	struct bw_segment one = bw_segment_slice(seg, e * size, size);

	if (size == 8) {
		bw_segment_read(&one, (uint8_t *)&v64);
		return v64;
	}
	bw_segment_read(&one, (uint8_t *)&v32);
	return v32;
}

/*
 * An input that indexes a table (spec->index_bound, the runtime's Gather bound): every value in
 * [-bound, bound), checked here so that a bad token id fails its own request, not the batch it
 * would share (the Gather refuses it at run time, failing every request of the batch).
 * \return whether they all are, msg naming the first that is not.
 */
bool app_index_check(const struct rt_tensor_spec *spec, const struct bw_segment *seg, char *msg, size_t cap)
{
	uint32_t count = seg->len / (spec->dtype == BW_DTYPE_INT64 ? 8u : 4u);
	int64_t lo = -spec->index_bound, hi = spec->index_bound;

	for (uint32_t e = 0; e < count; e++) {
		int64_t v = index_at(seg, spec->dtype, e);

		if (v < lo || v >= hi) {
			snprintf(msg, cap, "input '%s': value %" PRId64 " at element %u is outside [%" PRId64 ", %" PRId64
				 "): the table it indexes has %" PRId64 " rows", spec->name, v, e, lo, hi, hi);
			return false;
		}
	}
	return true;
}

/*
 * ONNX: matches the request's tensors to the model's inputs (by index, or by name when the index is
 * BW_TENSOR_BY_NAME) and checks dtype, shape and, for inputs that index a table, their values.
 * \return the rows, or 0 with msg saying why.
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
				char name[65]; /* the peer's bytes, printable, cut to 64 */
				bool cut = bw_name_printable(name, sizeof(name), v->name, d->name_len);

				snprintf(msg, cap, "tensor %u: model '%s' has no input named '%s'%s", t, model->name, name,
					 cut ? " (name cut)" : "");
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
			app_shape_format(got, sizeof(got), dims, d->rank, NULL);
			app_shape_format(want, sizeof(want), spec->dims, spec->rank, "N");
			snprintf(msg, cap, "input '%s': shape %s, expected %s with N > 0 rows, the same N in every input",
				 spec->name, got, want);
			return 0;
		}
		if (spec->index_bound > 0) {
			struct bw_segment seg = tensor_segment(req, v);

			if (!app_index_check(spec, &seg, msg, cap))
				return 0;
		}
		rows = d->dims[0];
	}
	return rows;
}

struct bat_job *app_job_take(struct bat_queue *q, uint32_t rows, uint16_t num_inputs, uint16_t num_outputs,
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
	enum bw_status status;

	job->priority = req->hdr->priority;
	job->arrival_tsc = req->arrival_tsc;
	job->deadline_tsc = req->hdr->deadline_us != BW_DEADLINE_NONE
				    ? req->arrival_tsc + plat_us_to_tsc(req->hdr->deadline_us) : 0;
	job->owner[0] = req->mbuf;
	job->owner[1] = req->hdr;
	job->owner[2] = req->msg;
	status = bat_submit(q, job, req->arrival_tsc);
	if (status != BW_STATUS_OK)
		app_job_refusal(q, job->rows, status, msg, cap);
	else
		req->held = true;
	return status;
}

void app_job_refusal(const struct bat_queue *q, uint32_t rows, enum bw_status status, char *msg, size_t cap)
{
	const struct bat_options *opts = bat_queue_options(q);

	if (status == BW_STATUS_UNAVAILABLE)
		snprintf(msg, cap, "the batch scheduling queue is full (max_enqueued_batches %u, max_queue_size %u)",
			 opts->max_enqueued_batches, opts->max_queue_size);
	else
		snprintf(msg, cap, "batch of %u rows refused: max_batch_size is %u", rows, opts->max_batch_size);
}


bool app_version_admit(const struct app_model *m, uint32_t named, uint32_t *version, char *msg, size_t cap)
{
	*version = __atomic_load_n(&m->version, __ATOMIC_ACQUIRE);
	if (likely(named == 0 || named == *version))
		return true;
	/* a reload moved the model between the routing and here */
	snprintf(msg, cap, "model '%s' serves version %u, not version %u", m->spec.name, *version, named);
	return false;
}

/* The version a request names in its model_id (0: whichever serves). */
static uint32_t version_named(const struct dp_request *req)
{
	return req->hdr->model_id >> BW_MODEL_ID_VERSION_SHIFT;
}

enum bw_status app_echo_request_queue(struct app_channel *ch, struct dp_request *req, uint32_t body_cap __rte_unused,
				      char *msg, size_t cap)
{
	uint32_t rows = echo_request_rows(req, msg, cap), version;
	struct bat_job *job;

	if (rows == 0)
		return BW_STATUS_INVALID_ARGUMENT;
	if (!app_version_admit(ch->model, version_named(req), &version, msg, cap))
		return BW_STATUS_NOT_FOUND;
	job = app_job_take(ch->queue, rows, req->num_tensors, req->num_tensors, msg, cap);
	if (job == NULL)
		return BW_STATUS_RESOURCE_EXHAUSTED;
	job->version = version;
	job->version_pinned = version_named(req) != 0;
	for (uint16_t i = 0; i < req->num_tensors; i++) {
		/* Echo computes in place: each output is its input, in the request mbufs the reply reuses. */
		struct bw_segment seg = tensor_segment(req, &req->tensors[i]);
		job->inputs[i] = seg;
		job->outputs[i] = seg;
	}
	return job_submit(ch->queue, job, req, msg, cap);
}

/*
 * Where the outputs go. A request of one datagram whose reply fits its mbuf stages them there, past
 * everything the request holds (its body, and the room the reply's descriptors will take), so that no
 * output row lands on an input row a later piece of a split request still has to gather; the reply is
 * then descriptors + the staged bytes, moved down once (app_onnx_job_done). Any other request gets
 * reply pages of its own from the dataplane, the outputs written at their place in the reply.
 */
static enum bw_status onnx_outputs_place(struct app_channel *ch, struct dp_request *req, struct bw_segment *outputs,
					 uint32_t rows, uint32_t body_cap, char *msg, size_t cap)
{
	const struct rt_model *model = &ch->model->spec;
	uint32_t desc_bytes = ch->model->reply_desc_bytes;
	uint64_t out_bytes = (uint64_t)rows * ch->model->output_row_bytes; /* rows come from the wire */
	uint32_t stage = bw_pad8(RTE_MAX(req->body_len, desc_bytes));
	const struct bw_pages *pages;
	uint32_t off;
	int rc;

	if (rows > bat_queue_options(ch->queue)->max_batch_size) {
		/* bat_submit refuses it (and counts it): no room is reserved for a reply it will not have */
		for (uint16_t o = 0; o < model->num_outputs; o++)
			outputs[o] = bw_segment_flat(NULL, rows * model->output_row_bytes[o]);
		return BW_STATUS_OK;
	}
	/* an unsigned request is held to no reply larger than itself before it costs a slot or a batch
	 * row: a forged source buys no compute */
	if (dp_request_amplifies(ch->lcore->dp, req, desc_bytes + out_bytes, msg, cap))
		return BW_STATUS_RESOURCE_EXHAUSTED;
	if (req->msg == NULL && stage + out_bytes <= body_cap) {
		uint8_t *out = req->body + stage;

		for (uint16_t o = 0; o < model->num_outputs; o++) {
			uint32_t len = rows * model->output_row_bytes[o];
			outputs[o] = bw_segment_flat(out, len);
			out += len;
		}
		return BW_STATUS_OK;
	}
	if (desc_bytes + out_bytes > UINT32_MAX)
		rc = -EMSGSIZE;
	else
		rc = dp_request_reply_pages(ch->lcore->dp, req, (uint32_t)(desc_bytes + out_bytes), &pages);
	if (rc == -EMSGSIZE) {
		snprintf(msg, cap, "the reply to %u rows (%" PRIu64 " bytes of outputs) exceeds this server's message limit",
			 rows, out_bytes);
		return BW_STATUS_INVALID_ARGUMENT;
	}
	if (rc < 0) {
		snprintf(msg, cap, "no room for a reply of %" PRIu64 " bytes on this core now (%s): try again",
			 desc_bytes + out_bytes, rc == -ENOSPC ? "every message entry is taken" : "no free mbufs");
		return BW_STATUS_RESOURCE_EXHAUSTED;
	}
	off = desc_bytes;
	for (uint16_t o = 0; o < model->num_outputs; o++) {
		uint32_t len = rows * model->output_row_bytes[o];
		outputs[o] = (struct bw_segment){NULL, len, off, pages};
		off += len;
	}
	return BW_STATUS_OK;
}

enum bw_status app_onnx_request_queue(struct app_channel *ch, struct dp_request *req, uint32_t body_cap, char *msg,
				      size_t cap)
{
	const struct rt_model *model = &ch->model->spec;
	const struct bw_tensor_view *by_input[RT_MODEL_TENSORS_MAX];
	struct bw_segment outputs[BW_BATCH_TENSORS_MAX];
	uint32_t rows = onnx_request_bind(model, req, by_input, msg, cap), version;
	enum bw_status status;
	struct bat_job *job;

	if (rows == 0)
		return BW_STATUS_INVALID_ARGUMENT;
	/* the version it runs on, fixed now: its batch runs on that one or is refused */
	if (!app_version_admit(ch->model, version_named(req), &version, msg, cap))
		return BW_STATUS_NOT_FOUND;
	/* Reply pages taken here are given back with the request if it goes no further (req->msg). */
	status = onnx_outputs_place(ch, req, outputs, rows, body_cap, msg, cap);
	if (status != BW_STATUS_OK)
		return status;
	job = app_job_take(ch->queue, rows, model->num_inputs, model->num_outputs, msg, cap);
	if (job == NULL)
		return BW_STATUS_RESOURCE_EXHAUSTED;
	job->version = version;
	job->version_pinned = version_named(req) != 0;
	for (uint16_t i = 0; i < model->num_inputs; i++)
		job->inputs[i] = tensor_segment(req, by_input[i]);
	memcpy(job->outputs, outputs, model->num_outputs * sizeof(outputs[0]));
	return job_submit(ch->queue, job, req, msg, cap);
}

/*
 * (hot) The request's channel is its model's on this lcore (the version's it names, or the highest
 * served); the model's engine binds and queues it.
 */
static enum bw_status service_infer(void *lcore_ctx, const void *handle, struct dp_request *req, uint32_t body_cap,
				    char *msg, size_t msg_cap)
{
	struct app_model *named = container_of(handle, struct app_model, spec);
	uint32_t want = version_named(req);
	struct app_model *m = app_model_version(named, want);
	struct app_channel *ch;

	if (unlikely(m == NULL)) {
		char served[48];

		app_model_versions_format(named, served, sizeof(served));
		snprintf(msg, msg_cap, "model '%s' serves version%s %s, not version %u", named->spec.name,
			 named->served != NULL ? "s" : "", served, want);
		return BW_STATUS_NOT_FOUND;
	}
	ch = &((struct app_lcore *)lcore_ctx)->channels[m->spec.id];
	if (unlikely(!app_channel_healthy(ch, msg, msg_cap)))
		return BW_STATUS_UNAVAILABLE;
	return ch->model->engine->request_queue(ch, req, body_cap, msg, msg_cap);
}

bool app_channel_healthy(const struct app_channel *ch, char *msg, size_t cap)
{
	const struct bw_executor_ops *ex = ch->executor.ops;
	char why[160];

	if (ex->health == NULL || likely(ex->health(ch->executor.ctx, why, sizeof(why)) == 0))
		return true;
	snprintf(msg, cap, "model '%s' is unavailable: %s", ch->model->spec.name, why);
	return false;
}

struct dp_model_ops app_model_ops(struct app_service *svc)
{
	return (struct dp_model_ops){
		.lookup = service_lookup,
		.priority_levels = service_priority_levels,
		.source_allowed = service_source_allowed,
		.auth_required = service_auth_required,
		.describe = service_describe,
		.request_max = service_request_max,
		.infer = service_infer,
		.ctx = &svc->registry,
	};
}

const char *app_job_refusal_text(const struct app_model *m, const struct bat_job *job, enum bw_status status, char *buf,
				 size_t cap)
{
	uint32_t now = __atomic_load_n(&m->version, __ATOMIC_ACQUIRE);

	if (status == BW_STATUS_UNAVAILABLE && job->version != now) {
		snprintf(buf, cap, "version %u of model '%s' is no longer served (a reload replaced it by version %u): "
			 "send the request again", job->version, m->spec.name, now);
		return buf;
	}
	return app_job_error_message(status);
}

const char *app_job_error_message(enum bw_status status)
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

void app_job_done(void *ctx, struct bat_job *job, enum bw_status status)
{
	struct app_channel *ch = ctx;

	if (unlikely(job->owner[1] == NULL)) {
		app_inject_job_done(ch, job, status);
		return;
	}
	ch->model->engine->job_done(ctx, job, status);
}

/* The batcher is done with an echo request: answer it from the mbuf it has held. */
void app_echo_job_done(void *ctx, struct bat_job *job, enum bw_status status)
{
	struct app_channel *ch = ctx;
	struct bw_hdr *hdr = job->owner[1];
	char why[APP_JOB_TEXT_MAX];

	/* Echo's outputs are its inputs, already where the reply body goes (the whole message's). */
	dp_request_complete(ch->lcore->dp, job->owner[0], hdr, job->owner[2], status, hdr->total_body_len,
			    hdr->num_tensors,
			    status == BW_STATUS_OK ? NULL : app_job_refusal_text(ch->model, job, status, why, sizeof(why)));
}

/* Writes the reply's output descriptors into it: at its body (one datagram) or into its pages. */
static uint32_t reply_descs_write(const struct rt_model *model, uint32_t rows, uint8_t *body,
				  const struct bw_pages *pages)
{
	uint8_t one[sizeof(struct bw_tensor_desc) + BW_MAX_NAME_LEN + 8];
	uint32_t off = 0;

	for (uint16_t o = 0; o < model->num_outputs; o++) {
		const struct rt_tensor_spec *spec = &model->outputs[o];
		uint32_t dims[BW_MAX_RANK], n;

		memcpy(dims, spec->dims, sizeof(dims));
		dims[0] = rows;
		n = bw_tensor_desc_write(pages != NULL ? one : body + off, o, spec->dtype, spec->rank, dims, spec->name,
					 (uint16_t)strlen(spec->name), rows * model->output_row_bytes[o]);
		if (pages != NULL) {
			struct bw_segment at = {NULL, n, off, pages};
			bw_segment_write(&at, one);
		}
		off += n;
	}
	return off;
}

/* An ONNX request is done: descriptors, then the outputs (moved down behind them when they were
 * staged in the request's own datagram, already in place in reply pages). */
void app_onnx_job_done(void *ctx, struct bat_job *job, enum bw_status status)
{
	struct app_channel *ch = ctx;
	const struct rt_model *model = &ch->model->spec;
	struct bw_hdr *hdr = job->owner[1];
	const struct bw_pages *pages = job->outputs[0].pages;
	uint8_t *body = (uint8_t *)(hdr + 1);
	uint32_t out_bytes = job->rows * ch->model->output_row_bytes, desc_bytes;

	if (status != BW_STATUS_OK) {
		char why[APP_JOB_TEXT_MAX];

		dp_request_complete(ch->lcore->dp, job->owner[0], hdr, job->owner[2], status, 0, 0,
				    app_job_refusal_text(ch->model, job, status, why, sizeof(why)));
		return;
	}
	/* Staged outputs start at or past the end of the descriptors: writing them first is safe. */
	desc_bytes = reply_descs_write(model, job->rows, body, pages);
	if (pages == NULL)
		memmove(body + desc_bytes, job->outputs[0].data, out_bytes);
	dp_request_complete(ch->lcore->dp, job->owner[0], hdr, job->owner[2], BW_STATUS_OK, desc_bytes + out_bytes,
			    model->num_outputs, NULL);
}

/* The reply's fixed parts: every reply carries the output descriptors with their names. */
void app_reply_layout(struct app_model *m)
{
	for (uint16_t o = 0; o < m->spec.num_outputs; o++) {
		m->reply_desc_bytes += (uint32_t)sizeof(struct bw_tensor_desc) +
				       bw_pad8((uint32_t)strlen(m->spec.outputs[o].name));
		m->output_row_bytes += m->spec.output_row_bytes[o];
	}
}
