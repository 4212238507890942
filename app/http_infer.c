/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * POST /v2/models/NAME[/versions/1]/infer: KServe v2's inference request, JSON tensors and Triton's
 * binary-tensor extension (a JSON header of Inference-Header-Content-Length bytes, then each
 * binary input's bytes in the order of the inputs). On an HTTP thread: admitted at its headers (the
 * model's checks, and a body no larger than the model's inputs can take, before a byte of it is
 * read), given an inference slot (inject.h) before its body is buffered, its JSON's values counted
 * before it is parsed; then checked against the model's inputs, its tensors written into the slot,
 * the slot handed to a polling lcore, whose batcher runs it beside the UDP requests, and the outputs
 * written back as JSON or binary as each output asks. It allocates and sleeps freely: it is not on
 * the hot path.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include <batchwire/dtype.h>
#include <batchwire/elem.h>

#include "defs.h"
#include "http.h"
#include "inject.h"

#define INFER_WAIT_S 60            /* longest an answer is waited for without a request timeout */
#define INFER_WAKE_NS 100000000ull /* a waiter looks whether the server stopped this often */
#define INFER_JSON_VALUE_BYTES 32  /* the most text one number takes in the JSON ("-1.2345678901234567e-308,") */
#define INFER_JSON_SLACK (64u << 10) /* the JSON beside the numbers: names, shapes, parameters */
#define INFER_JSON_VALUES_SLACK 4096 /* values beside the tensors' elements: shapes, parameters */
#define INFER_JSON_DEPTH BW_MAX_RANK

/* One tensor of the request or the reply, as KServe names it. */
struct infer_tensor {
	char name[RT_MODEL_NAME_MAX];
	uint8_t dtype;
	uint8_t rank;
	uint32_t dims[BW_MAX_RANK];
	uint64_t elems;
	uint32_t bytes;
};

struct infer_request {
	uint16_t num_inputs;
	struct infer_tensor in[BW_BATCH_TENSORS_MAX];   /* in the model's input order */
	json_t *in_json[BW_BATCH_TENSORS_MAX];          /* borrowed from the parsed header */
	uint16_t num_outputs;
	struct infer_tensor out[BW_BATCH_TENSORS_MAX];  /* in the model's output order */
	bool out_wanted[BW_BATCH_TENSORS_MAX];
	bool out_binary[BW_BATCH_TENSORS_MAX];
	uint32_t rows;
	const uint8_t *binary;                          /* the binary part after the JSON header */
	size_t binary_len;
};

const char *app_kserve_datatype(uint8_t dtype)
{
	switch (dtype) {
	case BW_DTYPE_FLOAT: return "FP32";
	case BW_DTYPE_FLOAT16: return "FP16";
	case BW_DTYPE_BFLOAT16: return "BF16";
	case BW_DTYPE_DOUBLE: return "FP64";
	case BW_DTYPE_INT8: return "INT8";
	case BW_DTYPE_INT16: return "INT16";
	case BW_DTYPE_INT32: return "INT32";
	case BW_DTYPE_INT64: return "INT64";
	case BW_DTYPE_UINT8: return "UINT8";
	case BW_DTYPE_UINT16: return "UINT16";
	case BW_DTYPE_UINT32: return "UINT32";
	case BW_DTYPE_UINT64: return "UINT64";
	case BW_DTYPE_BOOL: return "BOOL";
	default: return "BYTES";
	}
}

/* The dtype KServe's name stands for (0: none we serve, BYTES among them). */
static uint8_t dtype_of_kserve(const char *name)
{
	static const uint8_t all[] = { BW_DTYPE_FLOAT, BW_DTYPE_FLOAT16, BW_DTYPE_BFLOAT16, BW_DTYPE_DOUBLE,
				       BW_DTYPE_INT8, BW_DTYPE_INT16, BW_DTYPE_INT32, BW_DTYPE_INT64, BW_DTYPE_UINT8,
				       BW_DTYPE_UINT16, BW_DTYPE_UINT32, BW_DTYPE_UINT64, BW_DTYPE_BOOL };

	for (unsigned int i = 0; i < RTE_DIM(all); i++) {
		if (strcmp(app_kserve_datatype(all[i]), name) == 0)
			return all[i];
	}
	return 0;
}

