/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The HTTP control server: a kernel socket on a management address (--http, 127.0.0.1:8000 by
 * default), served by libmicrohttpd's own thread, started from the control thread so that it runs
 * where control threads run, never on a polling or worker lcore's CPU. What it answers:
 *
 *   GET /metrics                  Prometheus text exposition 0.0.4 of the counters and distributions
 *                                 telemetry has (docs/telemetry.md), in base units (seconds);
 *                                 OpenMetrics 1.0 when the Accept header asks for it
 *   GET /v2/health/live           200 while the process runs
 *   GET /v2/health/ready          200 once every model is loaded and every polling lcore serves;
 *                                 400 before that and while stopping (Triton's codes)
 *   GET /v2                       server metadata (KServe v2)
 *   GET /v2/models/NAME[/versions/V][/ready]   model metadata and readiness (V: the served version)
 *   POST /v2/models/NAME[/versions/V]/infer    inference (http_infer.c), through a polling lcore's
 *                                 batcher like a datagram
 *   POST /v2/repository/index     the models, each with its served version (Triton's repository API)
 *   POST /v2/repository/models/NAME/load   reloads the model (app_models_reload): answered once the
 *                                 new version serves, or with why it does not
 *
 * Everything it reads is a counter its writers keep without locks (summed here, as telemetry does)
 * or the model specs, whose tensors never change (a reload changes the served version only). It allocates and makes system calls freely: it is
 * not on the hot path. One thread per connection: an inference request waits for its answer
 * (asleep until its polling lcore wakes it) without holding up a scrape or a probe on another
 * connection; a host may hold HTTP_CONNECTIONS_PER_IP_MAX of them, and --http-probes opens a second
 * listener with connections of its own for health and metrics, so that neither slow clients nor
 * large ones can keep an orchestrator's probes from an answer.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>
#include <microhttpd.h>

#include <batchwire/dtype.h>

#include "defs.h"
#include "http.h"
#include "inject.h"

#define HTTP_CONNECTIONS_MAX 256         /* one thread each: far more than one host may hold */
#define HTTP_CONNECTIONS_PER_IP_MAX 64   /* so that one host cannot hold them all */
#define HTTP_PROBE_CONNECTIONS_MAX 32    /* the probe listener's own */
#define HTTP_PROBE_CONNECTIONS_PER_IP_MAX 8
#define HTTP_TIMEOUT_S 10
#define HTTP_SLOT_WAIT_US 1000000        /* longest an inference request waits for a slot, at its headers */
/* A body that holds a slot must come at least this fast, after a grace: a client that dribbles its
 * body holds its slot for grace + limit / rate at most (2.3 s for the MLP's), then is cut off. */
#define HTTP_UPLOAD_GRACE_NS 2000000000ull
#define HTTP_UPLOAD_BYTES_PER_S (1u << 20)

#define HTTP_BODY_JSON_SLACK (1u << 20) /* a request body beyond its tensors' bytes: JSON text */
#define HTTP_BODY_MAX (1ull << 30)

static struct MHD_Daemon *g_daemon;
static struct MHD_Daemon *g_probes;     /* --http-probes: health and metrics only */
static bool g_inference;                /* atomic: HTTP inference taken (serving, grace included) */

/* POST /v2/models/NAME/infer answers by status code (HTTP threads, atomics). */
static const unsigned int g_infer_codes[] = { 200, 400, 403, 404, 405, 408, 413, 429, 500, 501, 503, 504 };
static uint64_t g_infer_by_code[RTE_DIM(g_infer_codes) + 1]; /* the last: any other */

static void infer_count(unsigned int status)
{
	unsigned int i;

	for (i = 0; i < RTE_DIM(g_infer_codes) && g_infer_codes[i] != status; i++)
		;
	__atomic_fetch_add(&g_infer_by_code[i], 1, __ATOMIC_RELAXED);
}
static bool g_ready;                 /* atomic: serving, and not stopping */
static struct dp_lcore *const *g_lcores;
static unsigned int g_nb_lcores;     /* atomic, set once the array is filled */

void app_http_lcores(struct dp_lcore *const *lcores, unsigned int count)
{
	g_lcores = lcores;
	__atomic_store_n(&g_nb_lcores, count, __ATOMIC_RELEASE);
}

void app_http_ready(bool ready)
{
	__atomic_store_n(&g_ready, ready, __ATOMIC_RELEASE);
}

static bool ready(void)
{
	return __atomic_load_n(&g_ready, __ATOMIC_ACQUIRE) && app_current != NULL;
}

void app_http_inference(bool on)
{
	__atomic_store_n(&g_inference, on, __ATOMIC_RELEASE);
}

/* Inference is taken from readiness until the drain's grace ends, like UDP: not ready (load
 * balancers move away) is not yet refusing. */
static bool inference_on(void)
{
	return __atomic_load_n(&g_inference, __ATOMIC_ACQUIRE) && app_current != NULL;
}

/* ---- a growing text buffer ------------------------------------------------------------------- */

struct text {
	char *buf;
	size_t len, cap;
	bool failed;
	bool openmetrics; /* the scraper asked for OpenMetrics 1.0 rather than the 0.0.4 text format */
};

static void __attribute__((format(printf, 2, 3))) text_add(struct text *t, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (t->failed)
		return;
	for (;;) {
		va_start(ap, fmt);
		n = vsnprintf(t->buf != NULL ? t->buf + t->len : NULL, t->buf != NULL ? t->cap - t->len : 0, fmt, ap);
		va_end(ap);
		if (n < 0) {
			t->failed = true;
			return;
		}
		if (t->buf != NULL && t->len + (size_t)n < t->cap) {
			t->len += (size_t)n;
			return;
		}
		size_t cap = t->cap == 0 ? 65536 : t->cap * 2;
		while (cap < t->len + (size_t)n + 1)
			cap *= 2;
		char *grown = realloc(t->buf, cap);
		if (grown == NULL) {
			t->failed = true;
			return;
		}
		t->buf = grown;
		t->cap = cap;
	}
}

/* ---- /metrics ---------------------------------------------------------------------------------- */

/* A metric's HELP and TYPE lines, once before its samples. */
static void family(struct text *t, const char *name, const char *type, const char *help)
{
	size_t len = strlen(name);

	/* OpenMetrics names a counter's family without the _total its samples carry */
	if (t->openmetrics && strcmp(type, "counter") == 0 && len > 6 && strcmp(name + len - 6, "_total") == 0)
		len -= 6;
	text_add(t, "# HELP %.*s %s\n# TYPE %.*s %s\n", (int)len, name, help, (int)len, name, type);
}

/* A histogram of µs values (or plain counts, scale 1) in Prometheus' form: cumulative buckets at the
 * upper edge of each power of two (2^k - 1, where the log-linear buckets end: exact counts),
 * then +Inf, _sum and _count. scale divides the values: 1e6 turns µs into seconds. */
static void histogram(struct text *t, const char *name, const char *labels, const struct bw_hist *h, double scale)
{
	uint64_t cumulative = 0;
	unsigned int i = 0;

	for (unsigned int k = 0; k <= BW_HIST_RANGE_BITS; k++) {
		uint64_t le = (UINT64_C(1) << k) - 1;

		while (i < BW_HIST_BUCKETS && bw_hist_bucket_upper(i, BW_HIST_SUB_BITS) <= le)
			cumulative += h->buckets[i++];
		text_add(t, "%s_bucket{%s%sle=\"%.9g\"} %" PRIu64 "\n", name, labels, labels[0] != '\0' ? "," : "",
			 (double)le / scale, cumulative);
	}
	text_add(t, "%s_bucket{%s%sle=\"+Inf\"} %" PRIu64 "\n", name, labels, labels[0] != '\0' ? "," : "", h->count);
	text_add(t, "%s_sum{%s} %.9g\n%s_count{%s} %" PRIu64 "\n", name, labels, (double)h->sum / scale, name, labels,
		 h->count);
}

/* Per polling lcore: a counter of its struct dp_lcore, TSC cycles shown in seconds. */
static const struct {
	const char *name, *help;
	size_t offset;
	bool cycles;
} g_lcore_metrics[] = {
	{"batchwire_rx_packets_total", "Frames received by a polling lcore.", offsetof(struct dp_lcore, stats.rx_packets), false},
	{"batchwire_tx_packets_total", "Frames sent by a polling lcore.", offsetof(struct dp_lcore, stats.tx_packets), false},
	{"batchwire_requests_total", "Datagrams with a readable protocol v1 header.",
	 offsetof(struct dp_lcore, stats.requests), false},
	{"batchwire_poll_seconds_total", "Time a polling lcore spent in its poll loop.",
	 offsetof(struct dp_lcore, poll.cycles), true},
	{"batchwire_poll_busy_seconds_total", "Time a polling lcore spent in loop iterations that did work: the busy "
	 "share is its rate over batchwire_poll_seconds_total's.", offsetof(struct dp_lcore, poll.busy_cycles), true},
};

static void dataplane_metrics(struct text *t)
{
	unsigned int n = __atomic_load_n(&g_nb_lcores, __ATOMIC_ACQUIRE);
	struct dp_lcore_stats sum;
	double hz = (double)plat_tsc_hz;

	for (unsigned int k = 0; k < RTE_DIM(g_lcore_metrics); k++) {
		family(t, g_lcore_metrics[k].name, "counter", g_lcore_metrics[k].help);
		for (unsigned int i = 0; i < n; i++) {
			uint64_t v = *(const uint64_t *)(const void *)((const uint8_t *)g_lcores[i] + g_lcore_metrics[k].offset);

			if (g_lcore_metrics[k].cycles)
				text_add(t, "%s{lcore=\"%u\"} %.9g\n", g_lcore_metrics[k].name, g_lcores[i]->lcore_id,
					 (double)v / hz);
			else
				text_add(t, "%s{lcore=\"%u\"} %" PRIu64 "\n", g_lcore_metrics[k].name, g_lcores[i]->lcore_id, v);
		}
	}
	dp_lcores_stats_sum(g_lcores, n, &sum, NULL);
	family(t, "batchwire_replies_total", "counter", "Protocol replies sent, by status.");
	for (unsigned int k = 0; k < BW_STATUS_COUNT; k++)
		text_add(t, "batchwire_replies_total{status=\"%s\"} %" PRIu64 "\n", bw_status_name(k), sum.replies[k]);
	family(t, "batchwire_drops_total", "counter", "Frames dropped without a reply, by reason.");
	for (unsigned int k = 0; k < DP_DROP_COUNT; k++)
		text_add(t, "batchwire_drops_total{reason=\"%s\"} %" PRIu64 "\n", dp_drop_reason_name(k), sum.drops[k]);
	family(t, "batchwire_auth_total", "counter", "Signed requests, and unsigned ones a model refused, by outcome.");
	for (unsigned int k = 0; k < DP_AUTH_OUTCOME_COUNT; k++)
		text_add(t, "batchwire_auth_total{outcome=\"%s\"} %" PRIu64 "\n", dp_auth_outcome_name(k), sum.auth[k]);
	family(t, "batchwire_amplification_refused_total", "counter",
	       "Unsigned requests whose reply would have been larger than they were.");
	text_add(t, "batchwire_amplification_refused_total %" PRIu64 "\n", sum.amplification_refused);
	family(t, "batchwire_held_requests", "gauge",
	       "One-datagram requests the batchers hold now (each keeps an mbuf out of the pool).");
	text_add(t, "batchwire_held_requests %" PRIu64 "\n", sum.held_requests);
	family(t, "batchwire_held_refused_total", "counter",
	       "Requests refused because their polling lcore held its share of mbufs_held already.");
	text_add(t, "batchwire_held_refused_total %" PRIu64 "\n", sum.held_refused);

	static const struct {
		const char *name, *help;
		size_t offset;
	} port_keys[] = {
		{"batchwire_port_imissed_total", "Frames the NIC dropped: its RX ring was full.",
		 offsetof(struct rte_eth_stats, imissed)},
		{"batchwire_port_rx_nombuf_total", "RX ring refills that found no mbuf.",
		 offsetof(struct rte_eth_stats, rx_nombuf)},
		{"batchwire_port_ierrors_total", "Bad frames the NIC received.", offsetof(struct rte_eth_stats, ierrors)},
		{"batchwire_port_oerrors_total", "Frames the NIC failed to send.", offsetof(struct rte_eth_stats, oerrors)},
	};
	for (unsigned int k = 0; k < RTE_DIM(port_keys); k++) {
		bool seen[RTE_MAX_ETHPORTS] = {false};

		family(t, port_keys[k].name, "counter", port_keys[k].help);
		for (unsigned int i = 0; i < n; i++) {
			uint16_t port = g_lcores[i]->port_id;
			struct rte_eth_stats st;

			if (port >= RTE_MAX_ETHPORTS || seen[port] || rte_eth_stats_get(port, &st) != 0)
				continue;
			seen[port] = true;
			text_add(t, "%s{port=\"%u\"} %" PRIu64 "\n", port_keys[k].name, port,
				 *(const uint64_t *)(const void *)((const uint8_t *)&st + port_keys[k].offset));
		}
	}
}

static void worker_metrics(struct text *t)
{
	double hz = (double)plat_tsc_hz;

	family(t, "batchwire_worker_busy_seconds_total", "counter",
	       "Time a worker lcore (one that does not poll the port) spent in iterations that did work.");
	for (unsigned int l = 0; l < RTE_MAX_LCORE; l++) {
		if (app_lcore_is_worker_only(l))
			text_add(t, "batchwire_worker_busy_seconds_total{lcore=\"%u\"} %.9g\n", l,
				 (double)app_service_worker_stats(l)->busy_cycles / hz);
	}
	family(t, "batchwire_worker_seconds_total", "counter", "Time a worker lcore spent in its poll loop.");
	for (unsigned int l = 0; l < RTE_MAX_LCORE; l++) {
		if (app_lcore_is_worker_only(l))
			text_add(t, "batchwire_worker_seconds_total{lcore=\"%u\"} %.9g\n", l,
				 (double)app_service_worker_stats(l)->cycles / hz);
	}
}

#define MODEL_LABELS_MAX (RT_MODEL_NAME_MAX + 32)

/* A model's labels: its name, and its version where several of the name serve at once (the same
 * name twice would be one series twice). \return buf. */
static const char *model_labels(const struct app_model *m, char buf[MODEL_LABELS_MAX])
{
	if (m->served == NULL)
		snprintf(buf, MODEL_LABELS_MAX, "model=\"%s\"", m->spec.name);
	else
		snprintf(buf, MODEL_LABELS_MAX, "model=\"%s\",version=\"%u\"", m->spec.name,
			 __atomic_load_n(&m->version, __ATOMIC_ACQUIRE));
	return buf;
}

static void model_metrics(struct text *t)
{
	static const struct {
		const char *name, *type, *help;
		size_t offset;
	} counters[] = {
		{"batchwire_model_requests_total", "counter", "Requests a model's batchers accepted.",
		 offsetof(struct bat_stats, jobs)},
		{"batchwire_model_requests_done_total", "counter", "Requests a model's batchers answered.",
		 offsetof(struct bat_stats, jobs_done)},
		{"batchwire_model_rejected_full_total", "counter", "Requests refused UNAVAILABLE: the batch queue was full.",
		 offsetof(struct bat_stats, rejected_full)},
		{"batchwire_model_deadline_expired_total", "counter", "Request pieces whose deadline passed before they ran.",
		 offsetof(struct bat_stats, deadline_expired)},
		{"batchwire_model_batches_total", "counter", "Batches dispatched.", offsetof(struct bat_stats, batches)},
		{"batchwire_model_batches_failed_total", "counter", "Batches completed with an error.",
		 offsetof(struct bat_stats, batches_failed)},
		{"batchwire_model_rows_total", "counter", "Real rows dispatched.", offsetof(struct bat_stats, rows)},
		{"batchwire_model_padding_rows_total", "counter", "Padding rows run to reach an allowed batch size.",
		 offsetof(struct bat_stats, padding_rows)},
	};
	static const struct {
		const char *name, *help;
		double scale;
	} hists[] = {
		/* in the order of app_hist_name: latency_us, window_us, queue_us, compute_us, rows_per_batch */
		{"batchwire_request_latency_seconds", "A request's time from its arrival (RX burst) to its reply (to TX).", 1e6},
		{"batchwire_batch_window_seconds", "A batch's window: its first request's arrival to dispatch.", 1e6},
		{"batchwire_batch_queue_seconds", "A batch's wait between dispatch and the executor starting it.", 1e6},
		{"batchwire_batch_compute_seconds", "A batch's run: started to complete on its polling lcore.", 1e6},
		{"batchwire_batch_rows", "Real rows in a batch (padding left out).", 1},
	};
	_Static_assert(RTE_DIM(hists) == 5, "one per distribution of struct bat_stats");
	struct app_service *svc = app_current;
	char labels[MODEL_LABELS_MAX];
	struct bat_stats *sums;

	if (svc == NULL || app_hist_count() != RTE_DIM(hists))
		return;
	sums = calloc(svc->nb_models, sizeof(*sums));
	if (sums == NULL) {
		t->failed = true;
		return;
	}
	for (unsigned int m = 0; m < svc->nb_models; m++)
		app_stats_sum((int)m, -1, &sums[m]);
	for (unsigned int k = 0; k < RTE_DIM(counters); k++) {
		family(t, counters[k].name, counters[k].type, counters[k].help);
		for (unsigned int m = 0; m < svc->nb_models; m++)
			text_add(t, "%s{%s} %" PRIu64 "\n", counters[k].name, model_labels(svc->models[m], labels),
				 *(const uint64_t *)(const void *)((const uint8_t *)&sums[m] + counters[k].offset));
	}
	family(t, "batchwire_model_batches_by_reason_total", "counter", "Batches dispatched, by why the window closed.");
	for (unsigned int m = 0; m < svc->nb_models; m++)
		for (unsigned int r = 0; r < BW_DISPATCH_COUNT; r++)
			text_add(t, "batchwire_model_batches_by_reason_total{%s,reason=\"%s\"} %" PRIu64 "\n",
				 model_labels(svc->models[m], labels), bw_dispatch_reason_name(r), sums[m].dispatch[r]);
	for (unsigned int h = 0; h < RTE_DIM(hists); h++) {
		family(t, hists[h].name, "histogram", hists[h].help);
		for (unsigned int m = 0; m < svc->nb_models; m++)
			histogram(t, hists[h].name, model_labels(svc->models[m], labels), app_hist_get(&sums[m], h),
				  hists[h].scale);
	}
	free(sums);
}

static void metrics(struct text *t)
{
	family(t, "batchwire_up", "gauge", "1: the process runs.");
	text_add(t, "batchwire_up 1\n");
	family(t, "batchwire_ready", "gauge", "1 once every model is loaded and every polling lcore serves; 0 while stopping.");
	text_add(t, "batchwire_ready %d\n", ready() ? 1 : 0);
	dataplane_metrics(t);
	worker_metrics(t);
	model_metrics(t);
	family(t, "batchwire_log_lines_lost_total", "counter", "Log lines lost to a full deferred-log ring.");
	text_add(t, "batchwire_log_lines_lost_total %" PRIu64 "\n", plat_log_deferred_lost());
	family(t, "batchwire_http_infer_requests_total", "counter",
	       "HTTP inference requests (POST /v2/models/NAME/infer) answered, by HTTP status code.");
	for (unsigned int i = 0; i <= RTE_DIM(g_infer_codes); i++) {
		uint64_t v = __atomic_load_n(&g_infer_by_code[i], __ATOMIC_RELAXED);

		if (i < RTE_DIM(g_infer_codes))
			text_add(t, "batchwire_http_infer_requests_total{code=\"%u\"} %" PRIu64 "\n", g_infer_codes[i], v);
		else
			text_add(t, "batchwire_http_infer_requests_total{code=\"other\"} %" PRIu64 "\n", v);
	}
}

/* ---- KServe v2 ----------------------------------------------------------------------------------- */

static json_t *tensors_json(const struct rt_tensor_spec *specs, uint16_t n, bool batched)
{
	json_t *list = json_array();

	for (uint16_t i = 0; i < n; i++) {
		json_t *shape = json_array();

		for (uint8_t d = 0; d < specs[i].rank; d++) {
			/* KServe's -1: a dimension the request chooses (the batch, or a dynamic one) */
			json_int_t dim = (d == 0 && batched) || specs[i].dims[d] == 0 ? -1 : (json_int_t)specs[i].dims[d];

			json_array_append_new(shape, json_integer(dim));
		}
		json_array_append_new(list, json_pack("{s:s, s:s, s:o}", "name", specs[i].name, "datatype",
						      app_kserve_datatype(specs[i].dtype), "shape", shape));
	}
	return list;
}

/* named's metadata: every version it serves, and version m's tensors (all of them have the same). */
static json_t *model_json(const struct app_model *named, const struct app_model *m)
{
	const struct rt_model *spec = &m->spec;
	json_t *versions = json_array();
	uint32_t served[APP_VERSIONS_SERVED_MAX];
	unsigned int n = app_model_versions(named, served);

	for (unsigned int i = 0; i < n; i++) {
		char v[16];

		/* echo has no versions (0), but KServe clients expect one listed: "1" */
		snprintf(v, sizeof(v), "%u", RTE_MAX(1u, served[i]));
		json_array_append_new(versions, json_string(v));
	}
	return json_pack("{s:s, s:o, s:s, s:o, s:o}", "name", spec->name, "versions", versions, "platform",
			 m->engine->kind[0] == 'e' ? "batchwire_echo" : "onnx", "inputs",
			 tensors_json(spec->inputs, spec->num_inputs, spec->max_batch_size > 0), "outputs",
			 tensors_json(spec->outputs, spec->num_outputs, spec->max_batch_size > 0));
}

static struct app_model *model_named(const char *name, size_t len)
{
	const struct rt_model *spec;

	if (app_current == NULL)
		return NULL;
	spec = rt_registry_find_name(&app_current->registry, name, (uint32_t)len);
	return spec != NULL ? app_current->models[spec->id] : NULL;
}

/* ---- requests ------------------------------------------------------------------------------------ */

static enum MHD_Result respond(struct MHD_Connection *c, unsigned int status, const char *type, char *body,
			       size_t len)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
	enum MHD_Result ret;

	if (r == NULL) {
		free(body);
		return MHD_NO;
	}
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
	ret = MHD_queue_response(c, status, r);
	MHD_destroy_response(r);
	return ret;
}

static enum MHD_Result respond_json(struct MHD_Connection *c, unsigned int status, json_t *j)
{
	char *body = j != NULL ? json_dumps(j, JSON_COMPACT) : NULL;

	json_decref(j);
	if (body == NULL)
		return MHD_NO;
	return respond(c, status, "application/json", body, strlen(body));
}

static enum MHD_Result respond_error(struct MHD_Connection *c, unsigned int status, const char *fmt, ...)
{
	char text[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	return respond_json(c, status, json_pack("{s:s}", "error", text));
}

/* A request body as it arrives (POST), kept until the request completes. */
struct upload {
	uint8_t *buf;
	size_t len, cap;
	size_t limit;
	bool too_large;
	const struct app_model *model; /* POST .../infer: the version it names, admitted at its headers */
	struct app_inject *slot;       /* taken at its headers, before a byte of its body is buffered */
	uint64_t deadline_ns;          /* CLOCK_MONOTONIC: its body is whole by then, or it is cut off */
};

/* The largest body an inference request may have: its tensors as JSON text take more than as bytes. */
static size_t upload_limit(void)
{
	uint64_t lim = (uint64_t)app_inject_slot_bytes() * 8 + HTTP_BODY_JSON_SLACK;

	return (size_t)RTE_MIN(lim, HTTP_BODY_MAX);
}

static void upload_add(struct upload *u, const char *data, size_t len)
{
	if (u->too_large)
		return;
	if (u->len + len > u->limit) {
		u->too_large = true;
		free(u->buf);
		u->buf = NULL;
		return;
	}
	if (u->len + len > u->cap) {
		size_t cap = RTE_MAX(u->cap * 2, u->len + len);
		uint8_t *buf = realloc(u->buf, RTE_MIN(RTE_MAX(cap, (size_t)4096), u->limit));

		if (buf == NULL) {
			u->too_large = true;
			free(u->buf);
			u->buf = NULL;
			return;
		}
		u->buf = buf;
		u->cap = RTE_MIN(RTE_MAX(cap, (size_t)4096), u->limit);
	}
	memcpy(u->buf + u->len, data, len);
	u->len += len;
}

/* The peer's IPv4 address (network order), 0 for another family. */
static uint32_t client_addr(struct MHD_Connection *c)
{
	const union MHD_ConnectionInfo *info = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
	const struct sockaddr *peer = info != NULL ? info->client_addr : NULL;

	return peer != NULL && peer->sa_family == AF_INET ? ((const struct sockaddr_in *)peer)->sin_addr.s_addr : 0;
}

static enum MHD_Result reply_send(struct MHD_Connection *c, struct app_http_reply *out)
{
	struct MHD_Response *r;
	enum MHD_Result ret;

	infer_count(out->status);
	if (out->body == NULL)
		return MHD_NO;
	r = MHD_create_response_from_buffer(out->len, out->body, MHD_RESPMEM_MUST_FREE);
	if (r == NULL) {
		free(out->body);
		return MHD_NO;
	}
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE,
				out->header_len != 0 ? "application/octet-stream" : "application/json");
	if (out->header_len != 0) {
		char len[24];

		snprintf(len, sizeof(len), "%zu", out->header_len);
		MHD_add_response_header(r, "Inference-Header-Content-Length", len);
	}
	ret = MHD_queue_response(c, out->status, r);
	MHD_destroy_response(r);
	return ret;
}

/*
 * POST .../infer at its headers: admitted (the model's checks, and a Content-Length it can take)
 * and given an inference slot before a byte of its body is read, so that the bodies buffered at
 * once are at most the slots, each at most its model's limit; refused at once otherwise.
 */
static enum MHD_Result infer_begin(struct MHD_Connection *c, const struct app_model *m, uint32_t named,
				   struct upload *u)
{
	struct app_http_reply out = { 0 };

	if (!inference_on()) {
		infer_count(MHD_HTTP_SERVICE_UNAVAILABLE);
		return respond_error(c, MHD_HTTP_SERVICE_UNAVAILABLE, "not serving: the server is starting or stopping");
	}
	if (app_http_infer_admit(m, client_addr(c), MHD_lookup_connection_value(c, MHD_HEADER_KIND,
										 MHD_HTTP_HEADER_CONTENT_LENGTH), &out) != 0)
		return reply_send(c, &out);
	u->slot = app_inject_take(HTTP_SLOT_WAIT_US);
	if (u->slot == NULL) {
		infer_count(MHD_HTTP_SERVICE_UNAVAILABLE);
		return respond_error(c, MHD_HTTP_SERVICE_UNAVAILABLE, "every HTTP inference slot is in use "
				     "(http_infer_slots): try again");
	}
	u->slot->version = named; /* its lcore admits it to that version, or refuses it */
	u->model = m;
	u->limit = (size_t)RTE_MIN((uint64_t)u->limit, app_http_body_limit(m));
	u->deadline_ns = plat_monotonic_ns() + HTTP_UPLOAD_GRACE_NS + (uint64_t)u->limit * 1000000000ull / HTTP_UPLOAD_BYTES_PER_S;
	return MHD_YES;
}

/* POST .../infer with its whole body. */
static enum MHD_Result infer_request(struct MHD_Connection *c, struct upload *u)
{
	struct app_http_reply out = { 0 };
	struct app_inject *slot = u->slot;

	u->slot = NULL; /* app_http_infer gives it back, or this */
	if (u->too_large) {
		app_inject_release(slot);
		infer_count(413);
		return respond_error(c, 413, "the request body is larger than the %zu bytes model '%s' takes (its "
				     "inputs at max_batch_size rows, as JSON numbers)", u->limit, u->model->spec.name);
	}
	app_http_infer(u->model, slot, u->buf != NULL ? u->buf : (const uint8_t *)"", u->len,
		       MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Inference-Header-Content-Length"), &out);
	return reply_send(c, &out);
}

/* /v2/models/NAME[/versions/1][/ready|/infer]: GET for metadata and readiness, POST for /infer (at its
 * headers, post's model not yet set: infer_begin; with its body: infer_request). */
static enum MHD_Result model_request(struct MHD_Connection *c, const char *rest, struct upload *post)
{
	const char *slash = strchr(rest, '/');
	size_t len = slash != NULL ? (size_t)(slash - rest) : strlen(rest);
	struct app_model *named = model_named(rest, len), *m = named;
	const char *tail = slash != NULL ? slash : "";
	uint32_t version = 0; /* named in the URL: 0 for whichever serves */

	if (m == NULL) {
		if (post != NULL)
			infer_count(MHD_HTTP_NOT_FOUND);
		return respond_error(c, MHD_HTTP_NOT_FOUND, "no model named '%.*s'", (int)RTE_MIN(len, (size_t)64), rest);
	}
	m = app_model_version(named, 0);
	if (strncmp(tail, "/versions/", 10) == 0) {
		const char *v = tail + 10;
		char *end, served[64];
		unsigned long want = strtoul(v, &end, 10);

		/* echo has no versions: its one is 1 */
		m = end == v || (*end != '\0' && *end != '/') || want == 0 || want > BW_MODEL_ID_MODEL_MASK ? NULL
		    : app_model_is_echo(&named->cfg) ? (want == 1 ? named : NULL)
		    : app_model_version(named, (uint32_t)want);
		if (m == NULL) {
			if (post != NULL)
				infer_count(MHD_HTTP_NOT_FOUND);
			app_model_versions_format(named, served, sizeof(served));
			return respond_error(c, MHD_HTTP_NOT_FOUND, "model '%s' serves version%s %s, not version %.*s",
					     named->spec.name, named->served != NULL ? "s" : "",
					     app_model_is_echo(&named->cfg) ? "1" : served, (int)strcspn(v, "/"), v);
		}
		version = app_model_is_echo(&named->cfg) ? 0 : (uint32_t)want;
		tail = end;
	}
	if (strcmp(tail, "/infer") == 0) {
		if (post == NULL)
			return respond_error(c, MHD_HTTP_METHOD_NOT_ALLOWED, "/v2/models/%s/infer takes POST", m->spec.name);
		return post->model == NULL ? infer_begin(c, m, version, post) : infer_request(c, post);
	}
	if (post != NULL)
		return respond_error(c, MHD_HTTP_METHOD_NOT_ALLOWED, "POST is for /v2/models/NAME/infer only");
	if (tail[0] == '\0')
		return respond_json(c, MHD_HTTP_OK, model_json(named, m));
	if (strcmp(tail, "/ready") == 0)
		return respond(c, ready() ? MHD_HTTP_OK : MHD_HTTP_BAD_REQUEST, "text/plain", strdup(""), 0);
	return respond_error(c, MHD_HTTP_NOT_FOUND, "no such endpoint: /v2/models/%s%s", m->spec.name, tail);
}

/* POST /v2/repository/...: the index, and a model's load (a reload: the model serves already). */
static enum MHD_Result repository_request(struct MHD_Connection *c, const char *url)
{
	const char *models = "/v2/repository/models/";
	char name[APP_MODEL_NAME_MAX], out[2048];
	size_t len;
	int ret;

	if (strcmp(url, "/v2/repository/index") == 0) {
		json_t *list = json_array();

		for (unsigned int i = 0; app_current != NULL && i < app_current->nb_models; i++) {
			const struct app_model *m = app_current->models[i];
			char version[16];

			snprintf(version, sizeof(version), "%u", RTE_MAX(1u, __atomic_load_n(&m->version, __ATOMIC_ACQUIRE)));
			json_array_append_new(list, json_pack("{s:s, s:s, s:s}", "name", m->spec.name, "version", version,
							      "state", ready() ? "READY" : "UNAVAILABLE"));
		}
		return respond_json(c, MHD_HTTP_OK, list);
	}
	if (strncmp(url, models, strlen(models)) != 0)
		return respond_error(c, MHD_HTTP_NOT_FOUND, "no such endpoint: %s", url);
	url += strlen(models);
	len = strcspn(url, "/");
	if (len == 0 || len >= sizeof(name))
		return respond_error(c, MHD_HTTP_NOT_FOUND, "no model named '%.*s'", (int)RTE_MIN(len, (size_t)64), url);
	memcpy(name, url, len);
	name[len] = '\0';
	if (strcmp(url + len, "/unload") == 0)
		return respond_error(c, MHD_HTTP_BAD_REQUEST, "model '%s': unloading is not supported: a model serves "
				     "until the server stops (load reloads it)", name);
	if (strcmp(url + len, "/load") != 0)
		return respond_error(c, MHD_HTTP_NOT_FOUND, "no such endpoint: /v2/repository/models/%s", url);
	ret = app_models_reload(name, out, sizeof(out));
	out[strcspn(out, "\n")] = '\0';
	if (ret == 0)
		return respond_json(c, MHD_HTTP_OK, json_pack("{s:s}", "result", out));
	return respond_error(c, ret == -ENOENT ? MHD_HTTP_NOT_FOUND : ret == -ESHUTDOWN ? MHD_HTTP_SERVICE_UNAVAILABLE
									       : MHD_HTTP_BAD_REQUEST, "%s", out);
}

static enum MHD_Result on_request(void *cls __rte_unused, struct MHD_Connection *c, const char *url,
				  const char *method, const char *version __rte_unused, const char *upload,
				  size_t *upload_len, void **state)
{
	if (strcmp(method, MHD_HTTP_METHOD_POST) == 0) {
		struct upload *u = *state;

		if (u == NULL) { /* the headers: the body follows in the next calls */
			u = calloc(1, sizeof(*u));
			if (u == NULL)
				return MHD_NO;
			u->limit = upload_limit();
			*state = u;
			/* inference is admitted, or refused, before its body is read */
			if (strncmp(url, "/v2/models/", 11) == 0 && url[11] != '\0')
				return model_request(c, url + 11, u);
			return MHD_YES;
		}
		if (*upload_len != 0) {
			if (u->slot != NULL && plat_monotonic_ns() > u->deadline_ns) {
				/* too slow to hold a slot others wait for: the connection goes, the slot with it */
				infer_count(408);
				return MHD_NO;
			}
			upload_add(u, upload, *upload_len);
			*upload_len = 0;
			return MHD_YES;
		}
		if (strncmp(url, "/v2/models/", 11) == 0 && url[11] != '\0')
			return model_request(c, url + 11, u);
		if (strncmp(url, "/v2/repository/", 15) == 0)
			return repository_request(c, url);
		return respond_error(c, MHD_HTTP_METHOD_NOT_ALLOWED, "POST %s: POST is for /v2/models/NAME/infer and "
				     "/v2/repository/ only", url);
	}
	if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && strcmp(method, MHD_HTTP_METHOD_HEAD) != 0)
		return respond_error(c, MHD_HTTP_METHOD_NOT_ALLOWED, "%s %s: GET, HEAD or POST (for inference)", method,
				     url);
	if (strcmp(url, "/metrics") == 0) {
		const char *accept = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_ACCEPT);
		struct text t = { .openmetrics = accept != NULL && strstr(accept, "application/openmetrics-text") != NULL };

		metrics(&t);
		if (t.openmetrics)
			text_add(&t, "# EOF\n");
		if (t.failed) {
			free(t.buf);
			return respond_error(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory for the metrics");
		}
		return respond(c, MHD_HTTP_OK,
			       t.openmetrics ? "application/openmetrics-text; version=1.0.0; charset=utf-8"
					     : "text/plain; version=0.0.4; charset=utf-8",
			       t.buf, t.len);
	}
	if (strcmp(url, "/v2/health/live") == 0)
		return respond(c, MHD_HTTP_OK, "text/plain", strdup(""), 0);
	if (strcmp(url, "/v2/health/ready") == 0)
		return respond(c, ready() ? MHD_HTTP_OK : MHD_HTTP_BAD_REQUEST, "text/plain", strdup(""), 0);
	if (strcmp(url, "/v2") == 0 || strcmp(url, "/v2/") == 0)
		return respond_json(c, MHD_HTTP_OK, json_pack("{s:s, s:s, s:[s]}", "name", "batchwire", "version",
							      BW_VERSION, "extensions", "binary_tensor_data"));
	if (strncmp(url, "/v2/models/", 11) == 0 && url[11] != '\0')
		return model_request(c, url + 11, NULL);
	return respond_error(c, MHD_HTTP_NOT_FOUND, "no such endpoint: %s", url);
}

/* A request's end, answered or not: its body goes. */
static void on_completed(void *cls __rte_unused, struct MHD_Connection *c __rte_unused, void **state,
			 enum MHD_RequestTerminationCode why __rte_unused)
{
	struct upload *u = *state;

	if (u != NULL) {
		if (u->slot != NULL) /* the client went before its body was whole */
			app_inject_release(u->slot);
		free(u->buf);
		free(u);
		*state = NULL;
	}
}

/* The probe listener: health and metrics, nothing that waits or takes a slot. */
static enum MHD_Result on_probe(void *cls, struct MHD_Connection *c, const char *url, const char *method,
				const char *version, const char *upload, size_t *upload_len, void **state)
{
	if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && strcmp(method, MHD_HTTP_METHOD_HEAD) != 0)
		return respond_error(c, MHD_HTTP_METHOD_NOT_ALLOWED, "%s %s: this listener answers GET of "
				     "/v2/health/live, /v2/health/ready and /metrics", method, url);
	if (strcmp(url, "/metrics") != 0 && strcmp(url, "/v2/health/live") != 0 && strcmp(url, "/v2/health/ready") != 0)
		return respond_error(c, MHD_HTTP_NOT_FOUND, "no such endpoint on the probe listener: %s (it answers "
				     "/v2/health/live, /v2/health/ready and /metrics)", url);
	return on_request(cls, c, url, method, version, upload, upload_len, state);
}

