/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The service's telemetry, on the telemetry thread: the batchers' counters summed over the polling
 * lcores (into /batchwire/stats, and per model), and each model's executor keys, from its engine and
 * summed over its channels' executor instances. Counters are plain integers their one writer updates;
 * a read may be a little behind, never torn (64-bit aligned stores).
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rte_telemetry.h>

#include "defs.h"

#define TEL_SUM_KEYS_MAX 32 /* distinct counter names one model's executors report */

/* The batchers' distributions, by the name telemetry (and the HTTP server's /metrics) gives them. */
static const struct {
	const char *name;
	size_t offset;
} g_hists[] = {
	{"latency_us", offsetof(struct bat_stats, latency_us)},
	{"window_us", offsetof(struct bat_stats, window_us)},
	{"queue_us", offsetof(struct bat_stats, queue_us)},
	{"compute_us", offsetof(struct bat_stats, compute_us)},
	{"rows_per_batch", offsetof(struct bat_stats, batch_rows)},
};

unsigned int app_hist_count(void)
{
	return RTE_DIM(g_hists);
}

const char *app_hist_name(unsigned int h)
{
	return g_hists[h].name;
}

static struct bw_hist *hist_of(struct bat_stats *s, unsigned int h)
{
	return (struct bw_hist *)(void *)((uint8_t *)s + g_hists[h].offset);
}

const struct bw_hist *app_hist_get(const struct bat_stats *s, unsigned int h)
{
	return (const struct bw_hist *)(const void *)((const uint8_t *)s + g_hists[h].offset);
}

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
	for (unsigned int h = 0; h < RTE_DIM(g_hists); h++)
		bw_hist_merge(hist_of(sum, h), app_hist_get(s, h));
}

/* One model's batcher counters over the polling lcores (model < 0: every model; lcore < 0: every
 * lcore). */
void app_stats_sum(int model, int lcore, struct bat_stats *sum)
{
	memset(sum, 0, sizeof(*sum));
	for (unsigned int l = 0; l < RTE_MAX_LCORE; l++) {
		const struct app_lcore *al = &app_lcores[l];
		unsigned int nb = __atomic_load_n(&al->nb_channels, __ATOMIC_ACQUIRE);

		if (lcore >= 0 && (unsigned int)lcore != l)
			continue;

		for (unsigned int c = 0; c < nb; c++) {
			if (model < 0 || (unsigned int)model == c)
				stats_add(sum, bat_queue_stats(al->channels[c].queue));
		}
	}
}

static void batch_keys_add(struct rte_tel_data *d, const struct bat_stats *sum, const char *prefix)
{
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
		rte_tel_data_add_dict_u64(dispatch, bw_dispatch_reason_name(r), sum->dispatch[r]);
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
	for (unsigned int h = 0; h < RTE_DIM(g_hists); h++) {
		static const struct {
			const char *name;
			double q;
		} quantiles[] = {{"p50", 0.5}, {"p90", 0.9}, {"p99", 0.99}, {"p999", 0.999}};
		const struct bw_hist *hist = app_hist_get(sum, h);
		struct rte_tel_data *one = rte_tel_data_alloc();

		if (one == NULL)
			return;
		rte_tel_data_start_dict(one);
		rte_tel_data_add_dict_u64(one, "count", hist->count);
		rte_tel_data_add_dict_u64(one, "sum", hist->sum);
		for (unsigned int k = 0; k < RTE_DIM(quantiles); k++)
			rte_tel_data_add_dict_u64(one, quantiles[k].name, bw_hist_quantile(hist, quantiles[k].q));
		snprintf(key, sizeof(key), "%s%s", prefix, g_hists[h].name);
		rte_tel_data_add_dict_container(d, key, one, 0);
	}
}

void app_service_telemetry(struct rte_tel_data *d)
{
	struct bat_stats sum;
	uint64_t inflight = 0;

	app_stats_sum(-1, -1, &sum);
	batch_keys_add(d, &sum, "batch_");
	for (unsigned int i = 0; app_current != NULL && i < app_current->nb_models; i++)
		inflight += bat_limiter_in_flight(app_current->models[i]->limiter);
	rte_tel_data_add_dict_u64(d, "batch_inflight", inflight);
}

/* ---- executors' counters ------------------------------------------------------------------------- */

void app_exec_stats_sum(struct app_exec_stats *sum, const struct app_exec_stats *st)
{
	sum->batches_started += st->batches_started;
	sum->batches_done += st->batches_done;
	sum->batches_failed += st->batches_failed;
	sum->queue_wait_us += st->queue_wait_us;
	sum->compute_us += st->compute_us;
	sum->busy_waits += st->busy_waits;
}