static void __attribute__((format(printf, 3, 4))) fail(struct app_http_reply *out, unsigned int status,
							 const char *fmt, ...)
{
	char text[512];
	json_t *j;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	j = json_pack("{s:s}", "error", text);
	out->status = status;
	out->body = j != NULL ? json_dumps(j, JSON_COMPACT) : NULL;
	out->len = out->body != NULL ? strlen(out->body) : 0;
	out->header_len = 0;
	json_decref(j);
}

/* KServe's status codes for ours (Triton answers 400 for most; these say more). */
static unsigned int http_status_of(enum bw_status s)
{
	switch (s) {
	case BW_STATUS_OK: return 200;
	case BW_STATUS_INVALID_ARGUMENT: return 400;
	case BW_STATUS_NOT_FOUND: return 404;
	case BW_STATUS_UNAUTHENTICATED: return 401;
	case BW_STATUS_RESOURCE_EXHAUSTED: return 429;
	case BW_STATUS_DEADLINE_EXCEEDED: return 504;
	case BW_STATUS_UNAVAILABLE: return 503;
	case BW_STATUS_UNIMPLEMENTED: return 501;
	default: return 500;
	}
}

/* ---- the request -------------------------------------------------------------------------------- */

/* A tensor's "shape": rank 1..BW_MAX_RANK, every dimension > 0; its elements and bytes. */
static int shape_parse(const json_t *shape, struct infer_tensor *t, char *why, size_t cap)
{
	size_t n = json_is_array(shape) ? json_array_size(shape) : 0;
	uint64_t elems = 1;

	if (n == 0 || n > BW_MAX_RANK) {
		snprintf(why, cap, "'shape' must be a list of 1..%u dimensions", BW_MAX_RANK);
		return -EINVAL;
	}
	for (size_t d = 0; d < n; d++) {
		const json_t *v = json_array_get(shape, d);
		json_int_t dim = json_is_integer(v) ? json_integer_value(v) : 0;

		if (dim <= 0 || dim > UINT32_MAX) {
			snprintf(why, cap, "'shape' dimension %zu must be an integer > 0", d);
			return -EINVAL;
		}
		t->dims[d] = (uint32_t)dim;
		elems *= (uint64_t)dim;
		if (elems > UINT32_MAX) {
			snprintf(why, cap, "'shape' has more than 2^32 elements");
			return -EINVAL;
		}
	}
	t->rank = (uint8_t)n;
	t->elems = elems;
	if (elems * bw_dtype_size(t->dtype) > UINT32_MAX) {
		snprintf(why, cap, "the tensor is larger than 4 GiB");
		return -EINVAL;
	}
	t->bytes = (uint32_t)(elems * bw_dtype_size(t->dtype));
	return 0;
}

/* One input object against the model (ONNX: its input by name; echo: any tensor). */
static int input_parse(const struct app_model *m, json_t *obj, struct infer_request *q, unsigned int nth,
		       struct app_http_reply *out)
{
	const struct rt_model *spec = &m->spec;
	const char *name = json_string_value(json_object_get(obj, "name"));
	const char *datatype = json_string_value(json_object_get(obj, "datatype"));
	struct infer_tensor t = { 0 };
	unsigned int i = nth;
	char why[160];