static struct MHD_Daemon *listener_start(uint32_t addr, uint16_t port, MHD_AccessHandlerCallback handler,
					 unsigned int connections, unsigned int per_ip)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = addr };

	return MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION | MHD_USE_POLL |
				MHD_USE_ERROR_LOG, port, NULL, NULL, handler, NULL,
				MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sa,
				MHD_OPTION_CONNECTION_LIMIT, connections,
				MHD_OPTION_PER_IP_CONNECTION_LIMIT, per_ip,
				MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)HTTP_TIMEOUT_S,
				MHD_OPTION_NOTIFY_COMPLETED, on_completed, NULL, MHD_OPTION_END);
}

int app_http_start(const struct app_http_config *cfg, char *err, size_t cap)
{
	char text[INET_ADDRSTRLEN];

	if (!cfg->enabled)
		return 0;
	g_daemon = listener_start(cfg->addr, cfg->port, on_request, HTTP_CONNECTIONS_MAX, HTTP_CONNECTIONS_PER_IP_MAX);
	if (g_daemon == NULL) {
		inet_ntop(AF_INET, &cfg->addr, text, sizeof(text));
		snprintf(err, cap, "the HTTP control server cannot listen on %s:%u (in use, or not this host's "
			 "address): choose another with --http ADDR:PORT, or --http off", text, cfg->port);
		return -EADDRINUSE;
	}
	if (!cfg->probes_enabled)
		return 0;
	g_probes = listener_start(cfg->probes_addr, cfg->probes_port, on_probe, HTTP_PROBE_CONNECTIONS_MAX,
				  HTTP_PROBE_CONNECTIONS_PER_IP_MAX);
	if (g_probes == NULL) {
		MHD_stop_daemon(g_daemon);
		g_daemon = NULL;
		inet_ntop(AF_INET, &cfg->probes_addr, text, sizeof(text));
		snprintf(err, cap, "the HTTP probe listener cannot listen on %s:%u (in use, or not this host's "
			 "address): choose another with --http-probes ADDR:PORT, or --http-probes off", text,
			 cfg->probes_port);
		return -EADDRINUSE;
	}
	return 0;
}

void app_http_stop(void)
{
	if (g_probes != NULL)
		MHD_stop_daemon(g_probes);
	if (g_daemon != NULL)
		MHD_stop_daemon(g_daemon);
	g_probes = NULL;
	g_daemon = NULL;
}