static void exec_keys_add(struct rte_tel_data *d, const struct app_exec_stats *st)
{
	rte_tel_data_add_dict_u64(d, "exec_batches_started", st->batches_started);
	rte_tel_data_add_dict_u64(d, "exec_batches_done", st->batches_done);
	rte_tel_data_add_dict_u64(d, "exec_batches_failed", st->batches_failed);
	rte_tel_data_add_dict_u64(d, "exec_queue_wait_us", st->queue_wait_us);
	rte_tel_data_add_dict_u64(d, "exec_compute_us", st->compute_us);
	rte_tel_data_add_dict_u64(d, "exec_busy_waits", st->busy_waits);
}

/* Counters of one model's executor instances, summed by name in the order first seen. */
struct tel_sum {
	unsigned int count;
	struct {
		const char *name;
		uint64_t value;
	} keys[TEL_SUM_KEYS_MAX];
};

static void tel_sum_add(void *sink, const char *name, uint64_t value)
{
	struct tel_sum *s = sink;
	unsigned int k = 0;

	while (k < s->count && strcmp(s->keys[k].name, name) != 0)
		k++;
	if (k == s->count) {
		if (s->count == TEL_SUM_KEYS_MAX)
			return; /* more names than any executor reports: the rest are left out */
		s->keys[s->count++].name = name;
	}
	s->keys[k].value += value;
}

static void channel_stats_add(const struct app_model *m, struct rte_tel_data *d)
{
	struct tel_sum sum = {0};
	bool any = false;

	for (unsigned int l = 0; l < RTE_MAX_LCORE; l++) {
		const struct app_lcore *al = &app_lcores[l];
		unsigned int nb = __atomic_load_n(&al->nb_channels, __ATOMIC_ACQUIRE);
		const struct bw_executor *ex = m->spec.id < nb ? &al->channels[m->spec.id].executor : NULL;

		if (ex != NULL && ex->ops->stats != NULL && ex->ctx != NULL) {
			ex->ops->stats(ex->ctx, tel_sum_add, &sum);
			any = true;
		}
	}
	for (unsigned int k = 0; any && k < sum.count; k++)
		rte_tel_data_add_dict_u64(d, sum.keys[k].name, sum.keys[k].value);
}

/* ---- commands ------------------------------------------------------------------------------------ */

static int models_cb(const char *cmd __rte_unused, const char *params __rte_unused, struct rte_tel_data *d)
{
	rte_tel_data_start_array(d, RTE_TEL_STRING_VAL);
	for (unsigned int i = 0; app_current != NULL && i < app_current->nb_models; i++)
		if (app_model_is_named(app_current->models[i]))
			rte_tel_data_add_array_string(d, app_current->models[i]->spec.name);
	return 0;
}

/*
 * The served version, what else the model's source holds, and the reloads. The fields a reload writes
 * are read under its lock, not waited for: while one runs, reload_running says so instead.
 */
static void versions_add(const struct app_model *m, struct rte_tel_data *d)
{
	uint32_t versions[APP_VERSIONS_MAX];
	struct rte_tel_data *list;
	int n;

	rte_tel_data_add_dict_u64(d, "version", __atomic_load_n(&m->version, __ATOMIC_ACQUIRE));
	if (app_model_is_echo(&m->cfg))
		return;
	if (m->served != NULL) {
		struct rte_tel_data *served = rte_tel_data_alloc();
		uint32_t v[APP_VERSIONS_SERVED_MAX];
		unsigned int n = app_model_versions(m, v);

		if (served != NULL) {
			rte_tel_data_start_array(served, RTE_TEL_U64_VAL);
			for (unsigned int i = 0; i < n; i++)
				rte_tel_data_add_array_u64(served, v[i]);
			if (rte_tel_data_add_dict_container(d, "versions_served", served, 0) != 0)
				rte_tel_data_free(served);
		}
	}
	if (pthread_mutex_trylock(&app_reload_mutex) != 0) {
		rte_tel_data_add_dict_u64(d, "reload_running", 1);
		return;
	}
	rte_tel_data_add_dict_string(d, "source", m->source);
	rte_tel_data_add_dict_string(d, "path", m->cfg.path);
	rte_tel_data_add_dict_u64(d, "reloads", m->reloads);
	rte_tel_data_add_dict_u64(d, "reload_failures", m->reload_failures);
	if (m->reload_last[0] != '\0') {
		char cut[RTE_TEL_MAX_STRING_LEN];

		snprintf(cut, sizeof(cut), "%.*s", (int)sizeof(cut) - 1, m->reload_last);
		rte_tel_data_add_dict_string(d, "reload_last", cut);
	}
	n = app_versions_list(m->source, versions, APP_VERSIONS_MAX);
	pthread_mutex_unlock(&app_reload_mutex);
	list = rte_tel_data_alloc();
	if (list == NULL)
		return;
	rte_tel_data_start_array(list, RTE_TEL_U64_VAL);
	for (int i = 0; i < n; i++)
		rte_tel_data_add_array_u64(list, versions[i]);
	if (rte_tel_data_add_dict_container(d, "versions_available", list, 0) != 0)
		rte_tel_data_free(list);
}