	if (name == NULL || datatype == NULL) {
		fail(out, 400, "input %u: 'name' and 'datatype' are required strings", nth);
		return -EINVAL;
	}
	if (strlen(name) >= sizeof(t.name)) {
		fail(out, 400, "input %u: its name is longer than %u bytes", nth, RT_MODEL_NAME_MAX - 1);
		return -EINVAL;
	}
	snprintf(t.name, sizeof(t.name), "%s", name);
	t.dtype = dtype_of_kserve(datatype);
	if (spec->num_inputs > 0) {
		for (i = 0; i < spec->num_inputs && strcmp(spec->inputs[i].name, name) != 0; i++)
			;
		if (i == spec->num_inputs) {
			fail(out, 400, "model '%s' has no input named '%s'", spec->name, name);
			return -EINVAL;
		}
		if (q->in_json[i] != NULL) {
			fail(out, 400, "input '%s' given twice", name);
			return -EINVAL;
		}
		if (t.dtype != spec->inputs[i].dtype) {
			fail(out, 400, "input '%s': datatype %s, expected %s", name, datatype,
			     app_kserve_datatype(spec->inputs[i].dtype));
			return -EINVAL;
		}
	} else if (t.dtype == 0) {
		fail(out, 400, "input '%s': datatype '%s' is not served (BYTES and unknown names are not)", name, datatype);
		return -EINVAL;
	}
	if (shape_parse(json_object_get(obj, "shape"), &t, why, sizeof(why)) != 0) {
		fail(out, 400, "input '%s': %s", name, why);
		return -EINVAL;
	}
	if (spec->num_inputs > 0) {
		const struct rt_tensor_spec *s = &spec->inputs[i];
		bool ok = t.rank == s->rank;

		for (uint8_t d = 1; ok && d < t.rank; d++)
			ok = t.dims[d] == s->dims[d];
		if (!ok) {
			char got[96], want[96];

			app_shape_format(got, sizeof(got), t.dims, t.rank, NULL);
			app_shape_format(want, sizeof(want), s->dims, s->rank, "-1"); /* KServe's dynamic dimension */
			fail(out, 400, "input '%s': shape %s, expected %s", name, got, want);
			return -EINVAL;
		}
	}
	if (q->rows != 0 && t.dims[0] != q->rows) {
		fail(out, 400, "input '%s': %u rows, but another input has %u: the first dimension is the batch, the "
		     "same in every input", name, t.dims[0], q->rows);
		return -EINVAL;
	}
	q->rows = t.dims[0];
	q->in[i] = t;
	q->in_json[i] = obj;
	return 0;
}

/* Collects the nested lists of "data" in row-major order into at. \return elements written or -1. */
static int64_t data_flatten(const json_t *v, const json_t **at, uint64_t room, unsigned int depth)
{
	int64_t n = 0;

	if (!json_is_array(v)) {
		if (room == 0)
			return -1;
		at[0] = v;
		return 1;
	}
	if (depth == INFER_JSON_DEPTH)
		return -1;
	for (size_t k = 0; k < json_array_size(v); k++) {
		int64_t got = data_flatten(json_array_get(v, k), at + n, room - (uint64_t)n, depth + 1);

		if (got < 0)
			return -1;
		n += got;
	}
	return n;
}

/* An integer dtype's range, as json_int_t (UINT64 above INT64_MAX is not reachable through JSON). */
static void int_range(uint8_t dtype, json_int_t *lo, json_int_t *hi)
{
	switch (dtype) {
	case BW_DTYPE_INT8: *lo = INT8_MIN; *hi = INT8_MAX; break;
	case BW_DTYPE_INT16: *lo = INT16_MIN; *hi = INT16_MAX; break;
	case BW_DTYPE_INT32: *lo = INT32_MIN; *hi = INT32_MAX; break;
	case BW_DTYPE_UINT8: *lo = 0; *hi = UINT8_MAX; break;
	case BW_DTYPE_UINT16: *lo = 0; *hi = UINT16_MAX; break;
	case BW_DTYPE_UINT32: *lo = 0; *hi = UINT32_MAX; break;
	case BW_DTYPE_UINT64: *lo = 0; *hi = LLONG_MAX; break;
	default: *lo = LLONG_MIN; *hi = LLONG_MAX; break;
	}
}

/* One JSON element into element e of dst. */
static bool elem_store(uint8_t dtype, uint8_t *dst, uint64_t e, const json_t *v)
{
	json_int_t lo, hi, x;

	switch (dtype) {
	case BW_DTYPE_FLOAT:
	case BW_DTYPE_DOUBLE:
	case BW_DTYPE_FLOAT16:
	case BW_DTYPE_BFLOAT16:
		if (!json_is_number(v))
			return false;
		bw_elem_set(dtype, dst, e, json_number_value(v));
		return true;
	case BW_DTYPE_BOOL:
		if (!json_is_boolean(v))
			return false;
		dst[e] = json_is_true(v);
		return true;
	default:
		if (!json_is_integer(v))
			return false;
		x = json_integer_value(v);
		int_range(dtype, &lo, &hi);
		if (x < lo || x > hi)
			return false;
		if (dtype == BW_DTYPE_INT64 || dtype == BW_DTYPE_UINT64) {
			int64_t x64 = x;
			memcpy(dst + e * 8, &x64, 8);
		} else {
			bw_elem_set(dtype, dst, e, (double)x);
		}
		return true;
	}
}

/* Input i's values into dst: its binary part (binary_data_size) or its "data". */
static int input_data_fill(struct infer_request *q, unsigned int i, uint8_t *dst, size_t *binary_at,
			   struct app_http_reply *out)
{
	const struct infer_tensor *t = &q->in[i];
	const json_t *params = json_object_get(q->in_json[i], "parameters");
	const json_t *size = json_object_get(params, "binary_data_size");
	const json_t *data = json_object_get(q->in_json[i], "data");
	const json_t **flat;
	int64_t n;

	if (size != NULL) {
		json_int_t len = json_is_integer(size) ? json_integer_value(size) : -1;

		if (len != (json_int_t)t->bytes) {
			fail(out, 400, "input '%s': binary_data_size must be its %" PRIu32 " bytes (%s x %" PRIu64 ")", t->name,
			     t->bytes, app_kserve_datatype(t->dtype), t->elems);
			return -EINVAL;
		}
		if (q->binary_len - *binary_at < t->bytes) {
			fail(out, 400, "input '%s': the binary part ends %zu bytes short of its data", t->name,
			     t->bytes - (q->binary_len - *binary_at));
			return -EINVAL;
		}
		memcpy(dst, q->binary + *binary_at, t->bytes);
		*binary_at += t->bytes;
		return 0;
	}
	if (data == NULL) {
		fail(out, 400, "input '%s': no 'data', and no binary_data_size parameter", t->name);
		return -EINVAL;
	}
	flat = malloc(sizeof(*flat) * (t->elems + 1));
	if (flat == NULL) {
		fail(out, 500, "out of memory for input '%s'", t->name);
		return -ENOMEM;
	}
	n = data_flatten(data, flat, t->elems + 1, 0);
	if (n != (int64_t)t->elems) {
		free(flat);
		fail(out, 400, "input '%s': 'data' must hold its shape's %" PRIu64 " elements, in lists at most %u deep",
		     t->name, t->elems, INFER_JSON_DEPTH);
		return -EINVAL;
	}
	for (uint64_t e = 0; e < t->elems; e++) {
		if (!elem_store(t->dtype, dst, e, flat[e])) {
			free(flat);
			fail(out, 400, "input '%s': element %" PRIu64 " is not a %s value", t->name, e,
			     app_kserve_datatype(t->dtype));
			return -EINVAL;
		}
	}
	free(flat);
	return 0;
}

/* The outputs the reply carries and how: "outputs" by name, or every one. */
static int outputs_choose(const struct app_model *m, json_t *root, struct infer_request *q, struct app_http_reply *out)
{
	const json_t *list = json_object_get(root, "outputs");
	const json_t *binary_all = json_object_get(json_object_get(root, "parameters"), "binary_data_output");

	if (list == NULL || json_array_size(list) == 0) {
		for (uint16_t o = 0; o < q->num_outputs; o++) {
			q->out_wanted[o] = true;
			q->out_binary[o] = json_is_true(binary_all);
		}
		return 0;
	}
	if (!json_is_array(list)) {
		fail(out, 400, "'outputs' must be a list");
		return -EINVAL;
	}
	for (size_t k = 0; k < json_array_size(list); k++) {
		const json_t *obj = json_array_get(list, k);
		const char *name = json_string_value(json_object_get(obj, "name"));
		uint16_t o;

		for (o = 0; name != NULL && o < q->num_outputs && strcmp(q->out[o].name, name) != 0; o++)
			;
		if (name == NULL || o == q->num_outputs) {
			fail(out, 400, "model '%s' has no output named '%s'", m->spec.name, name != NULL ? name : "");
			return -EINVAL;
		}
		q->out_wanted[o] = true;
		q->out_binary[o] = json_is_true(json_object_get(json_object_get(obj, "parameters"), "binary_data"));
	}
	return 0;
}