/* NAME: that model; none: every model that can be reloaded. Blocks this thread while it runs. */
static int reload_cb(const char *cmd __rte_unused, const char *params, struct rte_tel_data *d)
{
	char out[2048], *line, *save = NULL;
	struct rte_tel_data *lines;
	int ret;

	if (app_current == NULL)
		return -EINVAL;
	ret = app_models_reload(params != NULL && params[0] != '\0' ? params : NULL, out, sizeof(out));
	rte_tel_data_start_dict(d);
	rte_tel_data_add_dict_string(d, "status", ret == 0 ? "ok" : "failed");
	lines = rte_tel_data_alloc();
	if (lines == NULL)
		return 0;
	rte_tel_data_start_array(lines, RTE_TEL_STRING_VAL);
	for (line = strtok_r(out, "\n", &save); line != NULL; line = strtok_r(NULL, "\n", &save)) {
		char cut[RTE_TEL_MAX_STRING_LEN];

		snprintf(cut, sizeof(cut), "%.*s", (int)sizeof(cut) - 1, line);
		rte_tel_data_add_array_string(lines, cut);
	}
	if (rte_tel_data_add_dict_container(d, "lines", lines, 0) != 0)
		rte_tel_data_free(lines);
	return 0;
}

static int model_cb(const char *cmd __rte_unused, const char *params, struct rte_tel_data *d)
{
	const char *slash = params != NULL ? strchr(params, '/') : NULL;
	const struct rt_model *spec;
	struct app_model *m;
	struct bat_stats sum;
	unsigned long want = 0;

	if (params == NULL || app_current == NULL)
		return -EINVAL;
	spec = rt_registry_find_name(&app_current->registry, params,
				     (uint32_t)(slash != NULL ? (size_t)(slash - params) : strlen(params)));
	if (spec == NULL)
		return -EINVAL;
	if (slash != NULL) {
		char *end;

		want = strtoul(slash + 1, &end, 10);
		if (end == slash + 1 || *end != '\0' || want == 0 || want > BW_MODEL_ID_MODEL_MASK)
			return -EINVAL;
	}
	/* NAME: the version a request naming none gets; NAME/V: version V */
	m = app_model_version(app_current->models[spec->id], (uint32_t)want);
	if (m == NULL)
		return -EINVAL;
	spec = &m->spec;
	app_stats_sum((int)spec->id, -1, &sum);
	rte_tel_data_start_dict(d);
	rte_tel_data_add_dict_u64(d, "id", spec->id);
	rte_tel_data_add_dict_string(d, "kind", m->engine->kind);
	rte_tel_data_add_dict_string(d, "device", m->engine->device);
	batch_keys_add(d, &sum, "");
	rte_tel_data_add_dict_u64(d, "inflight", bat_limiter_in_flight(m->limiter));
	rte_tel_data_add_dict_u64(d, "inflight_limit_milli", (uint64_t)(bat_limiter_limit(m->limiter) * 1000));
	versions_add(m, d);
	m->engine->model_telemetry(m, d);
	if (m->engine->exec_stats != NULL) {
		struct app_exec_stats exec = {0};

		m->engine->exec_stats(m, &exec);
		exec_keys_add(d, &exec);
	}
	channel_stats_add(m, d);
	return 0;
}

/* "NAME" or "NAME,LCORE": the model, and the polling lcore when one is named (-1: all). */
static const struct rt_model *hist_params(const char *params, int *lcore)
{
	char name[RT_MODEL_NAME_MAX];
	const char *comma;
	size_t len;

	*lcore = -1;
	if (params == NULL || app_current == NULL)
		return NULL;
	comma = strchr(params, ',');
	len = comma != NULL ? (size_t)(comma - params) : strlen(params);
	if (len == 0 || len >= sizeof(name))
		return NULL;
	memcpy(name, params, len);
	name[len] = '\0';
	if (comma != NULL) {
		char *end;
		long v = strtol(comma + 1, &end, 10);

		if (*end != '\0' || end == comma + 1 || v < 0 || v >= RTE_MAX_LCORE)
			return NULL;
		*lcore = (int)v;
	}
	return rt_registry_find_name(&app_current->registry, name, (uint32_t)len);
}