/* ---- the reply ---------------------------------------------------------------------------------- */

static json_t *output_data_json(const struct infer_tensor *t, const uint8_t *src)
{
	json_t *list = json_array();

	for (uint64_t e = 0; list != NULL && e < t->elems; e++) {
		json_t *v;

		switch (t->dtype) {
		case BW_DTYPE_FLOAT:
		case BW_DTYPE_DOUBLE:
		case BW_DTYPE_FLOAT16:
		case BW_DTYPE_BFLOAT16: {
			double x = bw_elem_get(t->dtype, src, e);
			v = isfinite(x) ? json_real(x) : json_null(); /* JSON has no NaN or infinity */
			break;
		}
		case BW_DTYPE_BOOL:
			v = json_boolean(src[e] != 0);
			break;
		case BW_DTYPE_INT64:
		case BW_DTYPE_UINT64: {
			int64_t x64;
			memcpy(&x64, src + e * 8, 8);
			v = json_integer(x64);
			break;
		}
		default:
			v = json_integer((json_int_t)bw_elem_get(t->dtype, src, e));
			break;
		}
		json_array_append_new(list, v);
	}
	return list;
}

static void reply_build(const struct app_model *m, const struct infer_request *q, const struct app_inject *r,
			const char *id, struct app_http_reply *out)
{
	json_t *root = json_pack("{s:s, s:s}", "model_name", m->spec.name, "model_version", "1");
	json_t *outputs = json_array();
	size_t binary = 0, json_len;
	bool wide = false;
	char *text;

	if (id != NULL)
		json_object_set_new(root, "id", json_string(id));
	for (uint16_t o = 0; o < q->num_outputs; o++) {
		const struct infer_tensor *t = &q->out[o];
		json_t *shape = json_array(), *obj;

		if (!q->out_wanted[o])
			continue;
		for (uint8_t d = 0; d < t->rank; d++)
			json_array_append_new(shape, json_integer(t->dims[d]));
		obj = json_pack("{s:s, s:s, s:o}", "name", t->name, "datatype", app_kserve_datatype(t->dtype), "shape",
				shape);
		if (q->out_binary[o]) {
			json_object_set_new(obj, "parameters", json_pack("{s:I}", "binary_data_size", (json_int_t)t->bytes));
			binary += t->bytes;
		} else {
			json_object_set_new(obj, "data", output_data_json(t, r->data + r->out[o].off));
			wide |= t->dtype == BW_DTYPE_DOUBLE;
		}
		json_array_append_new(outputs, obj);
	}
	json_object_set_new(root, "outputs", outputs);
	/* 9 significant digits give a float32 back exactly; a double needs 17 */
	text = json_dumps(root, JSON_COMPACT | JSON_REAL_PRECISION(wide ? 17 : 9));
	json_decref(root);
	if (text == NULL) {
		fail(out, 500, "out of memory for the reply");
		return;
	}
	json_len = strlen(text);
	out->status = 200;
	out->header_len = binary != 0 ? json_len : 0;
	out->len = json_len + binary;
	out->body = binary != 0 ? realloc(text, out->len) : text;
	if (out->body == NULL) {
		free(text);
		fail(out, 500, "out of memory for the reply");
		return;
	}
	/* each binary output's bytes after the header, in the order of the outputs */
	for (uint16_t o = 0; o < q->num_outputs; o++) {
		if (!q->out_wanted[o] || !q->out_binary[o])
			continue;
		memcpy(out->body + json_len, r->data + r->out[o].off, q->out[o].bytes);
		json_len += q->out[o].bytes;
	}
}

/* ---- one request, start to end ------------------------------------------------------------------- */

/* Where each tensor goes in the slot: the inputs, then the outputs, each 64-byte aligned. */
static bool slot_layout(struct infer_request *q, struct app_inject *r, bool echo)
{
	uint64_t at = 0;

	for (uint16_t i = 0; i < q->num_inputs; i++) {
		r->in[i] = (struct app_inject_tensor){ (uint32_t)at, q->in[i].bytes };
		at = RTE_ALIGN_CEIL(at + q->in[i].bytes, RTE_CACHE_LINE_SIZE);
		if (at > app_inject_slot_bytes())
			return false;
	}
	for (uint16_t o = 0; o < q->num_outputs; o++) {
		if (echo) { /* an echo computes in place: its outputs are its inputs */
			r->out[o] = r->in[o];
			continue;
		}
		r->out[o] = (struct app_inject_tensor){ (uint32_t)at, q->out[o].bytes };
		at = RTE_ALIGN_CEIL(at + q->out[o].bytes, RTE_CACHE_LINE_SIZE);
	}
	return at <= app_inject_slot_bytes();
}

/* The request's tensors, checked against the model: q filled, or out holds the refusal. */
static int request_parse(const struct app_model *m, json_t *root, struct infer_request *q, struct app_http_reply *out)
{
	const struct rt_model *spec = &m->spec;
	const json_t *inputs = json_object_get(root, "inputs");
	size_t n = json_is_array(inputs) ? json_array_size(inputs) : 0;
	bool echo = spec->num_inputs == 0;

	if (n == 0) {
		fail(out, 400, "'inputs' must be a list of the model's input tensors");
		return -EINVAL;
	}
	if ((!echo && n != spec->num_inputs) || (echo && n > BW_BATCH_TENSORS_MAX)) {
		fail(out, 400, "model '%s' takes %u input tensors, got %zu", spec->name,
		     echo ? BW_BATCH_TENSORS_MAX : spec->num_inputs, n);
		return -EINVAL;
	}
	q->num_inputs = (uint16_t)n;
	for (size_t k = 0; k < n; k++) {
		if (input_parse(m, json_array_get(inputs, k), q, (unsigned int)k, out) != 0)
			return -EINVAL;
	}
	if (q->rows > RTE_MAX(spec->max_batch_size, 1u)) {
		fail(out, 400, "%u rows: model '%s' takes at most %u a request (max_batch_size)", q->rows, spec->name,
		     spec->max_batch_size);
		return -EINVAL;
	}
	if (echo) {
		q->num_outputs = q->num_inputs;
		memcpy(q->out, q->in, sizeof(q->in));
	} else {
		q->num_outputs = spec->num_outputs;
		for (uint16_t o = 0; o < spec->num_outputs; o++) {
			struct infer_tensor *t = &q->out[o];

			snprintf(t->name, sizeof(t->name), "%s", spec->outputs[o].name);
			t->dtype = spec->outputs[o].dtype;
			t->rank = spec->outputs[o].rank;
			memcpy(t->dims, spec->outputs[o].dims, sizeof(t->dims));
			uint64_t bytes = (uint64_t)q->rows * spec->output_row_bytes[o];

			t->dims[0] = q->rows;
			if (bytes > app_inject_slot_bytes()) {
				fail(out, 413, "output '%s' of %u rows is %" PRIu64 " bytes, more than the %" PRIu32 " an "
				     "HTTP request may have (http_infer_bytes; or use protocol v1)", t->name, q->rows, bytes,
				     app_inject_slot_bytes());
				return -E2BIG;
			}
			t->bytes = (uint32_t)bytes;
			t->elems = bytes / bw_dtype_size(t->dtype);
		}
	}
	return outputs_choose(m, root, q, out);
}