/* Every bucket that holds a value, by its upper edge: what Prometheus' _bucket series are cut from. */
static int hist_cb(const char *cmd __rte_unused, const char *params, struct rte_tel_data *d)
{
	struct bat_stats sum;
	const struct rt_model *spec;
	int lcore;

	spec = hist_params(params, &lcore);
	if (spec == NULL)
		return -EINVAL;
	app_stats_sum((int)spec->id, lcore, &sum);
	rte_tel_data_start_dict(d);
	for (unsigned int h = 0; h < RTE_DIM(g_hists); h++) {
		const struct bw_hist *hist = app_hist_get(&sum, h);
		struct rte_tel_data *buckets = rte_tel_data_alloc();
		char key[64];

		if (buckets == NULL)
			return -ENOMEM;
		/* counts beside each dict of buckets, so a reader need not walk into it for them */
		snprintf(key, sizeof(key), "%s_count", g_hists[h].name);
		rte_tel_data_add_dict_u64(d, key, hist->count);
		snprintf(key, sizeof(key), "%s_sum", g_hists[h].name);
		rte_tel_data_add_dict_u64(d, key, hist->sum);
		rte_tel_data_start_dict(buckets);
		for (unsigned int i = 0; i < BW_HIST_BUCKETS; i++) {
			if (hist->buckets[i] == 0)
				continue;
			snprintf(key, sizeof(key), "%" PRIu64, bw_hist_bucket_upper(i, BW_HIST_SUB_BITS));
			rte_tel_data_add_dict_u64(buckets, key, hist->buckets[i]);
		}
		rte_tel_data_add_dict_container(d, g_hists[h].name, buckets, 0);
	}
	return 0;
}

/* Worker lcores that do not poll the port: their loops' counters (polling lcores': /batchwire/lcores). */
static int workers_cb(const char *cmd __rte_unused, const char *params __rte_unused, struct rte_tel_data *d)
{
	rte_tel_data_start_dict(d);
	for (unsigned int l = 0; l < RTE_MAX_LCORE; l++) {
		const struct plat_poll_stats *st;
		struct rte_tel_data *one;
		char key[32];

		if (!app_lcore_is_worker_only(l))
			continue;
		st = app_service_worker_stats(l);
		one = rte_tel_data_alloc();
		if (one == NULL)
			return -ENOMEM;
		rte_tel_data_start_dict(one);
		rte_tel_data_add_dict_u64(one, "poll_iterations", st->iterations);
		rte_tel_data_add_dict_u64(one, "poll_busy_iterations", st->busy_iterations);
		rte_tel_data_add_dict_u64(one, "poll_cycles", st->cycles);
		rte_tel_data_add_dict_u64(one, "poll_busy_cycles", st->busy_cycles);
		snprintf(key, sizeof(key), "lcore%u", l);
		rte_tel_data_add_dict_container(d, key, one, 0);
	}
	return 0;
}

int app_service_telemetry_register(void)
{
	int ret = rte_telemetry_register_cmd("/batchwire/models", models_cb, "Names of the models served. No parameters.");

	if (ret == 0)
		ret = rte_telemetry_register_cmd("/batchwire/model", model_cb,
						 "One model's counters: requests, batches by size, padding, waits, compute "
						 "time. Parameter: NAME, or NAME/V for its version V.");
	if (ret == 0)
		ret = rte_telemetry_register_cmd("/batchwire/reload", reload_cb,
						 "Reloads a model: the version its policy selects, beside the served one. "
						 "Parameter: NAME, or none: all.");
	if (ret == 0)
		ret = rte_telemetry_register_cmd("/batchwire/workers", workers_cb,
						 "Worker lcores that do not poll the port: iterations and TSC cycles of their "
						 "loops, busy and in all. No parameters.");
	if (ret == 0)
		ret = rte_telemetry_register_cmd("/batchwire/hist", hist_cb,
						 /* DPDK keeps at most 127 bytes of help */
						 "One model's distributions, every non-empty bucket by its upper edge. "
						 "Parameters: NAME or NAME,LCORE.");
	for (unsigned int e = 0; e < app_nb_engines && ret == 0; e++) {
		if (app_engines[e]->telemetry_register != NULL)
			ret = app_engines[e]->telemetry_register();
	}
	return ret;
}