/* The request's parameters: priority (protocol v1's levels, 0 the most urgent) and timeout (µs). */
static int params_parse(const struct app_model *m, json_t *root, struct app_inject *r, struct app_http_reply *out)
{
	const json_t *params = json_object_get(root, "parameters");
	const json_t *prio = json_object_get(params, "priority"), *timeout = json_object_get(params, "timeout");

	if (prio != NULL) {
		json_int_t p = json_is_integer(prio) ? json_integer_value(prio) : -1;

		if (p < 0 || p >= m->spec.priority_levels) {
			fail(out, 400, "parameter 'priority' must be an integer in 0..%u (0 the most urgent)",
			     m->spec.priority_levels - 1);
			return -EINVAL;
		}
		r->priority = (uint8_t)p;
	}
	if (timeout != NULL) {
		json_int_t us = json_is_integer(timeout) ? json_integer_value(timeout) : -1;

		if (us < 0 || us > UINT32_MAX) {
			fail(out, 400, "parameter 'timeout' must be an integer number of microseconds below 2^32");
			return -EINVAL;
		}
		r->timeout_us = (uint32_t)us;
	}
	return 0;
}

/* Waits for r's answer, asleep until its lcore wakes it. \return true when it came (r is the
 * caller's); false: given up (it is not). */
static bool answer_wait(struct app_inject *r, struct app_http_reply *out)
{
	uint64_t wait_ns = r->timeout_us != 0 ? r->timeout_us * 1000ull + 1000000000ull : INFER_WAIT_S * 1000000000ull;
	uint64_t end = plat_monotonic_ns() + wait_ns;

	for (;;) {
		uint64_t now = plat_monotonic_ns();

		if (app_inject_finished(r))
			return true;
		if (app_inject_closed() || now >= end) {
			if (!app_inject_abandon(r))
				return true; /* answered as we gave up */
			if (app_inject_closed())
				fail(out, 503, "the server stopped before the request was answered");
			else
				fail(out, 504, "no answer within %" PRIu64 " ms", wait_ns / 1000000);
			return false;
		}
		app_inject_wait(r, RTE_MIN(end - now, INFER_WAKE_NS));
	}
}

/* The most a model's request holds at max_batch_size rows: bytes, and elements (for its JSON). */
static void model_request_max(const struct app_model *m, uint64_t *bytes, uint64_t *elems)
{
	const struct rt_model *s = &m->spec;
	uint64_t rows = RTE_MAX(s->max_batch_size, 1u);

	*bytes = 0;
	*elems = 0;
	if (s->num_inputs == 0) { /* echo: whatever fits a slot, one byte an element at most */
		*bytes = app_inject_slot_bytes();
		*elems = app_inject_slot_bytes();
		return;
	}
	for (uint16_t i = 0; i < s->num_inputs; i++) {
		*bytes += rows * s->input_row_bytes[i];
		*elems += rows * s->input_row_bytes[i] / bw_dtype_size(s->inputs[i].dtype);
	}
}

uint64_t app_http_body_limit(const struct app_model *m)
{
	uint64_t bytes, elems;

	model_request_max(m, &bytes, &elems);
	/* every input as JSON numbers, or as binary after a JSON header: whichever is longer */
	return bytes + elems * INFER_JSON_VALUE_BYTES + INFER_JSON_SLACK;
}

/* Values in a JSON text, counted before it is parsed: every value but the first in a list or an
 * object follows a comma, and every list opens with a bracket (commas inside strings count too:
 * an overcount, never an undercount). Parsed, each value costs jansson tens of bytes. */
static uint64_t json_values_bound(const uint8_t *text, size_t len)
{
	uint64_t n = 1;

	for (size_t i = 0; i < len; i++)
		n += text[i] == ',' || text[i] == '[' || text[i] == ':';
	return n;
}

int app_http_infer_admit(const struct app_model *m, uint32_t client_addr, const char *content_length,
			 struct app_http_reply *out)
{
	uint64_t limit = app_http_body_limit(m);

	if (m->cfg.auth_required) {
		fail(out, 403, "model '%s' takes signed requests only: send them over protocol v1", m->spec.name);
		return -EPERM;
	}
	if (!dp_allowed(m->allow, client_addr)) {
		fail(out, 403, "model '%s' is not served to this address (its allow list)", m->spec.name);
		return -EPERM;
	}
	if (app_inject_pool() == NULL) {
		fail(out, 503, "HTTP inference is off on this server (http_infer_slots 0): use protocol v1");
		return -ENODEV;
	}
	if (content_length != NULL) {
		char *end;
		unsigned long long n = strtoull(content_length, &end, 10);

		if (*content_length != '\0' && *end == '\0' && n > limit) {
			fail(out, 413, "a request body of %llu bytes: model '%s' takes at most %" PRIu64 " (its inputs at "
			     "max_batch_size rows, as JSON numbers)", n, m->spec.name, limit);
			return -E2BIG;
		}
	}
	return 0;
}

void app_http_infer(const struct app_model *m, struct app_inject *r, const uint8_t *body, size_t len,
		    const char *header_len, struct app_http_reply *out)
{
	struct infer_request q = { 0 };
	size_t json_len = len, binary_at = 0;
	uint64_t bytes_max, elems_max;
	json_error_t jerr;
	json_t *root;
	const char *id;
	int ret;

	if (header_len != NULL) {
		char *end;
		unsigned long long hl = strtoull(header_len, &end, 10);

		if (*header_len == '\0' || *end != '\0' || hl > len) {
			app_inject_release(r);
			fail(out, 400, "Inference-Header-Content-Length '%.32s' is not a length within the body's %zu bytes",
			     header_len, len);
			return;
		}
		json_len = (size_t)hl;
	}
	model_request_max(m, &bytes_max, &elems_max);
	if (json_values_bound(body, json_len) > elems_max + INFER_JSON_VALUES_SLACK) {
		app_inject_release(r);
		fail(out, 413, "the request's JSON holds more values than model '%s' takes (%" PRIu64 " elements at "
		     "max_batch_size rows)", m->spec.name, elems_max);
		return;
	}
	root = json_loadb((const char *)body, json_len, 0, &jerr);
	if (!json_is_object(root)) {
		json_decref(root);
		app_inject_release(r);
		fail(out, 400, "the request is not a JSON object: %s (line %d, column %d)", jerr.text, jerr.line,
		     jerr.column);
		return;
	}
	q.binary = body + json_len;
	q.binary_len = len - json_len;
	id = json_string_value(json_object_get(root, "id"));
	if (request_parse(m, root, &q, out) != 0) {
		json_decref(root);
		app_inject_release(r);
		return;
	}
	r->model_id = m->spec.id;
	r->rows = q.rows;
	r->num_inputs = q.num_inputs;
	r->num_outputs = q.num_outputs;
	if (!slot_layout(&q, r, m->spec.num_inputs == 0)) {
		app_inject_release(r);
		json_decref(root);
		fail(out, 413, "the request's tensors need more than the %" PRIu32 " bytes an HTTP request may have "
		     "(http_infer_bytes; or use protocol v1)", app_inject_slot_bytes());
		return;
	}
	ret = params_parse(m, root, r, out);
	for (uint16_t i = 0; ret == 0 && i < q.num_inputs; i++) {
		ret = input_data_fill(&q, i, r->data + r->in[i].off, &binary_at, out);
		if (ret == 0 && m->spec.num_inputs > 0 && m->spec.inputs[i].index_bound > 0) {
			struct bw_segment seg = bw_segment_flat(r->data + r->in[i].off, r->in[i].len);
			char why[256];

			if (!app_index_check(&m->spec.inputs[i], &seg, why, sizeof(why))) {
				fail(out, 400, "%s", why);
				ret = -EINVAL;
			}
		}
	}
	if (ret == 0 && binary_at != q.binary_len) {
		fail(out, 400, "the binary part has %zu bytes after the inputs' data", q.binary_len - binary_at);
		ret = -EINVAL;
	}
	if (ret != 0) {
		app_inject_release(r);
		json_decref(root);
		return;
	}
	ret = app_inject_submit(r);
	if (ret != 0) {
		app_inject_release(r);
		json_decref(root);
		fail(out, 503, ret == -ENOBUFS ? "every polling lcore has a full queue of HTTP requests: try again"
					       : "the server is not serving");
		return;
	}
	if (!answer_wait(r, out)) {
		json_decref(root);
		return;
	}
	if (r->status != BW_STATUS_OK)
		fail(out, http_status_of(r->status), "%s: %s", bw_status_name(r->status), r->msg);
	else
		reply_build(m, &q, r, id, out);
	app_inject_release(r);
	json_decref(root);
}
